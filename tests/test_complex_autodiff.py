"""Autodiff of complex functions, with JAX's conventions (its autodiff cookbook, "Complex
numbers and differentiation"):

* reverse mode transposes without conjugating, so for a real-valued ``f`` of ``z = x + iy``,
  ``grad(f)(z) = df/dx - i df/dy`` (``grad(|z|^2) = 2 conj(z)``), checked here against central
  differences in x and y computed with numpy in float64;
* ``grad(f, holomorphic=True)`` of a holomorphic ``f`` is ``f'(z)``; ``jacfwd``/``jacrev``/
  ``hessian`` likewise;
* ``vjp(f, z)[1](ct)`` is the transpose ``J^T ct`` (``ct * w`` for ``f(z) = w z``), and the
  tangent of a complex primal is complex;
* the dtype errors are JAX's TypeErrors (and ValueError for a cotangent of the wrong kind).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.testing import check_grads
from fungrad.testing import strategies as fst

C64 = np.complex64


def c64(*vals):
    return fnp.asarray(np.array(vals, C64))


def num_conj_grad(f_np, z, h=1e-6):
    """``df/dx - i df/dy`` of a real-valued numpy function of complex ``z`` (float64 central
    differences, elementwise over the entries of ``z``)."""
    z = np.asarray(z, np.complex128)
    out = np.zeros(z.shape, np.complex128)
    for idx in np.ndindex(z.shape):
        e = np.zeros(z.shape, np.complex128)
        e[idx] = h
        dx = (f_np(z + e) - f_np(z - e)) / (2 * h)
        dy = (f_np(z + 1j * e) - f_np(z - 1j * e)) / (2 * h)
        out[idx] = dx - 1j * dy
    return out


def assert_close(got, want, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)


# -- grad of real-valued functions of complex inputs ---------------------------------------------


def test_grad_abs_squared_is_twice_the_conjugate():
    z = c64(1 + 2j, -0.5 + 0.25j, 3 - 1j)
    g = fg.grad(lambda z: fnp.sum(fnp.abs(z) ** 2))(z)
    assert g.dtype == C64
    assert_close(g, 2 * np.conj(np.asarray(z)))


def test_grad_real_part_of_product_with_conjugate_is_w_conjugate():
    z, w = c64(1 + 2j), c64(3 - 1j)
    assert_close(fg.grad(lambda z: fnp.real(z * fnp.conj(w)).sum())(z), np.conj(np.asarray(w)))
    # and in w: Re(z conj(w)) = Re(conj(z) w), so the gradient is conj(z)
    assert_close(fg.grad(lambda w: fnp.real(z * fnp.conj(w)).sum())(w), np.conj(np.asarray(z)))


def test_grad_of_real_and_imag_parts():
    z = c64(1 + 2j)[0]
    assert complex(fg.grad(fnp.real)(z)) == 1 + 0j
    assert complex(fg.grad(fnp.imag)(z)) == -1j
    assert_close(fg.grad(fnp.abs)(z), np.conj(1 + 2j) / abs(1 + 2j))


def test_grad_real_input_through_complex_values():
    # d/dx Re(exp(i x)) = -sin(x); the result is a real cotangent
    g = fg.grad(lambda x: fnp.real(fnp.exp(1j * x)))(1.0)
    assert g.dtype == np.float32
    assert_close(g, -np.sin(1.0))
    g = fg.grad(lambda x: fnp.abs(x + 1j * x))(1.0)
    assert_close(g, np.sqrt(2.0))


_REAL_FNS = {
    "abs2_weighted": (
        lambda z: fnp.sum(fnp.abs(z) ** 2 * fnp.arange(1.0, 1.0 + z.size).reshape(z.shape)),
        lambda z: np.sum(np.abs(z) ** 2 * np.arange(1.0, 1.0 + z.size).reshape(z.shape)),
    ),
    "real_sin": (lambda z: fnp.sum(fnp.real(fnp.sin(z))), lambda z: np.sum(np.real(np.sin(z)))),
    "imag_exp_sq": (
        lambda z: fnp.sum(fnp.imag(fnp.exp(z) * z)),
        lambda z: np.sum(np.imag(np.exp(z) * z)),
    ),
    # (shifted off the branch cut on the negative real axis)
    "angle": (lambda z: fnp.sum(fnp.angle(z + 3)), lambda z: np.sum(np.angle(z + 3))),
    "vdot": (
        lambda z: fnp.real(fnp.vdot(z, z * 2j + 1)),
        lambda z: np.real(np.vdot(z, z * 2j + 1)),
    ),
}


@pytest.mark.parametrize("name", sorted(_REAL_FNS))
@settings(max_examples=8, deadline=None)
@given(
    z=fst.arrays(
        C64, st.sampled_from([(), (3,), (2, 2)]), min_value=-2, max_value=2, avoid=(0,), margin=0.2
    )
)
def test_grad_matches_the_conjugate_convention(name, z):
    f, f_np = _REAL_FNS[name]
    g = fg.grad(f)(fnp.asarray(z))
    assert g.dtype == C64 and g.shape == z.shape
    assert_close(g, num_conj_grad(f_np, z), rtol=2e-3, atol=2e-3)
    # the traced path (vjp under jit) agrees with the eager tape
    assert_close(fg.jit(fg.grad(f))(fnp.asarray(z)), g, rtol=1e-5, atol=1e-5)


def test_value_and_grad():
    z = c64(1 + 2j)[0]
    v, g = fg.value_and_grad(lambda z: fnp.abs(z) ** 2)(z)
    assert v.dtype == np.float32 and abs(float(v) - 5.0) < 1e-6
    assert complex(g) == 2 - 4j


def test_grad_with_mixed_real_and_complex_arguments():
    z, x = c64(1 + 1j)[0], fnp.float32(2.0)
    gz, gx = fg.grad(lambda z, x: fnp.abs(z * x) ** 2, argnums=(0, 1))(z, x)
    assert gz.dtype == C64 and gx.dtype == np.float32
    assert_close(gz, 2 * x**2 * np.conj(1 + 1j))  # x^2 |z|^2
    assert_close(gx, 2 * 2.0 * abs(1 + 1j) ** 2)


# -- holomorphic ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "f, df",
    [
        (fnp.sin, np.cos),
        (fnp.exp, np.exp),
        (lambda z: z**3, lambda z: 3 * z**2),
        (fnp.log, lambda z: 1 / z),
        (lambda z: 1 / (1 + z), lambda z: -1 / (1 + z) ** 2),
    ],
)
def test_grad_holomorphic_is_the_complex_derivative(f, df):
    z = np.complex64(0.7 - 0.4j)
    g = fg.grad(f, holomorphic=True)(fnp.asarray(z))
    assert g.dtype == C64
    assert_close(g, df(z))


def test_jacobians_and_hessian_holomorphic():
    z = c64(1 + 2j, 3 - 1j)
    want = np.diag(3 * np.asarray(z) ** 2)
    assert_close(fg.jacfwd(lambda z: z**3, holomorphic=True)(z), want)
    assert_close(fg.jacrev(lambda z: z**3, holomorphic=True)(z), want)
    h = fg.hessian(lambda z: fnp.sum(z**3), holomorphic=True)(z)
    assert h.dtype == C64
    assert_close(h, np.diag(6 * np.asarray(z)))


def test_jacrev_of_real_output_with_complex_input_is_grad_per_row():
    z = c64(1 + 2j, 3 - 1j)
    j = fg.jacrev(lambda z: fnp.abs(z) ** 2)(z)
    assert j.shape == (2, 2) and j.dtype == C64
    assert_close(j, np.diag(2 * np.conj(np.asarray(z))))


def test_jacfwd_of_real_input_with_complex_output():
    x = fnp.asarray(np.array([0.5, 1.5], np.float32))
    j = fg.jacfwd(lambda x: fnp.exp(1j * x))(x)
    assert j.dtype == C64
    assert_close(j, np.diag(1j * np.exp(1j * np.asarray(x))))


# -- errors, as JAX -----------------------------------------------------------------------------


def test_dtype_errors():
    z = c64(1 + 2j)[0]
    with pytest.raises(
        TypeError, match="requires real-valued outputs.*complex64.*holomorphic=True"
    ):
        fg.grad(lambda z: z * z)(z)
    with pytest.raises(TypeError, match="requires real-valued outputs.*complex64"):
        fg.value_and_grad(lambda z: z)(z)
    with pytest.raises(
        TypeError, match="holomorphic=True requires inputs with complex dtype.*float32"
    ):
        fg.grad(lambda x: x * x, holomorphic=True)(1.0)
    with pytest.raises(
        TypeError, match="holomorphic=True requires outputs with complex dtype.*float32"
    ):
        fg.grad(fnp.abs, holomorphic=True)(z)
    with pytest.raises(TypeError, match="real- or complex-valued inputs.*int32.*allow_int"):
        fg.grad(lambda k: k * 2.0)(3)
    with pytest.raises(
        TypeError, match="jacfwd requires real-valued inputs.*complex64.*holomorphic"
    ):
        fg.jacfwd(lambda z: z * fnp.conj(z))(z)
    with pytest.raises(
        TypeError, match="jacfwd with holomorphic=True requires inputs with complex"
    ):
        fg.jacfwd(lambda z: z * z, holomorphic=True)(1.0)
    with pytest.raises(
        TypeError, match="jacfwd with holomorphic=True requires outputs with complex"
    ):
        fg.jacfwd(fnp.abs, holomorphic=True)(z)
    with pytest.raises(TypeError, match="jacrev requires real-valued outputs.*complex64"):
        fg.jacrev(lambda z: z * z)(z)
    with pytest.raises(
        TypeError, match="jacrev with holomorphic=True requires outputs with complex"
    ):
        fg.jacrev(fnp.abs, holomorphic=True)(z)
    with pytest.raises(TypeError, match="jacfwd requires real-valued inputs.*complex64"):
        fg.hessian(lambda z: fnp.abs(z) ** 2)(z)  # as JAX: jacfwd takes no complex input


# -- vjp, jvp, linearize, linear_transpose -------------------------------------------------------


def test_vjp_is_the_transpose_without_conjugation():
    z, w = c64(1 + 2j)[0], c64(3 - 1j)[0]
    ct = np.complex64(1 + 1j)
    out, vjp_fn = fg.vjp(lambda z: z * w, z)
    assert complex(out) == (1 + 2j) * (3 - 1j)
    (g,) = vjp_fn(ct)
    assert g.dtype == C64
    assert_close(g, ct * (3 - 1j))
    # conj is its own transpose
    assert_close(fg.vjp(fnp.conj, z)[1](ct)[0], np.conj(ct))
    # a real input gets the real part of the complex cotangent
    (gx,) = fg.vjp(lambda x: x * w, fnp.float32(2.0))[1](ct)
    assert gx.dtype == np.float32
    assert_close(gx, np.real(ct * (3 - 1j)))


def test_vjp_cotangent_kind_must_match_the_output():
    z = c64(1 + 2j)[0]
    with pytest.raises(ValueError, match="expected c64\\[\\].*complex|c64"):
        fg.vjp(lambda z: z * 2, z)[1](np.float32(1))
    with pytest.raises(ValueError, match="expected f32\\[\\]"):
        fg.vjp(fnp.abs, z)[1](np.complex64(1))


def test_jvp_with_complex_tangents():
    z = c64(1 + 2j)[0]
    dz = np.complex64(1j)
    out, t = fg.jvp(lambda z: z * fnp.conj(z), (z,), (dz,))
    assert complex(out) == 5 + 0j
    # d(z conj z) = dz conj z + z conj dz = 2 Re(conj(z) dz)
    assert_close(t, 2 * np.real(np.conj(1 + 2j) * dz))
    _, t = fg.jvp(fnp.exp, (z,), (dz,))
    assert_close(t, np.exp(1 + 2j) * dz)


def test_jvp_tangent_dtype_must_match_a_complex_primal():
    z = c64(1 + 2j)[0]
    with pytest.raises(TypeError, match="equal shapes and dtypes.*c64.*f32"):
        fg.jvp(fnp.sin, (z,), (np.float32(1),))
    with pytest.raises(TypeError, match="equal shapes and dtypes.*f32.*c64"):
        fg.jvp(fnp.sin, (fnp.float32(1),), (np.complex64(1),))


def test_linearize_and_linear_transpose():
    z, w = c64(1 + 2j, -1j), c64(3 - 1j, 2 + 0.5j)
    out, f_jvp = fg.linearize(lambda z: z * w + fnp.conj(z), z)
    dz = np.array([1j, 1 + 1j], C64)
    assert_close(f_jvp(dz), dz * np.asarray(w) + np.conj(dz))
    ct = np.array([2 - 1j, 1j], C64)
    (g,) = fg.linear_transpose(lambda z: z * w + fnp.conj(z), z)(ct)
    assert_close(g, ct * np.asarray(w) + np.conj(ct))


# -- numerical checks, vmap, jit ---------------------------------------------------------------


@pytest.mark.parametrize(
    "f",
    [
        lambda z, w: z * fnp.conj(z) * w,
        lambda z, w: fnp.sin(z) * fnp.exp(w) / (2 + z * w),
        lambda z, w: fnp.abs(z) ** 2 + fnp.real(w) * fnp.imag(z),
        lambda z, w: fnp.sum(fnp.outer(z, w) @ fnp.conj(w)),
        lambda z, w: fnp.sqrt(z * z + 4) + fnp.log(w * w + 3),
    ],
)
def test_check_grads_fwd_and_rev(f):
    z = c64(0.5 + 1j, -1 + 0.3j)
    w = c64(1 - 0.5j, 0.25 + 2j)
    check_grads(f, (z, w), order=2, modes=("fwd", "rev"))


def test_check_grads_catches_a_missing_conjugate():
    @fg.custom_jvp
    def f(z):
        return z * fnp.conj(z)

    @f.defjvp
    def f_jvp(primals, tangents):
        (z,), (dz,) = primals, tangents
        return f(z), 2 * fnp.conj(z) * dz  # wrong: the holomorphic formula

    z = c64(0.5 + 1j, -1 + 0.3j)
    with pytest.raises(AssertionError):
        check_grads(f, (z,), order=1, modes="fwd")
    with pytest.raises(AssertionError):
        check_grads(f, (z,), order=1, modes="rev")


def test_vmap_of_grad_matches_a_loop():
    zs = np.array([[1 + 2j, 0.5j], [-1 + 0.1j, 2 - 2j], [0.3 + 0.3j, 1 + 0j]], C64)

    def f(z):
        return fnp.sum(fnp.abs(fnp.sin(z)) ** 2)

    batched = fg.vmap(fg.grad(f))(zs)
    for i, z in enumerate(zs):
        assert_close(batched[i], fg.grad(f)(z), rtol=1e-5, atol=1e-6)
    hol = fg.vmap(fg.grad(lambda z: fnp.sum(z**2 * fnp.exp(z)), holomorphic=True))(zs)
    for i, z in enumerate(zs):
        assert_close(hol[i], (2 * z + z**2) * np.exp(z), rtol=1e-5, atol=1e-5)


def test_jit_of_grad_matches_eager():
    z = c64(1 + 2j, -0.5 + 0.25j)

    def f(z):
        return fnp.real(fnp.sum(z * fnp.exp(fnp.conj(z))))

    assert_close(fg.jit(fg.grad(f))(z), fg.grad(f)(z))
    g = fg.jit(fg.grad(lambda z: fnp.sum(fnp.tanh(z)), holomorphic=True))(z)
    assert_close(g, 1 - np.tanh(np.asarray(z)) ** 2)


def test_grad_of_a_complex_zero_is_zero():
    # as JAX: the subgradient of |z| at 0 is 0
    g = fg.grad(lambda z: fnp.sum(fnp.abs(z)))(fnp.zeros(2, C64))
    assert g.dtype == C64
    assert_close(g, np.zeros(2))


def test_lax_level_conventions():
    z = c64(1 + 2j)[0]
    assert complex(fg.grad(lambda z: lax.real(z * lax.conj(z)))(z)) == 2 - 4j
    assert complex(fg.grad(lax.imag)(z)) == -1j


def test_testing_helpers_take_complex_arguments():
    from fungrad.testing import assert_transforms_commute, check_taylor

    z = c64(1 + 2j, 0.5 - 1j)
    assert_transforms_commute(
        lambda z: fnp.sum(fnp.abs(fnp.sin(z)) ** 2), (z,), atol=1e-4, rtol=1e-4
    )
    check_taylor(lambda z: fnp.sin(z) * fnp.conj(z), (z,))
    x = fnp.asarray(np.array([0.3, 1.2], np.float32))
    check_grads(lambda x: fnp.exp(1j * x) * x, (x,), order=2)  # real in, complex out
    check_grads(lambda z: fnp.real(z) * fnp.imag(z), (z,), order=2)  # complex in, real out
