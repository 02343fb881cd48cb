"""Convolutions over ``num_spatial_dims`` spatial axes, channels last, and their transposes.

Data layout (the whole of :mod:`fungrad.nn.layers`): channels last, as flax, Keras and
``fungrad.example_libraries.stax`` (``NHWC``): an input is ``(*batch, *spatial, channels)``
with any number of leading batch axes, none included (an unbatched example). Kernels are
``(*kernel_size, in_channels // groups, out_channels)`` (``HWIO``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

import fungrad.numpy as fnp
from fungrad import lax, random
from fungrad.array import Array
from fungrad.nn import initializers
from fungrad.nn.layers._util import check_floating, default_float, ntuple, padding_arg
from fungrad.nn.module import Module

__all__ = [
    "Conv",
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "ConvTranspose",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "ConvTranspose3d",
]


def _dimension_numbers(n: int) -> lax.ConvDimensionNumbers:
    """Channels-last numbers for ``n`` spatial dims: lhs/out ``(N, *S, C)``, rhs
    ``(*K, I, O)``."""
    spatial = tuple(range(1, n + 1))
    return lax.ConvDimensionNumbers(
        lhs_spec=(0, n + 1, *spatial),
        rhs_spec=(n + 1, n, *range(n)),
        out_spec=(0, n + 1, *spatial),
    )


def _batched(layer: str, x, n: int, channels: int, what: str = "in_channels"):
    """``x`` as ``(N, *spatial, C)`` and a function that restores its leading axes."""
    shape = np.shape(x)
    if len(shape) < n + 1 or shape[-1] != channels:
        raise TypeError(
            f"{layer}: input of shape {shape} is not (*batch, {', '.join(['S'] * n)}, "
            f"{what}={channels}) with {n} spatial dims, channels last"
        )
    lead = shape[: len(shape) - n - 1]
    x = fnp.reshape(x, (math.prod(lead), *shape[len(lead) :]))
    return x, lambda y: fnp.reshape(y, (*lead, *y.shape[1:]))


class _ConvBase(Module):
    weight: Array
    bias: Array | None
    num_spatial_dims: int
    in_channels: int
    out_channels: int
    kernel_size: tuple
    stride: tuple
    padding: str | tuple
    dilation: tuple
    groups: int
    use_bias: bool

    def _setup(
        self,
        name, num_spatial_dims, in_channels, out_channels, kernel_size, stride, padding,
        dilation, groups, use_bias, dtype, key, kernel_init, bias_init, kernel_io,
    ):  # fmt: skip
        n = int(num_spatial_dims)
        if n < 1:
            raise ValueError(f"{name}: num_spatial_dims must be >= 1, got {num_spatial_dims}")
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(
                f"{name}: groups={groups} must be positive and divide in_channels="
                f"{in_channels} and out_channels={out_channels}"
            )
        self.num_spatial_dims = n
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = ntuple(name, "kernel_size", kernel_size, n)
        self.stride = ntuple(name, "stride", stride, n)
        self.dilation = ntuple(name, "dilation", dilation, n)
        self.padding = padding_arg(name, padding, n)
        self.groups, self.use_bias = int(groups), bool(use_bias)
        dtype = check_floating(name, default_float(dtype))
        wkey, bkey = random.split(key)
        self.weight = kernel_init(wkey, (*self.kernel_size, *kernel_io), dtype)
        self.bias = bias_init(bkey, (out_channels,), dtype) if use_bias else None


class Conv(_ConvBase):
    """An ``n``-D convolution (cross-correlation, as every framework's ``Conv``), channels
    last: input ``(*batch, *spatial, in_channels)``, output ``(*batch, *spatial',
    out_channels)``.

    Args:
      num_spatial_dims: ``n`` (``Conv1d``/``Conv2d``/``Conv3d`` fix it).
      in_channels, out_channels: feature counts.
      kernel_size, stride, dilation: an int or ``n`` ints.
      padding: ``"VALID"`` (also ``0``, the default), ``"SAME"``, ``"SAME_LOWER"``, an int
        or ``n`` ints (both sides), or ``n`` ``(low, high)`` pairs.
      groups: feature groups; ``groups == in_channels`` is a depthwise convolution (then
        ``out_channels`` is a multiple of ``in_channels``).
      use_bias: add a learned per-channel bias.
      dtype: of the parameters (default float32).
      key: PRNG key for the initialisers (keyword).
      kernel_init, bias_init: :mod:`fungrad.nn.initializers` functions; the defaults are
        flax's: ``lecun_normal()`` (fan-in ``prod(kernel_size) * in_channels // groups``)
        and zeros.
    """

    def __init__(
        self,
        num_spatial_dims: int,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups: int = 1,
        use_bias: bool = True,
        dtype=None,
        *,
        key,
        kernel_init: Callable = initializers.lecun_normal(),
        bias_init: Callable = initializers.zeros,
    ):
        self._setup(
            type(self).__name__, num_spatial_dims, in_channels, out_channels, kernel_size,
            stride, padding, dilation, groups, use_bias, dtype, key, kernel_init, bias_init,
            (in_channels // groups, out_channels),
        )  # fmt: skip

    def __call__(self, x):
        x = fnp.asarray(x)
        n = self.num_spatial_dims
        x, restore = _batched(type(self).__name__, x, n, self.in_channels)
        y = lax.conv_general_dilated(
            x,
            self.weight,
            window_strides=self.stride,
            padding=self.padding,
            rhs_dilation=self.dilation,
            dimension_numbers=_dimension_numbers(n),
            feature_group_count=self.groups,
        )
        if self.bias is not None:
            y = y + self.bias
        return restore(y)


def _transpose_padding(padding, k: int, s: int, d: int, out_pad: int):
    """The (low, high) padding of the stride-dilated input that makes the transposed
    convolution the adjoint of the forward one (padding ``padding``, kernel ``k``, stride
    ``s``, dilation ``d``), plus ``out_pad`` extra rows at the high end."""
    span = d * (k - 1) + 1
    if isinstance(padding, str):
        if padding == "VALID":
            lo = hi = 0
        else:  # forward SAME on an input of n * s: the output is n * s
            total = max(span - s, 0)
            lo = total // 2 if padding == "SAME" else (total + 1) // 2
            hi = total - lo
            out_pad += max(s - span, 0)
    else:
        lo, hi = padding
    return span - 1 - lo, span - 1 - hi + out_pad


class ConvTranspose(_ConvBase):
    """The transposed convolution: the adjoint (the input gradient) of :class:`Conv` with the
    same ``kernel_size``/``stride``/``padding``/``dilation``/``groups``, as in PyTorch and
    equinox; ``output_padding`` adds rows at the high end to pick among the input sizes a
    strided convolution maps to the same output. The output has
    ``(n - 1) * stride - pad_low - pad_high + dilation * (kernel - 1) + 1 + output_padding``
    positions; with ``padding="SAME"`` it is ``n * stride`` (flax, Keras). Channels last.

    ``weight`` has shape ``(*kernel_size, out_channels // groups, in_channels)``: the
    kernel of the :class:`Conv` from ``out_channels`` to ``in_channels`` whose adjoint this
    is. Initialisers and other arguments as :class:`Conv`.
    """

    output_padding: tuple

    def __init__(
        self,
        num_spatial_dims: int,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        dilation=1,
        groups: int = 1,
        use_bias: bool = True,
        dtype=None,
        *,
        key,
        kernel_init: Callable = initializers.lecun_normal(),
        bias_init: Callable = initializers.zeros,
    ):
        name = type(self).__name__
        self._setup(
            name, num_spatial_dims, in_channels, out_channels, kernel_size, stride, padding,
            dilation, groups, use_bias, dtype, key, kernel_init, bias_init,
            (out_channels // groups, in_channels),
        )  # fmt: skip
        n = self.num_spatial_dims
        if isinstance(output_padding, (int, np.integer)):
            output_padding = (int(output_padding),) * n
        output_padding = tuple(int(p) for p in output_padding)
        if len(output_padding) != n or any(
            not 0 <= p < max(s, d) for p, s, d in zip(output_padding, self.stride, self.dilation)
        ):
            raise ValueError(
                f"{name}: output_padding must be {n} ints in [0, max(stride, dilation)), got "
                f"{output_padding!r} (stride {self.stride}, dilation {self.dilation})"
            )
        self.output_padding = output_padding

    def __call__(self, x):
        x = fnp.asarray(x)
        n, g = self.num_spatial_dims, self.groups
        x, restore = _batched(type(self).__name__, x, n, self.in_channels)
        pads = [
            _transpose_padding(p, k, s, d, op)
            for p, k, s, d, op in zip(
                self.padding if not isinstance(self.padding, str) else [self.padding] * n,
                self.kernel_size,
                self.stride,
                self.dilation,
                self.output_padding,
            )
        ]
        # the forward kernel (*K, O/g, I), flipped, with each group's I/O swapped:
        # (*K, I/g, O)
        w = fnp.flip(self.weight, axis=tuple(range(n)))
        o_g, i = self.out_channels // g, self.in_channels
        w = fnp.reshape(w, (*self.kernel_size, o_g, g, i // g))
        w = fnp.swapaxes(w, n, n + 2)
        w = fnp.reshape(w, (*self.kernel_size, i // g, self.out_channels))
        y = lax.conv_general_dilated(
            x,
            w,
            window_strides=(1,) * n,
            padding=pads,
            lhs_dilation=self.stride,
            rhs_dilation=self.dilation,
            dimension_numbers=_dimension_numbers(n),
            feature_group_count=g,
        )
        if self.bias is not None:
            y = y + self.bias
        return restore(y)


def _fixed(base, n: int, doc: str):
    """A subclass of ``base`` with ``num_spatial_dims`` fixed to ``n``."""

    def __init__(self, *args, **kwargs):
        base.__init__(self, n, *args, **kwargs)

    cls = type(f"{base.__name__}{n}d", (base,), {"__init__": __init__, "__doc__": doc})
    cls.__module__ = __name__
    return cls


Conv1d = _fixed(Conv, 1, "A 1-D :class:`Conv` (input ``(*batch, length, channels)``).")
Conv2d = _fixed(Conv, 2, "A 2-D :class:`Conv` (input ``(*batch, H, W, channels)``).")
Conv3d = _fixed(Conv, 3, "A 3-D :class:`Conv` (input ``(*batch, D, H, W, channels)``).")
ConvTranspose1d = _fixed(ConvTranspose, 1, "A 1-D :class:`ConvTranspose`.")
ConvTranspose2d = _fixed(ConvTranspose, 2, "A 2-D :class:`ConvTranspose`.")
ConvTranspose3d = _fixed(ConvTranspose, 3, "A 3-D :class:`ConvTranspose`.")
