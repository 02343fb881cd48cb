"""The rendered text of every math function stays the same: a hash per function, dtype and
rendering (LLVM prelude, large-argument library, the division helper; WGSL function and
inlined statements, with and without a fused fma), compared with
``tests/golden/math/render_hashes.json``.

A refactor of ``fungrad/lowering/math/`` must leave these texts byte-identical, so accuracy
and speed are unchanged by construction; a change on purpose shows up as changed hashes (with
the function named). Regenerate with ``FUNGRAD_UPDATE_GOLDEN=1 pytest
tests/test_math_render_stable.py`` and check the new texts against the ulp/exact tests.

The host-dependent choices of the LLVM builder (``llvm.ldexp`` on AVX-512, the division
helper's vector widths and its fpclass test) are pinned, so the hashes hold on every host.
"""

import hashlib
import json
import os
import pathlib

import pytest

from fungrad.lowering.math import llvm as llvm_math
from fungrad.lowering.math import wgsl as wgsl_math

GOLDEN = pathlib.Path(__file__).parent / "golden" / "math" / "render_hashes.json"
UPDATE = os.environ.get("FUNGRAD_UPDATE_GOLDEN") == "1"
LARGE = ("sin", "cos", "tan")


@pytest.fixture
def pinned_host(monkeypatch):
    """The LLVM builder as on a host without AVX-512 (two-step ldexp, 4 and 8 lanes)."""
    monkeypatch.setattr(llvm_math, "_vector_ldexp", lambda: False)
    monkeypatch.setattr(llvm_math, "_fpclass_test", lambda: False)
    monkeypatch.setattr(llvm_math, "_divide_lanes", lambda: (4, 8))
    llvm_math._define.cache_clear()
    yield
    llvm_math._define.cache_clear()


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _rendered() -> dict[str, str]:
    out = {}
    for dtype in ("float32", "float64"):
        suffix = "f32" if dtype == "float32" else "f64"
        for name in sorted(llvm_math.MATH_FUNCTIONS):
            out[f"llvm/{name}/{dtype}"] = llvm_math.prelude([dtype], [name])
            if name in llvm_math.BRANCHING:
                out[f"llvm/{name}/{dtype}/shared_large"] = llvm_math.prelude(
                    [dtype], [name], declare_intrinsics=False, shared_large=True
                )
        for name in LARGE:
            out[f"llvm/{name}_large/{dtype}/library"] = llvm_math.large_library_ir(
                f"fg_{name}_large_{suffix}"
            )
    out["llvm/divide"] = llvm_math.prelude(["float32"], [], helpers=[llvm_math.DIVIDE])
    out["llvm/divide/lines"] = "\n".join(
        [
            *llvm_math.divisor_lines("%y", "%rf", "%s"),
            llvm_math.divide_call("%q", "%x", "%y", "%rf", "%s"),
        ]
    )
    for name in sorted(llvm_math.MATH_FUNCTIONS):
        for fused in (True, False):
            fn, defs = wgsl_math.function(name, fused)
            out[f"wgsl/{name}/fused={fused}"] = "\n".join([fn, *(f"{k}\n{t}" for k, t in defs)])
            inlined = wgsl_math.inline(name, ["x", "y"], "p", fused, zero="z")
            if inlined is not None:
                out[f"wgsl/{name}/fused={fused}/inline"] = repr(inlined)
    return out


@pytest.mark.usefixtures("pinned_host")
def test_rendered_math_is_unchanged():
    got = {key: _digest(text) for key, text in _rendered().items()}
    if UPDATE:
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    assert GOLDEN.exists(), f"no golden file {GOLDEN}: run with FUNGRAD_UPDATE_GOLDEN=1"
    want = json.loads(GOLDEN.read_text())
    changed = sorted(k for k in want.keys() & got.keys() if want[k] != got[k])
    assert not changed, f"rendered text changed for {changed}"
    assert sorted(got.keys() - want.keys()) == [], "new renderings: regenerate the golden file"
    assert sorted(want.keys() - got.keys()) == [], "renderings gone: regenerate the golden file"
