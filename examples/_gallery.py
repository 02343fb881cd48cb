"""Shared plumbing for the examples gallery: the command line every example takes, the output
folder, progress bars and loss-curve plots.

Each example is one runnable file (`python examples/<name>.py`); Python puts the script's
folder on `sys.path`, so `import _gallery` works from anywhere. The optional dependencies
(scikit-learn, matplotlib, tqdm: `pip install -e '.[examples]'`) are imported through
`require`, which names the extra when one is missing.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parent / "out"


def require(module: str):
    """Import an optional dependency, or exit with a message naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.split(".")[0]
        package = {"sklearn": "scikit-learn"}.get(top, top)
        sys.exit(
            f"this example needs {package}: pip install -e '.[examples]' (or pip install {package})"
        )


def parser(description: str, *, steps: int, batch_size: int | None = None):
    """The common command line: `--steps N` (training steps), `--smoke` (a few steps, for CI),
    `--out DIR` (where plots go), `--seed`, and `--batch-size` where the example batches."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--steps", type=int, default=steps, help=f"training steps (default {steps})")
    p.add_argument("--smoke", action="store_true", help="run a few steps only (CI smoke test)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder for plots")
    p.add_argument("--seed", type=int, default=0)
    if batch_size is not None:
        p.add_argument("--batch-size", type=int, default=batch_size)
    return p


def output_dir(path: Path) -> Path:
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    return path


def progress(total: int, desc: str):
    """A tqdm bar over `range(total)`; drawn only on a terminal (CI logs stay readable)."""
    tqdm = require("tqdm")
    return tqdm.trange(total, desc=desc, disable=not sys.stderr.isatty(), leave=False)


def save_curves(
    path: Path,
    curves: dict,
    *,
    title: str,
    xlabel: str = "step",
    ylabel: str = "loss",
    logy: bool = False,
) -> Path:
    """Plot `{label: sequence}` (or `{label: (xs, ys)}`) into a PNG with the Agg backend."""
    matplotlib = require("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for label, values in curves.items():
        if isinstance(values, tuple):
            ax.plot(*values, label=label)
        else:
            ax.plot(range(len(values)), values, label=label)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    if len(curves) > 1:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


class Timer:
    """Wall-clock seconds of a `with` block (`.seconds`)."""

    def __enter__(self):
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self._t0


def threads_note() -> str:
    """How many CPU cores this process may use (the numbers in the README depend on it)."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:
        n = os.cpu_count()
    return f"{n} core(s)"
