"""The complex-number primitives: ``real``, ``imag``, ``conj`` and ``complex``.

They move values between a complex dtype and its real dtype of the same precision
(complex64 <-> float32, complex128 <-> float64). All four are linear (over the reals), so
their jvp applies the primitive to the tangent, and each has a transpose (JAX's rules):

* ``real(x)``: the cotangent ``t`` goes back as ``complex(t, 0)``;
* ``imag(x)``: as ``complex(0, -t)`` (``imag(z) = real(-i z)``, and ``-i``'s adjoint is ``i``:
  the conjugate convention JAX's reverse mode uses for complex values);
* ``complex(x, y)``: ``t`` goes back as ``(real(t), -imag(t))``;
* ``conj(x)``: as ``conj(t)``, or ``real(t)`` when ``x`` was real (``conj`` of a float is the
  complex number with that real part, as in JAX; its ``input_dtype`` parameter records
  which).

Weak types pass through: ``real(1+2j)`` is a weak float32, ``conj(1.0)`` a weak complex64.
The compilers have no complex values: complex programs are rewritten into pairs of real values
before lowering, so these primitives register no kernel lowering of their own.
"""

from __future__ import annotations

import numpy as np

from fungrad import dtypes
from fungrad.core import ShapedArray
from fungrad.lax.utils import (
    broadcasting_shape,
    full_like_scalar,
    ignore_fp_errors,
    operand,
    operands_same_dtype,
    standard_primitive,
)
from fungrad.transforms.jvp import deflinear
from fungrad.transforms.transpose import deflinear_transpose, is_undefined_primal
from fungrad.transforms.vmap import defbroadcasting, defvectorized

__all__ = ["real", "imag", "conj", "complex", "real_p", "imag_p", "conj_p", "complex_p"]


def _require(name: str, dtype: np.dtype, kinds: str, accepted: str) -> None:
    if dtypes.kind(dtype) not in kinds:
        raise TypeError(
            f"{name} does not accept dtype {dtype.name}; accepted dtypes are {accepted}"
            + (
                " (a real value is its own real part: use it as it is, or "
                "lax.complex(x, 0) to make it complex)"
                if kinds == "c"
                else ""
            )
        )


# -- real, imag ---------------------------------------------------------------------------------


def _part_abstract_eval(name: str):
    def abstract_eval(x):
        _require(name, x.dtype, "c", "complex64, complex128")
        return ShapedArray(x.shape, dtypes.real_dtype(x.dtype), x.weak_type)

    return abstract_eval


def _part_impl(fn):
    def impl(x):
        return np.array(fn(x))[()]  # a copy, not a view into x

    impl.__name__ = fn.__name__
    return impl


real_p = standard_primitive("real", _part_impl(np.real), _part_abstract_eval("real"))
imag_p = standard_primitive("imag", _part_impl(np.imag), _part_abstract_eval("imag"))


def real(x):
    """Elementwise real part of a complex array (float32 for complex64, float64 for
    complex128)."""
    return real_p.bind(operand(x, "real"))


def imag(x):
    """Elementwise imaginary part of a complex array (float32 for complex64, float64 for
    complex128)."""
    return imag_p.bind(operand(x, "imag"))


def _real_transpose(ct, x):
    return [complex_p.bind(ct, full_like_scalar(0, ct))]


def _imag_transpose(ct, x):
    from fungrad.lax.elementwise import neg

    return [complex_p.bind(full_like_scalar(0, ct), neg(ct))]


# -- conj ---------------------------------------------------------------------------------------


@ignore_fp_errors
def _conj_impl(x, *, input_dtype):
    return np.asarray(np.conj(x), dtypes.complex_dtype(x.dtype))[()]


def _conj_abstract_eval(x, *, input_dtype):
    if x.dtype == dtypes.float16:
        raise TypeError(
            "conj does not accept dtype float16; accepted dtypes are float32, float64, "
            "complex64, complex128 (convert with lax.convert_element_type first)"
        )
    _require("conj", x.dtype, "fc", "float32, float64, complex64, complex128")
    return ShapedArray(x.shape, dtypes.complex_dtype(x.dtype), x.weak_type)


conj_p = standard_primitive("conj", _conj_impl, _conj_abstract_eval)


def conj(x):
    """Elementwise complex conjugate. A real operand (float32 or float64) gives the complex
    number with that real part (complex64 or complex128), as in JAX."""
    x = operand(x, "conj")
    return conj_p.bind(x, input_dtype=x.dtype)


def _conj_transpose(ct, x, *, input_dtype):
    if dtypes.is_complex(input_dtype):
        return [conj_p.bind(ct, input_dtype=ct.dtype)]
    return [real_p.bind(ct)]


# -- complex ------------------------------------------------------------------------------------


@ignore_fp_errors
def _complex_impl(x, y):
    out_dtype = dtypes.complex_dtype(x.dtype)
    shape = np.broadcast_shapes(np.shape(x), np.shape(y))
    out = np.empty(shape, out_dtype)
    out.real = x
    out.imag = y
    return out[()]


def _complex_abstract_eval(x, y):
    for i, a in enumerate((x, y)):
        if a.dtype not in (dtypes.float32, dtypes.float64):
            raise TypeError(
                f"complex does not accept dtype {a.dtype.name} for its operand {i}; "
                "accepted dtypes are float32, float64 (convert with "
                "lax.convert_element_type first)"
            )
    if x.dtype != y.dtype:
        raise TypeError(
            f"complex requires arguments to have the same dtypes, got {x.dtype.name}, "
            f"{y.dtype.name}"
        )
    shape = broadcasting_shape("complex", x, y)
    return ShapedArray(shape, dtypes.complex_dtype(x.dtype), x.weak_type and y.weak_type)


complex_p = standard_primitive("complex", _complex_impl, _complex_abstract_eval)


def complex(x, y):  # noqa: A001  (JAX's name)
    """Elementwise ``x + 1j * y`` from a real part and an imaginary part of one float dtype
    (float32 -> complex64, float64 -> complex128; Python scalars take the other operand's
    dtype)."""
    return complex_p.bind(*operands_same_dtype("complex", x, y))


def _complex_transpose(ct, x, y):
    from fungrad.lax.elementwise import _unbroadcast, neg

    out = []
    for v, part in ((x, real_p.bind(ct)), (y, neg(imag_p.bind(ct)))):
        out.append(_unbroadcast(v.aval, part) if is_undefined_primal(v) else None)
    return out


for _p in (real_p, imag_p, conj_p, complex_p):
    deflinear(_p)
deflinear_transpose(real_p, _real_transpose)
deflinear_transpose(imag_p, _imag_transpose)
deflinear_transpose(conj_p, _conj_transpose)
deflinear_transpose(complex_p, _complex_transpose)
for _p in (real_p, imag_p, conj_p):
    defvectorized(_p)
defbroadcasting(complex_p)
del _p
