"""fungrad.numpy shape manipulation: reshaping and axis permutation, broadcasting, joining
(``concatenate``/``stack``/``block``), splitting, tiling and repeating, flips and rolls,
``diff``, ``append``/``delete``/``insert``, ``resize`` and ``trim_zeros``. (``pad`` lives in
padding.py, and uses this module's ``_arr``, ``_slice_axis`` and ``_broadcast_along``.)

Everything is written on fungrad.lax shape ops (reshape, transpose, broadcast_in_dim,
concatenate, pad, slice, rev, squeeze, expand_dims); ``take`` (a gather) is used only to
select many scattered static indices. Sizes must be static, as in JAX: functions whose output
shape depends on values (``repeat`` without ``total_repeat_length``, ``delete``, ``insert``,
``trim_zeros``) need concrete values and raise ConcretizationTypeError under tracing.
"""

from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING

import numpy as np

from fungrad import core, dtypes, lax
from fungrad.array import Array
from fungrad.numpy import creation, indexing, util

if TYPE_CHECKING:
    from fungrad.typing import ArrayLike

__all__ = [
    "append",
    "array_split",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "block",
    "broadcast_arrays",
    "broadcast_shapes",
    "broadcast_to",
    "column_stack",
    "concat",
    "concatenate",
    "delete",
    "diff",
    "dsplit",
    "dstack",
    "ediff1d",
    "expand_dims",
    "flip",
    "fliplr",
    "flipud",
    "hsplit",
    "hstack",
    "insert",
    "matrix_transpose",
    "moveaxis",
    "ndim",
    "permute_dims",
    "ravel",
    "repeat",
    "reshape",
    "resize",
    "roll",
    "rollaxis",
    "rot90",
    "row_stack",
    "shape",
    "size",
    "split",
    "squeeze",
    "stack",
    "swapaxes",
    "tile",
    "transpose",
    "trim_zeros",
    "unstack",
    "vsplit",
    "vstack",
]


# -- helpers ------------------------------------------------------------------------------------


def _arr(x, fun_name: str, name: str = "a"):
    util.check_arraylike(fun_name, x, names=[name])
    return util.asarray(x, fun_name=fun_name)


def _is_array(x) -> bool:
    return type(x) is Array or isinstance(x, (core.Tracer, np.ndarray))


def _axis_tuple(axis) -> tuple:
    return tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)


def _index_tuple(x, fun_name: str, what: str) -> tuple[int, ...]:
    """An int, or a sequence of them (a tuple, list, or concrete 1-D integer array), as a
    tuple of ints (JAX's ``_ensure_index_tuple``)."""
    try:
        return (operator.index(x),)
    except TypeError:
        pass
    if _is_array(x):
        x = util.concrete_or_error(x, f"the {what} argument of {fun_name}")
    try:
        return tuple(operator.index(i) for i in x)
    except TypeError:
        raise TypeError(
            f"{fun_name}: {what} must be an int or a sequence of ints, got {x!r:.60}"
        ) from None


def _count(x, fun_name: str, what: str) -> int:
    """A concrete count, ``int(x)`` as JAX takes it (so 2.0 is 2); non-numbers are refused."""
    v = util.concrete_or_error(x, f"the {what} argument of {fun_name}")
    if (
        isinstance(v, (str, bytes))
        or np.ndim(v) != 0
        or dtypes.kind(np.asarray(v).dtype) not in "biuf"
    ):
        raise TypeError(
            f"{fun_name}: {what} must be an integer (a number of sections), got {x!r:.60}"
        )
    return int(v)


def _slice_axis(x, start: int, stop: int, axis: int):
    """``x[..., start:stop, ...]`` along ``axis`` (0 <= start <= stop <= size)."""
    if start == 0 and stop == x.shape[axis]:
        return x
    starts = [0] * x.ndim
    limits = list(x.shape)
    starts[axis], limits[axis] = start, stop
    return lax.slice(x, tuple(starts), tuple(limits))


def _broadcast_along(x, axis: int, n: int):
    """``x`` (size 1 along ``axis``) repeated ``n`` times along ``axis``."""
    shape = list(x.shape)
    shape[axis] = n
    return lax.broadcast_in_dim(x, tuple(shape), tuple(range(x.ndim)))


_MAX_SEGMENTS = 8  # more static segments than this and one gather is cheaper than slices


def _take_static(x, idx, axis: int):
    """``x`` indexed along ``axis`` by the static in-range integer array ``idx``.

    Runs of consecutive indices become slices and runs of one repeated index become
    broadcasts, joined by one concatenate; only index sets with many runs use a gather.
    """
    idx = np.asarray(idx, dtype=np.int64).reshape(-1)
    if idx.size == 0:
        return _slice_axis(x, 0, 0, axis)
    segments = []  # (first index, length, step 0 or 1)
    i = 0
    while i < idx.size:
        j = i + 1
        step = int(idx[j] - idx[i]) if j < idx.size and idx[j] - idx[i] in (0, 1) else 1
        while j < idx.size and idx[j] - idx[j - 1] == step:
            j += 1
        segments.append((int(idx[i]), j - i, step))
        i = j
    if len(segments) > _MAX_SEGMENTS:
        return indexing.take(x, idx.astype(np.int32), axis=axis)
    parts = []
    for first, length, step in segments:
        if step == 1:
            parts.append(_slice_axis(x, first, first + length, axis))
        else:
            parts.append(_broadcast_along(_slice_axis(x, first, first + 1, axis), axis, length))
    return parts[0] if len(parts) == 1 else lax.concatenate(parts, axis)


def _maybe_concrete(x):
    """The numpy value of a concrete array-like, or None for an abstract tracer."""
    if isinstance(x, core.Tracer):
        val = x.to_concrete_value()
        return None if val is None else np.asarray(val)
    return np.asarray(x)


# -- shape queries ------------------------------------------------------------------------------


def shape(a) -> tuple[int, ...]:
    """The shape of an array, scalar or nested list."""
    return tuple(a.shape) if hasattr(a, "shape") else np.shape(a)


def ndim(a) -> int:
    """The number of dimensions of an array, scalar or nested list."""
    return len(shape(a))


def size(a, axis=None) -> int:
    """The number of elements of ``a`` (along ``axis``, an int or tuple, if given)."""
    s = shape(a)
    if axis is None:
        return math.prod(s)
    axes = util.canonicalize_axes(_axis_tuple(axis), len(s), "size")
    return math.prod(s[i] for i in axes)


# -- reshaping and permuting axes -----------------------------------------------------------------


def _reshape_shape(old: tuple[int, ...], newshape, fun_name: str) -> tuple[int, ...]:
    elems = list(newshape) if isinstance(newshape, (tuple, list)) else [newshape]
    dims = []
    for d in elems:
        d = util.concrete_or_error(d, f"the shape argument of {fun_name}")
        try:
            dims.append(operator.index(d))
        except TypeError:
            raise TypeError(
                f"{fun_name}: shape must be an int or a sequence of ints, got {newshape!r}"
            ) from None
    size_ = math.prod(old)
    if dims.count(-1) > 1:
        raise TypeError(
            f"{fun_name}: can only specify one unknown dimension (-1), got {tuple(dims)}"
        )
    if any(d < -1 for d in dims):
        raise TypeError(f"{fun_name}: negative dimensions are not allowed, got {tuple(dims)}")
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        if known == 0 or size_ % known:
            raise TypeError(
                f"{fun_name}: cannot reshape array of shape {old} (size {size_}) "
                f"into shape {tuple(dims)}"
            )
        dims[dims.index(-1)] = size_ // known
    if math.prod(dims) != size_:
        raise TypeError(
            f"{fun_name}: cannot reshape array of shape {old} (size {size_}) into "
            f"shape {tuple(dims)} (size {math.prod(dims)})"
        )
    return tuple(dims)


def reshape(a: ArrayLike, shape=None, order: str = "C", *, copy: bool | None = None) -> Array:
    """``a`` with a new ``shape`` (one entry may be -1, inferred from the size).

    ``order="F"`` reads and writes elements in column-major order; ``"A"`` is ``"C"`` since
    Arrays are always C-ordered.

    Example:
        >>> fnp.reshape(fnp.arange(6), (2, -1)).shape
        (2, 3)
    """
    del copy
    x = _arr(a, "reshape")
    if shape is None:
        raise TypeError("reshape: the shape argument is required")
    new = _reshape_shape(tuple(x.shape), shape, "reshape")
    if order in ("C", "A"):
        return x if new == tuple(x.shape) else lax.reshape(x, new)
    if order == "F":
        return transpose(lax.reshape(transpose(x), new[::-1]))
    raise ValueError(f"reshape: order must be 'C', 'F' or 'A', got {order!r}")


def ravel(a, order: str = "C"):
    """``a`` flattened to 1-D (in C or Fortran ``order``)."""
    x = _arr(a, "ravel")
    return reshape(x, (x.size,), order=order)


def transpose(a: ArrayLike, axes=None) -> Array:
    """``a`` with its axes permuted (reversed when ``axes`` is None).

    Example:
        >>> fnp.transpose(fnp.zeros((2, 3, 4)), (1, 0, 2)).shape
        (3, 2, 4)
    """
    x = _arr(a, "transpose")
    if axes is None:
        perm = tuple(range(x.ndim))[::-1]
    else:
        perm = tuple(util.canonicalize_axis(ax, x.ndim, "transpose") for ax in axes)
        if sorted(perm) != list(range(x.ndim)):
            raise TypeError(
                f"transpose: axes {tuple(axes)} are not a permutation of the "
                f"axes of an array of shape {tuple(x.shape)}"
            )
    return x if perm == tuple(range(x.ndim)) else lax.transpose(x, perm)


def permute_dims(a, /, axes):
    """Array API name of :func:`transpose` (``axes`` required)."""
    return transpose(a, axes)


def matrix_transpose(x, /):
    """Swap the last two axes (``x`` must be at least 2-D)."""
    x = _arr(x, "matrix_transpose", "x")
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose: x must be at least 2-D, got shape {tuple(x.shape)}")
    perm = list(range(x.ndim))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return lax.transpose(x, tuple(perm))


def swapaxes(a, axis1: int, axis2: int):
    """``a`` with ``axis1`` and ``axis2`` interchanged."""
    x = _arr(a, "swapaxes")
    i = util.canonicalize_axis(axis1, x.ndim, "swapaxes")
    j = util.canonicalize_axis(axis2, x.ndim, "swapaxes")
    perm = list(range(x.ndim))
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(x, perm)


def moveaxis(a, source, destination):
    """``a`` with axes ``source`` moved to positions ``destination`` (ints or sequences),
    the other axes keeping their order.

    Example:
        >>> fnp.moveaxis(fnp.zeros((2, 3, 4)), 0, -1).shape
        (3, 4, 2)
    """
    x = _arr(a, "moveaxis")
    src = [util.canonicalize_axis(s, x.ndim, "moveaxis") for s in _axis_tuple(source)]
    dst = [util.canonicalize_axis(d, x.ndim, "moveaxis") for d in _axis_tuple(destination)]
    if len(src) != len(dst):
        raise ValueError(
            f"moveaxis: source {source} and destination {destination} must have "
            "the same number of axes"
        )
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f"moveaxis: repeated axis in source {source} or destination {destination}")
    perm = [i for i in range(x.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        perm.insert(d, s)
    return transpose(x, perm)


def rollaxis(a, axis: int, start: int = 0):
    """Move ``axis`` to sit before position ``start`` (NumPy's older form of moveaxis)."""
    x = _arr(a, "rollaxis")
    axis = util.canonicalize_axis(axis, x.ndim, "rollaxis")
    start = operator.index(start)
    if not -x.ndim <= start <= x.ndim:
        raise np.exceptions.AxisError(
            f"rollaxis: start={start} must satisfy {-x.ndim} <= start <= {x.ndim}"
        )
    start = start + x.ndim if start < 0 else start
    if start > axis:
        start -= 1
    return moveaxis(x, axis, start)


def expand_dims(a: ArrayLike, axis) -> Array:
    """``a`` with size-1 axes inserted at positions ``axis`` (int or tuple) of the result.

    Example:
        >>> fnp.expand_dims(fnp.zeros(3), (0, -1)).shape
        (1, 3, 1)
    """
    x = _arr(a, "expand_dims")
    axes = _index_tuple(axis, "expand_dims", "axis")
    out_ndim = x.ndim + len(axes)
    dims = tuple(util.canonicalize_axis(ax, out_ndim, "expand_dims") for ax in axes)
    if len(set(dims)) != len(dims):
        raise ValueError(f"expand_dims: repeated axis in {axis}")
    return lax.expand_dims(x, tuple(sorted(dims))) if dims else x


def squeeze(a, axis=None):
    """``a`` without its size-1 axes (only those in ``axis`` if given; they must be size 1).

    Example:
        >>> fnp.squeeze(fnp.zeros((1, 3, 1))).shape
        (3,)
    """
    x = _arr(a, "squeeze")
    if axis is None:
        dims = tuple(i for i, d in enumerate(x.shape) if d == 1)
    else:
        dims = util.canonicalize_axes(list(_axis_tuple(axis)), x.ndim, "squeeze")
        bad = [i for i in dims if x.shape[i] != 1]
        if bad:
            raise ValueError(
                f"squeeze: cannot squeeze axis {bad[0]} of size {x.shape[bad[0]]} "
                f"(array shape {tuple(x.shape)}); only size-1 axes can be removed"
            )
    return lax.squeeze(x, dims) if dims else x


# -- broadcasting -------------------------------------------------------------------------------


def broadcast_shapes(*shapes) -> tuple[int, ...]:
    """The shape NumPy broadcasting gives ``shapes`` (ints count as 1-D shapes)."""
    shapes = [(s,) if np.ndim(s) == 0 else tuple(s) for s in shapes]
    return util.broadcast_shapes(*shapes, fun_name="broadcast_shapes")


def broadcast_to(array, shape):
    """``array`` broadcast to ``shape`` (NumPy rules: trailing axes align, size 1 stretches).

    Example:
        >>> fnp.broadcast_to(fnp.arange(3), (2, 3)).shape
        (2, 3)
    """
    x = _arr(array, "broadcast_to", "array")
    return util.broadcast_to_shape(x, util.canonicalize_shape(shape, "broadcast_to"))


def broadcast_arrays(*args) -> list:
    """The arrays broadcast to their common shape (dtypes unchanged)."""
    util.check_arraylike("broadcast_arrays", *args)
    xs = [util.asarray(a, fun_name="broadcast_arrays") for a in args]
    common = util.broadcast_shapes(*(x.shape for x in xs), fun_name="broadcast_arrays")
    return [util.broadcast_to_shape(x, common) for x in xs]


def _atleast(arys, n: int, fun_name: str):
    util.check_arraylike(fun_name, *arys)
    out = []
    for a in arys:
        x = util.asarray(a, fun_name=fun_name)
        if x.ndim < n:
            if n == 3 and x.ndim == 2:
                new = tuple(x.shape) + (1,)
            elif n == 3 and x.ndim == 1:
                new = (1,) + tuple(x.shape) + (1,)
            else:
                new = (1,) * (n - x.ndim) + tuple(x.shape)
            x = lax.reshape(x, new)
        out.append(x)
    return out[0] if len(out) == 1 else out


def atleast_1d(*arys):
    """Each input as an array of at least 1 dimension (one array or a list)."""
    return _atleast(arys, 1, "atleast_1d")


def atleast_2d(*arys):
    """Each input as an array of at least 2 dimensions (1-D ``(n,)`` becomes ``(1, n)``)."""
    return _atleast(arys, 2, "atleast_2d")


def atleast_3d(*arys):
    """Each input with at least 3 dimensions: ``(n,)`` -> ``(1, n, 1)``, ``(m, n)`` ->
    ``(m, n, 1)``."""
    return _atleast(arys, 3, "atleast_3d")


# -- joining ------------------------------------------------------------------------------------


def _as_list(arrays, fun_name: str) -> list:
    """A sequence of array-likes, or the slices along axis 0 of one array."""
    if _is_array(arrays):
        x = util.asarray(arrays, fun_name=fun_name)
        if x.ndim == 0:
            raise ValueError(f"{fun_name}: need a sequence of arrays, got a 0-d array")
        return list(unstack(x))
    arrays = list(arrays)
    util.check_arraylike(fun_name, *arrays)
    return arrays


def _promote(arrays, dtype, fun_name: str) -> list:
    if dtype is None:
        return util.promote_dtypes(*arrays)
    dt = dtypes.canonicalize_dtype(dtype)
    return [util.asarray(a, dt, fun_name) for a in arrays]


def concatenate(arrays, axis: int | None = 0, dtype=None) -> Array:
    """Join arrays along an existing ``axis`` (``axis=None`` flattens them first).

    Dtypes are promoted with JAX's rules (weak Python scalars, int32 + float16 -> float16).

    Example:
        >>> fnp.concatenate([fnp.zeros((1, 2)), fnp.ones((2, 2))]).shape
        (3, 2)
    """
    if _is_array(arrays):
        return _concatenate_array(arrays, axis, dtype)
    arrays = _as_list(arrays, "concatenate")
    if not arrays:
        raise ValueError("concatenate: need at least one array to concatenate")
    if axis is None:
        return concatenate([ravel(a) for a in arrays], 0, dtype)
    xs = _promote(arrays, dtype, "concatenate")
    nd = xs[0].ndim
    if nd == 0:
        raise ValueError("concatenate: zero-dimensional arrays cannot be concatenated")
    axis = util.canonicalize_axis(axis, nd, "concatenate")
    for x in xs:
        if x.ndim != nd or any(
            d != d0 for i, (d, d0) in enumerate(zip(x.shape, xs[0].shape)) if i != axis
        ):
            raise TypeError(
                f"concatenate: array shapes must match except along axis {axis}, got "
                + ", ".join(str(tuple(y.shape)) for y in xs)
            )
    return xs[0] if len(xs) == 1 else lax.concatenate(xs, axis)


def _concatenate_array(arrays, axis, dtype):
    """concatenate of the slices along axis 0 of one array: a transpose and a reshape."""
    x = util.asarray(
        arrays, None if dtype is None else dtypes.canonicalize_dtype(dtype), "concatenate"
    )
    if x.ndim == 0 or x.shape[0] == 0:
        raise ValueError("concatenate: need at least one array to concatenate")
    if axis is None:
        return ravel(x)
    if x.ndim == 1:
        raise ValueError("concatenate: zero-dimensional arrays cannot be concatenated")
    axis = util.canonicalize_axis(axis, x.ndim - 1, "concatenate")
    s = tuple(x.shape)
    merged = s[1 : axis + 1] + (s[0] * s[axis + 1],) + s[axis + 2 :]
    return reshape(moveaxis(x, 0, axis), merged)


def concat(arrays, /, *, axis: int | None = 0):
    """Array API name of :func:`concatenate`."""
    return concatenate(arrays, axis=axis)


def stack(arrays, axis: int = 0, out=None, dtype=None) -> Array:
    """Join arrays of one shape along a new ``axis``.

    Example:
        >>> fnp.stack([fnp.zeros(3), fnp.ones(3)], axis=1).shape
        (3, 2)
    """
    if out is not None:
        raise ValueError("stack: the out argument is not supported (Arrays are immutable)")
    if _is_array(arrays):
        x = util.asarray(
            arrays,
            dtype=None if dtype is None else dtypes.canonicalize_dtype(dtype),
            fun_name="stack",
        )
        if x.ndim == 0:
            raise ValueError("stack: need a sequence of arrays, got a 0-d array")
        return moveaxis(x, 0, util.canonicalize_axis(axis, x.ndim, "stack"))
    arrays = _as_list(arrays, "stack")
    if not arrays:
        raise ValueError("stack: need at least one array to stack")
    xs = _promote(arrays, dtype, "stack")
    shp = tuple(xs[0].shape)
    if any(tuple(x.shape) != shp for x in xs):
        raise ValueError(
            "stack: all input arrays must have the same shape, got "
            + ", ".join(str(tuple(x.shape)) for x in xs)
        )
    axis = util.canonicalize_axis(axis, len(shp) + 1, "stack")
    new = shp[:axis] + (1,) + shp[axis:]
    xs = [lax.reshape(x, new) for x in xs]
    return xs[0] if len(xs) == 1 else lax.concatenate(xs, axis)


def unstack(x, /, *, axis: int = 0) -> tuple:
    """The slices of ``x`` along ``axis``, as a tuple of arrays."""
    x = _arr(x, "unstack", "x")
    if x.ndim == 0:
        raise ValueError("unstack: x must be at least 1-D")
    axis = util.canonicalize_axis(axis, x.ndim, "unstack")
    return tuple(lax.squeeze(_slice_axis(x, i, i + 1, axis), (axis,)) for i in range(x.shape[axis]))


def vstack(tup, dtype=None):
    """Stack arrays row-wise: concatenate along axis 0 after :func:`atleast_2d`."""
    xs = [atleast_2d(a) for a in _as_list(tup, "vstack")]
    return concatenate(xs, axis=0, dtype=dtype)


def row_stack(tup, dtype=None):
    """Alias of :func:`vstack` (NumPy's older name)."""
    return vstack(tup, dtype=dtype)


def hstack(tup, dtype=None):
    """Stack arrays column-wise: along axis 1 (axis 0 for 1-D inputs) after atleast_1d."""
    xs = [atleast_1d(a) for a in _as_list(tup, "hstack")]
    if not xs:
        raise ValueError("hstack: need at least one array to concatenate")
    return concatenate(xs, axis=0 if xs[0].ndim == 1 else 1, dtype=dtype)


def dstack(tup, dtype=None):
    """Stack arrays depth-wise: along axis 2 after :func:`atleast_3d`."""
    xs = [atleast_3d(a) for a in _as_list(tup, "dstack")]
    return concatenate(xs, axis=2, dtype=dtype)


def column_stack(tup):
    """Stack 1-D arrays as columns of a 2-D array (higher-dimensional inputs along axis 1)."""
    xs = []
    for a in _as_list(tup, "column_stack"):
        x = util.asarray(a, fun_name="column_stack")
        xs.append(lax.reshape(x, (x.size, 1)) if x.ndim < 2 else x)
    return concatenate(xs, axis=1)


def _block(xs):
    if isinstance(xs, tuple):
        raise ValueError(f"block: nested sequences must be lists, got a tuple {xs!r}")
    if isinstance(xs, list):
        if not xs:
            raise ValueError("block: empty lists are not allowed")
        parts, depths = zip(*(_block(x) for x in xs))
        if any(d != depths[0] for d in depths[1:]):
            raise ValueError("block: mismatched list depths")
        rank = max(depths[0], max(p.ndim for p in parts))
        parts = [
            lax.reshape(p, (1,) * (rank - p.ndim) + tuple(p.shape)) if p.ndim < rank else p
            for p in parts
        ]
        return concatenate(parts, axis=-depths[0]), depths[0] + 1
    return _arr(xs, "block", "arrays"), 1


def block(arrays):
    """Assemble an array from nested lists of blocks (innermost lists join the last axis).

    Example:
        >>> fnp.block([[fnp.ones((2, 2)), fnp.zeros((2, 1))], [fnp.zeros((1, 3))]]).shape
        (3, 3)
    """
    out, _ = _block(arrays)
    return out


# -- splitting ----------------------------------------------------------------------------------


def _split(fun_name: str, ary, indices_or_sections, axis):
    x = _arr(ary, fun_name, "ary")
    axis = util.canonicalize_axis(axis, x.ndim, fun_name)
    n = x.shape[axis]
    ios = indices_or_sections
    if isinstance(ios, (tuple, list)) or (_is_array(ios) and ios.ndim > 0):
        cuts = (
            util.concrete_or_error(ios, f"the indices_or_sections argument of {fun_name}")
            if _is_array(ios)
            else ios
        )
        cuts = [operator.index(c) for c in cuts]
        # NB: NumPy's slicing semantics (indices clamp, negative ones count from the end,
        # decreasing ones give empty pieces); JAX raises on such indices.
        bounds = [0] + cuts + [n]
        pieces = []
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            start, stop, _ = slice(lo, hi).indices(n)
            pieces.append((start, max(start, stop)))
    else:
        sections = _count(ios, fun_name, "indices_or_sections")
        if sections <= 0:
            raise ValueError(f"{fun_name}: number of sections must be positive, got {sections}")
        part, rest = divmod(n, sections)
        if rest and fun_name != "array_split":
            raise ValueError(
                f"{fun_name}: an axis of size {n} cannot be split into {sections} "
                "equal sections; use array_split for unequal ones"
            )
        sizes = [part + 1] * rest + [part] * (sections - rest)
        starts = np.cumsum([0] + sizes[:-1])
        pieces = [(int(s), int(s) + z) for s, z in zip(starts, sizes)]
    return [_slice_axis(x, lo, hi, axis) for lo, hi in pieces]


def split(ary, indices_or_sections, axis: int = 0) -> list:
    """Split ``ary`` along ``axis`` into equal sections (an int) or at the given indices.

    Example:
        >>> [p.shape for p in fnp.split(fnp.arange(6), [2, 3])]
        [(2,), (1,), (3,)]
    """
    return _split("split", ary, indices_or_sections, axis)


def array_split(ary, indices_or_sections, axis: int = 0) -> list:
    """As :func:`split`, but an int need not divide the axis: the first pieces are longer."""
    return _split("array_split", ary, indices_or_sections, axis)


def hsplit(ary, indices_or_sections) -> list:
    """Split along axis 1 (axis 0 for 1-D arrays)."""
    x = _arr(ary, "hsplit", "ary")
    if x.ndim == 0:
        raise ValueError("hsplit: ary must be at least 1-D")
    return _split("hsplit", x, indices_or_sections, 0 if x.ndim == 1 else 1)


def vsplit(ary, indices_or_sections) -> list:
    """Split along axis 0 (``ary`` must be at least 2-D)."""
    x = _arr(ary, "vsplit", "ary")
    if x.ndim < 2:
        raise ValueError(f"vsplit: ary must be at least 2-D, got shape {tuple(x.shape)}")
    return _split("vsplit", x, indices_or_sections, 0)


def dsplit(ary, indices_or_sections) -> list:
    """Split along axis 2 (``ary`` must be at least 3-D)."""
    x = _arr(ary, "dsplit", "ary")
    if x.ndim < 3:
        raise ValueError(f"dsplit: ary must be at least 3-D, got shape {tuple(x.shape)}")
    return _split("dsplit", x, indices_or_sections, 2)


# -- tiling and repeating -------------------------------------------------------------------------


def tile(A, reps):
    """``A`` repeated ``reps`` times along each axis (reps and A's shape aligned at the end).

    Example:
        >>> fnp.tile(fnp.arange(3), (2, 2)).shape
        (2, 6)
    """
    x = _arr(A, "tile", "A")
    reps = (
        reps
        if isinstance(reps, (tuple, list))
        else np.atleast_1d(util.concrete_or_error(reps, "the reps argument of tile"))
    )
    try:
        reps = tuple(
            operator.index(util.concrete_or_error(r, "the reps argument of tile")) for r in reps
        )
    except TypeError:
        raise TypeError(
            f"tile: reps must be integers, got {reps!r:.60} (as in JAX, floats "
            "are refused: round them first)"
        ) from None
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: reps must be non-negative, got {reps}")
    nd = max(len(reps), x.ndim)
    reps = (1,) * (nd - len(reps)) + reps
    x = lax.reshape(x, (1,) * (nd - x.ndim) + tuple(x.shape)) if x.ndim < nd else x
    if all(r == 1 for r in reps):
        return x
    inter = tuple(v for r, d in zip(reps, x.shape) for v in (r, d))
    y = lax.broadcast_in_dim(x, inter, tuple(range(1, 2 * nd, 2)))
    return lax.reshape(y, tuple(r * d for r, d in zip(reps, x.shape)))


def repeat(a, repeats, axis: int | None = None, *, total_repeat_length: int | None = None):
    """Repeat each element of ``a`` along ``axis`` (flattened when None) ``repeats`` times.

    ``repeats`` is an int or a 1-D integer array with one count per element. Without
    ``total_repeat_length`` the counts must be concrete (they set the output size); with it
    they may be traced: the output is cut to that length, or padded by repeating the last
    element, as in JAX.

    Example:
        >>> fnp.repeat(fnp.array([1, 2, 3]), fnp.array([1, 0, 2]))
        Array([1, 3, 3], dtype=int32)
    """
    util.check_arraylike("repeat", a, repeats, names=["a", "repeats"])
    x = util.asarray(a, fun_name="repeat")
    if axis is None:
        x, axis = ravel(x), 0
    axis = util.canonicalize_axis(axis, x.ndim, "repeat")
    n = x.shape[axis]
    if total_repeat_length is None:
        reps = util.concrete_or_error(
            repeats,
            "the repeats argument of repeat (the output size depends on it; pass a "
            "static total_repeat_length to repeat traced counts)",
        )
    else:
        total_repeat_length = operator.index(total_repeat_length)
        if total_repeat_length < 0:
            raise ValueError(
                f"repeat: total_repeat_length must be non-negative, got {total_repeat_length}"
            )
        reps = _maybe_concrete(repeats)
        if reps is None:
            return _repeat_traced(x, repeats, axis, total_repeat_length)
    reps = np.asarray(reps)
    if dtypes.kind(reps.dtype) not in "iu":
        raise TypeError(f"repeat: repeats must be integers, got dtype {reps.dtype}")
    if reps.ndim > 1 or reps.size not in (1, n):
        raise ValueError(
            f"repeat: repeats of shape {reps.shape} do not match axis {axis} of "
            f"size {n} (give one count, or one per element)"
        )
    if (reps < 0).any():
        raise ValueError(f"repeat: repeats must be non-negative, got {reps}")
    reps = np.broadcast_to(reps.reshape(-1), (n,)).astype(np.int64)
    total = int(reps.sum())
    if n and (reps == reps[0]).all() and total_repeat_length in (None, total):
        r = int(reps[0])
        aux = tuple(x.shape[: axis + 1]) + (r,) + tuple(x.shape[axis + 1 :])
        out_shape = list(x.shape)
        out_shape[axis] *= r
        y = lax.broadcast_in_dim(x, aux, tuple(i for i in range(x.ndim + 1) if i != axis + 1))
        return lax.reshape(y, tuple(out_shape))
    idx = np.repeat(np.arange(n), reps)
    if total_repeat_length is not None and n:
        length = total_repeat_length
        idx = np.concatenate([idx, np.full(max(0, length - idx.size), n - 1)])[:length]
    return _take_static(x, idx, axis)


def _repeat_traced(x, repeats, axis: int, total: int):
    """repeat with traced counts: output element j takes input element #{i: cumsum_i <= j}
    (clipped to the last element), from a comparison of the cumulative counts with iota."""
    n = x.shape[axis]
    if n == 0:
        return x
    reps = lax.convert_element_type(util.asarray(repeats, fun_name="repeat"), dtypes.int32)
    if reps.ndim > 1 or reps.size not in (1, n):
        raise ValueError(
            f"repeat: repeats of shape {tuple(reps.shape)} do not match axis {axis} of size {n}"
        )
    reps = lax.broadcast_in_dim(lax.reshape(reps, (reps.size,)), (n,), (0,))
    ends = lax.cumsum(reps, axis=0)
    ends = lax.broadcast_in_dim(ends, (n, total), (0,))
    j = lax.broadcasted_iota(dtypes.int32, (n, total), 1)
    idx = lax.reduce_sum(lax.convert_element_type(lax.le(ends, j), dtypes.int32), (0,))
    idx = lax.min(idx, lax.full((total,), n - 1, dtypes.int32))
    return indexing.take(x, idx, axis=axis)


# -- flips and rolls ----------------------------------------------------------------------------


def flip(m, axis=None):
    """``m`` with the order of elements reversed along ``axis`` (all axes when None)."""
    x = _arr(m, "flip", "m")
    dims = util.canonicalize_axes(None if axis is None else _axis_tuple(axis), x.ndim, "flip")
    return lax.rev(x, dims) if dims else x


def fliplr(m):
    """Reverse axis 1 (``m`` must be at least 2-D)."""
    x = _arr(m, "fliplr", "m")
    if x.ndim < 2:
        raise ValueError(f"fliplr: m must be at least 2-D, got shape {tuple(x.shape)}")
    return lax.rev(x, (1,))


def flipud(m):
    """Reverse axis 0 (``m`` must be at least 1-D)."""
    x = _arr(m, "flipud", "m")
    if x.ndim < 1:
        raise ValueError("flipud: m must be at least 1-D")
    return lax.rev(x, (0,))


def roll(a, shift, axis=None):
    """Shift elements cyclically by ``shift`` along ``axis`` (the flattened array if None).

    ``shift`` and ``axis`` may be sequences (broadcast together). A traced ``shift`` is
    allowed: the roll then becomes a dynamic slice of ``a`` concatenated with itself. A float
    ``shift`` is converted to int32 (toward zero), as JAX does.

    Example:
        >>> fnp.roll(fnp.arange(5), 2)
        Array([3, 4, 0, 1, 2], dtype=int32)
    """
    x = _arr(a, "roll")
    if not isinstance(shift, (tuple, list)):
        util.check_arraylike("roll", shift, names=["shift"])
    if axis is None:
        return reshape(roll(ravel(x), shift, 0), tuple(x.shape))
    shifts = (
        _maybe_concrete(shift)
        if not isinstance(shift, (tuple, list))
        else np.asarray([util.concrete_or_error(s, "the shift argument of roll") for s in shift])
    )
    axes = np.asarray(_axis_tuple(axis))
    if shifts is None:
        return _roll_traced(x, shift, axes)
    if dtypes.kind(shifts.dtype) == "f":  # JAX converts a non-integer shift on its dynamic path
        return _roll_traced(x, shifts, axes)
    if dtypes.kind(shifts.dtype) not in "biu" or shifts.ndim > 1:
        raise TypeError(
            f"roll: shift must be an integer or a 1-D sequence of integers, got {shift!r}"
        )
    try:
        pairs = np.broadcast_arrays(shifts, axes)
    except ValueError:
        raise ValueError(f"roll: shift {shift} and axis {axis} do not broadcast") from None
    for sh, ax in zip(*(p.reshape(-1) for p in pairs)):
        ax = util.canonicalize_axis(int(ax), x.ndim, "roll")
        n = x.shape[ax]
        i = (-int(sh)) % n if n else 0
        if i:
            x = lax.concatenate([_slice_axis(x, i, n, ax), _slice_axis(x, 0, i, ax)], ax)
    return x


def _roll_traced(x, shift, axes):
    shift = util.asarray(shift, fun_name="roll")
    if dtypes.kind(shift.dtype) not in "biuf" or shift.ndim > 1:
        raise TypeError(
            f"roll: shift must be a real scalar or 1-D array, got {shift.aval.str_short()}"
        )
    shift = lax.convert_element_type(shift, dtypes.int32)
    count = max(shift.size, axes.size)
    if shift.size not in (1, count) or axes.size not in (1, count):
        raise ValueError(
            f"roll: shift of shape {tuple(shift.shape)} and axis {tuple(axes)} do not broadcast"
        )
    shift = lax.reshape(shift, (shift.size,))
    for k in range(count):
        ax = util.canonicalize_axis(int(axes[k % axes.size]), x.ndim, "roll")
        n = x.shape[ax]
        if n == 0:
            continue
        s = lax.reshape(_slice_axis(shift, k % shift.size, k % shift.size + 1, 0), ())
        s = lax.rem(lax.add(lax.rem(s, n), n), n)  # in [0, n)
        doubled = lax.concatenate([x, x], ax)
        starts = [0] * x.ndim
        starts[ax] = lax.sub(n, s)
        x = lax.dynamic_slice(doubled, starts, tuple(x.shape))
    return x


def rot90(m, k: int = 1, axes=(0, 1)):
    """Rotate ``m`` by 90 degrees ``k`` times in the plane of ``axes`` (from the first axis
    towards the second).

    Example:
        >>> fnp.rot90(fnp.array([[1, 2], [3, 4]]))
        Array([[2, 4],
               [1, 3]], dtype=int32)
    """
    x = _arr(m, "rot90", "m")
    if x.ndim < 2:
        raise ValueError(f"rot90: m must be at least 2-D, got shape {tuple(x.shape)}")
    ax = tuple(axes)
    if len(ax) != 2:
        raise ValueError(f"rot90: axes must be two axes, got {axes}")
    ax1, ax2 = (util.canonicalize_axis(a_, x.ndim, "rot90") for a_ in ax)
    if ax1 == ax2:
        raise ValueError(f"rot90: axes must be different, got {axes}")
    k = operator.index(k) % 4
    if k == 0:
        return x
    if k == 2:
        return lax.rev(x, tuple(sorted((ax1, ax2))))
    perm = list(range(x.ndim))
    perm[ax1], perm[ax2] = perm[ax2], perm[ax1]
    if k == 1:
        return lax.transpose(lax.rev(x, (ax2,)), tuple(perm))
    return lax.rev(lax.transpose(x, tuple(perm)), (ax2,))


# -- differences and editing --------------------------------------------------------------------


def diff(a, n: int = 1, axis: int = -1, prepend=None, append=None):
    """The ``n``-th discrete difference ``a[i+1] - a[i]`` along ``axis`` (``!=`` for bool).

    ``prepend``/``append`` values (scalars broadcast to one slice) are joined first.

    Example:
        >>> fnp.diff(fnp.array([1, 4, 9, 16]))
        Array([3, 5, 7], dtype=int32)
    """
    x = _arr(a, "diff")
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"diff: order n must be non-negative, got {n}")
    if n == 0:
        return x
    if x.ndim == 0:
        raise ValueError("diff: a must be at least 1-D")
    axis = util.canonicalize_axis(axis, x.ndim, "diff")
    parts = []
    for name, v in (("prepend", prepend), (None, x), ("append", append)):
        if v is None:
            continue
        if name is not None:
            v = _arr(v, "diff", name)
            if v.ndim == 0:
                shp = list(x.shape)
                shp[axis] = 1
                v = lax.broadcast_in_dim(v, tuple(shp), ())
        parts.append(v)
    if len(parts) > 1:
        x = concatenate(parts, axis)
    for _ in range(n):
        m = x.shape[axis]
        hi, lo = _slice_axis(x, min(1, m), m, axis), _slice_axis(x, 0, max(m - 1, 0), axis)
        x = lax.ne(hi, lo) if dtypes.is_bool(x.dtype) else lax.sub(hi, lo)
    return x


def ediff1d(ary, to_end=None, to_begin=None):
    """Differences of consecutive elements of the flattened ``ary``, with ``to_begin`` and
    ``to_end`` (cast to ``ary``'s dtype) joined at the ends."""
    x = ravel(_arr(ary, "ediff1d", "ary"))
    m = x.shape[0]
    out = lax.sub(_slice_axis(x, min(1, m), m, 0), _slice_axis(x, 0, max(m - 1, 0), 0))
    parts = [out]
    if to_begin is not None:
        parts.insert(
            0, ravel(lax.convert_element_type(_arr(to_begin, "ediff1d", "to_begin"), x.dtype))
        )
    if to_end is not None:
        parts.append(ravel(lax.convert_element_type(_arr(to_end, "ediff1d", "to_end"), x.dtype)))
    return parts[0] if len(parts) == 1 else concatenate(parts)


def append(arr, values, axis: int | None = None):
    """``values`` joined to the end of ``arr`` along ``axis`` (both flattened when None)."""
    util.check_arraylike("append", arr, values, names=["arr", "values"])
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], 0)
    return concatenate([arr, values], axis)


def _static_index_array(obj, fun_name: str):
    if isinstance(obj, (tuple, list)):
        obj = [util.concrete_or_error(o, f"the obj argument of {fun_name}") for o in obj]
    else:
        util.check_arraylike(fun_name, obj, names=["obj"])
        obj = util.concrete_or_error(
            obj, f"the obj argument of {fun_name} (the output size depends on it)"
        )
    return np.asarray(obj)


def delete(arr, obj, axis: int | None = None):
    """``arr`` without the entries at ``obj`` (an int, a slice, integer indices or a boolean
    mask; concrete) along ``axis`` (the flattened array when None).

    Example:
        >>> fnp.delete(fnp.arange(5), [0, 2])
        Array([1, 3, 4], dtype=int32)
    """
    x = _arr(arr, "delete", "arr")
    if axis is None:
        x, axis = ravel(x), 0
    axis = util.canonicalize_axis(axis, x.ndim, "delete")
    n = x.shape[axis]
    keep = np.ones(n, dtype=bool)
    if isinstance(obj, slice):
        keep[np.arange(n)[obj]] = False
    else:
        idx = _static_index_array(obj, "delete")
        if idx.dtype == np.bool_:
            if idx.shape != (n,):
                raise ValueError(
                    f"delete: boolean mask of shape {idx.shape} does not match "
                    f"axis {axis} of size {n}"
                )
            keep = ~idx
        elif dtypes.kind(idx.dtype) in "iu" or idx.size == 0:
            idx = idx.astype(np.int64).reshape(-1)
            bad = idx[(idx < -n) | (idx >= n)]
            if bad.size:
                raise IndexError(
                    f"delete: index {bad[0]} is out of bounds for axis {axis} with size {n}"
                )
            keep[idx] = False
        else:
            raise TypeError(f"delete: obj must be integers or booleans, got dtype {idx.dtype}")
    return _take_static(x, np.flatnonzero(keep), axis)


def insert(arr, obj, values, axis: int | None = None):
    """``arr`` with ``values`` inserted before the indices ``obj`` (an int, a slice or
    integer indices; concrete) along ``axis`` (the flattened array when None).

    ``values`` are cast to ``arr``'s dtype and broadcast as in NumPy.

    Example:
        >>> fnp.insert(fnp.arange(4), 2, 9)
        Array([0, 1, 9, 2, 3], dtype=int32)
    """
    x = _arr(arr, "insert", "arr")
    util.check_arraylike("insert", values, names=["values"])
    if axis is None:
        x, axis = ravel(x), 0
    axis = util.canonicalize_axis(axis, x.ndim, "insert")
    n = x.shape[axis]
    idx = (
        np.arange(*obj.indices(n)) if isinstance(obj, slice) else _static_index_array(obj, "insert")
    )
    if idx.ndim > 1:
        raise ValueError(
            f"insert: obj must be an int, a slice or 1-D indices, got shape {idx.shape}"
        )
    if dtypes.kind(idx.dtype) not in "iu":
        if idx.size:
            raise TypeError(f"insert: indices must be integers, got dtype {idx.dtype}")
        idx = idx.astype(np.int64)
    vals = lax.convert_element_type(util.asarray(values, fun_name="insert"), x.dtype, x.weak_type)
    if vals.ndim < x.ndim:
        vals = lax.reshape(vals, (1,) * (x.ndim - vals.ndim) + tuple(vals.shape))
    if idx.size == 1:
        if idx.ndim == 0:  # a scalar index inserts values as one slice, as in NumPy
            vals = moveaxis(vals, 0, axis)
        idx = np.full(vals.shape[axis], idx.reshape(()))
    count = util.broadcast_shapes(idx.shape, (vals.shape[axis],), fun_name="insert")[0]
    val_shape = list(x.shape)
    val_shape[axis] = count
    vals = util.broadcast_to_shape(vals, tuple(val_shape))
    idx = np.clip(np.where(idx < 0, idx + n, idx), 0, n)
    order = np.argsort(idx, kind="stable")
    val_pos = np.empty(count, np.int64)
    val_pos[order] = idx[order] + np.arange(count)
    src = np.empty(n + count, np.int64)
    is_val = np.zeros(n + count, bool)
    is_val[val_pos] = True
    src[val_pos] = n + np.arange(count)
    src[~is_val] = np.arange(n)
    return _take_static(lax.concatenate([x, vals], axis) if count else x, src, axis)


def resize(a, new_shape):
    """``a`` flattened, repeated cyclically and reshaped to ``new_shape`` (zeros when ``a``
    is empty)."""
    x = ravel(_arr(a, "resize"))
    new_shape = util.canonicalize_shape(new_shape, "resize")
    total = math.prod(new_shape)
    if x.size == 0 or total == 0:
        return creation.zeros_like(x, shape=new_shape)
    x = tile(x, -(-total // x.size))
    return lax.reshape(_slice_axis(x, 0, total, 0), new_shape)


def trim_zeros(filt, trim: str = "fb", axis=None):
    """``filt`` with leading (``"f"``) and/or trailing (``"b"``) all-zero slices removed
    along ``axis`` (all axes when None). The values must be concrete.

    Example:
        >>> fnp.trim_zeros(fnp.array([0, 1, 0, 2, 0]))
        Array([1, 0, 2], dtype=int32)
    """
    x = _arr(filt, "trim_zeros", "filt")
    val = util.concrete_or_error(
        x, "the filt argument of trim_zeros (the output size depends on its values)"
    )
    trim = trim.lower()
    axes = util.canonicalize_axes(None if axis is None else _axis_tuple(axis), x.ndim, "trim_zeros")
    for ax in axes:
        mask = np.asarray(val != 0).any(axis=tuple(i for i in range(x.ndim) if i != ax))
        nz = np.flatnonzero(mask)
        if nz.size == 0:
            start = stop = 0
        else:
            start = int(nz[0]) if "f" in trim else 0
            stop = int(nz[-1]) + 1 if "b" in trim else x.shape[ax]
        x = _slice_axis(x, start, stop, ax)
    return x
