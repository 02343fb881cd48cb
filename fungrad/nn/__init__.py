"""``fungrad.nn``: jax.nn's activation functions, softmax family, one_hot and standardize, and
the weight initializers of ``jax.nn.initializers`` (:mod:`fungrad.nn.initializers`), and
``dot_product_attention`` / ``scaled_matmul`` / ``scaled_dot_general``
(:mod:`fungrad.nn.attention`); the :class:`Module` base class (:mod:`fungrad.nn.module`)
and the layers built on it (:mod:`fungrad.nn.layers`: Linear, Conv, pooling, norms,
Embedding, Dropout, Sequential, MultiHeadAttention, transformer blocks, recurrent cells and
the ``rnn`` loop).

The functions live in :mod:`fungrad.nn.functions`; ``logsumexp`` is the one from
:mod:`fungrad.scipy.special`.
"""

from fungrad.nn import initializers  # noqa: F401
from fungrad.nn.attention import *  # noqa: F401,F403
from fungrad.nn.attention import __all__ as _attention_all
from fungrad.nn.functions import *  # noqa: F401,F403
from fungrad.nn.functions import __all__ as _functions_all
from fungrad.nn.layers import *  # noqa: F401,F403
from fungrad.nn.layers import __all__ as _layers_all
from fungrad.nn.module import Module, field, inference_mode, is_array  # noqa: F401

__all__ = [
    *_functions_all,
    *_attention_all,
    "Module",
    "field",
    "inference_mode",
    "is_array",
    *_layers_all,
]
