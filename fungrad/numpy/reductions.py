"""Reductions of fungrad.numpy (sum, mean, max, argmax, var, quantile, cumsum...) on fungrad.lax.

Arguments follow jax.numpy: ``axis`` (None, an int or a tuple; negative values count from the
end), ``keepdims``, ``dtype``, ``initial`` and boolean ``where`` masks where jnp has them, and
``out`` only as ``None`` (fungrad arrays are immutable). Dtype rules are JAX's:

* ``sum``/``prod`` of bools and narrow integers accumulate in the default int (``uint*`` in the
  default uint), of float16 in float32 (rounded back); ``max``/``min`` keep the input dtype.
* ``mean``/``var``/``std``/``median``/``quantile`` of integers are floats (default float).
* ``argmax``/``argmin``/``count_nonzero`` give the default int (int32 without x64).
* Results are never weakly typed.

Empty reductions: ``sum`` is 0, ``prod`` 1, ``mean`` NaN; ``max``/``min`` without ``initial``
are a ValueError, as in numpy and jnp.
"""

from __future__ import annotations

import builtins
import math
from typing import TYPE_CHECKING

import numpy as np

from fungrad import dtypes, lax
from fungrad.array import Array
from fungrad.numpy import ufuncs, util

if TYPE_CHECKING:
    from fungrad.typing import ArrayLike

__all__ = [
    "all",
    "amax",
    "amin",
    "any",
    "argmax",
    "argmin",
    "average",
    "count_nonzero",
    "cumprod",
    "cumsum",
    "cumulative_prod",
    "cumulative_sum",
    "max",
    "mean",
    "median",
    "min",
    "nanargmax",
    "nanargmin",
    "nancumprod",
    "nancumsum",
    "nanmax",
    "nanmean",
    "nanmedian",
    "nanmin",
    "nanpercentile",
    "nanprod",
    "nanquantile",
    "nanstd",
    "nansum",
    "nanvar",
    "percentile",
    "prod",
    "ptp",
    "quantile",
    "std",
    "sum",
    "var",
]

# ---------------------------------------------------------------------------------------------
# Argument handling


def _check_out(fun_name: str, out) -> None:
    if out is not None:
        raise TypeError(
            f"{fun_name}: the 'out' argument is not supported (fungrad arrays are "
            "immutable); use the returned array"
        )


def _operand(fun_name: str, a):
    x = util.plain_operand(a)
    if x is not None:
        return x
    util.check_arraylike(fun_name, a)
    return util.asarray(a, fun_name=fun_name)


def _axes(fun_name: str, a, axis) -> tuple[int, ...]:
    """``axis`` as a sorted tuple of distinct non-negative dimensions of ``a``."""
    return util.canonicalize_axes(axis, a.ndim, fun_name)


def _where_mask(fun_name: str, where, shape):
    """The boolean ``where`` mask broadcast to ``shape`` (None stays None)."""
    if where is None:
        return None
    util.check_arraylike(fun_name, where)
    where = util.asarray(where)
    if not dtypes.is_bool(where.dtype):
        raise ValueError(
            f"{fun_name}: where must be None or a boolean array, got dtype {where.dtype.name}"
        )
    util.broadcast_shapes(where.shape, shape, fun_name=fun_name)
    return util.broadcast_to_shape(where, shape)


def _dtype_arg(fun_name: str, dtype):
    try:
        return dtypes.canonicalize_dtype(dtype)
    except TypeError as e:
        raise TypeError(f"{fun_name}: {e}") from None


def _fill(x, value):
    """An array of ``x``'s shape and (strong) dtype filled with ``value``."""
    with np.errstate(all="ignore"):
        fill = Array(np.asarray(value).astype(x.dtype)[()])
    return util.broadcast_to_shape(fill, x.shape)


def _scalar(value, dtype) -> Array:
    with np.errstate(all="ignore"):
        return Array(np.asarray(value).astype(dtype)[()])


def _keep(result, dims, keepdims: bool):
    return lax.expand_dims(result, dims) if keepdims and dims else result


def _identity(kind: str, dtype: np.dtype):
    """The identity of a reduction for ``dtype`` (used to mask out ``where=False`` entries)."""
    if kind in ("sum", "any"):
        return 0
    if kind in ("prod", "all"):
        return 1
    if dtypes.is_bool(dtype):
        return kind == "min"
    if dtypes.is_float(dtype):
        return -np.inf if kind == "max" else np.inf
    info = np.iinfo(dtype)
    return info.min if kind == "max" else info.max


def _promote_integer(dtype: np.dtype) -> np.dtype:
    """jnp's ``promote_integers``: bools and narrow ints accumulate in the default int."""
    if dtypes.kind(dtype) == "f":
        return dtype
    if dtypes.is_bool(dtype):
        return dtypes.default_int_dtype()
    if dtypes.is_signed(dtype) and dtype.itemsize < dtypes.default_int_dtype().itemsize:
        return dtypes.default_int_dtype()
    if dtypes.is_unsigned(dtype) and dtype.itemsize < dtypes.default_uint_dtype().itemsize:
        return dtypes.default_uint_dtype()
    return dtype


def _upcast_f16(dtype: np.dtype) -> np.dtype:
    """jnp's ``upcast_f16_for_computation``: float16 and bfloat16 reduce in float32."""
    return dtypes.float32 if dtype == dtypes.float16 or dtype == dtypes.bfloat16 else dtype


_LAX_REDUCERS = {
    "sum": "reduce_sum",
    "prod": "reduce_prod",
    "max": "reduce_max",
    "min": "reduce_min",
    "all": "reduce_and",
    "any": "reduce_or",
}
# On bools, sum/max are "or" and prod/min are "and".
_BOOL_REDUCERS = {
    "sum": "reduce_or",
    "prod": "reduce_and",
    "max": "reduce_or",
    "min": "reduce_and",
    "all": "reduce_and",
    "any": "reduce_or",
}
_COMBINE = {
    "sum": ufuncs.add,
    "prod": ufuncs.multiply,
    "max": ufuncs.maximum,
    "min": ufuncs.minimum,
}


def _reduction(
    fun_name: str,
    kind: str,
    a,
    axis,
    *,
    out=None,
    keepdims=False,
    initial=None,
    where=None,
    result_dtype=None,
    computation_dtype=None,
):
    """Reduce ``a`` over ``axis`` with the lax reducer for ``kind``.

    ``where=False`` entries are replaced by the reduction's identity; ``initial`` is combined
    with the result afterwards (lax reducers start from the identity).
    """
    _check_out(fun_name, out)
    dims = _axes(fun_name, a, axis)
    if kind in ("max", "min") and initial is None:
        if where is not None:
            raise ValueError(
                f"{fun_name}: reduction operation {kind} does not have an "
                "identity, so to use a where mask one has to specify 'initial'"
            )
        if builtins.any(a.shape[d] == 0 for d in dims):
            raise ValueError(
                f"zero-size array to reduction operation {kind} which has no "
                f"identity ({fun_name} of shape {a.shape} over axes {dims}); pass "
                "initial="
            )
    result_dtype = a.dtype if result_dtype is None else result_dtype
    computation_dtype = result_dtype if computation_dtype is None else computation_dtype
    x = lax.convert_element_type(a, computation_dtype, False)
    mask = _where_mask(fun_name, where, x.shape)
    if mask is not None:
        x = lax.select(mask, x, _fill(x, _identity(kind, x.dtype)))
    reducers = _BOOL_REDUCERS if dtypes.is_bool(x.dtype) else _LAX_REDUCERS
    result = getattr(lax, reducers[kind])(x, dims)
    if initial is not None:
        util.check_arraylike(fun_name, initial)
        init = util.asarray(initial)
        if init.shape:
            raise ValueError(
                f"{fun_name}: initial value must be a scalar, got an array of shape {init.shape}"
            )
        init = lax.convert_element_type(init, x.dtype, False)
        result = lax.convert_element_type(_COMBINE[kind](init, result), x.dtype, False)
    result = _keep(result, dims, keepdims)
    return lax.convert_element_type(result, result_dtype, False)


# ---------------------------------------------------------------------------------------------
# sum, prod, max, min, all, any


def _sum_dtypes(fun_name: str, a, dtype, promote_integers: bool):
    if dtype is not None:
        result = _dtype_arg(fun_name, dtype)
        return result, result
    result = _promote_integer(a.dtype) if promote_integers else a.dtype
    if dtypes.is_bool(result):  # promote_integers=False on bools: count in the default int
        result = dtypes.default_int_dtype()
    return result, _upcast_f16(result)


def sum(
    a: ArrayLike,
    axis=None,
    dtype=None,
    out=None,
    keepdims: bool = False,
    initial=None,
    where=None,
    promote_integers: bool = True,
) -> Array:
    """Sum of elements over ``axis``; bools and narrow integers sum in the default int.

    Example: ``fnp.sum(fnp.ones((2, 3)), axis=1)`` is ``Array([3., 3.], dtype=float32)``.
    """
    a = _operand("sum", a)
    if axis is None and out is None and initial is None and where is None and not keepdims:
        aval = a.aval
        if (
            dtypes.kind(aval.dtype) == "f"
            and aval.dtype.itemsize > 2
            and not aval.weak_type
            and (dtype is None or dtype == aval.dtype)
        ):
            # The common case, a float sum of everything: exactly the reduce_sum that the
            # general path below binds, without its argument handling.
            return lax.reduce_sum_p.bind(a, axes=tuple(range(len(aval.shape))))
    result_dtype, comp = _sum_dtypes("sum", a, dtype, promote_integers)
    return _reduction(
        "sum",
        "sum",
        a,
        axis,
        out=out,
        keepdims=keepdims,
        initial=initial,
        where=where,
        result_dtype=result_dtype,
        computation_dtype=comp,
    )


def prod(
    a: ArrayLike,
    axis=None,
    dtype=None,
    out=None,
    keepdims: bool = False,
    initial=None,
    where=None,
    promote_integers: bool = True,
) -> Array:
    """Product of elements over ``axis`` (1 for empty axes)."""
    a = _operand("prod", a)
    result_dtype, comp = _sum_dtypes("prod", a, dtype, promote_integers)
    return _reduction(
        "prod",
        "prod",
        a,
        axis,
        out=out,
        keepdims=keepdims,
        initial=initial,
        where=where,
        result_dtype=result_dtype,
        computation_dtype=comp,
    )


def max(
    a: ArrayLike, axis=None, out=None, keepdims: bool = False, initial=None, where=None
) -> Array:
    """Maximum over ``axis`` (NaN if any element is NaN). Empty axes need ``initial``, and
    so does a ``where`` mask."""
    a = _operand("max", a)
    return _reduction(
        "max", "max", a, axis, out=out, keepdims=keepdims, initial=initial, where=where
    )


def min(
    a: ArrayLike, axis=None, out=None, keepdims: bool = False, initial=None, where=None
) -> Array:
    """Minimum over ``axis`` (NaN if any element is NaN). Empty axes need ``initial``."""
    a = _operand("min", a)
    return _reduction(
        "min", "min", a, axis, out=out, keepdims=keepdims, initial=initial, where=where
    )


def amax(a, axis=None, out=None, keepdims: bool = False, initial=None, where=None):
    """Alias of :func:`max`."""
    return max(a, axis, out, keepdims, initial, where)


def amin(a, axis=None, out=None, keepdims: bool = False, initial=None, where=None):
    """Alias of :func:`min`."""
    return min(a, axis, out, keepdims, initial, where)


def _as_bool(x):
    return x if dtypes.is_bool(x.dtype) else lax.ne(x, _scalar(0, x.dtype))


def all(a, axis=None, out=None, keepdims: bool = False, *, where=None):
    """Whether every element over ``axis`` is nonzero (True for empty axes)."""
    a = _as_bool(_operand("all", a))
    return _reduction("all", "all", a, axis, out=out, keepdims=keepdims, where=where)


def any(a, axis=None, out=None, keepdims: bool = False, *, where=None):
    """Whether any element over ``axis`` is nonzero (False for empty axes)."""
    a = _as_bool(_operand("any", a))
    return _reduction("any", "any", a, axis, out=out, keepdims=keepdims, where=where)


def count_nonzero(a, axis=None, keepdims: bool = False):
    """Number of nonzero elements over ``axis`` (default int dtype)."""
    a = _as_bool(_operand("count_nonzero", a))
    return sum(a, axis, dtype=dtypes.default_int_dtype(), keepdims=keepdims)


def ptp(a, axis=None, out=None, keepdims: bool = False):
    """Peak to peak: ``max - min`` over ``axis`` (bools are a TypeError, as in jnp)."""
    a = _operand("ptp", a)
    _check_out("ptp", out)
    if dtypes.is_bool(a.dtype):
        raise TypeError(
            "ptp: boolean arrays are not supported (max - min is a boolean "
            "subtraction); convert to an integer dtype"
        )
    return ufuncs.subtract(max(a, axis, keepdims=keepdims), min(a, axis, keepdims=keepdims))


# ---------------------------------------------------------------------------------------------
# mean, average, var, std


def _count(fun_name: str, a, axis, dtype, keepdims: bool, where):
    """The number of elements reduced (a constant, or the sum of the ``where`` mask)."""
    dims = _axes(fun_name, a, axis)
    if where is None:
        n = math.prod(a.shape[d] for d in dims)
        return _scalar(n, dtype)
    mask = _where_mask(fun_name, where, a.shape)
    return sum(mask, axis, dtype=dtype, keepdims=keepdims)


def mean(
    a: ArrayLike, axis=None, dtype=None, out=None, keepdims: bool = False, *, where=None
) -> Array:
    """Arithmetic mean over ``axis`` (integers give the default float; NaN for empty axes)."""
    a = _operand("mean", a)
    _check_out("mean", out)
    result_dtype = ufuncs.inexact_dtype(a.dtype) if dtype is None else _dtype_arg("mean", dtype)
    comp = _upcast_f16(result_dtype)
    total = sum(a, axis, dtype=comp, keepdims=keepdims, where=where)
    count = _count("mean", a, axis, comp, keepdims, where)
    return lax.convert_element_type(lax.div(total, count), result_dtype, False)


_mean = mean  # var/std take a parameter called ``mean``


def average(a, axis=None, weights=None, returned: bool = False, keepdims: bool = False):
    """Weighted mean over ``axis``; ``returned=True`` also gives the sum of the weights.

    1-d ``weights`` may match the length of ``axis`` when their shape differs from ``a``'s.
    """
    if weights is None:
        a = _operand("average", a)
        (a,) = ufuncs.promote_args_inexact("average", a)
        avg = mean(a, axis, keepdims=keepdims)
        dims = _axes("average", a, axis)
        weights_sum = _scalar(math.prod(a.shape[d] for d in dims), avg.dtype)
    else:
        util.check_arraylike("average", a, weights)
        a, weights = ufuncs.promote_dtypes_inexact("average", a, weights)
        a, weights = (lax.convert_element_type(x, x.dtype, False) for x in (a, weights))
        _axes("average", a, axis)  # validates axis
        if a.shape != weights.shape:
            if axis is None:
                raise ValueError(
                    "average: axis must be specified when the shapes of a "
                    f"{a.shape} and weights {weights.shape} differ"
                )
            order = tuple(
                util.canonicalize_axis(d, a.ndim, "average")
                for d in (axis if isinstance(axis, (tuple, list)) else (axis,))
            )
            if weights.shape != tuple(a.shape[d] for d in order):
                raise ValueError(
                    f"average: shape of weights {weights.shape} must match the "
                    f"shape of a {a.shape} along axis {axis}"
                )
            weights = lax.transpose(weights, tuple(int(i) for i in np.argsort(order)))
            weights = lax.broadcast_in_dim(weights, a.shape, tuple(sorted(order)))
        weights_sum = sum(weights, axis, keepdims=keepdims)
        avg = lax.div(sum(lax.mul(a, weights), axis, keepdims=keepdims), weights_sum)
    if returned:
        return avg, util.broadcast_to_shape(weights_sum, avg.shape)
    return avg


def _correction(fun_name: str, ddof, correction):
    if correction is None:
        return ddof
    if ddof != 0:
        raise ValueError(f"{fun_name}: ddof and correction can't be provided simultaneously")
    return correction


def var(
    a,
    axis=None,
    dtype=None,
    out=None,
    ddof=0,
    keepdims: bool = False,
    *,
    where=None,
    mean=None,
    correction=None,
):
    """Variance over ``axis``: ``sum(|a - mean|**2) / (N - correction)`` (``ddof`` is numpy's
    name for ``correction``). NaN where ``N - correction <= 0``. The variance of complex values
    is real (complex64 -> float32), as in numpy and jnp."""
    a = _operand("var", a)
    _check_out("var", out)
    correction = _correction("var", ddof, correction)
    if dtype is None:
        result_dtype = dtypes.real_dtype(ufuncs.inexact_dtype(a.dtype))
    else:
        result_dtype = _dtype_arg("var", dtype)
    comp = _upcast_f16(ufuncs.inexact_dtype(result_dtype))
    if (
        dtypes.kind(a.dtype) == "c" and dtypes.kind(comp) != "c"
    ):  # centre in complex, sum |.|^2 in real
        comp = dtypes.complex_dtype(comp)
    x = lax.convert_element_type(a, comp, False)
    if mean is None:
        centre = _mean(x, axis, dtype=comp, keepdims=True, where=where)
    else:
        util.check_arraylike("var", mean)
        centre = lax.convert_element_type(util.asarray(mean), comp, False)
    centered = ufuncs.subtract(x, centre)
    if dtypes.kind(comp) == "c":
        centered = lax.real(lax.mul(centered, lax.conj(centered)))
        comp = dtypes.real_dtype(comp)
    else:
        centered = lax.mul(centered, centered)
    count = _count("var", a, axis, comp, keepdims, where)
    normalizer = lax.sub(count, lax.convert_element_type(correction, comp, False))
    total = sum(centered, axis, dtype=comp, keepdims=keepdims, where=where)
    result = lax.div(total, normalizer)
    result = ufuncs._where(lax.gt(normalizer, _scalar(0, comp)), result, _fill(result, np.nan))
    return lax.convert_element_type(result, result_dtype, False)


def std(
    a,
    axis=None,
    dtype=None,
    out=None,
    ddof=0,
    keepdims: bool = False,
    *,
    where=None,
    mean=None,
    correction=None,
):
    """Standard deviation over ``axis``: ``sqrt(var(...))`` with the same arguments (real for
    complex values). As in JAX the square root is taken of the variance in the result dtype
    (a float16/bfloat16 variance is rounded before it)."""
    a = _operand("std", a)
    _check_out("std", out)
    v = var(
        a,
        axis,
        dtype=dtype,
        ddof=ddof,
        keepdims=keepdims,
        where=where,
        mean=mean,
        correction=correction,
    )
    return lax.sqrt(v)


# ---------------------------------------------------------------------------------------------
# argmax, argmin


def _arg_reduction(fun_name: str, lax_name: str, a, axis, out, keepdims):
    a = _operand(fun_name, a)
    _check_out(fun_name, out)
    if axis is None:
        if a.size == 0:
            raise ValueError(f"{fun_name}: attempt to get {fun_name} of an empty sequence")
        result = getattr(lax, lax_name)(lax.reshape(a, (a.size,)), 0, dtypes.default_int_dtype())
        return lax.reshape(result, (1,) * a.ndim) if keepdims else result
    axis = util.canonicalize_axis(axis, a.ndim, fun_name)
    if a.shape[axis] == 0:
        raise ValueError(
            f"{fun_name}: attempt to get {fun_name} of an empty sequence (axis "
            f"{axis} of shape {a.shape} has size 0)"
        )
    result = getattr(lax, lax_name)(a, axis, dtypes.default_int_dtype())
    return lax.expand_dims(result, (axis,)) if keepdims else result


def argmax(a, axis=None, out=None, keepdims=None):
    """Index of the maximum along ``axis`` (flattened when None); the first NaN wins."""
    return _arg_reduction("argmax", "argmax", a, axis, out, keepdims)


def argmin(a, axis=None, out=None, keepdims=None):
    """Index of the minimum along ``axis`` (flattened when None); the first NaN wins."""
    return _arg_reduction("argmin", "argmin", a, axis, out, keepdims)


# ---------------------------------------------------------------------------------------------
# NaN-ignoring reductions


def _nan_to(a, value):
    """``a`` with NaNs (complex: a NaN in either part) replaced by ``value`` (integers and
    bools unchanged)."""
    if not dtypes.is_inexact(a.dtype):
        return a
    return lax.select(ufuncs.isnan(a), _fill(a, value), a)


def nansum(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None, where=None):
    """:func:`sum` treating NaNs as zero."""
    a = _operand("nansum", a)
    return sum(_nan_to(a, 0), axis, dtype, out, keepdims, initial, where)


def nanprod(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None, where=None):
    """:func:`prod` treating NaNs as one."""
    a = _operand("nanprod", a)
    return prod(_nan_to(a, 1), axis, dtype, out, keepdims, initial, where)


def _nan_extremum(fun_name: str, kind: str, a, axis, out, keepdims, initial, where):
    a = _operand(fun_name, a)
    reduce = max if kind == "max" else min
    if not dtypes.is_float(a.dtype):
        return reduce(a, axis, out, keepdims, initial, where)
    fill = -np.inf if kind == "max" else np.inf
    result = reduce(_nan_to(a, fill), axis, out, keepdims, initial, where)
    if initial is None and where is None:  # all-NaN slices give NaN, as in numpy and jnp
        all_nan = all(ufuncs.isnan(a), axis, keepdims=keepdims)
        result = lax.select(all_nan, _fill(result, np.nan), result)
    return result


def nanmax(a, axis=None, out=None, keepdims: bool = False, initial=None, where=None):
    """:func:`max` ignoring NaNs (NaN only for all-NaN slices)."""
    return _nan_extremum("nanmax", "max", a, axis, out, keepdims, initial, where)


def nanmin(a, axis=None, out=None, keepdims: bool = False, initial=None, where=None):
    """:func:`min` ignoring NaNs (NaN only for all-NaN slices)."""
    return _nan_extremum("nanmin", "min", a, axis, out, keepdims, initial, where)


def _nan_arg(fun_name: str, kind: str, a, axis, out, keepdims):
    a = _operand(fun_name, a)
    arg = argmax if kind == "max" else argmin
    if not dtypes.is_float(a.dtype):
        return arg(a, axis, out, keepdims)
    fill = -np.inf if kind == "max" else np.inf
    result = arg(_nan_to(a, fill), axis, out, keepdims)
    # All-NaN slices give -1, as in jnp (numpy raises).
    all_nan = all(ufuncs.isnan(a), axis, keepdims=bool(keepdims))
    return lax.select(all_nan, _fill(result, -1), result)


def nanargmax(a, axis=None, out=None, keepdims=None):
    """:func:`argmax` ignoring NaNs; -1 for all-NaN slices (as jnp; numpy raises)."""
    return _nan_arg("nanargmax", "max", a, axis, out, keepdims)


def nanargmin(a, axis=None, out=None, keepdims=None):
    """:func:`argmin` ignoring NaNs; -1 for all-NaN slices (as jnp; numpy raises)."""
    return _nan_arg("nanargmin", "min", a, axis, out, keepdims)


def nanmean(a, axis=None, dtype=None, out=None, keepdims: bool = False, where=None):
    """:func:`mean` of the non-NaN elements (NaN for all-NaN slices)."""
    a = _operand("nanmean", a)
    if not dtypes.is_inexact(a.dtype):
        return mean(a, axis, dtype, out, keepdims, where=where)
    _check_out("nanmean", out)
    return mean(a, axis, dtype, keepdims=keepdims, where=_not_nan_where("nanmean", a, where))


def _not_nan_where(fun_name: str, a, where):
    """The mask of ``a``'s non-NaN elements, and-ed with the user's ``where`` if given."""
    not_nan = lax.bitwise_not(ufuncs.isnan(a))
    if where is None:
        return not_nan
    return lax.bitwise_and(not_nan, _where_mask(fun_name, where, a.shape))


def nanvar(
    a,
    axis=None,
    dtype=None,
    out=None,
    ddof=0,
    keepdims: bool = False,
    where=None,
    mean=None,
    correction=None,
):
    """:func:`var` of the non-NaN elements."""
    a = _operand("nanvar", a)
    if dtypes.is_inexact(a.dtype):
        where = _not_nan_where("nanvar", a, where)
    return var(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean, correction=correction)


def nanstd(
    a,
    axis=None,
    dtype=None,
    out=None,
    ddof=0,
    keepdims: bool = False,
    where=None,
    mean=None,
    correction=None,
):
    """:func:`std` of the non-NaN elements."""
    a = _operand("nanstd", a)
    if dtypes.is_inexact(a.dtype):
        where = _not_nan_where("nanstd", a, where)
    return std(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean, correction=correction)


# ---------------------------------------------------------------------------------------------
# Cumulative reductions


def _cumulative(fun_name: str, lax_name: str, a, axis, dtype, promote_integers: bool):
    if axis is None:
        a = lax.reshape(a, (a.size,))
        axis = 0
    axis = util.canonicalize_axis(axis, a.ndim, fun_name)
    if dtype is not None:
        out_dtype = _dtype_arg(fun_name, dtype)
    elif promote_integers or dtypes.is_bool(a.dtype):
        out_dtype = _promote_integer(a.dtype)
    else:
        out_dtype = a.dtype
    a = lax.convert_element_type(a, out_dtype, False)
    if dtypes.is_bool(out_dtype):  # cumsum/cumprod in bool: or/and, computed via int32
        a = lax.convert_element_type(a, dtypes.int32)
        out = getattr(lax, "cummax" if lax_name == "cumsum" else "cummin")(a, axis)
        return lax.convert_element_type(out, out_dtype)
    return getattr(lax, lax_name)(a, axis)


def cumsum(a, axis=None, dtype=None, out=None):
    """Cumulative sum along ``axis`` (the flattened array when None). Keeps integer dtypes
    (bools count in the default int), as jnp."""
    a = _operand("cumsum", a)
    _check_out("cumsum", out)
    return _cumulative("cumsum", "cumsum", a, axis, dtype, False)


def cumprod(a, axis=None, dtype=None, out=None):
    """Cumulative product along ``axis`` (the flattened array when None)."""
    a = _operand("cumprod", a)
    _check_out("cumprod", out)
    return _cumulative("cumprod", "cumprod", a, axis, dtype, False)


def nancumsum(a, axis=None, dtype=None, out=None):
    """:func:`cumsum` treating NaNs as zero."""
    a = _operand("nancumsum", a)
    _check_out("nancumsum", out)
    return _cumulative("nancumsum", "cumsum", _nan_to(a, 0), axis, dtype, False)


def nancumprod(a, axis=None, dtype=None, out=None):
    """:func:`cumprod` treating NaNs as one."""
    a = _operand("nancumprod", a)
    _check_out("nancumprod", out)
    return _cumulative("nancumprod", "cumprod", _nan_to(a, 1), axis, dtype, False)


def _cumulative_array_api(
    fun_name: str,
    lax_name: str,
    x,
    axis,
    dtype,
    include_initial,
    initial_value,
    promote_integers: bool,
):
    x = _operand(fun_name, x)
    if x.ndim == 0:
        raise ValueError(f"{fun_name}: the input must be non-scalar (got a 0-d array)")
    if axis is None:
        if x.ndim > 1:
            raise ValueError(
                f"{fun_name}: the input has rank {x.ndim}, so axis must be given "
                "(it is only optional for one-dimensional arrays)"
            )
        axis = 0
    axis = util.canonicalize_axis(axis, x.ndim, fun_name)
    out = _cumulative(fun_name, lax_name, x, axis, dtype, promote_integers)
    if include_initial:
        shape = list(out.shape)
        shape[axis] = 1
        first = lax.full(tuple(shape), _scalar(initial_value, out.dtype))
        out = lax.concatenate([first, out], axis)
    return out


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial: bool = False):
    """Array-API cumulative sum: narrow integers accumulate in the default int;
    ``include_initial`` prepends a 0."""
    return _cumulative_array_api(
        "cumulative_sum", "cumsum", x, axis, dtype, include_initial, 0, True
    )


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial: bool = False):
    """Array-API cumulative product; ``include_initial`` prepends a 1. Integers keep their
    dtype (as jnp; unlike cumulative_sum, bools count in the default int)."""
    return _cumulative_array_api(
        "cumulative_prod", "cumprod", x, axis, dtype, include_initial, 1, False
    )


# ---------------------------------------------------------------------------------------------
# Quantiles (sort, then pick the neighbouring order statistics)

_QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def _take_along_last(x, index):
    """``x[..., index]`` for ``x`` of shape ``S + (n,)`` and int ``index`` of shape ``Q + S``:
    a one-hot select and sum over the last axis (O(n) per index, no gather needed)."""
    n = x.shape[-1]
    out_shape = index.shape + (n,)
    x = lax.broadcast_in_dim(x, out_shape, tuple(range(len(out_shape) - x.ndim, len(out_shape))))
    positions = lax.broadcasted_iota(index.dtype, out_shape, len(out_shape) - 1)
    index = lax.broadcast_in_dim(index, out_shape, tuple(range(index.ndim)))
    picked = lax.select(lax.eq(positions, index), x, _fill(x, 0))
    return lax.reduce_sum(picked, (len(out_shape) - 1,))


def _quantile(fun_name: str, a, q, axis, out, overwrite_input, method, keepdims, squash_nans: bool):
    util.check_arraylike(fun_name, a, q)
    _check_out(fun_name, out)
    if overwrite_input:
        raise ValueError(
            f"{fun_name}: overwrite_input=True is not supported (fungrad arrays are immutable)"
        )
    if method not in _QUANTILE_METHODS:
        raise ValueError(
            f"{fun_name}: method must be one of {', '.join(_QUANTILE_METHODS)}; got {method!r}"
        )
    (a,) = ufuncs.promote_args_inexact(fun_name, a)
    if dtypes.kind(a.dtype) == "c" or dtypes.kind(util.asarray(q).dtype) == "c":
        raise ValueError(
            f"{fun_name}: quantiles of complex values are not defined (they have no "
            "order; as in jnp); take the real part, imaginary part or absolute value first"
        )
    a = lax.convert_element_type(a, a.dtype, False)
    if a.ndim == 0 and axis is None:  # as jnp, a 0-d input counts as 1-d: keepdims gives (1,)
        a = lax.reshape(a, (1,))
    q = lax.convert_element_type(util.asarray(q), a.dtype, False)
    if q.ndim > 1:
        raise ValueError(f"{fun_name}: q must be a scalar or 1-d, got shape {q.shape}")
    dims = _axes(fun_name, a, axis)
    kept = tuple(d for d in range(a.ndim) if d not in dims)
    kept_shape = tuple(a.shape[d] for d in kept)
    n = math.prod(a.shape[d] for d in dims)
    # Move the reduced axes last and flatten them into one axis of length n.
    x = lax.reshape(lax.transpose(a, kept + dims), kept_shape + (n,))
    is_nan = ufuncs.isnan(x)
    last = (x.ndim - 1,)
    if squash_nans:  # NaNs sort last as +inf; count only the others
        x = lax.select(is_nan, _fill(x, np.inf), x)
        count = sum(lax.bitwise_not(is_nan), axis=-1, dtype=a.dtype)
    else:
        count = lax.full(kept_shape, _scalar(n, a.dtype))
    x = lax.sort(x, dimension=x.ndim - 1)
    q_shape = q.shape
    full_shape = q_shape + kept_shape
    q = lax.broadcast_in_dim(q, full_shape, tuple(range(len(q_shape))))
    count = lax.broadcast_in_dim(count, full_shape, tuple(range(len(q_shape), len(full_shape))))
    last_index = lax.max(lax.sub(count, _scalar(1, a.dtype)), _scalar(0, a.dtype))
    position = lax.mul(q, last_index)
    low = lax.clamp(_scalar(0, a.dtype), lax.floor(position), last_index)
    high = lax.clamp(_scalar(0, a.dtype), lax.ceil(position), last_index)
    high_weight = lax.sub(position, low)
    index_dtype = dtypes.default_int_dtype()
    low_value = _take_along_last(x, lax.convert_element_type(low, index_dtype))
    high_value = _take_along_last(x, lax.convert_element_type(high, index_dtype))
    if method == "linear":
        # numpy's lerp: exact at both ends, and no inf * 0 when the neighbours are equal.
        diff = lax.sub(high_value, low_value)
        up = lax.add(low_value, lax.mul(diff, high_weight))
        down = lax.sub(high_value, lax.mul(diff, lax.sub(_scalar(1, a.dtype), high_weight)))
        result = lax.select(lax.ge(high_weight, _scalar(0.5, a.dtype)), down, up)
        result = lax.select(lax.eq(low_value, high_value), low_value, result)
    elif method == "lower":
        result = low_value
    elif method == "higher":
        result = high_value
    elif method == "nearest":  # ties go to the lower index, as jnp (numpy rounds to even)
        result = lax.select(lax.le(high_weight, _scalar(0.5, a.dtype)), low_value, high_value)
    else:  # midpoint
        result = lax.mul(lax.add(low_value, high_value), _scalar(0.5, a.dtype))
    undefined = lax.eq(count, _scalar(0, a.dtype))
    if not squash_nans:
        any_nan = lax.reduce_or(is_nan, last)
        undefined = lax.bitwise_or(
            undefined,
            lax.broadcast_in_dim(any_nan, full_shape, tuple(range(len(q_shape), len(full_shape)))),
        )
    result = lax.select(undefined, _fill(result, np.nan), result)
    if keepdims:
        shape = q_shape + tuple(1 if d in dims else a.shape[d] for d in range(a.ndim))
        result = lax.reshape(result, shape)
    return result


def quantile(
    a,
    q,
    axis=None,
    out=None,
    overwrite_input: bool = False,
    method: str = "linear",
    keepdims: bool = False,
):
    """The ``q``-th quantiles (``q`` in [0, 1], scalar or 1-d) over ``axis``; the result has
    shape ``q.shape + reduced shape``. NaN if a slice contains NaN. ``method`` is one of
    linear, lower, higher, midpoint, nearest (ties to the lower index, as jnp)."""
    return _quantile("quantile", a, q, axis, out, overwrite_input, method, keepdims, False)


def nanquantile(
    a,
    q,
    axis=None,
    out=None,
    overwrite_input: bool = False,
    method: str = "linear",
    keepdims: bool = False,
):
    """:func:`quantile` of the non-NaN elements (NaN for all-NaN slices)."""
    return _quantile("nanquantile", a, q, axis, out, overwrite_input, method, keepdims, True)


def _percent(fun_name: str, q):
    (q,) = ufuncs.promote_args_inexact(fun_name, q)
    return lax.div(q, _scalar(100, q.dtype))


def percentile(
    a,
    q,
    axis=None,
    out=None,
    overwrite_input: bool = False,
    method: str = "linear",
    keepdims: bool = False,
):
    """The ``q``-th percentiles (``q`` in [0, 100]); see :func:`quantile`."""
    return _quantile(
        "percentile",
        a,
        _percent("percentile", q),
        axis,
        out,
        overwrite_input,
        method,
        keepdims,
        False,
    )


def nanpercentile(
    a,
    q,
    axis=None,
    out=None,
    overwrite_input: bool = False,
    method: str = "linear",
    keepdims: bool = False,
):
    """:func:`percentile` of the non-NaN elements."""
    return _quantile(
        "nanpercentile",
        a,
        _percent("nanpercentile", q),
        axis,
        out,
        overwrite_input,
        method,
        keepdims,
        True,
    )


def median(a, axis=None, out=None, overwrite_input: bool = False, keepdims: bool = False):
    """Median over ``axis`` (mean of the two middle values for even lengths)."""
    return _quantile("median", a, 0.5, axis, out, overwrite_input, "midpoint", keepdims, False)


def nanmedian(a, axis=None, out=None, overwrite_input: bool = False, keepdims: bool = False):
    """Median of the non-NaN elements (NaN for all-NaN slices)."""
    return _quantile("nanmedian", a, 0.5, axis, out, overwrite_input, "midpoint", keepdims, True)
