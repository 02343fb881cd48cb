"""``from jax.custom_derivatives import ...`` works: fungrad.custom_derivatives holds the same
objects as fungrad's top level, and a custom_jvp / custom_vjp defined through it differentiates
with its rule."""

from __future__ import annotations

import numpy as np

import fungrad as fg
from fungrad import custom_derivatives as cd


def test_the_names_are_fungrad_s():
    assert cd.custom_jvp is fg.custom_jvp and cd.custom_vjp is fg.custom_vjp
    assert cd.custom_gradient is fg.custom_gradient and cd.closure_convert is fg.closure_convert


def test_rules_defined_through_the_module_are_used():
    @cd.custom_jvp
    def f(x):
        return x**2

    f.defjvp(lambda p, t: (f(p[0]), 3.0 * t[0]))

    @cd.custom_vjp
    def g(x):
        return x * 2.0

    g.defvjp(lambda x: (g(x), None), lambda _, ct: (5.0 * ct,))
    assert float(fg.grad(f)(2.0)) == 3.0
    assert float(fg.grad(g)(2.0)) == 5.0
    np.testing.assert_allclose(np.asarray(fg.jit(fg.vmap(fg.grad(f)))(np.ones(3))), 3.0)
