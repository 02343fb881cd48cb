"""Collectives over processes compiled into CPU code (``lowering/collectives.py``,
``lowering/cpu/mpi.py``): real MPI jobs (``mpiexec -n 2`` and ``-n 4``, oversubscribed on small
hosts) run tests/distributed_compiled/collectives.py, where every rank checks each jitted
collective (every dtype family, groups, layouts), a step with several collectives, gradients,
collectives in loop bodies and the native MPI calls in the compiled program against numpy on all
ranks' inputs; faults.py checks GPU-jitted collectives (staged through host memory) and the
shape check across ranks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parent
SCRIPTS = HERE / "distributed_compiled"

pytest.importorskip("mpi4py", reason="mpi4py is not installed (pip install fungrad[distributed])")
MPIEXEC = Path(sys.executable).parent / "mpiexec"
if not MPIEXEC.exists():
    pytest.skip(
        "no mpiexec next to the Python interpreter (pip install mpich)", allow_module_level=True
    )


def mpirun(n: int, script: str, timeout: int = 120) -> subprocess.CompletedProcess:
    """``mpiexec -n n python script`` (one thread per rank: the ranks share the cores)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", FUNGRAD_NUM_THREADS="1")
    cmd = [str(MPIEXEC), "-n", str(n), sys.executable, str(SCRIPTS / script)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


def _every_rank_passes(n: int, script: str, at_least: int) -> None:
    """Run ``script`` on ``n`` ranks: it exits 0 and every rank reports at least ``at_least``
    checks passed."""
    p = mpirun(n, script)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    passed = re.findall(r"rank (\d+): (\d+) checks passed", out)
    assert sorted(int(r) for r, _ in passed) == list(range(n)), out[-4000:]
    assert all(int(k) >= at_least for _, k in passed), passed


@pytest.mark.parametrize("n", [2, 4])
def test_compiled_collectives_match_numpy(n):
    _every_rank_passes(n, "collectives.py", 100)


def test_gpu_staging_and_shape_mismatch_across_ranks():
    p = mpirun(2, "faults.py")
    out = p.stdout + p.stderr
    assert p.returncode != 0, out[-4000:]
    for r in (0, 1):
        assert f"rank {r}: gpu staged through host memory" in out, out[-4000:]
    assert "psum: the processes pass operands of different shapes" in out, out[-4000:]
    assert "float32[3]" in out and "float32[4]" in out, out[-4000:]
    assert "no error" not in out


@pytest.mark.parametrize("n", [2, 4])
def test_hot_path_under_process_axes_and_constant_collectives(n):
    """dispatch.py: jit's hot path under a process axis (and under another binding of the same
    name, and none), collectives on constant operands (on every rank, or on rank 0 only)."""
    _every_rank_passes(n, "dispatch.py", 56)


def test_constant_folding_knows_every_collective():
    """ir.passes.COLLECTIVES (never folded: they communicate) names every collective primitive
    lax defines and every one the process-axis lowering handles."""
    import fungrad  # noqa: F401  (registers lax's collectives)
    from fungrad.ir.passes import COLLECTIVES
    from fungrad.lowering import collectives
    from fungrad.transforms.vmap import collective_axes

    assert {p.name for p in collective_axes} == COLLECTIVES
    assert set(collectives._RULES) == COLLECTIVES
