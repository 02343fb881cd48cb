"""bfloat16 through the stack: the dtype, JAX's promotion, conversions, eager and jit
arithmetic (float32 computation rounded to bfloat16 per operation, as XLA's CPU backend),
transforms, random numbers and the GPU's refusal.

References: numpy with ml_dtypes (compute in float32, round with ``.astype(bfloat16)``) and
literal values checked against JAX 0.10.2 on the CPU (bit patterns as uint16 where exactness
matters)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import dtypes, lax

BF = np.dtype(ml_dtypes.bfloat16)


def bits(x) -> list:
    """The bfloat16 bit patterns of ``x`` (a fungrad or numpy bfloat16 array)."""
    return np.ascontiguousarray(np.asarray(x)).view(np.uint16).ravel().tolist()


def ref(fn, *xs):
    """``fn`` computed in float32 on bfloat16 inputs and rounded to bfloat16."""
    with np.errstate(all="ignore"):
        return np.asarray(fn(*(np.asarray(x, BF).astype(np.float32) for x in xs))).astype(BF)


def same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    nan = np.isnan(a.astype(np.float32))
    if not np.array_equal(nan, np.isnan(b.astype(np.float32))):
        return False
    return bits(a[~nan]) == bits(b[~nan])


# -- the dtype -----------------------------------------------------------------------------------


def test_names_finfo_and_hierarchy():
    assert fnp.bfloat16 == ml_dtypes.bfloat16 and np.dtype(fnp.bfloat16) == BF
    assert dtypes.bfloat16 == BF and dtypes.canonicalize_dtype(fnp.bfloat16) == BF
    assert dtypes.short_name(BF) == "bf16" and dtypes.kind(BF) == "f"
    fi = fnp.finfo(fnp.bfloat16)
    assert fi.eps == 0.0078125 and fi.bits == 16 and float(fi.max) == 3.3895313892515355e38
    assert float(fi.tiny) == 1.1754943508222875e-38
    for parent in (fnp.floating, fnp.inexact, fnp.number, np.generic):
        assert fnp.issubdtype(fnp.bfloat16, parent) and dtypes.issubdtype("bfloat16", parent)
    assert not fnp.issubdtype(fnp.bfloat16, fnp.integer)
    assert not fnp.issubdtype(fnp.bfloat16, fnp.float32)
    assert not fnp.issubdtype(fnp.float32, fnp.bfloat16)
    assert fnp.issubdtype(fnp.bfloat16, fnp.bfloat16)
    assert dtypes.itemsize_bits(BF) == 16 and dtypes.scalar_type_of(BF) is float
    assert dtypes.is_inexact(BF) and dtypes.is_float(BF)


def test_creation_printing_and_scalar_type():
    x = fnp.array([1.0, 2.0, 3.0], dtype=fnp.bfloat16)
    assert x.dtype == BF and repr(x) == "Array([1, 2, 3], dtype=bfloat16)"
    assert str(x) == "[1 2 3]"
    assert repr(fnp.bfloat16(1.5)) == "Array(1.5, dtype=bfloat16)"
    assert fnp.ones((2,), dtype=fnp.bfloat16).dtype == BF
    assert fnp.zeros((0, 3), fnp.bfloat16).shape == (0, 3)
    assert fnp.asarray(np.float32(0.1)).astype(fnp.bfloat16).item() == 0.10009765625
    assert fnp.arange(4, dtype=fnp.bfloat16).tolist() == [0, 1, 2, 3]
    assert fnp.full((2,), 1.1, fnp.bfloat16).dtype == BF
    assert "bf16[3]" in str(fg.make_jaxpr(fnp.sin)(x))


# -- promotion (JAX 0.10.2's answers) ------------------------------------------------------------


@pytest.mark.parametrize(
    "other, want",
    [
        (np.float16, np.float32),
        (np.float32, np.float32),
        (np.float64, np.float32),  # without x64
        (np.int32, BF),
        (np.uint8, BF),
        (np.int8, BF),
        (np.bool_, BF),
        (np.complex64, np.complex64),
    ],
)
def test_promotion_lattice(other, want):
    assert fnp.result_type(fnp.bfloat16, other) == np.dtype(want)
    assert fnp.result_type(other, fnp.bfloat16) == np.dtype(want)


def test_weak_types():
    x = fnp.ones(2, fnp.bfloat16)
    y = x + 1.0
    assert y.dtype == BF and not y.weak_type
    assert (x + 1).dtype == BF and (x * 2.5).tolist() == [2.5, 2.5]
    assert fnp.result_type(1.0, fnp.bfloat16) == BF
    assert fnp.result_type(1j, fnp.bfloat16) == np.complex64
    assert (fnp.ones(2, fnp.float16) + x).dtype == np.float32
    weak = lax.convert_element_type(x, BF, weak_type=True)
    assert weak.weak_type and (weak + weak).dtype == BF and (weak + weak).weak_type
    # a weak bfloat16 is a weak float: JAX 0.10.2 gives these
    assert (weak + 1.0).dtype == np.float32 and (weak + 1.0).weak_type
    assert (weak + fnp.ones(2, fnp.int32)).dtype == np.float32
    assert (weak + fnp.ones(2, fnp.float16)).dtype == np.float16
    assert not (weak + fnp.float32(1)).weak_type


def test_promotion_with_x64():
    with fg.enable_x64(True):
        assert fnp.result_type(fnp.bfloat16, np.float64) == np.float64
        assert fnp.result_type(fnp.bfloat16, np.int64) == BF


# -- conversions ---------------------------------------------------------------------------------

_F32_CASES = np.array(
    [1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, np.nan, -np.nan, np.inf, 3.4e38, -0.0, 1e-40],
    np.float32,
)


@pytest.mark.parametrize("jit", [False, True])
def test_float32_to_bfloat16_rounds_to_nearest_even(jit):
    f = (lambda v: v.astype(fnp.bfloat16)) if not jit else fg.jit(lambda v: v.astype(BF))
    out = f(fnp.asarray(_F32_CASES))
    # ties to even (1, 1.015625), above the tie up, NaN -> 0x7fc0 with its sign, overflow inf
    assert bits(out)[:8] == [16256, 16258, 16257, 32704, 65472, 32640, 32640, 32768]
    assert bits(out) == bits(_F32_CASES.astype(BF))
    signalling = np.array([0x7F800001, 0x7FFFFFFF], np.uint32).view(np.float32)
    assert bits(f(fnp.asarray(signalling))) == [32704, 32704]  # as XLA


def test_bfloat16_to_other_dtypes():
    x = fnp.array([3.5e9, -3e9, np.nan, 2.5, -0.0], fnp.bfloat16)
    for f in (lambda v: v.astype(fnp.int32), fg.jit(lambda v: v.astype(fnp.int32))):
        assert f(x).tolist() == [2147483647, -2147483648, 0, 2, 0]  # JAX's saturation
    y = fnp.array([300, -3, 2.5], fnp.bfloat16)
    assert fg.jit(lambda v: v.astype(fnp.uint8))(y).tolist() == [255, 0, 2]
    z = fnp.array([1e5, 1.00390625, 3e-8], fnp.bfloat16)
    for f in (lambda v: v.astype(fnp.float16), fg.jit(lambda v: v.astype(fnp.float16))):
        np.testing.assert_array_equal(np.asarray(f(z)), np.array([np.inf, 1.0, 6e-8], np.float16))
    b = fnp.array([0.0, -0.0, 1e-30, np.nan], fnp.bfloat16)
    assert fg.jit(lambda v: v.astype(bool))(b).tolist() == [False, False, True, True]


def test_conversions_go_through_float32_as_jax():
    # int32 16842753 rounds to 16842752 in float32 (a tie in bfloat16: 16777216), as JAX
    v = np.array([16842753, 257, -16842753], np.int32)
    for f in (lambda a: a.astype(fnp.bfloat16), fg.jit(lambda a: a.astype(BF))):
        assert f(fnp.asarray(v)).astype(fnp.float32).tolist() == [16777216, 256, -16777216]
    with fg.enable_x64(True):
        d = np.array([1 + 2**-8 + 2**-40], np.float64)
        for f in (lambda a: a.astype(fnp.bfloat16), fg.jit(lambda a: a.astype(BF))):
            assert f(fnp.asarray(d)).astype(fnp.float32).tolist() == [1.0]


def test_bitcast_both_ways():
    x = fnp.array([1.0, -2.0, np.inf], fnp.bfloat16)
    u = lax.bitcast_convert_type(x, fnp.uint16)
    assert u.tolist() == [16256, 49152, 32640]
    assert fg.jit(lambda v: lax.bitcast_convert_type(v, fnp.uint16))(x).tolist() == u.tolist()
    back = fg.jit(lambda v: lax.bitcast_convert_type(v, fnp.bfloat16))(u)
    assert back.dtype == BF and back.tolist() == [1.0, -2.0, np.inf]


# -- arithmetic: float32 computation, one rounding per operation ---------------------------------

_X = [0.3, -1.7, 2.5, -0.01, 7.0, 0.9]
# JAX 0.10.2 (CPU) on _X as bfloat16, as uint16 bit patterns; eager and jit alike
_JAX_BITS = {
    "x": [16026, 49114, 16416, 48164, 16608, 16230],
    "sigmoid": [16147, 15902, 16237, 16128, 16256, 16182],
    "cube": [15583, 49310, 16762, 46471, 17324, 16186],
    "pow_m3": [15589, 16108, 15301, 15642, 14979, 15498],
    "pow5": [15137, 49510, 17091, 44764, 18051, 16150],
    "silu": [15921, 48775, 16404, 48036, 16608, 16164],
    "softmax": [15008, 14638, 15411, 14955, 16252, 15122],
    "std": [16432],
    "var": [16627],
    "mean": [16320],
    "exp": [16301, 15930, 16707, 16253, 17545, 16413],
    "tanh": [16022, 49008, 16253, 48164, 16256, 16183],
    "log_abs": [49050, 16136, 16235, 49299, 16377, 48603],
    "gelu": [15934, 48541, 16415, 48035, 16608, 16187],
}
_FUNS = {
    "x": lambda x: x,
    "sigmoid": fg.nn.sigmoid,  # XLA expands logistic before widening: three roundings
    "cube": lambda x: x**3,  # integer_pow: rounded multiplications, as XLA
    "pow_m3": lambda x: (x + 3) ** -3,
    "pow5": lambda x: x**5,
    "silu": fg.nn.silu,
    "softmax": fg.nn.softmax,
    "std": fnp.std,
    "var": fnp.var,
    "mean": fnp.mean,
    "exp": fnp.exp,
    "tanh": fnp.tanh,
    "log_abs": lambda x: fnp.log(fnp.abs(x)),
    "gelu": fg.nn.gelu,
}


@pytest.mark.parametrize("name", sorted(_FUNS))
def test_matches_jax_bit_for_bit(name):
    x = fnp.array(_X, fnp.bfloat16)
    f = _FUNS[name]
    assert bits(f(x)) == _JAX_BITS[name]
    assert bits(fg.jit(f)(x)) == _JAX_BITS[name]


def test_jaxpr_keeps_bfloat16_and_reductions_accumulate_in_float32():
    x = fnp.full((1000,), 0.1, fnp.bfloat16)
    assert bits(fnp.sum(x)) == bits(fg.jit(fnp.sum)(x)) == [17096]  # 100, as JAX
    assert bits(fnp.mean(x)) == [15821]
    text = str(fg.make_jaxpr(fnp.sum)(x))
    assert "convert_element_type[new_dtype=float32" in text and "bf16[]" in text


def test_dot_rounds_a_float32_product():
    a = (fnp.arange(64, dtype=fnp.float32).reshape(8, 8) / 7).astype(fnp.bfloat16)
    want = [16823, 16827, 16832, 16837, 16841, 16845, 16850, 16855]  # JAX's first row
    for f in (fnp.dot, fg.jit(fnp.matmul)):
        out = f(a, a)
        assert out.dtype == BF and bits(out[0]) == want
    wide = lax.dot(a, a, preferred_element_type=fnp.float32)
    assert wide.dtype == np.float32
    a32 = np.asarray(a).astype(np.float32)
    np.testing.assert_allclose(np.asarray(wide), a32 @ a32, rtol=1e-6)
    assert (a @ fnp.ones((8, 2), fnp.float32)).dtype == np.float32


_EXACT = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "div": (lambda a, b: a / b, np.divide),
    "max": (fnp.maximum, np.maximum),
    "sqrt": (lambda a, b: fnp.sqrt(fnp.abs(a)), lambda a, b: np.sqrt(np.abs(a))),
    "floor": (lambda a, b: fnp.floor(a), lambda a, b: np.floor(a)),
}
_bf_values = st.floats(-1e6, 1e6, width=32, allow_subnormal=False).map(
    lambda v: float(np.float32(v).astype(BF))
)
_shapes = st.sampled_from([(), (0,), (1,), (3,), (2, 3)])


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(sorted(_EXACT)),
    shape=_shapes,
    data=st.data(),
)
def test_correctly_rounded_ops_match_the_reference(name, shape, data):
    size = int(np.prod(shape))
    xs = [
        np.array(data.draw(st.lists(_bf_values, min_size=size, max_size=size)), BF).reshape(shape)
        for _ in range(2)
    ]
    f, np_f = _EXACT[name]
    want = ref(np_f, *xs)
    eager = f(*(fnp.asarray(x) for x in xs))
    compiled = fg.jit(f)(*xs)
    assert same_bits(eager, want) and same_bits(compiled, want)


_TRANSCENDENTAL = {
    "exp": (fnp.exp, np.exp),
    "sin": (fnp.sin, np.sin),
    "tanh": (fnp.tanh, np.tanh),
    "log1p": (lambda a: fnp.log1p(fnp.abs(a)), lambda a: np.log1p(np.abs(a))),
}


@settings(max_examples=20, deadline=None)
@given(
    name=st.sampled_from(sorted(_TRANSCENDENTAL)),
    values=st.lists(st.floats(-20, 20, width=32), min_size=1, max_size=8),
)
def test_transcendentals_eager_equals_jit_and_within_one_ulp(name, values):
    x = np.array(values, np.float32).astype(BF)
    f, np_f = _TRANSCENDENTAL[name]
    eager, compiled = f(fnp.asarray(x)), fg.jit(f)(x)
    assert same_bits(eager, compiled)
    want = ref(np_f, x).astype(np.float32)
    got = np.asarray(eager).astype(np.float32)
    ulp = np.spacing(np.abs(want).astype(BF)).astype(np.float32)
    assert np.all(np.abs(got - want) <= ulp)


def test_nan_inf_zero_size_zero_d_and_broadcasting():
    special = fnp.array([np.nan, np.inf, -np.inf, 3e38, -0.0], fnp.bfloat16)
    for f in (lambda v: v * 2, fg.jit(lambda v: v * 2)):
        out = np.asarray(f(special)).astype(np.float32)
        assert np.isnan(out[0]) and out[1:4].tolist() == [np.inf, -np.inf, np.inf]
        assert out[4] == 0 and np.signbit(out[4])
    empty = fnp.zeros((0, 3), fnp.bfloat16)
    assert fg.jit(lambda v: v * 2 + 1)(empty).shape == (0, 3)
    assert fnp.sum(fnp.zeros((0,), fnp.bfloat16)).tolist() == 0
    s = fnp.array(1.0, fnp.bfloat16)
    assert bits(fnp.exp(s)) == bits(fg.jit(fnp.exp)(s)) == bits(ref(np.exp, np.asarray(s)))
    a, b = fnp.ones((3, 1), fnp.bfloat16), fnp.arange(4).astype(fnp.bfloat16)
    out = fg.jit(lambda u, v: u + v)(a, b)
    assert out.dtype == BF and out.shape == (3, 4) and out[2].tolist() == [1, 2, 3, 4]


def test_control_flow_carries():
    x = fnp.array([1.0, 2.0, 3.0], fnp.bfloat16)

    def body(c):
        return c[0] + 1, c[1] * 1.1

    loop = fg.jit(lambda v: lax.while_loop(lambda c: c[0] < 10, body, (0, v)))
    assert loop(x)[1].tolist() == [2.609375, 5.21875, 7.875]  # JAX's
    scan = lax.scan(lambda c, v: (c + v, c * v), fnp.array(0.0, fnp.bfloat16), x)
    assert scan[0].tolist() == 6 and scan[1].tolist() == [0, 2, 9] and scan[1].dtype == BF
    cond = fg.jit(lambda v: lax.cond(v[0] > 0, lambda u: u * 2, lambda u: u, v))
    assert cond(x).tolist() == [2, 4, 6]


# -- transforms ----------------------------------------------------------------------------------


def test_grad_vjp_jvp_vmap_as_jax():
    x = fnp.array([1.0, 2.0, 3.0], fnp.bfloat16)

    def loss(v):
        return fnp.sum(fnp.sin(v) ** 2).astype(fnp.float32)

    for g in (fg.grad(loss), fg.jit(fg.grad(loss))):
        out = g(x)
        assert out.dtype == BF and out.tolist() == [0.90625, -0.7578125, -0.279296875]
    assert fg.grad(lambda v: v * v)(fnp.array(3.0, fnp.bfloat16)).tolist() == 6
    (ct,) = fg.vjp(lambda v: v * 2.0, x)[1](fnp.ones(3, fnp.bfloat16))
    assert ct.dtype == BF and ct.tolist() == [2, 2, 2]
    # the cotangent of a bfloat16 input that was converted to float32 is bfloat16
    (ct,) = fg.vjp(lambda v: v.astype(fnp.float32), x)[1](fnp.ones(3))
    assert ct.dtype == BF
    ga, gb = fg.grad(lambda a, b: (a * b).sum(), argnums=(0, 1))(x, fnp.ones(3, fnp.float32))
    assert ga.dtype == BF and gb.dtype == np.float32  # each cotangent has its input's dtype
    primal, tangent = fg.jvp(fnp.sin, (x,), (fnp.ones(3, fnp.bfloat16),))
    assert bits(primal) == [16215, 16233, 15889]
    assert tangent.dtype == BF and tangent.tolist() == [0.5390625, -0.416015625, -0.98828125]
    assert fg.vmap(lambda v: v * v)(x).tolist() == [1, 4, 9]
    h = fg.hessian(lambda v: fnp.sum(v**3).astype(fnp.float32))(x)
    assert h.dtype == BF and np.diag(np.asarray(h)).tolist() == [6, 12, 18]
    value, grad = fg.jit(fg.value_and_grad(lambda v: fnp.mean(v**2)))(x)
    assert value.tolist() == 4.65625 and grad.tolist() == [0.66796875, 1.3359375, 2.0]


# -- random --------------------------------------------------------------------------------------


def test_random_matches_jax():
    key = fg.random.PRNGKey(0)
    normal = [0.38671875, 0.1826171875, -1.0, -0.82421875, 0.5625, -0.64453125]
    uniform = [0.6484375, 0.5703125, 0.15625, 0.203125, 0.7109375, 0.2578125]
    assert fg.random.normal(key, (6,), fnp.bfloat16).tolist() == normal
    assert fg.jit(lambda k: fg.random.normal(k, (6,), fnp.bfloat16))(key).tolist() == normal
    assert fg.random.uniform(key, (6,), fnp.bfloat16).tolist() == uniform
    k42 = fg.random.PRNGKey(42)
    assert bits(fg.random.normal(k42, (4,), fnp.bfloat16)) == [16048, 16258, 16370, 16252]
    assert bits(fg.random.uniform(k42, (4,), fnp.bfloat16, -2, 3)) == [16276, 16398, 16438, 16396]
    tn = fg.random.truncated_normal(fg.random.PRNGKey(1), -1, 1, (3,), fnp.bfloat16)
    assert bits(tn) == [16061, 48873, 48416]


# -- the GPU -------------------------------------------------------------------------------------


def test_gpu_refuses_bfloat16_with_the_fix(gpu):
    with pytest.raises(TypeError, match=r"bfloat16 values.*astype\(float32\)"):
        fg.jit(lambda a: a * 2, backend="gpu")(fnp.ones(3, fnp.bfloat16))


def test_eager_and_jit_gradients_of_a_layer_match_jax():
    rng = np.random.default_rng(1)
    w = fnp.asarray(rng.standard_normal((5, 3)).astype(np.float32)).astype(fnp.bfloat16)
    x = fnp.asarray(rng.standard_normal((4, 5)).astype(np.float32)).astype(fnp.bfloat16)
    cases = [  # (loss, JAX 0.10.2's gradient's first five bit patterns)
        (lambda v: fnp.sum(fnp.tanh(x @ v)), [49040, 16391, 16167, 48686, 49022]),
        (lambda v: fnp.mean((x @ v - 0.5) ** 2), [16242, 16195, 16123, 48854, 15712]),
        (lambda v: fnp.sum(fnp.exp(v) * v), [16372, 16516, 16365, 48552, 16534]),
    ]
    for loss, want in cases:
        assert bits(fg.grad(loss)(w))[:5] == want  # the eager tape
        assert bits(fg.jit(fg.grad(loss))(w))[:5] == want


def test_checkpoint_round_trip(tmp_path):
    tree = {"w": fnp.array([1.5, np.nan, -0.0], fnp.bfloat16), "s": np.asarray(2.5, BF)[()]}
    path = str(tmp_path / "bf16.ckpt")
    fg.checkpoints.save(path, tree)
    back = fg.checkpoints.restore(path)
    assert back["w"].dtype == BF and bits(back["w"]) == bits(tree["w"])
    assert type(back["s"]) is type(tree["s"]) and float(back["s"]) == 2.5
    assert np.load(path)["leaf_1"].dtype == np.uint16  # .npy has no bfloat16: its bits


def test_debug_nans_sees_bfloat16():
    x = fnp.array([-1.0, 2.0], fnp.bfloat16)
    with fg.debug_nans(True):
        with pytest.raises(FloatingPointError, match=r"nan.*log"):
            fnp.log(x)
        with pytest.raises(FloatingPointError, match=r"bf16\[2\]"):
            fg.jit(lambda a: fnp.log(a) * 2)(x)
