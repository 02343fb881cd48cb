"""Float sums accumulate with an error bound that does not grow with their length (issue 15,
item 1): eager and jitted sums, means and column sums against float64 numpy, the exact
repros of the issue at moderate sizes, reductions of broadcasts rewritten away by the
simplifier, and cumulative sums against a float64 cumulative sum."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax

EPS32 = float(np.finfo(np.float32).eps)


def _bound(n: int) -> float:
    """Relative error allowed to a float32 sum of ``n`` terms, in units of eps * sum(|x|):
    logarithmic in ``n`` (a serial sum's worst case is ``n``)."""
    return 8 + 2 * math.log2(max(n, 2))


def _assert_sum_close(got, x, axis, keepdims=False, what="sum"):
    x64 = np.asarray(x, np.float64)
    want = np.sum(x64, axis=axis, keepdims=keepdims)
    scale = np.sum(np.abs(x64), axis=axis, keepdims=keepdims)
    n = x64.size // max(np.size(want), 1)
    err = np.abs(np.asarray(got, np.float64) - want)
    limit = _bound(n) * EPS32 * scale + 1e-30
    worst = float(np.max(err / limit)) if err.size else 0.0
    assert worst <= 1, (
        f"{what} over axis {axis} of {x64.shape}: error {np.max(err):.3g} is "
        f"{worst:.3g} times the bound {_bound(n):.1f} eps sum|x|"
    )


# shapes that make every loop nest of a reduction: long and short axes (beyond the
# renderer's block of 1024 and the column sum's block of 32), reduced inner or outer
_SIDES = [1, 3, 17, 40, 100, 1100, 2500]


@st.composite
def _sum_cases(draw):
    ndim = draw(st.integers(1, 3))
    shape = []
    for _ in range(ndim):
        rest = 200_000 // max(math.prod(shape), 1)
        shape.append(draw(st.sampled_from([s for s in _SIDES if s <= rest] or [1])))
    axes = tuple(sorted(draw(st.sets(st.integers(0, ndim - 1), min_size=1))))
    keepdims = draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1))
    return tuple(shape), axes, keepdims, seed


def _mixed(shape, seed):
    """float32 data of mixed signs and magnitudes (1e-3 .. 1e3), mostly positive."""
    rng = np.random.default_rng(seed)
    mag = 10.0 ** rng.uniform(-3, 3, size=shape)
    sign = np.where(rng.random(shape) < 0.8, 1.0, -1.0)
    return (sign * mag).astype(np.float32)


@given(_sum_cases())
def test_issue15_sums_have_bounded_error(case):
    shape, axes, keepdims, seed = case
    x = _mixed(shape, seed)
    f = fg.jit(lambda a: fnp.sum(a, axis=axes, keepdims=keepdims))
    _assert_sum_close(f(x), x, axes, keepdims, "jit sum")
    _assert_sum_close(fnp.sum(x, axis=axes, keepdims=keepdims), x, axes, keepdims, "eager sum")


def _ones_by_iota(shape):
    """Ones computed inside the program (not a broadcast, which the simplifier folds): the
    sum reads no memory, so 2^25 of them cost no RAM."""
    i = lax.broadcasted_iota(np.float32, shape, 0)
    return lax.cos(i * 0.0)


def test_issue15_sum_of_2_25_ones_over_two_axes():
    # one accumulator through both loops stopped growing at 2^24 (the issue: 29175070
    # for 3e7 ones)
    shape = (2**13, 2**12)
    got = fg.jit(lambda: fnp.sum(_ones_by_iota(shape)))()
    assert float(got) == 2.0**25
    got = fg.jit(lambda: fnp.mean(_ones_by_iota(shape)))()
    assert float(got) == 1.0


def test_issue15_column_sum_blocked():
    # a sum over the leading axis accumulates into the output row; serially, 2^24 in the
    # first row swallows every later 1 (4095 ulps off); in blocks, only the first block's
    from fungrad.lax.reduce import COLUMN_SUM_BLOCK

    x = np.ones((4096, 8), np.float32)
    x[0] = 2.0**24
    want = 2.0**24 + 4095
    for got in (fg.jit(lambda a: fnp.sum(a, axis=0))(x), fnp.sum(x, axis=0)):
        err = np.abs(np.asarray(got, np.float64) - want)
        assert np.all(err <= COLUMN_SUM_BLOCK), err
    x3 = _mixed((300, 50, 16), 1)
    _assert_sum_close(
        fg.jit(lambda a: fnp.sum(a, axis=(0, 1)))(x3), x3, (0, 1), what="column sum over two axes"
    )


def test_issue15_mean_of_square_of_4m():
    # the issue: off by 3.7e-4 (a serial accumulator over 4M elements)
    x = np.random.default_rng(0).random(2**22, dtype=np.float32)
    got = float(fg.jit(lambda a: fnp.mean(a * a))(x))
    want = float(np.mean(x.astype(np.float64) ** 2))
    assert abs(got - want) <= 4 * EPS32 * want


@pytest.mark.parametrize("fn", ["var", "std", "norm", "logsumexp", "softmax"])
def test_issue15_sum_based_functions_are_accurate(fn):
    x = _mixed((3, 200_000), 2)
    x64 = x.astype(np.float64)
    f = {
        "var": lambda a: fnp.var(a, axis=1),
        "std": lambda a: fnp.std(a, axis=1),
        "norm": lambda a: fnp.linalg.norm(a, axis=1),
        "logsumexp": lambda a: fg.nn.logsumexp(a / 1000, axis=1),
        "softmax": lambda a: fg.nn.softmax(a / 1000, axis=1)[:, :5],
    }[fn]
    m = x64.mean(1, keepdims=True)
    want = {
        "var": ((x64 - m) ** 2).mean(1),
        "std": np.sqrt(((x64 - m) ** 2).mean(1)),
        "norm": np.sqrt((x64**2).sum(1)),
        "logsumexp": np.log(np.exp(x64 / 1000).sum(1)),
        "softmax": (np.exp(x64 / 1000) / np.exp(x64 / 1000).sum(1, keepdims=True))[:, :5],
    }[fn]
    np.testing.assert_allclose(np.asarray(fg.jit(f)(x), np.float64), want, rtol=2e-6)
    np.testing.assert_allclose(np.asarray(f(x), np.float64), want, rtol=2e-6)


def _optimized(f, *args):
    from fungrad.ir import passes

    return passes.optimize(fg.make_jaxpr(f)(*args))


def _reduced_sizes(closed):
    return [
        e.invars[0].aval.size for e in closed.jaxpr.eqns if e.primitive.name.startswith("reduce_")
    ]


def test_issue15_sum_of_broadcast_constant_is_rewritten():
    # the issue: 9-19 s (9e8 serial adds) for a sum of fnp.ones((30000, 30000))
    f = lambda: fnp.sum(fnp.ones((30000, 30000)))  # noqa: E731
    assert _reduced_sizes(_optimized(f)) == []
    assert float(fg.jit(f)()) == 9e8
    assert float(fg.jit(lambda: fnp.sum(fnp.ones(10**8)))()) == 1e8


@pytest.mark.parametrize("name", ["sum", "max", "min", "any", "all"])
@pytest.mark.parametrize("axes", [(0,), (1,), (0, 1), (1, 2), (0, 2), (0, 1, 2, 3)])
def test_issue15_reduction_of_broadcast_reduces_the_operand(name, axes):
    x = _mixed((1, 5, 3), 3)
    if name in ("any", "all"):
        x = x > 0
    f = {"sum": fnp.sum, "max": fnp.max, "min": fnp.min, "any": fnp.any, "all": fnp.all}[name]
    g = lambda a: f(fnp.broadcast_to(a[:, :, None, :], (400, 5, 7, 3)), axis=axes)  # noqa
    assert max(_reduced_sizes(_optimized(g, x)), default=0) <= x.size
    want = {"sum": np.sum, "max": np.max, "min": np.min, "any": np.any, "all": np.all}[name](
        np.broadcast_to(
            (x.astype(np.float64) if name == "sum" else x)[:, :, None, :], (400, 5, 7, 3)
        ),
        axis=axes,
    )
    for got in (fg.jit(g)(x), g(x)):
        if name == "sum":  # the operand's sum times the count, each rounded once
            np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=4 * EPS32)
        else:
            np.testing.assert_array_equal(np.asarray(got), want)


def test_issue15_sum_of_broadcast_matches_jax_rounding():
    # JAX multiplies by the count converted to float32 first: 2^24 + 1 copies count 2^24
    x = np.array([1.0, 0.1, 3.0], np.float32)
    got = fg.jit(lambda a: fnp.sum(fnp.broadcast_to(a, (2**24 + 1, 3)), axis=0))(x)
    np.testing.assert_array_equal(np.asarray(got), x * np.float32(2**24))
    # integers wrap as repeated addition does
    got = fg.jit(lambda: fnp.sum(fnp.full((3, 10**9 // 3), 7, np.int32)))()
    assert int(got) == (7 * (10**9 // 3) * 3 + 2**31) % 2**32 - 2**31


def _cumsum_cases():
    rng = np.random.default_rng(5)
    big_first = np.ones(1001, np.float32)
    big_first[0] = 2.0**24  # a float32 running sum never grows past it (+1 rounds to even)
    return [
        (big_first, 0),
        (rng.random(50_000, dtype=np.float32), 0),
        (rng.random((300, 40), dtype=np.float32), 0),
        (rng.random((40, 3000), dtype=np.float32), 1),
    ]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("case", range(4))
def test_issue15_cumsum_within_ulps_of_float64(case, reverse):
    # the issue: a cumsum of 3e7 ones ended in 16777216 eager and jitted (3e7 in JAX)
    x, axis = _cumsum_cases()[case]
    x64 = np.flip(x, axis) if reverse else x
    want = np.cumsum(x64.astype(np.float64), axis=axis)
    want = np.flip(want, axis) if reverse else want
    ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    f = lambda a: lax.cumsum(a, axis=axis, reverse=reverse)  # noqa: E731
    for got in (f(x), fg.jit(f)(x)):
        err = np.abs(np.asarray(got, np.float64) - want) / ulp
        assert float(err.max()) <= 1.0, float(err.max())
    if case == 0:
        assert float(fg.jit(f)(x)[0 if reverse else -1]) == 2.0**24 + 1000


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int16])
def test_issue15_cumlogsumexp_takes_integers(dtype):
    # JAX's shape rule takes integers and keeps the dtype; computed in float, truncated
    x = np.array([[1, 2, 3, 0], [5, 5, 5, 100]], dtype)
    for reverse in (False, True):
        xf = np.flip(x, 1) if reverse else x
        want = np.logaddexp.accumulate(xf.astype(np.float64), axis=1)
        want = np.trunc(np.flip(want, 1) if reverse else want).astype(dtype)
        f = lambda a, reverse=reverse: lax.cumlogsumexp(a, axis=1, reverse=reverse)  # noqa
        for got in (f(x), fg.jit(f)(x)):
            assert got.dtype == dtype
            np.testing.assert_array_equal(np.asarray(got), want)
    with pytest.raises(TypeError, match="cumlogsumexp"):
        lax.cumlogsumexp(np.array([True, False]))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_issue15_cumsum_of_small_floats_compiles(dtype):
    # a float64 carry for float16 needed double -> half, a runtime function the JIT lacks
    # (the call jumped to null: a segfault); float16 accumulates in float32 as the impl does
    x = np.array([1, 2, 3, 2048, 1, 1], dtype)
    np.testing.assert_array_equal(np.asarray(fg.jit(lax.cumsum)(x)), np.asarray(lax.cumsum(x)))


def test_issue15_float64_to_float16_rounds_once(x64):
    # fptrunc double -> half has no x86 instruction; it goes through float rounded to odd
    rng = np.random.default_rng(7)
    h = rng.integers(0, 2**16, 20000).astype(np.uint16).view(np.float16)
    h = h[np.isfinite(h) & (np.abs(h) < np.float16(65504))]
    up = np.nextafter(h, np.float16(np.inf)).astype(np.float64)
    ties = (h.astype(np.float64) + up) / 2  # exact midpoints: double rounding would show here
    x = np.concatenate(
        [
            ties,
            np.nextafter(ties, np.inf),
            np.nextafter(ties, -np.inf),
            [np.inf, -np.inf, 0.0, -0.0, 1e300, 1e-300, 65520.0, 2.0**-25],
        ]
    )
    got = np.asarray(fg.jit(lambda a: a.astype(np.float16))(x))
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
