"""Matrix decompositions of fungrad.numpy.linalg: ``eigh``/``eigvalsh`` (cyclic Jacobi),
``qr`` (Householder) and ``multi_dot``, written on fungrad.lax only.

``eigh`` runs cyclic Jacobi sweeps: each rotation zeroes one off-diagonal pair ``(p, q)``
(Golub & Van Loan, Alg. 8.5.2) by updating rows and columns ``p`` and ``q`` through dynamic
indexing and masks, one ``fori_loop`` over the n(n-1)/2 pairs per sweep inside a
``while_loop`` that stops when the off-diagonal mass is below float rounding (at most 30
sweeps; Jacobi converges quadratically, typically in 5-8). Rotations are batched over leading
dimensions: every matrix of a stack uses the same ``(p, q)`` with its own angle. Its
derivative is the closed form of a custom JVP (``dw = diag(V^T dA V)``,
``dV = V (F * V^T dA V)`` with ``F_ij = 1 / (w_j - w_i)``), so repeated eigenvalues give
inf/NaN derivatives, as in JAX. Eigenvalues are ascending; each eigenvector's sign is the one
Jacobi produces (any sign is a valid answer; LAPACK's may differ).

``qr`` applies min(m, n) Householder reflections ``H = I - 2 v v^T`` with LAPACK's sign
convention (``R[k, k] = -sign(x_k) |x|``, a zero column is left as it is), so ``Q`` and ``R``
match LAPACK's (and JAX's) up to rounding.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from fungrad import core, lax
from fungrad.numpy import linear, util

__all__ = [
    "EighResult",
    "QRResult",
    "SVDResult",
    "cond",
    "eigh",
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


def _float_matrix(fun_name: str, a, square: bool):
    util.check_arraylike(fun_name, a)
    (a,) = util.promote_dtypes_inexact(util.asarray(a, fun_name=fun_name))
    if np.issubdtype(a.dtype, np.complexfloating):
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


def _iota(shape, dim):
    return lax.broadcasted_iota(np.int32, shape, dim)


def _eye_like(a):
    eq = lax.eq(_iota(a.shape, a.ndim - 2), _iota(a.shape, a.ndim - 1))
    return lax.convert_element_type(eq, a.dtype)


def _bcast(x, shape, dims):
    return lax.broadcast_in_dim(x, shape, dims)


# -- eigh ----------------------------------------------------------------------------------------


def _mix(x, p, q, c, s, axis):
    """Rows (``axis = ndim - 2``) or columns (``ndim - 1``) ``p`` and ``q`` of the stack ``x``
    rotated: ``p' = c p - s q``, ``q' = s p + c q`` (``c``, ``s`` of the batch shape)."""
    nd = x.ndim
    batch = tuple(range(nd - 2))
    others = tuple(d for d in range(nd) if d != axis)
    xp = lax.dynamic_index_in_dim(x, p, axis, keepdims=False)
    xq = lax.dynamic_index_in_dim(x, q, axis, keepdims=False)
    cb, sb = _bcast(c, xp.shape, batch), _bcast(s, xp.shape, batch)
    new_p = _bcast(lax.sub(lax.mul(cb, xp), lax.mul(sb, xq)), x.shape, others)
    new_q = _bcast(lax.add(lax.mul(sb, xp), lax.mul(cb, xq)), x.shape, others)
    idx = _iota(x.shape, axis)
    x = lax.select_n(lax.eq(idx, p), x, new_p)
    return lax.select_n(lax.eq(idx, q), x, new_q)


def _rotation(alpha, beta, gamma):
    """``(c, s)`` of the Jacobi rotation that zeroes ``gamma`` in the symmetric 2x2
    ``[[alpha, gamma], [gamma, beta]]`` (the smaller of the two angles); identity where
    ``gamma == 0``."""
    zero, one = lax.full_like(gamma, 0), lax.full_like(gamma, 1)
    nonzero = lax.ne(gamma, zero)
    safe = lax.select_n(nonzero, one, gamma)
    zeta = lax.div(lax.sub(beta, alpha), lax.mul(lax.full_like(gamma, 2), safe))
    sign = lax.select_n(lax.ge(zeta, zero), lax.neg(one), one)
    t = lax.div(sign, lax.add(lax.abs(zeta), lax.sqrt(lax.add(one, lax.mul(zeta, zeta)))))
    c = lax.rsqrt(lax.add(one, lax.mul(t, t)))
    return lax.select_n(nonzero, one, c), lax.select_n(nonzero, zero, lax.mul(t, c))


def _rotate(a, v, p, q):
    """One Jacobi rotation of the symmetric stack ``a`` zeroing ``a[..., p, q]``; ``v``
    accumulates the rotations (``v <- v J``). ``p < q`` are traced int32 scalars."""
    nd = a.ndim
    row_p = lax.dynamic_index_in_dim(a, p, nd - 2, keepdims=False)  # [..., n]
    row_q = lax.dynamic_index_in_dim(a, q, nd - 2, keepdims=False)
    a_pp = lax.dynamic_index_in_dim(row_p, p, nd - 2, keepdims=False)  # [...]
    a_qq = lax.dynamic_index_in_dim(row_q, q, nd - 2, keepdims=False)
    a_pq = lax.dynamic_index_in_dim(row_p, q, nd - 2, keepdims=False)
    c, s = _rotation(a_pp, a_qq, a_pq)

    a = _mix(_mix(a, p, q, c, s, nd - 2), p, q, c, s, nd - 1)
    return a, _mix(v, p, q, c, s, nd - 1)


def _off_diagonal_ratio(a):
    """max over the batch of ``|offdiag(a)|^2 / |a|^2`` (0 for an all-zero matrix)."""
    sq = lax.mul(a, a)
    off = lax.select_n(
        lax.eq(_iota(a.shape, a.ndim - 2), _iota(a.shape, a.ndim - 1)), sq, lax.full_like(sq, 0)
    )
    axes = (a.ndim - 2, a.ndim - 1)
    total = lax.reduce_sum(sq, axes)
    ratio = lax.div(
        lax.reduce_sum(off, axes),
        lax.select_n(lax.gt(total, lax.full_like(total, 0)), lax.full_like(total, 1), total),
    )
    return lax.reduce_max(ratio, tuple(range(ratio.ndim))) if ratio.ndim else ratio


def _sweeps(a, v, rotate, off_ratio):
    """Cyclic Jacobi: sweeps of ``rotate(a, v, p, q)`` over every pair ``p < q`` of the last
    axis of ``v`` (one ``fori_loop`` per sweep) until ``off_ratio(a)`` is below the dtype's
    eps squared, at most 30 sweeps."""
    n = v.shape[-1]
    if n < 2:
        return a, v
    pairs = [(p, q) for p in range(n - 1) for q in range(p + 1, n)]
    ps = util.asarray(np.array([p for p, _ in pairs], np.int32))
    qs = util.asarray(np.array([q for _, q in pairs], np.int32))
    tol = float(np.finfo(a.dtype).eps) ** 2

    def sweep(state):
        a, v, k = state

        def one(i, av):
            p = lax.dynamic_index_in_dim(ps, i, 0, keepdims=False)
            q = lax.dynamic_index_in_dim(qs, i, 0, keepdims=False)
            return rotate(av[0], av[1], p, q)

        a, v = lax.fori_loop(0, len(pairs), one, (a, v))
        return a, v, lax.add(k, np.int32(1))

    def not_done(state):
        ratio = off_ratio(state[0])
        return lax.bitwise_and(
            lax.lt(state[2], np.int32(30)), lax.gt(ratio, lax.full_like(ratio, tol))
        )

    a, v, _ = lax.while_loop(not_done, sweep, (a, v, np.int32(0)))
    return a, v


def _jacobi_eigh(a):
    """Eigenvalues (ascending) and eigenvectors of the symmetric float stack ``a``."""
    n = a.shape[-1]
    if n == 0 or any(d == 0 for d in a.shape[:-2]):
        return lax.full(a.shape[:-1], 0, a.dtype), lax.full_like(a, 0)
    a, v = _sweeps(a, _eye_like(a), _rotate, _off_diagonal_ratio)
    w = linear.diagonal(a, 0, -2, -1)
    order = lax.broadcast_in_dim(lax.iota(np.int32, n), w.shape, (w.ndim - 1,))
    w, order = lax.sort((w, order), dimension=w.ndim - 1, num_keys=1)
    v = _permute_columns(v, order)
    return w, v


def _permute_columns(v, order):
    """``v[..., :, order]`` with one ``order`` per matrix (a one-hot matmul: no gather)."""
    n = v.shape[-1]
    nd = v.ndim
    shape = order.shape[:-1] + (n, n)
    onehot = lax.eq(_iota(shape, nd - 2), _bcast(order, shape, tuple(range(nd - 2)) + (nd - 1,)))
    return linear.matmul(v, lax.convert_element_type(onehot, v.dtype))


def _eigh_jvp_rule(primals, tangents):
    (a,), (a_dot,) = primals, tangents
    w, v = _eigh_core(a)
    vt_adot_v = linear.matmul(linear.matmul(_t(v), a_dot), v)
    n = w.shape[-1]
    shape = w.shape + (n,)
    nd = len(shape)
    batch = tuple(range(nd - 2))
    w_row = _bcast(w, shape, batch + (nd - 1,))  # w_j
    w_col = _bcast(w, shape, batch + (nd - 2,))  # w_i
    eye = _eye_like(lax.full(shape, 0, w.dtype))
    f = lax.sub(lax.div(lax.full(shape, 1, w.dtype), lax.add(eye, lax.sub(w_row, w_col))), eye)
    dv = linear.matmul(v, lax.mul(f, vt_adot_v))
    dw = linear.diagonal(vt_adot_v, 0, -2, -1)
    return (w, v), (dw, dv)


_eigh_core_fn = None


def _eigh_core(a):
    global _eigh_core_fn
    if _eigh_core_fn is None:
        from fungrad.transforms.custom import custom_jvp  # late: the transforms import numpy

        fn = custom_jvp(_jacobi_eigh)
        fn.defjvp(_eigh_jvp_rule)
        _eigh_core_fn = fn
    return _eigh_core_fn(a)


def _triangle_symmetric(a, lower: bool):
    rows, cols = _iota(a.shape, a.ndim - 2), _iota(a.shape, a.ndim - 1)
    tri = lax.select_n(lax.ge(rows, cols) if lower else lax.le(rows, cols), lax.full_like(a, 0), a)
    diag = lax.select_n(lax.eq(rows, cols), lax.full_like(a, 0), a)
    return lax.sub(lax.add(tri, _t(tri)), diag)


def eigh(a, UPLO=None, symmetrize_input: bool = True):
    """Eigenvalues (ascending) and eigenvectors (columns) of a real symmetric matrix or stack:
    ``EighResult(eigenvalues, eigenvectors)``. With ``symmetrize_input`` (the default) the
    matrix used is ``(a + a.T) / 2``; otherwise only its ``UPLO`` triangle (``"L"``, the
    default, or ``"U"``) is read."""
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    a = _float_matrix("eigh", a, square=True)
    if symmetrize_input:
        a = lax.mul(lax.add(a, _t(a)), lax.full_like(a, 0.5))
    else:
        a = _triangle_symmetric(a, UPLO != "U")
    w, v = _eigh_core(a)
    return EighResult(w, v)


def eigvalsh(a, UPLO="L", *, symmetrize_input: bool = True):
    """The eigenvalues (ascending) of a real symmetric matrix or stack (see :func:`eigh`)."""
    return eigh(a, UPLO, symmetrize_input).eigenvalues


# -- qr ------------------------------------------------------------------------------------------


def _householder(r, q, k, m):
    """Reflect rows k.. of ``r`` [..., m, n] (and accumulate into ``q`` [..., m, mq]) so column
    ``k`` is zero below the diagonal. ``k`` is a traced int32 scalar."""
    nd = r.ndim
    batch = tuple(range(nd - 2))
    col = lax.dynamic_index_in_dim(r, k, nd - 1, keepdims=False)  # [..., m]
    rows = _iota(col.shape, nd - 2)
    x = lax.select_n(lax.ge(rows, k), lax.full_like(col, 0), col)
    norm = lax.sqrt(lax.reduce_sum(lax.mul(x, x), (nd - 2,)))  # [...]
    x_k = lax.dynamic_index_in_dim(col, k, nd - 2, keepdims=False)
    zero = lax.full_like(norm, 0)
    sign = lax.select_n(lax.lt(x_k, zero), lax.full_like(norm, 1), lax.full_like(norm, -1))
    alpha = lax.mul(sign, norm)  # v = x + sign(x_k) |x| e_k
    v = lax.add(
        x, lax.select_n(lax.eq(rows, k), lax.full_like(x, 0), _bcast(alpha, x.shape, batch))
    )
    vnorm2 = lax.reduce_sum(lax.mul(v, v), (nd - 2,))
    ok = lax.gt(vnorm2, zero)
    scale = lax.select_n(
        ok, zero, lax.div(lax.full_like(norm, 2), lax.select_n(ok, lax.full_like(norm, 1), vnorm2))
    )  # 2 / |v|^2, 0 for a zero column
    v_col = lax.expand_dims(v, (nd - 1,))  # [..., m, 1]
    # r <- r - scale v (v^T r);  q <- q - scale (q v) v^T
    r = lax.sub(
        r, lax.mul(_bcast(scale, r.shape, batch), linear.matmul(v_col, linear.matmul(_t(v_col), r)))
    )
    q = lax.sub(
        q, lax.mul(_bcast(scale, q.shape, batch), linear.matmul(linear.matmul(q, v_col), _t(v_col)))
    )
    return r, q


def qr(a, mode: str = "reduced"):
    """QR decomposition of a real matrix or stack by Householder reflections.

    ``mode="reduced"`` (default): ``Q`` [..., m, K], ``R`` [..., K, n] with K = min(m, n);
    ``"complete"``: ``Q`` [..., m, m], ``R`` [..., m, n]; ``"r"``: ``R`` only (reduced)."""
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    a = _float_matrix("qr", a, square=False)
    m, n = a.shape[-2:]
    kk = min(m, n)
    q = _eye_like(lax.full(a.shape[:-2] + (m, m), 0, a.dtype))
    r = a
    steps = min(m - 1, n)  # the last row of a tall/square matrix needs no reflection
    if steps > 0:
        r, q = lax.fori_loop(
            0,
            steps,
            lambda k, rq: _householder(rq[0], rq[1], lax.convert_element_type(k, np.int32), m),
            (r, q),
        )
    # exact zeros below the diagonal
    r = lax.select_n(
        lax.gt(_iota(r.shape, r.ndim - 2), _iota(r.shape, r.ndim - 1)), r, lax.full_like(r, 0)
    )
    if mode == "complete":
        return QRResult(q, r)
    r = lax.slice_in_dim(r, 0, kk, axis=r.ndim - 2)
    if mode == "r":
        return r
    return QRResult(lax.slice_in_dim(q, 0, kk, axis=q.ndim - 1), r)


# -- svd -----------------------------------------------------------------------------------------


class SVDResult(NamedTuple):
    U: object
    S: object
    Vh: object


def _rotate_columns(m, v, p, q):
    """One-sided (Hestenes) Jacobi: rotate columns ``p``, ``q`` of ``m`` (and of ``v``) so
    they become orthogonal."""
    nd = m.ndim
    mp = lax.dynamic_index_in_dim(m, p, nd - 1, keepdims=False)
    mq = lax.dynamic_index_in_dim(m, q, nd - 1, keepdims=False)
    dot = lambda x, y: lax.reduce_sum(lax.mul(x, y), (nd - 2,))  # noqa: E731
    c, s = _rotation(dot(mp, mp), dot(mq, mq), dot(mp, mq))
    return _mix(m, p, q, c, s, nd - 1), _mix(v, p, q, c, s, nd - 1)


def _column_coherence(m):
    """max over pairs and batch of ``(m_p . m_q)^2 / (|m_p|^2 |m_q|^2)`` (zero columns
    count as orthogonal)."""
    g = linear.matmul(_t(m), m)
    d = linear.diagonal(g, 0, -2, -1)
    nd = g.ndim
    batch = tuple(range(nd - 2))
    denom = lax.mul(_bcast(d, g.shape, batch + (nd - 1,)), _bcast(d, g.shape, batch + (nd - 2,)))
    off = lax.ne(_iota(g.shape, nd - 2), _iota(g.shape, nd - 1))
    ok = lax.bitwise_and(off, lax.gt(denom, lax.full_like(denom, 0)))
    ratio = lax.select_n(
        ok,
        lax.full_like(g, 0),
        lax.div(lax.mul(g, g), lax.select_n(ok, lax.full_like(g, 1), denom)),
    )
    return lax.reduce_max(ratio, tuple(range(nd)))


def _svd_tall(a, full_matrices: bool):
    """``(u, s, vt)`` of the [..., m, n] stack ``a`` with m >= n: one-sided Jacobi makes the
    columns of ``a v`` orthogonal; their norms, sorted descending, are ``s``; ``u`` is the Q
    of a QR of those columns with its signs fixed so R's diagonal is non-negative (which also
    completes ``u`` to orthonormal columns where ``s`` is 0, or to a square ``u``)."""
    m, n = a.shape[-2:]
    mv, v = _sweeps(
        a,
        _eye_like(lax.full(a.shape[:-2] + (n, n), 0, a.dtype)),
        _rotate_columns,
        _column_coherence,
    )
    sv = lax.sqrt(lax.reduce_sum(lax.mul(mv, mv), (a.ndim - 2,)))  # [..., n]
    order = lax.broadcast_in_dim(lax.iota(np.int32, n), sv.shape, (sv.ndim - 1,))
    neg, order = lax.sort((lax.neg(sv), order), dimension=sv.ndim - 1, num_keys=1)
    sv = lax.neg(neg)
    mv, v = _permute_columns(mv, order), _permute_columns(v, order)
    q, r = qr(mv, mode="complete" if full_matrices else "reduced")
    d = linear.diagonal(r, 0, -2, -1)  # [..., n]
    signs = lax.select_n(lax.lt(d, lax.full_like(d, 0)), lax.full_like(d, 1), lax.full_like(d, -1))
    if full_matrices and m > n:
        signs = lax.concatenate(
            [signs, lax.full(signs.shape[:-1] + (m - n,), 1, d.dtype)], signs.ndim - 1
        )
    u = lax.mul(q, _bcast(signs, q.shape, tuple(range(q.ndim - 2)) + (q.ndim - 1,)))
    return u, sv, _t(v)


def _svd_any(a, full_matrices: bool):
    m, n = a.shape[-2:]
    if m >= n:
        return _svd_tall(a, full_matrices)
    u, sv, vt = _svd_tall(_t(a), full_matrices)
    return _t(vt), sv, _t(u)


def _svd_jvp(primals, tangents):
    """Tangents of the reduced SVD ``a = U diag(s) Vt``: with ``dS = U^T da V``,
    ``ds = diag(dS)``; the rotations within the singular subspaces are
    ``F * (dS S + S dS^T)`` for U and ``F * (S dS + dS^T S)`` for V with
    ``F_ij = 1 / (s_j^2 - s_i^2)``, plus the components of ``da`` outside them
    (``(I - U U^T) da V / s`` for a tall ``a``, the transpose for a wide one). Repeated
    singular values give inf/NaN, as in JAX."""
    (a,), (da,) = primals, tangents
    u, sv, vt = _svd_reduced(a)
    v = _t(vt)
    ds_mat = linear.matmul(linear.matmul(_t(u), da), v)
    ds = linear.diagonal(ds_mat, 0, -2, -1)
    k = sv.shape[-1]
    shape = sv.shape + (k,)
    nd = len(shape)
    batch = tuple(range(nd - 2))
    s_j = _bcast(sv, shape, batch + (nd - 1,))
    s_i = _bcast(sv, shape, batch + (nd - 2,))
    eye = _eye_like(lax.full(shape, 0, sv.dtype))
    diff = lax.mul(lax.add(s_j, s_i), lax.sub(s_j, s_i))
    f = lax.sub(lax.div(lax.full_like(diff, 1), lax.add(diff, eye)), eye)
    ds_s = lax.mul(ds_mat, s_j)  # dS diag(s)
    s_ds = lax.mul(s_i, ds_mat)  # diag(s) dS
    zero_s = lax.eq(sv, lax.full_like(sv, 0))
    s_inv = lax.select_n(
        zero_s,
        lax.div(lax.full_like(sv, 1), lax.select_n(zero_s, sv, lax.full_like(sv, 1))),
        lax.full_like(sv, 0),
    )
    skew = lax.mul(
        lax.mul(lax.sub(ds_mat, _t(ds_mat)), lax.full_like(ds_mat, 0.5)),
        lax.mul(eye, _bcast(s_inv, shape, batch + (nd - 1,))),
    )
    du = linear.matmul(u, lax.add(lax.mul(f, lax.add(ds_s, _t(ds_s))), skew))
    dv = linear.matmul(v, lax.mul(f, lax.add(s_ds, _t(s_ds))))
    m, n = a.shape[-2:]
    s_row = lambda x: _bcast(sv, x.shape, batch + (nd - 1,))  # noqa: E731
    if m > n:
        dav = linear.matmul(da, v)
        du = lax.add(
            du, lax.div(lax.sub(dav, linear.matmul(u, linear.matmul(_t(u), dav))), s_row(dav))
        )
    if n > m:
        dau = linear.matmul(_t(da), u)
        dv = lax.add(
            dv, lax.div(lax.sub(dau, linear.matmul(v, linear.matmul(vt, dau))), s_row(dau))
        )
    return (u, sv, vt), (du, ds, _t(dv))


def _svdvals_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    u, sv, vt = _svd_reduced(a)
    ds = linear.diagonal(linear.matmul(linear.matmul(_t(u), da), _t(vt)), 0, -2, -1)
    return sv, ds


def _svd_full_jvp(primals, tangents):
    raise TypeError(
        "svd: derivatives of full_matrices=True are not supported (nor in JAX); "
        "use full_matrices=False"
    )


_svd_fns: dict = {}


def _custom(name, fn, rule):
    wrapped = _svd_fns.get(name)
    if wrapped is None:
        from fungrad.transforms.custom import custom_jvp  # late: the transforms import numpy

        wrapped = custom_jvp(fn)
        wrapped.defjvp(rule)
        _svd_fns[name] = wrapped
    return wrapped


def _svd_reduced(a):
    return _custom("reduced", lambda x: _svd_any(x, False), _svd_jvp)(a)


def _svd_full(a):
    return _custom("full", lambda x: _svd_any(x, True), _svd_full_jvp)(a)


def _svdvals(a):
    return _custom("vals", lambda x: _svd_any(x, False)[1], _svdvals_jvp)(a)


def svd(
    a,
    full_matrices: bool = True,
    compute_uv: bool = True,
    hermitian: bool = False,
    subset_by_index=None,
):
    """Singular value decomposition ``a = U @ diag(S) @ Vh`` of a real matrix or stack, by
    one-sided Jacobi: ``SVDResult(U, S, Vh)`` with ``S`` descending, or ``S`` alone when
    ``compute_uv=False``. ``full_matrices=True`` (the default) gives square ``U`` and ``Vh``.
    ``hermitian`` is accepted and does not change the method. Singular vectors are unique only
    up to sign (and within repeated singular values); LAPACK's may differ."""
    del hermitian
    if subset_by_index is not None:
        raise ValueError(
            "svd: subset_by_index is not supported by fungrad; slice the result "
            "of the full decomposition instead"
        )
    a = _float_matrix("svd", a, square=False)
    m, n = a.shape[-2:]
    if min(m, n) == 0 or any(d == 0 for d in a.shape[:-2]):
        if not compute_uv:
            return lax.full(a.shape[:-2] + (min(m, n),), 0, a.dtype)
        ku, kv = (m, n) if full_matrices else (min(m, n), min(m, n))
        return SVDResult(
            _eye_like(lax.full(a.shape[:-2] + (m, ku), 0, a.dtype)),
            lax.full(a.shape[:-2] + (min(m, n),), 0, a.dtype),
            _eye_like(lax.full(a.shape[:-2] + (kv, n), 0, a.dtype)),
        )
    if not compute_uv:
        return _svdvals(a)
    u, sv, vt = _svd_full(a) if full_matrices else _svd_reduced(a)
    return SVDResult(u, sv, vt)


def svdvals(x, /):
    """The singular values of a matrix or stack, descending (``svd(x, compute_uv=False)``)."""
    return svd(x, compute_uv=False)


def _default_rtol(a):
    return float(np.finfo(a.dtype).eps) * max(a.shape[-2:])


def matrix_rank(M, rtol=None, *, hermitian: bool = False, tol=None):
    """The number of singular values above ``rtol * S.max()`` (``rtol`` defaults to
    ``eps * max(m, n)``). ``tol`` is JAX's deprecated spelling of ``rtol``."""
    del hermitian
    if tol is not None:
        if rtol is not None:
            raise TypeError("matrix_rank: pass rtol or tol, not both")
        rtol = tol
    M = util.asarray(M, fun_name="matrix_rank")
    if M.ndim < 2:
        return lax.convert_element_type(
            lax.reduce_or(lax.ne(M, lax.full_like(M, 0)), tuple(range(M.ndim))), np.int32
        )
    sv = svdvals(M)
    rtol = _default_rtol(sv) * 1.0 if rtol is None else rtol
    (rtol,) = util.promote_dtypes_inexact(util.asarray(rtol))
    top = (
        lax.reduce_max(sv, (sv.ndim - 1,)) if sv.shape[-1] else lax.full(sv.shape[:-1], 0, sv.dtype)
    )
    cut = lax.mul(lax.convert_element_type(rtol, sv.dtype), top)
    cut = _bcast(cut, sv.shape, tuple(range(sv.ndim - 1)))
    return lax.reduce_sum(lax.convert_element_type(lax.gt(sv, cut), np.int32), (sv.ndim - 1,))


def _pinv_value(a, rtol):
    u, sv, vt = _svd_any(a, False)
    top = lax.reduce_max(sv, (sv.ndim - 1,))
    cut = _bcast(lax.mul(rtol, top), sv.shape, tuple(range(sv.ndim - 1)))
    keep = lax.gt(sv, cut)
    s_inv = lax.select_n(
        keep,
        lax.full_like(sv, 0),
        lax.div(lax.full_like(sv, 1), lax.select_n(keep, lax.full_like(sv, 1), sv)),
    )
    scaled = lax.mul(_t(vt), _bcast(s_inv, _t(vt).shape, tuple(range(sv.ndim - 1)) + (sv.ndim,)))
    return linear.matmul(scaled, _t(u))


def _pinv_jvp(rtol, primals, tangents):
    """Golub & Pereyra's derivative of the pseudo-inverse ``P`` of ``A``:
    ``dP = -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P``."""
    (a,), (da,) = primals, tangents
    pa = _pinv_core(a, rtol)
    mm = linear.matmul
    eye_m = _eye_like(lax.full(a.shape[:-1] + (a.shape[-2],), 0, a.dtype))
    eye_n = _eye_like(lax.full(a.shape[:-2] + (a.shape[-1], a.shape[-1]), 0, a.dtype))
    d = lax.neg(mm(mm(pa, da), pa))
    d = lax.add(d, mm(mm(mm(pa, _t(pa)), _t(da)), lax.sub(eye_m, mm(a, pa))))
    d = lax.add(d, mm(mm(lax.sub(eye_n, mm(pa, a)), _t(da)), mm(_t(pa), pa)))
    return pa, d


def _pinv_core(a, rtol):
    fn = _svd_fns.get("pinv")
    if fn is None:
        from fungrad.transforms.custom import custom_jvp

        fn = _svd_fns["pinv"] = custom_jvp(_pinv_value, nondiff_argnums=(1,))
        fn.defjvp(_pinv_jvp)
    return fn(a, rtol)


def pinv(a, rtol=None, hermitian: bool = False, *, rcond=None):
    """The Moore-Penrose pseudo-inverse of a matrix or stack, from its SVD: singular values
    at most ``rtol * S.max()`` (default ``10 * max(m, n) * eps``) are treated as zero.
    ``rcond`` is JAX's deprecated spelling of ``rtol``. Differentiable (Golub & Pereyra)."""
    del hermitian
    if rcond is not None:
        if rtol is not None:
            raise TypeError("pinv: pass rtol or rcond, not both")
        rtol = rcond
    a = _float_matrix("pinv", a, square=False)
    m, n = a.shape[-2:]
    if min(m, n) == 0:
        return lax.full(a.shape[:-2] + (n, m), 0, a.dtype)
    if rtol is None:
        rtol = 10.0 * _default_rtol(a)
    try:
        rtol = float(rtol)
    except TypeError:
        raise TypeError(f"pinv: rtol must be a Python or numpy scalar, got {rtol!r}") from None
    return _pinv_core(a, rtol)


def lstsq(a, b, rcond=None, *, numpy_resid: bool = False):
    """Least-squares solution of ``a @ x = b`` by SVD: ``(x, resid, rank, s)``. Singular
    values at most ``rcond * s.max()`` (default ``eps * max(m, n)``) count as zero; ``resid``
    is the squared residual norm of each column of ``b`` (shape ``(k,)``, ``(1,)`` for a
    vector ``b``). With ``numpy_resid`` it is empty unless ``rank == n < m``, as in numpy
    (then ``rank`` must be concrete: not under jit)."""
    a = _float_matrix("lstsq", a, square=False)
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
    utb = linear.matmul(_t(u), b2)
    x = linear.matmul(_t(vt), lax.mul(_bcast(s_inv, utb.shape, (0,)), utb))
    r = lax.sub(b2, linear.matmul(a, x))
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

    x = _float_matrix("cond", x, square=p not in (None, 2, -2))
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
