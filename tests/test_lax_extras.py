"""lax.broadcast_like, stage, scaled_dot and betainc against numpy/scipy; grads, vmap, jit."""

import numpy as np
import pytest
import scipy.special

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import dtypes, lax
from fungrad.testing import check_grads

rng = np.random.default_rng(0)


def test_broadcast_like():
    got = lax.broadcast_like(np.array([1, 2, 3]), np.zeros((2, 3)))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, [[1, 2, 3]] * 2)
    x = rng.standard_normal((3, 1)).astype(np.float32)
    np.testing.assert_array_equal(
        lax.broadcast_like(x, np.zeros((2, 3, 4))), np.broadcast_to(x, (2, 3, 4))
    )
    assert lax.broadcast_like(2.0, np.zeros((0, 2))).shape == (0, 2)
    check_grads(lambda v: lax.broadcast_like(v, np.zeros((2, 3, 1))), (x.astype(float),), order=1)
    got = fg.vmap(lambda v: lax.broadcast_like(v, fnp.zeros((2, 3))))(np.arange(3.0))
    np.testing.assert_array_equal(got, np.broadcast_to(np.arange(3.0)[:, None, None], (3, 2, 3)))
    with pytest.raises(ValueError, match="cannot broadcast"):
        lax.broadcast_like(np.ones(3), np.zeros((2, 4)))


def test_stage():
    s = lax.stage(3)
    assert isinstance(s, fg.Array) and s.dtype == np.int32 and int(s) == 3
    np.testing.assert_array_equal(fg.jit(lambda x: lax.stage(x) + 1)(np.arange(3)), np.arange(1, 4))


def _scaled_ref(a, b, sa, sb):
    SA = np.repeat(sa, a.shape[-1] // sa.shape[-1], -1)
    SB = np.repeat(sb, b.shape[-2] // sb.shape[-2], -2)
    return np.einsum("bmk,bkn->bmn", a * SA, b * SB)


def test_scaled_dot():
    a = rng.standard_normal((2, 3, 8)).astype(np.float32)
    b = rng.standard_normal((2, 8, 5)).astype(np.float32)
    sa = rng.random((2, 3, 2)).astype(np.float32)
    sb = rng.random((2, 4, 5)).astype(np.float32)
    f = lambda a, b: lax.scaled_dot(  # noqa: E731
        a, b, lhs_scale=sa, rhs_scale=sb, preferred_element_type=np.float32
    )
    np.testing.assert_allclose(f(a, b), _scaled_ref(a, b, sa, sb), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        lax.scaled_dot(a, b, preferred_element_type=np.float32),
        np.einsum("bmk,bkn->bmn", a, b),
        rtol=1e-5,
        atol=1e-5,
    )
    check_grads(f, (a, b), order=1)
    np.testing.assert_allclose(fg.jit(f)(a, b), f(a, b), rtol=1e-5, atol=1e-6)
    got = fg.vmap(f)(np.stack([a, 2 * a]), np.stack([b, b]))
    np.testing.assert_allclose(got[1], f(2 * a, b), rtol=1e-5, atol=1e-5)
    default = lax.scaled_dot(a, b)  # JAX's default result dtype, bfloat16
    assert default.dtype == dtypes.bfloat16
    want = np.asarray(lax.scaled_dot(a, b, preferred_element_type=np.float32))
    np.testing.assert_array_equal(np.asarray(default), want.astype(dtypes.bfloat16))
    with pytest.raises(ValueError, match="multiple"):
        lax.scaled_dot(a, b, lhs_scale=sa[..., :1].repeat(3, -1), preferred_element_type=np.float32)


def test_betainc():
    a, b = np.float32([0.5, 2, 5]), np.float32([1.5, 3, 0.7])
    x = np.float32([0.2, 0.4, 0.9])
    np.testing.assert_allclose(lax.betainc(a, b, x), scipy.special.betainc(a, b, x), rtol=1e-5)
