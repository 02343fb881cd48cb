"""Slicing primitives: concatenate, pad, slice, dynamic_slice, dynamic_update_slice; and the
lax wrappers built on them (slice_in_dim, index_in_dim, dynamic_slice_in_dim,
dynamic_index_in_dim, dynamic_update_slice_in_dim, dynamic_update_index_in_dim), as in JAX's
``lax/slicing.py``.

Every primitive keeps JAX's jaxpr spelling (``pad[padding_config=((1, 0, 0),)]``,
``dynamic_slice[slice_sizes=(2,)] x i j``...). Static metadata are tuple params;
``dynamic_slice`` / ``dynamic_update_slice`` take their start indices as 0-d integer operands
after the array operands and clamp them so the slice fits (XLA's semantics). ``pad``'s padding
value is a 0-d operand.

Rules: every primitive here is linear in its array operand(s), so its jvp applies it to the
tangents and its transpose is the adjoint shape operation (slice -> pad, pad -> strided slice,
concatenate -> slices, dynamic_slice -> dynamic_update_slice into zeros...); integer start
indices are never differentiated. Batch rules shift the dimension params past the batch
dimension instead of moving data; batched start indices turn dynamic slices into
gather/scatter with batching dims.

Lowering rules (for ``jit``, at the end) are index arithmetic that fuses with producers and
consumers: every index is clamped so that each load is in bounds, and pad / dynamic_update_slice
/ concatenate select between their sources. Concatenating more than a few pieces copies each
into its part of one buffer instead (one load per element rather than one per piece).
"""

from __future__ import annotations

import numpy as np

from fungrad import core, dtypes
from fungrad.array import Array
from fungrad.core import ShapedArray
from fungrad.lax.shape import (
    _bind,
    _canonical_axis,
    _int,
    _int_tuple,
    _shape_tuple,
    broadcast_in_dim,
    expand_dims,
    full,
    reshape,
    squeeze,
)
from fungrad.lax.utils import operand, operands_same_dtype, standard_primitive
from fungrad.lowering import kernel
from fungrad.lowering.fusion import Store
from fungrad.transforms.jvp import (
    Zero,
    defjvp,
    deflinear,
    instantiate_zeros,
    jvp_rules,
    tangent_aval,
)
from fungrad.transforms.transpose import deflinear_transpose, is_undefined_primal
from fungrad.transforms.vmap import batch_rules, bdim_at_front, moveaxis

__all__ = [
    "concatenate",
    "pad",
    "slice",
    "dynamic_slice",
    "dynamic_update_slice",
    "slice_in_dim",
    "index_in_dim",
    "dynamic_slice_in_dim",
    "dynamic_index_in_dim",
    "dynamic_update_slice_in_dim",
    "dynamic_update_index_in_dim",
    "concatenate_p",
    "pad_p",
    "slice_p",
    "dynamic_slice_p",
    "dynamic_update_slice_p",
]

_builtin_slice = slice


# -- concatenate and pad ---------------------------------------------------------------------


def _concatenate_impl(*xs, dimension):
    return np.concatenate(xs, axis=dimension)


def _concatenate_abstract_eval(*xs, dimension):
    if not xs:
        raise TypeError("concatenate: needs at least one operand")
    shapes = ", ".join(str(x.shape) for x in xs)
    if len({x.dtype for x in xs}) != 1:
        raise TypeError(
            "concatenate requires arguments to have the same dtypes, got "
            + ", ".join(x.dtype.name for x in xs)
            + " (fungrad.numpy.concatenate promotes dtypes)"
        )
    ndim = xs[0].ndim
    if ndim == 0 or any(x.ndim != ndim for x in xs):
        raise TypeError(f"concatenate: operands must have the same rank >= 1, got shapes {shapes}")
    if not 0 <= dimension < ndim:
        raise TypeError(f"concatenate: dimension {dimension} is out of range for shapes {shapes}")
    for x in xs:
        if any(a != b for i, (a, b) in enumerate(zip(x.shape, xs[0].shape)) if i != dimension):
            raise TypeError(
                f"concatenate: cannot concatenate arrays with shapes that differ in "
                f"dimensions other than dimension {dimension}: shapes {shapes}"
            )
    shape = list(xs[0].shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return ShapedArray(shape, xs[0].dtype, all(x.weak_type for x in xs))


concatenate_p = standard_primitive("concatenate", _concatenate_impl, _concatenate_abstract_eval)


def concatenate(operands, dimension):
    """Join arrays of one dtype along ``dimension`` (their other dimensions must agree)."""
    if isinstance(operands, (Array, core.Tracer, np.ndarray)) or not hasattr(operands, "__len__"):
        raise TypeError(
            f"concatenate: operands must be a sequence of arrays, got {type(operands).__name__}"
        )
    xs = [operand(x, "concatenate") for x in operands]
    if not xs:
        raise ValueError("concatenate: needs a non-empty sequence of arrays")
    if len(xs) == 1:
        return xs[0]
    dimension = _canonical_axis(dimension, max(xs[0].ndim, 1), "concatenate")
    return _bind(concatenate_p, *xs, dimension=dimension)


def _concatenate_transpose(ct, *xs, dimension):
    cts, start = [], 0
    for x in xs:
        n = (x.aval if is_undefined_primal(x) else core.get_aval(x)).shape[dimension]
        cts.append(
            slice_in_dim(ct, start, start + n, axis=dimension) if is_undefined_primal(x) else None
        )
        start += n
    return cts


def _move_bdim(x, d, target: int, axis_size: int):
    """``x`` with its batch dim at ``target`` (unbatched values are broadcast along it)."""
    if d is not None:
        return moveaxis(x, d, target)
    shape = core.get_aval(x).shape
    return broadcast_in_dim(
        x,
        shape[:target] + (axis_size,) + shape[target:],
        tuple(i + (i >= target) for i in range(len(shape))),
    )


def _concatenate_batch(axis_size, args, dims, *, dimension):
    # All operands take the first batched operand's batch dim (unbatched ones are broadcast).
    target = next(d for d in dims if d is not None)
    xs = [_move_bdim(x, d, target, axis_size) for x, d in zip(args, dims)]
    return concatenate_p.bind(*xs, dimension=dimension + (dimension >= target)), target


deflinear(concatenate_p)
deflinear_transpose(concatenate_p, _concatenate_transpose)
batch_rules[concatenate_p] = _concatenate_batch


def _pad_impl(x, padding_value, *, padding_config):
    x = np.asarray(x)
    # Place x (with interior gaps) into a buffer padded by the non-negative lo/hi, then crop
    # the negative lo/hi off its ends.
    full_shape, places, crops = [], [], []
    for n, (lo, hi, interior) in zip(x.shape, padding_config):
        inner = n + max(n - 1, 0) * interior
        full_shape.append(max(lo, 0) + inner + max(hi, 0))
        places.append(_builtin_slice(max(lo, 0), max(lo, 0) + inner, interior + 1))
        crops.append(_builtin_slice(max(-lo, 0), full_shape[-1] - max(-hi, 0)))
    out = np.full(full_shape, padding_value, dtype=x.dtype)
    out[tuple(places)] = x
    return out[tuple(crops)]


def _pad_abstract_eval(x, padding_value, *, padding_config):
    if x.dtype != padding_value.dtype:
        raise TypeError(
            f"pad: operand and padding_value must have the same dtype, got "
            f"{x.dtype.name} and {padding_value.dtype.name}"
        )
    if padding_value.shape:
        raise TypeError(
            f"pad: padding_value must be a scalar (0-d), got shape {padding_value.shape}"
        )
    if len(padding_config) != x.ndim or any(len(c) != 3 for c in padding_config):
        raise TypeError(
            f"pad: padding_config {padding_config} must have one (lo, hi, interior) "
            f"triple per dimension of the operand shape {x.shape}"
        )
    if any(c[2] < 0 for c in padding_config):
        raise ValueError(
            f"pad: interior padding must be non-negative, got padding_config {padding_config}"
        )
    shape = tuple(
        lo + hi + n + max(n - 1, 0) * interior
        for n, (lo, hi, interior) in zip(x.shape, padding_config)
    )
    if any(d < 0 for d in shape):
        raise ValueError(
            f"pad: dimension size after padding is negative: result shape {shape} "
            f"for padding_config {padding_config} and operand shape {x.shape}"
        )
    return ShapedArray(shape, x.dtype, x.weak_type and padding_value.weak_type)


pad_p = standard_primitive("pad", _pad_impl, _pad_abstract_eval)


def pad(operand_, padding_value, padding_config):
    """Pad each dimension with ``(lo, hi, interior)`` copies of ``padding_value``.

    Negative ``lo``/``hi`` remove elements from that end; ``interior`` inserts that many
    values between neighbours. Example: ``pad([1, 2], 0, ((1, 0, 1),))`` is ``[0, 1, 0, 2]``.
    """
    x, v = operands_same_dtype("pad", operand_, padding_value)
    config = tuple(_int_tuple(c, "pad", "padding_config") for c in padding_config)
    return _bind(pad_p, x, v, padding_config=config)


def _pad_transpose(ct, x, padding_value, *, padding_config):
    # The operand's cotangent undoes the padding: pad by the negated lo/hi (cropping what was
    # added, restoring what negative padding cropped), then drop the interior with a stride.
    from fungrad.lax.elementwise import sub
    from fungrad.lax.reduce import reduce_sum

    unpadded = ct
    if any(lo or hi for lo, hi, _ in padding_config):
        unpadded = pad(ct, 0, tuple((-lo, -hi, 0) for lo, hi, _ in padding_config))
    ct_x = slice(
        unpadded,
        (0,) * ct.ndim,
        unpadded.shape,
        tuple(interior + 1 for _, _, interior in padding_config),
    )
    ct_v = None
    if is_undefined_primal(padding_value):
        # Every output element not taken from the operand is a copy of the padding value.
        everything = tuple(range(ct.ndim))
        ct_v = sub(reduce_sum(ct, everything), reduce_sum(ct_x, everything))
    return [ct_x if is_undefined_primal(x) else None, ct_v]


def _pad_batch(axis_size, args, dims, *, padding_config):
    (x, v), (xd, vd) = args, dims
    if xd is None:
        x, xd = bdim_at_front(x, None, axis_size), 0
    config = padding_config[:xd] + ((0, 0, 0),) + padding_config[xd:]
    if vd is None:
        return pad_p.bind(x, v, padding_config=config), xd
    # A padding value per example: pad with zeros, then select it where the mask says padding.
    from fungrad.lax import elementwise

    padded = pad(x, 0, config)
    shape = padded.shape
    is_operand = pad(full(x.shape, True, np.bool_), False, config)
    values = broadcast_in_dim(v, shape, (xd,))
    return elementwise.select_n(is_operand, values, padded), xd


deflinear(pad_p)
deflinear_transpose(pad_p, _pad_transpose)
batch_rules[pad_p] = _pad_batch


# -- static slices ---------------------------------------------------------------------------


def _slice_impl(x, *, start_indices, limit_indices, strides):
    strides = strides or (1,) * len(start_indices)
    return np.asarray(x)[tuple(map(_builtin_slice, start_indices, limit_indices, strides))]


def _slice_abstract_eval(x, *, start_indices, limit_indices, strides):
    strides_ = strides or (1,) * x.ndim
    if not len(start_indices) == len(limit_indices) == len(strides_) == x.ndim:
        raise TypeError(
            f"slice: start_indices {start_indices}, limit_indices {limit_indices} "
            f"and strides {strides} must each have one entry per dimension of the "
            f"operand shape {x.shape}"
        )
    for s, lim, n in zip(start_indices, limit_indices, x.shape):
        if not 0 <= s <= lim <= n:
            raise TypeError(
                f"slice: start_indices {start_indices} and limit_indices "
                f"{limit_indices} must satisfy 0 <= start <= limit <= size for the "
                f"operand shape {x.shape}"
            )
    if any(st <= 0 for st in strides_):
        raise TypeError(f"slice: strides must be positive, got {strides}")
    shape = tuple(-(-(lim - s) // st) for s, lim, st in zip(start_indices, limit_indices, strides_))
    return ShapedArray(shape, x.dtype, x.weak_type)


slice_p = standard_primitive("slice", _slice_impl, _slice_abstract_eval)


def slice(operand_, start_indices, limit_indices, strides=None):  # noqa: A001 (lax's name)
    """``operand_[start:limit:stride]`` in every dimension, with static in-range bounds."""
    x = operand(operand_, "slice")
    start = _int_tuple(start_indices, "slice", "start_indices")
    limit = _int_tuple(limit_indices, "slice", "limit_indices")
    strides = None if strides is None else _int_tuple(strides, "slice", "strides")
    if strides is not None and all(s == 1 for s in strides):
        strides = None
    if (
        strides is None
        and all(s == 0 for s in start)
        and limit == tuple(x.shape)
        and len(start) == x.ndim
    ):
        return x
    return _bind(slice_p, x, start_indices=start, limit_indices=limit, strides=strides)


def _slice_transpose(ct, x, *, start_indices, limit_indices, strides):
    # Zero-pad the cotangent back to the operand's shape; strides become interior padding.
    in_shape = x.aval.shape
    strides_ = strides or (1,) * len(in_shape)
    # the last index read is start + (size - 1) * stride
    real_limits = [
        s + (0 if k == 0 else 1 + (k - 1) * st)
        for s, k, st in zip(start_indices, ct.shape, strides_)
    ]
    config = tuple(
        (s, n - lim, st - 1)
        for s, n, lim, st in zip(start_indices, in_shape, real_limits, strides_)
    )
    return [pad(ct, 0, config)]


def _slice_batch(axis_size, args, dims, *, start_indices, limit_indices, strides):
    (x,), (d,) = args, dims
    start = start_indices[:d] + (0,) + start_indices[d:]
    limit = limit_indices[:d] + (axis_size,) + limit_indices[d:]
    strides = None if strides is None else strides[:d] + (1,) + strides[d:]
    return slice_p.bind(x, start_indices=start, limit_indices=limit, strides=strides), d


deflinear(slice_p)
deflinear_transpose(slice_p, _slice_transpose)
batch_rules[slice_p] = _slice_batch


def slice_in_dim(operand_, start_index, limit_index, stride=1, axis=0):
    """``operand_[..., start_index:limit_index:stride]`` along ``axis`` (negative indices
    count from the end; None means the start/end)."""
    x = operand(operand_, "slice_in_dim")
    axis = _canonical_axis(axis, x.ndim, "slice_in_dim", "axis")
    n = x.shape[axis]
    start = 0 if start_index is None else _int(start_index, "slice_in_dim", "indices")
    limit = n if limit_index is None else _int(limit_index, "slice_in_dim", "indices")
    start = start + n if start < 0 else start
    limit = limit + n if limit < 0 else limit
    starts, limits, strides = [0] * x.ndim, list(x.shape), [1] * x.ndim
    starts[axis], limits[axis], strides[axis] = start, limit, _int(stride, "slice_in_dim", "stride")
    return slice(x, starts, limits, strides)


def index_in_dim(operand_, index, axis=0, keepdims=True):
    """``operand_[..., index]`` along ``axis`` with a static index (IndexError if out of
    bounds); ``keepdims`` keeps the indexed dimension with size 1."""
    x = operand(operand_, "index_in_dim")
    axis = _canonical_axis(axis, x.ndim, "index_in_dim", "axis")
    index = _int(index, "index_in_dim", "index")
    n = x.shape[axis]
    wrapped = index + n if index < 0 else index
    if not 0 <= wrapped < n:
        raise IndexError(
            f"index_in_dim: index {index} is out of bounds for axis {axis} with size {n}"
        )
    out = slice_in_dim(x, wrapped, wrapped + 1, 1, axis)
    return out if keepdims else squeeze(out, (axis,))


# -- dynamic slices --------------------------------------------------------------------------


def _clamped_starts(starts, operand_shape, sizes):
    """XLA's rule: each start index is clamped to ``[0, dim - size]`` so the slice fits."""
    return [min(max(int(s), 0), n - k) for s, n, k in zip(starts, operand_shape, sizes)]


def _dynamic_slice_impl(x, *starts, slice_sizes):
    x = np.asarray(x)
    lo = _clamped_starts(starts, x.shape, slice_sizes)
    return x[tuple(_builtin_slice(s, s + k) for s, k in zip(lo, slice_sizes))].copy()


def _check_start_indices(name: str, x: ShapedArray, starts) -> None:
    if len(starts) != x.ndim:
        raise TypeError(
            f"{name}: got {len(starts)} start indices for an operand of shape "
            f"{x.shape}; pass one per dimension"
        )
    for s in starts:
        if s.shape or dtypes.kind(s.dtype) not in "iu":
            raise TypeError(
                f"{name}: start indices must be 0-d integer arrays, got "
                + ", ".join(a.str_short() for a in starts)
            )


def _dynamic_slice_abstract_eval(x, *starts, slice_sizes):
    _check_start_indices("dynamic_slice", x, starts)
    if len(slice_sizes) != x.ndim or any(not 0 <= k <= n for k, n in zip(slice_sizes, x.shape)):
        raise TypeError(
            f"dynamic_slice: slice_sizes {slice_sizes} must be between 0 and the "
            f"operand shape {x.shape} in every dimension"
        )
    return ShapedArray(slice_sizes, x.dtype, x.weak_type)


dynamic_slice_p = standard_primitive(
    "dynamic_slice", _dynamic_slice_impl, _dynamic_slice_abstract_eval
)


def _dynamic_slice_indices(name: str, x, start_indices, allow_negative_indices):
    """Start indices as 0-d integer operands, negative ones wrapped as Python does (JAX's
    ``_dynamic_slice_indices``): statically for Python ints, with ``select_n`` otherwise."""
    from fungrad.lax import elementwise

    if isinstance(start_indices, (Array, core.Tracer, np.ndarray)):
        if start_indices.ndim != 1:
            raise ValueError(
                f"{name}: start_indices must be a 1-D sequence, got an array of "
                f"shape {start_indices.shape}"
            )
        if isinstance(start_indices, np.ndarray):
            start_indices = list(start_indices)
        else:
            start_indices = [
                reshape(slice(start_indices, (i,), (i + 1,)), ())
                for i in range(start_indices.shape[0])
            ]
    start_indices = list(start_indices)
    if len(start_indices) != x.ndim:
        raise ValueError(
            f"{name}: got {len(start_indices)} start indices for an operand of "
            f"shape {x.shape}; pass one per dimension"
        )
    if isinstance(allow_negative_indices, bool):
        allow_negative_indices = [allow_negative_indices] * x.ndim
    out = []
    for i, n, allow in zip(start_indices, x.shape, allow_negative_indices):
        if isinstance(i, np.integer):
            wrapped = i + n if (allow and i < 0) else i
            out.append(operand(np.asarray(wrapped, dtype=i.dtype)[()], name))
            continue
        if isinstance(i, int) and not isinstance(i, bool):
            out.append(operand(i + n if (allow and i < 0) else i, name))
            continue
        i = operand(i, name)
        if i.shape or dtypes.kind(i.dtype) not in "iu":
            raise TypeError(
                f"{name}: start indices must be integer scalars, got {i.aval.str_short()}"
            )
        if allow and dtypes.kind(i.dtype) == "i":
            size = Array(np.asarray(n, dtype=i.dtype)[()])
            i = elementwise.select_n(elementwise.lt(i, 0), i, elementwise.add(i, size))
        out.append(i)
    return out


def dynamic_slice(operand_, start_indices, slice_sizes, *, allow_negative_indices=True):
    """The ``slice_sizes`` block starting at ``start_indices`` (possibly traced scalars).

    Negative indices count from the end; then, as in XLA, each start is clamped to
    ``[0, dim - size]`` so the block always fits. Example:
    ``dynamic_slice(arange(5), (4,), (2,))`` is ``[3, 4]``.
    """
    x = operand(operand_, "dynamic_slice")
    sizes = _shape_tuple(slice_sizes, "dynamic_slice", "slice_sizes")
    starts = _dynamic_slice_indices("dynamic_slice", x, start_indices, allow_negative_indices)
    return _bind(dynamic_slice_p, x, *starts, slice_sizes=sizes)


def _dynamic_update_slice_impl(x, update, *starts):
    out = np.array(x, copy=True)
    lo = _clamped_starts(starts, out.shape, update.shape)
    out[tuple(_builtin_slice(s, s + k) for s, k in zip(lo, update.shape))] = update
    return out


def _dynamic_update_slice_abstract_eval(x, update, *starts):
    name = "dynamic_update_slice"
    _check_start_indices(name, x, starts)
    if update.dtype != x.dtype:
        raise TypeError(
            f"{name}: update dtype {update.dtype.name} must equal the operand dtype {x.dtype.name}"
        )
    if update.ndim != x.ndim or any(u > n for u, n in zip(update.shape, x.shape)):
        raise TypeError(
            f"{name}: update shape {update.shape} must have the operand's rank and "
            f"fit inside the operand shape {x.shape}"
        )
    return x


dynamic_update_slice_p = standard_primitive(
    "dynamic_update_slice", _dynamic_update_slice_impl, _dynamic_update_slice_abstract_eval
)


def dynamic_update_slice(operand_, update, start_indices, *, allow_negative_indices=True):
    """``operand_`` with the block at ``start_indices`` replaced by ``update``.

    Start indices are wrapped and clamped as in :func:`dynamic_slice`, so the update always
    lands entirely inside the operand.
    """
    x = operand(operand_, "dynamic_update_slice")
    u = operand(update, "dynamic_update_slice")
    starts = _dynamic_slice_indices(
        "dynamic_update_slice", x, start_indices, allow_negative_indices
    )
    return _bind(dynamic_update_slice_p, x, u, *starts)


# -- dynamic slice rules ---------------------------------------------------------------------


def _dynamic_slice_transpose(ct, x, *starts, slice_sizes):
    zeros = full(x.aval.shape, 0, x.aval.dtype)
    return [dynamic_update_slice_p.bind(zeros, ct, *starts)] + [None] * len(starts)


def _dynamic_update_slice_jvp(primals, tangents):
    x, u, *starts = primals
    out = dynamic_update_slice_p.bind(x, u, *starts)
    tx, tu = tangents[:2]  # the integer start indices have no derivative
    if type(tx) is Zero and type(tu) is Zero:
        return out, Zero(tangent_aval(core.get_aval(out)))
    return out, dynamic_update_slice_p.bind(instantiate_zeros(tx), instantiate_zeros(tu), *starts)


def _dynamic_update_slice_transpose(ct, x, u, *starts):
    u_shape = (u.aval if is_undefined_primal(u) else core.get_aval(u)).shape
    ct_x = ct_u = None
    if is_undefined_primal(x):
        ct_x = dynamic_update_slice_p.bind(ct, full(u_shape, 0, ct.dtype), *starts)
    if is_undefined_primal(u):
        ct_u = dynamic_slice_p.bind(ct, *starts, slice_sizes=u_shape)
    return [ct_x, ct_u] + [None] * len(starts)


def _zero_index(starts):
    return Array(np.zeros((), starts[0].dtype if starts else np.int32))


def _batched_start_indices(starts, dims, axis_size: int):
    """The start indices (some batched) as one ``(axis_size, len(starts))`` integer array, the
    index vectors of a gather/scatter; mixed index dtypes are converted to the default int."""
    from fungrad.lax import elementwise

    dts = {core.get_aval(i).dtype for i in starts}
    dt = dts.pop() if len(dts) == 1 else dtypes.canonicalize_dtype(np.int64)
    cols = [
        broadcast_in_dim(
            elementwise.convert_element_type(i, dt), (axis_size, 1), () if d is None else (0,)
        )
        for i, d in zip(starts, dims)
    ]
    return concatenate(cols, 1)


def _dynamic_slice_batch(axis_size, args, dims, *, slice_sizes):
    (x, *starts), (xd, *sdims) = args, dims
    if all(d is None for d in sdims):  # one slice position: slice the whole batch dim too
        starts = starts[:xd] + [_zero_index(starts)] + starts[xd:]
        sizes = slice_sizes[:xd] + (axis_size,) + slice_sizes[xd:]
        return dynamic_slice_p.bind(x, *starts, slice_sizes=sizes), xd
    # One position per example: a gather whose operand batch dim (if any) is a batching dim.
    # Its CLIP mode clamps the windows into bounds exactly as dynamic_slice does.
    from fungrad.lax import indexing

    indices = _batched_start_indices(starts, sdims, axis_size)
    n = len(starts)
    if xd is None:
        dnums = indexing.GatherDimensionNumbers(tuple(range(1, n + 1)), (), tuple(range(n)))
        sizes = slice_sizes
    else:
        dnums = indexing.GatherDimensionNumbers(
            offset_dims=tuple(range(1, n + 1)),
            collapsed_slice_dims=(),
            start_index_map=tuple(k for k in range(n + 1) if k != xd),
            operand_batching_dims=(xd,),
            start_indices_batching_dims=(0,),
        )
        sizes = slice_sizes[:xd] + (1,) + slice_sizes[xd:]
    return indexing.gather(x, indices, dnums, sizes, mode=indexing.GatherScatterMode.CLIP), 0


def _dynamic_update_slice_batch(axis_size, args, dims):
    (x, u, *starts), (xd, ud, *sdims) = args, dims
    if all(d is None for d in sdims):  # one update position: update the whole batch dim too
        target = xd if xd is not None else ud
        x = _move_bdim(x, xd, target, axis_size)
        u = _move_bdim(u, ud, target, axis_size)
        starts = starts[:target] + [_zero_index(starts)] + starts[target:]
        return dynamic_update_slice_p.bind(x, u, *starts), target
    # One position per example: a scatter whose operand batch dim is a batching dim (the
    # windows of different examples never overlap, so the indices are unique).
    from fungrad.lax import indexing

    indices = _batched_start_indices(starts, sdims, axis_size)
    n = len(starts)
    if xd is None:
        x, xd = bdim_at_front(x, None, axis_size), 0
    if ud is None:
        u, ud = bdim_at_front(u, None, axis_size), 0
    dnums = indexing.ScatterDimensionNumbers(
        update_window_dims=tuple(k for k in range(n + 1) if k != ud),
        inserted_window_dims=(),
        scatter_dims_to_operand_dims=tuple(k for k in range(n + 1) if k != xd),
        operand_batching_dims=(xd,),
        scatter_indices_batching_dims=(0,),
    )
    out = indexing.scatter(
        x, indices, u, dnums, unique_indices=True, mode=indexing.GatherScatterMode.CLIP
    )
    return out, xd


defjvp(
    dynamic_slice_p,  # linear in the operand; the integer start indices have no derivative
    lambda t, x, *starts, slice_sizes: dynamic_slice_p.bind(t, *starts, slice_sizes=slice_sizes),
)
deflinear_transpose(dynamic_slice_p, _dynamic_slice_transpose)
batch_rules[dynamic_slice_p] = _dynamic_slice_batch
jvp_rules[dynamic_update_slice_p] = _dynamic_update_slice_jvp
deflinear_transpose(dynamic_update_slice_p, _dynamic_update_slice_transpose)
batch_rules[dynamic_update_slice_p] = _dynamic_update_slice_batch


def _zero_index_like(index):
    """A 0 start index of ``index``'s integer dtype (JAX's ``_const(start_index, 0)``)."""
    dt = getattr(index, "dtype", None)
    return 0 if dt is None else np.zeros((), dtype=dt)[()]


def dynamic_slice_in_dim(operand_, start_index, slice_size, axis=0, *, allow_negative_indices=True):
    """``operand_[..., start_index:start_index + slice_size]`` along ``axis`` with a possibly
    traced start (clamped into range as in :func:`dynamic_slice`)."""
    x = operand(operand_, "dynamic_slice_in_dim")
    axis = _canonical_axis(axis, x.ndim, "dynamic_slice_in_dim", "axis")
    starts = [_zero_index_like(start_index)] * x.ndim
    starts[axis] = start_index
    sizes = list(x.shape)
    sizes[axis] = _int(slice_size, "dynamic_slice_in_dim", "slice_size")
    allow = [False] * x.ndim
    allow[axis] = allow_negative_indices
    return dynamic_slice(x, starts, sizes, allow_negative_indices=allow)


def dynamic_index_in_dim(operand_, index, axis=0, keepdims=True, *, allow_negative_indices=True):
    """``operand_[..., index]`` along ``axis`` with a possibly traced index (clamped)."""
    x = operand(operand_, "dynamic_index_in_dim")
    axis = _canonical_axis(axis, x.ndim, "dynamic_index_in_dim", "axis")
    out = dynamic_slice_in_dim(x, index, 1, axis, allow_negative_indices=allow_negative_indices)
    return out if keepdims else squeeze(out, (axis,))


def dynamic_update_slice_in_dim(
    operand_, update, start_index, axis, *, allow_negative_indices=True
):
    """Write ``update`` into ``operand_`` starting at ``start_index`` along ``axis``."""
    x = operand(operand_, "dynamic_update_slice_in_dim")
    axis = _canonical_axis(axis, x.ndim, "dynamic_update_slice_in_dim", "axis")
    starts = [_zero_index_like(start_index)] * x.ndim
    starts[axis] = start_index
    allow = [False] * x.ndim
    allow[axis] = allow_negative_indices
    return dynamic_update_slice(x, update, starts, allow_negative_indices=allow)


def dynamic_update_index_in_dim(operand_, update, index, axis, *, allow_negative_indices=True):
    """Write ``update`` (with or without the size-1 ``axis``) at ``index`` along ``axis``."""
    x = operand(operand_, "dynamic_update_index_in_dim")
    u = operand(update, "dynamic_update_index_in_dim")
    axis = _canonical_axis(axis, x.ndim, "dynamic_update_index_in_dim", "axis")
    if u.ndim != x.ndim:
        if u.ndim + 1 != x.ndim:
            raise TypeError(
                f"dynamic_update_index_in_dim: update shape {u.shape} must have the "
                f"rank of the operand shape {x.shape} or one less"
            )
        u = expand_dims(u, (axis,))
    return dynamic_update_slice_in_dim(
        x, u, index, axis, allow_negative_indices=allow_negative_indices
    )


# -- lowering (fungrad/lowering/kernel.py): index arithmetic, clamped so every load is in bounds

_CONCAT_SELECT_MAX = 4  # up to this many pieces, concatenate is a select chain (fuses)


def append_kernel(
    ctx, prefix: str, shape, stores_at, *, parallel: bool = True, origin: str = ""
) -> None:
    """Append a loop nest over ``shape`` whose stores are ``stores_at(index_exprs)``
    (``fusion.Planner.add_kernel``)."""
    ctx.planner.add_kernel(prefix, shape, stores_at, parallel=parallel, origin=origin)


def _clamped_start(ctx, start: kernel.Tensor, hi: int) -> kernel.Expr:
    """A dynamic start index clamped to ``[0, hi]`` (XLA's rule), exact for every integer
    dtype: uint64 values above the int64 range are clamped before the conversion."""
    if hi <= 0:
        return ctx.iconst(0)
    s = start.at(())
    if s.dtype == np.uint64:
        s = ctx.op("min", s, ctx.const(hi, s.dtype))
    return kernel.clamp_index(ctx, ctx.convert(s, kernel.INDEX), 0, hi)


def _all(ctx, conds):
    """The conjunction of bool expressions (None when there are none)."""
    out = None
    for c in conds:
        out = c if out is None else ctx.op("and", out, c)
    return out


def _concatenate_lowering(ctx, *xs, dimension):
    shape = list(xs[0].shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    dtype = xs[0].dtype
    pieces, offset = [], 0
    for x in xs:
        if x.shape[dimension]:
            pieces.append((offset, x))
        offset += x.shape[dimension]
    if len(pieces) > _CONCAT_SELECT_MAX:
        # Many pieces: each is copied into its part of one buffer by its own loop nest, so an
        # element costs one load instead of one per piece.
        out = ctx.planner.new_buffer(shape, dtype, "temp")
        for off, x in pieces:

            def stores(idx, off=off, x=x):
                pos = list(idx)
                pos[dimension] = ctx.iadd(idx[dimension], ctx.iconst(off))
                return [Store(out, ctx.flat_index(pos, shape), x.at(idx))]

            append_kernel(ctx, "concatenate", x.shape, stores)
        return ctx.planner.buffer_tensor(out, "concatenate")

    def element(idx):
        i = idx[dimension]
        value = None
        for off, x in reversed(pieces):  # select(i < end_0, x_0, select(i < end_1, x_1, ...))
            n = x.shape[dimension]
            pos = list(idx)
            pos[dimension] = kernel.clamp_index(ctx, ctx.isub(i, ctx.iconst(off)), 0, n - 1)
            v = x.at(pos)
            value = (
                v if value is None else ctx.select(ctx.op("lt", i, ctx.iconst(off + n)), v, value)
            )
        return ctx.const(0, dtype) if value is None else value

    return kernel.from_fn(shape, dtype, element, "concatenate")


def _pad_lowering(ctx, x, padding_value, *, padding_config):
    shape = tuple(
        lo + hi + n + max(n - 1, 0) * interior
        for n, (lo, hi, interior) in zip(x.shape, padding_config)
    )

    def element(idx):
        fill = padding_value.at(())
        if x.size == 0:
            return fill
        pos, conds = [], []
        for i, n, (lo, hi, interior) in zip(idx, x.shape, padding_config):
            t = ctx.isub(i, ctx.iconst(lo))  # position in the interior-padded operand
            step = interior + 1
            if lo > 0:
                conds.append(ctx.op("ge", t, ctx.iconst(0)))
                t = ctx.op("max", t, ctx.iconst(0))
            if step > 1:
                conds.append(ctx.op("eq", ctx.irem(t, ctx.iconst(step)), ctx.iconst(0)))
                t = ctx.idiv(t, ctx.iconst(step))
            if hi > 0:  # past the last element (at n - 1) on the high side
                conds.append(ctx.op("lt", t, ctx.iconst(n)))
                t = ctx.op("min", t, ctx.iconst(n - 1))
            pos.append(t)
        inside = _all(ctx, conds)
        v = x.at(pos)
        return v if inside is None else ctx.select(inside, v, fill)

    return kernel.from_fn(shape, x.dtype, element, "pad")


def _slice_lowering(ctx, x, *, start_indices, limit_indices, strides):
    strides_ = strides or (1,) * x.ndim
    shape = tuple(-(-(lim - s) // st) for s, lim, st in zip(start_indices, limit_indices, strides_))
    return kernel.from_fn(
        shape,
        x.dtype,
        lambda idx: x.at(
            tuple(
                ctx.iadd(ctx.iconst(s), ctx.imul(i, ctx.iconst(st)))
                for i, s, st in zip(idx, start_indices, strides_)
            )
        ),
        "slice",
    )


def _dynamic_slice_lowering(ctx, x, *starts, slice_sizes):
    def element(idx):
        lo = [_clamped_start(ctx, s, n - k) for s, n, k in zip(starts, x.shape, slice_sizes)]
        return x.at(tuple(ctx.iadd(s, i) for s, i in zip(lo, idx)))

    return kernel.from_fn(slice_sizes, x.dtype, element, "dynamic_slice")


def _dynamic_update_slice_lowering(ctx, x, update, *starts):
    if update.size == 0:
        return x

    def element(idx):
        lo = [_clamped_start(ctx, s, n - k) for s, n, k in zip(starts, x.shape, update.shape)]
        pos, conds = [], []
        for i, s, n, k in zip(idx, lo, x.shape, update.shape):
            t = ctx.isub(i, s)  # position in the update
            if k < n:
                conds.append(ctx.op("ge", t, ctx.iconst(0)))
                conds.append(ctx.op("lt", t, ctx.iconst(k)))
                t = kernel.clamp_index(ctx, t, 0, k - 1)
            pos.append(t)
        inside = _all(ctx, conds)
        u = update.at(pos)
        return u if inside is None else ctx.select(inside, u, x.at(idx))

    return kernel.from_fn(x.shape, x.dtype, element, "dynamic_update_slice")


kernel.register_lowering(concatenate_p, _concatenate_lowering)
kernel.register_lowering(pad_p, _pad_lowering)
kernel.register_lowering(slice_p, _slice_lowering)
kernel.register_lowering(dynamic_slice_p, _dynamic_slice_lowering)
kernel.register_lowering(dynamic_update_slice_p, _dynamic_update_slice_lowering)
