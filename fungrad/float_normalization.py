"""bfloat16 and float8 operations computed in float32 and rounded back, for the eager impls.

(bfloat16 is named below; JAX's float8 types, ``dtypes.FLOAT8``, go the same way: ml_dtypes'
``astype`` from float32 rounds as XLA's conversion does, overflow and NaN included, bit for
bit.)

numpy has no bfloat16 arithmetic of its own (ml_dtypes' ufuncs cover a few functions, none of
numpy's linear algebra or reductions), and XLA's CPU backend computes every bfloat16
operation in float32, rounding each result to bfloat16 (to nearest, ties to even: XLA's
``FloatNormalization``). :func:`widened_impl` does the same around a primitive's numpy impl:
bfloat16 operands become float32, a bfloat16 dtype in the params becomes float32, and each
output the shape rule says is bfloat16 is rounded back. The compiled path does it on the jaxpr
(``fungrad/ir/float_normalization.py``), so eager and jit agree bit for bit.

Left alone: operations that only move or reinterpret data (their impls work on bfloat16
arrays as they are, NaN payloads included), and higher-order primitives (a jaxpr or function
in their params: their bodies' own primitives are widened one by one when they run).
"""

from __future__ import annotations

import numpy as np

from fungrad import dtypes

__all__ = ["touches_narrow_float", "widened_impl"]

NATIVE = frozenset(
    {
        "bitcast_convert_type",
        "broadcast_in_dim",
        "concatenate",
        "copy",
        "copy_p",
        "dynamic_slice",
        "expand_dims",
        "reshape",
        "rev",
        "slice",
        "squeeze",
        "transpose",
    }
)
"""Primitives whose impls handle ml_dtypes arrays directly (data movement, bit casts)."""


def integer_pow_steps(y: int):
    """XLA's expansion of ``x ** y`` (JAX's ``_integer_pow`` lowering): binary powering,
    as ``(op, a, b)`` steps on named values (``"x"``, ``"acc"``), each step one rounded
    multiplication; ``y < 0`` ends with a reciprocal. Both the numpy version here and the
    jaxpr version (``ir/float_normalization.py``) follow these steps."""
    steps, acc, y_abs = [], False, abs(y)
    while y_abs > 0:
        if y_abs & 1:
            steps.append(("acc", "acc", "x") if acc else ("acc", "x", None))
            acc = True
        y_abs >>= 1
        if y_abs > 0:
            steps.append(("x", "x", "x"))
    return steps


def _integer_pow(x: np.ndarray, out_dtype, *, y: int) -> np.ndarray:
    """bfloat16 ``integer_pow`` as XLA computes it: repeated rounded multiplications."""
    vals = {"x": to_float32(x)}
    with np.errstate(all="ignore"):
        for dst, a, b in integer_pow_steps(y):
            v = vals[a] if b is None else vals[a] * vals[b]
            vals[dst] = to_float32(round_to(v, out_dtype))
        acc = vals["acc"]
        return round_to(np.float32(1) / acc if y < 0 else acc, out_dtype)


def _logistic(x: np.ndarray, out_dtype) -> np.ndarray:
    """bfloat16 ``logistic`` as XLA's CPU backend computes it: expanded to ``1 / (1 +
    exp(-x))`` before the float32 widening, so each of the three steps rounds."""
    with np.errstate(all="ignore"):
        neg = -to_float32(x)
        if out_dtype == dtypes.float8_e8m0fnu:  # (no sign: -x rounds to NaN there, as in XLA)
            neg = to_float32(round_to(neg, out_dtype))
        e = to_float32(round_to(np.exp(neg), out_dtype))
        d = to_float32(round_to(np.float32(1) + e, out_dtype))
        return round_to(np.float32(1) / d, out_dtype)


EXPANDED = {"logistic": _logistic, "integer_pow": _integer_pow}
"""Primitives XLA expands into several operations before it widens bfloat16 (each of those
rounds): the numpy version of the expansion, ``fn(x, dtype, **params)``."""


def touches_narrow_float(avals) -> bool:
    """Whether a bfloat16 or float8 (an ml_dtypes float) is among ``avals`` (numpy kind
    ``"V"``, float8_e5m2's is ``"f"``: a cheap first test, float0 is one too)."""
    return any(is_narrow_dtype(a.dtype) for a in avals)


def is_narrow_dtype(dt) -> bool:
    """Whether ``dt`` is an ml_dtypes float (computed widened); cheap for other dtypes."""
    return (dt.kind == "V" or dt is _F8E5M2) and dtypes.is_ml_float(dt)


_F8E5M2 = dtypes.float8_e5m2  # (ml_dtypes gives it numpy kind "f"; a singleton dtype)

ROUNDS_THROUGH = {dt: dtypes.float16 for dt in dtypes.FLOAT8 if dt != dtypes.float8_e8m0fnu}
"""The float8 types XLA's CPU backend computes in float16 (its ``FloatNormalization`` for
F8 types), so an operation's float32 result is rounded to float16 first and then to the
float8 type (two roundings, as there); float8_e8m0fnu (beyond float16's range) and bfloat16
round once, from float32."""


def round_to(v, dt):
    """float32 (numpy) ``v`` rounded to the narrow float ``dt`` as XLA rounds an operation's
    result (through float16 for most float8 types, see :data:`ROUNDS_THROUGH`)."""
    via = ROUNDS_THROUGH.get(dt)
    v = np.asarray(v)
    return (v if via is None else v.astype(via)).astype(dt)


def _holds_function(value) -> bool:
    if isinstance(value, (tuple, list)):
        return any(_holds_function(v) for v in value)
    return callable(value) or hasattr(value, "eqns") or hasattr(value, "jaxpr")


def _round_once(v, dt):
    return np.asarray(v).astype(dt)


def _widen_dtype(value):
    if isinstance(value, np.dtype) and dtypes.is_ml_float(value):
        return dtypes.float32
    if isinstance(value, tuple) and any(isinstance(v, np.dtype) for v in value):
        return tuple(_widen_dtype(v) for v in value)
    return value


def _float8_table(dt: np.dtype) -> np.ndarray:
    """The float32 value of each of ``dt``'s 256 bit patterns, as XLA converts them: ml_dtypes'
    values, except that XLA's NaN is always the positive quiet NaN (ml_dtypes gives the fnuz
    types' only NaN, ``0x80``, the sign bit)."""
    with np.errstate(all="ignore"):
        table = np.arange(256, dtype=np.uint8).view(dt).astype(np.float32)
    table[np.isnan(table)] = np.float32(np.nan)
    return table


FLOAT8_TO_F32 = {dt: _float8_table(dt) for dt in dtypes.FLOAT8}
"""Each float8 dtype's 256 values as float32 (index: the bit pattern), as XLA converts them."""


def to_float32(v):
    """An ml_dtypes float array or scalar as float32, exactly, as XLA converts it."""
    table = FLOAT8_TO_F32.get(v.dtype)
    if table is not None:
        return table[np.asarray(v).view(np.uint8)]
    return np.asarray(v, np.float32)[()] if np.ndim(v) == 0 else np.asarray(v, np.float32)


def _widen_value(v):
    dt = getattr(v, "dtype", None)
    if dt is not None and is_narrow_dtype(dt):
        return to_float32(v)
    return v


def widened_impl(primitive, params: dict, out_avals):
    """``fn(*numpy_values)``: ``primitive``'s impl with ``params`` on operands that include
    bfloat16, computed in float32 and rounded to the dtypes of ``out_avals`` (a list for
    ``multiple_results`` primitives). The plain impl where no widening applies."""
    impl = primitive.impl
    if primitive.name in EXPANDED and params.get("y") != 0:
        expanded, dtype = EXPANDED[primitive.name], out_avals.dtype

        def expand(x):
            with np.errstate(all="ignore"):
                return expanded(np.asarray(x), dtype, **params)[()]

        return expand
    if primitive.name in NATIVE or any(_holds_function(v) for v in params.values()):
        return lambda *vals: impl(*vals, **params)
    wide_params = {k: _widen_dtype(v) for k, v in params.items()}
    multiple = primitive.multiple_results
    targets = [a.dtype for a in (out_avals if multiple else [out_avals])]
    # a conversion rounds once (XLA converts float32 -> float8 directly), a result of
    # arithmetic as XLA's CPU computes it (through float16 for most float8 types)
    rnd = _round_once if primitive.name == "convert_element_type" else round_to

    def fn(*vals):
        with np.errstate(all="ignore"):  # (ml_dtypes' casts of NaN warn; impls never do)
            out = impl(*map(_widen_value, vals), **wide_params)
            outs = [
                rnd(o, t)[()] if dtypes.is_ml_float(t) else o
                for o, t in zip(out if multiple else [out], targets)
            ]
        return outs if multiple else outs[0]

    return fn
