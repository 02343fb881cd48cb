"""fungrad.numpy array creation: ``array``/``asarray``, ranges (``arange``, ``linspace``,
``logspace``, ``geomspace``), filled arrays (``zeros``, ``full``, ``*_like``), ``eye``/``tri``
and masks (``tril``/``triu``), grids (``meshgrid``, ``indices``, ``fromfunction``), ``astype``.

Everything is written on fungrad.lax (``full``, ``iota``, ``broadcasted_iota``,
``broadcast_in_dim``, ``select_n``, ``convert_element_type``...), so it traces. Sizes (shapes,
``num``, ``arange`` bounds) must be concrete, as in JAX: a traced size is a
ConcretizationTypeError that names the argument.
"""

from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING

import numpy as np

from fungrad import core, dtypes, lax
from fungrad.numpy import complex_parts, manipulation, ufuncs, util

if TYPE_CHECKING:
    from fungrad.array import Array
    from fungrad.typing import ArrayLike

__all__ = [
    "arange",
    "array",
    "asarray",
    "astype",
    "copy",
    "empty",
    "empty_like",
    "eye",
    "fromfunction",
    "full",
    "full_like",
    "geomspace",
    "identity",
    "indices",
    "linspace",
    "logspace",
    "meshgrid",
    "ones",
    "ones_like",
    "tri",
    "tril",
    "triu",
    "zeros",
    "zeros_like",
]


def _user_dtype(dtype, fun_name: str, shape=None):
    """Canonical dtype for a user-given ``dtype`` argument (None stays None)."""
    if dtype is None:
        return None
    if isinstance(dtype, int) and not isinstance(dtype, bool) and isinstance(shape, int):
        raise TypeError(
            f"{fun_name}: cannot interpret {dtype!r} as a dtype. Did you mean "
            f"{fun_name}(({shape}, {dtype})), with the shape as one tuple?"
        )
    try:
        return dtypes.check_user_dtype(dtype, fun_name, stacklevel=4)
    except TypeError as e:
        raise TypeError(f"{fun_name}: {e}") from None


def _iota(dt: np.dtype, shape, axis: int):
    """``lax.broadcasted_iota`` also for complex dtypes (counted in the real dtype)."""
    if dtypes.is_complex(dt):
        return lax.convert_element_type(
            lax.broadcasted_iota(dtypes.real_dtype(dt), shape, axis), dt
        )
    return lax.broadcasted_iota(dt, shape, axis)


def _inexact(dt: np.dtype) -> np.dtype:
    """JAX's ``to_inexact_dtype``: floats stay, 64-bit integers become float64 and other
    integers and bools float32, also with x64 (``linspace(int8, int8)`` is float32)."""
    return util.inexact_dtype(dt)


# -- array / asarray / astype / copy ----------------------------------------------------------


def array(object, dtype=None, copy: bool = True, order: str | None = "K", ndmin: int = 0) -> Array:
    """An Array from an array, a Python scalar or a nested list/tuple of them.

    Args:
        object: the value; Python scalars stay weakly typed unless ``dtype`` is given.
        dtype: optional dtype (canonicalised: float64 becomes float32 without x64).
        copy: accepted for NumPy compatibility; Arrays are immutable, so it has no effect.
        order: memory order; only ``"K"``, ``"A"``, ``"C"`` or None (Arrays are C-ordered).
        ndmin: minimum number of dimensions; leading axes of size 1 are added.

    Returns:
        An Array (a tracer under a transform).

    Example:
        >>> fnp.array([[1, 2], [3, 4]]).dtype
        dtype('int32')
    """
    del copy  # Arrays are immutable: a copy is never observable
    if order not in (None, "K", "A", "C"):
        raise ValueError(
            f"array: order must be 'K', 'A' or 'C' (Arrays are C-ordered), got {order!r}"
        )
    x = util.asarray(object, _user_dtype(dtype, "array"), "array", check_range=True)
    ndmin = operator.index(ndmin)
    if ndmin > x.ndim:
        x = lax.reshape(x, (1,) * (ndmin - x.ndim) + tuple(x.shape))
    return x


def asarray(a, dtype=None, order: str | None = None, *, copy: bool | None = None) -> Array:
    """``a`` as an Array: like :func:`array`; ``copy`` has no effect (Arrays are immutable).

    Example:
        >>> fnp.asarray(1.0)   # a weakly typed float32 scalar
        Array(1., dtype=float32, weak_type=True)
    """
    return array(a, dtype=dtype, order=order)


def astype(x, dtype, /, *, copy: bool = False):
    """``x`` converted to ``dtype`` (None means the default float dtype); never weakly typed.

    Float -> int conversion truncates toward zero (saturating; NaN -> 0), as in JAX.

    Example:
        >>> fnp.astype(fnp.array([1.7, -1.7]), "int32")
        Array([ 1, -1], dtype=int32)
    """
    del copy
    util.check_arraylike("astype", x, names=["x"])
    dt = dtypes.default_float_dtype() if dtype is None else _user_dtype(dtype, "astype")
    x = complex_parts.real_for_cast(util.asarray(x, fun_name="astype"), dt)
    return lax.convert_element_type(x, dt)


def copy(a, order: str | None = None):
    """A copy of ``a`` (Arrays are immutable, so the value itself). Weak types are kept."""
    util.check_arraylike("copy", a, names=["a"])
    return array(a, order=order)


# -- filled arrays ------------------------------------------------------------------------------


def full(shape, fill_value, dtype=None) -> Array:
    """An array of ``shape`` filled with ``fill_value`` (a scalar, or an array broadcast to
    ``shape``). Without ``dtype`` the fill value's dtype is used (weak for Python scalars).

    Example:
        >>> fnp.full((2, 3), fnp.arange(3))
        Array([[0, 1, 2],
               [0, 1, 2]], dtype=int32)
    """
    dt = _user_dtype(dtype, "full", shape)
    util.check_arraylike("full", fill_value, names=["fill_value"])
    shape = util.canonicalize_shape(shape, "full")
    fill = util.asarray(fill_value, dt, "full")
    if fill.ndim == 0:
        return lax.full(shape, fill)
    return manipulation.broadcast_to(fill, shape)


def zeros(shape, dtype=None) -> Array:
    """An array of zeros (default dtype float32, float64 with x64).

    Example:
        >>> fnp.zeros((2,), "int32")
        Array([0, 0], dtype=int32)
    """
    dt = _user_dtype(dtype, "zeros", shape) or dtypes.default_float_dtype()
    return lax.full(util.canonicalize_shape(shape, "zeros"), 0, dt)


def ones(shape, dtype=None) -> Array:
    """An array of ones (default dtype float32, float64 with x64)."""
    dt = _user_dtype(dtype, "ones", shape) or dtypes.default_float_dtype()
    return lax.full(util.canonicalize_shape(shape, "ones"), 1, dt)


def empty(shape, dtype=None):
    """As :func:`zeros`: arrays are immutable, so uninitialised memory is never exposed."""
    dt = _user_dtype(dtype, "empty", shape) or dtypes.default_float_dtype()
    return lax.full(util.canonicalize_shape(shape, "empty"), 0, dt)


def full_like(a, fill_value, dtype=None, shape=None):
    """An array with ``a``'s shape and dtype (or ``shape``/``dtype``) filled with
    ``fill_value`` (a scalar or an array broadcast to the shape). Weak if ``a`` is weak and no
    dtype is given.

    Example:
        >>> fnp.full_like(fnp.arange(3), 2.5)
        Array([2, 2, 2], dtype=int32)
    """
    util.check_arraylike("full_like", fill_value, names=["fill_value"])
    a_shape, a_dtype, a_weak = _prototype(a, "full_like", "a")
    dt = _user_dtype(dtype, "full_like")
    weak = a_weak and dt is None
    dt = a_dtype if dt is None else dt
    shape = a_shape if shape is None else util.canonicalize_shape(shape, "full_like")
    fill = util.asarray(fill_value, fun_name="full_like")
    # as in JAX, only a scalar fill keeps ``a``'s weak type
    fill = lax.convert_element_type(fill, dt, weak and fill.ndim == 0)
    if fill.ndim == 0:
        return lax.full(shape, fill)
    return manipulation.broadcast_to(fill, shape)


def _prototype(a, fun_name: str, name: str):
    """``(shape, dtype, weak_type)`` of the prototype of a ``*_like`` function: an array-like,
    or (as in JAX) a duck-typed array, any object with ``shape`` and ``dtype`` such as a
    ``ShapeDtypeStruct``."""
    if not util.is_arraylike(a) and hasattr(a, "shape") and hasattr(a, "dtype"):
        dt = dtypes.check_user_dtype(a.dtype, fun_name)
        return tuple(a.shape), dt, bool(getattr(a, "weak_type", False))
    util.check_arraylike(fun_name, a, names=[name])
    return tuple(np.shape(a)), *dtypes.dtype_and_weak(a)


def zeros_like(a: ArrayLike, dtype=None, shape=None) -> Array:
    """Zeros with ``a``'s shape and dtype (or the given ``shape``/``dtype``); ``a`` may be an
    array or anything with ``shape`` and ``dtype`` (a ``ShapeDtypeStruct``)."""
    _prototype(a, "zeros_like", "a")
    return full_like(a, 0, dtype, shape)


def ones_like(a: ArrayLike, dtype=None, shape=None) -> Array:
    """Ones with ``a``'s shape and dtype (or the given ``shape``/``dtype``); ``a`` as in
    :func:`zeros_like`."""
    _prototype(a, "ones_like", "a")
    return full_like(a, 1, dtype, shape)


def empty_like(prototype, dtype=None, shape=None):
    """As :func:`zeros_like` (arrays are immutable: no uninitialised memory)."""
    _prototype(prototype, "empty_like", "prototype")
    return full_like(prototype, 0, dtype, shape)


# -- ranges --------------------------------------------------------------------------------------


def arange(start, stop=None, step=None, dtype=None) -> Array:
    """Evenly spaced values in ``[start, stop)`` with spacing ``step`` (concrete bounds).

    The dtype is JAX's promotion of the bounds: Python ints give int32 (int64 with x64), any
    float gives float32; the result is never weakly typed. Values are ``start + step * i``
    computed in the result dtype (float16 in float32), as in JAX.

    Example:
        >>> fnp.arange(5, 0, -2)
        Array([5, 3, 1], dtype=int32)
    """
    dt = _user_dtype(dtype, "arange")
    if dt is not None and dtypes.is_complex(dt):  # real values, then cast (as JAX)
        return lax.convert_element_type(arange(start, stop, step, dtypes.real_dtype(dt)), dt)
    start_name = "stop" if stop is None and step is None else "start"
    bounds = []
    for name, v in ((start_name, start), ("stop", stop), ("step", step)):
        if v is None:
            bounds.append(None)
            continue
        util.check_arraylike("arange", v, names=[name])
        v = util.concrete_or_error(
            v,
            f"the arange argument {name!r} (the output size must be "
            "static; use fixed bounds or fnp.linspace)",
        )
        if np.ndim(v) != 0:
            raise ValueError(
                f"arange: arguments must be scalars, got {name} with shape {np.shape(v)}"
            )
        if np.iscomplexobj(v):
            raise ValueError(
                f"arange: a complex {name} ({v!r}) is not supported (nor in JAX since "
                "v0.10); pass real bounds with dtype=complex64, or use fnp.linspace"
            )
        bounds.append(v)
    start, stop, step = bounds
    if dt is None:
        dt = dtypes.result_type(*(b for b in bounds if b is not None))
    if stop is None:
        start, stop = 0, start
    if step is not None and _scalar(step) == 0:
        raise ZeroDivisionError("arange: step must not be zero")
    if step is None:
        size = max(0, math.ceil(_scalar(stop) - _scalar(start)))
        if _scalar(start) == 0:
            return lax.iota(dt, size)
        return lax.add(lax.convert_element_type(start, dt), lax.iota(dt, size))
    size = max(0, math.ceil((_scalar(stop) - _scalar(start)) / _scalar(step)))
    work = dtypes.float32 if dt == dtypes.float16 else dt
    out = lax.add(
        lax.convert_element_type(start, work),
        lax.mul(lax.convert_element_type(step, work), lax.iota(work, size)),
    )
    return lax.convert_element_type(out, dt)


def _scalar(v):
    """A concrete bound as a Python number (exact for ints)."""
    v = np.asarray(v)
    return int(v) if dtypes.kind(v.dtype) in "biu" else float(v)


def _check_num(num, fun_name: str) -> int:
    num = operator.index(util.concrete_or_error(num, f"the {fun_name} argument 'num'"))
    if num < 0:
        raise ValueError(f"{fun_name}: number of samples num={num} must be non-negative")
    return num


def linspace(
    start,
    stop,
    num: int = 50,
    endpoint: bool = True,
    retstep: bool = False,
    dtype=None,
    axis: int = 0,
):
    """``num`` evenly spaced values from ``start`` to ``stop`` (included if ``endpoint``).

    ``start``/``stop`` may be arrays (broadcast together); the samples run along ``axis`` of
    the result. Values are ``start * (1 - t) + stop * t`` so both endpoints are exact. Integer
    dtypes take the floor. With ``retstep`` also returns the spacing (NaN when num <= 1 with
    endpoint, as in JAX).

    Example:
        >>> fnp.linspace(0, 1, 5)
        Array([0.  , 0.25, 0.5 , 0.75, 1.  ], dtype=float32)
    """
    num = _check_num(num, "linspace")
    util.check_arraylike("linspace", start, stop, names=["start", "stop"])
    dt = _user_dtype(dtype, "linspace")
    if dt is None:
        dt = _inexact(dtypes.result_type(start, stop))
    cdt = _inexact(dt)
    start = util.asarray(start, cdt, "linspace")
    stop = util.asarray(stop, cdt, "linspace")
    bshape = util.broadcast_shapes(start.shape, stop.shape, fun_name="linspace")
    start = util.broadcast_to_shape(start, bshape)
    stop = util.broadcast_to_shape(stop, bshape)
    axis = operator.index(axis)
    if not -len(bshape) - 1 <= axis <= len(bshape):
        raise np.exceptions.AxisError(
            f"linspace: axis {axis} is out of bounds for a result of dimension {len(bshape) + 1}"
        )
    axis = axis % (len(bshape) + 1)
    out_shape = bshape[:axis] + (num,) + bshape[axis:]
    div = num - 1 if endpoint else num
    if num > 1:
        delta = lax.div(lax.sub(stop, start), lax.full((), div, cdt))
        t_shape = bshape[:axis] + (div,) + bshape[axis:]
        t = lax.div(_iota(cdt, t_shape, axis), lax.full((), div, cdt))
        expand = tuple(d for d in range(len(t_shape)) if d != axis)
        lo = lax.broadcast_in_dim(start, t_shape, expand)
        hi = lax.broadcast_in_dim(stop, t_shape, expand)
        out = lax.add(lax.mul(lo, lax.sub(lax.full((), 1, cdt), t)), lax.mul(hi, t))
        if endpoint:
            out = lax.concatenate(
                [out, lax.reshape(stop, out_shape[:axis] + (1,) + out_shape[axis + 1 :])], axis
            )
    elif num == 1:
        delta = lax.full((), np.nan, cdt) if endpoint else lax.sub(stop, start)
        out = lax.reshape(start, out_shape)
    else:
        delta = lax.full((), np.nan, cdt)
        out = lax.full(out_shape, 0, cdt)
    if dtypes.is_int(dt) and dtypes.is_float(out.dtype):
        out = lax.floor(out)
    out = lax.convert_element_type(out, dt)
    return (out, delta) if retstep else out


def logspace(
    start, stop, num: int = 50, endpoint: bool = True, base=10.0, dtype=None, axis: int = 0
):
    """``base ** linspace(start, stop, num, endpoint)``, samples along ``axis``.

    Example:
        >>> fnp.logspace(0, 2, 3)
        Array([  1.,  10., 100.], dtype=float32)
    """
    num = _check_num(num, "logspace")
    util.check_arraylike("logspace", start, stop, base, names=["start", "stop", "base"])
    dt = _user_dtype(dtype, "logspace")
    if dt is None:
        dt = _inexact(dtypes.result_type(start, stop))
    cdt = _inexact(dt)
    lin = linspace(
        util.asarray(start, cdt), util.asarray(stop, cdt), num, endpoint=endpoint, axis=axis
    )
    return lax.convert_element_type(ufuncs.power(base, lin), dt)


def geomspace(start, stop, num: int = 50, endpoint: bool = True, dtype=None, axis: int = 0):
    """``num`` values spaced evenly on a log scale from ``start`` to ``stop`` (same sign).

    NB: as in JAX, a zero or sign-changing range gives NaN instead of NumPy's error.

    Example:
        >>> fnp.geomspace(1, 100, 3)
        Array([  1.,  10., 100.], dtype=float32)
    """
    num = _check_num(num, "geomspace")
    util.check_arraylike("geomspace", start, stop, names=["start", "stop"])
    dt = _user_dtype(dtype, "geomspace")
    if dt is None:
        dt = _inexact(dtypes.result_type(start, stop))
    cdt = _inexact(dt)
    start = util.asarray(start, cdt)
    stop = util.asarray(stop, cdt)
    sign = ufuncs.sign(start)
    res = logspace(
        ufuncs.log10(ufuncs.divide(start, sign)),
        ufuncs.log10(ufuncs.divide(stop, sign)),
        num,
        endpoint=endpoint,
        dtype=cdt,
        axis=0,
    )
    res = ufuncs.multiply(sign, res)
    res = manipulation.moveaxis(res, 0, util.canonicalize_axis(axis, res.ndim, "geomspace"))
    return lax.convert_element_type(res, dt)


# -- eye, tri, masks -------------------------------------------------------------------------


def _diagonal_offset(k, fun_name: str):
    """``k`` as a Python int, or as an int32 0-d array when it is traced (JAX allows that)."""
    if isinstance(k, core.Tracer):
        if not dtypes.is_int(k.dtype) or k.ndim:
            raise TypeError(f"{fun_name}: k must be an integer scalar, got {k.aval.str_short()}")
        return lax.convert_element_type(k, dtypes.int32)
    return operator.index(k)


def _tri_mask(n: int, m: int, k, fun_name: str, cmp):
    """Boolean (n, m) mask ``cmp(row + k, col)`` built from iotas."""
    k = _diagonal_offset(k, fun_name)
    if isinstance(k, int):
        k = max(-n - 1, min(m + 1, k))  # keep the offset inside int32
    rows = lax.broadcasted_iota(dtypes.int32, (n, m), 0)
    cols = lax.broadcasted_iota(dtypes.int32, (n, m), 1)
    return cmp(lax.add(rows, k), cols)


def eye(N, M=None, k=0, dtype=None) -> Array:
    """A 2-D array with ones on the ``k``-th diagonal and zeros elsewhere.

    Example:
        >>> fnp.eye(2, 3, k=1)
        Array([[0., 1., 0.],
               [0., 0., 1.]], dtype=float32)
    """
    dt = _user_dtype(dtype, "eye") or dtypes.default_float_dtype()
    (n,) = util.canonicalize_shape(N, "eye")
    m = n if M is None else util.canonicalize_shape(M, "eye")[0]
    return lax.convert_element_type(_tri_mask(n, m, k, "eye", lax.eq), dt)


def identity(n, dtype=None):
    """The ``n`` x ``n`` identity matrix."""
    return eye(n, dtype=dtype)


def tri(N, M=None, k: int = 0, dtype=None):
    """A 2-D array with ones at and below the ``k``-th diagonal, zeros above.

    Example:
        >>> fnp.tri(3, 2, -1, dtype="int32")
        Array([[0, 0],
               [1, 0],
               [1, 1]], dtype=int32)
    """
    dt = _user_dtype(dtype, "tri") or dtypes.default_float_dtype()
    (n,) = util.canonicalize_shape(N, "tri")
    m = n if M is None else util.canonicalize_shape(M, "tri")[0]
    return lax.convert_element_type(_tri_mask(n, m, k, "tri", lax.ge), dt)


def _tri_select(m, k, fun_name: str, lower: bool):
    util.check_arraylike(fun_name, m, names=["m"])
    x = util.asarray(m, fun_name=fun_name)
    if x.ndim < 2:
        # NB: NumPy broadcasts a 1-D input to 2-D; JAX requires at least 2-D.
        raise ValueError(f"{fun_name}: argument must be at least 2-D, got shape {x.shape}")
    n_, m_ = x.shape[-2:]
    if lower:
        mask = _tri_mask(n_, m_, k, fun_name, lax.ge)
    else:
        mask = _tri_mask(
            n_,
            m_,
            lax.sub(k, 1) if isinstance(k, core.Tracer) else operator.index(k) - 1,
            fun_name,
            lax.lt,
        )
    mask = lax.broadcast_in_dim(mask, x.shape, (x.ndim - 2, x.ndim - 1))
    zero = lax.full(x.shape, lax.convert_element_type(0, x.dtype, x.weak_type))
    return lax.select_n(mask, zero, x)


def tril(m, k: int = 0):
    """``m`` with the elements above the ``k``-th diagonal (of the last two axes) zeroed."""
    return _tri_select(m, k, "tril", lower=True)


def triu(m, k: int = 0):
    """``m`` with the elements below the ``k``-th diagonal (of the last two axes) zeroed."""
    return _tri_select(m, k, "triu", lower=False)


# -- grids ------------------------------------------------------------------------------------


def meshgrid(*xi, copy: bool = True, sparse: bool = False, indexing: str = "xy"):
    """Coordinate arrays from 1-D coordinate vectors ``xi`` (a list of N arrays).

    ``indexing="xy"`` (Cartesian) swaps the first two output axes relative to ``"ij"``
    (matrix indexing); ``sparse=True`` returns broadcastable arrays with size-1 axes.

    Example:
        >>> [g.shape for g in fnp.meshgrid(fnp.arange(2), fnp.arange(3))]
        [(3, 2), (3, 2)]
    """
    util.check_arraylike("meshgrid", *xi)
    if not copy:
        raise ValueError("meshgrid: only copy=True is supported (Arrays are immutable)")
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    args = [util.asarray(x, fun_name="meshgrid") for x in xi]
    if any(a.ndim != 1 for a in args):
        raise ValueError(
            f"meshgrid: arguments must be 1-D, got shapes {[tuple(a.shape) for a in args]}"
        )
    swap = indexing == "xy" and len(args) >= 2
    if swap:
        args[0], args[1] = args[1], args[0]
    full_shape = tuple(a.shape[0] for a in args)
    out = []
    for i, a in enumerate(args):
        shape = (
            full_shape
            if not sparse
            else tuple(d if j == i else 1 for j, d in enumerate(full_shape))
        )
        out.append(lax.broadcast_in_dim(a, shape, (i,)))
    if swap:
        out[0], out[1] = out[1], out[0]
    return out


def indices(dimensions, dtype=None, sparse: bool = False):
    """Index grids of a grid of shape ``dimensions``: one array per axis holding that axis's
    index. Dense: stacked into shape ``(N, *dimensions)``; sparse: a tuple of broadcastable
    arrays.

    Example:
        >>> fnp.indices((2, 3))[1]
        Array([[0, 1, 2],
               [0, 1, 2]], dtype=int32)
    """
    dims = util.canonicalize_shape(tuple(dimensions), "indices")
    dt = _user_dtype(dtype, "indices") or dtypes.default_int_dtype()
    out = _index_grids(dims, dt, sparse)
    if sparse:
        return tuple(out)
    if not out:
        return lax.full((0,), 0, dt)
    return manipulation.stack(out, 0)


def _index_grids(dims: tuple[int, ...], dt, sparse: bool) -> list:
    out = []
    for i, d in enumerate(dims):
        shape = dims if not sparse else tuple(d if j == i else 1 for j in range(len(dims)))
        out.append(_iota(dt, shape, i))
    return out


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """``function(*coordinate_arrays, **kwargs)`` where coordinate array ``i`` holds the index
    along axis ``i`` of a grid of ``shape`` (in ``dtype``, default float32).

    NB: the function receives the full coordinate grids at once, as in NumPy (JAX vmaps it
    over scalars instead; the result is the same for elementwise functions).

    Example:
        >>> fnp.fromfunction(lambda i, j: i + j, (2, 3), dtype="int32")
        Array([[0, 1, 2],
               [1, 2, 3]], dtype=int32)
    """
    shape = util.canonicalize_shape(shape, "fromfunction")
    dt = _user_dtype(dtype, "fromfunction")
    return function(*_index_grids(shape, dt, sparse=False), **kwargs)
