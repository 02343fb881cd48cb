"""fungrad.numpy index helpers (jax.numpy's ``index_tricks``/``indexing`` helpers): the
``diag_indices``/``tril_indices``/``triu_indices`` families, ``ravel_multi_index``,
``unravel_index`` and ``ix_``.

The ``*_indices`` helpers have static sizes, so they return concrete index arrays of the default
integer dtype computed with numpy. ``ravel_multi_index``, ``unravel_index`` and ``ix_`` are
written on lax and trace; as in JAX, ``unravel_index`` wraps negative indices once and clamps
out-of-bounds ones instead of raising, and ``ravel_multi_index(mode="raise")`` needs concrete
coordinates.
"""

from __future__ import annotations

import math

import numpy as np

from fungrad import dtypes, lax
from fungrad.array import Array
from fungrad.core import ConcretizationTypeError
from fungrad.numpy import util
from fungrad.numpy.indexing import _concrete, _int_array, _static_int

__all__ = [
    "diag_indices",
    "diag_indices_from",
    "tril_indices",
    "triu_indices",
    "tril_indices_from",
    "triu_indices_from",
    "ravel_multi_index",
    "unravel_index",
    "ix_",
]


def _static_index_arrays(arrays):
    dt = dtypes.default_int_dtype()
    return tuple(Array(np.asarray(a).astype(dt)) for a in arrays)


def diag_indices(n, ndim=2):
    """Indices of the main diagonal of an ``(n,) * ndim`` array.

    Example: ``x[diag_indices(3)]`` is the diagonal of a 3x3 ``x``.
    """
    n = _static_int(n, "diag_indices", "n")
    ndim = _static_int(ndim, "diag_indices", "ndim")
    if n < 0 or ndim < 0:
        raise ValueError(f"diag_indices: n and ndim must be non-negative, got n={n}, ndim={ndim}")
    return _static_index_arrays([np.arange(n)] * ndim)


def diag_indices_from(arr):
    """:func:`diag_indices` for the (square, at least 2-d) shape of ``arr``."""
    util.check_arraylike("diag_indices_from", arr, names=["arr"])
    shape = np.shape(arr) if not hasattr(arr, "shape") else arr.shape
    if len(shape) < 2 or len(set(shape)) != 1:
        raise ValueError(
            f"diag_indices_from: input must be at least 2-d with all dimensions "
            f"equal, got shape {tuple(shape)}"
        )
    return diag_indices(shape[0], len(shape))


def tril_indices(n, k=0, m=None):
    """Row and column indices of the lower triangle (on and below diagonal ``k``) of an
    ``(n, m)`` array.

    Example: ``tril_indices(3)`` gives the 6 positions with ``col <= row``.
    """
    n = _static_int(n, "tril_indices", "n")
    k = _static_int(k, "tril_indices", "k")
    m = n if m is None else _static_int(m, "tril_indices", "m")
    return _static_index_arrays(np.tril_indices(n, k, m))


def triu_indices(n, k=0, m=None):
    """Row and column indices of the upper triangle (on and above diagonal ``k``) of an
    ``(n, m)`` array."""
    n = _static_int(n, "triu_indices", "n")
    k = _static_int(k, "triu_indices", "k")
    m = n if m is None else _static_int(m, "triu_indices", "m")
    return _static_index_arrays(np.triu_indices(n, k, m))


def _shape_2d(arr, fun_name):
    util.check_arraylike(fun_name, arr, names=["arr"])
    shape = arr.shape if hasattr(arr, "shape") else np.shape(arr)
    if len(shape) != 2:
        raise ValueError(f"{fun_name}: input array must be 2-d, got shape {tuple(shape)}")
    return shape


def tril_indices_from(arr, k=0):
    """:func:`tril_indices` for the shape of the 2-d ``arr``."""
    n, m = _shape_2d(arr, "tril_indices_from")
    return tril_indices(n, k, m)


def triu_indices_from(arr, k=0):
    """:func:`triu_indices` for the shape of the 2-d ``arr``."""
    n, m = _shape_2d(arr, "triu_indices_from")
    return triu_indices(n, k, m)


def ravel_multi_index(multi_index, dims, mode="raise", order="C"):
    """Flat indices of the coordinates ``multi_index`` (one integer array per dimension) in
    an array of shape ``dims``.

    ``mode``: "raise" (coordinates must be concrete and in bounds), "wrap" or "clip".

    Example: ``ravel_multi_index((jnp.array([1]), jnp.array([2])), (3, 4))`` is ``[6]``.
    """
    name = "ravel_multi_index"
    dims = tuple(_static_int(d, name, "dims") for d in dims)
    if len(multi_index) != len(dims):
        raise ValueError(
            f"{name}: parameter multi_index must be a sequence of length "
            f"{len(dims)}, got {len(multi_index)}"
        )
    if order not in ("C", "F"):
        raise ValueError(f"{name}: order must be 'C' or 'F', got {order!r}")
    idx = [_int_array(i, name, "multi_index") for i in multi_index]
    if mode == "raise":
        for i, d in zip(idx, dims):
            val = _concrete(
                i,
                name,
                "mode='raise' needs concrete coordinates; use "
                "mode='wrap' or mode='clip' in transformed code",
            )
            if val.size and (val.min() < 0 or val.max() >= d):
                raise ValueError(
                    f"{name}: invalid entry in coordinates array (must be in [0, {d}))"
                )
    elif mode == "wrap":
        from fungrad.numpy import ufuncs

        idx = [ufuncs.remainder(i, d) for i, d in zip(idx, dims)]
    elif mode == "clip":
        idx = [
            lax.min(lax.max(i, i.dtype.type(0)), i.dtype.type(max(d - 1, 0)))
            for i, d in zip(idx, dims)
        ]
    else:
        raise ValueError(f"{name}: invalid mode {mode!r}; expected 'raise', 'wrap' or 'clip'")
    dt = dtypes.default_int_dtype()
    shape = util.broadcast_shapes(*(i.shape for i in idx), fun_name=name)
    strides = (
        np.cumprod((1,) + dims[::-1][:-1])[::-1] if order == "C" else np.cumprod((1,) + dims[:-1])
    )
    out = lax.full(shape, 0, dt)
    for i, s in zip(idx, strides):
        i = util.broadcast_to_shape(lax.convert_element_type(i, dt), shape)
        out = lax.add(out, lax.mul(i, dt.type(s)))
    return out


def _unravel_nonneg(flat, shape):
    """Row-major coordinates of non-negative in-bounds flat indices."""
    coords = []
    for d in reversed(shape[1:]):
        d = max(d, 1)  # an empty shape has only fill entries (flat index 0)
        coords.append(lax.rem(flat, flat.dtype.type(d)))
        flat = lax.div(flat, flat.dtype.type(d))
    coords.append(flat)
    return tuple(reversed(coords))


def unravel_index(indices, shape):
    """The coordinates in an array of ``shape`` of the flat ``indices``.

    NB (as JAX): negative indices wrap once and out-of-bounds indices clamp, instead of
    raising. Example: ``unravel_index(jnp.array([5]), (2, 3))`` is ``([1], [2])``.
    """
    name = "unravel_index"
    idx = _int_array(indices, name, "indices")
    shape = tuple(_static_int(d, name, "shape") for d in shape)
    total = math.prod(shape)
    if total == 0:
        raise ValueError(f"{name}: cannot unravel indices into the empty shape {shape}")
    if dtypes.is_signed(idx.dtype):
        idx = lax.select_n(lax.lt(idx, idx.dtype.type(0)), idx, lax.add(idx, total))
        idx = lax.max(idx, idx.dtype.type(0))
    idx = lax.min(idx, idx.dtype.type(min(total - 1, np.iinfo(idx.dtype).max)))
    if not shape:
        return ()
    return _unravel_nonneg(idx, shape)


def _mesh_array(a, j: int):
    """Argument ``j`` of ix_ as an array: an empty sequence is an int32 index array."""
    if isinstance(a, (list, tuple)) and len(a) == 0:
        return Array(np.zeros(0, np.int32))
    util.check_arraylike("ix_", a, names=[f"argument {j}"])
    a = util.asarray(a, fun_name="ix_")
    if dtypes.is_bool(a.dtype):
        # numpy's meaning: the positions of the True entries (JAX refuses masks). The result's
        # size depends on the values, so a traced mask gets nonzero's error and its fix.
        from fungrad.numpy.sorting import nonzero

        if a.ndim != 1:
            raise ValueError(
                f"ix_: arguments must be 1-dimensional, got shape {a.shape} for argument {j}"
            )
        try:
            return nonzero(a)[0]
        except ConcretizationTypeError:
            raise ConcretizationTypeError(
                f"ix_: argument {j} is a traced boolean mask, whose True positions (and so the "
                f"result's shape) depend on traced values; pass its indices instead, "
                f"fnp.nonzero(mask, size=n)[0] with a static n"
            ) from None
    return a


def ix_(*args):
    """Open-mesh index arrays: argument ``j`` (1-d) reshaped to have its entries along
    dimension ``j``, so ``x[ix_(rows, cols)]`` is the ``rows x cols`` submatrix. As in JAX,
    any numeric dtype is kept (floats too); a concrete boolean mask means the positions of its
    True entries, as in NumPy.
    """
    out = []
    for j, a in enumerate(args):
        a = _mesh_array(a, j)
        if a.ndim != 1:
            raise ValueError(
                f"ix_: arguments must be 1-dimensional, got shape {a.shape} for argument {j}"
            )
        shape = [1] * len(args)
        shape[j] = a.shape[0]
        out.append(lax.reshape(a, tuple(shape)))
    return tuple(out)
