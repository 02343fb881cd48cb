#!/usr/bin/env python3
"""Print fungrad's coverage of JAX 0.10.2's public API per module, and the missing names.

    .venv/bin/python tools/api_coverage.py            # table and missing names
    .venv/bin/python tools/api_coverage.py --table    # the table only
    .venv/bin/python tools/api_coverage.py --markdown # the table as markdown rows (docs/porting.md)

The name lists are tests/jax_api/<module>.txt (tools/jax_api_names.py writes them from jax);
the counting is fungrad.compat.coverage's.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fungrad.compat.coverage import format_table, load_jax_names, measure  # noqa: E402


def main(argv: list[str]) -> int:
    if argv not in ([], ["--table"], ["--markdown"]):
        print(__doc__, file=sys.stderr)
        return 2
    coverage = measure(load_jax_names(ROOT / "tests" / "jax_api"))
    if argv == ["--markdown"]:
        for c in coverage.values():
            print(f"| `{c.module}` | {c.total} | {len(c.covered)} ({c.percent:.0f}%) |")
    else:
        print(format_table(coverage, missing=not argv))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
