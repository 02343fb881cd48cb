"""The device scripts of bench/ (run once per lent GPU machine, issue 23) still run: each in its
``--quick`` mode on this machine's adapter (lavapipe in CI), every result recorded and none
wrong. A script broken by a change elsewhere (a renamed tuning constant, a new signature) is
found here, not on the device, whose minutes are few."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("gpu")

ROOT = Path(__file__).resolve().parent.parent


def _run(args: list[str], out: Path, **env: str) -> str:
    """stdout of ``python <args>`` from the repository root, results under ``out``."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    full = dict(os.environ, OUT=str(out), PYTHONPATH=path, **env)
    p = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=full, capture_output=True, text=True, timeout=300
    )
    text = p.stdout + p.stderr
    assert p.returncode == 0 and "Traceback" not in text, text[-3000:]
    return p.stdout


def _rows(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert rows, f"{path.name} is empty"
    return rows


def _assert_clean(rows: list[dict], allowed_error: str | None = None) -> None:
    """No row records an error (but ``allowed_error``, a setting the adapter rejects by
    design) or a result that disagreed with its reference."""
    bad = [
        r
        for r in rows
        if ("error" in r and (allowed_error is None or allowed_error not in r["error"]))
        or r.get("ok") is False
        or r.get("exact") is False
    ]
    assert not bad, bad[:3]


def test_gpu_device_env_bench_and_gemm_sweep(tmp_path):
    for section in ("env", "bench"):
        _run(["bench/gpu_device.py", section, "--quick"], tmp_path)
    _run(["bench/gpu_device.py", "sweep", "--quick"], tmp_path, GD_SWEEPS="gemm")
    assert "WRONG RESULTS: 0" in _run(["bench/gpu_device.py", "summary"], tmp_path)
    rows = _rows(tmp_path / "results.jsonl")
    assert {r["section"] for r in rows} >= {"env", "bench", "sweep"}
    assert any(r.get("name") == "gemm_best" for r in rows)
    _assert_clean(rows, allowed_error="stops an invocation's loops")


@pytest.mark.parametrize(
    "script, args, results",
    [
        ("gpu_device_chain.py", [], "chain.jsonl"),
        ("gpu_device_math.py", [], "math.jsonl"),
        ("gpu_device_dispatch.py", ["--only", "mlp", "--only", "matmul"], "dispatch.jsonl"),
    ],
)
def test_gpu_device_scripts_run_quick_and_record_clean_results(tmp_path, script, args, results):
    _run([f"bench/{script}", "--quick", *args], tmp_path)
    _assert_clean(_rows(tmp_path / results))
