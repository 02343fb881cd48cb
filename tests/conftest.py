"""Test configuration: every eager primitive checks its impl against its abstract_eval, and
hypothesis runs a bounded number of examples without deadlines (the machine is noisy)."""

import os
import tempfile

import pytest
from hypothesis import HealthCheck, settings

import fungrad as fg

# Locally every run draws new examples (exploration); under CI (CI=true) the examples are
# derandomized, so a gating run is reproducible and a failure there is a real regression.
settings.register_profile(
    "default",
    max_examples=int(os.environ.get("FUNGRAD_HYPOTHESIS_EXAMPLES", "30")),
    deadline=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("default")

fg.config.update("check_impl_avals", True)

# Compiled objects from the tests go to a throwaway cache, never the user's ~/.cache/fungrad.
os.environ.setdefault("FUNGRAD_CACHE_DIR", tempfile.mkdtemp(prefix="fungrad-test-cache-"))


def pytest_addoption(parser):
    """``--fuzz-long``: run the differential fuzzer's long mode (tests/fuzz, docs/fuzzing.md)."""
    parser.addoption(
        "--fuzz-long",
        action="store_true",
        help="run tests/fuzz's long run (--fuzz-programs programs or --fuzz-seconds)",
    )
    parser.addoption("--fuzz-programs", type=int, default=5000)
    parser.addoption("--fuzz-seconds", type=float, default=None)


@pytest.fixture
def x64():
    """Run a test with enable_x64 on, restoring the previous value afterwards."""
    old = fg.config.enable_x64
    fg.config.update("enable_x64", True)
    try:
        yield
    finally:
        fg.config.update("enable_x64", old)


@pytest.fixture(scope="session")
def gpu():
    """The GPU runtime. Without an adapter the GPU tests skip with the reason, except under CI
    (``CI=true``), where they fail: CI installs Mesa's software Vulkan driver (dev.py)."""
    from fungrad.lowering.gpu import runtime as gpu_runtime

    try:
        return gpu_runtime.runtime()
    except gpu_runtime.GpuUnavailableError as e:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI must run the GPU tests, but: {e}")
        pytest.skip(str(e))


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A private, empty cache directory for one test (caching on)."""
    d = tmp_path / "fgcache"
    monkeypatch.setenv("FUNGRAD_CACHE_DIR", str(d))
    monkeypatch.delenv("FUNGRAD_DISABLE_CACHE", raising=False)
    monkeypatch.delenv("FUNGRAD_CACHE_MAX_BYTES", raising=False)
    return d
