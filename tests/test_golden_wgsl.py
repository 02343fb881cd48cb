"""Golden tests of the WGSL the GPU backend renders (no GPU needed).

A handful of representative programs (an elementwise chain, softmax rows, a tree-reduced sum,
a matmul and a split-K matmul, a blocked cumulative sum, rank and bitonic sorts, a scatter-add,
a while loop holding a cond) are compiled with a stand-in runtime whose adapter properties
are fixed (fused fma, llvmpipe's loop limit, a CPU adapter, 8 storage buffers), and the text
of every dispatch is compared with the files under ``tests/golden/gpu/``. A renderer change
shows up there, line by line, in review; when the change is meant, regenerate them with
``FUNGRAD_UPDATE_GOLDEN=1 pytest tests/test_golden_wgsl.py`` and commit the new files.
"""

from __future__ import annotations

import os
import pathlib
import re

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.lowering import compile_jaxpr
from fungrad.lowering.gpu import runtime as gpu_runtime

GOLDEN = pathlib.Path(__file__).parent / "golden" / "gpu"


class _Handle:
    """What the stand-in runtime hands out for a buffer or a pipeline: nothing to run."""

    buffer = None


class _FixedRuntime:
    """A runtime with fixed adapter properties that renders but never touches a device."""

    name = "golden (fixed adapter)"
    fused_fma = True
    inexact_division = False
    loop_limit = 65535
    cpu_adapter = True
    max_bindings = 8
    max_binding_bytes = 1 << 27

    def upload(self, value):
        return _Handle()

    def pipeline(self, name, source):
        return _Handle()


def _f32(*shape):
    return np.zeros(shape, np.float32)


def _elementwise(x):
    return fnp.exp(fnp.tanh(x) * 2.0) + 1.0


def _softmax(x):
    e = fnp.exp(x - fnp.max(x, axis=1, keepdims=True))
    return e / fnp.sum(e, axis=1, keepdims=True)


def _while_cond(x):
    def body(c):
        i, v = c
        v = fg.lax.cond(i % 2 == 0, lambda u: u * 2.0, lambda u: u - 1.0, v)
        return i + 1, v

    return fg.lax.while_loop(lambda c: c[0] < 5, body, (0, x))[1]


#: name -> (function, example arguments, environment)
PROGRAMS = {
    "elementwise": (_elementwise, (_f32(1000),), {}),
    "softmax_rows": (_softmax, (_f32(8, 128),), {}),
    "tree_sum": (fnp.sum, (_f32(5000),), {"FUNGRAD_GPU_TREE_REDUCE": "always"}),
    "matmul": (fnp.matmul, (_f32(64, 96), _f32(96, 80)), {}),
    "matmul_split_k": (fnp.matmul, (_f32(2, 70000), _f32(70000, 3)), {}),
    "cumsum_blocks": (
        lambda x: fnp.cumsum(x, axis=1),
        (_f32(3, 1200),),
        {"FUNGRAD_GPU_SCAN": "always"},
    ),
    "sort_rank": (lambda x: fnp.sort(x, axis=1), (_f32(4, 16),), {}),
    "sort_bitonic": (lambda x: fnp.sort(x, axis=1), (_f32(3, 1500),), {}),
    "scatter_add": (
        lambda x, i, v: x.at[i].add(v),
        (_f32(100), np.zeros(40, np.int32), _f32(40)),
        {},
    ),
    "while_cond": (_while_cond, (_f32(32),), {}),
}


def render(name: str, monkeypatch) -> str:
    """Every shader of program ``name`` as one text (its dispatch grid, bindings and loop
    bound above each)."""
    f, args, env = PROGRAMS[name]
    monkeypatch.setattr(gpu_runtime, "runtime", _FixedRuntime)
    for var in ("FUNGRAD_GPU_TREE_REDUCE", "FUNGRAD_GPU_SCAN"):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    args = [fnp.asarray(a) for a in args]
    exe = compile_jaxpr(fg.make_jaxpr(f)(*args), "gpu", name)
    text = "".join(
        f"// shader {s.name}: grid {list(s.grid)}, bindings {s.bindings}, "
        f"loop_iterations {s.loop_iterations}\n{s.source}\n"
        for s in exe.shaders
    )
    return _normalise(text)


def _normalise(text: str) -> str:
    """``text`` with the loop variables ``v<id>`` (ids from a process-wide counter) renumbered
    in order of first appearance."""
    ids: dict[str, str] = {}
    return re.sub(r"\bv\d+\b", lambda m: ids.setdefault(m.group(), f"v{len(ids)}"), text)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_rendered_wgsl_matches_the_golden_text(name, monkeypatch):
    text = render(name, monkeypatch)
    path = GOLDEN / f"{name}.wgsl"
    if os.environ.get("FUNGRAD_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} is missing: run with FUNGRAD_UPDATE_GOLDEN=1 to write it"
    want = path.read_text()
    assert text == want, (
        f"the WGSL of {name!r} changed; if that is meant, regenerate "
        "with FUNGRAD_UPDATE_GOLDEN=1 and review the diff"
    )


def test_rendering_is_deterministic(monkeypatch):
    """Two compilations of one program give the same text (names do not depend on what
    was compiled before)."""
    assert render("softmax_rows", monkeypatch) == render("softmax_rows", monkeypatch)


def test_every_kernel_op_has_wgsl_code():
    """The WGSL shader's op table covers the closed kernel-op set: ``const``, ``idx`` and
    ``reduce`` are rendered by the renderer base, ``load``/``select``/``convert``/``bitcast``
    by the shader itself (they need its slots and type map), every other op by the table."""
    from fungrad.lowering.gpu.shader import KernelShader
    from fungrad.lowering.kernel import OPS

    structural = {"const", "idx", "reduce", "load", "select", "convert", "bitcast"}
    assert set(KernelShader.code_for_op) == OPS - structural
