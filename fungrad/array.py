"""``fungrad.Array``: an immutable concrete array.

An Array holds a read-only numpy value (an ``ndarray`` or a numpy scalar for 0-d results) and
a ``weak_type`` flag. Operators and methods (``+``, ``@``, ``x[idx]``, ``.at``, ``.sum()``...)
are installed by ``fungrad.numpy.array_methods`` on both Array and Tracer, so eager and traced
code behave alike.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from fungrad import core, dtypes

if TYPE_CHECKING:
    from collections.abc import Sequence

    from fungrad.numpy.indexing import IndexUpdateHelper
    from fungrad.typing import ArrayLike, DTypeLike

    _Axis = int | Sequence[int] | None


class _ArrayMeta(type):
    """Array's metaclass: ``isinstance(x, Array)`` is also True for tracers, as
    ``isinstance(x, jax.Array)`` is inside jit/grad/vmap (``issubclass(Tracer, Array)`` stays
    False, as in JAX). Python answers ``isinstance(a, Array)`` for an exact Array without
    calling this, so the hot paths (``type(x) is Array``, exact Arrays) cost the same; code
    that needs a concrete array uses :func:`is_concrete_array`."""

    def __instancecheck__(cls, x, _nominal=type.__instancecheck__) -> bool:
        return _nominal(cls, x) or (cls is Array and _nominal(core.Tracer, x))


class Array(metaclass=_ArrayMeta):
    """A concrete, immutable n-dimensional array (JAX's ``jax.Array``).

    ``isinstance(x, Array)`` is True for concrete arrays and for traced values (inside
    jit/grad/vmap), so ``Array`` annotates both, as ``jax.Array`` does.
    """

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

    @property
    def shape(self) -> tuple[int, ...]:
        return self._value.shape

    @property
    def dtype(self) -> np.dtype:
        return self._value.dtype

    @property
    def ndim(self) -> int:
        return self._value.ndim

    @property
    def size(self) -> int:
        return int(self._value.size)

    @property
    def itemsize(self) -> int:
        return self._value.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return int(self._value.nbytes)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
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
            raise ValueError(
                f"addressable_data: index {index} is out of range; a fungrad "
                "array has a single shard (index 0)"
            )
        return self

    @property
    def sharding(self):
        """How the value is laid out over devices (``jax.Array.sharding``): the NamedSharding
        that ``device_put``, ``with_sharding_constraint``, ``jit(out_shardings=...)`` or
        ``shard_map`` gave it, else the SingleDeviceSharding of its device."""
        from fungrad import sharding_impls as sharding

        return sharding.sharding_of(self)

    @property
    def addressable_shards(self) -> list:
        """The pieces of the value this process holds (``jax.Array.addressable_shards``): a
        :class:`~fungrad.sharding.Shard` per device of its sharding (one on fungrad's
        one-device meshes, whose data is the whole array)."""
        from fungrad import sharding_impls as sharding

        return sharding.addressable_shards(self)

    @property
    def global_shards(self) -> list:
        """Every piece of the value (``jax.Array.global_shards``): the addressable ones."""
        return self.addressable_shards

    @property
    def is_fully_addressable(self) -> bool:
        """Whether this process holds every piece of the value: always, in one process."""
        return True

    @property
    def is_fully_replicated(self) -> bool:
        """Whether every device of the sharding holds the whole value."""
        return self.sharding.is_fully_replicated

    def item(self, *args) -> Any:
        return np.asarray(self._value).item(*args)

    def tolist(self) -> Any:
        return np.asarray(self._value).tolist()

    def __bool__(self) -> bool:
        return bool(self._value)

    def __int__(self) -> int:
        return int(self._value)

    def __float__(self) -> float:
        return float(self._value)

    def __complex__(self) -> complex:
        return complex(self._value)

    def __index__(self) -> int:
        if dtypes.kind(self._value.dtype) not in "iub" or self._value.ndim:
            raise TypeError(
                f"only integer scalar arrays can be converted to a scalar index, "
                f"got {self.aval.str_short()}"
            )
        return int(self._value)

    def __len__(self) -> int:
        if not self._value.ndim:
            raise TypeError("len() of unsized object (a 0-d Array)")
        return self._value.shape[0]

    def __iter__(self) -> Iterator[Array]:
        if not self._value.ndim:
            raise TypeError("iteration over a 0-d Array")
        return (self[i] for i in range(self._value.shape[0]))

    def __hash__(self):
        raise TypeError("unhashable type: 'Array'")

    def __format__(self, spec: str) -> str:
        if self._value.ndim == 0:
            return format(self._value.item(), spec)
        return format(str(self), spec)

    def __str__(self) -> str:
        return str(np.asarray(self._value))

    def __repr__(self) -> str:
        v = np.asarray(self._value)
        suffix = f"dtype={v.dtype.name}"
        if self.weak_type:
            suffix += ", weak_type=True"
        if v.size == 0:
            body = f"[], shape={v.shape}"  # (JAX 0.10.2 shows the shape of every empty array)
        else:
            body = np.array2string(v, separator=", ", prefix="Array(")
        return f"Array({body}, {suffix})"

    def __reduce__(self):
        return (Array, (np.asarray(self._value).copy(), self.weak_type))

    def __copy__(self) -> Array:
        return self

    def __deepcopy__(self, memo: Any) -> Array:
        return self

    if TYPE_CHECKING:
        # The operators, methods and properties that fungrad.numpy.array_methods installs at
        # import time (on Array and on tracers), declared for type checkers only: this block
        # never runs. tests/test_typing.py checks that it lists exactly the installed names
        # with the run-time parameters. ``x[i] = v`` is deliberately absent (arrays are
        # immutable: type checkers flag it, and at run time it raises a TypeError).
        def __add__(self, other: ArrayLike) -> Array: ...
        def __radd__(self, other: ArrayLike) -> Array: ...
        def __sub__(self, other: ArrayLike) -> Array: ...
        def __rsub__(self, other: ArrayLike) -> Array: ...
        def __mul__(self, other: ArrayLike) -> Array: ...
        def __rmul__(self, other: ArrayLike) -> Array: ...
        def __truediv__(self, other: ArrayLike) -> Array: ...
        def __rtruediv__(self, other: ArrayLike) -> Array: ...
        def __floordiv__(self, other: ArrayLike) -> Array: ...
        def __rfloordiv__(self, other: ArrayLike) -> Array: ...
        def __mod__(self, other: ArrayLike) -> Array: ...
        def __rmod__(self, other: ArrayLike) -> Array: ...
        def __divmod__(self, other: ArrayLike) -> tuple[Array, Array]: ...
        def __rdivmod__(self, other: ArrayLike) -> tuple[Array, Array]: ...
        def __pow__(self, other: ArrayLike, modulo: None = None) -> Array: ...
        def __rpow__(self, other: ArrayLike, modulo: None = None) -> Array: ...
        def __matmul__(self, other: ArrayLike) -> Array: ...
        def __rmatmul__(self, other: ArrayLike) -> Array: ...
        def __and__(self, other: ArrayLike) -> Array: ...
        def __rand__(self, other: ArrayLike) -> Array: ...
        def __or__(self, other: ArrayLike) -> Array: ...
        def __ror__(self, other: ArrayLike) -> Array: ...
        def __xor__(self, other: ArrayLike) -> Array: ...
        def __rxor__(self, other: ArrayLike) -> Array: ...
        def __lshift__(self, other: ArrayLike) -> Array: ...
        def __rlshift__(self, other: ArrayLike) -> Array: ...
        def __rshift__(self, other: ArrayLike) -> Array: ...
        def __rrshift__(self, other: ArrayLike) -> Array: ...
        def __eq__(self, other: object) -> Array: ...  # type: ignore[override]
        def __ne__(self, other: object) -> Array: ...  # type: ignore[override]
        def __lt__(self, other: ArrayLike) -> Array: ...
        def __le__(self, other: ArrayLike) -> Array: ...
        def __gt__(self, other: ArrayLike) -> Array: ...
        def __ge__(self, other: ArrayLike) -> Array: ...
        def __neg__(self) -> Array: ...
        def __pos__(self) -> Array: ...
        def __abs__(self) -> Array: ...
        def __invert__(self) -> Array: ...
        def __round__(self, ndigits: int | None = None) -> Array: ...
        def __getitem__(self, key: Any) -> Array: ...
        def __contains__(self, element: Any) -> bool: ...

        def reshape(self, *shape: int | Sequence[int], order: str = "C") -> Array: ...
        def transpose(self, *axes: int | Sequence[int] | None) -> Array: ...
        def astype(
            self, dtype: DTypeLike | None, copy: bool = False, device: Any = None
        ) -> Array: ...
        def flatten(self, order: str = "C") -> Array: ...
        def ravel(self, order: str = "C") -> Array: ...
        def copy(self) -> Array: ...
        def sum(
            self,
            axis: _Axis = None,
            dtype: DTypeLike | None = None,
            out: None = None,
            keepdims: bool = False,
            initial: ArrayLike | None = None,
            where: ArrayLike | None = None,
            promote_integers: bool = True,
        ) -> Array: ...
        def prod(
            self,
            axis: _Axis = None,
            dtype: DTypeLike | None = None,
            out: None = None,
            keepdims: bool = False,
            initial: ArrayLike | None = None,
            where: ArrayLike | None = None,
            promote_integers: bool = True,
        ) -> Array: ...
        def mean(
            self,
            axis: _Axis = None,
            dtype: DTypeLike | None = None,
            out: None = None,
            keepdims: bool = False,
            *,
            where: ArrayLike | None = None,
        ) -> Array: ...
        def max(
            self,
            axis: _Axis = None,
            out: None = None,
            keepdims: bool = False,
            initial: ArrayLike | None = None,
            where: ArrayLike | None = None,
        ) -> Array: ...
        def min(
            self,
            axis: _Axis = None,
            out: None = None,
            keepdims: bool = False,
            initial: ArrayLike | None = None,
            where: ArrayLike | None = None,
        ) -> Array: ...
        def argmax(
            self, axis: int | None = None, out: None = None, keepdims: bool | None = None
        ) -> Array: ...
        def argmin(
            self, axis: int | None = None, out: None = None, keepdims: bool | None = None
        ) -> Array: ...
        def any(
            self,
            axis: _Axis = None,
            out: None = None,
            keepdims: bool = False,
            *,
            where: ArrayLike | None = None,
        ) -> Array: ...
        def all(
            self,
            axis: _Axis = None,
            out: None = None,
            keepdims: bool = False,
            *,
            where: ArrayLike | None = None,
        ) -> Array: ...
        def std(
            self,
            axis: _Axis = None,
            dtype: DTypeLike | None = None,
            out: None = None,
            ddof: int = 0,
            keepdims: bool = False,
            *,
            where: ArrayLike | None = None,
            mean: ArrayLike | None = None,
            correction: int | float | None = None,
        ) -> Array: ...
        def var(
            self,
            axis: _Axis = None,
            dtype: DTypeLike | None = None,
            out: None = None,
            ddof: int = 0,
            keepdims: bool = False,
            *,
            where: ArrayLike | None = None,
            mean: ArrayLike | None = None,
            correction: int | float | None = None,
        ) -> Array: ...
        def ptp(self, axis: _Axis = None, out: None = None, keepdims: bool = False) -> Array: ...
        def cumsum(
            self, axis: int | None = None, dtype: DTypeLike | None = None, out: None = None
        ) -> Array: ...
        def cumprod(
            self, axis: int | None = None, dtype: DTypeLike | None = None, out: None = None
        ) -> Array: ...
        def clip(self, /, min: ArrayLike | None = None, max: ArrayLike | None = None) -> Array: ...
        def round(self, decimals: int = 0, out: None = None) -> Array: ...
        def conj(self, /) -> Array: ...
        def conjugate(self, /) -> Array: ...
        def squeeze(self, axis: _Axis = None) -> Array: ...
        def swapaxes(self, axis1: int, axis2: int) -> Array: ...
        def repeat(
            self,
            repeats: ArrayLike,
            axis: int | None = None,
            *,
            total_repeat_length: int | None = None,
        ) -> Array: ...
        def take(
            self,
            indices: ArrayLike,
            axis: int | None = None,
            out: None = None,
            mode: str | None = None,
            unique_indices: bool = False,
            indices_are_sorted: bool = False,
            fill_value: ArrayLike | None = None,
        ) -> Array: ...
        def dot(
            self,
            b: ArrayLike,
            *,
            precision: Any = None,
            preferred_element_type: DTypeLike | None = None,
        ) -> Array: ...
        def nonzero(
            self, *, size: int | None = None, fill_value: ArrayLike | None = None
        ) -> tuple[Array, ...]: ...
        def sort(
            self,
            axis: int | None = -1,
            *,
            kind: str | None = None,
            order: None = None,
            stable: bool = True,
            descending: bool = False,
        ) -> Array: ...
        def argsort(
            self,
            axis: int | None = -1,
            *,
            kind: str | None = None,
            order: None = None,
            stable: bool = True,
            descending: bool = False,
            dtype: DTypeLike | None = None,
        ) -> Array: ...
        def trace(
            self, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: DTypeLike | None = None
        ) -> Array: ...
        def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Array: ...
        def searchsorted(
            self,
            v: ArrayLike,
            side: str = "left",
            sorter: ArrayLike | None = None,
            *,
            method: str = "scan",
        ) -> Array: ...
        def compress(
            self,
            condition: ArrayLike,
            axis: int | None = None,
            *,
            size: int | None = None,
            fill_value: ArrayLike = 0,
            out: None = None,
        ) -> Array: ...
        def choose(
            self, choices: Sequence[ArrayLike], out: None = None, mode: str = "raise"
        ) -> Array: ...
        def argpartition(self, kth: int, axis: int = -1) -> Array: ...
        def view(self, dtype: DTypeLike | None = None, type: None = None) -> Array: ...
        def tobytes(self, order: str = "C") -> bytes: ...

        @property
        def T(self) -> Array: ...
        @property
        def mT(self) -> Array: ...
        @property
        def real(self) -> Array: ...
        @property
        def imag(self) -> Array: ...
        @property
        def at(self) -> IndexUpdateHelper: ...
        @property
        def flat(self) -> NoReturn: ...  # raises, as JAX's: use flatten()


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
            "outputs instead of a donated argument."
        )

    __getattr__ = __array__ = __bool__ = __int__ = __float__ = __index__ = _fail
    __len__ = __iter__ = __getitem__ = __complex__ = _fail


core._array_type = Array


# ``is_concrete_array(x)``: whether ``x`` is a concrete Array (an Array or a GpuArray, never a
# tracer), which code reading ``x._value`` must ask instead of ``isinstance(x, Array)``. The
# nominal check of ``type.__instancecheck__`` bound to Array: a C call, cheaper than a
# Python function.
is_concrete_array = type.__dict__["__instancecheck__"].__get__(Array)


def is_arraylike(x) -> bool:
    """Arrays, tracers, numpy values and Python scalars (what fungrad functions accept)."""
    return isinstance(x, (bool, int, float, complex, core.Tracer, np.ndarray, np.generic, Array))
