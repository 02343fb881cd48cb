"""XLA's random-bit operations with JAX's lax names: ``rng_bit_generator`` and ``rng_uniform``.

``rng_bit_generator(key, shape, dtype, algorithm)`` maps a uint32[4] key to ``(new_key,
bits)``. JAX documents its bits as a deterministic function of the key, shape, dtype and
algorithm that may differ across backends; fungrad computes XLA's documented ThreeFry
construction (``xla/hlo/builder/lib/prng.cc``), so ``RNG_THREE_FRY`` gives the same bits and
new key as JAX on CPU:

* the key's words ``(k0, k1)`` are the Threefry-2x32 key, ``(k2, k3)`` a 64-bit counter
  ``c = k2 + 2**32 k3``;
* 8/16/32-bit results: the shape is halved along its first even dimension (when there is
  none, along its first largest dimension, rounded up; a 0-d shape as ``(1,)``): block ``i``
  of that half shape (row-major) is ``threefry2x32((k0, k1), c + i)``, whose two words fill
  the two halves (its first word the first half, ...); 8/16-bit results keep the low bits;
* 64-bit results (``enable_x64``): element ``i`` is ``y0 | y1 << 32`` of block ``c + i``;
* the new key is the old one with the counter advanced by the number of blocks used.

``RNG_DEFAULT`` is the backend's choice: fungrad's is ThreeFry (JAX's CPU backend picks
Philox, so RNG_DEFAULT bits differ from JAX's CPU bits, as JAX allows). ``RNG_PHILOX`` is not
implemented and raises a ValueError.

All of it is a composition of ``threefry2x32`` and integer primitives, so it traces, batches
(each key of a vmapped batch its own stream, as a Python loop would give; JAX's batching rule
draws the whole batch from the first key) and compiles like user code; its results are
integers, so it has no derivative.

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
        raise TypeError(f"{fname}: key must be a uint32[4] array, got "
                        f"{aval.str_short()}; make one with, e.g., "
                        "jax.random.key_data(jax.random.split(key)) reshaped to (4,) or "
                        "numpy.array([...], numpy.uint32)")
    try:
        shape = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"{fname}: shape must be a sequence of integers, got {shape!r}") \
            from None
    if any(d < 0 for d in shape):
        raise ValueError(f"{fname}: shape must have non-negative sizes, got {shape}")
    dt = np.dtype(dtype)
    if dt not in _BIT_DTYPES:
        raise TypeError(f"{fname}: unsupported dtype {dt.name}; the bits are unsigned "
                        "integers: uint8, uint16, uint32 or uint64 (view them as another "
                        "type with lax.bitcast_convert_type)")
    dt = dtypes.canonicalize_dtype(dt)
    try:
        algorithm = RandomAlgorithm(algorithm)
    except ValueError:
        raise ValueError(f"{fname}: algorithm must be a lax.RandomAlgorithm, got "
                         f"{algorithm!r}") from None
    if algorithm == RandomAlgorithm.RNG_PHILOX:
        raise ValueError(f"{fname}: RNG_PHILOX is not implemented in fungrad; use "
                         "RandomAlgorithm.RNG_THREE_FRY (or RNG_DEFAULT, which is ThreeFry "
                         "here)")
    return key, shape, dt


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
    if n >= 2 ** 32:
        raise ValueError(f"rng_bit_generator: at most 2**32 blocks per call, got shape "
                         f"{blocks_shape} ({n} blocks)")
    idx = lax.reshape(lax.iota(np.uint32, n), blocks_shape)
    lo = lax.add(lax.broadcast_in_dim(k[2], blocks_shape, ()), idx)
    carry = lax.convert_element_type(lax.lt(lo, idx), np.uint32)
    hi = lax.add(lax.broadcast_in_dim(k[3], blocks_shape, ()), carry)
    return lax.threefry2x32(k[0], k[1], lo, hi)


def rng_bit_generator(key, shape, dtype=np.uint32, algorithm=RandomAlgorithm.RNG_DEFAULT,
                      *, out_sharding=None):
    """``(new_key, bits)``: random unsigned-integer ``bits`` of ``shape`` and ``dtype`` and the
    key to use next (``jax.lax.rng_bit_generator``; the construction is in this module's
    docstring).

    Args:
      key: a uint32[4] array.
      shape: the shape of ``bits``.
      dtype: uint8, uint16, uint32 or uint64 (64 bits with ``enable_x64``).
      algorithm: a :class:`RandomAlgorithm`; RNG_DEFAULT and RNG_THREE_FRY are ThreeFry.
      out_sharding: accepted for JAX's signature; fungrad has one device.

    Example: ``rng_bit_generator(numpy.array([1, 2, 3, 4], numpy.uint32), (2,),
    algorithm=RandomAlgorithm.RNG_THREE_FRY)`` gives the key ``[1, 2, 4, 4]`` and JAX's bits.
    """
    del out_sharding  # one device
    from fungrad import lax
    key, shape, dt = _check_args(key, shape, dtype, algorithm)
    k = [lax.reshape(lax.slice(key, (i,), (i + 1,)), ()) for i in range(4)]
    if dt.itemsize == 8:
        blocks = shape
        y0, y1 = _threefry_blocks(k, blocks)
        bits = lax.bitwise_or(lax.convert_element_type(y0, dt),
                              lax.shift_left(lax.convert_element_type(y1, dt),
                                             lax.full_like(lax.convert_element_type(y1, dt),
                                                           32)))
        used = math.prod(shape)
    elif not shape:
        y0, _ = _threefry_blocks(k, (1,))
        bits, used = lax.reshape(y0, ()), 1
    else:
        s = _split_dim(shape)
        half = -(-shape[s] // 2)
        blocks = shape[:s] + (half, 1) + shape[s + 1:]
        y0, y1 = _threefry_blocks(k, blocks)
        both = lax.concatenate([y0, y1], s + 1)  # (.., half, 2, ..)
        bits = lax.reshape(both, shape[:s] + (2 * half,) + shape[s + 1:])
        if 2 * half != shape[s]:
            bits = lax.slice(bits, (0,) * len(shape), shape)
        used = math.prod(blocks)
    if dt.itemsize < 4:
        bits = lax.convert_element_type(bits, dt)
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
    if dtype.kind == "f":
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
    from fungrad.api import ShapeDtypeStruct
    from fungrad.callback import io_callback
    from fungrad.core import get_aval
    from fungrad.lax.utils import operand
    fname = "rng_uniform"
    a, b = operand(a, fname), operand(b, fname)
    aa, ba = get_aval(a), get_aval(b)
    if aa.dtype != ba.dtype:
        raise ValueError(f"{fname}: a and b must have identical dtypes, got "
                         f"{aa.dtype.name} and {ba.dtype.name}")
    if aa.shape != () or ba.shape != ():
        raise ValueError(f"{fname}: a and b must be scalars, got shapes {aa.shape} and "
                         f"{ba.shape}")
    if aa.dtype.kind not in "fiu":
        raise TypeError(f"{fname}: a and b must be floats or integers, got {aa.dtype.name}")
    try:
        shape = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"{fname}: shape must be a sequence of integers, got {shape!r}") \
            from None
    if any(d < 0 for d in shape):
        raise ValueError(f"{fname}: shape must have non-negative sizes, got {shape}")
    dtype = aa.dtype
    out = io_callback(lambda lo, hi: _draw(lo, hi, shape, dtype),
                      ShapeDtypeStruct(shape, dtype), a, b)
    if aa.weak_type and ba.weak_type:
        from fungrad import lax
        out = lax.convert_element_type(out, dtype, weak_type=True)
    return out
