"""jvp, transpose and batching rules of the gather/scatter primitives (fungrad/lax/indexing.py).

Oracles:

* gather, scatter-add, scatter (indices fixed) and scatter-mul (in the operand) are linear, so
  their derivatives are checked exactly against the Jacobian matrix built column by column from
  the numpy impl on unit vectors: jvp must give ``J @ t``, vjp ``J.T @ ct``. Out-of-bounds
  modes, repeated indices and overlapping windows are all covered by this oracle;
* ``check_grads`` (second order, forward and reverse, float64) for every primitive, including the
  nonlinear scatter-mul/min/max;
* vmap against a Python loop for in_axes 0, 1, -1 and None mixes of every operand.

A PROMISE_IN_BOUNDS gather and scatter-add transpose as in JAX, into each other with the same
mode, which is not the adjoint for out-of-bounds indices (the gather clamps, the scatter-add
drops): their vjp oracle is the Jacobian of the mode that the transpose behaves as.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
from fungrad import core, lax
from fungrad.lax import indexing
from fungrad.lax.indexing import GatherDimensionNumbers as GDN
from fungrad.lax.indexing import GatherScatterMode as Mode
from fungrad.lax.indexing import ScatterDimensionNumbers as SDN
from fungrad.testing import check_grads
from fungrad.transforms.jvp import jvp_rules, no_jvp
from fungrad.transforms.transpose import transpose_rules
from fungrad.transforms.vmap import batch_rules

LINEAR = {indexing.gather_p, indexing.scatter_add_p, indexing.scatter_p, indexing.scatter_mul_p}
MODES = [Mode.CLIP, Mode.FILL_OR_DROP, Mode.PROMISE_IN_BOUNDS]
SCATTERS = {
    "scatter": lax.scatter,
    "scatter-add": lax.scatter_add,
    "scatter-mul": lax.scatter_mul,
    "scatter-min": lax.scatter_min,
    "scatter-max": lax.scatter_max,
}
few = settings(max_examples=10)


# -- registry ------------------------------------------------------------------------------------


def test_registry_every_primitive_has_its_rules():
    prims = [v for v in vars(indexing).values() if isinstance(v, core.Primitive)]
    assert {p.name for p in prims} == {
        "gather",
        "scatter",
        "scatter-add",
        "scatter-mul",
        "scatter-min",
        "scatter-max",
    }
    for p in prims:
        assert p in jvp_rules or p in no_jvp, f"{p} has no jvp rule"
        assert p in batch_rules, f"{p} has no batch rule"
        assert (p in transpose_rules) == (p in LINEAR), f"{p}: transpose rule mismatch"


# -- the cases: layouts x modes ------------------------------------------------------------------

# gather layouts: (operand shape, indices, dimension numbers, slice sizes). Indices repeat and
# leave the operand (negative and too large, windows sticking out) so every mode matters.
GATHERS = {
    "take": ((5,), [[1], [3], [1], [7], [-2]], GDN((), (0,), (0,)), (1,)),
    "rows": ((4, 3), [[2], [0], [2], [5]], GDN((1,), (0,), (0,)), (1, 3)),
    "windows": ((6,), [[1], [4], [5], [-1]], GDN((1,), (), (0,)), (2,)),
    "points": ((3, 4), [[[0, 1], [2, 3]], [[0, 1], [3, 0]]], GDN((), (0, 1), (0, 1)), (1, 1)),
    "offset_first": ((4, 3, 2), [[1], [3], [1]], GDN((0, 2), (0,), (0,)), (1, 3, 2)),
    "batching": (
        (3, 4),
        [[[1], [1]], [[0], [5]], [[3], [2]]],
        GDN((), (1,), (1,), (0,), (0,)),
        (1, 1),
    ),
}

# scatter layouts: (operand shape, indices, updates shape, dimension numbers).
SCATTERS_LAYOUTS = {
    "take": ((5,), [[1], [3], [1], [7], [-2]], (5,), SDN((), (0,), (0,))),
    "rows": ((4, 3), [[2], [0], [2], [5]], (4, 3), SDN((1,), (0,), (0,))),
    "windows": ((8,), [[1], [3], [5], [-1]], (4, 2), SDN((1,), (), (0,))),
    "window_first": ((4, 3), [[1], [1], [9]], (3, 3), SDN((0,), (0,), (0,))),
    "batching": (
        (3, 4),
        [[[1], [1]], [[0], [5]], [[3], [2]]],
        (3, 2),
        SDN((), (1,), (1,), (0,), (0,)),
    ),
}

# The same layouts with indices that never write a position twice (for the rules that need
# unique_indices), also after CLIP clamps their out-of-bounds indices.
UNIQUE_INDICES = {
    "take": [[1], [3], [2], [7], [-2]],
    "rows": [[2], [0], [1], [5]],
    "windows": [[2], [4], [9], [-1]],
    "window_first": [[2], [0], [9]],
    "batching": [[[1], [2]], [[0], [5]], [[3], [2]]],
}


def _rng(seed=0):
    return np.random.default_rng(seed)


def _gather_fn(layout, mode):
    shape, idx, dn, sizes = GATHERS[layout]
    idx = np.asarray(idx, np.int32)
    fill = 0.0 if mode is Mode.FILL_OR_DROP else None  # NaN fills would defeat the checks
    return (lambda x: lax.gather(x, idx, dn, sizes, mode=mode, fill_value=fill)), [shape]


def _scatter_fn(prim, layout, mode, unique=False):
    shape, idx, ushape, dn = SCATTERS_LAYOUTS[layout]
    idx = np.asarray(UNIQUE_INDICES[layout] if unique else idx, np.int32)
    fn = SCATTERS[prim]
    return (lambda x, u: fn(x, idx, u, dn, mode=mode, unique_indices=unique)), [shape, ushape]


# -- the Jacobian oracle for the linear ones -------------------------------------------------------


def _flat(xs):
    return np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in xs])


def _unflat(vec, shapes):
    out, k = [], 0
    for s in shapes:
        n = int(np.prod(s, dtype=int))
        out.append(vec[k : k + n].reshape(s))
        k += n
    return out


def _jacobian(f, shapes):
    """The matrix of the affine ``f`` (eager evaluation on unit vectors: impls only)."""
    n = sum(int(np.prod(s, dtype=int)) for s in shapes)
    f0 = np.ravel(np.asarray(f(*_unflat(np.zeros(n), shapes)), np.float64))
    cols = [
        np.ravel(np.asarray(f(*_unflat(np.eye(n)[k], shapes)), np.float64)) - f0 for k in range(n)
    ]
    return np.stack(cols, 1)


def check_linear(f, shapes, seed=0, reverse=None):
    """jvp == J t, vjp == J^T ct (cotangents of exactly the operands' shapes and dtypes), and
    linearize agrees, for ``f`` affine in float64 args of ``shapes`` (scatter-mul's result is
    affine in its updates: unwritten positions keep the operand). With ``reverse``, vjp is
    checked against the Jacobian of ``reverse`` instead (JAX's PROMISE_IN_BOUNDS transposes)."""
    rng = _rng(seed)
    jac = _jacobian(f, shapes)
    rev_jac = jac if reverse is None else _jacobian(reverse, shapes)
    args = [rng.standard_normal(s) for s in shapes]
    out = np.asarray(f(*args))
    tangents = [rng.standard_normal(s) for s in shapes]
    primal, t_out = fg.jvp(f, tuple(args), tuple(tangents))
    np.testing.assert_allclose(np.asarray(primal), out, rtol=1e-12, atol=1e-12)
    assert np.asarray(t_out).dtype == np.float64
    np.testing.assert_allclose(np.ravel(t_out), jac @ _flat(tangents), rtol=1e-10, atol=1e-12)
    ct = rng.standard_normal(out.shape)
    _, vjp_fn = fg.vjp(f, *args)
    cts = vjp_fn(ct)
    for c, s in zip(cts, shapes):
        assert np.asarray(c).shape == tuple(s) and np.asarray(c).dtype == np.float64
    np.testing.assert_allclose(_flat(cts), rev_jac.T @ np.ravel(ct), rtol=1e-10, atol=1e-12)
    _, f_lin = fg.linearize(f, *args)
    np.testing.assert_allclose(
        np.ravel(f_lin(*tangents)), jac @ _flat(tangents), rtol=1e-10, atol=1e-12
    )


@pytest.mark.parametrize("mode", MODES, ids=str)
@pytest.mark.parametrize("layout", sorted(GATHERS))
def test_gather_matches_jacobian(layout, mode, x64):
    f, shapes = _gather_fn(layout, mode)
    # JAX: a PROMISE_IN_BOUNDS gather clamps, its transpose drops out-of-bounds windows
    reverse = _gather_fn(layout, Mode.FILL_OR_DROP)[0] if mode is Mode.PROMISE_IN_BOUNDS else None
    check_linear(f, shapes, reverse=reverse)


@pytest.mark.parametrize("mode", MODES, ids=str)
@pytest.mark.parametrize("layout", sorted(SCATTERS_LAYOUTS))
@pytest.mark.parametrize("prim", ["scatter-add", "scatter"])
def test_scatter_add_and_scatter_match_jacobian(prim, layout, mode, x64):
    # Linear in (operand, updates) jointly with the indices fixed. With repeated indices the
    # scatter's Jacobian is that of the impl's winner (the id trick must find the same one).
    # JAX: a PROMISE_IN_BOUNDS scatter-add drops, its transpose reads clamped windows
    promise_add = prim == "scatter-add" and mode is Mode.PROMISE_IN_BOUNDS
    for unique in (False, True):
        f, shapes = _scatter_fn(prim, layout, mode, unique=unique)
        reverse = _scatter_fn(prim, layout, Mode.CLIP, unique=unique)[0] if promise_add else None
        check_linear(f, shapes, reverse=reverse)


@pytest.mark.parametrize("mode", MODES, ids=str)
@pytest.mark.parametrize("layout", sorted(SCATTERS_LAYOUTS))
def test_scatter_mul_matches_jacobian_in_each_operand(layout, mode, x64):
    f, (xs, us) = _scatter_fn("scatter-mul", layout, mode)
    u = _rng(3).standard_normal(us)
    check_linear(lambda x: f(x, u), [xs])  # repeated indices: fine in the operand
    f, (xs, us) = _scatter_fn("scatter-mul", layout, mode, unique=True)
    x = _rng(4).standard_normal(xs)
    # JAX: the jvp in the updates is x * scatter-add(t), so PROMISE_IN_BOUNDS transposes clamped
    clip = _scatter_fn("scatter-mul", layout, Mode.CLIP, unique=True)[0]
    reverse = (lambda u: clip(x, u)) if mode is Mode.PROMISE_IN_BOUNDS else None
    check_linear(lambda u: f(x, u), [us], reverse=reverse)


# -- check_grads on every primitive (second order, both modes) -----------------------------------


def _grad_modes(mode, prim="gather"):
    """check_grads' modes: JAX's PROMISE_IN_BOUNDS transposes of gather, scatter-add and
    scatter-mul (in the updates) are not adjoints for these out-of-bounds indices, so only the
    forward mode matches finite differences (check_linear checks their reverse mode exactly)."""
    if mode is Mode.PROMISE_IN_BOUNDS and prim in ("gather", "scatter-add", "scatter-mul"):
        return ("fwd",)
    return ("fwd", "rev")


@pytest.mark.parametrize("mode", MODES, ids=str)
@pytest.mark.parametrize("layout", ["take", "windows", "batching"])
def test_gather_check_grads(layout, mode, x64):
    f, shapes = _gather_fn(layout, mode)
    x = _rng(1).standard_normal(shapes[0])
    check_grads(lambda x: lax.mul(f(x), f(x)), [x], order=2, modes=_grad_modes(mode))


@pytest.mark.parametrize("mode", MODES, ids=str)
@pytest.mark.parametrize("layout", ["take", "windows", "batching"])
@pytest.mark.parametrize("prim", sorted(SCATTERS))
def test_scatter_check_grads(prim, layout, mode, x64):
    # Random continuous values: no ties between contenders of scatter-min/max, whose
    # derivative is then that of the winner.
    unique = prim == "scatter-mul"  # the updates derivative of scatter-mul needs unique indices
    f, shapes = _scatter_fn(prim, layout, mode, unique=unique)
    rng = _rng(2)
    args = [rng.standard_normal(s) for s in shapes]
    check_grads(
        lambda x, u: lax.mul(f(x, u), f(x, u)), args, order=2, modes=_grad_modes(mode, prim)
    )


def test_scatter_mul_operand_check_grads_with_repeated_indices(x64):
    f, shapes = _scatter_fn("scatter-mul", "windows", Mode.FILL_OR_DROP)
    rng = _rng(5)
    x, u = (rng.standard_normal(s) for s in shapes)
    check_grads(lambda x: lax.mul(f(x, u), x), [x], order=2, modes=("fwd", "rev"))


# -- specific values: out-of-bounds modes, winners, ties ------------------------------------------


def test_clamped_gather_sends_cotangent_to_clamped_element(x64):
    x = np.arange(5.0)
    idx = np.array([[7], [-3], [1], [1]], np.int32)
    dn = GDN((), (0,), (0,))
    for mode, expected in (
        (Mode.CLIP, [1.0, 2.0, 0.0, 0.0, 1.0]),
        # JAX: the clamped reads get no gradient (the transpose drops them)
        (Mode.PROMISE_IN_BOUNDS, [0.0, 2.0, 0.0, 0.0, 0.0]),
    ):
        g = fg.grad(lambda x, m=mode: lax.reduce_sum(lax.gather(x, idx, dn, (1,), mode=m), (0,)))(x)
        np.testing.assert_array_equal(np.asarray(g), expected)
    g = fg.grad(
        lambda x: lax.reduce_sum(
            lax.gather(x, idx, dn, (1,), mode=Mode.FILL_OR_DROP, fill_value=0.0), (0,)
        )
    )(x)
    np.testing.assert_array_equal(np.asarray(g), [0.0, 2.0, 0.0, 0.0, 0.0])


def test_dropped_updates_get_zero_gradient(x64):
    x, u = np.arange(4.0), np.array([10.0, 20.0, 30.0])
    idx = np.array([[1], [4], [-1]], np.int32)
    dn = SDN((), (0,), (0,))
    for name, fn in SCATTERS.items():
        for mode in (Mode.FILL_OR_DROP, Mode.PROMISE_IN_BOUNDS):
            unique = name == "scatter-mul"
            g = fg.grad(
                lambda u, fn=fn, m=mode, q=unique: lax.reduce_sum(
                    fn(x, idx, u, dn, mode=m, unique_indices=q), (0,)
                )
            )(u)
            # JAX transposes PROMISE_IN_BOUNDS scatter-add (and scatter-mul's jvp, a
            # scatter-add) to a clamping gather: dropped updates read the clamped positions
            expected = (
                {"scatter-add": [1.0, 1.0], "scatter-mul": [x[3], x[0]]}.get(name, [0.0, 0.0])
                if mode is Mode.PROMISE_IN_BOUNDS
                else [0.0, 0.0]
            )
            assert np.asarray(g)[1:].tolist() == expected, (name, mode)
    # CLIP writes them at the clamped positions instead: 4 -> 3 and -1 -> 0.
    g = fg.grad(
        lambda x, u: lax.reduce_sum(
            lax.mul(lax.scatter_add(x, idx, u, dn, mode=Mode.CLIP), np.arange(1.0, 5.0)), (0,)
        ),
        argnums=(0, 1),
    )(x, u)
    np.testing.assert_array_equal(np.asarray(g[0]), [1, 2, 3, 4])
    np.testing.assert_array_equal(np.asarray(g[1]), [2, 4, 1])


def test_scatter_with_repeated_indices_differentiates_the_winner(x64):
    # The impl keeps the last write (as JAX on CPU); only that update gets a derivative and the
    # overwritten operand entries get none.
    x, u = np.arange(5.0), np.array([1.0, 2.0, 3.0])
    idx = np.array([[1], [1], [9]], np.int32)
    dn = SDN((), (0,), (0,))
    out, t = fg.jvp(
        lambda x, u: lax.scatter(x, idx, u, dn), (x, u), (np.ones(5), np.array([10.0, 20.0, 30.0]))
    )
    np.testing.assert_array_equal(np.asarray(out), [0, 2, 2, 3, 4])
    np.testing.assert_array_equal(np.asarray(t), [1, 20, 1, 1, 1])  # JAX gives the same
    gx, gu = fg.grad(lambda x, u: lax.reduce_sum(lax.scatter(x, idx, u, dn), (0,)), argnums=(0, 1))(
        x, u
    )
    np.testing.assert_array_equal(np.asarray(gx), [1, 0, 1, 1, 1])
    np.testing.assert_array_equal(np.asarray(gu), [0, 1, 0])


@pytest.mark.parametrize("prim", ["scatter-max", "scatter-min"])
def test_scatter_extremal_ties_share_the_tangent(prim, x64):
    # JAX's convention: the tangent at a position is the mean of the tangents of every
    # contender (operand entry, update elements) equal to the result (JAX gives these values).
    fn = SCATTERS[prim]
    x = np.array([1.0, 2.0, 5.0])
    u = np.array([2.0, 2.0, 1.0, 7.0]) if prim == "scatter-max" else np.array([2.0, 2.0, 1.0, -1])
    idx = np.array([[1], [1], [0], [2]], np.int32)
    dn = SDN((), (0,), (0,))
    tx, tu = np.array([3.0, 6.0, 9.0]), np.array([30.0, 60.0, 90.0, 120.0])
    out, t = fg.jvp(lambda x, u: fn(x, idx, u, dn), (x, u), (tx, tu))
    # position 0: operand and update 2 tie at 1.0; position 1: three-way tie at 2.0.
    np.testing.assert_allclose(np.asarray(t), [(3 + 90) / 2, (6 + 30 + 60) / 3, 120.0])
    gx, gu = fg.grad(lambda x, u: lax.reduce_sum(fn(x, idx, u, dn), (0,)), argnums=(0, 1))(x, u)
    np.testing.assert_allclose(np.asarray(gx), [0.5, 1 / 3, 0.0])
    np.testing.assert_allclose(np.asarray(gu), [1 / 3, 1 / 3, 0.5, 1.0])


def test_scatter_extremal_nan_result_has_zero_tangent(x64):
    x, u = np.array([1.0, np.nan]), np.array([np.nan, 3.0])
    idx = np.array([[0], [1]], np.int32)
    _, t = fg.jvp(
        lambda x, u: lax.scatter_max(x, idx, u, SDN((), (0,), (0,))),
        (x, u),
        (np.ones(2), np.ones(2)),
    )
    np.testing.assert_array_equal(np.asarray(t), [0.0, 0.0])


def test_scatter_mul_updates_derivative_needs_unique_indices(x64):
    x, u = np.arange(1.0, 5.0), np.array([2.0, 3.0])
    idx = np.array([[1], [1]], np.int32)
    dn = SDN((), (0,), (0,))
    with pytest.raises(TypeError, match="scatter-mul.*unique_indices=True"):
        fg.grad(lambda u: lax.reduce_sum(lax.scatter_mul(x, idx, u, dn), (0,)))(u)
    with pytest.raises(TypeError, match="scatter-mul.*unique_indices=True"):
        fg.jvp(lambda u: lax.scatter_mul(x, idx, u, dn), (u,), (u,))
    # The operand derivative works with repeated indices: d/dx = product of the updates.
    g = fg.grad(lambda x: lax.reduce_sum(lax.scatter_mul(x, idx, u, dn), (0,)))(x)
    np.testing.assert_array_equal(np.asarray(g), [1.0, 6.0, 1.0, 1.0])
    # With unique indices: d out[p] / d u_j = x[p].
    idx2 = np.array([[1], [3]], np.int32)
    g = fg.grad(
        lambda u: lax.reduce_sum(lax.scatter_mul(x, idx2, u, dn, unique_indices=True), (0,))
    )(u)
    np.testing.assert_array_equal(np.asarray(g), [2.0, 4.0])


def test_integer_indices_get_float0_cotangents(x64):
    from fungrad import dtypes

    x = np.arange(4.0)
    idx = np.array([[2]], np.int32)
    _, vjp_fn = fg.vjp(lambda x, i: lax.gather(x, i, GDN((), (0,), (0,)), (1,)), x, idx)
    ct_x, ct_i = vjp_fn(np.array([5.0]))
    np.testing.assert_array_equal(np.asarray(ct_x), [0, 0, 5, 0])
    assert np.asarray(ct_i).dtype == dtypes.float0


def test_transposed_jaxprs_use_the_matching_primitives(x64):
    x = np.arange(5.0)
    idx = np.array([[1], [6]], np.int32)
    dn = GDN((), (0,), (0,))
    for mode, transposed in [
        ("fill", "FILL_OR_DROP"),
        ("clip", "CLIP"),
        ("promise_in_bounds", "PROMISE_IN_BOUNDS"),
    ]:
        text = str(
            fg.make_jaxpr(
                fg.grad(
                    lambda x, m=mode: lax.reduce_sum(
                        lax.gather(x, idx, dn, (1,), mode=m, fill_value=0.0), (0,)
                    )
                )
            )(x)
        )
        (line,) = [ln for ln in text.splitlines() if "scatter-add[" in ln]
        assert f"mode=GatherScatterMode.{transposed} " in line
    u = np.ones(2)
    sdn = SDN((), (0,), (0,))
    jaxpr = fg.make_jaxpr(fg.grad(lambda u: lax.reduce_sum(lax.scatter_add(x, idx, u, sdn), (0,))))(
        u
    )
    assert "gather[" in str(jaxpr)
    np.testing.assert_array_equal(np.asarray(jaxpr(u)[0]), [1.0, 0.0])


# -- composite expressions, jacobians, vmap of grad -----------------------------------------------


def _composite(x, u):
    # x: (4, 3) rows, u: (3, 3): gather rows, scatter-add them back elsewhere, take a max.
    rows = lax.gather(x, np.array([[3], [0], [3]], np.int32), GDN((1,), (0,), (0,)), (1, 3))
    y = lax.scatter_add(
        x, np.array([[1], [1], [2]], np.int32), lax.mul(rows, u), SDN((1,), (0,), (0,))
    )
    z = lax.scatter_max(y, np.array([[0], [2], [5]], np.int32), u, SDN((1,), (0,), (0,)))
    return lax.reduce_sum(lax.mul(z, z), (0, 1))


def test_composite_grad_jacobians_and_vmap_of_grad(x64):
    rng = _rng(11)
    x, u = rng.standard_normal((4, 3)), rng.standard_normal((3, 3))
    check_grads(_composite, [x, u], order=2, modes=("fwd", "rev"))
    jf = fg.jacfwd(_composite, argnums=(0, 1))(x, u)
    jr = fg.jacrev(_composite, argnums=(0, 1))(x, u)
    for a, b in zip(jf, jr):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12)
    xs = rng.standard_normal((3, 4, 3))
    g = fg.vmap(fg.grad(_composite), in_axes=(0, None))(xs, u)
    for b in range(3):
        np.testing.assert_allclose(
            np.asarray(g[b]), np.asarray(fg.grad(_composite)(xs[b], u)), rtol=1e-12, atol=1e-12
        )


def test_jacfwd_jacrev_of_vector_valued_gather_scatter(x64):
    rng = _rng(12)
    x, u = rng.standard_normal(5), rng.standard_normal(4)
    idx = np.array([[4], [0], [4], [8]], np.int32)

    def f(x, u):
        g = lax.gather(x, idx, GDN((), (0,), (0,)), (1,), mode=Mode.CLIP)
        return lax.scatter(x, idx, lax.mul(g, u), SDN((), (0,), (0,)))

    for a, b in zip(fg.jacfwd(f, argnums=(0, 1))(x, u), fg.jacrev(f, argnums=(0, 1))(x, u)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-12)


# -- vmap against a Python loop -------------------------------------------------------------------

B = 3


def check_vmap(f, args, in_axes):
    """``vmap(f)`` over ``args`` (each a stack of B examples on axis 0, or one example for
    in_axes None) against a loop; returns the batched jaxpr's text."""
    moved = [a if ax is None else np.moveaxis(a, 0, ax) for a, ax in zip(args, in_axes)]
    got = fg.vmap(f, in_axes=tuple(in_axes))(*moved)
    want = np.stack(
        [
            np.asarray(f(*[a if ax is None else a[b] for a, ax in zip(args, in_axes)]))
            for b in range(B)
        ]
    )
    assert isinstance(got, fg.Array)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)
    return str(fg.make_jaxpr(fg.vmap(f, in_axes=tuple(in_axes)))(*moved))


def _batched_indices(idx, n, seed):
    """B index arrays like ``idx`` (in [-1, n], so some are out of bounds)."""
    idx = np.asarray(idx)
    return _rng(seed).integers(-1, n + 1, size=(B,) + idx.shape).astype(np.int32)


AXES2 = [(0, 0), (1, 0), (-1, 1), (0, None), (None, 0), (-1, None), (None, -1)]


@pytest.mark.parametrize("axes", AXES2, ids=str)
@pytest.mark.parametrize("layout", sorted(GATHERS))
def test_vmap_gather(layout, axes):
    shape, idx, dn, sizes = GATHERS[layout]
    mode = MODES[sorted(GATHERS).index(layout) % 3]
    xs = _rng(1).standard_normal((B,) + shape).astype(np.float32)
    idxs = _batched_indices(idx, max(shape), 2)
    args = [xs if axes[0] is not None else xs[0], idxs if axes[1] is not None else idxs[0]]
    check_vmap(lambda x, i: lax.gather(x, i, dn, sizes, mode=mode), args, axes)


AXES3 = [
    (0, 0, 0),
    (1, None, 0),
    (None, 0, None),
    (None, None, 0),
    (-1, 1, -1),
    (0, None, None),
    (None, 0, 1),
    (1, 0, None),
]


@pytest.mark.parametrize("axes", AXES3, ids=str)
@pytest.mark.parametrize("layout", sorted(SCATTERS_LAYOUTS))
@pytest.mark.parametrize("prim", sorted(SCATTERS))
def test_vmap_scatter(prim, layout, axes):
    shape, idx, ushape, dn = SCATTERS_LAYOUTS[layout]
    mode = MODES[(len(prim) + len(layout)) % 3]
    fn = SCATTERS[prim]
    xs = _rng(3).standard_normal((B,) + shape).astype(np.float32)
    us = _rng(4).standard_normal((B,) + ushape).astype(np.float32)
    idxs = _batched_indices(idx, max(shape), 5)
    args = [a if ax is not None else a[0] for a, ax in zip([xs, idxs, us], axes)]
    check_vmap(lambda x, i, u: fn(x, i, u, dn, mode=mode), args, axes)


def test_vmap_scatter_with_repeated_indices_keeps_the_same_winner():
    x, u = np.zeros((B, 5), np.float32), np.arange(B * 3, dtype=np.float32).reshape(B, 3)
    idx = np.array([[1], [1], [2]], np.int32)
    for axes in [(0, None, 0), (None, None, 0), (1, None, 1)]:
        args = [x if axes[0] is not None else x[0], idx, u]
        check_vmap(lambda x, i, u: lax.scatter(x, i, u, SDN((), (0,), (0,))), args, axes)


def test_vmap_index_vector_dimension_batched():
    # Batching along the index-vector dimension of the indices (their last dim).
    x = _rng(6).standard_normal((3, 4)).astype(np.float32)
    idx = np.array([[[0, 1], [2, 3]], [[1, 1], [2, 0]], [[2, 2], [0, 0]]], np.int32)
    f = lambda i: lax.gather(x, i, GDN((), (0, 1), (0, 1)), (1, 1))  # noqa: E731
    check_vmap(f, [idx], [2])
    u = np.ones(2, np.float32)
    g = lambda i: lax.scatter_add(x, i, u, SDN((), (0, 1), (0, 1)))  # noqa: E731
    check_vmap(g, [idx], [2])


def test_vmap_keeps_batch_dims_in_place():
    # The rules renumber dimensions instead of transposing the data.
    xs = np.zeros((4, B), np.float32)
    text = check_vmap(
        lambda x: lax.gather(x, np.array([[1], [3]], np.int32), GDN((), (0,), (0,)), (1,)),
        [xs.T],
        [1],
    )
    assert "transpose" not in text.split("gather")[0]
    idxs = np.zeros((2, B, 1), np.int32)
    text = check_vmap(
        lambda x, i: lax.gather(x, i, GDN((), (0,), (0,)), (1,)),
        [xs.T, np.moveaxis(idxs, 1, 0)],
        [1, 1],
    )
    assert "transpose[" not in text.split("gather[")[0]
    # An unbatched operand of a gather stays unbatched (no broadcast before the gather).
    text = check_vmap(
        lambda i: lax.gather(np.arange(4.0, dtype=np.float32), i, GDN((), (0,), (0,)), (1,)),
        [np.moveaxis(idxs, 1, 0)],
        [1],
    )
    before = text.split("gather[")[0]
    assert "broadcast_in_dim" not in before and "transpose[" not in before
    # A scatter-add whose updates are batched at a position that is a valid window position.
    us = np.ones((B, 2, 3), np.float32)
    text = check_vmap(
        lambda x, u: lax.scatter_add(x, np.array([[0], [2]], np.int32), u, SDN((1,), (0,), (0,))),
        [np.zeros((B, 4, 3), np.float32), us],
        [2, 2],
    )
    assert "transpose[" not in text.split("scatter-add[")[0]


# -- hypothesis: random take-like gathers/scatters, all rules against their oracles ----------------


@st.composite
def _take_case(draw):
    n = draw(st.integers(1, 4))
    k = draw(st.integers(0, 4))
    idx = draw(st.lists(st.integers(-2, n + 1), min_size=k, max_size=k))
    mode = draw(st.sampled_from(MODES))
    window = draw(st.integers(1, n))
    return n, np.asarray(idx, np.int32).reshape(k, 1), mode, window


@few
@given(_take_case())
def test_window_gather_scatter_rules_hypothesis(case):
    n, idx, mode, window = case
    fg.config.update("enable_x64", True)
    try:
        gdn, sdn = GDN((1,), (), (0,)), SDN((1,), (), (0,))
        fill = 0.0 if mode is Mode.FILL_OR_DROP else None
        promise = mode is Mode.PROMISE_IN_BOUNDS  # JAX's transposes: see the module docstring
        check_linear(
            lambda x: lax.gather(x, idx, gdn, (window,), mode=mode, fill_value=fill),
            [(n,)],
            reverse=(lambda x: lax.gather(x, idx, gdn, (window,), mode="fill", fill_value=0.0))
            if promise
            else None,
        )
        ushape = (len(idx), window)
        check_linear(
            lambda x, u: lax.scatter_add(x, idx, u, sdn, mode=mode),
            [(n,), ushape],
            reverse=(lambda x, u: lax.scatter_add(x, idx, u, sdn, mode="clip"))
            if promise
            else None,
        )
        check_linear(lambda x, u: lax.scatter(x, idx, u, sdn, mode=mode), [(n,), ushape])
    finally:
        fg.config.update("enable_x64", False)


def test_all_in_axes_combinations_of_a_small_scatter_add():
    x = _rng(8).standard_normal((B, 4)).astype(np.float32)
    u = _rng(9).standard_normal((B, 2)).astype(np.float32)
    idx = np.array([[[0], [0]], [[3], [1]], [[2], [5]]], np.int32)
    for axes in itertools.product([0, -1, None], [0, 1, None], [0, None]):
        if axes == (None, None, None):
            continue
        args = [a if ax is not None else a[0] for a, ax in zip([x, idx, u], axes)]
        check_vmap(lambda x, i, u: lax.scatter_add(x, i, u, SDN((), (0,), (0,))), args, axes)
