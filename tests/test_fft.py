"""The FFT: ``lax.fft`` (fungrad/lax/fft.py), ``fungrad.numpy.fft`` and
``fungrad.scipy.signal.fftconvolve``. Values against numpy.fft / scipy.signal (sizes with every
small prime factor, a prime, powers of two, zero where numpy allows), dtypes as JAX, errors,
vmap against a loop, derivatives against finite differences and the transpose identity with
JAX's convention, jit (the native FFT library) against eager, and the split of ``fft_p`` into
one-dimensional interleaved transforms (``fft_c2c_p``)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.signal as ssig
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.array import Array
from fungrad.ir import passes
from fungrad.lax.fft import FftType, fft_c2c_p, fft_split
from fungrad.lowering import complex_split, fusion
from fungrad.lowering.cpu.policy import CpuPolicy
from fungrad.lowering.gpu.policy import GpuPolicy
from fungrad.lowering.steps import FftStep
from fungrad.scipy import signal as fsig
from fungrad.testing import check_grads

SIZES = [1, 2, 3, 5, 7, 8, 12, 16, 17, 64, 100]
TYPES = ["FFT", "IFFT", "RFFT", "IRFFT"]


def _complex(rng, shape, dtype=np.complex64):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _close(got, want, dtype):
    """``got`` equals ``want`` to the precision of ``dtype`` (an FFT's error grows with the
    magnitude of the values and the log of the length)."""
    got = np.asarray(got)
    tol = 1e-5 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12
    scale = max(float(np.max(np.abs(want), initial=0.0)), 1.0)
    np.testing.assert_allclose(got, want, rtol=tol * 10, atol=tol * 10 * scale)


def _numpy_lax_fft(x, typ, lengths):
    axes = tuple(range(x.ndim - len(lengths), x.ndim))
    if typ == "FFT":
        return np.fft.fftn(x, axes=axes)
    if typ == "IFFT":
        return np.fft.ifftn(x, axes=axes)
    if typ == "RFFT":
        return np.fft.rfftn(x, axes=axes)
    return np.fft.irfftn(x, s=lengths, axes=axes)


def _lax_input(rng, typ, batch, lengths, dtype):
    """An operand for ``lax.fft(typ, lengths)`` of precision ``dtype`` (float32/float64)."""
    cdt = np.complex64 if dtype == np.float32 else np.complex128
    if typ == "RFFT":
        return rng.standard_normal(batch + lengths).astype(dtype)
    if typ == "IRFFT":
        return _complex(rng, batch + lengths[:-1] + (lengths[-1] // 2 + 1,), cdt)
    return _complex(rng, batch + lengths, cdt)


# -- lax.fft: values, dtypes, errors -----------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    typ=st.sampled_from(TYPES),
    lengths=st.lists(st.sampled_from(SIZES), min_size=1, max_size=3).map(tuple),
    batch=st.sampled_from([(), (2,), (0,), (2, 1)]),
    dtype=st.sampled_from([np.float32, np.float64]),
)
def test_lax_fft_matches_numpy(typ, lengths, batch, dtype):
    if np.prod(lengths) > 4096:
        lengths = lengths[-1:]
    with fg.enable_x64(dtype == np.float64):
        x = _lax_input(np.random.default_rng(0), typ, batch, lengths, dtype)
        got = lax.fft(x, typ, lengths)
        want = _numpy_lax_fft(x, typ, lengths)
        out_dtype = (
            dtype if typ == "IRFFT" else (np.complex64 if dtype == np.float32 else np.complex128)
        )
        assert got.dtype == out_dtype and got.shape == want.shape
        _close(got, want, dtype)


def test_lax_fft_large_power_of_two_and_fft_type_spellings():
    x = _complex(np.random.default_rng(1), (2**10,))
    want = np.fft.fft(x)
    for typ in ("FFT", "fft", FftType.FFT):
        _close(lax.fft(x, typ, (1024,)), want, np.float32)
    _close(lax.fft(x, lax.FftType.IFFT, [1024]), np.fft.ifft(x), np.float32)


def test_lax_fft_converts_like_jax():
    ints = np.arange(4, dtype=np.int32)
    assert lax.fft(ints, "FFT", (4,)).dtype == np.complex64
    assert lax.fft(ints, "RFFT", (4,)).dtype == np.complex64
    assert lax.fft(np.ones(4, bool), "RFFT", (4,)).dtype == np.complex64
    _close(lax.fft(ints, "RFFT", (4,)), np.fft.rfft(ints), np.float32)
    x = np.arange(3.0, dtype=np.float32)
    out = lax.fft(x, "FFT", ())  # no lengths: converted, not transformed
    assert out.dtype == np.complex64
    np.testing.assert_array_equal(np.asarray(out), x)


def test_lax_fft_ignores_imaginary_dc_and_nyquist_in_irfft():
    x = np.array([1 + 1j, 2, 3 + 5j], np.complex64)
    want = np.fft.irfft(x, 4)  # pocketfft ignores them too
    _close(lax.fft(x, "IRFFT", (4,)), want, np.float32)
    np.testing.assert_allclose(np.asarray(lax.fft(x, "IRFFT", (4,))), [2, -0.5, 0, -0.5])


def test_lax_fft_empty():
    z = np.ones((0, 4), np.complex64)
    assert lax.fft(z, "FFT", (4,)).shape == (0, 4)
    assert lax.fft(np.ones((3, 0), np.complex64), "IFFT", (0,)).shape == (3, 0)
    assert lax.fft(np.ones((2, 1), np.complex64), "IRFFT", (0,)).shape == (2, 0)
    assert lax.fft(np.ones((0, 8), np.float32), "RFFT", (8,)).shape == (0, 5)


@pytest.mark.parametrize(
    "args, err, match",
    [
        ((np.ones(8, np.float32), 5, (8,)), TypeError, "unknown FFT type value"),
        ((np.ones(8, np.float32), "foo", (8,)), ValueError, "unknown FFT type 'foo'"),
        ((np.ones(8, np.float32), "FFT", (4,)), ValueError, "must equal fft_lengths"),
        ((np.ones(8, np.float32), "FFT", (1, 8)), ValueError, "fewer dimensions"),
        ((np.ones((2,) * 4, np.float32), "FFT", (2,) * 4), ValueError, "1 to 3"),
        ((np.ones(8, np.complex64), "RFFT", (8,)), ValueError, "RFFT takes a real operand"),
        ((np.ones(3, np.complex64), "IRFFT", (8,)), ValueError, r"must be \(5,\)"),
        ((np.ones((4, 5), np.complex64), "IRFFT", (3, 8)), ValueError, r"must be \(3, 5\)"),
        ((np.ones(0, np.float32), "RFFT", (0,)), ValueError, "RFFT of length 0"),
        ((np.ones(8, np.float32), "FFT", (8.0,)), TypeError, "sequence of ints"),
    ],
)
def test_lax_fft_errors(args, err, match):
    with pytest.raises(err, match=match):
        lax.fft(*args)


# -- fungrad.numpy.fft: values -----------------------------------------------------------------


NORMS = [None, "backward", "ortho", "forward"]


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]),
    m=st.sampled_from(SIZES),
    n=st.sampled_from([None, 1, 4, 7, 16, 33]),
    axis=st.sampled_from([-1, 0, 1]),
    norm=st.sampled_from(NORMS),
    real=st.booleans(),
)
def test_numpy_fft_1d_matches_numpy(name, m, n, axis, norm, real):
    rng = np.random.default_rng(m)
    shape = [3, 4]
    shape[axis] = m
    x = _complex(rng, shape)
    if real or name in ("rfft", "ihfft"):
        x = x.real.astype(np.float32)
    if name in ("irfft", "hfft") and n is None and shape[axis] == 1:
        n = 2  # the default length 2 * (1 - 1) is 0, which numpy refuses
    got = getattr(fnp.fft, name)(x, n=n, axis=axis, norm=norm)
    want = getattr(np.fft, name)(x, n=n, axis=axis, norm=norm)
    want_dtype = np.float32 if name in ("irfft", "hfft") else np.complex64
    assert got.dtype == want_dtype and got.shape == want.shape
    _close(got, want, np.float32)


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(["fftn", "ifftn", "rfftn", "irfftn", "fft2", "ifft2", "rfft2", "irfft2"]),
    shape=st.sampled_from([(3, 4, 5), (2, 8, 6), (1, 7, 2), (4, 1, 3)]),
    axes=st.sampled_from([None, (0,), (2, 0), (-1, -2), (1, 0, 2)]),
    with_s=st.booleans(),
    norm=st.sampled_from(NORMS),
)
def test_numpy_fft_nd_matches_numpy(name, shape, axes, with_s, norm):
    rng = np.random.default_rng(sum(shape))
    x = _complex(rng, shape)
    if name.startswith("r"):
        x = x.real.astype(np.float32)
    if name.endswith("2"):
        axes = (-2, -1) if axes is None or len(axes) != 2 else axes
    s = None
    if with_s:
        k = x.ndim if axes is None else len(axes)
        s = tuple([6, 3, 5][:k])
    elif name.startswith("irfft"):
        last = (axes or (-1,))[-1]
        if x.shape[last] == 1:
            return  # the default last length, 0, numpy refuses
    kwargs = {"s": s, "norm": norm}
    if axes is not None:
        kwargs["axes"] = axes
    got = getattr(fnp.fft, name)(x, **kwargs)
    if s is not None and axes is None:  # numpy deprecates s without axes: the same, spelled out
        kwargs["axes"] = tuple(range(x.ndim - len(s), x.ndim))
    want = getattr(np.fft, name)(x, **kwargs)
    assert got.shape == want.shape
    assert got.dtype == (np.float32 if name.startswith("irfft") else np.complex64)
    _close(got, want, np.float32)


def test_numpy_fftn_over_more_than_three_axes(x64):
    rng = np.random.default_rng(5)
    x = _complex(rng, (2, 3, 2, 4, 3), np.complex128)
    _close(fnp.fft.fftn(x), np.fft.fftn(x), np.float64)
    _close(fnp.fft.ifftn(x, axes=(0, 1, 2, 4)), np.fft.ifftn(x, axes=(0, 1, 2, 4)), np.float64)
    r = x.real
    _close(fnp.fft.rfftn(r), np.fft.rfftn(r), np.float64)
    y = np.fft.rfftn(r)
    _close(fnp.fft.irfftn(y, r.shape), np.fft.irfftn(y, r.shape, axes=range(5)), np.float64)


def test_numpy_fft_dtypes_x64(x64):
    for dt in (np.int8, np.int32, np.uint8, bool):  # JAX: float32 first, 64-bit ints float64
        assert lax.fft(np.ones(4, dt), "RFFT", (4,)).dtype == np.complex64
        assert fnp.fft.fft(np.ones(4, dt)).dtype == np.complex64
    assert lax.fft(np.ones(4, np.int64), "FFT", (4,)).dtype == np.complex128
    assert fnp.fft.fft(np.ones(4)).dtype == np.complex128
    assert fnp.fft.rfft(np.ones(4)).dtype == np.complex128
    assert fnp.fft.irfft(np.ones(3, np.complex128)).dtype == np.float64
    assert fnp.fft.fft(np.ones(4, np.float32)).dtype == np.complex64
    assert fnp.fft.irfft(np.ones(3, np.complex64)).dtype == np.float32


def test_numpy_fft_zero_size_and_zero_d():
    assert fnp.fft.fft(np.ones((0, 3), np.float32)).shape == (0, 3)
    assert fnp.fft.fft(np.ones((0,), np.float32)).shape == (0,)
    assert fnp.fft.irfft(np.ones((1,), np.complex64)).shape == (0,)
    out = fnp.fft.fftn(np.float32(2.0))  # no axes: converted
    assert out.dtype == np.complex64 and complex(out) == 2


@pytest.mark.parametrize("n", [0, 1, 2, 5, 8, 9])
@pytest.mark.parametrize("d", [1.0, 0.25])
def test_frequencies_and_shifts(n, d):
    if n == 0:  # numpy divides by zero; JAX gives [] and [nan]
        assert fnp.fft.fftfreq(0, d).shape == (0,)
        assert np.isnan(np.asarray(fnp.fft.rfftfreq(0, d))).all()
    for name in ("fftfreq", "rfftfreq") if n else ():
        got = getattr(fnp.fft, name)(n, d)
        want = getattr(np.fft, name)(n, d)
        assert got.dtype == np.float32 and got.shape == want.shape
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    for axes in (None, 0, (1,), (0, 1), -1):
        np.testing.assert_array_equal(
            np.asarray(fnp.fft.fftshift(x, axes)), np.fft.fftshift(x, axes)
        )
        np.testing.assert_array_equal(
            np.asarray(fnp.fft.ifftshift(x, axes)), np.fft.ifftshift(x, axes)
        )


def test_fftfreq_dtype_and_traced_spacing(x64):
    assert fnp.fft.fftfreq(4, dtype=np.float64).dtype == np.float64
    got = fg.jit(lambda d: fnp.fft.fftfreq(6, d))(0.5)
    np.testing.assert_allclose(np.asarray(got), np.fft.fftfreq(6, 0.5))


@pytest.mark.parametrize(
    "call, err, match",
    [
        (lambda: fnp.fft.fft(np.ones(3), n=0), ValueError, "must be positive"),
        (lambda: fnp.fft.fft(np.ones(3), norm="bad"), ValueError, "invalid norm"),
        (lambda: fnp.fft.fft(np.ones(3), axis=(0,)), ValueError, "multiple axes"),
        (lambda: fnp.fft.fft(np.ones(3), axis=1), ValueError, "out of bounds"),
        (lambda: fnp.fft.fft(np.float32(3)), ValueError, "out of bounds"),
        (lambda: fnp.fft.fftn(np.ones((3, 3)), axes=(0, 0)), ValueError, "repeated axes"),
        (lambda: fnp.fft.fftn(np.ones((3, 3)), s=(2, 2, 2), axes=(0, 1)), ValueError, "lengths"),
        (lambda: fnp.fft.fft2(np.ones((3, 3, 3)), axes=(0, 1, 2)), ValueError, "only supports 2"),
        (lambda: fnp.fft.fft([1.0, 2.0]), TypeError, "requires ndarray or scalar"),
        (lambda: fnp.fft.rfft(np.ones(3, np.complex64)), ValueError, "real operand"),
        (lambda: fnp.fft.fftfreq([3]), ValueError, "only takes an int"),
        (lambda: fnp.fft.rfftfreq(3, d=[1.0]), ValueError, "only takes a single value"),
    ],
)
def test_numpy_fft_errors(call, err, match):
    with pytest.raises(err, match=match):
        call()


# -- transforms: vmap, derivatives -------------------------------------------------------------


@pytest.mark.parametrize("typ", TYPES)
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_lax_fft_vmap_matches_loop(typ, axis):
    rng = np.random.default_rng(axis)
    lengths = (4, 6)
    x = _lax_input(rng, typ, (2,), lengths, np.float32)  # [2, ...]: batch axis 0
    x = np.moveaxis(np.stack([x, 2 * x, -x]), 0, axis)  # a batch of 3 along `axis`
    got = fg.vmap(lambda v: lax.fft(v, typ, lengths), in_axes=axis)(x)
    want = np.stack([np.asarray(lax.fft(np.take(x, i, axis), typ, lengths)) for i in range(3)])
    _close(got, want, np.float32)


def _as_real_map(typ, lengths):
    """``lax.fft`` as a map between real arrays (a complex side as its real and imaginary
    parts), so finite differences apply."""
    if typ == "RFFT":

        def f(x):
            y = lax.fft(x, typ, lengths)
            return lax.real(y), lax.imag(y)

        return f
    if typ == "IRFFT":
        return lambda re, im: lax.fft(lax.complex(re, im), typ, lengths)

    def g(re, im):
        y = lax.fft(lax.complex(re, im), typ, lengths)
        return lax.real(y), lax.imag(y)

    return g


@pytest.mark.parametrize("typ", TYPES)
@pytest.mark.parametrize("lengths", [(5,), (4,), (3, 4)])
def test_lax_fft_check_grads(typ, lengths, x64):
    rng = np.random.default_rng(len(lengths))
    x = _lax_input(rng, typ, (2,), lengths, np.float64)
    args = (x,) if typ == "RFFT" else (x.real, x.imag)
    check_grads(_as_real_map(typ, lengths), args, order=1, modes=("fwd", "rev"))


@pytest.mark.parametrize("typ", TYPES)
@pytest.mark.parametrize("lengths", [(5,), (6,), (2, 3)])
def test_lax_fft_transpose_identity(typ, lengths, x64):
    """JAX's transpose of a real-linear map A: Re<T(ct), x> = Re<ct, A(x)> with the bilinear
    pairing <u, v> = sum(u * v) (no conjugation)."""
    rng = np.random.default_rng(7)
    x = _lax_input(rng, typ, (2,), lengths, np.float64)
    y, pullback = fg.vjp(lambda v: lax.fft(v, typ, lengths), x)
    y = np.asarray(y)
    ct = rng.standard_normal(y.shape) + (0 if typ == "IRFFT" else 1j * rng.standard_normal(y.shape))
    (back,) = pullback(ct.astype(y.dtype))
    back = np.asarray(back)
    assert back.dtype == x.dtype
    lhs = np.real(np.sum(back * x))
    rhs = np.real(np.sum(ct * y))
    np.testing.assert_allclose(lhs, rhs, rtol=1e-10, atol=1e-10)
    # and the jvp is the map itself (linearity)
    _, tangent = fg.jvp(lambda v: lax.fft(v, typ, lengths), (x,), (x,))
    np.testing.assert_allclose(np.asarray(tangent), y, rtol=1e-12, atol=1e-12)


def test_numpy_fft_grad_of_power_spectrum(x64):
    """d/dx sum |rfft(x)|^2 (Parseval, one-sided): finite differences through fnp.fft."""
    x = np.random.default_rng(3).standard_normal(9)
    f = lambda v: fnp.sum(fnp.abs(fnp.fft.rfft(v, norm="ortho")) ** 2)  # noqa: E731
    check_grads(f, (x,), order=2, modes=("fwd", "rev"))


# -- fft_c2c_p and the split -------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 3, 8, 17])
def test_c2c_primitive_matches_numpy_and_its_transpose_is_the_inverse(n, x64):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((2, n, 2))
    z = x[..., 0] + 1j * x[..., 1]
    for inverse, want in ((False, np.fft.fft(z)), (True, np.fft.ifft(z) * n)):
        out = np.asarray(fft_c2c_p.bind(Array(x), inverse=inverse))
        np.testing.assert_allclose(out[..., 0] + 1j * out[..., 1], want, atol=1e-12)
        check_grads(lambda v, inv=inverse: fft_c2c_p.bind(v, inverse=inv), (x,), order=1)
    got = fg.vmap(lambda v: fft_c2c_p.bind(v, inverse=False), in_axes=1, out_axes=1)(
        np.swapaxes(x, 0, 1).copy()
    )
    np.testing.assert_allclose(
        np.swapaxes(np.asarray(got), 0, 1), fft_c2c_p.bind(Array(x), inverse=False), atol=1e-12
    )


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_c2c_along_any_axis_eager_jit_grad_vmap(axis, x64):
    """``fft_c2c(axis=...)``: numpy along that logical axis, eagerly and under jit (one
    FftStep with ``inner`` > 1 for axis 0), its transpose (check_grads) and its batching
    (a Python loop over a mapped middle axis)."""
    rng = np.random.default_rng(3 + axis)
    x = rng.standard_normal((3, 5, 2))
    z = x[..., 0] + 1j * x[..., 1]
    a = axis % 2
    for inverse in (False, True):
        want = np.fft.ifft(z, axis=a) * z.shape[a] if inverse else np.fft.fft(z, axis=a)

        def f(v, inv=inverse):
            return fft_c2c_p.bind(v, inverse=inv, axis=axis)

        for out in (f(Array(x)), fg.jit(f)(x)):
            out = np.asarray(out)
            np.testing.assert_allclose(out[..., 0] + 1j * out[..., 1], want, atol=1e-12)
        check_grads(f, (x,), order=1)
    xs = rng.standard_normal((3, 4, 5, 2))
    got = np.asarray(fg.vmap(lambda v: fft_c2c_p.bind(v, inverse=False, axis=axis), 1, 1)(xs))
    for i in range(4):
        np.testing.assert_allclose(
            got[:, i], fft_c2c_p.bind(Array(xs[:, i]), inverse=False, axis=axis), atol=1e-12
        )
    with pytest.raises(ValueError, match="fft_c2c: axis 2 is out of range"):
        fft_c2c_p.bind(Array(x), inverse=False, axis=2)


@pytest.mark.parametrize("typ", TYPES)
@pytest.mark.parametrize("lengths", [(8,), (7,), (1,), (3, 4), (2, 3, 5)])
def test_split_rule_matches_numpy(typ, lengths, x64):
    """``fft_split`` (the compiler's rewrite into interleaved 1-D transforms), run eagerly."""
    x = _lax_input(np.random.default_rng(2), typ, (2,), lengths, np.float64)
    arg = Array(x) if typ == "RFFT" else (Array(x.real.copy()), Array(x.imag.copy()))
    if typ == "IRFFT":
        x[..., 0] += 0.25j  # the imaginary part at zero frequency does not count
        arg = (Array(x.real.copy()), Array(x.imag.copy()))
    out = fft_split(arg, fft_type=FftType[typ], fft_lengths=lengths)
    got = np.asarray(out) if typ == "IRFFT" else np.asarray(out[0]) + 1j * np.asarray(out[1])
    _close(got, _numpy_lax_fft(x, typ, lengths), np.float64)


def test_gpu_policy_refuses_fft_and_cpu_plans_fft_steps():
    def planned(policy):
        closed = fg.make_jaxpr(lambda v: fft_c2c_p.bind(v, inverse=False))(
            np.ones((3, 8, 2), np.float32)
        )
        return fusion.plan(passes.optimize(closed), policy=policy)

    steps = [s for s in planned(CpuPolicy()).steps if isinstance(s, FftStep)]
    assert len(steps) == 1 and (steps[0].batch, steps[0].n, steps[0].inverse) == (3, 8, False)
    with pytest.raises(fusion.LoweringError, match='fft.*backend="cpu"'):
        planned(GpuPolicy())


@pytest.mark.parametrize(
    "fn, arg, want",
    [
        # (batch, n, inner, inverse) of each library step: axes other than the last are
        # transformed where they lie (inner > 1), with no transposes around the step
        (fnp.fft.fft, np.ones((3, 64), np.complex64), [(3, 64, 1, False)]),
        (fnp.fft.rfft, np.ones(64, np.float32), [(1, 32, 1, False)]),  # half length, packed
        (fnp.fft.rfft, np.ones(9, np.float32), [(1, 9, 1, False)]),
        (fnp.fft.irfft, np.ones(33, np.complex64), [(1, 32, 1, True)]),
        (fnp.fft.ifft2, np.ones((4, 6), np.complex64), [(4, 6, 1, True), (1, 4, 6, True)]),
        (fnp.fft.rfft2, np.ones((4, 6), np.float32), [(4, 3, 1, False), (1, 4, 4, False)]),
        (
            lambda z: fnp.fft.fft(z, axis=0),
            np.ones((5, 3, 2), np.complex64),
            [(1, 5, 6, False)],
        ),
        (  # two real columns as one complex one: a transform of n along axis 0, no copy
            lambda x: fnp.fft.rfft(x, axis=0),
            np.ones((16, 8), np.float32),
            [(1, 16, 4, False)],
        ),
        (lambda x: fnp.fft.irfft(x, axis=0), np.ones((9, 8), np.complex64), [(1, 16, 4, True)]),
        (
            lambda z: fnp.fft.fftn(z, axes=(0, 2)),
            np.ones((5, 3, 2), np.complex64),
            [(15, 2, 1, False), (1, 5, 6, False)],
        ),
    ],
)
def test_split_program_runs_library_steps(fn, arg, want):
    closed = complex_split.split_program(fg.make_jaxpr(fn)(fnp.asarray(arg)))
    prog = fusion.plan(passes.optimize(closed), policy=CpuPolicy())
    steps = [(s.batch, s.n, s.inner, s.inverse) for s in prog.steps if isinstance(s, FftStep)]
    assert steps == want


@pytest.mark.parametrize(
    "name, shape, kwargs",
    [
        ("rfft", (16, 8), dict(axis=0)),
        ("rfft", (7, 6), dict(axis=0)),  # odd n
        ("rfft", (1, 4), dict(axis=0)),
        ("rfft", (2, 4), dict(axis=0)),
        ("rfft", (5, 3, 4), dict(axis=1)),
        ("rfft", (5, 3), dict(axis=0)),  # odd last axis: moved last, packed pairs
        ("rfft", (6, 0), dict(axis=0)),
        ("rfftn", (8, 6, 4), dict(axes=(0, 1))),
        ("rfftn", (8, 6, 4), dict(axes=(1, 0))),
        ("rfftn", (9, 6, 4), dict(axes=(2, 0))),
        ("rfftn", (8, 6, 4), dict(axes=(0, 2, 1))),
        ("rfft2", (8, 6), dict(axes=(1, 0))),
        ("irfft", (9, 8), dict(axis=0)),
        ("irfft", (4, 6), dict(axis=0, n=7)),  # odd n
        ("irfft", (1, 4), dict(axis=0, n=1)),
        ("irfft", (2, 4), dict(axis=0, n=2)),
        ("irfft", (5, 3, 4), dict(axis=1)),
        ("irfft", (5, 3), dict(axis=0)),
        ("irfft", (6, 0), dict(axis=0)),
        ("irfftn", (8, 4, 4), dict(axes=(0, 1))),
        ("irfftn", (8, 6, 4), dict(axes=(1, 0))),
        ("irfftn", (9, 6, 4), dict(axes=(2, 0))),
        ("irfftn", (8, 6, 4), dict(axes=(0, 2, 1))),
        ("irfft2", (8, 6), dict(axes=(1, 0))),
    ],
)
def test_jit_rfft_along_other_axes_matches_numpy(name, shape, kwargs):
    """RFFT and IRFFT along an axis that is not the last one, under jit (two real columns
    transformed as one complex column where the last axis is even), against numpy in float64
    (IRFFT: the imaginary parts at zero and Nyquist, which do not count, are nonzero)."""
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    if name.startswith("i"):
        x = (x + 1j * rng.standard_normal(shape)).astype(np.complex64)
    got = np.asarray(fg.jit(lambda v: getattr(fnp.fft, name)(v, **kwargs))(x))
    want = getattr(np.fft, name)(
        x.astype(np.complex128 if x.dtype.kind == "c" else np.float64), **kwargs
    )
    assert got.shape == want.shape
    assert got.dtype == (np.float32 if name.startswith("i") else np.complex64)
    np.testing.assert_allclose(got, want, atol=1e-5 * max(1.0, np.abs(want).max(initial=0)))


@pytest.mark.parametrize(
    "fn, arg",
    [
        (fnp.fft.fft, np.ones((4, 64), np.complex64)),
        (fnp.fft.fft, np.ones(64, np.complex128)),
        (fnp.fft.fft2, np.ones((8, 6), np.complex64)),
        (lambda z: fnp.fft.fft(z, axis=0), np.ones((8, 6), np.complex64)),
        (lambda z: fnp.fft.fft(z, axis=1), np.ones((3, 8, 6), np.complex64)),
    ],
)
def test_jitted_unscaled_fft_is_library_steps_alone(fn, arg):
    """A complex argument reaches the FFT step as its own buffer and the step writes the
    program's output: no kernel copies the data before, between or after the transforms
    (the split's ``complex_interleave`` of the planes it sliced is the array itself)."""
    closed = complex_split.split_program(fg.make_jaxpr(fn)(fnp.asarray(arg)))
    prog = fusion.plan(passes.optimize(closed), policy=CpuPolicy())
    assert prog.steps and all(isinstance(s, FftStep) for s in prog.steps), prog.steps
    assert prog.steps[0].x.kind == "input" and prog.steps[-1].out.kind == "output"


# -- jit against eager -------------------------------------------------------------------------


@settings(max_examples=12, deadline=None)
@given(
    typ=st.sampled_from(TYPES),
    lengths=st.lists(st.sampled_from(SIZES), min_size=1, max_size=2).map(tuple),
    dtype=st.sampled_from([np.float32, np.float64]),
)
def test_lax_fft_jit_matches_eager(typ, lengths, dtype):
    with fg.enable_x64(dtype == np.float64):
        x = fnp.asarray(_lax_input(np.random.default_rng(4), typ, (3,), lengths, dtype))
        f = lambda v: lax.fft(v, typ, lengths)  # noqa: E731
        _close(fg.jit(f)(x), np.asarray(f(x)), dtype)


@pytest.mark.parametrize("n", [2**10, 1000, 97, 2, 1])
def test_numpy_fft_jit_matches_numpy(n):
    # complex arguments enter jit as Arrays (jit takes numpy arrays of real dtypes only)
    rng = np.random.default_rng(n)
    x = _complex(rng, (2, n))
    r = x.real.astype(np.float32)
    spec = np.fft.rfft(r).astype(np.complex64)
    xa, sa = fnp.asarray(x), fnp.asarray(spec)
    _close(fg.jit(fnp.fft.fft)(xa), np.fft.fft(x), np.float32)
    ortho = fg.jit(lambda v: fnp.fft.ifft(v, norm="ortho"))
    _close(ortho(xa), np.fft.ifft(x, norm="ortho"), np.float32)
    _close(fg.jit(fnp.fft.rfft)(r), np.fft.rfft(r), np.float32)
    _close(fg.jit(lambda v: fnp.fft.irfft(v, n))(sa), np.fft.irfft(spec, n), np.float32)
    fft2 = fg.jit(lambda v: fnp.fft.fft2(v, axes=(1, 0)))
    _close(fft2(xa), np.fft.fft2(x, axes=(1, 0)), np.float32)
    _close(fg.jit(lambda v: fnp.fft.rfft2(v))(r), np.fft.rfft2(r), np.float32)
    _close(fg.jit(lambda v: fnp.fft.irfft2(v, (2, n)))(sa), np.fft.irfft2(spec, (2, n)), np.float32)


def test_jit_grad_through_fft_matches_eager(x64):
    x = np.random.default_rng(8).standard_normal((3, 10))
    f = lambda v: fnp.sum(fnp.abs(fnp.fft.rfft2(v)) ** 2 * fnp.arange(6.0))  # noqa: E731
    g = fg.grad(f)
    np.testing.assert_allclose(np.asarray(fg.jit(g)(x)), np.asarray(g(x)), rtol=1e-10)


# -- scipy.signal.fftconvolve ------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    s1=st.lists(st.sampled_from([1, 2, 3, 5, 8]), min_size=1, max_size=3),
    s2=st.lists(st.sampled_from([1, 2, 3, 4]), min_size=3, max_size=3),
    mode=st.sampled_from(["full", "same", "valid"]),
    complex_=st.booleans(),
)
def test_fftconvolve_matches_scipy(s1, s2, mode, complex_):
    s2 = s2[: len(s1)]
    rng = np.random.default_rng(len(s1))
    a, b = _complex(rng, s1), _complex(rng, s2)
    if not complex_:
        a, b = a.real.astype(np.float32), b.real.astype(np.float32)
    fits = all(x >= y for x, y in zip(s1, s2)) or all(x <= y for x, y in zip(s1, s2))
    if mode == "valid" and not fits:
        with pytest.raises(ValueError, match="at least as large"):
            fsig.fftconvolve(a, b, mode)
        return
    got = fsig.fftconvolve(a, b, mode)
    want = ssig.fftconvolve(a, b, mode)
    assert got.shape == want.shape and got.dtype == a.dtype
    _close(got, want, np.float32)


def test_fftconvolve_axes_broadcasting_and_errors():
    rng = np.random.default_rng(9)
    a = rng.standard_normal((3, 20)).astype(np.float32)
    b = rng.standard_normal((1, 7)).astype(np.float32)
    for mode in ("full", "same", "valid"):
        _close(
            fsig.fftconvolve(a, b, mode, axes=1), ssig.fftconvolve(a, b, mode, axes=1), np.float32
        )
        _close(
            fsig.fftconvolve(a, b[:1].repeat(3, 0), mode, axes=-1),
            ssig.fftconvolve(a, b.repeat(3, 0), mode, axes=-1),
            np.float32,
        )
    ints = fsig.fftconvolve(np.arange(4, dtype=np.int32), np.ones(2, np.int32))
    assert ints.dtype == np.float32
    np.testing.assert_allclose(np.asarray(ints), [0, 1, 3, 5, 3], atol=1e-5)
    assert fsig.fftconvolve(np.ones(0, np.float32), np.ones(3, np.float32)).shape == (0,)
    with pytest.raises(ValueError, match="same number of dimensions"):
        fsig.fftconvolve(np.ones(3), np.ones((3, 1)))
    with pytest.raises(ValueError, match="mode must be"):
        fsig.fftconvolve(np.ones(3), np.ones(3), "wide")
    with pytest.raises(ValueError, match="equal lengths or length 1"):
        fsig.fftconvolve(np.ones((3, 4)), np.ones((2, 4)), axes=1)
    # convolve / correlate with method="fft" take this path
    x, k = rng.standard_normal(16), rng.standard_normal(5)
    _close(fsig.convolve(x, k, method="fft"), np.convolve(x, k), np.float32)
    _close(fsig.correlate(x, k, "same", method="fft"), ssig.correlate(x, k, "same"), np.float32)


def test_fftconvolve_jit_and_grad(x64):
    rng = np.random.default_rng(10)
    a, b = rng.standard_normal((6, 5)), rng.standard_normal((3, 2))
    f = lambda u, v: fsig.fftconvolve(u, v, "same")  # noqa: E731
    np.testing.assert_allclose(
        np.asarray(fg.jit(f)(a, b)), ssig.fftconvolve(a, b, "same"), atol=1e-10
    )
    check_grads(f, (a, b), order=1, modes=("fwd", "rev"))


def test_jit_grad_and_vmap_along_other_axes_match_eager():
    """Derivatives through rfft/irfft/fft along axis 0 (whose transposes bind the FFT again
    along moved axes) compile to the in-place paths and equal eager; vmap over the last axis
    under jit equals numpy."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 6)).astype(np.float32)

    def loss(v):
        a = fnp.fft.rfft(v, axis=0)
        b = fnp.fft.irfft(a * 1j + a, n=8, axis=0)
        c = fnp.fft.fft(v.astype(np.complex64), axis=0)
        return fnp.sum(fnp.abs(a) ** 2) + fnp.sum(b * v) + fnp.sum(fnp.real(c) * fnp.imag(c))

    eager = np.asarray(fg.grad(loss)(x))
    np.testing.assert_allclose(fg.jit(fg.grad(loss))(x), eager, rtol=1e-5, atol=1e-5)
    mapped = fg.jit(fg.vmap(lambda v: fnp.fft.rfft(v, axis=0), in_axes=1, out_axes=1))(x)
    np.testing.assert_allclose(mapped, np.fft.rfft(x.astype(np.float64), axis=0), atol=1e-5)


@pytest.mark.parametrize("n", [2, 6, 8, 12])
@pytest.mark.parametrize("axis", [-1, 0])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_jit_rfft_of_values_near_the_largest_float_stays_finite(n, axis, norm):
    """The real transform's even/odd split halves sums of two spectra: computed as (a + b) / 2
    it overflowed where the result is finite (fuzz seed 368418: rfft of [3e38, 0, ...] was
    inf + nan i under jit). (Samples that make the packed complex transform's parts exceed
    the largest float, e.g. two neighbours of 1.5e38, still overflow there.)"""
    rng = np.random.default_rng(n)
    for first in ([3e38], [-3e38], [3e38, 0, -1e37]):
        x = np.zeros((n, 4), np.float32)
        x[: len(first)] = np.asarray(first[:n], np.float32)[:, None]
        x += rng.standard_normal(x.shape).astype(np.float32)
        x = x if axis == 0 else np.ascontiguousarray(x.T)
        want = np.fft.rfft(x.astype(np.float64), axis=axis, norm=norm)
        if not np.isfinite(want.astype(np.complex64)).all():
            continue
        got = np.asarray(fg.jit(lambda x: fnp.fft.rfft(x, axis=axis, norm=norm))(x))
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
