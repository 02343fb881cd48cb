"""Dropout with an explicit PRNG key."""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad import random
from fungrad.nn.module import Module

__all__ = ["Dropout"]


class Dropout(Module):
    """Zero each element with probability ``p`` and scale the survivors by ``1 / (1 - p)``
    (inverted dropout, so inference needs no rescaling).

    ``dropout(x, key=key)`` needs a PRNG key in training; the same key gives the same mask.
    In inference (the ``inference`` field, or the call's ``inference=True``) it returns ``x``
    unchanged and needs no key. ``p=1`` gives zeros.
    """

    p: float = 0.5
    inference: bool = False

    def __init__(self, p: float = 0.5, *, inference: bool = False):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be a probability in [0, 1], got {p}")
        self.p, self.inference = float(p), bool(inference)

    def __call__(self, x, *, key=None, inference: bool | None = None):
        inference = self.inference if inference is None else inference
        if inference or self.p == 0.0:
            return x
        if key is None:
            raise ValueError(
                "Dropout: training mode needs a PRNG key (dropout(x, key=key)); pass "
                "inference=True to turn dropout off"
            )
        x = fnp.asarray(x)
        if self.p == 1.0:
            return fnp.zeros_like(x)
        keep = random.bernoulli(key, 1.0 - self.p, x.shape)
        return fnp.where(keep, x / np.asarray(1.0 - self.p, x.dtype), fnp.zeros((), x.dtype))
