"""The ``schur`` and ``hessenberg`` primitives (jax.lax.linalg's), with all their rules.

* ``schur_p`` (``compute_schur_vectors``, ``sort_eig_vals``, ``select_callable``): a real or
  complex [..., n, n] ``a`` -> ``[t]`` or ``[t, z]`` of ``a``'s dtype with ``a = z t zᴴ``:
  ``z`` unitary, ``t`` upper triangular (complex) or quasi-upper-triangular (real: a 2 x 2
  diagonal block per complex conjugate eigenvalue pair, in LAPACK's standard form), LAPACK's
  unsorted ``gees``. No convergence: NaN in both, as JAX. As in JAX, ``select_callable`` is
  unused and ``sort_eig_vals=True`` raises NotImplementedError when the primitive runs.
* ``hessenberg_p``: a real or complex [..., n, n] ``a`` -> ``[packed, taus]``, LAPACK's
  ``gehrd``: the upper Hessenberg matrix on and above the first subdiagonal of ``packed``, the
  Householder vectors below it, their scales ``taus`` [..., n - 1]
  (``fungrad.scipy.linalg.hessenberg`` forms ``H`` and ``Q`` from them). NB: JAX fails on a
  0 x 0 matrix (its ``taus`` would have length -1); here ``taus`` is empty.

Rules:

* eager: numpy has no Schur decomposition or Hessenberg reduction, so the impls call the host's
  LAPACK (``lowering/host_lapack.py``: the routines compiled CPU code calls, through ctypes),
  one matrix at a time;
* jvp: none, as in JAX (``no_jvp``: a NotDifferentiableError naming the primitive);
* batching: the vmapped dimension moves to the front;
* lowering: where the backend's policy has ``linalg_steps`` (the CPU with LAPACK), one library
  step, ``steps.SchurStep`` / ``steps.HessenbergStep`` (rendered by
  ``cpu/lapack_schur_step.py``). Complex matrices reach the compiler through the complex split:
  its rules here bind interleaved forms (real ``[..., n, n, 2]`` arrays) whose steps call the
  complex routines. Like JAX's (CPU only), the GPU has neither: a LoweringError naming the
  operation says to jit with ``backend='cpu'``.
"""

from __future__ import annotations

import numpy as np

from fungrad.core import ShapedArray
from fungrad.impls import ignore_fp_errors
from fungrad.lax.linalg_decomp_complex import (
    _as_complex,
    _interleave,
    _internal_primitive,
    _library,
    _out,
    _planes,
)
from fungrad.lax.linalg_decomp_complex import _check as _check_interleaved
from fungrad.lax.utils import standard_primitive
from fungrad.lowering import host_lapack, kernel
from fungrad.lowering.complex_split import register_split_rule
from fungrad.transforms.jvp import no_jvp
from fungrad.transforms.vmap import batch_rules, bdim_at_front

__all__ = ["hessenberg_interleaved_p", "hessenberg_p", "schur_interleaved_p", "schur_p"]

_INEXACT = tuple(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))

_SORT_ERROR = "The sort feature of LAPACK's gees routine is not implemented."


def _check(name: str, a: ShapedArray, what: str) -> None:
    """JAX's checks of a decomposition's operand (its error types), with the fix."""
    if a.dtype not in _INEXACT:
        raise TypeError(
            f"{name} does not accept dtype {a.dtype}: only float32, float64, complex64 and "
            "complex128 are supported (cast the operand first)"
        )
    if a.ndim < 2:
        raise TypeError(
            f"Input 0 to {name} must have rank at least 2, but got shape={a.shape} "
            f"(pass a square matrix or a stack of them, [..., n, n])"
        )
    if a.shape[-1] != a.shape[-2]:
        raise ValueError(f"The input to {name} must be {what}, [..., n, n]. Got shape {a.shape}.")


def _batch_rule(prim):
    def rule(axis_size, args, dims, **params):
        (x,), (d,) = args, dims
        outs = prim.bind(bdim_at_front(x, d, axis_size), **params)
        return outs, [0] * len(outs)

    return rule


def _flat(a: np.ndarray) -> np.ndarray:
    n = a.shape[-1]
    return a.reshape((int(np.prod(a.shape[:-2], dtype=np.int64)), n, n))


# -- schur --------------------------------------------------------------------------------------


def _schur_abstract_eval(a, *, compute_schur_vectors, sort_eig_vals, select_callable):
    _check("schur", a, "a square matrix")
    return [ShapedArray(a.shape, a.dtype)] * (2 if compute_schur_vectors else 1)


@ignore_fp_errors
def _schur_impl(a, *, compute_schur_vectors, sort_eig_vals, select_callable):
    del select_callable  # unused, as in JAX
    if sort_eig_vals:
        raise NotImplementedError(_SORT_ERROR)
    a = np.asarray(a)
    outs = [np.empty(a.shape, a.dtype) for _ in range(2 if compute_schur_vectors else 1)]
    views = [_flat(o) for o in outs]
    for i, x in enumerate(_flat(a) if a.shape[-1] else ()):
        t, z, info = host_lapack.gees(x, compute_schur_vectors)
        for view, r in zip(views, (t, z)):
            view[i] = np.nan if info != 0 else r
    return outs


schur_p = standard_primitive("schur", _schur_impl, _schur_abstract_eval, multiple_results=True)
no_jvp[schur_p] = (
    "JAX defines no derivative of the Schur decomposition (nor of functions built on it: "
    "scipy.linalg.sqrtm, funm, solve_sylvester in A or B); differentiate a decomposition that "
    "has one (eig's eigenvalues, eigh, svd, qr) or use scipy.linalg.expm"
)
batch_rules[schur_p] = _batch_rule(schur_p)


def _schur_step(ctx, x, n: int, vectors: bool, cplx: bool):
    """Append the Schur step of ``x`` (real, or interleaved complex); its output tensors."""
    from fungrad.lowering.steps import SchurStep

    planner = ctx.planner
    a = ctx.materialize(x).buffer
    t = planner.new_buffer(x.shape, x.dtype, "temp")
    z = planner.new_buffer(x.shape, x.dtype, "temp") if vectors else None
    batch = int(np.prod(x.shape[: -3 if cplx else -2], dtype=np.int64))
    planner.add_step(SchurStep(f"schur_{t.name}", a, t, z, batch, n, complex=cplx))
    return [planner.buffer_tensor(b, "schur") for b in (t, z) if b is not None]


def _no_library(ctx, name: str, x) -> None:
    from fungrad.lowering.fusion import LoweringError

    policy = ctx.planner.policy
    if not policy.linalg_steps:
        raise LoweringError(
            f"{name} of a {x.shape} {x.dtype} matrix: the {policy.name} backend has no {name} "
            "(JAX implements it on the CPU only); run this function with "
            "jit(..., backend='cpu') or outside jit"
        )


def _schur_lowering(ctx, x, *, compute_schur_vectors, sort_eig_vals, select_callable):
    if sort_eig_vals:
        raise NotImplementedError(_SORT_ERROR)
    _no_library(ctx, "schur", x)
    return _schur_step(ctx, x, x.shape[-1], compute_schur_vectors, False)


kernel.register_lowering(schur_p, _schur_lowering)


def _schur_interleaved_abstract_eval(x, *, compute_schur_vectors):
    _check_interleaved("schur_interleaved", x, square=True)
    return [ShapedArray(x.shape, x.dtype)] * (2 if compute_schur_vectors else 1)


def _schur_interleaved_impl(x, *, compute_schur_vectors):
    outs = _schur_impl(
        _as_complex(x),
        compute_schur_vectors=compute_schur_vectors,
        sort_eig_vals=False,
        select_callable=None,
    )
    return [_out(t) for t in outs]


def _schur_interleaved_lowering(ctx, x, *, compute_schur_vectors):
    _library(ctx, "schur", x)
    return _schur_step(ctx, x, x.shape[-2], compute_schur_vectors, True)


schur_interleaved_p = _internal_primitive(
    "schur_interleaved",
    _schur_interleaved_impl,
    _schur_interleaved_abstract_eval,
    _schur_interleaved_lowering,
)
"""``schur_p`` of complex matrices held as real ``[..., n, n, 2]`` arrays (interleaved)."""


def _schur_split(x, *, compute_schur_vectors, sort_eig_vals, select_callable):
    if sort_eig_vals:
        raise NotImplementedError(_SORT_ERROR)
    outs = schur_interleaved_p.bind(_interleave(x), compute_schur_vectors=compute_schur_vectors)
    return [_planes(t) for t in outs]


register_split_rule(schur_p, _schur_split)


# -- hessenberg ---------------------------------------------------------------------------------


def _hessenberg_abstract_eval(a):
    _check("hessenberg", a, "a square matrix")
    n = a.shape[-1]
    return [ShapedArray(a.shape, a.dtype), ShapedArray(a.shape[:-2] + (max(n - 1, 0),), a.dtype)]


@ignore_fp_errors
def _hessenberg_impl(a):
    a = np.asarray(a)
    n = a.shape[-1]
    packed = np.empty(a.shape, a.dtype)
    taus = np.empty(a.shape[:-2] + (max(n - 1, 0),), a.dtype)
    if n == 0:
        return [packed, taus]
    flat_packed = _flat(packed)
    flat_taus = taus.reshape((flat_packed.shape[0], n - 1))
    for i, x in enumerate(_flat(a)):
        p, tau, info = host_lapack.gehrd(x)
        flat_packed[i] = np.nan if info != 0 else p
        flat_taus[i] = np.nan if info != 0 else tau
    return [packed, taus]


hessenberg_p = standard_primitive(
    "hessenberg", _hessenberg_impl, _hessenberg_abstract_eval, multiple_results=True
)
no_jvp[hessenberg_p] = (
    "JAX defines no derivative of the Hessenberg reduction; differentiate a decomposition that "
    "has one (qr, eigh, svd)"
)
batch_rules[hessenberg_p] = _batch_rule(hessenberg_p)


def _hessenberg_step(ctx, x, n: int, cplx: bool):
    """Append the Hessenberg step of ``x`` (real, or interleaved complex); its outputs."""
    from fungrad.lowering.steps import HessenbergStep

    planner = ctx.planner
    batch_shape = x.shape[: -3 if cplx else -2]
    a = ctx.materialize(x).buffer
    packed = planner.new_buffer(x.shape, x.dtype, "temp")
    taus = planner.new_buffer(batch_shape + (max(n - 1, 0),) + x.shape[-1:] * cplx, x.dtype, "temp")
    batch = int(np.prod(batch_shape, dtype=np.int64))
    step = HessenbergStep(f"gehrd_{packed.name}", a, packed, taus, batch, n, complex=cplx)
    planner.add_step(step)
    return [planner.buffer_tensor(packed, "hessenberg"), planner.buffer_tensor(taus, "hessenberg")]


def _hessenberg_lowering(ctx, x):
    _no_library(ctx, "hessenberg", x)
    return _hessenberg_step(ctx, x, x.shape[-1], False)


kernel.register_lowering(hessenberg_p, _hessenberg_lowering)


def _hessenberg_interleaved_abstract_eval(x):
    _check_interleaved("hessenberg_interleaved", x, square=True)
    n = x.shape[-2]
    return [ShapedArray(x.shape, x.dtype), ShapedArray(x.shape[:-3] + (max(n - 1, 0), 2), x.dtype)]


def _hessenberg_interleaved_lowering(ctx, x):
    _library(ctx, "hessenberg", x)
    return _hessenberg_step(ctx, x, x.shape[-2], True)


hessenberg_interleaved_p = _internal_primitive(
    "hessenberg_interleaved",
    lambda x: [_out(t) for t in _hessenberg_impl(_as_complex(x))],
    _hessenberg_interleaved_abstract_eval,
    _hessenberg_interleaved_lowering,
)
"""``hessenberg_p`` of complex matrices held as real ``[..., n, n, 2]`` arrays (interleaved)."""


def _hessenberg_split(x):
    packed, taus = hessenberg_interleaved_p.bind(_interleave(x))
    return [_planes(packed), _planes(taus)]


register_split_rule(hessenberg_p, _hessenberg_split)
