"""``fungrad.test_util``: JAX's ``jax.test_util`` spellings of the derivative checks.

``check_grads(f, args, order, modes=("fwd", "rev"), atol=None, rtol=None, eps=None)`` checks
``f``'s forward- and reverse-mode derivatives up to ``order`` against central finite
differences; ``check_jvp(f, f_jvp, args, ...)`` and ``check_vjp(f, f_vjp, args, ...)`` check
one jvp / vjp function. The implementations live in :mod:`fungrad.testing.gradcheck`.

NB: JAX's ``check_jvp``/``check_vjp`` default to ``eps=1e-4``; here ``eps=None`` picks the
step from the arguments' dtype (as ``check_grads`` does in both libraries), which is the more
accurate choice for float32 and float64 alike. Pass ``eps`` to choose it.
"""

from __future__ import annotations

from fungrad.testing import gradcheck

__all__ = ["check_grads", "check_jvp", "check_vjp"]


def check_grads(f, args, order, modes=("fwd", "rev"), atol=None, rtol=None, eps=None):
    """Check ``f``'s derivatives at ``args`` up to ``order`` in ``modes`` (``"fwd"`` and/or
    ``"rev"``) against central finite differences; raises AssertionError on a mismatch
    (``jax.test_util.check_grads``)."""
    gradcheck.check_grads(f, args, order, modes, atol, rtol, eps)


def check_jvp(f, f_jvp, args, atol=None, rtol=None, eps=None, err_msg=""):
    """Check ``f_jvp(primals, tangents) -> (out, tangent_out)`` against central differences
    of ``f`` along a random tangent (``jax.test_util.check_jvp``)."""
    gradcheck.check_jvp(f, f_jvp, args, atol, rtol, eps, err_msg)


def check_vjp(f, f_vjp, args, atol=None, rtol=None, eps=None, err_msg=""):
    """Check ``f_vjp(*args) -> (out, vjp_fn)`` by the dot-product identity
    ``<vjp_fn(ct), t> == <ct, jvp(t)>`` with a finite-difference jvp
    (``jax.test_util.check_vjp``)."""
    gradcheck.check_vjp(f, f_vjp, args, atol, rtol, eps, err_msg)
