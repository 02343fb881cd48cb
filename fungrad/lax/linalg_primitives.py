"""The ``cholesky`` and ``triangular_solve`` primitives (jax.lax.linalg's), with all their rules.

``cholesky_p`` takes a [..., n, n] float or complex matrix and returns its lower Cholesky factor
(``A = L Lᴴ``), reading only the lower triangle (the wrapper in :mod:`fungrad.lax.linalg`
symmetrizes first); a matrix that is not positive definite gives NaN on and below the diagonal
(zeros above), as JAX. ``triangular_solve_p`` solves ``op(a) x = b`` (``left_side``) or
``x op(a) = b`` for triangular ``a`` [..., m, m] and ``b`` with the same batch dimensions;
``op`` transposes ``a`` when ``transpose_a`` and conjugates it when ``conjugate_a`` (complex
dtypes; both: ``aᴴ``).

Rules:

* eager: numpy (``np.linalg.cholesky``; a vectorised substitution for the solve);
* jvp: for ``A = L Lᴴ``, ``dL = L Φ(L⁻¹ dA L⁻ᴴ)`` with ``Φ`` the lower triangle, diagonal
  halved; the solve is linear in ``b`` and ``x = op(a)⁻¹ b`` has the ``a``-tangent
  ``-op(a)⁻¹ op(da) x`` (``-x op(da) op(a)⁻¹`` on the right);
* transpose (the solve, in ``b``): the solve with ``op(a)`` transposed once more (the
  conjugation kept: the linear transpose, as JAX);
* batching: the vmapped dimension moves to the front, a leading batch dimension;
* lowering: where the backend's policy says so (``policy.linalg_step``: the CPU with LAPACK,
  the GPU's WGSL kernels) the operands are stored and one step (``steps.CholeskyStep`` /
  ``steps.TriangularSolveStep``) is appended, so the program's size does not grow with ``n``;
  elsewhere (a CPU without LAPACK) the loop algorithms below (one ``fori_loop`` step per column
  or row) are traced and lowered inline.
  Complex operands never reach these rules: the complex split rewrites them into the
  interleaved forms of :mod:`fungrad.lax.linalg_complex`.
"""

from __future__ import annotations

import numpy as np

from fungrad import core
from fungrad.core import ShapedArray
from fungrad.impls import ignore_fp_errors
from fungrad.lax.utils import standard_primitive
from fungrad.lowering import kernel
from fungrad.transforms.jvp import Zero, jvp_rules, tangent_aval
from fungrad.transforms.transpose import UndefPrimal, deflinear_transpose
from fungrad.transforms.vmap import batch_rules, bdim_at_front

__all__ = ["cholesky_p", "triangular_solve_p"]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_INEXACT = _FLOATS + (np.dtype(np.complex64), np.dtype(np.complex128))


def _check_matrix(name: str, x: ShapedArray, what: str = "operand") -> None:
    if x.dtype not in _INEXACT:
        raise TypeError(
            f"{name}: {what} has dtype {x.dtype}; only float32, float64, complex64 and "
            "complex128 are supported (cast it first)"
        )
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(
            f"{name}: {what} must be a square matrix or a stack of them, [..., n, n], got "
            f"shape {x.shape}"
        )


def _mT(x):
    from fungrad import lax

    nd = core.get_aval(x).ndim
    return lax.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _matmul(x, y):
    """Batched ``x @ y`` over equal leading batch dimensions."""
    from fungrad import lax

    nd = core.get_aval(x).ndim
    batch = tuple(range(nd - 2))
    return lax.dot_general(x, y, (((nd - 1,), (nd - 2,)), (batch, batch)))


def _tril_mask(shape, k: int = 0):
    from fungrad import lax

    nd = len(shape)
    rows = lax.broadcasted_iota(np.int32, shape, nd - 2)
    cols = lax.broadcasted_iota(np.int32, shape, nd - 1)
    return lax.ge(lax.add(rows, np.int32(k)), cols)


def _triangle(x, lower: bool, k: int = 0):
    """``x``'s lower (or upper) triangle, the rest zero (``k`` shifts the diagonal, as tril)."""
    from fungrad import lax

    shape = core.get_aval(x).shape
    mask = _tril_mask(shape, k) if lower else lax.not_(_tril_mask(shape, -1 - k))
    return lax.select_n(mask, lax.full_like(x, 0), x)


# -- cholesky -----------------------------------------------------------------------------------


def _cholesky_abstract_eval(x):
    _check_matrix("cholesky", x)
    return ShapedArray(x.shape, x.dtype)


@ignore_fp_errors
def _cholesky_impl(x):
    x = np.asarray(x)
    out = np.zeros_like(x)
    n = x.shape[-1]
    batch = int(np.prod(x.shape[:-2], dtype=np.int64))
    flat, res = x.reshape((batch, n, n)), out.reshape((batch, n, n))
    for i in range(flat.shape[0]):
        try:
            res[i] = np.linalg.cholesky(np.tril(flat[i]))
        except np.linalg.LinAlgError:  # not positive definite: a NaN triangle, as JAX
            res[i] = np.tril(np.full((n, n), np.nan, x.dtype))
    return out


cholesky_p = standard_primitive("cholesky", _cholesky_impl, _cholesky_abstract_eval)


def _cholesky_jvp(primals, tangents):
    from fungrad import lax

    (x,), (dx,) = primals, tangents
    L = cholesky_p.bind(x)
    if type(dx) is Zero:
        return L, Zero(tangent_aval(core.get_aval(L)))
    # dL = L Φ(L⁻¹ dA L⁻ᴴ): Φ takes the lower triangle and halves the diagonal
    tmp = triangular_solve_p.bind(
        L,
        dx,
        left_side=False,
        lower=True,
        transpose_a=True,
        conjugate_a=core.get_aval(L).dtype.kind == "c",
        unit_diagonal=False,
    )
    inner = triangular_solve_p.bind(
        L,
        tmp,
        left_side=True,
        lower=True,
        transpose_a=False,
        conjugate_a=False,
        unit_diagonal=False,
    )
    shape = core.get_aval(inner).shape
    nd = len(shape)
    diag = lax.eq(
        lax.broadcasted_iota(np.int32, shape, nd - 2), lax.broadcasted_iota(np.int32, shape, nd - 1)
    )
    phi = _triangle(inner, True)
    phi = lax.select_n(diag, phi, lax.mul(phi, lax.full_like(phi, 0.5)))
    return L, _matmul(L, phi)


def _cholesky_batch(axis_size, args, dims):
    (x,), (d,) = args, dims
    return cholesky_p.bind(bdim_at_front(x, d, axis_size)), 0


jvp_rules[cholesky_p] = _cholesky_jvp
batch_rules[cholesky_p] = _cholesky_batch


def cholesky_loop(a):
    """The lower Cholesky factor of [..., n, n] ``a`` (only the lower triangle is read) in lax: the
    right-looking column recurrence, one ``fori_loop`` step per column (dynamic reads, masked
    writes), so the program is the same size for every ``n``. Used where no library runs it."""
    from fungrad import lax

    nd, n = a.ndim, a.shape[-1]
    if n == 0:
        return a
    rows = lax.broadcasted_iota(np.int32, a.shape, nd - 2)
    cols = lax.broadcasted_iota(np.int32, a.shape, nd - 1)
    zeros = lax.full_like(a, 0)
    batch = tuple(range(nd - 2))

    def step(j, state):
        a, factor = state
        j = lax.convert_element_type(j, np.int32)  # int64 under x64
        col_j = lax.dynamic_index_in_dim(a, j, nd - 1, keepdims=False)  # [..., n]
        d = lax.sqrt(lax.dynamic_index_in_dim(col_j, j, nd - 2, keepdims=False))
        d = lax.broadcast_in_dim(d, a.shape, batch)
        col = lax.broadcast_in_dim(col_j, a.shape, batch + (nd - 2,))
        col = lax.select_n(lax.gt(rows, j), zeros, lax.div(col, d))
        col = lax.select_n(lax.eq(rows, j), col, d)  # col[i, :] = L[i, j] on every column
        factor = lax.select_n(lax.eq(cols, j), factor, col)
        # the trailing block (rows and columns > j) loses the outer product of column j of L
        trailing = lax.and_(lax.gt(rows, j), lax.gt(cols, j))
        a = lax.select_n(trailing, a, lax.sub(a, lax.mul(col, _mT(col))))
        return a, factor

    _, factor = lax.fori_loop(0, n, step, (a, zeros))
    # not positive definite (a NaN somewhere): the whole lower triangle NaN, as the library
    bad = lax.reduce_or(lax.ne(factor, factor), (nd - 2, nd - 1))
    bad = lax.and_(lax.broadcast_in_dim(bad, a.shape, batch), lax.ge(rows, cols))
    return lax.select_n(bad, factor, lax.full_like(factor, np.nan))


def _cholesky_lowering(ctx, x):
    planner = ctx.planner
    n = x.shape[-1]
    batch = int(np.prod(x.shape[:-2], dtype=np.int64))
    if not planner.policy.linalg_step("cholesky", n, batch):
        return _lower_traced(ctx, cholesky_loop, [x])[0]
    from fungrad.lowering.steps import CholeskyStep

    a = ctx.materialize(x).buffer
    out = planner.new_buffer(x.shape, x.dtype, "temp")
    planner.add_step(CholeskyStep(f"cholesky_{out.name}", a, out, batch, n))
    return planner.buffer_tensor(out, "cholesky")


def _lower_traced(ctx, fn, operands, **params):
    """Lower ``fn(*operands, **params)`` (lax code) inline: traced at the operands' avals."""
    from fungrad.transforms.staging import trace_to_jaxpr

    avals = [ShapedArray(t.shape, t.dtype) for t in operands]
    closed = trace_to_jaxpr(lambda *xs: [fn(*xs, **params)], avals)
    return ctx.planner.lower_jaxpr(closed, list(operands))


kernel.register_lowering(cholesky_p, _cholesky_lowering)


# -- triangular_solve ---------------------------------------------------------------------------


def _triangular_solve_abstract_eval(
    a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal
):
    name = "triangular_solve"
    _check_matrix(name, a, "a")
    if b.dtype != a.dtype:
        raise TypeError(
            f"{name}: a and b must have one dtype, got {a.dtype} and {b.dtype} (cast one)"
        )
    m = a.shape[-1]
    side = -2 if left_side else -1
    if b.ndim != a.ndim or b.shape[:-2] != a.shape[:-2] or b.shape[side] != m:
        want = "[..., m, k]" if left_side else "[..., k, m]"
        raise ValueError(
            f"{name}: with a of shape {a.shape} (m = {m}) and left_side={left_side}, b must be "
            f"{want} with a's batch dimensions, got shape {b.shape}"
        )
    return ShapedArray(b.shape, b.dtype)


@ignore_fp_errors
def _triangular_solve_impl(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    a, b = np.asarray(a), np.asarray(b)
    m = a.shape[-1]
    t = np.tril(a) if lower else np.triu(a)
    if conjugate_a:
        t = np.conj(t)
    if unit_diagonal:
        idx = np.arange(m)
        t[..., idx, idx] = 1
    if transpose_a:
        t, lower = np.swapaxes(t, -1, -2), not lower
    if not left_side:  # x t = b  <=>  tᵀ xᵀ = bᵀ
        t, lower, b = np.swapaxes(t, -1, -2), not lower, np.swapaxes(b, -1, -2)
    x = np.zeros(b.shape, np.result_type(a, b))
    order = range(m) if lower else range(m - 1, -1, -1)
    for i in order:
        s = b[..., i, :]
        if lower and i:
            s = s - np.einsum("...j,...jk->...k", t[..., i, :i], x[..., :i, :])
        elif not lower and i < m - 1:
            s = s - np.einsum("...j,...jk->...k", t[..., i, i + 1 :], x[..., i + 1 :, :])
        x[..., i, :] = s / t[..., i, i, None]
    return x if left_side else np.swapaxes(x, -1, -2)


triangular_solve_p = standard_primitive(
    "triangular_solve", _triangular_solve_impl, _triangular_solve_abstract_eval
)


def _triangular_solve_jvp(primals, tangents, **params):
    from fungrad import lax

    a, b = primals
    da, db = tangents
    x = triangular_solve_p.bind(a, b, **params)
    parts = []
    if type(db) is not Zero:
        parts.append(triangular_solve_p.bind(a, db, **params))
    if type(da) is not Zero:
        # x = op(a)⁻¹ b  =>  dx = -op(a)⁻¹ op(da) x  (on the right: -x op(da) op(a)⁻¹)
        da = _triangle(da, params["lower"], -1 if params["unit_diagonal"] else 0)
        op_da = _mT(da) if params["transpose_a"] else da
        if params["conjugate_a"] and core.get_aval(da).dtype.kind == "c":
            op_da = lax.conj(op_da)
        rhs = _matmul(op_da, x) if params["left_side"] else _matmul(x, op_da)
        parts.append(lax.neg(triangular_solve_p.bind(a, rhs, **params)))
    if not parts:
        return x, Zero(tangent_aval(core.get_aval(x)))
    out = parts[0]
    for p in parts[1:]:
        out = lax.add(out, p)
    return x, out


def _triangular_solve_transpose(ct, a, b, **params):
    if isinstance(a, UndefPrimal):
        raise TypeError(
            "triangular_solve: not linear in a; only b may be transposed (a must be known)"
        )
    flipped = dict(params, transpose_a=not params["transpose_a"])
    return [None, triangular_solve_p.bind(a, ct, **flipped)]


def _triangular_solve_batch(axis_size, args, dims, **params):
    a, b = (bdim_at_front(x, d, axis_size) for x, d in zip(args, dims))
    return triangular_solve_p.bind(a, b, **params), 0


jvp_rules[triangular_solve_p] = _triangular_solve_jvp
deflinear_transpose(triangular_solve_p, _triangular_solve_transpose)
batch_rules[triangular_solve_p] = _triangular_solve_batch


def substitute_loop(a, b, lower: bool, unit_diagonal: bool):
    """Solve ``a x = b`` for triangular [..., n, n] ``a`` (its ``lower`` or upper triangle
    read) and [..., n, k] ``b`` in lax: one ``fori_loop`` step per row (dynamic row and column
    reads, masked updates), the same program for every ``n``."""
    from fungrad import lax

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
        update = lax.sub(b, lax.mul(lax.broadcast_in_dim(col_j, b.shape, batch + (nd - 2,)), x_j))
        later = lax.gt(rows, j) if lower else lax.lt(rows, j)
        return lax.select_n(lax.eq(rows, j), lax.select_n(later, b, update), x_j)

    return lax.fori_loop(0, n, step, b)


def triangular_solve_loop(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    """:data:`triangular_solve_p` by :func:`substitute_loop` (real dtypes: ``conjugate_a``
    changes nothing; complex ones are split before lowering)."""
    if transpose_a:
        a, lower = _mT(a), not lower
    if left_side:
        return substitute_loop(a, b, lower, unit_diagonal)
    # x a = b  <=>  aᵀ xᵀ = bᵀ
    return _mT(substitute_loop(_mT(a), _mT(b), not lower, unit_diagonal))


def _triangular_solve_lowering(ctx, a, b, **params):
    planner = ctx.planner
    batch = int(np.prod(b.shape[:-2], dtype=np.int64))
    if not planner.policy.linalg_step("triangular_solve", a.shape[-1], batch):
        return _lower_traced(ctx, triangular_solve_loop, [a, b], **params)[0]
    from fungrad.lowering.steps import TriangularSolveStep

    abuf = ctx.materialize(a).buffer
    bbuf = ctx.materialize(b).buffer
    out = planner.new_buffer(b.shape, b.dtype, "temp")
    planner.add_step(
        TriangularSolveStep(
            f"trsm_{out.name}",
            abuf,
            bbuf,
            out,
            batch,
            b.shape[-2],
            b.shape[-1],
            params["left_side"],
            params["lower"],
            params["transpose_a"],
            params["unit_diagonal"],
        )
    )
    return planner.buffer_tensor(out, "triangular_solve")


kernel.register_lowering(triangular_solve_p, _triangular_solve_lowering)
