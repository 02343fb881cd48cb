"""Shape primitives: broadcast_in_dim, reshape, transpose, squeeze, rev, iota; and the lax
wrappers built on them (expand_dims, broadcast, broadcast_to_rank, broadcasted_iota, full,
full_like, collapse). Slicing, padding and concatenation live in ``slicing.py``, as in JAX.

Every primitive keeps JAX's jaxpr spelling (``reshape[dimensions=None new_sizes=(3, 2)]``,
``broadcast_in_dim[broadcast_dimensions=(1,) shape=(2, 3)]``...). Static metadata
are tuple params.

Rules: every primitive here but iota is linear in its operand, so its jvp applies it to the
tangents and its transpose is the adjoint shape operation (broadcast -> sum, reshape ->
reshape, transpose -> inverse transpose...). Batch rules shift the dimension params past the
batch dimension instead of moving data.

The static-argument helpers (``_int``, ``_int_tuple``, ``_shape_tuple``, ``_canonical_axis``,
``_bind``) are shared with ``slicing.py``.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from fungrad import core, dtypes
from fungrad.array import Array
from fungrad.core import ShapedArray
from fungrad.lax.utils import NUMERIC_OR_COMPLEX, check_kinds, operand, standard_primitive
from fungrad.lowering import kernel
from fungrad.transforms.jvp import defjvp_zero, deflinear
from fungrad.transforms.transpose import deflinear_transpose
from fungrad.transforms.vmap import batch_rules

__all__ = [
    "broadcast_in_dim",
    "reshape",
    "transpose",
    "squeeze",
    "rev",
    "iota",
    "expand_dims",
    "broadcast",
    "broadcast_to_rank",
    "broadcasted_iota",
    "full",
    "full_like",
    "collapse",
    "broadcast_in_dim_p",
    "reshape_p",
    "transpose_p",
    "squeeze_p",
    "rev_p",
    "iota_p",
]


# -- static-argument helpers ---------------------------------------------------------------------


def _int(x, name: str, what: str) -> int:
    try:
        return operator.index(x)
    except TypeError:
        raise TypeError(
            f"{name}: {what} must be integers, got {x!r} of type {type(x).__name__}"
        ) from None


def _int_tuple(xs, name: str, what: str) -> tuple[int, ...]:
    """``xs`` (a sequence of ints, or one int) as a tuple of Python ints."""
    if type(xs) is tuple and all(type(x) is int for x in xs):  # already one (the common case)
        return xs
    if isinstance(xs, (int, np.integer)):
        return (int(xs),)
    try:
        items = list(xs)
    except TypeError:
        raise TypeError(f"{name}: {what} must be a sequence of integers, got {xs!r}") from None
    return tuple(_int(x, name, what) for x in items)


def _shape_tuple(shape, name: str, what: str = "shape") -> tuple[int, ...]:
    shape = _int_tuple(shape, name, what)
    if any(d < 0 for d in shape):
        raise TypeError(f"{name}: {what} must be non-negative integers, got {shape}")
    return shape


def _canonical_axis(axis, ndim: int, name: str, what: str = "dimension") -> int:
    axis = _int(axis, name, what)
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name}: {what} {axis} is out of range for an array of rank {ndim}")
    return axis % ndim


def _check_dims(name: str, dims, ndim: int, shape, what: str = "dimensions") -> None:
    """``dims`` must be distinct dimensions in ``[0, ndim)``."""
    if any(not 0 <= d < ndim for d in dims) or len(set(dims)) != len(dims):
        raise TypeError(
            f"{name}: {what} {dims} must be distinct dimensions of an operand of shape {shape}"
        )


def _bind(prim, *args, **params):
    """Check the avals with ``prim``'s abstract_eval, then bind. Under vmap the primitive is
    bound by its batch rule with shifted params, so checking here is what makes a bad call
    report the user's own (per-example) shapes rather than the batched ones."""
    core.cached_abstract_eval(prim, tuple([core.get_aval(a) for a in args]), params)
    return prim.bind(*args, **params)


# -- broadcast_in_dim ----------------------------------------------------------------------------


def _broadcast_in_dim_impl(x, *, shape, broadcast_dimensions):
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    x = x.reshape(expanded)
    if x.size == 0 or not x.flags.c_contiguous:
        return np.broadcast_to(x, shape)
    # The read-only view np.broadcast_to makes (stride 0 along the broadcast dimensions), made
    # directly: np.broadcast_to costs several microseconds, far more than a small operand.
    strides = tuple([s if e == n else 0 for e, n, s in zip(expanded, shape, x.strides)])
    out = np.ndarray(shape, x.dtype, x, 0, strides)
    out.setflags(write=False)
    return out


def _broadcast_in_dim_abstract_eval(x, *, shape, broadcast_dimensions):
    name = "broadcast_in_dim"
    if len(broadcast_dimensions) != x.ndim:
        raise TypeError(
            f"{name}: broadcast_dimensions {broadcast_dimensions} must have one "
            f"entry per operand dimension (operand shape {x.shape})"
        )
    if any(not 0 <= d < len(shape) for d in broadcast_dimensions) or list(
        broadcast_dimensions
    ) != sorted(set(broadcast_dimensions)):
        raise TypeError(
            f"{name}: broadcast_dimensions {broadcast_dimensions} must be strictly "
            f"increasing dimensions of the result shape {shape}"
        )
    for i, d in enumerate(broadcast_dimensions):
        if x.shape[i] not in (1, shape[d]):
            raise TypeError(
                f"{name}: operand dimension {i} has size {x.shape[i]}, which cannot "
                f"broadcast to result dimension {d} of size {shape[d]} "
                f"(operand shape {x.shape}, result shape {shape})"
            )
    return ShapedArray(shape, x.dtype, x.weak_type)


broadcast_in_dim_p = standard_primitive(
    "broadcast_in_dim", _broadcast_in_dim_impl, _broadcast_in_dim_abstract_eval
)


def broadcast_in_dim(operand_, shape, broadcast_dimensions):
    """Broadcast ``operand_`` to ``shape``; operand dim ``i`` maps to ``broadcast_dimensions[i]``.

    Example: ``broadcast_in_dim(x_f32_3, (2, 3), (1,))`` repeats ``x`` as two rows.
    """
    x = operand(operand_, "broadcast_in_dim")
    shape = _shape_tuple(shape, "broadcast_in_dim")
    broadcast_dimensions = _int_tuple(
        broadcast_dimensions, "broadcast_in_dim", "broadcast_dimensions"
    )
    if x.shape == shape and broadcast_dimensions == tuple(range(len(shape))):
        return x
    return _bind(broadcast_in_dim_p, x, shape=shape, broadcast_dimensions=broadcast_dimensions)


def _broadcast_in_dim_transpose(ct, x, *, shape, broadcast_dimensions):
    # Sum over the result dims the operand does not fill (new dims and size-1 dims that were
    # stretched), then reshape to restore the operand's size-1 dims.
    from fungrad.lax.reduce import reduce_sum

    in_shape = x.aval.shape
    kept = {d for i, d in enumerate(broadcast_dimensions) if in_shape[i] == shape[d]}
    axes = tuple(d for d in range(len(shape)) if d not in kept)
    summed = reduce_sum(ct, axes) if axes else ct
    return [reshape(summed, in_shape)]


def _broadcast_in_dim_batch(axis_size, args, dims, *, shape, broadcast_dimensions):
    # The batch dim goes right after the result dim of the operand dim before it, so the
    # broadcast_dimensions stay increasing and no transpose is needed.
    (x,), (d,) = args, dims
    out_d = broadcast_dimensions[d - 1] + 1 if d > 0 else 0
    new_bdims = tuple(b + (b >= out_d) for b in broadcast_dimensions)
    out = broadcast_in_dim_p.bind(
        x,
        shape=shape[:out_d] + (axis_size,) + shape[out_d:],
        broadcast_dimensions=new_bdims[:d] + (out_d,) + new_bdims[d:],
    )
    return out, out_d


deflinear(broadcast_in_dim_p)
deflinear_transpose(broadcast_in_dim_p, _broadcast_in_dim_transpose)
batch_rules[broadcast_in_dim_p] = _broadcast_in_dim_batch


def broadcast(operand_, sizes):
    """Add leading dimensions of ``sizes`` to ``operand_`` (``sizes + operand_.shape``)."""
    x = operand(operand_, "broadcast")
    sizes = _shape_tuple(sizes, "broadcast", "sizes")
    dims = tuple(range(len(sizes), len(sizes) + x.ndim))
    return broadcast_in_dim(x, sizes + tuple(x.shape), dims)


def broadcast_to_rank(x, rank: int):
    """Add leading size-1 dimensions to ``x`` until it has rank ``rank``."""
    x = operand(x, "broadcast_to_rank")
    ndim = x.ndim
    if ndim == rank:
        return x
    if ndim > rank:
        raise ValueError(
            f"broadcast_to_rank: operand of shape {x.shape} already has rank {ndim} > {rank}"
        )
    return broadcast(x, (1,) * (rank - ndim))


def expand_dims(array, dimensions):
    """Insert size-1 dimensions at ``dimensions`` (positions in the result; negatives count
    from the end of the result), via ``broadcast_in_dim`` as in JAX."""
    x = operand(array, "expand_dims")
    dimensions = _int_tuple(dimensions, "expand_dims", "dimensions")
    ndim_out = x.ndim + len(dimensions)
    dims = [_canonical_axis(d, ndim_out, "expand_dims") for d in dimensions]
    if len(set(dims)) != len(dims):
        raise ValueError(f"expand_dims: repeated axis in dimensions {dimensions}")
    shape = list(x.shape)
    for d in sorted(dims):
        shape.insert(d, 1)
    kept = tuple(i for i in range(ndim_out) if i not in dims)
    return broadcast_in_dim(x, tuple(shape), kept)


# -- reshape ---------------------------------------------------------------------------------


def _reshape_impl(x, *, new_sizes, dimensions):
    if dimensions is not None:
        x = np.transpose(x, dimensions)
    return np.reshape(x, new_sizes)


def _reshape_abstract_eval(x, *, new_sizes, dimensions):
    if math.prod(new_sizes) != x.size:
        raise TypeError(
            f"reshape: cannot reshape array of shape {x.shape} (size {x.size}) "
            f"into shape {new_sizes} (size {math.prod(new_sizes)})"
        )
    if dimensions is not None and sorted(dimensions) != list(range(x.ndim)):
        raise TypeError(
            f"reshape: dimensions {dimensions} must be a permutation of the "
            f"operand dimensions (operand shape {x.shape})"
        )
    return ShapedArray(new_sizes, x.dtype, x.weak_type)


reshape_p = standard_primitive("reshape", _reshape_impl, _reshape_abstract_eval)


def reshape(operand_, new_sizes, dimensions=None):
    """Reshape to ``new_sizes`` (row-major), after transposing by ``dimensions`` if given.

    Unlike ``fungrad.numpy.reshape``, sizes are not inferred: ``-1`` is an error.
    Example: ``reshape(x_f32_2x3, (3, 2), dimensions=(1, 0))`` ravels ``x.T``.
    """
    x = operand(operand_, "reshape")
    new_sizes = _shape_tuple(new_sizes, "reshape", "new_sizes")
    if dimensions is not None:
        dimensions = _int_tuple(dimensions, "reshape", "dimensions")
        if dimensions == tuple(range(x.ndim)):
            dimensions = None
    if dimensions is None and new_sizes == tuple(x.shape):
        return x
    return _bind(reshape_p, x, new_sizes=new_sizes, dimensions=dimensions)


def _reshape_transpose(ct, x, *, new_sizes, dimensions):
    if dimensions is None:
        return [reshape(ct, x.aval.shape)]
    permuted = tuple(x.aval.shape[d] for d in dimensions)
    return [transpose(reshape(ct, permuted), _inverse_permutation(dimensions))]


def _reshape_batch(axis_size, args, dims, *, new_sizes, dimensions):
    # reshape's own ``dimensions`` param moves the batch dim to the front.
    (x,), (d,) = args, dims
    perm = range(x.ndim - 1) if dimensions is None else dimensions
    new_dims = (d,) + tuple(p + (p >= d) for p in perm)
    return reshape(x, (axis_size,) + new_sizes, new_dims), 0


deflinear(reshape_p)
deflinear_transpose(reshape_p, _reshape_transpose)
batch_rules[reshape_p] = _reshape_batch


def collapse(operand_, start_dimension, stop_dimension=None):
    """Merge dimensions ``[start_dimension, stop_dimension)`` into one (row-major order);
    ``stop_dimension=None`` collapses through the last dimension."""
    x = operand(operand_, "collapse")
    lo, hi, _ = slice(start_dimension, stop_dimension).indices(x.ndim)
    if hi < lo:
        raise ValueError(
            f"collapse: invalid dimension range {start_dimension}:{stop_dimension} "
            f"for an operand of shape {x.shape}"
        )
    shape = tuple(x.shape)
    return reshape(x, shape[:lo] + (math.prod(shape[lo:hi]),) + shape[hi:])


# -- transpose, squeeze, rev -----------------------------------------------------------------


def _transpose_impl(x, *, permutation):
    return np.transpose(x, permutation)


def _transpose_abstract_eval(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise TypeError(
            f"transpose: permutation {permutation} is not a permutation of the "
            f"dimensions of an operand of shape {x.shape}"
        )
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


transpose_p = standard_primitive("transpose", _transpose_impl, _transpose_abstract_eval)


def transpose(operand_, permutation):
    """Permute dimensions: result dimension ``i`` is operand dimension ``permutation[i]``."""
    x = operand(operand_, "transpose")
    permutation = _int_tuple(permutation, "transpose", "permutation")
    if permutation == tuple(range(x.ndim)):
        return x
    return _bind(transpose_p, x, permutation=permutation)


def _inverse_permutation(permutation) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argsort(permutation))


def _transpose_batch(axis_size, args, dims, *, permutation):
    (x,), (d,) = args, dims
    perm = (d,) + tuple(p + (p >= d) for p in permutation)
    return transpose_p.bind(x, permutation=perm), 0


deflinear(transpose_p)
deflinear_transpose(
    transpose_p, lambda ct, x, *, permutation: [transpose(ct, _inverse_permutation(permutation))]
)
batch_rules[transpose_p] = _transpose_batch


def _squeeze_impl(x, *, dimensions):
    return np.reshape(x, _squeezed_shape(x.shape, dimensions))


def _squeezed_shape(shape, dimensions):
    return tuple(d for i, d in enumerate(shape) if i not in dimensions)


def _squeeze_abstract_eval(x, *, dimensions):
    _check_dims("squeeze", dimensions, x.ndim, x.shape)
    if any(x.shape[d] != 1 for d in dimensions):
        raise TypeError(
            f"squeeze: cannot squeeze dimensions {dimensions} of an operand of "
            f"shape {x.shape}: squeezed dimensions must have size 1"
        )
    return ShapedArray(_squeezed_shape(x.shape, dimensions), x.dtype, x.weak_type)


squeeze_p = standard_primitive("squeeze", _squeeze_impl, _squeeze_abstract_eval)


def squeeze(array, dimensions):
    """Remove the size-1 ``dimensions`` (negative values count from the end)."""
    x = operand(array, "squeeze")
    dims = _int_tuple(dimensions, "squeeze", "dimensions")
    dims = tuple(sorted(_canonical_axis(d, x.ndim, "squeeze") for d in dims))
    if not dims:
        return x
    return _bind(squeeze_p, x, dimensions=dims)


def _squeeze_batch(axis_size, args, dims, *, dimensions):
    (x,), (d,) = args, dims
    out_d = d - sum(1 for k in dimensions if k < d)
    return squeeze_p.bind(x, dimensions=tuple(k + (k >= d) for k in dimensions)), out_d


deflinear(squeeze_p)
deflinear_transpose(squeeze_p, lambda ct, x, *, dimensions: [reshape(ct, x.aval.shape)])
batch_rules[squeeze_p] = _squeeze_batch


def _rev_impl(x, *, dimensions):
    x = np.asarray(x)
    return np.flip(x, dimensions) if dimensions else x


def _rev_abstract_eval(x, *, dimensions):
    _check_dims("rev", dimensions, x.ndim, x.shape)
    return x


rev_p = standard_primitive("rev", _rev_impl, _rev_abstract_eval)


def rev(operand_, dimensions):
    """Reverse the order of elements along ``dimensions``."""
    x = operand(operand_, "rev")
    dims = _int_tuple(dimensions, "rev", "dimensions")
    if not dims:
        return x
    return _bind(rev_p, x, dimensions=dims)


def _rev_batch(axis_size, args, dims, *, dimensions):
    (x,), (d,) = args, dims
    return rev_p.bind(x, dimensions=tuple(k + (k >= d) for k in dimensions)), d


deflinear(rev_p)
deflinear_transpose(rev_p, lambda ct, x, *, dimensions: [rev(ct, dimensions)])
batch_rules[rev_p] = _rev_batch


# -- iota and full ---------------------------------------------------------------------------


def _iota_impl(*, dtype, shape, dimension):
    line = np.arange(shape[dimension], dtype=dtype)
    expanded = [1] * len(shape)
    expanded[dimension] = shape[dimension]
    return np.broadcast_to(line.reshape(expanded), shape)


def _iota_abstract_eval(*, dtype, shape, dimension):
    check_kinds("iota", dtype, NUMERIC_OR_COMPLEX, "dtype")
    if not 0 <= dimension < len(shape):
        raise TypeError(f"iota: dimension {dimension} is out of range for shape {shape}")
    return ShapedArray(shape, dtype, False)


iota_p = standard_primitive("iota", _iota_impl, _iota_abstract_eval)


def _iota_batch(axis_size, args, dims, **params):
    # NOTE: iota has no operands, so a BatchTrace always binds it unbatched without asking
    # this rule; it exists so that the rule table is complete and says so.
    return iota_p.bind(**params), None


defjvp_zero(iota_p)
batch_rules[iota_p] = _iota_batch


def broadcasted_iota(dtype, shape, dimension):
    """An array of ``shape`` whose values count 0, 1, ... along ``dimension``."""
    dtype = dtypes.canonicalize_dtype(dtype)
    shape = _shape_tuple(shape, "broadcasted_iota")
    dimension = _canonical_axis(dimension, len(shape), "broadcasted_iota")
    return _bind(iota_p, dtype=dtype, shape=shape, dimension=dimension)


def iota(dtype, size):
    """``[0, 1, ..., size - 1]`` of ``dtype``."""
    return broadcasted_iota(dtype, (_int(size, "iota", "size"),), 0)


def _is_weak(x) -> bool:
    if isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic):
        return not isinstance(x, bool)
    return bool(getattr(x, "weak_type", False))


def _fill_scalar(name: str, fill_value, dtype: np.dtype, weak: bool):
    """The 0-d fill value of ``dtype``: converted with ``convert_element_type``, except that a
    Python number filling a float array becomes that float constant directly (so
    ``full((2,), 2**40, float32)`` works although 2**40 is no int32)."""
    from fungrad.lax import elementwise

    if isinstance(fill_value, complex) and dtypes.kind(dtype) != "c":
        raise TypeError(
            f"{name}: cannot fill an array of dtype {dtype.name} with the complex number "
            f"{fill_value} (the imaginary part would be lost); ask for a complex dtype"
        )
    if (
        isinstance(fill_value, (int, float))
        and not isinstance(fill_value, (bool, np.generic))
        and dtypes.kind(dtype) == "f"
    ):
        with np.errstate(over="ignore"):
            return Array(np.asarray(fill_value, np.float64).astype(dtype)[()], weak)
    v = operand(fill_value, name)
    if v.shape:
        raise TypeError(f"{name}: fill_value must be a scalar, got shape {v.shape}")
    return elementwise.convert_element_type(v, dtype, weak)


def full(shape, fill_value, dtype=None):
    """An array of ``shape`` filled with the scalar ``fill_value`` (weakly typed when
    ``fill_value`` is a Python scalar and no ``dtype`` is given).

    Example: ``full((2,), 3)`` is ``Array([3, 3], dtype=int32, weak_type=True)``.
    """
    shape = _shape_tuple(shape, "full")
    weak = dtype is None and _is_weak(fill_value)
    if dtype is None:
        dtype = operand(fill_value, "full").dtype
    v = _fill_scalar("full", fill_value, dtypes.canonicalize_dtype(dtype), weak)
    return broadcast(v, shape)


def full_like(x, fill_value, dtype=None, shape=None):
    """An array like ``x`` (its shape and dtype unless given) filled with ``fill_value``."""
    xa = operand(x, "full_like")
    shape = tuple(xa.shape) if shape is None else _shape_tuple(shape, "full_like")
    weak = dtype is None and _is_weak(xa)
    dt = dtypes.canonicalize_dtype(xa.dtype if dtype is None else dtype)
    return broadcast(_fill_scalar("full_like", fill_value, dt, weak), shape)


# -- lowering: index arithmetic, nothing is copied (fungrad/lowering/kernel.py) ---------------


def _broadcast_in_dim_lowering(ctx, x, *, shape, broadcast_dimensions):
    zero = ctx.iconst(0)
    return kernel.from_fn(
        shape,
        x.dtype,
        lambda idx: x.at(
            tuple(idx[d] if x.shape[i] != 1 else zero for i, d in enumerate(broadcast_dimensions))
        ),
        "broadcast_in_dim",
    )


def _reshape_lowering(ctx, x, *, new_sizes, dimensions):
    if dimensions is not None:
        x = kernel.transposed(ctx, x, dimensions)
    src = tuple(d for d in x.shape if d != 1)
    if src == tuple(d for d in new_sizes if d != 1):  # only size-1 dims come or go
        kept_out = [i for i, d in enumerate(new_sizes) if d != 1]
        zero = ctx.iconst(0)

        def element(idx):
            it = iter(idx[i] for i in kept_out)
            return x.at(tuple(next(it) if d != 1 else zero for d in x.shape))
    else:

        def element(idx):
            return x.at(ctx.unflatten(ctx.flat_index(idx, new_sizes), x.shape))

    t = kernel.from_fn(new_sizes, x.dtype, element, "reshape")
    if x.view is not None and x.view[1] == tuple(range(x.ndim)):
        t.view = (x.view[0], tuple(range(len(new_sizes))))
    return t


def _transpose_lowering(ctx, x, *, permutation):
    return kernel.transposed(ctx, x, permutation)


def _squeeze_lowering(ctx, x, *, dimensions):
    zero = ctx.iconst(0)

    def element(idx):
        it = iter(idx)
        return x.at(tuple(zero if d in dimensions else next(it) for d in range(x.ndim)))

    t = kernel.from_fn(_squeezed_shape(x.shape, dimensions), x.dtype, element, "squeeze")
    if x.view is not None and x.view[1] == tuple(range(x.ndim)):
        t.view = (x.view[0], tuple(range(t.ndim)))
    return t


def _rev_lowering(ctx, x, *, dimensions):
    def element(idx):
        return x.at(
            tuple(
                ctx.isub(ctx.iconst(n - 1), i) if d in dimensions else i
                for d, (i, n) in enumerate(zip(idx, x.shape))
            )
        )

    return kernel.from_fn(x.shape, x.dtype, element, "rev")


def _iota_lowering(ctx, *, dtype, shape, dimension):
    return kernel.from_fn(shape, dtype, lambda idx: ctx.convert(idx[dimension], dtype), "iota")


kernel.register_lowering(broadcast_in_dim_p, _broadcast_in_dim_lowering)
kernel.register_lowering(reshape_p, _reshape_lowering)
kernel.register_lowering(transpose_p, _transpose_lowering)
kernel.register_lowering(squeeze_p, _squeeze_lowering)
kernel.register_lowering(rev_p, _rev_lowering)
kernel.register_lowering(iota_p, _iota_lowering)
