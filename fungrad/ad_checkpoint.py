"""``fungrad.ad_checkpoint``: rematerialisation (JAX's ``jax.ad_checkpoint``).

``checkpoint`` / ``remat`` and ``checkpoint_policies`` are defined in
:mod:`fungrad.transforms.remat`. Here: :func:`checkpoint_name` (the ``name`` primitive, which
the name-based policies look for), :func:`saved_residuals` and :func:`print_saved_residuals`
(what reverse mode keeps), and JAX's policy answers ``Saveable`` / ``Recompute`` /
``Offloadable``.
"""

from __future__ import annotations

from typing import NamedTuple

from fungrad import core, tree_util
from fungrad.lowering import kernel
from fungrad.transforms.jvp import defjvp
from fungrad.transforms.remat import checkpoint, checkpoint_policies, remat
from fungrad.transforms.vmap import defvectorized

__all__ = [
    "Offloadable",
    "Recompute",
    "Saveable",
    "checkpoint",
    "checkpoint_name",
    "checkpoint_policies",
    "print_saved_residuals",
    "remat",
    "saved_residuals",
]


class _Answer:
    """A policy's answer: ``Saveable`` (truthy) or ``Recompute`` (falsy)."""

    def __init__(self, name: str, save: bool):
        self.name, self.save = name, save

    def __bool__(self):
        return self.save

    def __repr__(self):
        return self.name


Saveable = _Answer("Saveable", True)
Recompute = _Answer("Recompute", False)


class Offloadable(NamedTuple):
    """JAX's answer "save in memory ``dst``"; fungrad has one memory, so it means saved."""

    src: str
    dst: str


# -- checkpoint_name: the ``name`` primitive ------------------------------------------------------


def _name_impl(x, *, name):
    return x


def _name_abstract_eval(x, *, name):
    return x


name_p = core.Primitive("name")
name_p.impl = _name_impl
name_p.abstract_eval = _name_abstract_eval
# The primal is named, its tangent is not (as in JAX): a policy decides about primal values.
defjvp(name_p, lambda t, x, *, name: t)
defvectorized(name_p)
kernel.register_lowering(name_p, lambda ctx, x, **params: x)


def checkpoint_name(x, name: str):
    """``x`` (a pytree of arrays), tagged ``name`` for the checkpoint policies
    ``save_only_these_names`` and friends (``jax.ad_checkpoint.checkpoint_name``). Outside
    ``checkpoint`` the tag changes nothing.

    Example::

        def layer(w, x):
            h = checkpoint_name(fnp.tanh(w @ x), "h")
            return fnp.sin(h)
        policy = fg.checkpoint_policies.save_only_these_names("h")
        fg.grad(lambda w, x: fg.checkpoint(layer, policy=policy)(w, x).sum())(w, x)
    """
    if not isinstance(name, str):
        raise TypeError(f"checkpoint_name: name must be a string, got {type(name).__name__}")
    from fungrad.operands import operand

    return tree_util.tree_map(
        lambda leaf: name_p.bind(operand(leaf, "checkpoint_name"), name=name), x
    )


# -- residuals -----------------------------------------------------------------------------------


def saved_residuals(f, *args, **kwargs) -> list[tuple[core.ShapedArray, str]]:
    """The values reverse-mode differentiation of ``f`` at ``args`` saves for the backward pass,
    as ``(aval, description)`` pairs (``jax.ad_checkpoint.saved_residuals``). A description is
    ``"from the argument x"`` (a leaf of the arguments, named by its path), ``"output of sin"``
    (the primitive computing it), ``"named 'y'"`` (a ``checkpoint_name``) or ``"from a
    constant"`` (a value fixed when ``f`` was traced), as JAX words them (JAX adds the source
    line, which fungrad's jaxprs do not record).

    The linearization is staged (traced into a jaxpr) so that every residual, 0-d ones
    included, is an output whose producer can be read off the jaxpr."""
    from fungrad.transforms.api_util import check_callable
    from fungrad.transforms.autodiff import _as_array
    from fungrad.transforms.partial_eval import linearize_flat
    from fungrad.transforms.staging import trace_to_jaxpr

    check_callable(
        f, "saved_residuals", "pass the function and its arguments: saved_residuals(f, *args)"
    )
    flat, in_tree = tree_util.tree_flatten(args)
    flat = [_as_array(x, "saved_residuals") for x in flat]

    def flat_fun(*xs):
        out = f(*tree_util.tree_unflatten(in_tree, xs), **kwargs)
        return [_as_array(o, "saved_residuals output") for o in tree_util.tree_leaves(out)]

    def residuals(*xs):
        _, linear, _ = linearize_flat(flat_fun, list(xs))
        return list(linear.consts)

    closed = trace_to_jaxpr(residuals, [core.get_aval(x) for x in flat])
    jaxpr = closed.jaxpr
    names = _argument_paths(f, args)
    producer = {
        id(v): (
            f"named {eqn.params['name']!r}"
            if eqn.primitive is name_p
            else f"output of {eqn.primitive.name}"
        )
        for eqn in jaxpr.eqns
        for v in eqn.outvars
    }
    arg_of = {id(v): i for i, v in enumerate(jaxpr.invars)}
    out = []
    for v in jaxpr.outvars:
        if id(v) in arg_of:
            desc = f"from the argument {names[arg_of[id(v)]]}"
        elif id(v) in producer:
            desc = producer[id(v)]
        else:
            desc = "from a constant"
        out.append((v.aval, desc))
    return out


def _argument_paths(f, args) -> list[str]:
    """A readable path per leaf of ``args``: the parameter's name (``x``, ``params['w']``)
    where ``f``'s signature gives one, else its position (``args[1]``)."""
    import inspect

    from fungrad.tree_util import _leaf_paths

    try:
        params = [
            p.name
            for p in inspect.signature(f).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    paths = []
    for i, a in enumerate(args):
        name = params[i] if i < len(params) else f"args[{i}]"
        paths += _leaf_paths(tree_util.tree_structure(a), name)
    return paths


def print_saved_residuals(f, *args, **kwargs) -> None:
    """Print, one per line, the values reverse mode saves for the backward pass of ``f`` at
    ``args`` (``jax.ad_checkpoint.print_saved_residuals``): shape/dtype and where each comes
    from."""
    for aval, desc in saved_residuals(f, *args, **kwargs):
        print(f"{aval.str_short()} {desc}")
