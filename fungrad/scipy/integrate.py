"""``fungrad.scipy.integrate``: ``trapezoid``, jax.scipy.integrate's one function.

The composite trapezoidal rule along ``axis``: the sum over neighbouring samples of
``spacing * (y[i] + y[i + 1]) / 2``. The spacings are ``diff(x)`` when sample points ``x`` are
given (1-D along ``axis``, or an array whose ``diff`` along ``axis`` broadcasts against ``y``),
else ``dx`` (a scalar, or an array broadcast against ``y``). Where the spacing is the same for
every interval (a scalar ``dx``, or an extent of 1 along the axis) the rule is
``h * (sum(y) - (y[0] + y[-1]) / 2)``, one multiply per result.

Semantics are JAX's, where they differ from NumPy's: ``dx`` takes part in dtype promotion
(a float64 ``dx`` with x64 makes a float32 ``y``'s result float64; a complex ``dx`` a complex
result), an ``x`` of two points is a constant spacing whatever ``y``'s length, and with a
constant spacing ``y`` needs at least one sample along ``axis`` (IndexError, as JAX, where
NumPy returns 0).
"""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad.numpy import util

__all__ = ["trapezoid"]


def trapezoid(y, x=None, dx=1.0, axis: int = -1):
    """The integral of samples ``y`` along ``axis`` by the composite trapezoidal rule
    (``jax.scipy.integrate.trapezoid``), at sample points ``x`` or with spacing ``dx``.
    Integers and bools integrate as floats."""
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
