"""``fungrad.numpy.fft``: discrete Fourier transforms with numpy's (and jax.numpy.fft's) names,
arguments and results, on :func:`fungrad.lax.fft`.

Every transform takes ``n`` / ``s`` (the transform lengths: each transformed axis is cropped or
zero-padded to it first), ``axis`` / ``axes`` and ``norm``: ``"backward"`` (None: the inverse
transforms divide by ``n``), ``"ortho"`` (both directions divide by ``sqrt(n)``) or
``"forward"`` (the forward transforms divide by ``n``). Results have JAX's dtypes: real input
of float32 (or an integer) gives complex64, float64 gives complex128, and the inverse real
transforms return the matching float. More than three transformed axes run as several
transforms of at most three (``lax.fft``'s limit).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import numpy as np

from fungrad import dtypes, lax
from fungrad.lax.fft import FftType
from fungrad.numpy import util

__all__ = [
    "fft",
    "fft2",
    "fftfreq",
    "fftn",
    "fftshift",
    "hfft",
    "ifft",
    "ifft2",
    "ifftn",
    "ifftshift",
    "ihfft",
    "irfft",
    "irfft2",
    "irfftn",
    "rfft",
    "rfft2",
    "rfftfreq",
    "rfftn",
]

_NORMS = (None, "backward", "ortho", "forward")


def _norm_factor(fun_name: str, norm, total: int) -> float:
    """What ``norm`` multiplies ``lax.fft``'s result by (that result is "backward"-normed);
    the inverse transforms are the functions whose names start with ``i``."""
    if norm not in _NORMS:
        raise ValueError(
            f'jax.numpy.fft.{fun_name}: invalid norm value {norm!r}; should be "backward", '
            '"ortho" or "forward"'
        )
    if norm in (None, "backward") or total == 0:
        return 1.0
    scale = math.sqrt(total) if norm == "ortho" else float(total)
    return scale if fun_name.startswith("i") else 1.0 / scale


def _scale(x, factor: float):
    if factor == 1.0:
        return x
    return lax.mul(x, lax.full((), factor, x.dtype))


def _moveaxes(x, src: Sequence[int], dst: Sequence[int]):
    """``x`` with axes ``src`` moved to positions ``dst`` (the others keep their order)."""
    if tuple(src) == tuple(dst):
        return x
    rest = [i for i in range(x.ndim) if i not in src]
    perm = [0] * x.ndim
    for s, d in zip(src, dst):
        perm[d] = s
    it = iter(rest)
    for i in range(x.ndim):
        if i not in dst:
            perm[i] = next(it)
    return lax.transpose(x, tuple(perm))


def _crop_or_pad(x, shape: Sequence[int]):
    """``x`` cut to ``shape`` where it is longer, zero-padded at the end where it is shorter."""
    if tuple(shape) == x.shape:
        return x
    x = lax.slice(x, (0,) * x.ndim, tuple(min(a, b) for a, b in zip(x.shape, shape)))
    if x.shape != tuple(shape):
        zero = lax.full((), 0, x.dtype)
        x = lax.pad(x, zero, [(0, b - a, 0) for a, b in zip(x.shape, shape)])
    return x


def _lax_fft_nd(x, typ: FftType, lengths: tuple[int, ...]):
    """``lax.fft`` over the trailing ``len(lengths)`` axes, in pieces of at most three."""
    if len(lengths) <= 3:
        return lax.fft(x, typ, lengths)
    k = 2 if len(lengths) == 4 else 3  # the trailing piece; the rest (at most 3) next
    nd, lead = x.ndim, len(lengths) - k
    src = tuple(range(nd - len(lengths), nd - k))  # the leading transformed axes
    dst = tuple(range(nd - lead, nd))
    if typ in (FftType.FFT, FftType.RFFT):
        x = lax.fft(x, typ, lengths[-k:])
        x = _moveaxes(x, src, dst)
        x = _lax_fft_nd(x, FftType.FFT, lengths[:-k])
        return _moveaxes(x, dst, src)
    x = _moveaxes(x, src, dst)
    x = _lax_fft_nd(x, FftType.IFFT, lengths[:-k])
    x = _moveaxes(x, dst, src)
    return lax.fft(x, typ, lengths[-k:])


def _fft_core(fun_name: str, typ: FftType, a, s, axes, norm):
    full_name = f"jax.numpy.fft.{fun_name}"
    _norm_factor(fun_name, norm, 0)  # a bad norm fails before any work
    util.check_arraylike(full_name, a)
    arr = util.asarray(a, fun_name=full_name)
    if s is not None:
        try:
            s = tuple(operator.index(n) for n in s)
        except TypeError:
            raise TypeError(f"{full_name}: s must be a sequence of ints, got {s!r}") from None
        if any(n <= 0 for n in s):
            raise ValueError(f"{full_name}: the transform lengths s must be positive, got {s}")
    if s is not None and axes is not None and len(s) != len(axes):
        raise ValueError(
            f"{full_name}: s and axes have different lengths ({len(s)} and {len(axes)})"
        )
    given = axes is not None
    if axes is None:
        axes = tuple(range(0 if s is None else arr.ndim - len(s), arr.ndim))
        if s is not None and len(s) > arr.ndim:
            raise ValueError(
                f"{full_name}: s {s} has more entries than the input has dimensions ({arr.shape})"
            )
    else:
        axes = tuple(util.canonicalize_axis(ax, arr.ndim, full_name) for ax in axes)
        if len(set(axes)) != len(axes):
            raise ValueError(f"{full_name} does not support repeated axes, got axes {axes}")
    trailing = tuple(range(arr.ndim - len(axes), arr.ndim))
    if given:
        arr = _moveaxes(arr, axes, trailing)
    if s is not None:
        shape = list(arr.shape)
        for ax, n in zip(trailing, s):
            shape[ax] = n
        if typ == FftType.IRFFT:
            shape[-1] = shape[-1] // 2 + 1
        arr = _crop_or_pad(arr, shape)
        lengths = s
    elif typ == FftType.IRFFT:
        lengths = tuple(arr.shape[ax] for ax in trailing[:-1])
        if trailing:
            lengths += (max(0, 2 * (arr.shape[-1] - 1)),)
    else:
        lengths = tuple(arr.shape[ax] for ax in trailing)
    out = _lax_fft_nd(arr, typ, tuple(lengths))
    out = _scale(out, _norm_factor(fun_name, norm, math.prod(lengths)))
    if given:
        out = _moveaxes(out, trailing, axes)
    return out


def _check_1d_axis(fun_name: str, axis) -> None:
    if isinstance(axis, (list, tuple)):
        raise ValueError(
            f"jax.numpy.fft.{fun_name} does not support multiple axes; use "
            f"jax.numpy.fft.{fun_name}n. Got axis = {axis!r}"
        )


def _fft_1d(fun_name: str, typ: FftType, a, n, axis, norm):
    _check_1d_axis(fun_name, axis)
    return _fft_core(
        fun_name, typ, a, None if n is None else [n], None if axis is None else [axis], norm
    )


def _fft_2d(fun_name: str, typ: FftType, a, s, axes, norm):
    if len(axes) != 2:
        raise ValueError(f"jax.numpy.fft.{fun_name} only supports 2 axes, got axes = {axes!r}")
    return _fft_core(fun_name, typ, a, s, axes, norm)


# -- the transforms ----------------------------------------------------------------------------


def fft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """The one-dimensional discrete Fourier transform along ``axis`` (``n``: crop or pad it
    to that length first)."""
    return _fft_1d("fft", FftType.FFT, a, n, axis, norm)


def ifft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """The inverse of :func:`fft`."""
    return _fft_1d("ifft", FftType.IFFT, a, n, axis, norm)


def rfft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """The one-dimensional transform of real input: ``n // 2 + 1`` frequencies."""
    return _fft_1d("rfft", FftType.RFFT, a, n, axis, norm)


def irfft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """The inverse of :func:`rfft`: ``n`` real outputs (default ``2 * (m - 1)`` for ``m``
    input frequencies)."""
    return _fft_1d("irfft", FftType.IRFFT, a, n, axis, norm)


def hfft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """The transform of a signal with Hermitian symmetry (given by its first half): real
    output, ``n`` long (default ``2 * (m - 1)``)."""
    _check_1d_axis("hfft", axis)
    util.check_arraylike("jax.numpy.fft.hfft", a)
    a = util.asarray(a, fun_name="jax.numpy.fft.hfft")
    a = lax.conj(a) if dtypes.is_complex(a.dtype) else a
    if n is None:
        n = (a.shape[util.canonicalize_axis(axis, a.ndim, "jax.numpy.fft.hfft")] - 1) * 2
    length = n
    out = _fft_1d("hfft", FftType.IRFFT, a, n, axis, norm)
    return _scale(out, float(length))


def ihfft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """The inverse of :func:`hfft`: ``n // 2 + 1`` complex outputs of real input."""
    _check_1d_axis("ihfft", axis)
    util.check_arraylike("jax.numpy.fft.ihfft", a)
    a = util.asarray(a, fun_name="jax.numpy.fft.ihfft")
    if n is None:
        n = a.shape[util.canonicalize_axis(axis, a.ndim, "jax.numpy.fft.ihfft")]
    length = n
    out = _fft_1d("ihfft", FftType.RFFT, a, n, axis, norm)
    return _scale(lax.conj(out), 1.0 / length if length else 1.0)


def fftn(a, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm=None):
    """The N-dimensional transform over ``axes`` (all by default; the last ``len(s)`` when
    only ``s`` is given)."""
    return _fft_core("fftn", FftType.FFT, a, s, axes, norm)


def ifftn(a, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm=None):
    """The inverse of :func:`fftn`."""
    return _fft_core("ifftn", FftType.IFFT, a, s, axes, norm)


def rfftn(a, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm=None):
    """The N-dimensional transform of real input (the last axis keeps ``n // 2 + 1``)."""
    return _fft_core("rfftn", FftType.RFFT, a, s, axes, norm)


def irfftn(a, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm=None):
    """The inverse of :func:`rfftn` (the last axis of ``s`` defaults to ``2 * (m - 1)``)."""
    return _fft_core("irfftn", FftType.IRFFT, a, s, axes, norm)


def fft2(a, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm=None):
    """:func:`fftn` over two axes (the last two by default)."""
    return _fft_2d("fft2", FftType.FFT, a, s, axes, norm)


def ifft2(a, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm=None):
    """:func:`ifftn` over two axes."""
    return _fft_2d("ifft2", FftType.IFFT, a, s, axes, norm)


def rfft2(a, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm=None):
    """:func:`rfftn` over two axes."""
    return _fft_2d("rfft2", FftType.RFFT, a, s, axes, norm)


def irfft2(a, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm=None):
    """:func:`irfftn` over two axes."""
    return _fft_2d("irfft2", FftType.IRFFT, a, s, axes, norm)


# -- frequencies and shifts --------------------------------------------------------------------


def _check_freq_args(fun_name: str, n, d) -> int:
    if isinstance(n, (list, tuple)):
        raise ValueError(
            f"The n argument of jax.numpy.fft.{fun_name} only takes an int. Got n = {list(n)}."
        )
    if isinstance(d, (list, tuple)):
        raise ValueError(
            f"The d argument of jax.numpy.fft.{fun_name} only takes a single value. "
            f"Got d = {list(d)}."
        )
    try:
        return operator.index(n)
    except TypeError:
        raise TypeError(f"jax.numpy.fft.{fun_name}: n must be an int, got {n!r}") from None


def _freq_dtype(fun_name: str, dtype) -> np.dtype:
    if dtype is None:
        return dtypes.default_float_dtype()
    return dtypes.check_user_dtype(dtype, f"jax.numpy.fft.{fun_name}", stacklevel=4)


def _frequencies(fun_name, k, n, d, dtype):
    """``k / (d * n)`` in the inexact counterpart of ``dtype``, cast to ``dtype``."""
    from fungrad.numpy.ufuncs import divide, multiply

    compute = dtype if dtypes.is_inexact(dtype) else util.inexact_dtype(dtype)
    k = lax.convert_element_type(k, compute)
    d = util.asarray(d, compute, f"jax.numpy.fft.{fun_name}")
    return lax.convert_element_type(divide(k, multiply(d, n)), dtype)


def fftfreq(n: int, d=1.0, *, dtype=None, device=None):
    """The sample frequencies of :func:`fft`: ``[0, 1, ..., n//2 - 1 + n%2, -(n//2), ..., -1]
    / (d * n)``."""
    n = _check_freq_args("fftfreq", n, d)
    dtype = _freq_dtype("fftfreq", dtype)
    size = max(n, 0)
    i = lax.iota(np.int32, size)
    # index i stands for frequency i up to (n - 1) // 2 and i - n above
    above = lax.ge(i, lax.full((size,), (n + 1) // 2, np.int32))
    k = lax.select_n(above, i, lax.sub(i, lax.full((size,), n, np.int32)))
    return _frequencies("fftfreq", k, n, d, dtype)


def rfftfreq(n: int, d=1.0, *, dtype=None, device=None):
    """The sample frequencies of :func:`rfft`: ``[0, 1, ..., n // 2] / (d * n)``."""
    n = _check_freq_args("rfftfreq", n, d)
    dtype = _freq_dtype("rfftfreq", dtype)
    return _frequencies("rfftfreq", lax.iota(np.int32, max(n // 2 + 1, 0)), n, d, dtype)


def _shift(fun_name: str, x, axes, sign: int):
    from fungrad.numpy.manipulation import roll

    util.check_arraylike(f"jax.numpy.fft.{fun_name}", x)
    x = util.asarray(x, fun_name=f"jax.numpy.fft.{fun_name}")
    if axes is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axes, int):
        axes = (axes,)
    axes = tuple(util.canonicalize_axis(ax, x.ndim, f"jax.numpy.fft.{fun_name}") for ax in axes)
    if not axes:
        return x
    return roll(x, tuple(sign * (x.shape[ax] // 2) for ax in axes), axes)


def fftshift(x, axes: None | int | Sequence[int] = None):
    """``x`` with the zero frequency moved to the centre of ``axes`` (all by default)."""
    return _shift("fftshift", x, axes, 1)


def ifftshift(x, axes: None | int | Sequence[int] = None):
    """The inverse of :func:`fftshift`."""
    return _shift("ifftshift", x, axes, -1)
