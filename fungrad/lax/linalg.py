"""``fungrad.lax.linalg``: jax.lax.linalg's decompositions and triangular solve, with its
signatures and result conventions: ``cholesky``, ``triangular_solve``
(:mod:`fungrad.lax.linalg_primitives`), ``lu`` (:mod:`fungrad.lax.linalg_lu`) and ``qr``,
``eigh``, ``svd`` (:mod:`fungrad.lax.linalg_decomp_primitives`), ``eig``
(:mod:`fungrad.lax.linalg_eig`), ``schur`` and ``hessenberg`` (:mod:`fungrad.lax.linalg_schur`,
CPU only, as in JAX) are primitives (LAPACK under jit on the CPU).

The conventions differ from jax.numpy.linalg's, as in JAX: ``eigh`` returns
``(eigenvectors, eigenvalues)``, ``qr`` defaults to ``full_matrices=True``, ``lu`` returns
``(lu, pivots, permutation)`` and ``triangular_solve`` solves ``x @ op(a) = b`` unless
``left_side=True``.
"""

from __future__ import annotations

import operator

import numpy as np

from fungrad import lax
from fungrad.lax import linalg_lu as _lu
from fungrad.lax.linalg_decomp_primitives import eigh_p, geqrf_p, qr_p, svd_p
from fungrad.lax.linalg_eig import eig_p
from fungrad.lax.linalg_lu import lu_p
from fungrad.lax.linalg_primitives import cholesky_p, triangular_solve_p
from fungrad.lax.linalg_schur import hessenberg_p, schur_p
from fungrad.numpy import linalg as _np_linalg
from fungrad.numpy import linalg_decomp as _decomp
from fungrad.numpy import util

__all__ = [
    "cholesky",
    "cholesky_p",
    "eig",
    "eig_p",
    "eigh",
    "eigh_p",
    "geqrf",
    "geqrf_p",
    "hessenberg",
    "hessenberg_p",
    "lu",
    "lu_p",
    "lu_pivots_to_permutation",
    "qr",
    "qr_p",
    "schur",
    "schur_p",
    "svd",
    "svd_p",
    "triangular_solve",
    "triangular_solve_p",
    "tridiagonal_solve",
]


def cholesky(x, *, symmetrize_input: bool = True):
    """The lower Cholesky factor of a symmetric (complex: Hermitian) positive definite matrix
    or stack (NaNs where it is not positive definite); ``symmetrize_input`` factors
    ``(x + xᴴ) / 2``, else only the lower triangle is read."""
    return _np_linalg.cholesky(x, symmetrize_input=symmetrize_input)


def triangular_solve(
    a,
    b,
    *,
    left_side: bool = False,
    lower: bool = False,
    transpose_a: bool = False,
    conjugate_a: bool = False,
    unit_diagonal: bool = False,
):
    """Solve ``op(a) @ x = b`` (``left_side=True``) or ``x @ op(a) = b`` (the default) for
    triangular ``a`` [..., n, n]; ``op`` transposes ``a`` when ``transpose_a`` (conjugating it
    too when ``conjugate_a``). ``b`` is [..., n, k] (left) or [..., k, n] (right) with the
    same batch dimensions as ``a``."""
    util.check_arraylike("triangular_solve", a, b)
    a, b = util.promote_dtypes_inexact(util.asarray(a), util.asarray(b))
    if a.ndim < 2 or b.ndim != a.ndim:
        raise ValueError(
            f"triangular_solve: a must be [..., n, n] and b have the same rank, "
            f"got shapes {a.shape} and {b.shape}"
        )
    return triangular_solve_p.bind(
        a,
        b,
        left_side=bool(left_side),
        lower=bool(lower),
        transpose_a=bool(transpose_a),
        conjugate_a=bool(conjugate_a) and np.issubdtype(a.dtype, np.complexfloating),
        unit_diagonal=bool(unit_diagonal),
    )


def eig(
    x,
    *,
    compute_left_eigenvectors: bool = True,
    compute_right_eigenvectors: bool = True,
    use_magma=None,
):
    """``[w, vl, vr]`` of a real or complex square matrix or stack (JAX's order; ``vl``/``vr``
    dropped unless requested): complex eigenvalues in LAPACK's order, left and right
    eigenvectors as columns of norm 1. Only the eigenvalues are differentiable (as in JAX)."""
    del use_magma
    util.check_arraylike("eig", x)
    (a,) = util.promote_dtypes_inexact(util.asarray(x))
    return eig_p.bind(
        a,
        compute_left_eigenvectors=bool(compute_left_eigenvectors),
        compute_right_eigenvectors=bool(compute_right_eigenvectors),
    )


def eigh(
    x,
    *,
    lower: bool = True,
    symmetrize_input: bool = True,
    sort_eigenvalues: bool = True,
    subset_by_index=None,
):
    """``(eigenvectors, eigenvalues)`` of a real symmetric or complex Hermitian matrix or
    stack, eigenvalues ascending (real); with ``symmetrize_input`` the matrix used is
    ``(x + xᴴ) / 2``, else only the ``lower`` (or upper) triangle is read."""
    if subset_by_index is not None:
        raise ValueError(
            "eigh: subset_by_index is not supported by fungrad; slice the full result instead"
        )
    a = _decomp._float_matrix("eigh", x, square=True, complex_ok=True)
    if symmetrize_input:
        a = _decomp._hermitian_part(a)
    v, w = eigh_p.bind(a, lower=bool(lower), sort_eigenvalues=bool(sort_eigenvalues))
    return v, w


def qr(x, *, pivoting: bool = False, full_matrices: bool = True, use_magma=None):
    """``(q, r)`` of a real or complex matrix or stack (LAPACK's Householder QR; complete unless
    ``full_matrices=False``)."""
    del use_magma
    if pivoting:
        raise ValueError("qr: pivoting=True (column-pivoted QR) is not supported by fungrad")
    a = _decomp._float_matrix("qr", x, square=False, complex_ok=True)
    q, r = qr_p.bind(a, full_matrices=bool(full_matrices))
    return q, r


def geqrf(a):
    """LAPACK's Householder QR of a real or complex matrix or stack in its own representation:
    ``(packed, taus)``, R on and above the diagonal of ``packed`` [..., m, n] and the
    reflectors' vectors (unit leading entry implied) below it, their scales ``taus``
    [..., min(m, n)]. Not differentiable (as in JAX)."""
    a = _decomp._float_matrix("geqrf", a, square=False, complex_ok=True)
    packed, taus = geqrf_p.bind(a)
    return packed, taus


def schur(
    x,
    *,
    compute_schur_vectors: bool = True,
    sort_eig_vals: bool = False,
    select_callable=None,
):
    """The Schur decomposition ``x = q u qᴴ`` of a real or complex square matrix or stack
    [..., n, n] (LAPACK's ``gees``; CPU only, as in JAX): ``(u, q)``, or ``[u]`` alone unless
    ``compute_schur_vectors``. ``u`` is upper triangular (complex) or quasi-upper-triangular
    (real: 2 x 2 diagonal blocks for complex conjugate eigenvalue pairs) and ``q`` unitary,
    both of ``x``'s dtype; NaN where LAPACK does not converge. As in JAX, ``select_callable``
    is unused and ``sort_eig_vals=True`` raises NotImplementedError when it runs; integer
    matrices are a TypeError (no promotion). Not differentiable (as in JAX).

    Example: ``u, q = schur(a)``; ``q @ u @ q.conj().T`` is ``a``."""
    util.check_arraylike("schur", x)
    return schur_p.bind(
        util.asarray(x, fun_name="schur"),
        compute_schur_vectors=bool(compute_schur_vectors),
        sort_eig_vals=bool(sort_eig_vals),
        select_callable=select_callable,
    )


def hessenberg(a):
    """LAPACK's reduction (``gehrd``) of a real or complex square matrix or stack [..., n, n]
    to upper Hessenberg form, in its own representation (CPU only, as in JAX): ``[a, taus]``,
    the Hessenberg matrix on and above the first subdiagonal of ``a``, the Householder
    reflectors' vectors below it and their scales ``taus`` [..., n - 1]. Not differentiable
    (as in JAX). ``fungrad.scipy.linalg.hessenberg`` gives ``H`` and ``Q``."""
    util.check_arraylike("hessenberg", a)
    return hessenberg_p.bind(util.asarray(a, fun_name="hessenberg"))


def svd(
    x, *, full_matrices: bool = True, compute_uv: bool = True, subset_by_index=None, algorithm=None
):
    """``(u, s, vh)`` of a real or complex matrix or stack (singular values descending, real),
    or ``s`` alone when ``compute_uv=False``. ``algorithm`` is accepted and ignored
    (LAPACK's divide and conquer runs)."""
    del algorithm
    if subset_by_index is not None:
        raise ValueError(
            "svd: subset_by_index is not supported by fungrad; slice the full result instead"
        )
    a = _decomp._float_matrix("svd", x, square=False, complex_ok=True)
    outs = svd_p.bind(a, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))
    if not compute_uv:
        return outs[0]
    s, u, vt = outs
    return u, s, vt


def lu_pivots_to_permutation(pivots, permutation_size: int):
    """The permutation (``perm[i]`` = original row now at row ``i``) made by applying the
    row swaps ``i <-> pivots[..., i]`` in order to ``arange(permutation_size)``."""
    util.check_arraylike("lu_pivots_to_permutation", pivots)
    pivots = lax.convert_element_type(util.asarray(pivots), np.int32)
    if pivots.ndim < 1:
        raise TypeError(
            f"lu_pivots_to_permutation: pivots must have rank at least 1, got shape {pivots.shape}"
        )
    size = operator.index(permutation_size)
    if size < pivots.shape[-1]:
        raise ValueError(
            f"lu_pivots_to_permutation: permutation_size ({size}) must be at least the number "
            f"of pivots ({pivots.shape[-1]})"
        )
    return _lu.lu_pivots_to_permutation(pivots, size)


def lu(x):
    """LU with partial pivoting of a matrix or stack [..., m, n] (the ``lu`` primitive: LAPACK
    getrf under jit on the CPU): ``(lu, pivots, permutation)`` with
    ``x[..., permutation, :] == L @ U`` (L unit lower [m, min(m, n)], U upper
    [min(m, n), n], both packed in ``lu``; ``pivots`` are 0-based row swaps)."""
    util.check_arraylike("lu", x)
    return tuple(_lu.lu_p.bind(util.asarray(x, fun_name="lu")))


def tridiagonal_solve(dl, d, du, b, *, perturb_singular: bool = False):
    """Solve the tridiagonal systems ``A x = b`` (``jax.lax.linalg.tridiagonal_solve``).

    ``dl``, ``d``, ``du`` (shape [..., m]) are A's sub-, main and super-diagonals, each
    aligned with the rows (``dl[..., 0]`` and ``du[..., m-1]`` are ignored); ``b`` is
    [..., m, n]. The Thomas algorithm as two ``lax.scan``s (a forward elimination, a back
    substitution), the algorithm JAX uses where it has no LAPACK kernel; jit, vmap and grad
    go through the scans.

    NB: JAX on the CPU calls LAPACK's gtsv, which pivots; without pivoting a zero pivot (say
    ``d[0] == 0``) gives inf/NaN where gtsv may still solve the system, and the results agree
    to float rounding otherwise. ``perturb_singular=True`` is a NotImplementedError (as JAX's
    own fallback on platforms without that kernel).
    """
    if perturb_singular:
        raise NotImplementedError(
            "tridiagonal_solve: perturb_singular=True is not supported by fungrad (JAX "
            "perturbs near-zero pivots in LAPACK's gtsv); pass perturb_singular=False"
        )
    util.check_arraylike("tridiagonal_solve", dl, d, du, b)
    dl, d, du, b = (util.asarray(x, fun_name="tridiagonal_solve") for x in (dl, d, du, b))
    if b.ndim < 2:
        raise TypeError(
            f"tridiagonal_solve: b must have rank at least 2 ([..., m, n]), got shape {b.shape}"
        )
    m = b.shape[-2]
    for name, x in (("dl", dl), ("d", d), ("du", du)):
        if x.shape != b.shape[:-1]:
            raise TypeError(
                f"tridiagonal_solve: {name} must have shape {b.shape[:-1]} (b's shape without "
                f"its last axis), got {x.shape}"
            )
    kinds = {x.dtype for x in (dl, d, du, b)}
    if len(kinds) != 1 or not np.issubdtype(b.dtype, np.inexact):
        raise TypeError(
            "tridiagonal_solve: dl, d, du and b must have one floating or complex dtype, got "
            f"{sorted(str(t) for t in kinds)}"
        )
    if m == 0:
        return b
    # the row axis first: scans run over it; batch axes and b's columns ride along
    dl_, d_, du_ = (lax.expand_dims(_move_last_first(x), (x.ndim,)) for x in (dl, d, du))
    b_ = _move_last_first(_moveaxis(b, b.ndim - 2, b.ndim - 1))

    def forward(carry, row):
        cp, bp = carry
        a, dd, c, bb = row
        denom = dd - a * cp
        new = (c / denom, (bb - a * bp) / denom)
        return new, new

    first = (du_[0] / d_[0], b_[0] / d_[0])
    _, (cps, bps) = lax.scan(forward, first, (dl_[1:], d_[1:], du_[1:], b_[1:]))
    cps = lax.concatenate([first[0][None], cps], 0)
    bps = lax.concatenate([first[1][None], bps], 0)

    def backward(x_next, row):
        cp, bp = row
        x = bp - cp * x_next
        return x, x

    last = bps[m - 1]
    _, xs = lax.scan(backward, last, (cps[: m - 1], bps[: m - 1]), reverse=True)
    x = lax.concatenate([xs, last[None]], 0)  # [m, ..., n]
    return _moveaxis(_move_first_last(x), b.ndim - 1, b.ndim - 2)


def _move_last_first(x):
    return _moveaxis(x, x.ndim - 1, 0)


def _move_first_last(x):
    return _moveaxis(x, 0, x.ndim - 1)


def _moveaxis(x, src: int, dst: int):
    """``x`` with axis ``src`` moved to position ``dst`` (a transpose)."""
    perm = [i for i in range(x.ndim) if i != src]
    perm.insert(dst, src)
    return lax.transpose(x, tuple(perm))
