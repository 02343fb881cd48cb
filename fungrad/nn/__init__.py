"""``fungrad.nn``: jax.nn's activation functions, softmax family, one_hot and standardize.

The functions live in :mod:`fungrad.nn.functions`; ``logsumexp`` is the one from
:mod:`fungrad.scipy.special`.
"""

from fungrad.nn.functions import *  # noqa: F401,F403
from fungrad.nn.functions import __all__  # noqa: F401
