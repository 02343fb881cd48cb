"""The backends' policies (``fusion.Policy``): what the lowering rules in ``fungrad/lax`` ask
instead of a backend's name, and the CPU's matrix products without BLAS (a numpy that bundles
no OpenBLAS, simulated by making ``blas.find_blas`` report it unavailable).

Without BLAS the float32 products that the CPU's own gemm library runs are still Gemm steps
(not the per-element loop), compiled code never names a BLAS symbol, and every product --
float32 in any layout, float64 -- gives numpy's numbers. The GPU plans its Gemm whether or not
the CPU has BLAS. The policies' answers are the layouts the rules chose by backend before."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.ir import passes
from fungrad.lowering import BACKENDS, compile_jaxpr, fusion
from fungrad.lowering.cpu import blas
from fungrad.lowering.cpu import gemm as library
from fungrad.lowering.cpu.policy import CpuPolicy
from fungrad.lowering.gpu.policy import GpuPolicy


@pytest.fixture
def no_blas(monkeypatch):
    """numpy without OpenBLAS, as the compiler sees it."""
    monkeypatch.setattr(blas, "find_blas", lambda: blas.BlasInfo(reason="simulated: no BLAS"))


def _build(f, *args):
    args = [fnp.asarray(a) for a in args]
    return compile_jaxpr(fg.make_jaxpr(f)(*args), "cpu", "test"), args


def _gemms(steps):
    return [s for s in steps if isinstance(s, fusion.Gemm)]


def _plan(f, *args, policy=None):
    return fusion.plan(
        passes.optimize(fg.make_jaxpr(f)(*args)), policy=CpuPolicy() if policy is None else policy
    )


def _close(got, want, k):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-6 * k + 1e-5)


LAYOUTS = {
    "a @ b": ((40, 50), (50, 30), lambda a, b: a @ b),
    "a.T @ b": ((50, 40), (50, 30), lambda a, b: a.T @ b),
    "a @ b.T": ((40, 50), (30, 50), lambda a, b: a @ b.T),
    "a.T @ b.T": ((50, 40), (30, 50), lambda a, b: a.T @ b.T),
    "(a @ b).T": ((40, 50), (50, 30), lambda a, b: (a @ b).T * 2),
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_no_blas_float32_product_is_a_gemm_with_numpys_numbers(no_blas, layout):
    """(a) float32 products stay Gemm steps, run by the library alone, in every operand layout
    (the library does not read both operands transposed: one is stored in place first)."""
    sa, sb, f = LAYOUTS[layout]
    rng = np.random.default_rng(len(layout))
    a, b = (rng.standard_normal(s).astype(np.float32) for s in (sa, sb))
    exe, args = _build(f, a, b)
    (g,) = _gemms(exe.program.steps)
    assert not (g.trans_a and g.trans_b)
    assert library.supports(g)
    assert "fg_sgemm" not in exe.ir and "fg_dgemm" not in exe.ir
    (out,) = (np.asarray(o) for o in exe.call(args))
    _close(out, f(a.astype(np.float64), b.astype(np.float64)), 50)


@pytest.mark.parametrize("layout", ["a @ b", "a @ b.T"])
def test_no_blas_large_float32_product_runs_in_the_library(no_blas, layout):
    """A product past the library's serial size and cache plan (where BLAS would be called)
    still runs in the library, with numpy's numbers, and the IR calls no BLAS. (A^T is in the
    library's plan at any size.)"""
    m, k, n = 1031, 1029, 333  # A (m x k) past MAX_A_FLOATS, b (k x 352) past the stack plan
    shapes = {"a @ b": ((m, k), (k, n)), "a.T @ b": ((k, m), (k, n)), "a @ b.T": ((m, k), (n, k))}[
        layout
    ]
    f = LAYOUTS[layout][2]
    rng = np.random.default_rng(7)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    exe, args = _build(f, a, b)
    (g,) = _gemms(exe.program.steps)
    assert not library.supports(g) and library.runs(g)
    assert "fg_sgemm" not in exe.ir and "fg_dgemm" not in exe.ir
    (out,) = (np.asarray(o) for o in exe.call(args))
    _close(out, f(a.astype(np.float64), b.astype(np.float64)), k)


def test_no_blas_mlp_step_and_jit_match_numpy(no_blas):
    """An SGD step of a small MLP (forward, backward and the fused weight updates) through a
    fresh jit, without BLAS, against the same step in float64 numpy."""
    rng = np.random.default_rng(1)
    w1, w2 = (rng.standard_normal(s).astype(np.float32) * 0.1 for s in ((64, 48), (48, 10)))
    x, y = rng.standard_normal((32, 64)).astype(np.float32), rng.standard_normal((32, 10))
    y = y.astype(np.float32)

    def step(w1, w2, x, y):
        def loss(w):
            return fnp.sum((fnp.tanh(x @ w[0]) @ w[1] - y) ** 2)

        g1, g2 = fg.grad(loss)((w1, w2))
        return w1 - 0.01 * g1, w2 - 0.01 * g2

    jaxpr = fg.make_jaxpr(step)(w1, w2, x, y)
    # x @ w1 and the update of w1 are Gemm steps (the 10-column products are below the bound)
    assert len(_gemms(fusion.plan(passes.optimize(jaxpr), policy=CpuPolicy()).steps)) == 2
    n1, n2 = (np.asarray(o) for o in fg.jit(step)(w1, w2, x, y))
    w1d, w2d, xd, yd = (v.astype(np.float64) for v in (w1, w2, x, y))
    h = np.tanh(xd @ w1d)
    d = 2 * (h @ w2d - yd)
    g2 = h.T @ d
    g1 = xd.T @ ((d @ w2d.T) * (1 - h**2))
    np.testing.assert_allclose(n1, w1d - 0.01 * g1, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(n2, w2d - 0.01 * g2, rtol=1e-4, atol=1e-5)


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    m=st.integers(1, 70), n=st.integers(1, 70), k=st.integers(0, 300), seed=st.integers(0, 2**16)
)
def test_no_blas_float64_product_matches_numpy(x64, m, n, k, seed):
    """(b) float64 products (which only BLAS would run as a Gemm) give numpy's numbers through
    the loop kernel; nothing compiled calls BLAS."""
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(blas, "find_blas", lambda: blas.BlasInfo(reason="simulated: no BLAS"))
        exe, args = _build(lambda a, b: a @ b, a, b)
        assert not _gemms(exe.program.steps)
        assert "fg_dgemm" not in exe.ir
        (out,) = (np.asarray(o) for o in exe.call(args))
    np.testing.assert_allclose(out, a @ b, rtol=1e-12, atol=1e-12 * max(k, 1))


def test_no_blas_conv_is_a_gemm_with_numpys_numbers(no_blas):
    """A convolution's im2col product is a Gemm the library runs (as dot_general's)."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 4, 9, 9)).astype(np.float32)
    w = rng.standard_normal((8, 4, 3, 3)).astype(np.float32)

    def f(x, w):
        return lax.conv_general_dilated(x, w, (1, 1), "VALID")

    exe, args = _build(f, x, w)
    assert [g.name for g in _gemms(exe.program.steps)] == ["conv_general_dilated"]
    assert "fg_sgemm" not in exe.ir
    (out,) = (np.asarray(o) for o in exe.call(args))
    want = np.zeros((2, 8, 7, 7))
    for i in range(3):
        for j in range(3):
            want += np.einsum(
                "nchw,oc->nohw",
                x[:, :, i : i + 7, j : j + 7].astype(np.float64),
                w[:, :, i, j].astype(np.float64),
            )
    _close(out, want, 36)


def test_no_blas_gpu_still_plans_its_gemm(no_blas):
    """(c) the GPU's tiled matmul shader needs no BLAS: its plan has the Gemm, batched too."""
    rng = np.random.default_rng(3)
    a, b = (
        rng.standard_normal((4, 64, 96)).astype(np.float32),
        rng.standard_normal((4, 96, 80)).astype(np.float32),
    )
    for f, args in (
        (lambda a, b: a @ b, (a[0], b[0])),
        (lambda a, b: a @ b, (a, b)),
        (lambda a, b: a.T @ b.T, (a[0].T, b[0].T)),
    ):
        (g,) = _gemms(_plan(f, *args, policy=GpuPolicy()).steps)
        assert g.m * g.n * g.k == 64 * 80 * 96


def test_no_blas_gpu_runs_its_gemm(no_blas, gpu):
    """(c) and it runs, with numpy's numbers."""
    rng = np.random.default_rng(4)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in ((64, 96), (96, 80)))
    out = np.asarray(fg.jit(lambda a, b: a @ b, backend="gpu")(a, b))
    _close(out, a.astype(np.float64) @ b, 96)


def test_with_blas_the_cpu_takes_every_float_product(monkeypatch):
    """With BLAS the CPU's policy wants a Gemm for every float product above the size bound,
    float64, batched and large included; without, only those the library runs alone."""
    monkeypatch.setattr(blas, "find_blas", lambda: blas.BlasInfo(reason=None))
    p = CpuPolicy()
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    assert p.wants_gemm(512, 512, 512, 1, f32) and p.wants_gemm(64, 64, 64, 1, f64)
    assert p.wants_gemm(40, 30, 50, 8, f32) and p.gemm_transposes_both
    assert not p.wants_gemm(16, 16, 16, 1, f32) and not p.wants_gemm(40, 30, 50, 65, f32)
    monkeypatch.setattr(blas, "find_blas", lambda: blas.BlasInfo(reason="simulated"))
    assert p.wants_gemm(64, 64, 64, 1, f32) and not p.gemm_transposes_both
    assert not p.wants_gemm(64, 64, 64, 1, f64) and not p.wants_gemm(40, 30, 50, 8, f32)
    assert p.wants_gemm(512, 512, 512, 1, f32)  # the library blocks any size


def test_policies_answer_what_the_rules_chose_by_backend():
    """The rules' old backend choices, now the policies' answers: row dots inline and column
    layouts on the CPU only, float64 scans on the CPU only, stored outer reductions on the GPU,
    and the size bounds of the column layouts."""
    cpu, gpu = CpuPolicy(), GpuPolicy()
    assert (cpu.name, gpu.name) == ("cpu", "gpu")
    assert cpu.has_float64 and not gpu.has_float64
    assert gpu.stores_outer_reductions and not cpu.stores_outer_reductions
    assert cpu.inline_row_dots and not gpu.inline_row_dots
    assert cpu.wide_scan_carry and not gpu.wide_scan_carry
    assert cpu.joins_across_outputs and not gpu.joins_across_outputs
    assert cpu.column_reduction(4096, 8) and not cpu.column_reduction(4095, 8)
    assert not cpu.column_reduction(1 << 20, 7)
    assert cpu.column_dot(64, 8) and not cpu.column_dot(63, 8) and not cpu.column_dot(64, 7)
    assert not gpu.column_reduction(1 << 20, 1024) and not gpu.column_dot(1 << 20, 1024)
    assert gpu.wants_gemm(32, 32, 16, 1, np.dtype(np.float32))
    assert not gpu.wants_gemm(16, 16, 16, 1, np.dtype(np.float32))
    assert [BACKENDS[n].policy().name for n in ("cpu", "gpu")] == ["cpu", "gpu"]


def _steps(prog):
    return [
        (type(s).__name__, getattr(s, "loops", None) and [v.extent for v in s.loops])
        for s in prog.steps
    ]


def test_plans_follow_the_policy():
    """Each rule's plan under each policy: a column sum, a row dot and a column dot are loop
    nests on the CPU and one reduction kernel / one Gemm on the GPU; a float32 cumsum carries
    float64 on the CPU; a row max that every element reads is stored first on the GPU."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((512, 64)).astype(np.float32)
    cpu, gpu = CpuPolicy(), GpuPolicy()
    colsum = lambda x: fnp.sum(x, 0)  # noqa: E731
    assert [n for n, _ in _steps(_plan(colsum, x, policy=cpu))] == ["Kernel"] * 3
    assert _steps(_plan(colsum, x, policy=gpu)) == [("Kernel", [64])]
    m, v = rng.standard_normal((300, 200)).astype(np.float32), np.ones(200, np.float32)
    assert _steps(_plan(lambda m, v: m @ v, m, v, policy=cpu)) == [("Kernel", [300])]
    assert [n for n, _ in _steps(_plan(lambda m, v: m @ v, m, v, policy=gpu))] == ["Gemm"]
    u = np.ones(300, np.float32)
    assert len(_steps(_plan(lambda u, m: u @ m, u, m, policy=cpu))) == 3
    assert [n for n, _ in _steps(_plan(lambda u, m: u @ m, u, m, policy=gpu))] == ["Gemm"]
    wide = {b.dtype for b in _plan(lambda x: fnp.cumsum(x, 1), x, policy=cpu).temps}
    assert np.dtype(np.float64) in wide
    assert {b.dtype for b in _plan(lambda x: fnp.cumsum(x, 1), x, policy=gpu).temps} <= {
        np.dtype(np.float32)
    }
    rowmax = lambda x: x - fnp.max(x, 1, keepdims=True)  # noqa: E731
    assert len(_plan(rowmax, x, policy=cpu).steps) == 1
    assert len(_plan(rowmax, x, policy=gpu).steps) == 2


def test_a_planner_needs_a_policy_and_sub_planners_share_it():
    with pytest.raises(TypeError, match="policy"):
        fusion.Planner("main")
    top = fusion.Planner("main", policy=GpuPolicy())
    assert fusion.Planner("body", top).policy is top.policy
