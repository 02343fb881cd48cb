"""Checkpoints: save a pytree of arrays to a file and restore it, structure and dtypes kept.

    fungrad.checkpoints.save("run/step_1000.ckpt", {"params": params, "opt": opt_state})
    state = fungrad.checkpoints.restore("run/step_1000.ckpt", like={"params": params,
                                                                  "opt": opt_state})

The file is numpy's ``.npz`` (a zip of ``.npy`` arrays), one entry per leaf, plus one entry
holding a JSON record of the tree: each node's kind (dict and its keys, list, tuple,
namedtuple and its fields, None, or a registered node's class name), each leaf's kind (fungrad
Array and its weak type, numpy array, numpy scalar, Python scalar) and each leaf's key path.
Why this format: ``.npz`` is numpy's own, which fungrad already depends on (safetensors would
be a new runtime dependency), it is portable and readable without fungrad
(``numpy.load(path)``), and it stores every dtype fungrad has (bool, ints, floats, complex,
``float0``; bfloat16 as its 16-bit patterns, see ``_VERSION``) with its shape, 0-d and size-0
included. Nothing is pickled: files are written
with plain arrays and read with ``allow_pickle=False``, so loading a file runs no code.

:func:`save` is atomic: the file is written to a temporary file in the same directory, flushed
to disk (``fsync``) and renamed over ``path``, so a crash or an error leaves either the old
file or the new one, never a torn one. :func:`restore` with ``like`` (a tree of arrays or
``ShapeDtypeStruct``s, such as freshly initialised parameters and ``opt.init(params)``)
rebuilds the tree with ``like``'s structure, so registered pytree classes come back as
themselves, and refuses a file whose structure, shapes or dtypes differ, naming the first
place they do. Without ``like``, dicts, lists, tuples, None and namedtuples (as a namedtuple
class of the same name and fields) are rebuilt; a registered node needs ``like``.

NB: ``fungrad.checkpoint`` (singular) is JAX's rematerialisation transform (``jax.checkpoint``),
so this module is ``checkpoints``.
"""

from __future__ import annotations

import collections
import json
import os
import secrets
import warnings
import zipfile
from collections import OrderedDict
from typing import Any

import numpy as np

from fungrad import core, dtypes, tree_util
from fungrad.array import Array

__all__ = ["restore", "save"]

_FORMAT = "fungrad.checkpoints"
_VERSION = 2
"""Version 2 stores a bfloat16 leaf as its 16-bit patterns (``.npy`` has no bfloat16: numpy
would write an opaque ``|V2``) with ``"dtype": "bfloat16"`` in its record; a file without one
is written as version 1, which older readers read."""
_TREE_KEY = "__fungrad_tree__"
_NAMEDTUPLE = tree_util._NAMEDTUPLE


def _leaf_key(i: int) -> str:
    return f"leaf_{i}"


def _where(path: str) -> str:
    return f"tree{path}" if path else "the root of the tree"


# -- the structure record ----------------------------------------------------------------------


def _encode_key(key, fun: str, path: str):
    """A dict key as JSON: ``[type, value]`` for str, int, float and bool keys."""
    for kind in (bool, int, float, str):  # bool before int: True is an int too
        if type(key) is kind:
            return [kind.__name__, key]
    raise TypeError(
        f"{fun}: the dict at {_where(path)} has the key {key!r} of type {type(key).__name__}; "
        "checkpoints store str, int, float and bool keys"
    )


def _decode_key(entry):
    kind, value = entry
    return {"bool": bool, "int": int, "float": float, "str": str}[kind](value)


def _class_name(cls) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _encode_node(td, fun: str, path: str) -> dict:
    """The record of one treedef node (without its children)."""
    kind, data = td.node_type, td.node_aux
    if kind is None:
        return {"t": "leaf"}
    if kind is tuple or kind is list:
        return {"t": kind.__name__}
    if kind is type(None):
        return {"t": "none"}
    if kind is dict or kind is OrderedDict:
        keys = []
        for k in data:
            keys.append(_encode_key(k, fun, path))
        return {"t": "dict" if kind is dict else "ordereddict", "k": keys}
    if kind == _NAMEDTUPLE:
        return {"t": "namedtuple", "type": _class_name(data), "fields": list(data._fields)}
    return {"t": "node", "type": _class_name(kind)}


def _encode(td, fun: str, path: str = "") -> dict:
    node = _encode_node(td, fun, path)
    if node["t"] != "leaf":
        node["c"] = [
            _encode(child, fun, path + seg)
            for seg, child in zip(tree_util._path_segments(td), td.children)
        ]
    return node


def _describe(node: dict) -> str:
    t = node["t"]
    n = len(node.get("c", ()))
    if t == "leaf":
        return "a leaf"
    if t == "none":
        return "None"
    if t in ("dict", "ordereddict"):
        keys = [_decode_key(k) for k in node["k"]]
        return f"{'a dict' if t == 'dict' else 'an OrderedDict'} with keys {keys!r}"
    if t == "namedtuple":
        return f"a namedtuple {node['type']} with fields {node['fields']!r}"
    if t == "node":
        return f"a {node['type']} with {n} children"
    return f"a {t} of length {n}"


def _same_node(a: dict, b: dict) -> bool:
    keys = ("t", "k", "type", "fields")
    return all(a.get(k) == b.get(k) for k in keys) and len(a.get("c", ())) == len(b.get("c", ()))


def _compare(node: dict, td, file: str, path: str = "") -> None:
    """Raise ValueError at the first node where the file's record and ``like``'s treedef
    differ."""
    mine = _encode_node(td, "restore", path)
    mine["c"] = td.children
    if not _same_node(node, mine):
        raise ValueError(
            f"checkpoints.restore: {file} does not match `like` at {_where(path)}: the file "
            f"has {_describe(node)}, `like` has {_describe(mine)}. Pass a `like` with the "
            "saved structure (or restore without `like` and inspect the tree)."
        )
    segments = tree_util._path_segments(td)
    for seg, child_node, child_td in zip(segments, node.get("c", ()), td.children):
        _compare(child_node, child_td, file, path + seg)


# -- leaves --------------------------------------------------------------------------------------

_PY_SCALARS = {bool: "bool", int: "int", float: "float", complex: "complex"}


def _leaf_record(leaf, path: str) -> tuple[dict, np.ndarray]:
    """(the JSON record of a leaf, its value as a numpy array)."""
    if isinstance(leaf, core.Tracer):
        raise TypeError(
            f"checkpoints.save: the leaf at {_where(path)} is a traced value ({leaf.aval}); "
            "save concrete arrays, outside jit/grad/vmap (return the tree from the jitted "
            "function and save the result)"
        )
    if isinstance(leaf, Array):
        value = np.asarray(leaf)
        return {"kind": "array", "weak": bool(leaf.weak_type)}, value
    if isinstance(leaf, np.ndarray):
        return {"kind": "numpy"}, leaf
    if isinstance(leaf, np.generic):
        return {"kind": "numpy_scalar"}, np.asarray(leaf)
    if type(leaf) in _PY_SCALARS:
        value = np.asarray(leaf)
        if value.dtype.hasobject:
            raise TypeError(
                f"checkpoints.save: the Python int at {_where(path)} ({leaf}) does not fit in "
                "int64; store it as a string elsewhere or split it"
            )
        return {"kind": "scalar", "type": _PY_SCALARS[type(leaf)]}, value
    raise TypeError(
        f"checkpoints.save: the leaf at {_where(path)} is a {type(leaf).__name__}; checkpoints "
        "hold arrays (fungrad or numpy) and Python/numpy scalars. Convert it, or keep it out "
        "of the saved tree."
    )


def _check_storable(value: np.ndarray, path: str) -> None:
    if value.dtype.hasobject:
        raise TypeError(
            f"checkpoints.save: the leaf at {_where(path)} has dtype object; checkpoints hold "
            "numeric and bool arrays only (objects would need pickle)"
        )


def _rebuild_leaf(rec: dict, value: np.ndarray, path: str):
    kind = rec["kind"]
    if kind == "numpy":
        return value
    if kind == "numpy_scalar":
        return value[()]
    if kind == "scalar":
        return {"bool": bool, "int": int, "float": float, "complex": complex}[rec["type"]](
            value[()]
        )
    dt = dtypes.canonicalize_dtype(value.dtype)
    if dt != value.dtype:
        warnings.warn(
            f"checkpoints.restore: the array at {_where(path)} was saved as {value.dtype}; "
            f"without x64 it is restored as {dt}. Enable x64 (fungrad.config.update("
            "'jax_enable_x64', True)) before restoring to keep 64 bits.",
            UserWarning,
            stacklevel=3,
        )
        value = value.astype(dt)
    return Array(value, weak_type=rec.get("weak", False))


# -- without like: rebuild the containers from the record -------------------------------------

_namedtuple_classes: dict = {}


def _namedtuple_class(name: str, fields: list):
    key = (name, tuple(fields))
    cls = _namedtuple_classes.get(key)
    if cls is None:
        module, _, qualname = name.rpartition(".")
        cls = collections.namedtuple(qualname.rpartition(".")[2], fields)
        cls.__module__ = module or __name__
        _namedtuple_classes[key] = cls
    return cls


def _build(node: dict, leaves, file: str, path: str = ""):
    t = node["t"]
    if t == "leaf":
        return next(leaves)
    if t == "none":
        return None
    children = node["c"]
    if t in ("dict", "ordereddict"):
        keys = [_decode_key(k) for k in node["k"]]
        segs = [f"[{k!r}]" for k in keys]
    elif t == "namedtuple":
        segs = [f".{f}" for f in node["fields"]]
    else:
        segs = [f"[{i}]" for i in range(len(children))]
    if t == "node":
        raise ValueError(
            f"checkpoints.restore: {file} holds a {node['type']} (a registered pytree node) at "
            f"{_where(path)}; only `like` can rebuild it. Pass like= a tree with the saved "
            "structure (for example the initial parameters and opt.init(params))."
        )
    built = [_build(c, leaves, file, path + s) for c, s in zip(children, segs)]
    if t == "dict":
        return dict(zip(keys, built))
    if t == "ordereddict":
        return OrderedDict(zip(keys, built))
    if t == "namedtuple":
        return _namedtuple_class(node["type"], node["fields"])(*built)
    return tuple(built) if t == "tuple" else built


# -- save / restore ------------------------------------------------------------------------------


def save(path: str | os.PathLike, tree: Any) -> None:
    """Write the pytree ``tree`` of arrays to ``path``, atomically.

    Args:
        path: the file to write (used as given: no ``.npz`` suffix is added). Its directory
            must exist; an existing file is replaced only once the new one is complete.
        tree: a pytree (dicts with str/int/float/bool keys, lists, tuples, namedtuples, None,
            registered nodes) whose leaves are fungrad or numpy arrays or Python/numpy
            scalars, of any supported dtype and shape.

    Raises:
        TypeError: a leaf is not an array or scalar (or is traced), or a dict key has a type
            the format does not store; nothing is written.
        FileNotFoundError: the directory does not exist.
    """
    path = os.fspath(path)
    leaves_with_paths, treedef = tree_util.tree_flatten_with_path(tree)
    record = {
        "format": _FORMAT,
        "version": 1,
        "tree": _encode(treedef, "checkpoints.save"),
        "paths": [],
        "leaves": [],
    }
    arrays = {}
    for i, (keys, leaf) in enumerate(leaves_with_paths):
        where = tree_util.keystr(keys)
        rec, value = _leaf_record(leaf, where)
        _check_storable(value, where)
        if dtypes.is_ml_float(value.dtype):  # as its bits (see _VERSION)
            rec["dtype"] = value.dtype.name
            value = value.view(f"u{value.dtype.itemsize}")
            record["version"] = 2
        record["paths"].append(where)
        record["leaves"].append(rec)
        arrays[_leaf_key(i)] = value
    arrays[_TREE_KEY] = np.array(json.dumps(record))
    _atomic_write(path, arrays)


def _atomic_write(path: str, arrays: dict) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(
            f"checkpoints.save: the directory {directory!r} of {path!r} does not exist; "
            "create it first (os.makedirs)"
        )
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(6)}.tmp")
    # os.open with 0o666 lets the umask set the permissions, as for any new file.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_directory(directory)


def _fsync_directory(directory: str) -> None:
    """Make the rename durable (POSIX); directories cannot be opened this way on Windows."""
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read(path: str) -> tuple[dict, list]:
    """(the JSON record, the leaf arrays) of the checkpoint at ``path``."""
    try:
        npz = np.load(path, allow_pickle=False)
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as e:
        if isinstance(e, FileNotFoundError):
            raise FileNotFoundError(f"checkpoints.restore: no file {path!r}") from None
        raise ValueError(
            f"checkpoints.restore: {path!r} is not a checkpoint written by "
            f"fungrad.checkpoints.save (numpy could not read it as .npz: {e})"
        ) from None
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise ValueError(
            f"checkpoints.restore: {path!r} is a single .npy array, not a checkpoint written by "
            "fungrad.checkpoints.save"
        )
    with npz:
        if _TREE_KEY not in npz.files:
            raise ValueError(
                f"checkpoints.restore: {path!r} is an .npz file without fungrad's structure "
                f"record ({_TREE_KEY}); it was not written by fungrad.checkpoints.save"
            )
        record = json.loads(str(npz[_TREE_KEY][()]))
        if record.get("format") != _FORMAT or record.get("version", 0) > _VERSION:
            raise ValueError(
                f"checkpoints.restore: {path!r} has format {record.get('format')!r} version "
                f"{record.get('version')!r}; this fungrad reads {_FORMAT!r} up to version "
                f"{_VERSION}"
            )
        arrays = [npz[_leaf_key(i)] for i in range(len(record["leaves"]))]
    for i, rec in enumerate(record["leaves"]):
        if "dtype" in rec:  # a bfloat16 leaf, stored as its bits
            arrays[i] = arrays[i].view(np.dtype(rec["dtype"]))
    return record, arrays


def _like_spec(leaf, path: str):
    """(shape, dtype) of a leaf of ``like``."""
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
        return tuple(leaf.shape), np.dtype(leaf.dtype)
    if type(leaf) in _PY_SCALARS:
        value = np.asarray(leaf)
        return value.shape, value.dtype
    raise TypeError(
        f"checkpoints.restore: the leaf of `like` at {_where(path)} is a "
        f"{type(leaf).__name__}; `like` must hold arrays, ShapeDtypeStructs or scalars"
    )


def restore(path: str | os.PathLike, like: Any = None) -> Any:
    """Read the pytree :func:`save` wrote to ``path``.

    Args:
        path: the checkpoint file.
        like: optional: a pytree with the saved structure whose leaves give the expected
            shapes and dtypes (arrays, ``ShapeDtypeStruct``s or scalars); its values are
            not used. The result then has ``like``'s structure (registered pytree classes
            and namedtuples rebuilt as ``like``'s).

    Returns:
        The tree, each leaf of the kind it was saved as: a fungrad Array (CPU), a numpy
        array, a numpy scalar or a Python scalar.

    Raises:
        ValueError: the file is not a fungrad checkpoint, or differs from ``like`` in
            structure, shape or dtype (the message names the first difference), or it holds
            a registered pytree node and ``like`` is not given.
        FileNotFoundError: there is no file at ``path``.
    """
    path = os.fspath(path)
    record, arrays = _read(path)
    paths = record["paths"]
    if like is None:
        leaves = [_rebuild_leaf(r, a, p) for r, a, p in zip(record["leaves"], arrays, paths)]
        return _build(record["tree"], iter(leaves), repr(path))
    like_with_paths, like_def = tree_util.tree_flatten_with_path(like)
    _compare(record["tree"], like_def, repr(path))
    for i, ((keys, like_leaf), value) in enumerate(zip(like_with_paths, arrays)):
        where = tree_util.keystr(keys)
        if where != paths[i]:
            raise ValueError(
                f"checkpoints.restore: {path!r} does not match `like`: leaf {i} is at "
                f"{_where(paths[i])} in the file and at {_where(where)} in `like`"
            )
        shape, dtype = _like_spec(like_leaf, where)
        if (value.shape, value.dtype) != (shape, dtype):
            raise ValueError(
                f"checkpoints.restore: {path!r} does not match `like` at {_where(where)}: the "
                f"file has shape {value.shape} and dtype {value.dtype}, `like` has shape "
                f"{shape} and dtype {dtype}"
            )
    leaves = [_rebuild_leaf(r, a, p) for r, a, p in zip(record["leaves"], arrays, paths)]
    return tree_util.tree_unflatten(like_def, leaves)
