"""Operators, methods and properties of ``fungrad.Array`` and of tracers (``x + y``, ``x[i]``,
``x.at[i].set(v)``, ``x.sum()``, ``x.T``...), so eager and traced code read alike.

:func:`install` (called once by ``fungrad.numpy``) sets them on both classes. Operators call
the fungrad.numpy functions, so Python scalars are weakly typed (``x * 2.0`` keeps float32,
``int32 array + 1`` stays int32). An operand that is not an array or scalar makes the operator
return ``NotImplemented``, so Python raises its usual TypeError naming both operand types (or
lets the other operand's reflected method handle it).

Tracer already defines ``__bool__``, ``__int__``, ``__float__``, ``__index__``, ``__len__``,
``__iter__`` and ``__array__`` (core.py): they are left alone, and ``item``/``tolist`` on a
tracer go through ``__array__``, which raises for abstract values.
"""

from __future__ import annotations

import operator

import numpy as np

from fungrad import core, dtypes, lax
from fungrad.array import Array
from fungrad.numpy import complex_parts, indexing, linear, logic, reductions, ufuncs

# The operand types operators accept (as jax.Array: Python scalars, numpy values, arrays).
# Array last: isinstance(x, Array) calls Array's metaclass (true for tracers) unless x is
# exactly an Array, and the other types answer first.
_ACCEPTED = (bool, int, float, complex, np.generic, np.ndarray, core.Tracer, Array)
# Containers are rejected outright by comparisons (== would otherwise compare identities).
_REJECTED_EQ = (list, tuple, dict, set)


def _fnp():
    import fungrad.numpy as fnp

    return fnp


# ---------------------------------------------------------------------------------------------
# Operators


def _binary(fn, reflected: bool = False):
    def op(self, other):
        if not isinstance(other, _ACCEPTED):
            return NotImplemented
        return fn(other, self) if reflected else fn(self, other)

    return op


def _comparison(fn, symbol: str):
    def op(self, other):
        if type(other) in _REJECTED_EQ:
            raise TypeError(
                f"unsupported operand type(s) for {symbol}: "
                f"{type(self).__name__!r} and {type(other).__name__!r}"
            )
        if not isinstance(other, _ACCEPTED):
            return NotImplemented
        return fn(self, other)

    return op


def _pow(self, other, modulo=None):
    if modulo is not None:
        raise TypeError("pow() with a modulus is not supported for arrays")
    if not isinstance(other, _ACCEPTED):
        return NotImplemented
    return ufuncs.power(self, other)


def _rpow(self, other, modulo=None):
    if modulo is not None:
        raise TypeError("pow() with a modulus is not supported for arrays")
    if not isinstance(other, _ACCEPTED):
        return NotImplemented
    return ufuncs.power(other, self)


def _round_operator(self, ndigits=None):
    """``round(x)`` (no digits) is an integer array, as Python's round of a float is an int
    and as in JAX (the default integer dtype); ``round(x, n)`` keeps the dtype."""
    out = ufuncs.round(self, 0 if ndigits is None else ndigits)
    return out.astype(int) if ndigits is None else out


def _getitem(self, key):
    return indexing.getitem(self, key)


def _setitem(self, key, value):
    raise TypeError(
        f"{type(self).__name__!r} object does not support item assignment: fungrad "
        "arrays are immutable. Use x = x.at[idx].set(value) (or .add, .multiply...) "
        "instead"
    )


def _contains(self, element):
    """``element in x``, as JAX's (which departs from numpy's on purpose): ``x`` must be 1-d
    and ``element`` a scalar; strings and None are TypeErrors."""
    if element is None or isinstance(element, str):
        raise TypeError(f"Array.__contains__: unsupported operand type {type(element)}.")
    query = np.shape(element)
    if self.ndim != 1:
        raise ValueError(
            "Array.__contains__: search array must be one-dimensional, got "
            f"arr.shape={self.shape}; use (x == value).any() to search every element"
        )
    if query != ():
        raise ValueError(f"Array.__contains__: query value must be a scalar, got shape {query}")
    return bool(reductions.any(logic.equal(self, element)))


_OPERATORS = {
    "__add__": _binary(ufuncs.add),
    "__radd__": _binary(ufuncs.add, True),
    "__sub__": _binary(ufuncs.subtract),
    "__rsub__": _binary(ufuncs.subtract, True),
    "__mul__": _binary(ufuncs.multiply),
    "__rmul__": _binary(ufuncs.multiply, True),
    "__truediv__": _binary(ufuncs.true_divide),
    "__rtruediv__": _binary(ufuncs.true_divide, True),
    "__floordiv__": _binary(ufuncs.floor_divide),
    "__rfloordiv__": _binary(ufuncs.floor_divide, True),
    "__mod__": _binary(ufuncs.remainder),
    "__rmod__": _binary(ufuncs.remainder, True),
    "__divmod__": _binary(ufuncs.divmod),
    "__rdivmod__": _binary(ufuncs.divmod, True),
    "__pow__": _pow,
    "__rpow__": _rpow,
    "__matmul__": _binary(linear.matmul),
    "__rmatmul__": _binary(linear.matmul, True),
    "__and__": _binary(logic.bitwise_and),
    "__rand__": _binary(logic.bitwise_and, True),
    "__or__": _binary(logic.bitwise_or),
    "__ror__": _binary(logic.bitwise_or, True),
    "__xor__": _binary(logic.bitwise_xor),
    "__rxor__": _binary(logic.bitwise_xor, True),
    "__lshift__": _binary(logic.left_shift),
    "__rlshift__": _binary(logic.left_shift, True),
    "__rshift__": _binary(logic.right_shift),
    "__rrshift__": _binary(logic.right_shift, True),
    "__eq__": _comparison(logic.equal, "=="),
    "__ne__": _comparison(logic.not_equal, "!="),
    "__lt__": _comparison(logic.less, "<"),
    "__le__": _comparison(logic.less_equal, "<="),
    "__gt__": _comparison(logic.greater, ">"),
    "__ge__": _comparison(logic.greater_equal, ">="),
    "__neg__": lambda self: ufuncs.negative(self),
    "__pos__": lambda self: ufuncs.positive(self),
    "__abs__": lambda self: ufuncs.absolute(self),
    "__invert__": lambda self: logic.invert(self),
    "__round__": _round_operator,
    "__getitem__": _getitem,
    "__setitem__": _setitem,
    "__contains__": _contains,
}

# ---------------------------------------------------------------------------------------------
# Methods


def _forward(name: str):
    """A method calling ``fungrad.numpy.<name>(self, ...)`` with the same arguments."""

    def method(self, *args, **kwargs):
        return getattr(_fnp(), name)(self, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"Method form of :func:`fungrad.numpy.{name}`."
    return method


def _shape_args(args, what: str):
    """``f(2, 3)``, ``f((2, 3))`` and ``f([2, 3])`` all mean the tuple ``(2, 3)``."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    try:
        return tuple(operator.index(a) for a in args)
    except TypeError:
        raise TypeError(f"{what}: expected integers, got {args!r}") from None


def reshape(self, *shape, order: str = "C"):
    """Reshape to ``shape`` (``x.reshape(2, 3)`` or ``x.reshape((2, 3))``; one entry may be -1)."""
    return _fnp().reshape(self, _shape_args(shape, "reshape"), order=order)


def transpose(self, *axes):
    """Permute the axes (``x.transpose()`` reverses them; ``x.transpose(1, 0, 2)`` or
    ``x.transpose((1, 0, 2))`` give the order)."""
    if not axes or (len(axes) == 1 and axes[0] is None):
        return _fnp().transpose(self)
    return _fnp().transpose(self, _shape_args(axes, "transpose"))


def astype(self, dtype, copy: bool = False, device=None):
    """Cast to ``dtype`` (canonicalised: float64 becomes float32, with a warning, unless x64
    is enabled)."""
    del copy, device
    dt = dtypes.check_user_dtype(dtype, "astype")
    return lax.convert_element_type(complex_parts.real_for_cast(self, dt), dt)


def flatten(self, order: str = "C"):
    """The elements as a 1-d array."""
    return _fnp().ravel(self, order=order)


def copy(self):
    """A copy (arrays are immutable, so this is the array itself)."""
    return self


def item(self, *args):
    """The element as a Python scalar (a traced value must be concrete)."""
    return np.asarray(self).item(*args)


def tolist(self):
    """The array as nested Python lists (a traced value must be concrete)."""
    return np.asarray(self).tolist()


def view(self, dtype=None, type=None):  # noqa: A002  (numpy's and JAX's name)
    """The same bits read as ``dtype`` (``lax.bitcast_convert_type``), as JAX's: a wider or
    narrower dtype changes the size of the last axis (``int16[1,2,3].view(int8)`` is
    ``int8[1,2,6]``); bool counts as 8 bits (viewing bytes as bool is defined for 0 and 1)."""
    if type is not None:
        raise NotImplementedError("`type` argument of array.view() is not supported.")
    if dtype is None:
        return self
    dt = dtypes.check_user_dtype(dtype, "view")
    if dt == self.dtype:
        return self
    src = self if self.dtype != np.bool_ else lax.convert_element_type(self, np.uint8)
    raw = np.dtype(np.uint8) if dt == np.bool_ else dt
    a, b = src.dtype.itemsize, raw.itemsize
    if a != b:
        if self.ndim == 0:
            raise ValueError(
                f"view: a 0-d array of {self.dtype} cannot be viewed as {dt}, whose itemsize "
                "differs; reshape it to 1-d first"
            )
        if (self.shape[-1] * a) % b:
            raise ValueError(
                f"view: the last axis ({self.shape[-1]} x {a} bytes of {self.dtype}) does not "
                f"divide into {dt} elements of {b} bytes"
            )
    if a < b:  # several source elements make one
        src = src.reshape(*self.shape[:-1], self.shape[-1] * a // b, b // a)
    out = lax.bitcast_convert_type(src, raw)
    if a > b:  # one source element makes several
        out = out.reshape(*self.shape[:-1], self.shape[-1] * a // b)
    return out != 0 if dt == np.bool_ else out


def compress(self, condition, axis=None, *, size=None, fill_value=0, out=None):
    """``fnp.compress(condition, self, ...)``: the elements (along ``axis``) where
    ``condition`` holds."""
    return _fnp().compress(condition, self, axis=axis, size=size, fill_value=fill_value, out=out)


def choose(self, choices, out=None, mode="raise"):
    """``fnp.choose(self, choices, ...)``: ``choices[self[i]][i]`` elementwise."""
    return _fnp().choose(self, choices, out=out, mode=mode)


def argpartition(self, kth, axis=-1):
    """``fnp.argpartition(self, kth, axis)``."""
    return _fnp().argpartition(self, kth, axis=axis)


def _flat_property(self):
    raise NotImplementedError(
        "JAX Arrays do not implement the arr.flat property: consider arr.flatten() instead."
    )


def tobytes(self, order: str = "C") -> bytes:
    """The raw bytes of the (concrete) array, as ``np.ndarray.tobytes``."""
    return np.asarray(self).tobytes(order=order)


def _transpose_property(self):
    return lax.transpose(self, tuple(reversed(range(self.ndim))))


def _matrix_transpose_property(self):
    if self.ndim < 2:
        raise ValueError(
            f"mT: matrix transpose needs at least 2 dimensions, got an array of shape {self.shape}"
        )
    perm = tuple(range(self.ndim - 2)) + (self.ndim - 1, self.ndim - 2)
    return lax.transpose(self, perm)


_METHODS = {
    "reshape": reshape,
    "transpose": transpose,
    "astype": astype,
    "flatten": flatten,
    "ravel": flatten,
    "copy": copy,
    "sum": reductions.sum,
    "prod": reductions.prod,
    "mean": reductions.mean,
    "max": reductions.max,
    "min": reductions.min,
    "argmax": reductions.argmax,
    "argmin": reductions.argmin,
    "any": reductions.any,
    "all": reductions.all,
    "std": reductions.std,
    "var": reductions.var,
    "ptp": reductions.ptp,
    "cumsum": reductions.cumsum,
    "cumprod": reductions.cumprod,
    "clip": ufuncs.clip,
    "round": ufuncs.round,
    "conj": complex_parts.conj,
    "conjugate": complex_parts.conjugate,
    # Functions that live in modules other helpers own, looked up when called.
    "squeeze": _forward("squeeze"),
    "swapaxes": _forward("swapaxes"),
    "repeat": _forward("repeat"),
    "take": _forward("take"),
    "dot": _forward("dot"),
    "nonzero": _forward("nonzero"),
    "sort": _forward("sort"),
    "argsort": _forward("argsort"),
    "trace": _forward("trace"),
    "diagonal": _forward("diagonal"),
    "searchsorted": _forward("searchsorted"),
    "compress": compress,
    "choose": choose,
    "argpartition": argpartition,
    "view": view,
    "tobytes": tobytes,
}

_PROPERTIES = {
    "T": _transpose_property,
    "mT": _matrix_transpose_property,
    "real": complex_parts.real,
    "imag": complex_parts.imag,
    "at": lambda self: indexing.IndexUpdateHelper(self),
    "flat": _flat_property,
}

# Tracer-only: Array defines these itself on its concrete value.
_TRACER_METHODS = {"item": item, "tolist": tolist}


def install() -> None:
    """Set the operators, methods and properties on Array and Tracer."""
    for cls in (Array, core.Tracer):
        for name, op in _OPERATORS.items():
            setattr(cls, name, op)
        for name, method in _METHODS.items():
            setattr(cls, name, method)
        for name, prop in _PROPERTIES.items():
            setattr(cls, name, property(prop))
    for name, method in _TRACER_METHODS.items():
        setattr(core.Tracer, name, method)
