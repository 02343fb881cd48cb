"""``jax.sharding``: meshes of devices, partition specs and the shardings built from them.

A :class:`Mesh` arranges devices in a named n-d grid (``Mesh(devices, ("data", "model"))``,
or ``make_mesh((n,), ("data",))``); a :class:`PartitionSpec` (``P("data", None)``) says which
mesh axes each array dimension is split over; a :class:`NamedSharding` pairs the two, and
:class:`SingleDeviceSharding` is an array held whole by one device.

fungrad computes on one device per process (``fungrad.devices``), so a concrete mesh has one
device and every mesh axis has size 1: ``make_mesh((1,), ("data",))`` and ``P("data")``
describe the layout a data-parallel program asks for, and every array is held whole. Programs
written for JAX that build a mesh of ``jax.device_count()`` devices, ``device_put`` their
parameters and batches with ``NamedSharding`` and run ``jit``/``shard_map`` therefore run
unchanged and give JAX's numbers on one device; a mesh larger than the devices is JAX's
ValueError. :class:`AbstractMesh` (axis sizes and names, no devices) may have any sizes.

The *context mesh* (``with set_mesh(mesh):``, or ``set_mesh(mesh)`` alone) is the mesh that
a bare PartitionSpec refers to in ``with_sharding_constraint``, ``device_put`` and ``jit``'s
``in_shardings``/``out_shardings``, and that ``shard_map`` uses when given no ``mesh``.

An Array's ``.sharding`` is the NamedSharding that ``device_put``, ``with_sharding_constraint``
(applied eagerly), ``jit(out_shardings=...)`` or ``shard_map`` gave it, else the
SingleDeviceSharding of its device. JAX's *sharding in types* (``AxisType.Explicit``: avals
that carry a sharding, ``float32[4@x]``) is not modelled: fungrad's avals have none, so the
checks JAX makes between a value's type sharding and an explicit-mode annotation are not
made (programs that pass them in JAX run the same here).
"""

from __future__ import annotations

import abc
import enum
import math
import operator
import threading
import warnings
import weakref
from collections import OrderedDict
from typing import Any

import numpy as np

__all__ = [
    "AbstractMesh",
    "AxisType",
    "DuplicateSpecError",
    "Mesh",
    "NamedSharding",
    "PartitionSpec",
    "Shard",
    "Sharding",
    "SingleDeviceSharding",
    "get_abstract_mesh",
    "get_mesh",
    "make_mesh",
    "make_single_device_sharding",
    "set_mesh",
    "use_abstract_mesh",
]


class AxisType(enum.Enum):
    """How a mesh axis is used (``jax.sharding.AxisType``): ``Auto`` (the compiler places
    values), ``Explicit`` (shardings are part of the types) or ``Manual`` (inside shard_map)."""

    Auto = enum.auto()
    Explicit = enum.auto()
    Manual = enum.auto()

    def __repr__(self):
        return self.name


class DuplicateSpecError(Exception):
    """A PartitionSpec names one mesh axis for two dimensions (JAX's exception of that name)."""


# -- PartitionSpec --------------------------------------------------------------------------


class _Unconstrained:
    """``P.UNCONSTRAINED``: a dimension whose sharding the compiler may choose."""

    def __repr__(self):
        return "UNCONSTRAINED"

    def __reduce__(self):
        return (_unconstrained, ())


def _unconstrained():
    return PartitionSpec.UNCONSTRAINED


class PartitionSpec:
    """How each dimension of an array is split over mesh axes (``jax.sharding.PartitionSpec``,
    ``jax.P``): one entry per leading dimension, each None (not split), a mesh axis name, a
    tuple of names (split over their product, the first the major one) or
    ``P.UNCONSTRAINED``. Dimensions past the entries are not split. A pytree leaf, compared
    entry by entry (``P('x', None) != P('x')``, as in JAX)."""

    UNCONSTRAINED: Any = _Unconstrained()
    __slots__ = ("_partitions", "unreduced", "reduced")

    def __init__(self, *partitions, unreduced=frozenset(), reduced=frozenset()):
        parts = []
        for p in partitions:
            if isinstance(p, list):
                p = tuple(p)
            if isinstance(p, tuple):
                p = p[0] if len(p) == 1 else p  # P(('x',)) is P('x'), as in JAX
            parts.append(p)
        self._partitions = tuple(parts)
        self.unreduced = frozenset(unreduced)
        self.reduced = frozenset(reduced)

    def __iter__(self):
        return iter(self._partitions)

    def __len__(self) -> int:
        return len(self._partitions)

    def __getitem__(self, i):
        return self._partitions[i]

    def __add__(self, other):
        if isinstance(other, PartitionSpec):
            other = other._partitions
        return PartitionSpec(*self._partitions, *other)

    def __eq__(self, other):
        if not isinstance(other, PartitionSpec):
            return NotImplemented
        return (self._partitions, self.unreduced, self.reduced) == (
            other._partitions,
            other.unreduced,
            other.reduced,
        )

    def __hash__(self):
        return hash((PartitionSpec, self._partitions, self.unreduced, self.reduced))

    def __repr__(self):
        extra = [
            f"{name}={set(sorted(getattr(self, name)))!r}"
            for name in ("unreduced", "reduced")
            if getattr(self, name)
        ]
        body = ", ".join([*map(repr, self._partitions), *extra])
        if len(self._partitions) == 1 and not extra:
            body += ","  # P('x',), as a 1-tuple prints
        return f"P({body})"

    def __reduce__(self):
        return (_make_spec, (self._partitions, self.unreduced, self.reduced))

    def axis_names(self) -> tuple:
        """Every mesh axis name the entries mention, in order."""
        return tuple(n for p in self._partitions for n in _entry_names(p))


def _make_spec(partitions, unreduced, reduced):
    return PartitionSpec(*partitions, unreduced=unreduced, reduced=reduced)


def _entry_names(entry) -> tuple:
    """The mesh axis names of one PartitionSpec entry."""
    if entry is None or entry is PartitionSpec.UNCONSTRAINED:
        return ()
    return tuple(entry) if isinstance(entry, tuple) else (entry,)


# -- meshes ---------------------------------------------------------------------------------


def _check_axis_types(axis_names: tuple, axis_types, default: AxisType) -> tuple:
    if axis_types is None:
        return (default,) * len(axis_names)
    if isinstance(axis_types, AxisType):
        axis_types = (axis_types,) * len(axis_names)
    axis_types = tuple(axis_types)
    if len(axis_types) != len(axis_names):
        raise ValueError(
            "Number of axis names should match the number of axis_types. Got "
            f"axis_names={axis_names} and axis_types={axis_types}"
        )
    for t in axis_types:
        if not isinstance(t, AxisType):
            raise TypeError(
                f"axis_types must be jax.sharding.AxisType members (Auto, Explicit, Manual), "
                f"got {t!r}"
            )
    return axis_types


def _check_names(axis_names, what: str) -> tuple:
    names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
    if len(set(names)) != len(names):
        raise ValueError(f"{what}: the axis names {names} repeat a name; give each axis its own")
    for n in names:
        try:
            hash(n)
        except TypeError:
            raise TypeError(f"{what}: axis names must be hashable (strings), got {n!r}") from None
    return names


class _MeshBase:
    """What Mesh and AbstractMesh share: the axis names, sizes and types."""

    axis_names: tuple
    axis_sizes: tuple
    axis_types: tuple

    @property
    def shape(self) -> OrderedDict:
        """Axis name -> size, in mesh order."""
        return OrderedDict(zip(self.axis_names, self.axis_sizes))

    @property
    def shape_tuple(self) -> tuple:
        return tuple(zip(self.axis_names, self.axis_sizes))

    @property
    def size(self) -> int:
        return math.prod(self.axis_sizes)

    @property
    def empty(self) -> bool:
        return not self.axis_names

    def _axis_types_of(self, kind: AxisType) -> tuple:
        return tuple(n for n, t in zip(self.axis_names, self.axis_types) if t is kind)

    @property
    def auto_axes(self) -> tuple:
        return self._axis_types_of(AxisType.Auto)

    @property
    def explicit_axes(self) -> tuple:
        return self._axis_types_of(AxisType.Explicit)

    @property
    def manual_axes(self) -> tuple:
        return self._axis_types_of(AxisType.Manual)

    def _short(self) -> str:
        """``'x': 2, 'y': 1, axis_types=(Auto, Auto)``: the repr NamedSharding prints."""
        if self.empty:
            return "(), axis_types=()"
        axes = ", ".join(f"{n!r}: {s}" for n, s in zip(self.axis_names, self.axis_sizes))
        return f"{axes}, axis_types={self.axis_types!r}"


class AbstractMesh(_MeshBase):
    """A mesh's axis sizes, names and types without devices (``jax.sharding.AbstractMesh``):
    what ``get_abstract_mesh()`` returns and what shardings of traced values refer to."""

    def __init__(self, axis_sizes=(), axis_names=(), axis_types=None):
        self.axis_sizes = tuple(operator.index(s) for s in axis_sizes)
        self.axis_names = _check_names(axis_names, "AbstractMesh")
        if len(self.axis_sizes) != len(self.axis_names):
            raise ValueError(
                f"AbstractMesh: {len(self.axis_sizes)} axis sizes {self.axis_sizes} for "
                f"{len(self.axis_names)} axis names {self.axis_names}; give one size per name"
            )
        self.axis_types = _check_axis_types(self.axis_names, axis_types, AxisType.Auto)

    def __eq__(self, other):
        if not isinstance(other, AbstractMesh):
            return NotImplemented
        return (self.axis_sizes, self.axis_names, self.axis_types) == (
            other.axis_sizes,
            other.axis_names,
            other.axis_types,
        )

    def __hash__(self):
        return hash((AbstractMesh, self.axis_sizes, self.axis_names, self.axis_types))

    def __repr__(self):
        return f"AbstractMesh({self._short()})"

    @property
    def abstract_mesh(self) -> AbstractMesh:
        return self

    def update_axis_types(self, name_to_type: dict) -> AbstractMesh:
        """This mesh with the named axes' types replaced."""
        types = tuple(name_to_type.get(n, t) for n, t in zip(self.axis_names, self.axis_types))
        return AbstractMesh(self.axis_sizes, self.axis_names, types)


class Mesh(_MeshBase):
    """Devices in an n-d grid with named axes (``jax.sharding.Mesh``): ``devices`` is an array
    (or nested sequence) of devices with one dimension per name of ``axis_names``.
    ``axis_types`` defaults to ``AxisType.Auto`` for every axis, as in JAX. ``with mesh:`` is
    JAX's deprecated spelling of ``with set_mesh(mesh):`` (it warns, and only a bare
    PartitionSpec's mesh is looked up in it)."""

    def __init__(self, devices=(), axis_names=(), axis_types=None):
        from fungrad.devices import Device

        devs = np.empty(np.shape(np.asarray(devices, dtype=object)), dtype=object)
        devs[...] = np.asarray(devices, dtype=object)
        names = _check_names(axis_names, "Mesh")
        if devs.ndim != len(names) and not (devs.size == 0 and not names):
            raise ValueError(
                "Mesh requires the ndim of its first argument (`devices`) to equal the length "
                f"of its second argument (`axis_names`), but got devices.ndim == {devs.ndim} "
                f"and len(axis_names) == {len(names)}."
            )
        for d in devs.flat:
            if not isinstance(d, Device):
                raise TypeError(
                    f"Mesh: devices must be fungrad devices (elements of fungrad.devices()), "
                    f"got {d!r} of type {type(d).__name__}"
                )
        if len({(d.platform, d.id) for d in devs.flat}) != devs.size:
            raise ValueError(f"Mesh: a device appears twice in {devs.tolist()}")
        if len({d.platform for d in devs.flat}) > 1:
            raise ValueError(
                f"Mesh: all devices of a mesh must be of one platform, got {devs.tolist()}; "
                "fungrad.devices() lists the CPU and the GPU adapters, so build the mesh from "
                "one platform's devices: jax.devices('cpu'), or jax.make_mesh(...)"
            )
        devs.flags.writeable = False
        self.devices = devs
        self.axis_names = names if devs.size or names else ()
        self.axis_sizes = tuple(devs.shape) if self.axis_names else ()
        self.axis_types = _check_axis_types(self.axis_names, axis_types, AxisType.Auto)

    @property
    def device_ids(self) -> np.ndarray:
        return np.vectorize(lambda d: d.id, otypes=[int])(self.devices)

    @property
    def local_devices(self) -> list:
        return list(self.devices.flat)

    @property
    def local_mesh(self) -> Mesh:
        return self

    @property
    def is_multi_process(self) -> bool:
        return False

    @property
    def abstract_mesh(self) -> AbstractMesh:
        return AbstractMesh(self.axis_sizes, self.axis_names, self.axis_types)

    def _key(self):
        ids = tuple((d.platform, d.id) for d in self.devices.flat)
        return (ids, self.axis_sizes, self.axis_names, self.axis_types)

    def __eq__(self, other):
        if not isinstance(other, Mesh):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self):
        return hash((Mesh, self._key()))

    def __repr__(self):
        if self.empty:
            return "Mesh(axis_sizes=(), axis_names=())"
        return (
            f"Mesh(axis_sizes={self.axis_sizes}, axis_names={self.axis_names}, "
            f"axis_types={self.axis_types!r})"
        )

    def __enter__(self):
        warnings.warn(
            "`with mesh:` context manager has been deprecated. Please use "
            "`with jax.set_mesh(mesh):` instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        _state().legacy.append(self)
        return self

    def __exit__(self, *exc):
        _state().legacy.pop()
        return False


def make_mesh(axis_shapes, axis_names, axis_types=None, *, devices=None) -> Mesh:
    """A mesh of ``prod(axis_shapes)`` devices with the given names (``jax.make_mesh``); the
    devices default to ``fungrad.devices()`` of the default backend, and ``axis_types`` to
    ``AxisType.Explicit`` for every axis, as in JAX 0.10."""
    from fungrad.devices import default_backend
    from fungrad.devices import devices as all_devices

    shape = tuple(operator.index(s) for s in axis_shapes)
    names = _check_names(axis_names, "make_mesh")
    if len(shape) != len(names):
        raise ValueError(
            "Mesh requires the ndim of its first argument (`devices`) to equal the length of "
            f"its second argument (`axis_names`), but got devices.ndim == {len(shape)} and "
            f"len(axis_names) == {len(names)}."
        )
    devs = list(all_devices(default_backend()) if devices is None else devices)
    need = math.prod(shape)
    if need > len(devs):
        raise ValueError(
            f"Number of devices {len(devs)} must be >= the product of mesh_shape {shape}: "
            f"make_mesh needs {need} devices for axes {dict(zip(names, shape))}, and fungrad "
            f"computes on {len(devs)} device(s) in this process (jax.device_count()); build "
            "the mesh from the device count, e.g. make_mesh((jax.device_count(),), ('data',))"
        )
    types = _check_axis_types(names, axis_types, AxisType.Explicit)
    grid = np.empty(need, dtype=object)
    grid[:] = devs[:need]
    return Mesh(grid.reshape(shape), names, types)


# -- the context mesh -----------------------------------------------------------------------


class _State(threading.local):
    def __init__(self):
        self.mesh: Mesh | None = None  # set_mesh
        self.abstract: AbstractMesh | None = None  # use_abstract_mesh
        self.legacy: list = []  # `with mesh:`


_STATE = _State()


def _state() -> _State:
    return _STATE


class set_mesh:  # noqa: N801 (JAX's name: a function that is also a context manager)
    """Make ``mesh`` the context mesh (``jax.set_mesh``): at once, and until the end of the
    ``with`` block when used as a context manager (``set_mesh(None)`` clears it)."""

    def __init__(self, mesh: Mesh | None):
        if mesh is not None and not isinstance(mesh, Mesh):
            raise TypeError(
                f"set_mesh: expected a jax.sharding.Mesh (from make_mesh or Mesh(...)) or "
                f"None, got {type(mesh).__name__}"
            )
        st = _state()
        self._prev = (st.mesh, st.abstract)
        st.mesh, st.abstract = (None if mesh is None or mesh.empty else mesh), None
        self.mesh = mesh

    def __enter__(self):
        return self.mesh

    def __exit__(self, *exc):
        st = _state()
        st.mesh, st.abstract = self._prev
        return False


class use_abstract_mesh:  # noqa: N801 (JAX's name)
    """Make ``mesh`` (an AbstractMesh) the context's abstract mesh inside a ``with`` block
    (``jax.sharding.use_abstract_mesh``)."""

    def __init__(self, mesh: AbstractMesh):
        if not isinstance(mesh, AbstractMesh):
            raise TypeError(
                f"use_abstract_mesh: expected a jax.sharding.AbstractMesh, got "
                f"{type(mesh).__name__}"
            )
        self.mesh = mesh

    def __enter__(self):
        st = _state()
        self._prev = st.abstract
        st.abstract = self.mesh
        return self.mesh

    def __exit__(self, *exc):
        _state().abstract = self._prev
        return False


def get_mesh() -> Mesh:
    """The context mesh that ``set_mesh`` set (``jax.sharding.get_mesh``); an empty Mesh
    when none is set."""
    mesh = _state().mesh
    return Mesh() if mesh is None else mesh


def get_abstract_mesh() -> AbstractMesh:
    """The context mesh's AbstractMesh (``jax.sharding.get_abstract_mesh``); an empty one when
    no mesh is set."""
    st = _state()
    if st.abstract is not None:
        return st.abstract
    return AbstractMesh() if st.mesh is None else st.mesh.abstract_mesh


def context_mesh_for_spec() -> Mesh | None:
    """The mesh a bare PartitionSpec refers to: the ``set_mesh`` mesh, else the innermost
    ``with mesh:``, else None."""
    st = _state()
    if st.mesh is not None:
        return st.mesh
    return st.legacy[-1] if st.legacy else None


# -- shardings ------------------------------------------------------------------------------


class Shard:
    """One addressable piece of an array (``jax.Array.addressable_shards``): its device, the
    index (a tuple of slices) it holds of the global array, its replica id and the data."""

    __slots__ = ("device", "index", "replica_id", "data")

    def __init__(self, device, index: tuple, replica_id: int, data):
        self.device, self.index, self.replica_id, self.data = device, index, replica_id, data

    def __repr__(self):
        return (
            f"Shard(device={self.device!r}, index={self.index}, replica_id={self.replica_id}, "
            f"data={self.data})"
        )


class Sharding(abc.ABC):
    """How an array is laid out over devices (``jax.sharding.Sharding``), the base class of
    :class:`NamedSharding` and :class:`SingleDeviceSharding`."""

    memory_kind: str | None = "device"

    @property
    @abc.abstractmethod
    def device_set(self) -> set:
        """The devices that hold a piece of the array."""

    @property
    def num_devices(self) -> int:
        return len(self.device_set)

    @property
    def addressable_devices(self) -> set:
        return set(self.device_set)

    @property
    def is_fully_addressable(self) -> bool:
        return True

    @property
    def is_fully_replicated(self) -> bool:
        return self.num_devices == 1

    def shard_shape(self, global_shape) -> tuple:
        """The shape of each device's piece of an array of ``global_shape``."""
        return tuple(global_shape)

    def devices_indices_map(self, global_shape) -> dict:
        """Device -> the index (slices) of the global array it holds."""
        return {d: tuple(slice(None) for _ in global_shape) for d in self.device_set}

    def addressable_devices_indices_map(self, global_shape) -> dict:
        return self.devices_indices_map(global_shape)

    def is_equivalent_to(self, other: Sharding, ndim: int) -> bool:
        """Whether both shardings place an array of rank ``ndim`` the same way."""
        if not isinstance(other, Sharding):
            return False
        shape = (1,) * ndim
        return self.device_set == other.device_set and self.devices_indices_map(
            shape
        ) == other.devices_indices_map(shape)


class SingleDeviceSharding(Sharding):
    """An array held whole by one device (``jax.sharding.SingleDeviceSharding``): the
    sharding of every Array that no NamedSharding was given to."""

    def __init__(self, device, *, memory_kind: str | None = None):
        self._device = device
        self.memory_kind = "device" if memory_kind is None else memory_kind

    @property
    def device_set(self) -> set:
        return {self._device}

    def __eq__(self, other):
        if not isinstance(other, SingleDeviceSharding):
            return NotImplemented
        return (self._device, self.memory_kind) == (other._device, other.memory_kind)

    def __hash__(self):
        return hash((SingleDeviceSharding, self._device, self.memory_kind))

    def __repr__(self):
        return f"SingleDeviceSharding(device={self._device!r}, memory_kind={self.memory_kind})"


def make_single_device_sharding(device) -> SingleDeviceSharding:
    """``SingleDeviceSharding(device)`` (``jax.sharding.make_single_device_sharding``)."""
    return SingleDeviceSharding(device)


def check_spec_axes(spec: PartitionSpec, mesh: _MeshBase) -> None:
    """A ValueError unless every axis ``spec`` names is an axis of ``mesh``, a
    DuplicateSpecError if one is named twice (JAX's messages)."""
    seen: set = set()
    for name in spec.axis_names():
        if name in seen:
            raise DuplicateSpecError(
                "A single NamedSharding spec specification can map every mesh axis to at "
                f"most one positional dimension, but {spec!r} has duplicate entries for "
                f"`{name}`"
            )
        seen.add(name)
        if name not in mesh.axis_names:
            raise ValueError(
                f"Resource axis: {name} of {spec!r} is not found in mesh: {mesh.axis_names}."
            )


class NamedSharding(Sharding):
    """An array split over the axes of ``mesh`` as ``spec`` says
    (``jax.sharding.NamedSharding``). On fungrad's one-device meshes every piece is the whole
    array; ``shard_shape`` and ``devices_indices_map`` follow the mesh's sizes."""

    def __init__(self, mesh, spec: PartitionSpec = PartitionSpec(), *, memory_kind=None):
        if not isinstance(mesh, _MeshBase):
            raise TypeError(
                f"NamedSharding: mesh must be a jax.sharding.Mesh or AbstractMesh, got "
                f"{type(mesh).__name__}"
            )
        if not isinstance(spec, PartitionSpec):
            raise TypeError(
                f"NamedSharding: spec must be a jax.sharding.PartitionSpec (P(...)), got "
                f"{spec!r} of type {type(spec).__name__}"
            )
        check_spec_axes(spec, mesh)
        self.mesh, self.spec = mesh, spec
        self.memory_kind = "device" if memory_kind is None else memory_kind

    @property
    def device_set(self) -> set:
        if isinstance(self.mesh, AbstractMesh):
            raise ValueError(
                f"NamedSharding: the sharding {self!r} refers to an AbstractMesh, which has no "
                "devices; build it from a concrete Mesh (make_mesh) to ask for devices"
            )
        return set(self.mesh.devices.flat)

    @property
    def num_devices(self) -> int:
        return self.mesh.size

    @property
    def is_fully_replicated(self) -> bool:
        sizes = self.mesh.shape
        return all(sizes[n] == 1 for n in self.spec.axis_names())

    def _divisors(self, ndim: int) -> list[int]:
        sizes = self.mesh.shape
        parts = list(self.spec) + [None] * (ndim - len(self.spec))
        return [math.prod(sizes[n] for n in _entry_names(p)) for p in parts[:ndim]]

    def shard_shape(self, global_shape) -> tuple:
        shape = tuple(global_shape)
        check_rank(self, len(shape), "shard_shape")
        out = []
        for dim, n in zip(shape, self._divisors(len(shape))):
            if dim % n:
                raise ValueError(
                    f"shard_shape: the global shape {shape} is not divisible by the mesh axis "
                    f"sizes {dict(self.mesh.shape)} as {self.spec!r} splits it"
                )
            out.append(dim // n)
        return tuple(out)

    def devices_indices_map(self, global_shape) -> dict:
        shape = tuple(global_shape)
        block = self.shard_shape(shape)
        sizes, names = self.mesh.shape, self.mesh.axis_names
        parts = list(self.spec) + [None] * (len(shape) - len(self.spec))
        out = {}
        for coords in np.ndindex(*self.mesh.axis_sizes):
            at = dict(zip(names, coords))
            index = []
            for p, b in zip(parts, block):
                k = 0
                for n in _entry_names(p):  # the first name is the major one
                    k = k * sizes[n] + at[n]
                whole = len(_entry_names(p)) == 0 or all(sizes[n] == 1 for n in _entry_names(p))
                index.append(slice(None) if whole else slice(k * b, (k + 1) * b))
            out[self.mesh.devices[coords]] = tuple(index)
        return out

    def with_memory_kind(self, kind: str) -> NamedSharding:
        return NamedSharding(self.mesh, self.spec, memory_kind=kind)

    def update(self, **kwargs) -> NamedSharding:
        """This sharding with ``mesh``, ``spec`` or ``memory_kind`` replaced."""
        return NamedSharding(
            kwargs.get("mesh", self.mesh),
            kwargs.get("spec", self.spec),
            memory_kind=kwargs.get("memory_kind", self.memory_kind),
        )

    def __eq__(self, other):
        if not isinstance(other, NamedSharding):
            return NotImplemented
        return (self.mesh, self.spec, self.memory_kind) == (
            other.mesh,
            other.spec,
            other.memory_kind,
        )

    def __hash__(self):
        return hash((NamedSharding, self.mesh, self.spec, self.memory_kind))

    def __repr__(self):
        kind = "AbstractMesh" if isinstance(self.mesh, AbstractMesh) else "Mesh"
        mem = "" if isinstance(self.mesh, AbstractMesh) else f", memory_kind={self.memory_kind}"
        return f"NamedSharding(mesh={kind}({self.mesh._short()}), spec={self.spec!r}{mem})"


def check_rank(sharding, ndim: int, what: str) -> None:
    """JAX's ValueError when ``sharding``'s spec has more entries than the value has
    dimensions; ``what`` names the operation and the value."""
    if isinstance(sharding, NamedSharding) and len(sharding.spec) > ndim:
        raise ValueError(
            f"One of {what} is incompatible with its sharding annotation {sharding!r}: "
            f"Sharding {sharding!r} is only valid for values of rank at least "
            f"{len(sharding.spec)}, but was applied to a value of rank {ndim}. Shorten the "
            "PartitionSpec to at most the value's rank (its missing trailing entries mean "
            "'not split')."
        )


def resolve(sharding, fname: str, what: str) -> Sharding:
    """``sharding`` as a Sharding: a bare PartitionSpec becomes a NamedSharding on the context
    mesh (JAX's RuntimeError when there is none). ``what`` names the parameter."""
    if isinstance(sharding, Sharding):
        return sharding
    if isinstance(sharding, PartitionSpec):
        mesh = context_mesh_for_spec()
        if mesh is None:
            raise RuntimeError(
                f"{fname} requires a non-empty mesh in context if you are passing "
                f"`PartitionSpec`s to {what}. You can define a context mesh via "
                "`jax.set_mesh(mesh)`. Alternatively, provide `Sharding`s to "
                f"{what} and then the mesh context manager is not required."
            )
        return NamedSharding(mesh, sharding)
    raise TypeError(
        f"{fname}: {what} must be jax.sharding.Sharding or PartitionSpec instances (or a "
        f"pytree of them), got {sharding!r} of type {type(sharding).__name__}"
    )


def is_sharding_leaf(x) -> bool:
    """Whether ``x`` is a leaf of a pytree of shardings (a Sharding, a PartitionSpec or None)."""
    return x is None or isinstance(x, (Sharding, PartitionSpec))


# -- the shardings of concrete arrays -------------------------------------------------------

# id(array) -> (weak reference, sharding): the NamedSharding an Array was given. Arrays are
# unhashable (as jax.Array is), so a WeakKeyDictionary cannot hold them; the weak reference's
# callback drops the entry when the array dies.
_given: dict[int, tuple[weakref.ref, Sharding]] = {}
_given_lock = threading.Lock()


def _forget(key: int, ref: weakref.ref) -> None:
    with _given_lock:
        entry = _given.get(key)
        if entry is not None and entry[0] is ref:
            del _given[key]


def give(x, sharding: Sharding):
    """Record ``sharding`` as the sharding of the concrete Array ``x`` (returned)."""
    key = id(x)
    ref = weakref.ref(x, lambda r, key=key: _forget(key, r))
    with _given_lock:
        _given[key] = (ref, sharding)
    return x


def sharding_of(x) -> Sharding:
    """The sharding of the concrete Array ``x`` (``jax.Array.sharding``)."""
    entry = _given.get(id(x))
    if entry is not None and entry[0]() is x:
        return entry[1]
    return SingleDeviceSharding(x.device)


def addressable_shards(x) -> list[Shard]:
    """The pieces of ``x`` this process holds, one per device of its sharding."""
    sharding = sharding_of(x)
    indices = sharding.addressable_devices_indices_map(x.shape)
    return [
        Shard(d, idx, 0, x if all(s == slice(None) for s in idx) else x[idx])
        for d, idx in indices.items()
    ]


def broadcast_prefix(prefix, full, fname: str, what: str) -> list:
    """One leaf of ``prefix`` (a pytree of shardings/specs, a prefix of ``full``) for each leaf
    of ``full``; a ValueError naming ``fname``'s ``what`` and the mismatched structures."""
    from fungrad import tree_util

    leaves, prefix_def = tree_util.tree_flatten(prefix, is_leaf=is_sharding_leaf)
    try:
        subtrees = tree_util._flatten_up_to(prefix_def, full, fname, what)
    except ValueError as e:
        raise ValueError(
            f"pytree structure error: {fname} {what} must be a tree prefix of the values it "
            f"annotates ({e}); give one Sharding/PartitionSpec per value or one for a whole "
            "subtree"
        ) from None
    out = []
    for leaf, sub in zip(leaves, subtrees):
        out += [leaf] * tree_util.tree_structure(sub).num_leaves
    return out


def is_sharding_target(target) -> bool:
    """Whether ``device_put``'s ``device`` is a Sharding, a PartitionSpec or a pytree of them
    (rather than a device or a backend name)."""
    if isinstance(target, (Sharding, PartitionSpec)):
        return True
    if isinstance(target, (tuple, list, dict)):
        from fungrad import tree_util

        leaves = tree_util.tree_leaves(target, is_leaf=is_sharding_leaf)
        return bool(leaves) and all(is_sharding_leaf(s) for s in leaves)
    return False


def put_sharded(x, shardings, put_on_device):
    """``device_put(x, shardings)``: each leaf of ``x`` on the device of its sharding
    (``put_on_device(leaf, device)``), as a new Array that carries the sharding."""
    from fungrad import core, tree_util

    leaves, tree = tree_util.tree_flatten(x)
    per_leaf = broadcast_prefix(shardings, x, "device_put", "shardings")
    out = []
    for leaf, s in zip(leaves, per_leaf):
        if s is None:
            out.append(put_on_device(leaf, None))
            continue
        if isinstance(s, PartitionSpec):
            mesh = context_mesh_for_spec()
            if mesh is None:
                raise ValueError(
                    "Please set a mesh via `jax.set_mesh` if a PartitionSpec is passed to "
                    f"device_put (got {s!r}), or pass NamedSharding(mesh, spec)"
                )
            s = NamedSharding(mesh, s)
        ndim = np.ndim(leaf) if not isinstance(leaf, core.Tracer) else leaf.aval.ndim
        check_rank(s, ndim, "device_put args")
        (device,) = s.device_set if s.num_devices == 1 else (None,)
        y = put_on_device(leaf, device)
        if isinstance(y, core.Tracer):
            out.append(y)
            continue
        out.append(give(_fresh(y) if y is leaf else y, s))
    return tree_util.tree_unflatten(tree, out)


def _fresh(x):
    """A new Array object with ``x``'s value (no copy), to carry a sharding of its own."""
    from fungrad.array import Array
    from fungrad.devices import GpuArray

    if isinstance(x, GpuArray):
        return GpuArray(x._dbuf, x.aval, x.weak_type)
    return Array.from_impl(x._value, x.aval)
