"""jvp, transpose and batching rules of the shape and slicing primitives (fungrad/lax/shape.py,
fungrad/lax/slicing.py) and of ``threefry2x32`` (fungrad/lax/random_bits.py).

Every shape primitive is linear in its array operands, so its derivatives have an exact
independent oracle: the Jacobian matrix ``J``, built column by column by evaluating the
primitive eagerly (its numpy impl) on unit vectors. jvp must give ``J @ t`` and vjp ``J.T @ ct``.
``check_grads`` adds the finite-difference and higher-order checks; vmap is checked against a
Python loop over the examples.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import core, dtypes, lax
from fungrad.lax import random_bits, shape, slicing
from fungrad.testing import check_grads
from fungrad.testing.gradcheck import assert_transforms_commute
from fungrad.transforms.jvp import jvp_rules, no_jvp
from fungrad.transforms.transpose import transpose_rules
from fungrad.transforms.vmap import batch_rules, vmap_flat

LINEAR = {
    shape.broadcast_in_dim_p,
    shape.reshape_p,
    shape.transpose_p,
    shape.squeeze_p,
    slicing.concatenate_p,
    slicing.pad_p,
    slicing.slice_p,
    slicing.dynamic_slice_p,
    slicing.dynamic_update_slice_p,
    shape.rev_p,
}

few = settings(max_examples=12)


# -- registry ------------------------------------------------------------------------------------


def _family_primitives():
    return [
        v
        for m in (shape, slicing, random_bits)
        for v in vars(m).values()
        if isinstance(v, core.Primitive)
    ]


def test_registry_every_primitive_has_its_rules():
    prims = _family_primitives()
    assert {p.name for p in prims} == {
        "broadcast_in_dim",
        "reshape",
        "transpose",
        "squeeze",
        "concatenate",
        "pad",
        "slice",
        "dynamic_slice",
        "dynamic_update_slice",
        "rev",
        "iota",
        "threefry2x32",
    }
    for p in prims:
        assert p in jvp_rules or p in no_jvp, f"{p} has no jvp rule"
        assert p in batch_rules, f"{p} has no batch rule"
        assert (p in transpose_rules) == (p in LINEAR), f"{p}: transpose rule mismatch"


# -- the Jacobian oracle ---------------------------------------------------------------------------


def _flat(xs):
    return np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in xs]) if xs else np.zeros(0)


def _unflat(vec, like):
    out, k = [], 0
    for x in like:
        n = np.size(x)
        out.append(vec[k : k + n].reshape(np.shape(x)))
        k += n
    return out


def _jacobian(f, args):
    """The matrix of the linear ``f`` (eager evaluation on unit vectors: impls only)."""
    n = sum(np.size(a) for a in args)
    out_size = np.size(np.asarray(f(*args)))
    jac = np.zeros((out_size, n))
    for k in range(n):
        e = np.zeros(n)
        e[k] = 1.0
        jac[:, k] = np.ravel(np.asarray(f(*_unflat(e, args))))
    return jac


def check_linear(f, args, seed=0):
    """jvp == J t, vjp == J^T ct, and linearize agrees, for the linear ``f`` of float64 args."""
    rng = np.random.default_rng(seed)
    args = [np.asarray(a, np.float64) for a in args]
    jac = _jacobian(f, args)
    out = np.asarray(f(*args))
    tangents = [rng.standard_normal(np.shape(a)) for a in args]
    primal, t_out = fg.jvp(f, tuple(args), tuple(tangents))
    np.testing.assert_allclose(np.asarray(primal), out, rtol=1e-12, atol=1e-12)
    assert np.asarray(t_out).shape == out.shape and np.asarray(t_out).dtype == np.float64
    np.testing.assert_allclose(np.ravel(t_out), jac @ _flat(tangents), rtol=1e-10, atol=1e-12)
    ct = rng.standard_normal(out.shape)
    _, vjp_fn = fg.vjp(f, *args)
    cts = vjp_fn(ct)
    for c, a in zip(cts, args):  # a cotangent has exactly its operand's shape and dtype
        assert np.asarray(c).shape == np.shape(a) and np.asarray(c).dtype == np.float64
    np.testing.assert_allclose(_flat(cts), jac.T @ np.ravel(ct), rtol=1e-10, atol=1e-12)
    _, f_lin = fg.linearize(f, *args)
    np.testing.assert_allclose(
        np.ravel(f_lin(*tangents)), jac @ _flat(tangents), rtol=1e-10, atol=1e-12
    )


# -- fixed cases: Jacobian oracle + check_grads (second order, both modes) ---------------------


def _cases():
    r = np.random.default_rng(42)

    def a(*s):
        return r.standard_normal(s)

    return {
        "broadcast_in_dim": (
            lambda x: lax.broadcast_in_dim(x, (4, 2, 5, 3), (1, 2, 3)),
            [a(2, 1, 3)],
        ),
        "broadcast_in_dim_0d": (lambda x: lax.broadcast_in_dim(x, (2, 3), ()), [a()]),
        "reshape": (lambda x: lax.reshape(x, (3, 4)), [a(2, 6)]),
        "reshape_dimensions": (lambda x: lax.reshape(x, (4, 3), (2, 0, 1)), [a(2, 3, 2)]),
        "transpose": (lambda x: lax.transpose(x, (2, 0, 1)), [a(2, 3, 4)]),
        "squeeze": (lambda x: lax.squeeze(x, (1, 3)), [a(2, 1, 3, 1)]),
        "rev": (lambda x: lax.rev(x, (0, 2)), [a(2, 3, 2)]),
        "concatenate": (lambda x, y, z: lax.concatenate([x, y, z], 1), [a(2, 1), a(2, 3), a(2, 2)]),
        "pad": (lambda x, v: lax.pad(x, v, ((1, -1, 1), (-1, 2, 2))), [a(3, 2), a()]),
        "pad_negative_interior": (lambda x, v: lax.pad(x, v, ((-2, -1, 2),)), [a(4), a()]),
        "slice": (lambda x: lax.slice(x, (0, 1), (3, 4)), [a(3, 5)]),
        "slice_strides": (lambda x: lax.slice(x, (1, 0), (5, 4), (3, 2)), [a(6, 4)]),
        "dynamic_slice": (lambda x: lax.dynamic_slice(x, (1, -2), (2, 2)), [a(4, 5)]),
        "dynamic_slice_clamped": (lambda x: lax.dynamic_slice(x, (3, 9), (2, 2)), [a(4, 5)]),
        "dynamic_update_slice": (
            lambda x, u: lax.dynamic_update_slice(x, u, (2, -1)),
            [a(4, 5), a(2, 3)],
        ),
    }


CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_linear_rules_match_jacobian(name, x64):
    f, args = CASES[name]
    check_linear(f, args)


@pytest.mark.parametrize("name", sorted(CASES))
def test_check_grads_second_order(name, x64):
    f, args = CASES[name]
    check_grads(f, args, order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize(
    "name", ["pad", "dynamic_update_slice", "concatenate", "broadcast_in_dim", "slice_strides"]
)
def test_check_grads_nonlinear_composite(name, x64):
    # Squaring makes the second derivative nonzero, so the second-order checks see the rules
    # applied to tangents that depend on the primal.
    f, args = CASES[name]
    check_grads(lambda *xs: lax.mul(f(*xs), f(*xs)), args, order=2, modes=("fwd", "rev"))


def test_linear_in_one_operand_only(x64):
    # Transposes with only one of two operands linear: the other gets no cotangent.
    x, v, u = np.arange(6.0).reshape(2, 3), np.float64(2.5), np.ones((1, 2))
    g = fg.grad(lambda v: lax.reduce_sum(lax.pad(x, v, ((1, 1, 1), (0, 0, 0))), (0, 1)))(v)
    np.testing.assert_allclose(np.asarray(g), 3.0 * 2 + 3.0)  # 3 pad rows (1+1+1 interior)
    g = fg.grad(lambda x: lax.reduce_sum(lax.pad(x, v, ((1, 1, 1), (0, 0, 0))), (0, 1)))(x)
    np.testing.assert_allclose(np.asarray(g), np.ones((2, 3)))
    g = fg.grad(lambda u: lax.reduce_sum(lax.dynamic_update_slice(x, u, (1, 1)), (0, 1)))(u)
    np.testing.assert_allclose(np.asarray(g), np.ones((1, 2)))
    g = fg.grad(lambda x: lax.reduce_sum(lax.dynamic_update_slice(x, u, (1, 1)), (0, 1)))(x)
    np.testing.assert_allclose(np.asarray(g), [[1, 1, 1], [1, 0, 0]])
    g = fg.grad(lambda y: lax.reduce_sum(lax.concatenate([x, y, x], 0), (0, 1)))(x)
    np.testing.assert_allclose(np.asarray(g), np.ones((2, 3)))


def test_integer_index_operands_are_not_differentiated(x64):
    # A traced start index (an integer derived from the differentiated input's shape-free
    # values) gets no tangent: only the operand is differentiated.
    x = np.arange(5.0)

    def f(x, i):
        return lax.dynamic_slice(x, (i,), (2,))

    out, t = fg.jvp(lambda x: f(x, np.int32(2)), (x,), (np.ones(5),))
    np.testing.assert_allclose(np.asarray(t), [1.0, 1.0])
    _, vjp_fn = fg.vjp(f, x, np.int32(4))
    ct_x, ct_i = vjp_fn(np.array([1.0, 2.0]))
    np.testing.assert_allclose(np.asarray(ct_x), [0, 0, 0, 1, 2])  # start 4 clamps to 3
    assert np.asarray(ct_i).dtype == dtypes.float0


def test_iota_has_zero_tangent(x64):
    def f(s):
        return lax.mul(lax.convert_element_type(lax.iota(np.int32, 3), np.float64), s)

    out, t = fg.jvp(f, (np.float64(2.0),), (np.float64(1.0),))
    np.testing.assert_allclose(np.asarray(out), [0, 2, 4])
    np.testing.assert_allclose(np.asarray(t), [0, 1, 2])


# -- hypothesis: configurations of the parameterised primitives ---------------------------------


@st.composite
def _pad_case(draw):
    shape_ = tuple(draw(st.lists(st.integers(0, 3), min_size=0, max_size=3)))
    config = []
    for n in shape_:
        interior = draw(st.integers(0, 2))
        inner = n + max(n - 1, 0) * interior
        lo = draw(st.integers(-min(inner, 2), 2))
        hi = draw(st.integers(-min(inner + lo, 2) if inner + lo > 0 else 0, 2))
        config.append((lo, hi, interior))
    return shape_, tuple(config)


@few
@given(_pad_case())
def test_pad_rules_hypothesis(case):
    shape_, config = case
    fg.config.update("enable_x64", True)
    try:
        x = np.random.default_rng(1).standard_normal(shape_)
        check_linear(lambda x, v: lax.pad(x, v, config), [x, np.float64(0.5)])
    finally:
        fg.config.update("enable_x64", False)


@st.composite
def _slice_case(draw):
    shape_ = tuple(draw(st.lists(st.integers(0, 4), min_size=1, max_size=3)))
    start, limit, strides = [], [], []
    for n in shape_:
        s = draw(st.integers(0, n))
        start.append(s)
        limit.append(draw(st.integers(s, n)))
        strides.append(draw(st.integers(1, 3)))
    return shape_, tuple(start), tuple(limit), tuple(strides)


@few
@given(_slice_case())
def test_slice_rules_hypothesis(case):
    shape_, start, limit, strides = case
    fg.config.update("enable_x64", True)
    try:
        x = np.random.default_rng(2).standard_normal(shape_)
        check_linear(lambda x: lax.slice(x, start, limit, strides), [x])
    finally:
        fg.config.update("enable_x64", False)


@st.composite
def _broadcast_case(draw):
    in_shape = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=3)))
    out_shape, dims = [], []
    for n in in_shape:
        for _ in range(draw(st.integers(0, 1))):  # a new dimension before this one
            out_shape.append(draw(st.integers(0, 3)))
        dims.append(len(out_shape))
        out_shape.append(draw(st.integers(1, 3)) if n == 1 else n)  # stretch size-1 dims
    if draw(st.booleans()):
        out_shape.append(2)
    return in_shape, tuple(out_shape), tuple(dims)


@few
@given(_broadcast_case())
def test_broadcast_in_dim_rules_hypothesis(case):
    in_shape, out_shape, dims = case
    fg.config.update("enable_x64", True)
    try:
        x = np.random.default_rng(3).standard_normal(in_shape)
        check_linear(lambda x: lax.broadcast_in_dim(x, out_shape, dims), [x])
    finally:
        fg.config.update("enable_x64", False)


@st.composite
def _dynamic_case(draw):
    shape_ = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    sizes = tuple(draw(st.integers(0, n)) for n in shape_)
    starts = tuple(draw(st.integers(-n - 1, n + 1)) for n in shape_)  # wrapped and clamped
    return shape_, sizes, starts


@few
@given(_dynamic_case())
def test_dynamic_slice_and_update_rules_hypothesis(case):
    shape_, sizes, starts = case
    fg.config.update("enable_x64", True)
    try:
        rng = np.random.default_rng(4)
        x, u = rng.standard_normal(shape_), rng.standard_normal(sizes)
        check_linear(lambda x: lax.dynamic_slice(x, starts, sizes), [x])
        check_linear(lambda x, u: lax.dynamic_update_slice(x, u, starts), [x, u])
    finally:
        fg.config.update("enable_x64", False)


# -- vmap against a Python loop --------------------------------------------------------------------

B = 3


def check_vmap(f, args, in_axes, out_axes=0):
    """``vmap(f)`` over ``args`` (each a stack of B examples on axis 0, or one example for
    in_axes None) against a loop; returns the batched jaxpr."""
    moved = [a if ax is None else np.moveaxis(a, 0, ax) for a, ax in zip(args, in_axes)]
    got = fg.vmap(f, in_axes=tuple(in_axes), out_axes=out_axes)(*moved)
    want = np.stack(
        [
            np.asarray(f(*[a if ax is None else a[b] for a, ax in zip(args, in_axes)]))
            for b in range(B)
        ]
    )
    want = np.moveaxis(want, 0, out_axes)
    assert isinstance(got, fg.Array)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got), want)
    return fg.make_jaxpr(fg.vmap(f, in_axes=tuple(in_axes), out_axes=out_axes))(*moved).jaxpr


_r = np.random.default_rng(7)
X = _r.standard_normal((B, 2, 3)).astype(np.float32)
U = _r.standard_normal((B, 1, 2)).astype(np.float32)
V = _r.standard_normal((B,)).astype(np.float32)
I = np.array([0, 1, 5], np.int32)  # noqa: E741 (index array)
J = np.array([-1, 2, 0], np.int32)
X0, U0, V0 = X[0], U[0], V[0]

UNARY = {
    "broadcast_in_dim": lambda x: lax.broadcast_in_dim(x, (4, 2, 5, 3), (1, 3)),
    "broadcast_in_dim_stretch": lambda x: lax.broadcast_in_dim(
        lax.slice(x, (0, 0), (1, 3)), (4, 2, 3), (0, 2)
    ),
    "reshape": lambda x: lax.reshape(x, (3, 2)),
    "reshape_dimensions": lambda x: lax.reshape(x, (3, 2), (1, 0)),
    "transpose": lambda x: lax.transpose(x, (1, 0)),
    "squeeze": lambda x: lax.squeeze(lax.reshape(x, (2, 1, 3, 1)), (1, 3)),
    "rev": lambda x: lax.rev(x, (1,)),
    "slice": lambda x: lax.slice(x, (0, 1), (2, 3), (2, 1)),
    "dynamic_slice": lambda x: lax.dynamic_slice(x, (1, -2), (1, 2)),
    "pad": lambda x: lax.pad(x, np.float32(-1), ((1, -1, 1), (-1, 2, 2))),
}


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_vmap_unary(name, axis):
    check_vmap(UNARY[name], [X], [axis])


BINARY = {
    "concatenate": (lambda x, y: lax.concatenate([x, y, x], 1), [X, X * 2]),
    "concatenate0": (lambda x, y: lax.concatenate([y, x], 0), [X, X * 2]),
    "pad": (lambda x, v: lax.pad(x, v, ((1, -1, 1), (-1, 2, 2))), [X, V]),
    "dynamic_slice_index": (lambda x, i: lax.dynamic_slice(x, (0, i), (2, 2)), [X, I]),
    "dynamic_slice_indices": (lambda x, j: lax.dynamic_slice(x, (j, j), (1, 2)), [X, J]),
    "dynamic_update_slice": (lambda x, u: lax.dynamic_update_slice(x, u, (1, -1)), [X, U]),
    "dynamic_update_slice_index": (lambda x, j: lax.dynamic_update_slice(x, U0, (j, 1)), [X, J]),
}


@pytest.mark.parametrize("axes", [(0, 0), (1, 0), (-1, 0), (0, None), (None, 0), (2, 1), (1, None)])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_vmap_binary(name, axes):
    f, args = BINARY[name]
    axes = [None if ax is None else (ax if a.ndim > 1 else 0) for a, ax in zip(args, axes)]
    check_vmap(f, [a[0] if ax is None else a for a, ax in zip(args, axes)], axes)


@pytest.mark.parametrize(
    "axes", [(0, 0, 0), (None, 0, None), (1, None, 0), (None, None, 0), (2, 1, 0)]
)
def test_vmap_dynamic_update_slice_batched_indices(axes):
    f = lambda x, u, i: lax.dynamic_update_slice(x, u, (i, -1))  # noqa: E731
    args = [
        X if axes[0] is not None else X0,
        U if axes[1] is not None else U0,
        J if axes[2] is not None else J[0],
    ]
    check_vmap(f, args, list(axes))


def test_vmap_dynamic_slice_batched_indices_mixed():
    f = lambda x, i, j: lax.dynamic_slice(x, (j, i), (1, 2))  # noqa: E731
    check_vmap(f, [X, I, J], [1, 0, 0])
    check_vmap(f, [X0, I, J[0]], [None, 0, None])
    check_vmap(f, [X, I[0], J], [-1, None, 0])


def test_vmap_iota_and_full_inside_batched_code():
    check_vmap(
        lambda x: lax.add(
            x, lax.convert_element_type(lax.broadcasted_iota(np.int32, (2, 3), 1), np.float32)
        ),
        [X],
        [1],
    )


# -- unbatched operands stay unbatched; params shift instead of moving data -----------------------


def _prims(jaxpr):
    return [e.primitive.name for e in jaxpr.eqns]


def _batch_rule_jaxpr(f, args, dims):
    """The jaxpr of ``f`` batched by the rules alone (no moving of the result's batch dim, which
    ``fg.vmap`` adds for out_axes), and the result's batch dim."""
    out_dim = []

    def batched(*xs):
        (out,), (d,) = vmap_flat(lambda *ys: [f(*ys)], B, list(xs), dims)
        out_dim.append(d)
        return out

    return fg.make_jaxpr(batched)(*args).jaxpr, out_dim[0]


def test_vmap_shifts_params_instead_of_transposing():
    for name in (
        "broadcast_in_dim",
        "reshape",
        "squeeze",
        "rev",
        "slice",
        "transpose",
        "dynamic_slice",
        "pad",
    ):
        jaxpr = check_vmap(UNARY[name], [X], [0])
        assert "transpose" not in _prims(jaxpr) or name == "transpose", (name, jaxpr)
    # broadcast_in_dim puts the batch dim after the result dim of the operand dim before it
    jaxpr, d = _batch_rule_jaxpr(UNARY["broadcast_in_dim"], [np.moveaxis(X, 0, 1)], [1])
    assert _prims(jaxpr) == ["broadcast_in_dim"] and d == 2, jaxpr
    for name in ("rev", "slice", "dynamic_slice", "pad"):  # the batch dim stays in place
        jaxpr, d = _batch_rule_jaxpr(UNARY[name], [np.moveaxis(X, 0, 2)], [2])
        assert _prims(jaxpr) == [name] and d == 2, jaxpr
    x4 = np.moveaxis(X.reshape(B, 2, 1, 3, 1), 0, 2)
    jaxpr, d = _batch_rule_jaxpr(lambda x: lax.squeeze(x, (1, 3)), [x4], [2])
    assert _prims(jaxpr) == ["squeeze"] and d == 1, jaxpr
    # operands batched at the same dim are concatenated there
    jaxpr, d = _batch_rule_jaxpr(BINARY["concatenate"][0], [np.moveaxis(X, 0, 1)] * 2, [1, 1])
    assert _prims(jaxpr) == ["concatenate"] and d == 1, jaxpr


def test_vmap_unbatched_operands_stay_unbatched():
    # an unbatched padding value is not broadcast
    jaxpr = check_vmap(BINARY["pad"][0], [X, V0], [0, None])
    assert _prims(jaxpr) == ["pad"], jaxpr
    # batched start indices with an unbatched operand: a gather reading the operand as is
    jaxpr = check_vmap(BINARY["dynamic_slice_index"][0], [X0, I], [None, 0])
    (gather,) = [e for e in jaxpr.eqns if e.primitive.name == "gather"]
    assert gather.invars[0] is jaxpr.invars[0], jaxpr
    # unbatched start indices keep the dynamic_slice primitive
    jaxpr = check_vmap(lambda x, i: lax.dynamic_slice(x, (0, i), (2, 2)), [X, I[1]], [0, None])
    assert "dynamic_slice" in _prims(jaxpr) and "gather" not in _prims(jaxpr), jaxpr
    text = str(fg.make_jaxpr(fg.vmap(lambda x: lax.slice(x, (0, 1), (2, 3))))(X))
    assert "slice[limit_indices=(3, 2, 3) start_indices=(0, 0, 1) strides=None]" in text


# -- grad of composites, vmap(grad), jacfwd vs jacrev -------------------------------------------


def _composite(x, y):
    """A scalar function mixing every shape primitive (and products, so it is not linear)."""
    a = lax.pad(x, np.float64(0.3), ((1, 0, 1), (0, -1, 0)))  # (4, 2)
    b = lax.transpose(lax.reshape(a, (2, 4)), (1, 0))  # (4, 2)
    c = lax.concatenate([b, lax.rev(lax.broadcast_in_dim(y, (4, 1), (0,)), (0,))], 1)
    d = lax.dynamic_update_slice(c, lax.slice(c, (0, 0), (2, 3), (2, 2)), (2, 1))
    e = lax.dynamic_slice(d, (1, 1), (3, 2))
    s = lax.squeeze(lax.slice(e, (0, 0), (3, 1)), (1,))
    return lax.reduce_sum(lax.mul(lax.mul(e, e), lax.broadcast_in_dim(s, (3, 2), (0,))), (0, 1))


def test_grad_of_composite_matches_finite_differences(x64):
    rng = np.random.default_rng(11)
    x, y = rng.standard_normal((2, 3)), rng.standard_normal(4)
    check_grads(_composite, (x, y), order=2, modes=("fwd", "rev"))
    gx, gy = fg.grad(_composite, argnums=(0, 1))(x, y)
    h = 1e-6
    num = np.zeros(x.size)
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = h
        num[k] = (
            float(_composite(x + e.reshape(x.shape), y))
            - float(_composite(x - e.reshape(x.shape), y))
        ) / (2 * h)
    np.testing.assert_allclose(np.ravel(gx), num, rtol=1e-6, atol=1e-8)
    assert gy.shape == (4,) and gy.dtype == np.float64


def test_transforms_commute_on_composite(x64):
    rng = np.random.default_rng(12)
    assert_transforms_commute(_composite, (rng.standard_normal((2, 3)), rng.standard_normal(4)))


def test_vmap_of_grad_matches_loop(x64):
    rng = np.random.default_rng(13)
    xs, ys = rng.standard_normal((B, 2, 3)), rng.standard_normal((B, 4))
    g = fg.grad(_composite, argnums=(0, 1))
    gx, gy = fg.vmap(g, in_axes=(0, 0))(xs, ys)
    for b in range(B):
        lx, ly = g(xs[b], ys[b])
        np.testing.assert_allclose(np.asarray(gx[b]), np.asarray(lx), rtol=1e-12)
        np.testing.assert_allclose(np.asarray(gy[b]), np.asarray(ly), rtol=1e-12)
    # one operand unbatched
    gx1, gy1 = fg.vmap(g, in_axes=(0, None))(xs, ys[0])
    np.testing.assert_allclose(np.asarray(gx1[1]), np.asarray(g(xs[1], ys[0])[0]), rtol=1e-12)


def test_jacfwd_equals_jacrev(x64):
    rng = np.random.default_rng(14)
    x = rng.standard_normal((3, 2))

    def f(x):
        p = lax.pad(x, np.float64(0.0), ((0, 1, 1), (1, -1, 0)))  # linear in x
        return lax.dynamic_update_slice(lax.rev(p, (0,)), lax.slice(x, (0, 0), (2, 1)), (1, 1))

    jf, jr = fg.jacfwd(f)(x), fg.jacrev(f)(x)
    assert jf.shape == (6, 2, 3, 2)
    np.testing.assert_allclose(np.asarray(jf), np.asarray(jr), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(jf).reshape(12, 6), _jacobian(f, [x]), rtol=1e-12)


def test_grad_through_batched_index_dynamic_slices(x64):
    # vmap with per-example start indices goes through gather/scatter: grad of it must still
    # equal the loop of per-example gradients.
    xs = np.random.default_rng(15).standard_normal((B, 5))

    def f(x, i):
        return lax.reduce_sum(
            lax.mul(lax.dynamic_slice(x, (i,), (2,)), lax.dynamic_slice(x, (i,), (2,))), (0,)
        )

    g = fg.grad(lambda xs: fnp.sum(fg.vmap(f)(xs, I)))(xs)
    for b in range(B):
        np.testing.assert_allclose(
            np.asarray(g[b]), np.asarray(fg.grad(f)(xs[b], I[b])), rtol=1e-12
        )

    def h(x, u, i):  # per-example update positions: a scatter under vmap
        y = lax.dynamic_update_slice(x, lax.mul(u, u), (i,))
        return lax.reduce_sum(lax.mul(y, y), (0,))

    us = np.random.default_rng(16).standard_normal((B, 2))
    gx, gu = fg.grad(lambda xs, us: fnp.sum(fg.vmap(h)(xs, us, J)), argnums=(0, 1))(xs, us)
    for b in range(B):
        lx, lu = fg.grad(h, argnums=(0, 1))(xs[b], us[b], J[b])
        np.testing.assert_allclose(np.asarray(gx[b]), np.asarray(lx), rtol=1e-12)
        np.testing.assert_allclose(np.asarray(gu[b]), np.asarray(lu), rtol=1e-12)


# -- threefry2x32 ---------------------------------------------------------------------------------


def test_threefry_vmap_matches_loop():
    rng = np.random.default_rng(16)
    k = rng.integers(0, 2**32, (B, 2), dtype=np.uint32)
    x = rng.integers(0, 2**32, (B, 4), dtype=np.uint32)

    def f(k, x):
        return lax.threefry2x32(k[0], k[1], np.uint32(7), x)

    for in_axes in [(0, 0), (0, None), (None, 0), (0, 1)]:
        xa = x if in_axes[1] != 1 else x.T
        if in_axes[1] is None:
            xa = x[0]
        ka = k if in_axes[0] is not None else k[0]
        y1, y2 = fg.vmap(f, in_axes=in_axes)(ka, xa)
        for b in range(B):
            w1, w2 = f(ka if in_axes[0] is None else k[b], xa if in_axes[1] is None else x[b])
            np.testing.assert_array_equal(np.asarray(y1[b]), np.asarray(w1))
            np.testing.assert_array_equal(np.asarray(y2[b]), np.asarray(w2))
    assert np.asarray(y1).dtype == np.uint32


def test_threefry_jvp_rule_gives_zero_tangents():
    # Called directly (integer inputs never carry tangents through the public API).
    from fungrad.transforms.jvp import Zero, jvp_flat

    k = np.uint32(5)
    outs, touts = jvp_flat(
        lambda x: lax.threefry2x32(k, k, x, x),
        [fg.Array(np.arange(3, dtype=np.uint32))],
        [fg.Array(np.ones(3, np.uint32))],
    )
    assert all(type(t) is Zero for t in touts)
    assert [t.aval.shape for t in touts] == [(3,), (3,)]
