"""The ``qr``, ``eigh`` and ``svd`` primitives as loop algorithms written on lax alone: what a
backend without LAPACK (the GPU) lowers inline (:mod:`fungrad.lax.linalg_decomp_primitives`).

* :func:`eigh_loop`: cyclic Jacobi sweeps; each rotation zeroes one off-diagonal pair
  ``(p, q)`` (Golub & Van Loan, Alg. 8.5.2) by updating rows and columns ``p`` and ``q``
  through dynamic indexing and masks, one ``fori_loop`` over the n(n-1)/2 pairs per sweep inside
  a ``while_loop`` that stops when the off-diagonal mass is below the dtype's rounding (at most
  30 sweeps; Jacobi converges quadratically, typically in 5-8). Every matrix of a stack uses the
  same ``(p, q)`` with its own angle. Eigenvalues ascending; each vector's sign is Jacobi's.
* :func:`qr_loop`: min(m - 1, n) Householder reflections ``H = I - 2 v vᵀ`` with LAPACK's sign
  convention (``R[k, k] = -sign(x_k) |x|``, a zero column left as it is), so ``Q`` and ``R``
  match LAPACK's up to rounding.
* :func:`geqrf_loop`: LAPACK's ``geqrf`` itself: min(m, n) reflectors ``I - tau v vᵀ`` with
  ``v[k] = 1``, ``beta = -sign(alpha) |x|``, ``tau = (beta - alpha) / beta`` (``tau = 0`` where
  the column below the diagonal is zero), packed as LAPACK packs them.
* :func:`svd_loop`: one-sided (Hestenes) Jacobi makes the columns of ``a v`` orthogonal; their
  norms, sorted descending, are ``s``; ``u`` is the Q of a QR of those columns with signs fixed
  so R's diagonal is non-negative (which completes ``u`` where ``s`` is 0, or to a square
  ``u``). A wide matrix is decomposed through its transpose.

Each program has the same size for every ``n`` (loops, dynamic indexing, masked updates).
"""

from __future__ import annotations

import numpy as np

from fungrad import core

__all__ = ["eigh_loop", "geqrf_loop", "qr_loop", "svd_loop"]


def _lax():
    from fungrad import lax

    return lax


def _t(x):
    nd = core.get_aval(x).ndim
    return _lax().transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _matmul(x, y):
    """Batched ``x @ y`` over equal leading batch dimensions."""
    nd = core.get_aval(x).ndim
    batch = tuple(range(nd - 2))
    return _lax().dot_general(x, y, (((nd - 1,), (nd - 2,)), (batch, batch)))


def _iota(shape, dim):
    return _lax().broadcasted_iota(np.int32, shape, dim)


def _eye(shape, dtype):
    """[..., r, c] stack of identities (ones where row == column)."""
    lax = _lax()
    nd = len(shape)
    return lax.convert_element_type(lax.eq(_iota(shape, nd - 2), _iota(shape, nd - 1)), dtype)


def _diagonal(x):
    """The main diagonal of the [..., r, c] stack ``x``: [..., min(r, c)]."""
    lax = _lax()
    shape = core.get_aval(x).shape
    nd = len(shape)
    on = lax.eq(_iota(shape, nd - 2), _iota(shape, nd - 1))
    d = lax.reduce_sum(lax.select_n(on, lax.full_like(x, 0), x), (nd - 2,))  # [..., c]
    k = min(shape[-2:])
    return lax.slice_in_dim(d, 0, k, axis=nd - 2)


def _bcast(x, shape, dims):
    return _lax().broadcast_in_dim(x, shape, dims)


# -- Jacobi rotations ---------------------------------------------------------------------------


def _mix(x, p, q, c, s, axis):
    """Rows (``axis = ndim - 2``) or columns (``ndim - 1``) ``p`` and ``q`` of the stack ``x``
    rotated: ``p' = c p - s q``, ``q' = s p + c q`` (``c``, ``s`` of the batch shape)."""
    lax = _lax()
    shape = core.get_aval(x).shape
    nd = len(shape)
    batch = tuple(range(nd - 2))
    others = tuple(d for d in range(nd) if d != axis)
    xp = lax.dynamic_index_in_dim(x, p, axis, keepdims=False)
    xq = lax.dynamic_index_in_dim(x, q, axis, keepdims=False)
    xshape = core.get_aval(xp).shape
    cb, sb = _bcast(c, xshape, batch), _bcast(s, xshape, batch)
    new_p = _bcast(lax.sub(lax.mul(cb, xp), lax.mul(sb, xq)), shape, others)
    new_q = _bcast(lax.add(lax.mul(sb, xp), lax.mul(cb, xq)), shape, others)
    idx = _iota(shape, axis)
    x = lax.select_n(lax.eq(idx, p), x, new_p)
    return lax.select_n(lax.eq(idx, q), x, new_q)


def _rotation(alpha, beta, gamma):
    """``(c, s)`` of the Jacobi rotation that zeroes ``gamma`` in the symmetric 2x2
    ``[[alpha, gamma], [gamma, beta]]`` (the smaller of the two angles); identity where
    ``gamma == 0``."""
    lax = _lax()
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
    lax = _lax()
    nd = core.get_aval(a).ndim
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
    lax = _lax()
    shape = core.get_aval(a).shape
    nd = len(shape)
    sq = lax.mul(a, a)
    off = lax.select_n(lax.eq(_iota(shape, nd - 2), _iota(shape, nd - 1)), sq, lax.full_like(sq, 0))
    axes = (nd - 2, nd - 1)
    total = lax.reduce_sum(sq, axes)
    ratio = lax.div(
        lax.reduce_sum(off, axes),
        lax.select_n(lax.gt(total, lax.full_like(total, 0)), lax.full_like(total, 1), total),
    )
    rnd = core.get_aval(ratio).ndim
    return lax.reduce_max(ratio, tuple(range(rnd))) if rnd else ratio


def _sweeps(a, v, rotate, off_ratio):
    """Cyclic Jacobi: sweeps of ``rotate(a, v, p, q)`` over every pair ``p < q`` of the last
    axis of ``v`` (one ``fori_loop`` per sweep) until ``off_ratio(a)`` is below the dtype's
    eps squared, at most 30 sweeps."""
    lax = _lax()
    n = core.get_aval(v).shape[-1]
    if n < 2:
        return a, v
    pairs = [(p, q) for p in range(n - 1) for q in range(p + 1, n)]
    ps = np.array([p for p, _ in pairs], np.int32)
    qs = np.array([q for _, q in pairs], np.int32)
    tol = float(np.finfo(core.get_aval(a).dtype).eps) ** 2

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


def _permute_columns(v, order):
    """``v[..., :, order]`` with one ``order`` per matrix (a one-hot matmul: no gather)."""
    lax = _lax()
    vshape = core.get_aval(v).shape
    n, nd = vshape[-1], len(vshape)
    shape = core.get_aval(order).shape[:-1] + (n, n)
    onehot = lax.eq(_iota(shape, nd - 2), _bcast(order, shape, tuple(range(nd - 2)) + (nd - 1,)))
    return _matmul(v, lax.convert_element_type(onehot, core.get_aval(v).dtype))


def _triangle_symmetric(a, lower: bool):
    """The symmetric matrix whose ``lower`` (or upper) triangle is ``a``'s."""
    lax = _lax()
    shape = core.get_aval(a).shape
    rows, cols = _iota(shape, len(shape) - 2), _iota(shape, len(shape) - 1)
    keep = lax.ge(rows, cols) if lower else lax.le(rows, cols)
    tri = lax.select_n(keep, lax.full_like(a, 0), a)
    diag = lax.select_n(lax.eq(rows, cols), lax.full_like(a, 0), a)
    return lax.sub(lax.add(tri, _t(tri)), diag)


# -- eigh ---------------------------------------------------------------------------------------


def eigh_loop(a, *, lower: bool = True, sort_eigenvalues: bool = True):
    """``[v, w]`` of :data:`eigh_p` by cyclic Jacobi (eigenvalues always ascending)."""
    del sort_eigenvalues
    lax = _lax()
    aval = core.get_aval(a)
    n = aval.shape[-1]
    if n == 0 or 0 in aval.shape[:-2]:
        return [lax.full_like(a, 0), lax.full(aval.shape[:-1], 0, aval.dtype)]
    a = _triangle_symmetric(a, lower)
    a, v = _sweeps(a, _eye(aval.shape, aval.dtype), _rotate, _off_diagonal_ratio)
    w = _diagonal(a)
    wd = core.get_aval(w).ndim
    order = lax.broadcast_in_dim(lax.iota(np.int32, n), core.get_aval(w).shape, (wd - 1,))
    w, order = lax.sort((w, order), dimension=wd - 1, num_keys=1)
    return [_permute_columns(v, order), w]


# -- qr -----------------------------------------------------------------------------------------


def _householder(r, q, k):
    """Reflect rows k.. of ``r`` [..., m, n] (and accumulate into ``q`` [..., m, m]) so column
    ``k`` is zero below the diagonal. ``k`` is a traced int32 scalar."""
    lax = _lax()
    nd = core.get_aval(r).ndim
    batch = tuple(range(nd - 2))
    col = lax.dynamic_index_in_dim(r, k, nd - 1, keepdims=False)  # [..., m]
    cshape = core.get_aval(col).shape
    rows = _iota(cshape, nd - 2)
    x = lax.select_n(lax.ge(rows, k), lax.full_like(col, 0), col)
    norm = lax.sqrt(lax.reduce_sum(lax.mul(x, x), (nd - 2,)))  # [...]
    x_k = lax.dynamic_index_in_dim(col, k, nd - 2, keepdims=False)
    zero = lax.full_like(norm, 0)
    sign = lax.select_n(lax.lt(x_k, zero), lax.full_like(norm, 1), lax.full_like(norm, -1))
    alpha = lax.mul(sign, norm)  # v = x + sign(x_k) |x| e_k
    v = lax.add(x, lax.select_n(lax.eq(rows, k), lax.full_like(x, 0), _bcast(alpha, cshape, batch)))
    vnorm2 = lax.reduce_sum(lax.mul(v, v), (nd - 2,))
    ok = lax.gt(vnorm2, zero)
    scale = lax.select_n(
        ok, zero, lax.div(lax.full_like(norm, 2), lax.select_n(ok, lax.full_like(norm, 1), vnorm2))
    )  # 2 / |v|^2, 0 for a zero column
    v_col = lax.expand_dims(v, (nd - 1,))  # [..., m, 1]
    rshape, qshape = core.get_aval(r).shape, core.get_aval(q).shape
    # r <- r - scale v (vᵀ r);  q <- q - scale (q v) vᵀ
    r = lax.sub(r, lax.mul(_bcast(scale, rshape, batch), _matmul(v_col, _matmul(_t(v_col), r))))
    q = lax.sub(q, lax.mul(_bcast(scale, qshape, batch), _matmul(_matmul(q, v_col), _t(v_col))))
    return r, q


def qr_loop(a, *, full_matrices: bool = True):
    """``[q, r]`` of :data:`qr_p` by Householder reflections."""
    lax = _lax()
    aval = core.get_aval(a)
    m, n = aval.shape[-2:]
    k = min(m, n)
    q = _eye(aval.shape[:-2] + (m, m), aval.dtype)
    r = a
    steps = min(m - 1, n)  # the last row of a tall/square matrix needs no reflection
    if steps > 0:
        r, q = lax.fori_loop(
            0,
            steps,
            lambda i, rq: _householder(rq[0], rq[1], lax.convert_element_type(i, np.int32)),
            (r, q),
        )
    nd = aval.ndim
    below = lax.gt(_iota(aval.shape, nd - 2), _iota(aval.shape, nd - 1))
    r = lax.select_n(below, r, lax.full_like(r, 0))  # exact zeros below the diagonal
    if full_matrices:
        return [q, r]
    return [lax.slice_in_dim(q, 0, k, axis=nd - 1), lax.slice_in_dim(r, 0, k, axis=nd - 2)]


def _lapack_reflector(r, vs, taus, k):
    """Step ``k`` of LAPACK's Householder QR (``dlarfg`` + ``dlarf``) of the stack ``r``: its
    reflector's vector goes into column ``k`` of ``vs`` (below the diagonal), its scale into
    ``taus[..., k]``, and ``r`` is reflected. ``k`` is a traced int32 scalar."""
    lax = _lax()
    nd = core.get_aval(r).ndim
    batch = tuple(range(nd - 2))
    col = lax.dynamic_index_in_dim(r, k, nd - 1, keepdims=False)  # [..., m]
    cshape = core.get_aval(col).shape
    rows = _iota(cshape, nd - 2)
    zero_c = lax.full_like(col, 0)
    x = lax.select_n(lax.gt(rows, k), zero_c, col)  # below the diagonal
    alpha = lax.dynamic_index_in_dim(col, k, nd - 2, keepdims=False)  # [...]
    xnorm2 = lax.reduce_sum(lax.mul(x, x), (nd - 2,))
    zero, one = lax.full_like(alpha, 0), lax.full_like(alpha, 1)
    norm = lax.sqrt(lax.add(lax.mul(alpha, alpha), xnorm2))
    beta = lax.select_n(lax.lt(alpha, zero), lax.neg(norm), norm)  # -sign(alpha) |(alpha, x)|
    ok = lax.gt(xnorm2, zero)
    safe_beta = lax.select_n(ok, one, beta)
    tau = lax.select_n(ok, zero, lax.div(lax.sub(beta, alpha), safe_beta))
    scale = lax.select_n(ok, zero, lax.div(one, lax.select_n(ok, one, lax.sub(alpha, beta))))
    v = lax.mul(x, _bcast(scale, cshape, batch))
    v = lax.select_n(lax.eq(rows, k), v, lax.full_like(v, 1))  # v[k] = 1
    v_col = lax.expand_dims(v, (nd - 1,))  # [..., m, 1]
    rshape = core.get_aval(r).shape
    r = lax.sub(r, lax.mul(_bcast(tau, rshape, batch), _matmul(v_col, _matmul(_t(v_col), r))))
    vshape = core.get_aval(vs).shape
    below = lax.select_n(lax.gt(rows, k), zero_c, v)
    vs = lax.select_n(
        lax.eq(_iota(vshape, nd - 1), k), vs, _bcast(below, vshape, batch + (nd - 2,))
    )
    tshape = core.get_aval(taus).shape
    taus = lax.select_n(lax.eq(_iota(tshape, nd - 2), k), taus, _bcast(tau, tshape, batch))
    return r, vs, taus


def geqrf_loop(a):
    """``[packed, taus]`` of :data:`geqrf_p` (LAPACK's representation) by Householder
    reflections in LAPACK's convention."""
    lax = _lax()
    aval = core.get_aval(a)
    m, n = aval.shape[-2:]
    k = min(m, n)
    taus = lax.full(aval.shape[:-2] + (k,), 0, aval.dtype)
    if k == 0:
        return [a, taus]
    nd = aval.ndim
    vs = lax.full_like(a, 0)
    r, vs, taus = lax.fori_loop(
        0,
        k,
        lambda i, st: _lapack_reflector(*st, lax.convert_element_type(i, np.int32)),
        (a, vs, taus),
    )
    below = lax.gt(_iota(aval.shape, nd - 2), _iota(aval.shape, nd - 1))
    return [lax.select_n(below, r, vs), taus]


# -- svd ----------------------------------------------------------------------------------------


def _rotate_columns(m, v, p, q):
    """One-sided (Hestenes) Jacobi: rotate columns ``p``, ``q`` of ``m`` (and of ``v``) so
    they become orthogonal."""
    lax = _lax()
    nd = core.get_aval(m).ndim
    mp = lax.dynamic_index_in_dim(m, p, nd - 1, keepdims=False)
    mq = lax.dynamic_index_in_dim(m, q, nd - 1, keepdims=False)

    def dot(x, y):
        return lax.reduce_sum(lax.mul(x, y), (nd - 2,))

    c, s = _rotation(dot(mp, mp), dot(mq, mq), dot(mp, mq))
    return _mix(m, p, q, c, s, nd - 1), _mix(v, p, q, c, s, nd - 1)


def _column_coherence(m):
    """max over pairs and batch of ``(m_p . m_q)^2 / (|m_p|^2 |m_q|^2)`` (zero columns count
    as orthogonal)."""
    lax = _lax()
    g = _matmul(_t(m), m)
    d = _diagonal(g)
    shape = core.get_aval(g).shape
    nd = len(shape)
    batch = tuple(range(nd - 2))
    denom = lax.mul(_bcast(d, shape, batch + (nd - 1,)), _bcast(d, shape, batch + (nd - 2,)))
    off = lax.ne(_iota(shape, nd - 2), _iota(shape, nd - 1))
    ok = lax.bitwise_and(off, lax.gt(denom, lax.full_like(denom, 0)))
    ratio = lax.select_n(
        ok,
        lax.full_like(g, 0),
        lax.div(lax.mul(g, g), lax.select_n(ok, lax.full_like(g, 1), denom)),
    )
    return lax.reduce_max(ratio, tuple(range(nd)))


def _svd_tall(a, full_matrices: bool):
    """``(s, u, vt)`` of the [..., m, n] stack ``a`` with m >= n."""
    lax = _lax()
    aval = core.get_aval(a)
    m, n = aval.shape[-2:]
    nd = aval.ndim
    mv, v = _sweeps(
        a, _eye(aval.shape[:-2] + (n, n), aval.dtype), _rotate_columns, _column_coherence
    )
    sv = lax.sqrt(lax.reduce_sum(lax.mul(mv, mv), (nd - 2,)))  # [..., n]
    sshape = core.get_aval(sv).shape
    order = lax.broadcast_in_dim(lax.iota(np.int32, n), sshape, (nd - 2,))
    neg, order = lax.sort((lax.neg(sv), order), dimension=nd - 2, num_keys=1)
    sv = lax.neg(neg)
    mv, v = _permute_columns(mv, order), _permute_columns(v, order)
    q, r = qr_loop(mv, full_matrices=full_matrices)
    d = _diagonal(r)  # [..., n]
    signs = lax.select_n(lax.lt(d, lax.full_like(d, 0)), lax.full_like(d, 1), lax.full_like(d, -1))
    if full_matrices and m > n:
        signs = lax.concatenate([signs, lax.full(sshape[:-1] + (m - n,), 1, aval.dtype)], nd - 2)
    qshape = core.get_aval(q).shape
    u = lax.mul(q, _bcast(signs, qshape, tuple(range(nd - 2)) + (nd - 1,)))
    return sv, u, _t(v)


def svd_loop(a, *, full_matrices: bool = True, compute_uv: bool = True):
    """``[s]`` or ``[s, u, vt]`` of :data:`svd_p` by one-sided Jacobi."""
    lax = _lax()
    aval = core.get_aval(a)
    m, n = aval.shape[-2:]
    k = min(m, n)
    batch = aval.shape[:-2]
    if k == 0 or 0 in batch:
        s = lax.full(batch + (k,), 0, aval.dtype)
        if not compute_uv:
            return [s]
        ku, kv = (m, n) if full_matrices else (k, k)
        return [s, _eye(batch + (m, ku), aval.dtype), _eye(batch + (kv, n), aval.dtype)]
    if m >= n:
        s, u, vt = _svd_tall(a, full_matrices)
    else:
        s, v, ut = _svd_tall(_t(a), full_matrices)
        u, vt = _t(ut), _t(v)
    return [s, u, vt] if compute_uv else [s]
