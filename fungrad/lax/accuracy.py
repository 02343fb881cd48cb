"""JAX's accuracy requests for unary functions: :class:`Tolerance` and :class:`AccuracyMode`.

``lax.exp(x, accuracy=...)`` (also exp2, expm1, log, log1p, tanh, logistic, sin, cos, tan,
sqrt, rsqrt, cbrt) takes one of these in JAX, where XLA may pick among several
implementations of the function by the requested accuracy, and otherwise uses its default one.
fungrad has one implementation of each function (correctly rounded or within a few ulp of the
float64 value), so the request is checked and that implementation is used, which is what JAX's
CPU backend does too (its results with and without ``accuracy`` are the same).
"""

from __future__ import annotations

import enum
import math

__all__ = ["Tolerance", "AccuracyMode"]


class Tolerance:
    """Tolerances for a unary function's implementation (``jax.lax.Tolerance``): an absolute
    ``atol``, a relative ``rtol`` and/or a number of ``ulps``; all non-negative, at least one
    positive."""

    def __init__(self, atol: float = 0.0, rtol: float = 0.0, ulps: int = 0):
        values = {"atol": atol, "rtol": rtol, "ulps": ulps}
        for name, v in values.items():
            if not isinstance(v, (int, float)) or isinstance(v, bool) or math.isnan(v):
                raise TypeError(f"Tolerance: {name} must be a number, got {v!r}")
        if atol < 0 or rtol < 0 or ulps < 0:
            raise ValueError(
                f"Tolerance: tolerances must be non-negative, got atol={atol}, "
                f"rtol={rtol}, ulps={ulps}"
            )
        if atol == 0 and rtol == 0 and ulps == 0:
            raise ValueError("Tolerance: at least one of atol, rtol or ulps must be set (positive)")
        self.atol, self.rtol, self.ulps = atol, rtol, ulps

    def __repr__(self):
        return f"Tolerance(atol={self.atol}, rtol={self.rtol}, ulps={self.ulps})"

    def __eq__(self, other):
        return isinstance(other, Tolerance) and (self.atol, self.rtol, self.ulps) == (
            other.atol,
            other.rtol,
            other.ulps,
        )

    def __hash__(self):
        return hash((Tolerance, self.atol, self.rtol, self.ulps))


class AccuracyMode(enum.Enum):
    """Accuracy mode of a unary function's implementation (``jax.lax.AccuracyMode``)."""

    HIGHEST = 1
    DEFAULT = 2


def check_accuracy(name: str, accuracy) -> None:
    """Raise a TypeError unless ``accuracy`` is None, a :class:`Tolerance` or an
    :class:`AccuracyMode`."""
    if accuracy is not None and not isinstance(accuracy, (Tolerance, AccuracyMode)):
        raise TypeError(
            f"{name}: accuracy must be None, a lax.Tolerance or a "
            f"lax.AccuracyMode, got {accuracy!r}"
        )
