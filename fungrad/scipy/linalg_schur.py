"""jax.scipy.linalg's functions built on the Schur decomposition and the Hessenberg reduction:
``schur``, ``rsf2csf``, ``hessenberg``, ``sqrtm``, ``funm`` and ``solve_sylvester``, with JAX's
signatures, result dtypes and errors.

``schur`` and ``hessenberg`` are the ``schur`` / ``hessenberg`` primitives
(:mod:`fungrad.lax.linalg_schur`: LAPACK ``gees`` / ``gehrd``, CPU only as in JAX); the others
are compositions of them and lax, the algorithms JAX uses:

* ``rsf2csf``: Givens rotations that split each 2 x 2 block of a real Schur form (its two
  eigenvalues by ``eigvals``, as JAX);
* ``sqrtm``: the complex Schur method of Björck and Hammarling (1983), unblocked;
* ``funm``: ``func`` on the diagonal of the complex Schur form, the rest by Parlett's
  recurrence (Golub and Van Loan, algorithm 11.1.1; like JAX and SciPy's fallback, a repeated
  eigenvalue leaves its off-diagonal entries where the recurrence divides by zero);
* ``solve_sylvester``: Bartels-Stewart on the complex Schur forms of ``A`` and ``Bᴴ``
  (``method="schur"``, one triangular solve per column of the solution) or the
  eigen-decompositions (``method="eigen"``); NaN where ``|λ_i(A) + μ_j(B)| < tol``.

As in JAX, none has a derivative through the decomposition (the ``schur`` primitive has none:
``solve_sylvester`` differentiates in ``C`` only), ``sqrtm`` and ``funm`` take one matrix
(vmap them over a stack) and ``rsf2csf``, ``hessenberg``, ``schur`` and ``solve_sylvester``
batch over leading dimensions. NB: JAX fails on 0 x 0 matrices in ``rsf2csf``, ``sqrtm``,
``funm`` and ``solve_sylvester`` (an IndexError); here they give empty results.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fungrad import dtypes, lax
from fungrad import numpy as fnp
from fungrad.lax import linalg as lax_linalg
from fungrad.numpy import util

__all__ = ["funm", "hessenberg", "rsf2csf", "schur", "solve_sylvester", "sqrtm"]

_HIGHEST = lax.Precision.HIGHEST


def _complex_of(dtype) -> np.dtype:
    """The complex dtype JAX's ``to_complex_dtype`` gives an (inexact-promoted) dtype."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return dtype
    wide = dtype == np.float64
    return np.dtype(np.complex128 if wide else np.complex64)


def _inexact(fun_name: str, *xs):
    util.check_arraylike(fun_name, *xs)
    return util.promote_dtypes_inexact(*(util.asarray(x, fun_name=fun_name) for x in xs))


def _adjoint(x):
    return fnp.conj(fnp.swapaxes(x, -1, -2))


def _one_square(fun_name: str, a, message: str | None = None):
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(
            message
            or (
                f"{fun_name}: A must be one square matrix (N, N), got shape {a.shape}; "
                f"apply fungrad.vmap({fun_name}) to a stack of matrices"
            )
        )


# -- schur, rsf2csf, hessenberg -----------------------------------------------------------------


def schur(a, output: str = "real"):
    """The Schur decomposition ``a = Z T Zᴴ`` of a square matrix or stack [..., N, N]
    (JAX's ``jax.scipy.linalg.schur``; CPU only). ``output="real"``: ``T`` is
    quasi-upper-triangular for a real ``a`` (2 x 2 diagonal blocks for complex conjugate
    eigenvalue pairs) and both have ``a``'s dtype (integer input is a TypeError, as JAX);
    ``output="complex"``: ``a`` is cast to complex first and ``T`` is upper triangular.

    Returns:
        ``(T, Z)`` (a list, as JAX's), ``Z`` unitary."""
    if output not in ("real", "complex"):
        raise ValueError(f"Expected 'output' to be either 'real' or 'complex', got {output=}.")
    util.check_arraylike("schur", a)
    a = util.asarray(a, fun_name="schur")
    if output == "complex":
        (a,) = util.promote_dtypes_inexact(a)
        a = lax.convert_element_type(a, _complex_of(a.dtype))
    return lax_linalg.schur(a)


def _rsf2csf_2d(t, z):
    """JAX's ``_rsf2csf_2d``: for m = N - 1 down to 1, a nonzero subdiagonal ``T[m, m - 1]``
    (relative to ``eps`` times its diagonal neighbours) is zeroed by the Givens rotation that
    puts the first eigenvalue of the 2 x 2 block at ``T[m - 1, m - 1]``."""
    n = t.shape[0]
    if n <= 1:
        return t, z
    eps = float(dtypes.finfo(t.dtype).eps)
    cols = lax.iota(np.int32, n)

    def rotate(m, t, z):
        block = lax.dynamic_slice(t, (m - 1, m - 1), (2, 2))
        mu = fnp.linalg.eigvals(block) - t[m, m]
        r = fnp.sqrt(fnp.abs(mu[0]) ** 2 + fnp.abs(t[m, m - 1]) ** 2).astype(t.dtype)
        c, s = mu[0] / r, t[m, m - 1] / r
        g = fnp.stack([fnp.stack([fnp.conj(c), s]), fnp.stack([-s, c])])
        rows = lax.dynamic_slice_in_dim(t, m - 1, 2, axis=0)
        right = cols >= m - 1
        rows = fnp.where(right, fnp.matmul(g, fnp.where(right, rows, 0), precision=_HIGHEST), rows)
        t = lax.dynamic_update_slice_in_dim(t, rows, m - 1, axis=0)
        tcols = lax.dynamic_slice_in_dim(t, m - 1, 2, axis=1)
        upper = (cols < m + 1)[:, None]
        gh = _adjoint(g)
        tcols = fnp.where(
            upper, fnp.matmul(fnp.where(upper, tcols, 0), gh, precision=_HIGHEST), tcols
        )
        t = lax.dynamic_update_slice_in_dim(t, tcols, m - 1, axis=1)
        zcols = lax.dynamic_slice_in_dim(z, m - 1, 2, axis=1)
        z = lax.dynamic_update_slice_in_dim(
            z, fnp.matmul(zcols, gh, precision=_HIGHEST), m - 1, axis=1
        )
        return t, z

    def step(i, tz):
        t, z = tz
        m = n - i
        sub = fnp.abs(t[m, m - 1])
        split = sub > eps * (fnp.abs(t[m - 1, m - 1]) + fnp.abs(t[m, m]))
        t, z = lax.cond(split, rotate, lambda m, t, z: (t, z), m, t, z)
        return t.at[m, m - 1].set(0), z

    return lax.fori_loop(1, n, step, (t, z))


def rsf2csf(T, Z, check_finite: bool = True):
    """The complex Schur form ``(T, Z)`` of a real one (JAX's ``jax.scipy.linalg.rsf2csf``):
    each 2 x 2 diagonal block of ``T`` is split by a unitary rotation, applied to ``Z`` too,
    so ``T`` becomes upper triangular with the same ``Z T Zᴴ``. Both are [..., N, N] (batch
    dimensions broadcast) and are promoted to complex. ``check_finite`` is unused, as in JAX."""
    del check_finite
    t, z = _inexact("rsf2csf", T, Z)
    if t.ndim < 2 or t.shape[-1] != t.shape[-2]:
        raise ValueError("Input 'T' must be square.")
    if z.ndim < 2 or z.shape[-1] != z.shape[-2]:
        raise ValueError("Input 'Z' must be square.")
    if t.shape[-1] != z.shape[-1]:
        raise ValueError(f"Input array shapes must match: Z: {z.shape} vs. T: {t.shape}")
    cdt = _complex_of(t.dtype)
    t, z = lax.convert_element_type(t, cdt), lax.convert_element_type(z, cdt)
    return fnp.vectorize(_rsf2csf_2d, signature="(n,n),(n,n)->(n,n),(n,n)")(t, z)


def _householder_product(v, taus):
    """``H_0 H_1 ... H_{k-1}`` (``H_i = I - taus[i] v_i v_iᴴ``, ``v_i`` column ``i`` of ``v``
    below the diagonal with a unit ``v_i[i]``), LAPACK's ``orgqr`` of a square [..., m, m]
    ``v``: applied from the right to the identity, one reflector per loop iteration."""
    m = v.shape[-1]
    rows = lax.iota(np.int32, m)
    q = fnp.broadcast_to(fnp.eye(m, dtype=v.dtype), v.shape)

    def apply(i, q):
        col = lax.dynamic_index_in_dim(v, i, axis=-1, keepdims=False)
        vi = fnp.where(rows > i, col, fnp.where(rows == i, 1, 0).astype(v.dtype))
        tau = lax.dynamic_index_in_dim(taus, i, axis=-1, keepdims=True)[..., None]
        qv = fnp.matmul(q, vi[..., None], precision=_HIGHEST)
        return q - tau * qv * fnp.conj(vi)[..., None, :]

    if taus.shape[-1] == 0:
        return q
    return lax.fori_loop(0, taus.shape[-1], apply, q)


def hessenberg(a, *, calc_q: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """The Hessenberg form ``a = Q H Qᴴ`` of a real or complex square matrix or stack
    [..., N, N] (JAX's ``jax.scipy.linalg.hessenberg``; CPU only): ``H`` is zero below the
    first subdiagonal and ``Q`` unitary, both of ``a``'s dtype (integer input is a TypeError,
    as JAX). ``overwrite_a`` and ``check_finite`` are unused, as in JAX.

    Returns:
        ``H``, or ``(H, Q)`` when ``calc_q``."""
    del overwrite_a, check_finite
    util.check_arraylike("hessenberg", a)
    a = util.asarray(a, fun_name="hessenberg")
    n = a.shape[-1] if a.ndim else 0
    if n == 0:
        return (fnp.zeros_like(a), fnp.zeros_like(a)) if calc_q else fnp.zeros_like(a)
    packed, taus = lax_linalg.hessenberg(a)
    h = fnp.triu(packed, -1)
    if not calc_q:
        return h
    q = _householder_product(packed[..., 1:, :-1], taus)
    batch = packed.shape[:-2]
    one = fnp.ones(batch + (1, 1), dtype=packed.dtype)
    row = fnp.zeros(batch + (1, n - 1), dtype=packed.dtype)
    col = fnp.zeros(batch + (n - 1, 1), dtype=packed.dtype)
    q = fnp.concatenate(
        [fnp.concatenate([one, row], axis=-1), fnp.concatenate([col, q], axis=-1)], axis=-2
    )
    return h, q


# -- sqrtm, funm --------------------------------------------------------------------------------


def _sqrtm_triu(t):
    """The upper triangular square root ``U`` of the upper triangular ``t`` (Björck and
    Hammarling): ``U_jj = sqrt(t_jj)``, then column by column, bottom up,
    ``U_ij = (t_ij - sum_{i<k<j} U_ik U_kj) / (U_ii + U_jj)`` (0 where the numerator is)."""
    n = t.shape[0]
    d = fnp.sqrt(fnp.diagonal(t))
    idx = lax.iota(np.int32, n)

    def column(j, u):
        def entry(l, u):
            i = j - 1 - l
            between = (idx > i) & (idx < j)
            s = fnp.sum(fnp.where(between, u[i, :] * u[:, j], 0))
            value = fnp.where(t[i, j] == s, 0, (t[i, j] - s) / (d[i] + d[j]))
            return u.at[i, j].set(value)

        return lax.fori_loop(0, j, entry, u)

    return lax.fori_loop(0, n, column, fnp.diag(d))


def sqrtm(A, blocksize: int = 1):
    """The principal matrix square root of one square matrix (JAX's
    ``jax.scipy.linalg.sqrtm``; CPU only, through the complex Schur form): a complex [N, N]
    ``X`` with ``X @ X == A`` (complex64 for float32/complex64 and integer input, complex128
    for float64/complex128). Not differentiable (as in JAX: the Schur decomposition has no
    derivative). ``blocksize > 1`` (SciPy's blocked algorithm) raises NotImplementedError,
    as in JAX."""
    if blocksize > 1:
        raise NotImplementedError("Blocked version is not implemented yet.")
    (a,) = _inexact("sqrtm", A)
    _one_square("sqrtm", a)
    t, z = schur(a, output="complex")
    if a.shape[0] == 0:
        return t
    root = _sqrtm_triu(t)
    return fnp.matmul(fnp.matmul(z, root, precision=_HIGHEST), _adjoint(z), precision=_HIGHEST)


def _parlett(f, t):
    """Golub and Van Loan's algorithm 11.1.1 as JAX writes it: the strictly upper triangle of
    ``f(t)`` from its diagonal ``f``, superdiagonal by superdiagonal; also the smallest
    ``|t_jj - t_ii|`` met (``|t_00|`` to start), for ``funm``'s error estimate."""
    n = t.shape[0]
    idx = lax.iota(np.int32, n)

    def diagonal(p, carry):
        def entry(i, carry):
            f, minden = carry
            j = i + p
            s = t[i - 1, j - 1] * (f[j - 1, j - 1] - f[i - 1, i - 1])
            between = (idx >= i) & (idx < j - 1)
            s = s + (
                fnp.sum(fnp.where(between, t[i - 1, :] * f[:, j - 1], 0))
                - fnp.sum(fnp.where(between, f[i - 1, :] * t[:, j - 1], 0))
            )
            den = t[j - 1, j - 1] - t[i - 1, i - 1]
            s = fnp.where(den != 0, s / fnp.where(den != 0, den, 1), s)
            return f.at[i - 1, j - 1].set(s), fnp.minimum(minden, fnp.abs(den))

        return lax.fori_loop(1, n - p + 1, entry, carry)

    return lax.fori_loop(1, n, diagonal, (f, fnp.abs(t[0, 0])))


def funm(A, func: Callable, disp: bool = True):
    """``func`` as a matrix function of one square matrix (JAX's ``jax.scipy.linalg.funm``;
    CPU only, through the complex Schur form ``A = Z T Zᴴ``): ``Z F Zᴴ`` with ``F``'s diagonal
    ``func(diag(T))`` (``func`` maps an array of eigenvalues elementwise) and the rest by
    Parlett's recurrence. The result is complex, as JAX's (SciPy returns a real array when the
    imaginary parts vanish). Integer input is a TypeError, as JAX.

    Returns:
        ``F``, or ``(F, err)`` when ``disp=False``, ``err`` JAX's estimate of the relative
        error (real, 0-d)."""
    util.check_arraylike("funm", A)
    a = util.asarray(A, fun_name="funm")
    _one_square("funm", a, "expected square array_like input")
    t, z = schur(a)
    t, z = rsf2csf(t, z)
    if a.shape[0] == 0:
        f, minden = t, fnp.zeros((), dtypes.real_dtype(t.dtype))
    else:
        f = lax.convert_element_type(fnp.diag(func(fnp.diagonal(t))), t.dtype)
        f, minden = _parlett(f, t)
    f = fnp.matmul(fnp.matmul(z, f, precision=_HIGHEST), _adjoint(z), precision=_HIGHEST)
    if disp:
        return f
    tol = float(dtypes.finfo(np.float32 if f.dtype == np.complex64 else np.float64).eps)
    minden = fnp.where(minden == 0.0, tol, minden)
    bound = (tol / minden) * fnp.linalg.norm(fnp.triu(t, 1), 1)
    err = fnp.where(fnp.any(fnp.isinf(f)), np.inf, fnp.minimum(1, fnp.maximum(tol, bound))).astype(
        minden.dtype
    )
    return f, err


# -- solve_sylvester ----------------------------------------------------------------------------


def _triangular_sylvester(r, s, f):
    """``Y`` with ``R Y + Y S = F`` for upper triangular ``R`` [m, m] and lower triangular
    ``S`` [n, n] (Bartels-Stewart): columns from the last, each one triangular solve
    ``(R + S_jj I) y_j = f_j - Y s_j`` (columns not yet solved are zero in ``Y``)."""
    m, n = f.shape
    eye = fnp.eye(m, dtype=r.dtype)

    def column(l, y):
        j = n - 1 - l
        s_j = lax.dynamic_index_in_dim(s, j, axis=1, keepdims=False)
        rhs = lax.dynamic_index_in_dim(f, j, axis=1, keepdims=False) - fnp.matmul(
            y, s_j, precision=_HIGHEST
        )
        shifted = r + s[j, j] * eye
        y_j = lax_linalg.triangular_solve(shifted, rhs[:, None], left_side=True, lower=False)
        return lax.dynamic_update_slice_in_dim(y, y_j, j, axis=1)

    return lax.fori_loop(0, n, column, fnp.zeros_like(f))


def _solve_sylvester_2d(a, b, c, *, method: str, tol):
    if method == "schur":
        r, u = schur(a, output="complex")
        s, v = schur(_adjoint(b), output="complex")
        f = fnp.matmul(
            fnp.matmul(_adjoint(u), c.astype(r.dtype), precision=_HIGHEST), v, precision=_HIGHEST
        )
        y = _triangular_sylvester(r, _adjoint(s), f)
        x = fnp.matmul(fnp.matmul(u, y, precision=_HIGHEST), _adjoint(v), precision=_HIGHEST)
    elif method == "eigen":
        ra, ua = fnp.linalg.eig(a)
        rb, ub = fnp.linalg.eig(b)
        f = fnp.linalg.solve(ua, fnp.matmul(c.astype(ra.dtype), ub, precision=_HIGHEST))
        y = f / (ra[:, None] + rb[None, :])
        x = fnp.matmul(
            fnp.matmul(ua, y, precision=_HIGHEST), fnp.linalg.inv(ub), precision=_HIGHEST
        )
    else:
        raise ValueError(
            f'Unrecognized method {method}. The two valid methods are either "schur" or "eigen".'
        )
    if not dtypes.is_complex(c.dtype):
        x = fnp.real(x)
    sums = fnp.linalg.eigvals(a)[:, None] + fnp.linalg.eigvals(b)[None, :]
    return fnp.where(fnp.any(fnp.abs(sums) < tol), fnp.full_like(x, np.nan), x)


def solve_sylvester(A, B, C, *, method: str = "schur", tol: float = 1e-8):
    """``X`` with ``A X + X B = C`` (JAX's ``jax.scipy.linalg.solve_sylvester``): ``A``
    [..., m, m], ``B`` [..., n, n], ``C`` [..., m, n], batch dimensions broadcast, promoted
    to one inexact dtype (the result's: real unless one of them is complex).

    Args:
        method: ``"schur"`` (Bartels-Stewart on the complex Schur forms; CPU only) or
            ``"eigen"`` (through the eigen-decompositions: faster, less accurate for
            ill-conditioned eigenvectors).
        tol: where any ``|λ_i(A) + μ_j(B)|`` is below it (no unique solution), every entry
            of ``X`` is NaN.

    Differentiable in ``C`` (a linear map of it); in ``A`` or ``B`` it raises, as in JAX (the
    Schur decomposition has no derivative)."""
    a, b, c = _inexact("solve_sylvester", A, B, C)
    m, n = c.shape[-2:] if c.ndim >= 2 else (None, None)
    if c.ndim < 2 or a.shape[-2:] != (m, m) or b.shape[-2:] != (n, n):
        raise ValueError(
            f"Incompatible shapes for Sylvester equation:\nA: {a.shape}\nB: {b.shape}\nC: {c.shape}"
        )
    if method not in ("schur", "eigen"):
        raise ValueError(
            f'Unrecognized method {method}. The two valid methods are either "schur" or "eigen".'
        )

    def solve_2d(a, b, c):
        if m == 0 or n == 0:
            return c
        return _solve_sylvester_2d(a, b, c, method=method, tol=tol)

    return fnp.vectorize(solve_2d, signature="(m,m),(n,n),(m,n)->(m,n)")(a, b, c)
