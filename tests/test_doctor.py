"""``python -m fungrad doctor`` / ``fungrad.doctor.report()``, and the headless
XDG_RUNTIME_DIR message that GPU adapter enumeration used to print."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import numpy as np
import pytest

from fungrad import doctor
from fungrad.config import config
from fungrad.lowering.cpu import blas, lapack
from fungrad.lowering.gpu import runtime as gpu

XDG_LINE = "XDG_RUNTIME_DIR is invalid"


def _env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    env["FUNGRAD_CACHE_DIR"] = str(tmp_path / "cache")  # an empty cache: quick to inspect
    env.update(extra)
    return env


def _run(args, env, code="", timeout=120):
    cmd = [sys.executable, "-c", code] if code else [sys.executable, "-m", "fungrad", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def test_doctor_command_prints_every_section(tmp_path):
    p = _run(["doctor"], _env(tmp_path))
    assert p.returncode == 0, p.stderr
    for name in doctor.SECTIONS:
        assert f"[{name}]" in p.stdout
    assert f"numpy: {np.__version__}" in p.stdout
    assert f"python: {platform.python_version()}" in p.stdout
    assert "enable_x64: False" in p.stdout
    assert XDG_LINE not in p.stderr  # XDG_RUNTIME_DIR is unset in this child


def test_doctor_json_without_a_gpu(tmp_path):
    env = _env(tmp_path, FUNGRAD_GPU_ADAPTER="no-such-adapter-xyz", FUNGRAD_ENABLE_X64="1")
    p = _run(["doctor", "--json"], env)
    assert p.returncode == 0, p.stderr
    facts = json.loads(p.stdout)
    assert list(facts) == list(doctor.SECTIONS)
    assert facts["gpu"]["selected"] is None
    assert "matches no adapter" in facts["gpu"]["reason"]
    assert all(not a["used"] and a["why_not_used"] for a in facts["gpu"]["adapters"])
    assert facts["config"]["enable_x64"] is True
    assert facts["config"]["env"]["FUNGRAD_ENABLE_X64"] == "1"
    assert facts["cache"]["directory"] == str(tmp_path / "cache")
    assert not (tmp_path / "cache").exists()  # the doctor inspects, never creates


def test_command_line_usage_errors():
    from fungrad.__main__ import main

    assert main(["--help"]) == 0
    assert main([]) == 2
    assert main(["no-such-command"]) == 2
    assert doctor.main(["--bogus"]) == 2


def test_devices_prints_no_xdg_message_and_leaves_env_alone(tmp_path):
    code = (
        "import os, fungrad as fg\nfg.devices()\nprint(repr(os.environ.get('XDG_RUNTIME_DIR')))\n"
    )
    p = _run([], _env(tmp_path), code=code)
    assert p.returncode == 0, p.stderr
    assert XDG_LINE not in p.stderr
    assert p.stdout.strip() == "None"  # the private directory was only for the enumeration


def test_display_probe_env(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    with gpu._display_probe_env():
        private = os.environ["XDG_RUNTIME_DIR"]
        assert os.path.isdir(private) and os.listdir(private) == []
        assert os.stat(private).st_mode & 0o777 == 0o700
    assert "XDG_RUNTIME_DIR" not in os.environ and not os.path.exists(private)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # a usable one is kept
    with gpu._display_probe_env():
        assert os.environ["XDG_RUNTIME_DIR"] == str(tmp_path)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "missing"))  # restored afterwards
    with gpu._display_probe_env():
        assert os.environ["XDG_RUNTIME_DIR"] != str(tmp_path / "missing")
    assert os.environ["XDG_RUNTIME_DIR"] == str(tmp_path / "missing")


def test_report_facts(tmp_path, monkeypatch):
    monkeypatch.setenv("FUNGRAD_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("FUNGRAD_NUM_THREADS", raising=False)
    (tmp_path / "a.fgo").write_bytes(b"x" * 10)
    (tmp_path / "b.fgo").write_bytes(b"y" * 5)
    (tmp_path / "other.txt").write_bytes(b"z" * 100)
    os.chmod(tmp_path, 0o700)
    facts = doctor.report()
    assert list(facts) == list(doctor.SECTIONS)
    assert not any("error" in section for section in facts.values()), facts
    assert facts["versions"]["numpy"] == np.__version__
    assert facts["threads"]["num_threads"] == len(os.sched_getaffinity(0))
    assert facts["threads"]["source"] == "CPU affinity"
    b = blas.find_blas()
    assert facts["blas"]["available"] == b.available
    assert facts["blas"]["library"] == b.library_path
    c = facts["cache"]
    assert (c["entries"], c["bytes"], c["mode"]) == (2, 15, "700")
    assert c["owned_by_you"] and not c["writable_by_others"]
    assert facts["config"]["enable_x64"] == config.enable_x64
    assert facts["config"]["debug_nans"] == config.debug_nans
    text = doctor.format_report(facts)
    assert text.startswith("[versions]\n") and "[cache]\n" in text


def test_report_thread_override_and_shared_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("FUNGRAD_NUM_THREADS", "3")
    monkeypatch.setenv("FUNGRAD_CACHE_DIR", str(tmp_path))
    os.chmod(tmp_path, 0o777)
    facts = doctor.report()
    assert facts["threads"] == {
        "num_threads": 3,
        "source": "FUNGRAD_NUM_THREADS",
        "os_cpu_count": os.cpu_count(),
    }
    assert facts["cache"]["writable_by_others"] and "private" in facts["cache"]["note"]


def test_missing_parts_are_reported_not_raised(monkeypatch):
    monkeypatch.setattr(blas, "find_blas", lambda: blas.BlasInfo(reason="no BLAS here"))
    monkeypatch.setattr(
        lapack, "find_lapack", lambda: lapack.LapackInfo(reason="no BLAS library: no BLAS here")
    )

    def no_wgpu():
        raise gpu.GpuUnavailableError("backend='gpu' needs the wgpu package")

    monkeypatch.setattr(gpu, "_wgpu", no_wgpu)
    monkeypatch.setitem(doctor._GATHER, "threads", lambda: 1 / 0)
    facts = doctor.report()
    assert facts["blas"]["available"] is False and facts["blas"]["reason"] == "no BLAS here"
    assert facts["blas"]["lapack"]["available"] is False
    assert facts["gpu"] == {
        "adapters": [],
        "selected": None,
        "reason": "backend='gpu' needs the wgpu package",
    }
    assert facts["threads"] == {"error": "ZeroDivisionError: division by zero"}
    assert facts["versions"]["numpy"] == np.__version__  # the rest is still there
    assert "[threads]\n  error: ZeroDivisionError" in doctor.format_report(facts)


@pytest.mark.parametrize("want", ["", "no-such-adapter-xyz"])
def test_gpu_section_matches_the_runtime_choice(monkeypatch, want):
    monkeypatch.setenv("FUNGRAD_GPU_ADAPTER", want)
    found = gpu.adapters()
    g = doctor.report()["gpu"]
    assert [a["description"] for a in g["adapters"]] == [gpu.describe(a.info) for a in found]
    try:
        chosen = found.index(gpu.select_adapter())
    except gpu.GpuUnavailableError:
        chosen = None
    assert g["selected"] == chosen
    for a in g["adapters"]:
        assert a["used"] == (a["index"] == chosen)
        assert (a["why_not_used"] is None) == a["used"]
