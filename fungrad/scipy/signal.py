"""``fungrad.scipy.signal``: N-dimensional convolution and correlation, detrending and
spectral analysis with jax.scipy.signal's names and semantics.

``mode`` follows SciPy: ``"full"`` (every overlap, shape ``s1 + s2 - 1``), ``"same"`` (the
centre of the full result with ``in1``'s shape) and ``"valid"`` (only complete overlaps, shape
``|s1 - s2| + 1``; one input must be at least as large as the other in every dimension).
Inputs promote to a floating dtype, as in JAX. ``method="direct"`` (and ``"auto"``) computes
the sums with ``lax.conv_general_dilated``; ``method="fft"`` is :func:`fftconvolve`: products
of ``fungrad.numpy.fft`` spectra. :func:`detrend` removes constant or piecewise-linear trends.

:func:`stft`, :func:`istft`, :func:`csd` and :func:`welch` are SciPy's windowed-FFT
estimators (overlapping segments, each detrended, windowed and transformed), with JAX's
defaults and errors. The segment geometry (lengths, overlaps, padding) is static; the data,
``fs`` and an array ``window`` may be traced, so the results differentiate and batch.
"""

from __future__ import annotations

import operator
import warnings

import numpy as np

import fungrad.numpy as fnp
from fungrad import dtypes, lax
from fungrad.numpy import util

__all__ = [
    "convolve",
    "convolve2d",
    "correlate",
    "correlate2d",
    "csd",
    "detrend",
    "fftconvolve",
    "istft",
    "stft",
    "welch",
]

_MODES = ("full", "same", "valid")


def _check(fun_name, in1, in2, mode):
    util.check_arraylike(fun_name, in1, in2)
    if mode not in _MODES:
        raise ValueError(f"{fun_name}: mode must be one of {_MODES}, got {mode!r}")
    in1, in2 = util.promote_dtypes_inexact(in1, in2, fun_name=fun_name)
    if in1.ndim != in2.ndim:
        raise ValueError(
            f"{fun_name}: in1 and in2 must have the same number of dimensions, "
            f"got shapes {in1.shape} and {in2.shape}"
        )
    if in1.size == 0 or in2.size == 0:
        raise ValueError(
            f"{fun_name}: zero-size inputs are not supported, got shapes "
            f"{in1.shape} and {in2.shape}"
        )
    return in1, in2


def _larger_first(fun_name, in1, in2):
    """``(big, small, swapped)`` with ``big`` at least as large in every dimension."""
    if all(a >= b for a, b in zip(in1.shape, in2.shape)):
        return in1, in2, False
    if all(a <= b for a, b in zip(in1.shape, in2.shape)):
        return in2, in1, True
    raise ValueError(
        f"{fun_name}: one input must be at least as large as the other in every "
        f"dimension, got shapes {in1.shape} and {in2.shape}"
    )


def _conv_nd(fun_name, in1, in2, mode, precision):
    """Convolution of promoted, same-rank, non-empty ``in1`` and ``in2`` (it commutes, so
    the larger input is the conv's lhs and the flipped smaller one its kernel)."""
    out_like = in1.shape
    if in1.ndim == 0:  # 0-d inputs: the product (SciPy's and JAX's result)
        return lax.mul(in1, in2)
    big, small, _ = _larger_first(fun_name, in1, in2)
    kernel = fnp.flip(small)
    if mode == "valid":
        padding = [(0, 0)] * big.ndim
    else:
        padding = [(k - 1, k - 1) for k in small.shape]
    out = lax.conv_general_dilated(
        big[None, None], kernel[None, None], (1,) * big.ndim, padding, precision=precision
    )[0, 0]
    if mode == "same":  # the centre of the full result, in1's shape
        starts = [(f - s) // 2 for f, s in zip(out.shape, out_like)]
        out = lax.slice(out, starts, [st + s for st, s in zip(starts, out_like)])
    return out


def _check_method(fun_name, method):
    if method not in ("auto", "direct", "fft"):
        raise ValueError(f"{fun_name}: method must be 'auto', 'direct' or 'fft', got {method!r}")


def convolve(in1, in2, mode: str = "full", method: str = "auto", precision=None):
    """N-dimensional convolution ``out[n] = sum_k in1[k] in2[n - k]`` (``scipy.signal
    .convolve``); ``in1`` and ``in2`` need the same number of dimensions.

    Example:
        >>> convolve(fnp.array([1., 2., 3.]), fnp.array([0., 1., 0.5]))  # [0, 1, 2.5, 4, 1.5]
    """
    _check_method("convolve", method)
    if method == "fft":
        return fftconvolve(in1, in2, mode)
    in1, in2 = _check("convolve", in1, in2, mode)
    return _conv_nd("convolve", in1, in2, mode, precision)


def correlate(in1, in2, mode: str = "full", method: str = "auto", precision=None):
    """N-dimensional cross-correlation ``out[n] = sum_k in1[k + n] in2[k]`` with the lag
    offsets of ``scipy.signal.correlate``: the convolution of ``in1`` with ``in2`` reversed
    along every axis."""
    _check_method("correlate", method)
    if method == "fft":
        util.check_arraylike("correlate", in1, in2)
        in2 = fnp.asarray(in2)
        return fftconvolve(in1, fnp.flip(fnp.conj(in2)), mode)
    in1, in2 = _check("correlate", in1, in2, mode)
    return _conv_nd("correlate", in1, fnp.flip(in2), mode, precision)


def fftconvolve(in1, in2, mode: str = "full", axes=None):
    """N-dimensional convolution by FFTs (``scipy.signal.fftconvolve``): both inputs are
    transformed over ``axes`` (all by default) at the full output length ``s1 + s2 - 1``,
    multiplied and transformed back (real FFTs for real input), then cut to ``mode``'s shape
    (``"same"`` and ``"valid"`` keep the centre). Along the other axes the inputs broadcast
    (equal lengths, or 1). Zero-size input gives an empty array, as SciPy."""
    util.check_arraylike("fftconvolve", in1, in2)
    if mode not in _MODES:
        raise ValueError(f"fftconvolve: mode must be one of {_MODES}, got {mode!r}")
    in1, in2 = util.promote_dtypes_inexact(in1, in2, fun_name="fftconvolve")
    if in1.ndim != in2.ndim:
        raise ValueError(
            "fftconvolve: in1 and in2 must have the same number of dimensions, got shapes "
            f"{in1.shape} and {in2.shape}"
        )
    if in1.size == 0 or in2.size == 0:
        return fnp.zeros((0,), in1.dtype)
    nd = in1.ndim
    if axes is None:
        axes = tuple(range(nd))
    else:
        axes = (axes,) if isinstance(axes, int) else tuple(axes)
        axes = tuple(util.canonicalize_axis(a, nd, "fftconvolve") for a in axes)
        if len(set(axes)) != len(axes):
            raise ValueError(f"fftconvolve: repeated axis in axes {axes}")
    axes = tuple(sorted(axes))
    for d in range(nd):
        a, b = in1.shape[d], in2.shape[d]
        if d not in axes and a != b and 1 not in (a, b):
            raise ValueError(
                f"fftconvolve: along axis {d}, which is not convolved (axes={axes}), the "
                f"inputs must have equal lengths or length 1, got shapes {in1.shape} and "
                f"{in2.shape}"
            )
    s1 = [in1.shape[d] for d in axes]
    s2 = [in2.shape[d] for d in axes]
    if mode == "valid" and not all(a >= b for a, b in zip(s1, s2)):
        if not all(a <= b for a, b in zip(s1, s2)):
            raise ValueError(
                "fftconvolve: for mode='valid' one input must be at least as large as the "
                f"other along every convolved axis, got shapes {in1.shape} and {in2.shape}"
            )
        in1, in2, s1, s2 = in2, in1, s2, s1
    if all(a == 1 or b == 1 for a, b in zip(s1, s2)):  # no overlap to sum: the product
        conv = fnp.multiply(in1, in2)
    else:
        from fungrad.numpy import fft as nfft

        full = [a + b - 1 for a, b in zip(s1, s2)]
        if fnp.iscomplexobj(in1):
            spectrum = nfft.fftn(in1, full, axes) * nfft.fftn(in2, full, axes)
            conv = nfft.ifftn(spectrum, full, axes)
        else:
            spectrum = nfft.rfftn(in1, full, axes) * nfft.rfftn(in2, full, axes)
            conv = nfft.irfftn(spectrum, full, axes)
    if mode == "full":
        return conv
    keep = s1 if mode == "same" else [a - b + 1 for a, b in zip(s1, s2)]
    starts, stops = [0] * nd, list(conv.shape)
    for d, k in zip(axes, keep):
        starts[d] = (conv.shape[d] - k) // 2
        stops[d] = starts[d] + k
    return lax.slice(conv, starts, stops)


def _check_2d(fun_name, in1, in2, boundary, fillvalue):
    if boundary != "fill" or fillvalue != 0:
        raise ValueError(
            f"{fun_name}: only boundary='fill' with fillvalue=0 is supported (as "
            f"in JAX), got boundary={boundary!r}, fillvalue={fillvalue!r}; pad "
            "the input with fnp.pad for other boundaries"
        )
    if np.ndim(in1) != 2 or np.ndim(in2) != 2:
        raise ValueError(
            f"{fun_name}: inputs must be 2-dimensional, got shapes "
            f"{np.shape(in1)} and {np.shape(in2)}"
        )


def convolve2d(in1, in2, mode: str = "full", boundary: str = "fill", fillvalue=0, precision=None):
    """Two-dimensional :func:`convolve` (``scipy.signal.convolve2d``, zero fill only)."""
    _check_2d("convolve2d", in1, in2, boundary, fillvalue)
    in1, in2 = _check("convolve2d", in1, in2, mode)
    return _conv_nd("convolve2d", in1, in2, mode, precision)


def correlate2d(in1, in2, mode: str = "full", boundary: str = "fill", fillvalue=0, precision=None):
    """Two-dimensional cross-correlation (``scipy.signal.correlate2d``, zero fill only).

    It differs from :func:`correlate` as SciPy's does: with an ``in1`` smaller than ``in2``
    (``"full"`` and ``"valid"`` modes) it is ``correlate(in2, in1)`` reversed, and in
    ``"same"`` mode an even-sized ``in2`` is centred one sample the other way.
    """
    _check_2d("correlate2d", in1, in2, boundary, fillvalue)
    in1, in2 = _check("correlate2d", in1, in2, mode)
    swapped = all(a <= b for a, b in zip(in1.shape, in2.shape)) and in1.shape != in2.shape
    if mode == "same":  # SciPy centres an even-sized window from the other side here
        return fnp.flip(_conv_nd("correlate2d", fnp.flip(in1), in2, mode, precision))
    if swapped:
        return fnp.flip(_conv_nd("correlate2d", in2, fnp.flip(in1), mode, precision))
    return _conv_nd("correlate2d", in1, fnp.flip(in2), mode, precision)


def _linear_residual(y):
    """``y`` minus its least-squares line along axis 0 (closed form: with ``t`` centred on
    its mean, the slope is ``sum(t y) / sum(t**2)``; one point has slope 0)."""
    m = y.shape[0]
    t = np.arange(m, dtype=np.float64) - (m - 1) / 2.0
    denom = float(np.sum(t * t))
    t = fnp.asarray(t, dtype=y.dtype).reshape((m,) + (1,) * (y.ndim - 1))
    mean = fnp.mean(y, axis=0, keepdims=True)
    if denom == 0.0:
        return y - mean
    slope = fnp.sum(t * y, axis=0, keepdims=True) / denom
    return y - mean - slope * t


def detrend(data, axis: int = -1, type: str = "linear", bp=0, overwrite_data=None):  # noqa: A002
    """``data`` minus its trend along ``axis`` (``scipy.signal.detrend``).

    Args:
        data: the input array (promoted to a floating dtype).
        axis: the axis along which to detrend.
        type: ``"linear"`` (subtract the least-squares line, piecewise between the
            breakpoints ``bp``) or ``"constant"`` (subtract the mean).
        bp: breakpoints (concrete ints in ``[0, n]``): each segment between consecutive
            breakpoints gets its own line.
        overwrite_data: must be None (arrays are immutable).

    Example:
        >>> detrend(fnp.array([1., 4., 8., 8., 9.]))   # [-1, 0, 2, 0, -1]
    """
    if overwrite_data is not None:
        raise ValueError(
            "detrend: overwrite_data is not supported (fungrad arrays are immutable); leave it None"
        )
    if type not in ("linear", "constant"):
        raise ValueError(f"detrend: type must be 'linear' or 'constant', got {type!r}")
    util.check_arraylike("detrend", data)
    [x] = util.promote_dtypes_inexact(data, fun_name="detrend")
    if x.ndim == 0:
        raise ValueError("detrend: data must have at least one dimension, got a 0-d array")
    axis = util.canonicalize_axis(axis, x.ndim, "detrend")
    if type == "constant":
        return x - fnp.mean(x, axis=axis, keepdims=True)
    n = x.shape[axis]
    bps = np.asarray(util.concrete_or_error(bp, "detrend's breakpoints bp"))
    if bps.size and (bps.min() < 0 or bps.max() > n):
        raise ValueError(
            f"detrend: breakpoints must lie in [0, {n}] (the length of axis "
            f"{axis}), got {bps.tolist()}"
        )
    edges = np.unique(np.concatenate([[0], bps.reshape(-1).astype(np.int64), [n]]))
    y = fnp.moveaxis(x, axis, 0)
    pieces = [_linear_residual(y[int(lo) : int(hi)]) for lo, hi in zip(edges[:-1], edges[1:])]
    out = fnp.concatenate(pieces, axis=0) if pieces else y
    return fnp.moveaxis(out, 0, axis)


# -- spectral analysis: stft, istft, csd, welch ---------------------------------------------

# Windows built here (SciPy's periodic, "DFT-even" form: the symmetric window one point
# longer, its last point dropped); other names and tuples go to scipy.signal.get_window.
_WINDOWS = {
    "boxcar": np.ones,
    "hann": np.hanning,
    "hamming": np.hamming,
    "blackman": np.blackman,
    "bartlett": np.bartlett,
}


def _get_window(window, n: int) -> np.ndarray:
    """``scipy.signal.get_window(window, n)`` as float64 numpy: a name or a ``(name,
    *params)`` tuple. The windows above and ``("kaiser", beta)`` need no SciPy; any other
    window is SciPy's (an ImportError without it, as in JAX)."""
    name, *params = (window,) if isinstance(window, str) else window
    if name in _WINDOWS and not params:
        return np.ones(n) if n <= 1 else _WINDOWS[name](n + 1)[:-1]
    if name == "kaiser" and len(params) == 1:
        return np.ones(n) if n <= 1 else np.kaiser(n + 1, float(params[0]))[:-1]
    try:
        from scipy.signal import get_window
    except ImportError as err:
        raise ImportError(
            f"scipy must be available to use window={window!r} (fungrad builds "
            f"{sorted(_WINDOWS)} and ('kaiser', beta) itself; pass other windows as arrays)"
        ) from err
    return np.asarray(get_window(window, n), dtype=np.float64)


def _static_int(value, what: str) -> int:
    return operator.index(util.concrete_or_error(value, what))


def _window_and_nperseg(window, nperseg, input_length: int, dtype):
    """The window (an array of ``dtype``) and the segment length. A named window has
    ``nperseg`` points: by default (None) the whole input, as in JAX, and never more than
    the input (a warning then); an array window fixes ``nperseg`` to its length."""
    if isinstance(window, (str, tuple)):
        n = input_length if nperseg is None else nperseg
        if n > input_length:
            warnings.warn(
                f"nperseg={n} is greater than input_length={input_length}, "
                f"using nperseg={input_length}",
                stacklevel=4,
            )
            n = input_length
        return fnp.asarray(_get_window(window, n), dtype=dtypes.real_dtype(dtype)), n
    win = fnp.asarray(window, dtype=dtype)
    n = win.size if nperseg is None else nperseg
    if win.ndim != 1:
        raise ValueError("window must be 1-D")
    if input_length < win.size:
        raise ValueError("window is longer than input signal")
    if n != win.size:
        raise ValueError("value specified for nperseg is different from length of window")
    return win, n


def _odd_ext(x, n: int):
    """``x`` extended by ``n`` points at both ends of its last axis by point reflection
    through the end values (``2 x[0] - x[n:0:-1]`` before, likewise after)."""
    first, last = x[..., :1], x[..., -1:]
    before = 2 * first - fnp.flip(x[..., 1 : n + 1], axis=-1)
    after = 2 * last - fnp.flip(x[..., -n - 1 : -1], axis=-1)
    return fnp.concatenate([before, x, after], axis=-1)


def _extend(x, boundary, n: int):
    """``x`` extended by ``n`` points at both ends of its last axis (stft's ``boundary``)."""
    if boundary is None or n < 1:
        return x
    if boundary == "odd":
        return _odd_ext(x, n)
    widths = [(0, 0)] * (x.ndim - 1) + [(n, n)]
    return fnp.pad(
        x, widths, {"even": "reflect", "constant": "edge", "zeros": "constant"}[boundary]
    )


def _segment_indices(nseg: int, nperseg: int, nstep: int) -> np.ndarray:
    """``(nseg, nperseg)`` indices of the samples of each segment (segments ``nstep`` apart)."""
    return nstep * np.arange(nseg)[:, None] + np.arange(nperseg)


def _detrend_function(detrend_type, axis):
    """The per-segment detrending: a ``detrend`` type, a callable or a false value (none).

    A callable gets the segments with their samples along ``axis``, as in SciPy (JAX moves
    the wrong axis there, so its callable sees the segments transposed)."""
    if isinstance(detrend_type, str):
        return lambda d: detrend(d, axis=-1, type=detrend_type)
    if callable(detrend_type):
        if axis == -1:
            return detrend_type
        return lambda d: fnp.moveaxis(detrend_type(fnp.moveaxis(d, -1, axis)), axis, -1)
    if not detrend_type:
        return lambda d: d
    raise ValueError(f"Unsupported detrend type: {detrend_type}")


def _spectral(
    fun_name,
    x,
    y,
    fs,
    window,
    nperseg,
    noverlap,
    nfft,
    detrend_type,
    return_onesided,
    scaling,
    axis,
    stft_mode,
    boundary=None,
    padded=False,
):
    """Windowed FFTs of the segments of ``x`` (SciPy's ``_spectral_helper``): ``(freqs,
    times, result)`` with the frequencies along ``axis`` and the segments last. ``result``
    is the STFT when ``stft_mode``, else the one-segment cross spectra ``conj(X) Y`` scaled
    to a density or spectrum (real ``|X|**2`` when ``y`` is None)."""
    if boundary not in ("even", "odd", "constant", "zeros", None):
        raise ValueError(
            f"Unknown boundary option '{boundary}', must be one of: "
            "['even', 'odd', 'constant', 'zeros', None]"
        )
    user_axis = _static_int(axis, f"{fun_name}'s axis")
    if y is None:
        util.check_arraylike(fun_name, x)
        (x,) = util.promote_dtypes_inexact(x, fun_name=fun_name)
        axis = util.canonicalize_axis(user_axis, x.ndim, fun_name)
        outer = x.shape[:axis] + x.shape[axis + 1 :]
    else:
        util.check_arraylike(fun_name, x, y)
        x, y = util.promote_dtypes_inexact(x, y, fun_name=fun_name)
        if x.ndim != y.ndim:
            raise ValueError(f"two-arguments must have the same rank ({x.ndim} vs {y.ndim}).")
        axis = util.canonicalize_axis(user_axis, x.ndim, fun_name)
        try:
            outer = np.broadcast_shapes(
                x.shape[:axis] + x.shape[axis + 1 :], y.shape[:axis] + y.shape[axis + 1 :]
            )
        except ValueError as err:
            raise ValueError("x and y cannot be broadcast together.") from err
    cdtype = dtypes.complex_dtype(x.dtype)
    rdtype = dtypes.real_dtype(cdtype)

    if nperseg is not None:
        nperseg = _static_int(nperseg, f"{fun_name}'s nperseg")
        if nperseg < 1:
            raise ValueError("nperseg must be a positive integer")
    win, nperseg = _window_and_nperseg(window, nperseg, x.shape[axis], x.dtype)
    noverlap = nperseg // 2 if noverlap is None else _static_int(noverlap, f"{fun_name}'s noverlap")
    nfft = nperseg if nfft is None else _static_int(nfft, f"{fun_name}'s nfft")

    if y is None and x.size == 0:  # as JAX: zeros shaped like the input
        return fnp.zeros(x.shape, rdtype), fnp.zeros(x.shape, rdtype), fnp.zeros(x.shape, cdtype)
    if y is not None and (x.size == 0 or y.size == 0):
        shape = outer[:axis] + (min(x.shape[axis], y.shape[axis]),) + outer[axis:]
        return fnp.zeros(shape, rdtype), fnp.zeros(shape, rdtype), fnp.zeros(shape, cdtype)

    x = fnp.moveaxis(x, axis, -1)
    if y is not None:  # the time axis last, the shorter signal zero-padded to the longer
        y = fnp.moveaxis(y, axis, -1)
        length = max(x.shape[-1], y.shape[-1])
        x, y = (fnp.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, length - a.shape[-1])]) for a in (x, y))
    if nfft < nperseg:
        raise ValueError("nfft must be greater than or equal to nperseg.")
    if noverlap >= nperseg:
        raise ValueError("noverlap must be less than nperseg.")
    nstep = nperseg - noverlap

    def prepare(a):  # boundary extension, then zeros up to a whole number of segments
        a = _extend(a, boundary, nperseg // 2)
        if padded:
            nadd = (-(a.shape[-1] - nperseg) % nstep) % nperseg
            a = fnp.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, nadd)])
        return a

    x = prepare(x)
    y = None if y is None else prepare(y)
    detrend_func = _detrend_function(detrend_type, user_axis)
    if scaling == "density":
        scale = 1.0 / (fs * fnp.sum(win * win))
    elif scaling == "spectrum":
        scale = 1.0 / fnp.sum(win) ** 2
    else:
        raise ValueError(f"Unknown scaling: {scaling}")
    if stft_mode:
        scale = fnp.sqrt(scale)

    twosided = not return_onesided
    if return_onesided and fnp.iscomplexobj(x):
        warnings.warn("Input data is complex, switching to return_onesided=False", stacklevel=3)
        twosided = True
    freqs = (fnp.fft.fftfreq if twosided else fnp.fft.rfftfreq)(nfft, 1 / fs, dtype=rdtype)

    nseg = (x.shape[-1] - nperseg) // nstep + 1
    index = _segment_indices(nseg, nperseg, nstep)

    def spectra(a):  # (..., nseg, nfreq): FFTs of the detrended, windowed segments
        segments = detrend_func(a[..., index]) * win
        if twosided:
            return fnp.fft.fft(segments, n=nfft)
        return fnp.fft.rfft(fnp.real(segments), n=nfft)

    X = spectra(x)
    if stft_mode:
        result = X * scale
    else:
        if y is None:  # |X|**2, real
            result = (fnp.real(X) ** 2 + fnp.imag(X) ** 2) * scale
        else:
            result = fnp.conj(X) * spectra(y) * scale
        if not twosided:  # one-sided: the negative frequencies' power folds onto the positive
            fold = np.full(result.shape[-1], 2.0)
            fold[0] = 1.0
            if nfft % 2 == 0:
                fold[-1] = 1.0
            result = result * fnp.asarray(fold, rdtype)
    if y is None and not stft_mode:  # a power spectrum (complex only with a complex window)
        result = fnp.real(result)
    result = result.astype(rdtype if y is None and not stft_mode else cdtype)
    start = 0.0 if boundary is not None else nperseg / 2
    times = fnp.asarray(start + nstep * np.arange(nseg), rdtype) / fs
    return freqs, times, fnp.moveaxis(result, -1, axis)


def stft(
    x,
    fs=1.0,
    window="hann",
    nperseg: int = 256,
    noverlap: int | None = None,
    nfft: int | None = None,
    detrend=False,
    return_onesided: bool = True,
    boundary: str | None = "zeros",
    padded: bool = True,
    axis: int = -1,
):
    """The short-time Fourier transform of ``x`` along ``axis`` (``scipy.signal.stft``).

    The signal is extended by ``nperseg // 2`` points at each end (``boundary``: ``"zeros"``,
    ``"even"``, ``"odd"``, ``"constant"`` or None), zero-padded to a whole number of
    segments (``padded``), cut into segments of ``nperseg`` points ``nperseg - noverlap``
    apart, each detrended (``detrend``: False, ``"constant"``, ``"linear"`` or a callable),
    multiplied by ``window`` (a SciPy window name, a ``(name, *params)`` tuple or an array)
    and transformed with an ``nfft``-point FFT, scaled by ``1 / sum(window)``.

    Returns:
        ``(f, t, Zxx)``: the frequencies, the segment times and the STFT, complex, with the
        frequencies along ``axis`` and the segments as the last axis. Complex ``x`` gives a
        two-sided spectrum (with a warning if ``return_onesided``).
    """
    return _spectral(
        "stft",
        x,
        None,
        fs,
        window,
        nperseg,
        noverlap,
        nfft,
        detrend,
        return_onesided,
        "spectrum",
        axis,
        True,
        boundary,
        padded,
    )


def _median_bias(n: int) -> float:
    """The median of ``n`` periodograms over their mean for a chi-square(2) power (SciPy's
    ``_median_bias``): ``1 + sum over even k < n of 1/(k+1) - 1/k``."""
    k = np.arange(2.0, n, 2)
    return float(1 + np.sum(1 / (k + 1) - 1 / k))


def csd(
    x,
    y,
    fs=1.0,
    window="hann",
    nperseg: int | None = None,
    noverlap: int | None = None,
    nfft: int | None = None,
    detrend="constant",
    return_onesided: bool = True,
    scaling: str = "density",
    axis: int = -1,
    average: str = "mean",
):
    """The cross power spectral density of ``x`` and ``y`` by Welch's method
    (``scipy.signal.csd``): the cross spectra ``conj(X) Y`` of the overlapping segments
    (see :func:`stft` for ``window``, ``nperseg``, ``noverlap``, ``nfft`` and ``detrend``),
    averaged by ``"mean"`` or ``"median"`` (real and imaginary parts separately, divided by
    the median's bias).

    ``nperseg=None`` takes the whole length of ``x`` for a named window (JAX's default;
    SciPy's is 256), the window's length for an array. ``y`` may be None: the (real) power
    spectral density of ``x``, :func:`welch`. ``y`` is zero-padded to ``x``'s length or
    ``x`` to ``y``'s; the other axes broadcast. ``scaling="density"`` gives V**2/Hz
    (``1 / (fs sum(window**2))``), ``"spectrum"`` V**2 (``1 / sum(window)**2``).

    Returns:
        ``(f, Pxy)``: the frequencies and the cross spectral density (complex when ``y`` is
        given), with the frequencies along ``axis``.
    """
    freqs, _, pxy = _spectral(
        "csd",
        x,
        y,
        fs,
        window,
        nperseg,
        noverlap,
        nfft,
        detrend,
        return_onesided,
        scaling,
        axis,
        False,
    )
    if pxy.size == 0:
        return freqs, pxy
    if pxy.shape[-1] == 1:  # one segment: nothing to average
        return freqs, pxy[..., 0]
    if average == "mean":
        return freqs, fnp.mean(pxy, axis=-1)
    if average == "median":
        bias = _median_bias(pxy.shape[-1])
        if fnp.iscomplexobj(pxy):
            med = lax.complex(
                fnp.median(fnp.real(pxy), axis=-1), fnp.median(fnp.imag(pxy), axis=-1)
            )
        else:
            med = fnp.median(pxy, axis=-1)
        return freqs, med / bias
    raise ValueError(f'average must be "median" or "mean", got {average}')


def welch(
    x,
    fs=1.0,
    window="hann",
    nperseg: int | None = None,
    noverlap: int | None = None,
    nfft: int | None = None,
    detrend="constant",
    return_onesided: bool = True,
    scaling: str = "density",
    axis: int = -1,
    average: str = "mean",
):
    """The power spectral density of ``x`` by Welch's method (``scipy.signal.welch``): the
    average of the periodograms of overlapping, detrended, windowed segments. The arguments
    are :func:`csd`'s (``nperseg=None`` is the whole signal, as in JAX).

    Returns:
        ``(f, Pxx)``: the frequencies and the (real) power spectral density, with the
        frequencies along ``axis``.
    """
    freqs, pxx = csd(
        x,
        None,
        fs,
        window,
        nperseg,
        noverlap,
        nfft,
        detrend,
        return_onesided,
        scaling,
        axis,
        average,
    )
    return freqs, fnp.real(pxx)


def _overlap_add(frames, nstep: int):
    """The sum of ``frames`` (``(..., nseg, nperseg)``) laid ``nstep`` samples apart:
    ``(..., nstep * (nseg - 1) + nperseg)``."""
    *batch, nseg, nperseg = frames.shape
    out = fnp.zeros((*batch, nstep * (nseg - 1) + nperseg), frames.dtype)
    return out.at[..., _segment_indices(nseg, nperseg, nstep)].add(frames)


def istft(
    Zxx,
    fs=1.0,
    window="hann",
    nperseg: int | None = None,
    noverlap: int | None = None,
    nfft: int | None = None,
    input_onesided: bool = True,
    boundary: bool = True,
    time_axis: int = -1,
    freq_axis: int = -2,
):
    """The inverse short-time Fourier transform (``scipy.signal.istft``), inverting
    :func:`stft` by weighted overlap-add: each segment's inverse FFT, times ``window``, is
    summed into place and the sum divided by the overlap-added squared window.

    ``nperseg`` defaults to the FFT length the frequencies imply (``2 (nfreq - 1)`` for a
    one-sided ``Zxx``, ``nfreq`` otherwise), ``noverlap`` to ``nperseg // 2`` (an explicit 0
    is kept, as in SciPy; JAX takes 0 for None), ``nfft`` to ``nperseg`` if that is
    ``2 nfreq - 1`` (odd segments; JAX fails there) and else to the default. ``boundary``
    drops the ``nperseg // 2`` points :func:`stft`'s boundary extension added at each end.

    Returns:
        ``(t, x)``: the sample times (``arange(x.shape[0]) / fs``, as SciPy) and the signal,
        real for a one-sided ``Zxx``, its time axis where ``time_axis`` was.
    """
    util.check_arraylike("istft", Zxx)
    Zxx = fnp.asarray(Zxx)
    if Zxx.ndim < 2:
        raise ValueError("Input stft must be at least 2d!")
    freq_axis = util.canonicalize_axis(_static_int(freq_axis, "istft's freq_axis"), Zxx.ndim)
    time_axis = util.canonicalize_axis(_static_int(time_axis, "istft's time_axis"), Zxx.ndim)
    if freq_axis == time_axis:
        raise ValueError("Must specify differing time and frequency axes!")
    Zxx = Zxx.astype(dtypes.complex_dtype(Zxx.dtype))

    nfreq = Zxx.shape[freq_axis]
    n_default = 2 * (nfreq - 1) if input_onesided else nfreq
    if nperseg is None:
        nperseg = n_default
    else:
        nperseg = _static_int(nperseg, "istft's nperseg")
        if nperseg < 1:
            raise ValueError("nperseg must be a positive integer")
    if nfft is None:
        nfft = nperseg if input_onesided and nperseg == n_default + 1 else n_default
    else:
        nfft = _static_int(nfft, "istft's nfft")
    if nfft < nperseg:
        raise ValueError(f"FFT length ({nfft}) must be longer than nperseg ({nperseg}).")
    noverlap = nperseg // 2 if noverlap is None else _static_int(noverlap, "istft's noverlap")
    if noverlap >= nperseg:
        raise ValueError("noverlap must be less than nperseg.")

    outer = [d for d in range(Zxx.ndim) if d not in (freq_axis, time_axis)]
    Zxx = fnp.transpose(Zxx, outer + [time_axis, freq_axis])  # (..., nseg, nfreq)
    inverse = fnp.fft.irfft if input_onesided else fnp.fft.ifft
    segments = inverse(Zxx, n=nfft, axis=-1)[..., :nperseg]

    if isinstance(window, (str, tuple)):
        win = fnp.asarray(_get_window(window, nperseg), dtype=segments.dtype)
    else:
        win = fnp.asarray(window)
        if win.ndim != 1:
            raise ValueError("window must be 1-D")
        if win.shape[0] != nperseg:
            raise ValueError(f"window must have length of {nperseg}")
        win = win.astype(segments.dtype)
    segments = segments * fnp.sum(win)  # undoes stft's 1 / sum(window) scaling

    nstep = nperseg - noverlap
    x = _overlap_add(segments * win, nstep)
    norm = _overlap_add(fnp.broadcast_to(win * win, segments.shape[-2:]), nstep)
    if boundary:  # [h:-h] as JAX and SciPy (empty for nperseg == 1)
        h = nperseg // 2
        x, norm = x[..., h:-h], norm[..., h:-h]
    x = x / fnp.where(fnp.real(norm) > 1e-10, norm, 1.0)

    if x.ndim > 1 and time_axis != Zxx.ndim - 1:
        x = fnp.moveaxis(x, -1, time_axis - 1 if freq_axis < time_axis else time_axis)
    time = fnp.arange(x.shape[0], dtype=dtypes.real_dtype(x.dtype)) / fs
    return time, x
