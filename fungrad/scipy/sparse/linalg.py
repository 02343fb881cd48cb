"""``fungrad.scipy.sparse.linalg``: Krylov solvers for ``A x = b`` with ``A`` a matrix or a
matrix-free linear function, jax.scipy.sparse.linalg's API (``cg``, ``gmres``, ``bicgstab``).

* ``cg``: conjugate gradients for symmetric positive definite ``A`` (Hestenes & Stiefel;
  Saad, "Iterative Methods", Alg. 6.18).
* ``bicgstab``: BiCGSTAB for general ``A`` (van der Vorst 1992; Saad, Alg. 7.7), stopping on
  breakdown (a zero inner product).
* ``gmres``: restarted GMRES for general ``A`` (Saad & Schultz 1986), left preconditioned by
  ``M``: each restart builds an orthonormal Krylov basis of ``M A`` (Arnoldi with classical
  Gram-Schmidt applied twice) and minimises ``|M (b - A x)|`` over it, either with one least
  squares solve at the end (``solve_method='batched'``) or with Givens rotations as it goes,
  stopping early once the residual estimate is small (``'incremental'``).

All iterate in ``lax.while_loop`` until ``|r| <= max(tol * |b|, atol)`` or ``maxiter`` steps
(default ``10 * size(b)``; for ``gmres`` it counts restarts). ``b`` and ``x0`` may be pytrees
(``A`` and ``M`` then map such trees to trees); the solvers work on the flattened vector.
Each solve is wrapped in ``lax.custom_linear_solve``, so derivatives with respect to ``b``
and to arrays ``A`` closes over come from another solve (with the transposed operator for
``gmres`` and ``bicgstab``), not from differentiating the iterations; they are accurate when
that solve converges too. Everything works under ``jit`` and ``vmap``.
"""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad import api, lax, tree_util
from fungrad.flatten_util import ravel_pytree
from fungrad.scipy.linalg import solve_triangular

__all__ = ["bicgstab", "cg", "gmres"]


# -- input checks and flattening -------------------------------------------------------------


def _as_matvec(name: str, label: str, A):
    if callable(A):
        return A
    A = fnp.asarray(A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(
            f"{name}: {label} must be a square matrix or a linear function, got an "
            f"array of shape {A.shape}"
        )
    return lambda x: tree_util.tree_map(lambda v: fnp.matmul(A, v), x)


def _shapes(tree):
    return [tuple(np.shape(leaf)) for leaf in tree_util.tree_leaves(tree)]


def _check_operator(name: str, label: str, op, b):
    """Raise a ValueError naming ``name`` unless ``op`` maps trees like ``b`` to the same
    structure and shapes (caught here rather than deep inside custom_linear_solve)."""
    if not callable(op):
        n = fnp.shape(op)[0]
        bad = [s for s in _shapes(b) if not s or s[0] != n]
        if bad:
            raise ValueError(
                f"{name}: {label} is a {n}x{n} matrix but b has shapes {_shapes(b)}; "
                f"pass b with {n} rows so that {label} @ b is defined"
            )
    try:
        out = api.eval_shape(_as_matvec(name, label, op), b)
    except (TypeError, ValueError) as e:
        raise ValueError(
            f"{name}: {label} cannot be applied to a vector shaped like b ({_shapes(b)}): {e}"
        ) from e
    if tree_util.tree_structure(out) != tree_util.tree_structure(b) or _shapes(out) != _shapes(b):
        raise ValueError(
            f"{name}: {label}(x) must return arrays shaped like b, {_shapes(b)}, got "
            f"{_shapes(out)}; {label} must map the solution space to itself"
        )


def _setup(name: str, A, b, x0, M):
    """Check the arguments of a solver; returns ``(matvec, precond, b, x0, size)`` with
    integer ``b`` made floating and ``x0`` (zeros by default) in ``b``'s dtypes."""
    matvec = _as_matvec(name, "A", A)
    precond = (lambda x: x) if M is None else _as_matvec(name, "M", M)
    b = tree_util.tree_map(fnp.asarray, b)
    b = tree_util.tree_map(
        lambda v: v if fnp.issubdtype(v.dtype, fnp.inexact) else v.astype(float), b
    )
    leaves = tree_util.tree_leaves(b)
    if not leaves:
        raise ValueError(f"{name}: b must hold at least one array")
    if x0 is None:
        x0 = tree_util.tree_map(fnp.zeros_like, b)
    elif tree_util.tree_structure(x0) != tree_util.tree_structure(b):
        raise ValueError(
            f"{name}: x0 and b must have the same tree structure, got "
            f"{tree_util.tree_structure(x0)} and {tree_util.tree_structure(b)}"
        )
    elif _shapes(x0) != _shapes(b):
        raise ValueError(
            f"{name}: x0 must have b's shapes, got {_shapes(x0)} for b's {_shapes(b)}; "
            f"pass an initial guess shaped like the solution"
        )
    else:
        x0 = tree_util.tree_map(lambda v, w: fnp.asarray(v).astype(w.dtype), x0, b)
    _check_operator(name, "A", A, b)
    if M is not None:
        _check_operator(name, "M", M, b)
    return matvec, precond, b, x0, sum(int(np.size(leaf)) for leaf in leaves)


def _flat_problem(matvec, precond, b, x0):
    """The problem on flat vectors: ``(b, x0, mv, pc, unravel)``."""
    b_flat, unravel = ravel_pytree(b)
    x_flat = ravel_pytree(x0)[0].astype(b_flat.dtype)

    def mv(v):
        return ravel_pytree(matvec(unravel(v)))[0].astype(b_flat.dtype)

    def pc(v):
        return ravel_pytree(precond(unravel(v)))[0].astype(b_flat.dtype)

    return b_flat, x_flat, mv, pc, unravel


def _nonzero(d):
    """``d`` with zeros replaced by ones, for divisions whose zero case is handled apart."""
    return fnp.where(d == 0, fnp.ones_like(d), d)


def _sqnorm(v):
    return fnp.real(fnp.vdot(v, v))


# -- conjugate gradients ---------------------------------------------------------------------


def _cg_solve(matvec, b, x0, tol, atol, maxiter, precond):
    """Plain CG on the flattened ``b``; ``matvec`` and ``precond`` act on trees like ``b``."""
    b, x, mv, pc, unravel = _flat_problem(matvec, precond, b, x0)
    bound = fnp.maximum(tol * fnp.linalg.norm(b), atol) ** 2
    r = b - mv(x)
    z = pc(r)
    state = (x, r, z, z, fnp.vdot(r, z), np.int32(0))

    def cond(s):
        _, r, _, _, _, k = s
        return (_sqnorm(r) > bound) & (k < maxiter)

    def body(s):
        x, r, z, p, rz, k = s
        ap = mv(p)
        alpha = rz / _nonzero(fnp.vdot(p, ap))
        x = x + alpha * p
        r = r - alpha * ap
        z = pc(r)
        rz_new = fnp.vdot(r, z)
        beta = rz_new / _nonzero(rz)
        return x, r, z, z + beta * p, rz_new, k + 1

    return unravel(lax.while_loop(cond, body, state)[0])


def cg(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """Solve ``A x = b`` for symmetric positive definite ``A`` by conjugate gradients:
    ``(x, None)``. ``A`` and ``M`` (a preconditioner approximating ``A^-1``) are matrices or
    linear functions of trees like ``b``."""
    matvec, precond, b, x0, size = _setup("cg", A, b, x0, M)
    maxiter = 10 * size if maxiter is None else int(maxiter)

    def solve(mv, rhs):
        return _cg_solve(mv, rhs, x0, tol, atol, maxiter, precond)

    return lax.custom_linear_solve(matvec, b, solve, symmetric=True), None


# -- BiCGSTAB --------------------------------------------------------------------------------


def _bicgstab_solve(matvec, b, x0, tol, atol, maxiter, precond):
    """Preconditioned BiCGSTAB on the flattened ``b``, shadow residual ``r0``. It stops when
    the residual is small, after ``maxiter`` steps, or on breakdown (``rho``, ``<r0, v>`` or
    ``omega`` zero), where the next step would divide by zero."""
    b, x, mv, pc, unravel = _flat_problem(matvec, precond, b, x0)
    bound = fnp.maximum(tol * fnp.linalg.norm(b), atol) ** 2
    r = b - mv(x)
    r0 = r
    one = fnp.ones((), b.dtype)
    # p = v = 0 and rho = alpha = omega = 1 make the first direction p = r.
    state = (x, r, fnp.zeros_like(b), fnp.zeros_like(b), one, one, one, np.int32(0), False)

    def cond(s):
        _, r, _, _, _, _, _, k, broken = s
        return (_sqnorm(r) > bound) & (k < maxiter) & ~broken

    def body(s):
        x, r, p, v, rho, alpha, omega, k, _ = s
        rho_new = fnp.vdot(r0, r)
        p = r + (rho_new / rho) * (alpha / omega) * (p - omega * v)
        y = pc(p)
        v = mv(y)
        r0v = fnp.vdot(r0, v)
        alpha = rho_new / _nonzero(r0v)
        s_ = r - alpha * v
        done = _sqnorm(s_) <= bound  # the half step already converged
        z = pc(s_)
        t = mv(z)
        omega = fnp.vdot(t, s_) / _nonzero(fnp.vdot(t, t))
        x = x + alpha * y + fnp.where(done, 0, omega) * z
        r = fnp.where(done, s_, s_ - omega * t)
        broken = (rho_new == 0) | (r0v == 0) | (omega == 0)
        return x, r, p, v, rho_new, alpha, omega, k + 1, broken

    return unravel(lax.while_loop(cond, body, state)[0])


def bicgstab(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """Solve ``A x = b`` for a general (nonsymmetric) ``A`` by BiCGSTAB: ``(x, None)``.
    ``A`` and ``M`` (a preconditioner approximating ``A^-1``) are matrices or linear
    functions of trees like ``b``; ``maxiter`` (default ``10 * size(b)``) bounds the
    iterations. Derivatives solve the transposed system with BiCGSTAB."""
    matvec, precond, b, x0, size = _setup("bicgstab", A, b, x0, M)
    maxiter = 10 * size if maxiter is None else int(maxiter)

    def solve(mv, rhs):
        return _bicgstab_solve(mv, rhs, x0, tol, atol, maxiter, precond)

    x = lax.custom_linear_solve(matvec, b, solve, transpose_solve=solve)
    return x, None


# -- GMRES -----------------------------------------------------------------------------------


def _arnoldi_step(op, V, j):
    """Orthonormalise ``op(V[j])`` against the basis rows of ``V`` (rows after ``j`` are
    zero) and store it as row ``j + 1``. Returns ``(V, h, breakdown)``: ``h`` is column ``j``
    of the Hessenberg matrix; breakdown (the new vector vanishes) means the Krylov space is
    invariant, so the solution in it is exact."""
    w = op(V[j])
    w_norm = fnp.linalg.norm(w)
    h = V.conj() @ w
    w = w - h @ V
    h2 = V.conj() @ w  # a second pass restores orthogonality lost to rounding
    w = w - h2 @ V
    h = h + h2
    norm = fnp.linalg.norm(w)
    breakdown = norm <= fnp.finfo(w.dtype).eps * w_norm
    V = V.at[j + 1].set(fnp.where(breakdown, 0, w / fnp.where(breakdown, 1, norm)))
    return V, h.at[j + 1].set(norm.astype(h.dtype)), breakdown


def _first_basis(r, r_norm, restart):
    V = fnp.zeros((restart + 1, r.shape[0]), r.dtype)
    return V.at[0].set(r / fnp.where(r_norm > 0, r_norm, 1).astype(r.dtype))


def _restart_batched(op, x, r, r_norm, restart, ptol):
    """One GMRES cycle: the whole ``restart``-dimensional basis (unless it breaks down),
    then one least squares solve ``min |r_norm e1 - H y|``."""
    del ptol  # no early exit: the residual is not tracked within a cycle

    def cond(c):
        return (c[2] < restart) & ~c[3]

    def body(c):
        V, H, j, _ = c
        V, h, breakdown = _arnoldi_step(op, V, j)
        return V, H.at[:, j].set(h), j + 1, breakdown

    H = fnp.zeros((restart + 1, restart), r.dtype)
    init = (_first_basis(r, r_norm, restart), H, np.int32(0), False)
    V, H, _, _ = lax.while_loop(cond, body, init)
    rhs = fnp.zeros(restart + 1, r.dtype).at[0].set(r_norm.astype(r.dtype))
    y = fnp.linalg.lstsq(H, rhs)[0]  # unbuilt columns are zero: their y is zero
    return x + y @ V[:restart]


def _rotate(v, i, c, s):
    """Apply the Givens rotation ``[[conj(c), conj(s)], [-s, c]]`` to entries ``i, i+1``."""
    a, b = v[i], v[i + 1]
    return v.at[i].set(fnp.conj(c) * a + fnp.conj(s) * b).at[i + 1].set(c * b - s * a)


def _restart_incremental(op, x, r, r_norm, restart, ptol):
    """One GMRES cycle, keeping the Hessenberg matrix in QR form with Givens rotations;
    ``|g[j+1]|`` is then the residual norm, and the cycle stops once it is ``<= ptol``."""
    dtype = r.dtype

    def cond(c):
        return (c[5] < restart) & (c[6] > ptol)

    def body(c):
        V, R, g, cs, sn, j, _ = c
        V, h, _ = _arnoldi_step(op, V, j)
        # earlier rotations (those not yet set, i >= j, are the identity)
        h = lax.fori_loop(0, restart, lambda i, h: _rotate(h, i, cs[i], sn[i]), h)
        rho = fnp.sqrt(fnp.abs(h[j]) ** 2 + fnp.abs(h[j + 1]) ** 2)
        c_ = fnp.where(rho == 0, 1, h[j] / _nonzero(rho)).astype(dtype)
        s_ = fnp.where(rho == 0, 0, h[j + 1] / _nonzero(rho)).astype(dtype)
        R = R.at[:, j].set(_rotate(h, j, c_, s_)[:restart])
        g = _rotate(g, j, c_, s_)
        return V, R, g, cs.at[j].set(c_), sn.at[j].set(s_), j + 1, fnp.abs(g[j + 1])

    g = fnp.zeros(restart + 1, dtype).at[0].set(r_norm.astype(dtype))
    init = (
        _first_basis(r, r_norm, restart),
        fnp.eye(restart, dtype=dtype),  # columns not built stay the identity
        g,
        fnp.ones(restart, dtype),
        fnp.zeros(restart, dtype),
        np.int32(0),
        r_norm,
    )
    V, R, g, _, _, k, _ = lax.while_loop(cond, body, init)
    y = solve_triangular(R, fnp.where(fnp.arange(restart) < k, g[:restart], 0))
    return x + y @ V[:restart]


def _gmres_solve(matvec, b, x0, tol, atol, restart, maxiter, precond, cycle):
    """Restarted GMRES on the flattened ``b``: up to ``maxiter`` cycles, each from the last
    solution, until ``|M (b - A x)| <= max(tol * |b|, atol)`` (JAX's test); within a cycle
    the target is that bound rescaled to the preconditioned system, ``ptol``."""
    b, x, mv, pc, unravel = _flat_problem(matvec, precond, b, x0)
    b_norm = fnp.linalg.norm(b)
    bound = fnp.maximum(tol * b_norm, atol)
    ptol = fnp.linalg.norm(pc(b)) * fnp.minimum(1.0, bound / _nonzero(b_norm))

    def op(v):
        return pc(mv(v))

    def residual(x):
        r = pc(b - mv(x))
        return r, fnp.linalg.norm(r)

    def cond(s):
        return (s[1] < maxiter) & (s[3] > bound)

    def body(s):
        x, k, r, r_norm = s
        x = cycle(op, x, r, r_norm, restart, ptol)
        return (x, k + 1, *residual(x))

    return unravel(lax.while_loop(cond, body, (x, np.int32(0), *residual(x)))[0])


def gmres(
    A, b, x0=None, *, tol=1e-5, atol=0.0, restart=20, maxiter=None, M=None, solve_method="batched"
):
    """Solve ``A x = b`` for a general ``A`` by restarted GMRES: ``(x, info)``.

    ``A`` and ``M`` (a left preconditioner approximating ``A^-1``) are matrices or linear
    functions of trees like ``b``. Each cycle minimises the residual over a Krylov space of
    dimension ``restart`` (capped at ``size(b)``); ``maxiter`` (default ``10 * size(b)``)
    bounds the cycles. ``solve_method`` is ``'batched'`` (one least squares solve per cycle)
    or ``'incremental'`` (Givens rotations, stopping a cycle early). ``info`` is ``-1`` when
    the solution holds NaN and ``0`` otherwise, as in JAX. Derivatives solve the transposed
    system with GMRES."""
    if solve_method == "batched":
        cycle = _restart_batched
    elif solve_method == "incremental":
        cycle = _restart_incremental
    else:
        raise ValueError(
            f"gmres: invalid solve_method {solve_method!r}, must be either "
            f"'incremental' or 'batched'"
        )
    matvec, precond, b, x0, size = _setup("gmres", A, b, x0, M)
    maxiter = 10 * size if maxiter is None else int(maxiter)
    restart = min(int(restart), size)
    if restart < 1:
        raise ValueError(f"gmres: restart must be a positive integer, got {restart}")

    def solve(mv, rhs):
        return _gmres_solve(mv, rhs, x0, tol, atol, restart, maxiter, precond, cycle)

    x = lax.custom_linear_solve(matvec, b, solve, transpose_solve=solve)
    return x, fnp.where(fnp.isnan(_sqnorm(ravel_pytree(x)[0])), -1, 0)
