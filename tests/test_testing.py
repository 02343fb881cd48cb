"""fungrad.testing itself: the checks pass on correct derivatives and fail on wrong ones (a
check that cannot fail would be worthless), and the hypothesis strategies generate what they
promise."""

import numpy as np
import pytest
from hypothesis import given

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.testing import assert_transforms_commute, check_grads, check_taylor
from fungrad.testing import strategies as fst


def _wrong_sin():
    @fg.custom_jvp
    def f(x):
        return fnp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), 1.1 * fnp.cos(x) * t  # 10% off

    return f


def test_check_grads_passes_on_correct_and_fails_on_wrong_rules():
    x = np.linspace(-1, 1, 5).astype(np.float32)
    check_grads(lambda x: fnp.sin(x) * fnp.exp(x), (x,), order=2)
    for mode in ("fwd", "rev"):
        with pytest.raises(AssertionError):
            check_grads(_wrong_sin(), (x,), order=1, modes=(mode,))
    with pytest.raises(ValueError, match="unknown mode"):
        check_grads(fnp.sin, (x,), order=1, modes=("sideways",))


def test_check_grads_runs_in_float64_with_x64_and_scales_eps(x64):
    big = np.array([1e4, -2e4, 3e4], np.float32)  # a fixed eps of 1e-3 would be useless here
    check_grads(lambda x: fnp.sum(fnp.log(x * x + 1.0)), (big,), order=2, atol=1e-7, rtol=1e-7)
    with pytest.raises(AssertionError):
        check_grads(_wrong_sin(), (np.array([0.3]),), order=1, atol=1e-3, rtol=1e-3)


def test_check_taylor_needs_no_eps(x64):
    check_taylor(lambda x: fnp.tanh(x) * x**3, (np.array([0.3, -0.7, 1.2]),))
    check_taylor(lambda x: 2.0 * x, (np.array([1.0, 2.0]),))  # linear: remainder ~ 0
    with pytest.raises(AssertionError, match="does not shrink quadratically"):
        check_taylor(_wrong_sin(), (np.array([0.3, -0.7]),))


def test_assert_transforms_commute(x64):
    w = np.array([[0.3, -0.2], [0.5, 0.1]])
    assert_transforms_commute(
        lambda x, b: fnp.sum(fnp.tanh(w @ x + b) ** 2),
        (np.array([0.1, -0.4]), np.array([0.2, 0.3])),
    )


@given(fst.arrays(np.float32, avoid=(0.0,), margin=0.1))
def test_array_strategy_avoids_kinks(a):
    assert a.dtype == np.float32
    assert np.all(np.abs(a) >= 0.1)
    assert np.all(np.abs(a) <= 10)


@given(fst.broadcastable_shapes(num_shapes=3))
def test_broadcastable_shapes_broadcast(shapes):
    np.broadcast_shapes(*shapes)


@given(fst.pytrees())
def test_pytrees_have_array_leaves(tree):
    leaves = fg.tree_util.tree_leaves(tree)
    assert leaves and all(isinstance(x, np.ndarray) for x in leaves)


def test_check_grads_with_float64_numpy_arguments_without_x64():
    # They compute in float32: the finite-difference step and tolerance must be float32's
    # (a float64 step in float32 arithmetic failed about half of these draws).
    def f(x):
        return fnp.sum(fnp.exp(fnp.sin(x) * x) * x**2)

    for seed in range(20):
        check_grads(f, (2 * np.random.RandomState(seed).randn(3),), 1)
