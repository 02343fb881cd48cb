"""select_and_gather_add / select_and_scatter_add: the max/min-pool derivatives (JAX's).

Oracles, independent of the primitives' code:

* values: a Python loop over windows and window elements (the padded, base-dilated position of
  each element worked out on its own), selecting the first NaN, else the first element strictly
  better than every earlier one (padding and holes the identity, tangent 0);
* derivatives of max/min pooling: finite differences (``check_grads``, float64, values far
  apart) and the former rule, a chain of ``select_n`` over strided slices of the padded operand
  (kept here as the reference), whose transpose gave the old gradient;
* vmap: a Python loop of eager calls; jit (CPU and the GPU backend, lavapipe here): eager.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.lax import windowed_reductions as W
from fungrad.testing import check_grads

few = settings(max_examples=20, deadline=None)


# -- the oracle ---------------------------------------------------------------------------------


def _window_shape(shape, p):
    return W._reduce_window_shape(shape, **p)


def _selection_oracle(x, p, kind):
    """Per output window: the operand index it selects (None: padding or a hole). A Python
    loop over window elements in row-major order; the first NaN wins, else the first element
    strictly better than all before it."""
    ident = -np.inf if kind == "max" else np.inf
    better = np.greater if kind == "max" else np.less
    picks = {}
    for o in itertools.product(*map(range, _window_shape(x.shape, p))):
        best, best_at = None, None
        for k in itertools.product(*map(range, p["window_dimensions"])):
            pos = [
                oi * s + ki * wd - lo
                for oi, s, ki, wd, (lo, _) in zip(
                    o, p["window_strides"], k, p["window_dilation"], p["padding"]
                )
            ]
            val, at = ident, None
            if all(
                q % b == 0 and 0 <= q // b < n for q, b, n in zip(pos, p["base_dilation"], x.shape)
            ):
                at = tuple(q // b for q, b in zip(pos, p["base_dilation"]))
                val = x[at]
            if best is None or (not np.isnan(best) and (np.isnan(val) or better(val, best))):
                best, best_at = val, at
        picks[o] = best_at
    return picks


def _gather_oracle(t, x, p, kind):
    out = np.zeros(_window_shape(x.shape, p), t.dtype)
    for o, at in _selection_oracle(x, p, kind).items():
        if at is not None:
            out[o] = t[at]
    return out


def _scatter_oracle(ct, x, p, kind):
    out = np.zeros(x.shape, np.float64)
    for o, at in _selection_oracle(x, p, kind).items():
        if at is not None:
            out[at] += ct[o]
    return out


def _select_prim(kind):
    return lax.ge_p if kind == "max" else lax.le_p


def _gather(kind, p):
    return lambda t, x: W.select_and_gather_add_p.bind(t, x, select_prim=_select_prim(kind), **p)


def _scatter(kind, p):
    return lambda c, x: W.select_and_scatter_add_p.bind(c, x, select_prim=_select_prim(kind), **p)


# -- random cases ---------------------------------------------------------------------------------


@st.composite
def window_cases(draw, max_rank=3):
    """An operand shape (sizes 0..5, rank 0..max_rank), window parameters and a value seed."""
    ndim = draw(st.integers(0, max_rank))
    shape = tuple(draw(st.integers(0 if d == 0 else 1, 5)) for d in range(ndim))
    ints = lambda lo, hi: tuple(draw(st.integers(lo, hi)) for _ in range(ndim))  # noqa: E731
    p = dict(
        window_dimensions=ints(1, 3),
        window_strides=ints(1, 3),
        padding=tuple((draw(st.integers(-1, 2)), draw(st.integers(-1, 2))) for _ in range(ndim)),
        base_dilation=ints(1, 2),
        window_dilation=ints(1, 2),
    )
    padded = [
        W.dilate_dim(n, b) + lo + hi
        for n, b, (lo, hi) in zip(shape, p["base_dilation"], p["padding"])
    ]
    if min(padded, default=0) < 0:
        p["padding"] = tuple((max(lo, 0), max(hi, 0)) for lo, hi in p["padding"])
    return shape, p, draw(st.integers(0, 2**16)), draw(st.sampled_from(["max", "min"]))


def _operand(shape, seed, specials=True, dtype=np.float32):
    """Small integers (many ties), with some -inf, inf and NaN when ``specials``."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, shape).astype(dtype)
    if specials and x.size:
        r = rng.random(shape)
        x[r < 0.1] = -np.inf
        x[(r >= 0.1) & (r < 0.15)] = np.inf
        x[(r >= 0.15) & (r < 0.2)] = np.nan
    return x


def _linear_operands(shape, p, seed):
    rng = np.random.default_rng(seed + 1)
    t = rng.standard_normal(shape).astype(np.float32)
    ct = rng.standard_normal(_window_shape(shape, p)).astype(np.float32)
    return t, ct


@few
@given(window_cases())
def test_values_against_the_loop(case):
    shape, p, seed, kind = case
    x = _operand(shape, seed)
    t, ct = _linear_operands(shape, p, seed)
    got = np.asarray(_gather(kind, p)(t, x))
    np.testing.assert_array_equal(got, _gather_oracle(t, x, p, kind))
    assert got.dtype == np.float32 and got.shape == ct.shape
    got = np.asarray(_scatter(kind, p)(ct, x))
    np.testing.assert_allclose(got, _scatter_oracle(ct, x, p, kind), rtol=1e-6, atol=1e-6)
    assert got.dtype == np.float32 and got.shape == x.shape


@settings(max_examples=12, deadline=None)
@given(window_cases())
def test_jit_on_the_cpu_equals_eager(case):
    shape, p, seed, kind = case
    x = _operand(shape, seed)
    t, ct = _linear_operands(shape, p, seed)
    for f, v in ((_gather(kind, p), t), (_scatter(kind, p), ct)):
        np.testing.assert_allclose(
            np.asarray(fg.jit(f)(v, x)), np.asarray(f(v, x)), rtol=1e-6, atol=1e-6
        )


@pytest.mark.parametrize("unroll", [0, 64], ids=["argmax_loop", "unrolled"])
def test_both_selection_lowerings(unroll, monkeypatch):
    """Small windows select by an unrolled chain of selects, larger ones by an argmax loop
    (``UNROLL_SELECT``): both against the loop oracle, with ties, infinities and NaNs, and the
    non-overlapping max pool's unrolled fold against the eager max."""
    monkeypatch.setattr(W, "UNROLL_SELECT", unroll)
    p = dict(
        window_dimensions=(3, 2),
        window_strides=(2, 1),
        padding=((1, 1), (0, 1)),
        base_dilation=(1, 2),
        window_dilation=(1, 1),
    )
    x = _operand((6, 4), 11 + unroll)
    x[0, :2] = np.nan  # the first of two NaNs in a window wins
    t, ct = _linear_operands(x.shape, p, 5)
    for kind in ("max", "min"):
        got = fg.jit(lambda t, x, kind=kind: _gather(kind, p)(t, x))(t, x)
        np.testing.assert_array_equal(np.asarray(got), _gather_oracle(t, x, p, kind))
        got = fg.jit(lambda c, x, kind=kind: _scatter(kind, p)(c, x))(ct, x)
        np.testing.assert_allclose(np.asarray(got), _scatter_oracle(ct, x, p, kind), rtol=1e-6)
        pool = _pool(kind, (2, 2), (2, 2), "SAME")
        np.testing.assert_array_equal(np.asarray(fg.jit(lambda x, f=pool: f(x))(x)), pool(x))


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.float64])
def test_integer_and_float64_operands_select_alike(dtype):
    p = dict(
        window_dimensions=(2, 3),
        window_strides=(2, 1),
        padding=((1, 0), (1, 1)),
        base_dilation=(1, 1),
        window_dilation=(1, 1),
    )
    x = np.random.default_rng(1).integers(0, 5, (5, 4)).astype(dtype)
    t, ct = _linear_operands(x.shape, p, 1)
    for kind in ("max", "min"):
        for f in (_gather(kind, p), fg.jit(_gather(kind, p))):
            np.testing.assert_array_equal(np.asarray(f(t, x)), _gather_oracle(t, x, p, kind))
        for f in (_scatter(kind, p), fg.jit(_scatter(kind, p))):
            np.testing.assert_allclose(
                np.asarray(f(ct, x)), _scatter_oracle(ct, x, p, kind), rtol=1e-6
            )


def test_shape_and_dtype_errors():
    p = dict(
        window_dimensions=(2,),
        window_strides=(2,),
        padding=((0, 0),),
        base_dilation=(1,),
        window_dilation=(1,),
    )
    x = np.arange(4.0, dtype=np.float32)
    with pytest.raises(TypeError, match="expected"):
        _gather("max", p)(np.zeros(3, np.float32), x)
    with pytest.raises(TypeError, match="expected"):
        _scatter("max", p)(np.zeros(4, np.float32), x)
    with pytest.raises(TypeError):
        _gather("max", p)(x, x.astype(np.complex64))
    with pytest.raises(TypeError):
        _gather("max", p)(x.astype(np.int32), x)
    with pytest.raises(TypeError, match="select_prim"):
        W.select_and_gather_add_p.bind(x, x, select_prim=lax.gt_p, **p)


# -- pooling gradients ---------------------------------------------------------------------------


def _pool(kind, window, strides, padding):
    ident = -np.inf if kind == "max" else np.inf
    op = lax.max if kind == "max" else lax.min
    return lambda x: lax.reduce_window(x, ident, op, window, strides, padding)


def _chooser_tangent(x, t, kind, **p):
    """The former jvp of reduce_window_max/min, as a reference: a chain of select_n over the
    window elements' strided slices of the padded operand, the strictly better one replacing."""
    out_shape = _window_shape(np.shape(x), p)
    ident = -np.inf if kind == "max" else np.inf
    xs = W._window_patches(x, ident, out_shape, **p)
    ts = W._window_patches(t, 0.0, out_shape, **p)
    cmp = lax.gt if kind == "max" else lax.lt
    best, tangent = xs[0], ts[0]
    for xk, tk in zip(xs[1:], ts[1:]):
        take = cmp(xk, best)
        best, tangent = lax.select_n(take, best, xk), lax.select_n(take, tangent, tk)
    return tangent


def _distinct(shape, seed):
    """Values at least 0.5 apart (no ties), shuffled."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.5 + rng.uniform(0, 0.1, n) - n / 4).reshape(shape)


POOLS = [
    # (layout, shape, window, strides, padding): NHWC and NCHW 2x2 pools, overlapping 3x3 / 2
    ("nhwc", (2, 6, 6, 3), (1, 2, 2, 1), (1, 2, 2, 1), "VALID"),
    ("nchw", (2, 3, 5, 6), (1, 1, 2, 2), (1, 1, 2, 2), "SAME"),
    ("nhwc_overlap", (1, 7, 6, 2), (1, 3, 3, 1), (1, 2, 2, 1), "SAME"),
    ("1d_stride1", (9,), (3,), (1,), ((1, 2),)),
]


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("case", POOLS, ids=[c[0] for c in POOLS])
def test_pool_gradient_matches_the_chooser_and_finite_differences(case, kind, x64):
    _, shape, window, strides, padding = case
    pool = _pool(kind, window, strides, padding)
    x = _distinct(shape, 3)
    x_ties = np.round(x / 2)  # many ties: the first extreme wins in both formulations
    spans = window
    pads = (
        W.padtype_to_pads(shape, spans, strides, padding) if isinstance(padding, str) else padding
    )
    p = dict(
        window_dimensions=window,
        window_strides=strides,
        padding=tuple(tuple(q) for q in pads),
        base_dilation=(1,) * len(shape),
        window_dilation=(1,) * len(shape),
    )
    ct = np.random.default_rng(4).standard_normal(_window_shape(shape, p))
    for v in (x, x_ties):
        (g,) = fg.vjp(pool, v)[1](ct)
        (want,) = fg.vjp(lambda t, v=v: _chooser_tangent(v, t, kind, **p), np.zeros(shape))[1](ct)
        np.testing.assert_array_equal(np.asarray(g), np.asarray(want))
        (gj,) = fg.jit(lambda v, c: fg.vjp(pool, v)[1](c))(v, ct)
        np.testing.assert_allclose(np.asarray(gj), np.asarray(want), rtol=1e-12)
    check_grads(lambda v: pool(v) ** 2, (x,), order=2, modes=("fwd", "rev"))


def test_grad_of_grad_is_the_gather_of_the_scatter(x64):
    """The Hessian-vector product of sum(pool(x)**2): scatter(2 * gather(v)) (the gradient is
    piecewise linear in x through the pooled values), eager and jitted."""
    p = dict(
        window_dimensions=(1, 3, 2),
        window_strides=(1, 2, 2),
        padding=((0, 0), (1, 1), (0, 1)),
        base_dilation=(1, 1, 1),
        window_dilation=(1, 1, 1),
    )
    pool = _pool("max", p["window_dimensions"], p["window_strides"], p["padding"])
    x = _distinct((2, 5, 5), 6)
    v = np.random.default_rng(7).standard_normal(x.shape)
    grad = fg.grad(lambda x: fnp.sum(pool(x) ** 2))
    hvp = lambda x, v: fg.jvp(grad, (x,), (v,))[1]  # noqa: E731
    want = _scatter_oracle(2 * _gather_oracle(v, x, p, "max"), x, p, "max")
    np.testing.assert_allclose(np.asarray(hvp(x, v)), want, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(fg.jit(hvp)(x, v)), want, rtol=1e-12)
    # reverse over reverse: the scatter's transpose is the gather
    gg = fg.grad(lambda x: fnp.sum(grad(x) * v))(x)
    np.testing.assert_allclose(np.asarray(gg), want, rtol=1e-12)
    check_grads(lambda x: grad(x), (x,), order=1, modes=("fwd", "rev"))


def test_the_gradient_program_has_no_per_window_element_pads():
    x = _distinct((2, 6, 6, 3), 8).astype(np.float32)
    f = lambda x: fnp.sum(_pool("max", (1, 2, 2, 1), (1, 2, 2, 1), "VALID")(x) ** 2)  # noqa
    text = str(fg.make_jaxpr(fg.grad(f))(x))
    assert "select_and_scatter_add" in text and "= pad[" not in text and "select_n" not in text


def test_complex_pools_keep_the_lexicographic_choice():
    x = np.array([[1 + 2j, 1 + 3j, 0 + 9j, 2 - 1j]], np.complex64)
    t = np.array([[1, 10, 100, 1000]], np.complex64)
    pool = _pool("max", (1, 2), (1, 1), "VALID")
    _, tan = fg.jvp(pool, (x,), (t,))
    np.testing.assert_array_equal(np.asarray(tan), [[10, 10, 1000]])


# -- vmap, edge shapes, the GPU backend ----------------------------------------------------------


def test_vmap_matches_a_loop():
    p = dict(
        window_dimensions=(2, 3),
        window_strides=(2, 1),
        padding=((1, 0), (0, 1)),
        base_dilation=(1, 2),
        window_dilation=(1, 1),
    )
    xs = np.stack([_operand((4, 3), s) for s in range(3)])
    ts = np.stack([_linear_operands((4, 3), p, s)[0] for s in range(3)])
    cts = np.stack([_linear_operands((4, 3), p, s)[1] for s in range(3)])
    for kind in ("max", "min"):
        g, s = _gather(kind, p), _scatter(kind, p)
        for f, vs, axes in (
            (g, ts, (0, 0)),
            (s, cts, (0, 0)),
            (g, ts[0], (None, 0)),
            (s, cts[0], (None, 0)),
            (g, ts, (0, None)),
            (s, np.moveaxis(cts, 0, -1), (-1, None)),
        ):
            out = np.asarray(fg.vmap(f, in_axes=axes)(vs, xs if axes[1] == 0 else xs[1]))
            for k in range(3):
                v = vs if axes[0] is None else np.take(vs, k, axis=axes[0])
                want = np.asarray(f(v, xs[k] if axes[1] == 0 else xs[1]))
                np.testing.assert_allclose(out[k], want, rtol=1e-6, atol=1e-6)


def test_vmap_of_the_pool_gradient():
    pool = _pool("max", (2, 2), (2, 2), "SAME")
    xs = np.stack([_distinct((5, 4), s) for s in range(3)]).astype(np.float32)
    grad = fg.grad(lambda x: fnp.sum(pool(x) ** 3))
    out = np.asarray(fg.jit(fg.vmap(grad))(xs))
    for k in range(3):
        np.testing.assert_allclose(out[k], np.asarray(grad(xs[k])), rtol=1e-6)


@pytest.mark.parametrize(
    "shape, window, strides, padding",
    [
        ((), (), (), ()),
        ((0, 3), (2, 2), (1, 1), ((0, 0), (0, 0))),
        ((0, 3), (2, 2), (1, 1), ((1, 1), (0, 0))),
        ((2, 3), (3, 4), (1, 1), ((0, 0), (0, 0))),
        ((1, 1), (2, 2), (1, 1), ((1, 0), (1, 0))),
    ],
)
def test_edge_shapes(shape, window, strides, padding):
    n = len(shape)
    p = dict(
        window_dimensions=window,
        window_strides=strides,
        padding=padding,
        base_dilation=(1,) * n,
        window_dilation=(1,) * n,
    )
    x = _operand(shape, 2, specials=False)
    t, ct = _linear_operands(shape, p, 2)
    for f, v, oracle in ((_gather, t, _gather_oracle), (_scatter, ct, _scatter_oracle)):
        want = oracle(v, x, p, "max")
        for g in (f("max", p), fg.jit(f("max", p))):
            got = np.asarray(g(v, x))
            assert got.shape == want.shape and got.dtype == np.float32
            np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.usefixtures("gpu")
@settings(max_examples=6, deadline=None)
@given(window_cases(max_rank=2))
def test_jit_on_the_gpu_equals_the_cpu(case):
    shape, p, seed, kind = case
    x = _operand(shape, seed)
    t, ct = _linear_operands(shape, p, seed)
    for f, v in ((_gather(kind, p), t), (_scatter(kind, p), ct)):
        np.testing.assert_allclose(
            np.asarray(fg.jit(f, backend="gpu")(v, x)),
            np.asarray(fg.jit(f)(v, x)),
            rtol=1e-6,
            atol=1e-6,
        )


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("unroll", [0, 64], ids=["argmax_loop", "unrolled"])
def test_both_selection_lowerings_on_the_gpu(unroll, monkeypatch):
    monkeypatch.setattr(W, "UNROLL_SELECT", unroll)
    p = dict(
        window_dimensions=(2, 3),
        window_strides=(1, 2),
        padding=((1, 0), (1, 1)),
        base_dilation=(2, 1),
        window_dilation=(1, 1),
    )
    x = _operand((4, 7), 21 + unroll)
    x[1, :3] = np.nan
    t, ct = _linear_operands(x.shape, p, 6)
    for kind in ("max", "min"):
        for f, v in ((_gather(kind, p), t), (_scatter(kind, p), ct)):
            np.testing.assert_allclose(
                np.asarray(fg.jit(lambda v, x, f=f: f(v, x), backend="gpu")(v, x)),
                np.asarray(f(v, x)),
                rtol=1e-6,
                atol=1e-6,
            )


@pytest.mark.usefixtures("gpu")
def test_cnn_pool_gradient_on_the_gpu():
    pool = _pool("max", (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    x = np.round(np.random.default_rng(9).standard_normal((4, 8, 8, 5)).astype(np.float32), 1)
    grad = fg.grad(lambda x: fnp.sum(pool(x) ** 2))
    np.testing.assert_allclose(
        np.asarray(fg.jit(grad, backend="gpu")(x)), np.asarray(fg.jit(grad)(x)), rtol=1e-6
    )
