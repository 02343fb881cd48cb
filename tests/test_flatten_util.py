"""fungrad.flatten_util.ravel_pytree against numpy (values), JAX's promotion table (dtypes,
expected values produced by JAX 0.10.2), finite differences (grad), a Python loop (vmap) and
eager evaluation (jit)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.flatten_util import ravel_pytree
from fungrad.testing import check_grads
from tests.helpers import assert_array

shapes = st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple)


@settings(max_examples=30, deadline=None)
@given(st.lists(shapes, min_size=1, max_size=4), st.integers(0, 2**31 - 1))
def test_values_and_roundtrip_match_numpy(leaf_shapes, seed):
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal(s).astype(np.float32) for s in leaf_shapes]
    tree = {"p": xs[0], "rest": tuple(xs[1:])}
    flat, unravel = ravel_pytree(tree)
    want = np.concatenate([np.ravel(x) for x in [tree["p"], *tree["rest"]]])
    assert_array(flat, want, dtype=np.float32, rtol=0, atol=0)
    back = unravel(flat)
    assert fg.tree_util.tree_structure(back) == fg.tree_util.tree_structure(tree)
    for got, x in zip(fg.tree_util.tree_leaves(back), fg.tree_util.tree_leaves(tree)):
        assert_array(got, x, dtype=np.float32, rtol=0, atol=0)


I32, U8, F16, F32 = np.int32, np.uint8, np.float16, np.float32


@pytest.mark.parametrize(
    "leaves, flat_dtype, leaf_dtypes",
    [
        ([1, 2.0], F32, [I32, F32]),  # Python scalars
        ([np.ones(2, I32), np.ones(2, U8)], I32, [I32, U8]),
        ([np.ones((2, 2), I32), np.zeros(3, F16), True], F16, [I32, F16, np.bool_]),
        ([np.ones(2, np.float64)], F32, [F32]),  # no x64: 32 bits
        ([np.ones(1, np.int8), np.ones(1, U8)], np.int16, [np.int8, U8]),
    ],
)
def test_mixed_dtypes_promote_and_unravel_restores_them(leaves, flat_dtype, leaf_dtypes):
    flat, unravel = ravel_pytree(leaves)
    want = np.concatenate([np.ravel(np.asarray(x)).astype(flat_dtype) for x in leaves])
    assert_array(flat, want, dtype=flat_dtype)
    for got, x, dt in zip(unravel(flat), leaves, leaf_dtypes):
        assert_array(got, np.asarray(x).astype(dt), dtype=dt)


def test_single_dtype_keeps_weak_type_and_unravel_is_dtype_polymorphic():
    flat, unravel = ravel_pytree([1.0, 2.0])
    assert_array(flat, [1.0, 2.0], dtype=np.float32, weak_type=True)
    out = unravel(fnp.arange(2, dtype=fnp.int32))
    assert_array(out[0], 0, dtype=np.int32)
    assert_array(out[1], 1, dtype=np.int32)


def test_empty_tree_gives_empty_float32():
    flat, unravel = ravel_pytree({"a": None, "b": ()})
    assert_array(flat, np.zeros(0, np.float32), dtype=np.float32)
    assert unravel(flat) == {"a": None, "b": ()}
    flat, unravel = ravel_pytree([fnp.zeros((0, 3))])
    assert flat.shape == (0,) and unravel(flat)[0].shape == (0, 3)


def test_unravel_errors_and_hashability():
    flat, unravel = ravel_pytree([fnp.ones(2), fnp.ones(1, fnp.int32)])
    with pytest.raises(TypeError, match="unravel: given an array of dtype int32.*float32"):
        unravel(flat.astype(fnp.int32))
    with pytest.raises(ValueError, match=r"expected a vector of shape \(3,\).*got shape \(4,\)"):
        unravel(fnp.zeros(4))
    with pytest.raises(TypeError, match=r"ravel_pytree: the leaf at pytree\['s'\] is a str"):
        ravel_pytree({"s": "text"})
    again = ravel_pytree([fnp.zeros(2), fnp.zeros(1, fnp.int32)])[1]
    assert unravel == again and hash(unravel) == hash(again)
    assert unravel != ravel_pytree([fnp.zeros(3), fnp.zeros(1, fnp.int32)])[1]


def test_jit_matches_eager():
    tree = {"w": fnp.arange(6.0).reshape(2, 3), "b": fnp.arange(3, dtype=fnp.int32)}
    flat, unravel = ravel_pytree(tree)
    jflat = fg.jit(lambda t: ravel_pytree(t)[0])(tree)
    assert_array(jflat, np.asarray(flat), dtype=np.float32, rtol=0, atol=0)
    back = fg.jit(unravel)(flat)
    assert_array(back["b"], [0, 1, 2], dtype=np.int32)
    assert_array(back["w"], np.asarray(tree["w"]), dtype=np.float32)


def test_grads_through_ravel_and_unravel():
    def loss(w, b):
        flat, _ = ravel_pytree({"w": w, "b": b})
        return fnp.sum(fnp.sin(flat) * fnp.arange(flat.shape[0], dtype=flat.dtype))

    check_grads(loss, (fnp.array([[0.1, 0.2], [0.3, 0.4]]), fnp.array([0.5, -0.6])), order=2)

    _, unravel = ravel_pytree({"w": fnp.zeros((2, 2)), "b": fnp.zeros(2)})

    def loss2(v):
        t = unravel(v)
        return fnp.sum(t["w"] @ t["b"])

    check_grads(loss2, (fnp.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6]),), order=1)


def test_vmap_matches_loop():
    ws, bs = np.arange(12.0).reshape(4, 3), np.arange(4.0)[:, None] * np.ones((4, 2))
    out = fg.vmap(lambda w, b: ravel_pytree((w, b))[0])(fnp.asarray(ws), fnp.asarray(bs))
    want = np.stack([np.concatenate([w, b]) for w, b in zip(ws, bs)])
    assert_array(out, want, dtype=np.float32)
    _, unravel = ravel_pytree((fnp.zeros(3), fnp.zeros(2)))
    vs = np.arange(20.0).reshape(4, 5)
    w, b = fg.vmap(unravel)(fnp.asarray(vs))
    assert_array(w, vs[:, :3])
    assert_array(b, vs[:, 3:])


def test_x64_keeps_64_bit_leaves(x64):
    flat, unravel = ravel_pytree([np.ones(2, np.float64), np.arange(2, dtype=np.int64), 1])
    assert_array(flat, [1.0, 1.0, 0.0, 1.0, 1.0], dtype=np.float64)
    a, b, c = unravel(flat)
    assert_array(a, [1.0, 1.0], dtype=np.float64)
    assert_array(b, [0, 1], dtype=np.int64)
    assert_array(c, 1, dtype=np.int64)
