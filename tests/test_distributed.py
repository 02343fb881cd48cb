"""fungrad.distributed: real multi-process MPI jobs (``mpiexec -n 2`` and ``-n 4``, launched
from here, oversubscribed on small hosts) running every collective over a multi-process pmap's
axis, their derivatives, vmap and scan inside the pmap, faults, and a data-parallel training run
(examples/data_parallel.py) equal to one process on the global batch. Each job writes its
ranks' results; this file checks them against numpy on the gathered inputs
(tests/distributed/_data.py rebuilds every rank's input)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "distributed"))

from _data import DTYPES, local  # noqa: E402

pytest.importorskip("mpi4py", reason="mpi4py is not installed (pip install fungrad[distributed])")
MPIEXEC = Path(sys.executable).parent / "mpiexec"
if not MPIEXEC.exists():
    pytest.skip(
        "no mpiexec next to the Python interpreter (pip install mpich)", allow_module_level=True
    )

TIMEOUT = 120


def mpirun(n: int, script: str, *args, timeout=TIMEOUT) -> subprocess.CompletedProcess:
    """``mpiexec -n n python script args`` (oversubscribed, one thread per rank)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", FUNGRAD_NUM_THREADS="1")
    cmd = [str(MPIEXEC), "-n", str(n), sys.executable, str(script), *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


def _collective_results(n: int, mode: str, tmp: Path) -> list[dict]:
    p = mpirun(n, HERE / "distributed" / "collectives.py", tmp, mode)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return [dict(np.load(tmp / f"{mode}_{r}.npz")) for r in range(n)]


@pytest.fixture(
    scope="module",
    params=[(2, "eager"), (4, "eager"), (2, "jit"), (4, "jit")],
    ids=["n2-eager", "n4-eager", "n2-jit", "n4-jit"],
)
def job(request, tmp_path_factory):
    n, mode = request.param
    return n, _collective_results(n, mode, tmp_path_factory.mktemp(f"{mode}{n}"))


def _tol(dt):
    return {"float16": 1e-2, "float32": 1e-5}.get(np.dtype(dt).name, 1e-12)


def close(actual, expected, dt="float32"):
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    t = _tol(dt)
    np.testing.assert_allclose(
        actual.astype(np.float64), expected.astype(np.float64), rtol=t, atol=t
    )


def test_reductions_and_gather_every_dtype(job):
    n, res = job
    for dt in DTYPES:
        xs = np.stack([local("red_" + dt, r, dtype=dt) for r in range(n)])
        wide = xs.astype(np.float64)
        for r in range(n):
            assert res[r]["psum_" + dt].dtype == np.dtype(dt)
            close(res[r]["psum_" + dt], wide.sum(0), dt)
            close(res[r]["pmax_" + dt], xs.max(0), dt)
            close(res[r]["pmin_" + dt], xs.min(0), dt)
            close(res[r]["gather_" + dt], xs, dt)


def test_axis_index_pmean_groups_gathers(job):
    n, res = job
    x = np.stack([local("x", r) for r in range(n)]).astype(np.float64)
    for r in range(n):
        o = res[r]
        assert int(o["axis_index"]) == r and int(o["axis_size"]) == n
        close(o["pmean"], x.mean(0))
        close(o["psum_bool"], (x > 0).sum(0))
        assert o["psum_bool"].dtype == np.int32
        close(o["gather_bool"], np.moveaxis(x > 0, 0, 1))
        g = [2 * (r // 2), 2 * (r // 2) + 1]
        close(o["psum_groups"], x[g].sum(0))
        close(o["pmax_groups"], x[g].max(0))
        close(o["gather_ax1"], np.moveaxis(x, 0, 1))
        close(o["gather_tiled"], np.concatenate(list(x), 0))
        close(o["gather_tiled_ax1"], np.concatenate(list(x), 1))
        close(o["pbroadcast"], x[n - 1])


def test_scatter_permute_all_to_all(job):
    n, res = job
    x = np.stack([local("x", r) for r in range(n)]).astype(np.float64)
    xs = np.stack([local("xs", r, shape=(n, 3)) for r in range(n)]).astype(np.float64)
    xt = np.stack([local("xt", r, shape=(3, 2 * n)) for r in range(n)]).astype(np.float64)
    for r in range(n):
        o = res[r]
        close(o["scatter"], xs.sum(0)[r])
        close(o["scatter_tiled_1"], xt.sum(0)[:, 2 * r : 2 * r + 2])
        close(o["ring"], x[(r - 1) % n])
        close(o["partial_perm"], x[0] if r == n - 1 else np.zeros_like(x[0]))
        # all_to_all(split 0, concat 1): rank r gets row r of every rank's xs, by sender
        close(o["a2a"], xs[:, r, :].T)
        # tiled (split 1, concat 0): columns 2r:2r+2 of every rank, stacked by sender
        close(o["a2a_tiled"], np.concatenate([xt[k][:, 2 * r : 2 * r + 2] for k in range(n)], 0))


def test_gradients_through_collectives(job):
    n, res = job
    x = np.stack([local("x", r) for r in range(n)]).astype(np.float64)
    c = np.stack([local("c", r) for r in range(n)]).astype(np.float64)
    s = x.sum(0)
    for r in range(n):
        o = res[r]
        # d/dx_r of sum_k <sin(psum x), c_k>: psum's transpose is psum
        close(o["grad_psum"], np.cos(s) * c.sum(0), "float32")
        close(o["grad_gather"], c.sum(0), "float32")  # all_gather's transpose scatters
        close(o["grad_ring"], c[(r + 1) % n])  # ppermute's transpose sends back
        close(o["grad_pmean_sq"], 2 * x[r] * 1.0)  # sum_k pmean's 1/n
        np.testing.assert_allclose(o["jvp"], o["jvp_fd"], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(o["vjp_dot"], o["jvp_dot"], rtol=1e-10)


def test_vmap_and_scan_inside_pmap(job):
    n, res = job
    x = np.stack([local("x", r) for r in range(n)]).astype(np.float64)
    for r in range(n):
        o = res[r]
        close(o["vmap_rows"], x.sum(0))  # an unnamed vmap: each row summed over processes
        close(o["vmap_shadow"], np.broadcast_to(x[r].sum(0), x[r].shape))  # vmap's own axis
        close(o["vmap_both"], np.broadcast_to(x.sum((0, 1)), x[r].shape))
        close(o["scan_psum"], np.cumsum(x.sum(0), 0))


def test_a_raising_rank_aborts_the_job():
    t0 = time.monotonic()
    p = mpirun(2, HERE / "distributed" / "faults.py", "/tmp", "raise", timeout=60)
    assert p.returncode != 0
    assert "fungrad.distributed: process 1 of 2 raised RuntimeError: boom on purpose" in p.stderr
    assert time.monotonic() - t0 < 30


def test_mismatched_shapes_across_ranks(tmp_path):
    p = mpirun(2, HERE / "distributed" / "faults.py", tmp_path, "mismatch")
    assert p.returncode == 0, p.stderr[-2000:]
    for r in range(2):
        msg = (tmp_path / f"{r}.txt").read_text()
        assert "psum: the processes pass operands of different shapes" in msg
        assert "ranks [0]: float32[1,3]" in msg and "ranks [1]: float32[1,4]" in msg


def _train(n: int, out: Path, steps: int = 30) -> dict:
    script = ROOT / "examples" / "data_parallel.py"
    args = ["--steps", steps, "--save", out]
    if n == 1:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        cmd = [sys.executable, str(script), *map(str, args)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env, cwd=ROOT)
    else:
        p = mpirun(n, script, *args)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return dict(np.load(out))


def test_data_parallel_training_equals_one_process(tmp_path):
    """examples/data_parallel.py on 2 and 4 processes (pmean of grads) against one process on
    the global batch: the same losses and parameters to float32 rounding; the first loss
    against numpy float64."""
    sys.path.insert(0, str(ROOT / "examples"))
    import data_parallel as dp

    one = _train(1, tmp_path / "one.npz")
    x, y = dp.make_data(0)
    p = {k: v.astype(np.float64) for k, v in dp.init_params(0).items()}
    xb, yb = x[: dp.GLOBAL_BATCH].astype(np.float64), y[: dp.GLOBAL_BATCH].astype(np.float64)
    pred = np.tanh(xb @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    np.testing.assert_allclose(one["losses"][0], np.mean((pred - yb) ** 2), rtol=1e-5)
    assert one["losses"][-1] < 0.8 * one["losses"][0]  # it trains
    for n in (2, 4):
        many = _train(n, tmp_path / f"n{n}.npz")
        for k in one:
            np.testing.assert_allclose(many[k], one[k], rtol=2e-5, atol=2e-6, err_msg=k)
