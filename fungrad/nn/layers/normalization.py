"""Normalisation layers: LayerNorm, RMSNorm, GroupNorm (per example) and BatchNorm (over the
batch, with running statistics carried as explicit state).

Inputs are channels last, ``(*batch, *spatial, channels)``, as in the rest of
:mod:`fungrad.nn.layers`. Statistics are computed in the input's dtype with the biased
variance ``mean((x - mean)**2)``, as flax, equinox and PyTorch do.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

import fungrad.numpy as fnp
from fungrad import lax
from fungrad.array import Array
from fungrad.nn.layers._util import check_floating, default_float
from fungrad.nn.module import Module

__all__ = ["BatchNorm", "BatchNormState", "GroupNorm", "LayerNorm", "RMSNorm"]


def _float_input(x):
    """``x`` as an array; integer and bool inputs become the default float dtype (as
    ``fungrad.numpy.mean`` promotes them)."""
    x = fnp.asarray(x)
    if not np.issubdtype(np.dtype(x.dtype), np.inexact):
        x = x.astype(default_float(None))
    return x


def _shape_tuple(name: str, shape) -> tuple[int, ...]:
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if not all(isinstance(d, (int, np.integer)) and d >= 1 for d in shape):
        raise ValueError(f"{name}: shape must be positive ints, got {shape!r}")
    return tuple(int(d) for d in shape)


def _check_trailing(name: str, x, shape) -> tuple[int, ...]:
    xs = np.shape(x)
    if xs[len(xs) - len(shape) :] != shape or len(xs) < len(shape):
        raise TypeError(f"{name}: input of shape {xs} does not end in the layer's shape {shape}")
    return tuple(range(len(xs) - len(shape), len(xs)))


class LayerNorm(Module):
    """``(x - mean) / sqrt(var + eps) * weight + bias`` with the statistics taken over the
    trailing ``shape`` axes of each input (PyTorch's ``normalized_shape``; an int is the
    last axis). ``weight`` starts at one and ``bias`` at zero; ``use_weight=False`` /
    ``use_bias=False`` leave them out."""

    weight: Array | None
    bias: Array | None
    shape: tuple
    eps: float = 1e-5

    def __init__(self, shape, eps: float = 1e-5, use_weight: bool = True,
                 use_bias: bool = True, dtype=None):  # fmt: skip
        self.shape = _shape_tuple("LayerNorm", shape)
        dtype = check_floating("LayerNorm", default_float(dtype))
        self.weight = fnp.ones(self.shape, dtype) if use_weight else None
        self.bias = fnp.zeros(self.shape, dtype) if use_bias else None
        self.eps = float(eps)

    def __call__(self, x):
        x = _float_input(x)
        axes = _check_trailing("LayerNorm", x, self.shape)
        mean = fnp.mean(x, axis=axes, keepdims=True)
        xc = x - mean
        var = fnp.mean(xc * xc, axis=axes, keepdims=True)
        y = xc * lax.rsqrt(var + np.asarray(self.eps, x.dtype))
        if self.weight is not None:
            y = y * self.weight
        return y + self.bias if self.bias is not None else y


class RMSNorm(Module):
    """``x / sqrt(mean(x**2) + eps) * weight (+ bias)`` over the trailing ``shape`` axes (root
    mean square normalisation, Zhang & Sennrich 2019): no centring; ``weight`` starts at one,
    no bias by default."""

    weight: Array | None
    bias: Array | None
    shape: tuple
    eps: float = 1e-5

    def __init__(self, shape, eps: float = 1e-5, use_weight: bool = True,
                 use_bias: bool = False, dtype=None):  # fmt: skip
        self.shape = _shape_tuple("RMSNorm", shape)
        dtype = check_floating("RMSNorm", default_float(dtype))
        self.weight = fnp.ones(self.shape, dtype) if use_weight else None
        self.bias = fnp.zeros(self.shape, dtype) if use_bias else None
        self.eps = float(eps)

    def __call__(self, x):
        x = _float_input(x)
        axes = _check_trailing("RMSNorm", x, self.shape)
        ms = fnp.mean(x * x, axis=axes, keepdims=True)
        y = x * lax.rsqrt(ms + np.asarray(self.eps, x.dtype))
        if self.weight is not None:
            y = y * self.weight
        return y + self.bias if self.bias is not None else y


class GroupNorm(Module):
    """Group normalisation (Wu & He 2018): the ``channels`` are split into ``groups``
    consecutive groups and each group is normalised over its channels and the
    ``num_spatial_dims`` spatial axes of each example, then scaled and shifted per channel
    (``channelwise_affine``). Input ``(*batch, *spatial, channels)``; ``groups=1`` is a
    LayerNorm over an example, ``groups=channels`` an InstanceNorm. ``num_spatial_dims``
    is keyword-only and needed so that leading batch axes (any number, none under
    ``vmap``) are never mixed into the statistics."""

    weight: Array | None
    bias: Array | None
    groups: int
    channels: int
    num_spatial_dims: int
    eps: float = 1e-5

    def __init__(self, groups: int, channels: int, *, num_spatial_dims: int, eps: float = 1e-5,
                 channelwise_affine: bool = True, dtype=None):  # fmt: skip
        if groups < 1 or channels % groups:
            raise ValueError(
                f"GroupNorm: groups={groups} must be positive and divide channels={channels}"
            )
        if num_spatial_dims < 0:
            raise ValueError(f"GroupNorm: num_spatial_dims must be >= 0, got {num_spatial_dims}")
        dtype = check_floating("GroupNorm", default_float(dtype))
        self.groups, self.channels = int(groups), int(channels)
        self.num_spatial_dims, self.eps = int(num_spatial_dims), float(eps)
        self.weight = fnp.ones((channels,), dtype) if channelwise_affine else None
        self.bias = fnp.zeros((channels,), dtype) if channelwise_affine else None

    def __call__(self, x):
        x = _float_input(x)
        n, shape = self.num_spatial_dims, np.shape(x)
        if len(shape) < n + 1 or shape[-1] != self.channels:
            raise TypeError(
                f"GroupNorm: input of shape {shape} is not (*batch, {n} spatial, "
                f"channels={self.channels})"
            )
        g = self.groups
        xg = fnp.reshape(x, (*shape[:-1], g, self.channels // g))
        axes = (*range(len(shape) - 1 - n, len(shape) - 1), len(shape))
        mean = fnp.mean(xg, axis=axes, keepdims=True)
        xc = xg - mean
        var = fnp.mean(xc * xc, axis=axes, keepdims=True)
        y = fnp.reshape(xc * lax.rsqrt(var + np.asarray(self.eps, x.dtype)), shape)
        if self.weight is not None:
            y = y * self.weight + self.bias
        return y


class BatchNormState(NamedTuple):
    """BatchNorm's running statistics (a pytree): per-channel ``mean`` and ``var``."""

    mean: Array
    var: Array


class BatchNorm(Module):
    """Batch normalisation (Ioffe & Szegedy 2015) with the running statistics as explicit
    state: ``y, state = bn(x, state)``, ``state = bn.init_state()`` to start.

    Training (``inference=False``): each channel (the last axis) is normalised with the mean
    and biased variance over every other axis of ``x`` (batch and spatial); the returned
    state is ``momentum * old + (1 - momentum) * batch`` (flax's and equinox's convention,
    default 0.99; PyTorch's ``momentum=0.1`` is ``momentum=0.9`` here), with gradients
    stopped. Inference: the running statistics are used and the state is returned
    unchanged. ``inference`` is a field (set it when building an evaluation model) that the
    call's ``inference=`` overrides.

    Under ``vmap`` each mapped example has no batch axis of its own: pass the vmap's
    ``axis_name`` as ``axis_name=`` and the statistics are averaged across it
    (``lax.pmean``), so ``vmap(bn, axis_name="batch")`` equals ``bn`` on the batch.
    """

    weight: Array | None
    bias: Array | None
    num_features: int
    momentum: float = 0.99
    eps: float = 1e-5
    axis_name: object = None
    inference: bool = False

    is_stateful = True  # a class attribute, not a field: Sequential passes it a state

    def __init__(self, num_features: int, *, momentum: float = 0.99, eps: float = 1e-5,
                 channelwise_affine: bool = True, axis_name=None, inference: bool = False,
                 dtype=None):  # fmt: skip
        if num_features < 1:
            raise ValueError(f"BatchNorm: num_features must be positive, got {num_features}")
        if not 0.0 <= momentum <= 1.0:
            raise ValueError(f"BatchNorm: momentum must be in [0, 1], got {momentum}")
        dtype = check_floating("BatchNorm", default_float(dtype))
        self.num_features, self.momentum = int(num_features), float(momentum)
        self.axis_name, self.inference = axis_name, bool(inference)
        self.weight = fnp.ones((num_features,), dtype) if channelwise_affine else None
        self.bias = fnp.zeros((num_features,), dtype) if channelwise_affine else None
        self.eps = float(eps)

    def init_state(self, dtype=None) -> BatchNormState:
        """The starting running statistics: mean 0, variance 1."""
        dtype = default_float(dtype if dtype is not None else getattr(self.weight, "dtype", None))
        c = self.num_features
        return BatchNormState(fnp.zeros((c,), dtype), fnp.ones((c,), dtype))

    def __call__(self, x, state: BatchNormState, *, inference: bool | None = None):
        x = _float_input(x)
        shape = np.shape(x)
        if len(shape) < 1 or shape[-1] != self.num_features:
            raise TypeError(
                f"BatchNorm: input of shape {shape} does not end in num_features="
                f"{self.num_features} (channels last)"
            )
        if not isinstance(state, tuple) or len(state) != 2:
            raise TypeError(
                f"BatchNorm: state must be the BatchNormState from bn.init_state(), got "
                f"{type(state).__name__}"
            )
        inference = self.inference if inference is None else inference
        eps = np.asarray(self.eps, x.dtype)
        if inference:
            mean, var = state.mean, state.var
            new_state = state
        else:
            axes = tuple(range(len(shape) - 1))
            mean = fnp.mean(x, axis=axes)
            if self.axis_name is not None:
                mean = lax.pmean(mean, self.axis_name)
            xc = x - mean
            var = fnp.mean(xc * xc, axis=axes)
            if self.axis_name is not None:
                var = lax.pmean(var, self.axis_name)
            m = self.momentum
            new_state = BatchNormState(
                m * state.mean + (1 - m) * lax.stop_gradient(mean),
                m * state.var + (1 - m) * lax.stop_gradient(var),
            )
        y = (x - mean) * lax.rsqrt(var + eps)
        if self.weight is not None:
            y = y * self.weight + self.bias
        return y, new_state
