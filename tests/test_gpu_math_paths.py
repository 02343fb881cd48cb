"""The GPU's own formulations in wgsl_math.py (exp and tanh with exponent-add scaling),
at the edges their selects handle: range ends, gradual underflow, inf, NaN payloads, -0,
and the branch points, against numpy and the CPU backend."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fungrad as fg
from fungrad import lax
from fungrad.lowering.gpu import runtime as gpu_runtime
from tests.wgsl_math_emulation import flush

pytestmark = pytest.mark.usefixtures("gpu")


def _flushes() -> bool:
    """Whether the device flushes float32 subnormals to zero (WGSL allows it; NVIDIA does):
    there the references are flushed the same way, inputs and results."""
    return gpu_runtime.runtime().flushes_subnormals


# NaNs with payloads: an exponent add would turn some of them into numbers
NANS = np.array([0x7FC00000, 0x7F800001, 0xFFC00123, 0x7FFFFFFF, 0xFF8001FF], np.uint32).view(
    np.float32
)


def _gpu(f, x):
    return np.asarray(fg.jit(f, backend="gpu")(x))


def _cpu(f, x):
    return np.asarray(fg.jit(f)(x))


def _ulps_denormal(y, ref):
    """|y - ref| in ulps of float32 at ref, denormals included (spacing down to 2^-149)."""
    r32 = ref.astype(np.float32)
    with np.errstate(invalid="ignore"):  # inf - inf where both are inf
        err = np.abs(y.astype(np.float64) - ref) / np.spacing(np.abs(r32)).astype(np.float64)
    return np.where(y == r32, 0.0, err)


def _around(*points, k: int = 4):
    """Each float32 point and its k neighbours on either side."""
    p = np.float32(points)
    return np.concatenate([np.float32(p + i * np.spacing(p)) for i in range(-k, k + 1)])


def test_exp_range_ends_and_gradual_underflow_match_the_cpu():
    """exp is exact scaling of one polynomial value inside the normal range, and a second
    exponent add times 2^-64 below it: denormal results round once, as on the CPU."""
    x = np.concatenate(
        [
            _around(-87.33654022216797, 88.72283172607422, -104.0, -103.97, -100.0, -95.0, -88.0),
            np.linspace(-104.5, -87.0, 4001, dtype=np.float32),
            np.linspace(87.0, 89.0, 1001, dtype=np.float32),
            np.float32([0.0, -0.0, 1e-30, -1e-30, -np.inf, np.inf, -1e30, 1e30, -3e38, 3e38]),
        ]
    )
    got, cpu = _gpu(lax.exp, x), _cpu(lax.exp, x)
    with np.errstate(over="ignore"):
        ref = np.exp(x.astype(np.float64))
        if _flushes():
            ref = np.where(ref.astype(np.float32) < 2.0**-126, 0.0, ref)
            cpu = flush(cpu)
        err = _ulps_denormal(got, ref)
    assert err.max() <= 1.0, (x[np.argmax(err)], err.max())
    denormal = (got > 0) & (got < np.finfo(np.float32).tiny)
    if _flushes():
        assert not np.any(denormal)
    else:
        assert np.any(denormal)  # gradual underflow, as on the CPU
    np.testing.assert_array_equal(got == 0, cpu == 0)
    np.testing.assert_array_equal(np.isinf(got), np.isinf(cpu))


@pytest.mark.parametrize("name", ["exp", "tanh"])
def test_nan_payloads_stay_nan(name):
    f = getattr(lax, name)
    assert np.all(np.isnan(_gpu(f, NANS)))


def test_tanh_edges_match_numpy():
    """Both branches around |x| = 0.625, the saturation at 9.1, -0 and infinities."""
    x = np.concatenate(
        [
            _around(0.625, -0.625, 9.1, -9.1, 9.0, 1e-30, -1e-30),
            np.float32([0.0, -0.0, np.inf, -np.inf, 20.0, -20.0]),
        ]
    )
    got = _gpu(lax.tanh, x)
    ref = np.tanh(x.astype(np.float64))
    err = _ulps_denormal(got, ref)
    assert err.max() <= 1.5, (x[np.argmax(err)], err.max())
    assert np.array_equal(np.signbit(got), np.signbit(x))  # -0 stays -0


@settings(max_examples=25, deadline=None)
@given(
    hnp.arrays(
        np.float32,
        hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=9),
        elements=st.floats(-120, 120, width=32),
    )
)
def test_exp_and_tanh_agree_with_the_cpu_backend(x):
    """Any shape (0-d and size 0 too): GPU and CPU within 1 ulp of each other."""

    def f(v):
        return lax.exp(v), lax.tanh(v)

    xc = flush(x) if _flushes() else x
    for got, cpu in zip(fg.jit(f, backend="gpu")(x), fg.jit(f)(xc)):
        got, cpu = np.asarray(got), np.asarray(cpu)
        cpu = flush(cpu) if _flushes() else cpu
        assert got.shape == cpu.shape == x.shape
        np.testing.assert_allclose(got, cpu, rtol=2.5e-7, atol=1.5e-45)


def test_tan_near_multiples_of_pi_over_2_up_to_2_24():
    """tan through the exact 12-bit-piece reduction: next to its poles (odd multiples of pi/2)
    -1/tan takes the reduction's two parts renormalised, else their tail cost 86 ulp there;
    next to its zeros the tail carries the result. The float32 neighbours (+-3 ulp) of q pi/2
    for random q below 2^24 2/pi, and each binade's hardest argument: within 1.25 ulp."""
    from test_gpu_math_ulp import near_multiples_of_pi_over_2

    x = near_multiples_of_pi_over_2(25_000)
    got = _gpu(lax.tan, x)
    err = _ulps_denormal(got, np.tan(x.astype(np.float64)))
    assert err.max() <= 1.25, (x[np.argmax(err)], err.max())


def test_tan_edges():
    x = np.float32(
        [
            0.0,
            -0.0,
            1e-30,
            -1e-30,
            np.inf,
            -np.inf,
            np.nan,
            2.0**24,
            -(2.0**24),
            2.0**24 - 1,
            1.5707963705062866,
        ]
    )
    got = _gpu(lax.tan, x)
    cpu = _cpu(lax.tan, x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(cpu))  # NaN from 2^24 on, as the CPU
    np.testing.assert_allclose(got[~np.isnan(got)], cpu[~np.isnan(cpu)], rtol=2.5e-7)
    assert np.array_equal(np.signbit(got[:4]), np.signbit(x[:4]))


def _special_errors(name: str, x: np.ndarray, scale) -> np.ndarray:
    """|GPU - float64 reference| in ulps of float32 at ``scale(ref, x)``."""
    from fungrad.lax import special_math

    got = _gpu(getattr(lax, name), x)
    with np.errstate(all="ignore"):
        ref = getattr(special_math, name)(x.astype(np.float64))
        err = np.abs(got - ref) / np.spacing(np.float32(scale(ref, x))).astype(np.float64)
    return np.where((got == ref.astype(np.float32)) | (np.isnan(got) & np.isnan(ref)), 0.0, err)


# (lo, hi, ulp bound): float32 lgamma within a few ulp of max(|f|, 1), except by reflection
# (x <= -1/2), where log(pi / |sin(pi x)|) and lgamma(1 - x) cancel near lgamma's zeros
LGAMMA_RANGES = [
    (-0.5, 0.5, 3.0),
    (0.5, 3.0, 3.0),
    (3.0, 20.0, 3.0),
    (20.0, 1e36, 3.0),
    (1e-30, 1e-3, 3.0),
    (-10.0, -0.5, 20.0),
    (-100.0, -10.0, 6.0),
]
# digamma within a few ulp of max(|f|, 1, log(1 + |x|)); x < 1/2 by reflection
DIGAMMA_RANGES = [
    (0.5, 3.0, 2.5),
    (3.0, 20.0, 2.5),
    (20.0, 1e36, 2.5),
    (1e-30, 1e-3, 2.5),
    (-0.5, 0.5, 6.0),
    (-10.0, -0.5, 8.0),
    (-100.0, -10.0, 6.0),
]


def _range(lo: float, hi: float, n: int = 100_000) -> np.ndarray:
    rng = np.random.default_rng(int(abs(lo * 7 + hi)) % 1000)
    if lo > 0 and hi / lo > 100:
        return np.exp(rng.uniform(np.log(lo), np.log(hi), n)).astype(np.float32)
    return rng.uniform(lo, hi, n).astype(np.float32)


@pytest.mark.parametrize("lo, hi, bound", LGAMMA_RANGES)
def test_lgamma_in_float32_alone(lo, hi, bound):
    x = _range(lo, hi)
    err = _special_errors("lgamma", x, lambda r, x: np.maximum(np.abs(r), 1.0))
    assert err.max() <= bound, (x[np.argmax(err)], err.max())


@pytest.mark.parametrize("lo, hi, bound", DIGAMMA_RANGES)
def test_digamma_in_float32_alone(lo, hi, bound):
    x = _range(lo, hi)
    err = _special_errors(
        "digamma", x, lambda r, x: np.maximum(np.maximum(np.abs(r), 1.0), np.log1p(np.abs(x)))
    )
    assert err.max() <= bound, (x[np.argmax(err)], err.max())


def test_lgamma_digamma_special_values_match_the_cpu():
    """Poles (non-positive integers), +-inf, NaN, +-0, and the zeros of both functions."""
    x = np.concatenate(
        [
            NANS,
            np.float32(
                [
                    0.0,
                    -0.0,
                    -1.0,
                    -2.0,
                    -7.0,
                    -1e6,
                    -(2.0**24),
                    1.0,
                    2.0,
                    np.inf,
                    -np.inf,
                    1e-38,
                    -1e-38,
                    3e36,
                    5e36,
                    1.4616321,
                    -0.5040830,
                    -2.4570247,
                    -2.7476826,
                ]
            ),
        ]
    )
    for name in ("lgamma", "digamma"):  # where the device flushes, +-1e-38 are zeros there
        got = _gpu(getattr(lax, name), x)
        cpu = _cpu(getattr(lax, name), flush(x) if _flushes() else x)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(cpu), err_msg=name)
        np.testing.assert_array_equal(np.isinf(got), np.isinf(cpu), err_msg=name)
        ok = np.isfinite(cpu)
        np.testing.assert_allclose(got[ok], cpu[ok], rtol=3e-6, atol=2.5e-6, err_msg=name)
