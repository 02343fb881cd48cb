"""bfloat16 operations computed in float32 and rounded back, for the eager impls.

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
    vals = {"x": x.astype(np.float32)}
    with np.errstate(all="ignore"):
        for dst, a, b in integer_pow_steps(y):
            v = vals[a] if b is None else vals[a] * vals[b]
            vals[dst] = v.astype(out_dtype).astype(np.float32)
        acc = vals["acc"]
        return np.asarray(np.float32(1) / acc if y < 0 else acc).astype(out_dtype)


def _logistic(x: np.ndarray, out_dtype) -> np.ndarray:
    """bfloat16 ``logistic`` as XLA's CPU backend computes it: expanded to ``1 / (1 +
    exp(-x))`` before the float32 widening, so each of the three steps rounds."""
    with np.errstate(all="ignore"):
        e = np.exp(-x.astype(np.float32)).astype(out_dtype).astype(np.float32)
        d = (np.float32(1) + e).astype(out_dtype).astype(np.float32)
        return np.asarray(np.float32(1) / d).astype(out_dtype)


EXPANDED = {"logistic": _logistic, "integer_pow": _integer_pow}
"""Primitives XLA expands into several operations before it widens bfloat16 (each of those
rounds): the numpy version of the expansion, ``fn(x, dtype, **params)``."""


def touches_narrow_float(avals) -> bool:
    """Whether a bfloat16 (an ml_dtypes float) is among ``avals`` (numpy kind ``"V"``: a cheap
    first test, float0 is one too)."""
    return any(a.dtype.kind == "V" and dtypes.is_ml_float(a.dtype) for a in avals)


def _holds_function(value) -> bool:
    if isinstance(value, (tuple, list)):
        return any(_holds_function(v) for v in value)
    return callable(value) or hasattr(value, "eqns") or hasattr(value, "jaxpr")


def _widen_dtype(value):
    if isinstance(value, np.dtype) and dtypes.is_ml_float(value):
        return dtypes.float32
    if isinstance(value, tuple) and any(isinstance(v, np.dtype) for v in value):
        return tuple(_widen_dtype(v) for v in value)
    return value


def _widen_value(v):
    dt = getattr(v, "dtype", None)
    if dt is not None and dt.kind == "V" and dtypes.is_ml_float(dt):
        return np.asarray(v, np.float32)[()] if np.ndim(v) == 0 else np.asarray(v, np.float32)
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

    def fn(*vals):
        with np.errstate(all="ignore"):  # (ml_dtypes' casts of NaN warn; impls never do)
            out = impl(*map(_widen_value, vals), **wide_params)
            outs = [
                np.asarray(o).astype(t)[()] if dtypes.is_ml_float(t) else o
                for o, t in zip(out if multiple else [out], targets)
            ]
        return outs if multiple else outs[0]

    return fn
