"""XLA's random-bit operations with JAX's lax names: ``rng_bit_generator`` and ``rng_uniform``.

``rng_bit_generator(key, shape, dtype, algorithm)`` maps a uint32[4] key to ``(new_key,
bits)``. JAX documents its bits as a deterministic function of the key, shape, dtype and
algorithm that may differ across backends; fungrad computes XLA's documented constructions
(``xla/hlo/builder/lib/prng.cc`` and the RngBitGenerator expander), so its bits and new keys
are JAX's on CPU for every algorithm:

* ``RNG_THREE_FRY``: the key's words ``(k0, k1)`` are the Threefry-2x32 key, ``(k2, k3)`` a
  64-bit counter ``c = k2 + 2**32 k3``. 8/16/32-bit results: the shape is halved along its
  first even dimension (when there is none, along its first largest dimension, rounded up; a
  0-d shape as ``(1,)``); block ``i`` of that half shape (row-major) is
  ``threefry2x32((k0, k1), c + i)``, whose two words fill the two halves. 64-bit results
  (``enable_x64``): element ``i`` is ``y0 | y1 << 32`` of block ``c + i``.
* ``RNG_PHILOX`` and ``RNG_DEFAULT`` (XLA's CPU default): Philox-4x32 with 10 rounds under
  the key ``(k0, k1)`` of the 128-bit counters ``(k2, k3, k0, k1) + i`` (least significant
  word first); the four words of block 0, then of block 1, ... fill the result row-major
  (64-bit results: words ``0 | 1 << 32`` and ``2 | 3 << 32`` of each block).
* 8/16-bit results keep the low bits of the 32-bit ones; the new key is the old one with the
  64-bit counter ``(k2, k3)`` advanced by the number of blocks used.

Both are compositions of integer primitives (``threefry2x32``, ``mulhi``, ...), so they trace,
batch (each key of a vmapped batch its own stream, as a Python loop would give; JAX's
batching rule draws the whole batch from the first key) and compile like user code; the
results are integers, so they have no derivative.

``rng_uniform(a, b, shape)`` is XLA's *stateful* generator: every evaluation, eager or inside
a compiled function, draws fresh numbers, from a numpy generator fungrad owns (through
``io_callback``, the effect that keeps the draw at run time).
"""

from __future__ import annotations

import enum
import math
import operator

import numpy as np

from fungrad import dtypes

__all__ = ["RandomAlgorithm", "rng_bit_generator", "rng_uniform"]


class RandomAlgorithm(enum.IntEnum):
    """The algorithm of :func:`rng_bit_generator` (``jax.lax.RandomAlgorithm``)."""

    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2

    def __str__(self) -> str:
        return self.name


_BIT_DTYPES = tuple(np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))


def _static_shape(fname: str, shape) -> tuple[int, ...]:
    """``shape`` as a tuple of non-negative Python ints, or the error naming ``fname``."""
    try:
        shape = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"{fname}: shape must be a sequence of integers, got {shape!r}") from None
    if any(d < 0 for d in shape):
        raise ValueError(f"{fname}: shape must have non-negative sizes, got {shape}")
    return shape


def _split_dim(shape: tuple[int, ...]) -> int:
    """The dimension XLA halves: the first even one, else the first largest."""
    for i, d in enumerate(shape):
        if d % 2 == 0:
            return i
    return max(range(len(shape)), key=lambda i: (shape[i], -i))


def _check_args(key, shape, dtype, algorithm):
    from fungrad.core import get_aval
    from fungrad.lax.utils import operand

    fname = "rng_bit_generator"
    key = operand(key, fname)
    aval = get_aval(key)
    if aval.dtype != np.uint32 or aval.shape != (4,):
        raise TypeError(
            f"{fname}: key must be a uint32[4] array, got "
            f"{aval.str_short()}; make one with, e.g., "
            "jax.random.key_data(jax.random.split(key)) reshaped to (4,) or "
            "numpy.array([...], numpy.uint32)"
        )
    shape = _static_shape(fname, shape)
    dt = np.dtype(dtype)
    if dt not in _BIT_DTYPES:
        raise TypeError(
            f"{fname}: unsupported dtype {dt.name}; the bits are unsigned "
            "integers: uint8, uint16, uint32 or uint64 (view them as another "
            "type with lax.bitcast_convert_type)"
        )
    dt = dtypes.canonicalize_dtype(dt)
    try:
        algorithm = RandomAlgorithm(algorithm)
    except ValueError:
        raise ValueError(
            f"{fname}: algorithm must be a lax.RandomAlgorithm, got {algorithm!r}"
        ) from None
    return key, shape, dt, algorithm


def _u32(v):
    return np.uint32(v & 0xFFFFFFFF)


def _add_to_counter(lo, hi, n: int):
    """The 64-bit counter ``(lo, hi)`` (uint32 words) plus the Python int ``n``."""
    from fungrad import lax

    new_lo = lax.add(lo, lax.full_like(lo, _u32(n)))
    carry = lax.convert_element_type(lax.lt(new_lo, lo), np.uint32)
    new_hi = lax.add(lax.add(hi, lax.full_like(hi, _u32(n >> 32))), carry)
    return new_lo, new_hi


def _threefry_blocks(k, blocks_shape):
    """``(y0, y1)``: Threefry-2x32 of the counters ``c + i`` for the row-major index ``i``
    of ``blocks_shape``."""
    from fungrad import lax

    n = math.prod(blocks_shape)
    if n >= 2**32:
        raise ValueError(
            f"rng_bit_generator: at most 2**32 blocks per call, got shape "
            f"{blocks_shape} ({n} blocks)"
        )
    idx = lax.reshape(lax.iota(np.uint32, n), blocks_shape)
    lo = lax.add(lax.broadcast_in_dim(k[2], blocks_shape, ()), idx)
    carry = lax.convert_element_type(lax.lt(lo, idx), np.uint32)
    hi = lax.add(lax.broadcast_in_dim(k[3], blocks_shape, ()), carry)
    return lax.threefry2x32(k[0], k[1], lo, hi)


_PHILOX_MUL = (0xD2511F53, 0xCD9E8D57)
_PHILOX_WEYL = (0x9E3779B9, 0xBB67AE85)


def _philox_blocks(k, n: int):
    """The four uint32 words of Philox-4x32 (10 rounds) for the 128-bit counters
    ``(c0, c1, c2, c3) + i``, ``i < n``: XLA takes the low half of the counter from the key's
    words ``(k2, k3)`` and the high half from ``(k0, k1)``, which are also the Philox key."""
    from fungrad import lax

    if n >= 2**32:
        raise ValueError(f"rng_bit_generator: at most 2**32 Philox blocks per call, got {n}")
    u32 = np.uint32

    def full(v, like):
        return lax.full_like(like, u32(v))

    idx = lax.iota(u32, n)
    words = []
    carry = None
    for j, base in enumerate((k[2], k[3], k[0], k[1])):
        b = lax.broadcast_in_dim(base, (n,), ())
        if j == 0:
            w = lax.add(b, idx)
            carry = lax.lt(w, idx)
        else:
            w = lax.add(b, lax.convert_element_type(carry, u32))
            carry = lax.bitwise_and(carry, lax.eq(w, full(0, w)))
        words.append(w)
    x0, x1, x2, x3 = words
    key0, key1 = k[0], k[1]
    for _ in range(10):
        a, b = full(_PHILOX_MUL[0], x0), full(_PHILOX_MUL[1], x2)
        hi0, lo0 = lax.mulhi(x0, a), lax.mul(x0, a)
        hi1, lo1 = lax.mulhi(x2, b), lax.mul(x2, b)
        x0, x1, x2, x3 = (
            lax.bitwise_xor(lax.bitwise_xor(hi1, x1), key0),
            lo1,
            lax.bitwise_xor(lax.bitwise_xor(hi0, x3), key1),
            lo0,
        )
        key0 = lax.add(key0, full(_PHILOX_WEYL[0], key0))
        key1 = lax.add(key1, full(_PHILOX_WEYL[1], key1))
    return x0, x1, x2, x3


def _philox_bits(k, shape, dt):
    """(bits, blocks used) of XLA's Philox generator: the words of consecutive blocks, in
    order, fill the result row-major (64-bit results: words 0|1 and 2|3 of each block)."""
    from fungrad import lax

    n = math.prod(shape)
    if dt.itemsize == 8:
        blocks = -(-n // 2)
        x0, x1, x2, x3 = _philox_blocks(k, blocks)

        def wide(lo, hi):
            lo, hi = lax.convert_element_type(lo, dt), lax.convert_element_type(hi, dt)
            return lax.bitwise_or(lo, lax.shift_left(hi, lax.full_like(hi, 32)))

        words = [wide(x0, x1), wide(x2, x3)]
    else:
        blocks = -(-n // 4)
        words = list(_philox_blocks(k, blocks))
    stacked = lax.concatenate([lax.reshape(w, (blocks, 1)) for w in words], 1)
    flat = lax.reshape(stacked, (blocks * len(words),))
    if blocks * len(words) != n:
        flat = lax.slice(flat, (0,), (n,))
    return lax.reshape(flat, shape), blocks


def rng_bit_generator(
    key, shape, dtype=np.uint32, algorithm=RandomAlgorithm.RNG_DEFAULT, *, out_sharding=None
):
    """``(new_key, bits)``: random unsigned-integer ``bits`` of ``shape`` and ``dtype`` and the
    key to use next (``jax.lax.rng_bit_generator``; the construction is in this module's
    docstring).

    Args:
      key: a uint32[4] array.
      shape: the shape of ``bits``.
      dtype: uint8, uint16, uint32 or uint64 (64 bits with ``enable_x64``).
      algorithm: a :class:`RandomAlgorithm`; RNG_DEFAULT is Philox, as on JAX's CPU.
      out_sharding: accepted for JAX's signature; fungrad has one device.

    Example: ``rng_bit_generator(numpy.array([1, 2, 3, 4], numpy.uint32), (2,),
    algorithm=RandomAlgorithm.RNG_THREE_FRY)`` gives the key ``[1, 2, 4, 4]`` and JAX's bits.
    """
    del out_sharding  # one device
    from fungrad import lax

    key, shape, dt, algorithm = _check_args(key, shape, dtype, algorithm)
    k = [lax.reshape(lax.slice(key, (i,), (i + 1,)), ()) for i in range(4)]
    if algorithm != RandomAlgorithm.RNG_THREE_FRY:  # Philox (RNG_DEFAULT, as on JAX's CPU)
        bits, used = _philox_bits(k, shape, dt)
    elif dt.itemsize == 8:
        blocks = shape
        y0, y1 = _threefry_blocks(k, blocks)
        bits = lax.bitwise_or(
            lax.convert_element_type(y0, dt),
            lax.shift_left(
                lax.convert_element_type(y1, dt),
                lax.full_like(lax.convert_element_type(y1, dt), 32),
            ),
        )
        used = math.prod(shape)
    elif not shape:
        y0, _ = _threefry_blocks(k, (1,))
        bits, used = lax.reshape(y0, ()), 1
    else:
        s = _split_dim(shape)
        half = -(-shape[s] // 2)
        blocks = shape[:s] + (half, 1) + shape[s + 1 :]
        y0, y1 = _threefry_blocks(k, blocks)
        both = lax.concatenate([y0, y1], s + 1)  # (.., half, 2, ..)
        bits = lax.reshape(both, shape[:s] + (2 * half,) + shape[s + 1 :])
        if 2 * half != shape[s]:
            bits = lax.slice(bits, (0,) * len(shape), shape)
        used = math.prod(blocks)
    if dt.itemsize < 4:
        bits = lax.convert_element_type(bits, dt)
    # the 64-bit counter (k2, k3) advances by the blocks used (modulo 2**64; for Philox XLA
    # keeps only the low 64 bits of its 128-bit counter, which is this)
    lo, hi = _add_to_counter(k[2], k[3], used)
    new_key = lax.concatenate([lax.reshape(v, (1,)) for v in (k[0], k[1], lo, hi)], 0)
    return new_key, bits


# -- rng_uniform: XLA's stateful generator ----------------------------------------------------

_STATE = {"generator": None}


def _generator() -> np.random.Generator:
    if _STATE["generator"] is None:
        _STATE["generator"] = np.random.default_rng(0)
    return _STATE["generator"]


def _draw(a, b, shape, dtype):
    a, b = np.asarray(a), np.asarray(b)
    gen = _generator()
    if dtypes.kind(dtype) == "f":
        with np.errstate(all="ignore"):
            u = gen.random(shape, dtype=np.float64)
            out = (a.astype(np.float64) + u * (b.astype(np.float64) - a)).astype(dtype)
        # rounding may reach b; keep the half-open interval [a, b)
        return np.where(out >= b, np.nextafter(b, a).astype(dtype), out).astype(dtype)
    if b <= a:  # undefined in JAX: fungrad gives a
        return np.full(shape, a, dtype)
    return gen.integers(int(a), int(b), size=shape, dtype=dtype)


def rng_uniform(a, b, shape):
    """Uniform random numbers in ``[a, b)`` of ``shape`` from XLA's *stateful* generator
    (``jax.lax.rng_uniform``): each evaluation draws new numbers, also inside a compiled
    function. ``a`` and ``b`` are scalars of one dtype (float or integer; for integers the
    draw is an integer in ``[a, b)``). If ``b <= a`` the result is unspecified (as in JAX;
    fungrad gives ``a`` for integers). Prefer :mod:`fungrad.random`: this exists for programs
    that call it."""
    from fungrad.callback import io_callback
    from fungrad.core import get_aval
    from fungrad.lax.utils import operand
    from fungrad.shape_dtype_struct import ShapeDtypeStruct

    fname = "rng_uniform"
    a, b = operand(a, fname), operand(b, fname)
    aa, ba = get_aval(a), get_aval(b)
    if aa.dtype != ba.dtype:
        raise ValueError(
            f"{fname}: a and b must have identical dtypes, got {aa.dtype.name} and {ba.dtype.name}"
        )
    if aa.shape != () or ba.shape != ():
        raise ValueError(f"{fname}: a and b must be scalars, got shapes {aa.shape} and {ba.shape}")
    if dtypes.kind(aa.dtype) not in "fiu":
        raise TypeError(f"{fname}: a and b must be floats or integers, got {aa.dtype.name}")
    shape = _static_shape(fname, shape)
    dtype = aa.dtype
    out = io_callback(
        lambda lo, hi: _draw(lo, hi, shape, dtype), ShapeDtypeStruct(shape, dtype), a, b
    )
    if aa.weak_type and ba.weak_type:
        from fungrad import lax

        out = lax.convert_element_type(out, dtype, weak_type=True)
    return out
