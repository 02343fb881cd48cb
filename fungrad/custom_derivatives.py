"""``fungrad.custom_derivatives``: jax.custom_derivatives' names for the custom-rule
transforms, so ``from jax.custom_derivatives import custom_jvp`` runs unchanged.

The functions are fungrad's own (``fungrad.custom_jvp`` and friends); the call primitives are
the ones their jaxprs hold. Not here: ``SymbolicZero``, ``zero_from_primal``,
``CustomVJPPrimal`` and ``custom_vjp_primal_tree_values`` (fungrad's custom rules take no
``symbolic_zeros`` option), ``linear_call`` and ``remat_opt_p``.
"""

from fungrad.api import closure_convert, custom_gradient
from fungrad.transforms.custom import custom_jvp, custom_jvp_call_p, custom_vjp, custom_vjp_call_p

__all__ = [
    "closure_convert",
    "custom_gradient",
    "custom_jvp",
    "custom_jvp_call_p",
    "custom_vjp",
    "custom_vjp_call_p",
]
