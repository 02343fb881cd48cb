"""Set operations on 1-D arrays (jax.numpy's ``isin``, ``setdiff1d``, ``union1d``,
``intersect1d``, ``setxor1d``) and the array-API ``unique_*`` functions.

Results have data-dependent lengths, so, as in JAX, a traced input needs a static ``size``:
the result is then cut or padded to ``size`` entries with ``fill_value`` (JAX's defaults: the
smallest result value for union1d/setxor1d/intersect1d, 0 for setdiff1d). Without ``size`` the
inputs must be concrete. Every function works on sorted copies with first-occurrence masks,
so the traced path is the same computation as the eager one.
"""

from __future__ import annotations

from typing import NamedTuple

from fungrad import core
from fungrad import numpy as fnp
from fungrad.numpy import util

__all__ = [
    "intersect1d",
    "isin",
    "setdiff1d",
    "setxor1d",
    "union1d",
    "unique_all",
    "unique_counts",
    "unique_inverse",
    "unique_values",
]

_ISIN_METHODS = ("auto", "compare_all", "binary_search", "sort")


def isin(
    element, test_elements, assume_unique: bool = False, invert: bool = False, *, method="auto"
):
    """Whether each entry of ``element`` occurs in ``test_elements`` (``jnp.isin``); the
    result has ``element``'s shape (``invert=True`` negates it). Every ``method`` computes the
    same answer; fungrad compares all pairs."""
    util.check_arraylike("isin", element, test_elements)
    if method not in _ISIN_METHODS:
        raise ValueError(f"isin: method must be one of {_ISIN_METHODS}, got {method!r}")
    x, t = util.promote_dtypes(element, test_elements, fun_name="isin")
    t = fnp.ravel(t)
    if t.shape[0] == 0:
        found = fnp.zeros(x.shape, bool)
    else:
        found = fnp.any(x[..., None] == t, axis=-1)
    return ~found if invert else found


def _sorted_firsts(ar, assume_unique: bool, name: str):
    """``(sorted values, stable sort permutation, mask of each value's first occurrence)``."""
    a = fnp.ravel(util.asarray(ar, fun_name=name))
    perm = fnp.argsort(a, stable=True)
    s = a[perm]
    if assume_unique or s.shape[0] == 0:
        first = fnp.ones(s.shape, bool)
    else:
        first = fnp.concatenate([fnp.ones(1, bool), s[1:] != s[:-1]])
    return s, perm, first


def _compress(name: str, values, keep, size, fill_value):
    """``values[keep]``; with ``size``: exactly ``size`` entries, padded with
    ``fill_value`` (a scalar or a function of the kept values giving one)."""
    if size is None:
        keep = util.concrete_or_error(
            keep,
            f"{name} without size= (its result length depends "
            "on the values; pass size= under jit/vmap/grad)",
        )
    n = int(size) if size is not None else None
    if values.shape[0] == 0:
        fill = 0 if callable(fill_value) or fill_value is None else fill_value
        return fnp.full(n or 0, fill, values.dtype)
    (idx,) = fnp.nonzero(keep, size=n, fill_value=0)
    out = values[idx]
    if n is None:
        return out
    fill = fill_value(out) if callable(fill_value) else fill_value
    count = fnp.sum(keep)
    return fnp.where(fnp.arange(n) < count, out, fnp.asarray(fill).astype(values.dtype))


def _smallest(out):
    return out[0]


def _check_1d_inputs(name: str, *arrays):
    util.check_arraylike(name, *arrays)


def setdiff1d(ar1, ar2, assume_unique: bool = False, *, size=None, fill_value=None):
    """The sorted unique values of ``ar1`` that are not in ``ar2`` (``jnp.setdiff1d``)."""
    _check_1d_inputs("setdiff1d", ar1, ar2)
    ar1, ar2 = util.promote_dtypes(ar1, ar2, fun_name="setdiff1d")
    s, _, first = _sorted_firsts(ar1, assume_unique, "setdiff1d")
    keep = first & ~isin(s, ar2)
    return _compress("setdiff1d", s, keep, size, 0 if fill_value is None else fill_value)


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """The sorted unique values of ``ar1`` and ``ar2`` together (``jnp.union1d``)."""
    _check_1d_inputs("union1d", ar1, ar2)
    ar1, ar2 = util.promote_dtypes(ar1, ar2, fun_name="union1d")
    both = fnp.concatenate([fnp.ravel(ar1), fnp.ravel(ar2)])
    s, _, first = _sorted_firsts(both, False, "union1d")
    return _compress("union1d", s, first, size, _smallest if fill_value is None else fill_value)


def setxor1d(ar1, ar2, assume_unique: bool = False, *, size=None, fill_value=None):
    """The sorted values in exactly one of ``ar1`` and ``ar2`` (``jnp.setxor1d``)."""
    _check_1d_inputs("setxor1d", ar1, ar2)
    ar1, ar2 = util.promote_dtypes(ar1, ar2, fun_name="setxor1d")
    both = fnp.concatenate([fnp.ravel(ar1), fnp.ravel(ar2)])
    s, _, first = _sorted_firsts(both, False, "setxor1d")
    if s.shape[0] == 0:
        return _compress("setxor1d", s, first, size, fill_value)
    # a value is in exactly one set when it occurs once in the concatenation of the two
    # sets of unique values
    in1, in2 = isin(s, ar1), isin(s, ar2)
    keep = first & (in1 != in2)
    return _compress("setxor1d", s, keep, size, _smallest if fill_value is None else fill_value)


def intersect1d(
    ar1,
    ar2,
    assume_unique: bool = False,
    return_indices: bool = False,
    *,
    size=None,
    fill_value=None,
):
    """The sorted unique values in both ``ar1`` and ``ar2`` (``jnp.intersect1d``); with
    ``return_indices=True`` also the index of each value's first occurrence in (the flattened)
    ``ar1`` and ``ar2`` (padding indices are ``len(ar1)`` / ``len(ar2)``, as in JAX)."""
    _check_1d_inputs("intersect1d", ar1, ar2)
    ar1, ar2 = util.promote_dtypes(ar1, ar2, fun_name="intersect1d")
    s1, perm1, first1 = _sorted_firsts(ar1, assume_unique, "intersect1d")
    keep = first1 & isin(s1, ar2)
    fill = _smallest if fill_value is None else fill_value
    values = _compress("intersect1d", s1, keep, size, fill)
    if not return_indices:
        return values
    s2, perm2, _ = _sorted_firsts(ar2, assume_unique, "intersect1d")
    n1, n2 = s1.shape[0], s2.shape[0]
    idx1 = _compress("intersect1d", perm1, keep, size, n1)
    if n2 == 0:
        idx2 = fnp.full(idx1.shape, n2, idx1.dtype)
    else:
        pos = fnp.clip(fnp.searchsorted(s2, values), 0, n2 - 1)
        idx2 = perm2[pos].astype(idx1.dtype)
        if size is not None:
            idx2 = fnp.where(fnp.arange(int(size)) < fnp.sum(keep), idx2, n2)
    return values, idx1, idx2


class UniqueAllResult(NamedTuple):
    values: object
    indices: object
    inverse_indices: object
    counts: object


class UniqueCountsResult(NamedTuple):
    values: object
    counts: object


class UniqueInverseResult(NamedTuple):
    values: object
    inverse_indices: object


def _unique(name, x, size, fill_value, **flags):
    util.check_arraylike(name, x)
    x = util.asarray(x, fun_name=name)
    return x, fnp.unique(x, size=size, fill_value=fill_value, **flags)


def unique_values(x, /, *, size=None, fill_value=None):
    """The sorted unique values of ``x`` (array API ``unique_values``; ``size`` as
    ``jnp.unique``)."""
    return _unique("unique_values", x, size, fill_value)[1]


def unique_counts(x, /, *, size=None, fill_value=None):
    """``(values, counts)`` of ``x``'s unique values (array API ``unique_counts``)."""
    _, (values, counts) = _unique("unique_counts", x, size, fill_value, return_counts=True)
    return UniqueCountsResult(values, counts)


def unique_inverse(x, /, *, size=None, fill_value=None):
    """``(values, inverse_indices)``; ``values[inverse_indices]`` rebuilds ``x``, and the
    inverse has ``x``'s shape (array API ``unique_inverse``)."""
    x, (values, inverse) = _unique("unique_inverse", x, size, fill_value, return_inverse=True)
    return UniqueInverseResult(values, fnp.reshape(inverse, core.get_aval(x).shape))


def unique_all(x, /, *, size=None, fill_value=None):
    """``(values, indices, inverse_indices, counts)`` of ``x``'s unique values (array API
    ``unique_all``): first-occurrence indices in the flattened ``x``, the inverse in ``x``'s
    shape, and the counts."""
    x, (values, indices, inverse, counts) = _unique(
        "unique_all",
        x,
        size,
        fill_value,
        return_index=True,
        return_inverse=True,
        return_counts=True,
    )
    return UniqueAllResult(values, indices, fnp.reshape(inverse, core.get_aval(x).shape), counts)
