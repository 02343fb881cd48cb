"""A cotangent has its primal's weak type (JAX 0.10.2's results, recorded): ``grad(f)(1.)`` is
weakly typed, so ``grad(f)(1.) + float16`` stays float16; a strongly typed primal gives a
strong gradient whatever the output's type. Eager, jit, vjp, value_and_grad, nested grad."""

from __future__ import annotations

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp


def _square(x):
    return x**2


def _times_f32(x):
    return x * fnp.float32(2)  # a strong output from a weak input


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("f", [_square, _times_f32, fnp.sin])
def test_gradient_at_a_python_float_is_weak(f, jit):
    g = (fg.jit(fg.grad(f)) if jit else fg.grad(f))(1.0)
    assert g.weak_type and g.dtype == np.float32
    assert (g + fnp.ones(2, fnp.float16)).dtype == np.float16
    _, vg = fg.value_and_grad(f)(1.0)
    assert vg.weak_type


def test_gradient_of_a_strong_primal_is_strong():
    assert not fg.grad(_square)(np.float32(1.0)).weak_type
    assert not fg.grad(lambda x: x.sum())(fnp.ones(3)).weak_type
    assert not fg.jit(fg.grad(lambda x: fnp.sum(x * 2.0)))(np.ones(3, np.float32)).weak_type


def test_vjp_argnums_and_nested():
    _, pullback = fg.vjp(lambda x: x * 2.0, 1.0)
    assert pullback(1.0)[0].weak_type
    gx, gy = fg.grad(lambda x, y: x * y, argnums=(0, 1))(1.0, np.float32(2.0))
    assert gx.weak_type and not gy.weak_type
    assert fg.grad(fg.grad(lambda x: x**3))(1.0).weak_type
    np.testing.assert_allclose(float(fg.grad(fg.grad(lambda x: x**3))(1.0)), 6.0)
