"""The Gamma sampler behind ``fungrad.random.gamma`` / ``loggamma`` and its derivative.

Sampling follows JAX's documented algorithm, so a key gives JAX's numbers (up to float rounding
in ``log``/``pow``): the key is split into one key per element (row-major), and each element
runs Marsaglia and Tsang's rejection method ("A simple method for generating gamma variables",
2000) on its own key; ``a < 1`` is boosted to ``a + 1`` and multiplied by ``U ** (1 / a)`` (in
log space for ``loggamma``, which keeps tiny samples representable).

The derivative with respect to ``a`` is the implicit reparameterisation gradient (Figurnov et
al., 2018): the sample ``x`` is held at a fixed CDF value, so
``dx/da = -(dP(a, x)/da) / (dP(a, x)/dx)`` with ``P`` the regularized lower incomplete gamma
function. ``dP/da`` comes from differentiating ``P``'s power series (small ``x``) or the
continued fraction of ``1 - P`` (``x > max(1, a)``) term by term.
"""

from __future__ import annotations

import functools

import numpy as np

from fungrad import dtypes, lax
from fungrad.array import Array
from fungrad.transforms.custom import custom_jvp

__all__ = ["gamma_samples"]


def _c(x, value):
    """The constant ``value`` in ``x``'s dtype."""
    return Array(np.array(value, x.dtype))


def _keys(key, num: int):
    from fungrad.random import _split

    keys = _split(key, num)
    return [lax.index_in_dim(keys, i, keepdims=False) for i in range(num)]


def _gamma_one(key, alpha, log_space: bool):
    """One Gamma(alpha) sample (or its log) for a scalar ``alpha``: Marsaglia-Tsang."""
    from fungrad.random import _normal, _uniform

    dtype = alpha.dtype
    zero, one, two, minus_one = _c(alpha, 0), _c(alpha, 1), _c(alpha, 2), _c(alpha, -1)
    third = _c(alpha, 1.0 / 3.0)
    no_boost = lax.ge(alpha, one)
    alpha_orig = alpha
    alpha = lax.select(no_boost, alpha, lax.add(alpha, one))
    d = lax.sub(alpha, third)
    c = lax.div(third, lax.sqrt(d))

    def rejected(state):
        _, x2, v3, u = state
        squeeze = lax.ge(u, lax.sub(one, lax.mul(_c(alpha, 0.0331), lax.mul(x2, x2))))
        log_test = lax.ge(
            lax.log(u),
            lax.add(
                lax.mul(x2, _c(alpha, 0.5)), lax.mul(d, lax.add(lax.sub(one, v3), lax.log(v3)))
            ),
        )
        return lax.bitwise_and(squeeze, log_test)

    def next_positive_v(state):
        key, subkey = _keys(state[0], 2)
        x = _normal(subkey, (), dtype)
        return key, x, lax.add(one, lax.mul(x, c))

    def propose(state):
        key, x_key, u_key = _keys(state[0], 3)
        _, x, v = lax.while_loop(
            lambda s: lax.le(s[2], zero), next_positive_v, (x_key, zero, minus_one)
        )
        u = _uniform(u_key, (), dtype, 0.0, 1.0)
        return key, lax.mul(x, x), lax.mul(lax.mul(v, v), v), u

    key, subkey = _keys(key, 2)
    # The initial state (x2=0, v3=1, u=2) is always "rejected", so the loop runs at least once.
    _, _, v3, _ = lax.while_loop(rejected, propose, (key, zero, one, two))
    if log_space:
        u = _uniform(subkey, (), dtype, 0.0, 1.0)
        log_u = lax.log1p(lax.neg(u))  # log(1 - u): -Exponential(1)
        skip = lax.bitwise_or(no_boost, lax.eq(log_u, zero))
        log_boost = lax.select(skip, zero, lax.mul(log_u, lax.div(one, alpha_orig)))
        return lax.add(lax.add(lax.log(d), lax.log(v3)), log_boost)
    u = lax.sub(one, _uniform(subkey, (), dtype, 0.0, 1.0))
    boost = lax.select(no_boost, one, lax.pow(u, lax.div(one, alpha_orig)))
    return lax.mul(lax.mul(d, v3), boost)


def _gamma_impl(key, a, log_space: bool):
    from fungrad.api import vmap

    n = int(np.prod(a.shape))
    if n == 0:
        return lax.full_like(a, 0)
    from fungrad.random import _split

    keys = _split(key, n)
    flat = lax.reshape(a, (n,))
    samples = vmap(functools.partial(_gamma_one, log_space=log_space))(keys, flat)
    return lax.reshape(samples, tuple(a.shape))


@functools.partial(custom_jvp, nondiff_argnums=(2,))
def gamma_samples(key, a, log_space: bool):
    """Gamma(a) samples (their logs if ``log_space``) of ``a``'s shape and dtype, one key per
    element of ``a`` split from ``key``; differentiable in ``a``."""
    return _gamma_impl(key, a, log_space)


@gamma_samples.defjvp
def _gamma_samples_jvp(log_space, primals, tangents):
    key, a = primals
    _, a_dot = tangents
    ans = gamma_samples(key, a, log_space)
    return ans, lax.mul(a_dot, _gamma_grad(ans, a, log_space))


def _gamma_grad(sample, a, log_space: bool):
    if not log_space:
        return random_gamma_grad(a, sample)
    # d log(x) / da = (dx / da) / x; exp may underflow to 0: use the smallest normal instead.
    x = lax.exp(sample)
    tiny = _c(x, dtypes.finfo(x.dtype).tiny)
    x = lax.select(lax.eq(x, _c(x, 0)), lax.full_like(x, tiny), x)
    return lax.div(random_gamma_grad(a, x), x)


def _any(pred):
    return lax.reduce_or(pred, tuple(range(pred.ndim)))


def _select_all(mask, new, old):
    return tuple(lax.select(mask, n, o) for n, o in zip(new, old))


def _series_grad(a, x, enabled):
    """``dx/da`` from ``P(a, x) = x**a e**-x / Gamma(a + 1) * S`` with
    ``S = sum_n x**n / ((a+1)...(a+n))``, each term and its a-derivative built recursively."""
    eps = _c(a, dtypes.finfo(a.dtype).eps)
    one, zero = _c(a, 1), _c(a, 0)

    def body(state):
        enabled, *old = state
        r, c, s, dc, ds = old
        r = lax.add(r, one)
        dc = lax.sub(lax.mul(dc, lax.div(x, r)), lax.div(lax.mul(c, x), lax.mul(r, r)))
        ds = lax.add(ds, dc)
        c = lax.mul(c, lax.div(x, r))
        s = lax.add(s, c)
        going = lax.bitwise_and(enabled, lax.gt(lax.abs(lax.div(dc, ds)), eps))
        return (going, *_select_all(enabled, (r, c, s, dc, ds), old))

    init = (
        enabled,
        a,
        lax.full_like(a, one),
        lax.full_like(a, one),
        lax.full_like(a, zero),
        lax.full_like(a, zero),
    )
    _, _, _, s, _, ds = lax.while_loop(lambda st: _any(st[0]), body, init)
    dlog = lax.sub(lax.log(x), lax.digamma(lax.add(a, one)))
    return lax.div(lax.mul(lax.neg(lax.add(ds, lax.mul(s, dlog))), x), a)


def _continued_fraction_grad(a, x, enabled):
    """``dx/da`` from ``1 - P(a, x) = x**a e**-x / Gamma(a) * F`` with ``F`` the continued
    fraction evaluated by its convergents ``p_k / q_k`` (with their a-derivatives), rescaled
    when they grow large; at most 2000 terms."""
    eps_value = dtypes.finfo(a.dtype).eps
    eps = _c(a, eps_value)
    big = _c(a, 1.0 / eps_value)
    one, two, zero = _c(a, 1), _c(a, 2), _c(a, 0)

    def body(state):
        enabled, k, *old = state
        f, y, z, pkm1, qkm1, pkm2, qkm2, dpkm2, dqkm2, dpkm1, dqkm1, df = old
        k = lax.add(k, one)
        y = lax.add(y, one)
        z = lax.add(z, two)
        yk = lax.mul(y, k)
        pk = lax.sub(lax.mul(pkm1, z), lax.mul(pkm2, yk))
        qk = lax.sub(lax.mul(qkm1, z), lax.mul(qkm2, yk))
        qk_nonzero = lax.ne(qk, zero)
        f = lax.select(qk_nonzero, lax.div(pk, qk), f)
        dpk = lax.add(
            lax.sub(lax.sub(lax.mul(dpkm1, z), pkm1), lax.mul(dpkm2, yk)), lax.mul(pkm2, k)
        )
        dqk = lax.add(
            lax.sub(lax.sub(lax.mul(dqkm1, z), qkm1), lax.mul(dqkm2, yk)), lax.mul(qkm2, k)
        )
        df_new = lax.select(qk_nonzero, lax.div(lax.sub(dpk, lax.mul(f, dqk)), qk), df)
        change = lax.select(qk_nonzero, lax.abs(lax.sub(df_new, df)), lax.full_like(df, one))
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        dpkm2, dqkm2, dpkm1, dqkm1 = dpkm1, dqkm1, dpk, dqk
        rescale = lax.gt(lax.abs(pk), big)
        pkm2, pkm1, qkm2, qkm1, dpkm2, dqkm2, dpkm1, dqkm1 = (
            lax.select(rescale, lax.mul(v, eps), v)
            for v in (pkm2, pkm1, qkm2, qkm1, dpkm2, dqkm2, dpkm1, dqkm1)
        )
        going = lax.bitwise_and(enabled, lax.gt(change, eps))
        new = (f, y, z, pkm1, qkm1, pkm2, qkm2, dpkm2, dqkm2, dpkm1, dqkm1, df_new)
        return (going, k, *_select_all(enabled, new, old))

    y = lax.sub(one, a)
    z = lax.add(lax.add(x, y), one)
    pkm2, qkm2 = lax.full_like(x, one), x
    pkm1 = lax.add(x, one)
    qkm1 = lax.mul(z, x)
    f = lax.div(pkm1, qkm1)
    zeros = lax.full_like(x, zero)
    dqkm1 = lax.neg(x)
    df = lax.div(lax.sub(zeros, lax.mul(f, dqkm1)), qkm1)
    init = (enabled, zero, f, y, z, pkm1, qkm1, pkm2, qkm2, zeros, zeros, zeros, dqkm1, df)
    out = lax.while_loop(
        lambda st: lax.bitwise_and(lax.lt(st[1], _c(a, 2000)), _any(st[0])), body, init
    )
    f, df = out[2], out[-1]
    dlog = lax.sub(lax.log(x), lax.digamma(a))
    return lax.mul(lax.add(df, lax.mul(f, dlog)), x)


def random_gamma_grad(a, x):
    """``dx/da`` for a Gamma(a) sample ``x`` at fixed CDF value (elementwise; same shapes and
    dtype). ``x == 0`` gives 0; ``x < 0``, ``a <= 0`` or NaN give NaN."""
    one, zero = _c(a, 1), _c(a, 0)
    is_nan = lax.bitwise_or(lax.ne(a, a), lax.ne(x, x))
    x_is_zero = lax.eq(x, zero)
    domain_error = lax.bitwise_or(lax.lt(x, zero), lax.le(a, zero))
    use_cf = lax.bitwise_and(lax.gt(x, one), lax.gt(x, a))
    log_ax = lax.sub(lax.sub(lax.mul(a, lax.log(x)), x), lax.lgamma(a))
    underflow = lax.lt(log_ax, _c(a, -np.log(dtypes.finfo(a.dtype).max)))
    enabled = lax.bitwise_not(
        lax.bitwise_or(lax.bitwise_or(x_is_zero, domain_error), lax.bitwise_or(underflow, is_nan))
    )
    out = lax.select(
        use_cf,
        _continued_fraction_grad(a, x, lax.bitwise_and(enabled, use_cf)),
        _series_grad(a, x, lax.bitwise_and(enabled, lax.bitwise_not(use_cf))),
    )
    out = lax.select(x_is_zero, lax.full_like(out, zero), out)
    return lax.select(lax.bitwise_or(domain_error, is_nan), lax.full_like(out, _c(a, np.nan)), out)
