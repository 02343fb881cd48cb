"""Convolutions: the ``conv_general_dilated`` primitive and its wrappers (``conv``,
``conv_with_general_padding``, ``conv_transpose``), with XLA's semantics.

Dimension numbers say where the batch (N), feature (C) and spatial dimensions of lhs, the
output (O) and input (I) features and spatial dimensions of rhs, and those of the output lie:
``ConvDimensionNumbers(lhs_spec, rhs_spec, out_spec)`` lists, for each, the positions of
(N, C, spatial...), (O, I, spatial...) and (N, C, spatial...). Any number of spatial
dimensions works. The numpy reference dilates lhs by inserting zeros, pads it (negative
padding crops), takes strided window views and contracts them with the kernel in one einsum.

The convolution is bilinear. Its transposes are convolutions too (JAX's
``_conv_general_dilated_transpose_lhs/rhs``): the lhs cotangent convolves the cotangent with the
spatially reversed kernel (features swapped, strides turned into lhs dilation), the rhs
cotangent convolves lhs with the cotangent (groups becoming batch groups). The batch rule folds
the vmapped axis into the batch dimension (lhs only), the output features (rhs only) or the
feature groups (both), as JAX's ``_conv_general_dilated_batch_rule``.

The lowering multiplies an im2col patch matrix by the kernel in a Gemm step for float
convolutions without groups whose product the backend's policy wants as a Gemm, and otherwise
reduces over the window and input features inline, per output element; both read the lhs
through masked, clamped loads (padding and dilation holes are zeros).
"""

from __future__ import annotations

import math
import operator
from typing import NamedTuple

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from fungrad import core, dtypes
from fungrad.core import ShapedArray
from fungrad.lax.dot import (
    accumulation_dtype,
    canonicalize_precision,
    cast_result,
    check_preferred_element_type,
)
from fungrad.lax.dot_algorithm import apply_algorithm, as_algorithm
from fungrad.lax.utils import ANY_OR_COMPLEX, check_kinds, operand, standard_primitive
from fungrad.lax.windowed_reductions import (
    conv_vjp_lhs_padding,
    dilate_and_pad,
    dilate_dim,
    padtype_to_pads,
    strided_windows,
)
from fungrad.lowering import kernel
from fungrad.transforms.jvp import Zero, defjvp
from fungrad.transforms.transpose import deflinear_transpose, is_undefined_primal
from fungrad.transforms.vmap import batch_rules

__all__ = [
    "ConvDimensionNumbers",
    "conv_dimension_numbers",
    "conv_general_permutations",
    "conv_general_dilated",
    "conv",
    "conv_with_general_padding",
    "conv_transpose",
    "conv_general_dilated_p",
]


class ConvDimensionNumbers(NamedTuple):
    """Positions of (N, C, spatial...) in lhs, (O, I, spatial...) in rhs and (N, C,
    spatial...) in the output; spatial dimensions are listed in rhs order."""

    lhs_spec: tuple[int, ...]
    rhs_spec: tuple[int, ...]
    out_spec: tuple[int, ...]


def conv_general_permutations(dimension_numbers) -> tuple[tuple[int, ...], ...]:
    """The (lhs, rhs, out) permutations for string specs like ``("NHWC", "HWIO", "NHWC")``."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    charpairs = (("N", "C"), ("O", "I"), ("N", "C"))
    for i, (a, b) in enumerate(charpairs):
        spec = dimension_numbers[i]
        if not spec.count(a) == spec.count(b) == 1:
            raise TypeError(
                f"convolution dimension_numbers[{i}] must contain the characters "
                f"'{a}' and '{b}' exactly once, got {spec}"
            )
        if len(spec) != len(set(spec)):
            raise TypeError(
                f"convolution dimension_numbers[{i}] cannot have duplicate characters, got {spec}"
            )
    spatial = [set(s) - set(c) for s, c in zip(dimension_numbers, charpairs)]
    if not spatial[0] == spatial[1] == spatial[2]:
        raise TypeError(
            "convolution dimension_numbers elements must each have the same set "
            f"of spatial characters, got {tuple(dimension_numbers)}"
        )

    def perm(spec, chars):
        dims = [i for i, c in enumerate(spec) if c not in chars]
        if spec is not rhs_spec:
            dims.sort(key=lambda i: rhs_spec.index(spec[i]))
        return (spec.index(chars[0]), spec.index(chars[1])) + tuple(dims)

    return tuple(perm(s, c) for s, c in zip(dimension_numbers, charpairs))


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers) -> ConvDimensionNumbers:
    """Canonical :class:`ConvDimensionNumbers` from None (``NC...``/``OI...`` everywhere), a
    triple of spec strings such as ``("NHWC", "HWIO", "NHWC")``, or ConvDimensionNumbers."""
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    if len(lhs_shape) != len(rhs_shape):
        raise TypeError(
            f"convolution requires lhs and rhs of equal rank, got shapes "
            f"{tuple(lhs_shape)} and {tuple(rhs_shape)}"
        )
    if dimension_numbers is None:
        iota = tuple(range(len(lhs_shape)))
        return ConvDimensionNumbers(iota, iota, iota)
    if not isinstance(dimension_numbers, (list, tuple)) or len(dimension_numbers) != 3:
        raise TypeError(
            "convolution dimension_numbers must be None, ConvDimensionNumbers or "
            f"three spec strings, got {dimension_numbers!r}"
        )
    if not all(isinstance(s, str) for s in dimension_numbers):
        raise TypeError(
            f"convolution dimension_numbers elements must be strings, got {dimension_numbers!r}"
        )
    for i, spec in enumerate(dimension_numbers):
        if len(spec) != len(lhs_shape):
            raise TypeError(
                f"convolution dimension_numbers[{i}] = {spec!r} must have one "
                f"character per dimension of lhs and rhs, shapes "
                f"{tuple(lhs_shape)} and {tuple(rhs_shape)}"
            )
    return ConvDimensionNumbers(*conv_general_permutations(dimension_numbers))


# -- conv_general_dilated -----------------------------------------------------------------------


def _check_spec(dnums, ndim: int) -> None:
    for name, spec in zip(("lhs_spec", "rhs_spec", "out_spec"), dnums):
        if sorted(spec) != list(range(ndim)):
            raise TypeError(
                f"conv_general_dilated: dimension_numbers.{name} {spec} must be a "
                f"permutation of the {ndim} dimensions"
            )


def _check_groups(lhs, rhs, dnums, feature_group_count, batch_group_count) -> None:
    name = "conv_general_dilated"
    lhs_spec, rhs_spec, _ = dnums
    n, c = lhs.shape[lhs_spec[0]], lhs.shape[lhs_spec[1]]
    o, i = rhs.shape[rhs_spec[0]], rhs.shape[rhs_spec[1]]
    for what, g in (
        ("feature_group_count", feature_group_count),
        ("batch_group_count", batch_group_count),
    ):
        if g < 1:
            raise ValueError(f"{name}: {what} must be a positive integer, got {g}")
        if o % g:
            raise ValueError(
                f"{name}: the rhs output feature size {o} must be a multiple of "
                f"{what}={g} (rhs shape {rhs.shape})"
            )
    if feature_group_count > 1 and batch_group_count > 1:
        raise ValueError(
            f"{name}: at most one of feature_group_count and batch_group_count may "
            f"be > 1, got {feature_group_count} and {batch_group_count}"
        )
    if c % feature_group_count or c // feature_group_count != i:
        raise ValueError(
            f"{name}: the lhs feature size {c} divided by feature_group_count="
            f"{feature_group_count} must equal the rhs input feature size {i} "
            f"(lhs shape {lhs.shape}, rhs shape {rhs.shape})"
        )
    if n % batch_group_count:
        raise ValueError(
            f"{name}: batch_group_count={batch_group_count} must divide the lhs "
            f"batch size {n} (lhs shape {lhs.shape})"
        )


def _conv_general_dilated_abstract_eval(
    lhs,
    rhs,
    *,
    window_strides,
    padding,
    lhs_dilation,
    rhs_dilation,
    dimension_numbers,
    feature_group_count,
    batch_group_count,
    precision,
    preferred_element_type,
):
    name = "conv_general_dilated"
    if lhs.ndim != rhs.ndim or lhs.ndim < 2:
        raise TypeError(
            f"{name}: lhs and rhs must have equal rank, at least 2, got shapes "
            f"{lhs.shape} and {rhs.shape}"
        )
    if lhs.dtype != rhs.dtype:
        raise TypeError(
            f"{name} requires operands of the same dtype, got {lhs.dtype.name} and {rhs.dtype.name}"
        )
    check_kinds(name, lhs.dtype, ANY_OR_COMPLEX)  # complex: as JAX (jit: four real convs)
    nsp = lhs.ndim - 2
    for what, vals in (
        ("window_strides", window_strides),
        ("lhs_dilation", lhs_dilation),
        ("rhs_dilation", rhs_dilation),
        ("padding", padding),
    ):
        if len(vals) != nsp:
            raise TypeError(
                f"{name}: {what} {vals} must have one entry per spatial dimension "
                f"({nsp} for lhs shape {lhs.shape})"
            )
        if what != "padding" and any(v < 1 for v in vals):
            raise ValueError(f"{name}: every element of {what} must be positive, got {vals}")
    _check_spec(dimension_numbers, lhs.ndim)
    _check_groups(lhs, rhs, dimension_numbers, feature_group_count, batch_group_count)
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    spatial = []
    for k in range(nsp):
        size = lhs.shape[lhs_spec[k + 2]]
        lo, hi = padding[k]
        padded = dilate_dim(size, lhs_dilation[k]) + lo + hi
        if padded < 0:
            raise ValueError(
                f"{name}: negative padding {padding[k]} is larger than spatial "
                f"dimension {k} of lhs (shape {lhs.shape})"
            )
        span = dilate_dim(rhs.shape[rhs_spec[k + 2]], rhs_dilation[k])
        spatial.append(strided_windows(padded, span, window_strides[k]))
    canonical = (lhs.shape[lhs_spec[0]] // batch_group_count, rhs.shape[rhs_spec[0]], *spatial)
    shape = [0] * lhs.ndim
    for k, d in enumerate(out_spec):
        shape[d] = canonical[k]
    out_dtype = check_preferred_element_type(name, lhs.dtype, preferred_element_type)
    return ShapedArray(shape, out_dtype, lhs.weak_type and rhs.weak_type)


def _single_product(win, w, in_spatial, lhs_dilation, padding, window_strides):
    """The convolution when each output element is one product (one input feature per group,
    a window of one element), as XLA computes it: that product where the window is on an
    lhs element (its sign kept: an einsum's ``0 + product`` turns -0 into +0) and +0, an
    empty sum, where it is on padding or a dilation hole (not ``0 * w``, which is -0 or NaN).
    ``win`` is (bg, N/bg, fg, 1, out..., 1...), ``w`` (bg, fg, O/(bg*fg), 1, 1...); the result
    is laid out like the einsum's, (N/bg, bg, fg, O/(bg*fg), out...)."""
    nsp = len(in_spatial)
    bg, fg = win.shape[0], win.shape[2]
    x = win.reshape(win.shape[:3] + win.shape[4 : 4 + nsp])[:, :, :, None]
    k = w.reshape((bg, 1, fg, w.shape[2]) + (1,) * nsp)
    on_lhs = dilate_and_pad(np.ones(in_spatial, bool), False, lhs_dilation, padding)
    on_lhs = on_lhs[tuple(slice(None, None, s) for s in window_strides)]
    return np.swapaxes(np.where(on_lhs, x * k, x.dtype.type(0)), 0, 1)


def _conv_general_dilated_impl(
    lhs,
    rhs,
    *,
    window_strides,
    padding,
    lhs_dilation,
    rhs_dilation,
    dimension_numbers,
    feature_group_count,
    batch_group_count,
    precision,
    preferred_element_type,
):
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    out_dtype = lhs.dtype if preferred_element_type is None else preferred_element_type
    acc = accumulation_dtype(lhs.dtype, out_dtype)
    x = np.transpose(lhs, lhs_spec).astype(acc)  # (N, C, spatial...)
    w = np.transpose(rhs, rhs_spec).astype(acc)  # (O, I, window...)
    nsp = x.ndim - 2
    x = dilate_and_pad(x, acc.type(0), (1, 1) + lhs_dilation, ((0, 0), (0, 0)) + padding)
    spans = tuple(dilate_dim(k, d) for k, d in zip(w.shape[2:], rhs_dilation))
    out_spatial = tuple(
        strided_windows(p, s, st) for p, s, st in zip(x.shape[2:], spans, window_strides)
    )
    n, c = x.shape[:2]
    o = w.shape[0]
    bg, fg = batch_group_count, feature_group_count
    if 0 in out_spatial or 0 in spans or 0 in x.shape[:2] or o == 0:
        out = np.zeros((n // bg, o) + out_spatial, acc)
    else:
        # (N, C, out..., window...): strided views of every window position, no copies yet.
        win = sliding_window_view(x, spans, axis=tuple(range(2, 2 + nsp)))
        win = win[
            (slice(None), slice(None))
            + tuple(slice(None, None, s) for s in window_strides)
            + tuple(slice(None, None, d) for d in rhs_dilation)
        ]
        # NOTE: groups split the outer part of a dimension: batch N = (bg, N/bg), features
        # C = (fg, C/fg), output features O = (bg, fg, O/(bg*fg)) (at most one group count > 1).
        win = win.reshape((bg, n // bg, fg, c // fg) + win.shape[2:])
        w = w.reshape((bg, fg, o // (bg * fg)) + w.shape[1:])
        sp = list(range(6, 6 + nsp))
        kk = list(range(6 + nsp, 6 + 2 * nsp))
        with np.errstate(all="ignore"):
            if c // fg == 1 and all(s == 1 for s in spans):
                in_spatial = tuple(lhs.shape[d] for d in lhs_spec[2:])
                out = _single_product(win, w, in_spatial, lhs_dilation, padding, window_strides)
            else:
                out = np.einsum(
                    win,
                    [0, 1, 2, 3] + sp + kk,
                    w,
                    [0, 2, 4, 3] + kk,
                    [1, 0, 2, 4] + sp,
                    optimize=True,
                )
        out = out.reshape((n // bg, o) + out_spatial)
    return cast_result(np.transpose(out, np.argsort(out_spec)), out_dtype)


conv_general_dilated_p = standard_primitive(
    "conv_general_dilated", _conv_general_dilated_impl, _conv_general_dilated_abstract_eval
)


# -- rules ---------------------------------------------------------------------------------------


def _conv_jvp_lhs(t, lhs, rhs, **params):
    return conv_general_dilated_p.bind(t, rhs, **params)


def _conv_jvp_rhs(t, lhs, rhs, **params):
    return conv_general_dilated_p.bind(lhs, t, **params)


def _reshape_axis_into(src: int, dst: int, x):
    """Merge dimension ``src`` of ``x`` into dimension ``dst`` (numbered with ``src``
    removed), ``src`` becoming the major part."""
    from fungrad import lax

    shape = core.get_aval(x).shape
    perm = [i for i in range(len(shape)) if i != src]
    perm.insert(dst, src)
    new_shape = [d for i, d in enumerate(shape) if i != src]
    new_shape[dst] *= shape[src]
    return lax.reshape(x, tuple(new_shape), tuple(perm))


def _reshape_axis_out_of(src: int, size1: int, x):
    """Split dimension ``src`` of ``x`` into ``(size1, rest)``."""
    from fungrad import lax

    shape = list(core.get_aval(x).shape)
    shape[src : src + 1] = [size1, shape[src] // size1]
    return lax.reshape(x, tuple(shape))


def _spec_transpose(spec) -> tuple[int, ...]:
    """A spec with its first two entries (N and C, or O and I) swapped."""
    return (spec[1], spec[0]) + tuple(spec[2:])


def _conv_transpose_lhs(
    g,
    lhs_aval,
    rhs,
    *,
    window_strides,
    padding,
    lhs_dilation,
    rhs_dilation,
    dimension_numbers,
    feature_group_count,
    batch_group_count,
    precision,
    preferred_element_type,
):
    from fungrad import lax

    lhs_spec, rhs_spec, out_spec = dimension_numbers
    rhs_shape = core.get_aval(rhs).shape
    if feature_group_count > 1:
        # the groups move from the kernel's output features into its input features
        rhs = _reshape_axis_out_of(rhs_spec[0], feature_group_count, rhs)
        rhs = _reshape_axis_into(rhs_spec[0], rhs_spec[1], rhs)
    elif batch_group_count > 1:
        rhs = _reshape_axis_out_of(rhs_spec[0], batch_group_count, rhs)
        rhs = _reshape_axis_into(rhs_spec[0], rhs_spec[1], rhs)
        feature_group_count = batch_group_count
    trans_dnums = ConvDimensionNumbers(out_spec, _spec_transpose(rhs_spec), lhs_spec)
    pads = conv_vjp_lhs_padding(
        [lhs_aval.shape[d] for d in lhs_spec[2:]],
        [rhs_shape[d] for d in rhs_spec[2:]],
        window_strides,
        [core.get_aval(g).shape[d] for d in out_spec[2:]],
        padding,
        lhs_dilation,
        rhs_dilation,
    )
    kernel = lax.rev(rhs, tuple(rhs_spec[2:]))
    if kernel.dtype != g.dtype:
        kernel = lax.convert_element_type(kernel, g.dtype)
    out = conv_general_dilated_p.bind(
        g,
        kernel,
        window_strides=lhs_dilation,
        padding=pads,
        lhs_dilation=window_strides,
        rhs_dilation=rhs_dilation,
        dimension_numbers=trans_dnums,
        feature_group_count=feature_group_count,
        batch_group_count=1,
        precision=precision,
        preferred_element_type=preferred_element_type,
    )
    if out.dtype != lhs_aval.dtype:
        out = lax.convert_element_type(out, lhs_aval.dtype)
    if batch_group_count > 1:
        out = _reshape_axis_out_of(lhs_spec[1], batch_group_count, out)
        out = _reshape_axis_into(lhs_spec[1], lhs_spec[0], out)
    return out


def _conv_vjp_rhs_padding(
    in_shape, window_dimensions, window_strides, out_shape, padding, lhs_dilation, rhs_dilation
) -> tuple[tuple[int, int], ...]:
    """The padding of lhs in the convolution of lhs with the cotangent that gives the kernel's
    cotangent (JAX's ``_conv_general_vjp_rhs_padding``)."""
    pads = []
    for n, w, s, o, (lo, _), ld, wd in zip(
        in_shape, window_dimensions, window_strides, out_shape, padding, lhs_dilation, rhs_dilation
    ):
        hi = dilate_dim(o, s) - dilate_dim(n, ld) + dilate_dim(w, wd) - lo - 1
        pads.append((lo, hi))
    return tuple(pads)


def _conv_transpose_rhs(
    g,
    lhs,
    rhs_aval,
    *,
    window_strides,
    padding,
    lhs_dilation,
    rhs_dilation,
    dimension_numbers,
    feature_group_count,
    batch_group_count,
    precision,
    preferred_element_type,
):
    from fungrad import lax

    if core.get_aval(g).size == 0:  # no output: avoid a degenerate conv with empty windows
        return Zero(rhs_aval.strip_weak_type())
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    lhs_shape = core.get_aval(lhs).shape
    # feature groups of the forward conv become batch groups here, and vice versa
    feature_group_count, batch_group_count = batch_group_count, feature_group_count
    trans_dnums = ConvDimensionNumbers(
        _spec_transpose(lhs_spec), _spec_transpose(out_spec), _spec_transpose(rhs_spec)
    )
    pads = _conv_vjp_rhs_padding(
        [lhs_shape[d] for d in lhs_spec[2:]],
        [rhs_aval.shape[d] for d in rhs_spec[2:]],
        window_strides,
        [core.get_aval(g).shape[d] for d in out_spec[2:]],
        padding,
        lhs_dilation,
        rhs_dilation,
    )
    if lhs.dtype != g.dtype:
        lhs = lax.convert_element_type(lhs, g.dtype)
    out = conv_general_dilated_p.bind(
        lhs,
        g,
        window_strides=rhs_dilation,
        padding=pads,
        lhs_dilation=lhs_dilation,
        rhs_dilation=window_strides,
        dimension_numbers=trans_dnums,
        feature_group_count=feature_group_count,
        batch_group_count=batch_group_count,
        precision=precision,
        preferred_element_type=preferred_element_type,
    )
    if out.dtype != rhs_aval.dtype:
        out = lax.convert_element_type(out, rhs_aval.dtype)
    return out


def _conv_transpose(ct, lhs, rhs, **params):
    if is_undefined_primal(lhs) and is_undefined_primal(rhs):
        raise TypeError(
            "conv_general_dilated: cannot transpose with respect to both operands "
            "(the convolution of two linear inputs is not linear)"
        )
    if is_undefined_primal(lhs):
        return [_conv_transpose_lhs(ct, lhs.aval, rhs, **params), None]
    return [None, _conv_transpose_rhs(ct, lhs, rhs.aval, **params)]


def _conv_batch(
    axis_size, args, dims, *, dimension_numbers, feature_group_count, batch_group_count, **params
):
    (lhs, rhs), (lbd, rbd) = args, dims
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    lhs_aval, rhs_aval = core.get_aval(lhs), core.get_aval(rhs)
    fgc, bgc = feature_group_count, batch_group_count

    def conv(x, y, fgc=fgc, bgc=bgc):
        return conv_general_dilated_p.bind(
            x,
            y,
            dimension_numbers=dimension_numbers,
            feature_group_count=fgc,
            batch_group_count=bgc,
            **params,
        )

    if axis_size == 0:  # reshapes into N/C/O cannot carry a zero-sized batch
        from fungrad import lax

        lshape = list(lhs_aval.shape)
        rshape = list(rhs_aval.shape)
        if lbd is not None:
            del lshape[lbd]
        if rbd is not None:
            del rshape[rbd]
        out = conv_general_dilated_p.abstract_eval(
            ShapedArray(tuple(lshape), lhs_aval.dtype),
            ShapedArray(tuple(rshape), rhs_aval.dtype),
            dimension_numbers=dimension_numbers,
            feature_group_count=fgc,
            batch_group_count=bgc,
            **params,
        )
        return lax.full((0,) + out.shape, 0, out.dtype), 0

    if lbd is not None and rbd is not None:
        # each example is its own feature group (or batch group)
        if bgc > 1:
            new_lhs = _reshape_axis_into(lbd, lhs_spec[0], lhs)
            bgc *= axis_size
        else:
            new_lhs = _reshape_axis_into(lbd, lhs_spec[1], lhs)
            fgc *= axis_size
        new_rhs = _reshape_axis_into(rbd, rhs_spec[0], rhs)
        out = conv(new_lhs, new_rhs, fgc, bgc)
        return _reshape_axis_out_of(out_spec[1], axis_size, out), out_spec[1]

    if lbd is not None:
        if bgc == 1:  # the examples are more batch elements
            out = conv(_reshape_axis_into(lbd, lhs_spec[0], lhs), rhs)
        else:  # ... kept inside each batch group
            new_lhs = _reshape_axis_out_of(lhs_spec[0] + int(lbd <= lhs_spec[0]), bgc, lhs)
            new_lhs = _reshape_axis_into(lbd + int(lhs_spec[0] < lbd), lhs_spec[0] + 1, new_lhs)
            new_lhs = _reshape_axis_into(lhs_spec[0], lhs_spec[0], new_lhs)
            out = conv(new_lhs, rhs)
        return _reshape_axis_out_of(out_spec[0], axis_size, out), out_spec[0]

    if fgc == 1 and bgc == 1:  # the examples' kernels are more output features
        out = conv(lhs, _reshape_axis_into(rbd, rhs_spec[0], rhs))
        return _reshape_axis_out_of(out_spec[1], axis_size, out), out_spec[1]
    # groups must stay outermost in the output features: split them out of O, put the examples
    # inside each group, and undo that order on the output
    groups = fgc if fgc > 1 else bgc
    new_rhs = _reshape_axis_out_of(rhs_spec[0] + int(rbd <= rhs_spec[0]), groups, rhs)
    new_rhs = _reshape_axis_into(rbd + int(rhs_spec[0] < rbd), rhs_spec[0] + 1, new_rhs)
    new_rhs = _reshape_axis_into(rhs_spec[0], rhs_spec[0], new_rhs)
    out = conv(lhs, new_rhs)
    out = _reshape_axis_out_of(out_spec[1], groups, out)
    out = _reshape_axis_out_of(out_spec[1] + 1, axis_size, out)
    return _reshape_axis_into(out_spec[1], out_spec[1] + 1, out), out_spec[1]


defjvp(conv_general_dilated_p, _conv_jvp_lhs, _conv_jvp_rhs)
deflinear_transpose(conv_general_dilated_p, _conv_transpose)
batch_rules[conv_general_dilated_p] = _conv_batch


def _int_tuple(what: str, values, n: int, default: int = 1) -> tuple[int, ...]:
    if values is None:
        return (default,) * n
    try:
        return tuple(operator.index(v) for v in values)
    except TypeError:
        raise TypeError(
            f"conv_general_dilated: {what} must be a sequence of ints, got {values!r}"
        ) from None


def conv_general_dilated(
    lhs,
    rhs,
    window_strides,
    padding,
    lhs_dilation=None,
    rhs_dilation=None,
    dimension_numbers=None,
    feature_group_count=1,
    batch_group_count=1,
    precision=None,
    preferred_element_type=None,
):
    """General n-dimensional convolution with strides, padding, dilations and groups (XLA's
    ConvGeneralDilated; it cross-correlates, the kernel is not flipped).

    Args:
      lhs: input, rank ``n + 2``.
      rhs: kernel, rank ``n + 2``.
      window_strides: ``n`` strides.
      padding: ``"SAME"``, ``"SAME_LOWER"``, ``"VALID"`` or ``n`` ``(low, high)`` pairs
        (negative values crop).
      lhs_dilation: ``n`` input dilations (transposed convolution); string padding is then
        not allowed.
      rhs_dilation: ``n`` kernel dilations (atrous convolution).
      dimension_numbers: None (``NC...``, ``OI...``, ``NC...``), three spec strings such as
        ``("NHWC", "HWIO", "NHWC")``, or a :class:`ConvDimensionNumbers`.
      feature_group_count: split features into groups (depthwise convolution when it equals
        the input feature count).
      batch_group_count: split the batch into groups, each with its own output features.
      precision: None, a ``lax.Precision``, its name, or a pair of those; or a
        ``lax.DotAlgorithm`` / ``lax.DotAlgorithmPreset`` (or a preset's name), which rounds
        the float operands and picks the accumulation type (fungrad/lax/dot_algorithm.py).
      preferred_element_type: the result dtype.

    Example: ``conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO",
    "NHWC"))``.
    """
    x, y = operand(lhs, "conv_general_dilated"), operand(rhs, "conv_general_dilated")
    algorithm = as_algorithm(precision)
    if algorithm is not None:
        x, y, acc, finish = apply_algorithm(
            "conv_general_dilated", x, y, algorithm, preferred_element_type
        )
        return finish(
            conv_general_dilated(
                x,
                y,
                window_strides,
                padding,
                lhs_dilation,
                rhs_dilation,
                dimension_numbers,
                feature_group_count,
                batch_group_count,
                None,
                acc,
            )
        )
    dnums = conv_dimension_numbers(x.shape, y.shape, dimension_numbers)
    nsp = max(x.ndim - 2, 0)
    window_strides = _int_tuple("window_strides", window_strides, nsp)
    if isinstance(padding, str) and lhs_dilation is not None and any(d != 1 for d in lhs_dilation):
        raise ValueError(
            "conv_general_dilated: string padding is not supported with "
            "lhs_dilation; give explicit (low, high) pairs or use conv_transpose"
        )
    lhs_dilation = _int_tuple("lhs_dilation", lhs_dilation, nsp)
    rhs_dilation = _int_tuple("rhs_dilation", rhs_dilation, nsp)
    if isinstance(padding, str):
        lhs_spec, rhs_spec, _ = dnums
        spans = [dilate_dim(y.shape[rhs_spec[k + 2]], d) for k, d in enumerate(rhs_dilation)]
        in_shape = [x.shape[lhs_spec[k + 2]] for k in range(nsp)]
        padding = padtype_to_pads(in_shape, spans, window_strides, padding)
    try:
        padding = tuple((operator.index(lo), operator.index(hi)) for lo, hi in padding)
    except (TypeError, ValueError):
        raise ValueError(
            "conv_general_dilated: padding must be a string or a sequence of "
            f"(low, high) integer pairs, got {padding!r}"
        ) from None
    preferred = (
        None
        if preferred_element_type is None
        else dtypes.canonicalize_dtype(preferred_element_type)
    )
    return conv_general_dilated_p.bind(
        x,
        y,
        window_strides=window_strides,
        padding=padding,
        lhs_dilation=lhs_dilation,
        rhs_dilation=rhs_dilation,
        dimension_numbers=dnums,
        feature_group_count=operator.index(feature_group_count),
        batch_group_count=operator.index(batch_group_count),
        precision=canonicalize_precision(precision),
        preferred_element_type=preferred,
    )


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """Convolution with ``NC...``/``OI...`` layouts and ``"SAME"``/``"VALID"`` padding."""
    return conv_general_dilated(
        lhs,
        rhs,
        window_strides,
        padding,
        precision=precision,
        preferred_element_type=preferred_element_type,
    )


def conv_with_general_padding(
    lhs,
    rhs,
    window_strides,
    padding,
    lhs_dilation,
    rhs_dilation,
    precision=None,
    preferred_element_type=None,
):
    """Convolution with ``NC...``/``OI...`` layouts, explicit or string padding and
    dilations."""
    return conv_general_dilated(
        lhs,
        rhs,
        window_strides,
        padding,
        lhs_dilation=lhs_dilation,
        rhs_dilation=rhs_dilation,
        precision=precision,
        preferred_element_type=preferred_element_type,
    )


def _conv_transpose_padding(k: int, s: int, padding) -> tuple[int, int]:
    """(low, high) padding of the dilated input that transposes a forward conv with kernel
    span ``k``, stride ``s`` and ``padding`` (``"SAME"``, ``"VALID"`` or a pair)."""
    if padding == "SAME":
        pad_len = k + s - 2
        pad_a = k - 1 if s > k - 1 else -(-pad_len // 2)
    elif padding == "VALID":
        pad_len = k + s - 2 + max(k - s, 0)
        pad_a = k - 1
    else:
        lo, hi = padding
        pad_a, pad_len = k - lo - 1, 2 * k - lo - hi - 2
    return pad_a, pad_len - pad_a


def conv_transpose(
    lhs,
    rhs,
    strides,
    padding,
    rhs_dilation=None,
    dimension_numbers=None,
    transpose_kernel=False,
    precision=None,
    preferred_element_type=None,
    use_consistent_padding=False,
):
    """Transposed ("fractionally strided") convolution, computed directly as a convolution of
    the stride-dilated input, as JAX does.

    Args:
      lhs, rhs: input and kernel; the layouts default to TensorFlow's (``NHWC``, ``HWIO``).
      strides: the forward convolution's strides (the input dilation here).
      padding: ``"SAME"``/``"VALID"`` (the forward convolution's padding) or ``(low, high)``
        pairs: the transposed convolution's own padding, or, with
        ``use_consistent_padding=True``, the forward padding (PyTorch's convention).
      rhs_dilation: kernel dilation.
      dimension_numbers: as in :func:`conv_general_dilated`.
      transpose_kernel: flip the kernel's spatial dims and swap its I/O features (this makes
        the result the gradient of the forward convolution, like Keras' Conv2DTranspose).

    Example: ``conv_transpose(x, k, (2, 2), "SAME")`` doubles the spatial size of NHWC ``x``.
    """
    x, y = operand(lhs, "conv_transpose"), operand(rhs, "conv_transpose")
    if x.ndim != y.ndim or x.ndim < 2:
        raise TypeError(
            f"conv_transpose: lhs and rhs must have equal rank, at least 2, got "
            f"shapes {x.shape} and {y.shape}"
        )
    if dimension_numbers is None:
        defaults = {
            2: ("NC", "IO", "NC"),
            3: ("NHC", "HIO", "NHC"),
            4: ("NHWC", "HWIO", "NHWC"),
            5: ("NHWDC", "HWDIO", "NHWDC"),
        }
        if x.ndim not in defaults:
            raise ValueError(
                f"conv_transpose: no default dimension_numbers for rank {x.ndim}; "
                "pass dimension_numbers"
            )
        dimension_numbers = defaults[x.ndim]
    dnums = conv_dimension_numbers(x.shape, y.shape, dimension_numbers)
    nsp = x.ndim - 2
    rhs_dilation = _int_tuple("rhs_dilation", rhs_dilation, nsp)
    strides = _int_tuple("strides", strides, nsp)
    if use_consistent_padding or padding in ("SAME", "VALID"):
        spans = [dilate_dim(y.shape[dnums.rhs_spec[k + 2]], d) for k, d in enumerate(rhs_dilation)]
        forward = [padding] * nsp if isinstance(padding, str) else list(padding)
        pads = tuple(_conv_transpose_padding(k, s, p) for k, s, p in zip(spans, strides, forward))
    else:
        pads = padding
    if transpose_kernel:
        from fungrad.lax import shape

        y = shape.rev(y, dnums.rhs_spec[2:])
        perm = list(range(y.ndim))
        perm[dnums.rhs_spec[0]], perm[dnums.rhs_spec[1]] = dnums.rhs_spec[1], dnums.rhs_spec[0]
        y = shape.transpose(y, tuple(perm))
    return conv_general_dilated(
        x,
        y,
        (1,) * nsp,
        pads,
        strides,
        rhs_dilation,
        dnums,
        precision=precision,
        preferred_element_type=preferred_element_type,
    )


# -- lowering (fungrad/lowering/kernel.py) ------------------------------------------------------


def _conv_input_index(ctx, p, k, *, stride, dilation, lo, lhs_dilation, size):
    """(valid, index) of the lhs element under output position ``p`` and window offset ``k``
    of one spatial dimension: the position in the dilated, padded input is
    ``p * stride + k * dilation``; it holds an element when it is past the low padding, on the
    lhs dilation grid and before the end. ``index`` is clamped, so the load is always in
    bounds (the caller zeroes it where ``valid`` is false)."""
    q = ctx.iadd(
        ctx.iadd(ctx.imul(p, ctx.iconst(stride)), ctx.imul(k, ctx.iconst(dilation))),
        ctx.iconst(-lo),
    )
    valid = ctx.op("ge", q, ctx.iconst(0))
    qc = kernel.clamp_index(ctx, q, 0, lhs_dilation * size)
    if lhs_dilation > 1:
        on_grid = ctx.op("eq", ctx.irem(qc, ctx.iconst(lhs_dilation)), ctx.iconst(0))
        valid = ctx.op("and", valid, on_grid)
        qc = ctx.idiv(qc, ctx.iconst(lhs_dilation))
    valid = ctx.op("and", valid, ctx.op("lt", qc, ctx.iconst(size)))
    return valid, kernel.clamp_index(ctx, qc, 0, size - 1)


def _stored_in_order(ctx, x, order):
    """``x`` with its dimensions permuted to ``order``, as a tensor reading a buffer laid out in
    that order: x's own buffer when it already is, else a stored copy (which also computes a
    fused producer once instead of once per use)."""
    t = kernel.transposed(ctx, x, order, "conv_general_dilated operand")
    if t.view is not None and t.view[1] == tuple(range(len(order))):
        return t
    return ctx.materialize(t)


_GEMM_MAX_PATCH_BYTES = 1 << 28  # the patch matrix is a temporary: 256 MiB at most


def _conv_patches(ctx, x, n, pos, ks, ci, *, c_base, zero, acc, params, times=None):
    """The (masked) lhs element under output ``pos``, window offset ``ks`` and input feature
    ``ci`` of the group at ``c_base``; ``x`` is laid out (N, spatial..., C) or None when lhs
    is empty (all padding). With ``times``, the masked product ``x * times`` (zero, not
    ``0 * times``, in the padding and dilation holes)."""
    if x is None:
        return zero
    window_strides, padding, lhs_dilation, rhs_dilation, in_sp = params
    li, valid = [n], None
    for k in range(len(pos)):
        v, i = _conv_input_index(
            ctx,
            pos[k],
            ks[k],
            stride=window_strides[k],
            dilation=rhs_dilation[k],
            lo=padding[k][0],
            lhs_dilation=lhs_dilation[k],
            size=in_sp[k],
        )
        li.append(i)
        valid = v if valid is None else ctx.op("and", valid, v)
    li.append(ctx.iadd(c_base, ci))
    xv = ctx.convert(x.at(tuple(li)), acc)
    if times is not None:
        xv = ctx.op("mul", xv, times)
    return xv if valid is None else ctx.select(valid, xv, zero)


def _conv_as_gemm(
    ctx, x, rhs, rhs_spec, out_spec, canonical, out_shape, extents, acc, zero, params
):
    """im2col: the (masked) lhs windows stored as a (N*spatial, window*I) matrix, multiplied by
    the kernel as a (window*I, O) matrix in a Gemm step (as dot_general); the (N, spatial..., O)
    product is read back in the output's dimension order."""
    from fungrad.lowering.fusion import Gemm

    nsp = len(canonical) - 2
    o_total = canonical[1]
    spatial = canonical[2:]

    def patch(idx):
        n, pos, ks, ci = idx[0], idx[1 : 1 + nsp], idx[1 + nsp : 1 + 2 * nsp], idx[-1]
        return _conv_patches(
            ctx, x, n, pos, ks, ci, c_base=ctx.iconst(0), zero=zero, acc=acc, params=params
        )

    patches = ctx.materialize(
        kernel.from_fn(
            (canonical[0], *spatial, *extents), acc, patch, "conv_general_dilated patches"
        )
    )
    w = _stored_in_order(ctx, rhs, (*rhs_spec[2:], rhs_spec[1], rhs_spec[0]))
    w_buf = w.buffer if w.buffer is not None else w.view[0]
    planner = ctx.planner
    c = planner.new_buffer((canonical[0], *spatial, o_total), acc, "temp")
    m, k = canonical[0] * math.prod(spatial), math.prod(extents)
    planner.add_step(
        Gemm("conv_general_dilated", patches.buffer, w_buf, c, m, o_total, k, False, False)
    )
    prod = planner.buffer_tensor(c, "conv_general_dilated")
    perm = [0] * len(out_shape)  # output dim -> dim of the (N, spatial..., O) product
    perm[out_spec[0]], perm[out_spec[1]] = 0, nsp + 1
    for j in range(nsp):
        perm[out_spec[j + 2]] = j + 1
    if perm == sorted(perm):
        return prod
    return kernel.transposed(ctx, prod, perm, "conv_general_dilated")


def _conv_general_dilated_lowering(
    ctx,
    lhs,
    rhs,
    *,
    window_strides,
    padding,
    lhs_dilation,
    rhs_dilation,
    dimension_numbers,
    feature_group_count,
    batch_group_count,
    precision,
    preferred_element_type,
):
    """Float convolutions without groups whose product the backend's policy wants as a Gemm
    (``wants_gemm``) are an im2col matrix product (:func:`_conv_as_gemm`). Otherwise an
    inline reduction per output element over (window offsets, input feature in the group), the
    input feature innermost: both operands are read from buffers laid out as
    (N, spatial..., C) and (O, window..., I) (copied there when they are not), so the inner
    loop is a contiguous dot product the vectoriser handles. lhs elements come through masked,
    clamped loads: positions in the padding or between dilated elements are zero, multiplied
    with the kernel value as in the impl (so 0 * inf is NaN there too). An output that is a
    single product (a one-element window, one input feature per group) is that product, not
    ``0 + product`` (which loses -0), and +0 where it falls on padding, as the impl and XLA
    compute it. Products accumulate in
    the impl's dtype (float32 for float16, int64 for integers and bool) and are cast like
    ``convert_element_type``."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    out_dtype = lhs.dtype if preferred_element_type is None else preferred_element_type
    acc = accumulation_dtype(lhs.dtype, out_dtype)
    nsp = len(lhs.shape) - 2
    n_total, o_total = lhs.shape[lhs_spec[0]], rhs.shape[rhs_spec[0]]
    i_size = rhs.shape[rhs_spec[1]]
    in_sp = [lhs.shape[lhs_spec[k + 2]] for k in range(nsp)]
    win = [rhs.shape[rhs_spec[k + 2]] for k in range(nsp)]
    spatial = [
        strided_windows(
            dilate_dim(in_sp[k], lhs_dilation[k]) + sum(padding[k]),
            dilate_dim(win[k], rhs_dilation[k]),
            window_strides[k],
        )
        for k in range(nsp)
    ]
    bg, fg = batch_group_count, feature_group_count
    canonical = (n_total // bg, o_total, *spatial)
    out_shape = [0] * len(out_spec)
    for k, d in enumerate(out_spec):
        out_shape[d] = canonical[k]
    extents = [*win, i_size]
    if 0 in extents or 0 in out_shape:
        return kernel.from_fn(
            tuple(out_shape), out_dtype, lambda idx: ctx.const(0, out_dtype), "conv_general_dilated"
        )
    single = math.prod(extents) == 1  # one product per output element, its sign kept (XLA)
    lhs_order = (lhs_spec[0], *lhs_spec[2:], lhs_spec[1])  # (N, spatial..., C)
    zero = ctx.const(0, acc)
    params = (window_strides, padding, lhs_dilation, rhs_dilation, in_sp)
    m, k = canonical[0] * math.prod(spatial), math.prod(extents)
    if (
        bg == 1
        and fg == 1
        and dtypes.kind(acc) == "f"
        and lhs.dtype == rhs.dtype == out_dtype == acc
        and not single
        and m * k * acc.itemsize <= _GEMM_MAX_PATCH_BYTES
        and ctx.planner.policy.wants_gemm(m, o_total, k, 1, acc)
    ):
        x = None  # the patches read a stored lhs in any layout
        if lhs.size:
            x = kernel.transposed(ctx, lhs, lhs_order, "conv_general_dilated operand")
            x = x if x.view is not None else ctx.materialize(x)
        return _conv_as_gemm(
            ctx, x, rhs, rhs_spec, out_spec, canonical, out_shape, extents, acc, zero, params
        )
    x = None if lhs.size == 0 else _stored_in_order(ctx, lhs, lhs_order)
    w = _stored_in_order(ctx, rhs, (rhs_spec[0], *rhs_spec[2:], rhs_spec[1]))  # (O, window.., I)

    def element(idx):
        n, o = idx[out_spec[0]], idx[out_spec[1]]
        pos = [idx[out_spec[k + 2]] for k in range(nsp)]
        if bg > 1:  # batch group g of the output features reads batch slice g
            g = ctx.idiv(o, ctx.iconst(o_total // bg))
            n = ctx.iadd(ctx.imul(g, ctx.iconst(n_total // bg)), n)
        c_base = (
            ctx.imul(ctx.idiv(o, ctx.iconst(o_total // fg)), ctx.iconst(i_size))
            if fg > 1
            else ctx.iconst(0)
        )

        def body(*r):
            ks, ci = r[:nsp], r[nsp]
            wv = ctx.convert(w.at((o, *ks, ci)), acc)
            if single:  # the one product, zero where it falls on padding (XLA)
                return _conv_patches(
                    ctx,
                    x,
                    n,
                    pos,
                    ks,
                    ci,
                    c_base=c_base,
                    zero=zero,
                    acc=acc,
                    params=params,
                    times=wv,
                )
            xv = _conv_patches(
                ctx, x, n, pos, ks, ci, c_base=c_base, zero=zero, acc=acc, params=params
            )
            return ctx.op("mul", xv, wv)

        if single:
            return ctx.convert(body(*[ctx.iconst(0)] * len(extents)), out_dtype)
        return ctx.convert(ctx.reduce("add", extents, body), out_dtype)

    return kernel.from_fn(tuple(out_shape), out_dtype, element, "conv_general_dilated")


kernel.register_lowering(conv_general_dilated_p, _conv_general_dilated_lowering)
