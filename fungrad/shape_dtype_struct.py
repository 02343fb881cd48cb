"""``ShapeDtypeStruct``: a shape and a dtype standing for an array (``jax.ShapeDtypeStruct``),
what ``eval_shape`` takes and returns and what callbacks declare as their results."""

from __future__ import annotations

from operator import index as operator_index

import numpy as np

from fungrad import core, dtypes

__all__ = ["ShapeDtypeStruct"]


class ShapeDtypeStruct:
    """A shape and a dtype standing for an array that need not exist
    (``jax.ShapeDtypeStruct``): what :func:`eval_shape` takes and returns.

    ``sharding`` is accepted for JAX's signature and must be None (fungrad has one device
    per backend).
    """

    __slots__ = ("shape", "dtype", "weak_type", "sharding")

    def __init__(self, shape, dtype, *, sharding=None, weak_type: bool = False):
        try:
            shape = tuple(int(operator_index(d)) for d in shape)
        except TypeError:
            raise TypeError(
                f"ShapeDtypeStruct: shape must be a sequence of integers, got {shape!r}"
            ) from None
        if dtype is None:
            raise ValueError(
                "ShapeDtypeStruct: dtype must be given (e.g. "
                "ShapeDtypeStruct((2, 3), fnp.float32)), got None"
            )
        if sharding is not None:
            raise ValueError("ShapeDtypeStruct: fungrad has no shardings; pass sharding=None")
        try:
            dtype = np.dtype(dtype)
        except TypeError as e:
            raise TypeError(f"ShapeDtypeStruct: {e}") from None
        self.shape, self.dtype = shape, dtype
        self.weak_type, self.sharding = bool(weak_type), None

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))

    @property
    def aval(self) -> core.ShapedArray:
        return core.ShapedArray(self.shape, dtypes.canonicalize_dtype(self.dtype), self.weak_type)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object (a 0-d ShapeDtypeStruct)")
        return self.shape[0]

    def __eq__(self, other):
        return (
            type(other) is ShapeDtypeStruct
            and self.shape == other.shape
            and self.dtype == other.dtype
            and self.weak_type == other.weak_type
        )

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak_type))

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{weak})"
