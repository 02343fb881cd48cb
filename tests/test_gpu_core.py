"""The GPU compiler (WGSL through wgpu) against the numpy reference: elementwise, conversion,
shape, reduction and matmul primitives, NaN/Inf included, and fusion (dispatch counts).

Each test compiles ``make_jaxpr(f)`` for ``backend="gpu"`` and compares the device result
with eager evaluation (the primitives' numpy impls), as tests/test_compile_core.py does for
the CPU, reusing its operation tables. CI runs these on Mesa's software Vulkan driver."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.lowering import compile_jaxpr
from fungrad.lowering.gpu import shader as wgsl
from tests.test_compile_core import BINARY, INT_BINARY, SPECIAL, UNARY

pytestmark = pytest.mark.usefixtures("gpu")


def gpu_compiled(f, *args):
    """(GPU outputs as numpy arrays, eager outputs, executable)."""
    args = [fnp.asarray(a) for a in args]
    exe = compile_jaxpr(fg.make_jaxpr(f)(*args), "gpu", "test")
    outs = [np.asarray(o) for o in exe.call(args)]
    refs = [np.asarray(r) for r in fg.tree_util.tree_leaves(f(*args))]
    return outs, refs, exe


def assert_gpu(f, *args, rtol=0.0, atol=0.0):
    outs, refs, exe = gpu_compiled(f, *args)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert o.shape == r.shape and o.dtype == r.dtype, (o.shape, o.dtype, r.shape, r.dtype)
        if o.dtype.kind == "f":
            np.testing.assert_array_equal(np.isnan(o), np.isnan(r))
            np.testing.assert_allclose(o, r, rtol=rtol, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(o, r)
    return exe


FLOATS = hnp.arrays(
    np.float32,
    hnp.array_shapes(min_dims=0, max_dims=3, max_side=6),
    elements=st.floats(-20, 20, width=32, allow_subnormal=False),
)
GPU_UNARY = {k: v for k, v in UNARY.items()}
# the GPU may flush denormal results to zero: atol covers them
TOL = dict(rtol=4e-6, atol=2e-38)


@pytest.mark.parametrize("name", sorted(GPU_UNARY))
def test_unary_float32_special_values_and_a_range(name):
    x = np.concatenate([SPECIAL, np.linspace(-9, 9, 181, dtype=np.float32)])
    if name in ("sin", "cos", "tan"):  # no Payne-Hanek reduction (llvm_math.py)
        x = np.where(np.abs(x) > 1e7, np.float32(1e7), x)
    assert_gpu(GPU_UNARY[name], x, **TOL)


@settings(max_examples=8)
@given(x=FLOATS)
def test_unary_chain_on_random_shapes(x):
    assert_gpu(
        lambda v: (
            lax.tanh(v) * 0.5 + lax.exp(-v * v) - lax.sin(v) / (1 + v * v),
            lax.log1p(lax.abs(v)),
            lax.erf(v),
        ),
        x,
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_float32_special(name):
    a, b = np.meshgrid(SPECIAL, SPECIAL)
    rtol = 4e-5 if name == "pow" else 4e-6  # pow works in float32 only on the GPU
    assert_gpu(BINARY[name], a, b, rtol=rtol, atol=2e-38)


def test_pow_of_ordinary_values():
    rng = np.random.default_rng(0)
    x = rng.uniform(0.01, 10, 200).astype(np.float32)
    y = rng.uniform(-6, 6, 200).astype(np.float32)
    assert_gpu(lax.pow, x, y, rtol=2e-5)
    assert_gpu(lax.pow, -x, np.round(y), rtol=2e-5)


@pytest.mark.parametrize("name", sorted(INT_BINARY))
@pytest.mark.parametrize("dtype", [np.int32, np.uint32])
def test_integer_binary_edges(name, dtype):
    info = np.iinfo(dtype)
    vals = np.array(
        sorted(
            v
            for v in {info.min, info.min + 1, -7, -1, 0, 1, 2, 7, 31, 32, 33, info.max}
            if info.min <= v <= info.max
        ),
        dtype,
    )
    a, b = np.meshgrid(vals, vals)  # x / 0, x % 0, INT_MIN / -1, shifts >= width
    assert_gpu(INT_BINARY[name], a, b)


def test_integer_unary_and_conversions():
    x = np.array([-(2**31), -(2**31) + 1, -7, -1, 0, 1, 5, 2**31 - 1], np.int32)

    def f(x):
        return (
            lax.neg(x),
            lax.abs(x),
            lax.sign(x),
            lax.bitwise_not(x),
            lax.population_count(x),
            lax.clz(x),
            lax.shift_right_arithmetic(x, np.int32(3)),
            lax.convert_element_type(x, np.float32),
            lax.convert_element_type(x, np.uint32),
            lax.convert_element_type(x, np.bool_),
        )

    assert_gpu(f, x)
    u = x.view(np.uint32)
    assert_gpu(
        lambda u: (
            lax.convert_element_type(u, np.float32),
            lax.sign(u),
            lax.convert_element_type(u, np.int32),
            u // np.uint32(3),
        ),
        u,
    )


def test_float_to_int_saturates_and_maps_nan_to_zero():
    x = np.concatenate([SPECIAL, np.float32([3e9, -3e9, 2.5, -2.5, 2**31, -(2**31)])])
    for dt in (np.int32, np.uint32, np.bool_):
        assert_gpu(lambda v, dt=dt: lax.convert_element_type(v, dt), x)
    b = np.array([True, False, True])
    assert_gpu(
        lambda v: (lax.convert_element_type(v, np.float32), lax.convert_element_type(v, np.int32)),
        b,
    )


def test_bitcast_select_clamp_and_bool_ops():
    x = np.array([[1.5, -0.0], [np.nan, np.inf]], np.float32)
    assert_gpu(lambda v: lax.bitcast_convert_type(v, np.int32), x)
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal((3, 4)).astype(np.float32) for _ in range(3))
    which = rng.integers(0, 3, (3, 4)).astype(np.int32)
    assert_gpu(lambda w, a, b, c: lax.select_n(w, a, b, c), which, a, b, c)
    assert_gpu(lambda a: lax.clamp(np.float32(-0.5), a, np.float32(0.5)), a)
    assert_gpu(lambda p, q: (p & q, p | q, p ^ q, ~p, p == q), a > 0, b > 0)


@settings(max_examples=8)
@given(x=FLOATS, data=st.data())
def test_shape_ops_compose(x, data):
    perm = tuple(data.draw(st.permutations(range(x.ndim)))) if x.ndim else ()

    def f(x):
        y = lax.transpose(x, perm)
        return (
            fnp.flip(y, axis=tuple(range(y.ndim))) if y.ndim else y,
            fnp.reshape(y, (-1,)),
            fnp.broadcast_to(x, (2,) + x.shape),
            fnp.pad(x, 1) if x.ndim else x,
        )

    assert_gpu(f, x)


REDUCERS = {
    "sum": fnp.sum,
    "max": fnp.max,
    "min": fnp.min,
    "prod": fnp.prod,
    "argmax": fnp.argmax,
    "argmin": fnp.argmin,
}


@pytest.mark.parametrize("name", sorted(REDUCERS))
def test_reductions_with_nan_and_inf(name):
    rng = np.random.default_rng(1)
    x = rng.uniform(-4, 4, (5, 6, 7)).astype(np.float32)
    x[1, 2, 3], x[3, 0, 1], x[4, 5, 6] = np.nan, np.inf, -np.inf
    for axis in (0, 1, 2, None):
        if axis is None and name.startswith("arg"):
            continue
        assert_gpu(lambda v, axis=axis: REDUCERS[name](v, axis=axis), x, rtol=2e-6, atol=1e-6)


def test_reductions_of_empty_integer_and_bool_arrays_and_column_sums():
    e = np.zeros((0, 3), np.float32)
    assert_gpu(lambda v: (fnp.sum(v, 0), fnp.max(v, 0, initial=-np.inf), fnp.prod(v, 0)), e)
    i = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)
    assert_gpu(lambda v: (fnp.sum(v), fnp.max(v, 1), fnp.min(v, 0), fnp.argmax(v, 1)), i)
    assert_gpu(lambda v: (fnp.all(v, 0), fnp.any(v, 1)), i > 0)
    big = np.random.default_rng(2).standard_normal((512, 64)).astype(np.float32)
    assert_gpu(lambda v: fnp.sum(v, axis=0), big, rtol=1e-5, atol=1e-5)  # the CPU's colred


@pytest.mark.parametrize("m,k,n", [(4, 3, 5), (64, 32, 48), (1, 100, 1), (37, 65, 130)])
def test_matmul_tiles_and_transposes(m, k, n):
    rng = np.random.default_rng(m)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    assert_gpu(lambda a, b: a @ b, a, b, rtol=2e-5, atol=2e-5)
    assert_gpu(lambda a, b: (a.T @ a, b @ b.T), a, b, rtol=2e-5, atol=2e-4)


def test_batched_and_integer_dot_general():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 40, 30)).astype(np.float32)
    b = rng.standard_normal((3, 30, 20)).astype(np.float32)
    assert_gpu(lambda a, b: fnp.einsum("bij,bjk->bik", a, b), a, b, rtol=2e-5, atol=2e-5)
    i = rng.integers(-5, 5, (6, 7)).astype(np.int32)
    assert_gpu(lambda a: a @ a.T, i)


def test_gather_scatter_and_dynamic_slices():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((10, 4)).astype(np.float32)
    idx = np.array([3, 0, 9, 3, 3], np.int32)
    assert_gpu(lambda x, i: (x[i], x.at[i].add(1.0), x.at[i].set(-1.0), x.at[i].max(0.5)), x, idx)
    assert_gpu(
        lambda x: (
            lax.dynamic_slice(x, (np.int32(7), np.int32(1)), (3, 2)),
            fnp.concatenate([x, x * 2], axis=1),
            fnp.cumsum(x, axis=0),
        ),
        x,
        rtol=1e-6,
        atol=1e-6,
    )


# fusion: dispatches per call ----------------------------------------------------------------


def test_chain_is_one_dispatch_and_softmax_stores_its_row_reductions():
    x = np.linspace(-3, 3, 1000, dtype=np.float32)
    exe = assert_gpu(
        lambda x: fnp.tanh(x) * 0.5 + fnp.exp(-x * x) - fnp.sin(x) / (1 + x * x),
        x,
        rtol=4e-6,
        atol=1e-6,
    )
    assert exe.num_dispatches == 1
    # the math functions are written out in the kernel (to be interleaved), not called
    (shader,) = exe.shaders
    assert "fn fg_sin_f32" not in shader.source and "let flat = i32(gid.x);" in shader.source
    m = np.random.default_rng(0).standard_normal((16, 100)).astype(np.float32)

    def softmax(x):
        e = fnp.exp(x - fnp.max(x, axis=1, keepdims=True))
        return e / fnp.sum(e, axis=1, keepdims=True)

    exe = assert_gpu(softmax, m, rtol=2e-6, atol=1e-7)
    # one invocation per element: the row max and row sum are computed once per row
    assert exe.num_dispatches == 3


def test_more_than_65535_workgroups_use_a_2d_grid():
    n = 65536 * wgsl.KERNEL_WORKGROUP + 100
    x = np.arange(n, dtype=np.float32)
    exe = assert_gpu(lambda v: v * 2 + 1, x)
    assert exe.shaders[0].grid[1] > 1 and "gid.y" in exe.shaders[0].source


def test_math_functions_of_literals_written_out():
    """A literal argument of a written-out math function gets a name first (``-a0`` of
    ``-1.5f`` must not become ``--1.5f``); the value matches the CPU."""
    x = np.float32([0.5, 1.0, 2.0, 7.0])
    assert_gpu(
        lambda v: lax.pow(v, -1.5) + lax.atan2(np.float32(-2.0), v) + lax.pow(np.float32(-0.5), v),
        x,
        rtol=4e-6,
    )


def test_float64_programs_raise_a_clear_type_error(x64):
    f = fg.jit(lambda v: v * 2, backend="gpu")
    with pytest.raises(TypeError, match="float64.*float32.*backend='cpu'"):
        f(np.ones(3))


def test_erf_inv_and_random_normal_in_float32_only():
    x = np.concatenate(
        [
            np.float32([0.0, -0.0, 1.0, -1.0, 1.5, np.nan, 0.999999, -0.9999]),
            np.linspace(-0.995, 0.995, 199, dtype=np.float32),
        ]
    )
    assert_gpu(lax.erf_inv, x, rtol=2e-6, atol=1e-7)
    key = fg.random.key(0)
    f = lambda k: fg.random.normal(k, (2000,))  # noqa: E731
    np.testing.assert_allclose(
        np.asarray(fg.jit(f, backend="gpu")(key)), np.asarray(f(key)), rtol=2e-6, atol=2e-6
    )


def test_a_math_function_needing_float64_reports_it(monkeypatch):
    """A function without a float32-only formulation (here llvm_math's lgamma, which rounds
    its float64 version, in place of wgsl_math's) is a LoweringError naming it, not a crash."""
    from fungrad.lowering.math import wgsl as wgsl_math

    monkeypatch.delitem(wgsl_math._GPU_EMITTERS, "lgamma")
    wgsl_math._body.cache_clear()
    try:
        with pytest.raises(fg.LoweringError, match="lgamma.*float64.*backend='cpu'"):
            gpu_compiled(lambda v: lax.lgamma(v), np.float32([1.5]))
    finally:
        monkeypatch.undo()
        wgsl_math._body.cache_clear()
