"""fungrad.nn.Module: a frozen dataclass registered as a pytree (children vs static fields)."""

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import tree_util
from fungrad.nn import Module, field


class Affine(Module):
    weight: fg.Array
    bias: fg.Array
    act: Callable = fg.nn.relu

    def __call__(self, x):
        return self.act(x @ self.weight + self.bias)


class Stack(Module):
    layers: list
    scale: float
    name: str = "stack"

    def __init__(self, sizes, scale=1.0):
        self.layers = [Affine(fnp.ones((a, b)) / a, fnp.zeros(b)) for a, b in zip(sizes, sizes[1:])]
        self.scale = scale

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.scale * x


def _affine():
    w = np.arange(6.0, dtype=np.float32).reshape(3, 2) / 6
    return Affine(fnp.asarray(w), fnp.asarray(np.array([0.5, -0.25], np.float32)))


def test_children_are_arrays_and_static_fields_go_to_the_treedef():
    m = _affine()
    leaves, treedef = tree_util.tree_flatten(m)
    assert len(leaves) == 2
    np.testing.assert_array_equal(leaves[0], m.weight)
    m2 = tree_util.tree_unflatten(treedef, leaves)
    assert type(m2) is Affine and m2.act is fg.nn.relu
    paths = [tree_util.keystr(p) for p, _ in tree_util.tree_flatten_with_path(m)[0]]
    assert paths == [".weight", ".bias"]
    # a different static value gives a different treedef; an equal one the same
    other = Affine(m.weight, m.bias, fg.nn.tanh)
    assert tree_util.tree_structure(other) != treedef
    assert tree_util.tree_structure(Affine(m.weight * 2, m.bias)) == treedef


def test_nested_modules_and_user_init():
    s = Stack([3, 4, 2], scale=2.0)
    assert len(tree_util.tree_leaves(s)) == 4
    assert s.name == "stack" and s.scale == 2.0
    x = np.array([1.0, 2.0, 3.0], np.float32)
    ref = x
    for layer in s.layers:
        ref = np.maximum(ref @ np.asarray(layer.weight) + np.asarray(layer.bias), 0)
    np.testing.assert_allclose(s(fnp.asarray(x)), 2 * ref, rtol=1e-6)
    assert repr(s) == (
        "Stack(\n"
        "  layers=[\n"
        "    Affine(weight=f32[3,4], bias=f32[4], act=relu),\n"
        "    Affine(weight=f32[4,2], bias=f32[2], act=relu),\n"
        "  ],\n"
        "  scale=2.0,\n"
        "  name='stack',\n"
        ")"
    )
    assert repr(s.layers[0]) == "Affine(weight=f32[3,4], bias=f32[4], act=relu)"


def test_grad_returns_a_model_shaped_gradient():
    m = _affine()
    x = fnp.asarray(np.array([1.0, -2.0, 3.0], np.float32))
    g = fg.grad(lambda m, x: m(x).sum())(m, x)
    assert type(g) is Affine and g.act is fg.nn.relu
    pre = np.asarray(x) @ np.asarray(m.weight) + np.asarray(m.bias)
    active = (pre > 0).astype(np.float32)
    np.testing.assert_allclose(g.weight, np.outer(np.asarray(x), active), rtol=1e-6)
    np.testing.assert_allclose(g.bias, active)


def test_jit_traces_only_arrays_and_vmap_takes_a_model():
    m = _affine()
    calls = []

    @fg.jit
    def f(m, x):
        calls.append(1)
        return m(x)

    x = fnp.asarray(np.array([1.0, 2.0, 3.0], np.float32))
    np.testing.assert_allclose(f(m, x), m(x))
    f(Affine(m.weight + 1, m.bias), x)  # same structure and statics: cached
    assert len(calls) == 1
    f(Affine(m.weight, m.bias, fg.nn.tanh), x)  # static changed: retrace
    assert len(calls) == 2
    xs = fnp.asarray(np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32))
    out = fg.vmap(lambda m, x: m(x), in_axes=(None, 0))(m, xs)
    np.testing.assert_allclose(out, np.stack([np.asarray(m(x)) for x in xs]), rtol=1e-6)
    # a batch of models
    ms = tree_util.tree_map(lambda a: fnp.stack([a, 2 * a]), m)
    out = fg.vmap(lambda m: m(x))(ms)
    np.testing.assert_allclose(out[1], Affine(2 * m.weight, 2 * m.bias)(x), rtol=1e-6)


def test_tree_map_to_non_arrays_keeps_the_structure():
    m = Stack([2, 3])
    mask = tree_util.tree_map(lambda _: True, m)
    assert tree_util.tree_structure(mask) == tree_util.tree_structure(m)
    assert mask.layers[0].weight is True
    assert tree_util.tree_map(lambda a, b: a if b else None, m, mask).layers[0].bias is not None


def test_static_field_and_numpy_children():
    class Table(Module):
        data: np.ndarray
        lookup: np.ndarray = field(static=True, default=None)

    t = Table(np.zeros(3, np.float32), np.arange(4))
    assert len(tree_util.tree_leaves(t)) == 1
    assert tree_util.tree_structure(t) == tree_util.tree_structure(Table(np.ones(3), t.lookup))


def test_immutability_and_bad_construction():
    m = _affine()
    with pytest.raises(dataclasses.FrozenInstanceError, match="immutable"):
        m.weight = fnp.zeros((3, 2))

    class Bad(Module):
        a: int

        def __init__(self):
            self.b = 1

    with pytest.raises(AttributeError, match="not a declared field"):
        Bad()

    class Missing(Module):
        a: int
        b: int

        def __init__(self):
            self.a = 1

    with pytest.raises(TypeError, match=r"left fields \['b'\] unset"):
        Missing()


def test_subclass_inherits_user_init_and_fields():
    class Scaled(Stack):
        pass

    s = Scaled([2, 2], scale=3.0)
    assert type(s) is Scaled and s.scale == 3.0
    assert type(tree_util.tree_map(lambda a: a, s)) is Scaled


def test_models_built_under_vmap_and_eval_shape_and_pickled():
    import pickle

    def make(key):
        w = fg.random.normal(key, (3, 2))
        return Affine(w, fnp.zeros(2))

    keys = fg.random.split(fg.random.key(0), 4)
    ensemble = fg.vmap(make)(keys)
    assert type(ensemble) is Affine and ensemble.weight.shape == (4, 3, 2)
    np.testing.assert_array_equal(ensemble.weight[2], make(keys[2]).weight)
    shapes = fg.eval_shape(make, keys[0])
    assert shapes.weight.shape == (3, 2) and repr(shapes).startswith("Affine(weight=f32[3,2]")
    m = pickle.loads(pickle.dumps(_affine()))
    np.testing.assert_array_equal(m.weight, _affine().weight)
    assert tree_util.tree_structure(m) == tree_util.tree_structure(_affine())


def test_inference_mode_sets_every_inference_field():
    class Block(Module):
        parts: list
        drop: object

        def __call__(self, x, key):
            for p in self.parts:
                x = p(x)
            return self.drop(x, key=key)

    k = fg.random.key(0)
    block = Block([fg.nn.Linear(2, 2, key=k), fg.nn.Dropout(0.5)], fg.nn.Dropout(0.9))
    ev = fg.nn.inference_mode({"b": block, "bn": fg.nn.BatchNorm(2)})
    assert ev["b"].drop.inference and ev["b"].parts[1].inference and ev["bn"].inference
    assert not block.drop.inference  # the original is unchanged
    x = fnp.ones((3, 2))
    np.testing.assert_array_equal(ev["b"].drop(x), x)
    assert ev["b"].parts[0].weight is block.parts[0].weight
    back = fg.nn.inference_mode(ev, False)
    assert tree_util.tree_structure(back["b"]) == tree_util.tree_structure(block)


class Bag(Module):
    a: object
    b: object
    c: object = None


_values = st.one_of(
    st.integers(-3, 3),
    st.text(max_size=3),
    st.none(),
    st.just(fg.nn.relu),
    st.integers(0, 3).map(lambda n: np.arange(n, dtype=np.float32)),
    st.lists(st.integers(0, 2).map(lambda n: np.ones(n, np.float32)), max_size=2),
)


@settings(max_examples=40, deadline=None)
@given(_values, _values, _values)
def test_flatten_roundtrip_keeps_statics_and_counts_array_leaves(a, b, c):
    bag = Bag(a, b, c)
    leaves, treedef = tree_util.tree_flatten(bag)
    expected = sum(
        1 if isinstance(v, np.ndarray) else len(v) if isinstance(v, list) else 0 for v in (a, b, c)
    )
    assert len(leaves) == expected
    back = tree_util.tree_unflatten(treedef, leaves)
    for name, v in (("a", a), ("b", b), ("c", c)):
        got = getattr(back, name)
        if isinstance(v, np.ndarray) or (isinstance(v, list) and v):
            assert tree_util.tree_structure(got) == tree_util.tree_structure(v)
        else:
            assert got == v or got is v
    assert tree_util.tree_structure(Bag(a, b, c)) == treedef  # equal statics, equal treedefs
