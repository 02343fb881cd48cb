"""Helpers shared by the ``fungrad.scipy.stats`` distribution modules.

Every public function of the package promotes its array arguments with :func:`promote`
(JAX's ``promote_args_inexact``: integers and bools become the default float dtype, shapes
broadcast), so a distribution module only writes its formula.
"""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad.numpy import util


def promote(fun_name: str, *args):
    """``args`` checked to be array-like, promoted to one inexact dtype and broadcast."""
    return util.promote_args_inexact(fun_name, *args)


def log1mexp(x):
    """``log(1 - exp(-x))`` for ``x >= 0``, accurate for small and large ``x``.

    Below ``log 2`` it is ``log(-expm1(-x))`` (``1 - exp(-x)`` is small and ``expm1`` keeps
    its relative accuracy); above, ``log1p(-exp(-x))`` (``exp(-x)`` is small).
    """
    small = x < np.log(2.0)
    x_small = fnp.where(small, x, 1.0)  # each branch sees only arguments it is exact for
    x_large = fnp.where(small, 1.0, x)
    return fnp.where(small, fnp.log(-fnp.expm1(-x_small)), fnp.log1p(-fnp.exp(-x_large)))


def log_diff_exp(a, b):
    """``log(exp(a) - exp(b))`` for ``a >= b`` without forming ``exp(a)`` (``-inf`` when
    ``a == b``)."""
    return a + log1mexp(a - b)


def log_prob(p, q):
    """``log(p)`` for a probability ``p`` whose complement ``q = 1 - p`` is also known
    accurately: ``log1p(-q)`` when ``p > 1/2``, where ``log(p)`` would lose the relative
    precision of a value near 0."""
    return fnp.where(p > 0.5, fnp.log1p(-q), fnp.log(p))
