"""The CPU compiler against the numpy reference: elementwise, shape, reduction and dot_general
primitives, fusion (how many kernels), buffers and the compiled entry point's argument checks.

Every test compiles ``make_jaxpr(f)`` with ``fungrad.lowering.compile_jaxpr`` and compares the
native result with eager evaluation (the primitives' numpy impls)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.lowering import compile_jaxpr, fusion
from fungrad.lowering.kernel import lowering_rules


def compiled(f, *args):
    """(native outputs, eager outputs, executable) of ``f`` on ``args``."""
    args = [fnp.asarray(a) for a in args]
    exe = compile_jaxpr(fg.make_jaxpr(f)(*args), "cpu", "test")
    outs = exe.call(args)
    refs = fg.tree_util.tree_leaves(f(*args))
    return outs, refs, exe


def assert_same(f, *args, rtol=0.0, atol=0.0):
    outs, refs, exe = compiled(f, *args)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        o, r = np.asarray(o), np.asarray(r)
        assert o.shape == r.shape and o.dtype == r.dtype, (o.shape, o.dtype, r.shape, r.dtype)
        if o.dtype.kind == "f":
            np.testing.assert_array_equal(np.isnan(o), np.isnan(r))
            np.testing.assert_allclose(o, r, rtol=rtol, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(o, r)
    return exe


def kernels(exe):
    return [s for s in exe.program.steps if isinstance(s, fusion.Kernel)]


FLOATS = hnp.arrays(
    np.float32,
    hnp.array_shapes(min_dims=0, max_dims=3, max_side=6),
    elements=st.floats(-20, 20, width=32, allow_subnormal=False),
)
SPECIAL = np.array(
    [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 3.5, -2.5, 88.0, -90.0, 1e30], np.float32
)

# elementwise ---------------------------------------------------------------------------------

UNARY = {
    "neg": lax.neg,
    "abs": lax.abs,
    "sign": lax.sign,
    "floor": lax.floor,
    "ceil": lax.ceil,
    "round": lax.round,
    "round_even": lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
    "sqrt": lax.sqrt,
    "rsqrt": lax.rsqrt,
    "cbrt": lax.cbrt,
    "exp": lax.exp,
    "exp2": lax.exp2,
    "log": lax.log,
    "log1p": lax.log1p,
    "expm1": lax.expm1,
    "sin": lax.sin,
    "cos": lax.cos,
    "tan": lax.tan,
    "asin": lax.asin,
    "acos": lax.acos,
    "atan": lax.atan,
    "sinh": lax.sinh,
    "cosh": lax.cosh,
    "tanh": lax.tanh,
    "asinh": lax.asinh,
    "acosh": lax.acosh,
    "atanh": lax.atanh,
    "logistic": lax.logistic,
    "erf": lax.erf,
    "erfc": lax.erfc,
    "is_finite": lax.is_finite,
    "square": lax.square,
    "integer_pow3": lambda x: lax.integer_pow(x, 3),
    "integer_pow-2": lambda x: lax.integer_pow(x, -2),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@given(x=FLOATS)
def test_unary_float32(name, x):
    assert_same(UNARY[name], x, rtol=4e-6, atol=1e-37)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_special_values(name):
    x = SPECIAL
    if name in ("sin", "cos", "tan"):  # no Payne-Hanek reduction: |x| < 2**24 (llvm_math.py)
        x = np.where(np.abs(x) > 1e7, np.float32(1e7), x)
    assert_same(UNARY[name], x, rtol=4e-6, atol=1e-37)


@pytest.mark.parametrize("name", ["exp", "log", "tanh", "sin", "logistic", "sqrt", "sign"])
def test_unary_float64_and_float16(name, x64):
    for dt in (np.float64, np.float16):
        with np.errstate(over="ignore"):
            x = np.concatenate([SPECIAL.astype(dt), np.linspace(-5, 5, 41).astype(dt)])
        if name == "sin":  # no Payne-Hanek reduction (llvm_math.py)
            x = np.where(np.abs(x) > 1e4, dt(1e4), x)
        assert_same(UNARY[name], x, rtol=2e-3 if dt == np.float16 else 1e-14, atol=1e-300)


BINARY = {
    "add": lax.add,
    "sub": lax.sub,
    "mul": lax.mul,
    "div": lax.div,
    "rem": lax.rem,
    "max": lax.max,
    "min": lax.min,
    "pow": lax.pow,
    "atan2": lax.atan2,
    "nextafter": lax.nextafter,
    "eq": lax.eq,
    "ne": lax.ne,
    "lt": lax.lt,
    "le": lax.le,
    "gt": lax.gt,
    "ge": lax.ge,
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_float32_special(name):
    a, b = np.meshgrid(SPECIAL, SPECIAL)
    assert_same(BINARY[name], a, b, rtol=4e-6, atol=1e-37)


INT_BINARY = {
    "add": lax.add,
    "sub": lax.sub,
    "mul": lax.mul,
    "div": lax.div,
    "rem": lax.rem,
    "max": lax.max,
    "min": lax.min,
    "and": lax.bitwise_and,
    "or": lax.bitwise_or,
    "xor": lax.bitwise_xor,
    "shift_left": lax.shift_left,
    "shift_right_logical": lax.shift_right_logical,
    "shift_right_arithmetic": lax.shift_right_arithmetic,
    "lt": lax.lt,
    "eq": lax.eq,
}


@pytest.mark.parametrize("name", sorted(INT_BINARY))
@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int8])
def test_integer_binary_edges(name, dtype):
    info = np.iinfo(dtype)
    vals = np.array(
        sorted(
            v
            for v in {info.min, info.min + 1, -7, -1, 0, 1, 2, 7, 31, 33, info.max}
            if info.min <= v <= info.max
        ),
        dtype,
    )
    a, b = np.meshgrid(vals, vals)  # includes x / 0, x % 0, INT_MIN / -1, shifts >= width
    assert_same(INT_BINARY[name], a, b)


@given(
    x=hnp.arrays(np.int32, hnp.array_shapes(min_dims=0, max_dims=2, max_side=5)),
    y=st.integers(-3, 40),
)
def test_integer_unary_and_shifts(x, y):
    def f(x):
        return (
            lax.neg(x),
            lax.abs(x),
            lax.sign(x),
            lax.bitwise_not(x),
            lax.population_count(x),
            lax.clz(x),
            lax.shift_right_arithmetic(x, np.int32(y)),
            lax.convert_element_type(x, np.float32),
            lax.convert_element_type(x, np.uint8),
            lax.convert_element_type(x, np.bool_),
        )

    assert_same(f, x)


def test_conversions_saturate_and_map_nan_to_zero():
    x = np.concatenate([SPECIAL, np.float32([3e9, -3e9, 2.5, -2.5, 255.5, 256.0])])
    for dt in (np.int32, np.uint8, np.int8, np.uint32, np.bool_, np.float16):
        assert_same(lambda v, dt=dt: lax.convert_element_type(v, dt), x)


def test_bitcast_convert_type_same_and_other_widths():
    x = np.array([[1.5, -0.0], [np.nan, np.inf]], np.float32)
    assert_same(lambda v: lax.bitcast_convert_type(v, np.int32), x)
    assert_same(lambda v: lax.bitcast_convert_type(v, np.uint8), x)
    u = np.arange(16, dtype=np.uint8).reshape(4, 4)
    assert_same(lambda v: lax.bitcast_convert_type(v, np.float32), u)


def test_select_n_clamp_and_bool_ops():
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal((3, 4)).astype(np.float32) for _ in range(3))
    which = rng.integers(0, 3, (3, 4)).astype(np.int32)
    assert_same(lambda w, a, b, c: lax.select_n(w, a, b, c), which, a, b, c)
    assert_same(lambda p, a, b: lax.select_n(p, a, b), a > 0, a, b)
    assert_same(lambda a: lax.clamp(np.float32(-0.5), a, np.float32(0.5)), a)
    assert_same(lambda p, q: (p & q, p | q, p ^ q, ~p, p == q), a > 0, b > 0)


# shapes, broadcasting, reductions -------------------------------------------------------------


@given(x=FLOATS, data=st.data())
def test_shape_ops_compose(x, data):
    perm = tuple(data.draw(st.permutations(range(x.ndim)))) if x.ndim else ()

    def f(x):
        y = lax.transpose(x, perm)
        z = fnp.reshape(y, (-1,))
        return (
            fnp.flip(y, axis=tuple(range(y.ndim))) if y.ndim else y,
            z,
            fnp.broadcast_to(x, (2,) + x.shape),
            fnp.expand_dims(x, 0).squeeze(0),
        )

    assert_same(f, x)


REDUCERS = {
    "sum": fnp.sum,
    "max": fnp.max,
    "min": fnp.min,
    "prod": fnp.prod,
    "argmax": fnp.argmax,
    "argmin": fnp.argmin,
}


@pytest.mark.parametrize("name", sorted(REDUCERS))
@given(
    x=hnp.arrays(
        np.float32,
        hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6),
        elements=st.floats(-4, 4, width=32) | st.sampled_from([np.nan, np.inf]),
    ),
    data=st.data(),
)
def test_reductions(name, x, data):
    axis = data.draw(st.integers(0, x.ndim - 1))
    if name == "prod":  # reassociated, a tiny partial product may underflow before meeting inf
        x = np.where((x != 0) & (np.abs(x) < 1e-3), np.float32(1e-3), x)
    assert_same(lambda v: REDUCERS[name](v, axis=axis), x, rtol=2e-6, atol=1e-6)


def test_reductions_of_empty_and_integer_and_bool_arrays():
    e = np.zeros((0, 3), np.float32)
    assert_same(lambda v: (fnp.sum(v, 0), fnp.max(v, 0, initial=-np.inf), fnp.prod(v, 0)), e)
    i = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)
    assert_same(lambda v: (fnp.sum(v), fnp.max(v, 1), fnp.min(v, 0), fnp.argmax(v, 1)), i)
    b = i > 0
    assert_same(lambda v: (fnp.all(v, 0), fnp.any(v, 1)), b)


def test_float16_sums_accumulate_in_float32():
    x = np.full(3000, 1.0, np.float16)
    assert_same(fnp.sum, x)


# dot_general ----------------------------------------------------------------------------------


@pytest.mark.parametrize("m,k,n", [(4, 3, 5), (64, 32, 48), (1, 100, 1), (37, 65, 130)])
def test_matmul_inline_and_blas(m, k, n):
    rng = np.random.default_rng(m)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    assert_same(lambda a, b: a @ b, a, b, rtol=2e-5, atol=2e-5)
    assert_same(lambda a, b: (a.T @ a, b @ b.T), a, b, rtol=2e-5, atol=2e-4)


def test_dot_general_batch_and_integer():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 40, 30)).astype(np.float32)
    b = rng.standard_normal((3, 30, 20)).astype(np.float32)
    assert_same(lambda a, b: fnp.einsum("bij,bjk->bik", a, b), a, b, rtol=2e-5, atol=2e-5)
    assert_same(lambda a, b: fnp.einsum("bij,bjk->kib", a, b), a, b, rtol=2e-5, atol=2e-5)
    i = rng.integers(-5, 5, (6, 7)).astype(np.int32)
    assert_same(lambda a: a @ a.T, i)
    assert_same(
        lambda a, b: fnp.tensordot(a, b, axes=0).sum(), a[0, :3, :2], b[0, :2, :3], rtol=1e-6
    )


# fusion ---------------------------------------------------------------------------------------


def test_elementwise_chain_is_one_kernel():
    x = np.linspace(-3, 3, 1000, dtype=np.float32)
    exe = assert_same(
        lambda x: fnp.tanh(x) * 0.5 + fnp.exp(-x * x) - fnp.sin(x) / (1 + x * x),
        x,
        rtol=4e-6,
        atol=1e-6,
    )
    assert len(exe.program.steps) == 1 and exe.program.scratch_bytes == 0


def test_softmax_is_one_kernel():
    x = np.random.default_rng(0).standard_normal((16, 100)).astype(np.float32)

    def softmax(x):
        e = fnp.exp(x - fnp.max(x, axis=1, keepdims=True))
        return e / fnp.sum(e, axis=1, keepdims=True)

    exe = assert_same(softmax, x, rtol=2e-6, atol=1e-7)
    assert len(kernels(exe)) == 1


def test_reduction_reused_at_other_indices_is_stored_not_recomputed():
    x = np.random.default_rng(0).standard_normal((8, 5)).astype(np.float32)

    def outer(x):
        s = fnp.sum(x, axis=1)
        return s[:, None] * s[None, :]

    exe = assert_same(outer, x, rtol=1e-5, atol=1e-5)
    assert len(kernels(exe)) == 2 and exe.program.temps


def test_matmul_epilogue_is_fused_and_transposes_use_blas_flags():
    rng = np.random.default_rng(0)
    x, w = (
        rng.standard_normal((128, 64)).astype(np.float32),
        rng.standard_normal((64, 32)).astype(np.float32),
    )
    exe = assert_same(lambda x, w: fnp.tanh(x @ w + 1.0), x, w, rtol=1e-5, atol=1e-5)
    assert [type(s).__name__ for s in exe.program.steps] == ["Gemm", "Kernel"]
    exe = assert_same(lambda x, g: x.T @ g, x, x, rtol=1e-5, atol=1e-4)
    assert [type(s).__name__ for s in exe.program.steps] == ["Gemm"]


def test_temporaries_share_memory_by_liveness():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 64)).astype(np.float32)

    def chain(a):
        for _ in range(4):
            a = fnp.tanh(a @ a)
        return a

    exe = assert_same(chain, a, rtol=1e-4, atol=1e-4)
    temps = exe.program.temps
    assert exe.program.scratch_bytes < sum(t.nbytes for t in temps)


# the entry point ------------------------------------------------------------------------------


def test_inputs_may_be_numpy_scalars_views_and_repeated():
    f = lambda a, b: a * 2 + b  # noqa: E731
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    exe = compile_jaxpr(fg.make_jaxpr(f)(x.T, x.T), "cpu", "views")
    out = exe.call([x.T, x.T])  # non-contiguous input: the entry asks for a copy
    np.testing.assert_array_equal(np.asarray(out[0]), x.T * 3)
    g = lambda a: a + 1  # noqa: E731
    exe = compile_jaxpr(fg.make_jaxpr(g)(np.float32(1)), "cpu", "scalar")
    assert float(exe.call([np.float32(2.5)])[0]) == 3.5


def test_outputs_are_fresh_readonly_arrays_and_inputs_pass_through():
    x = np.arange(4, dtype=np.float32)
    outs, _, _ = compiled(lambda a: (a, a * 2, a * 2), x)
    vals = [np.asarray(o) for o in outs]
    np.testing.assert_array_equal(vals[0], x)
    assert not any(v.flags.writeable for v in vals)
    assert len({id(v) for v in vals}) == 3


def test_every_primitive_with_an_impl_has_a_lowering_rule_or_is_inlined():
    from fungrad.lowering import complex_split
    from fungrad.transforms.vmap import batch_rules

    inlined = {"jit", "checkpoint", "custom_jvp_call", "custom_vjp_call", "custom_lin"}
    # (a primitive that only ever has complex values on one side, such as real or conj, is
    # rewritten away by the complex split before lowering)
    missing = sorted(
        p.name
        for p in batch_rules
        if p not in lowering_rules
        and p.name not in inlined
        and not complex_split.removed_by_split(p)
    )
    assert not missing, f"primitives without a lowering rule: {missing}"


def test_softmax_backward_computes_each_rows_exp_once():
    """The gradient of softmax needs ``exp(x - max)`` in two sums of a row (the normaliser and
    ``sum(dy * s)``) and in the stores: one row buffer, filled once per row, serves all three
    (kernel.py ``_plan_row_buffers``; it was computed twice). Values against numpy."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((64, 200)).astype(np.float32) * 4
    dy = rng.standard_normal((64, 200)).astype(np.float32)

    def f(x, dy):
        _, pull = fg.vjp(lambda x: fg.nn.softmax(x, axis=-1), x)
        return pull(dy)[0]

    exe = compile_jaxpr(fg.make_jaxpr(f)(x, dy), "cpu", "softmax_grad")
    exps = [ln for ln in exe.ir.splitlines() if "call float @fg_exp_f32(" in ln]
    assert len(exps) == 1, exps
    (got,) = [np.asarray(o) for o in exe.call([fnp.asarray(x), fnp.asarray(dy)])]
    x64 = x.astype(np.float64)
    s = np.exp(x64 - x64.max(-1, keepdims=True))
    s /= s.sum(-1, keepdims=True)
    want = s * (dy - (dy * s).sum(-1, keepdims=True))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
