"""Small lax utilities with JAX's names: ``optimization_barrier``, ``platform_dependent``,
``composite``, ``empty``, ``dtype``, ``shape_as_value``, ``index_take``, ``scatter_sub``,
``mulhi``, and the type aliases ``DotDimensionNumbers``, ``ConvGeneralDilatedDimensionNumbers``
and ``PrecisionLike``.

Each is a composition of existing primitives (or plain Python), so transforms need nothing new,
except ``optimization_barrier``, which is its own primitive (as in JAX) with its rules here.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

from fungrad import core, dtypes, tree_util
from fungrad.lax.conv import ConvDimensionNumbers
from fungrad.lax.dot import Precision
from fungrad.lax.elementwise import (
    add,
    bitwise_and,
    convert_element_type,
    lt,
    mul,
    neg,
    select,
    shift_right_logical,
    sub,
)
from fungrad.lax.indexing import GatherDimensionNumbers, gather, scatter_add
from fungrad.lax.shape import broadcast_in_dim, full
from fungrad.lax.slicing import concatenate
from fungrad.lax.utils import operand, standard_primitive
from fungrad.lowering import kernel
from fungrad.transforms.jvp import Zero, jvp_rules
from fungrad.transforms.transpose import is_undefined_primal, transpose_rules
from fungrad.transforms.vmap import batch_rules

__all__ = [
    "ConvGeneralDilatedDimensionNumbers",
    "DotDimensionNumbers",
    "PrecisionLike",
    "composite",
    "dtype",
    "empty",
    "index_take",
    "mulhi",
    "optimization_barrier",
    "optimization_barrier_p",
    "platform_dependent",
    "scatter_sub",
    "shape_as_value",
]

DotDimensionNumbers = tuple[
    tuple[Sequence[int], Sequence[int]], tuple[Sequence[int], Sequence[int]]
]
"""``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))`` of ``dot_general``."""

ConvGeneralDilatedDimensionNumbers = tuple[str, str, str] | ConvDimensionNumbers | None
"""What ``conv_general_dilated`` accepts as ``dimension_numbers``."""

PrecisionLike = None | str | Precision | tuple[str, str] | tuple[Precision, Precision]
"""What the ``precision`` arguments accept."""


# -- optimization_barrier: an identity primitive the compilers do not fuse across ---------------


def _barrier_impl(*xs):
    return list(xs)


def _barrier_abstract_eval(*avals):
    return list(avals)


optimization_barrier_p = standard_primitive(
    "optimization_barrier", _barrier_impl, _barrier_abstract_eval, multiple_results=True
)


def _barrier_jvp(primals, tangents):
    """The barrier on the primals, and on the non-zero tangents (a second barrier: under
    linearize the tangents are unknown while the primals are known)."""
    out = optimization_barrier_p.bind(*primals)
    live = [t for t in tangents if type(t) is not Zero]
    barred = iter(optimization_barrier_p.bind(*live) if live else [])
    return out, [t if type(t) is Zero else next(barred) for t in tangents]


def _barrier_transpose(cts, *args):
    live = [ct for ct in cts if type(ct) is not Zero]
    barred = iter(optimization_barrier_p.bind(*live) if live else [])
    return [
        None if not is_undefined_primal(x) else ct if type(ct) is Zero else next(barred)
        for x, ct in zip(args, cts)
    ]


def _barrier_batch(axis_size, args, dims):
    return optimization_barrier_p.bind(*args), list(dims)


def _barrier_lowering(ctx, *xs):
    """Each operand stored to memory: kernels after the barrier load it instead of
    recomputing (fusing) the expression that defines it."""
    return [ctx.materialize(x) for x in xs]


jvp_rules[optimization_barrier_p] = _barrier_jvp
transpose_rules[optimization_barrier_p] = _barrier_transpose
batch_rules[optimization_barrier_p] = _barrier_batch
kernel.register_lowering(optimization_barrier_p, _barrier_lowering)


def optimization_barrier(operand_, /):
    """``operand_`` (a pytree of arrays) unchanged (``jax.lax.optimization_barrier``), bound as
    one ``optimization_barrier`` primitive over all its leaves: as in XLA, the compiler does
    not move computations across it. fungrad's kernel compiler stores each leaf to memory at
    the barrier, so code after it loads the values rather than fusing (recomputing) what
    computes them; differentiation puts the tangents and cotangents behind a barrier too."""
    leaves, tree = tree_util.tree_flatten(operand_)
    leaves = [operand(x, "optimization_barrier") for x in leaves]
    if not leaves:
        return operand_
    return tree_util.tree_unflatten(tree, optimization_barrier_p.bind(*leaves))


def platform_dependent(*args, default=None, **per_platform):
    """``per_platform[p](*args)`` for the platform ``p`` the computation runs on, or
    ``default(*args)`` when no branch names it (``jax.lax.platform_dependent``).

    NB: the branch is chosen while tracing, for the CPU (fungrad's default platform), also
    inside ``jit(f, backend="gpu")``: branches are different implementations of one function,
    so choosing the CPU one computes the same values.
    """
    branches = dict(per_platform, **({} if default is None else {"default": default}))
    for name, branch in branches.items():
        if not callable(branch):
            raise TypeError(
                f"platform_dependent: the branch for {name!r} must be callable, "
                f"got {type(branch).__name__}"
            )
    if "cpu" in per_platform:
        return per_platform["cpu"](*args)
    if default is None:
        raise ValueError(
            "platform_dependent: no branch for the platform 'cpu' and no default; "
            f"got branches for {sorted(per_platform)}: add cpu=... or default=..."
        )
    return default(*args)


def composite(decomposition, name: str, version: int = 0):
    """``decomposition``, marked as the composite operation ``name`` (``jax.lax.composite``).
    JAX keeps the mark for compilers that recognise ``name``; fungrad computes the
    decomposition, which is what any other compiler does too."""
    if not callable(decomposition):
        raise TypeError(
            f"composite: decomposition must be callable, got {type(decomposition).__name__}"
        )
    if not isinstance(name, str):
        raise TypeError(f"composite: name must be a string, got {type(name).__name__}")

    def composite_f(*args, **kwargs):
        return decomposition(*args, **kwargs)

    composite_f.__name__ = getattr(decomposition, "__name__", name)
    composite_f.__doc__ = decomposition.__doc__
    return composite_f


def empty(shape, dtype, *, out_sharding=None):
    """An array of ``shape`` and ``dtype`` whose values do not matter (``jax.lax.empty``):
    zeros, as JAX gives on the CPU."""
    if out_sharding is not None:
        raise ValueError("empty: fungrad has no shardings; pass out_sharding=None")
    return full(shape, 0, dtypes.check_user_dtype(dtype, "empty"))


def dtype(x) -> np.dtype:
    """The canonical dtype of a value or dtype-like ``x`` (``jax.lax.dtype``): ``float32`` for
    ``1.0`` or ``np.float64`` unless x64 is on, ``int32`` for ``1``..."""
    if isinstance(x, (np.dtype, type, str)):
        try:
            return dtypes.canonicalize_dtype(np.dtype(x))
        except TypeError:
            raise TypeError(f"dtype: cannot interpret {x!r} as a dtype") from None
    return dtypes.dtype_and_weak(x)[0]


def shape_as_value(shape):
    """``shape`` as a 1-d int32 array (``jax.lax.shape_as_value``)."""
    return operand(np.array([operator.index(d) for d in shape], dtype=np.int32), "shape_as_value")


def index_take(src, idxs, axes):
    """``src`` indexed along ``axes`` by the equally shaped integer arrays ``idxs``
    (``jax.lax.index_take``): the result has the index shape, then ``src``'s other
    dimensions, like ``src[idxs[0], idxs[1], ...]`` with ``axes = (0, 1, ...)``."""
    x = operand(src, "index_take")
    aval = core.get_aval(x)
    axes = tuple(operator.index(a) for a in axes)
    idxs = [operand(i, "index_take") for i in idxs]
    if len(idxs) != len(axes):
        raise ValueError(
            f"index_take: needs one index array per axis, got {len(idxs)} index "
            f"arrays for axes {axes}"
        )
    if len(set(axes)) != len(axes) or any(not 0 <= a < aval.ndim for a in axes):
        raise ValueError(
            f"index_take: axes {axes} must be distinct dimensions of an operand of rank {aval.ndim}"
        )
    shapes = {tuple(core.get_aval(i).shape) for i in idxs}
    if len(shapes) != 1 or any(dtypes.kind(core.get_aval(i).dtype) not in "iu" for i in idxs):
        raise TypeError(
            f"index_take: idxs must be integer arrays of one shape, got "
            f"{[core.get_aval(i).str_short() for i in idxs]}"
        )
    ishape = shapes.pop()
    idx_dtype = dtypes.canonicalize_dtype(np.int32)
    cols = [
        broadcast_in_dim(
            convert_element_type(i, idx_dtype), (*ishape, 1), tuple(range(len(ishape)))
        )
        for i in idxs
    ]
    indices = concatenate(cols, len(ishape))
    rest = [d for d in range(aval.ndim) if d not in axes]
    dnums = GatherDimensionNumbers(
        offset_dims=tuple(range(len(ishape), len(ishape) + len(rest))),
        collapsed_slice_dims=tuple(sorted(axes)),
        start_index_map=axes,
    )
    slice_sizes = tuple(1 if d in axes else aval.shape[d] for d in range(aval.ndim))
    return gather(x, indices, dnums, slice_sizes)


def scatter_sub(
    operand_,
    scatter_indices,
    updates,
    dimension_numbers,
    *,
    indices_are_sorted: bool = False,
    unique_indices: bool = False,
    mode=None,
):
    """``operand_`` with ``updates`` subtracted at the scattered positions
    (``jax.lax.scatter_sub``): ``scatter_add`` of the negated updates."""
    return scatter_add(
        operand_,
        scatter_indices,
        neg(operand(updates, "scatter_sub")),
        dimension_numbers,
        indices_are_sorted=indices_are_sorted,
        unique_indices=unique_indices,
        mode=mode,
    )


def _unsigned(dt: np.dtype) -> np.dtype:
    return np.dtype(f"uint{8 * dt.itemsize}")


def _mulhi_unsigned(u, v, bits: int):
    """The high ``bits`` bits of the 2*``bits``-bit product of unsigned ``u`` and ``v``, from
    half-width pieces (Hacker's Delight, mulhu): no wider type needed."""
    half = bits // 2
    dt = core.get_aval(u).dtype
    mask, shift = full((), (1 << half) - 1, dt), full((), half, dt)
    u0, u1 = bitwise_and(u, mask), shift_right_logical(u, shift)
    v0, v1 = bitwise_and(v, mask), shift_right_logical(v, shift)
    w0 = mul(u0, v0)
    t = add(mul(u1, v0), shift_right_logical(w0, shift))
    w1 = add(mul(u0, v1), bitwise_and(t, mask))
    return add(add(mul(u1, v1), shift_right_logical(t, shift)), shift_right_logical(w1, shift))


def mulhi(x, y, /):
    """The high half of the double-width product of integers ``x`` and ``y``
    (``jax.lax.mulhi``): for int32, ``(x * y) >> 32`` computed in 64 bits.

    Example: ``mulhi(uint32(2**32 - 1), uint32(2**32 - 1))`` is ``2**32 - 2``.
    """
    x, y = operand(x, "mulhi"), operand(y, "mulhi")
    ax, ay = core.get_aval(x), core.get_aval(y)
    if ax.dtype != ay.dtype or dtypes.kind(ax.dtype) not in "iu":
        raise TypeError(
            f"mulhi: operands must be integers of one dtype, got {ax.str_short()} "
            f"and {ay.str_short()}"
        )
    if ax.shape != ay.shape and ax.shape and ay.shape:
        raise TypeError(
            f"mulhi: operands must have equal shapes (or be 0-d), got "
            f"{ax.str_short()} and {ay.str_short()}"
        )
    shape = ax.shape or ay.shape
    x, y = (
        broadcast_in_dim(v, shape, ()) if not a.shape and shape else v
        for v, a in ((x, ax), (y, ay))
    )
    dt, bits = ax.dtype, 8 * ax.dtype.itemsize
    if dtypes.kind(dt) == "u":
        return _mulhi_unsigned(x, y, bits)
    udt = _unsigned(dt)
    ux, uy = convert_element_type(x, udt), convert_element_type(y, udt)
    hi = _mulhi_unsigned(ux, uy, bits)
    # signed high half = unsigned high half - (x < 0 ? y : 0) - (y < 0 ? x : 0)   (mod 2^bits)
    zero, uzero = full((), 0, dt), full(shape, 0, udt)
    hi = sub(hi, select(lt(x, zero), uy, uzero))
    hi = sub(hi, select(lt(y, zero), ux, uzero))
    return convert_element_type(hi, dt)
