"""Numerical checks of derivatives: ``check_grads`` (JAX-compatible), ``check_jvp``,
``check_vjp``, ``check_taylor`` and ``assert_transforms_commute``.

Differences from JAX's ``check_grads``, all on purpose:

* ``eps`` defaults per dtype *and* per leaf: the central-difference step for a leaf is
  ``cbrt(machine eps) * max(1, rms(leaf))`` (the step that balances truncation and rounding
  error), so large-valued inputs are not differentiated with a uselessly small step;
* with ``enable_x64`` on, float32 arguments are promoted to float64 before checking, so the
  finite differences are accurate and tolerances can be tight;
* ``check_taylor`` needs no eps at all: it checks that the first-order Taylor remainder
  shrinks quadratically as the step halves.

Complex arguments are checked as JAX checks them: tangents and cotangents are random complex
values, finite differences step in those complex directions, and the vjp is checked through
the dot-product identity ``Re<t, conj(vjp(conj(ct)))> == Re<jvp(t), ct>`` (JAX's vjp is the
transpose without conjugation, so the adjoint of the linear map is ``conj . vjp . conj``).
"""

from __future__ import annotations

import numpy as np

from fungrad import config, dtypes, tree_util
from fungrad.transforms import autodiff

_DEFAULT_TOL = {np.dtype(np.float16): 1e-1, np.dtype(np.float32): 2e-2, np.dtype(np.float64): 1e-5}


def _np(x):
    return np.asarray(x)


def _leaves(tree):
    return [_np(x) for x in tree_util.tree_leaves(tree)]


def _tol(leaves, given):
    if given is not None:
        return given
    # The dtype the computation runs in: float64 numpy leaves are float32 without x64.
    dts = [
        dtypes.real_dtype(dtypes.canonicalize_dtype(x.dtype))
        for x in leaves
        if x.dtype.kind in "fc"
    ]
    return max((_DEFAULT_TOL.get(d, 1e-5) for d in dts), default=1e-5)


def _promote(args):
    """With x64 on, float32/float16 leaves become float64 and complex64 ones complex128
    (numerically meaningful checks)."""
    if not config.enable_x64:
        return args
    import fungrad.numpy as fnp

    def up(x):
        a = fnp.asarray(x)
        if dtypes.is_complex(a.dtype):
            return a.astype(np.complex128)
        return a.astype(np.float64) if dtypes.is_float(a.dtype) else a

    return tree_util.tree_map(up, args)


def _rand_like(rng, tree):
    import fungrad.numpy as fnp

    def one(x):
        a = _np(x)
        if a.dtype == dtypes.float0:
            return np.zeros(a.shape, dtypes.float0)
        if a.dtype.kind == "c":  # a random complex direction
            v = rng.standard_normal(a.shape) + 1j * rng.standard_normal(a.shape)
            return fnp.asarray(v.astype(a.dtype))
        if a.dtype.kind != "f":
            return fnp.zeros(a.shape, a.dtype)
        return fnp.asarray(rng.standard_normal(a.shape).astype(a.dtype))

    return tree_util.tree_map(one, tree)


def _step(x, eps):
    a = _np(x)
    if eps is not None:
        return eps
    if a.dtype.kind not in "fc":
        return 0.0
    scale = float(np.sqrt(np.mean(np.square(np.abs(a).astype(np.float64))))) if a.size else 1.0
    # The step suits the dtype the function computes in (float64 numpy arguments run as
    # float32 without x64): a float64 step in float32 arithmetic is mostly rounding noise.
    eps = np.finfo(dtypes.real_dtype(dtypes.canonicalize_dtype(a.dtype))).eps
    return float(np.cbrt(eps)) * max(1.0, scale)


def _add_scaled(args, tangents, sign, steps):
    import fungrad.numpy as fnp

    flat_a, tree = tree_util.tree_flatten(args)
    flat_t = tree_util.tree_leaves(tangents)
    out = []
    for a, t, h in zip(flat_a, flat_t, steps):
        arr = fnp.asarray(a)
        if dtypes.is_inexact(arr.dtype):
            out.append(arr + (sign * h) * fnp.asarray(t).astype(arr.dtype))
        else:
            out.append(arr)
    return tree_util.tree_unflatten(tree, out)


def numerical_jvp(f, primals, tangents, eps=None):
    """Central differences along ``tangents``; each leaf gets its own step (see module doc).

    The tangent of leaf ``i`` is scaled by its step, so the result approximates
    ``jvp(f, primals, tangents)``.
    """
    flat_p = tree_util.tree_leaves(primals)
    steps = [_step(p, eps) for p in flat_p]
    # One common step keeps the difference quotient a directional derivative.
    h = max(steps) if steps else 1.0
    h = h if h > 0 else 1.0
    fp = f(*_add_scaled(primals, tangents, 1.0, [h] * len(flat_p)))
    fm = f(*_add_scaled(primals, tangents, -1.0, [h] * len(flat_p)))

    def quotient(a, b):
        a, b = _np(a), _np(b)
        if a.dtype.kind not in "fc":  # integer, bool or float0 outputs have no derivative
            return np.zeros(a.shape)
        wide = np.complex128 if a.dtype.kind == "c" else np.float64
        return (a.astype(wide) - b) / (2 * h)

    return tree_util.tree_map(quotient, fp, fm)


def _assert_close(what, got, want, atol, rtol, err_msg=""):
    g_leaves, w_leaves = _leaves(got), _leaves(want)
    if len(g_leaves) != len(w_leaves):
        raise AssertionError(f"{what}: {len(g_leaves)} outputs vs {len(w_leaves)} expected")
    for i, (g, w) in enumerate(zip(g_leaves, w_leaves)):
        if g.dtype == dtypes.float0 or w.dtype == dtypes.float0:
            continue  # the tangent of an integer-valued output: nothing to compare
        np.testing.assert_allclose(
            _wide(g),
            _wide(w),
            atol=atol,
            rtol=rtol,
            err_msg=f"{err_msg}{what} (output leaf {i})",
        )


def _wide(x: np.ndarray) -> np.ndarray:
    """``x`` in float64, or complex128 when either it is complex."""
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def _inner(a, b) -> float:
    """The real inner product ``Re sum(conj(a) * b)`` over matching leaves (derivative-free
    leaves, integer or float0, count as zero)."""
    total = 0.0
    for x, y in zip(_leaves(a), _leaves(b)):
        if x.dtype.kind in "fc" and y.dtype.kind in "fc":
            total += float(np.real(np.sum(np.conj(_wide(x)) * _wide(y))))
    return total


def _conj(tree):
    """Elementwise conjugate of the complex leaves of ``tree`` (others unchanged)."""
    import fungrad.numpy as fnp

    def one(x):
        a = _np(x)
        return fnp.asarray(np.conj(a)) if a.dtype.kind == "c" else x

    return tree_util.tree_map(one, tree)


def _adjoint(vjp_fn, cts):
    """The adjoint of the linearized function applied to ``cts``: ``conj(vjp(conj(cts)))``
    (JAX's vjp transposes without conjugating; for real values this is just ``vjp``)."""
    return _conj(vjp_fn(_conj(cts)))


def check_jvp(f, f_jvp, args, atol=None, rtol=None, eps=None, err_msg="", rng=None):
    """``f_jvp(args, tangents)`` against central differences of ``f`` along random tangents."""
    rng = np.random.default_rng(0) if rng is None else rng
    tangents = _rand_like(rng, args)
    v_out, t_out = f_jvp(args, tangents)
    tol_a = _tol(_leaves(args) + _leaves(v_out), atol)
    tol_r = _tol(_leaves(args) + _leaves(v_out), rtol)
    _assert_close("primal output of jvp", v_out, f(*args), tol_a, tol_r, err_msg)
    t_num = numerical_jvp(f, args, tangents, eps)
    _assert_close("JVP vs finite differences", t_out, t_num, tol_a, tol_r, err_msg)


def check_vjp(f, f_vjp, args, atol=None, rtol=None, eps=None, err_msg="", rng=None):
    """The dot-product identity ``<vjp(ct), t> = <ct, jvp(t)>`` with a finite-difference jvp."""
    rng = np.random.default_rng(1) if rng is None else rng
    v_out, vjp_fn = f_vjp(*args)
    tangents = _rand_like(rng, args)
    cts = _rand_like(rng, v_out)
    ct_in = _adjoint(vjp_fn, cts)
    t_num = numerical_jvp(f, args, tangents, eps)
    lhs = _inner(ct_in, tangents)
    rhs = _inner(cts, t_num)
    tol_a = _tol(_leaves(args) + _leaves(v_out), atol)
    tol_r = _tol(_leaves(args) + _leaves(v_out), rtol)
    scale = max(1.0, abs(rhs))
    if not abs(lhs - rhs) <= tol_a * scale + tol_r * abs(rhs):
        raise AssertionError(
            f"{err_msg}VJP vs finite differences (dot-product identity): "
            f"<vjp(ct), t> = {lhs!r} but <ct, jvp(t)> = {rhs!r}"
        )


def check_grads(f, args, order: int, modes=("fwd", "rev"), atol=None, rtol=None, eps=None):
    """Check ``f``'s derivatives up to ``order`` in the given modes against finite differences
    (``jax.test_util.check_grads``'s contract; defaults explained in the module docstring)."""
    args = _promote(tuple(args))
    if isinstance(modes, str):
        modes = (modes,)
    for m in modes:
        if m not in ("fwd", "rev"):
            raise ValueError(f"check_grads: unknown mode {m!r}; use 'fwd' and/or 'rev'")

    def _check(f, args, order, msg):
        if "fwd" in modes:
            fwd_msg = f"JVP of {msg}" if msg else "JVP"

            def f_jvp(primals, tangents):
                return autodiff.jvp(f, primals, tangents)

            check_jvp(f, f_jvp, args, atol, rtol, eps, fwd_msg + ": ")
            if order > 1:
                _check(lambda p, t: autodiff.jvp(f, p, t), (args, args), order - 1, fwd_msg)
        if "rev" in modes:
            rev_msg = f"VJP of {msg}" if msg else "VJP"
            check_vjp(f, lambda *a: autodiff.vjp(f, *a), args, atol, rtol, eps, rev_msg + ": ")
            if order > 1:

                def f_vjp(*a):
                    out, vjp_fn = autodiff.vjp(f, *a)
                    return vjp_fn(out)

                _check(f_vjp, args, order - 1, rev_msg)

    _check(f, args, order, "")


def check_taylor(f, args, *, num_halvings: int = 8, min_order: float = 1.8, rng=None):
    """An eps-free derivative check: with ``r(h) = |f(x + h t) - f(x) - h jvp(t)|``, the
    remainder of a correct first derivative shrinks like ``h^2``. Passes when, over successive
    halvings of ``h``, the observed order ``log2(r(h) / r(h/2))`` reaches ``min_order`` before
    rounding error dominates, or when the remainder is at rounding level throughout (f linear).
    """
    rng = np.random.default_rng(2) if rng is None else rng
    args = _promote(tuple(args))
    tangents = _rand_like(rng, args)
    f0, t0 = autodiff.jvp(f, args, tangents)
    f0_l, t0_l = _leaves(f0), _leaves(t0)
    dt = max(
        (dtypes.real_dtype(x.dtype) for x in f0_l if x.dtype.kind in "fc"),
        default=np.dtype(np.float64),
        key=lambda d: d.itemsize,
    )
    noise = float(np.finfo(dt).eps) * max(
        1.0, max((float(np.max(np.abs(x))) for x in f0_l if x.size), default=1.0)
    )
    h = 1.0
    rs = []
    for _ in range(num_halvings):
        fh = _leaves(f(*_add_scaled(args, tangents, 1.0, [h] * len(tree_util.tree_leaves(args)))))
        r = sum(float(np.sum(np.abs(_wide(a) - b - h * c))) for a, b, c in zip(fh, f0_l, t0_l))
        rs.append(r)
        h /= 2
    if max(rs) <= 100 * noise * max(1, sum(x.size for x in f0_l)):
        return
    orders = [np.log2(a / b) for a, b in zip(rs, rs[1:]) if a > 0 and b > 0]
    if not orders or max(orders) < min_order:
        raise AssertionError(
            f"check_taylor: the first-order Taylor remainder does not shrink "
            f"quadratically (observed orders {np.round(orders, 2).tolist()}; "
            f"remainders {rs}); the JVP is likely wrong"
        )


def assert_transforms_commute(f, args, *, atol=1e-5, rtol=1e-5, rng=None):
    """Check that transforms agree for scalar-valued ``f`` of ``args``:

    * ``vmap(grad(f))`` over a batch of 3 perturbed copies equals a Python loop of ``grad(f)``;
    * the dot-product identity ``<vjp(ct), t> = <ct, jvp(t)>`` (analytic jvp and vjp);
    * ``jacfwd(f) == jacrev(f)`` (real arguments only: JAX's jacfwd refuses complex inputs of
      a non-holomorphic function).
    """
    import fungrad.numpy as fnp
    from fungrad.api import vmap

    rng = np.random.default_rng(3) if rng is None else rng
    args = _promote(tuple(args))
    nums = tuple(range(len(args)))
    g = autodiff.grad(f, argnums=nums)

    def perturb(x, k):
        a = fnp.asarray(x)
        return a * (1.0 + 0.1 * k) if dtypes.is_inexact(a.dtype) else a

    batch = [tree_util.tree_map(lambda x, k=k: perturb(x, k), args) for k in range(3)]
    stacked = tree_util.tree_map(lambda *xs: fnp.stack([fnp.asarray(x) for x in xs]), *batch)
    batched = vmap(g)(*stacked)
    for k, b in enumerate(batch):
        looped = g(*b)
        _assert_close(
            f"vmap(grad(f)) example {k} vs a loop of grad(f)",
            tree_util.tree_map(lambda x, k=k: x[k], batched),
            looped,
            atol,
            rtol,
        )
    tangents = _rand_like(rng, args)
    out, t_out = autodiff.jvp(f, args, tangents)
    _, vjp_fn = autodiff.vjp(f, *args)
    ct = _rand_like(rng, out)
    lhs, rhs = _inner(_adjoint(vjp_fn, ct), tangents), _inner(ct, t_out)
    if not abs(lhs - rhs) <= atol + rtol * abs(rhs):
        raise AssertionError(
            f"dot-product identity fails: <vjp(ct), t> = {lhs!r}, <ct, jvp(t)> = {rhs!r}"
        )
    if any(x.dtype.kind == "c" for x in _leaves(args)):
        return
    _assert_close(
        "jacfwd vs jacrev",
        autodiff.jacfwd(f, nums)(*args),
        autodiff.jacrev(f, nums)(*args),
        atol,
        rtol,
    )
