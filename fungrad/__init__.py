"""fungrad: JAX's programming model — grad, vjp, jvp, vmap, jit — in a small Python package.

    import fungrad as fg
    import fungrad.numpy as fnp
"""

__version__ = "0.1.0"

from fungrad import ad_checkpoint, lax, nn, numpy, random, scipy, tree_util  # noqa: E402,F401
from fungrad.api import block_until_ready, jit, make_jaxpr, vmap  # noqa: E402
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
from fungrad.devices import Device, GpuArray, device_put, devices  # noqa: E402
from fungrad.lowering.cpu import CompileError  # noqa: E402
from fungrad.lowering.fusion import LoweringError  # noqa: E402
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
from fungrad.transforms.custom import custom_jvp, custom_vjp  # noqa: E402
from fungrad.transforms.remat import checkpoint, checkpoint_policies, remat  # noqa: E402

jacobian = jacrev


def stop_gradient(x):
    """``x`` with a zero derivative, leaf by leaf over a pytree (``jax.lax.stop_gradient``)."""
    return tree_util.tree_map(lax.stop_gradient, x)


__all__ = [
    "Array", "ClosedJaxpr", "CompileError", "ConcretizationTypeError", "Device", "GpuArray",
    "Jaxpr", "LoweringError", "ShapedArray",
    "TracerArrayConversionError", "UnexpectedTracerError", "__version__", "ad_checkpoint",
    "block_until_ready", "checkpoint", "checkpoint_policies", "config", "custom_jvp",
    "custom_vjp", "device_put", "devices", "grad", "hessian", "jacfwd", "jacobian", "jacrev",
    "jit", "jvp", "lax",
    "linearize",
    "make_jaxpr", "nn", "numpy", "random", "remat", "scipy", "stop_gradient", "tree_util",
    "value_and_grad", "vjp", "vmap",
]
