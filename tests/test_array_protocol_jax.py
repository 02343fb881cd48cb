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


def test_view_compress_choose_argpartition_flat_tobytes():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    fx = fnp.asarray(x)
    np.testing.assert_array_equal(np.asarray(fx.view(fnp.int32)), x.view(np.int32))
    np.testing.assert_array_equal(
        np.asarray(fg.jit(lambda a: a.view(fnp.uint32))(fx)), x.view(np.uint32)
    )
    i16 = np.arange(6, dtype=np.int16).reshape(1, 2, 3)
    np.testing.assert_array_equal(np.asarray(fnp.asarray(i16).view(fnp.int8)), i16.view(np.int8))
    i8 = np.arange(8, dtype=np.int8).reshape(2, 4)
    np.testing.assert_array_equal(np.asarray(fnp.asarray(i8).view(fnp.int16)), i8.view(np.int16))
    np.testing.assert_array_equal(
        np.asarray(fnp.array([1, 0, 1], fnp.int8).view(fnp.bool_)), [1, 0, 1]
    )
    with pytest.raises(ValueError, match="does not divide"):
        fnp.ones(3, fnp.int8).view(fnp.int16)
    with pytest.raises(NotImplementedError):
        fx.view(fnp.int32, type=np.ndarray)
    np.testing.assert_array_equal(np.asarray(fx.compress(np.array([True, False]), axis=0)), x[:1])
    c = fnp.arange(3).choose([fnp.arange(3), fnp.arange(3) * 10, fnp.arange(3) * 100])
    np.testing.assert_array_equal(np.asarray(c), [0, 10, 200])
    part = np.asarray(fx.argpartition(1, axis=1))
    assert (np.take_along_axis(x, part, 1)[:, 1] == np.sort(x, 1)[:, 1]).all()
    assert fx.tobytes() == x.tobytes()
    with pytest.raises(NotImplementedError, match="flatten"):
        fx.flat  # noqa: B018
