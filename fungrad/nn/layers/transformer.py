"""Transformer blocks with pre-layer normalisation (Xiong et al. 2020; GPT-2's layout):

    h = x + dropout(attention(layer_norm_1(x)))
    y = h + dropout(mlp(layer_norm_2(h))),    mlp(u) = linear_2(activation(linear_1(u)))

Normalising before each sub-layer, and leaving the residual path untouched, trains stably
without the learning-rate warm-up that the original post-LN block needs. A stack of these
blocks is usually followed by one more :class:`fungrad.nn.LayerNorm` (the residual stream
is never normalised inside a block).

:class:`TransformerEncoderBlock` attends in both directions (a ``causal`` flag restricts it);
:class:`TransformerDecoderBlock` is the decoder-only (GPT-style) block: the same layers with
the causal mask always on and no cross-attention, what a character-level language model
stacks.
"""

from __future__ import annotations

from collections.abc import Callable

from fungrad import random
from fungrad.nn import functions
from fungrad.nn.layers.attention import MultiHeadAttention
from fungrad.nn.layers.dropout import Dropout
from fungrad.nn.layers.linear import Linear
from fungrad.nn.layers.normalization import LayerNorm
from fungrad.nn.module import Module, field

__all__ = ["TransformerDecoderBlock", "TransformerEncoderBlock"]


class TransformerEncoderBlock(Module):
    """A pre-LN transformer block on ``x`` ``(*batch, T, d_model)`` (see the module
    docstring for the formula).

    ``mlp_size`` (default ``4 * d_model``) is the hidden width of the MLP and
    ``activation`` its nonlinearity (default ``fg.nn.gelu``, JAX's tanh approximation).
    ``dropout_p`` drops the output of each sub-layer before it joins the residual and
    ``attention_dropout_p`` the attention weights; both need ``key=`` in training and are
    off in inference (the ``inference`` field or the call's ``inference=``). Every
    projection has a bias (``use_bias``); ``eps`` is the LayerNorms'. ``causal`` makes
    position ``t`` attend only to ``s <= t``; ``mask`` / ``key_padding_mask`` at the call
    are :class:`MultiHeadAttention`'s (boolean, ``True`` = attend).
    """

    norm1: LayerNorm
    attention: MultiHeadAttention
    norm2: LayerNorm
    linear1: Linear
    linear2: Linear
    dropout: Dropout
    d_model: int
    num_heads: int
    causal: bool = False
    activation: Callable = field(static=True, default=functions.gelu)

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        mlp_size: int | None = None,
        dropout_p: float = 0.0,
        attention_dropout_p: float = 0.0,
        activation: Callable = functions.gelu,
        causal: bool = False,
        use_bias: bool = True,
        eps: float = 1e-5,
        inference: bool = False,
        dtype=None,
        *,
        key,
    ):
        if d_model < 1 or num_heads < 1 or d_model % num_heads:
            raise ValueError(
                f"{type(self).__name__}: d_model={d_model} must be a positive multiple of "
                f"num_heads={num_heads}"
            )
        mlp_size = 4 * d_model if mlp_size is None else mlp_size
        akey, k1, k2 = random.split(key, 3)
        self.norm1 = LayerNorm(d_model, eps, dtype=dtype)
        self.attention = MultiHeadAttention(
            num_heads, d_model, use_query_bias=use_bias, use_key_bias=use_bias,
            use_value_bias=use_bias, use_output_bias=use_bias,
            dropout_p=attention_dropout_p, inference=inference, dtype=dtype, key=akey,
        )  # fmt: skip
        self.norm2 = LayerNorm(d_model, eps, dtype=dtype)
        self.linear1 = Linear(d_model, mlp_size, use_bias, dtype, key=k1)
        self.linear2 = Linear(mlp_size, d_model, use_bias, dtype, key=k2)
        self.dropout = Dropout(dropout_p, inference=inference)
        self.d_model, self.num_heads = int(d_model), int(num_heads)
        self.causal = bool(causal)
        self.activation = activation

    def __call__(self, x, mask=None, *, key_padding_mask=None, key=None,
                 inference: bool | None = None):  # fmt: skip
        x_shape = getattr(x, "shape", None)
        if x_shape is None or len(x_shape) < 2 or x_shape[-1] != self.d_model:
            raise TypeError(
                f"{type(self).__name__}: input of shape {x_shape} is not (*batch, seq, "
                f"d_model={self.d_model})"
            )
        if inference is None:
            inference = self.dropout.inference
        k_att, k1, k2 = random.split(key, 3) if key is not None else (None, None, None)
        a = self.attention(
            self.norm1(x), mask=mask, key_padding_mask=key_padding_mask,
            is_causal=self.causal, key=k_att, inference=inference,
        )  # fmt: skip
        h = x + self.dropout(a, key=k1, inference=inference)
        m = self.linear2(self.activation(self.linear1(self.norm2(h))))
        return h + self.dropout(m, key=k2, inference=inference)


class TransformerDecoderBlock(TransformerEncoderBlock):
    """The decoder-only (GPT-style) block: :class:`TransformerEncoderBlock` with the causal
    mask always on (no cross-attention), so output ``t`` depends on ``x[..., :t+1, :]``
    only. Same arguments, less ``causal``."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        mlp_size: int | None = None,
        dropout_p: float = 0.0,
        attention_dropout_p: float = 0.0,
        activation: Callable = functions.gelu,
        use_bias: bool = True,
        eps: float = 1e-5,
        inference: bool = False,
        dtype=None,
        *,
        key,
    ):
        super().__init__(
            d_model, num_heads, mlp_size, dropout_p, attention_dropout_p, activation,
            causal=True, use_bias=use_bias, eps=eps, inference=inference, dtype=dtype, key=key,
        )  # fmt: skip
