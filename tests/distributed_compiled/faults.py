"""Run under ``mpiexec -n 2``: a GPU-jitted collective over processes is a LoweringError naming
the limitation, then a jitted collective whose shapes differ between the ranks is a ValueError
at compile time naming the ranks (fungrad.distributed's hook then aborts the job)."""

from __future__ import annotations

import numpy as np

import fungrad as fg
from fungrad import distributed, lax
from fungrad.lowering import LoweringError

distributed.initialize()
RANK = distributed.process_index()

with distributed.bind_process_axis("i"):
    try:
        fg.jit(lambda x: lax.psum(x, "i"), backend="gpu")(np.ones(3, np.float32))
    except LoweringError as e:
        assert "process axis 'i'" in str(e) and "backend='cpu'" in str(e), str(e)
        print(f"rank {RANK}: gpu LoweringError", flush=True)
    x = np.ones(3 + RANK, np.float32)  # rank 1 passes a longer operand
    fg.jit(lambda x: lax.psum(x, "i"))(x)
print(f"rank {RANK}: no error", flush=True)
