"""Small lax functions real JAX programs call: ``broadcast_like``, ``stage``, ``scaled_dot``,
and ``betainc`` (JAX's lax name for :func:`fungrad.lax.regularized_incomplete_beta`).

Each is a composition of existing primitives, so it traces, differentiates, batches and
compiles like user code.
"""

from __future__ import annotations

import numpy as np

from fungrad import dtypes
from fungrad.core import get_aval
from fungrad.lax.special import regularized_incomplete_beta
from fungrad.lax.utils import operand

__all__ = ["broadcast_like", "stage", "scaled_dot", "betainc"]

betainc = regularized_incomplete_beta  # jax.lax.betainc: the same function under JAX's name


def _shape_of(x):
    shape = getattr(x, "shape", None)
    return tuple(shape) if shape is not None else tuple(np.shape(x))


def broadcast_like(arr, like_arr):
    """``arr`` broadcast (numpy's rules: trailing dimensions aligned, size 1 stretched) to the
    shape of ``like_arr``, keeping ``arr``'s dtype (``jax.lax.broadcast_like``)."""
    from fungrad import lax

    x = operand(arr, "broadcast_like")
    shape = _shape_of(like_arr)
    xs = get_aval(x).shape
    lead = len(shape) - len(xs)
    if lead < 0 or any(s not in (1, t) for s, t in zip(xs, shape[lead:])):
        raise ValueError(
            f"broadcast_like: cannot broadcast an array of shape {xs} to the "
            f"shape {shape} of like_arr (numpy's broadcasting rules)"
        )
    squeeze = tuple(i for i, (s, t) in enumerate(zip(xs, shape[lead:])) if s == 1 and t != 1)
    if squeeze:
        x = lax.reshape(x, tuple(s for i, s in enumerate(xs) if i not in squeeze))
    dims = tuple(lead + i for i in range(len(xs)) if i not in squeeze)
    return lax.broadcast_in_dim(x, shape, dims)


def stage(x, /):
    """``x`` as an array (``jax.lax.stage``): logically the identity; a Python scalar or
    numpy value becomes an Array (weakly typed for Python scalars), a traced value stays
    the traced value."""
    return operand(x, "stage")


def _expand_scale(fname, x, scale, contracting, what):
    """``scale`` repeated along the contracting dimensions up to ``x``'s shape."""
    import fungrad.numpy as fnp

    xs, ss = get_aval(x).shape, get_aval(scale).shape
    if len(ss) != len(xs):
        raise ValueError(
            f"{fname}: {what}_scale must have the rank of {what} ({len(xs)}), got shape {ss}"
        )
    for d, (n, m) in enumerate(zip(xs, ss)):
        if d in contracting:
            if m == 0 or n % m:
                raise ValueError(
                    f"{fname}: contracting dimension {d} of {what} (size {n}) "
                    f"must be a multiple of {what}_scale's (size {m})"
                )
            if m != n:
                scale = fnp.repeat(scale, n // m, axis=d)
        elif n != m:
            raise ValueError(
                f"{fname}: {what}_scale {ss} must match {what} {xs} outside the "
                f"contracting dimensions"
            )
    return scale


def scaled_dot(
    lhs, rhs, *, lhs_scale=None, rhs_scale=None, dimension_numbers=None, preferred_element_type=None
):
    """``dot_general(lhs * lhs_scale, rhs * rhs_scale)`` where each scale is repeated along
    the contracting dimensions in blocks (sub-channels) of ``size / scale size``
    (``jax.lax.scaled_dot``). ``dimension_numbers`` defaults to a batched matmul (contract
    the last dimension of ``lhs`` with the second-to-last of ``rhs``, leading dimensions
    batch). ``preferred_element_type`` defaults to bfloat16, as in JAX. The products are
    exact float32 (the documented math), rounded once to the result dtype; JAX's CPU backend,
    which expects float8 operands, rounds float32 operands, scales and their products to
    bfloat16 first, so its results differ by that rounding."""
    from fungrad import lax

    fname = "scaled_dot"
    if preferred_element_type is None:
        preferred_element_type = dtypes.bfloat16
    out_dtype = dtypes.canonicalize_dtype(np.dtype(preferred_element_type))
    lhs, rhs = operand(lhs, fname), operand(rhs, fname)
    n = get_aval(lhs).ndim
    if dimension_numbers is None:
        if n < 2:
            raise TypeError(f"{fname} does not support 0-rank and 1-rank operands")
        dimension_numbers = (((n - 1,), (n - 2,)), (tuple(range(n - 2)), tuple(range(n - 2))))
    (lc, rc), _ = dimension_numbers
    calc = np.dtype(np.float32) if out_dtype.itemsize <= 4 else out_dtype
    lhs = lax.convert_element_type(lhs, calc)
    rhs = lax.convert_element_type(rhs, calc)
    if lhs_scale is not None:
        s = lax.convert_element_type(operand(lhs_scale, fname), calc)
        lhs = lax.mul(lhs, _expand_scale(fname, lhs, s, tuple(lc), "lhs"))
    if rhs_scale is not None:
        s = lax.convert_element_type(operand(rhs_scale, fname), calc)
        rhs = lax.mul(rhs, _expand_scale(fname, rhs, s, tuple(rc), "rhs"))
    out = lax.dot_general(lhs, rhs, dimension_numbers, preferred_element_type=calc)
    return lax.convert_element_type(out, out_dtype)
