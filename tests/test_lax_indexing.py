"""The gather and scatter primitives of fungrad.lax, against element-by-element loop references
written from XLA's operation semantics (random dimension numbers, batching dims, out-of-bounds
indices in every mode)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fungrad as fg
from fungrad import lax
from fungrad.lax import GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers
from tests.helpers import assert_array

MODES = [
    GatherScatterMode.CLIP,
    GatherScatterMode.FILL_OR_DROP,
    GatherScatterMode.PROMISE_IN_BOUNDS,
]


# -- a random gather / scatter layout -----------------------------------------------------------


@st.composite
def layouts(draw):
    """(operand_shape, indices_shape, window dims, collapsed, start_index_map, operand batching
    dims, indices batching dims, window sizes, positions of the window dims in the output)."""
    ndim = draw(st.integers(0, 3))
    shape = draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim))
    dims = list(range(ndim))
    nonempty = [d for d in dims if shape[d] > 0]
    batching = (
        draw(st.lists(st.sampled_from(nonempty), unique=True, max_size=1)) if nonempty else []
    )
    rest = [d for d in dims if d not in batching]
    start_map = draw(
        st.permutations(rest)
        .map(list)
        .flatmap(lambda p: st.integers(0, len(p)).map(lambda k: p[:k]))
    )
    collapsed = sorted(
        draw(st.lists(st.sampled_from([d for d in rest if shape[d] > 0]), unique=True))
        if any(shape[d] > 0 for d in rest)
        else []
    )
    window = [d for d in rest if d not in collapsed]
    sizes = [draw(st.integers(0, shape[d])) for d in window]
    batch_rank = draw(st.integers(len(batching), len(batching) + 2))
    batch_shape = draw(st.lists(st.integers(0, 3), min_size=batch_rank, max_size=batch_rank))
    idx_batching = draw(st.permutations(range(batch_rank)).map(lambda p: p[: len(batching)]))
    for ob, ib in zip(batching, idx_batching):
        batch_shape[ib] = shape[ob]
    out_rank = batch_rank + len(window)
    offset_dims = sorted(draw(st.permutations(range(out_rank)))[: len(window)])
    return dict(
        shape=tuple(shape),
        indices_shape=tuple(batch_shape) + (len(start_map),),
        window=window,
        collapsed=tuple(collapsed),
        start_map=tuple(start_map),
        batching=tuple(batching),
        idx_batching=tuple(idx_batching),
        sizes=sizes,
        offset_dims=tuple(offset_dims),
    )


def _random_indices(rng, lay):
    # Out-of-bounds starts (negative or past the end) are common, to exercise every mode.
    hi = max(lay["shape"] or (1,)) + 3
    return rng.integers(-3, hi, size=lay["indices_shape"]).astype(np.int32)


def _starts(lay, operand_shape, indices, batch_idx, window_sizes, mode):
    """Per operand dim, the start of the window for one batch element, and whether it is out
    of bounds (XLA semantics; CLIP clamps, the others report it)."""
    start = [0] * len(operand_shape)
    for k, d in enumerate(lay["start_map"]):
        start[d] = int(indices[tuple(batch_idx) + (k,)])
    for od, ib in zip(lay["batching"], lay["idx_batching"]):
        start[od] = batch_idx[ib]
    oob = any(not 0 <= start[d] <= operand_shape[d] - window_sizes[d] for d in lay["start_map"])
    return start, oob


def gather_ref(operand, indices, lay, mode, fill_value):
    shape = operand.shape
    slice_sizes = [1] * operand.ndim
    for d, s in zip(lay["window"], lay["sizes"]):
        slice_sizes[d] = s
    batch_shape = indices.shape[:-1]
    out_rank = len(batch_shape) + len(lay["window"])
    bi, wi = iter(batch_shape), iter(lay["sizes"])
    out_shape = tuple(next(wi) if p in lay["offset_dims"] else next(bi) for p in range(out_rank))
    out = np.zeros(out_shape, operand.dtype)
    for out_idx in np.ndindex(*out_shape):
        batch_idx = [out_idx[p] for p in range(out_rank) if p not in lay["offset_dims"]]
        window_idx = [out_idx[p] for p in lay["offset_dims"]]
        start, oob = _starts(lay, shape, indices, batch_idx, slice_sizes, mode)
        if mode == GatherScatterMode.FILL_OR_DROP and oob:
            out[out_idx] = fill_value
            continue
        # CLIP and PROMISE_IN_BOUNDS (the reference impl's definition) clamp.
        start = [min(max(s, 0), n - k) for s, n, k in zip(start, shape, slice_sizes)]
        for j, d in enumerate(lay["window"]):
            start[d] += window_idx[j]
        out[out_idx] = operand[tuple(start)]
    return out


def _gather_dnums(lay):
    return GatherDimensionNumbers(
        lay["offset_dims"], lay["collapsed"], lay["start_map"], lay["batching"], lay["idx_batching"]
    )


def _operand(rng, shape, dtype):
    kind = np.dtype(dtype).kind
    if kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(0 if kind == "u" else -50, 50, size=shape).astype(dtype)


@given(
    layouts(),
    st.sampled_from(MODES),
    st.sampled_from([np.float32, np.int32, np.uint32, np.bool_]),
    st.integers(0, 2**31),
)
def test_gather_matches_loop_reference(lay, mode, dtype, seed):
    rng = np.random.default_rng(seed)
    operand = _operand(rng, lay["shape"], dtype)
    indices = _random_indices(rng, lay)
    slice_sizes = [1] * len(lay["shape"])
    for d, s in zip(lay["window"], lay["sizes"]):
        slice_sizes[d] = s
    out = lax.gather(operand, indices, _gather_dnums(lay), slice_sizes, mode=mode)
    fill = {"f": np.nan, "i": np.iinfo(np.int32).min, "u": np.iinfo(np.uint32).max, "b": True}[
        np.dtype(dtype).kind
    ]
    assert_array(out, gather_ref(operand, indices, lay, mode, fill), dtype=dtype)


def test_gather_fill_value_and_defaults():
    x = np.arange(5, dtype=np.float32)
    dn = GatherDimensionNumbers((), (0,), (0,))
    idx = np.array([[1], [7], [-1]], np.int32)
    assert_array(lax.gather(x, idx, dn, (1,), mode="fill"), [1.0, np.nan, np.nan])
    assert_array(lax.gather(x, idx, dn, (1,), mode="fill", fill_value=-2.0), [1.0, -2.0, -2.0])
    # mode=None is PROMISE_IN_BOUNDS, which the reference impl defines as clamping (as XLA).
    assert_array(lax.gather(x, idx, dn, (1,)), [1.0, 4.0, 0.0])
    assert_array(lax.gather(x, idx, dn, (1,), mode="clip"), [1.0, 4.0, 0.0])
    for dtype, fill in [
        (np.int32, np.iinfo(np.int32).min),
        (np.uint32, 2**32 - 1),
        (np.bool_, True),
    ]:
        out = lax.gather(np.zeros(3, dtype), idx, dn, (1,), mode="fill")
        assert_array(out, np.array([0, fill, fill], dtype), dtype=dtype)


def test_gather_window_fill_is_whole_slice():
    # A window that is partly out of bounds is filled entirely (FILL_OR_DROP).
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    dn = GatherDimensionNumbers((1, 2), (), (0, 1))
    idx = np.array([[1, 1], [2, 2]], np.int32)
    out = lax.gather(x, idx, dn, (2, 2), mode="fill", fill_value=-1.0)
    assert_array(out, [x[1:3, 1:3], np.full((2, 2), -1.0)])
    clipped = lax.gather(x, idx, dn, (2, 2), mode="clip")
    assert_array(clipped, [x[1:3, 1:3], x[1:3, 2:4]])


# -- scatter ------------------------------------------------------------------------------------


def _scatter_case(lay, rng, dtype):
    """operand, indices, updates and ScatterDimensionNumbers for a layout (gather's transpose:
    update_window_dims = offset_dims, inserted_window_dims = collapsed dims)."""
    operand = _operand(rng, lay["shape"], dtype)
    indices = _random_indices(rng, lay)
    batch_shape = indices.shape[:-1]
    out_rank = len(batch_shape) + len(lay["window"])
    bi, wi = iter(batch_shape), iter(lay["sizes"])
    upd_shape = tuple(next(wi) if p in lay["offset_dims"] else next(bi) for p in range(out_rank))
    updates = _operand(rng, upd_shape, dtype)
    dn = ScatterDimensionNumbers(
        lay["offset_dims"], lay["collapsed"], lay["start_map"], lay["batching"], lay["idx_batching"]
    )
    return operand, indices, updates, dn


def scatter_ref(operand, indices, updates, lay, mode, combine):
    """Apply every update window in order; returns the result and, per operand element, the
    list of values written to it (plain scatter may keep any of them)."""
    out = np.array(operand, copy=True)
    written = {}
    sizes = [1] * operand.ndim
    for d, s in zip(lay["window"], lay["sizes"]):
        sizes[d] = s
    scatter_dims = [d for d in range(updates.ndim) if d not in lay["offset_dims"]]
    for u_idx in np.ndindex(*updates.shape):
        batch_idx = [u_idx[d] for d in scatter_dims]
        window_idx = [u_idx[d] for d in lay["offset_dims"]]
        start, oob = _starts(lay, operand.shape, indices, batch_idx, sizes, mode)
        if mode == GatherScatterMode.CLIP:
            start = [min(max(s, 0), n - k) for s, n, k in zip(start, operand.shape, sizes)]
        elif oob:
            continue  # FILL_OR_DROP and PROMISE_IN_BOUNDS drop out-of-bounds windows
        for j, d in enumerate(lay["window"]):
            start[d] += window_idx[j]
        t = tuple(start)
        out[t] = combine(out[t], updates[u_idx])
        written.setdefault(t, []).append(updates[u_idx])
    return out, written


COMBINES = {
    "scatter_add": (lax.scatter_add, lambda a, b: a + b),
    "scatter_mul": (lax.scatter_mul, lambda a, b: a * b),
    "scatter_min": (lax.scatter_min, min),
    "scatter_max": (lax.scatter_max, max),
}


@given(
    layouts(),
    st.sampled_from(MODES),
    st.sampled_from(sorted(COMBINES)),
    st.sampled_from([np.int32, np.float32]),
    st.integers(0, 2**31),
)
def test_combining_scatters_match_loop_reference(lay, mode, name, dtype, seed):
    rng = np.random.default_rng(seed)
    operand, indices, updates, dn = _scatter_case(lay, rng, dtype)
    if dtype == np.float32:  # small integers: sums and products are exact in any order
        operand, updates = np.round(operand * 3), np.round(updates * 3)
        operand, updates = np.asarray(operand, dtype), np.asarray(updates, dtype)
        if name == "scatter_mul":
            operand, updates = np.sign(operand), np.sign(updates)
    elif name == "scatter_mul":
        operand, updates = np.sign(operand), np.sign(updates)
    operand, updates = np.asarray(operand, dtype), np.asarray(updates, dtype)
    fn, combine = COMBINES[name]
    with np.errstate(all="ignore"):
        expected, _ = scatter_ref(operand, indices, updates, lay, mode, combine)
    assert_array(fn(operand, indices, updates, dn, mode=mode), expected, dtype=dtype)


@given(layouts(), st.sampled_from(MODES), st.integers(0, 2**31))
def test_scatter_writes_one_of_the_duplicates(lay, mode, seed):
    rng = np.random.default_rng(seed)
    operand, indices, updates, dn = _scatter_case(lay, rng, np.float32)
    ref, written = scatter_ref(operand, indices, updates, lay, mode, lambda a, b: b)
    out = np.asarray(lax.scatter(operand, indices, updates, dn, mode=mode))
    assert out.shape == operand.shape and out.dtype == np.float32
    for pos in np.ndindex(*operand.shape):
        if pos in written:
            assert out[pos] in written[pos]
        else:
            assert out[pos] == operand[pos]


def test_scatter_duplicates_accumulate_and_oob_drops():
    x = np.zeros(4, np.float32)
    dn = ScatterDimensionNumbers((), (0,), (0,))
    idx = np.array([[1], [1], [4], [-1], [3]], np.int32)
    upd = np.array([1.0, 2.0, 5.0, 7.0, 3.0], np.float32)
    assert_array(lax.scatter_add(x, idx, upd, dn), [0, 3, 0, 3])
    assert_array(lax.scatter_add(x, idx, upd, dn, mode="clip"), [7, 3, 0, 8])
    assert_array(lax.scatter_max(x, idx, upd, dn), [0, 2, 0, 3])
    assert_array(lax.scatter_min(x + 9, idx, upd, dn), [9, 1, 9, 3])
    assert_array(lax.scatter_mul(x + 2, idx, upd, dn), [2, 4, 2, 6])
    # NaN propagates through min/max
    assert_array(lax.scatter_max(x, idx[:1], np.array([np.nan], np.float32), dn), [0, np.nan, 0, 0])


def test_gather_and_scatter_dtype_and_weak_type():
    x = lax.full((3,), 1.0)  # weakly typed
    dn = GatherDimensionNumbers((), (0,), (0,))
    out = lax.gather(x, np.array([[0]], np.int32), dn, (1,))
    assert out.weak_type and out.dtype == np.float32
    sdn = ScatterDimensionNumbers((), (0,), (0,))
    s = lax.scatter_add(x, np.array([[0]], np.int32), np.ones(1, np.float32), sdn)
    assert s.weak_type and s.dtype == np.float32


# -- errors, modes, jaxprs ------------------------------------------------------------------------


def test_mode_from_any():
    assert GatherScatterMode.from_any("clip") is GatherScatterMode.CLIP
    assert GatherScatterMode.from_any("fill") is GatherScatterMode.FILL_OR_DROP
    assert GatherScatterMode.from_any("drop") is GatherScatterMode.FILL_OR_DROP
    assert GatherScatterMode.from_any(None) is GatherScatterMode.FILL_OR_DROP
    assert GatherScatterMode.from_any("promise_in_bounds") is GatherScatterMode.PROMISE_IN_BOUNDS
    with pytest.raises(ValueError, match="Unknown gather mode"):
        GatherScatterMode.from_any("wrap")


def test_gather_bad_inputs_raise():
    x = np.zeros((3, 4), np.float32)
    dn = GatherDimensionNumbers((1,), (0,), (0,))
    with pytest.raises(TypeError, match="gather: indices must have an integer dtype"):
        lax.gather(x, np.zeros((2, 1), np.float32), dn, (1, 4))
    with pytest.raises(TypeError, match="gather: slice_sizes"):
        lax.gather(x, np.zeros((2, 1), np.int32), dn, (1,))
    with pytest.raises(TypeError, match="gather: slice size 5"):
        lax.gather(x, np.zeros((2, 1), np.int32), dn, (1, 5))
    with pytest.raises(TypeError, match="gather: start_index_map"):
        lax.gather(x, np.zeros((2, 2), np.int32), dn, (1, 4))
    with pytest.raises(TypeError, match="gather: collapsed or batching operand dimension 0"):
        lax.gather(x, np.zeros((2, 1), np.int32), dn, (2, 4))
    with pytest.raises(TypeError, match="gather: offset_dims must be sorted"):
        lax.gather(x, np.zeros((2, 1), np.int32), GatherDimensionNumbers((2, 1), (), (0,)), (1, 4))
    with pytest.raises(TypeError, match="GatherDimensionNumbers"):
        lax.gather(x, np.zeros((2, 1), np.int32), ((1,), (0,), (0,)), (1, 4))


def test_scatter_bad_inputs_raise():
    x = np.zeros((3, 4), np.float32)
    dn = ScatterDimensionNumbers((1,), (0,), (0,))
    idx = np.zeros((2, 1), np.int32)
    with pytest.raises(TypeError, match="scatter-add: updates dtype int32 must equal"):
        lax.scatter_add(x, idx, np.zeros((2, 4), np.int32), dn)
    with pytest.raises(TypeError, match="scatter: updates must have rank"):
        lax.scatter(x, idx, np.zeros((2,), np.float32), dn)
    with pytest.raises(TypeError, match="scatter-max: updates window dimension 1 has size 5"):
        lax.scatter_max(x, idx, np.zeros((2, 5), np.float32), dn)
    with pytest.raises(TypeError, match="scatter-min: the scatter dimensions of updates"):
        lax.scatter_min(x, idx, np.zeros((3, 4), np.float32), dn)
    with pytest.raises(TypeError, match="scatter-mul does not accept dtype bool"):
        lax.scatter_mul(
            np.zeros(3, bool), idx, np.zeros((2,), bool), ScatterDimensionNumbers((), (0,), (0,))
        )
    with pytest.raises(TypeError, match="scatter: indices must have an integer dtype"):
        lax.scatter(x, idx.astype(np.float32), np.zeros((2, 4), np.float32), dn)


def test_make_jaxpr_prints_gather_and_scatter():
    x = np.arange(6, dtype=np.float32)
    idx = np.array([[4], [1]], np.int32)
    gdn = GatherDimensionNumbers((), (0,), (0,))
    sdn = ScatterDimensionNumbers((), (0,), (0,))

    def f(x, i):
        g = lax.gather(x, i, gdn, (1,), mode="fill", fill_value=-1.0)
        return lax.scatter_add(x, i, g, sdn), lax.scatter(x, i, g, sdn, mode="clip")

    jaxpr = fg.make_jaxpr(f)(x, idx)
    text = str(jaxpr)
    assert (
        "gather[dimension_numbers=GatherDimensionNumbers(offset_dims=(), "
        "collapsed_slice_dims=(0,), start_index_map=(0,), operand_batching_dims=(), "
        "start_indices_batching_dims=()) fill_value=-1.0 indices_are_sorted=False "
        "mode=GatherScatterMode.FILL_OR_DROP slice_sizes=(1,) unique_indices=False]"
    ) in text
    assert "scatter-add[dimension_numbers=ScatterDimensionNumbers(update_window_dims=()" in text
    assert "mode=GatherScatterMode.CLIP" in text
    for got, want in zip(jaxpr(x, idx), f(x, idx)):
        assert_array(got, np.asarray(want))
    assert_array(jaxpr(x, idx)[0], [0, 2, 2, 3, 8, 5])


def test_gather_fill_value_must_be_static_scalar():
    x = np.arange(3, dtype=np.float32)
    dn = GatherDimensionNumbers((), (0,), (0,))
    idx = np.array([[5]], np.int32)
    assert_array(lax.gather(x, idx, dn, (1,), mode="fill", fill_value=np.float32(2)), [2.0])
    assert_array(lax.gather(x, idx, dn, (1,), mode="fill", fill_value=lax.full((), 3.0)), [3.0])
    with pytest.raises(TypeError, match="gather: fill_value must be a static scalar"):
        lax.gather(x, idx, dn, (1,), mode="fill", fill_value=np.ones(2))
