"""``reduce_precision``: round floats to a narrower floating-point format, kept in their dtype.

``reduce_precision(x, exponent_bits, mantissa_bits)`` gives the value ``x`` would have in a
format with that many exponent and mantissa bits (float16 is ``(5, 10)``, bfloat16 ``(8, 7)``),
as XLA's ReducePrecision defines it:

* the mantissa is rounded to ``mantissa_bits`` bits, to nearest with ties to even, by adding a
  bias to the bit pattern and clearing the dropped bits;
* then, if the exponent has fewer bits, values above the format's largest exponent become
  signed infinities and values at or below its smallest normal exponent become signed zeros
  (the narrow format has no subnormals);
* NaNs stay NaNs.

The same bit manipulation is written once (:func:`_round_bits`) over a small set of scalar
operations, which the numpy impl and the kernel lowering both provide. As in JAX the primitive
is linear for differentiation: its jvp and transpose apply it to the tangent / cotangent.
"""

from __future__ import annotations

import operator

import numpy as np

from fungrad import core, dtypes
from fungrad.lax.utils import operand, standard_primitive
from fungrad.lowering import kernel
from fungrad.transforms.jvp import deflinear
from fungrad.transforms.transpose import deflinear_transpose
from fungrad.transforms.vmap import defvectorized

__all__ = ["reduce_precision", "reduce_precision_p"]

_UINT = {2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}


def _formats(dtype: np.dtype) -> tuple[int, int, np.dtype]:
    """(exponent bits, mantissa bits, unsigned int of the same width) of a float dtype."""
    info = np.finfo(dtype)
    return info.nexp, info.nmant, _UINT[dtype.itemsize]


def _round_bits(x, exponent_bits: int, mantissa_bits: int, dtype, ops):
    """The reduced value of ``x`` built from ``ops``: ``bitcast(v, dt)``, ``const(v, dt)``,
    ``op(name, a, b)`` (add/and/or/shr_logical/gt/le), ``select(p, a, b)``, ``isnan(v)``."""
    src_exp, src_mant, uint = _formats(dtype)
    nbits = 8 * dtype.itemsize
    bits = ops.bitcast(x, uint)
    if mantissa_bits < src_mant:
        shift = src_mant - mantissa_bits
        last_bit = 1 << shift
        # round to nearest, ties to even: add 0111..1 plus the lowest kept bit, then truncate
        kept_lsb = ops.op(
            "shr_logical", ops.op("and", bits, ops.const(last_bit, uint)), ops.const(shift, uint)
        )
        bias = ops.op("add", kept_lsb, ops.const((last_bit >> 1) - 1, uint))
        bits = ops.op(
            "and", ops.op("add", bits, bias), ops.const(~(last_bit - 1) & ((1 << nbits) - 1), uint)
        )
    if exponent_bits < src_exp:
        sign_mask = 1 << (nbits - 1)
        exp_mask = ((1 << src_exp) - 1) << src_mant
        bias = (1 << (src_exp - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        max_exp, min_exp = bias + reduced_bias, bias - reduced_bias
        exponent = ops.op("and", bits, ops.const(exp_mask, uint))
        overflows = ops.op("gt", exponent, ops.const(max_exp << src_mant, uint))
        underflows = ops.op("le", exponent, ops.const(min_exp << src_mant, uint))
        signed_zero = ops.op("and", bits, ops.const(sign_mask, uint))
        signed_inf = ops.op("or", signed_zero, ops.const(exp_mask, uint))
        bits = ops.select(overflows, signed_inf, ops.select(underflows, signed_zero, bits))
    out = ops.bitcast(bits, dtype)
    if mantissa_bits < src_mant or exponent_bits < src_exp:
        out = ops.select(ops.isnan(x), x, out)
    return out


class _NumpyOps:
    _FUNCS = {
        "add": np.add,
        "and": np.bitwise_and,
        "or": np.bitwise_or,
        "shr_logical": np.right_shift,
        "gt": np.greater,
        "le": np.less_equal,
    }

    @staticmethod
    def bitcast(v, dt):
        return np.asarray(v).view(dt)

    @staticmethod
    def const(v, dt):
        return np.asarray(v, dtype=dt)

    def op(self, name, a, b):
        return self._FUNCS[name](a, b)

    @staticmethod
    def select(p, a, b):
        return np.where(p, a, b)

    @staticmethod
    def isnan(v):
        return np.isnan(v)


class _KernelOps:
    def __init__(self, ctx):
        self.ctx = ctx

    def bitcast(self, v, dt):
        return self.ctx.bitcast(v, dt)

    def const(self, v, dt):
        return self.ctx.const(v, dt)

    def op(self, name, a, b):
        return self.ctx.op(name, a, b)

    def select(self, p, a, b):
        return self.ctx.select(p, a, b)

    def isnan(self, v):
        return self.ctx.op("isnan", v)


def _reduce_precision_impl(x, *, exponent_bits, mantissa_bits):
    x = np.asarray(x)
    with np.errstate(over="ignore"):
        out = _round_bits(x, exponent_bits, mantissa_bits, x.dtype, _NumpyOps())
    out = np.asarray(out, dtype=x.dtype)
    return out[()] if x.ndim == 0 else out


def _reduce_precision_abstract_eval(x, *, exponent_bits, mantissa_bits):
    if dtypes.kind(x.dtype) != "f":
        raise TypeError(
            f"reduce_precision: operand must be a floating-point array, got "
            f"{x.str_short()}; convert it first (e.g. x.astype(float32))"
        )
    return x


reduce_precision_p = standard_primitive(
    "reduce_precision", _reduce_precision_impl, _reduce_precision_abstract_eval
)
deflinear(reduce_precision_p)
deflinear_transpose(
    reduce_precision_p, lambda ct, x, **params: [reduce_precision_p.bind(ct, **params)]
)
defvectorized(reduce_precision_p)


def _reduce_precision_lowering(ctx, x, *, exponent_bits, mantissa_bits):
    ops = _KernelOps(ctx)
    return kernel.from_fn(
        x.shape,
        x.dtype,
        lambda idx: _round_bits(x.at(idx), exponent_bits, mantissa_bits, np.dtype(x.dtype), ops),
        "reduce_precision",
    )


kernel.register_lowering(reduce_precision_p, _reduce_precision_lowering)


def reduce_precision(operand_, exponent_bits: int, mantissa_bits: int):
    """``operand_`` rounded to a float format with ``exponent_bits`` exponent bits and
    ``mantissa_bits`` mantissa bits, keeping its dtype (``jax.lax.reduce_precision``).

    Args:
      operand_: a floating-point array (or Python float).
      exponent_bits: at least 1; more bits than the dtype has change nothing.
      mantissa_bits: at least 0; more bits than the dtype has change nothing.

    Returns:
      An array of ``operand_``'s shape and dtype. Differentiable: the derivative is
      reduce_precision applied to the tangent, as in JAX.

    Example::

        lax.reduce_precision(fnp.float32(1 / 3), exponent_bits=8, mantissa_bits=7)
        # 0.333984375, the bfloat16 value nearest 1/3
    """
    x = operand(operand_, "reduce_precision")
    try:
        e, m = operator.index(exponent_bits), operator.index(mantissa_bits)
    except TypeError:
        raise TypeError(
            "reduce_precision: exponent_bits and mantissa_bits must be integers, "
            f"got {exponent_bits!r} and {mantissa_bits!r}"
        ) from None
    if e < 1 or m < 0:
        raise ValueError(
            f"reduce_precision: needs exponent_bits >= 1 and mantissa_bits >= 0, "
            f"got exponent_bits={e}, mantissa_bits={m}"
        )
    aval = core.get_aval(x)
    if dtypes.kind(aval.dtype) == "f":
        src_e, src_m, _ = _formats(aval.dtype)
        e, m = min(e, src_e), min(m, src_m)  # extra bits change nothing: one cache entry
    return reduce_precision_p.bind(x, exponent_bits=int(e), mantissa_bits=int(m))
