"""Windowed reductions: reduce_window_sum/max/min, the generic ``lax.reduce_window`` and
``padtype_to_pads``, as in JAX's ``lax/windowed_reductions.py``; with the window shape
arithmetic (``dilate_dim``, ``strided_windows``, ``dilate_and_pad``, ``conv_vjp_lhs_padding``)
that ``conv.py`` shares.

A window's padding and base-dilation holes hold the reduction's identity (0 for a sum, -inf /
``iinfo.min`` / False for a max), so they never change the result. ``lax.reduce_window``
recognises ``lax.add``/``lax.max``/``lax.min`` with their identity as init value and binds the
matching primitive (fungrad has no reduction over arbitrary computations).

Every primitive has its jvp, transpose (reduce_window_sum, the linear one) and batching rules
beside it. The rules are written with lax functions, so they are themselves differentiable and
batchable: the windowed max/min jvps pick tangents from strided slices of the padded operand
(one slice per window element), as JAX's select_and_gather_add does.

The lowering rules (for ``jit``, at the end) reduce each window inline in the output's loop
nest: padding and base-dilation holes are masked to the identity, loads clamped into bounds.
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from fungrad import core
from fungrad.core import ShapedArray
from fungrad.lax import complex_math
from fungrad.lax.reduce import (
    _accumulation_dtype,
    _check_identity,
    _int_tuple,
    _monoid,
    _zero,
    max_identity,
    min_identity,
)
from fungrad.lax.utils import (
    ANY_OR_COMPLEX,
    NUMERIC_OR_COMPLEX,
    check_kinds,
    operand,
    standard_primitive,
)
from fungrad.lowering import kernel
from fungrad.transforms.jvp import Zero, deflinear, jvp_rules, tangent_aval
from fungrad.transforms.transpose import deflinear_transpose
from fungrad.transforms.vmap import batch_rules

__all__ = [
    "reduce_window",
    "padtype_to_pads",
    "reduce_window_sum_p",
    "reduce_window_max_p",
    "reduce_window_min_p",
]


# -- windowed reductions ------------------------------------------------------------------------


def dilate_dim(size: int, dilation: int) -> int:
    """Size of a dimension after inserting ``dilation - 1`` holes between its elements."""
    return 0 if size == 0 else (size - 1) * dilation + 1


def strided_windows(size: int, window: int, stride: int) -> int:
    """How many windows of size ``window`` fit at ``stride`` in ``size`` elements (>= 0)."""
    return max(0, (size - window) // stride + 1)


def dilate_and_pad(x: np.ndarray, fill, dilation, padding) -> np.ndarray:
    """``x`` with ``dilation - 1`` copies of ``fill`` between elements, then padded with
    ``fill`` by ``padding`` ((lo, hi) per dimension; negative values crop)."""
    shape = tuple(dilate_dim(d, s) for d, s in zip(x.shape, dilation))
    y = np.full(shape, fill, dtype=x.dtype)
    y[tuple(slice(None, None, s) for s in dilation)] = x
    y = np.pad(y, [(max(lo, 0), max(hi, 0)) for lo, hi in padding], constant_values=fill)
    return y[
        tuple(
            slice(max(-lo, 0), max(d - max(-hi, 0), max(-lo, 0)))
            for d, (lo, hi) in zip(y.shape, padding)
        )
    ]


def _check_window_params(
    name, x, window_dimensions, window_strides, padding, base_dilation, window_dilation
):
    for what, vals in (
        ("window_dimensions", window_dimensions),
        ("window_strides", window_strides),
        ("base_dilation", base_dilation),
        ("window_dilation", window_dilation),
    ):
        if len(vals) != x.ndim:
            raise TypeError(
                f"{name}: {what} {vals} must have one entry per operand dimension "
                f"(operand shape {x.shape})"
            )
        if any(v < 1 for v in vals):
            raise TypeError(f"{name}: every element of {what} must be positive, got {vals}")
    if len(padding) != x.ndim or any(len(p) != 2 for p in padding):
        raise TypeError(
            f"{name}: padding {padding} must have one (low, high) pair per operand "
            f"dimension (operand shape {x.shape})"
        )


def _reduce_window_shape(
    shape, window_dimensions, window_strides, padding, base_dilation, window_dilation
):
    return tuple(
        strided_windows(dilate_dim(d, b) + lo + hi, dilate_dim(w, wd), s)
        for d, w, s, (lo, hi), b, wd in zip(
            shape, window_dimensions, window_strides, padding, base_dilation, window_dilation
        )
    )


def _reduce_window_abstract_eval(name: str, kinds):
    def abstract_eval(
        x, *, window_dimensions, window_strides, padding, base_dilation, window_dilation
    ):
        check_kinds(name, x.dtype, kinds)
        _check_window_params(
            name, x, window_dimensions, window_strides, padding, base_dilation, window_dilation
        )
        shape = _reduce_window_shape(
            x.shape, window_dimensions, window_strides, padding, base_dilation, window_dilation
        )
        return ShapedArray(shape, x.dtype, x.weak_type)

    return abstract_eval


_COMPLEX_EXTREMA = {np.maximum: complex_math.maximum, np.minimum: complex_math.minimum}


def _reduce_window_impl(ufunc, identity):
    """impl of a windowed ``ufunc`` reduction: holes and padding hold ``identity(dtype)``,
    windows are strided views of the padded operand (no loop over output elements)."""

    def impl(x, *, window_dimensions, window_strides, padding, base_dilation, window_dilation):
        x = np.asarray(x)
        init = identity(x.dtype)
        shape = _reduce_window_shape(
            x.shape, window_dimensions, window_strides, padding, base_dilation, window_dilation
        )
        if 0 in shape or x.ndim == 0:
            return np.asarray(np.full(shape, init, dtype=x.dtype) if 0 in shape else x)[()]
        acc = _accumulation_dtype(x.dtype)
        xp = dilate_and_pad(x.astype(acc), init, base_dilation, padding)
        spans = tuple(dilate_dim(w, d) for w, d in zip(window_dimensions, window_dilation))
        windows = sliding_window_view(xp, spans)
        windows = windows[
            tuple(slice(None, None, s) for s in window_strides)
            + tuple(slice(None, None, d) for d in window_dilation)
        ]
        with np.errstate(all="ignore"):
            if x.dtype.kind == "c" and ufunc in _COMPLEX_EXTREMA:
                # XLA's lexicographic max/min, folded over the window in row-major order (a
                # comparison with NaN takes the next element; numpy's propagates NaN)
                flat = windows.reshape(windows.shape[: x.ndim] + (-1,))
                fold = _COMPLEX_EXTREMA[ufunc]
                out = flat[..., 0]
                for k in range(1, flat.shape[-1]):
                    out = fold(out, flat[..., k])
            else:
                out = ufunc.reduce(windows, axis=tuple(range(x.ndim, 2 * x.ndim)))
        return np.asarray(out).astype(x.dtype)

    return impl


reduce_window_sum_p = standard_primitive(
    "reduce_window_sum",
    _reduce_window_impl(np.add, _zero),
    # (complex: as JAX; the complex split sums each part)
    _reduce_window_abstract_eval("reduce_window_sum", NUMERIC_OR_COMPLEX),
)
reduce_window_max_p = standard_primitive(
    "reduce_window_max",
    _reduce_window_impl(np.maximum, max_identity),
    _reduce_window_abstract_eval("reduce_window_max", ANY_OR_COMPLEX),
)
reduce_window_min_p = standard_primitive(
    "reduce_window_min",
    _reduce_window_impl(np.minimum, min_identity),
    _reduce_window_abstract_eval("reduce_window_min", ANY_OR_COMPLEX),
)


def conv_vjp_lhs_padding(
    in_shape, window_dimensions, window_strides, out_shape, padding, lhs_dilation, rhs_dilation
) -> tuple[tuple[int, int], ...]:
    """The (low, high) padding of the stride-dilated cotangent of a windowed operation (a
    convolution, reduce_window_sum) whose window correlation with the reversed window gives the
    operand's cotangent (JAX's ``_conv_general_vjp_lhs_padding``)."""
    pads = []
    for n, w, s, o, (lo, _), ld, wd in zip(
        in_shape, window_dimensions, window_strides, out_shape, padding, lhs_dilation, rhs_dilation
    ):
        span = dilate_dim(w, wd)
        before = span - lo - 1
        pads.append((before, dilate_dim(n, ld) + span - 1 - dilate_dim(o, s) - before))
    return tuple(pads)


def _reduce_window_sum_transpose(
    ct, x, *, window_dimensions, window_strides, padding, base_dilation, window_dilation
):
    # JAX's rule: dilate the cotangent by the strides, pad it, and sum it over the same windows
    # with the base dilation as strides.
    from fungrad import lax

    shape = x.aval.shape
    pads = conv_vjp_lhs_padding(
        shape,
        window_dimensions,
        window_strides,
        core.get_aval(ct).shape,
        padding,
        base_dilation,
        window_dilation,
    )
    config = tuple((lo, hi, s - 1) for (lo, hi), s in zip(pads, window_strides))
    padded = lax.pad(ct, 0, config)
    return [
        reduce_window_sum_p.bind(
            padded,
            window_dimensions=window_dimensions,
            window_strides=base_dilation,
            padding=((0, 0),) * len(shape),
            base_dilation=(1,) * len(shape),
            window_dilation=window_dilation,
        )
    ]


def _window_patches(
    x,
    fill,
    out_shape,
    *,
    window_dimensions,
    window_strides,
    padding,
    base_dilation,
    window_dilation,
):
    """One array of the output's shape per window element (row-major window order): the
    elements of ``x`` (padded and base-dilated with ``fill``) that this window element reads
    in every window."""
    from fungrad import lax

    padded = lax.pad(x, fill, tuple((lo, hi, b - 1) for (lo, hi), b in zip(padding, base_dilation)))
    patches = []
    for offset in itertools.product(*(range(w) for w in window_dimensions)):
        starts = tuple(k * d for k, d in zip(offset, window_dilation))
        limits = tuple(st + (n - 1) * s + 1 for st, n, s in zip(starts, out_shape, window_strides))
        patches.append(lax.slice(padded, starts, limits, window_strides))
    return patches


def _reduce_window_chooser_jvp(prim, identity, better: str):
    """jvp of a windowed max/min: each window's tangent is the one at its first extreme
    element (what JAX's select_and_gather_add picks), found by scanning the window elements;
    ``better`` names the lax comparison (``"gt"``/``"lt"``) by which an element replaces the
    best so far."""

    def rule(primals, tangents, **params):
        from fungrad import lax

        (x,), (t,) = primals, tangents
        out = prim.bind(x, **params)
        out_aval = tangent_aval(core.get_aval(out))
        if 0 in out_aval.shape:
            return out, Zero(out_aval)
        fill = identity(out_aval.dtype)
        fill = complex(fill) if out_aval.dtype.kind == "c" else float(fill)
        xs = _window_patches(x, fill, out_aval.shape, **params)
        ts = _window_patches(t, 0, out_aval.shape, **params)
        best, tangent = xs[0], ts[0]
        cmp = getattr(lax, better)
        for xk, tk in zip(xs[1:], ts[1:]):
            if out_aval.dtype.kind == "c":  # XLA's lexicographic order: real, then imaginary
                re_k, re_b = lax.real(xk), lax.real(best)
                take = lax.bitwise_or(
                    cmp(re_k, re_b),
                    lax.bitwise_and(lax.eq(re_k, re_b), cmp(lax.imag(xk), lax.imag(best))),
                )
            else:
                take = cmp(xk, best)
            best = lax.select_n(take, best, xk)
            tangent = lax.select_n(take, tangent, tk)
        return out, tangent

    return rule


def _reduce_window_batch(prim):
    """Batch a windowed reduction: the batch dim gets a window of size 1."""

    def rule(
        axis_size,
        args,
        dims,
        *,
        window_dimensions,
        window_strides,
        padding,
        base_dilation,
        window_dilation,
    ):
        (x,), (d,) = args, dims

        def insert(values, v):
            return values[:d] + (v,) + values[d:]

        out = prim.bind(
            x,
            window_dimensions=insert(window_dimensions, 1),
            window_strides=insert(window_strides, 1),
            padding=insert(padding, (0, 0)),
            base_dilation=insert(base_dilation, 1),
            window_dilation=insert(window_dilation, 1),
        )
        return out, d

    return rule


deflinear(reduce_window_sum_p)
deflinear_transpose(reduce_window_sum_p, _reduce_window_sum_transpose)
jvp_rules[reduce_window_max_p] = _reduce_window_chooser_jvp(reduce_window_max_p, max_identity, "gt")
jvp_rules[reduce_window_min_p] = _reduce_window_chooser_jvp(reduce_window_min_p, min_identity, "lt")
batch_rules[reduce_window_sum_p] = _reduce_window_batch(reduce_window_sum_p)
batch_rules[reduce_window_max_p] = _reduce_window_batch(reduce_window_max_p)
batch_rules[reduce_window_min_p] = _reduce_window_batch(reduce_window_min_p)


def padtype_to_pads(in_shape, window_shape, window_strides, padding: str) -> list:
    """Explicit ``(low, high)`` padding pairs for the padding string ``padding``.

    ``"VALID"`` pads nothing; ``"SAME"`` pads so that the output has ``ceil(in / stride)``
    elements, the odd element going to the high side (to the low side for ``"SAME_LOWER"``).

    Example: ``padtype_to_pads((5,), (2,), (2,), "SAME")`` is ``[(0, 1)]``.
    """
    if not isinstance(padding, str) or padding.upper() not in ("SAME", "SAME_LOWER", "VALID"):
        raise ValueError(
            f"padtype_to_pads: unrecognized padding type {padding!r}; expected "
            "'VALID', 'SAME' or 'SAME_LOWER'"
        )
    mode = padding.upper()
    if mode == "VALID":
        return [(0, 0)] * len(in_shape)
    pads = []
    for d, w, s in zip(in_shape, window_shape, window_strides):
        out = -(-int(d) // int(s))
        total = max((out - 1) * int(s) + int(w) - int(d), 0)
        small, big = total // 2, total - total // 2
        pads.append((small, big) if mode == "SAME" else (big, small))
    return pads


# -- the generic wrapper: a monoid recognised by its computation ------------------------------

_WINDOW_MONOIDS = (
    ("add", reduce_window_sum_p, _zero),
    ("max", reduce_window_max_p, max_identity),
    ("min", reduce_window_min_p, min_identity),
)


def reduce_window(
    operand_,
    init_value,
    computation,
    window_dimensions,
    window_strides=None,
    padding="VALID",
    base_dilation=None,
    window_dilation=None,
):
    """Reduce each window of ``operand_`` with the monoid ``computation``.

    Args:
      operand_: the array.
      init_value: the identity of ``computation`` (0 for ``lax.add``, -inf / ``iinfo.min`` /
        False for ``lax.max``, inf / ``iinfo.max`` / True for ``lax.min``).
      computation: ``lax.add``, ``lax.max`` or ``lax.min``.
      window_dimensions: window size per dimension.
      window_strides: step between windows per dimension (default 1).
      padding: ``"VALID"``, ``"SAME"``, ``"SAME_LOWER"`` or ``(low, high)`` pairs; padding
        holds the identity, so it never wins a max and adds nothing to a sum.
      base_dilation: holes inserted between operand elements (default 1: none).
      window_dilation: spacing between window elements (default 1).

    Example: ``reduce_window(x, -jnp.inf, lax.max, (2, 2), (2, 2), "VALID")`` is a 2x2 max pool.
    """
    x = operand(operand_, "reduce_window")
    prim, identity = _monoid("reduce_window", computation, _WINDOW_MONOIDS)
    _check_identity("reduce_window", init_value, identity(x.dtype), computation, x.dtype)
    window_dimensions = _int_tuple("reduce_window", "window_dimensions", window_dimensions)
    ones = (1,) * len(window_dimensions)
    window_strides = (
        ones
        if window_strides is None
        else _int_tuple("reduce_window", "window_strides", window_strides)
    )
    base_dilation = (
        ones
        if base_dilation is None
        else _int_tuple("reduce_window", "base_dilation", base_dilation)
    )
    window_dilation = (
        ones
        if window_dilation is None
        else _int_tuple("reduce_window", "window_dilation", window_dilation)
    )
    if isinstance(padding, str):
        spans = [dilate_dim(w, d) for w, d in zip(window_dimensions, window_dilation)]
        padding = padtype_to_pads(x.shape, spans, window_strides, padding)
    padding = tuple(_int_tuple("reduce_window", "padding", p) for p in padding)
    return prim.bind(
        x,
        window_dimensions=window_dimensions,
        window_strides=window_strides,
        padding=padding,
        base_dilation=base_dilation,
        window_dilation=window_dilation,
    )


# -- lowering (fungrad/lowering/kernel.py): an inline reduction over each window ---------------


def _reduce_window_lowering(name: str, op: str, identity):
    def rule(ctx, x, *, window_dimensions, window_strides, padding, base_dilation, window_dilation):
        shape = _reduce_window_shape(
            x.shape, window_dimensions, window_strides, padding, base_dilation, window_dilation
        )
        if x.ndim == 0:
            return x
        acc = _accumulation_dtype(x.dtype)
        init = ctx.const(identity(acc), acc)
        if x.size == 0:  # every window holds only padding
            return kernel.from_fn(shape, x.dtype, lambda idx: ctx.convert(init, x.dtype), name)
        dims = list(
            zip(
                x.shape,
                window_dimensions,
                window_strides,
                padding,
                base_dilation,
                window_dilation,
                shape,
            )
        )

        def element(idx):
            def body(*ks):
                pos, conds = [], []
                for o, k, (n, w, s, (lo, _), b, wd, m) in zip(idx, ks, dims):
                    # the position in the dilated operand (padding removed): o*s + k*wd - lo
                    p = ctx.isub(
                        ctx.iadd(ctx.imul(o, ctx.iconst(s)), ctx.imul(k, ctx.iconst(wd))),
                        ctx.iconst(lo),
                    )
                    if lo > 0:  # the low padding
                        conds.append(ctx.op("ge", p, ctx.iconst(0)))
                        p = ctx.op("max", p, ctx.iconst(0))
                    if b > 1:  # the holes of the base dilation
                        conds.append(ctx.op("eq", ctx.irem(p, ctx.iconst(b)), ctx.iconst(0)))
                        p = ctx.idiv(p, ctx.iconst(b))
                    if (m - 1) * s + (w - 1) * wd - lo > (n - 1) * b:  # the high padding
                        conds.append(ctx.op("lt", p, ctx.iconst(n)))
                        p = ctx.op("min", p, ctx.iconst(n - 1))
                    pos.append(p)
                v = ctx.convert(x.at(pos), acc)
                if not conds:
                    return v
                inside = conds[0]
                for c in conds[1:]:
                    inside = ctx.op("and", inside, c)
                return ctx.select(inside, v, init)

            return ctx.convert(ctx.reduce(op, window_dimensions, body), x.dtype)

        return kernel.from_fn(shape, x.dtype, element, name)

    return rule


for _p, _op, _identity in (
    (reduce_window_sum_p, "add", _zero),
    (reduce_window_max_p, "max", max_identity),
    (reduce_window_min_p, "min", min_identity),
):
    kernel.register_lowering(_p, _reduce_window_lowering(_p.name, _op, _identity))
del _p, _op, _identity
