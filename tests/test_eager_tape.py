"""The fast paths behind eager grad: linearizations compiled to Python functions
(pycodegen.python_function) with and without ``check_impl_avals``, the floating-point
error state set once per compiled function, specialized impls (dot_general's layout plan),
the broadcast view made without np.broadcast_to, the cheap promotion and reduction paths of
fungrad.numpy, interned avals, and the pytree and dtype shortcuts. Each is checked against the
path it shortcuts: eval_jaxpr, np.broadcast_to, the general promotion, numpy."""

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import core, dtypes, lax, tree_util
from fungrad.lax import utils as lax_utils
from fungrad.numpy import util
from fungrad.transforms import pycodegen, tape


@pytest.fixture(params=[True, False], ids=["checked", "unchecked"])
def check_mode(request):
    """Run with config.check_impl_avals on (as the rest of the suite) and off (the code users
    run: the unchecked version of each compiled function)."""
    old = fg.config.check_impl_avals
    fg.config.update("check_impl_avals", request.param)
    try:
        yield request.param
    finally:
        fg.config.update("check_impl_avals", old)


def _vjp_grad(f, *args):
    out, pullback = fg.vjp(f, *args)
    return pullback(np.ones((), np.asarray(out).dtype))


# -- compiled programs ------------------------------------------------------------------------


def test_python_function_matches_eval_jaxpr(check_mode):
    def f(x, y):
        a = lax.dot_general(x, y, (((1,), (0,)), ((), ())))
        vals, idx = lax.top_k(a, 2)  # a multiple-results primitive
        a = a.at[np.array([0, 2])].add(1.5)  # scatter-add: not a Python name
        vals = vals + lax.iota(np.float32, 2) + fnp.sum(a)  # iota: an equation without inputs
        return fnp.tanh(vals) * 2.0 + 1.0, idx, x  # literals, an input as an output

    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    y = np.linspace(0, 2, 20, dtype=np.float32).reshape(4, 5)
    closed = fg.make_jaxpr(f)(x, y)
    fn = pycodegen.python_function(closed, "f")
    got = fn(x, y)
    want = core.eval_jaxpr(closed.jaxpr, closed.consts, fg.Array(x), fg.Array(y))
    assert len(got) == len(want) == 3
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
        assert np.asarray(g).dtype == np.asarray(w).dtype
    spread = pycodegen.python_function(closed, "f", (5, (4, 0, 2)))(x, y)
    assert spread[1] is None and spread[3] is None
    np.testing.assert_array_equal(spread[4], np.asarray(want[0]))
    np.testing.assert_array_equal(spread[2], x)


def test_checked_functions_catch_an_impl_that_disagrees_with_its_shape_rule():
    closed = fg.make_jaxpr(lambda x: lax.neg(x))(np.ones(3, np.float32))
    fn = pycodegen.python_function(closed, "neg")
    bad = np.ones(3, np.float64)  # a value the equation's aval does not describe
    old = fg.config.check_impl_avals
    try:
        fg.config.update("check_impl_avals", True)
        with pytest.raises(AssertionError, match="abstract_eval says f32"):
            fn(bad)
        fg.config.update("check_impl_avals", False)
        assert fn(bad)[0].dtype == np.float64  # the unchecked version does not look
    finally:
        fg.config.update("check_impl_avals", old)


def test_tape_grads_match_the_jaxpr_path_with_and_without_checks(check_mode):
    rng = np.random.default_rng(1)
    params = [
        (rng.standard_normal((3, 5)).astype(np.float32), np.zeros(5, np.float32)),
        (rng.standard_normal((5, 2)).astype(np.float32), np.ones(2, np.float32)),
    ]
    xb = rng.standard_normal((4, 3)).astype(np.float32)
    yb = rng.standard_normal((4, 2)).astype(np.float32)

    def loss(params, xb, yb):
        h = xb
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i == 0:
                h = fnp.tanh(h) * 0.5 + fnp.maximum(h, 0.0)
        return fnp.mean((h - yb) ** 2) + 1e-3 * fnp.sum(params[0][0] ** 2)

    want = _vjp_grad(lambda p: loss(p, xb, yb), params)[0]
    for _ in range(2):  # the second call runs the cached, compiled linearizations
        got = fg.grad(loss)(params, xb, yb)
        for g, w in zip(tree_util.tree_leaves(got), tree_util.tree_leaves(want)):
            assert np.asarray(g).dtype == np.float32
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-6, atol=1e-6)


def test_first_order_primitives_get_compiled_linearizations():
    tape._linearized_cache.clear()

    def f(x):
        s = fnp.sort(x, axis=0) * x  # sort's rule builds an iota
        s = s.at[np.array([0, 0, 2])].add(x[1])  # scatter-add
        return fnp.sum(fnp.exp(s) / (1.0 + x * x)) + fnp.max(x)

    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    g = fg.grad(f)(x)
    np.testing.assert_allclose(np.asarray(g), np.asarray(_vjp_grad(f, x)[0]), rtol=2e-6)
    entries = {k[0].name: e for k, e in tape._linearized_cache.items()}
    assert {"sort", "scatter-add", "exp", "div", "reduce_max"} <= set(entries)
    assert all(type(e) is tape._Linearized for e in entries.values()), entries


def test_unused_outputs_of_a_primitive_send_no_zero_cotangent():
    """A multi-output primitive whose outputs are only partly used (``lax.sort``'s sorted
    keys) gives its other inputs no cotangent at all, not zeros: the keys' ``sqrt`` at a
    negative x has a NaN derivative, and ``0 * nan`` made the eager gradient NaN where
    ``jit(grad)`` and JAX give [1, 3, 2] (differential fuzzer, seed 180236). A key used too
    does propagate (``h``), and its NaN with it, as in JAX."""
    x = np.array([0.5, -1.0, 2.0], np.float32)
    w = np.array([1.0, 2.0, 3.0], np.float32)

    def f(x):
        return fnp.sum(lax.sort((fnp.sqrt(x), x), dimension=0, num_keys=1)[1] * w)

    def h(x):
        keys, vals = lax.sort((fnp.sqrt(x), x), dimension=0, num_keys=1)
        return fnp.sum(vals * w) + fnp.sum(fnp.where(fnp.isnan(keys), 0.0, keys))

    tape._linearized_cache.clear()
    for _ in range(2):  # built, then from the cache
        np.testing.assert_array_equal(np.asarray(fg.grad(f)(x)), [1.0, 3.0, 2.0])
        np.testing.assert_array_equal(np.asarray(fg.jit(fg.grad(f))(x)), [1.0, 3.0, 2.0])
        assert np.isnan(np.asarray(fg.grad(h)(x))[1])
        np.testing.assert_array_equal(np.asarray(fg.grad(h)(x)), np.asarray(_vjp_grad(h, x)[0]))


def test_tape_values_cannot_be_written_through_numpy():
    seen = []

    def f(x):
        y = fnp.tanh(x)
        seen.append(np.asarray(y))  # the value leaves the tape: it must be read-only
        return fnp.sum(y * y)

    x = np.linspace(-1, 1, 5, dtype=np.float32)
    g = fg.grad(f)(x)
    assert not seen[0].flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        seen[0][0] = 5.0
    np.testing.assert_allclose(np.asarray(g), 2 * np.tanh(x) * (1 - np.tanh(x) ** 2), rtol=1e-6)


# -- floating-point errors ----------------------------------------------------------------------


def test_impls_never_warn_and_restore_the_callers_error_state(check_mode):
    big = np.full(3, 3e38, np.float32)
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise"):
            assert np.isinf(np.asarray(fg.Array(big) * 10.0)).all()
            assert np.isinf(np.asarray(lax.dot_general(big, big, (((0,), (0,)), ((), ())))))
            assert np.isnan(np.asarray(fnp.log(fg.Array(-big)))).all()
            g = fg.grad(lambda x: fnp.sum(fnp.exp(x) * x))(big)
            assert np.isinf(np.asarray(g)).all()
            with pytest.raises(FloatingPointError):  # the caller's state is back in force
                np.float32(3e38) * np.float32(10)
    assert np.geterr() == before


def test_ignore_fp_errors_restores_the_state_when_the_function_raises():
    @lax_utils.ignore_fp_errors
    def fails(x):
        np.float32(3e38) * np.float32(x)  # would raise under "raise"
        raise KeyError("boom")

    with np.errstate(all="raise"):
        with pytest.raises(KeyError):
            fails(10.0)
        with pytest.raises(FloatingPointError):
            np.float32(3e38) * np.float32(10)


# -- dot_general's plan, broadcast_in_dim's view ------------------------------------------------


@pytest.mark.parametrize(
    "lshape, rshape, dims",
    [
        ((3, 4), (4,), (((1,), (0,)), ((), ()))),  # matrix @ vector
        ((3,), (5,), (((), ()), ((), ()))),  # outer product
        ((4, 3), (4, 2), (((0,), (0,)), ((), ()))),  # lhs transposed
        ((2, 3, 4), (2, 5, 4), (((2,), (2,)), ((0,), (0,)))),  # batched
        ((0, 3), (3, 2), (((1,), (0,)), ((), ()))),  # empty result
        ((2, 0), (0, 3), (((1,), (0,)), ((), ()))),  # empty sum: zeros
        ((), (3,), (((), ()), ((), ()))),  # a 0-d operand
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.bool_])
def test_specialized_dot_general_matches_the_impl(lshape, rshape, dims, dtype):
    rng = np.random.default_rng(0)
    lhs = (rng.standard_normal(lshape) * 3).astype(dtype)
    rhs = (rng.standard_normal(rshape) * 3).astype(dtype)
    params = dict(dimension_numbers=dims, precision=None, preferred_element_type=None)
    want = lax.dot_general_p.impl(lhs, rhs, **params)
    spec = lax_utils.specialized_impls[lax.dot_general_p](
        core.get_aval(lhs), core.get_aval(rhs), **params
    )
    with np.errstate(all="ignore"):
        got = spec(lhs, rhs)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    ref = np.einsum(
        {
            1: "ij,j->i",
            2: "i,j->ij",
            3: "ki,kj->ij",
            4: "bik,bjk->bij",
            5: "ij,jk->ik",
            6: "ij,jk->ik",
            7: ",j->j",
        }[_CASES.index(lshape) + 1],
        lhs.astype(np.float64),
        rhs.astype(np.float64),
    )
    np.testing.assert_allclose(
        np.asarray(got, np.float64),
        ref.astype(dtype).astype(np.float64),
        rtol=2e-3 if dtype == np.float16 else 1e-6,
        atol=1e-2,
    )


_CASES = [(3, 4), (3,), (4, 3), (2, 3, 4), (0, 3), (2, 0), ()]


@given(st.data())
def test_broadcast_in_dim_view_matches_numpy(data):
    out_shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=3))
    dims = sorted(
        data.draw(st.sets(st.integers(0, max(len(out_shape) - 1, 0)), max_size=len(out_shape)))
    )
    in_shape = tuple(data.draw(st.sampled_from([1, out_shape[d]])) for d in dims)
    x = np.arange(int(np.prod(in_shape)), dtype=np.float32).reshape(in_shape)
    if data.draw(st.booleans()) and x.ndim >= 2:
        x = np.ascontiguousarray(x.swapaxes(0, 1)).swapaxes(0, 1)  # a non-contiguous operand
    got = lax.broadcast_in_dim_p.impl(x, shape=out_shape, broadcast_dimensions=tuple(dims))
    expanded = [1] * len(out_shape)
    for i, d in enumerate(dims):
        expanded[d] = in_shape[i]
    want = np.broadcast_to(x.reshape(expanded), out_shape)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert not got.flags.writeable
    np.testing.assert_array_equal(got, want)


# -- fungrad.numpy fast paths -------------------------------------------------------------------

_OPERANDS = {
    "f32": lambda: fg.Array(np.arange(6, dtype=np.float32).reshape(2, 3)),
    "f32_row": lambda: fg.Array(np.arange(3, dtype=np.float32)),
    "f32_weak": lambda: fnp.asarray(2.5),
    "f16": lambda: fg.Array(np.ones(3, np.float16)),
    "i32": lambda: fg.Array(np.arange(3, dtype=np.int32)),
    "py_float": lambda: 1.5,
    "py_int": lambda: 3,
    "py_bool": lambda: True,
}


@pytest.mark.parametrize("a", sorted(_OPERANDS))
@pytest.mark.parametrize("b", sorted(_OPERANDS))
def test_promote_args_fast_path_agrees_with_the_general_path(a, b):
    x, y = _OPERANDS[a](), _OPERANDS[b]()
    try:
        want = util.promote_shapes("t", *util.promote_dtypes(x, y, fun_name="t"))
    except (TypeError, ValueError) as e:
        with pytest.raises(type(e)):
            util.promote_args("t", x, y)
        return
    got = util.promote_args("t", x, y)
    for g, w in zip(got, want):
        assert g.aval == w.aval  # shape, dtype and weak type
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_broadcast_shapes_and_its_errors():
    assert util.broadcast_shapes((16, 32), (32,)) == (16, 32)
    assert util.broadcast_shapes((2, 1), (1, 3), (3,)) == (2, 3)
    assert util.broadcast_shapes((0,), (1,)) == (0,)
    assert util.broadcast_shapes() == ()
    for shapes in [((2,), (3,)), ((0,), (3,)), ((4, 2), (3, 1))]:
        with pytest.raises(
            ValueError,
            match=r"f: incompatible shapes for broadcasting: "
            r"\(.*\) and \(.*\)",
        ):
            util.broadcast_shapes(*shapes, fun_name="f")


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.arange(6, dtype=np.float32).reshape(2, 3),
        lambda: fnp.asarray(2.5),  # weak: the sum is strongly typed
        lambda: np.ones(4, np.float16),  # accumulates in float32
        lambda: np.arange(5, dtype=np.int32),
        lambda: np.zeros((0, 3), np.float32),
    ],
)
def test_sum_of_everything_matches_the_general_reduction(make):
    x = make()
    got = fnp.sum(x)
    want = fnp.sum(x, axis=tuple(range(np.ndim(x))))  # the general path
    assert got.aval == want.aval
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert fnp.sum(x, dtype=np.asarray(want).dtype).aval == want.aval


# -- avals, dtypes, pytrees ---------------------------------------------------------------------


def test_equal_concrete_avals_are_one_object():
    a = fg.Array(np.ones((2, 3), np.float32))
    b = fnp.asarray(np.zeros((2, 3), np.float32))
    assert a.aval is b.aval and a.aval == core.ShapedArray((2, 3), np.float32)
    assert core.get_aval(np.float32(1)) is core.get_aval(np.float32(2))
    assert core.get_aval(2.0) is core.get_aval(3.0) and core.get_aval(2.0).weak_type
    assert fnp.asarray(2.0).aval != fg.Array(np.float32(2)).aval  # weak vs strong


@pytest.mark.parametrize("x64", [False, True])
def test_canonicalize_dtype_table_matches_the_rule(x64):
    old = fg.config.enable_x64
    fg.config.update("enable_x64", x64)
    try:
        for dt in dtypes.SUPPORTED:
            narrow = {"c": np.complex64, "f": np.float32, "i": np.int32, "u": np.uint32}
            wide = dt.itemsize > (8 if dt.kind == "c" else 4) and dt.kind != "b"
            want = np.dtype(narrow[dt.kind]) if wide and not x64 else dt
            assert dtypes.canonicalize_dtype(dt) == want
            assert dtypes.canonicalize_dtype(dt.type) == want
        with pytest.raises(TypeError, match="not supported"):
            dtypes.canonicalize_dtype(np.dtype("U3"))
    finally:
        fg.config.update("enable_x64", old)


@pytest.mark.parametrize("tree", [(1, 2), [1, 2, 3], (), [], (1, None), ((1,), 2), {"a": 1}])
def test_unflatten_round_trips(tree):
    leaves, treedef = tree_util.tree_flatten(tree)
    rebuilt = tree_util.tree_unflatten(treedef, leaves)
    assert rebuilt == tree and type(rebuilt) is type(tree)
    with pytest.raises(ValueError, match="expects"):
        tree_util.tree_unflatten(treedef, leaves + [0])
