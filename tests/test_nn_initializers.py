"""fungrad.nn.initializers: the same weights as jax.nn.initializers for the same key (GOLDEN,
from JAX 0.10.2 on CPU), the variance each builder promises (against a numpy estimate over
many draws), fan computation over in/out/batch axes, errors, and jit/vmap of an initializer.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
from fungrad import random
from fungrad.nn import initializers as init

KEY = random.PRNGKey(11)

# jax.nn.initializers outputs for KEY: name -> (shape, values).
GOLDEN = {
    "uniform": (
        (2, 3),
        [
            0.6293481588363647,
            0.056238770484924316,
            2.182316303253174,
            1.0352658033370972,
            1.8295104503631592,
            0.9325128793716431,
        ],
    ),
    "normal": (
        (2, 3),
        [
            -1.6143503189086914,
            -4.160719394683838,
            1.2101706266403198,
            -0.7972291111946106,
            0.5577876567840576,
            -0.986954927444458,
        ],
    ),
    "truncated_normal": (
        (2, 3),
        [
            -0.21325017511844635,
            -0.4684557616710663,
            0.36892977356910706,
            -0.0646907314658165,
            0.22122064232826233,
            -0.10125724226236343,
        ],
    ),
    "glorot_uniform": (
        (3, 2, 2),
        [
            -0.4104292094707489,
            -0.6805955767631531,
            0.321647047996521,
            -0.21907779574394226,
            0.15533271431922913,
            -0.26751598715782166,
            -0.6781036853790283,
            0.4662948548793793,
            -0.013873056508600712,
            0.6985037326812744,
            0.2140897959470749,
            0.07510433346033096,
        ],
    ),
    "glorot_normal": (
        (3, 2),
        [
            -0.5479839444160461,
            -1.2534184455871582,
            0.4128667116165161,
            -0.27290356159210205,
            0.19117853045463562,
            -0.3373951017856598,
        ],
    ),
    "lecun_uniform": (
        (3, 2),
        [
            -0.5804345607757568,
            -0.9625074863433838,
            0.4548776149749756,
            -0.30982279777526855,
            0.21967363357543945,
            -0.3783247470855713,
        ],
    ),
    "lecun_normal": (
        (3, 2),
        [
            -0.5002385973930359,
            -1.1442092657089233,
            0.3768939971923828,
            -0.24912573397159576,
            0.1745213121175766,
            -0.3079981803894043,
        ],
    ),
    "he_uniform": (
        (3, 2),
        [
            -0.8208584189414978,
            -1.3611911535263062,
            0.643294095993042,
            -0.4381555914878845,
            0.31066542863845825,
            -0.5350319743156433,
        ],
    ),
    "he_normal": (
        (2, 2, 1, 2),
        [
            -0.6126646995544434,
            -1.4013644456863403,
            0.4615989923477173,
            -0.3051154613494873,
            0.21374408900737762,
            -0.37721917033195496,
            -1.3861308097839355,
            0.7198009490966797,
        ],
    ),
    "xavier_axes": (
        (2, 3, 2),
        [
            -0.5026710629463196,
            -0.8335559368133545,
            0.39393556118011475,
            -0.2683144211769104,
            0.1902429461479187,
            -0.3276388347148895,
            -0.8305040001869202,
            0.5710922479629517,
            -0.01699095405638218,
            0.8554888963699341,
            0.2622053921222687,
            0.09198364615440369,
        ],
    ),
    "kaiming_batch": (
        (2, 2, 3),
        [
            -0.8664387464523315,
            -1.9818288087844849,
            0.6527996063232422,
            -0.4314984381198883,
            0.3022798001766205,
            -0.5334685444831848,
            -1.9602851867675781,
            1.0179523229599,
            -0.026684856042265892,
            2.162787914276123,
            0.42120593786239624,
            0.1448410004377365,
        ],
    ),
    "fan_geo_avg": (
        (5, 2),
        [
            -0.24861562252044678,
            -0.6407654285430908,
            0.18637053668498993,
            -0.1227760836482048,
            0.08590126037597656,
            -0.151994526386261,
            -0.629369854927063,
            0.2935492694377899,
            -0.007574432995170355,
            0.7722595930099487,
        ],
    ),
    "fan_out": (
        (2, 3),
        [
            -0.8208584189414978,
            -1.3611911535263062,
            0.643294095993042,
            -0.4381555914878845,
            0.31066542863845825,
            -0.5350319743156433,
        ],
    ),
    "vector": (
        (4,),
        [-0.8071751594543457, -2.080359697341919, 0.6050853133201599, -0.3986145555973053],
    ),
}

BUILT = {
    "uniform": lambda: init.uniform(3.0)(KEY, (2, 3)),
    "normal": lambda: init.normal(2.0)(KEY, (2, 3)),
    "truncated_normal": lambda: init.truncated_normal(0.5, lower=-1.0, upper=3.0)(KEY, (2, 3)),
    "glorot_uniform": lambda: init.glorot_uniform()(KEY, (3, 2, 2)),
    "glorot_normal": lambda: init.glorot_normal()(KEY, (3, 2)),
    "lecun_uniform": lambda: init.lecun_uniform()(KEY, (3, 2)),
    "lecun_normal": lambda: init.lecun_normal()(KEY, (3, 2)),
    "he_uniform": lambda: init.he_uniform()(KEY, (3, 2)),
    "he_normal": lambda: init.he_normal()(KEY, (2, 2, 1, 2)),
    "xavier_axes": lambda: init.xavier_uniform(in_axis=0, out_axis=(1, 2))(KEY, (2, 3, 2)),
    "kaiming_batch": lambda: init.kaiming_normal(batch_axis=0)(KEY, (2, 2, 3)),
    "fan_geo_avg": lambda: init.variance_scaling(0.3, "fan_geo_avg", "normal")(KEY, (5, 2)),
    "fan_out": lambda: init.variance_scaling(2.0, "fan_out", "uniform", in_axis=0, out_axis=1)(
        KEY, (2, 3)
    ),
    "vector": lambda: init.variance_scaling(1.0, "fan_in", "normal", in_axis=0, out_axis=0)(
        KEY, (4,)
    ),
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_same_numbers_as_jax(name):
    shape, values = GOLDEN[name]
    out = np.asarray(BUILT[name]())
    assert out.shape == shape and out.dtype == np.float32
    # uniform-based ones are bit-identical; normal-based ones differ by a few ulps (erf_inv)
    np.testing.assert_allclose(
        out, np.array(values, np.float32).reshape(shape), rtol=1e-5, atol=1e-7
    )


def test_constant_zeros_ones():
    np.testing.assert_array_equal(np.asarray(init.zeros(KEY, (2, 3))), np.zeros((2, 3)))
    np.testing.assert_array_equal(np.asarray(init.ones(KEY, 4)), np.ones(4))
    c = init.constant(-7.0)(KEY, (2, 2))
    np.testing.assert_array_equal(np.asarray(c), np.full((2, 2), -7.0))
    assert c.dtype == np.float32
    c16 = init.constant(np.array([1.0, 2.0]), dtype=np.float16)(KEY, (3, 2))
    assert c16.dtype == np.float16 and c16.shape == (3, 2)
    assert init.zeros(KEY, (0, 3)).shape == (0, 3)
    assert init.ones(KEY, ()).shape == ()


def test_dtype_argument():
    w = init.glorot_uniform(dtype=np.float16)(KEY, (4, 4))
    assert w.dtype == np.float16
    assert init.glorot_uniform()(KEY, (4, 4), np.float16).dtype == np.float16
    assert init.normal()(KEY, (2,), dtype=np.float16).dtype == np.float16


def _fans(shape, in_axis=-2, out_axis=-1, batch_axis=()):
    def size(axes):
        return math.prod(shape[i] for i in axes) if isinstance(axes, tuple) else shape[axes]

    rf = math.prod(shape) / size(in_axis) / size(out_axis) / size(batch_axis)
    return size(in_axis) * rf, size(out_axis) * rf


@pytest.mark.parametrize(
    "builder,scale,mode",
    [
        (init.glorot_uniform, 1.0, "fan_avg"),
        (init.glorot_normal, 1.0, "fan_avg"),
        (init.lecun_uniform, 1.0, "fan_in"),
        (init.lecun_normal, 1.0, "fan_in"),
        (init.he_uniform, 2.0, "fan_in"),
        (init.he_normal, 2.0, "fan_in"),
    ],
)
def test_variance_matches_fans(builder, scale, mode):
    shape = (3, 3, 40, 30)  # a conv kernel: receptive field 9
    fan_in, fan_out = _fans(shape)
    n = {"fan_in": fan_in, "fan_avg": (fan_in + fan_out) / 2}[mode]
    w = np.asarray(builder()(random.PRNGKey(3), shape), np.float64)
    assert abs(w.mean()) < 0.01
    np.testing.assert_allclose(w.var(), scale / n, rtol=0.05)
    if "normal" in builder.__name__:  # truncated at 2 standard deviations (of the untruncated)
        assert np.abs(w).max() <= 2 * np.sqrt(scale / n) / 0.87962566103423978 + 1e-6
    else:
        assert np.abs(w).max() <= np.sqrt(3 * scale / n)


def test_aliases():
    assert init.xavier_uniform is init.glorot_uniform and init.xavier_normal is init.glorot_normal
    assert init.kaiming_uniform is init.he_uniform and init.kaiming_normal is init.he_normal
    assert isinstance(init.normal(), init.Initializer)
    assert isinstance(init.zeros, init.Initializer)


@settings(max_examples=15)
@given(
    st.lists(st.integers(1, 5), min_size=2, max_size=4),
    st.sampled_from(["fan_in", "fan_out", "fan_avg", "fan_geo_avg"]),
)
def test_variance_scaling_normal_scale(shape, mode):
    """normal draws scaled by sqrt(scale / n): divide out and compare with random.normal."""
    shape = tuple(shape)
    fan_in, fan_out = _fans(shape)
    n = {
        "fan_in": fan_in,
        "fan_out": fan_out,
        "fan_avg": (fan_in + fan_out) / 2,
        "fan_geo_avg": math.sqrt(fan_in * fan_out),
    }[mode]
    w = np.asarray(init.variance_scaling(0.5, mode, "normal")(KEY, shape))
    z = np.asarray(random.normal(KEY, shape))
    np.testing.assert_allclose(w, z * np.float32(np.sqrt(np.float32(0.5 / n))), rtol=1e-6)


def test_jit_and_vmap():
    f = init.he_normal()
    eager = np.asarray(f(KEY, (3, 4)))
    np.testing.assert_array_equal(np.asarray(fg.jit(lambda k: f(k, (3, 4)))(KEY)), eager)
    keys = random.split(KEY, 3)
    batched = fg.vmap(lambda k: f(k, (3, 4)))(keys)
    np.testing.assert_array_equal(
        np.asarray(batched), np.stack([np.asarray(f(k, (3, 4))) for k in keys])
    )


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda: init.glorot_uniform()(KEY, (5,)), ValueError, "default in_axis=-2"),
        (lambda: init.variance_scaling(1.0, "fan_sum", "normal"), ValueError, "invalid mode"),
        (lambda: init.variance_scaling(1.0, "fan_in", "cauchy"), ValueError, "invalid distrib"),
        (lambda: init.normal()(KEY, (2, 2), np.int32), ValueError, "dtype must be a float"),
        (lambda: init.he_normal(in_axis=5)(KEY, (2, 2)), ValueError, "out of range"),
        (lambda: init.zeros(KEY, (2, -1)), TypeError, "non-negative"),
        (lambda: init.ones(KEY, (2,), out_sharding="x"), ValueError, "out_sharding"),
    ],
)
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize("shape", [(3, 2, 4), (3, 3, 2, 3), (2, 3, 3, 2, 2), (1, 4, 4)])
def test_delta_orthogonal_is_an_orthogonal_matrix_at_the_centre(shape):
    w = np.asarray(init.delta_orthogonal(scale=2.0)(KEY, shape))
    centre = tuple((k - 1) // 2 for k in shape[:-2])
    m = w[centre]
    np.testing.assert_allclose(m, np.asarray(init.orthogonal(scale=2.0)(KEY, shape[-2:])))
    np.testing.assert_allclose(m @ m.T, 4.0 * np.eye(shape[-2]), atol=1e-5)
    rest = w.copy()
    rest[centre] = 0
    assert not rest.any()


def test_delta_orthogonal_bad_shapes():
    with pytest.raises(ValueError, match="delta_orthogonal: needs a 3-, 4- or 5-D"):
        init.delta_orthogonal()(KEY, (2, 3))
    with pytest.raises(ValueError, match="input size 4 must not exceed the output size 2"):
        init.delta_orthogonal()(KEY, (3, 4, 2))
