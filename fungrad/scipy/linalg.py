"""``fungrad.scipy.linalg``: triangular and Cholesky solvers with jax.scipy.linalg's names,
written on fungrad.lax only (so they differentiate, batch and compile like any composite).

Gaussian-process and Bayesian-regression programs factor a covariance once and solve with the
factor: ``cho_factor`` / ``cho_solve`` / ``solve_triangular``. Following SciPy (and unlike
``jax.numpy.linalg.cholesky``), :func:`cholesky` and :func:`cho_factor` return the UPPER factor
unless ``lower=True``; ``cho_factor``'s factor has zeros in its other triangle, as JAX's.

:func:`solve_triangular` is forward (lower) or back (upper) substitution, a ``lax.fori_loop``
with one row per step, batched over leading dimensions: O(n^2 k) work in n steps, for the small
and medium matrices of this project. ``solve``, ``inv`` and ``det`` reuse fungrad.numpy.linalg
(``assume_a="pos"`` solves through the Cholesky factor). SciPy's ``overwrite_*`` and
``check_finite`` arguments are accepted and ignored, as in JAX.
"""

from __future__ import annotations

import numpy as np

from fungrad import lax
from fungrad.numpy import linalg as np_linalg
from fungrad.numpy import util

__all__ = ["cho_factor", "cho_solve", "cholesky", "det", "inv", "solve", "solve_triangular"]


def _square(fun_name: str, a):
    util.check_arraylike(fun_name, a)
    (a,) = util.promote_dtypes_inexact(util.asarray(a, fun_name=fun_name))
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{fun_name}: a must be a square matrix or a stack of square matrices "
                         f"(shape [..., n, n]), got shape {a.shape}")
    return a


def _transpose(x):
    return np_linalg.matrix_transpose(x)


def _rhs(fun_name: str, a, b):
    """``a`` [..., n, n] and ``b`` as [..., n, k] with one broadcast batch shape; ``vector``
    says whether ``b`` was a vector or, as JAX still reads it, a batch of vectors
    (``b.ndim == a.ndim - 1`` and ``b.shape[-1] == n``)."""
    util.check_arraylike(fun_name, b)
    a, b = util.promote_dtypes_inexact(a, util.asarray(b, fun_name=fun_name))
    n = a.shape[-1]
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape[-1] == n)
    if vector:
        if b.shape[-1] != n:
            raise ValueError(f"{fun_name}: incompatible shapes a {a.shape} and b {b.shape}; b "
                             f"must be [..., {n}] or [..., {n}, k]")
        b = lax.expand_dims(b, (b.ndim,))
    elif b.ndim < 2 or b.shape[-2] != n:
        raise ValueError(f"{fun_name}: incompatible shapes a {a.shape} and b {b.shape}; b must "
                         f"be [..., {n}] or [..., {n}, k]")
    batch = util.broadcast_shapes(a.shape[:-2], b.shape[:-2], fun_name=fun_name)
    a = util.broadcast_to_shape(a, batch + a.shape[-2:])
    b = util.broadcast_to_shape(b, batch + b.shape[-2:])
    return a, b, vector


def _substitute(a, b, lower: bool, unit_diagonal: bool):
    """Solve ``a x = b`` for triangular [..., n, n] ``a`` and [..., n, k] ``b`` (same batch).
    Only ``a``'s ``lower`` (or upper) triangle is read.

    One ``fori_loop`` step per row (dynamic row/column reads, masked updates) keeps the
    program the same size for every ``n``; an unrolled Python loop grew with ``n`` and its
    fused gradient overflowed the lowering's recursion at n = 30."""
    n, nd = a.shape[-1], b.ndim
    if n == 0:
        return b
    batch = tuple(range(nd - 2))
    rows = lax.broadcasted_iota(np.int32, b.shape, nd - 2)

    def step(i, b):
        i = lax.convert_element_type(i, np.int32)  # int64 under x64
        j = i if lower else lax.sub(np.int32(n - 1), i)
        col_j = lax.dynamic_index_in_dim(a, j, nd - 1, keepdims=False)  # [..., n]
        row_j = lax.dynamic_index_in_dim(b, j, nd - 2, keepdims=False)  # [..., k]
        x_j = lax.broadcast_in_dim(row_j, b.shape, batch + (nd - 1,))
        if not unit_diagonal:
            a_jj = lax.dynamic_index_in_dim(col_j, j, nd - 2, keepdims=False)  # [...]
            x_j = lax.div(x_j, lax.broadcast_in_dim(a_jj, b.shape, batch))
        update = lax.sub(b, lax.mul(lax.broadcast_in_dim(col_j, b.shape, batch + (nd - 2,)),
                                    x_j))
        later = lax.gt(rows, j) if lower else lax.lt(rows, j)
        return lax.select_n(lax.eq(rows, j), lax.select_n(later, b, update), x_j)

    return lax.fori_loop(0, n, step, b)


_TRANS = {0: 0, "N": 0, 1: 1, "T": 1, 2: 2, "C": 2}


def solve_triangular(a, b, trans=0, lower: bool = False, unit_diagonal: bool = False,
                     overwrite_b: bool = False, debug=None, check_finite: bool = True):
    """Solve ``a x = b`` (``trans=0``/``"N"``), ``a.T x = b`` (``1``/``"T"``) or
    ``a.conj().T x = b`` (``2``/``"C"``) for triangular ``a``, reading only its lower
    (``lower=True``) or upper triangle; ``unit_diagonal`` takes its diagonal as ones.

    ``a`` is [..., n, n]; ``b`` is [..., n] or [..., n, k] and the batch dimensions broadcast.
    """
    del overwrite_b, debug, check_finite
    if trans not in _TRANS:
        raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got "
                         f"{trans!r}")
    a = _square("solve_triangular", a)
    a, b, vector = _rhs("solve_triangular", a, b)
    mode = _TRANS[trans]
    if mode:
        if mode == 2 and np.issubdtype(a.dtype, np.complexfloating):
            a = lax.conj(a)
        a, lower = _transpose(a), not lower
    x = _substitute(a, b, bool(lower), bool(unit_diagonal))
    return lax.squeeze(x, (x.ndim - 1,)) if vector else x


def cholesky(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """The Cholesky factor of symmetric positive definite ``a``: upper ``U`` with
    ``a = U.T @ U`` by default (SciPy's convention), lower ``L`` with ``a = L @ L.T`` when
    ``lower=True``. Not positive definite gives NaNs, as in JAX."""
    del overwrite_a, check_finite
    a = _square("cholesky", a)
    factor = np_linalg.cholesky(a)
    return factor if lower else _transpose(factor)


def cho_factor(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """``(c, lower)`` for :func:`cho_solve`: ``c`` is :func:`cholesky` ``(a, lower)`` (zeros in
    its other triangle)."""
    del overwrite_a, check_finite
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower, b, overwrite_b: bool = False, check_finite: bool = True):
    """Solve ``a x = b`` given ``(c, lower)`` from :func:`cho_factor`: two triangular solves
    with the factor ``c`` (``L`` then ``L.T``, or ``U.T`` then ``U``)."""
    del overwrite_b, check_finite
    try:
        c, lower = c_and_lower
        if not isinstance(lower, (bool, np.bool_)):
            raise TypeError
    except (TypeError, ValueError):
        raise TypeError("cho_solve: the first argument must be the pair (c, lower) returned "
                        f"by cho_factor, got {type(c_and_lower).__name__}") from None
    c = _square("cho_solve", c)
    c, b, vector = _rhs("cho_solve", c, b)
    if lower:
        y = _substitute(c, b, True, False)
        x = _substitute(_transpose(c), y, False, False)
    else:
        y = _substitute(_transpose(c), b, True, False)
        x = _substitute(c, y, False, False)
    return lax.squeeze(x, (x.ndim - 1,)) if vector else x


_ASSUME_A = ("gen", "sym", "her", "pos")


def solve(a, b, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
          debug: bool = False, check_finite: bool = True, assume_a: str = "gen"):
    """Solve ``a x = b``. ``assume_a="pos"`` (symmetric positive definite) solves through the
    Cholesky factor of ``a``'s ``lower`` (or upper) triangle; ``"gen"``, ``"sym"`` and
    ``"her"`` use LU with partial pivoting (:func:`fungrad.numpy.linalg.solve`)."""
    del overwrite_a, overwrite_b, debug, check_finite
    if assume_a not in _ASSUME_A:
        raise ValueError(f"solve: assume_a must be one of {_ASSUME_A}, got {assume_a!r}")
    a = _square("solve", a)
    if assume_a != "pos":
        a, b, vector = _rhs("solve", a, b)
        x = np_linalg.solve(a, b)
        return lax.squeeze(x, (x.ndim - 1,)) if vector else x
    # Symmetrise from the triangle SciPy reads, then factor.
    rows = lax.broadcasted_iota(np.int32, a.shape, a.ndim - 2)
    cols = lax.broadcasted_iota(np.int32, a.shape, a.ndim - 1)
    keep = lax.ge(rows, cols) if lower else lax.le(rows, cols)
    tri = lax.select_n(keep, lax.full_like(a, 0), a)
    diag = lax.select_n(lax.eq(rows, cols), lax.full_like(a, 0), a)
    full = lax.sub(lax.add(tri, _transpose(tri)), diag)
    factor = np_linalg.cholesky(full, symmetrize_input=False)
    return cho_solve((factor, True), b)


def inv(a, overwrite_a: bool = False, check_finite: bool = True):
    """The inverse of a square matrix (:func:`fungrad.numpy.linalg.inv`)."""
    del overwrite_a, check_finite
    return np_linalg.inv(_square("inv", a))


def det(a, overwrite_a: bool = False, check_finite: bool = True):
    """The determinant of a square matrix (:func:`fungrad.numpy.linalg.det`)."""
    del overwrite_a, check_finite
    return np_linalg.det(_square("det", a))
