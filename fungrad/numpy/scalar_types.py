"""jax.numpy's scalar types: ``fnp.int32``, ``fnp.float32``, ``fnp.bool_``, ...

Each is a class (so it works wherever numpy takes a dtype: ``fnp.zeros(3, fnp.int32)``,
``x.astype(fnp.float32)``, ``np.dtype(fnp.float32)``, ``fnp.issubdtype(fnp.int8,
fnp.integer)``) whose call makes a fungrad Array, as ``jnp.int32(7)`` does in JAX. A numpy
scalar would escape fungrad's semantics: ``np.int32(7) // np.int32(0)`` is 0 with a
RuntimeWarning, ``fnp.int32(7) // fnp.int32(0)`` is XLA's -2.

As in JAX, a scalar type compares equal to (and hashes like) the numpy scalar type, and
``isinstance(v, fnp.int32)`` tests for a numpy ``int32`` scalar.
"""

from __future__ import annotations

import numpy as np

from fungrad import dtypes as _dtypes  # noqa: F401  (imports ml_dtypes: np.dtype("bfloat16"), float8 names)

__all__ = [
    "bool_",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "bfloat16",
    "float8_e3m4",
    "float8_e4m3",
    "float8_e4m3b11fnuz",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "bool",
    "int_",
    "uint",
    "float_",
    "single",
    "double",
    "complex_",
    "csingle",
    "cdouble",
]


class _ScalarMeta(type):
    """The metaclass of the scalar types; ``dtype`` is the numpy dtype each stands for."""

    dtype: np.dtype

    def __hash__(cls) -> int:
        return hash(cls.dtype.type)

    def __eq__(cls, other) -> bool:
        return cls is other or cls.dtype.type == other

    def __ne__(cls, other) -> bool:
        return not cls == other

    def __call__(cls, x):
        """``x`` as an Array of this dtype (canonicalised: float64 is float32 without x64)."""
        from fungrad.numpy.creation import asarray

        return asarray(x, dtype=cls.dtype)

    def __instancecheck__(cls, instance) -> bool:
        return isinstance(instance, cls.dtype.type)


def _scalar_type(name: str) -> _ScalarMeta:
    dtype = np.dtype(name.rstrip("_"))  # (bfloat16: ml_dtypes' name, registered by fungrad.dtypes)
    return _ScalarMeta(
        name,
        (object,),
        {
            "dtype": dtype,
            "__module__": "fungrad.numpy",
            "__doc__": f"The {dtype} scalar type: ``fnp.{name}(x)`` makes an Array of dtype "
            f"{dtype} from ``x``; it also names the dtype (``fnp.zeros(3, fnp.{name})``).",
        },
    )


bool_ = _scalar_type("bool_")
int8, int16, int32, int64 = (_scalar_type(n) for n in ("int8", "int16", "int32", "int64"))
uint8, uint16, uint32, uint64 = (_scalar_type(n) for n in ("uint8", "uint16", "uint32", "uint64"))
float16, float32, float64 = (_scalar_type(n) for n in ("float16", "float32", "float64"))
bfloat16 = _scalar_type("bfloat16")
# JAX's float8 types (ml_dtypes' names, registered by fungrad.dtypes)
float8_e3m4 = _scalar_type("float8_e3m4")
float8_e4m3 = _scalar_type("float8_e4m3")
float8_e4m3b11fnuz = _scalar_type("float8_e4m3b11fnuz")
float8_e4m3fn = _scalar_type("float8_e4m3fn")
float8_e4m3fnuz = _scalar_type("float8_e4m3fnuz")
float8_e5m2 = _scalar_type("float8_e5m2")
float8_e5m2fnuz = _scalar_type("float8_e5m2fnuz")
float8_e8m0fnu = _scalar_type("float8_e8m0fnu")
complex64, complex128 = (_scalar_type(n) for n in ("complex64", "complex128"))

# jax.numpy's aliases (the 64-bit ones are canonicalised to 32 bits when called without x64)
bool = bool_  # noqa: A001
int_, uint, float_ = int64, uint64, float64
single, double = float32, float64
complex_, csingle, cdouble = complex128, complex64, complex128
