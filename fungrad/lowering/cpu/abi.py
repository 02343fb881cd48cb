"""How compiled code finds array data in the Python objects a jitted call passes it.

A jitted call hands native code one tuple of numpy arrays / numpy scalars. Reading each data
pointer in Python (``a.ctypes.data``) costs about a microsecond per array, more than the whole
native call for small inputs, so the entry point reads the pointers itself. The offsets of the
fields it reads (``PyTupleObject.ob_item``, ``PyArrayObject.data`` / ``flags``, a numpy
scalar's inline value, ``ob_type``) are *measured* here once per process on real objects, not
assumed; :func:`layout` raises a clear error on an interpreter whose objects do not look as
expected. The ndarray type object's address is published to native code as the symbol
``fg_ndarray_type``.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass

import numpy as np

NPY_ARRAY_C_CONTIGUOUS = 0x0001
NPY_ARRAY_ALIGNED = 0x0100


@dataclass(frozen=True)
class Layout:
    """Byte offsets of the object fields compiled entry points read."""

    object_type: int  # PyObject.ob_type
    tuple_items: int  # PyTupleObject.ob_item[0]
    array_data: int  # PyArrayObject.data
    array_flags: int  # PyArrayObject.flags (int32)
    scalar_data: int  # a numpy scalar's value, stored inline
    required_flags: int = NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED


_lock = threading.Lock()
_layout: Layout | None = None
_type_cell = ctypes.c_void_p(id(np.ndarray))  # read by native code through fg_ndarray_type


def _find(obj, ctype, want, start=8, stop=128) -> int:
    for off in range(start, stop, 4):
        if ctype.from_address(id(obj) + off).value == want:
            return off
    raise RuntimeError(
        "fungrad.jit: this Python's object layout is not supported "
        "(could not locate a field of a numpy object); please report it with "
        "your Python and numpy versions"
    )


def _measure() -> Layout:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.zeros(5, np.int8)[::2]  # not contiguous: different flags
    t = (a, b)
    object_type = _find(a, ctypes.c_void_p, id(np.ndarray), 0)
    tuple_items = _find(t, ctypes.c_void_p, id(a))
    array_data = _find(a, ctypes.c_void_p, a.ctypes.data)
    array_flags = _find(a, ctypes.c_int32, a.flags.num)
    scalars = [np.float32(1.25), np.float64(-3.5), np.int32(-7), np.uint8(200), np.float16(2.5)]
    offsets = set()
    for sc in scalars[:-1]:  # confirmed with a second value: a stray byte may match by chance
        ct = np.ctypeslib.as_ctypes_type(sc.dtype)
        other = sc.dtype.type(sc.item() // 2 + 3)
        off = _find(sc, ct, sc.item(), start=16 if object.__basicsize__ == 16 else 8)
        if ct.from_address(id(other) + off).value != other.item():
            off = -1
        offsets.add(off)
    if len(offsets) != 1:
        raise RuntimeError(
            f"fungrad.jit: numpy scalars store their values at different offsets "
            f"{sorted(offsets)}; this Python/numpy build is not supported"
        )
    lay = Layout(object_type, tuple_items, array_data, array_flags, offsets.pop())
    # cross-check on other objects before trusting the offsets
    if (
        ctypes.c_int32.from_address(id(b) + array_flags).value != b.flags.num
        or ctypes.c_void_p.from_address(id(b) + array_data).value != b.ctypes.data
        or ctypes.c_uint16.from_address(id(scalars[-1]) + lay.scalar_data).value
        != scalars[-1].view(np.uint16)
    ):
        raise RuntimeError(
            "fungrad.jit: inconsistent numpy object layout; this Python/numpy "
            "build is not supported"
        )
    return lay


def layout() -> Layout:
    """The measured layout; also registers ``fg_ndarray_type`` for compiled code."""
    global _layout
    if _layout is None:
        with _lock:
            if _layout is None:
                from fungrad.lowering.cpu import compiler as cpu
                from fungrad.lowering.cpu import llvm_capi

                cpu.host()  # initialises LLVM
                lay = _measure()
                with cpu.llvm_lock:
                    llvm_capi.add_symbol("fg_ndarray_type", ctypes.addressof(_type_cell))
                _layout = lay
    return _layout
