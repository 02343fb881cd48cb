"""The CPU compiler on cumulative reductions, sort/top_k, conv_general_dilated, threefry2x32 and
the special functions lgamma/digamma/erf_inv: every program is compiled with
``fungrad.lowering.compile_jaxpr`` and compared with eager evaluation (the primitives' numpy
impls). Where the impl is exact (integers, selects, gathers, sequential scans) the comparison
is bit for bit, -0.0 and NaN payloads included; float math within a few ulp.
"""

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
from fungrad.lowering.cpu.sort import RUN
from fungrad.lowering.fusion import Gemm, Kernel
from fungrad.lowering.steps import SortStep, scratch_slots

# -- the harness --------------------------------------------------------------------------------


def compile_fn(f, *args):
    """``f`` traced on ``args`` and compiled; returns (executable, fungrad args)."""
    args = [fnp.asarray(a) for a in args]
    return compile_jaxpr(fg.make_jaxpr(f)(*args), "cpu", "f"), args


def _bits(a: np.ndarray) -> np.ndarray:
    """An array's bit patterns (bool as uint8), for bit-exact comparisons."""
    if a.dtype.kind == "b":
        return a.view(np.uint8)
    return a.view(f"u{a.dtype.itemsize}")


def compile_and_compare(f, *args, exact=True, rtol=1e-6, atol=0.0):
    """Compile ``f``, run it on ``args`` and compare every output with eager ``f(*args)``:
    bit for bit when ``exact``, else within ``rtol``/``atol`` with identical NaN/inf positions.
    Returns the executable (for fusion checks)."""
    exe, fargs = compile_fn(f, *args)
    outs = exe.call(fargs)
    refs = fg.tree_util.tree_leaves(f(*fargs))
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert isinstance(o, fg.Array)
        got, want = np.asarray(o), np.asarray(r)
        assert got.shape == want.shape and got.dtype == want.dtype, (
            got.shape,
            got.dtype,
            want.shape,
            want.dtype,
        )
        if exact:
            np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=f"{got} != {want}")
        else:
            g, w = got.astype(np.float64), want.astype(np.float64)
            np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
            np.testing.assert_array_equal(np.isinf(g) * np.sign(g), np.isinf(w) * np.sign(w))
            fin = np.isfinite(w)
            np.testing.assert_allclose(g[fin], w[fin], rtol=rtol, atol=atol)
    return exe


def _floats(width: int = 32, special: bool = True):
    """Float elements: a few exact specials (NaN, +-inf, +-0) among moderate values."""
    base = st.floats(-100, 100, width=width)
    if not special:
        return base
    return st.one_of(base, st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0]))


def _elements(dtype, special: bool = True):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return _floats(min(8 * dtype.itemsize, 64) if dtype.itemsize > 2 else 16, special)
    if dtype.kind == "b":
        return st.booleans()
    info = np.iinfo(dtype)
    return st.integers(int(max(info.min, -1000)), int(min(info.max, 1000)))


# -- cumulative reductions ----------------------------------------------------------------------

_CUMULATIVE = {
    "cumsum": lax.cumsum,
    "cumprod": lax.cumprod,
    "cummax": lax.cummax,
    "cummin": lax.cummin,
    "cumlogsumexp": lax.cumlogsumexp,
}


@settings(max_examples=40)
@given(
    data=st.data(),
    name=st.sampled_from(sorted(_CUMULATIVE)),
    dtype=st.sampled_from([np.float32, np.int32, np.uint8, np.int8, np.float16]),
    reverse=st.booleans(),
)
def test_cumulative_matches_eager(data, name, dtype, reverse):
    if name == "cumlogsumexp" and np.dtype(dtype).kind != "f":
        dtype = np.float32
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=6))
    x = data.draw(hnp.arrays(dtype, shape, elements=_elements(dtype)), label="x")
    axis = data.draw(st.integers(0, len(shape) - 1), label="axis")
    prim = _CUMULATIVE[name]
    # sequential scans in the impl's order and dtype: bit for bit, except logaddexp (exp/log1p)
    # and float max/min, equal in value (-0.0 == 0.0: see test_cummax_follows_jax_on_zeros)
    exact = name in ("cumsum", "cumprod") or np.dtype(dtype).kind != "f"
    compile_and_compare(
        lambda a: prim(a, axis, reverse),
        x,
        exact=exact,
        rtol=0 if name != "cumlogsumexp" else 2e-6 if dtype == np.float32 else 2e-3,
    )


@pytest.mark.parametrize("name", sorted(_CUMULATIVE))
def test_cumulative_float64(x64, name):
    x = np.random.default_rng(0).standard_normal((5, 33))
    x[1, 3], x[2, 7], x[3, 0] = np.nan, np.inf, -np.inf
    for axis in (0, 1):
        compile_and_compare(
            lambda a, axis=axis: _CUMULATIVE[name](a, axis, True),
            x,
            exact=name in ("cumsum", "cumprod"),
            rtol=1e-14 if name == "cumlogsumexp" else 0,
        )


def test_cummax_follows_jax_on_zeros_and_nan():
    # JAX's (IEEE) maximum: -0.0 < 0.0 and the first NaN sticks. numpy's impl agrees up to the
    # sign of zeros, which it picks by dtype and SIMD path.
    x = np.array([-0.0, 0.0, -0.0, 1.0, -0.0], np.float32)
    for prim, signs in ((lax.cummax, [1, 0, 0, 0, 0]), (lax.cummin, [1, 1, 1, 1, 1])):
        exe, args = compile_fn(lambda a, prim=prim: prim(a, 0), x)
        out = np.asarray(exe.call(args)[0])
        np.testing.assert_array_equal(np.signbit(out), np.array(signs, bool))
    y = np.array([1.0, np.nan, 5.0, -np.inf], np.float32)
    compile_and_compare(lambda a: lax.cummax(a, 0), y, exact=False, rtol=0)
    compile_and_compare(lambda a: lax.cummin(a, 0, True), y, exact=False, rtol=0)


def test_cumulative_integers_wrap():
    x = np.array([[100, 100, 100, 7]], np.int8)
    compile_and_compare(lambda a: lax.cumsum(a, 1), x)
    compile_and_compare(lambda a: lax.cumprod(a, 1), x)
    compile_and_compare(lambda a: lax.cumsum(a, 0), np.array([200, 100, 3], np.uint8))


def test_cumsum_fuses_its_operand_and_splits_rows():
    x = np.random.default_rng(1).standard_normal((6, 40)).astype(np.float32)
    # two kernels: the first element of every row, then the scan (reading its own output)
    exe = compile_and_compare(lambda a: lax.cumsum(fnp.tanh(a) * 2 + 1, 1), x, exact=False)
    first, scan = exe.program.steps
    assert isinstance(scan, Kernel) and scan.parallel  # rows are independent
    assert [b.kind for b in first.reads()] == ["input"] and first.writes() == scan.writes()
    # the operand and its own output (the float64 carry, stored beside the float32 result)
    assert scan.reads() - scan.writes() == first.reads() and scan.reads() & scan.writes()
    exe = compile_and_compare(lambda a: lax.cumsum(a * 2, 0), x)
    assert not exe.program.steps[1].parallel  # the scanned axis is the outermost loop
    # a row reduction inside the operand is computed once per row, in the same kernels
    exe = compile_and_compare(lambda a: lax.cumsum(a - fnp.max(a, axis=1, keepdims=True), 1), x)
    assert len(exe.program.steps) == 2


def test_cumsum_stores_an_operand_that_would_recompute_a_reduction():
    x = np.random.default_rng(2).standard_normal((7, 9)).astype(np.float32)
    # the column sums s[j] would be recomputed for every scanned row: the operand is stored
    exe = compile_and_compare(
        lambda a: lax.cumsum(a * fnp.sum(a, axis=0), 0), x, exact=False, rtol=1e-5, atol=1e-5
    )
    scan = exe.program.steps[-1]
    assert {b.kind for b in scan.reads()} == {"temp"}  # the stored operand, the float64 carry
    assert not any(e for s in scan.stores for e in _reductions(s.value))


def _reductions(root):
    seen, stack, out = set(), [root], []
    while stack:
        e = stack.pop()
        if id(e) not in seen:
            seen.add(id(e))
            out += [e] if e.op == "reduce" else []
            stack.extend(e.args)
    return out


def test_numpy_cumulative_functions():
    x = np.random.default_rng(3).standard_normal((4, 5)).astype(np.float32)
    compile_and_compare(lambda a: fnp.cumsum(a, axis=1), x)
    compile_and_compare(lambda a: fnp.cumsum(a), x)
    compile_and_compare(lambda a: fnp.cumprod(a, axis=0), x)


# -- sort and top_k -----------------------------------------------------------------------------

_SORT_DTYPES = [np.float32, np.int32, np.uint8, np.bool_, np.float16]


def _sort_shapes(min_side: int = 0):
    """Rows up to 60 long (past the insertion-sorted runs) or small 2-3 d blocks."""
    return st.one_of(
        hnp.array_shapes(min_dims=1, max_dims=1, min_side=min_side, max_side=60),
        hnp.array_shapes(min_dims=2, max_dims=3, min_side=min_side, max_side=7),
    )


@settings(max_examples=25)
@given(data=st.data(), nops=st.integers(1, 3))
def test_sort_matches_eager(data, nops):
    shape = data.draw(_sort_shapes())
    dims = data.draw(st.integers(0, len(shape) - 1), label="dimension")
    num_keys = data.draw(st.integers(1, nops), label="num_keys")
    xs = []
    for i in range(nops):
        dt = data.draw(st.sampled_from(_SORT_DTYPES), label=f"dtype{i}")
        # few distinct values, so ties (and the stability that breaks them) are common
        small = (
            st.sampled_from([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -2.5])
            if np.dtype(dt).kind == "f"
            else _elements(dt)
        )
        xs.append(data.draw(hnp.arrays(dt, shape, elements=small), label=f"x{i}"))
    compile_and_compare(lambda *a: lax.sort(a, dims, num_keys=num_keys), *xs)


@settings(max_examples=25)
@given(data=st.data(), dtype=st.sampled_from(_SORT_DTYPES))
def test_top_k_matches_eager(data, dtype):
    shape = data.draw(_sort_shapes(min_side=1))
    axis = data.draw(st.integers(0, len(shape) - 1), label="axis")
    k = data.draw(st.integers(0, shape[axis]), label="k")
    elems = (
        st.one_of(_elements(dtype), st.sampled_from([np.nan, -np.nan, -0.0, 0.0]))
        if np.dtype(dtype).kind == "f"
        else _elements(dtype)
    )
    x = data.draw(hnp.arrays(dtype, shape, elements=elems), label="x")
    compile_and_compare(lambda a: lax.top_k(a, k, axis=axis), x)


def test_sort_orders_nan_last_and_zeros_equal_stably():
    x = np.array([np.nan, 1.0, -np.inf, np.inf, -0.0, 0.0, -np.nan, 3.0, 0.0, -0.0], np.float32)
    idx = np.arange(x.size, dtype=np.int32)
    exe = compile_and_compare(lambda a, b: lax.sort((a, b), 0, num_keys=1), x, idx)
    keys, perm = (np.asarray(o) for o in exe.call([fnp.asarray(x), fnp.asarray(idx)]))
    assert list(perm) == [2, 4, 5, 8, 9, 1, 7, 3, 0, 6]  # -0.0 and 0.0 keep their order
    assert np.signbit(keys[1:5]).tolist() == [True, False, False, True]
    (step,) = exe.program.steps
    assert isinstance(step, SortStep)


def test_top_k_follows_the_total_order():
    x = np.array([0.0, -np.nan, -0.0, np.nan, -np.inf, 1.0, 0.0], np.float32)
    compile_and_compare(lambda a: lax.top_k(a, 7), x)
    exe, args = compile_fn(lambda a: lax.top_k(a, 7), x)
    _, idx = (np.asarray(o) for o in exe.call(args))
    assert idx.tolist() == [3, 5, 0, 6, 2, 4, 1]


def test_sort_long_rows_merge_stably():
    # rows far longer than the insertion-sorted runs, so every merge level runs
    rng = np.random.default_rng(4)
    keys = rng.integers(0, 7, (3, 16 * RUN + 5)).astype(np.int32)
    vals = rng.standard_normal(keys.shape).astype(np.float32)
    compile_and_compare(lambda a, b: lax.sort((a, b), 1, num_keys=1), keys, vals)
    compile_and_compare(lambda a, b: lax.sort((a, b), 0, num_keys=2), keys.T, vals.T)
    x = rng.standard_normal(5000).astype(np.float32)
    compile_and_compare(lambda a: lax.sort(a * 3, 0), x)
    compile_and_compare(lambda a: lax.top_k(a, 100), x)


def test_sort_many_rows_run_in_slots():
    # enough rows and elements: rows are split into slots that fg_parallel_for spreads over
    # the cores, each with its own scratch
    rng = np.random.default_rng(13)
    x = rng.integers(-50, 50, (64, 600)).astype(np.int32)
    y = rng.standard_normal((64, 600)).astype(np.float32)
    exe = compile_and_compare(lambda a, b: lax.sort((a, b), 1, num_keys=2), x, y)
    (step,) = exe.program.steps
    assert step.slots == scratch_slots(x.shape, 1) == 16
    assert "fg_parallel_for" in exe.ir
    compile_and_compare(lambda a: lax.top_k(a, 7), y)
    compile_and_compare(lambda a: lax.sort(a, 0), y.T.copy())  # 600 rows of 64


def test_sort_64_bit_keys(x64):
    x = np.array([2**63, 1, 2**64 - 1, 0, 2**63 - 1], np.uint64)
    compile_and_compare(lambda a: lax.sort(a, 0), x)
    compile_and_compare(lambda a: lax.top_k(a, 3), x)
    y = np.array([-(2**63), 5, 2**63 - 1, -1], np.int64)
    compile_and_compare(lambda a: lax.sort(a, 0), y)
    z = np.array([np.nan, -0.0, 0.0, -1e300, 5e-324, -np.inf], np.float64)
    compile_and_compare(lambda a: lax.sort(a, 0), z)
    compile_and_compare(lambda a: lax.top_k(a, 4), z)


def test_numpy_sort_and_argsort():
    x = np.random.default_rng(5).standard_normal((5, 7)).astype(np.float32)
    x[1, 2], x[3, 3] = np.nan, -0.0
    compile_and_compare(lambda a: fnp.sort(a), x)
    compile_and_compare(lambda a: fnp.argsort(a), x)
    compile_and_compare(lambda a: fnp.sort(a, axis=0), x)
    compile_and_compare(lambda a: fnp.argsort(a, axis=None), x)


# -- conv_general_dilated -----------------------------------------------------------------------

_CONV_CASES = [
    # (lhs shape, rhs shape, keyword arguments)
    ((2, 3, 9, 8), (4, 3, 3, 2), dict(window_strides=(1, 1), padding="SAME")),
    (
        (2, 3, 9, 8),
        (4, 3, 3, 2),
        dict(
            window_strides=(2, 3),
            padding=((2, 1), (-1, 3)),
            lhs_dilation=(2, 1),
            rhs_dilation=(1, 2),
        ),
    ),
    ((2, 3, 9, 8), (4, 3, 3, 2), dict(window_strides=(1, 1), padding="VALID", rhs_dilation=(2, 2))),
    (
        (2, 9, 8, 6),
        (3, 2, 3, 4),
        dict(
            window_strides=(1, 2),
            padding="SAME",
            dimension_numbers=("NHWC", "HWIO", "NHWC"),
            feature_group_count=2,
        ),
    ),
    ((4, 3, 7), (6, 3, 2), dict(window_strides=(1,), padding=((1, 1),), batch_group_count=2)),
    ((1, 2, 4, 5, 3), (2, 2, 2, 2, 2), dict(window_strides=(1, 1, 1), padding="SAME")),
    (
        (6, 2, 3),
        (2, 3, 4),
        dict(window_strides=(1,), padding=((0, 0),), dimension_numbers=("WCN", "IWO", "CNW")),
    ),
    (
        (8, 12, 12, 16),
        (3, 3, 16, 24),
        dict(window_strides=(1, 1), padding="SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
    ),
    (
        (2, 16, 10, 10),
        (8, 16, 3, 3),
        dict(window_strides=(2, 1), padding=((1, 0), (2, 2)), lhs_dilation=(1, 2)),
    ),
]


@pytest.mark.parametrize("lhs_shape, rhs_shape, kw", _CONV_CASES)
def test_conv_matches_eager(lhs_shape, rhs_shape, kw):
    rng = np.random.default_rng(6)
    x = rng.standard_normal(lhs_shape).astype(np.float32)
    w = rng.standard_normal(rhs_shape).astype(np.float32)
    f = lambda a, b: lax.conv_general_dilated(a, b, **kw)  # noqa: E731
    compile_and_compare(f, x, w, exact=False, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("case", [1, 3, 4, 6])
def test_conv_integer_bool_float16(case):
    lhs_shape, rhs_shape, kw = _CONV_CASES[case]
    f = lambda a, b: lax.conv_general_dilated(a, b, **kw)  # noqa: E731
    rng = np.random.default_rng(12)
    x = rng.standard_normal(lhs_shape).astype(np.float32)
    w = rng.standard_normal(rhs_shape).astype(np.float32)
    xi, wi = (rng.integers(-4, 5, s).astype(np.int32) for s in (lhs_shape, rhs_shape))
    compile_and_compare(f, xi, wi)  # int64 accumulation, wrapped to int32: exact
    compile_and_compare(f, xi > 0, wi > 0)
    compile_and_compare(
        f, x.astype(np.float16), w.astype(np.float16), exact=False, rtol=2e-3, atol=2e-3
    )


@settings(max_examples=25)
@given(data=st.data())
def test_conv_random_configurations(data):
    nsp = data.draw(st.integers(1, 2), label="spatial dims")
    fg_, bg = data.draw(st.sampled_from([(1, 1), (2, 1), (1, 2)]), label="groups")
    n = bg * data.draw(st.integers(1, 2))
    i = data.draw(st.integers(0, 3))
    o = fg_ * bg * data.draw(st.integers(1, 2))
    sizes = [data.draw(st.integers(0, 6)) for _ in range(nsp)]
    win = [data.draw(st.integers(0, 3)) for _ in range(nsp)]
    strides = tuple(data.draw(st.integers(1, 3)) for _ in range(nsp))
    lhs_dil = tuple(data.draw(st.integers(1, 3)) for _ in range(nsp))
    rhs_dil = tuple(data.draw(st.integers(1, 2)) for _ in range(nsp))
    pads = []
    for k in range(nsp):  # keep the padded size >= 0 (negative padding crops)
        full = (sizes[k] - 1) * lhs_dil[k] + 1 if sizes[k] else 0
        lo = data.draw(st.integers(-min(full, 2), 3))
        hi = data.draw(st.integers(-min(full + lo, 2), 3)) if full + lo >= 0 else 3
        pads.append((lo, hi))
    dtype = data.draw(st.sampled_from([np.float32, np.int32]))
    x = data.draw(
        hnp.arrays(dtype, (n, i * fg_, *sizes), elements=_elements(dtype, special=False)),
        label="lhs",
    )
    w = data.draw(
        hnp.arrays(dtype, (o, i, *win), elements=_elements(dtype, special=False)), label="rhs"
    )
    f = lambda a, b: lax.conv_general_dilated(  # noqa: E731
        a, b, strides, tuple(pads), lhs_dil, rhs_dil, feature_group_count=fg_, batch_group_count=bg
    )
    try:
        f(x, w)
    except ValueError:  # a configuration the primitive rejects (e.g. padding too negative)
        return
    compile_and_compare(f, x, w, exact=dtype == np.int32, rtol=1e-4, atol=1e-2)


@pytest.mark.parametrize("big", [False, True], ids=["inline", "gemm"])
def test_conv_padding_times_inf_is_nan(big):
    # the impl multiplies padded zeros with the kernel: 0 * inf = NaN, in both lowerings
    rng = np.random.default_rng(7)
    c = 16 if big else 2
    x = rng.standard_normal((2, c, 9, 8)).astype(np.float32)
    w = rng.standard_normal((4, c, 3, 2)).astype(np.float32)
    w[0, 0, 0, 0] = np.inf
    exe = compile_and_compare(
        lambda a, b: lax.conv_general_dilated(a, b, (1, 1), ((3, 3), (3, 3))),
        x,
        w,
        exact=False,
        rtol=2e-5,
        atol=1e-4,
    )
    assert any(isinstance(s, Gemm) for s in exe.program.steps) == big


def test_conv_empty_operands():
    f = lambda a, b: lax.conv_general_dilated(a, b, (1,), ((2, 2),))  # noqa: E731
    compile_and_compare(f, np.zeros((1, 2, 0), np.float32), np.full((1, 2, 2), np.nan, np.float32))
    compile_and_compare(f, np.zeros((1, 0, 4), np.float32), np.zeros((1, 0, 2), np.float32))
    compile_and_compare(f, np.ones((0, 2, 4), np.float32), np.ones((3, 2, 2), np.float32))


def test_conv_gemm_path_writes_the_output_directly():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((4, 10, 10, 8)).astype(np.float32)
    w = rng.standard_normal((3, 3, 8, 16)).astype(np.float32)
    exe = compile_and_compare(
        lambda a, b: lax.conv_general_dilated(
            a, b, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        ),
        x,
        w,
        exact=False,
        rtol=2e-5,
        atol=2e-5,
    )
    kinds = [type(s).__name__ for s in exe.program.steps]
    assert kinds == ["Kernel", "Gemm"]  # the patches, then BLAS into the output


def test_conv_transpose_and_gradient():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 9, 8, 6)).astype(np.float32)
    k = rng.standard_normal((3, 3, 6, 5)).astype(np.float32)
    compile_and_compare(
        lambda a, b: lax.conv_transpose(a, b, (2, 2), "SAME"),
        x,
        k,
        exact=False,
        rtol=2e-5,
        atol=2e-5,
    )

    def loss(a, b):
        y = lax.conv_general_dilated(
            a, b, (2, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )
        return fnp.sum(fnp.tanh(y))

    compile_and_compare(
        fg.grad(loss, argnums=(0, 1)), x, k[..., :4], exact=False, rtol=1e-4, atol=1e-4
    )


# -- threefry2x32 and random numbers ------------------------------------------------------------


def test_threefry_reference_vector():
    args = [np.uint32(v) for v in (0x13198A2E, 0x03707344, 0x243F6A88, 0x85A308D3)]
    exe, fargs = compile_fn(lax.threefry2x32, *args)
    y1, y2 = (int(np.asarray(o)) for o in exe.call(fargs))
    assert (y1, y2) == (0xC4923A9C, 0x483DF7A0)


@settings(max_examples=20)
@given(data=st.data())
def test_threefry_matches_eager(data):
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=5))
    words = st.integers(0, 2**32 - 1)
    args = [
        data.draw(
            hnp.arrays(np.uint32, data.draw(st.sampled_from([(), shape])), elements=words),
            label=f"arg{i}",
        )
        for i in range(4)
    ]
    if all(a.shape == () for a in args):
        args[2] = np.broadcast_to(args[2], shape).copy()
    exe = compile_and_compare(lax.threefry2x32, *args)
    if np.prod(shape) > 0:  # both words come from one kernel: the cipher runs once
        (step,) = exe.program.steps
        assert len(step.stores) == 2


def test_random_samplers_compile():
    key = fg.random.PRNGKey(42)
    compile_and_compare(lambda k: fg.random.uniform(k, (1000,)), key)
    compile_and_compare(lambda k: fg.random.normal(k, (3, 50)), key, exact=False, rtol=1e-6)
    compile_and_compare(lambda k: fg.random.split(k, 4), key)
    compile_and_compare(lambda k: fg.random.randint(k, (7,), 0, 10), key)


# -- lgamma, digamma, erf_inv -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["lgamma", "digamma", "erf_inv"])
def test_special_functions_compile(name):
    fn = getattr(lax, name)
    rng = np.random.default_rng(10)
    if name == "erf_inv":
        x = np.concatenate([rng.uniform(-1, 1, 500), [1, -1, 0, -0.0, 1.5, np.nan, 1e-30]])
    else:
        x = np.concatenate(
            [
                rng.uniform(-10, 10, 500),
                np.exp(rng.uniform(-20, 20, 200)),
                [0, -0.0, -1, -2, 1, 2, np.inf, -np.inf, np.nan, 1e-30, 0.5],
            ]
        )
    # float32 computes in float64 and rounds once, as the impl: identical but for rare ties
    compile_and_compare(fn, x.astype(np.float32), exact=False, rtol=1.2e-7)
    x16 = x[~(np.abs(x) > 6e4)].astype(np.float16)
    compile_and_compare(lambda a: fn(a * 1), x16, exact=False, rtol=1e-3)


@pytest.mark.parametrize("name", ["lgamma", "digamma", "erf_inv"])
def test_special_functions_float64(x64, name):
    fn = getattr(lax, name)
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, 300) if name == "erf_inv" else rng.uniform(-30, 30, 300)
    # away from the zeros of lgamma/digamma: a few ulp (tests/test_lowering_llvm_math.py)
    compile_and_compare(fn, x, exact=False, rtol=1e-13, atol=1e-13)
