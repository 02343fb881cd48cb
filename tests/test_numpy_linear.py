"""fungrad.numpy products and contractions (matmul, dot, einsum, diagonals, convolutions...)
against numpy, with hypothesis-generated shapes and dtypes."""

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from tests.helpers import assert_array

DTYPES = [np.float32, np.int32]


def _values(shape, dtype, seed):
    """Small values: exact for int32 products, well-scaled for float32."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-4, 5, size=shape).astype(dtype)
    return rng.uniform(-2, 2, size=shape).astype(dtype)


def _ref(fn, *args, **kw):
    """numpy reference in float64 for floats (int products are exact in int64)."""
    up = [
        a
        if not isinstance(a, np.ndarray)
        else a.astype(np.float64)
        if a.dtype.kind == "f"
        else a.astype(np.int64)
        for a in args
    ]
    return fn(*up, **kw)


def _check(got, expected, dtype):
    assert_array(got, np.asarray(expected).astype(dtype), dtype=dtype, rtol=1e-5, atol=1e-4)


# -- matmul -------------------------------------------------------------------------------------


@st.composite
def matmul_shapes(draw):
    batch_a, batch_b = draw(
        hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3)
    ).input_shapes
    m, k, n = (draw(st.integers(0, 4)) for _ in range(3))
    a_vec, b_vec = draw(st.booleans()), draw(st.booleans())
    a_shape = (k,) if a_vec else batch_a + (m, k)
    b_shape = (k,) if b_vec else batch_b + (k, n)
    return a_shape, b_shape


@given(matmul_shapes(), st.sampled_from(DTYPES), st.integers(0, 2**16))
def test_matmul_matches_numpy(shapes, dtype, seed):
    a, b = (_values(s, dtype, seed + i) for i, s in enumerate(shapes))
    _check(fnp.matmul(a, b), _ref(np.matmul, a, b), dtype)
    _check(fnp.asarray(a) @ fnp.asarray(b), _ref(np.matmul, a, b), dtype)


def test_matmul_size_zero_contraction_gives_zeros():
    out = fnp.matmul(np.ones((2, 3, 0), np.float32), np.ones((0, 4), np.float32))
    assert_array(out, np.zeros((2, 3, 4), np.float32), dtype=np.float32)


def test_matmul_promotes_mixed_dtypes_as_jax():
    a, b = np.ones((2, 3), np.int32), np.ones((3,), np.float32)
    assert_array(fnp.matmul(a, b), np.full((2,), 3.0), dtype=np.float32)
    # JAX promotion: int8 with uint8 gives int16 (numpy agrees here).
    out = fnp.matmul(np.ones((2, 3), np.int8), np.ones((3,), np.uint8))
    assert_array(out, np.full((2,), 3), dtype=np.int16)


def test_matmul_bool():
    a, b = _values((3, 4), bool, 1), _values((4, 2), bool, 2)
    assert_array(fnp.matmul(a, b), a.astype(int) @ b.astype(int) > 0, dtype=np.bool_)


def test_matmul_preferred_element_type():
    a = np.full((2, 3), 100, np.int8)
    out = fnp.matmul(a, a.T, preferred_element_type=np.int32)
    assert_array(out, np.full((2, 2), 30000), dtype=np.int32)


def test_matmul_float64(x64):
    a, b = _values((2, 3, 4), np.float64, 0), _values((4, 5), np.float64, 1)
    assert_array(fnp.matmul(a, b), a @ b, dtype=np.float64, rtol=1e-12, atol=1e-12)


def test_matmul_errors_name_the_shapes():
    with pytest.raises(
        TypeError,
        match=r"matmul: contraction dimensions do not match: "
        r"\(3, 4\) @ \(5, 6\)",
    ):
        fnp.matmul(np.ones((3, 4)), np.ones((5, 6)))
    with pytest.raises(ValueError, match="matmul: batch dimensions cannot broadcast"):
        fnp.matmul(np.ones((2, 3, 4)), np.ones((3, 4, 6)))
    with pytest.raises(ValueError, match="matmul: input operand 1 must have ndim at least 1"):
        fnp.matmul(np.ones(3), 2.0)
    with pytest.raises(TypeError, match="matmul"):
        fnp.matmul([[1.0]], "x")


def test_matmul_jaxpr_shows_dot_general():
    a, b = np.ones((2, 1, 3, 4), np.float32), np.ones((5, 4, 2), np.float32)
    jaxpr = fg.make_jaxpr(fnp.matmul)(a, b)
    text = str(jaxpr)
    assert "dot_general[" in text and "preferred_element_type=float32" in text
    assert "squeeze[dimensions=(1,)]" in text  # size-1 batch dim is squeezed, not broadcast
    (out,) = jaxpr(a, b)
    assert_array(out, np.asarray(fnp.matmul(a, b)), dtype=np.float32)


# -- dot, vdot, inner, outer, tensordot, vecdot, kron ------------------------------------------


@st.composite
def dot_shapes(draw):
    a_nd, b_nd = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    k = draw(st.integers(0, 3))
    a = tuple(
        draw(st.lists(st.integers(0, 3), min_size=max(a_nd - 1, 0), max_size=max(a_nd - 1, 0)))
    ) + ((k,) if a_nd else ())
    b_rest = draw(st.lists(st.integers(0, 3), min_size=max(b_nd - 1, 0), max_size=max(b_nd - 1, 0)))
    b = () if b_nd == 0 else ((k,) if b_nd == 1 else tuple(b_rest[:-1]) + (k, b_rest[-1]))
    return a, b


@given(dot_shapes(), st.sampled_from(DTYPES), st.integers(0, 2**16))
def test_dot_matches_numpy(shapes, dtype, seed):
    a, b = (_values(s, dtype, seed + i) for i, s in enumerate(shapes))
    _check(fnp.dot(a, b), _ref(np.dot, a, b), dtype)


def test_dot_of_python_scalars_is_weak():
    out = fnp.dot(2.0, 3.0)
    assert_array(out, 6.0, dtype=np.float32, weak_type=True)
    assert_array(fnp.dot(np.float32(2), 3.0), 6.0, dtype=np.float32, weak_type=False)


@given(st.integers(0, 4), st.sampled_from(DTYPES), st.integers(0, 2**16))
def test_vdot_inner_outer(n, dtype, seed):
    a, b = _values((2, n), dtype, seed), _values((n, 2), dtype, seed + 1)
    _check(fnp.vdot(a, b), _ref(np.vdot, a, b), dtype)
    c = _values((3, n), dtype, seed + 2)
    _check(fnp.inner(a, c), _ref(np.inner, a, c), dtype)
    _check(fnp.inner(a, dtype(3)), _ref(np.inner, a, np.asarray(3, dtype)), dtype)
    _check(fnp.outer(a, b), _ref(np.outer, a, b), dtype)


def test_vdot_of_0d_and_errors():
    assert_array(fnp.vdot(np.float32(2), np.float32(4)), 8.0, dtype=np.float32)
    with pytest.raises(TypeError, match="vdot: operands must have the same size"):
        fnp.vdot(np.ones((2, 3)), np.ones((3, 3)))
    with pytest.raises(TypeError, match="inner: last dimensions must match"):
        fnp.inner(np.ones((2, 3)), np.ones(4))
    with pytest.raises(TypeError, match=r"dot: shapes \(2, 3\) and \(4,\) not aligned"):
        fnp.dot(np.ones((2, 3)), np.ones(4))


@given(
    hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=3),
    st.integers(0, 4),
    st.integers(0, 2**16),
)
def test_tensordot_int_axes(shape, n, seed):
    n = min(n, len(shape))
    a = _values(shape, np.float32, seed)
    b = _values(shape[len(shape) - n :] + (2,), np.float32, seed + 1)
    _check(fnp.tensordot(a, b, n), _ref(np.tensordot, a, b, n), np.float32)


def test_tensordot_axes_pairs():
    a, b = _values((2, 3, 4), np.int32, 0), _values((4, 5, 3), np.int32, 1)
    for axes in [([1, 2], [2, 0]), ((2, 1), (0, 2)), (2, 0), ([-1], [0])]:
        _check(fnp.tensordot(a, b, axes), _ref(np.tensordot, a, b, axes), np.int32)
    with pytest.raises(TypeError, match="tensordot: axes lists must have equal length"):
        fnp.tensordot(a, b, ([1, 2], [2]))
    with pytest.raises(TypeError, match="tensordot: shape mismatch"):
        fnp.tensordot(a, b, ([0], [0]))
    with pytest.raises(TypeError, match="tensordot: axes"):
        fnp.tensordot(a, b, 4)


@given(
    hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3),
    st.integers(0, 4),
    st.sampled_from(DTYPES),
    st.integers(0, 2**16),
)
def test_vecdot_broadcasts(shapes, n, dtype, seed):
    a, b = (_values(s + (n,), dtype, seed + i) for i, s in enumerate(shapes.input_shapes))
    _check(fnp.vecdot(a, b), _ref(np.vecdot, a, b), dtype)
    at, bt = np.moveaxis(a, -1, 0), np.moveaxis(b, -1, 0)
    if at.ndim == bt.ndim:
        _check(fnp.vecdot(at, bt, axis=0), _ref(np.vecdot, at, bt, axis=0), dtype)


def test_vecdot_error():
    with pytest.raises(ValueError, match="vecdot: axes must match"):
        fnp.vecdot(np.ones((2, 3)), np.ones(4))


@given(
    hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3),
    hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3),
    st.sampled_from(DTYPES + [bool]),
    st.integers(0, 2**16),
)
def test_kron_matches_numpy(sa, sb, dtype, seed):
    a, b = _values(sa, dtype, seed), _values(sb, dtype, seed + 1)
    out_dtype = np.bool_ if dtype is bool else dtype
    expected = np.kron(a, b)
    assert_array(fnp.kron(a, b), expected.astype(out_dtype), dtype=out_dtype)


# -- einsum -------------------------------------------------------------------------------------

EINSUM_CASES = [
    ("ii", [(3, 3)]),
    ("ii->i", [(4, 4)]),
    ("ij->ji", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("ij->j", [(2, 3)]),
    ("ijk->kji", [(2, 3, 4)]),
    ("iij->ij", [(3, 3, 2)]),
    ("iii->i", [(3, 3, 3)]),
    ("ijji->ij", [(2, 3, 3, 2)]),
    ("i,i", [(5,), (5,)]),
    ("i,i->i", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("ij,jk->ki", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(5, 2, 3), (5, 3, 4)]),
    ("bij,jk->bik", [(5, 2, 3), (3, 4)]),
    ("ij,ij->", [(2, 3), (2, 3)]),
    ("ij,ji->", [(2, 3), (3, 2)]),
    ("ii,i->i", [(3, 3), (3,)]),
    ("ij,j", [(2, 3), (3,)]),
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (5, 3, 4)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("i...->...", [(2, 3, 4)]),
    ("...,...", [(2, 3), (3,)]),
    ("...i,i", [(2, 3), (3,)]),
    ("i...i", [(3, 2, 3)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ij,jk,kl", [(2, 3), (3, 4), (4, 2)]),
    ("i,j,k->ijk", [(2,), (3,), (4,)]),
    ("ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 2), (2, 3)]),
    ("ijk,ikl,ilm->ijm", [(2, 3, 2), (2, 2, 4), (2, 4, 1)]),
    ("ij,kl->ijkl", [(2, 3), (2, 2)]),
    ("ij,ij,ij->ij", [(2, 3), (2, 3), (2, 3)]),
    ("abc,cd,a->bd", [(2, 3, 4), (4, 2), (2,)]),
    ("ij,jk", [(2, 1), (3, 4)]),
    ("ij,ij->ij", [(2, 1), (2, 4)]),
    ("Ba,aA", [(2, 3), (3, 4)]),
    ("i,i", [(0,), (0,)]),
    ("ij,jk->ik", [(2, 0), (0, 3)]),
    ("", [()]),
    (",", [(), ()]),
    ("i,", [(3,), ()]),
    ("ij,jk,ik->", [(2, 3), (3, 4), (2, 4)]),
]


@pytest.mark.parametrize("subscripts,shapes", EINSUM_CASES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_einsum_cases(subscripts, shapes, dtype):
    ops = [_values(s, dtype, i) for i, s in enumerate(shapes)]
    expected = _ref(np.einsum, subscripts, *ops)
    _check(fnp.einsum(subscripts, *ops), expected, dtype)
    _check(fnp.einsum(subscripts, *ops, optimize=False), expected, dtype)


def test_einsum_bool_uses_or_and():
    a, b = _values((3, 4), bool, 0), _values((4, 2), bool, 1)
    assert_array(fnp.einsum("ij,jk", a, b), a.astype(int) @ b.astype(int) > 0, dtype=np.bool_)
    assert "reduce_or" in str(fg.make_jaxpr(lambda x: fnp.einsum("ij->i", x))(a))
    assert_array(fnp.einsum("ij->i", a), a.any(1), dtype=np.bool_)


def test_einsum_sums_ellipsis_dims_missing_from_output():
    # NB: JAX sums ellipsis dims an explicit output leaves out; numpy raises.
    a = _values((2, 3, 4), np.float32, 0)
    _check(fnp.einsum("i...->i", a), a.astype(np.float64).sum((1, 2)), np.float32)


def test_einsum_sublist_form_and_dtypes():
    a, b = _values((2, 3), np.float32, 0), _values((3, 4), np.int32, 1)
    _check(fnp.einsum(a, [0, 1], b, [1, 2], [0, 2]), _ref(np.matmul, a, b), np.float32)
    c = _values((3, 2), np.float32, 2)
    _check(
        fnp.einsum(a, [..., 1], c, [1, ...]), _ref(np.einsum, a, [..., 1], c, [1, ...]), np.float32
    )
    out = fnp.einsum(
        "ij,j->i", np.ones((2, 3), np.int8), np.ones(3, np.int8), preferred_element_type=np.int32
    )
    assert_array(out, np.full(2, 3), dtype=np.int32)
    assert_array(fnp.einsum(",", 2.0, 3.0), 6.0, dtype=np.float32, weak_type=True)


def test_einsum_float64(x64):
    a, b = _values((3, 4), np.float64, 0), _values((4, 4), np.float64, 1)
    assert_array(
        fnp.einsum("ij,jj->i", a, b), np.einsum("ij,jj->i", a, b), dtype=np.float64, rtol=1e-12
    )


def test_einsum_lowers_to_dot_general_and_slices():
    a, b = np.ones((3, 3), np.float32), np.ones((3, 4), np.float32)
    f = lambda a, b: fnp.einsum("ii,ij->j", a, b)  # noqa: E731
    jaxpr = fg.make_jaxpr(f)(a, b)
    text = str(jaxpr)
    assert "dot_general[" in text and "slice[" in text and "gather" not in text
    (out,) = jaxpr(a, b)
    assert_array(out, np.asarray(f(a, b)), dtype=np.float32)


def test_einsum_diagonal_keeps_special_values():
    a = np.array([[-0.0, np.nan], [np.inf, 2.0]], np.float32)
    out = np.asarray(fnp.einsum("ii->i", a))
    assert np.signbit(out[0]) and out[1] == 2.0


@pytest.mark.parametrize(
    "subscripts,shapes,match",
    [
        ("ij,jk", [(2, 3)], "name 2 operands, but 1 were given"),
        ("ij", [(2,)], "does not contain the correct number of indices for operand 0"),
        ("i,i", [(2,), (3,)], "size of label 'i' for operand 1"),
        ("ii", [(2, 3)], "repeated in operand 0"),
        ("ij->ik", [(2, 3)], "output subscript 'k'"),
        ("ij->ii", [(2, 3)], "appears more than once"),
        ("i2", [(2, 3)], "invalid subscript character '2'"),
        ("...i...", [(2, 3)], "more than one ellipsis"),
    ],
)
def test_einsum_errors(subscripts, shapes, match):
    with pytest.raises(ValueError, match="einsum: .*" + match):
        fnp.einsum(subscripts, *[np.ones(s, np.float32) for s in shapes])


def test_einsum_takes_opt_einsum_strategies_and_explicit_paths():
    # JAX 0.10.2 hands optimize to opt_einsum: "optimal", "dp", ... and einsum_path's path
    # (with or without numpy's leading "einsum_path") all give the product.
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in [(2, 3), (3, 4), (4, 5)])
    want = a @ b @ c
    path, _ = fnp.einsum_path("ij,jk,kl->il", a, b, c)
    for optimize in ("optimal", "dp", "branch-2", path, ["einsum_path", (0, 1), (0, 1)]):
        got = fnp.einsum("ij,jk,kl->il", a, b, c, optimize=optimize)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def test_einsum_bad_arguments():
    with pytest.raises(ValueError, match="einsum: optimize='foo' is not supported"):
        fnp.einsum("i->", np.ones(3), optimize="foo")
    ops = [np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)]
    with pytest.raises(ValueError, match=r"einsum: the path's pair \(0, 5\)"):
        fnp.einsum("ij,jk->ik", *ops, optimize=[(0, 5)])
    with pytest.raises(TypeError, match="einsum"):
        fnp.einsum("i->", "abc")


@st.composite
def einsum_problems(draw):
    """A random valid einsum: 1-3 operands over labels a-e (repeats, size-1 broadcasting and an
    ellipsis allowed), implicit or explicit output."""
    letters = "abcde"
    sizes = {m: draw(st.integers(0, 3)) for m in letters}
    n_ops = draw(st.integers(1, 3))
    use_ellipsis = draw(st.booleans())
    ell_shape = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3))
    terms, shapes, used = [], [], []
    for _ in range(n_ops):
        labels = draw(st.lists(st.sampled_from(letters), min_size=0, max_size=4))
        used.extend(labels)
        shape = []
        own = {}
        for m in labels:  # a label may broadcast (size 1) in an operand, consistently within it
            own.setdefault(m, 1 if sizes[m] > 1 and draw(st.integers(0, 4)) == 0 else sizes[m])
            shape.append(own[m])
        term = "".join(labels)
        if use_ellipsis and draw(st.booleans()):
            k = draw(st.integers(0, len(ell_shape)))
            pos = draw(st.integers(0, len(labels)))
            term = term[:pos] + "..." + term[pos:]
            shape[pos:pos] = ell_shape[len(ell_shape) - k :]
        terms.append(term)
        shapes.append(tuple(shape))
    subscripts = ",".join(terms)
    if draw(st.booleans()):
        out = draw(st.permutations(sorted(set(used))))
        out = "".join(out[: draw(st.integers(0, len(out)))])
        if "..." in subscripts:
            pos = draw(st.integers(0, len(out)))
            out = out[:pos] + "..." + out[pos:]
        subscripts += "->" + out
    return subscripts, shapes


@given(einsum_problems(), st.sampled_from(DTYPES), st.integers(0, 2**16))
def test_einsum_random_subscripts(problem, dtype, seed):
    subscripts, shapes = problem
    ops = [_values(s, dtype, seed + i) for i, s in enumerate(shapes)]
    _check(fnp.einsum(subscripts, *ops), _ref(np.einsum, subscripts, *ops), dtype)


# -- diagonals and traces -----------------------------------------------------------------------


@given(
    hnp.array_shapes(min_dims=2, max_dims=4, min_side=0, max_side=4), st.integers(-5, 5), st.data()
)
def test_diagonal_and_trace(shape, offset, data):
    a = _values(shape, np.int32, offset + 7)
    ax1, ax2 = data.draw(st.permutations(range(-len(shape), 0)))[:2]
    _check(fnp.diagonal(a, offset, ax1, ax2), np.diagonal(a, offset, ax1, ax2), np.int32)
    _check(fnp.trace(a, offset, ax1, ax2), np.trace(a, offset, ax1, ax2), np.int32)


def test_trace_dtypes():
    # JAX: bool and small ints sum in the default int; dtype= overrides.
    assert_array(fnp.trace(np.ones((3, 3), bool)), 3, dtype=np.int32)
    assert_array(fnp.trace(np.ones((3, 3), np.float32), dtype=np.int32), 3, dtype=np.int32)


@given(
    hnp.array_shapes(min_dims=1, max_dims=2, min_side=0, max_side=4),
    st.integers(-4, 4),
    st.sampled_from(DTYPES + [bool]),
)
def test_diag_and_diagflat(shape, k, dtype):
    v = _values(shape, dtype, k + 5)
    dt = np.bool_ if dtype is bool else dtype
    assert_array(fnp.diag(v, k), np.diag(v, k), dtype=dt)
    assert_array(fnp.diagflat(v, k), np.diagflat(v, k), dtype=dt)


def test_diag_errors_and_jaxpr():
    with pytest.raises(ValueError, match="diag: input must be 1-D or 2-D"):
        fnp.diag(np.ones((2, 2, 2)))
    with pytest.raises(ValueError, match="diagonal requires an array of at least two"):
        fnp.diagonal(np.ones(3))
    with pytest.raises(ValueError, match="diagonal: axis1 and axis2 cannot be the same"):
        fnp.diagonal(np.ones((3, 3)), 0, 1, -1)
    v = np.arange(3, dtype=np.float32)
    jaxpr = fg.make_jaxpr(lambda v: fnp.diag(v, 1))(v)
    assert "pad[" in str(jaxpr)
    assert_array(jaxpr(v)[0], np.diag(v, 1), dtype=np.float32)


# -- convolve, correlate, cross -----------------------------------------------------------------


@given(
    st.integers(1, 6),
    st.integers(1, 6),
    st.sampled_from(["full", "same", "valid"]),
    st.sampled_from(DTYPES),
    st.integers(0, 2**16),
)
def test_convolve_correlate(n, m, mode, dtype, seed):
    a, v = _values((n,), dtype, seed), _values((m,), dtype, seed + 1)
    # JAX: integer inputs give the default float.
    _check(fnp.convolve(a, v, mode), _ref(np.convolve, a, v, mode), np.float32)
    _check(fnp.correlate(a, v, mode), _ref(np.correlate, a, v, mode), np.float32)


def test_convolve_errors_and_jaxpr():
    with pytest.raises(ValueError, match="convolve: inputs cannot be empty"):
        fnp.convolve(np.ones(0), np.ones(3))
    with pytest.raises(ValueError, match="correlate: only 1-D inputs"):
        fnp.correlate(np.ones((2, 2)), np.ones(3))
    with pytest.raises(ValueError, match="convolve: mode must be one of"):
        fnp.convolve(np.ones(3), np.ones(3), "circular")
    a, v = np.ones(4, np.float32), np.arange(2, dtype=np.float32)
    jaxpr = fg.make_jaxpr(fnp.convolve)(a, v)
    assert "conv_general_dilated[" in str(jaxpr)
    assert_array(jaxpr(a, v)[0], np.convolve(a, v), dtype=np.float32)


def _np_cross(a, b):
    """np.cross without its deprecated 2-vector path: 2-vectors get a zero z-component."""

    def pad(x):
        return np.concatenate([x, np.zeros_like(x[..., :1])], -1) if x.shape[-1] == 2 else x

    out = np.cross(pad(a), pad(b))
    return out[..., 2] if a.shape[-1] == b.shape[-1] == 2 else out


@given(
    hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, max_side=3),
    st.sampled_from([2, 3]),
    st.sampled_from([2, 3]),
    st.sampled_from(DTYPES),
    st.integers(0, 2**16),
)
def test_cross(shapes, na, nb, dtype, seed):
    sa, sb = shapes.input_shapes
    a, b = _values(sa + (na,), dtype, seed), _values(sb + (nb,), dtype, seed + 1)
    _check(fnp.cross(a, b), _ref(_np_cross, a, b), dtype)
    if na == nb == 3 and len(sa) == len(sb) == 1:
        at, bt = a.T, b.T
        _check(
            fnp.cross(at, bt, axisa=0, axisb=0, axisc=0),
            _ref(np.cross, at, bt, axisa=0, axisb=0, axisc=0),
            dtype,
        )


def test_cross_error():
    with pytest.raises(ValueError, match="cross: the vector dimension must have size 2 or 3"):
        fnp.cross(np.ones(4), np.ones(3))


def test_all_names_exported():
    from fungrad.numpy import linear

    for name in linear.__all__:
        assert getattr(fnp, name) is getattr(linear, name)
