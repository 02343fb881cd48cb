"""fungrad.random under vmap and grad.

vmap over a batch of keys (or seeds, or fold-in data) must give exactly the numbers of a Python
loop over the keys: the threefry2x32 batch rule is elementwise, so the same bits come out.
Random bits are integers, so they carry no tangent: gradients flow only through what the
samplers compute from them (location, scale, minval/maxval...).
"""

from __future__ import annotations

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax, random
from fungrad.testing import check_grads

B = 4
KEY = random.PRNGKey(0)
KEYS = random.split(KEY, B)


def _loop(f, *batched):
    return np.stack([np.asarray(f(*(a[b] for a in batched))) for b in range(B)])


SAMPLERS = {
    "normal": lambda k: random.normal(k, (3,)),
    "uniform": lambda k: random.uniform(k, (2, 3), minval=-1.0, maxval=2.0),
    "bits": lambda k: random.bits(k, (5,)),
    "randint": lambda k: random.randint(k, (4,), 0, 10),
    "bernoulli": lambda k: random.bernoulli(k, 0.3, (6,)),
    "split": lambda k: random.split(k, 3),
    "fold_in": lambda k: random.fold_in(k, 7),
    "gumbel": lambda k: random.gumbel(k, (3,)),
    "exponential": lambda k: random.exponential(k, (3,)),
    "normal_0d": lambda k: random.normal(k),
    "truncated_normal": lambda k: random.truncated_normal(k, -1.0, 0.5, (3,)),
    "permutation": lambda k: random.permutation(k, 5),
    "choice": lambda k: random.choice(k, 5, (3,), replace=False),
    "categorical": lambda k: random.categorical(
        k, np.array([0.0, 1.0, 2.0], np.float32), shape=(4,)
    ),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_vmap_over_keys_equals_loop(name):
    f = SAMPLERS[name]
    got = fg.vmap(f)(KEYS)
    want = _loop(f, np.asarray(KEYS))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got), want)


def test_vmap_normal_example_from_the_docs():
    got = fg.vmap(lambda k: random.normal(k, (3,)))(random.split(KEY, 4))
    want = np.stack([np.asarray(random.normal(k, (3,))) for k in random.split(KEY, 4)])
    np.testing.assert_array_equal(np.asarray(got), want)
    assert got.shape == (4, 3) and got.dtype == np.float32


def test_vmap_keys_along_axis_1():
    keys_t = np.asarray(KEYS).T  # (2, B): the key words along axis 0
    got = fg.vmap(lambda k: random.uniform(k, (3,)), in_axes=1)(keys_t)
    np.testing.assert_array_equal(
        np.asarray(got), _loop(lambda k: random.uniform(k, (3,)), np.asarray(KEYS))
    )


def test_vmap_over_seeds_and_fold_in_data():
    seeds = np.arange(B, dtype=np.int32) * 17
    got = fg.vmap(random.PRNGKey)(seeds)
    np.testing.assert_array_equal(np.asarray(got), _loop(random.PRNGKey, seeds))
    data = np.array([0, 1, 2**31, 2**32 - 1], np.uint32)
    got = fg.vmap(lambda d: random.fold_in(KEY, d))(data)
    np.testing.assert_array_equal(np.asarray(got), _loop(lambda d: random.fold_in(KEY, d), data))
    # key and data both batched
    got = fg.vmap(random.fold_in)(KEYS, data)
    np.testing.assert_array_equal(np.asarray(got), _loop(random.fold_in, np.asarray(KEYS), data))


def test_vmap_unbatched_key_batched_parameters():
    lo = np.array([-1.0, 0.0, 2.0, 5.0], np.float32)

    def f(m):
        return random.uniform(KEY, (3,), minval=m, maxval=m + 1.0)

    got = fg.vmap(f)(lo)
    np.testing.assert_allclose(np.asarray(got), _loop(f, lo), rtol=0, atol=0)
    # the random bits do not depend on the mapped value: threefry stays unbatched
    jaxpr = fg.make_jaxpr(fg.vmap(f))(lo)
    (eqn,) = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "threefry2x32"]
    assert eqn.outvars[0].aval.shape == (3,)


def test_vmapped_jaxpr_has_one_batched_threefry():
    jaxpr = fg.make_jaxpr(fg.vmap(lambda k: random.normal(k, (3,))))(KEYS).jaxpr
    (eqn,) = [e for e in jaxpr.eqns if e.primitive.name == "threefry2x32"]
    assert [v.aval.shape for v in eqn.outvars] == [(B, 3), (B, 3)]


def test_nested_vmap_over_keys():
    keys = random.split(KEY, (2, 3))
    got = fg.vmap(fg.vmap(lambda k: random.normal(k, (2,))))(keys)
    want = np.stack(
        [
            np.stack([np.asarray(random.normal(keys[i, j], (2,))) for j in range(3)])
            for i in range(2)
        ]
    )
    np.testing.assert_array_equal(np.asarray(got), want)


# -- grad ------------------------------------------------------------------------------------------


def test_grad_through_additive_noise():
    mu = np.array([0.5, -1.0, 2.0], np.float32)
    g = fg.grad(lambda mu: fnp.sum(mu + random.normal(KEY, (3,))))(mu)
    np.testing.assert_array_equal(np.asarray(g), np.ones(3, np.float32))
    assert g.dtype == np.float32


def test_grad_scale_is_the_noise():
    # d/dsigma sum(sigma * z) = sum(z)
    z = np.asarray(random.normal(KEY, (5,)), np.float64)
    g = fg.grad(lambda s: fnp.sum(s * random.normal(KEY, (5,))))(np.float32(2.0))
    np.testing.assert_allclose(float(g), z.sum(), rtol=1e-6)


def test_grad_of_uniform_bounds():
    # uniform = minval + u * (maxval - minval): d/dminval = 1 - u, d/dmaxval = u
    u = np.asarray(random.uniform(KEY, (6,)), np.float64)

    def f(lo, hi):
        return fnp.sum(random.uniform(KEY, (6,), minval=lo, maxval=hi))

    g_lo, g_hi = fg.grad(f, argnums=(0, 1))(np.float32(-1.0), np.float32(3.0))
    np.testing.assert_allclose(float(g_lo), np.sum(1 - u), rtol=1e-5)
    np.testing.assert_allclose(float(g_hi), np.sum(u), rtol=1e-5)


def test_check_grads_through_samplers(x64):
    key = random.PRNGKey(3)
    check_grads(
        lambda lo, hi: random.uniform(key, (3,), np.float64, lo, hi),
        (np.float64(-1.0), np.float64(2.0)),
        order=2,
        modes=("fwd", "rev"),
    )
    check_grads(
        lambda lo, hi: random.truncated_normal(key, lo, hi, (4,), np.float64),
        (np.float64(-1.0), np.float64(2.0)),
        order=1,
        modes=("fwd", "rev"),
    )
    check_grads(
        lambda m, s: m + s * random.normal(key, (2, 2), np.float64),
        (np.float64(0.5), np.float64(1.5)),
        order=2,
        modes=("fwd", "rev"),
    )


def test_grad_with_key_derived_from_the_input():
    # The key depends on x (through an integer conversion): that path has zero tangent.
    def f(x):
        k = random.fold_in(
            KEY, lax.convert_element_type(lax.index_in_dim(x, 0, keepdims=False), np.uint32)
        )
        return fnp.sum(x * random.normal(k, (3,)))

    x = np.array([3.7, 1.0, -2.0], np.float32)
    g = fg.grad(f)(x)
    z = random.normal(random.fold_in(KEY, 3), (3,))
    np.testing.assert_allclose(np.asarray(g), np.asarray(z), rtol=1e-6)


def test_vmap_of_grad_over_keys():
    def f(mu, k):
        return fnp.sum(mu * random.normal(k, (3,)))

    mu = np.ones(3, np.float32)
    g = fg.vmap(fg.grad(f), in_axes=(None, 0))(mu, KEYS)
    np.testing.assert_array_equal(
        np.asarray(g), _loop(lambda k: random.normal(k, (3,)), np.asarray(KEYS))
    )


def test_grad_of_vmap_over_keys():
    def f(mu):
        return fnp.sum(fg.vmap(lambda k: mu * random.normal(k, (3,)))(KEYS))

    g = fg.grad(f)(np.ones(3, np.float32))
    want = _loop(lambda k: random.normal(k, (3,)), np.asarray(KEYS)).sum(0)
    np.testing.assert_allclose(np.asarray(g), want, rtol=1e-6)


def test_jacfwd_equals_jacrev_through_sampler():
    def f(loc):
        return loc + 0.5 * random.normal(KEY, (3,))

    loc = np.zeros(3, np.float32)
    np.testing.assert_allclose(np.asarray(fg.jacfwd(f)(loc)), np.eye(3), atol=0)
    np.testing.assert_allclose(np.asarray(fg.jacrev(f)(loc)), np.eye(3), atol=0)


def test_jvp_of_integer_sample_is_zero():
    # randint's result is integer: a jvp w.r.t. a float input it does not depend on is zero,
    # and the random numbers are the ones drawn eagerly.
    def f(x):
        return lax.add(lax.convert_element_type(random.randint(KEY, (3,), 0, 5), np.float32), x)

    out, t = fg.jvp(f, (np.float32(1.0),), (np.float32(2.0),))
    np.testing.assert_array_equal(
        np.asarray(out), np.asarray(random.randint(KEY, (3,), 0, 5)) + 1.0
    )
    np.testing.assert_array_equal(np.asarray(t), [2.0, 2.0, 2.0])
