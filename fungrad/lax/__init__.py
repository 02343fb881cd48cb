"""``fungrad.lax``: the primitives' public wrappers, with JAX's lax names.

Each family module defines its primitives once, with every rule beside them; this package
only re-exports their public wrappers.
"""

from fungrad.lax import (
    complex_split_rules,  # noqa: F401  (registers split rules)
    utils,  # noqa: F401
)
from fungrad.lax.accuracy import *  # noqa: F401,F403
from fungrad.lax.approx_topk import *  # noqa: F401,F403
from fungrad.lax.associative_scan import *  # noqa: F401,F403
from fungrad.lax.complex_ops import *  # noqa: F401,F403
from fungrad.lax.control_flow import *  # noqa: F401,F403
from fungrad.lax.conv import *  # noqa: F401,F403
from fungrad.lax.conv_helpers import *  # noqa: F401,F403
from fungrad.lax.custom_solve import *  # noqa: F401,F403
from fungrad.lax.dot import *  # noqa: F401,F403
from fungrad.lax.dot_algorithm import *  # noqa: F401,F403
from fungrad.lax.elementwise import *  # noqa: F401,F403
from fungrad.lax.extras import *  # noqa: F401,F403
from fungrad.lax.fft import *  # noqa: F401,F403
from fungrad.lax.indexing import *  # noqa: F401,F403
from fungrad.lax.lax_utilities import *  # noqa: F401,F403
from fungrad.lax.parallel import *  # noqa: F401,F403
from fungrad.lax.ragged import *  # noqa: F401,F403
from fungrad.lax.random_bits import *  # noqa: F401,F403
from fungrad.lax.reduce import *  # noqa: F401,F403
from fungrad.lax.reduce_precision import *  # noqa: F401,F403
from fungrad.lax.rng import *  # noqa: F401,F403
from fungrad.lax.shape import *  # noqa: F401,F403
from fungrad.lax.sharding import *  # noqa: F401,F403
from fungrad.lax.slicing import *  # noqa: F401,F403
from fungrad.lax.sort import *  # noqa: F401,F403
from fungrad.lax.special import *  # noqa: F401,F403
from fungrad.lax.stacking import *  # noqa: F401,F403
from fungrad.lax.windowed_reductions import *  # noqa: F401,F403
from fungrad.transforms import array_ops as _array_ops

# The transforms sit below lax and apply a few of its operations (zeros, tangent sums, batch
# dimension moves): lax hands them over here (see fungrad/transforms/array_ops.py).
_array_ops.register(
    full=full,  # noqa: F405
    add=add,  # noqa: F405
    transpose=transpose,  # noqa: F405
    broadcast_in_dim=broadcast_in_dim,  # noqa: F405
    reduce_sum=reduce_sum,  # noqa: F405
    convert_element_type=convert_element_type,  # noqa: F405
)
