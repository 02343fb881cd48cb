"""User-defined derivatives: ``custom_jvp`` and ``custom_vjp`` (JAX's API).

``f = custom_jvp(fun)`` + ``f.defjvp(jvp)`` binds ``custom_jvp_call``: evaluated it runs ``fun``;
differentiated, the JVP trace runs the user's ``jvp(primals, tangents) -> (out, tangent_out)``
instead of differentiating ``fun``.

``f = custom_vjp(fun)`` + ``f.defvjp(fwd, bwd)`` binds ``custom_vjp_call``; its jvp rule runs
``fwd`` (primal outputs and residuals) and emits ``custom_lin`` on the tangents, a linear
primitive whose transpose calls ``bwd(residuals, cotangents)``. ``custom_lin`` has no impl of its
own: forward-mode differentiation of a custom_vjp function is an error, as in JAX.

Both work under ``vmap`` (their batch rules batch the function and the rules) and ``jit``.
Arguments listed in ``nondiff_argnums`` are static Python values passed first to the rules.

The function is traced to a jaxpr when it is called. When that fails because it branches on a
value in Python (``if x > 0:``) and every enclosing transform computes its primal for real
(no transform, or eager grad / jvp / vjp / linearize), it runs on the concrete values instead,
as in JAX: the primitive then holds an :class:`_EagerCall` in place of the jaxpr, and the
rules see concrete primals too.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect

from fungrad import core, tree_util
from fungrad.core import ShapedArray, get_aval
from fungrad.transforms import array_ops
from fungrad.transforms.api_util import check_callable
from fungrad.transforms.jvp import Zero, instantiate_zeros, jvp_rules, tangent_aval
from fungrad.transforms.transpose import transpose_rules
from fungrad.transforms.vmap import batch_jaxpr, batch_rules, bdim_at_front
from fungrad.transforms.vmap_api import vmap


def _resolve_args(fun, args, kwargs):
    if not kwargs:
        return args
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"{getattr(fun, '__name__', 'custom function')}: {e}") from None
    bound.apply_defaults()
    return bound.args


def _split_nondiff(args, nondiff_argnums):
    static = [args[i] for i in nondiff_argnums]
    dyn = [a for i, a in enumerate(args) if i not in nondiff_argnums]
    return static, dyn


def _merge(static, dyn, nondiff_argnums, n):
    s, d = iter(static), iter(dyn)
    return [next(s) if i in nondiff_argnums else next(d) for i in range(n)]


class SymbolicZero:
    """A zero tangent or cotangent handed to a custom rule that asked for ``symbolic_zeros``
    (``jax.custom_derivatives.SymbolicZero``): it stands for an array of zeros of ``aval``
    without computing one, so the rule can skip the work it would do with it. Its ``shape``,
    ``dtype``, ``ndim``, ... are the aval's. A rule may also return one for a zero output."""

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self):
        return "SymbolicZero"

    def __getattr__(self, name):
        if name == "aval":
            raise AttributeError(name)
        try:
            return getattr(self.aval, name)
        except AttributeError:
            raise AttributeError(f"SymbolicZero has no attribute {name}") from None

    @staticmethod
    def from_primal_value(val) -> SymbolicZero:
        """The symbolic zero tangent of primal ``val``."""
        return SymbolicZero(tangent_aval(get_aval(val)))


def zero_from_primal(val, symbolic_zeros: bool = False):
    """Zero tangents for the primal pytree ``val``: SymbolicZeros, or arrays of zeros."""

    def one(x):
        aval = tangent_aval(get_aval(x))
        return SymbolicZero(aval) if symbolic_zeros else array_ops.full(aval.shape, 0, aval.dtype)

    return tree_util.tree_map(one, val)


@dataclasses.dataclass(slots=True)
class CustomVJPPrimal:
    """A leaf of a ``custom_vjp`` fwd rule's arguments under ``defvjp(...,
    symbolic_zeros=True)``: the primal ``value`` and whether it is ``perturbed`` (being
    differentiated; False means its cotangent is never needed)."""

    value: object
    perturbed: bool


def custom_vjp_primal_tree_values(tree):
    """The fwd rule's argument ``tree`` with each CustomVJPPrimal replaced by its value."""

    def value(leaf):
        if type(leaf) is not CustomVJPPrimal:
            raise TypeError(
                f"custom_vjp_primal_tree_values: unexpected leaf type {type(leaf)}; it takes "
                "the arguments a symbolic_zeros fwd rule receives (CustomVJPPrimal leaves)"
            )
        return leaf.value

    return tree_util.tree_map(value, tree)


def _to_symbolic(t):
    """fungrad's internal Zero as the SymbolicZero a rule sees."""
    return SymbolicZero(t.aval) if type(t) is Zero else t


def _check_outputs(what, expected_tree, expected_avals, tree, leaves, fix):
    if tree != expected_tree:
        raise TypeError(
            f"{what} must produce a pytree with the structure {expected_tree}, but "
            f"produced {tree}. {fix}"
        )
    for i, (x, a) in enumerate(zip(leaves, expected_avals)):
        aval = get_aval(x)
        if aval.shape != a.shape or aval.dtype != a.dtype:
            raise TypeError(
                f"{what}: leaf {i} has shape/dtype {aval.str_short()}, expected "
                f"{a.strip_weak_type().str_short()} (to match the primal). {fix}"
            )


class _EagerCall:
    """Stands in for the ``call_jaxpr`` of a custom function that could not be traced because
    it needs concrete values: the function's flat outputs, computed once on the concrete
    inputs it was called with. ``out_avals`` and the impl (below) read them."""

    __slots__ = ("outs",)

    def __init__(self, outs):
        self.outs = outs

    @property
    def out_avals(self):
        return [get_aval(o) for o in self.outs]


def _call_impl(call_jaxpr, args):
    """The impl shared by custom_jvp_call and custom_vjp_call: run the function."""
    if type(call_jaxpr) is _EagerCall:
        return [o._value for o in call_jaxpr.outs]
    return core.eval_closed_jaxpr_impl(call_jaxpr, *args)


def _concrete_trace_types():
    from fungrad.transforms.jvp import JVPTrace
    from fungrad.transforms.partial_eval import PartialEvalTrace
    from fungrad.transforms.tape import TapeTrace

    return (core.EvalTrace, JVPTrace, TapeTrace, PartialEvalTrace)


def _concrete_values(leaves):
    """The leaves as concrete Arrays when every active transform computes its primal for real
    (see the module docstring); None when one stages or batches, or a leaf is abstract."""
    from fungrad.array import Array

    allowed = _concrete_trace_types()
    t = core.current_trace()
    while t is not None:
        if type(t) not in allowed:
            return None
        t = t.parent
    out = []
    for x in leaves:
        if isinstance(x, core.Tracer):
            v = x.to_concrete_value()
            if v is None:
                return None
            x = Array(v)
        out.append(x)
    return out


def _closure_error(name):
    return TypeError(
        f"{name}: the function closes over a value that is being differentiated. "
        "Pass that value as an explicit argument of the custom_jvp/custom_vjp "
        "function instead of capturing it in a closure."
    )


# -- custom_jvp -------------------------------------------------------------------------------


def _custom_jvp_call_impl(*args, call_jaxpr, jvp, num_consts, symbolic_zeros):
    return _call_impl(call_jaxpr, args)


def _custom_jvp_call_abstract_eval(*avals, call_jaxpr, jvp, num_consts, symbolic_zeros):
    return call_jaxpr.out_avals


custom_jvp_call_p = core.Primitive("custom_jvp_call", multiple_results=True)
custom_jvp_call_p.impl = _custom_jvp_call_impl
custom_jvp_call_p.abstract_eval = _custom_jvp_call_abstract_eval


def _custom_jvp_call_jvp(primals, tangents, *, call_jaxpr, jvp, num_consts, symbolic_zeros):
    if any(type(t) is not Zero for t in tangents[:num_consts]):
        raise _closure_error("custom_jvp")
    args, ts = primals[num_consts:], tangents[num_consts:]
    if not symbolic_zeros:
        ts = [instantiate_zeros(t) for t in ts]
    out, t_out = jvp(list(args), list(ts))
    return out, t_out


def _custom_jvp_call_batch(axis_size, args, dims, *, call_jaxpr, jvp, num_consts, symbolic_zeros):
    batched = [d is not None for d in dims]
    new_jaxpr, _ = batch_jaxpr(call_jaxpr, axis_size, batched, instantiate=True)
    vals = [bdim_at_front(x, d, axis_size) if d is not None else x for x, d in zip(args, dims)]
    example_avals = call_jaxpr.in_avals[num_consts:]

    def batched_jvp(primals, tangents):
        def in_axis(x, aval):
            return 0 if get_aval(x).ndim == aval.ndim + 1 else None

        p_axes = [in_axis(p, a) for p, a in zip(primals, example_avals)]
        t_axes = [
            None if type(t) is Zero else in_axis(t, a) for t, a in zip(tangents, example_avals)
        ]
        zero_mask = [type(t) is Zero for t in tangents]
        t_vals = [t for t in tangents if type(t) is not Zero]
        t_axes_nz = [a for a, z in zip(t_axes, zero_mask) if not z]

        def per_example(ps, tnz):
            it = iter(tnz)
            ts = [
                Zero(tangent_aval(a)) if z else next(it) for z, a in zip(zero_mask, example_avals)
            ]
            out, t_out = jvp(list(ps), ts)
            return list(out), [instantiate_zeros(t) for t in t_out]

        return vmap(per_example, in_axes=(p_axes, t_axes_nz), axis_size=axis_size)(
            list(primals), t_vals
        )

    outs = custom_jvp_call_p.bind(
        *vals,
        call_jaxpr=new_jaxpr,
        jvp=batched_jvp,
        num_consts=num_consts,
        symbolic_zeros=symbolic_zeros,
    )
    return outs, [0] * len(outs)


jvp_rules[custom_jvp_call_p] = _custom_jvp_call_jvp
batch_rules[custom_jvp_call_p] = _custom_jvp_call_batch


class _CustomFunction:
    """What custom_jvp and custom_vjp share: wrapping ``fun``, splitting off the
    ``nondiff_argnums`` arguments and tracing ``fun`` on the others."""

    def __init__(self, fun, nondiff_argnums=()):
        kind = type(self).__name__
        check_callable(fun, kind, f"decorate the function: @{kind}, or {kind}(f)")
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)

    def _trace_call(self, args, kwargs):
        """Returns ``(name, static, dyn, leaves, in_tree, closed, hoisted, out_tree, merge)``;
        ``merge(dyn_args)`` rebuilds the full argument list."""
        from fungrad.transforms.autodiff import _as_array
        from fungrad.transforms.staging import trace_body

        name = getattr(self.fun, "__name__", type(self).__name__ + " function")
        args = _resolve_args(self.fun, args, kwargs)
        static, dyn = _split_nondiff(args, self.nondiff_argnums)
        n, nondiff = len(args), self.nondiff_argnums
        leaves, in_tree = tree_util.tree_flatten(tuple(dyn))
        leaves = [_as_array(x, name) for x in leaves]

        def merge(d):
            return _merge(static, d, nondiff, n)

        try:
            closed, hoisted, out_tree = trace_body(
                lambda *d: self.fun(*merge(d)), in_tree, [get_aval(x) for x in leaves], name
            )
        except core.ConcretizationTypeError:
            concrete = _concrete_values(leaves)
            if concrete is None:
                raise
            closed, out_tree = self._run_concrete(name, concrete, in_tree, merge)
            hoisted = []
        return name, static, dyn, leaves, in_tree, closed, hoisted, out_tree, merge

    def _run_concrete(self, name, concrete, in_tree, merge):
        """Run the function on concrete values: ``(_EagerCall, out_tree)``."""
        from fungrad.transforms.autodiff import _as_array

        try:
            with core.eval_context():
                out = self.fun(*merge(tree_util.tree_unflatten(in_tree, concrete)))
        except core.UnexpectedTracerError:
            raise _closure_error(type(self).__name__) from None
        out_flat, out_tree = tree_util.tree_flatten(out)
        return _EagerCall([_as_array(o, name) for o in out_flat]), out_tree


class custom_jvp(_CustomFunction):  # noqa: N801  (JAX's name)
    """A function with a user-defined JVP rule (``jax.custom_jvp``)::

    @custom_jvp
    def f(x): ...
    @f.defjvp
    def f_jvp(primals, tangents): return f(*primals), ...
    """

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.jvp = None
        self.symbolic_zeros = False

    def defjvp(self, jvp, symbolic_zeros: bool = False):
        """Set ``jvp(*nondiff_args, primals, tangents) -> (primal_out, tangent_out)``."""
        check_callable(
            jvp,
            "custom_jvp.defjvp",
            "pass the rule jvp(primals, tangents) -> (primal_out, tangent_out)",
        )
        self.jvp = jvp
        self.symbolic_zeros = symbolic_zeros
        return jvp

    def defjvps(self, *jvps):
        """One rule per argument: ``jvp_i(g_i, primal_out, *primals)`` gives argument ``i``'s
        contribution to the output tangent (None: the output does not depend on it)."""
        if self.nondiff_argnums:
            raise TypeError("custom_jvp.defjvps cannot be used with nondiff_argnums; use defjvp")
        for i, rule in enumerate(jvps):
            if rule is not None:
                check_callable(
                    rule,
                    f"custom_jvp.defjvps (rule {i})",
                    "pass one rule jvp_i(g_i, primal_out, *primals) or None per argument",
                )

        def jvp(primals, tangents):
            out = self(*primals)
            total = None
            for rule, t in zip(jvps, tangents):
                if rule is None:
                    continue
                contrib = rule(t, out, *primals)
                total = (
                    contrib
                    if total is None
                    else tree_util.tree_map(lambda a, b: a + b, total, contrib)
                )
            if total is None:
                total = tree_util.tree_map(lambda o: o * 0, out)
            return out, total

        self.defjvp(jvp)

    def __call__(self, *args, **kwargs):
        if self.jvp is None:
            name = getattr(self.fun, "__name__", "custom_jvp function")
            raise AttributeError(f"No JVP defined for custom_jvp function {name} using defjvp.")
        from fungrad.transforms.autodiff import _as_array

        name, static, _, leaves, in_tree, closed, hoisted, out_tree, _ = self._trace_call(
            args, kwargs
        )
        user_jvp, nondiff, symbolic = self.jvp, self.nondiff_argnums, self.symbolic_zeros
        out_avals = closed.out_avals

        def flat_jvp(primals, tangents):
            ps = tree_util.tree_unflatten(in_tree, primals)
            ts = tree_util.tree_unflatten(
                in_tree,
                [_to_symbolic(t) if symbolic else instantiate_zeros(t) for t in tangents],
            )
            res = (
                user_jvp(*static, tuple(ps), tuple(ts))
                if nondiff
                else user_jvp(tuple(ps), tuple(ts))
            )
            if not (isinstance(res, (tuple, list)) and len(res) == 2):
                raise TypeError(
                    f"custom_jvp rule of {name} must return a pair (primal_out, tangent_out)"
                )
            out, t_out = res
            out_flat, otree = tree_util.tree_flatten(out)
            t_flat, ttree = tree_util.tree_flatten(t_out)
            fix = "Check the custom_jvp rule passed to defjvp."
            _check_outputs(
                f"custom_jvp rule of {name} (primal output)",
                out_tree,
                out_avals,
                otree,
                [_as_array(o, name) for o in out_flat],
                fix,
            )
            t_flat = [
                _zero_tangent_value(Zero(t.aval)) if type(t) is SymbolicZero else _as_array(t, name)
                for t in t_flat
            ]
            _check_outputs(
                f"custom_jvp rule of {name} (tangent output)",
                out_tree,
                [tangent_aval(a) for a in out_avals],
                ttree,
                t_flat,
                fix,
            )
            return [_as_array(o, name) for o in out_flat], t_flat

        outs = custom_jvp_call_p.bind(
            *hoisted,
            *leaves,
            call_jaxpr=closed,
            jvp=flat_jvp,
            num_consts=len(hoisted),
            symbolic_zeros=symbolic,
        )
        return tree_util.tree_unflatten(out_tree, outs)


def _fill_zero_cotangents(ct, primal, name):
    """A bwd rule's cotangent ``ct`` for the argument ``primal`` with its zeros made arrays: a
    None standing for a whole subtree of ``primal`` and a SymbolicZero leaf (as JAX allows).
    A ``ct`` that does not have ``primal``'s structure is returned as is, for the caller's
    structure check to report."""
    from fungrad.transforms.autodiff import _as_array

    def fill(c, p):
        if c is None:
            return tree_util.tree_map(
                lambda x: _zero_tangent_value(Zero(tangent_aval(get_aval(_as_array(x, name))))),
                p,
            )
        if type(c) is SymbolicZero:
            return _zero_tangent_value(Zero(c.aval))
        return c

    try:
        return tree_util.tree_map(fill, ct, primal, is_leaf=lambda x: x is None)
    except ValueError:
        return ct


def _zero_tangent_value(z: Zero):
    return array_ops.full(z.aval.shape, 0, z.aval.dtype)


# -- custom_vjp -------------------------------------------------------------------------------


def _custom_vjp_call_impl(*args, call_jaxpr, fwd, bwd, num_consts, out_avals):
    return _call_impl(call_jaxpr, args)


def _custom_vjp_call_abstract_eval(*avals, call_jaxpr, fwd, bwd, num_consts, out_avals):
    return call_jaxpr.out_avals


custom_vjp_call_p = core.Primitive("custom_vjp_call", multiple_results=True)
custom_vjp_call_p.impl = _custom_vjp_call_impl
custom_vjp_call_p.abstract_eval = _custom_vjp_call_abstract_eval


def _custom_lin_impl(*args, num_res, bwd, out_avals):
    raise TypeError(
        "can't apply forward-mode autodiff (jvp) to a custom_vjp function; use "
        "reverse mode (grad / vjp), or define the rule with custom_jvp"
    )


def _custom_lin_abstract_eval(*avals, num_res, bwd, out_avals):
    return list(out_avals)


custom_lin_p = core.Primitive("custom_lin", multiple_results=True)
custom_lin_p.impl = _custom_lin_impl
custom_lin_p.abstract_eval = _custom_lin_abstract_eval


def _custom_vjp_call_jvp(primals, tangents, *, call_jaxpr, fwd, bwd, num_consts, out_avals):
    if any(type(t) is not Zero for t in tangents[:num_consts]):
        raise _closure_error("custom_vjp")
    args, ts = primals[num_consts:], tangents[num_consts:]
    out, res = fwd(list(args), [type(t) is not Zero for t in ts])
    ts = [instantiate_zeros(t) for t in ts]
    t_out = custom_lin_p.bind(
        *res, *ts, num_res=len(res), bwd=bwd, out_avals=tuple(tangent_aval(a) for a in out_avals)
    )
    return out, t_out


def _custom_lin_transpose(cts, *args, num_res, bwd, out_avals):
    res = args[:num_res]
    # A Zero cotangent reaches bwd as is: flat_bwd shows it as a SymbolicZero to a rule that
    # asked for symbolic zeros and as an array of zeros otherwise.
    return [None] * num_res + list(bwd(list(res), list(cts)))


def _custom_vjp_call_batch(axis_size, args, dims, *, call_jaxpr, fwd, bwd, num_consts, out_avals):
    batched = [d is not None for d in dims]
    new_jaxpr, _ = batch_jaxpr(call_jaxpr, axis_size, batched, instantiate=True)
    vals = [bdim_at_front(x, d, axis_size) if d is not None else x for x, d in zip(args, dims)]
    arg_axes = [0 if b else None for b in batched[num_consts:]]
    res_box = []

    def batched_fwd(xs, perturbed):
        out, res = vmap(
            lambda a: tuple(fwd(list(a), perturbed)), in_axes=(arg_axes,), axis_size=axis_size
        )(list(xs))
        res_box[:] = [len(res)]
        return list(out), list(res)

    def batched_bwd(res, cts):
        # Zero cotangents stay symbolic: rebuilt per example with the unbatched aval.
        zero_avals = [
            ShapedArray(c.aval.shape[1:], c.aval.dtype) if type(c) is Zero else None for c in cts
        ]
        nonzero = [c for c in cts if type(c) is not Zero]

        def per_example(r, c):
            it = iter(c)
            full = [next(it) if a is None else Zero(a) for a in zero_avals]
            return list(bwd(list(r), full))

        ct_in = vmap(per_example, axis_size=axis_size)(list(res), nonzero)
        # Arguments that were not batched get the sum of their per-example cotangents.
        return [
            c if b or c is None else array_ops.reduce_sum(c, (0,))
            for c, b in zip(ct_in, batched[num_consts:])
        ]

    outs = custom_vjp_call_p.bind(
        *vals,
        call_jaxpr=new_jaxpr,
        fwd=batched_fwd,
        bwd=batched_bwd,
        num_consts=num_consts,
        out_avals=tuple(ShapedArray((axis_size, *a.shape), a.dtype) for a in out_avals),
    )
    return outs, [0] * len(outs)


jvp_rules[custom_vjp_call_p] = _custom_vjp_call_jvp
batch_rules[custom_vjp_call_p] = _custom_vjp_call_batch
transpose_rules[custom_lin_p] = _custom_lin_transpose


class custom_vjp(_CustomFunction):  # noqa: N801  (JAX's name)
    """A function with a user-defined VJP (``jax.custom_vjp``)::

        @custom_vjp
        def f(x): ...
        def f_fwd(x): return f(x), residuals
        def f_bwd(residuals, g): return (cotangent_of_x,)
        f.defvjp(f_fwd, f_bwd)

    ``bwd`` returns a tuple with one entry per (non-``nondiff_argnums``) argument, each a pytree
    shaped like that argument (None for a zero cotangent).
    """

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.fwd = None
        self.bwd = None
        self.symbolic_zeros = False

    def defvjp(self, fwd, bwd, symbolic_zeros: bool = False):
        """Set ``fwd(*args) -> (out, residuals)`` and ``bwd(residuals, ct) -> cts``."""
        check_callable(
            fwd,
            "custom_vjp.defvjp (fwd)",
            "pass defvjp(fwd, bwd) with fwd(*args) -> (out, residuals)",
        )
        check_callable(
            bwd,
            "custom_vjp.defvjp (bwd)",
            "pass defvjp(fwd, bwd) with "
            "bwd(residuals, cotangent) -> a tuple of cotangents, one per argument",
        )
        self.fwd, self.bwd = fwd, bwd
        self.symbolic_zeros = symbolic_zeros

    def __call__(self, *args, **kwargs):
        if self.fwd is None:
            name = getattr(self.fun, "__name__", "custom_vjp function")
            raise AttributeError(f"No VJP defined for custom_vjp function {name} using defvjp.")
        from fungrad.transforms.autodiff import _as_array

        name, static, dyn, leaves, in_tree, closed, hoisted, out_tree, merge = self._trace_call(
            args, kwargs
        )
        user_fwd, user_bwd, symbolic = self.fwd, self.bwd, self.symbolic_zeros
        out_avals = closed.out_avals
        res_tree_box = []

        def flat_fwd(xs, perturbed):
            if symbolic:
                xs = [CustomVJPPrimal(x, p) for x, p in zip(xs, perturbed)]
            res = user_fwd(*merge(tree_util.tree_unflatten(in_tree, xs)))
            if not (isinstance(res, (tuple, list)) and len(res) == 2):
                raise TypeError(
                    f"custom_vjp fwd rule of {name} must return a pair (primal_out, residuals)"
                )
            out, residuals = res
            out_flat, otree = tree_util.tree_flatten(out)
            out_flat = [_as_array(o, name) for o in out_flat]
            _check_outputs(
                f"custom_vjp fwd rule of {name} (primal output)",
                out_tree,
                out_avals,
                otree,
                out_flat,
                "fwd must return the same output as the function.",
            )
            r_flat, r_tree = tree_util.tree_flatten(residuals)
            res_tree_box[:] = [r_tree]
            return out_flat, [_as_array(r, f"{name} residual") for r in r_flat]

        def flat_bwd(res, cts):
            residuals = tree_util.tree_unflatten(res_tree_box[0], res)
            cts = [_to_symbolic(c) if symbolic else instantiate_zeros(c) for c in cts]
            ct = tree_util.tree_unflatten(out_tree, cts)
            out = (
                user_bwd(*static, residuals, ct)
                if self.nondiff_argnums
                else user_bwd(residuals, ct)
            )
            expected = tree_util.tree_structure(tuple(dyn))
            if not isinstance(out, (tuple, list)):
                raise TypeError(
                    f"custom_vjp bwd rule of {name} must return a tuple with one "
                    f"cotangent per differentiable argument, structured as "
                    f"{expected}; got a {type(out).__name__}"
                )
            out = tuple(out)
            if len(out) != len(dyn):
                raise TypeError(
                    f"custom_vjp bwd rule of {name} must return a tuple of length "
                    f"{len(dyn)} (one cotangent per differentiable argument, "
                    f"structured as {expected}); got length {len(out)}"
                )
            flat = []
            for i, (o, d) in enumerate(zip(out, dyn)):
                d_leaves, d_tree = tree_util.tree_flatten(d)
                if o is None:
                    flat += [
                        _zero_tangent_value(Zero(tangent_aval(get_aval(_as_array(x, name)))))
                        for x in d_leaves
                    ]
                    continue
                o = _fill_zero_cotangents(o, d, name)
                o_leaves, o_tree = tree_util.tree_flatten(o)
                a_leaves = [_as_array(x, name) for x in d_leaves]
                _check_outputs(
                    f"custom_vjp bwd rule of {name} (cotangent of argument {i})",
                    d_tree,
                    [tangent_aval(get_aval(x)) for x in a_leaves],
                    o_tree,
                    [_as_array(x, name) for x in o_leaves],
                    "bwd must return cotangents shaped like the primal inputs.",
                )
                flat += [_as_array(x, name) for x in o_leaves]
            return flat

        outs = custom_vjp_call_p.bind(
            *hoisted,
            *leaves,
            call_jaxpr=closed,
            fwd=flat_fwd,
            bwd=flat_bwd,
            num_consts=len(hoisted),
            out_avals=tuple(out_avals),
        )
        return tree_util.tree_unflatten(out_tree, outs)
