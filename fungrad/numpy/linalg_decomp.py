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

from fungrad import lax
from fungrad.numpy import linear, util

__all__ = ["EighResult", "QRResult", "eigh", "eigvalsh", "multi_dot", "qr"]


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
        raise TypeError(f"{fun_name}: complex matrices are not supported by fungrad (got "
                        f"{a.dtype}); pass a real matrix")
    if a.ndim < 2 or (square and a.shape[-1] != a.shape[-2]):
        what = "a square matrix or a stack of them (shape [..., n, n])" if square else \
            "a matrix or a stack of matrices (shape [..., m, n])"
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


def _rotate(a, v, p, q):
    """One Jacobi rotation of the symmetric stack ``a`` zeroing ``a[..., p, q]``; ``v``
    accumulates the rotations (``v <- v J``). ``p < q`` are traced int32 scalars."""
    nd = a.ndim
    batch = tuple(range(nd - 2))
    row_p = lax.dynamic_index_in_dim(a, p, nd - 2, keepdims=False)  # [..., n]
    row_q = lax.dynamic_index_in_dim(a, q, nd - 2, keepdims=False)
    a_pp = lax.dynamic_index_in_dim(row_p, p, nd - 2, keepdims=False)  # [...]
    a_qq = lax.dynamic_index_in_dim(row_q, q, nd - 2, keepdims=False)
    a_pq = lax.dynamic_index_in_dim(row_p, q, nd - 2, keepdims=False)
    zero = lax.full_like(a_pq, 0)
    one = lax.full_like(a_pq, 1)
    nonzero = lax.ne(a_pq, zero)
    safe_pq = lax.select_n(nonzero, one, a_pq)
    tau = lax.div(lax.sub(a_qq, a_pp), lax.mul(lax.full_like(a_pq, 2), safe_pq))
    sign = lax.select_n(lax.ge(tau, zero), lax.neg(one), one)
    t = lax.div(sign, lax.add(lax.abs(tau), lax.sqrt(lax.add(one, lax.mul(tau, tau)))))
    c = lax.rsqrt(lax.add(one, lax.mul(t, t)))
    s = lax.mul(t, c)
    c = lax.select_n(nonzero, one, c)
    s = lax.select_n(nonzero, zero, s)

    def mix_rows(x, idx_dim):
        """Rows (idx_dim = nd - 2) or columns (nd - 1) p, q of x: p' = c p - s q,
        q' = s p + c q."""
        xp = lax.dynamic_index_in_dim(x, p, idx_dim, keepdims=True)
        xq = lax.dynamic_index_in_dim(x, q, idx_dim, keepdims=True)
        shape = xp.shape
        cb, sb = _bcast(c, shape, batch), _bcast(s, shape, batch)
        new_p = lax.sub(lax.mul(cb, xp), lax.mul(sb, xq))
        new_q = lax.add(lax.mul(sb, xp), lax.mul(cb, xq))
        idx = _iota(x.shape, idx_dim)
        new_p = _bcast(lax.squeeze(new_p, (idx_dim,)), x.shape,
                       tuple(d for d in range(nd) if d != idx_dim))
        new_q = _bcast(lax.squeeze(new_q, (idx_dim,)), x.shape,
                       tuple(d for d in range(nd) if d != idx_dim))
        x = lax.select_n(lax.eq(idx, p), x, new_p)
        return lax.select_n(lax.eq(idx, q), x, new_q)

    a = mix_rows(mix_rows(a, nd - 2), nd - 1)
    return a, mix_rows(v, nd - 1)


def _off_diagonal_ratio(a):
    """max over the batch of ``|offdiag(a)|^2 / |a|^2`` (0 for an all-zero matrix)."""
    sq = lax.mul(a, a)
    off = lax.select_n(lax.eq(_iota(a.shape, a.ndim - 2), _iota(a.shape, a.ndim - 1)), sq,
                       lax.full_like(sq, 0))
    axes = (a.ndim - 2, a.ndim - 1)
    total = lax.reduce_sum(sq, axes)
    ratio = lax.div(lax.reduce_sum(off, axes),
                    lax.select_n(lax.gt(total, lax.full_like(total, 0)),
                                 lax.full_like(total, 1), total))
    return lax.reduce_max(ratio, tuple(range(ratio.ndim))) if ratio.ndim else ratio


def _jacobi_eigh(a):
    """Eigenvalues (ascending) and eigenvectors of the symmetric float stack ``a``."""
    n = a.shape[-1]
    if n == 0 or any(d == 0 for d in a.shape[:-2]):
        return lax.full(a.shape[:-1], 0, a.dtype), lax.full_like(a, 0)
    v = _eye_like(a)
    if n > 1:
        pairs = [(p, q) for p in range(n - 1) for q in range(p + 1, n)]
        ps = np.array([p for p, _ in pairs], np.int32)
        qs = np.array([q for _, q in pairs], np.int32)
        ps_c, qs_c = util.asarray(ps), util.asarray(qs)
        tol = float(np.finfo(a.dtype).eps) ** 2

        def sweep(state):
            a, v, k = state

            def rotate(i, av):
                p = lax.dynamic_index_in_dim(ps_c, i, 0, keepdims=False)
                q = lax.dynamic_index_in_dim(qs_c, i, 0, keepdims=False)
                return _rotate(av[0], av[1], p, q)

            a, v = lax.fori_loop(0, len(pairs), rotate, (a, v))
            return a, v, lax.add(k, np.int32(1))

        def not_done(state):
            a, _, k = state
            ratio = _off_diagonal_ratio(a)
            return lax.bitwise_and(lax.lt(k, np.int32(30)),
                                   lax.gt(ratio, lax.full_like(ratio, tol)))

        a, v, _ = lax.while_loop(not_done, sweep, (a, v, np.int32(0)))
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
    onehot = lax.eq(_iota(shape, nd - 2),
                    _bcast(order, shape, tuple(range(nd - 2)) + (nd - 1,)))
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
    tri = lax.select_n(lax.ge(rows, cols) if lower else lax.le(rows, cols), lax.full_like(a, 0),
                       a)
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
    v = lax.add(x, lax.select_n(lax.eq(rows, k), lax.full_like(x, 0),
                                _bcast(alpha, x.shape, batch)))
    vnorm2 = lax.reduce_sum(lax.mul(v, v), (nd - 2,))
    ok = lax.gt(vnorm2, zero)
    scale = lax.select_n(ok, zero, lax.div(lax.full_like(norm, 2), lax.select_n(
        ok, lax.full_like(norm, 1), vnorm2)))  # 2 / |v|^2, 0 for a zero column
    v_col = lax.expand_dims(v, (nd - 1,))  # [..., m, 1]
    # r <- r - scale v (v^T r);  q <- q - scale (q v) v^T
    r = lax.sub(r, lax.mul(_bcast(scale, r.shape, batch),
                           linear.matmul(v_col, linear.matmul(_t(v_col), r))))
    q = lax.sub(q, lax.mul(_bcast(scale, q.shape, batch),
                           linear.matmul(linear.matmul(q, v_col), _t(v_col))))
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
        r, q = lax.fori_loop(0, steps, lambda k, rq: _householder(rq[0], rq[1], k, m), (r, q))
    # exact zeros below the diagonal
    r = lax.select_n(lax.gt(_iota(r.shape, r.ndim - 2), _iota(r.shape, r.ndim - 1)), r,
                     lax.full_like(r, 0))
    if mode == "complete":
        return QRResult(q, r)
    r = lax.slice_in_dim(r, 0, kk, axis=r.ndim - 2)
    if mode == "r":
        return r
    return QRResult(lax.slice_in_dim(q, 0, kk, axis=q.ndim - 1), r)


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
            raise ValueError(f"multi_dot: array {i} must be 2-D (only the first and last may "
                             f"be 1-D), got shape {x.shape}")
    dims = [arrays[0].shape[0]] + [x.shape[1] for x in arrays]
    for i in range(len(arrays) - 1):
        if arrays[i].shape[1] != arrays[i + 1].shape[0]:
            raise ValueError(f"multi_dot: shapes {arrays[i].shape} and {arrays[i + 1].shape} "
                             f"(arrays {i} and {i + 1}) are not aligned")
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


