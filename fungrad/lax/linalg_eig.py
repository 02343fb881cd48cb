"""The ``eig`` primitive (jax.lax.linalg's general eigen-decomposition) and ``geev``, its LAPACK
form, with all their rules.

* ``eig_p`` (``compute_left_eigenvectors``, ``compute_right_eigenvectors``): a real or
  complex [..., n, n] ``a`` -> ``[w]`` + ``[vl]`` + ``[vr]`` (JAX's order), complex (complex64
  for float32/complex64): eigenvalues in LAPACK's order (for a real matrix a conjugate pair
  adjacent, positive imaginary part first), right eigenvectors ``a vr = vr diag(w)`` and left
  ones ``vlᴴ a = diag(w) vlᴴ`` as columns of norm 1 with their largest component real. No
  convergence: NaN everywhere.
* ``geev_p`` (``compute_left``, ``compute_right``): the same in LAPACK's real form,
  ``[wr, wi]`` + ``[vl]`` + ``[vr]`` with a complex pair's vector packed in two columns
  (``v[:, j] ± i v[:, j + 1]``). It is what compiled code runs: the complex split pass rewrites
  ``eig_p`` into ``geev_p`` and real arithmetic that unpacks the vectors.

Rules:

* eager: numpy's ``eig`` (LAPACK's geev inside numpy; lax imports no backend), the left
  vectors from the inverse of the right ones;
* jvp (``eig_p``, eigenvalues only, as JAX): ``dw_j = u_jᴴ dA v_j / u_jᴴ v_j`` (``u`` the left
  and ``v`` the right eigenvectors; JAX's ``diag(V⁻¹ dA V)``); derivatives of eigenvectors are a
  TypeError, as JAX has none; ``geev_p`` has no derivative rule;
* batching: the vmapped dimension moves to the front;
* lowering: ``eig_p`` has complex results, so the complex split removes it (its split rule:
  ``geev_p`` for a real matrix, LAPACK's complex ``geev`` through
  :mod:`fungrad.lax.linalg_decomp_complex` for a complex one); ``geev_p`` becomes one
  ``steps.GeevStep`` on the CPU (LAPACK); the GPU has no eig (a LoweringError saying to jit
  with backend="cpu").
"""

from __future__ import annotations

import numpy as np

from fungrad import core, dtypes
from fungrad.core import ShapedArray
from fungrad.impls import ignore_fp_errors
from fungrad.lax.linalg_primitives import _matmul
from fungrad.lax.utils import standard_primitive
from fungrad.lowering import kernel
from fungrad.lowering.complex_split import Pair, register_split_rule
from fungrad.transforms.jvp import Zero, jvp_rules, no_jvp, tangent_aval
from fungrad.transforms.vmap import batch_rules, bdim_at_front

__all__ = ["eig_p", "geev_p"]


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_COMPLEXES = (np.dtype(np.complex64), np.dtype(np.complex128))


def _check(name: str, a: ShapedArray, complex_ok: bool = False) -> None:
    if a.dtype not in (_FLOATS + _COMPLEXES if complex_ok else _FLOATS):
        accepted = (
            "float32, float64, complex64 and complex128" if complex_ok else "float32 and float64"
        )
        raise TypeError(
            f"{name}: operand has dtype {a.dtype}; only {accepted} are supported (cast it first)"
        )
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(
            f"{name}: operand must be a square matrix or a stack of them, [..., n, n], got "
            f"shape {a.shape}"
        )


def _batch(prim):
    def rule(axis_size, args, dims, **params):
        (x,), (d,) = args, dims
        outs = prim.bind(bdim_at_front(x, d, axis_size), **params)
        return outs, [0] * len(outs)

    return rule


# -- geev: LAPACK's real form -------------------------------------------------------------------


def _geev_abstract_eval(a, *, compute_left, compute_right):
    _check("geev", a)
    w = ShapedArray(a.shape[:-1], a.dtype)
    mats = [ShapedArray(a.shape, a.dtype)] * (int(compute_left) + int(compute_right))
    return [w, w, *mats]


def _pack(v, wi):
    """Complex eigenvector columns ``v`` in LAPACK's packed real form."""
    out = v.real.copy()
    pair = np.flatnonzero(wi > 0)
    out[:, pair + 1] = v.imag[:, pair]
    return out


def _normalized(u):
    """Columns scaled to norm 1 with their largest component real (LAPACK's convention)."""
    u = u / np.linalg.norm(u, axis=0, keepdims=True)
    big = u[np.argmax(np.abs(u), axis=0), np.arange(u.shape[1])]
    return u * (np.abs(big) / np.where(big == 0, 1, big))


def _geev_one(x, left, right):
    """``lapack.geev``'s results for one matrix, computed by numpy (lax imports no backend):
    the left vectors are the rows of the inverse of the right ones, conjugated; both
    normalized as LAPACK (norm 1, largest component real); ``info`` 1 where numpy fails to
    converge."""
    if x.shape[-1] == 0:
        empty = np.empty((0,), x.dtype)
        return empty, empty, np.empty((0, 0), x.dtype), np.empty((0, 0), x.dtype), 0
    try:
        w, v = np.linalg.eig(x)
        v = _normalized(v)
        vl = _normalized(np.linalg.inv(v).conj().T) if left else None
    except np.linalg.LinAlgError:
        return None, None, None, None, 1
    wr, wi = w.real.astype(x.dtype), w.imag.astype(x.dtype)
    vl = _pack(vl, wi).astype(x.dtype) if left else None
    return wr, wi, vl, (_pack(v, wi).astype(x.dtype) if right else None), 0


@ignore_fp_errors
def _geev_impl(a, *, compute_left, compute_right):
    a = np.asarray(a)
    n = a.shape[-1]
    outs = [np.empty(a.shape[:-1], a.dtype), np.empty(a.shape[:-1], a.dtype)]
    outs += [np.empty(a.shape, a.dtype) for _ in range(int(compute_left) + int(compute_right))]
    flat = a.reshape((int(np.prod(a.shape[:-2], dtype=np.int64)), n, n))
    views = [o.reshape((flat.shape[0],) + o.shape[a.ndim - 2 :]) for o in outs]
    for i, x in enumerate(flat):
        wr, wi, vl, vr, info = _geev_one(x, compute_left, compute_right)
        res = [wr, wi] + ([vl] if compute_left else []) + ([vr] if compute_right else [])
        for view, r in zip(views, res):
            view[i] = np.nan if info != 0 else r
    return outs


geev_p = standard_primitive("geev", _geev_impl, _geev_abstract_eval, multiple_results=True)
no_jvp[geev_p] = (
    "geev returns LAPACK's packed real form of an eigen-decomposition, which has no derivative "
    "rule; differentiate the eigenvalues of lax.linalg.eig / fungrad.numpy.linalg.eigvals"
)
batch_rules[geev_p] = _batch(geev_p)


def _geev_lowering(ctx, x, *, compute_left, compute_right):
    from fungrad.lowering.fusion import LoweringError

    planner = ctx.planner
    if not planner.policy.linalg_steps:
        raise LoweringError(
            f"eig (geev) of a {x.shape} {x.dtype} matrix: this backend has no general "
            "eigen-decomposition; jit it with backend='cpu'"
        )
    from fungrad.lowering.steps import GeevStep

    n = x.shape[-1]
    a = ctx.materialize(x).buffer
    wr = planner.new_buffer(x.shape[:-1], x.dtype, "temp")
    wi = planner.new_buffer(x.shape[:-1], x.dtype, "temp")
    vl = planner.new_buffer(x.shape, x.dtype, "temp") if compute_left else None
    vr = planner.new_buffer(x.shape, x.dtype, "temp") if compute_right else None
    batch = int(np.prod(x.shape[:-2], dtype=np.int64))
    planner.add_step(GeevStep(f"geev_{wr.name}", a, wr, wi, vl, vr, batch, n))
    return [planner.buffer_tensor(b, "geev") for b in (wr, wi, vl, vr) if b is not None]


kernel.register_lowering(geev_p, _geev_lowering)


# -- eig ----------------------------------------------------------------------------------------


def _eig_abstract_eval(a, *, compute_left_eigenvectors, compute_right_eigenvectors):
    _check("eig", a, complex_ok=True)
    cdt = dtypes.complex_dtype(a.dtype)
    n_vec = int(compute_left_eigenvectors) + int(compute_right_eigenvectors)
    return [ShapedArray(a.shape[:-1], cdt)] + [ShapedArray(a.shape, cdt)] * n_vec


def _unpack_numpy(v, wi):
    """Packed real eigenvector columns as complex ones."""
    n = v.shape[-1]
    nxt = np.concatenate([v[..., 1:], np.zeros_like(v[..., :1])], -1)
    prv = np.concatenate([np.zeros_like(v[..., :1]), v[..., : n - 1]], -1)
    pos, neg = (wi > 0)[..., None, :], (wi < 0)[..., None, :]
    re = np.where(neg, prv, v)
    im = np.where(pos, nxt, np.where(neg, -v, 0))
    return re + 1j * im


@ignore_fp_errors
def _eig_impl(a, *, compute_left_eigenvectors, compute_right_eigenvectors):
    a = np.asarray(a)
    cdt = dtypes.complex_dtype(a.dtype)
    if a.dtype.kind == "c":
        return _eig_complex(a, compute_left_eigenvectors, compute_right_eigenvectors)
    outs = _geev_impl(
        a, compute_left=compute_left_eigenvectors, compute_right=compute_right_eigenvectors
    )
    wr, wi, vecs = outs[0], outs[1], outs[2:]
    return [(wr + 1j * wi).astype(cdt)] + [_unpack_numpy(v, wi).astype(cdt) for v in vecs]


def _eig_complex(a, left: bool, right: bool):
    """``eig_p``'s results for a complex stack: numpy's ``eig`` (LAPACK's complex geev), the
    left vectors from the inverse of the right ones, both normalized as LAPACK's; NaN for a
    matrix where it fails to converge."""
    n = a.shape[-1]
    w_all = np.empty(a.shape[:-1], a.dtype)
    vecs = [np.empty(a.shape, a.dtype) for _ in range(int(left) + int(right))]
    flat = a.reshape((int(np.prod(a.shape[:-2], dtype=np.int64)), n, n))
    views = [o.reshape((flat.shape[0],) + o.shape[a.ndim - 2 :]) for o in [w_all, *vecs]]
    for i, x in enumerate(flat if n else ()):
        try:
            w, v = np.linalg.eig(x)
            v = _normalized(v)
            res = [w] + ([_normalized(np.linalg.inv(v).conj().T)] if left else [])
            res += [v] if right else []
        except np.linalg.LinAlgError:
            res = [np.nan] * len(views)
        for view, r in zip(views, res):
            view[i] = r
    return [w_all, *vecs]


eig_p = standard_primitive("eig", _eig_impl, _eig_abstract_eval, multiple_results=True)


def _eig_jvp(primals, tangents, *, compute_left_eigenvectors, compute_right_eigenvectors):
    from fungrad import lax

    (a,), (da,) = primals, tangents
    params = dict(
        compute_left_eigenvectors=compute_left_eigenvectors,
        compute_right_eigenvectors=compute_right_eigenvectors,
    )
    if type(da) is Zero:
        outs = eig_p.bind(a, **params)
        return outs, [Zero(tangent_aval(core.get_aval(o))) for o in outs]
    if compute_left_eigenvectors or compute_right_eigenvectors:
        raise TypeError(
            "eig: derivatives of eigenvectors are not supported (nor in JAX); differentiate "
            "the eigenvalues alone (compute_left_eigenvectors=False, "
            "compute_right_eigenvectors=False, or fungrad.numpy.linalg.eigvals)"
        )
    w, vl, vr = eig_p.bind(a, compute_left_eigenvectors=True, compute_right_eigenvectors=True)
    nd = core.get_aval(a).ndim
    dac = da if core.get_aval(da).dtype.kind == "c" else lax.complex(da, lax.full_like(da, 0))
    ul = lax.conj(vl)
    num = lax.reduce_sum(lax.mul(ul, _matmul(dac, vr)), (nd - 2,))  # u_jᴴ dA v_j
    den = lax.reduce_sum(lax.mul(ul, vr), (nd - 2,))  # u_jᴴ v_j
    return [w], [lax.div(num, den)]


jvp_rules[eig_p] = _eig_jvp
batch_rules[eig_p] = _batch(eig_p)


def _unpack(v, wi):
    """``_unpack_numpy`` in lax: the (re, im) pair of the complex eigenvector columns."""
    from fungrad import lax

    aval = core.get_aval(v)
    nd, n = aval.ndim, aval.shape[-1]
    if n == 0:
        return Pair(v, v)
    zero_col = lax.full(aval.shape[:-1] + (1,), 0, aval.dtype)
    nxt = lax.concatenate([lax.slice_in_dim(v, 1, n, axis=nd - 1), zero_col], nd - 1)
    prv = lax.concatenate([zero_col, lax.slice_in_dim(v, 0, n - 1, axis=nd - 1)], nd - 1)
    wi_b = lax.broadcast_in_dim(wi, aval.shape, tuple(range(nd - 2)) + (nd - 1,))
    zero = lax.full_like(v, 0)
    pos, neg = lax.gt(wi_b, zero), lax.lt(wi_b, zero)
    re = lax.select_n(neg, v, prv)
    im = lax.select_n(pos, lax.select_n(neg, zero, lax.neg(v)), nxt)
    return Pair(re, im)


def _eig_split_rule(a, *, compute_left_eigenvectors, compute_right_eigenvectors):
    if isinstance(a, Pair):  # a complex matrix: LAPACK's complex geev
        from fungrad.lax.linalg_decomp_complex import eig_split_complex

        return eig_split_complex(
            a,
            compute_left_eigenvectors=compute_left_eigenvectors,
            compute_right_eigenvectors=compute_right_eigenvectors,
        )
    outs = geev_p.bind(
        a, compute_left=compute_left_eigenvectors, compute_right=compute_right_eigenvectors
    )
    wr, wi = outs[0], outs[1]
    return [Pair(wr, wi)] + [_unpack(v, wi) for v in outs[2:]]


register_split_rule(eig_p, _eig_split_rule, complex_only=True)  # complex results: always split
