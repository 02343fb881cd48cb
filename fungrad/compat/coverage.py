"""How much of JAX's public API fungrad provides, module by module.

The reference is a folder of name lists, ``<jax module>.txt`` with one public name per line
(the repository keeps JAX 0.10.2's in tests/jax_api, written by tools/jax_api_names.py). A name
counts as provided when the fungrad module that :mod:`fungrad.compat` maps the jax module to
has an attribute or a submodule of that name, i.e. exactly when a JAX program run through
``python -m fungrad.compat`` finds it.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

from fungrad.compat import fungrad_module_name

__all__ = ["Coverage", "covered_lines", "format_table", "load_jax_names", "measure"]


def load_jax_names(folder) -> dict[str, list[str]]:
    """``{jax module: [names]}`` from every ``<module>.txt`` in ``folder`` (``#`` lines are
    comments; covered.txt is not a name list)."""
    out = {}
    for path in sorted(Path(folder).glob("jax*.txt"), key=lambda p: p.stem.split(".")):
        lines = (ln.strip() for ln in path.read_text().splitlines())
        out[path.stem] = [ln for ln in lines if ln and not ln.startswith("#")]
    return out


def _fungrad_module(jax_module: str):
    name = fungrad_module_name(jax_module)
    try:
        if importlib.util.find_spec(name) is None:
            return None
    except ModuleNotFoundError:
        return None
    return importlib.import_module(name)


def _has(module, name: str) -> bool:
    if hasattr(module, name):
        return True
    if not hasattr(module, "__path__"):
        return False
    try:
        return importlib.util.find_spec(f"{module.__name__}.{name}") is not None
    except ModuleNotFoundError:
        return False


class Coverage:
    """The names of one jax module that fungrad provides (``covered``) and lacks (``missing``)."""

    def __init__(self, module: str, covered: list[str], missing: list[str]):
        self.module, self.covered, self.missing = module, covered, missing

    @property
    def total(self) -> int:
        return len(self.covered) + len(self.missing)

    @property
    def percent(self) -> float:
        return 100.0 * len(self.covered) / self.total if self.total else 100.0


def measure(jax_names: dict[str, list[str]]) -> dict[str, Coverage]:
    """The :class:`Coverage` of each jax module in ``jax_names``."""
    out = {}
    for module, names in jax_names.items():
        fg = _fungrad_module(module)
        covered = [n for n in names if fg is not None and _has(fg, n)]
        got = set(covered)
        out[module] = Coverage(module, covered, [n for n in names if n not in got])
    return out


def covered_lines(jax_names: dict[str, list[str]]) -> list[str]:
    """``"<jax module> <name>"`` for every listed name fungrad provides, sorted."""
    return sorted(f"{c.module} {n}" for c in measure(jax_names).values() for n in c.covered)


def format_table(coverage: dict[str, Coverage], missing: bool = False) -> str:
    """A text table of coverage per module (and the missing names when ``missing``)."""
    rows = [f"{'jax module':34s} {'fungrad module':38s} {'have':>5s} {'of':>5s} {'%':>6s}"]
    for c in coverage.values():
        rows.append(
            f"{c.module:34s} {fungrad_module_name(c.module):38s} "
            f"{len(c.covered):5d} {c.total:5d} {c.percent:6.1f}"
        )
    have = sum(len(c.covered) for c in coverage.values())
    total = sum(c.total for c in coverage.values())
    rows.append(f"{'all':34s} {'':38s} {have:5d} {total:5d} {100.0 * have / max(total, 1):6.1f}")
    if missing:
        for c in coverage.values():
            if c.missing:
                rows += ["", f"{c.module} lacks {len(c.missing)}:", "  " + " ".join(c.missing)]
    return "\n".join(rows)
