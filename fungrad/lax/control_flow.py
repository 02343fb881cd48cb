"""Structured control flow: cond / switch, while_loop / fori_loop, scan / map.

These are higher-order primitives: their params hold the traced bodies as closed-over-free
jaxprs (every constant a body closes over is hoisted into an explicit operand, so a body's
dependence on outer tracers is visible to the transforms). Bodies are traced abstractly:
Python control flow on their values is a ConcretizationTypeError.

Primitives and operands (JAX's spelling):

* ``cond[branches=(jaxpr, ...)] index *operands`` — the branch ``index`` (clamped) runs;
* ``while[cond_jaxpr body_jaxpr cond_nconsts body_nconsts] *cond_consts *body_consts *carry``;
* ``scan[jaxpr num_consts num_carry length reverse linear] *consts *carry *xs`` — the body maps
  ``(consts, carry, x) -> (carry, y)``; ys are stacked along a new leading axis.
"""

from __future__ import annotations

import operator

import numpy as np

from fungrad import core, dtypes, tree_util
from fungrad.array import Array
from fungrad.core import ShapedArray
from fungrad.lax.utils import operand, standard_primitive

__all__ = ["cond", "switch", "while_loop", "fori_loop", "scan", "map",
           "cond_p", "while_p", "scan_p"]


# -- tracing bodies -------------------------------------------------------------------------------

def _abstractify(x, what: str) -> ShapedArray:
    try:
        aval = core.get_aval(operand(x, what))
    except TypeError:
        raise TypeError(f"{what}: a value of type {type(x).__name__} is not an array; loop "
                        "carries and operands must be arrays or pytrees of arrays") from None
    return aval


def _trace_body(fun, in_tree, in_avals, what: str):
    """Trace ``fun`` (taking the unflattened pytree) at ``in_avals``.

    Returns ``(closed_jaxpr, hoisted, out_tree)``: constants the body closes over that are
    tracers of enclosing transforms are *hoisted*: they become leading invars of the jaxpr and
    ``hoisted`` lists them, to be passed as explicit operands; concrete constants stay in the
    ClosedJaxpr.
    """
    from fungrad.transforms.staging import trace_to_jaxpr

    out_tree_box = []

    def flat_fun(*leaves):
        out = fun(*tree_util.tree_unflatten(in_tree, leaves))
        out_leaves, out_tree = tree_util.tree_flatten(out)
        out_tree_box.append(out_tree)
        return [operand(o, f"{what} output") for o in out_leaves]

    closed = trace_to_jaxpr(flat_fun, in_avals)
    closed, hoisted = hoist_tracer_consts(closed)
    return closed, hoisted, out_tree_box[0]


def hoist_tracer_consts(closed: core.ClosedJaxpr):
    """Move constvars bound to tracers into leading invars; returns (closed, those tracers)."""
    j = closed.jaxpr
    is_tracer = [isinstance(c, core.Tracer) for c in closed.consts]
    if not any(is_tracer):
        return closed, []
    hoisted_vars = [v for v, t in zip(j.constvars, is_tracer) if t]
    hoisted = [c for c, t in zip(closed.consts, is_tracer) if t]
    kept_vars = [v for v, t in zip(j.constvars, is_tracer) if not t]
    kept = [c for c, t in zip(closed.consts, is_tracer) if not t]
    jaxpr = core.Jaxpr(kept_vars, hoisted_vars + j.invars, j.eqns, j.outvars)
    return core.ClosedJaxpr(jaxpr, kept), hoisted


def _avals_str(avals) -> str:
    return "(" + ", ".join(a.str_short() for a in avals) + ")"


def _check_same_avals(what: str, expected, got, fix: str) -> None:
    exp = [a.strip_weak_type() for a in expected]
    gt = [a.strip_weak_type() for a in got]
    if exp != gt:
        raise TypeError(f"{what}: expected {_avals_str(expected)} but got {_avals_str(got)}. "
                        f"{fix}")


def _eval(closed: core.ClosedJaxpr, *args):
    return core.eval_jaxpr(closed.jaxpr, closed.consts, *args)


# -- cond / switch ---------------------------------------------------------------------------

def _cond_impl(index, *ops, branches):
    i = int(np.clip(index, 0, len(branches) - 1))
    return [np.asarray(o._value if type(o) is Array else o)[()]
            for o in _eval(branches[i], *[Array(x) for x in ops])]


def _cond_abstract_eval(index, *ops, branches):
    if index.shape != () or index.dtype.kind not in "iu":
        raise TypeError(f"cond: the branch index must be an integer scalar, got "
                        f"{index.str_short()}")
    for i, b in enumerate(branches):
        _check_same_avals(f"cond branch {i} inputs", b.in_avals, ops, "")
    out = branches[0].out_avals
    for i, b in enumerate(branches[1:], 1):
        _check_same_avals(f"cond branch {i} outputs", out, b.out_avals,
                          "All branches must return the same pytree of shapes and dtypes.")
    return [a.strip_weak_type() if any(a != b.out_avals[k] for b in branches) else a
            for k, a in enumerate(out)]


cond_p = standard_primitive("cond", _cond_impl, _cond_abstract_eval, multiple_results=True)


def switch(index, branches, *operands):
    """Apply ``branches[index](*operands)``; ``index`` is clamped into range (JAX)."""
    if not branches:
        raise ValueError("switch: branches must be a non-empty sequence of functions")
    for b in branches:
        if not callable(b):
            raise TypeError(f"switch: branches must be callable, got {type(b).__name__}")
    idx = operand(index, "switch index")
    if idx.shape != () or idx.dtype.kind not in "iub":
        raise TypeError(f"switch: the index must be an integer scalar, got "
                        f"{core.get_aval(idx).str_short()}")
    from fungrad import lax
    idx = lax.convert_element_type(idx, np.int32)
    flat, in_tree = tree_util.tree_flatten(operands)
    flat = [operand(x, "switch operand") for x in flat]
    avals = [core.get_aval(x) for x in flat]
    traced = [_trace_body(b, in_tree, avals, f"branch {i}") for i, b in enumerate(branches)]
    out_tree = traced[0][2]
    for i, (_, _, t) in enumerate(traced[1:], 1):
        if t != out_tree:
            raise TypeError(f"cond/switch: branch 0 returns {out_tree} but branch {i} returns "
                            f"{t}; all branches must return the same pytree structure")
    # Every branch takes all branches' hoisted consts, then the operands.
    all_consts = [c for _, consts, _ in traced for c in consts]
    const_avals = [[core.get_aval(c) for c in consts] for _, consts, _ in traced]
    jaxprs = []
    for i, (closed, consts, _) in enumerate(traced):
        j = closed.jaxpr
        pre = [core.Var(a) for k in range(i) for a in const_avals[k]]
        post = [core.Var(a) for k in range(i + 1, len(traced)) for a in const_avals[k]]
        n = len(consts)
        invars = pre + j.invars[:n] + post + j.invars[n:]
        jaxprs.append(core.ClosedJaxpr(core.Jaxpr(j.constvars, invars, j.eqns, j.outvars),
                                       closed.consts))
    for i, j in enumerate(jaxprs[1:], 1):
        _check_same_avals(f"cond/switch branch {i} outputs", jaxprs[0].out_avals, j.out_avals,
                          "All branches must return the same shapes and dtypes.")
    outs = cond_p.bind(idx, *all_consts, *flat, branches=tuple(jaxprs))
    return tree_util.tree_unflatten(out_tree, outs)


def cond(pred, true_fun, false_fun, *operands):
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``, traced once each.

    ``pred`` must be a scalar (bool or number; nonzero is true). Both branches must return the
    same pytree of shapes and dtypes.
    """
    p = operand(pred, "cond predicate")
    if p.shape != ():
        raise TypeError(f"cond: the predicate must be a scalar, got shape {p.shape}; use "
                        "fungrad.numpy.where for elementwise selection")
    from fungrad import lax
    if p.dtype != np.bool_:
        p = lax.ne(p, lax.full((), 0, p.dtype))
    index = lax.convert_element_type(p, np.int32)
    return switch(index, (false_fun, true_fun), *operands)


# -- while_loop / fori_loop ---------------------------------------------------------------------

def _while_impl(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cconsts = [Array(a) for a in args[:cond_nconsts]]
    bconsts = [Array(a) for a in args[cond_nconsts:cond_nconsts + body_nconsts]]
    carry = [Array(a) for a in args[cond_nconsts + body_nconsts:]]
    while bool(_eval(cond_jaxpr, *cconsts, *carry)[0]):
        carry = _eval(body_jaxpr, *bconsts, *carry)
    return [np.asarray(c._value)[()] for c in carry]


def _while_abstract_eval(*avals, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    carry = avals[cond_nconsts + body_nconsts:]
    _check_same_avals("while_loop body_fun output", carry, body_jaxpr.out_avals,
                      "body_fun must return a value with the same structure, shapes and "
                      "dtypes as init_val.")
    return list(carry)


while_p = standard_primitive("while", _while_impl, _while_abstract_eval, multiple_results=True)


def _strong_if_changes(init_avals, out_avals):
    """Carry avals with weak types dropped wherever the body changes them (JAX promotes weakly
    typed loop carries to strong when the body's output is strong)."""
    return [a.strip_weak_type() if a.weak_type and not b.weak_type else a
            for a, b in zip(init_avals, out_avals)]


def while_loop(cond_fun, body_fun, init_val):
    """Repeat ``val = body_fun(val)`` while ``cond_fun(val)``; returns the final ``val``.

    Differentiable in forward mode and batchable; reverse mode needs a static trip count
    (use fori_loop with Python-int bounds, or scan).
    """
    flat, in_tree = tree_util.tree_flatten(init_val)
    flat = [operand(x, "while_loop init_val") for x in flat]
    avals = [core.get_aval(x) for x in flat]
    body, bconsts, out_tree = _trace_body(body_fun, in_tree, avals, "while_loop body_fun")
    if out_tree != in_tree:
        raise TypeError(f"while_loop: body_fun must return the structure of init_val, "
                        f"{in_tree}, but returned {out_tree}")
    strong = _strong_if_changes(avals, body.out_avals)
    if strong != avals:
        from fungrad import lax
        flat = [lax.convert_element_type(x, a.dtype, a.weak_type) for x, a in zip(flat, strong)]
        avals = strong
        body, bconsts, _ = _trace_body(body_fun, in_tree, avals, "while_loop body_fun")
    cond, cconsts, ctree = _trace_body(cond_fun, in_tree, avals, "while_loop cond_fun")
    (pred,) = cond.out_avals if len(cond.out_avals) == 1 else (None,)
    if pred is None or pred.shape != () or pred.dtype != np.bool_:
        got = _avals_str(cond.out_avals)
        raise TypeError(f"while_loop: cond_fun must return a boolean scalar, got {got}")
    outs = while_p.bind(*cconsts, *bconsts, *flat, cond_jaxpr=cond, body_jaxpr=body,
                        cond_nconsts=len(cconsts), body_nconsts=len(bconsts))
    return tree_util.tree_unflatten(in_tree, outs)


def _concrete_int(x):
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return int(x)
    if type(x) is Array and x.shape == () and x.dtype.kind in "iu":
        return int(x)
    return None


def fori_loop(lower, upper, body_fun, init_val):
    """``for i in range(lower, upper): val = body_fun(i, val)``.

    With concrete (Python int) bounds this is a scan, so it is reverse-differentiable; with
    traced bounds it is a while_loop.
    """
    lo, hi = _concrete_int(lower), _concrete_int(upper)
    from fungrad import lax
    if lo is not None and hi is not None:
        dt = dtypes.result_type(lower, upper)

        def step(carry, _):
            i, val = carry
            return (lax.add(i, lax.full((), 1, dt)), body_fun(i, val)), None

        (_, out), _ = scan(step, (lax.full((), lo, dt), init_val), None,
                           length=max(hi - lo, 0))
        return out
    lower, upper = operand(lower, "fori_loop lower"), operand(upper, "fori_loop upper")
    dt = dtypes.result_type(lower, upper)
    lower = lax.convert_element_type(lower, dt)
    upper = lax.convert_element_type(upper, dt)

    def cond_fun(c):
        return lax.lt(c[0], c[2])

    def body(c):
        i, val, hi_ = c
        return lax.add(i, lax.full((), 1, dt)), body_fun(i, val), hi_

    return while_loop(cond_fun, body, (lower, init_val, upper))[1]


# -- scan / map ----------------------------------------------------------------------------------

def _scan_impl(*args, jaxpr, num_consts, num_carry, length, reverse, linear):
    consts = [Array(a) for a in args[:num_consts]]
    carry = [Array(a) for a in args[num_consts:num_consts + num_carry]]
    xs = args[num_consts + num_carry:]
    y_avals = jaxpr.out_avals[num_carry:]
    ys = [np.empty((length,) + a.shape, a.dtype) for a in y_avals]
    for step in range(length):
        i = length - 1 - step if reverse else step
        out = _eval(jaxpr, *consts, *carry, *[Array(np.asarray(x)[i]) for x in xs])
        carry = out[:num_carry]
        for y, o in zip(ys, out[num_carry:]):
            y[i] = np.asarray(o)
    return [np.asarray(c._value)[()] for c in carry] + ys


def _scan_abstract_eval(*avals, jaxpr, num_consts, num_carry, length, reverse, linear):
    carry = avals[num_consts:num_consts + num_carry]
    xs = avals[num_consts + num_carry:]
    for x in xs:
        if not x.shape or x.shape[0] != length:
            raise TypeError(f"scan: every xs leaf must have leading dimension length={length}, "
                            f"got {x.str_short()}")
    _check_same_avals("scan carry output", carry, jaxpr.out_avals[:num_carry],
                      "f must return a carry with the same structure, shapes and dtypes as "
                      "init.")
    ys = [ShapedArray((length,) + a.shape, a.dtype, a.weak_type)
          for a in jaxpr.out_avals[num_carry:]]
    return list(carry) + ys


scan_p = standard_primitive("scan", _scan_impl, _scan_abstract_eval, multiple_results=True)


def scan(f, init, xs=None, length=None, reverse: bool = False, unroll: int = 1):
    """Loop ``carry, y = f(carry, x)`` over the leading axis of ``xs``; returns
    ``(final_carry, stacked_ys)`` (``jax.lax.scan``). ``unroll`` is accepted for API
    compatibility and does not change the result."""
    del unroll
    flat_init, init_tree = tree_util.tree_flatten(init)
    flat_init = [operand(x, "scan init") for x in flat_init]
    flat_xs, xs_tree = tree_util.tree_flatten(xs)
    flat_xs = [operand(x, "scan xs") for x in flat_xs]
    lengths = {x.shape[0] for x in flat_xs if x.ndim}
    if any(x.ndim == 0 for x in flat_xs):
        raise ValueError("scan: xs leaves must have a leading axis to scan over; got a 0-d array")
    if length is not None:
        length = operator.index(length)
        lengths.add(length)
    if len(lengths) > 1:
        raise ValueError(f"scan got inconsistent lengths: xs leading dimensions "
                         f"{[x.shape[0] for x in flat_xs]}" +
                         (f" and length={length}" if length is not None else ""))
    if not lengths:
        raise ValueError("scan: length must be given when xs is None or has no leaves")
    n = lengths.pop()
    carry_avals = [core.get_aval(x) for x in flat_init]
    x_avals = [core.get_aval(x).update(shape=x.shape[1:]) for x in flat_xs]

    def body(carry, x):
        out = f(carry, x)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise TypeError("scan: f must return a pair (carry, y), got "
                            f"{type(out).__name__}")
        return out

    def trace(c_avals):
        in_leaves_tree = tree_util.tree_structure(
            (tree_util.tree_unflatten(init_tree, c_avals), tree_util.tree_unflatten(xs_tree,
                                                                                   x_avals)))
        return _trace_body(body, in_leaves_tree, c_avals + x_avals, "scan f")

    jaxpr, consts, out_tree = trace(carry_avals)
    carry_tree = out_tree.children[0]
    if carry_tree != init_tree:
        raise TypeError(f"scan: f must return a carry with the structure of init, {init_tree}, "
                        f"but returned {carry_tree}")
    nc = len(flat_init)
    strong = _strong_if_changes(carry_avals, jaxpr.out_avals[:nc])
    if strong != carry_avals:
        from fungrad import lax
        flat_init = [lax.convert_element_type(x, a.dtype, a.weak_type)
                     for x, a in zip(flat_init, strong)]
        jaxpr, consts, out_tree = trace(strong)
    outs = scan_p.bind(*consts, *flat_init, *flat_xs, jaxpr=jaxpr, num_consts=len(consts),
                       num_carry=nc, length=n, reverse=bool(reverse),
                       linear=(False,) * (len(consts) + nc + len(flat_xs)))
    y_tree = out_tree.children[1]
    return (tree_util.tree_unflatten(init_tree, outs[:nc]),
            tree_util.tree_unflatten(y_tree, outs[nc:]))


def map(f, xs):  # noqa: A001  (lax.map, as JAX names it)
    """``stack([f(x) for x in xs])`` as a scan (``jax.lax.map``)."""
    _, ys = scan(lambda _, x: ((), f(x)), (), xs)
    return ys
