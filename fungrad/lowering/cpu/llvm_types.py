"""LLVM IR text for dtypes and constants: register and memory types, literals."""

from __future__ import annotations

import struct

import numpy as np

from fungrad import dtypes

__all__ = ["llvm_type", "memory_type", "literal"]


def llvm_type(dtype: np.dtype) -> str:
    """Register type of a dtype (bool is i1 in registers, i8 in memory; bfloat16 is its 16
    bits, ``i16``: kernels only move it and convert it to and from float32, see
    ``ir/float_normalization.py``)."""
    k, n = dtype.kind, dtype.itemsize
    if dtypes.is_ml_float(dtype):
        return f"i{8 * n}"
    if k == "b":
        return "i1"
    if k in "iu":
        return f"i{8 * n}"
    if k == "f":
        return {2: "half", 4: "float", 8: "double"}[n]
    raise TypeError(f"jit: dtype {dtype} is not supported by the CPU compiler")


def memory_type(dtype: np.dtype) -> str:
    return "i8" if dtype.kind == "b" else llvm_type(dtype)


def literal(value, dtype: np.dtype) -> str:
    """LLVM text for a constant of ``dtype``."""
    k = dtype.kind
    if k == "b":
        return "true" if value else "false"
    if k in "iu":
        v = int(value)
        bits = 8 * dtype.itemsize
        v &= (1 << bits) - 1
        if v >= 1 << (bits - 1):
            v -= 1 << bits
        return str(v)
    if dtypes.is_ml_float(dtype):  # its bits, as an integer
        return str(int(np.asarray(value, dtype).view(f"i{dtype.itemsize}")))
    if dtype.itemsize == 2:
        return "0xH" + np.asarray(value, np.float16).view(np.uint16).item().to_bytes(2, "big").hex()
    # float and double constants are written as the hex of the (exactly representable) double
    v = float(np.asarray(value, dtype))
    return "0x" + struct.pack(">d", v).hex().upper()
