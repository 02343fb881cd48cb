"""The backward scan of ``concatenate([x, h]) @ W`` computes only the carry's part of the
concatenation's cotangent (``narrow_products``), and loop bodies compute their outputs into
the ys rows / carry buffers directly (no copy kernel): gradients against a float64 numpy
backward pass written by hand, the rewrite against numpy on its own, and the plans."""

import re

import numpy as np

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import core, lax
from fungrad.lax.control_flow.narrow_products import narrow_sliced_products

T, B, I, H = 5, 3, 4, 6


def _rnn_loss(w, xs):
    def cell(h, x):
        h = fnp.tanh(fnp.concatenate([x, h], axis=-1) @ w)
        return h, h

    h, hs = lax.scan(cell, fnp.zeros((B, H), xs.dtype), xs)
    return fnp.sum(h * h) + fnp.sum(hs)


def _rnn_grad_numpy(w, xs):
    """d loss / d w of :func:`_rnn_loss` by a hand-written float64 backward pass."""
    w, xs = w.astype(np.float64), xs.astype(np.float64)
    h = np.zeros((B, H))
    zs, hs = [], []
    for x in xs:
        z = np.concatenate([x, h], axis=-1)
        h = np.tanh(z @ w)
        zs.append(z)
        hs.append(h)
    dw = np.zeros_like(w)
    dh = 2 * hs[-1]
    for t in reversed(range(T)):
        da = (dh + 1.0) * (1 - hs[t] ** 2)  # + 1: sum(hs) reads every step's h
        dw += zs[t].T @ da
        dh = (da @ w.T)[:, I:]
    return dw


def _inputs():
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((I + H, H)) / np.sqrt(I + H)).astype(np.float32)
    xs = rng.standard_normal((T, B, I)).astype(np.float32)
    return w, xs


def test_scan_gradient_of_concatenated_input_matches_numpy():
    w, xs = _inputs()
    want = _rnn_grad_numpy(w, xs)
    for f in (fg.grad(_rnn_loss), fg.jit(fg.grad(_rnn_loss))):
        np.testing.assert_allclose(np.asarray(f(w, xs)), want, rtol=2e-5, atol=2e-5)


def _dot_shapes(jaxpr):
    out = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            out.append(tuple(eqn.outvars[0].aval.shape))
        for v in eqn.params.values():
            if isinstance(v, core.ClosedJaxpr):
                out += _dot_shapes(v.jaxpr)
    return out


def test_backward_scan_computes_only_the_carry_columns():
    w, xs = _inputs()
    shapes = _dot_shapes(fg.make_jaxpr(fg.grad(_rnn_loss))(w, xs).jaxpr)
    assert (B, H) in shapes  # dz @ W[I:].T
    assert (B, I + H) not in shapes  # the x part of dz @ W.T is not computed


def test_narrow_sliced_products_against_numpy():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 5, 7)).astype(np.float32)
    b = rng.standard_normal((2, 9, 7)).astype(np.float32)

    def f(a, b):
        y = lax.dot_general(a, b, (((2,), (2,)), ((0,), (0,))))  # [2, 5, 9]
        return y[:, 1:3, 2:6], y[:, 2:4, 3:8], y[:1, :, :2]

    closed = fg.make_jaxpr(f)(a, b)
    narrowed = narrow_sliced_products(closed)
    assert narrowed is not closed
    (shape,) = _dot_shapes(narrowed.jaxpr)
    assert shape == (2, 5, 8)  # the batch dim stays whole; rows 0..5 read; columns 0..8
    got = core.eval_jaxpr(narrowed.jaxpr, narrowed.consts, a, b)
    y = np.einsum("bik,bjk->bij", a.astype(np.float64), b.astype(np.float64))
    for g, want in zip(got, (y[:, 1:3, 2:6], y[:, 2:4, 3:8], y[:1, :, :2])):
        np.testing.assert_allclose(np.asarray(g), want, rtol=1e-5, atol=1e-5)


def test_product_read_whole_is_left_alone():
    closed = fg.make_jaxpr(lambda a, b: (a @ b, (a @ b)[:, 1:]))(np.ones((2, 3)), np.ones((3, 4)))
    assert narrow_sliced_products(closed) is closed


def test_body_writes_ys_and_carries_in_place():
    """The ``[x, h]`` the product reads is a ys output too: the kernel that builds it writes
    the ys row, and the product writes the carry: no kernel copies either."""
    t, b, i, h = 3, 32, 64, 128  # large enough for a matrix-product step
    rng = np.random.default_rng(2)
    w = (rng.standard_normal((i + h, h)) / np.sqrt(i + h)).astype(np.float32)
    xs = rng.standard_normal((t, b, i)).astype(np.float32)

    def f(w, xs):
        def cell(h, x):
            z = fnp.concatenate([x, h], axis=-1)
            return z @ w, z

        return lax.scan(cell, fnp.ones((b, h), xs.dtype), xs)

    text = fg.jit(f).lower(w, xs).compile().as_text()
    plan = text.split("# fusion plan")[1].split("# LLVM IR")[0]
    body = plan.split(f"body (length {t}):")[1]
    # (the product reads w packed once before the loop: control_flow.pack_invariant_operands)
    assert re.search(r"gemm dot_general: writes scan1.carry0.next reads scan1.y0, t\d+\n", body)
    assert "b packed" in plan.split("scanstep")[0], plan
    assert body.count("kernel ") == 1, plan  # the concatenation only
    hv = np.ones((b, h), np.float64)
    zs = []
    for x in xs:
        zs.append(np.concatenate([x, hv], axis=-1))
        hv = zs[-1] @ w
    got_h, got_zs = fg.jit(f)(w, xs)
    np.testing.assert_allclose(np.asarray(got_h), hv, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(got_zs), np.stack(zs), rtol=1e-4, atol=1e-4)
