"""Golden tests of the CPU renderer: the LLVM IR text (before LLVM's passes) rendered for a few
representative programs is compared with files under ``tests/golden/cpu/``, rendered for one
reference x86-64 host (``REFERENCE_FEATURES``) whatever the machine the tests run on.

A refactor of the renderer (``fungrad/lowering/cpu/``, ``lowering/render.py``) must leave this
text unchanged, so the kernels' speed is unchanged by construction; a change on purpose shows
up in review as a diff of the golden files. Regenerate them with
``FUNGRAD_UPDATE_GOLDEN=1 pytest tests/test_golden_llvm.py`` and read the diff before
committing it.
"""

import functools
import itertools
import json
import os
import pathlib
import platform
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.ir import passes
from fungrad.lowering import fusion
from fungrad.lowering.cpu import llvm
from fungrad.lowering.cpu.policy import CpuPolicy
from fungrad.lowering.kernel import Var

GOLDEN = pathlib.Path(__file__).parent / "golden" / "cpu"
UPDATE = os.environ.get("FUNGRAD_UPDATE_GOLDEN") == "1"

#: The host the golden files are rendered for: an x86-64 CPU with AVX-512. The renderer asks
#: the host's features (the math library's vector variants, vscalefps and vfpclassps, the gemm
#: library's register tile), so the files are rendered in a child process whose LLVM reports
#: these features whatever the machine: the same text on every x86-64 host (rendering only;
#: nothing compiled there runs).
REFERENCE_FEATURES = "+avx,+avx2,+avx512bw,+avx512dq,+avx512f,+avx512vl,+fma"


def _chain(x):
    return fnp.tanh(fnp.exp(x) * 0.5 + x)


def _softmax(x):
    return fg.nn.softmax(x, axis=-1)


def _column_sum(x):
    return fnp.sum(x, axis=0)


def _int_division(a, b):
    return a // b, a % b


def _matmul_bias(a, b, c):
    return a @ b + c


def _cumsum_scan(x):
    def step(carry, row):
        carry = carry + row
        return carry, carry

    return lax.scan(step, fnp.zeros(x.shape[1:], x.dtype), x)[1]


def _cond(p, x):
    return lax.cond(p, lambda v: fnp.sin(v), lambda v: v * 2.0, x)


def _while(x):
    return lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 1.5), (0, x))[1]


def _sort(x):
    return fnp.sort(x, axis=-1)


def _twin_updates(a, b, g):
    """Two kernels with the same body up to names (``a - 0.1 g`` and ``b - 0.1 sort(...)``),
    kept apart by the sort: the renderer defines the kernel once and calls it twice."""
    s = fnp.sort(a - 0.1 * g)
    return s, b - 0.1 * s


f32 = np.float32
CASES = {
    "chain_exp_tanh": (_chain, [np.zeros((1000,), f32)]),
    "softmax_rows": (_softmax, [np.zeros((64, 256), f32)]),
    "column_sum": (_column_sum, [np.zeros((300, 40), f32)]),
    "int_division": (_int_division, [np.zeros((37,), np.int32), np.ones((37,), np.int32)]),
    "matmul_bias_f32": (
        _matmul_bias,
        [np.zeros((32, 48), f32), np.zeros((48, 16), f32), np.zeros((16,), f32)],
    ),
    "cumsum_scan": (_cumsum_scan, [np.zeros((20, 8), f32)]),
    "cond": (_cond, [np.array(True), np.zeros((50,), f32)]),
    "while": (_while, [np.zeros((50,), f32)]),
    "sort": (_sort, [np.zeros((8, 100), f32)]),
    "twin_kernels": (_twin_updates, [np.zeros((2000,), f32)] * 3),
}


def render_text(fn, args) -> str:
    """The LLVM modules of ``fn`` at ``args`` as the CPU compiler receives them. Loop
    variables are numbered from 0 (their ids come from a process-wide counter, which is
    restored above every id handed out, so other programs' variables stay distinct)."""
    saved, Var._ids = Var._ids, itertools.count()
    try:
        closed = passes.optimize(fg.make_jaxpr(fn)(*args))
        parts = llvm.render(fusion.plan(closed, "main", policy=CpuPolicy()))
    finally:
        Var._ids = itertools.count(max(next(saved), next(Var._ids)))
    return "\n".join(
        f"; module {i}: level {p.opt_level}, passes {p.passes}\n{p.ir_text}"
        for i, p in enumerate(parts)
    )


@functools.cache
def _reference_texts() -> dict[str, str]:
    """{case: render_text(case)} rendered in a child process on the reference host."""
    script = textwrap.dedent(
        f"""
        import json, sys
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        from fungrad.lowering.cpu import llvm_capi
        llvm_capi.host_cpu_features = lambda: {REFERENCE_FEATURES!r}
        import test_golden_llvm as t
        print(json.dumps({{case: t.render_text(*t.CASES[case]) for case in t.CASES}}))
        """
    )
    env = dict(os.environ, FUNGRAD_DISABLE_CACHE="1")
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64"), reason="golden IR is for x86-64"
)
@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_llvm(case):
    text = _reference_texts()[case]
    path = GOLDEN / f"{case}.ll"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden file {path}: run with FUNGRAD_UPDATE_GOLDEN=1"
    assert text == path.read_text(), (
        f"the LLVM IR of {case} changed: compare with {path} (FUNGRAD_UPDATE_GOLDEN=1 "
        "rewrites it; check the diff is intended)"
    )


def test_render_is_deterministic():
    """Rendering twice in one process gives the same text, so the golden files do not
    depend on test order."""
    fn, args = CASES["cumsum_scan"]
    assert render_text(fn, args) == render_text(fn, args)


def test_every_kernel_op_has_llvm_code():
    """The LLVM kernel writer's op table covers the closed kernel-op set (``const``, ``idx``
    and ``reduce`` are rendered by the renderer base itself)."""
    from fungrad.lowering.cpu.kernel import KernelWriter
    from fungrad.lowering.kernel import OPS

    assert set(KernelWriter.code_for_op) == OPS - {"const", "idx", "reduce"}
