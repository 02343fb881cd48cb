"""while_loop, fori_loop, scan and map: the ``while`` and ``scan`` primitives with their rules."""

from __future__ import annotations

import inspect
import operator

import numpy as np

from fungrad import core, dtypes, tree_util
from fungrad.array import Array
from fungrad.core import ShapedArray
from fungrad.lax.control_flow.common import (
    avals_str,
    check_same_avals,
    check_same_outputs,
    eval_closed,
)
from fungrad.lax.control_flow.loop_invariants import hoist_loop_invariants
from fungrad.lax.control_flow.narrow_products import narrow_sliced_products
from fungrad.lax.control_flow.scan_residuals import (
    known_scan_residuals,
    recompute_cheap_residuals,
)
from fungrad.lax.utils import operand, standard_primitive
from fungrad.lowering import control_flow as control_flow_lowering
from fungrad.lowering import kernel
from fungrad.transforms.jvp import Zero, instantiate_zeros, jvp_jaxpr, jvp_rules, tangent_aval
from fungrad.transforms.partial_eval import partial_eval_jaxpr, partial_eval_rules
from fungrad.transforms.staging import trace_body
from fungrad.transforms.transpose import (
    UndefPrimal,
    backward_pass,
    is_undefined_primal,
    transpose_rules,
)
from fungrad.transforms.vmap import batch_jaxpr, batch_rules, bdim_at_front, moveaxis

# -- while_loop / fori_loop ---------------------------------------------------------------------


def _while_impl(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cconsts = [Array(a) for a in args[:cond_nconsts]]
    bconsts = [Array(a) for a in args[cond_nconsts : cond_nconsts + body_nconsts]]
    carry = [Array(a) for a in args[cond_nconsts + body_nconsts :]]
    while bool(eval_closed(cond_jaxpr, *cconsts, *carry)[0]):
        carry = eval_closed(body_jaxpr, *bconsts, *carry)
    return [np.asarray(c._value)[()] for c in carry]


def _while_abstract_eval(*avals, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    carry = avals[cond_nconsts + body_nconsts :]
    check_same_avals(
        "while_loop body_fun output",
        carry,
        body_jaxpr.out_avals,
        "body_fun must return a value with the same structure, shapes and dtypes as init_val.",
    )
    return list(carry)


while_p = standard_primitive("while", _while_impl, _while_abstract_eval, multiple_results=True)


def _promote_weak_carries(flat, avals, out_avals):
    """JAX's rule for weakly typed initial carries (Python scalars in ``init``): where the body
    returns another type for one, the carry starts as the promotion of both, strongly typed
    (``0`` carried through ``c + 1.5`` is a float32 carry, ``0.0`` carried through
    ``c + float32(1)`` a strong float32 one). Returns ``(flat, avals, changed)``."""
    from fungrad import lax

    new_flat, new_avals = [], []
    for x, a, b in zip(flat, avals, out_avals):
        if a.weak_type and (a.strip_weak_type() != b.strip_weak_type() or not b.weak_type):
            dt, _ = dtypes.promote_types((a.dtype, True), (b.dtype, b.weak_type))
            x = lax.convert_element_type(x, dt, False)
            a = core.get_aval(x)
        new_flat.append(x)
        new_avals.append(a)
    return new_flat, new_avals, new_avals != list(avals)


def _param_name(fun, index: int, default: str) -> str:
    """The name of ``fun``'s positional parameter ``index`` (to name carries as the user does),
    or ``default``."""
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return default
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if index < len(params) and params[index].kind in kinds:
        return params[index].name
    return default


class _CarryCheck:
    """Compares a loop's initial carry with the carry its body returns: the same pytree
    structure, then leaf by leaf the same shapes and dtypes (after weak carries are promoted).
    ``fun`` is the user's body, named ``label`` in messages; ``init_label`` names the initial
    value; the carry's leaves are named from ``fun``'s parameter ``param`` (``c['w']``).
    ``part`` picks the user's carry out of the loop's (fori_loop carries its index too):
    ``(child of the carry tuple, first leaf, number of leaves after it)`` or None."""

    def __init__(self, loop: str, fun, label: str, init_label: str, param: int, part=None):
        self.loop, self.fun, self.label, self.init_label = loop, fun, label, init_label
        self.param, self.part = param, part

    def _select(self, tree, avals):
        if self.part is None:
            return tree, list(avals)
        child, first, after = self.part
        return tree.children[child], list(avals)[first : len(avals) - after]

    def _check(self, init, out):
        (i_tree, i_avals), (o_tree, o_avals) = self._select(*init), self._select(*out)
        if i_tree == o_tree and all(
            a.strip_weak_type() == b.strip_weak_type() for a, b in zip(i_avals, o_avals)
        ):
            return  # (the usual case: no message, so no signature to inspect)
        fix = (
            f"Revise {self.label} so that the carry it returns has the pytree structure, "
            f"shapes and dtypes of {self.init_label}."
        )
        check_same_outputs(
            f"{self.loop}: {self.init_label} and the carry {self.label} returns",
            (self.init_label, None, i_tree, i_avals),
            (self.label, self.fun, o_tree, o_avals),
            fix,
            root=_param_name(self.fun, self.param, "carry"),
            verbs=("holds", "returns"),
            must="must have",
            types="types",
        )

    def structure(self, init_tree, out_tree):
        """Check the structures only (types are compared once weak carries are promoted)."""
        self._check((init_tree, []), (out_tree, []))

    def types(self, tree, init_avals, out_avals):
        self._check((tree, init_avals), (tree, out_avals))


def _check_callable(loop: str, label: str, fun, call: str) -> None:
    if not callable(fun):
        raise TypeError(
            f"{loop}: {label} must be callable, got {fun!r:.40} (of type "
            f"{type(fun).__name__}); call {call}"
        )


def while_loop(cond_fun, body_fun, init_val, max_steps=None):
    """Repeat ``val = body_fun(val)`` while ``cond_fun(val)``; returns the final ``val``.

    Differentiable in forward mode and batchable. Reverse mode works for carries the body
    passes through unchanged (their tangents are loop-invariant, as JAX's forwarding makes
    them); a carried tangent needs a bound on the trip count:
    with ``max_steps=N`` (a fungrad extension) the loop runs as a scan of ``N`` steps that stop
    updating ``val`` once ``cond_fun`` is false, so it is reverse-differentiable; the result is
    the same as without the bound whenever the loop finishes within ``N`` iterations. (The body
    is evaluated on every step, also after the loop is done.)
    """
    call = "while_loop(cond_fun, body_fun, init_val)"
    _check_callable("while_loop", "cond_fun", cond_fun, call)
    _check_callable("while_loop", "body_fun", body_fun, call)
    check = _CarryCheck("while_loop", body_fun, "body_fun", "init_val", 0)
    if max_steps is not None:
        return _bounded_while(cond_fun, body_fun, init_val, operator.index(max_steps), check)
    return _while(cond_fun, body_fun, init_val, check)


def _while(cond_fun, body_fun, init_val, check: _CarryCheck):
    flat, in_tree = tree_util.tree_flatten(init_val)
    arg_tree = tree_util.tree_structure((init_val,))  # the bodies take the carry as one argument
    flat = [operand(x, "while_loop init_val") for x in flat]
    avals = [core.get_aval(x) for x in flat]
    body, bconsts, out_tree = trace_body(body_fun, arg_tree, avals, "while_loop body_fun")
    check.structure(in_tree, out_tree)
    flat, avals, changed = _promote_weak_carries(flat, avals, body.out_avals)
    if changed:
        body, bconsts, _ = trace_body(body_fun, arg_tree, avals, "while_loop body_fun")
    check.types(in_tree, avals, body.out_avals)
    cond, cconsts, _ = trace_body(cond_fun, arg_tree, avals, "while_loop cond_fun")
    (pred,) = cond.out_avals if len(cond.out_avals) == 1 else (None,)
    if pred is None or pred.shape != () or pred.dtype != np.bool_:
        got = avals_str(cond.out_avals)
        raise TypeError(f"while_loop: cond_fun must return a boolean scalar, got {got}")
    outs = while_p.bind(
        *cconsts,
        *bconsts,
        *flat,
        cond_jaxpr=cond,
        body_jaxpr=body,
        cond_nconsts=len(cconsts),
        body_nconsts=len(bconsts),
    )
    return tree_util.tree_unflatten(in_tree, outs)


def _bounded_while(cond_fun, body_fun, init_val, max_steps: int, check: _CarryCheck):
    from fungrad import lax

    def step(carry, _):
        val, done = carry
        pred = cond_fun(val)
        p_aval = core.get_aval(operand(pred, "while_loop cond_fun output"))
        if p_aval.shape != () or p_aval.dtype != np.bool_:
            raise TypeError(
                f"while_loop: cond_fun must return a boolean scalar, got {p_aval.str_short()}"
            )
        active = lax.bitwise_and(lax.bitwise_not(done), pred)
        new = body_fun(val)
        val_leaves, tree = tree_util.tree_flatten(val)
        new_leaves, new_tree = tree_util.tree_flatten(new)
        check.structure(tree, new_tree)
        old_avals = [core.get_aval(operand(x, "while_loop init_val")) for x in val_leaves]
        new_avals = [core.get_aval(operand(x, "while_loop body_fun output")) for x in new_leaves]
        if any(
            a.shape != b.shape or (a.dtype != b.dtype and not a.weak_type)
            for a, b in zip(old_avals, new_avals)
        ):
            check.types(tree, old_avals, new_avals)

        def keep(old, upd):
            a, b = core.get_aval(old), core.get_aval(upd)
            if a.dtype != b.dtype:  # a weak carry: the scan promotes it (as while_loop does)
                old = lax.convert_element_type(old, b.dtype, b.weak_type)
            return lax.select_n(lax.broadcast_in_dim(active, a.shape, ()), old, upd)

        val = tree_util.tree_map(keep, val, new)
        return (val, lax.bitwise_or(done, lax.bitwise_not(active))), None

    # the scan checks the carry (val, done): its messages name body_fun and val's leaves
    n_done = 1
    scan_check = _CarryCheck("while_loop", body_fun, "body_fun", "init_val", 0, part=(0, 0, n_done))
    (val, _), _ = _scan(step, (init_val, np.bool_(False)), None, max_steps, False, scan_check)
    return val


def _fori_bounds(lower, upper):
    """JAX's rule for fori_loop's bounds: equal dtypes, except that a weakly typed signed int
    (a Python int) takes the other bound's signed int dtype. Returns that dtype."""
    lo_dt, lo_weak = dtypes.dtype_and_weak(lower)
    hi_dt, hi_weak = dtypes.dtype_and_weak(upper)
    if lo_dt == hi_dt:
        return lo_dt
    if dtypes.kind(lo_dt) == "i" and dtypes.kind(hi_dt) == "i" and lo_weak != hi_weak:
        return hi_dt if lo_weak else lo_dt
    raise TypeError(
        f"fori_loop: lower and upper must have equal types, got {lo_dt.name} and "
        f"{hi_dt.name}; convert one of them (a Python int takes the other's signed "
        "integer type)"
    )


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """``for i in range(lower, upper): val = body_fun(i, val)``.

    ``lower`` and ``upper`` must have the same dtype (a Python int adapts to a signed int
    bound), as in JAX. With concrete bounds this is a scan over ``int(upper) - int(lower)``
    steps whose index ``i`` is a weakly typed int, so it is reverse-differentiable; with traced
    bounds it is a while_loop whose index has the bounds' dtype. ``unroll`` is accepted for API
    compatibility (concrete bounds only, as in JAX) and does not change the result.
    """
    _check_callable(
        "fori_loop",
        "body_fun",
        body_fun,
        "fori_loop(lower, upper, body_fun, init_val) with body_fun(i, val) -> val",
    )
    dt = _fori_bounds(lower, upper)
    for name, b in (("lower", lower), ("upper", upper)):
        if np.ndim(b) != 0:
            raise TypeError(f"fori_loop: {name} must be a scalar, got shape {np.shape(b)}")
    check = _CarryCheck("fori_loop", body_fun, "body_fun", "init_val", 1, part=(1, 1, 0))
    if not isinstance(lower, core.Tracer) and not isinstance(upper, core.Tracer):
        lo, hi = int(lower), int(upper)

        def step(carry, _):
            i, val = carry
            return (i + 1, body_fun(i, val)), None

        (_, out), _ = _scan(step, (lo, init_val), None, max(hi - lo, 0), False, check)
        return out
    if unroll is not None and unroll is not False and unroll != 1:
        raise ValueError(
            "fori_loop: unroll needs concrete loop bounds (Python ints or "
            "concrete arrays), as in JAX"
        )
    from fungrad import lax

    lower = lax.convert_element_type(operand(lower, "fori_loop lower"), dt)
    upper = lax.convert_element_type(operand(upper, "fori_loop upper"), dt)

    def cond_fun(c):
        return lax.lt(c[0], c[2])

    def body(c):
        i, val, hi_ = c
        return lax.add(i, lax.full((), 1, dt)), body_fun(i, val), hi_

    check = _CarryCheck("fori_loop", body_fun, "body_fun", "init_val", 1, part=(1, 1, 1))
    return _while(cond_fun, body, (lower, init_val, upper), check)[1]


# -- scan / map ----------------------------------------------------------------------------------


def _scan_impl(*args, jaxpr, num_consts, num_carry, length, reverse, linear):
    consts = [Array(a) for a in args[:num_consts]]
    carry = [Array(a) for a in args[num_consts : num_consts + num_carry]]
    xs = args[num_consts + num_carry :]
    y_avals = jaxpr.out_avals[num_carry:]
    ys = [np.empty((length,) + a.shape, a.dtype) for a in y_avals]
    for step in range(length):
        i = length - 1 - step if reverse else step
        out = eval_closed(jaxpr, *consts, *carry, *[Array(np.asarray(x)[i]) for x in xs])
        carry = out[:num_carry]
        for y, o in zip(ys, out[num_carry:]):
            y[i] = np.asarray(o)
    return [np.asarray(c._value)[()] for c in carry] + ys


def _scan_abstract_eval(*avals, jaxpr, num_consts, num_carry, length, reverse, linear):
    carry = avals[num_consts : num_consts + num_carry]
    xs = avals[num_consts + num_carry :]
    for x in xs:
        if not x.shape or x.shape[0] != length:
            raise TypeError(
                f"scan: every xs leaf must have leading dimension length={length}, "
                f"got {x.str_short()}"
            )
    check_same_avals(
        "scan carry output",
        carry,
        jaxpr.out_avals[:num_carry],
        "f must return a carry with the same structure, shapes and dtypes as init.",
    )
    ys = [
        ShapedArray((length,) + a.shape, a.dtype, a.weak_type) for a in jaxpr.out_avals[num_carry:]
    ]
    return list(carry) + ys


scan_p = standard_primitive("scan", _scan_impl, _scan_abstract_eval, multiple_results=True)


def scan(
    f,
    init,
    xs=None,
    length=None,
    reverse: bool = False,
    unroll: int = 1,
    _split_transpose: bool = False,
):
    """Loop ``carry, y = f(carry, x)`` over the leading axis of ``xs``; returns
    ``(final_carry, stacked_ys)`` (``jax.lax.scan``). ``f`` returns a pair (a tuple or list
    of two); the carry it returns must have ``init``'s pytree structure, shapes and dtypes (a
    weakly typed leaf of ``init``, a Python scalar, takes the dtype ``f`` gives it, as in JAX).
    ``unroll`` and JAX's ``_split_transpose`` (how XLA schedules the backward loop) are
    accepted for API compatibility and do not change the result."""
    del unroll, _split_transpose
    _check_callable("scan", "f", f, "scan(f, init, xs) with f(carry, x) -> (carry, y)")
    if length is not None:
        length = operator.index(length)
    return _scan(f, init, xs, length, reverse, _CarryCheck("scan", f, "f", "init", 0))


def _scan_pair(f, label: str):
    """``f`` checked to return a pair ``(carry, y)``, as scan needs."""

    def body(carry, x):
        out = f(carry, x)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            if isinstance(out, (core.Tracer, Array)):
                got = core.get_aval(out).str_short()
            else:
                got = tree_util._describe_node(tree_util.tree_structure(out))
            raise TypeError(
                f"scan: {label} must return a pair (carry, y), got {got}; return "
                f"(new_carry, y), with y None when there is nothing to stack"
            )
        return tuple(out)

    return body


def _scan(f, init, xs, length, reverse, check: _CarryCheck):
    flat_init, init_tree = tree_util.tree_flatten(init)
    flat_init = [operand(x, "scan init") for x in flat_init]
    flat_xs, xs_tree = tree_util.tree_flatten(xs)
    flat_xs = [operand(x, "scan xs") for x in flat_xs]
    lengths = {x.shape[0] for x in flat_xs if x.ndim}
    if any(x.ndim == 0 for x in flat_xs):
        raise ValueError("scan: xs leaves must have a leading axis to scan over; got a 0-d array")
    if length is not None:
        lengths.add(length)
    if len(lengths) > 1:
        raise ValueError(
            f"scan got inconsistent lengths: xs leading dimensions "
            f"{[x.shape[0] for x in flat_xs]}"
            + (f" and length={length}" if length is not None else "")
        )
    if not lengths:
        raise ValueError("scan: length must be given when xs is None or has no leaves")
    n = lengths.pop()
    carry_avals = [core.get_aval(x) for x in flat_init]
    x_avals = [core.get_aval(x).update(shape=x.shape[1:]) for x in flat_xs]
    body = _scan_pair(f, check.label)

    def trace(c_avals):
        in_leaves_tree = tree_util.tree_structure(
            (
                tree_util.tree_unflatten(init_tree, c_avals),
                tree_util.tree_unflatten(xs_tree, x_avals),
            )
        )
        return trace_body(body, in_leaves_tree, c_avals + x_avals, f"scan {check.label}")

    jaxpr, consts, out_tree = trace(carry_avals)
    check.structure(init_tree, out_tree.children[0])
    nc = len(flat_init)
    flat_init, carry_avals, changed = _promote_weak_carries(
        flat_init, carry_avals, jaxpr.out_avals[:nc]
    )
    if changed:
        jaxpr, consts, out_tree = trace(carry_avals)
    check.types(init_tree, carry_avals, jaxpr.out_avals[:nc])
    outs = scan_p.bind(
        *consts,
        *flat_init,
        *flat_xs,
        jaxpr=jaxpr,
        num_consts=len(consts),
        num_carry=nc,
        length=n,
        reverse=bool(reverse),
        linear=(False,) * (len(consts) + nc + len(flat_xs)),
    )
    y_tree = out_tree.children[1]
    return (
        tree_util.tree_unflatten(init_tree, outs[:nc]),
        tree_util.tree_unflatten(y_tree, outs[nc:]),
    )


def map(f, xs, *, batch_size=None):  # noqa: A001  (lax.map, as JAX names it)
    """``stack([f(x) for x in xs])`` as a scan (``jax.lax.map``).

    With ``batch_size`` (an int >= 0) the leading axis is cut into ``n // batch_size`` chunks
    of ``batch_size`` elements, each mapped by ``vmap(f)`` inside a scan over the chunks; the
    last ``n % batch_size`` elements (when ``n`` is not a multiple) go through one more
    ``vmap(f)`` and are concatenated after the chunks' results, so the result is in the
    order of ``xs``, as JAX's. ``batch_size=0`` (or one at least ``n``) is a single
    ``vmap(f)`` over the whole axis. ``f`` is thus traced at most twice: once per chunk shape.
    """
    _check_callable("map", "f", f, "map(f, xs) with f(x) -> y")
    if batch_size is None:
        _, ys = scan(lambda _, x: ((), f(x)), (), xs)
        return ys
    return _batched_map(f, xs, _batch_size(batch_size))


def _batch_size(batch_size) -> int:
    try:
        size = operator.index(batch_size)
    except TypeError:
        raise TypeError(
            f"lax.map: batch_size must be an int or None, got {batch_size!r:.40} (of type "
            f"{type(batch_size).__name__}); pass e.g. batch_size=int({batch_size!r:.40})"
        ) from None
    if size < 0:
        raise ValueError(
            f"lax.map: batch_size must be nonnegative, got {size}; pass a positive chunk "
            "size, 0 to map the whole axis with one vmap, or None for one element at a time"
        )
    return size


def _batched_map(f, xs, batch_size: int):
    from fungrad import lax
    from fungrad.transforms.vmap_api import vmap

    leaves, tree = tree_util.tree_flatten(xs)
    if not leaves:
        raise ValueError(
            f"lax.map: xs ({tree_util._describe_node(tree)}) has no arrays to map over; pass "
            "xs with at least one array leaf"
        )
    leaves = [operand(x, "lax.map xs") for x in leaves]
    shapes = [x.shape for x in leaves]
    if any(len(s) == 0 for s in shapes) or len({s[0] for s in shapes}) > 1:
        raise ValueError(
            f"lax.map: every leaf of xs needs a leading axis of one common length to map "
            f"over, got leaves of shapes {shapes}"
        )
    n = shapes[0][0]
    n_chunks, rest = (0, n) if batch_size == 0 else divmod(n, batch_size)
    split = n_chunks * batch_size
    vf = vmap(f)
    ys = None
    if n_chunks:
        chunks = [
            lax.reshape(lax.slice_in_dim(x, 0, split, axis=0), (n_chunks, batch_size, *s[1:]))
            for x, s in zip(leaves, shapes)
        ]
        _, ys = scan(lambda _, c: ((), vf(c)), (), tree_util.tree_unflatten(tree, chunks))
        ys = tree_util.tree_map(lambda y: lax.collapse(y, 0, 2), ys)
    if rest or not n_chunks:
        tail = [lax.slice_in_dim(x, split, n, axis=0) for x in leaves]
        tail_ys = vf(tree_util.tree_unflatten(tree, tail))
        if ys is None:
            ys = tail_ys
        else:
            ys = tree_util.tree_map(lambda a, b: lax.concatenate([a, b], 0), ys, tail_ys)
    return ys


# -- while rules --------------------------------------------------------------------------------


def _reorder_invars(closed: core.ClosedJaxpr, order) -> core.ClosedJaxpr:
    """``closed`` with its invars permuted: new invar ``i`` is old invar ``order[i]``."""
    j = closed.jaxpr
    invars = [j.invars[i] for i in order]
    return core.ClosedJaxpr(core.Jaxpr(j.constvars, invars, j.eqns, j.outvars), closed.consts)


def _reorder_outvars(closed: core.ClosedJaxpr, order) -> core.ClosedJaxpr:
    j = closed.jaxpr
    outvars = [j.outvars[i] for i in order]
    return core.ClosedJaxpr(core.Jaxpr(j.constvars, j.invars, j.eqns, outvars), closed.consts)


def _with_unused_invars(closed: core.ClosedJaxpr, extra_avals) -> core.ClosedJaxpr:
    """``closed`` taking extra trailing invars that it ignores."""
    j = closed.jaxpr
    invars = j.invars + [core.Var(a) for a in extra_avals]
    return core.ClosedJaxpr(core.Jaxpr(j.constvars, invars, j.eqns, j.outvars), closed.consts)


def _interleave_order(groups_primal, groups_tangent):
    """Invar order mapping ``(*p_groups, *t_groups)`` to ``(p0, t0, p1, t1, ...)``."""
    order, base_p, base_t = [], 0, sum(groups_primal)
    for n_p, n_t in zip(groups_primal, groups_tangent):
        order += list(range(base_p, base_p + n_p)) + list(range(base_t, base_t + n_t))
        base_p += n_p
        base_t += n_t
    return order


def _while_jvp(primals, tangents, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    """The loop over (primal, tangent) carries. A tangent the body passes through unchanged
    (a carry the body forwards, as ``(i + 1, x)`` does ``x``) is loop-invariant: it is not
    carried but read as a body constant (or not at all), and the output tangent is the input
    one. So such a carry stays linear and transposable: grad through a while whose only
    differentiated carries are passed through works, as in JAX (which moves forwarded carries
    to body constants when tracing)."""
    nc, nb = cond_nconsts, body_nconsts
    cconsts, bconsts, carry = primals[:nc], primals[nc : nc + nb], primals[nc + nb :]
    bconst_t, carry_t = tangents[nc : nc + nb], tangents[nc + nb :]
    bconst_nz = [type(t) is not Zero for t in bconst_t]
    carry_nz = [type(t) is not Zero for t in carry_t]
    for _ in range(len(carry) + 1):
        _, out_nz = jvp_jaxpr(body_jaxpr, bconst_nz + carry_nz, instantiate=carry_nz)
        new = [a or b for a, b in zip(carry_nz, out_nz)]
        if new == carry_nz:
            break
        carry_nz = new
    body_jvp, _ = jvp_jaxpr(body_jaxpr, bconst_nz + carry_nz, instantiate=carry_nz)
    n_bt, n_ct = sum(bconst_nz), sum(carry_nz)
    body_jvp = _reorder_invars(body_jvp, _interleave_order([nb, len(carry)], [n_bt, n_ct]))
    body_jvp, fwd, read = _hoist_forwarded_tangents(body_jvp, nb + n_bt, len(carry), n_ct)
    ct_all = [
        instantiate_zeros(t) if type(t) is Zero else t for t, nz in zip(carry_t, carry_nz) if nz
    ]
    ct = [t for t, f in zip(ct_all, fwd) if not f]
    ct_avals = [tangent_aval(core.get_aval(t)) for t in ct]
    cond_aug = _with_unused_invars(cond_jaxpr, ct_avals)
    bt = [t for t, nz in zip(bconst_t, bconst_nz) if nz]
    hoisted = [t for t, f, r in zip(ct_all, fwd, read) if f and r]
    outs = while_p.bind(
        *cconsts,
        *bconsts,
        *bt,
        *hoisted,
        *carry,
        *ct,
        cond_jaxpr=cond_aug,
        body_jaxpr=body_jvp,
        cond_nconsts=nc,
        body_nconsts=nb + n_bt + len(hoisted),
    )
    primal_out, t_it = outs[: len(carry)], iter(outs[len(carry) :])
    nz_out = iter([t if f else next(t_it) for t, f in zip(ct_all, fwd)])
    tangent_out = [
        next(nz_out) if nz else Zero(tangent_aval(core.get_aval(c)))
        for c, nz in zip(carry, carry_nz)
    ]
    return primal_out, tangent_out


def _hoist_forwarded_tangents(body: core.ClosedJaxpr, n_consts: int, n_carry: int, n_ct: int):
    """``body`` (invars: ``n_consts`` constants, ``n_carry`` primal carries, ``n_ct`` tangent
    carries; outvars: the carries) without the tangent carries it outputs unchanged. Those
    the body reads become constants after the others; returns ``(body, fwd, read)``, flags per
    tangent carry: forwarded, and forwarded and read."""
    j = body.jaxpr
    t_in = j.invars[n_consts + n_carry :]
    fwd = [j.outvars[n_carry + k] is v for k, v in enumerate(t_in)]
    if not any(fwd):
        return body, fwd, fwd
    used = {v for eqn in j.eqns for v in eqn.invars if isinstance(v, core.Var)}
    used |= {v for k, v in enumerate(j.outvars) if k < n_carry or not fwd[k - n_carry]}
    read = [f and v in used for f, v in zip(fwd, t_in)]
    invars = (
        j.invars[:n_consts]
        + [v for v, r in zip(t_in, read) if r]
        + j.invars[n_consts : n_consts + n_carry]
        + [v for v, f in zip(t_in, fwd) if not f]
    )
    outvars = j.outvars[:n_carry] + [v for v, f in zip(j.outvars[n_carry:], fwd) if not f]
    return (
        core.ClosedJaxpr(core.Jaxpr(j.constvars, invars, j.eqns, outvars), body.consts),
        fwd,
        read,
    )


def _while_transpose(cts, *args, **params):
    raise TypeError(
        "Reverse-mode differentiation does not work for lax.while_loop with a dynamic trip "
        "count. Use lax.fori_loop with Python-int bounds or lax.scan (whose trip count is "
        "static), or while_loop(..., max_steps=N) to bound the loop."
    )


def _while_batch(axis_size, args, dims, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    from fungrad import lax

    nc, nb = cond_nconsts, body_nconsts
    cb = [d is not None for d in dims[:nc]]
    bb = [d is not None for d in dims[nc : nc + nb]]
    carry_b = [d is not None for d in dims[nc + nb :]]
    for _ in range(len(carry_b) + 1):
        _, out_b = batch_jaxpr(body_jaxpr, axis_size, bb + carry_b, instantiate=carry_b)
        new = [a or b for a, b in zip(carry_b, out_b)]
        if new == carry_b:
            break
        carry_b = new
    _, (pred_b,) = batch_jaxpr(cond_jaxpr, axis_size, cb + carry_b, instantiate=False)
    if pred_b:
        carry_b = [True] * len(carry_b)
    body_b, _ = batch_jaxpr(body_jaxpr, axis_size, bb + carry_b, instantiate=carry_b)
    cond_b, _ = batch_jaxpr(cond_jaxpr, axis_size, cb + carry_b, instantiate=False)
    vals = [x if d is None else moveaxis(x, d, 0) for x, d in zip(args, dims)]
    vals = vals[: nc + nb] + [
        bdim_at_front(x, d, axis_size) if b and d is None else x
        for x, d, b in zip(vals[nc + nb :], dims[nc + nb :], carry_b)
    ]
    cconsts, bconsts, carry = vals[:nc], vals[nc : nc + nb], vals[nc + nb :]
    if not pred_b:
        outs = while_p.bind(
            *cconsts,
            *bconsts,
            *carry,
            cond_jaxpr=cond_b,
            body_jaxpr=body_b,
            cond_nconsts=nc,
            body_nconsts=nb,
        )
        return outs, [0 if b else None for b in carry_b]
    # A batched predicate: run while any example is still looping; finished examples keep
    # their carry (selected per example).
    carry_avals = [core.get_aval(c) for c in carry]

    def new_cond(*a):
        (p,) = eval_closed(cond_b, *a)
        return [lax.reduce_or(p, (0,))]

    def new_body(*a):
        cc, bc, c = a[:nc], a[nc : nc + nb], a[nc + nb :]
        (p,) = eval_closed(cond_b, *cc, *c)
        new_c = eval_closed(body_b, *bc, *c)
        return [
            lax.select_n(lax.broadcast_in_dim(p, core.get_aval(x).shape, (0,)), x, y)
            for x, y in zip(c, new_c)
        ]

    from fungrad.transforms.staging import trace_to_jaxpr

    const_avals = [core.get_aval(x) for x in cconsts]
    cond_any = trace_to_jaxpr(new_cond, const_avals + carry_avals)
    body_sel = trace_to_jaxpr(
        new_body, const_avals + [core.get_aval(x) for x in bconsts] + carry_avals
    )
    outs = while_p.bind(
        *cconsts,
        *cconsts,
        *bconsts,
        *carry,
        cond_jaxpr=cond_any,
        body_jaxpr=body_sel,
        cond_nconsts=nc,
        body_nconsts=nc + nb,
    )
    return outs, [0] * len(outs)


jvp_rules[while_p] = _while_jvp
transpose_rules[while_p] = _while_transpose
batch_rules[while_p] = _while_batch


# -- scan rules ---------------------------------------------------------------------------------


def _split3(seq, a, b):
    return list(seq[:a]), list(seq[a : a + b]), list(seq[a + b :])


def _scan_jvp(primals, tangents, *, jaxpr, num_consts, num_carry, length, reverse, linear):
    consts, init, xs = _split3(primals, num_consts, num_carry)
    const_t, init_t, xs_t = _split3(tangents, num_consts, num_carry)
    const_nz = [type(t) is not Zero for t in const_t]
    carry_nz = [type(t) is not Zero for t in init_t]
    xs_nz = [type(t) is not Zero for t in xs_t]
    ny = len(jaxpr.out_avals) - num_carry
    for _ in range(num_carry + 1):
        _, out_nz = jvp_jaxpr(
            jaxpr, const_nz + carry_nz + xs_nz, instantiate=carry_nz + [False] * ny
        )
        new = [a or b for a, b in zip(carry_nz, out_nz[:num_carry])]
        if new == carry_nz:
            break
        carry_nz = new
    jvp_j, out_nz = jvp_jaxpr(
        jaxpr, const_nz + carry_nz + xs_nz, instantiate=carry_nz + [False] * ny
    )
    n_ct, n_cr, n_x = sum(const_nz), sum(carry_nz), sum(xs_nz)
    jvp_j = _reorder_invars(
        jvp_j, _interleave_order([num_consts, num_carry, len(xs)], [n_ct, n_cr, n_x])
    )
    y_nz = out_nz[num_carry:]
    n_yt = sum(y_nz)
    # outputs (carry, ys, carry_t, ys_t) -> (carry, carry_t, ys, ys_t)
    nc_out = num_carry
    order = (
        list(range(nc_out))
        + list(range(nc_out + ny, nc_out + ny + n_cr))
        + list(range(nc_out, nc_out + ny))
        + list(range(nc_out + ny + n_cr, nc_out + ny + n_cr + n_yt))
    )
    jvp_j = _reorder_outvars(jvp_j, order)
    ct = [t for t, nz in zip(const_t, const_nz) if nz]
    it = [instantiate_zeros(t) for t, nz in zip(init_t, carry_nz) if nz]
    xt = [t for t, nz in zip(xs_t, xs_nz) if nz]
    args = [*consts, *ct, *init, *it, *xs, *xt]
    outs = scan_p.bind(
        *args,
        jaxpr=jvp_j,
        num_consts=num_consts + n_ct,
        num_carry=num_carry + n_cr,
        length=length,
        reverse=reverse,
        linear=(False,) * len(args),
    )
    carry_out, carry_t_out, rest = _split3(outs, num_carry, n_cr)
    ys, ys_t = rest[:ny], rest[ny:]
    ct_it, yt_it = iter(carry_t_out), iter(ys_t)
    carry_t = [
        next(ct_it) if nz else Zero(tangent_aval(core.get_aval(c)))
        for c, nz in zip(carry_out, carry_nz)
    ]
    y_t = [next(yt_it) if nz else Zero(tangent_aval(core.get_aval(y))) for y, nz in zip(ys, y_nz)]
    return carry_out + ys, carry_t + y_t


def _scan_partial_eval(trace, args, params):
    """Run the known part of a scan now and stage the unknown part as a scan that reads its
    residuals (so reverse mode can run it backwards).

    Residuals that change per iteration are stacked (ys of the known scan) and read as xs of
    the unknown one, except those that are already stacked (a known xs leaf, a known ys
    output: passed as they are) and those cheap arithmetic rebuilds from other saved ones
    (recomputed by the unknown scan). Residuals that depend only on the constants (the weights
    a body multiplies by) are computed once, before the known scan, and become constants of
    the unknown scan. So the memory of the residuals grows with ``length`` only for values
    that really differ per step (scan_residuals.py)."""
    jaxpr, num_consts, num_carry = params["jaxpr"], params["num_consts"], params["num_carry"]
    length, reverse = params["length"], params["reverse"]
    unknown = [trace.is_unknown(a) for a in args]
    const_uk, carry_uk, xs_uk = _split3(unknown, num_consts, num_carry)
    ny = len(jaxpr.out_avals) - num_carry
    for _ in range(num_carry + 1):
        _, _, out_uk, _ = partial_eval_jaxpr(
            jaxpr, const_uk + carry_uk + xs_uk, instantiate=carry_uk + [False] * ny
        )
        new = [a or b for a, b in zip(carry_uk, out_uk[:num_carry])]
        if new == carry_uk:
            break
        carry_uk = new
    known_j, unknown_j, out_uk, num_res = partial_eval_jaxpr(
        jaxpr, const_uk + carry_uk + xs_uk, instantiate=carry_uk + [False] * ny
    )
    consts, init, xs = _split3(args, num_consts, num_carry)
    k_consts = [a for a, u in zip(consts, const_uk) if not u]
    k_init = [a for a, u in zip(init, carry_uk) if not u]
    k_xs = [a for a, u in zip(xs, xs_uk) if not u]
    n_kcarry = len(k_init)
    n_kout = len(known_j.out_avals) - num_res  # known carries, then known ys
    with core.set_current_trace(trace.parent):
        res_src, res_vars, known_j, hoisted_vals = known_scan_residuals(
            known_j, k_consts, k_xs, n_kcarry, n_kout, num_res
        )
    res_src, known_j, unknown_j = recompute_cheap_residuals(
        known_j, unknown_j, res_src, res_vars, n_kout
    )
    num_res = len(res_src)
    n_hc = len(hoisted_vals)
    known_in = [*hoisted_vals, *k_init, *k_xs]
    with core.set_current_trace(trace.parent):
        known_scan_out = scan_p.bind(
            *known_in,
            jaxpr=known_j,
            num_consts=n_hc,
            num_carry=n_kcarry,
            length=length,
            reverse=reverse,
            linear=(False,) * len(known_in),
        )
    known_out = known_scan_out[:n_kout]
    # Each residual: loop-invariant (a constant of the unknown scan) or stacked (an xs).
    inv_res, inv_idx, st_res, st_idx = [], [], [], []
    for i, (kind, val) in enumerate(res_src):
        if kind == "const":
            inv_res.append(val)
            inv_idx.append(i)
        else:
            st_res.append(known_scan_out[val] if kind == "out" else val)
            st_idx.append(i)
    # unknown_j takes (*residuals, *unknown consts, *unknown carry, *unknown xs); the scan
    # takes (*unknown consts, *invariant residuals, *unknown carry, *stacked residuals,
    # *unknown xs).
    n_uc, n_ucarry = sum(const_uk), sum(carry_uk)
    n_ux = sum(xs_uk)
    base = num_res
    order = (
        list(range(base, base + n_uc))
        + inv_idx
        + list(range(base + n_uc, base + n_uc + n_ucarry))
        + st_idx
        + list(range(base + n_uc + n_ucarry, base + n_uc + n_ucarry + n_ux))
    )
    unknown_j = _reorder_invars(unknown_j, order)
    u_consts = [a for a, u in zip(consts, const_uk) if u]
    u_init = [a if trace.is_unknown(a) else trace.to_tracer(a) for a, u in zip(init, carry_uk) if u]
    u_xs = [a for a, u in zip(xs, xs_uk) if u]
    u_args = [*u_consts, *inv_res, *u_init, *st_res, *u_xs]
    unknown_out = trace.stage(
        scan_p,
        u_args,
        dict(
            jaxpr=unknown_j,
            num_consts=n_uc + len(inv_res),
            num_carry=n_ucarry,
            length=length,
            reverse=reverse,
            linear=(False,) * len(u_args),
        ),
    )
    k_it, u_it = iter(known_out), iter(unknown_out)
    return [next(u_it) if u else next(k_it) for u in out_uk]


def _scan_transpose(cts, *args, jaxpr, num_consts, num_carry, length, reverse, linear):
    from fungrad import lax

    consts, init, xs = _split3(args, num_consts, num_carry)
    const_lin = [is_undefined_primal(c) for c in consts]
    xs_lin = [is_undefined_primal(x) for x in xs]
    # Every carry of a linear scan is linear. A known init value here is an instantiated zero
    # tangent (linearize materialised it when the carry became nonzero inside the loop): treat
    # it as a linear input whose cotangent is not needed.
    init = [
        c if is_undefined_primal(c) else UndefPrimal(core.get_aval(c).strip_weak_type())
        for c in init
    ]
    res_consts = [c for c, lin in zip(consts, const_lin) if not lin]
    res_xs = [x for x, lin in zip(xs, xs_lin) if not lin]
    ct_carry = [instantiate_zeros(c) for c in cts[:num_carry]]
    # A ys output with a zero cotangent (stacked outputs the loss does not read) is not
    # materialised as a [length, ...] array of zeros: the body sees a symbolic zero.
    ys_nz = [type(c) is not Zero for c in cts[num_carry:]]
    ct_ys = [c for c, nz in zip(cts[num_carry:], ys_nz) if nz]
    lin_const_avals = [c.aval for c, lin in zip(consts, const_lin) if lin]
    carry_avals = [c.aval for c in init]
    all_y_avals = [tangent_aval(a) for a in jaxpr.out_avals[num_carry:]]
    y_avals = [a for a, nz in zip(all_y_avals, ys_nz) if nz]
    n_rc, n_lc = len(res_consts), len(lin_const_avals)

    def body_t(*a):
        rc = a[:n_rc]
        acc = a[n_rc : n_rc + n_lc]
        c_ct = a[n_rc + n_lc : n_rc + n_lc + num_carry]
        y_ct = a[n_rc + n_lc + num_carry : n_rc + n_lc + num_carry + len(y_avals)]
        rx = a[n_rc + n_lc + num_carry + len(y_avals) :]
        rc_it, rx_it = iter(rc), iter(rx)
        primal_args = (
            [UndefPrimal(c.aval) if lin else next(rc_it) for c, lin in zip(consts, const_lin)]
            + [UndefPrimal(c) for c in carry_avals]
            + [
                UndefPrimal(x.aval.update(shape=x.aval.shape[1:])) if lin else next(rx_it)
                for x, lin in zip(xs, xs_lin)
            ]
        )
        y_it = iter(y_ct)
        y_ct = [next(y_it) if nz else Zero(a) for a, nz in zip(all_y_avals, ys_nz)]
        ct_in = backward_pass(jaxpr.jaxpr, jaxpr.consts, primal_args, list(c_ct) + y_ct)
        ct_consts, ct_init, ct_xs = _split3(ct_in, num_consts, num_carry)
        new_acc = [
            lax.add(s, instantiate_zeros(c))
            for s, c in zip(acc, [c for c, lin in zip(ct_consts, const_lin) if lin])
        ]
        return (
            new_acc
            + [instantiate_zeros(c) for c in ct_init]
            + [instantiate_zeros(c) for c, lin in zip(ct_xs, xs_lin) if lin]
        )

    from fungrad.transforms.staging import trace_to_jaxpr

    body_avals = (
        [core.get_aval(c) for c in res_consts]
        + lin_const_avals
        + carry_avals
        + y_avals
        + [core.get_aval(x).update(shape=core.get_aval(x).shape[1:]) for x in res_xs]
    )
    body = trace_to_jaxpr(body_t, body_avals)
    res_consts, body = _narrow_transposed_body(body, res_consts)
    n_rc = len(res_consts)
    acc0 = [lax.full(a.shape, 0, a.dtype) for a in lin_const_avals]
    scan_args = [*res_consts, *acc0, *ct_carry, *ct_ys, *res_xs]
    outs = scan_p.bind(
        *scan_args,
        jaxpr=body,
        num_consts=n_rc,
        num_carry=n_lc + num_carry,
        length=length,
        reverse=not reverse,
        linear=(False,) * len(scan_args),
    )
    ct_consts, ct_init, ct_xs = outs[:n_lc], outs[n_lc : n_lc + num_carry], outs[n_lc + num_carry :]
    c_it, x_it = iter(ct_consts), iter(ct_xs)
    ct_init = [
        ct if is_undefined_primal(a) else None
        for ct, a in zip(ct_init, args[num_consts : num_consts + num_carry])
    ]
    return (
        [next(c_it) if lin else None for lin in const_lin]
        + ct_init
        + [next(x_it) if lin else None for lin in xs_lin]
    )


def _narrow_transposed_body(body: core.ClosedJaxpr, consts: list):
    """``(consts, body)`` of a backward scan whose products only slices read are narrowed to
    the sliced part (:mod:`.narrow_products`: the carry's columns of ``dz @ W.T``); the slices
    of the constants that makes are computed once, here, and become the loop's constants."""
    narrowed = narrow_sliced_products(body)
    if narrowed is body:
        return consts, body
    split = hoist_loop_invariants(narrowed, len(consts), [False] * len(narrowed.out_avals))
    if split is None:
        return consts, narrowed
    vals = core.eval_jaxpr(split.hoisted.jaxpr, split.hoisted.consts, *consts)
    return list(vals[: split.n_loop_consts]), split.loop


def _scan_batch(axis_size, args, dims, *, jaxpr, num_consts, num_carry, length, reverse, linear):
    consts_d, init_d, xs_d = _split3(dims, num_consts, num_carry)
    const_b = [d is not None for d in consts_d]
    carry_b = [d is not None for d in init_d]
    xs_b = [d is not None for d in xs_d]
    ny = len(jaxpr.out_avals) - num_carry
    for _ in range(num_carry + 1):
        _, out_b = batch_jaxpr(
            jaxpr, axis_size, const_b + carry_b + xs_b, instantiate=carry_b + [False] * ny
        )
        new = [a or b for a, b in zip(carry_b, out_b[:num_carry])]
        if new == carry_b:
            break
        carry_b = new
    body, out_b = batch_jaxpr(
        jaxpr, axis_size, const_b + carry_b + xs_b, instantiate=carry_b + [False] * ny
    )
    consts, init, xs = _split3(args, num_consts, num_carry)
    consts = [c if d is None else moveaxis(c, d, 0) for c, d in zip(consts, consts_d)]
    init = [bdim_at_front(c, d, axis_size) if b else c for c, d, b in zip(init, init_d, carry_b)]
    # a batched xs leaf has its batch axis right after the scanned axis
    xs = [x if d is None else moveaxis(x, d, 1) for x, d in zip(xs, xs_d)]
    outs = scan_p.bind(
        *consts,
        *init,
        *xs,
        jaxpr=body,
        num_consts=num_consts,
        num_carry=num_carry,
        length=length,
        reverse=reverse,
        linear=linear,
    )
    out_dims = [0 if b else None for b in carry_b] + [1 if b else None for b in out_b[num_carry:]]
    return outs, out_dims


jvp_rules[scan_p] = _scan_jvp
partial_eval_rules[scan_p] = _scan_partial_eval
transpose_rules[scan_p] = _scan_transpose
batch_rules[scan_p] = _scan_batch


def _while_partial_eval(trace, args, params):
    """Inside linearize: run a while over the known carries now (when the predicate and those
    carries do not depend on unknown values), and stage the whole loop for the unknown carries
    (recomputing the known part; a while has no transpose, so no residuals are kept)."""
    cond_j, body_j = params["cond_jaxpr"], params["body_jaxpr"]
    nc, nb = params["cond_nconsts"], params["body_nconsts"]
    unknown = [trace.is_unknown(a) for a in args]
    cc_uk, bc_uk, carry_uk = unknown[:nc], unknown[nc : nc + nb], unknown[nc + nb :]
    for _ in range(len(carry_uk) + 1):
        _, _, out_uk, _ = partial_eval_jaxpr(body_j, bc_uk + carry_uk, instantiate=carry_uk)
        new = [a or b for a, b in zip(carry_uk, out_uk)]
        if new == carry_uk:
            break
        carry_uk = new
    cond_known, _, (pred_uk,), _ = partial_eval_jaxpr(cond_j, cc_uk + carry_uk, instantiate=False)
    unknown_out = trace.stage(while_p, args, params)
    if pred_uk or all(carry_uk):
        return unknown_out
    body_known, _, _, n_res = partial_eval_jaxpr(body_j, bc_uk + carry_uk, instantiate=carry_uk)
    bj = body_known.jaxpr
    body_known = core.ClosedJaxpr(
        core.Jaxpr(bj.constvars, bj.invars, bj.eqns, bj.outvars[: len(bj.outvars) - n_res]),
        body_known.consts,
    )
    cj = cond_known.jaxpr
    cond_known = core.ClosedJaxpr(
        core.Jaxpr(cj.constvars, cj.invars, cj.eqns, cj.outvars[:1]), cond_known.consts
    )
    known = [a for a, u in zip(args, unknown) if not u]
    n_kcc = sum(1 for u in cc_uk if not u)
    n_kbc = sum(1 for u in bc_uk if not u)
    known = known[: n_kcc + n_kbc] + [a for a, u in zip(args[nc + nb :], carry_uk) if not u]
    with core.set_current_trace(trace.parent):
        known_out = while_p.bind(
            *known,
            cond_jaxpr=cond_known,
            body_jaxpr=body_known,
            cond_nconsts=n_kcc,
            body_nconsts=n_kbc,
        )
    k_it = iter(known_out)
    return [u_out if u else next(k_it) for u_out, u in zip(unknown_out, carry_uk)]


partial_eval_rules[while_p] = _while_partial_eval


# -- lowering (fungrad/lowering/control_flow.py: native loops over compiled bodies) --------------


def _while_lowering(ctx, *args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    nc, nb = cond_nconsts, body_nconsts
    return control_flow_lowering.lower_while(
        ctx, cond_jaxpr, body_jaxpr, args[:nc], args[nc : nc + nb], args[nc + nb :]
    )


def _scan_lowering(ctx, *args, jaxpr, num_consts, num_carry, length, reverse, linear):
    consts, init, xs = _split3(args, num_consts, num_carry)
    return control_flow_lowering.lower_scan(ctx, jaxpr, consts, init, xs, length, reverse)


kernel.register_lowering(while_p, _while_lowering)
kernel.register_lowering(scan_p, _scan_lowering)
