"""The process-wide float32 matmul library (fungrad/lowering/matmul.py): one generic gemm with
run-time shapes, strides, layouts and alpha/beta/c0, compiled once per process and called from
every jitted program; checked against numpy (float64 products) on odd shapes, edges, both
schedules, several k and column blocks, and for thread and fork safety, caching and errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
from fungrad.lowering.cpu import gemm as matmul

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ODD = (1, 7, 8, 9, 31, 33, 100)


def reference(a, b, trans_a, alpha, beta, c0):
    op_a = (a.T if trans_a else a).astype(np.float64)
    out = np.float64(alpha) * (op_a @ b.astype(np.float64))
    return out + np.float64(beta) * c0 if beta else out


def check(got, want, k):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * (k + 1))


@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (-0.1, 1.0), (2.5, -0.75)])
def test_odd_shapes_match_numpy(trans_a, alpha, beta):
    rng = np.random.default_rng(0)
    for m in ODD:
        for n in ODD:
            for k in ODD:
                a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
                b = rng.standard_normal((k, n)).astype(np.float32)
                c0 = rng.standard_normal((m, n)).astype(np.float32)
                got = matmul.gemm(
                    a, b, trans_a=trans_a, alpha=alpha, beta=beta, c0=c0 if beta else None
                )
                check(got, reference(a, b, trans_a, alpha, beta, c0), k)


@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("m,n,k", [(40, 300, 600), (17, 70, 1100), (9, 16, 513), (130, 5, 3)])
def test_several_k_blocks_and_column_blocks(trans_a, m, n, k):
    # k > KC runs several k blocks (later ones accumulate into c); for A^T, n * kc beyond the
    # packed-b budget runs several column blocks
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    got = matmul.gemm(a, b, trans_a=trans_a, alpha=-0.5, beta=1.0, c0=c0)
    check(got, reference(a, b, trans_a, -0.5, 1.0, c0), k)


@pytest.mark.parametrize("m,n,k", [(450, 300, 700), (200, 700, 530)])
def test_c_past_l2_takes_long_k_blocks(m, n, k):
    # c of more than C_L2 floats: A in place runs k blocks of KC, not kc_wide (700 = 512 + 188,
    # 530 = 512 + 18), the later block adding into c; a ragged right and bottom edge
    assert m * n > matmul.C_L2 and k > matmul.KC
    rng = np.random.default_rng(m + k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    check(matmul.gemm(a, b), reference(a, b, False, 1.0, 0.0, c0), k)
    got = matmul.gemm(a, b, alpha=-0.5, beta=2.0, c0=c0)
    check(got, reference(a, b, False, -0.5, 2.0, c0), k)


@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(1, 70),
    n=st.integers(1, 70),
    k=st.integers(0, 70),
    trans_a=st.booleans(),
    alpha=st.sampled_from([1.0, -1.0, 0.5, 3.0]),
    beta=st.sampled_from([0.0, 1.0, -2.0]),
    seed=st.integers(0, 2**16),
)
def test_random_shapes_match_numpy(m, n, k, trans_a, alpha, beta, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    got = matmul.gemm(a, b, trans_a=trans_a, alpha=alpha, beta=beta, c0=c0 if beta else None)
    check(got, reference(a, b, trans_a, alpha, beta, c0), k)


@pytest.mark.parametrize("trans_a", [False, True])
def test_size_zero(trans_a):
    rng = np.random.default_rng(1)
    for m, n in ((0, 5), (5, 0), (0, 0)):
        a = np.zeros((3, m) if trans_a else (m, 3), np.float32)
        out = matmul.gemm(a, np.ones((3, n), np.float32), trans_a=trans_a)
        assert out.shape == (m, n)
    # k == 0: the product is zero, so c = beta * c0 exactly (and alpha * 0 keeps its sign)
    c0 = rng.standard_normal((6, 40)).astype(np.float32)
    a = np.zeros((0, 6) if trans_a else (6, 0), np.float32)
    b = np.zeros((0, 40), np.float32)
    np.testing.assert_array_equal(
        matmul.gemm(a, b, trans_a=trans_a, alpha=2.0, beta=0.5, c0=c0), np.float32(0.5) * c0
    )
    zero = matmul.gemm(a, b, trans_a=trans_a, alpha=-1.0)
    assert not zero.any() and np.signbit(zero).all()  # -1 * (+0) = -0, as numpy gives


def test_strided_rows_and_in_place_update():
    rng = np.random.default_rng(2)
    big_a = rng.standard_normal((33, 50)).astype(np.float32)
    big_b = rng.standard_normal((20, 90)).astype(np.float32)
    a, b = big_a[:, 3:23], big_b[:, 5:46]  # row strides 50 and 90 floats
    w_big = rng.standard_normal((33, 64)).astype(np.float32)
    w = w_big[:, :41]
    want = w.astype(np.float64) - 0.25 * (a.astype(np.float64) @ b)
    out = matmul.gemm(a, b, alpha=-0.25, beta=1.0, c0=w, out=w)  # c0 is c: the SGD update
    assert out is w
    check(w, want, 20)
    at = rng.standard_normal((20, 60)).astype(np.float32)[:, 4:37]  # A^T: 20 x 33, stride 60
    check(matmul.gemm(at, b, trans_a=True), at.T.astype(np.float64) @ b, 20)


def test_nan_inf_and_signed_zero():
    a = np.ones((9, 12), np.float32)
    b = np.ones((12, 40), np.float32)
    a[3, 5], b[7, 39] = np.nan, np.inf
    c0 = np.full((9, 40), np.nan, np.float32)
    got = matmul.gemm(a, b, c0=c0, beta=0.0)  # beta == 0 never reads c0
    want = a.astype(np.float64) @ b
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    c0 = np.zeros((9, 40), np.float32)
    c0[2, 2] = np.inf
    got = matmul.gemm(a, b, c0=c0, beta=1.0)
    assert np.isinf(got[2, 2]) or np.isnan(got[2, 2])
    z = np.zeros((9, 12), np.float32)
    np.testing.assert_array_equal(
        np.signbit(matmul.gemm(z, b[:, :30] * 0, alpha=-3.0)), np.ones((9, 30), bool)
    )


def test_bad_arguments_are_named():
    a = np.ones((4, 5), np.float32)
    with pytest.raises(TypeError, match="2-D float32"):
        matmul.gemm(a.astype(np.float64), np.ones((5, 3), np.float32))
    with pytest.raises(ValueError, match="inner dimensions"):
        matmul.gemm(a, np.ones((4, 3), np.float32))
    with pytest.raises(ValueError, match="needs c0"):
        matmul.gemm(a, np.ones((5, 3), np.float32), beta=1.0)
    with pytest.raises(ValueError, match="rows of b must be contiguous"):
        matmul.gemm(a, np.ones((5, 6), np.float32)[:, ::2])


def test_jitted_products_call_the_library():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((33, 70)).astype(np.float32)
    w = rng.standard_normal((70, 45)).astype(np.float32)
    g = rng.standard_normal((33, 45)).astype(np.float32)

    def step(w, x, g):
        return w - 0.1 * (x.T @ g), x @ w  # a weight update (A^T, fused) and a plain product

    jf = fg.jit(step)
    exe = jf.lower(w, x, g).compile()._exe
    assert exe.ir.count(f"call void @{matmul.SYMBOL}(") == 2
    assert "llvm.fma.v16f32" not in exe.ir  # no specialised copy of the kernel in the module
    new_w, y = (np.asarray(o) for o in jf(w, x, g))
    check(new_w, w - 0.1 * (x.T.astype(np.float64) @ g), 33)
    check(y, x.astype(np.float64) @ w, 70)


def run_fresh(script: str, **env) -> dict:
    env = {**os.environ, "FUNGRAD_DISABLE_CACHE": "1", **env}
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_compiled_once_when_threads_compile_programs_at_once():
    out = run_fresh("""
        import json, threading
        import numpy as np
        import fungrad as fg
        from fungrad.lowering.cpu import compiler as cpu
        names, real = [], cpu.compile_module
        def counting(ir, entries, *, name, **kw):
            names.append(name)
            return real(ir, entries, name=name, **kw)
        cpu.compile_module = counting
        results, start = {}, threading.Barrier(4)
        def work(i):
            a = np.full((40 + i, 50), 1.0, np.float32)
            b = np.full((50, 30 + i), 2.0, np.float32)
            start.wait()
            results[i] = bool(np.all(np.asarray(fg.jit(lambda a, b: a @ b)(a, b)) == 100.0))
        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads: t.start()
        for t in threads: t.join()
        print(json.dumps({"ok": sorted(results.values()),
                          "library": names.count("fungrad_matmul")}))
    """)
    assert out == {"ok": [True] * 4, "library": 1}


def test_forked_child_uses_the_library():
    out = run_fresh("""
        import json, os
        import numpy as np
        from fungrad.lowering.cpu import gemm as matmul
        a = np.arange(12, dtype=np.float32).reshape(3, 4)
        b = np.ones((4, 20), np.float32)
        matmul.gemm(a, b)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            ok = np.array_equal(matmul.gemm(a, b), a @ b)
            os.write(w, b"1" if ok else b"0")
            os._exit(0)
        os.waitpid(pid, 0)
        print(json.dumps({"child": os.read(r, 1).decode()}))
    """)
    assert out == {"child": "1"}


def test_library_is_stored_in_the_disk_cache(tmp_path):
    script = """
        import json
        import numpy as np
        from fungrad.lowering.cpu import gemm as matmul
        matmul.ensure_library()
        print(json.dumps({"hit": matmul._module.stats.cache_hit}))
    """
    env = {"FUNGRAD_DISABLE_CACHE": "0", "FUNGRAD_CACHE_DIR": str(tmp_path / "cache")}
    assert run_fresh(script, **env) == {"hit": False}
    assert run_fresh(script, **env) == {"hit": True}


def test_compile_error_names_the_library_and_keeps_its_ir():
    out = run_fresh("""
        import json, os
        from fungrad.lowering.cpu import gemm as matmul
        from fungrad import CompileError
        matmul.library_ir = lambda: "define void @fg_matmul_f32( {"
        try:
            matmul.ensure_library()
        except CompileError as e:
            print(json.dumps({"module": e.module_name, "file": os.path.exists(e.ir_path),
                              "named": "fungrad_matmul" in str(e)}))
    """)
    assert out == {"module": "fungrad_matmul", "file": True, "named": True}


# -- b transposed (``[n, k]`` rows: the backward products dy @ W^T) ------------------------------


def reference_t(a, bt, alpha, beta, c0):
    out = np.float64(alpha) * (a.astype(np.float64) @ bt.T.astype(np.float64))
    return out + np.float64(beta) * c0 if beta else out


TB_ODD = (1, 7, 8, 9, 15, 16, 17, 33)


@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (-0.5, 2.0)])
def test_trans_b_odd_shapes_match_numpy(alpha, beta):
    # n and k around the 16 x 16 transposed blocks and the 32-column panels
    rng = np.random.default_rng(5)
    for m in TB_ODD:
        for n in TB_ODD:
            for k in TB_ODD:
                a = rng.standard_normal((m, k)).astype(np.float32)
                bt = rng.standard_normal((n, k)).astype(np.float32)
                c0 = rng.standard_normal((m, n)).astype(np.float32)
                got = matmul.gemm(
                    a, bt, trans_b=True, alpha=alpha, beta=beta, c0=c0 if beta else None
                )
                check(got, reference_t(a, bt, alpha, beta, c0), k)


@pytest.mark.parametrize("m,n,k", [(128, 512, 10), (20, 100, 1100), (9, 70, 513), (3, 5, 0)])
def test_trans_b_panels_and_k_blocks(m, n, k):
    # the MLP's dh2 shape, several k blocks (k > KC) with a partial 16-step block, many panels
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    bt = rng.standard_normal((n, k)).astype(np.float32)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    got = matmul.gemm(a, bt, trans_b=True, alpha=0.75, beta=-1.0, c0=c0)
    check(got, reference_t(a, bt, 0.75, -1.0, c0), k)


def test_trans_b_strided_in_place_and_nan_c0():
    rng = np.random.default_rng(6)
    a = rng.standard_normal((17, 60)).astype(np.float32)[:, 3:40]  # row stride 60
    bt = rng.standard_normal((33, 50)).astype(np.float32)[:, 1:38]  # b^T: 33 x 37, stride 50
    w = rng.standard_normal((17, 40)).astype(np.float32)[:, :33]
    want = reference_t(a, bt, -0.1, 1.0, w.astype(np.float64))
    assert matmul.gemm(a, bt, trans_b=True, alpha=-0.1, beta=1.0, c0=w, out=w) is w
    check(w, want, 37)
    nan = np.full((17, 33), np.nan, np.float32)  # beta == 0 never reads c0
    check(matmul.gemm(a, bt, trans_b=True, c0=nan), reference_t(a, bt, 1.0, 0.0, None), 37)
    bt = bt.copy()
    bt[4, 9] = np.inf
    got = matmul.gemm(a, bt, trans_b=True)
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(a @ bt.T))


@settings(max_examples=30, deadline=None)
@given(
    m=st.integers(1, 40),
    n=st.integers(1, 70),
    k=st.integers(0, 70),
    beta=st.sampled_from([0.0, 1.0]),
    seed=st.integers(0, 2**16),
)
def test_trans_b_random_shapes(m, n, k, beta, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    bt = rng.standard_normal((n, k)).astype(np.float32)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    got = matmul.gemm(a, bt, trans_b=True, beta=beta, c0=c0 if beta else None)
    check(got, reference_t(a, bt, 1.0, beta, c0), k)


LAYOUTS = ((False, False), (True, False), (False, True))  # (trans_a, trans_b): one loop nest


def operands(rng, m, n, k, trans_a, trans_b):
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    want = (a.T if trans_a else a).astype(np.float64) @ (b.T if trans_b else b).astype(np.float64)
    return a, b, want


@pytest.mark.parametrize("trans_a,trans_b", LAYOUTS)
def test_every_layout_odd_shapes_nan_c0_and_in_place(trans_a, trans_b):
    # shapes around the 8-row tiles, the 16-lane vectors and 32-column panels in every layout;
    # beta = 0 never reads c0 (NaN here), beta != 0 reads it (here c0 is the output itself)
    rng = np.random.default_rng(11)
    for m in TB_ODD:
        for n in TB_ODD:
            for k in TB_ODD:
                a, b, want = operands(rng, m, n, k, trans_a, trans_b)
                nan = np.full((m, n), np.nan, np.float32)
                got = matmul.gemm(a, b, trans_a=trans_a, trans_b=trans_b, alpha=-2.0, c0=nan)
                check(got, -2.0 * want, k)
                c = rng.standard_normal((m, n)).astype(np.float32)
                c0 = c.astype(np.float64)
                matmul.gemm(
                    a, b, trans_a=trans_a, trans_b=trans_b, alpha=0.5, beta=-1.5, c0=c, out=c
                )
                check(c, 0.5 * want - 1.5 * c0, k)


@pytest.mark.parametrize("trans_a,trans_b", LAYOUTS)
def test_every_layout_several_k_and_column_blocks_in_place(trans_a, trans_b):
    # later k blocks accumulate into c, which here is c0 too; for A^T, 300 columns x kc = 512
    # exceed the packed-b budget (two column blocks), each reusing packed slices of A^T
    rng = np.random.default_rng(12)
    for m, n, k in ((40, 300, 600), (9, 33, 1025), (130, 10, 513)):
        a, b, want = operands(rng, m, n, k, trans_a, trans_b)
        w = rng.standard_normal((m, n)).astype(np.float32)
        w_before = w.astype(np.float64)
        assert (
            matmul.gemm(a, b, trans_a=trans_a, trans_b=trans_b, alpha=-0.1, beta=1.0, c0=w, out=w)
            is w
        )
        check(w, w_before - 0.1 * want, k)


def test_trans_b_errors():
    with pytest.raises(ValueError, match="both be transposed"):
        matmul.gemm(
            np.ones((3, 4), np.float32), np.ones((5, 3), np.float32), trans_a=True, trans_b=True
        )
    with pytest.raises(ValueError, match=r"op\(b\) is 5x3"):
        matmul.gemm(np.ones((4, 4), np.float32), np.ones((3, 5), np.float32), trans_b=True)


def _other_library(tile, avx512):
    """The library's IR for ``tile`` compiled under its own symbol (the host's runs under
    ``SYMBOL``): a ctypes function with gemm's arguments."""
    import ctypes

    from fungrad.lowering.cpu import compiler as cpu

    name = f"fg_mm_test_{tile.vec}_{tile.mr}_{int(avx512)}"
    ir = matmul.library_ir(avx512=avx512, tile=tile, symbol=name)
    module = cpu.compile_module(ir, [name], name=name, passes=False)
    i64, ptr, f32 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_float
    return module, module.function(
        name, [ctypes.c_int32, i64, i64, i64, f32, ptr, i64, ptr, i64, f32, ptr, ptr, i64]
    )


def test_only_avx512_tiles_use_vpermi2ps():
    assert "vpermi2var" in matmul.library_ir(avx512=True, tile=matmul.AVX512)
    assert "vpermi2var" not in matmul.library_ir(avx512=False, tile=matmul.AVX512)
    assert "vpermi2var" not in matmul.library_ir(avx512=True, tile=matmul.AVX2)


@pytest.mark.parametrize(
    "tile,avx512", [(matmul.AVX2, False), (matmul.AVX512, False)], ids=["avx2", "16-lane-shuffles"]
)
def test_every_tile_geometry_matches_numpy(tile, avx512):
    """The register tiles of hosts other than this one, compiled here (LLVM splits 16-lane
    vectors into AVX2 registers): AVX2's 6 x 16 tile (the host's on CPUs without AVX-512)
    and the 16-lane tile with its shufflevector transpose. Every layout (A^T packed in
    12-row slices of two tiles; b^T transposed in 8 x 8 blocks; b packed by the caller in
    panels of ``tile.nr``), ragged edges of both tile sizes, several k blocks and row blocks,
    beta with a NaN in the ignored c0, and an update in place, against float64 numpy."""
    module, fn = _other_library(tile, avx512)
    rng = np.random.default_rng(tile.vec + tile.mr)
    shapes = [(1, 1, 1), (5, 7, 3), (13, 17, 9), (25, 40, 130), (12, 16, 600), (37, 70, 1100)]
    shapes.append((2 * (tile.mc or 100) + 7, 40, 600))  # row blocks of mc
    for m, n, k in shapes:
        for trans in (0, 1, 2, 4, 5):
            trans_a, trans_b, packed = bool(trans & 1), bool(trans & 2), bool(trans & 4)
            a, b, want = operands(rng, m, n, k, trans_a, trans_b)
            lda = m if trans_a else k
            if packed:
                b, ldb = matmul.pack_b(b, nr=tile.nr), k
            else:
                ldb = k if trans_b else n
            for beta in (0.0, -0.5):
                c0 = rng.standard_normal((m, n)).astype(np.float32)
                if beta == 0:
                    c0[0, 0] = np.nan  # never read
                ref = 0.75 * want + (beta * c0.astype(np.float64) if beta else 0)
                out = c0 if beta else np.empty((m, n), np.float32)  # in place with beta
                args = (0.75, a.ctypes.data, lda, b.ctypes.data, ldb, beta, c0.ctypes.data)
                fn(trans, m, n, k, *args, out.ctypes.data, n)
                check(out, ref, k)


def test_jit_routes_b_transposed_products_to_the_library():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((32, 48)).astype(np.float32)
    w = rng.standard_normal((40, 48)).astype(np.float32)
    f = fg.jit(lambda x, w: x @ w.T)
    text = f.lower(x, w).as_text()
    assert f"@{matmul.SYMBOL}(i32 2, i64 32, i64 40, i64 48" in text
    check(np.asarray(f(x, w)), x.astype(np.float64) @ w.T.astype(np.float64), 48)


@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True)])
def test_issue15_long_contractions_sum_super_blocks_separately(trans_a, trans_b):
    """k beyond ``SUPER`` k blocks: later super-blocks sum into a scratch C added to c after
    each, so c takes k / (SUPER * kc) sums rather than k / kc. Positive data of mixed
    magnitudes (errors do not cancel) against float64: within a quarter of
    ``eps * log2(k) * (|a| @ |b|)`` (0.13 measured; every k block added into c: 0.41-1.06),
    with alpha and beta (the first super-block reads c0, the others only the scratch)."""
    rng = np.random.default_rng(11)
    m, n, k = 9, 33, (1 << 18) + 3  # ragged: the last k block and super-block are partial

    def mixed(shape):
        return (rng.uniform(0.5, 1.0, shape) * np.exp2(rng.integers(-6, 7, shape))).astype(
            np.float32
        )

    a = mixed((k, m) if trans_a else (m, k))
    b = mixed((n, k) if trans_b else (k, n))
    c0 = mixed((m, n))
    op_a = (a.T if trans_a else a).astype(np.float64)
    op_b = (b.T if trans_b else b).astype(np.float64)
    eps = float(np.finfo(np.float32).eps)
    for alpha, beta in ((1.0, 0.0), (0.5, 2.0)):
        got = matmul.gemm(
            a, b, trans_a=trans_a, trans_b=trans_b, alpha=alpha, beta=beta, c0=c0 if beta else None
        )
        want = alpha * (op_a @ op_b) + beta * c0.astype(np.float64)
        err = np.abs(got - want) / (eps * np.log2(k) * want)
        assert np.max(err) <= 0.25, (alpha, beta, np.max(err))
