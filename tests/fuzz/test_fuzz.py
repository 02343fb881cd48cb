"""The differential fuzz test (issue 15): random programs run eagerly, jitted on the CPU and the
GPU, under grad and under vmap, compared element by element (docs/fuzzing.md).

``test_fuzz_programs`` is the CI budget: a fixed number of hypothesis-drawn programs
(derandomized under CI=true; hypothesis shrinks a failing program's choices). ``--fuzz-long``
runs ``test_fuzz_long`` instead: the long run of tests/fuzz/longrun.py, writing each failure
as a minimal standalone repro under fuzz-failures/.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
from tests.fuzz import longrun
from tests.fuzz.check import Checker, Failure, compare
from tests.fuzz.gen import DrawChooser, RandomChooser, draw_program
from tests.fuzz.program import Input, Op, Program
from tests.fuzz.reduce import shrink

CI_PROGRAMS = 150

_checker = None


def checker() -> Checker:
    global _checker
    if _checker is None:
        _checker = Checker(gpu=True)
    return _checker


@pytest.fixture(scope="module")
def not_long(request):
    if request.config.getoption("--fuzz-long"):
        pytest.skip("--fuzz-long runs test_fuzz_long instead")


@settings(max_examples=CI_PROGRAMS)
@given(st.data())
def test_fuzz_programs(not_long, data):
    seed = data.draw(st.integers(0, 2**31 - 1), label="seed")
    prog, builder = draw_program(DrawChooser(data), seed)
    for expr, exc in builder.crashes:
        pytest.fail(f"eager fungrad crashed on {expr}: {exc!r}")
    failures = checker().run(prog)
    assert not failures, "\n\n".join(f.repro() for f in failures)


def test_fuzz_long(request, tmp_path):
    """``pytest tests/fuzz --fuzz-long [--fuzz-programs N] [--fuzz-seconds T]``."""
    if not request.config.getoption("--fuzz-long"):
        pytest.skip("the long fuzz run needs --fuzz-long")
    argv = ["--programs", str(request.config.getoption("--fuzz-programs")),
            "--out", "fuzz-failures"]
    if request.config.getoption("--fuzz-seconds") is not None:
        argv += ["--seconds", str(request.config.getoption("--fuzz-seconds"))]
    assert longrun.main(argv) == 0, "failures were written to fuzz-failures/"


# --- the harness itself: each check must be able to fail ----------------------------------------

def test_fuzz_compare_finds_planted_mismatches():
    ref = np.array([1.0, np.nan, np.inf, -2.0], np.float32)
    shadow = ref.astype(np.float64)
    eps = float(np.finfo(np.float32).eps)
    assert compare(ref, ref, shadow, 0.0, eps) is None
    one_ulp = np.where(np.isfinite(ref), np.nextafter(ref, np.float32(9)), ref)
    assert compare(one_ulp, ref, shadow, 0.0, eps) is None
    wrong_nan = np.array([1.0, 0.0, np.inf, -2.0], np.float32)
    assert "at (1,)" in compare(wrong_nan, ref, shadow, 0.0, eps)
    wrong_inf = np.array([1.0, np.nan, -np.inf, -2.0], np.float32)
    assert "at (2,)" in compare(wrong_inf, ref, shadow, 0.0, eps)
    off = np.array([1.0, np.nan, np.inf, -2.001], np.float32)
    assert "at (3,)" in compare(off, ref, shadow, 0.0, eps)
    assert "dtype" in compare(ref.astype(np.float64), ref, shadow, 0.0, eps)
    ints = np.array([np.iinfo(np.int32).min, 3], np.int32)
    assert compare(ints + np.int32(1), ints, None, 0.0, 0.0) is not None
    # Rounding the float64 shadow shows is tolerated; a difference far beyond it is not.
    cancel = np.array([0.0], np.float32)
    assert compare(np.array([0.5], np.float32), cancel, np.array([1.0]), 0.0, eps) is None
    assert compare(np.array([9.0], np.float32), cancel, np.array([1.0]), 0.0, eps) is not None


def planted_program() -> Program:
    """A program whose second operation is 'wrong' under jit only by construction of the
    checker below."""
    return Program(
        inputs=(Input("x0", (3,), "float32"),),
        ops=(Op("v1", "fnp.sin(x0)", ("x0",), "unary"),
             Op("v2", "fnp.cos(v1) * 2.0", ("v1",), "unary"),
             Op("v3", "fnp.exp(x0)", ("x0",), "unary")),
        outputs=("v2", "v3"), seed=7, special=0.0)


class _PlantedChecker(Checker):
    """A checker for which any program containing ``cos`` fails the 'jit' check."""

    def __init__(self):
        super().__init__(gpu=False, grad=False, vmap=False)

    def run(self, prog, only=None):
        if any("cos" in op.expr for op in prog.ops):
            return [Failure("jit", "planted mismatch", prog)]
        return []


def test_fuzz_shrink_keeps_only_what_fails():
    small = shrink(_PlantedChecker(), Failure("jit", "planted mismatch", planted_program()))
    assert [op.out for op in small.program.ops] == ["v1", "v2"]
    assert small.program.outputs == ("v2",)


def test_fuzz_repro_is_standalone_and_reproduces(capsys):
    prog = planted_program()
    script = prog.repro("jit", "a note")
    namespace: dict = {}
    exec(compile(script, "<repro>", "exec"), namespace)
    printed = capsys.readouterr().out
    x = prog.input_values()[0]
    expected = np.cos(np.sin(x.astype(np.float64))) * 2.0
    assert str(np.float32(expected[0]))[:5] in printed
    assert "jit" in printed and "eager" in printed


def test_fuzz_programs_are_reproducible_from_their_seed():
    a, _ = draw_program(RandomChooser(123), 123)
    b, _ = draw_program(RandomChooser(123), 123)
    assert a.source() == b.source()
    assert all(np.array_equal(u, v, equal_nan=True)
               for u, v in zip(a.input_values(), b.input_values()))
    fg.jit(a.function())(*a.input_values())
