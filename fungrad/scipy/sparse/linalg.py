"""``fungrad.scipy.sparse.linalg.cg``: conjugate gradients for symmetric positive definite
systems given as a matrix or a matrix-free linear function, jax.scipy.sparse.linalg's API.

``x, info = cg(A, b)`` iterates (Hestenes & Stiefel; Saad, "Iterative Methods", Alg. 6.18,
with an optional preconditioner ``M``) in a ``lax.while_loop`` until
``|r| <= max(tol * |b|, atol)`` or ``maxiter`` steps (default ``10 * size(b)``); ``info`` is
None, as in JAX. ``b`` and ``x0`` may be pytrees (``A`` maps such trees to trees). The solve
is wrapped in ``lax.custom_linear_solve`` (symmetric), so derivatives with respect to ``b``
and to arrays ``A`` closes over come from another CG solve, not from differentiating the
iterations; it works under ``jit`` and ``vmap``.
"""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad import lax, tree_util
from fungrad.flatten_util import ravel_pytree

__all__ = ["cg"]


def _as_matvec(name: str, A):
    if callable(A):
        return A
    A = fnp.asarray(A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(
            f"{name}: A must be a square matrix or a linear function, got an "
            f"array of shape {A.shape}"
        )
    return lambda x: tree_util.tree_map(lambda v: fnp.matmul(A, v), x)


def _cg_solve(matvec, b, x0, tol, atol, maxiter, precond):
    """Plain CG on the flattened ``b``; ``matvec`` and ``precond`` act on trees like ``b``."""
    b_flat, unravel = ravel_pytree(b)
    x_flat = ravel_pytree(x0)[0].astype(b_flat.dtype)

    def mv(v):
        return ravel_pytree(matvec(unravel(v)))[0].astype(b_flat.dtype)

    def pc(v):
        return ravel_pytree(precond(unravel(v)))[0].astype(b_flat.dtype)

    bound = fnp.maximum(tol * fnp.linalg.norm(b_flat), atol) ** 2
    r = b_flat - mv(x_flat)
    z = pc(r)
    state = (x_flat, r, z, z, fnp.vdot(r, z), np.int32(0))

    def cond(s):
        _, r, _, _, _, k = s
        return (fnp.vdot(r, r) > bound) & (k < maxiter)

    def body(s):
        x, r, z, p, rz, k = s
        ap = mv(p)
        alpha = rz / fnp.where(fnp.vdot(p, ap) == 0, 1.0, fnp.vdot(p, ap))
        x = x + alpha * p
        r = r - alpha * ap
        z = pc(r)
        rz_new = fnp.vdot(r, z)
        beta = rz_new / fnp.where(rz == 0, 1.0, rz)
        return x, r, z, z + beta * p, rz_new, k + 1

    x = lax.while_loop(cond, body, state)[0]
    return unravel(x)


def cg(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """Solve ``A x = b`` for symmetric positive definite ``A`` by conjugate gradients:
    ``(x, None)``. ``A`` and ``M`` (a preconditioner approximating ``A^-1``) are matrices or
    linear functions of trees like ``b``."""
    matvec = _as_matvec("cg", A)
    precond = (lambda x: x) if M is None else _as_matvec("cg", M)
    leaves = tree_util.tree_leaves(b)
    if not leaves:
        raise ValueError("cg: b must hold at least one array")
    if x0 is None:
        x0 = tree_util.tree_map(fnp.zeros_like, b)
    elif tree_util.tree_structure(x0) != tree_util.tree_structure(b):
        raise ValueError(
            f"cg: x0 and b must have the same tree structure, got "
            f"{tree_util.tree_structure(x0)} and {tree_util.tree_structure(b)}"
        )
    size = sum(int(np.size(leaf)) for leaf in leaves)
    maxiter = 10 * size if maxiter is None else int(maxiter)

    def solve(mv, rhs):
        return _cg_solve(mv, rhs, x0, tol, atol, maxiter, precond)

    x = lax.custom_linear_solve(matvec, b, solve, symmetric=True)
    return x, None
