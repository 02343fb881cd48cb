"""Cumulative reductions on the GPU (``wgsl.scan_of`` / ``wgsl.render_scan``): one
invocation per line, or blocks of lines in three dispatches (forced with ``SCAN = "always"``
and small ``SCAN_BLOCK``), against the CPU backend (bit-exact where no rounding is
reordered: max/min, integers) and numpy in float64 (sums, products, logsumexp); any axis,
reverse, NaN, sizes 0 and 1, lines longer than twice lavapipe's loop limit."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.lowering import compile_jaxpr
from fungrad.lowering.gpu import schemes as ge

pytestmark = pytest.mark.usefixtures("gpu")

OPS = {
    "cumsum": np.cumsum,
    "cumprod": np.cumprod,
    "cummax": np.fmax.accumulate,
    "cummin": np.fmin.accumulate,
    "cumlogsumexp": np.logaddexp.accumulate,
}


@pytest.fixture(autouse=True)
def _no_env_override(monkeypatch):
    monkeypatch.delenv("FUNGRAD_GPU_SCAN", raising=False)


def on_gpu(f, args, mode: str = "auto", block: int = ge.SCAN_BLOCK):
    """(outputs as numpy arrays, executable) of ``f`` on the GPU in scan mode ``mode``."""
    old = ge.SCAN, ge.SCAN_BLOCK
    ge.SCAN, ge.SCAN_BLOCK = mode, block
    try:
        args = [fnp.asarray(a) for a in args]
        exe = compile_jaxpr(fg.make_jaxpr(f)(*args), "gpu", "test")
    finally:
        ge.SCAN, ge.SCAN_BLOCK = old
    return [np.asarray(o) for o in exe.call(args)], exe


def reference(name: str, x: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    """numpy's cumulative ``name`` in float64 (NaN sticking, as in JAX, for max/min)."""
    x = np.flip(x, axis) if reverse else x
    if name in ("cummax", "cummin"):
        nan = np.logical_or.accumulate(np.isnan(x), axis)
        out = np.where(nan, np.nan, OPS[name](x, axis=axis))
    else:
        with np.errstate(all="ignore"):
            out = OPS[name](x, axis=axis)
    return np.flip(out, axis) if reverse else out


def _bits(a):
    a = np.asarray(a)
    return a.view(np.uint32) if a.dtype == np.float32 else a


def scan_dispatches(exe) -> int:
    """Dispatches of the scans themselves (not their first-element kernels)."""
    return sum(
        re.fullmatch(r"cum\w+_t\d+(_totals|_prefix)?", s.name) is not None for s in exe.shaders
    )


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(sorted(OPS)),
    dtype=st.sampled_from([np.float32, np.int32, np.uint32]),
    shape=st.sampled_from([(1,), (2,), (7,), (64,), (1000,), (3, 257), (2, 3, 40)]),
    axis=st.integers(0, 2),
    reverse=st.booleans(),
    mode=st.sampled_from(["always", "never"]),
    block=st.sampled_from([1, 2, 5, 64]),
    nan=st.booleans(),
    data=st.data(),
)
def test_scans_match_numpy_and_the_cpu_backend(
    name, dtype, shape, axis, reverse, mode, block, nan, data
):
    if name == "cumlogsumexp":
        dtype = np.float32
    axis %= len(shape)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    if dtype == np.float32:
        lo = 0.9 if name == "cumprod" else -2.0
        x = rng.uniform(lo, lo + (0.2 if name == "cumprod" else 4.0), shape).astype(dtype)
        if nan and x.size > 1:
            x.flat[rng.integers(0, x.size)] = np.nan
            x.flat[rng.integers(0, x.size)] = -0.0
    else:
        x = rng.integers(0 if dtype == np.uint32 else -1000, 1000, shape).astype(dtype)

    def f(v):
        return getattr(lax, name)(v, axis, reverse=reverse)

    (out,), exe = on_gpu(f, [x], mode, block)
    cpu = np.asarray(fg.jit(f)(fnp.asarray(x)))
    assert out.dtype == cpu.dtype == x.dtype
    n = shape[axis]
    blocks = -(-n // block) if mode == "always" and n > 1 else 1
    assert scan_dispatches(exe) == (0 if n == 1 else 3 if blocks > 1 else 1)
    if dtype != np.float32 or name in ("cummax", "cummin"):
        np.testing.assert_array_equal(_bits(out), _bits(cpu))  # exact, NaN and -0/+0 too
        return
    ref = reference(name, x.astype(np.float64), axis, reverse)
    scale = reference("cumsum", np.abs(x.astype(np.float64)), axis, reverse)
    tol = {
        "cumsum": 1e-6 * scale,
        "cumprod": 1e-6 * n * np.abs(ref),
        "cumlogsumexp": 1e-6 * (np.abs(ref) + np.log(n + 1)),
    }[name]
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    ok = ~np.isnan(ref)
    assert np.all(np.abs(out[ok] - ref[ok]) <= 2 * tol[ok] + 1e-30), name


def test_integer_sums_wrap_and_size_zero_and_one():
    x = np.full(5000, 2**30, np.int32)
    (out,), _ = on_gpu(lambda v: lax.cumsum(v), [x], "always", 7)
    np.testing.assert_array_equal(out, np.cumsum(x, dtype=np.int32))  # wraps as int32 does
    for shape in [(0,), (0, 3), (1,), (3, 1)]:
        z = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 1
        (out,), _ = on_gpu(lambda v: lax.cumsum(v, axis=v.ndim - 1), [z], "always", 2)
        np.testing.assert_array_equal(out, np.cumsum(z, axis=len(shape) - 1))


def test_dispatch_counts_follow_the_policy():
    x = np.ones(10_000, np.float32)
    rows = np.ones((ge.SCAN_SERIAL_ROWS, 40), np.float32)
    # few long lines: blocks (first element, totals, prefixes, scan)
    (out,), exe = on_gpu(lambda v: lax.cumsum(v), [x], "auto")
    assert exe.num_dispatches == 4 and scan_dispatches(exe) == 3
    np.testing.assert_array_equal(out, np.arange(1, 10_001))
    (out,), exe = on_gpu(lambda v: lax.cumsum(v), [x], "never")
    assert exe.num_dispatches == 2
    np.testing.assert_array_equal(out, np.arange(1, 10_001))
    # many lines fill the device with one invocation each, even along the last axis
    (out,), exe = on_gpu(lambda v: lax.cummax(v, axis=1), [rows], "auto")
    assert exe.num_dispatches == 2
    (out,), exe = on_gpu(lambda v: lax.cumsum(v, axis=1), [rows], "always", 16)
    assert exe.num_dispatches == 4
    np.testing.assert_array_equal(out, np.cumsum(rows, 1))


def test_lines_longer_than_twice_the_loop_limit(gpu):
    n = 65535 * 2 + 1234
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, n).astype(np.float32)
    i = rng.integers(-50, 50, (2, n)).astype(np.int32)

    def f(v, w):
        return (
            lax.cumsum(v),
            lax.cummax(v, reverse=True),
            lax.cumsum(w, axis=1),
            lax.cummin(w.T, axis=0),
        )

    for mode in ("auto", "never"):
        (s, m, si, mi), exe = on_gpu(f, [x, i], mode)
        ref = np.cumsum(x.astype(np.float64))
        assert np.max(np.abs(s - ref)) < 1e-6 * np.abs(x).sum()
        np.testing.assert_array_equal(m, np.maximum.accumulate(x[::-1])[::-1])
        np.testing.assert_array_equal(si, np.cumsum(i, axis=1, dtype=np.int32))
        np.testing.assert_array_equal(mi, np.minimum.accumulate(i.T, axis=0))
        if gpu.loop_limit is not None:
            assert all(s.loop_iterations < gpu.loop_limit for s in exe.shaders)


def test_scans_inside_scan_and_cond_and_under_grad():
    rng = np.random.default_rng(3)
    xs = rng.uniform(-1, 1, (3, 500)).astype(np.float32)

    def f(xs, p):
        def body(c, row):
            return c + lax.cumsum(row)[-1], lax.cummax(row * c)

        c, ys = lax.scan(body, np.float32(1), xs)
        z = lax.cond(
            p > 0, lambda: lax.cumsum(xs[0], reverse=True), lambda: lax.cumprod(xs[1] * 0.01 + 1)
        )
        return c, ys, z

    def loss(v):
        return fnp.sum(fnp.cumsum(v, axis=1) ** 2)

    for p in (1, -1):
        got, _ = on_gpu(f, [xs, np.int32(p)], "always", 16)
        want = fg.jit(f)(fnp.asarray(xs), np.int32(p))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, np.asarray(w), rtol=1e-5, atol=1e-5)
    (g,), _ = on_gpu(fg.grad(loss), [xs], "always", 16)
    np.testing.assert_allclose(g, np.asarray(fg.grad(loss)(fnp.asarray(xs))), rtol=1e-5, atol=1e-4)


def test_scan_mode_is_checked(monkeypatch):
    monkeypatch.setenv("FUNGRAD_GPU_SCAN", "sometimes")
    with pytest.raises(ValueError, match="FUNGRAD_GPU_SCAN.*'auto', 'always', 'never'"):
        on_gpu(lambda v: lax.cumsum(v), [np.ones(3, np.float32)])


def test_only_associative_recurrences_are_scans():
    """A store reading the previous element through ``prev - elem`` is a recurrence, but
    not one whose blocks may be combined in another order: it stays a serial kernel."""
    from fungrad.lowering import kernel
    from fungrad.lowering.fusion import Kernel, Store
    from fungrad.lowering.gpu import schemes as wgsl

    ctx = kernel.Ctx()
    f32 = np.dtype(np.float32)
    out = kernel.Buffer(0, (9,), f32, "temp", "out")
    x = kernel.Buffer(1, (9,), f32, "input", "x")
    u = kernel.Var(8)
    i = ctx.index(u)
    nxt = ctx.iadd(i, ctx.iconst(1))
    prev, elem = ctx.load(out, i), ctx.load(x, nxt)
    for op, scan in (("add", True), ("max", True), ("sub", False), ("div", False)):
        kern = Kernel("k", (u,), [Store(out, nxt, ctx.op(op, prev, elem))], parallel=False)
        got = wgsl.scan_of(kern)
        assert (got is not None) == scan, op
        if scan:
            assert got.var is u and got.prev is prev and got.elem is elem
    # reading an element two back, or storing where a later step does not read: no scan
    kern = Kernel(
        "k",
        (u,),
        [Store(out, nxt, ctx.op("add", ctx.load(out, ctx.isub(i, ctx.iconst(1))), elem))],
        parallel=False,
    )
    assert wgsl.scan_of(kern) is None
    kern = Kernel(
        "k",
        (u,),
        [Store(out, ctx.imul(i, ctx.iconst(2)), ctx.op("add", prev, elem))],
        parallel=False,
    )
    assert wgsl.scan_of(kern) is None


@settings(max_examples=20, deadline=None)
@given(
    name=st.sampled_from(sorted(OPS)),
    n=st.integers(1, 5),
    axis=st.integers(0, 2),
    reverse=st.booleans(),
    mode=st.sampled_from(["always", "never"]),
    block=st.sampled_from([1, 2]),
    how=st.sampled_from(["stack", "broadcast"]),
    nan=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_scans_of_elements_constant_along_the_axis(
    name, n, axis, reverse, mode, block, how, nan, seed
):
    """An operand that does not vary along the scanned axis (``stack([x, x])``, a
    broadcast) fuses into a scan whose element is computed outside the scan loop; the
    combine of ``prev`` with it must still be written inside the loop (cumlogsumexp's
    hidden copy of the element once landed at the top of the shader, where its
    loop-carried name was undefined: the fuzzer's seed 302062)."""
    rng = np.random.default_rng(seed)
    lo = 0.5 if name == "cumprod" else -100.0
    x = rng.uniform(lo, -lo if name != "cumprod" else 1.5, (5, 1)).astype(np.float32)
    if nan:
        x[rng.integers(0, 5), 0] = np.nan

    def f(v):
        if how == "stack":
            w = fnp.stack([v] * n, axis=axis)
        else:
            w = fnp.broadcast_to(fnp.expand_dims(v, axis), (*v.shape[:axis], n, *v.shape[axis:]))
        return getattr(lax, name)(w, axis=axis, reverse=reverse)

    (out,), _ = on_gpu(f, [x], mode, block)
    w = np.stack([x] * n, axis=axis).astype(np.float64)
    ref = reference(name, w, axis, reverse)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    ok = ~np.isnan(ref)
    np.testing.assert_allclose(out[ok], ref[ok], rtol=2e-6 * n, atol=1e-30)
