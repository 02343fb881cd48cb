"""A loop carry that a matrix product updates (``acc + a @ b``: a weight gradient summed over a
scan's steps) lives in one buffer on the CPU, the product accumulating in place
(``control_flow.carries_in_place``); everywhere else carries keep their two alternating
buffers. The results must not change: jit against a float64 numpy loop, for scans of even and
odd length (the loop then starts in the other buffer), reversed scans, fori/while loops, bodies
that read the old value after the product (which must not run in place) and the GPU backend,
whose products never run in place."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.ir import passes
from fungrad.lowering import fusion
from fungrad.lowering.cpu.policy import CpuPolicy
from fungrad.lowering.steps import ScanStep, WhileStep


def _loops(f, *args):
    """The loop steps of ``f``'s CPU plan (top level and nested)."""
    prog = fusion.plan(passes.optimize(fg.make_jaxpr(f)(*args)), policy=CpuPolicy())
    out, todo = [], [prog.steps]
    while todo:
        for s in todo.pop():
            if isinstance(s, (ScanStep, WhileStep)):
                out.append(s)
                todo.append(s.body)
    return out


def _single(loop) -> list[bool]:
    return [c.home is c.spare for c in loop.carries]


def _data(seed, *shapes):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, s).astype(np.float32) for s in shapes]


def _accumulate(acc, xs, ys):
    """``acc + sum_t xs[t]^T @ ys[t]`` in float64."""
    out = acc.astype(np.float64)
    for x, y in zip(xs, ys):
        out = out + x.astype(np.float64).T @ y.astype(np.float64)
    return out


def _scan_sum(acc, xs, ys, reverse=False):
    def body(a, xy):
        x, y = xy
        return a + x.T @ y, None

    return lax.scan(body, acc, (xs, ys), reverse=reverse)[0]


@settings(max_examples=12, deadline=None)
@given(
    length=st.integers(1, 6),
    m=st.integers(1, 40),
    n=st.integers(1, 40),
    k=st.integers(1, 12),
    reverse=st.booleans(),
)
def test_scan_product_sum_runs_in_place_and_matches_numpy(length, m, n, k, reverse):
    acc, xs, ys = _data(length * 7 + m, (m, n), (length, k, m), (length, k, n))
    f = lambda a, x, y: _scan_sum(a, x, y, reverse)  # noqa: E731
    got = np.asarray(fg.jit(f)(acc, xs, ys))
    want = _accumulate(acc, xs[::-1] if reverse else xs, ys[::-1] if reverse else ys)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(1, length * k))
    loops = _loops(f, acc, xs, ys)
    if loops and m * n * k >= 16384:  # (smaller products are inline reductions, no Gemm)
        assert _single(loops[0]) == [True]


@pytest.mark.parametrize("length", [4, 5])  # even: starts in home; odd: the init moves home
def test_lstm_like_weight_gradient_single_buffer(length):
    """The products large enough to be Gemm steps: the carry is single-buffered whatever the
    parity of the trip count, and the sum is right."""
    acc, xs, ys = _data(length, (64, 96), (length, 32, 64), (length, 32, 96))
    loops = _loops(_scan_sum, acc, xs, ys)
    assert _single(loops[0]) == [True]
    got = np.asarray(fg.jit(_scan_sum)(acc, xs, ys))
    np.testing.assert_allclose(got, _accumulate(acc, xs, ys), rtol=1e-5, atol=1e-4)


def test_old_value_read_after_the_product_keeps_two_buffers():
    """The body returns (part of) the old accumulator as ys, read by a kernel the plan runs
    after the product: the carry keeps two buffers and the ys are the values before each
    update."""
    acc, xs, ys = _data(3, (64, 96), (5, 32, 64), (5, 32, 96))

    def f(a, x, y):
        def body(a, xy):
            xt, yt = xy
            return a + xt.T @ yt, a[:, :8] * 2.0

        return lax.scan(body, a, (x, y))

    assert _single(_loops(f, acc, xs, ys)[0]) == [False]
    got_acc, got_ys = fg.jit(f)(acc, xs, ys)
    a = acc.astype(np.float64)
    want_ys = []
    for xt, yt in zip(xs, ys):
        want_ys.append(a[:, :8] * 2.0)
        a = a + xt.astype(np.float64).T @ yt.astype(np.float64)
    np.testing.assert_allclose(np.asarray(got_acc), a, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(np.asarray(got_ys), np.stack(want_ys), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("trips", [3, 4])
def test_fori_loop_product_sum(trips):
    acc, x, y = _data(trips, (64, 96), (32, 64), (32, 96))

    def f(a, x, y):
        return lax.fori_loop(0, trips, lambda i, a: a + (x * (i + 1.0)).T @ y, a)

    want = acc.astype(np.float64)
    for i in range(trips):
        want = want + (x.astype(np.float64) * (i + 1)).T @ y.astype(np.float64)
    np.testing.assert_allclose(np.asarray(fg.jit(f)(acc, x, y)), want, rtol=1e-5, atol=1e-4)


def test_while_loop_product_sum():
    """A while loop (trip count unknown at compile time) with the product update in place."""
    acc, x, y = _data(9, (64, 96), (32, 64), (32, 96))

    def f(a, x, y, n):
        def body(c):
            i, a = c
            return i + 1, a + x.T @ y

        return lax.while_loop(lambda c: c[0] < n, body, (0, a))[1]

    loops = _loops(f, acc, x, y, 3)
    assert _single(loops[0])[1] is True
    for n in (0, 1, 3):
        want = acc.astype(np.float64) + n * (x.astype(np.float64).T @ y.astype(np.float64))
        got = np.asarray(fg.jit(f)(acc, x, y, n))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def _lstm_loss(w, xs):
    def cell(h, x):
        z = fnp.concatenate([x, h], axis=-1) @ w
        return fnp.tanh(z[:, :32]) * fg.nn.sigmoid(z[:, 32:64]), None

    h, _ = lax.scan(cell, fnp.zeros((8, 32)), xs)
    return fnp.sum(h * h)


def test_lstm_backward_matches_eager():
    """The gradient of an LSTM-style scan (its weight gradient summed in the backward scan,
    in place): jit equals eager."""
    w, xs = _data(11, (48, 128), (6, 8, 16))
    g = fg.grad(_lstm_loss)
    want = np.asarray(g(w, xs))
    np.testing.assert_allclose(np.asarray(fg.jit(g)(w, xs)), want, rtol=1e-4, atol=1e-5)


def test_gpu_products_never_in_place(gpu):
    """The GPU keeps two buffers per carry (WebGPU forbids binding one buffer read-only and
    writable in one dispatch) and gets the same gradient."""
    from fungrad.lowering.gpu.policy import GpuPolicy

    assert GpuPolicy.writes_in_place is False
    w, xs = _data(11, (48, 128), (6, 8, 16))
    g = fg.grad(_lstm_loss)
    want = np.asarray(g(w, xs))
    got = np.asarray(fg.jit(g, backend="gpu")(w, xs))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
