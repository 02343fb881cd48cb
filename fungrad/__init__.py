"""fungrad: JAX's programming model — grad, vjp, jvp, vmap, jit — in a small Python package.

    import fungrad as fg
    import fungrad.numpy as fnp
"""

__version__ = "0.1.0"

from fungrad import lax, nn, numpy, random, scipy, tree_util  # noqa: E402,F401
from fungrad.api import block_until_ready, make_jaxpr, vmap  # noqa: E402
from fungrad.array import Array  # noqa: E402
from fungrad.config import config  # noqa: E402
from fungrad.core import (  # noqa: E402
    ClosedJaxpr,
    ConcretizationTypeError,
    Jaxpr,
    ShapedArray,
    TracerArrayConversionError,
    UnexpectedTracerError,
)
from fungrad.transforms.autodiff import (  # noqa: E402
    grad,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    linearize,
    value_and_grad,
    vjp,
)

jacobian = jacrev

__all__ = [
    "Array", "ClosedJaxpr", "ConcretizationTypeError", "Jaxpr", "ShapedArray",
    "TracerArrayConversionError", "UnexpectedTracerError", "__version__", "block_until_ready",
    "config", "grad", "hessian", "jacfwd", "jacobian", "jacrev", "jvp", "lax", "linearize",
    "make_jaxpr", "nn", "numpy", "random", "scipy", "tree_util", "value_and_grad", "vjp", "vmap",
]
