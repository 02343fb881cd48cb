"""The GPU computes the WGSL that wgsl_math.py writes, operation for operation.

Mesa (lavapipe) simplifies float algebra unless the builder hides the operands (an opaque
integer OR: ``keep`` and the cancellation guard): measured, it rewrote ``c + (a + b)`` with a
constant c as ``(c + a) + b`` (erfc's ``1 + (erx + rat)``: 15609 results of 2M off by an ulp),
``x + (p + q)`` with two products as ``(x + p) + q`` (sin/cos lost their tails: 1.2 ulp),
``2 t + t t`` as ``t (2 + t)`` (acosh's two-sum), and ``1 + (r + r^2 P)`` as ``(1 + r) +
r^2 P`` (exp's last step). Each of those changes a few results by an ulp, which tolerance
tests miss. Here every function's WGSL is also evaluated in numpy, each operation rounded
once in float32 (division and sqrt correctly rounded, as on CPU adapters), and on a CPU adapter
the GPU's bits must be those. Other adapters may round division and sqrt differently (WGSL
allows 2.5 ulp): there the results must agree within 3 ulp. A device that flushes float32
subnormals (WGSL allows it) is compared with the evaluation flushed the same way; one whose
compiler contracts a * b + c into an fma (NVIDIA's: the runtime's ``contracts_mul_add``)
does not run the WGSL as written, and is held to the functions' ulp bounds instead. The
evaluation is tests/wgsl_math_emulation.py's."""

from __future__ import annotations

import numpy as np
import pytest

import fungrad as fg
from fungrad import lax
from fungrad.lowering.gpu import runtime as gpu_runtime
from tests import wgsl_math_emulation as emulation

pytestmark = pytest.mark.usefixtures("gpu")

F32, I32 = np.float32, np.int32

# name: (lo, hi) of the arguments (log-spaced when lo > 0), where the functions' tails matter
FUNCTIONS = {
    "exp": (-104.0, 89.0),
    "exp2": (-140.0, 128.0),
    "expm1": (-20.0, 30.0),
    "log": (1e-30, 1e30),
    "log1p": (-0.999, 1e6),
    "tanh": (-10.0, 10.0),
    "logistic": (-80.0, 30.0),
    "sin": (-1e4, 1e4),
    "cos": (-1e4, 1e4),
    "tan": (-100.0, 100.0),
    "sinh": (-89.0, 89.0),
    "cosh": (-89.0, 89.0),
    "asinh": (-1e3, 1e3),
    "acosh": (1.0, 3.0),
    "atanh": (-1.0, 1.0),
    "atan": (-50.0, 50.0),
    "asin": (-1.0, 1.0),
    "acos": (-1.0, 1.0),
    "erf": (-4.0, 4.0),
    "erfc": (-4.0, 9.0),
    "cbrt": (-1e4, 1e4),
    "lgamma": (-10.0, 20.0),
    "digamma": (-10.0, 20.0),
}


def _evaluate(name: str, *args: np.ndarray) -> np.ndarray:
    """``name`` on float32 ``args`` as its WGSL says, each operation rounded once (inputs
    flushed first where the device flushes subnormals)."""
    rt = gpu_runtime.runtime()
    if rt.flushes_subnormals:
        args = tuple(emulation.flush(a) for a in args)
    return emulation.evaluate(name, *args, fused_fma=rt.fused_fma)


def _arguments(lo: float, hi: float, n: int = 200_000) -> np.ndarray:
    rng = np.random.default_rng(11)
    if lo > 0:
        return np.exp(rng.uniform(np.log(lo), np.log(hi), n)).astype(F32)
    return np.concatenate([rng.uniform(lo, hi, n), rng.uniform(lo / 50, hi / 50, n)]).astype(F32)


def _assert_as_written(got: np.ndarray, want: np.ndarray, label: str, *args) -> None:
    """``got`` (the GPU's) is ``want`` (the WGSL as written): bit for bit on a CPU adapter,
    within 3 ulp elsewhere. Where the device flushes subnormals, ``want``'s are flushed too.
    Where the compiler contracts a * b + c (``contracts_mul_add``) the WGSL as written is not
    what runs: there ``got`` must keep the function's ulp bound against float64 instead
    (tests/test_gpu_math_contraction.py checks the same bounds under contraction here)."""
    rt = gpu_runtime.runtime()
    if rt.flushes_subnormals:
        want = emulation.flush(want)
    if rt.contracts_mul_add:
        err = emulation.errors(label, got, *args)
        if rt.flushes_subnormals:
            err = np.where((got == 0) & (np.abs(want) < 2.0**-126), 0.0, err)
        bound = emulation.REFERENCES[label][1]
        i = int(np.argmax(err))
        assert err[i] <= bound, (
            f"{label}{tuple(a[i] for a in args)} = {got[i]!r}: {err[i]:.2f} ulp > {bound}"
        )
        return
    if rt.cpu_adapter:
        bad = (got.view(I32) != want.view(I32)) & ~(np.isnan(got) & np.isnan(want))
    else:
        with np.errstate(invalid="ignore"):
            bad = np.abs(got.astype(np.float64) - want) > 3 * np.spacing(np.abs(want))
        bad &= ~((got == want) | (np.isnan(got) & np.isnan(want)))
    where = np.flatnonzero(bad)
    assert where.size == 0, (
        f"{label}: {where.size} of {got.size} results differ from the WGSL as written, e.g. at "
        f"{tuple(a[where[0]] for a in args)}: {got[where[0]]!r} instead of {want[where[0]]!r}"
    )


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_gpu_computes_the_wgsl_as_written(name):
    x = _arguments(*FUNCTIONS[name])
    got = np.asarray(fg.jit(getattr(lax, name), backend="gpu")(x))
    _assert_as_written(got, _evaluate(name, x), name, x)


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_issue15_large_arguments_as_written(name):
    """From 2^24 on sin/cos/tan reduce by Payne-Hanek (32-bit integer digits, then a float32
    double-word times pi/2): that path too is the WGSL as written."""
    rng = np.random.default_rng(13)
    x = (np.exp2(rng.uniform(24, 127.99, 200_000)) * rng.choice([-1, 1], 200_000)).astype(F32)
    got = np.asarray(fg.jit(getattr(lax, name), backend="gpu")(x))
    _assert_as_written(got, _evaluate(name, x), name, x)


@pytest.mark.parametrize("name", ["pow", "atan2"])
def test_two_argument_functions_as_written(name):
    rng = np.random.default_rng(12)
    if name == "pow":
        a = np.exp(rng.uniform(np.log(1e-3), np.log(1e3), 200_000)).astype(F32)
        c = rng.uniform(-12, 12, 200_000).astype(F32)
    else:
        a, c = (rng.uniform(-10, 10, 200_000).astype(F32) for _ in range(2))
    got = np.asarray(fg.jit(getattr(lax, name), backend="gpu")(a, c))
    _assert_as_written(got, _evaluate(name, a, c), name, a, c)


def test_the_evaluation_follows_float32_rounding():
    """The evaluator itself: one function checked against values computed by hand."""
    x = np.float32([0.0, 1.0, -2.5, 10.0, np.inf, -np.inf, np.nan])
    with np.errstate(over="ignore", invalid="ignore"):
        ref = np.exp(x.astype(np.float64))
    got = _evaluate("exp", x)
    np.testing.assert_allclose(got, ref, rtol=1.2e-7)


def _run_fg_fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """wgsl_math's software ``fg_fma`` on the device, one invocation per element."""
    from fungrad.lowering.gpu.helpers import HELPERS
    from fungrad.lowering.math import wgsl as wgsl_math

    rt = gpu_runtime.runtime()
    n = a.size
    src = "\n".join(
        [
            "@group(0) @binding(0) var<storage, read_write> d: array<f32>;",
            HELPERS["isnan"],
            wgsl_math._FMA,
            "@compute @workgroup_size(64)",
            "fn main(@builtin(global_invocation_id) id: vec3<u32>) {",
            f"  let i = id.x;\n  if (i >= {n}u) {{ return; }}",
            f"  d[i] = fg_fma(d[i], d[{n}u + i], d[{2 * n}u + i]);\n}}",
        ]
    )
    db = rt.upload(np.concatenate([a, b, c]).astype(F32))
    pipeline = rt.pipeline("test_fg_fma", src)
    group = rt.device.create_bind_group(
        layout=pipeline.get_bind_group_layout(0),
        entries=[
            {"binding": 0, "resource": {"buffer": db.buffer, "offset": 0, "size": db.buffer.size}}
        ],
    )
    enc = rt.device.create_command_encoder()
    cp = enc.begin_compute_pass()
    cp.set_pipeline(pipeline)
    cp.set_bind_group(0, group)
    cp.dispatch_workgroups(-(-n // 64))
    cp.end()
    rt.queue.submit([enc.finish()])
    return rt.download(db, (3 * n,), F32)[:n]


def test_software_fma_is_exact_for_residuals():
    """``fg_fma`` (for adapters whose fma rounds twice) gives a residual a b - fl(a b) exactly
    (what the error-free transformations ask of it; checked with rational arithmetic) and
    any other a b + c within an ulp."""
    from fractions import Fraction

    rng = np.random.default_rng(17)
    n = 3000
    a = (rng.uniform(0.5, 2, n) * np.exp2(rng.integers(-40, 40, n))).astype(F32)
    b = (rng.uniform(-2, 2, n) * np.exp2(rng.integers(-40, 40, n))).astype(F32)
    residual = np.arange(n) % 2 == 0
    c = np.where(residual, -(a * b), rng.uniform(-1, 1, n) * np.abs(a * b)).astype(F32)
    got = _run_fg_fma(a, b, c)
    exact = [
        Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)) for x, y, z in zip(a, b, c)
    ]
    want = np.array([float(v) for v in exact])  # exact for the residuals (24 bits at most)
    np.testing.assert_array_equal(got[residual], want[residual].astype(F32))
    err = np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want.astype(F32)))
    assert err.max() <= 1.0, err.max()
