"""``python -m fungrad <command>``: fungrad's command line.

Commands: ``doctor [--json]`` prints what fungrad finds on this machine (:mod:`fungrad.doctor`).
JAX programs run through ``python -m fungrad.compat`` (its own entry point).
"""

from __future__ import annotations

import sys

USAGE = """usage: python -m fungrad <command> [args]

commands:
  doctor [--json]   versions, CPU, BLAS/LAPACK, threads, GPU adapters, compile cache and
                    options in force (for bug reports)
  viz module:fn [--args "f32[8,784]" ...] [-o out.html] [--fusion] [--backward]
                    an interactive HTML graph of fn's jaxpr (fungrad.viz)
"""


def main(argv: list[str] | None = None) -> int:
    """Run the command ``argv[0]`` (``sys.argv[1:]`` when None); returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE, end="", file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "doctor":
        from fungrad import doctor

        return doctor.main(rest)
    if command == "viz":
        from fungrad.viz import cli

        return cli.main(rest)
    print(f"python -m fungrad: unknown command {command!r}\n{USAGE}", end="", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
