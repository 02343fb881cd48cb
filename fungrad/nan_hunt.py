"""NaN / Inf hunting for ``debug_nans`` and ``debug_infs``: find the first primitive that makes an
invalid value and say why, in the user's terms.

Eagerly, every primitive's outputs are checked as it runs (:func:`fungrad.core.check_nans_infs`)
and the first bad one raises :class:`FloatingPointError` with the message built here: the
primitive, the user's line, a summary of its input values (shape/dtype, range, how many are
nan / inf / zero), and, for an equation made while differentiating a primitive (its source
records the forward primitive, see :attr:`fungrad.source_info.SourceInfo.forward`), the
forward primitive and line with what makes its derivative blow up and the fix (the "double
where" trick for a value masked out by ``where``).

A jitted call only screens its outputs (:func:`may_hold_invalid`: a max per floating output,
so a call with no NaN costs almost nothing more) and, when one is seen, :func:`hunt`
runs the traced program again op by op on the same arguments, with the checks on, stepping
into ``jit``, ``scan``, ``while`` and ``cond`` bodies itself so that the failing iteration is
named too. When the op-by-op run stays clean (the invalid value only appears in the compiled
code) the error says so and names the output that held it.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

from fungrad import core, dtypes, source_info
from fungrad.config import config

__all__ = [
    "add_forward_inputs",
    "hunt",
    "jit_error",
    "locate",
    "may_hold_invalid",
    "primitive_error",
    "summarize",
]


# -- the message of the primitive that made the value -------------------------------------------


def summarize(v) -> str:
    """One line on a numpy value: its type, range and counts of nan / inf / zero entries."""
    v = np.asarray(v)
    head = core.ShapedArray(v.shape, v.dtype).str_short()
    if v.size == 0:
        return f"{head} (empty)"
    if dtypes.kind(v.dtype) == "c":
        parts = [f"{head} |x| in [{np.nanmin(np.abs(v)):.4g}, {np.nanmax(np.abs(v)):.4g}]"]
    elif dtypes.kind(v.dtype) in "fiub":  # (a 1-entry value is shown whole)
        if v.size == 1:
            return f"{head} = {v.reshape(()).item()!r}"
        if dtypes.kind(v.dtype) == "b":
            return f"{head} with {int(v.sum())} True"
        finite = v[np.isfinite(v)] if dtypes.kind(v.dtype) == "f" else v
        what = "finite values" if dtypes.kind(v.dtype) == "f" else "values"
        if finite.size:
            parts = [f"{head} {what} in [{finite.min():.4g}, {finite.max():.4g}]"]
        else:
            parts = [f"{head} no finite value"]
    else:
        return head
    if dtypes.kind(v.dtype) in "fc":
        nan = int(np.isnan(v).sum())
        inf = int(np.isinf(v).sum())
        if nan:
            parts.append(f"{nan} nan")
        if inf:
            parts.append(f"{inf} inf")
    zeros = int((v == 0).sum())
    if zeros:
        parts.append(f"{zeros} zero{'s' if zeros > 1 else ''}")
    return ", ".join(parts)


_FORWARD_HINTS = {
    "log": "log(x) is nan for x < 0 and -inf at x = 0",
    "log1p": "log1p(x) is nan for x < -1 and -inf at x = -1",
    "sqrt": "sqrt(x) is nan for x < 0",
    "rsqrt": "rsqrt(x) is nan for x < 0 and inf at x = 0",
    "div": "x / 0 is inf (or nan for 0 / 0), and inf / inf is nan",
    "rem": "rem(x, 0) is nan",
    "pow": "x ** y is nan for x < 0 with a non-integer y, and inf at x = 0 with y < 0",
    "integer_pow": "x ** n overflows for large |x|, and is inf at x = 0 with n < 0",
    "exp": "exp(x) overflows to inf for large x (x > 88.7 in float32): work in log space "
    "(e.g. fungrad.nn.logsumexp, log_softmax)",
    "exp2": "exp2(x) overflows to inf for large x",
    "expm1": "expm1(x) overflows to inf for large x",
    "sinh": "sinh(x) overflows to inf for large |x|",
    "cosh": "cosh(x) overflows to inf for large |x|",
    "add": "inf + (-inf) is nan, and a large sum overflows",
    "sub": "inf - inf is nan, and a large difference overflows",
    "mul": "0 * inf is nan, and a large product overflows",
    "dot_general": "a product holds 0 * inf, or its sum inf - inf or an overflow",
    "reduce_sum": "a sum of +inf and -inf is nan, and a large sum overflows",
    "acos": "acos(x) is nan for |x| > 1",
    "asin": "asin(x) is nan for |x| > 1",
    "acosh": "acosh(x) is nan for x < 1",
    "atanh": "atanh(x) is nan for |x| > 1 and inf at |x| = 1",
    "lgamma": "lgamma(x) is inf at 0 and at the negative integers",
    "digamma": "digamma(x) is nan or inf at 0 and at the negative integers",
    "tan": "tan(x) is huge near odd multiples of pi/2",
    "convert_element_type": "a value too large for the narrower dtype becomes inf",
}

_DERIVATIVE_HINTS = {
    "sqrt": "the derivative of sqrt, 0.5 / sqrt(x), is inf where its input is 0 (and nan "
    "where it is negative): the cotangent of sqrt is inf where its input is 0. "
    "fnp.linalg.norm(v) is sqrt(sum(v ** 2)), so its gradient at v = 0 is the same",
    "rsqrt": "the derivative of rsqrt, -0.5 * x ** -1.5, is inf where its input is 0",
    "log": "the derivative of log, 1 / x, is inf where its input is 0",
    "log1p": "the derivative of log1p, 1 / (1 + x), is inf where its input is -1",
    "div": "the derivative of x / y in y, -x / y ** 2, is inf where y is 0 (and 1 / y in x)",
    "pow": "the derivative of x ** y in x, y * x ** (y - 1), is inf at x = 0 for y < 1, and "
    "the one in y, log(x) * x ** y, is nan at x = 0 and for x < 0",
    "integer_pow": "the derivative of x ** n, n * x ** (n - 1), is inf at x = 0 for n < 1",
    "atan2": "the derivative of atan2(y, x), (x, -y) / (x ** 2 + y ** 2), is 0 / 0 = nan at "
    "x = y = 0",
    "acos": "the derivative of acos, -1 / sqrt(1 - x ** 2), is inf at |x| = 1",
    "asin": "the derivative of asin, 1 / sqrt(1 - x ** 2), is inf at |x| = 1",
    "atanh": "the derivative of atanh, 1 / (1 - x ** 2), is inf at |x| = 1",
    "acosh": "the derivative of acosh, 1 / sqrt(x ** 2 - 1), is inf at x = 1",
    "cbrt": "the derivative of cbrt, x ** (-2/3) / 3, is inf where its input is 0",
    "abs": "the derivative of abs of a complex value, x / |x|, is nan where it is 0",
    "lgamma": "the derivative of lgamma, digamma(x), is not finite at 0 and the negative integers",
    "logistic": "the derivative of logistic overflowed: compute it from its output",
}

_DOUBLE_WHERE = (
    "If those entries are masked out later (fnp.where(mask, f(x), other)), the masked branch "
    "still receives a zero cotangent and 0 * inf = nan: mask the input too, the 'double where' "
    "trick: safe_x = fnp.where(mask, x, 1.0); y = fnp.where(mask, f(safe_x), other) (1.0: any "
    "value where f is smooth), so the derivative is only evaluated where it is finite"
)


class _Context(threading.local):
    stack: list | None = None  # "iteration 3 of scan at ..." while hunt steps into a body


_context = _Context()


def primitive_error(where: str, values, index: int, kind: str, bad, inputs, src, params=None):
    """The :class:`FloatingPointError` for output ``index`` of primitive ``where`` (named
    ``kind``: "nan" or "inf", at the entries ``bad``), given its numpy ``inputs`` (or None),
    the user's source ``src`` (a SourceInfo or None) and its ``params``. A compiled ``jit``
    call made inside a transform is run again op by op to name the primitive inside it."""
    stepped = where == "jit" and params is not None and inputs is not None
    if stepped:
        inner = _step_again(where, params, inputs, src)
        if inner is not None:
            return inner
    v = np.asarray(values[index])
    first = tuple(int(j) for j in np.argwhere(bad)[0])
    out = f"output {index} " if len(values) > 1 else "output "
    at = f" at {src}" if src is not None else ""
    fwd = getattr(src, "forward", None)
    fwd_name = getattr(fwd, "name", None)
    derived = fwd_name is not None and fwd_name != where
    msg = f"invalid value ({kind}) encountered in {where}{at}"
    if derived:
        msg += f", in the derivative (jvp or backward pass) of {fwd_name}{at}"
    if _context.stack:
        msg += ", " + ", ".join(reversed(_context.stack))
    msg += (
        f": {out}{core.ShapedArray(v.shape, v.dtype).str_short()} holds {int(bad.sum())} "
        f"{kind} value(s), the first at index {first}."
    )
    if inputs is not None and len(inputs):
        shown = list(inputs)[:6]
        msg += " Its inputs: " + "; ".join(f"{i}: {summarize(x)}" for i, x in enumerate(shown))
        msg += " ..." if len(inputs) > len(shown) else "."
        msg += _invalid_inputs(inputs)
    if derived:
        hint = _DERIVATIVE_HINTS.get(
            fwd_name, f"the derivative of {fwd_name} is not finite at these input values"
        )
        msg += f" Why: {hint}. {_DOUBLE_WHERE}."
    elif stepped:
        msg += (
            f" Running it again op by op made no invalid value: the {kind} only appears in the "
            "compiled (fused) code."
        )
    else:
        hint = _FORWARD_HINTS.get(where)
        if hint is not None:
            msg += f" Why: {hint}."
    msg += (
        f" (debug_{kind}s is on: fungrad.config.update('debug_{kind}s', False) turns the "
        "check off.)"
    )
    err = FloatingPointError(msg)
    err.forward = fwd if derived else None  # see add_forward_inputs
    return err


def add_forward_inputs(error: FloatingPointError, primitive, values) -> FloatingPointError:
    """``error`` with the numpy input ``values`` of the forward ``primitive`` added, when it
    was raised in the derivative of that primitive (the values that make it blow up)."""
    if getattr(error, "forward", None) is not primitive:
        return error
    ins = "; ".join(f"{i}: {summarize(v)}" for i, v in enumerate(values))
    msg = str(error)
    cut = msg.rfind(" (debug_")  # before the closing note on how to turn the check off
    cut = len(msg) if cut < 0 else cut
    out = FloatingPointError(
        f"{msg[:cut]} The inputs of that {primitive.name} were: {ins}.{msg[cut:]}"
    )
    out.forward = None  # (added once)
    return out


def _invalid_inputs(inputs) -> str:
    """A sentence on an input that already held an invalid value, or ""."""
    for i, x in enumerate(inputs):
        x = np.asarray(x)
        if dtypes.kind(x.dtype) not in "fc" or x.size == 0:
            continue
        if np.isnan(x).any():
            return (
                f" Input {i} already held nan: it came in from outside the checked code (an "
                "argument, a constant, or a part that ran unchecked)."
            )
        if np.isinf(x).any():
            if not config.debug_infs:
                return (
                    f" Input {i} holds inf, made where it was not checked: turn on "
                    "debug_infs too (fungrad.config.update('debug_infs', True)) to find the "
                    "primitive that made it."
                )
            return (
                f" Input {i} already held inf: it came in from outside the checked code (an "
                "argument, a constant, or a part that ran unchecked)."
            )
    return ""


# -- jit: screen the outputs, hunt op by op ------------------------------------------------------


def may_hold_invalid(values) -> bool:
    """Whether a floating value of ``values`` may hold a NaN (``debug_nans``) or an infinity
    (``debug_infs``), in one fast reduction per value: a max, which is NaN when any entry is
    (NaN propagates), and for infinities a min too (an infinity is an extreme). It never
    misses one; it only says "maybe" wrongly for a NaN when only debug_infs is on, and for a
    complex value (screened by its sum, which may overflow): that costs the exact check."""
    infs = config.debug_infs
    for v in values:
        value = getattr(v, "_value", None)  # an Array's numpy value, without a copy
        v = value if type(value) is np.ndarray else np.asarray(v)
        kind = dtypes.kind(v.dtype)
        if kind == "f":
            if not v.size:
                continue
            hi = _max(v, axis=None)
            if hi != hi or (infs and (hi == _INF or _min(v, axis=None) == -_INF)):
                return True
        elif kind == "c" and v.size:
            with np.errstate(over="ignore", invalid="ignore"):
                if not np.isfinite(v.sum()):
                    return True
    return False


_max, _min, _INF = np.maximum.reduce, np.minimum.reduce, np.inf


def _first_invalid(values):
    """``(index, kind, mask)`` of the first output holding a checked invalid value, or None."""
    for i, v in enumerate(values):
        v = np.asarray(v)
        if dtypes.kind(v.dtype) not in "fc" or v.size == 0:
            continue
        for on, kind, test in (
            (config.debug_nans, "nan", np.isnan),
            (config.debug_infs, "inf", np.isinf),
        ):
            if on:
                bad = test(v)
                if bad.any():
                    return i, kind, bad
    return None


def jit_error(name: str, closed: core.ClosedJaxpr, args, outs, out_paths=None):
    """The FloatingPointError for a jitted call of ``name`` whose outputs ``outs`` hold an
    invalid value, or None when they do not: ``closed`` (the traced program) is run again op
    by op on ``args`` to name the primitive that made it."""
    outs = [np.asarray(o) for o in outs]
    found = _first_invalid(outs)
    if found is None:
        return None
    i, kind, bad = found
    which = f"output {i}" if out_paths is None else f"output {i} ({out_paths[i]})"
    first = tuple(int(j) for j in np.argwhere(bad)[0])
    head = (
        f"invalid value ({kind}) encountered in jit({name}): its {which}, "
        f"{core.ShapedArray(outs[i].shape, outs[i].dtype).str_short()}, holds "
        f"{int(bad.sum())} {kind} value(s), the first at index {first}."
    )
    err = hunt(closed, args)
    if err is not None:
        return FloatingPointError(
            f"{head} Running {name} again without jit, op by op, to find where: {err}"
        )
    return FloatingPointError(
        f"{head} Running {name} again without jit, op by op, to find the primitive, produced "
        f"no invalid value: the {kind} only appears in the compiled (fused) code, whose "
        "floating-point evaluation differs from the primitive-by-primitive one here (a "
        "reassociated sum, a fused or approximate function, an overflow in a temporary). "
        f"(debug_{kind}s is on: fungrad.config.update('debug_{kind}s', False) turns the check "
        "off.)"
    )


def hunt(closed: core.ClosedJaxpr, args) -> FloatingPointError | None:
    """Evaluate ``closed`` on ``args`` primitive by primitive with the debug checks on; the
    FloatingPointError of the first primitive that makes an invalid value, or None."""
    from fungrad.array import Array

    vals = [a if type(a) is Array else Array(np.asarray(a)) for a in args]
    saved = _context.stack
    _context.stack = []
    try:
        with core.set_current_trace(core.EvalTrace()):
            _run(closed.jaxpr, closed.consts, vals)
    except FloatingPointError as e:
        return e
    finally:
        _context.stack = saved
    return None


def locate(primitive, vals, params, error: FloatingPointError) -> FloatingPointError:
    """The error to raise when the eager impl of ``primitive`` (on numpy ``vals``) raised
    ``error`` from a debug check inside it: for a scan, while or cond, the same check found
    again by stepping through its body, so that it names the iteration or branch too."""
    found = _step_again(primitive.name, params, vals, source_info.current(3))
    return error if found is None else found


def _step_again(name: str, params, vals, src) -> FloatingPointError | None:
    """Run the jit, scan, while or cond ``name`` (``params``, on numpy ``vals``) again,
    stepping into its bodies with the checks on; the first check's error, or None."""
    from fungrad.array import Array

    step = _STEP_INTO.get(name)
    if step is None:
        return None
    eqn = core.JaxprEqn(core.primitives[name], [], params, [], src)
    outer = _context.stack
    if outer is None:
        _context.stack = []
    try:
        step(eqn, [Array(v) for v in vals])
    except FloatingPointError as e:
        return e
    finally:
        if outer is None:
            _context.stack = None
    return None


def _run(jaxpr: core.Jaxpr, consts, args) -> list:
    """``core.eval_jaxpr`` that steps into the bodies of jit, scan, while and cond itself."""
    from fungrad.array import Array

    env: dict = {}

    def read(v):
        if type(v) is core.Literal:
            return Array(v.val, v.aval.weak_type)
        return env[v]

    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    state = source_info._state
    prev = source_info.set_equation_source(sys._getframe(), None)
    try:
        for eqn in jaxpr.eqns:
            state.info = eqn.source_info or prev[1]
            step = _STEP_INTO.get(eqn.primitive.name)
            invals = [read(v) for v in eqn.invars]
            if step is not None:
                out = step(eqn, invals)
            else:
                try:
                    out = eqn.primitive.bind(*invals, **eqn.params)
                except FloatingPointError as e:
                    raise _with_forward_inputs(e, jaxpr, eqn, read) from None
            if eqn.primitive.multiple_results:
                env.update(zip(eqn.outvars, out))
            else:
                env[eqn.outvars[0]] = out
    finally:
        source_info.restore(prev)
    return [read(v) for v in jaxpr.outvars]


def _with_forward_inputs(error, jaxpr: core.Jaxpr, eqn, read) -> FloatingPointError:
    """``error`` (raised by ``eqn``) with the input values of the forward equation it
    differentiates (see :func:`add_forward_inputs`), when that one is in the same jaxpr."""
    src = eqn.source_info
    fwd = getattr(error, "forward", None)
    if fwd is None or src is None:
        return error
    forward = None
    for e in jaxpr.eqns:
        if e is eqn:
            break
        s = e.source_info
        if e.primitive is fwd and s is not None and s[:2] == src[:2]:
            forward = e
    if forward is None:
        return error
    try:
        values = [read(v)._value for v in forward.invars]
    except KeyError:  # (an input not computed on this path)
        return error
    return add_forward_inputs(error, fwd, values)


def _where(eqn) -> str:
    return f" at {eqn.source_info}" if eqn.source_info is not None else ""


def _in_body(label, body: core.ClosedJaxpr, args):
    _context.stack.append(label)
    try:
        return _run(body.jaxpr, body.consts, args)
    finally:
        _context.stack.pop()


def _step_jit(eqn, invals):
    return _in_body(f"inside jit({eqn.params['name']}){_where(eqn)}", eqn.params["jaxpr"], invals)


def _step_scan(eqn, invals):
    from fungrad.array import Array

    p = eqn.params
    nc, nk, length = p["num_consts"], p["num_carry"], p["length"]
    consts, carry, xs = invals[:nc], invals[nc : nc + nk], invals[nc + nk :]
    xs = [np.asarray(x._value) for x in xs]
    body = p["jaxpr"]
    ys = [np.empty((length,) + a.shape, a.dtype) for a in body.out_avals[nk:]]
    for step in range(length):
        i = length - 1 - step if p["reverse"] else step
        out = _in_body(
            f"in iteration {i} of the scan{_where(eqn)}",
            body,
            [*consts, *carry, *[Array(x[i]) for x in xs]],
        )
        carry = out[:nk]
        for y, o in zip(ys, out[nk:]):
            y[i] = np.asarray(o._value)
    return [*carry, *[Array(y) for y in ys]]


def _step_while(eqn, invals):
    p = eqn.params
    cn, bn = p["cond_nconsts"], p["body_nconsts"]
    cconsts, bconsts, carry = invals[:cn], invals[cn : cn + bn], invals[cn + bn :]
    i = 0
    while True:
        label = f"in iteration {i} of the while loop{_where(eqn)}"
        go = _in_body(label + " (its condition)", p["cond_jaxpr"], [*cconsts, *carry])[0]
        if not bool(np.asarray(go._value)):
            return carry
        carry = _in_body(label, p["body_jaxpr"], [*bconsts, *carry])
        i += 1


def _step_cond(eqn, invals):
    branches = eqn.params["branches"]
    i = int(np.clip(np.asarray(invals[0]._value), 0, len(branches) - 1))
    return _in_body(f"in branch {i} of the cond{_where(eqn)}", branches[i], invals[1:])


_STEP_INTO = {"jit": _step_jit, "scan": _step_scan, "while": _step_while, "cond": _step_cond}
