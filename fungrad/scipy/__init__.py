"""``fungrad.scipy``: SciPy functions with jax.scipy names."""

from fungrad.scipy import special, stats  # noqa: F401
