"""``fungrad.typing``: the annotations of fungrad code (``jax.typing``).

Annotate array inputs with :data:`ArrayLike` and array outputs with :class:`fungrad.Array`,
as JAX recommends::

    import fungrad as fg
    import fungrad.numpy as fnp
    from fungrad.typing import ArrayLike

    def normalize(x: ArrayLike) -> fg.Array:
        x = fnp.asarray(x)
        return x / x.sum()

``fungrad.Array`` annotates traced values too: inside jit/grad/vmap, ``isinstance(x,
fg.Array)`` is True, as for ``jax.Array``. ``ArrayLike`` and ``DTypeLike`` are unions of
classes (``isinstance(x, ArrayLike)`` works at run time).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from fungrad.array import Array

__all__ = [
    "Array",
    "ArrayLike",
    "DType",
    "DTypeLike",
    "DimSize",
    "Shape",
    "StaticScalar",
    "SupportsDType",
]

DType = np.dtype
"""A dtype (``numpy.dtype``)."""


@runtime_checkable
class SupportsDType(Protocol):
    """Anything with a ``dtype`` attribute (an array, a ``ShapeDtypeStruct``...)."""

    @property
    def dtype(self, /) -> DType: ...


DTypeLike = str | type[Any] | np.dtype | SupportsDType
"""What ``numpy.dtype(...)`` turns into a fungrad dtype: a name (``"float32"``), a scalar type
(``float``, ``np.int32``, ``fnp.float32``), a dtype, or an object with a ``dtype``. None is not
included: a parameter that accepts None says so (``DTypeLike | None``)."""

StaticScalar = np.bool_ | np.number | bool | int | float | complex
"""A concrete scalar: Python ``bool``/``int``/``float``/``complex`` or a numpy scalar."""

ArrayLike = Array | np.ndarray | np.bool_ | np.number | bool | int | float | complex
"""A value fungrad functions take as an array: a fungrad Array (or traced value), a numpy
array or scalar, a Python ``bool``/``int``/``float``/``complex``, as ``jax.typing.ArrayLike``.
Lists and tuples are not (pass ``fnp.asarray(seq)``)."""

DimSize = int
"""One dimension of a shape."""

Shape = Sequence[DimSize]
"""An array shape: a sequence of dimension sizes (``x.shape`` is a ``tuple[int, ...]``)."""
