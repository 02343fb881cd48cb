"""jvp, transpose and batching rules of dot_general (fungrad/lax/dot.py), conv_general_dilated
(fungrad/lax/conv.py), sort and top_k (fungrad/lax/sort.py).

dot_general and the convolution are bilinear: ``check_grads`` (float64 finite differences, jvp
and vjp by the dot-product identity) checks both one-sided jvps and both transposes, over random
dimension numbers, strides, paddings, dilations and groups; the vjps are also compared with
explicit formulas (matrix products, the convolution's gradient by a loop). Sorting's
derivative is a permutation of the tangents, compared with numpy's argsort. vmap is checked
against a Python loop, and the batch rules' jaxprs against what they promise (no broadcasting
of an unbatched operand, dimension numbers shifted rather than data moved).
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import core, lax
from fungrad.testing import check_grads
from fungrad.testing.gradcheck import assert_transforms_commute
from fungrad.transforms.jvp import jvp_rules, no_jvp
from fungrad.transforms.transpose import transpose_rules
from fungrad.transforms.vmap import batch_rules, vmap_flat

# NB: lax.dot, lax.conv and lax.sort are functions that shadow the modules of the same names.
dot, conv, sort = (importlib.import_module(f"fungrad.lax.{m}") for m in ("dot", "conv", "sort"))

LINEAR = {dot.dot_general_p, conv.conv_general_dilated_p}  # bilinear: transposes per operand

few = settings(max_examples=25)


def test_registry_every_primitive_has_its_rules():
    prims = [
        v for m in (dot, conv, sort) for v in vars(m).values() if isinstance(v, core.Primitive)
    ]
    assert {p.name for p in prims} == {"dot_general", "conv_general_dilated", "sort", "top_k"}
    for p in prims:
        assert p in jvp_rules or p in no_jvp, f"{p} has no jvp rule"
        assert p in batch_rules, f"{p} has no batch rule"
        assert (p in transpose_rules) == (p in LINEAR), f"{p}: transpose rule mismatch"


def _prims(jaxpr):
    return [e.primitive.name for e in jaxpr.jaxpr.eqns]


def _batched_jaxpr(f, args, dims, size):
    """The jaxpr of ``f`` batched by the rules alone, and the results' batch dims."""
    out_dims = []

    def batched(*xs):
        outs, ds = vmap_flat(lambda *ys: list(f(*ys)), size, list(xs), dims)
        out_dims.extend(ds)
        return outs

    return fg.make_jaxpr(batched)(*args), out_dims


def check_vmap(f, args, in_axes, size, rtol=1e-10):
    """fg.vmap(f, in_axes) against a loop stacking f over the examples along axis 0."""
    got = fg.vmap(f, in_axes=in_axes)(*args)
    got = got if isinstance(got, tuple) else (got,)
    for i in range(size):
        ex = [a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(args, in_axes)]
        want = f(*ex)
        for g, w in zip(got, want if isinstance(want, tuple) else (want,)):
            assert np.asarray(g).dtype == np.asarray(w).dtype
            np.testing.assert_allclose(np.asarray(g)[i], np.asarray(w), rtol=rtol, atol=1e-12)


# -- dot_general -----------------------------------------------------------------------------------


@st.composite
def dot_cases(draw):
    """float64 operands with batch, contracting and free dimensions in random positions."""
    nb, nc, nlf, nrf = (draw(st.integers(0, 2)) for _ in range(4))
    size = st.integers(1, 3)
    bs, cs = [draw(size) for _ in range(nb)], [draw(size) for _ in range(nc)]
    lfs, rfs = [draw(size) for _ in range(nlf)], [draw(size) for _ in range(nrf)]
    lroles = draw(
        st.permutations(
            [("b", i) for i in range(nb)]
            + [("c", i) for i in range(nc)]
            + [("f", i) for i in range(nlf)]
        )
    )
    rroles = draw(
        st.permutations(
            [("b", i) for i in range(nb)]
            + [("c", i) for i in range(nc)]
            + [("f", i) for i in range(nrf)]
        )
    )

    def layout(roles, free):
        return (
            [{"b": bs, "c": cs, "f": free}[r][i] for r, i in roles],
            {role: d for d, role in enumerate(roles)},
        )

    lshape, lpos = layout(lroles, lfs)
    rshape, rpos = layout(rroles, rfs)
    dn = (
        (tuple(lpos[("c", i)] for i in range(nc)), tuple(rpos[("c", i)] for i in range(nc))),
        (tuple(lpos[("b", i)] for i in range(nb)), tuple(rpos[("b", i)] for i in range(nb))),
    )
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    return rng.standard_normal(lshape), rng.standard_normal(rshape), dn


@few
@given(dot_cases())
def test_dot_general_check_grads_hypothesis(case):
    lhs, rhs, dn = case
    fg.config.update("enable_x64", True)
    try:
        check_grads(lambda x, y: lax.dot_general(x, y, dn), (lhs, rhs), order=2)
        # each operand alone (the other a constant): one transpose rule at a time
        check_grads(lambda x: lax.dot_general(x, rhs, dn), (lhs,), order=1, modes="rev")
        check_grads(lambda y: lax.dot_general(lhs, y, dn), (rhs,), order=1, modes="rev")
    finally:
        fg.config.update("enable_x64", False)


@few
@given(dot_cases(), st.data())
def test_dot_general_vmap_hypothesis(case, data):
    lhs, rhs, dn = case
    size = 2
    rng = np.random.default_rng(0)
    which = data.draw(st.sampled_from(["both", "lhs", "rhs"]))
    args, axes = [], []
    for x, batched in ((lhs, which != "rhs"), (rhs, which != "lhs")):
        if batched:
            ax = data.draw(st.integers(0, x.ndim))
            args.append(np.moveaxis(rng.standard_normal((size,) + x.shape), 0, ax))
            axes.append(ax)
        else:
            args.append(x)
            axes.append(None)
    f = lambda x, y: lax.dot_general(x, y, dn)  # noqa: E731
    fg.config.update("enable_x64", True)
    try:
        check_vmap(f, args, axes, size)
        jaxpr, _ = _batched_jaxpr(lambda x, y: [f(x, y)], args, axes, size)
        assert _prims(jaxpr) == ["dot_general"], jaxpr  # only the dimension numbers change
    finally:
        fg.config.update("enable_x64", False)


def test_dot_vjp_matches_matrix_formulas(x64):
    rng = np.random.default_rng(1)
    a, b, ct = rng.standard_normal((3, 4)), rng.standard_normal((4, 5)), rng.standard_normal((3, 5))
    ga, gb = fg.vjp(lax.dot, a, b)[1](ct)
    np.testing.assert_allclose(np.asarray(ga), ct @ b.T, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(gb), a.T @ ct, rtol=1e-12)
    # batched with batch dims in the middle and contraction dims out of order
    x, y = rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((5, 3, 4, 6))
    dn = (((2, 3), (2, 0)), ((1,), (1,)))
    out = np.einsum("pbkl,lbkq->bpq", x, y)
    np.testing.assert_allclose(np.asarray(lax.dot_general(x, y, dn)), out, rtol=1e-12)
    ct = rng.standard_normal(out.shape)
    gx, gy = fg.vjp(lambda x, y: lax.dot_general(x, y, dn), x, y)[1](ct)
    np.testing.assert_allclose(np.asarray(gx), np.einsum("bpq,lbkq->pbkl", ct, y), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(gy), np.einsum("bpq,pbkl->lbkq", ct, x), rtol=1e-12)


def test_dot_general_preferred_element_type_cotangents_have_operand_dtype():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((2, 3)).astype(np.float16)
    b = rng.standard_normal((3, 4)).astype(np.float16)
    f = lambda a, b: lax.dot(a, b, preferred_element_type=np.float32)  # noqa: E731
    out, vjp_fn = fg.vjp(f, a, b)
    assert out.dtype == np.float32
    ga, gb = vjp_fn(np.ones((2, 4), np.float32))
    assert ga.dtype == np.float16 and gb.dtype == np.float16
    np.testing.assert_allclose(np.asarray(ga), np.ones((2, 4)) @ b.T.astype(np.float64), rtol=2e-3)
    _, t = fg.jvp(f, (a, b), (np.ones_like(a), np.zeros_like(b)))
    assert t.dtype == np.float32


def test_dot_general_vmap_jaxpr_keeps_unbatched_operand():
    rng = np.random.default_rng(3)
    a, b = (
        rng.standard_normal((4, 2, 3)).astype(np.float32),
        rng.standard_normal((3, 5)).astype(np.float32),
    )
    jaxpr, (d,) = _batched_jaxpr(
        lambda a, b: [lax.dot(a, b)], [np.moveaxis(a, 0, 2), b], [2, None], 4
    )
    assert _prims(jaxpr) == ["dot_general"] and d == 1, jaxpr
    assert "dimension_numbers=(((1,), (0,)), ((), ()))" in str(jaxpr), jaxpr
    jaxpr, (d,) = _batched_jaxpr(
        lambda b, a: [lax.dot(a, b)], [np.stack([b] * 4, 1), a[0]], [1, None], 4
    )
    assert _prims(jaxpr) == ["dot_general"] and d == 1, jaxpr
    jaxpr, (d,) = _batched_jaxpr(lambda a, b: [lax.dot(a, b)], [a, np.stack([b] * 4, 2)], [0, 2], 4)
    assert "dimension_numbers=(((2,), (0,)), ((0,), (2,)))" in str(jaxpr) and d == 0, jaxpr


# -- conv_general_dilated --------------------------------------------------------------------------


@st.composite
def conv_cases(draw, max_spatial=2):
    """Random convolution parameters (groups, strides, padding, dilations, layouts) and float64
    operands of a valid configuration."""
    nsp = draw(st.integers(1, max_spatial))
    groups = draw(st.sampled_from(["none", "feature", "batch"]))
    g = draw(st.integers(2, 3)) if groups != "none" else 1
    fgc, bgc = (g, 1) if groups == "feature" else (1, g) if groups == "batch" else (1, 1)
    n = bgc * draw(st.integers(1, 2))
    cin = draw(st.integers(1, 2))
    o = fgc * bgc * draw(st.integers(1, 2))
    ints = lambda lo, hi: tuple(draw(st.integers(lo, hi)) for _ in range(nsp))  # noqa: E731
    kernel, strides = ints(1, 3), ints(1, 3)
    lhs_dil, rhs_dil = ints(1, 2), ints(1, 2)
    spatial = []
    padding = []
    for k, rd, ld in zip(kernel, rhs_dil, lhs_dil):
        size = draw(st.integers(1, 5))
        span = (k - 1) * rd + 1
        lo, hi = draw(st.integers(-1, 2)), draw(st.integers(-1, 2))
        if (size - 1) * ld + 1 + lo + hi < span:  # at least one output position
            hi += span - ((size - 1) * ld + 1 + lo + hi)
        spatial.append(size)
        padding.append((lo, hi))
    lhs_shape = (n, cin * fgc) + tuple(spatial)
    rhs_shape = (o, cin) + kernel
    spec = draw(st.sampled_from(["default", "channels_last"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    lhs, rhs = rng.standard_normal(lhs_shape), rng.standard_normal(rhs_shape)
    dn = None
    if spec == "channels_last":  # NH(W)C / H(W)IO / NH(W)C
        sp = "HW"[:nsp]
        dn = ("N" + sp + "C", sp + "IO", "N" + sp + "C")
        lhs = np.moveaxis(lhs, 1, -1)
        rhs = np.moveaxis(rhs, (0, 1), (-1, -2))
    params = dict(
        window_strides=strides,
        padding=tuple(padding),
        lhs_dilation=lhs_dil,
        rhs_dilation=rhs_dil,
        dimension_numbers=dn,
        feature_group_count=fgc,
        batch_group_count=bgc,
    )
    return lhs, rhs, params


@few
@given(conv_cases())
def test_conv_check_grads_hypothesis(case):
    lhs, rhs, p = case
    fg.config.update("enable_x64", True)
    try:
        check_grads(lambda x, y: lax.conv_general_dilated(x, y, **p), (lhs, rhs), order=1)
        check_grads(lambda x: lax.conv_general_dilated(x, rhs, **p), (lhs,), order=1, modes="rev")
        check_grads(lambda y: lax.conv_general_dilated(lhs, y, **p), (rhs,), order=1, modes="rev")
    finally:
        fg.config.update("enable_x64", False)


def _conv_loop_vjp(x, w, ct, stride, pad, lhs_dil, rhs_dil, fgc):
    """The gradients of a 1-d NCH/OIH convolution by a loop over output positions."""
    n, c, h = x.shape
    o, i, k = w.shape
    xd = np.zeros((n, c, (h - 1) * lhs_dil + 1))
    xd[:, :, ::lhs_dil] = x
    xp = np.pad(xd, ((0, 0), (0, 0), pad))
    gxp, gw = np.zeros_like(xp), np.zeros_like(w)
    og = o // fgc
    for b in range(n):
        for oc in range(o):
            grp = oc // og
            for p in range(ct.shape[2]):
                for kk in range(k):
                    pos = p * stride + kk * rhs_dil
                    for ic in range(i):
                        gxp[b, grp * i + ic, pos] += ct[b, oc, p] * w[oc, ic, kk]
                        gw[oc, ic, kk] += ct[b, oc, p] * xp[b, grp * i + ic, pos]
    gx = gxp[:, :, pad[0] : gxp.shape[2] - pad[1]][:, :, ::lhs_dil]
    return gx, gw


def test_conv_vjp_matches_loop(x64):
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((2, 4, 7)), rng.standard_normal((6, 2, 3))
    for stride, pad, lhs_dil, rhs_dil in ((2, (1, 2), 1, 2), (1, (2, 0), 2, 1), (3, (0, 1), 1, 1)):

        def f(x, w, stride=stride, pad=pad, lhs_dil=lhs_dil, rhs_dil=rhs_dil):
            return lax.conv_general_dilated(
                x, w, (stride,), (pad,), (lhs_dil,), (rhs_dil,), feature_group_count=2
            )

        out, vjp_fn = fg.vjp(f, x, w)
        ct = rng.standard_normal(out.shape)
        gx, gw = vjp_fn(ct)
        want_x, want_w = _conv_loop_vjp(x, w, ct, stride, pad, lhs_dil, rhs_dil, 2)
        np.testing.assert_allclose(np.asarray(gx), want_x, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(np.asarray(gw), want_w, rtol=1e-10, atol=1e-12)


@st.composite
def conv_vmap_cases(draw):
    lhs, rhs, p = draw(conv_cases(max_spatial=1))
    which = draw(st.sampled_from(["both", "lhs", "rhs"]))
    lax_ = draw(st.integers(0, lhs.ndim)) if which != "rhs" else None
    rax = draw(st.integers(0, rhs.ndim)) if which != "lhs" else None
    return lhs, rhs, p, lax_, rax


@few
@given(conv_vmap_cases())
def test_conv_vmap_hypothesis(case):
    lhs, rhs, p, lax_, rax = case
    size = 2
    rng = np.random.default_rng(5)
    args = [
        x if ax is None else np.moveaxis(rng.standard_normal((size,) + x.shape), 0, ax)
        for x, ax in ((lhs, lax_), (rhs, rax))
    ]
    fg.config.update("enable_x64", True)
    try:
        check_vmap(lambda x, y: lax.conv_general_dilated(x, y, **p), args, [lax_, rax], size)
    finally:
        fg.config.update("enable_x64", False)


@pytest.mark.parametrize("groups", [(1, 1), (2, 1), (1, 2)])
def test_conv_vmap_folds_the_batch_without_broadcasting(groups):
    fgc, bgc = groups
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 2 * bgc, 2 * fgc, 5)).astype(np.float32)  # (B, N, C, H)
    w = rng.standard_normal((3, 2 * fgc * bgc, 2, 2)).astype(np.float32)  # (B, O, I, H)

    def f(x, w):
        return [
            lax.conv_general_dilated(
                x, w, (1,), "SAME", feature_group_count=fgc, batch_group_count=bgc
            )
        ]

    for args, dims in (([x, w[0]], [0, None]), ([x[0], w], [None, 0]), ([x, w], [0, 0])):
        jaxpr, _ = _batched_jaxpr(f, args, dims, 3)
        prims = _prims(jaxpr)
        assert "broadcast_in_dim" not in prims and prims.count("conv_general_dilated") == 1, jaxpr
        check_vmap(lambda x, w: f(x, w)[0], args, dims, 3, rtol=1e-5)


def test_conv_net_loss_gradient_matches_finite_differences(x64):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 5, 5, 1))
    w1 = rng.standard_normal((3, 3, 1, 4)) * 0.5
    w2 = rng.standard_normal((2, 2, 2, 4)) * 0.5  # 2 groups of 2 input channels
    y = rng.standard_normal((2, 2, 2, 4))
    dn = ("NHWC", "HWIO", "NHWC")

    def loss(w1, w2):
        h = fnp.tanh(lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=dn))
        h = lax.reduce_window(h, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        out = lax.conv_general_dilated(
            h,
            w2,
            (1, 1),
            ((0, 1), (1, 0)),
            rhs_dilation=(1, 1),
            dimension_numbers=dn,
            feature_group_count=2,
        )
        return fnp.mean((out - y) ** 2)

    g1, g2 = fg.grad(loss, argnums=(0, 1))(w1, w2)
    for g, w, k in ((g1, w1, 0), (g2, w2, 1)):
        num = np.zeros(w.size)
        for j in range(w.size):
            e = np.zeros(w.size)
            e[j] = 1e-6
            args_p = [w1, w2]
            args_m = [w1, w2]
            args_p[k] = w + e.reshape(w.shape)
            args_m[k] = w - e.reshape(w.shape)
            num[j] = (float(loss(*args_p)) - float(loss(*args_m))) / 2e-6
        np.testing.assert_allclose(np.ravel(g), num, rtol=1e-5, atol=1e-8)
    check_grads(loss, (w1, w2), order=2, modes=("fwd", "rev"))


def test_per_example_gradients_of_conv_and_dot(x64):
    # vmap(grad) batches the transposed convolutions and contractions (both operands batched)
    rng = np.random.default_rng(9)
    xs = rng.standard_normal((3, 1, 2, 6))  # 3 examples of a (1, 2, 6) NCH input
    w = rng.standard_normal((4, 1, 3))
    v = rng.standard_normal((4 * 3, 2))

    def loss(w, v, x):
        h = lax.conv_general_dilated(x, w, (2,), "SAME", rhs_dilation=(1,), feature_group_count=2)
        return fnp.sum(fnp.tanh(lax.dot(lax.reshape(h, (1, 12)), v)) ** 2)

    gw, gv = fg.vmap(fg.grad(loss, argnums=(0, 1)), in_axes=(None, None, 0))(w, v, xs)
    for i in range(3):
        want_w, want_v = fg.grad(loss, argnums=(0, 1))(w, v, xs[i])
        np.testing.assert_allclose(np.asarray(gw)[i], np.asarray(want_w), rtol=1e-10)
        np.testing.assert_allclose(np.asarray(gv)[i], np.asarray(want_v), rtol=1e-10)
    check_grads(lambda w, v: loss(w, v, xs[0]), (w, v), order=2, modes=("fwd", "rev"))


def test_conv_jacfwd_equals_jacrev_and_transforms_commute(x64):
    rng = np.random.default_rng(8)
    x, w = rng.standard_normal((1, 2, 4)), rng.standard_normal((2, 1, 2))

    def f(x, w):
        return lax.conv_general_dilated(x, w, (2,), ((1, 0),), (1,), (2,), feature_group_count=2)

    for a, b in zip(fg.jacfwd(f, (0, 1))(x, w), fg.jacrev(f, (0, 1))(x, w)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-14)
    assert_transforms_commute(lambda x, w: fnp.sum(f(x, w) ** 2), (x, w))


# -- sort / top_k ----------------------------------------------------------------------------------


def _distinct(shape, seed):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.5 + rng.uniform(0, 0.1, n) - n / 4).reshape(shape)


def test_sort_jvp_permutes_the_tangents(x64):
    rng = np.random.default_rng(9)
    x, t = _distinct((3, 5), 9), rng.standard_normal((3, 5))
    for dim in (0, 1):
        out, tan = fg.jvp(lambda x, dim=dim: lax.sort(x, dim), (x,), (t,))
        perm = np.argsort(x, axis=dim)
        np.testing.assert_array_equal(np.asarray(out), np.take_along_axis(x, perm, dim))
        np.testing.assert_array_equal(np.asarray(tan), np.take_along_axis(t, perm, dim))
    check_grads(lambda x: lax.sort(x, 0) ** 2, (x,), order=2, modes=("fwd", "rev"))


def test_sort_multiple_operands_and_keys(x64):
    rng = np.random.default_rng(10)
    keys = np.array([[2, 1, 2, 0], [1, 1, 0, 0]], np.int32)
    k2 = _distinct((2, 4), 10)
    vals = rng.standard_normal((2, 4))

    def f(k2, vals):
        return lax.sort((keys, k2, vals), dimension=1, num_keys=2)

    (sk, sk2, sv), (tk, tk2, tv) = fg.jvp(f, (k2, vals), (np.ones_like(k2), vals * 10))
    perm = np.lexsort((k2, keys), axis=1)
    np.testing.assert_array_equal(np.asarray(sv), np.take_along_axis(vals, perm, 1))
    np.testing.assert_array_equal(np.asarray(tv), np.take_along_axis(vals * 10, perm, 1))
    np.testing.assert_array_equal(np.asarray(tk2), np.ones((2, 4)))
    assert tk.dtype == np.int32 and not np.any(np.asarray(tk))  # integer outputs: zero
    check_grads(lambda k2, v: f(k2, v)[1:], (k2, vals), order=2, modes=("fwd", "rev"))
    g = fg.grad(lambda v: fnp.sum(lax.sort_key_val(k2, v, 0)[1] * np.arange(2.0)[:, None]))(vals)
    want = np.take_along_axis(
        np.broadcast_to(np.arange(2.0)[:, None], (2, 4)), np.argsort(np.argsort(k2, 0), 0), 0
    )
    np.testing.assert_array_equal(np.asarray(g), want)


def test_top_k_jvp_and_grad(x64):
    rng = np.random.default_rng(11)
    x, t = _distinct((3, 6), 11), rng.standard_normal((3, 6))
    (vals, idx), (tv, ti) = fg.jvp(lambda x: lax.top_k(x, 2), (x,), (t,))
    order = np.argsort(-x, axis=1)[:, :2]
    np.testing.assert_array_equal(np.asarray(idx), order)
    np.testing.assert_array_equal(np.asarray(tv), np.take_along_axis(t, order, 1))
    assert ti.dtype == np.int32 and not np.any(np.asarray(ti))
    check_grads(lambda x: lax.top_k(x, 3)[0], (x,), order=2, modes=("fwd", "rev"))
    g = fg.grad(lambda x: fnp.sum(lax.top_k(x, 2, axis=0)[0]))(x)
    want = np.zeros_like(x)
    np.put_along_axis(want, np.argsort(-x, axis=0)[:2], 1.0, 0)
    np.testing.assert_array_equal(np.asarray(g), want)


def test_top_k_ties_match_jax():
    # jax.jvp(lambda x: lax.top_k(x, 3)[0], [1, 3, 3, 2, 5, 5], arange(6)) == [4, 5, 1]
    x, t = np.array([1.0, 3.0, 3.0, 2.0, 5.0, 5.0], np.float32), np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(
        np.asarray(fg.jvp(lambda x: lax.top_k(x, 3)[0], (x,), (t,))[1]), [4.0, 5.0, 1.0]
    )
    # jax.jvp(lax.sort, same) == [0, 3, 1, 2, 4, 5] (stable)
    np.testing.assert_array_equal(
        np.asarray(fg.jvp(lax.sort, (x,), (t,))[1]), [0.0, 3.0, 1.0, 2.0, 4.0, 5.0]
    )


@pytest.mark.parametrize("dims", [(0, 0), (1, 1), (0, 1), (None, 0), (2, None)])
def test_sort_vmap_matches_loop(dims):
    rng = np.random.default_rng(12)
    size = 3
    args = [_distinct((size, 4, 5), 12), rng.standard_normal((size, 4, 5))]
    args = [a[0] if d is None else np.moveaxis(a, 0, d) for a, d in zip(args, dims)]
    check_vmap(lambda k, v: lax.sort((k, v), dimension=1), args, list(dims), size)
    if dims == (1, 1):  # operands batched at one dim: the dimension shifts, nothing moves
        jaxpr, out_dims = _batched_jaxpr(
            lambda k, v: lax.sort((k, v), dimension=1), args, list(dims), size
        )
        assert _prims(jaxpr) == ["sort"] and out_dims == [1, 1], jaxpr
        assert "dimension=2" in str(jaxpr)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_top_k_vmap_matches_loop(axis):
    x = np.moveaxis(_distinct((3, 4, 5), 13).astype(np.float32), 0, axis)
    check_vmap(lambda x: lax.top_k(x, 2), [x], [axis], 3)
    jaxpr, out_dims = _batched_jaxpr(lambda x: lax.top_k(x, 2, axis=0), [x], [axis % 3], 3)
    assert _prims(jaxpr) == ["top_k"] and out_dims == [axis % 3] * 2, jaxpr


def test_vmap_of_grad_through_sort_and_top_k(x64):
    xs = np.stack([_distinct((4, 5), s) for s in range(3)])

    def f(x):
        s = lax.sort(x, 1)
        return fnp.sum(s * np.arange(5.0)) + fnp.sum(lax.top_k(x, 2)[0] ** 2)

    g = fg.vmap(fg.grad(f))(xs)
    for i in range(3):
        np.testing.assert_allclose(np.asarray(g)[i], np.asarray(fg.grad(f)(xs[i])), rtol=1e-12)
    assert_transforms_commute(f, (xs[0],))
