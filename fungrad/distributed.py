"""Multi-process computations over MPI (``jax.distributed``'s names): one process is one
device of a named axis.

``initialize()`` joins the processes an MPI launcher started (``mpiexec -n 4 python
train.py``) on mpi4py's ``COMM_WORLD``; afterwards ``fg.process_index()`` /
``fg.process_count()`` are this process's rank and the number of processes,
``fg.device_count()`` is the process count and ``fg.local_device_count()`` is 1. A
``fg.pmap(f, axis_name="data")`` then maps over the processes: each passes its local shard
(a leading axis of size 1) and ``f`` runs with ``"data"`` bound as a **process axis**: an axis
of size ``process_count()`` that no vmap owns, so a collective over it (``lax.psum``,
``all_gather``, ``ppermute``...) is bound as a primitive like any other: staged into jit's
jaxpr and compiled to direct MPI calls (fungrad/lowering/cpu), or evaluated eagerly here
through mpi4py (``disable_jit``, eager autodiff).

This module sits in the base layer (numpy, tree_util, mpi4py imported lazily): the lax
impls, jit's cache key and the CPU lowering all ask it, through :func:`process_axis`, what a
name is bound to.

Faults: ``initialize()`` installs ``sys.excepthook`` and ``threading.excepthook`` hooks that
print ``fungrad.distributed: process R of N raised ...`` and call ``MPI.Abort``, so a rank that
raises ends the whole job instead of leaving the others waiting in a collective forever; every
eager collective first checks that all ranks pass operands of the same shape and dtype
(:func:`check_signature`, a ValueError naming the ranks that differ).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import traceback

import numpy as np

from fungrad import tree_util

__all__ = [
    "ProcessAxis",
    "barrier",
    "bind_process_axis",
    "broadcast_one_to_all",
    "check_signature",
    "initialize",
    "is_initialized",
    "process_axis",
    "process_axis_key",
    "process_axis_names",
    "process_count",
    "process_index",
    "shutdown",
]

_INSTALL_HINT = "pip install fungrad[distributed]  (mpi4py and an MPI library, e.g. mpich)"


def _mpi():
    """mpi4py's ``MPI`` module, imported on first use; an ImportError naming the extra when it
    is not installed."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError(
            f"fungrad.distributed needs mpi4py and an MPI library: {_INSTALL_HINT} ({e})"
        ) from e
    return MPI


# -- initialization -----------------------------------------------------------------------------


class _State:
    comm = None  # the world communicator after initialize()
    hooks = None  # (sys.excepthook, threading.excepthook) replaced by initialize()
    group_comms: dict = {}  # (axis key, groups) -> the communicator of this rank's group


_state = _State()


def initialize(
    coordinator_address=None,
    num_processes=None,
    process_id=None,
    local_device_ids=None,
    *,
    comm=None,
    **unused,
):
    """Join the processes of an MPI job (``jax.distributed.initialize``).

    Rank and size come from the launcher (``mpiexec``/``mpirun``/``srun``), which also does the
    rendezvous, so ``coordinator_address`` and ``local_device_ids`` have nothing to choose;
    ``num_processes`` and ``process_id``, when given, must agree with the launcher (a
    ValueError otherwise). ``comm`` (an mpi4py communicator, default ``COMM_WORLD``) runs the
    computation on a sub-communicator. A plain ``python script.py`` is a job of one process.
    Installs the abort-on-exception hooks (see the module docstring)."""
    del coordinator_address, local_device_ids, unused
    MPI = _mpi()
    if _state.comm is not None:
        raise RuntimeError("fungrad.distributed.initialize should only be called once")
    comm = MPI.COMM_WORLD if comm is None else comm
    if num_processes is not None and int(num_processes) != comm.Get_size():
        raise ValueError(
            f"fungrad.distributed.initialize: num_processes={num_processes}, but the MPI "
            f"launcher started {comm.Get_size()} process(es)"
        )
    if process_id is not None and int(process_id) != comm.Get_rank():
        raise ValueError(
            f"fungrad.distributed.initialize: process_id={process_id}, but the MPI launcher "
            f"gave this process rank {comm.Get_rank()}"
        )
    _state.comm = comm
    _state.group_comms = {}
    _install_hooks()


def is_initialized() -> bool:
    """Whether :func:`initialize` was called (and :func:`shutdown` not since)."""
    return _state.comm is not None


def shutdown():
    """Leave the job: restore the exception hooks and forget the communicator (MPI itself is
    finalized by mpi4py at exit). A no-op when not initialized."""
    if _state.comm is None:
        return
    barrier()
    for c in _state.group_comms.values():
        c.Free()
    _state.group_comms = {}
    if _state.hooks is not None:
        sys.excepthook, threading.excepthook = _state.hooks
        _state.hooks = None
    _state.comm = None


def _world():
    if _state.comm is None:
        raise RuntimeError(
            "fungrad.distributed is not initialized: call fungrad.distributed.initialize() "
            "first (and launch the script with mpiexec -n N python ...)"
        )
    return _state.comm


def process_index() -> int:
    """This process's rank (0 when not initialized)."""
    return 0 if _state.comm is None else _state.comm.Get_rank()


def process_count() -> int:
    """The number of processes of the job (1 when not initialized)."""
    return 1 if _state.comm is None else _state.comm.Get_size()


def barrier():
    """Wait until every process reaches this call."""
    _world().Barrier()


def broadcast_one_to_all(in_tree, is_source=None):
    """The pytree of arrays ``in_tree`` of the source process, on every process
    (``jax.experimental.multihost_utils.broadcast_one_to_all``). ``is_source`` defaults to
    ``process_index() == 0``; exactly one process must be the source. Leaves come back as
    fungrad Arrays; every process must pass the same structure, shapes and dtypes."""
    from fungrad.array import Array

    comm = _world()
    me = comm.Get_rank() == 0 if is_source is None else bool(is_source)
    sources = [r for r, s in enumerate(comm.allgather(me)) if s]
    if len(sources) != 1:
        raise ValueError(
            f"broadcast_one_to_all: exactly one process must be the source, got ranks {sources}"
        )
    leaves, tree = tree_util.tree_flatten(in_tree)
    values = [_contiguous(np.asarray(v)) for v in leaves]
    check_signature(
        comm,
        "broadcast_one_to_all",
        (str(tree), tuple((v.shape, v.dtype.str) for v in values)),
    )
    out = []
    for v in values:
        buf = v.copy()
        comm.Bcast(_bytes(buf), root=sources[0])
        out.append(Array(buf))
    return tree_util.tree_unflatten(tree, out)


# -- faults -----------------------------------------------------------------------------------


def _abort_message(exc_type, exc, tb) -> str:
    comm = _state.comm
    rank, size = (comm.Get_rank(), comm.Get_size()) if comm is not None else (0, 1)
    text = "".join(traceback.format_exception(exc_type, exc, tb))
    return (
        f"fungrad.distributed: process {rank} of {size} raised {exc_type.__name__}: {exc}\n"
        f"{text}fungrad.distributed: aborting the job (MPI_Abort) so the other processes "
        "do not wait for it forever\n"
    )


def _install_hooks():
    """``sys.excepthook`` / ``threading.excepthook`` that name this rank and abort the job."""
    old_sys, old_thread = sys.excepthook, threading.excepthook

    def sys_hook(exc_type, exc, tb):
        if issubclass(exc_type, KeyboardInterrupt) or _state.comm is None:
            return old_sys(exc_type, exc, tb)
        _abort(_abort_message(exc_type, exc, tb))

    def thread_hook(args):
        if args.exc_type is SystemExit or _state.comm is None:
            return old_thread(args)
        _abort(_abort_message(args.exc_type, args.exc_value, args.exc_traceback))

    _state.hooks = (old_sys, old_thread)
    sys.excepthook, threading.excepthook = sys_hook, thread_hook


def _abort(message: str):
    sys.stderr.write(message)
    sys.stderr.flush()
    _state.comm.Abort(1)


def check_signature(comm, what: str, signature):
    """Check that every rank of ``comm`` passes the same ``signature`` (a small picklable
    value: shapes and dtypes of a collective's operands); a ValueError on every rank naming
    the ranks that differ and their signatures otherwise. Collective: all ranks must call it."""
    sigs = comm.allgather(signature)
    if all(s == sigs[0] for s in sigs):
        return
    groups: dict = {}
    for r, s in enumerate(sigs):
        groups.setdefault(s if isinstance(s, str) else repr(s), []).append(r)
    detail = "; ".join(f"ranks {ranks}: {s}" for s, ranks in groups.items())
    raise ValueError(
        f"{what}: the processes pass operands of different shapes or dtypes ({detail}); "
        "every process must call a collective with the same shapes and dtypes"
    )


# -- the process axis ---------------------------------------------------------------------------


class ProcessAxis:
    """A named axis spanning the processes of ``comm``: ``size`` processes, this one at
    ``rank``. ``key`` identifies it in compile caches."""

    __slots__ = ("name", "comm", "size", "rank", "key")

    def __init__(self, name, comm):
        self.name = name
        self.comm = comm
        self.size = comm.Get_size()
        self.rank = comm.Get_rank()
        self.key = (name, self.size, self.rank, comm.py2f())

    def __repr__(self):
        return f"ProcessAxis({self.name!r}, size={self.size}, rank={self.rank})"


class _Frames(threading.local):
    def __init__(self):
        self.stack: list = []  # ProcessAxis, innermost last
        self.key: tuple = ()  # process_axis_key() of the stack, kept up to date by push/pop


_frames = _Frames()
_interned_keys: dict = {}  # process-axis key -> the one tuple equal to it (compared by identity)


def _set_key(stack: list):
    """Recompute the thread's process-axis key after ``stack`` changed: interned, so that the
    key of the same binding is the same object however often it is bound (jit's hot path
    compares keys by identity first)."""
    key = tuple(a.key for a in stack)
    _frames.key = _interned_keys.setdefault(key, key)


@contextlib.contextmanager
def bind_process_axis(name, comm=None):
    """Bind ``name`` to a process axis over ``comm`` (the world communicator by default)
    while the block runs: what a multi-process pmap does around its function."""
    if name is None:
        yield None
        return
    axis = ProcessAxis(name, _world() if comm is None else comm)
    stack = _frames.stack
    stack.append(axis)
    _set_key(stack)
    try:
        yield axis
    finally:
        stack.pop()
        _set_key(stack)


def process_axis(name) -> ProcessAxis | None:
    """The process axis ``name`` is bound to (innermost binding), or None when it is not one.
    (A vmap binding the same name inside consumes its collectives before they get here.)"""
    for axis in reversed(_frames.stack):
        if axis.name == name:
            return axis
    return None


def process_axis_names() -> list:
    """The names bound to process axes, innermost last."""
    return [a.name for a in _frames.stack]


def process_axis_key() -> tuple:
    """The process axes bound now, as a hashable key: part of jit's compile cache key, since
    the same function compiles to different MPI calls under different bindings. The same
    binding gives the same (interned) object every time, so comparing by identity is enough
    where that is cheaper."""
    return _frames.key


# -- eager collectives over a process axis ------------------------------------------------------


def _contiguous(a) -> np.ndarray:
    """``a`` as a C-contiguous array of the same shape (``np.ascontiguousarray`` would make a
    0-d array 1-d)."""
    return np.asarray(a, order="C")


def _bytes(a: np.ndarray):
    """An mpi4py buffer spec of contiguous ``a`` as raw bytes (any dtype moves unchanged)."""
    MPI = _mpi()
    return [a.reshape(-1).view(np.uint8), MPI.BYTE]


def group_comm(axis: ProcessAxis, groups):
    """The communicator of this rank's group of ``groups`` (``axis_index_groups``: tuples of
    axis indices), split from the axis's communicator once and cached; ``axis.comm`` for
    None."""
    if groups is None:
        return axis.comm
    key = (axis.key, groups)
    c = _state.group_comms.get(key)
    if c is None:
        color = next(i for i, g in enumerate(groups) if axis.rank in g)
        c = axis.comm.Split(color, list(groups[color]).index(axis.rank))
        _state.group_comms[key] = c
    return c


def _signature(what: str, comm, xs):
    """Check that every rank passes ``xs`` of the same shapes and dtypes (``float32[3,4]``)."""
    sig = tuple(f"{np.asarray(x).dtype.name}[{','.join(map(str, np.shape(x)))}]" for x in xs)
    check_signature(comm, what, sig if len(sig) != 1 else sig[0])


_WIDEN = {np.dtype(np.float16): np.dtype(np.float32)}
"""dtypes MPI has no reduction for, reduced in a wider type (exact for max/min; for sums the
float32 accumulation rounds once, at the end)."""


def allreduce(axis: ProcessAxis, op: str, xs, groups=None):
    """``op`` ("sum", "max", "min") of each array of ``xs`` over the processes of ``axis`` (or
    of this rank's group): a list of numpy arrays."""
    MPI = _mpi()
    comm = group_comm(axis, groups)
    _signature(f"p{op}" if op != "sum" else "psum", comm, xs)
    mpi_op = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op]
    outs = []
    for x in xs:
        x = np.asarray(x)
        dt = x.dtype
        send = np.asarray(x, order="C", dtype=_WIDEN.get(dt, dt))
        recv = np.empty_like(send)
        comm.Allreduce(send, recv, op=mpi_op)
        outs.append(recv.astype(dt, copy=False))
    return outs


def all_gather(axis: ProcessAxis, x, *, gather_axis: int, tiled: bool):
    """Every process's ``x`` stacked along a new axis ``gather_axis`` (concatenated along it
    with ``tiled``), ordered by rank."""
    comm = axis.comm
    _signature("all_gather", comm, [x])
    x = _contiguous(x)
    out = np.empty((axis.size, *x.shape), x.dtype)
    comm.Allgather(_bytes(x), _bytes(out))
    out = np.moveaxis(out, 0, gather_axis)
    if tiled:
        s = out.shape
        out = out.reshape(
            s[:gather_axis] + (s[gather_axis] * s[gather_axis + 1],) + s[gather_axis + 2 :]
        )
    return _contiguous(out)


def reduce_scatter(axis: ProcessAxis, x, *, scatter_dimension: int, tiled: bool):
    """The sum of ``x`` over the processes, split along ``scatter_dimension``: rank ``r``
    gets block ``r`` (the dimension removed without ``tiled``)."""
    MPI = _mpi()
    comm, n, sd = axis.comm, axis.size, scatter_dimension
    _signature("psum_scatter", comm, [x])
    x = np.asarray(x)
    dt = x.dtype
    send = np.asarray(np.moveaxis(x, sd, 0), order="C", dtype=_WIDEN.get(dt, dt))
    block = send.shape[0] // n
    send = send.reshape((n, block, *send.shape[1:]))
    recv = np.empty(send.shape[1:], send.dtype)
    comm.Reduce_scatter_block(send, recv, op=MPI.SUM)
    recv = recv.astype(dt, copy=False)
    out = np.moveaxis(recv, 0, sd) if tiled else recv[0]
    return _contiguous(out)


def all_to_all(axis: ProcessAxis, x, *, split_axis: int, concat_axis: int, tiled: bool):
    """Block ``j`` of ``x`` along ``split_axis`` goes to rank ``j``; the blocks received are
    placed along ``concat_axis`` ordered by sender (``lax.all_to_all``'s layout)."""
    comm, n = axis.comm, axis.size
    _signature("all_to_all", comm, [x])
    x = np.asarray(x)
    send = _contiguous(np.moveaxis(x, split_axis, 0))
    block = send.shape[0] // n
    send = send.reshape((n, block, *send.shape[1:]))
    recv = np.empty_like(send)
    comm.Alltoall(_bytes(send), _bytes(recv))
    if not tiled:
        return _contiguous(np.moveaxis(recv[:, 0], 0, concat_axis))
    blocks = [np.moveaxis(recv[k], 0, split_axis) for k in range(n)]
    return _contiguous(np.concatenate(blocks, axis=concat_axis))


def ppermute(axis: ProcessAxis, x, *, perm):
    """Rank ``src``'s ``x`` at rank ``dst`` for each ``(src, dst)`` of ``perm``; ranks nobody
    sends to get zeros."""
    MPI = _mpi()
    comm, me = axis.comm, axis.rank
    _signature("ppermute", comm, [x])
    x = _contiguous(x)
    out = np.zeros_like(x)
    reqs = []
    for src, dst in perm:
        if dst == me:
            reqs.append(comm.Irecv(_bytes(out), source=src, tag=17))
    for src, dst in perm:
        if src == me:
            reqs.append(comm.Isend(_bytes(x), dest=dst, tag=17))
    MPI.Request.Waitall(reqs)
    return out
