"""fungrad: JAX's programming model — grad, vjp, jvp, vmap, jit — in a small Python package.

    import fungrad as fg
    import fungrad.numpy as fnp
"""

__version__ = "0.1.0"

from fungrad import lax, tree_util  # noqa: E402
from fungrad import numpy, random, nn, scipy  # noqa: E402,F401
from fungrad.api import block_until_ready, make_jaxpr  # noqa: E402
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

__all__ = [
    "Array", "ClosedJaxpr", "ConcretizationTypeError", "Jaxpr", "ShapedArray",
    "TracerArrayConversionError", "UnexpectedTracerError", "__version__", "block_until_ready",
    "config", "lax", "make_jaxpr", "tree_util",
]
