"""The native FFT library (``fungrad/lowering/cpu/fft.py``) called through ctypes on numpy
arrays, against ``numpy.fft`` in float64; and its step (``FftStep``) under jit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fungrad.lowering.cpu import fft as native

SIZES = [1, 2, 3, 4, 5, 7, 8, 12, 16, 17, 60, 64, 97, 100, 128, 1000, 1024, 4096]
COMPLEX = [np.complex64, np.complex128]


def _data(rng, shape, dtype):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _reference(x, inverse):
    """The unscaled DFT along the last axis in complex128 (numpy's ifft is scaled by 1/n)."""
    x = x.astype(np.complex128)
    n = x.shape[-1]
    return np.fft.ifft(x) * n if inverse else np.fft.fft(x)


def _check(y, x, inverse):
    """Relative error in the 2-norm within 2 eps log2(n) (measured: at most 0.7 eps log2(n)
    over every n up to 129 and the sizes above)."""
    ref = _reference(x, inverse)
    n = x.shape[-1]
    eps = np.finfo(x.dtype).eps
    err = np.linalg.norm(y - ref) / max(np.linalg.norm(ref), np.finfo(np.float64).tiny)
    assert y.dtype == x.dtype and y.shape == x.shape
    assert err <= 2 * eps * max(1.0, np.log2(n)), (n, inverse, err / eps)


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("inverse", [False, True])
def test_sizes_against_numpy(dtype, inverse):
    rng = np.random.default_rng(0)
    for n in SIZES:
        x = _data(rng, (3, n), dtype)
        _check(native.fft(x, inverse), x, inverse)


def test_large_power_of_two():
    x = _data(np.random.default_rng(1), (1 << 16,), np.complex64)
    _check(native.fft(x), x, False)


@pytest.mark.parametrize("n", [8, 12, 97])
def test_in_place_and_batch_shape(n):
    """``out`` may be ``x`` (both algorithms); leading axes are a batch."""
    rng = np.random.default_rng(2)
    x = _data(rng, (2, 3, n), np.complex128)
    want = _reference(x, False)
    y = x.copy()
    assert native.fft(y, out=y) is y
    np.testing.assert_allclose(y, want, rtol=0, atol=1e-12 * n)


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 300),
    batch=st.integers(1, 20),
    inverse=st.booleans(),
    double=st.booleans(),
)
def test_any_length(n, batch, inverse, double):
    x = _data(np.random.default_rng(n), (batch, n), np.complex128 if double else np.complex64)
    _check(native.fft(x, inverse), x, inverse)


@pytest.mark.parametrize("n", [16, 60, 17])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_propagates_within_its_row(n, bad):
    """Every output of a row depends on every input: one NaN or inf makes the whole row
    non-finite (inf times a zero imaginary part is NaN, as in numpy), other rows stay exact."""
    x = _data(np.random.default_rng(3), (2, n), np.complex64)
    x[0, n // 2] = bad
    y = native.fft(x)
    assert not np.isfinite(y[0]).any()
    _check(y[1:], x[1:], False)


@pytest.mark.parametrize(
    "shape",
    [(8, 4096), (601, 60), (1, 1 << 16), (1, 3 << 15), (1, 40000), (1, 65537)],
    ids=["rows", "blocks", "passes", "mixed", "radix5", "bluestein"],
)
def test_threads_give_the_serial_result(shape):
    """On the native pool (rows of a batch, blocks of 8 short rows, or chunks of each pass of
    one large transform: over j or over q, Bluestein's inner transforms) each output is
    computed by the same operations as on one thread: bitwise equal."""
    x = _data(np.random.default_rng(5), shape, np.complex64)
    serial = native.fft(x)
    np.testing.assert_array_equal(native.fft(x, threads=2), serial)
    np.testing.assert_array_equal(native.fft(x, threads=3), serial)
    if shape[1] == 1 << 16:
        _check(serial, x, False)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_blocks_of_rows(dtype):
    """Batches of short rows (and of rows below 4096 whose passes are not all vectorised,
    1000) go ``VEC`` (8) rows at a time through transposed blocks
    (fft_batch_ir.py): whole groups of 8 elements by shuffles, the rest one by one, the rows
    past the last block row by row; in place too."""
    rng = np.random.default_rng(7)
    for n in [2, 3, 5, 8, 12, 16, 24, 60, 64, 100, 256, 500, 1000]:
        for inverse in (False, True):
            x = _data(rng, (19, n), dtype)
            _check(native.fft(x, inverse), x, inverse)
        y = x.copy()
        native.fft(y, out=y)
        _check(y, x, False)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_along_other_axes(dtype):
    """Transforms along an axis that is not the last (fft_cols_ir.py): groups of 32 columns
    (4 blocks of 8), whole blocks of 8, single columns past them, Bluestein and long columns
    one by one; in place; on threads bitwise as on one."""
    rng = np.random.default_rng(8)
    cases = [((4, 70), 0), ((8, 45), 0), ((64, 40), 0), ((97, 40), 0), ((5, 7, 3), 1)]
    cases += [((2, 12, 64), 1), ((3, 16, 13), 1), ((2, 20000, 8), 1), ((3, 1, 8), 1)]
    cases += [((512, 64), 0)]  # threaded: 2 groups of 32 columns
    for shape, axis in cases:
        for inverse in (False, True):
            x = _data(rng, shape, dtype)
            y = native.fft(x, inverse, axis=axis)
            n = shape[axis]
            ref = np.moveaxis(_reference(np.moveaxis(x, axis, -1), inverse), -1, axis)
            eps = np.finfo(dtype).eps
            err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
            assert err <= 2 * eps * max(1.0, np.log2(n)), (shape, axis, err / eps)
            np.testing.assert_array_equal(native.fft(x, inverse, axis=axis, threads=2), y)
            z = x.copy()
            native.fft(z, inverse, out=z, axis=axis)
            np.testing.assert_array_equal(z, y)
    with pytest.raises(ValueError, match="out of range"):
        native.fft(np.zeros((2, 3), np.complex64), axis=2)


def test_empty_and_zero_length():
    assert native.fft(np.zeros((0, 8), np.complex64)).shape == (0, 8)
    assert native.fft(np.zeros((3, 0), np.complex128)).shape == (3, 0)


def test_bad_input():
    with pytest.raises(TypeError, match="complex64 or complex128"):
        native.fft(np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="at least one axis"):
        native.fft(np.complex64(1))
    with pytest.raises(ValueError, match="positive integer"):
        native.plan(0, np.float32, False)
    with pytest.raises(TypeError, match="float32 and float64"):
        native.plan(4, np.float16, False)


def test_plans_are_shared_and_symbols_stable():
    p = native.plan(12, np.float32, True)
    assert native.plan(12, np.float32, True) is p
    assert native.plan(12, np.float32, False) is not p
    assert native.plan_symbol(12, np.float32, True) == "fg_fft_plan_f32_12_inv"


@pytest.mark.parametrize("shape", [(5,), (3, 8), (64, 1024), (2, 97), (1 << 15,)])
def test_fft_step_under_jit(shape):
    """The FftStep that ``fft_c2c_p`` lowers to (interleaved ``[..., n, 2]`` float32; a batch
    of 64 x 1024 and a transform of 2^15 may run on the thread pool) equals numpy, forward and
    inverse."""
    import fungrad as fg
    from fungrad.lax.fft import fft_c2c_p

    x = np.random.default_rng(4).standard_normal(shape + (2,)).astype(np.float32)
    c = x[..., 0] + 1j * x[..., 1]
    for inverse in (False, True):
        y = np.asarray(fg.jit(lambda a, inv=inverse: fft_c2c_p.bind(a, inverse=inv))(x))
        assert y.dtype == np.float32 and y.shape == x.shape
        _check((y[..., 0] + 1j * y[..., 1]).astype(np.complex64), c.astype(np.complex64), inverse)


@pytest.mark.parametrize("n", [97, 1000, 1 << 15])
def test_numpy_fft_under_jit(n):
    """``fnp.fft.fft``/``ifft``/``rfft`` under ``fg.jit`` run the library end to end (real
    arguments and results around the complex transform) and equal numpy."""
    import fungrad as fg
    import fungrad.numpy as fnp

    rng = np.random.default_rng(6)
    re, im = rng.standard_normal((2, n)).astype(np.float32)
    c = re.astype(np.complex128) + 1j * im

    @fg.jit
    def parts(a, b):
        z = a + 1j * b
        f, g, h = fnp.fft.fft(z), fnp.fft.ifft(z), fnp.fft.rfft(a)
        return [(fnp.real(v), fnp.imag(v)) for v in (f, g, h)]

    refs = (np.fft.fft(c), np.fft.ifft(c), np.fft.rfft(re.astype(np.float64)))
    for (r, i), ref in zip(parts(re, im), refs):
        got = np.asarray(r).astype(np.complex128) + 1j * np.asarray(i)
        err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
        assert err <= 4 * np.finfo(np.float32).eps * np.log2(n), err


@pytest.mark.parametrize("shape", [(2, 16, 40), (1, 97, 9), (1, 1024, 64)])
def test_fft_step_along_middle_axis_under_jit(shape):
    """``fft_c2c`` along the middle axis lowers to FftStep(inner=...), rendered as the column
    function (serial, and for 1024 x 64 on the thread pool); it equals numpy along that
    axis."""
    import fungrad as fg
    from fungrad.lax.fft import fft_c2c_p

    x = np.random.default_rng(9).standard_normal(shape + (2,)).astype(np.float32)
    c = (x[..., 0] + 1j * x[..., 1]).astype(np.complex64)
    for inverse in (False, True):
        y = np.asarray(fg.jit(lambda a, inv=inverse: fft_c2c_p.bind(a, inverse=inv, axis=1))(x))
        got = (y[..., 0] + 1j * y[..., 1]).astype(np.complex64)
        _check(np.moveaxis(got, 1, -1), np.moveaxis(c, 1, -1), inverse)
