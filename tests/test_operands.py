"""fungrad/operands.py (the conversion of user values below every layer) and
fungrad/transforms/array_ops.py (the lax operations the transforms apply, registered by lax).

``operand`` and ``array_leaf`` are checked against numpy (values, canonical dtypes) and against
``fungrad.numpy``'s own conversion, ``util.asarray``, which they must agree with leaf by leaf.
"""

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.numpy import util
from fungrad.operands import array_leaf, operand
from fungrad.transforms import array_ops

_DTYPES = [np.float64, np.float32, np.float16, np.int64, np.int32, np.int8, np.uint8, np.bool_]


@given(
    st.sampled_from(_DTYPES).flatmap(
        lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    )
)
def test_numpy_values_convert_like_asarray(x):
    """Every numpy value (0-d and size-0 included, NaN/inf allowed): the canonical dtype, the
    same values as numpy's cast, equal to util.asarray's result, never the caller's buffer."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflowing float64 -> float32 cast stays quiet
        got = array_leaf(x, "test")
    with np.errstate(all="ignore"):
        expected = np.asarray(x, dtype=fg.dtypes.canonicalize_dtype(x.dtype))
    ref = util.asarray(x)
    assert got.dtype == expected.dtype == ref.dtype
    assert got.shape == x.shape
    assert not got.weak_type and not ref.weak_type
    np.testing.assert_array_equal(np.asarray(got), expected)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))
    if x.size:
        assert not np.shares_memory(np.asarray(got), x)


@pytest.mark.parametrize("value", [True, 3, -2.5, float("nan"), float("inf"), 0])
def test_python_scalars_are_weak_0d_arrays(value):
    for fn in (operand, array_leaf):
        got = fn(value, "test")
        ref = util.asarray(value)
        assert got.shape == () and got.dtype == ref.dtype
        assert got.weak_type == (not isinstance(value, bool)) == ref.weak_type
        np.testing.assert_array_equal(np.asarray(got), np.asarray(value, dtype=got.dtype))


def test_arrays_and_tracers_pass_through():
    x = fnp.arange(3.0)
    assert operand(x) is x and array_leaf(x, "t") is x
    seen = []
    fg.jit(lambda t: seen.append(array_leaf(t, "t") is t) or t)(x)
    assert seen == [True]


def test_objects_with_array_interface_are_converted():
    class Wrapper:
        def __array__(self, dtype=None, copy=None):
            return np.arange(4, dtype=np.int64)

    got = array_leaf(Wrapper(), "test")
    assert got.dtype == np.int32 and got.shape == (4,)
    np.testing.assert_array_equal(np.asarray(got), np.arange(4))


@pytest.mark.parametrize("value", ["abc", b"ab", None, object(), np.array(["a"])])
def test_other_values_are_type_errors_naming_the_caller(value):
    with pytest.raises(TypeError, match="where"):
        array_leaf(value, "where")


def test_complex_values_are_complex64_leaves():
    got = array_leaf(np.array([1 + 2j]), "where")
    assert got.dtype == np.complex64 and not got.weak_type
    got = array_leaf(1 + 2j, "where")
    assert got.dtype == np.complex64 and got.weak_type
    np.testing.assert_array_equal(np.asarray(got), np.complex64(1 + 2j))


def test_operand_rejects_ints_out_of_range():
    with pytest.raises(OverflowError, match="too large"):
        operand(2**40, "test")


def test_array_ops_are_laxs_and_numpys_functions():
    """lax and fungrad.numpy register their functions when imported; the transforms call
    them. An unknown name is a TypeError."""
    assert array_ops.add is lax.add
    assert array_ops.full is lax.full
    assert array_ops.transpose is lax.transpose
    assert array_ops.broadcast_in_dim is lax.broadcast_in_dim
    assert array_ops.reduce_sum is lax.reduce_sum
    assert array_ops.eye is fnp.eye
    x = fnp.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(
        np.asarray(array_ops.transpose(x, (1, 0))), np.arange(6.0).reshape(2, 3).T
    )
    with pytest.raises(TypeError, match="unknown operations"):
        array_ops.register(sin=lax.sin)
