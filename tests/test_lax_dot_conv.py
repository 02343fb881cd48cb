"""Contractions and convolutions of fungrad.lax: dot_general (and dot, batch_matmul) against
np.einsum built from the dimension numbers, conv_general_dilated against a direct loop over
output pixels, with the dtype rules (preferred_element_type, promotion) and errors of JAX."""

import string

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fungrad as fg
from fungrad import lax
from tests.helpers import assert_array

DTYPES = [np.float32, np.int32, np.uint32, np.bool_, np.float16]


def _values(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.uniform(-2, 2, shape).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    lo = 0 if dtype.kind == "u" else -5
    return rng.integers(lo, 6, shape).astype(dtype)


def _reference_result(exact: np.ndarray, dtype):
    """The reference for a contraction computed exactly in float64 / int64: round floats once,
    wrap integers, OR-of-ANDs for bool."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return exact != 0
    return exact.astype(dtype)


# -- dot_general ---------------------------------------------------------------------------------


@st.composite
def dot_cases(draw):
    """Operands with batch, contracting and free dimensions placed in random positions."""
    nb, nc = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    nlf, nrf = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    size = st.integers(0, 3)
    bs, cs = [draw(size) for _ in range(nb)], [draw(size) for _ in range(nc)]
    lfs, rfs = [draw(size) for _ in range(nlf)], [draw(size) for _ in range(nrf)]
    lroles = draw(
        st.permutations(
            [("b", i) for i in range(nb)]
            + [("c", i) for i in range(nc)]
            + [("f", i) for i in range(nlf)]
        )
    )
    rroles = draw(
        st.permutations(
            [("b", i) for i in range(nb)]
            + [("c", i) for i in range(nc)]
            + [("f", i) for i in range(nrf)]
        )
    )

    def layout(roles, free):
        shape = [{"b": bs, "c": cs, "f": free}[r][i] for r, i in roles]
        pos = {role: d for d, role in enumerate(roles)}
        return shape, pos

    lshape, lpos = layout(lroles, lfs)
    rshape, rpos = layout(rroles, rfs)
    dn = (
        (tuple(lpos[("c", i)] for i in range(nc)), tuple(rpos[("c", i)] for i in range(nc))),
        (tuple(lpos[("b", i)] for i in range(nb)), tuple(rpos[("b", i)] for i in range(nb))),
    )
    dtype = draw(st.sampled_from(DTYPES))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    return _values(rng, lshape, dtype), _values(rng, rshape, dtype), dn


def _einsum_reference(lhs, rhs, dn):
    """np.einsum with subscripts built from the dimension numbers, in float64 / int64."""
    (lc, rc), (lb, rb) = dn
    letters = iter(string.ascii_letters)
    lsub = [None] * lhs.ndim
    rsub = [None] * rhs.ndim
    for a, b in zip(lb + lc, rb + rc):
        lsub[a] = rsub[b] = next(letters)
    for i in range(lhs.ndim):
        lsub[i] = lsub[i] or next(letters)
    for i in range(rhs.ndim):
        rsub[i] = rsub[i] or next(letters)
    out = (
        [lsub[d] for d in lb]
        + [lsub[d] for d in range(lhs.ndim) if d not in lb + lc]
        + [rsub[d] for d in range(rhs.ndim) if d not in rb + rc]
    )
    wide = np.float64 if lhs.dtype.kind == "f" else np.int64
    return np.einsum(
        f"{''.join(lsub)},{''.join(rsub)}->{''.join(out)}", lhs.astype(wide), rhs.astype(wide)
    )


@given(dot_cases())
def test_dot_general_matches_einsum(case):
    lhs, rhs, dn = case
    out = lax.dot_general(lhs, rhs, dn)
    ref = _reference_result(_einsum_reference(lhs, rhs, dn), lhs.dtype)
    tol = {np.dtype(np.float16): 5e-3, np.dtype(np.float32): 1e-5}.get(lhs.dtype, 0)
    assert_array(out, ref, dtype=lhs.dtype, rtol=tol, atol=tol * 10)


@given(dot_cases(), st.sampled_from([np.float32, np.int32, np.uint32, np.float16]))
def test_dot_general_preferred_element_type(case, preferred):
    lhs, rhs, dn = case
    if lhs.dtype.kind in "iu" and (np.dtype(preferred).itemsize < lhs.dtype.itemsize):
        with pytest.raises(
            TypeError, match="dot_general: preferred_element_type .* must not be narrower"
        ):
            lax.dot_general(lhs, rhs, dn, preferred_element_type=preferred)
        return
    out = lax.dot_general(lhs, rhs, dn, preferred_element_type=preferred)
    exact = _einsum_reference(lhs, rhs, dn)
    if np.dtype(preferred).kind in "iu" and lhs.dtype.kind == "f":
        # computed in float, then converted like convert_element_type (truncation toward zero
        # and saturation; float32 rounding may move a value across an integer, hence atol=1
        info = np.iinfo(preferred)
        ref = np.clip(np.trunc(exact), info.min, info.max).astype(np.int64)
        got = np.asarray(out)
        assert got.dtype == preferred and got.shape == ref.shape
        assert np.all(np.abs(got.astype(np.int64) - ref) <= 1)
        return
    with np.errstate(over="ignore"):
        ref = exact.astype(preferred)
    tol = {np.dtype(np.float16): 5e-3, np.dtype(np.float32): 1e-5}.get(np.dtype(preferred), 0)
    assert_array(out, ref, dtype=preferred, rtol=tol, atol=tol * 10)


def test_dot_general_dtype_rules_follow_jax():
    dn = (((1,), (0,)), ((), ()))
    half = np.full((1, 2), 1.5, np.float32)
    # computed in float, then truncated: 4.5 -> 4 (JAX gives 4)
    assert_array(
        lax.dot_general(half, half.T, dn, preferred_element_type=np.int32),
        np.array([[4]], np.int32),
        dtype=np.int32,
    )
    i8 = np.array([[100, 100]], np.int8)
    assert_array(lax.dot_general(i8, i8.T, dn), np.array([[32]], np.int8), dtype=np.int8)
    assert_array(
        lax.dot_general(i8, i8.T, dn, preferred_element_type=np.int32),
        np.array([[20000]], np.int32),
        dtype=np.int32,
    )
    b = np.array([[True, True]])
    assert_array(lax.dot_general(b, b.T, dn), np.array([[True]]), dtype=np.bool_)
    assert_array(
        lax.dot_general(b, b.T, dn, preferred_element_type=np.int32),
        np.array([[2]], np.int32),
        dtype=np.int32,
    )
    neg = np.array([[-1, -1]], np.int32)
    assert_array(
        lax.dot_general(neg, -neg.T, dn, preferred_element_type=np.uint32),
        np.array([[2**32 - 2]], np.uint32),
        dtype=np.uint32,
    )
    # mixed dtypes are promoted as JAX promotes them
    assert_array(
        lax.dot_general(np.ones((1, 2), np.float32), np.ones((2, 1), np.int32), dn),
        np.array([[2.0]]),
        dtype=np.float32,
    )
    assert_array(
        lax.dot_general(np.ones((1, 2), np.uint32), np.ones((2, 1), np.int32), dn),
        np.array([[2]]),
        dtype=np.int32,
    )
    # integer products wrap like XLA's
    v = np.array([2**30, 2**30], np.int32)
    assert_array(lax.dot(v, np.array([4, 4], np.int32)), np.int32(0), dtype=np.int32)
    with pytest.raises(
        TypeError,
        match="dot_general: preferred_element_type bool must not be "
        "narrower than the operand dtype int32",
    ):
        lax.dot_general(neg, neg.T, dn, preferred_element_type=np.bool_)


def test_dot_general_weak_type_and_nan():
    dn = (((1,), (0,)), ((), ()))
    w = fg.Array(np.ones((2, 2), np.float32), True)
    assert lax.dot_general(w, w, dn).weak_type
    assert not lax.dot_general(w, np.ones((2, 2), np.float32), dn).weak_type
    x = np.array([[np.inf, 1.0]], np.float32)
    out = lax.dot_general(x, np.array([[0.0], [1.0]], np.float32), dn)
    assert np.isnan(np.asarray(out)).all()  # inf * 0 is NaN, as in IEEE arithmetic


def test_dot_and_batch_matmul_shapes():
    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.arange(3, dtype=np.float32)
    assert_array(lax.dot(a, b), a @ b, dtype=np.float32)
    assert_array(lax.dot(b, a.T), b @ a.T, dtype=np.float32)
    assert_array(lax.dot(b, b), np.float32(b @ b), dtype=np.float32)
    assert_array(lax.dot(a, a.T, precision=lax.Precision.HIGHEST), a @ a.T, dtype=np.float32)
    x = np.arange(30, dtype=np.float32).reshape(5, 2, 3)
    y = np.arange(60, dtype=np.float32).reshape(5, 3, 4)
    assert_array(lax.batch_matmul(x, y), np.matmul(x, y), dtype=np.float32)
    with pytest.raises(
        ValueError,
        match=r"dot: operands must be vectors or matrices, got "
        r"shapes \(5, 2, 3\) and \(3,\)",
    ):
        lax.dot(x, b)
    with pytest.raises(ValueError, match="dot: operands must be vectors or matrices"):
        lax.dot(np.float32(2), np.float32(3))
    with pytest.raises(ValueError, match="batch_matmul: operands must have the same rank"):
        lax.batch_matmul(x, a)
    with pytest.raises(TypeError, match=r"dot_general: batch dimensions must have equal sizes"):
        lax.batch_matmul(x, np.ones((4, 3, 4), np.float32))


def test_dot_general_errors_name_shapes():
    x, y = np.ones((2, 3), np.float32), np.ones((4, 5), np.float32)
    with pytest.raises(
        TypeError,
        match=r"dot_general: contracting dimensions must have equal "
        r"sizes, got lhs contracting \(1,\) of shape \(2, 3\) "
        r"\(sizes \(3,\)\) and rhs contracting \(0,\) of shape "
        r"\(4, 5\) \(sizes \(4,\)\)",
    ):
        lax.dot_general(x, y, (((1,), (0,)), ((), ())))
    with pytest.raises(TypeError, match="dot_general: lhs dimension numbers must be distinct"):
        lax.dot_general(x, np.ones((3, 3), np.float32), (((1, 1), (0, 1)), ((), ())))
    with pytest.raises(TypeError, match=r"dot_general: lhs dimension numbers must be in \[0, 2\)"):
        lax.dot_general(x, y, (((2,), (0,)), ((), ())))
    with pytest.raises(TypeError, match="dot_general: lhs batch dimensions .* overlap"):
        sq = np.ones((3, 3), np.float32)
        lax.dot_general(sq, sq, (((0,), (0,)), ((0,), (1,))))
    with pytest.raises(TypeError, match="dot_general: dimension_numbers must be"):
        lax.dot_general(x, y, ((1,), (0,)))
    with pytest.raises(TypeError, match="dot_general requires operands of the same dtype"):
        fg.make_jaxpr(
            lambda a, b: lax.dot_general_p.bind(
                a,
                b,
                dimension_numbers=(((1,), (0,)), ((), ())),
                precision=None,
                preferred_element_type=None,
            )
        )(x, np.ones((3, 2), np.int32))
    with pytest.raises(ValueError, match="precision: 'foo' is not a lax.Precision"):
        lax.dot(x, x.T, precision="foo")


def test_dot_general_jaxpr_prints_like_jax_and_evaluates():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.arange(12, dtype=np.float32).reshape(3, 4)
    jaxpr = fg.make_jaxpr(lambda x, y: lax.dot(x, y))(x, y)
    assert (
        "dot_general[dimension_numbers=(((1,), (0,)), ((), ())) precision=None "
        "preferred_element_type=None]"
    ) in str(jaxpr)
    assert_array(jaxpr(x, y)[0], x @ y, dtype=np.float32)
    jaxpr = fg.make_jaxpr(
        lambda x, y: lax.dot_general(
            x, y, (((1,), (0,)), ((), ())), precision="highest", preferred_element_type=np.float32
        )
    )(x, y)
    assert "precision=(Precision.HIGHEST, Precision.HIGHEST) preferred_element_type=float32" in str(
        jaxpr
    )
    assert lax.Precision("tensorfloat32") is lax.Precision.HIGH


def test_dot_general_float64(x64):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(3, 4, 5)), rng.normal(size=(3, 5, 2))
    out = lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,))))
    assert_array(out, np.einsum("bij,bjk->bik", a, b), dtype=np.float64, rtol=1e-13, atol=1e-13)
    f32 = np.ones((2, 2), np.float32)
    assert lax.dot(f32, f32, preferred_element_type=np.float64).dtype == np.float64


# -- conv_general_dilated ------------------------------------------------------------------------


def _reference_conv(lhs, rhs, strides, padding, lhs_dil, rhs_dil, dnums, fgc, bgc):
    """Direct convolution: a Python loop over output pixels and kernel taps, reading the
    dilated, padded input through index arithmetic (canonical NC.../OI... layouts)."""
    lhs_spec, rhs_spec, out_spec = dnums
    x = np.transpose(lhs, lhs_spec).astype(np.float64 if lhs.dtype.kind == "f" else np.int64)
    w = np.transpose(rhs, rhs_spec).astype(x.dtype)
    n, c = x.shape[:2]
    o, i_feat = w.shape[:2]
    dil_in = [0 if d == 0 else (d - 1) * s + 1 for d, s in zip(x.shape[2:], lhs_dil)]
    spans = [0 if k == 0 else (k - 1) * d + 1 for k, d in zip(w.shape[2:], rhs_dil)]
    out_sp = [
        max(0, (d + lo + hi - sp) // stride + 1)
        for d, (lo, hi), sp, stride in zip(dil_in, padding, spans, strides)
    ]
    out = np.zeros((n // bgc, o) + tuple(out_sp), x.dtype)
    o_per_f, o_per_b = o // fgc, o // bgc
    for pix in np.ndindex(*out_sp):
        for tap in np.ndindex(*w.shape[2:]):
            coords = []
            for p, t, stride, (lo, _), rd, ld, d in zip(
                pix, tap, strides, padding, rhs_dil, lhs_dil, dil_in
            ):
                pos = p * stride + t * rd - lo
                if not 0 <= pos < d or pos % ld:
                    break
                coords.append(pos // ld)
            else:
                for oo in range(o):
                    g, b = oo // o_per_f, oo // o_per_b
                    xs = x[b * (n // bgc) : (b + 1) * (n // bgc), g * i_feat : (g + 1) * i_feat]
                    xs = xs[(slice(None), slice(None)) + tuple(coords)]
                    out[(slice(None), oo) + pix] += xs @ w[(oo, slice(None)) + tap]
    return np.transpose(out, np.argsort(out_spec))


def _spec_strings(nsp, rng):
    """Random layout strings, e.g. ("HNWC", "IHOW", "WCHN") for two spatial dims."""
    spatial = "HWD"[:nsp]
    lhs = "".join(rng.permutation(list("NC" + spatial)))
    rhs = "".join(rng.permutation(list("OI" + spatial)))
    out = "".join(rng.permutation(list("NC" + spatial)))
    return lhs, rhs, out


@st.composite
def conv_cases(draw):
    nsp = draw(st.integers(1, 3))
    maxs = {1: 6, 2: 5, 3: 3}[nsp]
    groups = draw(st.sampled_from(["none", "feature", "batch"]))
    g = draw(st.integers(2, 3)) if groups != "none" else 1
    n = draw(st.integers(0 if groups == "none" else 1, 2)) * (g if groups == "batch" else 1)
    i_feat = draw(st.integers(1, 2))
    c = i_feat * (g if groups == "feature" else 1)
    o = draw(st.integers(1, 2)) * g
    spatial = [draw(st.integers(0, maxs)) for _ in range(nsp)]
    kernel = [draw(st.integers(1, 3)) for _ in range(nsp)]
    strides = tuple(draw(st.integers(1, 2)) for _ in range(nsp))
    lhs_dil = tuple(draw(st.integers(1, 2)) for _ in range(nsp))
    rhs_dil = tuple(draw(st.integers(1, 2)) for _ in range(nsp))
    padding = tuple((draw(st.integers(-1, 2)), draw(st.integers(-1, 2))) for _ in range(nsp))
    dtype = draw(st.sampled_from([np.float32, np.int32, np.float16]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    specs = _spec_strings(nsp, rng)
    canon_l = [n, c] + spatial
    canon_r = [o, i_feat] + kernel
    lhs_shape = [canon_l[("NC" + "HWD"[:nsp]).index(ch)] for ch in specs[0]]
    rhs_shape = [canon_r[("OI" + "HWD"[:nsp]).index(ch)] for ch in specs[1]]
    lhs, rhs = _values(rng, lhs_shape, dtype), _values(rng, rhs_shape, dtype)
    fgc = g if groups == "feature" else 1
    bgc = g if groups == "batch" else 1
    return lhs, rhs, strides, padding, lhs_dil, rhs_dil, specs, fgc, bgc


@given(conv_cases())
def test_conv_general_dilated_matches_loop_reference(case):
    lhs, rhs, strides, padding, lhs_dil, rhs_dil, specs, fgc, bgc = case
    dnums = lax.conv_dimension_numbers(lhs.shape, rhs.shape, specs)
    sizes = [lhs.shape[d] for d in dnums.lhs_spec[2:]]
    if any(
        max(d - 1, 0) * ld + min(d, 1) + lo + hi < 0
        for d, ld, (lo, hi) in zip(sizes, lhs_dil, padding)
    ):
        with pytest.raises(ValueError, match="conv_general_dilated: negative padding"):
            lax.conv_general_dilated(
                lhs,
                rhs,
                strides,
                padding,
                lhs_dil,
                rhs_dil,
                specs,
                feature_group_count=fgc,
                batch_group_count=bgc,
            )
        return
    out = lax.conv_general_dilated(
        lhs,
        rhs,
        strides,
        padding,
        lhs_dil,
        rhs_dil,
        specs,
        feature_group_count=fgc,
        batch_group_count=bgc,
    )
    ref = _reference_conv(lhs, rhs, strides, padding, lhs_dil, rhs_dil, dnums, fgc, bgc)
    tol = {np.dtype(np.float16): 5e-3, np.dtype(np.float32): 1e-5}.get(lhs.dtype, 0)
    assert_array(out, _reference_result(ref, lhs.dtype), dtype=lhs.dtype, rtol=tol, atol=tol * 10)


def test_conv_groups_and_padding_match_jax_values():
    # values printed by JAX 0.10 for the same calls
    lhs = np.arange(12, dtype=np.float32).reshape(4, 1, 3)
    rhs = np.array([1.0, 10.0], np.float32).reshape(2, 1, 1)
    assert_array(
        lax.conv_general_dilated(lhs, rhs, (1,), "VALID", batch_group_count=2),
        [[[0, 1, 2], [60, 70, 80]], [[3, 4, 5], [90, 100, 110]]],
        dtype=np.float32,
    )
    lhs = np.arange(12, dtype=np.float32).reshape(1, 4, 3)
    rhs = np.ones((2, 2, 1), np.float32) * np.array([1, 10], np.float32)[:, None, None]
    assert_array(
        lax.conv_general_dilated(lhs, rhs, (1,), "VALID", feature_group_count=2),
        [[[3, 5, 7], [150, 170, 190]]],
        dtype=np.float32,
    )
    ones = np.ones((1, 1, 3, 3), np.float32)
    assert_array(
        lax.conv(ones, np.ones((1, 1, 2, 2), np.float32), (1, 1), "SAME"),
        [[[[4, 4, 2], [4, 4, 2], [2, 2, 1]]]],
    )
    assert_array(
        lax.conv_with_general_padding(
            ones, np.ones((1, 1, 2, 2), np.float32), (1, 1), "SAME", None, (2, 2)
        ),
        [[[[1, 2, 1], [2, 4, 2], [1, 2, 1]]]],
    )
    x = np.arange(6, dtype=np.float32).reshape(1, 1, 6)
    assert_array(
        lax.conv_general_dilated(x, np.ones((1, 1, 2), np.float32), (1,), ((-1, -2),)),
        [[[3.0, 5.0]]],
    )
    assert_array(
        lax.conv_general_dilated(
            np.ones((1, 1, 5), np.float32),
            np.ones((1, 1, 2), np.float32),
            (1,),
            "SAME",
            rhs_dilation=(2,),
        ),
        [[[1, 2, 2, 2, 1]]],
    )
    assert lax.conv_general_dilated(
        np.ones((1, 1, 3), np.float32), np.ones((1, 1, 5), np.float32), (1,), "VALID"
    ).shape == (1, 1, 0)
    # zero spatial dimensions: a matrix product
    assert_array(
        lax.conv_general_dilated(
            np.ones((2, 3), np.float32), np.ones((4, 3), np.float32), (), "VALID"
        ),
        np.full((2, 4), 3.0),
        dtype=np.float32,
    )
    b = lax.conv_general_dilated(np.ones((1, 1, 3), bool), np.ones((1, 1, 2), bool), (1,), "VALID")
    assert_array(b, [[[True, True]]], dtype=np.bool_)


def test_conv_transpose_matches_jax_values():
    x = np.arange(3.0, dtype=np.float32).reshape(1, 3, 1)
    k2 = np.array([1.0, 2.0], np.float32).reshape(2, 1, 1)
    k3 = np.array([1.0, 2.0, 3.0], np.float32).reshape(3, 1, 1)
    col = lambda v: np.array(v, np.float32).reshape(1, -1, 1)  # noqa: E731
    assert_array(lax.conv_transpose(x, k2, (2,), "SAME"), col([0, 0, 2, 1, 4, 2]))
    assert_array(lax.conv_transpose(x, k3, (2,), "VALID"), col([0, 0, 3, 2, 7, 4, 2]))
    assert_array(lax.conv_transpose(x, k3, (2,), ((1, 1),)), col([0, 3, 2, 7, 4]))
    assert_array(
        lax.conv_transpose(x, k3, (2,), ((1, 1),), use_consistent_padding=True),
        col([0, 3, 2, 7, 4]),
    )
    assert_array(
        lax.conv_transpose(x, k3, (2,), "SAME", transpose_kernel=True), col([0, 0, 1, 2, 5, 4])
    )


def test_conv_dimension_numbers():
    dn = lax.conv_dimension_numbers((1, 5, 5, 2), (3, 3, 2, 4), ("NHWC", "HWIO", "NHWC"))
    assert dn == lax.ConvDimensionNumbers((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))
    assert lax.conv_dimension_numbers((1, 2, 3), (1, 2, 3), None) == lax.ConvDimensionNumbers(
        (0, 1, 2), (0, 1, 2), (0, 1, 2)
    )
    with pytest.raises(
        TypeError,
        match=r"dimension_numbers\[1\] must contain the characters "
        "'O' and 'I' exactly once, got HWIX",
    ):
        lax.conv_dimension_numbers((1, 5, 5, 2), (3, 3, 2, 4), ("NHWC", "HWIX", "NHWC"))
    with pytest.raises(TypeError, match="same set of spatial characters"):
        lax.conv_dimension_numbers((1, 5, 5, 2), (3, 3, 2, 4), ("NHWC", "HDIO", "NHWC"))
    with pytest.raises(TypeError, match="convolution requires lhs and rhs of equal rank"):
        lax.conv_dimension_numbers((1, 5, 2), (3, 3, 2, 4), None)


def test_conv_errors_name_the_operation():
    x = np.ones((1, 2, 5), np.float32)
    with pytest.raises(
        ValueError,
        match=r"conv_general_dilated: the lhs feature size 2 divided "
        r"by feature_group_count=1 must equal the rhs input "
        r"feature size 3",
    ):
        lax.conv_general_dilated(x, np.ones((1, 3, 2), np.float32), (1,), "VALID")
    with pytest.raises(
        ValueError, match="at most one of feature_group_count and batch_group_count"
    ):
        lax.conv_general_dilated(
            np.ones((2, 2, 3), np.float32),
            np.ones((2, 1, 2), np.float32),
            (1,),
            "VALID",
            feature_group_count=2,
            batch_group_count=2,
        )
    with pytest.raises(ValueError, match="batch_group_count=2 must divide the lhs batch size 1"):
        lax.conv_general_dilated(
            x, np.ones((2, 2, 2), np.float32), (1,), "VALID", batch_group_count=2
        )
    with pytest.raises(
        TypeError,
        match=r"conv_general_dilated: window_strides \(1, 1\) must "
        "have one entry per spatial dimension",
    ):
        lax.conv_general_dilated(x, np.ones((1, 2, 2), np.float32), (1, 1), "VALID")
    with pytest.raises(
        TypeError,
        match="conv_general_dilated requires operands of the same dtype, got float32 and int32",
    ):
        lax.conv_general_dilated(x, np.ones((1, 2, 2), np.int32), (1,), "VALID")
    with pytest.raises(ValueError, match="string padding is not supported with lhs_dilation"):
        lax.conv_general_dilated(x, np.ones((1, 2, 2), np.float32), (1,), "SAME", lhs_dilation=(2,))
    with pytest.raises(ValueError, match=r"negative padding \(-4, -4\) is larger"):
        lax.conv_general_dilated(x, np.ones((1, 2, 2), np.float32), (1,), ((-4, -4),))
    with pytest.raises(ValueError, match="padding must be a string or a sequence"):
        lax.conv_general_dilated(x, np.ones((1, 2, 2), np.float32), (1,), (1, 1))
    with pytest.raises(ValueError, match="every element of window_strides must be positive"):
        lax.conv_general_dilated(x, np.ones((1, 2, 2), np.float32), (0,), "VALID")
    with pytest.raises(TypeError, match="preferred_element_type int8 must not be narrower"):
        lax.conv_general_dilated(
            np.ones((1, 1, 3), np.int32),
            np.ones((1, 1, 2), np.int32),
            (1,),
            "VALID",
            preferred_element_type=np.int8,
        )


def test_conv_jaxpr_prints_like_jax_and_evaluates():
    lhs = np.arange(50, dtype=np.float32).reshape(1, 5, 5, 2) / 10
    rhs = np.arange(72, dtype=np.float32).reshape(3, 3, 2, 4) / 10

    def f(lhs, rhs):
        return lax.conv_general_dilated(
            lhs, rhs, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )

    jaxpr = fg.make_jaxpr(f)(lhs, rhs)
    assert (
        "conv_general_dilated[batch_group_count=1 dimension_numbers=ConvDimensionNumbers("
        "lhs_spec=(0, 3, 1, 2), rhs_spec=(3, 2, 0, 1), out_spec=(0, 3, 1, 2)) "
        "feature_group_count=1 lhs_dilation=(1, 1) padding=((1, 1), (1, 1)) precision=None "
        "preferred_element_type=None rhs_dilation=(1, 1) window_strides=(1, 1)]" in str(jaxpr)
    )
    out = f(lhs, rhs)
    assert out.shape == (1, 5, 5, 4) and out.dtype == np.float32
    assert_array(jaxpr(lhs, rhs)[0], np.asarray(out), dtype=np.float32, rtol=0, atol=0)
    w = fg.Array(np.ones((1, 1, 3), np.float32), True)
    assert lax.conv(w, w, (1,), "VALID").weak_type


def test_conv_float64_and_preferred_element_type(x64):
    rng = np.random.default_rng(1)
    lhs, rhs = rng.normal(size=(2, 3, 6, 5)), rng.normal(size=(4, 3, 2, 3))
    dnums = lax.conv_dimension_numbers(lhs.shape, rhs.shape, None)
    out = lax.conv_general_dilated(lhs, rhs, (2, 1), ((1, 0), (2, -1)), (1, 2), (2, 1))
    ref = _reference_conv(lhs, rhs, (2, 1), ((1, 0), (2, -1)), (1, 2), (2, 1), dnums, 1, 1)
    assert_array(out, ref, dtype=np.float64, rtol=1e-13, atol=1e-13)
    i8 = np.full((1, 1, 4), 100, np.int8)
    assert_array(
        lax.conv_general_dilated(i8, i8[:, :, :2], (1,), "VALID", preferred_element_type=np.int32),
        np.full((1, 1, 3), 20000, np.int32),
        dtype=np.int32,
    )


# -- issue 15: a convolution whose outputs are single products keeps their IEEE values --------

_SPECIALS = np.array([-0.0, 0.0, 1.0, -2.0, np.inf, -np.inf, np.nan], np.float32)


def _single_product_conv_ref(x, w, stride, padding, lhs_dilation, groups):
    """A Python loop: (N, C, W) lhs, (O, 1, 1) kernel, feature_group_count=groups (== C). Each
    output is the one product x * w (float64, rounded) where the window is on an lhs element,
    and +0, an empty sum, where it is on padding or a dilation hole."""
    n, _, width = x.shape
    o = w.shape[0]
    size = (width - 1) * lhs_dilation + 1 + sum(padding)
    out = np.zeros((n, o, (size - 1) // stride + 1), np.float64)
    for b, oc, p in np.ndindex(out.shape):
        q = p * stride - padding[0]
        if q >= 0 and q % lhs_dilation == 0 and q // lhs_dilation < width:
            xv = np.float64(x[b, oc // (o // groups), q // lhs_dilation])
            with np.errstate(invalid="ignore"):  # 0 * inf is NaN
                out[b, oc, p] = xv * np.float64(w[oc, 0, 0])
    return out.astype(np.float32)


def _assert_same_ieee(got, ref):
    got = np.asarray(got)
    assert got.shape == ref.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    ok = ~np.isnan(ref)
    np.testing.assert_array_equal(got[ok], ref[ok])
    np.testing.assert_array_equal(np.signbit(got[ok]), np.signbit(ref[ok]))  # -0 vs +0


def test_issue15_single_product_conv_keeps_the_sign_of_zero():
    """The issue's repro: eager gave [-0, nan, 0] and jit [0, nan, 0] (0 + -0 in the compiled
    reduction); JAX gives [-0, nan, 0] on both."""
    x = np.array([[[-1.0, np.inf, 2.0]]], np.float32)
    w = np.zeros((1, 1, 1), np.float32)
    ref = np.array([[[-0.0, np.nan, 0.0]]], np.float32)

    def f(x, w):
        return lax.conv_general_dilated(x, w, (1,), "VALID")

    _assert_same_ieee(f(x, w), ref)
    _assert_same_ieee(fg.jit(f)(x, w), ref)
    # large enough for the compiled im2col matrix product, which would add to a zeroed output
    x = np.full((1, 1, 20000), -0.0, np.float32)
    w = np.ones((2, 1, 1), np.float32)
    _assert_same_ieee(fg.jit(f)(x, w), np.full((1, 2, 20000), -0.0, np.float32))


@given(
    st.integers(1, 3),
    st.integers(1, 2),
    st.integers(1, 5),
    st.integers(1, 2),
    st.tuples(st.integers(0, 2), st.integers(0, 2)),
    st.integers(1, 2),
    st.data(),
)
def test_issue15_single_product_conv_matches_a_loop_eager_and_jit(
    c, mult, width, stride, pad, dil, data
):
    """Every single-product convolution (one input feature per group, a one-element window)
    over IEEE specials, with strides, padding, lhs dilation and feature groups: eager and
    compiled equal the loop bit for bit, signs of zero included (padding gives +0, not
    0 * w)."""

    def specials(shape):
        n = int(np.prod(shape))
        values = data.draw(st.lists(st.sampled_from(list(_SPECIALS)), min_size=n, max_size=n))
        return np.array(values, np.float32).reshape(shape)

    x, w = specials((2, c, width)), specials((c * mult, 1, 1))

    def f(x, w):
        return lax.conv_general_dilated(
            x, w, (stride,), [pad], lhs_dilation=(dil,), feature_group_count=c
        )

    ref = _single_product_conv_ref(x, w, stride, pad, dil, c)
    _assert_same_ieee(f(x, w), ref)
    _assert_same_ieee(fg.jit(f)(x, w), ref)


def test_issue15_single_product_conv_on_the_gpu(gpu):
    x = np.array([[[-0.0, 1.0, -2.0], [-1.0, np.inf, 0.0]]], np.float32)
    w = np.array([[[-1.0]], [[0.0]]], np.float32)

    def f(x, w):
        return lax.conv_general_dilated(x, w, (1,), [(1, 1)], feature_group_count=2)

    _assert_same_ieee(
        fg.jit(f, backend="gpu")(x, w), _single_product_conv_ref(x, w, 1, (1, 1), 1, 2)
    )
