"""``jax.api_util``: the helpers JAX's own API functions are built from, for library code that
builds its own transforms (flax's lifted ``scan`` and ``lazy_init``, for example).

- :func:`flatten_fun` / :func:`flatten_fun_nokwargs`: a :class:`~fungrad.extend.linear_util.
  WrappedFun` of pytrees as one of flat lists of leaves, with a thunk that gives the output
  tree after a call;
- :func:`debug_info`: what a traced function was traced for, its name and location and its
  arguments' names (:class:`DebugInfo`);
- :func:`shaped_abstractify`: the abstract value (ShapedArray) a traced argument gets;
- :func:`safe_map`: map that insists on equal lengths.
"""

from __future__ import annotations

import inspect

from fungrad import tree_util
from fungrad.extend import linear_util as lu
from fungrad.extend.core import DebugInfo
from fungrad.transforms.api_util import abstractify, fun_location, fun_name

__all__ = [
    "DebugInfo",
    "debug_info",
    "flatten_fun",
    "flatten_fun_nokwargs",
    "safe_map",
    "shaped_abstractify",
]


def debug_info(
    traced_for: str,
    fun,
    args,
    kwargs,
    *,
    static_argnums=(),
    static_argnames=(),
    result_paths_thunk=None,
    sourceinfo: str | None = None,
    signature: inspect.Signature | None = None,
) -> DebugInfo:
    """The :class:`DebugInfo` of tracing ``fun(*args, **kwargs)`` for ``traced_for``: argument
    names are the dynamic arguments' leaf paths (``x``, ``params['w']``...), with the
    parameter names of ``fun``'s signature where it has one."""
    src = sourceinfo or f"{fun_name(fun)} at {fun_location(fun)}"
    statics = {i % len(args) for i in static_argnums} if args else set()
    if signature is None:
        try:
            signature = inspect.signature(fun)
        except (TypeError, ValueError):
            signature = None
    try:
        bound = signature.bind(*args, **kwargs).arguments if signature is not None else None
    except TypeError:
        bound = None
    names: list[str] = []
    if bound is None:  # no usable signature: positional indices
        pairs = [(f"args[{i}]", a) for i, a in enumerate(args) if i not in statics]
        pairs += [(k, v) for k, v in sorted(kwargs.items()) if k not in static_argnames]
    else:
        positional = list(signature.parameters)
        pairs = [
            (name, value)
            for name, value in bound.items()
            if name not in static_argnames
            and not (name in positional[: len(args)] and positional.index(name) in statics)
        ]
    for name, value in pairs:
        leaves = tree_util.tree_flatten_with_path(value)[0]
        names += [name + tree_util.keystr(path) for path, _ in leaves]
    return DebugInfo(traced_for, src, tuple(names), result_paths_thunk)


def _flatten_outputs(inner, store, in_tree, *flat):
    """(a transformation) ``inner`` called on the pytrees ``in_tree`` unflattens ``flat``
    into, its output flattened; the output tree goes to ``store``."""
    args, kwargs = tree_util.tree_unflatten(in_tree, flat)
    out_flat, out_tree = tree_util.tree_flatten(inner(*args, **kwargs))
    store.store(out_tree)
    return out_flat


def _flatten_outputs_nokwargs(inner, store, in_tree, *flat):
    """As :func:`_flatten_outputs` for an ``in_tree`` of the positional arguments only."""
    out_flat, out_tree = tree_util.tree_flatten(inner(*tree_util.tree_unflatten(in_tree, flat)))
    store.store(out_tree)
    return out_flat


def flatten_fun(fun: lu.WrappedFun, in_tree):
    """``fun`` taking a flat list of leaves of ``in_tree`` (the tree of ``(args, kwargs)``)
    and returning its output's leaves; and a thunk returning the output's treedef."""
    return lu.transformation_with_aux2(_flatten_outputs, fun, in_tree)


def flatten_fun_nokwargs(fun: lu.WrappedFun, in_tree):
    """As :func:`flatten_fun`, for an ``in_tree`` of the tuple of positional arguments."""
    return lu.transformation_with_aux2(_flatten_outputs_nokwargs, fun, in_tree)


def shaped_abstractify(x):
    """The ShapedArray a traced argument ``x`` gets (canonical dtype; Python scalars weak)."""
    return abstractify(x, "shaped_abstractify")


def safe_map(f, *args):
    """``list(map(f, *args))``, requiring every argument to have the same length."""
    args = list(map(list, args))
    if any(len(a) != len(args[0]) for a in args[1:]):
        raise ValueError(f"safe_map: lengths differ: {[len(a) for a in args]}")
    return list(map(f, *args))
