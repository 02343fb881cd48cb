"""``fungrad.custom_derivatives``: jax.custom_derivatives' names for the custom-rule
transforms, so ``from jax.custom_derivatives import custom_jvp`` runs unchanged.

The functions are fungrad's own (``fungrad.custom_jvp`` and friends); the call primitives are
the ones their jaxprs hold. ``SymbolicZero`` is what a rule defined with
``symbolic_zeros=True`` receives for a zero tangent or cotangent (and may return), and
``CustomVJPPrimal`` what such a ``custom_vjp`` fwd rule receives for each argument leaf. Not
here: ``linear_call`` and ``remat_opt_p``.
"""

from fungrad.api import closure_convert, custom_gradient
from fungrad.transforms.custom import (
    CustomVJPPrimal,
    SymbolicZero,
    custom_jvp,
    custom_jvp_call_p,
    custom_vjp,
    custom_vjp_call_p,
    custom_vjp_primal_tree_values,
    zero_from_primal,
)

__all__ = [
    "CustomVJPPrimal",
    "SymbolicZero",
    "closure_convert",
    "custom_gradient",
    "custom_jvp",
    "custom_jvp_call_p",
    "custom_vjp",
    "custom_vjp_call_p",
    "custom_vjp_primal_tree_values",
    "zero_from_primal",
]
