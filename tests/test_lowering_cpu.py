"""The CPU runtime (fungrad/lowering/cpu.py, cache.py, threads.py, blas.py): LLVM IR text compiled
by llvmlite runs and matches numpy; failures raise CompileError and cache nothing; the disk cache
hits, survives corruption, can be disabled and stays private; parallel_for splits ranges exactly;
numpy's BLAS is callable from jitted code."""

import ctypes
import os
import pickle
import stat
import threading
import time

import numpy as np
import pytest

import fungrad as fg
from fungrad.lowering.cpu import blas, cache, threads
from fungrad.lowering.cpu import compiler as cpu

KERNEL_ARGS = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


def affine_ir(scale="2.0", shift="1.0", name="k"):
    """IR of ``y[i] = x[i] * scale + shift`` for i in [start, end), f32."""
    return f"""
define void @{name}(ptr noalias %x, ptr noalias %y, i64 %start, i64 %end) {{
entry:
  %nonempty = icmp slt i64 %start, %end
  br i1 %nonempty, label %loop, label %exit
loop:
  %i = phi i64 [ %start, %entry ], [ %next, %loop ]
  %px = getelementptr inbounds float, ptr %x, i64 %i
  %v = load float, ptr %px, align 4
  %m = fmul float %v, {scale}
  %r = fadd float %m, {shift}
  %py = getelementptr inbounds float, ptr %y, i64 %i
  store float %r, ptr %py, align 4
  %next = add nuw nsw i64 %i, 1
  %more = icmp slt i64 %next, %end
  br i1 %more, label %loop, label %exit
exit:
  ret void
}}
"""


def entries(d):
    return sorted(d.glob("*.fgo")) if d.exists() else []


def run_affine(module, x, start=0, end=None):
    y = np.full_like(x, -7.0)
    end = x.size if end is None else end
    module.function("k", KERNEL_ARGS)(x.ctypes.data, y.ctypes.data, start, end)
    return y


def test_compile_kernel_matches_numpy_and_vectorises(cache_dir):
    mod = cpu.compile_module(affine_ir(), ["k"], name="affine", debug_info=True)
    for n in (0, 1, 15, 1000, 1037):
        x = np.linspace(-3, 3, n, dtype=np.float32)
        np.testing.assert_array_equal(run_affine(mod, x), x * np.float32(2) + np.float32(1))
    # start/end select a sub-range; the rest is untouched
    x = np.arange(100, dtype=np.float32)
    y = run_affine(mod, x, 10, 90)
    np.testing.assert_array_equal(y[10:90], x[10:90] * 2 + 1)
    assert (y[:10] == -7).all() and (y[90:] == -7).all()
    assert mod.stats.parse_s > 0 and mod.stats.optimize_s > 0 and mod.stats.codegen_s > 0
    assert not mod.stats.cache_hit and mod.stats.object_bytes > 0
    # the loop vectorizer ran: packed single-precision adds (x*2 became x+x) in the machine code
    if cpu.host().triple.startswith("x86_64"):
        assert "addps" in mod.assembly, mod.assembly
    assert "<" in mod.optimized_ir and "x float>" in mod.optimized_ir


@pytest.mark.parametrize("opt_level", [0, 1, 2])
def test_compile_lower_opt_levels_agree(cache_dir, opt_level):
    mod = cpu.compile_module(affine_ir("0.5", "-3.0"), ["k"], name="lo", opt_level=opt_level)
    x = np.random.default_rng(0).standard_normal(777).astype(np.float32)
    np.testing.assert_array_equal(run_affine(mod, x), x * np.float32(0.5) - np.float32(3))


def test_bad_opt_level_and_missing_function(cache_dir):
    with pytest.raises(ValueError, match="opt_level"):
        cpu.compile_module(affine_ir(), ["k"], name="bad", opt_level=4)
    mod = cpu.compile_module(affine_ir(), ["k"], name="m")
    with pytest.raises(KeyError, match="no function 'nope'"):
        mod.address("nope")


def test_function_keeps_module_alive_and_close_frees(cache_dir):
    import gc

    mod = cpu.compile_module(affine_ir("3.0", "0.0"), ["k"], name="alive")
    f = mod.function("k", KERNEL_ARGS)
    del mod
    gc.collect()
    x = np.arange(64, dtype=np.float32)
    y = np.empty_like(x)
    f(x.ctypes.data, y.ctypes.data, 0, 64)  # the engine is still referenced by f
    np.testing.assert_array_equal(y, x * 3)
    mod2 = cpu.compile_module(affine_ir("3.0", "0.0"), ["k"], name="closed")
    mod2.close()
    with pytest.raises(ValueError, match="closed"):
        mod2.address("k")


BAD_IR = {
    "parse": "define void @k( {\n  ret void\n}\n",
    "verify": """
define i32 @k(i32 %a) {
entry:
  %c = add i32 %b, 1
  %b = add i32 %a, 1
  ret i32 %c
}
""",
    "link": """
declare void @fungrad_no_such_symbol(i64)
define void @k(i64 %a) {
  call void @fungrad_no_such_symbol(i64 %a)
  ret void
}
""",
}


@pytest.mark.parametrize("step", sorted(BAD_IR))
def test_compile_error_names_module_step_and_ir_file(cache_dir, step):
    with pytest.raises(cpu.CompileError) as info:
        cpu.compile_module(BAD_IR[step], ["k"], name=f"broken_{step}")
    err = info.value
    assert isinstance(err, RuntimeError)
    assert err.step == step and err.module_name == f"broken_{step}"
    msg = str(err)
    assert f"broken_{step}" in msg and step in msg and err.ir_path in msg
    with open(err.ir_path) as f:
        assert f.read() == BAD_IR[step]
    assert str(pickle.loads(pickle.dumps(err))) == msg
    os.unlink(err.ir_path)
    assert entries(cache_dir) == []  # failures are never cached
    if step == "link":
        assert "fungrad_no_such_symbol" in msg


def test_internal_function_is_not_an_entry_point(cache_dir):
    ir = (
        affine_ir().replace("define void @k(", "define internal void @k(")
        + """
define void @outer(ptr %x, ptr %y, i64 %n) {
  call void @k(ptr %x, ptr %y, i64 0, i64 %n)
  ret void
}
"""
    )
    with pytest.raises(cpu.CompileError, match="not defined as external") as info:
        cpu.compile_module(ir, ["k"], name="internal")
    os.unlink(info.value.ir_path)
    mod = cpu.compile_module(ir, ["outer"], name="internal")
    x = np.arange(300, dtype=np.float32)
    y = np.zeros_like(x)
    mod.function("outer", [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64])(
        x.ctypes.data, y.ctypes.data, 300
    )
    np.testing.assert_array_equal(y, x * 2 + 1)
    with pytest.raises(TypeError, match="entry_points"):
        cpu.compile_module(ir, "outer", name="internal")


def test_compile_error_missing_entry_point(cache_dir):
    with pytest.raises(cpu.CompileError, match="entry point.*'other'") as info:
        cpu.compile_module(affine_ir(), ["k", "other"], name="noentry")
    assert info.value.step == "link"
    os.unlink(info.value.ir_path)
    assert entries(cache_dir) == []
    # the same on a cache hit, and the good entry stays
    cpu.compile_module(affine_ir(), ["k"], name="noentry")
    with pytest.raises(cpu.CompileError, match="entry point.*'other'") as info:
        cpu.compile_module(affine_ir(), ["other"], name="noentry")
    os.unlink(info.value.ir_path)
    assert cache.default_cache().hits == 1 and len(entries(cache_dir)) == 1


def test_cache_hit_loads_same_code(cache_dir):
    ir = affine_ir("4.0", "0.25")
    t0 = time.perf_counter()
    cold = cpu.compile_module(ir, ["k"], name="cached")
    t_cold = time.perf_counter() - t0
    store = cache.default_cache()
    assert (store.hits, store.misses, store.writes) == (0, 1, 1)
    assert len(entries(cache_dir)) == 1
    t0 = time.perf_counter()
    warm = cpu.compile_module(ir, ["k"], name="cached")
    t_warm = time.perf_counter() - t0
    assert (store.hits, store.misses, store.writes) == (1, 1, 1)
    assert warm.stats.cache_hit and not cold.stats.cache_hit
    assert warm.stats.parse_s == warm.stats.optimize_s == warm.stats.codegen_s == 0
    x = np.linspace(-1, 1, 3001, dtype=np.float32)
    np.testing.assert_array_equal(run_affine(warm, x), run_affine(cold, x))
    # reported by `pytest -s`; not asserted (the machine is shared and noisy)
    print(f"\ncompile cold {t_cold * 1e3:.2f} ms, cache hit {t_warm * 1e3:.2f} ms")
    # a different pipeline is a different key
    cpu.compile_module(ir, ["k"], name="cached", opt_level=1)
    assert store.misses == 2 and len(entries(cache_dir)) == 2


def test_cache_dir_is_private(cache_dir):
    cpu.compile_module(affine_ir(), ["k"], name="private")
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    (entry,) = entries(cache_dir)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600


def test_cache_refuses_world_writable_dir(tmp_path, monkeypatch):
    d = tmp_path / "shared"
    d.mkdir()
    d.chmod(0o777)
    monkeypatch.setenv("FUNGRAD_CACHE_DIR", str(d))
    with pytest.warns(cache.CacheWarning, match="writable by others"):
        mod = cpu.compile_module(affine_ir(), ["k"], name="refused")
    assert entries(d) == []
    x = np.ones(10, dtype=np.float32)
    np.testing.assert_array_equal(run_affine(mod, x), x * 3)


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage"])
def test_corrupt_entry_is_ignored_and_rebuilt(cache_dir, damage):
    ir = affine_ir("-1.0", "5.0")
    cpu.compile_module(ir, ["k"], name="corrupt")
    (path,) = entries(cache_dir)
    blob = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(blob[: len(blob) // 2])
    elif damage == "flip":
        path.write_bytes(blob[:-10] + bytes([blob[-10] ^ 0xFF]) + blob[-9:])
    else:
        path.write_bytes(b"not an object file")
    store = cache.default_cache()
    mod = cpu.compile_module(ir, ["k"], name="corrupt")
    assert store.corrupt == 1 and not mod.stats.cache_hit
    x = np.arange(50, dtype=np.float32)
    np.testing.assert_array_equal(run_affine(mod, x), 5 - x)
    assert path.read_bytes() != b"not an object file"
    again = cpu.compile_module(ir, ["k"], name="corrupt")
    assert again.stats.cache_hit and store.corrupt == 1


def test_cache_disabled_by_env(cache_dir, monkeypatch):
    monkeypatch.setenv("FUNGRAD_DISABLE_CACHE", "1")
    assert cache.default_cache() is None
    mod = cpu.compile_module(affine_ir(), ["k"], name="noenv")
    assert not cache_dir.exists()
    x = np.ones(3, dtype=np.float32)
    np.testing.assert_array_equal(run_affine(mod, x), x * 3)


@pytest.mark.parametrize("setting", ["1", "all"])
def test_libraries_stay_cached_unless_all(cache_dir, monkeypatch, setting):
    """FUNGRAD_DISABLE_CACHE=1 turns caching off for programs only; fungrad's own libraries
    (fixed code, JAX's are prebuilt) stay cached, and =all turns that off too."""
    monkeypatch.setenv("FUNGRAD_DISABLE_CACHE", setting)
    ir = affine_ir("7.0")
    first = cpu.compile_module(ir, ["k"], name="lib", library=True)
    again = cpu.compile_module(ir, ["k"], name="lib", library=True)
    program = cpu.compile_module(affine_ir("8.0"), ["k"], name="prog")
    assert cache.default_cache() is None
    assert not first.stats.cache_hit and not program.stats.cache_hit
    if setting == "all":
        assert cache.default_cache(library=True) is None and not again.stats.cache_hit
        assert not cache_dir.exists()
    else:
        assert again.stats.cache_hit and len(entries(cache_dir)) == 1  # the library's only
    x = np.ones(3, dtype=np.float32)
    np.testing.assert_array_equal(run_affine(again, x), x * 7 + 1)


def test_cache_disabled_by_config(cache_dir):
    fg.config.update("disable_compile_cache", True)
    try:
        assert cache.default_cache() is None
        cpu.compile_module(affine_ir(), ["k"], name="noconf")
        cpu.compile_module(affine_ir(), ["k"], name="noconf")
        assert not cache_dir.exists()
    finally:
        fg.config.update("disable_compile_cache", False)
    assert cache.default_cache() is not None


def test_cache_size_cap_evicts_oldest(cache_dir, monkeypatch):
    monkeypatch.setenv("FUNGRAD_CACHE_MAX_BYTES", "4000")
    store = cache.default_cache()
    for i in range(5):
        cpu.compile_module(affine_ir(f"{i}.0"), ["k"], name=f"evict{i}", opt_level=0)
        time.sleep(0.01)  # distinct mtimes
    assert store.evictions > 0 and store.total_bytes() <= 4000
    # the newest entry survives, the oldest went first
    h = cpu.host()

    def key(scale):
        return cache.cache_key(
            affine_ir(scale),
            triple=h.triple,
            cpu=h.cpu,
            features=h.features,
            pipeline=cpu._pipeline_options(0),
        )

    assert store.path_for(key("4.0")).exists() and not store.path_for(key("0.0")).exists()


def test_cache_key_depends_on_every_input():
    base = {"triple": "t", "cpu": "c", "features": "+f", "pipeline": {"speed_level": 3}}
    k = cache.cache_key("ir", **base)
    assert len(k) == 64 and k == cache.cache_key("ir", **base)
    assert k != cache.cache_key("ir ", **base)
    for field, other in [
        ("triple", "u"),
        ("cpu", "d"),
        ("features", "-f"),
        ("pipeline", {"speed_level": 1}),
    ]:
        assert k != cache.cache_key("ir", **{**base, field: other})


def test_compile_stats_totals(cache_dir):
    cpu.reset_compile_stats()
    cpu.compile_module(affine_ir("7.0"), ["k"], name="s")
    cpu.compile_module(affine_ir("7.0"), ["k"], name="s")
    totals = cpu.compile_stats()
    assert totals["modules"] == 2 and totals["cache_hits"] == 1
    assert totals["optimize_s"] > 0 and totals["codegen_s"] > 0 and totals["load_s"] > 0


def test_num_threads_env(monkeypatch):
    monkeypatch.setenv("FUNGRAD_NUM_THREADS", "3")
    assert threads.num_threads() == 3
    monkeypatch.setenv("FUNGRAD_NUM_THREADS", "0")
    with pytest.raises(ValueError, match="FUNGRAD_NUM_THREADS"):
        threads.num_threads()
    monkeypatch.delenv("FUNGRAD_NUM_THREADS")
    assert threads.num_threads() >= 1


def gemm_ir(info, scalar):
    """``@mm(a, b, c, m, n, k)``: C = A @ B (row-major) through @fg_sgemm / @fg_dgemm, then
    C = max(C, 0) in the same function (a fused epilogue)."""
    decl, fn = (info.sgemm_decl, "fg_sgemm") if scalar == "float" else (info.dgemm_decl, "fg_dgemm")
    i = f"i{info.int_bits}"
    conv = (
        ""
        if info.int_bits == 64
        else "\n".join(f"  %{v}w = trunc i64 %{v} to i32" for v in ("m", "n", "k"))
    )
    m, n, k = ("%mw", "%nw", "%kw") if info.int_bits == 32 else ("%m", "%n", "%k")
    return f"""
{decl}
define void @mm(ptr %a, ptr %b, ptr %c, i64 %m, i64 %n, i64 %k) {{
entry:
{conv}
  call void @{fn}(i32 101, i32 111, i32 111, {i} {m}, {i} {n}, {i} {k}, {scalar} 1.0, ptr %a,
                  {i} {k}, ptr %b, {i} {n}, {scalar} 0.0, ptr %c, {i} {n})
  %size = mul i64 %m, %n
  %nonempty = icmp sgt i64 %size, 0
  br i1 %nonempty, label %loop, label %exit
loop:
  %j = phi i64 [ 0, %entry ], [ %next, %loop ]
  %p = getelementptr inbounds {scalar}, ptr %c, i64 %j
  %v = load {scalar}, ptr %p
  %pos = fcmp ogt {scalar} %v, 0.0
  %r = select i1 %pos, {scalar} %v, {scalar} 0.0
  store {scalar} %r, ptr %p
  %next = add i64 %j, 1
  %more = icmp slt i64 %next, %size
  br i1 %more, label %loop, label %exit
exit:
  ret void
}}
"""


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blas_gemm_from_llvm_matches_numpy(cache_dir, dtype):
    info = blas.find_blas()
    # numpy wheels ship OpenBLAS: not finding it is a failure, with the reason
    assert info.available, info.reason
    assert info.int_bits in (32, 64) and info.sgemm_address and info.dgemm_address
    assert info.sgemm_decl.startswith("declare void @fg_sgemm(i32, i32, i32")
    scalar = "float" if dtype == np.float32 else "double"
    mod = cpu.compile_module(gemm_ir(info, scalar), ["mm"], name=f"gemm_{scalar}")
    mm = mod.function("mm", [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 3)
    rng = np.random.default_rng(2)
    for m, n, k in [(1, 1, 1), (37, 53, 29), (128, 64, 96)]:
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
        c = np.full((m, n), np.nan, dtype=dtype)
        mm(a.ctypes.data, b.ctypes.data, c.ctypes.data, m, n, k)
        ref = np.maximum(a.astype(np.float64) @ b.astype(np.float64), 0)
        tol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(c, ref, rtol=tol, atol=tol * np.sqrt(k))


def test_blas_probe_reports_reason_instead_of_raising(tmp_path):
    import ctypes.util

    libm = ctypes.util.find_library("m")
    assert libm is not None
    info = blas._probe(libm)
    assert not info.available and "exports none of" in info.reason
    assert info.sgemm is None and info.sgemm_decl is None and info.sgemm_address is None
    missing = blas._probe(str(tmp_path / "libnothing.so"))
    assert not missing.available and "cannot load" in missing.reason


def test_blas_ctypes_sgemm_direct():
    info = blas.find_blas()
    assert info.available, info.reason
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    c = np.zeros((2, 4), dtype=np.float32)
    info.sgemm(
        blas.CBLAS_ROW_MAJOR,
        blas.CBLAS_NO_TRANS,
        blas.CBLAS_NO_TRANS,
        2,
        4,
        3,
        1.0,
        a.ctypes.data,
        3,
        b.ctypes.data,
        4,
        0.0,
        c.ctypes.data,
        4,
    )
    np.testing.assert_array_equal(c, a @ b)


def test_compile_from_four_threads(cache_dir):
    barrier = threading.Barrier(4)
    results, errors = {}, []

    def work(t):
        try:
            barrier.wait()
            for j in range(3):
                scale = f"{t * 3 + j + 1}.0"
                mod = cpu.compile_module(affine_ir(scale), ["k"], name=f"t{t}_{j}")
                x = np.arange(1000, dtype=np.float32)
                results[(t, j)] = (float(scale), run_affine(mod, x))
        except BaseException as e:  # reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == []
    x = np.arange(1000, dtype=np.float32)
    for scale, y in results.values():
        np.testing.assert_array_equal(y, x * np.float32(scale) + 1)
    assert len(results) == 12 and len(entries(cache_dir)) == 12
