"""Cutting a failing program down to a minimal one (delta debugging over its operations).

``shrink`` removes operations (with everything that reads them) in chunks, then one at a time,
then drops outputs, keeping each removal after which the same check still fails the same way
(a crash with the same exception type, or a mismatch). The long run uses it; under pytest,
hypothesis shrinks the choices that drew the program instead.
"""

from __future__ import annotations

from tests.fuzz.check import Checker, Failure
from tests.fuzz.program import Program


def signature(failure: Failure) -> tuple:
    """What must stay the same while shrinking: the check and, for a crash, the exception."""
    kind = (
        failure.message.split(":", 2)[1].strip()
        if failure.message.startswith("crash:")
        else "mismatch"
    )
    return failure.check, kind


def still_fails(checker: Checker, prog: Program, sig: tuple) -> Failure | None:
    try:
        failures = checker.run(prog, only=sig[0])
    except Exception:  # noqa: BLE001 - a program the reference cannot run is not smaller
        return None
    for f in failures:
        if signature(f) == sig:
            return f
    return None


def shrink(checker: Checker, failure: Failure, budget: int = 200) -> Failure:
    """A smaller program failing like ``failure`` (within ``budget`` re-runs)."""
    sig = signature(failure)
    best = failure
    tries = 0
    chunk = max(1, len(best.program.ops) // 2)
    while chunk >= 1 and tries < budget:
        i, progress = 0, False
        while i < len(best.program.ops) and tries < budget:
            candidate = best.program.without(set(range(i, min(i + chunk, len(best.program.ops)))))
            tries += 1
            found = still_fails(checker, candidate, sig) if candidate else None
            if found:
                best, progress = found, True
            else:
                i += chunk
        if not progress:
            chunk //= 2
    for out in best.program.outputs:
        if len(best.program.outputs) == 1 or tries >= budget:
            break
        candidate = Program(
            best.program.inputs,
            best.program.ops,
            (out,),
            best.program.x64,
            best.program.seed,
            best.program.special,
        )
        candidate = candidate.without(set())
        tries += 1
        found = still_fails(checker, candidate, sig) if candidate else None
        if found:
            best = found
            break
    return best
