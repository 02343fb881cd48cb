"""jit's hot path for pytree arguments with namedtuples and registered nodes (optimizer states):
a repeated call takes the cached executable, and calls whose structure differs in node type or
aux data never share one (same results as the general path, the output types kept)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import tree_util


class State(NamedTuple):
    count: object
    mu: object


class Other(NamedTuple):
    count: object
    mu: object


@tree_util.register_pytree_node_class
class Scaled:
    """A registered node whose aux data (the scale) is part of its structure."""

    def __init__(self, value, scale):
        self.value, self.scale = value, scale

    def tree_flatten(self):
        return (self.value,), self.scale

    @classmethod
    def tree_unflatten(cls, scale, children):
        return cls(children[0], scale)


def _step(params, state):
    return (
        tree_util.tree_map(lambda p, m: p - 0.5 * m, params, state.mu),
        type(state)(state.count + 1, tree_util.tree_map(lambda m: 0.9 * m, state.mu)),
    )


def test_namedtuple_state_repeated_calls_match_numpy():
    f = fg.jit(_step)
    params = {"w": fnp.ones((3, 2)), "b": fnp.zeros(2)}
    state = State(fnp.asarray(0, np.int32), {"w": fnp.full((3, 2), 2.0), "b": fnp.ones(2)})
    w, mu_w, count = np.ones((3, 2)), np.full((3, 2), 2.0), 0
    for _ in range(4):
        params, state = f(params, state)
        w, mu_w, count = w - 0.5 * mu_w, 0.9 * mu_w, count + 1
        assert type(state) is State
        np.testing.assert_allclose(np.asarray(params["w"]), w, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(state.mu["w"]), mu_w, rtol=1e-6)
        assert int(state.count) == count
    assert f._cache_size() == 1


def test_namedtuple_types_and_plain_tuples_do_not_share_an_executable():
    f = fg.jit(lambda s: tree_util.tree_map(lambda a: a * 2, s))
    leaves = (fnp.asarray(1.0), fnp.asarray(2.0))
    for tree in (State(*leaves), Other(*leaves), leaves, State(*leaves), leaves):
        out = f(tree)
        assert type(out) is type(tree)
        assert [float(v) for v in out] == [2.0, 4.0]
    assert f._cache_size() == 3


def test_registered_node_aux_data_is_part_of_the_key():
    f = fg.jit(lambda s: s.value * s.scale if s.scale is not None else s.value)
    x = fnp.arange(3.0)
    for scale, expected in ((2.0, [0, 2, 4]), (3.0, [0, 3, 6]), (2.0, [0, 2, 4])):
        np.testing.assert_allclose(np.asarray(f(Scaled(x, scale))), expected)
    np.testing.assert_allclose(np.asarray(f(Scaled(x, None))), [0, 1, 2])
    assert f._cache_size() == 3


def test_unhashable_aux_data_takes_the_general_path():
    f = fg.jit(lambda s: s.value + s.value)
    x = fnp.arange(2.0)
    for _ in range(3):  # no fast-path entry can hold it; every call is right
        np.testing.assert_allclose(np.asarray(f(Scaled(x, [1, 2]))), [0.0, 2.0])
    np.testing.assert_allclose(np.asarray(f(Scaled(x * 3, [1, 2]))), [0.0, 6.0])
