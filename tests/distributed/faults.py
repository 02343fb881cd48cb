"""Run under ``mpiexec -n N``: the faults a multi-process job must report instead of hanging.
``python faults.py OUT raise``: rank 1 raises while the others wait in a collective (the job
must abort, naming the rank). ``python faults.py OUT mismatch``: ranks pass psum operands of
different shapes (every rank gets a ValueError naming them; written to ``OUT/<rank>.txt``)."""

from __future__ import annotations

import os
import sys

import numpy as np

import fungrad as fg
from fungrad import lax


def main(out_dir: str, what: str):
    fg.distributed.initialize()
    rank = fg.process_index()
    if what == "raise":
        if rank == 1:
            raise RuntimeError("boom on purpose")
        fg.pmap(lambda v: lax.psum(v, "data"), axis_name="data")(np.ones((1, 2), np.float32))
        return
    if what == "mismatch":
        x = np.ones((1, 3 + rank), np.float32)
        try:
            with fg.disable_jit():
                fg.pmap(lambda v: lax.psum(v, "data"), axis_name="data")(x)
        except ValueError as e:
            msg = str(e)
        else:
            msg = "no error"
        with open(os.path.join(out_dir, f"{rank}.txt"), "w") as f:
            f.write(msg)
        return
    raise SystemExit(f"unknown fault {what!r}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
