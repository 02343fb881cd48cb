"""custom_jvp / custom_vjp under grad, jvp and vmap; their error messages; checkpoint
recomputes (fewer saved residual bytes) and keeps gradients unchanged."""

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.ad_checkpoint import checkpoint_policies, saved_residuals


@fg.custom_jvp
def log1pexp(x):
    return fnp.log1p(fnp.exp(x))


@log1pexp.defjvp
def _log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return log1pexp(x), t * (1 - 1 / (1 + fnp.exp(x)))


def test_custom_jvp_is_used_and_stable():
    # The naive derivative exp(x)/(1+exp(x)) is nan at x=1000; the custom rule gives 1.
    assert float(fg.grad(log1pexp)(1000.0)) == 1.0
    np.testing.assert_allclose(float(fg.grad(log1pexp)(0.5)), 1 / (1 + np.exp(-0.5)), rtol=1e-6)
    _, t = fg.jvp(log1pexp, (0.5,), (2.0,))
    np.testing.assert_allclose(float(t), 2 / (1 + np.exp(-0.5)), rtol=1e-6)
    xs = np.array([-1.0, 0.0, 1000.0], np.float32)
    np.testing.assert_allclose(
        np.asarray(fg.vmap(fg.grad(log1pexp))(xs)), [1 / (1 + np.e), 0.5, 1.0], rtol=1e-6
    )
    np.testing.assert_allclose(
        np.asarray(fg.grad(lambda x: fnp.sum(fg.vmap(log1pexp)(x)))(xs)),
        [1 / (1 + np.e), 0.5, 1.0],
        rtol=1e-6,
    )
    assert "custom_jvp_call" in str(fg.make_jaxpr(log1pexp)(1.0))


def test_custom_jvp_defjvps_and_nondiff_argnums():
    @fg.custom_jvp
    def f(x, y):
        return x * y

    f.defjvps(lambda g, ans, x, y: g * y * 10, lambda g, ans, x, y: g * x * 100)
    gx, gy = fg.grad(f, argnums=(0, 1))(2.0, 3.0)
    assert (float(gx), float(gy)) == (30.0, 200.0)

    from functools import partial

    @partial(fg.custom_jvp, nondiff_argnums=(0,))
    def app(scale, x):
        return scale * fnp.sin(x)

    @app.defjvp
    def _app_jvp(scale, primals, tangents):
        (x,), (t,) = primals, tangents
        return app(scale, x), scale * fnp.cos(x) * t * 2

    np.testing.assert_allclose(
        float(fg.grad(lambda x: app(3.0, x))(0.2)), 6 * np.cos(0.2), rtol=1e-6
    )


@fg.custom_vjp
def clip_gradient(x):
    return x


def _clip_fwd(x):
    return x, None


def _clip_bwd(_, g):
    return (fnp.clip(g, -1.0, 1.0),)


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


def test_custom_vjp_under_grad_and_vmap():
    assert float(fg.grad(lambda x: 5.0 * clip_gradient(x))(2.0)) == 1.0
    xs = np.array([1.0, 2.0], np.float32)
    np.testing.assert_array_equal(
        np.asarray(fg.vmap(fg.grad(lambda x: 0.5 * clip_gradient(x)))(xs)), [0.5, 0.5]
    )
    np.testing.assert_array_equal(
        np.asarray(fg.grad(lambda x: fnp.sum(fg.vmap(clip_gradient)(x) * 3.0))(xs)), [1.0, 1.0]
    )
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        fg.jvp(clip_gradient, (1.0,), (1.0,))


def test_custom_vjp_bad_bwd_structure():
    @fg.custom_vjp
    def f(x, y):
        return x * y

    f.defvjp(lambda x, y: (x * y, (x, y)), lambda res, g: (g * res[1],))
    with pytest.raises(TypeError, match="must return a tuple of length 2"):
        fg.grad(f)(1.0, 2.0)
    f.defvjp(lambda x, y: (x * y, (x, y)), lambda res, g: (g, np.ones(3, np.float32)))
    with pytest.raises(TypeError, match="leaf 0 has shape/dtype f32\\[3\\], expected f32\\[\\]"):
        fg.grad(f)(1.0, 2.0)


def _deep(x):
    for _ in range(4):
        x = fnp.sin(fnp.tanh(x) * 1.1)
    return x


def test_checkpoint_recomputes_and_keeps_gradients():
    x = np.linspace(-1, 1, 256).astype(np.float32)

    def loss(f):
        return lambda x: fnp.sum(f(x))

    g_plain = fg.grad(loss(_deep))(x)
    g_remat = fg.grad(loss(fg.checkpoint(_deep)))(x)
    np.testing.assert_allclose(np.asarray(g_remat), np.asarray(g_plain), rtol=1e-6)
    plain_bytes = sum(a.size * a.dtype.itemsize for a, _ in saved_residuals(loss(_deep), x))
    remat_bytes = sum(
        a.size * a.dtype.itemsize for a, _ in saved_residuals(loss(fg.checkpoint(_deep)), x)
    )
    assert remat_bytes < plain_bytes / 4, (remat_bytes, plain_bytes)
    saveall = fg.checkpoint(_deep, policy=checkpoint_policies.everything_saveable)
    assert sum(a.size for a, _ in saved_residuals(loss(saveall), x)) >= plain_bytes // 4


def test_checkpoint_dots_saveable_policy():
    w = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)

    def net(x):
        return fnp.sum(fnp.tanh(fnp.tanh(x @ w) @ w))

    f = fg.checkpoint(net, policy=checkpoint_policies.dots_saveable)
    x = np.ones((4, 8), np.float32)
    np.testing.assert_allclose(np.asarray(fg.grad(f)(x)), np.asarray(fg.grad(net)(x)), rtol=1e-5)
    shapes = sorted(a.shape for a, _ in saved_residuals(f, x))
    assert (4, 8) in shapes
    assert len(saved_residuals(f, x)) < len(saved_residuals(net, x))


# -- rules that branch on values in Python (JAX's "Custom derivative rules" notebook) ----------


@fg.custom_jvp
def _branchy(x):
    if x > 0:
        return fnp.sin(x)
    return x


@_branchy.defjvp
def _branchy_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    if x > 0:
        return _branchy(x), fnp.cos(x) * t
    return x, 2.0 * t  # deliberately not the true derivative: shows the rule is used


@fg.custom_vjp
def _branchy_vjp(x, y):
    if x > y:
        return x * y
    return x + y


def _branchy_fwd(x, y):
    return _branchy_vjp(x, y), (x, y)


def _branchy_bwd(res, g):
    x, y = res
    if x > y:
        return g * y, g * x
    return g, g


_branchy_vjp.defvjp(_branchy_fwd, _branchy_bwd)


@pytest.mark.parametrize("x", [1.3, -0.7])
def test_custom_jvp_python_branch_outside_jit(x):
    pos = x > 0
    want_f = np.sin(np.float32(x)) if pos else np.float32(x)
    want_d = np.cos(np.float32(x)) if pos else 2.0
    np.testing.assert_allclose(float(_branchy(x)), want_f, rtol=1e-6)
    assert isinstance(_branchy(x), fg.Array)
    np.testing.assert_allclose(float(fg.grad(_branchy)(x)), want_d, rtol=1e-6)
    out, t = fg.jvp(_branchy, (x,), (3.0,))
    np.testing.assert_allclose([float(out), float(t)], [want_f, 3 * want_d], rtol=1e-6)
    (ct,) = fg.vjp(_branchy, x)[1](1.0)
    np.testing.assert_allclose(float(ct), want_d, rtol=1e-6)
    # A composite around it, and the rule differentiated again (its own Python branch).
    np.testing.assert_allclose(
        float(fg.grad(lambda a: _branchy(a) * a)(x)), want_d * x + want_f, rtol=1e-5
    )
    want_dd = -np.sin(np.float32(x)) if pos else 0.0
    np.testing.assert_allclose(float(fg.grad(fg.grad(_branchy))(x)), want_dd, atol=1e-6)


def test_custom_vjp_python_branch_outside_jit():
    assert float(_branchy_vjp(2.0, 1.0)) == 2.0
    gx, gy = fg.grad(_branchy_vjp, (0, 1))(2.0, 1.0)
    assert (float(gx), float(gy)) == (1.0, 2.0)
    gx, gy = fg.grad(_branchy_vjp, (0, 1))(0.0, 1.0)
    assert (float(gx), float(gy)) == (1.0, 1.0)
    assert float(fg.grad(lambda a: _branchy_vjp(a, 1.0) ** 2)(3.0)) == 6.0


def test_python_branch_under_jit_or_vmap_is_a_concretization_error():
    # Staged or batched, the value is unknown: JAX raises too (TracerBoolConversionError,
    # a ConcretizationTypeError).
    for fun, arg in (
        (fg.jit(_branchy), 1.0),
        (fg.jit(fg.grad(_branchy)), 1.0),
        (fg.vmap(_branchy), fnp.ones(2)),
        (fg.vmap(fg.grad(_branchy)), fnp.ones(2)),
    ):
        with pytest.raises(fg.ConcretizationTypeError):
            fun(arg)
