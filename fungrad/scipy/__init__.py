"""``fungrad.scipy``: SciPy functions with jax.scipy names."""

from fungrad.scipy import fft, integrate, linalg, ndimage, optimize, signal, sparse, special, stats  # noqa: F401
