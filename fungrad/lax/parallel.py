"""Collectives over named axes: psum, pmean, pmax, pmin, all_gather, psum_scatter, all_to_all,
ppermute, pshuffle, pswapaxes, pbroadcast, axis_index and axis_size (JAX's ``lax`` names).

A collective communicates between the examples of a named mapped axis: ``vmap(f,
axis_name="i")`` binds ``"i"`` while ``f`` runs. fungrad runs on one device, so the only way to
bind a name is vmap (``pmap`` is vmap under jit on one device; no ``shard_map``), and a
collective *is* its batching rule: the BatchTrace named ``"i"`` turns ``psum(x, "i")`` into a
sum over its batch dimension (``collective_rules``), whatever traces sit between them (``jit``,
``grad``, another vmap, which treats it as data parallel: ``batch_rules``). Semantics follow
JAX's vmap rules: ``psum`` of a value that does not vary along the axis is that value times the
axis size, ``all_gather`` gives every example the same stacked value, ``ppermute`` sends example
``src``'s value to ``dst`` and zeros to examples no pair sends to.

The primitives carry their axis names as params (``axes`` / ``axis_name``, tuples) and, where
the output shape needs it, the axis size. Each is linear in its operands (but pmax/pmin), with
JAX's transposes: psum's is psum, all_gather's is psum_scatter (and back), all_to_all's swaps
the split and concat axes, ppermute's inverts the permutation. pmax/pmin differentiate as
``reduce_max`` does (the mean of the tangents at the examples that attain the result), so
``vmap(grad(f))`` and ``grad(vmap(f))`` agree; JAX has no derivative for them.

Calling a collective with a name no enclosing vmap binds is JAX's ``NameError`` ("unbound axis
name"); so is a collective that reaches evaluation or the compiler unbatched.
"""

from __future__ import annotations

import math

import numpy as np

from fungrad import core, dtypes, tree_util
from fungrad.core import ShapedArray, get_aval
from fungrad.lax.utils import operand, standard_primitive
from fungrad.lowering import kernel
from fungrad.transforms.jvp import Zero, instantiate_zeros, jvp_rules, tangent_aval
from fungrad.transforms.transpose import UndefPrimal, deflinear_transpose, transpose_rules
from fungrad.transforms.vmap import (
    axis_frames,
    batch_rules,
    bdim_at_front,
    collective_axes,
    collective_rules,
    moveaxis,
)

__all__ = [
    "psum",
    "pmean",
    "pmax",
    "pmin",
    "all_gather",
    "psum_scatter",
    "all_to_all",
    "ppermute",
    "pshuffle",
    "pswapaxes",
    "pbroadcast",
    "axis_index",
    "axis_size",
    "psum_p",
    "pmax_p",
    "pmin_p",
    "all_gather_p",
    "all_to_all_p",
    "ppermute_p",
    "axis_index_p",
]


# -- the axis environment ---------------------------------------------------------------------


def _names(axis_name) -> tuple:
    """``axis_name`` as a tuple of names (a tuple or list names several axes)."""
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def _unbound(name, fname: str) -> NameError:
    from fungrad import distributed

    bound = [n for n, _ in axis_frames()] + distributed.process_axis_names()
    hint = (
        ""
        if distributed.is_initialized()
        else "; for pmap across processes call fungrad.distributed.initialize() first"
    )
    return NameError(
        f"unbound axis name: {name!r}. {fname} communicates over an axis that an enclosing "
        f"vmap or pmap names; the bound axis names are {bound}. Call it inside "
        f"vmap(f, axis_name={name!r}) or pmap(f, axis_name={name!r}) (a pmap across the "
        f"processes of an MPI job once fungrad.distributed is initialized){hint}"
    )


def _size(name, fname: str) -> int:
    from fungrad import distributed

    for n, size in reversed(axis_frames()):
        if n == name:
            return size
    axis = distributed.process_axis(name)
    if axis is not None:
        return axis.size
    raise _unbound(name, fname)


def axis_size(axis_name) -> int:
    """The size of the mapped axis ``axis_name`` (a Python int); for a tuple of names, the
    product of their sizes (``jax.lax.axis_size``)."""
    return math.prod(_size(n, "axis_size") for n in _names(axis_name))


def _single_name(axis_name, fname: str):
    names = _names(axis_name)
    if len(names) != 1:
        raise ValueError(
            f"{fname}: axis_name must name one axis under vmap, got {axis_name!r}; "
            f"nest one {fname} per axis instead"
        )
    return names[0]


def _process_impl(prim_name: str, run):
    """The eager impl of a collective: over a process axis (a multi-process pmap's, see
    fungrad.distributed) ``run(distributed, axis, *args, **params)`` communicates through
    MPI; any other name is unbound here (a vmap would have consumed its collectives)."""

    def impl(*args, **params):
        from fungrad import distributed

        names = _names(params.get("axes", params.get("axis_name")))
        axes = []
        for name in names:
            axis = distributed.process_axis(name)
            if axis is None:
                raise _unbound(name, prim_name)
            axes.append(axis)
        if len(axes) != 1:
            raise ValueError(
                f"{prim_name}: over several process axes {names}; a multi-process pmap binds "
                "one axis spanning the processes"
            )
        return run(distributed, axes[0], *args, **params)

    return impl


def _reduction_run(op: str):
    def run(d, axis, *xs, axes, axis_index_groups):
        return d.allreduce(axis, op, xs, axis_index_groups)

    return run


def _all_gather_run(d, pax, x, *, axis_name, axis, tiled, axis_size):
    return d.all_gather(pax, x, gather_axis=axis, tiled=tiled)


def _scatter_run(d, pax, x, *, axis_name, scatter_dimension, tiled, axis_size):
    return d.reduce_scatter(pax, x, scatter_dimension=scatter_dimension, tiled=tiled)


def _all_to_all_run(d, pax, x, *, axis_name, split_axis, concat_axis, tiled, axis_size):
    return d.all_to_all(pax, x, split_axis=split_axis, concat_axis=concat_axis, tiled=tiled)


def _ppermute_run(d, pax, x, *, axis_name, perm):
    return d.ppermute(pax, x, perm=perm)


def _axis_index_run(d, pax, *, axis_name):
    return np.array(pax.rank, np.int32)


def _unbound_lowering(prim):
    def rule(ctx, *args, **params):
        names = params.get("axes", params.get("axis_name"))
        raise _unbound(_names(names)[0], prim.name)

    kernel.register_lowering(prim, rule)


def _check_groups(groups, n: int, fname: str):
    """``axis_index_groups`` as a tuple of tuples covering ``range(n)`` once, equal sizes."""
    if groups is None:
        return None
    try:
        groups = tuple(tuple(int(i) for i in g) for g in groups)
    except TypeError:
        raise TypeError(
            f"{fname}: axis_index_groups must be a list of lists of ints, got {groups!r}"
        ) from None
    flat = sorted(i for g in groups for i in g)
    if flat != list(range(n)) or len({len(g) for g in groups}) != 1:
        raise ValueError(
            f"{fname}: axis_index_groups {groups} must cover the axis indices "
            f"0..{n - 1} exactly once, in groups of equal size"
        )
    return groups


# -- helpers ----------------------------------------------------------------------------------


def _take0(x, idx):
    """Rows ``idx`` (a list of ints) of ``x`` along axis 0 (a gather)."""
    from fungrad.lax.indexing import GatherDimensionNumbers, gather

    aval = get_aval(x)
    indices = core._array_type(np.asarray(idx, np.int32).reshape(len(idx), 1))
    dn = GatherDimensionNumbers(
        offset_dims=tuple(range(1, aval.ndim)), collapsed_slice_dims=(0,), start_index_map=(0,)
    )
    return gather(
        x, indices, dn, (1, *aval.shape[1:]), indices_are_sorted=False, mode="promise_in_bounds"
    )


def _scale(x, n: int):
    from fungrad import lax

    return lax.mul(x, lax.full((), n, get_aval(x).dtype))


# -- psum / pmax / pmin -----------------------------------------------------------------------


def _reduction_abstract_eval(name: str):
    def abstract_eval(*avals, axes, axis_index_groups):
        for a in avals:
            if dtypes.kind(a.dtype) not in "iuf":
                raise TypeError(f"{name} takes numeric operands, got {a.str_short()}")
        return list(avals)

    return abstract_eval


def _reduction_collective(prim, reduce_name: str):
    def rule(name, n, args, dims, *, axes, axis_index_groups):
        from fungrad import lax

        reduce = getattr(lax, reduce_name)
        outs, out_dims = [], []
        for x, d in zip(args, dims):
            if axis_index_groups is not None:
                x = bdim_at_front(x, d, n)
                per_group = [reduce(_take0(x, list(g)), (0,)) for g in axis_index_groups]
                stacked = lax.concatenate(
                    [
                        lax.broadcast_in_dim(
                            s, (1, *get_aval(s).shape), tuple(range(1, get_aval(s).ndim + 1))
                        )
                        for s in per_group
                    ],
                    0,
                )
                group_of = [0] * n
                for gi, g in enumerate(axis_index_groups):
                    for i in g:
                        group_of[i] = gi
                outs.append(_take0(stacked, group_of))
                out_dims.append(0)
            elif d is None:
                outs.append(_scale(x, n) if prim is psum_p else x)
                out_dims.append(None)
            else:
                outs.append(reduce(x, (d,)))
                out_dims.append(None)
        rest = tuple(a for a in axes if a != name)
        if rest:
            outs = prim.bind(*outs, axes=rest, axis_index_groups=None)
        return outs, out_dims

    return rule


def _reduction_batch(prim):
    def rule(axis_size_, args, dims, *, axes, axis_index_groups):
        return prim.bind(*args, axes=axes, axis_index_groups=axis_index_groups), list(dims)

    return rule


def _make_reduction(name: str):
    p = standard_primitive(
        name,
        _process_impl(name, _reduction_run(name[1:] if name != "psum" else "sum")),
        _reduction_abstract_eval(name),
        multiple_results=True,
    )
    collective_axes[p] = lambda params: params["axes"]
    batch_rules[p] = _reduction_batch(p)
    _unbound_lowering(p)
    return p


psum_p = _make_reduction("psum")
pmax_p = _make_reduction("pmax")
pmin_p = _make_reduction("pmin")
collective_rules[psum_p] = _reduction_collective(psum_p, "reduce_sum")
collective_rules[pmax_p] = _reduction_collective(pmax_p, "reduce_max")
collective_rules[pmin_p] = _reduction_collective(pmin_p, "reduce_min")


def _psum_jvp(primals, tangents, *, axes, axis_index_groups):
    outs = psum_p.bind(*primals, axes=axes, axis_index_groups=axis_index_groups)
    nz = [t for t in tangents if type(t) is not Zero]
    touts = iter(psum_p.bind(*nz, axes=axes, axis_index_groups=axis_index_groups) if nz else [])
    return outs, [t if type(t) is Zero else next(touts) for t in tangents]


def _psum_transpose(cts, *args, axes, axis_index_groups):
    nz = [instantiate_zeros(c) for c, a in zip(cts, args) if type(a) is UndefPrimal]
    outs = iter(psum_p.bind(*nz, axes=axes, axis_index_groups=axis_index_groups) if nz else [])
    return [next(outs) if type(a) is UndefPrimal else None for a in args]


jvp_rules[psum_p] = _psum_jvp
transpose_rules[psum_p] = _psum_transpose


def _chooser_jvp(prim):
    # reduce_max's rule across the axis: the mean of the tangents where x equals the result
    def rule(primals, tangents, *, axes, axis_index_groups):
        from fungrad import lax

        outs = prim.bind(*primals, axes=axes, axis_index_groups=axis_index_groups)
        touts = []
        for x, t, o in zip(primals, tangents, outs):
            if type(t) is Zero or dtypes.kind(get_aval(o).dtype) != "f":
                touts.append(Zero(tangent_aval(get_aval(o))))
                continue
            dt = get_aval(x).dtype
            hit = lax.convert_element_type(lax.eq(x, o), dt)
            # two binds: the count is known when linearizing, the tangent sum is linear
            (cnt,) = psum_p.bind(hit, axes=axes, axis_index_groups=axis_index_groups)
            (num,) = psum_p.bind(lax.mul(t, hit), axes=axes, axis_index_groups=axis_index_groups)
            touts.append(lax.div(num, cnt))
        return outs, touts

    jvp_rules[prim] = rule


_chooser_jvp(pmax_p)
_chooser_jvp(pmin_p)


def _tree_collective(fname: str, x, fn):
    leaves, tree = tree_util.tree_flatten(x)
    if not leaves:
        return x
    return tree_util.tree_unflatten(tree, fn([operand(v, fname) for v in leaves]))


def _reduce_tree(prim, fname: str, x, axis_name, axis_index_groups):
    names = _names(axis_name)
    sizes = [_size(n, fname) for n in names]
    if axis_index_groups is not None:
        if len(names) != 1:
            raise ValueError(
                f"{fname}: axis_index_groups needs a single axis name, got {axis_name!r}"
            )
        axis_index_groups = _check_groups(axis_index_groups, sizes[0], fname)

    def fn(leaves):
        from fungrad import lax

        leaves = [
            lax.convert_element_type(v, np.int32) if get_aval(v).dtype == np.bool_ else v
            for v in leaves
        ]
        if not names:
            return leaves
        return prim.bind(*leaves, axes=names, axis_index_groups=axis_index_groups)

    return _tree_collective(fname, x, fn)


def psum(x, axis_name, *, axis_index_groups=None):
    """All-reduce sum of ``x`` (a pytree) over the named axis (or tuple of axes) ``axis_name``:
    every example gets the sum over the axis (``jax.lax.psum``). Booleans are summed as int32;
    ``axis_index_groups`` (lists of indices covering the axis once) sums within each group."""
    return _reduce_tree(psum_p, "psum", x, axis_name, axis_index_groups)


def pmax(x, axis_name, *, axis_index_groups=None):
    """All-reduce maximum of ``x`` (a pytree) over the named axis ``axis_name``
    (``jax.lax.pmax``)."""
    return _reduce_tree(pmax_p, "pmax", x, axis_name, axis_index_groups)


def pmin(x, axis_name, *, axis_index_groups=None):
    """All-reduce minimum of ``x`` (a pytree) over the named axis ``axis_name``
    (``jax.lax.pmin``)."""
    return _reduce_tree(pmin_p, "pmin", x, axis_name, axis_index_groups)


def pmean(x, axis_name, *, axis_index_groups=None):
    """All-reduce mean of ``x`` (a pytree) over the named axis ``axis_name``: ``psum`` divided
    by the axis size (the group size with ``axis_index_groups``); integers give floats, as in
    JAX (``jax.lax.pmean``)."""
    from fungrad import lax

    total = psum(x, axis_name, axis_index_groups=axis_index_groups)
    n = axis_size(axis_name) if axis_index_groups is None else len(next(iter(axis_index_groups)))

    def div(v):
        dt = get_aval(v).dtype
        if dtypes.kind(dt) != "f":
            v = lax.convert_element_type(v, dtypes.default_float_dtype())
            dt = get_aval(v).dtype
        return lax.div(v, lax.full((), n, dt))

    return tree_util.tree_map(div, total)


# -- all_gather / psum_scatter ----------------------------------------------------------------


def _gather_shape(shape, axis: int, tiled: bool, n: int):
    if tiled:
        return shape[:axis] + (shape[axis] * n,) + shape[axis + 1 :]
    return shape[:axis] + (n,) + shape[axis:]


def _all_gather_abstract_eval(x, *, axis_name, axis, tiled, axis_size):
    return x.update(shape=_gather_shape(x.shape, axis, tiled, axis_size), weak_type=False)


all_gather_p = standard_primitive(
    "all_gather", _process_impl("all_gather", _all_gather_run), _all_gather_abstract_eval
)


def _all_gather_collective(name, n, args, dims, *, axis_name, axis, tiled, axis_size):
    from fungrad import lax

    (x,), (d,) = args, dims
    if d is None:
        aval = get_aval(x)
        shape = aval.shape[:axis] + (n,) + aval.shape[axis:]
        out = lax.broadcast_in_dim(x, shape, tuple(i + (i >= axis) for i in range(aval.ndim)))
    else:
        out = moveaxis(x, d, axis)
    if tiled:
        shape = get_aval(out).shape
        out = lax.reshape(out, shape[:axis] + (shape[axis] * shape[axis + 1],) + shape[axis + 2 :])
    return out, None


def _all_gather_batch(axis_size_, args, dims, *, axis_name, axis, tiled, axis_size):
    (x,), (d,) = args, dims
    return all_gather_p.bind(
        moveaxis(x, d, 0), axis_name=axis_name, axis=axis + 1, tiled=tiled, axis_size=axis_size
    ), 0


def _scatter_abstract_eval(x, *, axis_name, scatter_dimension, tiled, axis_size):
    shape, sd = x.shape, scatter_dimension
    if tiled:
        shape = shape[:sd] + (shape[sd] // axis_size,) + shape[sd + 1 :]
    else:
        shape = shape[:sd] + shape[sd + 1 :]
    return x.update(shape=shape, weak_type=False)


reduce_scatter_p = standard_primitive(
    "reduce_scatter", _process_impl("psum_scatter", _scatter_run), _scatter_abstract_eval
)


def _scatter_collective(name, n, args, dims, *, axis_name, scatter_dimension, tiled, axis_size):
    from fungrad import lax

    (x,), (d,) = args, dims
    s = _scale(x, n) if d is None else lax.reduce_sum(x, (d,))
    if tiled:
        shape = get_aval(s).shape
        sd = scatter_dimension
        s = lax.reshape(s, shape[:sd] + (n, shape[sd] // n) + shape[sd + 1 :])
    return s, scatter_dimension


def _scatter_batch(axis_size_, args, dims, *, axis_name, scatter_dimension, tiled, axis_size):
    (x,), (d,) = args, dims
    return reduce_scatter_p.bind(
        moveaxis(x, d, 0),
        axis_name=axis_name,
        scatter_dimension=scatter_dimension + 1,
        tiled=tiled,
        axis_size=axis_size,
    ), 0


def _all_gather_transpose(ct, x, *, axis_name, axis, tiled, axis_size):
    return [
        reduce_scatter_p.bind(
            ct, axis_name=axis_name, scatter_dimension=axis, tiled=tiled, axis_size=axis_size
        )
    ]


def _scatter_transpose(ct, x, *, axis_name, scatter_dimension, tiled, axis_size):
    return [
        all_gather_p.bind(
            ct, axis_name=axis_name, axis=scatter_dimension, tiled=tiled, axis_size=axis_size
        )
    ]


def _linear_jvp(prim):
    def rule(primals, tangents, **params):
        (x,), (t,) = primals, tangents
        out = prim.bind(x, **params)
        if type(t) is Zero:
            return out, Zero(tangent_aval(get_aval(out)))
        return out, prim.bind(t, **params)

    jvp_rules[prim] = rule


for _p, _coll, _batch, _tr in (
    (all_gather_p, _all_gather_collective, _all_gather_batch, _all_gather_transpose),
    (reduce_scatter_p, _scatter_collective, _scatter_batch, _scatter_transpose),
):
    collective_axes[_p] = lambda params: params["axis_name"]
    collective_rules[_p] = _coll
    batch_rules[_p] = _batch
    _linear_jvp(_p)
    deflinear_transpose(_p, _tr)
    _unbound_lowering(_p)


def all_gather(x, axis_name, *, axis_index_groups=None, axis=0, tiled=False, to="varying"):
    """Every example's ``x`` (a pytree), stacked along a new axis ``axis`` (or concatenated
    along the existing axis ``axis`` with ``tiled=True``), the same for every example of the
    named axis (``jax.lax.all_gather``). ``to`` only concerns shard_map's types: accepted."""
    name = _single_name(axis_name, "all_gather")
    n = _size(name, "all_gather")
    if axis_index_groups is not None:
        raise ValueError(
            "all_gather: axis_index_groups is not supported under vmap (as in "
            "JAX); gather the whole axis and slice the groups out"
        )

    def fn(leaves):
        outs = []
        for v in leaves:
            r = get_aval(v).ndim
            hi = r if tiled else r + 1
            if not -hi <= axis < hi or (tiled and r == 0):
                raise ValueError(
                    f"all_gather: axis {axis} is out of range for an operand of "
                    f"shape {get_aval(v).shape} (tiled={tiled}); give an axis in "
                    f"[{-hi}, {hi})"
                )
            outs.append(
                all_gather_p.bind(
                    v, axis_name=(name,), axis=int(axis) % hi, tiled=bool(tiled), axis_size=n
                )
            )
        return outs

    return _tree_collective("all_gather", x, fn)


def psum_scatter(x, axis_name, *, scatter_dimension=0, axis_index_groups=None, tiled=False):
    """``psum`` whose result is split along ``scatter_dimension`` between the examples of the
    named axis: example ``i`` gets block ``i`` (``jax.lax.psum_scatter``). Without ``tiled``
    that dimension must have the axis size and is removed; with it, it must be divisible by
    the axis size and shrinks by that factor."""
    name = _single_name(axis_name, "psum_scatter")
    n = _size(name, "psum_scatter")
    if axis_index_groups is not None:
        raise ValueError("psum_scatter: axis_index_groups is not supported under vmap (as in JAX)")

    def fn(leaves):
        outs = []
        for v in leaves:
            shape = get_aval(v).shape
            if not -len(shape) <= scatter_dimension < len(shape):
                raise ValueError(
                    f"psum_scatter: scatter_dimension {scatter_dimension} is out "
                    f"of range for an operand of shape {shape}"
                )
            sd = int(scatter_dimension) % len(shape)
            if shape[sd] % n if tiled else shape[sd] != n:
                need = "divisible by" if tiled else "equal to"
                raise ValueError(
                    f"psum_scatter: dimension {sd} of the operand (shape {shape}) "
                    f"must be {need} the size {n} of axis {name!r}"
                )
            if get_aval(v).dtype == np.bool_:
                from fungrad import lax

                v = lax.convert_element_type(v, np.int32)
            outs.append(
                reduce_scatter_p.bind(
                    v, axis_name=(name,), scatter_dimension=sd, tiled=bool(tiled), axis_size=n
                )
            )
        return outs

    return _tree_collective("psum_scatter", x, fn)


# -- all_to_all -------------------------------------------------------------------------------


def _all_to_all_shape(shape, split_axis, concat_axis, tiled, n):
    if tiled:
        shape = list(shape)
        shape[split_axis] //= n
        shape[concat_axis] *= n
        return tuple(shape)
    rest = [s for i, s in enumerate(shape) if i != split_axis]
    rest.insert(concat_axis, n)
    return tuple(rest)


def _all_to_all_abstract_eval(x, *, axis_name, split_axis, concat_axis, tiled, axis_size):
    return x.update(
        shape=_all_to_all_shape(x.shape, split_axis, concat_axis, tiled, axis_size), weak_type=False
    )


all_to_all_p = standard_primitive(
    "all_to_all", _process_impl("all_to_all", _all_to_all_run), _all_to_all_abstract_eval
)


def _all_to_all_collective(
    name, n, args, dims, *, axis_name, split_axis, concat_axis, tiled, axis_size
):
    # x[k] is example k's value; example j gets, from every k, block j of x[k] along
    # split_axis, placed at position k along concat_axis: a transpose of the batch axis and
    # the split axis (blocks reshaped out and in when tiled).
    from fungrad import lax

    (x,), (d,) = args, dims
    x = bdim_at_front(x, d, n)
    shape = get_aval(x).shape[1:]
    r = len(shape)
    if not tiled:
        rest = [1 + i for i in range(r) if i != split_axis]
        rest.insert(concat_axis, 0)
        return lax.transpose(x, (1 + split_axis, *rest)), 0
    split = (n, *shape[:split_axis], n, shape[split_axis] // n, *shape[split_axis + 1 :])
    x = lax.reshape(x, split)
    # axes of x now: 0 = source k, 1 + i for per-example dims before split_axis, the block
    # index j at 1 + split_axis, and the block contents right after it
    pos = [0] * r  # where per-example dim i (its block contents for split_axis) now is
    for i in range(r):
        pos[i] = 1 + i + (i >= split_axis)
    perm = [1 + split_axis]
    for i in range(r):
        if i == concat_axis:
            perm.append(0)
        perm.append(pos[i])
    y = lax.transpose(x, tuple(perm))
    yshape = get_aval(y).shape
    c = 1 + concat_axis  # k sits at c, the concat dim right after it
    y = lax.reshape(y, yshape[:c] + (yshape[c] * yshape[c + 1],) + yshape[c + 2 :])
    return y, 0


def _all_to_all_batch(
    axis_size_, args, dims, *, axis_name, split_axis, concat_axis, tiled, axis_size
):
    (x,), (d,) = args, dims
    return all_to_all_p.bind(
        moveaxis(x, d, 0),
        axis_name=axis_name,
        split_axis=split_axis + 1,
        concat_axis=concat_axis + 1,
        tiled=tiled,
        axis_size=axis_size,
    ), 0


def _all_to_all_transpose(ct, x, *, axis_name, split_axis, concat_axis, tiled, axis_size):
    return [
        all_to_all_p.bind(
            ct,
            axis_name=axis_name,
            split_axis=concat_axis,
            concat_axis=split_axis,
            tiled=tiled,
            axis_size=axis_size,
        )
    ]


collective_axes[all_to_all_p] = lambda params: params["axis_name"]
collective_rules[all_to_all_p] = _all_to_all_collective
batch_rules[all_to_all_p] = _all_to_all_batch
_linear_jvp(all_to_all_p)
deflinear_transpose(all_to_all_p, _all_to_all_transpose)
_unbound_lowering(all_to_all_p)


def all_to_all(x, axis_name, split_axis, concat_axis, *, axis_index_groups=None, tiled=False):
    """Split ``x`` (a pytree) along ``split_axis`` into one block per example of the named
    axis, send block ``j`` to example ``j``, and put the blocks received along
    ``concat_axis``, ordered by sender (``jax.lax.all_to_all``). Without ``tiled`` the split
    axis must have the axis size; it is removed and a new axis of that size is inserted at
    ``concat_axis``. With ``tiled`` it must be divisible by the axis size, and the blocks are
    concatenated along the existing ``concat_axis``."""
    name = _single_name(axis_name, "all_to_all")
    n = _size(name, "all_to_all")
    if axis_index_groups is not None:
        raise ValueError("all_to_all: axis_index_groups is not supported under vmap (as in JAX)")

    def fn(leaves):
        outs = []
        for v in leaves:
            shape = get_aval(v).shape
            r = len(shape)
            for what, ax in (("split_axis", split_axis), ("concat_axis", concat_axis)):
                if not -r <= ax < r:
                    raise ValueError(
                        f"all_to_all: {what} {ax} is out of range for an operand of shape {shape}"
                    )
            sa, ca = int(split_axis) % r, int(concat_axis) % r
            if shape[sa] % n if tiled else shape[sa] != n:
                need = "divisible by" if tiled else "equal to"
                raise ValueError(
                    f"all_to_all: x.shape[split_axis] = {shape[sa]} (shape "
                    f"{shape}) must be {need} the size {n} of axis {name!r}"
                )
            outs.append(
                all_to_all_p.bind(
                    v,
                    axis_name=(name,),
                    split_axis=sa,
                    concat_axis=ca,
                    tiled=bool(tiled),
                    axis_size=n,
                )
            )
        return outs

    return _tree_collective("all_to_all", x, fn)


def pswapaxes(x, axis_name, axis, *, axis_index_groups=None):
    """Swap the named axis with the positional axis ``axis`` of ``x``, which must have the
    axis size: ``all_to_all(x, axis_name, axis, axis)`` (``jax.lax.pswapaxes``)."""
    return all_to_all(x, axis_name, axis, axis, axis_index_groups=axis_index_groups)


# -- ppermute ---------------------------------------------------------------------------------


def _ppermute_abstract_eval(x, *, axis_name, perm):
    return x


ppermute_p = standard_primitive(
    "ppermute", _process_impl("ppermute", _ppermute_run), _ppermute_abstract_eval
)


def _ppermute_collective(name, n, args, dims, *, axis_name, perm):
    from fungrad import lax

    (x,), (d,) = args, dims
    if d is None and sorted(dst for _, dst in perm) == list(range(n)):
        return x, None  # every example receives the same value
    x = bdim_at_front(x, d, n)
    src_of = {dst: src for src, dst in perm}
    out = _take0(x, [src_of.get(j, 0) for j in range(n)])
    if len(src_of) < n:
        aval = get_aval(out)
        keep = np.zeros(aval.shape, bool)
        keep[list(src_of)] = True
        out = lax.select_n(core._array_type(keep), lax.full(aval.shape, 0, aval.dtype), out)
    return out, 0


def _ppermute_batch(axis_size_, args, dims, *, axis_name, perm):
    (x,), (d,) = args, dims
    return ppermute_p.bind(x, axis_name=axis_name, perm=perm), d


def _ppermute_transpose(ct, x, *, axis_name, perm):
    return [ppermute_p.bind(ct, axis_name=axis_name, perm=tuple((d, s) for s, d in perm))]


collective_axes[ppermute_p] = lambda params: params["axis_name"]
collective_rules[ppermute_p] = _ppermute_collective
batch_rules[ppermute_p] = _ppermute_batch
_linear_jvp(ppermute_p)
deflinear_transpose(ppermute_p, _ppermute_transpose)
_unbound_lowering(ppermute_p)


def _check_perm(perm, n: int, fname: str):
    try:
        pairs = tuple((int(s), int(d)) for s, d in perm)
    except (TypeError, ValueError):
        raise TypeError(
            f"{fname}: perm must be a list of (source, destination) index pairs, got {perm!r}"
        ) from None
    srcs, dsts = [s for s, _ in pairs], [d for _, d in pairs]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts):
        raise ValueError(
            f"{fname}: perm {list(pairs)} has a repeated source or destination; "
            "each example sends to and receives from at most one other"
        )
    if any(not 0 <= i < n for i in srcs + dsts):
        raise ValueError(f"{fname}: perm {list(pairs)} has an index outside the axis of size {n}")
    return pairs


def ppermute(x, axis_name, perm):
    """Send example ``src``'s ``x`` (a pytree) to example ``dst`` for each pair ``(src, dst)``
    of ``perm``; examples nobody sends to get zeros (``jax.lax.ppermute``)."""
    name = _single_name(axis_name, "ppermute")
    pairs = _check_perm(perm, _size(name, "ppermute"), "ppermute")
    return _tree_collective(
        "ppermute",
        x,
        lambda leaves: [ppermute_p.bind(v, axis_name=(name,), perm=pairs) for v in leaves],
    )


def pshuffle(x, axis_name, perm):
    """``ppermute`` with the permutation given as sources: example ``i`` receives example
    ``perm[i]``'s ``x``; ``perm`` must be a permutation of the axis (``jax.lax.pshuffle``)."""
    name = _single_name(axis_name, "pshuffle")
    n = _size(name, "pshuffle")
    if sorted(int(i) for i in perm) != list(range(n)):
        raise ValueError(f"pshuffle: perm {list(perm)} must be a permutation of range({n})")
    return ppermute(x, name, [(int(s), i) for i, s in enumerate(perm)])


def pbroadcast(x, axis_name, source):
    """Every example gets example ``source``'s ``x`` (a pytree) (``jax.lax.pbroadcast``): as
    ``psum(where(axis_index(axis_name) == source, x, 0), axis_name)``."""
    from fungrad import lax

    name = _single_name(axis_name, "pbroadcast")
    n = _size(name, "pbroadcast")
    if not 0 <= int(source) < n:
        raise ValueError(f"pbroadcast: source {source} is outside the axis {name!r} of size {n}")
    me = lax.eq(axis_index(name), lax.full((), int(source), np.int32))

    def one(v):
        aval = get_aval(v)
        mask = lax.broadcast_in_dim(me, aval.shape, ())
        return psum(lax.select_n(mask, lax.full(aval.shape, 0, aval.dtype), v), name)

    return _tree_collective("pbroadcast", x, lambda leaves: [one(v) for v in leaves])


# -- axis_index -------------------------------------------------------------------------------


def _axis_index_abstract_eval(*, axis_name):
    return ShapedArray((), np.dtype(np.int32))


axis_index_p = standard_primitive(
    "axis_index", _process_impl("axis_index", _axis_index_run), _axis_index_abstract_eval
)


def _axis_index_collective(name, n, args, dims, *, axis_name):
    from fungrad import lax

    return lax.iota(np.int32, n), 0


def _axis_index_batch(axis_size_, args, dims, *, axis_name):
    return axis_index_p.bind(axis_name=axis_name), None


def _axis_index_jvp(primals, tangents, *, axis_name):
    out = axis_index_p.bind(axis_name=axis_name)
    return out, Zero(tangent_aval(get_aval(out)))


collective_axes[axis_index_p] = lambda params: params["axis_name"]
collective_rules[axis_index_p] = _axis_index_collective
batch_rules[axis_index_p] = _axis_index_batch
jvp_rules[axis_index_p] = _axis_index_jvp
_unbound_lowering(axis_index_p)


def axis_index(axis_name):
    """The index of the current example along the named axis, an int32 scalar; for a tuple of
    names, the row-major index over those axes (``jax.lax.axis_index``)."""
    from fungrad import lax

    names = _names(axis_name)
    out = None
    for name in names:
        n = _size(name, "axis_index")
        i = axis_index_p.bind(axis_name=(name,))
        out = i if out is None else lax.add(lax.mul(out, lax.full((), n, np.int32)), i)
    if out is None:
        return lax.full((), 0, np.int32)
    return out
