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
    S.GemmTile(64, 64, 16, 16, 16, vec=4),
    S.GemmTile(128, 64, 16, 16, 8, vec=4),
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
    with pytest.raises(ValueError, match="vec=2"):
        S.GemmTile(64, 64, 16, 16, 16, vec=2)
    with pytest.raises(ValueError, match="runs of 4"):
        S.GemmTile(64, 32, 16, 16, 16, vec=4)  # 4 x 2 per invocation
    with pytest.raises(ValueError, match="workgroup memory"):
        S.GemmTile(128, 128, 16, 16, 32, vec=4)  # 32 KiB
    assert str(S.GemmTile(128, 64, 16, 16, 8, vec=4)) == "128x64/16x16(8x4) k8 v4"
    assert str(S.GemmTile(128, 64, 16, 16, 8)) == "128x64/16x16(8x4) k8"


VEC_TILES = [
    S.GemmTile(64, 64, 16, 16, 8, vec=4),
    S.GemmTile(64, 64, 16, 16, 16, vec=4),
    S.GemmTile(128, 128, 16, 16, 8, vec=4),
    S.GemmTile(128, 128, 16, 16, 16, vec=4),
    S.GemmTile(128, 64, 16, 16, 8, vec=4),
    S.GemmTile(128, 64, 16, 16, 16, vec=4),
]
#: (m, k, n, transposes): odd edges, a contraction longer than a vec4 tile's block, empty
VEC_SHAPES = [
    (1, 1, 1, "nn"),
    (5, 3, 7, "tn"),
    (67, 33, 130, "nt"),
    (130, 33, 67, "tt"),
    (9, 3000, 6, "nn"),
    (0, 5, 4, "nn"),
    (3, 0, 4, "tn"),
]


@pytest.fixture
def vec_tile(real_gpu, monkeypatch, request):
    """Every product a Gemm step (``policy.GEMM_MIN_FLOPS`` 0) in ``request.param``, one
    dispatch (no split for filling) unless a test sets ``S.GEMM_FILL_GROUPS``."""
    from fungrad.lowering.gpu import policy

    monkeypatch.setattr(policy, "GEMM_MIN_FLOPS", 0)
    monkeypatch.setattr(S, "GEMM_TILE_GPU", request.param)
    monkeypatch.setattr(S, "GEMM_FILL_GROUPS", 0)
    return request.param


def _operands(rng, m, k, n, trans, batch=()):
    a = rng.standard_normal((*batch, k, m) if trans[0] == "t" else (*batch, m, k))
    b = rng.standard_normal((*batch, n, k) if trans[1] == "t" else (*batch, k, n))
    sa = (lambda v: v.mT) if trans[0] == "t" else (lambda v: v)
    sb = (lambda v: v.mT) if trans[1] == "t" else (lambda v: v)
    return a.astype(np.float32), b.astype(np.float32), sa, sb


def _vec_shader(exe) -> str:
    (src,) = [s.source for s in exe.shaders if "ta: array<array<vec4<f32>" in s.source]
    return src


@pytest.mark.parametrize("vec_tile", VEC_TILES, indirect=True, ids=str)
@pytest.mark.parametrize("m, k, n, trans", VEC_SHAPES)
def test_vec4_tiles_match_numpy(vec_tile, m, k, n, trans):
    """The vec4 tiles (``GemmTile.vec = 4``) at edges no tile divides, transposed operands
    (A^T and B are read along the tile edge, A and B^T along k), a contraction of several
    blocks (two sums per output) and empty products, against float64 numpy."""
    a, b, sa, sb = _operands(np.random.default_rng(m + 7 * k + n), m, k, n, trans)
    (o,), exe = _run(lambda p, q: sa(p) @ sb(q), a, b)
    ref = sa(a.astype(np.float64)) @ sb(b.astype(np.float64))
    np.testing.assert_allclose(o, ref, rtol=2e-6, atol=1e-6 * np.sqrt(k))
    if m * n * k:  # (an empty contraction: zeros, no product)
        src = _vec_shader(exe)
        assert f"@workgroup_size({vec_tile.threads_x}, {vec_tile.threads_y})" in src
        assert ("tot0_0" in src) == (k > 128)  # one sum per output for a one-block range


@pytest.mark.parametrize("vec_tile", VEC_TILES[0::2], indirect=True, ids=str)
def test_vec4_tiles_batch_split_and_sgd_update(vec_tile):
    """Batched products; the first pass of a split contraction (ranges of k, partial sums
    through the arena, then their sum); the SGD update folded into the product's epilogue
    (``w - lr * x.T @ g``: alpha, beta, c0)."""
    rng = np.random.default_rng(4)
    a, b, sa, sb = _operands(rng, 37, 300, 70, "nt", batch=(3,))
    (o,), exe = _run(lambda p, q: sa(p) @ sb(q), a, b)
    np.testing.assert_allclose(o, sa(a.astype(np.float64)) @ sb(b), rtol=2e-6, atol=2e-5)
    assert _vec_shader(exe) and exe.shaders[0].grid[2] == 3
    S.GEMM_FILL_GROUPS = 1024  # (the fixture restores it)
    a, b, _, _ = _operands(rng, 20, 1000, 30, "nn")
    (o,), exe = _run(lambda p, q: p @ q, a, b)
    names = [s.name for s in exe.shaders]
    assert any(s.endswith("_split") for s in names) and any(s.endswith("_sum") for s in names)
    np.testing.assert_allclose(o, a.astype(np.float64) @ b, rtol=2e-6, atol=4e-5)
    S.GEMM_FILL_GROUPS = 0
    x = rng.standard_normal((150, 70)).astype(np.float32)
    g = rng.standard_normal((150, 33)).astype(np.float32)
    w = rng.standard_normal((70, 33)).astype(np.float32)
    (o,), exe = _run(lambda w, x, g: w - 0.125 * (x.T @ g), w, x, g)
    np.testing.assert_allclose(o, w - 0.125 * (x.T.astype(np.float64) @ g), rtol=2e-6, atol=2e-5)
    src = _vec_shader(exe)
    assert len(exe.shaders) == 1 and "-0.125" in src


@pytest.mark.parametrize("vec_tile", VEC_TILES[1:2], indirect=True, ids=str)
def test_vec4_tile_inside_cond_and_loop(vec_tile):
    """A product inside ``cond`` (the branch flag passes through workgroup memory ``ta[0][0]``)
    and inside ``fori_loop`` (re-dispatched each iteration)."""
    rng = np.random.default_rng(6)
    a, b, _, _ = _operands(rng, 40, 24, 36, "nn")

    def f(p, x, y):
        z = fg.lax.cond(p > 0, lambda u, v: u @ v, lambda u, v: 2.0 * (u @ v), x, y)
        return z, fg.lax.fori_loop(0, 3, lambda i, u: 0.5 * (u @ y[:, :24]), x)

    for p in (np.float32(1), np.float32(-1)):
        (z, u), exe = _run(f, p, a, b)
        ref, ref_u = a.astype(np.float64) @ b, a.astype(np.float64)
        for _ in range(3):
            ref_u = 0.5 * (ref_u @ b[:, :24])
        np.testing.assert_allclose(z, ref * (1 if p > 0 else 2), rtol=2e-6, atol=1e-5)
        np.testing.assert_allclose(u, ref_u, rtol=2e-6, atol=1e-5)
    assert any("workgroupUniformLoad(&ta[0][0])" in s.source for s in exe.shaders)


@pytest.mark.parametrize("vec_tile", VEC_TILES[1:2], indirect=True, ids=str)
def test_vec4_long_contraction_is_a_blocked_sum(vec_tile):
    """k = 60000 in one range: blocks of 256 (about sqrt(k)) summed into totals. Emulated in
    float64 with float32 roundings, these inputs' worst output is 5.7 ulps off float64 so
    (the shader's own order), one running fma chain 136 ulps (8.8e-6), three levels of 64
    (the scalar tiles) 2 ulps."""
    rng = np.random.default_rng(8)
    k = 60_000
    a = rng.uniform(0, 1, (2, k)).astype(np.float32)
    b = rng.uniform(0, 1, (k, 8)).astype(np.float32)
    (o,), exe = _run(lambda p, q: p @ q, a, b)
    assert len(exe.shaders) == 1 and "p1 += 256i" in _vec_shader(exe)
    np.testing.assert_allclose(o, a.astype(np.float64) @ b, rtol=5e-7)


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


def test_real_gpus_take_the_large_tile_for_products_that_fill_its_grid(monkeypatch):
    """schemes.gemm_tile: a CPU adapter keeps gemm.py's tile (None); a real GPU takes
    GEMM_TILE_GPU_LARGE where its grid has GEMM_LARGE_GROUPS workgroups or more (a 4096^2
    product: 1024 of 128x128), GEMM_TILE_GPU below that (an MLP's 128x512: 4) or when the
    large tile is switched off."""
    from types import SimpleNamespace as NS

    gpu_rt, cpu_rt = NS(cpu_adapter=False), NS(cpu_adapter=True)
    big, small = NS(m=4096, n=4096, batch=1), NS(m=128, n=512, batch=1)
    edge = NS(m=16 * 128, n=16 * 128, batch=1)  # exactly GEMM_LARGE_GROUPS (256) tiles
    monkeypatch.setattr(S, "GEMM_LARGE_GROUPS", 256)
    assert S.gemm_tile(cpu_rt, big) is None
    assert S.gemm_tile(gpu_rt, big) == S.GEMM_TILE_GPU_LARGE
    assert S.gemm_tile(gpu_rt, edge) == S.GEMM_TILE_GPU_LARGE
    assert S.gemm_tile(gpu_rt, NS(m=16 * 128 - 128, n=16 * 128, batch=1)) == S.GEMM_TILE_GPU
    assert S.gemm_tile(gpu_rt, small) == S.GEMM_TILE_GPU
    assert S.gemm_tile(gpu_rt, NS(m=128, n=512, batch=512)) == S.GEMM_TILE_GPU_LARGE
    monkeypatch.setattr(S, "GEMM_TILE_GPU_LARGE", None)
    assert S.gemm_tile(gpu_rt, big) == S.GEMM_TILE_GPU
    assert S.GEMM_TILE_GPU.vec == 4  # (the H200 sweep's choice)
