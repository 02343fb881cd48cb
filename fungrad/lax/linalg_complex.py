"""Complex ``cholesky``, ``triangular_solve`` and ``lu`` under jit: the complex split's rules
for them and the real "interleaved complex" primitives those rules bind.

The complex split (``lowering/complex_split.py``) hands a rule each complex operand as a
:class:`~fungrad.lowering.complex_split.Pair` of real planes. The rules here put the planes side
by side into one real ``[..., 2]`` array (``complex_interleave``: numpy's complex layout, which
is LAPACK's) and bind the interleaved form of the primitive; its outputs are split back into
planes. The interleaved primitives exist only inside the compiler (kept out of
``core.primitives``, as ``complex_interleave``): each has an eager ``impl`` (through the complex
primitive's) and an abstract evaluation for the pass, and a lowering that appends the same
library step as the real primitive with ``complex=True`` (``cpotrf``/``zpotrf``,
``cblas_ctrsm``/``ztrsm``, ``cgetrf``/``zgetrf`` on the CPU: ``cpu/lapack_step.py``). A
backend without the library steps (the GPU) has no complex linear algebra: a
:class:`~fungrad.lowering.fusion.LoweringError` names the primitive and suggests the CPU.

``conjugate_a`` without ``transpose_a`` (``conj(a)``; BLAS has no such op) is made by negating
``a``'s imaginary plane before the solve.
"""

from __future__ import annotations

import numpy as np

from fungrad import core, dtypes
from fungrad.core import ShapedArray
from fungrad.lax.linalg_lu import _lu_impl, lu_p
from fungrad.lax.linalg_primitives import (
    _cholesky_impl,
    _triangular_solve_impl,
    cholesky_p,
    triangular_solve_p,
)
from fungrad.lowering import kernel
from fungrad.lowering.complex_split import Pair, interleave_p, register_split_rule

__all__ = ["cholesky_interleaved_p", "lu_interleaved_p", "triangular_solve_interleaved_p"]

_REALS = (np.dtype(np.float32), np.dtype(np.float64))


def _internal_primitive(name: str, impl, abstract_eval, lowering, *, multiple_results=False):
    """A primitive only the compiler binds (kept out of ``core.primitives``)."""
    p = core.Primitive(name, multiple_results=multiple_results)
    del core.primitives[name]
    p.impl, p.abstract_eval = impl, abstract_eval
    kernel.register_lowering(p, lowering)
    return p


def _check(name: str, x: ShapedArray, what: str = "operand") -> None:
    if x.dtype not in _REALS or x.ndim < 3 or x.shape[-1] != 2:
        raise TypeError(
            f"{name}: {what} must be a float32 or float64 [..., m, n, 2] array (complex "
            f"matrices, real and imaginary parts interleaved), got {x.str_short()}"
        )


def _as_complex(x) -> np.ndarray:
    x = np.ascontiguousarray(x)
    return x.view(dtypes.complex_dtype(x.dtype))[..., 0]


def _as_interleaved(z) -> np.ndarray:
    z = np.ascontiguousarray(z)
    return z.view(dtypes.real_dtype(z.dtype)).reshape(z.shape + (2,))


def _no_library(ctx, name: str, x) -> None:
    from fungrad.lowering.fusion import LoweringError

    policy = ctx.planner.policy
    if not policy.linalg_steps:
        shape = x.shape[:-1]
        dt = dtypes.complex_dtype(x.dtype)
        raise LoweringError(
            f"{name} of a complex {shape} {dt} matrix: the {policy.name} backend has no complex "
            "linear algebra; run this function with jit(..., backend='cpu') or outside jit"
        )


def _batch(shape) -> int:
    return int(np.prod(shape[:-3], dtype=np.int64))


def _interleave(p: Pair):
    return interleave_p.bind(p.re, p.im)


def _planes(z) -> Pair:
    from fungrad import lax

    nd = core.get_aval(z).ndim
    re, im = (lax.squeeze(lax.slice_in_dim(z, i, i + 1, axis=nd - 1), (nd - 1,)) for i in (0, 1))
    return Pair(re, im)


# -- cholesky -----------------------------------------------------------------------------------


def _cholesky_abstract_eval(x):
    name = "cholesky_interleaved"
    _check(name, x)
    if x.shape[-2] != x.shape[-3]:
        raise ValueError(f"{name}: the matrices must be square, got {x.str_short()}")
    return ShapedArray(x.shape, x.dtype)


def _cholesky_lowering(ctx, x):
    _no_library(ctx, "cholesky", x)
    from fungrad.lowering.steps import CholeskyStep

    planner = ctx.planner
    a = ctx.materialize(x).buffer
    out = planner.new_buffer(x.shape, x.dtype, "temp")
    step = CholeskyStep(f"cholesky_{out.name}", a, out, _batch(x.shape), x.shape[-2], True)
    planner.add_step(step)
    return planner.buffer_tensor(out, "cholesky")


cholesky_interleaved_p = _internal_primitive(
    "cholesky_interleaved",
    lambda x: _as_interleaved(_cholesky_impl(_as_complex(x))),
    _cholesky_abstract_eval,
    _cholesky_lowering,
)
"""``cholesky_p`` of complex matrices held as real ``[..., n, n, 2]`` arrays."""


def _cholesky_split(x):
    return [_planes(cholesky_interleaved_p.bind(_interleave(x)))]


register_split_rule(cholesky_p, _cholesky_split)


# -- triangular_solve ---------------------------------------------------------------------------


def _solve_abstract_eval(a, b, **params):
    name = "triangular_solve_interleaved"
    _check(name, a, "a")
    _check(name, b, "b")
    m = a.shape[-2]
    side = -3 if params["left_side"] else -2
    if (
        a.dtype != b.dtype
        or a.shape[-3] != m
        or b.shape[:-3] != a.shape[:-3]
        or (b.ndim != a.ndim or b.shape[side] != m)
    ):
        raise ValueError(
            f"{name}: a {a.str_short()} and b {b.str_short()} do not match "
            f"(left_side={params['left_side']})"
        )
    return ShapedArray(b.shape, b.dtype)


def _solve_impl(a, b, **params):
    x = _triangular_solve_impl(_as_complex(a), _as_complex(b), **params)
    return _as_interleaved(x.astype(dtypes.complex_dtype(np.asarray(b).dtype), copy=False))


def _solve_lowering(ctx, a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    _no_library(ctx, "triangular_solve", a)
    if conjugate_a and not transpose_a:  # the split rule conjugates a itself
        raise AssertionError("triangular_solve_interleaved: conjugate_a needs transpose_a")
    from fungrad.lowering.steps import TriangularSolveStep

    planner = ctx.planner
    abuf = ctx.materialize(a).buffer
    bbuf = ctx.materialize(b).buffer
    out = planner.new_buffer(b.shape, b.dtype, "temp")
    step = TriangularSolveStep(
        f"trsm_{out.name}",
        abuf,
        bbuf,
        out,
        _batch(b.shape),
        b.shape[-3],
        b.shape[-2],
        left_side,
        lower,
        transpose_a,
        unit_diagonal,
        conjugate_a=conjugate_a,
        complex=True,
    )
    planner.add_step(step)
    return planner.buffer_tensor(out, "triangular_solve")


triangular_solve_interleaved_p = _internal_primitive(
    "triangular_solve_interleaved", _solve_impl, _solve_abstract_eval, _solve_lowering
)
"""``triangular_solve_p`` of complex ``a`` and ``b`` held as real ``[..., m, n, 2]`` arrays
(``conjugate_a`` only with ``transpose_a``: ``op(a) = aᴴ``)."""


def _solve_split(a, b, **params):
    from fungrad import lax

    if params["conjugate_a"] and not params["transpose_a"]:
        a = Pair(a.re, lax.neg(a.im))
        params = dict(params, conjugate_a=False)
    out = triangular_solve_interleaved_p.bind(_interleave(a), _interleave(b), **params)
    return [_planes(out)]


register_split_rule(triangular_solve_p, _solve_split)


# -- lu -----------------------------------------------------------------------------------------


def _lu_abstract_eval(x):
    _check("lu_interleaved", x)
    *batch, m, n, _ = x.shape
    batch = tuple(batch)
    return [
        ShapedArray(x.shape, x.dtype),
        ShapedArray(batch + (min(m, n),), np.dtype(np.int32)),
        ShapedArray(batch + (m,), np.dtype(np.int32)),
    ]


def _lu_impl_interleaved(x):
    lu, pivots, perm = _lu_impl(_as_complex(x))
    return [_as_interleaved(lu), pivots, perm]


def _lu_lowering(ctx, x):
    _no_library(ctx, "lu", x)
    from fungrad.lowering.steps import LuStep

    planner = ctx.planner
    *batch, m, n, _ = x.shape
    k = min(m, n)
    a = ctx.materialize(x).buffer
    lu = planner.new_buffer(x.shape, x.dtype, "temp")
    pivots = planner.new_buffer(tuple(batch) + (k,), np.int32, "temp")
    perm = planner.new_buffer(tuple(batch) + (m,), np.int32, "temp")
    work = planner.new_buffer((m * n * 2,), x.dtype, "temp")  # one column-major matrix
    ipiv = planner.new_buffer((k,), np.int64, "temp")  # LAPACK's pivots (32 or 64 bits)
    count = _batch(x.shape)
    step = LuStep(f"lu_{lu.name}", a, lu, pivots, perm, work, ipiv, count, m, n, True)
    planner.add_step(step)
    return [planner.buffer_tensor(b, "lu") for b in (lu, pivots, perm)]


lu_interleaved_p = _internal_primitive(
    "lu_interleaved",
    _lu_impl_interleaved,
    _lu_abstract_eval,
    _lu_lowering,
    multiple_results=True,
)
"""``lu_p`` of complex matrices held as real ``[..., m, n, 2]`` arrays (the pivots and the
permutation as ``lu_p``'s)."""


def _lu_split(x):
    lu, pivots, perm = lu_interleaved_p.bind(_interleave(x))
    return [_planes(lu), pivots, perm]


register_split_rule(lu_p, _lu_split)
