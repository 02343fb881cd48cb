"""Loop-invariant product operands packed once (``control_flow.pack_invariant_operands``): a
product inside a loop whose ``b`` no iteration changes (an LSTM's gate weights) reads b from
panels a kernel stored before the loop (``cpu/gemm.py: pack_b``, ``Gemm.b_packed``). Checked:
the library's packed-b path against float64 numpy (every layout, odd shapes, several k and
column blocks, alpha/beta), that loops pack what they should (and only on the CPU), and the
compiled loops against a numpy loop, also split over threads."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.lowering import compile_jaxpr, fusion
from fungrad.lowering.cpu import gemm as matmul
from fungrad.lowering.steps import ScanStep, WhileStep


def _ref(a, b, trans_a, trans_b, alpha, beta, c0):
    oa = (a.T if trans_a else a).astype(np.float64)
    ob = (b.T if trans_b else b).astype(np.float64)
    return alpha * oa @ ob + beta * c0, np.abs(oa) @ np.abs(ob)


@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(1, 70),
    n=st.integers(1, 90),
    k=st.integers(1, 700),
    layout=st.sampled_from([(False, False), (True, False), (False, True)]),
    beta=st.sampled_from([0.0, 1.0, -0.5]),
    seed=st.integers(0, 2**16),
)
def test_library_reads_a_packed_b(m, n, k, layout, beta, seed):
    trans_a, trans_b = layout
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    got = matmul.gemm(a, b, trans_a=trans_a, trans_b=trans_b, alpha=0.75, beta=beta, c0=c0,
                      prepack=True)  # fmt: skip
    want, scale = _ref(a, b, trans_a, trans_b, 0.75, beta, c0)
    assert np.all(np.abs(got - want) <= 1e-6 * (k + 4) * (scale + np.abs(c0) + 1))


def test_pack_b_layout():
    """Panel q row kk holds op(b)[kk, nr q : nr (q + 1)], zeros past n (nr: the host's panel
    width, 32 with AVX-512, 16 with AVX2)."""
    nr = matmul.geometry().nr
    n = nr + 8
    b = np.arange(3 * n, dtype=np.float32).reshape(3, n)
    p = matmul.pack_b(b)
    assert p.shape == (2, 3, nr)
    np.testing.assert_array_equal(p[0], b[:, :nr])
    np.testing.assert_array_equal(p[1, :, :8], b[:, nr:])
    assert not p[1, :, 8:].any()
    np.testing.assert_array_equal(matmul.pack_b(b.T.copy(), trans_b=True), p)


def _loop_gemms(exe):
    out, todo = [], [exe.program.steps]
    while todo:
        for s in todo.pop():
            if isinstance(s, (ScanStep, WhileStep)):
                todo.append(s.body)
            elif isinstance(s, fusion.Gemm):
                out.append(s)
    return out


def _lstm(w, xs, h0):
    """Gates from ``[x, h] @ w``; returns the stacked hidden states."""
    hidden = h0.shape[1]

    def cell(h, x):
        z = fnp.concatenate([x, h], axis=-1) @ w
        h = fnp.tanh(z[:, :hidden]) * fg.nn.sigmoid(z[:, hidden:])
        return h, h

    return lax.scan(cell, h0, xs)[1]


def _lstm_numpy(w, xs, h0):
    w, h = w.astype(np.float64), h0.astype(np.float64)
    hidden, out = h0.shape[1], []
    for x in xs:
        z = np.concatenate([x, h], axis=-1) @ w
        h = np.tanh(z[:, :hidden]) / (1 + np.exp(-z[:, hidden:]))
        out.append(h)
    return np.stack(out)


@pytest.mark.parametrize("nthreads", [1, 2])
def test_scan_packs_invariant_weights_forward_and_backward(nthreads):
    """The forward product ``[x, h] @ w`` and the backward ``dz @ w^T`` read packed weights;
    the products with per-step operands (``[x, h]^T @ dz``) do not; values match numpy and
    the eager gradient, on one thread and on two (column blocks over the pool)."""
    rng = np.random.default_rng(0)
    inp, hidden, batch, steps = 48, 80, 32, 5
    w = (rng.standard_normal((inp + hidden, 2 * hidden)) / 10).astype(np.float32)
    xs = rng.standard_normal((steps, batch, inp)).astype(np.float32)
    h0 = np.zeros((batch, hidden), np.float32)
    args = [fnp.asarray(v) for v in (w, xs, h0)]
    exe = compile_jaxpr(fg.make_jaxpr(_lstm)(*args), "cpu", "test")
    (g,) = _loop_gemms(exe)
    nr = matmul.geometry().nr
    assert g.b_packed and not g.trans_b and g.b.shape == (-(-2 * hidden // nr), inp + hidden, nr)
    exe._nthreads = nthreads
    (got,) = exe.call(args)
    np.testing.assert_allclose(np.asarray(got), _lstm_numpy(w, xs, h0), rtol=1e-4, atol=1e-5)

    loss = lambda w, xs, h0: fnp.sum(_lstm(w, xs, h0) ** 2)  # noqa: E731
    grad = fg.grad(loss)
    exe = compile_jaxpr(fg.make_jaxpr(grad)(*args), "cpu", "test")
    packed = [(g.b_packed, g.n) for g in _loop_gemms(exe)]
    assert (True, hidden) in packed  # dz @ w_h^T (narrowed to h's rows), packed transposed
    assert any(not p for p, _ in packed)  # the weight gradient's per-step product
    exe._nthreads = nthreads
    (got,) = exe.call(args)
    np.testing.assert_allclose(np.asarray(got), np.asarray(grad(*args)), rtol=2e-4, atol=1e-5)


def test_fori_loop_packs_and_gpu_does_not(request):
    """A fori_loop (a while loop) packs its invariant b too; a one-step scan and the GPU
    backend do not."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((24, 64)).astype(np.float32) / 8
    w = rng.standard_normal((64, 64)).astype(np.float32) / 8

    def f(a, w):
        return lax.fori_loop(0, 4, lambda i, x: fnp.tanh(x @ w), a)

    args = [fnp.asarray(a), fnp.asarray(w)]
    exe = compile_jaxpr(fg.make_jaxpr(f)(*args), "cpu", "test")
    assert [g.b_packed for g in _loop_gemms(exe)] == [True]
    want = a.astype(np.float64)
    for _ in range(4):
        want = np.tanh(want @ w)
    np.testing.assert_allclose(np.asarray(exe.call(args)[0]), want, rtol=1e-5, atol=1e-6)

    one = lambda a, w: lax.scan(lambda x, _: (x @ w, None), a, None, length=1)[0]  # noqa: E731
    exe = compile_jaxpr(fg.make_jaxpr(one)(*args), "cpu", "test")
    assert not any(g.b_packed for g in _loop_gemms(exe))

    from fungrad.lowering.gpu.policy import GpuPolicy

    assert GpuPolicy().prepacks_b(_loop_gemms(exe)[0]) == 0
