"""Pytree flattening, rebuilding and registration (JAX's tree_util semantics)."""

import collections
import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fungrad import tree_util as tu

Point = collections.namedtuple("Point", ["x", "y"])

leaves = st.one_of(st.integers(), st.floats(allow_nan=False), st.text(max_size=3))
trees = st.recursive(
    leaves | st.none(),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=3), children, max_size=3),
        st.tuples(children, children).map(lambda t: Point(*t)),
    ),
    max_leaves=12,
)


@given(trees)
def test_flatten_unflatten_roundtrip(tree):
    flat, treedef = tu.tree_flatten(tree)
    assert treedef.num_leaves == len(flat)
    assert tu.tree_unflatten(treedef, flat) == tree
    assert tu.tree_structure(tu.tree_unflatten(treedef, flat)) == treedef
    assert hash(treedef) == hash(tu.tree_structure(tree))


def test_none_is_a_node_without_leaves():
    assert tu.tree_leaves([None, 1, (None, 2)]) == [1, 2]
    assert tu.tree_structure(None).num_leaves == 0


def test_dict_keys_sorted():
    flat, treedef = tu.tree_flatten({"b": 1, "a": 2, "c": {"z": 3, "y": 4}})
    assert flat == [2, 1, 4, 3]
    assert repr(treedef) == "PyTreeDef({'a': *, 'b': *, 'c': {'y': *, 'z': *}})"


def test_tree_map_multiple_trees_and_is_leaf():
    a = {"x": [1, 2], "y": (3,)}
    b = {"x": [10, 20], "y": (30,)}
    assert tu.tree_map(lambda u, v: u + v, a, b) == {"x": [11, 22], "y": (33,)}
    out = tu.tree_map(
        lambda leaf: len(leaf), {"x": [1, 2], "y": [3]}, is_leaf=lambda n: isinstance(n, list)
    )
    assert out == {"x": 2, "y": 1}
    with pytest.raises(ValueError, match="structure mismatch"):
        tu.tree_map(lambda u, v: u, [1, 2], (1, 2))


def test_tree_reduce_and_transpose():
    assert tu.tree_reduce(lambda x, y: x + y, [1, (2, 3)]) == 6
    assert tu.tree_reduce(lambda x, y: x + y, [], 7) == 7
    outer = tu.tree_structure([0, 0])
    inner = tu.tree_structure((0, 0, 0))
    assert tu.tree_transpose(outer, inner, [(1, 2, 3), (4, 5, 6)]) == ([1, 4], [2, 5], [3, 6])


def test_register_pytree_node_class():
    @tu.register_pytree_node_class
    class Box:
        def __init__(self, a, b, tag):
            self.a, self.b, self.tag = a, b, tag

        def tree_flatten(self):
            return (self.a, self.b), self.tag

        @classmethod
        def tree_unflatten(cls, tag, children):
            return cls(*children, tag)

    flat, treedef = tu.tree_flatten([Box(1, (2, 3), "t")])
    assert flat == [1, 2, 3]
    box = tu.tree_unflatten(treedef, [4, 5, 6])[0]
    assert (box.a, box.b, box.tag) == (4, (5, 6), "t")
    with pytest.raises(ValueError, match="already registered"):
        tu.register_pytree_node(Box, None, None)


def test_register_dataclass():
    @tu.register_dataclass
    @dataclasses.dataclass
    class Params:
        w: object
        b: object
        name: str = dataclasses.field(default="p", metadata=dict(static=True))

    p = Params(1, 2, "layer")
    flat, treedef = tu.tree_flatten(p)
    assert flat == [1, 2]
    assert tu.tree_unflatten(treedef, [3, 4]) == Params(3, 4, "layer")
    assert tu.tree_structure(Params(1, 2, "other")) != treedef


def test_unflatten_wrong_count():
    treedef = tu.tree_structure((1, 2))
    with pytest.raises(ValueError, match="expects 2 leaves, got 3"):
        tu.tree_unflatten(treedef, [1, 2, 3])


def test_all_leaves():
    assert tu.all_leaves([1, 2.0, "s"])
    assert not tu.all_leaves([1, (2,)])
