"""Assertions shared by the tests: compare a fungrad result with a numpy reference."""

from __future__ import annotations

import numpy as np

import fungrad as fg


def assert_array(actual, expected, *, dtype=None, rtol=1e-6, atol=1e-6, weak_type=None):
    """``actual`` is a fungrad Array whose shape equals ``expected``'s, whose dtype is ``dtype``
    (if given) and whose values match within tolerance (NaNs must match NaNs)."""
    assert isinstance(actual, fg.Array), f"expected a fungrad.Array, got {type(actual).__name__}"
    expected = np.asarray(expected)
    got = np.asarray(actual)
    assert got.shape == expected.shape, f"shape {got.shape} != expected {expected.shape}"
    if dtype is not None:
        assert got.dtype == np.dtype(dtype), f"dtype {got.dtype} != expected {np.dtype(dtype)}"
    if weak_type is not None:
        assert actual.weak_type == weak_type, f"weak_type {actual.weak_type} != {weak_type}"
    if got.dtype.kind in "biu" and expected.dtype.kind in "biu":
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_allclose(
            got.astype(np.float64),
            expected.astype(np.float64),
            rtol=rtol,
            atol=atol,
            equal_nan=True,
        )
