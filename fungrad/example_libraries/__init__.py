"""``fungrad.example_libraries``: JAX's small example libraries, for programs written against them.

    from fungrad.example_libraries import stax, optimizers

- :mod:`~fungrad.example_libraries.stax`: neural-network layers as ``(init_fun, apply_fun)``
  pairs (``jax.example_libraries.stax``).
- :mod:`~fungrad.example_libraries.optimizers`: optimizers as ``(init_fun, update_fun,
  get_params)`` triples over pytrees (``jax.example_libraries.optimizers``).

As in JAX, this package imports neither submodule and ``import fungrad`` does not import this
package: name the submodule you use. Both give the same numbers as JAX's for the same key and
inputs (the initializers draw from :mod:`fungrad.random` as JAX's do).
"""
