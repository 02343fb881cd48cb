"""numpy's in-place writers as pure functions (jax.numpy's ``place``, ``fill_diagonal``,
``put_along_axis``), ``mask_indices``, and the stacked products ``matvec`` / ``vecmat``.

fungrad arrays are immutable, so, as in JAX, the writers need ``inplace=False`` and return the
updated copy (``inplace=True``, numpy's default, raises ValueError saying so).
"""

from __future__ import annotations

import operator

from fungrad import numpy as fnp
from fungrad.numpy import util

__all__ = ["fill_diagonal", "mask_indices", "matvec", "place", "put_along_axis", "vecmat"]


def _no_inplace(name: str, inplace: bool) -> None:
    if inplace:
        raise ValueError(
            f"{name}: fungrad arrays are immutable, so {name} cannot modify its "
            f"argument; call {name}(..., inplace=False) and use the returned array"
        )


def place(arr, mask, vals, *, inplace: bool = True):
    """``arr`` with the entries where ``mask`` is True replaced by ``vals`` in order, cycling
    through ``vals`` when there are fewer (``jnp.place``)."""
    _no_inplace("place", inplace)
    util.check_arraylike("place", arr, mask, vals)
    arr = util.asarray(arr, fun_name="place")
    mask = fnp.broadcast_to(util.asarray(mask, fun_name="place").astype(bool), arr.shape)
    vals = fnp.ravel(util.asarray(vals, fun_name="place")).astype(arr.dtype)
    if vals.shape[0] == 0:
        raise ValueError("place: vals must not be empty (there is nothing to place)")
    flat_mask = fnp.ravel(mask)
    # the k-th True entry takes vals[k % len(vals)]
    k = fnp.cumsum(flat_mask.astype(int)) - 1
    picked = vals[fnp.remainder(fnp.maximum(k, 0), vals.shape[0])]
    return fnp.where(flat_mask, picked, fnp.ravel(arr)).reshape(arr.shape)


def fill_diagonal(a, val, wrap: bool = False, *, inplace: bool = True):
    """``a`` with its main diagonal (``a[i, i, ...]``) set to ``val`` (a scalar, or values
    used in order, cycling) (``jnp.fill_diagonal``). All dimensions must be equal beyond 2-D;
    ``wrap`` (numpy's wrapping for tall matrices) is not supported, as in JAX."""
    _no_inplace("fill_diagonal", inplace)
    if wrap:
        raise ValueError("fill_diagonal: wrap=True is not supported (as in JAX); use wrap=False")
    util.check_arraylike("fill_diagonal", a, val)
    a = util.asarray(a, fun_name="fill_diagonal")
    if a.ndim < 2:
        raise ValueError(f"fill_diagonal: array must be at least 2-D, got shape {a.shape}")
    if a.ndim > 2 and len(set(a.shape)) != 1:
        raise ValueError(
            f"fill_diagonal: all dimensions of an array of more than 2 "
            f"dimensions must be equal, got shape {a.shape}"
        )
    n = min(a.shape)
    vals = fnp.ravel(util.asarray(val, fun_name="fill_diagonal")).astype(a.dtype)
    if vals.shape[0] == 0:
        return a
    vals = vals[fnp.arange(n) % vals.shape[0]]
    i = fnp.arange(n)
    return a.at[(i,) * a.ndim].set(vals)


def put_along_axis(arr, indices, values, axis, inplace: bool = True, *, mode=None):
    """``arr`` with ``values`` written at ``indices`` along ``axis``, the inverse of
    ``take_along_axis`` (``jnp.put_along_axis``); ``axis=None`` works on the flattened
    array."""
    _no_inplace("put_along_axis", inplace)
    util.check_arraylike("put_along_axis", arr, indices, values)
    arr = util.asarray(arr, fun_name="put_along_axis")
    indices = util.asarray(indices, fun_name="put_along_axis")
    if axis is None:
        vals = fnp.broadcast_to(util.asarray(values).astype(arr.dtype), indices.shape)
        return (
            fnp.ravel(arr).at[fnp.ravel(indices)].set(fnp.ravel(vals), mode=mode).reshape(arr.shape)
        )
    axis = util.canonicalize_axis(axis, arr.ndim, "put_along_axis")
    if indices.ndim != arr.ndim:
        raise ValueError(
            f"put_along_axis: indices must have the rank of arr ({arr.ndim}), got "
            f"shape {indices.shape}"
        )
    shape = util.broadcast_shapes(
        tuple(1 if d == axis else s for d, s in enumerate(arr.shape)),
        tuple(1 if d == axis else s for d, s in enumerate(indices.shape)),
        fun_name="put_along_axis",
    )
    full_shape = tuple(indices.shape[axis] if d == axis else s for d, s in enumerate(shape))
    index = []
    for d in range(arr.ndim):
        if d == axis:
            index.append(fnp.broadcast_to(indices, full_shape))
        else:
            r = [1] * arr.ndim
            r[d] = full_shape[d]
            index.append(fnp.broadcast_to(fnp.arange(full_shape[d]).reshape(r), full_shape))
    vals = fnp.broadcast_to(util.asarray(values).astype(arr.dtype), full_shape)
    return arr.at[tuple(index)].set(vals, mode=mode)


def mask_indices(n: int, mask_func, k: int = 0, *, size=None):
    """The indices ``(rows, cols)`` where ``mask_func(ones((n, n)), k)`` is non-zero
    (``jnp.mask_indices``), e.g. ``mask_indices(3, triu, 1)`` for the strict upper
    triangle."""
    n = operator.index(n)
    mask = mask_func(fnp.ones((n, n), dtype=int), k)
    return fnp.nonzero(mask, size=size)


def matvec(x1, x2, /):
    """Stacked matrix-vector products ``x1[..., i, :] @ x2[..., :]`` with broadcasting of the
    leading dimensions (``jnp.matvec``)."""
    util.check_arraylike("matvec", x1, x2)
    x1, x2 = util.promote_dtypes(x1, x2, fun_name="matvec")
    if x1.ndim < 2 or x2.ndim < 1:
        raise ValueError(
            f"matvec: x1 must be at least 2-D and x2 at least 1-D, got shapes "
            f"{x1.shape} and {x2.shape}"
        )
    return fnp.matmul(x1, x2[..., None])[..., 0]


def vecmat(x1, x2, /):
    """Stacked vector-matrix products ``x1[..., :] @ x2[..., :, j]`` with broadcasting of the
    leading dimensions (``jnp.vecmat``; real arrays, so no conjugation)."""
    util.check_arraylike("vecmat", x1, x2)
    x1, x2 = util.promote_dtypes(x1, x2, fun_name="vecmat")
    if x1.ndim < 1 or x2.ndim < 2:
        raise ValueError(
            f"vecmat: x1 must be at least 1-D and x2 at least 2-D, got shapes "
            f"{x1.shape} and {x2.shape}"
        )
    return fnp.matmul(x1[..., None, :], x2)[..., 0, :]
