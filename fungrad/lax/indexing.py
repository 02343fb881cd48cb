"""Gather and scatter primitives: XLA's general indexed read and indexed update.

``gather`` reads one slice of ``operand`` per index vector of ``start_indices``; ``scatter``
and its combining variants (``scatter-add``, ``scatter-mul``, ``scatter-min``, ``scatter-max``)
write one window of ``updates`` per index vector. Their layout is described by JAX's
:class:`GatherDimensionNumbers` / :class:`ScatterDimensionNumbers`; the index vector is always
the last dimension of the indices. Out-of-bounds handling is a :class:`GatherScatterMode`:

* ``CLIP``: start indices are clamped so the whole window is in bounds;
* ``FILL_OR_DROP``: gather returns ``fill_value`` for a window that is not entirely in bounds,
  scatter drops such a window;
* ``PROMISE_IN_BOUNDS``: no checking. The reference impls define it as XLA behaves: gather
  clamps, scatter drops.

The numpy impls turn the dimension numbers into one fancy index per operand dimension (shape
``batch + window``) and apply it in a single vectorised step (``np.add.at`` and friends for the
combining scatters, so duplicate indices accumulate; plain scatter keeps one of the writers).

Rules (JAX's, from jax/_src/lax/slicing.py): gather is linear in the operand and transposes to a
scatter-add; scatter-add is linear in operand and updates and transposes to a gather; scatter is
linear in both for fixed indices (JAX's id trick finds the winning update under repeated
indices); scatter-mul is linear in each operand separately, and differentiable in its updates
only with ``unique_indices=True`` (as in JAX; a clear error otherwise); scatter-min/max share the
tangent among tied contenders. Every rule keeps the out-of-bounds mode consistent (see the rules
section). Batch rules renumber the dimension numbers around the batch dims (batched operand and
indices become paired batching dims) instead of moving data.

Lowering rules (for ``jit``, at the end): a gather is index arithmetic (it fuses); a scatter
copies the operand and then applies the updates in one sequential loop nest, in the impl's
order.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

import numpy as np

from fungrad import core, dtypes
from fungrad.array import Array
from fungrad.core import ShapedArray
from fungrad.lax import complex_math, elementwise
from fungrad.lax import shape as shape_ops
from fungrad.lax.slicing import append_kernel
from fungrad.lax.utils import (
    ANY_OR_COMPLEX,
    NUMERIC_OR_COMPLEX,
    check_kinds,
    full_like_scalar,
    operand,
    standard_primitive,
)
from fungrad.lowering import kernel
from fungrad.lowering.fusion import Store
from fungrad.transforms.jvp import (
    Zero,
    add_tangents,
    defjvp,
    instantiate_zeros,
    jvp_rules,
    tangent_aval,
)
from fungrad.transforms.transpose import deflinear_transpose, is_undefined_primal
from fungrad.transforms.vmap import batch_rules, moveaxis

__all__ = [
    "GatherDimensionNumbers",
    "ScatterDimensionNumbers",
    "GatherScatterMode",
    "gather",
    "scatter",
    "scatter_add",
    "scatter_mul",
    "scatter_min",
    "scatter_max",
    "gather_p",
    "scatter_p",
    "scatter_add_p",
    "scatter_mul_p",
    "scatter_min_p",
    "scatter_max_p",
]


class GatherDimensionNumbers(NamedTuple):
    """How the dimensions of operand, start_indices and output of a gather relate (JAX's).

    offset_dims: output dimensions (ascending) that hold the slice's non-collapsed dimensions.
    collapsed_slice_dims: operand dimensions (ascending, slice size 1) dropped from the output.
    start_index_map: for each entry of an index vector, the operand dimension it starts.
    operand_batching_dims / start_indices_batching_dims: paired dimensions of operand and
    indices that are indexed together (slice size 1), as produced by vmap.
    """

    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
    """How the dimensions of operand, scatter_indices and updates of a scatter relate (JAX's).

    update_window_dims: updates dimensions (ascending) that form the written window.
    inserted_window_dims: operand dimensions (ascending) the window has size 1 in (absent
    from updates). scatter_dims_to_operand_dims: for each index-vector entry, the operand
    dimension it starts. operand_batching_dims / scatter_indices_batching_dims: paired batch
    dimensions, as in :class:`GatherDimensionNumbers`.
    """

    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()


class GatherScatterMode(enum.Enum):
    """How gather/scatter treat out-of-bounds indices (see the module docstring)."""

    CLIP = enum.auto()
    FILL_OR_DROP = enum.auto()
    PROMISE_IN_BOUNDS = enum.auto()

    @staticmethod
    def from_any(s) -> GatherScatterMode:
        """A mode from a GatherScatterMode, None (FILL_OR_DROP) or one of the strings "clip",
        "fill", "drop", "promise_in_bounds"."""
        if isinstance(s, GatherScatterMode):
            return s
        if s == "clip":
            return GatherScatterMode.CLIP
        if s is None or s == "fill" or s == "drop":
            return GatherScatterMode.FILL_OR_DROP
        if s == "promise_in_bounds":
            return GatherScatterMode.PROMISE_IN_BOUNDS
        raise ValueError(
            f'Unknown gather mode "{s}"; expected one of "clip", "fill", "drop", '
            '"promise_in_bounds" or a GatherScatterMode'
        )


# -- dimension-number checks shared by gather and scatter ---------------------------------------


def _check_dims(name: str, what: str, dims, rank: int, sorted_: bool = True) -> None:
    if len(set(dims)) != len(dims):
        raise TypeError(f"{name}: {what} must not repeat; got {dims}")
    if sorted_ and list(dims) != sorted(dims):
        raise TypeError(f"{name}: {what} must be sorted; got {dims}")
    for d in dims:
        if not 0 <= d < rank:
            raise TypeError(f"{name}: {what} must be in [0, {rank}); got {dims}")


def _check_disjoint(name: str, a, b, what_a: str, what_b: str) -> None:
    if set(a) & set(b):
        raise TypeError(f"{name}: {what_a} {a} and {what_b} {b} must be disjoint")


def _check_indices(name: str, indices: ShapedArray) -> None:
    if not dtypes.is_int(indices.dtype):
        raise TypeError(f"{name}: indices must have an integer dtype, got {indices.dtype.name}")
    if indices.ndim < 1:
        raise TypeError(
            f"{name}: indices must have at least one dimension (the index vector "
            "is the last one; add a trailing dimension of size 1 for scalar "
            f"indices), got shape {indices.shape}"
        )


def _check_batching(name, operand_batching, indices_batching, operand_shape, indices_shape):
    _check_dims(name, "operand_batching_dims", operand_batching, len(operand_shape))
    _check_dims(
        name, "indices batching dims", indices_batching, len(indices_shape) - 1, sorted_=False
    )
    if len(operand_batching) != len(indices_batching):
        raise TypeError(
            f"{name}: operand_batching_dims {operand_batching} and the indices "
            f"batching dims {indices_batching} must have equal lengths"
        )
    op_sizes = tuple(operand_shape[d] for d in operand_batching)
    idx_sizes = tuple(indices_shape[d] for d in indices_batching)
    if op_sizes != idx_sizes:
        raise TypeError(
            f"{name}: operand batching dimensions have sizes {op_sizes} but the "
            f"indices batching dimensions have sizes {idx_sizes}"
        )


# -- the shared numpy machinery -------------------------------------------------------------------


def _start_indices(operand_shape, indices, start_index_map, operand_batching, indices_batching):
    """Per operand dimension, the start index of each window: int64 arrays of the batch shape."""
    batch_shape = indices.shape[:-1]
    starts = [np.zeros(batch_shape, np.int64) for _ in operand_shape]
    idx = indices.astype(np.int64)
    for k, d in enumerate(start_index_map):
        starts[d] = idx[..., k]
    for od, bd in zip(operand_batching, indices_batching):
        iota = np.arange(batch_shape[bd], dtype=np.int64)
        shape = [1] * len(batch_shape)
        shape[bd] = batch_shape[bd]
        starts[od] = np.broadcast_to(iota.reshape(shape), batch_shape)
    return starts


def _in_bounds(starts, upper, dims, batch_shape):
    """True where every start in ``dims`` lies in ``[0, upper[d]]`` (the window fits)."""
    ok = np.ones(batch_shape, bool)
    for d in dims:
        ok &= (starts[d] >= 0) & (starts[d] <= upper[d])
    return ok


def _linear_indices(operand_shape, batch_shape, starts, window_dims, window_shape):
    """Flat operand positions of every window element: shape ``batch + window``."""
    nb, nw = len(batch_shape), len(window_dims)
    lin = np.zeros(tuple(batch_shape) + tuple(window_shape), np.int64)
    stride = 1
    for d in reversed(range(len(operand_shape))):
        pos = starts[d].reshape(tuple(batch_shape) + (1,) * nw)
        if d in window_dims:
            j = window_dims.index(d)
            shape = [1] * (nb + nw)
            shape[nb + j] = window_shape[j]
            pos = pos + np.arange(window_shape[j], dtype=np.int64).reshape(shape)
        lin += pos * stride
        stride *= operand_shape[d]
    return lin


# -- gather ---------------------------------------------------------------------------------------


def _gather_window_dims(ndim, dn: GatherDimensionNumbers):
    return [
        d
        for d in range(ndim)
        if d not in dn.collapsed_slice_dims and d not in dn.operand_batching_dims
    ]


def _default_fill_value(dtype: np.dtype):
    """JAX's fill for out-of-bounds gathers: NaN (NaN+0j for complex), the most negative
    signed int, the largest unsigned int, True."""
    if dtypes.is_inexact(dtype):
        return float("nan")
    if dtypes.is_signed(dtype):
        return int(np.iinfo(dtype).min)
    if dtypes.is_unsigned(dtype):
        return int(np.iinfo(dtype).max)
    return True


def _gather_impl(
    operand_,
    indices,
    *,
    dimension_numbers,
    slice_sizes,
    indices_are_sorted,
    unique_indices,
    mode,
    fill_value,
):
    dn = dimension_numbers
    batch_shape = indices.shape[:-1]
    nb = len(batch_shape)
    window_dims = _gather_window_dims(operand_.ndim, dn)
    window_shape = tuple(slice_sizes[d] for d in window_dims)
    starts = _start_indices(
        operand_.shape,
        indices,
        dn.start_index_map,
        dn.operand_batching_dims,
        dn.start_indices_batching_dims,
    )
    upper = [n - s for n, s in zip(operand_.shape, slice_sizes)]
    valid = None
    if mode == GatherScatterMode.FILL_OR_DROP:
        valid = _in_bounds(starts, upper, dn.start_index_map, batch_shape)
    # CLIP and PROMISE_IN_BOUNDS clamp the window into the operand (XLA's gather semantics).
    starts = [np.clip(s, 0, max(u, 0)) for s, u in zip(starts, upper)]
    out_shape = batch_shape + window_shape
    if operand_.size == 0 or int(np.prod(out_shape)) == 0:
        res = np.zeros(out_shape, operand_.dtype)
    else:
        lin = _linear_indices(operand_.shape, batch_shape, starts, window_dims, window_shape)
        res = operand_.reshape(-1)[lin]
    if valid is not None:
        fill = _default_fill_value(operand_.dtype) if fill_value is None else fill_value
        with np.errstate(all="ignore"):
            fill = np.asarray(fill).astype(operand_.dtype)
        res = np.where(valid.reshape(batch_shape + (1,) * len(window_shape)), res, fill)
    # Move the window dims to offset_dims; batch dims fill the other positions in order.
    perm, bi, wi = [], 0, 0
    for p in range(nb + len(window_shape)):
        if p in dn.offset_dims:
            perm.append(nb + wi)
            wi += 1
        else:
            perm.append(bi)
            bi += 1
    return np.asarray(np.transpose(res, perm), dtype=operand_.dtype)[()]


def _gather_abstract_eval(
    operand_,
    indices,
    *,
    dimension_numbers,
    slice_sizes,
    indices_are_sorted,
    unique_indices,
    mode,
    fill_value,
):
    name = "gather"
    dn = dimension_numbers
    if not isinstance(dn, GatherDimensionNumbers):
        raise TypeError(
            f"{name}: dimension_numbers must be a GatherDimensionNumbers, got {type(dn).__name__}"
        )
    _check_indices(name, indices)
    check_kinds(name, operand_.dtype, ANY_OR_COMPLEX)
    batch_rank = indices.ndim - 1
    out_rank = batch_rank + len(dn.offset_dims)
    _check_dims(name, "offset_dims", dn.offset_dims, out_rank)
    _check_dims(name, "collapsed_slice_dims", dn.collapsed_slice_dims, operand_.ndim)
    _check_dims(name, "start_index_map", dn.start_index_map, operand_.ndim, sorted_=False)
    _check_batching(
        name,
        dn.operand_batching_dims,
        dn.start_indices_batching_dims,
        operand_.shape,
        indices.shape,
    )
    _check_disjoint(
        name,
        dn.collapsed_slice_dims,
        dn.operand_batching_dims,
        "collapsed_slice_dims",
        "operand_batching_dims",
    )
    _check_disjoint(
        name,
        dn.start_index_map,
        dn.operand_batching_dims,
        "start_index_map",
        "operand_batching_dims",
    )
    if len(dn.start_index_map) != indices.shape[-1]:
        raise TypeError(
            f"{name}: start_index_map {dn.start_index_map} has "
            f"{len(dn.start_index_map)} entries but the index vectors (last "
            f"dimension of indices of shape {indices.shape}) have "
            f"{indices.shape[-1]}"
        )
    if len(slice_sizes) != operand_.ndim:
        raise TypeError(
            f"{name}: slice_sizes {slice_sizes} must have one entry per operand "
            f"dimension (operand shape {operand_.shape})"
        )
    window_dims = _gather_window_dims(operand_.ndim, dn)
    if len(window_dims) != len(dn.offset_dims):
        raise TypeError(
            f"{name}: every operand dimension must be an offset dimension or "
            f"collapsed/batching: operand rank {operand_.ndim}, offset_dims "
            f"{dn.offset_dims}, collapsed_slice_dims {dn.collapsed_slice_dims}, "
            f"operand_batching_dims {dn.operand_batching_dims}"
        )
    indices_empty = 0 in indices.shape
    for d, (s, n) in enumerate(zip(slice_sizes, operand_.shape)):
        if s < 0 or (s > n and not indices_empty):
            raise TypeError(
                f"{name}: slice size {s} for operand dimension {d} is out of range "
                f"[0, {n}] (operand shape {operand_.shape})"
            )
    for d in dn.collapsed_slice_dims + dn.operand_batching_dims:
        if slice_sizes[d] != 1 and not (slice_sizes[d] == 0 and d in dn.operand_batching_dims):
            raise TypeError(
                f"{name}: collapsed or batching operand dimension {d} must have "
                f"slice size 1, got {slice_sizes[d]}"
            )
    if not isinstance(mode, GatherScatterMode):
        raise TypeError(f"{name}: mode must be a GatherScatterMode, got {mode!r}")
    batch = iter(indices.shape[:-1])
    window = iter(slice_sizes[d] for d in window_dims)
    shape = tuple(next(window) if p in dn.offset_dims else next(batch) for p in range(out_rank))
    return ShapedArray(shape, operand_.dtype, operand_.weak_type)


gather_p = standard_primitive("gather", _gather_impl, _gather_abstract_eval)


def gather(
    operand_,
    start_indices,
    dimension_numbers: GatherDimensionNumbers,
    slice_sizes,
    *,
    unique_indices: bool = False,
    indices_are_sorted: bool = False,
    mode=None,
    fill_value=None,
):
    """Gather slices of ``operand_`` at ``start_indices`` (XLA's Gather).

    Args:
      operand_: the array to read from.
      start_indices: integer array whose last dimension is the index vector.
      dimension_numbers: a :class:`GatherDimensionNumbers`.
      slice_sizes: the size of the slice along every operand dimension.
      unique_indices, indices_are_sorted: hints (not checked).
      mode: a :class:`GatherScatterMode` or string; None means PROMISE_IN_BOUNDS (clamps).
      fill_value: the value of out-of-bounds slices under FILL_OR_DROP; default NaN for
        floats, the minimum for signed ints, the maximum for unsigned ints, True for bool.

    Returns:
      The gathered array (batch dims of ``start_indices`` and the slice's offset dims).

    Example::

      gather(x, idx[:, None], GatherDimensionNumbers((), (0,), (0,)), (1,))  # == x[idx]
    """
    x = operand(operand_, "gather")
    idx = operand(start_indices, "gather")
    parsed = (
        GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else GatherScatterMode.from_any(mode)
    )
    if parsed == GatherScatterMode.FILL_OR_DROP:
        fill_value = (
            _default_fill_value(x.dtype) if fill_value is None else _static_scalar(fill_value)
        )
    else:
        fill_value = None
    return gather_p.bind(
        x,
        idx,
        dimension_numbers=_gather_dnums(dimension_numbers),
        slice_sizes=tuple(int(s) for s in slice_sizes),
        indices_are_sorted=bool(indices_are_sorted),
        unique_indices=bool(unique_indices),
        mode=parsed,
        fill_value=fill_value,
    )


def _static_scalar(v):
    """``v`` as a Python scalar (a hashable param); a TypeError for arrays and traced values."""
    if isinstance(v, (bool, int, float, complex)):
        return v
    if isinstance(v, np.generic) or (type(v) is Array and v.ndim == 0):
        return np.asarray(v).item()
    raise TypeError(
        f"gather: fill_value must be a static scalar, got {type(v).__name__}: {v!r:.60}"
    )


def _gather_dnums(dn) -> GatherDimensionNumbers:
    if not isinstance(dn, GatherDimensionNumbers):
        raise TypeError(
            f"gather: dimension_numbers must be a GatherDimensionNumbers, got {type(dn).__name__}"
        )
    return GatherDimensionNumbers(*(tuple(int(d) for d in f) for f in dn))


# -- scatter --------------------------------------------------------------------------------------


def _scatter_window_dims(ndim, dn: ScatterDimensionNumbers):
    return [
        d
        for d in range(ndim)
        if d not in dn.inserted_window_dims and d not in dn.operand_batching_dims
    ]


def _scatter_combine_set(flat, lin, vals):
    # Duplicate indices: numpy keeps the last write; XLA promises only "one of them".
    flat[lin] = vals


def _make_scatter_impl(combine):
    def impl(
        operand_, indices, updates, *, dimension_numbers, indices_are_sorted, unique_indices, mode
    ):
        dn = dimension_numbers
        out = np.array(operand_, copy=True, order="C")
        batch_shape = indices.shape[:-1]
        scatter_dims = [d for d in range(updates.ndim) if d not in dn.update_window_dims]
        upd = np.transpose(updates, scatter_dims + list(dn.update_window_dims))
        window_dims = _scatter_window_dims(operand_.ndim, dn)
        window_shape = upd.shape[len(batch_shape) :]
        sizes = [1] * operand_.ndim
        for d, s in zip(window_dims, window_shape):
            sizes[d] = s
        starts = _start_indices(
            operand_.shape,
            indices,
            dn.scatter_dims_to_operand_dims,
            dn.operand_batching_dims,
            dn.scatter_indices_batching_dims,
        )
        upper = [n - s for n, s in zip(operand_.shape, sizes)]
        if mode == GatherScatterMode.CLIP:
            starts = [np.clip(s, 0, max(u, 0)) for s, u in zip(starts, upper)]
        # After clamping only windows that cannot fit at all remain out of bounds.
        valid = _in_bounds(starts, upper, dn.scatter_dims_to_operand_dims, batch_shape)
        if upd.size == 0 or not valid.any():
            return out[()]
        lin = _linear_indices(operand_.shape, batch_shape, starts, window_dims, window_shape)
        mask = np.broadcast_to(valid.reshape(batch_shape + (1,) * len(window_shape)), lin.shape)
        with np.errstate(all="ignore"):
            combine(out.reshape(-1), lin[mask], upd[mask])
        return out[()]

    return impl


def _make_scatter_abstract_eval(name, kinds):
    def abstract_eval(
        operand_, indices, updates, *, dimension_numbers, indices_are_sorted, unique_indices, mode
    ):
        dn = dimension_numbers
        if not isinstance(dn, ScatterDimensionNumbers):
            raise TypeError(
                f"{name}: dimension_numbers must be a ScatterDimensionNumbers, got "
                f"{type(dn).__name__}"
            )
        _check_indices(name, indices)
        check_kinds(name, operand_.dtype, kinds)
        if updates.dtype != operand_.dtype:
            raise TypeError(
                f"{name}: updates dtype {updates.dtype.name} must equal the operand "
                f"dtype {operand_.dtype.name}"
            )
        batch_shape = indices.shape[:-1]
        if updates.ndim != len(batch_shape) + len(dn.update_window_dims):
            raise TypeError(
                f"{name}: updates must have rank {len(batch_shape)} (indices batch) "
                f"+ {len(dn.update_window_dims)} (update_window_dims) = "
                f"{len(batch_shape) + len(dn.update_window_dims)}, got shape "
                f"{updates.shape}"
            )
        _check_dims(name, "update_window_dims", dn.update_window_dims, updates.ndim)
        _check_dims(name, "inserted_window_dims", dn.inserted_window_dims, operand_.ndim)
        _check_dims(
            name,
            "scatter_dims_to_operand_dims",
            dn.scatter_dims_to_operand_dims,
            operand_.ndim,
            sorted_=False,
        )
        _check_batching(
            name,
            dn.operand_batching_dims,
            dn.scatter_indices_batching_dims,
            operand_.shape,
            indices.shape,
        )
        _check_disjoint(
            name,
            dn.inserted_window_dims,
            dn.operand_batching_dims,
            "inserted_window_dims",
            "operand_batching_dims",
        )
        _check_disjoint(
            name,
            dn.scatter_dims_to_operand_dims,
            dn.operand_batching_dims,
            "scatter_dims_to_operand_dims",
            "operand_batching_dims",
        )
        if len(dn.scatter_dims_to_operand_dims) != indices.shape[-1]:
            raise TypeError(
                f"{name}: scatter_dims_to_operand_dims "
                f"{dn.scatter_dims_to_operand_dims} has "
                f"{len(dn.scatter_dims_to_operand_dims)} entries but the index "
                f"vectors (last dimension of indices of shape {indices.shape}) "
                f"have {indices.shape[-1]}"
            )
        window_dims = _scatter_window_dims(operand_.ndim, dn)
        if len(window_dims) != len(dn.update_window_dims):
            raise TypeError(
                f"{name}: the window has {len(dn.update_window_dims)} "
                f"update_window_dims + {len(dn.inserted_window_dims)} "
                f"inserted_window_dims + {len(dn.operand_batching_dims)} batching "
                f"dims, which must equal the operand rank {operand_.ndim}"
            )
        for d, ud in zip(window_dims, dn.update_window_dims):
            if updates.shape[ud] > operand_.shape[d]:
                raise TypeError(
                    f"{name}: updates window dimension {ud} has size "
                    f"{updates.shape[ud]}, larger than operand dimension {d} of "
                    f"size {operand_.shape[d]}"
                )
        scatter_sizes = tuple(
            s for i, s in enumerate(updates.shape) if i not in dn.update_window_dims
        )
        if scatter_sizes != batch_shape:
            raise TypeError(
                f"{name}: the scatter dimensions of updates (shape "
                f"{updates.shape}) have sizes {scatter_sizes}, which must equal the "
                f"batch dimensions of indices {batch_shape}"
            )
        if not isinstance(mode, GatherScatterMode):
            raise TypeError(f"{name}: mode must be a GatherScatterMode, got {mode!r}")
        return ShapedArray(operand_.shape, operand_.dtype, operand_.weak_type)

    return abstract_eval


def _scatter_primitive(name, combine, kinds):
    return standard_primitive(
        name, _make_scatter_impl(combine), _make_scatter_abstract_eval(name, kinds)
    )


scatter_p = _scatter_primitive("scatter", _scatter_combine_set, ANY_OR_COMPLEX)
scatter_add_p = _scatter_primitive("scatter-add", np.add.at, NUMERIC_OR_COMPLEX)
scatter_mul_p = _scatter_primitive("scatter-mul", np.multiply.at, NUMERIC_OR_COMPLEX)


def _extremum_at(ufunc, complex_fn):
    """``ufunc.at``, except for complex values: XLA's lexicographic max/min (``complex_fn``,
    which takes the update where a comparison meets a NaN; numpy's propagates NaN), applied
    update by update in index order."""

    def combine(flat, lin, vals):
        if dtypes.kind(flat.dtype) != "c":
            return ufunc.at(flat, lin, vals)
        for i, v in zip(lin.tolist(), vals):
            flat[i] = complex_fn(flat[i], v)

    return combine


scatter_min_p = _scatter_primitive(
    "scatter-min", _extremum_at(np.minimum, complex_math.minimum), ANY_OR_COMPLEX
)
scatter_max_p = _scatter_primitive(
    "scatter-max", _extremum_at(np.maximum, complex_math.maximum), ANY_OR_COMPLEX
)


def _scatter_dnums(name, dn) -> ScatterDimensionNumbers:
    if not isinstance(dn, ScatterDimensionNumbers):
        raise TypeError(
            f"{name}: dimension_numbers must be a ScatterDimensionNumbers, got {type(dn).__name__}"
        )
    return ScatterDimensionNumbers(*(tuple(int(d) for d in f) for f in dn))


def _bind_scatter(
    prim,
    name,
    operand_,
    scatter_indices,
    updates,
    dimension_numbers,
    indices_are_sorted,
    unique_indices,
    mode,
):
    x = operand(operand_, name)
    idx = operand(scatter_indices, name)
    if isinstance(updates, (bool, int, float, complex)) and not isinstance(updates, np.generic):
        upd = full_like_scalar(updates, x)
    else:
        upd = operand(updates, name)
    return prim.bind(
        x,
        idx,
        upd,
        dimension_numbers=_scatter_dnums(name, dimension_numbers),
        indices_are_sorted=bool(indices_are_sorted),
        unique_indices=bool(unique_indices),
        mode=GatherScatterMode.from_any(mode),
    )


_SCATTER_DOC = """{what} ``updates`` into ``operand_`` at ``scatter_indices`` (XLA's Scatter).

    Args:
      operand_: the array to update (not modified; a new array is returned).
      scatter_indices: integer array whose last dimension is the index vector.
      updates: the windows to write, of ``operand_``'s dtype.
      dimension_numbers: a :class:`ScatterDimensionNumbers`.
      indices_are_sorted, unique_indices: hints (not checked).
      mode: a :class:`GatherScatterMode` or string; None means FILL_OR_DROP (out-of-bounds
        windows are dropped), "clip" clamps them into bounds.

    Returns:
      ``operand_`` with the updates {how}.

    Example::

      dn = ScatterDimensionNumbers((), (0,), (0,))
      {fn}(x, idx[:, None], vals, dn)
    """


def scatter(
    operand_,
    scatter_indices,
    updates,
    dimension_numbers: ScatterDimensionNumbers,
    *,
    indices_are_sorted: bool = False,
    unique_indices: bool = False,
    mode=None,
):
    return _bind_scatter(
        scatter_p,
        "scatter",
        operand_,
        scatter_indices,
        updates,
        dimension_numbers,
        indices_are_sorted,
        unique_indices,
        mode,
    )


def scatter_add(
    operand_,
    scatter_indices,
    updates,
    dimension_numbers: ScatterDimensionNumbers,
    *,
    indices_are_sorted: bool = False,
    unique_indices: bool = False,
    mode=None,
):
    return _bind_scatter(
        scatter_add_p,
        "scatter_add",
        operand_,
        scatter_indices,
        updates,
        dimension_numbers,
        indices_are_sorted,
        unique_indices,
        mode,
    )


def scatter_mul(
    operand_,
    scatter_indices,
    updates,
    dimension_numbers: ScatterDimensionNumbers,
    *,
    indices_are_sorted: bool = False,
    unique_indices: bool = False,
    mode=None,
):
    return _bind_scatter(
        scatter_mul_p,
        "scatter_mul",
        operand_,
        scatter_indices,
        updates,
        dimension_numbers,
        indices_are_sorted,
        unique_indices,
        mode,
    )


def scatter_min(
    operand_,
    scatter_indices,
    updates,
    dimension_numbers: ScatterDimensionNumbers,
    *,
    indices_are_sorted: bool = False,
    unique_indices: bool = False,
    mode=None,
):
    return _bind_scatter(
        scatter_min_p,
        "scatter_min",
        operand_,
        scatter_indices,
        updates,
        dimension_numbers,
        indices_are_sorted,
        unique_indices,
        mode,
    )


def scatter_max(
    operand_,
    scatter_indices,
    updates,
    dimension_numbers: ScatterDimensionNumbers,
    *,
    indices_are_sorted: bool = False,
    unique_indices: bool = False,
    mode=None,
):
    return _bind_scatter(
        scatter_max_p,
        "scatter_max",
        operand_,
        scatter_indices,
        updates,
        dimension_numbers,
        indices_are_sorted,
        unique_indices,
        mode,
    )


scatter.__doc__ = _SCATTER_DOC.format(
    what="Write", how="written (with duplicate indices, one of the writers wins)", fn="scatter"
)
scatter_add.__doc__ = _SCATTER_DOC.format(
    what="Add", how="added (duplicate indices accumulate)", fn="scatter_add"
)
scatter_mul.__doc__ = _SCATTER_DOC.format(
    what="Multiply", how="multiplied in (duplicate indices accumulate)", fn="scatter_mul"
)
scatter_min.__doc__ = _SCATTER_DOC.format(
    what="Take the minimum with", how="combined by minimum (NaN propagates)", fn="scatter_min"
)
scatter_max.__doc__ = _SCATTER_DOC.format(
    what="Take the maximum with", how="combined by maximum (NaN propagates)", fn="scatter_max"
)


# -- rules: shared helpers ------------------------------------------------------------------------
#
# Out-of-bounds handling is what ties the rules together. A gather and a scatter "read" and
# "write" the same windows when their modes agree on out-of-bounds windows:
#
# * a FILL_OR_DROP gather reads nothing for a window that does not fit (its fill), and a
#   FILL_OR_DROP or PROMISE_IN_BOUNDS scatter writes nothing for it (the impls drop it);
# * a CLIP or PROMISE_IN_BOUNDS gather clamps the window into bounds (the impl clamps), and so
#   does a CLIP scatter.
#
# So a scatter's inverse gather (the id trick, the extremal and scatter-mul rules) fills with 0
# when the scatter drops and clamps when it clamps: a dropped update gets a zero derivative.
#
# The linear pair gather / scatter-add transpose as JAX transposes them, into each other with
# the *same* mode (jax/_src/lax/slicing.py): FILL_OR_DROP and CLIP are exact adjoints, but a
# PROMISE_IN_BOUNDS gather (``x[idx]``'s mode) clamps while its transpose, a PROMISE_IN_BOUNDS
# scatter-add, drops. So, as in JAX, an out-of-bounds read of ``x[idx]`` gets its clamped value
# and no gradient (grad of ``sum(v[[0, 5]])`` for ``v`` of shape (1,) is 1, not 2), and an
# update a PROMISE_IN_BOUNDS scatter-add drops gets the cotangent of the clamped position.


def _aval(x) -> ShapedArray:
    return x.aval if is_undefined_primal(x) else core.get_aval(x)


def _gather_mode_of_scatter(mode: GatherScatterMode) -> GatherScatterMode:
    """The gather mode that reads exactly the windows a scatter of ``mode`` writes."""
    return (
        GatherScatterMode.CLIP if mode is GatherScatterMode.CLIP else GatherScatterMode.FILL_OR_DROP
    )


def _gather_to_scatter_dnums(dn: GatherDimensionNumbers) -> ScatterDimensionNumbers:
    return ScatterDimensionNumbers(
        update_window_dims=dn.offset_dims,
        inserted_window_dims=dn.collapsed_slice_dims,
        scatter_dims_to_operand_dims=dn.start_index_map,
        operand_batching_dims=dn.operand_batching_dims,
        scatter_indices_batching_dims=dn.start_indices_batching_dims,
    )


def _scatter_to_gather_dnums(dn: ScatterDimensionNumbers) -> GatherDimensionNumbers:
    return GatherDimensionNumbers(
        offset_dims=dn.update_window_dims,
        collapsed_slice_dims=dn.inserted_window_dims,
        start_index_map=dn.scatter_dims_to_operand_dims,
        operand_batching_dims=dn.operand_batching_dims,
        start_indices_batching_dims=dn.scatter_indices_batching_dims,
    )


def _read_windows(
    x,
    indices,
    dn: ScatterDimensionNumbers,
    updates_shape,
    mode,
    *,
    indices_are_sorted=False,
    unique_indices=False,
    gather_mode=None,
):
    """The gather inverse to a scatter: for every element of the scatter's ``updates``, the
    element of the operand-shaped ``x`` it is written to (0 where the scatter drops it), or,
    given ``gather_mode``, the element that gather mode reads there."""
    window = iter(updates_shape[d] for d in dn.update_window_dims)
    sizes = tuple(
        1 if d in dn.inserted_window_dims or d in dn.operand_batching_dims else next(window)
        for d in range(_aval(x).ndim)
    )
    gmode = _gather_mode_of_scatter(mode) if gather_mode is None else gather_mode
    return gather_p.bind(
        x,
        indices,
        dimension_numbers=_scatter_to_gather_dnums(dn),
        slice_sizes=sizes,
        indices_are_sorted=indices_are_sorted,
        unique_indices=unique_indices,
        mode=gmode,
        fill_value=0 if gmode is GatherScatterMode.FILL_OR_DROP else None,
    )


def _zeros(aval: ShapedArray, dtype=None):
    return shape_ops.full(aval.shape, 0, aval.dtype if dtype is None else dtype)


def _ones(aval: ShapedArray, dtype=None):
    return shape_ops.full(aval.shape, 1, aval.dtype if dtype is None else dtype)


def _where(pred, x, y):
    return elementwise.select_n(pred, y, x)


def _safe_reciprocal(n):
    """``1 / n`` for the nonnegative counts ``n``, with 0 where ``n`` is 0 (no inf, so the
    derivative coefficients built from it never produce NaN)."""
    one = _ones(core.get_aval(n))
    return _where(
        elementwise.ne(n, _zeros(core.get_aval(n))),  # (ne: counts may be complex-typed)
        elementwise.div(one, elementwise.max(n, one)),
        _zeros(core.get_aval(n)),
    )


def _winning_updates(operand_aval, indices, updates_aval, dn, mode, indices_are_sorted):
    """JAX's id trick for a scatter with possibly repeated indices: scatter a distinct positive id
    per index vector, then read the ids back. Returns ``(kept, won)``: ``kept`` (operand-shaped)
    is True where no update is written, ``won`` (updates-shaped) is True for the update element
    that the scatter keeps at its position (False for losing and dropped ones)."""
    id_dtype = np.dtype(np.int32)
    scatter_dims = tuple(d for d in range(updates_aval.ndim) if d not in dn.update_window_dims)
    batch_shape = tuple(updates_aval.shape[d] for d in scatter_dims)
    n = int(np.prod(batch_shape, dtype=np.int64))
    if n >= np.iinfo(id_dtype).max:
        raise ValueError(
            f"scatter: {n} index vectors are too many to differentiate a scatter "
            "with repeated indices (at most 2**31 - 2)"
        )
    ids = shape_ops.reshape(elementwise.add(shape_ops.iota(id_dtype, n), 1), batch_shape)
    ids = shape_ops.broadcast_in_dim(ids, updates_aval.shape, scatter_dims)
    scattered = scatter_p.bind(
        _zeros(operand_aval, id_dtype),
        indices,
        ids,
        dimension_numbers=dn,
        indices_are_sorted=indices_are_sorted,
        unique_indices=False,
        mode=mode,
    )
    read_back = _read_windows(scattered, indices, dn, updates_aval.shape, mode)
    kept = elementwise.eq(scattered, _zeros(operand_aval, id_dtype))
    return kept, elementwise.eq(ids, read_back)


def _insert_dim(dims, pos: int) -> tuple[int, ...]:
    """``dims`` renumbered after a new dimension is inserted at ``pos``."""
    return tuple(d + (d >= pos) for d in dims)


def _slot(sorted_dims, k: int, rank: int) -> tuple[int, int]:
    """The positions ``(lo, hi)`` (inclusive) where a new dimension can be inserted into a
    rank-``rank`` array so that exactly ``k`` of ``sorted_dims`` come before it."""
    lo = sorted_dims[k - 1] + 1 if k > 0 else 0
    hi = sorted_dims[k] if k < len(sorted_dims) else rank
    return lo, hi


def _broadcast_at(x, axis_size: int, pos: int):
    """``x`` broadcast along a new dimension of size ``axis_size`` at ``pos``."""
    shp = core.get_aval(x).shape
    return shape_ops.broadcast_in_dim(
        x, shp[:pos] + (axis_size,) + shp[pos:], _insert_dim(range(len(shp)), pos)
    )


def _batch_dim_at(x, bdim, axis_size: int, lo: int, hi: int):
    """``x`` with its batch dimension somewhere in ``[lo, hi]``: kept where it is if it already
    is, else moved (or, unbatched, broadcast) to ``lo``. Returns ``(x, bdim)``."""
    if bdim is None:
        return _broadcast_at(x, axis_size, lo), lo
    if lo <= bdim <= hi:
        return x, bdim
    return moveaxis(x, bdim, lo), lo


# -- gather rules ---------------------------------------------------------------------------------


def _gather_jvp(
    t,
    operand_,
    indices,
    *,
    dimension_numbers,
    slice_sizes,
    indices_are_sorted,
    unique_indices,
    mode,
    fill_value,
):
    # Linear in the operand; filled (out-of-bounds) windows have a zero tangent.
    return gather_p.bind(
        t,
        indices,
        dimension_numbers=dimension_numbers,
        slice_sizes=slice_sizes,
        indices_are_sorted=indices_are_sorted,
        unique_indices=unique_indices,
        mode=mode,
        fill_value=0 if mode is GatherScatterMode.FILL_OR_DROP else None,
    )


def _gather_transpose(
    ct,
    operand_,
    indices,
    *,
    dimension_numbers,
    slice_sizes,
    indices_are_sorted,
    unique_indices,
    mode,
    fill_value,
):
    # JAX's _gather_transpose_rule: add every read window's cotangent back where it was read
    # (repeated reads accumulate), in the gather's mode (see the rules section on modes).
    zeros = _zeros(operand_.aval, core.get_aval(ct).dtype)
    out = scatter_add_p.bind(
        zeros,
        indices,
        ct,
        dimension_numbers=_gather_to_scatter_dnums(dimension_numbers),
        indices_are_sorted=indices_are_sorted,
        unique_indices=unique_indices,
        mode=mode,
    )
    return [out, None]


def _gather_batch(
    axis_size,
    args,
    dims,
    *,
    dimension_numbers,
    slice_sizes,
    indices_are_sorted,
    unique_indices,
    mode,
    fill_value,
):
    # JAX's _gather_batching_rule, but the batch dims stay where they are: the dimension
    # numbers are renumbered around them instead of transposing the data.
    (x, idx), (xd, idd) = args, dims
    dn = dimension_numbers
    if idd is not None and idd == core.get_aval(idx).ndim - 1:
        idx, idd = moveaxis(idx, idd, 0), 0  # the index-vector dimension must stay last
    idx_rank = core.get_aval(idx).ndim - (idd is not None)
    out_rank = idx_rank - 1 + len(dn.offset_dims)
    batch_out = [p for p in range(out_rank) if p not in dn.offset_dims]
    params = dict(
        indices_are_sorted=indices_are_sorted,
        unique_indices=unique_indices,
        mode=mode,
        fill_value=fill_value,
    )
    if idd is None:
        # Only the operand is batched: its batch dim is one more offset (window) dimension.
        x_rank = core.get_aval(x).ndim - 1
        window = [
            d
            for d in range(x_rank)
            if d not in dn.collapsed_slice_dims and d not in dn.operand_batching_dims
        ]
        out_d, _ = _slot(dn.offset_dims, sum(1 for d in window if d < xd), out_rank)
        new = GatherDimensionNumbers(
            offset_dims=tuple(sorted(_insert_dim(dn.offset_dims, out_d) + (out_d,))),
            collapsed_slice_dims=_insert_dim(dn.collapsed_slice_dims, xd),
            start_index_map=_insert_dim(dn.start_index_map, xd),
            operand_batching_dims=_insert_dim(dn.operand_batching_dims, xd),
            start_indices_batching_dims=dn.start_indices_batching_dims,
        )
        sizes = slice_sizes[:xd] + (axis_size,) + slice_sizes[xd:]
        return gather_p.bind(x, idx, dimension_numbers=new, slice_sizes=sizes, **params), out_d
    # The indices are batched: their batch dim is one more batch dim of the output, placed
    # among the output's batch dims as it is among the indices' batch dims.
    out_d, _ = _slot(batch_out, idd, out_rank)
    offset_dims = _insert_dim(dn.offset_dims, out_d)
    sibd = _insert_dim(dn.start_indices_batching_dims, idd)
    if xd is None:
        # Examples may now read the same windows: the hints no longer hold.
        params.update(indices_are_sorted=False, unique_indices=False)
        new = dn._replace(offset_dims=offset_dims, start_indices_batching_dims=sibd)
        return gather_p.bind(
            x, idx, dimension_numbers=new, slice_sizes=slice_sizes, **params
        ), out_d
    # Both batched: the two batch dims are paired batching dimensions.
    j = sum(1 for d in dn.operand_batching_dims if d < xd)
    obd = _insert_dim(dn.operand_batching_dims, xd)
    new = GatherDimensionNumbers(
        offset_dims=offset_dims,
        collapsed_slice_dims=_insert_dim(dn.collapsed_slice_dims, xd),
        start_index_map=_insert_dim(dn.start_index_map, xd),
        operand_batching_dims=obd[:j] + (xd,) + obd[j:],
        start_indices_batching_dims=sibd[:j] + (idd,) + sibd[j:],
    )
    sizes = slice_sizes[:xd] + (1 if axis_size else 0,) + slice_sizes[xd:]
    return gather_p.bind(x, idx, dimension_numbers=new, slice_sizes=sizes, **params), out_d


defjvp(gather_p, _gather_jvp, None)  # the integer indices have no derivative
deflinear_transpose(gather_p, _gather_transpose)
batch_rules[gather_p] = _gather_batch


# -- scatter rules --------------------------------------------------------------------------------


def _scatter_batch(
    prim, axis_size, args, dims, *, dimension_numbers, indices_are_sorted, unique_indices, mode
):
    # JAX's _scatter_batching_rule with the batch dims kept in place where the layout allows.
    # The output is batched, so the operand is (broadcast if it is not).
    (x, idx, upd), (xd, idd, ud) = args, dims
    dn = dimension_numbers
    if idd is not None and idd == core.get_aval(idx).ndim - 1:
        idx, idd = moveaxis(idx, idd, 0), 0  # the index-vector dimension must stay last
    x_rank = core.get_aval(x).ndim - (xd is not None)
    u_rank = core.get_aval(upd).ndim - (ud is not None)
    params = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode)
    if idd is None:
        # One index set for all examples: the batch dim is one more window dimension, the
        # k-th of the operand's window dims and of the updates' update_window_dims alike.
        window = [
            d
            for d in range(x_rank)
            if d not in dn.inserted_window_dims and d not in dn.operand_batching_dims
        ]
        if xd is None:
            k = sum(1 for d in dn.update_window_dims if d < ud)
            x, xd = _batch_dim_at(x, None, axis_size, *_slot(window, k, x_rank))
        else:
            k = sum(1 for d in window if d < xd)
        upd, ud = _batch_dim_at(upd, ud, axis_size, *_slot(dn.update_window_dims, k, u_rank))
        new = ScatterDimensionNumbers(
            update_window_dims=tuple(sorted(_insert_dim(dn.update_window_dims, ud) + (ud,))),
            inserted_window_dims=_insert_dim(dn.inserted_window_dims, xd),
            scatter_dims_to_operand_dims=_insert_dim(dn.scatter_dims_to_operand_dims, xd),
            operand_batching_dims=_insert_dim(dn.operand_batching_dims, xd),
            scatter_indices_batching_dims=dn.scatter_indices_batching_dims,
        )
        return prim.bind(x, idx, upd, dimension_numbers=new, **params), xd
    # Batched indices: the batch dim pairs the operand's batch dim with the indices' (a
    # batching dimension) and is a scatter dim of the updates, placed among them as it is among
    # the indices' batch dims. Examples write disjoint parts, so the hints still hold.
    if xd is None:
        x, xd = _broadcast_at(x, axis_size, 0), 0
    scatter_dims = [d for d in range(u_rank) if d not in dn.update_window_dims]
    upd, ud = _batch_dim_at(upd, ud, axis_size, *_slot(scatter_dims, idd, u_rank))
    j = sum(1 for d in dn.operand_batching_dims if d < xd)
    obd = _insert_dim(dn.operand_batching_dims, xd)
    sibd = _insert_dim(dn.scatter_indices_batching_dims, idd)
    new = ScatterDimensionNumbers(
        update_window_dims=_insert_dim(dn.update_window_dims, ud),
        inserted_window_dims=_insert_dim(dn.inserted_window_dims, xd),
        scatter_dims_to_operand_dims=_insert_dim(dn.scatter_dims_to_operand_dims, xd),
        operand_batching_dims=obd[:j] + (xd,) + obd[j:],
        scatter_indices_batching_dims=sibd[:j] + (idd,) + sibd[j:],
    )
    return prim.bind(x, idx, upd, dimension_numbers=new, **params), xd


def _def_scatter_batch(prim):
    def rule(axis_size, args, dims, **params):
        return _scatter_batch(prim, axis_size, args, dims, **params)

    batch_rules[prim] = rule


def _zero_tangent_of(out):
    return Zero(tangent_aval(core.get_aval(out)))


def _scatter_add_jvp(primals, tangents, **params):
    # Linear in operand and updates jointly (JAX's _scatter_addsub_jvp).
    x, idx, upd = primals
    gx, _, gu = tangents
    out = scatter_add_p.bind(x, idx, upd, **params)
    if type(gx) is Zero and type(gu) is Zero:
        return out, _zero_tangent_of(out)
    return out, scatter_add_p.bind(instantiate_zeros(gx), idx, instantiate_zeros(gu), **params)


def _scatter_add_transpose(
    ct, x, idx, upd, *, dimension_numbers, indices_are_sorted, unique_indices, mode
):
    # JAX's _scatter_add_transpose_rule: the operand's cotangent passes through; each update
    # element gets the cotangent its window reads in the same mode (0 where FILL_OR_DROP drops
    # it, the clamped position's under CLIP and PROMISE_IN_BOUNDS; see the rules section).
    ct_x = ct if is_undefined_primal(x) else None
    ct_u = None
    if is_undefined_primal(upd):
        ct_u = _read_windows(
            ct,
            idx,
            dimension_numbers,
            upd.aval.shape,
            mode,
            indices_are_sorted=indices_are_sorted,
            unique_indices=unique_indices,
            gather_mode=mode,
        )
    return [ct_x, None, ct_u]


def _scatter_jvp(primals, tangents, *, dimension_numbers, indices_are_sorted, unique_indices, mode):
    # JAX's _scatter_jvp. With unique indices a scatter is linear in (operand, updates): scatter
    # the tangents. With repeated indices which update wins is the impl's choice, so find the
    # winners with scattered ids and compute primal and tangent as scatter-adds of the masked
    # values: the two then always agree on the winner.
    x, idx, upd = primals
    gx, _, gu = tangents
    params = dict(
        dimension_numbers=dimension_numbers,
        indices_are_sorted=indices_are_sorted,
        unique_indices=unique_indices,
        mode=mode,
    )
    if type(gx) is Zero and type(gu) is Zero:
        out = scatter_p.bind(x, idx, upd, **params)
        return out, _zero_tangent_of(out)
    gx, gu = instantiate_zeros(gx), instantiate_zeros(gu)
    if unique_indices:
        return scatter_p.bind(x, idx, upd, **params), scatter_p.bind(gx, idx, gu, **params)
    x_aval, u_aval = core.get_aval(x), core.get_aval(upd)
    kept, won = _winning_updates(x_aval, idx, u_aval, dimension_numbers, mode, indices_are_sorted)

    def masked_scatter(a, b):
        a = _where(kept, a, _zeros(core.get_aval(a)))
        b = _where(won, b, _zeros(core.get_aval(b)))
        return scatter_add_p.bind(a, idx, b, **params)

    return masked_scatter(x, upd), masked_scatter(gx, gu)


def _scatter_transpose(
    ct, x, idx, upd, *, dimension_numbers, indices_are_sorted, unique_indices, mode
):
    # With the indices fixed, a scatter is linear in (operand, updates): the operand's cotangent
    # is ct with the written positions zeroed, an update element gets the cotangent of its
    # position if it is the one written there (the id trick finds it under repeated indices).
    u_shape = _aval(upd).shape
    ct_x = ct_u = None
    if is_undefined_primal(x):
        ct_x = scatter_p.bind(
            ct,
            idx,
            shape_ops.full(u_shape, 0, core.get_aval(ct).dtype),
            dimension_numbers=dimension_numbers,
            indices_are_sorted=indices_are_sorted,
            unique_indices=True,
            mode=mode,
        )
    if is_undefined_primal(upd):
        ct_u = _read_windows(
            ct,
            idx,
            dimension_numbers,
            u_shape,
            mode,
            indices_are_sorted=indices_are_sorted,
            unique_indices=unique_indices,
        )
        if not unique_indices:
            _, won = _winning_updates(
                _aval(x), idx, upd.aval, dimension_numbers, mode, indices_are_sorted
            )
            ct_u = _where(won, ct_u, _zeros(core.get_aval(ct_u)))
    return [ct_x, None, ct_u]


_SCATTER_MUL_UPDATES_LIMIT = (
    "scatter-mul: differentiation with respect to `updates` is only implemented for "
    "unique_indices=True (as in JAX): with repeated indices, the derivative of one update is "
    "the product of the other updates written to its position. If the indices do not repeat, "
    "pass unique_indices=True (e.g. x.at[idx].multiply(y, unique_indices=True)); otherwise "
    "differentiate with respect to the operand only, or write the product with other "
    "operations."
)


def _scatter_mul_jvp(
    primals, tangents, *, dimension_numbers, indices_are_sorted, unique_indices, mode
):
    # JAX's rule: linear in the operand (scatter-mul the tangent by the same updates); in the
    # updates only with unique indices, where out = x * y at each written position.
    x, idx, upd = primals
    gx, _, gu = tangents
    params = dict(
        dimension_numbers=dimension_numbers,
        indices_are_sorted=indices_are_sorted,
        unique_indices=unique_indices,
        mode=mode,
    )
    out = scatter_mul_p.bind(x, idx, upd, **params)
    tangent = _zero_tangent_of(out)
    if type(gx) is not Zero:
        tangent = scatter_mul_p.bind(gx, idx, upd, **params)
    if type(gu) is not Zero:
        if not unique_indices:
            raise TypeError(_SCATTER_MUL_UPDATES_LIMIT)
        spread = scatter_add_p.bind(_zeros(tangent_aval(core.get_aval(x))), idx, gu, **params)
        tangent = add_tangents(tangent, elementwise.mul(x, spread))
    return out, tangent


def _scatter_mul_transpose(
    ct, x, idx, upd, *, dimension_numbers, indices_are_sorted, unique_indices, mode
):
    # Linear in the operand when the updates are fixed (and in the updates, for unique
    # indices, when the operand is fixed).
    params = dict(
        dimension_numbers=dimension_numbers,
        indices_are_sorted=indices_are_sorted,
        unique_indices=unique_indices,
        mode=mode,
    )
    if is_undefined_primal(x) and is_undefined_primal(upd):
        raise TypeError(
            "scatter-mul is not linear in operand and updates together; it can be "
            "transposed in one of them with the other fixed"
        )
    ct_x = ct_u = None
    if is_undefined_primal(x):
        ct_x = scatter_mul_p.bind(ct, idx, upd, **params)
    else:
        if not unique_indices:
            raise TypeError(_SCATTER_MUL_UPDATES_LIMIT)
        ct_u = _read_windows(
            elementwise.mul(ct, x),
            idx,
            dimension_numbers,
            upd.aval.shape,
            mode,
            indices_are_sorted=indices_are_sorted,
            unique_indices=unique_indices,
        )
    return [ct_x, None, ct_u]


def _make_scatter_extremal_jvp(prim):
    def jvp(primals, tangents, *, dimension_numbers, indices_are_sorted, unique_indices, mode):
        # JAX's _scatter_extremal_jvp: at each position, the tangent is the average of the
        # tangents of every contender (operand and update elements) equal to the result.
        x, idx, upd = primals
        gx, _, gu = tangents
        params = dict(
            dimension_numbers=dimension_numbers,
            indices_are_sorted=indices_are_sorted,
            unique_indices=unique_indices,
            mode=mode,
        )
        out = prim.bind(x, idx, upd, **params)
        if type(gx) is Zero and type(gu) is Zero:
            return out, _zero_tangent_of(out)
        gx, gu = instantiate_zeros(gx), instantiate_zeros(gu)
        x_aval, u_aval = tangent_aval(core.get_aval(x)), tangent_aval(core.get_aval(upd))

        def read(v):
            return _read_windows(v, idx, dimension_numbers, u_aval.shape, mode)

        def count(mask):  # per update element: how many masked update elements share its spot
            ones = elementwise.convert_element_type(mask, u_aval.dtype)
            return read(scatter_add_p.bind(_zeros(x_aval), idx, ones, **params))

        target = read(out)
        won = elementwise.eq(upd, target)
        kept = elementwise.eq(read(x), target)
        share = _safe_reciprocal(
            elementwise.add(count(won), elementwise.convert_element_type(kept, u_aval.dtype))
        )
        u_coef = _where(won, share, _zeros(u_aval))
        x_coef = _where(kept, share, _zeros(u_aval))
        # Each of the n_refs update elements at a position adds gx * (x_coef - 1) / n_refs,
        # which turns the operand's tangent there into gx * x_coef (dropped elements: 0).
        n_refs = count(_ones(u_aval, np.dtype(bool)))
        x_adj = elementwise.mul(elementwise.sub(x_coef, _ones(u_aval)), _safe_reciprocal(n_refs))
        t_upd = elementwise.add(elementwise.mul(read(gx), x_adj), elementwise.mul(gu, u_coef))
        return out, scatter_add_p.bind(gx, idx, t_upd, **params)

    return jvp


jvp_rules[scatter_add_p] = _scatter_add_jvp
deflinear_transpose(scatter_add_p, _scatter_add_transpose)
jvp_rules[scatter_p] = _scatter_jvp
deflinear_transpose(scatter_p, _scatter_transpose)
jvp_rules[scatter_mul_p] = _scatter_mul_jvp
deflinear_transpose(scatter_mul_p, _scatter_mul_transpose)
jvp_rules[scatter_min_p] = _make_scatter_extremal_jvp(scatter_min_p)
jvp_rules[scatter_max_p] = _make_scatter_extremal_jvp(scatter_max_p)
for _p in (scatter_p, scatter_add_p, scatter_mul_p, scatter_min_p, scatter_max_p):
    _def_scatter_batch(_p)
del _p


# -- lowering (fungrad/lowering/kernel.py) ------------------------------------------------------
#
# A gather is index arithmetic: each output element reads its window's start indices from
# ``indices`` and loads the operand there (clamped, so every load is in bounds), selecting the
# fill value for windows that do not fit under FILL_OR_DROP. A scatter copies the operand into
# the output buffer (a kernel that fuses the operand's computation), then runs one sequential
# loop nest over the updates in the impl's order (index vectors in row-major order, then the
# window), storing each update with a read-modify-write for the combining scatters; under
# FILL_OR_DROP / PROMISE_IN_BOUNDS a store is masked off when its window does not fit. So
# duplicate indices combine in the impl's order and a plain scatter's last writer wins.


def _window_starts(ctx, indices, batch_idx, ndim, index_map, operand_batching, indices_batching):
    """Per operand dimension, the window start of index vector ``batch_idx`` (int64 exprs):
    read from ``indices`` for the mapped dimensions, the batch position for batching ones."""
    starts = [ctx.iconst(0)] * ndim
    for k, d in enumerate(index_map):
        starts[d] = ctx.convert(indices.at((*batch_idx, ctx.iconst(k))), kernel.INDEX)
    for od, bd in zip(operand_batching, indices_batching):
        starts[od] = batch_idx[bd]
    return starts


def _fits(ctx, starts, upper, dims):
    """True where every start in ``dims`` lies in ``[0, upper[d]]`` (None: no dims)."""
    ok = None
    for d in dims:
        c = ctx.op(
            "and",
            ctx.op("ge", starts[d], ctx.iconst(0)),
            ctx.op("le", starts[d], ctx.iconst(upper[d])),
        )
        ok = c if ok is None else ctx.op("and", ok, c)
    return ok


def _gather_lowering(
    ctx,
    x,
    indices,
    *,
    dimension_numbers,
    slice_sizes,
    indices_are_sorted,
    unique_indices,
    mode,
    fill_value,
):
    dn = dimension_numbers
    batch_shape = indices.shape[:-1]
    window_dims = _gather_window_dims(x.ndim, dn)
    out_rank = len(batch_shape) + len(dn.offset_dims)
    batch_pos = [p for p in range(out_rank) if p not in dn.offset_dims]
    window = iter(slice_sizes[d] for d in window_dims)
    batch = iter(batch_shape)
    shape = tuple(next(window) if p in dn.offset_dims else next(batch) for p in range(out_rank))
    upper = [n - s for n, s in zip(x.shape, slice_sizes)]
    fill = None
    if mode == GatherScatterMode.FILL_OR_DROP:
        fv = _default_fill_value(x.dtype) if fill_value is None else fill_value
        with np.errstate(all="ignore"):
            fill = np.asarray(fv).astype(x.dtype)[()]

    def element(idx):
        b = tuple(idx[p] for p in batch_pos)
        starts = _window_starts(
            ctx,
            indices,
            b,
            x.ndim,
            dn.start_index_map,
            dn.operand_batching_dims,
            dn.start_indices_batching_dims,
        )
        valid = None if fill is None else _fits(ctx, starts, upper, dn.start_index_map)
        offsets = iter(idx[p] for p in dn.offset_dims)
        pos = []
        for d in range(x.ndim):
            s = starts[d]
            if d not in dn.operand_batching_dims:  # batch positions are always in range
                s = kernel.clamp_index(ctx, s, 0, max(upper[d], 0))
            pos.append(ctx.iadd(s, next(offsets)) if d in window_dims else s)
        v = x.at(pos)
        return v if valid is None else ctx.select(valid, v, ctx.const(fill, x.dtype))

    return kernel.from_fn(shape, x.dtype, element, "gather")


def _scatter_lowering(name: str, combine: str | None):
    def rule(
        ctx, x, indices, updates, *, dimension_numbers, indices_are_sorted, unique_indices, mode
    ):
        dn = dimension_numbers
        # the output starts as a copy of the operand (its computation fuses into the copy)
        out = ctx.materialize(kernel.from_fn(x.shape, x.dtype, x.at, name)).buffer
        scatter_dims = [d for d in range(updates.ndim) if d not in dn.update_window_dims]
        loop_dims = scatter_dims + list(dn.update_window_dims)  # the impl's order
        window_dims = _scatter_window_dims(x.ndim, dn)
        sizes = [1] * x.ndim
        for d, ud in zip(window_dims, dn.update_window_dims):
            sizes[d] = updates.shape[ud]
        upper = [n - s for n, s in zip(x.shape, sizes)]
        clip = mode == GatherScatterMode.CLIP
        mapped = dn.scatter_dims_to_operand_dims
        never = clip and any(upper[d] < 0 for d in mapped)  # no window fits, even clamped
        if updates.size == 0 or x.size == 0 or never:
            ctx.planner.flush()
            return ctx.planner.buffer_tensor(out, name)
        nb = len(scatter_dims)

        def stores(idx):
            b, w = idx[:nb], idx[nb:]
            uidx = [None] * updates.ndim
            for d, i in zip(loop_dims, idx):
                uidx[d] = i
            starts = _window_starts(
                ctx,
                indices,
                b,
                x.ndim,
                mapped,
                dn.operand_batching_dims,
                dn.scatter_indices_batching_dims,
            )
            mask = None if clip else _fits(ctx, starts, upper, mapped)
            offsets = iter(w)
            pos = []
            for d in range(x.ndim):
                s = starts[d]
                if d in mapped:  # clamp: CLIP's semantics, else keeps masked-off math in range
                    s = kernel.clamp_index(ctx, s, 0, max(upper[d], 0))
                pos.append(ctx.iadd(s, next(offsets)) if d in window_dims else s)
            return [Store(out, ctx.flat_index(pos, x.shape), updates.at(uidx), combine, mask)]

        append_kernel(
            ctx,
            name.replace("-", "_"),
            [updates.shape[d] for d in loop_dims],
            stores,
            parallel=False,
            origin=name,
        )
        return ctx.planner.buffer_tensor(out, name)

    return rule


kernel.register_lowering(gather_p, _gather_lowering)
for _p, _combine in (
    (scatter_p, None),
    (scatter_add_p, "add"),
    (scatter_mul_p, "mul"),
    (scatter_min_p, "min"),
    (scatter_max_p, "max"),
):
    kernel.register_lowering(_p, _scatter_lowering(_p.name, _combine))
del _p, _combine
