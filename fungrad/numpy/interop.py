"""Interchange with numpy and the outside world, as jax.numpy has it: ``frombuffer``,
``fromstring``, ``from_dlpack``, ``load``, ``save``, ``savez``, ``array_repr``, ``array_str``,
the print options, ``einsum_path``, and numpy's abstract scalar types and ``ComplexWarning``.

Reading functions parse with numpy and return fungrad Arrays (canonical dtypes); writers and
print options are numpy's own (fungrad Arrays convert to numpy arrays), as in JAX.
"""

from __future__ import annotations

import numpy as np

from fungrad import numpy as fnp
from fungrad.numpy import util

__all__ = [
    "ComplexWarning",
    "array_repr",
    "array_str",
    "character",
    "complexfloating",
    "einsum_path",
    "flexible",
    "from_dlpack",
    "frombuffer",
    "fromstring",
    "get_printoptions",
    "load",
    "object_",
    "printoptions",
    "save",
    "savez",
    "set_printoptions",
]

ComplexWarning = np.exceptions.ComplexWarning
complexfloating, character, flexible, object_ = (
    np.complexfloating,
    np.character,
    np.flexible,
    np.object_,
)
printoptions = np.printoptions
get_printoptions = np.get_printoptions
set_printoptions = np.set_printoptions
save = np.save
savez = np.savez


def frombuffer(buffer, dtype=float, count: int = -1, offset: int = 0):
    """The Array read from the bytes of ``buffer`` (``jnp.frombuffer``)."""
    return fnp.asarray(np.frombuffer(buffer, dtype=dtype, count=count, offset=offset))


def fromstring(string: str, dtype=float, count: int = -1, *, sep: str):
    """The 1-D Array parsed from the text ``string`` with separator ``sep``
    (``jnp.fromstring``)."""
    return fnp.asarray(np.fromstring(string, dtype=dtype, count=count, sep=sep))


def from_dlpack(x, /, *, device=None, copy=None):
    """The Array holding the data of a DLPack-capable object ``x`` (a numpy array, a torch
    CPU tensor, ...) (``jnp.from_dlpack``); the data is copied, fungrad Arrays own theirs."""
    if device is not None and getattr(device, "platform", device) != "cpu":
        raise ValueError(
            f"from_dlpack: fungrad reads DLPack data on the CPU, got device={device!r}"
        )
    return fnp.array(np.from_dlpack(x))


def load(file, *args, **kwargs):
    """``numpy.load``, with arrays returned as fungrad Arrays (``jnp.load``); an ``.npz``
    archive is returned as numpy gives it."""
    out = np.load(file, *args, **kwargs)
    return fnp.asarray(out) if isinstance(out, np.ndarray) else out


def array_repr(arr, max_line_width=None, precision=None, suppress_small=None) -> str:
    """numpy's ``array_repr`` of ``arr`` (``jnp.array_repr``)."""
    return np.array_repr(np.asarray(arr), max_line_width, precision, suppress_small)


def array_str(a, max_line_width=None, precision=None, suppress_small=None) -> str:
    """numpy's ``array_str`` of ``a`` (``jnp.array_str``)."""
    return np.array_str(np.asarray(a), max_line_width, precision, suppress_small)


def einsum_path(subscripts, /, *operands, optimize="auto"):
    """A contraction order for ``einsum`` and a report of its cost (``jnp.einsum_path``):
    ``(path, report)`` with ``path`` a list of operand-index tuples (numpy's greedy order;
    JAX's opt_einsum may choose another equally valid one). Only the operands' shapes matter,
    so traced operands work."""
    util.check_arraylike("einsum_path", *operands)
    shapes = [np.broadcast_to(np.zeros((), np.float32), fnp.shape(o)) for o in operands]
    if optimize in ("auto", True):
        optimize = "greedy"
    path, report = np.einsum_path(subscripts, *shapes, optimize=optimize)
    return [tuple(step) for step in path[1:]], report  # numpy's leading "einsum_path" dropped
