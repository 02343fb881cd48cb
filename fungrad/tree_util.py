"""Pytrees: nested tuples, lists, dicts, namedtuples, None and registered classes.

Follows ``jax.tree_util``: ``None`` is a node with no children (so it has no leaves), dict
children are ordered by sorted key, and a treedef compares equal to another with the same
structure. Custom nodes are added with :func:`register_pytree_node`,
:func:`register_pytree_node_class` or :func:`register_dataclass`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = [
    "PyTreeDef", "all_leaves", "register_dataclass", "register_pytree_node",
    "register_pytree_node_class", "tree_all", "tree_flatten", "tree_leaves", "tree_map",
    "tree_reduce", "tree_structure", "tree_transpose", "tree_unflatten", "treedef_children",
    "treedef_is_leaf",
]


class _NodeType(NamedTuple):
    flatten: Callable[[Any], tuple[Any, Any]]      # node -> (children, aux_data)
    unflatten: Callable[[Any, Any], Any]           # (aux_data, children) -> node


_registry: dict[type, _NodeType] = {}


def register_pytree_node(nodetype: type, flatten_func, unflatten_func) -> None:
    """Make ``nodetype`` a pytree node: ``flatten_func(x) -> (children, aux_data)`` and
    ``unflatten_func(aux_data, children) -> x``; aux_data must be hashable and comparable."""
    if nodetype in _registry:
        raise ValueError(f"register_pytree_node: {nodetype.__name__} is already registered")
    _registry[nodetype] = _NodeType(flatten_func, unflatten_func)


def register_pytree_node_class(cls):
    """Class decorator: use ``cls.tree_flatten()`` and ``cls.tree_unflatten(aux, children)``."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_dataclass(nodetype=None, data_fields=None, meta_fields=None, drop_fields=()):
    """Register a dataclass: ``data_fields`` are children, ``meta_fields`` static aux data.

    Usable as a decorator; without explicit lists, fields marked
    ``dataclasses.field(metadata=dict(static=True))`` are meta and the rest data.
    """
    if nodetype is None:
        return functools.partial(register_dataclass, data_fields=data_fields,
                                 meta_fields=meta_fields, drop_fields=drop_fields)
    if data_fields is None or meta_fields is None:
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError(f"register_dataclass: {nodetype.__name__} is not a dataclass; pass "
                            "data_fields and meta_fields explicitly")
        fields = [f for f in dataclasses.fields(nodetype) if f.name not in drop_fields]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)

    def flatten(x):
        return [getattr(x, n) for n in data_fields], tuple(getattr(x, n) for n in meta_fields)

    def unflatten(meta, children):
        kwargs = dict(zip(meta_fields, meta))
        kwargs.update(zip(data_fields, children))
        return nodetype(**kwargs)

    register_pytree_node(nodetype, flatten, unflatten)
    return nodetype


def _dict_flatten(d):
    keys = sorted(d)
    return [d[k] for k in keys], tuple(keys)


register_pytree_node(tuple, lambda t: (t, None), lambda _, c: tuple(c))
register_pytree_node(list, lambda t: (t, None), lambda _, c: list(c))
register_pytree_node(dict, _dict_flatten, lambda keys, c: dict(zip(keys, c)))
register_pytree_node(type(None), lambda _: ((), None), lambda _, c: None)
register_pytree_node(OrderedDict, lambda d: (list(d.values()), tuple(d)),
                     lambda keys, c: OrderedDict(zip(keys, c)))
register_pytree_node(defaultdict,
                     lambda d: ([d[k] for k in sorted(d)], (d.default_factory, tuple(sorted(d)))),
                     lambda aux, c: defaultdict(aux[0], zip(aux[1], c)))


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


class PyTreeDef:
    """The structure of a pytree: a node type, its aux data and child treedefs (leaf: None)."""

    __slots__ = ("node_type", "node_data", "children", "num_leaves", "num_nodes", "_hash")

    def __init__(self, node_type, node_data, children: tuple):
        self.node_type = node_type          # None for a leaf
        self.node_data = node_data
        self.children = children
        num_leaves, num_nodes = (1 if node_type is None else 0), 1
        for c in children:
            num_leaves += c.num_leaves
            num_nodes += c.num_nodes
        self.num_leaves = num_leaves
        self.num_nodes = num_nodes
        self._hash = None

    def unflatten(self, leaves):
        leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(f"tree_unflatten: {self} expects {self.num_leaves} leaves, "
                             f"got {len(leaves)}")
        if self.num_nodes == self.num_leaves + 1:  # a node of leaves (an argument tuple...)
            if self.node_type is tuple:
                return tuple(leaves)
            if self.node_type is list:
                return leaves
        it = iter(leaves)
        return self._build(it)

    def _build(self, it):
        if self.node_type is None:
            return next(it)
        children = [c._build(it) for c in self.children]
        if self.node_type is _NAMEDTUPLE:
            return self.node_data(*children)
        return _registry[self.node_type].unflatten(self.node_data, children)

    def flatten_up_to(self, tree) -> list:
        """The subtrees of ``tree`` at this treedef's leaves (``tree`` must have this prefix)."""
        out: list = []
        self._flatten_up_to(tree, out)
        return out

    def _flatten_up_to(self, tree, out):
        if self.node_type is None:
            out.append(tree)
            return
        node_type, node_data, children = _node_info(tree)
        if node_type != self.node_type or node_data != self.node_data:
            raise ValueError(f"pytree structure mismatch: expected {self}, got a "
                             f"{type(tree).__name__} node")
        if len(children) != len(self.children):
            raise ValueError(f"pytree structure mismatch: expected {len(self.children)} "
                             f"children, got {len(children)}")
        for c, sub in zip(self.children, children):
            c._flatten_up_to(sub, out)

    def __eq__(self, other):
        return (isinstance(other, PyTreeDef) and self.node_type == other.node_type
                and self.node_data == other.node_data and self.children == other.children)

    def __hash__(self):
        if self._hash is None:
            data = self.node_data
            try:
                hash(data)
            except TypeError:
                data = id(data)
            self._hash = hash((self.node_type, data, self.children))
        return self._hash

    def _repr(self) -> str:
        if self.node_type is None:
            return "*"
        kids = [c._repr() for c in self.children]
        if self.node_type is tuple:
            return "(" + ", ".join(kids) + ("," if len(kids) == 1 else "") + ")"
        if self.node_type is list:
            return "[" + ", ".join(kids) + "]"
        if self.node_type is dict:
            return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(self.node_data, kids)) + "}"
        if self.node_type is type(None):
            return "None"
        if self.node_type is _NAMEDTUPLE:
            return f"{self.node_data.__name__}(" + ", ".join(
                f"{f}={v}" for f, v in zip(self.node_data._fields, kids)) + ")"
        return f"CustomNode({self.node_type.__name__}[{self.node_data!r}], [{', '.join(kids)}])"

    def __repr__(self):
        return f"PyTreeDef({self._repr()})"


_NAMEDTUPLE = "namedtuple"
_LEAF = PyTreeDef(None, None, ())


def _node_info(x):
    """(node_type, node_data, children) for an internal node, or (None, None, None) for a leaf."""
    t = type(x)
    rec = _registry.get(t)
    if rec is not None:
        children, data = rec.flatten(x)
        return t, data, list(children)
    if _is_namedtuple(x):
        return _NAMEDTUPLE, t, list(x)
    return None, None, None


def _flatten(x, leaves: list, is_leaf) -> PyTreeDef:
    if is_leaf is not None and is_leaf(x):
        leaves.append(x)
        return _LEAF
    t = type(x)
    rec = _registry.get(t)
    if rec is not None:
        children, data = rec.flatten(x)
    elif isinstance(x, tuple) and hasattr(t, "_fields"):
        t, data, children = _NAMEDTUPLE, t, x
    else:
        leaves.append(x)
        return _LEAF
    return PyTreeDef(t, data, tuple([_flatten(c, leaves, is_leaf) for c in children]))


def tree_flatten(tree, is_leaf=None) -> tuple[list, PyTreeDef]:
    """``(leaves, treedef)``; ``is_leaf(x)`` may stop the descent at a subtree."""
    leaves: list = []
    treedef = _flatten(tree, leaves, is_leaf)
    return leaves, treedef


def tree_unflatten(treedef: PyTreeDef, leaves):
    """Rebuild a pytree with ``treedef``'s structure from ``leaves``."""
    return treedef.unflatten(leaves)


def tree_leaves(tree, is_leaf=None) -> list:
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None) -> PyTreeDef:
    return tree_flatten(tree, is_leaf)[1]


def tree_map(f, tree, *rest, is_leaf=None):
    """Apply ``f`` leafwise; ``rest`` are trees with ``tree``'s structure (or a prefix-compatible
    one: their subtrees at ``tree``'s leaves are passed whole)."""
    leaves, treedef = tree_flatten(tree, is_leaf)
    all_leaves = [leaves] + [treedef.flatten_up_to(r) for r in rest]
    return treedef.unflatten(f(*xs) for xs in zip(*all_leaves))


def tree_reduce(function, tree, initializer=None, is_leaf=None):
    leaves = tree_leaves(tree, is_leaf)
    if initializer is None:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_all(tree) -> bool:
    return all(tree_leaves(tree))


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    return treedef.node_type is None


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    return list(treedef.children)


def all_leaves(iterable, is_leaf=None) -> bool:
    """True when every element of ``iterable`` is a leaf."""
    return all(treedef_is_leaf(tree_structure(x, is_leaf)) for x in iterable)


def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef, pytree_to_transpose):
    """Turn an outer tree of inner trees into an inner tree of outer trees."""
    flat = outer_treedef.flatten_up_to(pytree_to_transpose)
    inner = [inner_treedef.flatten_up_to(x) for x in flat]
    columns = zip(*inner) if inner else [[] for _ in range(inner_treedef.num_leaves)]
    return inner_treedef.unflatten(outer_treedef.unflatten(col) for col in columns)


# -- paths of leaves and nodes, in words (for error messages) ------------------------------

def _path_segments(tree) -> list[str]:
    """How each child of a treedef node is reached: ``['w']`` (dict), ``.field`` (namedtuple),
    ``[0]`` (sequences and other nodes)."""
    kind, data = tree.node_type, tree.node_data
    if kind in (dict, OrderedDict):
        return [f"[{k!r}]" for k in data]
    if kind == _NAMEDTUPLE:
        return [f".{f}" for f in data._fields]
    return [f"[{i}]" for i in range(len(tree.children))]


def _describe_node(tree) -> str:
    """A treedef's top node in words, for errors: ``a tuple of length 2``, ``a leaf (an
    array)``, ``a dict with keys ['a', 'b']``."""
    kind = tree.node_type
    if kind is None:
        return "a leaf (an array)"
    if kind in (tuple, list):
        return f"a {kind.__name__} of length {len(tree.children)}"
    if kind in (dict, OrderedDict):
        return f"a {kind.__name__} with keys {list(tree.node_data)}"
    if kind == _NAMEDTUPLE:
        return f"a {tree.node_data.__name__} namedtuple"
    if kind is type(None):
        return "None"
    return f"a {getattr(kind, '__name__', kind)}"


def _tree_difference(a, b, prefix: str) -> tuple[str, str, str] | None:
    """Where two treedefs first differ: ``(path, a's node there, b's node there)`` in words,
    or None when they are equal."""
    if a == b:
        return None
    if (a.node_type != b.node_type or a.node_data != b.node_data
            or len(a.children) != len(b.children)):
        return prefix, _describe_node(a), _describe_node(b)
    for seg, ca, cb in zip(_path_segments(a), a.children, b.children):
        found = _tree_difference(ca, cb, prefix + seg)
        if found is not None:
            return found
    return prefix, _describe_node(a), _describe_node(b)


def _leaf_paths(tree, prefix: str) -> list[str]:
    """Readable paths (``x``, ``x[0]``, ``params['w']``, ``p.field``) of a treedef's leaves."""
    if tree.node_type is None:
        return [prefix]
    out = []
    for seg, child in zip(_path_segments(tree), tree.children):
        out += _leaf_paths(child, prefix + seg)
    return out
