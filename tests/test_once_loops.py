"""Loops that run once are left out of the CPU kernels (``cpu/kernel.py`` ``ONCE``): a kernel
loop over an extent-1 axis, a reduction over extent-1 variables (alone or beside longer ones),
a blocked sum's extent-1 level. Values of every reduction kind under jit against numpy, with
NaNs and signed zeros; the IR has no loop left with one trip."""

from __future__ import annotations

import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp

_REDUCTIONS = {
    "sum": (fnp.sum, np.sum),
    "prod": (fnp.prod, np.prod),
    "max": (fnp.max, np.max),
    "min": (fnp.min, np.min),
}


def _ir(f, *args) -> str:
    return fg.jit(f).lower(*args).as_text().split("# LLVM IR")[1]


@st.composite
def _shape_axes(draw):
    """A 2-4-d shape where most axes are 1, and a nonempty set of axes to reduce."""
    ndim = draw(st.integers(2, 4))
    shape = tuple(draw(st.sampled_from([1, 1, 1, 3, 8, 33])) for _ in range(ndim))
    axes = draw(st.sets(st.integers(0, ndim - 1), min_size=1))
    return shape, tuple(sorted(axes))


@settings(max_examples=40, deadline=None)
@given(_shape_axes(), st.sampled_from(sorted(_REDUCTIONS)), st.integers(0, 2**31 - 1))
def test_reductions_over_extent_one_axes(shape_axes, kind, seed):
    shape, axes = shape_axes
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    if flat.size > 2:  # a NaN and a signed zero somewhere
        flat[rng.integers(flat.size)] = -0.0
        if rng.random() < 0.3:
            flat[rng.integers(flat.size)] = np.nan
    ours, theirs = _REDUCTIONS[kind]
    got = np.asarray(fg.jit(lambda x: ours(x, axis=axes) * 2.0)(x))
    want = theirs(x.astype(np.float64), axis=axes) * 2
    if kind in ("max", "min"):  # exact
        np.testing.assert_array_equal(got, want.astype(np.float32))
        return
    # float32 rounding of n terms, blocked differently from numpy's: a few eps per term, of the
    # sum of magnitudes for a sum and of the value for a product
    n = int(np.prod([shape[a] for a in axes]))
    scale = theirs(np.abs(x.astype(np.float64)), axis=axes) * 2 if kind == "sum" else np.abs(want)
    tol = 4 * n * np.finfo(np.float32).eps * np.nan_to_num(scale, nan=0.0) + 1e-30
    assert np.all((np.abs(got - want) <= tol) | (np.isnan(got) & np.isnan(want))), (got, want)


@settings(max_examples=30, deadline=None)
@given(_shape_axes(), st.booleans(), st.integers(0, 2**31 - 1))
def test_argmax_argmin_over_extent_one_axes(shape_axes, use_max, seed):
    shape, axes = shape_axes
    axis = axes[-1]
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    ours, theirs = (fnp.argmax, np.argmax) if use_max else (fnp.argmin, np.argmin)
    got = np.asarray(fg.jit(lambda x: ours(x + 1.0, axis=axis))(x))
    np.testing.assert_array_equal(got, theirs(x + np.float32(1), axis=axis))


def test_sum_of_a_negative_zero_over_an_extent_one_axis_is_positive_zero():
    """As JAX (a reduction from 0.0): the left-out level keeps its add."""
    x = np.full((1, 4, 1), -0.0, np.float32)
    got = np.asarray(fg.jit(lambda x: fnp.sum(x, axis=(0, 2)))(x))
    assert not np.signbit(got).any()
    np.testing.assert_array_equal(got, np.zeros(4, np.float32))


def test_no_loop_with_one_trip_is_left():
    """A column sum over a leading 1 and a sum over a kept extent-1 axis beside a long one."""
    x = np.random.default_rng(0).standard_normal((1, 64, 256)).astype(np.float32)

    def f(x):
        return fnp.sum(x, axis=(0, 1)), fnp.sum(x[:, :, None, :], axis=(2, 3))

    ir = _ir(f, x)
    assert not re.search(r"icmp slt i64 %\w+, 1\n", ir)
    s0, s1 = (np.asarray(a) for a in fg.jit(f)(x))
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(s0, x64.sum(axis=(0, 1)), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(s1, x64[:, :, None, :].sum(axis=(2, 3)), rtol=1e-5, atol=1e-4)
