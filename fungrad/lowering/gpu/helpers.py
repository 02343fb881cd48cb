"""The helper functions a shader may call, written into its prelude once each, when used.

``HELPERS`` are WGSL functions for what WGSL's builtins get wrong or lack (NaN tests on the
bits, IEEE max/min, integer division that never traps, C's exact ``fmod``, saturating
float -> int); :class:`Prelude` collects those one shader needs, with the math functions of
``lowering.math.wgsl`` it calls or writes out inline, in dependency order.
"""

from __future__ import annotations

from fungrad.lowering.math import wgsl as wgsl_math

HELPERS = {
    "isnan": """fn fg_isnan(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}""",
    "max_f32": """fn fg_max_f32(a: f32, b: f32) -> f32 {
  if (fg_isnan(a) || fg_isnan(b)) { return a + b; }
  if (a == b) { return bitcast<f32>(bitcast<u32>(a) & bitcast<u32>(b)); }
  return select(b, a, a > b);
}""",
    "min_f32": """fn fg_min_f32(a: f32, b: f32) -> f32 {
  if (fg_isnan(a) || fg_isnan(b)) { return a + b; }
  if (a == b) { return bitcast<f32>(bitcast<u32>(a) | bitcast<u32>(b)); }
  return select(b, a, a < b);
}""",
    "div_i32": """fn fg_div_i32(a: i32, b: i32) -> i32 {
  if (b == 0) { return -1i; }
  let ma = select(bitcast<u32>(a), 0u - bitcast<u32>(a), a < 0i);
  let mb = select(bitcast<u32>(b), 0u - bitcast<u32>(b), b < 0i);
  let q = ma / mb;
  return bitcast<i32>(select(q, 0u - q, (a < 0i) != (b < 0i)));
}""",
    "rem_i32": """fn fg_rem_i32(a: i32, b: i32) -> i32 {
  if (b == 0) { return a; }
  let ma = select(bitcast<u32>(a), 0u - bitcast<u32>(a), a < 0i);
  let mb = select(bitcast<u32>(b), 0u - bitcast<u32>(b), b < 0i);
  let r = ma % mb;
  return bitcast<i32>(select(r, 0u - r, a < 0i));
}""",
    # a / b correctly rounded where the adapter's division is not (Runtime.inexact_division;
    # WGSL allows 2.5 ulp, NVIDIA's is off by up to 2 and gives 0, or NaN for an infinite a,
    # for |b| >= 2^126, whose reciprocal is subnormal and flushed). A divisor that large is
    # scaled by 2^-32 first, its exponent by integer arithmetic that no float simplification
    # sees through (a * 2^-32 loses bits only where |a / b| < 2^-220). Then CUDA's div.rn
    # scheme: the reciprocal refined by one Newton step, the quotient corrected twice from
    # exact fma residuals (each step rounded once, as the runtime's probes check). Specials,
    # zero and overflowing quotients are the division's own.
    "div_f32": """fn fg_div_f32(a: f32, b: f32) -> f32 {
  var x = a;
  var y = b;
  let m = bitcast<u32>(b) & 0x7fffffffu;
  if (m >= 0x7e800000u && m < 0x7f800000u) {
    x = a * 2.3283064e-10f;
    y = bitcast<f32>(bitcast<u32>(b) - 0x10000000u);
  }
  let q0 = x / y;
  if (!(abs(q0) < 3.4028235e38f) || q0 == 0.0f) { return q0; }
  let r0 = 1.0f / y;
  let r1 = fma(fma(-y, r0, 1.0f), r0, r0);
  let q1 = fma(fma(-q0, y, x), r1, q0);
  return fma(fma(-q1, y, x), r1, q1);
}""",
    "div_u32": """fn fg_div_u32(a: u32, b: u32) -> u32 {
  if (b == 0u) { return 0xffffffffu; }
  return a / b;
}""",
    "rem_u32": """fn fg_rem_u32(a: u32, b: u32) -> u32 {
  if (b == 0u) { return a; }
  return a % b;
}""",
    # fmod, exact: long division of |x| by |y| on the exponents, each step an exact subtraction
    "rem_f32": """fn fg_rem_f32(x: f32, y: f32) -> f32 {
  let ax = abs(x);
  let ay = abs(y);
  if (fg_isnan(x) || fg_isnan(y) || ax == bitcast<f32>(0x7f800000u) || ay == 0.0f) {
    return bitcast<f32>(0x7fc00000u);
  }
  if (ay == bitcast<f32>(0x7f800000u) || ax < ay) { return x; }
  var r = ax;
  for (var i = 0i; i < 300i && r >= ay; i++) {
    let k = (bitcast<u32>(r) >> 23u) - (bitcast<u32>(ay) >> 23u);
    var t = bitcast<f32>(bitcast<u32>(ay) + (k << 23u));
    if (t > r) { t = t * 0.5f; }
    r = r - t;
  }
  return bitcast<f32>(bitcast<u32>(r) | (bitcast<u32>(x) & 0x80000000u));
}""",
    "round_away": """fn fg_round_away(x: f32) -> f32 {
  let t = trunc(x);
  return select(t, t + sign(x), abs(x - t) >= 0.5f);
}""",
    "nextafter": """fn fg_nextafter(x: f32, y: f32) -> f32 {
  if (fg_isnan(x) || fg_isnan(y)) { return x + y; }
  if (x == y) { return y; }
  if (x == 0.0f) { return bitcast<f32>((bitcast<u32>(y) & 0x80000000u) | 1u); }
  let up = (x < y) == (x > 0.0f);
  let b = bitcast<u32>(x);
  return bitcast<f32>(select(b - 1u, b + 1u, up));
}""",
    "f2i": """fn fg_f2i(x: f32) -> i32 {
  if (fg_isnan(x)) { return 0i; }
  if (x >= 2147483648.0f) { return 2147483647i; }
  if (x < -2147483648.0f) { return bitcast<i32>(0x80000000u); }
  return i32(x);
}""",
    "f2u": """fn fg_f2u(x: f32) -> u32 {
  if (fg_isnan(x) || x <= 0.0f) { return 0u; }
  if (x >= 4294967296.0f) { return 0xffffffffu; }
  return u32(x);
}""",
}
_HELPER_DEPS = dict.fromkeys(
    ("rem_f32", "max_f32", "min_f32", "nextafter", "f2i", "f2u"), ("isnan",)
)


class Prelude:
    """The helper functions one shader needs, in dependency order."""

    def __init__(self, fused_fma: bool, exact_division: bool = False):
        self.fused_fma = fused_fma
        #: float32 ``a / b`` through ``fg_div_f32`` (see HELPERS; ``ops._div``)
        self.exact_division = exact_division
        self.helpers: dict[str, str] = {}
        self.math: dict[str, str] = {}

    def need(self, name: str) -> str:
        if name not in self.helpers:
            for dep in _HELPER_DEPS.get(name, ()):
                self.need(dep)
            self.helpers[name] = HELPERS[name]
        return name

    def need_math(self, name: str) -> str:
        fn, texts = wgsl_math.function(name, self.fused_fma)
        self._add_math(texts)
        return fn

    def inline_math(
        self, name: str, args: list[str], prefix: str, zero: str
    ) -> tuple[list[str], str] | None:
        """(let statements, result) of math function ``name`` written out in the caller
        (``wgsl_math.inline``; ``zero``: the caller's opaque zero), its callees added to the
        prelude; None where it must be called instead."""
        got = wgsl_math.inline(name, args, prefix, self.fused_fma, zero)
        if got is None:
            return None
        lines, result, texts = got
        self._add_math(texts)
        return lines, result

    def _add_math(self, texts: list[tuple[str, str]]) -> None:
        for key, text in texts:
            if key == "isnan":
                self.need("isnan")
            else:
                self.math.setdefault(key, text)

    def prelude(self) -> str:
        return "\n\n".join([*self.helpers.values(), *self.math.values()])


# -- the shaders ----------------------------------------------------------------------------------
