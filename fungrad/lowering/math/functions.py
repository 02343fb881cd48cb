"""The math functions the renderers provide: name -> (arity, emitter), and their contract.

Each emitter ``f(b, *args)`` builds one function with a math builder ``b`` (``builder``); the
LLVM renderer (``llvm``) defines ``fg_<name>_<f32|f64>`` from it for the CPU, the WGSL
renderer (``wgsl``) ``fg_<name>_f32`` for the GPU (with float32 formulations of its own for a
few functions). The algorithms live by family in ``exp_log``, ``trig`` and ``special``, on the
shared helpers of ``numeric``.

Contract (tests/test_lowering_llvm_math.py measures it against long-double references):
- Bodies are straight-line code of add/sub/mul/div, integer ops, bitcasts, conversions of
  clamped values, selects and compares and the intrinsics fma, rint, fabs, copysign, sqrt:
  no branches, no libm, no fast-math, so a loop over them vectorises fully (the exceptions
  are the LLVM renderer's: see ``llvm``). They need hardware fma to be fast (x86-64-v3,
  AArch64); results are bit-identical on every host.
- Accuracy: max error <= 1 ulp for exp, exp2, log, log2, log10, log1p, logistic, sin, cos, asin,
  acos, erf, cbrt, pow; <= 1.5 ulp for expm1, tanh, tan, atan, atan2, sinh, cosh, asinh,
  acosh, atanh; <= 2.5 ulp for erfc (fdlibm's formulas near |x| = 1). The same in float32 and
  float64; the per-function numbers are in the test file. Kernels: Cephes (float32 tan, atan,
  asin, tanh polynomials; float64 tan, atan, tanh rational functions), fdlibm (log, float64
  sin/cos kernels, asin, erf/erfc), Taylor series (float64 exp; float64 log for pow), own
  minimax fits (float32 exp, float32 sin/cos); error-free transformations (two_sum, fma
  residuals) carry the low parts that make the difference.
- Edge cases follow numpy (C99 Annex F): NaN in -> NaN out, +-inf and +-0 (odd functions keep
  the sign of -0), overflow to +-inf, gradual underflow to correctly scaled denormals (2**k is
  applied in two steps), denormal inputs, domain errors -> NaN, every special case of pow.
- sin/cos/tan reduce |x| by pi/2 Cody-Waite style in four parts, with fma and an exact tail,
  below 2**24 in float32 and 2**53 in float64; float32 sin and cos instead reduce by pi in
  float64 (two fma, exact enough below 2**24) and need no quadrant selects. From there on up to
  the largest finite value, Payne-Hanek (a = m 2^e times the window of 2/pi's bits that
  matters mod 4): float32 in 32-bit integer digits (shared with the GPU), float64 with
  64 x 64 -> 128-bit products of three words of a table. The same ulp bounds hold over the
  whole range (tests/test_trig_large_args.py); inf gives NaN.
- float32 pow, sin and cos work in float64 internally on the CPU (8 lanes per zmm, still 2x
  fewer instructions than the float32 four-part reduction for sin); everything else works in
  its own precision, so float32 loops get 8 lanes per ymm or 16 per zmm register.
- lgamma, digamma and erf_inv are the rare special functions: they follow the float64 numpy
  impls of those primitives (fungrad/lax/special_math.py) operation for operation (erf_inv from
  Giles' double-precision guess plus one polishing step instead of four), built on the
  functions above, and float32 rounds their float64 result once, as the impls do. Against those
  impls: float32 0.5 ulp; float64 erf_inv 5 ulp, lgamma 12 ulp of max(|f|, 1), digamma 4 ulp
  of max(|f|, 1, log(1 + |x|)) (next to their zeros, where terms of those sizes cancel, both
  lose relative accuracy as the impls do).
"""

from __future__ import annotations

from collections.abc import Callable

from fungrad.lowering.math import exp_log, special, trig
from fungrad.lowering.math.builder import Value

__all__ = ["EMITTERS", "LARGE_EMITTERS", "MATH_FUNCTIONS"]

EMITTERS: dict[str, tuple[int, Callable[..., Value]]] = {
    **exp_log.FUNCTIONS,
    **trig.FUNCTIONS,
    **special.FUNCTIONS,
}
"""Name -> (arity, emitter) of every math function."""

LARGE_EMITTERS: dict[str, Callable[..., Value]] = trig.LARGE_FUNCTIONS
"""The large-argument functions sin, cos and tan branch to on the CPU (one argument each)."""

MATH_FUNCTIONS: dict[str, int] = {name: arity for name, (arity, _) in EMITTERS.items()}
"""Name -> arity of every function the renderers provide (atan2(y, x) and pow(x, y) take two)."""
