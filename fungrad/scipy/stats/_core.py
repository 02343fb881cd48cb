"""Summary statistics of ``jax.scipy.stats``: :func:`mode`, :func:`rankdata`, :func:`sem`.

``mode`` and ``rankdata`` sort along the axis and find runs of equal values with running
maxima of run starts (and running minima of run ends), so they cost ``O(n log n)`` and
vectorise over the other axes. NaNs compare equal to each other here (they sort last and
form one run), as SciPy's ``mode`` counts them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

import fungrad.numpy as fnp
from fungrad import dtypes, lax
from fungrad.numpy import util

__all__ = ["ModeResult", "mode", "rankdata", "sem"]

_NAN_POLICIES = ("propagate", "omit", "raise")


class ModeResult(NamedTuple):
    """``(mode, count)``: the most common value and how often it occurs."""

    mode: object
    count: object


def _check_nan_policy(fun_name: str, nan_policy: str, supported=("propagate",)):
    if nan_policy not in _NAN_POLICIES:
        raise ValueError(
            f"{fun_name}: illegal nan_policy {nan_policy!r}; expected one of {_NAN_POLICIES}"
        )
    if nan_policy not in supported:
        raise ValueError(
            f"{fun_name}: nan_policy={nan_policy!r} is not supported (JAX does "
            f"not support it either, the NaN check cannot be traced); use one of "
            f"{supported} and check for NaNs outside {fun_name}"
        )


def _runs(s):
    """For ``s`` sorted along its last axis: ``(new, start, end)``, where ``new`` marks the
    first element of each run of equal values (NaNs equal to each other) and ``start``/``end``
    are the positions of the first/last element of the run each element belongs to."""
    n = s.shape[-1]
    same = (s[..., 1:] == s[..., :-1]) | (fnp.isnan(s[..., 1:]) & fnp.isnan(s[..., :-1]))
    new = fnp.concatenate([fnp.ones(s.shape[:-1] + (1,), bool), ~same], axis=-1)
    last = fnp.concatenate([~same, fnp.ones(s.shape[:-1] + (1,), bool)], axis=-1)
    pos = lax.broadcasted_iota(np.int32, s.shape, s.ndim - 1)
    start = lax.cummax(fnp.where(new, pos, 0), axis=s.ndim - 1)
    end = lax.cummin(fnp.where(last, pos, n - 1), axis=s.ndim - 1, reverse=True)
    return new, start, end


def mode(a, axis=0, nan_policy: str = "propagate", keepdims: bool = False) -> ModeResult:
    """The most common value along ``axis`` (None: the flattened array) and its count; ties
    go to the smallest value. An empty axis gives NaN with count 0 (float), as in JAX.

    Only ``nan_policy="propagate"`` is supported (NaNs count as one value).
    """
    util.check_arraylike("mode", a)
    _check_nan_policy("mode", nan_policy)
    x = fnp.atleast_1d(a)
    if axis is None:
        x = fnp.ravel(x)
        out_shape = (1,) * fnp.ndim(a) if keepdims else ()
        axis = 0
    else:
        axis = util.canonicalize_axis(axis, x.ndim, "mode")
        out_shape = (
            tuple(1 if i == axis else d for i, d in enumerate(x.shape))
            if keepdims
            else tuple(d for i, d in enumerate(x.shape) if i != axis)
        )
    if x.shape[axis] == 0:
        nan = fnp.full(out_shape, np.nan, dtypes.default_float_dtype())
        return ModeResult(nan, fnp.zeros(out_shape, dtypes.default_float_dtype()))
    s = fnp.sort(fnp.moveaxis(x, axis, -1), axis=-1)
    _, start, end = _runs(s)
    counts = end - start + 1
    best = fnp.argmax(counts, axis=-1, keepdims=True)  # first maximum: the smallest value
    value = fnp.take_along_axis(s, best, axis=-1)[..., 0]
    count = fnp.take_along_axis(counts, best, axis=-1)[..., 0]
    return ModeResult(value.reshape(out_shape), count.reshape(out_shape))


_RANK_METHODS = ("average", "min", "max", "dense", "ordinal")


def rankdata(a, method: str = "average", *, axis=None, nan_policy: str = "propagate"):
    """Ranks of the data, from 1, with ties resolved by ``method``: ``"average"`` (mean rank
    of the tie), ``"min"``, ``"max"``, ``"dense"`` (consecutive ranks for distinct values)
    or ``"ordinal"`` (order of appearance). ``axis=None`` ranks the flattened array, an int
    each 1-D slice along it. A slice containing NaN is all NaN. Result: default float dtype.
    """
    util.check_arraylike("rankdata", a)
    _check_nan_policy("rankdata", nan_policy)
    if method not in _RANK_METHODS:
        raise ValueError(f"rankdata: unknown method {method!r}; expected one of {_RANK_METHODS}")
    x = fnp.asarray(a)
    if axis is None:
        x, axis = fnp.ravel(x), 0
    else:
        axis = util.canonicalize_axis(axis, x.ndim, "rankdata")
    x = fnp.moveaxis(x, axis, -1)
    out_dtype = dtypes.default_float_dtype()
    order = fnp.argsort(x, axis=-1, stable=True)
    inverse = fnp.argsort(order, axis=-1, stable=True)
    s = fnp.take_along_axis(x, order, axis=-1)
    if method == "ordinal":
        ranks = (inverse + 1).astype(out_dtype)
    else:
        new, start, end = _runs(s)
        if method == "dense":
            sorted_ranks = fnp.cumsum(new, axis=-1)
        elif method == "min":
            sorted_ranks = start + 1
        elif method == "max":
            sorted_ranks = end + 1
        else:
            sorted_ranks = 0.5 * (start + end).astype(out_dtype) + 1.0
        ranks = fnp.take_along_axis(sorted_ranks.astype(out_dtype), inverse, axis=-1)
    if fnp.issubdtype(x.dtype, fnp.inexact):
        has_nan = fnp.any(fnp.isnan(x), axis=-1, keepdims=True)
        ranks = fnp.where(has_nan, np.nan, ranks)
    return fnp.moveaxis(ranks, -1, axis)


def sem(a, axis=0, ddof: int = 1, nan_policy: str = "propagate", *, keepdims: bool = False):
    """Standard error of the mean ``std(a, ddof) / sqrt(n)`` along ``axis`` (None: all).
    ``nan_policy="omit"`` ignores NaNs (``nanstd`` over the count of non-NaN values)."""
    _check_nan_policy("sem", nan_policy, supported=("propagate", "omit"))
    [b] = util.promote_args_inexact("sem", a)
    if nan_policy == "omit":
        count = fnp.sum(~fnp.isnan(b), axis=axis, keepdims=keepdims)
        return fnp.nanstd(b, axis=axis, ddof=ddof, keepdims=keepdims) / fnp.sqrt(
            count.astype(b.dtype)
        )
    size = b.size if axis is None else b.shape[util.canonicalize_axis(axis, b.ndim, "sem")]
    return fnp.std(b, axis=axis, ddof=ddof, keepdims=keepdims) / np.sqrt(size).astype(b.dtype)
