"""Argument handling shared by every fungrad.numpy function: checking, dtype promotion (JAX's
lattice, weak types), numpy-style shape broadcasting, all written on lax, and static arguments
(``concrete_or_error``, ``canonicalize_shape``: shapes and sizes must be concrete, as in JAX)."""

from __future__ import annotations

import operator

import numpy as np

from fungrad import core, dtypes, lax
from fungrad.array import Array, is_concrete_array
from fungrad.config import config

_SCALAR_TYPES = (bool, int, float, complex)
# Array last: isinstance(x, Array) calls Array's metaclass (true for tracers) unless x is
# exactly an Array, and the common cases answer before it.
_ARRAYLIKE_TYPES = (core.Tracer, np.ndarray, np.generic, bool, int, float, complex, Array)


def is_arraylike(x) -> bool:
    return type(x) is Array or isinstance(x, _ARRAYLIKE_TYPES)


def check_arraylike(fun_name: str, *args, names=None) -> None:
    """TypeError naming the argument unless every arg is an array or a Python scalar."""
    for i, a in enumerate(args):
        if not is_arraylike(a):
            which = names[i] if names else f"argument {i}"
            extra = (
                " (lists and tuples are not arrays here: wrap them with fnp.asarray)"
                if isinstance(a, (list, tuple))
                else ""
            )
            raise TypeError(
                f"{fun_name} requires ndarray or scalar arguments, but {which} is "
                f"of type {type(a).__name__}{extra}"
            )


def plain_operand(x):
    """``x`` as an Array or tracer when that needs no dtype decision: Arrays and tracers
    themselves, and numpy arrays whose dtype is already canonical (copied: an Array freezes
    its buffer, which must not be the caller's). None for anything else (Python and numpy
    scalars, lists, 64-bit arrays without x64...), which the general argument handling takes.
    The fast paths of the numpy wrappers start here."""
    if type(x) is Array or isinstance(x, core.Tracer):
        return x
    if (
        type(x) is np.ndarray
        and x.dtype in _SUPPORTED_DTYPES
        and dtypes.canonicalize_dtype(x.dtype) == x.dtype
    ):
        return Array(np.array(x))
    if is_concrete_array(x):  # an Array subclass: a GpuArray (fungrad/devices.py)
        return x
    return None


_SUPPORTED_DTYPES = frozenset(dtypes.SUPPORTED)


def asarray(x, dtype=None, fun_name: str = "asarray", *, check_range: bool = False):
    """``x`` (array, scalar, nested list/tuple of them) as an Array/tracer; canonical dtypes.

    Python scalars stay weakly typed unless ``dtype`` is given. ``check_range`` (jnp.array,
    jnp.asarray and the scalar types, as JAX) converts Python numbers with numpy's conversion:
    an integer outside an integer dtype's range is an OverflowError; otherwise (``full``,
    ``astype``, ... as ``lax.convert_element_type``) it wraps.
    """
    if type(x) is Array or isinstance(x, core.Tracer) or is_concrete_array(x):
        return x if dtype is None else lax.convert_element_type(x, dtype)
    if isinstance(x, (list, tuple)):
        return _asarray_sequence(x, dtype, fun_name, check_range)
    if isinstance(x, (np.ndarray, np.generic)):
        if dtypes.kind(x.dtype) not in "biufc":
            raise TypeError(f"{fun_name}: numpy arrays of dtype {x.dtype} are not supported")
        dt = dtypes.canonicalize_dtype(x.dtype if dtype is None else dtype)
        if dt == x.dtype:  # a copy, no conversion (Arrays freeze their buffer)
            return Array(np.array(x))
        with np.errstate(all="ignore"):
            return Array(np.array(x, dtype=dt))
    if isinstance(x, _SCALAR_TYPES):
        if dtype is not None:
            dt = dtypes.canonicalize_dtype(dtype)
            with np.errstate(all="ignore"):
                if check_range and type(x) in (int, float):
                    # numpy's conversion, as JAX: OverflowError for an integer (or a float's
                    # integer part) outside an integer dtype's range, rather than wrapping.
                    return Array(np.asarray(x, dtype=dt))
                return Array(np.asarray(x).astype(dt)[()])
        return lax.utils.operand(x, fun_name)
    if hasattr(x, "__array__") and not isinstance(x, (str, bytes)):
        return asarray(np.asarray(x), dtype, fun_name)
    raise TypeError(f"{fun_name}: cannot convert a value of type {type(x).__name__} to an array")


def _asarray_sequence(seq, dtype, fun_name, check_range=False):
    leaves = []

    def collect(s):
        if isinstance(s, (list, tuple)):
            for e in s:
                collect(e)
        else:
            leaves.append(s)

    collect(seq)
    if any(isinstance(e, core.Tracer) for e in leaves):
        # A list that contains traced values: stack them with lax ops.
        from fungrad.numpy import stack

        return stack([asarray(e, dtype, fun_name) for e in seq])
    for e in leaves:
        if not is_arraylike(e):
            raise TypeError(
                f"{fun_name}: element of type {type(e).__name__} in a list cannot be "
                "converted to an array"
            )
    try:
        vals = np.array([np.asarray(e) if type(e) is Array else e for e in leaves], dtype=object)
        arr = np.array(_rebuild(seq, iter(vals)))
    except ValueError as e:
        # numpy's (and JAX's) error class: code that catches ValueError keeps working.
        raise ValueError(
            f"{fun_name}: ragged nested sequence cannot become an array: {e}"
        ) from None
    if dtype is None:
        dt, _ = (
            dtypes.result_type(*leaves, return_weak_type_flag=True)
            if leaves
            else (dtypes.default_float_dtype(), False)
        )
    else:
        dt = dtypes.canonicalize_dtype(dtype)
    with np.errstate(all="ignore"):
        if check_range and not any(type(e) is Array for e in leaves):
            # As JAX: numpy converts the nested numbers to dt itself, so an integer outside an
            # integer dtype's range is an OverflowError (astype of the int64 array would wrap).
            return Array(np.asarray(_rebuild(seq, iter(vals)), dtype=dt))
        return Array(arr.astype(dt))


def _rebuild(s, it):
    if isinstance(s, (list, tuple)):
        return [_rebuild(e, it) for e in s]
    return next(it)


def promote_dtypes(*args, fun_name: str = "promote_dtypes"):
    """Convert args to their common dtype (JAX's lattice); Python scalars stay weak where the
    result is weak."""
    if len(args) < 2:
        return [asarray(a, fun_name=fun_name) for a in args]
    dt, weak = dtypes.result_type(*args, return_weak_type_flag=True)
    return [_to_dtype(a, dt, weak, fun_name) for a in args]


def python_scalar_as(x, dtype: np.dtype, weak: bool, fun_name: str = "promote"):
    """The Python scalar ``x`` as a 0-d Array of ``dtype``. As in JAX, a Python int must fit the
    default integer dtype (else OverflowError) and then wraps into narrower integer dtypes."""
    if (
        isinstance(x, float)
        and dtypes.kind(dtype) == "f"
        and dtype.itemsize >= 4
        and (dtype.itemsize == 8 or not abs(x) > 3.4028234663852886e38)
    ):
        return Array(dtype.type(x), weak)  # correctly rounded, cannot overflow: no warning
    with np.errstate(all="ignore"):
        if isinstance(x, int) and not isinstance(x, bool):
            int_dtype = dtypes.default_int_dtype()
            info = np.iinfo(int_dtype)
            if not info.min <= x <= info.max:
                raise OverflowError(
                    f"{fun_name}: Python int {x} is out of range for the default integer dtype "
                    f"{int_dtype.name}; pass an explicitly typed array instead"
                )
            value = np.asarray(x, int_dtype).astype(dtype)
        else:
            value = np.asarray(x).astype(dtype)
    return Array(value[()], weak)


def _to_dtype(a, dt, weak, fun_name):
    if isinstance(a, _SCALAR_TYPES) and not isinstance(a, np.generic):
        return python_scalar_as(a, dt, weak, fun_name)
    a = asarray(a, fun_name=fun_name)
    if a.dtype != dt or a.weak_type != weak:
        return lax.convert_element_type(a, dt, weak)
    return a


def inexact_dtype(dtype) -> np.dtype:
    """JAX's ``to_inexact_dtype``: floats and complex stay, 64-bit integers become float64 and
    every other integer or bool becomes float32 (even with x64 enabled: ``sin(int32) ->
    float32``)."""
    dtype = np.dtype(dtype)
    if dtypes.is_inexact(dtype):
        return dtype
    return dtypes.float64 if dtype.itemsize == 8 else dtypes.float32


def promote_dtypes_inexact(*args, fun_name: str = "promote_dtypes_inexact"):
    """Promote, then integers and bools become floating (:func:`inexact_dtype`)."""
    args = promote_dtypes(*args, fun_name=fun_name)
    if args and not dtypes.is_inexact(args[0].dtype):
        dt = inexact_dtype(args[0].dtype)
        args = [lax.convert_element_type(a, dt, a.weak_type) for a in args]
    return args


def broadcast_shapes(
    *shapes, fun_name: str = "broadcast_shapes", error: type[Exception] = ValueError
) -> tuple[int, ...]:
    """numpy's broadcasting of shapes; on a mismatch ``error`` (ValueError, as
    ``jnp.broadcast_shapes``; elementwise operators pass TypeError, as JAX's lax shape rules
    raise) naming the operation and shapes."""
    ndim = max(map(len, shapes), default=0)
    out = []
    for sizes in zip(*[(1,) * (ndim - len(s)) + tuple(s) for s in shapes]):
        sizes = set(sizes)
        if len(sizes) > 1:
            sizes.discard(1)
            if len(sizes) > 1:
                raise error(
                    f"{fun_name}: incompatible shapes for broadcasting: "
                    + " and ".join(str(tuple(s)) for s in shapes)
                )
        out.append(sizes.pop())
    return tuple(out)


def broadcast_to_shape(x, shape, fun_name: str = "broadcast_to"):
    """Broadcast array ``x`` (numpy rules: align trailing dims) to ``shape``: one
    broadcast_in_dim (it accepts size-1 operand dimensions directly)."""
    shape = tuple(shape)
    if x.shape == shape:
        return x
    nlead = len(shape) - x.ndim
    if nlead < 0 or any(d not in (1, shape[nlead + i]) for i, d in enumerate(x.shape)):
        raise ValueError(
            f"{fun_name}: incompatible shapes for broadcasting: {tuple(x.shape)} "
            f"and requested shape {shape}"
        )
    return lax.broadcast_in_dim(x, shape, tuple(range(nlead, len(shape))))


def _rank_promotion(fun_name: str, shapes) -> None:
    """``numpy_rank_promotion`` is "warn" or "raise" and operands of different ranks meet."""
    msg = (
        f"{fun_name}: operands of shapes {' and '.join(str(tuple(s)) for s in shapes)} "
        "would broadcast by adding leading axes (implicit rank promotion), which the "
        f"option numpy_rank_promotion={config.numpy_rank_promotion!r} forbids. Add the axes "
        "explicitly (x[None, :], fnp.expand_dims, reshape), or allow it with "
        "fungrad.config.update('numpy_rank_promotion', 'allow')."
    )
    if config.numpy_rank_promotion == "raise":
        raise ValueError(msg)
    import warnings

    warnings.warn(msg, UserWarning, stacklevel=4)


def promote_shapes(fun_name: str, *args):
    """Broadcast non-scalar args to their common shape (0-d args are left for lax to broadcast).
    A mismatch is a TypeError, as in JAX (``jnp.ones(3) + jnp.ones(4)``)."""
    shapes = [a.shape for a in args]
    nonscalar = [s for s in shapes if s]
    if all(s == nonscalar[0] for s in nonscalar):  # equal shapes, 0-d ones broadcast in lax
        return list(args)
    if config.numpy_rank_promotion != "allow" and len({len(s) for s in nonscalar}) > 1:
        _rank_promotion(fun_name, nonscalar)
    result = broadcast_shapes(*shapes, fun_name=fun_name, error=TypeError)
    return [
        a if (not a.shape and result) else broadcast_to_shape(a, result, fun_name) for a in args
    ]


def promote_args(fun_name: str, *args):
    """check_arraylike + promote_dtypes + promote_shapes: what binary ufuncs need."""
    promoted = _promote_args_fast(fun_name, args)
    if promoted is not None:
        return promoted
    check_arraylike(fun_name, *args)
    return promote_shapes(fun_name, *promote_dtypes(*args, fun_name=fun_name))


def _promote_args_fast(fun_name: str, args):
    """:func:`promote_args` for the common cases, cheaply: arrays (or tracers) of one dtype
    and weak flag, and a strongly typed float array with Python floats and ints (which take
    its dtype, strongly typed, as JAX's promotion gives). None for anything else."""
    ref, same, scalars = None, True, False
    for a in args:
        if type(a) is Array or isinstance(a, core.Tracer):
            aval = a.aval
            if ref is None:
                ref = aval
            elif aval is not ref:
                if aval.dtype != ref.dtype or aval.weak_type != ref.weak_type:
                    return None
                same = same and aval.shape == ref.shape
        elif type(a) is float or type(a) is int:
            scalars = True
        else:
            return None
    if ref is None:
        return None
    if scalars:
        if ref.weak_type or dtypes.kind(ref.dtype) != "f":
            return None
        args = [
            python_scalar_as(a, ref.dtype, False, fun_name)
            if type(a) is float or type(a) is int
            else a
            for a in args
        ]
        same = False  # the scalars are 0-d: promote_shapes leaves them to lax
    return list(args) if same else promote_shapes(fun_name, *args)


def promote_args_inexact(fun_name: str, *args):
    """As :func:`promote_args`, then integers and bools become floating (:func:`inexact_dtype`)."""
    check_arraylike(fun_name, *args)
    return promote_shapes(fun_name, *promote_dtypes_inexact(*args, fun_name=fun_name))


def canonicalize_axis(axis, ndim: int, fun_name: str = "axis") -> int:
    """A non-negative axis; an AxisError (a ValueError) naming the operation if out of range."""
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(f"{fun_name}: axis must be an int, got {axis!r}") from None
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(
            f"{fun_name}: axis {axis} is out of bounds for an array of dimension {ndim}"
        )
    return axis % ndim if ndim else axis


def canonicalize_axes(axis, ndim: int, fun_name: str = "axis") -> tuple[int, ...]:
    """``axis`` (None, int or sequence) as a sorted tuple of distinct non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        axes = tuple(canonicalize_axis(a, ndim, fun_name) for a in axis)
        if len(set(axes)) != len(axes):
            raise ValueError(f"{fun_name}: repeated axis in {axis}")
        return tuple(sorted(axes))
    return (canonicalize_axis(axis, ndim, fun_name),)


# -- static (concrete) arguments ----------------------------------------------------------------


def concrete_or_error(x, context: str):
    """The concrete value of ``x`` (a Python scalar stays one; arrays become numpy values).

    An abstract tracer (inside ``make_jaxpr``/``jit``) raises ConcretizationTypeError whose
    message ends with ``context`` (which argument of which function needed the value).
    """
    if isinstance(x, core.Tracer):
        val = x.to_concrete_value()
        if val is None:
            raise core.ConcretizationTypeError(
                core.concretization_message("the value", x.aval, x) + f"\nIt arose in {context}."
            )
        return np.asarray(val)
    if type(x) is Array:
        return np.asarray(x)
    return x


def canonicalize_shape(shape, fun_name: str) -> tuple[int, ...]:
    """``shape`` (an int or a sequence of ints, concrete) as a tuple of non-negative ints."""
    if isinstance(shape, (tuple, list)) or getattr(shape, "ndim", 0) == 1:
        elems = list(shape)
    else:
        elems = [shape]
    out = []
    for d in elems:
        d = concrete_or_error(d, f"the shape argument of {fun_name} (shapes must be static)")
        try:
            d = operator.index(d)
        except TypeError:
            raise TypeError(
                f"{fun_name}: shape must be an int or a sequence of ints, got {shape!r}"
            ) from None
        if d < 0:
            raise ValueError(
                f"{fun_name}: negative dimensions are not allowed, got shape {shape!r}"
            )
        out.append(d)
    return tuple(out)
