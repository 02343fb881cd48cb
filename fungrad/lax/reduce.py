"""Reductions: reduce_sum/max/min/prod/and/or/xor, argmax/argmin, cumulative reductions
(cumsum/cumprod/cummax/cummin/cumlogsumexp) and windowed reductions (reduce_window_sum/max/min).

Each primitive reduces with a monoid whose identity is the value of an empty reduction, as in
XLA: ``reduce_max`` of an empty float axis is ``-inf`` (``iinfo.min`` for ints, False for bool),
``reduce_and`` of nothing is all ones. Float max/min propagate NaN; argmax/argmin return the
index of the first NaN. The generic wrappers ``lax.reduce`` and ``lax.reduce_window`` recognise
``lax.add``/``lax.mul``/``lax.max``/``lax.min``/``lax.bitwise_*`` with their identity as init
value and bind the matching primitive (fungrad has no reduction over arbitrary computations).
"""

from __future__ import annotations

import operator

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from fungrad import core, dtypes
from fungrad.core import ShapedArray
from fungrad.lax.utils import (
    ANY,
    FLOAT,
    INT,
    INT_OR_BOOL,
    NUMERIC,
    check_kinds,
    operand,
    standard_primitive,
)

__all__ = [
    "reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or",
    "reduce_xor", "argmax", "argmin", "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp",
    "reduce", "reduce_window", "padtype_to_pads",
    "reduce_sum_p", "reduce_max_p", "reduce_min_p", "reduce_prod_p", "reduce_and_p",
    "reduce_or_p", "reduce_xor_p", "argmax_p", "argmin_p", "cumsum_p", "cumprod_p", "cummax_p",
    "cummin_p", "cumlogsumexp_p", "reduce_window_sum_p", "reduce_window_max_p",
    "reduce_window_min_p",
]


# -- shared helpers ---------------------------------------------------------------------------

def checked_bind(prim, *args, **params):
    """Check the avals with ``prim``'s abstract_eval, then bind. Eager calls run the numpy impl
    first, whose errors would not name the lax operation and its shapes."""
    prim.abstract_eval(*(core.get_aval(a) for a in args), **params)
    return prim.bind(*args, **params)


def _int_tuple(name: str, what: str, values) -> tuple[int, ...]:
    """``values`` (a sequence of integers) as a tuple of Python ints, for a hashable param."""
    try:
        return tuple(operator.index(v) for v in values)
    except TypeError:
        raise TypeError(f"{name}: {what} must be a sequence of integers, got {values!r}") from None


def _check_axes(name: str, x: ShapedArray, axes) -> None:
    if any(not 0 <= a < x.ndim for a in axes) or len(set(axes)) != len(axes):
        raise ValueError(f"{name}: axes {axes} are not distinct dimensions of an operand of "
                         f"shape {x.shape} (lax wants nonnegative axes; fungrad.numpy takes "
                         "negative ones)")


def _reduced_shape(shape, axes):
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _accumulation_dtype(dtype: np.dtype) -> np.dtype:
    # NOTE: float16 sums/products accumulate in float32 (rounded once at the end), so the
    # reference is the exactly rounded result rather than numpy's float16 accumulation.
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def max_identity(dtype: np.dtype):
    """The identity of ``max`` for ``dtype``: -inf, ``iinfo.min`` or False."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return dtype.type(-np.inf)
    if dtype.kind in "iu":
        return dtype.type(np.iinfo(dtype).min)
    return np.bool_(False)


def min_identity(dtype: np.dtype):
    """The identity of ``min`` for ``dtype``: inf, ``iinfo.max`` or True."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return dtype.type(np.inf)
    if dtype.kind in "iu":
        return dtype.type(np.iinfo(dtype).max)
    return np.bool_(True)


def _and_identity(dtype: np.dtype):
    """All bits set: -1 for signed ints, ``iinfo.max`` for unsigned, True for bool."""
    dtype = np.dtype(dtype)
    return np.bool_(True) if dtype.kind == "b" else np.array(-1).astype(dtype)[()]


def _reduction_abstract_eval(name: str, kinds):
    """abstract_eval of a reduction over ``axes``: same dtype and weak type, axes removed."""

    def abstract_eval(x, *, axes):
        check_kinds(name, x.dtype, kinds)
        _check_axes(name, x, axes)
        return ShapedArray(_reduced_shape(x.shape, axes), x.dtype, x.weak_type)

    return abstract_eval


def _ufunc_reduce(ufunc, x, axes, identity):
    with np.errstate(all="ignore"):
        out = ufunc.reduce(x, axis=axes, initial=identity)
    return np.asarray(out, dtype=x.dtype)[()]


# -- reduce_sum ... reduce_xor ---------------------------------------------------------------

def _reduce_sum_impl(x, *, axes):
    with np.errstate(all="ignore"):
        out = np.sum(x, axis=axes, dtype=_accumulation_dtype(x.dtype))
    return np.asarray(out).astype(x.dtype)[()]


def _reduce_sum_abstract_eval(x, *, axes):
    check_kinds("reduce_sum", x.dtype, NUMERIC)
    _check_axes("reduce_sum", x, axes)
    return ShapedArray(_reduced_shape(x.shape, axes), x.dtype, x.weak_type)


reduce_sum_p = standard_primitive("reduce_sum", _reduce_sum_impl, _reduce_sum_abstract_eval)


def reduce_sum(operand_, axes):
    """Sum over ``axes`` (a sequence of distinct dimensions).

    Args:
      operand_: a numeric array.
      axes: the (nonnegative) dimensions to reduce.

    Returns:
      The sums, with ``axes`` removed; an empty reduction gives 0.

    Example: ``reduce_sum(jnp.ones((2, 3)), (1,))`` is ``[3., 3.]``.
    """
    x = operand(operand_, "reduce_sum")
    return checked_bind(reduce_sum_p, x, axes=_int_tuple("reduce_sum", "axes", axes))


def _reduce_prod_impl(x, *, axes):
    with np.errstate(all="ignore"):
        out = np.prod(x, axis=axes, dtype=_accumulation_dtype(x.dtype))
    return np.asarray(out).astype(x.dtype)[()]


reduce_prod_p = standard_primitive("reduce_prod", _reduce_prod_impl,
                                   _reduction_abstract_eval("reduce_prod", NUMERIC))


def reduce_prod(operand_, axes):
    """Product over ``axes``; an empty reduction gives 1 (integers wrap on overflow)."""
    x = operand(operand_, "reduce_prod")
    return checked_bind(reduce_prod_p, x, axes=_int_tuple("reduce_prod", "axes", axes))


def _reduce_max_impl(x, *, axes):
    return _ufunc_reduce(np.maximum, x, axes, max_identity(x.dtype))


reduce_max_p = standard_primitive("reduce_max", _reduce_max_impl,
                                  _reduction_abstract_eval("reduce_max", ANY))


def reduce_max(operand_, axes):
    """Maximum over ``axes``. NaN propagates; an empty reduction gives -inf (floats),
    ``iinfo.min`` (ints) or False (bool)."""
    x = operand(operand_, "reduce_max")
    return checked_bind(reduce_max_p, x, axes=_int_tuple("reduce_max", "axes", axes))


def _reduce_min_impl(x, *, axes):
    return _ufunc_reduce(np.minimum, x, axes, min_identity(x.dtype))


reduce_min_p = standard_primitive("reduce_min", _reduce_min_impl,
                                  _reduction_abstract_eval("reduce_min", ANY))


def reduce_min(operand_, axes):
    """Minimum over ``axes``. NaN propagates; an empty reduction gives inf (floats),
    ``iinfo.max`` (ints) or True (bool)."""
    x = operand(operand_, "reduce_min")
    return checked_bind(reduce_min_p, x, axes=_int_tuple("reduce_min", "axes", axes))


def _reduce_and_impl(x, *, axes):
    return _ufunc_reduce(np.bitwise_and, x, axes, _and_identity(x.dtype))


reduce_and_p = standard_primitive("reduce_and", _reduce_and_impl,
                                  _reduction_abstract_eval("reduce_and", INT_OR_BOOL))


def reduce_and(operand_, axes):
    """Logical (bool) or bitwise (integer) AND over ``axes``; empty gives all bits set."""
    x = operand(operand_, "reduce_and")
    return checked_bind(reduce_and_p, x, axes=_int_tuple("reduce_and", "axes", axes))


def _reduce_or_impl(x, *, axes):
    return _ufunc_reduce(np.bitwise_or, x, axes, x.dtype.type(0))


reduce_or_p = standard_primitive("reduce_or", _reduce_or_impl,
                                 _reduction_abstract_eval("reduce_or", INT_OR_BOOL))


def reduce_or(operand_, axes):
    """Logical (bool) or bitwise (integer) OR over ``axes``; empty gives 0 / False."""
    x = operand(operand_, "reduce_or")
    return checked_bind(reduce_or_p, x, axes=_int_tuple("reduce_or", "axes", axes))


def _reduce_xor_impl(x, *, axes):
    return _ufunc_reduce(np.bitwise_xor, x, axes, x.dtype.type(0))


reduce_xor_p = standard_primitive("reduce_xor", _reduce_xor_impl,
                                  _reduction_abstract_eval("reduce_xor", INT_OR_BOOL))


def reduce_xor(operand_, axes):
    """Logical (bool) or bitwise (integer) XOR over ``axes``; empty gives 0 / False."""
    x = operand(operand_, "reduce_xor")
    return checked_bind(reduce_xor_p, x, axes=_int_tuple("reduce_xor", "axes", axes))


# -- argmax / argmin ----------------------------------------------------------------------------

def _arg_reduction_abstract_eval(name: str):
    def abstract_eval(x, *, axes, index_dtype):
        check_kinds(name, x.dtype, ANY)
        check_kinds(name, index_dtype, INT, "index_dtype")
        if len(axes) != 1:
            raise ValueError(f"{name}: reduces exactly one axis, got axes={axes}")
        _check_axes(name, x, axes)
        if x.shape[axes[0]] == 0:
            raise ValueError(f"{name}: the reduced dimension must be non-empty, got operand "
                             f"shape {x.shape} and axis {axes[0]}")
        return ShapedArray(_reduced_shape(x.shape, axes), index_dtype)

    return abstract_eval


def _argmax_impl(x, *, axes, index_dtype):
    # numpy's argmax, like XLA's, treats NaN as the maximum and returns the first one.
    return np.asarray(np.argmax(x, axis=axes[0])).astype(index_dtype)[()]


def _argmin_impl(x, *, axes, index_dtype):
    return np.asarray(np.argmin(x, axis=axes[0])).astype(index_dtype)[()]


argmax_p = standard_primitive("argmax", _argmax_impl, _arg_reduction_abstract_eval("argmax"))
argmin_p = standard_primitive("argmin", _argmin_impl, _arg_reduction_abstract_eval("argmin"))


def argmax(operand_, axis: int, index_dtype):
    """Index of the maximum along ``axis`` (the first one on ties; the first NaN if any).

    Args:
      operand_: an array (bool, integer or float).
      axis: the (nonnegative) dimension to reduce; it must be non-empty.
      index_dtype: an integer dtype for the result.

    Example: ``argmax(jnp.array([1., 3., 3.]), 0, jnp.int32)`` is ``1``.
    """
    x = operand(operand_, "argmax")
    return checked_bind(argmax_p, x, axes=(operator.index(axis),),
                        index_dtype=dtypes.canonicalize_dtype(index_dtype))


def argmin(operand_, axis: int, index_dtype):
    """Index of the minimum along ``axis`` (the first one on ties; the first NaN if any)."""
    x = operand(operand_, "argmin")
    return checked_bind(argmin_p, x, axes=(operator.index(axis),),
                        index_dtype=dtypes.canonicalize_dtype(index_dtype))


# -- cumulative reductions ----------------------------------------------------------------------

def _cumulative_abstract_eval(name: str, kinds):
    def abstract_eval(x, *, axis, reverse):
        check_kinds(name, x.dtype, kinds)
        if not 0 <= axis < x.ndim:
            raise ValueError(f"{name}: axis {axis} is not a dimension of an operand of shape "
                             f"{x.shape} (lax wants a nonnegative axis)")
        return ShapedArray(x.shape, x.dtype, x.weak_type)

    return abstract_eval


def _cumulative_impl(accumulate):
    """impl from ``accumulate(x, axis) -> array``; ``reverse`` scans from the end."""

    def impl(x, *, axis, reverse):
        if reverse:
            x = np.flip(x, axis)
        with np.errstate(all="ignore"):
            out = accumulate(x, axis)
        if reverse:
            out = np.flip(out, axis)
        return np.asarray(out).astype(x.dtype)

    return impl


def _cumulative_primitive(name: str, accumulate, kinds):
    return standard_primitive(name, _cumulative_impl(accumulate),
                              _cumulative_abstract_eval(name, kinds))


cumsum_p = _cumulative_primitive(
    "cumsum", lambda x, axis: np.cumsum(x, axis, dtype=_accumulation_dtype(x.dtype)), NUMERIC)
cumprod_p = _cumulative_primitive(
    "cumprod", lambda x, axis: np.cumprod(x, axis, dtype=_accumulation_dtype(x.dtype)), NUMERIC)
cummax_p = _cumulative_primitive(
    "cummax", lambda x, axis: np.maximum.accumulate(x, axis), NUMERIC)
cummin_p = _cumulative_primitive(
    "cummin", lambda x, axis: np.minimum.accumulate(x, axis), NUMERIC)
cumlogsumexp_p = _cumulative_primitive(
    "cumlogsumexp",
    lambda x, axis: np.logaddexp.accumulate(x.astype(_accumulation_dtype(x.dtype)), axis), FLOAT)


def _bind_cumulative(prim, name, operand_, axis, reverse):
    x = operand(operand_, name)
    return checked_bind(prim, x, axis=operator.index(axis), reverse=bool(reverse))


def cumsum(operand_, axis: int = 0, reverse: bool = False):
    """Cumulative sum along ``axis`` (from the end when ``reverse``); integers wrap.

    Example: ``cumsum(jnp.array([1, 2, 3]))`` is ``[1, 3, 6]``.
    """
    return _bind_cumulative(cumsum_p, "cumsum", operand_, axis, reverse)


def cumprod(operand_, axis: int = 0, reverse: bool = False):
    """Cumulative product along ``axis`` (from the end when ``reverse``)."""
    return _bind_cumulative(cumprod_p, "cumprod", operand_, axis, reverse)


def cummax(operand_, axis: int = 0, reverse: bool = False):
    """Cumulative maximum along ``axis``; once a NaN is seen the rest is NaN."""
    return _bind_cumulative(cummax_p, "cummax", operand_, axis, reverse)


def cummin(operand_, axis: int = 0, reverse: bool = False):
    """Cumulative minimum along ``axis``; once a NaN is seen the rest is NaN."""
    return _bind_cumulative(cummin_p, "cummin", operand_, axis, reverse)


def cumlogsumexp(operand_, axis: int = 0, reverse: bool = False):
    """Cumulative ``log(sum(exp(x)))`` along ``axis``, computed stably (floats only)."""
    return _bind_cumulative(cumlogsumexp_p, "cumlogsumexp", operand_, axis, reverse)


# -- windowed reductions ------------------------------------------------------------------------

def dilate_dim(size: int, dilation: int) -> int:
    """Size of a dimension after inserting ``dilation - 1`` holes between its elements."""
    return 0 if size == 0 else (size - 1) * dilation + 1


def strided_windows(size: int, window: int, stride: int) -> int:
    """How many windows of size ``window`` fit at ``stride`` in ``size`` elements (>= 0)."""
    return max(0, (size - window) // stride + 1)


def dilate_and_pad(x: np.ndarray, fill, dilation, padding) -> np.ndarray:
    """``x`` with ``dilation - 1`` copies of ``fill`` between elements, then padded with
    ``fill`` by ``padding`` ((lo, hi) per dimension; negative values crop)."""
    shape = tuple(dilate_dim(d, s) for d, s in zip(x.shape, dilation))
    y = np.full(shape, fill, dtype=x.dtype)
    y[tuple(slice(None, None, s) for s in dilation)] = x
    y = np.pad(y, [(max(lo, 0), max(hi, 0)) for lo, hi in padding], constant_values=fill)
    return y[tuple(slice(max(-lo, 0), max(d - max(-hi, 0), max(-lo, 0)))
                   for d, (lo, hi) in zip(y.shape, padding))]


def _check_window_params(name, x, window_dimensions, window_strides, padding, base_dilation,
                         window_dilation):
    for what, vals in (("window_dimensions", window_dimensions),
                       ("window_strides", window_strides), ("base_dilation", base_dilation),
                       ("window_dilation", window_dilation)):
        if len(vals) != x.ndim:
            raise TypeError(f"{name}: {what} {vals} must have one entry per operand dimension "
                            f"(operand shape {x.shape})")
        if any(v < 1 for v in vals):
            raise TypeError(f"{name}: every element of {what} must be positive, got {vals}")
    if len(padding) != x.ndim or any(len(p) != 2 for p in padding):
        raise TypeError(f"{name}: padding {padding} must have one (low, high) pair per operand "
                        f"dimension (operand shape {x.shape})")


def _reduce_window_shape(shape, window_dimensions, window_strides, padding, base_dilation,
                         window_dilation):
    return tuple(
        strided_windows(dilate_dim(d, b) + lo + hi, dilate_dim(w, wd), s)
        for d, w, s, (lo, hi), b, wd in zip(shape, window_dimensions, window_strides, padding,
                                             base_dilation, window_dilation))


def _reduce_window_abstract_eval(name: str, kinds):
    def abstract_eval(x, *, window_dimensions, window_strides, padding, base_dilation,
                      window_dilation):
        check_kinds(name, x.dtype, kinds)
        _check_window_params(name, x, window_dimensions, window_strides, padding,
                             base_dilation, window_dilation)
        shape = _reduce_window_shape(x.shape, window_dimensions, window_strides, padding,
                                     base_dilation, window_dilation)
        return ShapedArray(shape, x.dtype, x.weak_type)

    return abstract_eval


def _reduce_window_impl(ufunc, identity):
    """impl of a windowed ``ufunc`` reduction: holes and padding hold ``identity(dtype)``,
    windows are strided views of the padded operand (no loop over output elements)."""

    def impl(x, *, window_dimensions, window_strides, padding, base_dilation, window_dilation):
        x = np.asarray(x)
        init = identity(x.dtype)
        shape = _reduce_window_shape(x.shape, window_dimensions, window_strides, padding,
                                     base_dilation, window_dilation)
        if 0 in shape or x.ndim == 0:
            return np.asarray(np.full(shape, init, dtype=x.dtype) if 0 in shape else x)[()]
        acc = _accumulation_dtype(x.dtype)
        xp = dilate_and_pad(x.astype(acc), init, base_dilation, padding)
        spans = tuple(dilate_dim(w, d) for w, d in zip(window_dimensions, window_dilation))
        windows = sliding_window_view(xp, spans)
        windows = windows[tuple(slice(None, None, s) for s in window_strides)
                          + tuple(slice(None, None, d) for d in window_dilation)]
        with np.errstate(all="ignore"):
            out = ufunc.reduce(windows, axis=tuple(range(x.ndim, 2 * x.ndim)))
        return np.asarray(out).astype(x.dtype)

    return impl


def _zero(dtype):
    return np.dtype(dtype).type(0)


reduce_window_sum_p = standard_primitive(
    "reduce_window_sum", _reduce_window_impl(np.add, _zero),
    _reduce_window_abstract_eval("reduce_window_sum", NUMERIC))
reduce_window_max_p = standard_primitive(
    "reduce_window_max", _reduce_window_impl(np.maximum, max_identity),
    _reduce_window_abstract_eval("reduce_window_max", ANY))
reduce_window_min_p = standard_primitive(
    "reduce_window_min", _reduce_window_impl(np.minimum, min_identity),
    _reduce_window_abstract_eval("reduce_window_min", ANY))


def padtype_to_pads(in_shape, window_shape, window_strides, padding: str) -> list:
    """Explicit ``(low, high)`` padding pairs for the padding string ``padding``.

    ``"VALID"`` pads nothing; ``"SAME"`` pads so that the output has ``ceil(in / stride)``
    elements, the odd element going to the high side (to the low side for ``"SAME_LOWER"``).

    Example: ``padtype_to_pads((5,), (2,), (2,), "SAME")`` is ``[(0, 1)]``.
    """
    if not isinstance(padding, str) or padding.upper() not in ("SAME", "SAME_LOWER", "VALID"):
        raise ValueError(f"padtype_to_pads: unrecognized padding type {padding!r}; expected "
                         "'VALID', 'SAME' or 'SAME_LOWER'")
    mode = padding.upper()
    if mode == "VALID":
        return [(0, 0)] * len(in_shape)
    pads = []
    for d, w, s in zip(in_shape, window_shape, window_strides):
        out = -(-int(d) // int(s))
        total = max((out - 1) * int(s) + int(w) - int(d), 0)
        small, big = total // 2, total - total // 2
        pads.append((small, big) if mode == "SAME" else (big, small))
    return pads


# -- the generic wrappers: monoids recognised by their computation -------------------------------

def _concrete_scalar(name: str, x):
    """The concrete numpy value of the scalar init value ``x`` (a TypeError if it is traced)."""
    if isinstance(x, core.Tracer):
        val = x.to_concrete_value()
        if val is None:
            raise TypeError(f"{name}: init_value must be a concrete scalar (the identity of the "
                            f"computation), got a traced value {x.aval.str_short()}")
    else:
        val = x
    val = np.asarray(val)
    if val.shape != ():
        raise TypeError(f"{name}: init_value must be a scalar, got shape {val.shape}")
    return val


def _weak(x) -> bool:
    return core.get_aval(x).weak_type


def _monoid(name: str, computation, table):
    """The ``(primitive, identity)`` that ``table`` maps ``computation`` to, else TypeError."""
    from fungrad.lax import elementwise

    for fn_name, prim, identity in table:
        if computation is getattr(elementwise, fn_name, None):
            return prim, identity
    supported = ", ".join(f"lax.{fn_name}" for fn_name, _, _ in table)
    fn = getattr(computation, "__name__", repr(computation))
    raise TypeError(f"{name}: unsupported computation {fn}; fungrad supports the "
                    f"monoids {supported}, each with its identity as init value")


def _check_identity(name: str, init_value, identity, computation, dtype) -> None:
    val = _concrete_scalar(name, init_value)
    if not np.equal(val, identity):
        raise ValueError(
            f"{name}: init_value {val} is not the identity of {computation.__name__} for "
            f"{np.dtype(dtype).name} (expected {identity}); XLA leaves such reductions "
            "undefined, so combine the init value with the result yourself")


_REDUCE_MONOIDS = (
    ("add", reduce_sum_p, _zero),
    ("mul", reduce_prod_p, lambda dt: np.dtype(dt).type(1)),
    ("max", reduce_max_p, max_identity),
    ("min", reduce_min_p, min_identity),
    ("bitwise_and", reduce_and_p, _and_identity),
    ("bitwise_or", reduce_or_p, _zero),
    ("bitwise_xor", reduce_xor_p, _zero),
)

_WINDOW_MONOIDS = (
    ("add", reduce_window_sum_p, _zero),
    ("max", reduce_window_max_p, max_identity),
    ("min", reduce_window_min_p, min_identity),
)


def reduce(operands, init_values, computation, dimensions):
    """Reduce ``operands`` over ``dimensions`` with the monoid ``computation``.

    ``computation`` must be one of ``lax.add``, ``lax.mul``, ``lax.max``, ``lax.min``,
    ``lax.bitwise_and``, ``lax.bitwise_or``, ``lax.bitwise_xor`` and ``init_values`` its
    identity (e.g. 0 for add, -inf for a float max); it binds the matching reduce_* primitive.
    A one-element sequence of operands is accepted and, as in JAX, gives a bare array.
    The result is weakly typed only when both the operand and the init value are.

    Example: ``reduce(x, 0., lax.add, (0,))`` is ``reduce_sum(x, (0,))``.
    """
    if isinstance(operands, (list, tuple)):
        if len(operands) != 1 or not isinstance(init_values, (list, tuple)) \
                or len(init_values) != 1:
            raise TypeError("reduce: fungrad reduces a single operand with a single init value "
                            f"(got {len(operands)} operands); reduce each one separately")
        operands, init_values = operands[0], init_values[0]
    x = operand(operands, "reduce")
    prim, identity = _monoid("reduce", computation, _REDUCE_MONOIDS)
    _check_identity("reduce", init_values, identity(x.dtype), computation, x.dtype)
    out = checked_bind(prim, x, axes=_int_tuple("reduce", "dimensions", dimensions))
    if out.weak_type and not _weak(init_values):
        from fungrad.lax import elementwise
        out = elementwise.convert_element_type(out, out.dtype, weak_type=False)
    return out


def reduce_window(operand_, init_value, computation, window_dimensions, window_strides=None,
                  padding="VALID", base_dilation=None, window_dilation=None):
    """Reduce each window of ``operand_`` with the monoid ``computation``.

    Args:
      operand_: the array.
      init_value: the identity of ``computation`` (0 for ``lax.add``, -inf / ``iinfo.min`` /
        False for ``lax.max``, inf / ``iinfo.max`` / True for ``lax.min``).
      computation: ``lax.add``, ``lax.max`` or ``lax.min``.
      window_dimensions: window size per dimension.
      window_strides: step between windows per dimension (default 1).
      padding: ``"VALID"``, ``"SAME"``, ``"SAME_LOWER"`` or ``(low, high)`` pairs; padding
        holds the identity, so it never wins a max and adds nothing to a sum.
      base_dilation: holes inserted between operand elements (default 1: none).
      window_dilation: spacing between window elements (default 1).

    Example: ``reduce_window(x, -jnp.inf, lax.max, (2, 2), (2, 2), "VALID")`` is a 2x2 max pool.
    """
    x = operand(operand_, "reduce_window")
    prim, identity = _monoid("reduce_window", computation, _WINDOW_MONOIDS)
    _check_identity("reduce_window", init_value, identity(x.dtype), computation, x.dtype)
    window_dimensions = _int_tuple("reduce_window", "window_dimensions", window_dimensions)
    ones = (1,) * len(window_dimensions)
    window_strides = ones if window_strides is None else \
        _int_tuple("reduce_window", "window_strides", window_strides)
    base_dilation = ones if base_dilation is None else \
        _int_tuple("reduce_window", "base_dilation", base_dilation)
    window_dilation = ones if window_dilation is None else \
        _int_tuple("reduce_window", "window_dilation", window_dilation)
    if isinstance(padding, str):
        spans = [dilate_dim(w, d) for w, d in zip(window_dimensions, window_dilation)]
        padding = padtype_to_pads(x.shape, spans, window_strides, padding)
    padding = tuple(_int_tuple("reduce_window", "padding", p) for p in padding)
    return checked_bind(prim, x, window_dimensions=window_dimensions,
                        window_strides=window_strides, padding=padding,
                        base_dilation=base_dilation, window_dilation=window_dilation)
