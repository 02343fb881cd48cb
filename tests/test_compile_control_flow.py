"""Compiled control flow (fungrad/lowering/control_flow.py, the lowering rules at the ends of
fungrad/lax/control_flow/conditionals.py and loops.py) against eager evaluation of the same
functions (the primitives' impls, which loop in Python): cond/switch with clamped indices of
every integer dtype, while_loop (zero iterations included), fori_loop, scan (reverse, no xs,
several carries and ys, pytrees, odd and even lengths, length 0), lax.map, nested control flow,
and compiled gradients of scans; plus the plan each rule promises (native steps, fused bodies,
loop-invariant carries not carried)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.lax.control_flow import cond_p
from fungrad.lowering import compile_jaxpr
from fungrad.lowering.fusion import Kernel
from fungrad.lowering.steps import CondStep, ScanStep, WhileStep

# -- compile and compare -------------------------------------------------------------------------


def compile_f(f, *args):
    """The executable of ``make_jaxpr(f)(*args)``."""
    args = [fnp.asarray(a) for a in args]
    return compile_jaxpr(fg.make_jaxpr(f)(*args), "cpu", "f")


def compare(exe, f, *args, exact=True, rtol=1e-5, atol=1e-6):
    """Run ``exe`` on ``args`` and compare every output with eager ``f(*args)``: dtypes and
    shapes equal; values bit for bit when ``exact`` (NaN where NaN), else within tolerance."""
    args = [fnp.asarray(a) for a in args]
    got = exe.call(args)
    want = fg.tree_util.tree_leaves(f(*args))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        if exact or g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(
                g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True
            )


def compile_and_compare(f, *args, **kw):
    exe = compile_f(f, *args)
    compare(exe, f, *args, **kw)
    return exe


def values(rng, shape, dtype, specials=False):
    """Random values of ``dtype``; floats include NaN, +-Inf and -0.0 when ``specials``."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind in "iu":
        return rng.integers(0 if dtype.kind == "u" else -20, 20, size=shape).astype(dtype)
    x = rng.standard_normal(shape).astype(dtype)
    if specials and x.size:
        mask = rng.random(shape) < 0.2
        x[mask] = rng.choice(np.array([np.nan, np.inf, -np.inf, -0.0], dtype), size=int(mask.sum()))
    return x


def steps_of(exe, kind):
    return [s for s in exe.program.steps if isinstance(s, kind)]


shapes = st.lists(st.integers(0, 3), min_size=0, max_size=2).map(tuple)
seeds = st.integers(0, 2**32 - 1)


# -- cond / switch ------------------------------------------------------------------------------


@settings(max_examples=12)
@given(shape=shapes, dtype=st.sampled_from([np.float32, np.int32, np.uint8]), seed=seeds)
def test_cond_runs_the_selected_branch(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x, y = values(rng, shape, dtype, True), values(rng, shape, dtype, True)

    def f(p, x, y):
        return lax.cond(p > 0, lambda a, b: (a * b + a, b), lambda a, b: (b - a, a * a), x, y)

    exe = compile_f(f, np.float32(1), x, y)
    assert len(steps_of(exe, CondStep)) == 1
    for p in (1.0, -1.0, 0.0, np.nan, np.inf):  # NaN > 0 is False
        compare(exe, f, np.float32(p), x, y)


def test_switch_clamps_the_index():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    def f(i, x):
        return lax.switch(i, [lambda a: a + 1, lambda a: a * 3, lambda a: -a], x)

    exe = compile_f(f, np.int32(0), x)
    for i in (-(2**31), -3, -1, 0, 1, 2, 3, 100, 2**31 - 1):
        compare(exe, f, np.int32(i), x)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint32, np.int32])
def test_cond_index_of_any_integer_dtype_is_clamped(dtype):
    # cond_p itself takes any integer index (lax.switch converts to int32 first)
    branches = tuple(
        fg.make_jaxpr(b)(np.float32(0)) for b in (lambda a: a + 1, lambda a: a * 3, lambda a: -a)
    )

    def f(i, x):
        return cond_p.bind(i, x, branches=branches)[0]

    info = np.iinfo(dtype)
    exe = compile_f(f, dtype(0), np.float32(2))
    for i in {info.min, info.min + 1, -1 if info.min else 0, 0, 1, 2, 3, info.max}:
        compare(exe, f, dtype(i), np.float32(2.5))


def test_cond_index_int64_and_uint64_under_x64(x64):
    branches = tuple(
        fg.make_jaxpr(b)(np.float64(0)) for b in (lambda a: a + 1, lambda a: a * 3, lambda a: -a)
    )

    def f(i, x):
        return cond_p.bind(i, x, branches=branches)[0]

    for dtype in (np.int64, np.uint64):
        info = np.iinfo(dtype)
        exe = compile_f(f, dtype(0), np.float64(2))
        for i in {info.min, 0, 1, 2, 3, 2**40, info.max}:
            compare(exe, f, dtype(i), np.float64(2.5))


def test_cond_with_a_constant_predicate_is_inlined():
    exe = compile_and_compare(
        lambda x: lax.cond(True, lambda a: a + 1, lambda a: a - 1, x),
        np.arange(4.0, dtype=np.float32),
    )
    assert not steps_of(exe, CondStep)
    assert len(steps_of(exe, Kernel)) == 1


def test_cond_branches_closing_over_arrays_and_traced_values():
    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)

    def f(p, x, s):
        return lax.cond(p, lambda a: (a @ w) * s, lambda a: a.sum() * w[0] - s, x)

    exe = compile_f(f, True, np.ones(3, np.float32), np.float32(2))
    for p in (True, False):
        compare(exe, f, p, np.arange(3, dtype=np.float32), np.float32(-1.5), exact=False)


# -- while_loop / fori_loop -----------------------------------------------------------------------


def test_fori_loop_with_traced_bounds_is_a_native_while():
    def f(x, n):
        return lax.fori_loop(0, n, lambda i, c: c * 2 + i, x)

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    exe = compile_f(f, x, np.int32(3))
    (w,) = steps_of(exe, WhileStep)
    assert len(w.carries) == 2  # (i, c); the upper bound is passed through, not carried
    for n in (0, 1, 2, 5, -4):  # zero (and negative) trip counts return the init value
        compare(exe, f, x, np.int32(n))


def test_while_loop_zero_iterations_returns_init():
    def f(x):
        return lax.while_loop(lambda c: c[0] > 100, lambda c: (c[0] + 1, c[1] * 2), (0, x))

    compile_and_compare(f, np.array([1.5, np.nan, -np.inf], np.float32))


def test_while_loop_with_consts_and_data_dependent_trip_count():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((4, 4)).astype(np.float32) * 0.5

    def f(x, limit):
        def cond(c):
            return (fnp.sum(c[1] ** 2) < limit) & (c[0] < 50)

        def body(c):
            return c[0] + 1, fnp.tanh(c[1] @ w) * 1.5 + c[1] * limit

        return lax.while_loop(cond, body, (0, x))

    exe = compile_f(f, np.ones(4, np.float32), np.float32(10))
    for lim in (0.0, 3.0, 10.0, 200.0):
        compare(
            exe,
            f,
            rng.standard_normal(4).astype(np.float32) * 0.1,
            np.float32(lim),
            exact=False,
            rtol=1e-4,
            atol=1e-5,
        )


def test_while_loop_permuting_carries():
    def f(a, b, n):
        return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[2], c[1] * 2), (0, a, b))

    exe = compile_f(f, np.float32(1), np.float32(2), np.int32(3))
    for n in range(6):
        compare(exe, f, np.float32(1.25), np.float32(-3), np.int32(n))


@settings(max_examples=12)
@given(
    shape=shapes,
    dtype=st.sampled_from([np.float32, np.int32, np.bool_]),
    lo=st.integers(-2, 3),
    hi=st.integers(-2, 6),
    seed=seeds,
)
def test_fori_loop_static_and_traced_bounds(shape, dtype, lo, hi, seed):
    rng = np.random.default_rng(seed)
    x = values(rng, shape, dtype, True)

    def body(i, c):
        return c ^ (i % 2 == 0) if dtype == np.bool_ else c * 3 - lax.convert_element_type(i, dtype)

    compile_and_compare(lambda x: lax.fori_loop(lo, hi, body, x), x)
    exe = compile_f(lambda x, a, b: lax.fori_loop(a, b, body, x), x, np.int32(lo), np.int32(hi))
    compare(exe, lambda x, a, b: lax.fori_loop(a, b, body, x), x, np.int32(lo), np.int32(hi))


# -- scan / map -----------------------------------------------------------------------------------


@settings(max_examples=15)
@given(
    shape=shapes,
    length=st.integers(0, 5),
    reverse=st.booleans(),
    dtype=st.sampled_from([np.float32, np.int32, np.uint8]),
    seed=seeds,
)
def test_scan_carry_and_ys(shape, length, reverse, dtype, seed):
    rng = np.random.default_rng(seed)
    init = values(rng, shape, dtype, True)
    xs = values(rng, (length, *shape), dtype, True)

    def f(init, xs):
        def step(c, x):
            return c * 2 - x, (c + x, c)

        return lax.scan(step, init, xs, reverse=reverse)

    exe = compile_and_compare(f, init, xs)
    scans = steps_of(exe, ScanStep)
    if length == 0:  # nothing runs: the carry is the init value, the ys are empty
        assert not scans
    else:
        # the carry and both ys are stored by one fused kernel (none when they are empty)
        assert len(scans[0].body) == (1 if np.prod(shape) else 0)


def test_scan_length_without_xs_and_pytrees():
    def f(a, b):
        def step(c, _):
            return {"s": c["s"] + c["v"].sum(), "v": c["v"] * 0.5}, (c["s"], [c["v"], -c["v"]])

        return lax.scan(step, {"s": a, "v": b}, None, length=5)

    compile_and_compare(f, np.float32(1), np.arange(3, dtype=np.float32))


def test_scan_multiple_xs_and_consts():
    rng = np.random.default_rng(2)
    k = rng.standard_normal(3).astype(np.float32)

    def f(c0, xs, ys, scale):
        def step(c, xy):
            x, (y, z) = xy
            return c * scale + x * k - z, (x * y, (c > 0) & (z < 1))

        return lax.scan(step, c0, (xs, (ys, ys[:, 0])), reverse=True)

    compile_and_compare(
        f,
        np.zeros(3, np.float32),
        rng.standard_normal((4, 3)).astype(np.float32),
        rng.standard_normal((4, 3)).astype(np.float32),
        np.float32(0.5),
        exact=False,
    )


@pytest.mark.parametrize("length", [0, 1, 2, 3, 4])
def test_scan_parity_of_the_double_buffered_carry(length):
    # the initial value goes where the final one must land: check odd and even trip counts
    def f(a, b):
        return lax.scan(lambda c, _: ((c[1], c[0] + 1), None), (a, b), None, length=length)[0]

    compile_and_compare(f, np.arange(3, dtype=np.float32), np.ones(3, np.float32))


def test_unused_operands_are_not_stored():
    def f(x, y):
        c = lax.cond(x[0] > 0, lambda a, b: a * 2, lambda a, b: a - 1, x, y * 3)
        s, _ = lax.scan(lambda c, xy: (c + xy[0], None), c, (x[:, None] * 2, y[:, None] + 1))
        return s

    exe = compile_and_compare(f, np.arange(3, dtype=np.float32), np.ones(3, np.float32))
    (cond,) = steps_of(exe, CondStep)
    (scan,) = steps_of(exe, ScanStep)
    assert len(scan.xs) == 1
    # neither y * 3 nor y + 1 is computed: y is read by no kernel
    assert all(b.name != "in1" for k in steps_of(exe, Kernel) for b in k.reads())


@pytest.mark.parametrize("length", [1, 2, 3])
def test_scan_carry_the_body_never_reads(length):
    def f(a, b, xs):
        return lax.scan(lambda c, x: ((x * 2, c[1] + 1), x - 1), (a, b), xs)

    compile_and_compare(f, np.float32(7), np.int32(0), np.arange(length, dtype=np.float32))


def test_scan_zero_size_and_bool_carries():
    def f(e, b, xs):
        return lax.scan(lambda c, x: ((c[0] + 1, c[1] ^ (x > 0)), c[0].sum()), (e, b), xs)

    compile_and_compare(
        f,
        np.zeros((0, 2), np.float32),
        np.array([True, False]),
        np.array([[1, -1], [0, 2], [3, 3]], np.float32),
    )


def test_scan_body_with_matmul_and_reductions():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((32, 32)).astype(np.float32) * 0.2  # large enough for BLAS

    def f(h, xs):
        def step(h, x):
            h = fnp.tanh(h @ w + x)
            return h - fnp.max(h, axis=1, keepdims=True), (x @ h.T).sum(0)

        return lax.scan(step, h, xs)

    compile_and_compare(
        f,
        rng.standard_normal((32, 32)).astype(np.float32),
        rng.standard_normal((3, 32, 32)).astype(np.float32),
        exact=False,
        rtol=1e-4,
        atol=1e-4,
    )


def test_loop_temporaries_never_share_memory_with_live_values():
    # the bodies' temporaries (BLAS results, stored reductions) get scratch memory from the
    # program's liveness pass: they must not overlap values live across the loop
    rng = np.random.default_rng(7)
    w = rng.standard_normal((32, 32)).astype(np.float32) * 0.2

    def f(x, n):
        t = fnp.tanh(x @ w)
        c = lax.fori_loop(0, n, lambda i, c: fnp.tanh(c @ w) * 0.5 + c.sum(0), x)
        s, _ = lax.scan(lambda c, r: (c + fnp.tanh(r @ w).sum(0), None), t[0], t.reshape(4, 8, 32))
        return t + c, t * 2, s

    exe = compile_f(f, rng.standard_normal((32, 32)).astype(np.float32), np.int32(3))
    for n in (0, 1, 3):
        compare(
            exe,
            f,
            rng.standard_normal((32, 32)).astype(np.float32),
            np.int32(n),
            exact=False,
            rtol=1e-4,
            atol=1e-4,
        )


def test_lax_map():
    def f(x):
        return lax.map(lambda r: (fnp.sum(r * r), r[::-1] * 2), x)

    exe = compile_and_compare(f, np.arange(12, dtype=np.float32).reshape(4, 3))
    assert len(steps_of(exe, ScanStep)) == 1


def test_scan_float64_under_x64(x64):
    def f(c, xs):
        return lax.scan(lambda c, x: (c * x + 1, fnp.exp(c)), c, xs)

    compile_and_compare(f, np.float64(0.5), np.linspace(-1, 1, 7), exact=False, rtol=1e-13)


# -- nested control flow --------------------------------------------------------------------------


def test_scan_inside_scan():
    def f(xs):
        def outer(c, x):
            c2, ys = lax.scan(
                lambda d, e: (d + e * c, d * 2), c, x[:, None] * fnp.ones((3, 2)), reverse=True
            )
            return c2 * 0.5 + c2[0], ys

        return lax.scan(outer, fnp.zeros(2), xs)

    compile_and_compare(f, np.arange(15, dtype=np.float32).reshape(5, 3) / 7)


def test_cond_inside_scan():
    def f(xs):
        def step(c, x):
            c = lax.cond(x.sum() > 0, lambda a: a + x, lambda a: a * 0.5 - x, c)
            return c, c.sum()

        return lax.scan(step, xs[0], xs)

    xs = np.random.default_rng(4).standard_normal((6, 3)).astype(np.float32)
    compile_and_compare(f, xs, exact=False)


def test_scan_inside_while_and_while_inside_cond():
    xs = np.random.default_rng(5).standard_normal((4, 3)).astype(np.float32)

    def f(x, n):
        def body(s):
            c, _ = lax.scan(lambda d, e: (d * 0.9 + e, None), s[1], x)
            return s[0] + 1, c

        def loop():
            return lax.while_loop(lambda s: s[0] < n, body, (0, x[0]))[1]

        return lax.cond(n > 1, loop, lambda: x[0] - 1)

    exe = compile_f(f, xs, np.int32(2))
    for n in (0, 1, 2, 4):
        compare(exe, f, xs, np.int32(n), exact=False)


def test_while_inside_while():
    def f(n):
        def outer(s):
            i, acc = s
            _, inner = lax.while_loop(
                lambda t: t[0] < i, lambda t: (t[0] + 1, t[1] + t[0]), (0, acc)
            )
            return i + 1, inner

        return lax.while_loop(lambda s: s[0] < n, outer, (0, 0))

    exe = compile_f(f, np.int32(3))
    for n in (0, 1, 4, 7):
        compare(exe, f, np.int32(n))


def test_sibling_loops_get_distinct_kernels_and_labels():
    def f(x):
        a, _ = lax.scan(lambda c, e: (c + e, None), x[0], x)
        b, _ = lax.scan(lambda c, e: (c * e, None), x[1], x, reverse=True)
        c = lax.fori_loop(0, 3, lambda i, c: c - a, b)
        return a, b, c

    exe = compile_and_compare(f, np.arange(1, 10, dtype=np.float32).reshape(3, 3))
    assert len(steps_of(exe, ScanStep)) == 3


# -- transforms, compiled -------------------------------------------------------------------------


def test_grad_of_scan_compiled():
    def loss(x):
        return lax.scan(lambda c, xi: (fnp.sin(c) * xi, c), np.float32(1), x)[0]

    compile_and_compare(fg.grad(loss), np.linspace(0.2, 2, 5, dtype=np.float32), exact=False)


def test_value_and_grad_of_an_rnn_compiled():
    rng = np.random.default_rng(6)

    def loss(w, xs):
        def step(h, x):
            h = fnp.tanh(h @ w + x)
            return h, fnp.sum(h**2)

        h, ys = lax.scan(step, fnp.zeros(8), xs)
        return fnp.sum(ys) + fnp.sum(h)

    f = fg.value_and_grad(loss, argnums=(0, 1))
    exe = compile_and_compare(
        f,
        rng.standard_normal((8, 8)).astype(np.float32) * 0.3,
        rng.standard_normal((6, 8)).astype(np.float32),
        exact=False,
        rtol=1e-4,
        atol=1e-5,
    )
    scans = steps_of(exe, ScanStep)
    assert len(scans) == 2 and [s.reverse for s in scans] == [False, True]


def test_grad_of_bounded_while_loop_compiled():
    def loss(x):
        _, y = lax.while_loop(
            lambda s: s[0] < 4, lambda s: (s[0] + 1, fnp.sin(s[1]) * 1.1), (0, x), max_steps=10
        )
        return fnp.sum(y)

    compile_and_compare(fg.grad(loss), np.linspace(-1, 1, 4, dtype=np.float32), exact=False)


def test_vmap_of_while_with_batched_predicate_and_cond_with_batched_index():
    def f(n, x):
        def one(n, x):
            y = lax.while_loop(lambda s: s[0] < n, lambda s: (s[0] + 1, s[1] * 2.0), (0, x))[1]
            return lax.cond(n > 2, lambda a: a + 1, lambda a: a * 3, y)

        return fg.vmap(one)(n, x)

    compile_and_compare(
        f, np.array([0, 3, 1, 5, 2, 0], np.int32), np.arange(12, dtype=np.float32).reshape(6, 2)
    )


def test_jvp_of_fori_loop_compiled():
    def f(x):
        return fg.jvp(
            lambda x: lax.fori_loop(0, 3, lambda i, c: fnp.sin(c) * c, x), (x,), (fnp.ones_like(x),)
        )

    compile_and_compare(f, np.linspace(-2, 2, 6, dtype=np.float32), exact=False)
