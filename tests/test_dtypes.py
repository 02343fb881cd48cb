"""JAX's type-promotion lattice, weak types and x64 canonicalisation."""

import numpy as np
import pytest

import fungrad as fg
from fungrad import dtypes

B, I8, I16, I32, I64 = np.bool_, np.int8, np.int16, np.int32, np.int64
U8, U16, U32, U64 = np.uint8, np.uint16, np.uint32, np.uint64
F16, F32, F64 = np.float16, np.float32, np.float64


def pt(a, b):
    return dtypes.promote_types((np.dtype(a), False), (np.dtype(b), False))


# (a, b, result with x64 off, result with x64 on): JAX's documented promotion table.
TABLE = [
    (B, B, B, B),
    (B, I8, I8, I8),
    (B, F16, F16, F16),
    (B, U32, U32, U32),
    (I8, U8, I16, I16),
    (I16, U16, I32, I32),
    (I32, U32, I32, I64),
    (I8, I32, I32, I32),
    (U8, U32, U32, U32),
    (U32, U64, U32, U64),
    (I64, U64, F32, F64),
    (I32, F16, F16, F16),
    (I64, F16, F16, F16),
    (U64, F16, F16, F16),
    (F16, F32, F32, F32),
    (F32, F64, F32, F64),
    (I32, F32, F32, F32),
    (I32, F64, F32, F64),
]


@pytest.mark.parametrize("a,b,want32,want64", TABLE)
def test_promotion_table(a, b, want32, want64):
    assert pt(a, b)[0] == np.dtype(want32)
    assert pt(b, a)[0] == np.dtype(want32)


@pytest.mark.parametrize("a,b,want32,want64", TABLE)
def test_promotion_table_x64(a, b, want32, want64, x64):
    assert pt(a, b)[0] == np.dtype(want64)


def test_weak_python_scalars():
    f32 = fg.Array(np.ones(3, np.float32))
    i32 = fg.Array(np.ones(3, np.int32))
    i8 = fg.Array(np.ones(3, np.int8))
    f16 = fg.Array(np.ones(3, np.float16))
    assert dtypes.result_type(f32, 2.0, return_weak_type_flag=True) == (np.float32, False)
    assert dtypes.result_type(i32, 2, return_weak_type_flag=True) == (np.int32, False)
    assert dtypes.result_type(i8, 2, return_weak_type_flag=True) == (np.int8, False)
    # int array + Python float: a weak float (JAX: float32 with weak_type=True)
    assert dtypes.result_type(i32, 2.0, return_weak_type_flag=True) == (np.float32, True)
    assert dtypes.result_type(f16, 2.0, return_weak_type_flag=True) == (np.float16, False)
    assert dtypes.result_type(2, 2.0, return_weak_type_flag=True) == (np.float32, True)
    assert dtypes.result_type(True, 2, return_weak_type_flag=True) == (np.int32, True)
    assert dtypes.result_type(True, False) == np.bool_


def test_canonicalize():
    assert dtypes.canonicalize_dtype(np.float64) == np.float32
    assert dtypes.canonicalize_dtype(np.int64) == np.int32
    assert dtypes.canonicalize_dtype(np.uint64) == np.uint32
    assert dtypes.canonicalize_dtype(np.float16) == np.float16
    assert dtypes.canonicalize_dtype(np.complex128) == np.complex64
    with pytest.raises(TypeError, match="datetime64.* is not supported"):
        dtypes.canonicalize_dtype(np.dtype("datetime64[s]"))


def test_canonicalize_x64(x64):
    assert dtypes.canonicalize_dtype(np.float64) == np.float64
    assert dtypes.canonicalize_dtype(np.int64) == np.int64
    assert dtypes.result_type(1.0) == np.float64


def test_config_errors():
    with pytest.raises(ValueError, match="unknown option 'enable_x63'"):
        fg.config.update("enable_x63", True)
    with pytest.raises(TypeError, match="takes a bool"):
        fg.config.update("enable_x64", "yes")
