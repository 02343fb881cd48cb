"""fungrad.nn.dot_product_attention, scaled_matmul, scaled_dot_general, log1mexp and tanh:
values against numpy references, gradients with check_grads, vmap against a loop, jit against
eager, and the argument errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
from fungrad import nn
from fungrad.testing import check_grads

NEG = -0.7 * float(np.finfo(np.float32).max)


def ref_attention(
    q, k, v, bias=None, mask=None, scale=None, is_causal=False, qlen=None, kvlen=None, window=None
):
    """Loops over batch and heads, in float64."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    B, T, N, H = q.shape
    S, K = k.shape[1], k.shape[2]
    scale = 1 / np.sqrt(H) if scale is None else scale
    out = np.zeros((B, T, N, H))
    lse = np.zeros((B, T, N))
    for b in range(B):
        for n in range(N):
            kh = n // (N // K)
            lg = q[b, :, n] @ k[b, :, kh].T * scale
            if bias is not None:
                lg = lg + np.broadcast_to(bias, (B, N, T, S))[b, n]
            keep = np.ones((T, S), bool)
            if mask is not None:
                keep &= np.broadcast_to(mask, (B, N, T, S))[b, n]
            for t in range(T):
                for s in range(S):
                    if is_causal and s > t:
                        keep[t, s] = False
                    if window is not None and not (s - window[1] <= t <= s + window[0]):
                        keep[t, s] = False
                    if qlen is not None and t >= qlen[b]:
                        keep[t, s] = False
                    if kvlen is not None and s >= kvlen[b]:
                        keep[t, s] = False
            lg = np.where(keep, lg, NEG)
            m = lg.max(-1, keepdims=True)
            p = np.exp(lg - m)
            lse[b, :, n] = np.log(p.sum(-1)) + m[:, 0]
            p /= p.sum(-1, keepdims=True)
            out[b, :, n] = p @ v[b, :, kh]
            if qlen is not None:
                out[b, qlen[b] :, n] = 0
    return out, lse


rng = np.random.default_rng(0)


def _qkv(B=2, T=4, S=5, N=4, K=2, H=3, dtype=np.float32):
    return (
        rng.standard_normal((B, T, N, H)).astype(dtype),
        rng.standard_normal((B, S, K, H)).astype(dtype),
        rng.standard_normal((B, S, K, H)).astype(dtype),
    )


@settings(max_examples=15, deadline=None)
@given(
    st.sampled_from([(4, 4), (4, 2), (2, 1)]),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.sampled_from([None, (1, 0), (0, 2), 1]),
    st.booleans(),
    st.integers(1, 4),
)
def test_attention_matches_reference(heads, use_bias, use_mask, causal, window, lens, T):
    N, K = heads
    q, k, v = _qkv(N=N, K=K, T=T)
    B, S = 2, 5
    bias = rng.standard_normal((1, N, T, S)).astype(np.float32) if use_bias else None
    mask = (rng.random((B, 1, T, S)) < 0.7) if use_mask else None
    qlen = np.array([T, max(T - 1, 0)], np.int32) if lens else None
    kvlen = np.array([2, S], np.int32) if lens else None
    got = nn.dot_product_attention(
        q,
        k,
        v,
        bias,
        mask,
        is_causal=causal,
        query_seq_lengths=qlen,
        key_value_seq_lengths=kvlen,
        local_window_size=window,
    )
    w = (window, window) if isinstance(window, int) else window
    want, _ = ref_attention(q, k, v, bias, mask, None, causal, qlen, kvlen, w)
    assert got.shape == q.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


def test_attention_scale_residual_3d_and_size_zero():
    q, k, v = _qkv()
    mask = rng.random((2, 4, 4, 5)) < 0.5
    out, lse = nn.dot_product_attention(q, k, v, mask=mask, scale=0.25, return_residual=True)
    want, want_lse = ref_attention(q, k, v, mask=mask, scale=0.25)
    np.testing.assert_allclose(out, want, rtol=2e-5, atol=2e-6)
    assert lse.shape == (2, 4, 4)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5)
    # unbatched (T, N, H) inputs
    got = nn.dot_product_attention(q[0], k[0], v[0], is_causal=True)
    np.testing.assert_allclose(
        got, ref_attention(q[:1], k[:1], v[:1], is_causal=True)[0][0], rtol=2e-5, atol=2e-6
    )
    # a fully masked row is the mean of the values (finite mask value), not NaN
    none = np.zeros((1, 1, 4, 5), bool)
    got = nn.dot_product_attention(q, k, v, mask=none)
    np.testing.assert_allclose(got[:, :, 0], v[:, :, 0].mean(1)[:, None].repeat(4, 1), rtol=1e-5)
    # no queries
    q0 = np.zeros((2, 0, 4, 3), np.float32)
    assert nn.dot_product_attention(q0, k, v).shape == (2, 0, 4, 3)


def test_attention_grads_vmap_jit():
    q, k, v = _qkv(B=1, T=3, S=3, N=2, K=1, H=2)
    bias = rng.standard_normal((1, 2, 3, 3)).astype(np.float32)

    def f(q, k, v):
        return nn.dot_product_attention(q, k, v, bias, is_causal=True)

    check_grads(
        f,
        (q.astype(np.float64), k.astype(np.float64), v.astype(np.float64)),
        order=2,
        modes=("fwd", "rev"),
    )
    qs, ks, vs = (np.stack([a, a * 0.5 + 1]) for a in (q, k, v))
    batched = fg.vmap(f)(qs, ks, vs)
    for i in range(2):
        np.testing.assert_allclose(batched[i], f(qs[i], ks[i], vs[i]), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(fg.jit(f)(q, k, v), f(q, k, v), rtol=1e-6, atol=1e-6)


def test_attention_errors():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="multiple of key/value heads"):
        nn.dot_product_attention(q[:, :, :3], k, v)
    with pytest.raises(ValueError, match="value"):
        nn.dot_product_attention(q, k, v[:, :4])
    with pytest.raises(ValueError, match="mask must have dtype bool"):
        nn.dot_product_attention(q, k, v, mask=np.ones((1, 1, 4, 5), np.float32))
    with pytest.raises(ValueError, match="query_seq_lengths"):
        nn.dot_product_attention(q, k, v, query_seq_lengths=np.ones(3, np.int32))
    with pytest.raises(ValueError, match="implementation"):
        nn.dot_product_attention(q, k, v, implementation="cudnn")
    with pytest.raises(ValueError, match="must have dtype float16"):
        nn.dot_product_attention(q, k.astype(np.float16), v.astype(np.float16))


# -- scaled matmuls ----------------------------------------------------------------------------


def test_scaled_matmul():
    a = rng.standard_normal((2, 3, 8)).astype(np.float32)
    b = rng.standard_normal((2, 4, 8)).astype(np.float32)
    sa = rng.random((2, 3, 2)).astype(np.float32)
    sb = rng.random((2, 4, 4)).astype(np.float32)
    want = np.einsum("bmk,bnk->bmn", a * np.repeat(sa, 4, -1), b * np.repeat(sb, 2, -1))
    got = nn.scaled_matmul(a, b, sa, sb)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # JAX's docstring example
    np.testing.assert_allclose(
        nn.scaled_matmul(
            np.array([1, 2, 3.0]).reshape(1, 1, 3),
            np.array([4, 5, 6.0]).reshape(1, 1, 3),
            np.full((1, 1, 1), 0.5),
            np.full((1, 1, 1), 0.5),
        ),
        [[[8.0]]],
    )
    check_grads(lambda a, b: nn.scaled_matmul(a, b, sa, sb), (a, b), order=1)
    with pytest.raises(ValueError, match="divide"):
        nn.scaled_matmul(a, b, sa[..., :1].repeat(3, -1), sb)


def test_scaled_dot_general():
    a = rng.standard_normal((2, 3, 5)).astype(np.float32)
    b = rng.standard_normal((2, 4, 5)).astype(np.float32)
    got = nn.scaled_dot_general(a, b, (((2,), (2,)), ((0,), (0,))))
    np.testing.assert_allclose(got, np.einsum("bmk,bnk->bmn", a, b), rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match="float8"):
        nn.scaled_dot_general(a, b, (((2,), (2,)), ((0,), (0,))), configs=[object()] * 3)


# -- log1mexp, tanh ----------------------------------------------------------------------------


def test_log1mexp_values_and_grad():
    x = np.array([1e-30, 1e-8, 1e-3, 0.5, np.log(2), 0.7, 3.0, 20.0, 100.0], np.float32)
    want = np.log(-np.expm1(-x.astype(np.float64)))
    got = nn.log1mexp(x)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-40)  # float64 rounds x=100 to 0
    assert np.isneginf(nn.log1mexp(0.0)) and np.isnan(nn.log1mexp(-1.0))
    # the derivative 1 / expm1(x) (finite differences near log 2, where the formula switches)
    g = fg.vmap(fg.grad(nn.log1mexp))(x)
    np.testing.assert_allclose(g, 1 / np.expm1(x.astype(np.float64)), rtol=2e-6, atol=1e-40)
    check_grads(nn.log1mexp, (np.array([0.3, 0.69, 0.7, 2.0]),), order=2)
    np.testing.assert_allclose(fg.jit(nn.log1mexp)(x), got, rtol=1e-6)
    assert nn.log1mexp(np.arange(3)).dtype == np.float32


def test_tanh():
    x = np.linspace(-3, 3, 7).astype(np.float32)
    np.testing.assert_allclose(nn.tanh(x), np.tanh(x), rtol=1e-6)
    assert nn.tanh(1).dtype == np.float32
