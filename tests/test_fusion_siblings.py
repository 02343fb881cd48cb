"""Multi-output fusion of program outputs of one shape that are not listed together (an
optimizer step returns all new parameters, then all first moments, then all second moments):
one kernel stores them, and the results are eager's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp


def _kernel_lines(fn, *args) -> list[str]:
    text = fn.lower(*args).as_text()
    plan = text[text.index("# fusion plan") : text.index("# LLVM")]
    return [line.strip() for line in plan.splitlines() if line.strip().startswith("kernel")]


def _adam_like(ws, bs, gw, gb, mw, mb):
    """New weights, biases, then moments of each: outputs alternate between two shapes."""
    new_mw, new_mb = 0.9 * mw + 0.1 * gw, 0.9 * mb + 0.1 * gb
    return (
        ws - 0.01 * new_mw / (fnp.abs(gw) + 1e-3),
        bs - 0.01 * new_mb / (fnp.abs(gb) + 1e-3),
        new_mw,
        new_mb,
    )


def _adam_like_numpy(ws, bs, gw, gb, mw, mb):
    new_mw, new_mb = 0.9 * mw + 0.1 * gw, 0.9 * mb + 0.1 * gb
    return (
        ws - 0.01 * new_mw / (np.abs(gw) + 1e-3),
        bs - 0.01 * new_mb / (np.abs(gb) + 1e-3),
        new_mw,
        new_mb,
    )


def test_outputs_of_one_shape_share_a_kernel():
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in [(6, 5), (5,)] * 3]
    f = fg.jit(_adam_like)
    kernels = _kernel_lines(f, *args)
    assert len(kernels) == 2, kernels
    assert "writes out0, out2" in kernels[0] and "writes out1, out3" in kernels[1]
    for got, exp in zip(f(*args), _adam_like_numpy(*args)):
        np.testing.assert_allclose(np.asarray(got), exp, rtol=1e-5, atol=1e-6)


def test_an_output_reading_a_skipped_output_is_stored_after_it():
    # c has a's shape but reads b's reduction (another shape, listed between them)
    def f(x, y):
        a = x * 2.0
        b = fnp.sum(y, axis=1) + 1.0
        c = x + fnp.sum(b)
        return a, b, c

    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    y = np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3)
    got = fg.jit(f)(x, y)
    b = y.sum(1) + 1.0
    for g, e in zip(got, (x * 2.0, b, x + b.sum())):
        np.testing.assert_allclose(np.asarray(g), e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(), (0,), (3, 0), (7,)])
def test_degenerate_shapes(shape):
    args = [np.ones(s, np.float32) for s in [shape, (2,)] * 3]
    for got, exp in zip(fg.jit(_adam_like)(*args), _adam_like_numpy(*args)):
        np.testing.assert_allclose(np.asarray(got), exp, rtol=1e-6)


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(1, 9),
    m=st.integers(1, 9),
    vals=st.lists(
        st.floats(-1e3, 1e3, width=32) | st.sampled_from([np.nan, np.inf, -np.inf]),
        min_size=6,
        max_size=6,
    ),
)
def test_any_values_match_eager(n, m, vals):
    shapes = [(n, m), (m,)] * 3
    args = [np.full(s, v, np.float32) for s, v in zip(shapes, vals)]
    jitted, eager = fg.jit(_adam_like)(*args), _adam_like(*map(fnp.asarray, args))
    for got, exp in zip(jitted, eager):
        np.testing.assert_allclose(np.asarray(got), np.asarray(exp), rtol=1e-6, equal_nan=True)


def test_sgd_updates_of_equal_weight_shapes_stay_in_their_products():
    # two 96 x 96 weights (products large enough for gemm steps): their update stores share
    # a kernel, and the peephole still moves each into the product computing its gradient
    sizes = (64, 96, 96, 96, 10)
    rng = np.random.default_rng(1)
    params = [
        (
            rng.standard_normal((m, n)).astype(np.float32) / np.float32(np.sqrt(m)),
            np.zeros(n, np.float32),
        )
        for m, n in zip(sizes[:-1], sizes[1:])
    ]
    x = rng.standard_normal((32, 64)).astype(np.float32)

    def loss(p, x):
        h = x
        for w, b in p[:-1]:
            h = fg.nn.relu(h @ w + b)
        w, b = p[-1]
        return fnp.sum((h @ w + b) ** 2)

    def step(p, x):
        val, g = fg.value_and_grad(loss)(p, x)
        return fg.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g), val

    f = fg.jit(step)
    text = f.lower(params, x).as_text()
    plan = text[text.index("# fusion plan") : text.index("# LLVM")]
    assert plan.count("+ update") == 4, plan
    with fg.disable_jit():
        expected = step(params, x)
    got = f(params, x)
    for a, b in zip(fg.tree_util.tree_leaves(got), fg.tree_util.tree_leaves(expected)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=1e-5)


def test_the_gpu_joins_only_adjacent_outputs():
    """On the GPU an invocation runs its outputs' serial loops one after another, so outputs
    listed apart keep kernels of their own there (the GPU policy's joins_across_outputs); the
    results are eager's."""
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in [(6, 5), (5,)] * 3]
    f = fg.jit(_adam_like, backend="gpu")
    text = f.lower(*args).as_text()
    assert "writes out0, out2" not in text and "writes out1, out3" not in text
    for got, exp in zip(f(*args), _adam_like_numpy(*args)):
        np.testing.assert_allclose(np.asarray(got), exp, rtol=1e-5, atol=1e-6)
