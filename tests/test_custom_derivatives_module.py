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


def _two_outputs_with_symbolic_zeros(seen):
    """x*y and x+y with a symbolic_zeros custom_vjp that records what its rules receive."""

    @cd.custom_vjp
    def two(x, y):
        return x * y, x + y

    def fwd(x, y):
        seen.append(("perturbed", type(x) is cd.CustomVJPPrimal, x.perturbed, y.perturbed))
        x, y = cd.custom_vjp_primal_tree_values((x, y))
        return two(x, y), (x, y)

    def bwd(res, cts):
        x, y = res
        seen.append(("cts", *(type(c) is cd.SymbolicZero for c in cts)))
        c1, c2 = (
            fg.numpy.zeros(c.shape, c.dtype) if type(c) is cd.SymbolicZero else c for c in cts
        )
        return c1 * y + c2, c1 * x + c2

    two.defvjp(fwd, bwd, symbolic_zeros=True)
    return two


def test_custom_vjp_symbolic_zeros_marks_unperturbed_args_and_zero_cotangents():
    # JAX 0.10.2: fwd gets CustomVJPPrimal leaves with .perturbed; bwd gets a SymbolicZero
    # for the cotangent of an output the loss does not use.
    seen = []
    two = _two_outputs_with_symbolic_zeros(seen)
    assert float(fg.grad(lambda x: two(x, 3.0)[0])(2.0)) == 3.0
    assert seen == [("perturbed", True, True, False), ("cts", False, True)]
    seen.clear()
    gx, gy = fg.grad(lambda x, y: two(x, y)[1], argnums=(0, 1))(2.0, 3.0)
    assert (float(gx), float(gy)) == (1.0, 1.0)
    assert seen == [("perturbed", True, True, True), ("cts", True, False)]
    x = np.arange(3.0, dtype=np.float32)
    g = fg.jit(fg.grad(lambda x: two(x, fg.numpy.full(3, 3.0))[0].sum()))(x)
    np.testing.assert_allclose(np.asarray(g), [3.0, 3.0, 3.0])
    np.testing.assert_allclose(np.asarray(fg.vmap(fg.grad(lambda x: two(x, 3.0)[0]))(x)), 3.0)
    gy = fg.grad(lambda y: fg.vmap(lambda a: two(a, y)[0])(x).sum())(2.0)
    assert float(gy) == 3.0


def test_custom_jvp_symbolic_zeros_rule_sees_and_returns_symbolic_zero():
    @cd.custom_jvp
    def h(x, y):
        return x * y

    seen = []

    def h_jvp(primals, tangents):
        x, y = primals
        tx, ty = tangents
        seen.append([(type(t) is cd.SymbolicZero, t.shape, t.dtype) for t in tangents])
        # The tangent of y is dropped: the rule returns a SymbolicZero for a y-only tangent.
        return x * y, tx if type(tx) is cd.SymbolicZero else tx * y

    h.defjvp(h_jvp, symbolic_zeros=True)
    _, t = fg.jvp(lambda x: h(x, 4.0), (2.0,), (1.0,))
    assert float(t) == 4.0
    assert seen == [[(False, (), np.float32), (True, (), np.float32)]]
    assert float(fg.grad(lambda y: h(2.0, y) + y)(1.0)) == 1.0


def test_custom_vjp_bwd_none_inside_an_argument_pytree_is_a_zero():
    @cd.custom_vjp
    def f(d):
        return d["a"] * d["b"]

    f.defvjp(lambda d: (f(d), d), lambda d, g: ({"a": g * d["b"], "b": None},))
    g = fg.grad(f)({"a": 2.0, "b": 3.0})
    assert (float(g["a"]), float(g["b"])) == (3.0, 0.0)
    assert cd.zero_from_primal(np.ones(2, np.float32), symbolic_zeros=True).shape == (2,)
