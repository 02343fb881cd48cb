"""fg.jit on the CPU with numpy's BLAS and without it (a numpy that bundles no OpenBLAS).

Without BLAS, the CPU's policy (``fungrad/lowering/cpu/policy.py``) still plans a Gemm step for
every float32 product of one matrix, and its own gemm library runs it (on one core); float64
and batched products become loop kernels. This runs
a 512^2 float32 matmul and the MLP training step of bench/jit_workloads.py both ways in one
process: "blas" compiled as usual, "no blas" compiled (by a fresh jit) while
``blas.find_blas`` reports BLAS unavailable. Each result is checked against a float64 numpy
reference before it is timed; times are the best of interleaved batches; the ratio is the
no-BLAS time over the BLAS time. ``--gpu`` adds the same programs on the GPU (whose plans do
not depend on BLAS), where an adapter exists.

Run:  python bench/no_blas_bench.py [--cores N] [--gpu]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))
from common import max_error, pin_cores, timeit_interleaved  # noqa: E402

MATMUL_N = 512


@contextlib.contextmanager
def no_blas():
    """``blas.find_blas`` reports BLAS unavailable while compiling inside the block."""
    from fungrad.lowering.cpu import blas

    real = blas.find_blas
    blas.find_blas = lambda: blas.BlasInfo(reason="simulated: numpy without OpenBLAS")
    try:
        yield
    finally:
        blas.find_blas = real


def workloads():
    import numpy as np
    from jit_workloads import MLP, _f64

    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((MATMUL_N, MATMUL_N)).astype(np.float32) for _ in range(2))
    return [
        (
            f"matmul {MATMUL_N}^2 float32",
            lambda fw: fw.jit(lambda a, b: a @ b),
            (a, b),
            _f64(np.matmul),
            1e-4,
            2e-3,
        ),
        (MLP.title, MLP.program, MLP.inputs(), MLP.reference, MLP.rtol, MLP.atol),
    ]


def gemm_steps(fn, args, backend) -> int:
    """The number of Gemm steps in the plan ``fn`` compiles to (as ``jit`` would)."""
    import fungrad as fg
    from fungrad.ir import passes
    from fungrad.lowering import BACKENDS, fusion

    prog = fusion.plan(passes.optimize(fg.make_jaxpr(fn)(*args)), policy=BACKENDS[backend].policy())
    return sum(isinstance(s, fusion.Gemm) for s in prog.steps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", type=int, default=1, help="pin to N cores (0: all)")
    ap.add_argument("--gpu", action="store_true", help="also on the GPU, if an adapter exists")
    opts = ap.parse_args()
    cpus = pin_cores(opts.cores)
    import numpy as np

    import fungrad as fg
    from fungrad.lowering.cpu import blas

    print(
        f"no-BLAS bench: {len(cpus)} core(s); BLAS here: "
        f"{blas.find_blas().library_path or blas.find_blas().reason}"
    )
    backends = ["cpu"]
    if opts.gpu:
        from fungrad.lowering.gpu import runtime

        try:
            runtime.runtime()
            backends.append("gpu")
        except runtime.GpuUnavailableError as e:
            print(f"(no GPU: {e})")
    print(f"  {'workload':<44}{'backend':>8}{'gemms':>7}{'blas':>11}{'no blas':>11}{'ratio':>8}")
    for title, program, inputs, reference, rtol, atol in workloads():
        want = reference(*inputs)
        for backend in backends:
            runs, counts = [], []
            for simulated in (False, True):
                with no_blas() if simulated else contextlib.nullcontext():
                    raw = program(fg).__wrapped__  # the function the workload jits
                    f = fg.jit(raw, backend=backend)  # a fresh jit: compiled in this block
                    args = fg.tree_util.tree_map(fg.numpy.asarray, inputs)
                    counts.append(gemm_steps(raw, args, backend))
                    got = fg.tree_util.tree_map(np.asarray, f(*args))
                err, ok = max_error(got, want, rtol, atol)
                if not ok:
                    raise SystemExit(
                        f"{title} on {backend} ({'no ' * simulated}blas): wrong "
                        f"result, {err:.3g} of the tolerance"
                    )
                runs.append(lambda f=f, args=args: fg.block_until_ready(f(*args)))
            (t_blas, _), (t_none, _) = timeit_interleaved(runs)
            print(
                f"  {title[:43]:<44}{backend:>8}{counts[0]:>3}/{counts[1]:<3}"
                f"{t_blas * 1e3:>8.2f} ms{t_none * 1e3:>8.2f} ms{t_none / t_blas:>7.2f}x"
            )


if __name__ == "__main__":
    main()
