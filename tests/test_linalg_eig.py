"""The ``eig`` and ``geev`` primitives (fungrad/lax/linalg_eig.py): eigenvalues against numpy,
the eigen-equations of the right and left vectors and their normalization, eager against jit
(LAPACK geev under the complex split on the CPU), vmap against a loop, eigenvalue derivatives
against finite differences and JAX's numbers, NaN for input LAPACK cannot decompose, errors."""

from __future__ import annotations

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.lax import linalg as L
from fungrad.lax.linalg_eig import eig_p, geev_p
from fungrad.lowering.cpu import lapack
from fungrad.lowering.fusion import LoweringError
from fungrad.numpy import linalg_decomp as la
from fungrad.testing import check_grads
from fungrad.transforms.jvp import NotDifferentiableError


def _H(x):
    return np.conj(np.swapaxes(x, -1, -2))


def _check(a, w, vl, vr):
    n = a.shape[-1]
    tol = (
        (2e-5 if a.dtype == np.float32 else 1e-11) * max(n, 1) * max(1.0, np.abs(a).max(initial=0))
    )
    want = np.linalg.eigvals(a.astype(np.float64))
    np.testing.assert_allclose(np.sort_complex(w), np.sort_complex(want), atol=tol)
    np.testing.assert_allclose(a @ vr, vr * w[..., None, :], atol=tol * 4)
    np.testing.assert_allclose(_H(vl) @ a, w[..., :, None] * _H(vl), atol=tol * 4)
    if a.size == 0:
        return
    for v in (vl, vr):  # norm 1, largest component real
        np.testing.assert_allclose(np.linalg.norm(v, axis=-2), 1, atol=tol)
        big = np.take_along_axis(v, np.argmax(np.abs(v), axis=-2)[..., None, :], -2)
        np.testing.assert_allclose(big.imag, 0, atol=tol)


@pytest.mark.parametrize("shape", [(0, 0), (1, 1), (2, 2), (7, 7), (64, 64), (2, 3, 5, 5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_eig_eager_and_jit(shape, dtype, x64):
    a = np.random.default_rng(sum(shape)).standard_normal(shape).astype(dtype)
    cdt = np.complex64 if dtype == np.float32 else np.complex128
    eager = [np.asarray(t) for t in L.eig(a)]
    jitted = [np.asarray(t) for t in fg.jit(L.eig)(a)]
    assert [t.dtype for t in eager] == [cdt] * 3 and [t.dtype for t in jitted] == [cdt] * 3
    _check(a, *eager)
    _check(a, *jitted)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    # the same LAPACK routine on the same matrix; rounding (blocking, alignment) may still
    # change the order in which the QR iteration deflates eigenvalues
    np.testing.assert_allclose(
        np.sort_complex(jitted[0]), np.sort_complex(eager[0]), atol=tol * max(shape[-1], 1)
    )
    w, v = (np.asarray(t) for t in la.eig(a))
    if a.ndim == 2 and 0 < a.shape[-1] < 8:  # numpy: the same routine, right vectors only
        wn, vn = np.linalg.eig(a)
        np.testing.assert_allclose(w, wn, atol=tol * shape[-1])
        np.testing.assert_allclose(np.abs(v), np.abs(vn), atol=tol * shape[-1])
    wj, vj = (np.asarray(t) for t in fg.jit(la.eig)(a))
    np.testing.assert_allclose(a @ vj, vj * wj[..., None, :], atol=tol * max(shape[-1], 1) * 10)
    w_only = np.asarray(fg.jit(la.eigvals)(a))
    np.testing.assert_allclose(
        np.sort_complex(w_only), np.sort_complex(w), atol=tol * max(shape[-1], 1)
    )


def test_complex_pairs_and_real_form():
    a = np.array([[1.0, 2.0, 0.0], [-2.0, 1.0, 0.0], [0.0, 0.0, 3.0]], np.float32)
    w = np.asarray(la.eigvals(a))
    np.testing.assert_allclose(w, [1 + 2j, 1 - 2j, 3], atol=1e-6)
    wr, wi, vl, vr = (np.asarray(t) for t in geev_p.bind(a, compute_left=True, compute_right=True))
    ref = lapack.geev(a)  # eager runs numpy's eig: the same values, vectors up to phase
    np.testing.assert_allclose(wr + 1j * wi, ref[0] + 1j * ref[1], atol=1e-6)
    # jit calls LAPACK's geev from native code: the same packed decomposition
    jitted = fg.jit(lambda x: geev_p.bind(x, compute_left=True, compute_right=True))(a)
    for got, want in zip(jitted, ref[:4]):
        np.testing.assert_allclose(np.asarray(got), want, atol=1e-6)
    _check(a, w, *(np.asarray(t) for t in L.eig(a)[1:]))


def test_vmap_matches_loop(x64):
    a = np.random.default_rng(3).standard_normal((3, 4, 4))
    for f in (L.eig, la.eigvals, lambda x: geev_p.bind(x, compute_left=False, compute_right=True)):
        want = [np.stack(t) for t in zip(*(fg.tree_util.tree_leaves(f(x)) for x in a))]
        for got in (fg.vmap(f)(a), fg.vmap(f, in_axes=2)(np.moveaxis(a, 0, 2))):
            for g, w in zip(fg.tree_util.tree_leaves(got), want):
                np.testing.assert_allclose(np.asarray(g), w, atol=1e-12)


def test_eigenvalue_gradients(x64):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((4, 4))

    def parts(x):
        w = la.eigvals(x)
        return lax.real(w), lax.imag(w)

    check_grads(parts, (a,), order=1, modes=("fwd", "rev"))
    check_grads(fg.jit(parts), (a,), order=1, modes=("fwd", "rev"))
    # the closed form from numpy's V⁻¹ (checked once against JAX 0.10.2's numbers)
    b = np.array([[1.0, 2.0, 0.5], [-2.0, 1.0, 0.0], [0.3, 0.0, 3.0]])
    g = fg.grad(lambda x: fnp.sum(lax.imag(la.eigvals(x)) ** 2))(b)
    w, v = np.linalg.eig(b)
    u = np.linalg.inv(v).T  # columns: the rows of V⁻¹, so d w_j / dA = u_j v_jᵀ
    want = sum(2 * w[j].imag * np.imag(np.outer(u[:, j], v[:, j])) for j in range(3))
    np.testing.assert_allclose(np.asarray(g), want, atol=1e-10)
    with pytest.raises(TypeError, match="eig.*eigenvectors"):
        fg.grad(lambda x: fnp.sum(lax.real(la.eig(x)[1])))(a)
    with pytest.raises(NotDifferentiableError, match="geev"):
        fg.grad(lambda x: fnp.sum(geev_p.bind(x, compute_left=False, compute_right=False)[0]))(a)


def test_nan_input_and_errors():
    bad = np.full((2, 3, 3), np.nan, np.float32)
    bad[1] = np.diag([1.0, 2.0, 3.0])
    for f in (L.eig, fg.jit(L.eig)):
        outs = [np.asarray(t) for t in f(bad)]
        for o in outs:
            assert np.isnan(o[0]).all() and not np.isnan(o[1]).any()
    with pytest.raises(ValueError, match=r"eig.*square.*\(2, 3\)"):
        la.eig(np.ones((2, 3)))
    with pytest.raises(TypeError, match="eig.*int32"):
        eig_p.bind(
            np.eye(2, dtype=np.int32),
            compute_left_eigenvectors=True,
            compute_right_eigenvectors=True,
        )
    with pytest.raises(LoweringError, match="eig.*backend='cpu'"):
        fg.jit(la.eigvals, backend="gpu")(np.eye(3, dtype=np.float32))
