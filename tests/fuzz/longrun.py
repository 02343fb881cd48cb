"""The long fuzz run: programs from consecutive seeds until a count or a time limit, each
failure shrunk and written as a standalone repro script. ``python tools/fuzz.py --help``."""

from __future__ import annotations

import argparse
import collections
import json
import os
import time

import fungrad as fg
from tests.fuzz.check import Checker
from tests.fuzz.gen import RandomChooser, draw_program
from tests.fuzz.reduce import shrink, signature


def parse(argv=None):
    p = argparse.ArgumentParser(prog="tools/fuzz.py", description=__doc__)
    p.add_argument("--programs", type=int, default=1000, help="how many programs (default 1000)")
    p.add_argument("--seconds", type=float, default=None, help="stop after this long")
    p.add_argument("--start", type=int, default=0, help="first seed")
    p.add_argument("--out", default="fuzz-failures", help="where repro scripts go")
    p.add_argument("--no-gpu", action="store_true", help="skip the GPU checks")
    p.add_argument("--no-shrink", action="store_true", help="write failures as drawn")
    p.add_argument(
        "--against-jax",
        action="store_true",
        help="compare eager fungrad with JAX instead (a Python with jax installed, "
        "fungrad on PYTHONPATH)",
    )
    p.add_argument(
        "--x64",
        choices=["mixed", "on", "off"],
        default="mixed",
        help="draw x64 programs sometimes (mixed), always or never",
    )
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    fg.config.update("check_impl_avals", True)
    os.makedirs(args.out, exist_ok=True)
    if args.against_jax:
        from tests.fuzz.against_jax import JaxChecker

        checker = JaxChecker()
    else:
        checker = Checker(gpu=not args.no_gpu)
    x64 = {"mixed": None, "on": True, "off": False}[args.x64]
    seen: collections.Counter = collections.Counter()
    refused: collections.Counter = collections.Counter()
    failures = programs = 0
    t0 = time.time()
    log = open(os.path.join(args.out, "log.jsonl"), "a")
    for seed in range(args.start, args.start + args.programs):
        if args.seconds is not None and time.time() - t0 > args.seconds:
            break
        prog, builder = draw_program(RandomChooser(seed), seed, x64)
        refused.update(builder.refused)
        programs += 1
        found = list(checker.run(prog))
        for expr, exc in builder.crashes:
            log.write(
                json.dumps(
                    {"seed": seed, "check": "eager-draw", "expr": expr, "error": repr(exc)[:300]}
                )
                + "\n"
            )
            failures += 1
        for failure in found:
            failures += 1
            small = failure if args.no_shrink else shrink(checker, failure)
            key = (signature(small), small.program.source())
            seen[key] += 1
            if seen[key] > 1:
                continue
            path = os.path.join(args.out, f"{small.check}-{seed}.py")
            with open(path, "w") as fh:
                fh.write(small.repro())
            log.write(
                json.dumps(
                    {
                        "seed": seed,
                        "check": small.check,
                        "file": path,
                        "message": small.message[:500],
                    }
                )
                + "\n"
            )
            log.flush()
            print(f"seed {seed}: {small.check}: {small.message[:160]} -> {path}", flush=True)
        if programs % 100 == 0:
            print(f"{programs} programs, {failures} failures, {time.time() - t0:.0f} s", flush=True)
    log.close()
    print(
        f"done: {programs} programs (seeds {args.start}..{args.start + programs - 1}), "
        f"{failures} failures, {len(seen)} distinct, {time.time() - t0:.0f} s"
    )
    print("checks run:", dict(checker.stats.ran))
    print("skipped:", dict(checker.stats.skipped))
    print("known crashes:", dict(checker.stats.known))
    print("refused at draw time (top 10):")
    for what, n in refused.most_common(10):
        print(f"  {n:5d}  {what}")
    return 1 if failures else 0
