"""Matrix decompositions of fungrad.numpy.linalg: ``eigh``/``eigvalsh``, ``qr``, ``svd``/
``svdvals`` and what builds on them (``pinv``, ``lstsq``, ``matrix_rank``, ``cond``), plus
``multi_dot``; ``eig``/``eigvals`` (general matrices, complex results).

The decompositions bind the ``eigh``, ``qr`` and ``svd`` primitives
(:mod:`fungrad.lax.linalg_decomp_primitives`: numpy's LAPACK eagerly, LAPACK from the native
code under jit on the CPU, loop algorithms on the GPU), which carry JAX's derivative rules:
repeated eigenvalues or singular values give inf/NaN derivatives, as in JAX. Eigenvalues are
ascending, singular values descending; eigen- and singular vectors are unique only up to sign.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from fungrad import core, lax
from fungrad.lax.linalg_decomp_primitives import eigh_p, geqrf_p, qr_p, svd_p
from fungrad.lax.linalg_eig import eig_p
from fungrad.numpy import linear, util

__all__ = [
    "EigResult",
    "EighResult",
    "QRResult",
    "SVDResult",
    "cond",
    "eig",
    "eigh",
    "eigvals",
    "eigvalsh",
    "lstsq",
    "matrix_rank",
    "multi_dot",
    "pinv",
    "qr",
    "svd",
    "svdvals",
]


class EighResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class QRResult(NamedTuple):
    Q: object
    R: object


def _float_matrix(fun_name: str, a, square: bool, complex_ok: bool = False):
    """``a`` as an inexact matrix (or stack) for ``fun_name``; complex only if ``complex_ok``."""
    util.check_arraylike(fun_name, a)
    (a,) = util.promote_dtypes_inexact(util.asarray(a, fun_name=fun_name))
    if not complex_ok and np.issubdtype(a.dtype, np.complexfloating):
        raise TypeError(
            f"{fun_name}: complex matrices are not supported by fungrad (got "
            f"{a.dtype}); pass a real matrix"
        )
    if a.ndim < 2 or (square and a.shape[-1] != a.shape[-2]):
        what = (
            "a square matrix or a stack of them (shape [..., n, n])"
            if square
            else "a matrix or a stack of matrices (shape [..., m, n])"
        )
        raise ValueError(f"{fun_name}: argument must be {what}, got shape {a.shape}")
    return a


def _t(x):
    return lax.transpose(x, tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2))


def _h(x):
    """The conjugate transpose of the matrices of ``x`` (the transpose when real)."""
    return lax.conj(_t(x)) if np.issubdtype(x.dtype, np.complexfloating) else _t(x)


def _as_dtype(x, dtype):
    """``x`` converted to ``dtype`` (itself when it has it already)."""
    return x if x.dtype == dtype else lax.convert_element_type(x, dtype)


def _hermitian_part(a):
    """``(a + aᴴ) / 2``."""
    return lax.mul(lax.add(a, _h(a)), lax.full_like(a, 0.5))


def _iota(shape, dim):
    return lax.broadcasted_iota(np.int32, shape, dim)


def _eye_like(a):
    eq = lax.eq(_iota(a.shape, a.ndim - 2), _iota(a.shape, a.ndim - 1))
    return lax.convert_element_type(eq, a.dtype)


def _bcast(x, shape, dims):
    return lax.broadcast_in_dim(x, shape, dims)


# -- eigh ----------------------------------------------------------------------------------------


def eigh(a, UPLO=None, symmetrize_input: bool = True):
    """Eigenvalues (ascending, real) and eigenvectors (columns) of a real symmetric or complex
    Hermitian matrix or stack: ``EighResult(eigenvalues, eigenvectors)``. With
    ``symmetrize_input`` (the default) the matrix used is ``(a + aᴴ) / 2``; otherwise only its
    ``UPLO`` triangle (``"L"``, the default, or ``"U"``) is read (and the real part of its
    diagonal). Complex eigenvectors are unique only up to a phase per column."""
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    a = _float_matrix("eigh", a, square=True, complex_ok=True)
    if symmetrize_input:
        a = _hermitian_part(a)
    v, w = eigh_p.bind(a, lower=UPLO != "U", sort_eigenvalues=True)
    return EighResult(w, v)


def eigvalsh(a, UPLO="L", *, symmetrize_input: bool = True):
    """The eigenvalues (ascending, real) of a symmetric or Hermitian matrix or stack (see
    :func:`eigh`)."""
    return eigh(a, UPLO, symmetrize_input).eigenvalues


# -- eig ----------------------------------------------------------------------------------------


class EigResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


def eig(a):
    """Eigenvalues and right eigenvectors (columns of norm 1, largest component real) of a
    real or complex square matrix or stack: ``EigResult(eigenvalues, eigenvectors)``, complex
    (complex64 for float32), in LAPACK's order (for real input a conjugate pair adjacent).
    Not differentiable in the eigenvectors (as in JAX); :func:`eigvals` is. Under jit it runs
    on the CPU only (LAPACK ``geev``)."""
    a = _float_matrix("eig", a, square=True, complex_ok=True)
    w, v = eig_p.bind(a, compute_left_eigenvectors=False, compute_right_eigenvectors=True)
    return EigResult(w, v)


def eigvals(a):
    """The (complex) eigenvalues of a real or complex square matrix or stack (see
    :func:`eig`); differentiable: ``dw_j = u_jᴴ dA v_j / u_jᴴ v_j`` with the left and right
    eigenvectors."""
    a = _float_matrix("eigvals", a, square=True, complex_ok=True)
    (w,) = eig_p.bind(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False)
    return w


# -- qr ------------------------------------------------------------------------------------------


def qr(a, mode: str = "reduced"):
    """QR decomposition of a real or complex matrix or stack (LAPACK's Householder QR and
    signs).

    ``mode="reduced"`` (default): ``Q`` [..., m, K], ``R`` [..., K, n] with K = min(m, n);
    ``"complete"``: ``Q`` [..., m, m], ``R`` [..., m, n]; ``"r"``: ``R`` only (reduced);
    ``"raw"``: LAPACK's representation ``(h, tau)`` as numpy's, ``h`` [..., n, m] the packed
    factors transposed and ``tau`` [..., K] the reflectors' scales (not differentiable)."""
    if mode not in ("reduced", "complete", "r", "raw"):
        raise ValueError(f"qr: mode must be 'reduced', 'complete', 'r' or 'raw', got {mode!r}")
    a = _float_matrix("qr", a, square=False, complex_ok=True)
    if mode == "raw":
        packed, taus = geqrf_p.bind(a)
        return QRResult(_t(packed), taus)
    q, r = qr_p.bind(a, full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


# -- svd -----------------------------------------------------------------------------------------


class SVDResult(NamedTuple):
    U: object
    S: object
    Vh: object


def _svd_reduced(a):
    """``(u, s, vt)`` of the reduced SVD of the inexact stack ``a``."""
    s, u, vt = svd_p.bind(a, full_matrices=False, compute_uv=True)
    return u, s, vt


def svd(
    a,
    full_matrices: bool = True,
    compute_uv: bool = True,
    hermitian: bool = False,
    subset_by_index=None,
):
    """Singular value decomposition ``a = U @ diag(S) @ Vh`` of a real or complex matrix or
    stack: ``SVDResult(U, S, Vh)`` with ``S`` descending (real), or ``S`` alone when
    ``compute_uv=False``. ``full_matrices=True`` (the default) gives square ``U`` and ``Vh``.
    With ``hermitian`` the (square, Hermitian) matrix is decomposed through :func:`eigh`, as
    JAX: ``S = |w|`` sorted descending, ``U`` the matching eigenvectors,
    ``Vh = (U sign(w))ᴴ``. Singular vectors are unique only up to sign (a phase when complex;
    and within repeated singular values)."""
    if subset_by_index is not None:
        raise ValueError(
            "svd: subset_by_index is not supported by fungrad; slice the result "
            "of the full decomposition instead"
        )
    a = _float_matrix("svd", a, square=bool(hermitian), complex_ok=True)
    if hermitian:
        return _svd_hermitian(a, bool(compute_uv))
    outs = svd_p.bind(a, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))
    if not compute_uv:
        return outs[0]
    s, u, vt = outs
    return SVDResult(u, s, vt)


def _svd_hermitian(a, compute_uv: bool):
    from fungrad.numpy.indexing import take_along_axis

    v, w = eigh_p.bind(_hermitian_part(a), lower=True, sort_eigenvalues=True)
    last = w.ndim - 1
    idx = lax.broadcasted_iota(np.int32, w.shape, last)
    # ascending |w|, then reversed (JAX's order among ties)
    s, idx, sign = lax.sort((lax.abs(w), idx, lax.sign(w)), dimension=last, num_keys=1)
    s, idx, sign = (lax.rev(t, (last,)) for t in (s, idx, sign))
    if not compute_uv:
        return s
    u = take_along_axis(v, lax.expand_dims(idx, (last,)), axis=-1)
    sign = lax.broadcast_in_dim(sign, u.shape, tuple(range(last)) + (last + 1,))
    return SVDResult(u, s, _h(lax.mul(u, _as_dtype(sign, u.dtype))))


def svdvals(x, /):
    """The singular values of a matrix or stack, descending (``svd(x, compute_uv=False)``)."""
    return svd(x, compute_uv=False)


def _default_rtol(a):
    return float(np.finfo(a.dtype).eps) * max(a.shape[-2:])


def matrix_rank(M, rtol=None, *, hermitian: bool = False, tol=None):
    """The number of singular values above ``rtol * S.max()`` (``rtol`` defaults to
    ``eps * max(m, n)``; ``hermitian``: the singular values come from :func:`eigh`, as in
    :func:`svd`). ``tol`` is JAX's deprecated spelling of ``rtol``."""
    if tol is not None:
        if rtol is not None:
            raise TypeError("matrix_rank: pass rtol or tol, not both")
        rtol = tol
    M = util.asarray(M, fun_name="matrix_rank")
    if M.ndim < 2:
        return lax.convert_element_type(
            lax.reduce_or(lax.ne(M, lax.full_like(M, 0)), tuple(range(M.ndim))), np.int32
        )
    sv = svd(M, compute_uv=False, hermitian=hermitian)
    rtol = _default_rtol(sv) * 1.0 if rtol is None else rtol
    (rtol,) = util.promote_dtypes_inexact(util.asarray(rtol))
    top = (
        lax.reduce_max(sv, (sv.ndim - 1,)) if sv.shape[-1] else lax.full(sv.shape[:-1], 0, sv.dtype)
    )
    cut = lax.mul(lax.convert_element_type(rtol, sv.dtype), top)
    cut = _bcast(cut, sv.shape, tuple(range(sv.ndim - 1)))
    return lax.reduce_sum(lax.convert_element_type(lax.gt(sv, cut), np.int32), (sv.ndim - 1,))


def _pinv_value(a, rtol, hermitian):
    u, sv, vt = _svd_hermitian(a, True) if hermitian else _svd_reduced(a)
    top = lax.reduce_max(sv, (sv.ndim - 1,))
    cut = _bcast(lax.mul(rtol, top), sv.shape, tuple(range(sv.ndim - 1)))
    keep = lax.gt(sv, cut)
    s_inv = lax.select_n(
        keep,
        lax.full_like(sv, 0),
        lax.div(lax.full_like(sv, 1), lax.select_n(keep, lax.full_like(sv, 1), sv)),
    )
    s_inv = _as_dtype(s_inv, vt.dtype)
    scaled = lax.mul(_h(vt), _bcast(s_inv, _t(vt).shape, tuple(range(sv.ndim - 1)) + (sv.ndim,)))
    return linear.matmul(scaled, _h(u))


def _pinv_jvp(rtol, hermitian, primals, tangents):
    """Golub & Pereyra's derivative of the pseudo-inverse ``P`` of ``A``:
    ``dP = -P dA P + P Pᴴ dAᴴ (I - A P) + (I - P A) dAᴴ Pᴴ P``."""
    (a,), (da,) = primals, tangents
    if hermitian:  # the value reads the Hermitian part
        a, da = _hermitian_part(a), _hermitian_part(da)
    pa = _pinv_core(a, rtol, hermitian)
    mm = linear.matmul
    eye_m = _eye_like(lax.full(a.shape[:-1] + (a.shape[-2],), 0, a.dtype))
    eye_n = _eye_like(lax.full(a.shape[:-2] + (a.shape[-1], a.shape[-1]), 0, a.dtype))
    d = lax.neg(mm(mm(pa, da), pa))
    d = lax.add(d, mm(mm(mm(pa, _h(pa)), _h(da)), lax.sub(eye_m, mm(a, pa))))
    d = lax.add(d, mm(mm(lax.sub(eye_n, mm(pa, a)), _h(da)), mm(_h(pa), pa)))
    return pa, d


_pinv_fns: dict = {}


def _pinv_core(a, rtol, hermitian):
    fn = _pinv_fns.get("pinv")
    if fn is None:
        from fungrad.transforms.custom import custom_jvp

        fn = _pinv_fns["pinv"] = custom_jvp(_pinv_value, nondiff_argnums=(1, 2))
        fn.defjvp(_pinv_jvp)
    return fn(a, rtol, hermitian)


def pinv(a, rtol=None, hermitian: bool = False, *, rcond=None):
    """The Moore-Penrose pseudo-inverse of a matrix or stack, from its SVD: singular values
    at most ``rtol * S.max()`` (default ``10 * max(m, n) * eps``) are treated as zero.
    ``rcond`` is JAX's deprecated spelling of ``rtol``; ``hermitian``: the SVD comes from
    :func:`eigh`, as in :func:`svd`. Differentiable (Golub & Pereyra)."""
    if rcond is not None:
        if rtol is not None:
            raise TypeError("pinv: pass rtol or rcond, not both")
        rtol = rcond
    a = _float_matrix("pinv", a, square=bool(hermitian), complex_ok=True)
    m, n = a.shape[-2:]
    if min(m, n) == 0:
        return lax.full(a.shape[:-2] + (n, m), 0, a.dtype)
    if rtol is None:
        rtol = 10.0 * _default_rtol(a)
    try:
        rtol = float(rtol)
    except TypeError:
        raise TypeError(f"pinv: rtol must be a Python or numpy scalar, got {rtol!r}") from None
    return _pinv_core(a, rtol, bool(hermitian))


def lstsq(a, b, rcond=None, *, numpy_resid: bool = False):
    """Least-squares solution of ``a @ x = b`` by SVD: ``(x, resid, rank, s)``. Singular
    values at most ``rcond * s.max()`` (default ``eps * max(m, n)``) count as zero; ``resid``
    is the squared residual norm of each column of ``b`` (shape ``(k,)``, ``(1,)`` for a
    vector ``b``). With ``numpy_resid`` it is empty unless ``rank == n < m``, as in numpy
    (then ``rank`` must be concrete: not under jit)."""
    a = _float_matrix("lstsq", a, square=False, complex_ok=True)
    if a.ndim != 2:
        raise ValueError(f"lstsq: a must be 2-D, got shape {a.shape}")
    util.check_arraylike("lstsq", b)
    a, b = util.promote_dtypes_inexact(a, util.asarray(b, fun_name="lstsq"))
    m, n = a.shape
    vector = b.ndim == 1
    if b.ndim not in (1, 2) or b.shape[0] != m:
        raise ValueError(
            f"lstsq: b must be [{m}] or [{m}, k] to match a of shape {a.shape}, got {b.shape}"
        )
    b2 = lax.expand_dims(b, (1,)) if vector else b
    if rcond is None:
        rcond = _default_rtol(a)
    u, sv, vt = _svd_reduced(a)
    if sv.shape[-1]:
        top = lax.reduce_max(sv, (0,))
        keep = lax.ge(sv, lax.mul(lax.full_like(top, rcond), top))
        keep = lax.bitwise_and(keep, lax.gt(sv, lax.full_like(sv, 0)))
    else:
        keep = lax.gt(sv, sv)
    rank = lax.reduce_sum(lax.convert_element_type(keep, np.int32), (0,))
    s_inv = lax.select_n(
        keep,
        lax.full_like(sv, 0),
        lax.div(lax.full_like(sv, 1), lax.select_n(keep, lax.full_like(sv, 1), sv)),
    )
    utb = linear.matmul(_h(u), b2)
    s_inv = _as_dtype(s_inv, utb.dtype)
    x = linear.matmul(_h(vt), lax.mul(_bcast(s_inv, utb.shape, (0,)), utb))
    r = lax.sub(b2, linear.matmul(a, x))
    if np.issubdtype(r.dtype, np.complexfloating):  # |r|², real
        r_re, r_im = lax.real(r), lax.imag(r)
        resid = lax.reduce_sum(lax.add(lax.mul(r_re, r_re), lax.mul(r_im, r_im)), (0,))
    else:
        resid = lax.reduce_sum(lax.mul(r, r), (0,))
    if numpy_resid:
        concrete = rank.to_concrete_value() if isinstance(rank, core.Tracer) else rank
        if concrete is None:
            raise TypeError(
                "lstsq: numpy_resid=True needs a concrete rank (it decides the "
                "shape of resid) and cannot be used under jit/vmap; use "
                "numpy_resid=False"
            )
        if not (m > n and int(np.asarray(concrete)) == n):
            resid = lax.full((0,), 0, resid.dtype)
    if vector:
        x = lax.squeeze(x, (1,))
    return x, resid, rank, sv


def cond(x, p=None):
    """The condition number of a matrix or stack: ``S.max() / S.min()`` for ``p`` None, 2 or
    -2 (its inverse); otherwise ``norm(x, p) * norm(inv(x), p)`` (square ``x``)."""
    from fungrad.numpy import linalg as np_linalg

    x = _float_matrix("cond", x, square=p not in (None, 2, -2), complex_ok=True)
    if p in (None, 2, -2):
        sv = svdvals(x)
        hi = lax.reduce_max(sv, (sv.ndim - 1,))
        lo = lax.reduce_min(sv, (sv.ndim - 1,))
        return lax.div(lo, hi) if p == -2 else lax.div(hi, lo)
    return lax.mul(
        np_linalg.norm(x, p, axis=(-2, -1)), np_linalg.norm(np_linalg.inv(x), p, axis=(-2, -1))
    )


# -- multi_dot -----------------------------------------------------------------------------------


def multi_dot(arrays, *, precision=None):
    """The product of a sequence of arrays, the first and last allowed to be 1-D, multiplied
    in the order of least work (the matrix-chain dynamic program over their shapes)."""
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ValueError(f"multi_dot: expected at least two arrays, got {len(arrays)}")
    util.check_arraylike("multi_dot", *arrays)
    arrays = [util.asarray(x, fun_name="multi_dot") for x in arrays]
    first_1d, last_1d = arrays[0].ndim == 1, arrays[-1].ndim == 1
    if first_1d:
        arrays[0] = lax.expand_dims(arrays[0], (0,))
    if last_1d:
        arrays[-1] = lax.expand_dims(arrays[-1], (1,))
    for i, x in enumerate(arrays):
        if x.ndim != 2:
            raise ValueError(
                f"multi_dot: array {i} must be 2-D (only the first and last may "
                f"be 1-D), got shape {x.shape}"
            )
    dims = [arrays[0].shape[0]] + [x.shape[1] for x in arrays]
    for i in range(len(arrays) - 1):
        if arrays[i].shape[1] != arrays[i + 1].shape[0]:
            raise ValueError(
                f"multi_dot: shapes {arrays[i].shape} and {arrays[i + 1].shape} "
                f"(arrays {i} and {i + 1}) are not aligned"
            )
    count = len(arrays)
    cost = [[0] * count for _ in range(count)]
    split = [[0] * count for _ in range(count)]
    for length in range(1, count):
        for i in range(count - length):
            j = i + length
            cost[i][j] = None
            for s in range(i, j):
                c = cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, s

    def product(i, j):
        if i == j:
            return arrays[i]
        s = split[i][j]
        return linear.matmul(product(i, s), product(s + 1, j), precision=precision)

    out = product(0, count - 1)
    if first_1d:
        out = lax.squeeze(out, (0,))
    if last_1d:
        out = lax.squeeze(out, (out.ndim - 1,))
    return out
