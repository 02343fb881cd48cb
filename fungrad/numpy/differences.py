"""Finite differences and integrals of sampled functions (jax.numpy's ``gradient``,
``trapezoid``, ``unwrap``), composed of slices and arithmetic, so they trace, differentiate
and compile.
"""

from __future__ import annotations

import numpy as np

from fungrad import numpy as fnp
from fungrad.numpy import util

__all__ = ["gradient", "trapezoid", "unwrap"]


def _slice(ndim: int, axis: int, s: slice):
    idx = [slice(None)] * ndim
    idx[axis] = s
    return tuple(idx)


def _gradient_1axis(f, axis: int, h):
    """numpy's second-order central differences inside, first-order one-sided differences
    at the ends (``edge_order=1``); ``h`` is a scalar spacing or the 1-D coordinates."""
    n, nd = f.shape[axis], f.ndim
    if n < 2:
        raise ValueError(
            f"gradient: the shape of the array along axis {axis} must be at "
            f"least 2 (edge_order=1), got {n}"
        )
    sl = lambda s: f[_slice(nd, axis, s)]  # noqa: E731
    if h.ndim == 0:
        inner = (sl(slice(2, None)) - sl(slice(None, -2))) / (2 * h)
        first = (sl(slice(1, 2)) - sl(slice(0, 1))) / h
        last = (sl(slice(-1, None)) - sl(slice(-2, -1))) / h
    else:
        if h.shape != (n,):
            raise ValueError(
                f"gradient: coordinates along axis {axis} must have length {n}, got shape {h.shape}"
            )
        dx = fnp.diff(h)
        shape = [1] * nd
        shape[axis] = n - 2 if n > 2 else 0
        dx1, dx2 = dx[:-1].reshape(shape), dx[1:].reshape(shape)
        a = -dx2 / (dx1 * (dx1 + dx2))
        b = (dx2 - dx1) / (dx1 * dx2)
        c = dx1 / (dx2 * (dx1 + dx2))
        inner = a * sl(slice(None, -2)) + b * sl(slice(1, -1)) + c * sl(slice(2, None))
        first = (sl(slice(1, 2)) - sl(slice(0, 1))) / dx[0]
        last = (sl(slice(-1, None)) - sl(slice(-2, -1))) / dx[-1]
    return fnp.concatenate([first, inner, last], axis=axis)


def gradient(f, *varargs, axis=None, edge_order=None):
    """The gradient of the sampled function ``f`` (``jnp.gradient``): central differences
    inside, one-sided at the boundaries, along every axis (a list) or ``axis``.

    ``varargs`` gives the spacing: none (1), one scalar for all axes, or one scalar or 1-D
    coordinate array per axis. ``edge_order`` may only be None or 1 (as in JAX).
    """
    if edge_order not in (None, 1):
        raise ValueError(
            f"gradient: edge_order={edge_order!r} is not supported; use "
            "edge_order=1 (the default): one-sided first-order differences at "
            "the boundaries"
        )
    util.check_arraylike("gradient", f, *varargs)
    (f,) = util.promote_dtypes_inexact(f, fun_name="gradient")
    axes = (
        tuple(range(f.ndim)) if axis is None else util.canonicalize_axes(axis, f.ndim, "gradient")
    )
    if not axes:
        return []
    if len(varargs) == 0:
        hs = [fnp.asarray(1.0, f.dtype)] * len(axes)
    elif len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        hs = [util.asarray(varargs[0]).astype(f.dtype)] * len(axes)
    elif len(varargs) == len(axes):
        hs = [util.asarray(h).astype(f.dtype) for h in varargs]
    else:
        raise TypeError(
            f"gradient: got {len(varargs)} spacings for {len(axes)} axes; pass "
            "none, one scalar, or one per axis"
        )
    out = [_gradient_1axis(f, a, h) for a, h in zip(axes, hs)]
    return out[0] if (axis is not None and np.ndim(axis) == 0) or len(out) == 1 else out


def trapezoid(y, x=None, dx=1.0, axis: int = -1):
    """The integral of samples ``y`` along ``axis`` by the composite trapezoidal rule
    (``jnp.trapezoid``; ``jax.scipy.integrate.trapezoid`` is the same function), at sample
    points ``x`` (1-D along ``axis``, or an array whose ``diff`` along ``axis`` broadcasts
    against ``y``) or with spacing ``dx`` (a scalar, or an array broadcast against ``y``).
    Integers and bools integrate as floats.

    Semantics are JAX's where they differ from NumPy's: ``dx`` takes part in dtype promotion
    (a float64 ``dx`` with x64 makes a float32 ``y``'s result float64; a complex ``dx`` a
    complex result), an ``x`` of two points is a constant spacing whatever ``y``'s length
    (``h * (sum(y) - (y[0] + y[-1]) / 2)``), and with a constant spacing ``y`` needs at
    least one sample along ``axis`` (IndexError, as JAX, where NumPy returns 0)."""
    if x is None:
        util.check_arraylike("trapezoid", y)
        (y,) = util.promote_dtypes_inexact(y, fun_name="trapezoid")
        util.canonicalize_axis(axis, y.ndim, "trapezoid")
        spacing = util.asarray(dx, fun_name="trapezoid")  # lists too, as JAX
        if spacing.ndim:  # broadcast against y, the integration axis last
            spacing = fnp.expand_dims(spacing, tuple(range(y.ndim - spacing.ndim)))
            spacing = fnp.moveaxis(spacing, axis, -1)
    else:
        util.check_arraylike("trapezoid", y, x)
        y, x = util.promote_dtypes_inexact(y, x, fun_name="trapezoid")
        util.canonicalize_axis(axis, y.ndim, "trapezoid")
        if x.ndim == 1:
            spacing = fnp.diff(x)
        else:
            spacing = fnp.moveaxis(fnp.diff(x, axis=axis), axis, -1)
    y = fnp.moveaxis(y, axis, -1)
    if spacing.ndim == 0 or spacing.shape[-1] == 1:  # one spacing for every interval
        if y.shape[-1] == 0:
            raise IndexError(
                f"trapezoid: y has no samples along axis {axis}; with a constant spacing "
                "(dx, or x of two points) at least one is needed"
            )
        h = spacing if spacing.ndim == 0 else spacing[..., 0]
        return h * (fnp.sum(y, axis=-1) - 0.5 * (y[..., 0] + y[..., -1]))
    _check_spacing(spacing.shape, y.shape, axis)
    return fnp.sum(spacing * (y[..., 1:] + y[..., :-1]), axis=-1) * 0.5


def _check_spacing(spacing_shape, y_shape, axis):
    """An error naming trapezoid's arguments unless the spacings broadcast against ``y``'s
    intervals (``y_shape`` has the integration axis last). The type is JAX's: ValueError when
    the ranks differ, TypeError when they match."""
    intervals = (*y_shape[:-1], max(y_shape[-1] - 1, 0))
    try:
        np.broadcast_shapes(spacing_shape, intervals)
    except ValueError:
        error = TypeError if len(spacing_shape) == len(intervals) else ValueError
        raise error(
            f"trapezoid: the spacings (diff(x), or dx) have shape {spacing_shape}, which does "
            f"not broadcast against y's intervals along axis {axis} (shape {intervals}, the "
            "axis last)"
        ) from None


def unwrap(p, discont=None, axis: int = -1, period=2 * np.pi):
    """``p`` with jumps larger than ``discont`` (default ``period / 2``) between neighbours
    along ``axis`` replaced by their ``period``-complement (``jnp.unwrap``): unwraps phase
    angles. Integers become floats, as in JAX."""
    util.check_arraylike("unwrap", p)
    (p,) = util.promote_dtypes_inexact(p, fun_name="unwrap")
    axis = util.canonicalize_axis(axis, p.ndim, "unwrap")
    if p.shape[axis] < 2:
        return p
    period = util.asarray(period).astype(p.dtype)
    discont = period / 2 if discont is None else util.asarray(discont).astype(p.dtype)
    half = period / 2
    dd = fnp.diff(p, axis=axis)
    ddmod = fnp.remainder(dd + half, period) - half
    ddmod = fnp.where((ddmod == -half) & (dd > 0), half, ddmod)
    correction = fnp.where(fnp.abs(dd) < discont, 0, ddmod - dd)
    first = p[_slice(p.ndim, axis, slice(0, 1))]
    rest = p[_slice(p.ndim, axis, slice(1, None))] + fnp.cumsum(correction, axis=axis)
    return fnp.concatenate([first, rest], axis=axis)
