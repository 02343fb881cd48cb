"""``python -m fungrad.compat script.py [args]``: run a JAX program on fungrad.

The script runs as ``python script.py [args]`` would run it (``__name__ == "__main__"``,
``sys.argv == ["script.py", *args]``, the script's folder first on ``sys.path``), with
``import jax`` resolving to fungrad (see :mod:`fungrad.compat`). ``-m module [args]`` runs a
module the way ``python -m module`` does.
"""

from __future__ import annotations

import os
import runpy
import sys

from fungrad import compat

USAGE = """usage: python -m fungrad.compat script.py [args ...]
       python -m fungrad.compat -m module [args ...]

Runs a JAX program with `import jax` resolved to fungrad (see docs/porting.md)."""


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] == "-m":
        if len(argv) < 2:
            print("fungrad.compat: -m needs a module name\n" + USAGE, file=sys.stderr)
            return 2
        compat.enable()
        sys.argv = argv[1:]
        sys.path[0] = os.getcwd()
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return 0
    script = argv[0]
    if not os.path.isfile(script):
        print(
            f"fungrad.compat: can't open file {script!r}: no such file\n" + USAGE, file=sys.stderr
        )
        return 2
    compat.enable()
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
