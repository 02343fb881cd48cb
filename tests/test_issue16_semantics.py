"""Semantics where fungrad used to differ from JAX on real programs (issue 16, item 7):
exception types user code catches, the warning for a 64-bit dtype requested without x64, and
loops whose carry is promoted."""

import warnings

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax


@pytest.mark.parametrize("fun", [
    lambda: fnp.ones(3) + fnp.ones(4),
    lambda: fnp.ones(3) < fnp.ones(4),
    lambda: fnp.dot(fnp.ones(3), fnp.ones(4)),
    lambda: fnp.ones((2, 3)) @ fnp.ones((4, 2)),
    lambda: fnp.vdot(fnp.ones(3), fnp.ones(4)),
    lambda: fnp.inner(fnp.ones(3), fnp.ones(4)),
    lambda: fnp.tensordot(fnp.ones((2, 3)), fnp.ones((4, 2)), 1),
    lambda: fnp.concatenate([fnp.ones((2, 3)), fnp.ones((2, 4))]),
    lambda: fnp.transpose(fnp.ones((2, 3)), (0, 0)),
    lambda: fnp.ones(6).reshape(4),
    lambda: lax.add(fnp.ones(3), fnp.ones(3, dtype=fnp.int32)),
])
def test_shape_and_dtype_mismatches_are_type_errors_as_in_jax(fun):
    with pytest.raises(TypeError):
        fun()


@pytest.mark.parametrize("fun", [
    lambda: fnp.broadcast_shapes((3,), (4,)),
    lambda: fnp.broadcast_arrays(fnp.ones(3), fnp.ones(4)),
    lambda: fnp.where(fnp.ones(3) > 0, fnp.ones(4), 0.0),
    lambda: fnp.broadcast_to(fnp.ones(3), (4,)),
    lambda: fnp.concatenate([fnp.ones(()), fnp.ones(())]),
])
def test_value_errors_stay_value_errors_as_in_jax(fun):
    with pytest.raises(ValueError):
        fun()


@pytest.mark.parametrize("make", [
    lambda dt: fnp.zeros(3, dtype=dt), lambda dt: fnp.ones((2,), dt),
    lambda dt: fnp.full(2, 1, dtype=dt), lambda dt: fnp.arange(3, dtype=dt),
    lambda dt: fnp.array([1, 2], dtype=dt), lambda dt: fnp.eye(2, dtype=dt),
    lambda dt: fnp.ones(2).astype(dt),
])
@pytest.mark.parametrize("dt,want", [(np.float64, np.float32), ("int64", np.int32)])
def test_explicit_64_bit_dtype_without_x64_warns_and_truncates(make, dt, want):
    with pytest.warns(UserWarning, match=r"explicitly requested dtype .*64.*enable_x64"):
        x = make(dt)
    assert x.dtype == want


def test_default_python_types_and_32_bit_dtypes_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fnp.zeros(3, dtype=float).dtype == np.float32
        assert fnp.zeros(3, dtype=int).dtype == np.int32
        assert fnp.ones(2, np.float32).astype(np.int32).dtype == np.int32


def test_fori_loop_promotes_a_weak_int_carry():
    # JAX's fori_loop(0, 3, lambda i, c: c + 0.5, 0) gives 1.5.
    out = lax.fori_loop(0, 3, lambda i, c: c + 0.5, 0)
    assert float(out) == 1.5 and out.dtype == np.float32
    assert float(fg.jit(lambda: lax.fori_loop(0, 3, lambda i, c: c + 0.5, 0))()) == 1.5


def test_custom_vjp_call_outside_transforms_returns_an_array():
    @fg.custom_vjp
    def f(x):
        return x * 2.0
    f.defvjp(lambda x: (x * 2.0, None), lambda r, g: (g * 2.0,))
    out = f(1.5)
    assert isinstance(out, fg.Array) and float(out) == 3.0
