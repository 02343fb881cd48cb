"""The GPU backend (jit(backend="gpu"), WGSL through wgpu) against hand-written WGSL.

Workloads (issue 5):
- chain: ``tanh(x)*0.5 + exp(-x*x) - sin(x)/(1+x*x)`` over 1M float32, input resident on the
  device, result read back every call; against one hand-written WGSL kernel run through wgpu
  the same way (WGSL builtins, one dispatch, same readback), and against the same chain as 11
  unfused dispatches (one per operation). Target: fungrad <= 1.1x the hand-written kernel.
- chain_parts: where the chain kernel's time goes: fungrad's kernel (as chosen for the
  adapter, and forced into each ``shader.KERNEL_STYLE``) against the same chain
  calling fungrad's math functions in order (not interleaved), that with one function at a
  time swapped for the WGSL builtin, and the hand-written kernel (same run).
- depth: what one WGSL function costs (8 evaluations per invocation, minus a copy): fungrad's
  sin against the builtin and a short Cody-Waite sin, and chains of 20 dependent steps. On
  llvmpipe the cost follows the longest dependency chain, not the operation count.
- copy bandwidth: a device-to-device buffer copy of the chain's input, to express the chain
  as achieved bandwidth (read 4 MB + write 4 MB) as a fraction of what the device copies.
- MLP step: the 784-512-512-10 training step of bench/jit_workloads.py on the GPU, params
  resident, steps/s (the loss is read back at the end and checked against numpy).
- reduce: a full sum and argmax of 1M float32, the serial loop (one invocation) against
  workgroup-tree reductions (forced with ``TREE_REDUCTIONS = "always"``).
- scatter: 60000 duplicate-heavy scatter-add / scatter-set updates, one invocation per update
  against the serial loop.
- sort: rows of 32 .. 16384 float32, the rank sort against the bitonic network.
- scan: cumsum along rows of 60000 .. 1M float32, one invocation per line against blocks.
- overhead: the per-call cost of a tiny function on GpuArrays (jit's GPU hot path).
Every result is checked against numpy (float64 where it matters). Dispatches per call are
counted. Run: python bench/gpu_bench.py [--n 1048576] [--only WORKLOAD ...]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))

from common import timeit  # noqa: E402

import fungrad as fg  # noqa: E402
import fungrad.numpy as fnp  # noqa: E402
from fungrad.lowering.gpu import helpers  # noqa: E402
from fungrad.lowering.gpu import runtime as gpu  # noqa: E402
from fungrad.lowering.gpu import shader as gpu_shader  # noqa: E402

# one invocation per element on a 2-D grid of workgroups (``grid``): a dimension holds at
# most 65535 of them (real GPUs reject more; 2^26 elements need 262144 groups of 256)
MAIN = (
    "@compute @workgroup_size(64)\n"
    "fn main(@builtin(global_invocation_id) id: vec3<u32>,\n"
    "        @builtin(num_workgroups) nwg: vec3<u32>) {\n"
    "  let i = id.x + id.y * nwg.x * 64u;\n"
)

HAND = (
    """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
"""
    + MAIN
    + """  if (i >= arrayLength(&y)) { return; }
  let v = x[i];
  y[i] = tanh(v) * 0.5 + exp(-v * v) - sin(v) / (1.0 + v * v);
}
"""
)


def wide(source: str, size: int) -> str:
    """``source`` (written with MAIN) with ``size`` invocations per workgroup."""
    return source.replace("@workgroup_size(64)", f"@workgroup_size({size})").replace(
        "nwg.x * 64u", f"nwg.x * {size}u"
    )


def grid(n: int, size: int) -> tuple[int, int, int]:
    """Workgroups of ``size`` for ``n`` invocations, 2-D beyond 65535 (fungrad's own grid:
    a kernel shader of fungrad dispatched by hand needs exactly this one)."""
    from fungrad.lowering.gpu.frame import grid_1d

    return grid_1d(n, size)


# the chain one operation per dispatch: t = op(a[, b]) over whole buffers


def _unfused_op(expr: str) -> str:
    inputs = ["a", "b"] if "b[i]" in expr else ["a"]
    decls = [
        f"@group(0) @binding({k}) var<storage, read> {v}: array<f32>;" for k, v in enumerate(inputs)
    ]
    return "\n".join(
        [
            *decls,
            f"@group(0) @binding({len(inputs)}) var<storage, read_write> t: array<f32>;",
            MAIN.rstrip("\n"),
            "  if (i >= arrayLength(&t)) { return; }",
            f"  t[i] = {expr};",
            "}",
            "",
        ]
    )


UNFUSED = [
    ("t0", "tanh(a[i])", "x", "x"),
    ("t1", "a[i] * 0.5", "t0", "t0"),
    ("t2", "a[i] * b[i]", "x", "x"),
    ("t3", "-a[i]", "t2", "t2"),
    ("t4", "exp(a[i])", "t3", "t3"),
    ("t5", "a[i] + b[i]", "t1", "t4"),
    ("t6", "sin(a[i])", "x", "x"),
    ("t7", "1.0 + a[i]", "t2", "t2"),
    ("t8", "a[i] / b[i]", "t6", "t7"),
    ("t9", "a[i] - b[i]", "t5", "t8"),
    ("y", "a[i]", "t9", "t9"),
]


def chain(x):
    return fnp.tanh(x) * 0.5 + fnp.exp(-x * x) - fnp.sin(x) / (1 + x * x)


def _dispatch(rt, pipeline, buffers, groups):
    """(pipeline, bind group of ``buffers`` at bindings 0, 1, ..., workgroups: an int or an
    (x, y, z) grid)."""
    groups = (groups, 1, 1) if isinstance(groups, int) else tuple(groups)
    group = rt.device.create_bind_group(
        layout=pipeline.get_bind_group_layout(0),
        entries=[
            {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}}
            for i, b in enumerate(buffers)
        ],
    )
    return pipeline, group, groups


def _run(rt, dispatches):
    enc = rt.device.create_command_encoder()
    cp = enc.begin_compute_pass()
    for pipeline, group, groups in dispatches:
        cp.set_pipeline(pipeline)
        cp.set_bind_group(0, group)
        cp.dispatch_workgroups(*groups)
    cp.end()
    rt.queue.submit([enc.finish()])


def _interleaved(runs: dict, rounds: int = 10) -> dict:
    """Best seconds per call of each of ``runs`` (name: function), measured in turns so that
    the machine's load changes hit them alike."""
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(rounds):
        for name, fn in runs.items():
            best[name] = min(best[name], timeit(fn, min_time=0.1, repeats=3)[0])
    return best


def bench_chain(n: int) -> None:
    rt = gpu.runtime()
    x = np.linspace(-4, 4, n, dtype=np.float32)
    ref = chain(x.astype(np.float64))
    usage = rt.usage
    xb = rt.device.create_buffer_with_data(data=x, usage=usage)
    yb = rt.device.create_buffer(size=4 * n, usage=usage)
    groups = grid(n, 64)
    hand = [_dispatch(rt, rt.pipeline("hand", HAND), [xb, yb], groups)]
    # the same kernel with fungrad's workgroup size (gpu_shader.KERNEL_WORKGROUP), for a fair view
    size = gpu_shader.KERNEL_WORKGROUP
    hand_wide = [
        _dispatch(
            rt,
            rt.pipeline("hand_wide", wide(HAND, size)),
            [xb, yb],
            grid(n, size),
        )
    ]
    bufs = {"x": xb, "y": yb}
    for name, *_ in UNFUSED[:-1]:
        bufs[name] = rt.device.create_buffer(size=4 * n, usage=usage)
    unfused = [
        _dispatch(
            rt,
            rt.pipeline(name, _unfused_op(expr)),
            [bufs[a], *([bufs[b]] if "b[i]" in expr else []), bufs[name]],
            groups,
        )
        for name, expr, a, b in UNFUSED
    ]

    def run_hand(d=hand):
        _run(rt, d)
        return np.frombuffer(rt.queue.read_buffer(yb, 0, 4 * n), np.float32)

    f = fg.jit(chain, backend="gpu")
    gx = fg.device_put(x, backend="gpu")

    def run_fungrad():
        return np.asarray(f(gx))

    for name, fn in (
        ("hand-written", run_hand),
        ("fungrad", run_fungrad),
        ("unfused (11 dispatches)", lambda: run_hand(unfused)),
        ("hand-written, wide groups", lambda: run_hand(hand_wide)),
    ):
        err = np.max(np.abs(fn() - ref))
        assert err < 1e-4, f"{name}: max error {err}"
    exe = f.lower(gx).compile()._exe
    best = _interleaved(
        {
            "fungrad": run_fungrad,
            "hand": run_hand,
            "unfused": lambda: run_hand(unfused),
            "hand_wide": lambda: run_hand(hand_wide),
        }
    )
    t_fg, t_hand, t_unf = best["fungrad"], best["hand"], best["unfused"]

    def copy():
        enc = rt.device.create_command_encoder()
        enc.copy_buffer_to_buffer(xb, 0, yb, 0, 4 * n)
        rt.queue.submit([enc.finish()])
        rt.queue.read_buffer(yb, 0, 4)

    t_copy = timeit(copy, min_time=1.0)[0]
    gx2 = f(gx)

    def no_readback():
        f(gx).block_until_ready()

    t_fg_dev = timeit(no_readback, min_time=1.0)[0]
    del gx2
    print(f"\nchain over {n} float32 on {rt.name}")
    print(
        f"  fungrad ({exe.num_dispatches} dispatch) + readback   {t_fg * 1e3:8.2f} ms   "
        f"{t_fg / t_hand:5.2f}x hand-written (target <= 1.1)"
    )
    print(f"  hand-written WGSL + readback        {t_hand * 1e3:8.2f} ms")
    print(
        f"  the same, {size} invocations a group  {best['hand_wide'] * 1e3:8.2f} ms   "
        f"fungrad is {t_fg / best['hand_wide']:5.2f}x this"
    )
    print(
        f"  unfused, 11 dispatches + readback   {t_unf * 1e3:8.2f} ms   "
        f"{t_unf / t_hand:5.2f}x hand-written"
    )
    gbps = 8 * n / t_fg_dev / 1e9
    copy_gbps = 8 * n / t_copy / 1e9
    print(
        f"  fungrad without readback            {t_fg_dev * 1e3:8.2f} ms   {gbps:6.1f} GB/s = "
        f"{gbps / copy_gbps:.0%} of a buffer copy's {copy_gbps:.1f} GB/s"
    )


def _time_kernels(rt, variants: dict, x: np.ndarray, checks: dict, rounds: int) -> dict:
    """Best device time (submit and wait, no readback) of each WGSL kernel of ``variants``
    (name: source binding x at 0 and a result of x's size at 1, one invocation per element),
    in turns; first each kernel named in ``checks`` (name: (reference, max abs error)) is
    run once and its result checked."""
    n = x.size
    xb = rt.device.create_buffer_with_data(data=x, usage=rt.usage)
    yb = rt.device.create_buffer(size=4 * n, usage=rt.usage)
    runs = {}
    for name, source in variants.items():
        size = int(re.search(r"@workgroup_size\((\d+)\)", source).group(1))
        d = [_dispatch(rt, rt.pipeline(name, source), [xb, yb], grid(n, size))]
        _run(rt, d)
        if name in checks:
            ref, tol = checks[name]
            got = np.frombuffer(rt.queue.read_buffer(yb, 0, 4 * n), np.float32)
            assert np.max(np.abs(got - ref)) < tol, name

        def run(d=d):
            _run(rt, d)
            rt.queue.read_buffer(yb, 0, 4)

        runs[name] = run
    return _interleaved(runs, rounds=rounds)


def _called_chain(builtins: tuple[str, ...] = ()) -> str:
    """The hand-written kernel calling fungrad's math functions (``fg_<name>_f32``, the
    renderer's form before it wrote them out and interleaved them), WGSL's builtins for the
    functions named in ``builtins``."""
    from fungrad.lowering.math import wgsl as wgsl_math

    defs = {"isnan": helpers.HELPERS["isnan"]}
    call = {}
    for fn in ("tanh", "exp", "sin"):
        call[fn] = fn
        if fn not in builtins:
            call[fn], texts = wgsl_math.function(fn)
            defs.update((k, t) for k, t in texts if k != "isnan")
    body = (
        HAND.replace("tanh(v)", f"{call['tanh']}(v)")
        .replace("exp(-v", f"{call['exp']}(-v")
        .replace("sin(v)", f"{call['sin']}(v)")
    )
    return "\n\n".join(defs.values()) + body


def _styled(f, x, style: str) -> str:
    """The WGSL of ``f``'s one kernel at ``x`` written in ``style`` (``shader.KERNEL_STYLE``;
    compiled afresh: no jit cache)."""
    from fungrad.lowering import compile_jaxpr

    old, gpu_shader.KERNEL_STYLE = gpu_shader.KERNEL_STYLE, style
    try:
        (shader,) = compile_jaxpr(fg.make_jaxpr(f)(x), "gpu", "bench").shaders
    finally:
        gpu_shader.KERNEL_STYLE = old
    return shader.source


def bench_chain_parts(n: int) -> None:
    """Where the chain kernel's time goes: fungrad's kernel (math functions written out and
    interleaved by ``schedule.schedule``) against the hand-written kernel calling fungrad's
    functions in order ("called"), that with one function at a time, or all, swapped for
    WGSL's builtin, and the hand-written kernel (builtins), in turns in one run (device time:
    submit and wait, no readback)."""
    rt = gpu.runtime()
    x = np.linspace(-4, 4, n, dtype=np.float32)
    gx = fg.device_put(x, backend="gpu")
    exe = fg.jit(chain, backend="gpu").lower(gx).compile()._exe
    (shader,) = exe.shaders
    variants = {"fungrad": shader.source}
    for style in gpu_shader.KERNEL_STYLES:  # the kernel as written for each kind of adapter
        variants[f"fungrad, {style} style"] = _styled(chain, gx, style)
    variants["called"] = _called_chain()
    for fn in ("exp", "tanh", "sin"):
        variants[f"called, builtin {fn}"] = _called_chain((fn,))
    variants["hand-written"] = HAND
    ref = chain(x.astype(np.float64))
    best = _time_kernels(rt, variants, x, {k: (ref, 1e-4) for k in variants}, rounds=15)
    t_hand, t_fg = best["hand-written"], best["fungrad"]
    print(f"\nchain kernel parts over {n} float32 on {rt.name} (device time, no readback)")
    for name, t in best.items():
        print(
            f"  {name:20s} {t * 1e3:7.2f} ms  {t / t_hand:5.2f}x hand-written   "
            f"{(t_fg - t) * 1e3:+6.2f} ms vs fungrad"
        )


_DEPTH_STEPS = 20
_DEPTH_KERNELS = {  # name: (statement j of a chain of _DEPTH_STEPS, from t0 = the argument)
    "20 dependent mul+add": "let t{j} = t{i} * 1.0001f + 0.5f;",
    "20 products, summed": "let t{j} = t{i} + t0 * {c}f;",
    "20 dependent mul|or": "let t{j} = bitcast<f32>(bitcast<u32>(t{i} * 1.0001f) | 1u);",
}
# Cody-Waite in three float32 pieces of pi/2, no tail, Cephes' kernels: about half the
# critical path of fungrad's sin, accurate only away from zeros of large arguments
_SHORT_SIN = """
  let a = abs(t0);
  let q = round(a * 0.63661975f);
  let r = ((a - q * 1.5703125f) - q * 0.00048375129699707031f) - q * 7.5497899548918821e-08f;
  let z = r * r;
  let s = r + r * z * fma(fma(-0.00019515296f, z, 0.0083321608f), z, -0.16666654f);
  let c = 1.0f - 0.5f * z + z * z * fma(fma(2.4433157e-05f, z, -0.0013887316f), z, 0.041666646f);
  let qi = i32(q);
  let v = select(s, c, (qi & 1) != 0);
  let flip = ((qi & 2) << 30u) ^ (bitcast<i32>(t0) & bitcast<i32>(0x80000000u));
  let t20 = bitcast<f32>(bitcast<i32>(v) ^ flip);"""


def bench_depth(n: int) -> None:
    """What a WGSL function costs on this adapter: kernels evaluating one function 8 times
    per invocation (arguments x + j/1000), minus a kernel that only copies. On llvmpipe the
    cost follows the longest chain of dependent operations, not the operation count: compare
    fungrad's sin (exact reduction, a long chain) with a short Cody-Waite sin and the builtin,
    and chains of 20 steps with and without float latency."""
    from fungrad.lowering.math import wgsl as wgsl_math

    rt = gpu.runtime()
    x = np.linspace(-4, 4, n, dtype=np.float32)

    def kernel(defs: str, body: str, result: str = "t20") -> str:
        return (
            defs + "\nfn f(t0: f32) -> f32 {\n" + body + f"\n  return {result};\n}}\n"
            "@group(0) @binding(0) var<storage, read> x: array<f32>;\n"
            "@group(0) @binding(1) var<storage, read_write> y: array<f32>;\n"
            + MAIN
            + "  if (i >= arrayLength(&y)) { return; }\n"
            "  var acc = 0.0f;\n  for (var j = 0; j < 8; j++) { acc += f(x[i] + f32(j) * "
            "0.001f); }\n  y[i] = acc * 0.125f;\n}\n"
        )

    sin_defs = "\n".join(src for _, src in wgsl_math.function("sin")[1])
    variants = {
        "copy": kernel("", "", "t0"),
        "builtin sin": kernel("", "", "sin(t0)"),
        "fungrad sin": kernel(sin_defs, "", "fg_sin_f32(t0)"),
        "short sin": kernel("", _SHORT_SIN),
    }
    for name, step in _DEPTH_KERNELS.items():
        variants[name] = kernel(
            "",
            "\n".join(
                "  " + step.format(i=j - 1, j=j, c=1 + j / 1000) for j in range(1, _DEPTH_STEPS + 1)
            ),
        )
    ref = np.mean([np.sin((x + np.float32(j / 1000)).astype(np.float64)) for j in range(8)], 0)
    best = _time_kernels(
        rt, variants, x, {k: (ref, 1e-6) for k in variants if "sin" in k}, rounds=10
    )
    print(f"\nfunction cost over {n} x 8 float32 evaluations on {rt.name} (device time)")
    for name, t in best.items():
        print(f"  {name:22s} {t * 1e3:7.2f} ms   {(t - best['copy']) * 1e3:+7.2f} ms over copy")


def bench_mlp() -> None:
    import jit_workloads as W

    step, args = W.MLP.build(fg)
    gstep = fg.jit(step.__wrapped__ if hasattr(step, "__wrapped__") else step, backend="gpu")
    params, x, y = args
    gparams = fg.device_put(params, backend="gpu")
    gx, gy = fg.device_put(x, backend="gpu"), fg.device_put(y, backend="gpu")
    out = gstep(gparams, gx, gy)
    exe = gstep.lower(gparams, gx, gy).compile()._exe
    losses = W.mlp_losses(lambda *a: gstep(*a), (gparams, gx, gy), steps=5)
    assert losses[-1] < losses[0], losses

    def one():
        fg.tree_util.tree_leaves(gstep(gparams, gx, gy))[0].block_until_ready()

    t = timeit(one, min_time=2.0, repeats=3)[0]
    del out
    print(f"\nMLP 784-512-512-10 training step, batch 128, on {gpu.runtime().name}")
    print(f"  {exe.num_dispatches} dispatches per step; {1 / t:8.1f} steps/s ({t * 1e3:.1f} ms)")


def _compiled(f, args, tree: str):
    """``f``'s GPU executable with tree reductions in mode ``tree``."""
    from fungrad.lowering import compile_jaxpr
    from fungrad.lowering.gpu import schemes as ge

    old, ge.TREE_REDUCTIONS = ge.TREE_REDUCTIONS, tree
    try:
        return compile_jaxpr(fg.make_jaxpr(f)(*args), "gpu", "bench")
    finally:
        ge.TREE_REDUCTIONS = old


def bench_reduce(n: int) -> None:
    """A full sum and argmax of n float32 (one output each): the serial loop (one
    invocation) against workgroup trees, result read back. Where the adapter stops loops
    early (lavapipe: 65535 iterations) the serial loop is compared at 60000 elements."""
    rt = gpu.runtime()
    sizes = [n] if rt.loop_limit is None or n < rt.loop_limit else [60000, n]
    for size in sizes:
        x = np.random.default_rng(0).standard_normal(size).astype(np.float32)
        gx = fg.device_put(x, backend="gpu")
        scale = float(np.abs(x).astype(np.float64).sum())
        print(f"\nfull reductions of {size} float32 on {rt.name} (+ readback)")
        for name, f, ref in (
            ("sum", fnp.sum, x.astype(np.float64).sum()),
            ("argmax", fnp.argmax, np.argmax(x)),
        ):
            row = f"  {name:7s}"
            times = {}
            for mode in ("never", "always"):
                try:
                    exe = _compiled(f, [gx], mode)
                except fg.LoweringError:
                    row += " serial: beyond the adapter's loop limit"
                    continue
                run = lambda exe=exe, gx=gx: np.asarray(exe.call([gx])[0])  # noqa: E731
                got = run()
                # float32 sums accumulate rounding errors: bound them by the sum of |x|
                assert abs(float(got) - float(ref)) <= 1e-4 * scale, (name, mode, got, ref)
                t = times[mode] = timeit(run, min_time=1.0)[0]
                label = "serial" if mode == "never" else "tree"
                row += f" {label} ({exe.num_dispatches} dispatches) {t * 1e3:8.2f} ms "
            if len(times) == 2:
                row += f"  serial/tree {times['never'] / times['always']:5.2f}x"
            print(row)


def bench_scatter(m: int = 60000, n: int = 1000) -> None:
    """x.at[i].add(u) and .set(u) with m duplicate-heavy updates into n elements: one
    invocation per update (atomics; the set's last-wins claim) against the serial loop the
    GPU backend used before (forced here by patching the step renderers' scatter test)."""
    from fungrad.lowering import compile_jaxpr
    from fungrad.lowering.gpu import dispatches as gd

    rt = gpu.runtime()
    rng = np.random.default_rng(0)
    args = [
        fg.device_put(a, backend="gpu")
        for a in (
            rng.uniform(-1, 1, n).astype(np.float32),
            rng.integers(0, n, m).astype(np.int32),
            rng.uniform(-1, 1, m).astype(np.float32),
        )
    ]
    print(f"\nscatter of {m} updates into {n} float32 on {rt.name} (+ readback)")
    for name, f in (
        ("add", lambda x, i, u: x.at[i].add(u)),
        ("set", lambda x, i, u: x.at[i].set(u)),
    ):
        ref = np.asarray(fg.jit(f)(*[np.asarray(a) for a in args]))
        times, row = {}, f"  {name:4s}"
        for label in ("serial", "parallel"):
            patch = gd.scatter_like
            if label == "serial":
                gd.scatter_like = lambda kern: False
            try:
                exe = compile_jaxpr(fg.make_jaxpr(f)(*args), "gpu", "bench")
            finally:
                gd.scatter_like = patch
            run = lambda exe=exe: np.asarray(exe.call(args)[0])  # noqa: E731
            np.testing.assert_allclose(run(), ref, rtol=1e-4, atol=1e-4)
            times[label] = t = timeit(run, min_time=1.0)[0]
            row += f" {label} ({exe.num_dispatches} dispatches) {t * 1e3:8.2f} ms "
        print(row + f"  serial/parallel {times['serial'] / times['parallel']:5.2f}x")


def bench_overhead() -> None:
    """Per-call cost of a tiny GPU function (x * 2 + 1 on 8 float32, GpuArray in and out, no
    readback): the jitted call (the GPU hot path), the same call through jit's general path
    (a keyword argument skips the hot path), and the executable's own call (the floor)."""
    rt = gpu.runtime()

    def tiny(x):
        return x * 2 + 1

    f = fg.jit(tiny, backend="gpu")
    gx = fg.device_put(np.arange(8, dtype=np.float32), backend="gpu")
    np.testing.assert_array_equal(np.asarray(f(gx)), np.arange(8) * 2 + 1)
    exe = f.lower(gx).compile()._exe
    rows = [
        ("jit hot path f(gx)", lambda: f(gx)),
        ("jit general path f(x=gx)", lambda: f(x=gx)),
        ("executable call (floor)", lambda: exe.call([gx])),
    ]
    best = {name: float("inf") for name, _ in rows}
    for _ in range(3):  # interleaved: the machine is noisy
        for name, fn in rows:
            best[name] = min(best[name], timeit(fn, min_time=0.3)[0])
            gx.block_until_ready()
    print(f"\nper-call overhead of x * 2 + 1 on 8 float32 on {rt.name} (no readback)")
    for name, _ in rows:
        print(f"  {name:26s} {best[name] * 1e6:8.1f} us")


def bench_sort() -> None:
    """Sorting rows (float32, read back): the rank sort (one dispatch, O(n) per element)
    against the bitonic network, forced either way through ``SORT_RANK_MAX_ROW``."""
    from fungrad.lowering import compile_jaxpr
    from fungrad.lowering.gpu import schemes as ge

    rt = gpu.runtime()
    rng = np.random.default_rng(0)
    print(f"\nsort along the last axis on {rt.name} (+ readback)")
    for shape in ((256, 32), (64, 128), (1, 2048), (64, 2048), (1, 16384)):
        x = fg.device_put(rng.standard_normal(shape).astype(np.float32), backend="gpu")
        ref = np.sort(np.asarray(x), axis=1)
        row, times = f"  {str(shape):12s}", {}
        for label, limit in (("rank", 1 << 30), ("bitonic", 0)):
            old, ge.SORT_RANK_MAX_ROW = ge.SORT_RANK_MAX_ROW, limit
            try:
                exe = compile_jaxpr(fg.make_jaxpr(lambda v: fnp.sort(v, axis=1))(x), "gpu", "bench")
            except fg.LoweringError:
                row += f" {label}: beyond the adapter's loop limit"
                continue
            finally:
                ge.SORT_RANK_MAX_ROW = old
            run = lambda exe=exe, x=x: np.asarray(exe.call([x])[0])  # noqa: E731
            np.testing.assert_array_equal(run(), ref)
            times[label] = t = timeit(run, min_time=0.5, repeats=3)[0]
            row += f" {label} ({exe.num_dispatches}) {t * 1e3:8.2f} ms "
        if len(times) == 2:
            row += f"  rank/bitonic {times['rank'] / times['bitonic']:6.2f}x"
        print(row)


def bench_scan(n: int) -> None:
    """cumsum (float32, read back) one invocation per line (``SCAN = "never"``: where a line
    is longer than the adapter's loop limit it is split anyway) against blocks of
    ``SCAN_BLOCK`` elements in three dispatches (``"always"``), interleaved, best of 5."""
    from fungrad.lowering import compile_jaxpr
    from fungrad.lowering.gpu import schemes as ge

    rt = gpu.runtime()
    rng = np.random.default_rng(0)
    print(f"\ncumsum along the last axis on {rt.name} (+ readback)")
    for shape in ((60000,), (16, 60000), (n,), (4096, 256)):
        x = fg.device_put(rng.uniform(-1, 1, shape).astype(np.float32), backend="gpu")
        ref = np.cumsum(np.asarray(x).astype(np.float64), axis=-1)
        scale = np.cumsum(np.abs(np.asarray(x)).astype(np.float64), axis=-1)
        runs = {}
        for label, mode, block in (
            ("one block", "never", ge.SCAN_BLOCK),
            ("blocks of 128", "always", 128),
            ("blocks of 2048", "always", 2048),
            ("auto", "auto", ge.SCAN_BLOCK),
        ):
            old = ge.SCAN, ge.SCAN_BLOCK
            ge.SCAN, ge.SCAN_BLOCK = mode, block
            try:
                exe = compile_jaxpr(
                    fg.make_jaxpr(lambda v: fg.lax.cumsum(v, v.ndim - 1))(x), "gpu", "bench"
                )
            finally:
                ge.SCAN, ge.SCAN_BLOCK = old
            run = lambda exe=exe, x=x: np.asarray(exe.call([x])[0])  # noqa: E731
            assert np.all(np.abs(run() - ref) <= 1e-5 * scale + 1e-6), label
            runs[label] = (exe, run)
        best = _interleaved({label: run for label, (_, run) in runs.items()}, rounds=5)
        base = best["one block"]
        print(
            f"  {str(shape):12s} "
            + "  ".join(
                f"{label} ({runs[label][0].num_dispatches}) {t * 1e3:7.2f} ms {base / t:4.2f}x"
                for label, t in best.items()
            )
        )


WORKLOADS = (
    "chain",
    "chain_parts",
    "depth",
    "reduce",
    "scatter",
    "sort",
    "scan",
    "overhead",
    "mlp",
)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument(
        "--only", choices=WORKLOADS, action="append", help="run only these workloads (repeatable)"
    )
    a = ap.parse_args()
    only = a.only or WORKLOADS
    t0 = time.perf_counter()
    runs = {
        "chain": lambda: bench_chain(a.n),
        "chain_parts": lambda: bench_chain_parts(a.n),
        "depth": lambda: bench_depth(a.n),
        "reduce": lambda: bench_reduce(a.n),
        "scatter": bench_scatter,
        "sort": bench_sort,
        "scan": lambda: bench_scan(a.n),
        "overhead": bench_overhead,
        "mlp": bench_mlp,
    }
    for name in WORKLOADS:
        if name in only:
            runs[name]()
    print(f"\n(total {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
