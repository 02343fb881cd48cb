"""Issue 15 on the GPU: IEEE specials that shader compilers used to fold away, shaders the
WGSL validator rejected, accurate sums and scans, and the bounded pipeline cache.

References: the CPU jit (which keeps every IEEE rule, JAX's results), numpy, float64 math."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import core, lax
from fungrad.lowering.gpu import runtime as gpu_runtime
from tests import wgsl_math_emulation as emulation

pytestmark = pytest.mark.usefixtures("gpu")

SPECIALS = np.array(
    [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.0, 0.5, 3e38, -1e-30, 16777216.0, 1e-8],
    np.float32,
)
LITERALS = (0.0, -0.0, 1.0, -1.0, 2.0, 0.5, np.inf, -np.inf, np.nan, 1e30)


def _pairs():
    """Every (x, y) pair of SPECIALS, as two flat arrays."""
    return np.repeat(SPECIALS, SPECIALS.size), np.tile(SPECIALS, SPECIALS.size)


def _same_bits(got, want, what, flushed=None):
    """Equal bits, any NaN matching any NaN (payloads are not part of JAX's contract). On a
    device that flushes float32 subnormals (the runtime's probe; WGSL allows it) a zero or
    subnormal matches any zero or subnormal (a flushed input or intermediate changes the
    sign of a zero result, or turns a subnormal result into a zero), and ``flushed``, the
    program evaluated with every operand and result flushed (:func:`_flushed_reference`),
    is right too: ``x*y / (x*x)`` at x = -1e-30, y = 1e-8 is -1e-38 / 0 = -inf on the CPU
    but -0 / 0 = NaN where the numerator is flushed."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, what
    if want.dtype == np.float32:
        same = _bits_match(got, want)
        if gpu_runtime.runtime().flushes_subnormals:
            tiny = np.float32(2.0**-126)
            same |= (np.abs(got) < tiny) & (np.abs(want) < tiny)
            if flushed is not None:
                same |= _bits_match(got, np.asarray(flushed))
    else:
        same = got == want
    bad = np.flatnonzero(~same)
    assert bad.size == 0, (
        f"{what}: at {bad[:4]} got {got.ravel()[bad[:4]]}, want {want.ravel()[bad[:4]]}"
    )


def _bits_match(got, want):
    return (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))


def _flushed_reference(f, *args):
    """``f``'s outputs on the CPU with every float32 operand and result of each equation
    flushed to a zero of its sign: what a device that flushes subnormals computes."""

    def flush(v):
        return fnp.asarray(emulation.flush(np.asarray(v)))

    closed = fg.make_jaxpr(f)(*args)
    jaxpr = closed.jaxpr
    env = dict(zip(jaxpr.constvars, map(flush, closed.consts)))
    env.update(zip(jaxpr.invars, map(flush, args)))

    def read(v):
        return flush(v.val) if type(v) is core.Literal else env[v]

    for eqn in jaxpr.eqns:
        out = eqn.primitive.bind(*map(read, eqn.invars), **eqn.params)
        outs = out if eqn.primitive.multiple_results else [out]
        env.update(zip(eqn.outvars, map(flush, outs)))
    return [read(v) for v in jaxpr.outvars]


def test_same_bits_compares_modulo_flushing_only_where_the_device_flushes(monkeypatch):
    rt = gpu_runtime.runtime()
    monkeypatch.setattr(rt, "flushes_subnormals", True, raising=False)
    _same_bits(np.float32([0.0, -0.0, 1e-40]), np.float32([-1e-38, 1e-40, 0.0]), "flushed")
    with pytest.raises(AssertionError):
        _same_bits(np.float32([0.0]), np.float32([1.2e-38]), "a normal is no zero")
    monkeypatch.setattr(rt, "flushes_subnormals", False)
    with pytest.raises(AssertionError):
        _same_bits(np.float32([0.0]), np.float32([-1e-38]), "subnormals kept")
    with pytest.raises(AssertionError):
        _same_bits(np.float32([0.0]), np.float32([-0.0]), "signed zeros")


def test_flushed_reference_flushes_each_operand_and_result(monkeypatch):
    """-1e-30 * 1e-8 is subnormal: flushed, x*y / (x*x) is -0 / 0 = NaN, not -inf; and
    1e-10 * -1e-32 flushed gives -0, not -1e-22, as x*y / (x*x)."""
    x, y = np.float32([-1e-30, 1e-10]), np.float32([1e-8, -1e-32])
    f = lambda x, y: (x * y / (x * x), x + y)  # noqa: E731
    with np.errstate(all="ignore"):
        want = [np.asarray(w) for w in fg.jit(f)(x, y)]
        flushed = [np.asarray(w) for w in _flushed_reference(f, x, y)]
    assert want[0][0] == -np.inf  # (the subnormal numerator keeps 3 digits: -1.0005e-22)
    np.testing.assert_allclose(want[0][1], -1e-22, rtol=1e-3)
    assert np.isnan(flushed[0][0]) and flushed[0][1] == 0 and np.signbit(flushed[0][1])
    np.testing.assert_array_equal(flushed[1], want[1])
    got = np.float32([np.nan, -0.0])
    rt = gpu_runtime.runtime()
    monkeypatch.setattr(rt, "flushes_subnormals", True, raising=False)
    _same_bits(got, want[0], "flushed operands", flushed[0])
    with pytest.raises(AssertionError):
        _same_bits(got, want[0], "no flushed reference")
    monkeypatch.setattr(rt, "flushes_subnormals", False)
    with pytest.raises(AssertionError):
        _same_bits(got, want[0], "subnormals kept", flushed[0])


def _check_against_cpu(fns, names, *args):
    """All of ``fns`` in one GPU program (one compile) against the CPU jit, bit for bit."""

    def f(*xs):
        return tuple(fn(*xs) for fn in fns)

    with np.errstate(all="ignore"):
        want = fg.jit(f)(*args)
        got = fg.jit(f, backend="gpu")(*args)
        flushed = _flushed_reference(f, *args) if gpu_runtime.runtime().flushes_subnormals else want
    for name, g, w, fl in zip(names, got, want, flushed):
        _same_bits(g, w, name, fl)


def test_issue15_gpu_keeps_ieee_specials_of_literal_and_repeated_operands():
    """x - x, x * 0, x / 0, x + 0, 0 - x, (x + 1) - 1 ... on NaN, +-inf, +-0: the shader
    compiler folded them (x - x = 0 for NaN, x * 0 = 0 for inf, x / 0 = x, 0 - 0 = -0)."""
    x, y = _pairs()
    fns, names = [], []
    ops = {
        "+": lambda a, b: a + b,
        "-": lambda a, b: a - b,
        "*": lambda a, b: a * b,
        "/": lambda a, b: a / b,
    }
    for sym, op in ops.items():
        for c in LITERALS:
            fns += [lambda x, y, op=op, c=c: op(x, c), lambda x, y, op=op, c=c: op(c, x)]
            names += [f"x {sym} {c}", f"{c} {sym} x"]
        fns += [
            lambda x, y, op=op: op(x, x),
            lambda x, y, op=op: op(x, y),
            lambda x, y, op=op: op(op(x, y), y),
            lambda x, y, op=op: op(x * y, x * x),
        ]
        names += [f"x {sym} x", f"x {sym} y", f"(x {sym} y) {sym} y", f"x*y {sym} x*x"]
    fns += [
        lambda x, y: (x + 1.0) - 1.0,
        lambda x, y: (x * 3.0) * (1.0 / 3.0),
        lambda x, y: (x * x) * 0.0,
        lambda x, y: x * y + x * 2.0,
        lambda x, y: fnp.where(x + 1.0 < x, 1.0, 0.0),
        lambda x, y: fnp.where(x == x, 1, 0),
        lambda x, y: fnp.where(x + y > 1.0, 1, 0),
        lambda x, y: -(0.0 - x),
    ]
    names += [
        "(x + 1) - 1",
        "(x * 3) * (1/3)",
        "(x * x) * 0",
        "x*y + x*2",
        "x + 1 < x",
        "x == x",
        "x + y > 1",
        "-(0 - x)",
    ]
    _check_against_cpu(fns, names, fnp.asarray(x), fnp.asarray(y))


def test_issue15_gpu_selects_and_library_functions_keep_specials():
    """A select whose condition compares its own values became max/min (NaN, -0 lost):
    where(x < y, y, x), relu as a where, where(x < 0, -x, x); sqrt(x) * sqrt(x) became x."""
    x, y = _pairs()
    fns = {
        "where(x < y, y, x)": lambda x, y: fnp.where(x < y, y, x),
        "where(x < y, x, y)": lambda x, y: fnp.where(x < y, x, y),
        "where(x > 0, x, 0)": lambda x, y: fnp.where(x > 0, x, 0.0),
        "where(x > 0, x, 0 * x)": lambda x, y: fnp.where(x > 0.0, x, 0.0 * x),
        "where(x < 0, -x, x)": lambda x, y: fnp.where(x < 0, -x, x),
        "sqrt(x) sqrt(x)": lambda x, y: fnp.sqrt(x) * fnp.sqrt(x),
        "-(-x) + 0": lambda x, y: fnp.negative(-x) + 0.0,
        "x y - x y": lambda x, y: x * y - x * y,
        "x + y < x": lambda x, y: fnp.where(x + y < x, 1.0, 0.0),
        "x + y == x": lambda x, y: fnp.where(x + y == x, 1.0, 0.0),
        "(x + y) - x": lambda x, y: (x + y) - x,
        "x - (x - y)": lambda x, y: x - (x - y),
        "exp(0 x)": lambda x, y: fnp.exp(x * 0.0),
        "x ** 0": lambda x, y: x**0.0,
        "sign": lambda x, y: fnp.sign(x),
        "clip": lambda x, y: fnp.clip(x, -1.0, 1.0),
        "relu": lambda x, y: fg.nn.relu(x),
        "logaddexp": lambda x, y: fnp.logaddexp(x, y),
        "fmod(x, 0)": lambda x, y: fnp.fmod(x, 0.0),
        "copysign": fnp.copysign,
    }
    _check_against_cpu(
        [lambda x, y, f=f: fnp.broadcast_to(f(x, y), x.shape) for f in fns.values()],
        list(fns),
        fnp.asarray(x),
        fnp.asarray(y),
    )


@pytest.mark.parametrize("scan", ["never", "always"])
def test_issue15_gpu_short_reductions_and_scans_keep_specials(scan, monkeypatch):
    """The shader compiler unrolls short loops, and then a sum of [x, -x] met its own
    operand (0 for NaN and inf) and a product of [x, 0] a constant zero: such reductions
    and scans hide each element."""
    from fungrad.lowering.gpu import schemes as ge

    monkeypatch.delenv("FUNGRAD_GPU_SCAN", raising=False)
    monkeypatch.setattr(ge, "SCAN", scan)
    exact = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.0, 0.5], np.float32)
    x, y = np.repeat(exact, exact.size), np.tile(exact, exact.size)  # (sums exact in any order)
    fns = {
        "sum [x, -x]": lambda x, y: fnp.sum(fnp.stack([x, -x]), 0),
        "sum [2x, -2x]": lambda x, y: fnp.sum(fnp.stack([x * 2, -(x * 2)]), 0),
        "prod [x, 0]": lambda x, y: fnp.prod(fnp.stack([x, fnp.zeros_like(x)]), 0),
        "mean [x, y, -x, -y]": lambda x, y: fnp.mean(fnp.stack([x, y, -x, -y]), 0),
        "cumsum [x, y, -x]": lambda x, y: fnp.cumsum(fnp.stack([x, y, -x]), 0)[2],
        "cumprod [x, 0]": lambda x, y: fnp.cumprod(fnp.stack([x, fnp.zeros_like(x)]), 0)[1],
        "cumsum rows [x, -x]": lambda x, y: fnp.cumsum(fnp.stack([x, -x], 1), 1)[:, 1],
    }
    _check_against_cpu(list(fns.values()), list(fns), fnp.asarray(x), fnp.asarray(y))


def _random_expression(rng: random.Random, depth: int) -> str:
    """Python text of a random float expression of x, y and special literals, operands
    often repeated (the shape of the rewrites shader compilers make)."""
    if depth == 0 or rng.random() < 0.2:
        if rng.random() < 0.7:
            return rng.choice("xy")
        return f"np.float32({rng.choice(LITERALS)!r})".replace("inf", "np.inf").replace(
            "nan", "np.nan"
        )
    a = _random_expression(rng, depth - 1)
    b = a if rng.random() < 0.3 else _random_expression(rng, depth - 1)
    op = rng.choice(["+", "-", "*", "/", "cmp", "neg"])
    if op == "neg":
        return f"(-{a})"
    if op == "cmp":
        return f"fnp.where(({a}) {rng.choice(['<', '<=', '>', '>=', '==', '!='])} ({b}), x, y)"
    return f"({a} {op} {b})"


@settings(max_examples=4)
@given(st.integers(0, 2**32 - 1))
def test_issue15_gpu_random_float_expressions_match_the_cpu_bit_for_bit(seed):
    rng = random.Random(seed)
    texts = []
    while len(texts) < 24:
        t = _random_expression(rng, 3)
        if "x" in t or "y" in t:
            texts.append(t)
    fns = [
        eval(
            f"lambda x, y: fnp.broadcast_to({t}, x.shape)",  # noqa: S307
            {"np": np, "fnp": fnp},
        )
        for t in texts
    ]
    x, y = _pairs()
    _check_against_cpu(fns, texts, fnp.asarray(x), fnp.asarray(y))


def test_issue15_gpu_scatter_combines_keep_specials_of_literal_updates():
    """A store's combine with a literal update (x.at[i].mul(0.0), .add(-0.0))."""
    x = fnp.asarray(SPECIALS)
    idx = fnp.asarray(np.arange(SPECIALS.size, dtype=np.int32))
    fns = [
        lambda x, i: x.at[i].mul(0.0),
        lambda x, i: x.at[i].add(0.0),
        lambda x, i: x.at[i].add(-0.0),
    ]
    _check_against_cpu(fns, ["at.mul(0)", "at.add(0)", "at.add(-0)"], x, idx)


def test_issue15_gpu_compares_bools():
    """``<``, ``<=``, ``>``, ``>=`` on bools (false < true): WGSL orders no bools, so the
    shader was rejected."""
    a = np.array([False, False, True, True])
    b = np.array([False, True, False, True])
    ops = {
        "lt": np.less,
        "le": np.less_equal,
        "gt": np.greater,
        "ge": np.greater_equal,
        "eq": np.equal,
        "ne": np.not_equal,
    }
    f = fg.jit(lambda a, b: tuple(getattr(lax, n)(a, b) for n in ops), backend="gpu")
    for (name, ref), got in zip(ops.items(), f(fnp.asarray(a), fnp.asarray(b))):
        np.testing.assert_array_equal(np.asarray(got), ref(a, b), err_msg=name)
    # with a literal operand too (the other side of each comparison)
    for c in (False, True):
        g = fg.jit(lambda a, c=c: (a < c, a >= c, c > a, c <= a), backend="gpu")(fnp.asarray(a))
        want = (a < c, a >= c, c > a, c <= a)
        for got, w in zip(g, want):
            np.testing.assert_array_equal(np.asarray(got), w)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32])
def test_issue15_gpu_shifts_by_constants_of_32_and_more(dtype):
    """A shift by a constant >= 32 is a WGSL shader-creation error even in the unselected side
    of the select guarding it: shifts by 31, 32, 40, 1000 and by an array, as lax does them
    (shifts by the width or more give 0, or the sign for an arithmetic right shift)."""
    x = np.array([1, 7, -8 if dtype == np.int32 else 2**31 + 5, 2**30], dtype)
    amounts = np.array([0, 31, 32, 40], dtype)
    for s in (31, 32, 40, 1000):
        s = dtype(s)
        f = lambda x, s=s: (  # noqa: E731
            lax.shift_left(x, s),
            lax.shift_right_logical(x, s),
            lax.shift_right_arithmetic(x, s),
        )
        got = fg.jit(f, backend="gpu")(fnp.asarray(x))
        for g, w in zip(got, fg.jit(f)(fnp.asarray(x))):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w), err_msg=str(s))
    f = lambda x, s: (  # noqa: E731
        x << s,
        lax.shift_right_logical(x, s),
        lax.shift_right_arithmetic(x, s),
    )
    for g, w in zip(
        fg.jit(f, backend="gpu")(fnp.asarray(x), fnp.asarray(amounts)),
        f(fnp.asarray(x), fnp.asarray(amounts)),
    ):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_issue15_gpu_means_of_empty_arrays_are_nan():
    """0 / 0 of two constants (the count and the folded sum) must not reach the shader as a
    constant expression the validator rejects."""
    fns = [
        lambda: fnp.mean(fnp.zeros((0,))),
        lambda: fnp.mean(fnp.zeros((3, 0)), axis=1),
        lambda: fnp.var(fnp.zeros((0,))),
        lambda x: fnp.mean(x),
        lambda x: x.mean(axis=1),
        lambda x: fnp.zeros(3) / fnp.sum(x),
    ]
    x = fnp.zeros((2, 0))
    for f in fns:
        args = (x,) if f.__code__.co_argcount else ()
        got = np.asarray(fg.jit(f, backend="gpu")(*args))
        want = np.asarray(fg.jit(f)(*args))
        assert np.isnan(want).all()
        _same_bits(got, want, "empty mean")


def test_issue15_gpu_arrays_over_the_binding_limit_say_so():
    """An array no storage binding can hold (10^12 elements: not even numbered by an i32)
    is a clear error when the function is compiled, not a rejected literal."""
    with pytest.raises(
        ValueError,
        match=r"float32\[1000000, 1000000\].*largest storage "
        r"binding.*backend='cpu'",
    ):
        fg.jit(lambda: fnp.zeros((10**6, 10**6)), backend="gpu")()
    x = fnp.ones(40000)
    with pytest.raises(ValueError, match=r"float32\[40000, 40000\].*largest storage binding"):
        fg.jit(lambda x: fnp.outer(x, x) + 1, backend="gpu")(x)


# -- accurate sums and scans ---------------------------------------------------------------------


def _ulps(got, ref):
    """|got - ref| in ulps of float32 at |ref| (ref in float64)."""
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    return np.abs(got - ref) / np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)


@pytest.mark.parametrize("tree", ["never", "always"])
def test_issue15_gpu_sums_accumulate_with_bounded_error(tree, monkeypatch):
    """A serial sum in one invocation was one running float: rows of 60000 values near 1000
    came out 5400 ulps off. Blocked partial sums (and the workgroup trees) stay within a
    few ulps of the float64 sum."""
    from fungrad.lowering.gpu import schemes as ge

    monkeypatch.delenv("FUNGRAD_GPU_TREE_REDUCE", raising=False)
    monkeypatch.setattr(ge, "TREE_REDUCTIONS", tree)
    rng = np.random.default_rng(15)
    x = (rng.random((4, 60000)) + 1e3).astype(np.float32)
    tenth = np.full(60000, 0.1, np.float32)
    f = fg.jit(
        lambda x, t: (x.sum(1), fnp.mean(x, 1), fnp.mean(t), fnp.var(x[:, :30000], 1)),
        backend="gpu",
    )  # (two loops)
    s, m, mt, v = f(fnp.asarray(x), fnp.asarray(tenth))
    x64 = x.astype(np.float64)
    assert _ulps(s, x64.sum(1)).max() <= 4
    assert _ulps(m, x64.mean(1)).max() <= 4
    assert _ulps(mt, tenth.astype(np.float64).mean()) <= 4
    np.testing.assert_allclose(np.asarray(v), x64[:, :30000].var(1), rtol=1e-4)
    # a sum of -0.0 is +0.0 (0 + -0), as on the CPU: the opaque zero is not folded away
    neg = fnp.asarray(np.full((2, 1), -0.0, np.float32))
    _same_bits(
        fg.jit(lambda x: x.sum(1), backend="gpu")(neg), fg.jit(lambda x: x.sum(1))(neg), "sum of -0"
    )


def test_issue15_gpu_cumsum_of_3e7_ones_counts_to_3e7():
    """The blocked scan added each element to its block's running prefix, so past 2^24 the
    ones were lost (29999616). Each block now folds from scratch and adds its prefix once:
    every prefix is the float32 nearest to its count."""
    n = 3 * 10**7
    got = np.asarray(fg.jit(fnp.cumsum, backend="gpu")(fnp.ones(n)))
    assert got[-1] == 3e7
    for lo in range(0, n, 1 << 22):  # (in chunks: the float64 counts would take 240 MB)
        hi = min(n, lo + (1 << 22))
        np.testing.assert_array_equal(got[lo:hi], np.arange(lo + 1, hi + 1).astype(np.float32))


@pytest.mark.parametrize("mode", ["never", "always"])
def test_issue15_gpu_scans_stay_within_a_few_ulps(mode, monkeypatch):
    """cumsum and cumlogsumexp along long lines, in one invocation per line (``never``) and
    in blocks (``always``), against float64: a few ulps (a serial fold was 70-100 ulps off
    after 60000 elements)."""
    from fungrad.lowering.gpu import schemes as ge

    monkeypatch.delenv("FUNGRAD_GPU_SCAN", raising=False)
    monkeypatch.setattr(ge, "SCAN", mode)
    rng = np.random.default_rng(3)
    x = rng.random((2, 60000)).astype(np.float32)
    f = fg.jit(
        lambda x: (fnp.cumsum(x, axis=1), lax.cumlogsumexp(x, axis=1), fnp.cumsum(x.T, axis=0)),
        backend="gpu",
    )
    s, lse, cols = f(fnp.asarray(x))
    x64 = x.astype(np.float64)
    assert _ulps(s, np.cumsum(x64, 1)).max() <= 6
    assert _ulps(cols, np.cumsum(x64, 1).T).max() <= 6
    assert _ulps(lse, np.logaddexp.accumulate(x64, 1)).max() <= 8


# -- the pipeline cache --------------------------------------------------------------------------


def test_issue15_gpu_pipeline_cache_is_bounded_and_evicted_pipelines_are_rebuilt(gpu, monkeypatch):
    """Every dropped function's pipelines stayed in the runtime's cache (~120 KB or more
    each). It keeps the PIPELINE_CACHE most recently used; a live function keeps its own
    pipelines, and a new function needing an evicted one builds it again."""
    monkeypatch.setattr(gpu, "PIPELINE_CACHE", 4)
    x = np.arange(6, dtype=np.float32)

    def make(i):
        return fg.jit(lambda v: v * float(i) + float(i + 1), backend="gpu")

    first = make(0)
    np.testing.assert_array_equal(np.asarray(first(x)), x * 0 + 1)
    exe = first.lower(x).compile()._exe
    source = exe.shaders[-1].source
    assert source in gpu._pipelines
    for i in range(1, 12):
        np.testing.assert_array_equal(np.asarray(make(i)(x)), x * i + (i + 1))
        assert len(gpu._pipelines) <= 4
    assert source not in gpu._pipelines  # evicted
    np.testing.assert_array_equal(np.asarray(first(x)), x * 0 + 1)  # still its own pipelines
    np.testing.assert_array_equal(np.asarray(make(0)(x)), x * 0 + 1)  # compiled anew
    rebuilt = gpu.pipeline("again", source)  # the evicted shader, needed again: built again
    assert rebuilt is not exe._pipelines[source] and source in gpu._pipelines
    assert len(gpu._pipelines) <= 4
    (dispatch,) = exe._commands  # and it computes the same
    dispatch.pipeline = rebuilt
    np.testing.assert_array_equal(np.asarray(exe.call([fnp.asarray(x)])[0]), x * 0 + 1)


def test_issue15_gpu_literal_operands_never_make_rejected_constant_expressions(gpu):
    """Operations of literals only (which the planner does not fold: ops outside the folded
    set, or built directly) must not reach WGSL as constant expressions the validator
    rejects: 0 / 0, inf * 0, 3e38 * 10 (NaN or inf), sqrt(-1), 5 / 0, shifts by 40,
    -(-5), i32 overflow."""
    from fungrad.lowering.fusion import Kernel, Store
    from fungrad.lowering.gpu import shader as wgsl
    from fungrad.lowering.kernel import INDEX, Buffer, Ctx, Var

    ctx = Ctx()
    f32, i32, u32 = np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.uint32)
    cases = [
        ("div", f32, 0.0, 0.0),
        ("mul", f32, np.inf, 0.0),
        ("mul", f32, 3e38, 10.0),
        ("rem", f32, 1.0, 0.0),
        ("sub", f32, np.inf, np.inf),
        ("max", f32, np.nan, 1.0),
        ("sqrt", f32, -1.0),
        ("floor", f32, np.inf),
        ("log", f32, -1.0),
        ("idiv", INDEX, 5, 0),
        ("irem", INDEX, 5, 0),
        ("div", i32, 5, 0),
        ("shl", i32, 1, 40),
        ("shr_logical", u32, 8, 40),
        ("shr_arith", i32, -8, 40),
        ("neg", i32, -5),
        ("mul", i32, 65536, 65536),
        ("add", i32, 2**31 - 1, 1),
    ]
    for op, dt, *values in cases:
        expr = ctx.node(op, tuple(ctx.const(v, dt) for v in values), dt)  # (not folded)
        if expr.dtype == INDEX:
            expr = ctx.node("convert", (expr,), i32)
        out = Buffer(0, (1,), expr.dtype, "output", "out")
        v = Var(1)
        kern = Kernel("k", (v,), [Store(out, ctx.index(v), expr)])
        shader = wgsl.render_kernel(kern, {0: ("out0", 0)}, gpu.fused_fma)
        gpu.pipeline(f"{op}_{dt}", shader.source)  # (GpuCompileError if rejected)


def test_issue15_gpu_matmul_contractions_accumulate_with_bounded_error():
    """A matmul thread ran one fma chain over the whole contraction (a matvec over k = 60000
    was 25 ulps off float64); it sums blocks of GEMM_BLOCK products in two levels (1.2 ulps).
    Also the split contraction lavapipe needs past its loop limit (k = 60000 there)."""
    rng = np.random.default_rng(7)
    for m, k, n in ((8, 60000, 1), (70, 3000, 65)):
        a = (rng.random((m, k)) + 1).astype(np.float32)
        b = (rng.random((k, n)) + 1).astype(np.float32)
        got = fg.jit(lambda a, b: a @ b, backend="gpu")(fnp.asarray(a), fnp.asarray(b))
        # (the CPU's float32 gemm: 6 ulps on the second)
        assert _ulps(got, a.astype(np.float64) @ b.astype(np.float64)).max() <= 8, (m, k, n)


@settings(max_examples=6)
@given(
    n=st.sampled_from([1, 15, 16, 17, 255, 256, 257, 4095, 4096, 4097, 9000]),
    rows=st.sampled_from([1, 3]),
    mode=st.sampled_from(["never", "always"]),
    seed=st.integers(0, 2**31),
)
def test_issue15_gpu_blocked_sums_and_scans_at_block_boundaries(n, rows, mode, seed):
    """Sums (16-element levels) and scans (64-element blocks, two levels) of lengths around
    the block sizes: every element counted once, a few ulps from float64 (positive values,
    so the sums have no cancellation)."""
    from fungrad.lowering.gpu import schemes as ge

    old = ge.TREE_REDUCTIONS, ge.SCAN
    ge.TREE_REDUCTIONS, ge.SCAN = mode, mode
    try:
        x = (np.random.default_rng(seed).random((rows, n)) + 0.5).astype(np.float32)
        s, c = fg.jit(lambda x: (x.sum(1), fnp.cumsum(x, 1)), backend="gpu")(fnp.asarray(x))
    finally:
        ge.TREE_REDUCTIONS, ge.SCAN = old
    x64 = x.astype(np.float64)
    assert _ulps(s, x64.sum(1)).max() <= 4
    assert _ulps(c, np.cumsum(x64, 1)).max() <= 8  # (a lost element: hundreds)


@pytest.mark.parametrize("tree", ["never", "always"])
def test_issue15_gpu_argmax_argmin_of_bools(tree, monkeypatch):
    """argmax/argmin of bools ordered them with ``>``/``<``, which WGSL rejects for bools
    (fuzz finding gpu_bool_argminmax); now false < true, the first extreme wins, in the
    serial loop, the workgroup trees and their merges. Against numpy, with bool sorts and
    max/min reductions in the same program (the other orderings of bools)."""
    from fungrad.lowering.gpu import schemes as ge

    monkeypatch.delenv("FUNGRAD_GPU_TREE_REDUCE", raising=False)
    monkeypatch.setattr(ge, "TREE_REDUCTIONS", tree)
    rng = np.random.default_rng(8)
    short = np.array([True, False, True])
    rows = rng.random((5, 3000)) < 0.001  # some rows all False
    rows[1] = True
    rows[2, 2999] = False
    late = np.zeros(20000, bool)
    late[[15234, 18001]] = True  # the first of two, far into the row

    def f(s, r, t):
        return (
            fnp.argmax(s),
            fnp.argmin(s),
            fnp.argmax(r, 1),
            fnp.argmin(r, 1),
            fnp.argmax(r, 0),
            fnp.argmin(r, 0),
            fnp.argmax(t),
            fnp.argmin(~t),
            fnp.sort(r, 1),
            fnp.max(r, 1),
            fnp.min(r, 0),
            fnp.max(t),
            fnp.min(t),
        )

    got = fg.jit(f, backend="gpu")(short, rows, late)
    want = (
        np.argmax(short),
        np.argmin(short),
        np.argmax(rows, 1),
        np.argmin(rows, 1),
        np.argmax(rows, 0),
        np.argmin(rows, 0),
        np.argmax(late),
        np.argmin(~late),
        np.sort(rows, 1),
        rows.max(1),
        rows.min(0),
        late.max(),
        late.min(),
    )
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(np.asarray(g), w, err_msg=f"output {i}")


def test_exact_division_keeps_every_quotient_of_specials_and_huge_divisors(monkeypatch):
    """Where the adapter's a / b is not correctly rounded (NVIDIA: 2 ulp, and 3e38 / 3e38 = 0,
    inf / 3e38 = NaN), kernels divide through fg_div_f32. Forced on here: NaN, infinities,
    zeros and their signs, and every exact quotient (3e38 / 3e38, x / 2^127) are the CPU's
    bit for bit; the other quotients within one ulp, since lavapipe's fma rounds twice and
    so its residuals are not exact (the scheme's rounding on a fused fma is checked by
    test_the_division_correction_rounds_correctly_from_quotients_2_ulp_off)."""
    rt = gpu_runtime.runtime()
    monkeypatch.setattr(rt, "inexact_division", True)
    monkeypatch.setattr(rt, "fused_fma", True)
    big = np.float32([3e38, -3.4e38, 2.0**126, 1.5 * 2.0**126, 2.0**127, 1e37, 1e-37, 1e-30])
    vals = np.concatenate([SPECIALS, big])
    x = np.concatenate([np.repeat(vals, vals.size), _random_operands(1, span=40)])
    y = np.concatenate([np.tile(vals, vals.size), _random_operands(2, span=40)])
    fns = {
        "x / y": lambda x, y: x / y,
        "(x * 0.5) / (y + 0)": lambda x, y: (x * 0.5) / (y + 0.0),
        "1 / y": lambda x, y: 1.0 / y,
        "where(x < y, x, y) / y": lambda x, y: fnp.where(x < y, x, y) / y,
    }
    f = fg.jit(lambda x, y: tuple(fn(x, y) for fn in fns.values()), backend="gpu")
    assert "fg_div_f32" in f.lower(x, y).compile().as_text()
    with np.errstate(all="ignore"):
        want = fg.jit(lambda x, y: tuple(fn(x, y) for fn in fns.values()))(x, y)
    for name, g, w in zip(fns, f(x, y), want):
        g, w = np.asarray(g), np.asarray(w)
        finite = np.isfinite(w) & (w != 0) & np.isfinite(g) & (g != 0)
        _same_bits(g[~finite], w[~finite], f"{name} (specials)")
        ulps = np.abs(g[finite].view(np.int32).astype(np.int64) - w[finite].view(np.int32))
        assert ulps.max(initial=0) <= 1, name
        with np.errstate(all="ignore"):
            exact = finite & (np.float64(x) / np.float64(y) == w)  # (x / y only)
        if name == "x / y":
            _same_bits(g[exact], w[exact], f"{name} (exact quotients)")


def _random_operands(seed: int, n: int = 4000, span: int = 100) -> np.ndarray:
    """Float32 values with random significands and exponents in [-span, span), either sign."""
    rng = np.random.default_rng(seed)
    v = rng.uniform(1, 2, n) * 2.0 ** rng.integers(-span, span, n) * rng.choice([-1, 1], n)
    return v.astype(np.float32)


def _fma32(a, b, c) -> np.float32:
    """fma in float32: a * b + c exactly, rounded once (Fractions: no double rounding)."""
    from fractions import Fraction

    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    return _round32(exact)


def _round32(v) -> np.float32:
    """``v`` (a Fraction) rounded to the nearest float32, ties to even."""
    from fractions import Fraction

    if abs(v) > Fraction(float(np.finfo(np.float32).max)):
        return np.float32(np.inf if v > 0 else -np.inf)  # (no quotient here rounds down to max)
    f = np.float32(float(v))  # float(v) is v to 53 bits: one of f's neighbours is right
    best = min(
        (np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))),
        key=lambda c: (abs(Fraction(float(c)) - v), int(np.float32(c).view(np.uint32)) & 1),
    )
    return np.float32(best)


@pytest.mark.parametrize("q_off,r_off", [(0, 0), (1, 0), (-2, 0), (2, -1), (-1, 1), (2, 1)])
def test_the_division_correction_rounds_correctly_from_quotients_2_ulp_off(q_off, r_off):
    """fg_div_f32's arithmetic (helpers.py), with the hardware's quotient ``q_off`` ulps and
    reciprocal ``r_off`` ulps from correct (WGSL allows 2.5 ulp), every fma rounded once:
    the result is the correctly rounded quotient (exact rational arithmetic as reference)."""
    from fractions import Fraction

    xs, ys = _random_operands(11, 300), _random_operands(12, 300)
    # quotients near a rounding midpoint: m * (q + half an ulp) / m for random q and m
    rng = np.random.default_rng(14)
    qs = (rng.uniform(1, 2, 100) * 2.0 ** rng.integers(-20, 20, 100)).astype(np.float32)
    ms = (rng.uniform(1, 2, 100) * 2.0 ** rng.integers(-20, 20, 100)).astype(np.float32)
    half = [Fraction(float(q)) + Fraction(float(np.spacing(q))) / 2 for q in qs]
    mids = [(np.float32(float(Fraction(float(m)) * h)), m) for m, h in zip(ms, half)]
    pairs = (
        list(zip(xs, ys))
        + mids
        + [(np.float32(1), np.float32(3)), (np.float32(-7), np.float32(10))]
    )

    def step(v, k):
        for _ in range(abs(k)):
            v = np.nextafter(v, np.float32(np.inf if k > 0 else -np.inf))
        return np.float32(v)

    checked = 0
    for x, y in pairs:
        want = _round32(Fraction(float(x)) / Fraction(float(y)))
        if not np.isfinite(want) or want == 0 or abs(want) < 2.0**-126:
            continue
        q0 = step(want, q_off)
        r0 = step(_round32(1 / Fraction(float(y))), r_off)
        r1 = _fma32(_fma32(-y, r0, np.float32(1)), r0, r0)
        q1 = _fma32(_fma32(-q0, y, x), r1, q0)
        got = _fma32(_fma32(-q1, y, x), r1, q1)
        assert got == want, f"{x!r} / {y!r}: got {got!r}, want {want!r} (q0 {q0!r})"
        checked += 1
    assert checked > 300
