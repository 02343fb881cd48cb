"""jit's remaining keyword arguments from JAX's signature: ``inline``, ``device``,
``keep_unused`` and ``compiler_options`` (references: numpy, and the jaxpr's equations)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp


def _primitives(jaxpr) -> list[str]:
    return [eqn.primitive.name for eqn in jaxpr.jaxpr.eqns]


def test_inline_traces_into_the_enclosing_jaxpr():
    inner = fg.jit(lambda x: fnp.sin(x) * 2, inline=True)
    nested = fg.jit(lambda x: fnp.sin(x) * 2)
    assert _primitives(fg.make_jaxpr(lambda x: inner(x) + 1)(1.0)) == ["sin", "mul", "add"]
    assert _primitives(fg.make_jaxpr(lambda x: nested(x) + 1)(1.0)) == ["jit", "add"]


@settings(max_examples=20, deadline=None)
@given(st.lists(st.floats(-3, 3, width=32), min_size=0, max_size=5))
def test_inline_function_values_and_derivatives(xs):
    x = np.asarray(xs, np.float32)
    f = fg.jit(lambda v: fnp.sin(v) * v, inline=True)
    ref = np.sin(x) * x
    np.testing.assert_allclose(np.asarray(f(x)), ref, rtol=1e-6, atol=1e-6)  # top level
    np.testing.assert_allclose(np.asarray(fg.jit(lambda v: f(v) + 1)(x)), ref + 1, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(fg.vmap(f)(x)), ref, rtol=1e-6, atol=1e-6)
    grad = fg.grad(lambda v: fnp.sum(f(v)))(x)
    np.testing.assert_allclose(np.asarray(grad), np.cos(x) * x + np.sin(x), rtol=1e-5, atol=1e-6)


def test_inline_with_static_arguments():
    f = fg.jit(lambda x, n: x * n, static_argnums=1, inline=True)
    assert float(fg.jit(lambda x: f(x, 3))(2.0)) == 6.0
    assert float(f(2.0, 4)) == 8.0


def test_device_picks_the_backend_and_keep_unused_changes_nothing():
    cpu = fg.devices("cpu")[0]
    f = fg.jit(lambda x, unused: x + 1, device=cpu, keep_unused=True)
    out = f(np.float32(1.0), np.ones(3, np.float32))
    assert float(out) == 2.0 and out.dtype == np.float32


def test_device_and_backend_together_raise():
    with pytest.raises(ValueError, match="both a device and a backend"):
        fg.jit(lambda x: x, device=fg.devices("cpu")[0], backend="cpu")
    with pytest.raises(TypeError, match="fungrad.devices"):
        fg.jit(lambda x: x, device="cpu")


def test_compiler_options_are_refused_by_name():
    assert float(fg.jit(lambda x: x * 2, compiler_options={})(2.0)) == 4.0
    with pytest.raises(ValueError, match="xla_cpu_enable_fast_math.*remove compiler_options"):
        fg.jit(lambda x: x, compiler_options={"xla_cpu_enable_fast_math": True})
    # as a decorator factory too
    with pytest.raises(ValueError, match="compiler_options"):
        fg.jit(compiler_options={"xla_foo": 1})(lambda x: x)
