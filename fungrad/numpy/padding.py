"""fungrad.numpy ``pad``, in every NumPy mode but ``median`` and callables: ``constant``,
``edge``, ``wrap``, ``reflect``/``symmetric`` (even or odd), ``linear_ramp``,
``maximum``/``minimum``/``mean`` (with ``stat_length``) and ``empty`` (zeros here).

Each mode is written on lax shape ops: ``constant`` pads with ``lax.pad``; the others build
the padding of each axis from static slices of the array (``slice``, ``rev``,
``broadcast_in_dim``, a reduction for the statistic modes) and join them with
``concatenate``. Pad widths, ``stat_length`` and ``end_values`` must be concrete.
"""

from __future__ import annotations

import numpy as np

from fungrad import dtypes, lax
from fungrad.numpy import creation, reductions, ufuncs, util
from fungrad.numpy.manipulation import _arr, _broadcast_along, _slice_axis

__all__ = ["pad"]


_PAD_MODES = {
    "constant": ("constant_values",),
    "empty": (),
    "edge": (),
    "wrap": (),
    "linear_ramp": ("end_values",),
    "maximum": ("stat_length",),
    "minimum": ("stat_length",),
    "mean": ("stat_length",),
    "reflect": ("reflect_type",),
    "symmetric": ("reflect_type",),
}


def _concrete_tree(v, context: str):
    if isinstance(v, (tuple, list)):
        return [_concrete_tree(e, context) for e in v]
    return util.concrete_or_error(v, context)


def _pad_pairs(values, nd: int, name: str, integral: bool):
    """NumPy's pad-width forms (scalar, (n,), (before, after), ((b, a),)*nd) as nd pairs."""
    try:
        arr = np.asarray(_concrete_tree(values, f"the {name} argument of pad"))
    except ValueError:
        raise TypeError(
            f"pad: {name} entries must all have the same shape, got {values!r}"
        ) from None
    if integral and arr.size and dtypes.kind(arr.dtype) not in "iu":
        raise TypeError(f"pad: {name} must be integers, got {values!r}")
    if arr.shape == (nd, 2) or (nd == 0 and arr.size == 0):
        pairs = arr.reshape(nd, 2)
    elif arr.shape in ((1, 2), (2,)):
        pairs = np.broadcast_to(arr.reshape(1, 2), (nd, 2))
    elif arr.shape in ((), (1,)):
        pairs = np.broadcast_to(arr.reshape(1, 1), (nd, 2))
    else:
        raise ValueError(
            f"pad: {name} of shape {arr.shape} is not valid for a {nd}-D array; "
            f"valid shapes are ({nd}, 2), (1, 2), (2,), (1,) and ()"
        )
    if integral:
        return [(int(b), int(a)) for b, a in pairs]
    return [(b, a) for b, a in pairs]


def pad(array, pad_width, mode: str = "constant", **kwargs):
    """``array`` padded by ``pad_width`` (int, (before, after) or one pair per axis).

    Modes follow NumPy: ``constant`` (``constant_values``, default 0), ``edge``, ``wrap``,
    ``reflect`` / ``symmetric`` (``reflect_type`` "even" or "odd"), ``linear_ramp``
    (``end_values``), ``maximum`` / ``minimum`` / ``mean`` (``stat_length``) and ``empty``
    (zeros here). Median and callable modes are not supported.

    Example:
        >>> fnp.pad(fnp.array([1, 2, 3]), (1, 2), mode="reflect")
        Array([2, 1, 2, 3, 2, 1], dtype=int32)
    """
    x = _arr(array, "pad", "array")
    if not isinstance(mode, str) or mode not in _PAD_MODES:
        raise ValueError(
            f"pad: unsupported mode {mode!r}; supported modes are " + ", ".join(_PAD_MODES)
        )
    unknown = set(kwargs) - set(_PAD_MODES[mode])
    if unknown:
        raise ValueError(f"pad: unsupported keyword arguments for mode {mode!r}: {sorted(unknown)}")
    widths = _pad_pairs(pad_width, x.ndim, "pad_width", integral=True)
    if any(b < 0 or a < 0 for b, a in widths):
        raise ValueError(f"pad: pad_width must be non-negative, got {pad_width!r}")
    if x.ndim == 0:
        return x
    if mode == "constant":
        return _pad_constant(x, widths, kwargs.get("constant_values", 0))
    if mode == "empty":
        return _pad_constant(x, widths, 0)
    if mode in ("edge", "wrap", "reflect", "symmetric", "linear_ramp"):
        for i, (b, a) in enumerate(widths):
            if x.shape[i] == 0 and (b or a):
                raise ValueError(f"pad: cannot apply {mode!r} padding to axis {i} of size 0")
    if mode == "edge":
        return _pad_edge(x, widths)
    if mode == "wrap":
        return _pad_wrap(x, widths)
    if mode in ("reflect", "symmetric"):
        reflect_type = kwargs.get("reflect_type", "even")
        if reflect_type not in ("even", "odd"):
            raise ValueError(f"pad: reflect_type must be 'even' or 'odd', got {reflect_type!r}")
        return _pad_reflect(x, widths, mode, reflect_type)
    if mode == "linear_ramp":
        ends = _pad_pairs(kwargs.get("end_values", 0), x.ndim, "end_values", integral=False)
        return _pad_linear_ramp(x, widths, ends)
    stat_length = kwargs.get("stat_length")
    if stat_length is not None:
        stat_length = _pad_pairs(stat_length, x.ndim, "stat_length", integral=True)
    return _pad_stats(x, widths, stat_length, mode)


def _pad_constant(x, widths, constant_values):
    if not isinstance(constant_values, (tuple, list)):
        util.check_arraylike("pad", constant_values, names=["constant_values"])
    cv = lax.convert_element_type(
        util.asarray(constant_values, fun_name="pad"), x.dtype, x.weak_type
    )
    if cv.ndim == 1 and cv.shape[0] == 1:
        cv = lax.reshape(cv, ())
    if cv.ndim == 0:
        return lax.pad(x, cv, tuple((b, a, 0) for b, a in widths))
    if cv.ndim > 2 or cv.shape[-1] != 2 or (cv.ndim == 2 and cv.shape[0] not in (1, x.ndim)):
        raise ValueError(
            f"pad: constant_values of shape {tuple(cv.shape)} is not valid for a "
            f"{x.ndim}-D array; give a scalar, (before, after) or one pair per axis"
        )
    cv = lax.broadcast_in_dim(lax.reshape(cv, (cv.size // 2, 2)), (x.ndim, 2), (0, 1))
    for i, (b, a) in enumerate(widths):
        for j, w in enumerate((b, a)):
            if w:
                val = lax.reshape(lax.slice(cv, (i, j), (i + 1, j + 1)), ())
                config = [(0, 0, 0)] * x.ndim
                config[i] = (w, 0, 0) if j == 0 else (0, w, 0)
                x = lax.pad(x, val, tuple(config))
    return x


def _pad_edge(x, widths):
    for i, (b, a) in enumerate(widths):
        n = x.shape[i]
        if n == 0 or not (b or a):
            continue
        x = lax.concatenate(
            [
                _broadcast_along(_slice_axis(x, 0, 1, i), i, b),
                x,
                _broadcast_along(_slice_axis(x, n - 1, n, i), i, a),
            ],
            i,
        )
    return x


def _pad_wrap(x, widths):
    for i, (b, a) in enumerate(widths):
        n = x.shape[i]
        if n == 0 or not (b or a):
            continue
        left_reps, left_rem = divmod(b, n)
        right_reps, right_rem = divmod(a, n)
        parts = [_slice_axis(x, n - left_rem, n, i)] if left_rem else []
        parts += [x] * (left_reps + right_reps + 1)
        parts += [_slice_axis(x, 0, right_rem, i)] if right_rem else []
        x = lax.concatenate(parts, i)
    return x


def _pad_reflect(x, widths, mode: str, reflect_type: str):
    # NumPy's algorithm: reflect repeatedly, each round adding at most (size - offset) values.
    for i, (b, a) in enumerate(widths):
        n = x.shape[i]
        if n == 0 or not (b or a):
            continue
        offset = 1 if (mode == "reflect" and n > 1) else 0
        for before, width in ((True, b), (False, a)):
            edge = (
                _slice_axis(x, 0, 1, i) if before else _slice_axis(x, x.shape[i] - 1, x.shape[i], i)
            )
            while width > 0:
                cur = min(width, n - offset)
                width -= cur
                size_i = x.shape[i]
                if before:
                    start, stop = offset, offset + cur
                else:
                    stop = size_i if (mode == "symmetric" or n == 1) else size_i - 1
                    start = stop - cur
                part = lax.rev(_slice_axis(x, start, stop, i), (i,))
                if reflect_type == "odd":
                    part = lax.sub(lax.mul(_broadcast_along(edge, i, cur), 2), part)
                    if n > 1:
                        edge = (
                            _slice_axis(part, 0, 1, i)
                            if before
                            else _slice_axis(part, cur - 1, cur, i)
                        )
                x = lax.concatenate([part, x] if before else [x, part], i)
    return x


def _pad_linear_ramp(x, widths, ends):
    for i, (b, a) in enumerate(widths):
        n = x.shape[i]
        parts = []
        for before, width, end in ((True, b, ends[i][0]), (False, a, ends[i][1])):
            edge = _slice_axis(x, 0, 1, i) if before else _slice_axis(x, n - 1, n, i)
            ramp = creation.linspace(
                end, lax.squeeze(edge, (i,)), width, endpoint=False, dtype=x.dtype, axis=i
            )
            ramp = lax.convert_element_type(ramp, x.dtype, x.weak_type)
            parts.append(ramp if before else lax.rev(ramp, (i,)))
        x = lax.concatenate([parts[0], x, parts[1]], i)
    return x


def _pad_stats(x, widths, stat_length, mode: str):
    stat = {"maximum": reductions.max, "minimum": reductions.min, "mean": reductions.mean}[mode]
    for i, (b, a) in enumerate(widths):
        n = x.shape[i]
        if not (b or a):
            continue
        if n == 0:
            raise ValueError(f"pad: cannot apply {mode!r} padding to axis {i} of size 0")
        if stat_length is None:
            lo = hi = stat(x, axis=i, keepdims=True)
        else:
            len_b, len_a = stat_length[i]
            if len_b == 0 or len_a == 0:
                raise ValueError("pad: stat_length of 0 yields no value for padding")
            lo = stat(_slice_axis(x, 0, min(len_b, n), i), axis=i, keepdims=True)
            hi = stat(_slice_axis(x, n - min(len_a, n), n, i), axis=i, keepdims=True)
        if not dtypes.is_float(x.dtype) and dtypes.is_float(lo.dtype):
            lo, hi = ufuncs.round(lo), ufuncs.round(hi)  # NumPy rounds half to even too
        lo = lax.convert_element_type(lo, x.dtype, x.weak_type)
        hi = lax.convert_element_type(hi, x.dtype, x.weak_type)
        x = lax.concatenate([_broadcast_along(lo, i, b), x, _broadcast_along(hi, i, a)], i)
    return x
