"""``fungrad.scipy.integrate``: ``trapezoid``, jax.scipy.integrate's one function.

As in JAX it is ``jnp.trapezoid`` (``fungrad/numpy/differences.py``: the composite trapezoidal
rule with JAX's dtype promotion of ``dx`` and its errors).
"""

from __future__ import annotations

from fungrad.numpy.differences import trapezoid

__all__ = ["trapezoid"]
