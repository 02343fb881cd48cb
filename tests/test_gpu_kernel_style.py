"""The two ways the GPU backend writes a kernel (``shader.KERNEL_STYLE``, ``kernel_style``).

A CPU driver (llvmpipe) gets every rare path computed and selected and its ``let``
statements interleaved; a real GPU gets rare paths behind ``if`` blocks and its statements in
order, and sin and cos reduce arguments below ``trig.SHORT_LIMIT`` by a short fma reduction
(the exact one behind a branch). Where the algorithm is the same (tan, everything from
SHORT_LIMIT on, the other functions) the two styles agree bit for bit on one adapter; sin and
cos below it differ by at most an ulp, and both keep the documented ulp bounds, also under
the contraction a real GPU's compiler may apply (numpy emulation of the WGSL). CI's adapter is
llvmpipe: the "gpu" style is forced here to test it.
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
from fungrad.lowering.math import trig
from fungrad.lowering.math import wgsl as wgsl_math


def _chain(x):
    return fnp.tanh(x) * 0.5 + fnp.exp(-x * x) - fnp.sin(x) / (1 + x * x)


SAME = {  # the same algorithm in both styles: the same bits
    "tan": fnp.tan,
    "exp+tanh": lambda x: fnp.exp(x * 1e-3) + fnp.tanh(x),
}
NEAR = {  # sin and cos: the short reduction below SHORT_LIMIT in the gpu style
    "sin": fnp.sin,
    "cos": fnp.cos,
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


def _bits_differ(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.view(np.uint32) != b.view(np.uint32)


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("name", sorted(SAME))
def test_both_styles_compute_the_same_bits(name):
    x = _arguments()
    with np.errstate(all="ignore"):
        got = {style: _run(SAME[name], x, style) for style in gpu_shader.KERNEL_STYLES}
    bad = np.flatnonzero(_bits_differ(got["gpu"], got["cpu-driver"]))
    assert bad.size == 0, (
        f"{name}({x[bad[0]]!r}): gpu style {got['gpu'][bad[0]]!r}, "
        f"cpu-driver style {got['cpu-driver'][bad[0]]!r}"
    )


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("name", sorted(NEAR))
def test_both_styles_agree_within_an_ulp_and_bitwise_from_the_short_limit(name):
    x = _arguments()
    with np.errstate(all="ignore"):
        a, b = (_run(NEAR[name], x, style) for style in gpu_shader.KERNEL_STYLES)
    differ = _bits_differ(a, b)
    same_path = ~(np.abs(x) < trig.SHORT_LIMIT)  # (inf and NaN too)
    if name in ("sin", "cos"):
        assert not np.any(differ & same_path), x[differ & same_path][:5]
    assert np.array_equal(np.isnan(a), np.isnan(b))
    ok = np.isfinite(b)
    np.testing.assert_array_equal(a[~ok], b[~ok])
    scale = np.maximum(np.abs(b[ok]), 1.0 if name not in ("sin", "cos") else 0.0)
    tol = (4 if name not in ("sin", "cos") else 1) * np.spacing(scale.astype(np.float32))
    assert np.all(np.abs(a[ok].astype(np.float64) - b[ok]) <= tol)
    assert differ.mean() < 0.01  # (a last-bit difference where a rounding goes the other way)


@pytest.mark.usefixtures("gpu")
@settings(max_examples=10, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=1, max_size=64))
def test_gpu_style_sin_cos_within_an_ulp_of_the_cpu_driver_style_on_any_floats(values):
    x = np.array(values, np.float32)
    for f in (fnp.sin, fnp.cos):
        with np.errstate(all="ignore"):
            a, b = (_run(f, x, style) for style in gpu_shader.KERNEL_STYLES)
        assert np.array_equal(np.isnan(a), np.isnan(b))
        ok = ~np.isnan(a)
        np.testing.assert_array_less(
            np.abs(a[ok].astype(np.float64) - b[ok]), 1.5 * np.spacing(np.abs(b[ok])) + 1e-45
        )
        far = ok & ~(np.abs(x) < trig.SHORT_LIMIT)
        np.testing.assert_array_equal(a[far].view(np.uint32), b[far].view(np.uint32))


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
    inexact_division = False
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
    assert (len(blocks) > 0) == (not cpu_adapter)


def _statements(lines: list[str]) -> tuple[int, int]:
    """(statements outside if blocks, inside them) of a main function's lines."""
    outside = inside = depth = 0
    for line in lines[1:]:
        s = line.strip()
        if re.fullmatch(r"if \(\w+\) \{", s):
            depth += 1
        elif s == "}":
            depth -= 1
        elif " = " in s:
            inside, outside = (inside + 1, outside) if depth else (inside, outside + 1)
    return outside, inside


def test_gpu_style_puts_the_exact_reduction_behind_branches(monkeypatch):
    monkeypatch.setattr(gpu_runtime, "runtime", lambda: _Runtime(False))
    x = np.zeros(8, np.float32)
    src = {s: _compiled(fnp.sin, x, s).shaders[0].source for s in gpu_shader.KERNEL_STYLES}
    gpu, cpu = _main(src["gpu"]), _main(src["cpu-driver"])
    assert _statements(cpu)[1] == 0
    outside, inside = _statements(gpu)
    # what every element runs: less than half of the cpu-driver style's straight line
    assert outside < _statements(cpu)[0] / 2
    assert inside > _statements(cpu)[0] / 2  # the exact reduction, Payne-Hanek nested in it
    # each value a block makes is declared before it and assigned at its end
    for i, line in enumerate(gpu):
        m = re.fullmatch(r"\s*var (\w+): (f32|i32);", line)
        if m:
            assert any(re.fullmatch(rf"\s*{m.group(1)} = \w+;", later) for later in gpu[i:])


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


def _gpu_sin_cos_source(cos: bool, fused_fma: bool) -> str:
    """The gpu style's sin or cos as one straight-line WGSL function (its rare path as
    selects: the same statements, for the numpy emulation)."""
    from fungrad.lowering.math import gpu_float32

    b = wgsl_math.WGSLBuilder(fused_fma=fused_fma, branches=False)
    x = wgsl_math.Value(b, "a0", "float")
    r = trig.sin_cos_gpu_f32(b, x, cos, gpu_float32._reduce_any)
    return "\n".join(["fn fg_t_f32(a0: f32) -> f32 {", *b.lines, f"  return {r.ref};", "}"])


@pytest.mark.parametrize("contract", [None, "all", "right", "single"])
@pytest.mark.parametrize("cos", [False, True])
def test_short_reduction_keeps_the_bound_under_contraction(cos, contract):
    """A real GPU's compiler fuses a * b + c into one fma where it likes: the short
    reduction's exact steps must not depend on where (numpy emulation of the WGSL,
    tests/wgsl_math_emulation.py), down to the arguments closest to multiples of pi/2."""
    from tests import wgsl_math_emulation as emu

    rng = np.random.default_rng(1)
    near = (rng.integers(1, 2608, 20000) * (np.pi / 2)).astype(np.float32)
    x = np.concatenate(
        [
            near,
            np.nextafter(near, np.float32(0)),
            np.nextafter(near, np.float32(np.inf)),
            rng.uniform(-trig.SHORT_LIMIT, trig.SHORT_LIMIT, 20000),
            np.exp(rng.uniform(-20, np.log(trig.SHORT_LIMIT), 5000)),
            [np.nextafter(np.float32(trig.SHORT_LIMIT), np.float32(0)), 0.7853982, 1e-30],
        ]
    ).astype(np.float32)
    env = {
        "np": np,
        "F32": emu.F32,
        "I32": emu.I32,
        "U32": emu.U32,
        "_bitcast": emu._bitcast,
        "_fma": emu.fma32,
        "_cfma": emu._cfma,
        "_convert": emu._convert,
        "_select": lambda f, t, c: np.where(c, t, f),
        "fg_isnan": np.isnan,
        "_trace": {},
    }
    exec(emu.python_source(_gpu_sin_cos_source(cos, True), contract), env)
    with np.errstate(all="ignore"):
        got = env["fg_t_f32"](x)
    ref = (np.cos if cos else np.sin)(x.astype(np.float64))
    err = emu.ulps(got, ref)
    worst = int(np.argmax(err))
    assert err[worst] <= 1.0, f"{x[worst]!r}: {got[worst]!r} vs {ref[worst]!r}, {err[worst]} ulp"
