"""Elementwise primitives: arithmetic, transcendental, comparison, bitwise, select, convert.

Each primitive is defined once here with all of its rules beside it (impl and abstract_eval
now; jvp, transpose and batching rules join them with the transforms).
"""

from __future__ import annotations

import numpy as np

from fungrad import dtypes
from fungrad.core import ShapedArray
from fungrad.lax.utils import (
    ANY, FLOAT, NUMERIC, check_kinds, operand, operands_same_dtype, standard_naryop,
    standard_primitive)

__all__ = ["add", "sub", "mul", "neg", "sin", "exp", "convert_element_type",
           "add_p", "sub_p", "mul_p", "neg_p", "sin_p", "exp_p", "convert_element_type_p"]

# -- arithmetic -----------------------------------------------------------------------------

add_p = standard_naryop("add", np.add, NUMERIC)


def add(x, y):
    """Elementwise ``x + y`` (operands of one dtype; Python scalars take it weakly)."""
    return add_p.bind(*operands_same_dtype("add", x, y))


sub_p = standard_naryop("sub", np.subtract, NUMERIC)


def sub(x, y):
    """Elementwise ``x - y``."""
    return sub_p.bind(*operands_same_dtype("sub", x, y))


mul_p = standard_naryop("mul", np.multiply, NUMERIC)


def mul(x, y):
    """Elementwise ``x * y``."""
    return mul_p.bind(*operands_same_dtype("mul", x, y))


neg_p = standard_naryop("neg", np.negative, NUMERIC)


def neg(x):
    """Elementwise ``-x``."""
    return neg_p.bind(operand(x, "neg"))


# -- transcendental ---------------------------------------------------------------------------

sin_p = standard_naryop("sin", np.sin, FLOAT)


def sin(x):
    """Elementwise sine."""
    return sin_p.bind(operand(x, "sin"))


exp_p = standard_naryop("exp", np.exp, FLOAT)


def exp(x):
    """Elementwise natural exponential."""
    return exp_p.bind(operand(x, "exp"))


# -- conversion -------------------------------------------------------------------------------

def _convert_element_type_impl(x, *, new_dtype, weak_type):
    with np.errstate(all="ignore"):
        if x.dtype.kind == "f" and new_dtype.kind in "iu":
            # Saturating float -> int with NaN -> 0, as XLA does (numpy's cast is undefined).
            info = np.iinfo(new_dtype)
            x = np.where(np.isnan(x), 0, np.clip(x, info.min, info.max))
            x = np.trunc(x)
            out = np.where(x >= info.max, info.max, x).astype(new_dtype)
            return np.asarray(out)[()]
        return np.asarray(x).astype(new_dtype)[()]


def _convert_element_type_abstract_eval(x, *, new_dtype, weak_type):
    check_kinds("convert_element_type", x.dtype, ANY)
    check_kinds("convert_element_type", new_dtype, ANY, "new_dtype")
    return ShapedArray(x.shape, new_dtype, weak_type)


convert_element_type_p = standard_primitive(
    "convert_element_type", _convert_element_type_impl, _convert_element_type_abstract_eval)


def convert_element_type(operand_, new_dtype, weak_type: bool = False):
    """Cast to ``new_dtype`` (canonicalised). Float -> int truncates toward zero, saturates at
    the integer range and maps NaN to 0; bool -> 0/1; nonzero -> True."""
    x = operand(operand_, "convert_element_type")
    new_dtype = dtypes.canonicalize_dtype(new_dtype)
    if x.dtype == new_dtype and getattr(x, "weak_type", False) == weak_type:
        return x
    return convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=bool(weak_type))
