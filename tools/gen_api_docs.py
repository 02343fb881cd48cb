#!/usr/bin/env python3
"""Regenerate docs/api.md: every public name of fungrad's modules with its first docstring line.

python tools/gen_api_docs.py          # rewrite docs/api.md
python tools/gen_api_docs.py --check  # exit 1 if docs/api.md is out of date (the tests do this)
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODULES = [
    ("fungrad", "transforms, configuration and core types (`import fungrad as fg`)"),
    ("fungrad.numpy", "the NumPy API with jax.numpy semantics (`import fungrad.numpy as fnp`)"),
    ("fungrad.numpy.linalg", "linear algebra"),
    ("fungrad.numpy.fft", "discrete Fourier transforms"),
    ("fungrad.lax", "primitives' wrappers and control flow"),
    ("fungrad.nn", "neural-network functions, the Module base class and layers (docs/nn.md)"),
    ("fungrad.nn.initializers", "weight initializers (jax.nn.initializers)"),
    ("fungrad.scipy.special", "special functions"),
    ("fungrad.scipy.signal", "convolution and correlation (direct or by FFT), detrending"),
    ("fungrad.scipy.stats", "summary statistics and kernel density estimation"),
    *[
        (f"fungrad.scipy.stats.{d}", f"the {d} distribution")
        for d in (
            "bernoulli",
            "beta",
            "betabinom",
            "binom",
            "cauchy",
            "chi2",
            "dirichlet",
            "expon",
            "gamma",
            "gennorm",
            "geom",
            "gumbel_l",
            "gumbel_r",
            "laplace",
            "logistic",
            "multinomial",
            "multivariate_normal",
            "nbinom",
            "norm",
            "pareto",
            "poisson",
            "t",
            "truncnorm",
            "uniform",
            "vonmises",
            "wrapcauchy",
        )
    ],
    ("fungrad.scipy.linalg", "dense solvers and decompositions (jax.scipy.linalg)"),
    ("fungrad.scipy.ndimage", "map_coordinates: interpolation at given coordinates"),
    ("fungrad.scipy.integrate", "trapezoid (jnp.trapezoid)"),
    ("fungrad.scipy.fft", "discrete cosine transforms (type 2) and their inverses"),
    ("fungrad.scipy.optimize", "minimize (BFGS)"),
    ("fungrad.scipy.sparse.linalg", "iterative solvers: cg, gmres, bicgstab"),
    ("fungrad.random", "threefry-based random numbers"),
    ("fungrad.image", "image resizing and resampling (jax.image)"),
    ("fungrad.errors", "the exceptions of tracing, under jax.errors' names and hierarchy"),
    (
        "fungrad.custom_derivatives",
        "custom_jvp, custom_vjp, custom_gradient under jax's module name",
    ),
    # fungrad.dtypes is also the internal dtype module: list only the names jax.dtypes has.
    ("fungrad.dtypes", "dtype utilities (jax.dtypes)", "tests/jax_api/jax.dtypes.txt"),
    ("fungrad.tree_util", "pytrees"),
    ("fungrad.tree", "pytree functions under JAX's short names (`jax.tree`)"),
    ("fungrad.flatten_util", "a pytree as one flat vector (`ravel_pytree`)"),
    ("fungrad.ad_checkpoint", "rematerialisation"),
    ("fungrad.debug", "printing and callbacks inside transformed and compiled code"),
    (
        "fungrad.distributed",
        "multi-process jobs over MPI: initialize, process axes for pmap (docs/distributed.md)",
    ),
    ("fungrad.experimental", "jax.experimental's names (io_callback, checkify)"),
    ("fungrad.experimental.shard_map", "the older spelling of shard_map (docs/sharding.md)"),
    ("fungrad.sharding", "meshes, partition specs and shardings (jax.sharding, docs/sharding.md)"),
    ("fungrad.experimental.ode", "odeint"),
    (
        "fungrad.experimental.checkify",
        "run-time checks as returned error values (jax.experimental.checkify, docs/debugging.md)",
    ),
    ("fungrad.ops", "segment reductions (jax.ops)"),
    ("fungrad.lax.linalg", "jax.lax.linalg"),
    ("fungrad.optim", "optimizers, gradient transformations, schedules and wrappers (optax's API)"),
    (
        "fungrad.checkpoints",
        "save/restore pytrees of arrays (.npz + a JSON structure record, atomic, no pickle)",
    ),
    ("fungrad.example_libraries.stax", "JAX's example layer library: (init_fun, apply_fun) pairs"),
    (
        "fungrad.example_libraries.optimizers",
        "JAX's example optimizers: (init_fun, update_fun, get_params) triples",
    ),
    ("fungrad.typing", "type annotations (jax.typing)"),
    (
        "fungrad.compat",
        "running JAX programs unchanged (python -m fungrad.compat; docs/porting.md)",
    ),
    ("fungrad.testing", "numerical derivative checks"),
    ("fungrad.test_util", "JAX's derivative-check spellings (jax.test_util)"),
    ("fungrad.testing.strategies", "hypothesis strategies (needs hypothesis)"),
]


def jax_names(path: str) -> set[str]:
    """The names of a JAX name list (``tests/jax_api/<module>.txt``; ``#`` lines are comments)."""
    lines = (ln.strip() for ln in (ROOT / path).read_text().splitlines())
    return {ln for ln in lines if ln and not ln.startswith("#")}


def public_names(mod, only: str | None = None) -> list[str]:
    """``mod``'s public names (its ``__all__``, else every name without ``_``), without
    submodules and primitives; with ``only`` (a JAX name list), just those JAX has too."""
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [n for n in dir(mod) if not n.startswith("_")]
    if only is not None:
        keep = jax_names(only)
        names = [n for n in names if n in keep]
    out = []
    for n in names:
        obj = getattr(mod, n)
        if isinstance(obj, types.ModuleType):
            continue
        if n.endswith("_p") and type(obj).__name__ == "Primitive":
            continue  # primitives are listed by the registry, not as API
        out.append(n)
    return sorted(set(out))


def summary(obj) -> str:
    if inspect.isfunction(obj) or inspect.isclass(obj) or inspect.isbuiltin(obj) or callable(obj):
        doc = inspect.getdoc(obj) or ""
        if getattr(obj, "__module__", "") and not str(getattr(obj, "__module__", "")).startswith(
            "fungrad"
        ):
            return f"(from {obj.__module__})"
        return doc.strip().splitlines()[0] if doc.strip() else ""
    if isinstance(obj, (int, float, str, type(None))):
        return f"constant: `{obj!r}`"
    if isinstance(obj, (types.UnionType, types.GenericAlias)) or type(obj).__module__ == "typing":
        return f"type alias: `{obj}`"
    return f"a `{type(obj).__name__}` object"


def render() -> str:
    lines = [
        "# fungrad API",
        "",
        "Every public name, generated by `tools/gen_api_docs.py` (the tests check it is current).",
        "",
    ]
    for name, what, *only in MODULES:
        mod = importlib.import_module(name)
        names = public_names(mod, *only)
        lines += [
            f"## `{name}` — {what}",
            "",
            f"{len(names)} names.",
            "",
            "| name | summary |",
            "| --- | --- |",
        ]
        for n in names:
            s = summary(getattr(mod, n)).replace("|", "\\|")
            lines.append(f"| `{n}` | {s} |")
        lines.append("")
    return "\n".join(lines)


def main(argv) -> int:
    text = render()
    path = ROOT / "docs" / "api.md"
    if "--check" in argv:
        if not path.exists() or path.read_text() != text:
            print("docs/api.md is out of date: run python tools/gen_api_docs.py")
            return 1
        return 0
    path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
