"""User-facing autodiff over pytrees: jvp, linearize, vjp, grad, value_and_grad.

    vjp : (a -> b) -> a -> (b, T b -o T a)

``vjp`` linearizes (partial_eval.linearize_flat: the primal runs for real, the tangent
computation is staged as a linear jaxpr), then its ``vjp_fn`` transposes that jaxpr
(transpose.backward_pass). ``grad`` is ``vjp`` fed a cotangent of 1.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fungrad import core, dtypes, tree_util
from fungrad.array import Array
from fungrad.operands import array_leaf
from fungrad.shape_dtype_struct import ShapeDtypeStruct
from fungrad.transforms import array_ops
from fungrad.transforms import jvp as jvp_mod
from fungrad.transforms.api_util import abstractify, check_callable, normalize_argnums
from fungrad.transforms.jvp import Zero
from fungrad.transforms.partial_eval import linearize_flat
from fungrad.transforms.staging import trace_to_jaxpr
from fungrad.transforms.tape import tape_vjp_flat
from fungrad.transforms.transpose import UndefPrimal, backward_pass


def _is_float0(x) -> bool:
    return type(x) is np.ndarray and x.dtype == dtypes.float0


def _as_array(x, what: str):
    """A pytree leaf as an Array or tracer (canonical dtype; Python scalars stay weak). A float0
    array (the cotangent of an integer input) stands in as a bool array of zeros: it carries no
    derivative information, and :func:`_restore_float0` turns outputs back into float0."""
    if _is_float0(x):
        return Array(np.zeros(x.shape, np.bool_))
    try:
        return array_leaf(x, what)
    except TypeError:
        raise TypeError(
            f"{what}: argument of type {type(x).__name__} is not a valid fungrad "
            "type; differentiable arguments must be arrays or Python scalars "
            "(or pytrees of them)"
        ) from None


def _argnums_tuple(fun_name, argnums, nargs):
    return normalize_argnums(fun_name, argnums, nargs)


def _split_aux(fun_name: str, out, has_aux: bool):
    if not has_aux:
        return out, None
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise TypeError(
            f"{fun_name} with has_aux=True requires the function to return a pair "
            f"(output, auxiliary_data), but it returned a {type(out).__name__}"
            + (f" of length {len(out)}" if isinstance(out, (tuple, list)) else "")
        )
    return out[0], out[1]


def _flat_fun(fun, in_tree, out_store, fun_name, has_aux):
    """Wrap ``fun`` as ``flat_fun(*leaves) -> leaves``; the output treedef (and aux) land in
    ``out_store``."""

    what = f"{fun_name} output"

    def flat_fun(*leaves):
        args = tree_util.tree_unflatten(in_tree, leaves)
        out, aux = _split_aux(fun_name, fun(*args), has_aux)
        if type(out) is Array or isinstance(out, core.Tracer):  # one array (grad's case)
            out_store["float0"] = []
            out_store["tree"] = _LEAF
            out_leaves = [out]
        else:
            out_leaves, out_tree = tree_util.tree_flatten(out)
            out_store["float0"] = [i for i, x in enumerate(out_leaves) if _is_float0(x)]
            out_leaves = [_as_array(x, what) for x in out_leaves]
            out_store["tree"] = out_tree
        if not has_aux:
            out_store["aux"] = ((), None)
            return out_leaves
        aux_leaves, aux_tree = tree_util.tree_flatten(aux)
        out_store["aux"] = (aux_leaves, aux_tree)
        return out_leaves + aux_leaves

    return flat_fun


_LEAF = tree_util.tree_structure(0)


def _restore_float0(store, leaves) -> list:
    """Output leaves with the function's float0 outputs (and their tangents) back as float0."""
    leaves = list(leaves)
    for i in store["float0"]:
        leaves[i] = np.zeros(core.get_aval(leaves[i]).shape, dtypes.float0)
    return leaves


def _unwrap_aux(trace_unpack, aux_leaves):
    return [trace_unpack(a)[0] if isinstance(a, core.Tracer) else a for a in aux_leaves]


# -- jvp / linearize ---------------------------------------------------------------------------


def jvp(fun: Callable, primals: Any, tangents: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """Forward mode: ``(fun(*primals), d fun(primals)[tangents])`` (plus aux with has_aux)."""
    check_callable(fun, "jvp", "call jvp(f, primals, tangents) with the function f first")
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError(
            "jvp: primals and tangents must be tuples or lists of arguments, got "
            f"{type(primals).__name__} and {type(tangents).__name__}"
        )
    if len(primals) != len(tangents):
        raise TypeError(f"jvp: {len(primals)} primal arguments but {len(tangents)} tangents")
    flat_p, in_tree = tree_util.tree_flatten(tuple(primals))
    flat_t, t_tree = tree_util.tree_flatten(tuple(tangents))
    if in_tree != t_tree:
        raise TypeError(
            f"jvp: primal and tangent arguments must have the same tree structure; "
            f"got {in_tree} and {t_tree}"
        )
    flat_p = [_as_array(p, "jvp") for p in flat_p]
    flat_t = [_as_array(t, "jvp tangent") for t in flat_t]
    tangents_in = []
    for p, t in zip(flat_p, flat_t):
        # A floating or complex primal takes a tangent of its own dtype (a complex primal
        # moves in complex directions); integer and bool primals have no tangent space.
        if p.shape != t.shape or (dtypes.is_inexact(p.dtype) and p.dtype != t.dtype):
            raise TypeError(
                f"jvp: primal and tangent arguments must have equal shapes and "
                f"dtypes; got primal {p.aval.str_short()} and tangent "
                f"{t.aval.str_short()}"
            )
        tangents_in.append(
            t if dtypes.is_inexact(p.dtype) else jvp_mod.Zero(jvp_mod.tangent_aval(p.aval))
        )
    store: dict = {}
    flat_fun = _flat_fun(fun, in_tree, store, "jvp", has_aux)
    outs_p, outs_t = jvp_mod.jvp_flat(flat_fun, flat_p, tangents_in)
    n_aux = len(store["aux"][0])
    n_out = len(outs_p) - n_aux
    out_tree = store["tree"]
    primal_out = tree_util.tree_unflatten(out_tree, _restore_float0(store, outs_p[:n_out]))
    tangent_out = tree_util.tree_unflatten(
        out_tree, _restore_float0(store, [jvp_mod.instantiate_zeros(t) for t in outs_t[:n_out]])
    )
    if has_aux:
        aux = tree_util.tree_unflatten(store["aux"][1], outs_p[n_out:])
        return primal_out, tangent_out, aux
    return primal_out, tangent_out


def linearize(fun: Callable, *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """``(fun(*primals), f_jvp)`` where ``f_jvp(*tangents)`` evaluates the staged linear map."""
    check_callable(fun, "linearize", "call linearize(f, *primals) with the function f first")
    flat_p, in_tree = tree_util.tree_flatten(primals)
    flat_p = [_as_array(p, "linearize") for p in flat_p]
    store: dict = {}
    flat_fun = _flat_fun(fun, in_tree, store, "linearize", has_aux)
    outs_p, linear, out_zero = linearize_flat(flat_fun, flat_p)
    n_aux = len(store["aux"][0])
    n_out = len(outs_p) - n_aux
    out_tree = store["tree"]
    out_avals = [jvp_mod.tangent_aval(core.get_aval(p)) for p in outs_p[:n_out]]

    def f_jvp(*tangents):
        flat_t, t_tree = tree_util.tree_flatten(tangents)
        if t_tree != in_tree:
            raise TypeError(
                f"linearize: the linearized function takes tangents structured as "
                f"{in_tree}, got {t_tree}"
            )
        res = iter(
            core.eval_jaxpr(linear.jaxpr, linear.consts, *[_as_array(t, "f_jvp") for t in flat_t])
        )
        outs = [
            jvp_mod.zeros_like_aval(a) if z else next(res)
            for a, z in zip(out_avals, out_zero[:n_out])
        ]
        return tree_util.tree_unflatten(out_tree, outs)

    primal_out = tree_util.tree_unflatten(out_tree, outs_p[:n_out])
    if has_aux:
        return primal_out, f_jvp, tree_util.tree_unflatten(store["aux"][1], outs_p[n_out:])
    return primal_out, f_jvp


# -- vjp / grad ----------------------------------------------------------------------------------


def _vjp_flat(flat_fun, flat_p):
    outs_p, linear, out_zero = linearize_flat(flat_fun, flat_p)
    in_avals = [core.get_aval(p) for p in flat_p]

    def vjp_flat(cts):
        nonzero = [ct for ct, z in zip(cts, out_zero) if not z]
        args = [UndefPrimal(v.aval) for v in linear.jaxpr.invars]
        cts_in = backward_pass(linear.jaxpr, linear.consts, args, nonzero)
        return [
            _zero_cotangent(a)
            if type(ct) is jvp_mod.Zero or not dtypes.is_inexact(a.dtype)
            else _with_weak_type(ct, a)
            for ct, a in zip(cts_in, in_avals)
        ]

    return outs_p, vjp_flat


def _with_weak_type(ct, aval):
    """``ct`` weakly typed when its primal is (JAX: a cotangent has its primal's aval, so
    ``grad(f)(1.)`` is weak and ``+ float16`` stays float16), else as it is."""
    if aval.weak_type and not core.get_aval(ct).weak_type and ct.dtype == aval.dtype:
        return array_ops.convert_element_type(ct, aval.dtype, weak_type=True)
    return ct


def _tape_cotangents(cts, primals) -> list:
    """The numpy cotangents (None for none) that tape.tape_vjp_flat's pullback gives,
    as the cotangents :func:`_vjp_flat`'s pullback gives for ``primals``."""
    out = []
    for ct, p in zip(cts, primals):
        aval = p.aval
        out.append(
            _zero_cotangent(aval)
            if ct is None or not dtypes.is_inexact(aval.dtype)
            else Array.from_impl(ct, aval)
        )
    return out


def _zero_cotangent(aval):
    if not dtypes.is_inexact(aval.dtype):
        # JAX's float0: integer and bool inputs have a trivial cotangent space.
        return np.zeros(aval.shape, dtype=dtypes.float0)
    return jvp_mod.zeros_like_aval(aval.strip_weak_type())


def vjp(fun: Callable, *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """Reverse mode: ``(fun(*primals), vjp_fn)`` where ``vjp_fn(ct)`` returns one cotangent per
    primal (a tuple), each shaped like its primal."""
    check_callable(fun, "vjp", "call vjp(f, *primals) with the function f first")
    flat_p, in_tree = tree_util.tree_flatten(primals)
    flat_p = [_as_array(p, "vjp") for p in flat_p]
    store: dict = {}
    flat_fun = _flat_fun(fun, in_tree, store, "vjp", has_aux)
    outs_p, vjp_flat = _vjp_flat(flat_fun, flat_p)
    n_aux = len(store["aux"][0])
    n_out = len(outs_p) - n_aux
    out_tree = store["tree"]
    out_avals = [core.get_aval(p) for p in outs_p[:n_out]]

    def vjp_fn(ct):
        flat_ct, ct_tree = tree_util.tree_flatten(ct)
        if ct_tree != out_tree:
            raise TypeError(
                f"vjp_fn: the cotangent must have the structure of the function's "
                f"output, {out_tree}; got {ct_tree}"
            )
        cts = []
        for c, a in zip(flat_ct, out_avals):
            c = _as_array(c, "vjp_fn")
            if c.shape != a.shape:
                raise ValueError(
                    f"vjp_fn: cotangent of shape {c.shape} does not match the "
                    f"output's shape {a.shape}"
                )
            if dtypes.is_inexact(c.dtype) and dtypes.is_complex(c.dtype) != dtypes.is_complex(
                a.dtype
            ):  # JAX's ValueError: a complex output needs a complex cotangent, and back
                raise ValueError(
                    f"vjp_fn: unexpected cotangent type {c.aval.str_short()}: expected "
                    f"{jvp_mod.tangent_aval(a).str_short()} because the corresponding "
                    f"output of the differentiated function has type {a.str_short()}"
                )
            cts.append(c)
        return tree_util.tree_unflatten(in_tree, vjp_flat(cts))

    primal_out = tree_util.tree_unflatten(out_tree, _restore_float0(store, outs_p[:n_out]))
    if has_aux:
        return primal_out, vjp_fn, tree_util.tree_unflatten(store["aux"][1], outs_p[n_out:])
    return primal_out, vjp_fn


def _check_input_dtype_revderiv(name: str, holomorphic: bool, allow_int: bool, x) -> None:
    """JAX's input checks of reverse-mode derivatives (grad, jacrev): floating and complex
    inputs (complex only with ``holomorphic=True``); integers and bools with ``allow_int``."""
    dt = x.dtype
    if holomorphic and not dtypes.is_complex(dt):
        raise TypeError(
            f"{name} with holomorphic=True requires inputs with complex dtype, but got {dt.name}."
        )
    if not dtypes.is_inexact(dt) and not allow_int:
        raise TypeError(
            f"{name} requires real- or complex-valued inputs (input dtype that is a sub-dtype "
            f"of np.inexact), but got {dt.name}. If you want to use Boolean- or "
            "integer-valued inputs, use vjp or set allow_int to True."
        )


def _check_output_dtype_revderiv(name: str, holomorphic: bool, x) -> None:
    """JAX's output checks of reverse-mode derivatives: a real output, or a complex one with
    ``holomorphic=True`` (the derivative of a complex output is not one array otherwise)."""
    dt = x.dtype
    if holomorphic:
        if not dtypes.is_complex(dt):
            raise TypeError(
                f"{name} with holomorphic=True requires outputs with complex dtype, but got "
                f"{dt.name}."
            )
    elif dtypes.is_complex(dt):
        raise TypeError(
            f"{name} requires real-valued outputs (output dtype that is a sub-dtype of "
            f"np.floating), but got {dt.name}. For holomorphic differentiation, pass "
            "holomorphic=True. For differentiation of non-holomorphic functions involving "
            "complex outputs, use fungrad.vjp directly."
        )


def value_and_grad(
    fun: Callable,
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    holomorphic: bool = False,
    allow_int: bool = False,
    reduce_axes=(),
) -> Callable[..., tuple[Any, Any]]:
    """``fun``'s value and its gradient with respect to the ``argnums`` arguments.

    Complex numbers as JAX: for a real-valued ``fun`` of complex ``z = x + iy`` the gradient
    is ``df/dx - i df/dy`` (the cotangent of the bilinear transpose: ``grad(abs(z)**2)`` is
    ``2 * conj(z)``); with ``holomorphic=True`` (complex inputs and output) it is the complex
    derivative ``f'(z)``. ``reduce_axes`` is JAX's removed option: only ``()`` is accepted."""
    check_callable(
        fun, "value_and_grad", "pass the function to differentiate: value_and_grad(f)(*args)"
    )
    if reduce_axes:
        raise TypeError("value_and_grad: reduce_axes is not supported (JAX removed it too)")
    name = getattr(fun, "__name__", "fun")
    what = f"grad({name})"
    nums_by_nargs: dict[int, tuple[int, ...]] = {}

    @functools.wraps(fun)
    def value_and_grad_f(*args, **kwargs):
        nums = nums_by_nargs.get(len(args))
        if nums is None:
            nums = nums_by_nargs[len(args)] = _argnums_tuple("grad", argnums, len(args))
        diff_args = tuple([args[i] for i in nums])
        flat_d, d_tree = tree_util.tree_flatten(diff_args)
        flat_d = [_as_array(x, what) for x in flat_d]
        for x in flat_d:
            _check_input_dtype_revderiv("grad", holomorphic, allow_int, x)

        def partial_fun(*d):
            full = list(args)
            for i, a in zip(nums, d):
                full[i] = a
            return fun(*full, **kwargs)

        store: dict = {}
        flat_fun = _flat_fun(partial_fun, d_tree, store, what, has_aux)
        # Eagerly, the pullback runs once, right away, on concrete values: reverse mode on a
        # tape (tape.tape_vjp_flat), without a jaxpr of the whole function.
        eager = type(core.current_trace()) is core.EvalTrace
        if eager:
            outs_p, tape_vjp = tape_vjp_flat(flat_fun, flat_d)
        else:
            outs_p, vjp_flat = _vjp_flat(flat_fun, flat_d)
        n_aux = len(store["aux"][0])
        if len(outs_p) - n_aux != 1 or store["tree"].num_nodes != 1:
            raise TypeError(
                f"Gradient only defined for scalar-output functions; grad({name}) "
                f"returned a pytree with {len(outs_p) - n_aux} leaves "
                f"({store['tree']}). Use jacrev/jacobian or vjp for non-scalar "
                "outputs."
            )
        out = outs_p[0]
        if out.shape != ():
            raise TypeError(
                f"Gradient only defined for scalar-output functions. Output had shape: {out.shape}"
            )
        _check_output_dtype_revderiv("grad", holomorphic, out)
        if not dtypes.is_inexact(out.dtype):
            raise TypeError(
                f"grad requires real-valued outputs (output dtype that is a "
                f"sub-dtype of np.floating), but got {out.dtype.name}. For differentiation "
                "of functions with integer outputs, use fungrad.vjp directly."
            )
        one = out.dtype.type(1)
        g = tree_util.tree_unflatten(
            d_tree, _tape_cotangents(tape_vjp([one]), flat_d) if eager else vjp_flat([Array(one)])
        )
        g = g[0] if isinstance(argnums, int) else g
        if has_aux:
            aux = tree_util.tree_unflatten(store["aux"][1], outs_p[1:])
            return (out, aux), g
        return out, g

    return value_and_grad_f


def grad(
    fun: Callable,
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    holomorphic: bool = False,
    allow_int: bool = False,
    reduce_axes=(),
) -> Callable[..., Any]:
    """The gradient of scalar-valued ``fun`` with respect to its ``argnums`` arguments
    (complex inputs, ``holomorphic`` and ``reduce_axes``: see :func:`value_and_grad`)."""
    check_callable(fun, "grad", "pass the function to differentiate: grad(f)(*args)")
    vg = value_and_grad(fun, argnums, has_aux, holomorphic, allow_int, reduce_axes)

    @functools.wraps(fun)
    def grad_f(*args, **kwargs):
        (value, g) = vg(*args, **kwargs)
        if has_aux:
            return g, value[1]
        return g

    return grad_f


# -- jacobians -----------------------------------------------------------------------------------


def _std_basis(leaves):
    """Rows of the identity over all leaves' elements: one (N, *leaf.shape) array per leaf."""
    sizes = [int(np.prod(x.shape, dtype=np.int64)) for x in leaves]
    n = sum(sizes)
    dtype = dtypes.result_type(*[x.dtype for x in leaves]) if leaves else np.float32
    eye = array_ops.eye(n, dtype=dtype)
    out, start = [], 0
    for x, s in zip(leaves, sizes):
        block = eye[:, start : start + s].astype(x.dtype)
        out.append(block.reshape((n,) + tuple(x.shape)))
        start += s
    return out


def _slice_basis(x, axis: int, start: int, size: int):
    """``x[..., start:start+size, ...]`` along ``axis``."""
    idx = [slice(None)] * core.get_aval(x).ndim
    idx[axis] = slice(start, start + size)
    return x[tuple(idx)]


def _size(x) -> int:
    return int(np.prod(x.shape, dtype=np.int64))


def _check_input_dtype_jacfwd(holomorphic: bool, leaves) -> None:
    """JAX's jacfwd inputs: real floating ones, or complex ones with ``holomorphic=True`` (a
    real basis cannot span a complex input's directions)."""
    for x in leaves:
        dt = x.dtype
        if holomorphic and not dtypes.is_complex(dt):
            raise TypeError(
                "jacfwd with holomorphic=True requires inputs with complex dtype, but got "
                f"{dt.name}."
            )
        if not holomorphic and not dtypes.is_float(dt):
            raise TypeError(
                "jacfwd requires real-valued inputs (input dtype that is a sub-dtype of "
                f"np.floating), but got {dt.name}. For holomorphic differentiation, pass "
                "holomorphic=True. For differentiation of non-holomorphic functions involving "
                "complex inputs or integer inputs, use fungrad.jvp directly."
            )


def _check_output_dtype_jacfwd(holomorphic: bool, leaves) -> None:
    if holomorphic:
        for y in leaves:
            if not dtypes.is_complex(core.get_aval(y).dtype):
                raise TypeError(
                    "jacfwd with holomorphic=True requires outputs with complex dtype, but got "
                    f"{core.get_aval(y).dtype.name}."
                )


def jacrev(
    fun: Callable,
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    holomorphic: bool = False,
    allow_int: bool = False,
) -> Callable[..., Any]:
    """The Jacobian of ``fun`` by reverse mode (a vmap of vjps over the output's basis).
    Result: a pytree shaped like the output, whose leaves are pytrees like the argnums
    arguments, each block of shape ``out.shape + in.shape``. Inputs may be complex (for real
    outputs, each row is :func:`grad`'s convention); complex outputs need
    ``holomorphic=True`` (complex inputs too), which gives the complex derivative."""
    from fungrad.transforms.vmap_api import vmap

    check_callable(fun, "jacrev", "pass the function to differentiate: jacrev(f)(*args)")

    @functools.wraps(fun)
    def jacfun(*args, **kwargs):
        nums = _argnums_tuple("jacrev", argnums, len(args))
        dyn = tuple(args[i] for i in nums)
        for x in tree_util.tree_leaves(dyn):
            _check_input_dtype_revderiv("jacrev", holomorphic, allow_int, _as_array(x, "jacrev"))

        def f_partial(*d):
            full = list(args)
            for i, a in zip(nums, d):
                full[i] = a
            return fun(*full, **kwargs)

        res = vjp(f_partial, *dyn, has_aux=has_aux)
        y, pullback = res[0], res[1]
        flat_y, y_tree = tree_util.tree_flatten(y)
        flat_in, in_tree = tree_util.tree_flatten(dyn)
        flat_in = [_as_array(x, "jacrev") for x in flat_in]
        for y in flat_y:
            _check_output_dtype_revderiv("jacrev", holomorphic, core.get_aval(y))
        basis = _std_basis(flat_y)
        cts = vmap(lambda *b: tree_util.tree_leaves(pullback(tree_util.tree_unflatten(y_tree, b))))(
            *basis
        )
        # cts[j] has shape (N_out, *x_j.shape): rows of output leaf i are one basis slice.
        blocks, start = [], 0
        for y_i in flat_y:
            s = _size(y_i)
            blocks.append(
                [
                    _slice_basis(c, 0, start, s).reshape(tuple(y_i.shape) + tuple(x.shape))
                    for c, x in zip(cts, flat_in)
                ]
            )
            start += s
        jac = _assemble(blocks, y_tree, in_tree, isinstance(argnums, int))
        return (jac, res[2]) if has_aux else jac

    return jacfun


def _assemble(blocks, y_tree, in_tree, single_arg: bool):
    per_out = []
    for row in blocks:
        inner = tree_util.tree_unflatten(in_tree, row)
        per_out.append(inner[0] if single_arg else inner)
    return tree_util.tree_unflatten(y_tree, per_out)


def jacfwd(
    fun: Callable,
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    holomorphic: bool = False,
) -> Callable[..., Any]:
    """The Jacobian of ``fun`` by forward mode (a vmap of jvps over the input's basis); same
    layout as :func:`jacrev`. Complex inputs need ``holomorphic=True`` (and complex outputs),
    which gives the complex derivative; real inputs may have complex outputs."""
    from fungrad.transforms.vmap_api import vmap

    check_callable(fun, "jacfwd", "pass the function to differentiate: jacfwd(f)(*args)")

    @functools.wraps(fun)
    def jacfun(*args, **kwargs):
        nums = _argnums_tuple("jacfwd", argnums, len(args))
        dyn = tuple(args[i] for i in nums)
        flat_in, in_tree = tree_util.tree_flatten(dyn)
        flat_in = [_as_array(x, "jacfwd") for x in flat_in]
        _check_input_dtype_jacfwd(holomorphic, flat_in)

        def f_partial(*d):
            full = list(args)
            for i, a in zip(nums, d):
                full[i] = a
            return fun(*full, **kwargs)

        dyn_arrays = tree_util.tree_unflatten(in_tree, flat_in)
        out_store = []

        def push(*basis_leaves):
            tangents = tree_util.tree_unflatten(in_tree, basis_leaves)
            res = jvp(f_partial, tuple(dyn_arrays), tuple(tangents), has_aux=has_aux)
            y_leaves, y_tree = tree_util.tree_flatten(res[0])
            _check_output_dtype_jacfwd(holomorphic, y_leaves)
            out_store.append((y_leaves, y_tree, res[2] if has_aux else None))
            return tree_util.tree_leaves(res[1])

        basis = _std_basis(flat_in)
        tangents_out = vmap(push, out_axes=-1)(*basis)
        _, y_tree, aux = out_store[-1]
        # tangents_out[i] has shape (*y_i.shape, N_in): columns of input leaf j are one slice.
        rows = []
        for t in tangents_out:
            y_shape = tuple(core.get_aval(t).shape[:-1])
            row, start = [], 0
            for x in flat_in:
                s = _size(x)
                row.append(
                    _slice_basis(t, -1 % core.get_aval(t).ndim, start, s).reshape(
                        y_shape + tuple(x.shape)
                    )
                )
                start += s
            rows.append(row)
        jac = _assemble(rows, y_tree, in_tree, isinstance(argnums, int))
        if has_aux:
            return jac, aux
        return jac

    return jacfun


def hessian(
    fun: Callable,
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    holomorphic: bool = False,
) -> Callable[..., Any]:
    """The Hessian of scalar ``fun``: ``jacfwd(jacrev(fun))`` (``holomorphic`` passed to both:
    the complex second derivative of a holomorphic ``fun``)."""
    check_callable(fun, "hessian", "pass the function to differentiate: hessian(f)(*args)")
    return jacfwd(
        jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic),
        argnums,
        has_aux=has_aux,
        holomorphic=holomorphic,
    )


# -- transposing linear functions ---------------------------------------------------------------


def linear_transpose(fun, *primals, reduce_axes=()):
    """The transpose of the linear function ``fun`` (``jax.linear_transpose``): ``primals``
    (arrays or ShapeDtypeStructs) give the input shapes and dtypes only; the result maps output
    cotangents (a pytree like ``fun``'s output) to the tuple of input cotangents.

    ``fun`` must be linear in its inputs: a nonlinear operation on them is a TypeError when the
    transpose is called. Example: ``linear_transpose(lambda x: 2 * x, 1.0)(3.0) == (6.0,)``.
    """
    check_callable(fun, "linear_transpose", "pass the linear function: linear_transpose(f, x)")
    if reduce_axes:
        raise ValueError(
            "linear_transpose: reduce_axes is not supported (it was removed from "
            "JAX's API); pass reduce_axes=()"
        )
    flat, in_tree = tree_util.tree_flatten(primals)
    avals = [
        x.aval if isinstance(x, ShapeDtypeStruct) else abstractify(x, "linear_transpose")
        for x in flat
    ]
    for a in avals:
        if not dtypes.is_inexact(a.dtype):
            raise TypeError(
                f"linear_transpose: inputs must be floating point or complex, got {a.str_short()}"
            )
    out_tree = []

    def flat_fun(*xs):
        out = fun(*tree_util.tree_unflatten(in_tree, xs))
        leaves, tree = tree_util.tree_flatten(out)
        out_tree.append(tree)
        return leaves

    closed = trace_to_jaxpr(flat_fun, [a.strip_weak_type() for a in avals])

    def transposed(*out_cts):
        ct_flat, ct_tree = tree_util.tree_flatten(out_cts[0] if len(out_cts) == 1 else out_cts)
        if ct_tree != out_tree[0]:
            raise TypeError(
                f"linear_transpose: cotangent structure {ct_tree} does not match "
                f"the function's output structure {out_tree[0]}"
            )
        cts = [
            Array(np.asarray(c, dtype=a.dtype)) if not isinstance(c, (Array, core.Tracer)) else c
            for c, a in zip(ct_flat, closed.out_avals)
        ]
        for c, a in zip(cts, closed.out_avals):  # JAX's TypeError for a cotangent type
            if tuple(c.shape) != tuple(a.shape) or c.dtype != a.dtype:
                raise TypeError(
                    f"linear_transpose: cotangent type does not match the "
                    f"function's output: expected {a.str_short()}, got "
                    f"{core.get_aval(c).str_short()}"
                )
        outs = backward_pass(
            closed.jaxpr, closed.consts, [UndefPrimal(a.strip_weak_type()) for a in avals], cts
        )
        outs = [
            Array(np.zeros(a.shape, a.dtype)) if type(o) is Zero else o for o, a in zip(outs, avals)
        ]
        return tuple(tree_util.tree_unflatten(in_tree, outs))

    return transposed
