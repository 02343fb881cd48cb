"""Issue 15: programs nobody here wrote, where fungrad disagreed with JAX's documented
semantics. Each test names the behaviour and checks it against an independent reference
(float64 products, a Python loop, finite differences, JAX's documented promotion table)."""

import itertools

import numpy as np
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


@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3),
       st.sampled_from(["float32", "bool", "int32"]), st.integers(0, 2 ** 16))
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
