"""Activation functions, softmax and friends, one_hot and standardize, with jax.nn's names.

Everything here is a composition of fungrad.numpy and fungrad.lax (no primitives), so it
traces, differentiates and compiles like user code. The numerically delicate ones are
written the stable way JAX writes them: ``softplus`` is ``logaddexp(x, 0)``, ``log_sigmoid``
is ``-softplus(-x)``, ``softmax`` / ``log_softmax`` subtract the row maximum (under
``stop_gradient``) before exponentiating, and ``logsumexp`` (defined once, in
:mod:`fungrad.scipy.special`) also copes with rows that are all ``-inf`` or contain ``+inf``.

NB: where jax.nn rejects integer input only because ``lax.logistic`` does (sigmoid, silu,
glu), fungrad promotes integers to the default float dtype, like every other activation.
"""

from __future__ import annotations

import operator

import numpy as np

import fungrad.numpy as fnp
from fungrad import dtypes, lax
from fungrad.numpy import util
from fungrad.scipy import special
from fungrad.transforms.custom import custom_jvp

__all__ = [
    "celu",
    "elu",
    "gelu",
    "glu",
    "hard_sigmoid",
    "hard_silu",
    "hard_swish",
    "hard_tanh",
    "identity",
    "leaky_relu",
    "log_sigmoid",
    "log_softmax",
    "logmeanexp",
    "logsumexp",
    "mish",
    "one_hot",
    "relu",
    "relu6",
    "selu",
    "sigmoid",
    "silu",
    "soft_sign",
    "softmax",
    "softplus",
    "sparse_plus",
    "sparse_sigmoid",
    "squareplus",
    "standardize",
    "swish",
    "tanh",
    "log1mexp",
]

logsumexp = special.logsumexp


def _inexact(fun_name: str, x):
    """``x`` as an array of a floating dtype (integers and bools promote to the default)."""
    [x] = util.promote_args_inexact(fun_name, x)
    return x


def _array(fun_name: str, x):
    """``x`` as an array, its dtype kept. The activations written with jax.nn's formulas take
    it: their dtypes on integer and bool input are then JAX's, set by the Python scalars the
    formula mixes in (``elu(int32)`` is a weak default float, float64 with x64, because
    ``where(x > 0, 0.0, x)`` meets a Python float; ``softplus(bool)`` is weak because
    ``logaddexp(x, 0)`` meets a Python int; ``softplus(int8)`` is a strong float32)."""
    util.check_arraylike(fun_name, x)
    return util.asarray(x, fun_name=fun_name)


# -- elementwise activations ----------------------------------------------------------------


def identity(x):
    """Identity activation: returns ``x`` as an array."""
    util.check_arraylike("identity", x)
    return util.asarray(x)


def relu(x):
    """Rectified linear unit, ``max(x, 0)``; integer inputs stay integer.

    Its derivative at 0 is 0, as JAX's (``max``'s own rule splits ties, 0.5); NaN stays NaN.

    Example:
        >>> relu(fnp.array([-2., 0., 3.]))   # [0., 0., 3.]
    """
    util.check_arraylike("relu", x)
    return _clip_kinks(x, 0, None)


def relu6(x):
    """ReLU capped at 6: ``min(max(x, 0), 6)``; its derivative is 0 at 0 and at 6, as JAX's."""
    return _clip_kinks(_array("relu6", x), 0, 6.0)


def _clip_kinks(x, lo, hi):
    """``x`` clipped to [lo, hi] (``hi`` None: no upper bound) with a zero derivative at the
    bounds themselves: the clipped value of ``stop_gradient(x)`` except strictly inside."""
    x = fnp.asarray(x)
    inside = x > lo if hi is None else (x > lo) & (x < hi)
    clipped = fnp.maximum(lax.stop_gradient(x), lo)
    if hi is not None:
        clipped = fnp.minimum(clipped, hi)
    return fnp.where(inside, x, clipped)


def sigmoid(x):
    """Logistic sigmoid ``1 / (1 + exp(-x))`` (``lax.logistic``, stable for large ``|x|``)."""
    return lax.logistic(_inexact("sigmoid", x))


def silu(x):
    """SiLU / swish: ``x * sigmoid(x)``."""
    x = _inexact("silu", x)
    return x * sigmoid(x)


swish = silu


def hard_sigmoid(x):
    """Piecewise-linear sigmoid: ``relu6(x + 3) / 6``."""
    x = _array("hard_sigmoid", x)
    return relu6(x + 3.0) / 6.0


def hard_silu(x):
    """Hard SiLU / hard swish: ``x * hard_sigmoid(x)``."""
    x = _array("hard_silu", x)
    return x * hard_sigmoid(x)


hard_swish = hard_silu


def hard_tanh(x):
    """``x`` clipped to ``[-1, 1]``; integer inputs stay integer."""
    util.check_arraylike("hard_tanh", x)
    x = util.asarray(x)
    return fnp.where(x > 1, 1, fnp.where(x < -1, -1, x))


def softplus(x):
    """``log(1 + exp(x))``, computed as ``logaddexp(x, 0)`` so it never overflows."""
    return fnp.logaddexp(_array("softplus", x), 0)


def sparse_plus(x):
    """Sparse plus: 0 for ``x <= -1``, ``x`` for ``x >= 1``, ``(x + 1)**2 / 4`` between."""
    x = _array("sparse_plus", x)
    return fnp.where(x <= -1.0, 0.0, fnp.where(x >= 1.0, x, fnp.square(x + 1.0) / 4.0))


def sparse_sigmoid(x):
    """Sparse sigmoid: ``clip(x + 1, 0, 2) / 2``."""
    x = _array("sparse_sigmoid", x)
    return 0.5 * fnp.clip(x + 1.0, 0.0, 2.0)


def soft_sign(x):
    """Soft sign: ``x / (|x| + 1)``."""
    x = _array("soft_sign", x)
    return x / (fnp.abs(x) + 1)


def squareplus(x, b=4):
    """Squareplus: ``(x + sqrt(x**2 + b)) / 2``."""
    util.check_arraylike("squareplus", x, b)
    x, b = util.asarray(x), util.asarray(b)
    return (x + fnp.sqrt(fnp.square(x) + b)) / 2


def mish(x):
    """Mish: ``x * tanh(softplus(x))``."""
    x = _array("mish", x)
    return x * fnp.tanh(softplus(x))


tanh = fnp.tanh  # jax.nn.tanh is jax.numpy.tanh


@custom_jvp
def _log1mexp(x):
    # log(-expm1(-x)) is accurate for small x, log1p(-exp(-x)) for large x; they cross at
    # log 2 (Maechler's note on log(1 - exp(-a)))
    return fnp.where(x < np.log(2.0), fnp.log(-fnp.expm1(-x)), fnp.log1p(-fnp.exp(-x)))


_log1mexp.defjvps(lambda g, ans, x: g / fnp.expm1(x))


def log1mexp(x):
    """``log(1 - exp(-x))`` for ``x >= 0``, accurate near 0 and for large ``x``
    (``jax.nn.log1mexp``); its derivative is ``1 / expm1(x)``. NaN for ``x < 0``."""
    util.check_arraylike("log1mexp", x)
    return _log1mexp(util.asarray(x))


def log_sigmoid(x):
    """``log(sigmoid(x))``, computed as ``-softplus(-x)`` (finite for very negative ``x``)."""
    x = _inexact("log_sigmoid", x)
    return -softplus(-x)


def elu(x, alpha=1.0):
    """Exponential linear unit: ``x`` for ``x > 0``, ``alpha * (exp(x) - 1)`` otherwise.

    The ``expm1`` argument is masked to 0 where ``x > 0`` so large positive inputs never
    overflow (and, later, never give NaN gradients).
    """
    util.check_arraylike("elu", x, alpha)
    x = _array("elu", x)
    return fnp.where(x > 0, x, alpha * fnp.expm1(fnp.where(x > 0, 0.0, x)))


def celu(x, alpha=1.0):
    """Continuously differentiable ELU: ``max(x, 0) + alpha * expm1(min(x, 0) / alpha)``."""
    util.check_arraylike("celu", x, alpha)
    x = _array("celu", x)
    return fnp.maximum(x, 0.0) + alpha * fnp.expm1(fnp.minimum(x, 0.0) / alpha)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(x):
    """Scaled ELU with the self-normalising constants of Klambauer et al. (2017)."""
    return _SELU_SCALE * elu(_array("selu", x), _SELU_ALPHA)


def leaky_relu(x, negative_slope=1e-2):
    """``x`` for ``x >= 0``, ``negative_slope * x`` otherwise."""
    util.check_arraylike("leaky_relu", x, negative_slope)
    x = _array("leaky_relu", x)
    return fnp.where(x >= 0, x, negative_slope * x)


_SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))
_SQRT_HALF = float(np.sqrt(0.5))


def gelu(x, approximate: bool = True):
    """Gaussian error linear unit.

    ``approximate=True`` (the default, as in JAX) uses the tanh formula
    ``x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x**3)))``; ``approximate=False`` the exact
    ``x/2 * erfc(-x / sqrt(2))``.
    """
    x = _inexact("gelu", x)
    if approximate:
        cdf = 0.5 * (1.0 + fnp.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x))))
        return x * cdf
    return 0.5 * x * lax.erfc(-x * _SQRT_HALF)


def glu(x, axis: int = -1):
    """Gated linear unit: split ``x`` in two halves along ``axis``, ``a * sigmoid(b)``."""
    x = _inexact("glu", x)
    axis = util.canonicalize_axis(axis, x.ndim, "glu")
    size = x.shape[axis]
    if size % 2:
        raise ValueError(
            f"glu: the size of axis {axis} must be divisible by 2, got shape {x.shape}"
        )
    x1, x2 = fnp.split(x, 2, axis)
    return x1 * sigmoid(x2)


# -- softmax family -------------------------------------------------------------------------


def _check_where(fun_name: str, where) -> None:
    if where is not None:
        util.check_arraylike(fun_name, where, names=["where"])


def log_softmax(x, axis=-1, where=None):
    """``x - logsumexp(x, axis)``, computed after subtracting the maximum.

    ``axis`` is an int, a tuple of ints or None (all axes). Entries masked out by ``where``
    give ``-inf``. Any ``+inf`` input makes its slice NaN, as in JAX.
    """
    util.check_arraylike("log_softmax", x)
    _check_where("log_softmax", where)
    x = _inexact("log_softmax", x)
    axis = util.canonicalize_axes(axis, x.ndim, "log_softmax")
    x_max = fnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = x if where is None else fnp.where(where, x, -np.inf)
    shifted = x_safe - lax.stop_gradient(x_max)
    shifted_lse = fnp.log(fnp.sum(fnp.exp(shifted), axis, where=where, keepdims=True))
    result = shifted - shifted_lse
    if where is not None:
        return fnp.where(where, result, -np.inf)
    return result


def softmax(x, axis=-1, where=None):
    """``exp(x) / sum(exp(x), axis)``, computed after subtracting the maximum so large inputs
    never overflow.

    ``axis`` is an int, a tuple of ints or None (all axes). Entries masked out by ``where``
    give 0. A slice that is all ``-inf`` or contains ``+inf`` gives NaN, as in JAX.

    Example:
        >>> softmax(fnp.array([1000., 1000.]))   # [0.5, 0.5]
    """
    util.check_arraylike("softmax", x)
    _check_where("softmax", where)
    x = _inexact("softmax", x)
    axis = util.canonicalize_axes(axis, x.ndim, "softmax")
    x_max = fnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = x if where is None else fnp.where(where, x, -np.inf)
    unnormalized = fnp.exp(x_safe - lax.stop_gradient(x_max))
    result = unnormalized / fnp.sum(unnormalized, axis, where=where, keepdims=True)
    if where is not None:
        result = fnp.where(where, result, 0.0)
    return result


def logmeanexp(x, axis=None, where=None, keepdims: bool = False):
    """``logsumexp(x, axis) - log(n)`` with ``n`` the number of (unmasked) reduced elements."""
    util.check_arraylike("logmeanexp", x)
    _check_where("logmeanexp", where)
    lse = logsumexp(x, axis=axis, where=where, keepdims=keepdims)
    ones = fnp.ones_like(util.asarray(x), dtype=lse.dtype)
    count = fnp.sum(ones, axis, where=where, keepdims=keepdims)
    return lse - fnp.log(count)


def standardize(
    x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None, *, algorithm: str = "fast"
):
    """``(x - mean) / sqrt(variance + epsilon)`` along ``axis`` (int, tuple or None).

    ``mean`` / ``variance`` default to the (``where``-masked) statistics of ``x``. As in JAX,
    ``algorithm="fast"`` computes the variance as ``mean(x**2) - mean(x)**2`` clipped at 0;
    ``algorithm="stable"`` uses the two-pass ``mean((x - mean)**2)``.
    """
    util.check_arraylike("standardize", x)
    for name, v in (("mean", mean), ("variance", variance), ("where", where)):
        if v is not None:
            util.check_arraylike("standardize", v, names=[name])
    if algorithm not in ("fast", "stable"):
        raise ValueError(
            f"standardize: unknown algorithm {algorithm!r}; expected 'fast' or 'stable'"
        )
    x = _inexact("standardize", x)
    axis = util.canonicalize_axes(axis, x.ndim, "standardize")
    if mean is None:
        mean = fnp.mean(x, axis, keepdims=True, where=where)
    if variance is None:
        if algorithm == "stable":
            variance = fnp.mean(fnp.square(x - mean), axis, keepdims=True, where=where)
        else:
            variance = fnp.mean(fnp.square(x), axis, keepdims=True, where=where)
            variance = fnp.maximum(variance - fnp.square(mean), 0.0)
    return (x - mean) * lax.rsqrt(fnp.add(variance, epsilon))


# -- one_hot ---------------------------------------------------------------------------------


def one_hot(x, num_classes: int, *, dtype=None, axis: int = -1):
    """One-hot encode integer indices ``x`` along a new axis of size ``num_classes``.

    Indices outside ``[0, num_classes)`` (negative ones included) encode as all zeros.
    ``dtype`` defaults to the default float dtype; ``axis`` is where the new axis goes.

    Example:
        >>> one_hot(fnp.array([0, 2, 5]), 3)   # [[1,0,0], [0,0,1], [0,0,0]] (float32)
    """
    try:
        num_classes = operator.index(num_classes)
    except TypeError:
        raise TypeError(
            f"one_hot: num_classes must be a concrete int, got {num_classes!r}"
        ) from None
    if num_classes < 0:
        raise ValueError(f"one_hot: num_classes must be non-negative, got {num_classes}")
    x = util.asarray(x, fun_name="one_hot")
    if dtypes.is_float(x.dtype):
        # NB: JAX still accepts float indices with a deprecation warning; fungrad does what
        # JAX will do once the deprecation ends.
        raise TypeError(
            f"one_hot: indices must have an integer dtype, got {x.dtype.name}; "
            "cast them with .astype(int)"
        )
    dtype = dtypes.default_float_dtype() if dtype is None else dtypes.canonicalize_dtype(dtype)
    idx_dtype = x.dtype
    if dtypes.is_bool(idx_dtype) or num_classes - 1 > np.iinfo(idx_dtype).max:
        # NB: JAX builds the class iota in x's dtype, which wraps (uint8 with 300 classes);
        # compare in a dtype wide enough for every class index instead.
        idx_dtype = dtypes.result_type(idx_dtype, dtypes.default_int_dtype())
        x = lax.convert_element_type(x, idx_dtype)
    out_axis = util.canonicalize_axis(axis, x.ndim + 1, "one_hot")
    lhs = lax.expand_dims(x, (out_axis,))
    rhs_shape = [1] * x.ndim
    rhs_shape.insert(out_axis, num_classes)
    rhs = lax.broadcasted_iota(idx_dtype, tuple(rhs_shape), out_axis)
    return lax.convert_element_type(fnp.equal(lhs, rhs), dtype)
