"""Max and average pooling over the spatial axes of channels-last inputs, and their global
forms. An input is ``(*batch, *spatial, channels)``; the window never spans batch or channel
axes."""

from __future__ import annotations

import math

import numpy as np

import fungrad.numpy as fnp
from fungrad import lax
from fungrad.nn.layers._util import ntuple, padding_arg
from fungrad.nn.module import Module

__all__ = [
    "AvgPool",
    "AvgPool1d",
    "AvgPool2d",
    "AvgPool3d",
    "GlobalAvgPool",
    "GlobalMaxPool",
    "MaxPool",
    "MaxPool1d",
    "MaxPool2d",
    "MaxPool3d",
]


class _Pool(Module):
    num_spatial_dims: int
    kernel_size: tuple
    stride: tuple
    padding: str | tuple

    def __init__(self, num_spatial_dims: int, kernel_size, stride=None, padding=0):
        name = type(self).__name__
        n = int(num_spatial_dims)
        if n < 1:
            raise ValueError(f"{name}: num_spatial_dims must be >= 1, got {num_spatial_dims}")
        self.num_spatial_dims = n
        self.kernel_size = ntuple(name, "kernel_size", kernel_size, n)
        self.stride = self.kernel_size if stride is None else ntuple(name, "stride", stride, n)
        self.padding = padding_arg(name, padding, n)

    def _window(self, x):
        name, n = type(self).__name__, self.num_spatial_dims
        if np.ndim(x) < n + 1:
            raise TypeError(
                f"{name}: input of shape {np.shape(x)} has fewer than {n + 1} axes "
                f"(*batch, {n} spatial, channels)"
            )
        lead = np.ndim(x) - n - 1
        pad = self.padding
        if not isinstance(pad, str):
            pad = ((0, 0),) * lead + pad + ((0, 0),)
        dims = (1,) * lead + self.kernel_size + (1,)
        strides = (1,) * lead + self.stride + (1,)
        return dims, strides, pad

    def _reduce(self, x, init, op):
        dims, strides, pad = self._window(x)
        return lax.reduce_window(x, init, op, dims, strides, pad)


class MaxPool(_Pool):
    """The maximum over each ``kernel_size`` window (``stride`` defaults to ``kernel_size``,
    as in PyTorch and Keras; padding as :class:`Conv`: padded positions never win)."""

    def __call__(self, x):
        x = fnp.asarray(x)
        dtype = np.dtype(x.dtype)
        if np.issubdtype(dtype, np.floating):
            init = -np.inf
        elif np.issubdtype(dtype, np.integer):
            init = np.iinfo(dtype).min
        elif dtype == np.bool_:
            init = False
        else:
            raise TypeError(f"MaxPool: needs a real (float, int or bool) input, got {dtype}")
        return self._reduce(x, np.array(init, dtype), lax.max)


class AvgPool(_Pool):
    """The mean over each ``kernel_size`` window (``stride`` defaults to ``kernel_size``).
    With padding, ``count_include_pad=True`` (the default, as PyTorch and flax) divides by the
    full window size; ``False`` divides by the number of real positions in the window."""

    count_include_pad: bool = True

    def __init__(self, num_spatial_dims, kernel_size, stride=None, padding=0,
                 count_include_pad: bool = True):  # fmt: skip
        super().__init__(num_spatial_dims, kernel_size, stride, padding)
        self.count_include_pad = bool(count_include_pad)

    def __call__(self, x):
        x = fnp.asarray(x)
        dtype = np.dtype(x.dtype)
        if not np.issubdtype(dtype, np.inexact):
            raise TypeError(f"AvgPool: needs a floating input, got {dtype}")
        total = self._reduce(x, np.array(0, dtype), lax.add)
        if self.count_include_pad or self.padding == "VALID":
            return total / math.prod(self.kernel_size)
        count = self._reduce(fnp.ones(x.shape, dtype), np.array(0, dtype), lax.add)
        return total / count


def _fixed(base, n: int):
    def __init__(self, *args, **kwargs):
        base.__init__(self, n, *args, **kwargs)

    doc = f"A {n}-D :class:`{base.__name__}` (``num_spatial_dims={n}``)."
    cls = type(f"{base.__name__}{n}d", (base,), {"__init__": __init__, "__doc__": doc})
    cls.__module__ = __name__
    return cls


MaxPool1d, MaxPool2d, MaxPool3d = (_fixed(MaxPool, n) for n in (1, 2, 3))
AvgPool1d, AvgPool2d, AvgPool3d = (_fixed(AvgPool, n) for n in (1, 2, 3))


class _GlobalPool(Module):
    num_spatial_dims: int
    keepdims: bool = False

    def _axes(self, x):
        n = self.num_spatial_dims
        if np.ndim(x) < n + 1:
            raise TypeError(
                f"{type(self).__name__}: input of shape {np.shape(x)} has fewer than "
                f"{n + 1} axes (*batch, {n} spatial, channels)"
            )
        return tuple(range(np.ndim(x) - n - 1, np.ndim(x) - 1))


class GlobalAvgPool(_GlobalPool):
    """The mean over the ``num_spatial_dims`` spatial axes: ``(*batch, *spatial, C)`` to
    ``(*batch, C)`` (``keepdims=True`` keeps them as size-1 axes)."""

    def __call__(self, x):
        x = fnp.asarray(x)
        return fnp.mean(x, axis=self._axes(x), keepdims=self.keepdims)


class GlobalMaxPool(_GlobalPool):
    """The maximum over the ``num_spatial_dims`` spatial axes (see :class:`GlobalAvgPool`)."""

    def __call__(self, x):
        x = fnp.asarray(x)
        return fnp.max(x, axis=self._axes(x), keepdims=self.keepdims)
