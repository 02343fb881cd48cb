"""The public transform API (``fungrad.make_jaxpr``, ...), over pytrees of arguments."""

from __future__ import annotations

import functools

from fungrad import core, tree_util
from fungrad.array import Array, is_arraylike
from fungrad.ir.passes import simplify
from fungrad.transforms.jit import jit  # noqa: F401  (re-exported: fungrad.jit)
from fungrad.transforms.staging import trace_to_jaxpr


def _normalize_argnums(fun_name: str, argnums, nargs: int) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    out = []
    for i in nums:
        if not isinstance(i, int):
            raise TypeError(f"{fun_name}: argnums must be ints, got {i!r}")
        j = i + nargs if i < 0 else i
        if not 0 <= j < nargs:
            raise ValueError(f"{fun_name}: argnum {i} is out of range for a call with "
                             f"{nargs} positional arguments")
        out.append(j)
    return tuple(out)


def abstractify(x, what: str) -> core.ShapedArray:
    """The aval a traced argument gets (canonical dtype; Python scalars are weak)."""
    if not is_arraylike(x):
        raise TypeError(f"{what}: argument of type {type(x).__name__} is not a valid fungrad "
                        "type; pass arrays, numpy values or Python scalars (or mark it static)")
    aval = core.get_aval(x)
    if type(x) is not Array and not isinstance(x, core.Tracer):
        from fungrad import dtypes
        aval = aval.update(dtype=dtypes.canonicalize_dtype(aval.dtype))
    return aval


def make_jaxpr(fun, static_argnums=(), return_shape: bool = False):
    """Return a function that traces ``fun`` and gives its ClosedJaxpr (printable).

    The jaxpr is simplified (common subexpressions merged, dead equations dropped), so e.g.
    ``make_jaxpr(grad(f))`` shows the gradient program without the unused primal output.

    ``static_argnums`` arguments are passed to ``fun`` as Python values; all others are
    pytrees of arrays traced abstractly. With ``return_shape=True`` the function returns
    ``(jaxpr, out_shape)`` where ``out_shape`` is a pytree of ShapedArrays.
    """
    name = getattr(fun, "__name__", "fun")

    @functools.wraps(fun)
    def make_jaxpr_f(*args, **kwargs):
        static = _normalize_argnums("make_jaxpr", static_argnums, len(args))
        dyn_args = [a for i, a in enumerate(args) if i not in static]
        flat, in_tree = tree_util.tree_flatten((dyn_args, kwargs))
        in_avals = [abstractify(x, f"make_jaxpr({name})") for x in flat]
        out_tree = []

        def flat_fun(*tracers):
            dyn, kw = tree_util.tree_unflatten(in_tree, tracers)
            it = iter(dyn)
            full = [a if i in static else next(it) for i, a in enumerate(args)]
            out = fun(*full, **kw)
            leaves, tree = tree_util.tree_flatten(out)
            for leaf in leaves:
                if not is_arraylike(leaf):
                    raise TypeError(f"make_jaxpr({name}): the function returned a value of type "
                                    f"{type(leaf).__name__}, which is not an array; return "
                                    "arrays (or pytrees of arrays)")
            out_tree.append(tree)
            return leaves

        closed = simplify(trace_to_jaxpr(flat_fun, in_avals))
        if return_shape:
            shapes = tree_util.tree_unflatten(out_tree[0], closed.out_avals)
            return closed, shapes
        return closed

    return make_jaxpr_f


def block_until_ready(x):
    """Wait for every array in the pytree ``x`` to be computed; returns ``x``."""
    for leaf in tree_util.tree_leaves(x):
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
    return x


# -- vmap ---------------------------------------------------------------------------------------

def _flatten_axes(what: str, tree_def, axes) -> list:
    """Broadcast an in_axes/out_axes spec (an int/None, or a pytree prefix of the values) to one
    entry per leaf of ``tree_def``."""
    if axes is None or isinstance(axes, int):
        return [axes] * tree_def.num_leaves
    leaf_marker = object()
    proxy = tree_util.tree_unflatten(tree_def, [leaf_marker] * tree_def.num_leaves)
    out: list = []

    def walk(spec, sub):
        if spec is None or isinstance(spec, int):
            out.extend([spec] * len(tree_util.tree_leaves(sub, is_leaf=lambda x: x is leaf_marker)))
            return
        spec_leaves, spec_tree = tree_util.tree_flatten(spec, is_leaf=lambda x: x is None)
        try:
            subtrees = spec_tree.flatten_up_to(sub)
        except ValueError:
            raise ValueError(f"vmap {what} specification must be a tree prefix of the "
                             f"corresponding value, got specification {axes} for value tree "
                             f"{tree_def}") from None
        for s, t in zip(spec_leaves, subtrees):
            walk(s, t)

    walk(axes, proxy)
    return out


def vmap(fun, in_axes=0, out_axes=0, axis_size=None):
    """Vectorise ``fun`` over a leading (or ``in_axes``) array axis, as ``jax.vmap``.

    ``in_axes``: an int, None (argument not mapped) or a pytree prefix of the positional
    arguments (a tuple with one entry per argument); negative axes count from the end.
    ``out_axes`` likewise for the outputs. ``axis_size`` is needed when no argument is mapped.
    """
    from fungrad.transforms.vmap import bdim_at_front, moveaxis, vmap_flat

    name = getattr(fun, "__name__", "fun")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)

    @functools.wraps(fun)
    def vmap_f(*args, **kwargs):
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError(f"vmap({name}) in_axes must be an int, None, or a tuple of entries "
                             f"corresponding to the positional arguments; got a tuple of length "
                             f"{len(in_axes)} for {len(args)} positional arguments")
        flat, in_tree = tree_util.tree_flatten(args)
        spec = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
        axes = _flatten_axes("in_axes", in_tree, spec if args else ())
        from fungrad.transforms.autodiff import _as_array
        flat = [_as_array(x, f"vmap({name})") for x in flat]
        dims, sizes = [], []
        for i, (x, ax) in enumerate(zip(flat, axes)):
            if ax is None:
                dims.append(None)
                continue
            if not -x.ndim <= ax < x.ndim or x.ndim == 0:
                raise ValueError(f"vmap({name}) was requested to map its argument along axis "
                                 f"{ax}, which implies that its rank should be at least "
                                 f"{max(ax + 1, -ax)}, but is only {x.ndim} (its shape is "
                                 f"{x.shape})")
            ax %= x.ndim
            dims.append(ax)
            sizes.append((i, x.shape[ax]))
        distinct = {s for _, s in sizes}
        if axis_size is not None:
            distinct.add(axis_size)
        if len(distinct) > 1:
            leaves_desc = ", ".join(f"argument leaf {i} has size {s}" for i, s in sizes)
            raise ValueError(f"vmap({name}) got inconsistent sizes for the mapped axis: "
                             f"{leaves_desc}" + (f", axis_size={axis_size}" if axis_size else ""))
        if not distinct:
            raise ValueError(f"vmap({name}) must have at least one non-None value in in_axes, "
                             "or be given axis_size")
        size = distinct.pop()
        out_tree_store = []

        def flat_fun(*leaves):
            out = fun(*tree_util.tree_unflatten(in_tree, leaves), **kwargs)
            out_leaves, out_tree = tree_util.tree_flatten(out)
            out_tree_store.append(out_tree)
            return [_as_array(o, f"vmap({name}) output") for o in out_leaves]

        outs, out_dims = vmap_flat(flat_fun, size, flat, dims)
        out_tree = out_tree_store[0]
        oaxes = _flatten_axes("out_axes", out_tree, out_axes)
        results = []
        for o, d, oa in zip(outs, out_dims, oaxes):
            if oa is None:
                if d is not None:
                    raise ValueError(f"vmap({name}) has out_axes None for an output that is "
                                     "batched (depends on a mapped input)")
                results.append(o)
                continue
            if d is None:  # an output that does not depend on the mapped inputs
                o, d = bdim_at_front(o, None, size), 0
            results.append(moveaxis(o, d, oa % core.get_aval(o).ndim))
        return tree_util.tree_unflatten(out_tree, results)

    return vmap_f
