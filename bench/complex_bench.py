"""Complex programs under jit (the complex split): fg.jit against numpy and JAX's jit.

Workloads on complex64: ``x*y + x``, ``x/y``, ``exp``, ``log``, ``sqrt``, ``abs`` and
``sum(x*y)`` over 2^20 values, a 256x256 matrix product, and the call overhead of a 4-element
``v * 2`` (against the same function of float32, which shows what the complex boundary costs).

Every result is checked against a complex128 numpy reference (error relative to its
largest magnitude at most 1e-5) before it is timed; a wrong result is reported, never timed.
Times are the best of several alternating batches; pinned to one core by default. Ratios are
fungrad's time over the other's (below 1 = fungrad faster). JAX is optional.

Run:  python bench/complex_bench.py [--cores N]
(with JAX: PYTHONPATH=. /path/to/jax-venv/bin/python bench/complex_bench.py)
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))
from common import optional, pin_cores, timeit_interleaved  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cores", type=int, default=1, help="CPUs to pin to (0: all)")
    args = parser.parse_args()
    cpus = pin_cores(args.cores)

    import numpy as np

    import fungrad as fg
    import fungrad.numpy as fnp

    jax = optional("jax")
    jnp = optional("jax.numpy") if jax else None
    rng = np.random.default_rng(0)

    def c(*shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)

    n = 1 << 20
    x, y = c(n), c(n)
    a, b = c(256, 256), c(256, 256)
    cases = [  # (title, the function written for a numpy-like module m, arguments)
        ("x*y + x, 2^20", lambda m: lambda u, v: u * v + u, (x, y)),
        ("x / y, 2^20", lambda m: lambda u, v: u / v, (x, y)),
        ("exp, 2^20", lambda m: m.exp, (x,)),
        ("log, 2^20", lambda m: m.log, (x,)),
        ("sqrt, 2^20", lambda m: m.sqrt, (x,)),
        ("abs, 2^20", lambda m: m.abs, (x,)),
        ("sum(x*y), 2^20", lambda m: lambda u, v: m.sum(u * v), (x, y)),
        ("matmul 256", lambda m: lambda u, v: u @ v, (a, b)),
    ]
    print(f"complex64 under jit, pinned to CPUs {cpus}; fungrad/other time ratios\n")
    head = ("workload", "fungrad", "numpy", "JAX", "/numpy", "/JAX")
    print("{:18s} {:>10s} {:>10s} {:>10s} {:>7s} {:>6s}".format(*head))
    for title, make, inputs in cases:
        ref = make(np)
        want = ref(*[np.asarray(i, np.complex128) for i in inputs])
        fargs = [fnp.asarray(i) for i in inputs]
        fj = fg.jit(make(fnp))
        got = np.asarray(fj(*fargs)).astype(np.complex128)  # (common.max_error is real)
        err = float(np.max(np.abs(got - want), initial=0)) / float(np.max(np.abs(want)))
        if not err <= 1e-5:
            print(f"{title:18s} WRONG (error {err:.3g})")
            continue
        fns = [lambda fj=fj, a=fargs: fj(*a), lambda ref=ref, a=inputs: ref(*a)]
        if jax:
            jj = jax.jit(make(jnp))
            jargs = [jnp.asarray(i) for i in inputs]
            fns.append(lambda jj=jj, a=jargs: jj(*a).block_until_ready())
        times = [t for t, _ in timeit_interleaved(fns)]
        jt = f"{times[2] * 1e3:8.3f}ms" if jax else "    absent"
        jr = f"{times[0] / times[2]:6.2f}" if jax else "     -"
        print(
            f"{title:18s} {times[0] * 1e3:8.3f}ms {times[1] * 1e3:8.3f}ms {jt} "
            f"{times[0] / times[1]:7.2f} {jr}"
        )
    z4, r4 = fnp.asarray(c(4)), fnp.asarray(np.ones(4, np.float32))
    fz, fr = fg.jit(lambda v: v * 2), fg.jit(lambda v: v * 2)
    tz, tr = (t for t, _ in timeit_interleaved([lambda: fz(z4), lambda: fr(r4)]))
    print(f"\ncall of v * 2 on 4 values: complex64 {tz * 1e6:.2f} us, float32 {tr * 1e6:.2f} us")


if __name__ == "__main__":
    main()
