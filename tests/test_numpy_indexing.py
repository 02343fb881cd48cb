"""fungrad.numpy indexing (``x[idx]``, ``x.at[idx]``, take, take_along_axis, put, choose,
select, the index helpers) against numpy.

numpy is the reference for every in-bounds index. Where JAX deliberately differs from numpy
the tests follow JAX and say so: out-of-bounds integer (array) indices clamp on reads and are
dropped on updates instead of raising, and values are cast to the array's dtype.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.numpy import indexing, util
from tests.helpers import assert_array

DTYPES = [np.float32, np.int32, np.uint32, np.bool_]
shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4)


def _values(rng, shape, dtype):
    kind = np.dtype(dtype).kind
    if kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if kind == "f":
        return rng.integers(-9, 9, size=shape).astype(dtype)  # exact sums in any order
    return rng.integers(0 if kind == "u" else -9, 9, size=shape).astype(dtype)


# -- random index expressions ---------------------------------------------------------------------


def _slices(n):
    bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
    step = st.one_of(st.none(), st.integers(-3, 3).filter(bool))
    return st.builds(slice, bound, bound, step)


@st.composite
def index_exprs(draw, shape, advanced=True):
    """A random NumPy index for ``shape``: ints, slices of any step, None, Ellipsis, integer
    arrays (broadcastable, in bounds), a boolean mask or a 0-d boolean. Arrays come as numpy
    arrays, fungrad Arrays or lists."""
    ndim = len(shape)
    p = draw(st.integers(0, ndim))
    use_ellipsis = draw(st.booleans())
    q = draw(st.integers(p, ndim)) if use_ellipsis else ndim
    axes = list(range(p)) + list(range(q, ndim)) if use_ellipsis else list(range(p))
    adv_kind = draw(st.sampled_from(["none", "arrays", "mask"])) if advanced else "none"
    adv_shape = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
    items, i, split = [], 0, None
    while i < len(axes):
        if split is None and i >= p:
            split = len(items)
        ax, n = axes[i], shape[axes[i]]
        kinds = ["slice"] + (["int"] if n else [])
        if adv_kind == "arrays" and (n or 0 in adv_shape):
            kinds.append("array")
        contiguous = i + 1 < len(axes) and axes[i + 1] == ax + 1
        if adv_kind == "mask" and not any(k == "mask" for k, _ in items):
            kinds.append("mask")
        kind = draw(st.sampled_from(kinds))
        if kind == "slice":
            items.append(("slice", draw(_slices(n))))
        elif kind == "int":
            items.append(("int", draw(st.integers(-n, n - 1))))
        elif kind == "array":
            # a suffix of adv_shape (so all arrays broadcast); on an empty axis only an
            # empty array is in bounds
            sub = adv_shape[draw(st.integers(0, len(adv_shape))) :] if n else adv_shape
            vals = draw(hnp.arrays(np.int32, sub, elements=st.integers(-n, max(n - 1, -n))))
            items.append(("array", vals))
        else:
            k = 2 if contiguous and draw(st.booleans()) else 1
            mask = draw(hnp.arrays(np.bool_, tuple(shape[ax : ax + k])))
            items.append(("mask", mask))
            i += k - 1
        i += 1
    idx = [v for _, v in items]
    if use_ellipsis:
        idx.insert(len(idx) if split is None else split, Ellipsis)
    for _ in range(draw(st.integers(0, 2))):
        idx.insert(draw(st.integers(0, len(idx))), None)
    if advanced and (adv_kind != "arrays" or adv_shape in ((), (1,))):
        if draw(st.integers(0, 4)) == 0:
            idx.insert(
                draw(st.integers(0, len(idx))), draw(st.booleans()) if adv_kind == "none" else True
            )
    return tuple(idx)


def _for_fungrad(idx, draw):
    """The same index with some arrays as fungrad Arrays or lists."""
    out = []
    for v in idx:
        if isinstance(v, np.ndarray):
            how = draw(st.sampled_from(["numpy", "fungrad", "list"]))
            v = (
                util.asarray(v)
                if how == "fungrad"
                else v.tolist()
                if how == "list" and v.ndim and v.size
                else v
            )
        out.append(v)
    return tuple(out)


@st.composite
def indexed_arrays(draw, advanced=True):
    shape = draw(shapes)
    dtype = draw(st.sampled_from(DTYPES))
    x = _values(np.random.default_rng(draw(st.integers(0, 2**31))), shape, dtype)
    idx = draw(index_exprs(shape, advanced))
    return x, idx, _for_fungrad(idx, draw)


@given(indexed_arrays())
def test_getitem_matches_numpy(case):
    x, idx, fidx = case
    expected = x[idx]
    assert_array(indexing.getitem(util.asarray(x), fidx), expected, dtype=x.dtype)


@given(indexed_arrays(advanced=False))
def test_basic_indexing_uses_no_gather(case):
    x, idx, fidx = case
    jaxpr = fg.make_jaxpr(lambda a: a[fidx])(x)
    assert "gather" not in str(jaxpr)
    assert_array(jaxpr(fnp.asarray(x))[0], x[idx], dtype=x.dtype)


def test_operator_and_jaxpr():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    fx = fnp.asarray(x)
    assert_array(fx[1, ::-1, None, [0, 3]], x[1, ::-1, None, [0, 3]])
    text = str(fg.make_jaxpr(lambda a: a[1:, ::-1])(x))
    assert "slice[limit_indices=(2, 3, 4) start_indices=(1, 0, 0) strides=None]" in text
    assert "rev[dimensions=(1,)]" in text
    jaxpr = fg.make_jaxpr(lambda a, i: a[:, i])(x, np.array([2, -1], np.int32))
    assert "gather[" in str(jaxpr) and "mode=GatherScatterMode.PROMISE_IN_BOUNDS" in str(jaxpr)
    assert_array(jaxpr(x, np.array([2, -1], np.int32))[0], x[:, [2, -1]])


# JAX clamps out-of-bounds integer indices where numpy raises IndexError.
def test_out_of_bounds_indices_clamp():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    fx = fnp.asarray(x)
    assert_array(fx[np.array([5, -1, -7])], x[[2, 2, 0]])
    assert_array(fx[10], x[2])
    assert_array(fx[-10, 7], x[0, 3])
    assert_array(fx[:, np.array([[9], [-9]])], x[:, [[3], [0]]])
    assert_array(fx.at[np.array([7])].get(mode="fill"), np.full((1, 4), np.nan))
    assert_array(fx.at[1, 9].get(mode="fill", fill_value=-1.0), -1.0)
    assert_array(fx.at[np.array([7, 0])].get(mode="clip"), x[[2, 0]])
    with pytest.raises(IndexError, match="out of bounds for axis 0 with size 0"):
        fnp.zeros((0, 3))[0]
    with pytest.raises(IndexError, match="axis 0 with size 0"):
        fnp.zeros((0, 3))[np.array([0])]
    assert fnp.zeros((0, 3))[np.array([], np.int32)].shape == (0, 3)
    # updates: a scalar index (int or 0-d integer array, traced too) into an empty axis raises
    # as JAX does, in every mode; 1-d index arrays and other axes leave the array unchanged
    i = fnp.asarray(np.int32(0))
    for update in (
        lambda x, i: x.at[i].set(1.0),
        lambda x, i: x.at[i].mul(2.0),
        lambda x, i: x.at[i].set(1.0, mode="drop"),
        lambda x, i: x.at[0].add(1.0),
    ):
        for fn in (update, fg.jit(update)):
            with pytest.raises(IndexError, match="out of bounds for axis 0 with size 0"):
                fn(fnp.zeros((0, 3)), i)
    assert fnp.zeros((0, 3)).at[np.array([0, 1])].add(1.0).shape == (0, 3)
    assert fnp.zeros((0, 3)).at[:, i].set(1.0).shape == (0, 3)
    assert fnp.zeros((3, 0)).at[i].set(1.0).shape == (3, 0)


def test_indexing_errors():
    x = fnp.zeros((2, 3))
    with pytest.raises(IndexError, match="Too many indices: array is 2-dimensional, but 3"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., ...]
    with pytest.raises(TypeError, match="indexer must have integer or boolean type"):
        x[np.array([0.0])]
    with pytest.raises(TypeError, match="string indexing"):
        x["a"]
    with pytest.raises(TypeError, match="non-tuple sequence"):
        x[[0, slice(None)]]
    with pytest.raises(IndexError, match="boolean index did not match"):
        x[np.ones(3, bool)]
    with pytest.raises(ValueError, match="incompatible shapes for broadcasting"):
        x[np.array([0, 1]), np.array([0, 1, 2])]
    with pytest.raises(TypeError, match="unsupported index of type object"):
        x[object()]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        x[::0]


def test_traced_boolean_mask_needs_concrete_value():
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(
        fg.errors.NonConcreteBooleanIndexError,
        match="boolean array indices must be concrete.*where.*size=",
    ) as info:
        fg.make_jaxpr(lambda a: a[a > 1])(x)
    assert isinstance(info.value, IndexError)  # as JAX's (a JAXIndexError)
    # a traced integer index is fine: one gather
    jaxpr = fg.make_jaxpr(lambda a, i: a[i])(x, np.int32(3))
    assert "gather[" in str(jaxpr)
    assert_array(jaxpr(x, np.int32(-1))[0], 3.0)


# -- x.at[idx] ------------------------------------------------------------------------------------

UPDATES = {"add": np.add, "multiply": np.multiply, "min": np.minimum, "max": np.maximum}


@given(indexed_arrays(), st.sampled_from(sorted(UPDATES)), st.booleans(), st.integers(0, 2**31))
def test_at_updates_match_numpy_ufunc_at(case, name, full_values, seed):
    x, idx, fidx = case
    if x.dtype == np.bool_ and name in ("add", "multiply"):
        x = x.astype(np.int32)
    rng = np.random.default_rng(seed)
    target_shape = x[idx].shape
    vshape = target_shape if full_values else target_shape[len(target_shape) // 2 :]
    vals = _values(rng, vshape, x.dtype)
    if name == "multiply" and x.dtype.kind in "iu":  # keep products small
        vals = np.asarray(np.minimum(vals, 2), x.dtype)
        x = np.asarray(np.minimum(x, 2), x.dtype)
    expected = x.copy()
    with np.errstate(all="ignore"):
        UPDATES[name].at(expected, idx, vals)
    out = getattr(fnp.asarray(x).at[fidx], name)(util.asarray(vals))
    assert_array(out, expected, dtype=x.dtype)


@given(indexed_arrays())
def test_at_set_scalar_matches_numpy(case):
    x, idx, fidx = case
    expected = x.copy()
    expected[idx] = 1
    assert_array(fnp.asarray(x).at[fidx].set(1), expected, dtype=x.dtype)


@given(
    st.integers(1, 6),
    st.integers(0, 2**31),
    st.sampled_from(["add", "multiply", "min", "max", "set", "subtract"]),
)
def test_at_out_of_bounds_updates_are_dropped(n, seed, name):
    # JAX: negative indices wrap once; indices still out of bounds are dropped (numpy raises).
    rng = np.random.default_rng(seed)
    x = rng.integers(-5, 5, size=(n, 3)).astype(np.float32)
    idx = rng.integers(-2 * n, 2 * n, size=7)
    idx = idx if name != "set" else np.unique(idx)
    vals = rng.integers(-5, 5, size=(idx.size, 3)).astype(np.float32)
    wrapped = np.where(idx < 0, idx + n, idx)
    keep = (wrapped >= 0) & (wrapped < n)
    expected = x.copy()
    ufunc = {
        "add": np.add,
        "multiply": np.multiply,
        "min": np.minimum,
        "max": np.maximum,
        "subtract": np.subtract,
    }.get(name)
    if ufunc is None:
        expected[wrapped[keep]] = vals[keep]
    else:
        ufunc.at(expected, wrapped[keep], vals[keep])
    out = getattr(fnp.asarray(x).at[idx], name)(vals)
    assert_array(out, expected, dtype=np.float32)
    # mode="clip" clamps instead
    clipped = np.clip(wrapped, 0, n - 1)
    expected = x.copy()
    if ufunc is not None:
        ufunc.at(expected, clipped, vals)
        assert_array(getattr(fnp.asarray(x).at[idx], name)(vals, mode="clip"), expected)


def test_at_dtypes_follow_jax():
    x = fnp.arange(5)
    assert_array(x.at[1].set(2.7), [0, 2, 2, 3, 4], dtype=np.int32)
    assert_array(x.at[1].add(2.7), [0, 3, 2, 3, 4], dtype=np.int32)
    assert_array(fnp.arange(5, dtype=np.uint8).at[1].subtract(2), [0, 255, 2, 3, 4], dtype=np.uint8)
    assert_array(x.at[1].divide(2), [0, 0.5, 2, 3, 4], dtype=np.float32)
    assert_array(x.at[2].power(3), [0, 1, 8, 3, 4], dtype=np.int32)
    assert_array(x.at[np.array([1, 1])].mul(3), [0, 9, 2, 3, 4], dtype=np.int32)
    w = fnp.zeros(3) + 1.0
    assert x.at[0].set(1).weak_type == x.weak_type
    assert_array(w.at[0].set(5.0), [5, 1, 1], dtype=np.float32)
    assert_array(fnp.zeros((2, 3)).at[:, None, 1].set(np.array([[7.0]])), [[0, 7, 0], [0, 7, 0]])
    assert_array(fnp.zeros(3).at[np.array([-1])].set(1.0, wrap_negative_indices=False), [0, 0, 0])
    with pytest.raises(
        ValueError,
        match=r"at\[\].set: values of shape \(2,\) cannot be "
        r"broadcast to the indexed shape \(3,\)",
    ):
        fnp.zeros(3).at[:].set(np.ones(2))
    with pytest.raises(TypeError, match="values"):
        fnp.zeros(3).at[0].set("a")


def test_at_jaxpr():
    x = np.zeros(4, np.float32)
    idx = np.array([1, 1], np.int32)
    jaxpr = fg.make_jaxpr(lambda a, i: a.at[i].add(2.0))(x, idx)
    text = str(jaxpr)
    assert "scatter-add[" in text and "mode=GatherScatterMode.FILL_OR_DROP" in text
    assert_array(jaxpr(x, idx)[0], [0, 4, 0, 0])
    text = str(fg.make_jaxpr(lambda a: a.at[::2].set(1.0, mode="clip"))(x))
    assert "scatter[" in text and "mode=GatherScatterMode.CLIP" in text


# -- take / take_along_axis / put / choose / select -----------------------------------------------


@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1)), st.data())
def test_take_matches_numpy(x, data):
    axis = data.draw(st.one_of(st.none(), st.integers(-x.ndim, x.ndim - 1)))
    n = x.size if axis is None else x.shape[axis]
    idx = data.draw(
        hnp.arrays(
            np.int32,
            hnp.array_shapes(min_dims=0, max_dims=2, min_side=0),
            elements=st.integers(-n, n - 1),
        )
    )
    assert_array(fnp.take(x, idx, axis=axis), np.take(x, idx, axis=axis))
    big = idx + 3 * n
    assert_array(fnp.take(x, big, axis=axis, mode="wrap"), np.take(x, big, axis=axis, mode="wrap"))
    # JAX: "clip" clamps to [0, n - 1] without wrapping negatives (as numpy's clip mode).
    assert_array(
        fnp.take(x, idx - n, axis=axis, mode="clip"), np.take(x, idx - n, axis=axis, mode="clip")
    )
    # JAX's default "fill" mode: out-of-bounds give NaN (numpy raises)
    out = np.asarray(fnp.take(x, big, axis=axis))
    assert np.isnan(out).all() and out.shape == np.take(x, idx, axis=axis).shape


def test_take_errors_and_fill():
    x = fnp.arange(5)
    assert_array(fnp.take(x, np.array([7, -1])), [np.iinfo(np.int32).min, 4], dtype=np.int32)
    assert_array(fnp.take(x, np.array([7]), fill_value=-3), [-3])
    with pytest.raises(ValueError, match="take: mode='raise' is not supported"):
        fnp.take(x, np.array([0]), mode="raise")
    with pytest.raises(TypeError, match="take: indices must be an integer array"):
        fnp.take(x, np.array([0.5]))
    with pytest.raises(IndexError, match="non-empty take from an empty axis"):
        fnp.take(fnp.zeros(0), np.array([0]), mode="wrap")


@given(hnp.arrays(np.int32, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1)), st.data())
def test_take_along_axis_matches_numpy(x, data):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    n = x.shape[axis]
    shape = list(x.shape)
    shape[axis] = data.draw(st.integers(0, 4))
    for j in range(x.ndim):  # index dims may be 1 and broadcast
        if j != axis % x.ndim and data.draw(st.booleans()):
            shape[j] = 1
    idx = data.draw(hnp.arrays(np.int32, tuple(shape), elements=st.integers(-n, n - 1)))
    expected = np.take_along_axis(
        x,
        np.broadcast_to(
            idx,
            [
                s if j == axis % x.ndim else max(s, t)
                for j, (s, t) in enumerate(zip(idx.shape, x.shape))
            ],
        ),
        axis=axis,
    )
    assert_array(fnp.take_along_axis(x, idx, axis=axis), expected, dtype=np.int32)
    jaxpr = fg.make_jaxpr(lambda a, i: fnp.take_along_axis(a, i, axis=axis))(x, idx)
    assert "gather[" in str(jaxpr)
    assert_array(jaxpr(x, idx)[0], expected)


def test_take_along_axis_modes_and_errors():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array([[0], [5], [-1]])
    assert_array(fnp.take_along_axis(x, idx, axis=1), [[0], [np.nan], [11]])
    assert_array(fnp.take_along_axis(x, idx, axis=1, mode="clip"), [[0], [7], [11]])
    assert_array(fnp.take_along_axis(x, np.array([11, 0]), axis=None), [11, 0])
    with pytest.raises(ValueError, match="take_along_axis: indices and arr must have the same"):
        fnp.take_along_axis(x, np.array([0]), axis=1)
    with pytest.raises(ValueError, match="take_along_axis: incompatible shapes"):
        fnp.take_along_axis(x, np.zeros((2, 1), np.int32), axis=1)


def test_put_choose_select():
    a = np.arange(6).reshape(2, 3)
    expected = a.copy()
    np.put(expected, [0, 4], [10, 20])
    assert_array(fnp.put(a, np.array([0, 4]), np.array([10, 20]), inplace=False), expected)
    expected = a.copy()
    np.put(expected, [1, 8], [7], mode="wrap")
    assert_array(fnp.put(a, np.array([1, 8]), 7, mode="wrap", inplace=False), expected)
    expected = a.copy()
    np.put(expected, [-3, 9], [5, 6], mode="clip")
    assert_array(
        fnp.put(a, np.array([-3, 9]), np.array([5, 6]), mode="clip", inplace=False), expected
    )
    with pytest.raises(ValueError, match="inplace=False"):
        fnp.put(a, np.array([0]), 1)
    choices = [np.zeros(3, np.float32), np.ones(3, np.float32), np.full(3, 2, np.float32)]
    for mode, which in [("raise", [2, 0, 1]), ("wrap", [4, -1, 0]), ("clip", [5, -2, 1])]:
        assert_array(
            fnp.choose(np.array(which), choices, mode=mode), np.choose(which, choices, mode=mode)
        )
    with pytest.raises(ValueError, match="choose: invalid entry"):
        fnp.choose(np.array([3]), choices)
    conds = [np.array([True, False, False]), np.array([True, True, False])]
    out = fnp.select(conds, [np.array([1, 2, 3]), 5.0], default=-1)
    assert_array(out, np.select(conds, [[1, 2, 3], [5.0] * 3], default=-1), dtype=np.float32)
    with pytest.raises(ValueError, match="select: condlist and choicelist"):
        fnp.select(conds, [1])


# -- index helpers --------------------------------------------------------------------------------


@given(st.integers(0, 5), st.integers(-3, 3), st.one_of(st.none(), st.integers(0, 5)))
def test_triangle_and_diag_indices(n, k, m):
    for got, want in zip(fnp.tril_indices(n, k, m), np.tril_indices(n, k, m)):
        assert_array(got, want, dtype=np.int32)
    for got, want in zip(fnp.triu_indices(n, k, m), np.triu_indices(n, k, m)):
        assert_array(got, want, dtype=np.int32)
    for got, want in zip(fnp.diag_indices(n, 3), np.diag_indices(n, 3)):
        assert_array(got, want, dtype=np.int32)
    x = np.zeros((n, m if m is not None else n))
    for got, want in zip(fnp.tril_indices_from(x, k), np.tril_indices_from(x, k)):
        assert_array(got, want)
    with pytest.raises(ValueError, match="triu_indices_from: input array must be 2-d"):
        fnp.triu_indices_from(np.zeros(3))


@given(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1), st.data())
def test_ravel_and_unravel_index(shape, data):
    size = int(np.prod(shape))
    flat = data.draw(
        hnp.arrays(np.int32, data.draw(st.integers(0, 5)), elements=st.integers(0, size - 1))
    )
    coords = np.unravel_index(flat, shape)
    for got, want in zip(fnp.unravel_index(flat, shape), coords):
        assert_array(got, want, dtype=np.int32)
    for order in ("C", "F"):
        assert_array(
            fnp.ravel_multi_index(coords, shape, order=order),
            np.ravel_multi_index(coords, shape, order=order),
        )
    shifted = tuple(c + 2 * d for c, d in zip(coords, shape))
    for mode in ("wrap", "clip"):
        assert_array(
            fnp.ravel_multi_index(shifted, shape, mode=mode),
            np.ravel_multi_index(shifted, shape, mode=mode),
        )


def test_unravel_index_clamps_like_jax_and_errors():
    # JAX: negative flat indices wrap once, out-of-bounds ones clamp (numpy raises).
    rows, cols = fnp.unravel_index(np.array([-1, 5, 100, -100]), (2, 3))
    assert_array(rows, [1, 1, 1, 0])
    assert_array(cols, [2, 2, 2, 0])
    with pytest.raises(ValueError, match="invalid entry in coordinates array"):
        fnp.ravel_multi_index((np.array([0]), np.array([3])), (2, 3))
    with pytest.raises(fg.ConcretizationTypeError, match="mode='wrap'"):
        fg.make_jaxpr(lambda i: fnp.ravel_multi_index((i, i), (2, 3)))(np.array([0]))
    with pytest.raises(ValueError, match="ravel_multi_index: parameter multi_index"):
        fnp.ravel_multi_index((np.array([0]),), (2, 3))


def test_ix():
    rows, cols = np.array([0, 2]), np.array([1, 3, 0])
    x = np.arange(12).reshape(3, 4)
    for got, want in zip(fnp.ix_(rows, cols), np.ix_(rows, cols)):
        assert_array(got, want)
    assert_array(fnp.asarray(x)[fnp.ix_(rows, cols)], x[np.ix_(rows, cols)])
    with pytest.raises(ValueError, match="ix_: arguments must be 1-dimensional"):
        fnp.ix_(np.zeros((2, 2), np.int32))


def test_x64_index_dtypes(x64):
    x = fnp.arange(10.0)
    assert_array(x[np.array([1, -1], np.int64)], [1.0, 9.0], dtype=np.float64)
    assert "i64[2,1]" in str(fg.make_jaxpr(lambda a, i: a[i])(x, np.array([1, 2], np.int64)))
    assert_array(x.at[np.array([1, 20], np.int64)].add(1.0), np.arange(10.0) + np.eye(10)[1])
    big = np.array([2**40], np.int64)  # clamps, does not wrap around
    assert_array(x[big], [9.0])
    assert_array(fnp.take(x, np.array([2**40], np.uint64), mode="clip"), [9.0])


def test_issue15_select_takes_non_bool_conditions_and_names_its_arguments():
    x = np.arange(3.0, dtype=np.float32)
    # nonzero numbers are true conditions (JAX converts them to bool)
    for cond in (np.array([0, 2, 0], np.int8), np.array([0.0, 0.5, 0.0], np.float32)):
        assert_array(fnp.select([cond], [x], -1.0), np.select([cond != 0], [x], -1.0))
    assert_array(fnp.select([1], [x]), x)
    with pytest.raises(
        TypeError,
        match=r"select requires ndarray or scalar arguments, but "
        r"condlist\[0\] is of type list",
    ):
        fnp.select([[True, False]], [[1.0, 2.0]])


def test_issue15_ix_keeps_float_arguments_and_takes_concrete_masks_as_numpy():
    rows, cols = np.array([0.0, 1.5]), np.array([1.0, 2.0, 3.0], np.float32)
    for got, want in zip(fnp.ix_(rows, cols), np.ix_(rows.astype(np.float32), cols)):
        assert_array(got, want)
    mask, cols = np.array([True, False, True]), np.array([1, 3])
    for got, want in zip(fnp.ix_(mask, cols), np.ix_(mask, cols)):
        assert_array(got, want.astype(np.asarray(got).dtype))
    x = np.arange(12).reshape(3, 4)
    assert_array(fnp.asarray(x)[fnp.ix_(mask, cols)], x[np.ix_(mask, cols)].astype(np.int32))
    with pytest.raises(fg.ConcretizationTypeError, match="ix_: argument 0 is a traced boolean"):
        fg.jit(lambda m: fnp.ix_(m, cols))(mask)
