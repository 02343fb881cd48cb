"""Tests for fungrad.lowering.math.llvm, the IR prelude of vectorisable math functions.

Each function is compiled once per dtype into a loop kernel ``void k(ptr in0, ptr in1, ptr out,
i64 n)`` with LOWERING.md's recipe (host cpu/features target machine, fungrad's pipeline
``llvm_capi.optimize``: O3 with loop + SLP vectorisation; MCJIT, ctypes) and compared, in
ulps, with long-double references (x87 80-bit on x86-64 Linux: 11 bits more than float64),
with numpy's edge-case semantics, and checked for vectorisation.

Max ulp errors observed (these inputs, 16x more random points, random bit patterns); the tests
assert <= 1 ulp, <= 1.5 ulp or <= 2.5 ulp (erfc) as in _ULP_BOUNDS:

    function  f32   f64        function  f32   f64        function  f32   f64
    exp       0.94  0.74       sin       0.61  0.77       sinh      1.06  0.96
    exp2      0.75  0.75       cos       0.61  0.74       cosh      1.06  1.03
    expm1     1.05  0.91       tan       1.23  1.37       asinh     0.97  0.97
    log       0.68  0.67       atan      1.46  0.85       acosh     1.02  1.04
    log2      0.78  0.77       atan2     1.37  1.06       atanh     1.08  0.93
    log10     0.69  0.69       asin      0.70  0.67       erf       0.75  0.88
    log1p     0.69  0.67       acos      0.77  0.77       erfc      2.20  1.90
    tanh      1.27  1.31       logistic  0.77  0.76       pow       0.50  0.75
    cbrt      0.50  0.50

lgamma, digamma and erf_inv are the float64 algorithms of fungrad/lax/special_math.py (the
numpy impls of those primitives), so they are measured against those references, in float64:
float32 computes in float64 and rounds once, 0.50 ulp for all three (<= 1 asserted). float64,
in ulps of max(|ref|, 1) for lgamma and of max(|ref|, 1, log(1 + |x|)) for digamma (both lose
relative accuracy next to their zeros, where terms of that size cancel; the references lose as
much: against glibc's lgamma and a long-double digamma both have 26 and 6.4 ulp of
max(|f|, 1)), in ulps of the value for erf_inv:

    lgamma   12.0  (<= 16 asserted)     digamma   4.0  (<= 8)     erf_inv   5.0  (<= 6)

erf_inv float64 is closer to the truth than its reference: 1.6 ulp against a long-double
Newton solution, where the reference is off by 4.8 ulp (fdlibm's erfc vs Cody's).

The file runs in about 6 s here (2 shared cores); compiling the 50 kernels is most of it.
"""

from __future__ import annotations

import ctypes
import math
import re

import hypothesis.strategies as st
import llvmlite.binding as llvm
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis.extra import numpy as hnp

from fungrad.lax import special_math
from fungrad.lowering.cpu import compiler as cpu
from fungrad.lowering.cpu import llvm_capi
from fungrad.lowering.math import llvm as llvm_math
from fungrad.lowering.math.llvm import MATH_FUNCTIONS, math_symbol, prelude

llvm.initialize_native_target()
llvm.initialize_native_asmprinter()

DTYPES = (np.float32, np.float64)
NAMES = sorted(MATH_FUNCTIONS)
LD = np.longdouble
_PI_LD = LD("3.14159265358979323846264338327950288")
# float64 references need the 64-bit x87 mantissa (not true on e.g. macOS arm64).
assert np.finfo(LD).nmant >= 63, "these tests need an extended-precision numpy.longdouble"

_ULP_BOUNDS = {  # the same for float32 and float64, as promised in llvm_math's docstring
    **dict.fromkeys(
        [
            "exp",
            "exp2",
            "log",
            "log2",
            "log10",
            "log1p",
            "logistic",
            "sin",
            "cos",
            "asin",
            "acos",
            "erf",
            "cbrt",
            "pow",
        ],
        1.0,
    ),
    **dict.fromkeys(
        ["expm1", "tanh", "tan", "atan", "atan2", "sinh", "cosh", "asinh", "acosh", "atanh"], 1.5
    ),
    "erfc": 2.5,
    "lgamma": 1.0,
    "digamma": 1.0,
    "erf_inv": 1.0,
}
# float64 versions of the special functions, against their float64 references (see above)
_ULP_BOUNDS_F64 = {"lgamma": 16.0, "digamma": 8.0, "erf_inv": 6.0}
_SPECIAL = ("lgamma", "digamma", "erf_inv")


def _bound(name: str, dtype) -> float:
    if np.dtype(dtype) == np.float64 and name in _ULP_BOUNDS_F64:
        return _ULP_BOUNDS_F64[name]
    return _ULP_BOUNDS[name]


def _floor(name: str, dtype, x):
    """The magnitude below which float64 lgamma/digamma errors count in absolute terms: next to
    their zeros the terms that cancel are about 1 (lgamma) or log(1 + |x|) (digamma's
    reflection subtracts pi cot(pi x) from psi(1 - x)), and the reference loses as much."""
    if np.dtype(dtype) != np.float64 or name not in ("lgamma", "digamma"):
        return 0.0
    if name == "lgamma":
        return 1.0
    with np.errstate(all="ignore"):
        return np.maximum(1.0, np.log1p(np.abs(np.asarray(x, np.float64))))


# ----------------------------------------------------------------------------------------------
# The compile harness


def _target_machine():
    # One per engine: create_mcjit_compiler takes ownership of the target machine and frees it
    # with the engine, so a shared one crashes the next compile once an engine is collected.
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name(),
        features=llvm.get_host_cpu_features().flatten(),
        opt=3,
        jit=True,
    )


def _kernel_ir(name: str, dtype) -> str:
    ty = "float" if dtype == np.float32 else "double"
    args = f"{ty} %x, {ty} %y" if MATH_FUNCTIONS[name] == 2 else f"{ty} %x"
    return (
        prelude([dtype], [name])
        + f"""
define void @k(ptr noalias %in0, ptr noalias %in1, ptr noalias %out, i64 %n) {{
entry:
  %nonempty = icmp sgt i64 %n, 0
  br i1 %nonempty, label %loop, label %exit
loop:
  %i = phi i64 [0, %entry], [%inext, %loop]
  %px = getelementptr {ty}, ptr %in0, i64 %i
  %x = load {ty}, ptr %px
  %py = getelementptr {ty}, ptr %in1, i64 %i
  %y = load {ty}, ptr %py
  %r = call {ty} @{math_symbol(name, dtype)}({args})
  %po = getelementptr {ty}, ptr %out, i64 %i
  store {ty} %r, ptr %po
  %inext = add i64 %i, 1
  %done = icmp eq i64 %inext, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}}
"""
    )


class _Kernel:
    """The jitted loop over one prelude function; call it on numpy arrays."""

    def __init__(self, name: str, dtype):
        self.dtype = np.dtype(dtype)
        mod = llvm.parse_assembly(_kernel_ir(name, dtype))
        mod.verify()
        tm = _target_machine()
        with cpu.llvm_lock:  # fungrad's pipeline: O3, vectorisers, the second always-inliner
            llvm_capi.optimize(
                ctypes.cast(mod._ptr, ctypes.c_void_p),
                ctypes.cast(tm._ptr, ctypes.c_void_p),
                3,
                True,
                True,
            )
        self.optimized_ir = str(mod)
        self.engine = llvm.create_mcjit_compiler(mod, tm)  # keep: it owns the code
        self.engine.finalize_object()
        proto = ctypes.CFUNCTYPE(
            None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64
        )
        self.fn = proto(self.engine.get_function_address("k"))

    def __call__(self, x, y=None) -> np.ndarray:
        x = np.ascontiguousarray(x, self.dtype)
        y = x if y is None else np.ascontiguousarray(y, self.dtype)
        out = np.empty_like(x)
        self.fn(x.ctypes.data, y.ctypes.data, out.ctypes.data, x.size)
        return out


_KERNELS: dict[tuple[str, str], _Kernel] = {}


@pytest.fixture(scope="module")
def kernel():
    """kernel(name, dtype) -> compiled loop, compiled once per module run."""

    def get(name: str, dtype) -> _Kernel:
        key = (name, np.dtype(dtype).name)
        if key not in _KERNELS:
            _KERNELS[key] = _Kernel(name, dtype)
        return _KERNELS[key]

    return get


# ----------------------------------------------------------------------------------------------
# Long-double references and ulp errors


def _erf_ld(x):
    """erf in long double: exp(-a^2) * sum (2a^2)^n a / (2n+1)!! (all terms positive) for
    |x| <= 2, 1 - erfc beyond."""
    x = np.asarray(x, LD)
    a = np.abs(x)
    out = np.empty_like(a)
    small = a <= 2
    aa = a[small]
    term, total = aa.copy(), aa.copy()
    for n in range(1, 200):
        term = term * (2 * aa * aa) / (2 * n + 1)
        total = total + term
        if not np.any(term > total * LD(1e-21)):
            break
    out[small] = 2 / np.sqrt(_PI_LD) * np.exp(-aa * aa) * total
    out[~small] = 1 - _erfc_cf(a[~small])
    return np.copysign(out, x)


def _erfc_cf(a):
    """erfc(a) for a >= 2 by its continued fraction (converged to long double by 100 terms)."""
    t = a.copy()
    for n in range(120, 0, -1):
        t = a + (LD(n) / 2) / t
    return np.exp(-a * a) / (np.sqrt(_PI_LD) * t)


def _erfc_ld(x):
    x = np.asarray(x, LD)
    a = np.abs(x)
    out = np.where(a < 2, 1 - _erf_ld(np.minimum(a, 2)), _erfc_cf(np.maximum(a, 2)))
    return np.where(x < 0, 2 - out, out)


def _logistic_ld(x):
    x = np.asarray(x, LD)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


_REFERENCE = {
    "exp": np.exp,
    "exp2": np.exp2,
    "expm1": np.expm1,
    "log": np.log,
    "log2": np.log2,
    "log10": np.log10,
    "log1p": np.log1p,
    "tanh": np.tanh,
    "logistic": _logistic_ld,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "atan": np.arctan,
    "atan2": np.arctan2,
    "asin": np.arcsin,
    "acos": np.arccos,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
    "erf": _erf_ld,
    "erfc": _erfc_ld,
    "pow": np.power,
    "cbrt": np.cbrt,
    # the numpy impls' float64 references (no long-double versions exist to compare with)
    **{
        name: (lambda x, fn=getattr(special_math, name): fn(x.astype(np.float64)))
        for name in _SPECIAL
    },
}


def _reference(name, x, y=None):
    with np.errstate(all="ignore"):
        args = [np.asarray(x, LD)] + ([] if y is None else [np.asarray(y, LD)])
        return _REFERENCE[name](*args)


def _ulp_errors(got, ref, dtype, floor=0.0) -> np.ndarray:
    """|got - ref| in units of the last place of ref in dtype (denormal spacing below the normal
    range; of ``floor``, a scalar or one value per element, where |ref| is smaller). Where ref
    rounds to inf or NaN, got must equal it exactly (else the error is inf)."""
    fi = np.finfo(dtype)
    with np.errstate(all="ignore"):
        rounded = ref.astype(dtype)
    err = np.zeros(got.shape, LD)
    special = ~np.isfinite(rounded)
    same = (np.isnan(rounded) & np.isnan(got)) | (rounded == got)
    err[special & ~same] = np.inf
    fin = ~special
    r, g = ref[fin], got[fin].astype(LD)
    fl = np.broadcast_to(np.asarray(floor, LD), ref.shape)[fin]
    _, e = np.frexp(np.maximum(np.abs(r), fl))
    e = np.maximum(e.astype(np.int64) - 1, fi.minexp)
    ulp = np.ldexp(LD(1), (e - fi.nmant).astype(np.int32))
    with np.errstate(all="ignore"):
        d = np.abs(g - r) / ulp
    d[~np.isfinite(g)] = np.inf
    err[fin] = d
    return err


def _worst(name, dtype, x, y, got, err) -> str:
    i = int(np.argmax(err))
    arg = f"x={x[i]!r}" + ("" if y is None else f", y={y[i]!r}")
    return f"{name}[{np.dtype(dtype).name}] {err[i]:.3f} ulp at {arg}: got {got[i]!r}"


# ----------------------------------------------------------------------------------------------
# Inputs: dense grids and log-uniform random values over each function's domain


def _inputs(name: str, dtype, n: int = 16384, seed: int = 0):
    rng = np.random.default_rng(seed)
    f64 = dtype == np.float64
    emin, emax = (-1074, 1024) if f64 else (-149, 128)

    def lin(lo, hi):
        return np.linspace(lo, hi, n)

    def logu(lo, hi, signed=True):  # 2**uniform(lo, hi), random signs
        v = np.power(2.0, rng.uniform(lo, hi, n))
        return v * rng.choice([-1.0, 1.0], n) if signed else v

    top = emax - 0.001
    parts = {
        "exp": [lin(-746, 710) if f64 else lin(-104, 89), lin(-1, 1), logu(emin, 0)],
        "exp2": [lin(-1076, 1025) if f64 else lin(-151, 129), lin(-1, 1), logu(emin, 0)],
        "expm1": [lin(-40, 710) if f64 else lin(-20, 89), lin(-1, 1), logu(emin, 3)],
        "log": [logu(emin, top, False), lin(0.5, 2), lin(0.99, 1.01)],
        "log1p": [lin(-1, 1), logu(emin, top, False), logu(emin, -1), logu(-60, 0, False) - 1],
        "tanh": [lin(-20, 20) if f64 else lin(-10, 10), lin(-0.7, 0.7), logu(emin, 5)],
        "logistic": [lin(-750, 750) if f64 else lin(-110, 100), lin(-5, 5), logu(emin, 5)],
        "sin": [lin(-10, 10), logu(emin, 30 if f64 else 16.6), logu(-10, 3)],
        "atan": [lin(-5, 5), logu(emin, top)],
        "asin": [lin(-1, 1), 1 - logu(-53 if f64 else -24, -1, False), logu(emin, 0)],
        "sinh": [lin(-711, 711) if f64 else lin(-90, 90), lin(-2, 2), logu(emin, 3)],
        "asinh": [lin(-5, 5), logu(emin, top)],
        "acosh": [lin(1, 3), 1 + logu(-52 if f64 else -23, 2, False), logu(0, top, False)],
        "atanh": [lin(-1, 1), 1 - logu(-53 if f64 else -24, -1, False), logu(emin, -1)],
        "erf": [lin(-6.5, 6.5), logu(emin, 3)],
        "erfc": [lin(-7, 28 if f64 else 10.5), lin(-1.5, 1.5), logu(emin, 2)],
        "cbrt": [lin(-10, 10), logu(emin, top)],
        # around the zeros (1, 2 and the negative ones), the poles, and far out
        "lgamma": [
            lin(-20, 20),
            lin(0.9, 2.1),
            logu(emin, top, False),
            -logu(-30, 20, False),
            lin(-3.5, -2.2),
        ],
        "digamma": [lin(-20, 20), lin(1.3, 1.6), logu(emin, top, False), -logu(-30, 20, False)],
        "erf_inv": [lin(-1, 1), 1 - logu(-53 if f64 else -24, -1, False), logu(emin, 0)],
    }
    for alias, same in (
        ("log2", "log"),
        ("log10", "log"),
        ("cos", "sin"),
        ("tan", "sin"),
        ("acos", "asin"),
        ("cosh", "sinh"),
    ):
        parts[alias] = parts[same]
    y = None
    if name == "atan2":
        x = np.concatenate([logu(emin + 100, emax - 100), lin(-3, 3)[::-1]])
        y = np.concatenate([logu(emin + 100, emax - 100), lin(-3, 3)])
    elif name == "pow":  # |y log2|x|| within the finite range, negative x with integer y,
        lx = rng.uniform(-20, 20, n)  # x close to 1 with huge y
        y1 = rng.uniform(-1, 1, n) * (1000 if f64 else 120) / np.maximum(np.abs(lx), 0.05)
        x = np.concatenate(
            [
                np.power(2.0, lx),
                rng.uniform(0.5, 2, n),
                -np.power(2.0, rng.uniform(-8, 8, n)),
                1 + rng.uniform(-1e-6, 1e-6, n),
            ]
        )
        y = np.concatenate(
            [
                y1,
                rng.uniform(-50, 50, n),
                np.round(rng.uniform(-60, 60, n)),
                rng.uniform(-1e6, 1e6, n),
            ]
        )
    else:
        x = np.concatenate(parts[name])
    with np.errstate(all="ignore"):
        return x.astype(dtype), None if y is None else y.astype(dtype)


# ----------------------------------------------------------------------------------------------
# Accuracy


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", NAMES)
def test_accuracy_in_ulps(kernel, name, dtype):
    x, y = _inputs(name, dtype)
    got = kernel(name, dtype)(x, y)
    err = _ulp_errors(got, _reference(name, x, y), dtype, _floor(name, dtype, x))
    assert err.max() <= _bound(name, dtype), _worst(name, dtype, x, y, got, err)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_trig_range(kernel, name, dtype):
    # Cody-Waite up to 2^24 (float32) / 2^53 (float64), Payne-Hanek beyond, up to the largest
    # finite value; inf gives NaN (tests/test_trig_large_args.py: references that do not
    # rely on libm's reduction, the hardest arguments, jit on the CPU and GPU)
    fi = np.finfo(dtype)
    rng = np.random.default_rng(1)
    x = np.power(2.0, rng.uniform(10, fi.maxexp, 20000)) * rng.choice([-1, 1], 20000)
    x = np.concatenate([x.astype(dtype), [fi.max, -fi.max, 2.0 ** (fi.nmant + 1), 1e30]])
    x = x.astype(dtype)
    f = kernel(name, dtype)
    got = f(x)
    err = _ulp_errors(got, _reference(name, x), dtype)
    assert err.max() <= _bound(name, dtype), _worst(name, dtype, x, None, got, err)
    assert np.isnan(f(np.array([np.inf, -np.inf, np.nan], dtype))).all()


# ----------------------------------------------------------------------------------------------
# Edge cases: numpy's (C99 Annex F) results for NaN, +-inf, +-0, denormals, huge values, domain
# errors; exact where numpy's result is NaN, inf or zero, within the ulp bound elsewhere.


def _numpy_result(name, x, y):
    dtype = x.dtype
    with np.errstate(all="ignore"):
        if name in ("erf", "erfc"):  # numpy has none; libm's via math, in float64
            f = getattr(math, name)
            return np.array([f(float(v)) for v in x], np.float64).astype(dtype)
        if name == "logistic":  # no numpy ufunc: the exact value, rounded
            return _logistic_ld(x).astype(dtype)
        if name in _SPECIAL:  # the primitives' numpy impls: float64 references, rounded
            return getattr(special_math, name)(x.astype(np.float64)).astype(dtype)
        ufunc = {
            "atan": np.arctan,
            "atan2": np.arctan2,
            "asin": np.arcsin,
            "acos": np.arccos,
            "asinh": np.arcsinh,
            "acosh": np.arccosh,
            "atanh": np.arctanh,
            "pow": np.power,
        }.get(name) or getattr(np, name)
        return ufunc(x) if y is None else ufunc(x, y)


def _edge_values(dtype) -> np.ndarray:
    fi = np.finfo(dtype)
    tiny, normal = float(fi.smallest_subnormal), float(fi.smallest_normal)
    v = [
        np.nan,
        np.inf,
        0.0,
        tiny,
        3 * tiny,
        normal * 0.75,
        normal,
        float(fi.max),
        1.0,
        0.5,
        2.0,
        3.0,
        1e-3,
        10.0,
        100.0,
        1e10,
        float(fi.eps),
        1 - float(fi.epsneg),
        1 + float(fi.eps),
        0.625,
        0.84375,
        1.25,
        2.5,
        6.0,
        28.0,
        88.5,
        709.5,
        1e-20,
    ]
    v = np.array(v, dtype)
    return np.concatenate([v, -v])


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", NAMES)
def test_edge_cases_match_numpy(kernel, name, dtype):
    e = _edge_values(dtype)
    if MATH_FUNCTIONS[name] == 2:  # every pair
        x, y = np.repeat(e, e.size), np.tile(e, e.size)
    else:
        x, y = e, None
    got = kernel(name, dtype)(x, y)
    want = _numpy_result(name, x, y)
    err = _ulp_errors(got, _reference(name, x, y), dtype, _floor(name, dtype, x))
    for i in range(x.size):
        arg = f"{name}({x[i]!r}" + ("" if y is None else f", {y[i]!r}") + ")"
        if np.isnan(want[i]):
            assert np.isnan(got[i]), f"{arg} = {got[i]!r}, numpy gives nan"
        elif np.isinf(want[i]) or want[i] == 0:
            same = got[i] == want[i] and np.signbit(got[i]) == np.signbit(want[i])
            assert same, f"{arg} = {got[i]!r}, numpy gives {want[i]!r}"
        else:
            assert err[i] <= _bound(name, dtype), f"{arg} = {got[i]!r}: {err[i]:.3f} ulp"


def test_pow_special_cases_follow_c99(kernel):
    inf, nan = np.inf, np.nan
    cases = [  # (x, y, expected) from C99 F.9.4.4, which numpy follows
        (nan, 0.0, 1.0),
        (1.0, nan, 1.0),
        (nan, 1.0, nan),
        (2.0, nan, nan),
        (-0.0, -3.0, -inf),
        (0.0, -3.0, inf),
        (-0.0, -2.0, inf),
        (-0.0, -0.5, inf),
        (-0.0, 3.0, -0.0),
        (-0.0, 2.0, 0.0),
        (-0.0, 0.5, 0.0),
        (-1.0, inf, 1.0),
        (-1.0, -inf, 1.0),
        (0.5, -inf, inf),
        (2.0, -inf, 0.0),
        (0.5, inf, 0.0),
        (2.0, inf, inf),
        (-inf, -3.0, -0.0),
        (-inf, -2.0, 0.0),
        (-inf, 3.0, -inf),
        (-inf, 2.5, inf),
        (inf, -1.0, 0.0),
        (inf, 0.5, inf),
        (-2.0, 0.5, nan),
        (-2.0, 3.0, -8.0),
        (-2.0, 2.0, 4.0),
        (2.0, 0.5, math.sqrt(2.0)),
        (10.0, 400.0, inf),
        (10.0, -400.0, 0.0),
        (-8.0, 1.0 / 3.0, nan),
        (4.0, -0.5, 0.5),
        (-1e300, 2.0, inf),
    ]
    for dtype in DTYPES:
        with np.errstate(all="ignore"):
            x, y, want = (np.array(c, dtype) for c in zip(*cases))
        got = kernel("pow", dtype)(x, y)
        for xi, yi, g, w in zip(x, y, got, want):
            ok = (np.isnan(g) and np.isnan(w)) or (g == w and np.signbit(g) == np.signbit(w))
            assert ok, f"pow({xi!r}, {yi!r}) = {g!r}, expected {w!r}"


def test_denormal_results_are_correctly_scaled(kernel):
    # exp applies 2^k in two steps, so results in the denormal range are neither flushed to 0
    # nor garbage (y * 2^k with 2^k itself denormal or 0 would be)
    for dtype, lo, hi in ((np.float32, -103.9, -87.4), (np.float64, -744.4, -708.4)):
        x = np.linspace(lo, hi, 50001).astype(dtype)
        got = kernel("exp", dtype)(x)
        assert (got > 0).all() and (got < np.finfo(dtype).smallest_normal).all()
        err = _ulp_errors(got, _reference("exp", x), dtype)
        assert err.max() <= _bound("exp", dtype), _worst("exp", dtype, x, None, got, err)


@settings(max_examples=60)
@given(data=st.data(), name=st.sampled_from(NAMES), dtype=st.sampled_from(DTYPES))
def test_arbitrary_values(kernel, data, name, dtype):
    # any float bit pattern: numpy's NaN/inf/0 classes exactly, the ulp bound elsewhere
    width = 32 if dtype == np.float32 else 64
    floats = st.floats(width=width, allow_nan=True, allow_infinity=True, allow_subnormal=True)
    shape = st.integers(0, 40)
    x = data.draw(hnp.arrays(dtype, shape, elements=floats), label="x")
    y = None
    if MATH_FUNCTIONS[name] == 2:
        y = data.draw(hnp.arrays(dtype, x.shape, elements=floats), label="y")
    got = kernel(name, dtype)(x, y)
    assert got.shape == x.shape and got.dtype == dtype
    want = _numpy_result(name, x, y)
    err = _ulp_errors(got, _reference(name, x, y), dtype, _floor(name, dtype, x))
    special = np.isnan(want) | np.isinf(want) | (want == 0)
    np.testing.assert_array_equal(np.isnan(got[special]), np.isnan(want[special]))
    same_sign = np.signbit(got[special]) == np.signbit(want[special])
    assert ((got[special] == want[special]) | np.isnan(want[special])).all()
    assert (same_sign | np.isnan(want[special])).all()
    assert (err[~special] <= _bound(name, dtype)).all(), _worst(name, dtype, x, y, got, err)


# ----------------------------------------------------------------------------------------------
# Vectorisation and the IR contract


def _loop_ir(k: _Kernel) -> str:
    return k.optimized_ir[k.optimized_ir.index("define void @k") :]


def test_exp_float32_loop_vectorises(kernel):
    body = _loop_ir(kernel("exp", np.float32))
    lanes = {int(n) for n in re.findall(r"<(\d+) x float>", body)}
    features = llvm.get_host_cpu_features()
    has_avx = features.get("avx2", False) or features.get("avx512f", False)
    # <8 x float> (ymm) or <16 x float> (zmm) on AVX2/AVX-512 hosts, <4 x float> on NEON/SSE
    assert lanes & ({8, 16} if has_avx else {4, 8, 16}), f"not vectorised: {sorted(lanes)}"


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", NAMES)
def test_every_loop_vectorises_without_calls(kernel, name, dtype):
    body = _loop_ir(kernel(name, dtype))
    ty = "float" if dtype == np.float32 else "double"
    lanes = {int(n) for n in re.findall(rf"<(\d+) x {ty}>", body)}
    assert max(lanes, default=1) >= (4 if dtype == np.float32 else 2), sorted(lanes)
    # only llvm.* intrinsics remain: no libm call, nothing left un-inlined, except that
    # sin/cos/tan (also inside lgamma, digamma) call their large-argument functions: the loop
    # vectoriser calls their masked vector variants, which the second always-inliner inlines
    # (a test of the mask around a call of <fn>_lanes<n>), and the scalar remainder loop calls
    # the scalar function
    callees = set(re.findall(r"call [^@]*@([\w.]+)", body))
    large = set(
        re.findall(r"define internal [^@]+@(fg_\w+_large_f\d\d\w*)\(", prelude([dtype], [name]))
    )
    assert not {c for c in callees if re.fullmatch(r"fg_\w+_large_f\d\d_v\d+", c)}, callees
    if name in ("sin", "cos", "tan"):
        lanes = {c for c in callees if re.fullmatch(r"fg_\w+_large_f\d\d_lanes\d+", c)}
        assert lanes, callees  # the vector loop calls the lanes function behind the branch
    callees -= large
    assert all(c.startswith("llvm.") for c in callees), callees
    assert not any(
        c.startswith(
            (
                "llvm.exp",
                "llvm.log",
                "llvm.sin",
                "llvm.cos",
                "llvm.pow",
                "llvm.tan",
                "llvm.atan",
                "llvm.asin",
                "llvm.acos",
            )
        )
        for c in callees
    ), callees


def test_prelude_text_contract():
    text = prelude()
    trig = ("sin", "cos", "tan")
    large = {f"fg_{n}_large_{s}" for n in trig for s in ("f32", "f64")}
    assert (
        set(re.findall(r"define internal \w+ @(fg_\w+)\(", text))
        == {f"fg_{n}_{s}" for n in MATH_FUNCTIONS for s in ("f32", "f64")} | large
    )
    # the math functions and the large-argument functions' masked vector variants
    widths = llvm_math._VARIANT_LANES
    assert text.count("alwaysinline") == 2 * len(MATH_FUNCTIONS) + len(large) * len(widths)
    # the large-argument functions and what the vector loop calls behind the branch: cold
    out_of_line = re.findall(
        r"define internal [^@]+@(fg_\w+_large_f\d\d(?:_lanes\d+)?)\(.*\) "
        r"(.*) {",
        text,
    )
    assert {f for f, _ in out_of_line} == large | {f"{f}_lanes{n}" for f in large for n in widths}
    assert all(attrs == "noinline nounwind cold" for _, attrs in out_of_line), out_of_line
    for flag in ("fast", "nnan", "ninf", "reassoc", "afn", "arcp", "nsz"):
        assert not re.search(rf"\b{flag}\b", text), flag
    # straight-line bodies (nothing to if-convert), except sin/cos/tan's one branch to their
    # large-argument function and its vector variants' test of the mask
    for body in text.split("\ndefine ")[1:]:
        fn = re.search(r"@(fg_\w+)\(", body).group(1)
        branches = len(re.findall(r"\bbr\b", body))
        if fn.startswith(tuple(f"fg_{n}_large_" for n in trig)) and "_v" in fn[-4:]:
            assert branches == 1, fn
        elif fn.startswith(tuple(f"fg_{n}_f" for n in trig)):
            assert branches == 2, fn
        else:
            assert branches == 0, fn
    intrinsics = set(re.findall(r"@llvm\.(\w+)\.f(?:32|64)[.(]", text))
    assert intrinsics <= {"fma", "rint", "fabs", "copysign", "sqrt", "ldexp"}, intrinsics
    mod = llvm.parse_assembly(text)
    mod.verify()


def test_prelude_selects_functions_dtypes_and_dependencies():
    text = prelude(["float64"], ["tanh"])
    defined = set(re.findall(r"define internal \w+ @(fg_\w+)\(", text))
    assert defined == {"fg_tanh_f64", "fg_exp_f64"}  # tanh calls exp
    assert "declare double @llvm.fma.f64(double, double, double)" in text
    assert "float" not in text
    assert set(re.findall(r"define internal \w+ @(fg_\w+)\(", prelude(["float32"], ["tanh"]))) == {
        "fg_tanh_f32"
    }  # float32 tanh inlines its own short exp
    both = prelude([np.float64, np.dtype("float32")], ["pow", "atan2"])
    assert set(re.findall(r"define internal \w+ @(fg_\w+)\(", both)) == {
        "fg_pow_f64",
        "fg_pow_f32",
        "fg_atan2_f32",
        "fg_atan2_f64",
    }
    assert "define internal double @fg_pow_f64(double %a0, double %a1)" in both
    assert prelude(["float64"], []) == ""


def test_prelude_without_declarations_parses():
    # LLVM 22 declares intrinsics itself and rejects a repeated declare, so a renderer that
    # declares its own passes declare_intrinsics=False
    text = prelude(["float64"], ["log"], declare_intrinsics=False)
    assert "declare" not in text
    own = "declare double @llvm.fma.f64(double, double, double)\n"
    llvm.parse_assembly(own + text).verify()
    with pytest.raises(RuntimeError, match="redefinition"):
        llvm.parse_assembly(own + prelude(["float64"], ["log"]))


def test_math_functions_table_and_symbols():
    assert MATH_FUNCTIONS["atan2"] == 2 and MATH_FUNCTIONS["pow"] == 2
    assert sum(a == 1 for a in MATH_FUNCTIONS.values()) == 26
    assert math_symbol("exp", np.float32) == "fg_exp_f32"
    assert math_symbol("erfc", "float64") == "fg_erfc_f64"


def test_bad_requests_raise_value_error():
    with pytest.raises(ValueError, match="unknown math function 'zeta'"):
        prelude(["float32"], ["exp", "zeta"])
    with pytest.raises(ValueError, match="no math functions for dtype 'float16'"):
        prelude(["float16"], ["exp"])
    with pytest.raises(ValueError, match="int32"):
        math_symbol("exp", np.int32)
    with pytest.raises(ValueError, match="unknown math function"):
        math_symbol("sqrt", np.float32)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_ldexp_intrinsic_and_two_step_scaling_agree(monkeypatch, dtype):
    # On AVX-512 hosts 2**k is applied by llvm.ldexp (vscalef), elsewhere by two multiplications;
    # both round once, so every function using them gives the same bits either way.
    fi = np.finfo(dtype)
    lo, hi = (-746.0, 711.0) if dtype == np.float64 else (-104.0, 90.0)
    x = np.concatenate(
        [
            np.linspace(lo, hi, 40001),
            np.linspace(lo, lo + 40, 20001),
            [np.nan, np.inf, -np.inf, 0.0, -0.0, float(fi.smallest_subnormal)],
        ]
    )
    x = x.astype(dtype)
    results = {}
    for fast in (True, False):
        monkeypatch.setattr(llvm_math, "_vector_ldexp", lambda fast=fast: fast)
        llvm_math._define.cache_clear()
        try:
            ir = {name: _Kernel(name, dtype) for name in ("exp", "exp2", "logistic", "sinh")}
        finally:
            llvm_math._define.cache_clear()
        assert ("llvm.ldexp" in ir["exp"].optimized_ir) == fast
        results[fast] = {name: k(x) for name, k in ir.items()}
    for name in results[True]:
        a, b = results[True][name], results[False][name]
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        assert same.all() and (np.signbit(a) == np.signbit(b)).all(), name
