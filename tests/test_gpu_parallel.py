"""The GPU backend's parallel schemes against the serial ones and numpy: workgroup-tree
reductions (forced on lavapipe with ``TREE_REDUCTIONS = "always"``), NaN and -0/+0 included,
sizes 0, 1, non-powers of two and more than 65535 * 64 elements; dispatch counts."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.lowering import compile_jaxpr
from fungrad.lowering.gpu import schemes as ge

pytestmark = pytest.mark.usefixtures("gpu")


def compiled(f, args, tree: str):
    """(outputs as numpy arrays, executable) of ``f`` on the GPU in tree mode ``tree``."""
    old = ge.TREE_REDUCTIONS
    ge.TREE_REDUCTIONS = tree
    try:
        args = [fnp.asarray(a) for a in args]
        exe = compile_jaxpr(fg.make_jaxpr(f)(*args), "gpu", "test")
    finally:
        ge.TREE_REDUCTIONS = old
    return [np.asarray(o) for o in exe.call(args)], exe


def _bits(a):
    """float32 bits with every NaN as the quiet NaN 0x7fc00000 (payloads are not part of
    JAX's contract: NVIDIA's min/max give 0x7fffffff)."""
    a = np.asarray(a)
    if a.dtype != np.float32:
        return a
    return np.where(np.isnan(a), np.uint32(0x7FC00000), a.view(np.uint32))


def uses_tree(exe) -> bool:
    return any("fg_tv" in s.source for s in exe.shaders)


@pytest.fixture(autouse=True)
def _no_env_override(monkeypatch):
    monkeypatch.delenv("FUNGRAD_GPU_TREE_REDUCE", raising=False)


EXACT = {"max": fnp.max, "min": fnp.min, "argmax": fnp.argmax, "argmin": fnp.argmin}
SPECIALS = np.float32([np.nan, -0.0, 0.0, np.inf, -np.inf, 3.0, -3.0])


def _values(draw_n, data, specials: bool):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    x = rng.uniform(-1, 1, draw_n).astype(np.float32)
    if specials and draw_n:
        k = data.draw(st.integers(1, 8))
        x[rng.integers(0, draw_n, k)] = rng.choice(SPECIALS, k)
    return x


@settings(max_examples=12)
@given(
    n=st.sampled_from([0, 1, 2, 3, 255, 256, 257, 1000, 4097, 9000]),
    data=st.data(),
    specials=st.booleans(),
)
def test_tree_full_reductions_match_the_serial_path_and_numpy(n, data, specials):
    x = _values(n, data, specials)
    names = sorted(EXACT) if n else ["max", "min"]

    def f(v):
        out = [fnp.sum(v), fnp.prod(v * 0.001 + 1)]
        return out + [
            EXACT[k](v, initial=-np.inf)
            if k == "max" and not n
            else EXACT[k](v, initial=np.inf)
            if k == "min" and not n
            else EXACT[k](v)
            for k in names
        ]

    tree, exe = compiled(f, [x], "always")
    serial, ser_exe = compiled(f, [x], "never")
    assert uses_tree(exe) == (n > 0) and not uses_tree(ser_exe)  # n = 0 folds to constants
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore"):  # inf - inf
        np.testing.assert_allclose(tree[0], x64.sum(), rtol=1e-5, atol=1e-5 * max(1, n) ** 0.5)
        np.testing.assert_allclose(tree[1], np.prod(x64 * 0.001 + 1), rtol=1e-4)
    for t, s in zip(tree[2:], serial[2:]):  # max/min/arg*: bit-exact, NaN and -0/+0 included
        assert t.dtype == s.dtype
        np.testing.assert_array_equal(_bits(t), _bits(s))


@settings(max_examples=6)
@given(
    rows=st.integers(1, 5),
    cols=st.sampled_from([1, 7, 300, 3001]),
    data=st.data(),
    specials=st.booleans(),
)
def test_tree_row_reductions_and_ties(rows, cols, data, specials):
    x = _values(rows * cols, data, specials).reshape(rows, cols)
    x[:, cols // 2 :] = x[:, :1]  # ties: argmax/argmin must return the first position

    def f(v):
        return (
            fnp.sum(v, axis=1),
            fnp.max(v, axis=1),
            fnp.min(v, axis=1),
            fnp.argmax(v, axis=1),
            fnp.argmin(v, axis=1),
            fnp.sum(v > 0, axis=1),
        )

    tree, _ = compiled(f, [x], "always")
    serial, _ = compiled(f, [x], "never")
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(tree[0], x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)
    for t, s in zip(tree[1:], serial[1:]):
        np.testing.assert_array_equal(_bits(t), _bits(s))
    np.testing.assert_array_equal(tree[3], np.argmax(x, 1))
    np.testing.assert_array_equal(tree[5], (x > 0).sum(1))


def test_integer_and_bool_tree_reductions():
    rng = np.random.default_rng(5)
    i = rng.integers(-(2**31), 2**31 - 1, 5000, dtype=np.int64).astype(np.int32)
    u = i.view(np.uint32)

    def f(i, u):
        return (
            fnp.sum(i),
            fnp.max(i),
            fnp.min(u),
            fnp.argmin(i),
            fnp.all(i != 7),
            fnp.any(i == i[4321]),
            fg.lax.reduce_xor(u, (0,)),
        )

    (s, mx, mn, am, al, an, xo), exe = compiled(f, [i, u], "always")
    assert uses_tree(exe)
    assert s == np.sum(i, dtype=np.int32)  # wraps around, as int32 addition does
    assert (mx, mn, am) == (i.max(), u.min(), i.argmin())
    assert al == np.all(i != 7) and an
    assert xo == np.bitwise_xor.reduce(u)


def test_dependent_reductions_run_in_one_pass_and_independent_ones_in_two():
    x = np.random.default_rng(1).standard_normal((3, 5000)).astype(np.float32)

    def logsumexp(v):
        m = fnp.max(v, axis=1, keepdims=True)
        return fnp.sum(fnp.exp(v - m), axis=1)

    (o,), exe = compiled(logsumexp, [x], "always")
    assert exe.num_dispatches == 1 and uses_tree(exe)  # the sum reads the max: one pass
    ref = np.exp(x.astype(np.float64) - x.max(1, keepdims=True)).sum(1)
    np.testing.assert_allclose(o, ref, rtol=1e-5)
    (o,), exe = compiled(lambda v: fnp.sum(v, axis=1) / fnp.max(v, axis=1), [x], "always")
    assert exe.num_dispatches == 2  # partials, then one workgroup per row
    np.testing.assert_allclose(o, x.astype(np.float64).sum(1) / x.max(1), rtol=1e-4)


def test_auto_keeps_the_serial_loop_on_a_cpu_adapter_and_many_outputs_stay_serial(gpu):
    x = np.ones(50_000, np.float32)
    _, exe = compiled(fnp.sum, [x], "auto")
    assert uses_tree(exe) is not gpu.cpu_adapter
    _, exe = compiled(lambda v: fnp.sum(v.reshape(-1, 10), axis=1), [x], "always")
    assert not uses_tree(exe) and exe.num_dispatches == 1  # 5000 outputs: one invocation each


def test_tree_mode_is_checked(monkeypatch):
    monkeypatch.setenv("FUNGRAD_GPU_TREE_REDUCE", "sometimes")
    with pytest.raises(ValueError, match="FUNGRAD_GPU_TREE_REDUCE.*'auto', 'always', 'never'"):
        compiled(fnp.sum, [np.ones(3, np.float32)], "always")


def test_tree_sum_of_more_than_65535_times_64_elements():
    n = 65535 * 64 + 77
    x = np.random.default_rng(3).uniform(0, 1, n).astype(np.float32)
    (s, am), exe = compiled(lambda v: (fnp.sum(v), fnp.argmax(v)), [x], "always")
    assert exe.num_dispatches == 2
    np.testing.assert_allclose(s, x.astype(np.float64).sum(), rtol=1e-5)
    assert am == np.argmax(x)


def test_tree_reductions_inside_scan_and_cond():
    x = np.random.default_rng(4).standard_normal((4, 3000)).astype(np.float32)

    def f(xs, p):
        def body(c, row):
            return c + fnp.sum(row), fnp.max(row)

        c, ys = fg.lax.scan(body, np.float32(0), xs)
        z = fg.lax.cond(p > 0, lambda: fnp.sum(xs[0]), lambda: fnp.min(xs[1]))
        return c, ys, z

    for p in (1, -1):
        (c, ys, z), exe = compiled(f, [x, np.int32(p)], "always")
        assert uses_tree(exe)
        np.testing.assert_allclose(c, x.astype(np.float64).sum(), rtol=1e-4, atol=1e-3)
        np.testing.assert_array_equal(ys, x.max(1))
        ref = x[0].astype(np.float64).sum() if p > 0 else x[1].min()
        np.testing.assert_allclose(z, ref, rtol=1e-5, atol=1e-4)


def test_loops_beyond_the_adapters_limit_get_trees_or_a_clear_error(gpu):
    """lavapipe stops an invocation's loops after 65535 iterations (``loop_limit``): a long
    reduction becomes a tree even in "auto" mode, and a serial loop that long is an error,
    never a silently truncated result."""
    x = np.random.default_rng(6).uniform(0, 1, 100_000).astype(np.float32)
    (s,), exe = compiled(fnp.sum, [x], "auto")
    np.testing.assert_allclose(s, x.astype(np.float64).sum(), rtol=1e-5)
    assert uses_tree(exe) == (gpu.loop_limit is not None or not gpu.cpu_adapter)
    if gpu.loop_limit is None:
        (s,), _ = compiled(fnp.sum, [x], "never")
        np.testing.assert_allclose(s, x.astype(np.float64).sum(), rtol=1e-4)
    else:
        with pytest.raises(
            fg.LoweringError, match="loops 100000 times per invocation.*65535.*backend='cpu'"
        ):
            compiled(fnp.sum, [x], "never")


# scatter: one invocation per update ------------------------------------------------------------

SCATTERS = {
    "set": lambda r, u, **kw: r.set(u, **kw),
    "add": lambda r, u, **kw: r.add(u, **kw),
    "mul": lambda r, u, **kw: r.mul(u, **kw),
    "min": lambda r, u, **kw: r.min(u, **kw),
    "max": lambda r, u, **kw: r.max(u, **kw),
}


def _scatter_case(op, dtype, mode, n, window):
    def f(x, i, u):
        return SCATTERS[op](x.at[i], u, **({} if mode is None else {"mode": mode}))

    shape = (n, window) if window else (n,)
    return f, shape


def _gpu_and_cpu(f, args):
    args = [fnp.asarray(a) for a in args]
    exe = compile_jaxpr(fg.make_jaxpr(f)(*args), "gpu", "test")
    (out,) = [np.asarray(o) for o in exe.call(args)]
    return out, np.asarray(fg.jit(f)(*args)), np.asarray(f(*args)), exe


@settings(max_examples=30)
@given(
    op=st.sampled_from(sorted(SCATTERS)),
    dtype=st.sampled_from([np.float32, np.int32, np.uint32, np.bool_]),
    mode=st.sampled_from([None, "clip", "drop"]),
    n=st.sampled_from([1, 2, 7, 33]),
    m=st.sampled_from([0, 1, 5, 64, 300]),
    window=st.sampled_from([0, 3]),
    data=st.data(),
)
def test_parallel_scatter_matches_numpy(op, dtype, mode, n, m, window, data):
    if dtype == np.bool_ and op in ("add", "mul"):
        op = "max" if op == "add" else "min"
    f, shape = _scatter_case(op, dtype, mode, n, window)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    # duplicate-heavy indices, out of bounds on both sides
    i = rng.integers(-n - 2, n + 3, m).astype(np.int32)
    ushape = (m, window) if window else (m,)
    if dtype == np.float32:
        x = rng.uniform(-2, 2, shape).astype(np.float32)
        u = rng.choice(np.float32([np.nan, -0.0, 0.0, 1.5, -1.0, 0.5, 2.0]), ushape)
    elif dtype == np.bool_:
        x, u = rng.random(shape) < 0.5, rng.random(ushape) < 0.5
    else:
        x = rng.integers(-5, 6, shape).astype(dtype)
        u = rng.integers(-9, 10, ushape).astype(dtype)
    args = [fnp.asarray(a) for a in (x, i, u)]
    exe = compile_jaxpr(fg.make_jaxpr(f)(*args), "gpu", "test")
    (gpu_out,) = [np.asarray(o) for o in exe.call(args)]
    eager = np.asarray(f(*args))  # numpy's in-order loop: the CPU backend's rule
    if dtype == np.float32 and op in ("add", "mul"):  # the updates' order varies
        np.testing.assert_allclose(gpu_out, eager, rtol=1e-5, atol=1e-6, equal_nan=True)
    elif op in ("min", "max"):  # numpy picks either zero on a tie (see the test below)
        np.testing.assert_array_equal(gpu_out, eager)
    else:  # exact, NaN and -0/+0 included (the last update wins for set)
        np.testing.assert_array_equal(_bits(gpu_out), _bits(eager))


def test_parallel_scatter_min_max_order_zeros_and_nan_as_the_cpu_backend():
    x = np.float32([0.0, -0.0, 1.0, np.nan, 0.0])
    i = np.int32([0, 1, 0, 1, 2, 2, 3, 4, 4])
    u = np.float32([-0.0, 0.0, 0.0, -0.0, np.nan, 5.0, 1.0, -0.0, -0.0])
    for f in (lambda x, i, u: x.at[i].min(u), lambda x, i, u: x.at[i].max(u)):
        gpu_out, cpu_out, _, _ = _gpu_and_cpu(f, [x, i, u])
        np.testing.assert_array_equal(_bits(gpu_out), _bits(cpu_out))  # -0 < +0, NaN sticks


def test_parallel_scatter_dispatches_and_more_updates_than_the_loop_limit():
    rng = np.random.default_rng(7)
    n, m = 1000, 70_000
    x = rng.uniform(-1, 1, n).astype(np.float32)
    i = rng.integers(0, n, m).astype(np.int32)
    u = rng.uniform(-1, 1, m).astype(np.float32)
    out, cpu, _, exe = _gpu_and_cpu(lambda x, i, u: x.at[i].add(u), [x, i, u])
    ref = x.astype(np.float64)
    np.add.at(ref, i, u.astype(np.float64))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    assert [s.name for s in exe.shaders].count("fill") == 0
    assert exe.num_dispatches == 2  # the operand's copy, the atomic scatter
    out, cpu, _, exe = _gpu_and_cpu(lambda x, i, u: x.at[i].set(u), [x, i, u])
    np.testing.assert_array_equal(out, cpu)  # duplicates: the last update wins, as on the CPU
    last = {k: v for k, v in zip(i, u)}
    np.testing.assert_array_equal(out[list(last)], list(last.values()))
    assert exe.num_dispatches == 4  # copy, clear the winners, claim, write
    iu = rng.integers(-3, 4, m).astype(np.int32)
    out, cpu, _, _ = _gpu_and_cpu(lambda x, i, u: (x.astype(np.int32) * 0).at[i].add(u), [x, i, iu])
    np.testing.assert_array_equal(out, np.bincount(i, weights=iu, minlength=n).astype(np.int32))


# sort: bitonic networks for long rows -----------------------------------------------------------


@contextlib.contextmanager
def bitonic():
    """Every sort compiled inside takes the bitonic network (rows of any length)."""
    old, ge.SORT_RANK_MAX_ROW = ge.SORT_RANK_MAX_ROW, 0
    try:
        yield
    finally:
        ge.SORT_RANK_MAX_ROW = old


@settings(max_examples=8)
@given(
    n=st.sampled_from([0, 1, 2, 3, 5, 255, 257, 1000]),
    rows=st.sampled_from([1, 3]),
    axis=st.sampled_from([0, 1]),
    data=st.data(),
)
def test_bitonic_sort_argsort_and_top_k_match_numpy(n, rows, axis, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    shape = (n, rows) if axis == 0 else (rows, n)
    x = rng.choice(np.float32([np.nan, -np.nan, -0.0, 0.0, 1, -1, np.inf, -np.inf, 2.5]), shape)
    i = rng.integers(-3, 4, shape).astype(np.int32)
    k = min(n, 4)

    def f(x, i):
        out = [
            fnp.sort(x, axis=axis),
            fnp.argsort(x, axis=axis),  # stable: ties by position
            fg.lax.sort((i, x), dimension=axis, num_keys=2),  # two keys, then position
            fnp.sort(i.astype(np.uint32), axis=axis),
        ]
        if axis == 1:
            out.append(fg.lax.top_k(x, k))
        return out

    args = [fnp.asarray(x), fnp.asarray(i)]
    with bitonic():
        exe = compile_jaxpr(fg.make_jaxpr(f)(*args), "gpu", "test")
    got = fg.tree_util.tree_leaves([np.asarray(o) for o in exe.call(args)])
    want = fg.tree_util.tree_leaves(f(*args))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(_bits(g), _bits(w))
    if n > 1:
        assert any(s.name.endswith("_tile") for s in exe.shaders)


def test_bitonic_sort_inside_scan_and_cond():
    xs = np.random.default_rng(8).integers(0, 5, (3, 700)).astype(np.float32)  # 1024 wide

    def f(xs, p):
        def body(c, row):
            return c + fnp.argsort(row)[:2].astype(np.float32), fnp.sort(row)[-3:]

        c, ys = fg.lax.scan(body, fnp.zeros(2, np.float32), xs)
        z = fg.lax.cond(p > 0, lambda: fnp.sort(xs[0])[:4], lambda: -fnp.sort(xs[1])[:4])
        return c, ys, z

    for p in (1, -1):
        args = [fnp.asarray(xs), fnp.asarray(np.int32(p))]
        with bitonic():
            got = compile_jaxpr(fg.make_jaxpr(f)(*args), "gpu", "test").call(args)
        for g, w in zip(got, f(*args)):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_long_rows_sort_past_the_loop_limit_in_log_squared_dispatches():
    n = 70_000  # the rank sort's loop would exceed lavapipe's 65535 iterations
    x = np.random.default_rng(9).integers(0, 1000, n).astype(np.float32)
    args = [fnp.asarray(x)]
    exe = compile_jaxpr(fg.make_jaxpr(lambda v: fnp.argsort(v))(*args), "gpu", "test")
    np.testing.assert_array_equal(np.asarray(exe.call(args)[0]), np.argsort(x, kind="stable"))
    # the positions operand (an iota kernel), the 512-tiles, then for each block of 2^10 ..
    # 2^17 (>= 70000) one dispatch per distance from 2^9 up and one within the tiles, gather
    assert exe.num_dispatches == 1 + 1 + sum(b - 9 + 1 for b in range(10, 18)) + 1


def test_a_matmul_too_long_for_the_loop_limit_splits_its_contraction(gpu, monkeypatch):
    """k = 60000 would loop 78750 times per invocation (lavapipe stops at 65535; unchecked it
    returned 58255 for a sum of ones): the contraction splits into ranges (``wgsl.SplitK``)
    whose partial products a second pass adds, with the planner's folded SGD update
    (alpha, beta), transposed operands and batches."""
    rng = np.random.default_rng(10)
    k = 60_000
    a, b = np.ones((1, k), np.float32), np.ones((k, 2), np.float32)
    f = fg.jit(lambda a, b: a @ b, backend="gpu")
    np.testing.assert_array_equal(np.asarray(f(a, b)), [[k, k]])
    exe = f.lower(a, b).compile()._exe
    # split where loops are limited, and on a real GPU, whose one 64x64 tile would leave
    # it idle (schemes.gemm_split: GEMM_FILL_GROUPS)
    split = gpu.loop_limit is not None or (not gpu.cpu_adapter and ge.GEMM_FILL_GROUPS > 0)
    assert exe.num_dispatches == (2 if split else 1)
    assert all(s.loop_iterations < (gpu.loop_limit or 2**31) for s in exe.shaders)
    monkeypatch.setattr(gpu, "loop_limit", 3000)  # (smaller products split the same way)
    k = 10_000
    x = rng.uniform(-1, 1, (k + 3, 5)).astype(np.float32)
    g = rng.uniform(-1, 1, (k + 3, 3)).astype(np.float32)
    w = rng.uniform(-1, 1, (5, 3)).astype(np.float32)
    bx = rng.uniform(-1, 1, (2, 4, k + 3)).astype(np.float32)
    by = rng.uniform(-1, 1, (2, 3, k + 3)).astype(np.float32)

    def step(w, x, g, bx, by):  # x.T @ g (trans_a) into an SGD update; batched a @ b.T
        return w - 0.125 * (x.T @ g), fnp.einsum("bik,bjk->bij", bx, by)

    args = [w, x, g, bx, by]
    f = fg.jit(step, backend="gpu")
    got = f(*args)
    exe = f.lower(*args).compile()._exe
    assert [s.name.rsplit("_", 1)[1] for s in exe.shaders].count("split") == 2
    assert all(s.loop_iterations < 3000 for s in exe.shaders)
    want = (
        w - 0.125 * (x.T.astype(np.float64) @ g),
        np.einsum("bik,bjk->bij", bx.astype(np.float64), by),
    )
    for o, r in zip(got, want):  # float32 sums of 10000 products of size <= 1
        np.testing.assert_allclose(np.asarray(o), r, rtol=0, atol=2e-4)
