"""An innermost kernel loop whose index is divided by a constant runs as two loops
(fungrad/lowering/divided_loops.py): attention's head merges lose their divisions, inside a
concatenation's range split too; values against numpy."""

from __future__ import annotations

import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.lowering import kernel as K
from fungrad.lowering.divided_loops import split_divided_loop
from fungrad.lowering.fusion import Store, _walk


def _divisions(f, *args) -> list[str]:
    ir = fg.jit(f).lower(*args).as_text().split("# LLVM IR")[1]
    return re.findall(r"(?:udiv|urem) i64 %\w+, \d+", ir)


def _merge(y):
    b, h, s, d = y.shape
    return y.transpose(0, 2, 1, 3).reshape(b, s, h * d)


def test_head_merge_has_no_division_left():
    y = np.random.default_rng(0).standard_normal((8, 4, 128, 64)).astype(np.float32)
    f = lambda y: _merge(y) + 1.0  # noqa: E731
    assert _divisions(f, y) == []
    np.testing.assert_array_equal(np.asarray(fg.jit(f)(y)), _merge(y) + np.float32(1))


def test_head_merges_concatenated_have_no_division_left():
    """Three merges written side by side (the gradient of a fused q/k/v projection): the
    concatenation runs as three pieces of the last axis, each split in two."""
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, 4, 16, 32)).astype(np.float32) for _ in range(3))

    def f(q, k, v):
        return fnp.concatenate([_merge(q) * 2.0, _merge(k), _merge(v) - 1.0], axis=-1)

    assert _divisions(f, q, k, v) == []
    want = np.concatenate([_merge(q) * 2, _merge(k), _merge(v) - 1], axis=-1)
    np.testing.assert_array_equal(np.asarray(fg.jit(f)(q, k, v)), want)


def test_split_only_where_divisions_go_away():
    """By a divisor of the extent of at least MIN_INNER elements; a loop whose division does
    not fold (``(2 * v) // 64`` keeps one) stays as it is."""
    ctx = K.Ctx()
    out = K.Buffer(0, (4, 256), np.dtype(np.float32), "output", "out")
    src = K.Buffer(1, (4, 4, 64), np.dtype(np.float32), "input", "x")
    i, v = K.Var(4), K.Var(256)
    iv, vv = ctx.index(i), ctx.index(v)
    flat_out = ctx.iadd(ctx.imul(iv, ctx.iconst(256)), vv)

    def read(j):
        at = ctx.iadd(
            ctx.imul(
                ctx.iadd(ctx.imul(iv, ctx.iconst(4)), ctx.idiv(j, ctx.iconst(64))), ctx.iconst(64)
            ),
            ctx.irem(j, ctx.iconst(64)),
        )
        return ctx.load(src, at)

    store = Store(out, flat_out, read(vv))
    loops, stores = split_divided_loop(ctx, (i, v), [store])
    assert [x.extent for x in loops] == [4, 4, 64]
    idx = stores[0].value.args[0]
    assert not {e.op for e in _walk([idx])} & {"idiv", "irem"}
    kept = Store(out, flat_out, read(ctx.imul(vv, ctx.iconst(2))))  # (2 v) // 64 stays
    assert split_divided_loop(ctx, (i, v), [kept])[0] == (i, v)
    assert split_divided_loop(ctx, (v,), [store])[0] == (v,)  # an outermost loop never


@settings(max_examples=25, deadline=None)
@given(
    b=st.integers(1, 3),
    h=st.integers(1, 5),
    s=st.integers(1, 9),
    d=st.sampled_from([8, 16, 24, 32, 48]),
    pieces=st.integers(1, 3),
)
def test_merges_and_splits_match_numpy(b, h, s, d, pieces):
    rng = np.random.default_rng(b * 1000 + h * 100 + s * 10 + d + pieces)
    ys = [rng.standard_normal((b, h, s, d)).astype(np.float32) for _ in range(pieces)]

    def f(*ys):
        merged = fnp.concatenate([_merge(y) * (i + 1.0) for i, y in enumerate(ys)], axis=-1)
        split = merged.reshape(b, s, pieces * h, d).transpose(0, 2, 1, 3)
        return merged, split + 0.5

    merged = np.concatenate([_merge(y) * np.float32(i + 1) for i, y in enumerate(ys)], axis=-1)
    got = fg.jit(f)(*ys)
    np.testing.assert_array_equal(np.asarray(got[0]), merged)
    want = merged.reshape(b, s, pieces * h, d).transpose(0, 2, 1, 3) + np.float32(0.5)
    np.testing.assert_array_equal(np.asarray(got[1]), want)
