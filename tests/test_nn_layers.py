"""fungrad.nn layers: forward against numpy references (loops over windows and kernel offsets),
derivatives against finite differences (check_grads), jit against eager, vmap against a Python
loop, and the GPU backend against eager."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import nn, tree_util
from fungrad.testing import check_grads

RNG = np.random.default_rng(0)


def _rand(*shape, dtype=np.float32):
    return RNG.normal(size=shape).astype(dtype)


def _key(i=0):
    return fg.random.key(i)


# -- numpy references ---------------------------------------------------------------------


def _same_pads(size, k, s, d, lower=False):
    span = d * (k - 1) + 1
    out = -(-size // s)
    total = max((out - 1) * s + span - size, 0)
    lo = (total + 1) // 2 if lower else total // 2
    return lo, total - lo


def _pads(padding, spatial, ks, ss, ds):
    if padding in ("SAME", "SAME_LOWER"):
        return [
            _same_pads(n, k, s, d, padding == "SAME_LOWER")
            for n, k, s, d in zip(spatial, ks, ss, ds)
        ]
    if padding == "VALID":
        return [(0, 0)] * len(spatial)
    if isinstance(padding, int):
        return [(padding, padding)] * len(spatial)
    return [(p, p) if isinstance(p, int) else tuple(p) for p in padding]


def np_conv(x, w, stride, padding, dilation, groups):
    """Channels-last convolution of one batch ``x`` (N, *S, C) with ``w`` (*K, C/g, O)."""
    n = x.ndim - 2
    ks = w.shape[:n]
    pads = _pads(padding, x.shape[1:-1], ks, stride, dilation)
    xp = np.pad(x.astype(np.float64), [(0, 0), *pads, (0, 0)])
    out_sp = [(xp.shape[1 + i] - dilation[i] * (ks[i] - 1) - 1) // stride[i] + 1 for i in range(n)]
    cg, og = w.shape[-2], w.shape[-1] // groups
    y = np.zeros((x.shape[0], *out_sp, w.shape[-1]))
    if min(out_sp) <= 0:  # the dilated kernel is wider than the padded input
        return np.zeros((x.shape[0], *(max(o, 0) for o in out_sp), w.shape[-1]))
    for kpos in itertools.product(*(range(k) for k in ks)):
        sl = tuple(
            slice(kpos[i] * dilation[i], kpos[i] * dilation[i] + stride[i] * (out_sp[i] - 1) + 1,
                  stride[i])
            for i in range(n)
        )  # fmt: skip
        patch = xp[(slice(None), *sl)]
        for g in range(groups):
            y[..., g * og : (g + 1) * og] += (
                patch[..., g * cg : (g + 1) * cg] @ w[kpos][:, g * og : (g + 1) * og]
            )
    return y


def np_conv_transpose(y, w, stride, pads, dilation, groups, out_pad):
    """Channels-last transposed convolution by scattering: input ``y`` (N, *S, I), ``w``
    (*K, O/g, I); ``pads`` the forward (low, high) pairs."""
    n = y.ndim - 2
    ks = w.shape[:n]
    og, ig = w.shape[-2], w.shape[-1] // groups
    full_sp = [(y.shape[1 + i] - 1) * stride[i] + dilation[i] * (ks[i] - 1) + 1 for i in range(n)]
    full = np.zeros((y.shape[0], *(f + p for f, p in zip(full_sp, out_pad)), og * groups))
    for pos in itertools.product(*(range(s) for s in y.shape[1:-1])):
        for kpos in itertools.product(*(range(k) for k in ks)):
            at = tuple(pos[i] * stride[i] + kpos[i] * dilation[i] for i in range(n))
            for g in range(groups):
                full[(slice(None), *at, slice(g * og, (g + 1) * og))] += (
                    y[(slice(None), *pos, slice(g * ig, (g + 1) * ig))]
                    @ w[kpos][:, g * ig : (g + 1) * ig].T
                )
    sl = tuple(slice(lo, lo + full_sp[i] - lo - hi + out_pad[i]) for i, (lo, hi) in enumerate(pads))
    return full[(slice(None), *sl)]


def np_pool(x, n, k, s, padding, op, count_include_pad=True):
    """Pooling over the ``n`` axes before the last of a batched ``x`` (N, *S, C)."""
    pads = _pads(padding, x.shape[1:-1], k, s, (1,) * n)
    fill = -np.inf if op == "max" else 0.0
    xp = np.pad(x.astype(np.float64), [(0, 0), *pads, (0, 0)], constant_values=fill)
    mask = np.pad(np.ones(x.shape[1:-1]), pads)
    out_sp = [(xp.shape[1 + i] - k[i]) // s[i] + 1 for i in range(n)]
    y = np.zeros((x.shape[0], *out_sp, x.shape[-1]))
    for pos in itertools.product(*(range(o) for o in out_sp)):
        win = tuple(slice(pos[i] * s[i], pos[i] * s[i] + k[i]) for i in range(n))
        patch = xp[(slice(None), *win)]
        axes = tuple(range(1, n + 1))
        if op == "max":
            y[(slice(None), *pos)] = patch.max(axis=axes)
        else:
            denom = math.prod(k) if count_include_pad else mask[win].sum()
            y[(slice(None), *pos)] = patch.sum(axis=axes) / denom
    return y


# -- Linear, Embedding, Lambda ----------------------------------------------------------------


def test_linear_forward_init_and_leading_axes():
    lin = nn.Linear(5, 3, key=_key())
    assert lin.weight.shape == (5, 3) and lin.bias.shape == (3,)
    np.testing.assert_array_equal(lin.bias, 0)
    x = _rand(2, 4, 5)
    np.testing.assert_allclose(lin(x), x @ np.asarray(lin.weight), rtol=1e-5, atol=1e-6)
    big = nn.Linear(400, 300, key=_key(1))  # lecun_normal: std 1/sqrt(fan_in)
    assert abs(float(np.std(big.weight)) * math.sqrt(400) - 1) < 0.05
    assert nn.Linear(5, 3, use_bias=False, key=_key()).bias is None
    with pytest.raises(TypeError, match=r"Linear: input of shape \(2, 4\)"):
        lin(np.zeros((2, 4), np.float32))


def test_embedding_and_lambda_identity():
    emb = nn.Embedding(7, 3, key=_key())
    ids = np.array([[0, 6], [3, 3]])
    np.testing.assert_array_equal(emb(ids), np.asarray(emb.weight)[ids])
    emb2 = nn.Embedding(weight=np.eye(4, dtype=np.float32))
    assert emb2.num_embeddings == 4 and emb2.embedding_size == 4
    with pytest.raises(TypeError, match="ids must be integers"):
        emb(np.array([1.0]))
    np.testing.assert_array_equal(fg.jit(lambda e, i: e(i))(emb, ids), emb(ids))
    np.testing.assert_array_equal(fg.vmap(emb)(ids), emb(ids))
    x = _rand(3)
    np.testing.assert_allclose(nn.Lambda(fg.nn.relu)(x), np.maximum(x, 0))
    assert nn.Identity()(x) is x
    assert tree_util.tree_leaves(nn.Lambda(fg.nn.relu)) == []


# -- convolutions -----------------------------------------------------------------------------


conv_cases = st.fixed_dictionaries(
    {
        "n": st.integers(1, 3),
        "k": st.integers(1, 3),
        "s": st.integers(1, 3),
        "d": st.integers(1, 2),
        "g": st.sampled_from([1, 2]),
        "pad": st.sampled_from(["VALID", "SAME", "SAME_LOWER", 1, "pairs"]),
        "size": st.integers(4, 6),
    }
)


@settings(max_examples=20, deadline=None)
@given(conv_cases)
def test_conv_matches_numpy(c):
    n, g = c["n"], c["g"]
    pad = [(1, 0)] * n if c["pad"] == "pairs" else c["pad"]
    conv = nn.Conv(n, 2 * g, 3 * g, c["k"], c["s"], pad, c["d"], g, key=_key())
    x = _rand(2, *(c["size"],) * n, 2 * g)
    ref = np_conv(x, np.asarray(conv.weight), conv.stride, pad, conv.dilation, g)
    np.testing.assert_allclose(conv(x), ref + np.asarray(conv.bias), rtol=1e-4, atol=1e-4)


def test_conv_depthwise_unbatched_and_extra_batch_axes():
    conv = nn.Conv2d(4, 8, (3, 2), padding="SAME", groups=4, key=_key())  # depthwise x2
    assert conv.weight.shape == (3, 2, 1, 8)
    x = _rand(2, 3, 5, 5, 4)
    ref = np_conv(x.reshape(6, 5, 5, 4), np.asarray(conv.weight), (1, 1), "SAME", (1, 1), 4)
    np.testing.assert_allclose(conv(x), ref.reshape(2, 3, 5, 5, 8), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(conv(x[0, 0]), ref[0], rtol=1e-4, atol=1e-5)
    with pytest.raises(TypeError, match="in_channels=4"):
        conv(_rand(5, 5, 3))
    with pytest.raises(ValueError, match="groups=3 must be positive and divide"):
        nn.Conv2d(4, 6, 3, groups=3, key=_key())
    with pytest.raises(ValueError, match="padding must be"):
        nn.Conv1d(1, 1, 3, padding="FULL", key=_key())


@pytest.mark.parametrize(
    "n,k,s,pad,d,g,size",
    [
        (1, 3, 2, 0, 1, 1, 4),
        (1, 4, 3, "SAME", 1, 2, 3),
        (2, 3, 2, ((1, 2), (0, 1)), 2, 2, 3),
        (2, 2, 1, "VALID", 1, 1, 3),
        (3, 2, 2, "SAME", 1, 1, 2),
        (2, 4, 2, "SAME_LOWER", 1, 1, 3),
        (1, 2, 3, "SAME", 1, 1, 3),  # kernel narrower than the stride: output_padding
    ],
)
def test_conv_transpose_matches_numpy_and_is_the_convs_adjoint(n, k, s, pad, d, g, size):
    ct = nn.ConvTranspose(n, 2 * g, 3 * g, k, s, pad, dilation=d, groups=g, key=_key())
    y = _rand(2, *(size,) * n, 2 * g)
    w = np.asarray(ct.weight)
    out = ct(y)
    if isinstance(pad, str):  # the forward padding of an input of the output's size
        pads = _pads(pad, out.shape[1:-1], ct.kernel_size, ct.stride, ct.dilation)
        extra = [
            o - ((size - 1) * s - lo - hi + d * (k - 1) + 1)
            for o, (lo, hi) in zip(out.shape[1:-1], pads)
        ]
    else:
        pads, extra = _pads(pad, (), None, None, None), [0] * n
    ref = np_conv_transpose(y, w, ct.stride, pads, ct.dilation, g, extra)
    np.testing.assert_allclose(out, ref + np.asarray(ct.bias), rtol=1e-4, atol=1e-4)
    if isinstance(pad, str) and pad.startswith("SAME"):
        assert out.shape[1:-1] == (size * s,) * n
    # the adjoint of the Conv with the same hyperparameters and this kernel
    conv = nn.Conv(n, 3 * g, 2 * g, k, s, pad, d, g, use_bias=False, key=_key())
    conv = tree_util.tree_map(lambda _: ct.weight, conv)
    x = _rand(*out.shape)
    _, vjp = fg.vjp(conv, x)
    (adj,) = vjp(fnp.asarray(y))
    np.testing.assert_allclose(out - np.asarray(ct.bias), adj, rtol=1e-4, atol=1e-4)


def test_conv_transpose_output_padding():
    ct = nn.ConvTranspose1d(1, 1, 3, stride=2, output_padding=1, use_bias=False, key=_key())
    y = _rand(1, 4, 1)
    ref = np_conv_transpose(y, np.asarray(ct.weight), (2,), [(0, 0)], (1,), 1, [1])
    assert ct(y).shape == (1, 10, 1)
    np.testing.assert_allclose(ct(y), ref, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="output_padding"):
        nn.ConvTranspose1d(1, 1, 3, stride=2, output_padding=2, key=_key())


# -- pooling ----------------------------------------------------------------------------------


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(1, 3),
    k=st.integers(1, 3),
    s=st.one_of(st.none(), st.integers(1, 2)),
    pad=st.sampled_from(["VALID", "SAME", 1]),
    include=st.booleans(),
)
def test_pools_match_numpy(n, k, s, pad, include):
    if pad == 1 and k == 1:
        pad = 0  # padding wider than half the window leaves windows of padding only
    x = _rand(2, *(5,) * n, 3)
    stride = (k,) * n if s is None else (s,) * n
    mp = nn.MaxPool(n, k, s, pad)
    np.testing.assert_allclose(mp(x), np_pool(x, n, (k,) * n, stride, pad, "max"), rtol=1e-6)
    ap = nn.AvgPool(n, k, s, pad, count_include_pad=include)
    ref = np_pool(x, n, (k,) * n, stride, pad, "avg", include)
    np.testing.assert_allclose(ap(x), ref, rtol=1e-5, atol=1e-6)


def test_pool_defaults_globals_and_ints():
    x = _rand(2, 4, 6, 3)
    assert nn.MaxPool2d(2)(x).shape == (2, 2, 3, 3)  # stride defaults to the window
    np.testing.assert_allclose(nn.MaxPool2d(2)(x[0]), nn.MaxPool2d(2)(x)[0])
    np.testing.assert_allclose(
        nn.GlobalAvgPool(2)(x), x.mean(axis=(1, 2)), rtol=1e-6, atol=1e-6
    )  # (a mean of 24 O(1) values: float32 cancellation leaves ~1e-8 absolute)
    np.testing.assert_allclose(nn.GlobalMaxPool(2, keepdims=True)(x), x.max((1, 2), keepdims=True))
    xi = np.arange(12, dtype=np.int32).reshape(1, 12, 1)
    np.testing.assert_array_equal(nn.MaxPool1d(3)(xi)[0, :, 0], [2, 5, 8, 11])
    with pytest.raises(TypeError, match="AvgPool: needs a floating input"):
        nn.AvgPool1d(3)(xi)


# -- normalisation ----------------------------------------------------------------------------


def _np_norm(x, axes, eps):
    x = x.astype(np.float64)
    m = x.mean(axis=axes, keepdims=True)
    return (x - m) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)


def test_layer_rms_group_norm_match_numpy():
    x = _rand(2, 3, 4, 6) * 3 + 1
    ln = nn.LayerNorm((4, 6))
    ln = tree_util.tree_map(lambda a: a + _rand(*a.shape), ln)  # non-trivial affine
    ref = _np_norm(x, (2, 3), 1e-5) * np.asarray(ln.weight) + np.asarray(ln.bias)
    np.testing.assert_allclose(ln(x), ref, rtol=1e-4, atol=1e-5)
    rms = nn.RMSNorm(6, eps=1e-6)
    ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(rms(x), ref, rtol=1e-5, atol=1e-6)
    gn = nn.GroupNorm(3, 6, num_spatial_dims=2)
    gn = tree_util.tree_map(lambda a: a + _rand(*a.shape), gn)
    xg = x.reshape(2, 3, 4, 3, 2)
    ref = _np_norm(xg, (1, 2, 4), 1e-5).reshape(x.shape)
    ref = ref * np.asarray(gn.weight) + np.asarray(gn.bias)
    np.testing.assert_allclose(gn(x), ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gn(x[1]), ref[1], rtol=1e-4, atol=1e-5)  # unbatched
    assert nn.LayerNorm(6, use_weight=False, use_bias=False).weight is None
    with pytest.raises(TypeError, match="does not end in the layer's shape"):
        ln(_rand(4, 5))
    with pytest.raises(ValueError, match="groups=4 must be positive and divide channels=6"):
        nn.GroupNorm(4, 6, num_spatial_dims=1)


def test_batchnorm_train_updates_state_and_inference_uses_it():
    bn = nn.BatchNorm(3, momentum=0.9)
    state = bn.init_state()
    np.testing.assert_array_equal(state.var, 1)
    x = _rand(8, 5, 3) * 2 + 3
    y, state2 = bn(x, state)
    np.testing.assert_allclose(y, _np_norm(x, (0, 1), 1e-5), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(state2.mean, 0.1 * x.mean((0, 1)), rtol=1e-5)
    np.testing.assert_allclose(state2.var, 0.9 + 0.1 * x.var((0, 1)), rtol=1e-5)
    yi, state3 = bn(x, state2, inference=True)
    assert state3 is state2
    ref = (x - np.asarray(state2.mean)) / np.sqrt(np.asarray(state2.var) + 1e-5)
    np.testing.assert_allclose(yi, ref, rtol=1e-4, atol=1e-5)
    bn_eval = nn.BatchNorm(3, momentum=0.9, inference=True)
    np.testing.assert_allclose(bn_eval(x, state2)[0], yi, rtol=1e-6)
    # gradients do not flow into the new running statistics
    g = fg.grad(lambda x: bn(x, state)[1].mean.sum())(fnp.asarray(x))
    np.testing.assert_array_equal(g, 0)
    with pytest.raises(TypeError, match="state must be the BatchNormState"):
        bn(x, None)


def test_batchnorm_under_vmap_with_axis_name_equals_the_batch():
    bn = nn.BatchNorm(3, axis_name="batch")
    bn = tree_util.tree_map(lambda a: a + _rand(*a.shape), bn)
    state = bn.init_state()
    x = _rand(6, 4, 3)
    y, s = fg.vmap(lambda x: bn(x, state), axis_name="batch", out_axes=(0, None))(x)
    y_ref, s_ref = nn.BatchNorm(3)(x, state)
    y_ref = y_ref * np.asarray(bn.weight) + np.asarray(bn.bias)
    np.testing.assert_allclose(y, y_ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(s.var, s_ref.var, rtol=1e-5)


# -- dropout ----------------------------------------------------------------------------------


def test_dropout_is_reproducible_scaled_and_off_in_inference():
    d = nn.Dropout(0.25)
    x = fnp.ones((2000,))
    y1, y2 = d(x, key=_key(3)), d(x, key=_key(3))
    np.testing.assert_array_equal(y1, y2)
    vals = np.unique(np.asarray(y1))
    np.testing.assert_allclose(vals, [0.0, 1 / 0.75], rtol=1e-6)
    assert abs(float(np.mean(np.asarray(y1) == 0)) - 0.25) < 0.04
    assert not np.array_equal(np.asarray(d(x, key=_key(4))), np.asarray(y1))
    assert d(x, inference=True) is x and nn.Dropout(0.5, inference=True)(x) is x
    np.testing.assert_array_equal(nn.Dropout(1.0)(x, key=_key()), 0)
    with pytest.raises(ValueError, match="needs a PRNG key"):
        d(x)
    with pytest.raises(ValueError, match=r"p must be a probability in \[0, 1\]"):
        nn.Dropout(1.5)


# -- Sequential -------------------------------------------------------------------------------


def _cnn(key):
    k1, k2 = fg.random.split(key)
    return nn.Sequential(
        [
            nn.Conv2d(1, 4, 3, padding="SAME", key=k1),
            nn.GroupNorm(2, 4, num_spatial_dims=2),
            nn.Lambda(fg.nn.relu),
            nn.MaxPool2d(2),
            nn.GlobalAvgPool(2),
            nn.Linear(4, 3, key=k2),
        ]
    )


def test_sequential_composes_and_passes_keys_state_inference():
    model = _cnn(_key())
    x = _rand(2, 6, 6, 1)
    manual = x
    for layer in model:
        manual = layer(manual)
    np.testing.assert_allclose(model(x), manual, rtol=1e-6)
    assert len(model) == 6 and isinstance(model[1:3], nn.Sequential)
    net = nn.Sequential([nn.Linear(3, 4, key=_key()), nn.BatchNorm(4), nn.Dropout(0.5)])
    state = net.init_state()
    assert state[0] is None and state[2] is None
    x = _rand(5, 3)
    y, new = net(x, state, key=_key(1))
    y_again, _ = net(x, state, key=_key(1))
    np.testing.assert_array_equal(y, y_again)
    assert not np.allclose(new[1].mean, 0)
    y_inf, same = net(x, new, inference=True)
    h = np.asarray(net[0](x))
    ref = (h - np.asarray(new[1].mean)) / np.sqrt(np.asarray(new[1].var) + 1e-5)
    np.testing.assert_allclose(y_inf, ref, rtol=1e-4, atol=1e-5)
    assert same[1] is new[1]
    with pytest.raises(ValueError, match="init_state"):
        net(x)
    plain = nn.Sequential([net[0], fg.nn.relu])  # a function becomes a static Lambda
    assert isinstance(plain[1], nn.Lambda) and len(tree_util.tree_leaves(plain)) == 2
    np.testing.assert_allclose(fg.jit(lambda m, x: m(x))(plain, x), np.maximum(h, 0), rtol=1e-6)


def test_init_is_reproducible_and_edge_inputs():
    a, b = nn.Conv2d(2, 3, 3, key=_key(1)), nn.Conv2d(2, 3, 3, key=_key(1))
    np.testing.assert_array_equal(a.weight, b.weight)
    assert not np.array_equal(a.weight, nn.Conv2d(2, 3, 3, key=_key(2)).weight)
    # size-0 batches keep their shapes
    assert nn.Linear(5, 3, key=_key())(np.zeros((0, 5), np.float32)).shape == (0, 3)
    assert a(np.zeros((0, 5, 5, 2), np.float32)).shape == (0, 3, 3, 3)
    assert nn.MaxPool2d(2)(np.zeros((0, 4, 4, 2), np.float32)).shape == (0, 2, 2, 2)
    # NaN and inf propagate as in numpy
    x = np.array([[np.nan, 1.0, 2.0], [np.inf, 0.0, 1.0]], np.float32)
    assert np.isnan(np.asarray(nn.LayerNorm(3)(x))).all()
    np.testing.assert_array_equal(nn.MaxPool1d(2)(x[..., None])[:, 0, 0], [np.nan, np.inf])
    # Python lists are arrays; norms promote integer input to float, as mean does
    np.testing.assert_allclose(nn.LayerNorm(2)([1, 3]), [-1, 1], rtol=1e-4)
    np.testing.assert_array_equal(nn.MaxPool1d(2)([[[1], [4]]]), [[[4]]])


# -- transforms: grad, jit, vmap --------------------------------------------------------------


def _small_layers():
    k = _key(5)
    return [
        (nn.Linear(3, 2, key=k), (2, 3)),
        (nn.Conv1d(2, 2, 2, stride=2, padding=1, key=k), (1, 5, 2)),
        (nn.Conv2d(2, 2, 2, padding="SAME", groups=2, key=k), (1, 3, 3, 2)),
        (nn.ConvTranspose1d(2, 1, 3, stride=2, key=k), (1, 3, 2)),
        (nn.MaxPool1d(2), (1, 4, 2)),
        (nn.AvgPool2d(2, 1, "SAME", count_include_pad=False), (1, 3, 3, 1)),
        (nn.LayerNorm(3), (2, 3)),
        (nn.RMSNorm(3), (2, 3)),
        (nn.GroupNorm(2, 4, num_spatial_dims=1), (2, 3, 4)),
    ]


@pytest.mark.parametrize("i", range(9))
def test_layer_grads_match_finite_differences(i, x64):
    layer, shape = _small_layers()[i]
    layer = tree_util.tree_map(lambda a: a + 0.3 * _rand(*a.shape), layer)
    x = _rand(*shape).astype(np.float64)
    if isinstance(layer, nn.MaxPool):
        x = x + np.arange(x.size).reshape(x.shape)  # no ties: max is differentiable

    def f(layer, x):
        return layer(x)

    check_grads(f, (layer, x), order=1, modes=("fwd", "rev"))


@pytest.mark.parametrize("i", range(9))
def test_each_layer_under_jit_and_vmap(i):
    layer, shape = _small_layers()[i]
    xs = _rand(3, *shape)
    loop = np.stack([np.asarray(layer(x)) for x in xs])
    np.testing.assert_allclose(fg.vmap(layer)(xs), loop, rtol=1e-5, atol=1e-6)
    jitted = fg.jit(lambda m, x: m(x))(layer, xs[0])
    np.testing.assert_allclose(jitted, loop[0], rtol=1e-5, atol=1e-6)


def test_batchnorm_and_embedding_grads(x64):
    bn = nn.BatchNorm(2)
    state = bn.init_state(np.float64)
    check_grads(lambda m, x: m(x, state)[0], (bn, _rand(4, 2).astype(np.float64)), order=1)
    emb = nn.Embedding(5, 2, key=_key())
    ids = np.array([1, 1, 4])
    g = fg.grad(lambda e: (e(ids) ** 2).sum())(emb)
    ref = np.zeros((5, 2))
    np.add.at(ref, ids, 2 * np.asarray(emb.weight)[ids])
    np.testing.assert_allclose(g.weight, ref, rtol=1e-6)


def test_jit_and_vmap_of_a_model_match_eager_and_a_loop():
    model = _cnn(_key(2))
    x = _rand(4, 6, 6, 1)
    eager = model(x)
    np.testing.assert_allclose(fg.jit(lambda m, x: m(x))(model, x), eager, rtol=1e-5, atol=1e-6)
    per_example = fg.vmap(lambda x: model(x))(x)  # unbatched inside: (6, 6, 1)
    loop = np.stack([np.asarray(model(xi)) for xi in x])
    np.testing.assert_allclose(per_example, loop, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(per_example, eager, rtol=1e-5, atol=1e-6)
    # a gradient step on the whole model, jitted, against eager
    y = np.array([0, 1, 2, 1])

    def loss(m, x):
        return -fnp.mean(fg.nn.log_softmax(m(x))[np.arange(4), y])

    g_eager = fg.grad(loss)(model, x)
    g_jit = fg.jit(fg.grad(loss))(model, x)
    assert type(g_jit) is nn.Sequential
    for a, b in zip(tree_util.tree_leaves(g_jit), tree_util.tree_leaves(g_eager)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_dropout_and_batchnorm_under_jit():
    net = nn.Sequential([nn.Linear(3, 4, key=_key()), nn.BatchNorm(4), nn.Dropout(0.5)])
    state = net.init_state()
    x = _rand(5, 3)
    step = fg.jit(lambda m, s, x, k: m(x, s, key=k))
    (y, s1), (y_ref, s_ref) = step(net, state, x, _key(7)), net(x, state, key=_key(7))
    np.testing.assert_allclose(y, y_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(s1[1].var, s_ref[1].var, rtol=1e-5)


# -- GPU backend ------------------------------------------------------------------------------


def test_layers_on_the_gpu_backend(gpu):
    k1, k2, k3 = fg.random.split(_key(9), 3)
    model = nn.Sequential(
        [
            nn.Conv2d(2, 4, 3, padding="SAME", key=k1),
            nn.LayerNorm(4),
            nn.Lambda(fg.nn.relu),
            nn.AvgPool2d(2),
            nn.ConvTranspose2d(4, 2, 2, stride=2, key=k2),
            nn.MaxPool2d(2),
            nn.GlobalMaxPool(2),
            nn.RMSNorm(2),
            nn.Linear(2, 3, key=k3),
        ]
    )
    x = _rand(2, 4, 4, 2)
    out = fg.jit(lambda m, x: m(x), backend="gpu")(model, x)
    np.testing.assert_allclose(np.asarray(out), model(x), rtol=1e-4, atol=1e-5)
    g = fg.jit(fg.grad(lambda m, x: (m(x) ** 2).sum()), backend="gpu")(model, x)
    g_ref = fg.grad(lambda m, x: (m(x) ** 2).sum())(model, x)
    for a, b in zip(tree_util.tree_leaves(g), tree_util.tree_leaves(g_ref)):
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-3, atol=1e-5)
    emb, ids = nn.Embedding(6, 2, key=k1), np.array([[1, 5], [0, 1]], np.int32)
    g = fg.jit(fg.grad(lambda e: (e(ids) ** 2).sum()), backend="gpu")(emb)
    np.testing.assert_allclose(
        np.asarray(g.weight), fg.grad(lambda e: (e(ids) ** 2).sum())(emb).weight
    )
    drop, gn = nn.Dropout(0.3), nn.GroupNorm(2, 2, num_spatial_dims=2)
    out = fg.jit(lambda m, x, k: m(drop(x, key=k)), backend="gpu")(gn, x, k2)
    np.testing.assert_allclose(np.asarray(out), gn(drop(x, key=k2)), rtol=1e-4, atol=1e-5)
    bn = nn.BatchNorm(2)
    y, s = fg.jit(lambda m, x, s: m(x, s), backend="gpu")(bn, x, bn.init_state())
    y_ref, s_ref = bn(x, bn.init_state())
    np.testing.assert_allclose(np.asarray(y), y_ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(s.var), s_ref.var, rtol=1e-5)
