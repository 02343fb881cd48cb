"""fg.jit against JAX's jit and numpy on the workloads of issue 4 (bench/jit_workloads.py).

Every result (fungrad, JAX, numpy) is checked against a float64 numpy reference with the
workload's tolerance before it is timed; a wrong result or an error is reported, never timed.
Times are the best of several batches of calls (median shown too), all in one run, pinned to
one core by default; the implementations' batches alternate so they share the machine's load.
Ratios are fungrad's time over the other's (below 1 = fungrad faster); each target from the
issue is printed as PASS or MISS. JAX is optional: without it only fungrad and numpy run. The
first-call workload runs fresh processes (bench/first_call.py).

Run:  python bench/jit_bench.py [--quick] [--only chain,mlp,...] [--cores N]
(with JAX: an interpreter that has both jax and fungrad's dependencies, e.g.
 PYTHONPATH=. /path/to/jax-venv/bin/python bench/jit_bench.py)
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))
from common import max_error, optional, pin_cores, timeit_interleaved  # noqa: E402

NAMES = (
    "chain",
    "softmax",
    "matmul",
    "mlp",
    "percall_scalar",
    "percall_8",
    "first_call",
    "per_example",
    "sum",
    "mean_axis0",
)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer, shorter repeats")
    p.add_argument("--only", default="", help=f"comma-separated subset of {', '.join(NAMES)}")
    p.add_argument(
        "--cores",
        type=int,
        default=1,
        help="pin to this many cores (0: leave the affinity alone); default 1",
    )
    args = p.parse_args(argv)
    args.only = [n for n in args.only.split(",") if n]
    unknown = sorted(set(args.only) - set(NAMES))
    if unknown:
        p.error(f"--only: unknown workload(s) {unknown}; choose from {', '.join(NAMES)}")
    return args


def _error_text(e: BaseException) -> str:
    """The exception's type and message (first 3 lines), plus where in fungrad it came from."""
    msg = "\n".join(str(e).splitlines()[:3])
    frames = [f for f in traceback.extract_tb(e.__traceback__) if "fungrad" in f.filename]
    where = f" [at {os.path.relpath(frames[-1].filename)}:{frames[-1].lineno}]" if frames else ""
    return f"{type(e).__name__}: {msg}{where}"


def _runner(fw, fn, args):
    """A no-argument callable running ``fn(*args)`` to completion (JAX dispatches async)."""
    out = fn(*args)
    if fw is None:
        return lambda: fn(*args)
    if hasattr(out, "block_until_ready"):
        return lambda: fn(*args).block_until_ready()
    return lambda: fw.block_until_ready(fn(*args))


def prepare(workload, fw, label, expected):
    """Build ``workload`` on ``fw`` (None: the numpy baseline), run it once and check the result.

    Returns a row dict: ``run`` (a no-argument callable for timing) and ``err`` (error over
    tolerance), or ``error`` (str); plus ``losses`` for the MLP (20 SGD steps from the same
    start) and, for fungrad, ``plan`` (the fusion plan's summary line)."""
    import jit_workloads as W

    row = {"label": label}
    try:
        if fw is None:
            fn, args = workload.numpy_fn, workload.inputs()
        else:
            fn, args = workload.build(fw)
        got = fn(*args)
        err, ok = max_error(got, expected, workload.rtol, workload.atol)
        if not ok:
            row["error"] = (
                f"WRONG RESULT: error {err:.3g}x the tolerance "
                f"(rtol={workload.rtol:g}, atol={workload.atol:g})"
            )
            return row
        row["err"] = err
        row["run"] = _runner(fw, fn, args)
        if workload.name == "mlp":
            row["losses"] = W.mlp_losses(fn, args)
        if fw is not None and fw.__name__ == "fungrad":
            row["plan"] = _plan_line(fn, args)
    except Exception as e:  # noqa: BLE001 - reported in the table, the other rows still run
        row["error"] = _error_text(e)
    return row


def _plan_line(fn, args) -> str:
    """The fusion plan's summary (kernels, temporary bytes) from ``fn.lower(*args).as_text()``."""
    for line in fn.lower(*args).as_text().splitlines():
        if line.startswith("# fusion plan"):
            return line[2:]
    return "no fusion plan in lower().as_text()"


def time_rows(rows, timing) -> None:
    """Time every row that has a runner, batches interleaved; sets ``time`` and ``median``."""
    live = [r for r in rows if "run" in r]
    for r, (best, median) in zip(live, timeit_interleaved([r["run"] for r in live], **timing)):
        r["time"], r["median"] = best, median


def _fmt_time(t: float) -> str:
    if t >= 1:
        return f"{t:.3f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.2f} ms"
    return f"{t * 1e6:.2f} us"


def _fmt_rate(workload, t: float) -> str:
    if workload.rate is None:
        return ""
    unit, work = workload.rate
    return f"{work / t:.1f} {unit}"


def print_rows(title, rows, rate_of=None, note=""):
    """One workload's table: time (min and median), rate, error vs tolerance, ratios."""
    fg_row = rows[0]
    print(f"\n{title}{note}")
    print(
        f"  {'implementation':<16}{'min':>12}{'median':>12}{'rate':>16}{'err/tol':>9}"
        f"{'fungrad/this':>14}"
    )
    for r in rows:
        if "error" in r:
            print(f"  {r['label']:<16}FAILED: {r['error']}")
            continue
        ratio = f"{fg_row['time'] / r['time']:.2f}" if "time" in fg_row else "-"
        rate = rate_of(r["time"]) if rate_of else ""
        print(
            f"  {r['label']:<16}{_fmt_time(r['time']):>12}{_fmt_time(r['median']):>12}"
            f"{rate:>16}{r['err']:>9.2f}{ratio:>14}"
        )


def verdict(fg_row, jax_row, target: float) -> tuple[str, str]:
    """(ratio text, PASS/MISS/n/a) of fungrad's time over JAX's against ``target``."""
    if jax_row is None:
        return "-", "n/a (no JAX)"
    if "error" in fg_row or "error" in jax_row:
        return "-", "MISS" if "error" in fg_row else "n/a (JAX failed)"
    ratio = fg_row["time"] / jax_row["time"]
    return f"{ratio:.3f}", "PASS" if ratio <= target else "MISS"


def main(argv=None) -> int:
    args = parse_args(argv)
    cpus = pin_cores(args.cores)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")

    import jit_workloads as W
    import numpy as np

    import fungrad as fg

    jax = optional("jax")
    frameworks = [("fungrad jit", fg)] + ([("jax jit", jax)] if jax is not None else [])
    timing = dict(min_time=0.3, repeats=3) if args.quick else dict(min_time=1.5, repeats=7)
    selected = args.only or list(NAMES)
    print(
        f"fg.jit benchmark: cpus {cpus}, numpy {np.__version__}, "
        f"jax {jax.__version__ if jax else 'absent'}, "
        f"{'quick' if args.quick else 'full'} timing {timing}"
    )

    summary, failed = [], False
    for w in W.WORKLOADS:
        if w.name in selected:
            expected = w.reference(*w.inputs())
            rows = [prepare(w, fw, label, expected) for label, fw in frameworks]
            rows.append(prepare(w, None, "numpy", expected))
            time_rows(rows, timing)
            failed |= any("error" in r for r in rows)
            rate_of = (lambda t, w=w: _fmt_rate(w, t)) if w.rate else None
            print_rows(
                f"[{w.name}] {w.title}",
                rows,
                rate_of,
                note=f"   (tolerance rtol={w.rtol:g} atol={w.atol:g}; "
                f"JAX in the issue: {w.issue_jax})",
            )
            if "plan" in rows[0]:
                print(f"  fungrad {rows[0]['plan']}")
            if w.name == "mlp":
                failed |= not _print_losses(rows)
            jax_row = rows[1] if jax is not None else None
            np_row = rows[-1]
            summary.append((w, rows[0], jax_row, np_row))
        if w.name == "percall_8" and "first_call" in selected:
            summary.append(_first_call(args, jax is not None))
            failed |= "error" in summary[-1][1]
    _print_summary(summary)
    return 1 if failed else 0


def _print_losses(rows) -> bool:
    """Print the 20-step loss curves; True when every one falls (last < 0.9 * first)."""
    ok = True
    print("  loss over 20 SGD steps from the same start (must fall):")
    for r in rows:
        if "losses" in r:
            ls = r["losses"]
            falls = ls[-1] < 0.9 * ls[0]
            ok &= falls
            print(
                f"    {r['label']:<14}{ls[0]:.4f} -> {ls[9]:.4f} -> {ls[-1]:.4f}  "
                f"{'falls' if falls else 'DOES NOT FALL'}"
            )
    return ok


def _first_call(args, have_jax: bool):
    """The first-call workload: fresh processes per framework (bench/first_call.py)."""
    import first_call

    runs = 1 if args.quick else 3
    res = first_call.measure(["fungrad"] + (["jax"] if have_jax else []), runs)
    first_call.print_table(res)
    rows = []
    for name in ("fungrad", "jax"):
        r = res.get(name)
        if r is None:
            rows.append(None)
        elif r.get("error"):
            rows.append({"label": name, "error": r["error"]})
        else:
            rows.append({"label": name, "time": min(r["first"])})
    return first_call.WORKLOAD, rows[0], rows[1], None


def _print_summary(summary) -> None:
    print("\nSummary (time ratios: fungrad/JAX and fungrad/numpy; below 1 = fungrad faster)")
    print(
        f"  {'workload':<16}{'fungrad':>12}{'JAX':>12}{'numpy':>12}{'fg/JAX':>9}"
        f"{'fg/numpy':>10}   {'target (fg/JAX)':<38}result"
    )

    def t(row):
        if row is None:
            return "-"
        return "FAILED" if "error" in row else _fmt_time(row["time"])

    for w, fg_row, jax_row, np_row in summary:
        ratio, result = verdict(fg_row, jax_row, w.target)
        vs_np = (
            "-"
            if np_row is None or "time" not in np_row or "time" not in fg_row
            else f"{fg_row['time'] / np_row['time']:.3f}"
        )
        target = f"<= {w.target:.3g} ({w.target_text})"
        print(
            f"  {w.name:<16}{t(fg_row):>12}{t(jax_row):>12}{t(np_row):>12}{ratio:>9}"
            f"{vs_np:>10}   {target:<38}{result}"
        )


if __name__ == "__main__":
    sys.exit(main())
