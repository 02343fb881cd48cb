"""The native thread pool (``fg_parallel_for``, lowering/cpu/runtime.py) on an idle and a loaded
host: 1 thread against 2, unpinned.

A loaded host is this one with ``--load`` busy processes (``while True: pass``) running beside
the measured one (killed afterwards). Each (load, source tree) cell is one fresh process with
``FUNGRAD_NUM_THREADS=2`` and the CPU affinity left alone; inside it, batches with 1 thread and
with 2 threads alternate (a shared host's load drifts; alternating keeps the two comparable), and
each row is the median of its batches:

- ``tiny``: µs per back-to-back ``fg_parallel_for`` of 2 chunks of about 0.5 µs each (a native
  loop calls it): with 2 threads, half a µs plus the fork-join cost;
- ``small``: µs per call of about 10 µs of work over 64 indices, back to back: the regime of a
  scan of many small kernels;
- ``medium``: µs per call of about 100 µs of work over 64 indices (the LSTM's kernels' size);
- ``big``: ms per call of about 2 ms of work over 64 indices (the 2-core speedup);
- ``lstm``: ms per training step of bench/models_bench.py's LSTM workload (a scan of 64 steps,
  each with a handful of parallel kernels). 1 thread is the executables' thread count set to 1,
  which is what ``FUNGRAD_NUM_THREADS=1`` gives them (products then use fungrad's one-core gemm,
  with 2 threads numpy's OpenBLAS: set ``OPENBLAS_NUM_THREADS=1`` to time the pool alone).

``--trees`` runs each cell once per source tree (e.g. an export of the previous commit, then this
checkout), the trees alternating under the same load. Numbers are one run; compare ratios.

Run:  PYTHONPATH=. .venv/bin/python bench/thread_pool_load.py [--load 0,2]
      [--only tiny,small,medium,big,lstm] [--trees /old/export,.] [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# A chunk function that does `work` dependent multiply-adds per index (ctx points at `work`, and
# the result goes to a sink so it is not optimised away), and a native driver that calls
# fg_parallel_for `reps` times back to back.
_KERNELS = """
{decl}
@sink = global i64 0, align 64

define void @spin(ptr %ctx, i64 %s, i64 %e) nounwind {{
entry:
  %work = load i64, ptr %ctx, align 8
  %len = sub i64 %e, %s
  %total = mul i64 %len, %work
  %x0 = sitofp i64 %s to double
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %body ]
  %acc = phi double [ %x0, %entry ], [ %acc1, %body ]
  %more = icmp slt i64 %i, %total
  br i1 %more, label %body, label %out
body:
  %m = fmul double %acc, 0x3FEFFFFFFFFFFFFF
  %acc1 = fadd double %m, 1.0
  %i1 = add i64 %i, 1
  br label %loop
out:
  %bits = fptosi double %acc to i64
  atomicrmw add ptr @sink, i64 %bits monotonic, align 8
  ret void
}}

define void @drive(ptr %ctx, i64 %reps, i64 %n, i64 %nt) nounwind {{
entry:
  br label %loop
loop:
  %r = phi i64 [ 0, %entry ], [ %r1, %body ]
  %more = icmp slt i64 %r, %reps
  br i1 %more, label %body, label %out
body:
  call void @fg_parallel_for(ptr @spin, ptr %ctx, i64 %n, i64 %nt)
  %r1 = add i64 %r, 1
  br label %loop
out:
  ret void
}}
"""


def _alternate(fns: dict, rounds: int) -> dict:
    """{key: median seconds} of ``fns[key]()`` (each returns seconds), the keys alternating."""
    times = {key: [] for key in fns}
    for _ in range(rounds):
        for key, fn in fns.items():
            times[key].append(fn())
    return {key: statistics.median(ts) for key, ts in times.items()}


def micro(which: set[str], rounds: int) -> dict:
    """The fg_parallel_for rows: {(row, threads): seconds per call}."""
    import ctypes

    from fungrad.lowering.cpu import compiler as cpu
    from fungrad.lowering.cpu import runtime

    runtime.ensure_registered()
    mod = cpu.compile_module(
        _KERNELS.format(decl=runtime.parallel_for_decl()), ("spin", "drive"), name="pool_bench"
    )
    drive = mod.function("drive", [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64])
    work = ctypes.c_int64(0)

    def run(per_index: int, reps: int, n: int, nt: int) -> float:
        work.value = per_index
        t0 = time.perf_counter()
        drive(ctypes.addressof(work), reps, n, nt)
        return (time.perf_counter() - t0) / reps

    run(10, 1000, 2, 2)  # warm up: create the workers
    # fixed work (the same in every process, loaded or not): one multiply-add chain step takes
    # ~1.6 ns on the 2.6 GHz Zen 4 this was written on
    shapes = {
        "tiny": (300, 20000, 2),
        "small": (100, 4000, 64),
        "medium": (1000, 400, 64),
        "big": (20000, 50, 64),
    }
    out = {}
    for row, (per, reps, n) in shapes.items():
        if row in which:
            fns = {nt: (lambda p=per, r=reps, m=n, t=nt: run(p, r, m, t)) for nt in (1, 2)}
            for nt, t in _alternate(fns, rounds).items():
                out[f"{row}/{nt}"] = t
    return out


def lstm(rounds: int) -> dict:
    """{"lstm/1", "lstm/2": seconds per LSTM training step} (bench/models_bench.py's workload)."""
    import gc

    from models_bench import WORKLOADS, _to

    import fungrad as fg
    from fungrad.lowering.cpu.executable import Executable

    w = WORKLOADS["lstm"]
    params, batch = w.inputs()
    params, batch = _to(fg, params), _to(fg, batch)
    state = w.opt.init(fg, params)
    step = fg.jit(w.step(fg))
    carry = list(step(params, state, batch)[:2])
    exes = [o for o in gc.get_objects() if isinstance(o, Executable)]

    def steps(nt: int, k: int = 3) -> float:
        for exe in exes:  # what FUNGRAD_NUM_THREADS gives an executable when it is built
            exe._nthreads = nt
        t0 = time.perf_counter()
        for _ in range(k):
            carry[0], carry[1], loss = step(carry[0], carry[1], batch)
            fg.block_until_ready(loss)
        return (time.perf_counter() - t0) / k

    steps(1), steps(2)
    return {
        f"lstm/{nt}": t
        for nt, t in _alternate({1: lambda: steps(1), 2: lambda: steps(2)}, rounds).items()
    }


def import_from(tree: str) -> None:
    """Import the ``fungrad`` package from ``tree`` (an editable install's finder would otherwise
    take this checkout whatever ``sys.path`` says)."""
    import importlib.util

    init = os.path.join(os.path.abspath(tree), "fungrad", "__init__.py")
    spec = importlib.util.spec_from_file_location(
        "fungrad", init, submodule_search_locations=[os.path.dirname(init)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["fungrad"] = module
    spec.loader.exec_module(module)


def child(tree: str, which: set[str], rounds: int) -> None:
    import_from(tree)
    out = micro(which, rounds)
    if "lstm" in which:
        out.update(lstm(rounds))
    out["runtime"] = sys.modules["fungrad.lowering.cpu.runtime"].__file__
    print(json.dumps(out))


_UNITS = {
    "tiny": (1e6, "us"),
    "small": (1e6, "us"),
    "medium": (1e6, "us"),
    "big": (1e3, "ms"),
    "lstm": (1e3, "ms"),
}


def run_cell(tree: str, which: list[str], rounds: int) -> dict:
    """One child process: fungrad imported from ``tree``, 2 threads at most, unpinned."""
    env = dict(os.environ, FUNGRAD_NUM_THREADS="2")
    env["PYTHONPATH"] = ":".join([HERE, env.get("PYTHONPATH", "")])
    cmd = [sys.executable, os.path.abspath(__file__), "--child", tree, "--only", ",".join(which)]
    cmd += ["--rounds", str(rounds)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"child failed ({proc.returncode}): {proc.stderr[-2000:]}")
    row = json.loads(lines[-1])
    assert row["runtime"].startswith(os.path.abspath(tree)), row["runtime"]
    return row


def start_load(count: int) -> list[subprocess.Popen]:
    """``count`` busy processes (killed by the caller)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--load", default="0,2", help="busy processes per run, comma-separated")
    p.add_argument("--only", default="tiny,small,medium,big,lstm")
    p.add_argument("--rounds", type=int, default=7, help="alternating batches per row")
    p.add_argument(
        "--trees",
        default=os.path.dirname(HERE),
        help="comma-separated source trees to import fungrad from (e.g. an export of the old "
        "runtime, then this checkout), each cell run once per tree under the same load",
    )
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    which = [w for w in args.only.split(",") if w]
    if args.child:
        child(args.child, set(which), args.rounds)
        return
    trees = args.trees.split(",")
    blas = os.environ.get("OPENBLAS_NUM_THREADS")
    print(f"host: {os.cpu_count()} CPUs; OPENBLAS_NUM_THREADS={blas}")
    header = "".join(f"{w + ' (' + _UNITS[w][1] + ') 1t/2t':>24}" for w in which)
    print(f"{'tree':<22}{'load':>5}{header}")
    for load in (int(x) for x in args.load.split(",")):
        busy = start_load(load)
        try:
            time.sleep(0.2 if load else 0)
            for tree in trees:
                row = run_cell(tree, which, args.rounds)
                cells = ""
                for w in which:
                    one, two = (row[f"{w}/{nt}"] * _UNITS[w][0] for nt in (1, 2))
                    cells += f"{one:>10.2f}{two:>9.2f}{two / one:>5.1f}"
                print(f"{tree[-22:]:<22}{load:>5}{cells}", flush=True)
        finally:
            for b in busy:
                b.kill()
                b.wait()


if __name__ == "__main__":
    main()
