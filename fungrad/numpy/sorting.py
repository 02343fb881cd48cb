"""fungrad.numpy sorting, searching and counting (NumPy's grouping of these routines).

sort / argsort / lexsort use the multi-operand ``lax.sort`` (stable; NaNs last, -0.0 == 0.0;
complex values lexicographically, by real then imaginary part, as JAX: a complex operand is
sorted as the two keys ``real``, ``imag``);
searchsorted is a binary search, a compare-all count or a sort, all written on lax;
partition / argpartition; unique (sort-based, concrete or with a static ``size=``); and the
searching functions where, nonzero, argwhere, flatnonzero, compress and extract, whose result
size depends on the data and so needs a concrete input or a static ``size=`` argument.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, overload

from fungrad import dtypes, lax
from fungrad.lax import GatherScatterMode, ScatterDimensionNumbers
from fungrad.numpy import index_tricks, indexing, util

if TYPE_CHECKING:
    from fungrad.array import Array
    from fungrad.typing import ArrayLike

__all__ = [
    "sort",
    "sort_complex",
    "argsort",
    "lexsort",
    "searchsorted",
    "partition",
    "argpartition",
    "unique",
    "where",
    "nonzero",
    "argwhere",
    "flatnonzero",
    "compress",
    "extract",
]


def _keys(x) -> list:
    """The sort keys of ``x``: itself, or its real and imaginary parts when complex."""
    if dtypes.kind(x.dtype) == "c":
        return [lax.real(x), lax.imag(x)]
    return [x]


def _sort_values(arr, dim: int, stable: bool = True):
    """``arr`` sorted along ``dim`` (complex lexicographically)."""
    if dtypes.kind(arr.dtype) != "c":
        return lax.sort(arr, dimension=dim, is_stable=stable)
    re, im = lax.sort(tuple(_keys(arr)), dimension=dim, is_stable=stable, num_keys=2)
    return lax.complex(re, im)


def _sort_axis(arr, axis, fun_name):
    """(array, dimension): flattened with dimension 0 for axis None."""
    if axis is None:
        return indexing._ravel(arr), 0
    return arr, util.canonicalize_axis(axis, arr.ndim, fun_name)


def _check_sort_args(fun_name, kind, order):
    if kind is not None:
        raise TypeError(
            f"{fun_name}: the 'kind' argument is not supported; use stable=True or "
            "stable=False to choose the sort's stability"
        )
    if order is not None:
        raise TypeError(f"{fun_name}: the 'order' argument is not supported (no structured dtypes)")


def sort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False):
    """A sorted copy of ``a`` along ``axis`` (the flattened array if None).

    NaNs sort last (first when ``descending``), and -0.0 equals 0.0, as in JAX.

    Example: ``sort(jnp.array([3, 1, 2]))`` is ``[1, 2, 3]``.
    """
    _check_sort_args("sort", kind, order)
    util.check_arraylike("sort", a, names=["a"])
    arr, dim = _sort_axis(util.asarray(a, fun_name="sort"), axis, "sort")
    out = _sort_values(arr, dim, stable)
    return lax.rev(out, (dim,)) if descending else out


def sort_complex(a):
    """``a`` sorted along its last axis, as a complex array (``jnp.sort_complex``: real inputs
    become complex64, or complex128 for float64)."""
    util.check_arraylike("sort_complex", a, names=["a"])
    arr = util.asarray(a, fun_name="sort_complex")
    out = _sort_values(arr, arr.ndim - 1) if arr.ndim else arr
    return lax.convert_element_type(out, dtypes.complex_dtype(out.dtype))


def argsort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False, dtype=None):
    """The indices that sort ``a`` along ``axis`` (stable by default: equal elements keep
    their order, also when ``descending``).

    Example: ``argsort(jnp.array([3, 1, 2]))`` is ``[1, 2, 0]``.
    """
    _check_sort_args("argsort", kind, order)
    util.check_arraylike("argsort", a, names=["a"])
    arr, dim = _sort_axis(util.asarray(a, fun_name="argsort"), axis, "argsort")
    idx_dtype = dtypes.default_int_dtype() if dtype is None else dtypes.canonicalize_dtype(dtype)
    if not dtypes.is_int(idx_dtype):
        raise TypeError(f"argsort: dtype must be an integer dtype, got {idx_dtype.name}")
    iota = lax.broadcasted_iota(idx_dtype, arr.shape, dim)
    if descending and stable:
        # Reverse first so that equal elements keep their order once the result is reversed.
        arr, iota = lax.rev(arr, (dim,)), lax.rev(iota, (dim,))
    keys = _keys(arr)
    perm = lax.sort((*keys, iota), dimension=dim, is_stable=stable, num_keys=len(keys))[-1]
    return lax.rev(perm, (dim,)) if descending else perm


def lexsort(keys, axis=-1):
    """The indices that sort by several keys; the LAST key is the primary one (NumPy's rule).

    Example: ``lexsort((first_names, last_names))`` sorts by last name, then first name.
    ``keys`` is a sequence of keys: a 1-D array is a sequence of 0-d keys, whose sort index
    is 0 (as in JAX; NumPy would argsort it).
    """
    keys = tuple(keys)
    if not keys:
        raise TypeError("lexsort: need a sequence of at least one key")
    util.check_arraylike("lexsort", *keys)
    keys = [util.asarray(k, fun_name="lexsort") for k in keys]
    if len({k.shape for k in keys}) > 1:
        raise ValueError(
            "lexsort: all keys need to be the same shape, got "
            + ", ".join(str(k.shape) for k in keys)
        )
    if keys[0].ndim == 0:  # JAX: scalar keys sort to index 0
        return lax.full((), 0, dtypes.default_int_dtype())
    dim = util.canonicalize_axis(axis, keys[0].ndim, "lexsort")
    iota = lax.broadcasted_iota(dtypes.default_int_dtype(), keys[0].shape, dim)
    ordered = [part for k in keys[::-1] for part in _keys(k)]
    return lax.sort((*ordered, iota), dimension=dim, num_keys=len(ordered))[-1]


# -- searchsorted -------------------------------------------------------------------------------


def _lt_total(x, y):
    """``x < y`` in the sort order: NaN is larger than everything (and equal to NaN); complex
    values compare by real part, then imaginary part."""
    if dtypes.kind(x.dtype) == "c":
        xr, yr, xi, yi = lax.real(x), lax.real(y), lax.imag(x), lax.imag(y)
        lt_re, gt_re = _lt_total(xr, yr), _lt_total(yr, xr)
        eq_re = lax.bitwise_not(lax.bitwise_or(lt_re, gt_re))
        return lax.bitwise_or(lt_re, lax.bitwise_and(eq_re, _lt_total(xi, yi)))
    lt = lax.lt(x, y)
    if not dtypes.is_float(x.dtype):
        return lt
    x_nan, y_nan = lax.ne(x, x), lax.ne(y, y)
    return lax.bitwise_or(lt, lax.bitwise_and(y_nan, lax.bitwise_not(x_nan)))


def _go_right(a_vals, v, side):
    """Whether the insertion point of ``v`` lies right of ``a_vals``."""
    return _lt_total(a_vals, v) if side == "left" else lax.bitwise_not(_lt_total(v, a_vals))


def _searchsorted_scan(a, v, side, dt):
    # Binary search over [lo, hi): ceil(log2(n + 1)) halvings, unrolled (the count is static).
    n = a.shape[0]
    lo = lax.full(v.shape, 0, dt)
    hi = lax.full(v.shape, n, dt)
    for _ in range(n.bit_length()):
        mid = lax.div(lax.add(lo, hi), dt.type(2))
        active = lax.lt(lo, hi)
        right = lax.bitwise_and(active, _go_right(indexing.getitem(a, mid), v, side))
        left = lax.bitwise_and(active, lax.bitwise_not(right))
        lo = lax.select_n(right, lo, lax.add(mid, dt.type(1)))
        hi = lax.select_n(left, hi, mid)
    return lo


def _searchsorted_compare_all(a, v, side, dt):
    n = a.shape[0]
    shape = v.shape + (n,)
    av = lax.broadcast_in_dim(a, shape, (v.ndim,))
    vv = lax.broadcast_in_dim(v, shape, tuple(range(v.ndim)))
    count = lax.convert_element_type(_go_right(av, vv, side), dt)
    return lax.reduce_sum(count, (v.ndim,))


def _searchsorted_sort(a, v, side, dt):
    # The rank of each query among (queries + a), minus its rank among the queries alone,
    # counts the elements of a before it. The stable sort puts queries before equal elements
    # of a for side="left" (queries first) and after them for side="right".
    q = indexing._ravel(v)

    def rank(x):
        n = x.shape[0]
        perm = argsort(x)
        return indexing._IndexUpdateRef(lax.full((n,), 0, dt), perm).set(lax.iota(dt, n))

    m = q.shape[0]
    if side == "left":
        r = lax.slice(rank(lax.concatenate([q, a], 0)), (0,), (m,))
    else:
        n = a.shape[0]
        r = lax.slice(rank(lax.concatenate([a, q], 0)), (n,), (n + m,))
    return lax.reshape(lax.sub(r, rank(q)), v.shape)


_SEARCHSORTED_METHODS = {
    "scan": _searchsorted_scan,
    "scan_unrolled": _searchsorted_scan,
    "compare_all": _searchsorted_compare_all,
    "sort": _searchsorted_sort,
}


def searchsorted(a, v, side="left", sorter=None, *, method="scan"):
    """Insertion points of ``v`` into the sorted 1-d ``a`` that keep it sorted.

    Args:
      a: 1-d array sorted ascending (NaNs last), or any 1-d array with ``sorter``.
      v: the values to insert (any shape).
      side: "left" (first suitable position) or "right" (last).
      sorter: optional indices that sort ``a`` (e.g. ``argsort(a)``).
      method: "scan" / "scan_unrolled" (binary search; NB: always unrolled, as the number
        of steps is static), "compare_all" (count comparisons; best for small ``a``) or
        "sort" (a sort of ``a`` and ``v`` together; best for large ``v``).

    Returns:
      An integer array of ``v``'s shape.

    Example: ``searchsorted(jnp.array([1, 2, 3]), 2.5)`` is ``2``.
    """
    util.check_arraylike("searchsorted", a, v, names=["a", "v"])
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if method not in _SEARCHSORTED_METHODS:
        raise ValueError(
            f"searchsorted: method must be one of {sorted(_SEARCHSORTED_METHODS)}, got {method!r}"
        )
    arr = util.asarray(a, fun_name="searchsorted")
    if arr.ndim != 1:
        raise ValueError(f"searchsorted: a must be 1-dimensional, got shape {arr.shape}")
    arr, vals = util.promote_dtypes(arr, v)
    if sorter is not None:
        arr = indexing.getitem(arr, indexing._int_array(sorter, "searchsorted", "sorter"))
    dt = dtypes.int32
    return _SEARCHSORTED_METHODS[method](arr, vals, side, dt)


# -- partition ----------------------------------------------------------------------------------


def _kth(kth, n, fun_name):
    k = indexing._static_int(kth, fun_name, "kth")
    if not -n <= k < n:
        raise ValueError(f"{fun_name}: kth {kth} is out of bounds for an axis of size {n}")
    return k % n


def partition(a, kth, axis=-1):
    """A copy of ``a`` whose ``kth`` element along ``axis`` is the one a sort would put there,
    with no larger element before it and no smaller one after it.

    NB: computed by a full (stable) sort, so both sides come out sorted and NaNs last, which
    satisfies the contract (JAX's top_k-based order of the two sides differs).

    Example: ``partition(jnp.array([3, 4, 1, 2]), 1)[1]`` is ``2``.
    """
    util.check_arraylike("partition", a, names=["a"])
    arr = util.asarray(a, fun_name="partition")
    dim = util.canonicalize_axis(axis, arr.ndim, "partition")
    _kth(kth, arr.shape[dim], "partition")
    return _sort_values(arr, dim)


def argpartition(a, kth, axis=-1):
    """Indices that :func:`partition` ``a`` along ``axis`` (NB: a full stable argsort), int32
    also with x64 (jnp's come from ``lax.top_k``)."""
    util.check_arraylike("argpartition", a, names=["a"])
    arr = util.asarray(a, fun_name="argpartition")
    dim = util.canonicalize_axis(axis, arr.ndim, "argpartition")
    _kth(kth, arr.shape[dim], "argpartition")
    return lax.convert_element_type(argsort(arr, axis=dim), dtypes.int32)


# -- unique -------------------------------------------------------------------------------------


def _neighbours_differ(sorted_keys, n, equal_nan):
    """For sorted key columns (1-d, length n >= 1): True where element i differs from i - 1
    (always True at 0)."""
    differ = None
    for k in sorted_keys:
        cur, prev = lax.slice(k, (1,), (n,)), lax.slice(k, (0,), (n - 1,))
        d = lax.ne(cur, prev)
        if equal_nan and dtypes.is_float(k.dtype):
            both_nan = lax.bitwise_and(lax.ne(cur, cur), lax.ne(prev, prev))
            d = lax.bitwise_and(d, lax.bitwise_not(both_nan))
        differ = d if differ is None else lax.bitwise_or(differ, d)
    if differ is None:  # rows with no columns are all equal
        differ = lax.full((n - 1,), False, dtypes.bool_)
    return lax.concatenate([lax.full((1,), True, dtypes.bool_), differ], 0)


def unique(
    ar,
    return_index=False,
    return_inverse=False,
    return_counts=False,
    axis=None,
    *,
    equal_nan=True,
    size=None,
    fill_value=None,
    sorted=True,
):
    """The sorted unique elements of ``ar`` (or unique slices along ``axis``).

    Args:
      ar: input array; flattened when ``axis`` is None.
      return_index: also return the index of each value's first occurrence.
      return_inverse: also return indices into the result that rebuild ``ar`` (shape of
        ``ar`` for axis None, else of length ``ar.shape[axis]``).
      return_counts: also return how often each value occurs.
      axis: the axis along which to find unique slices, or None.
      equal_nan: treat all NaNs as one value.
      size: static length of the result (required when ``ar`` is traced); extra entries
        are ``fill_value`` (default: the smallest unique value), missing ones are dropped.
      fill_value: see ``size``.
      sorted: must be True (results are always sorted).

    Returns:
      The unique values, or a tuple with the requested extra arrays.

    Example: ``unique(jnp.array([3, 1, 3]), return_counts=True)`` is ``([1, 3], [1, 2])``.
    """
    name = "unique"
    util.check_arraylike(name, ar, names=["ar"])
    if not sorted:
        raise ValueError("unique: sorted=False is not supported; results are always sorted")
    arr = util.asarray(ar, fun_name=name)
    if axis is None:
        moved, dim = indexing._ravel(arr), None
    else:
        dim = util.canonicalize_axis(axis, arr.ndim, name)
        moved = lax.transpose(arr, (dim,) + tuple(j for j in range(arr.ndim) if j != dim))
    n = moved.shape[0]
    rows = lax.reshape(moved, (n, math.prod(moved.shape[1:])))
    dt = dtypes.default_int_dtype()
    if size is not None:
        size = indexing._static_int(size, name, "size")
        if size < 0:
            raise ValueError(f"unique: size must be non-negative, got {size}")
    if n == 0:
        return _unique_empty(
            arr, moved, dim, size, fill_value, return_index, return_inverse, return_counts, dt
        )
    columns = [
        key
        for j in range(rows.shape[1])
        for key in _keys(lax.reshape(lax.slice(rows, (0, j), (n, j + 1)), (n,)))
    ]
    sorted_ops = lax.sort((*columns, lax.iota(dt, n)), dimension=0, num_keys=max(len(columns), 1))
    perm = sorted_ops[-1]
    mask = _neighbours_differ(sorted_ops[:-1], n, equal_nan)
    count = lax.reduce_sum(lax.convert_element_type(mask, dt), (0,))
    padded = size is not None
    size = indexing._concrete_size(count, name) if size is None else size
    (first,) = nonzero(mask, size=size)  # sorted positions of each value's first element
    src = indexing.getitem(perm, first)  # ... and their positions in the input
    values = indexing.take(moved, src, axis=0, mode="clip")
    if padded:
        valid = lax.broadcast_in_dim(lax.lt(lax.iota(dt, size), count), values.shape, (0,))
        if fill_value is None:  # JAX pads with the smallest unique value (slice)
            fill = indexing.take(
                moved, indexing.getitem(perm, lax.full((size,), 0, dt)), axis=0, mode="clip"
            )
        else:
            fill = lax.full_like(values, fill_value)
        values = lax.select_n(valid, fill, values)
    if dim is not None:
        values = lax.transpose(
            values, tuple(range(1, dim + 1)) + (0,) + tuple(range(dim + 1, arr.ndim))
        )
    out = [values]
    inv_sorted = lax.sub(
        lax.cumsum(lax.convert_element_type(mask, dt), axis=0), lax.full((n,), 1, dt)
    )
    if return_index:
        out.append(src)
    if return_inverse:
        inv = indexing._IndexUpdateRef(lax.full((n,), 0, dt), perm).set(inv_sorted)
        out.append(lax.reshape(inv, arr.shape) if dim is None else inv)
    if return_counts:
        counts = indexing._IndexUpdateRef(lax.full((size,), 0, dt), inv_sorted).add(1)
        out.append(counts)
    return out[0] if len(out) == 1 else tuple(out)


def _unique_empty(
    arr, moved, dim, size, fill_value, return_index, return_inverse, return_counts, dt
):
    """unique of an input with no elements (or no slices) along the unique axis."""
    size = 0 if size is None else size
    if size and fill_value is None:
        raise ValueError(
            "unique: for a zero-sized input with nonzero size argument, "
            "fill_value must be specified"
        )
    values = lax.full(
        (size,) + moved.shape[1:], 0 if fill_value is None else fill_value, moved.dtype
    )
    if dim is not None:
        values = lax.transpose(
            values, tuple(range(1, dim + 1)) + (0,) + tuple(range(dim + 1, arr.ndim))
        )
    out = [values]
    if return_index:
        out.append(lax.full((size,), 0, dt))
    if return_inverse:
        out.append(lax.full(arr.shape if dim is None else (0,), 0, dt))
    if return_counts:
        out.append(lax.full((size,), 0, dt))
    return out[0] if len(out) == 1 else tuple(out)


# -- searching: where / nonzero / argwhere / flatnonzero / compress / extract -------------


@overload
def where(
    condition: ArrayLike,
    x: None = None,
    y: None = None,
    /,
    *,
    size: int | None = None,
    fill_value: Any = None,
) -> tuple[Array, ...]: ...
@overload
def where(
    condition: ArrayLike,
    x: ArrayLike,
    y: ArrayLike,
    /,
    *,
    size: None = None,
    fill_value: None = None,
) -> Array: ...
def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
    """``x`` where ``condition`` is true, else ``y`` (broadcast, JAX-promoted); with only
    ``condition``, the same as :func:`nonzero`.

    Example: ``where(x > 0, x, 0.0)``.
    """
    if x is None and y is None:
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise ValueError(
            "where: either both or neither of the x and y arguments should be provided"
        )
    if size is not None or fill_value is not None:
        raise ValueError("where: size and fill_value cannot be used with the three-argument form")
    util.check_arraylike("where", condition, x, y, names=["condition", "x", "y"])
    cond = indexing._as_bool(util.asarray(condition, fun_name="where"))
    x, y = util.promote_dtypes(x, y)
    shape = util.broadcast_shapes(cond.shape, x.shape, y.shape, fun_name="where")
    return lax.select_n(
        util.broadcast_to_shape(cond, shape),
        util.broadcast_to_shape(y, shape),
        util.broadcast_to_shape(x, shape),
    )


def nonzero(a, *, size=None, fill_value=None):
    """The indices of the nonzero elements of ``a``, one array per dimension.

    Args:
      a: array of at least one dimension.
      size: the static result length; needed when ``a`` is traced. Extra entries are
        ``fill_value``, missing ones are dropped.
      fill_value: a scalar, or one scalar per dimension (default 0).

    Returns:
      A tuple of ``a.ndim`` integer arrays.

    Example: ``nonzero(jnp.array([0, 3, 0, 4]))`` is ``(Array([1, 3]),)``.
    """
    util.check_arraylike("nonzero", a, names=["a"])
    arr = util.asarray(a, fun_name="nonzero")
    if arr.ndim == 0:
        raise ValueError(
            "nonzero: calling nonzero on 0-d arrays is not allowed; use "
            "nonzero(atleast_1d(x)) instead"
        )
    dt = dtypes.default_int_dtype()
    mask = indexing._ravel(indexing._as_bool(arr))
    ones = lax.convert_element_type(mask, dt)
    count = lax.reduce_sum(ones, (0,))
    size = (
        indexing._concrete_size(count, "nonzero")
        if size is None
        else indexing._static_int(size, "nonzero", "size")
    )
    if size < 0:
        raise ValueError(f"nonzero: size must be non-negative, got {size}")
    # Each nonzero element goes to output position (number of nonzeros before it); zeros
    # are sent out of bounds and dropped.
    pos = lax.sub(lax.cumsum(ones, axis=0), lax.full_like(ones, 1))
    target = lax.select_n(mask, lax.full_like(pos, size), pos)
    sdn = ScatterDimensionNumbers((), (0,), (0,))
    flat = lax.scatter(
        lax.full((size,), 0, dt),
        lax.expand_dims(target, (1,)),
        lax.iota(dt, mask.size),
        sdn,
        indices_are_sorted=True,
        unique_indices=True,
        mode=GatherScatterMode.FILL_OR_DROP,
    )
    coords = index_tricks._unravel_nonneg(flat, arr.shape)
    if fill_value is None:
        return coords
    fills = fill_value if isinstance(fill_value, (tuple, list)) else (fill_value,) * arr.ndim
    if len(fills) != arr.ndim:
        raise ValueError(
            f"nonzero: fill_value must be a scalar or a tuple of length "
            f"{arr.ndim}, got {fill_value!r}"
        )
    valid = lax.lt(lax.iota(dt, size), count)
    out = []
    for c, f in zip(coords, fills):
        f = util.asarray(f, fun_name="nonzero")
        if f.shape:
            raise ValueError(f"nonzero: fill_value entries must be scalars, got shape {f.shape}")
        out.append(lax.select_n(valid, lax.full_like(c, f), c))
    return tuple(out)


def argwhere(a, *, size=None, fill_value=None):
    """The indices of the nonzero elements as rows: shape ``(count, a.ndim)``.

    Example: ``argwhere(jnp.array([[0, 1], [2, 0]]))`` is ``[[0, 1], [1, 0]]``.
    """
    util.check_arraylike("argwhere", a, names=["a"])
    arr = util.asarray(a, fun_name="argwhere")
    coords = nonzero(
        lax.reshape(arr, (1,)) if arr.ndim == 0 else arr, size=size, fill_value=fill_value
    )
    n = coords[0].shape[0]
    out = lax.concatenate([lax.expand_dims(c, (1,)) for c in coords], 1)
    return lax.slice(out, (0, 0), (n, 0)) if arr.ndim == 0 else out


def flatnonzero(a, *, size=None, fill_value=None):
    """The indices of the nonzero elements of the flattened ``a``.

    Example: ``flatnonzero(jnp.array([[0, 1], [2, 0]]))`` is ``[1, 2]``.
    """
    util.check_arraylike("flatnonzero", a, names=["a"])
    return nonzero(indexing._ravel(util.asarray(a)), size=size, fill_value=fill_value)[0]


def compress(condition, a, axis=None, *, size=None, fill_value=0, out=None):
    """The slices of ``a`` along ``axis`` (flattened if None) where ``condition`` is true.

    ``condition`` is 1-d; it may be shorter than the axis (missing entries are false), and
    longer only with false entries. With ``size`` the result has exactly ``size`` slices,
    padded with ``fill_value``.

    Example: ``compress(jnp.array([True, False, True]), x, axis=0)`` is ``x[[0, 2]]``.
    """
    name = "compress"
    if out is not None:
        raise ValueError(f"{name}: the 'out' argument is not supported (arrays are immutable)")
    util.check_arraylike(name, condition, a, names=["condition", "a"])
    cond = indexing._as_bool(util.asarray(condition, fun_name=name))
    arr = util.asarray(a, fun_name=name)
    if cond.ndim != 1:
        raise ValueError(f"{name}: condition must be a 1-d array, got shape {cond.shape}")
    if axis is None:
        arr, axis = indexing._ravel(arr), 0
    else:
        axis = util.canonicalize_axis(axis, arr.ndim, name)
    n = arr.shape[axis]
    if cond.shape[0] > n:
        extra = indexing._concrete(
            lax.slice(cond, (n,), (cond.shape[0],)),
            name,
            "a condition longer than the axis must be concrete",
        )
        if extra.any():
            raise ValueError(
                f"{name}: condition contains entries that are out of bounds "
                f"(condition length {cond.shape[0]}, axis length {n})"
            )
        cond = lax.slice(cond, (0,), (n,))
    elif cond.shape[0] < n:
        pad = lax.full((n - cond.shape[0],), False, dtypes.bool_)
        cond = lax.concatenate([cond, pad], 0)
    if size is not None:
        size = indexing._static_int(size, name, "size")
        if not 0 <= size <= n:
            raise ValueError(
                f"{name}: size must be in [0, {n}] (the length of the axis), got {size}"
            )
    (idx,) = nonzero(cond, size=size)
    result = indexing._rewriting_take(arr, (slice(None),) * axis + (idx,), fun_name=name)
    if size is None:
        return result
    count = lax.reduce_sum(lax.convert_element_type(cond, idx.dtype), (0,))
    valid = lax.broadcast_in_dim(lax.lt(lax.iota(idx.dtype, size), count), result.shape, (axis,))
    return lax.select_n(valid, lax.full_like(result, fill_value), result)


def extract(condition, arr, *, size=None, fill_value=0):
    """The elements of ``arr`` where ``condition`` is true, flattened.

    Example: ``extract(x > 0, x)`` is ``x[x > 0]``.
    """
    util.check_arraylike("extract", condition, arr, names=["condition", "arr"])
    return compress(
        indexing._ravel(util.asarray(condition)),
        indexing._ravel(util.asarray(arr)),
        size=size,
        fill_value=fill_value,
    )
