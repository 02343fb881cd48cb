"""Structured control flow: cond / switch, while_loop / fori_loop, scan / map.

These are higher-order primitives: their params hold the traced bodies as ClosedJaxprs whose
consts are concrete arrays; a tracer of an enclosing transform that a body closes over is
hoisted into an explicit operand, so the body's dependence on it is visible to the transforms.
Bodies are traced abstractly: Python control flow on their values is a ConcretizationTypeError.

Primitives and operands (JAX's spelling):

* ``cond[branches=(jaxpr, ...)] index *operands`` — the branch ``index`` (clamped) runs;
* ``while[cond_jaxpr body_jaxpr cond_nconsts body_nconsts] *cond_consts *body_consts *carry``;
* ``scan[jaxpr num_consts num_carry length reverse linear] *consts *carry *xs`` — the body maps
  ``(consts, carry, x) -> (carry, y)``; ys are stacked along a new leading axis.
"""

from fungrad.lax.control_flow.conditionals import cond, cond_p, switch
from fungrad.lax.control_flow.loops import fori_loop, map, scan, scan_p, while_loop, while_p

__all__ = [
    "cond",
    "switch",
    "while_loop",
    "fori_loop",
    "scan",
    "map",
    "cond_p",
    "while_p",
    "scan_p",
]
