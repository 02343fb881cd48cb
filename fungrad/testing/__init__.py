"""``fungrad.testing``: checking derivatives numerically.

``check_grads`` (JAX-compatible), ``check_jvp``, ``check_vjp``, ``check_taylor`` and
``assert_transforms_commute`` live in :mod:`fungrad.testing.gradcheck`; hypothesis strategies
in :mod:`fungrad.testing.strategies` (imported on demand: hypothesis is a test dependency).
"""

from fungrad.testing.gradcheck import (
    assert_transforms_commute,
    check_grads,
    check_jvp,
    check_taylor,
    check_vjp,
    numerical_jvp,
)

__all__ = [
    "assert_transforms_commute",
    "check_grads",
    "check_jvp",
    "check_taylor",
    "check_vjp",
    "numerical_jvp",
]
