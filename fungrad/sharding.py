"""``jax.sharding``: meshes, partition specs and shardings (defined in
``fungrad/sharding_impls.py``, the base layer, so Arrays can answer ``.sharding``), with the
operations that bind primitives: ``reshard`` (``fungrad/lax/sharding.py``), ``auto_axes`` and
``explicit_axes``.

fungrad's avals carry no sharding (see ``fungrad/sharding_impls.py``), so switching mesh axes
between ``AxisType.Auto`` and ``AxisType.Explicit`` changes no type: ``auto_axes(f,
out_sharding=s)`` is ``f`` whose outputs are resharded to ``s``, and ``explicit_axes(f,
in_sharding=s)`` is ``f`` applied to its arguments resharded to ``s``.
"""

from __future__ import annotations

import functools

from fungrad import core
from fungrad.lax.sharding import reshard
from fungrad.sharding_impls import (
    AbstractMesh,
    AxisType,
    DuplicateSpecError,
    Mesh,
    NamedSharding,
    PartitionSpec,
    Shard,
    Sharding,
    SingleDeviceSharding,
    get_abstract_mesh,
    get_mesh,
    make_single_device_sharding,
    set_mesh,
    use_abstract_mesh,
)

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
    "auto_axes",
    "explicit_axes",
    "get_abstract_mesh",
    "get_mesh",
    "make_single_device_sharding",
    "reshard",
    "set_mesh",
    "use_abstract_mesh",
]


@functools.lru_cache(maxsize=64)
def _unsharded(ndim: int) -> NamedSharding:
    """An aval's sharding in fungrad (``typeof(x).sharding``): unsharded over the empty
    abstract mesh, as JAX's of an array outside any mesh."""
    return NamedSharding(AbstractMesh((), ()), PartitionSpec(*[None] * ndim))


core.set_aval_sharding(_unsharded)


def _check_axes(fname: str, axes) -> None:
    names = (axes,) if isinstance(axes, str) else tuple(axes or ())
    mesh = get_abstract_mesh()
    unknown = [n for n in names if n not in mesh.axis_names]
    if unknown and not mesh.empty:
        raise ValueError(
            f"{fname}: axes {unknown} are not axes of the context mesh {mesh!r}; name axes "
            "of the mesh set with jax.set_mesh"
        )


def auto_axes(f=None, /, *, axes=None, out_sharding=None):
    """``f`` with mesh ``axes`` made Auto while it runs (``jax.sharding.auto_axes``); its
    outputs are resharded to ``out_sharding`` (a pytree prefix of Shardings/PartitionSpecs)
    when given. Without ``f``, a decorator."""
    if f is None:
        return functools.partial(auto_axes, axes=axes, out_sharding=out_sharding)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        _check_axes("auto_axes", axes)
        out = f(*args, **kwargs)
        return out if out_sharding is None else reshard(out, out_sharding)

    return wrapped


def explicit_axes(f=None, /, *, axes=None, in_sharding=None):
    """``f`` with mesh ``axes`` made Explicit while it runs (``jax.sharding.explicit_axes``);
    its positional arguments are resharded to ``in_sharding`` first when given. Without
    ``f``, a decorator."""
    if f is None:
        return functools.partial(explicit_axes, axes=axes, in_sharding=in_sharding)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        _check_axes("explicit_axes", axes)
        if in_sharding is not None:
            args = reshard(args, in_sharding)
        return f(*args, **kwargs)

    return wrapped
