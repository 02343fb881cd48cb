"""The threefry2x32 primitive and fungrad.random: known test vectors, JAX golden values (computed
once with jax 0.10.2, jax_threefry_partitionable=True, its default), determinism, shapes and
dtypes, distribution statistics and bad-input errors. These tests never import jax."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fungrad as fg
from fungrad import lax
from fungrad import random as fr
from tests.helpers import assert_array

M32 = 0xFFFFFFFF


# -- threefry2x32 ----------------------------------------------------------------------------


def threefry_reference(k1, k2, x1, x2):
    """Threefry-2x32, 20 rounds, on Python ints (Salmon et al. 2011, as in JAX)."""
    rot = [(13, 15, 26, 6), (17, 29, 16, 24)]
    ks = [k1, k2, k1 ^ k2 ^ 0x1BD11BDA]
    x = [(x1 + ks[0]) & M32, (x2 + ks[1]) & M32]
    for i in range(5):
        for r in rot[i % 2]:
            x[0] = (x[0] + x[1]) & M32
            x[1] = (((x[1] << r) | (x[1] >> (32 - r))) & M32) ^ x[0]
        x[0] = (x[0] + ks[(i + 1) % 3]) & M32
        x[1] = (x[1] + ks[(i + 2) % 3] + i + 1) & M32
    return x


@pytest.mark.parametrize(
    "key,count,expected",
    [
        # the known-answer vectors of the Random123 suite, as in JAX's random_test.py
        ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
        ((M32, M32), (M32, M32), (0x1CB996FC, 0xBB002BE7)),
        ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
    ],
)
def test_threefry2x32_known_vectors(key, count, expected):
    y1, y2 = lax.threefry2x32(*(np.uint32(v) for v in key + count))
    assert_array(y1, np.uint32(expected[0]), dtype=np.uint32)
    assert_array(y2, np.uint32(expected[1]), dtype=np.uint32)
    assert threefry_reference(*key, *count) == list(expected)


u32 = hnp.from_dtype(np.dtype(np.uint32))


@given(hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=4), st.data())
def test_threefry2x32_matches_python_reference_and_broadcasts(shape, data):
    k1, k2 = data.draw(u32), data.draw(u32)  # 0-d keys broadcast
    x1 = data.draw(hnp.arrays(np.uint32, shape, elements=u32))
    x2 = data.draw(hnp.arrays(np.uint32, shape, elements=u32))
    y1, y2 = lax.threefry2x32(np.uint32(k1), np.uint32(k2), x1, x2)
    ref = [
        threefry_reference(int(k1), int(k2), int(a), int(b)) for a, b in zip(x1.ravel(), x2.ravel())
    ]
    ref1 = np.array([r[0] for r in ref], np.uint32).reshape(shape)
    ref2 = np.array([r[1] for r in ref], np.uint32).reshape(shape)
    assert_array(y1, ref1, dtype=np.uint32)
    assert_array(y2, ref2, dtype=np.uint32)


def test_threefry2x32_errors_and_jaxpr():
    z = np.zeros(3, np.uint32)
    with pytest.raises(TypeError, match="threefry2x32: all operands must be uint32"):
        lax.threefry2x32(z, z, z, np.zeros(3, np.int32))
    with pytest.raises(TypeError, match="threefry2x32: incompatible shapes"):
        lax.threefry2x32(z, z, z, np.zeros(4, np.uint32))
    jaxpr = fg.make_jaxpr(lax.threefry2x32)(np.uint32(1), np.uint32(2), z, z)
    assert "e:u32[3] f:u32[3] = threefry2x32 a b c d" in str(jaxpr)
    outs = jaxpr(np.uint32(1), np.uint32(2), z, z)
    for got, want in zip(outs, lax.threefry2x32(np.uint32(1), np.uint32(2), z, z)):
        assert_array(got, np.asarray(want), dtype=np.uint32)


# -- keys: golden values from JAX ------------------------------------------------------------


def test_prngkey_matches_jax():
    assert_array(fr.PRNGKey(0), np.array([0, 0], np.uint32), dtype=np.uint32)
    assert_array(fr.PRNGKey(42), np.array([0, 42], np.uint32), dtype=np.uint32)
    # 32-bit mode: Python ints wrap to their low 32 bits, as in JAX
    assert_array(fr.PRNGKey(-1), np.array([0, M32], np.uint32))
    assert_array(fr.PRNGKey(2**32 + 5), np.array([0, 5], np.uint32))
    assert_array(fr.PRNGKey(np.int32(-5)), np.array([0, 4294967291], np.uint32))
    assert_array(fr.PRNGKey(np.uint32(7)), np.array([0, 7], np.uint32))
    assert_array(fr.key(42), np.array([0, 42], np.uint32), dtype=np.uint32)


def test_prngkey_x64_uses_both_words(x64):
    assert_array(fr.PRNGKey(-1), np.array([M32, M32], np.uint32), dtype=np.uint32)
    assert_array(fr.PRNGKey(2**32 + 5), np.array([1, 5], np.uint32))
    assert_array(fr.PRNGKey(-(2**40)), np.array([4294967040, 0], np.uint32))
    assert_array(fr.PRNGKey(np.int64(2**33 + 1)), np.array([2, 1], np.uint32))


def test_split_and_fold_in_match_jax():
    k = fr.PRNGKey(0)
    assert_array(
        fr.split(k),
        np.array([[1797259609, 2579123966], [928981903, 3453687069]], np.uint32),
        dtype=np.uint32,
    )
    k42 = fr.PRNGKey(42)
    assert_array(
        fr.split(k42, 3),
        np.array(
            [[1832780943, 270669613], [64467757, 2916123636], [2465931498, 255383827]], np.uint32
        ),
    )
    assert fr.split(k42, (2, 0)).shape == (2, 0, 2)
    assert fr.split(k42, ()).shape == (2,)
    assert_array(fr.fold_in(k42, 7), np.array([2547012911, 1371500959], np.uint32))
    assert_array(fr.fold_in(k, 5), np.array([1524306142, 1887795613], np.uint32))
    assert_array(fr.fold_in(k, np.uint32(M32)), np.array([743310391, 3789761811], np.uint32))


K42_UNIFORM_BITS = [[1056585764, 1059981104, 1058915320], [1057988288, 1055308516, 1058405198]]


def test_bits_uniform_randint_bernoulli_match_jax_exactly():
    k = fr.PRNGKey(42)
    assert_array(
        fr.bits(k, (2, 3)),
        np.array(
            [[2098992034, 2919706841, 2646866425], [2409546199, 1935504149, 2516274904]], np.uint32
        ),
        dtype=np.uint32,
    )
    u = fr.uniform(k, (2, 3))
    assert u.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(u).view(np.uint32), K42_UNIFORM_BITS)
    # one counter per element in row-major order: prefixes agree, a scalar is the first one
    np.testing.assert_array_equal(
        np.asarray(fr.uniform(k, ())).view(np.uint32), K42_UNIFORM_BITS[0][0]
    )
    u16 = fr.uniform(k, (4,), np.float16)
    np.testing.assert_array_equal(np.asarray(u16).view(np.uint16), [11488, 12824, 15310, 14862])
    assert_array(
        fr.randint(k, (8,), -3, 1000),
        np.array([407, 669, 173, 288, 412, 921, 712, 243], np.int32),
        dtype=np.int32,
    )
    assert_array(
        fr.randint(k, (5,), 0, 256, np.uint8),
        np.array([196, 18, 183, 193, 141], np.uint8),
        dtype=np.uint8,
    )
    expected = np.zeros(10, bool)
    expected[6] = True
    assert_array(fr.bernoulli(k, 0.3, (10,)), expected, dtype=np.bool_)


def test_uniform_range_and_float_samplers_match_jax_to_rounding():
    # JAX's CPU compiler fuses u * (max - min) + min into an FMA and uses its own erf_inv and
    # log approximations, so these agree to a few float32 ulps, not bit for bit.
    k = fr.PRNGKey(42)
    got = fr.uniform(k, (4,), minval=-2.0, maxval=3.0)
    want = np.array([1055070388, 1068700152, 1066035692, 1062083008], np.uint32).view(np.float32)
    assert_array(got, want, dtype=np.float32, rtol=1e-6, atol=1e-7)
    assert_array(
        fr.normal(k, (2, 3)),
        np.array([[-0.02830462, 0.46713185, 0.29570296], [0.15354592, -0.12403282, 0.21692315]]),
        dtype=np.float32,
        rtol=1e-6,
        atol=1e-7,
    )
    assert_array(fr.exponential(k, (3,)), [0.6708175, 1.1388006, 0.95782], dtype=np.float32)
    assert_array(fr.gumbel(k, (3,)), [0.3340934, 0.95201945, 0.72553056], dtype=np.float32)
    assert_array(
        fr.truncated_normal(k, -0.5, 0.5, (4,)),
        [-0.01083734, 0.17344409, 0.11183593, 0.05859983],
        dtype=np.float32,
    )


def test_uniform_x64_matches_jax(x64):
    got = fr.uniform(fr.PRNGKey(0), (5,))
    assert_array(
        got,
        [0.41845711, 0.21629545, 0.96532146, 0.57450053, 0.53222649],
        dtype=np.float64,
        rtol=1e-8,
    )
    assert_array(
        fr.bits(fr.PRNGKey(0), (3,)),
        np.array([7719171245655871230, 3989946895414531357, 17807037942121513089], np.uint64),
        dtype=np.uint64,
    )


def test_permutation_choice_categorical_match_jax():
    k = fr.PRNGKey(42)
    assert_array(fr.permutation(k, 10), np.array([7, 4, 2, 5, 3, 6, 8, 9, 0, 1], np.int32))
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    assert_array(
        fr.permutation(k, x, axis=1),
        np.array([[2, 3, 0, 1], [6, 7, 4, 5], [10, 11, 8, 9]], np.int32),
    )
    assert_array(
        fr.permutation(k, x, axis=1, independent=True),
        np.array([[2, 3, 0, 1], [7, 4, 5, 6], [10, 11, 8, 9]], np.int32),
    )
    assert_array(fr.choice(k, 10, (4,)), np.array([4, 4, 1, 9], np.int32), dtype=np.int32)
    assert_array(fr.choice(k, 10, (4,), replace=False), np.array([7, 4, 2, 5], np.int32))
    p = np.array([0.1, 0.2, 0.3, 0.2, 0.2], np.float32)
    assert_array(fr.choice(k, 5, (6,), p=p), np.full(6, 2, np.int32))
    assert_array(fr.choice(k, 5, (3,), replace=False, p=p), np.array([2, 1, 3], np.int32))
    logits = np.log(np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]], np.float32))
    assert_array(
        fr.categorical(k, logits, shape=(4, 2)),
        np.array([[2, 0], [2, 0], [1, 0], [1, 2]], np.int32),
        dtype=np.int32,
    )
    assert_array(
        fr.categorical(k, np.zeros((2, 5), np.float32), shape=(3, 2), replace=False),
        np.array([[1, 4], [2, 2], [3, 3]], np.int32),
    )
    assert_array(
        fr.categorical(k, np.zeros((5, 2), np.float32), axis=0), np.array([4, 4], np.int32)
    )


def test_multivariate_normal_matches_jax_and_covariance():
    cov = np.array([[2.0, 0.5], [0.5, 1.0]], np.float32)
    mean = np.array([1.0, -1.0], np.float32)
    got = fr.multivariate_normal(fr.PRNGKey(42), mean, cov, (3,))
    assert_array(
        got,
        [[0.95997125, -0.5730454], [1.4181871, -0.75182414], [0.8245911, -0.84093916]],
        dtype=np.float32,
        rtol=1e-5,
        atol=1e-6,
    )
    x = np.asarray(fr.multivariate_normal(fr.PRNGKey(1), mean, cov, (N,)), np.float64)
    np.testing.assert_allclose(x.mean(0), mean, atol=0.06)
    np.testing.assert_allclose(np.cov(x.T), cov, atol=0.08)
    assert fr.multivariate_normal(fr.PRNGKey(1), np.zeros((4, 3)), np.eye(3)).shape == (4, 3)
    with pytest.raises(ValueError, match="multivariate_normal: cov must have shape"):
        fr.multivariate_normal(fr.PRNGKey(1), mean, np.eye(3))
    with pytest.raises(ValueError, match="multivariate_normal: method must be one of"):
        fr.multivariate_normal(fr.PRNGKey(1), mean, cov, method="qr")


# -- determinism, independence, shapes and dtypes ----------------------------------------------

SAMPLERS = {
    "uniform": lambda k, s, d: fr.uniform(k, s, d),
    "normal": lambda k, s, d: fr.normal(k, s, d),
    "exponential": lambda k, s, d: fr.exponential(k, s, d),
    "laplace": lambda k, s, d: fr.laplace(k, s, d),
    "logistic": lambda k, s, d: fr.logistic(k, s, d),
    "gumbel": lambda k, s, d: fr.gumbel(k, s, d),
    "gumbel_high": lambda k, s, d: fr.gumbel(k, s, d, mode="high"),
    "cauchy": lambda k, s, d: fr.cauchy(k, s, d),
    "truncated_normal": lambda k, s, d: fr.truncated_normal(k, -1.0, 2.0, s, d),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
@pytest.mark.parametrize("shape", [(), (0,), (2, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_float_samplers_shape_dtype_determinism(name, shape, dtype):
    k1, k2 = np.asarray(fr.split(fr.PRNGKey(1)))
    a = SAMPLERS[name](k1, shape, dtype)
    assert a.shape == shape and a.dtype == dtype and not a.weak_type
    assert np.all(np.isfinite(np.asarray(a)))
    np.testing.assert_array_equal(np.asarray(a), np.asarray(SAMPLERS[name](k1, shape, dtype)))
    if shape == (2, 3):
        assert not np.array_equal(np.asarray(a), np.asarray(SAMPLERS[name](k2, shape, dtype)))


def test_float64_samplers(x64):
    k = fr.PRNGKey(3)
    for name, f in SAMPLERS.items():
        a = f(k, (4,), None)
        assert a.dtype == np.float64, name


def test_split_streams_differ():
    keys = np.asarray(fr.split(fr.PRNGKey(0), 4))
    draws = [np.asarray(fr.bits(keys[i], (8,))) for i in range(4)]
    draws.append(np.asarray(fr.bits(fr.PRNGKey(0), (8,))))
    for i in range(5):
        for j in range(i):
            assert not np.array_equal(draws[i], draws[j])
    k = np.asarray(keys)
    assert len({tuple(r) for r in k}) == 4


def test_integer_and_bool_sampler_dtypes():
    k = fr.PRNGKey(5)
    for dt in [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32]:
        r = fr.randint(k, (50,), 1, 9, dt)
        assert r.dtype == dt and r.shape == (50,)
        assert np.all((np.asarray(r) >= 1) & (np.asarray(r) < 9))
    for dt in [np.uint8, np.uint16, np.uint32]:
        assert fr.bits(k, (3,), dt).dtype == dt
    assert fr.bernoulli(k).shape == () and fr.bernoulli(k).dtype == np.bool_
    assert fr.bernoulli(k, np.full((2, 3), 0.5, np.float32)).shape == (2, 3)
    # maxval <= minval gives minval (JAX issue 222)
    assert_array(fr.randint(k, (3,), 5, 2), np.full(3, 5, np.int32))
    # array bounds broadcast against the shape
    r = np.asarray(fr.randint(k, (1000, 3), np.array([0, 10, 100]), np.array([5, 20, 101])))
    assert r.min(0).tolist() == [0, 10, 100] and r.max(0).tolist() == [4, 19, 100]


# -- distribution statistics (deterministic keys; bounds far above sampling noise) -------------

N = 10000


def ks_statistic(samples, cdf):
    x = np.sort(np.asarray(samples, np.float64))
    c = cdf(x)
    n = len(x)
    return max(np.max(np.arange(1, n + 1) / n - c), np.max(c - np.arange(n) / n))


def normal_cdf(x):
    return 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def test_uniform_and_normal_distributions():
    k1, k2 = np.asarray(fr.split(fr.PRNGKey(11)))
    u = np.asarray(fr.uniform(k1, (N,)))
    assert u.min() >= 0 and u.max() < 1
    assert ks_statistic(u, lambda x: x) < 0.02  # 1% critical value is 0.0163
    u = np.asarray(fr.uniform(k1, (N,), minval=-3.0, maxval=5.0))
    assert u.min() >= -3 and u.max() < 5 and abs(u.mean() - 1) < 0.1
    z = np.asarray(fr.normal(k2, (N,)), np.float64)
    assert abs(z.mean()) < 0.05 and abs(z.std() - 1) < 0.05
    assert ks_statistic(z, normal_cdf) < 0.02


def test_other_continuous_distributions():
    keys = np.asarray(fr.split(fr.PRNGKey(12), 5))
    e = np.asarray(fr.exponential(keys[0], (N,)), np.float64)
    assert e.min() >= 0 and abs(e.mean() - 1) < 0.05
    lp = np.asarray(fr.laplace(keys[1], (N,)), np.float64)
    assert abs(lp.mean()) < 0.05 and abs(lp.var() - 2) < 0.2
    lg = np.asarray(fr.logistic(keys[2], (N,)), np.float64)
    assert abs(lg.mean()) < 0.06 and abs(lg.var() - math.pi**2 / 3) < 0.3
    g = np.asarray(fr.gumbel(keys[3], (N,)), np.float64)
    assert abs(g.mean() - np.euler_gamma) < 0.05 and abs(g.var() - math.pi**2 / 6) < 0.2
    t = np.asarray(fr.truncated_normal(keys[4], -0.5, 1.5, (N,)), np.float64)
    assert t.min() > -0.5 and t.max() < 1.5
    a, b = normal_cdf(np.array([-0.5, 1.5]))
    assert ks_statistic(t, lambda x: (normal_cdf(x) - a) / (b - a)) < 0.02


def test_discrete_distributions():
    keys = np.asarray(fr.split(fr.PRNGKey(13), 4))
    b = np.asarray(fr.bernoulli(keys[0], 0.3, (N,)))
    assert abs(b.mean() - 0.3) < 0.02
    r = np.asarray(fr.randint(keys[1], (N,), -2, 8))
    counts = np.bincount(r + 2, minlength=10)
    assert r.min() == -2 and r.max() == 7 and len(counts) == 10
    assert np.all(np.abs(counts - N / 10) < 0.15 * N / 10)
    logits = np.log(np.array([0.1, 0.2, 0.7], np.float32))
    c = np.asarray(fr.categorical(keys[2], logits, shape=(N,)))
    np.testing.assert_allclose(np.bincount(c, minlength=3) / N, [0.1, 0.2, 0.7], atol=0.02)
    ch = np.asarray(fr.choice(keys[3], 4, (N,), p=np.array([0.4, 0.3, 0.2, 0.1], np.float32)))
    np.testing.assert_allclose(np.bincount(ch, minlength=4) / N, [0.4, 0.3, 0.2, 0.1], atol=0.02)


def test_permutation_and_choice_without_replacement():
    k = fr.PRNGKey(14)
    p = np.asarray(fr.permutation(k, 2000))  # two sorting rounds above ~1600
    assert sorted(p.tolist()) == list(range(2000)) and not np.array_equal(p, np.arange(2000))
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    rows = np.asarray(fr.permutation(k, x))  # rows permuted, each row intact
    assert sorted(map(tuple, rows.tolist())) == sorted(map(tuple, x.tolist()))
    ind = np.asarray(fr.permutation(k, x, axis=1, independent=True))
    assert all(sorted(ind[i].tolist()) == x[i].tolist() for i in range(4))
    c = np.asarray(fr.choice(k, 50, (30,), replace=False))
    assert len(set(c.tolist())) == 30 and c.min() >= 0 and c.max() < 50
    c = np.asarray(fr.choice(k, x, (2,), replace=False, axis=1))
    assert c.shape == (4, 2) and len(set(c[0].tolist())) == 2
    cp = np.asarray(
        fr.choice(k, 6, (4,), replace=False, p=np.array([0.1, 0.1, 0.2, 0.2, 0.2, 0.2], np.float32))
    )
    assert len(set(cp.tolist())) == 4
    assert fr.choice(k, 5, (0,)).shape == (0,)


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad", [np.zeros(3, np.uint32), np.zeros(2, np.int32), [0, 0], np.zeros((), np.uint32), "key"]
)
@pytest.mark.parametrize("fn", ["uniform", "normal", "split", "bits", "permutation"])
def test_non_key_arguments_are_type_errors(bad, fn):
    call = {
        "uniform": lambda k: fr.uniform(k),
        "normal": lambda k: fr.normal(k),
        "split": lambda k: fr.split(k),
        "bits": lambda k: fr.bits(k),
        "permutation": lambda k: fr.permutation(k, 3),
    }[fn]
    with pytest.raises(
        TypeError,
        match=rf"{fn}: expected .*PRNG key.*uint32 array of shape "
        r"\(2,\)",
    ):
        call(bad)


def test_batched_keys_point_to_vmap():
    with pytest.raises(ValueError, match=r"uniform: .*u32\[4,2\].*vmap"):
        fr.uniform(fr.split(fr.PRNGKey(0), 4))
    assert fr.key_data(fr.split(fr.PRNGKey(0), 4)).shape == (4, 2)
    assert_array(fr.wrap_key_data(np.array([0, 42], np.uint32)), fr.PRNGKey(42))
    with pytest.raises(TypeError, match="wrap_key_data"):
        fr.wrap_key_data(np.zeros(3, np.uint32))
    with pytest.raises(ValueError, match="wrap_key_data: only the 'threefry2x32'"):
        fr.wrap_key_data(np.zeros(2, np.uint32), impl="rbg")


def test_bad_seeds_dtypes_and_shapes():
    with pytest.raises(TypeError, match="PRNGKey: the seed must be an integer"):
        fr.PRNGKey(1.5)
    with pytest.raises(TypeError, match="PRNGKey: the seed must be a scalar"):
        fr.PRNGKey(np.zeros(2, np.int32))
    with pytest.raises(TypeError, match="key: the seed must be an integer"):
        fr.key("0")
    k = fr.PRNGKey(0)
    with pytest.raises(OverflowError, match="fold_in"):
        fr.fold_in(k, -1)
    with pytest.raises(TypeError, match="fold_in: data must be a scalar"):
        fr.fold_in(k, np.zeros(2, np.int32))
    with pytest.raises(ValueError, match="uniform: dtype must be a float dtype"):
        fr.uniform(k, (2,), np.int32)
    with pytest.raises(TypeError, match="randint: dtype must be an integer dtype"):
        fr.randint(k, (2,), 0, 3, np.float32)
    with pytest.raises(ValueError, match="bits: dtype must be an unsigned"):
        fr.bits(k, (2,), np.int32)
    with pytest.raises(TypeError, match="bernoulli: the probability p must have a floating"):
        fr.bernoulli(k, np.int32(1))
    with pytest.raises(ValueError, match=r"uniform: .*\(2,\).*\(3,\)"):
        fr.uniform(k, (2,), minval=np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="choice: cannot take a larger sample"):
        fr.choice(k, 3, (4,), replace=False)
    with pytest.raises(ValueError, match="gumbel: mode"):
        fr.gumbel(k, (2,), mode="bogus")


# -- tracing -----------------------------------------------------------------------------------


def test_samplers_trace_to_jaxprs_that_reproduce_eager_results():
    k = fr.PRNGKey(7)
    jaxpr = fg.make_jaxpr(lambda k: fr.uniform(k, (3,)))(k)
    text = str(jaxpr)
    for piece in [
        "threefry2x32",
        "xor",
        "shift_right_logical",
        "or",
        "bitcast_convert_type[new_dtype=float32]",
        "iota[dimension=0 dtype=uint32",
    ]:
        assert piece in text, (piece, text)
    (out,) = jaxpr(k)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(fr.uniform(k, (3,))))
    for f in [
        lambda k: fr.split(k, 3),
        lambda k: fr.normal(k, (2, 2)),
        lambda k: fr.randint(k, (4,), 0, 7),
        lambda k: fr.fold_in(k, 3),
    ]:
        (out,) = fg.make_jaxpr(f)(k)(k)
        np.testing.assert_array_equal(np.asarray(out), np.asarray(f(k)))
