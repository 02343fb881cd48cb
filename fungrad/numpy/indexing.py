"""fungrad.numpy indexing: ``x[idx]``, ``x.at[idx]``, take, take_along_axis and friends.

NumPy's indexing rules with JAX's semantics:

* basic indices (static ints, slices of any step, None, Ellipsis) lower to ``slice``, ``rev``,
  ``squeeze`` and ``broadcast_in_dim``; out-of-bounds static ints clamp, as JAX does;
* integer arrays (and concrete boolean masks, turned into integer arrays) lower to one
  ``gather``; index arrays broadcast together, and their dimensions replace the indexed axes
  in place when the advanced indices are adjacent, or go first when they are separated
  (NumPy's rule). Negative indices wrap once; out-of-bounds indices clamp;
* ``x.at[idx].set/add/...`` lower to one ``scatter*``; out-of-bounds updates are dropped
  unless ``mode="clip"``.

Entry points: :func:`getitem` and :class:`IndexUpdateHelper` (installed as ``x[idx]`` and
``x.at`` by array_methods), take, take_along_axis, put, choose, select. (The ``*_indices``
helpers, ravel_multi_index, unravel_index and ix_ live in index_tricks.py; where, nonzero,
argwhere, flatnonzero, compress and extract in sorting.py, NumPy's "sorting, searching and
counting".)
"""

from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from fungrad import core, dtypes, lax
from fungrad.array import Array
from fungrad.lax import GatherDimensionNumbers, ScatterDimensionNumbers
from fungrad.numpy import util

if TYPE_CHECKING:
    from fungrad.typing import ArrayLike

__all__ = ["IndexUpdateHelper", "getitem", "take", "take_along_axis", "put", "choose", "select"]


# -- parsing an index expression ------------------------------------------------------------------


class _Entry(NamedTuple):
    """One component of a parsed index, consuming one axis of the (expanded) operand.

    kind: "newaxis" (consumes no axis), "gap" (where an Ellipsis stood: consumes no axis and
    adds no dimension, but separates advanced indices, as in NumPy), "slice" (value = (start,
    step, length)), "int" (value = static int) or "array" (value = integer array; ``static``
    when it came from a concrete boolean and is already in bounds).
    """

    kind: str
    dim: int = 1
    value: Any = None
    static: bool = False


class _Parsed(NamedTuple):
    entries: list
    scalar_bool_axes: tuple  # axes inserted into the operand for 0-d boolean indices
    expanded_shape: tuple  # the operand shape with those axes inserted


_NON_TUPLE_MSG = (
    "Using a non-tuple sequence for multidimensional indexing is not allowed; "
    "use `arr[tuple(seq)]` instead of `arr[seq]`"
)


def _index_items(idx) -> tuple:
    if isinstance(idx, tuple):
        return idx
    if isinstance(idx, list) and any(
        e is None or e is Ellipsis or isinstance(e, slice) for e in idx
    ):
        raise TypeError(_NON_TUPLE_MSG)
    return (idx,)


def _static_slice(s: slice):
    def part(v, what):
        if v is None:
            return None
        try:
            return operator.index(v)
        except core.ConcretizationTypeError:
            raise
        except TypeError:
            raise TypeError(
                f"slice {what} must be a static integer or None, got {type(v).__name__}: {v!r:.40}"
            ) from None

    step = part(s.step, "step")
    if step == 0:
        raise ValueError("slice step cannot be zero")
    return slice(part(s.start, "start"), part(s.stop, "stop"), step)


def _concrete_bool(arr, fun_name: str) -> np.ndarray:
    """The concrete value of a boolean index, or NonConcreteBooleanIndexError for a tracer."""
    if isinstance(arr, core.Tracer):
        val = arr.to_concrete_value()
        if val is None:
            raise core.NonConcreteBooleanIndexError(
                f"{fun_name}: boolean array indices must be concrete; got a traced "
                f"{arr.aval.str_short()}. The result shape would depend on traced values. Use "
                "fungrad.numpy.where(mask, x, other) to select values, or an argument such as "
                "size= (nonzero(mask, size=n)) to fix the result shape.\n"
                + core.concretization_message("a boolean index", arr.aval, arr)
            )
        return np.asarray(val, dtype=bool)
    return np.asarray(arr, dtype=bool)


def _classify(i, fun_name: str):
    """(kind, value) for one element of an index tuple."""
    if i is None:
        return "newaxis", None
    if i is Ellipsis:
        return "ellipsis", None
    if isinstance(i, slice):
        return "slice", _static_slice(i)
    if isinstance(i, (bool, np.bool_)):
        return "bool0", bool(i)
    if isinstance(i, (int, np.integer)):
        return "int", int(i)
    if isinstance(i, (str, bytes)):
        raise TypeError(f"{fun_name}: string indexing is not supported; got idx={i!r}")
    if isinstance(i, (list, tuple)):
        arr = Array(np.zeros(0, np.int32)) if len(i) == 0 else util.asarray(i, fun_name=fun_name)
    elif type(i) is Array or isinstance(i, (core.Tracer, np.ndarray, np.generic)):
        arr = i if type(i) is Array or isinstance(i, core.Tracer) else util.asarray(i)
    else:
        raise TypeError(
            f"{fun_name}: unsupported index of type {type(i).__name__}: {i!r:.60} "
            "(use ints, slices, None, Ellipsis, integer or boolean arrays)"
        )
    if dtypes.is_bool(arr.dtype):
        mask = _concrete_bool(arr, fun_name)
        return ("bool0", bool(mask)) if mask.ndim == 0 else ("mask", mask)
    if not dtypes.is_int(arr.dtype):
        raise TypeError(
            f"{fun_name}: indexer must have integer or boolean type, got indexer "
            f"with type {arr.dtype.name}"
        )
    return "array", arr


def _parse(shape, idx, fun_name: str = "indexing") -> _Parsed:
    items = [_classify(i, fun_name) for i in _index_items(idx)]
    n_ellipsis = sum(k == "ellipsis" for k, _ in items)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(
        1 if k in ("slice", "int", "array") else v.ndim if k == "mask" else 0 for k, v in items
    )
    if consumed > len(shape):
        raise IndexError(
            f"Too many indices: array is {len(shape)}-dimensional, but {consumed} were indexed"
        )
    fill = [("slice", slice(None))] * (len(shape) - consumed)
    if n_ellipsis:
        at = next(j for j, (k, _) in enumerate(items) if k == "ellipsis")
        items = items[:at] + [("gap", None)] + fill + items[at + 1 :]
    else:
        items = items + fill
    entries, scalar_bool_axes, expanded = [], [], []
    axis = 0
    for kind, v in items:
        if kind in ("newaxis", "gap"):
            entries.append(_Entry(kind))
        elif kind == "bool0":
            # NumPy: a 0-d boolean adds an axis of length 1 (True) or 0 (False) and is an
            # advanced index: index a new size-1 operand axis with [0] or [].
            scalar_bool_axes.append(len(expanded))
            expanded.append(1)
            entries.append(_Entry("array", 1, Array(np.zeros(int(v), np.int32)), True))
        elif kind == "mask":
            dims = tuple(shape[axis : axis + v.ndim])
            if v.shape != dims:
                raise IndexError(
                    f"boolean index did not match shape of indexed array: got "
                    f"{v.shape}, expected {dims}"
                )
            for nz, d in zip(np.nonzero(v), dims):
                entries.append(_Entry("array", d, Array(nz.astype(np.int32)), True))
                expanded.append(d)
            axis += v.ndim
        else:
            d = shape[axis]
            axis += 1
            expanded.append(d)
            if kind == "slice":
                start, stop, step = v.indices(d)
                entries.append(_Entry("slice", d, (start, step, len(range(start, stop, step)))))
            else:
                entries.append(_Entry(kind, d, v))
    return _Parsed(entries, tuple(scalar_bool_axes), tuple(expanded))


def _has_arrays(parsed: _Parsed) -> bool:
    return any(e.kind == "array" for e in parsed.entries)


# -- basic indexing: slice / rev / squeeze / broadcast_in_dim -----------------------------------


def _static_getitem(arr, entries):
    starts, limits, strides, rev_dims, squeeze_dims = [], [], [], [], []
    final_shape, kept = [], []  # result shape; positions in it of the sliced axes
    for e in entries:
        if e.kind == "newaxis":
            final_shape.append(1)
            continue
        if e.kind == "gap":
            continue
        ax = len(starts)
        if e.kind == "int":
            if e.dim == 0:
                raise IndexError(f"index {e.value} is out of bounds for axis {ax} with size 0")
            # NB: JAX clamps out-of-bounds static ints (its dynamic_slice does); so do we.
            i = min(max(e.value + e.dim if e.value < 0 else e.value, 0), e.dim - 1)
            starts.append(i), limits.append(i + 1), strides.append(1)
            squeeze_dims.append(ax)
            continue
        start, step, n = e.value
        if n == 0:
            starts.append(0), limits.append(0), strides.append(1)
        elif step > 0:
            starts.append(start), limits.append(start + (n - 1) * step + 1)
            strides.append(step)
        else:  # take the same elements in increasing order, then reverse them
            starts.append(start + (n - 1) * step), limits.append(start + 1)
            strides.append(-step)
            if n > 1:
                rev_dims.append(ax)
        kept.append(len(final_shape))
        final_shape.append(n)
    y = arr
    if starts != [0] * len(starts) or limits != list(arr.shape) or any(s != 1 for s in strides):
        y = lax.slice(y, starts, limits, None if all(s == 1 for s in strides) else strides)
    if rev_dims:
        y = lax.rev(y, rev_dims)
    if squeeze_dims:
        y = lax.squeeze(y, squeeze_dims)
    if len(kept) != len(final_shape):
        y = lax.broadcast_in_dim(y, tuple(final_shape), tuple(kept))
    return y


# -- advanced indexing: one gather (or scatter) ---------------------------------------------------


class _GatherPlan(NamedTuple):
    indices: Any  # integer array of shape batch + (k,)
    dnums: GatherDimensionNumbers
    slice_sizes: tuple
    gather_shape: tuple  # the gather output shape
    final_shape: tuple  # the NumPy result shape (gather shape + None axes)
    scalar_bool_axes: tuple


def _index_dtype(arrays) -> np.dtype:
    wide = any(a.dtype.itemsize == 8 for a in arrays)
    return dtypes.int64 if wide and dtypes.default_int_dtype() == dtypes.int64 else dtypes.int32


def _normalize_index_array(x, dim: int, idx_dtype: np.dtype, wrap: bool = True):
    """Convert ``x`` to ``idx_dtype``, wrapping negative entries once (``i + dim``) if
    ``wrap``."""
    if dtypes.is_unsigned(x.dtype):
        if x.dtype.itemsize >= idx_dtype.itemsize:  # keep huge values huge (out of bounds)
            x = lax.min(x, x.dtype.type(np.iinfo(idx_dtype).max))
        return lax.convert_element_type(x, idx_dtype)
    x = lax.convert_element_type(x, idx_dtype)
    return lax.select_n(lax.lt(x, 0), x, lax.add(x, dim)) if wrap else x


def _gather_plan(parsed: _Parsed, fun_name: str, normalize: bool = True) -> _GatherPlan:
    """The gather that computes the parsed index; ``normalize`` wraps negative indices."""
    entries = parsed.entries
    adv = [k for k, e in enumerate(entries) if e.kind in ("array", "int")]
    arrays = [e.value for e in entries if e.kind == "array"]
    adv_shape = util.broadcast_shapes(*(a.shape for a in arrays), fun_name=fun_name)
    contiguous = adv == list(range(adv[0], adv[-1] + 1)) if adv else True
    # The result dims in order: (role, size, operand axis or None).
    final = [] if contiguous else [("adv", s, None) for s in adv_shape]
    axis_of = []
    for k, e in enumerate(entries):
        if e.kind == "newaxis":
            final.append(("newaxis", 1, None))
            continue
        if e.kind == "gap":
            continue
        axis_of.append(k)
        ax = len(axis_of) - 1
        if e.kind == "slice":
            final.append(("window" if e.value[1] == 1 else "strided", e.value[2], ax))
        elif contiguous and k == adv[0]:
            final += [("adv", s, None) for s in adv_shape]
    gather_dims = [f for f in final if f[0] != "newaxis"]
    batch = [f for f in gather_dims if f[0] != "window"]
    batch_shape = tuple(f[1] for f in batch)
    adv_start = next((j for j, f in enumerate(batch) if f[0] == "adv"), 0)
    idx_dtype = _index_dtype(arrays)

    def to_batch(x, dims):
        return lax.broadcast_in_dim(x, batch_shape + (1,), dims)

    slice_sizes, collapsed, start_map, components = [], [], [], []
    for ax, k in enumerate(axis_of):
        e = entries[k]
        if e.kind == "slice" and e.value[1] == 1:
            slice_sizes.append(e.value[2])
            if e.value[0] != 0:
                start_map.append(ax)
                components.append(to_batch(Array(idx_dtype.type(e.value[0])), ()))
            continue
        slice_sizes.append(1)
        collapsed.append(ax)
        start_map.append(ax)
        if e.kind == "slice":
            start, step, n = e.value
            pos = next(j for j, f in enumerate(batch) if f[2] == ax and f[0] == "strided")
            steps = Array((start + step * np.arange(n)).astype(idx_dtype))
            components.append(to_batch(steps, (pos,)))
        elif e.kind == "int":
            i = e.value + e.dim if e.value < 0 and normalize else e.value
            components.append(to_batch(Array(np.asarray(i).astype(idx_dtype)[()]), ()))
        else:
            x = e.value
            x = (
                lax.convert_element_type(x, idx_dtype)
                if e.static
                else _normalize_index_array(x, e.dim, idx_dtype, normalize)
            )
            x = util.broadcast_to_shape(x, adv_shape)
            components.append(to_batch(x, tuple(range(adv_start, adv_start + len(adv_shape)))))
    if not components:
        indices = Array(np.zeros(batch_shape + (0,), idx_dtype))
    elif len(components) == 1:
        indices = components[0]
    else:
        indices = lax.concatenate(components, len(batch_shape))
    offset_dims = tuple(j for j, f in enumerate(gather_dims) if f[0] == "window")
    dnums = GatherDimensionNumbers(
        offset_dims=offset_dims,
        collapsed_slice_dims=tuple(collapsed),
        start_index_map=tuple(start_map),
    )
    return _GatherPlan(
        indices,
        dnums,
        tuple(slice_sizes),
        tuple(f[1] for f in gather_dims),
        tuple(f[1] for f in final),
        parsed.scalar_bool_axes,
    )


def _check_scalar_indices_in_nonempty_axes(parsed: _Parsed) -> None:
    """A scalar integer index (a static int or a 0-d integer array, traced or not) into an
    axis of size 0 is an IndexError, as in JAX, for reads and for every ``.at[...]`` update
    and mode alike (there is no element to clamp to). Index arrays with an axis of their own
    are not: JAX's updates through them into an empty axis change nothing."""
    ax = 0
    for e in parsed.entries:
        if e.kind in ("newaxis", "gap"):
            continue
        if e.dim == 0 and e.kind == "int":
            raise IndexError(f"index {e.value} is out of bounds for axis {ax} with size 0")
        if e.dim == 0 and e.kind == "array" and not e.static and np.ndim(e.value) == 0:
            raise IndexError(f"index is out of bounds for axis {ax} with size 0")
        ax += 1


def _check_indexed_axes_nonempty(parsed: _Parsed, plan: _GatherPlan) -> None:
    if math.prod(plan.gather_shape) == 0:
        return
    for ax, d in enumerate(parsed.expanded_shape):
        if d == 0 and ax in plan.dnums.collapsed_slice_dims:
            raise IndexError(
                f"index is out of bounds for axis {ax} with size 0 (cannot take "
                "a non-empty selection from an empty axis)"
            )


def _rewriting_take(
    arr,
    idx,
    *,
    mode=None,
    fill_value=None,
    indices_are_sorted=False,
    unique_indices=False,
    normalize=True,
    fun_name="indexing",
):
    """``arr[idx]``: static slicing when possible, else one gather in ``mode``."""
    arr = util.asarray(arr, fun_name=fun_name)
    parsed = _parse(arr.shape, idx, fun_name)
    if mode is None and fill_value is None and not _has_arrays(parsed):
        return _static_getitem(arr, parsed.entries)
    plan = _gather_plan(parsed, fun_name, normalize)
    if math.prod(plan.gather_shape) == 0:  # as jnp: no gather (its slice may not fit an
        return lax.full(plan.final_shape, 0, arr.dtype)  # empty axis: zeros((0, 0))[[1]])
    _check_indexed_axes_nonempty(parsed, plan)
    x = lax.expand_dims(arr, plan.scalar_bool_axes) if plan.scalar_bool_axes else arr
    out = lax.gather(
        x,
        plan.indices,
        plan.dnums,
        plan.slice_sizes,
        indices_are_sorted=indices_are_sorted,
        unique_indices=unique_indices,
        mode=mode,
        fill_value=fill_value,
    )
    return lax.reshape(out, plan.final_shape) if plan.final_shape != plan.gather_shape else out


def getitem(arr, idx):
    """``arr[idx]`` with NumPy's indexing rules and JAX's out-of-bounds semantics (clamp).

    Args:
      arr: an array.
      idx: an int, slice, None, Ellipsis, integer or (concrete) boolean array, or a tuple.

    Returns:
      The selected elements.

    Example: ``getitem(x, (0, slice(None, None, -1)))`` is ``x[0, ::-1]``.
    """
    return _rewriting_take(arr, idx)


# -- indexed updates: x.at[idx] -----------------------------------------------------------------


def _scatter_update(
    x, idx, y, scatter_fn, *, indices_are_sorted, unique_indices, mode, normalize, fun_name
):
    x = util.asarray(x, fun_name=fun_name)
    if (
        isinstance(y, int)
        and not isinstance(y, bool)
        and dtypes.is_int(x.dtype)
        and np.iinfo(x.dtype).min <= y <= np.iinfo(x.dtype).max
    ):
        y = util.asarray(y, dtype=x.dtype)
    else:
        util.check_arraylike(fun_name, y, names=["values"])
        y = util.asarray(y, fun_name=fun_name)
    parsed = _parse(x.shape, idx, fun_name)
    _check_scalar_indices_in_nonempty_axes(parsed)
    plan = _gather_plan(parsed, fun_name, normalize)
    if math.prod(plan.final_shape) == 0:
        return x
    xp, yp = util.promote_dtypes(x, y)
    try:
        yp = util.broadcast_to_shape(yp, plan.final_shape)
    except ValueError:
        raise ValueError(
            f"{fun_name}: values of shape {tuple(y.shape)} cannot be broadcast to "
            f"the indexed shape {plan.final_shape}"
        ) from None
    if plan.final_shape != plan.gather_shape:
        yp = lax.reshape(yp, plan.gather_shape)
    if plan.scalar_bool_axes:
        xp = lax.expand_dims(xp, plan.scalar_bool_axes)
    dn = plan.dnums
    sdn = ScatterDimensionNumbers(
        update_window_dims=dn.offset_dims,
        inserted_window_dims=dn.collapsed_slice_dims,
        scatter_dims_to_operand_dims=dn.start_index_map,
    )
    out = scatter_fn(
        xp,
        plan.indices,
        yp,
        sdn,
        indices_are_sorted=indices_are_sorted,
        unique_indices=unique_indices,
        mode=mode,
    )
    if plan.scalar_bool_axes:
        out = lax.squeeze(out, plan.scalar_bool_axes)
    return lax.convert_element_type(out, x.dtype, x.weak_type)


class IndexUpdateHelper:
    """``x.at``: ``x.at[idx]`` gives an :class:`_IndexUpdateRef` whose methods return updated
    copies of ``x`` (arrays are immutable)."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, index) -> _IndexUpdateRef:
        return _IndexUpdateRef(self.array, index)

    def __repr__(self):
        return f"IndexUpdateHelper({self.array!r})"


class _IndexUpdateRef:
    """``x.at[idx]``: the functional forms of ``x[idx]``, ``x[idx] = v``, ``x[idx] += v``...

    Every update takes ``(values, *, indices_are_sorted=False, unique_indices=False,
    mode=None, wrap_negative_indices=True)``; ``mode=None`` drops out-of-bounds updates
    ("drop"), "clip" clamps them. ``values`` broadcast to the indexed shape and the result keeps
    ``x``'s dtype. Repeated indices accumulate for add/subtract/multiply/min/max; for set one
    of the writes wins.
    """

    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array = array
        self.index = index

    def __repr__(self):
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    def get(
        self,
        *,
        indices_are_sorted=False,
        unique_indices=False,
        mode=None,
        fill_value=None,
        wrap_negative_indices=True,
    ) -> Array:
        """``x[idx]``; ``mode="fill"`` returns ``fill_value`` (default NaN / the integer
        minimum) for out-of-bounds indices, "clip" or None clamp them."""
        return _rewriting_take(
            self.array,
            self.index,
            mode=mode,
            fill_value=fill_value,
            indices_are_sorted=indices_are_sorted,
            unique_indices=unique_indices,
            normalize=wrap_negative_indices,
            fun_name="at[].get",
        )

    def _scatter(self, name, fn, values, flags, array=None):
        return _scatter_update(
            self.array if array is None else array,
            self.index,
            values,
            fn,
            fun_name=f"at[].{name}",
            **flags,
        )

    def set(self, values: ArrayLike, **flags: Any) -> Array:
        """``x[idx] = values``."""
        return self._scatter("set", lax.scatter, values, _flags(**flags))

    def add(self, values: ArrayLike, **flags: Any) -> Array:
        """``x[idx] += values``."""
        return self._scatter("add", lax.scatter_add, values, _flags(**flags))

    def subtract(self, values: ArrayLike, **flags: Any) -> Array:
        """``x[idx] -= values`` (a scatter-add of ``-values``)."""
        return self._scatter(
            "subtract", lax.scatter_add, _negate(self.array, values), _flags(**flags)
        )

    def multiply(self, values: ArrayLike, **flags: Any) -> Array:
        """``x[idx] *= values``."""
        return self._scatter("multiply", lax.scatter_mul, values, _flags(**flags))

    mul = multiply

    def divide(self, values: ArrayLike, **flags: Any) -> Array:
        """``x[idx] /= values``: ``x / ones_like(x).at[idx].multiply(values)`` (true division,
        so integer arrays give floats, as in JAX)."""
        from fungrad.numpy import ufuncs

        denom = self._scatter(
            "divide", lax.scatter_mul, values, _flags(**flags), array=lax.full_like(self.array, 1)
        )
        return ufuncs.divide(self.array, denom)

    def power(self, values: ArrayLike, **flags: Any) -> Array:
        """``x[idx] **= values``: ``x ** ones_like(x).at[idx].multiply(values)``."""
        from fungrad.numpy import ufuncs

        expo = self._scatter(
            "power", lax.scatter_mul, values, _flags(**flags), array=lax.full_like(self.array, 1)
        )
        return ufuncs.power(self.array, expo)

    def min(self, values: ArrayLike, **flags: Any) -> Array:
        """``x[idx] = minimum(x[idx], values)``."""
        return self._scatter("min", lax.scatter_min, values, _flags(**flags))

    def max(self, values: ArrayLike, **flags: Any) -> Array:
        """``x[idx] = maximum(x[idx], values)``."""
        return self._scatter("max", lax.scatter_max, values, _flags(**flags))

    def apply(self, func, **flags: Any) -> Array:
        """``x[idx] = func(x[idx])`` for a scalar-to-scalar ``func`` applied elementwise, once
        per index that names an element (a repeated index applies it repeatedly, as JAX's
        ``scatter_apply``)."""
        from fungrad.lax.ragged import scatter_apply

        if not callable(func):
            raise TypeError(f"at[].apply: func must be callable, got {type(func).__name__}")

        def scatter_fn(x, indices, updates, dnums, **kw):
            return scatter_apply(x, indices, func, dnums, update_shape=updates.shape, **kw)

        return self._scatter("apply", scatter_fn, 0, _flags(**flags))


def _flags(
    *, indices_are_sorted=False, unique_indices=False, mode=None, wrap_negative_indices=True
):
    """The keyword arguments every ``x.at[idx]`` update accepts (a TypeError for others)."""
    return dict(
        indices_are_sorted=indices_are_sorted,
        unique_indices=unique_indices,
        mode=mode,
        normalize=wrap_negative_indices,
    )


def _negate(x, values):
    """``-values`` for a subtraction from ``x``; Python ints take ``x``'s integer dtype first,
    so that unsigned arrays subtract by wrapping, as a scatter-sub would."""
    util.check_arraylike("at[].subtract", values, names=["values"])
    if isinstance(values, float):
        return -values
    if (
        isinstance(values, int)
        and not isinstance(values, bool)
        and dtypes.is_int(x.dtype)
        and np.iinfo(x.dtype).min <= values <= np.iinfo(x.dtype).max
    ):
        values = util.asarray(values, dtype=x.dtype)
    return lax.neg(util.asarray(values, fun_name="at[].subtract"))


# -- helpers for the functions below --------------------------------------------------------


def _concrete(x, fun_name: str, hint: str) -> np.ndarray:
    """The concrete numpy value of ``x``; ConcretizationTypeError (with ``hint``) if traced."""
    if isinstance(x, core.Tracer):
        val = x.to_concrete_value()
        if val is None:
            raise core.ConcretizationTypeError(
                f"{fun_name}: {hint}\n" + core.concretization_message("the value", x.aval, x)
            )
        return np.asarray(val)
    return np.asarray(x)


def _concrete_size(count, fun_name: str) -> int:
    try:
        return int(count)
    except core.ConcretizationTypeError as e:
        raise core.ConcretizationTypeError(
            f"{fun_name}: the size of the result depends on traced values. Pass a static "
            f"size= argument (and optionally fill_value=) so that the shape is known, e.g. "
            f"{fun_name}(x, size=n)."
        ) from e


def _int_array(x, fun_name: str, what: str):
    util.check_arraylike(fun_name, x, names=[what])
    x = util.asarray(x, fun_name=fun_name)
    if not dtypes.is_int(x.dtype):
        raise TypeError(f"{fun_name}: {what} must be an integer array, got dtype {x.dtype.name}")
    return x


def _as_bool(x):
    return x if dtypes.is_bool(x.dtype) else lax.convert_element_type(x, dtypes.bool_)


def _ravel(x):
    return lax.reshape(x, (x.size,)) if x.ndim != 1 else x


def _static_int(v, fun_name: str, what: str) -> int:
    try:
        return operator.index(v)
    except core.ConcretizationTypeError:
        raise
    except TypeError:
        raise TypeError(f"{fun_name}: {what} must be a static integer, got {v!r:.40}") from None


# -- take / take_along_axis / put / choose ------------------------------------------------


def take(
    a,
    indices,
    axis=None,
    out=None,
    mode=None,
    unique_indices=False,
    indices_are_sorted=False,
    fill_value=None,
):
    """Elements of ``a`` at ``indices`` along ``axis`` (of the flattened ``a`` if None).

    Args:
      a: array to take from.
      indices: integer array; negative entries wrap once.
      axis: the axis to index, or None.
      out: unsupported (must be None).
      mode: "fill" (default, as JAX: out-of-bounds gives ``fill_value``, NaN / the integer
        minimum by default), "clip" or "wrap".
      unique_indices, indices_are_sorted: hints for the gather.
      fill_value: the value for out-of-bounds indices in "fill" mode.

    Returns:
      ``a``'s shape with ``axis`` replaced by ``indices``' shape.

    Example: ``take(x, jnp.array([0, 2]), axis=1)`` is ``x[:, [0, 2]]``.
    """
    util.check_arraylike("take", a, names=["a"])
    if out is not None:
        raise ValueError("take: the 'out' argument is not supported (arrays are immutable)")
    arr = util.asarray(a, fun_name="take")
    idx = _int_array(indices, "take", "indices")
    if axis is None:
        arr, axis = _ravel(arr), 0
    else:
        axis = util.canonicalize_axis(axis, arr.ndim, "take")
    if mode is None or mode == "fill":
        gmode = "fill"
    elif mode == "clip":
        gmode = "clip"  # NB: as JAX, negative indices are clamped to 0, not wrapped
    elif mode == "wrap":
        if arr.shape[axis] == 0 and idx.size:
            raise IndexError("take: cannot do a non-empty take from an empty axis")
        if arr.shape[axis]:
            from fungrad.numpy import ufuncs

            idx = ufuncs.remainder(idx, arr.shape[axis])
        gmode = "promise_in_bounds"
    elif mode == "raise":
        raise ValueError(
            "take: mode='raise' is not supported (indices may be traced values); "
            "use 'fill', 'clip' or 'wrap'"
        )
    else:
        raise ValueError(f"take: invalid mode {mode!r}; expected 'fill', 'clip' or 'wrap'")
    return _rewriting_take(
        arr,
        (slice(None),) * axis + (idx,),
        mode=gmode,
        fill_value=fill_value,
        indices_are_sorted=indices_are_sorted,
        unique_indices=unique_indices,
        normalize=gmode != "clip",
        fun_name="take",
    )


def take_along_axis(arr, indices, axis=-1, mode=None, fill_value=None):
    """``arr`` indexed along ``axis`` by ``indices`` of the same rank (NumPy's
    take_along_axis): ``out[i, j] = arr[i, indices[i, j]]`` for ``axis=1``.

    Non-indexed dimensions broadcast between ``arr`` and ``indices``. ``mode`` is "fill"
    (default, as JAX), "clip" or "promise_in_bounds"; negative indices wrap once.

    Example: ``take_along_axis(x, argsort(x, axis=1), axis=1)`` sorts the rows of ``x``.
    """
    name = "take_along_axis"
    util.check_arraylike(name, arr, names=["arr"])
    a = util.asarray(arr, fun_name=name)
    idx = _int_array(indices, name, "indices")
    if axis is None:
        if idx.ndim != 1:
            raise ValueError(
                f"{name}: with axis=None, indices must be 1-dimensional, got shape {idx.shape}"
            )
        a, axis = _ravel(a), 0
    else:
        axis = util.canonicalize_axis(axis, a.ndim, name)
    if idx.ndim != a.ndim:
        raise ValueError(
            f"{name}: indices and arr must have the same number of dimensions, "
            f"got shapes {idx.shape} and {a.shape}"
        )
    out_shape = []
    for j, (n, m) in enumerate(zip(a.shape, idx.shape)):
        if j != axis and n != m and 1 not in (n, m):
            raise ValueError(
                f"{name}: incompatible shapes for broadcasting: arr {a.shape} and "
                f"indices {idx.shape} (dimension {j})"
            )
        out_shape.append(m if j == axis or n == 1 else n)
    out_shape = tuple(out_shape)
    if a.shape[axis] == 0:  # nothing to read: zeros, as jnp (every index is out of bounds)
        return lax.full(out_shape, 0, a.dtype)
    idx = _normalize_index_array(
        util.broadcast_to_shape(idx, out_shape), a.shape[axis], _index_dtype([idx])
    )
    # Dimensions where arr and the result agree are gather batching dims (indexed together);
    # size-1 dimensions of arr that broadcast are collapsed with start 0.
    batching = tuple(j for j in range(a.ndim) if j != axis and a.shape[j] == out_shape[j])
    collapsed = tuple(j for j in range(a.ndim) if j not in batching)
    dn = GatherDimensionNumbers(
        offset_dims=(),
        collapsed_slice_dims=collapsed,
        start_index_map=(axis,),
        operand_batching_dims=batching,
        start_indices_batching_dims=batching,
    )
    gmode = "fill" if mode is None else mode
    return lax.gather(
        a, lax.expand_dims(idx, (a.ndim,)), dn, (1,) * a.ndim, mode=gmode, fill_value=fill_value
    )


def _tile_to_size(v, n: int):
    reps = -(-n // v.size)
    v = lax.concatenate([v] * reps, 0) if reps > 1 else v
    return lax.slice(v, (0,), (n,)) if v.size != n else v


def put(a, ind, v, mode=None, *, inplace=True):
    """A copy of ``a`` with the flat positions ``ind`` set to ``v`` (repeated cyclically).

    ``inplace`` must be False (arrays are immutable), as in JAX. ``mode``: None or "clip"
    clamp out-of-bounds indices (None first wraps negative ones once), "wrap" wraps them.

    Example: ``put(x, jnp.array([0, 3]), 9, inplace=False)``.
    """
    if inplace:
        raise ValueError(
            "put cannot modify arrays in-place, because arrays are immutable. "
            "Pass inplace=False to instead return an updated array."
        )
    util.check_arraylike("put", a, ind, v)
    arr = util.asarray(a, fun_name="put")
    idx = _ravel(_int_array(ind, "put", "ind"))
    vals = _ravel(util.asarray(v, fun_name="put"))
    if not arr.size or not idx.size or not vals.size:
        return arr
    vals = _tile_to_size(vals, idx.size)
    if mode is None:
        smode = "clip"  # JAX: negative indices wrap once, then clamp
    elif mode == "clip":
        idx = lax.max(idx, idx.dtype.type(0)) if dtypes.is_signed(idx.dtype) else idx
        smode = "clip"
    elif mode == "wrap":
        from fungrad.numpy import ufuncs

        idx = ufuncs.remainder(idx, arr.size)
        smode = "promise_in_bounds"
    else:
        raise ValueError(f"put: mode should be one of 'wrap' or 'clip'; got mode={mode!r}")
    flat = _IndexUpdateRef(_ravel(arr), idx).set(vals, mode=smode)
    return lax.reshape(flat, arr.shape)


def choose(a, choices, out=None, mode="raise"):
    """``choices[a[i]][i]`` elementwise (all arguments broadcast together).

    ``mode``: "raise" (``a`` must be concrete and in range), "wrap" or "clip".

    Example: ``choose(jnp.array([0, 1]), [x, y])`` is ``[x[0], y[1]]``.
    """
    if out is not None:
        raise ValueError("choose: the 'out' argument is not supported (arrays are immutable)")
    which = _int_array(a, "choose", "a")
    if not isinstance(choices, (list, tuple)) or not choices:
        choices = list(util.asarray(choices, fun_name="choose")) if choices is not None else []
    if not choices:
        raise ValueError("choose: choices must be a non-empty sequence of arrays")
    util.check_arraylike("choose", *choices)
    n = len(choices)
    if mode == "raise":
        val = _concrete(
            which,
            "choose",
            "mode='raise' needs concrete indices; use "
            "mode='wrap' or mode='clip' in transformed code",
        )
        if val.size and (val.min() < 0 or val.max() >= n):
            raise ValueError(f"choose: invalid entry in choice array (must be in [0, {n}))")
    elif mode == "wrap":
        from fungrad.numpy import ufuncs

        which = ufuncs.remainder(which, n)
    elif mode == "clip":
        which = lax.min(lax.max(which, which.dtype.type(0)), which.dtype.type(n - 1))
    else:
        raise ValueError(f"choose: invalid mode {mode!r}; expected 'raise', 'wrap' or 'clip'")
    cases = util.promote_dtypes(*choices) if n > 1 else [util.asarray(choices[0])]
    shape = util.broadcast_shapes(which.shape, *(c.shape for c in cases), fun_name="choose")
    which = lax.convert_element_type(util.broadcast_to_shape(which, shape), dtypes.int32)
    return lax.select_n(which, *(util.broadcast_to_shape(c, shape) for c in cases))


# -- select ------------------------------------------------------------------------------------


def select(condlist, choicelist, default=0):
    """The element of the first ``choicelist`` entry whose condition is true, else
    ``default``.

    Example: ``select([x < 0, x > 0], [-1, 1], 0)`` is ``sign(x)``.
    """
    from fungrad.numpy import sorting

    if len(condlist) != len(choicelist):
        raise ValueError(
            f"select: condlist and choicelist must have the same length, got "
            f"{len(condlist)} and {len(choicelist)}"
        )
    if not condlist:
        raise ValueError("select: condlist must not be empty")
    n = len(condlist)
    util.check_arraylike(
        "select",
        *condlist,
        *choicelist,
        default,
        names=[f"condlist[{i}]" for i in range(n)]
        + [f"choicelist[{i}]" for i in range(n)]
        + ["default"],
    )
    result = default
    for cond, choice in zip(reversed(condlist), reversed(choicelist)):
        result = sorting.where(cond, choice, result)
    return util.asarray(result)
