"""The GPU's float32 math functions (wgsl_math.py) in ulps against float64 numpy, on dense
grids that include the small arguments where the algorithms' error terms carry the result.

Shader compilers simplify float algebra unless told not to: Mesa turned the two-sum and
fdlibm tails to 0 (log1p was off by 1274 ulp near 3e-4, atanh by 4066 ulp near 1e-4), which
value tests with a relative tolerance over a coarse range did not see. This file bounds the
error of each function in ulps on 200,000 arguments per function. CI runs it on lavapipe,
whose fma rounds twice (the software paths of wgsl_math.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fungrad as fg
from fungrad import lax

pytestmark = pytest.mark.usefixtures("gpu")

_erf = np.vectorize(math.erf, otypes=[np.float64])

# name: (fungrad function, float64 reference, (lo, hi) of the uniform part, ulp bound)
FUNCTIONS = {
    "exp": (lax.exp, np.exp, (-104.0, 89.0), 2.0),
    "expm1": (lax.expm1, np.expm1, (-20.0, 20.0), 2.0),
    "log": (lax.log, np.log, (1e-3, 1e4), 2.0),
    "log1p": (lax.log1p, np.log1p, (-0.9, 100.0), 2.0),
    "tanh": (lax.tanh, np.tanh, (-10.0, 10.0), 2.0),
    "logistic": (lax.logistic, lambda x: 1 / (1 + np.exp(-x)), (-30.0, 30.0), 2.0),
    "sin": (lax.sin, np.sin, (-1e5, 1e5), 2.0),
    "cos": (lax.cos, np.cos, (-1e5, 1e5), 2.0),
    "tan": (lax.tan, np.tan, (-10.0, 10.0), 2.5),
    "sinh": (lax.sinh, np.sinh, (-80.0, 80.0), 2.0),
    "cosh": (lax.cosh, np.cosh, (-80.0, 80.0), 2.0),
    "asinh": (lax.asinh, np.arcsinh, (-1e4, 1e4), 2.0),
    "atanh": (lax.atanh, np.arctanh, (-0.999, 0.999), 2.0),
    "atan": (lax.atan, np.arctan, (-100.0, 100.0), 2.0),
    "asin": (lax.asin, np.arcsin, (-1.0, 1.0), 2.0),
    "erf": (lax.erf, _erf, (-5.0, 5.0), 2.0),
}


def _arguments(lo: float, hi: float, n: int = 100_000) -> np.ndarray:
    """Uniform over [lo, hi] plus +-[1e-6, 1e-1] log-spaced (clipped into [lo, hi])."""
    rng = np.random.default_rng(0)
    small = np.exp(rng.uniform(np.log(1e-6), np.log(1e-1), n // 2))
    x = np.concatenate([rng.uniform(lo, hi, n), small, -small])
    return x[(x >= lo) & (x <= hi)].astype(np.float32)


def _ulps(y: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|y - ref| in units of the float32 spacing at ref (at least the smallest normal's: the
    GPU may flush denormal results to zero)."""
    r32 = ref.astype(np.float32)
    spacing = np.spacing(np.abs(r32)).astype(np.float64)
    err = np.abs(y.astype(np.float64) - ref) / np.maximum(spacing, 2.0**-149 * 2**23)
    return np.where(y == r32, 0.0, err)  # also where both are inf


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_float32_math_within_ulps(name):
    f, reference, (lo, hi), bound = FUNCTIONS[name]
    x = _arguments(lo, hi)
    y = np.asarray(fg.jit(f, backend="gpu")(x))
    ref = reference(x.astype(np.float64))
    with np.errstate(over="ignore"):
        err = _ulps(y, ref)
    worst = int(np.argmax(err))
    assert err[worst] <= bound, (
        f"{name}({x[worst]!r}) = {y[worst]!r} on the GPU, "
        f"{ref[worst]!r} exactly: {err[worst]:.1f} ulp > {bound}"
    )


@pytest.mark.parametrize(
    "x_range, y_range",
    [((0.1, 100.0), (-10.0, 10.0)), ((0.5, 2.0), (-100.0, 100.0)), ((1e-30, 1e30), (-1.2, 1.2))],
)
def test_pow_within_ulps(x_range, y_range):
    """pow's log in double-word float32 (the GPU has no float64): within 1 ulp, where a
    float32 log2 times y lost up to 64 ulp."""
    rng = np.random.default_rng(1)
    x = np.exp(rng.uniform(*np.log(x_range), 100_000)).astype(np.float32)
    y = rng.uniform(*y_range, 100_000).astype(np.float32)
    got = np.asarray(fg.jit(lax.pow, backend="gpu")(x, y))
    ref = np.power(x.astype(np.float64), y.astype(np.float64))
    with np.errstate(over="ignore"):
        err = _ulps(got, ref)
    worst = int(np.argmax(err))
    assert err[worst] <= 1.0, f"pow({x[worst]!r}, {y[worst]!r}): {err[worst]:.1f} ulp"


# float32 arguments nearest a multiple of pi/2 in each binade up to 2^24 (found exhaustively in
# float64 with a three-part pi/2: |x - q pi/2| down to 2^-27.8 at 252.898...)
HARDEST = np.float32(
    [
        1.5707963705062866,
        3.1415927410125732,
        4.71238899230957,
        9.42477798461914,
        18.84955596923828,
        37.69911193847656,
        75.39822387695312,
        252.89820861816406,
        505.7964172363281,
        1011.5928344726562,
        2023.1856689453125,
        2238.384765625,
        4476.76953125,
        8953.5390625,
        17907.078125,
        52516.43359375,
        105032.8671875,
        210065.734375,
        267058.9375,
        534117.875,
        1068235.75,
        2709675.5,
        5419351.0,
        10838702.0,
    ]
)


def near_multiples_of_pi_over_2(n: int) -> np.ndarray:
    """The float32 neighbours (+-3 ulp) of q pi/2 for n random q below 2^24 2/pi (a fifth of
    them below 5000), the HARDEST arguments, and their negatives."""
    rng = np.random.default_rng(2)
    q = np.concatenate(
        [rng.integers(1, int(2**24 / (np.pi / 2)), n - n // 5), rng.integers(1, 5000, n // 5)]
    )
    near = (q * (np.pi / 2)).astype(np.float32)
    x = np.concatenate([near + k * np.spacing(near) for k in range(-3, 4)] + [HARDEST])
    x = np.concatenate([x, -x]).astype(np.float32)
    return x[np.abs(x) < 2**24]


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_sin_cos_near_multiples_of_pi_over_2_up_to_2_24(name):
    """Where |x| is closest to a multiple of pi/2 the result is tiny (or +-1) and the
    reduction's error is all of it: the float32 neighbours (+-3 ulp) of q pi/2 for random q
    below 2^24 2/pi, and the hardest float32 argument of each binade, within 1 ulp."""
    f, reference, _, _ = FUNCTIONS[name]
    x = near_multiples_of_pi_over_2(50_000)
    y = np.asarray(fg.jit(f, backend="gpu")(x))
    err = _ulps(y, reference(x.astype(np.float64)))
    worst = int(np.argmax(err))
    assert err[worst] <= 1.0, (
        f"{name}({x[worst]!r}) = {y[worst]!r} on the GPU, "
        f"{reference(np.float64(x[worst]))!r} exactly: "
        f"{err[worst]:.2f} ulp"
    )
