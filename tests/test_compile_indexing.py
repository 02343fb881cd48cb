"""Compiled slicing, gather/scatter and windowed reductions (the lowering rules at the ends of
fungrad/lax/slicing.py, indexing.py and windowed_reductions.py) against eager evaluation of
the same functions (the numpy impls): random shapes including 0-d and size 0, out-of-bounds
starts in every mode, duplicate scatter indices, NaN/Inf/-0.0; plus the fusion each rule
promises and the fungrad.numpy functions built on them."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.lax import (
    GatherDimensionNumbers,
    GatherScatterMode,
    ScatterDimensionNumbers,
    indexing,
    slicing,
)
from fungrad.lowering import compile_jaxpr
from fungrad.lowering.fusion import Kernel

MODES = [
    GatherScatterMode.CLIP,
    GatherScatterMode.FILL_OR_DROP,
    GatherScatterMode.PROMISE_IN_BOUNDS,
]
SCATTERS = {
    "scatter": lax.scatter,
    "scatter-add": lax.scatter_add,
    "scatter-mul": lax.scatter_mul,
    "scatter-min": lax.scatter_min,
    "scatter-max": lax.scatter_max,
}


# -- compile and compare -------------------------------------------------------------------------


def compile_and_compare(f, *args, exact=True, rtol=1e-5, atol=1e-5):
    """Compile ``make_jaxpr(f)(*args)``, run it on ``args`` and compare every output with
    eager ``f(*args)``. ``exact``: equal bit patterns (NaN payloads and the sign of zero
    included); ``"value"``: equal values (NaN where NaN; -0.0 == 0.0); False: within
    tolerance. Returns the executable (for fusion checks)."""
    args = [fnp.asarray(a) for a in args]
    exe = compile_jaxpr(fg.make_jaxpr(f)(*args), "cpu", "f")
    got = exe.call(args)
    want = fg.tree_util.tree_leaves(f(*args))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        if exact is True and g.dtype.kind == "f":
            bits = np.dtype(f"u{g.dtype.itemsize}")
            np.testing.assert_array_equal(g.view(bits), w.view(bits))
        elif exact or g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(
                g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True
            )
    return exe


def values(rng, shape, dtype, specials=True):
    """Random values of ``dtype``; floats include NaN, +-Inf and -0.0 when ``specials``."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(
            max(info.min, -100), min(info.max, 100), size=shape, endpoint=True
        ).astype(dtype)
    x = rng.standard_normal(shape).astype(dtype)
    if specials and x.size:
        special = np.array([np.nan, np.inf, -np.inf, -0.0], dtype)
        mask = rng.random(shape) < 0.15
        x[mask] = rng.choice(special, size=int(mask.sum()))
    return x


def kernels(exe):
    return [s for s in exe.program.steps if isinstance(s, Kernel)]


DTYPES = [np.float32, np.int32, np.uint8, np.bool_]
# the tests that compile two programs per example draw half as many examples
half_examples = settings(max_examples=max(1, settings.default.max_examples // 2))
shapes = st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple)
seeds = st.integers(0, 2**32 - 1)


# -- slicing.py ---------------------------------------------------------------------------------


@st.composite
def slice_cases(draw):
    shape = draw(shapes)
    start, limit, strides = [], [], []
    for n in shape:
        a = draw(st.integers(0, n))
        start.append(a)
        limit.append(draw(st.integers(a, n)))
        strides.append(draw(st.integers(1, 3)))
    return shape, tuple(start), tuple(limit), tuple(strides)


@given(slice_cases(), st.sampled_from(DTYPES), seeds)
def test_slice(case, dtype, seed):
    shape, start, limit, strides = case
    x = values(np.random.default_rng(seed), shape, dtype)
    compile_and_compare(
        lambda x: slicing.slice_p.bind(
            x, start_indices=start, limit_indices=limit, strides=strides
        ),
        x,
    )


@st.composite
def pad_cases(draw):
    shape = draw(shapes)
    config = []
    for n in shape:
        interior = draw(st.integers(0, 2))
        inner = n + max(n - 1, 0) * interior
        lo = draw(st.integers(-inner, 3))
        hi = draw(st.integers(-(inner + lo) if inner + lo > 0 else 0, 3))
        config.append((lo, hi, interior))
    return shape, tuple(config)


@given(pad_cases(), st.sampled_from(DTYPES), seeds)
def test_pad_negative_and_interior(case, dtype, seed):
    shape, config = case
    rng = np.random.default_rng(seed)
    x = values(rng, shape, dtype)
    v = values(rng, (), dtype)
    compile_and_compare(lambda x, v: lax.pad(x, v, config), x, v)


@given(
    st.lists(st.integers(0, 3), min_size=2, max_size=7),
    st.integers(0, 2),
    st.sampled_from(DTYPES),
    seeds,
)
def test_concatenate(sizes, dimension, dtype, seed):
    rng = np.random.default_rng(seed)
    base = [2, 3, 2]
    xs = []
    for n in sizes:
        shape = list(base)
        shape[dimension] = n
        xs.append(values(rng, tuple(shape), dtype))
    exe = compile_and_compare(lambda *xs: lax.concatenate(xs, dimension), *xs)
    pieces = sum(1 for n in sizes if n)
    if pieces == 0:  # an empty result: a loop nest without iterations is no kernel
        assert not exe.program.steps
    elif pieces > slicing._CONCAT_SELECT_MAX:  # one copy per piece, into one buffer
        assert [k.name[:11] for k in kernels(exe)] == ["concatenate"] * pieces
    else:  # a select chain: one fused loop nest
        assert len(exe.program.steps) == 1


def test_concatenate_fuses_its_producers_in_both_forms():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    exe = compile_and_compare(
        lambda x: fnp.exp(fnp.concatenate([x, x * 2, -x], 1)) + 1, x, exact=False
    )
    assert len(exe.program.steps) == 1
    exe = compile_and_compare(lambda x: fnp.concatenate([x + i for i in range(6)], 0), x)
    assert len(exe.program.steps) == 6 and exe.program.scratch_bytes == 0


START_DTYPES = [np.int32, np.uint8, np.int8, np.int16]


@st.composite
def dynamic_cases(draw):
    shape = draw(st.lists(st.integers(0, 5), min_size=0, max_size=3).map(tuple))
    sizes = tuple(draw(st.integers(0, n)) for n in shape)
    dtype = np.dtype(draw(st.sampled_from(START_DTYPES)))
    lo = 0 if dtype.kind == "u" else -12
    starts = [dtype.type(draw(st.integers(lo, 12))) for _ in shape]
    return shape, sizes, starts


@half_examples
@given(dynamic_cases(), st.sampled_from(DTYPES), seeds)
def test_dynamic_slice_clamps_start_indices(case, dtype, seed):
    shape, sizes, starts = case
    x = values(np.random.default_rng(seed), shape, dtype)
    # the primitive itself (starts clamped into [0, n - size]), and the wrapper, which first
    # wraps negative starts as Python does
    compile_and_compare(
        lambda x, *s: slicing.dynamic_slice_p.bind(x, *s, slice_sizes=sizes), x, *starts
    )
    compile_and_compare(lambda x, *s: lax.dynamic_slice(x, s, sizes), x, *starts)


@half_examples
@given(dynamic_cases(), st.sampled_from(DTYPES), seeds)
def test_dynamic_update_slice_clamps_start_indices(case, dtype, seed):
    shape, sizes, starts = case
    rng = np.random.default_rng(seed)
    x, u = values(rng, shape, dtype), values(rng, sizes, dtype)
    compile_and_compare(
        lambda x, u, *s: slicing.dynamic_update_slice_p.bind(x, u, *s), x, u, *starts
    )
    compile_and_compare(lambda x, u, *s: lax.dynamic_update_slice(x, u, s), x, u, *starts)


# -- indexing.py: gather and scatter --------------------------------------------------------------


@st.composite
def layouts(draw):
    """A random valid gather layout (the scatter layout is its mirror): operand shape, indices
    shape (with out-of-bounds values drawn later) and the dimension numbers."""
    ndim = draw(st.integers(0, 3))
    shape = draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim))
    nonempty = [d for d in range(ndim) if shape[d] > 0]
    batching = (
        draw(st.lists(st.sampled_from(nonempty), unique=True, max_size=1)) if nonempty else []
    )
    rest = [d for d in range(ndim) if d not in batching]
    start_map = draw(
        st.permutations(rest).flatmap(lambda p: st.integers(0, len(p)).map(lambda k: tuple(p[:k])))
    )
    collapsible = [d for d in rest if shape[d] > 0]
    collapsed = tuple(
        sorted(draw(st.lists(st.sampled_from(collapsible), unique=True)) if collapsible else [])
    )
    window = [d for d in rest if d not in collapsed]
    sizes = [1] * ndim
    for d in window:
        sizes[d] = draw(st.integers(0, shape[d]))
    batch_rank = draw(st.integers(len(batching), len(batching) + 2))
    batch_shape = draw(st.lists(st.integers(0, 3), min_size=batch_rank, max_size=batch_rank))
    idx_batching = tuple(draw(st.permutations(range(batch_rank)))[: len(batching)])
    for ob, ib in zip(batching, idx_batching):
        batch_shape[ib] = shape[ob]
    offset_dims = tuple(
        sorted(draw(st.permutations(range(batch_rank + len(window))))[: len(window)])
    )
    dn = GatherDimensionNumbers(offset_dims, collapsed, start_map, tuple(batching), idx_batching)
    return tuple(shape), tuple(batch_shape) + (len(start_map),), dn, tuple(sizes)


def random_indices(rng, operand_shape, indices_shape, dtype=np.int32):
    """Start indices in [-3, max dim + 3): out-of-bounds on both sides, duplicates likely."""
    hi = max(operand_shape or (1,)) + 3
    lo = 0 if np.dtype(dtype).kind == "u" else -3
    return rng.integers(lo, hi, size=indices_shape).astype(dtype)


@given(
    layouts(), st.sampled_from(MODES), st.sampled_from(DTYPES), st.sampled_from([None, 7]), seeds
)
def test_gather(layout, mode, dtype, fill_value, seed):
    shape, ishape, dn, sizes = layout
    rng = np.random.default_rng(seed)
    x = values(rng, shape, dtype)
    idx = random_indices(rng, shape, ishape)
    compile_and_compare(
        lambda x, i: lax.gather(x, i, dn, sizes, mode=mode, fill_value=fill_value), x, idx
    )


def _scatter_dnums(dn):
    return ScatterDimensionNumbers(
        dn.offset_dims,
        dn.collapsed_slice_dims,
        dn.start_index_map,
        dn.operand_batching_dims,
        dn.start_indices_batching_dims,
    )


def _updates_shape(dn, ishape, sizes, operand_ndim):
    window = iter(
        sizes[d]
        for d in range(operand_ndim)
        if d not in dn.collapsed_slice_dims and d not in dn.operand_batching_dims
    )
    batch = iter(ishape[:-1])
    rank = len(ishape) - 1 + len(dn.offset_dims)
    return tuple(next(window) if p in dn.offset_dims else next(batch) for p in range(rank))


@given(
    layouts(),
    st.sampled_from(MODES),
    st.sampled_from(sorted(SCATTERS)),
    st.sampled_from(DTYPES),
    seeds,
)
def test_scatter(layout, mode, name, dtype, seed):
    shape, ishape, dn, sizes = layout
    if name in ("scatter-add", "scatter-mul") and np.dtype(dtype).kind == "b":
        dtype = np.int32  # numeric only
    rng = np.random.default_rng(seed)
    x = values(rng, shape, dtype)
    idx = random_indices(rng, shape, ishape)
    upd = values(rng, _updates_shape(dn, ishape, sizes, len(shape)), dtype)
    sdn = _scatter_dnums(dn)
    exe = compile_and_compare(
        lambda x, i, u: SCATTERS[name](x, i, u, sdn, mode=mode),
        x,
        idx,
        upd,
        # min/max order -0.0 below +0.0 (JAX's and LLVM's minimum/maximum); numpy keeps the
        # update on ties, so only the values are compared for them
        exact="value" if name in ("scatter-min", "scatter-max") else True,
    )
    steps = kernels(exe)
    if x.size == 0:  # nothing to copy or update: loop nests without iterations are no kernels
        assert not steps
        return
    assert steps[0].parallel  # the copy of the operand
    assert all(not k.parallel for k in steps[1:]) and len(steps) <= 2


def test_scatter_duplicates_follow_the_impl_order():
    # overlapping windows: position 2 is written by all three index vectors (at window offsets
    # 2, 1, 0); the impl iterates index vectors, then windows, so the last vector wins
    x = np.zeros(5, np.float32)
    idx = np.array([[0], [1], [2]], np.int32)
    upd = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], np.float32)
    dn = ScatterDimensionNumbers((1,), (), (0,))
    exe = compile_and_compare(lambda x, i, u: lax.scatter(x, i, u, dn), x, idx, upd)
    np.testing.assert_array_equal(np.asarray(exe.call([x, idx, upd])[0]), [1, 4, 7, 8, 9])
    # float accumulation order is the impl's (sequential): 1e8 + 1 - 1e8 + 1 is not 2
    vals = np.array([1e8, 1, -1e8, 1], np.float32)
    dn1 = ScatterDimensionNumbers((), (0,), (0,))
    same = np.zeros((4, 1), np.int32)
    exe = compile_and_compare(
        lambda x, i, u: lax.scatter_add(x, i, u, dn1), np.zeros(2, np.float32), same, vals
    )
    assert np.asarray(exe.call([np.zeros(2, np.float32), same, vals])[0])[0] == np.float32(1)


def test_scatter_drops_out_of_bounds_windows_per_mode():
    x = np.arange(6, dtype=np.int32)
    idx = np.array([[-1], [4], [5], [2], [100]], np.int32)
    upd = np.full((5, 2), 10, np.int32)
    dn = ScatterDimensionNumbers((1,), (), (0,))
    for mode in MODES:
        compile_and_compare(
            lambda x, i, u, mode=mode: lax.scatter_add(x, i, u, dn, mode=mode), x, idx, upd
        )
    # a window wider than the operand can never fit: only the copy of the (empty) operand
    # would remain, and a loop nest without iterations is no kernel
    dn0 = ScatterDimensionNumbers((), (0,), (0,))
    exe = compile_and_compare(
        lambda x, i, u: lax.scatter_add(x, i, u, dn0, mode="clip"),
        np.zeros(0, np.float32),
        np.zeros((3, 1), np.int32),
        np.ones(3, np.float32),
    )
    assert not exe.program.steps


def test_extreme_indices_never_read_or_write_out_of_bounds():
    # the most negative and positive int32 starts: clamped (CLIP, PROMISE_IN_BOUNDS), filled or
    # dropped (FILL_OR_DROP), never used as an address
    x = np.arange(40, dtype=np.float32).reshape(8, 5)
    lo, hi = np.iinfo(np.int32).min, np.iinfo(np.int32).max
    idx = np.array([[lo, 0], [hi, 1], [3, lo], [7, hi], [2, 2]], np.int32)
    dn = GatherDimensionNumbers((1,), (0,), (0, 1))
    for mode in MODES:
        compile_and_compare(lambda x, i, mode=mode: lax.gather(x, i, dn, (1, 3), mode=mode), x, idx)
        for name, scatter in SCATTERS.items():
            compile_and_compare(
                lambda x, i, mode=mode, scatter=scatter: scatter(
                    x, i, fnp.ones((5, 3)), _scatter_dnums(dn), mode=mode
                ),
                x,
                idx,
                exact="value" if name in ("scatter-min", "scatter-max") else True,
            )
    for s in (np.int8(-128), np.int8(127), np.int32(lo), np.int32(hi)):
        compile_and_compare(lambda x, s: lax.dynamic_slice(x, (s, s), (3, 2)), x, s)
        compile_and_compare(lambda x, s: lax.dynamic_update_slice(x, x[:2, :4], (s, s)), x, s)


def test_scatter_fuses_the_operand_into_its_copy():
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    idx = np.array([[2], [0], [2]], np.int32)
    exe = compile_and_compare(
        lambda x, i: fnp.tanh(x).at[i[:, 0]].add(x[0] * 2), x, idx, exact=False
    )
    copy, scat = exe.program.steps
    assert copy.parallel and copy.reads() == {exe.program.inputs[0]}  # tanh computed in it
    assert not scat.parallel and scat.stores[0].combine == "add"
    # a column sum as the update would be recomputed for every index vector inside the
    # sequential loop nest: it is stored by its own (parallel) kernel first
    exe = compile_and_compare(
        lambda x, i: fnp.tanh(x).at[i[:, 0]].add(fnp.sum(x, 0) * 2), x, idx, exact=False
    )
    copy, col_sum, scat = exe.program.steps
    assert col_sum.parallel and col_sum.stores[0].buffer in scat.reads()
    assert not scat.parallel


# -- windowed_reductions.py -----------------------------------------------------------------------


@st.composite
def window_cases(draw):
    ndim = draw(st.integers(0, 3))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=ndim, max_size=ndim)))
    window = tuple(draw(st.integers(1, 3)) for _ in shape)
    strides = tuple(draw(st.integers(1, 3)) for _ in shape)
    base = tuple(draw(st.integers(1, 3)) for _ in shape)
    wdil = tuple(draw(st.integers(1, 2)) for _ in shape)
    padding = tuple((draw(st.integers(-1, 2)), draw(st.integers(-1, 2))) for _ in shape)
    return shape, window, strides, padding, base, wdil


@given(
    window_cases(),
    st.sampled_from(["sum", "max", "min"]),
    st.sampled_from([np.float32, np.int32, np.uint8, np.bool_]),
    seeds,
)
def test_reduce_window(case, op, dtype, seed):
    shape, window, strides, padding, base, wdil = case
    if op == "sum" and np.dtype(dtype).kind == "b":
        dtype = np.int32
    prim = {
        "sum": lax.reduce_window_sum_p,
        "max": lax.reduce_window_max_p,
        "min": lax.reduce_window_min_p,
    }[op]
    x = values(np.random.default_rng(seed), shape, dtype)
    exe = compile_and_compare(
        lambda x: prim.bind(
            x,
            window_dimensions=window,
            window_strides=strides,
            padding=padding,
            base_dilation=base,
            window_dilation=wdil,
        ),
        x,
        exact="value" if op != "sum" else False,
        rtol=1e-5,
        atol=1e-4,
    )
    assert len(exe.program.steps) <= 1  # one loop nest with the window reduction inline


def test_reduce_window_pools_fuse():
    x = np.random.default_rng(0).standard_normal((2, 9, 9, 3)).astype(np.float32)

    def pools(x):
        mx = lax.reduce_window(fnp.exp(x), -np.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
        av = lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4
        return mx, av

    exe = compile_and_compare(pools, x, exact=False)
    # one loop nest per pool, exp computed inside the max pool's window loop: no temporaries
    assert len(kernels(exe)) == len(exe.program.steps) == 2 and exe.program.scratch_bytes == 0


# -- float64 and 64-bit indices -------------------------------------------------------------------


def test_x64_dtypes_and_64_bit_indices(x64):
    rng = np.random.default_rng(1)
    x = values(rng, (4, 5), np.float64)
    big = np.uint64(2**63 + 5)  # wraps to a negative int64 as a gather index; clamps as a start
    for s in (np.int64(-3), np.int64(2), big, np.uint64(1)):
        compile_and_compare(
            lambda x, s: slicing.dynamic_slice_p.bind(x, s, s, slice_sizes=(2, 3)), x, s
        )
        compile_and_compare(
            lambda x, s: slicing.dynamic_update_slice_p.bind(x, x[:1, :2] * 3, s, s), x, s
        )
    dn = GatherDimensionNumbers((1,), (0,), (0,))
    for idt in (np.int64, np.uint64, np.uint32):
        idx = np.array([[1], [3], [7], [0]], idt)
        if idt == np.uint64:
            idx[2, 0] = big
        for mode in MODES:
            compile_and_compare(
                lambda x, i, mode=mode: lax.gather(x, i, dn, (1, 5), mode=mode), x, idx
            )
            compile_and_compare(
                lambda x, i, mode=mode: lax.scatter_add(x, i, x, _scatter_dnums(dn), mode=mode),
                x,
                idx,
            )
    compile_and_compare(
        lambda x: lax.reduce_window(x, 0.0, lax.add, (2, 3), (1, 2), "SAME"),
        x,
        exact=False,
        rtol=1e-12,
        atol=1e-12,
    )
    compile_and_compare(lambda x: lax.pad(x, -1.0, ((1, -2, 1), (-1, 0, 2))), x)


# -- fungrad.numpy functions built on these primitives --------------------------------------------

FNP_CASES = [
    ("basic slice", lambda x, i: x[1:3]),
    ("negative step", lambda x, i: x[::-1, ::-2]),
    ("strided", lambda x, i: x[:, 1::2]),
    ("integer array", lambda x, i: x[i]),
    ("integer array, axis 1", lambda x, i: x[:, i]),
    ("mixed", lambda x, i: x[i, 1:3]),
    ("scalar", lambda x, i: x[2, -1]),
    ("boolean mask", lambda x, i: fnp.where(x > 0, x, 0.0)[::2]),
    ("at add", lambda x, i: x.at[i].add(1.5)),
    ("at set", lambda x, i: x.at[i].set(fnp.arange(5.0))),
    ("at mul", lambda x, i: x.at[:, i].multiply(2.0)),
    ("at min", lambda x, i: x.at[i, 0].min(-1.0)),
    ("at max", lambda x, i: x.at[i].max(0.0)),
    ("at get fill", lambda x, i: x.at[i + 3].get(mode="fill", fill_value=-7.0)),
    ("pad constant", lambda x, i: fnp.pad(x, ((1, 2), (0, 3)), constant_values=9.0)),
    ("pad edge", lambda x, i: fnp.pad(x, 2, mode="edge")),
    ("pad reflect", lambda x, i: fnp.pad(x, ((1, 1), (2, 2)), mode="reflect")),
    ("concatenate", lambda x, i: fnp.concatenate([x, -x, x[:1]], axis=0)),
    ("stack", lambda x, i: fnp.stack([x, x * 2, x * 3, x * 4, x * 5, x * 6])),
    ("take", lambda x, i: fnp.take(x, i, axis=1)),
    ("take clip", lambda x, i: fnp.take(x, i + 4, axis=0, mode="clip")),
    ("take_along_axis", lambda x, i: fnp.take_along_axis(x, fnp.abs(i[:4, None]) % 5, axis=1)),
    ("roll", lambda x, i: fnp.roll(x, 2, axis=1)),
    ("diagonal", lambda x, i: fnp.diagonal(x)),
]


@pytest.mark.parametrize("name,f", FNP_CASES, ids=[c[0] for c in FNP_CASES])
def test_numpy_level_functions(name, f):
    rng = np.random.default_rng(3)
    x = values(rng, (4, 5), np.float32, specials=False)
    i = np.array([3, 0, -1, 3, 1], np.int32)
    compile_and_compare(f, x, i)


def test_numpy_indexing_fuses_into_one_kernel():
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    i = np.array([3, 0, 2], np.int32)
    exe = compile_and_compare(
        lambda x, i: fnp.exp(x[::-1, 1:4])[i] * 2 + fnp.pad(x, 1)[1:4, 0:3], x, i, exact=False
    )
    assert len(exe.program.steps) == 1


def test_gradients_and_vmap_compile():
    # grad of an integer-array read is a scatter-add; vmap of dynamic slices is a gather and
    # of dynamic updates a scatter, both with batching dimensions
    x = np.linspace(-2, 2, 20, dtype=np.float32).reshape(4, 5)
    i = np.array([3, 0, 3, 1], np.int32)
    compile_and_compare(fg.grad(lambda x, i: fnp.sum(fnp.sin(x[i]) * x[i])), x, i, exact=False)
    starts = np.array([2, -1, 0, 4], np.int32)
    compile_and_compare(fg.vmap(lambda r, s: lax.dynamic_slice(r, (s,), (3,))), x, starts)
    compile_and_compare(
        fg.vmap(lambda r, s: lax.dynamic_update_slice(r, r[:2] * 10, (s,))), x, starts
    )
    compile_and_compare(
        fg.grad(
            lambda x: fnp.sum(lax.reduce_window(x, -np.inf, lax.max, (2, 2), (1, 1), "SAME") ** 2)
        ),
        x,
        exact=False,
    )


@settings(max_examples=10)
@given(st.integers(0, 6), st.integers(0, 3), seeds)
def test_size_zero_and_scalar_edges(n, k, seed):
    rng = np.random.default_rng(seed)
    x = values(rng, (n,), np.float32)
    idx = rng.integers(-2, n + 2, size=(k, 1)).astype(np.int32)
    dn = GatherDimensionNumbers((), (0,), (0,))
    if n:
        compile_and_compare(lambda x, i: lax.gather(x, i, dn, (1,), mode="fill"), x, idx)
        compile_and_compare(
            lambda x, i: lax.scatter_max(x, i, x[:1] * 0 + fnp.zeros(k), _scatter_dnums(dn)),
            x,
            idx,
            exact="value",
        )
    s = np.float32(rng.standard_normal())
    compile_and_compare(lambda s: lax.reduce_window(s, 0.0, lax.add, (), (), ()), s)
    compile_and_compare(
        lambda s, i: lax.scatter(
            s, i[:, :0], fnp.full(k, 2.0), ScatterDimensionNumbers((), (), ())
        ),
        s,
        idx,
    )
    no_index = np.zeros((0,), np.int32)  # one index vector of length 0: 0-d loop nests
    compile_and_compare(
        lambda s: indexing.gather(s, no_index, GatherDimensionNumbers((), (), ()), ()), s
    )
    compile_and_compare(
        lambda s: lax.scatter_mul(s, no_index, s + 1.0, ScatterDimensionNumbers((), (), ())), s
    )
