"""Windowed reductions: reduce_window_sum/max/min, the generic ``lax.reduce_window`` and
``padtype_to_pads``, as in JAX's ``lax/windowed_reductions.py``; with the window shape
arithmetic (``dilate_dim``, ``strided_windows``, ``dilate_and_pad``, ``conv_vjp_lhs_padding``)
that ``conv.py`` shares.

A window's padding and base-dilation holes hold the reduction's identity (0 for a sum, -inf /
``iinfo.min`` / False for a max), so they never change the result. ``lax.reduce_window``
recognises ``lax.add``/``lax.max``/``lax.min`` with their identity as init value and binds the
matching primitive (fungrad has no reduction over arbitrary computations).

Every primitive has its jvp, transpose (for the linear ones) and batching rules beside it.
The windowed max/min jvps are JAX's: ``select_and_gather_add(t, x)`` picks each window's
tangent at its first extreme element; its transpose ``select_and_scatter_add(ct, x)`` adds each
window's cotangent to that element, and the two are each other's transposes, so max pooling
differentiates to any order without recomputing comparisons per window element.

The lowering rules (for ``jit``, at the end) reduce each window inline in the output's loop
nest: padding and base-dilation holes are masked to the identity, loads clamped into bounds.
select_and_scatter_add is lowered in gather form: each operand element visits the windows that
can hold it and recomputes their selection.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from fungrad import core, dtypes
from fungrad.core import ShapedArray
from fungrad.lax import complex_math
from fungrad.lax import elementwise as _elementwise
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
    FLOAT,
    NUMERIC,
    NUMERIC_OR_COMPLEX,
    check_kinds,
    operand,
    standard_primitive,
)
from fungrad.lowering import kernel
from fungrad.transforms.jvp import Zero, deflinear, jvp_rules, tangent_aval
from fungrad.transforms.transpose import deflinear_transpose, is_undefined_primal
from fungrad.transforms.vmap import batch_rules, bdim_at_front

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
            if dtypes.kind(x.dtype) == "c" and ufunc in _COMPLEX_EXTREMA:
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


def _complex_chooser_tangent(x, t, identity, better: str, out_shape, params):
    """The tangent of a windowed max/min of complex ``x``: each window's tangent is the one at
    its first extreme element in XLA's lexicographic order (real part, then imaginary), found by
    scanning the window elements (strided slices of the padded operand); ``better`` names the
    lax comparison (``"gt"``/``"lt"``) by which an element replaces the best so far. Real
    operands use :data:`select_and_gather_add_p` instead, whose order is the real one."""
    from fungrad import lax

    fill = complex(identity(np.dtype(x.dtype)))
    xs = _window_patches(x, fill, out_shape, **params)
    ts = _window_patches(t, 0, out_shape, **params)
    best, tangent = xs[0], ts[0]
    cmp = getattr(lax, better)
    for xk, tk in zip(xs[1:], ts[1:]):
        re_k, re_b = lax.real(xk), lax.real(best)
        take = lax.bitwise_or(
            cmp(re_k, re_b),
            lax.bitwise_and(lax.eq(re_k, re_b), cmp(lax.imag(xk), lax.imag(best))),
        )
        best = lax.select_n(take, best, xk)
        tangent = lax.select_n(take, tangent, tk)
    return tangent


def _reduce_window_chooser_jvp(prim, identity, better: str, select_prim_name: str):
    """jvp of a windowed max/min: each window's tangent is the one at its first extreme
    element, ``select_and_gather_add(t, x)`` as in JAX (the NaN of a window that has one, as
    the output is NaN then). Its transpose, ``select_and_scatter_add``, routes each output
    cotangent to that element directly, without per-window-element pads or recomputed
    comparisons. Complex operands (lexicographic order) scan the window elements instead."""

    def rule(primals, tangents, **params):

        (x,), (t,) = primals, tangents
        out = prim.bind(x, **params)
        out_aval = tangent_aval(core.get_aval(out))
        if type(t) is Zero or 0 in out_aval.shape or dtypes.kind(out_aval.dtype) not in "fc":
            return out, Zero(out_aval)
        if dtypes.kind(out_aval.dtype) == "c":
            return out, _complex_chooser_tangent(x, t, identity, better, out_aval.shape, params)
        select_prim = getattr(_elementwise, select_prim_name + "_p")
        return out, select_and_gather_add_p.bind(t, x, select_prim=select_prim, **params)

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
jvp_rules[reduce_window_max_p] = _reduce_window_chooser_jvp(
    reduce_window_max_p, max_identity, "gt", "ge"
)
jvp_rules[reduce_window_min_p] = _reduce_window_chooser_jvp(
    reduce_window_min_p, min_identity, "lt", "le"
)
batch_rules[reduce_window_sum_p] = _reduce_window_batch(reduce_window_sum_p)
batch_rules[reduce_window_max_p] = _reduce_window_batch(reduce_window_max_p)
batch_rules[reduce_window_min_p] = _reduce_window_batch(reduce_window_min_p)


# -- the derivatives of max/min pooling: select_and_gather_add, select_and_scatter_add --------
#
# As JAX's: ``select_and_gather_add(t, x)`` gives, per window of ``x``, the tangent ``t`` at the
# window's selected element; ``select_and_scatter_add(ct, x)`` (its transpose, linear in ``ct``)
# adds each window's cotangent to the operand element that window selects. ``select_prim`` is
# ``lax.ge_p`` (the first maximum) or ``lax.le_p`` (the first minimum); a window holding a NaN
# selects its first NaN (its max/min is NaN). Padding and base-dilation holes hold the max/min
# identity with tangent 0: a window whose first extreme is a hole selects nothing.


def _select_identity(select_prim, dtype):
    """The element that never beats a real one under ``select_prim`` (ge: -inf / iinfo.min,
    le: inf / iinfo.max): what padding and holes hold."""
    if select_prim is _elementwise.ge_p:
        return max_identity(dtype)
    if select_prim is _elementwise.le_p:
        return min_identity(dtype)
    raise TypeError(f"select_prim must be lax.ge_p or lax.le_p, got {select_prim!r}")


def _window_views(
    a, fill, window_dimensions, window_strides, padding, base_dilation, window_dilation
):
    """The windows of ``a`` (dilated and padded with ``fill``) as an array of shape
    ``out_shape + (window size,)``, the window elements in row-major order."""
    ap = dilate_and_pad(a, fill, base_dilation, padding)
    spans = tuple(dilate_dim(w, d) for w, d in zip(window_dimensions, window_dilation))
    windows = sliding_window_view(ap, spans)[
        tuple(slice(None, None, s) for s in window_strides)
        + tuple(slice(None, None, d) for d in window_dilation)
    ]
    return windows.reshape(windows.shape[: a.ndim] + (-1,))


def _selected(x, select_prim, params):
    """Per window, the position (in the window's row-major order) of its selected element:
    numpy's argmax/argmin give the first extreme, or the first NaN."""
    acc = _accumulation_dtype(x.dtype)
    xw = _window_views(x.astype(acc), _select_identity(select_prim, acc), **params)
    return (np.argmax if select_prim is _elementwise.ge_p else np.argmin)(xw, axis=-1)


def _select_and_gather_add_impl(t, x, *, select_prim, **params):
    """Eager select_and_gather_add: the window views of ``t`` (padded with 0) indexed at the
    argmax/argmin of the window views of ``x``."""
    t, x = np.asarray(t), np.asarray(x)
    shape = _reduce_window_shape(x.shape, **params)
    if x.ndim == 0:
        return t.copy()
    if 0 in shape:
        return np.zeros(shape, t.dtype)
    pick = _selected(x, select_prim, params)
    tw = _window_views(t, 0, **params)
    return np.take_along_axis(tw, pick[..., None], -1)[..., 0]


def _select_and_scatter_add_impl(ct, x, *, select_prim, **params):
    """Eager select_and_scatter_add: the windows of the operand's flat positions (-1 in
    padding and holes) give each window's selected position; the cotangents are added there
    in row-major window order (``np.add.at``)."""
    ct, x = np.asarray(ct), np.asarray(x)
    if x.ndim == 0:
        return ct.copy()
    out = np.zeros(x.size, ct.dtype)
    if ct.size == 0 or x.size == 0:
        return out.reshape(x.shape)
    pick = _selected(x, select_prim, params)
    positions = _window_views(np.arange(x.size).reshape(x.shape), -1, **params)
    at = np.take_along_axis(positions, pick[..., None], -1)[..., 0]
    hit = at >= 0
    np.add.at(out, at[hit], ct[hit])
    return out.reshape(x.shape)


def _select_abstract_eval(name: str, gather: bool):
    """abstract_eval of select_and_gather_add (``gather``: tangents of the operand's shape in,
    the windows' shape out) and select_and_scatter_add (the reverse). The linear operand is
    float; the selecting operand is real."""

    def abstract_eval(v, x, *, select_prim, **params):
        check_kinds(name, v.dtype, FLOAT)
        check_kinds(name, x.dtype, NUMERIC)
        _select_identity(select_prim, x.dtype)
        _check_window_params(name, x, **params)
        windows = _reduce_window_shape(x.shape, **params)
        want, out = (x.shape, windows) if gather else (windows, x.shape)
        if v.shape != want:
            raise TypeError(
                f"{name}: the linear operand has shape {v.shape}, expected {want} for operand "
                f"shape {x.shape} and window parameters {params}"
            )
        return ShapedArray(out, v.dtype, v.weak_type)

    return abstract_eval


select_and_gather_add_p = standard_primitive(
    "select_and_gather_add",
    _select_and_gather_add_impl,
    _select_abstract_eval("select_and_gather_add", gather=True),
)
select_and_scatter_add_p = standard_primitive(
    "select_and_scatter_add",
    _select_and_scatter_add_impl,
    _select_abstract_eval("select_and_scatter_add", gather=False),
)


def _select_linear_jvp(prim):
    """jvp of a primitive linear in its first operand and piecewise constant in the second
    (the selection changes only where the operand ties): ``prim(dt, x)``."""

    def rule(primals, tangents, **params):
        (v, x), (dv, _) = primals, tangents
        out = prim.bind(v, x, **params)
        if type(dv) is Zero:
            return out, Zero(tangent_aval(core.get_aval(out)))
        return out, prim.bind(dv, x, **params)

    return rule


def _select_transpose(name: str, other):
    """Transpose of a select primitive in its linear operand: the other one of the pair, with
    the same selection (select_and_gather_add and select_and_scatter_add are each other's)."""

    def rule(ct, v, x, **params):
        if is_undefined_primal(x):
            raise TypeError(f"{name} is not linear in its operand (the selecting values)")
        return [other().bind(ct, x, **params) if is_undefined_primal(v) else None, None]

    return rule


def _select_batch(prim):
    """Batch a select primitive: both operands batched along dimension 0, which gets a
    window of size 1."""

    def rule(axis_size, args, dims, *, select_prim, **params):
        v, x = (bdim_at_front(a, d, axis_size) for a, d in zip(args, dims))
        out = prim.bind(
            v,
            x,
            select_prim=select_prim,
            window_dimensions=(1, *params["window_dimensions"]),
            window_strides=(1, *params["window_strides"]),
            padding=((0, 0), *params["padding"]),
            base_dilation=(1, *params["base_dilation"]),
            window_dilation=(1, *params["window_dilation"]),
        )
        return out, 0

    return rule


for _p, _other in (
    (select_and_gather_add_p, lambda: select_and_scatter_add_p),
    (select_and_scatter_add_p, lambda: select_and_gather_add_p),
):
    jvp_rules[_p] = _select_linear_jvp(_p)
    deflinear_transpose(_p, _select_transpose(_p.name, _other))
    batch_rules[_p] = _select_batch(_p)
del _p, _other


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
      operand_: the array (or a pytree of arrays of one shape: the generic path below).
      init_value: for ``lax.add``, ``lax.max``, ``lax.min`` their identity (0, -inf /
        ``iinfo.min`` / False, inf / ``iinfo.max`` / True); any scalar otherwise.
      computation: ``lax.add``, ``lax.max`` or ``lax.min`` (a reduce_window primitive), or
        any other function of two scalars (pytrees of scalars for a pytree of operands).
      window_dimensions: window size per dimension.
      window_strides: step between windows per dimension (default 1).
      padding: ``"VALID"``, ``"SAME"``, ``"SAME_LOWER"`` or ``(low, high)`` pairs; padding
        holds the identity, so it never wins a max and adds nothing to a sum.
      base_dilation: holes inserted between operand elements (default 1: none).
      window_dilation: spacing between window elements (default 1).

    Any other ``computation``, or a pytree of operands (with a pytree of init values;
    ``computation`` then takes and returns two such pytrees of scalars, as JAX's variadic
    reduce_window), takes the generic path: each operand padded with its init value, its
    windows gathered along a new last axis and reduced with ``lax.reduce`` (the init value
    combined once per window, as XLA's CPU backend does).

    Example: ``reduce_window(x, -jnp.inf, lax.max, (2, 2), (2, 2), "VALID")`` is a 2x2 max pool.
    """
    if _generic_window(operand_, computation):
        return _generic_reduce_window(
            operand_,
            init_value,
            computation,
            window_dimensions,
            window_strides,
            padding,
            base_dilation,
            window_dilation,
        )
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


def _generic_window(operand_, computation) -> bool:
    """Whether reduce_window takes the generic path: a pytree of operands (not one array) or
    a computation that is not one of the monoids with a reduce_window primitive."""
    from fungrad import tree_util
    from fungrad.lax import elementwise

    if not tree_util.treedef_is_leaf(tree_util.tree_structure(operand_)):
        return True
    return not any(computation is getattr(elementwise, n, None) for n, _, _ in _WINDOW_MONOIDS)


def _generic_reduce_window(
    operands, init_values, computation, window_dimensions, strides, padding, base, wdil
):
    """reduce_window of any computation and any pytree of operands, as lax operations (so
    jit, grad and vmap need no rules of their own): every operand is padded with its init
    value (base dilation as interior padding), the ``prod(window_dimensions)`` strided slices
    that hold each window's elements are stacked on a new last axis, and ``lax.reduce``
    (the variadic pairwise tree) reduces that axis."""
    from fungrad import tree_util
    from fungrad.lax import slicing
    from fungrad.lax.reduce import _variadic_reduce
    from fungrad.lax.shape import broadcast_in_dim, expand_dims

    leaves, tree = tree_util.tree_flatten(operands)
    inits, init_tree = tree_util.tree_flatten(init_values)
    if tree != init_tree:
        raise ValueError(
            f"reduce_window: operands and init_values must have the same pytree structure, one "
            f"scalar init value per operand; got {tree} and {init_tree}"
        )
    xs = [operand(x, "reduce_window") for x in leaves]
    inits = [operand(i, "reduce_window init_values") for i in inits]
    # a weakly typed init value (a Python scalar) takes its operand's dtype of the same kind
    inits = [
        _elementwise.convert_element_type(i, x.dtype)
        if i.weak_type and dtypes.kind(i.dtype) == dtypes.kind(x.dtype)
        else i
        for i, x in zip(inits, xs)
    ]
    if any(i.dtype != x.dtype for i, x in zip(inits, xs)):
        raise TypeError(
            "reduce_window got inconsistent dtypes for operands and init_values: got operand "
            f"dtypes {[x.dtype.name for x in xs]} and init_value dtypes "
            f"{[i.dtype.name for i in inits]}; give each init value its operand's dtype"
        )
    shapes = {tuple(x.shape) for x in xs}
    if len(shapes) != 1:
        raise ValueError(
            f"reduce_window: all operands must have the same shape, got {sorted(shapes)}"
        )
    shape = xs[0].shape
    dims = _int_tuple("reduce_window", "window_dimensions", window_dimensions)
    ones = (1,) * len(dims)
    strides = ones if strides is None else _int_tuple("reduce_window", "window_strides", strides)
    base = ones if base is None else _int_tuple("reduce_window", "base_dilation", base)
    wdil = ones if wdil is None else _int_tuple("reduce_window", "window_dilation", wdil)
    if not len(dims) == len(strides) == len(base) == len(wdil) == len(shape):
        raise TypeError(
            f"reduce_window: window_dimensions {dims}, window_strides {strides}, "
            f"base_dilation {base} and window_dilation {wdil} need one entry per dimension "
            f"of the operand shape {tuple(shape)}"
        )
    if any(v < 1 for v in (*dims, *strides, *base, *wdil)):
        raise TypeError(
            f"reduce_window: window_dimensions {dims}, window_strides {strides}, base_dilation "
            f"{base} and window_dilation {wdil} must be positive integers"
        )
    spans = [dilate_dim(w, d) for w, d in zip(dims, wdil)]
    if isinstance(padding, str):  # (JAX pads for the undilated operand shape)
        padding = padtype_to_pads(shape, spans, strides, padding)
    padding = tuple(_int_tuple("reduce_window", "padding", p) for p in padding)
    if not dims:  # a 0-d operand: nothing to reduce (JAX returns it unchanged)
        return tree_util.tree_unflatten(tree, xs)
    dilated = [dilate_dim(n, b) for n, b in zip(shape, base)]
    out = [
        max((n + lo + hi - span) // s + 1, 0)
        for n, (lo, hi), span, s in zip(dilated, padding, spans, strides)
    ]
    config = [(lo, hi, b - 1) for (lo, hi), b in zip(padding, base)]
    if 0 in out or 0 in shape:  # no windows, or windows of padding only: the init values
        return tree_util.tree_unflatten(tree, [broadcast_in_dim(i, tuple(out), ()) for i in inits])

    def windows_of(x, fill, head):
        """``x`` padded (and base-dilated) with ``fill``, with ``head`` and then the window
        elements on a new last axis: shape ``out + (1 + prod(dims),)``."""
        p = slicing.pad(x, fill, config)
        parts = [broadcast_in_dim(head, (*out, 1), ())]
        for ks in itertools.product(*[range(w) for w in dims]):
            begin = [k * d for k, d in zip(ks, wdil)]
            limit = [b + (o - 1) * s + 1 for b, o, s in zip(begin, out, strides)]
            parts.append(expand_dims(slicing.slice(p, begin, limit, strides), (len(shape),)))
        return slicing.concatenate(parts, len(shape))

    # Padding and base-dilation holes take no part (XLA's CPU reduce_window skips them) and
    # the init value is combined once per window, also with a single element: each element
    # carries a flag, True for the init value and the operand's elements, and the combine
    # below keeps the valid side where only one is.
    values = [windows_of(x, i, i) for x, i in zip(xs, inits)]
    t = _elementwise.convert_element_type(True, np.bool_)
    f = _elementwise.convert_element_type(False, np.bool_)
    valid = windows_of(broadcast_in_dim(t, tuple(shape), ()), f, t)

    def combine(a, b):
        (av, am), (bv, bm) = a, b
        out = computation(tree_util.tree_unflatten(tree, av), tree_util.tree_unflatten(tree, bv))
        both = tree_util.tree_leaves(out)
        both_ok = _elementwise.and_(am, bm)
        picked = [
            _elementwise.select(both_ok, c, _elementwise.select(am, x, y))
            for c, x, y in zip(both, av, bv)
        ]
        return picked, _elementwise.or_(am, bm)

    result, _ = _variadic_reduce((values, valid), (list(inits), f), combine, (len(shape),))
    return tree_util.tree_unflatten(tree, result)


# -- lowering (fungrad/lowering/kernel.py): an inline reduction over each window ---------------


def _window_dims(x_shape, out_shape, params):
    """Per dimension: (operand size, window size, stride, (low, high) padding, base dilation,
    window dilation, number of windows)."""
    return list(
        zip(
            x_shape,
            params["window_dimensions"],
            params["window_strides"],
            params["padding"],
            params["base_dilation"],
            params["window_dilation"],
            out_shape,
        )
    )


def _operand_position(ctx, o, k, dim):
    """The operand index that window element ``k`` of window ``o`` reads along one dimension
    (``dim``: a row of :func:`_window_dims`), clamped into bounds, and the conditions under
    which it is an operand element rather than padding or a base-dilation hole. ``o`` and
    ``k`` are index expressions within [0, windows) and [0, window size)."""
    n, w, s, (lo, _), b, wd, m = dim
    # the position in the dilated operand (padding removed): o*s + k*wd - lo
    p = ctx.isub(ctx.iadd(ctx.imul(o, ctx.iconst(s)), ctx.imul(k, ctx.iconst(wd))), ctx.iconst(lo))
    conds = []
    if lo > 0:  # the low padding
        conds.append(ctx.op("ge", p, ctx.iconst(0)))
        p = ctx.op("max", p, ctx.iconst(0))
    if b > 1:  # the holes of the base dilation
        conds.append(ctx.op("eq", ctx.irem(p, ctx.iconst(b)), ctx.iconst(0)))
        p = ctx.idiv(p, ctx.iconst(b))
    if (m - 1) * s + (w - 1) * wd - lo > (n - 1) * b:  # the high padding
        conds.append(ctx.op("lt", p, ctx.iconst(n)))
        p = ctx.op("min", p, ctx.iconst(n - 1))
    return p, conds


def _all(ctx, conds):
    """The conjunction of boolean expressions (None when there are none)."""
    out = None
    for c in conds:
        out = c if out is None else ctx.op("and", out, c)
    return out


def _window_element(ctx, x, dims, o_idx, ks, init, acc):
    """The value window element ``ks`` of window ``o_idx`` sees: the operand element (in
    ``acc``) or ``init`` where it is padding or a hole."""
    pos, conds = [], []
    for o, k, dim in zip(o_idx, ks, dims):
        p, c = _operand_position(ctx, o, k, dim)
        pos.append(p)
        conds += c
    v = ctx.convert(x.at(pos), acc)
    inside = _all(ctx, conds)
    return v if inside is None else ctx.select(inside, v, init)


#: windows of at most this many elements are max/min-reduced (and select_and_gather_add /
#: select_and_scatter_add select) by unrolled straight-line code, which the CPU compiler
#: vectorizes; larger ones by a reduction loop (argmax/argmin to select)
UNROLL_SELECT = 16


def _reduce_window_lowering(name: str, op: str, identity):
    def rule(ctx, x, **params):
        shape = _reduce_window_shape(x.shape, **params)
        if x.ndim == 0:
            return x
        acc = _accumulation_dtype(x.dtype)
        init = ctx.const(identity(acc), acc)
        if x.size == 0:  # every window holds only padding
            return kernel.from_fn(shape, x.dtype, lambda idx: ctx.convert(init, x.dtype), name)
        dims = _window_dims(x.shape, shape, params)

        wdims = params["window_dimensions"]
        # non-overlapping windows read each operand element once, so unrolling duplicates no
        # producer work (overlapping ones keep the loop: the planner fuses producers into it)
        unroll = math.prod(wdims) <= UNROLL_SELECT and all(
            s >= dilate_dim(w, wd) for _, w, s, _, _, wd, _ in dims
        )

        def element(idx):
            def body(*ks):
                return _window_element(ctx, x, dims, idx, ks, init, acc)

            if op in ("max", "min") and unroll:
                # a pooling window: an unrolled fold (straight-line code, vectorized), the
                # binary max/min propagating NaN as the reduction does
                out = None
                for ks in itertools.product(*map(range, wdims)):
                    v = body(*map(ctx.iconst, ks))
                    out = v if out is None else ctx.op(op, out, v)
            else:
                out = ctx.reduce(op, wdims, body)
            return ctx.convert(out, x.dtype)

        return kernel.from_fn(shape, x.dtype, element, name)

    return rule


def _selected_lowering(ctx, x, dims, o_idx, select_prim, window_dimensions, payload):
    """``payload(ks, flat)`` of the selected element of window ``o_idx`` (``ks``: its window
    element indices, ``flat``: their row-major position): the first extreme, a NaN beating
    every number, padding and holes the identity (numpy's argmax/argmin). Small windows scan
    their elements in an unrolled chain of selects carrying the payload; larger ones find the
    position by an argmax/argmin reduction and evaluate the payload there."""
    acc = _accumulation_dtype(x.dtype)
    init = ctx.const(_select_identity(select_prim, acc), acc)
    if math.prod(window_dimensions) > UNROLL_SELECT:
        op = "argmax" if select_prim is _elementwise.ge_p else "argmin"
        flat = ctx.reduce(
            op, window_dimensions, lambda *ks: _window_element(ctx, x, dims, o_idx, ks, init, acc)
        )
        return payload(ctx.unflatten(flat, window_dimensions), flat)
    cmp = "gt" if select_prim is _elementwise.ge_p else "lt"
    best = chosen = None
    for flat, ks in enumerate(itertools.product(*map(range, window_dimensions))):
        ks = [ctx.iconst(k) for k in ks]
        v = _window_element(ctx, x, dims, o_idx, ks, init, acc)
        here = payload(ks, ctx.iconst(flat))
        if best is None:
            best, chosen = v, here
            continue
        take = ctx.op(cmp, v, best)
        if dtypes.kind(acc) == "f":  # a NaN replaces a number
            nan_first = ctx.op("and", ctx.op("isnan", v), ctx.op("not", ctx.op("isnan", best)))
            take = ctx.op("or", take, nan_first)
        best, chosen = ctx.select(take, v, best), ctx.select(take, here, chosen)
    return chosen


def _select_and_gather_add_lowering(ctx, t, x, *, select_prim, **params):
    """Per window: the tangent at its selected element (0 where that is padding or a hole),
    carried along the selection scan (or loaded at the argmax/argmin position)."""
    shape = _reduce_window_shape(x.shape, **params)
    if x.ndim == 0:
        return t
    zero = ctx.const(0, t.dtype)
    if x.size == 0 or 0 in shape:  # every window holds only padding (or there are none)
        return kernel.from_fn(shape, t.dtype, lambda idx: zero, "select_and_gather_add")
    dims = _window_dims(x.shape, shape, params)

    def element(idx):
        def tangent(ks, flat):
            pos, conds = [], []
            for o, k, dim in zip(idx, ks, dims):
                p, c = _operand_position(ctx, o, k, dim)
                pos.append(p)
                conds += c
            inside = _all(ctx, conds)
            v = t.at(pos)
            return v if inside is None else ctx.select(inside, v, zero)

        return _selected_lowering(
            ctx, x, dims, idx, select_prim, params["window_dimensions"], tangent
        )

    return kernel.from_fn(shape, t.dtype, element, "select_and_gather_add")


def _candidate_window(ctx, i, c, dim):
    """Along one dimension, the ``c``-th last window that can hold operand element ``i``:
    (window index clamped into [0, windows), window element index clamped into the window,
    the conditions under which the window holds ``i`` at that element). ``c`` runs over
    ``ceil(window span / stride)`` candidates."""
    n, w, s, (lo, _), b, wd, m = dim
    q = ctx.iadd(ctx.imul(i, ctx.iconst(b)), ctx.iconst(lo))  # i's padded position
    conds = []
    if lo < 0:  # cropped: no window holds the first elements
        conds.append(ctx.op("ge", q, ctx.iconst(0)))
        q = ctx.op("max", q, ctx.iconst(0))
    o = ctx.isub(ctx.idiv(q, ctx.iconst(s)), ctx.iconst(c))
    r = ctx.iadd(ctx.irem(q, ctx.iconst(s)), ctx.iconst(c * s))  # q - o*s, in [c*s, c*s + s)
    if c > 0:  # windows before the first
        conds.append(ctx.op("ge", o, ctx.iconst(0)))
        o = ctx.op("max", o, ctx.iconst(0))
    if max((n - 1) * b + lo, 0) // s - c > m - 1:  # windows after the last
        conds.append(ctx.op("lt", o, ctx.iconst(m)))
        o = ctx.op("min", o, ctx.iconst(m - 1))
    if wd > 1:  # between the window's dilated elements
        conds.append(ctx.op("eq", ctx.irem(r, ctx.iconst(wd)), ctx.iconst(0)))
    k = ctx.idiv(r, ctx.iconst(wd))
    if c * s + s - 1 > (w - 1) * wd:  # past the window's last element
        conds.append(ctx.op("lt", k, ctx.iconst(w)))
        k = ctx.op("min", k, ctx.iconst(w - 1))
    return o, k, conds


def _select_and_scatter_add_lowering(ctx, ct, x, *, select_prim, **params):
    """In gather form: each operand element sums the cotangents of the windows that hold it
    and select it, ``prod(ceil(window span / stride))`` candidate windows (one for pooling with
    stride >= window), each window's selection recomputed by an argmax/argmin over the operand
    (no scatter, no transposed copies). Candidates are visited in row-major window order."""
    shape = _reduce_window_shape(x.shape, **params)
    if x.ndim == 0:
        return ct
    zero = ctx.const(0, ct.dtype)
    if x.size == 0 or 0 in shape:  # no window holds an element
        return kernel.from_fn(x.shape, ct.dtype, lambda idx: zero, "select_and_scatter_add")
    dims = _window_dims(x.shape, shape, params)
    wdims = params["window_dimensions"]
    counts = [-(-dilate_dim(w, wd) // s) for _, w, s, _, _, wd, _ in dims]

    def element(idx):
        total = None
        for cs in itertools.product(*(range(n - 1, -1, -1) for n in counts)):
            o_idx, ks, conds = [], [], []
            for i, c, dim in zip(idx, cs, dims):
                o, k, cond = _candidate_window(ctx, i, c, dim)
                o_idx.append(o)
                ks.append(k)
                conds += cond
            flat = _selected_lowering(ctx, x, dims, o_idx, select_prim, wdims, lambda _, flat: flat)
            conds.append(ctx.op("eq", flat, ctx.flat_index(ks, wdims)))
            v = ctx.select(_all(ctx, conds), ct.at(o_idx), zero)
            total = v if total is None else ctx.op("add", total, v)
        return total

    # stored once: its consumers (a convolution's bias, weight and input gradients) would each
    # recompute every window's selection, in their own loop orders
    return ctx.materialize(kernel.from_fn(x.shape, ct.dtype, element, "select_and_scatter_add"))


for _p, _op, _identity in (
    (reduce_window_sum_p, "add", _zero),
    (reduce_window_max_p, "max", max_identity),
    (reduce_window_min_p, "min", min_identity),
):
    kernel.register_lowering(_p, _reduce_window_lowering(_p.name, _op, _identity))
del _p, _op, _identity
kernel.register_lowering(select_and_gather_add_p, _select_and_gather_add_lowering)
kernel.register_lowering(select_and_scatter_add_p, _select_and_scatter_add_lowering)
