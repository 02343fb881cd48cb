"""The examples gallery runs: every `examples/<name>.py` in smoke mode (`--smoke`: a few
steps) in its own Python process, asserting exit status 0, the lines that report what it did,
and the plots it saves.

The runs are started together when the first example test needs one (as many at once as
there are cores), so the file costs about the slowest example's time per core, not their sum.
An example whose optional dependency is missing is skipped with a message naming the extra
(`pip install -e '.[examples]'`).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TIMEOUT_S = 300


@dataclass(frozen=True)
class Example:
    name: str  # examples/<name>.py
    expect: tuple[str, ...]  # regexes that must each match a line of stdout
    plots: tuple[str, ...] = ()  # files the run must write under --out
    needs: tuple[str, ...] = ()  # optional modules (from the `examples` extra)
    args: tuple[str, ...] = ("--smoke",)
    env: dict = field(default_factory=dict)
    id: str = ""  # the test id, when one file is run twice (default: name)

    @property
    def key(self) -> str:
        return self.id or self.name


ACC = r"\d+\.\d+%"
GALLERY = [
    Example(
        "digits_mlp",
        (r"^digits: 1437 train / 360 test", r"^trained 5 steps", rf"^test accuracy {ACC}$"),
        plots=("digits_mlp_loss.png",),
        needs=("sklearn", "matplotlib", "tqdm"),
    ),
    # The full default run (1,500 steps, a few seconds): the gallery's accuracy target, >= 97%.
    Example(
        "digits_mlp",
        (r"^trained 1500 steps", r"^test accuracy (9[7-9]|100)\.\d+%$"),
        plots=("digits_mlp_loss.png",),
        needs=("sklearn", "matplotlib", "tqdm"),
        args=(),
        id="digits_mlp_full",
    ),
    Example(
        "digits_cnn",
        (r"^CNN with \d+ parameters", r"^trained 5 steps", rf"^test accuracy {ACC}$"),
        plots=("digits_cnn_loss.png",),
        needs=("sklearn", "matplotlib", "tqdm"),
    ),
    Example(
        "dp_sgd",
        (
            r"^vmap\(grad\) vs a Python loop of grad over 8 examples: max \|difference\| ",
            r"^per-example gradient norms, first batch: min \d",
            r"^clipped to C=1\.0: \d+% of the first batch",
            rf"^test accuracy: DP-SGD {ACC}, non-private {ACC}$",
        ),
        plots=("dp_sgd_loss.png",),
        needs=("sklearn", "matplotlib", "tqdm"),
    ),
    Example(
        "second_order",
        (
            r"^breast cancer: 569 examples, 30 features",
            r"^Hessian-vector product \(jvp of grad\) vs the dense Hessian: rel\. error ",
            # Newton reaches the tolerance within its iterations in smoke mode too
            r"^Newton \(dense Hessian\)\s+0\.0995913754\d+\s+\S+\s+\d+$",
            r"^Newton-CG \(10 HVPs/step\)\s+0\.0995913754\d+\s+\S+\s+\d+$",
            r"^scikit-learn's LogisticRegression \(lbfgs\) reaches loss 0\.0995913754",
        ),
        plots=("second_order.png",),
        needs=("sklearn", "matplotlib"),
    ),
    Example(
        "char_transformer",
        (
            r"^text: the Zen of Python, 856 characters, vocabulary of 45$",
            r"^trained 3 steps in ",
            r"^loss: \d+\.\d+ -> \d+\.\d+ nats/char",
            r"^sample \(40 characters, temperature 0\.8",
            r"^Beautiful is",  # the prompt the sample continues
        ),
        plots=("char_transformer_loss.png",),
        needs=("matplotlib", "tqdm"),
    ),
    Example(
        "sequence_rnn",
        (
            r"^model: LSTM with 32 hidden units",
            r"^trained 3 steps in ",
            r"^test one-step MSE vs the clean wave: \d+\.\d+ \(repeat-the-last-sample baseline",
            r"^closed-loop forecast of 40 samples: MSE \d+\.\d+",
        ),
        plots=("sequence_rnn_loss.png", "sequence_rnn_forecast.png"),
        needs=("matplotlib", "tqdm"),
    ),
    Example(
        "neural_ode",
        (
            r"^damped oscillator \(omega 2\.0, zeta 0\.1\)",
            r"^trained 3 steps in ",
            r"^unseen y0 = \(1\.8, -1\.0\) over t in \[0, 8\.0\]: max \|error\| \d",
            r"^Jacobian of the learned field at the origin \(jacfwd\)",
        ),
        plots=("neural_ode_loss.png", "neural_ode_phase.png"),
        needs=("matplotlib", "tqdm"),
    ),
    Example(
        "gradient_checking",
        (
            r"^\[pass\] softplus, right rule: first and second derivatives on 10 ",
            r"^\[pass\] a hand-written test of grad\(sum\(softplus\(x\)\)\)",
            r"^\[caught\] the property-based check rejects the wrong rule",
            r"VJP vs finite differences \(dot-product identity\)",
        ),
        needs=("hypothesis",),
    ),
    Example(
        "gpu_training",
        (
            r"^cpu: loss \d+\.\d+ -> \d+\.\d+; first step",
            r"^cpu: test accuracy ",
            # with a WebGPU adapter (lavapipe counts, and says so) both backends agree;
            # without one the example says why and trains on the CPU only
            r"^(gpu: .* a (SOFTWARE|hardware) adapter|gpu: skipped: )",
            r"^(cpu vs gpu: largest parameter difference|gpu: skipped: )",
        ),
        plots=("gpu_training_loss.png",),
        needs=("matplotlib",),
    ),
    # As one process (plain python); tests/test_distributed.py runs it under mpiexec.
    Example(
        "data_parallel",
        (r"^data parallel: 1 process\(es\), global batch 64", r"^trained 5 steps, final loss"),
    ),
]
BY_KEY = {e.key: e for e in GALLERY}


def _missing(example: Example) -> list[str]:
    return [m for m in example.needs if importlib.util.find_spec(m) is None]


def _run(example: Example, out: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, MPLBACKEND="Agg", **example.env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    cmd = [sys.executable, str(EXAMPLES / f"{example.name}.py"), *example.args, "--out", str(out)]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)


@pytest.fixture(scope="module")
def smoke_runs(request, tmp_path_factory):
    """Start every selected, runnable example at once; map key -> (future, out folder)."""
    selected = []
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and item.module is sys.modules[__name__]:
            key = callspec.params.get("key")
            if key in BY_KEY and key not in selected and not _missing(BY_KEY[key]):
                selected.append(key)
    pool = ThreadPoolExecutor(max_workers=max(1, min(len(selected), os.cpu_count() or 1)))
    runs = {}
    for key in selected:
        out = tmp_path_factory.mktemp(key)
        runs[key] = (pool.submit(_run, BY_KEY[key], out), out)
    yield runs
    pool.shutdown(wait=True)


@pytest.mark.parametrize("key", list(BY_KEY))
def test_example_smoke(key, smoke_runs):
    example = BY_KEY[key]
    name = example.name
    missing = _missing(example)
    if missing:
        pytest.skip(f"examples/{name}.py needs {', '.join(missing)}: pip install -e '.[examples]'")
    future, out = smoke_runs[key]
    proc = future.result()
    report = f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    assert proc.returncode == 0, f"examples/{name}.py exited {proc.returncode}\n{report}"
    lines = proc.stdout.splitlines()
    for pattern in example.expect:
        assert any(re.search(pattern, line) for line in lines), (
            f"examples/{name}.py printed no line matching {pattern!r}\n{report}"
        )
    for plot in example.plots:
        path = out / plot
        assert path.is_file() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", (
            f"examples/{name}.py did not save the PNG {plot} under --out\n{report}"
        )


def test_every_example_is_listed():
    """A new example file is smoke-tested and in the README's table."""
    files = {p.stem for p in EXAMPLES.glob("*.py") if not p.stem.startswith("_")}
    files.discard("quickstart")  # run by `python3 dev.py demo` and tests of the quick start
    listed = {e.name for e in GALLERY}
    unlisted = sorted(files - listed)
    assert not unlisted, f"examples without an entry in tests/test_examples.py: {unlisted}"
    readme = (EXAMPLES / "README.md").read_text()
    absent = sorted(n for n in listed if f"{n}.py" not in readme)
    assert not absent, f"examples missing from examples/README.md: {absent}"


def test_missing_dependency_names_the_extra(tmp_path):
    """An example run without its optional dependency exits with the extra's name."""
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text(
        "import sys\n"
        "class _Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'sklearn' or name.startswith('sklearn.'):\n"
        "            raise ImportError('blocked for the test')\n"
        "sys.meta_path.insert(0, _Block())\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "digits_mlp.py"), "--smoke", "--out", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "pip install -e '.[examples]'" in proc.stderr
    assert "scikit-learn" in proc.stderr


def _run_args(name: str, *args: str, env=None) -> subprocess.CompletedProcess:
    run_env = dict(os.environ, MPLBACKEND="Agg", **(env or {}))
    run_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), run_env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), *args],
        cwd=ROOT, env=run_env, capture_output=True, text=True, timeout=TIMEOUT_S,
    )  # fmt: skip


@pytest.mark.skipif(importlib.util.find_spec("hypothesis") is None, reason="needs hypothesis")
def test_gradient_checking_wrong_rule_fails():
    """`--wrong` ships the wrong VJP rule: the property fails, exit status 1, the failure
    and hypothesis's smallest failing input printed."""
    proc = _run_args("gradient_checking", "--smoke", "--wrong")
    report = f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    assert proc.returncode == 1, report
    assert "[FAIL] softplus's VJP rule is wrong" in proc.stdout, report
    assert "dot-product identity" in proc.stdout, report
    assert re.search(r"x=array\(", proc.stdout), report


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs matplotlib")
def test_gpu_training_without_an_adapter(tmp_path):
    """No usable adapter (FUNGRAD_GPU_ADAPTER naming none): the example says so, trains on
    the CPU only and exits 0."""
    proc = _run_args(
        "gpu_training", "--smoke", "--out", str(tmp_path),
        env={"FUNGRAD_GPU_ADAPTER": "no-such-adapter"},
    )  # fmt: skip
    report = f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    assert proc.returncode == 0, report
    assert re.search(r"^cpu: test accuracy ", proc.stdout, re.M), report
    assert re.search(r"^gpu: skipped: .*Trained on the CPU only\.$", proc.stdout, re.M), report
    assert "cpu vs gpu" not in proc.stdout, report
