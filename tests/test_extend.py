"""JAX's extension points that libraries built on JAX import (flax, optax through
``fungrad.compat``): ``jax.extend`` (linear_util, core, source_info_util), ``jax.api_util``,
``jax.interpreters.partial_eval``, ``jax.experimental.layout``, and the smaller signature
additions they call (``einsum``'s ``_dot_general``, ``scan``'s ``_split_transpose``,
``zeros_like`` of a ShapeDtypeStruct, aval shardings). Expected values are numpy's, or JAX
0.10.2's recorded as literals."""

import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import api_util, core, tree_util
from fungrad.experimental.layout import Format, Layout, with_layout_constraint
from fungrad.extend import core as ext_core
from fungrad.extend import linear_util as lu
from fungrad.interpreters import partial_eval as pe

# -- linear_util and api_util ------------------------------------------------------------------


def test_flatten_fun_flattens_inputs_and_outputs():
    wf = lu.wrap_init(lambda x, y: {"s": x + y, "t": (x, y)})
    tree = tree_util.tree_structure(((1, 2), {}))
    flat, out_tree = api_util.flatten_fun(wf, tree)
    assert flat.call_wrapped(1, 2) == [3, 1, 2]
    assert out_tree() == tree_util.tree_structure({"s": 0, "t": (0, 0)})
    nokw, out_tree2 = api_util.flatten_fun_nokwargs(
        lu.wrap_init(lambda a, b: [a, (a, b)]), tree.children()[0]
    )
    assert nokw.call_wrapped(5, 6) == [5, 5, 6]
    assert out_tree2().num_leaves == 3


def test_store_is_read_after_the_call_and_written_once():
    flat, thunk = api_util.flatten_fun_nokwargs(
        lu.wrap_init(lambda a: a), tree_util.tree_structure((0,))
    )
    with pytest.raises(lu.StoreException, match="empty"):
        thunk()
    flat.call_wrapped(1)
    with pytest.raises(lu.StoreException, match="occupied"):
        flat.call_wrapped(1)
    eq = lu.EqualStore()
    eq.store(3)
    eq.store(3)  # an equal value may be stored again
    with pytest.raises(lu.StoreException, match="not equal"):
        eq.store(4)


def test_generator_transformations_and_params():
    @lu.transformation
    def scale(k, *args):
        out = yield args, {}
        yield out * k

    @lu.transformation_with_aux
    def count(*args):
        out = yield args, {}
        yield out, len(args)

    wf = lu.wrap_init(lambda x, y, bias: x * y + bias, {"bias": 1})
    scaled = scale(wf, 10)
    counted, n = count(scaled)
    assert counted.call_wrapped(2, 3) == 70 and n() == 2
    assert [getattr(g, "__name__", "") for g, _ in counted.transforms] == ["count", "scale"]


def test_merge_linear_aux_takes_the_branch_that_stored():
    s1, s2 = lu.Store(), lu.Store()
    s2.store("b")
    assert lu.merge_linear_aux(lambda: s1.val, lambda: s2.val) == (False, "b")
    s1.store("a")
    with pytest.raises(lu.StoreException, match="both"):
        lu.merge_linear_aux(lambda: s1.val, lambda: s2.val)


def test_cache_memoises_per_function_and_fills_stores():
    calls = []

    @lu.cache
    def traced(fun, n):
        calls.append(n)
        return fun.call_wrapped(n)

    def f(n):
        return n * 2

    tree = tree_util.tree_structure((0,))
    a, thunk_a = api_util.flatten_fun_nokwargs(lu.wrap_init(f), tree)
    b, thunk_b = api_util.flatten_fun_nokwargs(lu.wrap_init(f), tree)
    assert traced(a, 3) == [6] and traced(b, 3) == [6] and calls == [3]
    assert thunk_b() == thunk_a()  # b's store filled from the first call's
    c, _ = api_util.flatten_fun_nokwargs(lu.wrap_init(f), tree)  # (a WrappedFun runs once)
    assert traced(c, 4) == [8] and calls == [3, 4]


def test_debug_info_names_arguments_as_jax():
    def f(x, y, *, z=1):
        return x

    d = api_util.debug_info("test", f, (1.0, {"a": 1, "b": [2, 3]}), {"z": 4})
    assert d.arg_names == ("x", "y['a']", "y['b'][0]", "y['b'][1]", "z")  # JAX 0.10.2's
    assert d.func_name == "f" and d.traced_for == "test"
    assert api_util.debug_info("t", f, (1.0, {"a": 1}), {}, static_argnums=(0,)).arg_names == (
        "y['a']",
    )
    assert api_util.debug_info("t", lambda *a: a, (1.0, 2.0), {}).arg_names == ("a[0]", "a[1]")


def test_shaped_abstractify_and_safe_map():
    aval = api_util.shaped_abstractify(1.0)
    assert aval.shape == () and aval.dtype == np.float32 and aval.weak_type
    assert api_util.safe_map(lambda a, b: a + b, [1, 2], [3, 4]) == [4, 6]
    with pytest.raises(ValueError, match="lengths"):
        api_util.safe_map(lambda a, b: a, [1], [1, 2])


# -- partial evaluation --------------------------------------------------------------------------


def _g(a, b):
    return [a * 2, a + b, fnp.sin(a)]


@settings(max_examples=15, deadline=None)
@given(st.floats(-10, 10, width=32), st.floats(-10, 10, width=32))
def test_trace_to_jaxpr_nounits_splits_known_and_unknown(a, b):
    aval = core.ShapedArray((), np.float32)
    known = pe.PartialVal.known(fnp.float32(a))
    jaxpr, outs, consts = pe.trace_to_jaxpr_nounits(
        lu.wrap_init(_g), [known, pe.PartialVal.unknown(aval)]
    )
    assert [o.is_known() for o in outs] == [True, False, True]
    assert float(outs[0].get_known()) == np.float32(a) * 2
    np.testing.assert_allclose(float(outs[2].get_known()), np.sin(np.float32(a)), rtol=2e-7)
    assert outs[1].get_aval() == aval
    (unknown_out,) = core.eval_jaxpr(jaxpr, consts, fnp.float32(b))
    assert float(unknown_out) == np.float32(a) + np.float32(b)
    # instantiate: every output becomes an output of the jaxpr (JAX 0.10.2: 3 outputs)
    jaxpr, outs, consts = pe.trace_to_jaxpr_nounits(
        lu.wrap_init(_g), [known, pe.PartialVal.unknown(aval)], instantiate=True
    )
    assert not any(o.is_known() for o in outs) and len(jaxpr.outvars) == 3
    got = core.eval_jaxpr(jaxpr, consts, fnp.float32(b))
    assert [float(v) for v in got[:2]] == [np.float32(a) * 2, np.float32(a) + np.float32(b)]


def test_trace_to_jaxpr_dynamic_and_keep_inputs():
    aval = core.ShapedArray((3,), np.float32)
    jaxpr, out_avals, consts = pe.trace_to_jaxpr_dynamic(
        lu.wrap_init(lambda x, unused: [fnp.cumsum(x)]), [aval, aval], keep_inputs=[True, False]
    )
    assert out_avals == [aval] and len(jaxpr.invars) == 1
    (out,) = core.eval_jaxpr(jaxpr, consts, fnp.arange(3.0))
    assert out.tolist() == [0.0, 1.0, 3.0]
    with pytest.raises(ValueError, match="uses"):
        pe.trace_to_jaxpr_dynamic(
            lu.wrap_init(lambda x, y: [x + y]), [aval, aval], keep_inputs=[True, False]
        )


def test_partial_val_rules():
    assert pe.PartialVal.known(2.0).get_known() == 2.0
    assert pe.PartialVal.unknown(core.ShapedArray((), np.float32)).get_known() is None
    with pytest.raises(ValueError, match="not both"):
        pe.PartialVal((core.ShapedArray((), np.float32), 1.0))


# -- extend.core -------------------------------------------------------------------------------


def test_opaque_trace_state_tells_traces_apart():
    outside = ext_core.get_opaque_trace_state(convention="flax")
    assert outside == ext_core.get_opaque_trace_state()
    seen = []
    fg.jit(lambda x: seen.append(ext_core.get_opaque_trace_state()) or x)(1.0)
    assert seen[0] != outside
    assert ext_core.find_top_trace(()) is core.current_trace()


def test_jaxpr_as_fun_evaluates_and_transforms():
    def f(x):
        return fnp.sin(x) * x

    closed = fg.make_jaxpr(f)(1.0)
    fun = ext_core.jaxpr_as_fun(closed)
    x = np.linspace(-2, 2, 5, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(fg.vmap(lambda v: fun(v)[0])(x)), np.sin(x) * x, 1e-6)
    grad = fg.grad(lambda v: fun(v)[0])(0.5)
    np.testing.assert_allclose(float(grad), np.cos(0.5) * 0.5 + np.sin(0.5), rtol=1e-6)
    ext_core.check_jaxpr(closed.jaxpr)


def test_register_exclusion_moves_equation_sources_to_the_caller(tmp_path):
    lib = tmp_path / "mylib_for_exclusion.py"
    lib.write_text("import fungrad.numpy as fnp\ndef helper(x):\n    return fnp.sin(x)\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import mylib_for_exclusion

        def user(x):
            return mylib_for_exclusion.helper(x)

        before = fg.make_jaxpr(user)(1.0).jaxpr.eqns[0].source_info
        assert before.file == str(lib)
        from fungrad.extend import source_info_util

        source_info_util.register_exclusion(str(tmp_path))
        after = fg.make_jaxpr(user)(1.0).jaxpr.eqns[0].source_info
        assert after.file == __file__ and after.function.endswith("user")
    finally:
        sys.path.remove(str(tmp_path))


# -- avals, dtypes and signature additions --------------------------------------------------------


def test_aval_sharding_is_unsharded_and_accepted_by_the_constructor():
    aval = fg.typeof(fnp.ones((2, 3)))
    assert isinstance(aval, core.AbstractValue)
    assert repr(aval.sharding) == (
        "NamedSharding(mesh=AbstractMesh((), axis_types=()), spec=P(None, None))"
    )  # JAX 0.10.2's
    again = core.ShapedArray((2, 3), np.float32, sharding=aval.sharding)
    assert again == aval.strip_weak_type() and again.update(sharding=None) == again
    assert core.max_dim(2, 5) == 5 and core.min_dim(2, 5) == 2


def test_extended_dtypes_are_above_no_fungrad_dtype():
    for dt in (np.float32, np.int8, fnp.bfloat16, np.bool_, np.uint32):
        assert not fg.dtypes.issubdtype(dt, fg.dtypes.extended)
        assert not fg.dtypes.issubdtype(dt, fg.dtypes.prng_key)
    assert fg.dtypes.issubdtype(fg.dtypes.prng_key, fg.dtypes.extended)
    assert not fg.dtypes.issubdtype(fg.random.key(0).dtype, fg.dtypes.prng_key)


@settings(max_examples=15, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple),
    st.sampled_from([np.float32, np.int32, np.bool_]),
)
def test_like_functions_take_shape_dtype_structs(shape, dtype):
    s = fg.ShapeDtypeStruct(shape, dtype)
    for fn, value in ((fnp.zeros_like, 0), (fnp.ones_like, 1), (fnp.empty_like, 0)):
        out = fn(s)
        assert out.shape == shape and out.dtype == dtype
        assert np.array_equal(np.asarray(out), np.full(shape, value, dtype))
    out = fnp.full_like(s, 2, dtype=np.int8)
    assert out.dtype == np.int8 and np.array_equal(np.asarray(out), np.full(shape, 2, np.int8))
    with pytest.raises(TypeError, match="zeros_like"):
        fnp.zeros_like(object())


def test_einsum_dot_general_hook_and_out():
    calls = []

    def my_dot(x, y, dimension_numbers, precision=None, preferred_element_type=None):
        calls.append(dimension_numbers)
        return fg.lax.dot_general(
            x, y, dimension_numbers, precision, preferred_element_type=preferred_element_type
        )

    rng = np.random.default_rng(0)
    a, b = (
        rng.normal(size=(2, 3, 4)).astype(np.float32),
        rng.normal(size=(2, 4, 5)).astype(np.float32),
    )
    out = fnp.einsum("bij,bjk->bik", a, b, _dot_general=my_dot)
    np.testing.assert_allclose(np.asarray(out), np.einsum("bij,bjk->bik", a, b), rtol=1e-5)
    assert calls == [(((2,), (1,)), ((0,), (0,)))]
    with pytest.raises(NotImplementedError, match="'out'"):
        fnp.einsum("ij->ji", a[0], out=a[0])


def test_scan_split_transpose_changes_nothing():
    def f(c, x):
        return c * x, c + x

    xs = np.arange(1.0, 5.0, dtype=np.float32)
    ref = fg.lax.scan(f, 1.0, xs)
    got = fg.lax.scan(f, 1.0, xs, _split_transpose=True)
    assert float(ref[0]) == float(got[0]) == 24.0
    assert ref[1].tolist() == got[1].tolist()


def test_layout_types_and_constraint():
    s = fg.sharding.SingleDeviceSharding(fg.devices("cpu")[0])
    assert Layout((1, 0)) == Layout([1, 0]) and hash(Layout((1, 0))) == hash(Layout((1, 0)))
    f = Format(Layout((1, 0)), s)
    assert f == Format(Layout((1, 0)), s) and f.layout.major_to_minor == (1, 0)
    assert repr(Format()) == "Format(layout=None, sharding=None)"
    with pytest.raises(ValueError, match="Sharding has to be concrete"):
        Format(Layout((0,)))
    x = fnp.arange(6.0).reshape(2, 3)
    out = fg.jit(lambda v: with_layout_constraint(v, Layout((1, 0))) * 2)(x)
    assert out.tolist() == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]
    with pytest.raises(ValueError, match="rank of the value"):
        with_layout_constraint(x, Layout((0,)))
