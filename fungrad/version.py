"""fungrad's version string, in a module of its own so that code inside the package (the object
cache keys its entries and its directory on it) can read it without importing the package."""

__version__ = "0.1.0"

jax_api_version = "0.10.2"
"""The JAX release whose API and semantics fungrad follows (its tests record that release's
results); ``fungrad.compat`` reports it as ``jax.__version__``."""
