"""Splitting, stacking and tiling arrays, with JAX's lax names: ``split``, ``stack``,
``unstack``, ``tile``, and the shape arithmetic ``broadcast_shapes``.

All are compositions of slices, ``broadcast_in_dim``, ``concatenate`` and ``reshape``, so they
differentiate, batch and compile like those primitives.
"""

from __future__ import annotations

import operator

from fungrad import core
from fungrad.lax.shape import broadcast_in_dim, reshape
from fungrad.lax.slicing import concatenate, index_in_dim, slice_in_dim
from fungrad.lax.utils import operand

__all__ = ["broadcast_shapes", "split", "stack", "tile", "unstack"]


def _axis(name: str, axis, ndim: int) -> int:
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(f"{name}: axis must be an integer, got {axis!r}") from None
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name}: axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim


def _int_tuple(name: str, what: str, values) -> tuple[int, ...]:
    """``values`` as a tuple of Python ints; anything else a TypeError naming ``name``."""
    try:
        if isinstance(values, str):
            raise TypeError
        return tuple(operator.index(d) for d in values)
    except TypeError:
        raise TypeError(
            f"{name}: {what} must be a sequence of integers, got {values!r:.60}"
        ) from None


def broadcast_shapes(*shapes) -> tuple[int, ...]:
    """The shape numpy broadcasting gives arrays of ``shapes`` (``jax.lax.broadcast_shapes``).

    Raises ValueError for incompatible shapes, e.g. ``(2, 3)`` and ``(4, 3)``.
    """
    if not shapes:
        raise ValueError("broadcast_shapes: needs at least one shape")
    shapes = [_int_tuple("broadcast_shapes", "each shape", s) for s in shapes]
    if any(d < 0 for s in shapes for d in s):  # a TypeError, as JAX's shape check raises
        raise TypeError(
            f"broadcast_shapes: shapes must be non-negative, got {[tuple(s) for s in shapes]}"
        )
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        sizes = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0} - {1}
        if len(sizes) > 1:
            raise ValueError(
                f"broadcast_shapes: incompatible shapes for broadcasting: "
                f"shapes={[tuple(s) for s in shapes]}"
            )
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def split(operand_, sizes, axis: int = 0) -> list:
    """``operand_`` cut along ``axis`` into consecutive pieces of ``sizes``
    (``jax.lax.split``); the sizes must add up to the axis length.

    Example: ``split(fnp.arange(10), (3, 7))`` gives arrays of 3 and 7 elements.
    """
    x = operand(operand_, "split")
    shape = core.get_aval(x).shape
    axis = _axis("split", axis, len(shape))
    sizes = list(_int_tuple("split", "sizes", sizes))
    if any(s < 0 for s in sizes) or sum(sizes) != shape[axis]:
        raise ValueError(
            f"split: sizes {tuple(sizes)} must be non-negative and add up to the "
            f"length {shape[axis]} of axis {axis} (operand shape {shape})"
        )
    out, start = [], 0
    for s in sizes:
        out.append(slice_in_dim(x, start, start + s, axis=axis))
        start += s
    return out


def stack(operands, axis: int = 0):
    """Arrays of one shape stacked along a new axis ``axis`` (``jax.lax.stack``)."""
    xs = [operand(x, "stack") for x in operands]
    if not xs:
        raise ValueError("stack: needs at least one array")
    shapes = {tuple(core.get_aval(x).shape) for x in xs}
    if len(shapes) > 1:  # a ValueError, as JAX's
        raise ValueError(f"stack: all arrays must have the same shape, got {sorted(shapes)}")
    dts = sorted({str(x.dtype) for x in xs})
    if len(dts) > 1:
        raise TypeError(
            f"stack: all arrays must have the same dtype, got {', '.join(dts)} "
            "(convert them with lax.convert_element_type)"
        )
    shape = shapes.pop()
    axis = _axis("stack", axis, len(shape) + 1)
    new_shape = (*shape[:axis], 1, *shape[axis:])
    dims = tuple(d if d < axis else d + 1 for d in range(len(shape)))
    return concatenate([broadcast_in_dim(x, new_shape, dims) for x in xs], axis)


def unstack(x, axis: int = 0) -> tuple:
    """The slices of ``x`` along ``axis``, that axis removed (``jax.lax.unstack``)."""
    x = operand(x, "unstack")
    shape = core.get_aval(x).shape
    axis = _axis("unstack", axis, len(shape))
    return tuple(index_in_dim(x, i, axis, keepdims=False) for i in range(shape[axis]))


def tile(operand_, reps):
    """``operand_`` repeated ``reps[d]`` times along each dimension ``d`` (``jax.lax.tile``;
    ``len(reps)`` must equal the rank, unlike ``numpy.tile``)."""
    x = operand(operand_, "tile")
    shape = tuple(core.get_aval(x).shape)
    reps = _int_tuple("tile", "reps", reps)
    if len(reps) != len(shape):
        raise TypeError(
            f"tile: reps length must be equal to the ndim of x, got "
            f"len(reps)={len(reps)} and x.ndim={len(shape)}"
        )
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: reps must be non-negative, got {reps}")
    # (r0, d0, r1, d1, ...) with x broadcast along the r axes, then merged pairwise
    wide = tuple(v for r, d in zip(reps, shape) for v in (r, d))
    tiled = broadcast_in_dim(x, wide, tuple(range(1, 2 * len(shape), 2)))
    return reshape(tiled, tuple(r * d for r, d in zip(reps, shape)))
