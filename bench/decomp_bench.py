"""Matrix decompositions: fg.jit ``eigh``, ``svd``, ``qr`` and ``eigvals`` of a 256x256 float32
matrix against numpy, scipy and JAX's jit (issue 18).

Each result is checked before it is timed, against a float64 numpy reference, on quantities
that do not depend on the vectors' signs (eigen- and singular vectors, Q's columns and R's rows
are unique only up to sign): the eigenvalues and ``|v|``, the singular values and ``|u|``,
``|vt|``, ``|q|``, ``|r|``, and the sorted real parts, imaginary parts and moduli of general
eigenvalues (whose order is LAPACK's and may differ between runs of the same routine).
Timing, pinning and the table are bench/linalg_bench.py's (best of several alternating batches,
pinned to one core by default; ratios are fungrad's time over the other's, below 1 = fungrad
faster).

Run:  python bench/decomp_bench.py [--quick] [--only eigh,svd,qr,eigvals] [--cores N]
(with JAX: PYTHONPATH=. /path/to/jax-venv/bin/python bench/decomp_bench.py)
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))
from common import max_error, optional, pin_cores, timeit_interleaved  # noqa: E402
from linalg_bench import Case, _block, print_rows  # noqa: E402

NAMES = ("eigh", "svd", "qr", "eigvals")
N = 256


def _inputs(symmetric: bool):
    import numpy as np

    a = np.random.default_rng(3).standard_normal((N, N))
    return (((a + a.T) / 2) if symmetric else a).astype(np.float32)


def _canon(name: str, out):
    """The sign-free parts of a decomposition's result (see the module docstring)."""
    import numpy as np

    if name == "eigvals":
        w = np.asarray(out, np.complex128)
        return [np.sort(w.real), np.sort(w.imag), np.sort(np.abs(w))]
    out = [np.asarray(t, np.float64) for t in out]
    if name == "eigh":  # (w, v)
        return [out[0], np.abs(out[1])]
    return [np.abs(t) for t in out]


def cases() -> list[Case]:
    import numpy as np

    def ref(name):
        def run(a):
            a = np.asarray(a, np.float64)
            if name == "eigh":
                return _canon(name, np.linalg.eigh(a))
            if name == "svd":
                return _canon(name, np.linalg.svd(a))
            if name == "eigvals":
                return _canon(name, np.linalg.eigvals(a))
            return _canon(name, np.linalg.qr(a))

        return run

    return [
        Case("eigh", f"jit fnp.linalg.eigh, {N}x{N} float32", lambda: (_inputs(True),),
             ref("eigh"), 1e-3, 1e-3, "-"),
        Case("svd", f"jit fnp.linalg.svd, {N}x{N} float32", lambda: (_inputs(False),),
             ref("svd"), 1e-3, 1e-3, "-"),
        Case("qr", f"jit fnp.linalg.qr, {N}x{N} float32", lambda: (_inputs(False),),
             ref("qr"), 1e-3, 1e-3, "-"),
        Case("eigvals", f"jit fnp.linalg.eigvals, {N}x{N} float32", lambda: (_inputs(False),),
             ref("eigvals"), 1e-3, 1e-3, "-"),
    ]  # fmt: skip


def builders(name: str, fg, jax, scipy_linalg) -> list[tuple[str, object]]:
    """(label, function or None when absent) per implementation; fungrad first."""
    import numpy as np

    from fungrad.numpy import linalg_decomp  # eig/eigvals until numpy.linalg re-exports them

    fg_fn = getattr(fg.numpy.linalg, name, None) or getattr(linalg_decomp, name)
    rows = [("fungrad jit", fg.jit(fg_fn)), ("numpy", getattr(np.linalg, name))]
    if scipy_linalg is not None:
        sp = {
            "eigh": lambda a: scipy_linalg.eigh(a, check_finite=False),
            "svd": lambda a: scipy_linalg.svd(a, check_finite=False),
            "qr": lambda a: scipy_linalg.qr(a, mode="economic", check_finite=False),
            "eigvals": lambda a: scipy_linalg.eigvals(a, check_finite=False),
        }
        rows.append(("scipy", sp[name]))
    if jax is not None:
        rows.append(("jax jit", jax.jit(getattr(jax.numpy.linalg, name))))
    return rows


def prepare(case: Case, label: str, fn, args, expected) -> dict:
    """Run ``fn`` once and check its sign-free parts; a row with ``run`` and ``err``, or
    ``error``."""
    from jit_bench import _error_text

    row = {"label": label}
    try:
        got = _block(fn(*args))
        leaves = list(got) if isinstance(got, (tuple, list)) else [got]
        for t in leaves:
            _block(t)
        canon = _canon(case.name, got if case.name == "eigvals" else leaves)
        err, ok = max_error(canon, expected, case.rtol, case.atol)
        if not ok:
            row["error"] = f"WRONG RESULT: error {err:.3g}x the tolerance"
            return row
        row["err"] = err
        row["dtype"] = str(getattr(leaves[0], "dtype", "?"))
        row["run"] = lambda: (
            _block(fn(*args)) if case.name == "eigvals" else [_block(t) for t in fn(*args)]
        )
    except Exception as e:  # noqa: BLE001 - reported in the table, the other rows still run
        row["error"] = _error_text(e)
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer, shorter repeats")
    p.add_argument("--only", default="", help=f"comma-separated subset of {', '.join(NAMES)}")
    p.add_argument("--cores", type=int, default=1, help="pin to this many cores (0: none)")
    args = p.parse_args(argv)
    selected = [n for n in args.only.split(",") if n] or list(NAMES)
    unknown = sorted(set(selected) - set(NAMES))
    if unknown:
        p.error(f"--only: unknown workload(s) {unknown}; choose from {', '.join(NAMES)}")
    cpus = pin_cores(args.cores)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")

    import numpy as np

    import fungrad as fg

    jax = optional("jax")
    scipy_linalg = optional("scipy.linalg")
    timing = dict(min_time=0.3, repeats=3) if args.quick else dict(min_time=1.0, repeats=5)
    print(
        f"decomposition benchmark: cpus {cpus}, numpy {np.__version__}, "
        f"jax {jax.__version__ if jax else 'absent'}, timing {timing}"
    )
    failed = False
    for case in cases():
        if case.name not in selected:
            continue
        args_ = case.inputs()
        expected = case.reference(*args_)
        rows = [
            prepare(case, label, fn, args_, expected)
            for label, fn in builders(case.name, fg, jax, scipy_linalg)
        ]
        live = [r for r in rows if "run" in r]
        for r, (best, median) in zip(live, timeit_interleaved([r["run"] for r in live], **timing)):
            r["time"], r["median"] = best, median
        failed |= any("error" in r for r in rows)
        print_rows(case, rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
