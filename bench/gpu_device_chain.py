"""Fused elementwise kernels on a real GPU against the copy ceiling (issue 23, slice "chain").

For each workload (the benchmark chain ``tanh(x)*0.5 + exp(-x*x) - sin(x)/(1+x*x)``, each of
its functions alone, log, sqrt, sigmoid, a tanh-gelu and a log/sqrt chain; sin also over a
wide range and with a few arguments beyond 2^24, whose reduction sits behind a branch in the
"gpu" style) over ``--n`` float32 (default 2^26):

- ``hand``: one hand-written WGSL kernel with WGSL's builtins (loose precision: their ulps
  are shown, not judged);
- ``gpu`` / ``cpu``: fungrad's kernel written in each code-generation style
  (``shader.KERNEL_STYLE`` "gpu": rare paths behind ``if`` blocks, statements in order;
  "cpu-driver": every path computed and selected, statements interleaved for llvmpipe; sin
  and cos reduce |x| < 4096 by a short fma reduction in the "gpu" style),
  dispatched by hand like the others (device time: (K dispatches - 1 dispatch) / (K - 1));
- ``noOR``: the "gpu" kernel with its opaque ORs removed (``bitcast<f32>(bitcast<u32>(v) |
  fg_zero)`` -> ``v``): what they cost, and whether the shader compiler then changes the
  values (a diagnostic only: fungrad keeps them);
- for the chain also fungrad's whole call (``jit(chain, backend="gpu")`` on a GpuArray, no
  readback) at n and n/4: the difference to the kernel alone is per-call cost.

Every kernel's result is checked against float64 numpy on its first ``CHECK`` elements (max
error in float32 ulps of the reference; ulps of max(|ref|, 1) for the compound chains, whose
float32 intermediates round); the elements where fungrad's two styles differ are counted (sin
and cos below 4096 reduce differently: a few last-bit differences); the raw dispatch of
fungrad's kernel is compared with its own call; the first inputs are special values (NaN,
infinities, signed zeros, a denormal, huge), compared bit for bit between the variants and
left out of the ulps. GB/s counts 8 bytes per element (read + write); ``%copy`` is that over
a vec4 copy kernel's GB/s in the same run. Static op estimate: WGSL statements in the
kernel's functions outside ``if`` blocks (+ inside them). A table goes to stdout, one JSON
line per result to ``$OUT/chain.jsonl``; every item catches its own errors.

Run: OUT=/tmp/out python bench/gpu_device_chain.py [--quick] [--n N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
import traceback
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))

import fungrad as fg  # noqa: E402
import fungrad.numpy as fnp  # noqa: E402
from fungrad.lowering import compile_jaxpr  # noqa: E402
from fungrad.lowering.gpu import runtime as gpu  # noqa: E402
from fungrad.lowering.gpu import shader as gpu_shader  # noqa: E402

OUT = os.environ.get("OUT") or "/tmp/gpu_device_out"
CHECK = 1 << 22  # elements checked against float64 numpy
#: the first inputs of every workload: NaN, infinities, signed zeros, a denormal, the largest
#: float; fungrad's variants must agree on them bit for bit (the opaque ORs keep IEEE
#: semantics that a shader compiler may fold away without them: "noOR-specials-differ")
SPECIALS = np.float32([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-40, -3e38, 3.4028235e38])
WG = 256
BUDGET_S = 50.0  # workloads left when this much time has passed are skipped (and said so)

# -- the workloads: (name, fungrad function, WGSL builtin expression of v, input, floor) ------
# floor: ulps are of max(|ref|, floor) (a compound result crosses zero; 0: a plain function)


def _gelu(x):
    return 0.5 * x * (1 + fnp.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def _chain(x):
    return fnp.tanh(x) * 0.5 + fnp.exp(-x * x) - fnp.sin(x) / (1 + x * x)


def _uniform(lo, hi):
    return lambda rng, n: rng.uniform(lo, hi, n).astype(np.float32)


def _log_uniform(lo, hi):
    return lambda rng, n: np.exp(rng.uniform(np.log(lo), np.log(hi), n)).astype(np.float32)


def _some_huge(rng, n):
    """|x| < 1e4, and one element in 1024 beyond 2^24 (up to 2^30), at random places."""
    x = rng.uniform(-1e4, 1e4, n).astype(np.float32)
    k = max(1, n // 1024)
    where = rng.integers(0, n, k)  # (a few repeats do not matter)
    x[where] = (rng.uniform(2.0**24, 2.0**30, k) * rng.choice([-1, 1], k)).astype(np.float32)
    return x


WORKLOADS = [
    (
        "chain",
        _chain,
        "tanh(v) * 0.5 + exp(-v * v) - sin(v) / (1.0 + v * v)",
        _uniform(-4, 4),
        1.0,
    ),
    ("tanh", fnp.tanh, "tanh(v)", _uniform(-4, 4), 0.0),
    ("exp", fnp.exp, "exp(v)", _uniform(-80, 80), 0.0),
    ("sin", fnp.sin, "sin(v)", _uniform(-4, 4), 0.0),
    ("sin_wide", fnp.sin, "sin(v)", _uniform(-1e4, 1e4), 0.0),
    ("sin_huge", fnp.sin, "sin(v)", _some_huge, 0.0),
    ("div", lambda x: x / (1 + x * x), "v / (1.0 + v * v)", _uniform(-4, 4), 0.0),
    ("log", fnp.log, "log(v)", _log_uniform(1e-6, 1e6), 0.0),
    ("sqrt", fnp.sqrt, "sqrt(v)", _log_uniform(1e-6, 1e6), 0.0),
    ("sigmoid", fg.nn.sigmoid, "1.0 / (1.0 + exp(-v))", _uniform(-20, 20), 0.0),
    (
        "gelu",
        _gelu,
        "0.5 * v * (1.0 + tanh(0.7978845608 * (v + 0.044715 * v * v * v)))",
        _uniform(-6, 6),
        1.0,
    ),
    (
        "logsqrt",
        lambda x: fnp.log(1 + x * x) * 0.5 + fnp.sqrt(x * x + 1),
        "log(1.0 + v * v) * 0.5 + sqrt(v * v + 1.0)",
        _uniform(-100, 100),
        1.0,
    ),
]


def _reference(name: str, x: np.ndarray) -> np.ndarray:
    """float64 numpy of workload ``name`` at ``x``."""
    d = x.astype(np.float64)
    if name == "chain":
        return np.tanh(d) * 0.5 + np.exp(-d * d) - np.sin(d) / (1 + d * d)
    if name == "tanh":
        return np.tanh(d)
    if name == "exp":
        return np.exp(d)
    if name.startswith("sin"):
        return np.sin(d)
    if name == "div":
        return d / (1 + d * d)
    if name == "log":
        return np.log(d)
    if name == "sqrt":
        return np.sqrt(d)
    if name == "sigmoid":
        return 1 / (1 + np.exp(-d))
    if name == "gelu":
        return 0.5 * d * (1 + np.tanh(0.7978845608 * (d + 0.044715 * d**3)))
    if name == "logsqrt":
        return np.log1p(d * d) * 0.5 + np.sqrt(d * d + 1)
    raise KeyError(name)


# -- kernels ------------------------------------------------------------------------------------

_HAND = """@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size({wg})
fn main(@builtin(global_invocation_id) id: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {{
  let i = id.x + id.y * nwg.x * {wg}u;
  if (i >= arrayLength(&y)) {{ return; }}
  let v = x[i];
  y[i] = {expr};
}}
"""
_COPY4 = """@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> y: array<vec4<f32>>;
@compute @workgroup_size({wg})
fn main(@builtin(global_invocation_id) id: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {{
  let i = id.x + id.y * nwg.x * {wg}u;
  if (i >= arrayLength(&y)) {{ return; }}
  y[i] = x[i];
}}
"""
# an opaque OR of fungrad's kernels: bitcast<f32>(bitcast<u32>(VALUE) | fg_zero or fg_z<k>)
_OPAQUE = re.compile(r"bitcast<f32>\(bitcast<u32>\(((?:[^()]|\([^()]*\))+)\) \| fg_z(?:ero|\d+)\)")


def strip_ors(source: str) -> str:
    """``source`` without its opaque float ORs (the value itself instead)."""
    return _OPAQUE.sub(lambda m: m.group(1), source)


def op_counts(source: str) -> tuple[int, int]:
    """(statements outside ``if`` blocks, statements inside them) of all the shader's
    functions: a static estimate of the work per element (a builtin counts as one)."""
    straight = branch = depth = 0
    for line in source.splitlines():
        s = line.strip()
        if line.startswith("fn ") or line == "}":
            depth = 0
            continue
        if s.startswith("if (") and s.endswith("{"):
            depth += 1
            continue
        if s == "}":
            depth -= 1
            continue
        if re.match(r"(let|var) \w+|\w+(\[[^]]*\])? = ", s):
            if depth > 0:
                branch += 1
            else:
                straight += 1
    return straight, branch


def fungrad_shader(f, gx, style: str):
    """(the Shader of ``f``'s one kernel at ``gx`` written in ``style``, the executable)."""
    old, gpu_shader.KERNEL_STYLE = gpu_shader.KERNEL_STYLE, style
    try:
        exe = compile_jaxpr(fg.make_jaxpr(f)(gx), "gpu", "chain")
    finally:
        gpu_shader.KERNEL_STYLE = old
    if exe.num_dispatches != 1 or len(exe.shaders) != 1:
        raise RuntimeError(f"{exe.num_dispatches} dispatches, not one kernel")
    (sh,) = exe.shaders
    if [w for _, w in sh.bindings] != [False, True]:
        raise RuntimeError(f"bindings {sh.bindings}: not one input and one output")
    return sh, exe


class Timer:
    """Kernels on buffers x (binding 0) and y (binding 1), timed on the device by
    (K dispatches in one submit - 1 dispatch) / (K - 1), medians of ``reps``, after ``warm``
    seconds of K-dispatch batches (an H200 gave the same one-op kernel 0.28 ms and 0.87 ms
    in one run without them: its clocks ramp up under load)."""

    def __init__(self, rt, k: int, reps: int, warm: float = 0.0):
        self.rt, self.k, self.reps, self.warm = rt, k, reps, warm

    def run(self, pipeline, bufs, grid, count: int) -> None:
        dev = self.rt.device
        group = dev.create_bind_group(
            layout=pipeline.get_bind_group_layout(0),
            entries=[
                {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}}
                for i, b in enumerate(bufs)
            ],
        )
        enc = dev.create_command_encoder()
        cp = enc.begin_compute_pass()
        cp.set_pipeline(pipeline)
        cp.set_bind_group(0, group)
        for _ in range(count):
            cp.dispatch_workgroups(*grid)
        cp.end()
        self.rt.queue.submit([enc.finish()])

    def seconds(self, pipeline, bufs, grid) -> float:
        def batch(count):
            t0 = time.perf_counter()
            self.run(pipeline, bufs, grid, count)
            self.rt.queue.read_buffer(bufs[-1], 0, 4)
            return time.perf_counter() - t0

        end = time.perf_counter() + self.warm
        batch(self.k)
        while time.perf_counter() < end:
            batch(self.k)
        one = statistics.median(batch(1) for _ in range(self.reps))
        many = statistics.median(batch(self.k) for _ in range(self.reps))
        return max(many - one, 1e-9) / (self.k - 1)


def ulp_error(got: np.ndarray, ref: np.ndarray, floor: float) -> float:
    """Max |got - ref| in float32 ulps of max(|ref|, floor) (ulps of |ref| where floor is
    0); a NaN or inf where the reference differs counts as inf."""
    got = got.astype(np.float64)
    special = ~np.isfinite(ref) | ~np.isfinite(got)
    same = (np.isnan(got) & np.isnan(ref)) | (got == ref)
    if np.any(special & ~same):
        return float("inf")
    ok = ~special
    scale = np.maximum(np.abs(ref[ok]), floor).astype(np.float32)
    spacing = np.spacing(np.maximum(scale, np.float32(2.0**-126))).astype(np.float64)
    err = np.abs(got[ok] - ref[ok]) / spacing
    return float(err.max()) if err.size else 0.0


# -- the run ------------------------------------------------------------------------------------


def record(rows: list, name: str, **fields) -> None:
    row = {"name": name, **fields}
    rows.append(row)
    with open(os.path.join(OUT, "chain.jsonl"), "a") as f:
        f.write(json.dumps(row, default=str) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="2^18 elements, short timings")
    ap.add_argument("--n", type=int, default=None, help="elements (default 2^26)")
    ap.add_argument("--only", action="append", help="workloads to run (repeatable)")
    a = ap.parse_args()
    n = a.n or (1 << 18 if a.quick else 1 << 26)
    os.makedirs(OUT, exist_ok=True)
    t_start = time.perf_counter()
    rows: list = []
    rt = gpu.runtime()
    timer = Timer(
        rt, k=3 if a.quick else 20, reps=3 if a.quick else 7, warm=0.0 if a.quick else 0.15
    )
    auto = gpu_shader.kernel_style()
    print(
        f"adapter: {rt.name}  fused_fma={rt.fused_fma}  auto style={auto}  n={n}  "
        f"(check: first {min(n, CHECK)} elements vs float64 numpy)"
    )
    record(rows, "env", adapter=rt.name, fused_fma=bool(rt.fused_fma), auto_style=auto, n=n)
    usage = rt.usage
    xb = rt.device.create_buffer(size=4 * n, usage=usage)
    yb = rt.device.create_buffer(size=4 * n, usage=usage)
    copy_gbps = None
    try:
        rng = np.random.default_rng(0)
        x = rng.standard_normal(n).astype(np.float32)
        rt.queue.write_buffer(xb, 0, x)
        pipe = rt.pipeline("copy4", _COPY4.format(wg=WG))
        from fungrad.lowering.gpu.frame import grid_1d

        sec = timer.seconds(pipe, [xb, yb], grid_1d(n // 4, WG))
        exact = bool(np.array_equal(np.frombuffer(rt.queue.read_buffer(yb), np.float32), x))
        copy_gbps = 8 * n / sec / 1e9 if exact else None
        record(rows, "copy_vec4", ms=sec * 1e3, GBps=8 * n / sec / 1e9, exact=exact)
        print(f"copy vec4: {sec * 1e3:.4g} ms  {8 * n / sec / 1e9:.0f} GB/s  exact={exact}")
    except Exception as e:  # the rest still runs, as fractions of nothing
        print(f"copy vec4 FAILED {type(e).__name__}: {e}".splitlines()[0])
        traceback.print_exc(limit=2)
    print(
        "workload  | hand: ms %copy ulp | gpu style: ms %copy ulp ops(+in branches) | "
        "cpu-driver style: same | gpu, no ORs: ms %copy ulp | gpu/cpu bits differ"
    )
    for name, f, expr, make, floor in WORKLOADS:
        if a.only and name not in a.only:
            continue
        if time.perf_counter() - t_start > BUDGET_S and not a.quick:
            print(f"{name:9s} | skipped: over {BUDGET_S:.0f} s")
            record(rows, name, skipped="time budget")
            continue
        try:
            _workload(rows, rt, timer, n, name, f, expr, make, floor, copy_gbps, a.quick)
        except Exception as e:
            print(f"{name:9s} | FAILED {type(e).__name__}: {str(e).splitlines()[0][:150]}")
            record(rows, name, error=f"{type(e).__name__}: {e}")
    print(f"(chain device script: {time.perf_counter() - t_start:.0f} s)")


def _workload(rows, rt, timer, n, name, f, expr, make, floor, copy_gbps, quick) -> None:
    x = make(np.random.default_rng(zlib.crc32(name.encode())), n)
    x[: SPECIALS.size] = SPECIALS  # (their bits are compared between variants, not ulps)
    m = min(n, CHECK)
    with np.errstate(all="ignore"):
        ref = _reference(name, x[:m])
    gx = fg.device_put(x, backend="gpu")
    xb = gx._dbuf.buffer  # (the GpuArray's own storage buffer: no second copy of x)
    yb = rt.device.create_buffer(size=4 * n, usage=rt.usage)
    results, bits = {}, {}
    sources = {"hand": _HAND.format(wg=WG, expr=expr)}
    call_out = None
    for style, key in (("gpu", "gpu"), ("cpu-driver", "cpu")):
        try:
            sh, exe = fungrad_shader(f, gx, style)
            sources[key] = sh.source
            if key == "gpu":
                sources["noOR"] = strip_ors(sh.source)
                call_out = np.asarray(exe.call([gx])[0])[:m]
        except Exception as e:
            results[key] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"}
    for key, src in sources.items():
        try:
            grid = _grid(n, src)
            pipe = rt.pipeline(f"chain_{name}_{key}", src)
            rt.queue.write_buffer(yb, 0, np.full(m, np.nan, np.float32))  # poison
            timer.run(pipe, [xb, yb], grid, 1)
            got = np.frombuffer(rt.queue.read_buffer(yb, 0, 4 * m), np.float32)
            bits[key] = got.view(np.uint32).copy()
            sec = timer.seconds(pipe, [xb, yb], grid)
            gbps = 8 * n / sec / 1e9
            straight, branch = op_counts(src)
            results[key] = {
                "ms": sec * 1e3,
                "GBps": gbps,
                "of_copy": gbps / copy_gbps if copy_gbps else None,
                "max_ulp": ulp_error(got[SPECIALS.size :], ref[SPECIALS.size :], floor),
                "ops": straight,
                "ops_in_branches": branch,
            }
        except Exception as e:
            results[key] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"}
    same = None  # elements whose bits differ between the styles (sin, cos: the short
    if "gpu" in bits and "cpu" in bits:  # reduction below 4096 may round the other way)
        same = int(np.count_nonzero(bits["gpu"] != bits["cpu"]))
    k = SPECIALS.size
    specials = {  # each variant's results at the special inputs, as bits
        key: [f"{int(w):08x}" for w in v[:k]] for key, v in bits.items()
    }
    or_specials = None
    if "gpu" in bits and "noOR" in bits:
        or_specials = bool(np.array_equal(bits["gpu"][:k], bits["noOR"][:k]))
    raw_is_call = None
    if call_out is not None and "gpu" in bits:
        raw_is_call = bool(np.array_equal(call_out.view(np.uint32), bits["gpu"]))
    for key, r in results.items():
        record(rows, name, variant=key, **r)
    record(
        rows,
        name,
        variant="compare",
        gpu_cpu_bits_differ=same,
        raw_eq_call=raw_is_call,
        noOR_eq_gpu_at_specials=or_specials,
        specials_in=[f"{int(w):08x}" for w in SPECIALS.view(np.uint32)],
        specials_out=specials,
    )

    def cell(key, ops=False):
        r = results.get(key, {})
        if "error" in r:
            return f"{key}: {r['error'][:40]}"
        if not r:
            return "-"
        frac = f"{r['of_copy']:.0%}" if r.get("of_copy") is not None else "?"
        text = f"{r['ms']:.3g} {frac} {r['max_ulp']:.3g}u"
        if ops:
            text += f" {r['ops']}(+{r['ops_in_branches']})"
        return text

    print(
        f"{name:9s} | {cell('hand')} | {cell('gpu', True)} | {cell('cpu', True)} | "
        f"{cell('noOR')} | "
        f"{same}{'' if raw_is_call in (None, True) else ' RAW!=CALL'}"
        f"{'' if or_specials in (None, True) else ' noOR-specials-differ'}"
    )
    if name == "chain":
        _calls(rows, f, x, n, quick)


def _grid(n: int, source: str) -> tuple[int, int, int]:
    from fungrad.lowering.gpu.frame import grid_1d

    size = int(re.search(r"@workgroup_size\((\d+)\)", source).group(1))
    return grid_1d(n, size)


def _calls(rows, f, x, n, quick) -> None:
    """fungrad's whole call (jit, GpuArray in and out, no readback) at n and n/4, in the
    adapter's own style: per-call time = this - the kernel's device time."""

    def per_call(call, inner, reps) -> float:
        call()
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(inner):
                out = call()
            fg.tree_util.tree_leaves(out)[0].block_until_ready()
            times.append((time.perf_counter() - t0) / inner)
        return statistics.median(times)

    line = []
    for size in (n, n // 4):
        for how in ("jit", "exe.call"):
            try:
                gx = fg.device_put(x[:size], backend="gpu")
                if how == "jit":
                    jf = fg.jit(f, backend="gpu")
                    call = lambda jf=jf, gx=gx: jf(gx)  # noqa: E731
                else:
                    exe = compile_jaxpr(fg.make_jaxpr(f)(gx), "gpu", "chain")
                    call = lambda exe=exe, gx=gx: exe.call([gx])  # noqa: E731
                sec = per_call(call, 3 if quick else 10, 3 if quick else 5)
                gbps = 8 * size / sec / 1e9
                record(rows, "chain_call", how=how, n=size, ms=sec * 1e3, GBps=gbps)
                line.append(f"{how} n={size}: {sec * 1e3:.3g} ms ({gbps:.0f} GB/s)")
            except Exception as e:
                line.append(f"{how} n={size}: FAILED {type(e).__name__}")
                record(rows, "chain_call", how=how, n=size, error=f"{type(e).__name__}: {e}")
    print("chain, fungrad's whole call (auto style, no readback):")
    print("  " + "; ".join(line))


if __name__ == "__main__":
    main()
