"""grad / vjp / jvp / linearize / jacobians: values against analytic derivatives and finite
differences, nesting without perturbation confusion, pytrees, and the errors JAX raises."""

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.testing import check_grads


def _mlp_loss(params, x, y):
    (w1, b1), (w2, b2) = params
    h = fnp.tanh(x @ w1 + b1)
    out = h @ w2 + b2
    return fnp.mean((out - y) ** 2)


def _mlp_params(rng, dtype=np.float32):
    return (
        (rng.standard_normal((4, 8)).astype(dtype), np.zeros(8, dtype)),
        (rng.standard_normal((8, 2)).astype(dtype), np.zeros(2, dtype)),
    )


def test_grad_of_tanh_matmul_matches_analytic():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 16)).astype(np.float32)
    x = rng.standard_normal(16).astype(np.float32)
    g = fg.grad(lambda w: fnp.sum(fnp.tanh(w @ x)))(w)
    expected = np.outer(1 - np.tanh(w @ x) ** 2, x)
    np.testing.assert_allclose(np.asarray(g), expected, rtol=1e-5, atol=1e-5)
    assert g.dtype == np.float32 and g.shape == (16, 16)


def test_no_perturbation_confusion():
    # d/dx [x * d/dy (x + y)] = d/dx [x * 1] = 1 (a confused implementation gives 2)
    assert float(fg.grad(lambda x: x * fg.grad(lambda y: x + y)(1.0))(1.0)) == 1.0
    # the DESIGN.md example
    assert float(fg.grad(lambda x: fg.grad(lambda y: x * y)(1.0))(1.0)) == 1.0


def test_higher_order_derivatives():
    f = fnp.sin
    x = 0.7
    d1 = fg.grad(f)(x)
    d2 = fg.grad(fg.grad(f))(x)
    d3 = fg.grad(fg.grad(fg.grad(f)))(x)
    np.testing.assert_allclose(
        [float(d1), float(d2), float(d3)], [np.cos(x), -np.sin(x), -np.cos(x)], rtol=1e-6
    )


def test_python_control_flow_on_values_under_grad():
    def f(x):
        return x**2 if x > 0 else -3.0 * x

    assert float(fg.grad(f)(2.0)) == 4.0
    assert float(fg.grad(f)(-1.0)) == -3.0


def test_value_and_grad_has_aux_argnums_pytrees():
    rng = np.random.default_rng(1)
    params = _mlp_params(rng)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    y = rng.standard_normal((5, 2)).astype(np.float32)
    loss, grads = fg.value_and_grad(_mlp_loss)(params, x, y)
    assert np.isclose(float(loss), float(_mlp_loss(params, x, y)))
    assert fg.tree_util.tree_structure(grads) == fg.tree_util.tree_structure(params)
    gx, gy = fg.grad(_mlp_loss, argnums=(1, 2))(params, x, y)
    assert gx.shape == x.shape and gy.shape == y.shape
    (value, aux), g = fg.value_and_grad(lambda p: (_mlp_loss(p, x, y), {"n": 3}), has_aux=True)(
        params
    )
    assert aux == {"n": 3}
    g2, aux2 = fg.grad(lambda p: (_mlp_loss(p, x, y), x.shape), has_aux=True)(params)
    assert aux2 == x.shape
    for a, b in zip(fg.tree_util.tree_leaves(g), fg.tree_util.tree_leaves(g2)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b))


def test_mlp_grad_matches_finite_differences(x64):
    rng = np.random.default_rng(2)
    params = _mlp_params(rng, np.float64)
    x = rng.standard_normal((3, 4))
    y = rng.standard_normal((3, 2))
    check_grads(lambda p: _mlp_loss(p, x, y), (params,), order=2, modes=("fwd", "rev"))


def test_gradient_program_is_small():
    # make_jaxpr(grad(loss)) is simplified (CSE + DCE, no dead residuals): about the size of a
    # hand-written backward pass. Forward: 2 dots, 2 adds, tanh, sub, square, mean (~9 eqns);
    # backward: ~2 per forward op.
    rng = np.random.default_rng(3)
    params = _mlp_params(rng)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    y = rng.standard_normal((5, 2)).astype(np.float32)
    jaxpr = fg.make_jaxpr(fg.grad(_mlp_loss))(params, x, y)
    n = len(jaxpr.eqns)
    assert n <= 36, f"gradient program has {n} equations:\n{jaxpr}"


def test_jvp_linearize_vjp_agree():
    rng = np.random.default_rng(4)
    x = rng.standard_normal(5).astype(np.float32)
    t = rng.standard_normal(5).astype(np.float32)

    def f(x):
        return fnp.sin(x) * fnp.exp(x[::-1])

    y, ty = fg.jvp(f, (x,), (t,))
    y2, f_jvp = fg.linearize(f, x)
    np.testing.assert_allclose(np.asarray(ty), np.asarray(f_jvp(t)), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(y), np.asarray(y2))
    _, vjp_fn = fg.vjp(f, x)
    ct = rng.standard_normal(5).astype(np.float32)
    (g,) = vjp_fn(ct)
    np.testing.assert_allclose(
        float(np.dot(np.asarray(g), t)), float(np.dot(ct, np.asarray(ty))), rtol=1e-4
    )


def test_jacobians_and_hessian():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 3)).astype(np.float32)
    x = rng.standard_normal(3).astype(np.float32)

    def f(x):
        return fnp.sin(x) * x

    expected = np.diag(np.cos(x) * x + np.sin(x))
    np.testing.assert_allclose(np.asarray(fg.jacfwd(f)(x)), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(fg.jacrev(f)(x)), expected, rtol=1e-5, atol=1e-6)
    h = fg.hessian(lambda x: x @ a @ x)(x)
    np.testing.assert_allclose(np.asarray(h), a + a.T, rtol=1e-5, atol=1e-5)
    # pytree inputs and outputs
    jac = fg.jacrev(lambda d: {"y": d["u"] * 2.0})({"u": x})
    np.testing.assert_allclose(np.asarray(jac["y"]["u"]), 2 * np.eye(3))


def test_stop_gradient():
    g = fg.grad(lambda x: x * fg.lax.stop_gradient(x))(3.0)
    assert float(g) == 3.0


def test_integer_inputs_have_float0_cotangents():
    _, vjp_fn = fg.vjp(lambda x, n: x * n, 2.0, 3)
    gx, gn = vjp_fn(1.0)
    assert float(gx) == 3.0
    assert gn.dtype == fg.dtypes.float0


def test_errors():
    with pytest.raises(
        TypeError,
        match="Gradient only defined for scalar-output functions. Output had shape: \\(3,\\)",
    ):
        fg.grad(lambda x: x * 2)(np.ones(3, np.float32))
    with pytest.raises(TypeError, match="grad requires real- or complex-valued inputs.*int32"):
        fg.grad(lambda x: x * 2)(3)
    with pytest.raises(TypeError, match="has_aux=True requires the function to return a pair"):
        fg.grad(lambda x: x, has_aux=True)(1.0)
    with pytest.raises(ValueError, match="argnum 2 is out of range"):
        fg.grad(lambda x: x, argnums=2)(1.0)
    with pytest.raises(TypeError, match="grad requires real-valued outputs"):
        fg.grad(lambda x: fnp.sum(x > 0).astype(np.int32), allow_int=True)(1.0)
    with pytest.raises(TypeError, match="primal and tangent arguments must have equal shapes"):
        fg.jvp(fnp.sin, (np.ones(3, np.float32),), (np.ones(2, np.float32),))
    with pytest.raises(TypeError, match="is not a valid fungrad type"):
        fg.grad(lambda x: x)("a")


def test_functions_returning_integer_cotangents_compose(x64):
    # vjp_fn returns float0 cotangents for integer inputs; transforming such a function works
    # (JAX accepts float0 outputs), so second-order reverse checks of functions with integer
    # arguments run.
    def f(x, i):
        return fg.lax.dynamic_slice(x, (i, i), (1, 2))

    def g(x, i):
        _, vjp_fn = fg.vjp(f, x, i)
        return vjp_fn(f(x, i))

    x = np.arange(9.0).reshape(3, 3)
    (gx, gi), vjp_g = fg.vjp(g, x, np.int32(1))
    assert gi.dtype == fg.dtypes.float0
    ct_x, ct_i = vjp_g((np.ones((3, 3)), np.zeros((), fg.dtypes.float0)))
    assert ct_x.shape == (3, 3) and ct_i.dtype == fg.dtypes.float0
    _, (tx, ti) = fg.jvp(g, (x, np.int32(1)), (np.ones((3, 3)), np.zeros((), fg.dtypes.float0)))
    assert tx.shape == (3, 3) and ti.dtype == fg.dtypes.float0
    check_grads(f, (x, np.int32(1)), order=2, modes=("rev",))


# -- issue 15 follow-up: a transform applied to a non-callable says so where it is applied -----


@pytest.mark.parametrize(
    "name, apply",
    [
        ("grad", lambda f: fg.grad(f)),
        ("value_and_grad", lambda f: fg.value_and_grad(f)),
        ("vjp", lambda f: fg.vjp(f, 1.0)),
        ("jvp", lambda f: fg.jvp(f, (1.0,), (1.0,))),
        ("linearize", lambda f: fg.linearize(f, 1.0)),
        ("jacfwd", lambda f: fg.jacfwd(f)),
        ("jacrev", lambda f: fg.jacrev(f)),
        ("hessian", lambda f: fg.hessian(f)),
        ("jit", lambda f: fg.jit(f)),
        ("vmap", lambda f: fg.vmap(f)),
        ("make_jaxpr", lambda f: fg.make_jaxpr(f)),
        ("checkpoint", lambda f: fg.checkpoint(f)),
        ("custom_jvp", lambda f: fg.custom_jvp(f)),
        ("custom_vjp", lambda f: fg.custom_vjp(f)),
    ],
)
def test_issue15_transforms_of_non_callables_raise_where_applied(name, apply):
    """JAX: "Expected a callable value, got 3" when the transform is applied (not a later
    "'int' object is not callable" from inside the transform)."""
    for bad in (3, None, "f"):
        with pytest.raises(
            TypeError,
            match=rf"^{name}: expected a callable value, got "
            rf"{bad!r} \(of type {type(bad).__name__}\); ",
        ):
            apply(bad)
    apply(fnp.sin)  # a callable is accepted


def test_issue15_custom_rules_must_be_callable():
    f = fg.custom_jvp(fnp.sin)
    with pytest.raises(TypeError, match=r"custom_jvp.defjvp: expected a callable value, got 3"):
        f.defjvp(3)
    with pytest.raises(TypeError, match=r"custom_jvp.defjvps \(rule 1\): expected a callable"):
        fg.custom_jvp(lambda x, y: x * y).defjvps(lambda g, ans, x, y: g * y, 3)
    g = fg.custom_vjp(fnp.sin)
    with pytest.raises(
        TypeError,
        match=r"custom_vjp.defvjp \(bwd\): expected a callable value, "
        r"got None",
    ):
        g.defvjp(lambda x: (fnp.sin(x), x), None)
    # the rules still work once given
    g.defvjp(lambda x: (fnp.sin(x), x), lambda x, ct: (fnp.cos(x) * ct,))
    assert abs(float(fg.grad(g)(0.5)) - np.cos(0.5)) < 1e-6
