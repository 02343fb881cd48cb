"""``fungrad.scipy.ndimage``: :func:`map_coordinates`, interpolating an N-d array at arbitrary
(fractional) coordinates, with jax.scipy.ndimage's name and semantics.

Why it is here: resampling, warping and bilinear lookups are common in differentiable
programs, and JAX programs call ``jax.scipy.ndimage.map_coordinates``. It is written on
``fungrad.numpy``, so it traces, differentiates (with respect to the input and the
coordinates), batches and compiles like any other function.

What it does, as JAX 0.10 does (which is not always what SciPy does):

* ``order`` 0 (nearest neighbour: coordinates round half away from zero) or 1 (linear). Other
  orders raise ``NotImplementedError``.
* ``mode`` says how an index outside ``[0, size)`` maps back into the axis: ``'constant'``
  (the sample is ``cval``; SciPy's ``'grid-constant'``), ``'nearest'`` (the edge sample),
  ``'wrap'`` (periodic; SciPy's ``'grid-wrap'``), ``'mirror'`` (``d c b | a b c d | c b a``)
  and ``'reflect'`` (``d c b a | a b c d | d c b a``). The fix-up applies to each of the
  ``2**ndim`` corner indices of a point, not to the coordinate, so ``'constant'`` blends the
  edge sample with ``cval`` within one sample of the border.
* The output has the broadcast shape of the coordinates and the input's dtype; integer inputs
  are interpolated in the weights' dtype and rounded half away from zero.
* Indices are int32, as in JAX: coordinates beyond +-2**31 saturate, and a NaN coordinate
  gives NaN at order 1 and the sample at index 0 at order 0.

``cval`` may be any scalar (JAX requires a hashable one, since it is a static argument there).
"""

from __future__ import annotations

import functools
import itertools
import operator

import numpy as np

import fungrad.numpy as fnp
from fungrad import lax

__all__ = ["map_coordinates"]

_NAME = "fungrad.scipy.ndimage.map_coordinates"


def _nearest_index(index, size):
    return fnp.clip(index, 0, size - 1)


def _wrap_index(index, size):
    return index % size


def _mirror_index(index, size):
    """Reflection about the edge samples: period ``2 * (size - 1)``."""
    if size == 1:
        return fnp.zeros_like(index)
    period = 2 * (size - 1)
    offset = index % period
    return fnp.minimum(offset, period - offset)


def _reflect_index(index, size):
    """Reflection about the edges of the edge samples (each edge sample repeats): period
    ``2 * size``."""
    period = 2 * size
    offset = index % period
    return fnp.minimum(offset, period - 1 - offset)


# 'constant' clamps too: an index outside the axis reads a valid sample that is then replaced
# by cval (see _is_inside).
_INDEX_FIXERS = {
    "constant": _nearest_index,
    "nearest": _nearest_index,
    "wrap": _wrap_index,
    "mirror": _mirror_index,
    "reflect": _reflect_index,
}


def _is_inside(index, size):
    return (index >= 0) & (index < size)


def _round_half_away_from_zero(x):
    return x if fnp.issubdtype(x.dtype, fnp.integer) else lax.round(x)


def _nearest_nodes(coordinate):
    """order 0: ``[(index, weight)]``, the one node nearest the coordinate."""
    index = _round_half_away_from_zero(coordinate).astype(np.int32)
    return [(index, fnp.ones((), coordinate.dtype))]


def _linear_nodes(coordinate):
    """order 1: ``[(index, weight)]`` for the nodes below and above the coordinate."""
    lower = fnp.floor(coordinate)
    upper_weight = coordinate - lower
    index = lower.astype(np.int32)
    return [(index, 1 - upper_weight), (index + 1, upper_weight)]


_INTERPOLATION_NODES = {0: _nearest_nodes, 1: _linear_nodes}


def _check(input, coordinates, order, mode):
    try:
        n_coordinates = len(coordinates)
    except TypeError:
        raise TypeError(
            f"{_NAME}: coordinates must be a sequence of input.ndim={input.ndim} arrays, one "
            f"per axis of the input (shape {input.shape}), got {type(coordinates).__name__}; "
            "pass e.g. [rows, cols] for a 2-d input"
        ) from None
    if n_coordinates != input.ndim:
        raise ValueError(
            f"{_NAME}: coordinates must be a sequence of input.ndim={input.ndim} arrays, one "
            f"per axis of the input (shape {input.shape}), got {n_coordinates}; pass one "
            "coordinate array per axis (for points as rows of an (n, ndim) array p, pass p.T)"
        )
    if mode not in _INDEX_FIXERS:
        hint = (
            f" (SciPy's {mode!r} is JAX's {mode[5:]!r})"
            if mode in ("grid-wrap", "grid-constant")
            else ""
        )
        raise NotImplementedError(
            f"{_NAME}: mode {mode!r} is not supported{hint}; supported modes are "
            f"{', '.join(map(repr, _INDEX_FIXERS))}"
        )
    if order not in _INTERPOLATION_NODES:
        raise NotImplementedError(
            f"{_NAME}: order={order!r} is not supported; supported orders are 0 (nearest "
            "neighbour) and 1 (linear)"
        )
    if input.ndim == 0 or input.size == 0:
        raise TypeError(
            f"{_NAME}: input must have at least one axis and no zero-size axis (there must be "
            f"a sample to interpolate), got shape {input.shape}"
        )


def map_coordinates(input, coordinates, order, mode="constant", cval=0.0):
    """Interpolate ``input`` at ``coordinates`` (JAX's ``jax.scipy.ndimage.map_coordinates``).

    Args:
      input: N-d array of samples.
      coordinates: a sequence of N arrays (one per axis of ``input``, broadcast together):
        point ``p`` is at ``(coordinates[0][p], ..., coordinates[N-1][p])``.
      order: 0 (nearest neighbour, rounding half away from zero) or 1 (linear).
      mode: ``'constant'``, ``'nearest'``, ``'wrap'``, ``'mirror'`` or ``'reflect'``: how
        indices outside the input map into it (module docstring). JAX's ``'constant'`` and
        ``'wrap'`` are SciPy's ``'grid-constant'`` and ``'grid-wrap'``.
      cval: the value of samples outside the input in ``'constant'`` mode, cast to the
        input's dtype.

    Returns:
      An array of the coordinates' broadcast shape and the input's dtype.

    >>> import fungrad.numpy as fnp
    >>> x = fnp.arange(12.0).reshape(3, 4)
    >>> map_coordinates(x, [fnp.array([0.5, 1.5]), fnp.array([1.5, 2.5])], order=1)
    Array([3.5, 8.5], dtype=float32)
    """
    input = fnp.asarray(input)
    _check(input, coordinates, order, mode)
    coordinates = [fnp.asarray(c) for c in coordinates]
    for c in coordinates:
        if not (fnp.issubdtype(c.dtype, fnp.integer) or fnp.issubdtype(c.dtype, fnp.floating)):
            raise TypeError(
                f"{_NAME}: coordinates must be integer or real floating arrays, got dtype "
                f"{c.dtype}; cast them with .astype(float)"
            )
    try:
        np.broadcast_shapes(*(c.shape for c in coordinates))
    except ValueError:
        raise TypeError(
            f"{_NAME}: the coordinate arrays must broadcast together, got shapes "
            f"{[c.shape for c in coordinates]}"
        ) from None
    cval = fnp.asarray(cval, dtype=input.dtype)
    fix_index = _INDEX_FIXERS[mode]
    nodes = _INTERPOLATION_NODES[order]

    # Per axis, the (fixed index, raw index inside the axis?, weight) of each node; a point's
    # value is the weighted sum over every choice of one node per axis (its cell's corners).
    axes = [
        [
            (fix_index(index, size), _is_inside(index, size) if mode == "constant" else None, w)
            for index, w in nodes(c)
        ]
        for c, size in zip(coordinates, input.shape)
    ]
    terms = []
    for corner in itertools.product(*axes):
        indices, inside, weights = zip(*corner)
        sample = input[indices]
        if mode == "constant":
            sample = fnp.where(functools.reduce(operator.and_, inside), sample, cval)
        terms.append(functools.reduce(operator.mul, weights) * sample)
    result = functools.reduce(operator.add, terms)
    if fnp.issubdtype(input.dtype, fnp.integer):
        result = _round_half_away_from_zero(result)
    return result.astype(input.dtype)
