"""JAX's top-level names in fungrad: eval_shape / ShapeDtypeStruct, device_get, typeof,
devices and processes, Array.device(s), named_call / named_scope, ensure_compile_time_eval,
fungrad.test_util, fungrad.tree, and jax.ad_checkpoint's checkpoint_name, policies and
print_saved_residuals."""

from __future__ import annotations

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.ad_checkpoint import checkpoint_name, print_saved_residuals, saved_residuals
from tests.helpers import assert_array

F32 = np.float32


# -- eval_shape / ShapeDtypeStruct -------------------------------------------------------------


def test_shape_dtype_struct():
    s = fg.ShapeDtypeStruct([2, 3], np.float32)
    assert s.shape == (2, 3) and s.dtype == np.float32 and s.ndim == 2 and s.size == 6
    assert repr(s) == "ShapeDtypeStruct(shape=(2, 3), dtype=float32)"
    assert s == fg.ShapeDtypeStruct((2, 3), fnp.float32) and hash(s) == hash(
        fg.ShapeDtypeStruct((2, 3), "float32")
    )
    assert s != fg.ShapeDtypeStruct((2, 3), np.float32, weak_type=True)
    with pytest.raises(TypeError, match="shape must be a sequence of integers"):
        fg.ShapeDtypeStruct((2.5,), np.float32)
    with pytest.raises(ValueError, match="dtype must be given"):
        fg.ShapeDtypeStruct((2,), None)


def test_eval_shape_matches_the_computation_without_running_it():
    calls = []

    def f(x, params):
        calls.append(1)
        h = fnp.tanh(x @ params["w"] + params["b"])
        return {"out": h.sum(axis=0), "n": x.shape[0]}, h.astype(np.int32)

    x = fg.ShapeDtypeStruct((5, 3), np.float32)
    params = {"w": np.ones((3, 4), F32), "b": fg.ShapeDtypeStruct((4,), np.float32)}
    (d, i) = fg.eval_shape(lambda x, p: ({"out": f(x, p)[0]["out"]}, f(x, p)[1]), x, params)
    assert d["out"] == fg.ShapeDtypeStruct((4,), np.float32)
    assert i == fg.ShapeDtypeStruct((5, 4), np.int32)
    real = f(np.ones((5, 3), F32), {"w": np.ones((3, 4), F32), "b": np.ones(4, F32)})
    assert real[0]["out"].shape == d["out"].shape and real[1].dtype == i.dtype
    assert fg.eval_shape(lambda v: v * 2, 1.0) == fg.ShapeDtypeStruct(
        (), np.float32, weak_type=True
    )
    assert fg.eval_shape(fnp.sum, np.zeros((2, 0))).shape == ()
    with pytest.raises(TypeError, match="not an array"):
        fg.eval_shape(lambda v: "s", 1.0)
    with pytest.raises(TypeError, match="eval_shape"):
        fg.eval_shape(3, 1.0)


def test_eval_shape_with_x64_dtypes_canonicalizes(x64):
    out = fg.eval_shape(lambda v: v + 1, fg.ShapeDtypeStruct((2,), np.float64))
    assert out.dtype == np.float64


# -- device and process queries -------------------------------------------------------------------


def test_devices_and_processes():
    x = fnp.arange(3.0)
    assert x.device == fg.devices("cpu")[0] and x.devices() == {x.device}
    assert x.addressable_data(0) is x
    with pytest.raises(ValueError, match="single shard"):
        x.addressable_data(1)
    assert fg.default_backend() == "cpu"
    assert fg.local_devices() == [x.device] and fg.device_count() == 1
    assert fg.local_device_count() == 1 and fg.process_index() == 0 and fg.process_count() == 1
    with pytest.raises(ValueError, match="single process"):
        fg.local_devices(process_index=1)


def test_device_get_and_typeof():
    tree = {"a": fnp.arange(3), "b": 2.5, "c": "text"}
    got = fg.device_get(tree)
    assert type(got["a"]) is np.ndarray and got["a"].dtype == np.int32
    assert got["b"] == 2.5 and got["c"] == "text"
    with pytest.raises(TypeError, match="device_get: got a traced value"):
        fg.jit(fg.device_get)(np.ones(2))
    assert fg.typeof(fnp.ones((2, 3))) == fg.ShapedArray((2, 3), np.dtype(np.float32))
    assert fg.typeof(1.0).weak_type and fg.typeof(np.int8(1)).dtype == np.int8
    seen = []
    fg.jit(lambda v: seen.append(fg.typeof(v)) or v)(np.ones(4, F32))
    assert seen[0].shape == (4,)
    with pytest.raises(TypeError, match="typeof"):
        fg.typeof("x")


# -- named_call / named_scope -------------------------------------------------------------------


def test_named_call_and_named_scope_compute_the_same():
    def f(x):
        with fg.named_scope("layer"):
            return fnp.sin(x) * 2

    g = fg.named_call(f, name="my_layer")
    assert g.__name__ == "my_layer"
    x = np.linspace(0, 1, 5, dtype=F32)
    assert_array(g(x), np.sin(x) * 2)
    assert_array(fg.jit(g)(x), g(x))
    assert_array(fg.grad(lambda v: g(v).sum())(x), 2 * np.cos(x))
    assert str(fg.make_jaxpr(g)(x)) == str(fg.make_jaxpr(f)(x))
    with pytest.raises(TypeError, match="named_scope"):
        with fg.named_scope(3):
            pass
    with pytest.raises(TypeError, match="name must be a string"):
        fg.named_call(f, name=1)


# -- ensure_compile_time_eval -------------------------------------------------------------------


def test_ensure_compile_time_eval_inside_jit():
    kinds = []

    @fg.jit
    def f(x):
        with fg.ensure_compile_time_eval():
            y = fnp.sin(3.0)
            kinds.append(type(y))
            positive = y > 0
            z = fnp.cos(x)  # depends on the argument: still traced
            kinds.append(type(z))
        if positive:  # a concrete bool, usable in Python control flow
            return x + y + z
        return x

    x = np.array([0.5, 1.0], F32)
    assert_array(f(x), x + np.sin(F32(3.0)) + np.cos(x), rtol=1e-6)
    assert kinds[0] is fg.Array and kinds[1] is not fg.Array
    # outside any transform it changes nothing; under grad concrete values stay concrete
    with fg.ensure_compile_time_eval():
        assert float(fnp.sin(0.0)) == 0.0
    g = fg.grad(lambda v: f(v).sum())(x)
    assert_array(g, 1 - np.sin(x), rtol=1e-6)


# -- fungrad.test_util and fungrad.tree ---------------------------------------------------------


def test_test_util_has_jax_spellings():
    from fungrad import test_util

    x = np.array([0.3, 1.2])
    test_util.check_grads(fnp.sin, (x,), order=2, modes=["fwd", "rev"])
    test_util.check_jvp(fnp.sin, lambda p, t: fg.jvp(fnp.sin, p, t), (x,))
    test_util.check_vjp(fnp.sin, lambda *a: fg.vjp(fnp.sin, *a), (x,))

    @fg.custom_jvp
    def wrong(v):
        return fnp.sin(v)

    wrong.defjvp(lambda p, t: (fnp.sin(p[0]), 2 * t[0]))
    with pytest.raises(AssertionError):
        test_util.check_grads(wrong, (x,), order=1, modes=["fwd"])


def test_tree_module_is_exported():
    assert fg.tree.map(lambda v: v + 1, {"a": 1}) == {"a": 2}
    assert fg.tree.leaves([1, (2, 3)]) == [1, 2, 3]


# -- ad_checkpoint --------------------------------------------------------------------------------


def _layer(x):
    y = checkpoint_name(fnp.sin(x), "y")
    z = checkpoint_name(fnp.cos(y) * x, "z")
    return fnp.sum(fnp.exp(z) * y)


def _n_residuals(policy, x):
    return len(saved_residuals(fg.checkpoint(_layer, policy=policy), x))


def test_checkpoint_name_is_the_identity_outside_checkpoint():
    x = np.linspace(-1, 1, 4, dtype=F32)
    assert_array(checkpoint_name(x, "a"), x)
    tree = checkpoint_name({"u": x, "v": 2.0}, "t")
    assert_array(tree["u"], x)
    assert float(tree["v"]) == 2.0
    assert "name[name=y]" in str(fg.make_jaxpr(_layer)(x))
    assert_array(fg.vmap(lambda v: checkpoint_name(v, "a") * 2)(x), 2 * x)
    assert_array(fg.jit(lambda v: checkpoint_name(v, "a") * 2)(x), 2 * x)
    fg.testing.check_grads(_layer, (x.astype(np.float64),), order=2)
    with pytest.raises(TypeError, match="name must be a string"):
        checkpoint_name(x, 3)


def test_name_policies_choose_the_saved_residuals():
    x = np.linspace(-1, 1, 4, dtype=F32)
    P = fg.checkpoint_policies
    # the argument is always saved; each named value adds one residual
    assert _n_residuals(P.nothing_saveable, x) == 1
    assert _n_residuals(P.save_only_these_names("y"), x) == 2
    assert _n_residuals(P.save_only_these_names("y", "z"), x) == 3
    assert _n_residuals(P.save_any_names_but_these("y"), x) == 2
    assert _n_residuals(P.save_only_these_names("other"), x) == 1
    everything = _n_residuals(P.everything_saveable, x)
    # y itself is recomputed, from the saved output of sin: no fewer residuals than that
    assert 1 < _n_residuals(P.save_anything_except_these_names("y"), x) <= everything
    both = P.save_from_both_policies(P.save_only_these_names("y"), P.save_only_these_names("z"))
    assert _n_residuals(both, x) == 3
    offload = P.save_and_offload_only_these_names(
        names_which_can_be_saved=["y"], names_which_can_be_offloaded=["z"]
    )
    assert _n_residuals(offload, x) == 3
    with pytest.raises(TypeError, match="names must be strings"):
        P.save_only_these_names(1)


def test_every_policy_gives_the_same_gradient():
    x = np.linspace(-1, 1, 4, dtype=F32)
    ref = np.asarray(fg.grad(_layer)(x))
    P = fg.checkpoint_policies
    for policy in (
        P.nothing_saveable,
        P.everything_saveable,
        P.save_only_these_names("y"),
        P.save_any_names_but_these("z"),
        P.dots_saveable,
        P.checkpoint_dots_with_no_batch_dims,
        P.offload_dot_with_no_batch_dims(),
    ):
        f = fg.checkpoint(_layer, policy=policy)
        assert_array(fg.grad(f)(x), ref, rtol=1e-6)
        assert_array(fg.jit(fg.grad(f))(x), ref, rtol=1e-5)
        rows = np.stack([x, 2 * x])
        loop = np.stack([np.asarray(fg.grad(f)(r)) for r in rows])
        assert_array(fg.vmap(fg.grad(f))(rows), loop, rtol=1e-6)


def test_policy_answers_and_print_saved_residuals(capsys):
    from fungrad.ad_checkpoint import Offloadable, Recompute, Saveable

    assert Saveable and not Recompute and Offloadable("device", "pinned_host")
    x = np.linspace(-1, 1, 4, dtype=F32)
    policy = lambda prim, *a, **p: Saveable if prim.name == "name" else Recompute  # noqa: E731
    assert _n_residuals(policy, x) == 3
    print_saved_residuals(
        fg.checkpoint(_layer, policy=fg.checkpoint_policies.save_only_these_names("y")), x
    )
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("f32[4] ") for line in lines)
    assert "f32[4] from the argument x" in lines and "f32[4] named 'y'" in lines
    print_saved_residuals(lambda x, p: fnp.sum(fnp.sin(x * p["w"])), x, {"w": x})
    lines = capsys.readouterr().out.splitlines()
    assert {"f32[4] from the argument p['w']", "f32[4] from the argument x"} <= set(lines)


def test_lax_names_for_top_level_use():
    # fg.lax gained JAX's names used by these programs (spot check the public surface)
    for name in (
        "associative_scan",
        "reduce_precision",
        "conv_general_dilated_patches",
        "top_k",
        "conv_transpose",
        "padtype_to_pads",
    ):
        assert callable(getattr(lax, name))


# -- linear_transpose, closure_convert, custom_gradient and small names -------------------------


def test_linear_transpose_is_the_adjoint():
    a = np.random.default_rng(0).standard_normal((3, 4)).astype(F32)

    def f(x, y):
        return a @ x + 2 * y, x.sum()

    f_t = fg.linear_transpose(f, fg.ShapeDtypeStruct((4,), np.float32), np.ones(3, F32))
    ct1, ct2 = np.arange(3.0, dtype=F32), F32(5.0)
    x_ct, y_ct = f_t((ct1, ct2))
    assert_array(x_ct, a.T @ ct1 + 5.0, rtol=1e-5)
    assert_array(y_ct, 2 * ct1)
    # <f(x), ct> == <x, f_t(ct)> for a random x: the defining identity
    x = np.random.default_rng(1).standard_normal(4).astype(F32)
    lhs = float(np.dot(np.asarray(f(x, np.zeros(3, F32))[0]), ct1))
    assert lhs == pytest.approx(float(np.dot(x, np.asarray(f_t((ct1, F32(0)))[0]))), rel=1e-5)
    # an input the output does not depend on gets a zero cotangent
    assert_array(fg.linear_transpose(lambda x, y: 3 * x, 1.0, np.ones(2, F32))(2.0)[1], np.zeros(2))
    assert_array(fg.jit(lambda c: fg.linear_transpose(lambda v: v[::-1], x)(c)[0])(x), x[::-1])
    with pytest.raises(TypeError, match="Transpose rule .* 'sin'"):
        fg.linear_transpose(fnp.sin, 1.0)(1.0)
    with pytest.raises(TypeError, match="floating point"):
        fg.linear_transpose(lambda v: v, np.arange(3))


def test_closure_convert_makes_closed_over_tracers_explicit():
    def g(x):
        w = x * 3
        converted, consts = fg.closure_convert(lambda y: y * w, 1.0)
        assert len(consts) == 1
        return converted(2.0, *consts)

    assert float(fg.grad(g)(1.0)) == 6.0
    assert float(fg.jit(fg.grad(g))(1.0)) == 6.0
    converted, consts = fg.closure_convert(lambda y: y * 2, np.ones(3, F32))
    assert consts == []
    assert_array(converted(np.arange(3.0, dtype=F32)), [0.0, 2, 4])


def test_custom_gradient():
    @fg.custom_gradient
    def clipped_sin(x):
        return fnp.sin(x), lambda g: (fnp.clip(g * fnp.cos(x), -0.1, 0.1),)

    x = np.array([0.0, 1.0, 2.0], F32)
    assert_array(clipped_sin(x), np.sin(x))
    ref = np.clip(np.cos(x), -0.1, 0.1)
    grad = fg.grad(lambda v: clipped_sin(v).sum())
    assert_array(grad(x), ref)
    assert_array(fg.jit(grad)(x), ref)
    loop = np.stack([np.asarray(grad(r)) for r in np.stack([x, 2 * x])])
    assert_array(fg.vmap(grad)(np.stack([x, 2 * x])), loop)

    @fg.custom_gradient
    def two_args(a, b):
        return a * b, lambda g: (g * 10.0, g * 20.0)

    assert fg.grad(two_args, argnums=(0, 1))(2.0, 3.0) == (10.0, 20.0)


def test_small_top_level_names(capsys):
    x = fnp.arange(3.0)
    assert fg.copy_to_host_async(x) is x
    assert fg.effects_barrier() is None
    text = fg.print_environment_info(return_string=True)
    assert "fungrad:" in text and "numpy:" in text
    fg.print_environment_info()
    assert capsys.readouterr().out == text
    assert fg.float0.itemsize == 0
    assert fg.process_indices() == [0]
