"""fungrad.profile() overhead on the W4 MLP training step (bench/jit_workloads.py's "mlp").

Prints the step time (median of rounds, each the mean of a batch of calls) of:
  plain      the ordinary build through the hot path, before any profile was opened;
  profiled   inside ``with fg.profile()``: the profiled build through the general path;
  after      the ordinary build again once the profile closed (the hot path restored);
and the profile's own table. The ordinary build contains no timing code (checked here: its
LLVM IR calls no fg_prof_* function), so ``after`` / ``plain`` should be 1.00 up to noise.

    python bench/profile_overhead.py [--rounds 30] [--batch 50]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import fungrad as fg  # noqa: E402
from bench.jit_workloads import MLP  # noqa: E402
from fungrad.profiler import profile  # noqa: E402


def _batch(step, args, batch: int) -> float:
    t = time.perf_counter()
    for _ in range(batch):
        step(*args)
    return (time.perf_counter() - t) / batch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--batch", type=int, default=20)
    a = ap.parse_args()
    step, args = MLP.build(fg)
    for _ in range(20):
        step(*args)
    ir = step.lower(*args).as_text()
    assert "fg_prof" not in ir, "the ordinary build holds timing code"
    before = _batch(step, args, a.batch * 5)
    with profile():
        step(*args)  # compiles the profiled build
    plain, profiled = [], []
    with profile() as prof:
        pass
    for _ in range(a.rounds):  # interleaved, so that load changes hit both alike
        plain.append(_batch(step, args, a.batch))
        with prof:
            profiled.append(_batch(step, args, a.batch))
    after = _batch(step, args, a.batch * 5)
    p, q = statistics.median(plain), statistics.median(profiled)
    ratio = statistics.median(b / a for a, b in zip(plain, profiled))
    print(
        f"W4 MLP step: plain {p * 1e6:.1f} us, profiled {q * 1e6:.1f} us "
        f"(median ratio {ratio:.3f}x); plain before any profile {before * 1e6:.1f} us, "
        f"after {after * 1e6:.1f} us"
    )
    print(prof.table())


if __name__ == "__main__":
    main()
