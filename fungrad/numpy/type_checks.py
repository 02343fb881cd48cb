"""Type and kind predicates of jax.numpy: ``isscalar``, ``iterable``, ``isdtype``, and
``spacing``. The complex predicates (``iscomplexobj``, ``isreal``...) and ``angle`` live in
``complex_parts.py``.
"""

from __future__ import annotations

import numpy as np

from fungrad import core, dtypes
from fungrad import numpy as fnp
from fungrad.array import Array
from fungrad.numpy import util

__all__ = [
    "isdtype",
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


_KINDS = {
    "bool": lambda d: dtypes.kind(d) == "b",
    "signed integer": lambda d: dtypes.kind(d) == "i",
    "unsigned integer": lambda d: dtypes.kind(d) == "u",
    "integral": lambda d: dtypes.kind(d) in "iu",
    "real floating": lambda d: dtypes.kind(d) == "f",
    "complex floating": lambda d: dtypes.kind(d) == "c",
    "numeric": lambda d: dtypes.kind(d) in "iufc",
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


def spacing(x, /):
    """The distance from ``x`` to the next representable value away from zero, signed like
    ``x`` (``jnp.spacing``, numpy's ``spacing``)."""
    util.check_arraylike("spacing", x)
    (x,) = util.promote_dtypes_inexact(x, fun_name="spacing")
    away = fnp.where(fnp.signbit(x), -np.inf, np.inf).astype(x.dtype)
    return fnp.nextafter(x, away) - x
