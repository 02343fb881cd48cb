"""Sorting: the multi-operand ``sort`` primitive and ``top_k``.

``sort`` orders all operands along ``dimension`` by the lexicographic order of the first
``num_keys`` operands, stably. Floats use JAX's sort order: -0.0 and 0.0 compare equal, and
every NaN (whatever its sign) sorts after +inf; complex numbers sort by real part, then
imaginary part, each in that float order (under jit the complex split pass makes a complex
key two real keys). ``top_k`` instead follows XLA's total order
(-NaN < -inf < ... < -0.0 < 0.0 < ... < inf < NaN), returning the k largest values along
``axis`` in descending order with ties broken by the lower index, as JAX does.

Derivatives follow the permutation: the jvp sorts an iota along with the keys and gathers the
tangents with the resulting indices (top_k gathers with its own indices); integer outputs have
zero tangents. Batching shifts ``dimension`` / ``axis`` past the vmapped dimension. Both lower
to a native stable merge sort step (``SortStep``, ``fungrad/lowering/steps.py``).
"""

from __future__ import annotations

import operator

import numpy as np

from fungrad import core, dtypes
from fungrad.core import ShapedArray
from fungrad.lax.utils import ANY, ANY_OR_COMPLEX, check_kinds, operand, standard_primitive
from fungrad.lowering import kernel
from fungrad.transforms.jvp import Zero, jvp_rules, tangent_aval
from fungrad.transforms.vmap import batch_rules, moveaxis

__all__ = ["sort", "sort_key_val", "top_k", "sort_p", "top_k_p"]


# -- sort ---------------------------------------------------------------------------------------


def _sort_abstract_eval(*operands, dimension, is_stable, num_keys):
    name = "sort"
    if not operands:
        raise TypeError(f"{name}: needs at least one operand")
    for x in operands:
        check_kinds(name, x.dtype, ANY_OR_COMPLEX)
    shapes = {x.shape for x in operands}
    if len(shapes) != 1:
        raise TypeError(
            f"{name}: operands must have equal shapes, got "
            + ", ".join(str(x.shape) for x in operands)
        )
    shape = operands[0].shape
    if not 0 <= dimension < len(shape):
        raise ValueError(
            f"{name}: dimension {dimension} is not a dimension of operands of shape {shape}"
        )
    if not 1 <= num_keys <= len(operands):
        raise ValueError(
            f"{name}: num_keys={num_keys} must be between 1 and the number of "
            f"operands ({len(operands)})"
        )
    return [ShapedArray(x.shape, x.dtype, x.weak_type) for x in operands]


def _sort_keys(x: np.ndarray) -> list[np.ndarray]:
    """lexsort keys (most significant first) giving JAX's order for one operand: a float
    sorts by (is NaN, value with -0.0 made +0.0); a complex number by its real part, then its
    imaginary part, each as a float."""
    if dtypes.kind(x.dtype) == "c":
        return _sort_keys(x.real) + _sort_keys(x.imag)
    if dtypes.kind(x.dtype) != "f":
        return [x]
    nan = np.isnan(x)
    return [nan, np.where(nan, 0, x + x.dtype.type(0))]


def _sort_impl(*operands, dimension, is_stable, num_keys):
    # NB: the sort is always stable (an unstable sort may return any order of equal keys).
    keys = [k for x in operands[:num_keys] for k in _sort_keys(np.asarray(x))]
    perm = np.lexsort(keys[::-1], axis=dimension)  # lexsort's last key is the primary one
    return [np.take_along_axis(np.asarray(x), perm, axis=dimension) for x in operands]


sort_p = standard_primitive("sort", _sort_impl, _sort_abstract_eval, multiple_results=True)


def _take_along_axis(x, indices, axis: int):
    """``x`` read at ``indices`` along ``axis`` (every other dimension indexed by position): a
    gather whose other dimensions are batching dimensions."""
    from fungrad import lax

    ndim = core.get_aval(x).ndim
    others = tuple(d for d in range(ndim) if d != axis)
    dnums = lax.GatherDimensionNumbers(
        offset_dims=(),
        collapsed_slice_dims=(axis,),
        start_index_map=(axis,),
        operand_batching_dims=others,
        start_indices_batching_dims=others,
    )
    return lax.gather(
        x,
        lax.expand_dims(indices, (ndim,)),
        dnums,
        (1,) * ndim,
        mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS,
    )


def _sort_jvp(primals, tangents, *, dimension, is_stable, num_keys):
    # JAX's _sort_jvp: sorting an iota with the keys gives the permutation the tangents follow.
    from fungrad import lax

    shape = core.get_aval(primals[0]).shape
    iota = lax.broadcasted_iota(np.int32, shape, dimension)
    *outs, perm = sort_p.bind(
        *primals, iota, dimension=dimension, is_stable=is_stable, num_keys=num_keys
    )
    tangents_out = [
        Zero(tangent_aval(core.get_aval(o)))
        if type(t) is Zero or dtypes.kind(core.get_aval(o).dtype) not in "fc"
        else _take_along_axis(t, perm, dimension)
        for o, t in zip(outs, tangents)
    ]
    return outs, tangents_out


def _sort_batch(axis_size, args, dims, *, dimension, is_stable, num_keys):
    # The operands share one shape: unless all are vmapped along the same dimension, move the
    # vmapped ones to the front and broadcast the others.
    from fungrad import lax

    batched = {d for d in dims if d is not None}
    if len(batched) == 1 and None not in dims:
        (d,) = batched
        xs = list(args)
    else:
        d = 0
        xs = []
        for x, bd in zip(args, dims):
            if bd is None:
                shape = core.get_aval(x).shape
                x = lax.broadcast_in_dim(x, (axis_size,) + shape, tuple(range(1, len(shape) + 1)))
            else:
                x = moveaxis(x, bd, 0)
            xs.append(x)
    outs = sort_p.bind(
        *xs, dimension=dimension + (dimension >= d), is_stable=is_stable, num_keys=num_keys
    )
    return outs, [d] * len(outs)


jvp_rules[sort_p] = _sort_jvp
batch_rules[sort_p] = _sort_batch


def _canonical_dimension(name: str, dimension, shape) -> int:
    d = operator.index(dimension)
    if not -len(shape) <= d < len(shape):
        raise ValueError(
            f"{name}: dimension {dimension} is out of range for operands of shape {tuple(shape)}"
        )
    return d % len(shape)


def sort(operand_, dimension: int = -1, is_stable: bool = True, num_keys: int = 1):
    """Sort an array, or several arrays by the first ``num_keys`` of them, along ``dimension``.

    Args:
      operand_: an array or a sequence of arrays of one shape (dtypes may differ).
      dimension: the dimension to sort (negative counts from the end).
      is_stable: whether equal keys keep their order (fungrad always sorts stably).
      num_keys: how many leading operands form the lexicographic key.

    Returns:
      The sorted array, or a tuple of sorted arrays for a sequence input.

    Example: ``sort((keys, values))`` sorts ``values`` by ``keys``.
    """
    multiple = isinstance(operand_, (list, tuple))
    xs = [operand(x, "sort") for x in (operand_ if multiple else [operand_])]
    if not xs:
        raise TypeError("sort: needs at least one operand")
    out = sort_p.bind(
        *xs,
        dimension=_canonical_dimension("sort", dimension, xs[0].shape),
        is_stable=bool(is_stable),
        num_keys=operator.index(num_keys),
    )
    return tuple(out) if multiple else out[0]


def sort_key_val(keys, values, dimension: int = -1, is_stable: bool = True):
    """Sort ``keys`` along ``dimension`` and apply the same permutation to ``values``.

    Example: ``sort_key_val(jnp.array([3, 1, 2]), jnp.array([0., 1., 2.]))`` is
    ``([1, 2, 3], [1., 2., 0.])``.
    """
    k, v = sort((keys, values), dimension=dimension, is_stable=is_stable, num_keys=1)
    return k, v


# -- top_k --------------------------------------------------------------------------------------


def _top_k_abstract_eval(x, *, k, axis):
    name = "top_k"
    check_kinds(name, x.dtype, ANY)
    if not 0 <= axis < x.ndim:
        raise ValueError(
            f"{name}: axis {axis} is not a dimension of an operand of shape "
            f"{x.shape} (top_k needs at least one dimension)"
        )
    if not 0 <= k <= x.shape[axis]:
        raise ValueError(
            f"{name}: k={k} must be between 0 and the size {x.shape[axis]} of axis "
            f"{axis} (operand shape {x.shape})"
        )
    shape = x.shape[:axis] + (k,) + x.shape[axis + 1 :]
    # NB: JAX marks the indices weakly typed when the operand is; fungrad's int32 indices are
    # never weak.
    return [ShapedArray(shape, x.dtype, x.weak_type), ShapedArray(shape, np.int32)]


def _total_order_key(x: np.ndarray) -> np.ndarray:
    """An integer array ordered like ``x`` under XLA's total order (floats: their bits, with
    the magnitude bits of negative values flipped so that -NaN < -inf < -0.0 < 0.0)."""
    if dtypes.kind(x.dtype) == "f":
        bits = np.dtype(f"i{x.dtype.itemsize}")
        i = np.ascontiguousarray(x).view(bits)
        return np.where(i < 0, i ^ np.iinfo(bits).max, i)
    if dtypes.kind(x.dtype) == "b":
        return x.astype(np.uint8)
    return x


def _top_k_impl(x, *, k, axis):
    x = np.asarray(x)
    # ~key reverses the order without overflow, and a stable ascending sort of it keeps equal
    # values in index order: descending values, lowest index first.
    order = np.argsort(~_total_order_key(x), axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return [np.take_along_axis(x, idx, axis=axis), idx.astype(np.int32)]


top_k_p = standard_primitive("top_k", _top_k_impl, _top_k_abstract_eval, multiple_results=True)


def _top_k_jvp(primals, tangents, *, k, axis):
    (x,), (t,) = primals, tangents
    values, indices = top_k_p.bind(x, k=k, axis=axis)
    return [values, indices], [
        _take_along_axis(t, indices, axis),
        Zero(tangent_aval(core.get_aval(indices))),
    ]


def _top_k_batch(axis_size, args, dims, *, k, axis):
    (x,), (d,) = args, dims
    return top_k_p.bind(x, k=k, axis=axis + (axis >= d)), [d, d]


jvp_rules[top_k_p] = _top_k_jvp
batch_rules[top_k_p] = _top_k_batch


def top_k(operand_, k: int, *, axis: int = -1):
    """The ``k`` largest entries along ``axis`` and their int32 indices, largest first.

    Ties go to the lower index; NaN counts as larger than inf (and -NaN smaller than -inf),
    and 0.0 as larger than -0.0, following XLA's total order.

    Example: ``top_k(jnp.array([1., 3., 2.]), 2)`` is ``([3., 2.], [1, 2])``.
    """
    x = operand(operand_, "top_k")
    if dtypes.kind(x.dtype) == "c":
        # JAX's top_k rejects complex operands with a ValueError too (no order is defined).
        raise ValueError(
            f"top_k: complex operands ({x.dtype.name}{list(x.shape)}) have no order to take "
            "the largest of; apply it to lax.real(x), lax.imag(x) or lax.abs(x)"
        )
    try:
        k = operator.index(k)
    except TypeError:
        raise TypeError(
            f"top_k: k must be a static integer, got {type(k).__name__} {k!r:.40}"
        ) from None
    if k < 0:
        raise ValueError(f"top_k: k must be nonnegative, got {k}")
    axis = _canonical_dimension("top_k", axis, x.shape)
    values, indices = top_k_p.bind(x, k=k, axis=axis)
    return values, indices


# -- lowering: a native merge sort step (fungrad/lowering/steps.py SortStep) --------------------


def _sort_step(ctx, operands, dimension, num_keys, order, k):
    from fungrad.lowering.steps import SortStep, scratch_slots

    planner = ctx.planner
    shape = operands[0].shape
    inputs = [ctx.materialize(x).buffer for x in operands]
    outs = [
        planner.new_buffer(shape[:dimension] + (k,) + shape[dimension + 1 :], x.dtype, "temp")
        for x in operands
    ]
    index = None
    if order == "top_k":
        index = planner.new_buffer(outs[0].shape, np.int32, "temp")
    slots = scratch_slots(shape, dimension)
    scratch = planner.new_buffer((4 * shape[dimension] * slots,), np.int64, "temp")
    planner.add_step(
        SortStep(
            f"{order}_{outs[0].name}",
            inputs,
            outs,
            scratch,
            shape,
            dimension,
            num_keys,
            order,
            k,
            index,
        )
    )
    return [planner.buffer_tensor(b, order) for b in outs + ([index] if index else [])]


def _sort_lowering(ctx, *operands, dimension, is_stable, num_keys):
    return _sort_step(ctx, operands, dimension, num_keys, "sort", operands[0].shape[dimension])


def _top_k_lowering(ctx, x, *, k, axis):
    return _sort_step(ctx, [x], axis, 1, "top_k", k)


kernel.register_lowering(sort_p, _sort_lowering)
kernel.register_lowering(top_k_p, _top_k_lowering)
