"""Python protocol details of arrays and avals that JAX programs rely on (JAX 0.10.2's
results, recorded): ``round(x)`` is an integer array, ``in`` needs a 1-d array and a scalar,
``str``/``repr`` of an aval spell the dtype in full."""

from __future__ import annotations

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp


def test_round_without_digits_is_an_integer_array():
    r = round(fnp.array(2.5))
    assert r.dtype == np.int32 and int(r) == 2  # half to even, as numpy
    np.testing.assert_array_equal(np.asarray(round(fnp.array([1.5, 2.5, -0.5]))), [2, 2, 0])
    r2 = round(fnp.array(2.567), 2)
    assert r2.dtype == np.float32 and float(r2) == pytest.approx(2.57)
    assert int(fg.jit(lambda x: round(x))(fnp.array(3.5))) == 4
    with fg.enable_x64():
        assert round(fnp.array(2.5)).dtype == np.int64


def test_contains_needs_a_1d_array_and_a_scalar():
    x = fnp.array([1.0, 2.0, 3.0])
    assert 2.0 in x and 5.0 not in x
    with pytest.raises(ValueError, match="one-dimensional"):
        1.0 in fnp.ones((2, 2))  # noqa: B015
    with pytest.raises(ValueError, match="scalar"):
        fnp.ones(2) in x  # noqa: B015
    with pytest.raises(TypeError, match="unsupported operand"):
        "a" in x  # noqa: B015


def test_aval_str_and_repr_are_jax_s():
    assert str(fg.typeof(fnp.ones((2, 3)))) == "float32[2,3]"
    assert str(fg.typeof(1.0)) == "~float32[]"
    assert repr(fg.typeof(fnp.arange(3))) == "ShapedArray(int32[3])"
    assert repr(fg.typeof(1.0)) == "ShapedArray(float32[], weak_type=True)"
    assert "a:f32[3]" in str(fg.make_jaxpr(lambda x: x * 2)(fnp.ones(3)))  # jaxprs stay short
