"""The GPU's float32 math functions keep their ulp bounds where the shader compiler fuses
``a * b + c`` into one fma (no GPU needed: the WGSL evaluated in numpy).

SPIR-V from naga carries no NoContraction, so a Vulkan driver may contract any product into
a neighbouring add, and NVIDIA's does (the runtime's ``contracts_mul_add`` probe). That breaks
error-free transformations whose steps must see one rounded value: on the H100 pow was off by
47.5 ulp at pow(1.4462088, -97.719986), and here, with every product contracted, the WGSL from
before two-sums hid their operands gave pow 128 ulp and erfc 63 ulp. Each function's WGSL for
an adapter with a fused fma is evaluated with three contraction models
(tests/wgsl_math_emulation.py: every product, preferring the right operand, only products used
once) and checked against float64 references in ulps."""

from __future__ import annotations

import numpy as np
import pytest

from fungrad.lowering.math import wgsl as wgsl_math
from tests import wgsl_math_emulation as emu

F32 = np.float32
POLICIES = ("all", "right", "single")

# name: (lo, hi) of the arguments (log-spaced when lo > 0), as in test_gpu_math_exact.py
RANGES = {
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

# the arguments where the H100 missed pow's 1-ulp bound (its first device run)
H100_POW = [
    (1.4462088, -97.719986),
    (2.8183644, 9.962315),
    (2.2680597e-27, -1.1742828),
    (47.10213, 11.438509),
]


def _arguments(name: str, n: int = 8_000) -> list[np.ndarray]:
    rng = np.random.default_rng(21)
    if name == "pow":
        x = np.exp(rng.uniform(np.log(1e-30), np.log(1e30), n)).astype(F32)
        y = rng.uniform(-1.2, 1.2, n).astype(F32)
        x2 = np.exp(rng.uniform(np.log(0.5), np.log(2.0), n)).astype(F32)
        y2 = rng.uniform(-100, 100, n).astype(F32)
        return [np.concatenate([x, x2]), np.concatenate([y, y2])]
    if name == "atan2":
        return [rng.uniform(-10, 10, n).astype(F32) for _ in range(2)]
    lo, hi = RANGES[name]
    if lo > 0:
        return [np.exp(rng.uniform(np.log(lo), np.log(hi), n)).astype(F32)]
    return [np.concatenate([rng.uniform(lo, hi, n), rng.uniform(lo / 50, hi / 50, n)]).astype(F32)]


def _worst(name: str, args, **kw) -> tuple[float, tuple]:
    got = emu.evaluate(name, *args, fused_fma=True, **kw)
    err = emu.errors(name, got, *args)
    i = int(np.argmax(err))
    return float(err[i]), tuple(a[i] for a in args)


@pytest.mark.parametrize("name", [*sorted(RANGES), "pow", "atan2"])
def test_contracted_functions_keep_their_ulp_bounds(name):
    args = _arguments(name)
    bound = emu.REFERENCES[name][1]
    for policy in (None, *POLICIES):
        err, at = _worst(name, args, contract=policy)
        assert err <= bound, f"{name}{at} with contraction {policy}: {err:.2f} ulp > {bound}"


@pytest.mark.parametrize("policy", POLICIES)
def test_pow_at_the_h100_failures_within_one_ulp(policy):
    x, y = (np.array(v, F32) for v in zip(*H100_POW))
    err = emu.errors("pow", emu.evaluate("pow", x, y, contract=policy), x, y)
    assert err.max() <= 1.0, (H100_POW[int(np.argmax(err))], err.max())


def test_unhidden_two_sums_break_under_contraction(monkeypatch):
    """The emulation sees the bug the hiding fixes: with ``exact`` the identity (the WGSL as
    it was) and every product contracted, pow misses its bound by far."""
    monkeypatch.setattr(wgsl_math.WGSLBuilder, "exact", lambda self, v: v)
    wgsl_math._body.cache_clear()
    try:
        args = _arguments("pow")
        assert _worst("pow", args, contract=None)[0] <= 1.0
        assert _worst("pow", args, contract="all")[0] > 20.0
    finally:
        monkeypatch.undo()
        wgsl_math._body.cache_clear()


_SNIPPET = """fn fg_t_f32(a0: f32, a1: f32) -> f32 {
  let v0 = (a0 * a0);
  let v1 = (v0 + a1);
  let v2 = bitcast<f32>(bitcast<u32>(v0) | 0u);
  let v3 = (v2 + a1);
  return v1;
}"""


@pytest.mark.parametrize(
    "policy, fused", [(None, False), ("all", True), ("right", True), ("single", False)]
)
def test_the_emulation_contracts_only_visible_products(policy, fused):
    """(1 + 2^-12)^2 - (1 + 2^-11) is 2^-24 fused, 0 rounded first; a product behind the
    opaque OR is never fused, and "single" leaves a product used more than once alone."""
    trace = {}
    env = {**vars(emu), "_trace": trace}
    exec(emu.python_source(_SNIPPET, policy, trace=True), env)
    a = np.array([1 + 2.0**-12], F32)
    c = np.array([-(1 + 2.0**-11)], F32)
    assert env["fg_t_f32"](a, c)[0] == (2.0**-24 if fused else 0.0)
    assert trace["v3"][0] == 0.0


def test_flush_keeps_signs_and_normals():
    v = np.array([1e-40, -1e-40, 2.0**-126, -(2.0**-126), 0.0, -0.0, np.nan, 1.0], F32)
    got = emu.flush(v)
    np.testing.assert_array_equal(got.view(np.uint32)[:2], np.array([0, 0x80000000], np.uint32))
    np.testing.assert_array_equal(got[2:], v[2:])
    assert np.signbit(got[5]) and np.isnan(got[6])
