"""Products with long contractions accumulate with bounded error (issue 15 item 1): against the
float64 product, every output within ``C * eps * log2(k) * (|a| @ |b|)``.

The data are positive and of mixed magnitudes (2^-6 .. 2^6), so the rounding errors of one
accumulator running through all k do not cancel: the products fungrad once made (BLAS's sdot and
sgemv under jit) were ~1.3x this bound off at k = 2^16 and ~6x at 2^18, numpy's eager sdot
1.04x at 2^18, while blocked partial sums combined pairwise stay below a quarter of it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import nn

EPS = float(np.finfo(np.float32).eps)
C = 1.0


def mixed(rng, shape):
    """Positive float32 values of magnitudes 2^-6 .. 2^6."""
    return (rng.uniform(0.5, 1.0, shape) * np.exp2(rng.integers(-6, 7, shape))).astype(np.float32)


def assert_bounded(got, f, a, b, k):
    want = f(a.astype(np.float64), b.astype(np.float64))
    scale = f(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    got = np.asarray(got, np.float64)
    assert got.shape == want.shape
    err = np.abs(got - want) / (EPS * np.log2(k) * scale)
    assert np.max(err) <= C, f"{np.max(err):.2f} x the bound"


# (name, product, lhs shape, rhs shape) for k = 2^18 (2^16 where the matrix is 64 wide)
K = 1 << 18
CASES = [
    ("dot", lambda a, b: a @ b, (K,), (K,)),
    ("A @ v", lambda a, b: a @ b, (4, K), (K,)),
    ("v @ A.T", lambda a, b: a @ b.T, (K,), (3, K)),
    ("A @ column", lambda a, b: a @ b, (2, K), (K, 1)),
    ("batched A @ v", lambda a, b: (a @ b[..., None])[..., 0], (2, 3, K // 4), (2, K // 4)),
    ("v @ A", lambda a, b: a @ b, (K // 4,), (K // 4, 64)),
    ("A.T @ v", lambda a, b: a.T @ b, (K // 4, 64), (K // 4,)),
]


@pytest.mark.parametrize("name,f,lshape,rshape", CASES, ids=[c[0] for c in CASES])
def test_issue15_long_contractions_have_bounded_error(name, f, lshape, rshape):
    rng = np.random.default_rng(len(name))
    a, b = mixed(rng, lshape), mixed(rng, rshape)
    k = lshape[-1] if name != "A.T @ v" else lshape[0]
    x, y = fnp.asarray(a), fnp.asarray(b)
    assert_bounded(fg.jit(f)(x, y), f, a, b, k)
    assert_bounded(f(x, y), f, a, b, k)  # eager


@settings(max_examples=8, deadline=None)
@given(
    k=st.integers(5000, 40000),
    w=st.integers(0, 2),
    along_rows=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_issue15_matrix_vector_products_bounded_error_any_length(k, w, along_rows, seed):
    """Ragged lengths (partial blocks) and both layouts of the matrix, jit and eager. (Under
    jit, a vector times a matrix read down fewer than 64 columns is still a gemm, BLAS's
    sgemv for long k: 0.8x the bound at k = 40000, 6x at 2^18; not tested here.)"""
    width = ((1, 3, 100) if along_rows else (1, 64, 100))[w]
    rng = np.random.default_rng(seed)
    v = mixed(rng, (k,))
    if along_rows:  # contraction along the matrix's rows in memory: A @ v
        a, f = mixed(rng, (width, k)), (lambda a, v: a @ v)
        args = (a, v)
    else:  # down its columns: v @ A
        a, f = mixed(rng, (k, width)), (lambda v, a: v @ a)
        args = (v, a)
    x, y = map(fnp.asarray, args)
    assert_bounded(fg.jit(f)(x, y), f, *args, k)
    assert_bounded(f(x, y), f, *args, k)


def test_issue15_grads_of_matvecs():
    """Gradients through the products of a batch-1 MLP (forward x @ W: a column dot; backward
    dy @ W^T: a row dot; x^T @ dy: an outer product; W^T @ h: a column dot) against the
    gradient written out by hand in float64, jit and eager."""
    rng = np.random.default_rng(3)
    w1 = (rng.standard_normal((300, 200)) / np.sqrt(300)).astype(np.float32)
    w2 = (rng.standard_normal((200, 100)) / np.sqrt(200)).astype(np.float32)
    x = rng.standard_normal((1, 300)).astype(np.float32)

    def loss(w1, w2, x):
        h = fnp.tanh(x @ w1)
        return fnp.sum(nn.relu(h @ w2) ** 2) + fnp.sum(w2.T @ h[0])

    def ref(w1, w2, x):  # the same gradient by hand, in float64
        z1 = x @ w1
        h = np.tanh(z1)
        z2 = h @ w2
        dz2 = 2 * np.maximum(z2, 0)
        dh = dz2 @ w2.T + w2.sum(1)[None, :]
        dz1 = dh * (1 - h * h)
        return x.T @ dz1, h.T @ dz2 + h.T * np.ones((1, 100)), dz1 @ w1.T

    want = ref(*(t.astype(np.float64) for t in (w1, w2, x)))
    args = tuple(map(fnp.asarray, (w1, w2, x)))
    for grads in (
        fg.jit(fg.grad(loss, argnums=(0, 1, 2)))(*args),
        fg.grad(loss, argnums=(0, 1, 2))(*args),
    ):
        for g, r in zip(grads, want):
            np.testing.assert_allclose(np.asarray(g), r, rtol=2e-5, atol=2e-5 * np.abs(r).max())
