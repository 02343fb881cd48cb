"""jvp, transpose and batching rules of the reductions (fungrad/lax/reduce.py and
fungrad/lax/windowed_reductions.py).

Oracles: the linear primitives (reduce_sum, cumsum, reduce_window_sum) against their Jacobian
matrix built by evaluating the primitive eagerly on unit vectors (jvp = J t, vjp = J^T ct);
the others against finite differences (``check_grads``, float64, second order, both modes, on
inputs with distinct values so no max/min is tied) and, where the derivative is a convention
(ties, zeros), against explicit numpy formulas and the values JAX gives. vmap is checked against
a Python loop over the examples.
"""

from __future__ import annotations

import importlib
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import core, lax
from fungrad.lax import windowed_reductions as windowed
from fungrad.scipy.special import logsumexp
from fungrad.testing import check_grads
from fungrad.testing.gradcheck import assert_transforms_commute
from fungrad.transforms.jvp import jvp_rules, no_jvp
from fungrad.transforms.transpose import transpose_rules
from fungrad.transforms.vmap import batch_rules, vmap_flat

# NB: ``fungrad.lax.reduce`` is the lax.reduce function; the module is reached by its full name.
reduce = importlib.import_module("fungrad.lax.reduce")

LINEAR = {
    reduce.reduce_sum_p,
    reduce.cumsum_p,
    windowed.reduce_window_sum_p,
    # linear in their first operand (tangents, cotangents); tests/test_select_and_scatter.py
    windowed.select_and_gather_add_p,
    windowed.select_and_scatter_add_p,
}

few = settings(max_examples=25)


def test_registry_every_primitive_has_its_rules():
    prims = {
        v for m in (reduce, windowed) for v in vars(m).values() if isinstance(v, core.Primitive)
    }
    assert {p.name for p in prims} == {
        "reduce_sum",
        "reduce_prod",
        "reduce_max",
        "reduce_min",
        "reduce_and",
        "reduce_or",
        "reduce_xor",
        "argmax",
        "argmin",
        "cumsum",
        "cumprod",
        "cummax",
        "cummin",
        "cumlogsumexp",
        "reduce_window_sum",
        "reduce_window_max",
        "reduce_window_min",
        "select_and_gather_add",
        "select_and_scatter_add",
    }
    for p in prims:
        assert p in jvp_rules or p in no_jvp, f"{p} has no jvp rule"
        assert p in batch_rules, f"{p} has no batch rule"
        assert (p in transpose_rules) == (p in LINEAR), f"{p}: transpose rule mismatch"


# -- linear primitives: the Jacobian oracle --------------------------------------------------------


def _jacobian(f, x):
    """The matrix of the linear ``f`` at float64 ``x`` (eager evaluation: impls only)."""
    out_size = np.asarray(f(x)).size
    jac = np.zeros((out_size, x.size))
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = 1.0
        jac[:, k] = np.ravel(np.asarray(f(e.reshape(x.shape))))
    return jac


def check_linear(f, x, seed=0):
    """jvp == J t, vjp == J^T ct (with the operand's exact shape and dtype), linearize too."""
    rng = np.random.default_rng(seed)
    x = np.asarray(x, np.float64)
    jac = _jacobian(f, x)
    out = np.asarray(f(x))
    t = rng.standard_normal(x.shape)
    primal, t_out = fg.jvp(f, (x,), (t,))
    np.testing.assert_allclose(np.asarray(primal), out, rtol=1e-12, atol=1e-12)
    assert np.asarray(t_out).shape == out.shape and np.asarray(t_out).dtype == np.float64
    np.testing.assert_allclose(np.ravel(t_out), jac @ np.ravel(t), rtol=1e-10, atol=1e-12)
    ct = rng.standard_normal(out.shape)
    (x_ct,) = fg.vjp(f, x)[1](ct)
    assert np.asarray(x_ct).shape == x.shape and np.asarray(x_ct).dtype == np.float64
    np.testing.assert_allclose(np.ravel(x_ct), jac.T @ np.ravel(ct), rtol=1e-10, atol=1e-12)
    _, f_lin = fg.linearize(f, x)
    np.testing.assert_allclose(np.ravel(f_lin(t)), jac @ np.ravel(t), rtol=1e-10, atol=1e-12)


LINEAR_CASES = {
    "reduce_sum": (lambda x: lax.reduce_sum(x, (0, 2)), (2, 3, 2)),
    "reduce_sum_none": (lambda x: lax.reduce_sum(x, ()), (2, 3)),
    "reduce_sum_all": (lambda x: lax.reduce_sum(x, (0, 1)), (3, 2)),
    "cumsum": (lambda x: lax.cumsum(x, 1), (2, 4)),
    "cumsum_reverse": (lambda x: lax.cumsum(x, 0, reverse=True), (5, 2)),
    "reduce_window_sum": (
        lambda x: lax.reduce_window(x, 0.0, lax.add, (2, 3), (1, 2), "SAME"),
        (4, 5),
    ),
}


@pytest.mark.parametrize("name", sorted(LINEAR_CASES))
def test_linear_rules_match_jacobian(name, x64):
    f, shape = LINEAR_CASES[name]
    check_linear(f, np.random.default_rng(1).standard_normal(shape))
    check_grads(f, (np.random.default_rng(2).standard_normal(shape),), order=2)


@st.composite
def window_cases(draw, max_padding=2):
    """An operand shape and reduce_window parameters (strides, padding, dilations)."""
    ndim = draw(st.integers(1, 2))
    shape = tuple(draw(st.integers(1, 5)) for _ in range(ndim))
    ints = lambda lo, hi: tuple(draw(st.integers(lo, hi)) for _ in range(ndim))  # noqa: E731
    params = dict(
        window_dimensions=ints(1, 3),
        window_strides=ints(1, 3),
        padding=tuple(
            (draw(st.integers(-1, max_padding)), draw(st.integers(-1, max_padding)))
            for _ in range(ndim)
        ),
        base_dilation=ints(1, 2),
        window_dilation=ints(1, 2),
    )
    return shape, params


def _window_shape(shape, p):
    return windowed._reduce_window_shape(
        shape,
        p["window_dimensions"],
        p["window_strides"],
        p["padding"],
        p["base_dilation"],
        p["window_dilation"],
    )


def _valid_window_case(shape, p):
    padded = [
        windowed.dilate_dim(n, b) + lo + hi
        for n, b, (lo, hi) in zip(shape, p["base_dilation"], p["padding"])
    ]
    return min(padded) >= 0


@few
@given(window_cases())
def test_reduce_window_sum_rules_hypothesis(case):
    shape, p = case
    if not _valid_window_case(shape, p):
        return
    fg.config.update("enable_x64", True)
    try:
        check_linear(
            lambda x: windowed.reduce_window_sum_p.bind(x, **p),
            np.random.default_rng(3).standard_normal(shape),
        )
    finally:
        fg.config.update("enable_x64", False)


# -- windowed max/min: the first extreme element of each window gets the tangent -------------------


def _window_oracle(x, t, p, better):
    """(output, tangent) of a windowed max/min by a loop over windows and window elements,
    the tangent taken at the first best element (padding and holes hold the identity, t 0)."""
    out_shape = _window_shape(x.shape, p)
    ident = -np.inf if better is np.greater else np.inf
    out, tan = np.full(out_shape, ident), np.zeros(out_shape)
    for o in itertools.product(*map(range, out_shape)):
        best, best_t = None, 0.0
        for k in itertools.product(*map(range, p["window_dimensions"])):
            val, tv = ident, 0.0
            pos = [
                oi * s + ki * wd - lo
                for oi, s, ki, wd, (lo, _) in zip(
                    o, p["window_strides"], k, p["window_dilation"], p["padding"]
                )
            ]
            if all(
                q % b == 0 and 0 <= q // b < n for q, b, n in zip(pos, p["base_dilation"], x.shape)
            ):
                idx = tuple(q // b for q, b in zip(pos, p["base_dilation"]))
                val, tv = x[idx], t[idx]
            if best is None or better(val, best):
                best, best_t = val, tv
        out[o], tan[o] = best, best_t
    return out, tan


@few
@given(window_cases(), st.sampled_from(["max", "min"]))
def test_reduce_window_max_min_jvp_hypothesis(case, kind):
    shape, p = case
    if not _valid_window_case(shape, p):
        return
    prim = windowed.reduce_window_max_p if kind == "max" else windowed.reduce_window_min_p
    better = np.greater if kind == "max" else np.less
    rng = np.random.default_rng(4)
    x = rng.permutation(np.arange(np.prod(shape), dtype=np.float32)).reshape(shape)
    x[tuple(0 for _ in shape)] = x.flat[-1]  # a tie: the first one wins
    t = rng.standard_normal(shape).astype(np.float32)
    f = lambda x: prim.bind(x, **p)  # noqa: E731
    out, tan = fg.jvp(f, (x,), (t,))
    want_out, want_tan = _window_oracle(x, t, p, better)
    np.testing.assert_array_equal(np.asarray(out), want_out)
    np.testing.assert_allclose(np.asarray(tan), want_tan, rtol=1e-6)
    assert np.asarray(tan).dtype == np.float32
    # reverse mode: the transpose of the tangent map (<vjp(ct), t> = <ct, jvp(t)>)
    ct = rng.standard_normal(want_out.shape).astype(np.float32)
    (x_ct,) = fg.vjp(f, x)[1](ct)
    assert x_ct.shape == x.shape and x_ct.dtype == np.float32
    np.testing.assert_allclose(
        np.sum(np.asarray(x_ct, np.float64) * t),
        np.sum(ct * want_tan, dtype=np.float64),
        rtol=1e-5,
        atol=1e-5,
    )


def test_reduce_window_max_ties_pick_the_first_like_jax():
    # jax.jvp of a (1, 2) max window over [[1, 1, 0, 2]] with tangents [[1, 10, 100, 1000]]
    y = np.array([[1.0, 1.0, 0.0, 2.0]], np.float32)
    f = lambda y: lax.reduce_window(y, -np.inf, lax.max, (1, 2), (1, 1), "VALID")  # noqa: E731
    _, t = fg.jvp(f, (y,), (np.array([[1.0, 10.0, 100.0, 1000.0]], np.float32),))
    np.testing.assert_array_equal(np.asarray(t), [[1.0, 10.0, 1000.0]])
    np.testing.assert_array_equal(
        np.asarray(fg.grad(lambda y: fnp.sum(f(y)))(y)), [[1.0, 1.0, 0.0, 1.0]]
    )


def test_max_pool_gradient(x64):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 4, 6))

    def pool(x):
        return lax.reduce_window(x, -np.inf, lax.max, (1, 2, 3), (1, 2, 3), "VALID")

    g = np.asarray(fg.grad(lambda x: fnp.sum(pool(x) ** 2))(x))
    blocks = x.reshape(2, 2, 2, 2, 3).transpose(0, 1, 3, 2, 4).reshape(2, 2, 2, 6)
    want = np.zeros_like(blocks)
    am = blocks.argmax(-1)
    np.put_along_axis(want, am[..., None], 2 * np.take_along_axis(blocks, am[..., None], -1), -1)
    want = want.reshape(2, 2, 2, 2, 3).transpose(0, 1, 3, 2, 4).reshape(2, 4, 6)
    np.testing.assert_allclose(g, want, rtol=1e-12)
    check_grads(lambda x: pool(x) ** 2, (x,), order=2)
    check_grads(
        lambda x: lax.reduce_window(x, np.inf, lax.min, (2, 2), (1, 2), ((0, 1), (1, 0))),
        (x[0],),
        order=2,
    )


# -- finite differences on smooth points -----------------------------------------------------------


def _distinct(shape, seed):
    """Values far apart (no ties, no near-ties), shuffled, scaled to a few units."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.5 + rng.uniform(0, 0.1, n) - n / 4).reshape(shape)


SMOOTH = {
    "reduce_prod": (lambda x: lax.reduce_prod(x, (1,)), (3, 4)),
    "reduce_prod_2axes": (lambda x: lax.reduce_prod(x, (0, 2)), (2, 2, 3)),
    "reduce_prod_empty_axes": (lambda x: lax.reduce_prod(x, ()), (3,)),
    "reduce_max": (lambda x: lax.reduce_max(x, (0,)), (4, 3)),
    "reduce_min": (lambda x: lax.reduce_min(x, (1, 2)), (2, 3, 2)),
    "cumprod": (lambda x: lax.cumprod(x, 1), (2, 5)),
    "cumprod_reverse": (lambda x: lax.cumprod(x, 0, reverse=True), (6, 2)),
    "cummax": (lambda x: lax.cummax(x, 0), (7, 2)),
    "cummin_reverse": (lambda x: lax.cummin(x, 1, reverse=True), (2, 6)),
    "cumlogsumexp": (lambda x: lax.cumlogsumexp(x, 1), (2, 5)),
    "cumlogsumexp_reverse": (lambda x: lax.cumlogsumexp(x, 0, reverse=True), (5, 2)),
    "reduce_window_max": (
        lambda x: lax.reduce_window(x, -np.inf, lax.max, (2, 2), (1, 1), "VALID"),
        (3, 4),
    ),
}


@pytest.mark.parametrize("name", sorted(SMOOTH))
def test_check_grads_second_order(name, x64):
    f, shape = SMOOTH[name]
    x = _distinct(shape, 6)
    if name.startswith(("reduce_prod", "cumprod")):
        x = x / np.max(np.abs(x)) * 2  # keep products O(1)
    check_grads(f, (x,), order=2, modes=("fwd", "rev"))


def test_reduce_prod_with_zeros_matches_product_of_the_others(x64):
    # JAX: grad(prod)([2, 0, 3]) = [0, 6, 0], grad(prod)([2, 0, 0]) = 0 (no division by x)
    for x, want in (
        ([2.0, 0.0, 3.0], [0.0, 6.0, 0.0]),
        ([2.0, 0.0, 0.0], [0.0, 0.0, 0.0]),
        ([0.0, 5.0], [5.0, 0.0]),
    ):
        g = fg.grad(lambda x: lax.reduce_prod(x, (0,)))(np.array(x))
        np.testing.assert_array_equal(np.asarray(g), want)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 5))
    x[0, 1] = x[2, 0] = x[2, 3] = 0.0
    jac = np.asarray(fg.jacrev(lambda x: lax.reduce_prod(x, (1,)))(x))
    want = np.zeros((3, 3, 5))
    for i, j in itertools.product(range(3), range(5)):
        want[i, i, j] = np.prod(np.delete(x[i], j))
    np.testing.assert_allclose(jac, want, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(
        np.asarray(fg.jacfwd(lambda x: lax.reduce_prod(x, (1,)))(x)), want, rtol=1e-12, atol=1e-15
    )
    # second derivative: d2 prod / dxi dxj = product of all but i and j
    hess = np.asarray(fg.hessian(lambda x: lax.reduce_prod(x, (0,)))(x[2]))
    want_h = np.array(
        [[0.0 if i == j else np.prod(np.delete(x[2], [i, j])) for j in range(5)] for i in range(5)]
    )
    np.testing.assert_allclose(hess, want_h, rtol=1e-12, atol=1e-15)


def test_cumprod_with_zeros_matches_jax(x64):
    # jax.jacfwd(lax.cumprod)([2, 0, 3, 0])
    jac = fg.jacfwd(lax.cumprod)(np.array([2.0, 0.0, 3.0, 0.0]))
    np.testing.assert_array_equal(
        np.asarray(jac), [[1, 0, 0, 0], [0, 2, 0, 0], [0, 6, 0, 0], [0, 0, 0, 0]]
    )
    jac = fg.jacrev(lambda x: lax.cumprod(x, reverse=True))(np.array([2.0, 0.0, 3.0]))
    np.testing.assert_array_equal(np.asarray(jac), [[0, 6, 0], [0, 3, 0], [0, 0, 1]])


def test_max_min_ties_share_the_tangent_like_jax():
    # jax: grad(jnp.max)([1, 2, 2]) = [0, .5, .5]
    g = fg.grad(lambda x: lax.reduce_max(x, (0,)))(np.array([1.0, 2.0, 2.0], np.float32))
    np.testing.assert_array_equal(np.asarray(g), [0.0, 0.5, 0.5])
    g = fg.grad(lambda x: fnp.sum(lax.reduce_min(x, (1,))))(
        np.array([[3.0, 3.0, 3.0], [1.0, 0.0, 2.0]], np.float32)
    )
    np.testing.assert_allclose(np.asarray(g), [[1 / 3] * 3, [0.0, 1.0, 0.0]])
    # jax.jvp(lax.cummax, [1, 3, 3, 2, 5, 5], arange(6)) and its reverse / cummin of -x
    x, t = np.array([1.0, 3.0, 3.0, 2.0, 5.0, 5.0], np.float32), np.arange(6, dtype=np.float32)
    for f, want in (
        (lax.cummax, [0.0, 1.0, 1.5, 1.5, 4.0, 4.5]),
        (lambda x: lax.cummax(x, reverse=True), [4.5] * 5 + [5.0]),
        (lambda x: lax.cummin(-x), [0.0, -1.0, -1.5, -1.5, -4.0, -4.5]),
    ):
        _, tan = fg.jvp(f, (x,), (t,))
        np.testing.assert_allclose(np.asarray(tan), want, rtol=1e-6)
    # NB: JAX's scan gives 3 ties tree-shaped weights; fungrad averages them like reduce_max.
    _, tan = fg.jvp(lax.cummax, (np.array([2.0, 2.0, 2.0], np.float32),), (t[:3] + 1,))
    np.testing.assert_allclose(np.asarray(tan), [1.0, 1.5, 2.0], rtol=1e-6)


def test_cumlogsumexp_matches_jax_and_handles_leading_neg_inf():
    x, t = np.array([1.0, 3.0, 3.0, 2.0, 5.0, 5.0], np.float32), np.arange(6, dtype=np.float32)
    _, tan = fg.jvp(lax.cumlogsumexp, (x,), (t,))
    np.testing.assert_allclose(
        np.asarray(tan), [0.0, 0.880797, 1.4049317, 1.6393473, 3.4026425, 4.0856323], rtol=1e-5
    )
    # NB: JAX gives [0, nan, nan] here; fungrad's weights exp(x - ans) are 0 while ans = -inf.
    z = np.array([-np.inf, -np.inf, 1.0], np.float32)
    _, tan = fg.jvp(lax.cumlogsumexp, (z,), (t[:3],))
    np.testing.assert_allclose(np.asarray(tan), [0.0, 0.0, 2.0])


def test_cumulative_tangents_match_explicit_formulas(x64):
    rng = np.random.default_rng(8)
    x, t = rng.standard_normal((3, 6)), rng.standard_normal((3, 6))
    _, tan = fg.jvp(lambda x: lax.cumlogsumexp(x, 1), (x,), (t,))
    y = np.logaddexp.accumulate(x, 1)
    want = np.array(
        [
            [np.sum(t[r, : i + 1] * np.exp(x[r, : i + 1] - y[r, i])) for i in range(6)]
            for r in range(3)
        ]
    )
    np.testing.assert_allclose(np.asarray(tan), want, rtol=1e-12)
    _, tan = fg.jvp(lambda x: lax.cumprod(x, 1, reverse=True), (x,), (t,))
    want = np.array(
        [
            [
                sum(t[r, j] * np.prod(np.delete(x[r, i:], j - i)) for j in range(i, 6))
                for i in range(6)
            ]
            for r in range(3)
        ]
    )
    np.testing.assert_allclose(np.asarray(tan), want, rtol=1e-10)


def test_integer_valued_reductions_have_zero_tangents(x64):
    x = _distinct((3, 4), 9)
    for f in (
        lambda x: lax.argmax(x, 1, np.int32),
        lambda x: lax.argmin(x, 0, np.int32),
        lambda x: lax.reduce_or(x > 0, (1,)),
        lambda x: lax.reduce_and(x > 0, (0,)),
        lambda x: lax.reduce_xor(lax.convert_element_type(x, np.int32), (1,)),
    ):
        out, tan = fg.jvp(f, (x,), (np.ones_like(x),))
        assert np.asarray(tan).shape == np.asarray(out).shape
        assert not np.any(np.asarray(tan))
    # an argmax-selected value is differentiable through the selection
    g = fg.grad(
        lambda x: fnp.sum(fnp.take_along_axis(x, fnp.argmax(x, axis=1, keepdims=True), axis=1))
    )(x)
    want = np.zeros_like(x)
    want[np.arange(3), x.argmax(1)] = 1.0
    np.testing.assert_array_equal(np.asarray(g), want)


# -- user-level gradients --------------------------------------------------------------------------


def _fd_grad(f, x, h=1e-6):
    g = np.zeros(x.size)
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = h
        g[k] = (float(f(x + e.reshape(x.shape))) - float(f(x - e.reshape(x.shape)))) / (2 * h)
    return g.reshape(x.shape)


def test_grad_of_sum_of_max_matches_finite_differences(x64):
    x = _distinct((3, 4), 10)
    f = lambda x: fnp.sum(fnp.max(x, axis=1))  # noqa: E731
    g = np.asarray(fg.grad(f)(x))
    np.testing.assert_allclose(g, _fd_grad(f, x), rtol=1e-6, atol=1e-8)
    want = np.zeros_like(x)
    want[np.arange(3), x.argmax(1)] = 1.0
    np.testing.assert_array_equal(g, want)


def test_logsumexp_gradient_is_softmax(x64):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 5)) * 3
    w = rng.standard_normal(3)
    f = lambda x: fnp.sum(w * logsumexp(x, axis=1))  # noqa: E731
    g = np.asarray(fg.grad(f)(x))
    softmax = np.exp(x - x.max(1, keepdims=True))
    softmax /= softmax.sum(1, keepdims=True)
    np.testing.assert_allclose(g, w[:, None] * softmax, rtol=1e-10)
    np.testing.assert_allclose(g, _fd_grad(f, x), rtol=1e-6, atol=1e-8)
    check_grads(lambda x: logsumexp(x, axis=0), (x,), order=2)


def _composite(x):
    """A scalar mixing every differentiable reduction."""
    a = lax.cumsum(x, 1) + lax.cumprod(x * 0.3, 0, reverse=True)
    b = lax.cumlogsumexp(a, 1) + lax.cummax(x, 1) - lax.cummin(x, 0)
    c = lax.reduce_window(b, -np.inf, lax.max, (2, 2), (1, 1), "SAME")
    d = lax.reduce_window(c * x, 0.0, lax.add, (1, 2), (1, 2), "VALID")
    return (
        lax.reduce_sum(d, (0, 1))
        + lax.reduce_prod(lax.reduce_max(x, (1,)), (0,))
        - lax.reduce_sum(lax.reduce_min(b, (0,)) ** 2, (0,))
    )


def test_composite_grads_and_transforms_commute(x64):
    x = _distinct((3, 4), 12) * 0.3
    check_grads(_composite, (x,), order=2, modes=("fwd", "rev"))
    assert_transforms_commute(_composite, (x,))


def test_vmap_of_grad_matches_loop(x64):
    xs = np.stack([_distinct((3, 4), s) * 0.3 for s in range(3)])
    g = fg.vmap(fg.grad(_composite))(xs)
    for i in range(3):
        np.testing.assert_allclose(
            np.asarray(g)[i], np.asarray(fg.grad(_composite)(xs[i])), rtol=1e-10
        )


def test_jacfwd_equals_jacrev(x64):
    x = _distinct((3, 4), 13) * 0.3

    def f(x):
        return lax.cumlogsumexp(lax.cumprod(x, 1), 0) + lax.reduce_window(
            x, -np.inf, lax.max, (2, 1), (1, 1), ((1, 0), (0, 0))
        )

    np.testing.assert_allclose(
        np.asarray(fg.jacfwd(f)(x)), np.asarray(fg.jacrev(f)(x)), rtol=1e-10, atol=1e-12
    )


# -- vmap ------------------------------------------------------------------------------------------

B = 3
X = _distinct((B, 4, 5), 14).astype(np.float32)


def check_vmap(f, args, in_axes):
    """fg.vmap(f, in_axes) against a loop stacking f over the examples along axis 0."""
    got = fg.vmap(f, in_axes=in_axes)(*args)
    for i in range(B):
        ex = [a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(args, in_axes)]
        want = f(*ex)
        for g, w in zip(
            got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)
        ):
            np.testing.assert_allclose(np.asarray(g)[i], np.asarray(w), rtol=1e-6, atol=1e-6)
            assert np.asarray(g).dtype == np.asarray(w).dtype


XB = X > 0
XI = (X * 3).astype(np.int32)
XS = X * 0.1  # products stay O(1)

# name -> (f, its operand with the batch dim first, the result's batch dim for an operand
# batched at dim 1)
UNARY = {
    "reduce_sum": (lambda x: lax.reduce_sum(x, (1,)), X, 1),
    "reduce_prod": (lambda x: lax.reduce_prod(x, (0, 1)), XS, 0),
    "reduce_max": (lambda x: lax.reduce_max(x, (0,)), X, 0),
    "reduce_min": (lambda x: lax.reduce_min(x, (1,)), X, 1),
    "reduce_and": (lambda x: lax.reduce_and(x, (1,)), XB, 1),
    "reduce_or": (lambda x: lax.reduce_or(x, (0,)), XB, 0),
    "reduce_xor": (lambda x: lax.reduce_xor(x, (0, 1)), XI, 0),
    "argmax": (lambda x: lax.argmax(x, 1, np.int32), X, 1),
    "argmin": (lambda x: lax.argmin(x, 0, np.int32), X, 0),
    "cumsum": (lambda x: lax.cumsum(x, 1), X, 1),
    "cumprod": (lambda x: lax.cumprod(x, 0, reverse=True), XS, 1),
    "cummax": (lambda x: lax.cummax(x, 1), X, 1),
    "cummin": (lambda x: lax.cummin(x, 0, reverse=True), X, 1),
    "cumlogsumexp": (lambda x: lax.cumlogsumexp(x, 1), X, 1),
    "reduce_window_sum": (
        lambda x: lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 2), "SAME"),
        X,
        1,
    ),
    "reduce_window_max": (
        lambda x: lax.reduce_window(x, -np.inf, lax.max, (3, 1), (2, 1), ((1, 1), (0, 0)), (1, 2)),
        X,
        1,
    ),
    "reduce_window_min": (
        lambda x: lax.reduce_window(
            x, np.inf, lax.min, (2, 2), (1, 1), "VALID", window_dilation=(1, 2)
        ),
        X,
        1,
    ),
}


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_vmap_matches_loop(name, axis):
    f, x, _ = UNARY[name]
    check_vmap(f, [np.moveaxis(x, 0, axis)], [axis])


def _batched_jaxpr(f, x, d):
    """The jaxpr of ``f`` batched by the rules alone, and the result's batch dim."""
    out_dim = []

    def batched(x):
        (out,), (od,) = vmap_flat(lambda y: [f(y)], B, [x], [d])
        out_dim.append(od)
        return out

    return fg.make_jaxpr(batched)(x), out_dim[0]


@pytest.mark.parametrize("name", sorted(UNARY))
def test_vmap_shifts_params_instead_of_moving_data(name):
    f, x, out_dim = UNARY[name]
    jaxpr, d = _batched_jaxpr(f, np.moveaxis(x, 0, 1), 1)
    assert len(jaxpr.jaxpr.eqns) == 1, jaxpr  # the primitive alone, on the operand as it is
    assert d == out_dim, (d, jaxpr)


def test_vmap_jaxpr_params():
    x = np.moveaxis(X, 0, 2)
    text = str(_batched_jaxpr(lambda x: lax.reduce_sum(x, (0, 1)), x, 2)[0])
    assert "reduce_sum[axes=(0, 1)]" in text
    text = str(_batched_jaxpr(lambda x: lax.cumsum(x, 1), x, 2)[0])
    assert "cumsum[axis=1 reverse=False]" in text
    text = str(_batched_jaxpr(lambda x: lax.cummax(x, 1), np.moveaxis(X, 0, 1), 1)[0])
    assert "cummax[axis=2 reverse=False]" in text
    text = str(_batched_jaxpr(lambda x: lax.argmax(x, 1, np.int32), X, 0)[0])
    assert "argmax[axes=(2,) index_dtype=int32]" in text
    text = str(_batched_jaxpr(UNARY["reduce_window_max"][0], np.moveaxis(X, 0, 1), 1)[0])
    assert "window_dimensions=(3, 1, 1)" in text and "padding=((1, 1), (0, 0), (0, 0))" in text


def test_grad_jaxpr_uses_the_expected_primitives():
    x = X[0]
    text = str(fg.make_jaxpr(fg.grad(lambda x: fnp.sum(lax.cumsum(x, 1) ** 2)))(x))
    assert "cumsum[axis=1 reverse=True]" in text  # the transpose of a forward cumsum
    text = str(fg.make_jaxpr(fg.grad(lambda x: lax.reduce_sum(x, (0, 1))))(x))
    assert "broadcast_in_dim" in text
    f = lambda x: fnp.sum(lax.reduce_window(x, 0.0, lax.add, (2, 2), (2, 1), "VALID"))  # noqa
    jaxpr = fg.make_jaxpr(fg.grad(f))(x)
    np.testing.assert_allclose(np.asarray(jaxpr(x)[0]), np.asarray(fg.grad(f)(x)))
    assert "reduce_window_sum" in str(jaxpr) and "pad" in str(jaxpr)
