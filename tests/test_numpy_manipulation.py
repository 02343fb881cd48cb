"""fungrad.numpy shape manipulation against numpy: reshaping, axis permutations, broadcasting,
joining (with JAX's dtype promotion), splitting, tile/repeat, flips/rolls, pad in every mode,
diff/ediff1d, append/delete/insert, resize, trim_zeros, block. Random shapes include 0-d and
size-0 arrays; axes include negative ones."""

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.testing import strategies as fst
from tests.helpers import assert_array

DTYPES = [np.float32, np.int32, np.bool_, np.uint8, np.float16]


def exact(actual, expected, dtype=None):
    expected = np.asarray(expected)
    assert_array(actual, expected, dtype=dtype or expected.dtype, rtol=0, atol=0)


@st.composite
def arrays(draw, min_dims=0, max_dims=4, min_side=0, max_side=4, dtypes=DTYPES):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(fst.shapes(min_dims, max_dims, min_side, max_side))
    return draw(fst.arrays(dtype, shape))


def axis_of(ndim):
    return st.integers(-ndim, ndim - 1)


# -- reshape and friends ----------------------------------------------------------------------


@given(arrays(), st.data())
def test_reshape_matches_numpy(x, data):
    dims = list(data.draw(st.permutations(x.shape)))
    dims = [d for d in dims if d != 1] + [1] * data.draw(st.integers(0, 2))
    if dims and 0 not in dims and data.draw(st.booleans()):
        dims[data.draw(st.integers(0, len(dims) - 1))] = -1
    order = data.draw(st.sampled_from(["C", "F", "A"]))
    exact(fnp.reshape(x, tuple(dims), order=order), np.reshape(x, tuple(dims), order=order))
    exact(fnp.ravel(x, order=order), np.ravel(x, order=order))
    exact(fnp.reshape(x, -1), x.reshape(-1))


def test_reshape_errors():
    with pytest.raises(
        TypeError,
        match=r"reshape: cannot reshape array of shape \(10,\) "
        r"\(size 10\) into shape \(3, 4\)",
    ):
        fnp.reshape(fnp.arange(10), (3, 4))
    with pytest.raises(TypeError, match="only specify one unknown"):
        fnp.reshape(fnp.arange(10), (-1, -1))
    with pytest.raises(TypeError, match="reshape: cannot reshape"):
        fnp.reshape(fnp.zeros(0), (-1, 0))
    with pytest.raises(TypeError, match="reshape: negative"):
        fnp.reshape(fnp.zeros(4), (-2, -2))
    with pytest.raises(ValueError, match="order"):
        fnp.reshape(fnp.zeros(4), (2, 2), order="K")
    with pytest.raises(TypeError, match="reshape"):
        fnp.reshape([1, 2], (2,))
    # a weak input stays weak
    assert fnp.reshape(fnp.full((2,), 1.0), (2, 1)).weak_type


@given(arrays(), st.data())
def test_transpose_family_matches_numpy(x, data):
    nd = x.ndim
    exact(fnp.transpose(x), np.transpose(x))
    perm = data.draw(st.permutations(range(nd)))
    perm = [p - nd if data.draw(st.booleans()) else p for p in perm]
    exact(fnp.transpose(x, perm), np.transpose(x, perm))
    exact(fnp.permute_dims(x, perm), np.permute_dims(x, perm))
    if nd:
        a1, a2 = data.draw(axis_of(nd)), data.draw(axis_of(nd))
        exact(fnp.swapaxes(x, a1, a2), np.swapaxes(x, a1, a2))
        k = data.draw(st.integers(0, nd))
        src = data.draw(st.lists(axis_of(nd), min_size=k, max_size=k, unique_by=lambda a: a % nd))
        dst = data.draw(st.lists(axis_of(nd), min_size=k, max_size=k, unique_by=lambda a: a % nd))
        exact(fnp.moveaxis(x, src, dst), np.moveaxis(x, src, dst))
        start = data.draw(st.integers(-nd, nd))
        exact(fnp.rollaxis(x, a1, start), np.rollaxis(x, a1, start))
    if nd >= 2:
        exact(fnp.matrix_transpose(x), np.matrix_transpose(x))


def test_transpose_errors():
    with pytest.raises(TypeError, match="transpose: axes"):
        fnp.transpose(fnp.zeros((2, 3)), (0, 0))
    with pytest.raises(ValueError, match="transpose"):
        fnp.transpose(fnp.zeros((2, 3)), (0, 2))
    with pytest.raises(ValueError, match="matrix_transpose"):
        fnp.matrix_transpose(fnp.zeros(3))
    with pytest.raises(ValueError, match="moveaxis"):
        fnp.moveaxis(fnp.zeros((2, 3)), (0, 1), 0)


@given(arrays(max_dims=3), st.data())
def test_expand_dims_squeeze_match_numpy(x, data):
    k = data.draw(st.integers(0, 3))
    out_nd = x.ndim + k
    axes = (
        data.draw(st.lists(axis_of(out_nd), min_size=k, max_size=k, unique_by=lambda a: a % out_nd))
        if out_nd
        else []
    )
    y = np.expand_dims(x, tuple(axes))
    exact(fnp.expand_dims(x, tuple(axes)), y)
    if len(axes) == 1:
        exact(fnp.expand_dims(x, axes[0]), y)
    exact(fnp.squeeze(y), np.squeeze(y))
    ones = [i for i, d in enumerate(y.shape) if d == 1]
    some = data.draw(st.lists(st.sampled_from(ones), unique=True)) if ones else []
    exact(fnp.squeeze(y, tuple(some)), np.squeeze(y, tuple(some)))


def test_squeeze_and_expand_dims_errors():
    with pytest.raises(ValueError, match=r"squeeze: cannot squeeze axis 0 of size 2"):
        fnp.squeeze(fnp.zeros((2, 1)), 0)
    with pytest.raises(ValueError, match="squeeze: repeated axis"):
        fnp.squeeze(fnp.zeros((1, 2)), (0, 0))
    with pytest.raises(ValueError, match="expand_dims: repeated axis"):
        fnp.expand_dims(fnp.zeros(2), (0, 0))
    with pytest.raises(np.exceptions.AxisError, match="expand_dims"):
        fnp.expand_dims(fnp.zeros(2), 3)
    assert fnp.squeeze(fnp.full((1, 1), 1.0)).weak_type


def test_shape_queries():
    x = fnp.zeros((2, 3, 4))
    assert fnp.shape(x) == (2, 3, 4) and fnp.ndim(x) == 3 and fnp.size(x) == 24
    assert fnp.size(x, 1) == 3 and fnp.size(x, (0, -1)) == 8
    assert fnp.shape([[1, 2]]) == (1, 2) and fnp.ndim(3.0) == 0 and fnp.size(3.0) == 1

    def f(t):
        assert fnp.shape(t) == (2,) and fnp.ndim(t) == 1 and fnp.size(t) == 2
        return t

    fg.make_jaxpr(f)(np.zeros(2, np.float32))


# -- broadcasting -------------------------------------------------------------------------------


@given(fst.broadcastable_shapes(3, max_dims=4), st.data())
def test_broadcasting_matches_numpy(shapes, data):
    xs = [data.draw(fst.arrays(data.draw(st.sampled_from(DTYPES)), s)) for s in shapes]
    common = np.broadcast_shapes(*shapes)
    assert fnp.broadcast_shapes(*shapes) == common
    for g, w in zip(fnp.broadcast_arrays(*xs), np.broadcast_arrays(*xs)):
        exact(g, w)  # dtypes are not promoted
    exact(fnp.broadcast_to(xs[0], common), np.broadcast_to(xs[0], common))


def test_broadcasting_scalars_and_errors():
    out = fnp.broadcast_to(1.0, (2,))
    exact(out, np.ones(2, np.float32))
    assert out.weak_type
    assert fnp.broadcast_shapes(2, (3, 1)) == (3, 2)
    with pytest.raises(ValueError, match="broadcast_shapes: incompatible shapes"):
        fnp.broadcast_shapes((2,), (3,))
    with pytest.raises(ValueError, match="broadcast_to"):
        fnp.broadcast_to(fnp.ones(3), (2,))
    with pytest.raises(ValueError, match="broadcast_arrays"):
        fnp.broadcast_arrays(fnp.ones(3), fnp.ones(2))


@given(st.lists(arrays(max_dims=4), min_size=1, max_size=3))
def test_atleast_nd_match_numpy(xs):
    for ours, theirs in (
        (fnp.atleast_1d, np.atleast_1d),
        (fnp.atleast_2d, np.atleast_2d),
        (fnp.atleast_3d, np.atleast_3d),
    ):
        got, want = ours(*xs), theirs(*xs)
        if len(xs) == 1:
            exact(got, want)
        else:
            for g, w in zip(got, want):
                exact(g, w)
    assert fnp.atleast_1d(1.0).weak_type


# -- joining ----------------------------------------------------------------------------------

# JAX's promotion for concatenate/stack (x64 off): numpy would give int32+float16 -> float64,
# uint8+int8 -> int16 (same), int32+uint32 -> int64; JAX gives float16 and int32 (int64
# canonicalised to int32).
JAX_PROMOTION = [
    ((np.int32, np.float16), np.float16),
    ((np.int32, np.uint32), np.int32),
    ((np.bool_, np.int8), np.int8),
    ((np.uint8, np.int8), np.int16),
    ((np.int32, np.float32), np.float32),
    ((np.bool_, np.bool_), np.bool_),
    ((np.uint8, np.uint32), np.uint32),
    ((np.float16, np.float32), np.float32),
    ((np.uint8, np.float16), np.float16),
]


@given(fst.shapes(min_dims=1, max_dims=3), st.integers(1, 3), st.data())
def test_concatenate_matches_numpy(shape, n, data):
    nd = len(shape)
    axis = data.draw(axis_of(nd))
    xs = []
    for _ in range(n):
        s = list(shape)
        s[axis] = data.draw(st.integers(0, 3))
        xs.append(data.draw(fst.arrays(data.draw(st.sampled_from(DTYPES)), tuple(s))))
    want_dt = fg.numpy.result_type(*[x.dtype for x in xs])
    exact(
        fnp.concatenate(xs, axis),
        np.concatenate([x.astype(want_dt) for x in xs], axis),
        dtype=want_dt,
    )
    exact(fnp.concat(xs, axis=axis), np.concatenate([x.astype(want_dt) for x in xs], axis))
    exact(fnp.concatenate(xs, None), np.concatenate([x.astype(want_dt).ravel() for x in xs]))
    exact(
        fnp.concatenate(xs, axis, dtype=np.float32),
        np.concatenate([x.astype(np.float32) for x in xs], axis),
    )


@pytest.mark.parametrize("dts,want", JAX_PROMOTION)
def test_concatenate_and_stack_follow_jax_promotion(dts, want):
    xs = [np.ones(2, dt) for dt in dts]
    assert fnp.concatenate(xs).dtype == want
    assert fnp.stack(xs).dtype == want
    assert fnp.hstack(xs).dtype == want


def test_concatenate_weak_types_and_errors():
    out = fnp.concatenate([fnp.array(1.0, ndmin=1), fnp.array(2, ndmin=1)])
    exact(out, np.array([1, 2], np.float32))
    assert out.weak_type
    assert not fnp.concatenate([fnp.array(1.0, ndmin=1), fnp.zeros(1)]).weak_type
    with pytest.raises(ValueError, match="concatenate: need at least one"):
        fnp.concatenate([])
    with pytest.raises(ValueError, match="concatenate: zero-dimensional"):
        fnp.concatenate([fnp.array(1), fnp.array(2)])
    with pytest.raises(
        TypeError,
        match=r"concatenate: array shapes must match except along "
        r"axis 0, got \(2, 3\), \(2, 4\)",
    ):
        fnp.concatenate([fnp.ones((2, 3)), fnp.ones((2, 4))])
    with pytest.raises(TypeError, match="concatenate"):
        fnp.concatenate([fnp.ones((2, 3)), fnp.ones((2,))])
    with pytest.raises(TypeError, match="concatenate"):
        fnp.concatenate([[1, 2], [3]])
    exact(fnp.concatenate(np.arange(6).reshape(2, 3)), np.arange(6, dtype=np.int32))
    exact(
        fnp.concatenate(np.arange(12).reshape(2, 3, 2), axis=-1),
        np.concatenate(list(np.arange(12, dtype=np.int32).reshape(2, 3, 2)), axis=-1),
    )


@given(fst.shapes(max_dims=3), st.integers(1, 3), st.data())
def test_stacking_family_matches_numpy(shape, n, data):
    dt = data.draw(st.sampled_from(DTYPES))
    xs = [data.draw(fst.arrays(dt, shape)) for _ in range(n)]
    axis = data.draw(axis_of(len(shape) + 1))
    exact(fnp.stack(xs, axis), np.stack(xs, axis))
    exact(fnp.stack(np.stack(xs), axis), np.stack(xs, axis))  # one array: its slices
    exact(fnp.vstack(xs), np.vstack(xs))
    exact(fnp.row_stack(xs), np.vstack(xs))
    exact(fnp.hstack(xs), np.hstack(xs))
    exact(fnp.dstack(xs), np.dstack(xs))
    if len(shape) <= 1 or shape[0] > 0:
        exact(fnp.column_stack(xs), np.column_stack(xs))
    got = fnp.unstack(np.stack(xs, axis), axis=axis)
    assert isinstance(got, tuple) and len(got) == n
    for g, w in zip(got, xs):
        exact(g, w)


def test_stack_errors_and_scalars():
    with pytest.raises(
        ValueError,
        match=r"stack: all input arrays must have the same shape, "
        r"got \(2, 3\), \(2, 4\)",
    ):
        fnp.stack([fnp.ones((2, 3)), fnp.ones((2, 4))])
    with pytest.raises(ValueError, match="stack: need at least one"):
        fnp.stack([])
    out = fnp.stack([1, 2.0])
    exact(out, np.array([1, 2], np.float32))
    assert out.weak_type
    exact(fnp.hstack([1, 2]), np.array([1, 2], np.int32))


def test_block_matches_numpy():
    a, b, c = np.ones((2, 2)), np.zeros((2, 1)), np.full((1, 3), 2.0)
    exact(fnp.block([[a, b], [c]]), np.block([[a, b], [c]]).astype(np.float32))
    exact(fnp.block([1, 2, 3]), np.block([1, 2, 3]).astype(np.int32))
    exact(
        fnp.block([[np.arange(2)], [np.arange(2)]]),
        np.block([[np.arange(2)], [np.arange(2)]]).astype(np.int32),
    )
    with pytest.raises(ValueError, match="block"):
        fnp.block([[a], b])
    with pytest.raises(ValueError, match="block"):
        fnp.block((a, b))


# -- splitting ----------------------------------------------------------------------------------


@given(arrays(min_dims=1, max_dims=3, max_side=6), st.data())
def test_split_matches_numpy(x, data):
    axis = data.draw(axis_of(x.ndim))
    n = x.shape[axis]
    sections = data.draw(st.integers(1, 7))
    want = np.array_split(x, sections, axis)
    got = fnp.array_split(x, sections, axis)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        exact(g, w)
    if n % sections == 0:
        for g, w in zip(fnp.split(x, sections, axis), np.split(x, sections, axis)):
            exact(g, w)
    # index lists, including negative, out-of-range and decreasing ones (numpy's slicing rules)
    cuts = data.draw(st.lists(st.integers(-n - 2, n + 2), max_size=4))
    for ours in (fnp.split, fnp.array_split):
        got = ours(x, cuts, axis)
        want = np.split(x, cuts, axis)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            exact(g, w)
    for g, w in zip(fnp.split(x, np.array(cuts, dtype=np.int32), axis), np.split(x, cuts, axis)):
        exact(g, w)


def test_hsplit_vsplit_dsplit():
    x = np.arange(24).reshape(2, 4, 3).astype(np.float32)
    for ours, theirs, arg in (
        (fnp.hsplit, np.hsplit, 2),
        (fnp.vsplit, np.vsplit, [1]),
        (fnp.dsplit, np.dsplit, 3),
    ):
        for g, w in zip(ours(x, arg), theirs(x, arg)):
            exact(g, w)
    for g, w in zip(fnp.hsplit(np.arange(4), 2), np.hsplit(np.arange(4), 2)):
        exact(g, w.astype(np.int32))
    with pytest.raises(ValueError, match="split: an axis of size 10 cannot be split into 3"):
        fnp.split(fnp.arange(10), 3)
    with pytest.raises(ValueError, match="array_split: number of sections must be positive"):
        fnp.array_split(fnp.arange(10), 0)
    with pytest.raises(ValueError, match="vsplit: ary must be at least 2-D"):
        fnp.vsplit(fnp.arange(4), 2)
    with pytest.raises(ValueError, match="dsplit: ary must be at least 3-D"):
        fnp.dsplit(fnp.ones((2, 2)), 2)
    with pytest.raises(fg.ConcretizationTypeError, match="indices_or_sections argument of split"):
        fg.make_jaxpr(lambda i: fnp.split(fnp.arange(4), i))(2)


# -- tile and repeat ---------------------------------------------------------------------------


@given(
    arrays(max_dims=3, max_side=3),
    st.one_of(st.integers(0, 3), st.lists(st.integers(0, 3), max_size=4)),
)
def test_tile_matches_numpy(x, reps):
    exact(fnp.tile(x, reps), np.tile(x, reps))


@given(arrays(max_dims=3), st.data())
def test_repeat_matches_numpy(x, data):
    r = data.draw(st.integers(0, 3))
    exact(fnp.repeat(x, r), np.repeat(x, r))
    if x.ndim:
        axis = data.draw(axis_of(x.ndim))
        exact(fnp.repeat(x, r, axis), np.repeat(x, r, axis))
        reps = np.array(
            data.draw(st.lists(st.integers(0, 3), min_size=x.shape[axis], max_size=x.shape[axis])),
            dtype=np.int32,
        )
        exact(fnp.repeat(x, reps, axis), np.repeat(x, reps, axis))
        exact(fnp.repeat(x, fnp.asarray(reps), axis), np.repeat(x, reps, axis))
        total = data.draw(st.integers(0, 8))
        got = fnp.repeat(x, reps, axis, total_repeat_length=total)
        exact(got, _repeat_total(x, reps, axis, total))


def _repeat_total(x, reps, axis, total):
    """JAX's documented total_repeat_length rule: cut, or pad with the last element."""
    out = np.repeat(x, reps, axis)
    if x.shape[axis] == 0:
        return out
    out = np.take(out, np.arange(min(total, out.shape[axis])), axis)
    extra = total - out.shape[axis]
    last = np.take(x, [x.shape[axis] - 1], axis)
    return np.concatenate([out] + [last] * extra, axis)


def test_repeat_many_segments_and_traced_counts():
    x = np.arange(30, dtype=np.float32).reshape(10, 3)
    reps = np.array([2, 0, 1, 3, 1, 0, 2, 1, 1, 2])
    exact(fnp.repeat(x, reps, 0), np.repeat(x, reps, 0))  # many segments: one gather
    jaxpr = fg.make_jaxpr(lambda r: fnp.repeat(x, r, 0, total_repeat_length=12))(reps)
    exact(jaxpr(reps)[0], np.repeat(x, reps, 0)[:12])
    r2 = np.array([1, 1, 1, 1, 1, 0, 0, 0, 0, 0])
    exact(jaxpr(r2)[0], _repeat_total(x, r2, 0, 12))
    with pytest.raises(fg.ConcretizationTypeError, match="repeats argument of repeat"):
        fg.make_jaxpr(lambda r: fnp.repeat(x, r, 0))(reps)


def test_repeat_errors_and_weak_types():
    with pytest.raises(ValueError, match="repeat: repeats of shape"):
        fnp.repeat(fnp.arange(3), fnp.array([1, 2]))
    with pytest.raises(ValueError, match="repeat: repeats must be non-negative"):
        fnp.repeat(fnp.arange(3), -1)
    with pytest.raises(TypeError, match="repeat: repeats must be integers"):
        fnp.repeat(fnp.arange(3), 1.5)
    out = fnp.repeat(1.0, 3)
    exact(out, np.ones(3, np.float32))
    assert out.weak_type


# -- flips, rolls, rotations --------------------------------------------------------------------


@given(arrays(), st.data())
def test_flips_match_numpy(x, data):
    exact(fnp.flip(x), np.flip(x))
    if x.ndim:
        axes = data.draw(st.lists(axis_of(x.ndim), unique_by=lambda a: a % x.ndim))
        exact(fnp.flip(x, tuple(axes)), np.flip(x, tuple(axes)))
        exact(fnp.flipud(x), np.flipud(x))
    if x.ndim >= 2:
        exact(fnp.fliplr(x), np.fliplr(x))


@given(arrays(), st.data())
def test_roll_matches_numpy(x, data):
    shift = data.draw(st.integers(-7, 7))
    exact(fnp.roll(x, shift), np.roll(x, shift))
    if x.ndim:
        axes = data.draw(st.lists(axis_of(x.ndim), min_size=1, max_size=3))
        shifts = data.draw(st.lists(st.integers(-7, 7), min_size=len(axes), max_size=len(axes)))
        exact(fnp.roll(x, shifts, axes), np.roll(x, shifts, axes))
        exact(fnp.roll(x, shift, axes), np.roll(x, shift, axes))
        jaxpr = fg.make_jaxpr(lambda s: fnp.roll(x, s, axes))(np.int32(shift))
        exact(jaxpr(np.int32(shift))[0], np.roll(x, shift, axes))
        assert "dynamic_slice" in str(jaxpr) or x.size == 0


@given(arrays(min_dims=2), st.integers(-5, 5), st.data())
def test_rot90_matches_numpy(x, k, data):
    a1 = data.draw(axis_of(x.ndim))
    a2 = data.draw(axis_of(x.ndim).filter(lambda a: a % x.ndim != a1 % x.ndim))
    exact(fnp.rot90(x, k, (a1, a2)), np.rot90(x, k, (a1, a2)))
    exact(fnp.rot90(x), np.rot90(x))


def test_flip_roll_rot90_errors():
    with pytest.raises(ValueError, match="fliplr"):
        fnp.fliplr(fnp.ones(3))
    with pytest.raises(ValueError, match="rot90: axes must be different"):
        fnp.rot90(fnp.ones((2, 2)), 1, (0, 0))
    with pytest.raises(ValueError, match="rot90"):
        fnp.rot90(fnp.ones(2))
    with pytest.raises(ValueError, match="roll"):
        fnp.roll(fnp.ones((2, 2)), [1, 2, 3], [0, 1])
    with pytest.raises(TypeError, match="roll: shift must be"):
        fnp.roll(fnp.ones(3), np.ones((2, 2), np.int32), 0)  # (a float shift is converted)


# -- pad ------------------------------------------------------------------------------------

MODES = [
    "constant",
    "edge",
    "wrap",
    "reflect",
    "symmetric",
    "linear_ramp",
    "maximum",
    "minimum",
    "mean",
]


@st.composite
def pad_widths(draw, ndim, max_width=5):
    form = draw(st.sampled_from(["int", "pair", "per_axis"]))
    w = st.integers(0, max_width)
    if form == "int" or ndim == 0:  # numpy rejects the empty per-axis form () as non-integer
        return draw(w)
    if form == "pair":
        return (draw(w), draw(w))
    return tuple((draw(w), draw(w)) for _ in range(ndim))


@given(st.sampled_from(MODES), st.sampled_from([np.float32, np.int32]), st.data())
def test_pad_matches_numpy(mode, dt, data):
    min_side = 0 if mode in ("constant",) else 1
    x = data.draw(fst.arrays(dt, fst.shapes(0, 3, min_side, 4)))
    widths = data.draw(pad_widths(x.ndim))
    kwargs = {}
    if mode == "constant" and data.draw(st.booleans()):
        kwargs["constant_values"] = data.draw(
            st.one_of(st.integers(-5, 5), st.tuples(st.integers(-5, 5), st.integers(-5, 5)))
        )
    if mode in ("reflect", "symmetric"):
        kwargs["reflect_type"] = data.draw(st.sampled_from(["even", "odd"]))
    if mode == "linear_ramp" and data.draw(st.booleans()):
        kwargs["end_values"] = data.draw(st.tuples(st.integers(-9, 9), st.integers(-9, 9)))
    if mode in ("maximum", "minimum", "mean") and data.draw(st.booleans()):
        kwargs["stat_length"] = data.draw(st.integers(1, 4))
    if mode == "mean" and dt == np.int32:
        # numpy's int mean goes through float64; ours through float32: same for small ints
        x = x % 50
    got = fnp.pad(x, widths, mode=mode, **kwargs)
    want = np.pad(x, widths, mode=mode, **kwargs)
    # float results of arithmetic modes may differ from numpy's by rounding
    if dt == np.float32 and (
        mode in ("mean", "linear_ramp") or kwargs.get("reflect_type") == "odd"
    ):
        assert_array(got, want, dtype=dt, rtol=1e-5, atol=1e-5)
    elif mode == "linear_ramp":
        # JAX's integer ramps floor a float32 linspace, so 1.9999999 can become 1 where numpy
        # (float64) gets 2: off by at most one, as in JAX
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.abs(np.asarray(got).astype(np.int64) - want).max(initial=0) <= 1
    else:
        exact(got, want)


def test_pad_constant_value_forms_and_weak_types():
    x = np.zeros((2, 2), np.float32)
    for cv in (7, (1, 2), ((1, 2),), ((1, 2), (3, 4)), np.array([5.0])):
        exact(fnp.pad(x, 1, constant_values=cv), np.pad(x, 1, constant_values=cv))
    exact(
        fnp.pad(np.arange(3), 1, constant_values=2.7),
        np.pad(np.arange(3), 1, constant_values=2.7).astype(np.int32),
    )
    out = fnp.pad(fnp.full((1,), 1.0), 1, constant_values=5)
    exact(out, np.array([5, 1, 5], np.float32))
    assert out.weak_type
    exact(fnp.pad(fnp.array(1.0), 2), np.float32(1.0))  # 0-d: nothing to pad
    exact(fnp.pad(np.arange(4.0), 2, mode="empty")[2:-2], np.arange(4.0, dtype=np.float32))
    # traced constant
    jaxpr = fg.make_jaxpr(lambda c: fnp.pad(x, 1, constant_values=c))(1.0)
    assert "pad[" in str(jaxpr)
    exact(jaxpr(3.0)[0], np.pad(x, 1, constant_values=3.0))


def test_pad_errors():
    with pytest.raises(ValueError, match="pad: pad_width must be non-negative"):
        fnp.pad(fnp.ones(2), -1)
    with pytest.raises(ValueError, match="pad: unsupported mode 'foo'"):
        fnp.pad(fnp.ones(2), 1, mode="foo")
    with pytest.raises(ValueError, match="pad: unsupported keyword arguments for mode 'edge'"):
        fnp.pad(fnp.ones(2), 1, mode="edge", constant_values=1)
    with pytest.raises(ValueError, match="pad: cannot apply 'edge' padding to axis 0 of size 0"):
        fnp.pad(fnp.zeros(0), 2, mode="edge")
    with pytest.raises(TypeError, match="pad: pad_width must be integers"):
        fnp.pad(fnp.ones(2), 1.5)
    with pytest.raises(ValueError, match="pad: pad_width of shape"):
        fnp.pad(fnp.ones((2, 2)), ((1, 2, 3),))
    with pytest.raises(ValueError, match="reflect_type"):
        fnp.pad(fnp.ones(2), 1, mode="reflect", reflect_type="foo")
    with pytest.raises(ValueError, match="stat_length of 0"):
        fnp.pad(fnp.ones(2), 1, mode="mean", stat_length=0)


# -- diff / ediff1d / append / delete / insert / resize / trim_zeros -------------------------------


@given(arrays(min_dims=1, dtypes=[np.float32, np.int32, np.bool_]), st.integers(0, 4), st.data())
def test_diff_matches_numpy(x, n, data):
    axis = data.draw(axis_of(x.ndim))
    exact(fnp.diff(x, n, axis), np.diff(x, n, axis))
    if x.dtype != np.bool_:
        pre = data.draw(st.integers(-3, 3))
        app_shape = list(x.shape)
        app_shape[axis] = data.draw(st.integers(0, 2))
        app = data.draw(fst.arrays(x.dtype, tuple(app_shape)))
        exact(
            fnp.diff(x, n, axis, prepend=pre, append=app),
            np.diff(x, n, axis, prepend=np.array(pre, x.dtype), append=app),
        )


def test_diff_edge_cases():
    exact(fnp.diff(np.array([3, 1], np.uint8)), np.array([254], np.uint8))  # wraps
    exact(fnp.diff(fnp.arange(3), 0), np.arange(3, dtype=np.int32))
    with pytest.raises(ValueError, match="diff: order n must be non-negative"):
        fnp.diff(fnp.arange(3), -1)
    with pytest.raises(ValueError, match="diff: a must be at least 1-D"):
        fnp.diff(fnp.array(3))


@given(arrays(dtypes=[np.float32, np.int32]), st.data())
def test_ediff1d_and_append_match_numpy(x, data):
    begin = data.draw(st.one_of(st.none(), st.integers(-3, 3)))
    end = data.draw(st.one_of(st.none(), st.lists(st.integers(-3, 3), max_size=3)))
    end_arr = None if end is None else np.array(end, x.dtype)
    exact(
        fnp.ediff1d(x, to_end=end_arr, to_begin=begin),
        np.ediff1d(x, to_end=end_arr, to_begin=begin),
    )
    v = data.draw(fst.arrays(x.dtype, x.shape))
    exact(fnp.append(x, v), np.append(x, v))
    if x.ndim:
        axis = data.draw(axis_of(x.ndim))
        exact(fnp.append(x, v, axis), np.append(x, v, axis))


@given(arrays(min_dims=1, max_dims=3, max_side=5), st.data())
def test_delete_matches_numpy(x, data):
    axis = data.draw(st.one_of(st.none(), axis_of(x.ndim)))
    n = x.size if axis is None else x.shape[axis]
    assume(n > 0)
    idx = data.draw(st.integers(-n, n - 1))
    exact(fnp.delete(x, idx, axis), np.delete(x, idx, axis))
    lst = data.draw(st.lists(st.integers(-n, n - 1), max_size=6))
    exact(fnp.delete(x, lst, axis), np.delete(x, np.array(lst, dtype=int), axis))
    sl = slice(
        data.draw(st.integers(-n, n)),
        data.draw(st.integers(-n, n)),
        data.draw(st.sampled_from([None, 1, 2, -1, 3])),
    )
    exact(fnp.delete(x, sl, axis), np.delete(x, sl, axis))
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    exact(fnp.delete(x, mask, axis), np.delete(x, mask, axis))


@given(arrays(min_dims=1, max_dims=3, max_side=4, dtypes=[np.float32, np.int32]), st.data())
def test_insert_matches_numpy(x, data):
    axis = data.draw(st.one_of(st.none(), axis_of(x.ndim)))
    n = x.size if axis is None else x.shape[axis]
    idx = data.draw(st.integers(-n, n))
    exact(fnp.insert(x, idx, 9, axis), np.insert(x, idx, 9, axis))
    lst = data.draw(st.lists(st.integers(-n, n), min_size=1, max_size=4))
    vals = np.arange(len(lst)) + 100
    if axis is None or x.ndim == 1:
        exact(fnp.insert(x, lst, vals, axis), np.insert(x, lst, vals, axis))
    exact(fnp.insert(x, lst, 7, axis), np.insert(x, lst, 7, axis))
    exact(fnp.insert(x, slice(None, None, 2), 5, axis), np.insert(x, slice(None, None, 2), 5, axis))


def test_insert_delete_special_cases():
    x = np.arange(6).reshape(2, 3).astype(np.int32)
    exact(fnp.insert(x, 1, np.array([9, 8]), axis=1), np.insert(x, 1, [9, 8], axis=1))
    exact(fnp.insert(x, [1], np.array([[9], [8]]), axis=1), np.insert(x, [1], [[9], [8]], axis=1))
    exact(fnp.insert(np.arange(6), 1, 2.7), np.insert(np.arange(6), 1, 2.7).astype(np.int32))
    many = np.arange(40, dtype=np.float32)
    exact(fnp.delete(many, np.arange(0, 40, 3)), np.delete(many, np.arange(0, 40, 3)))
    exact(fnp.insert(many, np.arange(0, 40, 3), -1.0), np.insert(many, np.arange(0, 40, 3), -1.0))
    with pytest.raises(IndexError, match="delete: index 7 is out of bounds for axis 0"):
        fnp.delete(fnp.arange(6), 7)
    with pytest.raises(ValueError, match="delete: boolean mask"):
        fnp.delete(fnp.arange(6), np.array([True, False]))
    with pytest.raises(TypeError, match="insert: indices must be integers"):
        fnp.insert(fnp.arange(6), np.array([1.5]), 1)
    with pytest.raises(fg.ConcretizationTypeError, match="obj argument of delete"):
        fg.make_jaxpr(lambda i: fnp.delete(fnp.arange(6), i))(1)


@given(arrays(max_dims=3), fst.shapes(max_dims=3))
def test_resize_matches_numpy(x, shape):
    want = np.resize(x, shape) if x.size else np.zeros(shape, x.dtype)  # numpy: zeros too
    exact(fnp.resize(x, shape), want)


@given(
    arrays(max_dims=3, dtypes=[np.float32, np.int32]), st.sampled_from(["f", "b", "fb"]), st.data()
)
def test_trim_zeros_matches_numpy(x, trim, data):
    x = np.where(x > 3, x, 0).astype(x.dtype)  # plenty of zero rows and columns
    axis = data.draw(st.one_of(st.none(), axis_of(x.ndim))) if x.ndim else None
    exact(fnp.trim_zeros(x, trim, axis=axis), np.trim_zeros(x, trim, axis=axis))
    with pytest.raises(fg.ConcretizationTypeError, match="trim_zeros"):
        fg.make_jaxpr(fnp.trim_zeros)(np.ones(3, np.float32))


# -- tracing ------------------------------------------------------------------------------------


def test_manipulation_jaxprs():
    def f(x):
        y = fnp.transpose(fnp.reshape(x, (3, 2)))
        z = fnp.concatenate([y, y], axis=1)
        return (
            fnp.pad(fnp.flip(z, 0), 1),
            fnp.split(z, 2, axis=1)[1],
            fnp.squeeze(fnp.expand_dims(x, 0)),
        )

    x = np.arange(6, dtype=np.float32)
    jaxpr = fg.make_jaxpr(f)(x)
    text = str(jaxpr)
    for prim in (
        "reshape[",
        "transpose[permutation=(1, 0)]",
        "concatenate[dimension=1]",
        "rev[dimensions=(0,)]",
        "pad[",
        "slice[",
        "squeeze[dimensions=(0,)]",
        "broadcast_in_dim[",
    ):
        assert prim in text, prim
    for got, want in zip(jaxpr(x), f(x)):
        exact(got, np.asarray(want))


TRACED = {
    "reshape_F": lambda x: fnp.reshape(x, (4, 3), order="F"),
    "moveaxis": lambda x: fnp.moveaxis(x, 0, -1),
    "stack": lambda x: fnp.stack([x, x + 1], axis=-1),
    "vstack": lambda x: fnp.vstack([x, x]),
    "block": lambda x: fnp.block([[x, x], [x, x]]),
    "array_split": lambda x: fnp.array_split(x, 3, axis=1)[2],
    "tile": lambda x: fnp.tile(x, (2, 1, 3)),
    "repeat": lambda x: fnp.repeat(x, np.array([2, 0, 1, 3]), axis=1),
    "repeat_scalar": lambda x: fnp.repeat(x, 2),
    "roll": lambda x: fnp.roll(x, (1, -2), (0, 1)),
    "rot90": lambda x: fnp.rot90(x, 3),
    "pad_reflect": lambda x: fnp.pad(x, ((2, 3), (4, 1)), mode="reflect"),
    "pad_wrap": lambda x: fnp.pad(x, 5, mode="wrap"),
    "pad_ramp": lambda x: fnp.pad(x, 2, mode="linear_ramp", end_values=(1, -1)),
    "pad_mean": lambda x: fnp.pad(x, 2, mode="mean", stat_length=2),
    "pad_max": lambda x: fnp.pad(x, (1, 2), mode="maximum"),
    "diff": lambda x: fnp.diff(x, 2, axis=0, append=0.0),
    "delete": lambda x: fnp.delete(x, [0, 2], axis=1),
    "delete_many": lambda x: fnp.delete(fnp.ravel(x), np.arange(0, 12, 2)),
    "insert": lambda x: fnp.insert(x, 2, 9.0, axis=1),
    "resize": lambda x: fnp.resize(x, (5, 5)),
    "broadcast_to": lambda x: fnp.broadcast_to(x, (2, 3, 4)),
    "tril": lambda x: fnp.tril(x, 1),
    "linspace": lambda x: fnp.linspace(x[0], x[1], 5, axis=-1),
    "geomspace": lambda x: fnp.geomspace(x[0] + 1, x[1] + 2, 4),
    "full": lambda x: fnp.full((2, 3, 4), x),
    "full_like": lambda x: fnp.full_like(x, x[0, 0]),
    "meshgrid": lambda x: fnp.meshgrid(x[0], x[1, :2], indexing="ij")[0],
    "array_of_tracers": lambda x: fnp.array([x[0, 0], 2.0, x[1, 1]]),
}


@pytest.mark.parametrize("name", sorted(TRACED))
def test_functions_trace_and_evaluate(name):
    fn = TRACED[name]
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    jaxpr = fg.make_jaxpr(fn)(x)
    want = fn(fnp.asarray(x))
    assert_array(jaxpr(x)[0], np.asarray(want), dtype=want.dtype, rtol=1e-6, atol=1e-6)


def test_manipulation_x64(x64):
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    exact(fnp.concatenate([x, np.ones((1, 3), np.int64)]), np.concatenate([x, np.ones((1, 3))]))
    exact(
        fnp.stack([np.arange(3), np.arange(3, dtype=np.int32)]),
        np.stack([np.arange(3), np.arange(3)]),
    )  # int64 + int32 -> int64
    exact(fnp.pad(x, 2, mode="reflect"), np.pad(x, 2, mode="reflect"))
    exact(fnp.repeat(x, 3, axis=1), np.repeat(x, 3, axis=1))
    exact(fnp.diff(x, axis=0), np.diff(x, axis=0))
    # JAX: float32 + int64 -> float32 (numpy gives float64)
    assert fnp.concatenate([np.ones(2, np.float32), np.ones(2, np.int64)]).dtype == np.float32
    exact(fnp.repeat(np.arange(3), 2), np.repeat(np.arange(3), 2))


# -- issue 15: calls JAX accepts (array/numpy-int axes, float counts and shifts) -------------


def test_issue15_expand_dims_and_split_take_array_and_numpy_int_arguments():
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    for axis in (np.array([0, 1]), fnp.asarray([0, 1]), (np.int32(0), np.int64(1)), [0, 1]):
        assert fnp.expand_dims(x, axis).shape == (1, 1, 2, 3)
    assert fnp.expand_dims(x, np.int64(-1)).shape == (2, 3, 1)
    assert fnp.expand_dims(x, fnp.asarray(1)).shape == (2, 1, 3)
    with pytest.raises(
        TypeError, match="expand_dims: axis must be an int or a sequence of ints, got 1.0"
    ):
        fnp.expand_dims(x, 1.0)
    y = np.arange(8.0, dtype=np.float32).reshape(4, 2)
    for sections in (np.int64(2), fnp.asarray(2), 2.0):
        for got, want in zip(fnp.vsplit(y, sections), np.vsplit(y, 2)):
            assert_array(got, want)
    for indices in (np.array([1, 3]), fnp.asarray([1, 3])):
        for got, want in zip(fnp.split(y, indices), np.split(y, [1, 3])):
            assert_array(got, want)
    # a float number of sections is int() of it (JAX); numpy's array_split of 3 pieces
    for got, want in zip(fnp.array_split(y, 3.0), np.array_split(y, 3)):
        assert_array(got, want)
    with pytest.raises(TypeError, match="array_split: indices_or_sections must be an integer"):
        fnp.array_split(y, "3")


def test_issue15_roll_converts_float_shifts_as_jax():
    """JAX's roll converts a non-integer shift to int32 (toward zero), concrete or traced."""
    x = np.arange(5, dtype=np.int32)
    for shift, as_int in [(1.0, 1), (1.5, 1), (-1.5, -1), (np.float32(7.9), 7)]:
        assert_array(fnp.roll(x, shift), np.roll(x, as_int))
        assert_array(fg.jit(lambda s: fnp.roll(x, s))(shift), np.roll(x, as_int))
    m = np.arange(12, dtype=np.int32).reshape(3, 4)
    assert_array(fnp.roll(m, [1.5, -2.2], axis=(0, 1)), np.roll(m, [1, -2], axis=(0, 1)))
    assert_array(fnp.roll(m, np.int64(1), axis=np.int64(1)), np.roll(m, 1, axis=1))


def test_issue15_tile_refuses_float_reps_by_name():
    # JAX refuses float reps too; the message names tile and the fix
    with pytest.raises(TypeError, match="tile: reps must be integers"):
        fnp.tile(np.arange(2), 2.0)
    assert_array(fnp.tile(np.arange(2), (np.int64(2), 1)), np.tile(np.arange(2), (2, 1)))
