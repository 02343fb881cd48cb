"""The viewer's graph model: a :class:`Graph` of nodes, edges and groups built from a jaxpr.

Every equation is a node labelled by its primitive and its key parameters; every value an
equation reads is an edge labelled with its type (``f32[128,784]``). A jaxpr's inputs,
constants and outputs are nodes of their own kinds. An equation holding jaxprs (cond branches,
scan/while bodies, custom_jvp/vjp, jit/closed_call/remat) is a *group*: a node whose box holds
one sub-group per nested jaxpr, each drawn as a graph of its own (built recursively).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fungrad import core

__all__ = ["Edge", "Graph", "Group", "Node", "build_graph", "sub_jaxprs"]

#: parameters not shown on a node's label (the structure shows them)
_HIDDEN_PARAMS = frozenset({"jaxpr", "branches", "cond_jaxpr", "body_jaxpr", "fun_jaxpr"})


@dataclass
class Node:
    """One box: ``kind`` is ``eqn``, ``input``, ``const`` or ``output``; ``group`` the id of the
    group drawn around it (None at the top); ``source`` the user's line (``model.py:42 (f)``)
    and ``source_key`` what links a backward equation to its forward one (equal keys: the same
    call in the user's code); ``children`` the groups of the nested jaxprs it holds."""

    id: str
    kind: str
    label: str
    group: str | None
    detail: str = ""
    source: str = ""
    source_key: str = ""
    eqn: object = field(default=None, repr=False)
    children: list[str] = field(default_factory=list)


@dataclass
class Edge:
    src: str
    dst: str
    label: str


@dataclass
class Group:
    """A nested jaxpr: ``owner`` is the node of the equation that holds it; ``nodes`` its own
    nodes (not those of groups nested in it), in program order."""

    id: str
    label: str
    owner: str
    parent: str | None
    nodes: list[str] = field(default_factory=list)
    n_eqns: int = 0  # equations in it, nested ones included


@dataclass
class Graph:
    """Nodes, edges and groups of one jaxpr (``top`` lists the top level's nodes in order)."""

    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    groups: dict[str, Group] = field(default_factory=dict)
    top: list[str] = field(default_factory=list)

    def eqn_nodes(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.kind == "eqn"]


def sub_jaxprs(eqn: core.JaxprEqn) -> list[tuple[str, core.Jaxpr, list]]:
    """``(name, jaxpr, consts)`` for each jaxpr among ``eqn``'s parameters, in order."""
    out = []
    for key, value in eqn.params.items():
        items = value if isinstance(value, (tuple, list)) else (value,)
        many = isinstance(value, (tuple, list)) and len(items) > 1
        for i, item in enumerate(items):
            name = f"{key}[{i}]" if many else key
            if isinstance(item, core.ClosedJaxpr):
                out.append((name, item.jaxpr, item.consts))
            elif isinstance(item, core.Jaxpr):
                out.append((name, item, []))
    return out


def _short(value, limit: int = 32) -> str:
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        value = value.item()  # a numpy scalar literal: 2.0, not np.float32(2.0)
    text = getattr(value, "name", None) if hasattr(value, "itemsize") else None
    text = text or (value.__name__ if isinstance(value, type) else repr(value))
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _params_text(eqn: core.JaxprEqn) -> str:
    parts = []
    for k, v in eqn.params.items():
        if k in _HIDDEN_PARAMS or callable(v) and not isinstance(v, type):
            continue
        if isinstance(v, (tuple, list)) and any(
            isinstance(x, (core.Jaxpr, core.ClosedJaxpr)) for x in v
        ):
            continue
        if isinstance(v, (core.Jaxpr, core.ClosedJaxpr)):
            continue
        parts.append(f"{k}={_short(v)}")
    return " ".join(parts)


def _source(eqn: core.JaxprEqn) -> tuple[str, str]:
    info = getattr(eqn, "source_info", None)
    if info is None:
        return "", ""
    try:
        return f"{info.file}:{info.line} ({info.function})", f"{id(info[0]):x}:{info[1]}"
    except (AttributeError, IndexError, TypeError):
        return str(info), str(info)


class _Builder:
    def __init__(self, expand_limit: int | None):
        self.g = Graph()
        self.n = 0

    def new_id(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def add(self, kind, label, group, **kw) -> Node:
        node = Node(self.new_id("n"), kind, label, group, **kw)
        self.g.nodes[node.id] = node
        if group is None:
            self.g.top.append(node.id)
        else:
            self.g.groups[group].nodes.append(node.id)
        return node

    def jaxpr(self, jaxpr: core.Jaxpr, consts, group: str | None) -> int:
        """Add ``jaxpr``'s nodes and edges under ``group``; returns its equation count."""
        producer: dict = {}
        for i, v in enumerate(jaxpr.invars):
            producer[v] = self.add("input", f"in{i}: {v.aval.str_short()}", group).id
        for i, v in enumerate(jaxpr.constvars):
            producer[v] = self.add("const", f"const{i}: {v.aval.str_short()}", group).id
        count = 0
        for eqn in jaxpr.eqns:
            count += 1
            literals = [_short(x.val, 12) for x in eqn.invars if isinstance(x, core.Literal)]
            params = _params_text(eqn)
            label = eqn.primitive.name + (f" [{params}]" if params else "")
            if literals:
                label += " · " + ", ".join(literals)
            source, key = _source(eqn)
            node = self.add("eqn", label, group, source=source, source_key=key, eqn=eqn)
            node.detail = ", ".join(v.aval.str_short() for v in eqn.outvars)
            for x in eqn.invars:
                if not isinstance(x, core.Literal) and x in producer:
                    self.g.edges.append(Edge(producer[x], node.id, x.aval.str_short()))
            for v in eqn.outvars:
                producer[v] = node.id
            for name, sub, sub_consts in sub_jaxprs(eqn):
                gid = self.new_id("g")
                grp = Group(gid, f"{eqn.primitive.name} · {name}", node.id, group)
                self.g.groups[gid] = grp
                node.children.append(gid)
                grp.n_eqns = self.jaxpr(sub, sub_consts, gid)
                count += grp.n_eqns
        for i, v in enumerate(jaxpr.outvars):
            text = v.aval.str_short()
            if isinstance(v, core.Literal):
                text = f"{_short(v.val, 12)}: {text}"
            out = self.add("output", f"out{i}: {text}", group)
            if not isinstance(v, core.Literal) and v in producer:
                self.g.edges.append(Edge(producer[v], out.id, v.aval.str_short()))
        return count


def build_graph(closed) -> Graph:
    """The :class:`Graph` of a ``ClosedJaxpr`` (or a ``Jaxpr``), nested jaxprs included."""
    if isinstance(closed, core.ClosedJaxpr):
        jaxpr, consts = closed.jaxpr, closed.consts
    elif isinstance(closed, core.Jaxpr):
        jaxpr, consts = closed, []
    else:
        raise TypeError(
            f"viz: build_graph takes a ClosedJaxpr or a Jaxpr, got {type(closed).__name__}; "
            "make one with fungrad.make_jaxpr(f)(*args)"
        )
    b = _Builder(None)
    b.jaxpr(jaxpr, consts, None)
    return b.g
