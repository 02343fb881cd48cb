"""The GPU's float32 math functions evaluated in numpy from their WGSL text (no GPU needed).

``evaluate(name, *args)`` runs ``fg_<name>_f32`` as wgsl_math writes it, each operation
rounded once in float32 (division and sqrt correctly rounded). Two hardware behaviours that
WGSL allows can be switched on, so tests here can reproduce what real GPUs compute:

- ``contract``: the shader compiler fuses ``a * b + c`` (and ``a * b - c``, ``c - a * b``,
  ``-(a * b) + c``) into one fma, rounded once, as NVIDIA's does (SPIR-V from naga carries no
  NoContraction). ``"all"`` contracts every add or subtract that has a float product operand
  (the left one where both are), ``"right"`` prefers the right one, ``"single"`` only products
  used once. An opaque integer OR (wgsl_math's ``_opaque``) hides a product: no contraction.
- ``flush``: float32 subnormal inputs and results of arithmetic are flushed to signed zero.

Used by tests/test_gpu_math_exact.py (the GPU computes the WGSL as written) and
tests/test_gpu_math_contraction.py (the functions keep their ulp bounds when contracted).
"""

from __future__ import annotations

import math
import re

import numpy as np

from fungrad.lowering.math import wgsl as wgsl_math

F32, I32, U32 = np.float32, np.int32, np.uint32
_TYPES = {"f32": F32, "i32": I32, "u32": U32}
_TINY = np.float32(2.0**-126)


def flush(v):
    """float32 subnormals of ``v`` to zero of the same sign (other values and dtypes kept)."""
    v = np.asarray(v)
    if v.dtype != F32:
        return v
    return np.where(np.abs(v) < _TINY, np.copysign(F32(0), v), v).astype(F32)


def _bitcast(ty: str, v):
    return np.asarray(v).view(_TYPES[ty])


def _convert(ty: str, v):
    v = np.asarray(v)
    if ty == "u32" and v.dtype == I32:  # a shift amount: the shifted value keeps its type
        return int(v) if v.ndim == 0 else v
    if ty == "i32" and v.dtype == F32:  # WGSL saturates; the functions only convert in range
        return np.clip(np.nan_to_num(v), -(2.0**31), 2.0**31 - 128).astype(I32)
    return v.astype(_TYPES[ty])


def fma32(a, b, c):
    """float32 fma: a b is exact in float64, the sum rounds there and then to float32 (a
    double rounding that is rarely off by an ulp)."""
    a, b, c = (np.asarray(v, F32) for v in (a, b, c))
    return (a.astype(np.float64) * b + c).astype(F32)


_SUBSTITUTIONS = [
    (r"bitcast<(\w+)>\(", r"_bitcast('\1', "),
    (r"\b(f32|i32|u32)\(", r"_convert('\1', "),
    (r"(?<![\w.])(\d+\.\d*(?:e[-+]?\d+)?|\d+e[-+]?\d+)f\b", r"F32(\1)"),
    (r"\b(0x[0-9a-fA-F]+|\d+)u\b", r"U32(\1)"),
    (r"\b(\d+)i\b", r"I32(\1)"),
    (r"&&", "&"),
    (r"\|\|", "|"),
    (r"!(?=[(\w])", "~"),
    (r"\btrue\b", "True"),
    (r"\bfalse\b", "False"),
    (r"\bselect\(", "_select("),
    (r"\babs\(", "np.abs("),
    (r"\bround\(", "np.rint("),
    (r"\bfloor\(", "np.floor("),
    (r"\bsqrt\(", "np.sqrt("),
    (r"\bfma\(", "_fma("),
]

_TOKEN = r"(-?\d[\d.]*(?:e[-+]?\d+)?f|\w+|bitcast<f32>\(0x[0-9a-f]+u\))"
_PRODUCT = re.compile(rf"\({_TOKEN} \* {_TOKEN}\)")
_SUM = re.compile(rf"\({_TOKEN} ([+-]) {_TOKEN}\)")
_NEG = re.compile(r"\(-(\w+)\)")


def _expr(text: str) -> str:
    for pattern, repl in _SUBSTITUTIONS:
        text = re.sub(pattern, repl, text)
    return text


def _contracted(rhs: str, products: dict[str, tuple[str, str, bool]], policy: str) -> str | None:
    """``rhs`` (a sum or difference) as one fma where it has a product operand, else None."""
    m = _SUM.fullmatch(rhs)
    if m is None:
        return None
    left, op, right = m.groups()
    order = [(right, False), (left, True)] if policy == "right" else [(left, True), (right, False)]
    for name, is_left in order:
        if name not in products:
            continue
        x, y, negated = products[name]
        other = right if is_left else left
        # left: +-xy + other or +-xy - other; right: other + (+-xy) or other - (+-xy)
        sign = -1 if negated != (op == "-" and not is_left) else 1
        addend = f"-({other})" if op == "-" and is_left else other
        factor = f"-({x})" if sign < 0 else x
        return f"_cfma({_expr(factor)}, {_expr(y)}, {_expr(addend)})"
    return None


def python_source(wgsl: str, contract: str | None = None, trace: bool = False) -> str:
    """One of wgsl_math's generated functions (``let`` statements and a return) as Python;
    with ``trace`` it also copies its locals into the global dict ``_trace``."""
    lines = wgsl.strip().split("\n")
    head = re.match(r"fn (\w+)\(([^)]*)\) -> f32 \{", lines[0])
    params = [p.split(":")[0].strip() for p in head.group(2).split(",")]
    body = [re.fullmatch(r"\s*(?:let (\w+) = |(return) )(.*);", line) for line in lines[1:-1]]
    products: dict[str, tuple[str, str, bool]] = {}
    if contract:
        text = "\n".join(lines)
        for m in body:
            name, rhs = m.group(1), m.group(3)
            if name is None:
                continue
            p = _PRODUCT.fullmatch(rhs)
            if p is not None:
                products[name] = (p.group(1), p.group(2), False)
            n = _NEG.fullmatch(rhs)
            if n is not None and n.group(1) in products:
                x, y, _ = products[n.group(1)]
                products[name] = (x, y, True)
        if contract == "single":
            uses = {k: len(re.findall(rf"\b{k}\b", text)) - 1 for k in products}
            products = {k: v for k, v in products.items() if uses[k] == 1}
    out = [f"def {head.group(1)}({', '.join(params)}):"]
    for m in body:
        expr = (contract and _contracted(m.group(3), products, contract)) or _expr(m.group(3))
        if m.group(1):
            out.append(f"    {m.group(1)} = {expr}")
        else:
            out.extend(["    _trace.update(locals())"] if trace else [])
            out.append(f"    return {expr}")
    return "\n".join(out)


def _cfma(a, b, c):
    """A contracted ``a b + c``: one float32 rounding (integer operands: as written)."""
    if np.asarray(a).dtype != F32 and np.asarray(b).dtype != F32:
        return a * b + c
    return fma32(a, b, c)


def _fma_twice(a, b, c):
    a, b, c = (np.asarray(v, F32) for v in (a, b, c))
    return (a * b + c).astype(F32)


def evaluate(
    name: str,
    *args: np.ndarray,
    fused_fma: bool = True,
    contract: str | None = None,
    trace: dict | None = None,
    fma_rounds_twice: bool = False,
) -> np.ndarray:
    """``name`` on float32 ``args`` as its WGSL says (for an adapter with or without a fused
    fma), each operation rounded once, with ``contract`` (see the module docstring). ``trace``:
    a dict that receives every ``let`` value of ``fg_<name>_f32`` by name.
    ``fma_rounds_twice``: the ``fma`` builtin computed as a product, then a sum (as Vulkan
    allows: its Fma need not be fused), for the WGSL of an adapter probed as fused."""
    fn, definitions = wgsl_math.function(name, fused_fma)
    env = {
        "_trace": trace if trace is not None else {},
        "np": np,
        "F32": F32,
        "I32": I32,
        "U32": U32,
        "_bitcast": _bitcast,
        "_fma": _fma_twice if fma_rounds_twice else fma32,
        "_cfma": _cfma,
        "_convert": _convert,
        "_select": lambda f, t, c: np.where(c, t, f),
        "fg_isnan": np.isnan,
        "fg_fma": fma32,
    }
    for _, text in definitions:
        if text and not text.startswith("fn fg_fma("):  # fg_fma: an exact fma, above
            exec(
                python_source(text, contract, trace is not None and text.startswith(f"fn {fn}(")),
                env,
            )
    with np.errstate(all="ignore"):
        return np.asarray(env[fn](*(np.asarray(a, F32) for a in args)), F32)


def ulps(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|got - ref| in float32 ulps at ref (float64), the spacing at least the smallest
    normal's; 0 where got is ref rounded (inf included) and where both are NaN."""
    got = np.asarray(got, F32)
    ref = np.asarray(ref, np.float64)
    with np.errstate(all="ignore"):
        r32 = ref.astype(F32)
        spacing = np.spacing(np.abs(r32)).astype(np.float64)
        err = np.abs(got.astype(np.float64) - ref) / np.maximum(spacing, 2.0**-126 * 2.0**-23)
    same = (got == r32) | (np.isnan(got) & np.isnan(ref))
    return np.where(same, 0.0, np.where(np.isnan(err), np.inf, err))


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _erfc(x):
    return np.vectorize(math.erfc, otypes=[np.float64])(x)


def _special(name: str):
    from fungrad.lax import special_math

    return getattr(special_math, name)


#: name: (float64 reference, ulp bound) of the GPU's float32 functions; lgamma and digamma in
#: ulps of max(|f|, 1) over arguments that include their reflection ranges (where terms of
#: those sizes cancel next to their zeros: tests/test_gpu_math_paths.py)
REFERENCES = {
    "exp": (np.exp, 2.0),
    "exp2": (np.exp2, 2.0),
    "expm1": (np.expm1, 2.0),
    "log": (np.log, 2.0),
    "log1p": (np.log1p, 2.0),
    "tanh": (np.tanh, 2.0),
    "logistic": (lambda x: 1 / (1 + np.exp(-x)), 2.0),
    "sin": (np.sin, 2.0),
    "cos": (np.cos, 2.0),
    "tan": (np.tan, 2.5),
    "sinh": (np.sinh, 2.0),
    "cosh": (np.cosh, 2.0),
    "asinh": (np.arcsinh, 2.0),
    "acosh": (np.arccosh, 2.0),
    "atanh": (np.arctanh, 2.0),
    "atan": (np.arctan, 2.0),
    "asin": (np.arcsin, 2.0),
    "acos": (np.arccos, 2.0),
    "erf": (_erf, 2.0),
    "erfc": (_erfc, 2.5),
    "cbrt": (np.cbrt, 2.0),
    "lgamma": (lambda x: _special("lgamma")(x), 20.0),
    "digamma": (lambda x: _special("digamma")(x), 8.0),
    "pow": (np.power, 1.0),
    "atan2": (np.arctan2, 2.0),
}


def errors(name: str, got: np.ndarray, *args: np.ndarray) -> np.ndarray:
    """The ulp errors of float32 results ``got`` of ``name`` at ``args`` (see REFERENCES)."""
    ref_fn = REFERENCES[name][0]
    with np.errstate(all="ignore"):
        ref = ref_fn(*(np.asarray(a, F32).astype(np.float64) for a in args))
    err = ulps(got, ref)
    if name in ("lgamma", "digamma"):
        with np.errstate(all="ignore"):
            scale = np.spacing(np.maximum(np.abs(ref), 1.0).astype(F32)).astype(np.float64)
            err = np.where(err == 0, 0.0, np.abs(np.asarray(got, np.float64) - ref) / scale)
    return err
