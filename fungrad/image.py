"""``fungrad.image``: image resampling with jax.image's names and results.

``resize`` and ``scale_and_translate`` resample the chosen axes of an array one axis at a time:
each axis' resampling is a dense ``(input size, output size)`` weight matrix contracted with
that axis, so both run as products, differentiate and batch like any other program. Weights
follow JAX (jax.image): half-centred pixels (the centre of output pixel ``j`` samples the input
at ``(j + 0.5 - translation) / scale - 0.5``), a kernel stretched by ``1 / scale`` when
``antialias`` and downsampling, each output's weights normalised to sum to 1 (all zero when
their sum is under ``1000 * eps``), and outputs whose sample lies outside the input zero.
``"nearest"`` picks pixels instead (``floor((j + 0.5) * in / out)``, computed in float32 as in
JAX), keeping the input's dtype; the other methods compute in the input's inexact dtype.

Kernels (``ResizeMethod``): linear (triangle), Keys cubic (a = -0.5), the OpenCV/PyTorch cubic
(a = -0.75; with ``antialias=False`` it repeats the edge pixels instead of weighting outside
samples zero), Lanczos of radius 3 and 5, and area (each input pixel weighted by its overlap
with the output pixel's footprint).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

import numpy as np

import fungrad.numpy as fnp
from fungrad import lax
from fungrad.numpy import util

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]


class ResizeMethod(enum.Enum):
    """How ``resize`` and ``scale_and_translate`` interpolate (see the module docstring)."""

    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(s: str) -> ResizeMethod:
        """The method a name stands for ("bilinear" is LINEAR, "bicubic" CUBIC, ...)."""
        method = _NAMES.get(s)
        if method is None:
            raise ValueError(
                f'Unknown resize method "{s}": use one of {", ".join(map(repr, _NAMES))} or a '
                "fungrad.image.ResizeMethod"
            )
        return method


_NAMES = {
    "nearest": ResizeMethod.NEAREST,
    "linear": ResizeMethod.LINEAR,
    "bilinear": ResizeMethod.LINEAR,
    "trilinear": ResizeMethod.LINEAR,
    "triangle": ResizeMethod.LINEAR,
    "lanczos3": ResizeMethod.LANCZOS3,
    "lanczos5": ResizeMethod.LANCZOS5,
    "cubic": ResizeMethod.CUBIC,
    "bicubic": ResizeMethod.CUBIC,
    "tricubic": ResizeMethod.CUBIC,
    "cubic-pytorch": ResizeMethod.CUBIC_PYTORCH,
    "bicubic-pytorch": ResizeMethod.CUBIC_PYTORCH,
    "area": ResizeMethod.AREA,
}


def _triangle(x):
    return fnp.maximum(0.0, 1.0 - fnp.abs(x))


def _cubic(a: float):
    """The cubic convolution kernel with parameter ``a`` (Keys: -0.5; OpenCV/PyTorch: -0.75)."""

    def kernel(x):
        near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0  # |x| < 1
        far = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a  # 1 <= |x| < 2
        return fnp.where(x >= 2.0, 0.0, fnp.where(x >= 1.0, far, near))

    return kernel


def _lanczos(radius: float):
    def kernel(x):
        y = radius * fnp.sin(np.pi * x) * fnp.sin(np.pi * x / radius)
        safe = fnp.where(x != 0, np.pi**2 * x * x, 1.0)
        out = fnp.where(x > 1e-3, y / safe, 1.0)
        return fnp.where(x > radius, 0.0, out)

    return kernel


#: method -> (kernel radius, kernel of the distance to the sample; None for AREA)
_KERNELS = {
    ResizeMethod.LINEAR: (1, _triangle),
    ResizeMethod.LANCZOS3: (3, _lanczos(3.0)),
    ResizeMethod.LANCZOS5: (5, _lanczos(5.0)),
    ResizeMethod.CUBIC: (2, _cubic(-0.5)),
    ResizeMethod.CUBIC_PYTORCH: (2, _cubic(-0.75)),
    ResizeMethod.AREA: (1, None),
}

_F32_EPS = float(np.finfo(np.float32).eps)


def _weights(n_in: int, n_out: int, scale, translation, method, antialias: bool):
    """The ``(n_in, n_out)`` weight matrix resampling one axis (see the module docstring);
    ``scale`` and ``translation`` may be traced scalars."""
    radius, kernel = _KERNELS[method]
    dtype = fnp.result_type(scale, translation)
    inv_scale = 1.0 / scale
    sample = (fnp.arange(n_out, dtype=dtype) + 0.5) * inv_scale - translation * inv_scale - 0.5
    # CUBIC_PYTORCH without antialiasing repeats the edge: samples `radius` pixels past each
    # edge are weighted, then their weight moves onto the edge pixel
    edge = method is ResizeMethod.CUBIC_PYTORCH and not antialias
    k = radius if edge else 0
    taps = fnp.arange(-k, n_in + k, dtype=dtype)
    if kernel is None:  # AREA: overlap of [j, j + 1) with the output pixel's footprint
        left = fnp.arange(n_out, dtype=dtype) * inv_scale - translation * inv_scale
        right = left + inv_scale
        w = fnp.maximum(
            0.0,
            fnp.minimum(right[None, :], taps[:, None] + 1.0)
            - fnp.maximum(left[None, :], taps[:, None]),
        )
    else:
        stretch = fnp.maximum(inv_scale, 1.0) if antialias else 1.0
        w = kernel(fnp.abs(sample[None, :] - taps[:, None]) / stretch)
    if edge:
        w = (
            fnp.zeros((n_in, n_out), w.dtype)
            .at[np.clip(np.arange(-k, n_in + k), 0, n_in - 1)]
            .add(w)
        )
    total = fnp.sum(w, axis=0, keepdims=True)
    w = fnp.where(fnp.abs(total) > 1000.0 * _F32_EPS, w / fnp.where(total != 0, total, 1.0), 0.0)
    if not edge:  # outputs whose sample falls outside the input get nothing
        inside = (sample >= -0.5) & (sample <= n_in - 0.5)
        w = fnp.where(inside[None, :], w, 0.0)
    return w


def _resample(x, shape, dims, scales, translations, method, antialias: bool, precision):
    """``x`` with each axis of ``dims`` resampled to ``shape`` (one product per axis)."""
    for d, scale, translation in zip(dims, scales, translations):
        w = _weights(x.shape[d], shape[d], scale, translation, method, antialias).astype(x.dtype)
        y = fnp.tensordot(x, w, axes=([d], [0]), precision=precision)
        x = fnp.moveaxis(y, -1, d)
    return x


def _method(method) -> ResizeMethod:
    if isinstance(method, str):
        return ResizeMethod.from_string(method)
    if not isinstance(method, ResizeMethod):
        raise TypeError(
            f"image: method must be a string or a fungrad.image.ResizeMethod, got {method!r}"
        )
    return method


def _check_shape(fn: str, image, shape) -> tuple[int, ...]:
    shape = tuple(int(s) for s in shape)
    if len(shape) != np.ndim(image):
        raise ValueError(
            f"{fn}: shape must have length equal to the number of dimensions of the image; "
            f"{shape} vs {np.shape(image)}: give every axis its output size (batch and "
            "channel axes keep theirs)"
        )
    if any(s < 0 for s in shape):
        raise ValueError(f"{fn}: output sizes must be non-negative, got {shape}")
    return shape


def _resize_nearest(x, shape):
    """Pick input pixel ``floor((j + 0.5) * in / out)`` along each axis whose size changes."""
    for d, (m, n) in enumerate(zip(x.shape, shape)):
        if m == n:
            continue
        picks = np.floor(((np.arange(n, dtype=np.float32) + 0.5) * m / n).astype(np.float32))
        x = fnp.take(x, picks.astype(np.int32), axis=d)
    return x


def resize(
    image, shape: Sequence[int], method, antialias: bool = True, precision=lax.Precision.HIGHEST
):
    """``image`` resampled to ``shape`` (every axis: batch and channel axes keep their size) by
    ``method`` (a :class:`ResizeMethod` or its name: "nearest", "linear"/"bilinear",
    "cubic"/"bicubic", "cubic-pytorch", "lanczos3", "lanczos5", "area"), as
    ``jax.image.resize``. ``antialias`` widens the kernel when downsampling; "nearest"
    ignores it and keeps the input's dtype.

    Example:
        >>> resize(fnp.ones((4, 4, 3)), (8, 8, 3), "bilinear").shape   # (8, 8, 3)
    """
    util.check_arraylike("resize", image)
    image = util.asarray(image)
    shape = _check_shape("resize", image, shape)
    method = _method(method)
    if method is ResizeMethod.NEAREST:
        return _resize_nearest(image, shape)
    (image,) = util.promote_dtypes_inexact(image)
    if method is ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    # axes whose size is kept are left alone: every kernel interpolates (identity in, identity
    # out)
    dims = [d for d in range(image.ndim) if image.shape[d] != shape[d]]
    scales = [1.0 if shape[d] == 0 else shape[d] / image.shape[d] for d in dims]
    return _resample(image, shape, dims, scales, [0.0] * len(dims), method, antialias, precision)


def scale_and_translate(
    image,
    shape: Sequence[int],
    spatial_dims: Sequence[int],
    scale,
    translation,
    method,
    antialias: bool = True,
    precision=lax.Precision.HIGHEST,
):
    """``image`` resampled to ``shape`` under the warp ``x -> x * scale + translation`` of
    the axes ``spatial_dims`` (pixel centres at ``i + 0.5``; an output whose sample lies
    outside the input is 0), as ``jax.image.scale_and_translate``. ``scale`` and
    ``translation`` hold one value per spatial axis and may be traced (differentiable).
    "nearest" is not supported here (use :func:`resize`), as in JAX.

    Example (``torch``'s ``align_corners=True`` for an axis of m -> n pixels):
        >>> s = (n - 1) / (m - 1); scale_and_translate(x, (n,), (0,), [s], [0.5 * (1 - s)],
        ...                                            "linear")
    """
    util.check_arraylike("scale_and_translate", image)
    image = util.asarray(image)
    shape = _check_shape("scale_and_translate", image, shape)
    method = _method(method)
    if method is ResizeMethod.NEAREST:
        raise ValueError(
            "scale_and_translate: nearest neighbor resampling is not supported (as in JAX); "
            'use fungrad.image.resize(image, shape, "nearest") or another method'
        )
    dims = [util.canonicalize_axis(d, image.ndim) for d in spatial_dims]
    scale, translation = fnp.asarray(scale), fnp.asarray(translation)
    if scale.shape != (len(dims),) or translation.shape != (len(dims),):
        raise ValueError(
            f"scale_and_translate: scale and translation need one value per spatial dimension "
            f"({len(dims)} for spatial_dims={tuple(spatial_dims)}), got shapes {scale.shape} "
            f"and {translation.shape}"
        )
    (image,) = util.promote_dtypes_inexact(image)
    scale, translation = util.promote_dtypes_inexact(scale, translation)
    if method is ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    scales = [scale[i] for i in range(len(dims))]
    translations = [translation[i] for i in range(len(dims))]
    return _resample(image, shape, dims, scales, translations, method, antialias, precision)
