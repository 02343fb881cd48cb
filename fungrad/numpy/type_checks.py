"""Type and kind predicates of jax.numpy: ``isscalar``, ``iterable``, ``isrealobj``,
``iscomplexobj``, ``isreal``, ``iscomplex``, ``isdtype``, and the real-valued ``angle`` and
``spacing``.

fungrad has no complex dtypes, so every array is real: ``isreal`` is all True, ``iscomplex``
all False, and ``angle`` is 0 or pi.
"""

from __future__ import annotations

import numpy as np

from fungrad import core
from fungrad import numpy as fnp
from fungrad.array import Array
from fungrad.numpy import util

__all__ = [
    "angle",
    "iscomplex",
    "iscomplexobj",
    "isdtype",
    "isreal",
    "isrealobj",
    "isscalar",
    "iterable",
    "spacing",
]


def isscalar(element) -> bool:
    """Whether ``element`` is a scalar (``jnp.isscalar``): Python and numpy scalars, and —
    unlike numpy — 0-d arrays (fungrad Arrays, tracers, numpy arrays), as in JAX."""
    if isinstance(element, (Array, core.Tracer, np.ndarray)):
        return element.ndim == 0
    return bool(np.isscalar(element))


def iterable(y) -> bool:
    """Whether ``iter(y)`` works (``jnp.iterable``): False for 0-d arrays."""
    try:
        iter(y)
    except TypeError:
        return False
    return True


def iscomplexobj(x) -> bool:
    """Whether ``x`` has a complex type (``jnp.iscomplexobj``): only Python/numpy complex
    values can, fungrad arrays are always real."""
    if isinstance(x, (Array, core.Tracer)):
        return False
    dt = getattr(x, "dtype", None)
    if dt is not None:
        return np.dtype(dt).kind == "c"
    return isinstance(x, complex)


def isrealobj(x) -> bool:
    """``not iscomplexobj(x)`` (``jnp.isrealobj``)."""
    return not iscomplexobj(x)


def isreal(x):
    """Elementwise "has no imaginary part" (``jnp.isreal``): all True for fungrad's real
    arrays."""
    util.check_arraylike("isreal", x)
    return fnp.ones_like(util.asarray(x, fun_name="isreal"), dtype=bool)


def iscomplex(x):
    """Elementwise "has a non-zero imaginary part" (``jnp.iscomplex``): all False for
    fungrad's real arrays."""
    util.check_arraylike("iscomplex", x)
    return fnp.zeros_like(util.asarray(x, fun_name="iscomplex"), dtype=bool)


_KINDS = {
    "bool": lambda d: d.kind == "b",
    "signed integer": lambda d: d.kind == "i",
    "unsigned integer": lambda d: d.kind == "u",
    "integral": lambda d: d.kind in "iu",
    "real floating": lambda d: d.kind == "f",
    "complex floating": lambda d: d.kind == "c",
    "numeric": lambda d: d.kind in "iufc",
}


def isdtype(dtype, kind) -> bool:
    """Whether ``dtype`` is of ``kind`` (array API ``isdtype``): a kind name (``"bool"``,
    ``"signed integer"``, ``"unsigned integer"``, ``"integral"``, ``"real floating"``,
    ``"complex floating"``, ``"numeric"``), a dtype, or a tuple of these."""
    try:
        d = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"isdtype: expected a dtype, got {dtype!r}") from None
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if isinstance(k, str):
            if k not in _KINDS:
                raise ValueError(
                    f"isdtype: unknown kind {k!r}; use one of {sorted(_KINDS)} or a dtype"
                )
            if _KINDS[k](d):
                return True
        else:
            try:
                if d == np.dtype(k):
                    return True
            except TypeError:
                raise TypeError(
                    f"isdtype: kind must be a kind name or a dtype, got {k!r}"
                ) from None
    return False


def angle(z, deg: bool = False):
    """The argument of ``z`` (``jnp.angle``): for real input 0 where ``z >= 0`` (also +0.0) and
    pi where ``z < 0`` or ``z`` is -0.0, as ``arctan2(0, z)``; degrees with ``deg=True``."""
    util.check_arraylike("angle", z)
    (x,) = util.promote_dtypes_inexact(z, fun_name="angle")
    out = fnp.arctan2(fnp.zeros_like(x), x)
    return out * (180 / np.pi) if deg else out


def spacing(x, /):
    """The distance from ``x`` to the next representable value away from zero, signed like
    ``x`` (``jnp.spacing``, numpy's ``spacing``)."""
    util.check_arraylike("spacing", x)
    (x,) = util.promote_dtypes_inexact(x, fun_name="spacing")
    away = fnp.where(fnp.signbit(x), -np.inf, np.inf).astype(x.dtype)
    return fnp.nextafter(x, away) - x
