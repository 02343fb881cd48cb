"""xlogy, xlog1py, entr, rel_entr and kl_div: values against scipy.special, derivatives by
finite differences away from the special points, and at them JAX's closed forms (xlogy's is
``log(y)`` in ``x`` also at ``x == 0``, where the value is defined as 0; kl_div's is -1 in ``p``
at ``p == 0``; entr's is +inf at 0)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special as ss
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.scipy.special as fs

_PAIRS = ["xlogy", "xlog1py", "rel_entr", "kl_div"]


@pytest.mark.parametrize("name", _PAIRS)
def test_values_against_scipy(name):
    xs = np.array([0.0, -0.0, 0.3, 2.0, -1.0, np.nan, np.inf])
    x, y = np.meshgrid(xs, np.array([0.0, 0.5, 3.0, -0.5, np.nan, np.inf]))
    with fg.enable_x64():
        got = np.asarray(getattr(fs, name)(x, y))
    np.testing.assert_allclose(got, getattr(ss, name)(x, y), rtol=1e-12, equal_nan=True)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(_PAIRS), st.floats(0.05, 4.0), st.floats(0.05, 4.0))
def test_derivatives_by_finite_differences(name, x, y):
    f = getattr(fs, name)
    with fg.enable_x64():
        gx, gy = (float(g) for g in fg.grad(f, argnums=(0, 1))(x, y))
        h = 1e-6
        fx = (float(f(x + h, y)) - float(f(x - h, y))) / (2 * h)
        fy = (float(f(x, y + h)) - float(f(x, y - h))) / (2 * h)
    np.testing.assert_allclose([gx, gy], [fx, fy], rtol=1e-6, atol=1e-8)


def test_derivatives_at_the_special_points_are_jax_s():
    with fg.enable_x64():
        assert float(fg.grad(fs.xlogy)(0.0, 2.0)) == pytest.approx(np.log(2.0))
        assert float(fg.grad(fs.xlogy, argnums=1)(0.0, 2.0)) == 0.0
        assert float(fg.grad(fs.xlogy)(0.0, 0.0)) == -np.inf
        assert float(fg.grad(fs.xlog1py)(0.0, 1.0)) == pytest.approx(np.log(2.0))
        assert float(fg.grad(fs.kl_div)(0.0, 0.5)) == -1.0
        assert float(fg.grad(fs.kl_div, argnums=1)(0.0, 0.5)) == 1.0
        assert float(fg.grad(fs.rel_entr)(0.0, 0.5)) == 0.0
        assert float(fg.grad(fs.entr)(0.0)) == np.inf
        # second derivative of x log y in x is 0 everywhere, in y -x / y**2
        assert float(fg.grad(fg.grad(fs.xlogy))(0.5, 2.0)) == 0.0
        assert float(fg.grad(fg.grad(fs.xlogy, argnums=1), argnums=1)(0.5, 2.0)) == -0.125


def test_jit_and_vmap():
    x = np.array([0.0, 0.5, 1.0, 2.0], np.float32)
    y = np.array([2.0, 0.5, 0.0, 3.0], np.float32)
    g = fg.jit(fg.vmap(fg.grad(fs.xlogy)))(x, y)
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(np.asarray(g), np.log(y), rtol=1e-6)
