"""``fungrad.scipy.fft``: discrete cosine transforms with jax.scipy.fft's names and semantics:
``dct`` and ``idct`` along one axis, ``dctn`` and ``idctn`` along several.

As in JAX, only SciPy's type 2 is provided (``type=2``, the default: ``dct`` is the DCT-II and
``idct`` its inverse, a scaled DCT-III), with ``norm`` None or ``"backward"`` (``dct``
unscaled, ``y[k] = 2 sum_n x[n] cos(pi k (2n + 1) / 2N)``, ``idct`` its exact inverse) or
``"ortho"`` (both orthonormal). Other types raise NotImplementedError and other norms,
SciPy's ``"forward"`` included, ValueError. ``n`` / ``s`` crop or zero-pad the input along
each transformed axis first; a length of 0 is a TypeError and a negative one a ValueError
(JAX's error types). ``dctn``'s ``s`` and ``axes`` are paired as ``zip(axes, s)``, as in JAX
(SciPy requires equal lengths). Integers and bools transform as floats; results are real
(float32, or float64 from float64 or int64 input with x64: JAX's dtypes), complex input is
transformed part by part.

Each 1-D transform is Makhoul's (1980) length-N FFT: the samples reordered (even-indexed ones,
then the odd-indexed ones reversed), one complex FFT and a twiddle ``exp(-i pi k / 2N)``; the
inverse undoes those steps with one inverse FFT. The N-D transforms apply the 1-D ones axis by
axis (they commute).
"""

from __future__ import annotations

import operator

import numpy as np

import fungrad.numpy as fnp
from fungrad import dtypes, lax
from fungrad.numpy import util

__all__ = ["dct", "dctn", "idct", "idctn"]

_NORMS = (None, "backward", "ortho")


def dct(x, type: int = 2, n: int | None = None, axis: int = -1, norm: str | None = None):
    """The type-2 discrete cosine transform of ``x`` along ``axis``
    (``jax.scipy.fft.dct``), after cropping or zero-padding that axis to length ``n``."""
    x = _check("dct", x, type, norm)
    if dtypes.is_complex(x.dtype):
        return _by_parts(dct, x, n=n, axis=axis, norm=norm)
    return _along_axis(_dct_last_axis, "dct", x, n, axis, norm)


def idct(x, type: int = 2, n: int | None = None, axis: int = -1, norm: str | None = None):
    """The inverse of :func:`dct` (type 2) along ``axis`` (``jax.scipy.fft.idct``), after
    cropping or zero-padding that axis to length ``n``: ``idct(dct(x)) == x``."""
    x = _check("idct", x, type, norm)
    if dtypes.is_complex(x.dtype):
        return _by_parts(idct, x, n=n, axis=axis, norm=norm)
    return _along_axis(_idct_last_axis, "idct", x, n, axis, norm)


def dctn(x, type: int = 2, s=None, axes=None, norm: str | None = None):
    """The type-2 discrete cosine transform of ``x`` along each of ``axes``
    (``jax.scipy.fft.dctn``): all axes by default, or the last ``len(s)`` when only the
    lengths ``s`` are given. ``axes=()`` returns ``x`` unchanged."""
    x = _check("dctn", x, type, norm)
    if dtypes.is_complex(x.dtype):
        return _by_parts(dctn, x, s=s, axes=axes, norm=norm)
    for axis, n in _axes_and_lengths("dctn", x.ndim, s, axes):
        x = _along_axis(_dct_last_axis, "dctn", x, n, axis, norm)
    return x


def idctn(x, type: int = 2, s=None, axes=None, norm: str | None = None):
    """The inverse of :func:`dctn` (type 2) along each of ``axes``
    (``jax.scipy.fft.idctn``; ``s`` and ``axes`` as there): ``idctn(dctn(x)) == x``."""
    x = _check("idctn", x, type, norm)
    if dtypes.is_complex(x.dtype):
        return _by_parts(idctn, x, s=s, axes=axes, norm=norm)
    for axis, n in _axes_and_lengths("idctn", x.ndim, s, axes):
        x = _along_axis(_idct_last_axis, "idctn", x, n, axis, norm)
    return x


def _by_parts(transform, x, **kw):
    """A complex ``x`` transformed as its real and imaginary parts (the DCT is real-linear)."""
    return lax.complex(transform(fnp.real(x), **kw), transform(fnp.imag(x), **kw))


# -- arguments ----------------------------------------------------------------------------------


def _check(fun_name, x, type, norm):
    """``x`` as an array, once ``type`` and ``norm`` are ones JAX implements."""
    util.check_arraylike(fun_name, x)
    if type != 2:
        raise NotImplementedError(
            f"{fun_name}: type={type!r} is not implemented; only the type-2 DCT (type=2) is "
            "supported"
        )
    if norm not in _NORMS:
        raise ValueError(
            f"{fun_name}: norm={norm!r} is not implemented; norm must be None, 'backward' or "
            "'ortho'"
        )
    return util.asarray(x, fun_name=fun_name)


def _length(fun_name, n, axis, size):
    """The transform's length along ``axis`` (of ``size``): ``n``, or ``size`` when None."""
    arg = "s" if fun_name.endswith("n") else "n"  # dctn and idctn take s, dct and idct n
    given = n is not None
    if not given:
        n = size
    else:
        try:
            n = operator.index(n)
        except TypeError:
            kind = "ints" if arg == "s" else "an int"
            raise TypeError(f"{fun_name}: {arg} must be {kind}, got {n!r}") from None
    if n < 0:
        raise ValueError(f"{fun_name}: {arg} must be positive, got {n} for axis {axis}")
    if n == 0:  # JAX's error type for an empty transform
        what = f"{arg} is 0" if given else f"x has size 0 along axis {axis}"
        raise TypeError(f"{fun_name}: {what}; a DCT needs a length of at least 1")
    return n


def _axes_and_lengths(fun_name, ndim, s, axes):
    """``(axis, n)`` for each transformed axis of an N-D transform: ``s`` (an int or a
    sequence, at most ``ndim`` long) pairs with ``axes`` as ``zip(axes, s)``; the other axes get
    ``n=None`` (their own size)."""
    if s is not None:
        s = [s] if np.ndim(s) == 0 else list(s)
        if len(s) > ndim:
            raise ValueError(
                f"{fun_name}: s must have at most x.ndim ({ndim}) elements, got {len(s)} (s={s})"
            )
    if axes is None:
        axes = range(ndim - len(s), ndim) if s is not None else range(ndim)
    else:
        axes = [axes] if np.ndim(axes) == 0 else list(axes)
        axes = [util.canonicalize_axis(a, ndim, fun_name) for a in axes]
        if len(set(axes)) != len(axes):
            raise ValueError(f"{fun_name}: repeated axis in axes={tuple(axes)}")
    lengths = dict(zip(axes, s)) if s is not None else {}
    return [(axis, lengths.get(axis)) for axis in axes]


# -- the transforms -----------------------------------------------------------------------------


def _along_axis(transform, fun_name, x, n, axis, norm):
    """``transform`` (of the last axis) applied along ``axis`` of real ``x``, that axis first
    cropped or zero-padded to ``n``."""
    axis = util.canonicalize_axis(axis, x.ndim, fun_name)
    n = _length(fun_name, n, axis, x.shape[axis])
    x = fnp.moveaxis(x, axis, -1)
    if n != x.shape[-1]:
        x = lax.pad(
            x, lax.full((), 0, x.dtype), [(0, 0, 0)] * (x.ndim - 1) + [(0, n - x.shape[-1], 0)]
        )
    return fnp.moveaxis(transform(x, norm), -1, axis)


def _makhoul_order(n):
    """The samples' order for Makhoul's FFT: the even indices, then the odd ones reversed."""
    return np.concatenate([np.arange(0, n, 2), np.arange(1, n, 2)[::-1]])


def _ortho_scale(n, norm):
    """What ``norm`` multiplies the unscaled (``"backward"``) DCT's coefficients by."""
    if norm != "ortho":
        return np.ones(n)
    return np.where(np.arange(n) == 0, np.sqrt(1 / (4 * n)), np.sqrt(1 / (2 * n)))


def _dct_last_axis(x, norm):
    """DCT-II along the last axis: ``y[k] = 2 Re(exp(-i pi k / 2N) V[k])``, ``V`` the FFT of the
    reordered samples (times the ``"ortho"`` scale)."""
    n = x.shape[-1]
    spectrum = fnp.fft.fft(x[..., _makhoul_order(n)])
    k = np.arange(n)
    twiddle = 2 * np.exp(-0.5j * np.pi * k / n) * _ortho_scale(n, norm)
    return fnp.real(spectrum * twiddle.astype(spectrum.dtype))


def _idct_last_axis(y, norm):
    """The inverse of :func:`_dct_last_axis`. The reordered samples' FFT is
    ``V[k] = exp(i pi k / 2N) (y[k] - i y[N - k]) / 2`` (``y[N] = 0``), which is Hermitian, so
    the samples are the real part of the inverse FFT of its first term alone (``y[0]``
    halved)."""
    n = y.shape[-1]
    (y,) = util.promote_dtypes_inexact(y, fun_name="idct")
    k = np.arange(n)
    twiddle = np.where(k == 0, 0.5, 1.0) * np.exp(0.5j * np.pi * k / n) / _ortho_scale(n, norm)
    samples = fnp.real(fnp.fft.ifft(y * twiddle.astype(dtypes.complex_dtype(y.dtype))))
    return samples[..., np.argsort(_makhoul_order(n))]
