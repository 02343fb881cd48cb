#!/usr/bin/env python3
"""Write the lists of JAX's public names that fungrad's API coverage is measured against.

    /tmp/jaxvenv/bin/python tools/jax_api_names.py     # tests/jax_api/<module>.txt from jax
    .venv/bin/python tools/jax_api_names.py --update-covered
                                                     # tests/jax_api/covered.txt from fungrad

The first form needs jax (never a dependency of fungrad or its tests) and writes one file per
module, one public name per line: a name without a leading underscore that is not a module
(``jax.scipy.stats`` lists its distribution modules too, which is how JAX programs use it).
``jax.example_libraries.*`` are plain code modules, so for them only the names the module's own
source defines (def, class, assignment; not imports or typing aliases) count.

The second form needs fungrad but not jax: it records every listed name fungrad has today in
covered.txt (``<module> <name>`` lines). tests/test_api_coverage.py fails when one of them
goes missing, so coverage only grows. Run it after adding names.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "jax_api"

MODULES = [
    "jax",
    "jax.numpy",
    "jax.numpy.linalg",
    "jax.numpy.fft",
    "jax.lax",
    "jax.nn",
    "jax.nn.initializers",
    "jax.random",
    "jax.scipy.special",
    "jax.scipy.stats",
    "jax.scipy.linalg",
    "jax.scipy.signal",
    "jax.scipy.ndimage",
    "jax.scipy.integrate",
    "jax.scipy.fft",
    "jax.image",
    "jax.errors",
    "jax.tree_util",
    "jax.tree",
    "jax.flatten_util",
    "jax.debug",
    "jax.ad_checkpoint",
    "jax.test_util",
    "jax.dtypes",
    "jax.sharding",
    "jax.experimental.checkify",
    "jax.example_libraries.optimizers",
    "jax.example_libraries.stax",
]

# Modules whose submodules are part of the API (``jax.scipy.stats.norm.logpdf``).
LIST_SUBMODULES = {"jax.scipy.stats"}


def _source_defined(mod) -> set[str]:
    """Top-level names bound by def, class or assignment in ``mod``'s own source."""
    tree = ast.parse(inspect.getsource(mod))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        names.add(n.id)
    return names


def public_names(modname: str) -> list[str]:
    mod = importlib.import_module(modname)
    names = [n for n in dir(mod) if not n.startswith("_") and n != "annotations"]
    if modname.startswith("jax.example_libraries."):
        defined = _source_defined(mod)
        names = [
            n
            for n in names
            if n in defined
            and type(getattr(mod, n)).__module__ != "typing"
            and not hasattr(__builtins__, n)
        ]
    out = []
    for n in names:
        if isinstance(getattr(mod, n), types.ModuleType) and modname not in LIST_SUBMODULES:
            continue
        out.append(n)
    return sorted(out)


def write_lists() -> None:
    import jax  # noqa: F401  (only this form needs jax)

    OUT.mkdir(parents=True, exist_ok=True)
    for modname in MODULES:
        names = public_names(modname)
        header = f"# {modname}: public names of jax {jax.__version__} (tools/jax_api_names.py)\n"
        (OUT / f"{modname}.txt").write_text(header + "".join(n + "\n" for n in names))
        print(f"{modname:36s} {len(names):4d} names")


def update_covered() -> None:
    sys.path.insert(0, str(ROOT))
    from fungrad.compat.coverage import covered_lines, load_jax_names

    lines = covered_lines(load_jax_names(OUT))
    header = (
        "# Names fungrad provides today: tests/test_api_coverage.py fails if one goes "
        "missing.\n# Regenerate with `.venv/bin/python tools/jax_api_names.py "
        "--update-covered`.\n"
    )
    (OUT / "covered.txt").write_text(header + "".join(line + "\n" for line in lines))
    print(f"covered.txt: {len(lines)} names")


def main(argv: list[str]) -> int:
    if argv == ["--update-covered"]:
        update_covered()
    elif not argv:
        write_lists()
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
