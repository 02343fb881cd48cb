"""Issue 15: programs nobody here wrote, where fungrad disagreed with JAX's documented
semantics. Each test names the behaviour and checks it against an independent reference
(float64 products, a Python loop, finite differences, JAX's documented promotion table)."""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax

SPECIALS = [-3.25, -0.0, 0.0, 1.5, np.inf, -np.inf, np.nan]


def _same_floats(got, ref):
    """Equal values, NaN where NaN, and the same sign on zeros."""
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.shape == ref.shape and got.dtype == ref.dtype, (got, ref)
    np.testing.assert_array_equal(got, ref)
    zeros = ref == 0
    assert (np.signbit(got[zeros]) == np.signbit(ref[zeros])).all(), (got, ref)


# -- item 5: eager contractions keep IEEE specials ------------------------------------------------


def _contraction_reference(a, b):
    """(m, k) x (k, n) in float64, one Python product per term: a single term is that product
    (its sign kept, as XLA's), longer sums start at +0."""
    m, k = a.shape
    n = b.shape[1]
    out = np.zeros((m, n))
    for i, j in itertools.product(range(m), range(n)):
        terms = [float(a[i, t]) * float(b[t, j]) for t in range(k)]
        out[i, j] = terms[0] if k == 1 else sum(terms, 0.0)
    return out.astype(np.float32)


@given(
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(1, 3),
    st.sampled_from(["float32", "bool", "int32"]),
    st.integers(0, 2**16),
)
def test_issue15_dot_keeps_ieee_specials(m, k, n, rhs_dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.choice(np.array(SPECIALS, np.float32), (m, k))
    if rhs_dtype == "float32":
        b = rng.choice(np.array([0.0, -0.0, 1.0, -2.0, np.inf, np.nan], np.float32), (k, n))
    else:
        b = rng.choice(np.array([0, 1, -2]), (k, n)).astype(rhs_dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        ref = _contraction_reference(a, b.astype(np.float32))
    _same_floats(fnp.matmul(a, b), ref)
    _same_floats(fnp.einsum("ik,kj->ij", a, b), ref)
    _same_floats(fg.jit(fnp.matmul)(a, b), ref)
    # the same products with the contraction moved around, batched, and as an outer product
    _same_floats(lax.dot_general(b, a, (((0,), (1,)), ((), ()))), ref.T)
    _same_floats(fnp.matmul(a[None], b[None])[0], ref)
    if k == 1:
        _same_floats(fnp.outer(a[:, 0], b[0]), ref)
        _same_floats(fnp.tensordot(a[:, 0], b[0], 0), ref)


def test_issue15_einsum_with_bool_size_one_operand():
    a = np.array([-3.38, 3.10, -np.inf, -1.06], np.float32)
    ref = np.array([-0.0, 0.0, np.nan, -0.0], np.float32)
    with np.errstate(invalid="ignore"):
        for f in (lambda a, b: fnp.einsum("a,b->a", a, b), fnp.multiply):
            _same_floats(f(a, np.array([False])), ref)
            _same_floats(fg.jit(f)(a, np.array([False])), ref)


# -- item 6: out-of-bounds gathers differentiate as in JAX ----------------------------------------

INT_MAX = np.iinfo(np.int32).max


def _kept_grad(idx, n, clip=False, wrap=True):
    """JAX's gradient of ``sum(v[idx])`` for ``v`` of size ``n``: one per read, at the position
    read after negative indices wrap once (unless ``wrap`` is False: numpy's take clips them);
    reads still out of bounds are dropped, or, under ``clip``, go to the clamped position."""
    idx = np.asarray(idx, np.int64)
    idx = np.where(idx < 0, idx + n, idx) if wrap else idx
    if clip:
        idx = np.clip(idx, 0, n - 1)
    g = np.zeros(n, np.float32)
    np.add.at(g, idx[(idx >= 0) & (idx < n)], 1.0)
    return g


@given(
    st.integers(1, 4),
    st.lists(st.sampled_from([-6, -2, -1, 0, 1, 3, 5, INT_MAX]), min_size=1, max_size=5),
)
def test_issue15_out_of_bounds_gather_gradients_follow_jax(n, idx):
    v = np.arange(1.0, n + 1, dtype=np.float32)
    idx = np.asarray(idx, np.int32)
    drop, clip = _kept_grad(idx, n), _kept_grad(idx, n, clip=True)
    cases = [
        (lambda v: fnp.sum(v[idx]), drop),  # promise_in_bounds
        (lambda v: fnp.sum(v.at[idx].get()), drop),
        (lambda v: fnp.sum(v.at[idx].get(mode="clip")), clip),
        (lambda v: fnp.sum(v.at[idx].get(mode="fill", fill_value=0.0)), drop),
        (lambda v: fnp.sum(fnp.take(v, idx, fill_value=0.0)), drop),  # take fills by default
        (lambda v: fnp.sum(fnp.take(v, idx, mode="clip")), _kept_grad(idx, n, True, False)),
        (lambda v: fnp.sum(fnp.take_along_axis(v, idx, axis=0, fill_value=0.0)), drop),
    ]
    for f, want in cases:
        np.testing.assert_array_equal(np.asarray(fg.grad(f)(v)), want)
        np.testing.assert_array_equal(np.asarray(fg.jit(fg.grad(f))(v)), want)


def test_issue15_issue_example_and_clamped_windows():
    v = fnp.ones(1)
    idx = np.array([-1, 2, INT_MAX, INT_MAX], np.int32)
    assert float(fg.grad(lambda v: fnp.sum(v[idx]))(v)[0]) == 1.0  # JAX: 1.0 (was 4.0)
    np.testing.assert_array_equal(np.asarray(v[idx]), [1.0] * 4)  # the forward clamps
    # dynamic_slice clamps its start, and the gradient follows the clamped window (JAX)
    x = fnp.arange(3.0)
    np.testing.assert_array_equal(
        np.asarray(fg.grad(lambda x: fnp.sum(lax.dynamic_slice(x, (2,), (2,))))(x)), [0, 1, 1]
    )
    np.testing.assert_array_equal(
        np.asarray(fg.grad(lambda x: lax.dynamic_index_in_dim(x, 5, keepdims=False))(x)), [0, 0, 1]
    )


# -- item 8: scalar types make Arrays -------------------------------------------------------------

INT_TYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


@pytest.mark.parametrize("name", INT_TYPES + ["bool_", "float16", "float32", "float64"])
def test_issue15_scalar_types_make_arrays_and_name_dtypes(name, x64):
    t = getattr(fnp, name)
    dtype = np.dtype(name.rstrip("_"))
    v = t(1)
    assert isinstance(v, fg.Array) and v.dtype == dtype and not v.weak_type and v.shape == ()
    assert t([1, 0]).dtype == dtype and t([1, 0]).shape == (2,)
    # still a dtype everywhere numpy and fungrad take one
    assert np.dtype(t) == dtype and t == dtype.type and hash(t) == hash(dtype.type)
    assert fnp.zeros(3, t).dtype == dtype and fnp.ones(2).astype(t).dtype == dtype
    assert fnp.issubdtype(t, fnp.integer) == (dtype.kind in "iu")
    assert fnp.issubdtype(t, fnp.floating) == (dtype.kind == "f")
    assert fnp.result_type(t) == dtype and isinstance(dtype.type(1), t)
    assert fg.jit(lambda x: t(x) + t(1))(2).dtype == dtype


def test_issue15_scalar_type_aliases_are_jnps():
    assert fnp.bool is fnp.bool_ and fnp.single is fnp.float32 and fnp.double is fnp.float64
    assert fnp.int_ is fnp.int64 and fnp.uint is fnp.uint64 and fnp.float_ is fnp.float64
    assert fnp.int_(3).dtype == np.int32 and fnp.double(2).dtype == np.float32  # canonical


def _floor_div_reference(a: int, b: int, dtype) -> tuple[int, int]:
    """jnp's ``a // b`` and ``a % b`` in Python integers: XLA's truncated quotient (x / 0 is
    -1, all ones when unsigned; MIN / -1 wraps) corrected toward -inf where the signs differ
    and the truncated remainder (x rem 0 is x) is nonzero; ``%`` divides by 1 where b is 0."""
    info = np.iinfo(dtype)
    wrap = info.max - info.min + 1

    def trunc_div(a, b):
        return -1 if b == 0 else abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)

    def sign(v):
        return (v > 0) - (v < 0)

    q = trunc_div(a, b)
    rem = a if b == 0 else a - q * b
    if info.min < 0 and sign(a) != sign(b) and rem != 0:
        q -= 1
    d = b if b != 0 else 1
    r = a - trunc_div(a, d) * d
    if r != 0 and (r < 0) != (d < 0):
        r += d
    return (q - info.min) % wrap + info.min, (r - info.min) % wrap + info.min


@pytest.mark.parametrize("name", INT_TYPES)
def test_issue15_integer_division_by_zero_is_xla_and_never_warns(name, x64):
    # conftest turns RuntimeWarnings into errors: a numpy scalar division would fail here
    t, dtype = getattr(fnp, name), np.dtype(name)
    info = np.iinfo(dtype)
    pairs = [(7, 0), (0, 0), (info.max, 0), (info.min, 0), (7, 3), (info.max, 2)]
    if info.min < 0:
        pairs += [(-7, 0), (info.min, -1), (-7, 2), (7, -2)]
    a = np.array([p[0] for p in pairs], dtype)
    b = np.array([p[1] for p in pairs], dtype)
    want = [_floor_div_reference(int(x), int(y), dtype) for x, y in pairs]
    for f in (lambda a, b: (a // b, a % b), fg.jit(lambda a, b: (a // b, a % b))):
        q, r = f(fnp.asarray(a), fnp.asarray(b))
        assert q.dtype == r.dtype == dtype
        assert list(zip(np.asarray(q).tolist(), np.asarray(r).tolist())) == want
    assert (t(7) // t(0)).tolist() == want[0][0] and (t(7) % t(0)).tolist() == 0
    # XLA's truncated division: x / 0 is -1 (all ones unsigned), x rem 0 is x; jnp's fmod
    # divides by 1 where the divisor is 0
    wrap = info.max - info.min + 1
    trunc = [
        ((-1 if y == 0 else abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)) - info.min) % wrap
        + info.min
        for x, y in pairs
    ]
    rem = [
        x
        if y == 0
        else (x - (abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)) * y - info.min) % wrap
        + info.min
        for x, y in pairs
    ]
    fmod = [0 if y == 0 else r for r, (_, y) in zip(rem, pairs)]
    for f in (
        lambda a, b: (lax.div(a, b), lax.rem(a, b), fnp.fmod(a, b)),
        fg.jit(lambda a, b: (lax.div(a, b), lax.rem(a, b), fnp.fmod(a, b))),
    ):
        got = [np.asarray(v).tolist() for v in f(fnp.asarray(a), fnp.asarray(b))]
        assert got == [trunc, rem, fmod]


# -- item 12: refused valid programs --------------------------------------------------------------


def _count_to_3(body):
    return lambda x: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, *body(c[1:])), (0, *x))


@pytest.mark.parametrize(
    "case",
    [
        "passthrough",
        "beside_a_constant_carry",
        "zero_tangent_term",
        "read_by_primal_carry",
        "nested",
        "dynamic_fori",
    ],
)
def test_issue15_grad_of_while_with_loop_invariant_carry(case, x64):
    # The differentiated carry leaves the loop unchanged, so the gradient is the gradient of
    # the expression around the loop (JAX gives these; a while has no reverse pass otherwise).
    def body(case):
        return {
            "passthrough": lambda c: (c[0],),
            "beside_a_constant_carry": lambda c: (c[0], c[1] * 2.0),
            "zero_tangent_term": lambda c: (c[0] + 0.0 * c[1], c[1]),  # c[1]: an integer
            "read_by_primal_carry": lambda c: (c[0], c[1] + fnp.sum(c[0])),
        }[case]

    x = np.array([0.5, -1.5, 2.0])
    if case == "nested":

        def loop(x):
            inner = _count_to_3(lambda c: (c[0],))
            return lax.while_loop(
                lambda c: c[0] < 2, lambda c: (c[0] + 1, inner((c[1],))[1]), (0, x)
            )[1]
    elif case == "dynamic_fori":

        def loop(x):
            return lax.fori_loop(0, fnp.asarray(3), lambda i, c: (c[0], c[1] + 1.0), (x, 0.0))[0]
    else:
        init = {
            "beside_a_constant_carry": (1.0,),
            "zero_tangent_term": (np.int64(4),),
            "read_by_primal_carry": (0.0,),
        }.get(case, ())
        inner = _count_to_3(body(case))

        def loop(x):
            return inner((x, *init))[1]

    def f(x):
        return fnp.sum(fnp.sin(loop(x)) * x)

    want = np.sin(x) + x * np.cos(x)  # d/dx sum(sin(x) * x), x unchanged by the loop
    np.testing.assert_allclose(np.asarray(fg.grad(f)(x)), want, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(fg.jit(fg.grad(f))(x)), want, rtol=1e-12)
    _, pullback = fg.vjp(loop, x)
    np.testing.assert_allclose(np.asarray(pullback(np.ones(3))[0]), np.ones(3))
    np.testing.assert_allclose(
        np.asarray(fg.vmap(fg.grad(f))(np.stack([x, 2 * x]))),
        np.stack([want, np.sin(2 * x) + 2 * x * np.cos(2 * x)]),
        rtol=1e-12,
    )


def test_issue15_grad_of_while_still_refuses_a_carried_tangent(x64):
    f = _count_to_3(lambda c: (c[0] * 2.0,))
    with pytest.raises(
        TypeError, match="Reverse-mode differentiation does not work for lax.while_loop"
    ):
        fg.grad(lambda x: f((x,))[1])(1.0)
    np.testing.assert_allclose(float(fg.jvp(lambda x: f((x,))[1], (1.0,), (1.0,))[1]), 8.0)


@pytest.mark.parametrize(
    "fn", ["median", "nanmedian", "quantile", "nanquantile", "percentile", "nanpercentile"]
)
def test_issue15_quantiles_of_0d_keepdims_are_1d(fn):
    # jnp (and numpy's 1-d view of a 0-d input): keepdims keeps one axis of length 1
    f = getattr(fnp, fn)
    q = [] if "median" in fn else [50.0 if "percent" in fn else 0.5]
    qv = [] if "median" in fn else [np.array([25.0, 50.0] if "percent" in fn else [0.25, 0.5])]
    x = fnp.asarray(2.5)
    for g in (f, fg.jit(f, static_argnames="keepdims")):
        out = g(x, *q, keepdims=True)
        assert out.shape == (1,) and out.dtype == np.float32 and float(out[0]) == 2.5
        assert g(x, *q, keepdims=False).shape == ()
    if qv:
        assert f(x, *qv, keepdims=True).shape == (2, 1)
    assert f(fnp.ones((2, 3)), *q, keepdims=True).shape == (1, 1)


def test_issue15_empty_gathers_give_empty_or_zero_results():
    # an empty result needs no gather (zeros((0, 0))[[1]] has shape (1, 0), as in JAX)
    for f in (lambda x: x[np.array([1])], fg.jit(lambda x: x[np.array([1])])):
        out = f(fnp.zeros((0, 0), fnp.int32))
        assert out.shape == (1, 0) and out.dtype == np.int32
    assert fnp.zeros((2, 0)).at[np.array([1, 5])].get().shape == (2, 0)
    # take_along_axis from an empty axis: every index is out of bounds; jnp gives zeros
    idx = np.zeros((2, 3), np.int32)
    for f in (
        lambda x: fnp.take_along_axis(x, idx, axis=1),
        fg.jit(lambda x: fnp.take_along_axis(x, idx, axis=1)),
    ):
        np.testing.assert_array_equal(np.asarray(f(fnp.zeros((2, 0)))), np.zeros((2, 3)))
    g = fg.grad(lambda x: fnp.sum(fnp.take_along_axis(x, idx, axis=1)))(fnp.zeros((2, 0)))
    assert g.shape == (2, 0)
    # a non-empty take from an empty axis is still an error (as in JAX)
    with pytest.raises(IndexError, match="empty axis"):
        fnp.take(fnp.zeros((0,)), np.array([0, 1]))


# -- item 7: dtypes of every function on bool and integer inputs follow JAX ------------------------

# Result dtypes (``*``: weakly typed) JAX 0.10.2 gives for these calls on bool/int8/uint8/int32/
# float16/float32 arrays, with x64 off / on ("-": JAX refuses the input). They follow from JAX's
# documented promotion: the lattice (a Python scalar is weak, bool < weak int < int8/uint8 <
# ... < weak float < float16 < float32), jnp's to_numeric_dtype (bool -> int32, also with
# x64), to_inexact_dtype (64-bit ints -> float64, other ints and bools -> float32, also with
# x64), and the Python scalars each jax.nn formula mixes in (elu(int) meets 0.0: a weak
# default float; softplus(bool) meets 0: a weak int, then inexact). Generated by running JAX.
JAX_DTYPES = {
    ("numpy.square", "x"): "b:i32/i32 i8:i8/i8 u8:u8/u8 i32:i32/i32 f16:f16/f16 f32:f32/f32",
    ("numpy.rint", "x"): "b:f32/f64 i8:f32/f64 u8:f32/f64 i32:f32/f64 f16:f16/f16 f32:f32/f32",
    ("numpy.right_shift", "x,x"): "b:i32/i32 i8:i8/i8 u8:u8/u8 i32:i32/i32 f16:-/- f32:-/-",
    ("numpy.fmod", "x,x"): "b:i32/i32 i8:i8/i8 u8:u8/u8 i32:i32/i32 f16:f16/f16 f32:f32/f32",
    ("numpy.power", "x,2"): "b:i32/i32 i8:i8/i8 u8:u8/u8 i32:i32/i32 f16:f16/f16 f32:f32/f32",
    ("numpy.power", "x,x"): "b:i32/i32 i8:i8/i8 u8:u8/u8 i32:i32/i32 f16:f16/f16 f32:f32/f32",
    (
        "numpy.heaviside",
        "x,2.0",
    ): "b:f32/f64 i8:f32/f64 u8:f32/f64 i32:f32/f64 f16:f16/f16 f32:f32/f32",
    ("numpy.hypot", "x,2.0"): "b:f32/f64 i8:f32/f64 u8:f32/f64 i32:f32/f64 f16:f16/f16 f32:f32/f32",
    (
        "numpy.logaddexp2",
        "x,2.0",
    ): "b:f32/f64 i8:f32/f64 u8:f32/f64 i32:f32/f64 f16:f16/f16 f32:f32/f32",
    ("numpy.gcd", "x,2"): "b:i32/i64 i8:i8/i8 u8:u8/u8 i32:i32/i32 f16:-/- f32:-/-",
    ("numpy.less", "x,2.0"): "b:b*/b* i8:b*/b* u8:b*/b* i32:b*/b* f16:b/b f32:b/b",
    ("numpy.equal", "x,2"): "b:b*/b* i8:b/b u8:b/b i32:b/b f16:b/b f32:b/b",
    ("numpy.logical_and", "x,2.0"): "b:b/b i8:b/b u8:b/b i32:b/b f16:b/b f32:b/b",
    ("numpy.array_equiv", "x,2.0"): "b:b/b i8:b/b u8:b/b i32:b/b f16:b/b f32:b/b",
    (
        "numpy.cumulative_prod",
        "x",
    ): "b:i32/i64 i8:i8/i8 u8:u8/u8 i32:i32/i32 f16:f16/f16 f32:f32/f32",
    (
        "numpy.cumulative_sum",
        "x",
    ): "b:i32/i64 i8:i32/i64 u8:u32/u64 i32:i32/i64 f16:f16/f16 f32:f32/f32",
    (
        "numpy.argpartition",
        "x,2",
    ): "b:-/- i8:i32/i32 u8:i32/i32 i32:i32/i32 f16:i32/i32 f32:i32/i32",
    (
        "numpy.linspace",
        "x,2",
    ): "b:f32/f64 i8:f32/f32 u8:f32/f32 i32:f32/f32 f16:f16/f16 f32:f32/f32",
    ("numpy.sin", "x"): "b:f32/f32 i8:f32/f32 u8:f32/f32 i32:f32/f32 f16:f16/f16 f32:f32/f32",
    (
        "numpy.true_divide",
        "x,x",
    ): "b:f32/f32 i8:f32/f32 u8:f32/f32 i32:f32/f32 f16:f16/f16 f32:f32/f32",
    ("numpy.mean", "x"): "b:f32/f32 i8:f32/f32 u8:f32/f32 i32:f32/f32 f16:f16/f16 f32:f32/f32",
    ("numpy.sum", "x"): "b:i32/i64 i8:i32/i64 u8:u32/u64 i32:i32/i64 f16:f16/f16 f32:f32/f32",
    ("nn.elu", "x"): "b:f32*/f64* i8:f32*/f64* u8:f32*/f64* i32:f32*/f64* f16:f16/f16 f32:f32/f32",
    ("nn.celu", "x"): "b:f32*/f64* i8:f32*/f64* u8:f32*/f64* i32:f32*/f64* f16:f16/f16 f32:f32/f32",
    ("nn.selu", "x"): "b:f32*/f64* i8:f32*/f64* u8:f32*/f64* i32:f32*/f64* f16:f16/f16 f32:f32/f32",
    (
        "nn.relu6",
        "x",
    ): "b:f32*/f64* i8:f32*/f64* u8:f32*/f64* i32:f32*/f64* f16:f16/f16 f32:f32/f32",
    (
        "nn.hard_sigmoid",
        "x",
    ): "b:f32*/f64* i8:f32*/f64* u8:f32*/f64* i32:f32*/f64* f16:f16/f16 f32:f32/f32",
    (
        "nn.hard_silu",
        "x",
    ): "b:f32*/f64* i8:f32*/f64* u8:f32*/f64* i32:f32*/f64* f16:f16/f16 f32:f32/f32",
    (
        "nn.sparse_plus",
        "x",
    ): "b:f32*/f64* i8:f32*/f64* u8:f32*/f64* i32:f32*/f64* f16:f16/f16 f32:f32/f32",
    (
        "nn.sparse_sigmoid",
        "x",
    ): "b:f32*/f64* i8:f32*/f64* u8:f32*/f64* i32:f32*/f64* f16:f16/f16 f32:f32/f32",
    (
        "nn.leaky_relu",
        "x",
    ): "b:f32*/f64* i8:f32*/f64* u8:f32*/f64* i32:f32*/f64* f16:f16/f16 f32:f32/f32",
    ("nn.softplus", "x"): "b:f32*/f64* i8:f32/f32 u8:f32/f32 i32:f32/f32 f16:f16/f16 f32:f32/f32",
    ("nn.mish", "x"): "b:f32*/f64* i8:f32/f32 u8:f32/f32 i32:f32/f32 f16:f16/f16 f32:f32/f32",
    ("nn.soft_sign", "x"): "b:f32*/f64* i8:f32/f32 u8:f32/f32 i32:f32/f32 f16:f16/f16 f32:f32/f32",
    ("nn.squareplus", "x"): "b:f32/f32 i8:f32/f32 u8:f32/f32 i32:f32/f32 f16:f16/f16 f32:f32/f32",
    ("nn.relu", "x"): "b:i32*/i64* i8:i8/i8 u8:u8/u8 i32:i32/i32 f16:f16/f16 f32:f32/f32",
    ("special.gammaln", "x"): "b:f32/f32 i8:f32/f32 u8:f32/f32 i32:f32/f32 f16:f16/f16 f32:f32/f32",
    ("special.xlogy", "x,x"): "b:f32/f32 i8:f32/f32 u8:f32/f32 i32:f32/f32 f16:f16/f16 f32:f32/f32",
}

_SHORT = {
    "b": "bool",
    "i8": "int8",
    "u8": "uint8",
    "i32": "int32",
    "i64": "int64",
    "u32": "uint32",
    "u64": "uint64",
    "f16": "float16",
    "f32": "float32",
    "f64": "float64",
}
_INPUTS = {
    "b": np.array([True, False, True]),
    "i8": np.array([1, 2, 3], np.int8),
    "u8": np.array([1, 2, 3], np.uint8),
    "i32": np.array([1, 2, 3], np.int32),
    "f16": np.array([0.5, 1.5, 2.5], np.float16),
    "f32": np.array([0.5, 1.5, 2.5], np.float32),
}


def _table_cases():
    for (fn, form), row in JAX_DTYPES.items():
        for entry in row.split():
            dt, want = entry.split(":")
            for x64, expected in zip((False, True), want.split("/")):
                if expected != "-":
                    yield fn, form, dt, x64, expected


@pytest.mark.parametrize("x64_on", [False, True], ids=["x32", "x64"])
def test_issue15_result_dtypes_follow_jax_promotion(x64_on):
    from fungrad import nn
    from fungrad.scipy import special

    modules = {"numpy": fnp, "nn": nn, "special": special}
    old = fg.config.enable_x64
    fg.config.update("enable_x64", x64_on)
    try:
        wrong = []
        for fn, form, dt, x64, expected in _table_cases():
            if x64 != x64_on:
                continue
            mod, name = fn.split(".")
            x = fnp.asarray(_INPUTS[dt])
            args = {"x": [x], "x,x": [x, x], "x,2": [x, 2], "x,2.0": [x, 2.0]}[form]
            out = getattr(modules[mod], name)(*args)
            got = _SHORT_OF[out.dtype] + ("*" if out.weak_type else "")
            if got != expected:
                wrong.append(f"{fn}({dt} {form}) is {got}, JAX {expected}")
        assert not wrong, wrong
    finally:
        fg.config.update("enable_x64", old)


_SHORT_OF = {np.dtype(v): k for k, v in _SHORT.items()}


@pytest.mark.parametrize("method", ["set", "add", "mul", "min", "max", "get"])
def test_issue15_static_index_into_an_empty_axis_raises_for_every_update(method):
    # JAX raises IndexError for a static integer index into a size-0 axis on reads and on every
    # .at[] update (fuzz found.md #3: the updates returned the array unchanged)
    z = fnp.zeros((0, 3))
    ref = getattr(z.at[-3], method)
    with pytest.raises(IndexError, match="axis 0 with size 0"):
        ref() if method == "get" else ref(1.5)
    with pytest.raises(IndexError, match="axis 1 with size 0"):
        ref = getattr(fnp.zeros((2, 0)).at[1, 0], method)
        ref() if method == "get" else ref(1.5)
    # slices and index arrays select nothing there: the array comes back unchanged (as JAX)
    if method != "get":
        assert getattr(z.at[:, 1], method)(1.5).shape == (0, 3)
        assert getattr(z.at[fnp.array([1])], method)(1.5).shape == (0, 3)
