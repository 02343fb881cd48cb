"""WGSL's view of fungrad's dtypes: the type map, literals, and values as memory words.

Every device buffer is bound as ``array<u32>`` and each element is one 32-bit word (WGSL has
no 8-, 16- or 64-bit storage types in core): float32 and int32 values are ``bitcast``, bool
is 0 or 1. A buffer is addressed as *(binding, word offset)*, so several arrays can share
one device buffer (the temporaries' arena, the constants).
"""

from __future__ import annotations

import struct

import numpy as np

from fungrad.lowering.fusion import LoweringError
from fungrad.lowering.kernel import INDEX

#: element dtypes a GPU program may use (one 32-bit word each on the device)
DEVICE_DTYPES = frozenset(np.dtype(d) for d in (np.float32, np.int32, np.uint32, np.bool_))


def wgsl_type(dtype) -> str:
    dtype = np.dtype(dtype)
    if dtype == INDEX or dtype == np.int32:
        return "i32"
    if dtype == np.float32:
        return "f32"
    if dtype == np.uint32:
        return "u32"
    if dtype == np.bool_:
        return "bool"
    raise LoweringError(f"jit(backend='gpu'): no WGSL type for {dtype.name}")


def literal(value, dtype) -> str:
    """A WGSL literal of ``dtype`` (index values are i32)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return "true" if value else "false"
    if dtype == np.float32:
        v = np.float32(value)
        if np.isfinite(v) and (v == 0 or abs(v) >= np.finfo(np.float32).tiny):
            return f"{float(v)!r}f"
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
        return f"bitcast<f32>({bits:#010x}u)"
    if dtype == np.uint32:
        return f"{int(value) & 0xFFFFFFFF}u"
    v = int(value)
    if not -(2**31) <= v < 2**31:
        raise LoweringError(
            f"jit(backend='gpu'): the index or int32 constant {v} does not fit "
            "in 32 bits; WGSL has no 64-bit integers"
        )
    return "bitcast<i32>(0x80000000u)" if v == -(2**31) else f"{v}i"


def from_word(word: str, dtype) -> str:
    """The value of ``dtype`` a memory word (u32 text) holds."""
    t = wgsl_type(dtype)
    if t == "u32":
        return word
    if t == "bool":
        return f"({word} != 0u)"
    return f"bitcast<{t}>({word})"


def to_word(value: str, dtype) -> str:
    """The memory word (u32 text) holding ``value`` of ``dtype``."""
    t = wgsl_type(dtype)
    if t == "u32":
        return value
    if t == "bool":
        return f"select(0u, 1u, {value})"
    return f"bitcast<u32>({value})"
