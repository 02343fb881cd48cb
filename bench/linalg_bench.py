"""Linear algebra and FFT: fg.jit against numpy, scipy and JAX's jit (the measurements of
issue 18).

Workloads: ``solve`` of one 256x256 float32 system and of a batch of 64 8x8 systems,
``cholesky`` of a 512x512 float32 matrix, ``fft`` of 2^20 complex64 values, and the first call
(trace + compile + run) of ``jit(grad(lambda a, b: sum(solve(a, b))))`` at n = 8, 32, 64.

Every result is checked against a float64 numpy reference before it is timed; a wrong result
or an error is reported in the table, never timed. Times are the best of several batches of
calls (median shown too), the implementations' batches alternating so that they share the
machine's load; pinned to one core by default. Ratios are fungrad's time over the other's
(below 1 = fungrad faster). An implementation that lacks an operation (fungrad's FFT today)
prints "absent". scipy and JAX are optional.

The first-call cases run one fresh interpreter per framework and size (on-disk caches off, as
in bench/first_call.py), best of ``--runs``, each process with a time limit (interpreter start
and imports included): a case whose process runs past it prints "> T s".

Run:  python bench/linalg_bench.py [--quick] [--only solve,solve_batch,...] [--cores N]
      [--first-call-timeout SECONDS] [--runs N]
(with JAX: an interpreter that has both jax and fungrad's dependencies, e.g.
 PYTHONPATH=. /path/to/jax-venv/bin/python bench/linalg_bench.py)
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
from collections.abc import Callable
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))
from common import max_error, optional, pin_cores, timeit_interleaved  # noqa: E402

NAMES = ("solve", "solve_batch", "cholesky", "fft", "first_call")
FIRST_CALL_SIZES = (8, 32, 64)


@dataclass
class Case:
    """One timed workload: inputs, a float64 reference and, per implementation, a builder
    returning the function to time (None when that implementation lacks the operation)."""

    name: str
    title: str
    inputs: Callable[[], tuple]
    reference: Callable[..., object]
    rtol: float
    atol: float
    target: str


def _spd(rng, n: int, batch: tuple = ()):
    import numpy as np

    x = rng.standard_normal(batch + (n, n))
    return x @ np.swapaxes(x, -1, -2) / n + np.eye(n)


def _solve_inputs(n: int, batch: tuple):
    """A well-conditioned float32 system ``a x = b`` (b with a trailing column axis when
    batched: numpy 2 and JAX read a 2-D ``b`` as one matrix, not a batch of vectors)."""
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal(batch + (n, n)) + np.sqrt(n) * 4 * np.eye(n)
    b = rng.standard_normal(batch + (n,) + ((1,) if batch else ()))
    return a.astype(np.float32), b.astype(np.float32)


def _f64(fn):
    import numpy as np

    return lambda *args: fn(
        *(np.asarray(x, np.complex128 if np.iscomplexobj(x) else np.float64) for x in args)
    )


def cases() -> list[Case]:
    import numpy as np

    return [
        Case(
            "solve",
            "jit fnp.linalg.solve, one 256x256 float32 system",
            lambda: _solve_inputs(256, ()),
            _f64(np.linalg.solve),
            1e-3,
            1e-4,
            "within 1.2x of JAX",
        ),
        Case(
            "solve_batch",
            "jit fnp.linalg.solve, a batch of 64 8x8 float32 systems",
            lambda: _solve_inputs(8, (64,)),
            _f64(np.linalg.solve),
            1e-3,
            1e-4,
            "-",
        ),
        Case(
            "cholesky",
            "jit fnp.linalg.cholesky, 512x512 float32",
            lambda: (_spd(np.random.default_rng(1), 512).astype(np.float32),),
            _f64(np.linalg.cholesky),
            1e-3,
            1e-4,
            "within 1.2x of JAX",
        ),
        Case(
            "fft",
            "fft of 2^20 complex64 values",
            lambda: (_fft_input(),),
            _f64(np.fft.fft),
            1e-3,
            1e-2,  # entries are sums of 2^20 unit-size terms: absolute error grows with sqrt(n)
            "<= 1.0x JAX",
        ),
    ]


def _fft_input():
    import numpy as np

    rng = np.random.default_rng(2)
    n = 1 << 20
    return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)


def builders(name: str, fg, jax, scipy_linalg, scipy_fft) -> list[tuple[str, object]]:
    """(label, function or None when absent, or an error string) per implementation; fungrad
    first."""
    import numpy as np

    fnp = fg.numpy
    rows = []
    if name in ("solve", "solve_batch"):
        rows.append(("fungrad jit", fg.jit(fnp.linalg.solve)))
        rows.append(("numpy", np.linalg.solve))
        if scipy_linalg is not None:
            rows.append(("scipy", scipy_linalg.solve))
        if jax is not None:
            rows.append(("jax jit", jax.jit(jax.numpy.linalg.solve)))
    elif name == "cholesky":
        rows.append(("fungrad jit", fg.jit(fnp.linalg.cholesky)))
        rows.append(("numpy", np.linalg.cholesky))
        if scipy_linalg is not None:
            rows.append(
                ("scipy", lambda a: scipy_linalg.cholesky(a, lower=True, check_finite=False))
            )
        if jax is not None:
            rows.append(("jax jit", jax.jit(jax.numpy.linalg.cholesky)))
    elif name == "fft":
        fg_fft = getattr(getattr(fnp, "fft", None), "fft", None)
        rows.append(("fungrad jit", fg.jit(fg_fft) if fg_fft is not None else None))
        rows.append(("numpy", np.fft.fft))
        if scipy_fft is not None:
            rows.append(("scipy.fft", scipy_fft.fft))
        if jax is not None:
            rows.append(("jax jit", jax.jit(jax.numpy.fft.fft)))
    return rows


def _block(out):
    """Wait for ``out`` (JAX dispatches asynchronously; fungrad and numpy return done)."""
    if hasattr(out, "block_until_ready"):
        out.block_until_ready()
    return out


def _parts(x):
    """``x`` as (real part, imaginary part) when complex (max_error compares real arrays)."""
    import numpy as np

    x = np.asarray(x)
    return (x.real, x.imag) if np.iscomplexobj(x) else x


def prepare(case: Case, label: str, fn, args, expected) -> dict:
    """Run ``fn`` once and check it; a row with ``run`` (callable to time) and ``err``, or
    ``error`` (str) or ``absent``."""
    from jit_bench import _error_text

    row = {"label": label}
    if fn is None:
        row["absent"] = True
        return row
    try:
        got = _block(fn(*args))
        err, ok = max_error(_parts(got), _parts(expected), case.rtol, case.atol)
        if not ok:
            row["error"] = (
                f"WRONG RESULT: error {err:.3g}x the tolerance "
                f"(rtol={case.rtol:g}, atol={case.atol:g})"
            )
            return row
        row["err"] = err
        row["dtype"] = str(getattr(got, "dtype", type(got).__name__))
        row["run"] = lambda: _block(fn(*args))
    except Exception as e:  # noqa: BLE001 - reported in the table, the other rows still run
        row["error"] = _error_text(e)
    return row


def print_rows(case: Case, rows: list[dict]) -> None:
    from jit_bench import _fmt_time

    fg_row = rows[0]
    print(f"\n[{case.name}] {case.title}   (tolerance rtol={case.rtol:g} atol={case.atol:g})")
    print(
        f"  {'implementation':<14}{'min':>12}{'median':>12}{'err/tol':>9}{'fungrad/this':>14}"
        f"{'out dtype':>11}"
    )
    for r in rows:
        if r.get("absent"):
            print(f"  {r['label']:<14}absent")
            continue
        if "error" in r:
            print(f"  {r['label']:<14}FAILED: {r['error']}")
            continue
        ratio = f"{fg_row['time'] / r['time']:.2f}" if "time" in fg_row else "-"
        print(
            f"  {r['label']:<14}{_fmt_time(r['time']):>12}{_fmt_time(r['median']):>12}"
            f"{r['err']:>9.2f}{ratio:>14}{r['dtype']:>11}"
        )


# --- first call of jit(grad(solve)) in fresh processes ---------------------------------------


def child(framework: str, n: int) -> dict:
    """In a fresh process: the first call (trace + compile + run) and a second call of
    ``jit(grad(lambda a, b: sum(solve(a, b))))`` at size ``n``, checked against the float64
    gradient ``-(A^-T 1) x^T``."""
    import numpy as np

    if framework == "fungrad":
        import fungrad as fw

        fnp = fw.numpy
    else:
        import jax as fw

        fnp = fw.numpy
    a, b = _solve_inputs(n, ())
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    expected = -np.outer(np.linalg.solve(a64.T, np.ones(n)), np.linalg.solve(a64, b64))
    out = {}
    try:
        step = fw.jit(fw.grad(lambda a, b: fnp.sum(fnp.linalg.solve(a, b))))
        t0 = time.perf_counter()
        got = fw.block_until_ready(step(a, b))
        out["first"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        fw.block_until_ready(step(a, b))
        out["second"] = time.perf_counter() - t0
        err, ok = max_error(got, expected, 1e-3, 1e-4)
        if not ok:
            out["error"] = f"WRONG RESULT: error {err:.3g}x the tolerance"
    except Exception as e:  # noqa: BLE001 - reported by the parent
        from jit_bench import _error_text

        out["error"] = _error_text(e)
    return out


def _run_child(framework: str, n: int, timeout: float) -> dict:
    """One fresh process; its result dict, ``{"timeout": T}`` or ``{"error": ...}``."""
    import first_call

    cmd = [sys.executable, os.path.abspath(__file__), "--child", framework, "--n", str(n)]
    try:
        proc = subprocess.run(
            cmd, env=first_call._child_env(), capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"timeout": timeout}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": f"child exited {proc.returncode}: {' | '.join(tail)}"}
    return json.loads(lines[-1])


def first_call_table(frameworks: list[str], timeout: float, runs: int) -> dict:
    """Run and print the first-call cases, ``runs`` fresh processes per framework and size
    (alternating frameworks), keeping the fastest; returns ``{(framework, n): result}``."""
    print(
        "\n[first_call] first call (trace + compile + run) of "
        "jit(grad(lambda a, b: sum(solve(a, b)))), float32, fresh process, disk cache off, "
        f"limit {timeout:g} s per process, best of {runs}   (target: fungrad < 0.5 s at n=64)"
    )
    for fw in frameworks:  # unmeasured: fills the children's bytecode cache
        _run_child(fw, 4, timeout)
    results = {}
    print(f"  {'framework':<12}{'n':>4}{'first call':>14}{'median':>10}{'2nd call':>12}")
    for n in FIRST_CALL_SIZES:
        firsts = {fw: [] for fw in frameworks}
        for _ in range(runs):
            for fw in frameworks:
                if "timeout" in results.get((fw, n), {}) or "error" in results.get((fw, n), {}):
                    continue  # a case that failed or timed out once is not run again
                r = _run_child(fw, n, timeout)
                if "first" in r:
                    firsts[fw].append(r["first"])
                    if "first" in results.get((fw, n), {}) and results[fw, n]["first"] < r["first"]:
                        continue
                results[fw, n] = r
        for fw in frameworks:
            r = results[fw, n]
            if "timeout" in r:
                print(f"  {fw:<12}{n:>4}{'> ' + format(r['timeout'], 'g') + ' s':>14}")
            elif "error" in r:
                print(f"  {fw:<12}{n:>4}  FAILED: {r['error']}")
            else:
                median = statistics.median(firsts[fw])
                print(
                    f"  {fw:<12}{n:>4}{r['first']:>12.3f} s{median:>8.3f} s"
                    f"{r['second'] * 1e3:>9.2f} ms"
                )
    return results


def _first_call_text(r) -> str:
    if r is None:
        return "-"
    if "timeout" in r:
        return f"> {r['timeout']:g} s"
    if "error" in r:
        return "FAILED"
    return f"{r['first']:.3f} s"


# --- main ----------------------------------------------------------------------------------


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer, shorter repeats")
    p.add_argument("--only", default="", help=f"comma-separated subset of {', '.join(NAMES)}")
    p.add_argument(
        "--cores", type=int, default=1, help="pin to this many cores (0: no pinning); default 1"
    )
    p.add_argument(
        "--first-call-timeout",
        type=float,
        default=20.0,
        help="seconds allowed per first-call process (default 20)",
    )
    p.add_argument(
        "--runs", type=int, default=3, help="fresh processes per first-call case (default 3)"
    )
    p.add_argument("--child", choices=("fungrad", "jax"), help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, default=8, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.only = [n for n in args.only.split(",") if n]
    unknown = sorted(set(args.only) - set(NAMES))
    if unknown:
        p.error(f"--only: unknown workload(s) {unknown}; choose from {', '.join(NAMES)}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.n)))
        return 0
    cpus = pin_cores(args.cores)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")

    import numpy as np
    from jit_bench import _fmt_time

    import fungrad as fg

    jax = optional("jax")
    scipy_linalg = optional("scipy.linalg")
    scipy_fft = optional("scipy.fft")
    scipy = optional("scipy")
    timing = dict(min_time=0.3, repeats=3) if args.quick else dict(min_time=1.0, repeats=5)
    selected = args.only or list(NAMES)
    print(
        f"linear algebra / FFT benchmark: cpus {cpus}, numpy {np.__version__}, "
        f"scipy {scipy.__version__ if scipy else 'absent'}, "
        f"jax {jax.__version__ if jax else 'absent'}, "
        f"{'quick' if args.quick else 'full'} timing {timing}"
    )

    summary, failed = [], False
    for case in cases():
        if case.name not in selected:
            continue
        args_ = case.inputs()
        expected = case.reference(*args_)
        rows = [
            prepare(case, label, fn, args_, expected)
            for label, fn in builders(case.name, fg, jax, scipy_linalg, scipy_fft)
        ]
        live = [r for r in rows if "run" in r]
        for r, (best, median) in zip(live, timeit_interleaved([r["run"] for r in live], **timing)):
            r["time"], r["median"] = best, median
        failed |= any("error" in r for r in rows)
        print_rows(case, rows)
        summary.append((case, {r["label"]: r for r in rows}))

    first = None
    if "first_call" in selected:
        frameworks = ["fungrad"] + (["jax"] if importlib.util.find_spec("jax") else [])
        first = first_call_table(frameworks, args.first_call_timeout, args.runs)
        failed |= any("error" in r for r in first.values())

    def cell(row):
        if row is None:
            return "-"
        if row.get("absent"):
            return "absent"
        return "FAILED" if "error" in row else _fmt_time(row["time"])

    def ratio(a, b):
        if a is None or b is None or "time" not in a or "time" not in b:
            return "-"
        return f"{a['time'] / b['time']:.2f}"

    print("\nSummary (fungrad jit against the others; ratios below 1 = fungrad faster)")
    print(
        f"  {'workload':<27}{'fungrad':>11}{'numpy':>11}{'scipy':>11}{'JAX':>11}"
        f"{'fg/numpy':>10}{'fg/JAX':>8}   target"
    )
    for case, by in summary:
        fg_r, np_r = by.get("fungrad jit"), by.get("numpy")
        sp_r = by.get("scipy") or by.get("scipy.fft")
        jx_r = by.get("jax jit")
        print(
            f"  {case.name:<27}{cell(fg_r):>11}{cell(np_r):>11}{cell(sp_r):>11}{cell(jx_r):>11}"
            f"{ratio(fg_r, np_r):>10}{ratio(fg_r, jx_r):>8}   {case.target}"
        )
    if first is not None:
        for n in FIRST_CALL_SIZES:
            fg_t = _first_call_text(first.get(("fungrad", n)))
            jx_t = _first_call_text(first.get(("jax", n)))
            target = "< 0.5 s" if n == 64 else "-"
            print(
                f"  {'first jit(grad(solve)) ' + str(n):<27}{fg_t:>11}{'-':>11}{'-':>11}"
                f"{jx_t:>11}{'-':>10}{'-':>8}   {target}"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
