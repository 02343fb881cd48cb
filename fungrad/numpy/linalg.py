"""``fungrad.numpy.linalg``: norms, matrix powers and small dense solvers (jax.numpy.linalg's
names), written on fungrad.lax only.

``det``, ``slogdet``, ``solve``, ``inv``, ``tensorsolve`` and ``tensorinv`` factor with the ``lu``
primitive (:mod:`fungrad.lax.linalg_lu`: LAPACK getrf under jit on the CPU, a ``fori_loop``
elimination on the GPU), and the solves after it are two ``triangular_solve`` primitives
(LAPACK's trsm), so the program, and jit's compile time, do not grow with n. ``solve`` is
differentiated as JAX's, through ``custom_linear_solve`` (solves with the same factors).
``cholesky`` is the ``cholesky`` primitive (:mod:`fungrad.lax.linalg_primitives`). The
decompositions (``eigh``, ``qr``, ``svd`` and what builds on them: ``pinv``, ``lstsq``,
``matrix_rank``, ``cond``, matrix norms ``ord=2``, ``-2``, ``'nuc'``) live in
:mod:`fungrad.numpy.linalg_decomp`.
"""

from __future__ import annotations

import operator
from typing import NamedTuple

import numpy as np

from fungrad import dtypes, lax
from fungrad.lax.linalg_lu import lu_p, lu_solve
from fungrad.lax.linalg_primitives import cholesky_p
from fungrad.numpy import linear, util
from fungrad.numpy.linalg_decomp import (  # noqa: F401  (re-exported)
    EighResult,
    EigResult,
    QRResult,
    SVDResult,
    cond,
    eig,
    eigh,
    eigvals,
    eigvalsh,
    lstsq,
    matrix_rank,
    multi_dot,
    pinv,
    qr,
    svd,
    svdvals,
)

__all__ = [
    "EigResult",
    "EighResult",
    "QRResult",
    "SVDResult",
    "SlogdetResult",
    "cholesky",
    "cond",
    "cross",
    "det",
    "diagonal",
    "eig",
    "eigh",
    "eigvals",
    "eigvalsh",
    "inv",
    "lstsq",
    "matmul",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "matrix_transpose",
    "multi_dot",
    "norm",
    "outer",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "svd",
    "svdvals",
    "tensordot",
    "tensorinv",
    "tensorsolve",
    "trace",
    "vecdot",
    "vector_norm",
]


# -- re-exports with the array-API signatures of jax.numpy.linalg ------------------------------


def matmul(x1, x2, /, *, precision=None, preferred_element_type=None):
    """``fungrad.numpy.matmul``."""
    return linear.matmul(x1, x2, precision=precision, preferred_element_type=preferred_element_type)


def vecdot(x1, x2, /, *, axis: int = -1, precision=None, preferred_element_type=None):
    """``fungrad.numpy.vecdot``."""
    return linear.vecdot(
        x1, x2, axis=axis, precision=precision, preferred_element_type=preferred_element_type
    )


def tensordot(x1, x2, /, *, axes=2, precision=None, preferred_element_type=None):
    """``fungrad.numpy.tensordot``."""
    return linear.tensordot(
        x1, x2, axes, precision=precision, preferred_element_type=preferred_element_type
    )


def outer(x1, x2, /):
    """The outer product of two 1-D arrays."""
    util.check_arraylike("linalg.outer", x1, x2)
    x1, x2 = util.asarray(x1), util.asarray(x2)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(
            f"linalg.outer: input arrays must be one-dimensional, got shapes "
            f"{x1.shape} and {x2.shape}"
        )
    return linear.outer(x1, x2)


def trace(x, /, *, offset: int = 0, dtype=None):
    """The trace of each matrix over the last two axes."""
    return linear.trace(x, offset, axis1=-2, axis2=-1, dtype=dtype)


def diagonal(x, /, *, offset: int = 0):
    """The ``offset`` diagonal of each matrix over the last two axes."""
    return linear.diagonal(x, offset, axis1=-2, axis2=-1)


def cross(x1, x2, /, *, axis: int = -1):
    """The cross product of 3-vectors along ``axis``."""
    util.check_arraylike("linalg.cross", x1, x2)
    x1, x2 = util.asarray(x1), util.asarray(x2)
    for x in (x1, x2):
        if x.ndim == 0 or x.shape[util.canonicalize_axis(axis, x.ndim, "linalg.cross")] != 3:
            raise ValueError(
                f"linalg.cross: both inputs need size 3 along axis {axis}, got "
                f"shapes {x1.shape} and {x2.shape}"
            )
    return linear.cross(x1, x2, axis=axis)


def matrix_transpose(x, /):
    """Swap the last two axes."""
    util.check_arraylike("linalg.matrix_transpose", x)
    x = util.asarray(x)
    if x.ndim < 2:
        raise ValueError(
            f"linalg.matrix_transpose: x must have at least 2 dimensions, got shape {x.shape}"
        )
    return lax.transpose(x, tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2))


# -- norms --------------------------------------------------------------------------------------

_MATRIX_ORDS = "None, 'fro', 'nuc', 1, -1, 2, -2, inf, -inf"


def _sum_squares_sqrt(x, axis, keepdims):
    """``sqrt(sum(|x|²))``: real for complex ``x`` (``x * conj(x)``'s real part)."""
    from fungrad.numpy import reductions, ufuncs

    if np.issubdtype(x.dtype, np.complexfloating):
        sq = lax.real(ufuncs.multiply(x, lax.conj(x)))
    else:
        sq = ufuncs.multiply(x, x)
    return ufuncs.sqrt(reductions.sum(sq, axis=axis, keepdims=keepdims))


def _vector_norm(x, ord, axis, keepdims):
    from fungrad.numpy import logic, reductions, ufuncs

    if isinstance(ord, str) or isinstance(ord, bool):
        raise ValueError(
            f"norm: invalid order {ord!r} for a vector norm; use None, a number, inf or -inf"
        )
    if ord is None or ord == 2:
        return _sum_squares_sqrt(x, axis, keepdims)
    if ord == np.inf:
        return reductions.max(ufuncs.abs(x), axis=axis, keepdims=keepdims, initial=0)
    if ord == -np.inf:
        return reductions.min(ufuncs.abs(x), axis=axis, keepdims=keepdims)
    if ord == 0:
        real = dtypes.real_dtype(x.dtype)  # a count: real for complex x, as JAX
        return reductions.sum(logic.not_equal(x, 0), axis=axis, keepdims=keepdims, dtype=real)
    if ord == 1:
        return reductions.sum(ufuncs.abs(x), axis=axis, keepdims=keepdims)
    p = float(ord)
    total = reductions.sum(ufuncs.power(ufuncs.abs(x), p), axis=axis, keepdims=keepdims)
    return ufuncs.power(total, 1.0 / p)


def _matrix_norm(x, ord, axes, keepdims):
    from fungrad.numpy import reductions, ufuncs

    row, col = axes
    if ord is None or (isinstance(ord, str) and ord in ("f", "fro")):
        return _sum_squares_sqrt(x, axes, keepdims)
    if isinstance(ord, str) and ord == "nuc" or (not isinstance(ord, str) and ord in (2, -2)):
        # Singular values of the matrices spanned by (row, col), moved to the end.
        moved = lax.transpose(x, tuple(d for d in range(x.ndim) if d not in axes) + (row, col))
        sv = svdvals(moved)
        last = (sv.ndim - 1,)
        out = (
            lax.reduce_sum(sv, last)
            if ord == "nuc"
            else lax.reduce_max(sv, last)
            if ord == 2
            else lax.reduce_min(sv, last)
        )
        if keepdims:
            out = lax.expand_dims(out, tuple(sorted(axes)))
        return out
    if isinstance(ord, str) or ord not in (1, -1, np.inf, -np.inf):
        raise ValueError(
            f"norm: invalid order {ord!r} for a matrix norm; supported matrix ords "
            f"are {_MATRIX_ORDS}"
        )
    # ord=+-1: max/min over columns of the column sums; ord=+-inf: the same over rows.
    sum_axis, red_axis = (row, col) if abs(ord) == 1 else (col, row)
    if not keepdims and red_axis > sum_axis:
        red_axis -= 1
    sums = reductions.sum(ufuncs.abs(x), axis=sum_axis, keepdims=keepdims)
    if ord > 0:
        return reductions.max(sums, axis=red_axis, keepdims=keepdims, initial=0)
    return reductions.min(sums, axis=red_axis, keepdims=keepdims)


def norm(x, ord=None, axis=None, keepdims: bool = False):
    """A vector or matrix norm, as ``numpy.linalg.norm``.

    With ``axis=None`` and ``ord=None`` this is the 2-norm of the flattened array; otherwise one
    axis gives a vector norm (``ord`` None/2, 1, inf, -inf, 0 or any other number ``p``:
    ``sum(|x|**p)**(1/p)``) and two axes a matrix norm (``ord`` None/'fro', 1, -1, inf, -inf).
    Integer inputs are promoted to the default float; complex inputs give real norms (of
    ``|x|``), as JAX.

    Example: ``norm(array([3., 4.]))`` is ``5.0``.
    """
    util.check_arraylike("norm", x)
    (x,) = util.promote_dtypes_inexact(util.asarray(x, fun_name="norm"))
    if axis is None:
        if ord is None:
            return _sum_squares_sqrt(x, None, keepdims)
        axes = tuple(range(x.ndim))
    elif isinstance(axis, (tuple, list)):
        axes = tuple(util.canonicalize_axis(a, x.ndim, "norm") for a in axis)
    else:
        axes = (util.canonicalize_axis(axis, x.ndim, "norm"),)
    if len(set(axes)) != len(axes):
        raise ValueError(f"norm: duplicate axes given: axis={axis}")
    if len(axes) == 1:
        return _vector_norm(x, ord, axes, keepdims)
    if len(axes) == 2:
        return _matrix_norm(x, ord, axes, keepdims)
    raise ValueError(
        f"norm: improper number of axes {axis} for an array of shape {x.shape}: "
        "pass one axis for a vector norm or two for a matrix norm"
    )


def vector_norm(x, /, *, axis=None, keepdims: bool = False, ord=2):
    """The vector norm of ``x`` over ``axis`` (all axes when None: the flattened array)."""
    util.check_arraylike("linalg.vector_norm", x)
    (x,) = util.promote_dtypes_inexact(util.asarray(x, fun_name="linalg.vector_norm"))
    if axis is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axis, (tuple, list)):
        axes = util.canonicalize_axes(tuple(axis), x.ndim, "linalg.vector_norm")
    else:
        axes = (util.canonicalize_axis(axis, x.ndim, "linalg.vector_norm"),)
    return _vector_norm(x, ord, axes, keepdims)


def matrix_norm(x, /, *, keepdims: bool = False, ord="fro"):
    """The matrix norm of each matrix over the last two axes."""
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


# -- LU-based solvers ---------------------------------------------------------------------------


def _square(fun_name: str, a, inexact: bool = True):
    util.check_arraylike(fun_name, a)
    a = util.asarray(a, fun_name=fun_name)
    if inexact:
        (a,) = util.promote_dtypes_inexact(a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(
            f"{fun_name}: argument must be a square matrix or a stack of square "
            f"matrices (shape [..., n, n]), got shape {a.shape}"
        )
    return a


def _iota(shape, dim):
    return lax.broadcasted_iota(np.int32, shape, dim)


def _eye_like(a):
    """Identity matrices of ``a``'s shape and dtype."""
    eq = lax.eq(_iota(a.shape, a.ndim - 2), _iota(a.shape, a.ndim - 1))
    return lax.convert_element_type(eq, a.dtype)


def _parity_sign(pivots, sign):
    """``sign`` times (-1) ** (the number of real row swaps in ``pivots``)."""
    swaps = lax.reduce_sum(
        lax.convert_element_type(lax.ne(pivots, _iota(pivots.shape, pivots.ndim - 1)), np.int32),
        (pivots.ndim - 1,),
    )
    odd = lax.eq(lax.rem(swaps, lax.full_like(swaps, 2)), lax.full_like(swaps, 1))
    return lax.select_n(odd, sign, lax.neg(sign))


def _lu_diagonal(a):
    """``(diag(U), pivots)`` of the LU factorisation of the square [..., n, n] ``a``."""
    lu, pivots, _ = lu_p.bind(a)
    return linear.diagonal(lu, 0, -2, -1), pivots


class SlogdetResult(NamedTuple):
    """``slogdet``'s result: ``det == sign * exp(logabsdet)``."""

    sign: object
    logabsdet: object


def slogdet(a, *, method=None):
    """The sign and the natural log of the absolute value of the determinant, from the ``lu``
    primitive (LAPACK getrf under jit on the CPU). A singular matrix gives ``(0, -inf)``. For
    complex ``a`` the sign is a complex number of modulus 1 and ``logabsdet`` is real, as
    JAX, and differentiated as JAX's: with ``t = trace(a⁻¹ da)``, ``d logabsdet = Re t`` and
    ``d sign = i Im t · sign``."""
    if method not in (None, "lu"):
        raise ValueError(f"slogdet: method={method!r} is not supported; use 'lu'")
    a = _square("slogdet", a)
    if np.issubdtype(a.dtype, np.complexfloating):
        return SlogdetResult(*_slogdet_complex_fn()(a))
    return SlogdetResult(*_slogdet_value(a))


def _slogdet_value(a):
    d, pivots = _lu_diagonal(a)
    sign = _parity_sign(pivots, lax.reduce_prod(lax.sign(d), (d.ndim - 1,)))
    logabsdet = lax.reduce_sum(lax.log(lax.abs(d)), (d.ndim - 1,))
    return sign, logabsdet


def _slogdet_complex_jvp(primals, tangents):
    """JAX's rule for complex ``a``: ``t = trace(a⁻¹ da)`` (a solve with ``a``'s LU) gives
    ``d logabsdet = Re t`` and ``d sign = i Im t · sign`` (the sign's phase turns by
    ``Im t``)."""
    (a,), (da,) = primals, tangents
    lu, pivots, perm = lu_p.bind(a)
    d = linear.diagonal(lu, 0, -2, -1)
    sign = _parity_sign(pivots, lax.reduce_prod(lax.sign(d), (d.ndim - 1,)))
    logabsdet = lax.reduce_sum(lax.log(lax.abs(d)), (d.ndim - 1,))
    t = linear.trace(lu_solve(lu, perm, da, 0), 0, -2, -1)
    phase = lax.complex(lax.full_like(lax.real(t), 0), lax.imag(t))
    return (sign, logabsdet), (lax.mul(phase, sign), lax.real(t))


_slogdet_cache: list = []


def _slogdet_complex_fn():
    """:func:`slogdet`'s value for complex input under a ``custom_jvp`` (built once)."""
    if not _slogdet_cache:
        from fungrad.transforms.custom import custom_jvp

        fn = custom_jvp(_slogdet_value)
        fn.defjvp(_slogdet_complex_jvp)
        _slogdet_cache.append(fn)
    return _slogdet_cache[0]


def det(a):
    """The determinant of a square matrix (or a stack of them): the product of ``U``'s
    diagonal from the ``lu`` primitive, signed by the row swaps. Its derivative is
    ``trace(adj(a) @ da)``, finite for a singular ``a`` whose LU has its one zero pivot last
    (JAX's result; zero where an earlier pivot is zero).

    2 x 2 and 3 x 3 matrices use the cofactor expansion (as JAX): a polynomial, differentiable
    everywhere.

    Example: ``det(array([[1., 2.], [3., 4.]]))`` is ``-2.0``.
    """
    a = _square("det", a)
    if a.shape[-1] in (2, 3):
        return _det_small(a)
    return _det_fn()(a)


def _det_small(a):
    """The cofactor expansion along the first row of [..., n, n] ``a``, n = 2 or 3."""

    def at(i, j):
        return lax.index_in_dim(lax.index_in_dim(a, i, a.ndim - 2, False), j, a.ndim - 2, False)

    def minor(r0, r1, c0, c1):
        return lax.sub(lax.mul(at(r0, c0), at(r1, c1)), lax.mul(at(r0, c1), at(r1, c0)))

    if a.shape[-1] == 2:
        return minor(0, 1, 0, 1)
    return lax.add(
        lax.sub(lax.mul(at(0, 0), minor(1, 2, 1, 2)), lax.mul(at(0, 1), minor(1, 2, 0, 2))),
        lax.mul(at(0, 2), minor(1, 2, 0, 1)),
    )


def _det_value(a):
    d, pivots = _lu_diagonal(a)
    return _parity_sign(pivots, lax.reduce_prod(d, (d.ndim - 1,)))


def _det_jvp(primals, tangents):
    """``d det = trace(adj(a) da)`` without dividing by a pivot. With ``P a = L U``,
    ``adj(a) = s adj(U) L⁻¹ P`` (``s`` the swaps' sign); for upper ``U`` with last pivot
    ``t`` and ``U'`` the same matrix with ``t`` set to 1, ``U = diag(1, .., 1, t) U'`` gives
    ``adj(U) = p U'⁻¹ diag(t, .., t, 1)``, ``p`` the product of the other pivots, exact also at
    ``t = 0``. A zero among the other pivots (rank < n - 1, or a zero met early) gives 0."""
    from fungrad.lax.linalg_lu import permute_rows
    from fungrad.lax.linalg_primitives import triangular_solve_p

    (a,), (da,) = primals, tangents
    lu, pivots, perm = lu_p.bind(a)
    n, nd = a.shape[-1], a.ndim
    diag = linear.diagonal(lu, 0, -2, -1)
    sign = _parity_sign(pivots, lax.full(a.shape[:-2], 1, a.dtype))
    value = lax.mul(sign, lax.reduce_prod(diag, (nd - 2,)))
    if n == 0:
        return value, lax.full_like(value, 0)
    last = lax.index_in_dim(diag, n - 1, nd - 2, keepdims=False)
    others = lax.reduce_prod(lax.slice_in_dim(diag, 0, n - 1, axis=nd - 2), (nd - 2,))
    rows, cols = _iota(a.shape, nd - 2), _iota(a.shape, nd - 1)
    # U', and 1 for any other zero pivot (its result is discarded below; this keeps the
    # solves, and their transposes in reverse mode, finite)
    on_diag = lax.eq(rows, cols)
    corner = lax.and_(on_diag, lax.eq(rows, n - 1))
    zero_pivot = lax.and_(on_diag, lax.eq(lu, lax.full_like(lu, 0)))
    unit_last = lax.select_n(lax.or_(corner, zero_pivot), lu, lax.full_like(lu, 1))
    solve = dict(left_side=True, transpose_a=False, conjugate_a=False)
    x = triangular_solve_p.bind(  # L⁻¹ P da
        lu, permute_rows(da, perm), lower=True, unit_diagonal=True, **solve
    )
    scale = lax.broadcast_in_dim(last, a.shape, tuple(range(nd - 2)))
    x = lax.select_n(lax.lt(rows, n - 1), x, lax.mul(x, scale))  # diag(t, .., t, 1) x
    x = triangular_solve_p.bind(unit_last, x, lower=False, unit_diagonal=False, **solve)
    tangent = lax.mul(lax.mul(sign, others), linear.trace(x, 0, -2, -1))
    zero = lax.eq(others, lax.full_like(others, 0))
    return value, lax.select_n(zero, tangent, lax.full_like(tangent, 0))


_det_cache: list = []


def _det_fn():
    """:func:`det`'s value under a ``custom_jvp`` with :func:`_det_jvp` (built once)."""
    if not _det_cache:
        from fungrad.transforms.custom import custom_jvp

        fn = custom_jvp(_det_value)
        fn.defjvp(_det_jvp)
        _det_cache.append(fn)
    return _det_cache[0]


def _solve(a, b):
    """``a⁻¹ b`` for [..., n, n] ``a`` and [..., n, k] ``b`` with one batch shape, as JAX: the
    LU of ``a`` (not differentiated) solves inside ``custom_linear_solve`` with the map
    ``x -> a @ x``, so derivatives are solves with the same factors (``dx = a⁻¹ (db - da x)``,
    reverse mode the transposed solve) instead of the factorisation's own derivative."""
    from fungrad.lax.linalg_primitives import _matmul

    lu, _, perm = lu_p.bind(lax.stop_gradient(a))
    return lax.custom_linear_solve(
        lambda x: _matmul(a, x),
        b,
        solve=lambda _, y: lu_solve(lu, perm, y, 0),
        transpose_solve=lambda _, y: lu_solve(lu, perm, y, 1),
    )


def solve(a, b):
    """Solve ``a @ x = b`` by LU with partial pivoting (the ``lu`` and ``triangular_solve``
    primitives: LAPACK under jit on the CPU).

    ``a`` is [..., n, n]. A 1-D ``b`` is one right-hand side vector; otherwise ``b`` is
    [..., n, m] and the batch dimensions of ``a`` and ``b`` broadcast (JAX >= 0.5 semantics).
    A singular ``a`` gives inf/NaN entries, as in JAX.
    """
    a = _square("solve", a)
    util.check_arraylike("solve", b)
    a, b = util.promote_dtypes_inexact(a, util.asarray(b, fun_name="solve"))
    n = a.shape[-1]
    vector = b.ndim == 1
    if (vector and b.shape[0] != n) or (not vector and (b.ndim < 2 or b.shape[-2] != n)):
        raise ValueError(
            f"solve: invalid shapes {a.shape} and {b.shape}; b must be [n] or "
            f"[..., n, m] with n = {n} (for a batch of vectors use b[..., None])"
        )
    if vector:
        b = lax.expand_dims(b, (1,))
    batch = util.broadcast_shapes(a.shape[:-2], b.shape[:-2], fun_name="solve")
    a = util.broadcast_to_shape(a, batch + a.shape[-2:])
    b = util.broadcast_to_shape(b, batch + b.shape[-2:])
    x = _solve(a, b)
    return lax.squeeze(x, (-1,)) if vector else x


def inv(a):
    """The inverse of a square matrix (or a stack of them): ``solve(a, identity)``.

    A singular matrix gives inf/NaN entries, as in JAX.
    """
    a = _square("inv", a)
    return _solve(a, _eye_like(a))


def tensorsolve(a, b, axes=None):
    """The ``x`` with ``tensordot(a, x, x.ndim) == b``: ``a``'s trailing dimensions (after
    moving ``axes`` to the end) are ``x``'s shape, its leading ones ``b``'s, with equal
    products; one :func:`solve` of the flattened system."""
    util.check_arraylike("tensorsolve", a, b)
    a, b = util.promote_dtypes_inexact(util.asarray(a), util.asarray(b))
    if axes is not None:
        axes = util.canonicalize_axes(tuple(axes), a.ndim, "tensorsolve")
        rest = tuple(d for d in range(a.ndim) if d not in axes)
        a = lax.transpose(a, rest + axes)
    if b.ndim > a.ndim or a.shape[: b.ndim] != b.shape:
        raise ValueError(
            f"tensorsolve: the leading dimensions of a {a.shape} must be b's shape {b.shape}"
        )
    out_shape = a.shape[b.ndim :]
    size = int(np.prod(b.shape, dtype=np.int64))
    if int(np.prod(out_shape, dtype=np.int64)) != size:
        raise ValueError(
            f"tensorsolve: a {a.shape} is not square once flattened: the product of b's shape "
            f"{b.shape} must equal the product of the remaining dimensions {out_shape}"
        )
    x = solve(lax.reshape(a, (size, size)), lax.reshape(b, (size,)))
    return lax.reshape(x, out_shape)


def tensorinv(a, ind: int = 2):
    """The inverse of ``a`` seen as a linear map from its last ``a.ndim - ind`` dimensions to
    its first ``ind``: ``tensordot(tensorinv(a, ind), a, ind)`` is the identity; the result
    has shape ``a.shape[ind:] + a.shape[:ind]``."""
    util.check_arraylike("tensorinv", a)
    (a,) = util.promote_dtypes_inexact(util.asarray(a))
    try:
        ind = operator.index(ind)
    except TypeError:
        raise TypeError(f"tensorinv: ind must be an integer, got {ind!r}") from None
    if ind <= 0:
        raise ValueError(f"tensorinv: ind must be a positive integer, got {ind}")
    rows = int(np.prod(a.shape[:ind], dtype=np.int64))
    cols = int(np.prod(a.shape[ind:], dtype=np.int64))
    if rows != cols:
        raise ValueError(
            f"tensorinv: a {a.shape} with ind={ind} is not square once flattened: "
            f"prod{a.shape[:ind]} = {rows} but prod{a.shape[ind:]} = {cols}"
        )
    ia = inv(lax.reshape(a, (rows, cols)))
    return lax.reshape(ia, a.shape[ind:] + a.shape[:ind])


def _adjoint(x):
    """The conjugate transpose over the last two axes (the transpose for real dtypes)."""
    t = matrix_transpose(x)
    return lax.conj(t) if np.issubdtype(t.dtype, np.complexfloating) else t


def cholesky(a, *, upper: bool = False, symmetrize_input: bool = True):
    """The Cholesky factor ``L`` (lower triangular, ``a = L @ L.T``; ``L @ L.conj().T`` for
    complex) of a symmetric (Hermitian) positive definite matrix or stack: the ``cholesky``
    primitive (LAPACK under jit on the CPU). ``upper=True`` returns ``L``'s conjugate
    transpose. With ``symmetrize_input`` the factorised matrix is ``(a + a.conj().T) / 2``;
    otherwise only the lower triangle of ``a`` is read. A matrix that is not positive definite
    gives NaNs, as in JAX.
    """
    a = _square("cholesky", a)
    if symmetrize_input:
        a = lax.mul(lax.add(a, _adjoint(a)), 0.5)
    factor = cholesky_p.bind(a)
    return _adjoint(factor) if upper else factor


def matrix_power(a, n):
    """``a`` (a square matrix or stack of them) to the integer power ``n`` by repeated squaring;
    ``n == 0`` gives identities of ``a``'s dtype and ``n < 0`` powers of ``inv(a)``.
    """
    a = _square("matrix_power", a, inexact=False)
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"matrix_power: exponent must be an integer, got {n!r}") from None
    if n == 0:
        return _eye_like(a)
    if n < 0:
        a, n = inv(a), -n
    result, z = None, a
    while n:
        if n & 1:
            result = z if result is None else linear.matmul(result, z)
        n >>= 1
        if n:
            z = linear.matmul(z, z)
    return result
