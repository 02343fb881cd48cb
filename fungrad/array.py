"""``fungrad.Array``: an immutable concrete array.

An Array holds a read-only numpy value (an ``ndarray`` or a numpy scalar for 0-d results) and
a ``weak_type`` flag. Operators and methods (``+``, ``@``, ``x[idx]``, ``.at``, ``.sum()``...)
are installed by ``fungrad.numpy.array_methods`` on both Array and Tracer, so eager and traced
code behave alike.
"""

from __future__ import annotations

import operator

import numpy as np

from fungrad import core


class Array:
    """A concrete, immutable n-dimensional array (JAX's ``jax.Array``)."""

    __slots__ = ("_value", "weak_type", "_aval", "__weakref__")
    __array_priority__ = 100

    def __init__(self, value, weak_type: bool = False):
        if type(value) is np.ndarray and value.flags.writeable:
            value.setflags(write=False)  # (cheaper than assigning flags.writeable)
        self._value = value
        self.weak_type = weak_type
        self._aval = None

    @classmethod
    def from_impl(cls, value, aval: core.ShapedArray) -> Array:
        """The Array for a primitive impl's output ``value`` whose aval the primitive's
        abstract_eval already gave (it is stored, not recomputed: ``config.check_impl_avals``
        verifies that impls agree with their shape rules)."""
        arr = cls(value, aval.weak_type)
        arr._aval = aval
        return arr

    @property
    def aval(self) -> core.ShapedArray:
        aval = self._aval
        if aval is None:  # computed once: the array is immutable
            v = self._value
            aval = self._aval = core.interned_aval(v.shape, v.dtype, self.weak_type)
        return aval

    shape = property(lambda self: self._value.shape)
    dtype = property(lambda self: self._value.dtype)
    ndim = property(lambda self: self._value.ndim)
    size = property(lambda self: int(self._value.size))
    itemsize = property(lambda self: self._value.dtype.itemsize)
    nbytes = property(lambda self: int(self._value.nbytes))

    def __array__(self, dtype=None, copy=None):
        v = np.asarray(self._value)
        if dtype is not None and np.dtype(dtype) != v.dtype:
            return v.astype(dtype)
        if copy:
            return v.copy()
        return v

    def delete(self) -> None:
        """Free the value (``jax.Array.delete``); any later use raises RuntimeError. jit deletes
        the Arrays passed for ``donate_argnums`` this way."""
        if type(self._value) is not _DeletedValue:
            aval = self.aval
            self._value = _DeletedValue(f"{aval.dtype.name}[{','.join(map(str, aval.shape))}]")
            self._aval = None

    def is_deleted(self) -> bool:
        """Whether :meth:`delete` (or a donating jit call) freed this Array."""
        return type(self._value) is _DeletedValue

    def block_until_ready(self) -> Array:
        """Wait for the value to be computed (CPU values always are) and return self."""
        return self

    @property
    def device(self):
        """The :class:`~fungrad.Device` holding the value (``jax.Array.device``): the CPU for
        an Array, the GPU for a :class:`~fungrad.GpuArray`."""
        from fungrad.devices import CPU
        return CPU

    def devices(self) -> set:
        """The set of devices holding the value (``jax.Array.devices()``): one device."""
        return {self.device}

    def addressable_data(self, index: int) -> Array:
        """The value held by addressable shard ``index`` (``jax.Array.addressable_data``):
        fungrad arrays are one shard, so index 0 gives the array itself."""
        if operator.index(index) != 0:
            raise ValueError(f"addressable_data: index {index} is out of range; a fungrad "
                             "array has a single shard (index 0)")
        return self

    def item(self, *args):
        return np.asarray(self._value).item(*args)

    def tolist(self):
        return np.asarray(self._value).tolist()

    def __bool__(self):
        return bool(self._value)

    def __int__(self):
        return int(self._value)

    def __float__(self):
        return float(self._value)

    def __complex__(self):
        return complex(self._value)

    def __index__(self):
        if self._value.dtype.kind not in "iub" or self._value.ndim:
            raise TypeError(f"only integer scalar arrays can be converted to a scalar index, "
                            f"got {self.aval.str_short()}")
        return int(self._value)

    def __len__(self):
        if not self._value.ndim:
            raise TypeError("len() of unsized object (a 0-d Array)")
        return self._value.shape[0]

    def __iter__(self):
        if not self._value.ndim:
            raise TypeError("iteration over a 0-d Array")
        return (self[i] for i in range(self._value.shape[0]))

    def __hash__(self):
        raise TypeError("unhashable type: 'Array'")

    def __format__(self, spec):
        if self._value.ndim == 0:
            return format(self._value.item(), spec)
        return format(str(self), spec)

    def __str__(self):
        return str(np.asarray(self._value))

    def __repr__(self):
        v = np.asarray(self._value)
        suffix = f"dtype={v.dtype.name}"
        if self.weak_type:
            suffix += ", weak_type=True"
        if v.size == 0:
            body = f"[], shape={v.shape}" if v.shape != (0,) else "[]"
        else:
            body = np.array2string(v, separator=", ", prefix="Array(")
        return f"Array({body}, {suffix})"

    def __reduce__(self):
        return (Array, (np.asarray(self._value).copy(), self.weak_type))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


class _DeletedValue:
    """The value of a deleted Array: every use (numpy conversion, an attribute such as
    ``shape``, ``bool()``...) raises RuntimeError, as using a deleted ``jax.Array`` does."""

    __slots__ = ("shape_str",)

    def __init__(self, shape_str: str):
        self.shape_str = shape_str

    def _fail(self, *args, **kwargs):
        raise RuntimeError(
            f"Array has been deleted with shape={self.shape_str}. It was donated to a jitted "
            "function (donate_argnums) or deleted with Array.delete(); use the function's "
            "outputs instead of a donated argument.")

    __getattr__ = __array__ = __bool__ = __int__ = __float__ = __index__ = _fail
    __len__ = __iter__ = __getitem__ = __complex__ = _fail


core._array_type = Array


def is_arraylike(x) -> bool:
    """Arrays, tracers, numpy values and Python scalars (what fungrad functions accept)."""
    return (isinstance(x, (Array, core.Tracer, np.ndarray, np.generic))
            or (isinstance(x, (bool, int, float)) and not isinstance(x, complex)))
