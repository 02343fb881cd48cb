"""``fungrad.nn.initializers``: jax.nn.initializers' weight initializers.

An initializer is a function ``init(key, shape, dtype=None) -> Array`` (the :class:`Initializer`
protocol); the builders (``normal(stddev)``, ``glorot_uniform()``, ``variance_scaling(...)``, ...)
return one. Each draws from :mod:`fungrad.random` exactly as JAX does, so the same key gives the
same weights as ``jax.nn.initializers``.

NB: the initializers draw real weights only (a complex dtype is a ValueError; JAX's
variance_scaling and orthogonal also draw complex ones). ``out_sharding`` is accepted
for JAX's signature and must be ``None`` (fungrad has no sharding).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from fungrad import dtypes, lax, random
from fungrad.array import Array

__all__ = [
    "Initializer",
    "zeros",
    "ones",
    "constant",
    "uniform",
    "normal",
    "truncated_normal",
    "variance_scaling",
    "glorot_uniform",
    "glorot_normal",
    "xavier_uniform",
    "xavier_normal",
    "lecun_uniform",
    "lecun_normal",
    "he_uniform",
    "he_normal",
    "kaiming_uniform",
    "kaiming_normal",
    "orthogonal",
    "delta_orthogonal",
]


@runtime_checkable
class Initializer(Protocol):
    """What the builders return: ``init(key, shape, dtype=None, out_sharding=None) -> Array``."""

    def __call__(self, key, shape, dtype=None, out_sharding=None) -> Array: ...


def _any_dtype(name: str, dtype) -> np.dtype:
    """``dtype`` canonicalized (float32 by default); an unknown one a TypeError naming
    ``name``."""
    if dtype is None:
        return dtypes.default_float_dtype()
    try:
        return dtypes.canonicalize_dtype(dtype)
    except TypeError as e:
        raise TypeError(f"nn.initializers.{name}: {e}") from None


def _dtype(name: str, dtype) -> np.dtype:
    """A float dtype for a random initializer (JAX's samplers take only floats)."""
    dt = _any_dtype(name, dtype)
    if dtypes.kind(dt) != "f":
        raise ValueError(f"nn.initializers.{name}: dtype must be a float dtype, got {dt}")
    return dt


def _check_sharding(name: str, out_sharding) -> None:
    if out_sharding is not None:
        raise ValueError(
            f"nn.initializers.{name}: out_sharding must be None (fungrad has no "
            f"sharding), got {out_sharding!r}"
        )


def _shape(name: str, shape) -> tuple[int, ...]:
    from fungrad import core
    from fungrad.numpy import util

    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        shape = tuple(
            operator.index(
                util.concrete_or_error(
                    d, f"the shape argument of nn.initializers.{name} (it must be static)"
                )
            )
            if isinstance(d, core.Tracer)
            else operator.index(d)
            for d in shape
        )
    except core.ConcretizationTypeError:
        raise
    except TypeError:
        raise TypeError(
            f"nn.initializers.{name}: shape must be a sequence of integers, got {shape!r}"
        ) from None
    if any(d < 0 for d in shape):  # a TypeError, as JAX's shape check raises
        raise TypeError(f"nn.initializers.{name}: shape must be non-negative, got {shape}")
    return shape


def _scalar(name: str, what: str, value, dtype):
    """``jnp.array(value, dtype)``: a strongly typed array (value may be a traced array); a
    value that is not a number is a TypeError naming the initializer and the argument."""
    from fungrad.numpy import util

    try:
        util.check_arraylike(name, value)
        value = util.asarray(value)
    except TypeError:
        raise TypeError(
            f"nn.initializers.{name}: {what} must be a number or an array, got "
            f"{type(value).__name__} {value!r}"
        ) from None
    return lax.convert_element_type(value, dtype)


def zeros(key, shape, dtype=None, out_sharding=None) -> Array:
    """Zeros of ``shape`` (float32 by default); ``key`` is ignored."""
    _check_sharding("zeros", out_sharding)
    return lax.full(_shape("zeros", shape), 0, _any_dtype("zeros", dtype))


def ones(key, shape, dtype=None, out_sharding=None) -> Array:
    """Ones of ``shape`` (float32 by default); ``key`` is ignored."""
    _check_sharding("ones", out_sharding)
    return lax.full(_shape("ones", shape), 1, _any_dtype("ones", dtype))


def constant(value, dtype=None) -> Initializer:
    """An initializer filling arrays with ``value``; ``dtype`` is its default dtype."""

    def init(key, shape, dtype=dtype, out_sharding=None):
        from fungrad.numpy import util

        _check_sharding("constant", out_sharding)
        dt = _any_dtype("constant", dtype)
        return util.broadcast_to_shape(
            _scalar("constant", "value", value, dt),
            _shape("constant", shape),
            "nn.initializers.constant",
        )

    return init


def uniform(scale=1e-2, dtype=None) -> Initializer:
    """An initializer drawing uniformly from ``[0, scale)``."""

    def init(key, shape, dtype=dtype, out_sharding=None):
        _check_sharding("uniform", out_sharding)
        dt = _dtype("uniform", dtype)
        return lax.mul(
            random.uniform(key, _shape("uniform", shape), dt),
            _scalar("uniform", "scale", scale, dt),
        )

    return init


def normal(stddev=1e-2, dtype=None) -> Initializer:
    """An initializer drawing from a normal distribution with mean 0 and std ``stddev``."""

    def init(key, shape, dtype=dtype, out_sharding=None):
        _check_sharding("normal", out_sharding)
        dt = _dtype("normal", dtype)
        return lax.mul(
            random.normal(key, _shape("normal", shape), dt), _scalar("normal", "stddev", stddev, dt)
        )

    return init


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0) -> Initializer:
    """An initializer drawing a standard normal truncated to ``(lower, upper)``, times
    ``stddev`` (no correction for the truncation's smaller variance, as in JAX)."""

    def init(key, shape, dtype=dtype, out_sharding=None):
        _check_sharding("truncated_normal", out_sharding)
        dt = _dtype("truncated_normal", dtype)
        x = random.truncated_normal(key, lower, upper, _shape("truncated_normal", shape), dt)
        return lax.mul(x, _scalar("truncated_normal", "stddev", stddev, dt))

    return init


def _axes_size(name: str, shape, axes) -> int:
    try:
        if isinstance(axes, Sequence):
            return math.prod(shape[operator.index(i)] for i in axes)
        return shape[operator.index(axes)]
    except IndexError:
        raise ValueError(
            f"nn.initializers.{name}: axis {axes!r} is out of range for a weights "
            f"array of shape {shape}"
        ) from None


def _compute_fans(name: str, shape, in_axis, out_axis, batch_axis) -> tuple[float, float]:
    """(fan_in, fan_out): the in/out axis sizes times the receptive field, the product of the
    axes that are neither in, out nor batch axes (a convolution kernel's spatial axes)."""
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(
            f"nn.initializers.{name}: cannot compute the input and output sizes "
            f"of a {len(shape)}-dimensional weights array (shape {shape}) with "
            f"the default in_axis=-2; use a 2-D or larger shape or pass in_axis "
            f"explicitly"
        )
    in_size = _axes_size(name, shape, in_axis)
    out_size = _axes_size(name, shape, out_axis)
    batch_size = _axes_size(name, shape, batch_axis)
    if in_size * out_size * batch_size == 0:
        raise ValueError(
            f"nn.initializers.{name}: the weights array of shape {shape} has a "
            f"size-0 in/out/batch axis, so its fans (and the variance scale / fan) "
            f"are undefined; give those axes a positive size"
        )
    receptive_field = math.prod(shape) / in_size / out_size / batch_size
    return in_size * receptive_field, out_size * receptive_field


_MODES = ("fan_in", "fan_out", "fan_avg", "fan_geo_avg")
_DISTRIBUTIONS = ("truncated_normal", "normal", "uniform")
# The standard deviation of a standard normal truncated to (-2, 2).
_TRUNCATED_STD = 0.87962566103423978


def variance_scaling(
    scale, mode, distribution, in_axis=-2, out_axis=-1, batch_axis=(), dtype=None
) -> Initializer:
    """An initializer with mean 0 and variance ``scale / n``, ``n`` the fan given by ``mode``
    (``"fan_in"``, ``"fan_out"``, ``"fan_avg"``: their mean, ``"fan_geo_avg"``: their
    geometric mean), drawn from ``distribution``: ``"truncated_normal"`` (truncated at two
    standard deviations, rescaled to that variance), ``"normal"`` or ``"uniform"``.

    ``in_axis``/``out_axis``/``batch_axis`` (an axis or a sequence of axes) say which axes of
    the weights hold the inputs, outputs and batch; the other axes are the receptive field.
    """
    if mode not in _MODES:
        raise ValueError(
            f"nn.initializers.variance_scaling: invalid mode {mode!r}; expected one of {_MODES}"
        )
    if distribution not in _DISTRIBUTIONS:
        raise ValueError(
            f"nn.initializers.variance_scaling: invalid distribution "
            f"{distribution!r}; expected one of {_DISTRIBUTIONS}"
        )

    def init(key, shape, dtype=dtype, out_sharding=None):
        name = "variance_scaling"
        _check_sharding(name, out_sharding)
        shape = _shape(name, shape)
        dt = _dtype(name, dtype)
        fan_in, fan_out = _compute_fans(name, shape, in_axis, out_axis, batch_axis)
        denominator = {
            "fan_in": fan_in,
            "fan_out": fan_out,
            "fan_avg": (fan_in + fan_out) / 2,
            "fan_geo_avg": (fan_in * fan_out) ** 0.5,
        }[mode]
        if denominator == 0:  # a size-0 receptive field
            raise ValueError(
                f"nn.initializers.{name}: {mode} is 0 for a weights array of "
                f"shape {shape}, so the variance scale / {mode} is undefined"
            )
        try:  # in Python precision, as JAX, so the variance rounds once to dt
            ratio = scale / denominator
        except TypeError:
            raise TypeError(
                f"nn.initializers.{name}: scale must be a number, got "
                f"{type(scale).__name__} {scale!r}"
            ) from None
        variance = _scalar(name, "scale", ratio, dt)
        if distribution == "truncated_normal":
            stddev = lax.div(lax.sqrt(variance), _scalar(name, "", _TRUNCATED_STD, dt))
            return lax.mul(random.truncated_normal(key, -2, 2, shape, dt), stddev)
        if distribution == "normal":
            return lax.mul(random.normal(key, shape, dt), lax.sqrt(variance))
        u = random.uniform(key, shape, dt, -1)
        return lax.mul(u, lax.sqrt(lax.mul(_scalar(name, "", 3, dt), variance)))

    return init


def glorot_uniform(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None) -> Initializer:
    """Glorot (Xavier) uniform: ``variance_scaling(1.0, "fan_avg", "uniform")``."""
    return variance_scaling(
        1.0,
        "fan_avg",
        "uniform",
        in_axis=in_axis,
        out_axis=out_axis,
        batch_axis=batch_axis,
        dtype=dtype,
    )


def glorot_normal(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None) -> Initializer:
    """Glorot (Xavier) normal: ``variance_scaling(1.0, "fan_avg", "truncated_normal")``."""
    return variance_scaling(
        1.0,
        "fan_avg",
        "truncated_normal",
        in_axis=in_axis,
        out_axis=out_axis,
        batch_axis=batch_axis,
        dtype=dtype,
    )


def lecun_uniform(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None) -> Initializer:
    """LeCun uniform: ``variance_scaling(1.0, "fan_in", "uniform")``."""
    return variance_scaling(
        1.0,
        "fan_in",
        "uniform",
        in_axis=in_axis,
        out_axis=out_axis,
        batch_axis=batch_axis,
        dtype=dtype,
    )


def lecun_normal(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None) -> Initializer:
    """LeCun normal: ``variance_scaling(1.0, "fan_in", "truncated_normal")``."""
    return variance_scaling(
        1.0,
        "fan_in",
        "truncated_normal",
        in_axis=in_axis,
        out_axis=out_axis,
        batch_axis=batch_axis,
        dtype=dtype,
    )


def he_uniform(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None) -> Initializer:
    """He (Kaiming) uniform: ``variance_scaling(2.0, "fan_in", "uniform")``."""
    return variance_scaling(
        2.0,
        "fan_in",
        "uniform",
        in_axis=in_axis,
        out_axis=out_axis,
        batch_axis=batch_axis,
        dtype=dtype,
    )


def he_normal(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None) -> Initializer:
    """He (Kaiming) normal: ``variance_scaling(2.0, "fan_in", "truncated_normal")``."""
    return variance_scaling(
        2.0,
        "fan_in",
        "truncated_normal",
        in_axis=in_axis,
        out_axis=out_axis,
        batch_axis=batch_axis,
        dtype=dtype,
    )


xavier_uniform = glorot_uniform
xavier_normal = glorot_normal
kaiming_uniform = he_uniform
kaiming_normal = he_normal


def orthogonal(scale=1.0, column_axis=-1, dtype=None) -> Initializer:
    """An initializer of (scaled) uniformly distributed orthogonal matrices (Saxe et al.
    2014): the weights, seen as a matrix whose columns lie along ``column_axis`` and whose rows
    are all the other axes, have orthonormal columns (or rows, whichever are fewer), times
    ``scale``. Drawn as the Q of a QR decomposition of a standard normal matrix with the
    signs fixed by R's diagonal; JAX's numbers for a key."""

    def init(key, shape, dtype=dtype, out_sharding=None):
        from fungrad import numpy as fnp

        name = "orthogonal"
        _check_sharding(name, out_sharding)
        shape = _shape(name, shape)
        dt = _dtype(name, dtype)
        if len(shape) < 2:
            raise ValueError(
                f"nn.initializers.orthogonal: needs a shape of at least 2 dimensions, got {shape}"
            )
        try:
            axis = operator.index(column_axis) % len(shape)
        except TypeError:
            raise TypeError(
                f"nn.initializers.orthogonal: column_axis must be an integer, got {column_axis!r}"
            ) from None
        n_cols = shape[axis]
        n_rows = int(np.prod(shape)) // n_cols if n_cols else 0
        wide = n_rows < n_cols
        z = random.normal(key, (n_cols, n_rows) if wide else (n_rows, n_cols), dt)
        q, r = fnp.linalg.qr(z)
        q = fnp.multiply(q, lax.sign(fnp.diagonal(r))[None, :])
        if wide:
            q = q.T
        rest = tuple(d for i, d in enumerate(shape) if i != axis)
        q = fnp.moveaxis(fnp.reshape(q, rest + (n_cols,)), -1, axis)
        return lax.mul(q, _scalar(name, "scale", scale, dt))

    return init


def delta_orthogonal(scale=1.0, column_axis=-1, dtype=None) -> Initializer:
    """The delta-orthogonal initializer of convolution kernels (Xiao et al. 2018): a kernel of
    shape ``(*spatial, in, out)`` (1 to 3 spatial dimensions, ``in <= out``) that is zero
    except at the spatial centre (index ``(k - 1) // 2`` per dimension), where it holds an
    :func:`orthogonal` ``(in, out)`` matrix drawn with the same key; JAX's numbers for a key."""

    def init(key, shape, dtype=dtype, out_sharding=None):
        name = "delta_orthogonal"
        _check_sharding(name, out_sharding)
        shape = _shape(name, shape)
        dt = _dtype(name, dtype)
        if len(shape) not in (3, 4, 5):
            raise ValueError(
                f"nn.initializers.delta_orthogonal: needs a 3-, 4- or 5-D kernel "
                f"shape (spatial dims, in, out), got {shape}"
            )
        if shape[-1] < shape[-2]:
            raise ValueError(
                f"nn.initializers.delta_orthogonal: the input size {shape[-2]} "
                f"must not exceed the output size {shape[-1]} (shape {shape})"
            )
        ortho = orthogonal(scale=scale, column_axis=column_axis, dtype=dt)(key, shape[-2:])
        centre = tuple((k - 1) // 2 for k in shape[:-2])
        return lax.full(shape, 0, dt).at[centre].set(ortho)

    return init
