"""``jax.extend``: the parts of JAX's extension API that code built on top of JAX imports.

- :mod:`~fungrad.extend.core`: jaxpr types, the current trace's opaque state, evaluating a
  closed jaxpr as a function;
- :mod:`~fungrad.extend.linear_util`: functions wrapped with transformations
  (``WrappedFun``), which :mod:`fungrad.api_util` and :mod:`fungrad.interpreters.partial_eval`
  take;
- :mod:`~fungrad.extend.source_info_util`: excluding a library's files from the source
  locations recorded on equations.

Defining new primitives (``jax.extend.core.Primitive`` with ``jax.interpreters.ad``,
``batching`` and ``mlir`` rules) is absent: fungrad's primitives are defined inside the
package, each with all its rules beside it (docs/architecture.md).
"""

from fungrad.extend import core, linear_util, source_info_util

__all__ = ["core", "linear_util", "source_info_util"]
