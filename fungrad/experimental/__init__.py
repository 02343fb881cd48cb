"""``jax.experimental``'s names that fungrad has: :func:`io_callback`, the ``checkify``
module."""

from fungrad.callback import io_callback
from fungrad.experimental import checkify

__all__ = ["io_callback", "checkify"]
