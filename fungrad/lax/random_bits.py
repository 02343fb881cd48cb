"""The counter-based random-bits primitive: ``threefry2x32``.

``threefry2x32 k1 k2 x1 x2 -> (y1, y2)`` applies the Threefry-2x32 block cipher (Salmon et al.,
"Parallel Random Numbers: As Easy as 1, 2, 3", SC 2011) with 20 rounds to each counter pair
``(x1, x2)`` under the key ``(k1, k2)``, exactly as JAX's ``threefry2x32_p`` does, so
``fungrad.random`` reproduces JAX's random streams bit for bit. All operands are uint32 of one
shape (0-d operands broadcast); it has two uint32 results of that shape.

Rules: the outputs are integers, so their tangents are zero (random bits never carry a
derivative: gradients flow only through what samplers compute from them); batching is
elementwise. The lowering is the cipher in uint32 kernel ops per element (so it fuses with the
samplers around it).
"""

from __future__ import annotations

import numpy as np

from fungrad.core import ShapedArray
from fungrad.lax.utils import broadcasting_shape, operand, standard_primitive
from fungrad.lowering import kernel
from fungrad.transforms.jvp import defjvp_zero
from fungrad.transforms.vmap import defbroadcasting

__all__ = ["threefry2x32", "threefry2x32_p"]

# Rotation constants of Threefry-2x32 (R_{32,0..7}) and the key-schedule parity constant.
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_KS_PARITY = np.uint32(0x1BD11BDA)


def _rotate_left(x, r: int):
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _threefry2x32_impl(k1, k2, x1, x2):
    shape = np.broadcast_shapes(*(np.shape(a) for a in (k1, k2, x1, x2)))
    k1, k2, x1, x2 = (np.broadcast_to(np.asarray(a, np.uint32), shape) for a in (k1, k2, x1, x2))
    ks = (k1, k2, k1 ^ k2 ^ _KS_PARITY)
    # uint32 arithmetic wraps modulo 2**32, which is what the cipher needs.
    with np.errstate(over="ignore"):
        x = [x1 + ks[0], x2 + ks[1]]
        for i in range(5):  # 5 groups of 4 rounds, each followed by a key injection
            for r in _ROTATIONS[i % 2]:
                x[0] = x[0] + x[1]
                x[1] = _rotate_left(x[1], r) ^ x[0]
            x[0] = x[0] + ks[(i + 1) % 3]
            x[1] = x[1] + ks[(i + 2) % 3] + np.uint32(i + 1)
    return [np.asarray(x[0], np.uint32).reshape(shape), np.asarray(x[1], np.uint32).reshape(shape)]


def _threefry2x32_abstract_eval(k1, k2, x1, x2):
    avals = (k1, k2, x1, x2)
    if any(a.dtype != np.uint32 for a in avals):
        raise TypeError(
            "threefry2x32: all operands must be uint32, got "
            + ", ".join(a.str_short() for a in avals)
        )
    shape = broadcasting_shape("threefry2x32", *avals)
    return [ShapedArray(shape, np.uint32), ShapedArray(shape, np.uint32)]


threefry2x32_p = standard_primitive(
    "threefry2x32", _threefry2x32_impl, _threefry2x32_abstract_eval, multiple_results=True
)
defjvp_zero(threefry2x32_p)
defbroadcasting(threefry2x32_p)


def _is_python_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, (bool, np.integer))


def threefry2x32(key1, key2, x1, x2):
    """The Threefry-2x32 hash (20 rounds) of counters ``(x1, x2)`` under key ``(key1, key2)``.

    Args:
      key1, key2: uint32 key words (0-d, or the counters' shape).
      x1, x2: uint32 counter words of one shape (0-d ones broadcast). Python ints in
        ``[0, 2**32)`` are taken as uint32 scalars.

    Returns:
      A list ``[y1, y2]`` of uint32 arrays of the common shape.

    Example: ``threefry2x32(0x13198a2e, 0x03707344, 0x243f6a88, 0x85a308d3)`` is
    ``[0xc4923a9c, 0x483df7a0]``, the reference test vector.
    """
    args = [
        operand(np.uint32(a) if _is_python_int(a) else a, "threefry2x32")
        for a in (key1, key2, x1, x2)
    ]
    _threefry2x32_abstract_eval(*(a.aval for a in args))
    return threefry2x32_p.bind(*args)


# -- lowering (fungrad/lowering/kernel.py) ------------------------------------------------------


def _threefry2x32_lowering(ctx, k1, k2, x1, x2):
    """The 20 rounds as uint32 kernel ops per element (additions wrap, rotations are
    shl/shr_logical/or). Both outputs share one interned expression, so when they are stored
    by one kernel the cipher runs once per element."""
    u32 = np.dtype(np.uint32)
    shape = max((t.shape for t in (k1, k2, x1, x2)), key=len)
    memo: dict = {}

    def c(v: int):
        return ctx.const(v, u32)

    def rotl(v, r: int):
        return ctx.op("or", ctx.op("shl", v, c(r)), ctx.op("shr_logical", v, c(32 - r)))

    def cipher(idx):
        key = tuple(idx)
        if key not in memo:
            a, b, y0, y1 = (t.at(kernel.broadcast_index(ctx, t, idx)) for t in (k1, k2, x1, x2))
            ks = (a, b, ctx.op("xor", ctx.op("xor", a, b), c(int(_KS_PARITY))))
            y = [ctx.op("add", y0, ks[0]), ctx.op("add", y1, ks[1])]
            for i in range(5):
                for r in _ROTATIONS[i % 2]:
                    y[0] = ctx.op("add", y[0], y[1])
                    y[1] = ctx.op("xor", rotl(y[1], r), y[0])
                y[0] = ctx.op("add", y[0], ks[(i + 1) % 3])
                y[1] = ctx.op("add", ctx.op("add", y[1], ks[(i + 2) % 3]), c(i + 1))
            memo[key] = y
        return memo[key]

    return [
        kernel.from_fn(shape, u32, lambda idx: cipher(idx)[0], "threefry2x32"),
        kernel.from_fn(shape, u32, lambda idx: cipher(idx)[1], "threefry2x32"),
    ]


kernel.register_lowering(threefry2x32_p, _threefry2x32_lowering)
