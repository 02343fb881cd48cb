"""``jax.interpreters``: the tracing machinery's extension points that library code reaches
for. fungrad provides :mod:`~fungrad.interpreters.partial_eval`'s partial evaluation of
wrapped functions; ``ad``, ``batching`` and ``mlir`` (registering rules for new primitives)
are absent: fungrad's primitives are defined inside the package, each with all its rules."""
