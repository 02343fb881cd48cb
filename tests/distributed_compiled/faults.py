"""Run under ``mpiexec -n 2``: GPU-jitted collectives over processes, staged through host memory
(a host step, no native MPI call), against numpy; then a jitted collective whose shapes differ
between the ranks is a ValueError at compile time naming the ranks (fungrad.distributed's hook
then aborts the job)."""

from __future__ import annotations

import numpy as np

import fungrad as fg
from fungrad import distributed, lax

distributed.initialize()
RANK = distributed.process_index()

with distributed.bind_process_axis("i"):
    x = np.arange(6, dtype=np.float32).reshape(2, 3) + RANK

    def step(x):
        s = lax.psum(x, "i")
        g = lax.all_gather(x, "i", axis=1, tiled=True)
        return s * lax.axis_index("i").astype(np.float32), g, lax.ppermute(x, "i", [(0, 1)])

    f = fg.jit(step, backend="gpu")
    s, g, p = f(x)
    xs = [np.arange(6, dtype=np.float32).reshape(2, 3) + r for r in range(2)]
    np.testing.assert_allclose(np.asarray(s), (xs[0] + xs[1]) * RANK)
    np.testing.assert_allclose(np.asarray(g), np.concatenate(xs, 1))
    np.testing.assert_allclose(np.asarray(p), xs[0] if RANK == 1 else np.zeros((2, 3)))
    text = f.lower(x).compile().as_text()
    assert "over process axis 'i' (host)" in text and "fg_MPI_" not in text, text
    print(f"rank {RANK}: gpu staged through host memory", flush=True)
    x = np.ones(3 + RANK, np.float32)  # rank 1 passes a longer operand
    fg.jit(lambda x: lax.psum(x, "i"))(x)
print(f"rank {RANK}: no error", flush=True)
