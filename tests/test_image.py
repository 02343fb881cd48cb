"""fungrad.image against references that do not share its code: linear resampling as
``np.interp`` at the half-pixel sample positions, area downsampling by an integer factor as a
block mean, the antialiased factor-2 linear filter written out, cubic and Lanczos kernels
reproducing constants and (Keys cubic) quadratics; resize's adjoint by the dot-product
identity, scale_and_translate's derivative in its scale by finite differences, vmap against a
loop, jit against eager; the errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.image import ResizeMethod, resize, scale_and_translate

_METHODS = ["nearest", "linear", "cubic", "cubic-pytorch", "lanczos3", "lanczos5", "area"]


def _samples(n_in: int, n_out: int) -> np.ndarray:
    """Where output pixel j's centre falls in input coordinates (pixel i's centre is i)."""
    return (np.arange(n_out) + 0.5) * n_in / n_out - 0.5


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 9), st.integers(1, 30), st.integers(0, 2**31 - 1))
def test_linear_upsampling_is_interpolation_at_the_pixel_centres(n_in, extra, seed):
    n_out = n_in + extra
    x = np.random.default_rng(seed).standard_normal((3, n_in)).astype(np.float32)
    got = np.asarray(resize(x, (3, n_out), "bilinear"))
    want = np.stack([np.interp(_samples(n_in, n_out), np.arange(n_in), row) for row in x])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 5), st.integers(1, 5), st.sampled_from([1, 2, 3, 4]), st.integers(0, 99))
def test_area_downsampling_by_an_integer_factor_is_the_block_mean(h, w, f, seed):
    x = np.random.default_rng(seed).standard_normal((h * f, w * f, 2)).astype(np.float32)
    got = np.asarray(fg.jit(lambda x: resize(x, (h, w, 2), "area"))(x))
    want = x.astype(np.float64).reshape(h, f, w, f, 2).mean(axis=(1, 3))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_antialiased_linear_halving_is_the_written_out_filter():
    """Downsampling by 2: the triangle stretched to width 2 weighs x[2j-1], x[2j], x[2j+1],
    x[2j+2] as 1, 3, 3, 1 (renormalised at the edges); without antialiasing, the mean of the
    two pixels around the sample."""
    x = np.random.default_rng(0).standard_normal(12)
    xp = np.concatenate([[0.0], x, [0.0]])
    taps = np.array([1.0, 3.0, 3.0, 1.0])
    want = []
    for j in range(6):
        w = taps * np.array([j > 0, 1, 1, j < 5])
        want.append(np.dot(w, xp[2 * j : 2 * j + 4]) / w.sum())
    with fg.enable_x64():
        got = np.asarray(resize(x, (6,), "linear"))
        plain = np.asarray(resize(x, (6,), "linear", antialias=False))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(plain, (x[0::2] + x[1::2]) / 2, rtol=1e-12)


@pytest.mark.parametrize("method", _METHODS)
@pytest.mark.parametrize("antialias", [True, False])
def test_a_constant_image_stays_constant(method, antialias):
    x = np.full((5, 7), 2.5, np.float32)
    for shape in [(11, 3), (2, 7), (5, 19), (1, 1)]:
        got = np.asarray(resize(x, shape, method, antialias=antialias))
        np.testing.assert_allclose(got, np.full(shape, 2.5), rtol=1e-5)


def test_keys_cubic_reproduces_a_quadratic_away_from_the_edges():
    n_in, n_out = 16, 40
    x = (np.arange(n_in) - 3.0) ** 2 / 10
    s = _samples(n_in, n_out)
    with fg.enable_x64():
        got = np.asarray(resize(x, (n_out,), "bicubic"))
    inner = (s > 2) & (s < n_in - 3)
    np.testing.assert_allclose(got[inner], ((s - 3.0) ** 2 / 10)[inner], rtol=1e-10)


def test_nearest_picks_pixels_and_keeps_the_dtype():
    x = np.arange(24, dtype=np.uint8).reshape(4, 6)
    got = resize(x, (7, 3), "nearest")
    rows = np.floor((np.arange(7) + 0.5) * 4 / 7).astype(int)
    cols = np.floor((np.arange(3) + 0.5) * 6 / 3).astype(int)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(np.asarray(got), x[rows][:, cols])


def test_dtypes():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    assert resize(x, (5, 4), "linear").dtype == np.float32
    assert resize(x.astype(np.float16), (5, 4), "cubic").dtype == np.float16
    with fg.enable_x64():
        assert resize(x.astype(np.float64), (5, 4), "lanczos3").dtype == np.float64


def test_an_unchanged_axis_is_left_alone_and_an_empty_output_is_empty():
    x = np.random.default_rng(1).standard_normal((4, 5)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(resize(x, (4, 5), "lanczos5")), x)
    assert resize(x, (0, 5), "linear").shape == (0, 5)


@pytest.mark.parametrize("method", ["linear", "cubic", "lanczos3", "area", "cubic-pytorch"])
def test_resize_adjoint_by_the_dot_product_identity(method):
    rng = np.random.default_rng(2)
    with fg.enable_x64():
        x, y = rng.standard_normal((6, 5)), rng.standard_normal((9, 3))
        out, vjp = fg.vjp(lambda x: resize(x, (9, 3), method, antialias=False), x)
        (xt,) = vjp(y)
        np.testing.assert_allclose(
            np.vdot(np.asarray(out), y), np.vdot(x, np.asarray(xt)), rtol=1e-10
        )


@pytest.mark.parametrize("method", ["linear", "cubic", "lanczos3"])
def test_scale_and_translate_derivative_in_scale_by_finite_differences(method):
    x = np.random.default_rng(3).standard_normal((7, 6))

    def f(s):
        return fnp.sum(fnp.sin(scale_and_translate(x, (9, 4), (0, 1), s, [0.3, -0.4], method)))

    with fg.enable_x64():
        s = np.array([1.3, 0.7])
        g = np.asarray(fg.grad(f)(s))
        h = 1e-6
        fd = [(f(s + h * e) - f(s - h * e)) / (2 * h) for e in np.eye(2)]
    np.testing.assert_allclose(g, np.asarray(fd, float), rtol=1e-5, atol=1e-7)


def test_scale_and_translate_identity_and_outside_samples():
    x = np.random.default_rng(4).standard_normal((5, 4)).astype(np.float32)
    same = scale_and_translate(x, (5, 4), (0, 1), [1.0, 1.0], [0.0, 0.0], "cubic")
    np.testing.assert_allclose(np.asarray(same), x, rtol=1e-6, atol=1e-6)
    # shifted right by 2 pixels: the first two output columns sample left of the input
    shifted = np.asarray(scale_and_translate(x, (5, 4), (1,), [1.0], [2.0], "linear"))
    np.testing.assert_array_equal(shifted[:, :2], 0)
    np.testing.assert_allclose(shifted[:, 2:], x[:, :2], rtol=1e-6)


def test_vmap_matches_a_loop_and_jit_matches_eager():
    xs = np.random.default_rng(5).standard_normal((3, 6, 6)).astype(np.float32)
    f = lambda x: resize(x, (4, 9), "lanczos3")  # noqa: E731
    got = np.asarray(fg.vmap(f)(xs))
    want = np.stack([np.asarray(f(x)) for x in xs])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(fg.jit(f)(xs[0])), want[0], rtol=1e-6, atol=1e-6)


def test_method_names_and_errors():
    assert ResizeMethod.from_string("bicubic") is ResizeMethod.CUBIC
    assert ResizeMethod.from_string("triangle") is ResizeMethod.LINEAR
    x = np.ones((4, 4), np.float32)
    with pytest.raises(ValueError, match="Unknown resize method"):
        resize(x, (2, 2), "bilinearr")
    with pytest.raises(ValueError, match="number of dimensions"):
        resize(x, (2, 2, 1), "linear")
    with pytest.raises(ValueError, match="nearest neighbor"):
        scale_and_translate(x, (2, 2), (0,), [0.5], [0.0], "nearest")
    with pytest.raises(ValueError, match="one value per spatial dimension"):
        scale_and_translate(x, (2, 2), (0, 1), [0.5], [0.0], "linear")
