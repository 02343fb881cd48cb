"""``tools/fuzz.py --against-jax``: eager fungrad against JAX on the same program source.

Needs a Python with jax installed and fungrad on ``PYTHONPATH``; never imported by the tests.
The program's source runs twice: with fungrad's modules (the reference of the other checks) and
with JAX's under the same names (``fnp`` -> ``jax.numpy``, ``lax`` -> ``jax.lax``, ``nn`` ->
``jax.nn``, ``special`` -> ``jax.scipy.special``, ``fg`` -> ``jax``). Results are compared
like jit's against eager (tests/fuzz/check.py), so what this finds are semantic differences of
fungrad's eager primitives (and their numpy impls) from JAX's documented behaviour.
"""

from __future__ import annotations

import numpy as np

from tests.fuzz.check import Checker, Failure, compare_all, crash_message, has_denormals, reference
from tests.fuzz.program import Program

JAX_PRELUDE = """\
import numpy as np
import jax
import jax.lax as lax
import jax.nn as nn
import jax.numpy as fnp
import jax.scipy.special as special
fg = jax
nan, inf = float("nan"), float("inf")
"""


def flush_denormals(v: np.ndarray) -> np.ndarray:
    if not np.issubdtype(v.dtype, np.floating):
        return v
    tiny = np.finfo(v.dtype).tiny
    return np.where(np.abs(v) < tiny, np.copysign(np.zeros_like(v), v), v)


class JaxChecker(Checker):
    """Runs each program eagerly in fungrad and in JAX (CPU) and compares."""

    def __init__(self):
        super().__init__(gpu=False, grad=False, vmap=False)
        import jax

        self.jax = jax
        jax.config.update("jax_platforms", "cpu")

    def run(self, prog: Program, only=None) -> list[Failure]:
        # XLA's CPU backend flushes denormals to zero (inputs and results): an
        # implementation-defined choice, so inputs are flushed for both and results compared
        # with an absolute tolerance of the smallest normal float.
        values = [flush_denormals(v) for v in prog.input_values("special")]
        try:
            ref, shadow, slacks, env = reference(prog, values)
        except Exception as e:  # noqa: BLE001
            return [Failure("eager", "crash: " + crash_message(e), prog)]
        if any(has_denormals(v) for v in env.values()):
            self.stats.count(self.stats.skipped, "jax: denormal values (XLA's CPU flushes them)")
            return []
        self.jax.config.update("jax_enable_x64", prog.x64)
        namespace: dict = {}
        exec(JAX_PRELUDE, namespace)
        exec(compile(prog.source(), "<jax program>", "exec"), namespace)
        self.stats.count(self.stats.ran, "jax")
        try:
            with np.errstate(all="ignore"):
                got = [
                    np.asarray(o)
                    for o in namespace["f"](*[namespace["fnp"].asarray(v) for v in values])
                ]
        except Exception as e:  # noqa: BLE001 - JAX refusing what fungrad accepts is a finding
            return [Failure("jax", "JAX raises but fungrad does not: " + crash_message(e), prog)]
        msg = compare_all(prog, got, ref, shadow, slacks, gpu=True)
        if msg:
            msg = msg.replace("got", "JAX").replace("eager", "fungrad eager")
            return [Failure("jax", msg, prog)]
        return []
