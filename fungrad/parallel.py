"""``pmap`` (jax.pmap's API) on fungrad's single compute device.

``pmap(f, axis_name)(x)`` maps ``f`` over the leading axis of ``x``, one slice per device,
with collectives (``lax.psum``, ``pmean``, ``all_gather``, ``axis_index``...) over
``axis_name``. fungrad runs one program on one device (``local_device_count() == 1``), so a
pmap is ``jit(vmap(f, in_axes, out_axes, axis_name))`` whose mapped axis may not be larger
than the device count: data-parallel programs written as
``x.reshape(jax.local_device_count(), -1, ...)`` run unchanged and give the same numbers as
JAX on one device; a larger axis is a ValueError, as JAX raises when it lacks the devices.
``static_broadcasted_argnums`` are passed to ``f`` unmapped and are part of the compile key.
``devices``, ``backend`` and ``donate_argnums`` are accepted and have nothing to choose.

Across processes: once ``fungrad.distributed.initialize()`` has run (an MPI job, one process
per device), the mapped axis spans the processes, as JAX's multi-process pmap: each process
passes its local shard, whose mapped axis has size ``local_device_count() == 1``, and ``f``
runs compiled on it with ``axis_name`` bound as a *process axis* of size ``process_count()``
(fungrad/distributed.py), so collectives over it communicate between the processes through
MPI; the outputs get the mapped axis (size 1) back. ``axis_size``, when given, is the global
size and must equal the process count.
"""

from __future__ import annotations

import functools
import operator

from fungrad import tree_util

__all__ = ["pmap"]


def _argnums(name: str, value) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int):
        return (value,)
    try:
        return tuple(operator.index(v) for v in value)
    except TypeError:
        raise TypeError(
            f"pmap: {name} must be an int or a sequence of ints, got {value!r}"
        ) from None


def pmap(
    fun=None,
    axis_name=None,
    *,
    in_axes=0,
    out_axes=0,
    static_broadcasted_argnums=(),
    devices=None,
    backend=None,
    axis_size=None,
    donate_argnums=(),
):
    """``fun`` mapped over the leading (``in_axes``) axis of its arguments, one slice per
    device, compiled; collectives over ``axis_name`` (see the module docstring)."""
    if fun is None:
        return functools.partial(
            pmap,
            axis_name=axis_name,
            in_axes=in_axes,
            out_axes=out_axes,
            static_broadcasted_argnums=static_broadcasted_argnums,
            devices=devices,
            backend=backend,
            axis_size=axis_size,
            donate_argnums=donate_argnums,
        )
    if not callable(fun):
        raise TypeError(f"pmap: fun must be callable, got {type(fun).__name__}")
    del backend, donate_argnums
    static = _argnums("static_broadcasted_argnums", static_broadcasted_argnums)
    cache: dict = {}

    @functools.wraps(fun)
    def mapped(*args):
        from fungrad import distributed
        from fungrad.api import jit, vmap
        from fungrad.devices import local_device_count

        multi = distributed.is_initialized()
        if multi and axis_size is not None and axis_size != distributed.process_count():
            raise ValueError(
                f"pmap: axis_size={axis_size}, but across processes the mapped axis spans "
                f"the {distributed.process_count()} processes of the job"
            )

        n_dev = local_device_count() if devices is None else len(devices)
        for i in static:
            if not -len(args) <= i < len(args):
                raise ValueError(
                    f"pmap: static_broadcasted_argnums {static} out of range for "
                    f"{len(args)} positional arguments"
                )
        static_pos = {i % len(args) for i in static}
        dyn_pos = [i for i in range(len(args)) if i not in static_pos]
        static_vals = tuple((i, args[i]) for i in sorted(static_pos))
        if isinstance(in_axes, (list, tuple)):
            if len(in_axes) != len(args):
                raise ValueError(
                    f"pmap: in_axes has {len(in_axes)} entries for {len(args)} positional arguments"
                )
            dyn_axes = tuple(in_axes[i] for i in dyn_pos)
        else:
            dyn_axes = in_axes
        dyn = [args[i] for i in dyn_pos]
        sizes = set()
        axes_tree = dyn_axes if isinstance(dyn_axes, tuple) else (dyn_axes,) * len(dyn)
        for arg, ax in zip(dyn, axes_tree):
            leaves = tree_util.tree_leaves(arg)
            ax_leaves = (
                tree_util.tree_leaves(ax)
                if not isinstance(ax, int) and ax is not None
                else [ax] * len(leaves)
            )
            for leaf, a in zip(leaves, ax_leaves):
                if a is not None:
                    sizes.add(leaf.shape[a])
        size = axis_size if not sizes else max(sizes)
        if multi:
            if sizes and sizes != {1}:
                raise ValueError(
                    f"pmap: across processes each process passes its local shard, whose mapped "
                    f"axis has size local_device_count() == 1; got sizes {sorted(sizes)} "
                    "(reshape this process's data to (1, ...))"
                )
        elif size is not None and size > n_dev:
            raise ValueError(
                f"pmap: the mapped axis has size {size} but only {n_dev} device(s) "
                "are available (fungrad runs on one device); reshape the data to "
                "(local_device_count(), ...) or use vmap"
            )
        try:
            key = (static_vals, len(args), multi)
            hash(key)
        except TypeError:
            raise ValueError(
                "pmap: static_broadcasted_argnums arguments must be hashable"
            ) from None
        compiled = cache.get(key)
        if compiled is None:

            def body(*dyn_args):
                full = list(dyn_args)
                for i, v in static_vals:
                    full.insert(i, v)
                return fun(*full)

            if multi:  # the local slice (size 1) unnamed: the name is the process axis
                compiled = jit(vmap(body, in_axes=dyn_axes, out_axes=out_axes, axis_size=1))
            else:
                compiled = jit(
                    vmap(
                        body,
                        in_axes=dyn_axes,
                        out_axes=out_axes,
                        axis_name=axis_name,
                        axis_size=axis_size,
                    )
                )
            cache[key] = compiled
        if multi:
            with distributed.bind_process_axis(axis_name):
                return compiled(*dyn)
        return compiled(*dyn)

    return mapped
