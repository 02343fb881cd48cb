"""Semantics where fungrad used to differ from JAX on real programs (issue 16, item 7):
exception types user code catches, the warning for a 64-bit dtype requested without x64, and
loops whose carry is promoted."""

import warnings

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax


@pytest.mark.parametrize(
    "fun",
    [
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
    ],
)
def test_shape_and_dtype_mismatches_are_type_errors_as_in_jax(fun):
    with pytest.raises(TypeError):
        fun()


@pytest.mark.parametrize(
    "fun",
    [
        lambda: fnp.broadcast_shapes((3,), (4,)),
        lambda: fnp.broadcast_arrays(fnp.ones(3), fnp.ones(4)),
        lambda: fnp.where(fnp.ones(3) > 0, fnp.ones(4), 0.0),
        lambda: fnp.broadcast_to(fnp.ones(3), (4,)),
        lambda: fnp.concatenate([fnp.ones(()), fnp.ones(())]),
    ],
)
def test_value_errors_stay_value_errors_as_in_jax(fun):
    with pytest.raises(ValueError):
        fun()


@pytest.mark.parametrize(
    "make",
    [
        lambda dt: fnp.zeros(3, dtype=dt),
        lambda dt: fnp.ones((2,), dt),
        lambda dt: fnp.full(2, 1, dtype=dt),
        lambda dt: fnp.arange(3, dtype=dt),
        lambda dt: fnp.array([1, 2], dtype=dt),
        lambda dt: fnp.eye(2, dtype=dt),
        lambda dt: fnp.ones(2).astype(dt),
    ],
)
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


# -- JAX's debugging options: debug_nans, debug_infs, numpy_rank_promotion --------------------


def _log_twice(x):
    return fnp.log(x) * 2.0


@pytest.mark.parametrize("name", ["debug_nans", "jax_debug_nans"])
def test_debug_nans_names_the_primitive_eagerly_under_jit_and_grad(name):
    x = fnp.array([1.0, -1.0])
    try:
        fg.config.update(name, True)
        for fun in (_log_twice, fg.jit(_log_twice), fg.grad(lambda v: fnp.sum(_log_twice(v)))):
            with pytest.raises(FloatingPointError, match=r"nan\) encountered in log.*index \(1,\)"):
                fun(x)
        # jit says it ran the function again without jit to find the primitive.
        with pytest.raises(FloatingPointError, match=r"jit\(_log_twice\).*again without jit"):
            fg.jit(_log_twice)(x)
        # Clean values pass, through the compiled and the eager paths.
        np.testing.assert_allclose(
            np.asarray(fg.jit(_log_twice)(fnp.array([1.0, 2.0]))), 2 * np.log([1.0, 2.0]), rtol=1e-6
        )
    finally:
        fg.config.update(name, False)
    assert np.isnan(np.asarray(fg.jit(_log_twice)(x))[1])  # off again: no check


def test_debug_nans_names_the_users_line():
    import inspect

    line = inspect.getsourcelines(_log_twice)[1] + 1  # the first statement of _log_twice
    here = r"test_issue16_semantics\.py"
    with fg.debug_nans(True):
        for fun in (_log_twice, fg.jit(_log_twice)):
            with pytest.raises(
                FloatingPointError, match=rf"encountered in log at {here}:{line} \(_log_twice\)"
            ):
                fun(fnp.array([1.0, -1.0]))


def test_debug_infs_and_the_context_managers():
    with fg.debug_infs(True):
        assert fg.config.read("jax_debug_infs") is True
        with pytest.raises(FloatingPointError, match=r"inf\) encountered in div"):
            fg.jit(lambda v: 1.0 / v)(fnp.zeros(2))
        with pytest.raises(FloatingPointError, match="inf"):
            fnp.exp(fnp.array([100.0]))
    assert fg.config.debug_infs is False
    with fg.debug_nans(True):
        # An infinity is not a NaN.
        assert float(fnp.exp(fnp.array(100.0))) == np.inf


def test_numpy_rank_promotion_raise_and_warn():
    a, b = fnp.ones(3), fnp.ones((2, 3))
    with fg.numpy_rank_promotion("raise"):
        with pytest.raises(
            ValueError,
            match=r"add: operands of shapes \(3,\) and \(2, 3\).*"
            "rank promotion",
        ):
            a + b
        assert (a + 1.0).shape == (3,)  # 0-d operands never count
        assert (b * fnp.ones((1, 3))).shape == (2, 3)  # same rank broadcasting is fine
    with fg.numpy_rank_promotion("warn"):
        with pytest.warns(UserWarning, match="rank promotion"):
            assert (a * b).shape == (2, 3)
    assert (a + b).shape == (2, 3)  # "allow", the default, again
    with pytest.raises(ValueError, match="numpy_rank_promotion must be"):
        fg.config.update("jax_numpy_rank_promotion", "sometimes")


@pytest.mark.parametrize("preset", ["TF32_TF32_F32", "F16_F16_F16", "BF16_BF16_F32"])
def test_fnp_products_honour_dot_algorithm_presets_as_lax_does(preset):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 8)).astype(np.float32)
    b = rng.standard_normal((8, 3)).astype(np.float32)
    want = np.asarray(lax.dot(a, b, precision=preset))
    for got in (
        fnp.matmul(a, b, precision=preset),
        fnp.dot(a, b, precision=preset),
        fnp.einsum("ij,jk->ik", a, b, precision=preset),
    ):
        np.testing.assert_array_equal(np.asarray(got), want)
