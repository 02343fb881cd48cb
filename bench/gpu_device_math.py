"""The GPU's float32 math functions on a real device (issue 23): probes, the points that
failed on the H100, a per-operation trace of a few of them, and each function's max error.

Sections (each item guarded: an error is printed and recorded, the rest goes on):
- ``probes``: the adapter, fungrad's probes (fused_fma, loop_limit, flushes_subnormals,
  contracts_mul_add) and division/sqrt accuracy (max ulp of ``a / b`` and ``sqrt`` against
  correctly rounded numpy on random float32).
- ``compiler``: what the shader compiler does to float algebra, from one small shader:
  whether it simplifies (a + b) - a to b, also through the opaque OR wgsl_math uses, whether
  it reassociates 1 + (x + y), rounds division correctly and gives its residual exactly,
  contracts a product used once / twice, flushes subnormal inputs / results, fuses fma().
- ``points``: pow, lgamma, digamma, exp, exp2 at the arguments that failed on the H100,
  against float64 references (ulps), and which model of the compiler reproduces the GPU's
  bits: ``written`` (every operation rounded once as written), ``c_all`` (every a*b+c fused
  into one fma), ``c_single`` (only products used once fused): tests/wgsl_math_emulation.py.
- ``trace``: for pow, lgamma and digamma at failing points, every ``let`` value of the
  function's WGSL read back from the GPU and compared with the models: the first operation
  where the GPU leaves each model is printed with its WGSL text (what the compiler changed).
- ``sweep``: every GPU math function on N random float32 over its usual range (1M; --quick
  20k) against float64 numpy / fungrad.lax.special_math: max ulp (``lgamma``/``digamma`` in
  ulps of max(|f|, 1)), its bound, OVER where it exceeds it, and the share of results
  bit-equal to each model (first 50k; ``fma2``: the ``fma`` builtin rounded twice, which
  Vulkan's Fma allows). Subnormal results count as right when the GPU flushes
  them to zero and the probe says it flushes.

Every result is appended as a JSON line to ``$OUT/math.jsonl``.
Run: OUT=/tmp/out python bench/gpu_device_math.py [--quick] [--only SECTION ...]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import sys
import time
import traceback

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import fungrad as fg  # noqa: E402
from fungrad import lax  # noqa: E402
from fungrad.lax import special_math  # noqa: E402
from fungrad.lowering.gpu import helpers as gpu_helpers  # noqa: E402
from fungrad.lowering.gpu import runtime as gpu  # noqa: E402
from fungrad.lowering.math import wgsl as wgsl_math  # noqa: E402
from tests import wgsl_math_emulation as emu  # noqa: E402

F32 = np.float32
OUT = os.environ.get("OUT") or "/tmp/gpu_device_out"
MODELS = ("written", "c_all", "c_single", "fma2")
_CONTRACT = {"written": None, "c_all": "all", "c_single": "single", "fma2": None}


def record(section: str, name: str, **fields) -> None:
    with open(os.path.join(OUT, "math.jsonl"), "a") as f:
        f.write(json.dumps({"section": section, "name": name, **fields}, default=str) + "\n")


@contextlib.contextmanager
def guarded(section: str, name: str):
    try:
        yield
    except Exception as e:  # one failing item must not stop the others
        print(f"{section:6} {name}: ERROR {type(e).__name__}: {str(e)[:150]}", flush=True)
        record(section, name, error=f"{type(e).__name__}: {e}"[:500], tb=traceback.format_exc())


def _flushes() -> bool:
    return bool(getattr(gpu.runtime(), "flushes_subnormals", False))


def ulps(got, ref, scale=None) -> np.ndarray:
    """|got - ref| in float32 ulps at ref (or at ``scale``); flush-aware."""
    got = np.asarray(got, F32)
    ref = np.asarray(ref, np.float64)
    err = emu.ulps(got, ref if scale is None else ref)
    if scale is not None:
        with np.errstate(all="ignore"):
            sp = np.spacing(np.asarray(scale, F32)).astype(np.float64)
            err = np.where(err == 0, 0.0, np.abs(got.astype(np.float64) - ref) / sp)
    if _flushes():
        with np.errstate(invalid="ignore"):
            flushed = (got == 0) & (np.abs(ref) < 2.0**-126)
        err = np.where(flushed, 0.0, err)
    return np.where(np.isnan(err), np.inf, err)


def gpu_call(name: str, *args: np.ndarray) -> np.ndarray:
    return np.asarray(fg.jit(getattr(lax, name), backend="gpu")(*args))


def model_values(name: str, *args: np.ndarray) -> dict[str, np.ndarray]:
    """Each model's results (NaN everywhere for a function written as WGSL text with
    branches, erf_inv, which the emulation does not read)."""
    fused = bool(gpu.runtime().fused_fma)
    out = {}
    for m in MODELS:
        try:
            out[m] = emu.evaluate(
                name, *args, fused_fma=fused, contract=_CONTRACT[m], fma_rounds_twice=m == "fma2"
            )
        except Exception:
            out[m] = np.full(args[0].shape, np.nan, F32)
    return out


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))


# -- references --------------------------------------------------------------------------


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _erfc(x):
    return np.vectorize(math.erfc, otypes=[np.float64])(x)


REFS = {
    "exp": np.exp,
    "exp2": np.exp2,
    "expm1": np.expm1,
    "log": np.log,
    "log1p": np.log1p,
    "tanh": np.tanh,
    "logistic": lambda x: 1 / (1 + np.exp(-x)),
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
    "atan": np.arctan,
    "asin": np.arcsin,
    "acos": np.arccos,
    "erf": _erf,
    "erfc": _erfc,
    "cbrt": np.cbrt,
    "lgamma": special_math.lgamma,
    "digamma": special_math.digamma,
    "pow": np.power,
    "atan2": np.arctan2,
    "erf_inv": special_math.erf_inv,
}

# (label, function, (lo, hi) [, (lo, hi) of the second argument], ulp bound); bounds are the
# test files' (tests/test_gpu_math_ulp.py, test_gpu_math_paths.py), lgamma/digamma in ulps
# of max(|f|, 1)
SWEEP = [
    ("exp", "exp", (-104.0, 89.0), 2.0),
    ("exp2", "exp2", (-140.0, 128.0), 2.0),
    ("expm1", "expm1", (-20.0, 20.0), 2.0),
    ("log", "log", (1e-30, 1e30), 2.0),
    ("log1p", "log1p", (-0.9, 100.0), 2.0),
    ("tanh", "tanh", (-10.0, 10.0), 2.0),
    ("logistic", "logistic", (-30.0, 30.0), 2.0),
    ("sin", "sin", (-1e5, 1e5), 2.0),
    ("cos", "cos", (-1e5, 1e5), 2.0),
    ("tan", "tan", (-10.0, 10.0), 2.5),
    ("sinh", "sinh", (-80.0, 80.0), 2.0),
    ("cosh", "cosh", (-80.0, 80.0), 2.0),
    ("asinh", "asinh", (-1e4, 1e4), 2.0),
    ("acosh", "acosh", (1.0, 1e4), 2.0),
    ("atanh", "atanh", (-0.999, 0.999), 2.0),
    ("atan", "atan", (-100.0, 100.0), 2.0),
    ("asin", "asin", (-1.0, 1.0), 2.0),
    ("acos", "acos", (-1.0, 1.0), 2.0),
    ("erf", "erf", (-5.0, 5.0), 2.0),
    ("erfc", "erfc", (-4.0, 9.0), 2.5),
    ("cbrt", "cbrt", (-1e4, 1e4), 2.0),
    ("lgamma+", "lgamma", (0.5, 20.0), 3.0),
    ("lgamma-", "lgamma", (-10.0, -0.5), 20.0),
    ("digamma+", "digamma", (0.5, 20.0), 2.5),
    ("digamma0", "digamma", (1e-30, 1e-3), 2.5),
    ("pow_a", "pow", (0.1, 100.0), (-10.0, 10.0), 1.0),
    ("pow_b", "pow", (0.5, 2.0), (-100.0, 100.0), 1.0),
    ("pow_c", "pow", (1e-30, 1e30), (-1.2, 1.2), 1.0),
    ("atan2", "atan2", (-10.0, 10.0), (-10.0, 10.0), 2.0),
    ("erf_inv", "erf_inv", (-0.999, 0.999), 20.0),
]

# the arguments that failed on the H100 (tests.log of the first device run)
POINTS = [
    ("pow", (1.4462088, -97.719986)),
    ("pow", (2.8183644, 9.962315)),
    ("pow", (2.2680597e-27, -1.1742828)),
    ("pow", (47.10213, 11.438509)),
    ("lgamma", (-2.7219894,)),
    ("lgamma", (1e-38,)),
    ("lgamma", (-1e-38,)),
    ("digamma", (-3.6104894,)),
    ("digamma", (3.2956577e-05,)),
    ("exp", (-98.46302,)),
    ("exp", (-88.0,)),
    ("exp", (-87.33655,)),
    ("exp2", (-132.31134,)),
]


def _sample(lo: float, hi: float, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if lo > 0 and hi / lo > 100:
        return np.exp(rng.uniform(np.log(lo), np.log(hi), n)).astype(F32)
    return rng.uniform(lo, hi, n).astype(F32)


def _errors(fn: str, args, got) -> np.ndarray:
    with np.errstate(all="ignore"):
        ref = REFS[fn](*(a.astype(np.float64) for a in args))
        scale = np.maximum(np.abs(ref), 1.0) if fn in ("lgamma", "digamma") else None
    return ulps(got, ref, scale), ref


# -- sections ---------------------------------------------------------------------------


def section_probes(n: int) -> None:
    rt = gpu.runtime()
    probes = {
        k: getattr(rt, k, "absent")
        for k in ("fused_fma", "loop_limit", "flushes_subnormals", "contracts_mul_add")
    }
    print(f"adapter {rt.name}: " + " ".join(f"{k}={v}" for k, v in probes.items()))
    record("probes", "runtime", adapter=rt.name, **{k: str(v) for k, v in probes.items()})
    rng = np.random.default_rng(5)
    a = (rng.uniform(1, 2, n) * np.exp2(rng.integers(-60, 60, n))).astype(F32)
    c = (rng.uniform(1, 2, n) * np.exp2(rng.integers(-60, 60, n))).astype(F32)
    for label, f, args, ref in (
        ("divide", lambda x, y: x / y, (a, c), a.astype(np.float64) / c),
        ("sqrt", lax.sqrt, (a,), np.sqrt(a.astype(np.float64))),
    ):
        with guarded("probes", label):
            got = np.asarray(fg.jit(f, backend="gpu")(*args))
            err = ulps(got, ref)
            wrong = float(np.mean(got != ref.astype(F32)))
            print(f"{label}: max {err.max():.2f} ulp, not correctly rounded {wrong:.2%}")
            record("probes", label, max_ulp=float(err.max()), not_rounded=wrong)


_COMPILER = """@group(0) @binding(0) var<storage, read_write> d: array<u32>;
fn ld(i: u32) -> f32 { return bitcast<f32>(d[i]); }
fn st(i: u32, v: f32) { d[i] = bitcast<u32>(v); }
@compute @workgroup_size(1)
fn main() {
  let a = ld(0u); let b = ld(1u); let x = ld(2u); let y = ld(3u); let m = ld(4u);
  let sub = ld(5u); let f = ld(6u); let c = ld(7u); let three = ld(20u); let two = ld(21u);
  let s = a + b;
  st(8u, s - a);
  let u = d[0];
  let z = ((u * u) + u) & 1u;
  st(9u, bitcast<f32>(bitcast<u32>(s) | z) - a);
  st(10u, 1.0f + (x + y));
  let q = a / three;
  st(11u, fma(-q, three, a));
  st(12u, q);
  let p = f * f;
  st(13u, p + c);
  st(14u, p);
  st(15u, f * f + c);
  st(16u, sub * 1048576.0f);
  st(17u, m * 0.5f);
  st(18u, fma(f, f, -(f * f)));
  st(19u, sqrt(two));
}"""


def section_compiler() -> None:
    """What the shader compiler does to float algebra, one tiny shader: each answer Y/N."""
    v = np.zeros(22, F32)
    v[:8] = [1.0, 1e-8, 3 * 2.0**-26, -1.0, 2.0**-126, 2.0**-140, 1 + 2.0**-12, -(1 + 2.0**-11)]
    v[20], v[21] = 3.0, 2.0
    got = _run_once(_COMPILER, v.view(np.uint32)).view(F32)
    q = np.float64(got[12])
    answers = {
        "simplifies (a+b)-a": got[8] != 0,
        "through the opaque OR": got[9] != 0,
        "reassociates 1+(x+y)": got[10] == 0,
        "division correctly rounded": got[12] == F32(1 / 3),
        "division residual exact": np.float64(got[11]) == 1.0 - 3.0 * q,
        "contracts a product used once": got[15] != 0,
        "contracts a product used twice": got[13] != 0,
        "flushes subnormal inputs": got[16] == 0,
        "flushes subnormal results": got[17] == 0,
        "fma builtin fused": got[18] == F32(2.0**-24),
        "sqrt correctly rounded": got[19] == F32(np.sqrt(2.0)),
    }
    print("compiler: " + "; ".join(f"{k} {'Y' if v else 'N'}" for k, v in answers.items()))
    record("compiler", "answers", **{k: bool(v) for k, v in answers.items()})


def section_points() -> None:
    print(f"{'point':34} {'gpu':>14} {'ulp':>7}  bit-equal models")
    for fn, args in POINTS:
        label = f"{fn}({', '.join(f'{F32(v):.8g}' for v in args)})"
        with guarded("points", label):
            arrays = [np.array([v], F32) for v in args]
            got = gpu_call(fn, *arrays)
            err, ref = _errors(fn, arrays, got)
            models = model_values(fn, *arrays)
            eq = [m for m in MODELS if _same(models[m], got)[0]]
            print(f"{label:34} {got[0]:14.8g} {err[0]:7.2f}  {','.join(eq) or '-'}")
            record(
                "points",
                label,
                gpu=float(got[0]),
                ref=float(ref[0]),
                ulp=float(err[0]),
                models={m: float(v[0]) for m, v in models.items()},
                equal=eq,
            )


def _dump_shader(name: str, fused: bool, types: dict[str, str], arity: int) -> tuple[str, int]:
    """A shader running ``fg_<name>_f32`` once on ``fg_dump[K..K+arity)`` that stores every
    ``let vN`` of it as u32 bits in ``fg_dump[N]`` and the result in ``fg_dump[K+arity]``."""
    fn, defs = wgsl_math.function(name, fused)
    k = max(int(v[1:]) for v in types) + 1
    parts = ["@group(0) @binding(0) var<storage, read_write> fg_dump: array<u32>;"]
    for key, text in defs:
        if key == "isnan":
            parts.append(gpu_helpers.HELPERS["isnan"])
            continue
        if not text.startswith(f"fn {fn}("):
            parts.append(text)
            continue
        out = []
        for line in text.split("\n"):
            out.append(line)
            m = re.match(r"\s*let (v\d+) = ", line)
            if m and m.group(1) in types:
                v, t = m.group(1), types[m.group(1)]
                bits = {"u32": v, "bool": f"select(0u, 1u, {v})"}.get(t, f"bitcast<u32>({v})")
                out.append(f"  fg_dump[{v[1:]}] = {bits};")
        parts.append("\n".join(out))
    call = ", ".join(f"bitcast<f32>(fg_dump[{k + i}])" for i in range(arity))
    parts.append(
        "@compute @workgroup_size(1)\nfn main() {\n"
        f"  fg_dump[{k + arity}] = bitcast<u32>({fn}({call}));\n}}"
    )
    return "\n".join(parts), k


def _run_once(src: str, words: np.ndarray) -> np.ndarray:
    rt = gpu.runtime()
    db = rt.upload(words)
    pipeline = rt.pipeline("math_trace", src)
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
    cp.dispatch_workgroups(1)
    cp.end()
    rt.queue.submit([enc.finish()])
    return rt.download(db, words.shape, np.uint32)


def _type(v) -> str | None:
    dt = np.asarray(v).dtype
    return {"float32": "f32", "int32": "i32", "uint32": "u32", "bool": "bool"}.get(dt.name)


@contextlib.contextmanager
def _unhidden(on: bool):
    """With ``on``: the WGSL as before two-sums hid their operands (``Builder.exact`` the
    identity), to see whether hiding them is what changed the device's results."""
    if not on:
        yield
        return
    saved = wgsl_math.WGSLBuilder.exact
    wgsl_math.WGSLBuilder.exact = lambda self, v: v
    wgsl_math._body.cache_clear()
    try:
        yield
    finally:
        wgsl_math.WGSLBuilder.exact = saved
        wgsl_math._body.cache_clear()


def section_trace() -> None:
    items = [(p, False) for p in (POINTS[0], POINTS[1], POINTS[3], POINTS[4], POINTS[7])]
    items += [(POINTS[8], False), (POINTS[0], True), (POINTS[1], True)]
    for (fn, args), unhidden in items:
        label = f"{fn}({', '.join(f'{F32(v):.8g}' for v in args)})"
        label += " unhidden" if unhidden else ""
        with guarded("trace", label), _unhidden(unhidden):
            _trace_one(fn, args, label)


def _trace_one(fn: str, args, label: str) -> None:
    """Every ``let`` of ``fg_<fn>_f32`` at ``args`` from the GPU against the models."""
    fused = bool(gpu.runtime().fused_fma)
    arrays = [np.array([v], F32) for v in args]
    traces = {}
    for m in MODELS:
        traces[m] = {}
        emu.evaluate(
            fn,
            *arrays,
            fused_fma=fused,
            contract=_CONTRACT[m],
            trace=traces[m],
            fma_rounds_twice=m == "fma2",
        )
    lets = {
        k: _type(v) for k, v in traces["written"].items() if re.fullmatch(r"v\d+", k) and _type(v)
    }
    src, k = _dump_shader(fn, fused, lets, len(args))
    words = np.zeros(k + len(args) + 1, np.uint32)
    words[k : k + len(args)] = np.array(args, F32).view(np.uint32)
    got = _run_once(src, words)
    order = sorted(lets, key=lambda v: int(v[1:]))
    text = dict(re.findall(r"let (v\d+) = (.*);", wgsl_math.function(fn, fused)[1][-1][1]))
    firsts = {}
    for m in MODELS:
        for v in order:
            want = np.asarray(traces[m][v]).reshape(-1)[0]
            w = np.uint32(int(bool(want))) if lets[v] == "bool" else want.view(np.uint32)
            if got[int(v[1:])] != w and not (lets[v] == "f32" and _nan_bits(got, v, want)):
                firsts[m] = v
                break
    result = got[k + len(args)].view(F32)
    err, _ = _errors(fn, arrays, np.array([result], F32))
    shown = [
        f"{m}: {firsts[m]} = {text.get(firsts[m], '?')[:28]}" if m in firsts else f"{m}: ="
        for m in MODELS
    ]
    print(f"trace {label} -> {float(result):.8g} ({err[0]:.2f} ulp); " + "; ".join(shown))
    record(
        "trace",
        label,
        gpu=float(result),
        ulp=float(err[0]),
        first_difference={m: firsts.get(m) for m in MODELS},
        texts={firsts[m]: text.get(firsts[m]) for m in firsts},
        gpu_lets={v: int(got[int(v[1:])]) for v in order},
        wgsl=wgsl_math.function(fn, fused)[1][-1][1],
    )


def _nan_bits(got, v, want) -> bool:
    return bool(np.isnan(np.asarray(got[int(v[1:])]).view(F32)) and np.isnan(want))


def section_sweep(n: int, m: int) -> None:
    print(f"{'function':10} {'max ulp':>9} {'bound':>5} {'at':>26}  " + " ".join(MODELS))
    for i, item in enumerate(SWEEP):
        label, fn, ranges, bound = item[0], item[1], item[2:-1], item[-1]
        with guarded("sweep", label):
            args = [_sample(lo, hi, n, 100 * i + j) for j, (lo, hi) in enumerate(ranges)]
            got = gpu_call(fn, *args)
            err, _ = _errors(fn, args, got)
            worst = int(np.argmax(err))
            models = model_values(fn, *(a[:m] for a in args))
            eq = {k: float(np.mean(_same(v, got[:m]))) for k, v in models.items()}
            at = ",".join(f"{a[worst]:.8g}" for a in args)
            flag = "OVER" if err[worst] > bound else ""
            print(
                f"{label:10} {err[worst]:9.2f} {bound:5.1f} {at:>26}  "
                + " ".join(f"{eq[k]:7.2%}" for k in MODELS)
                + f" {flag}"
            )
            record(
                "sweep",
                label,
                max_ulp=float(err[worst]),
                bound=bound,
                over=bool(err[worst] > bound),
                at=[float(a[worst]) for a in args],
                equal=eq,
                n=n,
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (lavapipe)")
    ap.add_argument("--only", nargs="*", default=["probes", "compiler", "points", "trace", "sweep"])
    opts = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    n, m = (20_000, 5_000) if opts.quick else (1_000_000, 50_000)
    np.seterr(all="ignore")
    times = []
    for name in opts.only:
        t0 = time.perf_counter()
        with guarded(name, "section"):
            {
                "probes": lambda: section_probes(n),
                "compiler": section_compiler,
                "points": section_points,
                "trace": section_trace,
                "sweep": lambda: section_sweep(n, m),
            }[name]()
        times.append(f"{name} {time.perf_counter() - t0:.1f} s")
    print("time: " + ", ".join(times), flush=True)


if __name__ == "__main__":
    main()
