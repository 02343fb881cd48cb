"""fungrad.scipy.signal against scipy.signal (test-only oracle): convolve/correlate values for
every mode and shape relation, detrend with breakpoints, dtypes, gradients (check_grads), vmap
against a Python loop, jit against eager, and the errors for bad input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
from fungrad.scipy import signal
from fungrad.testing import check_grads

sg = pytest.importorskip("scipy.signal")

MODES = ("full", "same", "valid")
SHAPE_PAIRS = [
    ((5,), (3,)),
    ((3,), (5,)),
    ((4,), (4,)),
    ((1,), (6,)),
    ((6,), (2,)),
    ((1,), (1,)),
    ((4, 6), (2, 3)),
    ((2, 3), (4, 6)),
    ((3, 3), (3, 3)),
    ((4, 5), (1, 5)),
    ((6, 7), (3, 2)),
    ((2, 2), (4, 4)),
    ((2, 3, 4), (2, 2, 2)),
]


def _pair(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=shapes[0]), rng.normal(size=shapes[1])


@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_values_match_scipy(x64, shapes, mode):
    a, b = _pair(shapes)
    names = ["convolve", "correlate"] + (["convolve2d", "correlate2d"] if a.ndim == 2 else [])
    for name in names:
        want = getattr(sg, name)(a, b, mode=mode)
        got = getattr(signal, name)(a, b, mode=mode)
        assert got.shape == want.shape, (name, got.shape, want.shape)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12, err_msg=name)


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 7),
    st.integers(1, 7),
    st.sampled_from(MODES),
    st.sampled_from(["convolve", "correlate"]),
    st.integers(0, 2**16),
)
def test_values_1d_float32_hypothesis(n1, n2, mode, name, seed):
    a, b = _pair(((n1,), (n2,)), seed)
    a, b = a.astype(np.float32), b.astype(np.float32)
    got = getattr(signal, name)(a, b, mode=mode)
    assert got.dtype == np.float32
    np.testing.assert_allclose(
        np.asarray(got), getattr(sg, name)(a, b, mode=mode), rtol=1e-5, atol=1e-5
    )


def test_dtypes_promote_to_inexact(x64):
    ints = signal.convolve(np.array([1, 2, 3]), np.array([0, 1, 2]))
    assert ints.dtype == np.float64
    np.testing.assert_array_equal(np.asarray(ints), [0, 1, 4, 7, 6])
    f32 = signal.correlate(np.ones(3, np.float32), np.ones(2, np.float32))
    assert f32.dtype == np.float32


def test_default_dtype_is_float32():
    assert signal.convolve2d(np.ones((2, 2), int), np.ones((2, 2), int)).dtype == np.float32


@pytest.mark.parametrize("name", ["convolve", "correlate", "convolve2d", "correlate2d"])
def test_grads(x64, name):
    a, b = _pair(((4, 3), (2, 2)), seed=3)
    for mode in MODES:
        check_grads(lambda x, y, m=mode: getattr(signal, name)(x, y, mode=m), (a, b), order=2)


def test_vmap_matches_loop(x64):
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=(4, 6)), rng.normal(size=(4, 3))
    for name in ("convolve", "correlate"):
        for mode in MODES:
            fun = getattr(signal, name)
            got = fg.vmap(lambda x, y, f=fun, m=mode: f(x, y, mode=m))(a, b)
            want = np.stack([np.asarray(fun(x, y, mode=mode)) for x, y in zip(a, b)])
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
    got = fg.vmap(signal.convolve2d, in_axes=(0, None))(np.stack([a, a + 1]), b[:2])
    np.testing.assert_allclose(np.asarray(got[1]), sg.convolve2d(a + 1, b[:2]), rtol=1e-12)


def test_jit_matches_eager():
    a, b = _pair(((5, 4), (3, 2)), seed=7)
    a, b = a.astype(np.float32), b.astype(np.float32)
    for mode in MODES:
        eager = signal.correlate2d(a, b, mode=mode)
        jitted = fg.jit(signal.correlate2d, static_argnames="mode")(a, b, mode=mode)
        np.testing.assert_allclose(np.asarray(jitted), np.asarray(eager), rtol=1e-6, atol=1e-6)


def test_errors():
    one, two = np.ones(3), np.ones((2, 2))
    with pytest.raises(ValueError, match="convolve: mode must be one of"):
        signal.convolve(one, one, mode="bogus")
    with pytest.raises(ValueError, match="same number of dimensions"):
        signal.correlate(one, two)
    with pytest.raises(ValueError, match="zero-size"):
        signal.convolve(np.ones(0), one)
    with pytest.raises(ValueError, match="at least as large"):
        signal.convolve(np.ones((2, 5)), np.ones((3, 2)))
    with pytest.raises(ValueError, match="method must be"):
        signal.correlate(one, one, method="other")
    with pytest.raises(ValueError, match="boundary='fill'"):
        signal.convolve2d(two, two, boundary="wrap")
    with pytest.raises(ValueError, match="fillvalue=1"):
        signal.correlate2d(two, two, fillvalue=1)
    with pytest.raises(ValueError, match="2-dimensional"):
        signal.convolve2d(one, one)
    with pytest.raises(TypeError):
        signal.convolve([1.0, 2.0], one)


@pytest.mark.parametrize("kind", ["linear", "constant"])
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("bp", [0, [3], [1, 2, 4], [4]], ids=str)
def test_detrend_matches_scipy(x64, kind, axis, bp):
    x = np.random.default_rng(9).normal(size=(4, 9)) + np.arange(9)
    np.testing.assert_allclose(
        np.asarray(signal.detrend(x, axis, kind, bp)), sg.detrend(x, axis, kind, bp), atol=1e-12
    )


def test_detrend_dtypes_transforms_and_errors():
    data = np.array([1.0, 4.0, 8.0, 8.0, 9.0], np.float32)
    out = signal.detrend(data)
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), [-1, 0, 2, 0, -1], atol=1e-5)
    assert signal.detrend(np.arange(5)).dtype == np.float32
    batch = np.random.default_rng(10).normal(size=(3, 6)).astype(np.float32)
    np.testing.assert_allclose(
        np.asarray(fg.vmap(signal.detrend)(batch)),
        np.stack([np.asarray(signal.detrend(r)) for r in batch]),
        atol=1e-6,
    )
    np.testing.assert_allclose(
        np.asarray(fg.jit(signal.detrend)(batch)), np.asarray(signal.detrend(batch)), atol=1e-6
    )
    check_grads(
        lambda d: signal.detrend(d, bp=[2]), (batch.astype(np.float64),), order=1, rtol=1e-2
    )
    with pytest.raises(ValueError, match="type must be"):
        signal.detrend(data, type="quadratic")
    with pytest.raises(ValueError, match=r"breakpoints must lie in \[0, 5\]"):
        signal.detrend(data, bp=[7])
    with pytest.raises(ValueError, match="overwrite_data"):
        signal.detrend(data, overwrite_data=True)
