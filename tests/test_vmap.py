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
    out = fg.vmap(
        lambda d: {"a": d["x"] * 2, "b": d["x"].sum()},
        in_axes=({"x": 1},),
        out_axes={"a": 1, "b": 0},
    )({"x": x})
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
    with pytest.raises(ValueError, match="(?s)inconsistent sizes.*size 3.*size 4"):
        fg.vmap(lambda a, b: a + b)(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="axis 2"):
        fg.vmap(lambda a: a, in_axes=2)(np.ones((3, 3)))
    with pytest.raises(ValueError, match="in_axes must be an int, None, or a tuple"):
        fg.vmap(lambda a, b: a, in_axes=(0,))(np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="at least one non-None"):
        fg.vmap(lambda a: a, in_axes=None)(np.ones(3))


# -- issue 15: axis specs validated as JAX does, errors naming parameters and leaf paths ---------


@given(rank=st.integers(0, 3), out_axis=st.integers(-6, 6), size=st.integers(1, 3))
def test_issue15_out_axes_in_range_moves_the_axis_out_of_range_raises(rank, out_axis, size):
    """Issue 15 item 8: out_axes=3 on 1-d outputs returned shape (2, 3) (3 wrapped modulo 2).
    An out_axes within [-(r+1), r+1) for a per-example rank r places the mapped axis as
    np.moveaxis does; anything else raises, naming the output and the range."""
    x = np.arange(size * 2**rank, dtype=np.float32).reshape((size,) + (2,) * rank)
    f = fg.vmap(lambda a: a * 2.0, out_axes=out_axis)
    if -(rank + 1) <= out_axis <= rank:
        np.testing.assert_array_equal(np.asarray(f(x)), np.moveaxis(x * 2, 0, out_axis))
    else:
        with pytest.raises(
            ValueError,
            match=rf"out_axes={out_axis} is out of range for output: "
            rf"with the mapped axis it has rank {rank + 1}",
        ):
            f(x)


def test_issue15_out_axes_out_of_range_names_the_output_path():
    with pytest.raises(ValueError, match=r"out_axes=2 is out of range for output\['b'\]"):
        fg.vmap(lambda a: {"a": a * fnp.ones((2, 3)), "b": a}, out_axes={"a": 2, "b": 2})(
            np.ones(4)
        )


@given(rank=st.integers(1, 3), in_axis=st.integers(-5, 5))
def test_issue15_in_axes_negative_normalised_out_of_range_raises(rank, in_axis):
    x = np.arange(3**rank, dtype=np.float32).reshape((3,) * rank)
    f = fg.vmap(lambda a: a + 1.0, in_axes=in_axis)
    if -rank <= in_axis < rank:
        np.testing.assert_array_equal(np.asarray(f(x)), np.moveaxis(x + 1, in_axis, 0))
    else:
        with pytest.raises(
            ValueError, match=f"map argument a along axis {in_axis}, .* is only {rank}"
        ):
            f(x)


@pytest.mark.parametrize("spec", [0.5, "a", True, 1.0, np.float32(0), object()])
def test_issue15_non_int_axes_raise_type_error_not_recursion(spec):
    """Issue 15 item 13: in_axes=0.5 raised RecursionError. Floats, strings and bools are
    refused when vmap is applied (as JAX), at the top or nested, in in_axes and out_axes."""
    with pytest.raises(TypeError, match="in_axes must be an int, None, or a tuple"):
        fg.vmap(lambda a: a, in_axes=spec)
    with pytest.raises(TypeError, match=r"in_axes\[1\]\['w'\] is"):
        fg.vmap(lambda a, b: a, in_axes=(0, {"w": spec}))
    with pytest.raises(TypeError, match="out_axes must be an int, None, or a"):
        fg.vmap(lambda a: a, out_axes=spec)
    with pytest.raises(TypeError, match=r"out_axes\[0\] is"):
        fg.vmap(lambda a: (a, a), out_axes=[spec, 0])


def test_issue15_numpy_int_axes_are_accepted():
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    out = fg.vmap(lambda a: a * 2, in_axes=np.int64(1), out_axes=np.int32(0))(x)
    np.testing.assert_array_equal(np.asarray(out), (x * 2).T)


def test_issue15_list_in_axes_is_a_tuple_at_the_top_only():
    """As JAX: a top-level list in_axes is read as the tuple of per-argument entries; nested,
    a list is a pytree node that must match a list argument (not a tuple)."""
    x = np.arange(3.0, dtype=np.float32)
    out = fg.vmap(lambda a, b: a + b, in_axes=[0, None])(x, 1.0)
    np.testing.assert_array_equal(np.asarray(out), x + 1)
    out = fg.vmap(lambda a, b: a + b[0] * b[1], in_axes=(0, [0, None]))(x, [x, 2.0])
    np.testing.assert_array_equal(np.asarray(out), x + x * 2)
    with pytest.raises(
        ValueError,
        match=r"in_axes\[1\] is a list of length 2 where "
        r"argument b is a tuple of length 2",
    ):
        fg.vmap(lambda a, b: a, in_axes=(0, [0, None]))(x, (x, 1.0))
    with pytest.raises(
        ValueError,
        match=r"in_axes\[0\] is a dict with keys \['y'\] where "
        r"argument a is a dict with keys \['x'\]",
    ):
        fg.vmap(lambda a: a["x"], in_axes=({"y": 0},))({"x": x})
    with pytest.raises(
        ValueError,
        match=r"out_axes is a tuple of length 3 where output is a "
        r"tuple of length 2",
    ):
        fg.vmap(lambda a: (a, a), out_axes=(0, 0, 0))(x)
    with pytest.raises(
        ValueError,
        match=r"in_axes\[0\] is a tuple of length 1 where argument a "
        r"is a leaf \(an array\)",
    ):
        fg.vmap(lambda a: a, in_axes=((0,),))(x)


def test_issue15_size_mismatch_names_parameters_and_leaf_paths():
    """Issue 15 item 18: 'argument leaf 0/1' became the parameter names with the pytree path of
    each leaf, its axis, type and size, grouped by size."""

    def f(weights, batch, *rest):
        return batch["x"] + weights

    with pytest.raises(ValueError) as e:
        fg.vmap(f, in_axes=(None, 0, 0, 1))(
            np.ones(3), {"x": np.ones(4), "y": np.ones(4)}, np.ones(4), np.ones((2, 5))
        )
    msg = str(e.value)
    assert "vmap(f) got inconsistent sizes for the mapped axes" in msg
    assert (
        "size 4: axis 0 of argument batch['x'] (f32[4]), axis 0 of argument batch['y'] "
        "(f32[4]), axis 0 of argument rest[0] (f32[4])" in msg
    )
    assert "size 5: axis 1 of argument rest[1] (f32[2,5])" in msg
    assert "weights" not in msg  # not mapped
    with pytest.raises(ValueError, match=r"(?s)size 3: axis 0 of argument a.*axis_size=4"):
        fg.vmap(lambda a: a, axis_size=4)(np.ones(3))


def test_issue15_non_array_leaves_and_bad_options_are_clear():
    with pytest.raises(TypeError, match=r"vmap\(<lambda>\): argument b\[1\] is a str"):
        fg.vmap(lambda a, b: a)(np.ones(3), (np.ones(3), "x"))
    with pytest.raises(TypeError, match=r"output\[1\] is a str"):
        fg.vmap(lambda a: (a, "x"))(np.ones(3))
    with pytest.raises(TypeError, match="vmap: expected a callable value, got 3"):
        fg.vmap(3)
    with pytest.raises(TypeError, match="axis_size must be a non-negative int"):
        fg.vmap(lambda a: a, axis_size=2.5)
    with pytest.raises(ValueError, match=r"out_axes None for output\[0\], which is batched"):
        fg.vmap(lambda a: (a, a), out_axes=(None, 0))(np.ones(3))


def test_issue15_keyword_arguments_are_mapped_along_axis_0():
    """As JAX: keyword arguments are mapped over their leading axis (they were passed unmapped,
    so a + b broadcast to a (3, 3) result)."""
    a = np.arange(3.0, dtype=np.float32)
    b = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    out = fg.vmap(lambda x, y=None: x * y.sum())(a, y=b)
    np.testing.assert_array_equal(np.asarray(out), a * b.sum(axis=1))
    out = fg.vmap(lambda x, y: x * y["k"][1], in_axes=(None,))(2.0, y={"k": (a, b[:, 0])})
    np.testing.assert_array_equal(np.asarray(out), 2.0 * b[:, 0])
    with pytest.raises(
        ValueError,
        match="(?s)size 3: axis 0 of argument x.*size 2: axis 0 of "
        r"keyword argument y\['k'\]",
    ):
        fg.vmap(lambda x, y: x)(a, y={"k": np.ones(2)})


def test_issue15_unmapped_leaves_reach_the_function_unchanged():
    """As JAX: a leaf with in_axes None is passed as it is, so a Python int can be a static
    argument of an inner jit (it became an Array: "Non-hashable static arguments"), and a
    non-array unmapped value is no error."""
    x = np.arange(3.0, dtype=np.float32)
    scale = fg.jit(lambda a, n: a * n, static_argnums=1)
    np.testing.assert_array_equal(np.asarray(fg.vmap(scale, in_axes=(0, None))(x, 2)), x * 2)
    seen = []

    def f(a, tag, n):
        seen.append((type(tag), type(n)))
        return a * len(tag) + n

    np.testing.assert_array_equal(
        np.asarray(fg.vmap(f, in_axes=(0, None, None))(x, "ab", 1)), x * 2 + 1
    )
    assert seen == [(str, int)]
    with pytest.raises(TypeError, match=r"argument tag is a str"):
        fg.vmap(f, in_axes=(0, 0, None))(x, "ab", 1)
