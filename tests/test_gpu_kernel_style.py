"""The two ways the GPU backend writes a kernel (``shader.KERNEL_STYLE``, ``kernel_style``).

A CPU driver (llvmpipe) gets every rare path computed and selected and its ``let``
statements interleaved; a real GPU gets rare paths (sin/cos/tan's large-argument reduction)
behind ``if`` blocks and its statements in order. Both are the same algorithm with the same
roundings, so on one adapter they must agree bit for bit, and both keep the functions'
documented ulp bounds. CI's adapter is llvmpipe: the "gpu" style is forced here to test it.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.lowering import compile_jaxpr
from fungrad.lowering.gpu import runtime as gpu_runtime
from fungrad.lowering.gpu import shader as gpu_shader
from fungrad.lowering.math import wgsl as wgsl_math


def _chain(x):
    return fnp.tanh(x) * 0.5 + fnp.exp(-x * x) - fnp.sin(x) / (1 + x * x)


FUNCTIONS = {
    "sin": fnp.sin,
    "cos": fnp.cos,
    "tan": fnp.tan,
    "chain": _chain,
    "sin*cos+exp": lambda x: fnp.sin(x) * fnp.cos(2 * x) + fnp.exp(x * 1e-3),
}


def _compiled(f, x, style: str):
    old, gpu_shader.KERNEL_STYLE = gpu_shader.KERNEL_STYLE, style
    try:
        return compile_jaxpr(fg.make_jaxpr(f)(x), "gpu", "test")
    finally:
        gpu_shader.KERNEL_STYLE = old


def _run(f, x: np.ndarray, style: str) -> np.ndarray:
    gx = fg.device_put(x, backend="gpu")
    return np.asarray(_compiled(f, gx, style).call([gx])[0])


def _arguments(n: int = 20000) -> np.ndarray:
    """Small, medium and huge magnitudes (beyond 2^24 the large-argument reduction), both
    signs, and the special values."""
    rng = np.random.default_rng(7)
    mag = np.concatenate(
        [
            rng.uniform(0, 4, n),
            rng.uniform(4, 1e5, n),
            np.exp(rng.uniform(np.log(2.0**24), np.log(3e38), n)),
            [0.0, 2.0**24, np.nextafter(np.float32(2.0**24), 0), 1e-45, 1e-38, 3.4028235e38],
        ]
    ).astype(np.float32)
    sign = rng.choice(np.float32([-1, 1]), mag.size)
    return np.concatenate([mag * sign, np.float32([np.inf, -np.inf, np.nan, -0.0])])


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_both_styles_compute_the_same_bits(name):
    x = _arguments()
    f = FUNCTIONS[name]
    with np.errstate(all="ignore"):
        got = {style: _run(f, x, style) for style in gpu_shader.KERNEL_STYLES}
    a, b = (got[s].view(np.uint32) for s in gpu_shader.KERNEL_STYLES)
    bad = np.flatnonzero(a != b)
    assert bad.size == 0, (
        f"{name}({x[bad[0]]!r}): gpu style {got['gpu'][bad[0]]!r}, "
        f"cpu-driver style {got['cpu-driver'][bad[0]]!r}"
    )


@pytest.mark.usefixtures("gpu")
@settings(max_examples=10, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=1, max_size=64))
def test_gpu_style_sin_cos_agree_with_the_cpu_driver_style_on_any_floats(values):
    x = np.array(values, np.float32)
    f = lambda v: fnp.sin(v) + fnp.cos(v)  # noqa: E731
    with np.errstate(all="ignore"):
        a, b = (_run(f, x, style) for style in gpu_shader.KERNEL_STYLES)
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize(
    "name, f, ref, bound",
    [("sin", fnp.sin, np.sin, 2.0), ("cos", fnp.cos, np.cos, 2.0), ("tan", fnp.tan, np.tan, 2.5)],
)
def test_gpu_style_keeps_the_ulp_bounds(name, f, ref, bound):
    x = _arguments(5000)
    x = x[np.isfinite(x)]
    y = _run(f, x, "gpu").astype(np.float64)
    r = ref(x.astype(np.float64))
    spacing = np.maximum(np.spacing(np.abs(r).astype(np.float32)).astype(np.float64), 2.0**-126)
    err = np.where(y == r.astype(np.float32), 0.0, np.abs(y - r) / spacing)
    worst = int(np.argmax(err))
    assert err[worst] <= bound, f"{name}({x[worst]!r}) = {y[worst]!r}: {err[worst]:.2f} ulp"


PROGRAMS = {  # the block of rare values inside reductions, scans, loops and row kernels
    "sum": lambda x: fnp.sum(fnp.sin(x * 3e7)),
    "rows": lambda x: fnp.max(fnp.cos(x.reshape(8, -1) * 3e7), axis=1),
    "cumsum": lambda x: fnp.cumsum(fnp.tan(x * 3e7)),
    "fori": lambda x: fg.lax.fori_loop(0, 3, lambda i, v: fnp.sin(v * 1e8) + v, x),
}


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_both_styles_agree_inside_reductions_and_loops(name):
    x = np.random.default_rng(3).uniform(-1, 1, 256).astype(np.float32)
    a, b = (_run(PROGRAMS[name], x, style) for style in gpu_shader.KERNEL_STYLES)
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def test_the_empty_and_scalar_cases_render_in_both_styles(gpu):
    for shape in ((0,), ()):
        x = np.zeros(shape, np.float32)
        outs = [_run(fnp.sin, x, style) for style in gpu_shader.KERNEL_STYLES]
        assert all(o.shape == shape for o in outs)
        np.testing.assert_array_equal(outs[0], outs[1])


# -- the WGSL itself (no GPU needed) ------------------------------------------------------------


class _Runtime:
    """A stand-in runtime that renders but runs nothing (as tests/test_golden_wgsl.py's)."""

    name = "stand-in"
    fused_fma = True
    loop_limit = None
    max_bindings = 8
    max_binding_bytes = 1 << 27

    def __init__(self, cpu_adapter: bool):
        self.cpu_adapter = cpu_adapter

    def upload(self, value):
        return _Handle()

    def pipeline(self, name, source):
        return _Handle()


class _Handle:
    buffer = None


def _main(source: str) -> list[str]:
    return source[source.index("fn main(") :].splitlines()


@pytest.mark.parametrize("cpu_adapter, style", [(True, "cpu-driver"), (False, "gpu")])
def test_auto_style_follows_the_adapter(monkeypatch, cpu_adapter, style):
    monkeypatch.setattr(gpu_runtime, "runtime", lambda: _Runtime(cpu_adapter))
    assert gpu_shader.kernel_style() == style
    exe = compile_jaxpr(fg.make_jaxpr(fnp.sin)(np.zeros(8, np.float32)), "gpu", "test")
    main = _main(exe.shaders[0].source)
    # the large-argument reduction: behind an if block on a GPU, selected on a CPU driver
    blocks = [line for line in main if re.fullmatch(r"\s*if \(\w+\) \{", line)]
    assert len(blocks) == (0 if cpu_adapter else 1)


def test_gpu_style_puts_the_large_reduction_behind_a_branch(monkeypatch):
    monkeypatch.setattr(gpu_runtime, "runtime", lambda: _Runtime(False))
    x = np.zeros(8, np.float32)
    src = {s: _compiled(fnp.sin, x, s).shaders[0].source for s in gpu_shader.KERNEL_STYLES}
    gpu, cpu = _main(src["gpu"]), _main(src["cpu-driver"])
    start = next(i for i, line in enumerate(gpu) if re.fullmatch(r"\s*if \(\w+\) \{", line))
    end = start + next(i for i, line in enumerate(gpu[start:]) if line == "  }")
    inside = gpu[start + 1 : end]
    statements = [line for line in cpu if " = " in line]
    # the same statements in all, a third or more of them inside the block
    assert len(inside) >= len(statements) // 3
    # (+ the block's test and the assignments of its 3 values)
    assert sum(" = " in line for line in gpu) == len(statements) + 1 + 3
    # each value of the block is declared before it and assigned at its end
    assigned = [
        line.split(" = ")[0].strip() for line in inside if not line.strip().startswith("let")
    ]
    assert len(assigned) == 3
    for name in assigned:
        assert any(re.fullmatch(rf"\s*var {name}: (f32|i32);", line) for line in gpu[:start])


def test_cpu_driver_style_is_interleaved_and_gpu_style_is_in_order(monkeypatch):
    monkeypatch.setattr(gpu_runtime, "runtime", lambda: _Runtime(True))
    x = np.zeros(8, np.float32)
    src = {s: _compiled(_chain, x, s).shaders[0].source for s in gpu_shader.KERNEL_STYLES}

    def prefixes(lines):  # which math function (m<k>_) each written-out statement is of
        return [m.group(1) for line in lines if (m := re.match(r"\s*let (m\d+)_v", line))]

    gpu, cpu = prefixes(_main(src["gpu"])), prefixes(_main(src["cpu-driver"]))
    assert set(gpu) == set(cpu)
    switches = lambda p: sum(a != b for a, b in zip(p, p[1:]))  # noqa: E731
    assert switches(gpu) == len(set(gpu)) - 1  # one function after the other
    assert switches(cpu) > 3 * len(set(cpu))  # interleaved


def test_a_bad_style_names_the_setting(monkeypatch):
    monkeypatch.setattr(gpu_shader, "KERNEL_STYLE", "fast")
    with pytest.raises(ValueError, match="KERNEL_STYLE.*'fast'"):
        gpu_shader.kernel_style()


def test_rare_values_hidden_inside_the_block_stay_inside():
    """An opaque OR made inside a rare block is out of scope after it: hiding the same
    value again afterwards makes a new one outside."""
    b = wgsl_math.WGSLBuilder(branches=True)
    x = wgsl_math.Value(b, "a0", "float")
    s = x + 1.0
    (inner,) = b.rare(lambda: b.cmp("ogt", x, 2.0), lambda: (b.keep(s) * 2.0,))
    after = b.keep(s)
    text = "\n".join(b.lines)
    close = b.lines.index("  }")
    assert after.ref not in "\n".join(b.lines[:close])
    assert re.search(rf"var {inner.ref}: f32;", text)
    # without branches: the same values, straight-line
    c = wgsl_math.WGSLBuilder(branches=False)
    y = wgsl_math.Value(c, "a0", "float")
    c.rare(lambda: c.cmp("ogt", y, 2.0), lambda: (c.keep(y + 1.0) * 2.0,))
    assert not any("if" in line or "var" in line for line in c.lines)
