"""FFT: fungrad's native FFT library and fg.jit(fnp.fft.*) against numpy, scipy.fft and JAX's
jit (issue 18's target: fft of 2^20 complex64 at <= 1.0x JAX's time).

Workloads: ``fft`` of 2^20 complex64 values, of 1000 (not a power of two: mixed radix) and of
997 (prime: Bluestein), a batch of 1024 transforms of 1024 along the last axis and along axis
0, ``rfft`` of 2^20 float32 and ``rfft2`` of 1024 x 1024 float32.

Implementations: "fungrad jit" (``fg.jit(fnp.fft.fft)``),
"fg native" (the library ``fungrad/lowering/cpu/fft.py`` called through ctypes with the
threads a jitted FFT gets, ``threads.num_threads()``: the code a jitted FFT runs, without the
jit's call overhead; its rfft is the complex transform of ``x + 0i`` cut to ``n // 2 + 1``
frequencies, as the jit's complex split computes it), numpy, scipy.fft (optional; its default
one worker), JAX (optional).

Every result is checked against numpy's float64 transform before it is timed; a wrong result or
an error is reported in the table, never timed. Times are the best of several interleaved
batches (median shown too). Pinned to one core by default (``--cores 0``: no pinning). Ratios
are fungrad's time (the jit row, else the native row) over each other's; below 1 = fungrad
faster. "ours" is the first fungrad row that ran (jit, else native).

Run:  python bench/fft_bench.py [--quick] [--only fft,fft_1000,...] [--cores N]
(with JAX: PYTHONPATH=. /path/to/jax-venv/bin/python bench/fft_bench.py)
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))
from common import optional, pin_cores, timeit_interleaved  # noqa: E402

NAMES = ("fft", "fft_1000", "fft_997", "fft_batch", "fft_axis0", "rfft", "rfft2")


def _cases():
    """(name, title, input builder, op (a key of OPS), target)."""
    import numpy as np

    rng = np.random.default_rng(0)

    def cplx(shape):
        return lambda: (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(
            np.complex64
        )

    def real(shape):
        return lambda: rng.standard_normal(shape).astype(np.float32)

    return [
        ("fft", "fft of 2^20 complex64", cplx(1 << 20), "fft", "<= 1.0x JAX"),
        ("fft_1000", "fft of 1000 complex64 (2^3 5^3)", cplx(1000), "fft", "-"),
        ("fft_997", "fft of 997 complex64 (prime: Bluestein)", cplx(997), "fft", "-"),
        ("fft_batch", "fft of 1024 x 1024 complex64, last axis", cplx((1024, 1024)), "fft", "-"),
        ("fft_axis0", "fft of 1024 x 1024 complex64, axis 0", cplx((1024, 1024)), "fft0", "-"),
        ("rfft", "rfft of 2^20 float32", real(1 << 20), "rfft", "-"),
        ("rfft2", "rfft2 of 1024 x 1024 float32", real((1024, 1024)), "rfft2", "-"),
    ]


#: workload op -> (function name in numpy.fft and its namesakes, keyword arguments)
OPS = {
    "fft": ("fft", {}),
    "fft0": ("fft", {"axis": 0}),
    "rfft": ("rfft", {}),
    "rfft2": ("rfft2", {}),
}


def _op(module, op: str):
    """``op`` of ``module`` (numpy.fft, scipy.fft, jax.numpy.fft, fungrad.numpy.fft)."""
    name, kwargs = OPS[op]
    fn = getattr(module, name, None)
    if fn is None or not kwargs:
        return fn
    return lambda x: fn(x, **kwargs)


def _native(op: str):
    """The library through ctypes (fungrad/lowering/cpu/fft.py), output preallocated."""
    import numpy as np

    from fungrad.lowering.cpu import fft as native
    from fungrad.lowering.cpu.threads import num_threads

    threads = num_threads()
    if op in ("fft", "fft0"):
        bufs = {}
        axis = OPS[op][1].get("axis", -1)

        def run(x):
            out = bufs.get(x.shape)
            if out is None:
                out = bufs[x.shape] = np.empty_like(x)
            return native.fft(x, out=out, threads=threads, axis=axis)

        return run
    if op != "rfft":
        return None

    def rfft(x):
        c = x.astype(np.complex64)
        native.fft(c, out=c, threads=threads)
        return c[..., : x.shape[-1] // 2 + 1]

    return rfft


def builders(op: str, fg, jax, scipy_fft):
    import numpy as np

    fnp_fft = getattr(fg.numpy, "fft", None)
    fg_fn = _op(fnp_fft, op) if fnp_fft is not None else None
    rows = [("fungrad jit", fg.jit(fg_fn) if fg_fn is not None else None)]
    rows.append(("fg native", _native(op)))
    rows.append(("numpy", _op(np.fft, op)))
    if scipy_fft is not None:
        rows.append(("scipy.fft", _op(scipy_fft, op)))
    if jax is not None:
        rows.append(("jax jit", jax.jit(_op(jax.numpy.fft, op))))
    return rows


def _block(out):
    if hasattr(out, "block_until_ready"):
        out.block_until_ready()
    return out


def _check(got, expected) -> float:
    """Relative error in the 2-norm against the float64 reference."""
    import numpy as np

    got = np.asarray(got).astype(np.complex128)
    if got.shape != expected.shape:
        raise ValueError(f"shape {got.shape}, expected {expected.shape}")
    return float(np.linalg.norm(got - expected) / np.linalg.norm(expected))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer, shorter repeats")
    p.add_argument("--only", default="", help=f"comma-separated subset of {', '.join(NAMES)}")
    p.add_argument("--cores", type=int, default=1, help="pin to N cores (0: no pinning)")
    args = p.parse_args(argv)
    only = [n for n in args.only.split(",") if n]
    unknown = sorted(set(only) - set(NAMES))
    if unknown:
        p.error(f"--only: unknown workload(s) {unknown}; choose from {', '.join(NAMES)}")
    cpus = pin_cores(args.cores)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")

    import numpy as np
    from jit_bench import _error_text, _fmt_time

    import fungrad as fg

    jax = optional("jax")
    scipy_fft = optional("scipy.fft")
    timing = dict(min_time=0.3, repeats=3) if args.quick else dict(min_time=1.0, repeats=5)
    print(
        f"FFT benchmark: cpus {cpus}, numpy {np.__version__}, "
        f"jax {jax.__version__ if jax else 'absent'}, timing {timing}"
    )
    failed = False
    summary = []
    for name, title, make, op, target in _cases():
        if only and name not in only:
            continue
        x = make()
        real_input = OPS[op][0].startswith("r")
        expected = _op(np.fft, op)(x.astype(np.float64 if real_input else np.complex128))
        tol = 8 * np.finfo(np.float32).eps * np.log2(x.shape[-1])
        rows = []
        for label, fn in builders(op, fg, jax, scipy_fft):
            row = {"label": label}
            rows.append(row)
            if fn is None:
                row["absent"] = True
                continue
            try:
                err = _check(_block(fn(x)), expected)
            except Exception as e:  # noqa: BLE001 - reported in the table
                row["error"] = _error_text(e)
                continue
            row["err"] = err
            if not err <= tol:
                row["error"] = f"WRONG RESULT: relative error {err:.3g} > {tol:.3g}"
                continue
            row["run"] = lambda fn=fn, x=x: _block(fn(x))
        live = [r for r in rows if "run" in r]
        for r, (best, median) in zip(live, timeit_interleaved([r["run"] for r in live], **timing)):
            r["time"], r["median"] = best, median
        failed |= any("error" in r for r in rows)
        ours = next((r for r in rows if "time" in r and r["label"].startswith("f")), None)
        print(f"\n[{name}] {title}   (relative error tolerance {tol:.2g}; target {target})")
        print(f"  {'implementation':<14}{'min':>12}{'median':>12}{'rel err':>11}{'ours/this':>11}")
        for r in rows:
            if r.get("absent"):
                print(f"  {r['label']:<14}absent")
            elif "error" in r:
                print(f"  {r['label']:<14}FAILED: {r['error']}")
            else:
                ratio = f"{ours['time'] / r['time']:.2f}" if ours else "-"
                print(
                    f"  {r['label']:<14}{_fmt_time(r['time']):>12}{_fmt_time(r['median']):>12}"
                    f"{r['err']:>11.2e}{ratio:>11}"
                )
        summary.append((name, ours, {r["label"]: r for r in rows}))
    print("\nSummary (ours: the jit row, else the native one; ratios below 1 = fungrad faster)")
    print(f"  {'workload':<12}{'ours':>11}{'numpy':>11}{'scipy':>11}{'JAX':>11}{'ours/JAX':>10}")
    for name, ours, by in summary:

        def cell(r):
            return _fmt_time(r["time"]) if r and "time" in r else "-"

        jx = by.get("jax jit")
        ratio = f"{ours['time'] / jx['time']:.2f}" if ours and jx and "time" in jx else "-"
        print(
            f"  {name:<12}{cell(ours):>11}{cell(by.get('numpy')):>11}"
            f"{cell(by.get('scipy.fft')):>11}{cell(jx):>11}{ratio:>10}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
