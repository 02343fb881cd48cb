"""fungrad.nn sequence layers (MultiHeadAttention, transformer blocks, SimpleRNN/LSTM/GRU
cells, rnn / RNN / Bidirectional): forward against the formulas written out in numpy
(float64), derivatives against finite differences (check_grads, fwd and rev), jit against
eager, vmap against a Python loop, the masks by their defining property (causal: changing
the future leaves the past unchanged; padding: padded keys are never read), rnn against a
Python loop over the cell, and the GPU backend against eager."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import nn, tree_util
from fungrad.testing import check_grads

RNG = np.random.default_rng(0)
NEG = -0.7 * float(np.finfo(np.float32).max)  # the finite "masked" logit


def _rand(*shape, dtype=np.float32):
    return RNG.normal(size=shape).astype(dtype)


def _key(i=0):
    return fg.random.key(i)


def _np(a):
    return None if a is None else np.asarray(a, np.float64)


def _perturb(module, scale=0.3):
    """The module with random noise added to every parameter (so zero biases matter)."""
    return tree_util.tree_map(lambda a: a + scale * _rand(*a.shape).astype(a.dtype), module)


# -- numpy references -------------------------------------------------------------------------


def np_softmax(z):
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def np_linear(lin, x):
    y = x @ _np(lin.weight)
    return y + _np(lin.bias) if lin.bias is not None else y


def np_mha(m, q, k, v, keep=None, causal=False, drop_keep=None, p=0.0):
    """Multi-head attention on ``(*batch, T, D)`` inputs; ``keep`` broadcasts against
    ``(*batch, N, T, S)``; ``drop_keep`` the dropout mask on the ``(*batch, N, T, S)``
    weights."""
    N, dk, dv = m.num_heads, m.qk_size, m.vo_size
    T, S = q.shape[-2], k.shape[-2]
    qh = np_linear(m.query_proj, q).reshape(*q.shape[:-1], N, dk)
    kh = np_linear(m.key_proj, k).reshape(*k.shape[:-1], N, dk)
    vh = np_linear(m.value_proj, v).reshape(*v.shape[:-1], N, dv)
    logits = np.einsum("...tnh,...snh->...nts", qh, kh) / np.sqrt(dk)
    full = np.ones(logits.shape, bool)
    if keep is not None:
        full &= np.broadcast_to(keep, logits.shape)
    if causal:
        full &= np.tril(np.ones((T, S), bool))
    probs = np_softmax(np.where(full, logits, NEG))
    if drop_keep is not None:
        probs = np.where(drop_keep, probs / (1 - p), 0.0)
    out = np.einsum("...nts,...snh->...tnh", probs, vh).reshape(*q.shape[:-1], N * dv)
    return np_linear(m.output_proj, out)


def np_layer_norm(ln, x):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + ln.eps) * _np(ln.weight) + _np(ln.bias)


def np_gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def np_block(b, x, keep=None):
    h = x + np_mha(b.attention, *(np_layer_norm(b.norm1, x),) * 3, keep, b.causal)
    u = np_layer_norm(b.norm2, h)
    return h + np_linear(b.linear2, np_gelu(np_linear(b.linear1, u)))


def sig(z):
    return 1 / (1 + np.exp(-z))


def np_cell(cell, x, carry):
    """One step of a cell, from the formulas in PyTorch's documentation."""
    wi, wh = _np(cell.weight_ih), _np(cell.weight_hh)
    if isinstance(cell, nn.LSTMCell):
        h, c = carry
        i, f, g, o = np.split(x @ wi + h @ wh + _np(cell.bias), 4, axis=-1)
        c = sig(f) * c + sig(i) * np.tanh(g)
        return sig(o) * np.tanh(c), c
    if isinstance(cell, nn.GRUCell):
        xr, xz, xn = np.split(x @ wi + _np(cell.bias), 3, axis=-1)
        hr, hz, hn = np.split(carry @ wh, 3, axis=-1)
        r, z = sig(xr + hr), sig(xz + hz)
        n = np.tanh(xn + r * (hn + _np(cell.bias_n)))
        return (1 - z) * n + z * carry
    return np.tanh(x @ wi + carry @ wh + _np(cell.bias))


def _output_np(carry):
    return carry[0] if isinstance(carry, tuple) else carry


def np_rnn(cell, xs, carry, reverse=False):
    """Python loop over time (axis 0); returns (ys, final carry)."""
    if len(xs) == 0:
        return np.zeros((0, *np.shape(_output_np(carry)))), carry
    ys = [None] * len(xs)
    for t in reversed(range(len(xs))) if reverse else range(len(xs)):
        carry = np_cell(cell, xs[t], carry)
        ys[t] = _output_np(carry)
    return np.stack(ys), carry


def _cells(key=0, dtype=None, input_size=3, hidden=4):
    k = fg.random.split(_key(key), 3)
    return [
        nn.SimpleRNNCell(input_size, hidden, dtype=dtype, key=k[0]),
        nn.LSTMCell(input_size, hidden, dtype=dtype, key=k[1]),
        nn.GRUCell(input_size, hidden, dtype=dtype, key=k[2]),
    ]


def _zeros_carry(cell, batch):
    z = np.zeros((*batch, cell.hidden_size))
    return (z, z) if isinstance(cell, nn.LSTMCell) else z


# -- MultiHeadAttention -----------------------------------------------------------------------


mha_cases = st.fixed_dictionaries(
    {
        "batch": st.sampled_from([(), (2,), (2, 1)]),
        "T": st.integers(1, 4),
        "S": st.integers(1, 4),
        "heads": st.sampled_from([1, 2]),
        "vo": st.sampled_from([2, 3]),
        "cross": st.booleans(),
        "mask": st.sampled_from([None, "ts", "bnts", "padding", "both"]),
        "causal": st.booleans(),
        "bias": st.booleans(),
    }
)


@settings(max_examples=25, deadline=None)
@given(mha_cases)
def test_mha_matches_numpy(c):
    b, T, N = c["batch"], c["T"], c["heads"]
    S = c["S"] if c["cross"] else T
    m = nn.MultiHeadAttention(
        N, 4, key_size=3, value_size=5, output_size=6, qk_size=3, vo_size=c["vo"],
        use_query_bias=c["bias"], use_key_bias=c["bias"], use_value_bias=c["bias"],
        use_output_bias=c["bias"], key=_key(1),
    )  # fmt: skip
    m = _perturb(m)
    q, k, v = _rand(*b, T, 4), _rand(*b, S, 3), _rand(*b, S, 5)
    mask = kpm = None
    keep = np.ones((*b, N, T, S), bool)
    if c["mask"] in ("ts", "both"):
        mask = RNG.random((T, S)) < 0.7
        keep &= mask
    if c["mask"] == "bnts":
        mask = RNG.random((*b, N, T, S)) < 0.7
        keep &= mask
    if c["mask"] in ("padding", "both"):
        kpm = RNG.random((*b, S)) < 0.7
        keep &= kpm[..., None, None, :]
    out = m(q, k, v, mask, key_padding_mask=kpm, is_causal=c["causal"])
    assert out.shape == (*b, T, 6) and out.dtype == np.float32
    ref = np_mha(m, _np(q), _np(k), _np(v), keep, c["causal"])
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-5)


def test_mha_defaults_self_attention_and_errors():
    m = nn.MultiHeadAttention(2, 8, key=_key())
    assert (m.key_size, m.value_size, m.output_size, m.qk_size, m.vo_size) == (8, 8, 8, 4, 4)
    assert m.query_proj.bias is None and m.output_proj.weight.shape == (8, 8)
    x = _rand(3, 5, 8)
    np.testing.assert_array_equal(m(x), m(x, x, x))
    ref = np_mha(m, *(_np(x),) * 3)
    np.testing.assert_allclose(m(x), ref, rtol=2e-5, atol=2e-5)
    with pytest.raises(ValueError, match="not a multiple of num_heads"):
        nn.MultiHeadAttention(3, 8, key=_key())
    with pytest.raises(TypeError, match=r"MultiHeadAttention: query of shape \(5, 7\)"):
        m(np.zeros((5, 7), np.float32))
    with pytest.raises(TypeError, match="same batch axes"):
        m(x, x[:2])
    with pytest.raises(TypeError, match="mask must be boolean"):
        m(x, mask=np.ones((5, 5), np.float32))
    with pytest.raises(ValueError, match="does not broadcast"):
        m(x, mask=np.ones((3, 5, 5), bool))  # a batch axis without the head axis
    with pytest.raises(ValueError, match=r"key_padding_mask must have shape"):
        m(x, key_padding_mask=np.ones((5,), bool))


def test_mha_causal_mask_ignores_the_future():
    m = _perturb(nn.MultiHeadAttention(2, 4, use_query_bias=True, key=_key(2)))
    x = _rand(2, 6, 4)
    base = np.asarray(m(x, is_causal=True))
    for t in range(6):
        x2 = x.copy()
        x2[:, t + 1 :] = _rand(2, 5 - t, 4) * 10
        out = np.asarray(m(x2, is_causal=True))
        np.testing.assert_allclose(out[:, : t + 1], base[:, : t + 1], rtol=1e-6, atol=1e-6)
        if t < 5:
            assert not np.allclose(out[:, t + 1 :], base[:, t + 1 :])


def test_mha_key_padding_mask_never_reads_padding():
    m = _perturb(nn.MultiHeadAttention(2, 4, key=_key(3)))
    q, kv = _rand(2, 3, 4), _rand(2, 5, 4)
    lengths = np.array([2, 5])
    kpm = np.arange(5)[None, :] < lengths[:, None]
    out = np.asarray(m(q, kv, key_padding_mask=kpm))
    kv2 = np.where(kpm[..., None], kv, 100.0).astype(np.float32)  # garbage in the padding
    np.testing.assert_allclose(m(q, kv2, key_padding_mask=kpm), out, rtol=1e-6, atol=1e-6)
    for i, n in enumerate(lengths):  # the same as attending to the unpadded keys alone
        np.testing.assert_allclose(out[i], m(q[i], kv[i, :n]), rtol=1e-5, atol=1e-6)
    # every key masked: JAX's finite rule gives the uniform average, not NaN
    none = m(q, kv, key_padding_mask=np.zeros((2, 5), bool))
    assert np.isfinite(np.asarray(none)).all()


def test_mha_attention_dropout():
    p = 0.4
    m = _perturb(nn.MultiHeadAttention(2, 4, dropout_p=p, key=_key(4)))
    x = _rand(2, 3, 4)
    plain = nn.MultiHeadAttention(2, 4, key=_key(4))
    plain = tree_util.tree_unflatten(  # the same weights, no dropout
        tree_util.tree_structure(plain), tree_util.tree_leaves(m)
    )
    np.testing.assert_allclose(m(x, inference=True), plain(x), rtol=1e-6)
    with pytest.raises(ValueError, match="needs a PRNG key"):
        m(x)
    k = _key(11)
    out = m(x, key=k, is_causal=True)
    np.testing.assert_array_equal(out, m(x, key=k, is_causal=True))  # same key, same mask
    assert not np.allclose(out, m(x, key=_key(12), is_causal=True))
    drop_keep = np.asarray(fg.random.bernoulli(k, 1 - p, (2, 2, 3, 3)))  # Dropout's draw
    ref = np_mha(m, *(_np(x),) * 3, causal=True, drop_keep=drop_keep, p=p)
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-5)
    inf = nn.MultiHeadAttention(2, 4, dropout_p=p, inference=True, key=_key(4))
    assert inf(x).shape == (2, 3, 4)  # the inference field: no key needed


# -- transformer blocks -----------------------------------------------------------------------


def test_transformer_blocks_match_numpy_and_the_causal_property():
    enc = _perturb(nn.TransformerEncoderBlock(8, 2, mlp_size=12, key=_key(5)), 0.1)
    x = _rand(2, 5, 8)
    kpm = np.array([[True] * 5, [True] * 3 + [False] * 2])
    out = enc(x, key_padding_mask=kpm)
    assert out.shape == x.shape
    ref = np_block(enc, _np(x), kpm[:, None, None, :])
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)
    dec = _perturb(nn.TransformerDecoderBlock(8, 2, key=_key(6)), 0.1)
    assert dec.causal and dec.linear1.weight.shape == (8, 32)
    base = np.asarray(dec(x))
    np.testing.assert_allclose(base, np_block(dec, _np(x)), rtol=1e-4, atol=1e-5)
    x2 = x.copy()
    x2[:, 3:] = 5.0
    np.testing.assert_allclose(np.asarray(dec(x2))[:, :3], base[:, :3], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="multiple of num_heads"):
        nn.TransformerEncoderBlock(6, 4, key=_key())
    with pytest.raises(TypeError, match="TransformerDecoderBlock: input of shape"):
        dec(_rand(5, 7))


def test_transformer_dropout_keys_and_sequential():
    blk = nn.TransformerDecoderBlock(4, 2, dropout_p=0.3, attention_dropout_p=0.2, key=_key(7))
    x = _rand(3, 4)
    with pytest.raises(ValueError, match="PRNG key"):
        blk(x)
    a, b = blk(x, key=_key(1)), blk(x, key=_key(1))
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, blk(x, key=_key(2)))
    off = nn.TransformerDecoderBlock(4, 2, key=_key(7))
    np.testing.assert_allclose(blk(x, inference=True), off(x), rtol=1e-6)
    np.testing.assert_allclose(nn.inference_mode(blk)(x), off(x), rtol=1e-6)  # no key needed
    model = nn.Sequential([blk, nn.LayerNorm(4), nn.Linear(4, 2, key=_key(8))])
    np.testing.assert_array_equal(model(x, key=_key(3)), model(x, key=_key(3)))
    np.testing.assert_allclose(
        model(x, inference=True), model[2](model[1](off(x))), rtol=1e-5, atol=1e-6
    )


# -- recurrent cells and rnn ------------------------------------------------------------------


@pytest.mark.parametrize("i", range(3))
def test_cells_match_numpy_and_carry_shapes(i):
    cell = _perturb(_cells()[i])
    x = _rand(2, 5, 3)  # two leading batch axes
    carry = cell.init_carry((2, 5))
    if isinstance(cell, nn.LSTMCell):
        carry = (carry[0] + _rand(2, 5, 4), carry[1] + _rand(2, 5, 4))
        assert cell.weight_ih.shape == (3, 16) and cell.weight_hh.shape == (4, 16)
    else:
        carry = carry + _rand(2, 5, 4)
    out = cell(x, carry)
    ref = np_cell(cell, _np(x), tree_util.tree_map(_np, carry))
    for a, b in zip(tree_util.tree_leaves(out), tree_util.tree_leaves(ref)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    one = cell(x[0, 0], tree_util.tree_map(lambda a: a[0, 0], carry))  # no batch axis
    for a, b in zip(tree_util.tree_leaves(one), tree_util.tree_leaves(out)):
        np.testing.assert_allclose(a, np.asarray(b)[0, 0], rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match=f"{type(cell).__name__}: input of shape"):
        cell(_rand(2, 4), cell.init_carry((2,)))
    with pytest.raises(TypeError, match="does not match the input's batch axes"):
        cell(_rand(2, 3), cell.init_carry((3,)))


def test_cell_initialisation_is_pytorchs_uniform(x64):
    lstm = nn.LSTMCell(5, 100, key=_key(9))
    w = np.asarray(lstm.weight_hh)
    assert np.abs(w).max() <= 0.1 and np.abs(w).max() > 0.099  # U(-1/sqrt(100), 1/sqrt(100))
    gru = nn.GRUCell(2, 4, use_bias=False, key=_key())
    assert gru.bias is None and gru.bias_n is None
    assert nn.SimpleRNNCell(2, 3, key=_key(), dtype=np.float64).weight_ih.dtype == np.float64


@pytest.mark.parametrize("i", range(3))
@pytest.mark.parametrize("reverse", [False, True])
def test_rnn_matches_a_python_loop(i, reverse):
    cell = _perturb(_cells()[i])
    xs = _rand(5, 2, 3)
    ys, carry = nn.rnn(cell, xs, reverse=reverse)
    ref_ys, ref_carry = np_rnn(cell, _np(xs), _zeros_carry(cell, (2,)), reverse)
    np.testing.assert_allclose(ys, ref_ys, rtol=1e-5, atol=1e-6)
    for a, b in zip(tree_util.tree_leaves(carry), tree_util.tree_leaves(ref_carry)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # batch-first through the RNN layer, with an explicit initial carry
    c0 = tree_util.tree_map(lambda a: a + 0.5, cell.init_carry((2,)))
    layer = nn.RNN(cell, reverse=reverse, return_carry=True)
    ys_bf, carry_bf = layer(np.swapaxes(xs, 0, 1), c0)
    ref_ys, ref_carry = np_rnn(cell, _np(xs), tree_util.tree_map(_np, c0), reverse)
    np.testing.assert_allclose(ys_bf, np.swapaxes(ref_ys, 0, 1), rtol=1e-5, atol=1e-6)
    for a, b in zip(tree_util.tree_leaves(carry_bf), tree_util.tree_leaves(ref_carry)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reverse", [False, True])
def test_rnn_seq_lengths_equal_running_each_sequence_alone(reverse):
    cell = _perturb(_cells()[1])
    T, lengths = 5, np.array([3, 5, 0, 1], np.int32)
    xs = _rand(T, 4, 3)
    ys, (h, c) = nn.rnn(cell, xs, reverse=reverse, seq_lengths=lengths)
    ys = np.asarray(ys)
    for b, n in enumerate(lengths):
        ref_ys, (rh, rc) = np_rnn(cell, _np(xs[:n, b]), _zeros_carry(cell, ()), reverse)
        if n:
            np.testing.assert_allclose(ys[:n, b], ref_ys, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(ys[n:, b], 0)
        np.testing.assert_allclose(h[b], rh, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(c[b], rc, rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match=r"seq_lengths must be integers with the batch shape"):
        nn.rnn(cell, xs, seq_lengths=np.array([1.0, 2, 3, 4]))
    with pytest.raises(TypeError, match=r"batch shape \(4,\)"):
        nn.rnn(cell, xs, seq_lengths=np.array([1, 2]))
    # per sequence under vmap (a scalar length each), and two batch axes, agree with the above
    per = fg.vmap(lambda x, n: nn.rnn(cell, x, reverse=reverse, seq_lengths=n)[0], (1, 0), 1)
    np.testing.assert_allclose(per(xs, lengths), ys, rtol=1e-5, atol=1e-6)
    ys2, _ = nn.rnn(cell, xs.reshape(T, 2, 2, 3), reverse=reverse,
                    seq_lengths=lengths.reshape(2, 2))  # fmt: skip
    np.testing.assert_allclose(np.asarray(ys2).reshape(T, 4, 4), ys, rtol=1e-6, atol=1e-7)


def test_bidirectional_and_rnn_errors():
    f, _, g = (_perturb(c) for c in _cells())
    xs = _rand(2, 4, 3)  # batch-first
    bi = nn.Bidirectional(nn.RNN(f), nn.RNN(g), return_carry=True)
    ys, (cf, cb) = bi(xs)
    ref_f, ref_cf = np_rnn(f, _np(np.swapaxes(xs, 0, 1)), _zeros_carry(f, (2,)))
    ref_b, ref_cb = np_rnn(g, _np(np.swapaxes(xs, 0, 1)), _zeros_carry(g, (2,)), True)
    ref = np.concatenate([np.swapaxes(ref_f, 0, 1), np.swapaxes(ref_b, 0, 1)], -1)
    np.testing.assert_allclose(ys, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cb, ref_cb, rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="rnn: xs must be"):
        nn.rnn(f, _rand(3))
    with pytest.raises(ValueError, match="time_axis=2"):
        nn.rnn(f, xs, time_axis=2)
    with pytest.raises(TypeError, match="LSTMCell: the carry must be a pair"):
        nn.rnn(_cells()[1], xs, np.zeros((4, 4), np.float32))


def test_sizes_zero_and_dtypes(x64):
    lstm = _cells()[1]  # float64 parameters (x64 on)
    ys, (h, c) = nn.rnn(lstm, np.zeros((0, 2, 3), np.float32))  # no steps: the initial carry
    assert ys.shape == (0, 2, 4) and ys.dtype == np.float64
    np.testing.assert_array_equal(h, 0)
    ys, (h, c) = nn.rnn(lstm, np.zeros((4, 0, 3)))  # an empty batch
    assert ys.shape == (4, 0, 4) and h.shape == (0, 4)
    f32 = nn.GRUCell(3, 4, dtype=np.float32, key=_key())
    assert nn.rnn(f32, np.ones((2, 3)))[0].dtype == np.float64  # promoted with the input
    m = nn.MultiHeadAttention(2, 4, key=_key())
    assert m(np.zeros((0, 3, 4))).shape == (0, 3, 4)
    assert m(np.zeros((2, 0, 4))).shape == (2, 0, 4)


# -- derivatives, jit, vmap -------------------------------------------------------------------


def test_mha_and_block_grads_match_finite_differences(x64):
    m = _perturb(nn.MultiHeadAttention(2, 4, use_key_bias=True, dtype=np.float64, key=_key()))
    x = _rand(3, 4).astype(np.float64)
    mask = np.array([[1, 0, 1], [1, 1, 0], [0, 1, 1]], bool)
    # the softmax runs in float32 even for float64 inputs (jax.nn.dot_product_attention's
    # rule), so the finite differences take a larger step and a float32-sized tolerance
    tol = dict(eps=1e-3, atol=1e-3, rtol=1e-3)
    check_grads(lambda m, x: m(x, mask=mask, is_causal=True), (m, x), order=1, **tol)
    m2 = _perturb(nn.MultiHeadAttention(2, 4, vo_size=3, dtype=np.float64, key=_key(2)))
    check_grads(lambda m, x: m(x, x[:2], x[:2]), (m2, x), order=1, **tol)
    blk = _perturb(nn.TransformerDecoderBlock(4, 2, mlp_size=6, dtype=np.float64, key=_key(1)))
    check_grads(lambda b, x: b(x), (blk, x), order=1, **tol)


@pytest.mark.parametrize("i", range(3))
def test_rnn_grads_match_finite_differences(i, x64):
    cell = _perturb(_cells(dtype=np.float64, input_size=2, hidden=3)[i])
    xs = _rand(3, 2, 2).astype(np.float64)

    def f(cell, xs):
        ys, carry = nn.rnn(cell, xs, seq_lengths=np.array([3, 2]))
        return ys, carry

    check_grads(f, (cell, xs), order=1)


def test_jit_and_vmap_match_eager_and_a_loop():
    blk = _perturb(nn.TransformerDecoderBlock(4, 2, key=_key(2)), 0.1)
    x = _rand(3, 5, 4)
    eager = np.asarray(blk(x))
    np.testing.assert_allclose(fg.jit(lambda b, x: b(x))(blk, x), eager, rtol=1e-5, atol=1e-6)
    per = fg.vmap(lambda x: blk(x))(x)
    np.testing.assert_allclose(per, np.stack([blk(xi) for xi in x]), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(per, eager, rtol=1e-5, atol=1e-6)
    # vmap of attention with a per-example padding mask
    m = _perturb(nn.MultiHeadAttention(2, 4, key=_key(3)))
    kpm = np.array([[1, 1, 0, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], bool)
    per = fg.vmap(lambda x, k: m(x, key_padding_mask=k))(x, kpm)
    np.testing.assert_allclose(per, m(x, key_padding_mask=kpm), rtol=1e-5, atol=1e-6)
    # rnn: jit, and vmap over a batch of unbatched sequences, against eager
    cell = _perturb(_cells()[2])
    xs = _rand(4, 3, 3)  # (B, T, F)
    ys_jit = fg.jit(lambda c, xs: nn.RNN(c)(xs))(cell, xs)
    ys_vmap = fg.vmap(lambda s: nn.rnn(cell, s)[0])(xs)  # each s is (T, F)
    eager = nn.RNN(cell)(xs)
    np.testing.assert_allclose(ys_jit, eager, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ys_vmap, eager, rtol=1e-5, atol=1e-6)
    # a jitted training gradient of a small LSTM model equals the eager one
    lstm = _cells()[1]

    def loss(c, xs):
        return fnp.mean(nn.RNN(c)(xs) ** 2)

    for a, b in zip(
        tree_util.tree_leaves(fg.jit(fg.grad(loss))(lstm, xs)),
        tree_util.tree_leaves(fg.grad(loss)(lstm, xs)),
    ):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7)


# -- GPU backend ------------------------------------------------------------------------------


def test_seq_layers_on_the_gpu_backend(gpu):
    """One compile each (value and gradient together): a decoder block with a padding mask,
    and an LSTM over lax.scan with sequence lengths."""

    def check(f, args):
        (v, g), (v_ref, g_ref) = fg.jit(f, backend="gpu")(*args), f(*args)
        np.testing.assert_allclose(np.asarray(v), v_ref, rtol=1e-4, atol=1e-5)
        for a, b in zip(tree_util.tree_leaves(g), tree_util.tree_leaves(g_ref)):
            np.testing.assert_allclose(np.asarray(a), b, rtol=1e-3, atol=1e-4)

    blk = _perturb(nn.TransformerDecoderBlock(4, 2, key=_key(4)), 0.1)
    x, kpm = _rand(2, 3, 4), np.array([[1, 1, 1], [1, 1, 0]], bool)
    check(fg.value_and_grad(lambda b, x: (b(x, key_padding_mask=kpm) ** 2).sum()), (blk, x))
    cell, xs = _perturb(_cells()[1]), _rand(3, 2, 3)

    def loss(c, xs):
        ys, (h, c) = nn.rnn(c, xs, seq_lengths=np.array([3, 1], np.int32))
        return (ys**2).sum() + (c * h).sum()

    check(fg.value_and_grad(loss, argnums=(0, 1)), (cell, xs))
