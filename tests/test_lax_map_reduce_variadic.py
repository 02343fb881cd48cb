"""``lax.map(f, xs, batch_size=...)`` and the variadic ``lax.reduce`` (several operands, any
elementwise computation), as JAX 0.10.2's: against Python loops and numpy references, under
jit, grad and vmap. Expected tie-breaking and init-value behaviour were read off JAX 0.10.2
(CPU); these tests do not import jax."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from tests.helpers import assert_array

# -- lax.map with batch_size ---------------------------------------------------------------------


def _f(t):
    """A pytree in, a pytree out: ``t = {'a': f32[2], 'b': i32[]}``."""
    return fnp.sin(t["a"]) * t["b"], {"s": fnp.sum(t["a"]), "c": t["b"] + 1}


def _f_loop(a, b):
    """``_f`` mapped by a Python loop in numpy."""
    n = a.shape[0]
    prod = [np.sin(a[i]) * np.float32(b[i]) for i in range(n)]
    sums = [np.sum(a[i]) for i in range(n)]
    incs = [b[i] + 1 for i in range(n)]
    return (
        np.array(prod, np.float32).reshape(n, 2),
        {"s": np.array(sums, np.float32).reshape(n), "c": np.array(incs, np.int32).reshape(n)},
    )


def _inputs(n, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, 2)).astype(np.float32)
    b = rng.integers(-3, 4, size=n).astype(np.int32)
    return a, b


def _assert_f_result(out, a, b):
    prod, d = _f_loop(a, b)
    assert_array(out[0], prod, dtype=np.float32, rtol=1e-5)
    assert_array(out[1]["s"], d["s"], dtype=np.float32, rtol=1e-5)
    assert_array(out[1]["c"], d["c"], dtype=np.int32)


@given(n=st.integers(0, 11), batch_size=st.integers(0, 7), seed=st.integers(0, 2**16))
def test_map_batch_size_matches_a_loop(n, batch_size, seed):
    a, b = _inputs(n, seed)
    out = lax.map(_f, {"a": a, "b": b}, batch_size=batch_size)
    _assert_f_result(out, a, b)


@settings(max_examples=6)
@given(n=st.integers(0, 9), batch_size=st.integers(1, 4))
def test_map_batch_size_under_jit(n, batch_size):
    a, b = _inputs(n)
    out = fg.jit(lambda xs: lax.map(_f, xs, batch_size=batch_size))({"a": a, "b": b})
    _assert_f_result(out, a, b)


@pytest.mark.parametrize("n,batch_size", [(7, 3), (6, 3), (2, 5), (5, 0), (1, 1)])
def test_map_batch_size_grad(n, batch_size):
    x = np.linspace(-2.0, 2.0, 3 * n, dtype=np.float32).reshape(n, 3)

    def loss(x):
        return fnp.sum(lax.map(lambda v: fnp.sum(fnp.sin(v) * v), x, batch_size=batch_size))

    expected = np.cos(x) * x + np.sin(x)
    assert_array(fg.grad(loss)(x), expected, dtype=np.float32, rtol=1e-5)
    assert_array(fg.jit(fg.grad(loss))(x), expected, dtype=np.float32, rtol=1e-5)


def test_map_batch_size_structure_as_jax():
    """A scan over n // batch_size chunks of vmap(f), then one vmap(f) over the remainder
    concatenated after it: f is traced once per chunk shape."""
    shapes = []

    def f(x):
        shapes.append(x.shape)
        return x * 2

    x = np.arange(14, dtype=np.float32).reshape(7, 2)
    assert_array(lax.map(f, x, batch_size=3), x * 2)
    assert len(shapes) == 2 and shapes[0] == shapes[1] == (2,)
    jaxpr = str(fg.make_jaxpr(lambda x: lax.map(f, x, batch_size=3))(x))
    assert "scan[" in jaxpr and "length=2" in jaxpr and "concatenate" in jaxpr
    shapes.clear()
    lax.map(f, x[:6], batch_size=3)
    assert len(shapes) == 1  # no remainder
    # batch_size=0, or one past the length: a single vmap, no scan
    assert "scan" not in str(fg.make_jaxpr(lambda x: lax.map(f, x, batch_size=0))(x))
    assert "scan" not in str(fg.make_jaxpr(lambda x: lax.map(f, x, batch_size=9))(x))
    # an output that does not depend on x is stacked all the same
    assert_array(lax.map(lambda v: np.float32(3), x, batch_size=3), np.full(7, 3, np.float32))
    # batch_size=None keeps the element-by-element scan
    assert_array(lax.map(f, x, batch_size=None), x * 2)


def test_map_batch_size_errors():
    x = np.ones((5, 2), np.float32)
    with pytest.raises(ValueError, match="lax.map: batch_size must be nonnegative, got -1"):
        lax.map(lambda v: v, x, batch_size=-1)
    with pytest.raises(TypeError, match="lax.map: batch_size must be an int or None"):
        lax.map(lambda v: v, x, batch_size=2.0)
    with pytest.raises(ValueError, match=r"one common length.*\[\(5, 2\), \(4,\)\]"):
        lax.map(lambda t: t[0], (x, np.ones(4)), batch_size=2)
    with pytest.raises(ValueError, match="lax.map: xs .* has no arrays to map over"):
        lax.map(lambda t: t, (), batch_size=2)


# -- variadic lax.reduce -------------------------------------------------------------------------


def _sum3(a, b):
    return tuple(lax.add(p, q) for p, q in zip(a, b))


def _pick(cmp):
    """A (value, index) reducer keeping the pair where ``cmp(a_value, b_value)`` holds."""

    def f(a, b):
        (av, ai), (bv, bi) = a, b
        keep = cmp(av, bv)
        return lax.select(keep, av, bv), lax.select(keep, ai, bi)

    return f


def _argmax_first(a, b):
    """Larger value wins; ties go to the smaller index (numpy's and JAX's argmax)."""
    (av, ai), (bv, bi) = a, b
    keep = lax.bitwise_or(lax.gt(av, bv), lax.bitwise_and(lax.eq(av, bv), lax.lt(ai, bi)))
    return lax.select(keep, av, bv), lax.select(keep, ai, bi)


def _argmin_first(a, b):
    (av, ai), (bv, bi) = a, b
    keep = lax.bitwise_or(lax.lt(av, bv), lax.bitwise_and(lax.eq(av, bv), lax.lt(ai, bi)))
    return lax.select(keep, av, bv), lax.select(keep, ai, bi)


@st.composite
def _shape_and_dims(draw, max_dims=3, max_side=5):
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=0, max_side=max_side))
    perm = draw(st.permutations(range(len(shape))))
    return shape, tuple(perm[: draw(st.integers(0, len(shape)))])


@given(sd=_shape_and_dims(), seed=st.integers(0, 2**16))
def test_reduce_sum_of_three_operands(sd, seed):
    shape, dims = sd
    rng = np.random.default_rng(seed)
    x = rng.integers(-50, 50, size=shape).astype(np.float32)  # exact sums in any order
    y = rng.integers(-50, 50, size=shape).astype(np.int32)
    z = rng.integers(0, 2, size=shape).astype(np.uint8)
    out = lax.reduce((x, y, z), (np.float32(0), np.int32(0), np.uint8(0)), _sum3, dims)
    assert isinstance(out, tuple) and len(out) == 3
    assert_array(out[0], np.sum(x, axis=dims, dtype=np.float32), dtype=np.float32)
    assert_array(out[1], np.sum(y, axis=dims, dtype=np.int32), dtype=np.int32)
    assert_array(out[2], np.sum(z, axis=dims, dtype=np.uint8), dtype=np.uint8)


@given(
    x=hnp.arrays(
        np.float32,
        hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6),
        elements=st.integers(-2, 2).map(float),  # many ties
    ),
    data=st.data(),
)
def test_reduce_argmax_argmin_ties_go_to_the_first_index(x, data):
    axis = data.draw(st.integers(0, x.ndim - 1))
    idx = lax.broadcasted_iota(np.int32, x.shape, axis)
    v, i = lax.reduce((x, idx), (-np.inf, 0), _argmax_first, (axis,))
    assert_array(v, np.max(x, axis), dtype=np.float32)
    assert_array(i, np.argmax(x, axis).astype(np.int32), dtype=np.int32)
    v, i = lax.reduce((x, idx), (np.inf, 0), _argmin_first, (axis,))
    assert_array(v, np.min(x, axis), dtype=np.float32)
    assert_array(i, np.argmin(x, axis).astype(np.int32), dtype=np.int32)


def test_reduce_ties_without_an_index_rule_follow_the_element_order():
    """A reducer that keeps its left argument on ties finds the first extremum and one that
    keeps its right argument the last: the order of the elements is kept (JAX 0.10.2's
    results, also on 1000 elements)."""
    x = np.array([[1, 3, 3, 2, 3, 0], [0, 0, 5, 5, -1, -1]], np.float32)
    idx = lax.broadcasted_iota(np.int32, x.shape, 1)
    cases = [
        (lax.ge, -np.inf, [1, 2]),
        (lax.gt, -np.inf, [4, 3]),
        (lax.le, np.inf, [5, 4]),
        (lax.lt, np.inf, [5, 5]),
    ]
    for cmp, init, expected in cases:
        _, i = lax.reduce((x, idx), (init, 0), _pick(cmp), (1,))
        assert_array(i, np.array(expected, np.int32), dtype=np.int32)
        jitted = fg.jit(lambda x, idx, c=cmp, v=init: lax.reduce((x, idx), (v, 0), _pick(c), (1,)))
        _, i = jitted(x, idx)
        assert_array(i, np.array(expected, np.int32), dtype=np.int32)
    big = np.random.default_rng(0).integers(0, 3, size=(3, 1000)).astype(np.float32)
    bidx = lax.broadcasted_iota(np.int32, big.shape, 1)
    _, first = lax.reduce((big, bidx), (-np.inf, 0), _pick(lax.ge), (1,))
    _, last = lax.reduce((big, bidx), (-np.inf, 0), _pick(lax.gt), (1,))
    assert_array(first, big.argmax(1).astype(np.int32))
    assert_array(last, (999 - big[:, ::-1].argmax(1)).astype(np.int32))


def test_reduce_argmax_over_several_dimensions():
    rng = np.random.default_rng(1)
    x = rng.integers(0, 4, size=(3, 4, 5)).astype(np.float32)
    flat = (np.arange(3)[:, None, None] * 5 + np.arange(5)[None, None, :]).astype(np.int32)
    idx = np.broadcast_to(flat, x.shape)
    v, i = lax.reduce((x, idx), (-np.inf, 0), _argmax_first, (2, 0))
    moved = np.moveaxis(x, 1, 0).reshape(4, 15)  # (0, 2) flattened row-major
    assert_array(v, moved.max(1), dtype=np.float32)
    assert_array(i, moved.argmax(1).astype(np.int32), dtype=np.int32)
    vj, ij = fg.jit(lambda x, i: lax.reduce((x, i), (-np.inf, 0), _argmax_first, (0, 2)))(x, idx)
    assert_array(vj, np.asarray(v))
    assert_array(ij, np.asarray(i))


def test_reduce_keeps_the_order_of_a_noncommutative_computation():
    """2x2 integer matrix products (associative, not commutative) as four operands: the
    result is the ordered product, as a sequential fold gives."""

    def matmul(a, b):
        a00, a01, a10, a11 = a
        b00, b01, b10, b11 = b
        return (
            a00 * b00 + a01 * b10,
            a00 * b01 + a01 * b11,
            a10 * b00 + a11 * b10,
            a10 * b01 + a11 * b11,
        )

    rng = np.random.default_rng(2)
    for n in (0, 1, 2, 5, 7, 8, 13):
        m = rng.integers(-2, 3, size=(n, 3, 2, 2)).astype(np.int32)
        ops = tuple(m[..., i, j] for i in range(2) for j in range(2))
        out = lax.reduce(ops, (1, 0, 0, 1), matmul, (0,))
        expected = np.stack([np.eye(2, dtype=np.int64)] * 3)
        for k in range(n):
            expected = expected @ m[k].astype(np.int64)
        np.testing.assert_array_equal(
            np.stack([np.asarray(o) for o in out], -1), expected.reshape(3, 4)
        )
        assert all(o.dtype == np.int32 for o in out)


def test_reduce_empty_axes_and_no_dimensions():
    s = lambda a, b: (a[0] + b[0], a[1] * b[1])  # noqa: E731
    x, y = np.ones((0, 3), np.float32), np.ones((0, 3), np.int32)
    a, b = lax.reduce((x, y), (np.float32(1.5), np.int32(2)), s, (0,))
    assert_array(a, np.full(3, 1.5, np.float32), dtype=np.float32)
    assert_array(b, np.full(3, 2, np.int32), dtype=np.int32)
    a, b = lax.reduce((x, y), (np.float32(1.5), np.int32(2)), s, (0, 1))
    assert_array(a, np.float32(1.5), dtype=np.float32)
    assert_array(b, np.int32(2), dtype=np.int32)
    a, b = fg.jit(lambda x, y: lax.reduce((x, y), (np.float32(0), np.int32(1)), s, (0,)))(x, y)
    assert_array(a, np.zeros(3, np.float32))
    assert_array(b, np.ones(3, np.int32))
    # empty result shape, nonempty reduced axis
    a, b = lax.reduce((np.ones((4, 0), np.float32), np.ones((4, 0), np.int32)), (0.0, 1), s, (0,))
    assert a.shape == b.shape == (0,)
    # no dimensions: the operands themselves
    z = np.arange(6, dtype=np.float32).reshape(2, 3)
    a, b = lax.reduce((z, z.astype(np.int32)), (np.float32(0), np.int32(1)), s, ())
    assert_array(a, z)
    assert_array(b, z.astype(np.int32))


def test_reduce_init_values_that_are_not_identities_are_combined_once():
    """XLA leaves this undefined; JAX 0.10.2 (CPU) combines the init values once with a
    reduction of two or more elements, not at all with one element (XLA rewrites that reduce
    as a reshape), and gives them for none. fungrad does the same."""
    s = lambda a, b: (a[0] + b[0], a[1] + b[1])  # noqa: E731
    for n, expected in [(0, (1, 2)), (1, (1, 1)), (3, (4, 5)), (8, (9, 10)), (1000, (1001, 1002))]:
        x = np.ones(n, np.float32)
        a, b = lax.reduce((x, x), (1.0, 2.0), s, (0,))
        assert_array(a, np.float32(expected[0]))
        assert_array(b, np.float32(expected[1]))


def test_reduce_pytrees_dtypes_and_weak_types():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.ones((2, 3), np.float32)
    # dict operands: the computation's dict comes back
    out = lax.reduce(
        {"u": x, "v": y},
        {"u": 0.0, "v": 1.0},
        lambda a, b: {"u": a["u"] + b["u"], "v": a["v"] * b["v"]},
        (1,),
    )
    assert set(out) == {"u", "v"}
    assert_array(out["u"], x.sum(1))
    assert_array(out["v"], y.prod(1))
    # lists in; the result has the structure the computation returns, as in JAX
    out = lax.reduce([x, y], [0.0, 0.0], lambda a, b: [a[0] + b[0], a[1] + b[1]], (1,))
    assert isinstance(out, list)
    out = lax.reduce([x, y], [0.0, 0.0], lambda a, b: (a[0] + b[0], a[1] + b[1]), (1,))
    assert isinstance(out, tuple)
    # bool and float operands
    flags = np.array([[True, False, False], [False, False, False]])
    any_, total = lax.reduce(
        (flags, x), (False, 0.0), lambda a, b: (a[0] | b[0], a[1] + b[1]), (1,)
    )
    assert_array(any_, np.array([True, False]), dtype=np.bool_)
    assert_array(total, x.sum(1), dtype=np.float32)
    # weakly typed only where operand and init value both are (JAX's rule)
    a, b = lax.reduce((1.0, np.float32(2)), (0.0, 0.0), _sum3, ())
    assert a.weak_type and not b.weak_type
    a, b = lax.reduce((x, y), (0.0, 0.0), _sum3, (0,))
    assert not a.weak_type and not b.weak_type
    # a constant output leaf is broadcast
    a, c = lax.reduce((x, y), (0.0, 0.0), lambda p, q: (p[0] + q[0], 1.0), (1,))
    assert_array(c, np.ones(2, np.float32))


def test_reduce_computation_sees_scalars():
    """The computation is applied to pairs of scalars (vmapped), as XLA's reducers: numpy-style
    functions, reductions of a scalar and control flow keep their scalar meaning."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(4, 7)).astype(np.float32)
    y = rng.integers(-9, 9, size=(4, 7)).astype(np.int32)

    def comp(a, b):
        big = fnp.maximum(a[0], b[0]) + fnp.sum(b[0]) * 0  # the sum of a scalar is itself
        small = lax.cond(a[1] < b[1], lambda: a[1], lambda: b[1])
        return big, small

    big, small = lax.reduce((x, y), (-np.inf, np.iinfo(np.int32).max), comp, (1,))
    assert_array(big, x.max(1), dtype=np.float32)
    assert_array(small, y.min(1), dtype=np.int32)
    big, small = fg.jit(
        lambda x, y: lax.reduce((x, y), (-np.inf, np.iinfo(np.int32).max), comp, (0, 1))
    )(x, y)
    assert_array(big, x.max(), dtype=np.float32)
    assert_array(small, y.min(), dtype=np.int32)


def test_reduce_under_vmap_matches_a_loop():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 3, size=(4, 5, 6)).astype(np.float32)
    idx = np.broadcast_to(np.arange(6, dtype=np.int32), x.shape)

    def argmax_rows(x, idx):
        return lax.reduce((x, idx), (-np.inf, 0), _argmax_first, (1,))

    for in_axes in (0, 1, 2):
        xs, ids = np.moveaxis(x, in_axes, 0), np.moveaxis(idx, in_axes, 0)
        v, i = fg.vmap(argmax_rows, in_axes=in_axes)(x, idx)
        for k in range(xs.shape[0]):
            vk, ik = argmax_rows(xs[k], ids[k])
            assert_array(v[k], np.asarray(vk))
            assert_array(i[k], np.asarray(ik))
    # a batched operand with an unbatched one, and a vmapped sum pair
    v, i = fg.vmap(argmax_rows, in_axes=(0, None))(x, idx[0])
    assert_array(i, x.argmax(2).astype(np.int32))
    a, b = fg.vmap(lambda p, q: lax.reduce((p, q), (0.0, 0.0), _sum3, (0,)))(x, x * 2)
    assert_array(a, x.sum(1))
    assert_array(b, 2 * x.sum(1))


def test_reduce_grad_of_a_variadic_sum_by_finite_differences(x64):
    rng = np.random.default_rng(4)
    a0 = rng.normal(size=(3, 4))
    b0 = rng.normal(size=(3, 4))

    def comp(p, q):
        return p[0] + q[0], p[1] * q[1]

    def loss(a, b):
        s, prod = lax.reduce((a, b), (0.0, 1.0), comp, (1,))
        return fnp.sum(fnp.sin(s) * prod) + fnp.sum(s**2)

    ga, gb = fg.grad(loss, argnums=(0, 1))(a0, b0)
    ja, jb = fg.jit(fg.grad(loss, argnums=(0, 1)))(a0, b0)
    eps = 1e-6
    for arg, g, jg in ((0, ga, ja), (1, gb, jb)):
        fd = np.zeros((3, 4))
        for k in np.ndindex(3, 4):
            args = [a0.copy(), b0.copy()]
            args[arg][k] += eps
            up = float(loss(*args))
            args[arg][k] -= 2 * eps
            fd[k] = (up - float(loss(*args))) / (2 * eps)
        assert_array(g, fd, dtype=np.float64, rtol=1e-6, atol=1e-7)
        assert_array(jg, fd, dtype=np.float64, rtol=1e-6, atol=1e-7)


def test_reduce_grad_of_a_variadic_argmax_value():
    x = np.array([[1.0, 4.0, 4.0, 2.0], [3.0, 0.0, -1.0, 3.0]], np.float32)
    idx = lax.broadcasted_iota(np.int32, x.shape, 1)
    g = fg.grad(lambda x: fnp.sum(lax.reduce((x, idx), (-np.inf, 0), _argmax_first, (1,))[0]))
    expected = np.array([[0, 1, 0, 0], [1, 0, 0, 0]], np.float32)  # the first maximum
    assert_array(g(x), expected)


def test_reduce_variadic_errors():
    x, y = np.ones((2, 3), np.float32), np.ones((2, 3), np.int32)
    s = lambda a, b: (a[0] + b[0], a[1] + b[1])  # noqa: E731
    with pytest.raises(ValueError, match="lax.reduce: operands and init_values must have"):
        lax.reduce((x, y), (0.0, 0, 0), s, (0,))
    with pytest.raises(ValueError, match="lax.reduce: operands and init_values must have"):
        lax.reduce((x, y), 0.0, s, (0,))
    with pytest.raises(ValueError, match=r"one shape, got \[\(2, 3\), \(3, 2\)\]"):
        lax.reduce((x, y.T), (0.0, 0), s, (0,))
    with pytest.raises(TypeError, match=r"init value must have its operand's dtype.*f16\[2,3\]"):
        lax.reduce((x.astype(np.float16), y), (0.0, 0), s, (0,))
    with pytest.raises(
        ValueError, match=r"init_values must be scalars, got shapes \[\(3,\), \(\)\]"
    ):
        lax.reduce((x, y), (np.zeros(3, np.float32), 0), s, (0,))
    with pytest.raises(TypeError, match=r"one array per operand \(2, .* got 1"):
        lax.reduce((x, y), (0.0, 0), lambda a, b: a[0] + b[0], (0,))
    with pytest.raises(TypeError, match=r"one array per operand \(2, .* got 3"):
        lax.reduce((x, y), (0.0, 0), lambda a, b: (a[0], a[1], b[0]), (0,))
    with pytest.raises(TypeError, match=r"operands' dtypes \['float32', 'int32'\], got"):
        lax.reduce((x, y), (0.0, 0), lambda a, b: (a[0] + b[0], a[0] + b[0]), (0,))
    with pytest.raises(ValueError, match=r"scalars into scalars.*\[\(3,\), \(\)\]"):
        lax.reduce((x, y), (0.0, 0), lambda a, b: (a[0] + np.ones(3, np.float32), a[1]), (0,))
    with pytest.raises(TypeError, match="computation lax.add combines two arrays"):
        lax.reduce((x, x), (0.0, 0.0), lax.add, (0,))
    with pytest.raises(ValueError, match="lax.reduce: axes"):
        lax.reduce((x, y), (0.0, 0), s, (2,))
    with pytest.raises(ValueError, match="lax.reduce: no operands"):
        lax.reduce((), (), lambda a, b: (), (0,))


def test_reduce_single_operand_path_is_unchanged():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert "reduce_sum[axes=(0,)]" in str(
        fg.make_jaxpr(lambda x: lax.reduce(x, 0.0, lax.add, (0,)))(x)
    )
    out = lax.reduce([x], [0.0], lax.add, (1,))
    assert isinstance(out, fg.Array)
    assert_array(out, x.sum(1))
    # a custom computation on one operand takes the tree, as JAX's generic reduce
    assert_array(lax.reduce(x, 0.0, lambda a, b: fnp.maximum(a, b) + 0 * b, (1,)), x.max(1))
