"""Linear (dense) layers, embeddings, and wrappers of plain functions as layers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import fungrad.numpy as fnp
from fungrad import random
from fungrad.array import Array
from fungrad.nn import initializers
from fungrad.nn.layers._util import check_floating, default_float
from fungrad.nn.module import Module, field

__all__ = ["Embedding", "Identity", "Lambda", "Linear"]


class Linear(Module):
    """``y = x @ weight + bias`` over the last axis of ``x`` (any leading axes).

    ``weight`` has shape ``(in_features, out_features)`` (flax's kernel layout, so ``x @ W``
    needs no transpose) and is drawn from :func:`fungrad.nn.initializers.lecun_normal`;
    ``bias`` starts at zero (flax's defaults). Other initialisers: ``kernel_init`` /
    ``bias_init`` take any ``fungrad.nn.initializers`` function.
    """

    weight: Array
    bias: Array | None
    in_features: int
    out_features: int
    use_bias: bool = True

    def __init__(
        self,
        in_features: int,
        out_features: int,
        use_bias: bool = True,
        dtype=None,
        *,
        key,
        kernel_init: Callable = initializers.lecun_normal(),
        bias_init: Callable = initializers.zeros,
    ):
        if in_features < 1 or out_features < 1:
            raise ValueError(
                f"Linear: in_features and out_features must be positive, got "
                f"{in_features} and {out_features}"
            )
        dtype = check_floating("Linear", default_float(dtype))
        wkey, bkey = random.split(key)
        self.weight = kernel_init(wkey, (in_features, out_features), dtype)
        self.bias = bias_init(bkey, (out_features,), dtype) if use_bias else None
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        self.use_bias = bool(use_bias)

    def __call__(self, x):
        x = fnp.asarray(x)
        if np.ndim(x) < 1 or x.shape[-1] != self.in_features:
            raise TypeError(
                f"Linear: input of shape {np.shape(x)} does not end in in_features="
                f"{self.in_features}"
            )
        y = fnp.matmul(x, self.weight)
        return y + self.bias if self.bias is not None else y


class Embedding(Module):
    """A lookup table: ``weight[ids]`` for integer ``ids`` of any shape (the result gains a
    trailing axis of ``embedding_size``). ``weight`` (``(num_embeddings, embedding_size)``)
    starts from a standard normal, as in flax and PyTorch; pass ``weight=`` to use your own
    table. Out-of-range ids are clamped, as array indexing is in fungrad/JAX."""

    weight: Array
    num_embeddings: int
    embedding_size: int

    def __init__(
        self,
        num_embeddings: int | None = None,
        embedding_size: int | None = None,
        weight=None,
        dtype=None,
        *,
        key=None,
    ):
        if weight is None:
            if num_embeddings is None or embedding_size is None or key is None:
                raise TypeError(
                    "Embedding: give num_embeddings, embedding_size and key (or weight=)"
                )
            dtype = check_floating("Embedding", default_float(dtype))
            weight = random.normal(key, (num_embeddings, embedding_size), dtype)
        else:
            weight = fnp.asarray(weight)
            if weight.ndim != 2:
                raise TypeError(f"Embedding: weight must be 2-D, got shape {weight.shape}")
        self.weight = weight
        self.num_embeddings, self.embedding_size = (int(d) for d in weight.shape)

    def __call__(self, ids):
        dtype = np.dtype(ids.dtype if hasattr(ids, "dtype") else np.asarray(ids).dtype)
        if not np.issubdtype(dtype, np.integer):
            raise TypeError(f"Embedding: ids must be integers, got dtype {dtype}")
        return self.weight[ids]


class Lambda(Module):
    """A function as a layer (an activation, a reshape): ``Lambda(fg.nn.relu)(x)`` is
    ``fg.nn.relu(x)``. The function is static (part of the treedef, never traced)."""

    fn: Callable[[Any], Any] = field(static=True)

    def __call__(self, x):
        return self.fn(x)


class Identity(Module):
    """Returns its input unchanged (a placeholder in a :class:`Sequential`)."""

    def __call__(self, x):
        return x
