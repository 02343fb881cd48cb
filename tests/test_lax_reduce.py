"""Reduction primitives of fungrad.lax: reduce_* over axes, argmax/argmin, cumulative
reductions, windowed reductions and the generic ``lax.reduce`` / ``lax.reduce_window``
wrappers, against references written here with Python loops (independent of the impls)."""

import functools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from tests.helpers import assert_array

DTYPES = [np.float32, np.int32, np.uint32, np.bool_, np.float16]


def _elements(dtype, special=True, lo=-100, hi=100):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        finite = st.floats(lo, hi, width=8 * dtype.itemsize)
        if not special:
            return finite
        return st.one_of(finite, st.sampled_from([np.nan, np.inf, -np.inf, -0.0]))
    if dtype.kind == "b":
        return st.booleans()
    info = np.iinfo(dtype)
    return st.one_of(
        st.integers(max(lo, info.min), min(hi, info.max)), st.sampled_from([info.min, info.max])
    )


@st.composite
def arrays(draw, dtypes=DTYPES, min_dims=0, max_dims=4, max_side=4, special=True, lo=-100, hi=100):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(
        hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=0, max_side=max_side)
    )
    return draw(hnp.arrays(dtype, shape, elements=_elements(dtype, special, lo, hi)))


@st.composite
def axes_of(draw, ndim):
    """Distinct axes of an ``ndim``-d array, in any order."""
    return tuple(draw(st.permutations(range(ndim)))[: draw(st.integers(0, ndim))])


def _wrap(value: int, dtype) -> int:
    """Python int ``value`` wrapped to the integer ``dtype`` (two's complement)."""
    bits = 8 * np.dtype(dtype).itemsize
    value %= 2**bits
    if np.dtype(dtype).kind == "i" and value >= 2 ** (bits - 1):
        value -= 2**bits
    return value


def _rows(x, axes):
    """``x`` with ``axes`` moved last and flattened: one row per output element."""
    rest = [d for d in range(x.ndim) if d not in axes]
    moved = np.transpose(x, rest + list(axes))
    out_shape = tuple(x.shape[d] for d in rest)
    row_len = int(np.prod([x.shape[d] for d in axes], dtype=np.int64))
    return moved.reshape(int(np.prod(out_shape, dtype=np.int64)), row_len), out_shape


def _py_max(a, b):
    if isinstance(a, float) and (math.isnan(a) or math.isnan(b)):
        return math.nan
    return max(a, b)


def _py_min(a, b):
    if isinstance(a, float) and (math.isnan(a) or math.isnan(b)):
        return math.nan
    return min(a, b)


def _identity(op, dtype):
    dtype = np.dtype(dtype)
    if op == "max":
        return {"f": -math.inf, "b": False}.get(
            dtype.kind, np.iinfo(dtype).min if dtype.kind in "iu" else None
        )
    if op == "min":
        return {"f": math.inf, "b": True}.get(
            dtype.kind, np.iinfo(dtype).max if dtype.kind in "iu" else None
        )
    return {"sum": 0, "prod": 1, "and": True if dtype.kind == "b" else -1, "or": 0, "xor": 0}[op]


_PY_OPS = {
    "sum": lambda a, b: a + b,
    "prod": lambda a, b: a * b,
    "max": _py_max,
    "min": _py_min,
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
    "xor": lambda a, b: a ^ b,
}
_LAX_OPS = {
    "sum": lax.reduce_sum,
    "prod": lax.reduce_prod,
    "max": lax.reduce_max,
    "min": lax.reduce_min,
    "and": lax.reduce_and,
    "or": lax.reduce_or,
    "xor": lax.reduce_xor,
}


def _reference_reduce(x, axes, op):
    """Python-scalar fold of each row (float64 / exact ints), cast to x's dtype."""
    rows, out_shape = _rows(x, axes)
    kind = x.dtype.kind
    out = []
    for row in rows:
        vals = [bool(v) if kind == "b" else int(v) if kind in "iu" else float(v) for v in row]
        acc = functools.reduce(_PY_OPS[op], vals, _identity(op, x.dtype))
        if kind in "iu":
            acc = _wrap(int(acc), x.dtype)
        out.append(acc)
    with np.errstate(over="ignore"):  # float64 -> float16 may overflow to inf, as it should
        return (
            np.array(out, dtype=np.float64 if kind == "f" else x.dtype)
            .reshape(out_shape)
            .astype(x.dtype)
        )


def _valid(op, dtype) -> bool:
    kind = np.dtype(dtype).kind
    return {
        "sum": kind in "iuf",
        "prod": kind in "iuf",
        "max": True,
        "min": True,
        "and": kind in "biu",
        "or": kind in "biu",
        "xor": kind in "biu",
    }[op]


# -- reduce_* ------------------------------------------------------------------------------------


@given(arrays(special=False, lo=-3, hi=3), st.sampled_from(sorted(_PY_OPS)), st.data())
def test_reductions_match_python_reference(x, op, data):
    if not _valid(op, x.dtype):
        x = x.astype(np.int32)
    if op == "prod" and x.dtype.kind == "f":
        x = np.clip(x, -1.5, 1.5).astype(x.dtype)  # keep products representable
    axes = data.draw(axes_of(x.ndim))
    out = _LAX_OPS[op](x, axes)
    ref = _reference_reduce(x, axes, op)
    # float sums/products: one rounding of the exact value vs numpy's float64 fold (float16
    # results are rounded once too, from float32 accumulation)
    tol = {np.dtype(np.float16): 2e-3, np.dtype(np.float32): 1e-5}.get(x.dtype, 0)
    scale = max(1.0, float(np.sum(np.abs(x.astype(np.float64))))) if op == "sum" else 1.0
    assert_array(out, ref, dtype=x.dtype, rtol=tol, atol=tol * scale)


@given(arrays(dtypes=[np.float32, np.float16]), st.sampled_from(["max", "min"]), st.data())
def test_reduce_max_min_propagate_nan_and_inf(x, op, data):
    axes = data.draw(axes_of(x.ndim))
    assert_array(
        _LAX_OPS[op](x, axes), _reference_reduce(x, axes, op), dtype=x.dtype, rtol=0, atol=0
    )


@pytest.mark.parametrize(
    "dtype,op,expected",
    [
        (np.float32, "max", -np.inf),
        (np.float32, "min", np.inf),
        (np.int32, "max", np.iinfo(np.int32).min),
        (np.uint32, "min", np.iinfo(np.uint32).max),
        (np.bool_, "max", False),
        (np.bool_, "min", True),
        (np.bool_, "and", True),
        (np.int32, "and", -1),
        (np.uint32, "and", 2**32 - 1),
        (np.int32, "or", 0),
        (np.bool_, "xor", False),
        (np.float32, "sum", 0.0),
        (np.int32, "prod", 1),
    ],
)
def test_reductions_over_empty_axis_give_identity(dtype, op, expected):
    x = np.zeros((0, 3), dtype)
    assert_array(_LAX_OPS[op](x, (0,)), np.full(3, expected, dtype), dtype=dtype, rtol=0, atol=0)


def test_reduce_integer_sum_and_prod_wrap():
    x = np.array([2**31 - 1, 1], np.int32)
    assert_array(lax.reduce_sum(x, (0,)), np.int32(-(2**31)), dtype=np.int32)
    assert_array(
        lax.reduce_prod(np.array([2**16, 2**16], np.uint32), (0,)), np.uint32(0), dtype=np.uint32
    )


def test_reductions_keep_weak_type_and_zero_axes_are_identity():
    w = lax.reduce_max(3.0, ())
    assert_array(w, np.float32(3.0), dtype=np.float32, weak_type=True)
    assert_array(
        lax.reduce_sum(np.ones((2, 3), np.float32), ()),
        np.ones((2, 3)),
        dtype=np.float32,
        weak_type=False,
    )


def test_reduction_errors_name_the_operation():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match=r"reduce_max: axes \(2,\).*shape \(2, 3\)"):
        lax.reduce_max(x, (2,))
    with pytest.raises(ValueError, match=r"reduce_sum: axes \(0, 0\)"):
        lax.reduce_sum(x, (0, 0))
    with pytest.raises(ValueError, match="reduce_min: axes \\(-1,\\)"):
        lax.reduce_min(x, (-1,))  # lax axes are nonnegative, as in JAX
    with pytest.raises(TypeError, match="reduce_sum does not accept dtype bool"):
        lax.reduce_sum(np.zeros(3, bool), (0,))
    with pytest.raises(TypeError, match="reduce_and does not accept dtype float32"):
        lax.reduce_and(x, (0,))
    with pytest.raises(TypeError, match="reduce_prod: axes must be a sequence of integers"):
        lax.reduce_prod(x, (0.5,))
    # the abstract path gives the same errors
    with pytest.raises(ValueError, match="reduce_max: axes"):
        fg.make_jaxpr(lambda x: lax.reduce_max(x, (3,)))(x)


# -- argmax / argmin -------------------------------------------------------------------------------


def _reference_arg(x, axis, op):
    """Index of the first max/min along ``axis``, or of the first NaN if there is one."""
    rows, out_shape = _rows(x, (axis,))
    out = []
    for row in rows:
        vals = [float(v) for v in row]
        nans = [i for i, v in enumerate(vals) if math.isnan(v)]
        if nans:
            out.append(nans[0])
            continue
        best = max(vals) if op == "max" else min(vals)
        out.append(vals.index(best))
    return np.array(out, np.int64).reshape(out_shape)


@given(arrays(min_dims=1), st.sampled_from(["max", "min"]), st.data())
def test_argmax_argmin_match_reference(x, op, data):
    axis = data.draw(st.integers(0, x.ndim - 1))
    fn = lax.argmax if op == "max" else lax.argmin
    index_dtype = data.draw(st.sampled_from([np.int32, np.uint8, np.int16]))
    if x.shape[axis] == 0:
        with pytest.raises(ValueError, match=f"arg{op}: the reduced dimension must be non-empty"):
            fn(x, axis, index_dtype)
        return
    ref = _reference_arg(x, axis, op).astype(index_dtype)
    assert_array(fn(x, axis, index_dtype), ref, dtype=index_dtype, weak_type=False)


def test_argmax_nan_and_ties_follow_jax():
    x = np.array([1.0, np.nan, 3.0, np.nan], np.float32)
    assert lax.argmax(x, 0, np.int32).item() == 1  # first NaN (NaN counts as the max)
    assert lax.argmin(x, 0, np.int32).item() == 1  # ... and as the min
    assert lax.argmax(np.array([-0.0, 0.0], np.float32), 0, np.int32).item() == 0
    assert lax.argmax(np.array([False, True, True]), 0, np.int32).item() == 1


def test_argmax_errors():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(TypeError, match="argmax does not accept dtype float32 for its index_dtype"):
        lax.argmax(x, 0, np.float32)
    with pytest.raises(ValueError, match=r"argmin: axes \(2,\)"):
        lax.argmin(x, 2, np.int32)
    with pytest.raises(ValueError, match="argmax"):
        lax.argmax(np.float32(1.0), 0, np.int32)


# -- cumulative reductions ---------------------------------------------------------------------

_CUM = {
    "cumsum": (lax.cumsum, lambda a, b: a + b),
    "cumprod": (lax.cumprod, lambda a, b: a * b),
    "cummax": (lax.cummax, _py_max),
    "cummin": (lax.cummin, _py_min),
}


def _reference_cumulative(x, axis, reverse, fold):
    moved = np.moveaxis(x, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1]) if moved.size else moved.reshape(0, 0)
    out = []
    for row in flat:
        vals = [int(v) if x.dtype.kind in "iu" else float(v) for v in row]
        if reverse:
            vals = vals[::-1]
        acc, res = None, []
        for v in vals:
            acc = v if acc is None else fold(acc, v)
            res.append(_wrap(acc, x.dtype) if x.dtype.kind in "iu" else acc)
        out.append(res[::-1] if reverse else res)
    ref = np.array(out, np.float64 if x.dtype.kind == "f" else x.dtype)
    with np.errstate(over="ignore"):
        return np.moveaxis(ref.reshape(moved.shape).astype(x.dtype), -1, axis)


@given(
    arrays(dtypes=[np.float32, np.int32, np.uint32, np.float16], min_dims=1, lo=-3, hi=3),
    st.sampled_from(sorted(_CUM)),
    st.booleans(),
    st.data(),
)
def test_cumulative_match_reference(x, name, reverse, data):
    axis = data.draw(st.integers(0, x.ndim - 1))
    fn, fold = _CUM[name]
    if name == "cumprod" and x.dtype.kind == "f":
        x = np.where(np.isfinite(x), np.clip(x, -1.5, 1.5), x).astype(x.dtype)
    out = fn(x, axis, reverse)
    tol = {np.dtype(np.float16): 2e-3, np.dtype(np.float32): 1e-5}.get(x.dtype, 0)
    assert_array(
        out, _reference_cumulative(x, axis, reverse, fold), dtype=x.dtype, rtol=tol, atol=tol * 300
    )


@given(arrays(dtypes=[np.float32], min_dims=1, max_dims=2), st.booleans(), st.data())
def test_cumlogsumexp_matches_float64_reference(x, reverse, data):
    axis = data.draw(st.integers(0, x.ndim - 1))

    def logaddexp(a, b):
        if math.isnan(a) or math.isnan(b):
            return math.nan
        if math.inf in (a, b):
            return math.inf
        if -math.inf in (a, b):
            return min(a, b) if max(a, b) == -math.inf else max(a, b)
        m = max(a, b)
        return m + math.log(math.exp(a - m) + math.exp(b - m))

    ref = _reference_cumulative(x, axis, reverse, logaddexp)
    assert_array(lax.cumlogsumexp(x, axis, reverse), ref, dtype=np.float32, rtol=1e-5, atol=1e-5)


def test_cumulative_specials_and_weak_type():
    nan = np.nan
    x = np.array([1.0, nan, 3.0], np.float32)
    assert_array(lax.cummax(x), [1.0, nan, nan], dtype=np.float32)
    assert_array(lax.cummin(x, reverse=True), [nan, nan, 3.0], dtype=np.float32)
    assert_array(
        lax.cumsum(np.array([2**31 - 1, 1], np.int32)), [2**31 - 1, -(2**31)], dtype=np.int32
    )
    assert_array(
        lax.cumsum(np.array([1, 2, 3], np.int32), reverse=True),
        np.array([6, 5, 3], np.int32),
        dtype=np.int32,
    )
    y = np.array([-np.inf, -np.inf, 3.0], np.float32)
    assert_array(lax.cumlogsumexp(y), [-np.inf, -np.inf, 3.0], dtype=np.float32)
    w = lax.mul(np.ones(3, np.float32), 1.0)
    assert lax.cumsum(lax.cumsum(fg.Array(np.ones(3, np.float32), True))).weak_type
    assert not lax.cumsum(w).weak_type


def test_cumulative_errors():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match=r"cumsum: axis -1 .*\(2, 3\)"):
        lax.cumsum(x, -1)  # lax wants nonnegative axes, as in JAX
    with pytest.raises(ValueError, match="cumprod: axis 0"):
        lax.cumprod(np.float32(1.0), 0)
    with pytest.raises(TypeError, match="cumlogsumexp does not accept dtype bool"):
        lax.cumlogsumexp(np.zeros(3, bool))  # integers are taken, as in JAX (issue 15)
    with pytest.raises(TypeError, match="cummax does not accept dtype bool"):
        lax.cummax(np.zeros(3, bool))


# -- reduce_window -------------------------------------------------------------------------------


def _reference_reduce_window(x, op, init, wdims, strides, padding, base, wdil):
    """A loop over output elements and window offsets, reading the base-dilated, padded input
    through index arithmetic."""
    dilated = [0 if d == 0 else (d - 1) * b + 1 for d, b in zip(x.shape, base)]
    out_shape = []
    for d, w, s, (lo, hi), wd in zip(dilated, wdims, strides, padding, wdil):
        span = (w - 1) * wd + 1
        out_shape.append(max(0, (d + lo + hi - span) // s + 1))
    is_float = x.dtype.kind == "f"
    out = np.empty(out_shape, np.float64 if is_float else x.dtype)
    for idx in np.ndindex(*out_shape):
        acc = init
        for off in np.ndindex(*wdims):
            coords = []
            for i, o, s, (lo, _), wd, b, d in zip(idx, off, strides, padding, wdil, base, dilated):
                pos = i * s + o * wd - lo
                if not 0 <= pos < d or pos % b:
                    break
                coords.append(pos // b)
            else:
                v = x[tuple(coords)]
                acc = op(acc, float(v) if is_float else int(v) if x.dtype.kind in "iu" else bool(v))
        out[idx] = _wrap(acc, x.dtype) if x.dtype.kind in "iu" else acc
    return out.astype(x.dtype)


@st.composite
def window_cases(draw):
    x = draw(
        arrays(
            dtypes=[np.float32, np.int32, np.bool_, np.float16],
            max_dims=3,
            max_side=5,
            lo=-10,
            hi=10,
        )
    )
    nd = x.ndim
    wdims = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    strides = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    padding = tuple((draw(st.integers(-2, 2)), draw(st.integers(-2, 2))) for _ in range(nd))
    base = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    wdil = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    return x, wdims, strides, padding, base, wdil


@given(window_cases(), st.sampled_from(["add", "max", "min"]))
def test_reduce_window_matches_loop_reference(case, op):
    x, wdims, strides, padding, base, wdil = case
    if op == "add" and x.dtype == np.bool_:
        x = x.astype(np.int32)
    init = {"add": 0, "max": _identity("max", x.dtype), "min": _identity("min", x.dtype)}[op]
    fold = {"add": lambda a, b: a + b, "max": _py_max, "min": _py_min}[op]
    out = lax.reduce_window(x, init, getattr(lax, op), wdims, strides, padding, base, wdil)
    ref = _reference_reduce_window(x, fold, init, wdims, strides, padding, base, wdil)
    tol = 2e-3 if x.dtype == np.float16 else 1e-6
    assert_array(out, ref, dtype=x.dtype, rtol=tol, atol=tol * 30)


def test_reduce_window_string_padding_and_defaults_match_jax():
    x = np.arange(5, dtype=np.float32)
    # values printed by JAX 0.10 for the same calls
    assert_array(lax.reduce_window(x, 0.0, lax.add, (2,), (2,), "SAME"), [1.0, 5.0, 4.0])
    assert_array(lax.reduce_window(x, 0.0, lax.add, (2,), (1,), "same"), [1.0, 3.0, 5.0, 7.0, 4.0])
    assert_array(lax.reduce_window(x, 0.0, lax.add, (2,)), [1.0, 3.0, 5.0, 7.0])
    assert_array(
        lax.reduce_window(x, 0.0, lax.add, (2,), (2,), "SAME", (2,), (1,)),
        [0.0, 1.0, 2.0, 3.0, 4.0],
    )
    assert_array(lax.reduce_window(x, 0.0, lax.add, (2,), (1,), "VALID", (1,), (3,)), [3.0, 5.0])
    y = np.array([1.0, np.nan, 2.0, 3.0], np.float32)
    assert_array(lax.reduce_window(y, -np.inf, lax.max, (2,), (1,), "VALID"), [np.nan, np.nan, 3.0])
    i = np.arange(4, dtype=np.int32)
    assert_array(
        lax.reduce_window(i, np.iinfo(np.int32).min, lax.max, (2,), (1,), ((1, 1),)),
        np.array([0, 1, 2, 3, 3], np.int32),
    )
    assert lax.reduce_window(
        fg.Array(np.ones(3, np.float32), True), 0.0, lax.add, (2,), (1,)
    ).weak_type


def test_padtype_to_pads():
    assert lax.padtype_to_pads((5, 6), (2, 3), (2, 1), "SAME") == [(0, 1), (1, 1)]
    assert lax.padtype_to_pads((5, 6), (2, 3), (2, 1), "SAME_LOWER") == [(1, 0), (1, 1)]
    assert lax.padtype_to_pads((5,), (7,), (1,), "VALID") == [(0, 0)]
    assert lax.padtype_to_pads((3,), (1,), (4,), "SAME") == [(0, 0)]
    with pytest.raises(ValueError, match="padtype_to_pads: unrecognized padding type 'FULL'"):
        lax.padtype_to_pads((5,), (2,), (1,), "FULL")


@settings(deadline=None, max_examples=40)
@given(window_cases(), st.sampled_from(["mul", "lambda_add"]))
def test_generic_reduce_window_matches_loop_reference(case, op):
    # Any computation (JAX: reduce_window_p with the computation's jaxpr): the init value
    # starts each window, padding and base-dilation holes take no part (as the loop
    # reference; JAX 0.10.2 gives [3, 4, 4, 3] for reduce_window(ones(3), 2., add-lambda, (2,),
    # (1,), [(1, 1)]), checked below).
    x, wdims, strides, padding, base, wdil = case
    x = x.astype(np.float32) if x.dtype == np.bool_ else x
    if op == "mul":
        x = np.clip(x, -2, 2)  # products of a window stay exact
        fold, comp, init = (lambda a, b: a * b), lax.mul, 1
    else:
        fold, comp, init = (lambda a, b: a + b), (lambda a, b: a + b), 2
    out = lax.reduce_window(x, x.dtype.type(init), comp, wdims, strides, padding, base, wdil)
    ref = _reference_reduce_window(x, fold, init, wdims, strides, padding, base, wdil)
    if x.ndim == 0:  # (JAX returns a 0-d operand unchanged)
        ref = x
    tol = 2e-3 if x.dtype == np.float16 else 1e-6
    assert_array(out, ref, dtype=x.dtype, rtol=tol, atol=tol * 30)


def test_generic_reduce_window_padding_and_holes_as_jax():
    def add(a, b):
        return a + b

    ones = np.ones(3, np.float32)
    assert_array(lax.reduce_window(ones, 2.0, add, (2,), (1,), [(1, 1)]), [3.0, 4.0, 4.0, 3.0])
    assert_array(lax.reduce_window(ones, 2.0, add, (1,), (1,), [(1, 1)]), [2, 3, 3, 3, 2])
    assert_array(lax.reduce_window(ones, 2.0, add, (3,), (1,), [(0, 0)], (2,)), [4.0, 3.0, 4.0])
    with pytest.raises(TypeError, match="reduce_window got inconsistent dtypes"):
        lax.reduce_window(ones, np.int32(1), lax.mul, (2,), (1,))


def test_variadic_reduce_window_argmax_as_jax():
    # A pytree of operands with a pytree of init values; values printed by JAX 0.10.2.
    def pick(a, b):
        (av, ai), (bv, bi) = a, b
        first = (av > bv) | ((av == bv) & (ai < bi))
        return fnp.where(first, av, bv), fnp.where(first, ai, bi)

    v = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0], np.float32)
    i = np.arange(8, dtype=np.int32)
    vals, idx = lax.reduce_window((v, i), (-np.inf, 0), pick, (3,), (2,), "VALID")
    assert_array(vals, [4.0, 5.0, 9.0], dtype=np.float32)
    assert_array(idx, [2, 4, 5], dtype=np.int32)
    vals, idx = fg.jit(lambda v: lax.reduce_window((v, i), (-np.inf, 0), pick, (3,), (1,), "SAME"))(
        v
    )
    assert_array(idx, [0, 2, 2, 4, 5, 5, 5, 7], dtype=np.int32)
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    assert_array(
        lax.reduce_window(x, 1.0, lax.mul, (2, 2), (1, 2), "SAME"),
        [[0.0, 252.0], [1440.0, 4620.0], [72.0, 110.0]],
    )


def test_reduce_window_errors():
    x = np.zeros((3,), np.float32)
    with pytest.raises(
        ValueError, match="reduce_window: init_value 1.0 is not the identity of add"
    ):
        lax.reduce_window(x, 1.0, lax.add, (2,), (1,))
    with pytest.raises(ValueError, match="reduce_window: init_value -inf .* max for int32"):
        lax.reduce_window(np.zeros(3, np.int32), -np.inf, lax.max, (2,), (1,))
    with pytest.raises(TypeError, match="reduce_window_sum: every element of window_dimensions"):
        lax.reduce_window(x, 0.0, lax.add, (0,), (1,))
    with pytest.raises(
        TypeError,
        match=r"reduce_window_max: window_strides \(1, 1\) must have "
        "one entry per operand dimension",
    ):
        lax.reduce_window(x, -np.inf, lax.max, (1,), (1, 1))
    with pytest.raises(TypeError, match="reduce_window_sum does not accept dtype bool"):
        lax.reduce_window(np.zeros(3, bool), 0, lax.add, (1,), (1,))
    with pytest.raises(TypeError, match="reduce_window: init_value must be a concrete scalar"):
        fg.make_jaxpr(lambda x, i: lax.reduce_window(x, i, lax.add, (1,), (1,)))(x, 0.0)


# -- lax.reduce ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "computation,init,dtype,prim",
    [
        ("add", 0, np.float32, "reduce_sum"),
        ("mul", 1, np.int32, "reduce_prod"),
        ("max", -np.inf, np.float32, "reduce_max"),
        ("min", np.iinfo(np.int32).max, np.int32, "reduce_min"),
        ("bitwise_and", True, np.bool_, "reduce_and"),
        ("bitwise_or", 0, np.uint32, "reduce_or"),
        ("bitwise_xor", False, np.bool_, "reduce_xor"),
    ],
)
def test_reduce_maps_monoids_to_primitives(computation, init, dtype, prim):
    fn = getattr(lax, computation, None)
    assert fn is not None, f"lax.{computation} is missing"
    x = (np.arange(6).reshape(2, 3) % 3).astype(dtype)
    jaxpr = fg.make_jaxpr(lambda x: lax.reduce(x, init, fn, (0,)))(x)
    assert f"{prim}[axes=(0,)]" in str(jaxpr)
    op = {
        "add": "sum",
        "mul": "prod",
        "max": "max",
        "min": "min",
        "bitwise_and": "and",
        "bitwise_or": "or",
        "bitwise_xor": "xor",
    }[computation]
    out = lax.reduce(x, init, fn, (0,))
    assert_array(out, _reference_reduce(x, (0,), op), dtype=dtype)
    assert_array(jaxpr(x)[0], np.asarray(out), dtype=dtype)


def test_reduce_weak_type_and_sequences_follow_jax():
    w = fg.Array(np.ones(3, np.float32), True)
    assert lax.reduce(w, 0.0, lax.add, (0,)).weak_type
    assert not lax.reduce(w, np.float32(0), lax.add, (0,)).weak_type
    assert not lax.reduce(np.ones(3, np.float32), 0.0, lax.add, (0,)).weak_type
    # a one-element sequence gives a bare array, as in JAX
    out = lax.reduce([np.arange(3, dtype=np.float32)], [0.0], lax.add, (0,))
    assert_array(out, np.float32(3.0), dtype=np.float32)
    # several operands take a computation on pytrees (tests/test_lax_map_reduce_variadic.py)
    with pytest.raises(TypeError, match="reduce: computation lax.add combines two arrays"):
        lax.reduce([np.ones(2), np.ones(2)], [0.0, 0.0], lax.add, (0,))
    # any other computation or init value: JAX's generic reduce (the init value combined
    # once, as JAX 0.10.2 gives on the CPU: 4.0 and 3.0)
    assert float(lax.reduce(np.ones(3, np.float32), 1.0, lax.add, (0,))) == 4.0
    assert float(fg.jit(lambda x: lax.reduce(x, 1.0, lax.add, (0,)))(np.ones(3, np.float32))) == 4.0
    assert float(lax.reduce(np.ones(3, np.float32), 0.0, lambda a, b: a + b, (0,))) == 3.0


# -- jaxprs, x64 ---------------------------------------------------------------------------------


def test_make_jaxpr_prints_reductions_and_evaluates_like_eager():
    def f(x):
        return (
            lax.reduce_max(x, (1,)),
            lax.argmax(x, 1, np.int32),
            lax.cumsum(x, 0),
            lax.cumlogsumexp(x, 1, reverse=True),
            lax.reduce_window(x, -np.inf, lax.max, (2, 2), (1, 1), "SAME"),
        )

    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    jaxpr = fg.make_jaxpr(f)(x)
    text = str(jaxpr)
    assert "reduce_max[axes=(1,)]" in text
    assert "argmax[axes=(1,) index_dtype=int32]" in text
    assert "cumsum[axis=0 reverse=False]" in text
    assert "cumlogsumexp[axis=1 reverse=True]" in text
    assert (
        "reduce_window_max[base_dilation=(1, 1) padding=((0, 1), (0, 1)) "
        "window_dilation=(1, 1) window_dimensions=(2, 2) window_strides=(1, 1)]"
    ) in text
    for got, want in zip(jaxpr(x), f(x)):
        assert_array(got, np.asarray(want), dtype=want.dtype, rtol=0, atol=0)


def test_reductions_in_float64_and_int64(x64):
    x = np.linspace(-1, 1, 12).reshape(3, 4)
    assert_array(
        lax.reduce_sum(x, (0, 1)), np.float64(np.sum(x)), dtype=np.float64, rtol=1e-15, atol=1e-15
    )
    assert_array(lax.cumprod(x, 1), np.cumprod(x, 1), dtype=np.float64, rtol=1e-15)
    big = np.array([2**40, 2**40], np.int64)
    assert_array(lax.reduce_sum(big, (0,)), np.int64(2**41), dtype=np.int64)
    assert_array(lax.argmax(x, 1, np.int64), np.full(3, 3), dtype=np.int64)
    assert_array(
        lax.reduce_window(x, 0.0, lax.add, (3, 4), (1, 1)),
        np.sum(x).reshape(1, 1),
        dtype=np.float64,
        rtol=1e-15,
    )
