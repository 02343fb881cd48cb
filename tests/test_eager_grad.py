"""Eager grad's tape (tape.TapeTrace): per-primitive linearizations cached by aval
signature and evaluated with the numpy impls, the general path for rules that need values, and
the semantics grad must keep (control flow on values, nested grads, custom rules, symbolic
zeros, aux, pytrees, escaped tracers). The reference is fg.vjp, which linearizes the whole
function into a jaxpr and transposes it (the path the tape replaces for eager grad)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.transforms import tape


def _vjp_grad(f, *args):
    """grad through the whole-function linearize + transpose path (the reference)."""
    out, pullback = fg.vjp(f, *args)
    return pullback(np.ones((), np.asarray(out).dtype))


def _assert_tree_close(got, want, rtol=1e-6, atol=1e-6):
    got_l, want_l = fg.tree_util.tree_leaves(got), fg.tree_util.tree_leaves(want)
    assert len(got_l) == len(want_l)
    for g, w in zip(got_l, want_l):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)


_FUNCTIONS = {
    "tanh_matmul": lambda w, x: fnp.sum(fnp.tanh(w @ x)),
    "broadcast_ops": lambda w, x: fnp.mean((w * 2.0 + x[None, :] - 1.0) ** 2),
    "transcendental": lambda w, x: fnp.sum(fnp.exp(-w * w) * fnp.sin(w) + fnp.log1p(w * w)),
    "max_and_where": lambda w, x: fnp.sum(fnp.where(w > 0, w, 0.1 * w) + fnp.max(w, axis=0)),
    "reshape_transpose": lambda w, x: fnp.sum(fnp.reshape(w.T, (-1,))[::3] * 3.0),
    "softmax_sort": lambda w, x: fnp.sum(fg.nn.softmax(w, axis=-1) * fnp.sort(w, axis=0)),
    "div_sqrt": lambda w, x: fnp.sum(fnp.sqrt(w * w + 1.0) / (x + 3.0)),
    "integer_ops": lambda w, x: fnp.sum(w * fnp.argmax(w, axis=1)[:, None].astype(np.float32)),
}


@pytest.mark.parametrize("name", sorted(_FUNCTIONS))
def test_tape_matches_the_jaxpr_path(name):
    f = _FUNCTIONS[name]
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 4)).astype(np.float32)
    x = rng.standard_normal(4).astype(np.float32)
    want = _vjp_grad(lambda w: f(w, x), w)[0]
    for _ in range(2):  # the second call runs the cached linearizations
        _assert_tree_close(fg.grad(f)(w, x), want, rtol=2e-6, atol=1e-6)
    want_both = _vjp_grad(f, w, x)
    _assert_tree_close(fg.grad(f, argnums=(0, 1))(w, x), want_both, rtol=2e-6, atol=1e-6)


@given(
    hnp.arrays(
        np.float32,
        hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=4),
        elements=st.floats(-3, 3, width=32) | st.sampled_from([np.nan, np.inf, -np.inf]),
    )
)
def test_elementwise_chain_on_any_shape(a):
    def f(x):
        return fnp.sum(fnp.tanh(x) * x + fnp.exp(-fnp.abs(x)))

    got = np.asarray(fg.grad(f)(a))
    want = np.asarray(_vjp_grad(f, a)[0])
    assert got.shape == a.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)  # NaNs must match NaNs


@given(st.integers(1, 5), st.integers(1, 5))
def test_tanh_matmul_matches_numpy(m, n):
    rng = np.random.default_rng(m * 7 + n)
    w = rng.standard_normal((m, n)).astype(np.float32)
    x = rng.standard_normal(n).astype(np.float32)
    got = fg.grad(lambda w: fnp.sum(fnp.tanh(w @ x)))(w)
    want = np.outer(1 - np.tanh(w.astype(np.float64) @ x) ** 2, x)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


def test_linearizations_are_cached_by_signature():
    tape._linearized_cache.clear()
    f = fg.grad(lambda x: fnp.sum(fnp.tanh(x)))
    f(np.ones(3, np.float32))
    n = len(tape._linearized_cache)
    assert n >= 2  # tanh and reduce_sum
    f(np.full(3, 2.0, np.float32))  # same avals: nothing new
    assert len(tape._linearized_cache) == n
    f(np.ones(5, np.float32))  # new shapes: new entries
    assert len(tape._linearized_cache) > n


def test_python_control_flow_on_values_records_the_path_taken():
    def f(x):
        y = x * x
        if y > 4.0:  # a concrete value under eager grad
            return y * x
        return fnp.sin(y)

    assert float(fg.grad(f)(3.0)) == pytest.approx(27.0)
    assert float(fg.grad(f)(1.0)) == pytest.approx(2 * np.cos(1.0), rel=1e-6)


def test_nested_grads_and_no_perturbation_confusion():
    # d/dx [x * d/dy (x * y)] = d/dx x^2 = 2x: the inner grad must not see x's tangent.
    def outer(x):
        return x * fg.grad(lambda y: x * y)(1.0)

    assert float(fg.grad(outer)(3.0)) == pytest.approx(6.0)
    assert float(fg.grad(lambda x: fg.grad(lambda y: x * y)(2.0))(5.0)) == pytest.approx(1.0)
    assert float(fg.grad(fg.grad(fg.grad(fnp.tanh)))(0.3)) == pytest.approx(
        float(-2 * (1 - np.tanh(0.3) ** 2) * (1 - 3 * np.tanh(0.3) ** 2)), rel=1e-5
    )


def test_rules_that_need_values_take_the_general_path():
    calls = []

    @fg.custom_vjp
    def scaled(x):
        return x * 2.0

    def fwd(x):
        calls.append("fwd")  # user code must run on every call, never be cached away
        return x * 2.0, x

    def bwd(x, g):
        return (g * 10.0 + x,)

    scaled.defvjp(fwd, bwd)

    def f(x):
        y = lax.cond(x > 0, lambda v: v * 3.0, lambda v: -v, x)
        z = lax.fori_loop(0, 3, lambda i, c: c * 1.5, y)
        return scaled(z) + fg.checkpoint(fnp.sin)(x)

    for x in (2.0, -2.0):
        got = float(fg.grad(f)(x))
        want = float(_vjp_grad(f, np.float32(x))[0])
        assert got == pytest.approx(want, rel=1e-6)
    assert calls.count("fwd") == 4


def test_jit_and_vmap_inside_eager_grad():
    w = np.arange(6, dtype=np.float32).reshape(2, 3) / 6

    def f(w):
        rows = fg.vmap(lambda r: fnp.sum(fnp.tanh(r)))(w)
        return fg.jit(lambda r: fnp.sum(r * r))(rows)

    _assert_tree_close(fg.grad(f)(w), _vjp_grad(f, w)[0], rtol=1e-5)


def test_aux_pytrees_int_inputs_and_symbolic_zeros():
    def f(params, n):
        y = fnp.sum(params["a"] ** 2) + params["b"][0] * 3.0
        return y, {"n": n * 2, "y": y}

    params = {"a": np.array([1.0, 2.0], np.float32), "b": (np.float32(4.0), np.float32(5.0))}
    (value, aux), g = fg.value_and_grad(f, has_aux=True)(params, 3)
    assert float(value) == pytest.approx(17.0)
    assert int(aux["n"]) == 6 and float(aux["y"]) == pytest.approx(17.0)
    assert not isinstance(aux["y"], fg.core.Tracer)
    np.testing.assert_allclose(np.asarray(g["a"]), [2.0, 4.0])
    assert float(g["b"][0]) == 3.0 and float(g["b"][1]) == 0.0  # unused: a zero cotangent
    gi = fg.grad(lambda x, k: x * k, argnums=(0, 1), allow_int=True)(2.0, 3)
    assert float(gi[0]) == 3.0 and gi[1].dtype == fg.dtypes.float0
    assert float(fg.grad(lambda x: fg.stop_gradient(x) * 0.0 + 1.0)(2.0)) == 0.0
    assert float(fg.grad(lambda x: x)(2.0)) == 1.0


def test_a_leaked_tracer_is_an_error():
    leaked = []

    def f(x):
        leaked.append(x * 2.0)
        return fnp.sum(x)

    fg.grad(f)(np.ones(2, np.float32))
    with pytest.raises(fg.UnexpectedTracerError, match="escaped"):
        fnp.sin(leaked[0])


def test_bad_input_errors_are_unchanged():
    with pytest.raises(TypeError, match="scalar-output"):
        fg.grad(lambda x: x * 2.0)(np.ones(3, np.float32))
    with pytest.raises(TypeError, match="real- or complex-valued inputs"):
        fg.grad(lambda x: x * 2)(3)
    with pytest.raises(
        TypeError, match="Reverse-mode differentiation does not work for lax.while_loop"
    ):
        fg.grad(lambda x: fnp.sum(lax.while_loop(lambda c: c < 10.0, lambda c: c * 2.0, x)))(1.0)


def test_indexing_and_multiple_result_primitives():
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    idx = np.array([2, 0, 2])

    def f(x):
        g = x[idx, 1:3] * 2.0
        s = x.at[0, idx].add(1.5)
        vals, _ = lax.top_k(x, 2)
        return fnp.sum(g**2) + fnp.sum(s * s) + fnp.sum(vals * fnp.sort(x, axis=1)[:, :2])

    for _ in range(2):
        _assert_tree_close(fg.grad(f)(x), _vjp_grad(f, x)[0], rtol=2e-6)
