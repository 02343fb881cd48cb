#!/usr/bin/env python3
"""Set up a development environment and run the demo or the tests.

    python3 dev.py demo    # create .venv, install fungrad + test deps, run examples/quickstart.py
    python3 dev.py test    # same setup (plus Mesa's software Vulkan driver where no Vulkan
                           # adapter exists and apt-get can install it), then the whole test
                           # suite (extra args go to pytest)
    python3 dev.py lint    # same setup, then ruff check, ruff format --check and the import
                           # contracts (lint-imports reads .importlinter)

Needs only Python >= 3.10 with pip. The virtual environment lives in .venv beside this file
and is reinstalled when pyproject.toml changes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / ".fungrad-installed"


def _venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _run(cmd, **kw) -> None:
    print("+", " ".join(map(str, cmd)), flush=True)
    subprocess.run(cmd, check=True, **kw)


#: Libraries built on JAX that tests/test_libraries.py runs through fungrad.compat, installed
#: without their dependencies (they require jax and jaxlib, which fungrad stands for; their
#: other dependencies are in pyproject's dev extra). Pinned: the test records their results.
LIBRARIES = ["flax==0.12.8", "optax==0.2.8", "chex==0.1.92"]


def setup() -> Path:
    """Create .venv (if needed) and install fungrad editable with its dev extra, and
    :data:`LIBRARIES` without their dependencies."""
    if sys.version_info < (3, 10):  # noqa: UP036  (dev.py may run under any Python)
        sys.exit(f"fungrad needs Python >= 3.10, this is {sys.version.split()[0]}")
    want = hashlib.sha256(
        (ROOT / "pyproject.toml").read_bytes() + " ".join(LIBRARIES).encode()
    ).hexdigest()
    py = _venv_python()
    if py.exists() and STAMP.exists() and STAMP.read_text() == want:
        return py
    if not py.exists():
        print(f"creating virtual environment in {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    _run([py, "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
    _run([py, "-m", "pip", "install", "--quiet", "-e", f"{ROOT}[dev]"])
    _run([py, "-m", "pip", "install", "--quiet", "--no-deps", *LIBRARIES])
    STAMP.write_text(want)
    return py


_PROBE = (
    "import wgpu\n"
    "print(any(a.info['backend_type'] == 'Vulkan' for a in "
    "wgpu.gpu.enumerate_adapters_sync()))"
)


def ensure_vulkan(py: Path) -> None:
    """The GPU tests need a Vulkan adapter. A machine without one (CI has no GPU) gets Mesa's
    software driver, lavapipe (Debian/Ubuntu package mesa-vulkan-drivers), when apt-get can
    install it; otherwise the GPU tests skip, or fail under CI=true."""
    probe = subprocess.run([py, "-c", _PROBE], capture_output=True, text=True)
    if probe.stdout.strip() == "True":
        return
    apt = shutil.which("apt-get")
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    if apt is None or not root:
        print(
            "note: no Vulkan adapter; install a Vulkan driver (e.g. mesa-vulkan-drivers) to "
            "run the GPU tests",
            flush=True,
        )
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    _run([apt, "-q", "update"], env=env, stdout=subprocess.DEVNULL)
    _run(
        [apt, "install", "-y", "-q", "--no-install-recommends", "mesa-vulkan-drivers"],
        env=env,
        stdout=subprocess.DEVNULL,
    )


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("demo", "test", "lint", "setup"):
        print(__doc__)
        return 2
    py = setup()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if argv[0] == "demo":
        return subprocess.call([py, ROOT / "examples" / "quickstart.py"], env=env, cwd=ROOT)
    if argv[0] == "lint":
        bin_ = py.parent
        for cmd in (
            [bin_ / "ruff", "check", "."],
            [bin_ / "ruff", "format", "--check", "."],
            [bin_ / "lint-imports"],
        ):
            print("+", " ".join(map(str, cmd)), flush=True)
            if subprocess.call(cmd, env=env, cwd=ROOT):
                return 1
        return 0
    if argv[0] == "test":
        ensure_vulkan(py)
        return subprocess.call([py, "-m", "pytest", *argv[1:]], env=env, cwd=ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
