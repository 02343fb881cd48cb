"""Static types (mypy on typed user code) and ``isinstance(traced, fg.Array)``.

Array's operators and methods are installed at import time (fungrad/numpy/array_methods.py);
type checkers see them through the ``if TYPE_CHECKING:`` declarations in fungrad/array.py.
These tests keep the declarations in sync with what is installed, run mypy on
tests/typing_sample.py (no error allowed) and tests/typing_sample_errors.py (exactly the
marked errors), and check that tracers are ``fg.Array`` instances, as in JAX.
"""

from __future__ import annotations

import ast
import functools
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
import fungrad.typing as fgt
from fungrad import core, lax
from fungrad.array import Array, is_concrete_array
from fungrad.numpy import array_methods

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

# Installed at run time but deliberately not declared: ``x[i] = v`` must be a type error.
_UNDECLARED = {"__setitem__"}


# -- the TYPE_CHECKING declarations match the installed operators and methods ---------------


@functools.cache
def _declarations() -> tuple[dict[str, ast.FunctionDef], set[str]]:
    """(methods, properties) declared under ``if TYPE_CHECKING:`` in class Array."""
    tree = ast.parse((ROOT / "fungrad" / "array.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Array")
    blocks = [
        n
        for n in cls.body
        if isinstance(n, ast.If) and isinstance(n.test, ast.Name) and n.test.id == "TYPE_CHECKING"
    ]
    assert len(blocks) == 1, "class Array should have one `if TYPE_CHECKING:` block"
    methods, properties = {}, set()
    for node in blocks[0].body:
        assert isinstance(node, ast.FunctionDef), ast.dump(node)[:80]
        if any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list):
            properties.add(node.name)
        else:
            assert node.name not in methods, f"{node.name} declared twice"
            methods[node.name] = node
    return methods, properties


def _declared_params(fn: ast.FunctionDef) -> list[tuple[str, inspect._ParameterKind]]:
    a = fn.args
    params = (
        [(p.arg, inspect.Parameter.POSITIONAL_ONLY) for p in a.posonlyargs]
        + [(p.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in a.args]
    )[1:]  # self
    if a.vararg:
        params.append((a.vararg.arg, inspect.Parameter.VAR_POSITIONAL))
    params += [(p.arg, inspect.Parameter.KEYWORD_ONLY) for p in a.kwonlyargs]
    if a.kwarg:
        params.append((a.kwarg.arg, inspect.Parameter.VAR_KEYWORD))
    return params


def _runtime_signature(name: str) -> inspect.Signature:
    """The installed method's signature; a forwarding method (``*args, **kwargs``) has the
    signature of the fungrad.numpy function it calls."""
    fn = getattr(Array, name)
    sig = inspect.signature(fn)
    kinds = [p.kind for p in sig.parameters.values()]
    if kinds == [
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.VAR_POSITIONAL,
        inspect.Parameter.VAR_KEYWORD,
    ]:
        sig = inspect.signature(getattr(fnp, name))
    return sig


def test_declared_names_are_the_installed_names():
    methods, properties = _declarations()
    installed = set(array_methods._OPERATORS) | set(array_methods._METHODS)
    missing = installed - _UNDECLARED - set(methods)
    extra = set(methods) - installed
    assert not missing, f"installed on Array but not declared in fungrad/array.py: {missing}"
    assert not extra, f"declared in fungrad/array.py but not installed: {extra}"
    assert properties == set(array_methods._PROPERTIES)
    for name in installed | properties:  # the run-time class has them all (and the tracer)
        assert hasattr(Array, name) and hasattr(core.Tracer, name), name


@pytest.mark.parametrize(
    "name", sorted(set(array_methods._OPERATORS) - _UNDECLARED | set(array_methods._METHODS))
)
def test_declared_parameters_match_runtime(name):
    """Each declared parameter is a run-time parameter of the same kind, in order; a run-time
    parameter left out of the declaration has a default (a hidden option, never a required
    argument)."""
    methods, _ = _declarations()
    declared = _declared_params(methods[name])
    runtime = list(_runtime_signature(name).parameters.values())[1:]  # self
    names = [p.name for p in runtime]
    positions = []
    for pname, kind in declared:
        assert pname in names, f"{name}: declared parameter {pname!r} does not exist at run time"
        p = runtime[names.index(pname)]
        assert p.kind == kind, f"{name}({pname}): declared {kind}, run time {p.kind}"
        positions.append(names.index(pname))
    assert positions == sorted(positions), f"{name}: parameter order differs"
    for p in runtime:
        if p.name not in dict(declared):
            assert p.default is not inspect.Parameter.empty or p.kind in (
                inspect.Parameter.VAR_POSITIONAL,
                inspect.Parameter.VAR_KEYWORD,
            ), f"{name}: required run-time parameter {p.name!r} is not declared"


# -- mypy --------------------------------------------------------------------------------------

_ERROR_LINE = re.compile(r"^(typing_sample\w*\.py):(\d+): error: (.*)\[([\w-]+)\]$")


def _marked_errors() -> set[tuple[str, int, str]]:
    lines = (TESTS / "typing_sample_errors.py").read_text().splitlines()
    return {
        ("typing_sample_errors.py", i, m.group(1))
        for i, line in enumerate(lines, 1)
        if (m := re.search(r"# E: ([\w-]+)$", line))
    }


def test_mypy_accepts_the_sample_and_flags_the_errors(request, tmp_path):
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e .[test])")
    try:
        cache = request.config.cache.mkdir("mypy")
    except (AttributeError, ValueError):  # pytest run without its cache plugin
        cache = tmp_path / "mypy-cache"
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n")  # the project's own settings, if any, play no part
    env = dict(os.environ, MYPYPATH=str(ROOT))
    # fungrad is read from the working tree as an installed package would be: its types are
    # used, errors inside it are not this test's subject (follow_imports=silent).
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(config),
            "--cache-dir",
            str(cache),
            "--follow-imports=silent",
            "--show-error-codes",
            "--no-pretty",
            "--no-color-output",
            "typing_sample.py",
            "typing_sample_errors.py",
        ],
        cwd=TESTS,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode in (0, 1), out
    got = set()
    for line in proc.stdout.splitlines():
        m = _ERROR_LINE.match(line)
        if m:
            got.add((m.group(1), int(m.group(2)), m.group(4)))
    expected = _marked_errors()
    assert len(expected) >= 10
    assert not {e for e in got if e[0] == "typing_sample.py"}, out
    assert got == expected, (
        f"missing: {sorted(expected - got)}\nunexpected: {sorted(got - expected)}\n{out}"
    )


def test_pyright_accepts_the_sample_and_flags_the_errors(tmp_path):
    """The same two samples under pyright, which infers the return types of unannotated
    library functions (mypy takes them as Any), so it catches more false errors."""
    import json
    import shutil

    pyright = os.environ.get("FUNGRAD_PYRIGHT") or shutil.which("pyright")
    if not pyright:
        pytest.skip(
            "pyright is not installed (npm install -g pyright, or set FUNGRAD_PYRIGHT); "
            "the mypy test above checks the same samples"
        )
    config = tmp_path / "pyrightconfig.json"
    config.write_text(
        json.dumps(
            {
                "extraPaths": [str(ROOT)],
                "typeCheckingMode": "standard",
                "reportUnusedExpression": False,
            }
        )
    )
    proc = subprocess.run(
        [
            pyright,
            "-p",
            str(config),
            "--pythonpath",
            sys.executable,
            "--outputjson",
            str(TESTS / "typing_sample.py"),
            str(TESTS / "typing_sample_errors.py"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = json.loads(proc.stdout)
    got = {
        (Path(d["file"]).name, d["range"]["start"]["line"] + 1)
        for d in report["generalDiagnostics"]
        if d["severity"] == "error"
    }
    expected = {(f, line) for f, line, _ in _marked_errors()}
    assert got == expected, (
        f"missing: {sorted(expected - got)}\n"
        f"unexpected: {sorted(got - expected)}\n{proc.stdout[:4000]}"
    )


def test_sample_runs():
    from tests.typing_sample import main

    main()


# -- fungrad.typing -----------------------------------------------------------------------------


def test_typing_names():
    for name in (
        "ArrayLike",
        "DTypeLike",
        "Array",
        "DType",
        "Shape",
        "DimSize",
        "StaticScalar",
        "SupportsDType",
    ):
        assert hasattr(fgt, name), name
    assert fgt.Array is fg.Array and fgt.DType is np.dtype


@pytest.mark.parametrize(
    "value, ok",
    [
        (1, True),
        (2.5, True),
        (True, True),
        (np.float32(1), True),
        (np.ones(2), True),
        ("x", False),
        ([1.0], False),
        ((1,), False),
        (None, False),
        (1j, True),
    ],
)
def test_arraylike_isinstance(value, ok):
    assert isinstance(value, fgt.ArrayLike) is ok
    assert isinstance(fnp.ones(2), fgt.ArrayLike)


# -- isinstance(tracer, fg.Array) --------------------------------------------------------------


def _record(seen):
    def f(x):
        seen.append(
            (
                isinstance(x, fg.Array),
                isinstance(x, fnp.ndarray),
                isinstance(x, fgt.ArrayLike),
                is_concrete_array(x),
                isinstance(x, core.Tracer),
            )
        )
        return x * 2.0

    return f


@pytest.mark.parametrize("transform", ["jit", "grad", "vmap", "jvp", "make_jaxpr", "scan"])
def test_tracers_are_arrays(transform):
    seen = []
    f = _record(seen)
    x = fnp.arange(3.0)
    if transform == "jit":
        out = fg.jit(f)(x)
        np.testing.assert_allclose(out, np.arange(3.0) * 2)
    elif transform == "grad":
        g = fg.grad(lambda v: f(v).sum())(x)
        np.testing.assert_allclose(g, np.full(3, 2.0))
    elif transform == "vmap":
        out = fg.vmap(f)(x)
        np.testing.assert_allclose(out, np.arange(3.0) * 2)
    elif transform == "jvp":
        fg.jvp(f, (x,), (fnp.ones(3),))
    elif transform == "make_jaxpr":
        fg.make_jaxpr(f)(x)
    else:
        lax.scan(lambda c, v: (c + f(v), None), 0.0, x)
    assert seen and all(s == (True, True, True, False, True) for s in seen), seen


def test_isinstance_concrete_and_foreign_values():
    x = fnp.ones(2)
    assert isinstance(x, fg.Array) and is_concrete_array(x)
    for v in (np.ones(2), np.float32(1), 1.0, 3, [1.0], None, "a"):
        assert not isinstance(v, fg.Array) and not is_concrete_array(v)
    assert not issubclass(core.Tracer, fg.Array)  # as in JAX: instances only
    assert issubclass(fg.GpuArray, fg.Array)


def test_tracer_is_not_a_gpu_array():
    seen = []
    fg.jit(lambda v: seen.append(isinstance(v, fg.GpuArray)) or v)(fnp.ones(2))
    assert seen == [False]


def test_array_subclass_is_still_concrete():
    """A subclass instance (as GpuArray is) passes both checks; Array's metaclass answers
    subclasses by their real class."""

    class Sub(Array):
        __slots__ = ()

    s = Sub(np.ones(2, np.float32))
    assert isinstance(s, fg.Array) and isinstance(s, Sub) and is_concrete_array(s)
    assert not isinstance(fnp.ones(2), Sub)
    np.testing.assert_allclose(fnp.add(s, 1.0), np.full(2, 2.0))


def test_device_put_and_device_get_of_tracers():
    """device_put passes tracers through; device_get refuses them (concrete-only paths)."""
    out = fg.jit(lambda v: fg.device_put(v) + 1)(fnp.ones(2))
    np.testing.assert_allclose(out, np.full(2, 2.0))
    with pytest.raises(TypeError, match="device_get"):
        fg.jit(lambda v: fg.device_get(v))(fnp.ones(2))
