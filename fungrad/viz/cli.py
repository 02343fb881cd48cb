"""``python -m fungrad viz pkg.mod:fn --args "f32[8,784]" "f32[784,10]" -o out.html``.

Imports ``fn`` from ``pkg.mod`` (a module name, or a ``path/to/file.py``), traces it on
ShapeDtypeStructs made from the argument specs (types as a jaxpr prints them: ``f32[8,784]``,
``i32[]``, ``bool[3]``) and writes the viewer's page.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import re
import sys

import numpy as np

from fungrad import dtypes
from fungrad.shape_dtype_struct import ShapeDtypeStruct

__all__ = ["main", "parse_spec"]

_SPEC = re.compile(r"^\s*([a-z]+[0-9]*)\[\s*([0-9,\s]*)\]\s*$")
_DTYPES = {dtypes.short_name(np.dtype(d)): np.dtype(d) for d in dtypes._SHORT_NAMES}


def parse_spec(spec: str) -> ShapeDtypeStruct:
    """``"f32[8,784]"`` -> ``ShapeDtypeStruct((8, 784), float32)``; ValueError naming the
    accepted form for anything else."""
    m = _SPEC.match(spec)
    if m is None or m.group(1) not in _DTYPES:
        raise ValueError(
            f"viz: bad argument spec {spec!r}: expected a type as a jaxpr prints it, "
            f"dtype[d0,d1,...] with dtype one of {', '.join(sorted(_DTYPES))} "
            "(e.g. f32[8,784], i32[])"
        )
    dims = [d.strip() for d in m.group(2).split(",") if d.strip()]
    return ShapeDtypeStruct(tuple(int(d) for d in dims), _DTYPES[m.group(1)])


def load_function(target: str):
    """The function ``module:name`` (``module`` a dotted name or a ``.py`` path)."""
    mod_name, sep, attr = target.partition(":")
    if not sep or not mod_name or not attr:
        raise ValueError(
            f"viz: expected module:function (e.g. mypkg.model:loss or model.py:loss), "
            f"got {target!r}"
        )
    if mod_name.endswith(".py"):
        spec = importlib.util.spec_from_file_location(
            os.path.splitext(os.path.basename(mod_name))[0], mod_name
        )
        if spec is None or not os.path.exists(mod_name):
            raise ValueError(f"viz: no such file {mod_name!r}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        module = importlib.import_module(mod_name)
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"viz: {mod_name} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def main(argv: list[str]) -> int:
    """The ``viz`` command; returns the exit status."""
    p = argparse.ArgumentParser(
        prog="python -m fungrad viz",
        description="Write an interactive HTML graph of a function's jaxpr.",
    )
    p.add_argument("target", help="module:function (a dotted module or a .py file)")
    p.add_argument("--args", nargs="*", default=[], metavar="SPEC", help='e.g. "f32[8,784]"')
    p.add_argument("-o", "--output", default=None, help="the page to write (default: fn.html)")
    p.add_argument("--fusion", action="store_true", help="overlay the CPU fusion plan")
    p.add_argument("--backward", action="store_true", help="forward and grad side by side")
    ns = p.parse_args(argv)
    from fungrad.viz.view import viz

    try:
        fun = load_function(ns.target)
        specs = [parse_spec(s) for s in ns.args]
        out = ns.output or f"{ns.target.rpartition(':')[2]}.html"
        viz(fun, *specs, fusion=ns.fusion, backward=ns.backward, path=out)
    except (ValueError, TypeError, ImportError) as e:
        print(f"python -m fungrad {e}", file=sys.stderr)
        return 2
    print(out)
    return 0
