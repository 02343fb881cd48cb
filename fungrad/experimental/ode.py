"""``fungrad.experimental.ode.odeint``: adaptive Dormand-Prince integration with adjoint
gradients, jax.experimental.ode's API.

``odeint(func, y0, t, *args)`` solves ``dy/dt = func(y, t, *args)`` from ``y(t[0]) = y0`` and
returns ``y`` at every time of the increasing 1-D array ``t`` (a pytree like ``y0`` with a
leading time axis). Steps are the embedded 5(4) Runge-Kutta pair of Dormand and Prince with
the error per step kept below ``atol + rtol * |y|`` (RMS over components), the step grown or
shrunk by ``0.9 * err^(-1/5)`` within ``[0.2, 10]``; each output time is hit exactly by
shortening the step that would pass it (no interpolation). The integration runs in
``lax.while_loop``s inside a ``lax.scan`` over the output intervals, so it works under ``jit``
and ``vmap``.

Reverse-mode derivatives (with respect to ``y0``, ``t`` and the ``args``) use the adjoint
method (Pontryagin; Chen et al. 2018): the augmented system ``[y, a, a^T df/dargs]`` with
``da/dt = -a^T df/dy`` is integrated backwards over each interval, adding the output
cotangent at each output time. Forward-mode differentiation of ``odeint`` is not available
(as in JAX, which defines only the reverse rule).
"""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad import lax, tree_util
from fungrad.flatten_util import ravel_pytree

__all__ = ["odeint"]

# Dormand-Prince 5(4) tableau.
_C = (0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0)
_A = (
    (),
    (1 / 5,),
    (3 / 40, 9 / 40),
    (44 / 45, -56 / 15, 32 / 9),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
    (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84),
)
_B5 = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0)
_B4 = (5179 / 57600, 0.0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40)
_E = tuple(b5 - b4 for b5, b4 in zip(_B5, _B4))


def _rms(x):
    return fnp.sqrt(fnp.mean(x * x))


def _dopri_step(f, y, t, dt):
    """One Dormand-Prince step: the 5th-order solution and the embedded error estimate."""
    ks = []
    for i in range(7):
        yi = y
        for a, k in zip(_A[i], ks):
            if a:
                yi = yi + (dt * a) * k
        ks.append(f(yi, t + _C[i] * dt))
    y_new = y
    err = fnp.zeros_like(y)
    for b, e, k in zip(_B5, _E, ks):
        if b:
            y_new = y_new + (dt * b) * k
        if e:
            err = err + (dt * e) * k
    return y_new, err


def _initial_step(f, y0, t0, rtol, atol):
    """Hairer, Norsett & Wanner's starting step for a 5th-order method."""
    f0 = f(y0, t0)
    scale = atol + fnp.abs(y0) * rtol
    d0, d1 = _rms(y0 / scale), _rms(f0 / scale)
    h0 = fnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / fnp.where(d1 == 0, 1.0, d1))
    f1 = f(y0 + h0 * f0, t0 + h0)
    d2 = _rms((f1 - f0) / scale) / h0
    big = fnp.maximum(d1, d2)
    h1 = fnp.where(
        big <= 1e-15,
        fnp.maximum(1e-6, h0 * 1e-3),
        (0.01 / fnp.where(big <= 1e-15, 1.0, big)) ** (1.0 / 5),
    )
    return fnp.minimum(100 * h0, h1)


def _integrate(f, y, t, t_end, dt, rtol, atol, mxstep, hmax):
    """``y`` at ``t_end`` from ``y`` at ``t`` (``t <= t_end``), and the next step proposal."""

    def cond(s):
        y, t, dt, n = s
        return (t < t_end) & (n < mxstep)

    def body(s):
        y, t, dt, n = s
        step = fnp.minimum(fnp.minimum(dt, hmax), t_end - t)
        clamped = step < dt
        y_new, err = _dopri_step(f, y, t, step)
        tol = atol + rtol * fnp.maximum(fnp.abs(y), fnp.abs(y_new))
        ratio = _rms(err / tol)
        ok = (ratio <= 1.0) & fnp.all(fnp.isfinite(y_new))
        factor = fnp.where(
            ratio == 0, 10.0, fnp.clip(0.9 * fnp.where(ratio == 0, 1.0, ratio) ** -0.2, 0.2, 10.0)
        )
        factor = fnp.where(fnp.isfinite(ratio), factor, 0.2)
        next_dt = fnp.where(ok & clamped, fnp.maximum(dt, step * factor), step * factor)
        t_new = fnp.where(clamped, t_end, t + step)
        return (fnp.where(ok, y_new, y), fnp.where(ok, t_new, t), next_dt, n + 1)

    y, t, dt, _ = lax.while_loop(cond, body, (y, t, dt, fnp.zeros((), np.int32)))
    return y, dt


def _solve(f, y0, ts, rtol, atol, mxstep, hmax):
    """``y`` at every time of ``ts`` (rows), for flat ``y0``."""
    dt0 = _initial_step(f, y0, ts[0], rtol, atol)

    def interval(carry, t_pair):
        y, dt = carry
        y, dt = _integrate(f, y, t_pair[0], t_pair[1], dt, rtol, atol, mxstep, hmax)
        return (y, dt), y

    pairs = fnp.stack([ts[:-1], ts[1:]], axis=1)
    _, ys = lax.scan(interval, (y0, dt0), pairs)
    return fnp.concatenate([y0[None], ys], axis=0)


def odeint(func, y0, t, *args, rtol=1.4e-8, atol=1.4e-8, mxstep=np.inf, hmax=np.inf):
    """Integrate ``dy/dt = func(y, t, *args)`` from ``y0`` at ``t[0]``; ``y`` at each time of
    ``t`` (increasing), stacked along a new leading axis of every leaf of ``y0``.

    ``rtol``/``atol`` bound each step's error, ``mxstep`` the steps per output interval,
    ``hmax`` the step size. Differentiable in reverse mode in ``y0``, ``t`` and ``args``."""
    if not callable(func):
        raise TypeError(f"odeint: func must be callable, got {type(func).__name__}")
    for name, value in (("rtol", rtol), ("atol", atol), ("mxstep", mxstep), ("hmax", hmax)):
        if not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, bool):
            raise TypeError(f"odeint: {name} must be a Python or numpy scalar, got {value!r}")
    t = fnp.asarray(t)
    if t.ndim != 1 or t.shape[0] < 1:
        raise ValueError(f"odeint: t must be a non-empty 1-D array of times, got shape {t.shape}")
    if not fnp.issubdtype(t.dtype, fnp.floating):
        t = t.astype(fnp.result_type(float))
    return _odeint(func, float(rtol), float(atol), float(mxstep), float(hmax), y0, t, *args)


def _flat_func(func, unravel, args):
    def f(y, t):
        out = func(unravel(y), t, *args)
        flat, _ = ravel_pytree(out)
        return flat.astype(y.dtype)

    return f


def _odeint_value(func, rtol, atol, mxstep, hmax, y0, t, *args):
    flat0, unravel = ravel_pytree(y0)
    if t.shape[0] == 1:
        ys = flat0[None]
    else:
        ys = _solve(
            _flat_func(func, unravel, args), flat0, t.astype(flat0.dtype), rtol, atol, mxstep, hmax
        )
    return _unravel_rows(unravel, ys)


def _unravel_rows(unravel, ys):
    from fungrad.transforms.vmap_api import vmap

    return vmap(unravel)(ys)


def _odeint_fwd(func, rtol, atol, mxstep, hmax, y0, t, *args):
    ys = _odeint_value(func, rtol, atol, mxstep, hmax, y0, t, *args)
    return ys, (ys, t, args)


def _odeint_bwd(func, rtol, atol, mxstep, hmax, res, ys_bar):
    from fungrad.transforms.autodiff import vjp

    ys, t, args = res
    flat_ys = _ravel_rows(ys)
    flat_bar = _ravel_rows(ys_bar)
    _, unravel = ravel_pytree(tree_util.tree_map(lambda x: x[0], ys))
    args_flat, unravel_args = ravel_pytree(args)
    dtype = flat_ys.dtype
    n_y, n_p = flat_ys.shape[1], args_flat.shape[0]

    def f(y, tt, p):
        out = func(unravel(y), tt, *unravel_args(p))
        return ravel_pytree(out)[0].astype(dtype)

    def aug_dynamics(state, s):
        # backwards in time: tt = -s, d/ds = -d/dt
        y, a = state[:n_y], state[n_y : 2 * n_y]
        tt = -s
        dy, pullback = vjp(lambda y, p: f(y, tt, p), y, args_flat)
        a_y, a_p = pullback(a)
        return fnp.concatenate([-dy, a_y, a_p.astype(dtype)])

    t = t.astype(dtype)
    # output-time cotangents: d L / d t_i = ys_bar_i . f(y_i, t_i), i >= 1
    f_at = [f(flat_ys[i], t[i], args_flat) for i in range(t.shape[0])]
    t_bar = fnp.stack([fnp.dot(flat_bar[i], f_at[i]) for i in range(t.shape[0])])

    def interval(carry, i):
        a, p_bar = carry
        y_i = lax.dynamic_index_in_dim(flat_ys, i, 0, keepdims=False)
        state = fnp.concatenate([y_i, a, p_bar])
        t_hi = lax.dynamic_index_in_dim(t, i, 0, keepdims=False)
        t_lo = lax.dynamic_index_in_dim(t, i - 1, 0, keepdims=False)
        dt0 = _initial_step(aug_dynamics, state, -t_hi, rtol, atol)
        state, _ = _integrate(aug_dynamics, state, -t_hi, -t_lo, dt0, rtol, atol, mxstep, hmax)
        a = state[n_y : 2 * n_y] + lax.dynamic_index_in_dim(flat_bar, i - 1, 0, keepdims=False)
        return (a, state[2 * n_y :]), None

    n_t = t.shape[0]
    a = flat_bar[n_t - 1]
    p_bar = fnp.zeros((n_p,), dtype)
    if n_t > 1:
        (a, p_bar), _ = lax.scan(interval, (a, p_bar), fnp.arange(n_t - 1, 0, -1))
    t0_bar = -fnp.dot(a - flat_bar[0], f_at[0])
    t_bar = t_bar.at[0].set(t0_bar)
    return (unravel(a), t_bar.astype(t.dtype), *unravel_args(p_bar))


def _ravel_rows(tree):
    leaves = tree_util.tree_leaves(tree)
    return fnp.concatenate([fnp.reshape(x, (x.shape[0], -1)) for x in leaves], axis=1)


_odeint_fn = None


def _odeint(func, rtol, atol, mxstep, hmax, y0, t, *args):
    global _odeint_fn
    if _odeint_fn is None:
        from fungrad.transforms.custom import custom_vjp

        _odeint_fn = custom_vjp(_odeint_value, nondiff_argnums=(0, 1, 2, 3, 4))
        _odeint_fn.defvjp(_odeint_fwd, _odeint_bwd)
    return _odeint_fn(func, rtol, atol, mxstep, hmax, y0, t, *args)
