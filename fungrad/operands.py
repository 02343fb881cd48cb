"""Turning a user's value into an operand: an Array or a tracer.

Every public entry point (lax's wrappers, the transforms, ``ClosedJaxpr.__call__``,
``device_put``) converts its arguments the same way, so the conversion lives below all of them:
numpy values get their canonical dtype, Python scalars become weakly typed 0-d Arrays, and
anything else is a TypeError naming the argument.
"""

from __future__ import annotations

import numpy as np

from fungrad import core, dtypes
from fungrad.array import Array, is_concrete_array

__all__ = ["array_leaf", "operand", "scalar"]


def operand(x, name: str = "operand"):
    """An Array or tracer for ``x``: numpy values get their canonical dtype, Python scalars
    become weak 0-d Arrays. Anything else is a TypeError naming the argument."""
    if type(x) is Array or isinstance(x, core.Tracer):
        return x
    if isinstance(x, (np.ndarray, np.generic)):
        dt = dtypes.canonicalize_dtype(x.dtype)
        # A copy: Arrays are immutable and freeze their buffer, which must not be the caller's.
        return Array(np.array(x, dtype=dt))
    if isinstance(x, (bool, int, float, complex)):
        dt = dtypes.python_scalar_dtype(x)
        return Array(scalar(x, dt), not isinstance(x, bool))
    if is_concrete_array(x):  # an Array subclass: a GpuArray (fungrad/devices.py)
        return x
    raise TypeError(f"{name}: expected an array, got a value of type {type(x).__name__}: {x!r:.60}")


def scalar(x, dt: np.dtype):
    """The Python scalar ``x`` as a numpy scalar of ``dt``; an OverflowError for an int that
    ``dt`` cannot hold, a TypeError for a complex number and a real ``dt``."""
    if isinstance(x, complex) and dtypes.kind(dt) != "c":
        raise TypeError(
            f"cannot convert the Python complex {x} to dtype {dt.name} (the imaginary part "
            "would be lost); use a complex dtype, or take lax.real/lax.imag explicitly"
        )
    if isinstance(x, int) and dtypes.kind(dt) in "iu":
        info = np.iinfo(dt)
        if not info.min <= x <= info.max:
            raise OverflowError(f"Python int {x} is too large to convert to {dt.name}")
    return dt.type(x)


def array_leaf(x, name: str):
    """A pytree leaf a transform differentiates or maps, as an Array or tracer: what
    :func:`operand` gives, also for numpy values whose conversion to the canonical dtype
    overflows (quietly, as ``jnp.asarray``) and for objects with ``__array__``. A TypeError
    naming ``name`` for anything else (strings, object arrays...)."""
    if type(x) is Array or isinstance(x, core.Tracer) or is_concrete_array(x):
        return x
    if isinstance(x, (np.ndarray, np.generic)):
        if dtypes.kind(x.dtype) not in "biufc":
            raise TypeError(f"{name}: numpy arrays of dtype {x.dtype} are not supported")
        with np.errstate(all="ignore"):
            return operand(x, name)
    if isinstance(x, (bool, int, float, complex)):
        return operand(x, name)
    if hasattr(x, "__array__") and not isinstance(x, (str, bytes)):
        return array_leaf(np.asarray(x), name)
    raise TypeError(f"{name}: cannot convert a value of type {type(x).__name__} to an array")
