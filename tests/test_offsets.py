"""Constant offsets moved into kernel arguments (fungrad/lowering/offsets.py): kernels that
read or write different slices of one buffer with the same code become one function called
with offset pointers; values against numpy."""

from __future__ import annotations

import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.lowering import kernel as K
from fungrad.lowering.offsets import split_constant


def _ir(f, *args) -> str:
    return fg.jit(f).lower(*args).as_text().split("# LLVM IR")[1]


def test_split_constant_takes_the_terms_of_top_level_additions():
    ctx = K.Ctx()
    i, j = ctx.index(K.Var(8)), ctx.index(K.Var(16))
    row = ctx.imul(i, ctx.iconst(768))
    e = ctx.iadd(row, ctx.iadd(ctx.iconst(256), j))
    c, rest = split_constant(ctx, e)
    assert c == 256 and rest is ctx.iadd(row, j)
    assert split_constant(ctx, ctx.iadd(row, j)) == (0, ctx.iadd(row, j))
    inner = ctx.imul(ctx.iadd(i, ctx.iconst(2)), ctx.iconst(64))  # (i + 2) * 64 keeps its 2
    assert split_constant(ctx, inner) == (0, inner)
    assert split_constant(ctx, ctx.iconst(5))[0] == 5


def _heads(x, n):
    """Attention's head split of the three slices of a fused projection ``x``."""
    return [
        x[:, i * n : (i + 1) * n].reshape(x.shape[0], 4, n // 4).transpose(1, 0, 2)
        for i in range(3)
    ]


def test_head_splits_of_one_projection_share_one_function():
    """The query and value head splits (offsets 0 and 128 into each row) are one function."""

    def f(x):
        q, k, v = _heads(x, 64)
        return fnp.tanh(q @ k.transpose(0, 2, 1)) @ v

    x = np.random.default_rng(0).standard_normal((32, 192)).astype(np.float32)
    ir = _ir(f, x)
    calls = re.findall(r"call void @(k\d+)\(", ir) + re.findall(r"ptr @(k\d+)\.par", ir)
    defined = set(re.findall(r"define [^@\n]*@(k\d+)\(", ir))
    assert len(calls) > len(set(calls)), (calls, defined)  # a function called twice
    assert set(calls) <= defined
    assert re.search(r"= getelementptr inbounds i8, ptr %buf\d+, i64 512\b", ir)  # 128 floats
    q, k, v = (a.astype(np.float64) for a in _heads(x, 64))
    want = np.tanh(q @ k.transpose(0, 2, 1)) @ v
    np.testing.assert_allclose(np.asarray(fg.jit(f)(x)), want, rtol=1e-4, atol=1e-4)


def test_two_offsets_into_one_buffer_stay_in_the_index():
    """``x[:, 1:] - x[:, :-1]`` reads one buffer at two offsets: nothing is hoisted."""

    def f(x):
        return fnp.exp(x[:, 1:] - x[:, :-1])

    x = np.random.default_rng(1).standard_normal((64, 33)).astype(np.float32)
    assert ".off" not in _ir(f, x)
    want = np.exp(x[:, 1:].astype(np.float64) - x[:, :-1])
    np.testing.assert_allclose(np.asarray(fg.jit(f)(x)), want, rtol=1e-5)


@settings(max_examples=25, deadline=None)
@given(
    rows=st.integers(1, 12),
    width=st.sampled_from([4, 8, 16]),
    starts=st.lists(st.integers(0, 40), min_size=3, max_size=3),
    extra=st.integers(0, 5),
)
def test_slices_into_products_and_a_concatenation_match_numpy(rows, width, starts, extra):
    """Three slices of one buffer at random offsets, each transposed into a product (kernels
    with the same code at different offsets), and a concatenation written at offsets."""
    cols = max(starts) + width + extra
    rng = np.random.default_rng(rows * 97 + width + sum(starts))
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    w = rng.standard_normal((rows, 3)).astype(np.float32)

    def f(x, w):
        parts = [x[:, s : s + width].T @ w for s in starts]  # [width, 3] each
        return fnp.concatenate([fnp.tanh(p) for p in parts], axis=0), parts[0] * parts[2]

    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    parts = [x64[:, s : s + width].T @ w64 for s in starts]
    got = fg.jit(f)(x, w)
    np.testing.assert_allclose(np.asarray(got[0]), np.tanh(np.concatenate(parts)), atol=1e-5)
    np.testing.assert_allclose(np.asarray(got[1]), parts[0] * parts[2], rtol=1e-4, atol=1e-4)
