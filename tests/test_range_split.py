"""Index-set splitting (``fungrad/lowering/range_split.py``): kernels whose elements select by
a range test on a loop index (pad, concatenate, the transpose of a slice, dynamic_update_slice
at a static start) run each range as a loop of its own computing only the live branch.

Results are compared with eager mode (numpy's impls) and numpy itself; the split
itself is checked on the LSTM's four-gate backward: no select is left in its kernel and each
element computes one gate's branch."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.ir import passes
from fungrad.lowering import compile_jaxpr, fusion, range_split
from fungrad.lowering.cpu import llvm
from fungrad.lowering.cpu.policy import CpuPolicy


def compile_and_compare(f, *args):
    """Compile ``f`` for the CPU, run it on ``args`` and compare every output with eager
    ``f(*args)`` (numpy's impls): integers exactly, floats to a few ulps (the compiled
    transcendentals are not numpy's); returns the executable."""
    args = [fnp.asarray(a) for a in args]
    exe = compile_jaxpr(fg.make_jaxpr(f)(*args), "cpu", "f")
    got = exe.call(args)
    want = fg.tree_util.tree_leaves(f(*args))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype
        if g.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=0)
        else:
            np.testing.assert_array_equal(g, w)
    return exe


def _data(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _np_pad(x, fill, config):
    """numpy reference of ``lax.pad``: interior padding by strided assignment, then low/high
    (negative: cropping) per axis."""
    for axis, (lo, hi, interior) in enumerate(config):
        n = x.shape[axis]
        size = n + max(n - 1, 0) * interior
        shape = list(x.shape)
        shape[axis] = size
        y = np.full(shape, fill, x.dtype)
        sl = [slice(None)] * x.ndim
        sl[axis] = slice(0, size, interior + 1)
        y[tuple(sl)] = x
        pads = [(0, 0)] * x.ndim
        pads[axis] = (max(lo, 0), max(hi, 0))
        y = np.pad(y, pads, constant_values=fill)
        sl = [slice(None)] * x.ndim
        sl[axis] = slice(max(-lo, 0), y.shape[axis] - max(-hi, 0))
        x = y[tuple(sl)]
    return x


# -- pad --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "config",
    [
        [(0, 0, 0), (3, 2, 0)],
        [(2, 1, 0), (0, 0, 0)],
        [(1, 2, 0), (2, 3, 0)],  # both axes: a nested split
        [(0, 0, 0), (2, 3, 1)],  # interior: its every-other test stays a select
        [(-1, 2, 0), (3, -2, 0)],  # negative padding crops
        [(0, 0, 0), (-2, -3, 2)],
    ],
)
def test_pad_matches_numpy(config):
    x = _data((4, 7))

    def f(x):
        return lax.pad(fnp.exp(x), np.float32(-1.5), config)

    compile_and_compare(f, x)
    got = np.asarray(fg.jit(f)(x))
    np.testing.assert_allclose(got, _np_pad(np.exp(x), np.float32(-1.5), config), rtol=1e-6)


def test_pad_of_a_sum_of_pads_is_a_concatenation():
    """Four disjoint zero pads added together, as the transpose of four slices: each range
    computes its own operand only, and the sum is bit for bit eager's."""
    a, b, c = _data((3, 5), 1), _data((3, 4), 2), _data((3, 2), 3)

    def f(a, b, c):
        pa = lax.pad(fnp.tanh(a), np.float32(0), [(0, 0, 0), (0, 6, 0)])
        pb = lax.pad(fnp.sin(b), np.float32(0), [(0, 0, 0), (5, 2, 0)])
        pc = lax.pad(fnp.exp(c), np.float32(0), [(0, 0, 0), (9, 0, 0)])
        return pa + pb + pc

    compile_and_compare(f, a, b, c)
    want = np.concatenate([np.tanh(a), np.sin(b), np.exp(c)], axis=1)
    np.testing.assert_allclose(np.asarray(fg.jit(f)(a, b, c)), want, rtol=1e-6)


# -- concatenate ------------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_concatenate_each_axis(axis):
    shapes = [[3, 4, 5], [3, 4, 5], [3, 4, 5]]
    for s, n in zip(shapes, (2, 1, 3)):
        s[axis] = n
    xs = [_data(s, i) for i, s in enumerate(shapes)]

    def f(a, b, c):
        return fnp.concatenate([fnp.exp(a), b * 2.0, fnp.tanh(c)], axis=axis)

    compile_and_compare(f, *xs)
    want = np.concatenate([np.exp(xs[0]), xs[1] * 2, np.tanh(xs[2])], axis=axis)
    np.testing.assert_allclose(np.asarray(fg.jit(f)(*xs)), want, rtol=1e-6)


def test_concatenate_of_reductions():
    """Pieces whose values are reductions: each piece's reduction loops get variables of
    their own (one loop per piece)."""
    a, b = _data((4, 5, 6)), _data((4, 3, 7), 1)

    def f(a, b):
        return fnp.concatenate([fnp.sum(fnp.exp(a), -1), fnp.max(b, -1)], axis=1)

    compile_and_compare(f, a, b)
    want = np.concatenate([np.exp(a).sum(-1), b.max(-1)], axis=1)
    np.testing.assert_allclose(np.asarray(fg.jit(f)(a, b)), want, rtol=1e-5)


def test_concatenate_along_a_threaded_outer_loop():
    """The split loop is the outermost one, which threads run in parts: each piece runs the
    part of its range inside the call's."""
    n = 1 << 17
    a, b = _data((n,)), _data((n + 3,), 1)

    def f(a, b):
        return fnp.concatenate([fnp.exp(a), fnp.tanh(b)])

    compile_and_compare(f, a, b)


def test_integer_concatenate_and_dynamic_update_slice():
    x = np.arange(40, dtype=np.int32).reshape(5, 8)
    u = -np.arange(6, dtype=np.int32).reshape(2, 3)

    def f(x, u):
        y = lax.dynamic_update_slice(x * 3, u, (2, 4))
        return fnp.concatenate([y, x[:, :2]], axis=1)

    compile_and_compare(f, x, u)
    want = x * 3
    want[2:4, 4:7] = u
    np.testing.assert_array_equal(np.asarray(fg.jit(f)(x, u)), np.concatenate([want, x[:, :2]], 1))


# -- transposes of slices, vmap ---------------------------------------------------------------

H = 8


def _gates(z, c):
    i = fg.nn.sigmoid(z[:, :H])
    f = fg.nn.sigmoid(z[:, H : 2 * H])
    g = fnp.tanh(z[:, 2 * H : 3 * H])
    o = fg.nn.sigmoid(z[:, 3 * H :])
    return fnp.sum(o * fnp.tanh(f * c + i * g))


def _gates_np(z, c):
    """The gradient of :func:`_gates` by hand, in float64."""
    z, c = z.astype(np.float64), c.astype(np.float64)
    s = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    i, f, g, o = s(z[:, :H]), s(z[:, H : 2 * H]), np.tanh(z[:, 2 * H : 3 * H]), s(z[:, 3 * H :])
    cn = f * c + i * g
    t = np.tanh(cn)
    dc = o * (1 - t * t)
    return np.concatenate(
        [dc * g * i * (1 - i), dc * c * f * (1 - f), dc * i * (1 - g * g), t * o * (1 - o)], 1
    )


def test_slice_transposes_grad():
    z, c = _data((5, 4 * H)), _data((5, H), 1)
    got = np.asarray(fg.jit(fg.grad(_gates))(z, c))
    np.testing.assert_allclose(got, np.asarray(fg.grad(_gates)(z, c)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, _gates_np(z, c), rtol=1e-4, atol=1e-6)


def test_under_vmap():
    z, c = _data((3, 5, 4 * H)), _data((3, 5, H), 1)
    got = np.asarray(fg.jit(fg.vmap(fg.grad(_gates)))(z, c))
    for k in range(3):
        np.testing.assert_allclose(got[k], _gates_np(z[k], c[k]), rtol=1e-4, atol=1e-6)
    x = _data((4, 6))
    padded = np.asarray(fg.jit(fg.vmap(lambda r: lax.pad(r, np.float32(0), [(2, -1, 1)])))(x))
    for k in range(4):
        np.testing.assert_array_equal(padded[k], _np_pad(x[k], 0, [(2, -1, 1)]))


# -- hypothesis: shapes with 0 and 1 --------------------------------------------------------------

_PAD = st.tuples(st.integers(-3, 3), st.integers(-3, 3), st.integers(0, 2))


@settings(max_examples=25, deadline=None)
@given(
    shape=st.lists(st.integers(0, 4), min_size=1, max_size=2),
    data=st.data(),
)
def test_pad_any_shape(shape, data):
    config = [data.draw(_PAD) for _ in shape]
    for (lo, hi, interior), n in zip(config, shape):  # keep every output size >= 0
        if n + max(n - 1, 0) * interior + lo + hi < 0:
            return
    x = _data(shape)
    compile_and_compare(lambda x: lax.pad(x * 2.0, np.float32(7), config), x)
    got = np.asarray(fg.jit(lambda x: lax.pad(x * 2.0, np.float32(7), config))(x))
    np.testing.assert_array_equal(got, _np_pad(x * 2, 7, config))


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 3), min_size=1, max_size=4),
    rows=st.integers(0, 2),
    axis=st.integers(0, 1),
)
def test_concatenate_any_sizes(sizes, rows, axis):
    shapes = [(n, rows) if axis == 0 else (rows, n) for n in sizes]
    xs = [_data(s, i) for i, s in enumerate(shapes)]

    def f(*xs):
        return fnp.concatenate([fnp.exp(x) + k for k, x in enumerate(xs)], axis=axis)

    compile_and_compare(f, *xs)
    want = np.concatenate([np.exp(x) + k for k, x in enumerate(xs)], axis=axis)
    np.testing.assert_allclose(np.asarray(fg.jit(f)(*xs)), want, rtol=1e-6)


# -- the split itself -------------------------------------------------------------------------


def _gate_backward_kernel(h):
    """The program of the gates' gradient at hidden size ``h`` and its kernel over the
    ``(B, 4h)`` cotangent."""

    def cell(z, c):
        i = fg.nn.sigmoid(z[:, :h])
        f = fg.nn.sigmoid(z[:, h : 2 * h])
        g = fnp.tanh(z[:, 2 * h : 3 * h])
        o = fg.nn.sigmoid(z[:, 3 * h :])
        return fnp.sum(o * fnp.tanh(f * c + i * g))

    z, c = _data((32, 4 * h)), _data((32, h), 1)
    prog = fusion.plan(
        passes.optimize(fg.make_jaxpr(fg.grad(cell))(z, c)), "main", policy=CpuPolicy()
    )
    (kern,) = [
        s
        for s in prog.steps
        if isinstance(s, fusion.Kernel) and [v.extent for v in s.loops] == [32, 4 * h]
    ]
    return prog, kern


def _transcendentals(stores) -> int:
    return sum(1 for e in fusion._walk([s.value for s in stores]) if e.op in ("logistic", "tanh"))


def test_gate_backward_computes_one_branch_per_element():
    """The kernel of the 4-gate backward selects between four padded branches; split, each
    quarter of the row computes its own gate's branch and nothing else: no select, fewer
    transcendentals per element, and the rendered function has no float select left."""
    prog, kern = _gate_backward_kernel(256)
    whole = _transcendentals(kern.stores)
    split = range_split.plan_split(prog.ctx, kern.loops, kern.stores)
    assert split is not None and split.depth == 1
    assert [(p.lo, p.hi) for p in split.pieces] == [(0, 256), (256, 512), (512, 768), (768, 1024)]
    for p in split.pieces:
        nodes = fusion._walk([s.value for s in p.stores])
        assert not any(e.op == "select" for e in nodes)
        assert _transcendentals(p.stores) < whole
    per_element = sum(_transcendentals(p.stores) * (p.hi - p.lo) for p in split.pieces) / 1024
    assert per_element <= whole / 2
    assert range_split.split_cost(kern.loops, kern.stores, split) < 0.6 * range_split.split_cost(
        kern.loops, kern.stores
    )
    text = "\n".join(part.ir_text for part in llvm.render(prog))
    body = re.search(rf"define internal void @{kern.name}\(.*?\n}}\n", text, re.S).group(0)
    assert not re.search(r"select i1 [^,]+, float", body)
    assert body.count("icmp slt i64 %v") == 1 + 4  # the row loop and the four quarter loops


def test_kernels_without_range_tests_are_not_split():
    """An elementwise kernel, a transposed read and a row reduction: no test, no split (their
    generated code is what it was: the golden tests keep it)."""

    def f(x, y):
        return fnp.tanh(x) * y.T + fnp.sum(x, axis=1, keepdims=True)

    x, y = _data((6, 5)), _data((5, 6), 1)
    prog = fusion.plan(passes.optimize(fg.make_jaxpr(f)(x, y)), "main", policy=CpuPolicy())
    for s in prog.steps:
        if isinstance(s, fusion.Kernel):
            assert range_split.plan_split(prog.ctx, s.loops, s.stores) is None


_SCANS = {
    "cumsum": (lax.cumsum, np.cumsum),
    "cumprod": (lax.cumprod, np.cumprod),
    "cummax": (lax.cummax, np.maximum.accumulate),
}


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(sorted(_SCANS)),
    reverse=st.booleans(),
    n=st.integers(2, 9),
    lo=st.integers(-2, 2),
    hi=st.integers(-2, 2),
    rows=st.integers(0, 3),
    seed=st.integers(0, 99),
)
def test_scans_over_a_pad_match_numpy(name, reverse, n, lo, hi, rows, seed):
    """A cumulative op whose operand is a pad: its kernel reads back the carry it stores, at
    an index pinned to the scan's loop (``v - v``); the range split of the pad's test folded
    the pin to 0 and the load ran once before the pieces (``rev cumsum(pad)`` of [1..5] gave
    [5, 5, 6, 7, 4] for [11, 10, 9, 7, 4]: fuzz seed 346783)."""
    if n + lo + hi < 1:
        return
    op, ref = _SCANS[name]
    rng = np.random.default_rng(seed)
    shape = (rows, n) if rows else (n,)
    x = rng.uniform(0.5, 1.5, shape).astype(np.float32)
    config = ((0, 0, 0),) * (len(shape) - 1) + ((lo, hi, 0),)

    def f(x):
        return op(lax.pad(x, np.float32(1.25), config), axis=x.ndim - 1, reverse=reverse)

    padded = np.asarray(lax.pad(x, np.float32(1.25), config)).astype(np.float64)
    if reverse:
        want = np.flip(ref(np.flip(padded, -1), axis=-1), -1)
    else:
        want = ref(padded, axis=-1)
    np.testing.assert_allclose(np.asarray(fg.jit(f)(x)), want, rtol=2e-6)


def test_gradient_of_a_product_of_a_cumsum_matches_eager():
    """The fuzzer's program: prod's backward pads the exclusive products, the cumsum's
    transpose scans them in reverse; jit's gradient was up to 6% off."""
    x = np.array([-1.9166583, -1.5878271, 0.96197057, 0.6131679, 1.874900], np.float32)

    def f(x):
        return fnp.prod(fnp.cumsum(x))

    c = np.cumsum(x.astype(np.float64))
    want = np.array([sum(np.prod(np.delete(c, k)) for k in range(i, 5)) for i in range(5)])
    np.testing.assert_allclose(np.asarray(fg.grad(f)(x)), want, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(fg.jit(fg.grad(f))(x)), want, rtol=1e-5)
