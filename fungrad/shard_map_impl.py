"""``shard_map`` (``jax.shard_map``): a function of per-device blocks, mapped over a mesh.

``shard_map(f, mesh=mesh, in_specs=P('data'), out_specs=P())(x)`` splits each argument into
blocks as its PartitionSpec says (dimension ``i`` split over the mesh axes of entry ``i``),
runs ``f`` on each device's blocks with the mesh axis names bound, so that collectives
(``lax.psum``, ``pmean``, ``all_gather``, ``ppermute``, ``axis_index``...) communicate between
the blocks, and joins the results as ``out_specs`` says. A mesh axis an out spec does not
mention must hold the same value on every block along it (``check_vma=True``, the default,
checks it; with ``check_vma=False`` the first block's value is taken, as JAX does).

fungrad runs the blocks as nested ``vmap`` s, one per manual mesh axis (in mesh order), each
named after its axis, over the argument reshaped so that every mesh axis is a dimension of its
own: the collectives are vmap's (``fungrad/lax/parallel.py``), and ``grad``, ``vmap`` and
``jit`` of a shard_map are those of vmap. The replication check is vmap's notion of a value
that is not batched along an axis: ``psum`` and ``pmean`` outputs, and values computed only
from unsplit inputs, are replicated; ``axis_index`` and anything from a split input vary.

A concrete mesh has at most ``jax.device_count()`` devices (``make_mesh`` raises JAX's error
beyond), so on one device each block is the whole argument and the collectives are over axes
of size 1. An :class:`~fungrad.sharding.AbstractMesh` may have any sizes: inside ``jit``
(traced arguments) such a shard_map runs all its blocks on fungrad's one device, which is how
the tests check multi-block results against JAX's on several devices; with concrete arguments
it is JAX's ValueError (JAX needs arrays already placed on that many devices).
"""

from __future__ import annotations

import functools
import math

from fungrad import core, tree_util
from fungrad.lax.shape import reshape, transpose
from fungrad.lax.slicing import index_in_dim
from fungrad.operands import operand
from fungrad.sharding_impls import (
    AbstractMesh,
    AxisType,
    DuplicateSpecError,
    Mesh,
    NamedSharding,
    PartitionSpec,
    _entry_names,
    _fresh,
    broadcast_prefix,
    get_mesh,
    give,
    sharding_of,
)
from fungrad.transforms.api_util import Signature
from fungrad.transforms.vmap import bdim_at_front, vmap_flat

__all__ = ["shard_map"]


class _Infer:
    """``in_specs`` left out: inferred from the arguments' shardings (explicit mesh axes)."""

    def __repr__(self):
        return "jax.sharding.Infer"


_INFER = _Infer()


def shard_map(
    f=None,
    /,
    *,
    out_specs,
    in_specs=_INFER,
    mesh: Mesh | AbstractMesh | None = None,
    axis_names=frozenset(),
    check_vma: bool = True,
):
    """``f`` applied to per-device blocks of its arguments over ``mesh`` (``jax.shard_map``;
    see the module docstring). ``in_specs``/``out_specs`` are PartitionSpecs, or pytree
    prefixes of the arguments (a tuple, one per positional argument) and of the outputs;
    ``mesh`` defaults to the context mesh (``jax.set_mesh``); ``axis_names`` are the mesh axes
    ``f`` maps over (all of them when empty: the others are left whole). Without ``f``,
    returns a decorator."""
    if f is None:
        return functools.partial(
            shard_map,
            out_specs=out_specs,
            in_specs=in_specs,
            mesh=mesh,
            axis_names=axis_names,
            check_vma=check_vma,
        )
    if not callable(f):
        raise TypeError(
            "shard_map requires a callable for its first argument, but got "
            f"{f!r} of type {type(f)}."
        )
    if mesh is not None and not isinstance(mesh, (Mesh, AbstractMesh)):
        raise TypeError(
            "shard_map requires a `jax.sharding.Mesh` or a `jax.sharding.AbstractMesh` "
            f"instance for its second argument, but got {mesh!r} of type {type(mesh)}."
        )
    name = getattr(f, "__name__", type(f).__name__)
    sig = Signature(f)

    @functools.wraps(f)
    def wrapped(*args):
        m = mesh if mesh is not None else get_mesh()
        if m.empty:
            raise ValueError(
                "The context mesh cannot be empty. Use `jax.set_mesh(mesh)` to enter into a "
                "mesh context, or pass shard_map(f, mesh=..., ...)"
            )
        manual = _manual_axes(m, axis_names)
        return _shard_map_call(f, name, sig, m, manual, in_specs, out_specs, check_vma, args)

    return wrapped


def _manual_axes(mesh, axis_names) -> tuple:
    """The mesh axes shard_map maps over, in mesh order."""
    names = frozenset(axis_names)
    if not names:
        return mesh.axis_names
    if not names <= set(mesh.axis_names):
        raise ValueError(
            f"jax.shard_map requires axis_names={names} to be a subset of "
            f"mesh.axis_names={frozenset(mesh.axis_names)}"
        )
    return tuple(n for n in mesh.axis_names if n in names)


# -- checking the specs ---------------------------------------------------------------------


def _check_spec_type(spec, what: str) -> None:
    if not isinstance(spec, PartitionSpec):
        raise TypeError(
            f"shard_map {what} argument must be a pytree of `jax.sharding.PartitionSpec` "
            f"instances, but:\n\n  {what} is {spec} of type {type(spec).__name__}, \n\n"
            f"Check the {what} values passed to shard_map."
        )


def _check_spec_names(spec: PartitionSpec, manual: tuple, what: str) -> None:
    seen: set = set()
    for n in spec.axis_names():
        if n in seen:
            raise DuplicateSpecError(
                "A single NamedSharding spec specification can map every mesh axis to at most "
                f"one positional dimension, but {spec!r} has duplicate entries for `{n}`"
            )
        seen.add(n)
        if n not in manual:
            raise ValueError(
                f"shard_map {what} argument must refer to an axis marked as manual "
                f"({frozenset(manual)}), but:\n\n  {what} refers to {n!r}\n\n"
                f"Check the {what} values passed to shard_map."
            )


def _rank_error(name, what, spec, described, aval, scalar_hint) -> ValueError:
    side = "inputs" if what == "in_specs" else "outputs"
    msg = (
        f"shard_map applied to the function {name!r} was given an {what} entry which is too "
        f"long to be compatible with the corresponding {side[:-1]} value from the function:"
        f"\n\n{what} is {spec!r} which has length {len(spec)}, but {described} has shape "
        f"{_type_str(aval)}, which has rank {aval.ndim} (and {aval.ndim} < {len(spec)})\n\n"
        f"Entries in {what} must be of length no greater than the number of axes in the "
        f"corresponding {side[:-1]} value.\n\nEither revise the spec to be shorter, or modify "
        f"{name!r} so that its {side} have sufficient rank."
    )
    if aval.ndim == 0:
        msg += (
            f"\n\nFor scalar values (rank 0), consider using an {what} entry of `P()`, where "
            "`P = jax.sharding.PartitionSpec`." + scalar_hint
        )
    return ValueError(msg)


def _mesh_words(mesh) -> str:
    return (
        f"The mesh given has shape {mesh.axis_sizes} with corresponding axis names "
        f"{mesh.axis_names}."
    )


def _block_divisors(spec: PartitionSpec, ndim: int, sizes: dict) -> list[int]:
    parts = list(spec) + [None] * (ndim - len(spec))
    return [math.prod(sizes[n] for n in _entry_names(p)) for p in parts]


# -- splitting and joining ------------------------------------------------------------------


def _split(x, spec: PartitionSpec, manual: tuple, sizes: dict):
    """``x`` reshaped and transposed to ``[mesh axes of spec in mesh order..., block]``, and
    for each manual axis whether it is one of those leading dimensions."""
    shape = core.get_aval(x).shape
    parts = list(spec) + [None] * (len(shape) - len(spec))
    new_shape, axis_pos, block_pos = [], {}, []
    for dim, p in zip(shape, parts):
        names = _entry_names(p)
        for n in names:
            axis_pos[n] = len(new_shape)
            new_shape.append(sizes[n])
        block_pos.append(len(new_shape))
        new_shape.append(dim // math.prod(sizes[n] for n in names))
    present = [n for n in manual if n in axis_pos]
    if present:
        x = reshape(x, tuple(new_shape))
        x = transpose(x, (*[axis_pos[n] for n in present], *block_pos))
    return x, [n in axis_pos for n in manual]


def _join(y, spec: PartitionSpec, present: list):
    """The inverse of :func:`_split` for an output ``[present mesh axes..., block]``."""
    if not present:
        return y
    block = core.get_aval(y).shape[len(present) :]
    parts = list(spec) + [None] * (len(block) - len(spec))
    where = {n: i for i, n in enumerate(present)}
    perm, shape = [], []
    for i, (b, p) in enumerate(zip(block, parts)):
        names = _entry_names(p)
        perm += [where[n] for n in names] + [len(present) + i]
        shape.append(b * math.prod(core.get_aval(y).shape[where[n]] for n in names))
    return reshape(transpose(y, tuple(perm)), tuple(shape))


def _shard_map_call(f, name, sig, mesh, manual, in_specs, out_specs, check_vma, args):
    sizes = dict(mesh.shape)
    leaves, in_tree = tree_util.tree_flatten(args)
    leaves = [operand(x, "shard_map") for x in leaves]
    if isinstance(mesh, AbstractMesh) and any(not isinstance(x, core.Tracer) for x in leaves):
        raise ValueError(
            "Please pass `jax.Array`s with a `NamedSharding` as input to `shard_map` when "
            "passing `AbstractMesh` to the mesh argument. (fungrad runs a shard_map over an "
            "AbstractMesh inside jit, on traced arguments; build a concrete mesh with "
            "jax.make_mesh to call it eagerly.)"
        )
    paths = tree_util._leaf_paths(in_tree, "args")
    if in_specs is _INFER:
        specs = _inferred_specs(mesh, manual, leaves)
    else:
        specs = broadcast_prefix(in_specs, args, "shard_map", "in_specs")
    specs = [PartitionSpec() if s is None else s for s in specs]
    _check_in_specs(name, sig, mesh, manual, leaves, specs, paths)

    split = [_split(x, s, manual, sizes) for x, s in zip(leaves, specs)]
    blocks = [b for b, _ in split]
    mapped = [m for _, m in split]
    out_info: list = []

    def run(level: int, vals: list) -> list:
        if level == len(manual):
            out = f(*tree_util.tree_unflatten(in_tree, vals))
            out_leaves, out_tree = tree_util.tree_flatten(out)
            out_leaves = [operand(o, "shard_map") for o in out_leaves]
            ospecs = _out_specs(name, manual, out_specs, out, out_leaves)
            out_info[:] = [out_tree, ospecs]
            return out_leaves
        axis, size = manual[level], sizes[manual[level]]
        dims = [0 if m[level] else None for m in mapped]
        outs, out_dims = vmap_flat(
            lambda *v: run(level + 1, list(v)), size, vals, dims, axis_name=axis
        )
        ospecs = out_info[1]
        placed = []
        for o, d, spec in zip(outs, out_dims, ospecs):
            if axis in spec.axis_names():
                placed.append(bdim_at_front(o, d, size))
            elif d is None:
                placed.append(o)
            elif check_vma:
                raise _replication_error(name, mesh, spec, axis)
            else:  # the value along an axis out_specs leaves out: the first block's
                placed.append(index_in_dim(o, 0, d, keepdims=False))
        return placed

    outs = run(0, blocks)
    out_tree, ospecs = out_info
    joined = []
    for y, spec in zip(outs, ospecs):
        present = [n for n in manual if n in spec.axis_names()]
        y = _join(y, spec, present)
        if isinstance(mesh, Mesh) and not isinstance(y, core.Tracer):
            y = give(_fresh(y), NamedSharding(mesh, spec))
        joined.append(y)
    return tree_util.tree_unflatten(out_tree, joined)


def _inferred_specs(mesh, manual, leaves) -> list:
    auto = [n for n, t in zip(mesh.axis_names, mesh.axis_types) if t is AxisType.Auto]
    if any(n in manual for n in auto):
        raise TypeError(
            "shard_map in_specs argument must be a pytree of `jax.sharding.PartitionSpec` "
            f"instances, but it was `None` when axis_names={frozenset(manual)} are of type "
            "AxisType.Auto. Pass in_specs=... (in_specs are inferred from the arguments' "
            "shardings only over AxisType.Explicit mesh axes)"
        )
    specs = []
    for x in leaves:
        s = None if isinstance(x, core.Tracer) else sharding_of(x)
        specs.append(s.spec if isinstance(s, NamedSharding) and s.mesh == mesh else PartitionSpec())
    return specs


def _check_in_specs(name, sig, mesh, manual, leaves, specs, paths) -> None:
    """JAX's checks of each argument against its in_specs entry, in JAX's order: the spec's
    type, its length against the rank, its axis names, then divisibility."""
    sizes = dict(mesh.shape)
    for x, spec, path in zip(leaves, specs, paths):
        _check_spec_type(spec, "in_specs")
        aval = core.get_aval(x)
        where = _where_bound(path, sig, name)
        if len(spec) > aval.ndim:
            raise _rank_error(name, "in_specs", spec, f"the passed {path}{where},", aval, "")
        _check_spec_names(spec, manual, "in_specs")
        for i, (dim, n) in enumerate(zip(aval.shape, _block_divisors(spec, aval.ndim, sizes))):
            if dim % n:
                entry = spec[i]
                axes = (
                    f"mesh axis {entry!r} (of size {n})"
                    if not isinstance(entry, tuple)
                    else f"mesh axes {entry} (of total size {n})"
                )
                raise ValueError(
                    f"shard_map applied to the function {name!r} was given argument arrays "
                    "with axis sizes that are not evenly divisible by the corresponding mesh "
                    f"axis sizes:\n\n{_mesh_words(mesh)}\n\nthe passed {path} of shape "
                    f"{_type_str(aval)}{where}, corresponds to in_specs of value {spec!r}, "
                    f"which maps array axis {i} (of size {dim}) to {axes}, but {n} does not "
                    f"evenly divide {dim}\n\nArray arguments' axis sizes must be evenly "
                    "divisible by the mesh axis or axes indicated by the corresponding "
                    "elements of the argument's in_specs entry. Consider checking that "
                    "in_specs are correct, and if so consider changing the mesh axis sizes or "
                    f"else padding the input and adapting {name!r} appropriately."
                )


def _type_str(aval) -> str:
    """``float32[4,4]``: a value's type as JAX's shard_map messages print it."""
    return f"{aval.dtype.name}[{','.join(map(str, aval.shape))}]"


def _where_bound(path: str, sig: Signature, name: str) -> str:
    """``, where args[0] is bound to f's parameter 'b'`` (JAX's words), or nothing."""
    if not path.startswith("args["):
        return ""
    head = path.split("]", 1)[0] + "]"
    i = int(head[len("args[") : -1])
    if not sig.known or (i >= len(sig.positional) and not sig.var_positional):
        return ""
    return f", where {head} is bound to {name}'s parameter {sig.arg_name(i)!r}"


def _out_specs(name, manual, out_specs, out, out_leaves) -> list:
    specs = broadcast_prefix(out_specs, out, "shard_map", "out_specs")
    checked = []
    for o, spec in zip(out_leaves, specs):
        _check_spec_type(spec, "out_specs")
        aval = core.get_aval(o)
        if len(spec) > aval.ndim:
            hint = (
                " In particular, for rank 0 outputs which are not constant over the mesh, add "
                "at least one (singleton) axis to them so that they can be concatenated using "
                "out_specs."
            )
            raise _rank_error(name, "out_specs", spec, f"{name}(*args)", aval, hint)
        _check_spec_names(spec, manual, "out_specs")
        checked.append(spec)
    return checked


def _replication_error(name, mesh, spec, axis) -> ValueError:
    return ValueError(
        f"shard_map applied to the function {name!r} was given out_specs which require "
        "replication which can't be statically inferred given the mesh:\n\n"
        f"{_mesh_words(mesh)}\n\nout_specs is {spec!r} which implies that the corresponding "
        f"output value is replicated across mesh axis {axis!r}, but it varies along it (it "
        "depends on a block of an argument split over that axis, or on axis_index, and no "
        "psum/pmean/all_gather over the axis made it the same on every block)\n\n"
        "Check if these output values are meant to be replicated over those mesh axes. If "
        "not, consider revising the corresponding out_specs entries (name the axis in the "
        "spec). If so, consider disabling the check by passing the check_vma=False argument "
        "to `jax.shard_map`."
    )
