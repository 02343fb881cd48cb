"""Misuse of issue 16's new public names: each case once crashed with an internal error,
raised an exception type other than JAX's, hid the function's name, or was silently wrong.

Every case asserts the exception type (JAX 0.10.2's where JAX raises one for the same misuse)
and a message fragment naming the function; the few "accepts" cases assert the value JAX
gives. The probe that found them (every new function under fungrad and JAX, tabulated) lives
outside the repository; see the lead's report for the table.
"""

from __future__ import annotations

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
import fungrad.scipy.signal as signal
import fungrad.scipy.special as special
import fungrad.scipy.stats as stats
from fungrad import lax, random, tree_util
from fungrad.example_libraries import stax
from fungrad.flatten_util import ravel_pytree
from fungrad.nn import initializers as init

KEY = random.PRNGKey(0)
F32 = np.float32


class _BadFlatten:
    pass


class _BadFlattenWithKeys:
    pass


tree_util.register_pytree_node(_BadFlatten, lambda x: 5, lambda aux, children: _BadFlatten())
tree_util.register_pytree_with_keys(
    _BadFlattenWithKeys, lambda x: ([1, 2], None), lambda aux, children: _BadFlattenWithKeys()
)

SDS3 = fg.ShapeDtypeStruct((3,), F32)
X3 = np.arange(3, dtype=F32)

CASES = {
    # -- random: key, shape and dtype checks shared by every sampler ----------------------------
    "batched key": (
        lambda: random.normal(random.split(KEY, 3)),
        ValueError,
        r"normal: expected a single PRNG key, got a batch of keys u32\[3,2\]",
    ),
    "batched key gamma": (
        lambda: random.gamma(random.split(KEY, 3), 2.0),
        ValueError,
        "gamma: expected a single PRNG key.*vmap",
    ),
    "not a key": (
        lambda: random.normal(np.ones(2, F32)),
        TypeError,
        "normal: expected a single PRNG key",
    ),
    "negative shape": (
        lambda: random.normal(KEY, (-1,)),
        TypeError,
        r"normal: shape must be non-negative, got \(-1,\)",
    ),
    "negative shape beta": (
        lambda: random.beta(KEY, 2.0, 3.0, (2, -1)),
        TypeError,
        "beta: shape must be non-negative",
    ),
    "dtype string": (
        lambda: random.gamma(KEY, 2.0, dtype="foo"),
        TypeError,
        "gamma: 'foo' is not a valid dtype",
    ),
    "dtype string randint": (
        lambda: random.randint(KEY, (2,), 0, 5, dtype="foo"),
        TypeError,
        "randint: 'foo' is not a valid dtype",
    ),
    "generalized_normal str": (
        lambda: random.generalized_normal(KEY, "a"),
        TypeError,
        "generalized_normal",
    ),
    "generalized_normal shape": (
        lambda: random.generalized_normal(KEY, np.ones(4, F32), (2,)),
        ValueError,
        r"generalized_normal: .*\(4,\)",
    ),
    "weibull_min shape": (
        lambda: random.weibull_min(KEY, np.ones(4, F32), 2.0, (2,)),
        TypeError,
        r"weibull_min: incompatible shapes.*\(2,\).*\(4,\)",
    ),
    "huge seed": (
        lambda: random.PRNGKey(2**70),
        OverflowError,
        "PRNGKey: the seed .* does not fit in a 64-bit integer",
    ),
    "ball negative d": (
        lambda: random.ball(KEY, -1),
        TypeError,
        "ball: the dimension d must be non-negative",
    ),
    # -- nn.initializers --------------------------------------------------------------------------
    "init negative shape": (
        lambda: init.zeros(KEY, (2, -1)),
        TypeError,
        r"nn.initializers.zeros: shape must be non-negative",
    ),
    "init dtype string": (
        lambda: init.normal()(KEY, (2,), "foo"),
        TypeError,
        "nn.initializers.normal: 'foo' is not a valid dtype",
    ),
    "init scale string": (
        lambda: init.uniform("a")(KEY, (2,)),
        TypeError,
        "nn.initializers.uniform: scale must be a number",
    ),
    "init value string": (
        lambda: init.constant("a")(KEY, (2,)),
        TypeError,
        "nn.initializers.constant: value must be a number",
    ),
    "variance_scaling zero fan": (
        lambda: init.variance_scaling(1.0, "fan_in", "normal")(KEY, (0, 3)),
        ValueError,
        r"variance_scaling: the weights array of shape \(0, 3\) has a size-0",
    ),
    "variance_scaling scale string": (
        lambda: init.variance_scaling("a", "fan_in", "normal")(KEY, (2, 3)),
        TypeError,
        "variance_scaling: scale must be a number",
    ),
    "init random int dtype": (
        lambda: init.glorot_normal()(KEY, (2, 3), np.int32),
        ValueError,
        "variance_scaling: dtype must be a float dtype",
    ),
    # -- scipy.special: static integer arguments -----------------------------------------------
    "bernoulli str": (
        lambda: special.bernoulli("a"),
        TypeError,
        "bernoulli: n must be an integer scalar, got str",
    ),
    "bernoulli array": (
        lambda: special.bernoulli(np.array([1, 2])),
        TypeError,
        r"bernoulli: n must be an integer scalar, got an array of shape \(2,\)",
    ),
    "bernoulli None": (lambda: special.bernoulli(None), TypeError, "bernoulli: n must be"),
    "bernoulli fraction": (
        lambda: special.bernoulli(2.5),
        ValueError,
        "bernoulli: n must be a non-negative integer",
    ),
    "bernoulli nan": (lambda: special.bernoulli(np.nan), ValueError, "bernoulli: n must be"),
    "multigammaln d str": (
        lambda: special.multigammaln(3.0, "a"),
        TypeError,
        "multigammaln: the dimension d must be an integer scalar",
    ),
    "multigammaln d array": (
        lambda: special.multigammaln(3.0, np.array([1, 2])),
        TypeError,
        "multigammaln: the dimension d",
    ),
    # -- scipy.stats ------------------------------------------------------------------------------
    "kde 3-d dataset": (
        lambda: stats.gaussian_kde(np.ones((2, 3, 4), F32)),
        ValueError,
        r"gaussian_kde: dataset must be 1-D \(n,\) or 2-D \(d, n\)",
    ),
    "kde resample no key": (
        lambda: stats.gaussian_kde(X3).resample(3),
        TypeError,
        "gaussian_kde.resample: expected a PRNG key",
    ),
    "mvn x and mean": (
        lambda: stats.multivariate_normal.logpdf(np.zeros(3, F32), np.zeros(2, F32), np.eye(2)),
        TypeError,
        r"multivariate_normal.logpdf: x of shape \(3,\)",
    ),
    # -- tree_util / flatten_util -----------------------------------------------------------------
    "tree_unflatten not treedef": (
        lambda: tree_util.tree_unflatten((1, 2), [1, 2]),
        TypeError,
        "tree_unflatten: treedef must be a PyTreeDef",
    ),
    "tree_unflatten leaves int": (
        lambda: tree_util.tree_unflatten(tree_util.tree_structure((1, 2)), 5),
        TypeError,
        "tree_unflatten: leaves must be an iterable of 2 leaves",
    ),
    "tree_transpose not treedef": (
        lambda: tree_util.tree_transpose([0, 0], (0, 0), [(1, 2), (3, 4)]),
        TypeError,
        "tree_transpose: outer_treedef must be a PyTreeDef",
    ),
    "tree.transpose None outer": (
        lambda: fg.tree.transpose(None, None, [(1, 2), (3, 4)]),
        TypeError,
        "tree_transpose: outer_treedef",
    ),
    "treedef_tuple element": (
        lambda: tree_util.treedef_tuple([3]),
        TypeError,
        "treedef_tuple: each element must be a PyTreeDef",
    ),
    "treedef_is_leaf": (lambda: tree_util.treedef_is_leaf(3), TypeError, "treedef_is_leaf"),
    "treedef_children": (lambda: tree_util.treedef_children(3), TypeError, "treedef_children"),
    "keystr not a path": (
        lambda: tree_util.keystr(3),
        TypeError,
        "keystr: keys must be a key path",
    ),
    "bad registered flatten": (
        lambda: tree_util.tree_leaves(_BadFlatten()),
        ValueError,
        "flatten function registered for the pytree node type _BadFlatten must return a pair",
    ),
    "bad registered flatten_with_keys": (
        lambda: tree_util.tree_leaves_with_path(_BadFlattenWithKeys()),
        ValueError,
        r"flatten_with_keys function registered .*_BadFlattenWithKeys .*\(key, child\) pairs",
    ),
    "register a non-class": (
        lambda: tree_util.register_pytree_node(3, lambda x: (x, None), lambda a, c: c),
        TypeError,
        "register_pytree_node: nodetype must be a class, got int",
    ),
    "register_dataclass non-class": (
        lambda: tree_util.register_dataclass(3, ["a"], []),
        TypeError,
        "nodetype must be a class",
    ),
    "register without unflatten": (
        lambda: tree_util.register_pytree_node(
            type("_NoUnflatten", (), {}), lambda x: ((), None), None
        ),
        TypeError,
        r"register_pytree_node\(_NoUnflatten\): unflatten_func must be callable",
    ),
    "unravel string": (
        lambda: ravel_pytree([np.ones(2, F32), 1.0])[1]("abc"),
        TypeError,
        r"ravel_pytree's unravel: expected an array of shape \(3,\)",
    ),
    # -- callbacks --------------------------------------------------------------------------------
    "pure_callback wrong dtype": (
        lambda: fg.pure_callback(lambda x: np.ones(3, np.int32), SDS3, X3),
        RuntimeError,
        "pure_callback: result 0 of the callback .* has dtype int32 .* f32",
    ),
    "io_callback wrong dtype": (
        lambda: fg.experimental.io_callback(lambda x: np.ones(3, np.int32), SDS3, X3),
        RuntimeError,
        "io_callback: result 0 .* dtype int32",
    ),
    "pure_callback string argument": (
        lambda: fg.pure_callback(lambda x: np.ones(3, F32), SDS3, "abc"),
        TypeError,
        "pure_callback: argument leaf 0 is of type str, not an array",
    ),
    "io_callback string argument": (
        lambda: fg.experimental.io_callback(lambda x: np.ones(3, F32), SDS3, "abc"),
        TypeError,
        "io_callback: argument leaf 0 is of type str",
    ),
    # -- top-level names --------------------------------------------------------------------------
    "linear_transpose cotangent shape": (
        lambda: fg.linear_transpose(lambda x: 2 * x, np.ones(3, F32))(np.ones(2, F32)),
        TypeError,
        r"linear_transpose: cotangent type does not match .*f32\[3\].*f32\[2\]",
    ),
    "custom_gradient no pair": (
        lambda: fg.grad(fg.custom_gradient(lambda x: x * 2))(1.0),
        TypeError,
        r"custom_gradient: the function must return a pair \(value, vjp_fn\), got an array",
    ),
    "ShapeDtypeStruct dtype": (
        lambda: fg.ShapeDtypeStruct((2,), "foo"),
        TypeError,
        "ShapeDtypeStruct: data type 'foo' not understood",
    ),
    "saved_residuals non-callable": (
        lambda: fg.ad_checkpoint.print_saved_residuals(3, 1.0),
        TypeError,
        "saved_residuals: expected a callable value",
    ),
    "config unknown option": (
        lambda: fg.config.update("jax_enable_x65", True),
        AttributeError,
        "config.update: unknown option 'jax_enable_x65'",
    ),
    # -- lax additions ----------------------------------------------------------------------------
    "conv_shape_tuple zero stride": (
        lambda: lax.conv_shape_tuple((1, 3, 8, 8), (4, 3, 3, 3), (0, 1), [(0, 0), (0, 0)]),
        ValueError,
        "conv_shape_tuple: every element of strides must be positive",
    ),
    "reduce_window_shape_tuple zero stride": (
        lambda: lax.reduce_window_shape_tuple((4, 4), (2, 2), (0, 1), [(0, 0), (0, 0)]),
        ValueError,
        "reduce_window_shape_tuple: every element of window_strides",
    ),
    "stack shapes": (
        lambda: lax.stack([np.ones(2, F32), np.ones(3, F32)]),
        ValueError,
        "stack: all arrays must have the same shape",
    ),
    "stack dtypes": (
        lambda: lax.stack([np.ones(2, F32), np.ones(2, np.int32)]),
        TypeError,
        "stack: all arrays must have the same dtype",
    ),
    "broadcast_shapes string": (
        lambda: lax.broadcast_shapes("ab", (3,)),
        TypeError,
        "broadcast_shapes: each shape must be a sequence of integers",
    ),
    "broadcast_shapes negative": (
        lambda: lax.broadcast_shapes((-1,), (3,)),
        TypeError,
        "broadcast_shapes: shapes must be non-negative",
    ),
    "split sizes int": (
        lambda: lax.split(np.ones(5, F32), 5),
        TypeError,
        "split: sizes must be a sequence of integers",
    ),
    "tile reps int": (
        lambda: lax.tile(np.ones(2, F32), 2),
        TypeError,
        "tile: reps must be a sequence of integers",
    ),
    "top_k float k": (
        lambda: lax.top_k(X3, 1.5),
        TypeError,
        "top_k: k must be a static integer, got float",
    ),
    # -- example_libraries ------------------------------------------------------------------------
    "stax.serial non-layer": (
        lambda: stax.serial(stax.Relu, 3),
        TypeError,
        r"stax.serial: layer 1 must be an \(init_fun, apply_fun\) pair",
    ),
    "stax.parallel non-layer": (lambda: stax.parallel(3), TypeError, "stax.parallel: layer 0"),
    "stax.Dense params": (
        lambda: stax.Dense(2)[1](None, np.ones((3, 4), F32)),
        TypeError,
        r"stax.Dense: params must be the pair \(W, b\)",
    ),
    "stax.BatchNorm params": (
        lambda: stax.BatchNorm()[1]((1,), np.ones((3, 4), F32)),
        ValueError,
        r"stax.BatchNorm: params must be the pair",
    ),
    "stax.Dense params length": (
        lambda: stax.Dense(2)[1]((np.ones((4, 2), F32),), np.ones((3, 4), F32)),
        ValueError,
        r"stax.Dense: params must be the pair \(W, b\)",
    ),
    "platform_dependent default": (
        lambda: lax.platform_dependent(1.0, default=3),
        TypeError,
        "platform_dependent: the branch for 'default' must be callable",
    ),
    "randint bound overflow": (
        lambda: random.randint(KEY, (2,), -(2**40), 2**40),
        OverflowError,
        "randint: .* too large to convert to int32",
    ),
    "stax.Dense negative": (lambda: stax.Dense(-2), TypeError, "stax.Dense: out_dim must be >= 0"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_misuse_is_a_clear_error(name):
    call, exc, match = CASES[name]
    with pytest.raises(exc, match=match):
        call()


def test_batched_key_error_under_jit():
    # traced keys get the same check (the batch dimension is known while tracing)
    with pytest.raises(ValueError, match="uniform: expected a single PRNG key"):
        fg.jit(lambda k: random.uniform(k))(random.split(KEY, 2))


@pytest.mark.parametrize(
    "call,where",
    [
        (lambda n: random.normal(KEY, (n,)), "the shape argument of normal"),
        (lambda n: random.split(KEY, n), "the shape argument of split"),
        (lambda n: random.ball(KEY, n), "the dimension d of ball"),
        (lambda n: init.zeros(KEY, (n, 3)), "the shape argument of nn.initializers.zeros"),
        (lambda n: random.orthogonal(KEY, n), "n of orthogonal"),
    ],
)
def test_traced_static_arguments(call, where):
    # JAX's TypeError subclass for a traced shape; the message says which argument must be
    # static (it showed the tracer's repr)
    with pytest.raises(fg.ConcretizationTypeError, match=rf"{where} \(it must be static\)"):
        fg.jit(call)(2)


def test_pure_callback_wrong_dtype_under_jit():
    f = fg.jit(lambda x: fg.pure_callback(lambda v: np.ones(3, np.int32), SDS3, x))
    with pytest.raises(RuntimeError, match="pure_callback: result 0 .* dtype int32"):
        f(X3)


def test_config_unknown_option_is_also_a_value_error():
    with pytest.raises(ValueError, match="unknown option"):
        fg.config.read("jax_no_such_flag")


# -- misuse JAX accepts: fungrad gives JAX's value ----------------------------------------------


def test_accepted_as_in_jax():
    # pure_callback: a float64 result for a declared float32 converts (x64 off), as in JAX
    out = fg.pure_callback(lambda x: np.ones(3, np.float64), SDS3, X3)
    assert out.dtype == np.float32 and np.all(np.asarray(out) == 1)
    # multinomial casts counts to any dtype; rademacher to bool (JAX 0.10.2's numbers)
    counts = random.multinomial(KEY, 5.0, fnp.array([0.2, 0.3, 0.5]), dtype=np.int32)
    assert counts.dtype == np.int32 and np.asarray(counts).tolist() == [0, 1, 4]
    signs = random.rademacher(KEY, (6,), dtype=bool)
    assert signs.dtype == np.bool_ and np.asarray(signs).all()
    # zeros/ones/constant take integer dtypes
    assert init.zeros(KEY, (2,), np.int32).dtype == np.int32
    assert np.asarray(init.constant(3)(KEY, (2,), np.int32)).tolist() == [3, 3]
    # convolve/correlate of 0-d arrays: the product
    assert float(signal.convolve(fnp.array(1.5), fnp.array(2.0))) == 3.0
    assert float(signal.correlate(fnp.array(1.5), fnp.array(2.0), mode="same")) == 3.0
    # conv_shape_tuple takes a padding string
    assert lax.conv_shape_tuple((1, 3, 8, 8), (4, 3, 3, 3), (2, 1), "SAME") == (1, 4, 4, 8)
    # stax.MaxPool of integers pools from the dtype's minimum (JAX's -inf cast)
    x = np.arange(16, dtype=np.int32).reshape(1, 4, 4, 1)
    pooled = stax.MaxPool((2, 2))[1]((), x)
    assert pooled.dtype == np.int32
    assert np.asarray(pooled).ravel().tolist() == [5, 6, 7, 9, 10, 11, 13, 14, 15]
    # disable_jit (like JAX's context managers) decorates
    assert fg.disable_jit()(lambda v: fg.config.disable_jit)(1.0) is True
    # bernoulli/multigammaln take integral floats
    np.testing.assert_allclose(
        np.asarray(special.bernoulli(np.float32(2.0))), [1, -0.5, 1 / 6], rtol=1e-6
    )
    np.testing.assert_allclose(
        float(special.multigammaln(3.0, 2.0)), float(special.multigammaln(3.0, 2))
    )


def test_special_functions_that_take_lists_in_jax():
    # JAX's ndtr, log_ndtr, spence, expn, hyp1f1 and hyp2f1 call jnp.asarray on their
    # arguments, so lists work there; the values are scipy's
    import scipy.special as ss

    for fn, args in [
        ("ndtr", ([0.5, 1.0],)),
        ("log_ndtr", ([0.5, -1.0],)),
        ("spence", ([0.5, 1.5],)),
        ("expn", ([1, 2], [0.5, 0.5])),
        ("hyp1f1", ([1.0], 2.0, 0.5)),
        ("hyp2f1", (1.0, 2.0, 3.0, [0.5])),
    ]:
        np.testing.assert_allclose(
            np.asarray(getattr(special, fn)(*args)), getattr(ss, fn)(*args), rtol=2e-6, err_msg=fn
        )
    with pytest.raises(TypeError, match="gammaln requires ndarray or scalar arguments"):
        special.gammaln([1.0])  # as JAX, most of jax.scipy.special refuses lists
