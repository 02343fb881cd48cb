"""Argument normalisation shared by the layers (tuples per spatial dim, padding, dtypes)."""

from __future__ import annotations

import operator

import numpy as np

from fungrad import dtypes


def default_float(dtype) -> np.dtype:
    """``dtype`` as a numpy dtype, or the default float dtype (float32; float64 with x64)."""
    return np.dtype(dtype) if dtype is not None else dtypes.default_float_dtype()


def ntuple(layer: str, what: str, value, n: int) -> tuple[int, ...]:
    """An int (used for every spatial dim) or ``n`` ints, as a tuple of ``n`` positive ints."""
    if isinstance(value, (int, np.integer)):
        out = (operator.index(value),) * n
    else:
        try:
            out = tuple(operator.index(v) for v in value)
        except TypeError:
            raise TypeError(
                f"{layer}: {what} must be an int or a sequence of {n} ints, got {value!r}"
            ) from None
        if len(out) != n:
            raise ValueError(
                f"{layer}: {what} needs {n} values (one per spatial dim), got {value!r}"
            )
    if any(v < 1 for v in out):
        raise ValueError(f"{layer}: {what} must be positive, got {value!r}")
    return out


def padding_arg(layer: str, padding, n: int):
    """``"SAME"``/``"SAME_LOWER"``/``"VALID"`` (kept as a string), an int, ``n`` ints or ``n``
    ``(low, high)`` pairs, as a string or a tuple of ``n`` int pairs."""
    if isinstance(padding, str):
        p = padding.upper()
        if p not in ("SAME", "SAME_LOWER", "VALID"):
            raise ValueError(
                f"{layer}: padding must be 'SAME', 'SAME_LOWER', 'VALID', an int, {n} ints "
                f"or {n} (low, high) pairs, got {padding!r}"
            )
        return p
    if isinstance(padding, (int, np.integer)):
        return ((operator.index(padding),) * 2,) * n
    try:
        items = list(padding)
        if len(items) != n:
            raise ValueError
        out = tuple(
            (operator.index(p),) * 2
            if isinstance(p, (int, np.integer))
            else tuple(operator.index(q) for q in p)
            for p in items
        )
        if any(len(p) != 2 for p in out):
            raise ValueError
    except (TypeError, ValueError):
        raise ValueError(
            f"{layer}: padding must be 'SAME', 'SAME_LOWER', 'VALID', an int, {n} ints or "
            f"{n} (low, high) pairs, got {padding!r}"
        ) from None
    return out


def check_floating(layer: str, dtype) -> np.dtype:
    dtype = np.dtype(dtype)
    if not np.issubdtype(dtype, np.inexact):
        raise TypeError(f"{layer}: parameters need a floating dtype, got {dtype}")
    return dtype
