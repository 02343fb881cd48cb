"""The GPU matmul's tile configurations (``schemes.GemmTile``) and the split contractions a
real GPU takes where tiles are few (``schemes.gemm_split``), run on whatever adapter is here
with the adapter taken for a discrete GPU, against float64 numpy; and the tree reduction a
nested reduction gets on a real GPU (``schemes.reduction_work``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.lowering import compile_jaxpr
from fungrad.lowering.gpu import schemes as S


def _runtime():
    try:
        from fungrad.lowering.gpu import runtime

        return runtime.runtime()
    except Exception:
        return None


RT = _runtime()
pytestmark = pytest.mark.skipif(RT is None, reason="no WebGPU adapter")


@pytest.fixture
def real_gpu(monkeypatch):
    """The runtime's adapter taken for a discrete GPU while the test compiles (the same for
    every example a hypothesis test draws)."""
    monkeypatch.setitem(RT.info, "adapter_type", "DiscreteGPU")
    return RT


def _run(f, *args):
    exe = compile_jaxpr(fg.make_jaxpr(f)(*args), "gpu", "test")
    return [np.asarray(o) for o in exe.call(list(args))], exe


TILES = [
    S.GemmTile(64, 64, 16, 16, 16),
    S.GemmTile(64, 64, 16, 16, 32),
    S.GemmTile(128, 128, 16, 16, 8),
    S.GemmTile(128, 64, 16, 16, 16),
    S.GemmTile(64, 128, 16, 8, 16),
    S.GemmTile(32, 32, 16, 16, 16),
    S.GemmTile(32, 32, 8, 8, 8),
]


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    tile=st.sampled_from(TILES),
    m=st.integers(1, 150),
    k=st.integers(1, 300),
    n=st.integers(1, 150),
    trans=st.sampled_from(["nn", "tn", "nt"]),
    fill=st.sampled_from([0, 1024]),
    seed=st.integers(0, 2**31),
)
def test_every_tile_and_split_matches_numpy(real_gpu, tile, m, k, n, trans, fill, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((k, m) if trans[0] == "t" else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if trans[1] == "t" else (k, n)).astype(np.float32)
    sa = (lambda v: v.T) if trans[0] == "t" else (lambda v: v)
    sb = (lambda v: v.T) if trans[1] == "t" else (lambda v: v)
    old = S.GEMM_TILE_GPU, S.GEMM_FILL_GROUPS
    S.GEMM_TILE_GPU, S.GEMM_FILL_GROUPS = tile, fill
    try:
        (o,), exe = _run(lambda p, q: sa(p) @ sb(q), a, b)
    finally:
        S.GEMM_TILE_GPU, S.GEMM_FILL_GROUPS = old
    ref = sa(a.astype(np.float64)) @ sb(b.astype(np.float64))
    np.testing.assert_allclose(o, ref, rtol=2e-5, atol=2e-5 * np.sqrt(k))
    sources = [s.source for s in exe.shaders]
    if any("ta: array" in s for s in sources):
        assert any(f"@workgroup_size({tile.threads_x}, {tile.threads_y})" in s for s in sources)


def test_few_tiles_split_the_contraction_on_a_real_gpu_only(real_gpu, monkeypatch):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((128, 784)).astype(np.float32)
    b = rng.standard_normal((784, 512)).astype(np.float32)
    (o,), exe = _run(lambda p, q: p @ q, a, b)
    names = [s.name for s in exe.shaders]
    assert any(n.endswith("_split") for n in names) and any(n.endswith("_sum") for n in names)
    split = next(s for s in exe.shaders if s.name.endswith("_split"))
    assert split.grid[2] > 1 and split.grid[0] * split.grid[1] * split.grid[2] <= 2 * 1024
    np.testing.assert_allclose(o, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)
    monkeypatch.setitem(RT.info, "adapter_type", "CPU")
    (o2,), exe2 = _run(lambda p, q: p @ q, a, b)
    assert [s.name for s in exe2.shaders] == ["dot_general"]
    np.testing.assert_allclose(o2, o, rtol=1e-5, atol=1e-4)


def test_batched_split_and_many_tiles_stay_whole(real_gpu):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 40, 200)).astype(np.float32)
    b = rng.standard_normal((3, 200, 30)).astype(np.float32)
    (o,), exe = _run(lambda p, q: p @ q, a, b)
    assert any(s.name.endswith("_split") for s in exe.shaders)
    np.testing.assert_allclose(o, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)
    old = S.GEMM_FILL_GROUPS
    S.GEMM_FILL_GROUPS = 4  # three batch matrices of one tile: 3 < 4 groups
    try:
        a1, b1 = a[:, :, :16], b[:, :16, :]  # k = 16 < GEMM_SPLIT_MIN_K: no ranges to split
        (o1,), exe1 = _run(lambda p, q: p @ q, a1, b1)
    finally:
        S.GEMM_FILL_GROUPS = old
    assert not any(s.name.endswith("_split") for s in exe1.shaders)
    np.testing.assert_allclose(o1, a1.astype(np.float64) @ b1, rtol=1e-5, atol=1e-5)


def test_gemm_tile_is_checked():
    with pytest.raises(ValueError, match="GemmTile"):
        S.GemmTile(40, 64, 16, 16, 16)
    with pytest.raises(ValueError, match="at most 256"):
        S.GemmTile(64, 64, 32, 16, 16)


def _loss(logits, y):
    return -fnp.mean(fnp.sum(y * fg.nn.log_softmax(logits), axis=-1))


def test_a_nested_reduction_is_a_tree_on_a_real_gpu(real_gpu, monkeypatch):
    """A loss summing the rows' sums of 128 x 10 runs 1408 serial iterations in one
    invocation: on a real GPU it is a workgroup tree though its own length is 128."""
    monkeypatch.delenv("FUNGRAD_GPU_TREE_REDUCE", raising=False)
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((128, 10)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)]
    (o,), exe = _run(_loss, logits, y)
    trees = [s for s in exe.shaders if "fg_tv" in s.source]
    assert trees and max(s.loop_iterations for s in trees) < 128
    shifted = logits - logits.max(1, keepdims=True)
    ref = -np.mean(np.sum(y * (shifted - np.log(np.exp(shifted).sum(1, keepdims=True))), -1))
    np.testing.assert_allclose(o, ref, rtol=1e-5)
    monkeypatch.setitem(RT.info, "adapter_type", "CPU")
    (o2,), exe2 = _run(_loss, logits, y)
    assert not any("fg_tv" in s.source for s in exe2.shaders)
    np.testing.assert_allclose(o2, ref, rtol=1e-5)


@pytest.mark.parametrize(
    "shape, dispatches",
    [((10_000,), 4), ((3, 5000), 4), ((2, 300), 4), ((300, 40), 2), ((2, 256), 2)],
)
def test_real_gpu_scan_blocks_grow_with_the_line(real_gpu, monkeypatch, shape, dispatches):
    """On a real GPU, "auto" splits lines into blocks of about sqrt(n / 2), at least 128
    (first element, totals, prefixes, scan: four dispatches); lines of at most two blocks
    stay serial (two); values as numpy's."""
    monkeypatch.delenv("FUNGRAD_GPU_SCAN", raising=False)
    assert [S.gpu_scan_block(n) for n in (100, 1024, 1 << 16, 1 << 22, 1 << 26)] == [
        128,
        128,
        256,
        2048,
        4096,
    ]
    x = np.random.default_rng(5).integers(-3, 4, shape).astype(np.float32)
    (o,), exe = _run(lambda v: fnp.cumsum(v, axis=-1), x)
    np.testing.assert_array_equal(o, np.cumsum(x, axis=-1))
    assert exe.num_dispatches == dispatches
