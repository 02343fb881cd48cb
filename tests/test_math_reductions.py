"""Compiled float max/min reductions (fungrad/lowering/llvm.py ``_KernelWriter._reduce``).

They accumulate integer keys (the float's bits with the magnitude flipped for negative values,
NaN mapped to the extreme key) so the loop is an integer smax/smin reduction that vectorises;
the result must still be the float semantics of ``llvm.maximum``/``llvm.minimum``: NaN wins,
-0 < +0, infinities and denormals ordered as floats. Checked against numpy on arbitrary bit
patterns, for every axis and float dtype.
"""

from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis.extra import numpy as hnp

import fungrad as fg

jnp = fg.numpy


def _reference(x: np.ndarray, op: str, axis) -> np.ndarray:
    """numpy's max/min (NaN propagates), with the zero sign of llvm.maximum/minimum: +0 is
    above -0, so max is +0 when any +0 is in the slice and min is -0 when any -0 is."""
    r = np.asarray(np.max(x, axis) if op == "max" else np.min(x, axis))
    zero = x == 0
    pos_zero = np.any(zero & ~np.signbit(x), axis)
    neg_zero = np.any(zero & np.signbit(x), axis)
    want_neg = ~pos_zero if op == "max" else neg_zero
    return np.where(r == 0, np.where(want_neg, -0.0, 0.0).astype(x.dtype), r)


def _check(got, want):
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    both = ~np.isnan(want)
    np.testing.assert_array_equal(got[both], want[both])
    np.testing.assert_array_equal(np.signbit(got[both]), np.signbit(want[both]))


def _floats(dtype):
    width = {np.float16: 16, np.float32: 32, np.float64: 64}[dtype]
    return st.floats(width=width, allow_nan=True, allow_infinity=True, allow_subnormal=True)


@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    dtype=st.sampled_from([np.float16, np.float32]),
    op=st.sampled_from(["max", "min"]),
)
def test_max_min_on_arbitrary_values(data, dtype, op):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=40))
    x = data.draw(hnp.arrays(dtype, shape, elements=_floats(dtype)), label="x")
    axis = data.draw(st.sampled_from([None, *range(x.ndim)]), label="axis")
    fn = jnp.max if op == "max" else jnp.min
    _check(fg.jit(lambda v: fn(v, axis=axis))(x), _reference(x, op, axis))


def test_signed_zeros_nan_and_infinities_per_row():
    rows = [
        [-0.0, 0.0],
        [0.0, -0.0],
        [-0.0, -0.0],
        [np.nan, np.inf],
        [-np.inf, -np.nan],
        [-np.inf, -np.inf],
        [1e-45, -1e-45],
        [3.4e38, np.inf],
        [-2.0, -3.0],
    ]
    x = np.array(rows, np.float32)
    x = np.concatenate([x, np.zeros((9, 30), np.float32) - 5], axis=1)  # long enough to vectorise
    for op, fn in (("max", jnp.max), ("min", jnp.min)):
        _check(fg.jit(lambda v, fn=fn: fn(v, axis=1))(x), _reference(x, op, 1))
    x[4, 17] = np.float32(np.nan)  # a NaN late in a row still wins
    _check(fg.jit(lambda v: jnp.min(v, axis=1))(x), _reference(x, "min", 1))


def test_float64_keys(x64):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 300)) * 1e300
    x[1, 200] = np.nan
    x[2] = -0.0
    x[3, :5] = [0.0, -0.0, -1e-320, 1e-320, -np.inf]
    for op, fn in (("max", jnp.max), ("min", jnp.min)):
        for axis in (0, 1, None):
            _check(fg.jit(lambda v, fn=fn, axis=axis: fn(v, axis=axis))(x), _reference(x, op, axis))


def test_empty_reduction_gives_the_identity():
    x = np.zeros((0, 3), np.float32)
    got = fg.jit(
        lambda v: (jnp.max(v, axis=0, initial=-np.inf), jnp.min(v, axis=0, initial=np.inf))
    )(x)
    _check(got[0], np.full(3, -np.inf, np.float32))
    _check(got[1], np.full(3, np.inf, np.float32))


def test_softmax_row_max_is_an_integer_reduction():
    # the case this is for: the row max of softmax vectorises as smax over i32 keys
    x = np.linspace(-3, 3, 64 * 96, dtype=np.float32).reshape(64, 96)
    f = fg.jit(lambda v: fg.nn.softmax(v, axis=-1))
    assert "@llvm.smax.i32" in f.lower(x).as_text()
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(np.asarray(f(x)), e / e.sum(1, keepdims=True), rtol=2e-6, atol=1e-9)


# -- row kernels: the store loop strip-mined with prefetches of the rows ahead ------------------


def _layer_norm(v):
    m = jnp.mean(v, axis=-1, keepdims=True)
    d = v - m
    return d / jnp.sqrt(jnp.mean(d * d, axis=-1, keepdims=True) + 1e-5)


def _layer_norm_np(v):
    v = v.astype(np.float64)
    d = v - v.mean(-1, keepdims=True)
    return d / np.sqrt((d * d).mean(-1, keepdims=True) + 1e-5)


def _softmax_np(v):
    e = np.exp(v.astype(np.float64) - v.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("shape", [(9, 512), (3, 4, 256), (2, 1000), (5, 32)])
@pytest.mark.parametrize("fn", ["softmax", "layer_norm"])
def test_row_kernels_with_and_without_prefetch(shape, fn):
    # rows of >= 1 KiB whose length is a multiple of a cache line get the strip-mined store
    # loop with prefetches; (2, 1000) and (5, 32) keep the plain loop. Same values either way.
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    f, ref = (
        ((lambda v: fg.nn.softmax(v, axis=-1)), _softmax_np)
        if fn == "softmax"
        else (_layer_norm, _layer_norm_np)
    )
    jf = fg.jit(f)
    prefetches = "@llvm.prefetch" in jf.lower(x).as_text()
    assert prefetches == (shape[-1] % 16 == 0 and shape[-1] * 4 >= 1024)
    np.testing.assert_allclose(np.asarray(jf(x)), ref(x), rtol=2e-5, atol=2e-6)


def test_prefetch_rows_ahead_past_the_end_is_harmless():
    # the last rows prefetch addresses past the input (prefetches never fault); one row only
    x = np.random.default_rng(2).standard_normal((1, 2048)).astype(np.float32)
    got = np.asarray(fg.jit(lambda v: fg.nn.softmax(v, axis=-1))(x))
    np.testing.assert_allclose(got, _softmax_np(x), rtol=2e-6, atol=1e-9)
