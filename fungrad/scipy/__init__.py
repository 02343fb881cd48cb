"""``fungrad.scipy``: SciPy functions with jax.scipy names."""

from fungrad.scipy import special  # noqa: F401
