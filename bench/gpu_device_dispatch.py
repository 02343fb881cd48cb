"""Device check of the GPU backend's dispatch path (issue 23, slice H3): the MLP training step
on the GPU against the CPU backend, device timestamps per dispatch, host overhead per call and
per dispatch, matmul tile configurations and split contractions, and scans of long lines.

Every result is checked against numpy (float64 where rounding matters), printed as one line of
a compact table and appended as a JSON line to ``$OUT/dispatch.jsonl`` as soon as it is
measured; a failing item prints its error and the others go on.

Times: ``ms`` is the wall time per call of back-to-back calls (the last one waited for: host
and device overlap, so it is the larger of the two); ``dev_ms`` sums the device timestamps of
a profiled build's dispatches (``fg.profile``: the GPU's own clock where the adapter has
timestamp queries, else host-timed submissions: ``clock`` says which).

Reading it: ``timestamps vs wall`` near 1 says the device clock is right; ``mlp gpu
default`` against ``mlp cpu`` (``vs_cpu`` > 1: the GPU wins) and against ``mlp gpu old
defaults`` (no split contractions, KSTEP 16, no tree for the nested loss reduction) and the
single changes between; the indented lines under it are the slowest dispatches by the
device's clock; ``exe.call host us`` is the host's share of a call; ``mm ... best`` the
fastest tile (``schemes.GEMM_TILE_GPU``) and split setting (``GEMM_FILL_GROUPS``) per shape;
``cumsum ... auto`` against ``blocks 512`` (the old choice) for long lines.

Run: OUT=/tmp/out python bench/gpu_device_dispatch.py [--quick] [--only SECTION]
(--quick: small sizes, and on a CPU adapter the real-GPU choices, for a test run)
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

import fungrad as fg  # noqa: E402
from fungrad.lowering import compile_jaxpr  # noqa: E402
from fungrad.lowering.gpu import runtime as gpu  # noqa: E402
from fungrad.lowering.gpu import schemes as S  # noqa: E402
from fungrad.profiler import profile  # noqa: E402

OUT = os.environ.get("OUT") or "/tmp/gpu_device_out"
QUICK = False
T0 = time.perf_counter()


def record(name: str, **fields) -> None:
    """One result: a JSON line in $OUT/dispatch.jsonl and a line of the table."""
    with open(os.path.join(OUT, "dispatch.jsonl"), "a") as f:
        f.write(json.dumps({"name": name, **fields}, default=str) + "\n")
    shown = "  ".join(f"{k}={_fmt(v)}" for k, v in fields.items())
    print(f"{name:<28} {shown}"[:160], flush=True)


def _fmt(v):
    return f"{v:.4g}" if isinstance(v, float) else v


@contextlib.contextmanager
def guarded(name: str):
    try:
        yield
    except Exception as e:  # one failing item must not stop the others
        traceback.print_exc(limit=2, file=sys.stderr)
        record(name, error=f"{type(e).__name__}: {e}"[:300])


@contextlib.contextmanager
def patched(*settings):
    old = [(m, k, getattr(m, k)) for m, k, _ in settings]
    try:
        for m, k, v in settings:
            setattr(m, k, v)
        yield
    finally:
        for m, k, v in old:
            setattr(m, k, v)


def rel_err(got, ref) -> float:
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    if not np.all(np.isfinite(got)):
        return float("inf")
    return float(np.linalg.norm((got - ref).ravel()) / (np.linalg.norm(ref.ravel()) or 1.0))


def _wait(out) -> None:
    for leaf in fg.tree_util.tree_leaves(out):
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()


def wall_time(call, inner: int | None = None, reps: int = 5) -> float:
    """Median seconds per call of ``inner`` back-to-back calls, the last waited for."""
    _wait(call())
    if inner is None:
        t = time.perf_counter()
        _wait(call())
        inner = int(min(100, max(1, 0.01 / max(time.perf_counter() - t, 1e-6))))
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(inner):
            out = call()
        _wait(out)
        times.append((time.perf_counter() - t) / inner)
    return statistics.median(times)


def device_profile(f, args, calls: int = 5):
    """(device seconds per call summed over dispatches, [(dispatch, mean s, runs)], exe) of
    a profiled build of ``f`` (its dispatches timed by the device where it can). Should the
    device's timestamps fail, the error is recorded once and profiles go on host-timed."""
    try:
        return _device_profile(f, args, calls)
    except Exception as e:
        from fungrad.lowering.gpu.executable import GpuExecutable

        if GpuExecutable.PROFILE_CLOCK == "host":
            raise
        record("timestamps FAILED", error=f"{type(e).__name__}: {e}"[:300], now="host clock")
        GpuExecutable.PROFILE_CLOCK = "host"
        return _device_profile(f, args, calls)


def _device_profile(f, args, calls: int):
    exe = compile_jaxpr(fg.make_jaxpr(f)(*args), "gpu", "prof", profile=True)
    flat = fg.tree_util.tree_leaves(args)
    exe.call(flat)
    with profile() as prof:
        for _ in range(calls):
            exe.call(flat)
    recs = sorted(prof.kernels(), key=lambda r: -r.total_s)
    total = sum(r.total_s for r in recs) / calls
    return total, [(r.name, r.total_s / max(r.calls, 1), r.calls // calls) for r in recs], exe


def put(a):
    return fg.device_put(a, backend="gpu")


def compiled(f, args):
    return compile_jaxpr(fg.make_jaxpr(f)(*args), "gpu", "dispatch")


# -- environment -------------------------------------------------------------------------------


def section_env(rt) -> None:
    record(
        "env",
        adapter=rt.name,
        timestamps=rt.timestamps,
        period_ns=rt.timestamp_period,
        cpu_adapter=rt.cpu_adapter,
        loop_limit=rt.loop_limit,
        cores=os.cpu_count(),
    )


# -- MLP step ----------------------------------------------------------------------------------


def _mlp():
    """(step, (params, x, y), (params, loss) of one float64 numpy step): the 784-512-512-10
    MLP at batch 128 of bench/jit_workloads.py (--quick: 64-32-32-10 at batch 16)."""
    import jit_workloads as W

    if QUICK:
        W.MLP_SIZES, W.MLP_BATCH = (64, 32, 32, 10), 16
    params, x, y = W._mlp_inputs()
    jitted = W._mlp_program(fg)
    step = getattr(jitted, "__wrapped__", None) or jitted.fun
    return step, (params, x, y), W._mlp_step_numpy(params, x, y, np.float64)


def _flat(tree):
    return np.concatenate(
        [np.asarray(p, np.float64).ravel() for p in fg.tree_util.tree_leaves(tree)]
    )


MLP_VARIANTS = {
    "gpu default": (),
    "gpu no split": ((S, "GEMM_FILL_GROUPS", 0),),
    "gpu tile k16": ((S, "GEMM_TILE_GPU", S.GemmTile(64, 64, 16, 16, 16)),),
    "gpu tree min 64": ((S, "TREE_MIN_LENGTH", 64),),  # the bias gradients: 128-row sums
    "gpu no nested tree": ((S, "reduction_work", lambda e: _own_length(e)),),
    "gpu old defaults": (
        (S, "GEMM_FILL_GROUPS", 0),
        (S, "GEMM_TILE_GPU", S.GemmTile(64, 64, 16, 16, 16)),
        (S, "reduction_work", lambda e: _own_length(e)),
    ),
}


def _own_length(e) -> int:
    """A reduction's own length (the tree rule before nested reductions counted)."""
    return int(np.prod([v.extent for v in e.attr.vars]))


def section_mlp() -> None:
    step, (params, x, y), ref = _mlp()
    times = {}
    with guarded("mlp cpu"):
        fc = fg.jit(step, backend="cpu")
        cargs = (fg.tree_util.tree_map(fg.numpy.asarray, params), fg.numpy.asarray(x), y)
        new, loss = fc(*cargs)
        err = rel_err(_flat(new), _flat(ref[0]))
        times["cpu"] = wall_time(lambda: fc(*cargs))
        record("mlp cpu", ms=times["cpu"] * 1e3, err=err, ok=err < 1e-4)
    gargs = (put(params), put(x), put(y))
    for label, settings in MLP_VARIANTS.items():
        with guarded(f"mlp {label}"), patched(*settings):
            exe = compiled(step, gargs)
            flat = fg.tree_util.tree_leaves(gargs)
            out = exe.call(flat)
            new = out[: len(fg.tree_util.tree_leaves(params))]
            err = rel_err(_flat(new), _flat(ref[0]))
            sec = wall_time(lambda exe=exe, flat=flat: exe.call(flat))
            times[label] = sec
            dev, top, _ = device_profile(step, gargs)
            record(
                f"mlp {label}",
                ms=sec * 1e3,
                dev_ms=dev * 1e3,
                dispatches=exe.num_dispatches,
                err=err,
                ok=err < 1e-4,
                vs_cpu=times.get("cpu", float("nan")) / sec,
            )
            if label == "gpu default":
                for name, mean, runs in top[:6]:
                    record(f"  {name[:26]}", us=mean * 1e6, runs=runs)


# -- host overhead -----------------------------------------------------------------------------


def host_phases(exe, args, n: int = 50) -> dict:
    """Microseconds of the host's part of ``exe.call`` (min over ``n`` calls, each waited
    for before the next): argument handling, the buffer pool, encoding (per dispatch), the
    submission, wrapping the results."""
    from fungrad.devices import GpuArray, device_buffer

    rt = exe.rt
    best = np.full(5, np.inf)
    for _ in range(n):
        t0 = time.perf_counter()
        slots = {f"in{i}": device_buffer(a) for i, a in enumerate(args)}
        t1 = time.perf_counter()
        outs = [rt.alloc(w) for w in exe._out_words]
        slots.update((f"out{i}", o) for i, o in enumerate(outs))
        if exe._consts is not None:
            slots["consts"] = exe._consts
        if exe.arena_words:
            slots["arena"] = rt.alloc(exe.arena_words)
        if exe.ctl_words:
            slots["ctl"] = rt.alloc(exe.ctl_words)
        t2 = time.perf_counter()
        ds = exe._run(exe._commands, slots, [])
        encoder = rt.device.create_command_encoder()
        cpass = encoder.begin_compute_pass()
        for d in ds:
            cpass.set_pipeline(d.pipeline)
            cpass.set_bind_group(0, exe._bind_group(d, slots))
            cpass.dispatch_workgroups(*d.grid)
        cpass.end()
        command = encoder.finish()
        t3 = time.perf_counter()
        rt.queue.submit([command])
        t4 = time.perf_counter()
        res = [GpuArray(o, a, a.weak_type) for o, a in zip(outs, exe.out_avals)]
        t5 = time.perf_counter()
        rt.wait(outs[0])
        del res
        best = np.minimum(best, np.diff([t0, t1, t2, t3, t4, t5]))
    us = best * 1e6
    d = max(1, exe.num_dispatches)
    return dict(
        args=us[0], pool=us[1], encode=us[2], per_dispatch=us[2] / d, submit=us[3], wrap=us[4]
    )


def host_call_us(exe, args, n: int) -> float:
    """Microseconds of ``exe.call`` itself (10th percentile over ``n`` calls, each waited for
    after its timing): the host's whole share of a call."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        out = exe.call(args)
        times.append(time.perf_counter() - t)
        _wait(out)
    return sorted(times)[n // 10] * 1e6


def section_overhead() -> None:
    with guarded("overhead tiny"):
        f = fg.jit(lambda v: v * 2 + 1, backend="gpu")
        gx = put(np.ones(8, np.float32))
        ok = np.array_equal(np.asarray(f(gx)), np.full(8, 3, np.float32))
        exe = f.lower(gx).compile()._exe
        record(
            "overhead tiny",
            jit_us=wall_time(lambda: f(gx), inner=200) * 1e6,
            exe_us=wall_time(lambda: exe.call([gx]), inner=200) * 1e6,
            ok=ok,
        )
        record("  host phases tiny", **host_phases(exe, [gx]))
        tiny_us = host_call_us(exe, [gx], 200)
    with guarded("overhead mlp"):
        step, (params, x, y), _ = _mlp()
        gargs = (put(params), put(x), put(y))
        exe = compiled(step, gargs)
        flat = fg.tree_util.tree_leaves(gargs)
        ph = host_phases(exe, flat, 20)
        record("  host phases mlp", dispatches=exe.num_dispatches, **ph)
        recorded = host_call_us(exe, flat, 40)
        exe._straight = False  # the general path: bind groups looked up per dispatch
        general = host_call_us(exe, flat, 40)
        exe._straight = True
        record(
            "  exe.call host us",
            tiny=tiny_us,
            mlp=recorded,
            mlp_general=general,
            per_extra_dispatch=(recorded - tiny_us) / max(1, exe.num_dispatches - 1),
        )


# -- matmul tiles ------------------------------------------------------------------------------


#: the 4096^3 sweep runs TILES[:8]: the default, the vec4 tiles (``GemmTile.vec = 4``), the
#: best old ones (an H200 through Vulkan: 64x64 k32 13.0 TFLOP/s, 128x128 k8 10.6, 64x64 k16;
#: 128x64 k32 9.0 and 64x128/16x8 k16 7.6 dropped)
TILES = [
    S.GemmTile(64, 64, 16, 16, 32),
    S.GemmTile(64, 64, 16, 16, 16, vec=4),
    S.GemmTile(64, 64, 16, 16, 32, vec=4),
    S.GemmTile(128, 64, 16, 16, 16, vec=4),
    S.GemmTile(128, 128, 16, 16, 8, vec=4),
    S.GemmTile(128, 128, 16, 16, 16, vec=4),
    S.GemmTile(64, 64, 16, 16, 16),
    S.GemmTile(128, 128, 16, 16, 8),
    S.GemmTile(128, 64, 16, 16, 16),
    S.GemmTile(32, 32, 16, 16, 16),
    S.GemmTile(32, 32, 8, 8, 16, vec=4),
]


def _gemm(m, k, n, tiles, fills, check_rows=64):
    rng = np.random.default_rng(m + k + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    ga, gb = put(a), put(b)
    rows = np.sort(rng.choice(m, min(m, check_rows), replace=False))
    ref = a[rows].astype(np.float64) @ b.astype(np.float64)
    best = None
    for tile in tiles:
        for fill in fills:
            label = f"mm {m}x{k}x{n}"
            with (
                guarded(label),
                patched(
                    (S, "GEMM_TILE_GPU", tile),
                    (S, "GEMM_TILE_GPU_LARGE", None),
                    (S, "GEMM_FILL_GROUPS", fill),
                ),
            ):
                exe = compiled(lambda p, q: p @ q, [ga, gb])
                (o,) = exe.call([ga, gb])
                err = rel_err(np.asarray(o)[rows], ref)
                sec = wall_time(lambda exe=exe: exe.call([ga, gb]), inner=None if m < 4096 else 3)
                dev = None
                if m * n <= 1 << 20:  # small: the device's own time says more than the wall
                    dev = device_profile(lambda p, q: p @ q, [ga, gb])[0]
                gf = 2 * m * n * k / (dev or sec) / 1e9
                record(
                    label,
                    tile=str(tile),
                    fill=fill,
                    ms=sec * 1e3,
                    dev_ms=dev * 1e3 if dev else None,
                    GFLOPs=gf,
                    disp=exe.num_dispatches,
                    ok=err < 1e-5,
                    err=err,
                )
                if err < 1e-5 and (best is None or gf > best[0]):
                    best = (gf, f"{tile} fill {fill}")
    if best:
        record(f"mm {m}x{k}x{n} best", GFLOPs=best[0], config=best[1])


def section_matmul() -> None:
    if QUICK:
        _gemm(256, 256, 256, TILES[:3], [0])
        _gemm(128, 784, 512, TILES[:2], [0, 1024])
        return
    _gemm(4096, 4096, 4096, TILES[:8], [0])
    _gemm(2048, 2048, 2048, [TILES[i] for i in (0, 1, 2, 3, 5)], [0])
    _gemm(128, 784, 512, [TILES[0], TILES[1], TILES[10]], [0, 256, 1024])
    _gemm(256, 65536, 256, [TILES[0], TILES[2]], [0, 1024])


# -- scans -------------------------------------------------------------------------------------


def section_scan() -> None:
    shapes = (
        [(1 << 14,), (8, 4096)] if QUICK else [(1 << 24,), (1 << 22,), (64, 65536), (4096, 1024)]
    )
    for shape in shapes:
        x = np.random.default_rng(9).integers(-4, 5, shape).astype(np.float32)
        gx = put(x)
        ref = np.cumsum(x.astype(np.float64), axis=-1)
        for label, settings in (
            ("auto", ()),
            ("blocks 512", ((S, "SCAN", "always"), (S, "SCAN_BLOCK", 512))),
        ):
            name = f"cumsum {'x'.join(map(str, shape))} {label}"
            with guarded(name), patched(*settings):
                exe = compiled(lambda v: fg.numpy.cumsum(v, axis=-1), [gx])
                (o,) = exe.call([gx])
                exact = np.array_equal(np.asarray(o), ref)  # small integers: exact in f32
                sec = wall_time(lambda exe=exe, gx=gx: exe.call([gx]), inner=3)
                record(
                    name,
                    ms=sec * 1e3,
                    GBps=8 * x.size / sec / 1e9,
                    dispatches=exe.num_dispatches,
                    exact=exact,
                )


# -- timestamp sanity --------------------------------------------------------------------------


def section_timestamps() -> None:
    """A long single dispatch: its device time against the wall (period and units right)."""
    with guarded("timestamps vs wall"):
        n = 256 if QUICK else 2048
        a = put(np.ones((n, n), np.float32))
        exe = compiled(lambda p, q: p @ q, [a, a])
        wall = wall_time(lambda: exe.call([a, a]), inner=3)
        dev, top, _ = device_profile(lambda p, q: p @ q, [a, a])
        record("timestamps vs wall", wall_ms=wall * 1e3, dev_ms=dev * 1e3, ratio=dev / wall)


def main() -> None:
    global QUICK
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a test run)")
    ap.add_argument("--only", action="append", help="section(s): mlp overhead matmul scan ts")
    QUICK = ap.parse_args().quick
    only = ap.parse_args().only
    os.makedirs(OUT, exist_ok=True)
    rt = gpu.runtime()
    if QUICK and rt.cpu_adapter:  # a test run on lavapipe: exercise the real-GPU choices
        rt.info["adapter_type"] = "DiscreteGPU (taken for one: --quick)"
    section_env(rt)
    for name, fn in (
        ("ts", section_timestamps),
        ("mlp", section_mlp),
        ("overhead", section_overhead),
        ("matmul", section_matmul),
        ("scan", section_scan),
    ):
        if only and name not in only:
            continue
        t = time.perf_counter()
        with guarded(name):
            fn()
        print(
            f"-- {name}: {time.perf_counter() - t:.1f} s (total {time.perf_counter() - T0:.1f} s)"
        )


if __name__ == "__main__":
    main()
