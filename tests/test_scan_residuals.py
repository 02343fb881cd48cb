"""Reverse mode through scan keeps loop invariants out of the stacked residuals: a weight the
body closes over is saved once (a constant of the backward scan), not once per step; known xs
leaves are not copied; the derivatives stay right (finite differences, jit against eager,
vmap against a Python loop), also for nested scans, remat in the body and fori_loop."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import core, debug, lax
from fungrad.testing import check_grads

T, B, I, H = 7, 3, 4, 5  # distinct sizes: a stacked weight has a recognisable shape


def _scan_eqns(jaxpr):
    """Every scan equation of ``jaxpr``, also those in sub-jaxprs (bodies, jit calls)."""
    out = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "scan":
            out.append(eqn)
        for v in eqn.params.values():
            for x in v if isinstance(v, tuple) else (v,):
                if isinstance(x, core.ClosedJaxpr):
                    out += _scan_eqns(x.jaxpr)
                elif isinstance(x, core.Jaxpr):
                    out += _scan_eqns(x)
    return out


def _scan_shapes(fun, *args):
    """The shapes of every input and output of every scan in ``make_jaxpr(fun)(*args)``."""
    jaxpr = fg.make_jaxpr(fun)(*args).jaxpr
    eqns = _scan_eqns(jaxpr)
    assert eqns, "expected a scan in the jaxpr"
    return [tuple(v.aval.shape) for e in eqns for v in e.invars + e.outvars]


def _rnn_loss(w, u, xs):
    def cell(h, x):
        h = fnp.tanh(x @ u + h @ w)
        return h, fnp.sin(h)

    h, ys = lax.scan(cell, fnp.zeros((B, H), xs.dtype), xs)
    return fnp.sum(h**2) + fnp.sum(ys)


def _args(seed=0, t=T):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((H, H)) * 0.4).astype(np.float32)
    u = (rng.standard_normal((I, H)) * 0.4).astype(np.float32)
    xs = rng.standard_normal((t, B, I)).astype(np.float32)
    return w, u, xs


def _rnn_loss_ref(w, u, xs):
    """The same loss in float64 numpy, with its gradient by the chain rule written out."""
    h = np.zeros((B, H))
    hs, pre = [h], []
    for x in xs:
        h = np.tanh(x @ u + h @ w)
        hs.append(h)
    loss = np.sum(h**2) + sum(np.sum(np.sin(hh)) for hh in hs[1:])
    dw, du, dh = np.zeros_like(w), np.zeros_like(u), 2 * hs[-1]
    for t in reversed(range(len(xs))):
        dh = dh + np.cos(hs[t + 1])
        dz = dh * (1 - hs[t + 1] ** 2)
        dw += hs[t].T @ dz
        du += xs[t].T @ dz
        dh = dz @ w.T
        pre.append(dz)
    return loss, dw, du


def test_grad_jaxpr_stacks_no_weight_and_no_copy_of_xs():
    w, u, xs = _args()
    shapes = _scan_shapes(fg.grad(_rnn_loss, argnums=(0, 1)), w, u, xs)
    assert (T, H, H) not in shapes and (T, I, H) not in shapes
    # xs is read by the backward scan as it is: no scan returns a copy of it
    jaxpr = fg.make_jaxpr(fg.grad(_rnn_loss, argnums=(0, 1)))(w, u, xs).jaxpr
    outs = [tuple(v.aval.shape) for e in _scan_eqns(jaxpr) for v in e.outvars]
    assert (T, B, I) not in outs
    # the backward scan reads w as a constant
    bwd = _scan_eqns(jaxpr)[-1]
    const_shapes = [tuple(v.aval.shape) for v in bwd.invars[: bwd.params["num_consts"]]]
    assert (H, H) in const_shapes


@pytest.mark.parametrize("jit", [False, True])
def test_grad_matches_float64_reference(jit):
    w, u, xs = _args(1)
    g = fg.value_and_grad(_rnn_loss, argnums=(0, 1))
    loss, (dw, du) = (fg.jit(g) if jit else g)(w, u, xs)
    ref_loss, ref_dw, ref_du = _rnn_loss_ref(*(a.astype(np.float64) for a in (w, u, xs)))
    np.testing.assert_allclose(float(loss), ref_loss, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(dw), ref_dw, rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(np.asarray(du), ref_du, rtol=2e-4, atol=2e-5)


def test_check_grads_including_second_order():
    w, u, xs = _args(2, t=3)
    w, u, xs = (a.astype(np.float64) for a in (w, u, xs))
    with fg.enable_x64():
        check_grads(_rnn_loss, (w, u, xs), order=2, modes=("rev",))
        check_grads(_rnn_loss, (w, u, xs), order=1, modes=("fwd", "rev"))


def test_invariant_computed_from_weights_is_hoisted():
    """A residual computed from constants only (``exp(w)``, a transposed weight, a broadcast
    bias) is computed once: no scan input or output has a leading length axis for it."""
    w, _, xs = _args(3)
    b = np.linspace(-1, 1, H).astype(np.float32)

    def loss(w, b, xs):
        def cell(h, x):
            e = fnp.exp(w) * 0.5
            z = h @ e + x.sum() + fnp.broadcast_to(b, (B, H))
            return fnp.tanh(z) * fnp.cos(b), None

        h, _ = lax.scan(cell, fnp.ones((B, H), xs.dtype), xs)
        return fnp.sum(h)

    shapes = _scan_shapes(fg.grad(loss, argnums=(0, 1)), w, b, xs)
    assert (T, H, H) not in shapes and (T, H) not in shapes and (T, B, H) in shapes
    assert not any(len(s) == 3 and s[0] == T and s[1:] == (H,) for s in shapes)
    eager = fg.grad(loss, argnums=(0, 1))(w, b, xs)
    jitted = fg.jit(fg.grad(loss, argnums=(0, 1)))(w, b, xs)
    for a, c in zip(eager, jitted):
        np.testing.assert_allclose(np.asarray(a), np.asarray(c), rtol=1e-5, atol=1e-6)
    with fg.enable_x64():
        check_grads(loss, tuple(a.astype(np.float64) for a in (w, b, xs[:3])), 1, ("rev",))


def test_consts_also_used_outside_the_scan():
    w, _, xs = _args(4)

    def loss(w, xs):
        h, ys = lax.scan(lambda h, x: (fnp.tanh(h @ w + x[:, :H].sum()), h @ w), w[:B], xs)
        return fnp.sum(h * w[:B]) + fnp.sum(ys) + fnp.sum(w**3)

    shapes = _scan_shapes(fg.grad(loss), w, xs)
    assert (T, H, H) not in shapes
    with fg.enable_x64():
        check_grads(loss, (w.astype(np.float64), xs.astype(np.float64)), 1, ("fwd", "rev"))
    np.testing.assert_allclose(
        np.asarray(fg.jit(fg.grad(loss))(w, xs)), np.asarray(fg.grad(loss)(w, xs)), rtol=1e-5
    )


def test_nested_scans():
    w, u, xs = _args(5)
    xs2 = xs.reshape(T, B, 2, 2)  # an inner scan over axis of length 2 of each step's x

    def loss(w, u, xs2):
        def outer(h, x):
            def inner(h, xi):
                return fnp.tanh(h @ w + xi.sum() * u[0]), None

            h, _ = lax.scan(inner, h, fnp.moveaxis(x, 1, 0))
            return h, h[0]

        h, ys = lax.scan(outer, fnp.zeros((B, H), xs2.dtype), xs2)
        return fnp.sum(h) + fnp.sum(ys**2)

    shapes = _scan_shapes(fg.grad(loss, argnums=(0, 1)), w, u, xs2)
    for bad in [(T, H, H), (2, H, H), (T, 2, H, H), (T, I, H), (2, I, H)]:
        assert bad not in shapes, bad
    eager = fg.grad(loss, argnums=(0, 1))(w, u, xs2)
    jitted = fg.jit(fg.grad(loss, argnums=(0, 1)))(w, u, xs2)
    for a, c in zip(eager, jitted):
        np.testing.assert_allclose(np.asarray(a), np.asarray(c), rtol=1e-5, atol=1e-6)
    with fg.enable_x64():
        args64 = (w.astype(np.float64), u.astype(np.float64), xs2[:2].astype(np.float64))
        check_grads(loss, args64, 1, ("rev",))


def test_remat_inside_scan():
    w, u, xs = _args(6)

    def make_loss(remat):
        def loss(w, u, xs):
            def cell(h, x):
                h = fnp.tanh(x @ u + h @ w)
                return h, fnp.sin(h)

            cell = fg.checkpoint(cell) if remat else cell
            h, ys = lax.scan(cell, fnp.zeros((B, H), xs.dtype), xs)
            return fnp.sum(h**2) + fnp.sum(ys)

        return loss

    g = fg.grad(make_loss(True), argnums=(0, 1))
    shapes = _scan_shapes(g, w, u, xs)
    assert (T, H, H) not in shapes and (T, I, H) not in shapes
    ref = fg.grad(make_loss(False), argnums=(0, 1))(w, u, xs)
    for fun in (g, fg.jit(g)):
        for a, c in zip(fun(w, u, xs), ref):
            np.testing.assert_allclose(np.asarray(a), np.asarray(c), rtol=1e-5, atol=1e-6)


def test_vmap_of_grad_matches_a_loop():
    rng = np.random.default_rng(7)
    ws = (rng.standard_normal((3, H, H)) * 0.4).astype(np.float32)
    _, u, xs = _args(7)
    g = fg.grad(_rnn_loss)
    got = fg.vmap(g, in_axes=(0, None, None))(ws, u, xs)
    want = np.stack([np.asarray(g(w, u, xs)) for w in ws])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    got_jit = fg.jit(fg.vmap(g, in_axes=(0, None, None)))(ws, u, xs)
    np.testing.assert_allclose(np.asarray(got_jit), want, rtol=1e-5, atol=1e-6)


def test_fori_loop_closed_over_weight():
    w, _, _ = _args(8)

    def loss(w, h0):
        h = lax.fori_loop(0, T, lambda i, h: fnp.tanh(h @ w) + 0.1 * i, h0)
        return fnp.sum(h)

    h0 = np.ones((B, H), np.float32)
    shapes = _scan_shapes(fg.grad(loss), w, h0)
    assert (T, H, H) not in shapes
    with fg.enable_x64():
        check_grads(loss, (w.astype(np.float64), h0.astype(np.float64)), 1, ("rev",))


def test_callback_reading_only_constants_runs_every_step():
    """Equations with side effects are never hoisted: a callback on a constant runs once per
    iteration, also in the forward pass of grad."""
    w, u, xs = _args(9)
    calls = []

    def loss(w, xs):
        def cell(h, x):
            debug.callback(lambda v: calls.append(float(v)), w[0, 0])
            return fnp.tanh(h @ w + x[:, :H]), None

        h, _ = lax.scan(cell, fnp.zeros((B, H), xs.dtype), xs)
        return fnp.sum(h)

    xs5 = np.concatenate([xs, xs], axis=2)[:, :, :H]
    fg.grad(loss)(w, xs5)
    assert len(calls) == T
    calls.clear()
    fg.jit(fg.grad(loss))(w, xs5)
    assert len(calls) == T


@settings(max_examples=8, deadline=None)
@given(t=st.integers(0, 4), seed=st.integers(0, 2**16))
def test_lengths_including_zero(t, seed):
    w, u, xs = _args(seed, t=t)
    dw, du = fg.grad(_rnn_loss, argnums=(0, 1))(w, u, xs)
    _, ref_dw, ref_du = _rnn_loss_ref(*(a.astype(np.float64) for a in (w, u, xs)))
    np.testing.assert_allclose(np.asarray(dw), ref_dw, rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(np.asarray(du), ref_du, rtol=2e-4, atol=2e-5)


def test_planned_temporaries_do_not_grow_with_length_times_weights():
    """The jitted gradient's temporaries hold per-step activations, not per-step weights: with
    a 64x64 weight over 40 steps a stacked weight alone would take 655 KB."""
    n, t, b = 64, 40, 2
    rng = np.random.default_rng(10)
    w = (rng.standard_normal((n, n)) * 0.1).astype(np.float32)
    xs = rng.standard_normal((t, b, n)).astype(np.float32)

    def loss(w, xs):
        h, _ = lax.scan(lambda h, x: (fnp.tanh(h @ w + x), None), fnp.zeros((b, n)), xs)
        return fnp.sum(h)

    mem = fg.jit(fg.grad(loss)).lower(w, xs).compile().memory_analysis()
    assert mem.temp_size_in_bytes < t * n * n * 4 // 2


def _lstm_loss(wx, wh, b, xs):
    def sigmoid(z):
        return 1 / (1 + fnp.exp(-z))

    def cell(carry, x):
        h, c = carry
        z = x @ wx + h @ wh + b
        i, f = sigmoid(z[:, :H]), sigmoid(z[:, H : 2 * H])
        g, o = fnp.tanh(z[:, 2 * H : 3 * H]), sigmoid(z[:, 3 * H :])
        c = f * c + i * g
        h = o * fnp.tanh(c)
        return (h, c), h

    h0 = fnp.zeros((B, H), xs.dtype)
    (h, _), hs = lax.scan(cell, (h0, h0), xs)
    return fnp.sum(h**2) + fnp.mean(hs**3)


def _lstm_args(seed):
    rng = np.random.default_rng(seed)
    wx = (rng.standard_normal((I, 4 * H)) * 0.3).astype(np.float32)
    wh = (rng.standard_normal((H, 4 * H)) * 0.3).astype(np.float32)
    b = (rng.standard_normal(4 * H) * 0.1).astype(np.float32)
    xs = rng.standard_normal((T, B, I)).astype(np.float32)
    return wx, wh, b, xs


def test_lstm_saves_only_values_cheap_arithmetic_cannot_rebuild():
    """Per step an LSTM cell's backward pass needs the gates' sigmoid/tanh values and their
    derivatives; the derivatives (``1 - t``, ``(1 + e) ** -2``, ...) are recomputed from the
    saved exponentials and tanh outputs rather than saved: seven stacked [T, B, H] residuals
    (previous h and c, three exponentials, two tanh) instead of fifteen; the output hs is
    not saved twice."""
    args = _lstm_args(11)
    g = fg.grad(_lstm_loss, argnums=(0, 1, 2))
    jaxpr = fg.make_jaxpr(g)(*args).jaxpr
    fwd = _scan_eqns(jaxpr)[0]
    stacked = [v for v in fwd.outvars if tuple(v.aval.shape) == (T, B, H)]
    assert len(stacked) == 1 + 7  # hs, then the residuals
    for bad in [(T, H, 4 * H), (T, I, 4 * H), (T, 4 * H), (T, B, I)]:
        assert bad not in [tuple(v.aval.shape) for v in fwd.outvars]
    eager, jitted = g(*args), fg.jit(g)(*args)
    for a, c in zip(eager, jitted):
        np.testing.assert_allclose(np.asarray(a), np.asarray(c), rtol=1e-5, atol=1e-6)
    with fg.enable_x64():
        args64 = tuple(a.astype(np.float64) for a in args)
        args64 = args64[:3] + (args64[3][:3],)
        check_grads(_lstm_loss, args64, 1, ("rev",))


def test_recomputed_residuals_under_vmap_and_second_order():
    args = _lstm_args(12)
    wxs = np.stack([args[0], args[0] * 0.5])
    g = fg.grad(_lstm_loss)
    got = fg.vmap(g, in_axes=(0, None, None, None))(wxs, *args[1:])
    want = np.stack([np.asarray(g(wx, *args[1:])) for wx in wxs])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    with fg.enable_x64():
        args64 = tuple(a.astype(np.float64) for a in args)
        args64 = args64[:3] + (args64[3][:2],)
        check_grads(_lstm_loss, args64, 2, ("fwd", "rev"))


def test_unused_ys_gets_no_stacked_zero_cotangent():
    """A ys output the loss ignores has a symbolic zero cotangent; the backward scan does not
    read a [T, ...] array of zeros for it."""
    rng = np.random.default_rng(13)
    w = (rng.standard_normal((H, H)) * 0.4).astype(np.float32)
    xs = rng.standard_normal((T, B, H)).astype(np.float32)

    def loss(w, xs):
        def cell(h, x):
            h = fnp.tanh(h @ w + x)
            return h, (h * 3, h * 2)

        h, (_, ys) = lax.scan(cell, fnp.zeros((B, H), xs.dtype), xs)
        return fnp.sum(h) + fnp.sum(ys[-1])

    g = fg.grad(loss, argnums=(0, 1))
    bwd = _scan_eqns(fg.make_jaxpr(g)(w, xs).jaxpr)[-1]
    stacked = [v for v in bwd.invars if tuple(v.aval.shape) == (T, B, H)]
    # the cotangent of the ys read, the tanh values and the previous h: not the unread ys
    assert len(stacked) == 3
    for a, c in zip(g(w, xs), fg.jit(g)(w, xs)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(c), rtol=1e-5, atol=1e-6)
    with fg.enable_x64():
        check_grads(loss, (w.astype(np.float64), xs[:3].astype(np.float64)), 1, ("rev",))


def test_reverse_scan_with_integer_and_broadcast_constants():
    """Constants of several kinds (an int index array, a scalar, a bias broadcast in the body)
    in a reverse scan; residuals forwarded from xs keep their step order."""
    rng = np.random.default_rng(14)
    w = (rng.standard_normal((H, H)) * 0.4).astype(np.float64)
    b = rng.standard_normal(H).astype(np.float64)
    idx = np.array([4, 0, 2], np.int32)
    xs = rng.standard_normal((T, B, H)).astype(np.float64)

    def loss(w, b, s, xs):
        def cell(h, x):
            z = h @ w[:, idx].sum(1, keepdims=True) * x + fnp.broadcast_to(b, (B, H)) * s
            h = fnp.where(z > 0, fnp.tanh(z), 0.5 * z)
            return h, x * h

        h, ys = lax.scan(cell, fnp.ones((B, H), xs.dtype), xs, reverse=True)
        return fnp.sum(h**2) + fnp.sum(ys * fnp.arange(T, dtype=xs.dtype)[:, None, None])

    with fg.enable_x64():
        args = (w, b, np.float64(0.7), xs)
        shapes = _scan_shapes(fg.grad(loss, argnums=(0, 1, 2)), *args)
        assert (T, H, H) not in shapes and (T, H) not in shapes and (T, B, H) in shapes
        check_grads(loss, args, 1, ("fwd", "rev"))
        g = fg.grad(loss, argnums=(0, 1, 2))
        for a, c in zip(g(*args), fg.jit(g)(*args)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(c), rtol=1e-10, atol=1e-12)
