"""``fungrad.ops``: segment reductions with jax.ops' names (graph networks, ragged batches).

``segment_sum(data, segment_ids, num_segments)`` reduces the rows of ``data`` that share a
segment id: ``out[s] = sum(data[i] for i with segment_ids[i] == s)``. Each is a scatter
(``x.at[segment_ids].add/mul/min/max``) into an array of ``num_segments`` rows filled with
the reduction's identity, so empty segments hold 0, 1, ``+inf``/``-inf`` (the integer
extremes for integer data) as in JAX, and ids outside ``[0, num_segments)`` (negative ones
included: they do not wrap) are dropped.
``num_segments`` must be static; it defaults to ``max(segment_ids) + 1``, which needs
concrete ids (not under ``jit``).
"""

from __future__ import annotations

import operator

import numpy as np

from fungrad import core, dtypes
from fungrad.numpy import util

__all__ = ["segment_max", "segment_min", "segment_prod", "segment_sum"]


def _num_segments(fun_name: str, segment_ids, num_segments):
    if num_segments is not None:
        try:
            n = operator.index(num_segments)
        except TypeError:
            raise TypeError(
                f"{fun_name}: num_segments must be a Python int, got {num_segments!r}"
            ) from None
        if n < 0:
            raise ValueError(f"{fun_name}: num_segments must be non-negative, got {n}")
        return n
    ids = segment_ids
    if isinstance(ids, core.Tracer):
        ids = ids.to_concrete_value()
        if ids is None:
            raise core.ConcretizationTypeError(
                f"{fun_name}: num_segments=None needs concrete segment_ids to find the number "
                f"of segments; pass num_segments= (a static int) under jit/vmap"
            )
    ids = np.asarray(ids)
    return int(ids.max()) + 1 if ids.size else 0


def _segment(
    fun_name,
    method,
    identity,
    data,
    segment_ids,
    num_segments,
    indices_are_sorted,
    unique_indices,
    bucket_size,
    mode,
):
    del bucket_size  # a performance hint in JAX
    util.check_arraylike(fun_name, data, segment_ids)
    data = util.asarray(data, fun_name=fun_name)
    segment_ids = util.asarray(segment_ids, fun_name=fun_name)
    if not dtypes.is_int(segment_ids.dtype):
        raise TypeError(f"{fun_name}: segment_ids must be integers, got {segment_ids.dtype}")
    if segment_ids.ndim != 1 or data.ndim < 1 or data.shape[0] != segment_ids.shape[0]:
        raise ValueError(
            f"{fun_name}: segment_ids must be 1-D with one id per row of data; "
            f"got data {data.shape} and segment_ids {segment_ids.shape}"
        )
    n = _num_segments(fun_name, segment_ids, num_segments)
    from fungrad import numpy as fnp

    dt = data.dtype
    if identity == "low":
        fill = (
            -np.inf
            if np.issubdtype(dt, np.floating)
            else (False if dt == np.bool_ else np.iinfo(dt).min)
        )
    elif identity == "high":
        fill = (
            np.inf
            if np.issubdtype(dt, np.floating)
            else (True if dt == np.bool_ else np.iinfo(dt).max)
        )
    else:
        fill = identity
    out = fnp.full((n,) + data.shape[1:], fill, dt)
    ref = out.at[segment_ids]
    return getattr(ref, method)(
        data,
        indices_are_sorted=indices_are_sorted,
        unique_indices=unique_indices,
        mode="drop" if mode is None else mode,
        wrap_negative_indices=False,
    )


def segment_sum(
    data,
    segment_ids,
    num_segments=None,
    indices_are_sorted=False,
    unique_indices=False,
    bucket_size=None,
    mode=None,
):
    """Sums of the rows of ``data`` per segment id (0 for an empty segment)."""
    return _segment(
        "segment_sum",
        "add",
        0,
        data,
        segment_ids,
        num_segments,
        indices_are_sorted,
        unique_indices,
        bucket_size,
        mode,
    )


def segment_prod(
    data,
    segment_ids,
    num_segments=None,
    indices_are_sorted=False,
    unique_indices=False,
    bucket_size=None,
    mode=None,
):
    """Products of the rows of ``data`` per segment id (1 for an empty segment)."""
    return _segment(
        "segment_prod",
        "multiply",
        1,
        data,
        segment_ids,
        num_segments,
        indices_are_sorted,
        unique_indices,
        bucket_size,
        mode,
    )


def segment_max(
    data,
    segment_ids,
    num_segments=None,
    indices_are_sorted=False,
    unique_indices=False,
    bucket_size=None,
    mode=None,
):
    """Maxima of the rows of ``data`` per segment id (``-inf`` or the dtype's minimum for an
    empty segment)."""
    return _segment(
        "segment_max",
        "max",
        "low",
        data,
        segment_ids,
        num_segments,
        indices_are_sorted,
        unique_indices,
        bucket_size,
        mode,
    )


def segment_min(
    data,
    segment_ids,
    num_segments=None,
    indices_are_sorted=False,
    unique_indices=False,
    bucket_size=None,
    mode=None,
):
    """Minima of the rows of ``data`` per segment id (``+inf`` or the dtype's maximum for an
    empty segment)."""
    return _segment(
        "segment_min",
        "min",
        "high",
        data,
        segment_ids,
        num_segments,
        indices_are_sorted,
        unique_indices,
        bucket_size,
        mode,
    )
