"""First call of the jitted MLP training step (trace + compile + one run) in a fresh process.

Each measurement is a new interpreter (``python bench/first_call.py --child fungrad|jax``) with
the on-disk caches disabled (``FUNGRAD_DISABLE_CACHE=1``; JAX's persistent compilation cache
off), so nothing compiled earlier is reused. The child imports the framework, converts the
inputs (JAX initialises its backend there), then times the first call of the step from
bench/jit_workloads.py, and a second call for comparison, and checks the result against the
float64 numpy reference. The parent reports the best and median over ``--runs`` processes.

Python's own bytecode cache stays on, as for an installed package (which ships its ``.pyc``
files): the children run without ``PYTHONDONTWRITEBYTECODE`` and with ``PYTHONPYCACHEPREFIX``
pointing at a temporary directory (so no ``__pycache__`` lands in the source tree), and one
unmeasured warm-up child per framework fills that cache first. Otherwise the lazily imported
lowering modules would be compiled to bytecode inside the timed first call.

Run:  python bench/first_call.py [--runs 3] [--cores 1]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))
from common import max_error, pin_cores  # noqa: E402

WORKLOAD = SimpleNamespace(
    name="first_call",
    target=0.3,
    target_text="<= 0.3x JAX's time",
    title="first call (trace + compile + run) of the MLP step, fresh process, disk cache off",
    issue_jax="0.5 s",
)
"""The summary line's description, shaped like a jit_workloads.Workload."""


def child(framework: str, stages: bool = False) -> dict:
    """Run in a fresh process: the timings of the first and second call, or the error. With
    ``stages``, the first call is made ahead of time instead, timing its stages separately:
    ``lower`` (trace to the IR), ``compile`` (to native code) and ``run`` (the first run)."""
    t0 = time.perf_counter()
    if framework == "fungrad":
        import fungrad as fw
    else:
        import jax as fw
    t_import = time.perf_counter() - t0
    import jit_workloads as W

    out = {"import": t_import}
    try:
        step, args = W.MLP.build(fw)
        t0 = time.perf_counter()
        if stages:
            lowered = step.lower(*args)
            t1 = time.perf_counter()
            compiled = lowered.compile()
            t2 = time.perf_counter()
            result = fw.block_until_ready(compiled(*args))
            t3 = time.perf_counter()
            out.update(lower=t1 - t0, compile=t2 - t1, run=t3 - t2)
            if framework == "fungrad":  # where compile went: LLVM's steps, all modules
                from fungrad.lowering.cpu import compiler as cpu

                out["llvm"] = cpu.compile_stats()
        else:
            result = fw.block_until_ready(step(*args))
            out["first"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            fw.block_until_ready(step(*args))
            out["second"] = time.perf_counter() - t0
        err, ok = max_error(result, W.MLP.reference(*W.MLP.inputs()), W.MLP.rtol, W.MLP.atol)
        if not ok:
            out["error"] = f"WRONG RESULT: error {err:.3g}x the tolerance"
    except Exception as e:  # noqa: BLE001 - reported by the parent
        from jit_bench import _error_text

        out["error"] = _error_text(e)
    return out


_PYC_DIR = None  # the children's bytecode cache (a temporary directory, made on first use)


def _child_env() -> dict:
    global _PYC_DIR
    if _PYC_DIR is None:
        import atexit
        import shutil
        import tempfile

        _PYC_DIR = tempfile.mkdtemp(prefix="fungrad-first-call-pyc-")
        atexit.register(shutil.rmtree, _PYC_DIR, True)
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = _PYC_DIR
    env["FUNGRAD_DISABLE_CACHE"] = "1"
    env["JAX_ENABLE_COMPILATION_CACHE"] = "false"
    env.setdefault("JAX_PLATFORMS", "cpu")
    path = [HERE, os.path.dirname(HERE)] + [p for p in env.get("PYTHONPATH", "").split(":") if p]
    env["PYTHONPATH"] = ":".join(path)
    return env


def measure(frameworks: list[str], runs: int) -> dict[str, dict]:
    """``{framework: {"first": [s...], "second": [...], "import": [...], "error": str|None}}``
    from ``runs`` fresh processes each, alternating frameworks so they share the machine's load
    (children inherit this process's CPU affinity)."""
    results = {
        name: {"first": [], "second": [], "import": [], "error": None} for name in frameworks
    }
    for name in results:  # unmeasured: fills the bytecode cache (see the docstring)
        _run_child(name, {"first": [], "second": [], "import": [], "error": None})
    for _ in range(runs):
        for name, r in results.items():
            if r["error"] is None:
                _run_child(name, r)
    for name, r in results.items():  # one more process each, timing the stages
        if r["error"] is None:
            _run_child(name, r, stages=True)
    return results


def _run_child(name: str, r: dict, stages: bool = False) -> None:
    """One fresh process for ``name``; appends its timings to ``r`` (``r["stages"]`` with
    ``stages``) or sets ``r["error"]``."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", name] + ["--stages"] * stages
    proc = subprocess.run(cmd, env=_child_env(), capture_output=True, text=True, timeout=900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        r["error"] = f"child exited {proc.returncode}: {' | '.join(tail)}"
        return
    data = json.loads(lines[-1])
    if "error" in data:
        r["error"] = data["error"]
        return
    if stages:
        r["stages"] = data
    else:
        for key in ("first", "second", "import"):
            r[key].append(data[key])


def print_table(results: dict[str, dict]) -> None:
    print(f"\n[first_call] {WORKLOAD.title}   (JAX in the issue: {WORKLOAD.issue_jax})")
    print(
        f"  {'framework':<12}{'first min':>12}{'median':>10}{'2nd call':>11}{'import':>10}"
        f"{'runs':>6}"
    )
    for name, r in results.items():
        if r["error"]:
            print(f"  {name:<12}FAILED: {r['error']}")
            continue
        print(
            f"  {name:<12}{min(r['first']):>10.3f} s{statistics.median(r['first']):>8.3f} s"
            f"{min(r['second']) * 1e3:>8.2f} ms{min(r['import']):>8.3f} s"
            f"{len(r['first']):>6}"
        )
    for name, r in results.items():
        st = r.get("stages")
        if st:
            print(
                f"  {name} ahead of time, one more process: lower (trace) {st['lower']:.3f} s, "
                f"compile {st['compile']:.3f} s, first run {st['run'] * 1e3:.1f} ms"
            )
            llvm = st.get("llvm")
            if llvm:
                ms = {k: llvm[k] * 1e3 for k in ("parse_s", "optimize_s", "codegen_s", "load_s")}
                print(
                    f"    of which LLVM ({llvm['modules']} module(s)): parse "
                    f"{ms['parse_s']:.0f} ms, optimize {ms['optimize_s']:.0f} ms, "
                    f"codegen {ms['codegen_s']:.0f} ms, load {ms['load_s']:.1f} ms"
                )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3, help="fresh processes per framework")
    p.add_argument("--cores", type=int, default=1, help="pin to this many cores (0: no pinning)")
    p.add_argument("--child", choices=("fungrad", "jax"), help=argparse.SUPPRESS)
    p.add_argument("--stages", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.stages)))
        return 0
    cpus = pin_cores(args.cores)
    have_jax = importlib.util.find_spec("jax") is not None
    print(f"first-call benchmark: cpus {cpus}, {args.runs} fresh process(es) per framework")
    res = measure(["fungrad"] + (["jax"] if have_jax else []), args.runs)
    print_table(res)
    fg_r, jax_r = res["fungrad"], res.get("jax")
    if jax_r is None:
        print("  target fungrad/JAX <= 0.3: n/a (no JAX)")
    elif fg_r["error"] or jax_r["error"]:
        print("  target fungrad/JAX <= 0.3: MISS (a run failed)")
    else:
        ratio = min(fg_r["first"]) / min(jax_r["first"])
        print(
            f"  fungrad/JAX {ratio:.3f}, target <= {WORKLOAD.target}: "
            f"{'PASS' if ratio <= WORKLOAD.target else 'MISS'}"
        )
    return 1 if any(r["error"] for r in res.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
