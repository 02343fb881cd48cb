"""fungrad.nn against float64 numpy references written from the functions' definitions:
activations, the softmax family and logsumexp (large values, -inf rows, where=, b=,
return_sign), one_hot, standardize; dtypes, errors and traced jaxprs."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import nn
from fungrad.scipy import special
from tests.helpers import assert_array

inf, nan = np.inf, np.nan
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _f64(x):
    return np.asarray(x, np.float64)


def _sigmoid(x):
    with np.errstate(all="ignore"):
        return np.where(x >= 0, 1 / (1 + np.exp(-x)), np.exp(x) / (1 + np.exp(x)))


def _softplus(x):
    return np.logaddexp(x, 0.0)


def _elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


# name -> (fungrad function, float64 reference from the definition)
ACTIVATIONS = {
    "relu": (nn.relu, lambda x: np.maximum(x, 0)),
    "relu6": (nn.relu6, lambda x: np.clip(x, 0, 6)),
    "sigmoid": (nn.sigmoid, _sigmoid),
    "silu": (nn.silu, lambda x: x * _sigmoid(x)),
    "swish": (nn.swish, lambda x: x * _sigmoid(x)),
    "hard_sigmoid": (nn.hard_sigmoid, lambda x: np.clip(x + 3, 0, 6) / 6),
    "hard_silu": (nn.hard_silu, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    "hard_swish": (nn.hard_swish, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    "hard_tanh": (nn.hard_tanh, lambda x: np.clip(x, -1, 1)),
    "softplus": (nn.softplus, _softplus),
    "soft_sign": (nn.soft_sign, lambda x: x / (np.abs(x) + 1)),
    "log_sigmoid": (nn.log_sigmoid, lambda x: -_softplus(-x)),
    "elu": (nn.elu, _elu),
    "elu_alpha": (lambda x: nn.elu(x, alpha=0.5), lambda x: _elu(x, 0.5)),
    "celu": (nn.celu, lambda x: np.maximum(x, 0) + np.expm1(np.minimum(x, 0))),
    "celu_alpha": (
        lambda x: nn.celu(x, 2.0),
        lambda x: np.maximum(x, 0) + 2.0 * np.expm1(np.minimum(x, 0) / 2.0),
    ),
    "selu": (nn.selu, lambda x: 1.0507009873554805 * _elu(x, 1.6732632423543772)),
    "leaky_relu": (nn.leaky_relu, lambda x: np.where(x >= 0, x, 0.01 * x)),
    "leaky_relu_slope": (
        lambda x: nn.leaky_relu(x, negative_slope=0.2),
        lambda x: np.where(x >= 0, x, 0.2 * x),
    ),
    "gelu_tanh": (
        nn.gelu,
        lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    ),
    "gelu_exact": (
        lambda x: nn.gelu(x, approximate=False),
        lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))),
    ),
    "sparse_plus": (
        nn.sparse_plus,
        lambda x: np.where(x <= -1, 0.0, np.where(x >= 1, x, (x + 1) ** 2 / 4)),
    ),
    "sparse_sigmoid": (nn.sparse_sigmoid, lambda x: np.clip(x + 1, 0, 2) / 2),
    "squareplus": (nn.squareplus, lambda x: (x + np.sqrt(x * x + 4)) / 2),
    "mish": (nn.mish, lambda x: x * np.tanh(_softplus(x))),
    "identity": (nn.identity, lambda x: x),
}
# activations whose result keeps an integer input's dtype (as in JAX)
INT_PRESERVING = {"relu", "hard_tanh", "identity"}
# absolute tolerances in float32 beyond the default 2e-6: squareplus cancels for x << 0
# (x + sqrt(x**2 + 4) with |x| = 60 loses ~60 * eps32 absolute), as it does in JAX
ATOL32 = {"squareplus": 1e-5}

finite32 = st.floats(-60, 60, width=32)


@st.composite
def shapes_broadcasting_to(draw, shape):
    """A shape that broadcasts to ``shape`` (never beyond it): some dims set to 1, some
    leading dims dropped."""
    out = tuple(1 if draw(st.booleans()) else d for d in shape)
    return out[draw(st.integers(0, len(out))) :]


small_arrays = hnp.arrays(
    np.float32, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4), elements=finite32
)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@given(x=small_arrays)
def test_activation_matches_float64_definition(name, x):
    fn, ref = ACTIVATIONS[name]
    assert_array(fn(x), ref(_f64(x)), dtype=np.float32, rtol=2e-5, atol=ATOL32.get(name, 2e-6))


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_float64_with_x64(name, x64):
    fn, ref = ACTIVATIONS[name]
    x = np.linspace(-8, 8, 41)
    assert_array(fn(x), ref(x), dtype=np.float64, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_int_input_dtype(name):
    fn, ref = ACTIVATIONS[name]
    x = np.array([-3, -1, 0, 1, 2, 7], np.int32)
    # NB: jax.nn.sigmoid / silu reject ints (lax.logistic does); fungrad promotes them.
    dtype = np.int32 if name in INT_PRESERVING else np.float32
    assert_array(fn(x), ref(_f64(x)), dtype=dtype, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["relu", "sigmoid", "softplus", "gelu_tanh", "elu", "selu"])
def test_activation_float16_stays_float16(name):
    fn, ref = ACTIVATIONS[name]
    x = np.array([-2.5, -0.5, 0, 0.25, 3], np.float16)
    assert_array(fn(x), ref(_f64(x)), dtype=np.float16, rtol=2e-3, atol=2e-3)


def test_activations_stable_for_extreme_inputs():
    x = np.array([-1e30, -1e4, -100.0, 100.0, 1e4, 1e30], np.float32)
    assert_array(nn.softplus(x), [0, 0, 3.7200760e-44, 100, 1e4, 1e30], dtype=np.float32)
    assert_array(nn.log_sigmoid(x), [-1e30, -1e4, -100, -3.7200760e-44, 0, 0], dtype=np.float32)
    assert_array(nn.sigmoid(x), [0, 0, 3.7200760e-44, 1, 1, 1], dtype=np.float32)
    assert_array(nn.elu(x), [-1, -1, -1, 100, 1e4, 1e30], dtype=np.float32)
    assert_array(nn.celu(x), [-1, -1, -1, 100, 1e4, 1e30], dtype=np.float32)
    assert_array(
        nn.gelu(x, approximate=False), [-0.0, -0.0, -0.0, 100, 1e4, 1e30], dtype=np.float32
    )
    y = np.array([-inf, inf], np.float32)
    assert_array(nn.sigmoid(y), [0, 1])
    assert_array(nn.softplus(y), [0, inf])
    assert_array(nn.relu(y), [0, inf])
    assert_array(nn.hard_tanh(y), [-1, 1])


def test_relu_hard_tanh_keep_integer_dtype():
    assert_array(
        nn.relu(np.array([-2, 0, 5], np.int32)), np.array([0, 0, 5], np.int32), dtype=np.int32
    )
    assert_array(
        nn.hard_tanh(np.array([-5, 0, 5], np.int32)), np.array([-1, 0, 1], np.int32), dtype=np.int32
    )


def test_python_scalar_inputs_are_weak_float32():
    out = nn.relu(2.5)
    assert_array(out, 2.5, dtype=np.float32, weak_type=True)
    assert_array(nn.sigmoid(0.0), 0.5, dtype=np.float32)


# -- glu ---------------------------------------------------------------------------------------


@given(
    x=hnp.arrays(
        np.float32,
        st.tuples(st.integers(1, 3), st.sampled_from([0, 2, 4, 6])),
        elements=st.floats(-20, 20, width=32),
    ),
    axis=st.sampled_from([-1, 1]),
)
def test_glu_matches_definition(x, axis):
    a, b = np.split(_f64(x), 2, axis=axis)
    assert_array(nn.glu(x, axis=axis), a * _sigmoid(b), dtype=np.float32, rtol=2e-6, atol=1e-6)


def test_glu_first_axis_and_odd_size_error():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    assert_array(nn.glu(x, axis=0), x[:2] * _sigmoid(_f64(x[2:])), rtol=2e-6)
    with pytest.raises(ValueError, match="glu"):
        nn.glu(x)
    with pytest.raises(ValueError, match="glu"):
        nn.glu(x, axis=2)


# -- softmax, log_softmax -----------------------------------------------------------------------


def _ref_softmax_parts(x, axis, where):
    x = _f64(x)
    mask = np.ones(x.shape, bool) if where is None else np.broadcast_to(where, x.shape)
    with np.errstate(all="ignore"):
        m = np.max(x, axis=axis, where=mask, initial=-inf, keepdims=True)
        xs = np.where(mask, x, -inf) - m
        s = np.sum(np.exp(xs), axis=axis, where=mask, keepdims=True)
    return xs, s, mask


def _ref_softmax(x, axis=-1, where=None):
    xs, s, mask = _ref_softmax_parts(x, axis, where)
    with np.errstate(all="ignore"):
        return np.where(mask, np.exp(xs) / s, 0.0)


def _ref_log_softmax(x, axis=-1, where=None):
    xs, s, mask = _ref_softmax_parts(x, axis, where)
    with np.errstate(all="ignore"):
        return np.where(mask, xs - np.log(s), -inf)


@st.composite
def softmax_cases(draw, elements=st.floats(-1e4, 1e4, width=32)):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4))
    x = draw(hnp.arrays(np.float32, shape, elements=elements))
    ndim = len(shape)
    axis = draw(
        st.one_of(
            st.integers(-ndim, ndim - 1),
            st.none(),
            st.lists(st.integers(0, ndim - 1), unique=True, min_size=1).map(tuple),
        )
    )
    where_shape = draw(shapes_broadcasting_to(shape))
    where = draw(st.none() | hnp.arrays(np.bool_, where_shape))
    return x, axis, where


@given(softmax_cases())
def test_softmax_matches_reference(case):
    x, axis, where = case
    out = nn.softmax(x, axis=axis, where=where)
    assert_array(out, _ref_softmax(x, axis, where), dtype=np.float32, rtol=1e-5, atol=1e-6)
    if where is None and x.size:
        # independent check: the result sums to one along the reduced axes
        np.testing.assert_allclose(np.sum(np.asarray(out, np.float64), axis=axis), 1.0, rtol=1e-5)


@given(softmax_cases())
def test_log_softmax_matches_reference(case):
    x, axis, where = case
    out = nn.log_softmax(x, axis=axis, where=where)
    assert_array(out, _ref_log_softmax(x, axis, where), dtype=np.float32, rtol=1e-5, atol=1e-5)


def test_softmax_large_inputs_do_not_overflow():
    x = np.array([[1000.0, 1000.0], [1e30, -1e30], [3e38, 3e38]], np.float32)
    assert_array(nn.softmax(x), [[0.5, 0.5], [1, 0], [0.5, 0.5]], dtype=np.float32)
    assert_array(
        nn.log_softmax(x),
        [[-math.log(2)] * 2, [0, -2e30], [-math.log(2)] * 2],
        dtype=np.float32,
        rtol=1e-6,
    )


def test_softmax_infinite_rows_follow_jax():
    x = np.array([[-inf, -inf, -inf], [-inf, 0.0, 0.0], [inf, 1.0, 2.0]], np.float32)
    # an all -inf row is -inf - -inf = NaN, a row with +inf is inf/inf = NaN (as in JAX)
    assert_array(nn.softmax(x), [[nan] * 3, [0, 0.5, 0.5], [nan] * 3])
    assert_array(
        nn.log_softmax(x), [[nan] * 3, [-inf, -math.log(2), -math.log(2)], [nan] * 3], rtol=1e-6
    )


def test_softmax_where_masks_and_fully_masked_row():
    x = np.array([[1.0, 2.0, nan], [1.0, 2.0, 3.0]], np.float32)
    where = np.array([[True, True, False], [False, False, False]])
    e = math.exp(1.0)
    assert_array(nn.softmax(x, where=where), [[1 / (1 + e), e / (1 + e), 0], [0, 0, 0]], rtol=1e-6)
    out = nn.log_softmax(x, where=where)
    assert_array(out[0], [-math.log1p(e), 1 - math.log1p(e), -inf], rtol=1e-6)


def test_softmax_int_input_promotes_and_float64(x64):
    # NB: as JAX, int32 input becomes float32 even with x64 (only 64-bit ints -> float64)
    assert_array(
        nn.softmax(np.array([0, 1], np.int32)),
        _ref_softmax(np.array([0.0, 1.0])),
        dtype=np.float32,
        rtol=1e-6,
    )
    x = np.array([[0.5, -3.0, 700.0], [1e300, 1e300, -1e300]])
    assert_array(nn.softmax(x, axis=1), _ref_softmax(x, 1), dtype=np.float64, rtol=1e-14)
    assert_array(nn.log_softmax(x, axis=0), _ref_log_softmax(x, 0), dtype=np.float64, rtol=1e-14)


def test_softmax_errors():
    with pytest.raises(ValueError, match="softmax"):
        nn.softmax(np.ones(3, np.float32), axis=1)
    with pytest.raises(TypeError, match="softmax"):
        nn.softmax("abc")
    with pytest.raises(TypeError, match="log_softmax"):
        nn.log_softmax([1.0, 2.0])  # lists are not arrays (as in JAX)


# -- logsumexp --------------------------------------------------------------------------------


def _ref_logsumexp(a, axis=None, b=None, keepdims=False, where=None):
    """(result, sign) in float64, from the definition log|sum b exp a| with the max shifted."""
    a = _f64(a)
    if b is not None:
        a, b = np.broadcast_arrays(a, _f64(b))
        a = np.where(b != 0, a, -inf)
    mask = np.ones(a.shape, bool) if where is None else np.broadcast_to(where, a.shape)
    with np.errstate(all="ignore"):
        m = np.max(a, axis=axis, where=mask, initial=-inf, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        terms = np.exp(a - m) * (1.0 if b is None else b)
        s = np.sum(terms, axis=axis, where=mask, keepdims=True)
        out = np.log(np.abs(s)) + m
    sign = np.sign(s)
    if not keepdims:
        out, sign = np.squeeze(out, axis=axis), np.squeeze(sign, axis=axis)
    return out, sign


@st.composite
def logsumexp_cases(draw):
    elements = st.one_of(st.floats(-1e4, 1e4, width=32), st.sampled_from([-inf, inf, 1e30]))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    a = draw(hnp.arrays(np.float32, shape, elements=elements))
    ndim = len(shape)
    axis = draw(
        st.none() | st.lists(st.integers(0, ndim - 1), unique=True).map(tuple)
        if ndim
        else st.none()
    )
    b = draw(
        st.none()
        | hnp.arrays(
            np.float32, draw(shapes_broadcasting_to(shape)), elements=st.floats(0, 3, width=32)
        )
    )  # b < 0 cancels: see the test below
    where = draw(st.none() | hnp.arrays(np.bool_, shape))
    return a, axis, b, where, draw(st.booleans())


@given(logsumexp_cases())
def test_logsumexp_matches_reference(case):
    a, axis, b, where, keepdims = case
    ref, ref_sign = _ref_logsumexp(a, axis, b, keepdims, where)
    out, sign = nn.logsumexp(a, axis=axis, b=b, keepdims=keepdims, where=where, return_sign=True)
    assert_array(out, ref, dtype=np.float32, rtol=1e-5, atol=1e-5)
    assert_array(sign, ref_sign, dtype=np.float32)
    plain = nn.logsumexp(a, axis=axis, b=b, keepdims=keepdims, where=where)
    # without return_sign a negative sum is NaN
    assert_array(plain, np.where(ref_sign < 0, nan, ref), dtype=np.float32, rtol=1e-5, atol=1e-5)


def test_logsumexp_infinite_rows():
    a = np.array([[-inf, -inf], [inf, 1.0], [inf, -inf], [nan, 1.0], [1e30, 1e30]], np.float32)
    # all -inf -> -inf (not NaN); +inf -> +inf; NaN propagates; huge values do not overflow
    assert_array(nn.logsumexp(a, axis=1), [-inf, inf, inf, nan, 1e30], dtype=np.float32)
    out, sign = nn.logsumexp(a[:1], axis=1, return_sign=True)
    assert_array(out, [-inf])
    assert_array(sign, [0.0])


def test_logsumexp_small_values_match_naive_formula():
    a = np.array([[0.5, -1.0, 2.0], [3.0, 3.0, 3.0]], np.float32)
    naive = np.log(np.sum(np.exp(_f64(a)), axis=1))
    assert_array(nn.logsumexp(a, axis=1), naive, rtol=1e-6)
    assert_array(nn.logsumexp(a), np.log(np.sum(np.exp(_f64(a)))), rtol=1e-6)
    assert_array(
        nn.logsumexp(a, axis=0, keepdims=True),
        np.log(np.sum(np.exp(_f64(a)), axis=0, keepdims=True)),
        rtol=1e-6,
    )


def test_logsumexp_b_weights_and_sign():
    a = np.array([1.0, 2.0], np.float32)
    b = np.array([1.0, -2.0], np.float32)
    expected = math.log(abs(math.e - 2 * math.e**2))
    assert np.isnan(float(nn.logsumexp(a, b=b)))
    out, sign = nn.logsumexp(a, b=b, return_sign=True)
    assert_array(out, expected, dtype=np.float32, rtol=1e-6)
    assert_array(sign, -1.0, dtype=np.float32)
    # b == 0 drops the term even where a is +inf
    assert_array(nn.logsumexp(np.array([1.0, inf], np.float32), b=np.array([1.0, 0.0])), 1.0)


def test_logsumexp_where_ignores_masked_nan_and_empty_axis():
    a = np.array([1.0, nan], np.float32)
    assert_array(nn.logsumexp(a, where=np.array([True, False])), 1.0, dtype=np.float32)
    assert_array(nn.logsumexp(np.zeros((0, 3), np.float32), axis=0), [-inf] * 3)


def test_logsumexp_dtypes(x64):
    # NB: as JAX, int32 input becomes float32 even with x64 (only 64-bit ints -> float64)
    assert_array(
        nn.logsumexp(np.array([1, 2], np.int32)),
        math.log(math.e + math.e**2),
        dtype=np.float32,
        rtol=1e-6,
    )
    assert_array(nn.logsumexp(3.0), 3.0, dtype=np.float64)
    a = np.array([700.0, 700.0, -1e300])
    assert_array(nn.logsumexp(a), 700 + math.log(2), dtype=np.float64, rtol=1e-15)


def test_logsumexp_is_the_one_in_scipy_special():
    assert nn.logsumexp is special.logsumexp


def test_logsumexp_errors():
    with pytest.raises(TypeError, match="logsumexp"):
        nn.logsumexp("x")
    with pytest.raises(TypeError, match="logsumexp"):
        nn.logsumexp(np.ones(2, np.float32), b="x")
    with pytest.raises(ValueError, match="logsumexp"):
        nn.logsumexp(np.ones(2, np.float32), axis=1)
    with pytest.raises(TypeError):
        nn.logsumexp(np.ones(2, np.float32), b=np.ones(3, np.float32))


# -- logmeanexp --------------------------------------------------------------------------------


def test_logmeanexp_is_logsumexp_minus_log_count():
    a = np.array([[1.0, 2.0, 3.0], [-1e30, 0.0, 1e4]], np.float32)
    ref, _ = _ref_logsumexp(a, axis=1)
    assert_array(nn.logmeanexp(a, axis=1), ref - math.log(3), dtype=np.float32, rtol=1e-6)
    where = np.array([[True, False, True], [True, True, True]])
    ref, _ = _ref_logsumexp(a, axis=1, where=where)
    assert_array(nn.logmeanexp(a, axis=1, where=where), ref - np.log([2.0, 3.0]), rtol=1e-6)


# -- one_hot -----------------------------------------------------------------------------------


def _ref_one_hot(x, n, axis=-1, dtype=np.float32):
    # np.eye row per index; out-of-range indices (negative ones too) give all zeros, as in JAX
    x = np.asarray(x).astype(np.int64)
    inrange = (x >= 0) & (x < n)
    eye = np.concatenate([np.eye(n, dtype=dtype), np.zeros((1, n), dtype)])
    out = eye[np.where(inrange, x, n)]
    return np.moveaxis(out, -1, axis)


@given(n=st.integers(0, 6), data=st.data())
def test_one_hot_matches_eye_indexing(n, data):
    dtype = data.draw(st.sampled_from([np.int32, np.uint8, np.int8, np.uint32]))
    x = data.draw(
        hnp.arrays(
            dtype,
            hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
            elements=st.integers(0 if dtype().dtype.kind == "u" else -3, 8),
        )
    )
    axis = data.draw(st.integers(-x.ndim - 1, x.ndim))
    out_dtype = data.draw(st.sampled_from([None, np.float32, np.int32, np.bool_]))
    if out_dtype is None:
        out, out_dtype = nn.one_hot(x, n, axis=axis), np.float32
    else:
        out = nn.one_hot(x, n, dtype=out_dtype, axis=axis)
    assert_array(out, _ref_one_hot(x, n, axis, out_dtype), dtype=out_dtype)


def test_one_hot_wide_classes_bool_and_list_inputs():
    x = np.array([0, 255, 200], np.uint8)
    assert_array(nn.one_hot(x, 300), _ref_one_hot(x, 300))
    assert_array(nn.one_hot(np.array([True, False]), 2), [[0, 1], [1, 0]], dtype=np.float32)
    assert_array(nn.one_hot(fnp.asarray([0, 1]), 3), [[1, 0, 0], [0, 1, 0]])


def test_one_hot_default_dtype_float64_under_x64(x64):
    assert_array(nn.one_hot(np.array([1, 4]), 3), [[0, 1, 0], [0, 0, 0]], dtype=np.float64)


def test_one_hot_errors():
    x = np.array([0, 1], np.int32)
    with pytest.raises(TypeError, match="one_hot"):
        nn.one_hot(x, 3.0)
    with pytest.raises(ValueError, match="one_hot"):
        nn.one_hot(x, -1)
    with pytest.raises(ValueError, match="one_hot"):
        nn.one_hot(x, 3, axis=2)
    with pytest.raises(TypeError, match="one_hot"):
        nn.one_hot(np.array([0.0, 1.0]), 3)  # NB: float indices are deprecated in JAX
    with pytest.raises(TypeError, match="one_hot"):
        nn.one_hot("ab", 3)


# -- standardize -------------------------------------------------------------------------------


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    x=hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4),
        elements=st.floats(-100, 100),
    ),
    algorithm=st.sampled_from(["fast", "stable"]),
    data=st.data(),
)
def test_standardize_matches_definition(x64, x, algorithm, data):
    axis = data.draw(st.sampled_from([-1, 0, None, tuple(range(x.ndim))]))
    where = data.draw(st.none() | hnp.arrays(np.bool_, x.shape))
    eps = data.draw(st.sampled_from([1e-5, 1.0]))
    mask = np.ones(x.shape, bool) if where is None else where
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # fully masked slices: mean of nothing
        mean = np.mean(x, axis=axis, where=mask, keepdims=True)
        var = np.mean((x - mean) ** 2, axis=axis, where=mask, keepdims=True)
        ref = (x - mean) / np.sqrt(var + eps)
    out = nn.standardize(x, axis=axis, epsilon=eps, where=where, algorithm=algorithm)
    # "fast" computes E[x^2] - E[x]^2, which cancels: allow for it in the tolerance
    atol = 1e-9 if algorithm == "stable" else 1e-9 + 1e-12 * np.max(x * x) / math.sqrt(eps)
    assert_array(out, ref, dtype=np.float64, rtol=1e-7, atol=atol)


def test_standardize_float32_given_mean_variance_and_int_input():
    x = np.array([[1.0, 2.0, 3.0, 6.0], [0.0, -1.0, 5.0, 4.0]], np.float32)
    m, v = _f64(x).mean(-1, keepdims=True), _f64(x).var(-1, keepdims=True)
    assert_array(
        nn.standardize(x), (x - m) / np.sqrt(v + 1e-5), dtype=np.float32, rtol=1e-5, atol=1e-6
    )
    assert_array(
        nn.standardize(x, mean=1.0, variance=4.0, epsilon=0.0), (x - 1.0) / 2.0, dtype=np.float32
    )
    xi = np.array([1, 2, 3], np.int32)
    assert_array(
        nn.standardize(xi), (xi - 2.0) / np.sqrt(2 / 3 + 1e-5), dtype=np.float32, rtol=1e-6
    )


def test_standardize_errors():
    with pytest.raises(ValueError, match="standardize"):
        nn.standardize(np.ones(3, np.float32), algorithm="slow")
    with pytest.raises(TypeError, match="standardize"):
        nn.standardize(np.ones(3, np.float32), mean="zero")


# -- tracing ------------------------------------------------------------------------------------


def test_softmax_jaxpr_has_stable_primitives_and_evaluates():
    x = np.array([[1.0, 2.0, 3.0], [1e4, -1e4, 0.0]], np.float32)
    closed = fg.make_jaxpr(nn.softmax)(x)
    text = str(closed)
    for prim in ("reduce_max", "stop_gradient", "exp", "reduce_sum", "div"):
        assert f"= {prim}" in text, f"{prim} missing from\n{text}"
    [out] = closed(x)
    assert_array(out, np.asarray(nn.softmax(x)), rtol=0, atol=0)


def test_logsumexp_and_one_hot_jaxprs_evaluate_like_eager():
    x = np.array([[1.0, -inf], [-inf, -inf]], np.float32)
    closed = fg.make_jaxpr(lambda a: nn.logsumexp(a, axis=1))(x)
    assert "= reduce_max" in str(closed) and "= log " in str(closed)
    [out] = closed(x)
    assert_array(out, [1.0, -inf], dtype=np.float32)
    idx = np.array([2, 0, 7], np.int32)
    closed = fg.make_jaxpr(lambda i: nn.one_hot(i, 4))(idx)
    assert "= iota" in str(closed) and "= eq " in str(closed)
    [out] = closed(idx)
    assert_array(out, _ref_one_hot(idx, 4), dtype=np.float32)


@pytest.mark.parametrize("name", ["gelu_exact", "gelu_tanh", "selu", "log_sigmoid", "mish"])
def test_activation_jaxpr_evaluates_like_eager(name):
    fn, _ = ACTIVATIONS[name]
    x = np.linspace(-5, 5, 7).astype(np.float32)
    [out] = fg.make_jaxpr(fn)(x)(x)
    assert_array(out, np.asarray(fn(x)), rtol=0, atol=0)


@pytest.mark.parametrize("jit", [False, True])
def test_issue15_relu_and_relu6_derivatives_at_their_kinks_are_zero(jit):
    # JAX defines relu's derivative at 0 as 0 and relu6's as 0 at 0 and 6 (max's own rule
    # splits ties: it gave 0.5); values keep NaN, map -inf/-0 to +0
    wrap = fg.jit if jit else (lambda f: f)
    for f, kinks in ((nn.relu, (0.0,)), (nn.relu6, (0.0, 6.0))):
        d = wrap(fg.grad(f))
        for v in (*kinks, -1.0, 1.0, 7.0):
            inside = 0.0 < v < (6.0 if f is nn.relu6 else np.inf)
            assert float(d(v)) == (1.0 if inside else 0.0), (f.__name__, v)
    x = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, 3.0, 7.0, -2.0], np.float32)
    with np.errstate(invalid="ignore"):
        want = np.maximum(x, np.float32(0))
    got = np.asarray(wrap(nn.relu)(x))
    np.testing.assert_array_equal(got, want)
    assert not np.signbit(got).any()
    np.testing.assert_array_equal(np.asarray(wrap(nn.relu6)(x)), np.minimum(want, 6))
