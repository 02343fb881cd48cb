"""Deep programs compile: long unrolled chains of operations (an unrolled loop, a residual net
written with a Python ``for``, a fused optimizer update of many parameters) are traced, fused,
rendered and differentiated without one Python frame per operation, under the interpreter's
default recursion limit. Values are checked against numpy, gradients against a hand-written
numpy reverse pass of the same chain."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp

RECURSION_LIMIT = 1000  # CPython's default


@pytest.fixture(autouse=True)
def default_recursion_limit():
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(RECURSION_LIMIT)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def _ops(n: int, reduce_every: int = 0, sin: bool = True) -> list[tuple]:
    """The chain's steps: cheap elementwise ops (scalings by 0.8 and 1.25 in turn, so that
    neither the values nor the derivative vanish), a transcendental now and then (``sin``),
    and (every ``reduce_every`` steps) a row sum broadcast back and a whole-array maximum."""
    steps = []
    for i in range(n):
        if reduce_every and i % reduce_every == reduce_every // 2:
            steps.append(("rowsum", 0.125) if (i // reduce_every) % 2 else ("max", 0.25))
        elif sin and i % 50 == 7:
            steps.append(("sin",))
        else:
            scale = ("mul", 1.25 if (i // 4) % 2 else 0.8)
            steps.append((scale, ("add", 0.25), ("maximum", -1.0), ("bias",))[i % 4])
    return steps


def _forward(m, steps, x, b):
    """The chain in module ``m`` (fungrad.numpy or numpy); ``b`` is a row broadcast over x."""
    for op in steps:
        kind = op[0]
        if kind == "mul":
            x = x * op[1]
        elif kind == "add":
            x = x + op[1]
        elif kind == "maximum":
            x = m.maximum(x, op[1])
        elif kind == "bias":
            x = x + b * 0.5
        elif kind == "sin":
            x = m.sin(x)
        elif kind == "rowsum":
            x = x - m.sum(x, axis=1, keepdims=True) * op[1]
        else:  # "max": the whole array's maximum, broadcast
            x = x - m.max(x) * op[1]
    return x


def _reference_grad(steps, x, b):
    """d sum(chain(x, b)) / dx by a float64 reverse pass in numpy."""
    xs = []
    for op in steps:
        xs.append(x)
        x = _forward(np, [op], x, b)
    g = np.ones_like(x)
    for op, xin in zip(reversed(steps), reversed(xs)):
        kind = op[0]
        if kind == "mul":
            g = g * op[1]
        elif kind == "maximum":
            g = g * (xin > op[1])
        elif kind == "sin":
            g = g * np.cos(xin)
        elif kind == "rowsum":
            g = g - g.sum(axis=1, keepdims=True) * op[1]
        elif kind == "max":  # the maximum's cotangent goes to its (first) position
            hot = np.zeros_like(xin).ravel()
            hot[np.argmax(xin)] = 1.0
            g = g - g.sum() * op[1] * hot.reshape(xin.shape)
    return g


def _inputs(shape=(3, 5)):
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    b = rng.uniform(-1, 1, shape[-1:]).astype(np.float32)
    return x, b


@pytest.mark.parametrize("n", [300, 3000, 20000])
def test_jit_of_a_long_elementwise_chain(n):
    steps = _ops(n)
    x, b = _inputs()
    got = fg.jit(lambda x, b: _forward(fnp, steps, x, b))(x, b)
    want = _forward(np, steps, x.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n", [300, 1000])
def test_jit_of_a_long_chain_with_reductions_and_broadcasts(n):
    steps = _ops(n, reduce_every=150)
    x, b = _inputs()
    got = fg.jit(lambda x, b: _forward(fnp, steps, x, b))(x, b)
    want = _forward(np, steps, x.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5)


def test_jit_of_the_sum_of_a_long_chain():
    # the whole chain is the body of one reduction: built inside it, rebuilt with the same
    # reduction variables when a part too deep is built first
    steps = _ops(600)
    x, b = _inputs((4, 16))
    got = fg.jit(lambda x, b: fnp.sum(_forward(fnp, steps, x, b), axis=1))(x, b)
    want = _forward(np, steps, x.astype(np.float64), b.astype(np.float64)).sum(axis=1)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n, reduce_every", [(300, 150), (1000, 0)])
def test_jit_grad_of_a_long_chain(n, reduce_every):
    steps = _ops(n, reduce_every, sin=False)
    x, b = _inputs()
    got = fg.jit(fg.grad(lambda x, b: fnp.sum(_forward(fnp, steps, x, b))))(x, b)
    want = _reference_grad(steps, x.astype(np.float64), b.astype(np.float64))
    assert np.abs(want).max() > 0.1  # (a derivative that vanished would test nothing)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-3, atol=1e-5)


def test_checkpointed_chain_of_known_values():
    # the checkpoint's known side (a chain of c alone) is recomputed in the backward pass:
    # the values it needs are found by a walk over the whole chain
    steps = _ops(3000)
    x, b = _inputs()

    def f(x, c):
        return fnp.sum(fg.checkpoint(lambda x, c: x * _forward(fnp, steps, c, b))(x, c))

    want = _forward(np, steps, x.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(np.asarray(fg.grad(f)(x, x)), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(fg.jit(fg.grad(f))(x, x)), want, rtol=1e-4, atol=1e-5)


def test_trace_and_grad_of_a_20000_op_chain():
    steps = _ops(20000)
    x, b = _inputs((2, 3))
    closed = fg.make_jaxpr(fg.grad(lambda x, b: fnp.sum(_forward(fnp, steps, x, b))))(x, b)
    assert len(closed.jaxpr.eqns) >= 20000
    text = closed.pretty_print()
    assert text.count("\n") >= 20000


def test_gpu_jit_of_a_long_elementwise_chain(gpu):
    steps = _ops(3000, sin=False)
    x, b = _inputs()
    got = fg.jit(lambda x, b: _forward(fnp, steps, x, b), backend="gpu")(x, b)
    want = _forward(np, steps, x.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5)


def test_empty_and_zero_d_chains():
    steps = _ops(1000)
    for shape in ((), (0, 4)):
        x = np.full(shape, 0.5, np.float32)
        b = np.float32(0.25) if shape == () else np.zeros((4,), np.float32)
        got = fg.jit(lambda x, b: _forward(fnp, steps, x, b))(x, b)  # noqa: B023 -- called here
        want = _forward(np, steps, x.astype(np.float64), np.float64(b))
        assert np.asarray(got).shape == shape
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5)
