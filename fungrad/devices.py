"""Devices and device-resident arrays: ``fg.devices()``, ``fg.device_put``, ``GpuArray``.

A :class:`GpuArray` is an :class:`~fungrad.Array` whose value lives in GPU memory: the result
of a ``jit(f, backend="gpu")`` call, or of ``device_put(x, backend="gpu")``. Passing it to
another GPU-jitted function uses the device buffer directly, so chained GPU calls never go
through the host. Anything that needs the value on the host (``np.asarray``, printing, an
eager fungrad operation, ``.item()``) downloads it once and keeps the copy.

The GPU runtime (``fungrad/lowering/gpu.py``) is loaded on first use only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fungrad import core
from fungrad.array import Array, is_concrete_array


@dataclass(frozen=True)
class Device:
    """A device arrays can live on (``jax.Device``): ``platform`` is ``"cpu"`` or ``"gpu"``;
    ``device_kind`` names it; ``active`` says whether ``backend="gpu"`` computes on it (one
    adapter per process, chosen as ``fungrad/lowering/gpu.py`` describes)."""

    id: int
    platform: str
    device_kind: str
    active: bool = True

    def __repr__(self):
        if self.platform == "cpu":
            return f"CpuDevice(id={self.id})"
        return f"GpuDevice(id={self.id}, kind={self.device_kind!r}" + (
            ")" if self.active else ", inactive)"
        )


CPU = Device(0, "cpu", "cpu")


def devices(backend: str | None = None) -> list[Device]:
    """The CPU and the GPU adapters found (``backend="cpu"`` or ``"gpu"`` for one kind).
    Listing adapters starts no GPU device."""
    if backend not in (None, "cpu", "gpu"):
        raise ValueError(f"devices: unknown backend {backend!r}; use 'cpu' or 'gpu'")
    out = [CPU] if backend in (None, "cpu") else []
    if backend in (None, "gpu"):
        from fungrad.lowering.gpu import runtime as gpu

        found = gpu.adapters()
        try:
            chosen = gpu.select_adapter()
        except gpu.GpuUnavailableError:
            chosen = None
        out += [Device(i, "gpu", gpu.describe(a.info), a is chosen) for i, a in enumerate(found)]
    return out


def _gpu_runtime():
    from fungrad.lowering.gpu import runtime as gpu

    return gpu.runtime()


class GpuArray(Array):
    """An Array held in GPU memory (see the module docstring)."""

    __slots__ = ("_dbuf", "_host")

    def __init__(self, dbuf, aval: core.ShapedArray, weak_type: bool = False):
        # Array.__init__ is not called: the value is the device buffer, downloaded on demand
        self._dbuf = dbuf
        self._host = None
        self.weak_type = weak_type
        self._aval = aval

    @property
    def _value(self):
        host = self._host
        if host is None:
            if self._dbuf is None:
                from fungrad.array import _DeletedValue

                aval = self._aval
                return _DeletedValue(f"{aval.dtype.name}[{','.join(map(str, aval.shape))}]")
            aval = self._aval
            host = _gpu_runtime().download(self._dbuf, aval.shape, aval.dtype)
            host.flags.writeable = False
            if not aval.shape:
                host = host[()]
            self._host = host
        return host

    aval = property(lambda self: self._aval)
    shape = property(lambda self: self._aval.shape)
    dtype = property(lambda self: self._aval.dtype)
    ndim = property(lambda self: len(self._aval.shape))
    size = property(lambda self: int(np.prod(self._aval.shape, dtype=np.int64)))
    nbytes = property(lambda self: self.size * self._aval.dtype.itemsize)

    @property
    def device(self) -> Device:
        return next(d for d in devices("gpu") if d.active)

    def delete(self) -> None:
        self._dbuf = None
        self._host = None

    def is_deleted(self) -> bool:
        return self._dbuf is None

    def block_until_ready(self) -> GpuArray:
        """Wait until the GPU has finished the work that computes this array."""
        if self._dbuf is not None:
            _gpu_runtime().wait(self._dbuf)
        return self

    def __repr__(self):
        return "Gpu" + super().__repr__()


def device_buffer(x):
    """The device buffer of ``x`` for a GPU call: a GpuArray's own, else ``x`` uploaded."""
    if isinstance(x, GpuArray):  # also a complex one: its buffer holds (re, im) pairs
        if x._dbuf is None:
            x._value._fail()  # a deleted array: the usual RuntimeError
        return x._dbuf
    value = x._value if is_concrete_array(x) else x
    return _gpu_runtime().upload(np.asarray(value))


def device_put(x, device=None, *, backend: str | None = None):
    """Arrays of pytree ``x`` on ``device`` (a :class:`Device`, ``"cpu"`` or ``"gpu"``) or
    ``backend``; the default is the CPU. On the GPU they stay there until read. ``device``
    may also be a ``jax.sharding`` Sharding or PartitionSpec (or a pytree prefix of ``x`` of
    them, see fungrad/sharding_impls.py): the Arrays then carry it as their ``.sharding``."""
    from fungrad import sharding_impls, tree_util
    from fungrad.operands import operand

    if sharding_impls.is_sharding_target(device):
        return sharding_impls.put_sharded(
            x, device, lambda leaf, d: device_put(leaf, d, backend=backend)
        )
    target = backend if device is None else device
    if isinstance(target, Device):
        if target.platform == "gpu" and not target.active:
            raise ValueError(
                f"device_put: {target!r} is not the adapter this process computes "
                "on; choose it with the FUNGRAD_GPU_ADAPTER environment variable "
                "before the first GPU use"
            )
        target = target.platform
    if target not in (None, "cpu", "gpu"):
        raise ValueError(
            f"device_put: unknown device {target!r}; use 'cpu', 'gpu' or an "
            "element of fungrad.devices()"
        )

    def put(leaf):
        if isinstance(leaf, core.Tracer):
            return leaf
        if target == "gpu":
            if isinstance(leaf, GpuArray):
                return leaf
            arr = leaf if isinstance(leaf, Array) else operand(leaf, "device_put")
            return GpuArray(device_buffer(arr), arr.aval, arr.weak_type)
        if isinstance(leaf, GpuArray):
            return Array(np.array(leaf._value), leaf.weak_type)
        return leaf if isinstance(leaf, Array) else operand(leaf, "device_put")

    return tree_util.tree_map(put, x)


def default_backend() -> str:
    """The platform computations run on when ``jit`` is given no backend: ``"cpu"``
    (``jax.default_backend``)."""
    return "cpu"


def local_devices(process_index: int | None = None, backend: str | None = None) -> list[Device]:
    """The devices of ``backend`` (the default backend, the CPU, when None) attached to this
    process (``jax.local_devices``); ``process_index`` may only be None or this process's
    index (another process's devices are not reachable from here)."""
    me = globals()["process_index"]()
    if process_index not in (None, me):
        if _distributed() is None:
            raise ValueError(
                f"local_devices: process_index={process_index!r}, but fungrad runs as "
                "a single process (index 0)"
            )
        raise ValueError(
            f"local_devices: process_index={process_index!r}, but this is process {me}; "
            "only its own devices are listed"
        )
    return devices(backend or default_backend())


def _distributed():
    """fungrad.distributed when initialized (an MPI job: one process per device), else None."""
    from fungrad import distributed

    return distributed if distributed.is_initialized() else None


def device_count(backend: str | None = None) -> int:
    """How many devices ``backend`` (the default backend, the CPU, when None) has
    (``jax.device_count``); in an MPI job (``fungrad.distributed.initialize()``) the number of
    processes, each one device of a multi-process pmap."""
    d = _distributed()
    if d is not None:
        return d.process_count()
    return len(devices(backend or default_backend()))


def local_device_count(backend: str | None = None) -> int:
    """How many devices of ``backend`` this process has (``jax.local_device_count``): the same
    as :func:`device_count` in a single process, 1 in an MPI job."""
    if _distributed() is not None:
        return 1
    return device_count(backend)


def process_index(backend: str | None = None) -> int:
    """This process's index among the processes of a computation (``jax.process_index``):
    its MPI rank after ``fungrad.distributed.initialize()``, else 0."""
    d = _distributed()
    return 0 if d is None else d.process_index()


def process_count(backend: str | None = None) -> int:
    """How many processes take part in a computation (``jax.process_count``): the MPI job's
    size after ``fungrad.distributed.initialize()``, else 1."""
    d = _distributed()
    return 1 if d is None else d.process_count()


def process_indices(backend: str | None = None) -> list[int]:
    """The indices of the processes taking part in a computation (``jax.process_indices``)."""
    return list(range(process_count(backend)))
