"""How a jitted function becomes native code (fungrad/lowering/llvm.py ModuleWriter, executable.py,
cpu.py): parallel steps pick the native thread pool or a serial call at run time, so a process
that runs on one thread never compiles the pool; both ways give numpy's results; each kernel body
is compiled once; the per-stage compile statistics add up."""

import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.lowering.cpu import compiler as cpu
from fungrad.lowering.cpu import llvm
from fungrad.lowering.cpu.kernel import KernelWriter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A fresh interpreter, since the pool is compiled once per process. The kernels of f are large
# enough to be split across threads (llvm.PARALLEL_COST).
POOL_SCRIPT = textwrap.dedent("""
    import os, sys, json
    import numpy as np
    import fungrad as fg, fungrad.numpy as fnp
    from fungrad.lowering.cpu import compiler as cpu
    from fungrad.lowering.cpu import runtime

    def f(x):
        return fnp.tanh(x) * 2.0 + fnp.exp(-x * x)

    x = np.linspace(-3, 3, 1 << 20, dtype=np.float32).reshape(1024, 1024)
    want = np.tanh(x) * np.float32(2) + np.exp(-x * x)
    out = {}
    os.environ["FUNGRAD_NUM_THREADS"] = "1"
    y1 = np.asarray(fg.jit(f)(x))
    out["modules_one_thread"] = cpu.compile_stats()["modules"]
    out["err_one_thread"] = float(np.max(np.abs(y1 - want)))
    os.environ["FUNGRAD_NUM_THREADS"] = "2"
    y2 = np.asarray(fg.jit(lambda x: f(x))(x))  # a new executable: reads the thread budget
    out["modules_two_threads"] = cpu.compile_stats()["modules"]
    out["workers"] = runtime.pool_workers()
    out["err_two_threads"] = float(np.max(np.abs(y2 - want)))
    out["same"] = bool(np.array_equal(y1, y2))
    print(json.dumps(out))
""")


def run_fresh(script: str) -> dict:
    import json

    env = dict(os.environ, FUNGRAD_DISABLE_CACHE="1")
    env.pop("FUNGRAD_NUM_THREADS", None)
    proc = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_pool_is_compiled_only_when_a_call_may_use_threads():
    r = run_fresh(POOL_SCRIPT)
    assert r["modules_one_thread"] == 1  # the jitted function only: no thread pool
    assert r["modules_two_threads"] == 3  # the second function, and the pool for it
    assert r["workers"] >= 1  # the parallel kernel really ran on the pool
    assert r["err_one_thread"] < 1e-5 and r["err_two_threads"] < 1e-5
    assert r["same"]  # the split does not change any element


def big_program():
    """A jitted function with two large (parallel) kernels around matmuls, its inputs, and the
    float64 numpy result."""

    def f(x, w):
        h = fnp.tanh(x @ w) + 1.0
        return fnp.tanh(h @ w) * 2.0, fnp.sum(h, axis=0)

    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 512)).astype(np.float32)
    w = (rng.standard_normal((512, 512)) / 24).astype(np.float32)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    h = np.tanh(x64 @ w64) + 1.0
    return fg.jit(f), (x, w), (np.tanh(h @ w64) * 2.0, h.sum(axis=0))


def test_parallel_steps_share_one_serial_helper_and_each_kernel_is_called_through_it():
    jf, args, _ = big_program()
    text = jf.lower(*args).as_text()
    ir = text[text.index("# LLVM IR") :]
    assert ir.count("define internal void @fg_serial_for(") == 1
    assert f"@{llvm.POOL_SYMBOL} = external global ptr" in ir
    calls = [ln for ln in ir.splitlines() if "call void %" in ln and ".for(" in ln]
    assert len(calls) >= 2  # each parallel step picks pool or serial helper at run time
    for ln in calls:
        callee = ln.split("(ptr @", 1)[1].split(",", 1)[0]
        # the kernel's trampoline is never called directly, so it is never inlined (twice)
        assert f"call void @{callee}(" not in ir


def test_kernels_are_called_without_inlining():
    """Inlined, a kernel's body would go through LLVM's function simplification passes a second
    time inside its caller (the trampoline or the entry point): ~10% more LLVM work, no faster
    code (measured). So every call of a kernel function is marked ``noinline``."""
    jf, args, _ = big_program()
    exe = jf.lower(*args).compile()._exe
    kernel_calls = [
        ln
        for ln in exe.ir.splitlines()
        if ln.lstrip().startswith("call void @")
        and any(
            ln.lstrip().startswith(f"call void @{s.name}(")
            for s in exe.program.steps
            if hasattr(s, "loops")
        )
    ]
    assert kernel_calls
    assert all(ln.endswith(") noinline") for ln in kernel_calls), kernel_calls


def test_serial_and_threaded_calls_match_numpy(monkeypatch):
    jf, args, want = big_program()
    for n in ("1", "2", "3"):
        monkeypatch.setenv("FUNGRAD_NUM_THREADS", n)
        g = fg.jit(lambda *v: jf(*v))  # a new executable per thread budget
        got = g(*args)
        for a, b in zip(got, want):
            np.testing.assert_allclose(np.asarray(a), b, rtol=1e-4, atol=1e-4)


SCALE_IR = textwrap.dedent("""
        define void @k(ptr noalias %x, i64 %n) {
        entry:
          br label %loop
        loop:
          %i = phi i64 [0, %entry], [%i1, %loop]
          %p = getelementptr inbounds float, ptr %x, i64 %i
          %v = load float, ptr %p
          %w = fmul float %v, 3.0
          store float %w, ptr %p
          %i1 = add nuw nsw i64 %i, 1
          %c = icmp slt i64 %i1, %n
          br i1 %c, label %loop, label %exit
        exit:
          ret void
        }""")
"""``x[i] *= 3`` for i < n: a loop the optimiser vectorises."""


def test_compile_stats_add_up_per_stage():
    before = cpu.compile_stats()
    mod = cpu.compile_module(SCALE_IR, ["k"], name="stats_test")
    s = mod.stats
    assert abs(s.total_s - (s.parse_s + s.optimize_s + s.codegen_s + s.load_s)) < 1e-12
    after = cpu.compile_stats()
    assert after["modules"] == before["modules"] + 1
    x = np.arange(5, dtype=np.float32)
    mod.function("k", [np.ctypeslib.ctypes.c_void_p, np.ctypeslib.ctypes.c_int64])(x.ctypes.data, 5)
    np.testing.assert_array_equal(x, np.arange(5, dtype=np.float32) * 3)


def test_codegen_only_pipeline_skips_the_optimiser(tmp_path, monkeypatch):
    """``passes=False`` (the matmul library's hand-vectorised IR) runs no IR pass, only code
    generation, and is cached under its own key."""
    import ctypes

    monkeypatch.setenv("FUNGRAD_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("FUNGRAD_DISABLE_CACHE", raising=False)
    raw = cpu.compile_module(SCALE_IR, ["k"], name="raw", passes=False, debug_info=True)
    assert raw.stats.optimize_s < 1e-3
    assert "x float>" not in raw.optimized_ir  # not vectorised: no pass ran
    x = np.arange(100, dtype=np.float32)
    raw.function("k", [ctypes.c_void_p, ctypes.c_int64])(x.ctypes.data, 100)
    np.testing.assert_array_equal(x, np.arange(100, dtype=np.float32) * 3)
    assert cpu.compile_module(SCALE_IR, ["k"], name="raw", passes=False).stats.cache_hit
    assert not cpu.compile_module(SCALE_IR, ["k"], name="opt").stats.cache_hit  # another key
    opt = cpu.compile_module(SCALE_IR, ["k"], name="opt", debug_info=True)
    assert "x float>" in opt.optimized_ir


# A loop whose code loop strength reduction changes (a stride-3 read beside a stride-1 write).
LSR_IR = textwrap.dedent("""
        define void @strided(ptr %a, ptr %b, i64 %n) {
        entry:
          br label %loop
        loop:
          %i = phi i64 [0, %entry], [%i1, %loop]
          %j = mul i64 %i, 3
          %pa = getelementptr float, ptr %a, i64 %j
          %pb = getelementptr float, ptr %b, i64 %i
          %x = load float, ptr %pa
          store float %x, ptr %pb
          %i1 = add i64 %i, 1
          %c = icmp slt i64 %i1, %n
          br i1 %c, label %loop, label %exit
        exit:
          ret void
        }""")


def test_llvm_options_apply_to_fungrads_codegen_only_compiles_only(monkeypatch):
    """``compiler.LLVM_OPTIONS`` (``-disable-lsr``) shape the code of fungrad's codegen-only
    modules (the gemm library), not its optimised kernels, and are put back to LLVM's defaults
    afterwards: another llvmlite user in the process (numba) compiles as it would without
    fungrad."""
    import llvmlite.binding as llvm

    def llvmlite_asm():
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        tm = llvm.Target.from_default_triple().create_target_machine(opt=2)
        return tm.emit_assembly(llvm.parse_assembly(LSR_IR))

    before = llvmlite_asm()
    ours = cpu.compile_module(LSR_IR, ["strided"], name="lsr", passes=False, debug_info=True)
    optimised = cpu.compile_module(LSR_IR, ["strided"], name="lsr", debug_info=True)
    assert llvmlite_asm() == before  # the options were put back
    llvm.set_option("", "-disable-lsr")
    try:
        assert llvmlite_asm() != before  # (the loop is one the option changes)
    finally:
        llvm.set_option("", "-disable-lsr=false")
    monkeypatch.setattr(cpu, "LLVM_OPTIONS", {})
    plain = cpu.compile_module(LSR_IR, ["strided"], name="lsr", passes=False, debug_info=True)
    assert plain.assembly != ours.assembly  # the option applied to the codegen-only compile
    default = cpu.compile_module(LSR_IR, ["strided"], name="lsr", debug_info=True)
    assert default.assembly == optimised.assembly  # ... and not to the optimised one
    a = np.arange(30, dtype=np.float32)
    b = np.zeros(10, np.float32)
    ours.function("strided", [np.ctypeslib.ctypes.c_void_p] * 2 + [np.ctypeslib.ctypes.c_int64])(
        a.ctypes.data, b.ctypes.data, 10
    )
    np.testing.assert_array_equal(b, a[::3])


# -- compiling on several threads ---------------------------------------------------------------


def _several_kernels(x, w):
    """Optimised kernels (row and column reductions, tanh, exp, log) between products."""
    out = 0.0
    for i in range(3):
        h = fnp.tanh(x @ w + i)
        h = h - h.mean(axis=1, keepdims=True)
        e = fnp.exp(h - h.max(axis=1, keepdims=True))
        s = e / e.sum(axis=1, keepdims=True)
        x = fnp.sqrt((s @ w.T) ** 2 + 1.0) * fnp.log1p(fnp.abs(x))
        out = out + x.sum(axis=0) + fnp.cos(s).std(axis=0).sum()
    return out


def _o3_modules(ir: str) -> int:
    return ir.count("LLVM O3")


def test_kernels_split_into_one_module_per_compile_thread(monkeypatch):
    """With several threads allowed, a program's optimised kernels are split into modules of
    about equal size that compile at once, each on its own thread in its own LLVM context
    (llvm._split, cpu._compile_objects); the results are bitwise those of one module."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 256)).astype(np.float32)
    w = rng.standard_normal((256, 256)).astype(np.float32) / 16
    out, modules = {}, {}
    for n in ("1", "2", "3"):
        monkeypatch.setenv("FUNGRAD_NUM_THREADS", n)
        compiled = fg.jit(_several_kernels).lower(x, w).compile()
        modules[n] = _o3_modules(compiled._exe.ir)
        out[n] = np.asarray(compiled(x, w))
    assert modules["1"] == 1 and modules["2"] == 2 and modules["3"] >= 2, modules
    np.testing.assert_array_equal(out["2"], out["1"])
    np.testing.assert_array_equal(out["3"], out["1"])
    want = np.asarray(_several_kernels(x.astype(np.float64), w.astype(np.float64)))
    np.testing.assert_allclose(out["1"], want, rtol=2e-4, atol=1e-3)


def test_a_hot_entry_split_from_its_input_helper_still_links(monkeypatch):
    """An entry point with a while loop (unknown trips: optimised, not glue) goes into the
    optimised functions that are split over compile threads; the shared input helper
    (@fg_input_data) may land in another module than the entry and must then be exported and
    declared there (jit of jax.scipy.optimize.minimize failed to parse)."""
    from fungrad.scipy.optimize import minimize

    def rosen(x):
        return fnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)

    x0 = np.zeros(2, np.float32)
    for n in ("2", "3"):  # (with 2 threads the helper and the entry were apart)
        monkeypatch.setenv("FUNGRAD_NUM_THREADS", n)
        jf = fg.jit(lambda x0: minimize(rosen, x0, method="BFGS").x)
        parts = llvm.render(jf.lower(x0).compile()._exe.program)
        assert len(parts) >= 2
        for p in parts:
            if "@fg_input_data(" in p.ir_text:
                defined = r"^(define|declare) (internal )?i1 @fg_input_data\("
                assert re.search(defined, p.ir_text, re.M), p.ir_text
        np.testing.assert_allclose(np.asarray(jf(x0)), [1.0, 1.0], atol=1e-3)


def test_split_balances_ir_size_and_keeps_small_programs_in_one_module():
    from fungrad.lowering.cpu.llvm import SPLIT_MAX, SPLIT_MIN_LINES, Function, _split

    funcs = [Function("x\n" * n) for n in (400, 50, 300, 120, 250, 90)]  # 1216 lines
    parts = _split(funcs, 3)
    assert len(parts) == 3 and sorted(f for p in parts for f in map(id, p)) == sorted(
        map(id, funcs)
    )
    sizes = sorted(sum(f.text.count("\n") for f in p) for p in parts)
    assert sizes[-1] - sizes[0] <= 120  # largest first into the smallest list
    assert [list(map(id, p)) for p in parts] == [list(map(id, p)) for p in _split(funcs, 3)]
    assert len(_split(funcs, 8)) == 1216 // SPLIT_MIN_LINES  # (every list has enough work)
    many = [Function("x\n" * 400) for _ in range(20)]
    assert len(_split(many, 64)) == SPLIT_MAX
    assert _split(funcs[:1], 4) == [funcs[:1]] and _split([], 4) == []
    assert len(_split(funcs, 1)) == 1


def test_a_module_closed_while_another_thread_holds_the_lock_does_not_wait():
    """A CompiledModule collected on a compile thread (its garbage collection runs there) while
    the thread that holds ``llvm_lock`` waits for that compile thread must not wait for the
    lock (a deadlock, seen in the suite): its engine is freed by the next holder."""
    import threading

    mod = cpu.compile_module(SCALE_IR, ["k"], name="retired")
    engine = mod._engine
    held, release = threading.Event(), threading.Event()

    def holder():
        with cpu.llvm_lock:
            held.set()
            release.wait(30)

    t = threading.Thread(target=holder)
    t.start()
    held.wait(30)
    closer = threading.Thread(target=mod.close)
    closer.start()
    closer.join(10)
    try:
        assert not closer.is_alive()  # close() returned while the lock was held
        assert engine in cpu._retired
    finally:
        release.set()
        t.join()
    cpu.compile_module(SCALE_IR, ["k"], name="next")  # takes the lock, frees the engine
    assert engine not in cpu._retired


def _break_kernels_computing(op: str, monkeypatch) -> None:
    """Make the IR of every kernel that computes ``op`` invalid (an undefined value)."""
    orig = KernelWriter.function

    def broken(self, whole=False):
        text = orig(self, whole)
        if op in repr(self.kern.stores):
            text = text.replace("entry:\n", "entry:\n  %bad = fadd float %undefined, 1.0\n", 1)
        return text

    monkeypatch.setattr(KernelWriter, "function", broken)


def test_a_compile_error_on_a_compile_thread_is_raised_and_the_process_goes_on(monkeypatch):
    """A kernel LLVM rejects in one of the modules compiled on several threads raises the same
    CompileError as on one thread (naming the kernel); the other threads finish, the lock and
    LLVM's options are released, and the next compile works."""
    monkeypatch.setenv("FUNGRAD_NUM_THREADS", "2")
    _break_kernels_computing("log1p", monkeypatch)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((256, 256)).astype(np.float32)
    w = rng.standard_normal((256, 256)).astype(np.float32) / 16
    with pytest.raises(fg.CompileError) as info:
        fg.jit(_several_kernels).lower(x, w).compile()
    assert info.value.step == "parse" and "log1p" in str(info.value)
    monkeypatch.undo()
    monkeypatch.setenv("FUNGRAD_NUM_THREADS", "2")
    compiled = fg.jit(_several_kernels).lower(x, w).compile()
    assert _o3_modules(compiled._exe.ir) == 2
    assert cpu.llvm_lock.acquire(blocking=False)  # (not left held)
    cpu.llvm_lock.release()
    want = np.asarray(_several_kernels(x.astype(np.float64), w.astype(np.float64)))
    np.testing.assert_allclose(np.asarray(compiled(x, w)), want, rtol=2e-4, atol=1e-3)


AHEAD_SCRIPT = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    import fungrad as fg
    from fungrad.lowering.cpu import gemm, llvm, runtime

    calls = []
    original = llvm._compile_quietly
    def recording(library, pool):
        calls.append([library, pool])
        original(library, pool)
    llvm._compile_quietly = recording
    a = np.ones((256, 256), np.float32)
    y = np.asarray(fg.jit(lambda a, b: a @ b + 1.0)(a, a))
    print(json.dumps({"calls": calls, "ok": bool((y == 257.0).all()),
                      "library": gemm.compiled(), "pool": runtime._module is not None}))
""")


@pytest.mark.parametrize("nthreads", ["1", "2"])
def test_libraries_compile_ahead_on_another_thread(nthreads):
    """A process that may run threads compiles the gemm library and the thread pool on another
    thread while the program renders (llvm.compile_ahead); one that may not compiles nothing
    ahead (its pool is never needed)."""
    env = dict(os.environ, FUNGRAD_NUM_THREADS=nthreads, FUNGRAD_DISABLE_CACHE="1")
    proc = subprocess.run(
        [sys.executable, "-c", AHEAD_SCRIPT], env=env, capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["ok"] and got["library"]
    if nthreads == "1":
        assert got["calls"] == [] and not got["pool"]
    else:
        assert got["calls"] == [[True, True]] and got["pool"]


# -- glue and small kernels without optimisation; shared kernel bodies --------------------------

CALLER_IR = textwrap.dedent("""
        declare void @k(ptr noalias, i64)
        define void @twice(ptr %x, i64 %n) {
        entry:
          call void @k(ptr %x, i64 %n)
          call void @k(ptr %x, i64 %n)
          ret void
        }""")
"""Calls ``@k`` of SCALE_IR, defined in another module."""


def test_modules_call_each_other_and_are_cached_one_by_one(tmp_path, monkeypatch):
    import ctypes

    monkeypatch.setenv("FUNGRAD_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("FUNGRAD_DISABLE_CACHE", raising=False)
    parts = [cpu.Part(SCALE_IR, 3), cpu.Part(CALLER_IR, 0, passes=False)]
    for hit in (False, True):
        mod = cpu.compile_modules(parts, ["twice"], name="linked")
        assert mod.stats.cache_hit is hit
        x = np.arange(50, dtype=np.float32)
        mod.function("twice", [ctypes.c_void_p, ctypes.c_int64])(x.ctypes.data, 50)
        np.testing.assert_array_equal(x, np.arange(50, dtype=np.float32) * 9)
    # alone, the caller's external is unresolved: a CompileError, never a call to address 0
    with pytest.raises(cpu.CompileError, match=r"unresolved external symbol\(s\) \['k'\]"):
        cpu.compile_modules(parts[1:], ["twice"], name="unlinked")
    with pytest.raises(cpu.CompileError, match="entry point"):
        cpu.compile_modules(parts, ["thrice"], name="noentry")


def mlp_like_program():
    """Large tanh/relu layers around products, a small softmax loss and two bias vectors
    updated by the same code: ``(jitted step, args, float64 reference)``."""

    def step(x, w1, w2, b1, b2, y):
        h = fnp.tanh(x @ w1 + b1)
        z = fnp.maximum(h @ w2 + b2, 0.0)
        loss = -fnp.mean(fnp.sum(y * fg.nn.log_softmax(z), axis=1))
        return loss, b1 - 0.1 * fnp.sum(h, axis=0), b2 - 0.1 * fnp.sum(z, axis=0)

    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 256)).astype(np.float32)
    w1 = (rng.standard_normal((256, 256)) / 16).astype(np.float32)
    w2 = (rng.standard_normal((256, 10)) / 16).astype(np.float32)
    b1, b2 = rng.standard_normal(256).astype(np.float32), np.zeros(10, np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)]
    a = [v.astype(np.float64) for v in (x, w1, w2, b1, b2, y)]
    h = np.tanh(a[0] @ a[1] + a[3])
    z = np.maximum(h @ a[2] + a[4], 0.0)
    zs = z - z.max(axis=1, keepdims=True)
    logp = zs - np.log(np.exp(zs).sum(axis=1, keepdims=True))
    want = (
        -np.mean(np.sum(a[5] * logp, axis=1)),
        a[3] - 0.1 * h.sum(axis=0),
        a[4] - 0.1 * z.sum(axis=0),
    )
    return fg.jit(step), (x, w1, w2, b1, b2, y), want


def test_small_kernels_and_glue_compile_without_optimisation():
    """Kernels under ``llvm.COLD_COST`` or ``COLD_SHARE`` of the program's work go with the
    entry point into a module compiled without passes and with FastISel; the large kernels
    get the full pipeline in another module, and the results do not change."""
    jf, args, want = mlp_like_program()
    exe = jf.lower(*args).compile()._exe
    parts = llvm.render(exe.program)
    assert [(p.opt_level, p.passes) for p in parts] == [(3, True), (0, False)]
    hot, glue = parts
    kernels = [s for s in exe.program.steps if hasattr(s, "loops")]
    cold = llvm._cold_kernels(exe.program.steps)
    assert 0 < len(cold) < len(kernels)
    for k in kernels:
        where = glue if id(k) in cold else hot
        other = hot if where is glue else glue
        assert f"void @{k.name}(" in where.ir_text.replace("declare", "define")
        assert f"define internal void @{k.name}(" not in other.ir_text
    assert f"define i32 @{exe.program.name}(" in glue.ir_text
    for got, ref in zip(jf(*args), want):
        np.testing.assert_allclose(np.asarray(got), ref, rtol=2e-5, atol=2e-5)


def test_mid_size_kernels_of_product_heavy_programs_are_optimised():
    """``COLD_SHARE`` of a program of large products is millions of operations: a kernel above
    ``llvm.COLD_MAX`` (here a 64x128 tanh, ~0.2 M) is optimised all the same; results as
    numpy's."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 512)).astype(np.float32)
    b = rng.standard_normal((512, 512)).astype(np.float32)
    c = rng.standard_normal((64, 128)).astype(np.float32)

    def f(a, b, c):
        return a @ b, fg.numpy.tanh(c) * 2.0

    jf = fg.jit(f)
    exe = jf.lower(a, b, c).compile()._exe
    steps = exe.program.steps
    (tanh,) = [s for s in steps if hasattr(s, "loops")]
    products = sum(2 * s.m * s.n * s.k * s.batch for s in steps if hasattr(s, "batch"))
    assert products // llvm.GEMM_FLOPS_PER_OP * llvm.COLD_SHARE > tanh.cost() > llvm.COLD_MAX
    assert id(tanh) not in llvm._cold_kernels(steps)
    got = jf(a, b, c)
    np.testing.assert_allclose(np.asarray(got[0]), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(np.asarray(got[1]), np.tanh(c.astype(np.float64)) * 2, atol=1e-6)


def test_small_programs_optimise_reductions_and_visible_kernels():
    """A program of small products (``COLD_SHARE`` of its work under ``COLD_MAX``): a kernel
    is glue only under ``SMALL_SHARE`` of the work, a reduction weighing ``REDUCE_WEIGHT``
    times its cost, so a bias gradient's 128 x 10 column sum (glue under ``COLD_SHARE`` alone)
    is optimised; results as numpy's."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((128, 64)).astype(np.float32)
    w = rng.standard_normal((64, 10)).astype(np.float32)
    b = rng.standard_normal(10).astype(np.float32)
    v = rng.standard_normal((64, 512)).astype(np.float32)

    def f(x, w, b, v):
        z = x @ w
        return b - 0.05 * fg.numpy.sum(z, axis=0), z * 2.0, b * 3.0, x @ v

    jf = fg.jit(f)
    steps = jf.lower(x, w, b, v).compile()._exe.program.steps
    work = llvm._work(steps, {})
    assert work * llvm.COLD_SHARE < llvm.COLD_MAX
    kernels = {s.stores[0].buffer.name: s for s in steps if hasattr(s, "loops")}
    cold = llvm._cold_kernels(steps)
    colsum = next(k for k in kernels.values() if llvm._reduce_weight(k) > 1)
    assert colsum.cost() <= work * llvm.COLD_SHARE  # (glue under the share rule alone)
    assert id(colsum) not in cold
    got = jf(x, w, b, v)
    z = x.astype(np.float64) @ w
    np.testing.assert_allclose(np.asarray(got[0]), b - 0.05 * z.sum(0), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(np.asarray(got[1]), z * 2, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(np.asarray(got[2]), b * 3, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(got[3]), x.astype(np.float64) @ v, rtol=1e-4, atol=1e-3)


def test_column_sum_of_a_product_operand_reads_the_stored_operand():
    """A bias gradient beside its weight gradient: ``tanh(z) * g`` is stored for the matrix
    product, and the column sum reads that buffer rather than evaluating the tanh again in its
    own loop nest; both results as numpy's (float64)."""
    rng = np.random.default_rng(1)
    z, g = (rng.standard_normal((256, 64)).astype(np.float32) for _ in range(2))
    h = rng.standard_normal((256, 32)).astype(np.float32)

    def f(z, g, h):
        d = fnp.tanh(z) * g
        return d.sum(axis=0), h.T @ d

    jf = fg.jit(f)
    steps = jf.lower(z, g, h).compile()._exe.program.steps
    (colsum,) = [s for s in steps if s.name.startswith("colred")]
    assert {b.kind for b in colsum.reads()} == {"temp"}  # not z and g: the stored product
    d = np.tanh(z.astype(np.float64)) * g
    got = jf(z, g, h)
    np.testing.assert_allclose(np.asarray(got[0]), d.sum(axis=0), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(np.asarray(got[1]), h.T.astype(np.float64) @ d, rtol=1e-4, atol=1e-4)


def test_batched_product_copies_operands_keeping_their_inner_dim():
    """Attention scores ``einsum('bqhd,bkhd->bhqk')`` of slices of one projection: both
    operands are copied to (b, h, t, d), the keys then read transposed by the product, rather
    than the keys to (b, h, d, t) (a copy reading one element per row); values as numpy's."""
    b, t, h, d = 2, 128, 2, 64
    rng = np.random.default_rng(2)
    qk = rng.standard_normal((b, t, 2 * h * d)).astype(np.float32)

    def heads(qk, i):
        return qk[..., i * h * d : (i + 1) * h * d].reshape(b, t, h, d)

    jf = fg.jit(lambda qk: fnp.einsum("bqhd,bkhd->bhqk", heads(qk, 0), heads(qk, 1)))
    steps = jf.lower(qk).compile()._exe.program.steps
    copies = [st.buffer.shape for s in steps if hasattr(s, "loops") for st in s.stores]
    assert copies == [(b, h, t, d), (b, h, t, d)]
    (gemm,) = [s for s in steps if hasattr(s, "batch")]
    assert (gemm.trans_a, gemm.trans_b, gemm.batch) == (False, True, b * h)
    q, k = (heads(qk, i).astype(np.float64) for i in (0, 1))
    want = np.einsum("bqhd,bkhd->bhqk", q, k)
    np.testing.assert_allclose(np.asarray(jf(qk)), want, rtol=1e-4, atol=1e-4)


def test_tiny_programs_are_one_module_without_optimisation():
    exe = fg.jit(lambda x: x * 2.0 + 1.0).lower(np.float32(3)).compile()._exe
    assert [(p.opt_level, p.passes) for p in llvm.render(exe.program)] == [(0, False)]
    assert float(fg.jit(lambda x: x * 2.0 + 1.0)(np.float32(3))) == 7.0


def test_kernels_with_the_same_code_share_one_function():
    """Two layers' bias updates run the same code on other buffers: one function for zeroing
    the two column sums, not two (a column sum may also merge into the kernel storing its
    operand: then it has no function of its own)."""

    def f(x, w1, w2, b1, b2):
        h = fnp.tanh(x @ w1 + b1)
        z = fnp.tanh(h @ w2 + b2)
        return b1 - 0.1 * fnp.sum(h, axis=0), b2 - 0.1 * fnp.sum(z, axis=0), z

    rng = np.random.default_rng(0)
    args = [
        rng.standard_normal(s).astype(np.float32)
        for s in [(64, 256), (256, 256), (256, 256), (256,), (256,)]
    ]
    jf = fg.jit(f)
    exe = jf.lower(*args).compile()._exe
    kernels = [s.name for s in exe.program.steps if hasattr(s, "loops")]
    defined = [k for k in kernels if f"void @{k}(" in exe.ir.replace("declare", "define")]
    inits = [k for k in kernels if k.startswith("init")]
    assert len(inits) == 2 and len([k for k in defined if k in inits]) == 1, (kernels, defined)
    sums = [k for k in kernels if k.startswith("colred")]
    assert len([k for k in defined if k in sums]) <= 1, (kernels, defined)
    x, w1, w2, b1, b2 = (a.astype(np.float64) for a in args)
    h = np.tanh(x @ w1 + b1)
    z = np.tanh(h @ w2 + b2)
    for got, ref in zip(jf(*args), (b1 - 0.1 * h.sum(0), b2 - 0.1 * z.sum(0), z)):
        np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-4, atol=1e-4)


def test_kernel_cost_counts_hoisted_work_once():
    """A row softmax evaluates each row's max and sum once, not once per element: the cost
    grows like rows x columns, not rows x columns^2."""
    from fungrad.lowering import fusion

    def cost(cols):
        x = np.ones((8, cols), np.float32)
        prog = fg.jit(lambda x: fg.nn.softmax(x, axis=1)).lower(x).compile()._exe.program
        return sum(s.cost() for s in prog.steps if isinstance(s, fusion.Kernel))

    assert 1.8 < cost(256) / cost(128) < 2.2


def test_an_entry_with_loops_is_optimised_and_calls_the_glue():
    """An entry point holding a loop of unknown trip count (fori_loop to a traced bound: a
    while loop) gets the full pipeline; the small kernels stay glue, called across the two
    modules, and sort's functions are optimised."""

    def f(x, b, n):
        y = fnp.tanh(x) * 2.0 + fnp.exp(-x * x)
        s = fg.lax.fori_loop(0, n, lambda i, c: c * 1.01 + fnp.sum(b), b)
        return y, s - 1.0, fnp.sort(b)

    x = np.linspace(-3, 3, 1 << 18, dtype=np.float32).reshape(512, 512)
    b = np.array([3, -1, 2, 7, 0, 5, 4], np.float32)
    jf = fg.jit(f)
    exe = jf.lower(x, b, 5).compile()._exe
    hot, glue = llvm.render(exe.program)
    assert (hot.opt_level, glue.opt_level) == (3, 0)
    assert f"define i32 @{exe.program.name}(" in hot.ir_text
    assert re.search(r"^define void @k\d+\(", glue.ir_text, re.M)  # a small kernel
    y, s, srt = jf(x, b, 5)
    c = b.astype(np.float64)
    for _ in range(5):
        c = c * 1.01 + b.sum()
    np.testing.assert_allclose(np.asarray(y), np.tanh(x) * 2 + np.exp(-x * x), atol=1e-6)
    np.testing.assert_allclose(np.asarray(s), c - 1, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(srt), np.sort(b))


def test_an_entry_with_a_short_scan_stays_glue():
    """An entry point whose loops run a few thousand iterations at most (a scan of length 64,
    llvm.ENTRY_LOOP_TRIPS) is glue: no IR passes, its loop unoptimised; the kernels it calls
    in the loop keep the full pipeline, and the result is the Python loop's."""

    def f(c, xs):
        return fg.lax.scan(lambda c, x: (fnp.tanh(c * 0.9 + x), c * 2.0), c, xs)

    xs = np.random.default_rng(0).standard_normal((64, 512)).astype(np.float32)
    c0 = np.zeros(512, np.float32)
    jf = fg.jit(f)
    exe = jf.lower(c0, xs).compile()._exe
    parts = llvm.render(exe.program)
    entry = f"define i32 @{exe.program.name}(ptr noalias %args, i64 %nthreads) optnone noinline"
    assert any(entry in p.ir_text for p in parts)
    assert any(
        p.passes and re.search(r"^define (internal )?void @k\d+\(", p.ir_text, re.M) for p in parts
    )
    c, ys = jf(c0, xs)
    ref_c, ref_ys = c0.astype(np.float64), []
    for x in xs.astype(np.float64):
        ref_ys.append(ref_c * 2.0)
        ref_c = np.tanh(ref_c * 0.9 + x)
    np.testing.assert_allclose(np.asarray(c), ref_c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(ys), np.array(ref_ys), rtol=1e-5, atol=1e-6)


def test_a_compile_error_names_the_kernel_and_what_it_computes(monkeypatch):
    """An LLVM failure inside a kernel's code says which kernel, which operations were fused
    into it, and where the IR is; nothing is cached and the process goes on."""
    _break_kernels_computing("tanh", monkeypatch)
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    with pytest.raises(fg.CompileError) as info:
        fg.jit(lambda x: fnp.tanh(x) * 2.0)(x)
    err = info.value
    assert err.step == "parse" and "%undefined" in err.llvm_message
    assert err.where is not None and err.where.startswith("kernel k")
    assert "tanh" in err.where and "tanh" in str(err)
    with open(err.ir_path) as f:
        assert "%undefined" in f.read()
    monkeypatch.undo()
    np.testing.assert_allclose(
        np.asarray(fg.jit(lambda x: fnp.tanh(x) * 2.0)(x)), np.tanh(x) * 2.0, rtol=1e-6
    )


def test_collection_is_paused_while_compiling_and_restored_after(monkeypatch):
    """The cyclic collector is off inside a compile (planning's many small objects triggered
    collections that scanned the whole process), on again after it, also after a compile
    that raised, and left off when the caller had turned it off."""
    import gc

    from fungrad.lowering import fusion

    seen = []
    plan = fusion.plan

    def spy(*args, **kwargs):
        seen.append(gc.isenabled())
        if len(seen) == 2:
            raise RuntimeError("a planner failure")
        return plan(*args, **kwargs)

    monkeypatch.setattr(fusion, "plan", spy)
    assert gc.isenabled()
    x = np.arange(6.0, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(fg.jit(lambda v: v * 2.0)(x)), x * 2)
    assert seen == [False] and gc.isenabled()
    with pytest.raises(RuntimeError, match="a planner failure"):
        fg.jit(lambda v: v * 3.0)(x)
    assert seen == [False, False] and gc.isenabled()
    gc.disable()
    try:
        np.testing.assert_array_equal(np.asarray(fg.jit(lambda v: v + 1.0)(x)), x + 1)
        assert seen == [False, False, False] and not gc.isenabled()
    finally:
        gc.enable()
