"""Complex numbers in fungrad.numpy: the parts of a value (``real``, ``imag``, ``conj``,
``conjugate``, ``angle``) and the predicates on them (``iscomplexobj``, ``isrealobj``,
``iscomplex``, ``isreal``, ``real_if_close``), as jax.numpy has them.

A real value is its own real part and conjugate (``real`` and ``conj`` of a float32 array give
it back, ``imag`` gives zeros of its dtype); a complex one goes through ``lax.real``,
``lax.imag`` and ``lax.conj``, so everything here is traceable and differentiable, except
``real_if_close``, whose result dtype depends on the values (numpy's function; JAX has none).
"""

from __future__ import annotations

import warnings

import numpy as np

from fungrad import dtypes, lax
from fungrad.array import Array
from fungrad.numpy import util

__all__ = [
    "angle",
    "conj",
    "conjugate",
    "imag",
    "iscomplex",
    "iscomplexobj",
    "isreal",
    "isrealobj",
    "real",
    "real_if_close",
]


def _array(x, fun_name: str):
    util.check_arraylike(fun_name, x)
    return util.asarray(x, fun_name=fun_name)


def _is_complex(x) -> bool:
    return dtypes.kind(x.dtype) == "c"


def _zeros_like(x):
    """Zeros of ``x``'s shape, dtype and weak type."""
    with np.errstate(all="ignore"):
        zero = Array(np.zeros((), x.dtype), x.weak_type)
    return util.broadcast_to_shape(zero, x.shape)


def real(val, /):
    """The real part of ``val`` (``jnp.real``): a complex array's real dtype (complex64 ->
    float32), a real array itself."""
    x = _array(val, "real")
    return lax.real(x) if _is_complex(x) else x


def imag(val, /):
    """The imaginary part of ``val`` (``jnp.imag``): a complex array's real dtype, zeros of a
    real array's own dtype."""
    x = _array(val, "imag")
    return lax.imag(x) if _is_complex(x) else _zeros_like(x)


def conjugate(x, /):
    """The complex conjugate (``jnp.conjugate``); a real array is returned unchanged."""
    x = _array(x, "conjugate")
    return lax.conj(x) if _is_complex(x) else x


def conj(x, /):
    """Alias of :func:`conjugate`."""
    x = _array(x, "conj")
    return lax.conj(x) if _is_complex(x) else x


def angle(z, deg: bool = False):
    """The argument of ``z`` in radians, ``atan2(imag(z), real(z))`` (``jnp.angle``), in
    degrees with ``deg=True``. A complex input gives its real dtype; a real input gives 0 where
    ``z >= 0`` (also +0.0) and pi where ``z < 0`` or ``z`` is -0.0; integers give floats."""
    x = _array(z, "angle")
    if _is_complex(x):
        re, im = lax.real(x), lax.imag(x)
    else:
        # As JAX: integers and 0-d floats are computed in the default float dtype, strongly
        # typed (angle(3.0) is a float32, not weak).
        if x.ndim == 0 or not dtypes.is_inexact(x.dtype):
            re = lax.convert_element_type(x, dtypes.default_float_dtype(), False)
        else:
            re = lax.convert_element_type(x, x.dtype, False) if x.weak_type else x
        im = _zeros_like(re)
    out = lax.atan2(im, re)
    if deg:
        with np.errstate(all="ignore"):
            factor = Array(np.asarray(180 / np.pi, out.dtype), True)
        out = lax.mul(out, factor)
    return out


def iscomplexobj(x) -> bool:
    """Whether ``x`` has a complex dtype (``jnp.iscomplexobj``): complex arrays and tracers,
    numpy complex values and Python complex numbers; None is not."""
    if x is None:
        return False
    dt = getattr(x, "dtype", None)
    if dt is not None:
        try:
            return dtypes.kind(np.dtype(dt)) == "c"
        except TypeError:
            return False
    if isinstance(x, complex):
        return True
    if isinstance(x, (bool, int, float)):
        return False
    return dtypes.kind(util.asarray(x, fun_name="iscomplexobj").dtype) == "c"


def isrealobj(x) -> bool:
    """``not iscomplexobj(x)`` (``jnp.isrealobj``)."""
    return not iscomplexobj(x)


def isreal(x):
    """Elementwise "the imaginary part is zero" (``jnp.isreal``): all True for real arrays."""
    a = _array(x, "isreal")
    if _is_complex(a):
        im = lax.imag(a)
        return lax.eq(im, _zeros_like(im))
    return util.broadcast_to_shape(Array(np.bool_(True)), a.shape)


def iscomplex(x):
    """Elementwise "the imaginary part is not zero" (``jnp.iscomplex``): all False for real
    arrays."""
    a = _array(x, "iscomplex")
    if _is_complex(a):
        im = lax.imag(a)
        return lax.ne(im, _zeros_like(im))
    return util.broadcast_to_shape(Array(np.bool_(False)), a.shape)


def real_if_close(a, tol=100):
    """The real part of ``a`` when every imaginary part is below ``tol`` machine epsilons of its
    dtype (``tol > 1``; ``tol <= 1`` is an absolute tolerance), else ``a`` unchanged (numpy's
    ``real_if_close``). The result's dtype depends on the values, so ``a`` must be concrete:
    under ``jit`` this is a ConcretizationTypeError (use ``fnp.real`` where the imaginary part
    is known to vanish)."""
    x = _array(a, "real_if_close")
    if not _is_complex(x):
        return x
    tol = float(tol)
    if tol > 1:
        tol = tol * float(np.finfo(dtypes.real_dtype(x.dtype)).eps)
    im = util.concrete_or_error(
        lax.imag(x), "real_if_close (whether the result is real depends on the values)"
    )
    return lax.real(x) if bool(np.all(np.abs(im) < tol)) else x


def real_for_cast(x, dtype: np.dtype, fun_name: str = "astype"):
    """``x`` ready to be cast to ``dtype``: a complex ``x`` cast to bool becomes ``x != 0``
    (either part nonzero, as ``jnp.astype``); cast to a real dtype it keeps its real part,
    with JAX's DeprecationWarning (JAX will make it a ValueError)."""
    if dtypes.kind(x.dtype) == "c" and dtypes.kind(np.dtype(dtype)) == "b":
        return lax.ne(x, lax.full_like(x, 0))
    if dtypes.kind(x.dtype) == "c" and dtypes.kind(np.dtype(dtype)) != "c":
        warnings.warn(
            f"{fun_name}: casting from complex to real dtypes will soon raise a ValueError "
            "(as in JAX). Please first use fnp.real or fnp.imag to take the real/imaginary "
            "component of your input.",
            DeprecationWarning,
            stacklevel=3,
        )
        return lax.real(x)
    return x
