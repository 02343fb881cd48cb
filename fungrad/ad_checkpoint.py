"""``fungrad.ad_checkpoint``: rematerialisation (JAX's ``jax.ad_checkpoint``).

``checkpoint`` / ``remat`` and ``checkpoint_policies`` are defined in
:mod:`fungrad.transforms.remat`; :func:`saved_residuals` shows what reverse mode keeps.
"""

from __future__ import annotations

from fungrad import core, tree_util
from fungrad.transforms.remat import checkpoint, checkpoint_policies, remat

__all__ = ["checkpoint", "checkpoint_policies", "remat", "saved_residuals"]


def saved_residuals(f, *args, **kwargs) -> list[tuple[core.ShapedArray, str]]:
    """The values reverse-mode differentiation of ``f`` at ``args`` saves for the backward pass,
    as ``(aval, description)`` pairs (``jax.ad_checkpoint.saved_residuals``)."""
    from fungrad.transforms.autodiff import _as_array
    from fungrad.transforms.partial_eval import linearize_flat

    flat, in_tree = tree_util.tree_flatten(args)
    flat = [_as_array(x, "saved_residuals") for x in flat]

    def flat_fun(*xs):
        out = f(*tree_util.tree_unflatten(in_tree, xs), **kwargs)
        return [_as_array(o, "saved_residuals output") for o in tree_util.tree_leaves(out)]

    _, linear, _ = linearize_flat(flat_fun, flat)
    out = []
    for c in linear.consts:
        which = next((i for i, x in enumerate(flat) if x is c), None)
        desc = f"from the argument at flat index {which}" if which is not None else \
            "an intermediate value"
        out.append((core.get_aval(c), desc))
    return out
