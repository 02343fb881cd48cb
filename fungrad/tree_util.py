"""Pytrees: nested tuples, lists, dicts, namedtuples, None and registered classes.

Follows ``jax.tree_util``: ``None`` is a node with no children (so it has no leaves), dict
children are ordered by sorted key, and a treedef compares equal to another with the same
structure. Custom nodes are added with :func:`register_pytree_node` (or its ``_class``,
``with_keys``, :func:`register_dataclass` and :func:`register_static` variants).

Every leaf has a *key path*: the tuple of key entries that lead to it from the root
(:class:`DictKey` for dict-like nodes, :class:`SequenceKey` for tuples and lists,
:class:`GetAttrKey` for namedtuples and dataclasses, :class:`FlattenedIndexKey` for custom
nodes registered without keys); :func:`tree_flatten_with_path` returns them and
:func:`keystr` prints them as JAX does (``['params'][0].w``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Hashable, Iterable
from typing import Any, NamedTuple, TypeVar

__all__ = [
    "DictKey",
    "FlattenedIndexKey",
    "GetAttrKey",
    "KeyEntry",
    "KeyPath",
    "Partial",
    "PyTreeDef",
    "SequenceKey",
    "all_leaves",
    "default_registry",
    "flatten_one_level",
    "flatten_one_level_with_keys",
    "is_tree_node",
    "keystr",
    "register_dataclass",
    "register_pytree_node",
    "register_pytree_node_class",
    "register_pytree_with_keys",
    "register_pytree_with_keys_class",
    "register_static",
    "tree_all",
    "tree_broadcast",
    "tree_flatten",
    "tree_flatten_with_path",
    "tree_leaves",
    "tree_leaves_with_path",
    "tree_map",
    "tree_map_with_path",
    "tree_reduce",
    "tree_reduce_associative",
    "tree_structure",
    "tree_transpose",
    "tree_unflatten",
    "treedef_children",
    "treedef_is_leaf",
    "treedef_tuple",
]


# -- key entries: one step of a key path ---------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class DictKey:
    """The key path entry of a dict-like child (``dict``, ``OrderedDict``, ``defaultdict``):
    ``str`` gives ``['key']``."""

    key: Hashable

    def __str__(self):
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True, slots=True)
class SequenceKey:
    """The key path entry of a tuple or list element: ``str`` gives ``[idx]``."""

    idx: int

    def __str__(self):
        return f"[{self.idx!r}]"


@dataclasses.dataclass(frozen=True, slots=True)
class GetAttrKey:
    """The key path entry of a namedtuple field or dataclass attribute: ``str`` gives
    ``.name``."""

    name: str

    def __str__(self):
        return f".{self.name}"


@dataclasses.dataclass(frozen=True, slots=True)
class FlattenedIndexKey:
    """The key path entry of the ``key``-th child of a custom node registered without keys:
    ``str`` gives ``[<flat index key>]``."""

    key: int

    def __str__(self):
        return f"[<flat index {self.key}>]"


KeyEntry = TypeVar("KeyEntry", bound=Any)
KeyPath = tuple[KeyEntry, ...]


def keystr(keys: KeyPath, *, simple: bool = False, separator: str = "") -> str:
    """A key path as text: ``['foo'][0].bar``, or with ``simple=True`` only the keys
    themselves (``foo``, ``0``, ``bar``), joined by ``separator``.

    Args:
      keys: a key path (a tuple of key entries, or of anything ``str`` can print).
      simple: print each entry's bare key, not its ``[...]``/``.`` form (compact, but "0"
        no longer tells a list index from a dict key).
      separator: put between the entries.

    Returns:
      The joined text; ``''`` for the empty path of a root leaf.

    Example:
      >>> [keystr(p, simple=True, separator='/') for p, _ in
      ...  tree_leaves_with_path({'a': [1, 2]})]
      ['a/0', 'a/1']
    """
    if not hasattr(keys, "__iter__"):
        raise TypeError(
            f"keystr: keys must be a key path (a tuple of key entries, as "
            f"tree_flatten_with_path gives), got {type(keys).__name__} {keys!r:.60}"
        )
    return separator.join(_simple_entrystr(k) if simple else str(k) for k in keys)


def _check_treedef(fun_name: str, treedef, what: str = "treedef") -> PyTreeDef:
    """``treedef`` if it is a PyTreeDef, else a TypeError naming ``fun_name``."""
    if not isinstance(treedef, PyTreeDef):
        raise TypeError(
            f"{fun_name}: {what} must be a PyTreeDef (from tree_structure or "
            f"tree_flatten), got {type(treedef).__name__} {treedef!r:.60}"
        )
    return treedef


def _bad_flatten(t, out, with_keys: bool = False) -> ValueError:
    fn = "flatten_with_keys" if with_keys else "flatten"
    pairs = "(key, child) pairs" if with_keys else "children"
    return ValueError(
        f"the {fn} function registered for the pytree node type {t.__name__} "
        f"must return a pair ({pairs}, aux_data), got {out!r:.80}"
    )


def _simple_entrystr(key) -> str:
    if isinstance(key, (DictKey, FlattenedIndexKey)):
        return str(key.key)
    if isinstance(key, SequenceKey):
        return str(key.idx)
    if isinstance(key, GetAttrKey):
        return str(key.name)
    return str(key)


# -- the registry of node types --------------------------------------------------------------


class _NodeType(NamedTuple):
    flatten: Callable[[Any], tuple[Any, Any]]  # node -> (children, aux_data)
    unflatten: Callable[[Any, Any], Any]  # (aux_data, children) -> node
    flatten_with_keys: Callable[[Any], tuple[Any, Any]] | None  # -> ([(key, child)], aux)


_registry: dict[type, _NodeType] = {}


def register_pytree_node(
    nodetype: type, flatten_func, unflatten_func, flatten_with_keys_func=None
) -> None:
    """Make ``nodetype`` a pytree node.

    Args:
      nodetype: the Python type to treat as an internal node.
      flatten_func: ``x -> (children, aux_data)``; ``aux_data`` must be hashable and
        comparable (it is part of the treedef).
      unflatten_func: ``(aux_data, children) -> x``.
      flatten_with_keys_func: optional ``x -> ([(key_entry, child), ...], aux_data)`` giving
        each child's key path entry; without it children get :class:`FlattenedIndexKey`.
    """
    if not isinstance(nodetype, type):  # a TypeError, as JAX's registry raises
        raise TypeError(
            f"register_pytree_node: nodetype must be a class, got "
            f"{type(nodetype).__name__} {nodetype!r:.40}"
        )
    if nodetype in _registry:
        raise ValueError(
            f"register_pytree_node: {nodetype.__name__} is already registered as a pytree node"
        )
    for what, fn in (
        ("flatten_func", flatten_func),
        ("unflatten_func", unflatten_func),
        ("flatten_with_keys_func", flatten_with_keys_func),
    ):
        if not callable(fn) and not (fn is None and what == "flatten_with_keys_func"):
            raise TypeError(
                f"register_pytree_node({nodetype.__name__}): {what} must be "
                f"callable, got {type(fn).__name__}"
            )
    _registry[nodetype] = _NodeType(flatten_func, unflatten_func, flatten_with_keys_func)


def register_pytree_with_keys(
    nodetype: type, flatten_with_keys, unflatten_func, flatten_func=None
) -> None:
    """Make ``nodetype`` a pytree node whose children carry key path entries.

    Args:
      nodetype: the Python type to treat as an internal node.
      flatten_with_keys: ``x -> ([(key_entry, child), ...], aux_data)``.
      unflatten_func: ``(aux_data, children) -> x``.
      flatten_func: optional faster ``x -> (children, aux_data)`` for the flattens that need
        no keys; it must give the children in the same order and the same aux data.
    """
    if flatten_func is None:

        def flatten_func(x):
            keyed, aux = flatten_with_keys(x)
            return [c for _, c in keyed], aux

    register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def register_pytree_node_class(cls):
    """Class decorator: use ``cls.tree_flatten()`` and ``cls.tree_unflatten(aux, children)``."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_pytree_with_keys_class(cls):
    """Class decorator: use ``cls.tree_flatten_with_keys()`` (``([(key, child)], aux)``),
    ``cls.tree_unflatten(aux, children)`` and, when defined, ``cls.tree_flatten()``."""
    flatten = (lambda x: x.tree_flatten()) if hasattr(cls, "tree_flatten") else None
    register_pytree_with_keys(
        cls, lambda x: x.tree_flatten_with_keys(), cls.tree_unflatten, flatten
    )
    return cls


def register_static(cls):
    """Class decorator: instances of ``cls`` are pytrees with no leaves, kept whole in the
    treedef, so ``jit`` treats them as static (``cls`` must be hashable and comparable)."""
    register_pytree_with_keys(cls, lambda x: ((), x), lambda x, _: x)
    return cls


def register_dataclass(nodetype=None, data_fields=None, meta_fields=None, drop_fields=()):
    """Register a dataclass: ``data_fields`` are children, ``meta_fields`` static aux data.

    Usable as a decorator; without explicit lists, fields marked
    ``dataclasses.field(metadata=dict(static=True))`` (or :func:`fungrad.tree.static`) are
    meta and the rest data. Children's key path entries are ``GetAttrKey(field)``.
    """
    if nodetype is None:
        return functools.partial(
            register_dataclass,
            data_fields=data_fields,
            meta_fields=meta_fields,
            drop_fields=drop_fields,
        )
    name = getattr(nodetype, "__name__", nodetype)
    if (data_fields is None) != (meta_fields is None):
        raise TypeError(
            f"register_dataclass({name}): give both data_fields and meta_fields, "
            f"or neither; got data_fields={data_fields!r}, "
            f"meta_fields={meta_fields!r}"
        )
    if data_fields is None:
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError(
                f"register_dataclass: {name} is not a dataclass; pass "
                "data_fields and meta_fields explicitly"
            )
        fields = [f for f in dataclasses.fields(nodetype) if f.name not in drop_fields]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)
    if overlap := set(data_fields) & set(meta_fields):
        raise ValueError(
            f"register_dataclass({name}): fields {sorted(overlap)} are in both "
            "data_fields and meta_fields"
        )
    if dataclasses.is_dataclass(nodetype):
        init = {f.name for f in dataclasses.fields(nodetype) if f.init} - set(drop_fields)
        given = set(data_fields) | set(meta_fields)
        if given != init:
            raise ValueError(
                f"register_dataclass({name}): data_fields and meta_fields must name exactly "
                f"the fields with init=True; missing {sorted(init - given)} (add them to "
                f"drop_fields to leave them out), unexpected {sorted(given - init)}"
            )

    def flatten(x):
        return [getattr(x, n) for n in data_fields], tuple(getattr(x, n) for n in meta_fields)

    def flatten_with_keys(x):
        return (
            [(GetAttrKey(n), getattr(x, n)) for n in data_fields],
            tuple(getattr(x, n) for n in meta_fields),
        )

    def unflatten(meta, children):
        kwargs = dict(zip(meta_fields, meta))
        kwargs.update(zip(data_fields, children))
        return nodetype(**kwargs)

    register_pytree_node(nodetype, flatten, unflatten, flatten_with_keys)
    return nodetype


def _sorted_keys(d) -> list:
    try:
        return sorted(d)
    except TypeError:
        raise ValueError(
            f"tree_flatten: the dict keys {list(d)!r} cannot be sorted; pytree "
            "dicts are ordered by sorted key, so use mutually comparable keys "
            "(all str, or all int)"
        ) from None


def _dict_flatten(d):
    keys = _sorted_keys(d)
    return [d[k] for k in keys], tuple(keys)


def _dict_flatten_with_keys(d):
    keys = _sorted_keys(d)
    return [(DictKey(k), d[k]) for k in keys], tuple(keys)


def _seq_flatten_with_keys(s):
    return [(SequenceKey(i), c) for i, c in enumerate(s)], None


def _defaultdict_flatten_with_keys(d):
    keys = _sorted_keys(d)
    return [(DictKey(k), d[k]) for k in keys], (d.default_factory, tuple(keys))


register_pytree_node(tuple, lambda t: (t, None), lambda _, c: tuple(c), _seq_flatten_with_keys)
register_pytree_node(list, lambda t: (t, None), lambda _, c: list(c), _seq_flatten_with_keys)
register_pytree_node(
    dict, _dict_flatten, lambda keys, c: dict(zip(keys, c)), _dict_flatten_with_keys
)
register_pytree_node(type(None), lambda _: ((), None), lambda _, c: None, lambda _: ((), None))
register_pytree_node(
    OrderedDict,
    lambda d: (list(d.values()), tuple(d)),
    lambda keys, c: OrderedDict(zip(keys, c)),
    lambda d: ([(DictKey(k), v) for k, v in d.items()], tuple(d)),
)
register_pytree_node(
    defaultdict,
    lambda d: ([d[k] for k in _sorted_keys(d)], (d.default_factory, tuple(_sorted_keys(d)))),
    lambda aux, c: defaultdict(aux[0], zip(aux[1], c)),
    _defaultdict_flatten_with_keys,
)


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


class _Children(tuple):
    """A treedef's child treedefs: a tuple (``treedef.children``) that is also callable
    (``treedef.children()``, JAX's spelling, returns them as a list)."""

    __slots__ = ()

    def __call__(self) -> list:
        return list(self)


class _Mismatch(Exception):
    """A tree does not have a treedef's structure: raised where they differ, with the key
    path filled in on the way up (innermost key first)."""

    def __init__(self, expected: PyTreeDef, got):
        super().__init__()
        self.expected, self.got, self.keys = expected, got, []


class PyTreeDef:
    """The structure of a pytree: a node type, its aux data and child treedefs (leaf: None)."""

    __slots__ = ("node_type", "node_aux", "children", "num_leaves", "num_nodes", "_hash")

    def __init__(self, node_type, node_data, children):
        self.node_type = node_type  # None for a leaf
        self.node_aux = node_data  # the aux data (a namedtuple node: its class)
        self.children = children if type(children) is _Children else _Children(children)
        num_leaves, num_nodes = (1 if node_type is None else 0), 1
        for c in self.children:
            num_leaves += c.num_leaves
            num_nodes += c.num_nodes
        self.num_leaves = num_leaves
        self.num_nodes = num_nodes
        self._hash = None

    def node_data(self):
        """The root node's ``(type, aux data)`` as JAX gives it; None for a leaf. A dict's aux
        is its sorted keys as a list, a namedtuple's None."""
        if self.node_type is None:
            return None
        if self.node_type is _NAMEDTUPLE:
            return (self.node_aux, None)
        if self.node_type is dict:
            return (dict, list(self.node_aux))
        return (self.node_type, self.node_aux)

    def unflatten(self, leaves):
        """Rebuild a pytree with this structure from ``leaves`` (an iterable)."""
        if not hasattr(leaves, "__iter__"):
            raise TypeError(
                f"tree_unflatten: leaves must be an iterable of {self.num_leaves} "
                f"leaves, got {type(leaves).__name__}"
            )
        leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(
                f"tree_unflatten: {self} expects {self.num_leaves} leaves, got {len(leaves)}"
            )
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
            return self.node_aux(*children)
        return _registry[self.node_type].unflatten(self.node_aux, children)

    def flatten_up_to(self, tree) -> list:
        """The subtrees of ``tree`` at this treedef's leaves (``tree`` must have this prefix)."""
        return _flatten_up_to(self, tree, "flatten_up_to", "the tree")

    def _flatten_up_to(self, tree, out):
        if self.node_type is None:
            out.append(tree)
            return
        node_type, node_data, children = _node_info(tree)
        if (
            node_type != self.node_type
            or node_data != self.node_aux
            or len(children) != len(self.children)
        ):
            raise _Mismatch(self, tree)
        for i, (c, sub) in enumerate(zip(self.children, children)):
            try:
                c._flatten_up_to(sub, out)
            except _Mismatch as m:
                m.keys.append(_keyed_node_info(tree)[2][i][0])
                raise

    def compose(self, inner: PyTreeDef) -> PyTreeDef:
        """This structure with every leaf replaced by ``inner``'s structure."""
        if self.node_type is None:
            return inner
        return PyTreeDef(self.node_type, self.node_aux, [c.compose(inner) for c in self.children])

    def __eq__(self, other):
        return (
            isinstance(other, PyTreeDef)
            and self.node_type == other.node_type
            and self.node_aux == other.node_aux
            and self.children == other.children
        )

    def __hash__(self):
        if self._hash is None:
            data = self.node_aux
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
            return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(self.node_aux, kids)) + "}"
        if self.node_type is type(None):
            return "None"
        if self.node_type is _NAMEDTUPLE:
            return f"CustomNode(namedtuple[{self.node_aux.__name__}], [{', '.join(kids)}])"
        return f"CustomNode({self.node_type.__name__}[{self.node_aux}], [{', '.join(kids)}])"

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


def _keyed_node_info(x):
    """(node_type, node_data, [(key entry, child), ...]) for an internal node, or
    (None, None, None) for a leaf."""
    t = type(x)
    rec = _registry.get(t)
    if rec is not None:
        if rec.flatten_with_keys is not None:
            out = rec.flatten_with_keys(x)
            try:
                keyed, data = out
                return t, data, [(k, c) for k, c in keyed]
            except (TypeError, ValueError):
                raise _bad_flatten(t, out, True) from None
        out = rec.flatten(x)
        try:
            children, data = out
        except (TypeError, ValueError):
            raise _bad_flatten(t, out) from None
        return t, data, [(FlattenedIndexKey(i), c) for i, c in enumerate(children)]
    if _is_namedtuple(x):
        return _NAMEDTUPLE, t, [(GetAttrKey(f), c) for f, c in zip(t._fields, x)]
    return None, None, None


def _describe_value(x) -> str:
    """A subtree's top node in words, for errors: ``a tuple of length 2``, ``None``,
    ``a leaf of type float``."""
    kind, data, children = _node_info(x)
    if kind is None:
        return f"a leaf of type {type(x).__name__}"
    return _describe_node(PyTreeDef(kind, data, [_LEAF] * len(children)))


def _flatten_up_to(treedef: PyTreeDef, tree, fname: str, what: str) -> list:
    """``treedef.flatten_up_to(tree)``, with a ValueError naming ``fname``, ``what`` tree and
    the key path where the structures first differ."""
    out: list = []
    try:
        treedef._flatten_up_to(tree, out)
    except _Mismatch as m:
        where = keystr(tuple(reversed(m.keys)))
        got = m.got
        raise ValueError(
            f"{fname}: pytree structure mismatch at {what}{where}: expected "
            f"{_describe_node(m.expected)} ({m.expected}), got {_describe_value(got)}; every "
            f"tree must have the first tree's structure (or that structure with subtrees in "
            f"place of its leaves)"
        ) from None
    return out


def _flatten(x, leaves: list, is_leaf) -> PyTreeDef:
    if is_leaf is not None and is_leaf(x):
        leaves.append(x)
        return _LEAF
    t = type(x)
    rec = _registry.get(t)
    if rec is not None:
        out = rec.flatten(x)
        try:
            children, data = out
        except (TypeError, ValueError):
            raise _bad_flatten(t, out) from None
    elif isinstance(x, tuple) and hasattr(t, "_fields"):
        t, data, children = _NAMEDTUPLE, t, x
    else:
        leaves.append(x)
        return _LEAF
    return PyTreeDef(t, data, _Children([_flatten(c, leaves, is_leaf) for c in children]))


def _flatten_with_path(x, path: tuple, leaves: list, is_leaf) -> PyTreeDef:
    if is_leaf is not None and is_leaf(path, x):
        leaves.append((path, x))
        return _LEAF
    t, data, keyed = _keyed_node_info(x)
    if t is None:
        leaves.append((path, x))
        return _LEAF
    return PyTreeDef(
        t, data, _Children([_flatten_with_path(c, (*path, k), leaves, is_leaf) for k, c in keyed])
    )


def tree_flatten(tree, is_leaf=None) -> tuple[list, PyTreeDef]:
    """``(leaves, treedef)``; ``is_leaf(x)`` may stop the descent at a subtree."""
    leaves: list = []
    treedef = _flatten(tree, leaves, is_leaf)
    return leaves, treedef


def tree_flatten_with_path(
    tree, is_leaf=None, is_leaf_takes_path: bool = False
) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
    """``([(key_path, leaf), ...], treedef)``: :func:`tree_flatten` with each leaf's key path.

    Args:
      tree: the pytree.
      is_leaf: optional predicate that stops the descent at a subtree; it gets the subtree,
        or ``(key_path, subtree)`` when ``is_leaf_takes_path`` is true.
      is_leaf_takes_path: see ``is_leaf``.

    Example:
      >>> tree_flatten_with_path({'a': (1, 2)})[0]
      [((DictKey(key='a'), SequenceKey(idx=0)), 1), ((DictKey(key='a'), SequenceKey(idx=1)), 2)]
    """
    pred = is_leaf
    if is_leaf is not None and not is_leaf_takes_path:

        def pred(_, x):
            return is_leaf(x)

    leaves: list = []
    treedef = _flatten_with_path(tree, (), leaves, pred)
    return leaves, treedef


def tree_leaves_with_path(
    tree, is_leaf=None, is_leaf_takes_path: bool = False
) -> list[tuple[KeyPath, Any]]:
    """``[(key_path, leaf), ...]`` in :func:`tree_leaves` order (see
    :func:`tree_flatten_with_path`)."""
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def tree_unflatten(treedef: PyTreeDef, leaves):
    """Rebuild a pytree with ``treedef``'s structure from ``leaves``."""
    return _check_treedef("tree_unflatten", treedef).unflatten(leaves)


def tree_leaves(tree, is_leaf=None) -> list:
    """The leaves of ``tree`` in flattening order (dict children by sorted key)."""
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None) -> PyTreeDef:
    """The :class:`PyTreeDef` of ``tree``."""
    return tree_flatten(tree, is_leaf)[1]


def tree_map(f, tree, *rest, is_leaf=None) -> Any:
    """Apply ``f`` leafwise; ``rest`` are trees with ``tree``'s structure (or a prefix-compatible
    one: their subtrees at ``tree``'s leaves are passed whole)."""
    leaves, treedef = tree_flatten(tree, is_leaf)
    all_leaves = [leaves] + [
        _flatten_up_to(treedef, r, "tree_map", f"rest[{i}]") for i, r in enumerate(rest)
    ]
    return treedef.unflatten(f(*xs) for xs in zip(*all_leaves))


def tree_map_with_path(f, tree, *rest, is_leaf=None, is_leaf_takes_path: bool = False) -> Any:
    """Apply ``f(key_path, leaf, *rest_leaves)`` leafwise (see :func:`tree_map` and
    :func:`tree_flatten_with_path`).

    Example:
      >>> tree_map_with_path(lambda p, x: keystr(p), {'a': [0, 0]})
      {'a': ["['a'][0]", "['a'][1]"]}
    """
    keyed, treedef = tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
    paths = [p for p, _ in keyed]
    all_leaves = [paths, [x for _, x in keyed]] + [
        _flatten_up_to(treedef, r, "tree_map_with_path", f"rest[{i}]") for i, r in enumerate(rest)
    ]
    return treedef.unflatten(f(*xs) for xs in zip(*all_leaves))


class _Unspecified:
    def __repr__(self):
        return "Unspecified"


_UNSPECIFIED = _Unspecified()


def tree_reduce(function, tree, initializer=_UNSPECIFIED, is_leaf=None):
    """``functools.reduce(function, tree_leaves(tree), initializer)`` (``initializer`` may be
    any value, None included; without it the first leaf starts)."""
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _UNSPECIFIED:
        if not leaves:
            raise TypeError(
                "tree_reduce: the tree has no leaves and no initializer was "
                "given; pass initializer="
            )
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_reduce_associative(operation, tree, *, identity=_UNSPECIFIED, is_leaf=None):
    """Reduce the leaves with the associative ``operation`` as a balanced binary tree
    (depth ``log2(n)``); ``identity`` is returned for a tree without leaves."""
    leaves = tree_leaves(tree, is_leaf)
    if not leaves:
        if identity is _UNSPECIFIED:
            raise TypeError(
                "tree_reduce_associative: the tree has no leaves and no identity "
                "was given; pass identity="
            )
        return identity

    def reduce(lo, hi):
        if hi - lo == 1:
            return leaves[lo]
        mid = (lo + hi) // 2
        return operation(reduce(lo, mid), reduce(mid, hi))

    return reduce(0, len(leaves))


def tree_all(tree, *, is_leaf=None) -> bool:
    """True when every leaf is truthy (``all(tree_leaves(tree))``)."""
    return all(tree_leaves(tree, is_leaf))


def tree_broadcast(prefix_tree, full_tree, is_leaf=None):
    """``full_tree``'s structure with each leaf of ``prefix_tree`` repeated over the leaves of
    the subtree of ``full_tree`` it sits on (``prefix_tree`` must be a prefix of it).

    Example:
      >>> tree_broadcast((1, 2), (0, {'a': 0, 'b': 0}))
      (1, {'a': 2, 'b': 2})
    """
    leaves, prefix_def = tree_flatten(prefix_tree, is_leaf)
    subtrees = _flatten_up_to(prefix_def, full_tree, "tree_broadcast", "full_tree")
    out = []
    for x, sub in zip(leaves, subtrees):
        out += [x] * tree_structure(sub).num_leaves
    return tree_structure(full_tree).unflatten(out)


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """True for the treedef of a single leaf (``*``).

    NB: JAX also answers True for ``None``'s treedef (one node, no leaves); fungrad's jit
    relies on this function meaning "exactly one leaf".
    """
    return _check_treedef("treedef_is_leaf", treedef).node_type is None


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    """The treedefs of ``treedef``'s immediate children."""
    return list(_check_treedef("treedef_children", treedef).children)


def treedef_tuple(treedefs: Iterable[PyTreeDef]) -> PyTreeDef:
    """The treedef of a tuple whose children have the structures ``treedefs``."""
    if not isinstance(treedefs, Iterable):
        raise TypeError(
            f"treedef_tuple: expected an iterable of PyTreeDefs, got {type(treedefs).__name__}"
        )
    return PyTreeDef(
        tuple, None, [_check_treedef("treedef_tuple", t, "each element") for t in treedefs]
    )


def all_leaves(iterable, is_leaf=None) -> bool:
    """True when every element of ``iterable`` is a leaf."""
    if is_leaf is None:
        return all(treedef_is_leaf(tree_structure(x)) for x in iterable)
    items = list(iterable)
    leaves = tree_leaves(items, is_leaf)
    return len(leaves) == len(items) and all(a is b for a, b in zip(items, leaves))


def is_tree_node(typ: type) -> bool:
    """True when ``typ`` is a pytree node type (registered, built-in or a namedtuple)."""
    return typ in _registry or (
        isinstance(typ, type) and issubclass(typ, tuple) and hasattr(typ, "_fields")
    )


def flatten_one_level(tree) -> tuple[Iterable[Any], Hashable]:
    """``(children, aux_data)`` of the node ``tree``; a ValueError for a leaf."""
    kind, data, children = _node_info(tree)
    if kind is None:
        raise ValueError(
            f"flatten_one_level: can't tree-flatten type {type(tree)}: it is a "
            "leaf, not a pytree node"
        )
    return children, data


def flatten_one_level_with_keys(tree) -> tuple[Iterable[tuple[Any, Any]], Hashable]:
    """``([(key_entry, child), ...], aux_data)`` of the node ``tree``; a ValueError for a
    leaf."""
    kind, data, keyed = _keyed_node_info(tree)
    if kind is None:
        raise ValueError(
            f"flatten_one_level_with_keys: can't tree-flatten type {type(tree)}: "
            "it is a leaf, not a pytree node"
        )
    return keyed, data


def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None, pytree_to_transpose):
    """Turn an outer tree of inner trees into an inner tree of outer trees.

    ``inner_treedef`` None: the structure of the first inner tree.
    """
    _check_treedef("tree_transpose", outer_treedef, "outer_treedef")
    if inner_treedef is not None:
        _check_treedef("tree_transpose", inner_treedef, "inner_treedef")
    flat, treedef = tree_flatten(pytree_to_transpose)
    if inner_treedef is None:
        if outer_treedef.num_leaves == 0:
            raise ValueError(
                f"tree_transpose: outer_treedef {outer_treedef} has no leaves, so "
                "there is no inner tree to take inner_treedef from; pass it"
            )
        inner_treedef = tree_structure(
            _flatten_up_to(
                outer_treedef, pytree_to_transpose, "tree_transpose", "pytree_to_transpose"
            )[0]
        )
    n_in, n_out = inner_treedef.num_leaves, outer_treedef.num_leaves
    if treedef.num_leaves != n_in * n_out:
        raise TypeError(
            f"tree_transpose: pytree_to_transpose has the structure {treedef} with "
            f"{treedef.num_leaves} leaves, but outer_treedef {outer_treedef} "
            f"composed with inner_treedef {inner_treedef} has {n_in * n_out}; "
            f"expected {outer_treedef.compose(inner_treedef)}"
        )
    columns = [flat[i::n_in] for i in range(n_in)]
    return inner_treedef.unflatten(outer_treedef.unflatten(col) for col in columns)


class _PyTreeRegistry:
    """JAX's ``default_registry`` object: the node-type registry behind this module's
    functions, with the methods of ``jaxlib``'s ``PyTreeRegistry``."""

    def flatten(self, tree, leaf_predicate=None):
        """``tree_flatten(tree, leaf_predicate)``."""
        return tree_flatten(tree, leaf_predicate)

    def flatten_with_path(self, tree, is_leaf=None):
        """``tree_flatten_with_path``; ``is_leaf(key_path, subtree)``."""
        return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path=True)

    def flatten_one_level(self, tree):
        """``(children, aux_data)``, or None for a leaf."""
        kind, data, children = _node_info(tree)
        return None if kind is None else (children, data)

    def flatten_one_level_with_keys(self, tree):
        """``([(key_entry, child), ...], aux_data)``, or None for a leaf."""
        kind, data, keyed = _keyed_node_info(tree)
        return None if kind is None else (keyed, data)

    def is_node(self, typ) -> bool:
        """:func:`is_tree_node`."""
        return is_tree_node(typ)

    def register_node(self, typ, to_iterable, from_iterable, to_iterable_with_keys=None):
        """:func:`register_pytree_node`."""
        register_pytree_node(typ, to_iterable, from_iterable, to_iterable_with_keys)

    def register_dataclass_node(self, typ, data_fields, meta_fields):
        """:func:`register_dataclass` with explicit field lists."""
        register_dataclass(typ, list(data_fields), list(meta_fields))

    def __repr__(self):
        return "<fungrad.tree_util.default_registry>"


default_registry = _PyTreeRegistry()


# -- Partial: a functools.partial that is a pytree --------------------------------------------


class _HashableCallableShim:
    """Wraps a ``functools.partial`` given to :class:`Partial` so that ``functools.partial``
    does not merge the two (the inner partial's arguments are not leaves); calls, hashes and
    compares as the wrapped function."""

    def __init__(self, fun):
        self.fun = fun
        self.func, self.args, self.keywords = fun.func, fun.args, fun.keywords

    def __call__(self, *args, **kw):
        return self.fun(*args, **kw)

    def __hash__(self):
        return hash(self.fun)

    def __eq__(self, other):
        if isinstance(other, _HashableCallableShim):
            return self.fun == other.fun
        return self.fun == other

    def __repr__(self):
        return f"_HashableCallableShim({self.fun!r})"


class Partial(functools.partial):
    """A ``functools.partial`` that is a pytree: the bound ``args`` and ``keywords`` are its
    children (leaves, traced under transforms), ``func`` is static aux data.

    So a partially applied function can be passed to ``jit``, ``vmap``, ``grad`` functions
    as an argument, e.g. ``jit(lambda f, x: f(x))(Partial(fnp.add, 1.0), 2.0)``.
    """

    def __new__(cls, func, *args, **kw):
        if isinstance(func, functools.partial):
            func = _HashableCallableShim(func)
        return super().__new__(cls, func, *args, **kw)


register_pytree_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, xs: Partial(func, *xs[0], **xs[1]),
)


# -- paths of leaves and nodes, in words (for error messages) ------------------------------


def _path_segments(tree) -> list[str]:
    """How each child of a treedef node is reached: ``['w']`` (dict), ``.field`` (namedtuple),
    ``[0]`` (sequences and other nodes)."""
    kind, data = tree.node_type, tree.node_aux
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
        return f"a {kind.__name__} with keys {list(tree.node_aux)}"
    if kind == _NAMEDTUPLE:
        return f"a {tree.node_aux.__name__} namedtuple"
    if kind is type(None):
        return "None"
    return f"a {getattr(kind, '__name__', kind)}"


def _tree_difference(a, b, prefix: str) -> tuple[str, str, str] | None:
    """Where two treedefs first differ: ``(path, a's node there, b's node there)`` in words,
    or None when they are equal."""
    if a == b:
        return None
    if a.node_type != b.node_type or a.node_aux != b.node_aux or len(a.children) != len(b.children):
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
