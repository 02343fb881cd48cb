"""The jax.numpy names added for JAX programs, against numpy: polynomials, set operations,
type checks, windows, gradient/trapezoid/unwrap, vectorize and friends, the functional
updates, histograms, mgrid/ogrid/r_/c_, bit packing and interop; with check_grads, vmap
against a Python loop and jit against eager for each differentiable family."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.testing import check_grads
from tests.helpers import assert_array

F32 = np.float32
rng = np.random.default_rng(0)


# -- polynomials ----------------------------------------------------------------------------------

coeffs = st.lists(st.floats(-3, 3, width=32), min_size=1, max_size=6).map(
    lambda v: np.array(v, F32)
)


@settings(max_examples=30, deadline=None)
@given(coeffs, coeffs)
def test_polynomial_arithmetic_matches_numpy(a, b):
    assert_array(fnp.polyadd(a, b), np.polyadd(a, b))
    assert_array(fnp.polysub(a, b), np.polysub(a, b))
    assert_array(fnp.polymul(a, b), np.convolve(a, b), rtol=1e-5, atol=1e-5)
    x = np.linspace(-2, 2, 7, dtype=F32)
    assert_array(fnp.polyval(a, x), np.polyval(a, x), rtol=1e-5, atol=1e-4)
    assert_array(fnp.polyder(a), np.polyder(a) if len(a) > 1 else np.zeros(0), atol=1e-5)
    assert_array(
        fnp.polyint(a, 2, k=np.array([1.0, -2.0], F32)),
        np.polyint(a, 2, k=[1.0, -2.0]),
        rtol=1e-5,
        atol=1e-6,
    )


def test_polydiv_polyfit_vander_and_dtypes():
    u, v = np.array([1.0, 3, 2, 5], F32), np.array([2.0, 1], F32)
    q, r = fnp.polydiv(u, v)
    nq, nr = np.polydiv(u, v)
    assert_array(q, nq)
    assert_array(r[-len(nr) :], nr, atol=1e-6)
    assert r.shape == u.shape  # JAX keeps the dividend's length
    x = np.linspace(-1, 1, 20)
    y = 3 * x**2 - x + 0.5 + 0.01 * np.sin(7 * x)
    assert_array(fnp.polyfit(x, y, 2), np.polyfit(x, y, 2), rtol=1e-3, atol=1e-3)
    assert_array(
        fnp.polyfit(x, np.stack([y, 2 * y], 1), 2),
        np.polyfit(x, np.stack([y, 2 * y], 1), 2),
        rtol=1e-3,
        atol=1e-3,
    )
    w = np.linspace(1, 2, 20)
    assert_array(fnp.polyfit(x, y, 1, w=w), np.polyfit(x, y, 1, w=w), rtol=1e-3, atol=1e-3)
    with pytest.raises(ValueError, match="full=True"):
        fnp.polyfit(x, y, 2, full=True)
    assert_array(fnp.vander(np.array([1, 2, 3]), 4), np.vander([1, 2, 3], 4), dtype=np.int32)
    assert_array(
        fnp.vander(np.array([1.0, 2]), increasing=True), np.vander([1.0, 2], increasing=True)
    )
    assert fnp.polyval(np.array([1, 2]), 3).dtype == np.int32
    assert fnp.polymul(np.array([1, 2]), np.array([3])).dtype == np.float32
    with pytest.raises(ValueError, match="must be 1-D"):
        fnp.polyadd(np.ones((2, 2)), np.ones(2))


def test_polynomial_transforms(x64):
    p = np.array([0.5, -1.0, 2.0, 0.3])
    x = np.linspace(-1, 1, 5)
    check_grads(fnp.polyval, (p, x), order=2)
    check_grads(lambda a, b: fnp.polymul(a, b), (p, p[:2]), order=1)
    loop = np.stack([np.asarray(fnp.polyval(p.astype(F32), r)) for r in x.astype(F32)])
    assert_array(fg.vmap(lambda r: fnp.polyval(p.astype(F32), r))(x.astype(F32)), loop)
    f = lambda a: fnp.polydiv(fnp.polyint(a), a[:2])[0]  # noqa: E731
    assert_array(fg.jit(f)(p.astype(F32)), f(p.astype(F32)))


# -- set operations -------------------------------------------------------------------------------

ints = st.lists(st.integers(-4, 4), min_size=0, max_size=8).map(lambda v: np.array(v, np.int32))


@settings(max_examples=40, deadline=None)
@given(ints, ints)
def test_set_operations_match_numpy(a, b):
    assert_array(fnp.isin(a, b), np.isin(a, b))
    assert_array(fnp.isin(a, b, invert=True), np.isin(a, b, invert=True))
    assert_array(fnp.setdiff1d(a, b), np.setdiff1d(a, b).astype(np.int32))
    assert_array(fnp.union1d(a, b), np.union1d(a, b).astype(np.int32))
    assert_array(fnp.setxor1d(a, b), np.setxor1d(a, b).astype(np.int32))
    vals, i1, i2 = fnp.intersect1d(a, b, return_indices=True)
    nvals, ni1, ni2 = np.intersect1d(a, b, return_indices=True)
    assert_array(vals, nvals.astype(np.int32))
    assert_array(i1, ni1)
    assert_array(i2, ni2)


def test_set_operations_with_size_under_jit():
    a, b = np.array([3, 1, 2, 1], np.int32), np.array([2, 7], np.int32)
    f = fg.jit(
        lambda a, b: (
            fnp.union1d(a, b, size=6),
            fnp.intersect1d(a, b, size=3),
            fnp.setxor1d(a, b, size=6),
            fnp.setdiff1d(a, b, size=5),
            fnp.setdiff1d(a, b, size=4, fill_value=-1),
        )
    )
    u, i, x, d, d2 = f(a, b)
    # JAX's padding: the smallest value, except setdiff1d (0) and an explicit fill_value
    assert_array(u, [1, 2, 3, 7, 1, 1])
    assert_array(i, [2, 2, 2])
    assert_array(x, [1, 3, 7, 1, 1, 1])
    assert_array(d, [1, 3, 0, 0, 0])
    assert_array(d2, [1, 3, -1, -1])
    _, i1, i2 = fnp.intersect1d(a, b, size=3, return_indices=True)
    assert_array(i1, [2, 4, 4])
    assert_array(i2, [0, 2, 2])
    with pytest.raises(fg.ConcretizationTypeError, match="size="):
        fg.jit(fnp.setdiff1d)(a, b)
    xs = np.array([[1, 5], [2, 9]], np.int32)
    loop = np.stack([np.asarray(fnp.isin(r, b)) for r in xs])
    assert_array(fg.vmap(lambda r: fnp.isin(r, b))(xs), loop)


def test_unique_array_api_functions():
    x = np.array([[3, 1], [3, 2]], np.int32)
    vals, idx, inv, counts = fnp.unique_all(x)
    nv, ni, ninv, nc = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    assert_array(vals, nv)
    assert_array(idx, ni)
    assert_array(inv, ninv.reshape(x.shape))
    assert_array(counts, nc)
    assert fnp.unique_counts(x)._fields == ("values", "counts")
    assert_array(fnp.unique_inverse(x).inverse_indices, ninv.reshape(x.shape))
    assert_array(fnp.unique_values(x), nv)
    assert_array(fg.jit(lambda v: fnp.unique_values(v, size=4))(x), [1, 2, 3, 1])


# -- type checks, angle, spacing ----------------------------------------------------------------


def test_type_checks():
    assert fnp.isscalar(1.0) and fnp.isscalar(np.float32(1)) and fnp.isscalar(fnp.ones(()))
    assert not fnp.isscalar(fnp.ones(2)) and fnp.isscalar(np.ones(()))
    assert fnp.iterable(fnp.ones(2)) and not fnp.iterable(fnp.ones(())) and not fnp.iterable(1)
    assert fnp.isrealobj(fnp.ones(2)) and not fnp.iscomplexobj(fnp.ones(2))
    assert fnp.iscomplexobj(1j) and fnp.iscomplexobj(np.ones(2, complex))
    assert_array(fnp.isreal(np.arange(3.0)), [True] * 3)
    assert_array(fnp.iscomplex(np.arange(3.0)), [False] * 3)
    assert fnp.isdtype(np.float32, "real floating") and fnp.isdtype(np.int8, ("integral", "bool"))
    assert not fnp.isdtype(np.uint8, "signed integer") and fnp.isdtype(np.int32, np.int32)
    with pytest.raises(ValueError, match="unknown kind"):
        fnp.isdtype(np.int32, "integer")
    assert fnp.issubdtype(np.complex64, fnp.complexfloating)


def test_angle_and_spacing():
    x = np.array([1.0, -1.0, 0.0, -0.0, 3.5, -np.inf], F32)
    assert_array(fnp.angle(x), np.angle(x))
    assert_array(fnp.angle(x, deg=True), np.angle(x, deg=True), rtol=1e-6)
    assert fnp.angle(np.array([1, -1])).dtype == np.float32
    y = np.array([1.0, -1.0, 0.0, 1e30, -3e-39, 65504], F32)
    assert_array(fnp.spacing(y), np.spacing(y), rtol=0, atol=0)
    assert_array(fg.jit(fnp.spacing)(y), np.spacing(y), rtol=0, atol=0)


# -- windows and i0 -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["bartlett", "blackman", "hamming", "hanning"])
@pytest.mark.parametrize("m", [0, 1, 2, 5, 12])
def test_windows_match_numpy(name, m):
    got = getattr(fnp, name)(m)
    assert_array(got, getattr(np, name)(m), dtype=np.float32, atol=2e-7)


def test_kaiser_and_i0(x64):
    for m, beta in [(0, 1.0), (1, 2.0), (6, 2.5), (11, 8.0)]:
        assert_array(fnp.kaiser(m, beta), np.kaiser(m, beta), rtol=1e-5, atol=1e-7)
    x = np.linspace(-6, 6, 13)
    assert_array(fnp.i0(x), np.i0(x), rtol=2e-6)
    assert fnp.i0(np.array([1, 2], np.int32)).dtype == np.float32
    check_grads(fnp.i0, (np.array([-1.7, -0.4, 0.6, 1.9]),), order=1)


# -- gradient, trapezoid, unwrap -----------------------------------------------------------------


def test_gradient_matches_numpy(x64):
    f = rng.standard_normal((4, 5)).astype(F32)
    for got, ref in zip(fnp.gradient(f), np.gradient(f)):
        assert_array(got, ref, rtol=1e-5, atol=1e-6)
    assert_array(fnp.gradient(f, axis=1), np.gradient(f, axis=1), rtol=1e-5)
    coords = np.array([0.0, 1, 3, 4, 7], F32)
    assert_array(
        fnp.gradient(f, 2.0, coords)[1], np.gradient(f, 2.0, coords)[1], rtol=1e-5, atol=1e-6
    )
    assert_array(fnp.gradient(f[0], coords), np.gradient(f[0], coords), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="edge_order=2"):
        fnp.gradient(f, edge_order=2)
    check_grads(
        lambda v: fnp.gradient(v, coords.astype(np.float64)), (f[0].astype(np.float64),), order=1
    )


def test_trapezoid_and_unwrap_match_numpy(x64):
    y = rng.standard_normal((3, 6)).astype(F32)
    x = np.sort(rng.uniform(0, 5, 6)).astype(F32)
    assert_array(fnp.trapezoid(y), np.trapezoid(y), rtol=1e-5, atol=1e-6)
    assert_array(fnp.trapezoid(y, x), np.trapezoid(y, x), rtol=1e-5, atol=1e-6)
    assert_array(fnp.trapezoid(y, dx=0.5, axis=0), np.trapezoid(y, dx=0.5, axis=0), rtol=1e-5)
    check_grads(
        lambda a, b: fnp.trapezoid(a, b), (y.astype(np.float64), x.astype(np.float64)), order=1
    )
    p = np.cumsum(rng.uniform(-3, 3, (2, 30)), axis=1).astype(F32)
    wrapped = np.angle(np.exp(1j * p)).astype(F32)
    assert_array(fnp.unwrap(wrapped), np.unwrap(wrapped), rtol=1e-4, atol=1e-4)
    assert_array(
        fnp.unwrap(wrapped, discont=4.0, axis=0),
        np.unwrap(wrapped, 4.0, axis=0),
        rtol=1e-4,
        atol=1e-4,
    )
    assert_array(fnp.unwrap(np.array([0, 3, 7]), period=6), np.unwrap([0, 3, 7], period=6))
    loop = np.stack([np.asarray(fnp.unwrap(r)) for r in wrapped])
    assert_array(fg.vmap(fnp.unwrap)(wrapped), loop)
    assert_array(fg.jit(fnp.unwrap)(wrapped), fnp.unwrap(wrapped))


# -- vectorize, apply_along_axis, apply_over_axes, piecewise -----------------------------------


def test_vectorize(x64):
    add = fnp.vectorize(lambda a, b: a * 2 + b)
    assert_array(
        add(np.ones(3, F32), np.arange(2.0, dtype=F32)[:, None]),
        2 + np.arange(2.0)[:, None] + np.zeros(3),
    )
    dot = fnp.vectorize(lambda a, b: fnp.sum(a * b), signature="(n),(n)->()")
    a, b = rng.standard_normal((4, 3)).astype(F32), rng.standard_normal(3).astype(F32)
    assert_array(dot(a, b), a @ b, rtol=1e-5)
    outer = fnp.vectorize(
        lambda u, v: (u[:, None] * v[None, :], u.sum()), signature="(m),(n)->(m,n),()"
    )
    o, s = outer(a, a[:, :2])
    assert o.shape == (4, 3, 2) and s.shape == (4,)
    assert_array(o, a[:, :, None] * a[:, None, :2], rtol=1e-6)
    scale = fnp.vectorize(lambda v, k: v * k, excluded={1})
    assert_array(scale(np.arange(3.0), 2.0), [0.0, 2, 4])
    assert_array(fg.jit(dot)(a, b), dot(a, b))
    check_grads(lambda x: dot(x, b.astype(np.float64)), (a.astype(np.float64),), order=1)
    with pytest.raises(ValueError, match="not a valid gufunc signature"):
        fnp.vectorize(lambda a: a, signature="(n)->")
    with pytest.raises(ValueError, match="inconsistent size for core dimension 'n'"):
        dot(np.ones((2, 3)), np.ones(4))


def test_apply_along_axis_over_axes_and_piecewise(x64):
    x = rng.standard_normal((2, 3, 4)).astype(F32)
    f = lambda v: fnp.cumsum(v) * v[0]  # noqa: E731
    for axis in range(3):
        assert_array(
            fnp.apply_along_axis(f, axis, x),
            np.apply_along_axis(lambda v: np.cumsum(v) * v[0], axis, x),
            rtol=1e-5,
            atol=1e-6,
        )
    assert_array(fnp.apply_along_axis(lambda v: v.sum(), 1, x), x.sum(1), rtol=1e-5)
    assert_array(
        fnp.apply_over_axes(fnp.sum, x, [0, 2]), np.apply_over_axes(np.sum, x, [0, 2]), rtol=1e-5
    )
    v = np.linspace(-2, 2, 9, dtype=F32)
    conds = [v < -1, (v >= -1) & (v < 1)]
    funcs = [lambda t: -t, lambda t: t * t, 7.0]
    assert_array(fnp.piecewise(v, conds, funcs), np.piecewise(v, conds, funcs))
    assert_array(fnp.piecewise(v, [v > 0], [lambda t: t]), np.piecewise(v, [v > 0], [lambda t: t]))
    check_grads(
        lambda t: fnp.piecewise(t, [t < 0], [lambda s: s * s, lambda s: fnp.sin(s)]),
        (np.array([-1.5, -0.5, 0.5, 1.5]),),
        order=1,
    )


# -- functional updates ---------------------------------------------------------------------------


def test_place_fill_diagonal_put_along_axis_mask_indices(x64):
    a = np.arange(6)
    ref = a.copy()
    np.place(ref, a % 2 == 0, [10, 20])
    assert_array(fnp.place(a, a % 2 == 0, np.array([10, 20]), inplace=False), ref)
    with pytest.raises(ValueError, match="inplace=False"):
        fnp.place(a, a > 0, np.array([1]))
    for shape, val in [((3, 4), 5.0), ((4, 3), np.array([1.0, 2.0])), ((3, 3, 3), 2.0)]:
        ref = np.zeros(shape)
        np.fill_diagonal(ref, val)
        assert_array(fnp.fill_diagonal(np.zeros(shape, F32), val, inplace=False), ref)
    m = rng.standard_normal((3, 4)).astype(F32)
    idx = np.array([[0, 2], [1, 1], [3, 0]])
    vals = np.array([[7.0, 8], [9, 9], [5, 6]], F32)
    ref = m.copy()
    np.put_along_axis(ref, idx, vals, axis=1)
    assert_array(fnp.put_along_axis(m, idx, vals, 1, inplace=False), ref)
    ref = m.copy()
    np.put_along_axis(ref, np.array([1, 5]), np.array([7.0, 8.0]), axis=None)
    assert_array(
        fnp.put_along_axis(m, np.array([1, 5]), np.array([7.0, 8.0]), None, inplace=False), ref
    )
    for got, want in zip(fnp.mask_indices(4, fnp.triu, 1), np.mask_indices(4, np.triu, 1)):
        assert_array(got, want)
    check_grads(
        lambda v: fnp.fill_diagonal(v, 0.0, inplace=False), (m.astype(np.float64),), order=1
    )


def test_matvec_and_vecmat():
    a = rng.standard_normal((2, 3, 4)).astype(F32)
    v = rng.standard_normal(4).astype(F32)
    assert_array(fnp.matvec(a, v), np.einsum("bij,j->bi", a, v), rtol=1e-5, atol=1e-6)
    w = rng.standard_normal((5, 1, 3)).astype(F32)
    assert_array(fnp.vecmat(w, a), np.einsum("...i,...ij->...j", w, a), rtol=1e-5, atol=1e-6)


# -- histograms -----------------------------------------------------------------------------------


def test_histograms_match_numpy():
    x = rng.standard_normal(200).astype(F32)
    for bins, rng_ in [(10, None), (4, (-1.0, 1.0)), (np.array([-3.0, -1, 0, 0.5, 3]), None)]:
        h, e = fnp.histogram(x, bins=bins, range=rng_)
        nh, ne = np.histogram(x, bins=bins, range=rng_)
        assert_array(e, ne, rtol=1e-5, atol=1e-6)
        assert_array(h, nh)
        h, _ = fnp.histogram(x, bins=bins, range=rng_, density=True)
        assert_array(h, np.histogram(x, bins=bins, range=rng_, density=True)[0], rtol=1e-4)
    w = rng.uniform(0, 1, 200).astype(F32)
    assert_array(fnp.histogram(x, 5, weights=w)[0], np.histogram(x, 5, weights=w)[0], rtol=1e-5)
    assert_array(fnp.histogram_bin_edges(x, 3, (0, 6)), np.histogram_bin_edges(x, 3, (0, 6)))
    assert_array(fnp.histogram(np.ones(3, F32), 2)[1], np.histogram(np.ones(3), 2)[1])
    y = rng.standard_normal(200).astype(F32)
    h, ex, ey = fnp.histogram2d(x, y, bins=(3, 4))
    nh, nex, ney = np.histogram2d(x, y, bins=(3, 4))
    assert_array(h, nh)
    assert_array(ex, nex, atol=1e-6)
    s = rng.standard_normal((100, 3)).astype(F32)
    h, edges = fnp.histogramdd(s, bins=(2, 3, 4), density=True)
    nh, nedges = np.histogramdd(s, bins=(2, 3, 4), density=True)
    assert_array(h, nh, rtol=1e-4)
    f = fg.jit(lambda v: fnp.histogram(v, 6, range=(-2.0, 2.0))[0])
    assert_array(f(x), np.histogram(x, 6, range=(-2.0, 2.0))[0])


# -- mgrid, ogrid, r_, c_, s_ ---------------------------------------------------------------------


def test_index_builders_match_numpy():
    assert_array(fnp.mgrid[0:4, 0:3], np.mgrid[0:4, 0:3])
    assert_array(fnp.mgrid[0:1:5j], np.mgrid[0:1:5j].astype(F32))
    assert_array(fnp.mgrid[-1:1:0.5], np.mgrid[-1:1:0.5])
    for got, want in zip(fnp.ogrid[0:4, 1:3], np.ogrid[0:4, 1:3]):
        assert_array(got, want)
    assert_array(fnp.r_[1:4, 0, np.array([7, 8])], np.r_[1:4, 0, np.array([7, 8])])
    assert_array(
        fnp.r_["0,2", np.array([1, 2]), np.array([3, 4])],
        np.r_["0,2", np.array([1, 2]), np.array([3, 4])],
    )
    assert_array(
        fnp.r_["1,3,1", np.ones((2, 2)), np.zeros((2, 2))],
        np.r_["1,3,1", np.ones((2, 2)), np.zeros((2, 2))],
    )
    assert_array(fnp.c_[np.arange(3), np.ones((3, 2))], np.c_[np.arange(3), np.ones((3, 2))])
    assert_array(fnp.r_[0:1:3j], np.r_[0:1:3j])
    assert fnp.s_[1:2, ::2] == np.s_[1:2, ::2] and fnp.index_exp[3] == (3,)
    with pytest.raises(ValueError, match="not supported"):
        fnp.r_["r", np.ones(2)]


# -- bit packing, interop -------------------------------------------------------------------------


@pytest.mark.parametrize("bitorder", ["big", "little"])
def test_packbits_unpackbits_match_numpy(bitorder):
    bits = rng.integers(0, 2, (3, 11, 5)).astype(bool)
    for axis in (None, 0, 1, 2):
        packed = np.packbits(bits, axis, bitorder)
        assert_array(fnp.packbits(bits, axis, bitorder), packed, dtype=np.uint8)
        for count in (None, 3, -2, 50):
            assert_array(
                fnp.unpackbits(packed, axis, count, bitorder),
                np.unpackbits(packed, axis, count, bitorder),
            )
    assert_array(fg.jit(fnp.packbits)(bits), np.packbits(bits))
    with pytest.raises(TypeError, match="uint8"):
        fnp.unpackbits(np.ones(2, np.int32))


def test_interop_functions(tmp_path):
    assert_array(fnp.frombuffer(np.arange(3, dtype=F32).tobytes(), dtype=F32), [0.0, 1, 2])
    assert_array(fnp.fromstring("1 2 3", dtype=int, sep=" "), [1, 2, 3])
    assert_array(fnp.from_dlpack(np.arange(4.0, dtype=F32)), np.arange(4.0))
    path = tmp_path / "a.npy"
    fnp.save(path, fnp.arange(3.0))
    loaded = fnp.load(path)
    assert isinstance(loaded, fg.Array)
    assert_array(loaded, [0.0, 1, 2])
    buf = io.BytesIO()
    fnp.savez(buf, a=np.ones(2))
    assert fnp.array_repr(fnp.ones(2)) == np.array_repr(np.ones(2, F32))
    assert fnp.array_str(fnp.ones(2)) == np.array_str(np.ones(2, F32))
    with fnp.printoptions(precision=2):
        assert fnp.get_printoptions()["precision"] == 2
    path_, report = fnp.einsum_path(
        "ij,jk,kl->il", np.ones((2, 3)), np.ones((3, 4)), np.ones((4, 5))
    )
    assert len(path_) == 2 and all(isinstance(p, tuple) for p in path_) and "scaling" in report
    assert issubclass(fnp.ComplexWarning, Warning)


# -- ufunc objects --------------------------------------------------------------------------------


UFUNC_NAMES = [
    "add",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "logaddexp",
    "logaddexp2",
    "logical_and",
    "logical_or",
    "logical_xor",
    "maximum",
    "minimum",
    "multiply",
    "negative",
    "subtract",
]


@pytest.mark.parametrize("name", UFUNC_NAMES)
def test_jax_ufunc_objects_follow_numpy_s_methods(name):
    # JAX 0.10.2 makes exactly these jnp.ufunc objects (nin, nout and identity as listed by
    # JAX); calls and methods agree with numpy's ufunc of the same name.
    u, nu = getattr(fnp, name), getattr(np, name)
    assert isinstance(u, fnp.ufunc) and u.__name__ == name
    assert (u.nin, u.nout) == (nu.nin, 1)
    identities = {"add": 0, "multiply": 1, "bitwise_and": -1, "bitwise_or": 0}
    identities.update(bitwise_xor=0, logical_and=True, logical_or=False, logical_xor=False)
    identities.update(logaddexp=-np.inf, logaddexp2=-np.inf)
    assert u.identity == identities.get(name)
    logical = name.startswith(("bitwise", "logical"))
    x = (
        np.array([[1, 6, 3], [4, 5, 2]], np.int32)
        if logical
        else np.array([[1.0, 6.0, 3.0], [4.0, 5.0, 2.0]], F32)
    )
    if u.nin == 1:
        assert_array(u(x), nu(x))
        return
    assert_array(u(x, x[::-1]), nu(x, x[::-1]))
    assert_array(u.outer(x[0], x[1]), nu.outer(x[0], x[1]))
    for axis in (0, 1) if name == "subtract" else (0, 1, None):  # (not reorderable)
        want = nu.reduce(x, axis=axis)
        assert_array(u.reduce(x, axis=axis), want, dtype=np.asarray(want).dtype, rtol=1e-6)
    assert_array(u.reduce(x, axis=1, keepdims=True), nu.reduce(x, axis=1, keepdims=True))
    assert_array(u.accumulate(x, axis=1), nu.accumulate(x, axis=1), rtol=1e-6)
    if not name.startswith("logical"):  # JAX's reduceat keeps the input dtype (ints here)
        assert_array(u.reduceat(x[0], np.array([0, 2])), nu.reduceat(x[0], [0, 2]), rtol=1e-6)
    ref = x[0].astype(nu(x[0], x[0]).dtype)  # JAX computes at in func's result dtype
    nu.at(ref, [0, 0, 2], x[1, :3])
    assert_array(u.at(x[0], np.array([0, 0, 2]), x[1, :3], inplace=False), ref, rtol=1e-6)
    assert_array(fg.jit(u.reduce)(x), nu.reduce(x), rtol=1e-6)


def test_add_and_multiply_at_of_a_bool_array_and_ufunc_gradients():
    # JAX computes add.at / multiply.at of a bool array in int32 and casts back.
    b = np.array([True, False, False])
    assert_array(fnp.add.at(b, np.array([1, 1]), True, inplace=False), [True, True, False])
    assert_array(fnp.multiply.at(b, np.array([0]), False, inplace=False), [False, False, False])
    assert_array(fnp.add.reduce(np.ones(3, np.int8)), np.int32(3), dtype=np.int32)  # as sum
    v = np.array([2.0, 3.0, 4.0], F32)
    assert_array(fg.grad(fnp.multiply.reduce)(v), [12.0, 8.0, 6.0])
    assert_array(fg.grad(lambda v: fnp.add.accumulate(v).sum())(v), [3.0, 2.0, 1.0])
    assert repr(fnp.add) == "<jnp.ufunc 'add'>" and fnp.add(1, 2).weak_type


def test_frompyfunc_ufunc_methods_follow_numpy():
    f = lambda a, b: a * 2 + b  # noqa: E731  (not associative: order matters)
    u = fnp.frompyfunc(f, nin=2, nout=1)
    nu = np.frompyfunc(f, 2, 1)
    assert (u.nin, u.nout, u.nargs, u.identity, u.__name__) == (2, 1, 2, None, "<lambda>")
    x = np.arange(1.0, 7.0, dtype=F32).reshape(2, 3)
    assert_array(u(x, 1.0), f(x, 1.0))
    assert_array(u.outer(x[0], x[1, :2]), nu.outer(x[0], x[1, :2]).astype(F32))
    for axis in (0, 1, -1):
        assert_array(u.reduce(x, axis=axis), nu.reduce(x, axis=axis).astype(F32))
    assert_array(u.reduce(x, axis=None), np.asarray(nu.reduce(x.ravel()), F32))
    with pytest.raises(ValueError, match="at most one axis"):
        u.reduce(x, axis=(0, 1))
    assert_array(
        u.reduce(x, axis=1, keepdims=True), nu.reduce(x, axis=1, keepdims=True).astype(F32)
    )
    assert_array(u.reduce(x, axis=0, initial=5.0), nu.reduce(x, axis=0, initial=5.0).astype(F32))
    assert_array(u.accumulate(x, axis=1), nu.accumulate(x, axis=1).astype(F32))
    assert_array(u.reduceat(x[0], np.array([0, 2, 1])), nu.reduceat(x[0], [0, 2, 1]).astype(F32))
    a = np.arange(5.0, dtype=F32)
    ref = a.astype(object)
    nu.at(ref, [0, 0, 3], 1.0)
    assert_array(u.at(a, np.array([0, 0, 3]), 1.0, inplace=False), ref.astype(F32))
    m = fnp.frompyfunc(fnp.maximum, 2, 1, identity=-np.inf)
    assert float(m.reduce(np.zeros(0, F32))) == -np.inf
    with pytest.raises(ValueError, match="no identity"):
        u.reduce(np.zeros(0, F32))
    with pytest.raises(ValueError, match="inplace=False"):
        u.at(a, np.array([0]), 1.0)
    assert_array(fg.jit(u.accumulate)(x[0]), u.accumulate(x[0]))
    check_grads(lambda v: u.reduce(v), (x[0].astype(np.float64),), order=1)
    loop = np.stack([np.asarray(u.reduce(r)) for r in x])
    assert_array(fg.vmap(u.reduce)(x), loop)
