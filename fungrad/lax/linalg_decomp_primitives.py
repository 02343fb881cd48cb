"""The ``qr``, ``eigh`` and ``svd`` primitives (jax.lax.linalg's), with all their rules.

* ``qr_p`` (``full_matrices``): [..., m, n] ``a`` -> ``[q, r]``, ``q`` [..., m, m] and ``r``
  [..., m, n] when ``full_matrices``, else [..., m, k] and [..., k, n] (k = min(m, n));
  LAPACK's signs (Householder, ``geqrf`` + ``orgqr``).
* ``geqrf_p``: [..., m, n] ``a`` -> ``[packed, taus]``, LAPACK's own representation of the
  QR (``jnp.linalg.qr(mode="raw")``): R on and above the diagonal of ``packed``, the
  Householder vectors (unit leading entry implied) below it, their scales ``taus`` [..., k];
  no derivative rule, as in JAX.
* ``eigh_p`` (``lower``, ``sort_eigenvalues``): symmetric [..., n, n] ``a``, only its ``lower``
  (or upper) triangle read -> ``[v, w]``: eigenvectors as the columns of ``v``, eigenvalues
  ``w`` ascending. No convergence: NaN ``v`` and ``w``, as JAX.
* ``svd_p`` (``full_matrices``, ``compute_uv``): [..., m, n] ``a`` -> ``[s]`` or
  ``[s, u, vt]`` (JAX's order), ``s`` [..., k] descending, ``u`` [..., m, m or k], ``vt``
  [..., n or k, n]. No convergence: NaN everywhere, as JAX.

Each takes float32/float64 or complex64/complex128 matrices. For complex ones Q and the
singular and eigen-vectors are unitary (``vt`` is ``Vᴴ``), eigh's matrix is Hermitian (its
diagonal's imaginary part is not read), and eigh's eigenvalues and svd's singular values are
real (the real dtype of the same precision).

Rules:

* eager: numpy (``np.linalg.qr``/``eigh``/``svd``: LAPACK too; NaN where numpy raises
  LinAlgError);
* jvp: QR from ``C = Qᵀ dA R⁻¹ = Qᵀ dQ + dR R⁻¹`` (skew plus upper triangular, so
  ``Ω = Qᵀ dQ`` is C's strict lower triangle minus its transpose, ``dR = (C - Ω) R``,
  ``dQ = dA R⁻¹ - Q (C - Ω)``); a wide matrix splits as ``[A1 A2]`` (``dR2 = dQᵀ A2 + Qᵀ dA2``);
  the full Q of a tall matrix completes its first n columns through the reflectors' compact WY
  form ``Q = I - V T Vᵀ``, so its last columns are ``[0; I] - ([I; 0] - Q1) Zᵀ`` with
  ``Z = Q_pn (Q_nn - I)⁻¹`` (a function of Q1 alone) and are differentiated as that.
  eigh: ``dw = diag(Vᵀ dA V)``, ``dV = V (F ∘ Vᵀ dA V)``, ``F_ij = 1 / (w_j - w_i)`` off the
  diagonal (repeated eigenvalues give inf/NaN, as JAX), ``dA`` the symmetric tangent of the
  triangle read. svd: JAX's rule from ``dS = Uᵀ dA V`` for the reduced factors (and square
  full ones); full ``u``/``vt`` of a non-square matrix have no derivative (TypeError).
  Complex matrices: the same with conjugate transposes (ᵀ -> ᴴ) and JAX's gauge, the one in
  which the derivative of each vector is orthogonal to its own phase: QR's ``Ω`` takes the
  imaginary part of ``C``'s diagonal (``dR R⁻¹`` has a real diagonal), eigh's
  ``dw = Re diag(Vᴴ dA V)`` with ``dA`` the Hermitian tangent of the triangle read, svd's
  ``ds = Re diag(dS)`` and ``dU`` gains ``U diag(i Im(dS_ii) / s_i)``. Functions of the
  vectors that do not depend on their phases (``|v|``, ``v vᴴ``, ``U S Vᴴ``) have the usual
  derivatives;
* batching: the vmapped dimension moves to the front, a leading batch dimension;
* lowering: where the backend's policy has ``linalg_steps`` (the CPU with LAPACK), one library
  step (``steps.QRStep``/``EighStep``/``SVDStep``, rendered by ``cpu/lapack_decomp_step.py``),
  so the program's size does not grow with ``n``; elsewhere (the GPU) the loop algorithms of
  :mod:`fungrad.lax.linalg_loops` are traced and lowered inline. Complex matrices reach the
  compiler through the complex split, whose rules (:mod:`fungrad.lax.linalg_decomp_complex`)
  bind interleaved forms run by the complex LAPACK routines (CPU only).
"""

from __future__ import annotations

import numpy as np

from fungrad import core, dtypes
from fungrad.core import ShapedArray
from fungrad.impls import ignore_fp_errors
from fungrad.lax import linalg_loops
from fungrad.lax.linalg_loops import _diagonal, _eye
from fungrad.lax.linalg_primitives import _matmul, _mT, triangular_solve_p
from fungrad.lax.utils import standard_primitive
from fungrad.lowering import kernel
from fungrad.transforms.jvp import Zero, jvp_rules, no_jvp, tangent_aval
from fungrad.transforms.vmap import batch_rules, bdim_at_front

__all__ = ["eigh_p", "geqrf_p", "qr_p", "svd_p"]


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_COMPLEXES = (np.dtype(np.complex64), np.dtype(np.complex128))


def _check_float(name: str, x: ShapedArray) -> None:
    if x.dtype not in _FLOATS + _COMPLEXES:
        raise TypeError(
            f"{name}: operand has dtype {x.dtype}; only float32, float64, complex64 and "
            "complex128 are supported (cast it first)"
        )
    if x.ndim < 2:
        raise ValueError(
            f"{name}: operand must be a matrix or a stack of them, [..., m, n], got shape {x.shape}"
        )


def _batch_size(shape) -> int:
    return int(np.prod(shape[:-2], dtype=np.int64))


def _per_matrix(fn, a, outs_like, dtypes_like=None):
    """``fn`` applied to each matrix of the stack ``a``; NaN results for a matrix on which
    numpy raises LinAlgError (no convergence), as JAX's. ``dtypes_like``: the results' dtypes
    (default ``a``'s)."""
    a = np.asarray(a)
    try:
        return list(fn(a))
    except np.linalg.LinAlgError:
        pass
    dts = dtypes_like or [a.dtype] * len(outs_like)
    outs = [np.empty(s, d) for s, d in zip(outs_like, dts)]
    flat = a.reshape((-1,) + a.shape[-2:])
    views = [o.reshape((flat.shape[0],) + o.shape[a.ndim - 2 :]) for o in outs]
    for i, m in enumerate(flat):
        try:
            res = fn(m)
        except np.linalg.LinAlgError:
            res = [np.full(v.shape[1:], np.nan, v.dtype) for v in views]
        for v, r in zip(views, res):
            v[i] = r
    return outs


def _slice(x, start, stop, axis):
    from fungrad import lax

    nd = core.get_aval(x).ndim
    return lax.slice_in_dim(x, start, stop, axis=axis % nd)


def _concat(xs, axis):
    from fungrad import lax

    nd = core.get_aval(xs[0]).ndim
    return lax.concatenate(xs, axis % nd)


def _tril_strict(x):
    from fungrad import lax

    shape = core.get_aval(x).shape
    nd = len(shape)
    below = lax.gt(
        lax.broadcasted_iota(np.int32, shape, nd - 2), lax.broadcasted_iota(np.int32, shape, nd - 1)
    )
    return lax.select_n(below, lax.full_like(x, 0), x)


def _is_complex(x) -> bool:
    return core.get_aval(x).dtype.kind == "c"


def _mH(x):
    """The conjugate transpose of the matrices of ``x`` (the transpose for a real ``x``)."""
    from fungrad import lax

    return lax.conj(_mT(x)) if _is_complex(x) else _mT(x)


def _like(x, ref):
    """Real ``x`` as ``ref``'s dtype (complex when ``ref`` is); ``x`` itself otherwise."""
    from fungrad import lax

    dt = core.get_aval(ref).dtype
    return x if core.get_aval(x).dtype == dt else lax.convert_element_type(x, dt)


def _real(x):
    from fungrad import lax

    return lax.real(x) if _is_complex(x) else x


def _zeros_out(prim, x, **params):
    outs = prim.bind(x, **params)
    return outs, [Zero(tangent_aval(core.get_aval(o))) for o in outs]


def _lower_loop(ctx, fn, x, **params):
    """Lower the loop algorithm ``fn(x, **params)`` (lax code returning a list) inline."""
    from fungrad.transforms.staging import trace_to_jaxpr

    closed = trace_to_jaxpr(lambda y: fn(y, **params), [ShapedArray(x.shape, x.dtype)])
    return ctx.planner.lower_jaxpr(closed, [x])


def _batch(prim):
    def rule(axis_size, args, dims, **params):
        (x,), (d,) = args, dims
        outs = prim.bind(bdim_at_front(x, d, axis_size), **params)
        return outs, [0] * len(outs)

    return rule


# -- qr -----------------------------------------------------------------------------------------


def _qr_shapes(shape, full_matrices):
    m, n = shape[-2:]
    k = m if full_matrices else min(m, n)
    return shape[:-2] + (m, k), shape[:-2] + (k, n)


def _qr_abstract_eval(a, *, full_matrices):
    _check_float("qr", a)
    qs, rs = _qr_shapes(a.shape, full_matrices)
    return [ShapedArray(qs, a.dtype), ShapedArray(rs, a.dtype)]


@ignore_fp_errors
def _qr_impl(a, *, full_matrices):
    a = np.asarray(a)
    qs, rs = _qr_shapes(a.shape, full_matrices)
    if 0 in a.shape:
        q = np.broadcast_to(np.eye(*qs[-2:], dtype=a.dtype), qs).copy()
        return [q, np.zeros(rs, a.dtype)]
    q, r = np.linalg.qr(a, mode="complete" if full_matrices else "reduced")
    return [q.astype(a.dtype, copy=False), r.astype(a.dtype, copy=False)]


qr_p = standard_primitive("qr", _qr_impl, _qr_abstract_eval, multiple_results=True)


def _thin_qr_jvp(q, r, dx):
    """``(dq, dr)`` of ``x = q r`` for [..., m, n] ``x``, m >= n, ``q`` [..., m, n]."""
    from fungrad import lax

    dx_rinv = triangular_solve_p.bind(
        r,
        dx,
        left_side=False,
        lower=False,
        transpose_a=False,
        conjugate_a=False,
        unit_diagonal=False,
    )
    c = _matmul(_mH(q), dx_rinv)
    low = _tril_strict(c)
    omega = lax.sub(low, _mH(low))  # Qᴴ dQ: skew-Hermitian
    if _is_complex(c):  # dR R⁻¹ has a real diagonal: Ω takes C's imaginary diagonal (JAX's)
        eye = _eye(core.get_aval(c).shape, core.get_aval(c).dtype)
        omega = lax.add(omega, lax.mul(eye, lax.sub(c, _like(lax.real(c), c))))
    c_minus = lax.sub(c, omega)  # dR R⁻¹: upper triangular
    return lax.sub(dx_rinv, _matmul(q, c_minus)), _matmul(c_minus, r)


def _qr_jvp(primals, tangents, *, full_matrices):
    from fungrad import lax

    (x,), (dx,) = primals, tangents
    if type(dx) is Zero:
        return _zeros_out(qr_p, x, full_matrices=full_matrices)
    q, r = qr_p.bind(x, full_matrices=full_matrices)
    m, n = core.get_aval(x).shape[-2:]
    if m < n:  # x = [x1 x2], x1 square: x1 = q r1 and r2 = qᴴ x2
        dq, dr1 = _thin_qr_jvp(q, _slice(r, 0, m, -1), _slice(dx, 0, m, -1))
        x2, dx2 = _slice(x, m, n, -1), _slice(dx, m, n, -1)
        dr2 = lax.add(_matmul(_mH(dq), x2), _matmul(_mH(q), dx2))
        return [q, r], [dq, _concat([dr1, dr2], -1)]
    if not full_matrices or m == n:
        dq, dr = _thin_qr_jvp(q, r, dx)
        return [q, r], [dq, dr]
    q_mn, r_nn = _slice(q, 0, n, -1), _slice(r, 0, n, -2)
    dq_mn, dr_nn = _thin_qr_jvp(q_mn, r_nn, dx)
    return [q, r], [_concat([dq_mn, _completion_tangent(q_mn, dq_mn)], -1), _pad_rows(dr_nn, m)]


def _pad_rows(dr, m):
    from fungrad import lax

    shape = core.get_aval(dr).shape
    zeros = lax.full(shape[:-2] + (m - shape[-2], shape[-1]), 0, core.get_aval(dr).dtype)
    return _concat([dr, zeros], -2)


def _completion_tangent(q_mn, dq_mn):
    """The tangent of the last m - n columns of the full Householder Q of a tall matrix, given
    its first n columns ``q_mn`` and their tangent: those columns are
    ``[0; I] - ([I; 0] - Q_mn) Zᴴ`` with ``Z = Q_pn M⁻¹``, ``M = Q_nn - I`` (``Q_nn`` the
    top n rows of Q_mn, ``Q_pn`` the rest), so their tangent is
    ``dQ_mn Zᴴ - ([I; 0] - Q_mn) dZᴴ`` with ``dZᴴ = M⁻ᴴ (dQ_pn - Z dQ_nn)ᴴ`` (ᴴ is the
    transpose for real matrices)."""
    from fungrad import lax
    from fungrad.lax.linalg_lu import lu_p, lu_solve

    def solve(a, b):
        lu, _, perm = lu_p.bind(a)
        return lu_solve(lu, perm, b)

    shape = core.get_aval(q_mn).shape
    m, n = shape[-2:]
    dtype = core.get_aval(q_mn).dtype
    q_nn, q_pn = _slice(q_mn, 0, n, -2), _slice(q_mn, n, m, -2)
    dq_nn, dq_pn = _slice(dq_mn, 0, n, -2), _slice(dq_mn, n, m, -2)
    mt = _mH(lax.sub(q_nn, _eye(shape[:-2] + (n, n), dtype)))  # Mᴴ
    zt = solve(mt, _mH(q_pn))
    dzt = solve(mt, _mH(lax.sub(dq_pn, _matmul(_mH(zt), dq_nn))))
    top = lax.sub(_eye(shape, dtype), q_mn)  # [I; 0] - Q_mn
    return lax.sub(_matmul(dq_mn, zt), _matmul(top, dzt))


jvp_rules[qr_p] = _qr_jvp
batch_rules[qr_p] = _batch(qr_p)


def _qr_lowering(ctx, x, *, full_matrices):
    planner = ctx.planner
    if not planner.policy.linalg_steps:
        return _lower_loop(ctx, linalg_loops.qr_loop, x, full_matrices=full_matrices)
    from fungrad.lowering.steps import QRStep

    m, n = x.shape[-2:]
    qs, rs = _qr_shapes(x.shape, full_matrices)
    a = ctx.materialize(x).buffer
    q = planner.new_buffer(qs, x.dtype, "temp")
    r = planner.new_buffer(rs, x.dtype, "temp")
    planner.add_step(QRStep(f"qr_{q.name}", a, q, r, _batch_size(x.shape), m, n, full_matrices))
    return [planner.buffer_tensor(q, "qr"), planner.buffer_tensor(r, "qr")]


kernel.register_lowering(qr_p, _qr_lowering)


# -- eigh ---------------------------------------------------------------------------------------


def _eigh_abstract_eval(a, *, lower, sort_eigenvalues):
    _check_float("eigh", a)
    if a.shape[-1] != a.shape[-2]:
        raise ValueError(
            f"eigh: operand must be a square matrix or a stack of them, [..., n, n], got shape "
            f"{a.shape}"
        )
    return [ShapedArray(a.shape, a.dtype), ShapedArray(a.shape[:-1], dtypes.real_dtype(a.dtype))]


@ignore_fp_errors
def _eigh_impl(a, *, lower, sort_eigenvalues):
    a = np.asarray(a)
    rdt = dtypes.real_dtype(a.dtype)

    def fn(x):
        w, v = np.linalg.eigh(x, UPLO="L" if lower else "U")
        return v.astype(a.dtype, copy=False), w.astype(rdt, copy=False)

    return _per_matrix(fn, a, (a.shape, a.shape[:-1]), (a.dtype, rdt))


eigh_p = standard_primitive("eigh", _eigh_impl, _eigh_abstract_eval, multiple_results=True)


def _eigh_jvp(primals, tangents, *, lower, sort_eigenvalues):
    from fungrad import lax

    (a,), (da,) = primals, tangents
    params = dict(lower=lower, sort_eigenvalues=sort_eigenvalues)
    if type(da) is Zero:
        return _zeros_out(eigh_p, a, **params)
    v, w = eigh_p.bind(a, **params)
    if _is_complex(a):
        da = _triangle_hermitian(da, lower)
    else:
        da = linalg_loops._triangle_symmetric(da, lower)  # the tangent of the matrix read
    vt_da_v = _matmul(_matmul(_mH(v), da), v)
    shape = core.get_aval(v).shape
    nd = len(shape)
    batch = tuple(range(nd - 2))
    w_j = lax.broadcast_in_dim(w, shape, batch + (nd - 1,))
    w_i = lax.broadcast_in_dim(w, shape, batch + (nd - 2,))
    eye = _eye(shape, core.get_aval(w).dtype)
    f = lax.sub(lax.div(lax.full_like(eye, 1), lax.add(eye, lax.sub(w_j, w_i))), eye)
    return [v, w], [_matmul(v, lax.mul(_like(f, v), vt_da_v)), _real(_diagonal(vt_da_v))]


def _triangle_hermitian(a, lower: bool):
    """The Hermitian matrix whose ``lower`` (or upper) triangle is ``a``'s, its diagonal the
    real part of ``a``'s (LAPACK's ``heevd`` reads no imaginary diagonal)."""
    from fungrad import lax

    shape = core.get_aval(a).shape
    nd = len(shape)
    rows = lax.broadcasted_iota(np.int32, shape, nd - 2)
    cols = lax.broadcasted_iota(np.int32, shape, nd - 1)
    keep = lax.gt(rows, cols) if lower else lax.lt(rows, cols)
    tri = lax.select_n(keep, lax.full_like(a, 0), a)  # strict triangle
    diag = lax.select_n(lax.eq(rows, cols), lax.full_like(a, 0), _like(lax.real(a), a))
    return lax.add(lax.add(tri, _mH(tri)), diag)


jvp_rules[eigh_p] = _eigh_jvp
batch_rules[eigh_p] = _batch(eigh_p)


def _eigh_lowering(ctx, x, *, lower, sort_eigenvalues):
    planner = ctx.planner
    if not planner.policy.linalg_steps:
        return _lower_loop(ctx, linalg_loops.eigh_loop, x, lower=lower)
    from fungrad.lowering.steps import EighStep

    n = x.shape[-1]
    a = ctx.materialize(x).buffer
    v = planner.new_buffer(x.shape, x.dtype, "temp")
    w = planner.new_buffer(x.shape[:-1], x.dtype, "temp")
    planner.add_step(EighStep(f"eigh_{v.name}", a, v, w, _batch_size(x.shape), n, lower))
    return [planner.buffer_tensor(v, "eigh"), planner.buffer_tensor(w, "eigh")]


kernel.register_lowering(eigh_p, _eigh_lowering)


# -- svd ----------------------------------------------------------------------------------------


def _svd_shapes(shape, full_matrices):
    m, n = shape[-2:]
    k = min(m, n)
    b = shape[:-2]
    ku, kv = (m, n) if full_matrices else (k, k)
    return b + (k,), b + (m, ku), b + (kv, n)


def _svd_abstract_eval(a, *, full_matrices, compute_uv):
    _check_float("svd", a)
    shapes = _svd_shapes(a.shape, full_matrices)
    out = [ShapedArray(shapes[0], dtypes.real_dtype(a.dtype))]
    return out + ([ShapedArray(s, a.dtype) for s in shapes[1:]] if compute_uv else [])


@ignore_fp_errors
def _svd_impl(a, *, full_matrices, compute_uv):
    a = np.asarray(a)
    rdt = dtypes.real_dtype(a.dtype)
    shapes = _svd_shapes(a.shape, full_matrices)
    if 0 in a.shape:
        s = np.zeros(shapes[0], rdt)
        if not compute_uv:
            return [s]
        u = np.broadcast_to(np.eye(*shapes[1][-2:], dtype=a.dtype), shapes[1]).copy()
        vt = np.broadcast_to(np.eye(*shapes[2][-2:], dtype=a.dtype), shapes[2]).copy()
        return [s, u, vt]

    def fn(x):
        if not compute_uv:
            return (np.linalg.svd(x, compute_uv=False).astype(rdt, copy=False),)
        u, s, vt = np.linalg.svd(x, full_matrices=full_matrices)
        return s.astype(rdt, copy=False), u.astype(a.dtype), vt.astype(a.dtype, copy=False)

    dts = (rdt, a.dtype, a.dtype)
    return _per_matrix(fn, a, shapes if compute_uv else shapes[:1], dts[: 3 if compute_uv else 1])


svd_p = standard_primitive("svd", _svd_impl, _svd_abstract_eval, multiple_results=True)


def _svd_jvp(primals, tangents, *, full_matrices, compute_uv):
    from fungrad import lax

    (a,), (da,) = primals, tangents
    params = dict(full_matrices=full_matrices, compute_uv=compute_uv)
    if type(da) is Zero:
        return _zeros_out(svd_p, a, **params)
    m, n = core.get_aval(a).shape[-2:]
    if compute_uv and full_matrices and m != n:
        raise TypeError(
            f"svd: derivatives of full_matrices=True are not supported for a non-square matrix "
            f"(shape {core.get_aval(a).shape}; nor in JAX); use full_matrices=False"
        )
    s, u, vt = svd_p.bind(a, full_matrices=False, compute_uv=True)
    v = _mH(vt)
    ds_mat = _matmul(_matmul(_mH(u), da), v)  # dS = Uᴴ dA V
    ds = _real(_diagonal(ds_mat))
    if not compute_uv:
        return [s], [ds]
    shape = core.get_aval(ds_mat).shape
    nd = len(shape)
    batch = tuple(range(nd - 2))
    s_j = lax.broadcast_in_dim(s, shape, batch + (nd - 1,))  # s as a row
    s_i = lax.broadcast_in_dim(s, shape, batch + (nd - 2,))  # s as a column
    eye = _eye(shape, core.get_aval(s).dtype)
    diff = lax.mul(lax.add(s_j, s_i), lax.sub(s_j, s_i))  # s_j² - s_i²
    f = _like(lax.sub(lax.div(lax.full_like(diff, 1), lax.add(diff, eye)), eye), ds_mat)
    ds_s = lax.mul(ds_mat, _like(s_j, ds_mat))  # dS diag(s)
    s_ds = lax.mul(_like(s_i, ds_mat), ds_mat)  # diag(s) dS
    zero_s = lax.eq(s, lax.full_like(s, 0))
    s_inv = lax.select_n(
        zero_s,
        lax.div(lax.full_like(s, 1), lax.select_n(zero_s, s, lax.full_like(s, 1))),
        lax.full_like(s, 0),
    )
    # the diagonal of Uᴴ dU: zero for real matrices, i Im(dS_ii) / s_i for complex ones (JAX's)
    skew = lax.mul(
        lax.mul(lax.sub(ds_mat, _mH(ds_mat)), lax.full_like(ds_mat, 0.5)),
        _like(lax.mul(eye, lax.broadcast_in_dim(s_inv, shape, batch + (nd - 1,))), ds_mat),
    )
    du = _matmul(u, lax.add(lax.mul(f, lax.add(ds_s, _mH(ds_s))), skew))
    dv = _matmul(v, lax.mul(f, lax.add(s_ds, _mH(s_ds))))

    def over_s(x):
        s_b = lax.broadcast_in_dim(s, core.get_aval(x).shape, batch + (nd - 1,))
        return lax.div(x, _like(s_b, x))

    if m > n:  # the part of dA V outside span(U)
        dav = _matmul(da, v)
        du = lax.add(du, over_s(lax.sub(dav, _matmul(u, _matmul(_mH(u), dav)))))
    if n > m:
        dau = _matmul(_mH(da), u)
        dv = lax.add(dv, over_s(lax.sub(dau, _matmul(v, _matmul(vt, dau)))))
    return [s, u, vt], [ds, du, _mH(dv)]


jvp_rules[svd_p] = _svd_jvp
batch_rules[svd_p] = _batch(svd_p)


def _svd_lowering(ctx, x, *, full_matrices, compute_uv):
    planner = ctx.planner
    params = dict(full_matrices=full_matrices, compute_uv=compute_uv)
    if not planner.policy.linalg_steps:
        return _lower_loop(ctx, linalg_loops.svd_loop, x, **params)
    from fungrad.lowering.steps import SVDStep

    m, n = x.shape[-2:]
    shapes = _svd_shapes(x.shape, full_matrices)
    a = ctx.materialize(x).buffer
    outs = [planner.new_buffer(s, x.dtype, "temp") for s in (shapes if compute_uv else shapes[:1])]
    u, vt = (outs[1], outs[2]) if compute_uv else (None, None)
    step = SVDStep(
        f"svd_{outs[0].name}", a, outs[0], u, vt, _batch_size(x.shape), m, n, full_matrices
    )
    planner.add_step(step)
    return [planner.buffer_tensor(b, "svd") for b in outs]


kernel.register_lowering(svd_p, _svd_lowering)


# -- geqrf --------------------------------------------------------------------------------------


def _geqrf_abstract_eval(a):
    _check_float("geqrf", a)
    return [
        ShapedArray(a.shape, a.dtype),
        ShapedArray(a.shape[:-2] + (min(a.shape[-2:]),), a.dtype),
    ]


@ignore_fp_errors
def _geqrf_impl(a):
    a = np.asarray(a)
    if 0 in a.shape:
        return [a.copy(), np.zeros(a.shape[:-2] + (min(a.shape[-2:]),), a.dtype)]
    h, taus = np.linalg.qr(a, mode="raw")  # h: the packed matrix transposed (Fortran order)
    return [np.swapaxes(h, -1, -2).astype(a.dtype), taus.astype(a.dtype, copy=False)]


geqrf_p = standard_primitive("geqrf", _geqrf_impl, _geqrf_abstract_eval, multiple_results=True)
no_jvp[geqrf_p] = (
    "geqrf returns LAPACK's Householder representation, which has no derivative rule (as in "
    "JAX); differentiate the Q and R of lax.linalg.qr instead"
)
batch_rules[geqrf_p] = _batch(geqrf_p)


def _geqrf_lowering(ctx, x):
    planner = ctx.planner
    if not planner.policy.linalg_steps:
        return _lower_loop(ctx, linalg_loops.geqrf_loop, x)
    from fungrad.lowering.steps import GeqrfStep

    m, n = x.shape[-2:]
    a = ctx.materialize(x).buffer
    packed = planner.new_buffer(x.shape, x.dtype, "temp")
    taus = planner.new_buffer(x.shape[:-2] + (min(m, n),), x.dtype, "temp")
    planner.add_step(GeqrfStep(f"geqrf_{packed.name}", a, packed, taus, _batch_size(x.shape), m, n))
    return [planner.buffer_tensor(packed, "geqrf"), planner.buffer_tensor(taus, "geqrf")]


kernel.register_lowering(geqrf_p, _geqrf_lowering)


# the complex split's rules for qr, eigh and svd (their interleaved complex forms)
from fungrad.lax import linalg_decomp_complex  # noqa: E402,F401
