"""Convolution helpers with JAX's lax names: output-shape arithmetic and image patches.

* :func:`conv_shape_tuple`, :func:`conv_general_shape_tuple`,
  :func:`conv_transpose_shape_tuple`, :func:`reduce_window_shape_tuple`: the output shapes of
  ``conv_general_dilated`` / ``conv_transpose`` / ``reduce_window`` computed from the input
  shapes alone (Python ints, nothing is traced);
* :func:`conv_general_dilated_patches`: every window of the input as a feature vector (the
  "im2col" view), computed as a grouped convolution with a one-hot kernel, so it is
  differentiable, batchable and compiles like any convolution;
* :func:`conv_general_dilated_local`: the unshared ("locally connected") convolution, a
  separate kernel per output position: the patches contracted with the kernel per position.
"""

from __future__ import annotations

import operator

import numpy as np

from fungrad import core
from fungrad.lax.conv import (
    ConvDimensionNumbers,
    _conv_transpose_padding,
    conv_dimension_numbers,
    conv_general_dilated,
)
from fungrad.lax.utils import operand
from fungrad.lax.windowed_reductions import padtype_to_pads

__all__ = [
    "conv_general_dilated_local",
    "conv_general_dilated_patches",
    "conv_general_shape_tuple",
    "conv_shape_tuple",
    "conv_transpose_shape_tuple",
    "reduce_window_shape_tuple",
]


def _ints(name: str, what: str, values, n: int | None = None) -> tuple[int, ...]:
    try:
        out = tuple(operator.index(v) for v in values)
    except TypeError:
        raise TypeError(f"{name}: {what} must be a sequence of integers, got {values!r}") from None
    if n is not None and len(out) != n:
        raise ValueError(f"{name}: {what} needs {n} entries, got {len(out)} ({values!r})")
    return out


def _strides(name: str, what: str, values, n: int) -> tuple[int, ...]:
    out = _ints(name, what, values, n)
    if any(v < 1 for v in out):
        raise ValueError(f"{name}: every element of {what} must be positive, got {out}")
    return out


def _pairs(name: str, pads, n: int) -> list[tuple[int, int]]:
    if isinstance(pads, str):
        raise TypeError(
            f"{name}: padding must be explicit (low, high) pairs here, got "
            f"{pads!r}; convert a padding string with lax.padtype_to_pads"
        )
    try:
        out = [(operator.index(lo), operator.index(hi)) for lo, hi in pads]
    except (TypeError, ValueError):
        raise TypeError(
            f"{name}: padding must be a sequence of (low, high) integer pairs, got {pads!r}"
        ) from None
    if len(out) != n:
        raise ValueError(f"{name}: padding needs {n} (low, high) pairs, got {len(out)}")
    return out


def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count: int = 1):
    """The output shape of a convolution of an ``NC...`` input of ``lhs_shape`` with an
    ``OI...`` kernel of ``rhs_shape`` (``jax.lax.conv_shape_tuple``): strides and
    ``(low, high)`` pads per spatial dimension (or a padding string such as ``"SAME"``);
    spatial sizes are ``floor((in + low + high - k) / stride) + 1``, at least 0."""
    name = "conv_shape_tuple"
    lhs_shape, rhs_shape = _ints(name, "lhs_shape", lhs_shape), _ints(name, "rhs_shape", rhs_shape)
    n = len(lhs_shape) - 2
    strides = _strides(name, "strides", strides, n)
    if isinstance(pads, str):  # as JAX: a padding string for these shapes and strides
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    pads = _pairs(name, pads, n)
    padded = [d + lo + hi for d, (lo, hi) in zip(lhs_shape[2:], pads)]
    if any(p < 0 for p in padded):
        raise ValueError(
            f"{name}: negative padding is larger than the size of the dimension: "
            f"padding {pads} for spatial sizes {lhs_shape[2:]}"
        )
    space = [max(0, (p - k) // s + 1) for p, k, s in zip(padded, rhs_shape[2:], strides)]
    if lhs_shape[0] % batch_group_count:
        raise ValueError(
            f"{name}: the batch size {lhs_shape[0]} is not a multiple of "
            f"batch_group_count={batch_group_count}"
        )
    return (lhs_shape[0] // batch_group_count, rhs_shape[0], *space)


def _permuted(shape, perm):
    return tuple(shape[p] for p in perm)


def _unpermuted(shape, perm):
    out = [0] * len(perm)
    for i, p in enumerate(perm):
        out[p] = shape[i]
    return tuple(out)


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    """The output shape of ``conv_general_dilated`` (without dilations) for these shapes,
    strides, padding (a string or pairs) and dimension numbers
    (``jax.lax.conv_general_shape_tuple``)."""
    name = "conv_general_shape_tuple"
    lhs_shape, rhs_shape = _ints(name, "lhs_shape", lhs_shape), _ints(name, "rhs_shape", rhs_shape)
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    lhs_t, rhs_t = _permuted(lhs_shape, dn.lhs_spec), _permuted(rhs_shape, dn.rhs_spec)
    strides = _strides(name, "window_strides", window_strides, len(lhs_shape) - 2)
    if isinstance(padding, str):
        padding = padtype_to_pads(lhs_t[2:], rhs_t[2:], strides, padding)
    out_t = conv_shape_tuple(lhs_t, rhs_t, strides, padding)
    return _unpermuted(out_t, dn.out_spec)


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    """The output shape of ``conv_transpose`` for these shapes, strides, padding (a string or
    pairs) and dimension numbers (``jax.lax.conv_transpose_shape_tuple``): spatial sizes are
    ``(in - 1) * stride - k + 2 + low + high``, the padding being that of the dilated input
    (``"SAME"`` gives ``in * stride``)."""
    name = "conv_transpose_shape_tuple"
    lhs_shape, rhs_shape = _ints(name, "lhs_shape", lhs_shape), _ints(name, "rhs_shape", rhs_shape)
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    lhs_t, rhs_t = _permuted(lhs_shape, dn.lhs_spec), _permuted(rhs_shape, dn.rhs_spec)
    n = len(lhs_shape) - 2
    strides = _strides(name, "window_strides", window_strides, n)
    if isinstance(padding, str):
        if padding not in ("SAME", "VALID"):
            raise ValueError(
                f"{name}: padding must be 'SAME', 'VALID' or (low, high) pairs, got {padding!r}"
            )
        padding = [_conv_transpose_padding(k, s, padding) for k, s in zip(rhs_t[2:], strides)]
    padding = _pairs(name, padding, n)
    space = [
        (i - 1) * s - k + 2 + lo + hi
        for i, k, s, (lo, hi) in zip(lhs_t[2:], rhs_t[2:], strides, padding)
    ]
    return _unpermuted((lhs_t[0], rhs_t[0], *space), dn.out_spec)


def reduce_window_shape_tuple(
    operand_shape,
    window_dimensions,
    window_strides,
    padding,
    base_dilation=None,
    window_dilation=None,
):
    """The output shape of ``reduce_window`` for these window parameters
    (``jax.lax.reduce_window_shape_tuple``); ``padding`` is ``(low, high)`` pairs."""
    name = "reduce_window_shape_tuple"
    shape = _ints(name, "operand_shape", operand_shape)
    n = len(shape)
    window = _ints(name, "window_dimensions", window_dimensions, n)
    strides = _strides(name, "window_strides", window_strides, n)
    pads = _pairs(name, padding, n)
    base = (1,) * n if base_dilation is None else _ints(name, "base_dilation", base_dilation, n)
    wdil = (
        (1,) * n if window_dilation is None else _ints(name, "window_dilation", window_dilation, n)
    )
    out = []
    for d, w, s, (lo, hi), b, wd in zip(shape, window, strides, pads, base, wdil):
        padded = (max(d - 1, 0) * b + 1 if d else 0) + lo + hi
        span = (w - 1) * wd + 1
        out.append(max(0, (padded - span) // s + 1))
    return tuple(out)


def conv_general_dilated_patches(
    lhs,
    filter_shape,
    window_strides,
    padding,
    lhs_dilation=None,
    rhs_dilation=None,
    dimension_numbers=None,
    precision=None,
    preferred_element_type=None,
):
    """The patches a convolution with a ``filter_shape`` window would see, as features
    (``jax.lax.conv_general_dilated_patches``).

    Args:
      lhs: the input, rank ``n + 2`` (``NC...`` unless ``dimension_numbers`` says otherwise).
      filter_shape: the ``n`` spatial sizes of the window.
      window_strides, padding, lhs_dilation, rhs_dilation: as for ``conv_general_dilated``.
      dimension_numbers: as for ``conv_general_dilated``; the kernel spec is ignored.
      precision, preferred_element_type: as for ``conv_general_dilated``.

    Returns:
      An array laid out like the convolution's output, with ``C * prod(filter_shape)``
      features, ordered channel-major then by window position (row-major): feature
      ``c * prod(filter_shape) + flat_window_index`` holds input channel ``c`` at that offset.
    """
    name = "conv_general_dilated_patches"
    x = operand(lhs, name)
    aval = core.get_aval(x)
    filter_shape = _ints(name, "filter_shape", filter_shape, aval.ndim - 2)
    spatial = int(np.prod(filter_shape, dtype=np.int64))
    dummy_rhs = (1, 1, *filter_shape)
    dn = conv_dimension_numbers(aval.shape, dummy_rhs, dimension_numbers)
    dn = ConvDimensionNumbers(dn.lhs_spec, tuple(range(aval.ndim)), dn.out_spec)
    channels = aval.shape[dn.lhs_spec[1]]
    # kernel[c * S + s, 0, window...] = 1 where the window's flat index is s: with one group
    # per input channel, output feature c * S + s copies channel c at window offset s.
    one_hot = np.eye(spatial, dtype=aval.dtype).reshape(1, spatial, 1, *filter_shape)
    kernel = np.broadcast_to(one_hot, (channels, spatial, 1, *filter_shape)).reshape(
        channels * spatial, 1, *filter_shape
    )
    return conv_general_dilated(
        x,
        np.ascontiguousarray(kernel),
        window_strides,
        padding,
        lhs_dilation=lhs_dilation,
        rhs_dilation=rhs_dilation,
        dimension_numbers=dn,
        feature_group_count=channels,
        precision=precision,
        preferred_element_type=preferred_element_type,
    )


def conv_general_dilated_local(
    lhs,
    rhs,
    window_strides,
    padding,
    filter_shape,
    lhs_dilation=None,
    rhs_dilation=None,
    dimension_numbers=None,
    precision=None,
):
    """Convolution with a separate kernel at each output position, a locally connected layer
    (``jax.lax.conv_general_dilated_local``).

    Args:
      lhs: the input, rank ``n + 2``.
      rhs: the kernels, rank ``n + 2`` laid out by ``dimension_numbers[1]``: ``O`` output
        features, ``I`` = input features times ``prod(filter_shape)`` (channel-major, then the
        window position), and spatial dimensions that index the *output* positions.
      window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers: as for
        ``conv_general_dilated``.
      filter_shape: the ``n`` sizes of each kernel's window.
      precision: as for ``conv_general_dilated``.

    Returns:
      The output, laid out as ``conv_general_dilated``'s.
    """
    from fungrad.lax.dot import dot_general
    from fungrad.lax.shape import transpose

    name = "conv_general_dilated_local"
    x = operand(lhs, name)
    w = operand(rhs, name)
    aval, w_aval = core.get_aval(x), core.get_aval(w)
    n = aval.ndim - 2
    filter_shape = _ints(name, "filter_shape", filter_shape, n)
    patches = conv_general_dilated_patches(
        x,
        filter_shape,
        window_strides,
        padding,
        lhs_dilation,
        rhs_dilation,
        dimension_numbers,
        precision,
    )
    dn = conv_dimension_numbers(aval.shape, w_aval.shape, dimension_numbers)
    # canonical layouts: patches (N, I, *out), kernel (O, I, *out)
    p = transpose(patches, dn.out_spec)
    k = transpose(w, dn.rhs_spec)
    p_shape, k_shape = core.get_aval(p).shape, core.get_aval(k).shape
    if k_shape[1] != p_shape[1] or k_shape[2:] != p_shape[2:]:
        raise TypeError(
            f"{name}: rhs must have {p_shape[1]} input features (channels times "
            f"prod(filter_shape)) and output spatial shape {p_shape[2:]}, got "
            f"{k_shape[1]} and {k_shape[2:]} (rhs shape {w_aval.shape})"
        )
    spatial = tuple(range(2, 2 + n))
    # contract I, batch over the output positions: (*out, N, O)
    out = dot_general(p, k, (((1,), (1,)), (spatial, spatial)), precision=precision)
    canonical = transpose(out, (n, n + 1, *range(n)))  # (N, O, *out)
    inverse = [0] * len(dn.out_spec)
    for i, d in enumerate(dn.out_spec):
        inverse[d] = i
    return transpose(canonical, tuple(inverse))
