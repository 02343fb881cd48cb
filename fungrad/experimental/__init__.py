"""``jax.experimental``'s names that fungrad has: :func:`io_callback`."""

from fungrad.callback import io_callback

__all__ = ["io_callback"]
