"""``vmap``: the user-facing function (``jax.vmap``) over the batching machinery of
fungrad/transforms/vmap.py: ``in_axes``/``out_axes`` read as pytree prefixes of the arguments
and outputs, ``axis_size``, ``axis_name`` for collectives, and errors that name parameters and
leaf paths."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from fungrad import core, tree_util
from fungrad.transforms import array_ops
from fungrad.transforms.api_util import Signature, check_callable
from fungrad.transforms.vmap import bdim_at_front, moveaxis, vmap_flat
from fungrad.tree_util import _describe_node, _leaf_paths, _path_segments

__all__ = ["vmap"]

_F = TypeVar("_F", bound=Callable[..., Any])


def _is_axis(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _check_axes_leaves(name: str, what: str, axes) -> None:
    """A TypeError unless every leaf of the ``in_axes``/``out_axes`` spec is an int or None
    (checked when ``vmap`` is applied, as JAX does)."""
    leaves, tree = tree_util.tree_flatten(axes, is_leaf=lambda x: x is None)
    for path, leaf in zip(_leaf_paths(tree, what), leaves):
        if leaf is not None and not _is_axis(leaf):
            raise TypeError(
                f"vmap({name}) {what} must be an int, None, or a (nested) tuple/list/dict of "
                "them, but "
                f"{path} is {leaf!r} (a {type(leaf).__name__}); write an int axis (negative "
                "counts from the end) or None for a value that is not mapped"
            )


def _broadcast_axes(
    name: str, what: str, spec, spec_path: str, value_tree, value_path: str, out: list
) -> None:
    """Append one axis per leaf of ``value_tree``, reading ``spec`` as a tree prefix of it (an
    int or None stands for a whole subtree); a ValueError names both paths where they part."""
    spec_leaves, spec_tree = tree_util.tree_flatten(spec, is_leaf=lambda x: x is None)
    it = iter(spec_leaves)
    noun = "arguments" if what == "in_axes" else "outputs"

    def walk(s, v, sp, vp):
        if s.node_type is None:
            out.extend([next(it)] * v.num_leaves)
            return
        if (
            v.node_type != s.node_type
            or v.node_aux != s.node_aux
            or len(v.children) != len(s.children)
        ):
            raise ValueError(
                f"vmap({name}) {what} must be a tree prefix of the {noun}, but {sp} is "
                f"{_describe_node(s)} where {vp} is {_describe_node(v)}. Give an int or None "
                f"for the whole of {vp}, or a container of the same type and keys/length"
            )
        for seg, sc, vc in zip(_path_segments(s), s.children, v.children):
            walk(sc, vc, sp + seg, vp + seg)

    walk(spec_tree, value_tree, spec_path, value_path)


def _mapped_sizes_error(name: str, mapped, axis_size) -> ValueError:
    """The error for mapped axes of different sizes: each size with the leaves that have it."""
    by_size: dict[int, list[str]] = {}
    for path, ax, aval in mapped:
        by_size.setdefault(aval.shape[ax], []).append(f"axis {ax} of {path} ({aval.str_short()})")
    lines = []
    for size, where in sorted(by_size.items(), key=lambda kv: -len(kv[1])):
        more = f", and {len(where) - 3} more" if len(where) > 3 else ""
        lines.append(f"  * size {size}: {', '.join(where[:3])}{more}")
    if axis_size is not None:
        lines.append(f"  * axis_size={axis_size}")
    return ValueError(
        f"vmap({name}) got inconsistent sizes for the mapped axes:\n"
        + "\n".join(lines)
        + "\nEvery mapped axis must have the same size: fix the shapes, map another axis with "
        "in_axes, or pass in_axes=None for an argument that is the same for every example."
    )


def _as_vmap_value(x, name: str, path: str):
    from fungrad.transforms.autodiff import _as_array

    try:
        return _as_array(x, f"vmap({name})")
    except TypeError:
        raise TypeError(
            f"vmap({name}): {path} is a {type(x).__name__} ({x!r:.60}), not an "
            "array; vmap maps arrays, numpy values and Python scalars (or pytrees "
            "of them). Pass other values by closing over them "
            "(functools.partial)"
        ) from None


def vmap(
    fun: _F,
    in_axes: Any = 0,
    out_axes: Any = 0,
    axis_name=None,
    axis_size=None,
    spmd_axis_name=None,
    sum_match: bool = False,
) -> _F:
    """Vectorise ``fun`` over a leading (or ``in_axes``) array axis, as ``jax.vmap``.

    ``in_axes``: an int, None (argument not mapped) or a pytree prefix of the positional
    arguments (a tuple with one entry per argument; a list is read as a tuple, as JAX does);
    negative axes count from the end. ``out_axes`` likewise for the outputs, each within
    ``[-r, r)`` for an output of rank ``r`` including the mapped axis. ``axis_size`` is needed
    when no argument is mapped. Keyword arguments are mapped along axis 0, as in JAX (close
    over a value to pass it unmapped). Errors name the function's parameters and the pytree
    path of the leaf (``argument params['w']``).

    ``axis_name`` (any hashable) names the mapped axis for the collectives of
    :mod:`fungrad.lax` (``psum``, ``pmean``, ``all_gather``, ``axis_index``...) called inside
    ``fun``. ``spmd_axis_name`` only places the mapped axis on mesh axes of a sharded
    computation; fungrad runs on one device, so it has no effect on values and is accepted for
    JAX's signature. ``sum_match=True`` sums an output over the mapped axis where its
    ``out_axes`` is None and it is batched (instead of raising).
    """
    check_callable(fun, "vmap", "pass the function to map: vmap(f, in_axes, out_axes)")
    name = getattr(fun, "__name__", "fun")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if not (in_axes is None or _is_axis(in_axes) or type(in_axes) is tuple):
        raise TypeError(
            f"vmap({name}) in_axes must be an int, None, or a tuple of entries "
            f"corresponding to the positional arguments, got {in_axes!r}"
        )
    _check_axes_leaves(name, "in_axes", in_axes)
    _check_axes_leaves(name, "out_axes", out_axes)
    if axis_size is not None and not (_is_axis(axis_size) and axis_size >= 0):
        raise TypeError(
            f"vmap({name}): axis_size must be a non-negative int or None, got {axis_size!r}"
        )
    if axis_name is not None:
        try:
            hash(axis_name)
        except TypeError:
            raise TypeError(
                f"vmap({name}): axis_name must be hashable (a string, say), got {axis_name!r}"
            ) from None
    sig = Signature(fun)

    @functools.wraps(fun)
    def vmap_f(*args, **kwargs):
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError(
                f"vmap({name}) in_axes must be an int, None, or a tuple of entries "
                f"corresponding to the positional arguments; got a tuple of length "
                f"{len(in_axes)} for {len(args)} positional arguments"
            )
        flat, in_tree = tree_util.tree_flatten((args, kwargs))
        args_tree, kwargs_tree = in_tree.children
        axes: list = []
        paths: list[str] = []
        for i, sub in enumerate(args_tree.children):
            arg = f"argument {sig.arg_name(i)}"
            spec = in_axes[i] if isinstance(in_axes, tuple) else in_axes
            _broadcast_axes(name, "in_axes", spec, f"in_axes[{i}]", sub, arg, axes)
            paths += _leaf_paths(sub, arg)
        for key, sub in zip(kwargs_tree.node_aux or (), kwargs_tree.children):
            axes += [0] * sub.num_leaves  # keyword arguments are mapped along axis 0 (JAX)
            paths += _leaf_paths(sub, f"keyword argument {key}")
        # Unmapped leaves reach fun as they are (a Python int stays an int, as in JAX, so it
        # can be a static argument of an inner jit); mapped ones must be arrays.
        flat = [
            x if ax is None else _as_vmap_value(x, name, p) for x, ax, p in zip(flat, axes, paths)
        ]
        dims, mapped = [], []
        for x, ax, path in zip(flat, axes, paths):
            if ax is None:
                dims.append(None)
                continue
            aval = core.get_aval(x)
            if not -aval.ndim <= ax < aval.ndim:
                raise ValueError(
                    f"vmap({name}) was requested to map {path} along axis {ax}, "
                    f"which implies that its rank should be at least "
                    f"{ax + 1 if ax >= 0 else -ax}, but is only {aval.ndim} (its "
                    f"shape is {aval.shape}); fix in_axes"
                )
            dims.append(int(ax) % aval.ndim)
            mapped.append((path, dims[-1], aval))
        sizes = {aval.shape[d] for _, d, aval in mapped}
        if axis_size is not None:
            sizes.add(axis_size)
        if len(sizes) > 1:
            raise _mapped_sizes_error(name, mapped, axis_size)
        if not sizes:
            raise ValueError(
                f"vmap({name}) must have at least one non-None value in in_axes, "
                "or be given axis_size"
            )
        size = sizes.pop()
        out_tree_store = []

        def flat_fun(*leaves):
            a, kw = tree_util.tree_unflatten(in_tree, leaves)
            out = fun(*a, **kw)
            out_leaves, out_tree = tree_util.tree_flatten(out)
            out_tree_store.append(out_tree)
            return [
                _as_vmap_value(o, name, p)
                for o, p in zip(out_leaves, _leaf_paths(out_tree, "output"))
            ]

        outs, out_dims = vmap_flat(flat_fun, size, flat, dims, axis_name=axis_name)
        out_tree = out_tree_store[0]
        oaxes: list = []
        _broadcast_axes(name, "out_axes", out_axes, "out_axes", out_tree, "output", oaxes)
        return tree_util.tree_unflatten(
            out_tree,
            [
                _place_output(name, o, d, oa, path, size, bdim_at_front, moveaxis, sum_match)
                for o, d, oa, path in zip(outs, out_dims, oaxes, _leaf_paths(out_tree, "output"))
            ],
        )

    return vmap_f


def _place_output(name, o, d, oa, path, size, bdim_at_front, moveaxis, sum_match=False):
    """Output ``o`` (batched along ``d``, or None) with its mapped axis at ``oa``."""
    if oa is None:
        if d is not None and sum_match:
            return array_ops.reduce_sum(o, (d,))
        if d is not None:
            raise ValueError(
                f"vmap({name}) has out_axes None for {path}, which is batched (it "
                "depends on a mapped input); give it an int out_axes"
            )
        return o
    if d is None:  # an output that does not depend on the mapped inputs
        o, d = bdim_at_front(o, None, size), 0
    rank = core.get_aval(o).ndim
    if not -rank <= oa < rank:
        raise ValueError(
            f"vmap({name}) out_axes={oa} is out of range for {path}: with the "
            f"mapped axis it has rank {rank} (shape {core.get_aval(o).shape}), so "
            f"its out_axes must be in [{-rank}, {rank})"
        )
    return moveaxis(o, d, int(oa) % rank)
