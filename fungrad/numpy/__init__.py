"""``fungrad.numpy``: the NumPy API with jax.numpy's semantics, written on fungrad.lax only.

Differences from numpy follow JAX: float32 by default (float64 with enable_x64), JAX's type
promotion with weak Python scalars, out-of-bounds gather indices clamp and scatter indices
drop, arrays are immutable (use ``x.at[idx].set(v)``).
"""

import numpy as _np

from fungrad import dtypes as _dtypes
from fungrad.array import Array as ndarray  # noqa: F401
from fungrad.numpy import array_methods as _array_methods  # noqa: E402
from fungrad.numpy import fft, linalg  # noqa: F401
from fungrad.numpy.bit_packing import *  # noqa: F401,F403
from fungrad.numpy.complex_parts import *  # noqa: F401,F403
from fungrad.numpy.creation import *  # noqa: F401,F403
from fungrad.numpy.differences import *  # noqa: F401,F403
from fungrad.numpy.functional_updates import *  # noqa: F401,F403
from fungrad.numpy.histograms import *  # noqa: F401,F403
from fungrad.numpy.index_builders import *  # noqa: F401,F403
from fungrad.numpy.index_tricks import *  # noqa: F401,F403
from fungrad.numpy.indexing import *  # noqa: F401,F403
from fungrad.numpy.interop import *  # noqa: F401,F403
from fungrad.numpy.linear import *  # noqa: F401,F403
from fungrad.numpy.logic import *  # noqa: F401,F403
from fungrad.numpy.manipulation import *  # noqa: F401,F403
from fungrad.numpy.padding import *  # noqa: F401,F403
from fungrad.numpy.polynomial import *  # noqa: F401,F403
from fungrad.numpy.reductions import *  # noqa: F401,F403
from fungrad.numpy.setops import *  # noqa: F401,F403
from fungrad.numpy.sorting import *  # noqa: F401,F403
from fungrad.numpy.statistics import *  # noqa: F401,F403
from fungrad.numpy.type_checks import *  # noqa: F401,F403
from fungrad.numpy.ufunc_objects import *  # noqa: F401,F403
from fungrad.numpy.ufuncs import *  # noqa: F401,F403
from fungrad.numpy.vectorization import *  # noqa: F401,F403
from fungrad.numpy.window_functions import *  # noqa: F401,F403

# constants and dtype names, as in jax.numpy
pi = _np.pi
e = _np.e
euler_gamma = _np.euler_gamma
inf = _np.inf
nan = _np.nan
newaxis = None
from fungrad.numpy.scalar_types import *  # noqa: F401,F403,E402  (fnp.int32(7) is an Array)

integer, signedinteger, unsignedinteger = _np.integer, _np.signedinteger, _np.unsignedinteger
floating, inexact, number, generic = _np.floating, _np.inexact, _np.number, _np.generic
dtype = _np.dtype
issubdtype = _dtypes.issubdtype  # (jax.dtypes.issubdtype is jnp.issubdtype)
result_type = _dtypes.result_type
finfo = _dtypes.finfo
iinfo = _dtypes.iinfo


def promote_types(a, b):
    """The dtype JAX promotes ``a`` and ``b`` (dtypes) to."""
    return _dtypes.result_type(a, b)


def can_cast(from_, to, casting="safe"):
    """Whether ``from_`` can be cast to ``to`` under ``casting`` (numpy's rule)."""
    return _np.can_cast(from_, to, casting)


_array_methods.install()

# JAX's ufunc objects (jnp.add.reduce, jnp.multiply.outer, ...) replace the plain functions of
# the same names; calling one calls the function.
from fungrad.numpy.ufunc_instances import *  # noqa: F401,F403,E402

# jacfwd/jacrev (fungrad/transforms/autodiff.py) take their basis from eye; the transforms sit
# below fungrad.numpy, which hands it over here (see fungrad/transforms/array_ops.py).
from fungrad.transforms import array_ops as _array_ops  # noqa: E402

_array_ops.register(eye=eye)  # noqa: F405
