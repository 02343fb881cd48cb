"""Scaled dot-product attention with jax.nn's signature and numerics, and the block-scaled
matmuls ``scaled_matmul`` / ``scaled_dot_general``.

``dot_product_attention`` is the "xla" algorithm written with fungrad.numpy: logits
``q . k * scale (+ bias)`` in at least float32, boolean masks (``mask``, ``is_causal``, a local
window, per-batch sequence lengths) applied by replacing masked logits with a large negative
*finite* number (``-0.7 * finfo.max``, capped to float32's range, as JAX does, so a row whose
keys are all masked becomes a uniform average instead of NaN), a float32 softmax, and the
probabilities (cast back to the key dtype) applied to the values. Query heads may be a
multiple of the key/value heads (grouped-query and multi-query attention): query head ``n``
reads key/value head ``n // (N // K)``. Query rows past ``query_seq_lengths`` are zeroed.
"""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad import lax
from fungrad.numpy import util
from fungrad.scipy import special

__all__ = ["dot_product_attention", "scaled_matmul", "scaled_dot_general"]


def _as_4d(name: str, t):
    util.check_arraylike("dot_product_attention", t)
    t = fnp.asarray(t)
    if t.ndim > 4:
        raise ValueError(
            f"dot_product_attention: {name} must have 3 or 4 dimensions "
            f"((B)TNH-style), got shape {t.shape}"
        )
    return fnp.reshape(t, (1,) * (4 - t.ndim) + t.shape)


def _check(name: str, t, shape, dtype=None):
    if t is None:
        return
    if t.ndim != len(shape):
        raise ValueError(
            f"dot_product_attention: {name} must have {len(shape)} dimensions, got shape {t.shape}"
        )
    if dtype is not None and t.dtype != dtype:
        raise ValueError(
            f"dot_product_attention: {name} must have dtype {np.dtype(dtype)}, got {t.dtype}"
        )
    for want, got in zip(shape, t.shape):
        if want != -1 and want != got:
            want_s = tuple("*" if s == -1 else s for s in shape)
            raise ValueError(
                f"dot_product_attention: {name} must have shape {want_s}, got {t.shape}"
            )


def _large_negative(dtype):
    big = min(float(np.finfo(dtype).max), float(np.finfo(np.float32).max))
    return -0.7 * big


def dot_product_attention(
    query,
    key,
    value,
    bias=None,
    mask=None,
    *,
    scale=None,
    is_causal: bool = False,
    query_seq_lengths=None,
    key_value_seq_lengths=None,
    local_window_size=None,
    implementation=None,
    return_residual: bool = False,
):
    """``softmax(q k^T * scale + bias) v`` per head (``jax.nn.dot_product_attention``).

    ``query`` is ``(B, T, N, H)`` (or ``(T, N, H)``), ``key`` and ``value`` ``(B, S, K, H)``
    with ``N`` a multiple of ``K``; ``bias`` and the boolean ``mask`` (True = attend) are 4-d
    and broadcast to ``(B, N, T, S)``; ``scale`` defaults to ``1/sqrt(H)``; ``is_causal``
    masks keys after the query position; ``local_window_size`` ``(left, right)`` (or one int
    for both) keeps keys within that many positions; ``query_seq_lengths`` /
    ``key_value_seq_lengths`` (int32, shape ``(B,)``) mask padding. ``implementation`` may be
    None or ``"xla"`` (fungrad has no cuDNN). With ``return_residual`` the result is
    ``(out, lse)`` where ``lse`` is the logsumexp of each row of masked logits, shape
    ``(B, T, N)``, without gradient.
    """
    if implementation not in (None, "xla"):
        raise ValueError(
            f"dot_product_attention: unsupported implementation "
            f"{implementation!r}; fungrad computes attention with the 'xla' "
            f"algorithm (pass None or 'xla')"
        )
    out_shape = fnp.shape(query)
    q, k, v = _as_4d("query", query), _as_4d("key", key), _as_4d("value", value)
    bias = None if bias is None else _as_4d("bias", bias)
    mask = None if mask is None else _as_4d("mask", mask)
    qlen = None if query_seq_lengths is None else fnp.asarray(query_seq_lengths)
    kvlen = None if key_value_seq_lengths is None else fnp.asarray(key_value_seq_lengths)
    B, S, K, H = k.shape
    _check("value", v, (B, S, K, H), k.dtype)
    _check("query", q, (B, -1, -1, H), k.dtype)
    _check("mask", mask, (-1,) * 4, np.dtype(bool))
    _check("bias", bias, (-1,) * 4)
    _check("query_seq_lengths", qlen, (B,), np.dtype(np.int32))
    _check("key_value_seq_lengths", kvlen, (B,), np.dtype(np.int32))
    T, N = q.shape[1], q.shape[2]
    if K == 0 or N % K:
        raise ValueError(
            f"dot_product_attention: the number of query heads must be a "
            f"multiple of key/value heads, but got {N} vs {K}"
        )
    if isinstance(local_window_size, (int, np.integer)):
        local_window_size = (int(local_window_size), int(local_window_size))
    G = N // K
    scale = 1.0 / np.sqrt(H) if scale is None else scale

    logits_dtype = fnp.promote_types(q.dtype, np.float32)
    qg = fnp.reshape(q.astype(logits_dtype), (B, T, K, G, H))
    logits = fnp.einsum("btkgh,bskh->bkgts", qg, k.astype(logits_dtype))
    logits = fnp.reshape(logits, (B, N, T, S))
    logits = logits * fnp.asarray(scale, dtype=logits_dtype)
    if bias is not None:
        logits = (logits + bias).astype(logits_dtype)

    keep = None

    def both(a, b):
        return b if a is None else fnp.logical_and(a, b)

    if mask is not None:
        keep = both(keep, mask)
    t_pos = fnp.arange(T)[:, None]
    s_pos = fnp.arange(S)[None, :]
    if is_causal:
        keep = both(keep, (s_pos <= t_pos)[None, None])
    if local_window_size is not None:
        left, right = local_window_size
        keep = both(keep, ((t_pos <= s_pos + left) & (t_pos >= s_pos - right))[None, None])
    if qlen is not None:
        keep = both(keep, (fnp.arange(T)[None, :, None] < qlen[:, None, None])[:, None])
    if kvlen is not None:
        keep = both(keep, (fnp.arange(S)[None, None, :] < kvlen[:, None, None])[:, None])
    if keep is not None:
        logits = fnp.where(keep, logits, fnp.asarray(_large_negative(logits_dtype), logits_dtype))

    logits32 = logits.astype(np.float32)
    probs = special.softmax(logits32, axis=-1).astype(k.dtype)
    probs = fnp.reshape(probs, (B, K, G, T, S))
    encoded = fnp.einsum("bkgts,bskh->btkgh", probs, v)
    encoded = fnp.reshape(encoded, (B, T, N, H))
    if qlen is not None:
        valid = fnp.arange(T)[None, :] < qlen[:, None]
        encoded = encoded * valid[:, :, None, None].astype(encoded.dtype)
    encoded = fnp.reshape(encoded, out_shape)
    if not return_residual:
        return encoded
    lse = special.logsumexp(logits32, axis=-1).astype(k.dtype)  # (B, N, T)
    lse = lax.stop_gradient(fnp.transpose(lse, (0, 2, 1)))
    return encoded, fnp.reshape(lse, out_shape[:-1])


def _repeat_last(s, k: int, name: str):
    if s.shape[-1] == 0 or k % s.shape[-1]:
        raise ValueError(
            f"scaled_matmul: the last dimension of {name} ({s.shape[-1]}) must "
            f"divide the contracting dimension {k}"
        )
    return fnp.repeat(s, k // s.shape[-1], axis=-1)


def scaled_matmul(lhs, rhs, lhs_scales, rhs_scales, preferred_element_type=np.float32):
    """Block-scaled batched matmul (``jax.nn.scaled_matmul``): ``lhs`` ``(B, M, K)`` and
    ``rhs`` ``(B, N, K)`` are multiplied by their scales ``(B, M, K_a)`` / ``(B, N, K_b)``,
    each scale repeated over its block of ``K // K_a`` (``K // K_b``) contracting elements,
    then contracted over ``K``: ``einsum('BMK,BNK->BMN')`` in float32, returned as
    ``preferred_element_type``. fungrad has no float8/float4 dtypes, so the operands are the
    float (or integer) values those formats would hold."""
    arrs = []
    for name, a in (
        ("lhs", lhs),
        ("rhs", rhs),
        ("lhs_scales", lhs_scales),
        ("rhs_scales", rhs_scales),
    ):
        util.check_arraylike("scaled_matmul", a)
        a = fnp.asarray(a)
        if a.ndim != 3:
            raise ValueError(
                f"scaled_matmul: {name} must be 3-d ((B, M|N, K)-style), got shape {a.shape}"
            )
        arrs.append(a.astype(np.float32))
    a, b, sa, sb = arrs
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[2]:
        raise ValueError(
            f"scaled_matmul: lhs {a.shape} and rhs {b.shape} must agree in the "
            f"batch (first) and contracting (last) dimensions"
        )
    if sa.shape[:2] != a.shape[:2] or sb.shape[:2] != b.shape[:2]:
        raise ValueError(
            f"scaled_matmul: scales {sa.shape}, {sb.shape} must match the first "
            f"two dimensions of lhs {a.shape} and rhs {b.shape}"
        )
    kdim = a.shape[2]
    a = a * _repeat_last(sa, kdim, "lhs_scales")
    b = b * _repeat_last(sb, kdim, "rhs_scales")
    out = fnp.einsum("bmk,bnk->bmn", a, b)
    return out.astype(preferred_element_type)


def scaled_dot_general(
    lhs,
    rhs,
    dimension_numbers,
    preferred_element_type=np.float32,
    configs=None,
    implementation=None,
):
    """``lax.dot_general`` with block-scaled quantization (``jax.nn.scaled_dot_general``).
    With ``configs=None`` (JAX's default) it is ``lax.dot_general(lhs, rhs,
    dimension_numbers, preferred_element_type=...)``, as in JAX. Quantizing configs (mxfp8,
    nvfp4) need float8/float4 dtypes, which fungrad does not have: they are a TypeError."""
    if configs is not None:
        raise TypeError(
            "scaled_dot_general: quantizing configs (mxfp8/nvfp4) need float8 and "
            "float4 dtypes, which fungrad does not support; pass configs=None for "
            "a plain dot_general"
        )
    del implementation  # deprecated in JAX and ignored there too
    return lax.dot_general(
        fnp.asarray(lhs),
        fnp.asarray(rhs),
        dimension_numbers,
        preferred_element_type=preferred_element_type,
    )
