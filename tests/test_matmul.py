"""The own float32 matmul kernel (fungrad/lowering/matmul.py) and the planner's rewrites around
products (fused weight updates, results laid out for transposing readers, column reductions
merged into the kernel storing their operand), against the float64 numpy product."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import nn
from fungrad.lowering import compile_jaxpr, fusion
from fungrad.lowering.cpu import gemm as matmul


def build(f, *args):
    args = [fnp.asarray(a) for a in args]
    return compile_jaxpr(fg.make_jaxpr(f)(*args), "cpu", "test"), args


def run(exe, args, nthreads=None):
    if nthreads is not None:
        exe._nthreads = nthreads
    return [np.asarray(o) for o in exe.call(args)]


def gemms(exe):
    return [s for s in exe.program.steps if isinstance(s, fusion.Gemm)]


def close(got, want, k):
    # float32 accumulation over k terms of O(1) products
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-6 * k + 1e-5)


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(2, 40),
    n=st.integers(2, 70),
    k=st.integers(1, 40),
    trans_a=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_own_kernel_ragged_shapes(m, n, k, trans_a, seed):
    # m, n >= 2: a matrix times one column, or one row times a matrix, is an inline row
    # reduction, not a Gemm (see test_issue15_matrix_vector_products_are_row_reductions and
    # the "kind" cases below)
    rng = np.random.default_rng(seed)
    if m * n * k < 16384:  # below this, dot_general lowers to an inline loop, not a Gemm
        k = -(-16384 // (m * n))
        if k > 4096:
            return
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    f = (lambda a, b: a.T @ b) if trans_a else (lambda a, b: a @ b)
    exe, args = build(f, a, b)
    (g,) = gemms(exe)
    vec, nr = matmul.geometry().vec, matmul.geometry().nr
    one_panel = n <= nr and 4 * n >= 3 * -(-n // vec) * vec
    assert matmul.supports(g) == (
        trans_a or k * nr <= matmul.MAX_STACK_FLOATS and (one_panel or m * k <= matmul.MAX_A_FLOATS)
    )
    (out,) = run(exe, args)
    close(out, (a.T if trans_a else a).astype(np.float64) @ b, k)


@pytest.mark.parametrize(
    "name,f,shapes,kind",
    [
        ("A @ v", lambda a, b: a @ b, [(300, 200), (200,)], "row"),
        ("A @ column", lambda a, b: a @ b, [(300, 200), (200, 1)], "row"),
        ("v @ A.T", lambda a, b: a @ b.T, [(200,), (300, 200)], "row"),
        ("row @ A.T", lambda a, b: a @ b.T, [(1, 200), (300, 200)], "row"),
        ("dot", lambda a, b: fnp.dot(a, b), [(20000,), (20000,)], "row"),
        (
            "batched A @ v",
            lambda a, b: (a @ b[..., None])[..., 0],
            [(8, 300, 200), (8, 200)],
            "row",
        ),
        ("A.T @ v", lambda a, b: a.T @ b, [(200, 300), (200,)], "column"),
        ("v @ A", lambda a, b: a @ b, [(200,), (200, 300)], "column"),
        ("row @ A", lambda a, b: a @ b, [(1, 400), (400, 64)], "column"),
        ("v @ narrow A", lambda a, b: a @ b, [(2000,), (2000, 63)], "gemm"),
        ("batched v @ A", lambda a, b: (a[:, None] @ b)[:, 0], [(8, 200), (8, 200, 300)], "gemm"),
        ("A @ B", lambda a, b: a @ b, [(300, 200), (200, 2)], "gemm"),
    ],
)
def test_issue15_matrix_vector_products_are_row_reductions(name, f, shapes, kind):
    """A product with one output column whose matrix is read along its rows is the inline
    reduction (contiguous, summed in blocks), one read down its columns (at least 64 of
    them, no batch) a column sum of the products (accumulated row by row into partial rows);
    the others stay Gemms."""
    rng = np.random.default_rng(7)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    exe, args = build(f, a, b)
    kernels = [s for s in exe.program.steps if isinstance(s, fusion.Kernel)]
    assert bool(gemms(exe)) == (kind == "gemm"), name
    if kind == "row":
        assert len(kernels) == 1 and not any(s.combine for s in kernels[0].stores)
    if kind == "column":
        assert any(s.combine == "add" for k in kernels for s in k.stores)
    (out,) = run(exe, args)
    close(out, f(a.astype(np.float64), b.astype(np.float64)), max(shapes[0]))


def test_own_kernel_propagates_nan_and_inf():
    a = np.ones((64, 32), np.float32)
    b = np.ones((32, 20), np.float32)
    a[3, 5], b[7, 19] = np.nan, np.inf
    exe, args = build(lambda a, b: a @ b, a, b)
    (out,) = run(exe, args)
    want = a.astype(np.float64) @ b
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(out), np.isinf(want))


@pytest.mark.parametrize("lr,sign", [(0.1, -1), (0.5, 1), (1.0, -1)])
def test_weight_update_is_fused_into_the_product(lr, sign):
    rng = np.random.default_rng(1)
    w = rng.standard_normal((40, 24)).astype(np.float32)
    x = rng.standard_normal((33, 40)).astype(np.float32)
    g = rng.standard_normal((33, 24)).astype(np.float32)
    # the gradient of x @ w, as JAX's transpose rule writes it: transpose(dot_general(g, x))
    exe, args = build(lambda w, x, g: w + sign * lr * (g.T @ x).T, w, x, g)
    assert [type(s).__name__ for s in exe.program.steps] == ["Gemm"]
    (step,) = gemms(exe)
    assert step.beta == 1.0 and step.alpha == pytest.approx(sign * lr) and step.c0.kind == "input"
    assert exe.program.scratch_bytes == 0
    (out,) = run(exe, args)
    close(out, w + sign * lr * (x.T.astype(np.float64) @ g), 33)


def test_weight_update_through_blas_copies_the_weights_first():
    rng = np.random.default_rng(2)
    w = rng.standard_normal((48, 30)).astype(np.float32)
    a = rng.standard_normal((64, 48)).astype(np.float32)
    b = rng.standard_normal((30, 64)).astype(np.float32)
    exe, args = build(lambda w, a, b: w - 0.25 * (a.T @ b.T), w, a, b)  # both transposed: BLAS
    (step,) = gemms(exe)
    assert step.trans_a and step.trans_b and not matmul.supports(step) and step.beta == 1.0
    assert "llvm.memcpy" in exe.ir and "fg_sgemm" in exe.ir
    (out,) = run(exe, args)
    close(out, w - 0.25 * (a.T.astype(np.float64) @ b.T), 64)


def test_large_products_split_into_column_blocks_when_threads_may_be_used():
    """A product of gemm.SERIAL_WORK or more multiply-adds runs the library on column blocks
    over the native pool where several threads may run (not OpenBLAS's threads, which spin on
    a loaded host), one call over every block on one thread; ragged last blocks, transposed
    operands and a folded SGD update (c0 offset with c) give numpy's values either way."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((128, 200)).astype(np.float32)
    b = rng.standard_normal((200, 130)).astype(np.float32)
    w = rng.standard_normal((200, 130)).astype(np.float32)
    g = rng.standard_normal((128, 130)).astype(np.float32)

    def f(a, b, w, g):
        return a @ b, (b.T @ a.T).T, w - 0.5 * (a.T @ g), fnp.tanh(a @ (b + 1.0))

    exe, args = build(f, a, b, w, g)
    assert "fg_sgemm" not in exe.ir and "@fg_matmul_f32(i32" in exe.ir
    assert exe.ir.count(".par(ptr %ctx") >= 3  # the column-block trampolines
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = (a64 @ b64, a64 @ b64, w - 0.5 * (a64.T @ g), np.tanh(a64 @ (b64 + 1.0)))
    for nthreads in (1, 2, 3):
        for got, ref in zip(run(exe, args, nthreads), want):
            close(got, ref, 200)


@pytest.mark.parametrize(
    "m,n,k,trans_a",
    [(3000, 32, 144, False), (2500, 16, 288, False), (144, 32, 3000, True), (1000, 13, 300, True)],
)
def test_narrow_products_split_into_row_blocks_when_threads_may_be_used(m, n, k, trans_a):
    """A product too narrow for column blocks (a convolution's ``[N*H*W, C]`` output, its
    weight gradient) runs the library on blocks of rows over the native pool, A in place or
    transposed, ragged last block, with a folded update: numpy's values on 1-3 threads. Such
    products (A past the cache plan but one panel of b wide; A^T of any size) run in the
    library, not in BLAS, whose own threads would spin beside the pool's."""
    rng = np.random.default_rng(m + n)
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    w = rng.standard_normal((m, n)).astype(np.float32)

    def f(a, b, w):
        p = (a.T if trans_a else a) @ b
        return p, w - 0.5 * p

    exe, args = build(f, a, b, w)
    assert all(matmul.supports(g) for g in gemms(exe))
    assert "fg_sgemm" not in exe.ir and exe.ir.count(".par(ptr %ctx") >= 1
    p64 = (a.T if trans_a else a).astype(np.float64) @ b
    for nthreads in (1, 2, 3):
        got_p, got_w = run(exe, args, nthreads)
        close(got_p, p64, k)
        close(got_w, w - 0.5 * p64, k)


def test_transposed_reader_gets_the_transposed_layout():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((64, 40)).astype(np.float32)
    b = rng.standard_normal((64, 50)).astype(np.float32)
    exe, args = build(lambda a, b: fnp.tanh((a.T @ b).T), a, b)
    (step,) = gemms(exe)
    assert step.c.shape == (50, 40) and (step.m, step.n) == (50, 40)
    (kern,) = [s for s in exe.program.steps if isinstance(s, fusion.Kernel)]
    # the tanh kernel reads the product in its own (row-major) order: no strided loads
    assert all(st.index is kern.stores[0].index for st in kern.stores)
    (out,) = run(exe, args)
    np.testing.assert_allclose(out, np.tanh(b.T.astype(np.float64) @ a), rtol=1e-4, atol=1e-5)


def test_column_reduction_merges_into_the_kernel_storing_its_operand():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((128, 48)).astype(np.float32)
    w = rng.standard_normal((48, 64)).astype(np.float32)
    v = rng.standard_normal((64, 16)).astype(np.float32)

    def f(x, w, v):
        h = nn.relu(x @ w)
        s = fnp.sum(h, axis=0)  # summed over the batch first, then stored for the product
        return h @ v, s

    exe, args = build(f, x, w, v)
    kerns = [s for s in exe.program.steps if isinstance(s, fusion.Kernel)]
    merged = [
        k
        for k in kerns
        if any(s.combine for s in k.stores) and any(s.combine is None for s in k.stores)
    ]
    assert len(merged) == 1 and not merged[0].parallel
    out, colsum = run(exe, args)
    h = np.maximum(x.astype(np.float64) @ w, 0)
    close(out, h @ v, 48 * 64)
    close(colsum, h.sum(0), 128 * 48)


def test_mlp_step_plan_has_no_weight_sized_passes():
    rng = np.random.default_rng(6)
    sizes = (96, 64, 64, 10)
    params = [
        (fnp.asarray((rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32)), fnp.zeros(n))
        for m, n in zip(sizes[:-1], sizes[1:])
    ]
    x = fnp.asarray(rng.standard_normal((32, sizes[0])).astype(np.float32))
    y = fnp.asarray(np.eye(10, dtype=np.float32)[rng.integers(0, 10, 32)])

    def loss(params, x, y):
        (w1, b1), (w2, b2), (w3, b3) = params
        h = fnp.tanh(x @ w1 + b1)
        h = nn.relu(h @ w2 + b2)
        return -fnp.mean(fnp.sum(y * nn.log_softmax(h @ w3 + b3), axis=-1))

    def step(params, x, y):
        value, grads = fg.value_and_grad(loss)(params, x, y)
        return fg.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), value

    exe = compile_jaxpr(fg.make_jaxpr(step)(params, x, y), "cpu", "test")
    args = fg.tree_util.tree_leaves((params, x, y))
    updates = [g for g in gemms(exe) if g.beta]
    assert len(updates) == 3 and {g.c.kind for g in updates} == {"output"}
    for k in exe.program.steps:  # no kernel runs over a weight matrix
        if isinstance(k, fusion.Kernel):
            assert [v.extent for v in k.loops] not in ([96, 64], [64, 64], [64, 10])
    outs = run(exe, args)
    refs = fg.tree_util.tree_leaves(step(params, x, y))
    for o, r in zip(outs, refs):
        np.testing.assert_allclose(o, np.asarray(r), rtol=1e-4, atol=1e-5)


def test_batched_products_run_the_library_per_matrix_split_over_threads():
    """A batch of products the library runs well (attention's per-head products) is one
    library call per matrix, the batch split over the native pool where several threads may
    run; plain, transposed-a and transposed-b layouts give numpy's values on 1, 2 and 3
    threads, and a both-transposed batch still takes BLAS."""
    rng = np.random.default_rng(8)
    q = rng.standard_normal((6, 40, 24)).astype(np.float32)
    k = rng.standard_normal((6, 40, 24)).astype(np.float32)
    v = rng.standard_normal((6, 24, 40)).astype(np.float32)

    def f(q, k, v):
        return (
            fnp.einsum("bik,bjk->bij", q, k),  # b transposed
            fnp.einsum("bki,bkj->bij", q, k),  # a transposed
            fnp.einsum("bik,bkj->bij", q, v),
        )

    exe, args = build(f, q, k, v)
    assert "fg_sgemm" not in exe.ir and exe.ir.count(".par(ptr %ctx") == 3
    q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
    want = (
        np.einsum("bik,bjk->bij", q64, k64),
        np.einsum("bki,bkj->bij", q64, k64),
        np.einsum("bik,bkj->bij", q64, v64),
    )
    for nthreads in (1, 2, 3):
        for got, ref in zip(run(exe, args, nthreads), want):
            close(got, ref, 40)
    exe, args = build(lambda q, v: fnp.einsum("bki,bjk->bij", q, v), q, v)
    assert ".par(ptr %ctx" not in exe.ir  # (BLAS, or the planner's copy of one operand)
    close(run(exe, args)[0], np.einsum("bki,bjk->bij", q64, v64), 40)
