"""Documentation stays true: docs/api.md lists every public function (regenerate it with
tools/gen_api_docs.py), every public function has a docstring, every ``fungrad/...py`` path the
docs name exists, and no code or doc carries diary text ("session" and a number)."""

import re
import subprocess
import sys
from pathlib import Path

import fungrad.numpy as fnp
from fungrad import lax, nn, random
from fungrad.scipy import special

ROOT = Path(__file__).resolve().parents[1]


def test_api_md_is_current():
    r = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_api_docs.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_fungrad_numpy_has_at_least_150_functions():
    funcs = [n for n in dir(fnp) if not n.startswith("_") and callable(getattr(fnp, n))]
    assert len(funcs) >= 150


def test_public_functions_have_docstrings():
    missing = []
    for mod in (fnp, lax, nn, random, special):
        names = getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]
        for name in names:
            obj = getattr(mod, name)
            if (
                callable(obj)
                and getattr(obj, "__module__", "").startswith("fungrad")
                and not (obj.__doc__ or "").strip()
            ):
                missing.append(f"{mod.__name__}.{name}")
    assert not missing, f"no docstring: {missing}"


DIARY_EXEMPT = {ROOT / "bench" / "RESULTS.md", ROOT / "tests" / "fuzz" / "found.md"}
_SESSION = re.compile(r"\bsession\s+\d", re.IGNORECASE)
_FUNGRAD_PATH = re.compile(r"\bfungrad/[\w/]*\w\.py\b")
# a quoted relative path such as `lowering/cpu/gemm.py`, `numpy/util.py`, `tests/fuzz/gen.py`
_QUOTED_PATH = re.compile(r"`([\w.-]+(?:/[\w.-]+)*/[\w.-]+\.py)`")
# the folders a doc's relative paths are written from
_PATH_BASES = (ROOT, ROOT / "fungrad", ROOT / "fungrad" / "lowering")


def test_paths_named_in_docs_exist():
    """Every ``fungrad/...py`` path the docs name, and every quoted relative path of a module
    (`lowering/cpu/gemm.py`, read from the repository, fungrad/ or fungrad/lowering/), is a
    file of the tree: a move updates the docs."""
    missing = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            for path in _FUNGRAD_PATH.findall(line):
                if not (ROOT / path).is_file():
                    missing.append(f"{doc.relative_to(ROOT)}:{n}: {path}")
            for path in _QUOTED_PATH.findall(line):
                if not any((base / path).is_file() for base in _PATH_BASES):
                    missing.append(f"{doc.relative_to(ROOT)}:{n}: {path}")
    assert not missing, "docs name files that do not exist:\n" + "\n".join(missing)


def test_no_session_numbers_in_code_or_docs():
    """Code comments and docs describe the design, not a diary of the work session that
    changed it (the word followed by its number): history belongs in git log and
    bench/RESULTS.md."""
    files = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    for top in ("fungrad", "tests", "tools", "bench"):
        files += [p for p in (ROOT / top).rglob("*") if p.suffix in (".py", ".md")]
    found = []
    for path in sorted(set(files) - DIARY_EXEMPT):
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if _SESSION.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "diary text ('session N') left in:\n" + "\n".join(found)
