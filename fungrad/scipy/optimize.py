"""``fungrad.scipy.optimize``: ``minimize`` with ``method="BFGS"``, jax.scipy.optimize's API.

BFGS (Nocedal & Wright, Algorithm 6.1) keeps an inverse-Hessian estimate ``H`` (identity at
the start), steps along ``p = -H g`` with a step length satisfying the strong Wolfe
conditions (``c1 = 1e-4``, ``c2 = 0.9``; bracketing then zoom by safeguarded cubic
interpolation, Algorithms 3.5-3.6) and updates ``H`` with the curvature pair ``s, y`` (the
update is skipped where ``y . s`` is not positive). Everything runs in ``lax.while_loop``s, so
``minimize`` works under ``jit`` and ``vmap``; gradients come from ``value_and_grad``. It is
not differentiable itself (use implicit differentiation for that), as in JAX.

The iterates need not be JAX's step for step (its line search differs in details), but they
converge to the same minimiser to within ``gtol``. ``status``: 0 converged, 1 ``maxiter``
reached, 3 the line search found no acceptable step (JAX's codes).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

import fungrad.numpy as fnp
from fungrad import lax
from fungrad.numpy import util

__all__ = ["OptimizeResults", "minimize"]


class OptimizeResults(NamedTuple):
    """The result of :func:`minimize` (jax.scipy.optimize.OptimizeResults' fields)."""

    x: Any
    success: Any
    status: Any
    fun: Any
    jac: Any
    hess_inv: Any
    nfev: Any
    njev: Any
    nit: Any


class _Line(NamedTuple):
    alpha: Any
    f: Any
    g: Any
    ok: Any
    nfev: Any


def _cubic_min(a, fa, da, b, fb, db):
    """The minimiser of the cubic matching values and slopes at ``a`` and ``b``, clipped
    into the interval (bisection where the cubic has none)."""
    d1 = da + db - 3 * (fa - fb) / fnp.where(a == b, 1.0, a - b)
    disc = d1 * d1 - da * db
    d2 = fnp.sign(b - a) * fnp.sqrt(fnp.maximum(disc, 0.0))
    denom = db - da + 2 * d2
    t = b - (b - a) * (db + d2 - d1) / fnp.where(denom == 0, 1.0, denom)
    lo, hi = fnp.minimum(a, b), fnp.maximum(a, b)
    width = hi - lo
    good = (
        (disc >= 0)
        & (denom != 0)
        & fnp.isfinite(t)
        & (t > lo + 0.1 * width)
        & (t < hi - 0.1 * width)
    )
    return fnp.where(good, t, 0.5 * (a + b))


def _line_search(value_and_grad, x, f0, g0, p, maxiter: int):
    """A step length along ``p`` meeting the strong Wolfe conditions (Nocedal & Wright
    Algorithms 3.5 and 3.6)."""
    c1, c2 = 1e-4, 0.9
    d0 = fnp.dot(g0, p)
    dt = f0.dtype

    def phi(alpha):
        f, g = value_and_grad(x + alpha * p)
        return f, g, fnp.dot(g, p)

    # phase 0 brackets with doubling steps ("lo" is the previous trial); phase 1 zooms into
    # [lo, hi], where lo is the best Armijo point so far and hi the other end.
    def cond(s):
        return (~s["done"]) & (s["i"] < maxiter)

    def body(s):
        alpha, zoom = s["alpha"], s["phase"] == 1
        f, g, d = phi(alpha)
        sufficient = (f <= f0 + c1 * alpha * d0) & fnp.isfinite(f)
        curvature = fnp.abs(d) <= -c2 * d0
        worse = (~sufficient) | (f >= s["f_lo"]) & (zoom | (s["i"] > 0))
        done = (~worse) & curvature
        # phase 0: worse -> [lo, alpha]; slope >= 0 -> [alpha, lo]; else keep doubling
        # phase 1: worse -> hi = alpha; else lo = alpha (hi = old lo if the slope points back)
        flip = (~worse) & (d * (fnp.where(zoom, s["hi"], s["lo"]) - alpha) >= 0)
        flip = fnp.where(zoom, flip, (~worse) & (d >= 0))
        new_hi = worse | flip
        hi = fnp.where(worse, alpha, fnp.where(flip, s["lo"], s["hi"]))
        f_hi = fnp.where(worse, f, fnp.where(flip, s["f_lo"], s["f_hi"]))
        d_hi = fnp.where(worse, d, fnp.where(flip, s["d_lo"], s["d_hi"]))
        lo = fnp.where(worse, s["lo"], alpha)
        f_lo = fnp.where(worse, s["f_lo"], f)
        d_lo = fnp.where(worse, s["d_lo"], d)
        phase = fnp.where(zoom | new_hi, 1, 0).astype(np.int32)
        next_alpha = fnp.where(phase == 1, _cubic_min(lo, f_lo, d_lo, hi, f_hi, d_hi), 2.0 * alpha)
        better = sufficient & (f < s["best_f"])
        keep = done | better
        return dict(
            i=s["i"] + 1,
            phase=phase,
            lo=lo,
            f_lo=f_lo,
            d_lo=d_lo,
            hi=hi,
            f_hi=f_hi,
            d_hi=d_hi,
            alpha=fnp.where(done, alpha, next_alpha),
            best_a=fnp.where(keep, alpha, s["best_a"]),
            best_f=fnp.where(keep, f, s["best_f"]),
            best_g=fnp.where(keep, g, s["best_g"]),
            done=done,
        )

    zero = fnp.zeros((), dt)
    init = dict(
        i=np.int32(0),
        phase=np.int32(0),
        lo=zero,
        f_lo=f0,
        d_lo=d0,
        hi=zero,
        f_hi=f0,
        d_hi=d0,
        alpha=fnp.ones((), dt),
        best_a=zero,
        best_f=f0,
        best_g=g0,
        done=fnp.asarray(False),
    )
    s = lax.while_loop(cond, body, init)
    ok = s["done"] | (s["best_f"] < f0)
    return _Line(s["best_a"], s["best_f"], s["best_g"], ok, s["i"])


def _bfgs(fun, x0, maxiter: int, gtol: float, norm, line_search_maxiter: int):
    from fungrad.transforms.autodiff import value_and_grad

    vg = value_and_grad(fun)
    n = x0.shape[0]
    f0, g0 = vg(x0)
    eye = fnp.eye(n, dtype=x0.dtype)

    def gnorm(g):
        return fnp.linalg.norm(g, ord=norm)

    def cond(s):
        return (~s["converged"]) & (~s["failed"]) & (s["k"] < maxiter)

    def body(s):
        p = -(s["H"] @ s["g"])
        line = _line_search(vg, s["x"], s["f"], s["g"], p, line_search_maxiter)
        step = line.alpha * p
        x = s["x"] + step
        y = line.g - s["g"]
        sy = fnp.dot(step, y)
        rho = 1.0 / fnp.where(sy > 0, sy, 1.0)
        w = eye - rho * fnp.outer(step, y)
        h_new = w @ s["H"] @ w.T + rho * fnp.outer(step, step)
        h = fnp.where((sy > 0) & line.ok, h_new, s["H"])
        ok = line.ok
        return dict(
            k=s["k"] + 1,
            x=fnp.where(ok, x, s["x"]),
            f=fnp.where(ok, line.f, s["f"]),
            g=fnp.where(ok, line.g, s["g"]),
            H=h,
            converged=ok & (gnorm(line.g) < gtol),
            failed=~ok,
            nfev=s["nfev"] + line.nfev,
            nit=s["nit"] + 1,
        )

    init = dict(
        k=np.int32(0),
        x=x0,
        f=f0,
        g=g0,
        H=eye,
        converged=gnorm(g0) < gtol,
        failed=fnp.asarray(False),
        nfev=np.int32(1),
        nit=np.int32(0),
    )
    s = lax.while_loop(cond, body, init)
    # JAX's codes: 0 converged, 1 maxiter reached, 3 the line search ran out of iterations
    status = fnp.where(s["converged"], 0, fnp.where(s["failed"], 3, 1)).astype(np.int32)
    return OptimizeResults(
        x=s["x"],
        success=s["converged"] & ~s["failed"],
        status=status,
        fun=s["f"],
        jac=s["g"],
        hess_inv=s["H"],
        nfev=s["nfev"],
        njev=s["nfev"],
        nit=s["nit"],
    )


def minimize(fun, x0, args=(), *, method: str, tol=None, options=None) -> OptimizeResults:
    """Minimise scalar ``fun(x, *args)`` over 1-D ``x`` from ``x0``.

    Only ``method="BFGS"`` exists. ``tol`` sets the gradient tolerance; ``options`` may hold
    ``maxiter`` (default ``200 * x0.size``), ``norm`` (of the gradient, default ``inf``),
    ``gtol`` (default ``1e-5``) and ``line_search_maxiter`` (default 10)."""
    if not callable(fun):
        raise TypeError(f"minimize: fun must be callable, got {type(fun).__name__}")
    if not isinstance(method, str) or method.lower() != "bfgs":
        raise ValueError(
            f"minimize: method must be 'BFGS' (the only one fungrad provides), got {method!r}"
        )
    if not isinstance(args, tuple):
        raise TypeError(f"minimize: args must be a tuple, got {type(args).__name__}")
    util.check_arraylike("minimize", x0)
    (x0,) = util.promote_dtypes_inexact(util.asarray(x0, fun_name="minimize"))
    if x0.ndim != 1:
        raise ValueError(
            f"minimize: x0 must be 1-D, got shape {x0.shape}; ravel it (and "
            "reshape inside fun), e.g. with fungrad.flatten_util.ravel_pytree"
        )
    options = dict(options or {})
    known = {"maxiter", "norm", "gtol", "line_search_maxiter"}
    unknown = set(options) - known
    if unknown:
        raise TypeError(
            f"minimize: unknown options {sorted(unknown)} for BFGS; known: {sorted(known)}"
        )
    maxiter = options.get("maxiter")
    maxiter = 200 * x0.size if maxiter is None else int(maxiter)
    gtol = options.get("gtol", 1e-5) if tol is None else tol
    return _bfgs(
        lambda x: fun(x, *args),
        x0,
        maxiter,
        float(gtol),
        options.get("norm", np.inf),
        int(options.get("line_search_maxiter", 10)),
    )
