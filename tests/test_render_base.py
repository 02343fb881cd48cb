"""The renderer base shared by the backends (fungrad/lowering/render.py): op and step tables
fail loudly on a missing entry, and ``kernel_record`` identifies kernels by structure (the CPU
renderer defines one function for kernels with equal records)."""

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.ir import passes
from fungrad.lowering import fusion
from fungrad.lowering.cpu.policy import CpuPolicy
from fungrad.lowering.fusion import Kernel
from fungrad.lowering.render import KernelRenderer, StepRenderers, kernel_record


class _Toy(KernelRenderer):
    backend = "toy"
    code_for_op = {"add": lambda w, a, b: f"({a} + {b})"}


def test_render_op_dispatches_through_the_table_and_names_a_missing_op():
    w = _Toy(kern=None)
    assert w.render_op("add", "x", "y") == "(x + y)"
    with pytest.raises(TypeError, match=r"toy renderer: no code for kernel op 'mul'"):
        w.render_op("mul", "x", "y")


def test_tmp_names_are_fresh_and_prefixed():
    class Prefixed(_Toy):
        value_prefix = "%"

    w = Prefixed(kern=None)
    assert [w.tmp(), w.tmp("p"), w.tmp()] == ["%t1", "%p2", "%t3"]


def test_step_table_names_an_unknown_step_kind():
    class Odd:
        pass

    table = StepRenderers("toy", {int: lambda w, step: [f"int {step}"]})
    assert table(None, 3) == ["int 3"]
    assert int in table and Odd not in table
    with pytest.raises(TypeError, match=r"toy renderer: no renderer for step kind Odd"):
        table(None, Odd())


def _kernels(fn, *args):
    prog = fusion.plan(passes.optimize(fg.make_jaxpr(fn)(*args)), "main", policy=CpuPolicy())
    return [s for s in prog.steps if isinstance(s, Kernel)]


def _record(k: Kernel):
    used = sorted({s.buffer.id for s in k.stores} | {b.id for b in k.reads()})
    return kernel_record(k, used)


@pytest.mark.parametrize("scale,same", [(0.1, True), (0.2, False), (-0.1, False)])
def test_kernel_record_is_structure_without_names(scale, same):
    """``a - 0.1 g`` and ``b - scale s`` (kept apart by a sort) have equal records exactly
    when the constants agree."""

    def f(a, b, g):
        s = fnp.sort(a - 0.1 * g)
        return s, b - scale * s

    x = np.zeros(2000, np.float32)
    k1, k2 = _kernels(f, x, x, x)
    assert k1.name != k2.name
    assert (_record(k1) == _record(k2)) is same


def test_kernel_record_tells_shapes_and_dtypes_apart():
    def f(a, b):
        s = fnp.sort(a * 2.0)
        return s, b * 2.0

    for b in (np.zeros(300, np.float32), np.zeros(200, np.int32)):
        k1, k2 = _kernels(f, np.zeros(200, np.float32), b)
        assert _record(k1) != _record(k2)
