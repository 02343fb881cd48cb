"""Multi-head attention as a layer: learned query/key/value/output projections around
:func:`fungrad.nn.dot_product_attention`.

The signature follows equinox's ``MultiheadAttention`` (sizes, ``qk_size``/``vo_size``, one
``use_*_bias`` flag per projection, ``dropout_p``, ``inference``, ``key=``), adapted to this
package's conventions: inputs carry any number of leading batch axes, ``(*batch, seq,
features)`` (none under ``vmap``), and the projections are :class:`fungrad.nn.Linear`
layers (``x @ weight``, lecun-normal kernels).

Masks are boolean with ``True`` meaning "attend", as in ``jax.nn.dot_product_attention``
and flax: ``mask`` broadcasts against ``(*batch, num_heads, query_seq, key_seq)``;
``key_padding_mask`` is ``(*batch, key_seq)`` with ``True`` on real tokens and ``False`` on
padding (the opposite of PyTorch's ``key_padding_mask``, whose ``True`` marks padding);
``is_causal`` lets query ``t`` see keys ``s <= t``. A query whose keys are all masked gets
the uniform average of the values (JAX's finite-mask rule), not NaN. A masked position
gets weight exactly zero, but its value still enters the weighted sum as ``0 * v``, so
padding must hold finite numbers (a NaN there spreads, as it does in JAX and PyTorch).
"""

from __future__ import annotations

import math

import numpy as np

import fungrad.numpy as fnp
from fungrad import random
from fungrad.nn.attention import dot_product_attention
from fungrad.nn.layers.dropout import Dropout
from fungrad.nn.layers.linear import Linear
from fungrad.nn.module import Module
from fungrad.scipy import special

__all__ = ["MultiHeadAttention"]


def _check_mask(name: str, m, want_ndim_note: str):
    if m is None:
        return None
    m = fnp.asarray(m)
    if m.dtype != np.dtype(bool):
        raise TypeError(
            f"MultiHeadAttention: {name} must be boolean (True = attend), got dtype {m.dtype}; "
            f"{want_ndim_note}"
        )
    return m


class MultiHeadAttention(Module):
    """Multi-head scaled dot-product attention (Vaswani et al. 2017).

    ``query`` ``(*batch, T, query_size)``, ``key_`` ``(*batch, S, key_size)`` and ``value``
    ``(*batch, S, value_size)`` are projected to ``num_heads`` heads of ``qk_size``
    (queries, keys) and ``vo_size`` (values), attended per head with scale
    ``1/sqrt(qk_size)``, concatenated and projected to ``output_size``. ``key_`` defaults
    to ``query`` (self-attention) and ``value`` to ``key_``. Sizes default as in equinox:
    ``key_size = value_size = output_size = query_size`` and ``qk_size = vo_size =
    query_size // num_heads``. Projections have no bias unless ``use_*_bias``.

    ``dropout_p`` drops attention weights (after the softmax, before the values) in
    training, which needs ``key=`` at the call; in inference (the ``inference`` field or
    the call's ``inference=True``), or with ``dropout_p=0``, it needs no key. Without
    dropout, and with ``qk_size == vo_size``, the heads are attended by
    :func:`fungrad.nn.dot_product_attention`; otherwise by the same computation written
    out here (that function has neither dropout nor value heads of another size).
    """

    query_proj: Linear
    key_proj: Linear
    value_proj: Linear
    output_proj: Linear
    dropout: Dropout
    num_heads: int
    query_size: int
    key_size: int
    value_size: int
    output_size: int
    qk_size: int
    vo_size: int

    def __init__(
        self,
        num_heads: int,
        query_size: int,
        key_size: int | None = None,
        value_size: int | None = None,
        output_size: int | None = None,
        qk_size: int | None = None,
        vo_size: int | None = None,
        use_query_bias: bool = False,
        use_key_bias: bool = False,
        use_value_bias: bool = False,
        use_output_bias: bool = False,
        dropout_p: float = 0.0,
        inference: bool = False,
        dtype=None,
        *,
        key,
    ):
        if num_heads < 1 or query_size < 1:
            raise ValueError(
                f"MultiHeadAttention: num_heads and query_size must be positive, got "
                f"{num_heads} and {query_size}"
            )
        if (qk_size is None or vo_size is None) and query_size % num_heads:
            raise ValueError(
                f"MultiHeadAttention: query_size={query_size} is not a multiple of "
                f"num_heads={num_heads}; pass qk_size and vo_size (per-head sizes) explicitly"
            )
        key_size = query_size if key_size is None else key_size
        value_size = query_size if value_size is None else value_size
        output_size = query_size if output_size is None else output_size
        qk_size = query_size // num_heads if qk_size is None else qk_size
        vo_size = query_size // num_heads if vo_size is None else vo_size
        qkey, kkey, vkey, okey = random.split(key, 4)
        n = num_heads
        self.query_proj = Linear(query_size, n * qk_size, use_query_bias, dtype, key=qkey)
        self.key_proj = Linear(key_size, n * qk_size, use_key_bias, dtype, key=kkey)
        self.value_proj = Linear(value_size, n * vo_size, use_value_bias, dtype, key=vkey)
        self.output_proj = Linear(n * vo_size, output_size, use_output_bias, dtype, key=okey)
        self.dropout = Dropout(dropout_p, inference=inference)
        self.num_heads, self.query_size = int(num_heads), int(query_size)
        self.key_size, self.value_size = int(key_size), int(value_size)
        self.output_size, self.qk_size, self.vo_size = int(output_size), int(qk_size), int(vo_size)

    def __call__(
        self,
        query,
        key_=None,
        value=None,
        mask=None,
        *,
        key_padding_mask=None,
        is_causal: bool = False,
        key=None,
        inference: bool | None = None,
    ):
        query = fnp.asarray(query)
        key_ = query if key_ is None else fnp.asarray(key_)
        value = key_ if value is None else fnp.asarray(value)
        for name, x, size in (
            ("query", query, self.query_size),
            ("key_", key_, self.key_size),
            ("value", value, self.value_size),
        ):
            if x.ndim < 2 or x.shape[-1] != size:
                raise TypeError(
                    f"MultiHeadAttention: {name} of shape {x.shape} is not (*batch, seq, {size})"
                )
        batch = query.shape[:-2]
        if key_.shape[:-1] != value.shape[:-1] or key_.shape[:-2] != batch:
            raise TypeError(
                f"MultiHeadAttention: query {query.shape}, key_ {key_.shape} and value "
                f"{value.shape} need the same batch axes, and key_ and value the same "
                "sequence length"
            )
        T, S, N = query.shape[-2], key_.shape[-2], self.num_heads
        B = math.prod(batch)
        q = fnp.reshape(self.query_proj(query), (B, T, N, self.qk_size))
        k = fnp.reshape(self.key_proj(key_), (B, S, N, self.qk_size))
        v = fnp.reshape(self.value_proj(value), (B, S, N, self.vo_size))

        keep = self._keep(mask, key_padding_mask, batch, T, S)
        inference = self.dropout.inference if inference is None else inference
        drop = not inference and self.dropout.p > 0.0
        if drop or self.qk_size != self.vo_size:
            out = self._attend(q, k, v, keep, is_causal, key if drop else None, drop)
        else:
            out = dot_product_attention(q, k, v, mask=keep, is_causal=is_causal)
        out = fnp.reshape(out, (*batch, T, N * self.vo_size))
        return self.output_proj(out)

    def _keep(self, mask, key_padding_mask, batch, T, S):
        """The user's masks combined into one boolean ``(B, 1|N, T, S)`` array, or None."""
        N, B = self.num_heads, math.prod(batch)
        mask = _check_mask("mask", mask, f"it broadcasts against (*batch, num_heads, {T}, {S})")
        kpm = _check_mask("key_padding_mask", key_padding_mask, f"its shape is (*batch, {S})")
        keep = None
        if mask is not None:
            full = (*batch, N, T, S)
            try:
                ok = np.broadcast_shapes(mask.shape, full) == full
            except ValueError:
                ok = False
            if not ok:
                raise ValueError(
                    f"MultiHeadAttention: mask of shape {mask.shape} does not broadcast "
                    f"against (*batch, num_heads, T, S) = {full}"
                )
            heads = N if mask.ndim >= 3 and mask.shape[-3] == N else 1
            keep = fnp.reshape(fnp.broadcast_to(mask, (*batch, heads, T, S)), (B, heads, T, S))
        if kpm is not None:
            if kpm.shape != (*batch, S):
                raise ValueError(
                    f"MultiHeadAttention: key_padding_mask must have shape (*batch, S) = "
                    f"{(*batch, S)}, got {kpm.shape}"
                )
            pad = fnp.reshape(kpm, (B, 1, 1, S))
            keep = pad if keep is None else fnp.logical_and(keep, pad)
        return keep

    def _attend(self, q, k, v, keep, is_causal, key, drop):
        """The attention :func:`fungrad.nn.dot_product_attention` computes (the same logits,
        finite mask and float32 softmax) written out, for the two cases it does not cover:
        :class:`Dropout` on the ``(B, N, T, S)`` weights before they meet the values, and
        value heads of another size than the query/key heads."""
        if drop and key is None:
            raise ValueError(
                "MultiHeadAttention: dropout_p > 0 in training needs a PRNG key "
                "(mha(q, key=key)); pass inference=True to turn dropout off"
            )
        T, S = q.shape[1], k.shape[1]
        logits_dtype = fnp.promote_types(q.dtype, np.float32)
        scale = np.asarray(1.0 / np.sqrt(self.qk_size), logits_dtype)
        logits = fnp.einsum("btnh,bsnh->bnts", q.astype(logits_dtype), k.astype(logits_dtype))
        logits = logits * scale
        if is_causal:
            causal = (fnp.arange(S)[None, :] <= fnp.arange(T)[:, None])[None, None]
            keep = causal if keep is None else fnp.logical_and(keep, causal)
        if keep is not None:
            big = min(float(np.finfo(logits_dtype).max), float(np.finfo(np.float32).max))
            logits = fnp.where(keep, logits, fnp.asarray(-0.7 * big, logits_dtype))
        probs = special.softmax(logits.astype(np.float32), axis=-1).astype(k.dtype)
        if drop:
            probs = self.dropout(probs, key=key, inference=False)
        return fnp.einsum("bnts,bsnh->btnh", probs, v)
