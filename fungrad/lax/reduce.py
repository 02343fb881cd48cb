"""Reductions: reduce_sum/max/min/prod/and/or/xor, argmax/argmin and cumulative reductions
(cumsum/cumprod/cummax/cummin/cumlogsumexp). Windowed reductions live in
``windowed_reductions.py``, as in JAX.

Each primitive reduces with a monoid whose identity is the value of an empty reduction, as in
XLA: ``reduce_max`` of an empty float axis is ``-inf`` (``iinfo.min`` for ints, False for bool),
``reduce_and`` of nothing is all ones. Float max/min propagate NaN; argmax/argmin return the
index of the first NaN. The generic wrapper ``lax.reduce`` recognises
``lax.add``/``lax.mul``/``lax.max``/``lax.min``/``lax.bitwise_*`` with their identity as init
value and binds the matching primitive; several operands (a variadic reduce, e.g. an argmax
over ``(values, indices)``) are reduced with any computation on scalars by a pairwise tree of
vmapped calls, with no primitive of their own. ``lax.reduce_window`` shares the monoid
helpers.

Every primitive has its jvp, transpose (the linear ones: reduce_sum, cumsum) and batching rules
beside it. The rules are written with lax functions, so they are themselves differentiable and
batchable: the cumulative jvps run a linear recurrence as a doubling scan of pads and products.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from fungrad import core, dtypes
from fungrad.core import ShapedArray
from fungrad.lax import complex_math
from fungrad.lax.utils import (
    ANY,
    ANY_OR_COMPLEX,
    INT,
    INT_OR_BOOL,
    NUMERIC_OR_COMPLEX,
    check_kinds,
    ignore_fp_errors,
    operand,
    standard_primitive,
)
from fungrad.lowering import kernel
from fungrad.transforms.jvp import defjvp, defjvp2, defjvp_zero, deflinear
from fungrad.transforms.transpose import deflinear_transpose
from fungrad.transforms.vmap import batch_rules, defreducer

__all__ = [
    "reduce_sum",
    "reduce_max",
    "reduce_min",
    "reduce_prod",
    "reduce_and",
    "reduce_or",
    "reduce_xor",
    "argmax",
    "argmin",
    "cumsum",
    "cumprod",
    "cummax",
    "cummin",
    "cumlogsumexp",
    "reduce",
    "reduce_sum_p",
    "reduce_max_p",
    "reduce_min_p",
    "reduce_prod_p",
    "reduce_and_p",
    "reduce_or_p",
    "reduce_xor_p",
    "argmax_p",
    "argmin_p",
    "cumsum_p",
    "cumprod_p",
    "cummax_p",
    "cummin_p",
    "cumlogsumexp_p",
]


# -- shared helpers ---------------------------------------------------------------------------


def _int_tuple(name: str, what: str, values) -> tuple[int, ...]:
    """``values`` (a sequence of integers) as a tuple of Python ints, for a hashable param."""
    try:
        return tuple(operator.index(v) for v in values)
    except TypeError:
        raise TypeError(f"{name}: {what} must be a sequence of integers, got {values!r}") from None


def _check_axes(name: str, x: ShapedArray, axes) -> None:
    if any(not 0 <= a < x.ndim for a in axes) or len(set(axes)) != len(axes):
        raise ValueError(
            f"{name}: axes {axes} are not distinct dimensions of an operand of "
            f"shape {x.shape} (lax wants nonnegative axes; fungrad.numpy takes "
            "negative ones)"
        )


def _reduced_shape(shape, axes):
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _accumulation_dtype(dtype: np.dtype) -> np.dtype:
    # NOTE: float16 sums/products accumulate in float32 (rounded once at the end), so the
    # reference is the exactly rounded result rather than numpy's float16 accumulation.
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def max_identity(dtype: np.dtype):
    """The identity of ``max`` for ``dtype``: -inf (-inf+0j for complex), ``iinfo.min`` or
    False."""
    dtype = np.dtype(dtype)
    if dtypes.kind(dtype) in "fc":
        return dtype.type(-np.inf)
    if dtypes.kind(dtype) in "iu":
        return dtype.type(np.iinfo(dtype).min)
    return np.bool_(False)


def min_identity(dtype: np.dtype):
    """The identity of ``min`` for ``dtype``: inf (inf+0j for complex), ``iinfo.max`` or
    True."""
    dtype = np.dtype(dtype)
    if dtypes.kind(dtype) in "fc":
        return dtype.type(np.inf)
    if dtypes.kind(dtype) in "iu":
        return dtype.type(np.iinfo(dtype).max)
    return np.bool_(True)


def _and_identity(dtype: np.dtype):
    """All bits set: -1 for signed ints, ``iinfo.max`` for unsigned, True for bool."""
    dtype = np.dtype(dtype)
    return np.bool_(True) if dtypes.kind(dtype) == "b" else np.array(-1).astype(dtype)[()]


def _zero(dtype):
    return np.dtype(dtype).type(0)


def _reduction_abstract_eval(name: str, kinds):
    """abstract_eval of a reduction over ``axes``: same dtype and weak type, axes removed."""

    def abstract_eval(x, *, axes):
        check_kinds(name, x.dtype, kinds)
        _check_axes(name, x, axes)
        return ShapedArray(_reduced_shape(x.shape, axes), x.dtype, x.weak_type)

    return abstract_eval


@ignore_fp_errors
def _ufunc_reduce(ufunc, x, axes, identity):
    out = ufunc.reduce(x, axis=axes, initial=identity)
    return np.asarray(out, dtype=x.dtype)[()]


def _pairwise_reduce(fn, x, axes, identity):
    """``fn`` (an elementwise binary numpy function, associative) folded over ``axes`` as a
    tree: the reduced axes are flattened into a last axis whose halves are combined until
    one element is left; an empty reduction gives ``identity``."""
    x = np.asarray(x)
    kept = [d for d in range(x.ndim) if d not in axes]
    flat = np.transpose(x, kept + list(axes)).reshape([x.shape[d] for d in kept] + [-1])
    flat = np.concatenate([np.full(flat.shape[:-1] + (1,), identity, x.dtype), flat], -1)
    while flat.shape[-1] > 1:
        n = flat.shape[-1]
        half = fn(flat[..., : n // 2], flat[..., n // 2 : 2 * (n // 2)])
        flat = half if n % 2 == 0 else np.concatenate([half, flat[..., -1:]], -1)
    return np.asarray(flat[..., 0], x.dtype)[()]


def _doubling_accumulate(fn, x, axis):
    """The inclusive scan of ``fn`` (associative, elementwise) along ``axis`` by doubling:
    ceil(log2 n) whole-array steps."""
    out = np.moveaxis(np.array(x), axis, -1)
    s, n = 1, out.shape[-1]
    while s < n:
        out = np.concatenate([out[..., :s], fn(out[..., s:], out[..., :-s])], -1)
        s *= 2
    return np.moveaxis(out, -1, axis)


# -- reduce_sum ... reduce_xor ---------------------------------------------------------------


def _sum_dtype(x: np.ndarray, axes) -> np.dtype:
    """The dtype the eager sum of ``x`` over ``axes`` accumulates in. numpy sums pairwise
    only along a contiguous innermost axis; over any other axes it adds serially (2^24
    float32 rows of ones sum to 2^24), so float16/float32 sums accumulate in float64 there,
    rounded once (a bound independent of the length, as the compiled sums)."""
    acc = _accumulation_dtype(x.dtype)
    if acc in (np.float32, np.complex64) and not (
        tuple(axes) == (x.ndim - 1,) and x.flags.c_contiguous
    ):
        return np.dtype(np.complex128 if dtypes.kind(acc) == "c" else np.float64)
    return acc


@ignore_fp_errors
def _reduce_sum_impl(x, *, axes):
    if not axes:  # the identity, as in JAX (np.sum would turn -0.0 into 0.0)
        return x
    out = np.add.reduce(x, axis=axes, dtype=_sum_dtype(x, axes))
    return np.asarray(out).astype(x.dtype, copy=False)[()]


def _reduce_sum_abstract_eval(x, *, axes):
    check_kinds("reduce_sum", x.dtype, NUMERIC_OR_COMPLEX)
    _check_axes("reduce_sum", x, axes)
    return ShapedArray(_reduced_shape(x.shape, axes), x.dtype, x.weak_type)


reduce_sum_p = standard_primitive("reduce_sum", _reduce_sum_impl, _reduce_sum_abstract_eval)


def reduce_sum(operand_, axes):
    """Sum over ``axes`` (a sequence of distinct dimensions).

    Args:
      operand_: a numeric array.
      axes: the (nonnegative) dimensions to reduce.

    Returns:
      The sums, with ``axes`` removed; an empty reduction gives 0.

    Example: ``reduce_sum(jnp.ones((2, 3)), (1,))`` is ``[3., 3.]``.
    """
    x = operand(operand_, "reduce_sum")
    return reduce_sum_p.bind(x, axes=_int_tuple("reduce_sum", "axes", axes))


@ignore_fp_errors
def _reduce_prod_impl(x, *, axes):
    out = np.prod(x, axis=axes, dtype=_accumulation_dtype(x.dtype))
    return np.asarray(out).astype(x.dtype)[()]


reduce_prod_p = standard_primitive(
    "reduce_prod", _reduce_prod_impl, _reduction_abstract_eval("reduce_prod", NUMERIC_OR_COMPLEX)
)


def reduce_prod(operand_, axes):
    """Product over ``axes``; an empty reduction gives 1 (integers wrap on overflow)."""
    x = operand(operand_, "reduce_prod")
    return reduce_prod_p.bind(x, axes=_int_tuple("reduce_prod", "axes", axes))


def _reduce_max_impl(x, *, axes):
    if dtypes.kind(x.dtype) == "c":
        return _pairwise_reduce(complex_math.maximum, x, axes, max_identity(x.dtype))
    return _ufunc_reduce(np.maximum, x, axes, max_identity(x.dtype))


reduce_max_p = standard_primitive(
    "reduce_max", _reduce_max_impl, _reduction_abstract_eval("reduce_max", ANY_OR_COMPLEX)
)


def reduce_max(operand_, axes):
    """Maximum over ``axes``. NaN propagates; an empty reduction gives -inf (floats),
    ``iinfo.min`` (ints) or False (bool). Complex values compare lexicographically, as
    ``lax.max`` (an empty reduction gives -inf+0j)."""
    x = operand(operand_, "reduce_max")
    return reduce_max_p.bind(x, axes=_int_tuple("reduce_max", "axes", axes))


def _reduce_min_impl(x, *, axes):
    if dtypes.kind(x.dtype) == "c":
        return _pairwise_reduce(complex_math.minimum, x, axes, min_identity(x.dtype))
    return _ufunc_reduce(np.minimum, x, axes, min_identity(x.dtype))


reduce_min_p = standard_primitive(
    "reduce_min", _reduce_min_impl, _reduction_abstract_eval("reduce_min", ANY_OR_COMPLEX)
)


def reduce_min(operand_, axes):
    """Minimum over ``axes``. NaN propagates; an empty reduction gives inf (floats),
    ``iinfo.max`` (ints) or True (bool). Complex values compare lexicographically, as
    ``lax.min`` (an empty reduction gives inf+0j)."""
    x = operand(operand_, "reduce_min")
    return reduce_min_p.bind(x, axes=_int_tuple("reduce_min", "axes", axes))


def _reduce_and_impl(x, *, axes):
    return _ufunc_reduce(np.bitwise_and, x, axes, _and_identity(x.dtype))


reduce_and_p = standard_primitive(
    "reduce_and", _reduce_and_impl, _reduction_abstract_eval("reduce_and", INT_OR_BOOL)
)


def reduce_and(operand_, axes):
    """Logical (bool) or bitwise (integer) AND over ``axes``; empty gives all bits set."""
    x = operand(operand_, "reduce_and")
    return reduce_and_p.bind(x, axes=_int_tuple("reduce_and", "axes", axes))


def _reduce_or_impl(x, *, axes):
    return _ufunc_reduce(np.bitwise_or, x, axes, x.dtype.type(0))


reduce_or_p = standard_primitive(
    "reduce_or", _reduce_or_impl, _reduction_abstract_eval("reduce_or", INT_OR_BOOL)
)


def reduce_or(operand_, axes):
    """Logical (bool) or bitwise (integer) OR over ``axes``; empty gives 0 / False."""
    x = operand(operand_, "reduce_or")
    return reduce_or_p.bind(x, axes=_int_tuple("reduce_or", "axes", axes))


def _reduce_xor_impl(x, *, axes):
    return _ufunc_reduce(np.bitwise_xor, x, axes, x.dtype.type(0))


reduce_xor_p = standard_primitive(
    "reduce_xor", _reduce_xor_impl, _reduction_abstract_eval("reduce_xor", INT_OR_BOOL)
)


def reduce_xor(operand_, axes):
    """Logical (bool) or bitwise (integer) XOR over ``axes``; empty gives 0 / False."""
    x = operand(operand_, "reduce_xor")
    return reduce_xor_p.bind(x, axes=_int_tuple("reduce_xor", "axes", axes))


def _kept_dims(ndim: int, axes) -> tuple[int, ...]:
    return tuple(d for d in range(ndim) if d not in axes)


def _reduce_sum_transpose(ct, x, *, axes):
    from fungrad.lax.shape import broadcast_in_dim_p

    if not axes:
        return [ct]
    shape = x.aval.shape
    return [
        broadcast_in_dim_p.bind(ct, shape=shape, broadcast_dimensions=_kept_dims(len(shape), axes))
    ]


def _reduce_chooser_jvp(t, ans, x, *, axes):
    # JAX's _reduce_chooser_jvp_rule: the mean of the tangents at the locations equal to the
    # result (ties share the derivative; a NaN result gets a NaN tangent).
    from fungrad import lax

    shape = core.get_aval(x).shape
    ans = lax.broadcast_in_dim(ans, shape, _kept_dims(len(shape), axes))
    location = lax.convert_element_type(lax.eq(x, ans), t.dtype)
    counts = lax.reduce_sum(location, axes)
    return lax.div(lax.reduce_sum(lax.mul(t, location), axes), counts)


def _reduce_prod_jvp(t, x, *, axes):
    # d prod = sum_i t_i * (product of the other elements), the product of the others being
    # (product of those before i) * (product of those after i): exact when x has zeros.
    from fungrad import lax

    shape = core.get_aval(x).shape
    n = math.prod(shape[a] for a in axes)
    if n <= 1:  # an empty or single-element reduction: the tangent passes through (or is 0)
        return lax.reduce_sum(t, axes)
    kept = _kept_dims(len(shape), axes)
    flat = (n,) + tuple(shape[d] for d in kept)
    x2 = lax.reshape(x, flat, tuple(axes) + kept)
    t2 = lax.reshape(t, flat, tuple(axes) + kept)
    before = _shift(lax.cumprod(x2, 0), 0, 1, reverse=False)
    after = _shift(lax.cumprod(x2, 0, reverse=True), 0, 1, reverse=True)
    return lax.reduce_sum(lax.mul(t2, lax.mul(before, after)), (0,))


deflinear(reduce_sum_p)
deflinear_transpose(reduce_sum_p, _reduce_sum_transpose)
defjvp(reduce_prod_p, _reduce_prod_jvp)
defjvp2(reduce_max_p, _reduce_chooser_jvp)
defjvp2(reduce_min_p, _reduce_chooser_jvp)
defjvp_zero(reduce_and_p)  # integer/bool valued
defjvp_zero(reduce_or_p)
defjvp_zero(reduce_xor_p)
defreducer(reduce_sum_p)
defreducer(reduce_prod_p)
defreducer(reduce_max_p)
defreducer(reduce_min_p)
defreducer(reduce_and_p)
defreducer(reduce_or_p)
defreducer(reduce_xor_p)


# -- argmax / argmin ----------------------------------------------------------------------------


def _arg_reduction_abstract_eval(name: str):
    def abstract_eval(x, *, axes, index_dtype):
        check_kinds(name, x.dtype, ANY)
        check_kinds(name, index_dtype, INT, "index_dtype")
        if len(axes) != 1:
            raise ValueError(f"{name}: reduces exactly one axis, got axes={axes}")
        _check_axes(name, x, axes)
        if x.shape[axes[0]] == 0:
            raise ValueError(
                f"{name}: the reduced dimension must be non-empty, got operand "
                f"shape {x.shape} and axis {axes[0]}"
            )
        return ShapedArray(_reduced_shape(x.shape, axes), index_dtype)

    return abstract_eval


def _argmax_impl(x, *, axes, index_dtype):
    # numpy's argmax, like XLA's, treats NaN as the maximum and returns the first one.
    return np.asarray(np.argmax(x, axis=axes[0])).astype(index_dtype)[()]


def _argmin_impl(x, *, axes, index_dtype):
    return np.asarray(np.argmin(x, axis=axes[0])).astype(index_dtype)[()]


argmax_p = standard_primitive("argmax", _argmax_impl, _arg_reduction_abstract_eval("argmax"))
argmin_p = standard_primitive("argmin", _argmin_impl, _arg_reduction_abstract_eval("argmin"))


def argmax(operand_, axis: int, index_dtype):
    """Index of the maximum along ``axis`` (the first one on ties; the first NaN if any).

    Args:
      operand_: an array (bool, integer or float).
      axis: the (nonnegative) dimension to reduce; it must be non-empty.
      index_dtype: an integer dtype for the result.

    Example: ``argmax(jnp.array([1., 3., 3.]), 0, jnp.int32)`` is ``1``.
    """
    x = operand(operand_, "argmax")
    return argmax_p.bind(
        x, axes=(operator.index(axis),), index_dtype=dtypes.canonicalize_dtype(index_dtype)
    )


def argmin(operand_, axis: int, index_dtype):
    """Index of the minimum along ``axis`` (the first one on ties; the first NaN if any)."""
    x = operand(operand_, "argmin")
    return argmin_p.bind(
        x, axes=(operator.index(axis),), index_dtype=dtypes.canonicalize_dtype(index_dtype)
    )


defjvp_zero(argmax_p)
defjvp_zero(argmin_p)
defreducer(argmax_p)  # passes index_dtype through
defreducer(argmin_p)


# -- cumulative reductions ----------------------------------------------------------------------


def _cumulative_abstract_eval(name: str, kinds):
    def abstract_eval(x, *, axis, reverse):
        check_kinds(name, x.dtype, kinds)
        if not 0 <= axis < x.ndim:
            raise ValueError(
                f"{name}: axis {axis} is not a dimension of an operand of shape "
                f"{x.shape} (lax wants a nonnegative axis)"
            )
        return ShapedArray(x.shape, x.dtype, x.weak_type)

    return abstract_eval


def _cumulative_impl(accumulate):
    """impl from ``accumulate(x, axis) -> array``; ``reverse`` scans from the end."""

    def impl(x, *, axis, reverse):
        if reverse:
            x = np.flip(x, axis)
        with np.errstate(all="ignore"):  # (float16 results may overflow to inf, as in JAX)
            out = np.asarray(accumulate(x, axis)).astype(x.dtype)
        if reverse:
            out = np.flip(out, axis)
        return out

    return impl


def _cumulative_primitive(name: str, accumulate, kinds):
    return standard_primitive(
        name, _cumulative_impl(accumulate), _cumulative_abstract_eval(name, kinds)
    )


def _cumsum_dtype(dtype: np.dtype) -> np.dtype:
    """float32 cumulative sums accumulate in float64, each element rounded once: a serial
    float32 running sum stops growing at 2^24 (3e7 ones ended in 16777216) and drifts by
    sqrt(n) ulps on random data; JAX's is within a few ulps of the exact prefix sums. float16
    ones accumulate in float32 as before (far beyond float16's range; and double -> half has
    no instruction: the compiled code would need a runtime function)."""
    if dtype in (np.float32, np.complex64):
        return np.dtype(np.complex128 if dtypes.kind(dtype) == "c" else np.float64)
    return _accumulation_dtype(dtype)


def _cumlogsumexp(x, axis):
    # integers (JAX's shape rule takes them and keeps their dtype) are computed in float64
    # and converted back as convert_element_type does (truncated, saturated); complex values
    # in complex128: the principal log of the running sums of exponentials
    if dtypes.kind(x.dtype) == "c":
        return _doubling_accumulate(complex_math.logaddexp, x.astype(np.complex128), axis)
    acc = _accumulation_dtype(x.dtype) if dtypes.kind(x.dtype) == "f" else np.dtype(np.float64)
    out = np.logaddexp.accumulate(x.astype(acc), axis)
    if dtypes.kind(x.dtype) in "iu":
        from fungrad.lax.elementwise import _float_to_int

        return _float_to_int(out, x.dtype)
    return out


def _cummax(x, axis):
    if dtypes.kind(x.dtype) == "c":  # lexicographic, as lax.max
        return _doubling_accumulate(complex_math.maximum, x, axis)
    return np.maximum.accumulate(x, axis)


def _cummin(x, axis):
    if dtypes.kind(x.dtype) == "c":
        return _doubling_accumulate(complex_math.minimum, x, axis)
    return np.minimum.accumulate(x, axis)


cumsum_p = _cumulative_primitive(
    "cumsum",
    lambda x, axis: np.cumsum(x, axis, dtype=_cumsum_dtype(x.dtype)),
    NUMERIC_OR_COMPLEX,
)
cumprod_p = _cumulative_primitive(
    "cumprod",
    lambda x, axis: np.cumprod(x, axis, dtype=_accumulation_dtype(x.dtype)),
    NUMERIC_OR_COMPLEX,
)
cummax_p = _cumulative_primitive("cummax", _cummax, NUMERIC_OR_COMPLEX)
cummin_p = _cumulative_primitive("cummin", _cummin, NUMERIC_OR_COMPLEX)
cumlogsumexp_p = _cumulative_primitive("cumlogsumexp", _cumlogsumexp, NUMERIC_OR_COMPLEX)


def _bind_cumulative(prim, name, operand_, axis, reverse):
    x = operand(operand_, name)
    return prim.bind(x, axis=operator.index(axis), reverse=bool(reverse))


def cumsum(operand_, axis: int = 0, reverse: bool = False):
    """Cumulative sum along ``axis`` (from the end when ``reverse``); integers wrap.

    Example: ``cumsum(jnp.array([1, 2, 3]))`` is ``[1, 3, 6]``.
    """
    return _bind_cumulative(cumsum_p, "cumsum", operand_, axis, reverse)


def cumprod(operand_, axis: int = 0, reverse: bool = False):
    """Cumulative product along ``axis`` (from the end when ``reverse``)."""
    return _bind_cumulative(cumprod_p, "cumprod", operand_, axis, reverse)


def cummax(operand_, axis: int = 0, reverse: bool = False):
    """Cumulative maximum along ``axis``; once a NaN is seen the rest is NaN."""
    return _bind_cumulative(cummax_p, "cummax", operand_, axis, reverse)


def cummin(operand_, axis: int = 0, reverse: bool = False):
    """Cumulative minimum along ``axis``; once a NaN is seen the rest is NaN."""
    return _bind_cumulative(cummin_p, "cummin", operand_, axis, reverse)


def cumlogsumexp(operand_, axis: int = 0, reverse: bool = False):
    """Cumulative ``log(sum(exp(x)))`` along ``axis``, computed stably. Integers (as in
    JAX's shape rule) keep their dtype: computed in float, then truncated like
    ``convert_element_type``."""
    return _bind_cumulative(cumlogsumexp_p, "cumlogsumexp", operand_, axis, reverse)


def _shift(x, axis: int, fill, reverse: bool):
    """``x`` moved one step along ``axis`` in scan order (towards the end, or towards the start
    when ``reverse``), ``fill`` entering at the first position: element i holds x[i - 1]."""
    from fungrad import lax

    config = [(0, 0, 0)] * core.get_aval(x).ndim
    config[axis] = (-1, 1, 0) if reverse else (1, -1, 0)
    return lax.pad(x, fill, tuple(config))


def _linear_recurrence(a, b, axis: int, reverse: bool):
    """``d`` with ``d[i] = a[i] * d[i - 1] + b[i]`` along ``axis`` (``d[-1] = 0``; ``i - 1`` is
    ``i + 1`` when ``reverse``), linear in ``b``.

    The pairs (a, b) are affine maps, which compose associatively, so Hillis and Steele's
    doubling scan computes ``d`` in ceil(log2 n) steps: after the step with shift s, element i
    is the composition of the elements i - 2s + 1 .. i (the maps reaching past the start see
    d = 0, so their ``a`` no longer matters).
    """
    from fungrad import lax

    n = core.get_aval(b).shape[axis]
    s = 1
    while s < n:
        config = [(0, 0, 0)] * core.get_aval(b).ndim
        config[axis] = (-s, s, 0) if reverse else (s, -s, 0)
        config = tuple(config)
        b = lax.add(b, lax.mul(a, lax.pad(b, 0, config)))
        if 2 * s < n:
            a = lax.mul(a, lax.pad(a, 0, config))
        s *= 2
    return b


def _cumsum_transpose(ct, x, *, axis, reverse):
    return [cumsum(ct, axis, not reverse)]


def _cumprod_jvp(t, ans, x, *, axis, reverse):
    # d[i] = x[i] * d[i - 1] + t[i] * ans[i - 1]
    from fungrad import lax

    return _linear_recurrence(x, lax.mul(t, _shift(ans, axis, 1, reverse)), axis, reverse)


def _cumlogsumexp_jvp(t, ans, x, *, axis, reverse):
    # d[i] = sum_{j <= i} t[j] exp(x[j] - ans[i]) = exp(ans[i - 1] - ans[i]) d[i - 1]
    # + t[i] exp(x[i] - ans[i]); every exponent is <= 0. Where ans is -inf (all -inf so far) it
    # is replaced by 0 in the exponents, which makes those weights exp(-inf) = 0, not NaN.
    from fungrad import lax

    ninf = lax.full((), -np.inf, core.get_aval(ans).dtype)
    safe = lax.select_n(lax.eq(ans, ninf), ans, lax.full_like(ans, 0))
    a = lax.exp(lax.sub(_shift(ans, axis, -np.inf, reverse), safe))
    b = lax.mul(t, lax.exp(lax.sub(x, safe)))
    return _linear_recurrence(a, b, axis, reverse)


def _cumulative_chooser_jvp(t, ans, x, *, axis, reverse):
    # As reduce_max's jvp, per prefix: the mean of t[j] over j <= i with x[j] == ans[i]. Those
    # j are where x[j] == ans[j] inside the run of equal ans values that ends at i (ans is
    # monotone), so segmented sums (a recurrence that restarts where ans changes) give them.
    from fungrad import lax

    dtype = t.dtype
    same_run = lax.convert_element_type(lax.eq(ans, _shift(ans, axis, 0, reverse)), dtype)
    location = lax.convert_element_type(lax.eq(x, ans), dtype)
    total = _linear_recurrence(same_run, lax.mul(t, location), axis, reverse)
    counts = _linear_recurrence(same_run, location, axis, reverse)
    return lax.div(total, counts)


def _cumulative_batch(prim):
    def rule(axis_size, args, dims, *, axis, reverse):
        (x,), (d,) = args, dims
        return prim.bind(x, axis=axis + (axis >= d), reverse=reverse), d

    return rule


deflinear(cumsum_p)
deflinear_transpose(cumsum_p, _cumsum_transpose)
defjvp2(cumprod_p, _cumprod_jvp)
defjvp2(cumlogsumexp_p, _cumlogsumexp_jvp)
defjvp2(cummax_p, _cumulative_chooser_jvp)
defjvp2(cummin_p, _cumulative_chooser_jvp)
batch_rules[cumsum_p] = _cumulative_batch(cumsum_p)
batch_rules[cumprod_p] = _cumulative_batch(cumprod_p)
batch_rules[cummax_p] = _cumulative_batch(cummax_p)
batch_rules[cummin_p] = _cumulative_batch(cummin_p)
batch_rules[cumlogsumexp_p] = _cumulative_batch(cumlogsumexp_p)


# -- the generic wrappers: monoids recognised by their computation -------------------------------


def _concrete_scalar(name: str, x):
    """The concrete numpy value of the scalar init value ``x`` (a TypeError if it is traced)."""
    if isinstance(x, core.Tracer):
        val = x.to_concrete_value()
        if val is None:
            raise TypeError(
                f"{name}: init_value must be a concrete scalar (the identity of the "
                f"computation), got a traced value {x.aval.str_short()}"
            )
    else:
        val = x
    val = np.asarray(val)
    if val.shape != ():
        raise TypeError(f"{name}: init_value must be a scalar, got shape {val.shape}")
    return val


def _weak(x) -> bool:
    return core.get_aval(x).weak_type


def _monoid(name: str, computation, table):
    """The ``(primitive, identity)`` that ``table`` maps ``computation`` to, else TypeError."""
    from fungrad.lax import elementwise

    for fn_name, prim, identity in table:
        if computation is getattr(elementwise, fn_name, None):
            return prim, identity
    supported = ", ".join(f"lax.{fn_name}" for fn_name, _, _ in table)
    fn = getattr(computation, "__name__", repr(computation))
    raise TypeError(
        f"{name}: unsupported computation {fn}; fungrad supports the "
        f"monoids {supported}, each with its identity as init value"
    )


def _check_identity(name: str, init_value, identity, computation, dtype) -> None:
    val = _concrete_scalar(name, init_value)
    if not np.equal(val, identity):
        raise ValueError(
            f"{name}: init_value {val} is not the identity of {computation.__name__} for "
            f"{np.dtype(dtype).name} (expected {identity}); XLA leaves such reductions "
            "undefined, so combine the init value with the result yourself"
        )


_REDUCE_MONOIDS = (
    ("add", reduce_sum_p, _zero),
    ("mul", reduce_prod_p, lambda dt: np.dtype(dt).type(1)),
    ("max", reduce_max_p, max_identity),
    ("min", reduce_min_p, min_identity),
    ("bitwise_and", reduce_and_p, _and_identity),
    ("bitwise_or", reduce_or_p, _zero),
    ("bitwise_xor", reduce_xor_p, _zero),
)


def reduce(operands, init_values, computation, dimensions):
    """Reduce ``operands`` over ``dimensions`` with ``computation`` (``jax.lax.reduce``).

    One operand: when ``computation`` is one of ``lax.add``, ``lax.mul``, ``lax.max``,
    ``lax.min``, ``lax.bitwise_and``, ``lax.bitwise_or``, ``lax.bitwise_xor`` and
    ``init_values`` its identity (e.g. 0 for add, -inf for a float max), it binds the matching
    reduce_* primitive; any other computation or init value takes the pairwise tree below
    (the init value combined once, as JAX's generic reduce on the CPU). A one-element
    sequence of operands is accepted and, as in JAX, gives a bare array. The result is weakly
    typed only when both the operand and the init value are.

    Several operands (a tuple, list or other pytree of arrays of one shape, with a matching
    pytree of scalar init values of their dtypes): ``computation(a, b)`` takes two such
    pytrees of scalars and returns one; it is vmapped over the pairs of a pairwise tree (see
    ``_variadic_reduce``) and must be associative (XLA leaves the order unspecified). Works
    under jit, grad and vmap with no primitive of its own.

    Example: ``reduce(x, 0., lax.add, (0,))`` is ``reduce_sum(x, (0,))``; a variadic argmax is
    ``reduce((x, iota), (-inf, 0), pick_larger_or_first, (0,))``.
    """
    if _variadic(operands, init_values):
        return _variadic_reduce(operands, init_values, computation, dimensions)
    if isinstance(operands, (list, tuple)):
        operands, init_values = operands[0], init_values[0]
    x = operand(operands, "reduce")
    prim = _monoid_primitive(computation, init_values, x.dtype)
    if prim is None:  # any other computation, or an init value that is not the identity: as
        # JAX's generic reduce (the init value combined once)
        return _variadic_reduce(x, init_values, computation, dimensions)
    out = prim.bind(x, axes=_int_tuple("reduce", "dimensions", dimensions))
    if out.weak_type and not _weak(init_values):
        from fungrad.lax import elementwise

        out = elementwise.convert_element_type(out, out.dtype, weak_type=False)
    return out


def _monoid_primitive(computation, init_value, dtype):
    """The reduce_* primitive of ``computation`` when it is one of lax's monoids and
    ``init_value`` is concretely its identity for ``dtype``; else None."""
    from fungrad.lax import elementwise

    for fn_name, prim, identity in _REDUCE_MONOIDS:
        if computation is getattr(elementwise, fn_name, None):
            if isinstance(init_value, core.Tracer):
                init_value = init_value.to_concrete_value()  # None when traced
            val = np.asarray(init_value)
            is_identity = init_value is not None and val.shape == ()
            return prim if is_identity and np.equal(val, identity(dtype)) else None
    return None


def _variadic(operands, init_values) -> bool:
    """Whether ``reduce`` takes the variadic path: anything but one array (or a one-element
    list/tuple of operands with a one-element list/tuple of init values)."""
    from fungrad import tree_util

    if isinstance(operands, (list, tuple)):
        return not (
            len(operands) == 1 and isinstance(init_values, (list, tuple)) and len(init_values) == 1
        )
    return not tree_util.treedef_is_leaf(tree_util.tree_structure(operands))


def _variadic_reduce(operands, init_values, computation, dimensions):
    """``reduce`` of several operands, as lax operations (so jit, grad and vmap need no rules).

    The reduced dimensions are moved last and merged into one axis of ``N`` elements; then
    adjacent pairs (element ``2i`` with ``2i + 1``, an odd last element passing through
    unchanged) are combined until one is left: ``ceil(log2 N)`` levels, each one
    ``vmap(computation)`` over all pairs, so ``computation`` sees scalars, as XLA's reducers
    do. The elements keep their row-major order, so an associative computation that is not
    commutative still gives the sequential fold's result. The init values are combined once,
    in front (``computation(init, fold)``), as XLA's CPU reduction does, so an init value that
    is not an identity gives what JAX gives; an empty reduction is the init values, and one of
    a single element that element (XLA simplifies such a reduce to a reshape)."""
    from fungrad import lax, tree_util
    from fungrad.transforms.vmap_api import vmap

    flat_ops, tree = tree_util.tree_flatten(operands)
    flat_init, init_tree = tree_util.tree_flatten(init_values)
    n = len(flat_ops)
    if tree != init_tree:
        raise ValueError(
            f"lax.reduce: operands and init_values must have the same pytree structure, one "
            f"scalar init value per operand; got {n} operands {tree} and {len(flat_init)} "
            f"init values {init_tree}. Pass init_values as {tree_util._describe_node(tree)} "
            "of scalars, e.g. (0., 0) for operands (x, i)"
        )
    if not n:
        raise ValueError(
            f"lax.reduce: no operands to reduce (got operands {tree}); pass at least one array"
        )
    ops = [operand(x, "lax.reduce operands") for x in flat_ops]
    inits = [operand(x, "lax.reduce init_values") for x in flat_init]
    avals = [core.get_aval(x) for x in ops]
    init_avals = [core.get_aval(x) for x in inits]
    if any(a.shape != () for a in init_avals):
        raise ValueError(
            "lax.reduce: init_values must be scalars, got shapes "
            f"{[a.shape for a in init_avals]}; pass one 0-d value per operand"
        )
    shape = avals[0].shape
    if any(a.shape != shape for a in avals):
        raise ValueError(
            "lax.reduce: the operands of a variadic reduce must have one shape, got "
            f"{[a.shape for a in avals]}; broadcast them to a common shape first "
            "(lax.broadcast_in_dim or fungrad.numpy.broadcast_arrays)"
        )
    if any(a.dtype != b.dtype for a, b in zip(avals, init_avals)):
        raise TypeError(
            "lax.reduce: each init value must have its operand's dtype, got operands "
            f"{[a.str_short() for a in avals]} and init values "
            f"{[a.str_short() for a in init_avals]}; give the init values those dtypes, "
            "e.g. np.float16(0) or lax.convert_element_type(init, operand.dtype)"
        )
    dims = _int_tuple("reduce", "dimensions", dimensions)
    _check_axes("lax.reduce", avals[0], dims)
    if n > 1 and any(computation is getattr(lax, name, None) for name, _, _ in _REDUCE_MONOIDS):
        raise TypeError(
            f"lax.reduce: computation lax.{computation.__name__} combines two arrays, but "
            f"with {n} operands it is called with two pytrees ({tree_util._describe_node(tree)}) "
            f"of {n} arrays; pass a function of two such pytrees returning one, e.g. "
            f"lambda a, b: (lax.{computation.__name__}(a[0], b[0]), "
            f"lax.{computation.__name__}(a[1], b[1]), ...)"
        )
    out_tree = _check_computation(computation, tree, avals, init_avals)

    kept = [d for d in range(len(shape)) if d not in dims]
    kept_shape = tuple(shape[d] for d in kept)
    rows, size = math.prod(kept_shape), math.prod(shape[d] for d in dims)

    def flat_computation(*leaves):  # on scalars, mapped over the pairs by vmap
        a, b = (tree_util.tree_unflatten(tree, leaves[i : i + n]) for i in (0, n))
        return _computation_leaves(computation, computation(a, b), avals)

    if size == 0:
        outs = [lax.broadcast_in_dim(v, kept_shape, ()) for v in inits]
    else:
        perm = (*kept, *sorted(dims))
        xs = [lax.transpose(x, perm) if perm != tuple(range(len(shape))) else x for x in ops]
        xs = [lax.reshape(x, (rows, size)) for x in xs]
        m = size
        while m > 1:
            h = m // 2
            pairs = [
                lax.reshape(
                    x if m == 2 * h else lax.slice_in_dim(x, 0, 2 * h, axis=1), (rows * h, 2)
                )
                for x in xs
            ]
            halves = [lax.index_in_dim(p, j, 1, keepdims=False) for j in (0, 1) for p in pairs]
            ys = [lax.reshape(y, (rows, h)) for y in vmap(flat_computation)(*halves)]
            if m % 2:  # the last element passes through to the next level
                ys = [
                    lax.concatenate([y, lax.slice_in_dim(x, m - 1, m, axis=1)], 1)
                    for y, x in zip(ys, xs)
                ]
            xs, m = ys, h + m % 2
        outs = [lax.reshape(x, (rows,)) for x in xs]
        if size > 1:
            outs = vmap(flat_computation, in_axes=(None,) * n + (0,) * n)(*inits, *outs)
        outs = [lax.reshape(y, kept_shape) for y in outs]
    outs = [
        _with_weak_type(y, a.dtype, a.weak_type and i.weak_type)
        for y, a, i in zip(outs, avals, init_avals)
    ]
    return tree_util.tree_unflatten(out_tree, outs)


def _computation_name(computation) -> str:
    return getattr(computation, "__name__", repr(computation))


def _computation_leaves(computation, out, avals):
    """The leaves of ``computation``'s output on scalars, checked: one per operand, each a
    scalar of its operand's dtype."""
    from fungrad import tree_util

    leaves, out_tree = tree_util.tree_flatten(out)
    name = _computation_name(computation)
    want = [a.dtype.name for a in avals]
    if len(leaves) != len(avals):
        raise TypeError(
            f"lax.reduce: computation {name} must return one array per operand "
            f"({len(avals)}, of dtypes {want}), got {len(leaves)} ({out_tree}); return the "
            "combination of its two arguments as a pytree like the operands'"
        )
    leaves = [operand(y, f"lax.reduce: the output of computation {name}") for y in leaves]
    got = [core.get_aval(y) for y in leaves]
    if any(g.dtype != a.dtype for g, a in zip(got, avals)):
        raise TypeError(
            f"lax.reduce: computation {name} must return its operands' dtypes {want}, got "
            f"{[g.dtype.name for g in got]}; convert its results "
            "(lax.convert_element_type) to the operands' dtypes"
        )
    if any(g.shape != () for g in got):
        raise ValueError(
            f"lax.reduce: computation {name} must combine scalars into scalars, as XLA's "
            f"reducers do, but returned shapes {[g.shape for g in got]}; do not broadcast "
            "against closed-over arrays"
        )
    return leaves


def _check_computation(computation, tree, avals, init_avals):
    """Trace ``computation`` abstractly on two pytrees of scalars (as JAX traces its reducer)
    to check its output; returns the output's pytree structure (the result's, as in JAX)."""
    from fungrad import tree_util
    from fungrad.transforms.staging import trace_to_jaxpr

    scalars = [core.ShapedArray((), a.dtype, i.weak_type) for a, i in zip(avals, init_avals)]
    out_tree = []

    def traced(*flat):
        a = tree_util.tree_unflatten(tree, flat[: len(scalars)])
        b = tree_util.tree_unflatten(tree, flat[len(scalars) :])
        out = computation(a, b)
        out_tree.append(tree_util.tree_structure(out))
        return _computation_leaves(computation, out, avals)

    trace_to_jaxpr(traced, scalars + scalars)  # (abstract: nothing is evaluated)
    return out_tree[0]


def _with_weak_type(x, dtype, weak: bool):
    """``x`` weakly typed exactly when ``weak`` (JAX's rule for reduce: operand and init value
    both weak)."""
    if core.get_aval(x).weak_type == weak:
        return x
    from fungrad.lax import elementwise

    return elementwise.convert_element_type(x, dtype, weak_type=weak)


# -- lowering (fungrad/lowering/kernel.py) ------------------------------------------------------


def _reduce_lowering(op):
    def rule(ctx, x, *, axes):
        acc = _accumulation_dtype(x.dtype) if op in ("add", "mul") else x.dtype
        # (where the policy says so: a GPU's invocations would race on the accumulated row)
        if (
            acc == x.dtype
            and axes
            and x.ndim - 1 not in axes
            and ctx.planner.policy.column_reduction(x.size, min(x.shape[a] for a in axes))
        ):
            if x.buffer is None and _stored_by_a_product(ctx.planner):
                x = ctx.planner.materialize(x)  # one store, read here and by the product
            return _column_reduction(ctx, x, axes, op)
        return kernel.reduced(ctx, x, axes, op, acc, x.dtype, f"reduce_{op}")

    return rule


def _stored_by_a_product(planner) -> bool:
    """Whether the operand of the running reduction equation is also an operand of a later
    matrix product that stores it (``dot.stores_operands``). The column sum's own loop nest
    would otherwise recompute the operand's expression (the transformer step's bias gradient
    of its gelu layer: the gelu derivative, a tanh, computed twice: 0.9 ms of a 63 ms step)."""
    from fungrad.lax.dot import dot_general_p, stores_operands

    eqn = planner.eqn
    if eqn is None or isinstance(eqn.invars[0], core.Literal):
        return False
    readers = planner._readers.get(eqn.invars[0], [])
    return any(
        r is not None and r.primitive is dot_general_p and stores_operands(planner.policy, r)
        for r in readers
    )


#: a float column sum adds at most this many elements into one accumulator; longer ones sum
#: blocks of this many into partial rows first (see _column_reduction). The partial rows cost
#: 1/128 of the operand's traffic twice over: 4096x4096 column sums as fast as the serial one
#: (32: 15% slower)
COLUMN_SUM_BLOCK = 128


def _column_reduction(ctx, x, axes, op):
    """A reduction that keeps the last axis (bias gradients: sum over the batch) walks x in
    memory order and accumulates into the output row, instead of one strided inner loop per
    output element: a kernel storing the identity, then a read-modify-write kernel.

    Such an accumulation is serial: a float sum over R reduced positions would be off by up
    to R ulps of ``sum(|x|)`` (2^24 rows of ones stop at 2^24). A float sum over more than
    ``COLUMN_SUM_BLOCK`` positions therefore sums blocks of at most that many consecutive
    positions into rows of partial sums (``_column_blocks``), then sums the partial rows the
    same way, recursively: at most ``COLUMN_SUM_BLOCK`` ulps per level, log_128(R) levels.
    A block is a loop of
    its own (loops ``(..., b, t, ...)``), not a division of the row index: a partial row's
    address then stays put through the block and LLVM keeps a short row in registers (a
    column sum of (1e6, 16): 2.0 ms, with the block as ``i // 32`` 7.3 ms; 4096x4096 3.3 vs
    5.0 ms). Such a kernel does not fuse with others over x's shape (the MLP step's bias
    gradients: no measurable change)."""
    from fungrad.lowering.fusion import Store

    planner = ctx.planner
    axes = tuple(sorted(axes))
    kept = [d for d in range(x.ndim) if d not in axes]
    out_shape = tuple(x.shape[d] for d in kept)
    split = None
    if op == "add" and dtypes.kind(x.dtype) == "f":
        split = _column_blocks(x.shape, axes)
    if split is None:
        loops, part_shape = x.shape, out_shape
    else:  # the reduced axis ``a`` runs as ``nb`` blocks of ``tb``: loops (..., b, t, ...)
        a, tb = split
        nb = -(-x.shape[a] // tb)
        loops = (*x.shape[:a], nb, tb, *x.shape[a + 1 :])
        part_shape = (*(x.shape[r] for r in axes if r < a), nb, *out_shape)
    buf = planner.new_buffer(part_shape, x.dtype, "temp")
    ident = ctx.const(kernel.reduce_identity(op, x.dtype), x.dtype)
    planner.add_kernel(
        "init",
        part_shape,
        lambda idx: [Store(buf, ctx.flat_index(idx, part_shape), ident)],
        origin=f"reduce_{op}",
    )

    def accumulate(idx):
        if split is None:
            value, at = x.at(idx), [idx[d] for d in kept]
        else:
            n = x.shape[a]
            i = ctx.iadd(ctx.imul(idx[a], ctx.iconst(tb)), idx[a + 1])
            if n % tb:  # the last block is partial: its positions past the end add zero
                full = (*idx[:a], kernel.clamp_index(ctx, i, 0, n - 1), *idx[a + 2 :])
                value = ctx.select(
                    ctx.op("lt", i, ctx.iconst(n)), x.at(full), ctx.const(0, x.dtype)
                )
            else:
                full = (*idx[:a], i, *idx[a + 2 :])
                value = x.at(full)
            at = ctx.flat_index(
                [full[r] for r in axes if r < a] + [idx[a]] + [full[d] for d in kept], part_shape
            )
            return [Store(buf, at, value, combine=op)]
        return [Store(buf, ctx.flat_index(at, part_shape), value, combine=op)]

    # the outermost loop may run in parallel when it is not reduced, or when it numbers the
    # blocks (each writes its own partial row)
    parallel = 0 not in axes or (split is not None and split[0] == 0)
    planner.add_kernel("colred", loops, accumulate, parallel=parallel, origin=f"reduce_{op}")
    out = planner.buffer_tensor(buf, f"reduce_{op}")
    if split is not None:  # sum the partial rows (a column sum again, blocked when long)
        return _reduce_lowering(op)(ctx, out, axes=tuple(range(len(part_shape) - len(out_shape))))
    return out


def _column_blocks(shape, axes) -> tuple[int, int] | None:
    """How a column sum over ``axes`` of ``shape`` splits into blocks of at most
    ``COLUMN_SUM_BLOCK`` reduced positions: ``(axis, length)`` when the innermost reduced
    axes fit into a block whole and ``axis`` (the next one out) is cut into pieces of
    ``length``; None when the whole reduction fits into one block."""
    inner = 1
    for a in reversed(axes):
        n = shape[a]
        if inner * n > COLUMN_SUM_BLOCK:
            return a, max(1, COLUMN_SUM_BLOCK // inner)
        inner *= n
    return None


def _arg_lowering(op):
    def rule(ctx, x, *, axes, index_dtype):
        return kernel.reduced(ctx, x, axes, op, x.dtype, index_dtype, op)

    return rule


for _p, _op in (
    (reduce_sum_p, "add"),
    (reduce_prod_p, "mul"),
    (reduce_max_p, "max"),
    (reduce_min_p, "min"),
    (reduce_and_p, "and"),
    (reduce_or_p, "or"),
    (reduce_xor_p, "xor"),
):
    kernel.register_lowering(_p, _reduce_lowering(_op))
kernel.register_lowering(argmax_p, _arg_lowering("argmax"))
kernel.register_lowering(argmin_p, _arg_lowering("argmin"))


# -- lowering of the cumulative reductions ------------------------------------------------------
#
# A scan is a kernel over the operand's index space whose store reads the previous element
# from its own output buffer: out[i] = combine(out[i - 1], x[i]) (out[i + 1] when reverse),
# after a small kernel stored out[first] = x[first]. Loops run in the operand's dimension order,
# so the scanned axis is sequential and the dimensions before it are independent (the kernel is
# parallel when the axis is not the outermost one); the operand's own expression fuses into the
# kernels. float16 sums, products and logsumexps accumulate in a float32 buffer, rounded once
# per element as in the impl. The combines are the impl's ufuncs (logaddexp to the ulps of
# exp/log1p); float max/min are the kernel ops (NaN sticks, -0.0 < 0.0). NB: that is JAX's
# cummax/cummin; numpy's maximum/minimum pick either zero on a -0.0/0.0 tie, depending on the
# dtype and SIMD path.

_LOGE2 = float(np.log(2.0))


def _logaddexp_combine(ctx, x, y):
    # numpy's npy_logaddexp: x + log(2) when equal (same-sign infinities), NaN from x - y,
    # else max + log1p(exp(-|x - y|))
    dt = x.dtype
    tmp = ctx.op("sub", x, y)
    pos = ctx.op("gt", tmp, ctx.const(0, dt))
    big = ctx.select(pos, x, y)
    tail = ctx.op("log1p", ctx.op("exp", ctx.op("neg", ctx.op("abs", tmp))))
    r = ctx.select(ctx.op("isnan", tmp), tmp, ctx.op("add", big, tail))
    return ctx.select(ctx.op("eq", x, y), ctx.op("add", x, ctx.const(_LOGE2, dt)), r)


def _cumulative_combine(ctx, op, prev, cur):
    if op == "logaddexp":
        return _logaddexp_combine(ctx, prev, cur)
    return ctx.op(op, prev, cur)


def _recomputes_reduction(root, loops) -> bool:
    """Would a reduction inside ``root`` run inside loops it does not depend on (so once per
    iteration of those)? The renderer evaluates a node in the loop of its innermost index;
    a reduction's own variables nest inside that loop (as the planner reasons)."""
    chain = {v: loops[: i + 1] for i, v in enumerate(loops)}
    seen, stack = set(), [root]
    while stack:  # parents before children, so a nested reduction finds its outer chain
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if e.op == "reduce":
            outer = max((chain.get(v, ()) for v in e.free), key=len, default=())
            if not set(outer) <= e.free:
                return True
            for i, v in enumerate(e.attr.vars):
                chain.setdefault(v, outer + e.attr.vars[: i + 1])
        stack.extend(e.args)
    return False


def _scan_dtype(ctx, dtype: np.dtype, op: str) -> np.dtype:
    """The dtype a compiled scan carries: as the impl (float32 sums and integer logsumexps
    in float64) where the backend's policy ``has_float64``, else float32 (the GPU: WGSL has no
    float64; its scans reassociate their sums instead)."""
    wide = np.dtype(np.float64 if ctx.planner.policy.has_float64 else np.float32)
    if op == "add" and dtype == np.float32 or op == "logaddexp" and dtypes.kind(dtype) in "iu":
        return wide
    return _accumulation_dtype(dtype) if op in ("add", "mul", "logaddexp") else dtype


def _pinned(ctx, i, var):
    """Index ``i`` evaluated inside loop ``var``, as ``i + (v - v)``: the renderer places a
    node in the innermost loop of its variables, so a load of a carry that the loop itself
    stores would otherwise be hoisted out of it and read a stale value. LLVM folds ``v - v``
    and keeps the carry in a register."""
    v = ctx.index(var)
    return ctx.iadd(i, ctx.node("sub", (v, v), kernel.INDEX))


def _cumulative_lowering(name: str, op: str):
    def rule(ctx, x, *, axis, reverse):
        from fungrad.lowering.fusion import Kernel, Store

        acc = _scan_dtype(ctx, x.dtype, op)
        if x.size == 0:
            return kernel.from_fn(x.shape, x.dtype, lambda idx: ctx.const(0, x.dtype), name)
        planner = ctx.planner
        planner.flush()  # stored inputs are read back, not recomputed inside the scan
        n = x.shape[axis]

        def position(loops, at):
            idx = [ctx.index(v) for v in loops]
            idx.insert(axis, at)
            return tuple(idx)

        # kernel 1 stores the first element of every line; kernel 2 runs u over [0, n - 1):
        # out[u + 1] = combine(out[u], x[u + 1]) (mirrored when reverse). The indices stay
        # affine, so LLVM forwards each stored value to the next step's load, and sees that
        # lines of one step are independent.
        others = tuple(kernel.Var(d) for i, d in enumerate(x.shape) if i != axis)
        step = kernel.Var(n - 1)
        u = ctx.index(step)
        first = position(others, ctx.iconst(n - 1 if reverse else 0))
        pos = position(
            others, ctx.isub(ctx.iconst(n - 2), u) if reverse else ctx.iadd(u, ctx.iconst(1))
        )
        prev = position(others, ctx.isub(ctx.iconst(n - 1), u) if reverse else u)
        x0, cur = ctx.convert(x.at(first), acc), ctx.convert(x.at(pos), acc)
        scan_loops = (*others[:axis], step, *others[axis:])
        if _recomputes_reduction(x0, others) or _recomputes_reduction(cur, scan_loops):
            # a reduction inside the operand would be re-evaluated for every line or scanned
            # element: store the operand first
            x = ctx.materialize(x)
            planner.flush()
            x0, cur = ctx.convert(x.at(first), acc), ctx.convert(x.at(pos), acc)
        if acc == x.dtype or not planner.policy.wide_scan_carry:
            # the scan reads its own previous element back (the GPU's scan scheme finds
            # this pattern); a wider accumulator is rounded by a map afterwards
            buf = out = planner.new_buffer(x.shape, acc, "temp")

            def stores(at, value):
                return [Store(buf, ctx.flat_index(at, x.shape), value)]

            carry = ctx.load(buf, ctx.flat_index(prev, x.shape))
        else:
            # a wider carry (float64 for float32) kept per line, each step rounded into the
            # result: the carry of a line stays in a register or in L1, so the memory traffic
            # is the float32 scan's (a float64 copy of the whole array cost 1.3x-2.3x)
            lines = tuple(v.extent for v in others)
            at_line = ctx.flat_index([ctx.index(v) for v in others], lines)
            buf = planner.new_buffer(lines, acc, "temp")
            out = planner.new_buffer(x.shape, x.dtype, "temp")

            def stores(at, value):
                return [
                    Store(buf, at_line, value),
                    Store(out, ctx.flat_index(at, x.shape), ctx.convert(value, x.dtype)),
                ]

            carry = ctx.load(buf, _pinned(ctx, at_line, step))
        planner.add_step(
            Kernel(
                f"{name}_{out.name}_first",
                others,
                stores(first, x0),
                parallel=bool(others),
                origins=(name,),
            )
        )
        if n > 1:
            combined = _cumulative_combine(ctx, op, carry, cur)
            # the dimensions in order: lines before the axis are independent; a compute-bound
            # combine (logaddexp) scans in the outermost loop instead, so the independent
            # lines of one step form the inner loops, which vectorise
            nest = (step, *others) if op == "logaddexp" else scan_loops
            planner.add_step(
                Kernel(
                    f"{name}_{out.name}",
                    nest,
                    stores(pos, combined),
                    parallel=nest[0] is not step,
                    origins=(name,),
                )
            )
        res = planner.buffer_tensor(out, name)
        if out.dtype != x.dtype:
            res = kernel.map_fn(
                ctx, lambda a: ctx.convert(a, x.dtype), res, dtype=x.dtype, origin=name
            )
        return res

    return rule


for _p, _name, _op in (
    (cumsum_p, "cumsum", "add"),
    (cumprod_p, "cumprod", "mul"),
    (cummax_p, "cummax", "max"),
    (cummin_p, "cummin", "min"),
    (cumlogsumexp_p, "cumlogsumexp", "logaddexp"),
):
    kernel.register_lowering(_p, _cumulative_lowering(_name, _op))
del _p, _name, _op
