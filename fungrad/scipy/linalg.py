"""``fungrad.scipy.linalg``: triangular and Cholesky solvers with jax.scipy.linalg's names,
written on fungrad.lax only (so they differentiate, batch and compile like any composite).

Gaussian-process and Bayesian-regression programs factor a covariance once and solve with the
factor: ``cho_factor`` / ``cho_solve`` / ``solve_triangular``. Following SciPy (and unlike
``jax.numpy.linalg.cholesky``), :func:`cholesky` and :func:`cho_factor` return the UPPER factor
unless ``lower=True``; ``cho_factor``'s factor has zeros in its other triangle, as JAX's.

:func:`solve_triangular` is the ``triangular_solve`` primitive (LAPACK's trsm under jit on the
CPU, substitution loops on the GPU), batched over leading dimensions. ``solve``, ``inv`` and
``det`` reuse fungrad.numpy.linalg (``assume_a="pos"`` solves through the Cholesky factor).
``lu``, ``lu_factor`` and ``lu_solve`` are the ``lu`` primitive (LAPACK getrf under jit on the
CPU) with SciPy's result conventions; ``eigh``, ``svd``, ``qr`` wrap
:mod:`fungrad.numpy.linalg_decomp` with SciPy's result conventions; ``expm`` is scaling and
squaring with the degree-13 Pade approximant (Higham 2005) and ``expm_frechet`` its forward
derivative; ``polar`` runs QDWH (or the SVD) and ``eigh_tridiagonal`` is ``eigh`` of the dense
tridiagonal matrix. ``schur``, ``rsf2csf``, ``hessenberg``, ``sqrtm``, ``funm`` and
``solve_sylvester`` (:mod:`fungrad.scipy.linalg_schur`) are built on the ``schur`` and
``hessenberg`` primitives (CPU only, as in JAX). SciPy's ``overwrite_*`` and ``check_finite``
arguments are accepted and ignored, as in JAX.
"""

from __future__ import annotations

import operator

import numpy as np

from fungrad import dtypes, lax
from fungrad import numpy as fnp
from fungrad.lax import linalg_lu as _lu
from fungrad.lax.linalg import lu_pivots_to_permutation
from fungrad.lax.linalg_lu import lu_p
from fungrad.lax.linalg_primitives import triangular_solve_p
from fungrad.numpy import linalg as np_linalg
from fungrad.numpy import polynomial, util
from fungrad.scipy.linalg_schur import funm, hessenberg, rsf2csf, schur, solve_sylvester, sqrtm

__all__ = [
    "block_diag",
    "cho_factor",
    "cho_solve",
    "cholesky",
    "circulant",
    "companion",
    "convolution_matrix",
    "det",
    "dft",
    "eigh",
    "eigh_tridiagonal",
    "expm",
    "expm_frechet",
    "fiedler",
    "fiedler_companion",
    "funm",
    "hadamard",
    "hankel",
    "helmert",
    "hessenberg",
    "hilbert",
    "inv",
    "invhilbert",
    "invpascal",
    "leslie",
    "lu",
    "lu_factor",
    "lu_solve",
    "pascal",
    "polar",
    "qr",
    "rsf2csf",
    "schur",
    "solve",
    "solve_sylvester",
    "solve_triangular",
    "sqrtm",
    "svd",
    "toeplitz",
]


def _square(fun_name: str, a):
    util.check_arraylike(fun_name, a)
    (a,) = util.promote_dtypes_inexact(util.asarray(a, fun_name=fun_name))
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(
            f"{fun_name}: a must be a square matrix or a stack of square matrices "
            f"(shape [..., n, n]), got shape {a.shape}"
        )
    return a


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
            raise ValueError(
                f"{fun_name}: incompatible shapes a {a.shape} and b {b.shape}; b "
                f"must be [..., {n}] or [..., {n}, k]"
            )
        b = lax.expand_dims(b, (b.ndim,))
    elif b.ndim < 2 or b.shape[-2] != n:
        raise ValueError(
            f"{fun_name}: incompatible shapes a {a.shape} and b {b.shape}; b must "
            f"be [..., {n}] or [..., {n}, k]"
        )
    batch = util.broadcast_shapes(a.shape[:-2], b.shape[:-2], fun_name=fun_name)
    a = util.broadcast_to_shape(a, batch + a.shape[-2:])
    b = util.broadcast_to_shape(b, batch + b.shape[-2:])
    return a, b, vector


def _is_complex(x) -> bool:
    return np.issubdtype(x.dtype, np.complexfloating)


def _substitute(a, b, lower: bool, unit_diagonal: bool, adjoint_a: bool = False):
    """Solve ``a x = b`` (``aᴴ x = b`` with ``adjoint_a``; ``aᵀ`` for real dtypes) for
    triangular [..., n, n] ``a`` and [..., n, k] ``b`` (same batch), reading only ``a``'s
    ``lower`` (or upper) triangle: one ``triangular_solve`` primitive (LAPACK under jit on the
    CPU)."""
    return triangular_solve_p.bind(
        a,
        b,
        left_side=True,
        lower=lower,
        transpose_a=adjoint_a,
        conjugate_a=adjoint_a and _is_complex(a),
        unit_diagonal=unit_diagonal,
    )


def _adjoint(x):
    return np_linalg._adjoint(x)


_TRANS = {0: 0, "N": 0, 1: 1, "T": 1, 2: 2, "C": 2}


def solve_triangular(
    a,
    b,
    trans=0,
    lower: bool = False,
    unit_diagonal: bool = False,
    overwrite_b: bool = False,
    debug=None,
    check_finite: bool = True,
):
    """Solve ``a x = b`` (``trans=0``/``"N"``), ``a.T x = b`` (``1``/``"T"``) or
    ``a.conj().T x = b`` (``2``/``"C"``) for triangular ``a``, reading only its lower
    (``lower=True``) or upper triangle; ``unit_diagonal`` takes its diagonal as ones.

    ``a`` is [..., n, n]; ``b`` is [..., n] or [..., n, k] and the batch dimensions broadcast.
    """
    del overwrite_b, debug, check_finite
    if trans not in _TRANS:
        raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
    a = _square("solve_triangular", a)
    a, b, vector = _rhs("solve_triangular", a, b)
    mode = _TRANS[trans]
    x = triangular_solve_p.bind(
        a,
        b,
        left_side=True,
        lower=bool(lower),
        transpose_a=bool(mode),
        conjugate_a=mode == 2 and _is_complex(a),
        unit_diagonal=bool(unit_diagonal),
    )
    return lax.squeeze(x, (x.ndim - 1,)) if vector else x


def cholesky(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """The Cholesky factor of symmetric (complex: Hermitian) positive definite ``a``: upper
    ``U`` with ``a = U.conj().T @ U`` by default (SciPy's convention), lower ``L`` with
    ``a = L @ L.conj().T`` when ``lower=True``. Not positive definite gives NaNs, as in JAX."""
    del overwrite_a, check_finite
    a = _square("cholesky", a)
    factor = np_linalg.cholesky(a)
    return factor if lower else _adjoint(factor)


def cho_factor(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """``(c, lower)`` for :func:`cho_solve`: ``c`` is :func:`cholesky` ``(a, lower)`` (zeros in
    its other triangle)."""
    del overwrite_a, check_finite
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower, b, overwrite_b: bool = False, check_finite: bool = True):
    """Solve ``a x = b`` given ``(c, lower)`` from :func:`cho_factor`: two triangular solves
    with the factor ``c`` (``L`` then ``Lᴴ``, or ``Uᴴ`` then ``U``; ``ᴴ`` is ``ᵀ`` for real
    dtypes)."""
    del overwrite_b, check_finite
    try:
        c, lower = c_and_lower
        if not isinstance(lower, (bool, np.bool_)):
            raise TypeError
    except (TypeError, ValueError):
        raise TypeError(
            "cho_solve: the first argument must be the pair (c, lower) returned "
            f"by cho_factor, got {type(c_and_lower).__name__}"
        ) from None
    c = _square("cho_solve", c)
    c, b, vector = _rhs("cho_solve", c, b)
    # L y = b, Lᴴ x = y (or Uᴴ y = b, U x = y): the adjoints are the solves' own
    y = _substitute(c, b, lower, False, adjoint_a=not lower)
    x = _substitute(c, y, lower, False, adjoint_a=lower)
    return lax.squeeze(x, (x.ndim - 1,)) if vector else x


_ASSUME_A = ("gen", "sym", "her", "pos")


def solve(
    a,
    b,
    lower: bool = False,
    overwrite_a: bool = False,
    overwrite_b: bool = False,
    debug: bool = False,
    check_finite: bool = True,
    assume_a: str = "gen",
):
    """Solve ``a x = b``. ``assume_a="pos"`` (symmetric, or Hermitian, positive definite) solves
    through the Cholesky factor of ``a``'s ``lower`` (or upper) triangle; ``"gen"``, ``"sym"``
    and ``"her"`` use LU with partial pivoting (:func:`fungrad.numpy.linalg.solve`), as JAX."""
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
    full = lax.sub(lax.add(tri, _adjoint(tri)), diag)
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


def eigh(
    a,
    b=None,
    lower: bool = True,
    eigvals_only: bool = False,
    overwrite_a: bool = False,
    overwrite_b: bool = False,
    turbo: bool = True,
    eigvals=None,
    type: int = 1,
    check_finite: bool = True,
):
    """Eigenvalues (ascending, real) and eigenvectors ``(w, v)`` of a real symmetric or complex
    Hermitian matrix, only its ``lower`` (or upper) triangle read; ``w`` alone with
    ``eigvals_only``. The generalized problem (``b``) and ``eigvals`` subsets are not
    supported."""
    del overwrite_a, overwrite_b, turbo, type, check_finite
    if b is not None:
        raise ValueError(
            "eigh: the generalized problem (b is not None) is not supported by "
            "fungrad; for positive definite b, transform with cholesky(b)"
        )
    if eigvals is not None:
        raise ValueError("eigh: eigvals (a subset) is not supported; slice the result")
    from fungrad.numpy import linalg_decomp

    w, v = linalg_decomp.eigh(a, "L" if lower else "U", symmetrize_input=False)
    return w if eigvals_only else (w, v)


def svd(
    a,
    full_matrices: bool = True,
    compute_uv: bool = True,
    overwrite_a: bool = False,
    check_finite: bool = True,
    lapack_driver: str = "gesdd",
):
    """``(U, s, Vh)`` of a real or complex matrix or stack (``s`` alone without
    ``compute_uv``)."""
    del overwrite_a, check_finite, lapack_driver
    from fungrad.numpy import linalg_decomp

    out = linalg_decomp.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    return tuple(out) if compute_uv else out


def qr(
    a,
    overwrite_a: bool = False,
    lwork=None,
    mode: str = "full",
    pivoting: bool = False,
    check_finite: bool = True,
):
    """QR of a real or complex matrix or stack, SciPy's modes: ``"full"`` ``(Q [m, m], R [m, n])``,
    ``"economic"`` (reduced), ``"r"`` the 1-tuple ``(R,)``."""
    del overwrite_a, lwork, check_finite
    if pivoting:
        raise ValueError("qr: pivoting=True is not supported by fungrad")
    if mode not in ("full", "economic", "r"):
        raise ValueError(f"qr: mode must be 'full', 'economic' or 'r', got {mode!r}")
    from fungrad.numpy import linalg_decomp

    q, r = linalg_decomp.qr(a, mode="reduced" if mode == "economic" else "complete")
    if mode == "r":
        return (r,)
    return q, r


def lu_factor(a, overwrite_a: bool = False, check_finite: bool = True):
    """``(lu, piv)``: the packed LU factors with partial pivoting (the ``lu`` primitive) and
    the 0-based row swaps (row ``i`` swapped with ``piv[i]`` in turn, as SciPy's)."""
    del overwrite_a, check_finite
    util.check_arraylike("lu_factor", a)
    (a,) = util.promote_dtypes_inexact(util.asarray(a, fun_name="lu_factor"))
    lu_, piv, _ = lu_p.bind(a)
    return lu_, piv


def lu_solve(lu_and_piv, b, trans: int = 0, overwrite_b: bool = False, check_finite: bool = True):
    """Solve ``a x = b`` (``trans=0``), ``a.T x = b`` (1) or ``a.conj().T x = b`` (2; the same
    as 1 for real dtypes) from :func:`lu_factor`'s ``(lu, piv)``."""
    del overwrite_b, check_finite
    try:
        lu_, piv = lu_and_piv
    except (TypeError, ValueError):
        raise TypeError(
            "lu_solve: the first argument must be the pair (lu, piv) returned by lu_factor"
        ) from None
    if trans not in (0, 1, 2):
        raise ValueError(f"lu_solve: trans must be 0, 1 or 2, got {trans!r}")
    lu_ = _square("lu_solve", lu_)
    util.check_arraylike("lu_solve", piv)
    piv = util.asarray(piv, fun_name="lu_solve")
    if piv.shape != lu_.shape[:-1]:
        raise ValueError(
            f"lu_solve: piv must have shape {lu_.shape[:-1]} (lu's {lu_.shape} without its "
            f"last dimension), got {piv.shape}"
        )
    perm = lu_pivots_to_permutation(piv, lu_.shape[-1])
    lu_, b2, vector = _rhs("lu_solve", lu_, b)
    batch = lu_.shape[:-2]
    perm = util.broadcast_to_shape(perm, batch + perm.shape[-1:])
    x = _lu.lu_solve(lu_, perm, b2, trans)
    return lax.squeeze(x, (x.ndim - 1,)) if vector else x


def lu(a, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """``(p, l, u)`` with ``a = p @ l @ u`` for [..., m, n] ``a`` (``l`` unit lower
    [m, k], ``u`` upper [k, n], ``k = min(m, n)``, ``p`` a permutation matrix), or
    ``(p @ l, u)`` with ``permute_l``."""
    del overwrite_a, check_finite
    util.check_arraylike("lu", a)
    (a,) = util.promote_dtypes_inexact(util.asarray(a, fun_name="lu"))
    if a.ndim < 2:
        raise ValueError(f"lu: a must be a matrix or a stack of them, got shape {a.shape}")
    packed, _, perm = lu_p.bind(a)
    *batch, m, n = a.shape
    k, nd = min(m, n), a.ndim
    bdims = tuple(range(nd - 2))
    lower = lax.slice_in_dim(packed, 0, k, axis=nd - 1)
    rows = lax.broadcasted_iota(np.int32, lower.shape, nd - 2)
    cols = lax.broadcasted_iota(np.int32, lower.shape, nd - 1)
    lower = lax.select_n(lax.gt(rows, cols), lax.full_like(lower, 0), lower)
    lower = lax.select_n(lax.eq(rows, cols), lower, lax.full_like(lower, 1))
    upper = lax.slice_in_dim(packed, 0, k, axis=nd - 2)
    rows = lax.broadcasted_iota(np.int32, upper.shape, nd - 2)
    cols = lax.broadcasted_iota(np.int32, upper.shape, nd - 1)
    upper = lax.select_n(lax.le(rows, cols), lax.full_like(upper, 0), upper)
    if permute_l:  # (p @ l)[perm[i]] = l[i]: the rows of l scattered back
        inverse = lax.sort(
            (perm, lax.broadcasted_iota(np.int32, perm.shape, nd - 2)), dimension=nd - 2, num_keys=1
        )[1]
        return _lu.permute_rows(lower, inverse), upper
    # p = Pᵀ, P a = L U with (P a)[i] = a[perm[i]]: p[perm[i], i] = 1
    shape = tuple(batch) + (m, m)
    p = lax.eq(
        lax.broadcasted_iota(np.int32, shape, nd - 2),
        lax.broadcast_in_dim(perm, shape, bdims + (nd - 1,)),
    )
    return lax.convert_element_type(p, a.dtype), lower, upper


def block_diag(*arrs):
    """The block-diagonal matrix of ``arrs`` (scalars and vectors count as 1-row matrices)."""
    from fungrad import numpy as fnp

    if not arrs:
        return fnp.zeros((1, 0))
    util.check_arraylike("block_diag", *arrs)
    mats = [fnp.atleast_2d(fnp.asarray(x)) for x in arrs]
    for i, m in enumerate(mats):
        if m.ndim != 2:
            raise ValueError(
                f"block_diag: argument {i} has {m.ndim} dimensions; at most 2 are allowed"
            )
    mats = util.promote_dtypes(*mats)
    total = sum(m.shape[1] for m in mats)
    rows, start = [], 0
    for m in mats:
        rows.append(fnp.pad(m, ((0, 0), (start, total - start - m.shape[1]))))
        start += m.shape[1]
    return fnp.concatenate(rows, axis=0)


# -- special matrices --------------------------------------------------------------------------
# The constructors from vectors take [..., N] arrays and return a matrix per vector (batch
# dimensions broadcast, as JAX's jnp.vectorize would): each is one gather along the last axis
# at indices fixed by the shapes, so they trace, differentiate and batch. The constructors of
# order n (hilbert, pascal, dft...) have no array input: n is static and the matrix is a
# constant, computed by numpy in float64 (exact binomial coefficients, angles reduced modulo
# n) and rounded once to the result dtype.


def _vectors(fun_name: str, *xs):
    """``xs`` (arrays or scalars) as arrays with at least one dimension whose leading (batch)
    dimensions broadcast to one shape."""
    xs = [fnp.atleast_1d(util.asarray(x, fun_name=fun_name)) for x in xs]
    batch = util.broadcast_shapes(*(x.shape[:-1] for x in xs), fun_name=fun_name)
    return [util.broadcast_to_shape(x, batch + x.shape[-1:]) for x in xs]


def _gather(v, index, valid=None):
    """``out[..., i, j] = v[..., index[i, j]]`` for a static integer matrix ``index``, zero
    where the boolean matrix ``valid`` is false."""
    out = fnp.take(v, np.clip(index, 0, max(v.shape[-1] - 1, 0)), axis=-1, mode="clip")
    return out if valid is None else fnp.where(valid, out, fnp.zeros((), v.dtype))


def _grid(rows: int, cols: int):
    return np.arange(rows)[:, None], np.arange(cols)[None, :]


def toeplitz(c, r=None):
    """The Toeplitz matrix with first column ``c`` and first row ``r``: ``T[i, j] = c[i - j]``
    on and below the diagonal, ``r[j - i]`` above (``r[0]`` is ignored). ``r`` defaults to
    ``conj(c)``, which makes the matrix Hermitian when ``c[0]`` is real.

    ``c`` [..., N] and ``r`` [..., M] give [..., N, M] (a scalar is a 1-vector)."""
    util.check_arraylike("toeplitz", *((c,) if r is None else (c, r)))
    if r is None:
        r = fnp.conj(util.asarray(c, fun_name="toeplitz"))
    c, r = _vectors("toeplitz", *util.promote_dtypes(c, r, fun_name="toeplitz"))
    n, m = c.shape[-1], r.shape[-1]
    if n == 0 or m == 0:
        return fnp.zeros(c.shape[:-1] + (n, m), c.dtype)
    # v = [c[n-1], ..., c[0], r[1], ..., r[m-1]]: T[i, j] = v[n - 1 - i + j]
    v = fnp.concatenate([fnp.flip(c, -1), r[..., 1:]], axis=-1)
    i, j = _grid(n, m)
    return _gather(v, n - 1 - i + j)


def hankel(c, r=None):
    """The Hankel matrix with first column ``c`` and last row ``r`` (default zeros; ``r[0]`` is
    ignored): ``H[i, j] = v[i + j]`` for ``v = concatenate([c, r[1:]])``, constant
    anti-diagonals. ``c`` [..., N] and ``r`` [..., M] give [..., N, M]; scalars are errors."""
    util.check_arraylike("hankel", *((c,) if r is None else (c, r)))
    for name, x in (("c", c), ("r", r)):
        if x is not None and np.ndim(x) == 0:
            raise ValueError(f"hankel: {name} must be at least 1-dimensional, got a scalar.")
    if r is None:
        r = fnp.zeros_like(util.asarray(c, fun_name="hankel"))
    c, r = _vectors("hankel", *util.promote_dtypes(c, r, fun_name="hankel"))
    n, m = c.shape[-1], r.shape[-1]
    if n == 0 or m == 0:
        return fnp.zeros(c.shape[:-1] + (n, m), c.dtype)
    i, j = _grid(n, m)
    return _gather(fnp.concatenate([c, r[..., 1:]], axis=-1), i + j)


def circulant(c):
    """The circulant matrix with first column ``c``: ``C[i, j] = c[(i - j) % N]``, each column
    the previous one shifted down cyclically. ``c`` [..., N] gives [..., N, N]."""
    util.check_arraylike("circulant", c)
    (c,) = _vectors("circulant", c)
    i, j = _grid(c.shape[-1], c.shape[-1])
    return _gather(c, (i - j) % max(c.shape[-1], 1))


def leslie(f, s):
    """The Leslie matrix (age-structured population model): fecundities ``f`` [..., N] (N >= 2)
    as the first row, survival rates ``s`` [..., N - 1] on the first subdiagonal, zeros
    elsewhere; [..., N, N], ``f`` and ``s`` promoted together."""
    util.check_arraylike("leslie", f, s)
    f, s = _vectors("leslie", *util.promote_dtypes(f, s, fun_name="leslie"))
    n = f.shape[-1]
    if n < 2:
        raise ValueError(
            f"leslie: the length of f along the last axis must be at least 2; got shape {f.shape}."
        )
    if s.shape[-1] != n - 1:
        raise ValueError(
            "leslie: incorrect lengths for f and s. The length of s along the last axis must be "
            f"one less than the length of f; got f shape {f.shape} and s shape {s.shape}."
        )
    i, j = _grid(n, n)
    return fnp.where(i == 0, f[..., None, :], _gather(s, j, valid=i == j + 1))


def companion(a):
    """The companion matrix of the polynomial with coefficients ``a`` [..., N] (highest power
    first, N >= 2): first row ``-a[1:] / a[0]``, ones on the first subdiagonal, [..., N-1, N-1];
    its eigenvalues are the roots. Inexact (integers become floats). A zero ``a[0]`` gives
    inf/nan entries rather than SciPy's error (values are not checked, as in JAX)."""
    (a,) = util.promote_args_inexact("companion", a)
    (a,) = _vectors("companion", a)
    if a.shape[-1] < 2:
        raise ValueError(
            f"companion: the length of `a` along the last axis must be at least 2; got shape "
            f"{a.shape}."
        )
    return polynomial._companion(a)


def fiedler(a):
    """The symmetric Fiedler matrix ``F[i, j] = |a[i] - a[j]|`` of ``a`` [..., N]: [..., N, N],
    zero diagonal, ``a``'s dtype (bool is an error, as subtraction)."""
    util.check_arraylike("fiedler", a)
    (a,) = _vectors("fiedler", a)
    return fnp.abs(a[..., :, None] - a[..., None, :])


def _fiedler_companion_pattern(m: int):
    """For the [m, m] Fiedler companion matrix: ``coef`` (the index k of the entry ``-a[k]``,
    -1 elsewhere) and ``ones`` (where the entry is 1). Row 0 holds ``-a[1]`` and, in even
    rows i, ``-a[i + 1]`` left of the diagonal and ``-a[i + 2]`` right of it; the ones sit two
    columns right of even rows and two columns left of odd rows (and at [1, 0])."""
    coef = np.full((m, m), -1)
    ones = np.zeros((m, m), bool)
    if m:
        coef[0, 0] = 1
    for i in range(0, m, 2):
        if i >= 2:
            coef[i, i - 1] = i + 1
        if i + 1 < m:
            coef[i, i + 1] = i + 2
        if i + 2 < m:
            ones[i, i + 2] = True
    for i in range(1, m, 2):
        ones[i, i - 2 if i >= 3 else 0] = True
    return coef, ones


def fiedler_companion(a):
    """The Fiedler companion matrix of the polynomial with coefficients ``a`` [..., N] (highest
    power first, N >= 1): a pentadiagonal [..., N-1, N-1] matrix with the polynomial's roots as
    eigenvalues, sparser than :func:`companion`'s. Inexact; ``a[0]`` is not checked for zero."""
    (a,) = util.promote_args_inexact("fiedler_companion", a)
    (a,) = _vectors("fiedler_companion", a)
    if a.shape[-1] == 0:
        raise ValueError(
            "fiedler_companion requires the last axis of 'a' to have nonzero length, but got an "
            f"array of shape {a.shape}."
        )
    coef, ones = _fiedler_companion_pattern(a.shape[-1] - 1)
    a = a / a[..., :1]
    return fnp.where(ones, fnp.ones((), a.dtype), _gather(-a, coef, valid=coef >= 0))


_CONVOLUTION_MODES = ("full", "valid", "same")


def convolution_matrix(a, n: int, mode: str = "full"):
    """The Toeplitz matrix ``A`` [..., k, n] with ``A @ v == convolve(a, v, mode)`` for ``a``
    [..., m] (m >= 1) and ``v`` of length ``n`` (a positive static integer): ``k`` is
    ``m + n - 1`` (``"full"``), ``max(m, n)`` (``"same"``) or ``max(m, n) - min(m, n) + 1``
    (``"valid"``). Keeps ``a``'s dtype."""
    n = operator.index(n)
    if n <= 0:
        raise ValueError(f"convolution_matrix: n must be a positive integer; got {n}.")
    util.check_arraylike("convolution_matrix", a)
    if np.ndim(a) == 0:
        raise ValueError("convolution_matrix: a must be at least 1-dimensional, got a scalar.")
    a = util.asarray(a, fun_name="convolution_matrix")
    m = a.shape[-1]
    if m < 1:
        raise ValueError(f"convolution_matrix: len(a) must be at least 1; got shape {a.shape}.")
    if mode not in _CONVOLUTION_MODES:
        raise ValueError(
            f"convolution_matrix: mode must be one of 'full', 'valid', 'same'; got {mode!r}."
        )
    # Row i of the full matrix (m + n - 1 rows) is a[i - j] over columns j; "same" and "valid"
    # keep the rows from `first` on, the centre and the part where a and v overlap fully.
    shortest, longest = min(m, n), max(m, n)
    first, rows = {
        "full": (0, m + n - 1),
        "same": ((shortest - 1) // 2, longest),
        "valid": (shortest - 1, longest - shortest + 1),
    }[mode]
    i, j = _grid(rows, n)
    k = i + first - j
    return _gather(a, k, valid=(k >= 0) & (k < m))


def _order(fun_name: str, n) -> int:
    try:
        return operator.index(n)
    except TypeError:
        raise TypeError(f"{fun_name}: n must be a static integer, got {n!r}") from None


def _constant(matrix: np.ndarray, dtype):
    """The numpy constant ``matrix`` as an Array of ``dtype``, rounded once."""
    return util.asarray(matrix, dtype=dtype)


def _binomials(size: int) -> np.ndarray:
    """``B[i, j] = C(i, j)`` for ``0 <= i, j < size`` in float64 by Pascal's rule: exact while
    below 2**53, correctly rounded sums beyond."""
    table = np.zeros((size, size))
    table[:, :1] = 1.0
    for i in range(1, size):
        table[i, 1:] = table[i - 1, 1:] + table[i - 1, :-1]
    return table


def hilbert(n: int):
    """The Hilbert matrix ``H[i, j] = 1 / (i + j + 1)`` of order ``n`` (default float dtype),
    computed in that dtype as JAX does (one correctly rounded division per entry)."""
    n = _order("hilbert", n)
    if n < 0:
        raise TypeError(f"hilbert: n must be non-negative, got {n}")
    a = np.arange(n, dtype=dtypes.default_float_dtype())
    return _constant(1 / (a[:, None] + a[None, :] + 1), a.dtype)


def invhilbert(n: int):
    """The inverse of the Hilbert matrix of order ``n`` (default float dtype; a negative ``n``
    gives an empty matrix), from its closed form ``(-1)**(i+j) (i+j+1) C(n+i, n-j-1)
    C(n+j, n-i-1) C(i+j, i)**2``. The entries grow fast: beyond n of about 14 (float64) they
    cannot be represented exactly, and they overflow float32 near n = 30. SciPy's ``exact`` is
    not supported (as in JAX)."""
    n = max(_order("invhilbert", n), 0)
    b = _binomials(2 * n)
    i, j = _grid(n, n)
    s = i + j
    sign = np.where(s % 2 == 0, 1.0, -1.0)
    with np.errstate(over="ignore"):
        inv = sign * (s + 1) * b[n + i, n - j - 1] * b[n + j, n - i - 1] * b[s, i] ** 2
    return _constant(inv, dtypes.default_float_dtype())


_PASCAL_KINDS = ("symmetric", "lower", "upper")


def _pascal_kind(fun_name: str, kind) -> str:
    kind = "symmetric" if kind is None else kind
    if kind not in _PASCAL_KINDS:
        raise ValueError(
            f"{fun_name}: Expected kind to be one of: {list(_PASCAL_KINDS)}; got {kind}"
        )
    return kind


def pascal(n: int, kind: str | None = None):
    """The Pascal matrix of order ``n``: binomial coefficients, ``C(i + j, i)``
    (``kind="symmetric"``, the default), lower-triangular ``C(i, j)`` (``"lower"``) or its
    transpose (``"upper"``). float32 whatever the x64 setting, as in JAX; the coefficients are
    exact (JAX's come from lgamma and are off in the last digits), rounded to float32 above
    2**24. A negative ``n`` gives an empty matrix."""
    kind = _pascal_kind("pascal", kind)
    n = max(_order("pascal", n), 0)
    b = _binomials(2 * n)
    if kind == "symmetric":
        i, j = _grid(n, n)
        mat = b[i + j, i]
    else:
        mat = b[:n, :n] if kind == "lower" else b[:n, :n].T
    return _constant(mat, np.float32)


def invpascal(n: int, kind: str | None = None):
    """The inverse of :func:`pascal` ``(n, kind)`` (default float dtype): ``(-1)**(i - j)
    C(i, j)`` for ``"lower"``, its transpose for ``"upper"``, and ``upper @ lower`` for
    ``"symmetric"``, all integers computed exactly while they fit float64's 53 bits. SciPy's
    ``exact`` is not supported (as in JAX)."""
    kind = _pascal_kind("invpascal", kind)
    n = max(_order("invpascal", n), 0)
    i, j = _grid(n, n)
    lower = np.where((i - j) % 2 == 0, 1.0, -1.0) * _binomials(n)
    mat = {"lower": lower, "upper": lower.T}.get(kind)
    if mat is None:
        mat = lower.T @ lower
    return _constant(mat, dtypes.default_float_dtype())


def helmert(n: int, full: bool = False):
    """The Helmert matrix of order ``n`` (a positive integer; default float dtype): orthonormal
    contrasts, row ``k - 1`` being ``(1, ..., 1, -k, 0, ..., 0) / sqrt(k (k + 1))`` with ``k``
    ones, [n - 1, n]; ``full=True`` puts the row ``1 / sqrt(n)`` first, giving an orthogonal
    [n, n] matrix."""
    n = _order("helmert", n)
    if n < 1:
        raise ValueError(f"helmert: n must be a positive integer; got {n}.")
    i, j = _grid(n - 1, n)
    k = i + 1.0
    mat = np.where(j <= i, 1.0, np.where(j == k, -k, 0.0)) / np.sqrt(k * (k + 1))
    if full:
        mat = np.concatenate([np.full((1, n), 1 / np.sqrt(n)), mat])
    return _constant(mat, dtypes.default_float_dtype())


def hadamard(n: int, dtype=int):
    """The Hadamard matrix of order ``n`` (a positive power of 2) by Sylvester's construction,
    ``H_2m = [[H_m, H_m], [H_m, -H_m]]`` (``H @ H.T == n * I``), of ``dtype`` (default the
    default integer dtype; -1 wraps in unsigned dtypes, and bool cannot hold it)."""
    n = _order("hadamard", n)
    if n < 1 or n & (n - 1):
        raise ValueError(f"hadamard: n must be a positive power of 2; got {n}.")
    dt = (
        dtypes.default_float_dtype()
        if dtype is None
        else dtypes.check_user_dtype(dtype, "hadamard")
    )
    if dt == np.bool_ and n > 1:
        raise TypeError("hadamard: dtype bool cannot hold the -1 entries of a Hadamard matrix")
    mat = np.ones((1, 1), np.int64)
    while mat.shape[0] < n:
        mat = np.block([[mat, mat], [mat, -mat]])
    return _constant(mat, dt)


_DFT_SCALES = (None, "sqrtn", "n")


def dft(n: int, scale: str | None = None, *, dtype=None):
    """The discrete Fourier transform matrix of order ``n``: ``W[i, j] = exp(-2 pi 1j i j / n)``
    (``W @ x == fft(x)``), divided by ``sqrt(n)`` (``scale="sqrtn"``, unitary) or ``n``
    (``"n"``). ``dtype`` must be complex (default: the default complex dtype). The angles are
    reduced modulo ``n`` exactly before rounding, so large orders stay accurate."""
    if scale not in _DFT_SCALES:
        raise ValueError(f"dft: scale must be None, 'sqrtn', or 'n'; got {scale!r}.")
    if dtype is None:
        dt = dtypes.default_complex_dtype()
    else:
        dt = dtypes.check_user_dtype(dtype, "dft")
        if dt.kind != "c":
            raise ValueError(f"dft: dtype must be a complex floating-point type; got {dt}.")
    n = max(_order("dft", n), 0)
    i, j = _grid(n, n)
    w = np.exp(-2j * np.pi * ((i * j) % max(n, 1)) / max(n, 1))
    if scale is not None:
        w = w / (np.sqrt(n) if scale == "sqrtn" else n)
    return _constant(w, dt)


_PADE13 = (
    64764752532480000.0,
    32382376266240000.0,
    7771770303897600.0,
    1187353796428800.0,
    129060195264000.0,
    10559470521600.0,
    670442572800.0,
    33522128640.0,
    1323241920.0,
    40840800.0,
    960960.0,
    16380.0,
    182.0,
    1.0,
)
_THETA13 = 5.371920351148152


def expm(A, *, upper_triangular: bool = False, max_squarings: int = 16):
    """The matrix exponential of a square matrix or stack: the degree-13 Pade approximant of
    ``exp(A / 2^s)`` squared ``s`` times, ``s = ceil(log2(|A|_1 / 5.37))`` clipped to
    ``[0, max_squarings]`` (Higham 2005). Differentiable; ``upper_triangular`` is a hint."""
    del upper_triangular
    from fungrad import numpy as fnp
    from fungrad.numpy import linear

    a = _square("expm", A)
    norm1 = fnp.max(fnp.sum(fnp.abs(a), axis=-2), axis=-1)
    s = fnp.ceil(fnp.log2(fnp.maximum(norm1, 1e-30) / _THETA13))
    s = fnp.clip(fnp.where(fnp.isfinite(s), s, 0), 0, max_squarings)
    a = a / (2.0**s)[..., None, None]
    eye = np_linalg._eye_like(a)
    mm = linear.matmul
    b = _PADE13
    a2 = mm(a, a)
    a4 = mm(a2, a2)
    a6 = mm(a4, a2)
    u = mm(
        a,
        mm(a6, b[13] * a6 + b[11] * a4 + b[9] * a2)
        + b[7] * a6
        + b[5] * a4
        + b[3] * a2
        + b[1] * eye,
    )
    v = mm(a6, b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye
    r = np_linalg.solve(v - u, u + v)
    s_int = s.astype(np.int32)

    def square(i, r):
        keep = (i < s_int)[..., None, None]
        return fnp.where(keep, mm(r, r), r)

    return lax.fori_loop(0, int(max_squarings), square, r)


def expm_frechet(A, E, *, method: str | None = None, compute_expm: bool = True):
    """The Frechet derivative of ``expm`` at ``A`` in the direction ``E`` (both [..., n, n], one
    dtype): ``(expm(A), L(A, E))``, or ``L(A, E)`` alone without ``compute_expm``. It is the
    forward derivative (jvp) of :func:`expm`, as JAX's, so it is exactly consistent with
    ``expm``'s own derivative and cheaper than ``expm`` of the 2n x 2n block matrix
    ``[[A, E], [0, A]]``; ``method`` is ignored, as in JAX."""
    del method
    from fungrad.transforms.autodiff import jvp

    a = util.asarray(A, fun_name="expm_frechet")
    e = util.asarray(E, fun_name="expm_frechet")
    for name, x in (("A", a), ("E", e)):
        if x.ndim < 2 or x.shape[-2] != x.shape[-1]:
            raise ValueError(
                f"expm_frechet: expected {name} to be a (batched) square matrix, got "
                f"{name}.shape={x.shape}"
            )
    if a.shape != e.shape:
        raise ValueError(
            f"expm_frechet: expected A and E to be the same shape, got A.shape={a.shape} "
            f"E.shape={e.shape}"
        )
    if a.dtype != e.dtype or not np.issubdtype(a.dtype, np.inexact):
        raise TypeError(
            "expm_frechet: A and E must have one floating or complex dtype (jvp's rule), "
            f"got {a.dtype} and {e.dtype}"
        )
    expm_a, frechet = jvp(expm, (a,), (e,))
    return (expm_a, frechet) if compute_expm else frechet


def polar(a, side: str = "right", *, method: str = "qdwh", eps=None, max_iterations=None):
    """The polar decomposition ``(u, p)`` of [..., m, n] ``a``: ``a = u @ p`` (``side="right"``,
    ``p`` [..., n, n]) or ``a = p @ u`` (``"left"``, ``p`` [..., m, m]), ``p`` Hermitian positive
    semidefinite and ``u`` [..., m, n] with orthonormal columns (rows when ``n > m``).

    ``method="svd"`` forms ``u = U Vh`` from the reduced SVD. ``method="qdwh"`` (the default)
    runs the QR-based dynamically weighted Halley iteration (Nakatsukasa, Bai, Gygi 2010), which
    needs only QR, Cholesky and matmuls; as in JAX it handles ``m >= n`` with ``side="right"``
    and ``m < n`` with ``side="left"`` only, and ``eps`` (default: the dtype's) must be a
    Python number. ``max_iterations`` (default 10) bounds the iterations; JAX 0.10 accepts and
    ignores it."""
    util.check_arraylike("polar", a)
    x = util.asarray(a, fun_name="polar")
    if x.ndim < 2:
        raise ValueError("polar: the input `a` must be at least a 2-D array.")
    if side not in ("right", "left"):
        raise ValueError("polar: the argument `side` must be either 'right' or 'left'.")
    if not np.issubdtype(x.dtype, np.inexact):
        raise ValueError(f"polar: data type {x.dtype} not inexact")
    if method == "svd":
        u, s, vh = svd(x, full_matrices=False)
        s = s.astype(x.dtype)[..., None, :]
        unitary = u @ vh
        posdef = (_adjoint(vh) * s) @ vh if side == "right" else (u * s) @ _adjoint(u)
        return unitary, posdef
    if method != "qdwh":
        raise ValueError(f"polar: unknown polar decomposition method {method}.")
    m, n = x.shape[-2:]
    if side == "right" and m >= n:
        return _qdwh(x, eps, max_iterations)
    if side == "left" and m < n:
        u, p = _qdwh(_adjoint(x), eps, max_iterations)
        return _adjoint(u), p
    raise NotImplementedError(
        "polar: method='qdwh' supports m >= n with side='right' and m < n with side='left' "
        f"(as JAX), got shape {x.shape} with side={side!r}; use method='svd'"
    )


def _qdwh_weights(l: float, tol_l: float, max_iterations: int) -> list:
    """The dynamic Halley weights ``(a, b, c)`` while the lower bound ``l`` on the scaled
    iterate's smallest singular value is below 1; each step maps ``l`` to
    ``l (a + b l^2) / (1 + c l^2)``. They depend on ``l`` only, so they are Python numbers."""
    weights = []
    while l + tol_l < 1 and len(weights) < max_iterations:
        l2 = l * l
        d = (4 * (1 / l2 - 1) / l2) ** (1 / 3)
        sqd = (1 + d) ** 0.5
        wa = sqd + (8 - 4 * d + 8 * (2 - l2) / (l2 * sqd)) ** 0.5 / 2
        wb = (wa - 1) ** 2 / 4
        wc = wa + wb - 1
        weights.append((wa, wb, wc))
        l = l * (wa + wb * l2) / (1 + wc * l2)
    return weights


def _qdwh(x, eps, max_iterations):
    """QDWH on tall [..., m, n] ``x`` (m >= n): ``(u, h)`` with ``x = u h``.

    Each step is ``u <- (b/c) u + (a - b/c) u (I + c uᴴu)^-1``, a rational map that pushes all
    singular values of ``u`` toward 1. Early steps (``c > 100``: ``I + c uᴴu`` badly
    conditioned) use the QR form ``u (I + c uᴴu)^-1 = q1 q2ᴴ / sqrt(c)`` with
    ``qr([sqrt(c) u; I]) = [q1; q2] r``, later ones a Cholesky factor of ``I + c uᴴu``. After
    the weighted steps, plain Halley steps (3, 1, 3) run until the update is below
    ``cbrt(5 eps)``. A Newton-Schulz step polishes ``u``; ``h = (uᴴx + xᴴu) / 2``."""
    eps = float(np.finfo(x.dtype).eps) if eps is None else float(eps)
    max_iterations = 10 if max_iterations is None else operator.index(max_iterations)
    mm = fnp.matmul
    n = x.shape[-1]
    eye = fnp.eye(n, dtype=x.dtype)
    # scale so that the largest singular value is at most 1: ||x||_2 <= sqrt(||x||_1 ||x||_inf)
    one_norm = fnp.max(fnp.sum(fnp.abs(x), axis=-2), axis=-1)
    inf_norm = fnp.max(fnp.sum(fnp.abs(x), axis=-1), axis=-1)
    scale = fnp.sqrt(one_norm * inf_norm)
    u = x / fnp.where(scale == 0, 1, scale).astype(x.dtype)[..., None, None]

    def cholesky_step(u, wa, wb, wc):
        w = np_linalg.cholesky(wc * mm(_adjoint(u), u) + eye)
        z = _adjoint(cho_solve((w, True), _adjoint(u)))  # u (I + c uᴴu)^-1
        return (wb / wc) * u + (wa - wb / wc) * z

    def qr_step(u, wa, wb, wc):
        q, _ = np_linalg.qr(
            fnp.concatenate([wc**0.5 * u, fnp.broadcast_to(eye, u.shape[:-2] + (n, n))], axis=-2)
        )
        q1, q2 = q[..., :-n, :], q[..., -n:, :]
        return (wb / wc) * u + (wa - wb / wc) / wc**0.5 * mm(q1, _adjoint(q2))

    tol = np.cbrt(5 * eps)
    weights = _qdwh_weights(eps, 5 * eps, max_iterations)
    moved = fnp.array(True)
    for wa, wb, wc in weights:
        if wc > 100:
            u = qr_step(u, wa, wb, wc)
        else:
            new = cholesky_step(u, wa, wb, wc)
            moved = fnp.any(np_linalg.norm(new - u, axis=(-2, -1)) > tol)
            u = new

    def halley(state):
        k, u, _ = state
        new = cholesky_step(u, 3.0, 1.0, 3.0)
        return k + 1, new, fnp.any(np_linalg.norm(new - u, axis=(-2, -1)) > tol)

    _, u, _ = lax.while_loop(
        lambda s: fnp.logical_and(s[2], s[0] < max_iterations),
        halley,
        (len(weights), u, moved),
    )
    u = 1.5 * u - 0.5 * mm(u, mm(_adjoint(u), u))
    h = mm(_adjoint(u), x)
    return u, (h + _adjoint(h)) / 2


def eigh_tridiagonal(
    d,
    e,
    *,
    eigvals_only: bool = False,
    select: str = "a",
    select_range=None,
    tol=None,
    key=None,
):
    """Eigenvalues (ascending) and, unless ``eigvals_only``, eigenvectors (columns) of the
    Hermitian tridiagonal matrix with diagonal ``d`` [n] and superdiagonal ``e`` [n - 1] (its
    subdiagonal is ``conj(e)``; the imaginary part of a complex ``d`` is ignored, as JAX's).

    ``select="a"`` gives all, ``select="i"`` those with indices ``select_range[0] <= i <=
    select_range[1]`` (Python ints); ``select="v"`` raises NotImplementedError, as in JAX. It is
    :func:`eigh` of the dense matrix: exact to rounding (``tol``, JAX's bisection tolerance, is
    ignored) and needs no random start (``key``, JAX's inverse-iteration seed, is ignored)."""
    del tol, key
    util.check_arraylike("eigh_tridiagonal", d, e)
    alpha = util.asarray(d, fun_name="eigh_tridiagonal")
    beta = util.asarray(e, fun_name="eigh_tridiagonal")
    if alpha.dtype != beta.dtype:
        raise TypeError(
            "eigh_tridiagonal: diagonal and off-diagonal values must have same dtype, "
            f"got {alpha.dtype} and {beta.dtype}"
        )
    if not np.issubdtype(alpha.dtype, np.inexact) or alpha.dtype == np.float16:
        raise TypeError(
            "eigh_tridiagonal: only float32, float64, complex64 and complex128 inputs are "
            f"supported, got {alpha.dtype} and {beta.dtype}"
        )
    n = alpha.shape[0] if alpha.ndim == 1 else -1
    if n < 0 or beta.shape != (max(n - 1, 0),):
        raise TypeError(
            "eigh_tridiagonal: d must have shape (n,) and e shape (n - 1,), got "
            f"{alpha.shape} and {beta.shape}"
        )
    if select == "a":
        lo, hi = 0, n - 1
    elif select == "i":
        if select_range is None:
            raise ValueError("eigh_tridiagonal: for select='i', select_range must be specified.")
        lo, hi = (operator.index(i) for i in select_range)
        if lo > hi:
            raise ValueError("eigh_tridiagonal: got empty index range in select_range.")
        if lo < 0 or hi >= n:
            raise ValueError(
                f"eigh_tridiagonal: select_range {select_range} is outside [0, {n - 1}]"
            )
    elif select == "v":
        raise NotImplementedError("eigh_tridiagonal(..., select='v') is not implemented")
    else:
        raise ValueError("eigh_tridiagonal: select must have a value in {'a', 'i', 'v'}.")
    t = fnp.diag(fnp.real(alpha).astype(alpha.dtype))
    if n > 1:
        t = t + fnp.diag(beta, 1) + fnp.diag(fnp.conj(beta), -1)
    w, v = eigh(t)
    w, v = w[lo : hi + 1], v[:, lo : hi + 1]
    return w if eigvals_only else (w, v)
