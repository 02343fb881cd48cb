"""Helpers the primitive families use to define primitives and their public wrappers.

A primitive is defined once, in its family module, with all its rules beside it::

    sin_p = standard_unop("sin", np.sin, FLOAT)      # impl + abstract_eval
    def sin(x):
        '''Elementwise sine.'''
        return sin_p.bind(operand(x))

Elementwise primitives accept operands of one dtype whose shapes are equal, except that 0-d
operands broadcast (so ``mul b 2.0:f32[]`` is a valid equation). fungrad.numpy does the
general broadcasting with ``broadcast_in_dim`` before it binds.
"""

from __future__ import annotations

import numpy as np

from fungrad import core, dtypes
from fungrad.array import Array
from fungrad.core import ShapedArray
from fungrad.impls import (
    ignore_fp_errors,
    specialized_impls,  # noqa: F401  (lax/dot.py imports it from here)
)
from fungrad.operands import operand
from fungrad.operands import scalar as _scalar

# dtype kind sets an operation accepts
FLOAT = frozenset("f")
COMPLEX = frozenset("c")
INEXACT = frozenset("fc")
INT = frozenset("iu")
SIGNED = frozenset("i")
BOOL = frozenset("b")
NUMERIC = frozenset("iuf")
NUMERIC_OR_COMPLEX = frozenset("iufc")
ANY = frozenset("biuf")
ANY_OR_COMPLEX = frozenset("biufc")
INT_OR_BOOL = frozenset("biu")

_KIND_NAMES = {
    "b": "bool",
    "i": "signed integer",
    "u": "unsigned integer",
    "f": "floating",
    "c": "complex",
}


def describe_kinds(kinds) -> str:
    return ", ".join(_KIND_NAMES[k] for k in "biufc" if k in kinds)


def check_kinds(name: str, dtype: np.dtype, kinds, what: str = "operand") -> None:
    if dtypes.kind(dtype) not in kinds:
        hint = ""
        if dtypes.kind(dtype) == "c" and "f" in kinds:
            hint = (
                " (complex numbers are not supported here: apply it to lax.real(x), "
                "lax.imag(x) or lax.abs(x))"
            )
        raise TypeError(
            f"{name} does not accept dtype {dtype.name} for its {what}; accepted "
            f"dtypes are {describe_kinds(kinds)}{hint}"
        )


# -- converting wrapper arguments ---------------------------------------------------------------


def full_like_scalar(x, ref, weak: bool = True):
    """The Python scalar ``x`` as a 0-d Array of ``ref``'s dtype (weak by default)."""
    dt = ref.dtype
    return Array(_scalar(x, dt), weak)


def operands_same_dtype(name: str, *args):
    """Convert args for an n-ary lax op whose operands must share one dtype. Python scalars take
    the dtype of the array operands (weakly), as lax does; arrays must already agree."""
    for a in args:
        if type(a) is not Array and not isinstance(a, core.Tracer):
            break
    else:  # only arrays and tracers (the common case): nothing to convert
        return list(args)
    ref = next((a for a in args if not _is_python_scalar(a)), None)
    if ref is None:  # only Python scalars: JAX promotes them among themselves
        dt, weak = dtypes.result_type(*args, return_weak_type_flag=True)
        return [Array(_scalar(a, dt), weak) for a in args]
    ref = operand(ref, name)
    out = []
    for a in args:
        if _is_python_scalar(a):
            if isinstance(a, complex) and dtypes.kind(ref.dtype) != "c":
                raise TypeError(
                    f"{name} requires arguments to have the same dtypes, got "
                    f"{ref.dtype.name} and a Python complex {a} (complex64); lax does not "
                    "promote: make the other operand complex (lax.complex, or "
                    "convert_element_type), or use fungrad.numpy for type promotion"
                )
            out.append(full_like_scalar(a, ref))
        else:
            out.append(operand(a, name))
    return out


def _is_python_scalar(x) -> bool:
    return isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic)


# -- defining primitives -------------------------------------------------------------------------


def standard_primitive(name: str, impl, abstract_eval, *, multiple_results: bool = False):
    p = core.Primitive(name, multiple_results=multiple_results)
    p.impl = impl
    p.abstract_eval = abstract_eval
    return p


def broadcasting_shape(name: str, *avals: ShapedArray) -> tuple[int, ...]:
    """The common shape of elementwise operands: equal shapes, with 0-d operands broadcast."""
    shapes = {a.shape for a in avals if a.shape}
    if len(shapes) > 1:
        raise TypeError(
            f"{name}: incompatible shapes for an elementwise operation: "
            + ", ".join(str(a.shape) for a in avals)
            + " (lax ops need equal shapes; use fungrad.numpy for broadcasting)"
        )
    return shapes.pop() if shapes else ()


def naryop_abstract_eval(name: str, kinds, result_dtype=None):
    """abstract_eval for an elementwise op whose operands share one dtype of ``kinds``.
    ``result_dtype`` (a dtype) overrides the output dtype, e.g. bool for comparisons."""

    def abstract_eval(*avals, **params):
        dt = avals[0].dtype
        for a in avals:
            if a.dtype != dt:
                raise TypeError(
                    f"{name} requires arguments to have the same dtypes, got "
                    + ", ".join(a.dtype.name for a in avals)
                )
        check_kinds(name, dt, kinds)
        shape = broadcasting_shape(name, *avals)
        weak = all(a.weak_type for a in avals)  # also for comparisons: JAX's weak bool
        return ShapedArray(shape, dt if result_dtype is None else result_dtype, weak)

    return abstract_eval


def _out_dtype_impl(fn):
    """Wrap a numpy elementwise function so it returns its first operand's dtype (numpy may
    upcast 0-d or mixed inputs) and never emits floating-point warnings."""

    @ignore_fp_errors
    def impl(*args, **params):
        out = fn(*args, **params)
        dt = args[0].dtype
        return out if out.dtype == dt else out.astype(dt)

    impl.__name__ = getattr(fn, "__name__", "impl")
    return impl


def standard_naryop(name: str, numpy_fn, kinds, result_dtype=None):
    """An elementwise primitive computed by ``numpy_fn`` on operands of one dtype."""
    if result_dtype is None:
        impl = _out_dtype_impl(numpy_fn)
    else:

        @ignore_fp_errors
        def impl(*args, **params):
            return np.asarray(numpy_fn(*args, **params), dtype=result_dtype)[()]

    return standard_primitive(name, impl, naryop_abstract_eval(name, kinds, result_dtype))


standard_unop = standard_naryop
standard_binop = standard_naryop
