"""fungrad.example_libraries (stax, optimizers): JAX's example libraries.

stax layers against numpy references (and against outputs pinned from JAX 0.10.2 where the
layout conventions are JAX's own: transposed-convolution padding, initial weights), init
shapes against apply outputs, initial parameters equal to the fungrad.random draws JAX's stax
makes, gradients with check_grads, vmap against a Python loop, jit against eager.
optimizers step by step against hand-written numpy updates, schedules against their formulas,
the state as a pytree under jit, pack/unpack, and small networks trained under jit.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import random
from fungrad.example_libraries import optimizers as O
from fungrad.example_libraries import stax
from fungrad.nn import initializers
from fungrad.testing import check_grads

KEY = random.PRNGKey(0)
RS = np.random.RandomState(0)


def _randn(*shape):
    return RS.randn(*shape).astype(np.float32)


def _close(a, b, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(
        np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=rtol, atol=atol
    )


# ============================================================================ stax: init


def test_public_names_are_jaxs():
    names = {
        "AvgPool",
        "BatchNorm",
        "Conv",
        "Conv1DTranspose",
        "ConvTranspose",
        "Dense",
        "Dropout",
        "Elu",
        "Exp",
        "FanInConcat",
        "FanInSum",
        "FanOut",
        "Flatten",
        "Gelu",
        "GeneralConv",
        "GeneralConvTranspose",
        "Identity",
        "LeakyRelu",
        "LogSoftmax",
        "MaxPool",
        "Relu",
        "Selu",
        "Sigmoid",
        "Softmax",
        "Softplus",
        "SumPool",
        "Tanh",
        "elementwise",
        "elu",
        "gelu",
        "glorot",
        "glorot_normal",
        "leaky_relu",
        "log_softmax",
        "logsoftmax",
        "normal",
        "ones",
        "parallel",
        "randn",
        "relu",
        "selu",
        "serial",
        "shape_dependent",
        "sigmoid",
        "softmax",
        "softplus",
        "standardize",
        "zeros",
    }
    assert names <= set(dir(stax)) and set(stax.__all__) == names
    opt_names = {
        "JoinPoint",
        "Optimizer",
        "OptimizerState",
        "Schedule",
        "adagrad",
        "adam",
        "adamax",
        "clip_grads",
        "constant",
        "exponential_decay",
        "inverse_time_decay",
        "l2_norm",
        "make_schedule",
        "momentum",
        "nesterov",
        "optimizer",
        "pack_optimizer_state",
        "piecewise_constant",
        "polynomial_decay",
        "rmsprop",
        "rmsprop_momentum",
        "sgd",
        "sm3",
        "unpack_optimizer_state",
    }
    assert opt_names <= set(O.__all__)


def test_serial_dense_init_matches_jax():
    # jax.example_libraries.stax.serial(Dense(3), Relu, Dense(2)) with PRNGKey(0), JAX 0.10.2.
    init_fun, _ = stax.serial(stax.Dense(3), stax.Relu, stax.Dense(2))
    out_shape, params = init_fun(KEY, (-1, 2))
    assert out_shape == (-1, 2)
    (W1, b1), relu_params, (W2, b2) = params
    assert relu_params == ()
    _close(W1, [[0.1364276, -0.52342767, -0.83739567], [-0.28105626, -0.6779015, 0.19641568]])
    _close(b1, [-0.01335625, -0.00352563, 0.00309704])
    _close(W2, [[0.02540765, -0.9285576], [-0.22335595, 0.7025297], [0.17655689, 0.65858644]])
    _close(b2, [-0.0006049, -0.02217776])


def test_init_draws_are_the_documented_key_splits():
    # Dense: W from the first half of split(rng), b from the second.
    _, (W, b) = stax.Dense(4)[0](KEY, (5, 3))
    kw, kb = random.split(KEY)
    np.testing.assert_array_equal(W, initializers.glorot_normal()(kw, (3, 4)))
    np.testing.assert_array_equal(b, initializers.normal()(kb, (4,)))
    # Conv: glorot over the kernel's I and O axes, bias normal(1e-6) of the output rank.
    _, (W, b) = stax.GeneralConv(("NCHW", "OIHW", "NCHW"), 5, (2, 3))[0](KEY, (1, 4, 6, 6))
    np.testing.assert_array_equal(W, initializers.glorot_normal(1, 0)(kw, (5, 4, 2, 3)))
    np.testing.assert_array_equal(b, initializers.normal(1e-6)(kb, (1, 5, 1, 1)))
    # serial: layer k gets the second half of split of the key the previous layer left.
    layers = [stax.Dense(3), stax.Tanh, stax.Dense(2)]
    _, params = stax.serial(*layers)[0](KEY, (4,))
    rng, shape = KEY, (4,)
    for (init_fun, _), p in zip(layers, params):
        rng, sub = random.split(rng)
        shape, expected = init_fun(sub, shape)
        for a, e in zip(fg.tree_util.tree_leaves(p), fg.tree_util.tree_leaves(expected)):
            np.testing.assert_array_equal(a, e)
    # parallel: layer k gets split(rng, n)[k].
    _, params = stax.parallel(stax.Dense(2), stax.Dense(3))[0](KEY, [(4,), (5,)])
    keys = random.split(KEY, 2)
    np.testing.assert_array_equal(params[1][0], stax.Dense(3)[0](keys[1], (5,))[1][0])


LAYERS = [
    ("Dense", stax.Dense(7), (-1, 3)),
    ("Dense3d", stax.Dense(2), (2, 3, 4)),
    ("Conv_same_strided", stax.Conv(4, (3, 3), (2, 2), "SAME"), (2, 7, 7, 3)),
    ("Conv_valid", stax.Conv(4, (2, 3)), (2, 6, 5, 3)),
    (
        "GeneralConv",
        stax.GeneralConv(("NCHW", "OIHW", "NCHW"), 3, (3, 3), padding="SAME"),
        (2, 2, 5, 5),
    ),
    ("ConvTranspose", stax.ConvTranspose(3, (3, 3), (2, 2), "SAME"), (2, 4, 4, 2)),
    ("Conv1DTranspose", stax.Conv1DTranspose(3, (3,), (2,)), (2, 5, 2)),
    ("BatchNorm", stax.BatchNorm(), (2, 3, 3, 4)),
    ("MaxPool", stax.MaxPool((3, 3), (2, 2), "SAME"), (2, 5, 5, 3)),
    ("AvgPool_spec", stax.AvgPool((3, 2), (1, 2), "SAME", spec="NCHW"), (2, 3, 5, 5)),
    ("SumPool", stax.SumPool((2, 2)), (2, 4, 4, 3)),
    ("Flatten", stax.Flatten, (-1, 2, 3, 4)),
    ("Softmax", stax.Softmax, (3, 4)),
    (
        "FanInConcat",
        stax.serial(
            stax.FanOut(3),
            stax.parallel(stax.Dense(3), stax.Identity, stax.Dense(2)),
            stax.FanInConcat(),
        ),
        (-1, 4),
    ),
    ("shape_dependent", stax.shape_dependent(lambda s: stax.Dense(2 * s[-1])), (2, 3)),
]


@pytest.mark.parametrize("name,layer,shape", LAYERS, ids=[n for n, _, _ in LAYERS])
def test_init_shape_is_apply_shape(name, layer, shape):
    init_fun, apply_fun = layer
    out_shape, params = init_fun(KEY, shape)
    x = _randn(*[2 if d == -1 else d for d in shape])
    y = apply_fun(params, x)
    expected = tuple(2 if d == -1 else d for d in out_shape)
    assert y.shape == expected and y.dtype == np.float32


# ============================================================================ stax: values


@settings(max_examples=10)
@given(
    batch=st.lists(st.integers(0, 3), max_size=2), n_in=st.integers(1, 4), n_out=st.integers(1, 4)
)
def test_dense_is_affine(batch, n_in, n_out):
    init_fun, apply_fun = stax.Dense(n_out)
    out_shape, (W, b) = init_fun(KEY, (*batch, n_in))
    x = _randn(*batch, n_in)
    y = apply_fun((W, b), x)
    assert out_shape == (*batch, n_out)
    _close(y, np.asarray(x) @ np.asarray(W) + np.asarray(b))


def _np_conv_nhwc(x, W, strides, padding):
    """Cross-correlation, NHWC input, HWIO kernel, XLA's SAME padding (extra pad at the end)."""
    kh, kw = W.shape[:2]
    pads = []
    for n, k, s in zip(x.shape[1:3], (kh, kw), strides):
        if padding == "SAME":
            out = -(-n // s)
            total = max((out - 1) * s + k - n, 0)
            pads.append((total // 2, total - total // 2))
        else:
            pads.append((0, 0))
    xp = np.pad(x, [(0, 0), *pads, (0, 0)])
    oh = (xp.shape[1] - kh) // strides[0] + 1
    ow = (xp.shape[2] - kw) // strides[1] + 1
    out = np.zeros((x.shape[0], oh, ow, W.shape[3]))
    for i in range(oh):
        for j in range(ow):
            patch = xp[
                :, i * strides[0] : i * strides[0] + kh, j * strides[1] : j * strides[1] + kw
            ]
            out[:, i, j] = np.einsum("nhwc,hwco->no", patch, W)
    return out


@pytest.mark.parametrize(
    "strides,padding", [((1, 1), "VALID"), ((2, 1), "SAME"), ((2, 2), "VALID"), ((1, 2), "SAME")]
)
def test_conv_against_numpy(strides, padding):
    init_fun, apply_fun = stax.Conv(3, (3, 2), strides, padding)
    x = _randn(2, 6, 5, 2)
    _, (W, b) = init_fun(KEY, x.shape)
    W = _randn(*W.shape)
    expected = _np_conv_nhwc(x, W, strides, padding) + np.asarray(b)
    _close(apply_fun((W, b), x), expected, rtol=1e-4, atol=1e-5)


def test_general_conv_layout_is_a_transpose_of_conv():
    x = _randn(2, 3, 6, 5)  # NCHW
    W = _randn(4, 3, 2, 3)  # OIHW
    b = _randn(1, 4, 1, 1)
    _, apply_fun = stax.GeneralConv(("NCHW", "OIHW", "NCHW"), 4, (2, 3), (1, 2), "SAME")
    expected = _np_conv_nhwc(x.transpose(0, 2, 3, 1), W.transpose(2, 3, 1, 0), (1, 2), "SAME")
    _close(apply_fun((W, b), x), expected.transpose(0, 3, 1, 2) + b, rtol=1e-4, atol=1e-5)


def _np_conv_transpose_valid(x, W, strides):
    """Transposed convolution, VALID: every input pixel scatters the (flipped) kernel."""
    kh, kw = W.shape[:2]
    sh, sw = strides
    n, h, w, _ = x.shape
    out = np.zeros((n, h * sh + max(kh - sh, 0), w * sw + max(kw - sw, 0), W.shape[3]))
    flipped = W[::-1, ::-1]
    for i in range(h):
        for j in range(w):
            out[:, i * sh : i * sh + kh, j * sw : j * sw + kw] += np.einsum(
                "nc,hwco->nhwo", x[:, i, j], flipped
            )
    return out


@pytest.mark.parametrize("strides,kernel", [((2, 2), (3, 3)), ((1, 2), (2, 3)), ((3, 2), (2, 2))])
def test_conv_transpose_valid_against_numpy(strides, kernel):
    x = _randn(2, 3, 4, 2)
    init_fun, apply_fun = stax.ConvTranspose(3, kernel, strides)
    out_shape, (W, b) = init_fun(KEY, x.shape)
    expected = _np_conv_transpose_valid(x, np.asarray(W), strides) + np.asarray(b)
    assert out_shape == expected.shape
    _close(apply_fun((W, b), x), expected, rtol=1e-4, atol=1e-5)


def test_conv_transpose_same_matches_jax():
    # Outputs pinned from jax.example_libraries.stax 0.10.2 (integers, so exact).
    x = np.arange(9.0, dtype=np.float32).reshape(1, 3, 3, 1)
    W = np.arange(1.0, 10.0, dtype=np.float32).reshape(3, 3, 1, 1)
    init_fun, apply_fun = stax.ConvTranspose(1, (3, 3), (2, 2), "SAME")
    assert init_fun(KEY, x.shape)[0] == (1, 6, 6, 1)
    np.testing.assert_array_equal(
        apply_fun((W, 0.0), x)[0, :, :, 0],
        [
            [0, 0, 9, 8, 25, 16],
            [0, 0, 6, 5, 16, 10],
            [27, 24, 60, 34, 80, 44],
            [18, 15, 36, 20, 46, 25],
            [63, 54, 120, 64, 140, 74],
            [36, 30, 66, 35, 76, 40],
        ],
    )
    x1 = np.array([1.0, 2.0, 3.0], np.float32).reshape(1, 3, 1)
    W1 = np.array([1.0, 10.0, 100.0], np.float32).reshape(3, 1, 1)
    for padding, expected in [
        ("SAME", [100, 10, 201, 20, 302, 30]),
        ("VALID", [100, 10, 201, 20, 302, 30, 3]),
    ]:
        init_fun, apply_fun = stax.Conv1DTranspose(1, (3,), (2,), padding)
        assert init_fun(KEY, x1.shape)[0] == (1, len(expected), 1)
        np.testing.assert_array_equal(np.ravel(apply_fun((W1, 0.0), x1)), expected)


@pytest.mark.parametrize(
    "axis,center,scale",
    [((0, 1, 2), True, True), (0, False, True), ((0,), True, False), ((0, 2), False, False)],
)
def test_batchnorm_against_numpy(axis, center, scale):
    shape = (4, 3, 5, 2) if axis != 0 and axis != (0,) else (6, 3)
    x = _randn(*shape) * 3 + 1
    init_fun, apply_fun = stax.BatchNorm(
        axis, center=center, scale=scale, beta_init=stax.randn(), gamma_init=stax.randn()
    )
    out_shape, (beta, gamma) = init_fun(KEY, shape)
    assert out_shape == shape
    ax = (axis,) if isinstance(axis, int) else axis
    kept = tuple(d for i, d in enumerate(shape) if i not in ax)
    z = (x - x.mean(ax, keepdims=True)) / np.sqrt(x.var(ax, keepdims=True) + 1e-5)
    expand = tuple(None if i in ax else slice(None) for i in range(x.ndim))
    if scale:
        assert gamma.shape == kept
        z = z * np.asarray(gamma)[expand]
    else:
        assert gamma == ()
    if center:
        assert beta.shape == kept
        z = z + np.asarray(beta)[expand]
    else:
        assert beta == ()
    _close(apply_fun((beta, gamma), x), z, rtol=1e-4, atol=1e-5)


def _np_gelu(x):  # jax.nn.gelu's default (approximate=True) tanh form
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


_SELU_A, _SELU_L = 1.6732632423543772, 1.0507009873554805
ELEMENTWISE = [
    ("Relu", lambda x: np.maximum(x, 0)),
    ("Tanh", np.tanh),
    ("Exp", np.exp),
    ("Sigmoid", scipy.special.expit),
    ("Softplus", lambda x: np.logaddexp(x, 0)),
    ("Elu", lambda x: np.where(x > 0, x, np.expm1(x))),
    ("LeakyRelu", lambda x: np.where(x >= 0, x, 0.01 * x)),
    ("Selu", lambda x: _SELU_L * np.where(x > 0, x, _SELU_A * np.expm1(x))),
    ("Gelu", _np_gelu),
    ("LogSoftmax", lambda x: scipy.special.log_softmax(x, axis=-1)),
    ("Softmax", lambda x: scipy.special.softmax(x, axis=-1)),
]


@pytest.mark.parametrize("name,ref", ELEMENTWISE, ids=[n for n, _ in ELEMENTWISE])
def test_elementwise_layers_against_numpy(name, ref):
    init_fun, apply_fun = getattr(stax, name)
    x = _randn(3, 4) * 2
    assert init_fun(KEY, (3, 4)) == ((3, 4), ())
    _close(apply_fun((), x), ref(x.astype(np.float64)), rtol=1e-5, atol=1e-6)
    empty = np.zeros((0, 4), np.float32)
    assert apply_fun((), empty).shape == (0, 4)


def test_elementwise_passes_keywords_and_specials():
    _, apply_fun = stax.elementwise(fnp.clip, min=-1.0, max=2.0)
    np.testing.assert_array_equal(
        apply_fun((), np.array([-3.0, 0.5, 3.0], np.float32)), [-1.0, 0.5, 2.0]
    )
    _, relu = stax.Relu
    np.testing.assert_array_equal(
        relu((), np.array([np.inf, -np.inf, np.nan], np.float32)), [np.inf, 0.0, np.nan]
    )
    assert relu((), np.float32(-2.0)).shape == ()


def _np_pool(x, window, strides, padding, kind):
    """Pooling over axes 1..ndim-2 (NHWC-like) with XLA's SAME padding."""
    spatial = x.shape[1:-1]
    pads = [(0, 0)]
    for n, k, s in zip(spatial, window, strides):
        if padding == "SAME":
            out = -(-n // s)
            total = max((out - 1) * s + k - n, 0)
            pads.append((total // 2, total - total // 2))
        else:
            pads.append((0, 0))
    pads.append((0, 0))
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x.astype(np.float64), pads, constant_values=fill)
    cnt = np.pad(np.ones(x.shape), pads)
    outs = [(xp.shape[1 + d] - window[d]) // strides[d] + 1 for d in range(len(window))]
    res = np.zeros((x.shape[0], *outs, x.shape[-1]))
    for idx in np.ndindex(*outs):
        sl = (
            (slice(None),)
            + tuple(slice(i * s, i * s + k) for i, s, k in zip(idx, strides, window))
            + (slice(None),)
        )
        red = tuple(range(1, 1 + len(window)))
        if kind == "max":
            v = xp[sl].max(red)
        elif kind == "sum":
            v = xp[sl].sum(red)
        else:
            v = xp[sl].sum(red) / cnt[sl].sum(red)
        res[(slice(None),) + idx] = v
    return res


@settings(max_examples=12)
@given(
    kind=st.sampled_from(["max", "sum", "avg"]),
    padding=st.sampled_from(["SAME", "VALID"]),
    h=st.integers(2, 6),
    w=st.integers(2, 6),
    kh=st.integers(1, 3),
    kw=st.integers(1, 2),
    sh=st.integers(1, 2),
    sw=st.integers(1, 3),
)
def test_pooling_against_numpy(kind, padding, h, w, kh, kw, sh, sw):
    layer = {"max": stax.MaxPool, "sum": stax.SumPool, "avg": stax.AvgPool}[kind]
    init_fun, apply_fun = layer((kh, kw), (sh, sw), padding)
    x = _randn(2, h, w, 3)
    out_shape, params = init_fun(KEY, x.shape)
    expected = _np_pool(x, (kh, kw), (sh, sw), padding, kind)
    assert out_shape == expected.shape and params == ()
    _close(apply_fun(params, x), expected, rtol=1e-5, atol=1e-5)


def test_pooling_spec_moves_batch_and_channel_axes():
    x = _randn(2, 3, 5, 4)  # NCHW
    for layer, kind in [(stax.AvgPool, "avg"), (stax.MaxPool, "max")]:
        _, apply_fun = layer((2, 3), (2, 1), "SAME", spec="NCHW")
        expected = _np_pool(x.transpose(0, 2, 3, 1), (2, 3), (2, 1), "SAME", kind)
        _close(apply_fun((), x), expected.transpose(0, 3, 1, 2))
    # 1-D pooling on NWC inputs (the default layout puts batch first, channels last).
    x1 = _randn(2, 7, 3)
    _close(stax.MaxPool((3,), (2,))[1]((), x1), _np_pool(x1, (3,), (2,), "VALID", "max"))


def test_shape_plumbing_layers():
    x = _randn(2, 3, 4)
    assert stax.Flatten[0](KEY, (-1, 3, 4)) == ((-1, 12), ())
    np.testing.assert_array_equal(stax.Flatten[1]((), x), x.reshape(2, 12))
    assert stax.Identity[0](KEY, (2, 3)) == ((2, 3), ())
    assert stax.Identity[1]((), x) is x
    assert stax.FanOut(3)[0](KEY, (2, 3)) == ([(2, 3)] * 3, ())
    assert stax.FanOut(2)[1]((), x) == [x, x]
    y = _randn(2, 3, 4)
    assert stax.FanInSum[0](KEY, [(2, 3, 4), (2, 3, 4)]) == ((2, 3, 4), ())
    _close(stax.FanInSum[1]((), [x, y]), x + y)
    z = _randn(2, 5, 4)
    init_fun, apply_fun = stax.FanInConcat(1)
    assert init_fun(KEY, [(2, 3, 4), (2, 5, 4)]) == ((2, 8, 4), ())
    np.testing.assert_array_equal(apply_fun((), [x, z]), np.concatenate([x, z], 1))


def test_parallel_and_serial_apply():
    init_fun, apply_fun = stax.serial(
        stax.FanOut(2),
        stax.parallel(stax.Dense(3), stax.serial(stax.Dense(3), stax.Tanh)),
        stax.FanInSum,
        stax.Relu,
    )
    out_shape, params = init_fun(KEY, (-1, 4))
    assert out_shape == (-1, 3)
    x = _randn(5, 4)
    _, ((W1, b1), ((W2, b2), _)), _, _ = params
    x64 = x.astype(np.float64)
    expected = np.maximum(x64 @ W1 + b1 + np.tanh(x64 @ W2 + b2), 0)
    _close(apply_fun(params, x), expected, rtol=1e-5, atol=1e-6)


def test_dropout_uses_the_bernoulli_draw():
    init_fun, apply_fun = stax.Dropout(0.7)
    assert init_fun(KEY, (4, 5)) == ((4, 5), ())
    x = _randn(4, 5)
    key = random.PRNGKey(3)
    keep = np.asarray(random.bernoulli(key, 0.7, (4, 5)))
    _close(apply_fun((), x, rng=key), np.where(keep, x / 0.7, 0))
    # Any other mode passes inputs through (still requiring a key, as in JAX).
    np.testing.assert_array_equal(stax.Dropout(0.7, mode="test")[1]((), x, rng=key), x)
    with pytest.raises(ValueError, match="Dropout.*PRNG key"):
        apply_fun((), x)
    # In serial, layer k's key is split(rng, n)[k].
    _, apply_net = stax.serial(stax.Identity, stax.Dropout(0.5))
    keep = np.asarray(random.bernoulli(random.split(key, 2)[1], 0.5, (4, 5)))
    _close(apply_net([(), ()], x, rng=key), np.where(keep, x / 0.5, 0))


def test_init_helpers_are_jax_nn_initializers():
    assert stax.glorot is initializers.glorot_normal and stax.randn is initializers.normal
    assert stax.logsoftmax is fg.nn.log_softmax and stax.zeros is initializers.zeros
    np.testing.assert_array_equal(
        stax.glorot()(KEY, (3, 4)), initializers.glorot_normal()(KEY, (3, 4))
    )


# ============================================================================ stax: transforms


def _cnn():
    return stax.serial(
        stax.Conv(3, (2, 2), padding="SAME"),
        stax.Tanh,
        stax.AvgPool((2, 2), (2, 2)),
        stax.Flatten,
        stax.Dense(2),
        stax.LogSoftmax,
    )


def test_cnn_gradients_check_grads():
    init_fun, apply_fun = _cnn()
    _, params = init_fun(KEY, (2, 4, 4, 1))
    x = _randn(2, 4, 4, 1)
    (W, b), _, _, _, (W2, b2), _ = params

    def f(W, b, W2):
        net = [(W, b), (), (), (), (W2, b2), ()]
        return fnp.sum(apply_fun(net, x) * fnp.arange(4.0).reshape(2, 2))

    check_grads(f, (W, b, W2), order=1, modes=("rev",), atol=2e-2, rtol=2e-2)


def test_maxpool_batchnorm_gradients_check_grads():
    _, pool = stax.MaxPool((2, 2), (1, 1), "SAME")
    _, bn = stax.BatchNorm(axis=(0, 1, 2))
    x = _randn(2, 3, 3, 2)
    check_grads(lambda x: fnp.sum(fnp.sin(pool((), x))), (x,), order=1, atol=2e-2, rtol=2e-2)
    beta, gamma = _randn(2), _randn(2)
    check_grads(
        lambda x, g: fnp.sum(bn((beta, g), x) ** 3),
        (x, gamma),
        order=1,
        modes=("rev",),
        atol=5e-2,
        rtol=5e-2,
    )


def test_apply_vmap_matches_loop_and_jit_matches_eager():
    init_fun, apply_fun = _cnn()
    _, params = init_fun(KEY, (1, 4, 4, 1))
    xs = _randn(3, 1, 4, 4, 1)
    batched = fg.vmap(apply_fun, in_axes=(None, 0))(params, xs)
    for i in range(3):
        _close(batched[i], apply_fun(params, xs[i]), rtol=1e-5, atol=1e-6)
    _close(fg.jit(apply_fun)(params, xs[0]), apply_fun(params, xs[0]), rtol=1e-5, atol=1e-6)
    # Randomness through jit: same key, same dropout mask.
    _, drop_net = stax.serial(stax.Dense(4), stax.Dropout(0.5))
    _, dparams = stax.serial(stax.Dense(4), stax.Dropout(0.5))[0](KEY, (2, 3))
    x = _randn(2, 3)
    key = random.PRNGKey(9)
    _close(
        fg.jit(lambda p, x, k: drop_net(p, x, rng=k))(dparams, x, key),
        drop_net(dparams, x, rng=key),
        rtol=1e-6,
    )


# ============================================================================ stax: errors


def test_stax_bad_input_errors():
    with pytest.raises(ValueError, match=r"stax.Dense: input_shape"):
        stax.Dense(3)[0](KEY, ())
    with pytest.raises(TypeError, match=r"stax.Dense: out_dim must be an integer"):
        stax.Dense(2.5)
    with pytest.raises(ValueError, match=r"stax.GeneralConv: filter_shape \(3,\)"):
        stax.Conv(4, (3,))
    with pytest.raises(ValueError, match=r"stax.GeneralConv: input_shape \(2, 5, 3\)"):
        stax.Conv(4, (3, 3))[0](KEY, (2, 5, 3))
    with pytest.raises(ValueError, match=r"stax.MaxPool: spec 'NHW'"):
        stax.MaxPool((2, 2), spec="NHW")
    with pytest.raises(ValueError, match=r"stax.AvgPool: input_shape \(2, 4\)"):
        stax.AvgPool((2, 2))[0](KEY, (2, 4))
    with pytest.raises(ValueError, match=r"stax.parallel: got 1 input shapes for 2 layers"):
        stax.parallel(stax.Relu, stax.Relu)[0](KEY, [(2,)])
    with pytest.raises(ValueError, match=r"stax.FanInConcat: input shapes"):
        stax.FanInConcat(0)[0](KEY, [(2, 3), (2, 4)])
    with pytest.raises(ValueError, match=r"stax.Dropout: rate"):
        stax.Dropout(1.5)
    with pytest.raises(ValueError, match=r"stax.BatchNorm: axis \(3,\)"):
        stax.BatchNorm(3)[0](KEY, (2, 3))
    with pytest.raises(ValueError, match=r"stax.serial: got 1 layer params for 2 layers"):
        stax.serial(stax.Relu, stax.Relu)[1]([()], _randn(2))


# ============================================================================ optimizers


def _np_opt(name, steps, grads_of, x0, lr):
    """Hand-written numpy versions of the optimizers' per-array rules."""
    x = x0.astype(np.float64)
    a = np.zeros_like(x)
    m = np.zeros_like(x)
    for i in range(steps):
        g = grads_of(x)
        if name == "sgd":
            x = x - lr * g
        elif name == "momentum":
            m = 0.9 * m + g
            x = x - lr * m
        elif name == "nesterov":
            m = 0.9 * m + g
            x = x - lr * (0.9 * m + g)
        elif name == "adagrad":
            a = a + g * g
            m = 0.1 * np.where(a > 0, g / np.sqrt(a), 0) + 0.9 * m
            x = x - lr * m
        elif name == "rmsprop":
            a = 0.9 * a + 0.1 * g * g
            x = x - lr * g / np.sqrt(a + 1e-8)
        elif name == "rmsprop_momentum":
            a = 0.9 * a + 0.1 * g * g
            m = 0.9 * m + lr * g / np.sqrt(a + 1e-8)
            x = x - m
        elif name == "adam":
            m = 0.1 * g + 0.9 * m
            a = 0.001 * g * g + 0.999 * a
            mhat, ahat = m / (1 - 0.9 ** (i + 1)), a / (1 - 0.999 ** (i + 1))
            x = x - lr * mhat / (np.sqrt(ahat) + 1e-8)
        elif name == "adamax":
            m = 0.1 * g + 0.9 * m
            a = np.maximum(0.999 * a, np.abs(g))
            x = x - lr / (1 - 0.9 ** (i + 1)) * m / (a + 1e-8)
        elif name == "sm3":
            if i == 0:
                vs = [np.zeros(n) for n in x.shape]
            acc = vs[0][:, None]
            for ax in range(1, x.ndim):
                acc = np.minimum(acc, vs[ax][None, :])
            acc = acc + g * g
            m = 0.1 * np.where(acc > 0, g / np.sqrt(acc), 0) + 0.9 * m
            x = x - lr * m
            vs = [acc.max(1), acc.max(0)]
    return x


OPTIMIZERS = {
    "sgd": lambda: O.sgd(0.1),
    "momentum": lambda: O.momentum(0.1, 0.9),
    "nesterov": lambda: O.nesterov(0.1, 0.9),
    "adagrad": lambda: O.adagrad(0.1),
    "rmsprop": lambda: O.rmsprop(0.1),
    "rmsprop_momentum": lambda: O.rmsprop_momentum(0.1),
    "adam": lambda: O.adam(0.1),
    "adamax": lambda: O.adamax(0.1),
    "sm3": lambda: O.sm3(0.1),
}


def _quad_loss(p):
    return (
        fnp.sum(p["w"] ** 2 * fnp.arange(1.0, 7.0).reshape(3, 2))
        + fnp.sum(fnp.sin(p["b"]))
        + p["s"] ** 2
    )


def _quad_grads(w, b, s):
    return 2 * w * np.arange(1.0, 7.0).reshape(3, 2), np.cos(b), 2 * s


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_steps_against_numpy(name):
    init_fun, update_fun, get_params = OPTIMIZERS[name]()
    w0, b0 = _randn(3, 2), _randn(2, 2)
    params = {"w": w0, "b": b0, "s": np.float32(0.7)}
    state = init_fun(params)
    for i in range(3):
        state = update_fun(i, fg.grad(_quad_loss)(get_params(state)), state)
    got = get_params(state)
    assert set(got) == {"w", "b", "s"} and got["s"].shape == ()
    gw, gb = (lambda x: _quad_grads(x, 0, 0)[0]), (lambda x: _quad_grads(0, x, 0)[1])
    _close(got["w"], _np_opt(name, 3, gw, w0, 0.1), rtol=1e-4, atol=1e-5)
    _close(got["b"], _np_opt(name, 3, gb, b0, 0.1), rtol=1e-4, atol=1e-5)
    if name == "sm3":  # a 0-d parameter is kept 1-d inside the state
        s_ref = _np_opt(name, 3, lambda x: 2 * x, np.full((1, 1), 0.7), 0.1).reshape(())
    else:
        s_ref = _np_opt(name, 3, lambda x: 2 * x, np.float64(0.7), 0.1)
    _close(got["s"], s_ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["adam", "momentum", "sm3"])
def test_update_under_jit_matches_eager(name):
    init_fun, update_fun, get_params = OPTIMIZERS[name]()
    params = {"w": _randn(3, 2), "b": _randn(2, 2), "s": np.float32(0.7)}

    def step(i, state):
        return update_fun(i, fg.grad(_quad_loss)(get_params(state)), state)

    eager = jitted = init_fun(params)
    jstep = fg.jit(step)
    for i in range(3):
        eager, jitted = step(i, eager), jstep(i, jitted)
    assert fg.tree_util.tree_structure(jitted) == fg.tree_util.tree_structure(eager)
    for a, b in zip(fg.tree_util.tree_leaves(jitted), fg.tree_util.tree_leaves(eager)):
        _close(a, b, rtol=1e-5, atol=1e-6)


def test_vmap_over_optimizer_states_matches_loop():
    init_fun, update_fun, get_params = O.adam(0.05)
    ws = _randn(4, 3)
    gs = _randn(4, 3)
    states = init_fun(ws)
    batched = fg.vmap(lambda g, s: update_fun(0, g, s))(gs, states)
    for k in range(4):
        one = update_fun(0, gs[k], init_fun(ws[k]))
        _close(get_params(batched)[k], get_params(one), rtol=1e-6)


def test_grad_through_an_update_check_grads():
    _, update_fun, get_params = O.momentum(0.1, 0.9)
    init_fun = O.momentum(0.1, 0.9)[0]

    def loss_after_steps(w):
        state = init_fun(w)
        for i in range(2):
            state = update_fun(
                i, fg.grad(lambda v: fnp.sum(fnp.sin(v) * v))(get_params(state)), state
            )
        return fnp.sum(get_params(state) ** 2)

    check_grads(loss_after_steps, (_randn(3),), order=1, atol=1e-2, rtol=1e-2)


def test_step_size_schedules_against_formulas():
    i = np.arange(8)
    _close([O.constant(0.3)(k) for k in i], np.full(8, 0.3))
    _close([O.exponential_decay(0.5, 3, 0.1)(k) for k in i], 0.5 * 0.1 ** (i / 3))
    _close([O.inverse_time_decay(0.5, 2, 0.3)(k) for k in i], 0.5 / (1 + 0.3 * i / 2))
    _close(
        [O.inverse_time_decay(0.5, 2, 0.3, staircase=True)(k) for k in i],
        0.5 / (1 + 0.3 * np.floor(i / 2)),
    )
    _close(
        [O.polynomial_decay(1.0, 4, 0.1, 2.0)(k) for k in i],
        (1 - np.minimum(i, 4) / 4) ** 2 * 0.9 + 0.1,
    )
    _close(
        [O.piecewise_constant([1, 3], [1.0, 0.5, 0.1])(k) for k in i],
        [1.0, 1.0, 0.5, 0.5, 0.1, 0.1, 0.1, 0.1],
    )
    # A schedule is traceable: under jit with a traced step index.
    sched = O.piecewise_constant([2, 5], [1.0, 0.5, 0.25])
    _close([fg.jit(sched)(k) for k in i], [sched(k) for k in i])
    sched = O.make_schedule(0.1)
    assert sched(5) == 0.1 and O.make_schedule(sched) is sched
    # sgd with a schedule: the step size of step i is schedule(i).
    init_fun, update_fun, get_params = O.sgd(O.exponential_decay(1.0, 1, 0.5))
    state = init_fun(np.float32(0.0))
    for k in range(3):
        state = update_fun(k, np.float32(1.0), state)
    _close(get_params(state), -(1.0 + 0.5 + 0.25))


def test_l2_norm_and_clip_grads():
    tree = {"a": _randn(3), "b": [_randn(2, 2), np.float32(2.0)]}
    leaves = [np.asarray(v, np.float64).ravel() for v in fg.tree_util.tree_leaves(tree)]
    norm = np.sqrt(sum((v**2).sum() for v in leaves))
    _close(O.l2_norm(tree), norm)
    clipped = O.clip_grads(tree, norm / 2)
    for c, v in zip(fg.tree_util.tree_leaves(clipped), fg.tree_util.tree_leaves(tree)):
        _close(c, np.asarray(v) / 2)
    _close(O.l2_norm(clipped), norm / 2)
    unclipped = O.clip_grads(tree, norm * 2)
    for c, v in zip(fg.tree_util.tree_leaves(unclipped), fg.tree_util.tree_leaves(tree)):
        _close(c, v)
    assert float(O.l2_norm({})) == 0.0


def test_pack_unpack_round_trip_and_state_pytree():
    params = {"w": _randn(3, 2), "layers": [(_randn(2), _randn(1))]}
    state = O.adam(0.1)[0](params)
    # Only arrays are the pytree's leaves; the structures are static.
    leaves = fg.tree_util.tree_leaves(state)
    assert len(leaves) == 9 and all(hasattr(v, "shape") for v in leaves)
    marked = O.unpack_optimizer_state(state)
    assert isinstance(marked["w"], O.JoinPoint) and len(marked["w"].subtree) == 3
    assert isinstance(marked["layers"][0][1], O.JoinPoint)
    assert list(marked["w"]) == [marked["w"].subtree]
    packed = O.pack_optimizer_state(marked)
    assert isinstance(packed, O.OptimizerState)
    assert packed.tree_def == state.tree_def and packed.subtree_defs == state.subtree_defs
    for a, b in zip(fg.tree_util.tree_leaves(packed), leaves):
        np.testing.assert_array_equal(a, b)
    doubled = fg.tree_util.tree_map(lambda v: v * 2, state)
    assert isinstance(doubled, O.OptimizerState)
    np.testing.assert_array_equal(O.adam(0.1)[2](doubled)["w"], params["w"] * 2)


def test_optimizer_decorator_on_a_custom_rule():
    @O.optimizer
    def signed_sgd(step_size):
        def init(x0):
            return {"x": x0, "n": fnp.zeros((), np.int32)}

        def update(i, g, state):
            return {"x": state["x"] - step_size * fnp.sign(g), "n": state["n"] + 1}

        return init, update, lambda state: state["x"]

    opt = signed_sgd(0.5)
    assert isinstance(opt, O.Optimizer) and opt.init_fn is opt[0]
    state = opt.init_fn([np.array([1.0, -2.0], np.float32), np.float32(3.0)])
    state = opt.update_fn(0, [np.array([2.0, -1.0], np.float32), np.float32(-4.0)], state)
    got = opt.params_fn(state)
    np.testing.assert_array_equal(got[0], [0.5, -1.5])
    np.testing.assert_array_equal(got[1], 3.5)
    assert signed_sgd.__name__ == "signed_sgd"


def test_optimizer_errors():
    init_fun, update_fun, get_params = O.sgd(0.1)
    state = init_fun({"a": np.zeros(2), "b": np.zeros(3)})
    with pytest.raises(TypeError, match="gradient tree does not match the parameter tree"):
        update_fun(0, {"a": np.zeros(2)}, state)
    with pytest.raises(TypeError, match="make_schedule.*shape \\(2,\\)"):
        O.sgd(np.array([0.1, 0.2]))
    with pytest.raises(ValueError, match="one shorter"):
        O.piecewise_constant([1, 2], [1.0, 2.0])
    with pytest.raises(ValueError, match="1-d"):
        O.piecewise_constant(1, [1.0, 2.0])
    with pytest.raises(TypeError, match="every leaf must be a JoinPoint"):
        O.pack_optimizer_state({"a": np.zeros(2)})
    with pytest.raises(TypeError, match="expected the OptimizerState"):
        get_params({"a": 1})

    @O.optimizer
    def bad(step_size):
        return (lambda x: (x, x)), (lambda i, g, s: (s[0], s[1], s[1])), (lambda s: s[0])

    state = bad(0.1)[0](np.zeros(2))
    with pytest.raises(TypeError, match="kept|keep the structure"):
        bad(0.1)[1](0, np.zeros(2), state)


# ============================================================================ training


def _train(layers, x, labels, opt, steps):
    init_fun, apply_fun = stax.serial(*layers)
    _, params = init_fun(KEY, x.shape)
    opt_init, opt_update, get_params = opt

    def loss(params, x, labels):
        logits = apply_fun(params, x)
        return -fnp.mean(fnp.sum(logits * labels, axis=-1))

    @fg.jit
    def update(i, state, x, labels):
        value, grads = fg.value_and_grad(loss)(get_params(state), x, labels)
        return value, opt_update(i, grads, state)

    state = opt_init(params)
    losses = []
    for i in range(steps):
        value, state = update(i, state, x, labels)
        losses.append(float(value))
    return losses


def test_train_tiny_mlp_under_jit():
    x = _randn(16, 4)
    labels = np.eye(3, dtype=np.float32)[(x[:, 0] > 0).astype(int) + (x[:, 1] > 0)]
    losses = _train(
        [stax.Dense(8), stax.Relu, stax.Dense(3), stax.LogSoftmax], x, labels, O.adam(0.05), 15
    )
    assert losses[-1] < 0.6 * losses[0] and all(np.isfinite(losses))


def test_train_tiny_cnn_under_jit():
    x = _randn(8, 6, 6, 1)
    labels = np.eye(2, dtype=np.float32)[(x[:, :3].sum((1, 2, 3)) > 0).astype(int)]
    layers = [
        stax.Conv(4, (3, 3), padding="SAME"),
        stax.Relu,
        stax.MaxPool((2, 2), (2, 2)),
        stax.Flatten,
        stax.Dense(2),
        stax.LogSoftmax,
    ]
    losses = _train(layers, x, labels, O.momentum(0.05, 0.9), 10)
    assert losses[-1] < 0.8 * losses[0] and all(np.isfinite(losses))


def test_jax_programs_find_them_through_compat():
    import importlib

    from fungrad import compat

    compat.enable()
    try:
        jax_stax = importlib.import_module("jax.example_libraries.stax")
        jax_opt = importlib.import_module("jax.example_libraries.optimizers")
        assert jax_stax.Dense is stax.Dense and jax_opt.adam is O.adam
        assert jax_opt.OptimizerState is O.OptimizerState
    finally:
        compat.disable()
