"""``fungrad.scipy.signal``: N-dimensional convolution and correlation with jax.scipy.signal's
names and semantics, computed directly with ``lax.conv_general_dilated``.

``mode`` follows SciPy: ``"full"`` (every overlap, shape ``s1 + s2 - 1``), ``"same"`` (the
centre of the full result with ``in1``'s shape) and ``"valid"`` (only complete overlaps, shape
``|s1 - s2| + 1``; one input must be at least as large as the other in every dimension).
Inputs promote to a floating dtype, as in JAX. ``method="direct"`` (and ``"auto"``) computes
the sums; ``method="fft"`` is :func:`fftconvolve`: products of ``fungrad.numpy.fft`` spectra
(``stft``, ``istft``, ``csd`` and ``welch`` are not provided). :func:`detrend` removes constant
or piecewise-linear trends.
"""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad import lax
from fungrad.numpy import util

__all__ = ["convolve", "convolve2d", "correlate", "correlate2d", "detrend", "fftconvolve"]

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
