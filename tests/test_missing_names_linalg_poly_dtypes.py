"""JAX 0.10.2 names added to fungrad.scipy.linalg (the special-matrix constructors), fungrad.numpy
(``poly``, ``roots``) and fungrad.dtypes (``issubdtype``, ``scalar_type_of``, ``itemsize_bits``,
``TypePromotionError``).

Oracles: scipy.linalg's constructors and numpy's ``poly``/``roots`` for the values; the dtypes,
shapes and errors are JAX 0.10.2's (checked against it when these were written; jax is not
imported here). Every constructor from vectors also runs under jit, vmap and batched inputs.
"""

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import dtypes
from fungrad.scipy import linalg as fla
from fungrad.testing import check_grads

DTYPES = [np.int32, np.float32, np.complex64]


def _vector(rng, n, dtype, nonzero_first=False):
    v = rng.randint(-5, 6, size=n) if dtype == np.int32 else rng.randn(n)
    if dtype == np.complex64:
        v = v + 1j * rng.randn(n)
    if nonzero_first and n:
        v[0] = 3 if dtype == np.int32 else v[0] + np.sign(v[0].real or 1) * 1.5
    return np.asarray(v).astype(dtype)


def _inexact(dtype):
    return np.complex64 if dtype == np.complex64 else np.float32


# (fungrad's function of one vector, scipy's, smallest size, dtype of the result for an input dtype)
VECTOR_CASES = {
    "toeplitz": (fla.toeplitz, sla.toeplitz, 0, lambda d: d),
    "toeplitz_r": (
        lambda v: fla.toeplitz(v, v[..., ::-1] * 2),
        lambda v: sla.toeplitz(v, v[..., ::-1] * 2),
        0,
        lambda d: d,
    ),
    "hankel": (fla.hankel, sla.hankel, 0, lambda d: d),
    "hankel_r": (
        lambda v: fla.hankel(v, v[..., ::-1] + 1),
        lambda v: sla.hankel(v, v[..., ::-1] + 1),
        0,
        lambda d: d,
    ),
    "circulant": (fla.circulant, sla.circulant, 0, lambda d: d),
    # scipy's empty fiedler and fiedler_companion matrices are 1-D; JAX's and fungrad's are
    # [0, 0] (test_toeplitz_is_hermitian_by_default_and_scalars_and_empties)
    "fiedler": (fla.fiedler, sla.fiedler, 1, lambda d: np.float32 if d == np.complex64 else d),
    "companion": (fla.companion, sla.companion, 2, _inexact),
    "fiedler_companion": (fla.fiedler_companion, sla.fiedler_companion, 2, _inexact),
    "leslie": (
        lambda v: fla.leslie(v, v[..., 1:]),
        lambda v: sla.leslie(v, v[1:]),
        2,
        lambda d: d,
    ),
    **{
        f"convolution_matrix_{mode}_{k}": (
            lambda v, mode=mode, k=k: fla.convolution_matrix(v, k, mode),
            lambda v, mode=mode, k=k: sla.convolution_matrix(v, k, mode),
            1,
            lambda d: d,
        )
        for mode in ("full", "same", "valid")
        for k in (1, 3, 6)
    },
}


@settings(max_examples=60)
@given(
    name=st.sampled_from(sorted(VECTOR_CASES)),
    n=st.integers(0, 7),
    dtype=st.sampled_from(DTYPES),
    seed=st.integers(0, 999),
)
def test_vector_constructors_match_scipy_eager_and_jit(name, n, dtype, seed):
    ours, theirs, smallest, result_dtype = VECTOR_CASES[name]
    n = max(n, smallest)
    v = _vector(np.random.RandomState(seed), n, dtype, nonzero_first=True)
    got = ours(v)
    want = theirs(v)
    assert got.dtype == result_dtype(dtype) and got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    # (compiled complex abs may differ from numpy's in the last bit)
    np.testing.assert_allclose(np.asarray(fg.jit(ours)(v)), np.asarray(got), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(VECTOR_CASES))
def test_vector_constructors_batch_vmap_and_stay_exact_for_integers(name):
    ours, theirs, smallest, _ = VECTOR_CASES[name]
    rng = np.random.RandomState(1)
    batch = np.stack(
        [_vector(rng, max(4, smallest), np.float32, nonzero_first=True) for _ in range(3)]
    )
    want = np.stack([np.asarray(ours(b)) for b in batch])
    np.testing.assert_allclose(np.asarray(fg.vmap(ours)(batch)), want, rtol=1e-6)
    if not name.startswith("convolution_matrix"):  # convolution_matrix's n is a column count
        np.testing.assert_allclose(np.asarray(ours(batch)), want, rtol=1e-6)
    big = np.array([2**24 + 1, 3, -(2**30)], np.int32)  # would not survive a float round trip
    if VECTOR_CASES[name][3](np.int32) == np.int32:
        np.testing.assert_array_equal(np.asarray(ours(big)), theirs(big).astype(np.int32))


def test_batched_inputs_broadcast_their_leading_dimensions():
    c = np.arange(6.0, dtype=np.float32).reshape(2, 1, 3)
    r = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    t = fla.toeplitz(c, r)
    assert t.shape == (2, 3, 3, 4)
    np.testing.assert_array_equal(np.asarray(t[1, 2]), sla.toeplitz(c[1, 0], r[2]))
    h = fla.hankel(c, r)
    assert h.shape == (2, 3, 3, 4)
    np.testing.assert_array_equal(np.asarray(h[0, 1]), sla.hankel(c[0, 0], r[1]))
    f, s = np.ones((2, 3), np.float32), np.arange(8.0, dtype=np.float32).reshape(4, 1, 2)
    assert fla.leslie(f, s).shape == (4, 2, 3, 3)
    a = np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3)
    got = fla.convolution_matrix(a, 4, "same")
    assert got.shape == (2, 4, 4)
    np.testing.assert_array_equal(np.asarray(got[1]), sla.convolution_matrix(a[1], 4, "same"))
    assert fla.fiedler_companion(np.ones((2, 5))).shape == (2, 4, 4)
    assert fla.companion(np.ones((3, 1, 4))).shape == (3, 1, 3, 3)


def test_toeplitz_is_hermitian_by_default_and_scalars_and_empties():
    c = np.array([1, 2 + 1j, 1 + 2j], np.complex64)
    m = np.asarray(fla.toeplitz(c))
    np.testing.assert_array_equal(m, m.conj().T)
    np.testing.assert_array_equal(m, sla.toeplitz(c))
    for f in (fla.toeplitz, fla.circulant, fla.fiedler):
        assert f(3).shape == (1, 1) and f(3).dtype == np.int32
    assert fla.fiedler_companion(3.0).shape == fla.fiedler_companion(np.ones(1)).shape == (0, 0)
    assert fla.toeplitz(np.ones(2), np.zeros(0)).shape == (2, 0)
    assert fla.hankel(np.zeros(0)).shape == fla.fiedler(np.zeros(0)).shape == (0, 0)


def test_vector_constructors_differentiate():
    x = np.array([1.5, -0.5, 2.0, 0.75])
    with fg.enable_x64():
        for f in (
            fla.toeplitz,
            fla.hankel,
            fla.circulant,
            fla.companion,
            fla.fiedler_companion,
            lambda a: fla.leslie(a, a[1:] ** 2),
            lambda a: fla.convolution_matrix(a, 3, "same"),
        ):
            check_grads(f, (x,), order=1, modes=["fwd", "rev"])


@settings(max_examples=40)
@given(n=st.integers(0, 9), kind=st.sampled_from([None, "symmetric", "lower", "upper"]))
def test_order_n_constructors_match_scipy(n, kind):
    np.testing.assert_allclose(np.asarray(fla.hilbert(n)), sla.hilbert(n), rtol=1e-7)
    np.testing.assert_allclose(np.asarray(fla.invhilbert(n)), sla.invhilbert(n), rtol=1e-6)
    # binomial coefficients are integers that float32 holds exactly at these sizes
    np.testing.assert_array_equal(
        np.asarray(fla.pascal(n, kind)), sla.pascal(n, kind or "symmetric")
    )
    np.testing.assert_array_equal(
        np.asarray(fla.invpascal(n, kind)), sla.invpascal(n, kind or "symmetric")
    )
    for scale in (None, "sqrtn", "n"):
        np.testing.assert_allclose(np.asarray(fla.dft(n, scale)), sla.dft(n, scale), atol=2e-7)
    if n >= 1:
        for full in (False, True):
            np.testing.assert_allclose(
                np.asarray(fla.helmert(n, full)), sla.helmert(n, full), atol=1e-7
            )
    for m in (1, 2, 4, 8, 16):
        np.testing.assert_array_equal(np.asarray(fla.hadamard(m)), sla.hadamard(m))


def test_order_n_constructors_dtypes_and_shapes():
    f32 = np.float32
    assert fla.hilbert(3).dtype == fla.invhilbert(3).dtype == fla.invpascal(3).dtype == f32
    assert fla.helmert(3).shape == (2, 3) and fla.helmert(1).shape == (0, 1)
    assert fla.helmert(3, full=True).shape == (3, 3) and fla.pascal(3).dtype == f32
    assert fla.dft(3).dtype == np.complex64 and fla.dft(0).shape == (0, 0)
    assert fla.hadamard(2).dtype == np.int32 and fla.hadamard(2, None).dtype == f32
    assert fla.hadamard(1, bool).dtype == np.bool_
    np.testing.assert_array_equal(np.asarray(fla.hadamard(2, np.uint8)), [[1, 1], [1, 255]])
    assert fla.hadamard(2, complex).dtype == np.complex64
    for f in (fla.invhilbert, fla.pascal, fla.invpascal, fla.dft):
        assert f(-1).shape == (0, 0)  # as JAX: an empty range
    with fg.enable_x64():
        for f in (fla.hilbert, fla.invhilbert, fla.invpascal, fla.helmert):
            assert f(3).dtype == np.float64
        assert fla.pascal(3).dtype == np.float32  # JAX's pascal is float32 even with x64
        assert fla.dft(3).dtype == np.complex128 and fla.hadamard(2).dtype == np.int64
        assert fla.dft(3, dtype=np.complex64).dtype == np.complex64
        np.testing.assert_allclose(np.asarray(fla.invhilbert(12)), sla.invhilbert(12), rtol=1e-12)
        np.testing.assert_allclose(np.asarray(fla.dft(7, "sqrtn")), sla.dft(7, "sqrtn"), atol=1e-15)
    with pytest.warns(UserWarning, match="dtype float64"):
        assert fla.hadamard(2, np.float64).dtype == f32


def test_order_n_constructors_under_jit():
    for f in (fla.hilbert, fla.invhilbert, fla.pascal, fla.invpascal, fla.helmert, fla.dft):
        np.testing.assert_array_equal(np.asarray(fg.jit(lambda f=f: f(5))()), np.asarray(f(5)))


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: fla.hankel(3), ValueError, "c must be at least 1-dimensional"),
        (lambda: fla.hankel(np.ones(2), 3), ValueError, "r must be at least 1-dimensional"),
        (lambda: fla.hankel([1, 2]), TypeError, "hankel requires ndarray or scalar"),
        (lambda: fla.toeplitz([1, 2]), TypeError, "toeplitz requires ndarray or scalar"),
        (lambda: fla.hankel(np.ones((2, 3)), np.ones((3, 2))), ValueError, None),
        (lambda: fla.companion(np.ones(1)), ValueError, "must be at least 2"),
        (lambda: fla.companion(1.0), ValueError, "must be at least 2"),
        (lambda: fla.fiedler_companion(np.zeros(0)), ValueError, "nonzero length"),
        (lambda: fla.fiedler(np.array([True])), TypeError, "subtract"),
        (lambda: fla.leslie(np.ones(1), np.ones(0)), ValueError, "f along the last axis"),
        (lambda: fla.leslie(np.ones(3), np.ones(3)), ValueError, "one less than the length"),
        (lambda: fla.convolution_matrix(np.ones(3), 0), ValueError, "n must be a positive"),
        (lambda: fla.convolution_matrix(np.ones(3), 2.0), TypeError, None),
        (lambda: fla.convolution_matrix(np.ones(0), 2), ValueError, "len\\(a\\) must be at"),
        (lambda: fla.convolution_matrix(1.0, 2), ValueError, "at least 1-dimensional"),
        (lambda: fla.convolution_matrix(np.ones(3), 2, "x"), ValueError, "mode must be one of"),
        (lambda: fla.hilbert(-1), TypeError, "non-negative"),
        (lambda: fla.hilbert(2.5), TypeError, "static integer"),
        (lambda: fla.pascal(2, "x"), ValueError, "Expected kind to be one of"),
        (lambda: fla.invpascal(2, "x"), ValueError, "Expected kind to be one of"),
        (lambda: fla.helmert(0), ValueError, "n must be a positive integer"),
        (lambda: fla.hadamard(3), ValueError, "positive power of 2"),
        (lambda: fla.hadamard(0), ValueError, "positive power of 2"),
        (lambda: fla.hadamard(2, bool), TypeError, "bool"),
        (lambda: fla.dft(2, "x"), ValueError, "scale must be None"),
        (lambda: fla.dft(2, dtype=np.float32), ValueError, "complex floating-point"),
        (lambda: fla.dft(2, None, np.complex64), TypeError, None),  # dtype is keyword-only
    ],
)
def test_constructor_errors_are_jaxs(call, error, match):
    with pytest.raises(error, match=match):
        call()


# -- poly and roots ----------------------------------------------------------------------------


def _assert_same_roots(got, want, tol):
    """Equal as multisets: each expected root is matched to its nearest remaining one."""
    got = list(np.asarray(got))
    assert len(got) == len(want), (got, want)
    for w in sorted(want, key=abs):
        k = int(np.argmin([abs(g - w) for g in got]))
        assert abs(got[k] - w) <= tol * max(1.0, abs(w)), (got, want)
        got.pop(k)


@settings(max_examples=20)
@given(
    zeros=st.lists(st.floats(-3, 3, allow_nan=False), max_size=6),
    as_int=st.booleans(),
)
def test_poly_matches_numpy(zeros, as_int):
    z = np.array(zeros, np.int32 if as_int else np.float32)
    got = fnp.poly(z)
    assert got.dtype == np.float32
    assert got.shape == ((len(z) + 1,) if len(z) else ())  # no zeros: JAX's 0-d 1
    want = np.poly(z.astype(np.float64))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    np.testing.assert_allclose(np.asarray(fg.jit(fnp.poly)(z)), np.asarray(got), rtol=1e-6)


def test_poly_of_complex_zeros_scalars_and_matrices():
    z = np.array([2, 1 + 2j, 1 - 2j], np.complex64)
    got = fnp.poly(z)
    assert got.dtype == np.complex64  # numpy returns real coefficients here; JAX does not
    np.testing.assert_allclose(np.asarray(got), np.poly(z), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(fnp.poly(1)), [1.0, -1.0])
    a = np.array([[2, 1, 5], [3, 4, 7], [1, 3, 5]], np.float32)
    char = fnp.poly(a)
    assert char.dtype == np.complex64
    np.testing.assert_allclose(np.asarray(char), np.poly(a), rtol=1e-5, atol=1e-4)
    assert fnp.poly(np.zeros(0, np.int32)).shape == () and float(fnp.poly(np.zeros(0))) == 1.0
    for bad in (np.zeros((0, 0)), np.ones((2, 3)), np.ones((2, 2, 2))):
        with pytest.raises(ValueError, match="1d or non-empty square 2d"):
            fnp.poly(bad)
    with pytest.raises(TypeError, match="poly requires ndarray"):
        fnp.poly([1, 2])


@settings(max_examples=10)
@given(zeros=st.lists(st.floats(-2, 2, allow_nan=False), min_size=1, max_size=5))
def test_poly_gradients_by_finite_differences(zeros):
    with fg.enable_x64():
        check_grads(fnp.poly, (np.array(zeros),), order=2, modes=["fwd", "rev"])


def _coefficients(rng, degree, leading, trailing):
    core = rng.randn(degree + 1)
    core[0] = core[0] + np.sign(core[0] or 1.0)  # keep the leading coefficient away from zero
    core[-1] = core[-1] + np.sign(core[-1] or 1.0)
    return np.concatenate([np.zeros(leading), core, np.zeros(trailing)])


@settings(max_examples=25)
@given(
    degree=st.integers(0, 5),
    leading=st.integers(0, 2),
    trailing=st.integers(0, 2),
    seed=st.integers(0, 999),
)
def test_roots_match_numpy(degree, leading, trailing, seed):
    p = _coefficients(np.random.RandomState(seed), degree, leading, trailing)
    with fg.enable_x64():
        got = fnp.roots(p)
        assert got.dtype == np.complex128
        _assert_same_roots(got, np.roots(p), 1e-6)
        # strip_zeros=False keeps len(p) - 1 entries: the roots, then a NaN per leading zero
        fixed = fg.jit(lambda q: fnp.roots(q, strip_zeros=False))(p)
        assert fixed.shape == (len(p) - 1,)
        n_nan = int(np.isnan(np.asarray(fixed)).sum())
        assert n_nan == leading and np.all(np.isnan(np.asarray(fixed)[len(p) - 1 - leading :]))
        _assert_same_roots(np.asarray(fixed)[: len(p) - 1 - leading], np.roots(p), 1e-6)


def test_roots_dtypes_edges_and_errors():
    got = fnp.roots(np.array([1, -3, 2], np.int32))
    assert got.dtype == np.complex64
    _assert_same_roots(got, [1, 2], 1e-5)
    assert fnp.roots(np.array([1, 1j], np.complex64)).dtype == np.complex64
    for p in (3.0, np.zeros(0), np.array([2.0]), np.zeros(3), np.array([0.0, 5.0])):
        assert fnp.roots(p).shape == (0,) and fnp.roots(p).dtype == np.complex64
    np.testing.assert_array_equal(
        np.asarray(fnp.roots(np.zeros(3), strip_zeros=False)), [complex(np.nan, np.nan)] * 2
    )
    # trailing zeros are zero roots; as in JAX they come after the others, before the NaNs
    got = np.asarray(fnp.roots(np.array([0, 1.0, -3, 2, 0]), strip_zeros=False))
    assert got[2] == 0 and np.isnan(got[3])
    _assert_same_roots(got[:2], [1, 2], 1e-5)
    with pytest.raises(fg.errors.ConcretizationTypeError, match="strip_zeros=False"):
        fg.jit(fnp.roots)(np.array([0, 1.0, 2]))
    with pytest.raises(ValueError, match="rank-1"):
        fnp.roots(np.ones((2, 2)))
    with pytest.raises(TypeError):
        fnp.roots(np.array([1.0, 2]), False)  # strip_zeros is keyword-only


def test_roots_batch_with_vmap():
    p = np.array([[1.0, -3, 2], [0, 1, 2]], np.float32)
    got = np.asarray(fg.vmap(lambda q: fnp.roots(q, strip_zeros=False))(p))
    _assert_same_roots(got[0], [1, 2], 1e-5)
    assert got[1, 0] == -2 and np.isnan(got[1, 1])


# -- fungrad.dtypes ------------------------------------------------------------------------------

TYPES = [
    bool, int, float, complex, None, "int32", "f", np.int8, np.uint16, np.float16, np.float64,
    np.complex64, np.bool_, np.dtype("uint32"), fnp.float32, fnp.int8, dtypes.float0,
]  # fmt: skip
CATEGORIES = [
    np.generic, np.number, np.integer, np.signedinteger, np.unsignedinteger, np.inexact,
    np.floating, np.complexfloating, np.bool_, float, int, np.float32, np.int64, "float64", None,
]  # fmt: skip


def test_issubdtype_is_numpys_hierarchy():
    for a in TYPES:
        for b in CATEGORIES:
            assert dtypes.issubdtype(a, b) is bool(np.issubdtype(a, b)), (a, b)
    assert dtypes.issubdtype(int, np.integer) and not dtypes.issubdtype(np.float32, float)
    assert dtypes.issubdtype(None, np.floating) and dtypes.issubdtype(dtypes.float0, np.generic)
    with pytest.raises(TypeError):
        dtypes.issubdtype(np.zeros(2), np.floating)
    # bfloat16 is a float in JAX (numpy puts ml_dtypes' types under np.generic only)
    assert dtypes.issubdtype("bfloat16", np.floating) and not dtypes.issubdtype(
        "bfloat16", np.integer
    )


def test_scalar_type_of():
    for x, want in [
        (True, bool), (1, int), (1.0, float), (1j, complex), (np.int8(3), int),
        (np.float16(1), float), (np.uint64(1), int), (np.complex64(1), complex),
        (fnp.zeros(3, np.uint8), int), (fnp.zeros(2, bool), bool), (fnp.arange(2.0), float),
        (np.zeros(2, np.complex64), complex), (np.dtype("float32"), float), (np.float32, float),
        ("int16", int), (int, int), (complex, complex), (fnp.float32, float), (fnp.int16, int),
    ]:  # fmt: skip
        assert dtypes.scalar_type_of(x) is want, x
    assert fg.jit(lambda x: fnp.zeros(()) + (dtypes.scalar_type_of(x) is float))(1.0) == 1
    with pytest.raises(ValueError):
        dtypes.scalar_type_of(None)
    for bad in ([1, 2], "U3", np.zeros(2, "S2"), np.zeros(2, object), dtypes.float0, object):
        with pytest.raises(TypeError):
            dtypes.scalar_type_of(bad)


def test_itemsize_bits():
    cases = {
        np.int8: 8, "int16": 16, np.uint32: 32, bool: 8, np.bool_: 8, "float16": 16,
        np.float64: 64, np.complex64: 64, np.complex128: 128, complex: 128, int: 64, float: 64,
        np.dtype("uint64"): 64, fnp.int32: 32,
    }  # fmt: skip
    for dt, bits in cases.items():
        assert dtypes.itemsize_bits(dt) == bits, dt
    with fg.enable_x64():
        assert dtypes.itemsize_bits(int) == 64
    with pytest.raises(ValueError, match="cannot be None"):
        dtypes.itemsize_bits(None)
    for bad in (dtypes.float0, "S3", object):
        with pytest.raises(ValueError, match="unexpected input"):
            dtypes.itemsize_bits(bad)


def test_type_promotion_error_is_a_value_error():
    assert issubclass(dtypes.TypePromotionError, ValueError)
    with pytest.raises(ValueError):
        raise dtypes.TypePromotionError("no implicit promotion path")
