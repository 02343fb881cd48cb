"""fungrad: JAX's programming model — grad, vjp, jvp, vmap, jit — in a small Python package.

import fungrad as fg
import fungrad.numpy as fnp
"""

from fungrad import (  # noqa: E402,F401
    ad_checkpoint,
    checkpoints,
    custom_derivatives,
    debug,
    distributed,
    errors,
    experimental,
    flatten_util,
    image,
    lax,
    nn,
    numpy,
    ops,
    optim,
    random,
    scipy,
    sharding,
    tree,
    tree_util,
    typing,
)
from fungrad.api import (  # noqa: E402
    ShapeDtypeStruct,
    block_until_ready,
    clear_caches,
    closure_convert,
    copy_to_host_async,
    custom_gradient,
    debug_infs,
    debug_nans,
    default_matmul_precision,
    device_get,
    disable_jit,
    effects_barrier,
    enable_checks,
    enable_x64,
    ensure_compile_time_eval,
    eval_shape,
    explain_cache_misses,
    jit,
    linear_transpose,
    make_jaxpr,
    named_call,
    named_scope,
    numpy_rank_promotion,
    print_environment_info,
    typeof,
    vmap,
)
from fungrad.array import Array  # noqa: E402
from fungrad.callback import pure_callback  # noqa: E402
from fungrad.config import config  # noqa: E402
from fungrad.core import (  # noqa: E402
    ClosedJaxpr,
    ConcretizationTypeError,
    Jaxpr,
    ShapedArray,
    TracerArrayConversionError,
    UnexpectedTracerError,
)
from fungrad.devices import (  # noqa: E402
    Device,
    GpuArray,
    default_backend,
    device_count,
    device_put,
    devices,
    local_device_count,
    local_devices,
    process_count,
    process_index,
    process_indices,
)
from fungrad.dtypes import float0  # noqa: E402
from fungrad.lowering.cpu.compiler import CompileError  # noqa: E402
from fungrad.lowering.fusion import LoweringError  # noqa: E402
from fungrad.parallel import pmap  # noqa: E402
from fungrad.profiler import profile  # noqa: E402
from fungrad.shard_map_impl import shard_map  # noqa: E402
from fungrad.sharding import NamedSharding, reshard  # noqa: E402
from fungrad.sharding import PartitionSpec as P  # noqa: E402
from fungrad.sharding_impls import make_mesh, set_mesh  # noqa: E402
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
from fungrad.version import __version__  # noqa: F401

jacobian = jacrev

# lax.linalg is written on fungrad.numpy, which imports lax: it loads last.
from fungrad.lax import linalg as _lax_linalg  # noqa: E402,F401
from fungrad.viz import viz  # noqa: E402

del _lax_linalg


def stop_gradient(x):
    """``x`` with a zero derivative, leaf by leaf over a pytree (``jax.lax.stop_gradient``)."""
    return tree_util.tree_map(lax.stop_gradient, x)


__all__ = [
    "Array",
    "ClosedJaxpr",
    "CompileError",
    "ConcretizationTypeError",
    "Device",
    "GpuArray",
    "Jaxpr",
    "LoweringError",
    "NamedSharding",
    "P",
    "ShapeDtypeStruct",
    "ShapedArray",
    "TracerArrayConversionError",
    "UnexpectedTracerError",
    "__version__",
    "ad_checkpoint",
    "block_until_ready",
    "clear_caches",
    "checkpoint",
    "checkpoint_policies",
    "checkpoints",
    "closure_convert",
    "config",
    "copy_to_host_async",
    "custom_gradient",
    "custom_jvp",
    "custom_vjp",
    "debug",
    "debug_infs",
    "debug_nans",
    "default_backend",
    "default_matmul_precision",
    "device_count",
    "device_get",
    "device_put",
    "devices",
    "disable_jit",
    "distributed",
    "effects_barrier",
    "enable_checks",
    "enable_x64",
    "ensure_compile_time_eval",
    "eval_shape",
    "experimental",
    "explain_cache_misses",
    "flatten_util",
    "float0",
    "grad",
    "hessian",
    "jacfwd",
    "jacobian",
    "jacrev",
    "jit",
    "jvp",
    "lax",
    "linear_transpose",
    "linearize",
    "local_device_count",
    "local_devices",
    "make_jaxpr",
    "make_mesh",
    "named_call",
    "named_scope",
    "nn",
    "numpy",
    "ops",
    "pmap",
    "numpy_rank_promotion",
    "print_environment_info",
    "process_count",
    "process_index",
    "process_indices",
    "profile",
    "pure_callback",
    "random",
    "remat",
    "reshard",
    "scipy",
    "set_mesh",
    "shard_map",
    "sharding",
    "stop_gradient",
    "tree",
    "tree_util",
    "typeof",
    "typing",
    "value_and_grad",
    "vjp",
    "vmap",
    "viz",
]
