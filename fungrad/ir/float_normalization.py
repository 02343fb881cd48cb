"""bfloat16 equations rewritten to compute in float32 (XLA's ``FloatNormalization``).

(bfloat16 is named below; JAX's float8 types go the same way, except that XLA's CPU backend
computes them in float16: a float8 result is rounded from float32 to float16 and then to the
float8 type, ``float_normalization.ROUNDS_THROUGH``. float8_e8m0fnu rounds from float32.)

Neither backend computes in bfloat16: LLVM's ``bfloat`` arithmetic needs runtime functions the
JIT does not have, and WGSL has no 16-bit types. XLA's CPU backend computes each bfloat16
operation in float32 and rounds its result to bfloat16 (to nearest, ties to even), and so does
this pass, before the optimisation rounds (``passes.optimize``):

    c:bf16[3] = sin a            b:f32[3] = convert_element_type[new_dtype=float32] a
                         ->      d:f32[3] = sin b
                                 c:bf16[3] = convert_element_type[new_dtype=bfloat16] d

A bfloat16 Literal operand becomes a float32 one (exact), and a bfloat16 dtype in the params
(``preferred_element_type``, ``new_dtype``, ``dtype``) float32. A conversion between
bfloat16 and any dtype but float32 goes through float32, as JAX's does (so ``int32`` and
``float64`` values are rounded twice, as in JAX). After the pass the only bfloat16 operations
left are the conversions to and from float32 and the ones that move or reinterpret data
(``float_normalization.NATIVE``): the backends load, store and move bfloat16 as 16-bit words
and convert with integer arithmetic. The eager impls do the same per primitive
(``fungrad/float_normalization.py``), so jit and eager agree bit for bit.

Sub-jaxprs (cond branches, loop bodies) are rewritten too; their interfaces keep their
bfloat16 types.
"""

from __future__ import annotations

import numpy as np

from fungrad import core, dtypes
from fungrad.float_normalization import (
    NATIVE,
    ROUNDS_THROUGH,
    integer_pow_steps,
    is_narrow_dtype,
    to_float32,
)
from fungrad.ir.passes import _closed_with_jaxpr, _has_subjaxpr_or_function, _Run

__all__ = ["normalize_floats"]

_F32, _F16 = dtypes.float32, dtypes.float16


def normalize_floats(closed: core.ClosedJaxpr) -> core.ClosedJaxpr:
    """``closed`` with every bfloat16 computation done in float32 and rounded back (see the
    module docstring); ``closed`` itself when it has no bfloat16 equation."""
    return _Run(_normalize_closed)(closed)


def _is_narrow(aval) -> bool:
    dt = getattr(aval, "dtype", None)
    return dt is not None and is_narrow_dtype(dt)


def _normalize_closed(closed: core.ClosedJaxpr, run: _Run) -> core.ClosedJaxpr:
    j = closed.jaxpr
    eqns: list[core.JaxprEqn] = []
    changed = False
    for e in j.eqns:
        e2 = run.rewrite_params(e)
        changed |= e2 is not e
        if _needs_rewrite(e2):
            _rewrite(e2, eqns)
            changed = True
        else:
            eqns.append(e2)
    if not changed:
        return closed
    run.changed = True
    return _closed_with_jaxpr(closed, core.Jaxpr(j.constvars, j.invars, eqns, j.outvars))


def _needs_rewrite(e: core.JaxprEqn) -> bool:
    name = e.primitive.name
    if name in NATIVE or _has_subjaxpr_or_function(e.params):
        return False
    if not any(_is_narrow(v.aval) for v in (*e.invars, *e.outvars)):
        return False
    if name == "convert_element_type":  # bfloat16 <-> float32 is the backends' own op
        src, dst = e.invars[0].aval.dtype, e.params["new_dtype"]
        # (as are float8 <-> float32 and float16 -> float8, the second rounding of a result)
        return not (src == _F32 or dst == _F32 or (src == _F16 and dst in ROUNDS_THROUGH))
    return True


def _convert(x, dtype, weak: bool, out: list, source_info) -> core.Var:
    v = core.Var(x.aval.update(dtype=dtype, weak_type=weak))
    out.append(
        core.JaxprEqn(
            core.primitives["convert_element_type"],
            [x],
            dict(new_dtype=dtype, weak_type=weak),
            [v],
            source_info,
        )
    )
    return v


def _round(x, narrow, weak: bool, out: list, src, o=None) -> core.Var:
    """float32 ``x`` rounded to the narrow float ``narrow`` as XLA rounds an operation's result
    (through float16 for most float8 types: ``float_normalization.ROUNDS_THROUGH``), into
    ``o`` when given."""
    via = ROUNDS_THROUGH.get(narrow)
    if via is not None:
        x = _convert(x, via, False, out, src)
    if o is None:
        return _convert(x, narrow, weak, out, src)
    params = dict(new_dtype=narrow, weak_type=weak)
    out.append(core.JaxprEqn(core.primitives["convert_element_type"], [x], params, [o], src))
    return o


def _widen_param(value):
    if isinstance(value, np.dtype) and dtypes.is_ml_float(value):
        return _F32
    if type(value) is tuple and any(isinstance(v, np.dtype) for v in value):
        return tuple(map(_widen_param, value))
    return value


def _bind(name: str, args, out: list, src, **params) -> core.Var:
    """A new float32 equation ``name(*args)`` appended to ``out``; its output."""
    v = core.Var(args[0].aval.update(weak_type=False))
    out.append(core.JaxprEqn(core.primitives[name], list(args), params, [v], src))
    return v


def _rewrite_logistic(e: core.JaxprEqn, out: list) -> None:
    """``logistic`` as XLA expands it before widening, ``1 / (1 + exp(-x))``, each step
    rounded to bfloat16 (``fungrad.float_normalization.EXPANDED``)."""
    src, (x,), (o,) = e.source_info, e.invars, e.outvars
    narrow = o.aval.dtype
    x = _widen_literal(x) if type(x) is core.Literal else _convert(x, _F32, False, out, src)
    one = core.Literal(np.float32(1), x.aval.update(shape=(), weak_type=False))

    def rounded(v):
        return _convert(_round(v, narrow, False, out, src), _F32, False, out, src)

    neg = _bind("neg", [x], out, src)
    if narrow == dtypes.float8_e8m0fnu:  # (no sign: -x rounds to NaN there, as in XLA)
        neg = rounded(neg)
    ex = rounded(_bind("exp", [neg], out, src))
    d = rounded(_bind("add", [ex, one], out, src))
    r = core.Var(d.aval)
    out.append(core.JaxprEqn(core.primitives["div"], [one, d], {}, [r], src))
    _round(r, narrow, o.aval.weak_type, out, src, o)


def _rewrite_integer_pow(e: core.JaxprEqn, out: list) -> None:
    """``x ** y`` as XLA expands it before widening: binary powering, each multiplication
    rounded to bfloat16 (``fungrad.float_normalization.integer_pow_steps``)."""
    src, (x,), (o,), y = e.source_info, e.invars, e.outvars, e.params["y"]
    narrow = o.aval.dtype
    x = _widen_literal(x) if type(x) is core.Literal else _convert(x, _F32, False, out, src)
    vals = {"x": x}
    for dst, a, b in integer_pow_steps(y):
        if b is None:
            vals[dst] = vals[a]
            continue
        v = _bind("mul", [vals[a], vals[b]], out, src)
        vals[dst] = _convert(_round(v, narrow, False, out, src), _F32, False, out, src)
    r = vals["acc"]
    if y < 0:
        one = core.Literal(np.float32(1), r.aval.update(shape=(), weak_type=False))
        q = core.Var(r.aval)
        out.append(core.JaxprEqn(core.primitives["div"], [one, r], {}, [q], src))
        r = q
    _round(r, narrow, o.aval.weak_type, out, src, o)


def _rewrite(e: core.JaxprEqn, out: list) -> None:
    src = e.source_info
    if e.primitive.name == "logistic":
        _rewrite_logistic(e, out)
        return
    if e.primitive.name == "integer_pow" and e.params["y"] != 0:
        _rewrite_integer_pow(e, out)
        return
    if e.primitive.name == "convert_element_type":
        # X -> bfloat16 as X -> float32 -> bfloat16, bfloat16 -> X as bfloat16 -> float32 -> X
        (x,), (o,) = e.invars, e.outvars
        if type(x) is core.Literal:
            x = _widen_literal(x)
        elif x.aval.dtype != _F32:
            x = _convert(x, _F32, x.aval.weak_type, out, src)
        if o.aval.dtype == _F32:
            out.append(e.replace(invars=[x]))
            return
        y = x if x.aval.dtype == _F32 else _convert(x, _F32, o.aval.weak_type, out, src)
        params = dict(e.params, new_dtype=o.aval.dtype)
        out.append(core.JaxprEqn(e.primitive, [y], params, [o], src))
        return
    invars = []
    for x in e.invars:
        if not _is_narrow(x.aval):
            invars.append(x)
        elif type(x) is core.Literal:
            invars.append(_widen_literal(x))
        else:
            invars.append(_convert(x, _F32, x.aval.weak_type, out, src))
    params = {k: _widen_param(v) for k, v in e.params.items()}
    outvars, rounds = [], []
    for o in e.outvars:
        if _is_narrow(o.aval):
            w = core.Var(o.aval.update(dtype=_F32))
            outvars.append(w)
            rounds.append((w, o))
        else:
            outvars.append(o)
    out.append(core.JaxprEqn(e.primitive, invars, params, outvars, src))
    for w, o in rounds:
        _round(w, o.aval.dtype, o.aval.weak_type, out, src, o)


def _widen_literal(x: core.Literal) -> core.Literal:
    val = to_float32(np.asarray(x.val, x.aval.dtype))[()]
    return core.Literal(val, x.aval.update(dtype=_F32))
