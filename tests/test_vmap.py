"""vmap's API: in_axes/out_axes forms, nesting, unbatched values staying unbatched, errors;
each checked against a Python loop."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp


def _loop(f, xs, axes, size):
    outs = []
    for i in range(size):
        args = [x if a is None else np.take(x, i, axis=a) for x, a in zip(xs, axes)]
        outs.append(np.asarray(f(*args)))
    return np.stack(outs)


@given(st.sampled_from([0, 1, -1, None]), st.sampled_from([0, 1, -1]))
def test_in_axes_forms_match_loop(ax_w, ax_x):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 3)).astype(np.float32)
    x = rng.standard_normal((3, 3)).astype(np.float32)

    def f(w, x):
        return fnp.tanh(w * 2.0 + fnp.sin(x))

    got = fg.vmap(f, in_axes=(ax_w, ax_x))(w, x)
    np.testing.assert_allclose(np.asarray(got), _loop(f, [w, x], [ax_w, ax_x], 3), rtol=1e-6)


def test_out_axes_and_pytrees():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = fg.vmap(lambda d: {"a": d["x"] * 2, "b": d["x"].sum()}, in_axes=({"x": 1},),
                  out_axes={"a": 1, "b": 0})({"x": x})
    np.testing.assert_array_equal(np.asarray(out["a"]), x * 2)
    np.testing.assert_array_equal(np.asarray(out["b"]), x.sum(0))
    y = fg.vmap(lambda v: v + 1, out_axes=-1)(x)
    np.testing.assert_array_equal(np.asarray(y), (x + 1).T)


def test_nested_vmap_is_an_outer_product():
    a = np.arange(3, dtype=np.float32)
    b = np.arange(4, dtype=np.float32)
    out = fg.vmap(fg.vmap(lambda x, y: x * y, in_axes=(None, 0)), in_axes=(0, None))(a, b)
    np.testing.assert_array_equal(np.asarray(out), np.outer(a, b))


def test_unbatched_values_stay_unbatched():
    w = np.ones((4, 4), np.float32)
    xs = np.ones((8, 4), np.float32)
    jaxpr = fg.make_jaxpr(fg.vmap(lambda x: fnp.tanh(w @ x)))(xs)
    text = str(jaxpr)
    assert "broadcast_in_dim" not in text, text  # w is never broadcast along the batch
    out = fg.vmap(lambda x: fnp.tanh(w @ x))(xs)
    np.testing.assert_allclose(np.asarray(out), np.tanh(xs @ w.T), rtol=1e-6)
    # an output that does not depend on the mapped input is broadcast at the end
    out = fg.vmap(lambda x: w.sum())(xs)
    assert out.shape == (8,)


def test_axis_size_without_mapped_args():
    out = fg.vmap(lambda: fnp.ones(2), in_axes=(), axis_size=3)()
    assert out.shape == (3, 2)


def test_per_example_gradients():
    rng = np.random.default_rng(1)
    w = rng.standard_normal(5).astype(np.float32)
    xs = rng.standard_normal((6, 5)).astype(np.float32)
    ys = rng.standard_normal(6).astype(np.float32)

    def loss(w, x, y):
        return (fnp.dot(w, x) - y) ** 2

    got = fg.vmap(fg.grad(loss), in_axes=(None, 0, 0))(w, xs, ys)
    expected = np.stack([2 * (w @ x - y) * x for x, y in zip(xs, ys)])
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-5, atol=1e-5)


def test_errors_name_arguments_and_sizes():
    with pytest.raises(ValueError, match="inconsistent sizes.*size 3.*size 4"):
        fg.vmap(lambda a, b: a + b)(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="axis 2"):
        fg.vmap(lambda a: a, in_axes=2)(np.ones((3, 3)))
    with pytest.raises(ValueError, match="in_axes must be an int, None, or a tuple"):
        fg.vmap(lambda a, b: a, in_axes=(0,))(np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="at least one non-None"):
        fg.vmap(lambda a: a, in_axes=None)(np.ones(3))
