"""Dot-product algorithms: JAX's :class:`DotAlgorithm` and :class:`DotAlgorithmPreset`.

``precision=`` of ``dot_general`` (and of dot, conv_general_dilated, ``fungrad.numpy``'s dot,
matmul, einsum, ...) may name an algorithm instead of a :class:`~fungrad.lax.Precision`: the
types the two operands are rounded to before multiplying and the type the products are summed
in. fungrad applies an algorithm to floating-point operands as a composition of existing
primitives, so it differentiates, batches and compiles like the rest:

* an operand is rounded to the algorithm's input type: float16 by a round trip through
  float16, TensorFloat-32 (8 exponent bits, 10 mantissa bits) and bfloat16 (8, 7) by
  ``reduce_precision`` (fungrad has no such dtypes: the rounded values stay float32);
* the product is summed in the accumulation type (float16 accumulation: fungrad sums float16
  products in float32 and rounds the result, which is what JAX's CPU backend does too; float64
  accumulation needs ``enable_x64``, without it fungrad has no float64 and sums in float32);
* the result has ``preferred_element_type`` if given, else the operands' dtype (JAX's CPU
  result dtypes).

Integer and bool operands are multiplied exactly whatever the algorithm (as in JAX). Presets
needing float8 operands (``ANY_F8_*``) and ``BF16_BF16_BF16`` (bfloat16 accumulation) raise a
ValueError, as JAX's CPU backend does; the ``_X3``/``_X6``/``_X9`` presets, which emulate
float32 products with several bfloat16/TF32 ones, compute the float32 product they emulate.
"""

from __future__ import annotations

import enum
import operator
from typing import Any, NamedTuple

import numpy as np

__all__ = ["DotAlgorithm", "DotAlgorithmPreset"]


class DotAlgorithm(NamedTuple):
    """An explicit dot algorithm (``jax.lax.DotAlgorithm``): the operands are rounded to
    ``lhs_precision_type`` / ``rhs_precision_type`` and the products summed in
    ``accumulation_type``. fungrad supports float16, float32 and float64 types with component
    counts and ``num_primitive_operations`` of 1; ``allow_imprecise_accumulation`` permits
    what fungrad never does (its sums are always at the accumulation type's precision)."""

    lhs_precision_type: Any
    rhs_precision_type: Any
    accumulation_type: Any
    lhs_component_count: int = 1
    rhs_component_count: int = 1
    num_primitive_operations: int = 1
    allow_imprecise_accumulation: bool = False


class DotAlgorithmPreset(enum.Enum):
    """Named dot algorithms (``jax.lax.DotAlgorithmPreset``), ``LHS_RHS_ACCUMULATION``; also
    accepted by name (``precision="F16_F16_F32"``). See the module docstring for what each does
    in fungrad."""

    DEFAULT = enum.auto()
    ANY_F8_ANY_F8_F32 = enum.auto()
    ANY_F8_ANY_F8_F32_FAST_ACCUM = enum.auto()
    ANY_F8_ANY_F8_ANY = enum.auto()
    ANY_F8_ANY_F8_ANY_FAST_ACCUM = enum.auto()
    F16_F16_F16 = enum.auto()
    F16_F16_F32 = enum.auto()
    BF16_BF16_BF16 = enum.auto()
    BF16_BF16_F32 = enum.auto()
    BF16_BF16_F32_X3 = enum.auto()
    BF16_BF16_F32_X6 = enum.auto()
    BF16_BF16_F32_X9 = enum.auto()
    TF32_TF32_F32 = enum.auto()
    TF32_TF32_F32_X3 = enum.auto()
    F32_F32_F32 = enum.auto()
    F64_F64_F64 = enum.auto()

    def __repr__(self) -> str:
        return f"DotAlgorithmPreset.{self.name}"

    def __str__(self) -> str:
        return self.name


_F16, _F32, _F64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
# Rounding formats without a numpy dtype: (exponent bits, mantissa bits), kept in float32.
_BF16, _TF32 = (8, 7), (8, 10)

# preset -> (operand rounding, accumulation dtype); None: keep the operands' dtype
_PRESETS = {
    "DEFAULT": (None, None),
    "F16_F16_F16": (_F16, _F16),
    "F16_F16_F32": (_F16, _F32),
    "BF16_BF16_F32": ("bf16_unless_f32", _F32),
    "BF16_BF16_F32_X3": (_F32, _F32),
    "BF16_BF16_F32_X6": (_F32, _F32),
    "BF16_BF16_F32_X9": (_F32, _F32),
    "TF32_TF32_F32": (_TF32, _F32),
    "TF32_TF32_F32_X3": (_F32, _F32),
    "F32_F32_F32": (_F32, _F32),
    "F64_F64_F64": (_F64, _F64),
}


def as_algorithm(precision):
    """``precision`` as a :class:`DotAlgorithm` or :class:`DotAlgorithmPreset` if it is one
    (or a preset's name), else None."""
    if isinstance(precision, (DotAlgorithm, DotAlgorithmPreset)):
        return precision
    if isinstance(precision, str) and precision in DotAlgorithmPreset.__members__:
        return DotAlgorithmPreset[precision]
    return None


def _plan(fname: str, algorithm, dtype: np.dtype):
    """(lhs rounding, rhs rounding, accumulation dtype) of ``algorithm`` for float operands
    of ``dtype``; a rounding is a dtype, an (exponent, mantissa) pair, or None."""
    if isinstance(algorithm, DotAlgorithmPreset):
        name = algorithm.name
        if name not in _PRESETS:
            why = (
                "needs float8 operands, which fungrad does not have"
                if "F8" in name
                else "accumulates in bfloat16 (fungrad computes bfloat16 in float32)"
            )
            raise ValueError(
                f"{fname}: the precision {name!r} is not supported: it {why} "
                "(JAX's CPU backend rejects it too); use "
                "DotAlgorithmPreset.F32_F32_F32 or BF16_BF16_F32"
            )
        rounding, acc = _PRESETS[name]
        if rounding == "bf16_unless_f32":  # JAX keeps float32 operands of BF16_BF16_F32
            rounding = None if dtype == _F32 else _BF16
        return rounding, rounding, acc
    counts = (
        algorithm.lhs_component_count,
        algorithm.rhs_component_count,
        algorithm.num_primitive_operations,
    )
    if any(operator.index(c) != 1 for c in counts):
        raise ValueError(
            f"{fname}: DotAlgorithm with component counts or "
            f"num_primitive_operations other than 1 is not supported, got "
            f"{algorithm}; use DotAlgorithmPreset.F32_F32_F32 for float32 products"
        )
    types = []
    for what in ("lhs_precision_type", "rhs_precision_type", "accumulation_type"):
        t = getattr(algorithm, what)
        try:
            dt = np.dtype(t)
        except TypeError:
            dt = None
        if dt not in (_F16, _F32, _F64):
            raise ValueError(
                f"{fname}: DotAlgorithm {what} must be float16, float32 or "
                f"float64 in fungrad, got {t!r}"
            )
        types.append(dt)
    return tuple(types)


def apply_algorithm(fname: str, x, y, algorithm, preferred_element_type):
    """``(x, y, preferred, finish)``: ``x`` and ``y`` (promoted operands of one dtype)
    rounded as ``algorithm`` asks, the dtype to contract them into, and a function taking the
    contraction to the caller's result dtype. Non-float operands are returned unchanged."""
    from fungrad import dtypes
    from fungrad.core import get_aval
    from fungrad.lax import elementwise as ew
    from fungrad.lax.reduce_precision import reduce_precision

    dtype = get_aval(x).dtype
    if dtypes.kind(dtype) != "f":
        _plan(fname, algorithm, _F32)  # unsupported algorithms are rejected all the same
        return x, y, preferred_element_type, lambda out: out
    weak = get_aval(x).weak_type and get_aval(y).weak_type
    lhs_round, rhs_round, acc = _plan(fname, algorithm, dtype)
    acc = dtypes.canonicalize_dtype(acc) if acc is not None else dtype
    out_dtype = (
        dtype
        if preferred_element_type is None
        else dtypes.canonicalize_dtype(preferred_element_type)
    )
    # the common dtype the rounded operands are contracted in
    work = max(
        (r for r in (lhs_round, rhs_round) if isinstance(r, np.dtype)),
        key=lambda d: d.itemsize,
        default=dtype,
    )
    work = dtypes.canonicalize_dtype(work)
    if not isinstance(lhs_round, np.dtype) or not isinstance(rhs_round, np.dtype):
        work = np.dtype(max(work, _F32, key=lambda d: d.itemsize))

    def rounded(v, rounding):
        if isinstance(rounding, np.dtype):
            v = ew.convert_element_type(v, dtypes.canonicalize_dtype(rounding))
            return ew.convert_element_type(v, work)
        v = ew.convert_element_type(v, work)
        return v if rounding is None else reduce_precision(v, *rounding)

    x, y = rounded(x, lhs_round), rounded(y, rhs_round)

    def finish(out):
        return ew.convert_element_type(
            out, out_dtype, weak_type=weak and preferred_element_type is None
        )

    return x, y, acc, finish
