"""The ``fft`` primitive (``jax.lax.fft``) with all its rules, and ``fft_c2c``, the real
primitive the compiler runs it as.

``fft_p`` transforms the trailing ``len(fft_lengths)`` (1 to 3) axes of its operand:

* ``FFT`` / ``IFFT``: complex to complex, forward (``exp(-2 pi i jk / n)``) or inverse (sign +1,
  scaled by ``1 / prod(fft_lengths)``);
* ``RFFT``: float to complex, the last axis keeps ``n // 2 + 1`` frequencies;
* ``IRFFT``: complex to float, the inverse of RFFT: the last axis (``n // 2 + 1`` long) is
  extended to ``n`` by Hermitian symmetry (the imaginary parts of the zero and, for even ``n``,
  the Nyquist frequency are ignored), the other axes are ordinary inverse transforms.

Rules:

* eager: ``numpy.fft``, cast to JAX's dtypes (complex64 from float32);
* jvp: the transform is linear, so the tangent is the transform of the tangent;
* transpose (JAX's convention for complex linear maps: ``ct -> A^T ct``, no conjugation, and
  the real part of it for a real operand): the DFT matrix is symmetric, so FFT and IFFT are
  their own transposes; RFFT's is the real part of the forward FFT of the cotangent padded
  with zeros to ``n`` on the last axis; IRFFT's is ``conj(c_k / N * rfft(ct))``, where
  ``c_k`` is 1 at the frequencies the Hermitian extension does not duplicate (zero, Nyquist)
  and 2 elsewhere;
* batching: the mapped axis moves to the front, one more leading (untransformed) axis;
* lowering: the complex-split pass (``lowering/complex_split.py``) rewrites it by
  :func:`fft_split` into one-dimensional complex transforms along one axis each of
  interleaved real arrays ``[..., n, 2]`` (``fft_c2c_p``, whose ``axis`` is any logical axis:
  no transposes), RFFT of even length as a half-length complex transform of the samples read
  in pairs, IRFFT likewise (odd lengths: ``x + 0i`` transformed, or the spectrum extended by
  Hermitian symmetry). An FFT over axes that ``fnp.fft`` moved last by a transpose runs along
  them where they lie (:func:`_transposed_planes`). ``fft_c2c_p``'s lowering rule appends a
  library step (``steps.FftStep``, ``inner`` > 1 for an axis that is not the last) reading its
  operand's buffer in place where it can, where the backend's policy has ``fft_steps``, and
  is a LoweringError elsewhere.
"""

from __future__ import annotations

import enum
import math
import operator
from collections.abc import Sequence

import numpy as np

from fungrad import core, dtypes
from fungrad.core import ShapedArray
from fungrad.impls import ignore_fp_errors
from fungrad.lax.utils import standard_primitive
from fungrad.lowering import kernel
from fungrad.lowering.complex_split import Pair, register_split_rule
from fungrad.operands import operand
from fungrad.transforms.jvp import deflinear
from fungrad.transforms.transpose import deflinear_transpose
from fungrad.transforms.vmap import batch_rules, bdim_at_front

__all__ = ["FftType", "fft", "fft_p"]

_REALS = (np.dtype(np.float32), np.dtype(np.float64))
_COMPLEXES = (np.dtype(np.complex64), np.dtype(np.complex128))


class FftType(enum.IntEnum):
    """Which transform :func:`fft` computes."""

    FFT = 0
    """Forward complex-to-complex."""
    IFFT = 1
    """Inverse complex-to-complex (scaled by ``1 / prod(fft_lengths)``)."""
    RFFT = 2
    """Forward real-to-complex (the last axis keeps ``n // 2 + 1`` frequencies)."""
    IRFFT = 3
    """Inverse complex-to-real (Hermitian symmetry on the last axis)."""


def _fft_type(fft_type) -> FftType:
    if isinstance(fft_type, FftType):
        return fft_type
    if isinstance(fft_type, str):
        for t in FftType:
            if fft_type in (t.name, t.name.lower()):
                return t
        raise ValueError(
            f"fft: unknown FFT type {fft_type!r}; use one of 'FFT', 'IFFT', 'RFFT', 'IRFFT' "
            "or a lax.FftType"
        )
    raise TypeError(
        f"fft: unknown FFT type value {fft_type!r} ({type(fft_type).__name__}); use a "
        "lax.FftType or one of the strings 'FFT', 'IFFT', 'RFFT', 'IRFFT'"
    )


def fft(x, fft_type: FftType | str, fft_lengths: Sequence[int]):
    """The discrete Fourier transform of ``x`` over its trailing ``len(fft_lengths)`` axes
    (``jax.lax.fft``). ``fft_type`` is a :class:`FftType` or its name; FFT and IFFT convert
    the operand to complex (float32 -> complex64), RFFT to floating (a complex operand is a
    ValueError). No lengths: ``x`` converted, untransformed."""
    typ = _fft_type(fft_type)
    x = operand(x, "fft")
    dt = x.aval.dtype
    if not dtypes.is_inexact(dt):  # integers and bools: float32, 64-bit ones float64 (as jnp)
        dt = np.dtype(np.float64 if dt.itemsize == 8 else np.float32)
    if typ == FftType.RFFT:
        if dtypes.is_complex(dt):
            raise ValueError(
                f"fft: RFFT takes a real operand, got {dt.name}; use FFT for complex input"
            )
    else:
        dt = dtypes.complex_dtype(dt)
    from fungrad.lax.elementwise import convert_element_type

    x = convert_element_type(x, dtypes.canonicalize_dtype(dt))
    try:
        lengths = tuple(operator.index(n) for n in fft_lengths)
    except TypeError:
        raise TypeError(
            f"fft: fft_lengths must be a sequence of ints, got {fft_lengths!r}"
        ) from None
    if not lengths:
        return x
    return fft_p.bind(x, fft_type=typ, fft_lengths=lengths)


# -- fft_p: shape rule and eager impl ----------------------------------------------------------


def _fft_abstract_eval(x, *, fft_type, fft_lengths):
    k, shape = len(fft_lengths), x.shape
    if not 1 <= k <= 3:
        raise ValueError(f"fft: 1 to 3 fft_lengths are supported, got {fft_lengths}")
    if k > x.ndim:
        raise ValueError(
            f"fft: operand shape {shape} has fewer dimensions than fft_lengths {fft_lengths}"
        )
    if any(n < 0 for n in fft_lengths):
        raise ValueError(f"fft: fft_lengths must be nonnegative, got {fft_lengths}")
    name = fft_type.name
    if fft_type == FftType.RFFT:
        if x.dtype not in _REALS:
            raise ValueError(f"fft: RFFT operand must be float32 or float64, got {x.dtype.name}")
        if shape[-k:] != fft_lengths:
            raise ValueError(
                f"fft: RFFT operand shape {shape}: its trailing dimensions must equal "
                f"fft_lengths {fft_lengths}"
            )
        if fft_lengths[-1] == 0:
            raise ValueError(f"fft: RFFT of length 0 is undefined (fft_lengths {fft_lengths})")
        out = shape[:-1] + (fft_lengths[-1] // 2 + 1,)
        return ShapedArray(out, dtypes.complex_dtype(x.dtype))
    if x.dtype not in _COMPLEXES:
        raise ValueError(f"fft: {name} operand must be complex64 or complex128, got {x.dtype.name}")
    if fft_type == FftType.IRFFT:
        want = fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,)
        if shape[-k:] != want:
            raise ValueError(
                f"fft: IRFFT operand shape {shape}: its trailing dimensions must be {want} "
                f"(fft_lengths {fft_lengths}, the last one n // 2 + 1)"
            )
        return ShapedArray(shape[:-k] + fft_lengths, dtypes.real_dtype(x.dtype))
    if shape[-k:] != fft_lengths:
        raise ValueError(
            f"fft: {name} operand shape {shape}: its trailing dimensions must equal "
            f"fft_lengths {fft_lengths}"
        )
    return ShapedArray(shape, x.dtype)


@ignore_fp_errors
def _fft_impl(x, *, fft_type, fft_lengths):
    x = np.asarray(x)
    k = len(fft_lengths)
    axes = tuple(range(x.ndim - k, x.ndim))
    if x.size == 0 or 0 in fft_lengths:  # numpy refuses some empty transforms
        out = _fft_abstract_eval(
            ShapedArray(x.shape, x.dtype), fft_type=fft_type, fft_lengths=fft_lengths
        )
        return np.zeros(out.shape, out.dtype)
    if fft_type == FftType.FFT:
        y = np.fft.fftn(x, axes=axes)
        return y.astype(x.dtype, copy=False)
    if fft_type == FftType.IFFT:
        return np.fft.ifftn(x, axes=axes).astype(x.dtype, copy=False)
    if fft_type == FftType.RFFT:
        return np.fft.rfftn(x, axes=axes).astype(dtypes.complex_dtype(x.dtype), copy=False)
    y = np.fft.irfftn(x, s=fft_lengths, axes=axes)
    return y.astype(dtypes.real_dtype(x.dtype), copy=False)


fft_p = standard_primitive("fft", _fft_impl, _fft_abstract_eval)


# -- fft_p: transforms -------------------------------------------------------------------------


def _hermitian_weights(m: int, n: int) -> np.ndarray:
    """``c_k`` over the ``m = n // 2 + 1`` kept frequencies: 1 at zero and (even ``n``) at
    Nyquist, 2 elsewhere (the frequencies the Hermitian extension counts twice)."""
    w = np.full((m,), 2.0)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    return w


def _fft_transpose(ct, x, *, fft_type, fft_lengths):
    from fungrad import lax

    if 0 in fft_lengths:  # an empty transform: nothing flows back
        aval = x.aval.strip_weak_type()
        return [lax.full(aval.shape, 0, aval.dtype)]
    if fft_type in (FftType.FFT, FftType.IFFT):  # the DFT matrix is symmetric
        return [fft_p.bind(ct, fft_type=fft_type, fft_lengths=fft_lengths)]
    if fft_type == FftType.RFFT:
        # y = P F x (P keeps n // 2 + 1 frequencies): Fᵀ Pᵀ ct, whose real part is x's
        n, m = fft_lengths[-1], core.get_aval(ct).shape[-1]
        nd = core.get_aval(ct).ndim
        zero = lax.full((), 0, core.get_aval(ct).dtype)
        config = [(0, 0, 0)] * (nd - 1) + [(0, n - m, 0)]
        padded = lax.pad(ct, zero, config)
        full = fft_p.bind(padded, fft_type=FftType.FFT, fft_lengths=fft_lengths)
        return [lax.real(full)]
    # IRFFT: y_j = (1/N) sum_k c_k Re(x_k e^{+2 pi i jk/n})  =>  conj(c / N * rfft(ct))
    spec = fft_p.bind(ct, fft_type=FftType.RFFT, fft_lengths=fft_lengths)
    aval = core.get_aval(spec)
    w = _hermitian_weights(aval.shape[-1], fft_lengths[-1]) / math.prod(fft_lengths)
    w = lax.convert_element_type(_const(w, aval.dtype), aval.dtype)
    w = lax.broadcast_in_dim(w, aval.shape, (aval.ndim - 1,))
    return [lax.conj(lax.mul(spec, w))]


def _const(value: np.ndarray, dtype):
    """``value`` as an Array of ``dtype``'s real counterpart (a constant of the rule)."""
    from fungrad.array import Array

    return Array(np.asarray(value, dtypes.real_dtype(dtype)))


def _fft_batch(axis_size, args, dims, *, fft_type, fft_lengths):
    (x,), (d,) = args, dims
    x = bdim_at_front(x, d, axis_size)
    return fft_p.bind(x, fft_type=fft_type, fft_lengths=fft_lengths), 0


deflinear(fft_p)
deflinear_transpose(fft_p, _fft_transpose)
batch_rules[fft_p] = _fft_batch


# -- fft_c2c_p: what the compiler runs ---------------------------------------------------------


def _c2c_axis(shape, axis: int) -> int:
    """``axis`` of ``fft_c2c`` as a nonnegative index of the interleaved ``shape`` (a logical
    axis: any axis but the last, which holds the parts)."""
    logical = len(shape) - 1
    if not -logical <= axis < logical:
        raise ValueError(
            f"fft_c2c: axis {axis} is out of range for the logical axes of an interleaved "
            f"operand of shape {tuple(shape)} (its last axis holds the parts)"
        )
    return axis % logical


def _c2c_abstract_eval(x, *, inverse, axis=-1):
    if x.dtype not in _REALS:
        raise TypeError(
            f"fft_c2c: operand must be float32 or float64 (interleaved complex), got {x.dtype.name}"
        )
    if x.ndim < 2 or x.shape[-1] != 2:
        raise ValueError(
            f"fft_c2c: operand must be [..., n, 2] (real and imaginary parts interleaved), got "
            f"shape {x.shape}"
        )
    _c2c_axis(x.shape, axis)
    return ShapedArray(x.shape, x.dtype)


@ignore_fp_errors
def _c2c_impl(x, *, inverse, axis=-1):
    x = np.asarray(x)
    a = _c2c_axis(x.shape, axis)
    z = x[..., 0] + 1j * x[..., 1]
    if z.size:
        z = np.fft.ifft(z, axis=a) * z.shape[a] if inverse else np.fft.fft(z, axis=a)
    return np.stack([z.real, z.imag], axis=-1).astype(x.dtype, copy=False)


fft_c2c_p = standard_primitive("fft_c2c", _c2c_impl, _c2c_abstract_eval)
"""One-dimensional complex DFTs along the logical axis ``axis`` (default: the last one, the
second-to-last of the array) of a real array whose last axis holds real and imaginary parts:
``out[..., k, ...] = sum_j x[..., j, ...] exp(-+2 pi i jk/n)`` (``inverse``: sign +1,
unscaled). Bound only by :func:`fft_split`, inside the compiler."""


def _c2c_transpose(ct, x, *, inverse, axis=-1):
    # as a real matrix, [[Fr, -Fi], [Fi, Fr]]ᵀ = [[Fr, Fi], [-Fi, Fr]] (F symmetric): conj(F)
    return [fft_c2c_p.bind(ct, inverse=not inverse, axis=axis)]


def _c2c_batch(axis_size, args, dims, *, inverse, axis=-1):
    (x,), (d,) = args, dims
    return fft_c2c_p.bind(
        bdim_at_front(x, d, axis_size), inverse=inverse, axis=axis + 1 if axis >= 0 else axis
    ), 0


deflinear(fft_c2c_p)
deflinear_transpose(fft_c2c_p, _c2c_transpose)
batch_rules[fft_c2c_p] = _c2c_batch


def _step_source(ctx, x):
    """The buffer the FFT step reads ``x`` from: the buffer ``x`` is a row-major view of (a
    program argument, a reshape of a stored value) when it is one, else ``x`` stored."""
    if x.view is not None and x.view[1] == tuple(range(len(x.shape))):
        buf = x.view[0]
        if buf.shape == x.shape or math.prod(buf.shape) == math.prod(x.shape):
            return buf
    return ctx.materialize(x).buffer


def _c2c_lowering(ctx, x, *, inverse, axis=-1):
    from fungrad.lowering.fusion import LoweringError

    planner = ctx.planner
    if not planner.policy.fft_steps:
        raise LoweringError(
            f"fft: the {planner.policy.name} backend has no FFT; run this function with "
            'jit(..., backend="cpu") or outside jit'
        )
    a = _c2c_axis(x.shape, axis)
    n = x.shape[a]
    batch = math.prod(x.shape[:a])
    inner = math.prod(x.shape[a + 1 : -1])
    if batch * n * inner == 0:
        return kernel.from_fn(x.shape, x.dtype, lambda idx: ctx.const(0, x.dtype), "fft")
    from fungrad.lowering.steps import FftStep

    src = _step_source(ctx, x)
    out = planner.new_buffer(x.shape, x.dtype, "temp")
    planner.add_step(FftStep(f"fft_{out.name}", src, out, batch, n, inverse, inner))
    return planner.buffer_tensor(out, "fft")


kernel.register_lowering(fft_c2c_p, _c2c_lowering)


# -- the complex split of fft_p ----------------------------------------------------------------


def _interleave(re, im):
    """Two real ``[..., n]`` planes as one ``[..., n, 2]`` array."""
    from fungrad import lax

    shape = tuple(core.get_aval(re).shape) + (1,)
    return lax.concatenate([lax.reshape(re, shape), lax.reshape(im, shape)], len(shape) - 1)


def _planes(z):
    """The real and imaginary planes of an interleaved ``[..., n, 2]`` array."""
    from fungrad import lax

    nd = core.get_aval(z).ndim
    return tuple(lax.squeeze(lax.slice_in_dim(z, i, i + 1, axis=nd - 1), (nd - 1,)) for i in (0, 1))


def _c2c_along(z, axis: int, inverse: bool):
    """The unscaled 1-D DFT of interleaved ``z`` along its logical ``axis``, in place of the
    layout: the library transforms any axis of ``[batch, n, inner, 2]`` (no transposes)."""
    return fft_c2c_p.bind(z, inverse=inverse, axis=axis)


def _scaled(x, factor: float):
    from fungrad import lax

    if factor == 1:
        return x
    return lax.mul(x, lax.full((), factor, core.get_aval(x).dtype))


def _add_scaled(a, b, h):
    """``(a + b) * h`` as ``a * h + b * h`` (``h`` at most 1/2): the sum of two spectra near the
    largest float overflowed to inf (and inf - inf to NaN) where each half is finite: jit's
    ``rfft`` of a float32 ``[3e38, 0, ...]`` was inf + nan i. (The packed complex transform
    itself can still overflow where the real one would not, for neighbouring samples whose
    sum of magnitudes exceeds the largest float.)"""
    from fungrad import lax

    return lax.add(lax.mul(a, h), lax.mul(b, h))


def _sub_scaled(a, b, h):
    """``(a - b) * h`` as ``a * h - b * h`` (see :func:`_add_scaled`)."""
    from fungrad import lax

    return lax.sub(lax.mul(a, h), lax.mul(b, h))


def _twiddles(count: int, n: int, like):
    """``cos(2 pi k / n)`` and ``sin(2 pi k / n)`` for ``k < count`` (computed in float64),
    broadcast along the last axis of ``like``'s shape (whose last axis is ``count`` long)."""
    from fungrad import lax

    aval = core.get_aval(like)
    theta = 2 * np.pi * np.arange(count) / n
    return tuple(
        lax.broadcast_in_dim(_const(f(theta), aval.dtype), aval.shape, (aval.ndim - 1,))
        for f in (np.cos, np.sin)
    )


def _last(x, start: int, stop: int):
    from fungrad import lax

    return lax.slice_in_dim(x, start, stop, axis=core.get_aval(x).ndim - 1)


def _rfft_last(x, n: int):
    """The planes of the real transform of ``x`` along its last axis (``n // 2 + 1`` kept).

    Even ``n = 2M``: ``x`` read as ``M`` complex numbers ``x[2j] + i x[2j+1]`` (a reshape to
    the interleaved layout, no copy) takes one complex transform of half the length, ``Z``;
    with ``A_k = Z_(k mod M)`` and ``B_k = Z_((M-k) mod M)``, the transforms of the even and
    odd samples are ``E = (A + conj B) / 2`` and ``O = (A - conj B) / 2i``, and the spectrum is
    ``X_k = E_k + e^(-2 pi i k/n) O_k`` for ``k = 0..M``. Odd ``n``: the transform of
    ``x + 0i``, cut."""
    from fungrad import lax

    aval = core.get_aval(x)
    nd = aval.ndim
    if n % 2:
        z = _c2c_along(_interleave(x, lax.full_like(x, 0)), nd - 1, False)
        return _planes(lax.slice_in_dim(z, 0, n // 2 + 1, axis=nd - 1))
    m = n // 2
    z = lax.reshape(x, aval.shape[:-1] + (m, 2))
    zr, zi = _planes(_c2c_along(z, nd - 1, False))
    ar = lax.concatenate([zr, _last(zr, 0, 1)], nd - 1)
    ai = lax.concatenate([zi, _last(zi, 0, 1)], nd - 1)
    br, bi = lax.rev(ar, (nd - 1,)), lax.rev(ai, (nd - 1,))
    half = lax.full((), 0.5, aval.dtype)
    er, ei = _add_scaled(ar, br, half), _sub_scaled(ai, bi, half)
    o_r, o_i = _add_scaled(ai, bi, half), _sub_scaled(br, ar, half)
    c, s = _twiddles(m + 1, n, er)  # e^(-i theta) = c - i s
    xr = lax.add(er, lax.add(lax.mul(c, o_r), lax.mul(s, o_i)))
    xi = lax.add(ei, lax.sub(lax.mul(c, o_i), lax.mul(s, o_r)))
    return xr, xi


def _along(x, axis: int, start: int, stop: int):
    from fungrad import lax

    return lax.slice_in_dim(x, start, stop, axis=axis)


def _rfft_column_pairs(x, axis: int, n: int):
    """The planes of the real transform of ``x`` along ``axis``, not its last one, whose
    length is even: the columns ``2c`` and ``2c + 1`` of the last axis, read as one complex
    column ``x[.., 2c] + i x[.., 2c+1]`` (a reshape to the interleaved layout, no copy), take
    one complex transform ``Z`` along ``axis`` for the two; with ``B_k = Z_((n-k) mod n)``
    the spectra are ``E = (Z + conj B) / 2`` (even columns) and ``O = (Z - conj B) / 2i``
    (odd ones), ``k < n // 2 + 1``, interleaved back along the last axis."""
    from fungrad import lax

    aval = core.get_aval(x)
    nd, shape, m = aval.ndim, aval.shape, n // 2 + 1
    zr, zi = _planes(_c2c_along(lax.reshape(x, shape[:-1] + (shape[-1] // 2, 2)), axis, False))
    ar, ai = _along(zr, axis, 0, m), _along(zi, axis, 0, m)
    if m == 1:
        br, bi = ar, ai
    else:
        br, bi = (
            lax.concatenate(
                [_along(p, axis, 0, 1), lax.rev(_along(p, axis, n - m + 1, n), (axis,))], axis
            )
            for p in (zr, zi)
        )
    half = lax.full((), 0.5, aval.dtype)
    er, ei = _add_scaled(ar, br, half), _sub_scaled(ai, bi, half)
    o_r, o_i = _add_scaled(ai, bi, half), _sub_scaled(br, ar, half)
    out = shape[:axis] + (m,) + shape[axis + 1 : nd]
    return lax.reshape(_interleave(er, o_r), out), lax.reshape(_interleave(ei, o_i), out)


def _irfft_column_pairs(re, im, axis: int, n: int, lead: int):
    """The real inverse transform along ``axis``, not the last one, whose length is even, of
    the planes ``re``, ``im`` (``n // 2 + 1`` frequencies along ``axis``), scaled by ``1 / (n *
    lead)``: the spectra of the columns ``2c`` and ``2c + 1`` of the last axis, each extended
    by Hermitian symmetry to ``n``, are combined as ``E + iO`` (in the kernel that reads them),
    whose one inverse complex transform along ``axis`` holds ``x[.., 2c] + i x[.., 2c+1]``:
    the output's layout, written by the library step."""
    from fungrad import lax

    aval = core.get_aval(re)
    shape, m = aval.shape, n // 2 + 1
    keep = np.ones((m,), np.float64)
    keep[0] = 0
    if n % 2 == 0:
        keep[-1] = 0
    im = lax.mul(im, lax.broadcast_in_dim(_const(keep, aval.dtype), shape, (axis,)))
    pairs = shape[:-1] + (shape[-1] // 2, 2)
    (er, o_r), (ei, o_i) = (_planes(lax.reshape(p, pairs)) for p in (re, im))

    def extended(p, sign):
        if n == m:
            return p
        tail = lax.rev(_along(p, axis, 1, n - m + 1), (axis,))
        return lax.concatenate([p, lax.neg(tail) if sign < 0 else tail], axis)

    er, o_r, ei, o_i = extended(er, 1), extended(o_r, 1), extended(ei, -1), extended(o_i, -1)
    scale = lax.full((), 1 / (n * lead), aval.dtype)
    zr, zi = _sub_scaled(er, o_i, scale), _add_scaled(ei, o_r, scale)
    z = _c2c_along(_interleave(zr, zi), axis, True)
    return lax.reshape(z, shape[:axis] + (n,) + shape[axis + 1 :])


def _irfft_last(re, im, n: int, lead: int):
    """The real inverse transform along the last axis of the planes ``re``, ``im`` (``n // 2 +
    1`` frequencies; the imaginary parts at zero and, ``n`` even, at Nyquist do not count),
    scaled by ``1 / (n * lead)`` (``lead``: the length of the inverse transforms done before).

    Even ``n = 2M``: with ``B_k = X_(M-k)``, ``E = (X + conj B) / 2`` and ``O = (X - conj B)
    e^(2 pi i k/n) / 2`` (``k < M``) are the spectra of the even and odd samples, and the
    inverse complex transform of ``E + iO`` of length ``M`` holds ``x[2j] + i x[2j+1]``: it is
    already the output's layout, so the scale is applied to ``E`` and ``O`` (in the kernel
    that computes them) and the library step writes the result. Odd ``n``: the spectrum
    extended by Hermitian symmetry, transformed, its real part (scaled as it is extracted)."""
    from fungrad import lax

    aval = core.get_aval(re)
    nd = aval.ndim
    keep = np.ones((n // 2 + 1,), np.float64)
    keep[0] = 0
    if n % 2 == 0:
        keep[-1] = 0
    im = lax.mul(im, lax.broadcast_in_dim(_const(keep, aval.dtype), aval.shape, (nd - 1,)))
    if n % 2 == 0:
        m = n // 2
        ar, ai = _last(re, 0, m), _last(im, 0, m)
        br = lax.rev(_last(re, 1, m + 1), (nd - 1,))
        bi = lax.rev(_last(im, 1, m + 1), (nd - 1,))
        half = lax.full((), 0.5 / (m * lead), aval.dtype)  # the inverse's length is M
        er, ei = _add_scaled(ar, br, half), _sub_scaled(ai, bi, half)
        dr, di = _sub_scaled(ar, br, half), _add_scaled(ai, bi, half)
        c, s = _twiddles(m, n, er)  # O = D (c + i s)
        o_r = lax.sub(lax.mul(dr, c), lax.mul(di, s))
        o_i = lax.add(lax.mul(dr, s), lax.mul(di, c))
        z = _c2c_along(_interleave(lax.sub(er, o_i), lax.add(ei, o_r)), nd - 1, True)
        return lax.reshape(z, aval.shape[:-1] + (n,))
    tail = (n - 1) // 2  # frequencies n // 2 + 1 .. n - 1 are conj(x[n - k])
    if tail:
        tail_re = lax.rev(_last(re, 1, tail + 1), (nd - 1,))
        tail_im = lax.neg(lax.rev(_last(im, 1, tail + 1), (nd - 1,)))
        re = lax.concatenate([re, tail_re], nd - 1)
        im = lax.concatenate([im, tail_im], nd - 1)
    out, _ = _planes(_c2c_along(_interleave(re, im), nd - 1, True))
    return _scaled(out, 1 / (n * lead))


def _transposed(*values):
    """``(sources, perm)`` when each of ``values`` is, in the jaxpr the complex split is
    building, ``transpose(source, perm)`` with one ``perm`` (``fnp.fft`` over axes that are not
    the last ones moves them there): the transform then runs along ``perm``'s axes of the
    sources, and the transposes that ``fnp.fft`` applies after it cancel with
    :func:`_permuted`'s. None otherwise (and outside the split pass)."""
    from fungrad.lowering.complex_split import current_trace

    atoms = [getattr(v, "atom", None) for v in values]
    if any(type(a) is not core.Var for a in atoms) or len(set(atoms)) != len(atoms):
        return None
    found = {}
    for eqn in reversed(current_trace().eqns):
        out = eqn.outvars[0] if len(eqn.outvars) == 1 else None
        if out in atoms:
            if eqn.primitive.name != "transpose" or type(eqn.invars[0]) is not core.Var:
                return None
            found[out] = eqn
            if len(found) == len(atoms):
                break
    if len(found) != len(atoms):
        return None
    perm = tuple(found[atoms[0]].params["permutation"])
    if any(tuple(e.params["permutation"]) != perm for e in found.values()):
        return None
    trace = current_trace()
    return [trace.value(found[a].invars[0]) for a in atoms], perm


def _permuted(x, perm):
    from fungrad import lax

    return x if perm == tuple(range(len(perm))) else lax.transpose(x, perm)


def fft_split(x, *, fft_type, fft_lengths):
    """``fft_p`` on split values: ``x`` is a real array (RFFT) or a ``(re, im)`` pair of real
    arrays; returns a pair (FFT, IFFT, RFFT) or a real array (IRFFT). Written with lax ops and
    ``fft_c2c_p`` on interleaved arrays, for the complex-split pass."""
    from fungrad import lax

    k = len(fft_lengths)
    total = math.prod(fft_lengths)
    if fft_type in (FftType.FFT, FftType.IFFT):
        re, im = x
        nd = core.get_aval(re).ndim
        if total == 0:
            return re, im  # empty: nothing to transform
        inverse = fft_type == FftType.IFFT
        perm = tuple(range(nd))
        moved = _transposed(re, im)
        if moved is not None:  # transform the axes where they lie, transpose the result
            (re, im), perm = moved
        z = _interleave(re, im)
        for axis in range(nd - 1, nd - 1 - k, -1):
            z = _c2c_along(z, perm[axis], inverse)
        re, im = (_permuted(p, perm) for p in _planes(z))
        return (_scaled(re, 1 / total), _scaled(im, 1 / total)) if inverse else (re, im)
    if fft_type == FftType.RFFT:
        nd = core.get_aval(x).ndim
        perm = tuple(range(nd))
        moved = _transposed(x)
        if (
            moved is not None
            and moved[1][-1] != nd - 1
            and core.get_aval(moved[0][0]).shape[-1] % 2 == 0
        ):  # the transformed axis is not the source's last one, whose length is even
            (x,), perm = moved
            re, im = _rfft_column_pairs(x, perm[-1], fft_lengths[-1])
        else:
            re, im = _rfft_last(x, fft_lengths[-1])
        if k > 1 and total:
            z = _interleave(re, im)
            for axis in range(nd - 2, nd - 1 - k, -1):
                z = _c2c_along(z, perm[axis], False)
            re, im = _planes(z)
        return _permuted(re, perm), _permuted(im, perm)
    # IRFFT: inverse transforms over the leading axes, then the real inverse of the last
    re, im = x
    aval = core.get_aval(re)
    nd, n = aval.ndim, fft_lengths[-1]
    if total == 0:
        return lax.full(aval.shape[:-1] + (n,), 0, aval.dtype)
    perm = tuple(range(nd))
    moved = _transposed(re, im)
    pairs = (
        moved is not None
        and moved[1][-1] != nd - 1
        and core.get_aval(moved[0][0]).shape[-1] % 2 == 0
    )  # the transformed axis is not the source's last one, whose length is even
    if pairs:
        (re, im), perm = moved
    if k > 1:
        z = _interleave(re, im)
        for axis in range(nd - 2, nd - 1 - k, -1):
            z = _c2c_along(z, perm[axis], True)
        re, im = _planes(z)
    if pairs:
        return _permuted(_irfft_column_pairs(re, im, perm[-1], n, total // n), perm)
    return _irfft_last(re, im, n, total // n)


def _fft_split_rule(x, *, fft_type, fft_lengths):
    out = fft_split(x, fft_type=fft_type, fft_lengths=fft_lengths)
    return [Pair(*out) if isinstance(out, tuple) else out]


register_split_rule(fft_p, _fft_split_rule, complex_only=True)  # complex in or out: always split
