"""hypothesis strategies for fungrad programs: shapes, broadcastable shapes, arrays (optionally
kept away from kinks such as 0 for abs/relu), pytrees of arrays.

Requires hypothesis (the ``test`` extra); fungrad itself does not import this module.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

FLOAT_DTYPES = (np.float32,)
COMPLEX_DTYPES = (np.complex64,)
INT_DTYPES = (np.int32, np.uint32)


def shapes(min_dims: int = 0, max_dims: int = 3, min_side: int = 0, max_side: int = 4):
    """Array shapes, 0-d and size-0 included by default."""
    return hnp.array_shapes(
        min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side
    )


def broadcastable_shapes(
    num_shapes: int = 2, min_dims: int = 0, max_dims: int = 3, max_side: int = 4
):
    """Tuples of ``num_shapes`` shapes that broadcast together."""
    return hnp.mutually_broadcastable_shapes(
        num_shapes=num_shapes, min_dims=min_dims, max_dims=max_dims, max_side=max_side
    ).map(lambda bs: bs.input_shapes)


def arrays(
    dtype=np.float32,
    shape=None,
    *,
    min_value=-10.0,
    max_value=10.0,
    allow_nan: bool = False,
    allow_infinity: bool = False,
    avoid=(),
    margin=1e-2,
):
    """numpy arrays of ``dtype`` (and ``shape``, or any from :func:`shapes`). Complex arrays
    draw their real and imaginary parts from ``[-b, b]``, ``b = max(|min_value|, |max_value|)``.

    ``avoid``: points (kinks, poles) the values keep at least ``margin`` away from, so finite
    differences are meaningful (``avoid=(0.0,)`` for abs, relu, sqrt...).
    """
    dtype = np.dtype(dtype)
    shape = shapes() if shape is None else shape
    if dtype.kind == "f":
        elems = st.floats(
            min_value,
            max_value,
            allow_nan=allow_nan,
            allow_infinity=allow_infinity,
            width=8 * dtype.itemsize,
        )
        if avoid:
            elems = elems.filter(lambda v: all(abs(v - a) >= margin for a in avoid))
    elif dtype.kind == "c":  # |real|, |imag| <= max(|min_value|, |max_value|)
        bound = max(abs(min_value), abs(max_value))
        part = st.floats(
            -bound,
            bound,
            allow_nan=allow_nan,
            allow_infinity=allow_infinity,
            width=4 * dtype.itemsize,
        )
        elems = st.builds(complex, part, part)
        if avoid:
            elems = elems.filter(lambda v: all(abs(v - a) >= margin for a in avoid))
    elif dtype.kind == "b":
        elems = st.booleans()
    else:
        info = np.iinfo(dtype)
        elems = st.integers(max(int(min_value), int(info.min)), min(int(max_value), int(info.max)))
    return hnp.arrays(dtype, shape, elements=elems)


def pytrees(leaves=None, max_leaves: int = 4):
    """Pytrees (tuples, lists, dicts) of arrays from ``leaves`` (default: float32 arrays)."""
    leaves = arrays() if leaves is None else leaves
    return st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, min_size=1, max_size=3),
            st.lists(children, min_size=1, max_size=3).map(tuple),
            st.dictionaries(st.sampled_from("abcde"), children, min_size=1, max_size=3),
        ),
        max_leaves=max_leaves,
    )
