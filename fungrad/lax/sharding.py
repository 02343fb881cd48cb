"""``with_sharding_constraint`` and ``reshard``: the ``sharding_constraint`` primitive.

``with_sharding_constraint(x, shardings)`` tells JAX's partitioner how an intermediate value
is laid out; its value is ``x``. fungrad computes on one device, so the primitive is an
identity whose params carry the sharding (``make_jaxpr`` shows it, as JAX's jaxpr does), with
the rules JAX gives it: the tangent and the cotangent are constrained the same way (it is
linear), and under ``vmap`` the batch dimension is inserted into the PartitionSpec as a
dimension that is not split. Applied eagerly, the result Array carries the sharding
(``.sharding``). The checks are JAX's: a spec longer than the value's rank, an axis the mesh
lacks, and a bare PartitionSpec with no context mesh (``jax.set_mesh``) raise.
"""

from __future__ import annotations

from fungrad import core, sharding_impls, tree_util
from fungrad.lax.utils import operand, standard_primitive
from fungrad.lowering import kernel
from fungrad.lowering.complex_split import Pair, register_split_rule
from fungrad.transforms.jvp import Zero, jvp_rules
from fungrad.transforms.transpose import deflinear_transpose
from fungrad.transforms.vmap import batch_rules

__all__ = ["with_sharding_constraint", "sharding_constraint_p"]


def _impl(x, *, sharding):
    return x


def _abstract_eval(x, *, sharding):
    sharding_impls.check_rank(sharding, x.ndim, "sharding_constraint's operands")
    return x


sharding_constraint_p = standard_primitive("sharding_constraint", _impl, _abstract_eval)


def _jvp(primals, tangents, *, sharding):
    (x,), (t,) = primals, tangents
    out = sharding_constraint_p.bind(x, sharding=sharding)
    if type(t) is Zero:
        return out, t
    return out, sharding_constraint_p.bind(t, sharding=sharding)


def _transpose(ct, x, *, sharding):
    return [sharding_constraint_p.bind(ct, sharding=sharding)]


def _batched_sharding(sharding, bdim: int, ndim: int):
    """``sharding`` for the batched value: the batch dimension ``bdim`` (of the ``ndim``-d
    batched value) is not split, so None enters the spec there."""
    if not isinstance(sharding, sharding_impls.NamedSharding):
        return sharding
    parts = list(sharding.spec)
    if bdim > len(parts):
        return sharding  # the spec ends before the batch dimension: still not split
    parts.insert(bdim, None)
    spec = sharding_impls.PartitionSpec(
        *parts, unreduced=sharding.spec.unreduced, reduced=sharding.spec.reduced
    )
    return sharding.update(spec=spec)


def _batch(axis_size, args, dims, *, sharding):
    (x,), (d,) = args, dims
    if d is None:
        return sharding_constraint_p.bind(x, sharding=sharding), None
    s = _batched_sharding(sharding, d, core.get_aval(x).ndim)
    return sharding_constraint_p.bind(x, sharding=s), d


jvp_rules[sharding_constraint_p] = _jvp
deflinear_transpose(sharding_constraint_p, _transpose)
batch_rules[sharding_constraint_p] = _batch
kernel.register_lowering(sharding_constraint_p, lambda ctx, x, **params: x)


def _split(x, *, sharding):
    """A complex value's parts, each constrained as the value is (the complex split)."""
    if isinstance(x, Pair):
        return [Pair(*(sharding_constraint_p.bind(part, sharding=sharding) for part in x))]
    return [sharding_constraint_p.bind(x, sharding=sharding)]


register_split_rule(sharding_constraint_p, _split)


def _constrain(fname: str, what: str, x, shardings):
    leaves, tree = tree_util.tree_flatten(x)
    per_leaf = sharding_impls.broadcast_prefix(shardings, x, fname, what)
    out = []
    for leaf, s in zip(leaves, per_leaf):
        leaf = operand(leaf, fname)
        if s is None:
            out.append(leaf)
            continue
        s = sharding_impls.resolve(s, fname, what)
        sharding_impls.check_rank(s, core.get_aval(leaf).ndim, f"{fname} arguments")
        y = sharding_constraint_p.bind(leaf, sharding=s)
        if not isinstance(y, core.Tracer):
            # a new Array object: the sharding is recorded on it, not on the caller's x
            y = sharding_impls.give(sharding_impls._fresh(y), s)
        out.append(y)
    return tree_util.tree_unflatten(tree, out)


def with_sharding_constraint(x, shardings):
    """``x`` (a pytree of arrays) laid out as ``shardings`` says (a Sharding or PartitionSpec,
    or a pytree prefix of ``x`` of them; a bare PartitionSpec refers to the context mesh)
    (``jax.lax.with_sharding_constraint``). The value is ``x``: see the module docstring."""
    return _constrain("with_sharding_constraint", "shardings", x, shardings)


def reshard(xs, out_shardings):
    """``xs`` (a pytree of arrays) moved to ``out_shardings`` (``jax.sharding.reshard``): the
    same values, with the given shardings; on one device no data moves."""
    return _constrain("reshard", "out_shardings", xs, out_shardings)
