"""``jax._src.dtypes`` for libraries that import it: fungrad.dtypes's names, plus
:class:`ExtendedDType`, the base class JAX's extended dtypes derive from (flax defines one
for its fp8 metadata at import). fungrad runs no extended dtype: a class derived from it can
be defined, and ``issubdtype(dt, extended)`` is False for every dtype fungrad has."""

from __future__ import annotations

import numpy as np

from fungrad.dtypes import *  # noqa: F403  (this module stands for JAX's, which has them all)
from fungrad.dtypes import extended, finfo, issubdtype  # noqa: F401

DType = np.dtype  # (JAX's alias, used in annotations)


class ExtendedDType:
    """The base of JAX's extended dtypes: a subclass names its scalar ``type`` (a subclass of
    :class:`~fungrad.dtypes.extended`) and its ``name``."""

    type: type
    name: str

    def __repr__(self):
        return getattr(self, "name", type(self).__name__)


def supports_inf(dtype) -> bool:
    """Whether floating ``dtype`` has infinities (every float type fungrad has does, except
    ml_dtypes' finite-only float8 formats, whose names end in ``fn``/``fnuz``)."""
    name = np.dtype(dtype).name
    return not (name.endswith("fn") or name.endswith("fnuz"))
