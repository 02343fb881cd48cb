"""Measurements for a run of the GPU backend on a real GPU (issue 23), driven by
bench/gpu_device.sh: one section per call, every result checked against numpy (float64 where
rounding matters) and appended as a JSON line to ``$OUT/results.jsonl`` as soon as it is
measured, so a run cut short still brings its data back.

Sections:
- ``env``: every wgpu adapter (info, limits, features), the one fungrad picks, its probes.
- ``bench``: copy bandwidth (WGSL copy kernels, a buffer copy), the fused chain of
  bench/gpu_bench.py as achieved bandwidth, fungrad's tiled matmul (GFLOP/s), the MLP training
  step on the GPU against the same step on the CPU backend, reductions, cumsum, sort, scatter.
- ``sweep``: the thresholds and sizes the GPU backend picks by itself (tree reductions,
  workgroup sizes, gemm tiles (schemes.GEMM_TILE_GPU), a forced split-K, rank against
  bitonic sort, scan blocks, GEMM_MIN_FLOPS; ``GD_SWEEPS`` picks some), each setting
  compiled afresh (``compile_jaxpr``: no jit cache; a new setting renders new WGSL, so the
  pipeline cache, keyed by source, cannot hide it).
- ``summary``: a short table of results.jsonl.

Device time: results stay on the device (GpuArray); ``inner`` calls are submitted back to back
and the last one waited for (a 4-byte read), ``reps`` times; the median over the batch, minus
nothing: at these sizes the submit cost hides behind the device's work. Hand-written kernels
are timed as (batch of K dispatches - batch of 1) / (K - 1), which removes submit and wait.

Run: OUT=/tmp/out python bench/gpu_device.py SECTION [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))

# fungrad is imported by main() for the measuring sections only: the summary runs without it
fg = fnp = compile_jaxpr = gpu = None

OUT = os.environ.get("OUT") or "/tmp/gpu_device_out"
QUICK = False


def record(section: str, name: str, **fields) -> None:
    """Append one result to $OUT/results.jsonl and print it."""
    row = {"section": section, "name": name, **fields}
    with open(os.path.join(OUT, "results.jsonl"), "a") as f:
        f.write(json.dumps(row, default=str) + "\n")
    shown = ", ".join(f"{k}={_fmt(v)}" for k, v in fields.items())
    print(f"[{section}] {name}: {shown}"[:400], flush=True)


def _fmt(v):
    if isinstance(v, float):
        return f"{v:.4g}"
    return v


@contextlib.contextmanager
def guarded(section: str, name: str):
    """Run a measurement; an exception is recorded and printed, never fatal."""
    t0 = time.perf_counter()
    try:
        yield
    except Exception as e:  # a failing measurement must not stop the others
        traceback.print_exc()
        record(section, name, error=f"{type(e).__name__}: {e}"[:500])
    print(f"  ({name}: {time.perf_counter() - t0:.1f} s)", flush=True)


@contextlib.contextmanager
def patched(*settings):
    """Set module attributes ``(module, name, value)`` for the block, then restore them."""
    old = [(m, k, getattr(m, k)) for m, k, _ in settings]
    try:
        for m, k, v in settings:
            setattr(m, k, v)
        yield
    finally:
        for m, k, v in old:
            setattr(m, k, v)


def rel_err(got, ref) -> float:
    """||got - ref|| / ||ref|| in float64 (inf where got has a NaN)."""
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    if not np.all(np.isfinite(got)):
        return float("inf")
    den = np.linalg.norm(ref.ravel()) or 1.0
    return float(np.linalg.norm((got - ref).ravel()) / den)


def _wait(out) -> None:
    for leaf in fg.tree_util.tree_leaves(out):
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()


def device_time(call, *, inner: int | None = None, reps: int = 7, warm: float = 0.1) -> float:
    """Median seconds per call of ``call()`` (GpuArrays in and out): ``inner`` calls back to
    back, the last waited for, ``reps`` times, after ``warm`` seconds of calls (a GPU's
    clocks ramp up under load). ``inner`` None: as many as fill about 20 ms."""
    end = time.perf_counter() + (0.0 if QUICK else warm)
    _wait(call())
    while time.perf_counter() < end:
        _wait(call())
    if inner is None:
        t0 = time.perf_counter()
        _wait(call())
        one = max(time.perf_counter() - t0, 1e-6)
        inner = int(min(200, max(1, 0.02 / one)))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            out = call()
        _wait(out)
        times.append((time.perf_counter() - t0) / inner)
    return statistics.median(times)


def compiled(f, args):
    """``f``'s GPU executable for ``args``, compiled afresh under the current settings."""
    return compile_jaxpr(fg.make_jaxpr(f)(*args), "gpu", "device")


def exe_time(exe, args, **kw) -> float:
    return device_time(lambda: exe.call(args), **kw)


def put(a):
    return fg.device_put(a, backend="gpu")


# -- env ------------------------------------------------------------------------------------


def section_env() -> None:
    import wgpu

    for i, a in enumerate(gpu.adapters()):
        with guarded("env", f"adapter{i}"):
            lim = dict(a.limits)
            keep = {
                k: lim[k]
                for k in sorted(lim)
                if any(
                    s in k
                    for s in ("storage", "buffer-size", "workgroup", "invocations", "dimension")
                )
            }
            record(
                "env",
                f"adapter{i}",
                describe=gpu.describe(a.info),
                info=dict(a.info),
                limits=keep,
                features=sorted(a.features),
            )
    with guarded("env", "selected"):
        rt = gpu.runtime()
        record(
            "env",
            "selected",
            adapter=rt.name,
            env_FUNGRAD_GPU_ADAPTER=os.environ.get("FUNGRAD_GPU_ADAPTER", ""),
            fused_fma=bool(rt.fused_fma),
            loop_limit=rt.loop_limit,
            cpu_adapter=bool(rt.cpu_adapter),
            max_bindings=rt.max_bindings,
            max_binding_bytes=rt.max_binding_bytes,
            devices=[str(d) for d in fg.devices()],
            wgpu=wgpu.__version__,
            numpy=np.__version__,
            cpus=os.cpu_count(),
        )


# -- bench ----------------------------------------------------------------------------------

# grid-stride kernels: a fixed number of workgroups, each invocation looping over the array
_COPY = """
@group(0) @binding(0) var<storage, read> x: array<{t}>;
@group(0) @binding(1) var<storage, read_write> y: array<{t}>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {{
  let n = arrayLength(&y);
  let stride = nwg.x * 256u;
  for (var i = id.x; i < n; i += stride) {{
    {body}
  }}
}}
"""
_CHAIN_BODY = "let v = x[i]; y[i] = tanh(v) * 0.5 + exp(-v * v) - sin(v) / (1.0 + v * v);"


def _kernel_time(rt, pipeline, bufs, groups, k: int) -> float:
    """Seconds per dispatch: (K dispatches in one submit, waited) - (1 dispatch), / (K-1)."""
    from gpu_bench import _dispatch, _run

    d = _dispatch(rt, pipeline, bufs, groups)

    def batch(count):
        t0 = time.perf_counter()
        _run(rt, [d] * count)
        rt.queue.read_buffer(bufs[-1], 0, 4)
        return time.perf_counter() - t0

    batch(k)
    one = statistics.median(batch(1) for _ in range(9))
    many = statistics.median(batch(k) for _ in range(9))
    return max(many - one, 1e-9) / (k - 1)


def bench_copy(n: int) -> float:
    """The copy ceiling in GB/s (bytes read + written): WGSL copy kernels (f32 and vec4),
    and a queue buffer copy. Returns the best."""
    rt = gpu.runtime()
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    xb = rt.device.create_buffer_with_data(data=x, usage=rt.usage)
    yb = rt.device.create_buffer(size=4 * n, usage=rt.usage)
    best = 0.0
    k = 20 if not QUICK else 4
    for name, t, body, words in (
        ("copy_f32", "f32", "y[i] = x[i];", n),
        ("copy_vec4", "vec4<f32>", "y[i] = x[i];", n // 4),
    ):
        with guarded("bench", name):
            rt.queue.write_buffer(yb, 0, np.full(n, np.nan, np.float32))  # poison
            pipe = rt.pipeline(name, _COPY.format(t=t, body=body))
            groups = min(-(-words // 256), 8192)
            sec = _kernel_time(rt, pipe, [xb, yb], groups, k)
            got = np.frombuffer(rt.queue.read_buffer(yb, 0, 4 * n), np.float32)
            ok = bool(np.array_equal(got, x))
            gbps = 8 * n / sec / 1e9
            best = max(best, gbps if ok else 0.0)
            record("bench", name, n=n, ms=sec * 1e3, GBps=gbps, exact=ok)
    with guarded("bench", "copy_buffer"):

        def bcopy(count):
            t0 = time.perf_counter()
            enc = rt.device.create_command_encoder()
            for _ in range(count):
                enc.copy_buffer_to_buffer(xb, 0, yb, 0, 4 * n)
            rt.queue.submit([enc.finish()])
            rt.queue.read_buffer(yb, 0, 4)
            return time.perf_counter() - t0

        bcopy(k)
        sec = max(
            statistics.median(bcopy(k) for _ in range(9))
            - statistics.median(bcopy(1) for _ in range(9)),
            1e-9,
        ) / (k - 1)
        gbps = 8 * n / sec / 1e9
        best = max(best, gbps)
        record("bench", "copy_buffer", n=n, ms=sec * 1e3, GBps=gbps)
    with guarded("bench", "chain_hand"):
        pipe = rt.pipeline("chain_hand", _COPY.format(t="f32", body=_CHAIN_BODY))
        sec = _kernel_time(rt, pipe, [xb, yb], min(-(-n // 256), 8192), k)
        got = np.frombuffer(rt.queue.read_buffer(yb, 0, 4 * n), np.float32)
        from gpu_bench import chain

        err = rel_err(got, chain(x.astype(np.float64)))
        gbps = 8 * n / sec / 1e9
        record("bench", "chain_hand", n=n, ms=sec * 1e3, GBps=gbps, rel_err=err)
    record("bench", "copy_ceiling", GBps=best)
    return best


def bench_chain(n: int, copy_gbps: float) -> None:
    from gpu_bench import chain

    x = np.random.default_rng(2).uniform(-4, 4, n).astype(np.float32)
    gx = put(x)
    f = fg.jit(chain, backend="gpu")
    got = np.asarray(f(gx))
    err = rel_err(got, chain(x.astype(np.float64)))
    sec = device_time(lambda: f(gx), inner=10 if not QUICK else 3)
    gbps = 8 * n / sec / 1e9
    record(
        "bench",
        "chain_fungrad",
        n=n,
        ms=sec * 1e3,
        GBps=gbps,
        of_copy=gbps / copy_gbps if copy_gbps else None,
        rel_err=err,
        dispatches=f.lower(gx).compile()._exe.num_dispatches,
    )


def bench_matmul(n: int) -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    ga, gb = put(a), put(b)
    f = fg.jit(lambda p, q: p @ q, backend="gpu")
    err = rel_err(np.asarray(f(ga, gb)), a.astype(np.float64) @ b.astype(np.float64))
    sec = device_time(lambda: f(ga, gb), inner=5 if not QUICK else 2)
    record(
        "bench",
        "matmul",
        n=n,
        ms=sec * 1e3,
        GFLOPs=2 * n**3 / sec / 1e9,
        of_peak_51T=2 * n**3 / sec / 51e12,
        rel_err=err,
    )


def bench_mlp() -> None:
    import jit_workloads as W

    params, x, y = W._mlp_inputs()
    jitted = W._mlp_program(fg)
    step = getattr(jitted, "__wrapped__", None) or jitted.fun
    ref_params, ref_loss = W._mlp_step_numpy(params, x, y, np.float64)
    times = {}
    for backend in ("gpu", "cpu"):
        with guarded("bench", f"mlp_{backend}"):
            f = fg.jit(step, backend=backend)
            args = (
                (put(params), put(x), put(y))
                if backend == "gpu"
                else (fg.tree_util.tree_map(fnp.asarray, params), fnp.asarray(x), fnp.asarray(y))
            )
            new, loss = f(*args)
            err = rel_err(
                np.concatenate([np.asarray(p).ravel() for p in fg.tree_util.tree_leaves(new)]),
                np.concatenate([p.ravel() for p in fg.tree_util.tree_leaves(ref_params)]),
            )
            losses = W.mlp_losses(f, args, steps=5)
            sec = device_time(lambda f=f, args=args: f(*args), reps=7)
            times[backend] = sec
            record(
                "bench",
                f"mlp_{backend}",
                ms=sec * 1e3,
                steps_per_s=1 / sec,
                loss=float(loss),
                loss_ref=float(ref_loss),
                params_rel_err=err,
                losses_fall=losses[-1] < losses[0],
            )
    if len(times) == 2:
        record("bench", "mlp_gpu_vs_cpu", speedup=times["cpu"] / times["gpu"])


def bench_reduce(sizes) -> None:
    rng = np.random.default_rng(4)
    for n in sizes:
        x = rng.standard_normal(n).astype(np.float32)
        gx = put(x)
        for name, fn, ref in (
            ("sum", fnp.sum, x.astype(np.float64).sum()),
            ("argmax", fnp.argmax, np.argmax(x)),
        ):
            with guarded("bench", f"{name}_{n}"):
                f = fg.jit(fn, backend="gpu")
                got = np.asarray(f(gx))
                sec = device_time(lambda f=f, gx=gx: f(gx))
                bound = float(np.abs(x).astype(np.float64).sum())
                record(
                    "bench",
                    f"{name}_{n}",
                    n=n,
                    ms=sec * 1e3,
                    GBps=4 * n / sec / 1e9,
                    err_over_sum_abs=abs(float(got) - float(ref)) / bound,
                    exact=bool(got == ref) if name == "argmax" else None,
                )


def bench_cumsum(shapes) -> None:
    rng = np.random.default_rng(5)
    for shape in shapes:
        with guarded("bench", f"cumsum_{shape}"):
            x = rng.uniform(-1, 1, shape).astype(np.float32)
            gx = put(x)
            f = fg.jit(lambda v: fnp.cumsum(v, axis=-1), backend="gpu")
            got = np.asarray(f(gx))
            ref = np.cumsum(x.astype(np.float64), axis=-1)
            scale = np.cumsum(np.abs(x).astype(np.float64), axis=-1)
            sec = device_time(lambda f=f, gx=gx: f(gx))
            record(
                "bench",
                f"cumsum_{'x'.join(map(str, shape))}",
                ms=sec * 1e3,
                GBps=8 * x.size / sec / 1e9,
                max_err_over_scale=float(np.max(np.abs(got - ref) / (scale + 1e-30))),
            )


def bench_sort(shapes) -> None:
    rng = np.random.default_rng(6)
    for shape in shapes:
        with guarded("bench", f"sort_{shape}"):
            x = rng.standard_normal(shape).astype(np.float32)
            gx = put(x)
            f = fg.jit(lambda v: fnp.sort(v, axis=-1), backend="gpu")
            exact = bool(np.array_equal(np.asarray(f(gx)), np.sort(x, axis=-1)))
            sec = device_time(lambda f=f, gx=gx: f(gx))
            record(
                "bench",
                f"sort_{'x'.join(map(str, shape))}",
                ms=sec * 1e3,
                Melem_per_s=x.size / sec / 1e6,
                exact=exact,
            )


def bench_scatter(m: int, n: int) -> None:
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, n).astype(np.float32)
    idx = rng.integers(0, n, m).astype(np.int32)
    u = rng.uniform(-1, 1, m).astype(np.float32)
    args = [put(x), put(idx), put(u)]
    ref = x.astype(np.float64).copy()
    np.add.at(ref, idx, u.astype(np.float64))
    f = fg.jit(lambda a, i, v: a.at[i].add(v), backend="gpu")
    err = float(np.max(np.abs(np.asarray(f(*args)) - ref)))
    sec = device_time(lambda: f(*args))
    record(
        "bench",
        f"scatter_add_{m}_into_{n}",
        ms=sec * 1e3,
        Mupdates_per_s=m / sec / 1e6,
        max_abs_err=err,
    )


def section_bench() -> None:
    # 2^26 float32 (256 MiB), or what one binding of this adapter holds
    big = min(1 << (20 if QUICK else 26), gpu.runtime().max_binding_bytes // 4)
    copy = 0.0
    with guarded("bench", "copy"):
        copy = bench_copy(big)
    with guarded("bench", "chain"):
        bench_chain(big, copy)
    with guarded("bench", "matmul"):
        bench_matmul(256 if QUICK else 4096)
    with guarded("bench", "mlp"):
        bench_mlp()
    with guarded("bench", "reduce"):
        bench_reduce([1 << 20] if QUICK else [1 << 24, 1 << 26])
    with guarded("bench", "cumsum"):
        bench_cumsum([(1 << 20,), (256, 1024)] if QUICK else [(1 << 24,), (4096, 4096)])
    with guarded("bench", "sort"):
        bench_sort([(1, 1 << 14), (256, 256)] if QUICK else [(1, 1 << 20), (4096, 1024)])
    with guarded("bench", "scatter"):
        bench_scatter(*((1 << 16, 1 << 10) if QUICK else (1 << 22, 1 << 16)))


# -- sweep ----------------------------------------------------------------------------------


def _sweep(name: str, key: str, runs: dict) -> None:
    """Record each setting's time (``runs``: label -> (seconds, extra fields) or exception)
    and the best."""
    best = None
    for label, result in runs.items():
        if isinstance(result, Exception):
            record(
                "sweep", name, setting=label, key=key, error=f"{type(result).__name__}: {result}"
            )
            continue
        sec, extra = result
        record("sweep", name, setting=label, key=key, ms=sec * 1e3, **extra)
        if extra.get("ok", True) and (best is None or sec < best[1]):
            best = (label, sec)
    if best:
        record("sweep", name + "_best", key=key, setting=best[0], ms=best[1] * 1e3)


def _measure(f, args, check, settings=()) -> tuple[float, dict] | Exception:
    """Compile ``f`` under ``settings``, check its result (``check(out) -> (ok, err)``) and
    time it; an exception is returned, not raised."""
    try:
        with patched(*settings):
            exe = compiled(f, args)
        ok, err = check(np.asarray(exe.call(args)[0]))
        sec = exe_time(exe, args, reps=5)
        return sec, {"ok": ok, "err": err, "dispatches": exe.num_dispatches}
    except Exception as e:  # a setting the adapter rejects is a result too
        return e


def sweep_tree(lengths) -> None:
    from fungrad.lowering.gpu import schemes as ge

    rng = np.random.default_rng(10)
    for n in lengths:
        for rows in (1, 64):
            with guarded("sweep", f"tree_{rows}x{n}"):
                x = rng.standard_normal((rows, n // rows)).astype(np.float32)
                gx = put(x)
                ref = x.astype(np.float64).sum(1)
                bound = np.abs(x).astype(np.float64).sum(1)

                def check(got, ref=ref, bound=bound):
                    e = float(np.max(np.abs(got - ref) / bound))
                    return e < 1e-4, e

                runs = {
                    mode: _measure(
                        lambda v: fnp.sum(v, axis=1), [gx], check, [(ge, "TREE_REDUCTIONS", mode)]
                    )
                    for mode in ("never", "always", "auto")
                    if not (mode == "never" and n // rows > (1 << 20) and not QUICK)
                }
                if rows == 1 and n >= 1 << 16:
                    for per in (4, 16, 64):
                        for groups in (256, 1024, 4096):
                            runs[f"always per={per} groups={groups}"] = _measure(
                                lambda v: fnp.sum(v, axis=1),
                                [gx],
                                check,
                                [
                                    (ge, "TREE_REDUCTIONS", "always"),
                                    (ge, "TREE_PER_INVOCATION", per),
                                    (ge, "TREE_GROUPS", groups),
                                ],
                            )
                _sweep("tree", f"{rows}x{n // rows}", runs)


def sweep_workgroups(n: int) -> None:
    from gpu_bench import chain

    from fungrad.lowering.gpu import frame, linalg_columns, shader

    rng = np.random.default_rng(11)
    x = rng.uniform(-4, 4, n).astype(np.float32)
    gx = put(x)
    ref = chain(x.astype(np.float64))

    def check_chain(got):
        e = rel_err(got, ref)
        return e < 1e-5, e

    with guarded("sweep", "kernel_workgroup"):
        _sweep(
            "KERNEL_WORKGROUP",
            f"chain {n}",
            {
                size: _measure(chain, [gx], check_chain, [(shader, "KERNEL_WORKGROUP", size)])
                for size in (64, 128, 256)
            },
        )
    rows = 1 << (8 if QUICK else 12)
    y = rng.standard_normal((rows, 1024)).astype(np.float32)
    gy = put(y)
    for name, f, ref2 in (
        ("bitonic sort", lambda v: fnp.sort(v, axis=1), np.sort(y, axis=1)),
        ("cumsum", lambda v: fnp.cumsum(v, axis=1), np.cumsum(y.astype(np.float64), axis=1)),
    ):
        with guarded("sweep", f"workgroup {name}"):

            def check(got, ref2=ref2):
                e = float(np.max(np.abs(got - ref2)))
                return e < 1e-3, e

            _sweep(
                "WORKGROUP",
                f"{name} {rows}x1024",
                {
                    size: _measure(
                        f,
                        [gy],
                        check,
                        [(frame, "WORKGROUP", size), (linalg_columns, "WORKGROUP", size)],
                    )
                    for size in (64, 128, 256)
                },
            )


def _gemm_tiles():
    from fungrad.lowering.gpu.schemes import GemmTile

    return [
        GemmTile(64, 64, 16, 16, 16),
        GemmTile(64, 64, 16, 16, 32),
        GemmTile(128, 64, 16, 16, 16),
        GemmTile(64, 128, 16, 16, 16),
        GemmTile(128, 128, 16, 16, 8),
        GemmTile(128, 128, 16, 16, 16),
        GemmTile(128, 128, 32, 8, 8),
        GemmTile(128, 64, 16, 8, 16),
    ]


def sweep_gemm(n: int) -> None:
    """The tiles of :func:`_gemm_tiles` at ``n^3`` (``schemes.GEMM_TILE_GPU`` patched), then
    split-K forced into 1, 4, 16 and 64 ranges for a small-m, long-k product."""
    from fungrad.lowering.gpu import dispatches, schemes

    rng = np.random.default_rng(12)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    args = [put(a), put(b)]
    ref = a.astype(np.float64) @ b.astype(np.float64)

    def check(got, ref=ref):
        e = rel_err(got, ref)
        return e < 1e-5, e

    with guarded("sweep", "gemm_tile"):
        runs = {}
        for tile in _gemm_tiles():
            runs[str(tile)] = _measure(
                lambda p, q: p @ q,
                args,
                check,
                [(schemes, "GEMM_TILE_GPU", tile), (schemes, "GEMM_TILE_GPU_LARGE", None)],
            )
        _sweep("gemm", f"{n}^3", runs)
    # split-K, forced (it is used only where the adapter limits loops): small m, n, long k
    m, k = (64, 1 << 14) if QUICK else (256, 1 << 16)
    c = rng.standard_normal((m, k)).astype(np.float32)
    d = rng.standard_normal((k, m)).astype(np.float32)
    ref2 = c.astype(np.float64) @ d.astype(np.float64)
    args2 = [put(c), put(d)]

    def check2(got):
        e = rel_err(got, ref2)
        return e < 1e-4, e

    def forced(chunks):
        def split(step, tile, iterations, rt, base):
            if chunks == 1:
                return schemes.split_k(step.k, iterations, rt.loop_limit, tile.kstep, base)
            size = -(-step.k // chunks // tile.kstep) * tile.kstep
            return schemes.SplitK(-(-step.k // size), size, base)

        return split

    with guarded("sweep", "gemm_split_k"):
        _sweep(
            "split_k",
            f"{m}x{k} @ {k}x{m}",
            {
                chunks: _measure(
                    lambda p, q: p @ q, args2, check2, [(dispatches, "gemm_split", forced(chunks))]
                )
                for chunks in (1, 4, 16, 64)
            },
        )


def sweep_gemm_min_flops() -> None:
    from fungrad.lowering.gpu import policy

    rng = np.random.default_rng(13)
    for n in (8, 16, 24, 32, 48, 64, 96):
        with guarded("sweep", f"gemm_min_flops {n}"):
            a = rng.standard_normal((n, n)).astype(np.float32)
            b = rng.standard_normal((n, n)).astype(np.float32)
            ref = a.astype(np.float64) @ b.astype(np.float64)
            _sweep(
                "GEMM_MIN_FLOPS",
                f"{n}^3={n**3}",
                {
                    label: _measure(
                        lambda p, q: fnp.tanh(p @ q),
                        [put(a), put(b)],
                        lambda got, ref=ref: check_tanh(got, ref),
                        [(policy, "GEMM_MIN_FLOPS", flops)],
                    )
                    for label, flops in (("gemm", 0), ("inline", 1 << 62))
                },
            )


def check_tanh(got, ref):
    e = float(np.max(np.abs(got - np.tanh(ref))))
    return e < 1e-4, e


def sweep_sort(total: int) -> None:
    from fungrad.lowering.gpu import schemes as ge

    rng = np.random.default_rng(14)
    for length in (16, 32, 64, 128, 256, 1024, 4096):
        with guarded("sweep", f"sort {length}"):
            x = rng.standard_normal((max(1, total // length), length)).astype(np.float32)
            ref = np.sort(x, axis=1)
            _sweep(
                "sort",
                f"{x.shape[0]}x{length}",
                {
                    label: _measure(
                        lambda v: fnp.sort(v, axis=1),
                        [put(x)],
                        lambda got, ref=ref: (bool(np.array_equal(got, ref)), 0.0),
                        [(ge, "SORT_RANK_MAX_ROW", limit)],
                    )
                    for label, limit in (("rank", 1 << 30), ("bitonic", 0))
                },
            )


def sweep_scan(shapes) -> None:
    from fungrad.lowering.gpu import schemes as ge

    rng = np.random.default_rng(15)
    for shape in shapes:
        with guarded("sweep", f"scan {shape}"):
            x = rng.uniform(-1, 1, shape).astype(np.float32)
            ref = np.cumsum(x.astype(np.float64), axis=-1)
            scale = np.cumsum(np.abs(x).astype(np.float64), axis=-1)

            def check(got, ref=ref, scale=scale):
                e = float(np.max(np.abs(got - ref) / (scale + 1e-30)))
                return e < 1e-5, e

            runs = {}
            for label, mode, block in (
                ("never", "never", ge.SCAN_BLOCK),
                ("auto", "auto", ge.SCAN_BLOCK),
                ("always 128", "always", 128),
                ("always 512", "always", 512),
                ("always 2048", "always", 2048),
                ("always 8192", "always", 8192),
            ):
                runs[label] = _measure(
                    lambda v: fnp.cumsum(v, axis=-1),
                    [put(x)],
                    check,
                    [(ge, "SCAN", mode), (ge, "SCAN_BLOCK", block)],
                )
            _sweep("scan", "x".join(map(str, shape)), runs)


def section_sweep() -> None:
    """The sweeps named in ``GD_SWEEPS`` (comma-separated; default all)."""
    for var in ("FUNGRAD_GPU_TREE_REDUCE", "FUNGRAD_GPU_SCAN"):
        os.environ.pop(var, None)  # the settings below must win
    want = os.environ.get("GD_SWEEPS", "tree,workgroups,gemm,gemm_min_flops,sort,scan")
    want = set(want.split(","))
    if "tree" in want:
        sweep_tree([1 << 12, 1 << 16, 1 << 20] if QUICK else [1 << 12, 1 << 16, 1 << 20, 1 << 24])
    if "workgroups" in want:
        sweep_workgroups(1 << (20 if QUICK else 24))
    if "gemm" in want:
        sweep_gemm(256 if QUICK else int(os.environ.get("GD_GEMM_N", 2048)))
    if "gemm_min_flops" in want:
        sweep_gemm_min_flops()
    if "sort" in want:
        sweep_sort(1 << (14 if QUICK else 20))
    if "scan" in want:
        sweep_scan(
            [(1 << 16,), (16, 1 << 14), (1024, 256)]
            if QUICK
            else [(1 << 22,), (64, 1 << 16), (4096, 1024)]
        )


# -- summary --------------------------------------------------------------------------------


def section_summary() -> None:
    path = os.path.join(OUT, "results.jsonl")
    if not os.path.exists(path):
        print("no results.jsonl")
        return
    rows = [json.loads(line) for line in open(path) if line.strip()]
    print(f"\n=== summary ({len(rows)} results) ===")
    for r in rows:
        if r["section"] == "env" and r["name"] == "selected":
            print(
                f"adapter: {r.get('adapter')}  loop_limit={r.get('loop_limit')} "
                f"fused_fma={r.get('fused_fma')}"
            )
    keys = (
        "ms",
        "GBps",
        "of_copy",
        "GFLOPs",
        "steps_per_s",
        "speedup",
        "rel_err",
        "exact",
        "Melem_per_s",
        "Mupdates_per_s",
        "error",
    )
    for r in rows:
        if r["section"] != "bench":
            continue
        vals = "  ".join(f"{k}={_fmt(r[k])}" for k in keys if r.get(k) is not None)
        print(f"  {r['name']:24s} {vals[:110]}")
    wrong = [
        r
        for r in rows
        if r.get("ok") is False
        or r.get("exact") is False
        or r.get("losses_fall") is False
        or any(
            isinstance(r.get(k), (int, float)) and not r[k] < 1e-4
            for k in ("rel_err", "params_rel_err", "err_over_sum_abs", "max_err_over_scale")
        )
    ]
    print(f"WRONG RESULTS: {len(wrong)}")
    for r in wrong:
        print(f"  {json.dumps(r)[:200]}")
    print("sweeps (best per sweep; errors):")
    for r in rows:
        if r["section"] == "sweep" and (r["name"].endswith("_best") or "error" in r):
            what = r.get("error", "")[:60] if "error" in r else f"{r['ms']:.4g} ms"
            print(f"  {r['name']:20s} {str(r.get('key')):22s} {str(r.get('setting')):30s} {what}")


def _load_fungrad() -> None:
    global fg, fnp, compile_jaxpr, gpu
    import fungrad
    import fungrad.numpy
    from fungrad.lowering import compile_jaxpr
    from fungrad.lowering.gpu import runtime as gpu

    fg, fnp = fungrad, fungrad.numpy


def main() -> None:
    global QUICK
    ap = argparse.ArgumentParser()
    ap.add_argument("section", choices=("env", "bench", "sweep", "summary"))
    ap.add_argument("--quick", action="store_true", help="small sizes (lavapipe)")
    a = ap.parse_args()
    QUICK = a.quick
    if a.section != "summary":
        _load_fungrad()
    os.makedirs(OUT, exist_ok=True)
    t0 = time.perf_counter()
    {
        "env": section_env,
        "bench": section_bench,
        "sweep": section_sweep,
        "summary": section_summary,
    }[a.section]()
    print(f"({a.section}: {time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
