"""The ``lu`` primitive (jax.lax.linalg's LU with partial pivoting), with all its rules, and the
LU-based solve that :mod:`fungrad.numpy.linalg` and :mod:`fungrad.scipy.linalg` share.

``lu_p`` takes a float or complex [..., m, n] matrix (rectangular allowed) and returns three
arrays:

* ``lu`` [..., m, n]: the multipliers of the unit-lower ``L`` below the diagonal, ``U`` on and
  above it;
* ``pivots`` int32 [..., min(m, n)]: row ``i`` was swapped with row ``pivots[i]`` at step ``i``
  (0-based; LAPACK's ``ipiv`` minus one);
* ``permutation`` int32 [..., m]: those swaps applied in order to ``arange(m)``, so
  ``a[..., permutation, :] == L @ U``.

A zero pivot leaves its column unscaled (LAPACK's result): a singular matrix gets an exact zero
on ``U``'s diagonal and no error; solves with it give inf/NaN, as in JAX.

Rules:

* eager: numpy, right-looking elimination vectorised over the batch (``min(m, n)`` steps); the
  pivot is the first largest ``|re| + |im|`` of its column, LAPACK's choice for complex;
* jvp: with ``P A = L U`` (``L`` completed to m x m with the identity, ``U`` to n x n),
  ``X = L⁻¹ P dA U⁻¹`` gives ``dL = L tril(X, -1)`` and ``dU = triu(X) U`` (differentiate
  ``L U = P A`` and split ``L⁻¹ dL + dU U⁻¹`` into its strictly lower and upper parts); the
  pivots and the permutation are piecewise constant: zero tangents;
* batching: the vmapped dimension moves to the front, a leading batch dimension;
* lowering: where the backend's policy says so (``policy.linalg_step``: the CPU with LAPACK,
  ``getrf`` per matrix; the GPU's WGSL kernels) one ``steps.LuStep``, so the program's size
  does not grow with the matrix; elsewhere (a CPU without LAPACK) :func:`lu_loop`, one
  ``fori_loop`` step per column, inline.
  Complex operands are rewritten by the complex split into :mod:`fungrad.lax.linalg_complex`'s
  interleaved form (``cgetrf``/``zgetrf`` on the CPU).
"""

from __future__ import annotations

import numpy as np

from fungrad import core
from fungrad.core import ShapedArray
from fungrad.impls import ignore_fp_errors
from fungrad.lax.linalg_primitives import _matmul, _triangle, triangular_solve_p
from fungrad.lax.utils import standard_primitive
from fungrad.lowering import kernel
from fungrad.transforms.jvp import Zero, jvp_rules, tangent_aval
from fungrad.transforms.vmap import batch_rules, bdim_at_front

__all__ = ["lu_p", "lu_loop", "lu_pivots_to_permutation", "lu_solve", "permute_rows"]

_INEXACT = tuple(np.dtype(t) for t in ("float32", "float64", "complex64", "complex128"))


def _lu_abstract_eval(x):
    if x.dtype not in _INEXACT:
        raise TypeError(
            f"lu: operand has dtype {x.dtype}; only float32, float64, complex64 and complex128 "
            "are supported (cast it first)"
        )
    if x.ndim < 2:
        raise TypeError(
            f"lu: operand must be a matrix or a stack of them, [..., m, n] (rank at least 2), "
            f"got shape {x.shape}"
        )
    *batch, m, n = x.shape
    batch = tuple(batch)
    return [
        ShapedArray(x.shape, x.dtype),
        ShapedArray(batch + (min(m, n),), np.dtype(np.int32)),
        ShapedArray(batch + (m,), np.dtype(np.int32)),
    ]


@ignore_fp_errors
def _lu_impl(x):
    x = np.asarray(x)
    *batch, m, n = x.shape
    k = min(m, n)
    count = int(np.prod(batch, dtype=np.int64))
    a = np.array(x, copy=True).reshape((count, m, n))
    pivots = np.zeros((count, k), np.int32)
    perm = np.tile(np.arange(m, dtype=np.int32), (count, 1))
    idx = np.arange(count)
    for j in range(k):
        col = a[:, j:, j]
        size = np.abs(col.real) + np.abs(col.imag) if a.dtype.kind == "c" else np.abs(col)
        p = j + np.argmax(size, axis=1)
        pivots[:, j] = p
        a[idx, j], a[idx, p] = a[idx, p], a[idx, j].copy()
        perm[idx, j], perm[idx, p] = perm[idx, p], perm[idx, j].copy()
        pivot = a[:, j, j]
        pivot = np.where(pivot == 0, np.ones_like(pivot), pivot)  # a zero pivot: unscaled
        a[:, j + 1 :, j] /= pivot[:, None]
        a[:, j + 1 :, j + 1 :] -= a[:, j + 1 :, j, None] * a[:, j, None, j + 1 :]
    batch = tuple(batch)
    return [a.reshape(x.shape), pivots.reshape(batch + (k,)), perm.reshape(batch + (m,))]


lu_p = standard_primitive("lu", _lu_impl, _lu_abstract_eval, multiple_results=True)


def permute_rows(x, perm):
    """``x[..., perm, :]`` for [..., m, n] ``x`` and int32 [..., m] ``perm`` (one permutation
    per batch entry): a gather whose leading dimensions are batching dimensions."""
    from fungrad import lax

    nd = core.get_aval(x).ndim
    batch = tuple(range(nd - 2))
    dnums = lax.GatherDimensionNumbers(
        offset_dims=(nd - 1,),
        collapsed_slice_dims=(nd - 2,),
        start_index_map=(nd - 2,),
        operand_batching_dims=batch,
        start_indices_batching_dims=batch,
    )
    slice_sizes = (1,) * (nd - 1) + (core.get_aval(x).shape[-1],)
    return lax.gather(
        x,
        lax.expand_dims(perm, (nd - 1,)),
        dnums,
        slice_sizes,
        mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS,
        indices_are_sorted=False,
        unique_indices=True,
    )


def _eye(dtype, rows: int, cols: int, shift: int = 0):
    """A rows x cols matrix with ones where ``col == row + shift``."""
    from fungrad import lax

    eq = lax.eq(
        lax.add(lax.broadcasted_iota(np.int32, (rows, cols), 0), np.int32(shift)),
        lax.broadcasted_iota(np.int32, (rows, cols), 1),
    )
    return lax.convert_element_type(eq, dtype)


def _completed_factors(lu):
    """``L`` [..., m, m] (unit lower, identity beyond column k) and ``U`` [..., n, n] (identity
    in its trailing (n - k) block) from the packed [..., m, n] ``lu``."""
    from fungrad import lax

    aval = core.get_aval(lu)
    *batch, m, n = aval.shape
    k, nd = min(m, n), aval.ndim
    zero = lax.full((), 0, aval.dtype)
    pad = [(0, 0, 0)] * nd
    lower = _triangle(lax.slice_in_dim(lu, 0, k, axis=nd - 1), True, -1)
    pad[-1] = (0, m - k, 0)
    lower = lax.add(lax.pad(lower, zero, pad), _broadcast(_eye(aval.dtype, m, m), batch))
    upper = _triangle(lax.slice_in_dim(lu, 0, k, axis=nd - 2), False)
    pad[-1], pad[-2] = (0, 0, 0), (0, n - k, 0)
    tail = lax.pad(_eye(aval.dtype, n - k, n - k), zero, ((k, 0, 0), (k, 0, 0)))
    upper = lax.add(lax.pad(upper, zero, pad), _broadcast(tail, batch))
    return lower, upper


def _broadcast(x, batch):
    from fungrad import lax

    shape = core.get_aval(x).shape
    return lax.broadcast_in_dim(x, tuple(batch) + shape, tuple(range(len(batch), len(batch) + 2)))


def _lu_jvp(primals, tangents):
    from fungrad import lax

    (a,), (da,) = primals, tangents
    lu, pivots, perm = lu_p.bind(a)
    zeros = [Zero(tangent_aval(core.get_aval(v))) for v in (pivots, perm)]
    if type(da) is Zero:
        return [lu, pivots, perm], [Zero(tangent_aval(core.get_aval(lu))), *zeros]
    lower, upper = _completed_factors(lu)
    solve = dict(transpose_a=False, conjugate_a=False)
    x = triangular_solve_p.bind(
        lower, permute_rows(da, perm), left_side=True, lower=True, unit_diagonal=True, **solve
    )
    x = triangular_solve_p.bind(
        upper, x, left_side=False, lower=False, unit_diagonal=False, **solve
    )  # X = L⁻¹ P dA U⁻¹, [..., m, n]
    dlu = lax.add(_matmul(lower, _triangle(x, True, -1)), _matmul(_triangle(x, False), upper))
    return [lu, pivots, perm], [dlu, *zeros]


def _lu_batch(axis_size, args, dims):
    (x,), (d,) = args, dims
    return lu_p.bind(bdim_at_front(x, d, axis_size)), [0, 0, 0]


jvp_rules[lu_p] = _lu_jvp
batch_rules[lu_p] = _lu_batch


# -- the loop algorithm (backends without a library) --------------------------------------------


def lu_loop(a):
    """:data:`lu_p` in lax: ``(lu, pivots, permutation)`` of the float [..., m, n] ``a`` by
    right-looking elimination, one ``fori_loop`` step per column (the pivot an ``argmax``, row
    swaps and rank-1 updates ``select_n`` over ``iota`` masks: no gathers, no scatters), so the
    program is the same size for every matrix size."""
    from fungrad import lax

    *batch, m, n = a.shape
    k, nd = min(m, n), a.ndim
    bdims = tuple(range(nd - 2))
    rows = lax.broadcasted_iota(np.int32, a.shape, nd - 2)
    cols = lax.broadcasted_iota(np.int32, a.shape, nd - 1)
    col_rows = lax.broadcasted_iota(np.int32, a.shape[:-1], nd - 2)  # [..., m]
    piv_idx = lax.broadcasted_iota(np.int32, tuple(batch) + (k,), nd - 2)

    def bcast(v, shape, dims=bdims):
        return lax.broadcast_in_dim(v, shape, dims)

    def pick(x, is_p, axis):  # the entries of x where is_p, summed over axis (one per batch)
        return lax.reduce_sum(lax.select_n(is_p, lax.full_like(x, 0), x), (axis,))

    def step(j, state):
        a, pivots, perm = state
        j = lax.convert_element_type(j, np.int32)  # fori_loop counts in int64 under x64
        col = lax.dynamic_index_in_dim(a, j, nd - 1, keepdims=False)  # [..., m]
        cand = lax.select_n(lax.ge(col_rows, j), lax.full_like(col, -1), lax.abs(col))
        p = lax.argmax(cand, nd - 2, np.int32)  # the first largest |a[i, j]|, i >= j
        pivots = lax.select_n(lax.eq(piv_idx, j), pivots, bcast(p, pivots.shape))
        # swap rows j and p of a (row p read by masking) and entries j and p of perm
        is_p = lax.eq(rows, bcast(p, a.shape))
        row_p = bcast(pick(a, is_p, nd - 2), a.shape, bdims + (nd - 1,))
        row_j = bcast(
            lax.dynamic_index_in_dim(a, j, nd - 2, keepdims=False), a.shape, bdims + (nd - 1,)
        )
        a = lax.select_n(lax.eq(rows, j), lax.select_n(is_p, a, row_j), row_p)
        at_p = lax.eq(col_rows, bcast(p, perm.shape))
        perm_p = bcast(pick(perm, at_p, nd - 2), perm.shape)
        perm_j = bcast(lax.dynamic_index_in_dim(perm, j, nd - 2, keepdims=False), perm.shape)
        perm = lax.select_n(lax.eq(col_rows, j), lax.select_n(at_p, perm, perm_j), perm_p)
        # eliminate below the pivot
        col = lax.dynamic_index_in_dim(a, j, nd - 1, keepdims=False)
        pivot = lax.dynamic_index_in_dim(col, j, nd - 2, keepdims=False)  # [...]
        pivot = lax.select_n(lax.eq(pivot, lax.full_like(pivot, 0)), pivot, lax.full_like(pivot, 1))
        mult = lax.div(bcast(col, a.shape, bdims + (nd - 2,)), bcast(pivot, a.shape))
        row = bcast(
            lax.dynamic_index_in_dim(a, j, nd - 2, keepdims=False), a.shape, bdims + (nd - 1,)
        )
        below = lax.gt(rows, j)
        a = lax.select_n(lax.and_(below, lax.gt(cols, j)), a, lax.sub(a, lax.mul(mult, row)))
        a = lax.select_n(lax.and_(below, lax.eq(cols, j)), a, mult)
        return a, pivots, perm

    perm = lax.broadcasted_iota(np.int32, a.shape[:-1], nd - 2)
    if k == 0:
        return a, piv_idx, perm
    return lax.fori_loop(0, k, step, (a, piv_idx, perm))


def _lu_lowering(ctx, x):
    planner = ctx.planner
    *batch, m, n = x.shape
    k = min(m, n)
    count = int(np.prod(batch, dtype=np.int64))
    if not planner.policy.linalg_step("lu", max(m, n), count):
        from fungrad.transforms.staging import trace_to_jaxpr

        closed = trace_to_jaxpr(lambda a: list(lu_loop(a)), [ShapedArray(x.shape, x.dtype)])
        return planner.lower_jaxpr(closed, [x])
    from fungrad.lowering.steps import LuStep

    a = ctx.materialize(x).buffer
    lu = planner.new_buffer(x.shape, x.dtype, "temp")
    pivots = planner.new_buffer(tuple(batch) + (k,), np.int32, "temp")
    perm = planner.new_buffer(tuple(batch) + (m,), np.int32, "temp")
    work = planner.new_buffer((m * n,), x.dtype, "temp")  # one column-major matrix
    ipiv = planner.new_buffer((k,), np.int64, "temp")  # LAPACK's pivots (32 or 64 bits)
    planner.add_step(LuStep(f"lu_{lu.name}", a, lu, pivots, perm, work, ipiv, count, m, n))
    return [
        planner.buffer_tensor(lu, "lu"),
        planner.buffer_tensor(pivots, "lu"),
        planner.buffer_tensor(perm, "lu"),
    ]


kernel.register_lowering(lu_p, _lu_lowering)


# -- users of the factorisation -----------------------------------------------------------------


def lu_pivots_to_permutation(pivots, permutation_size: int):
    """The permutation (``perm[i]`` = the original row now at row ``i``) made by applying the
    row swaps ``i <-> pivots[..., i]`` in order to ``arange(permutation_size)``: a
    ``fori_loop`` over the pivots, the same program for every size."""
    from fungrad import lax

    *batch, k = pivots.shape
    batch, nd = tuple(batch), pivots.ndim
    shape = batch + (permutation_size,)
    perm = lax.broadcasted_iota(np.int32, shape, nd - 1)
    if k == 0:
        return perm
    idx = lax.broadcasted_iota(np.int32, shape, nd - 1)
    bdims = tuple(range(nd - 1))

    def step(i, perm):
        i = lax.convert_element_type(i, np.int32)
        p = lax.dynamic_index_in_dim(pivots, i, nd - 1, keepdims=False)
        is_p = lax.eq(idx, lax.broadcast_in_dim(p, shape, bdims))
        at_p = lax.reduce_sum(lax.select_n(is_p, lax.full_like(perm, 0), perm), (nd - 1,))
        at_i = lax.dynamic_index_in_dim(perm, i, nd - 1, keepdims=False)
        perm = lax.select_n(is_p, perm, lax.broadcast_in_dim(at_i, shape, bdims))
        return lax.select_n(lax.eq(idx, i), perm, lax.broadcast_in_dim(at_p, shape, bdims))

    return lax.fori_loop(0, k, step, perm)


def lu_solve(lu, perm, b, trans: int = 0):
    """Solve ``a x = b`` (``trans=0``), ``aᵀ x = b`` (``trans=1``) or ``aᴴ x = b``
    (``trans=2``; ``aᵀ`` for real dtypes) for [..., n, k] ``b`` from the square ``a``'s
    :data:`lu_p` factors (``lu`` and the ``permutation``, with ``b``'s batch shape): a row
    permutation and two ``triangular_solve`` primitives (LAPACK's trsm under jit on the CPU)."""
    from fungrad import lax

    solve = dict(left_side=True, conjugate_a=False)
    if trans == 0:  # P a = L U: L y = P b, U x = y
        y = triangular_solve_p.bind(
            lu, permute_rows(b, perm), lower=True, unit_diagonal=True, transpose_a=False, **solve
        )
        return triangular_solve_p.bind(
            lu, y, lower=False, unit_diagonal=False, transpose_a=False, **solve
        )
    # aᵀ = Uᵀ Lᵀ P: Uᵀ y = b, Lᵀ z = y, x = Pᵀ z (row perm[i] of x is row i of z); aᴴ alike
    if trans == 2 and core.get_aval(lu).dtype.kind == "c":
        solve["conjugate_a"] = True
    y = triangular_solve_p.bind(lu, b, lower=False, unit_diagonal=False, transpose_a=True, **solve)
    z = triangular_solve_p.bind(lu, y, lower=True, unit_diagonal=True, transpose_a=True, **solve)
    nd = perm.ndim
    inverse = lax.sort(
        (perm, lax.broadcasted_iota(np.int32, perm.shape, nd - 1)), dimension=nd - 1, num_keys=1
    )[1]
    return permute_rows(z, inverse)


# the complex split's rules for lu, cholesky and triangular_solve (complex values under jit)
from fungrad.lax import linalg_complex  # noqa: E402,F401
