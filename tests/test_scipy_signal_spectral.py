"""fungrad.scipy.signal's spectral estimators (stft, istft, csd, welch) against scipy.signal
(test-only oracle): hypothesis-drawn lengths, segments, windows, detrending, scaling and
sidedness in float32 and float64, real and complex input; istft(stft(x)) round trips; other
axes; jit against eager; gradients by finite differences; vmap against a Python loop; JAX's
defaults, errors and warnings (and where fungrad follows SciPy instead of a JAX bug)."""

import contextlib
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.scipy import signal
from fungrad.testing import check_grads

sg = pytest.importorskip("scipy.signal")

WINDOWS = ["hann", "hamming", "blackman", "bartlett", "boxcar", ("kaiser", 2.5), ("tukey", 0.4)]


def _signal(shape, seed, complex_=False):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape)
    if complex_:
        x = x + 1j * rng.normal(size=shape)
    return x


def _cast(x, dtype):
    """``x`` in float32/complex64 or float64/complex128."""
    if dtype == np.float32:
        return x.astype(np.complex64 if np.iscomplexobj(x) else np.float32)
    return x


def _close(got, want, dtype, what=""):
    """``got`` equals the float64 SciPy result ``want`` to ``dtype``'s precision. The test
    signals are of order 1, so the absolute tolerance is relative to the larger of 1 and the
    largest value (results that cancel to near zero keep the inputs' rounding error)."""
    got = np.asarray(got)
    assert got.shape == np.shape(want), (what, got.shape, np.shape(want))
    tol = 2e-5 if dtype == np.float32 else 1e-11
    scale = max(np.max(np.abs(want), initial=0.0), 1.0)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale, err_msg=what)


def _x64(dtype):
    """enable_x64 for float64 cases (float32 ones run with it off)."""
    return fg.enable_x64(dtype == np.float64)


@contextlib.contextmanager
def _quiet():
    """Silence the UserWarnings both libraries give (complex input's two-sided switch,
    SciPy's NOLA check); the warnings themselves are tested separately."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


@st.composite
def segmenting(draw, min_n=2, max_n=70):
    """``(n, nperseg, noverlap, nfft)`` with ``nperseg <= n``; the FFT sometimes zero-padded."""
    n = draw(st.integers(min_n, max_n))
    nperseg = draw(st.integers(1, min(n, 24)))
    noverlap = draw(st.integers(0, nperseg - 1))
    nfft = draw(st.one_of(st.none(), st.integers(nperseg, nperseg + 5)))
    return n, nperseg, noverlap, nfft


DTYPES = st.sampled_from([np.float32, np.float64])


@settings(max_examples=40, deadline=None)
@given(
    segmenting(),
    st.sampled_from(WINDOWS + ["array"]),
    st.sampled_from([False, "constant", "linear"]),
    st.sampled_from(["density", "spectrum"]),
    st.booleans(),
    st.sampled_from(["mean", "median"]),
    st.booleans(),
    DTYPES,
    st.integers(0, 2**16),
)
def test_welch_and_csd_match_scipy(
    seg, window, detrend, scaling, onesided, average, complex_, dtype, seed
):
    n, nperseg, noverlap, nfft = seg
    x = _signal(n, seed, complex_)
    y = _signal(n, seed + 1)
    if window == "array":
        window = np.random.default_rng(seed).uniform(0.1, 1.0, nperseg)
    kw = dict(
        window=window,
        nperseg=nperseg,
        noverlap=noverlap,
        nfft=nfft,
        detrend=detrend,
        return_onesided=onesided,
        scaling=scaling,
        average=average,
    )
    with _quiet(), _x64(dtype):
        f, pxx = signal.welch(_cast(x, dtype), **kw)
        want_f, want_pxx = sg.welch(x, **kw)
        _close(f, want_f, dtype, "welch f")
        _close(pxx, want_pxx, dtype, "welch Pxx")
        assert pxx.dtype == np.dtype(dtype)
        f, pxy = signal.csd(_cast(x, dtype), _cast(y, dtype), **kw)
        want_f, want_pxy = sg.csd(x, y, **kw)
        _close(f, want_f, dtype, "csd f")
        _close(pxy, want_pxy, dtype, "csd Pxy")
        assert fnp.iscomplexobj(pxy)


@settings(max_examples=40, deadline=None)
@given(
    segmenting(),
    st.sampled_from(WINDOWS),
    st.sampled_from([False, "constant", "linear"]),
    st.sampled_from(["zeros", "even", "odd", "constant", None]),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    DTYPES,
    st.integers(0, 2**16),
)
def test_stft_matches_scipy(
    seg, window, detrend, boundary, padded, onesided, complex_, dtype, seed
):
    n, nperseg, noverlap, nfft = seg
    x = _signal(n, seed, complex_)
    kw = dict(
        window=window,
        nperseg=nperseg,
        noverlap=noverlap,
        nfft=nfft,
        detrend=detrend,
        return_onesided=onesided,
        boundary=boundary,
        padded=padded,
    )
    with _quiet(), _x64(dtype):
        f, t, z = signal.stft(_cast(x, dtype), **kw)
        want_f, want_t, want_z = sg.stft(x, **kw)
        _close(f, want_f, dtype, "f")
        _close(t, want_t, dtype, "t")
        _close(z, want_z, dtype, "Zxx")
        assert z.dtype == (np.complex64 if dtype == np.float32 else np.complex128)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 8),
    st.integers(1, 16),
    st.data(),
    st.sampled_from(["hann", "hamming", "boxcar", ("kaiser", 2.5), "array"]),
    st.booleans(),
    st.booleans(),
    DTYPES,
    st.integers(0, 2**16),
)
def test_istft_matches_scipy(nseg, nperseg, data, window, onesided, boundary, dtype, seed):
    """istft of arbitrary spectra (not only stft outputs), every noverlap (0 included) and
    nfft, odd segment lengths with the default nfft."""
    noverlap = data.draw(st.one_of(st.none(), st.integers(0, nperseg - 1)))
    nfft = data.draw(st.one_of(st.none(), st.integers(nperseg, nperseg + 3)))
    size = nfft if nfft is not None else nperseg
    nfreq = size // 2 + 1 if onesided else size
    z = _signal((nfreq, nseg), seed, complex_=True)
    if window == "array":
        window = np.random.default_rng(seed).uniform(0.1, 1.0, nperseg)
    kw = dict(
        window=window,
        nperseg=nperseg,
        noverlap=noverlap,
        nfft=nfft,
        input_onesided=onesided,
        boundary=boundary,
    )
    with _quiet(), _x64(dtype):
        t, x = signal.istft(_cast(z, dtype), **kw)
        want_t, want_x = sg.istft(z, **kw)
        _close(t, want_t, dtype, "t")
        _close(x, want_x, dtype, "x")
        assert fnp.iscomplexobj(x) == (not onesided)


@settings(max_examples=25, deadline=None)
@given(
    st.integers(8, 60),
    st.data(),
    st.sampled_from(["hann", "hamming", "boxcar", ("tukey", 0.5)]),
    st.sampled_from(["zeros", "even", "odd", "constant"]),
    st.booleans(),
    DTYPES,
    st.integers(0, 2**16),
)
def test_istft_inverts_stft(n, data, window, boundary, complex_, dtype, seed):
    """The round trip returns the signal (then the padding) for windows whose overlap-added
    squares stay positive (the NOLA condition)."""
    nperseg = data.draw(st.integers(2, min(n, 16)))
    noverlap = data.draw(st.integers(1 if window != "boxcar" else 0, nperseg - 1))
    x = _signal(n, seed, complex_)
    kw = dict(window=window, nperseg=nperseg, noverlap=noverlap)
    with _quiet(), _x64(dtype):
        _, _, z = signal.stft(_cast(x, dtype), boundary=boundary, **kw)
        _, back = signal.istft(z, input_onesided=not complex_, **kw)
    assert back.shape[-1] >= n
    _close(np.asarray(back)[:n], x, dtype, "round trip")
    if boundary == "zeros":  # then the end padding's zeros (other extensions: their values)
        tail = np.asarray(back)[n:]
        np.testing.assert_allclose(tail, 0, atol=1e-4 if dtype == np.float32 else 1e-12)


def test_default_nperseg_is_the_whole_signal_for_welch_and_256_for_stft(x64):
    """JAX's defaults: welch/csd with a named window and nperseg=None take the whole signal
    (x's length; SciPy would take 256), stft takes 256 points."""
    for n in (100, 600):
        x, y = _signal(n, 0), _signal(n + 20, 1)
        _close(signal.welch(x)[1], sg.welch(x, nperseg=n)[1], np.float64)
        _close(signal.csd(x, y)[1], sg.csd(x, y, nperseg=n)[1], np.float64)
    x = _signal(600, 2)
    _close(signal.stft(x)[2], sg.stft(x, nperseg=256)[2], np.float64)
    window = np.hanning(10)
    _close(signal.welch(x, window=window)[1], sg.welch(x, window=window)[1], np.float64)


def test_named_windows_are_scipys_periodic_windows(x64):
    for name in WINDOWS:
        for n in (1, 2, 7, 8):
            got = signal._get_window(name, n)
            np.testing.assert_allclose(got, sg.get_window(name, n), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize(
    "shape, axis", [((3, 40), -1), ((40, 3), 0), ((2, 30, 3), 1), ((2, 3, 30), -1)]
)
def test_other_axes_and_batches_match_scipy(x64, shape, axis):
    x, y = _signal(shape, 3), _signal(shape, 4)
    kw = dict(nperseg=8, axis=axis)
    _close(signal.welch(x, **kw)[1], sg.welch(x, **kw)[1], np.float64)
    _close(signal.csd(x, y, **kw)[1], sg.csd(x, y, **kw)[1], np.float64)
    _close(signal.stft(x, **kw)[2], sg.stft(x, **kw)[2], np.float64)
    # the other axes broadcast: y of length 1 along the first of them
    other = next(d for d in range(len(shape)) if d != axis % len(shape))
    y1 = np.take(y, [0], axis=other)
    _close(signal.csd(x, y1, **kw)[1], sg.csd(x, y1, **kw)[1], np.float64)


@pytest.mark.parametrize("time_axis, freq_axis", [(-1, -2), (1, 2), (0, -1), (2, 0)])
def test_istft_axes_match_scipy(x64, time_axis, freq_axis):
    z = _signal((5, 6, 7), 6, complex_=True)
    kw = dict(noverlap=3, time_axis=time_axis, freq_axis=freq_axis)
    with _quiet():
        want_t, want_x = sg.istft(z, **kw)
    t, x = signal.istft(z, **kw)
    _close(x, want_x, np.float64)
    _close(t, want_t, np.float64)


def test_csd_of_unequal_lengths_pads_the_shorter(x64):
    x, y = _signal(50, 7), _signal(70, 8)
    for a, b in ((x, y), (y, x)):
        _close(signal.csd(a, b, nperseg=16)[1], sg.csd(a, b, nperseg=16)[1], np.float64)


def test_callable_detrend_follows_scipy(x64):
    """A callable gets the segments with their samples along ``axis`` (SciPy's convention;
    JAX hands the default axis=-1 the segments transposed)."""

    def demean(d):
        return d - fnp.mean(d, axis=-1, keepdims=True)

    def np_demean(d):
        return d - np.mean(d, axis=-1, keepdims=True)

    x = _signal(64, 9)
    _close(
        signal.welch(x, nperseg=16, detrend=demean)[1],
        sg.welch(x, nperseg=16, detrend=np_demean)[1],
        np.float64,
    )
    x2 = _signal((64, 2), 10)
    axis0 = signal.welch(x2, nperseg=16, axis=0, detrend=lambda d: signal.detrend(d, axis=0))[1]
    _close(axis0, sg.welch(x2, nperseg=16, axis=0, detrend="linear")[1], np.float64)


def test_jit_matches_eager():
    x = _signal((2, 64), 11).astype(np.float32)
    welch = fg.jit(lambda x, fs: signal.welch(x, fs=fs, nperseg=16, average="median"))
    for got, want in zip(welch(x, 3.0), signal.welch(x, fs=3.0, nperseg=16, average="median")):
        _close(got, np.asarray(want), np.float32)
    csd = fg.jit(lambda x: signal.csd(x, x[::-1], nperseg=12, noverlap=9, detrend="linear"))
    _close(
        csd(x)[1],
        np.asarray(signal.csd(x, x[::-1], nperseg=12, noverlap=9, detrend="linear")[1]),
        np.float32,
    )
    round_trip = fg.jit(
        lambda x: signal.istft(
            signal.stft(x, nperseg=16, window=("tukey", 0.3))[2], window=("tukey", 0.3)
        )[1]
    )
    _close(round_trip(x)[:, :64], x, np.float32)


def test_welch_gradient_by_finite_differences(x64):
    x = fnp.asarray(_signal(40, 12))
    check_grads(
        lambda x: signal.welch(x, nperseg=16, detrend="linear")[1],
        (x,),
        order=1,
        modes=("fwd", "rev"),
    )
    check_grads(
        lambda x: signal.welch(x, nperseg=10, average="median")[1], (x,), order=1, modes=("rev",)
    )
    check_grads(
        lambda x: signal.csd(x, x**2, nperseg=16, return_onesided=False)[1],
        (x,),
        order=1,
        modes=("rev",),
    )
    check_grads(
        lambda x: signal.istft(signal.stft(x, nperseg=8)[2])[1], (x,), order=1, modes=("rev",)
    )


def test_gradient_with_respect_to_an_array_window(x64):
    x = _signal(40, 13)
    window = fnp.asarray(np.hanning(12) + 0.1)
    check_grads(lambda w: signal.welch(x, window=w)[1], (window,), order=1, modes=("rev",))


def test_vmap_matches_a_loop():
    x = _signal((3, 50), 14).astype(np.float32)

    def fns(r):
        return (
            signal.welch(r, nperseg=16)[1],
            signal.csd(r, r[::-1], nperseg=16)[1],
            signal.stft(r, nperseg=16)[2],
            signal.istft(signal.stft(r, nperseg=16)[2])[1],
        )

    batched = fg.vmap(fns)(x)
    for i in range(3):
        for got, want in zip(batched, fns(x[i])):
            _close(got[i], np.asarray(want), np.float32)


def test_warnings():
    with pytest.warns(UserWarning, match="switching to return_onesided=False"):
        f, pxx = signal.welch(_signal(32, 15, complex_=True), nperseg=8)
    assert f.shape == pxx.shape == (8,)
    with pytest.warns(UserWarning, match="nperseg=16 is greater than input_length=10"):
        _, _, z = signal.stft(_signal(10, 16), nperseg=16)
    assert z.shape[0] == 6


def test_empty_input():
    """JAX's results for empty input: zeros shaped like it."""
    for out in signal.welch(np.zeros((3, 0))):
        assert out.shape == (3, 0)
    with pytest.warns(UserWarning, match="greater than input_length=0"):
        for out in signal.stft(np.zeros((0,))):
            assert out.shape == (0,)
    f, pxy = signal.csd(np.zeros((3, 0)), np.zeros((1, 5)))
    assert f.shape == pxy.shape == (3, 0)  # SciPy's shape (JAX gives (1, 3) and (1,))


def test_istft_edge_cases_follow_scipy(x64):
    """Where JAX fails or ignores an argument, fungrad does as SciPy: odd nperseg with the
    default nfft works, and an explicit noverlap=0 is used."""
    x = _signal(40, 17)
    _, _, z = signal.stft(x, nperseg=5)
    _close(signal.istft(z, nperseg=5)[1][:40], x, np.float64)
    _, _, z = signal.stft(x, nperseg=8, noverlap=0, window="boxcar")
    _close(signal.istft(z, nperseg=8, noverlap=0, window="boxcar")[1][:40], x, np.float64)


ERRORS = [
    (lambda: signal.welch(np.ones(16), nperseg=0), "nperseg must be a positive integer"),
    (lambda: signal.welch(np.ones(16), nperseg=8, nfft=4), "nfft must be greater than or equal"),
    (
        lambda: signal.welch(np.ones(16), nperseg=8, noverlap=8),
        "noverlap must be less than nperseg",
    ),
    (lambda: signal.welch(np.ones(16), window=np.ones(20)), "window is longer than input signal"),
    (lambda: signal.welch(np.ones(16), window=np.ones((2, 4))), "window must be 1-D"),
    (lambda: signal.welch(np.ones(16), window=np.ones(4), nperseg=5), "different from length"),
    (lambda: signal.welch(np.ones(16), nperseg=8, detrend=True), "Unsupported detrend type"),
    (lambda: signal.welch(np.ones(16), nperseg=8, detrend="l"), "linear"),
    (lambda: signal.welch(np.ones(16), nperseg=8, scaling="psd"), "Unknown scaling"),
    (lambda: signal.welch(np.ones(16), nperseg=8, average="max"), 'average must be "median"'),
    (lambda: signal.stft(np.ones(16), nperseg=8, boundary="wrap"), "Unknown boundary option"),
    (lambda: signal.csd(np.ones((3, 16)), np.ones((2, 16))), "cannot be broadcast together"),
    (lambda: signal.csd(np.ones((3, 16)), np.ones(16)), "same rank"),
    (lambda: signal.istft(np.ones(5)), "at least 2d"),
    (lambda: signal.istft(np.ones((5, 9)), time_axis=0, freq_axis=-2), "differing time and"),
    (lambda: signal.istft(np.ones((5, 9)), nperseg=0), "nperseg must be a positive integer"),
    (lambda: signal.istft(np.ones((5, 9)), nperseg=8, nfft=4), r"FFT length \(4\) must be"),
    (lambda: signal.istft(np.ones((5, 9)), nperseg=8, noverlap=8), "noverlap must be less"),
    (lambda: signal.istft(np.ones((5, 9)), window=np.ones(5)), "window must have length of 8"),
    (lambda: signal.istft(np.ones((5, 9)), window=np.ones((2, 4))), "window must be 1-D"),
]


@pytest.mark.parametrize("call, message", ERRORS)
def test_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_static_arguments_must_be_concrete():
    with pytest.raises(fg.errors.ConcretizationTypeError):
        fg.jit(lambda n: signal.welch(fnp.ones(16), nperseg=n))(8)
