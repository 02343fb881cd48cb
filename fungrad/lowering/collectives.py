"""Lowering of the collectives over a *process axis* (``fungrad.distributed``) into MPI steps.

Inside ``pmap`` across processes, ``psum``/``pmax``/``pmin``/``all_gather``/``psum_scatter``/
``ppermute``/``all_to_all``/``axis_index`` over the process axis are ordinary equations of the
jitted program (``fungrad/lax/parallel.py``). Their rules here turn each into one
:class:`~fungrad.lowering.steps.CollectiveStep` on contiguous buffers, which a backend runs as
one call into the MPI library (the CPU: ``cpu/mpi.py``, a direct call from the native code).

* Operands are stored (``ctx.materialize``: a view or a fused expression becomes a contiguous
  buffer, an input buffer is used as is); the step writes a fresh buffer, except an allreduce
  whose operand no other equation reads and that is not stored yet (a view, a fused
  expression, a widened float16): stored into a buffer of its own, it is reduced there in
  place (``MPI_IN_PLACE``: one buffer instead of two, and MPI skips its copy).
* The layout moves MPI does not do are index arithmetic around the step, fused into the
  kernels next to it: ``all_gather``'s receive buffer ``[n, *x.shape]`` is read with the
  gathered axis moved to ``axis`` (and merged, ``tiled``); ``psum_scatter`` and
  ``all_to_all`` first store their operand block-major (``[n, *block]``), and
  ``all_to_all`` reads its receive buffer with the sender axis at ``concat_axis``.
* ``axis_index`` is the rank, a constant of the compiled program (each process compiles its
  own program); ``ppermute``'s peers of this rank are constants too, and a rank no pair sends
  to gets zeros.
* ``axis_index_groups``: the axis communicator is split once per compile (cached per
  communicator and groups), so the step runs on the group's communicator.
* Once per compiled collective, the ranks check that they agree on its shapes and dtypes
  (``fungrad.distributed.check_signature``: a ValueError naming the ranks, not a hang or
  garbage). Every rank compiles the same program, so the checks line up.
* Reductions of float16/bfloat16 (no MPI datatype) run in float32 and round back.

A backend whose policy has no ``mpi_steps`` (the GPU) stages each collective through host
memory instead (:func:`_staged`): a host step (``host_callback.lower_host_call``) copies the
operands out, runs fungrad.distributed's eager collective (mpi4py) and copies the results in.
The rules replace lax's "unbound axis" rules (:func:`install`, called by
``compile_jaxpr``) and fall back to them for names that are not process axes, so a name no
pmap or vmap binds keeps lax's NameError.
"""

from __future__ import annotations

import math

import numpy as np

from fungrad import core
from fungrad.lowering import kernel as K
from fungrad.lowering.fusion import LoweringError
from fungrad.lowering.host_callback import lower_host_call
from fungrad.lowering.steps import CollectiveStep

__all__ = ["install", "process_axis_of"]

#: primitive name -> this module's rule for it over a process axis
_RULES: dict = {}

_installed: set = set()


def _rule(name: str):
    def register(fn):
        _RULES[name] = fn
        return fn

    return register


def install() -> None:
    """Route the collectives' lowering through :func:`_lower` (idempotent; cheap when done):
    each primitive's previous rule (lax's "unbound axis" error) stays the fallback."""
    if len(_installed) == len(_RULES):
        return
    for prim, rule in list(K.lowering_rules.items()):
        if prim.name in _RULES and prim not in _installed:
            K.lowering_rules[prim] = _dispatcher(prim, rule)
            _installed.add(prim)


def _dispatcher(prim, fallback):
    def rule(ctx, *args, **params):
        names = params.get("axes", params.get("axis_name"))
        names = tuple(names) if isinstance(names, (tuple, list)) else (names,)
        axes = [process_axis_of(n) for n in names]
        if not names or any(a is None for a in axes):
            if any(a is not None for a in axes):
                raise LoweringError(
                    f"{prim.name}: the axes {names} mix a process axis with other names; "
                    "a compiled collective communicates over one process axis"
                )
            return fallback(ctx, *args, **params)
        if len(axes) != 1:
            raise LoweringError(
                f"{prim.name}: over several process axes {names}; fungrad binds one"
            )
        if prim.name != "axis_index" and not getattr(ctx.planner.policy, "mpi_steps", False):
            return _staged(ctx, prim, axes[0], names[0], args, params)
        return _RULES[prim.name](ctx, axes[0], names[0], *args, **params)

    return rule


def process_axis_of(name):
    """``fungrad.distributed.process_axis(name)`` (None: not a process axis). Imported at
    compile time only (``fungrad.distributed`` is in the base layer: the import is downward,
    but it needs mpi4py only once a job is initialized)."""
    from fungrad.distributed import process_axis

    return process_axis(name)


# -- pieces --------------------------------------------------------------------------------------


def _comm(pax, groups):
    """The communicator a collective over ``pax`` runs on: the axis's, or with
    ``axis_index_groups`` this rank's group's (split once, cached by fungrad.distributed)."""
    from fungrad.distributed import group_comm

    return group_comm(pax, groups)


def _check(axis, what: str, operands, params) -> None:
    """Every rank compiles this collective with the same shapes, dtypes and parameters."""
    from fungrad.distributed import check_signature

    sig = [what] + [f"{t.dtype.name}{list(t.shape)}" for t in operands]
    sig += [f"{k}={v!r}" for k, v in sorted(params.items())]
    check_signature(axis.comm, what, "; ".join(sig))


def _stored(ctx, t):
    """``t`` in a contiguous buffer of its shape (a kernel stores it unless it is one)."""
    return ctx.materialize(t).buffer


def _step(
    ctx, kind: str, axis_name: str, comm, send, recv_shape, count: int, recv=None, **kw
) -> K.Tensor:
    """Append one :class:`CollectiveStep` writing a fresh buffer of ``recv_shape`` (or
    ``recv``: ``send`` itself for an allreduce in place); returns the tensor reading it."""
    planner = ctx.planner
    n = planner._n["mpi"] = planner._n.get("mpi", 0) + 1  # shared by sub-programs
    if count > 2**31 - 1:
        raise LoweringError(
            f"{kind} over the process axis {axis_name!r}: {count} elements per block exceed "
            "MPI's int count (split the array)"
        )
    if recv is None:
        recv = planner.new_buffer(recv_shape, send.dtype, "temp", f"mpi{n}.recv")
    step = CollectiveStep(f"mpi_{kind}{n}", n, kind, axis_name, comm, send, recv, count, **kw)
    planner.add_step(step)
    return planner.buffer_tensor(recv, f"mpi_{kind}")


def _as(ctx, t, dtype, origin: str):
    """``t`` converted elementwise to ``dtype`` (a lazy tensor)."""
    dtype = np.dtype(dtype)
    if t.dtype == dtype:
        return t
    return K.from_fn(t.shape, dtype, lambda idx: ctx.convert(t.at(idx), dtype), origin)


def _reduction_dtype(dtype) -> np.dtype:
    """The dtype MPI reduces ``dtype`` in: float16/bfloat16 have no MPI datatype."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype.kind == "f" and dtype.itemsize == 2 else dtype


def _placed(ctx, recv: K.Tensor, shape, source_index, origin: str) -> K.Tensor:
    """The tensor of ``shape`` whose element ``idx`` is ``recv`` at ``source_index(idx)``."""
    return K.from_fn(shape, recv.dtype, lambda idx: recv.at(source_index(idx)), origin)


# -- the rules -----------------------------------------------------------------------------------
# Each rule gets the process axis object ``pax`` (``.comm``, ``.size``, ``.rank``) and its name
# before the primitive's operands and params.


def _exclusive(ctx, i: int, x: K.Tensor, xw: K.Tensor):
    """A fresh temporary holding ``xw`` (operand ``i``, ``x``, in the reduction's dtype) that
    only the allreduce reads and writes, so it runs in place (``MPI_IN_PLACE``: no receive
    buffer, and MPI skips its copy of the operand into it); None when ``xw`` is stored
    already (an input, a constant, a product's result: MPI reads it, the result goes to a new
    buffer) or another equation reads the operand (storing it once for both is cheaper). The
    value is stored through a new tensor, so a tensor shared with other readers stays as it
    was."""
    if xw.buffer is not None:
        return None
    if xw is x:  # the operand's own tensor: the equation must be its only reader
        planner = ctx.planner
        eqn = planner.eqn
        var = eqn.invars[i]
        if type(var) is core.Var:
            readers = planner._readers.get(var, ())
            if len(readers) != 1 or readers[0] is not eqn:
                return None
    fresh = K.from_fn(xw.shape, xw.dtype, xw.at, xw.origin)
    return ctx.materialize(fresh).buffer


def _reduce(op: str):
    def rule(ctx, pax, name, *args, axes, axis_index_groups):
        _check(pax, f"p{op}", args, {"groups": axis_index_groups})
        comm = _comm(pax, axis_index_groups)
        outs = []
        for i, x in enumerate(args):
            xw = _as(ctx, x, _reduction_dtype(x.dtype), f"p{op}")
            own = _exclusive(ctx, i, x, xw)
            send = _stored(ctx, xw) if own is None else own
            r = _step(ctx, "allreduce", name, comm, send, x.shape, send.size, recv=own, op=op)
            outs.append(_as(ctx, r, x.dtype, f"p{op}"))
        return outs

    return rule


for _op in ("sum", "max", "min"):
    _rule(f"p{_op}")(_reduce(_op))


@_rule("all_gather")
def _all_gather(ctx, pax, name, x, *, axis_name, axis, tiled, axis_size):
    """``MPI_Allgather`` into ``[n, *x.shape]``, read with the rank axis moved to ``axis``
    (merged into it when ``tiled``)."""
    _check(pax, "all_gather", [x], {"axis": axis, "tiled": tiled})
    n, shape = pax.size, x.shape
    g = _step(ctx, "allgather", name, pax.comm, _stored(ctx, x), (n, *shape), math.prod(shape))
    if not tiled:
        out = shape[:axis] + (n,) + shape[axis:]
        return _placed(ctx, g, out, lambda i: (i[axis], *i[:axis], *i[axis + 1 :]), "all_gather")
    b = shape[axis]
    out = shape[:axis] + (n * b,) + shape[axis + 1 :]

    def src(i):
        j, bb = i[axis], ctx.iconst(b)
        return (ctx.idiv(j, bb), *i[:axis], ctx.irem(j, bb), *i[axis + 1 :])

    return _placed(ctx, g, out, src, "all_gather")


def _block_major(ctx, x, axis: int, n: int, keep: bool):
    """``x`` as ``[n, *block]`` (for ``axis`` > 0; along axis 0 the blocks are rank-major
    already): block ``k`` of ``axis`` first (``keep``: the blocks keep
    ``axis``, ``shape[axis] // n`` long; else ``shape[axis] == n`` and it is dropped)."""
    shape = x.shape
    if keep:
        b = shape[axis] // n
        block = shape[:axis] + (b,) + shape[axis + 1 :]

        def src(i):
            k, r = i[0], i[1:]
            j = ctx.iadd(ctx.imul(k, ctx.iconst(b)), r[axis])
            return (*r[:axis], j, *r[axis + 1 :])

    else:
        block = shape[:axis] + shape[axis + 1 :]

        def src(i):
            k, r = i[0], i[1:]
            return (*r[:axis], k, *r[axis:])

    return _placed(ctx, x, (n, *block), src, "block_major")


@_rule("reduce_scatter")
def _psum_scatter(ctx, pax, name, x, *, axis_name, scatter_dimension, tiled, axis_size):
    """Blocks of ``scatter_dimension`` laid out rank-major, ``MPI_Reduce_scatter_block``
    (sum) into this rank's block."""
    _check(pax, "psum_scatter", [x], {"dim": scatter_dimension, "tiled": tiled})
    n, sd, shape = pax.size, scatter_dimension, x.shape
    wide = _reduction_dtype(x.dtype)
    xw = _as(ctx, x, wide, "psum_scatter")
    if tiled:
        out = shape[:sd] + (shape[sd] // n,) + shape[sd + 1 :]
        laid = xw if sd == 0 else _block_major(ctx, xw, sd, n, keep=True)
    else:
        out = shape[:sd] + shape[sd + 1 :]
        laid = _block_major(ctx, xw, sd, n, keep=False) if sd else xw
    send = _stored(ctx, laid)
    r = _step(ctx, "reduce_scatter", name, pax.comm, send, out, send.size // n, op="sum")
    return _as(ctx, r, x.dtype, "psum_scatter")


@_rule("all_to_all")
def _all_to_all(ctx, pax, name, x, *, axis_name, split_axis, concat_axis, tiled, axis_size):
    """Blocks of ``split_axis`` laid out rank-major, ``MPI_Alltoall``, the received
    ``[n, *block]`` read with the sender axis at (or merged into) ``concat_axis``."""
    _check(pax, "all_to_all", [x], {"split": split_axis, "concat": concat_axis, "tiled": tiled})
    n, sa, ca, shape = pax.size, split_axis, concat_axis, x.shape
    if tiled:
        laid = x if sa == 0 else _block_major(ctx, x, sa, n, keep=True)
        block = shape[:sa] + (shape[sa] // n,) + shape[sa + 1 :]
    else:
        laid = _block_major(ctx, x, sa, n, keep=False) if sa else x
        block = shape[:sa] + shape[sa + 1 :]
    send = _stored(ctx, laid)
    r = _step(ctx, "alltoall", name, pax.comm, send, (n, *block), send.size // n)
    if not tiled:
        out = block[:ca] + (n,) + block[ca:]
        return _placed(ctx, r, out, lambda i: (i[ca], *i[:ca], *i[ca + 1 :]), "all_to_all")
    b = block[ca]
    out = block[:ca] + (n * b,) + block[ca + 1 :]

    def src(i):
        j, bb = i[ca], ctx.iconst(b)
        return (ctx.idiv(j, bb), *i[:ca], ctx.irem(j, bb), *i[ca + 1 :])

    return _placed(ctx, r, out, src, "all_to_all")


@_rule("ppermute")
def _ppermute(ctx, pax, name, x, *, axis_name, perm):
    """``MPI_Sendrecv``: this rank's value to its destination, its source's value in; zeros
    where no pair sends to this rank (the step still sends)."""
    _check(pax, "ppermute", [x], {"perm": tuple(perm)})
    dest = next((d for s, d in perm if s == pax.rank), -1)
    source = next((s for s, d in perm if d == pax.rank), -1)
    if dest < 0 and source < 0:
        return K.from_fn(x.shape, x.dtype, lambda idx: ctx.const(0, x.dtype), "ppermute")
    send = _stored(ctx, x)
    r = _step(ctx, "sendrecv", name, pax.comm, send, x.shape, send.size, dest=dest, source=source)
    if source < 0:
        return K.from_fn(x.shape, x.dtype, lambda idx: ctx.const(0, x.dtype), "ppermute")
    return r


@_rule("axis_index")
def _axis_index(ctx, pax, name, *, axis_name):
    """This process's rank along the axis, a constant of its program."""
    rank = int(pax.rank)
    return K.from_fn((), np.dtype(np.int32), lambda idx: ctx.const(rank, np.int32), "axis_index")


# -- staging through host memory (backends without MPI steps) ------------------------------------


def _staged(ctx, prim, pax, name: str, args, params):
    """``prim`` as a host step running fungrad.distributed's eager collective on the operands
    read back to the host (the GPU: between dispatches); shapes checked once here, as the
    native steps are (the eager functions check them again per call)."""
    import fungrad.distributed as d

    _check(pax, prim.name, args, {k: v for k, v in params.items() if k != "axis_name"})
    p = params
    runs = {
        "psum": lambda vs: d.allreduce(pax, "sum", vs, p["axis_index_groups"]),
        "pmax": lambda vs: d.allreduce(pax, "max", vs, p["axis_index_groups"]),
        "pmin": lambda vs: d.allreduce(pax, "min", vs, p["axis_index_groups"]),
        "all_gather": lambda vs: [
            d.all_gather(pax, vs[0], gather_axis=p["axis"], tiled=p["tiled"])
        ],
        "reduce_scatter": lambda vs: [
            d.reduce_scatter(pax, vs[0], scatter_dimension=p["scatter_dimension"], tiled=p["tiled"])
        ],
        "all_to_all": lambda vs: [
            d.all_to_all(
                pax,
                vs[0],
                split_axis=p["split_axis"],
                concat_axis=p["concat_axis"],
                tiled=p["tiled"],
            )
        ],
        "ppermute": lambda vs: [d.ppermute(pax, vs[0], perm=p["perm"])],
    }
    avals = [v.aval for v in ctx.planner.eqn.outvars]
    outs = lower_host_call(
        ctx, f"MPI {prim.name} over process axis {name!r} (host)", runs[prim.name], args, avals
    )
    return outs if prim.multiple_results else outs[0]
