"""Inputs the multi-process test scripts and tests/test_distributed.py both build: each rank's
local values are a function of (name, rank), so the test recomputes every rank's input and
checks the gathered outputs against numpy."""

from __future__ import annotations

import numpy as np

DTYPES = ("float32", "float64", "float16", "int32", "int64", "int8", "uint8", "uint32")


def local(name: str, rank: int, shape=(3, 4), dtype="float32") -> np.ndarray:
    """Rank ``rank``'s deterministic input called ``name``."""
    seed = sum(map(ord, name)) * 1000 + rank
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    hi = 50 if dt.itemsize > 1 else 20
    lo = 0 if dt.kind == "u" else -hi
    return rng.integers(lo, hi, shape).astype(dt)
