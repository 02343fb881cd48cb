"""JAX's float8 types through the stack: names, finfo, JAX's promotion (leaves of the lattice),
conversions (float32 <-> float8 exhaustively and on many values against ml_dtypes), eager and
jit arithmetic against JAX 0.10.2's results (XLA's CPU computes float8 in float16: a float32
result is rounded to float16 and then to the float8 type), 0-d/size-0 and the GPU's refusal.

References: ml_dtypes' ``astype`` (XLA's conversions give the same bits, checked against JAX
0.10.2 on 600k values per type) and literal results of JAX 0.10.2 on the CPU (bit patterns
as uint8)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import dtypes, lax

NAMES = [
    "float8_e3m4",
    "float8_e4m3",
    "float8_e4m3b11fnuz",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
]
"""[n for n in dir(jax.numpy) if 'float8' in n] in JAX 0.10.2."""

F8 = [np.dtype(getattr(ml_dtypes, n)) for n in NAMES]
E4M3FN, E5M2 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)


def bits(x) -> list:
    return np.ascontiguousarray(np.asarray(x)).view(np.uint8).ravel().tolist()


def xla_f32(dt, pattern: int) -> int:
    """The float32 bits XLA gives the float8 ``pattern``: ml_dtypes' value, NaN as 0x7fc00000
    (ml_dtypes gives the fnuz types' NaN the sign bit; JAX 0.10.2 gives 0x7fc00000)."""
    v = np.uint8(pattern).view(dt).astype(np.float32)
    return 0x7FC00000 if np.isnan(v) else int(np.float32(v).view(np.uint32))


to_f32 = fg.jit(lambda a: a.astype(fnp.float32))


# -- names, finfo, hierarchy, printing -----------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_names_finfo_and_hierarchy(name):
    dt = np.dtype(getattr(ml_dtypes, name))
    assert np.dtype(getattr(fnp, name)) == dt == getattr(dtypes, name)
    assert fnp.issubdtype(getattr(fnp, name), fnp.floating)
    assert fnp.issubdtype(dt, fnp.inexact) and not fnp.issubdtype(dt, fnp.integer)
    assert fnp.finfo(dt).max == ml_dtypes.finfo(dt).max
    assert dtypes.kind(dt) == "f" and dtypes.is_float8(dt) and dtypes.is_inexact(dt)


def test_finfo_values_as_jax():
    # jnp.finfo(...) in JAX 0.10.2
    assert float(fnp.finfo(fnp.float8_e4m3fn).max) == 448.0
    assert float(fnp.finfo(fnp.float8_e4m3fn).eps) == 0.125
    assert float(fnp.finfo(fnp.float8_e4m3fn).smallest_subnormal) == 2.0**-9
    assert float(fnp.finfo(fnp.float8_e5m2).max) == 57344.0
    assert float(fnp.finfo(fnp.float8_e5m2).eps) == 0.25
    assert float(fnp.finfo(fnp.float8_e5m2).tiny) == 2.0**-14
    assert float(fnp.finfo(fnp.float8_e4m3fnuz).max) == 240.0
    assert float(fnp.finfo(fnp.float8_e8m0fnu).max) == 2.0**127


def test_printing_and_jaxpr_names():
    assert repr(fnp.arange(3, dtype=fnp.float8_e4m3fn)) == "Array([0, 1, 2], dtype=float8_e4m3fn)"
    assert repr(fnp.float8_e4m3fn(1.5)) == "Array(1.5, dtype=float8_e4m3fn)"
    s = fnp.asarray(1.5, fnp.float8_e5m2)
    assert repr(s * s) == "Array(2, dtype=float8_e5m2)"  # 2.25 rounds to 2
    for name in NAMES:  # JAX's jaxpr: { lambda ; a:f8_e4m3fn[2]. let b:f8_e4m3fn[2] = mul a 2.0...
        short = "f8_" + name.removeprefix("float8_")
        text = str(fg.make_jaxpr(lambda a: a * 2)(fnp.zeros(2, getattr(fnp, name))))
        assert f"a:{short}[2]" in text and f"2.0:{short}[]" in text


# -- promotion (JAX 0.10.2's jnp.promote_types) --------------------------------------------------


@pytest.mark.parametrize("dt", F8)
def test_promotion_float8_is_a_leaf(dt):
    for other in ["bool", "int8", "uint8", "int16", "int32", "uint32"]:
        assert fnp.promote_types(dt, other) == dt
        assert fnp.promote_types(other, dt) == dt
    assert fnp.promote_types(dt, dt) == dt
    for other in [*(d for d in F8 if d != dt), "float16", "float32", "complex64", "bfloat16"]:
        with pytest.raises(dtypes.TypePromotionError, match="8-bit floats do not support"):
            fnp.promote_types(dt, other)


def test_promotion_with_arrays_and_python_scalars():
    x = fnp.zeros(3, fnp.float8_e4m3fn)
    for s in (1, 1.0, True):  # JAX: float8_e4m3fn, weak_type False
        r = x + s
        assert r.dtype == E4M3FN and not r.aval.weak_type
    assert (x + fnp.ones(3, fnp.int32)).dtype == E4M3FN
    with pytest.raises(dtypes.TypePromotionError) as e:
        x + 1j
    assert "<class 'complex'>" in str(e.value) and "float8_e4m3fn" in str(e.value)
    with pytest.raises(dtypes.TypePromotionError, match=r"x.astype\('float32'\)"):
        x + fnp.zeros(3, fnp.float32)
    with pytest.raises(dtypes.TypePromotionError):
        x + fnp.zeros(3, fnp.float8_e5m2)
    # explicit conversions are the way between them (JAX's [53 191 65] for 0.3, -1.7, 2.5)
    y = fnp.asarray(np.float32([0.3, -1.7, 2.5])).astype(fnp.float8_e4m3fn)
    assert bits(y.astype(fnp.float8_e5m2)) == [53, 191, 65]
    assert bits(fg.jit(lambda a: a.astype(fnp.float8_e5m2))(y)) == [53, 191, 65]
    b = np.asarray(y.astype(fnp.bfloat16)).view(np.uint16).tolist()
    assert b == [16032, 49120, 16416]
    bf = fnp.asarray([1.0, 2.0, 3.0], fnp.bfloat16)
    assert bits(bf.astype(fnp.float8_e4m3fn)) == [56, 64, 68]
    assert bits(fg.jit(lambda a: a.astype(fnp.float8_e4m3fn))(bf)) == [56, 64, 68]


# -- conversions ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dt", F8, ids=NAMES)
def test_all_256_patterns_to_float32_and_back(dt):
    pats = np.arange(256, dtype=np.uint8).view(dt)
    want = [xla_f32(dt, p) for p in range(256)]
    eager = np.asarray(fnp.asarray(pats).astype(fnp.float32)).view(np.uint32).tolist()
    jitted = np.asarray(to_f32(pats)).view(np.uint32).tolist()
    assert eager == want and jitted == want
    # and back: every pattern but the NaNs' (and 0x80 -> 0 in e8m0fnu's... none) round-trips
    f32 = np.asarray(want, np.uint32).view(np.float32)
    with np.errstate(all="ignore"):
        ref = bits(f32.astype(dt))
    assert bits(fnp.asarray(f32).astype(dt)) == ref
    assert bits(fg.jit(lambda a: a.astype(dt))(f32)) == ref
    nan = np.isnan(f32)
    assert np.array_equal(np.asarray(ref)[~nan], np.arange(256)[~nan])


EDGES = np.float32(
    [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e30, -1e30, 1e-45, -1e-45, 1.5, 0.75, 3.0]
    + [448, 464, 465, 480, -480, 240, 248, 57344, 61440, 61441, 65536, 15.5, 16.0]
    + [2.0**-9, 2.0**-10, 3 * 2.0**-11, 2.0**-16, 2.0**-17, 1.5 * 2.0**-17, 2.0**-127, 2.0**-128]
)


def _check_rounding(x: np.ndarray, dt) -> None:
    with np.errstate(all="ignore"):
        want = bits(x.astype(dt))
    assert bits(fnp.asarray(x).astype(dt)) == want
    assert bits(fg.jit(lambda a: a.astype(dt))(x)) == want


@pytest.mark.parametrize("dt", F8, ids=NAMES)
def test_float32_to_float8_rounding_edges_and_many_values(dt):
    fmax = float(ml_dtypes.finfo(dt).max)
    tiny = float(ml_dtypes.finfo(dt).smallest_subnormal)
    ulp_ties = [fmax, fmax * (1 + 2.0**-5), fmax * 1.0625, tiny / 2, tiny * 1.5, tiny * 2.5]
    _check_rounding(np.concatenate([EDGES, np.float32(ulp_ties), -np.float32(ulp_ties)]), dt)
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    scaled = (rng.standard_normal(20000) * rng.choice([1e-6, 1e-3, 1, 100, 1e4], 20000)).astype(
        np.float32
    )
    _check_rounding(np.concatenate([raw, scaled]), dt)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=1, max_size=40),
    st.sampled_from(F8),
)
def test_float32_to_float8_matches_ml_dtypes(values, dt):
    _check_rounding(np.asarray(values, np.float32), dt)


def test_bitcast_both_ways():
    x = fnp.asarray(np.float32([0.3, -1.7, 2.5])).astype(fnp.float8_e4m3fn)
    u = lax.bitcast_convert_type(x, fnp.uint8)
    assert u.tolist() == [42, 190, 66]  # JAX 0.10.2
    back = fg.jit(lambda a: lax.bitcast_convert_type(a, fnp.float8_e4m3fn))(u)
    assert back.dtype == E4M3FN and bits(back) == [42, 190, 66]


# -- arithmetic against JAX 0.10.2 ---------------------------------------------------------------

XS = [0.3, -1.7, 2.5, 0.01, -0.0, 3.75, 7.0, -0.4]
YS = [1.1, 0.6, -2.0, 5.0, 0.25, -3.0, 0.07, 9.5]

OPS = {
    "add": lambda x, y: x + y,
    "mul": lambda x, y: x * y,
    "div": lambda x, y: x / y,
    "exp": lambda x, y: fnp.exp(x),
    "tanh": lambda x, y: fnp.tanh(x),
    "sigmoid": lambda x, y: fg.nn.sigmoid(x),
    "pow3": lambda x, y: x**3,
    "sqrt_abs": lambda x, y: fnp.sqrt(fnp.abs(x)),
    "matmul": lambda x, y: x.reshape(2, 4) @ y.reshape(4, 2),
    "max": lambda x, y: fnp.maximum(x, y),
    "scal": lambda x, y: x * 2.5 + 1,
    "to_i32": lambda x, y: (x * y).astype(fnp.int32),
    "sum": lambda x, y: fnp.sum(x * y),
}

# JAX 0.10.2 on the CPU: (result dtype, bit patterns: uint8 for float8, uint32 for int32), the
# same eagerly and under jax.jit; inputs are XS and YS converted from float32
JAX_RESULTS = {
    "float8_e4m3fn/add": ("float8_e4m3fn", [60, 185, 48, 74, 40, 52, 78, 82]),
    "float8_e4m3fn/mul": ("float8_e4m3fn", [43, 185, 202, 20, 128, 211, 48, 200]),
    "float8_e4m3fn/div": ("float8_e4m3fn", [41, 195, 186, 1, 128, 186, 108, 146]),
    "float8_e4m3fn/exp": ("float8_e4m3fn", [59, 35, 84, 56, 56, 99, 127, 51]),
    "float8_e4m3fn/tanh": ("float8_e4m3fn", [42, 183, 56, 5, 128, 56, 56, 172]),
    "float8_e4m3fn/sigmoid": ("float8_e4m3fn", [49, 33, 54, 48, 48, 56, 56, 45]),
    "float8_e4m3fn/pow3": ("float8_e4m3fn", [15, 202, 87, 0, 128, 101, 122, 153]),
    "float8_e4m3fn/sqrt_abs": ("float8_e4m3fn", [49, 59, 61, 29, 0, 63, 67, 50]),
    "float8_e4m3fn/matmul": ("float8_e4m3fn", [[73, 216], [204, 205]]),
    "float8_e4m3fn/max": ("float8_e4m3fn", [57, 50, 66, 74, 40, 71, 78, 82]),
    "float8_e4m3fn/scal": ("float8_e4m3fn", [62, 198, 78, 56, 56, 82, 90, 0]),
    "float8_e4m3fn/to_i32": ("int32", [0, 4294967295, 4294967291, 0, 0, 4294967285, 0, 4294967292]),
    "float8_e4m3fn/sum": ("float8_e4m3fn", [218]),
    "float8_e5m2/add": ("float8_e5m2", [61, 188, 56, 69, 52, 60, 71, 73]),
    "float8_e5m2/mul": ("float8_e5m2", [53, 188, 197, 42, 128, 202, 55, 196]),
    "float8_e5m2/div": ("float8_e5m2", [53, 194, 189, 24, 128, 189, 87, 169]),
    "float8_e5m2/exp": ("float8_e5m2", [61, 50, 74, 60, 60, 83, 100, 58]),
    "float8_e5m2/tanh": ("float8_e5m2", [53, 188, 60, 33, 128, 60, 60, 182]),
    "float8_e5m2/sigmoid": ("float8_e5m2", [57, 49, 60, 56, 56, 60, 60, 54]),
    "float8_e5m2/pow3": ("float8_e5m2", [40, 197, 76, 0, 128, 84, 93, 170]),
    "float8_e5m2/sqrt_abs": ("float8_e5m2", [56, 61, 62, 46, 0, 64, 65, 57]),
    "float8_e5m2/matmul": ("float8_e5m2", [[68, 204], [198, 197]]),
    "float8_e5m2/max": ("float8_e5m2", [60, 57, 65, 69, 52, 68, 71, 73]),
    "float8_e5m2/scal": ("float8_e5m2", [63, 194, 71, 60, 60, 74, 76, 0]),
    "float8_e5m2/to_i32": ("int32", [0, 4294967295, 4294967291, 0, 0, 4294967284, 0, 4294967292]),
    "float8_e5m2/sum": ("float8_e5m2", [205]),
    "float8_e4m3fnuz/add": ("float8_e4m3fnuz", [68, 193, 56, 82, 48, 60, 86, 90]),
    "float8_e4m3fnuz/mul": ("float8_e4m3fnuz", [51, 193, 210, 28, 0, 219, 56, 208]),
    "float8_e4m3fnuz/div": ("float8_e4m3fnuz", [49, 203, 194, 2, 0, 194, 116, 154]),
    "float8_e4m3fnuz/exp": ("float8_e4m3fnuz", [67, 43, 92, 64, 64, 107, 128, 59]),
    "float8_e4m3fnuz/tanh": ("float8_e4m3fnuz", [50, 191, 64, 10, 0, 64, 64, 180]),
    "float8_e4m3fnuz/sigmoid": ("float8_e4m3fnuz", [57, 41, 62, 56, 56, 64, 64, 53]),
    "float8_e4m3fnuz/pow3": ("float8_e4m3fnuz", [23, 210, 95, 0, 0, 109, 128, 161]),
    "float8_e4m3fnuz/sqrt_abs": ("float8_e4m3fnuz", [57, 67, 69, 37, 0, 71, 75, 58]),
    "float8_e4m3fnuz/matmul": ("float8_e4m3fnuz", [[81, 224], [212, 213]]),
    "float8_e4m3fnuz/max": ("float8_e4m3fnuz", [65, 58, 74, 82, 48, 79, 86, 90]),
    "float8_e4m3fnuz/scal": ("float8_e4m3fnuz", [70, 206, 86, 64, 64, 90, 98, 0]),
    "float8_e4m3fnuz/to_i32": (
        "int32",
        [0, 4294967295, 4294967291, 0, 0, 4294967285, 0, 4294967292],
    ),
    "float8_e4m3fnuz/sum": ("float8_e4m3fnuz", [226]),
    "float8_e5m2fnuz/add": ("float8_e5m2fnuz", [65, 192, 60, 73, 56, 64, 75, 77]),
    "float8_e5m2fnuz/mul": ("float8_e5m2fnuz", [57, 192, 201, 46, 0, 206, 59, 200]),
    "float8_e5m2fnuz/div": ("float8_e5m2fnuz", [57, 198, 193, 28, 0, 193, 91, 173]),
    "float8_e5m2fnuz/exp": ("float8_e5m2fnuz", [65, 54, 78, 64, 64, 87, 104, 62]),
    "float8_e5m2fnuz/tanh": ("float8_e5m2fnuz", [57, 192, 64, 37, 0, 64, 64, 186]),
    "float8_e5m2fnuz/sigmoid": ("float8_e5m2fnuz", [61, 53, 64, 60, 60, 64, 64, 58]),
    "float8_e5m2fnuz/pow3": ("float8_e5m2fnuz", [44, 201, 80, 0, 0, 88, 97, 174]),
    "float8_e5m2fnuz/sqrt_abs": ("float8_e5m2fnuz", [60, 65, 66, 50, 0, 68, 69, 61]),
    "float8_e5m2fnuz/matmul": ("float8_e5m2fnuz", [[72, 208], [202, 201]]),
    "float8_e5m2fnuz/max": ("float8_e5m2fnuz", [64, 61, 69, 73, 56, 72, 75, 77]),
    "float8_e5m2fnuz/scal": ("float8_e5m2fnuz", [67, 198, 75, 64, 64, 78, 80, 0]),
    "float8_e5m2fnuz/to_i32": (
        "int32",
        [0, 4294967295, 4294967291, 0, 0, 4294967284, 0, 4294967292],
    ),
    "float8_e5m2fnuz/sum": ("float8_e5m2fnuz", [209]),
    "float8_e4m3/add": ("float8_e4m3", [60, 185, 48, 74, 40, 52, 78, 82]),
    "float8_e4m3/mul": ("float8_e4m3", [43, 185, 202, 20, 128, 211, 48, 200]),
    "float8_e4m3/div": ("float8_e4m3", [41, 195, 186, 1, 128, 186, 108, 146]),
    "float8_e4m3/exp": ("float8_e4m3", [59, 35, 84, 56, 56, 99, 120, 51]),
    "float8_e4m3/tanh": ("float8_e4m3", [42, 183, 56, 5, 128, 56, 56, 172]),
    "float8_e4m3/sigmoid": ("float8_e4m3", [49, 33, 54, 48, 48, 56, 56, 45]),
    "float8_e4m3/pow3": ("float8_e4m3", [15, 202, 87, 0, 128, 101, 120, 153]),
    "float8_e4m3/sqrt_abs": ("float8_e4m3", [49, 59, 61, 29, 0, 63, 67, 50]),
    "float8_e4m3/matmul": ("float8_e4m3", [[73, 216], [204, 205]]),
    "float8_e4m3/max": ("float8_e4m3", [57, 50, 66, 74, 40, 71, 78, 82]),
    "float8_e4m3/scal": ("float8_e4m3", [62, 198, 78, 56, 56, 82, 90, 0]),
    "float8_e4m3/to_i32": ("int32", [0, 4294967295, 4294967291, 0, 0, 4294967285, 0, 4294967292]),
    "float8_e4m3/sum": ("float8_e4m3", [218]),
    "float8_e8m0fnu/add": ("float8_e8m0fnu", [127, 255, 255, 129, 255, 255, 130, 255]),
    "float8_e8m0fnu/mul": ("float8_e8m0fnu", [125, 255, 255, 122, 255, 255, 126, 255]),
    "float8_e8m0fnu/div": ("float8_e8m0fnu", [125, 255, 255, 118, 255, 255, 134, 255]),
    "float8_e8m0fnu/exp": ("float8_e8m0fnu", [127, 255, 130, 127, 255, 133, 138, 255]),
    "float8_e8m0fnu/tanh": ("float8_e8m0fnu", [125, 255, 127, 120, 255, 127, 127, 255]),
    "float8_e8m0fnu/sigmoid": ("float8_e8m0fnu", [255, 255, 255, 255, 255, 255, 255, 255]),
    "float8_e8m0fnu/pow3": ("float8_e8m0fnu", [121, 255, 130, 106, 255, 133, 136, 255]),
    "float8_e8m0fnu/sqrt_abs": ("float8_e8m0fnu", [126, 255, 127, 123, 255, 128, 128, 255]),
    "float8_e8m0fnu/matmul": ("float8_e8m0fnu", [[255, 255], [255, 255]]),
    "float8_e8m0fnu/max": ("float8_e8m0fnu", [127, 255, 255, 129, 255, 255, 130, 255]),
    "float8_e8m0fnu/scal": ("float8_e8m0fnu", [128, 255, 129, 127, 255, 130, 131, 255]),
    "float8_e8m0fnu/to_i32": ("int32", [0, 0, 0, 0, 0, 0, 0, 0]),
    "float8_e8m0fnu/sum": ("float8_e8m0fnu", [255]),
}


@pytest.mark.parametrize("key", sorted(JAX_RESULTS))
def test_matches_jax_bit_for_bit(key):
    name, op = key.split("/")
    dt_name, want = JAX_RESULTS[key]
    x = fnp.asarray(np.float32(XS)).astype(getattr(fnp, name))
    y = fnp.asarray(np.float32(YS)).astype(getattr(fnp, name))
    fn = OPS[op]
    for got in (fn(x, y), fg.jit(fn)(x, y)):
        got = np.ascontiguousarray(np.asarray(got))
        assert str(got.dtype) == dt_name
        flat = got.view(np.uint8 if got.dtype.itemsize == 1 else np.uint32).ravel().tolist()
        assert flat == np.ravel(want).tolist()


def _ref(fn, dt, *xs):
    """``fn`` in float32 on float8 inputs, rounded as XLA's CPU: to float16, then to ``dt``."""
    with np.errstate(all="ignore"):
        out = np.asarray(fn(*(np.asarray(x, dt).astype(np.float32) for x in xs)), np.float32)
        return out.astype(np.float16).astype(dt)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(-500, 500, width=32), min_size=1, max_size=16),
    st.sampled_from([E4M3FN, E5M2]),
    st.sampled_from(["add", "mul", "sub", "div", "sqrt"]),
)
def test_elementwise_matches_the_reference(values, dt, op):
    a = np.asarray(values, np.float32).astype(dt)
    b = a[::-1].copy()
    fns = {
        "add": lambda p, q: p + q,
        "mul": lambda p, q: p * q,
        "sub": lambda p, q: p - q,
        "div": lambda p, q: p / q,
        "sqrt": lambda p, q: (
            np.sqrt(np.abs(p)) if isinstance(p, np.ndarray) else fnp.sqrt(fnp.abs(p))
        ),
    }
    fn = fns[op]
    want = _ref(fn, dt, a, b)
    nan = np.isnan(want.astype(np.float32))
    for got in (fn(fnp.asarray(a), fnp.asarray(b)), fg.jit(fn)(a, b)):
        got = np.asarray(got)
        assert got.dtype == dt
        assert np.array_equal(np.isnan(got.astype(np.float32)), nan)
        assert bits(got[~nan]) == bits(want[~nan])


def test_zero_d_size_zero_and_broadcasting():
    e = fnp.zeros(0, fnp.float8_e4m3fn)
    assert (e * 2).shape == (0,) and fg.jit(lambda a: a * 2)(e).shape == (0,)
    assert float(fnp.sum(e)) == 0.0
    s = fnp.asarray(1.5, fnp.float8_e4m3fn)
    assert s.shape == () and bits(s * s) == bits(np.float32(2.25).astype(E4M3FN))
    assert bits(fg.jit(lambda a: a * a)(s)) == bits(np.float32(2.25).astype(E4M3FN))
    m = fnp.ones((2, 3), fnp.float8_e5m2) + fnp.asarray([1.0, 2.0, 3.0], fnp.float8_e5m2)
    assert m.shape == (2, 3) and m.dtype == E5M2 and m.astype(fnp.float32).tolist()[1] == [2, 3, 4]
    # overflow and NaN under arithmetic: e4m3fn has no inf (overflow is NaN), e5m2 has
    big = fnp.asarray([300.0], fnp.float8_e4m3fn)
    assert bits(big * 2) == [0x7F] and bits(fg.jit(lambda a: a * 2)(big)) == [0x7F]
    big5 = fnp.asarray([40000.0], fnp.float8_e5m2)
    assert bits(big5 * 2) == [0x7C] and bits(fg.jit(lambda a: a * 2)(big5)) == [0x7C]


def test_grad_through_float8():
    x = fnp.asarray(np.float32([0.3, -1.7, 2.5])).astype(fnp.float8_e4m3fn)

    def f(a):
        return (a * a).astype(fnp.float32).sum()

    assert bits(fg.grad(f)(x)) == [50, 198, 74]  # JAX 0.10.2
    assert bits(fg.jit(fg.grad(f))(x)) == [50, 198, 74]


def test_gpu_refuses_float8_with_the_fix():
    from fungrad.lowering.gpu.executable import check_dtypes

    closed = fg.make_jaxpr(lambda a: a * 2)(fnp.ones(3, fnp.float8_e4m3fn))
    with pytest.raises(TypeError, match=r"float8_e4m3fn values.*astype\(float32\)"):
        check_dtypes(closed, "f")
