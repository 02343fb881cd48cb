"""fungrad.tree and the key-path half of fungrad.tree_util, against JAX 0.10.2's documented
behaviour (expected paths, reprs and errors below were produced by JAX)."""

import collections
import dataclasses
import functools
import operator
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import tree
from fungrad import tree_util as tu

# dir(jax.tree) and dir(jax.tree_util) of JAX 0.10.2, public names only.
JAX_TREE = [
    "all",
    "broadcast",
    "flatten",
    "flatten_with_path",
    "leaves",
    "leaves_with_path",
    "map",
    "map_with_path",
    "reduce",
    "reduce_associative",
    "static",
    "structure",
    "transpose",
    "unflatten",
]
JAX_TREE_UTIL = [
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

NT = collections.namedtuple("NT", "a b")


@tu.register_dataclass
@dataclasses.dataclass
class Layer:
    x: object
    y: object = tree.static(default=7)


class Opaque:
    """A custom node registered without keys (its children get FlattenedIndexKey)."""

    def __init__(self, a, b):
        self.a, self.b = a, b


tu.register_pytree_node(Opaque, lambda o: ((o.a, o.b), "aux"), lambda _, c: Opaque(*c))


def test_every_jax_name_exists():
    assert [n for n in JAX_TREE if not hasattr(tree, n)] == []
    assert [n for n in JAX_TREE_UTIL if not hasattr(tu, n)] == []
    assert sorted(tu.__all__) == sorted(JAX_TREE_UTIL)
    assert sorted(tree.__all__) == sorted(JAX_TREE)


def test_tree_aliases_are_tree_util_functions():
    assert tree.map is tu.tree_map and tree.leaves is tu.tree_leaves
    assert tree.map_with_path is tu.tree_map_with_path and tree.broadcast is tu.tree_broadcast
    assert tree.map(lambda x: x * 2, {"a": [1, (2,)]}) == {"a": [2, (4,)]}


def test_paths_and_treedef_match_jax():
    t = {
        "b": [1, (2, 3)],
        "a": NT(4, 5),
        "c": None,
        "d": Layer(6, 7),
        "e": Opaque(8, [9]),
        "f": collections.OrderedDict([("z", 1), ("y", 2)]),
        "g": collections.defaultdict(int, {"q": 1, "p": 2}),
    }
    got = [
        (tu.keystr(p), tu.keystr(p, simple=True, separator="/"), x)
        for p, x in tu.tree_leaves_with_path(t)
    ]
    assert got == [
        ("['a'].a", "a/a", 4),
        ("['a'].b", "a/b", 5),
        ("['b'][0]", "b/0", 1),
        ("['b'][1][0]", "b/1/0", 2),
        ("['b'][1][1]", "b/1/1", 3),
        ("['d'].x", "d/x", 6),
        ("['e'][<flat index 0>]", "e/0", 8),
        ("['e'][<flat index 1>][0]", "e/1/0", 9),
        ("['f']['z']", "f/z", 1),
        ("['f']['y']", "f/y", 2),
        ("['g']['p']", "g/p", 2),
        ("['g']['q']", "g/q", 1),
    ]
    paths = [p for p, _ in tu.tree_leaves_with_path(t)]
    assert paths[0] == (tu.DictKey("a"), tu.GetAttrKey("a"))
    assert paths[6] == (tu.DictKey("e"), tu.FlattenedIndexKey(0))
    treedef = tu.tree_flatten_with_path(t)[1]
    assert treedef == tu.tree_structure(t)
    assert repr(treedef) == (
        "PyTreeDef({'a': CustomNode(namedtuple[NT], [*, *]), 'b': [*, (*, *)], 'c': None, "
        "'d': CustomNode(Layer[(7,)], [*]), 'e': CustomNode(Opaque[aux], [*, [*]]), "
        "'f': CustomNode(OrderedDict[('z', 'y')], [*, *]), "
        "'g': CustomNode(defaultdict[(<class 'int'>, ('p', 'q'))], [*, *])})"
    )


def test_root_leaf_and_none_paths():
    assert tu.tree_flatten_with_path(5) == ([((), 5)], tu.tree_structure(5))
    assert tu.tree_flatten_with_path(None)[0] == []
    assert tu.tree_leaves_with_path([1, None, 2]) == [
        ((tu.SequenceKey(0),), 1),
        ((tu.SequenceKey(2),), 2),
    ]
    assert tu.keystr(()) == ""


def _follow(root, path):
    """An independent reading of a key path: index/getattr step by step."""
    for k in path:
        if isinstance(k, tu.DictKey):
            root = root[k.key]
        elif isinstance(k, tu.SequenceKey):
            root = root[k.idx]
        elif isinstance(k, tu.GetAttrKey):
            root = getattr(root, k.name)
        else:
            root = (root.a, root.b)[k.key]
    return root


leaf_values = st.one_of(st.integers(), st.floats(allow_nan=False), st.text(max_size=2))
trees = st.recursive(
    leaf_values | st.none(),
    lambda kids: st.one_of(
        st.lists(kids, max_size=3),
        st.lists(kids, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=2), kids, max_size=3),
        st.tuples(kids, kids).map(lambda t: NT(*t)),
        st.tuples(kids, kids).map(lambda t: Layer(t[0])),
        st.tuples(kids, kids).map(lambda t: Opaque(*t)),
    ),
    max_leaves=10,
)


@settings(max_examples=60, deadline=None)
@given(trees)
def test_each_path_leads_to_its_leaf(t):
    keyed, treedef = tu.tree_flatten_with_path(t)
    leaves, treedef2 = tu.tree_flatten(t)
    assert treedef == treedef2
    assert [x for _, x in keyed] == leaves
    for path, x in keyed:
        assert _follow(t, path) is x
    assert len({p for p, _ in keyed}) == len(keyed)  # paths are distinct and hashable
    mapped = tu.tree_map_with_path(lambda p, x, y: tu.keystr(p) if x is y else None, t, t)
    assert tu.tree_leaves(mapped) == [tu.keystr(p) for p, _ in keyed]


def test_key_entries_repr_eq_hash_pickle():
    keys = [
        tu.DictKey("a"),
        tu.DictKey(1),
        tu.SequenceKey(2),
        tu.GetAttrKey("x"),
        tu.FlattenedIndexKey(3),
    ]
    assert [repr(k) for k in keys] == [
        "DictKey(key='a')",
        "DictKey(key=1)",
        "SequenceKey(idx=2)",
        "GetAttrKey(name='x')",
        "FlattenedIndexKey(key=3)",
    ]
    assert [str(k) for k in keys] == ["['a']", "[1]", "[2]", ".x", "[<flat index 3>]"]
    assert [type(k).__match_args__ for k in keys] == [
        ("key",),
        ("key",),
        ("idx",),
        ("name",),
        ("key",),
    ]
    assert tu.DictKey("a") == tu.DictKey("a") and hash(tu.DictKey("a")) == hash(tu.DictKey("a"))
    assert tu.DictKey(1) != tu.SequenceKey(1) and tu.SequenceKey(1) != tu.FlattenedIndexKey(1)
    assert [pickle.loads(pickle.dumps(k)) for k in keys] == keys
    with pytest.raises(TypeError):
        hash(tu.DictKey([1]))
    assert tu.keystr((tu.DictKey("a"), "hello", 3)) == "['a']hello3"


def test_is_leaf_with_and_without_path():
    t = {"a": [1, (2, 3)]}
    got = tu.tree_leaves_with_path(t, is_leaf=lambda p, x: len(p) == 2, is_leaf_takes_path=True)
    assert got == [
        ((tu.DictKey("a"), tu.SequenceKey(0)), 1),
        ((tu.DictKey("a"), tu.SequenceKey(1)), (2, 3)),
    ]
    got = tu.tree_leaves_with_path(t, is_leaf=lambda x: isinstance(x, tuple))
    assert got[-1] == ((tu.DictKey("a"), tu.SequenceKey(1)), (2, 3))
    out = tree.map_with_path(lambda p, x: len(p), t, is_leaf=lambda x: isinstance(x, tuple))
    assert out == {"a": [2, 2]}


def test_register_with_keys_and_static():
    @tu.register_pytree_with_keys_class
    class Special:
        def __init__(self, x, y):
            self.x, self.y = x, y

        def tree_flatten_with_keys(self):
            return ((tu.GetAttrKey("x"), self.x), (tu.GetAttrKey("y"), self.y)), None

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)

    paths = [tu.keystr(p) for p, _ in tu.tree_leaves_with_path([Special(1, (2,))])]
    assert paths == ["[0].x", "[0].y[0]"]
    s = tu.tree_map(lambda v: v * 10, Special(1, 2))
    assert (s.x, s.y) == (10, 20)

    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

    tu.register_pytree_with_keys(
        Pair,
        lambda p: ([(tu.DictKey("first"), p.a), (tu.DictKey("second"), p.b)], "tag"),
        lambda tag, c: Pair(*c),
    )
    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(Pair(1, 2))] == [
        "['first']",
        "['second']",
    ]
    assert tu.tree_leaves(Pair(1, [2, 3])) == [1, 2, 3]
    assert repr(tu.tree_structure(Pair(1, 2))) == "PyTreeDef(CustomNode(Pair[tag], [*, *]))"

    @tu.register_static
    class Mode(str):
        pass

    leaves, treedef = tu.tree_flatten([1, Mode("add")])
    assert leaves == [1] and treedef.unflatten([5])[1] == "add"
    assert repr(treedef) == "PyTreeDef([*, CustomNode(Mode[add], [])])"
    f = fg.jit(lambda x, op: x + 1.0 if op == "add" else x - 1.0)
    assert float(f(1.0, Mode("add"))) == 2.0 and float(f(1.0, Mode("sub"))) == 0.0


def test_treedef_methods_and_small_functions():
    td = tu.tree_structure([1, (2,)])
    assert td.children() == [tu.tree_structure(1), tu.tree_structure((2,))]
    assert td.children == tuple(td.children())  # also a tuple, as fungrad's internals read it
    assert (
        repr(tu.tree_structure([1, 2]).compose(tu.tree_structure({"a": 1, "b": (2,)})))
        == "PyTreeDef([{'a': *, 'b': (*,)}, {'a': *, 'b': (*,)}])"
    )
    pair = tu.treedef_tuple([tu.tree_structure([1]), tu.tree_structure({"a": 4})])
    assert pair == tu.tree_structure(([1], {"a": 4}))
    assert tu.flatten_one_level({"b": 1, "a": 2}) == ([2, 1], ("a", "b"))
    assert tu.flatten_one_level_with_keys(NT(1, 2)) == (
        [(tu.GetAttrKey("a"), 1), (tu.GetAttrKey("b"), 2)],
        NT,
    )
    with pytest.raises(ValueError, match="flatten_one_level: can't tree-flatten type"):
        tu.flatten_one_level(3)
    assert tu.default_registry.flatten_one_level(3) is None
    assert tu.default_registry.flatten([1, {"a": 2}])[0] == [1, 2]
    assert [tu.is_tree_node(t) for t in (tuple, dict, type(None), NT, Layer, int, str)] == [
        True,
        True,
        True,
        True,
        True,
        False,
        False,
    ]
    assert tu.all_leaves([1, 2.0]) and not tu.all_leaves([1, None])
    assert tu.all_leaves([1, (2,)], is_leaf=lambda x: isinstance(x, tuple))
    assert tree.all([1, True, "x"]) and not tree.all([1, [0]])
    assert not tree.all([(), ()], is_leaf=lambda x: x == ())


def test_reduce_broadcast_transpose():
    assert tree.reduce(lambda a, b: (a, b), [1, 2], None) == ((None, 1), 2)  # None is a value
    with pytest.raises(TypeError, match="no initializer"):
        tree.reduce(operator.add, [])
    xs = [1, (2, 3), [4, 5, 6]]
    assert tree.reduce_associative(operator.add, xs) == 21
    assert tree.reduce_associative(lambda a, b: (a, b), [1, 2, 3, 4, 5]) == ((1, 2), (3, (4, 5)))
    assert tree.reduce_associative(operator.add, [], identity=0) == 0
    with pytest.raises(TypeError, match="identity"):
        tree.reduce_associative(operator.add, [None])
    assert tree.broadcast((1, 2, 3), (0, {"a": 0, "b": 0}, (0, 0))) == (1, {"a": 2, "b": 2}, (3, 3))
    assert tree.broadcast([1, None], [{"a": 1}, None]) == [{"a": 1}, None]
    with pytest.raises(ValueError, match=r"tree_broadcast: .*mismatch at full_tree"):
        tree.broadcast((1, 2), [0, 0])
    outer = tu.tree_structure([0, 0])
    assert tree.transpose(outer, None, [(1, 2), (3, 4)]) == ([1, 3], [2, 4])
    assert tree.transpose(
        outer, tu.tree_structure({"a": 0, "b": 0}), [{"a": 1, "b": 2}, {"a": 3, "b": 4}]
    ) == {"a": [1, 3], "b": [2, 4]}
    with pytest.raises(TypeError, match="tree_transpose: .* 5 leaves"):
        tree.transpose(outer, tu.tree_structure((0, 0)), [(1, 2), (3, 4, 5)])


def test_structure_errors_name_function_and_path():
    with pytest.raises(
        ValueError,
        match=r"tree_map: pytree structure mismatch at "
        r"rest\[0\]\['a'\]\[1\]: expected a tuple",
    ):
        tree.map(lambda a, b: a, {"a": [1, (2,)]}, {"a": [1, [2]]})
    with pytest.raises(ValueError, match=r"mismatch at rest\[0\]\['a'\].*None.*leaf of type int"):
        tree.map(lambda a, b: b, {"a": None, "b": 1}, {"a": 3, "b": 2})
    with pytest.raises(ValueError, match="tree_map_with_path: .* at rest\\[0\\]\\.a"):
        tree.map_with_path(lambda p, a, b: a, NT([1], 2), NT((1,), 2))
    with pytest.raises(ValueError, match="dict keys .* cannot be sorted"):
        tree.flatten({1: 1, "a": 2})
    assert tree.map(lambda a, b: b, [1, {"a": 2}], [(3,), {"a": [4]}]) == [(3,), {"a": [4]}]


def test_register_dataclass_validates_fields():
    @dataclasses.dataclass
    class P:
        w: object
        n: int

    with pytest.raises(ValueError, match="missing \\['n'\\]"):
        tu.register_dataclass(P, data_fields=["w"], meta_fields=[])
    with pytest.raises(ValueError, match="both data_fields and meta_fields"):
        tu.register_dataclass(P, data_fields=["w", "n"], meta_fields=["n"])
    with pytest.raises(TypeError, match="give both"):
        tu.register_dataclass(P, data_fields=["w"])
    tu.register_dataclass(P, data_fields=["w"], meta_fields=["n"])
    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(P([1], 3))] == [".w[0]"]
    assert tu.tree_structure(P(1, 3)) != tu.tree_structure(P(1, 4))


def test_partial_is_a_pytree():
    p = tu.Partial(max, 1, key=lambda v: -v)
    keyed, treedef = tu.tree_flatten_with_path(tu.Partial(max, 1, default=2))
    assert [(tu.keystr(k), x) for k, x in keyed] == [
        ("[<flat index 0>][0]", 1),
        ("[<flat index 1>]['default']", 2),
    ]
    assert repr(treedef) == (
        "PyTreeDef(CustomNode(Partial[<built-in function max>], [(*,), {'default': *}]))"
    )
    assert p(3) == 1 and tu.tree_map(lambda x: x * 2, tu.Partial(max, 1, 3)).args == (2, 6)
    nested = tu.Partial(functools.partial(max, 1), 2)  # the inner partial's 1 is not a leaf
    assert tu.tree_leaves(nested) == [2] and nested(0) == 2 and nested.func.args == (1,)
    assert tu.tree_leaves(tu.Partial(tu.Partial(max, 1), 2)) == [2]
    assert tu.tree_structure(tu.Partial(fnp.add, 1.0)) == tu.tree_structure(
        tu.Partial(fnp.add, 5.0)
    )


def test_partial_under_jit_grad_vmap():
    call = fg.jit(lambda f, x: f(x))
    for a in (1.0, fnp.arange(3.0)):
        f = tu.Partial(fnp.multiply, a)
        np.testing.assert_allclose(np.asarray(call(f, 2.0)), np.asarray(f(2.0)))  # vs eager
    g = fg.grad(lambda f: f(3.0))(tu.Partial(fnp.multiply, 2.0))
    assert isinstance(g, tu.Partial) and float(g.args[0]) == 3.0  # d(a*3)/da
    xs = fnp.arange(4.0)
    out = fg.vmap(lambda f, x: f(x), in_axes=(None, 0))(tu.Partial(fnp.add, 10.0), xs)
    np.testing.assert_allclose(np.asarray(out), [10.0 + float(x) for x in np.asarray(xs)])


def test_treedef_node_data_is_jax_s_method():
    # PyTreeDef.node_data() gives the root's (type, aux data), as printed by JAX 0.10.2.
    P = collections.namedtuple("P", "x y")

    @functools.partial(fg.tree_util.register_dataclass, data_fields=["u"], meta_fields=["n"])
    @dataclasses.dataclass
    class DC:
        u: int
        n: str

    def nd(tree):
        return fg.tree_util.tree_structure(tree).node_data()

    assert nd({"b": 1, "a": 2}) == (dict, ["a", "b"])
    assert nd((1, 2)) == (tuple, None) and nd([1]) == (list, None)
    assert nd(None) == (type(None), None) and nd(1) is None
    assert nd(P(1, 2)) == (P, None)
    assert nd(DC(1, "q")) == (DC, ("q",))
    assert nd(collections.OrderedDict(z=1, a=2)) == (collections.OrderedDict, ("z", "a"))
    assert nd(collections.defaultdict(int, {"a": 1})) == (collections.defaultdict, (int, ("a",)))
    assert nd(fg.tree_util.Partial(max, 1)) == (fg.tree_util.Partial, max)
