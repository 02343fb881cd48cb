"""``fungrad.nn`` layers: :class:`fungrad.nn.Module` subclasses (frozen dataclasses that are
pytrees; see :mod:`fungrad.nn.module` for why modules rather than init/apply pairs).

Conventions, shared by every layer here:

* Data is channels last (flax, Keras, ``fungrad.example_libraries.stax``: ``NHWC``): an input
  is ``(*batch, *spatial, channels)`` with any number of leading batch axes, none included,
  so a layer works on one example (under ``vmap``) and on a batch alike. Only BatchNorm
  mixes examples (use its ``axis_name`` under ``vmap``).
* Parameters are created in ``__init__`` from a keyword ``key`` with flax's initialisers:
  Linear/Conv kernels ``lecun_normal``, biases zero, Embedding standard normal, norms one
  and zero. ``kernel_init=``/``bias_init=`` take any :mod:`fungrad.nn.initializers` function.
* Randomness is explicit: ``Dropout`` takes ``key=`` when called. State is explicit:
  ``BatchNorm`` is ``bn(x, state) -> (y, state)``. :class:`Sequential` threads both.
"""

from fungrad.nn.layers.attention import MultiHeadAttention
from fungrad.nn.layers.conv import (
    Conv,
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
)
from fungrad.nn.layers.dropout import Dropout
from fungrad.nn.layers.linear import Embedding, Identity, Lambda, Linear
from fungrad.nn.layers.normalization import (
    BatchNorm,
    BatchNormState,
    GroupNorm,
    LayerNorm,
    RMSNorm,
)
from fungrad.nn.layers.pooling import (
    AvgPool,
    AvgPool1d,
    AvgPool2d,
    AvgPool3d,
    GlobalAvgPool,
    GlobalMaxPool,
    MaxPool,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
)
from fungrad.nn.layers.recurrent import RNN, Bidirectional, GRUCell, LSTMCell, SimpleRNNCell, rnn
from fungrad.nn.layers.sequential import Sequential
from fungrad.nn.layers.transformer import TransformerDecoderBlock, TransformerEncoderBlock

__all__ = [
    "AvgPool",
    "AvgPool1d",
    "AvgPool2d",
    "AvgPool3d",
    "BatchNorm",
    "BatchNormState",
    "Bidirectional",
    "Conv",
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "ConvTranspose",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "ConvTranspose3d",
    "Dropout",
    "Embedding",
    "GlobalAvgPool",
    "GlobalMaxPool",
    "GroupNorm",
    "GRUCell",
    "Identity",
    "Lambda",
    "LayerNorm",
    "Linear",
    "LSTMCell",
    "MaxPool",
    "MaxPool1d",
    "MaxPool2d",
    "MaxPool3d",
    "MultiHeadAttention",
    "RMSNorm",
    "RNN",
    "rnn",
    "Sequential",
    "SimpleRNNCell",
    "TransformerDecoderBlock",
    "TransformerEncoderBlock",
]
