"""The binary (and one unary) functions that JAX exposes as ``jnp.ufunc`` objects.

In JAX 0.10.2 ``jnp.add``, ``subtract``, ``multiply``, ``negative``, ``maximum``, ``minimum``,
``logical_and``/``or``/``xor``, ``bitwise_and``/``or``/``xor``, ``logaddexp`` and
``logaddexp2`` are :class:`~fungrad.numpy.ufunc_objects.ufunc` instances, so programs call
``jnp.add.reduce(x)``, ``jnp.multiply.outer(a, b)``, ``jnp.add.at(x, idx, 1, inplace=False)``
or ``jnp.maximum.accumulate(x)``. Calling one is calling the elementwise function of
fungrad.numpy.ufuncs. Where JAX has a fast path the method is the matching reduction
(``add.reduce`` is ``sum``, ``add.accumulate`` ``cumsum``, ``add.at`` ``x.at[i].add``, ...);
the others use the ufunc's generic, sequential methods, which give the same values.
"""

from __future__ import annotations

import numpy as np

from fungrad import lax
from fungrad.numpy import logic, reductions, ufuncs, util
from fungrad.numpy.ufunc_objects import ufunc

__all__ = [
    "add",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "logaddexp",
    "logaddexp2",
    "logical_and",
    "logical_or",
    "logical_xor",
    "maximum",
    "minimum",
    "multiply",
    "negative",
    "subtract",
]


def _make(func, nin: int, identity=None, **methods) -> ufunc:
    u = ufunc(func, nin, 1, name=func.__name__, identity=identity, call=func, **methods)
    u.__doc__ = func.__doc__
    return u


def _as_int_for_bool(a, b):
    """JAX's add.at / multiply.at of a bool array: computed in int32, cast back to bool."""
    return a.astype(np.int32), util.asarray(b).astype(bool).astype(np.int32)


def _add_at(a, indices, b):
    a = util.asarray(a)
    if a.dtype == np.bool_:
        a32, b32 = _as_int_for_bool(a, b)
        return a32.at[indices].add(b32).astype(bool)
    return a.at[indices].add(b)


def _multiply_at(a, indices, b):
    a = util.asarray(a)
    if a.dtype == np.bool_:
        a32, b32 = _as_int_for_bool(a, b)
        return a32.at[indices].multiply(b32).astype(bool)
    return a.at[indices].multiply(b)


def _subtract_at(a, indices, b):
    return util.asarray(a).at[indices].subtract(b)


def _sum(a, axis, dtype, out, keepdims, initial, where):
    return reductions.sum(a, axis, dtype, out, keepdims, initial, where)


def _prod(a, axis, dtype, out, keepdims, initial, where):
    return reductions.prod(a, axis, dtype, out, keepdims, initial, where)


def _cumsum(a, axis, dtype, out):
    return reductions.cumsum(a, axis, dtype, out)


def _cumprod(a, axis, dtype, out):
    return reductions.cumprod(a, axis, dtype, out)


def _extremum(reduce_fn):
    def reduce(a, axis, dtype, out, keepdims, initial, where):
        x = util.asarray(a)
        if dtype is not None:
            x = x.astype(dtype)
        return reduce_fn(x, axis, None, keepdims, initial, where)

    return reduce


def _monoid(name: str, lax_reduce, to_bool: bool):
    """A reduction by a lax monoid (bitwise or logical and/or/xor) over ``axis`` (None: all);
    ``where`` never reaches it (ufunc.reduce refuses it)."""

    def reduce(a, axis, dtype, out, keepdims, initial, where):
        x = util.asarray(a)
        if to_bool:
            x = x.astype(bool)
        elif not (np.issubdtype(x.dtype, np.integer) or x.dtype == np.bool_):
            raise TypeError(f"{name}.reduce requires integer or boolean input, got {x.dtype}")
        if dtype is not None:
            x = x.astype(dtype)
        axes = tuple(range(x.ndim)) if axis is None else util.canonicalize_axes(axis, x.ndim, name)
        r = lax_reduce(x, axes) if axes else x
        if initial is not None:
            r = _MONOID_OPS[name](r, util.asarray(initial).astype(r.dtype))
        if keepdims:
            r = lax.expand_dims(r, axes)
        return r

    return reduce


_MONOID_OPS = {
    "bitwise_and": logic.bitwise_and,
    "bitwise_or": logic.bitwise_or,
    "bitwise_xor": logic.bitwise_xor,
    "logical_and": logic.logical_and,
    "logical_or": logic.logical_or,
    "logical_xor": logic.logical_xor,
}

add = _make(ufuncs.add, 2, 0, reduce=_sum, accumulate=_cumsum, at=_add_at)
multiply = _make(ufuncs.multiply, 2, 1, reduce=_prod, accumulate=_cumprod, at=_multiply_at)
subtract = _make(ufuncs.subtract, 2, None, at=_subtract_at)
negative = _make(ufuncs.negative, 1)
maximum = _make(ufuncs.maximum, 2, None, reduce=_extremum(reductions.max))
minimum = _make(ufuncs.minimum, 2, None, reduce=_extremum(reductions.min))
bitwise_and = _make(logic.bitwise_and, 2, -1, reduce=_monoid("bitwise_and", lax.reduce_and, False))
bitwise_or = _make(logic.bitwise_or, 2, 0, reduce=_monoid("bitwise_or", lax.reduce_or, False))
bitwise_xor = _make(logic.bitwise_xor, 2, 0, reduce=_monoid("bitwise_xor", lax.reduce_xor, False))
logical_and = _make(logic.logical_and, 2, True, reduce=_monoid("logical_and", lax.reduce_and, True))
logical_or = _make(logic.logical_or, 2, False, reduce=_monoid("logical_or", lax.reduce_or, True))
logical_xor = _make(
    logic.logical_xor, 2, False, reduce=_monoid("logical_xor", lax.reduce_xor, True)
)
logaddexp = _make(ufuncs.logaddexp, 2, -np.inf)
logaddexp2 = _make(ufuncs.logaddexp2, 2, -np.inf)
