"""Complex ``qr``, ``geqrf``, ``eigh``, ``svd`` and ``eig`` under jit: the complex split's rules
for them and the real "interleaved complex" primitives those rules bind.

The complex split (``lowering/complex_split.py``) hands a rule each complex operand as a
:class:`~fungrad.lowering.complex_split.Pair` of real planes. The rules here put the planes side
by side into one real ``[..., m, n, 2]`` array (``complex_interleave``: numpy's complex layout,
which is LAPACK's) and bind the interleaved form of the decomposition; its complex outputs are
split back into planes, its real ones (eigenvalues of a Hermitian matrix, singular values) are
used as they are. The interleaved primitives exist only inside the compiler (kept out of
``core.primitives``): each has an eager ``impl`` (through the complex primitive's) and an
abstract evaluation for the pass, and a lowering that appends the real primitive's library
step with ``complex=True`` (``cgeqrf`` (+ ``cungqr``), ``cheevd``, ``cgesdd``, ``cgeev`` and their
``z`` forms on the CPU: ``cpu/lapack_decomp_step.py``). A backend without the library steps
(the GPU) has no complex decompositions: a :class:`~fungrad.lowering.fusion.LoweringError`
names the operation and suggests the CPU.

``eig_p`` of a real matrix keeps its own rule (``linalg_eig.py``: LAPACK's real ``geev``); that
rule sends a complex operand here (:func:`eig_split_complex`).
"""

from __future__ import annotations

import numpy as np

from fungrad import core, dtypes
from fungrad.core import ShapedArray
from fungrad.lax.linalg_decomp_primitives import (
    _eigh_impl,
    _geqrf_impl,
    _qr_impl,
    _qr_shapes,
    _svd_impl,
    _svd_shapes,
    eigh_p,
    geqrf_p,
    qr_p,
    svd_p,
)
from fungrad.lowering import kernel
from fungrad.lowering.complex_split import Pair, interleave_p, register_split_rule

__all__ = [
    "eig_interleaved_p",
    "eig_split_complex",
    "eigh_interleaved_p",
    "geqrf_interleaved_p",
    "qr_interleaved_p",
    "svd_interleaved_p",
]

_REALS = (np.dtype(np.float32), np.dtype(np.float64))


def _internal_primitive(name: str, impl, abstract_eval, lowering):
    """A multiple-result primitive only the compiler binds (kept out of ``core.primitives``)."""
    p = core.Primitive(name, multiple_results=True)
    del core.primitives[name]
    p.impl, p.abstract_eval = impl, abstract_eval
    kernel.register_lowering(p, lowering)
    return p


def _check(name: str, x: ShapedArray, square: bool = False) -> None:
    if x.dtype not in _REALS or x.ndim < 3 or x.shape[-1] != 2:
        raise TypeError(
            f"{name}: operand must be a float32 or float64 [..., m, n, 2] array (complex "
            f"matrices, real and imaginary parts interleaved), got {x.str_short()}"
        )
    if square and x.shape[-2] != x.shape[-3]:
        raise ValueError(f"{name}: the matrices must be square, got {x.str_short()}")


def _as_complex(x) -> np.ndarray:
    x = np.ascontiguousarray(x)
    return x.view(dtypes.complex_dtype(x.dtype))[..., 0]


def _as_interleaved(z) -> np.ndarray:
    z = np.ascontiguousarray(z)
    return z.view(dtypes.real_dtype(z.dtype)).reshape(z.shape + (2,))


def _out(x) -> np.ndarray:
    """An eager result: complex ones interleaved, real ones as they are."""
    x = np.asarray(x)
    return _as_interleaved(x) if x.dtype.kind == "c" else x


def _interleave(p: Pair):
    return interleave_p.bind(p.re, p.im)


def _planes(z) -> Pair:
    from fungrad import lax

    nd = core.get_aval(z).ndim
    re, im = (lax.squeeze(lax.slice_in_dim(z, i, i + 1, axis=nd - 1), (nd - 1,)) for i in (0, 1))
    return Pair(re, im)


def _batch(shape) -> int:
    return int(np.prod(shape[:-3], dtype=np.int64))


def _library(ctx, name: str, x) -> None:
    """Raise the LoweringError of a backend without the library steps (the GPU)."""
    from fungrad.lowering.fusion import LoweringError

    policy = ctx.planner.policy
    if not policy.linalg_steps:
        shape = x.shape[:-1]
        dt = dtypes.complex_dtype(x.dtype)
        raise LoweringError(
            f"{name} of a complex {shape} {dt} matrix: the {policy.name} backend has no complex "
            "decompositions; run this function with jit(..., backend='cpu') or outside jit"
        )


def _complex_aval(shape, x: ShapedArray) -> ShapedArray:
    return ShapedArray(tuple(shape) + (2,), x.dtype)


# -- qr -----------------------------------------------------------------------------------------


def _qr_abstract_eval(x, *, full_matrices):
    _check("qr_interleaved", x)
    qs, rs = _qr_shapes(x.shape[:-1], full_matrices)
    return [_complex_aval(qs, x), _complex_aval(rs, x)]


def _qr_lowering(ctx, x, *, full_matrices):
    _library(ctx, "qr", x)
    from fungrad.lowering.steps import QRStep

    planner = ctx.planner
    m, n = x.shape[-3:-1]
    qs, rs = _qr_shapes(x.shape[:-1], full_matrices)
    a = ctx.materialize(x).buffer
    q = planner.new_buffer(qs + (2,), x.dtype, "temp")
    r = planner.new_buffer(rs + (2,), x.dtype, "temp")
    step = QRStep(f"qr_{q.name}", a, q, r, _batch(x.shape), m, n, full_matrices, complex=True)
    planner.add_step(step)
    return [planner.buffer_tensor(q, "qr"), planner.buffer_tensor(r, "qr")]


qr_interleaved_p = _internal_primitive(
    "qr_interleaved",
    lambda x, **p: [_out(t) for t in _qr_impl(_as_complex(x), **p)],
    _qr_abstract_eval,
    _qr_lowering,
)
"""``qr_p`` of complex matrices held as real ``[..., m, n, 2]`` arrays."""


def _qr_split(x, *, full_matrices):
    q, r = qr_interleaved_p.bind(_interleave(x), full_matrices=full_matrices)
    return [_planes(q), _planes(r)]


register_split_rule(qr_p, _qr_split)


# -- geqrf --------------------------------------------------------------------------------------


def _geqrf_abstract_eval(x):
    _check("geqrf_interleaved", x)
    k = min(x.shape[-3:-1])
    return [ShapedArray(x.shape, x.dtype), _complex_aval(x.shape[:-3] + (k,), x)]


def _geqrf_lowering(ctx, x):
    _library(ctx, "geqrf", x)
    from fungrad.lowering.steps import GeqrfStep

    planner = ctx.planner
    m, n = x.shape[-3:-1]
    a = ctx.materialize(x).buffer
    packed = planner.new_buffer(x.shape, x.dtype, "temp")
    taus = planner.new_buffer(x.shape[:-3] + (min(m, n), 2), x.dtype, "temp")
    step = GeqrfStep(f"geqrf_{packed.name}", a, packed, taus, _batch(x.shape), m, n, complex=True)
    planner.add_step(step)
    return [planner.buffer_tensor(packed, "geqrf"), planner.buffer_tensor(taus, "geqrf")]


geqrf_interleaved_p = _internal_primitive(
    "geqrf_interleaved",
    lambda x: [_out(t) for t in _geqrf_impl(_as_complex(x))],
    _geqrf_abstract_eval,
    _geqrf_lowering,
)
"""``geqrf_p`` of complex matrices held as real ``[..., m, n, 2]`` arrays."""


def _geqrf_split(x):
    packed, taus = geqrf_interleaved_p.bind(_interleave(x))
    return [_planes(packed), _planes(taus)]


register_split_rule(geqrf_p, _geqrf_split)


# -- eigh ---------------------------------------------------------------------------------------


def _eigh_abstract_eval(x, *, lower, sort_eigenvalues):
    _check("eigh_interleaved", x, square=True)
    return [ShapedArray(x.shape, x.dtype), ShapedArray(x.shape[:-2], x.dtype)]


def _eigh_lowering(ctx, x, *, lower, sort_eigenvalues):
    _library(ctx, "eigh", x)
    from fungrad.lowering.steps import EighStep

    planner = ctx.planner
    n = x.shape[-2]
    a = ctx.materialize(x).buffer
    v = planner.new_buffer(x.shape, x.dtype, "temp")
    w = planner.new_buffer(x.shape[:-2], x.dtype, "temp")
    planner.add_step(EighStep(f"eigh_{v.name}", a, v, w, _batch(x.shape), n, lower, complex=True))
    return [planner.buffer_tensor(v, "eigh"), planner.buffer_tensor(w, "eigh")]


eigh_interleaved_p = _internal_primitive(
    "eigh_interleaved",
    lambda x, **p: [_out(t) for t in _eigh_impl(_as_complex(x), **p)],
    _eigh_abstract_eval,
    _eigh_lowering,
)
"""``eigh_p`` of complex Hermitian matrices held as real ``[..., n, n, 2]`` arrays: the
eigenvectors interleaved, the (real) eigenvalues ``[..., n]``."""


def _eigh_split(x, **params):
    v, w = eigh_interleaved_p.bind(_interleave(x), **params)
    return [_planes(v), w]


register_split_rule(eigh_p, _eigh_split)


# -- svd ----------------------------------------------------------------------------------------


def _svd_abstract_eval(x, *, full_matrices, compute_uv):
    _check("svd_interleaved", x)
    s, u, vt = _svd_shapes(x.shape[:-1], full_matrices)
    out = [ShapedArray(s, x.dtype)]
    return out + ([_complex_aval(u, x), _complex_aval(vt, x)] if compute_uv else [])


def _svd_lowering(ctx, x, *, full_matrices, compute_uv):
    _library(ctx, "svd", x)
    from fungrad.lowering.steps import SVDStep

    planner = ctx.planner
    m, n = x.shape[-3:-1]
    s, u, vt = _svd_shapes(x.shape[:-1], full_matrices)
    a = ctx.materialize(x).buffer
    outs = [planner.new_buffer(s, x.dtype, "temp")]
    if compute_uv:
        outs += [planner.new_buffer(t + (2,), x.dtype, "temp") for t in (u, vt)]
    ub, vb = (outs[1], outs[2]) if compute_uv else (None, None)
    step = SVDStep(
        f"svd_{outs[0].name}", a, outs[0], ub, vb, _batch(x.shape), m, n, full_matrices, True
    )
    planner.add_step(step)
    return [planner.buffer_tensor(b, "svd") for b in outs]


svd_interleaved_p = _internal_primitive(
    "svd_interleaved",
    lambda x, **p: [_out(t) for t in _svd_impl(_as_complex(x), **p)],
    _svd_abstract_eval,
    _svd_lowering,
)
"""``svd_p`` of complex matrices held as real ``[..., m, n, 2]`` arrays: the (real) singular
values, then ``u`` and ``vt`` (``Vᴴ``) interleaved."""


def _svd_split(x, **params):
    outs = svd_interleaved_p.bind(_interleave(x), **params)
    return [outs[0]] + [_planes(t) for t in outs[1:]]


register_split_rule(svd_p, _svd_split)


# -- eig ----------------------------------------------------------------------------------------


def _eig_abstract_eval(x, *, compute_left, compute_right):
    _check("eig_interleaved", x, square=True)
    n_vec = int(compute_left) + int(compute_right)
    return [ShapedArray(x.shape[:-2] + (2,), x.dtype)] + [ShapedArray(x.shape, x.dtype)] * n_vec


def _eig_impl(x, *, compute_left, compute_right):
    from fungrad.lax.linalg_eig import _eig_impl as eig_impl

    outs = eig_impl(
        _as_complex(x),
        compute_left_eigenvectors=compute_left,
        compute_right_eigenvectors=compute_right,
    )
    return [_out(t) for t in outs]


def _eig_lowering(ctx, x, *, compute_left, compute_right):
    _library(ctx, "eig", x)
    from fungrad.lowering.steps import GeevStep

    planner = ctx.planner
    n = x.shape[-2]
    a = ctx.materialize(x).buffer
    w = planner.new_buffer(x.shape[:-2] + (2,), x.dtype, "temp")
    vl = planner.new_buffer(x.shape, x.dtype, "temp") if compute_left else None
    vr = planner.new_buffer(x.shape, x.dtype, "temp") if compute_right else None
    step = GeevStep(f"geev_{w.name}", a, w, None, vl, vr, _batch(x.shape), n, complex=True)
    planner.add_step(step)
    return [planner.buffer_tensor(b, "eig") for b in (w, vl, vr) if b is not None]


eig_interleaved_p = _internal_primitive(
    "eig_interleaved", _eig_impl, _eig_abstract_eval, _eig_lowering
)
"""``eig_p`` of complex matrices held as real ``[..., n, n, 2]`` arrays: the eigenvalues
``[..., n, 2]`` and the requested left/right eigenvectors, all interleaved."""


def eig_split_complex(a: Pair, *, compute_left_eigenvectors, compute_right_eigenvectors):
    """The split of ``eig_p`` of a complex matrix (called by ``eig_p``'s own split rule)."""
    outs = eig_interleaved_p.bind(
        _interleave(a),
        compute_left=compute_left_eigenvectors,
        compute_right=compute_right_eigenvectors,
    )
    return [_planes(t) for t in outs]
