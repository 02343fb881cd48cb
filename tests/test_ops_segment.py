"""fungrad.ops segment reductions against a Python loop over numpy rows; gradients
(check_grads), jit against eager, vmap against a loop, empty segments, dropped ids, errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import ops
from fungrad.testing import check_grads

_REF = {
    ops.segment_sum: (np.add, 0.0),
    ops.segment_prod: (np.multiply, 1.0),
    ops.segment_max: (np.maximum, -np.inf),
    ops.segment_min: (np.minimum, np.inf),
}


def _loop(fn, data, ids, n):
    op, init = _REF[fn]
    out = np.full((n,) + data.shape[1:], init, data.dtype)
    for row, s in zip(data, ids):
        if 0 <= s < n:
            out[s] = op(out[s], row)
    return out


@settings(max_examples=20, deadline=None)
@given(
    rows=st.integers(0, 7),
    n=st.integers(0, 5),
    seed=st.integers(0, 99),
    fn=st.sampled_from(list(_REF)),
)
def test_matches_loop(rows, n, seed, fn):
    rng = np.random.RandomState(seed)
    data = rng.randn(rows, 2).astype(np.float32)
    ids = rng.randint(-1, n + 2, rows)  # some out of range: dropped
    np.testing.assert_allclose(
        np.asarray(fn(data, ids, num_segments=n)), _loop(fn, data, ids, n), rtol=1e-6
    )


def test_defaults_integers_and_transforms():
    ids = np.array([1, 0, 1, 1])
    np.testing.assert_array_equal(np.asarray(ops.segment_sum(np.arange(4), ids)), [1, 5])
    got = ops.segment_max(np.arange(4, dtype=np.int32), ids, 3)
    np.testing.assert_array_equal(np.asarray(got), [1, 3, np.iinfo(np.int32).min])
    d = fnp.arange(12.0).reshape(6, 2)
    seg = np.array([0, 0, 2, 2, 2, 1])
    check_grads(lambda x: ops.segment_sum(x, seg, 3), (d,), order=2, modes=("fwd", "rev"))
    # products differentiate for distinct ids (repeated ones are a TypeError, as in JAX)
    check_grads(
        lambda x: ops.segment_prod(x + 1.0, np.array([2, 0, 1, 3, 5, 4]), 6, unique_indices=True),
        (d,),
        order=1,
        modes=("fwd", "rev"),
        rtol=2e-2,
    )
    np.testing.assert_allclose(
        np.asarray(fg.jit(lambda x: ops.segment_max(x, seg, 3))(d)),
        np.asarray(ops.segment_max(d, seg, 3)),
    )
    rows = np.random.RandomState(0).randn(3, 4).astype(np.float32)
    ids4 = np.array([0, 1, 0, 1])
    vm = fg.vmap(lambda r: ops.segment_sum(r, ids4, 2))(rows)
    np.testing.assert_allclose(
        np.asarray(vm), np.stack([_loop(ops.segment_sum, r, ids4, 2) for r in rows]), rtol=1e-6
    )


def test_errors():
    with pytest.raises(TypeError, match="segment_sum: segment_ids must be integers"):
        ops.segment_sum(np.ones(2), np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="one id per row"):
        ops.segment_sum(np.ones(3), np.array([0, 1]))
    with pytest.raises(Exception, match="num_segments"):
        fg.jit(lambda i: ops.segment_sum(np.ones(2), i))(np.array([0, 1]))
    with pytest.raises(TypeError, match="num_segments must be a Python int"):
        ops.segment_sum(np.ones(2), np.array([0, 1]), num_segments=2.5)
