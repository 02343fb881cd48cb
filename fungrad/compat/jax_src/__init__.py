"""Stand-ins for the few private ``jax._src`` modules that widely used libraries built on JAX
import (flax imports ``jax._src.traceback_util``). ``fungrad.compat`` maps ``jax._src.X`` to
``fungrad.compat.jax_src.X`` when it exists here, or to the fungrad module named in
``fungrad.compat.PRIVATE_MODULES``; any other ``jax._src`` module is reported as not provided.
Nothing else in fungrad imports these."""
