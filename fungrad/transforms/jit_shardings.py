"""``jit(f, in_shardings=..., out_shardings=...)``: JAX's sharding annotations of a jitted
function's arguments and results.

fungrad computes on one device, so the annotations place nothing; they are checked as JAX
checks them, and the results carry ``out_shardings`` as their ``.sharding``:

* ``in_shardings`` is a pytree prefix of the positional arguments that are not static (a
  Sharding, a PartitionSpec, None, or a tuple with one entry per such argument); keyword
  arguments are then refused, as in JAX;
* a bare PartitionSpec refers to the context mesh (``jax.set_mesh``), and needs one;
* a spec longer than its value's rank is JAX's ValueError, naming the argument or result.
"""

from __future__ import annotations

import functools

from fungrad import core, sharding_impls, tree_util
from fungrad.transforms.api_util import Signature

__all__ = ["UNSPECIFIED", "with_shardings"]


class _Unspecified:
    """jit's ``in_shardings``/``out_shardings`` when not given (an explicit None is
    "unconstrained", as JAX's None)."""

    def __repr__(self):
        return "UnspecifiedValue"


UNSPECIFIED = _Unspecified()


def _check_leaves(fname: str, what: str, shardings) -> None:
    for leaf in tree_util.tree_leaves(shardings, is_leaf=sharding_impls.is_sharding_leaf):
        if not sharding_impls.is_sharding_leaf(leaf):
            raise TypeError(
                f"{what} leaf specifications are expected to be PartitionSpec instances or "
                f"None, but got {leaf!r}; {fname}'s {what} takes jax.sharding Shardings, "
                "PartitionSpecs or None (or a pytree prefix of them)"
            )


def _annotate(fname, what, kind, shardings, values, prefix: str, record: bool) -> list:
    """``values`` (a pytree) checked against ``shardings`` (its prefix); with ``record``, the
    concrete Arrays among them replaced by ones that carry their sharding."""
    leaves, tree = tree_util.tree_flatten(values)
    per_leaf = sharding_impls.broadcast_prefix(shardings, values, fname, what)
    paths = tree_util._leaf_paths(tree, prefix)
    out = []
    for x, s, path in zip(leaves, per_leaf, paths):
        if s is not None:
            s = sharding_impls.resolve(s, fname, what)
            sharding_impls.check_rank(s, core.get_aval(x).ndim, f"{fname} {kind} {path}")
            if record and not isinstance(x, core.Tracer) and hasattr(x, "_value"):
                x = sharding_impls.give(sharding_impls._fresh(x), s)
        out.append(x)
    return tree_util.tree_unflatten(tree, out)


def with_shardings(jitted, fun, in_shardings, out_shardings, static_argnums, static_argnames):
    """``jitted`` (``jit(fun)``) checking ``in_shardings`` against its arguments and giving
    its results ``out_shardings`` (see the module docstring); either may be UNSPECIFIED."""
    if in_shardings is not UNSPECIFIED:
        _check_leaves("jit", "in_shardings", in_shardings)
    if out_shardings is not UNSPECIFIED:
        _check_leaves("jit", "out_shardings", out_shardings)
    sig = Signature(fun)
    nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums or ())
    names = (static_argnames,) if isinstance(static_argnames, str) else static_argnames or ()
    by_name = {sig.positional.index(n) for n in names if n in sig.positional}

    @functools.wraps(fun)
    def sharded(*args, **kwargs):
        if in_shardings is not UNSPECIFIED:
            if kwargs:
                raise ValueError(
                    "jit does not support kwargs when in_shardings is specified: pass "
                    f"{sorted(kwargs)} positionally, or drop in_shardings"
                )
            static = {i % len(args) for i in nums if -len(args) <= i < len(args)} | by_name
            dyn = tuple(a for i, a in enumerate(args) if i not in static)
            if isinstance(in_shardings, (tuple, list)) and len(in_shardings) != len(dyn):
                raise ValueError(
                    "jit in_shardings specification must be a tree prefix of the positional "
                    "arguments tuple. In particular, jit in_shardings must either be a "
                    "Sharding, a PartitionSpec, or a tuple of length equal to the number of "
                    "positional arguments. But jit in_shardings is the wrong length: got a "
                    f"tuple or list of length {len(in_shardings)} for an args tuple of length "
                    f"{len(dyn)} (static arguments have no entry)."
                )
            per_arg = (
                tuple(in_shardings)
                if isinstance(in_shardings, (tuple, list))
                else (in_shardings,) * len(dyn)
            )
            dyn_names = [sig.arg_name(i) for i in range(len(args)) if i not in static]
            for a, name, s in zip(dyn, dyn_names, per_arg):
                _annotate(
                    "jit", "in_shardings", "arguments with pytree key path", s, a, name, False
                )
        out = jitted(*args, **kwargs)
        if out_shardings is UNSPECIFIED:
            return out
        return _annotate(
            "jit",
            "out_shardings",
            "outputs with pytree key path",
            out_shardings,
            out,
            "result",
            True,
        )

    for attr in ("lower", "trace", "clear_cache", "cache_info", "_cache_size"):
        setattr(sharded, attr, getattr(jitted, attr))
    return sharded
