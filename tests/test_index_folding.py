"""A stored array read through a reshape: the load's flat index is the element's own flat index
(``Ctx.flat_index`` undoes ``unflatten`` when the index provably lies inside the array), with
no divisions left in the kernel; values against numpy for random shapes and factorings, on
the CPU and, where there is one, the GPU."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.lowering import kernel as K
from fungrad.lowering.fusion import _walk


def _factorings(n: int) -> list[tuple[int, ...]]:
    out = [(n,)]
    for a in range(2, n):
        if n % a == 0:
            out.append((a, n // a))
    return out


@settings(max_examples=30, deadline=None)
@given(
    rows=st.integers(2, 24),
    cols=st.sampled_from([6, 12, 20, 32]),
    inner=st.integers(2, 9),
    pick=st.integers(0, 100),
)
def test_reshaped_product_reads_match_numpy(rows, cols, inner, pick):
    """``(a @ b)`` (a stored buffer) reshaped into another factoring of its columns, then
    combined elementwise with an array of the new shape."""
    shapes = _factorings(cols)
    new = shapes[pick % len(shapes)]
    rng = np.random.default_rng(rows * 131 + cols + inner)
    a = rng.standard_normal((rows, inner)).astype(np.float32)
    b = rng.standard_normal((inner, cols)).astype(np.float32)
    c = rng.standard_normal((rows, *new)).astype(np.float32)

    def f(a, b, c):
        return fnp.tanh((a @ b).reshape(rows, *new)) * c

    want = np.tanh((a.astype(np.float64) @ b).reshape(rows, *new)) * c
    np.testing.assert_allclose(np.asarray(fg.jit(f)(a, b, c)), want, rtol=1e-5, atol=1e-5)


def test_no_division_left_in_the_load():
    """The flattened activations' gradient read back as ``[64, 7, 7, 32]`` (the CNN's pool
    backward): its load is at the kernel's own flat index."""
    rng = np.random.default_rng(0)
    g = rng.standard_normal((64, 10)).astype(np.float32)
    w = rng.standard_normal((1568, 10)).astype(np.float32)
    m = rng.standard_normal((64, 7, 7, 32)).astype(np.float32)

    def f(g, w, m):
        dx = (g @ w.T).reshape(64, 7, 7, 32)
        return fnp.where(m > 0, dx, 0.0)

    text = fg.jit(f).lower(g, w, m).as_text()
    kernel = re.search(r"define [^\n]*@k\d+\([^\n]*\n(.*?)\n}\n", text.split("# LLVM IR")[1], re.S)
    assert kernel is not None
    assert "udiv" not in kernel.group(1) and "urem" not in kernel.group(1), kernel.group(1)
    want = np.where(m > 0, (g.astype(np.float64) @ w.T).reshape(64, 7, 7, 32), 0.0)
    np.testing.assert_allclose(np.asarray(fg.jit(f)(g, w, m)), want, rtol=1e-4, atol=1e-4)


def test_flat_index_undoes_unflatten_only_inside_the_array():
    """``flat_index(unflatten(f, s), s)`` is ``f`` when ``f`` stays below ``prod(s)``; an ``f``
    that may reach past it (here up to 2 * prod(s)) keeps the wrapping arithmetic."""
    ctx = K.Ctx()
    shape = (4, 6)
    inside = ctx.index(K.Var(math.prod(shape)))
    assert ctx.flat_index(ctx.unflatten(inside, shape), shape) is inside
    beyond = ctx.index(K.Var(2 * math.prod(shape)))
    assert ctx.flat_index(ctx.unflatten(beyond, shape), shape) is not beyond


@pytest.mark.usefixtures("gpu")
def test_gpu_reads_the_reshape_too():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((8, 5)).astype(np.float32), rng.standard_normal((5, 12))
    b = b.astype(np.float32)
    f = lambda a, b: fnp.sin((a @ b).reshape(8, 3, 4)) + 1.0  # noqa: E731
    want = np.sin((a.astype(np.float64) @ b).reshape(8, 3, 4)) + 1.0
    got = fg.jit(f, backend="gpu")(a, b)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5)


def test_division_of_a_row_major_index_by_its_row_length():
    """``(i * 1568 + j) // 1568`` is ``i`` and ``% 1568`` is ``j`` for ``j < 1568``; by a
    divisor of the row length the row part divides exactly; an operand that may be negative
    (a subtraction) or a row length the divisor does not divide keeps the division."""
    ctx = K.Ctx()
    i, j = ctx.index(K.Var(64)), ctx.index(K.Var(1568))
    flat = ctx.iadd(ctx.imul(i, ctx.iconst(1568)), j)
    assert ctx.idiv(flat, ctx.iconst(1568)) is i
    assert ctx.irem(flat, ctx.iconst(1568)) is j
    by7 = ctx.idiv(flat, ctx.iconst(224))  # i * 7 + j // 224
    assert by7.op == "add" and ctx.irem(by7, ctx.iconst(7)) is ctx.idiv(j, ctx.iconst(224))
    assert ctx.idiv(ctx.isub(flat, ctx.iconst(3)), ctx.iconst(1568)).op == "idiv"
    assert ctx.idiv(flat, ctx.iconst(1000)).op == "idiv"
    for vi, vj in ((0, 0), (5, 1567), (63, 224), (17, 1000)):
        f = vi * 1568 + vj
        assert (f // 1568, f % 1568) == (vi, vj)


def test_flattening_kernel_divides_only_within_a_row():
    """The CNN's forward flatten (pool, then ``reshape(64, -1)`` for the dense layer): its
    kernel loops over the flat ``[64, 1568]`` and no longer divides the flat index by 1568."""
    rng = np.random.default_rng(2)
    h = rng.standard_normal((64, 14, 14, 32)).astype(np.float32)
    w = rng.standard_normal((1568, 10)).astype(np.float32)

    def f(h, w):
        pooled = fg.lax.reduce_window(h, -np.inf, fg.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        return pooled.reshape(64, -1) @ w

    text = fg.jit(f).lower(h, w).as_text().split("# LLVM IR")[1]
    assert not re.search(r"(udiv|urem) i64 %\w+, 1568\b", text)
    pooled = h.reshape(64, 7, 2, 7, 2, 32).max(axis=(2, 4)).astype(np.float64)
    want = pooled.reshape(64, -1) @ w
    np.testing.assert_allclose(np.asarray(fg.jit(f)(h, w)), want, rtol=1e-4, atol=1e-3)


def _value(e: K.Expr, env: dict) -> int:
    """An index expression's value with loop variables set from ``env`` (Var -> int)."""
    if e.op == "const":
        return e.attr
    if e.op == "idx":
        return env[e.attr]
    a, b = (_value(x, env) for x in e.args)
    ops = {"add": int.__add__, "sub": int.__sub__, "mul": int.__mul__}
    return ops.get(e.op, int.__floordiv__ if e.op == "idiv" else int.__mod__)(a, b)


def test_division_of_a_nested_row_major_index():
    """``((i * 128 + j) * 256 + k) // 32768`` is ``i`` (the transformer's head transposes
    divided every element's flat index by 32768), ``% 32768`` needs no division, and a divisor
    that splits the inner rows keeps one only for them."""
    ctx = K.Ctx()
    vi, vj, vk = K.Var(8), K.Var(128), K.Var(256)
    i, j, k = ctx.index(vi), ctx.index(vj), ctx.index(vk)
    flat = ctx.iadd(ctx.imul(ctx.iadd(ctx.imul(i, ctx.iconst(128)), j), ctx.iconst(256)), k)
    assert ctx.idiv(flat, ctx.iconst(32768)) is i
    rem = ctx.irem(flat, ctx.iconst(32768))
    by64 = ctx.idiv(flat, ctx.iconst(64))
    ops = {e.op for e in _walk([rem])}
    assert not ops & {"idiv", "irem"}, ops
    assert [e.args[0] for e in _walk([by64]) if e.op == "idiv"] == [k]
    rng = np.random.default_rng(0)
    for a, b, c in zip(rng.integers(0, 8, 50), rng.integers(0, 128, 50), rng.integers(0, 256, 50)):
        env = {vi: int(a), vj: int(b), vk: int(c)}
        f = _value(flat, env)
        assert _value(rem, env) == f % 32768
        assert _value(by64, env) == f // 64


@settings(max_examples=60, deadline=None)
@given(
    extents=st.lists(st.integers(1, 9), min_size=1, max_size=4),
    coefs=st.lists(st.integers(0, 40), min_size=4, max_size=4),
    const=st.integers(0, 50),
    divisor=st.integers(2, 60),
    seed=st.integers(0, 1000),
)
def test_folded_division_of_random_sums_matches_python(extents, coefs, const, divisor, seed):
    """``idiv`` / ``irem`` of a nested sum of loop variables times constants, folded or not,
    equal Python's ``//`` and ``%`` at random points."""
    ctx = K.Ctx()
    vs = [K.Var(n) for n in extents]
    e = ctx.iconst(const)
    for v, c in zip(vs, coefs):  # ((const * c0 + x0) * c1 + x1) ... nested like flat_index
        e = ctx.iadd(ctx.imul(e, ctx.iconst(c)), ctx.index(v))
    q, r = ctx.idiv(e, ctx.iconst(divisor)), ctx.irem(e, ctx.iconst(divisor))
    rng = np.random.default_rng(seed)
    for _ in range(20):
        env = {v: int(rng.integers(0, v.extent)) for v in vs}
        x = _value(e, env)
        assert (_value(q, env), _value(r, env)) == (x // divisor, x % divisor)


def test_head_transposes_divide_by_the_head_size_only():
    """``[8, 128, 256] -> [8, 4, 128, 64]`` and back (attention's head split and merge): no
    division by the sequence block 32768 is left, and the values are numpy's."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 128, 256)).astype(np.float32)
    y = rng.standard_normal((8, 4, 128, 64)).astype(np.float32)

    def f(x, y):
        heads = x.reshape(8, 128, 4, 64).transpose(0, 2, 1, 3) * 2.0
        merged = y.transpose(0, 2, 1, 3).reshape(8, 128, 256) + 1.0
        return heads, merged

    text = fg.jit(f).lower(x, y).as_text().split("# LLVM IR")[1]
    assert not re.search(r"(udiv|urem) i64 %\w+, 32768\b", text)
    heads, merged = fg.jit(f)(x, y)
    np.testing.assert_array_equal(
        np.asarray(heads), x.reshape(8, 128, 4, 64).transpose(0, 2, 1, 3) * 2
    )
    np.testing.assert_array_equal(
        np.asarray(merged), y.transpose(0, 2, 1, 3).reshape(8, 128, 256) + 1
    )
