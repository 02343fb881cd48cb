"""``packbits`` / ``unpackbits``: boolean arrays to and from uint8 bytes (8 bits per byte,
big- or little-endian bit order), as jax.numpy has them; shifts, masks and sums, so they
trace and compile.
"""

from __future__ import annotations

import numpy as np

from fungrad import dtypes
from fungrad import numpy as fnp
from fungrad.numpy import util

__all__ = ["packbits", "unpackbits"]


def _bitorder(name: str, bitorder: str) -> str:
    if bitorder not in ("big", "little"):
        raise ValueError(f"{name}: bitorder must be 'big' or 'little', got {bitorder!r}")
    return bitorder


def packbits(a, axis=None, bitorder: str = "big"):
    """Non-zero entries of ``a`` as bits, 8 per uint8 along ``axis`` (the flattened array when
    None), the last byte padded with zeros (``jnp.packbits``)."""
    util.check_arraylike("packbits", a)
    bitorder = _bitorder("packbits", bitorder)
    a = util.asarray(a, fun_name="packbits")
    if dtypes.kind(a.dtype) not in "biu":
        raise TypeError(f"packbits: expected an integer or boolean array, got {a.dtype}")
    if axis is None:
        a, axis = fnp.ravel(a), 0
    axis = util.canonicalize_axis(axis, a.ndim, "packbits")
    bits = (a != 0).astype(np.uint8)
    n = bits.shape[axis]
    pad = (-n) % 8
    if pad:
        widths = [(0, 0)] * a.ndim
        widths[axis] = (0, pad)
        bits = fnp.pad(bits, widths)
    bits = fnp.moveaxis(bits, axis, -1)
    bits = bits.reshape(bits.shape[:-1] + ((n + pad) // 8, 8))
    shifts = np.arange(7, -1, -1) if bitorder == "big" else np.arange(8)
    packed = fnp.sum(bits << shifts.astype(np.uint8), axis=-1, dtype=np.uint8)
    return fnp.moveaxis(packed, -1, axis)


def unpackbits(a, axis=None, count=None, bitorder: str = "big"):
    """The bits of the uint8 array ``a`` as a uint8 array of 0s and 1s, 8 per byte along
    ``axis`` (the flattened array when None) (``jnp.unpackbits``); ``count`` keeps that many
    bits (negative: drops that many from the end; more than available: pads with zeros)."""
    util.check_arraylike("unpackbits", a)
    bitorder = _bitorder("unpackbits", bitorder)
    a = util.asarray(a, fun_name="unpackbits")
    if a.dtype != np.uint8:
        raise TypeError(f"unpackbits: expected a uint8 array, got {a.dtype}")
    if axis is None:
        a, axis = fnp.ravel(a), 0
    axis = util.canonicalize_axis(axis, a.ndim, "unpackbits")
    shifts = (np.arange(7, -1, -1) if bitorder == "big" else np.arange(8)).astype(np.uint8)
    bits = (a[..., None] >> shifts) & np.uint8(1)
    bits = fnp.moveaxis(bits, a.ndim - 1 if axis == a.ndim - 1 else axis, -2)
    bits = bits.reshape(bits.shape[:-2] + (bits.shape[-2] * 8,))
    bits = fnp.moveaxis(bits, -1, axis)
    if count is not None:
        total = bits.shape[axis]
        keep = count if count >= 0 else max(total + count, 0)
        if keep <= total:
            bits = fnp.take(bits, fnp.arange(keep), axis=axis)
        else:
            widths = [(0, 0)] * bits.ndim
            widths[axis] = (0, keep - total)
            bits = fnp.pad(bits, widths)
    return bits
