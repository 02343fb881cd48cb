"""Products and contractions of fungrad.numpy: matmul, dot, vdot, vecdot, inner, outer,
tensordot, einsum, kron, trace, diagonal, diag, diagflat, convolve, correlate, cross.

Every contraction lowers to one ``lax.dot_general`` (with ``transpose`` / ``reshape`` /
``squeeze`` around it), so the compilers see a single contraction primitive to tile. As in
jax.numpy, operands are promoted to their common dtype first and that dtype is passed to
``dot_general`` as ``preferred_element_type``; Python scalars stay weak (``dot(2., 3.)`` is weak).

Diagonals are taken without gathers: the diagonal's axes are moved last and flattened, and a
strided ``lax.slice`` picks every ``(n + 1)``-th element (exact, even for NaN/Inf/-0.0).
``diag`` of a vector is the inverse trick: ``lax.pad`` with interior padding, then a reshape.
"""

from __future__ import annotations

import itertools
import math
import operator
import string
from typing import TYPE_CHECKING

import numpy as np

from fungrad import dtypes, lax
from fungrad.lax.dot import canonicalize_precision
from fungrad.numpy import util

if TYPE_CHECKING:
    from fungrad.array import Array
    from fungrad.typing import ArrayLike

__all__ = [
    "convolve",
    "correlate",
    "cross",
    "diag",
    "diagflat",
    "diagonal",
    "dot",
    "einsum",
    "inner",
    "kron",
    "matmul",
    "outer",
    "tensordot",
    "trace",
    "vdot",
    "vecdot",
]


# -- shared helpers -----------------------------------------------------------------------------


def _promote(fun_name: str, args, preferred_element_type=None):
    """Check and promote ``args`` to their common dtype. Returns the promoted arrays and the
    dtype / weak flag of the product (``preferred_element_type`` overrides the dtype)."""
    util.check_arraylike(fun_name, *args)
    dt, weak = dtypes.result_type(*args, return_weak_type_flag=True)
    arrays = [util.asarray(a, fun_name=fun_name) for a in util.promote_dtypes(*args)]
    if preferred_element_type is not None:
        dt, weak = dtypes.canonicalize_dtype(preferred_element_type), False
    return arrays, dt, weak


def _promote_same(a, b):
    """The promotion of :func:`_promote` for the common case, without its general machinery:
    two arrays (numpy arrays of canonical dtype included) of one dtype and weak flag need no
    conversion. None when the general path is needed."""
    a, b = util.plain_operand(a), util.plain_operand(b)
    if a is None or b is None:
        return None
    aval_a, aval_b = a.aval, b.aval
    if aval_a.dtype != aval_b.dtype or aval_a.weak_type != aval_b.weak_type:
        return None
    return [a, b], aval_a.dtype, aval_a.weak_type


def _dot_general(x, y, contracting, batch, out_dtype, precision):
    """``lax.dot_general`` contracting ``contracting = (x_dims, y_dims)`` over the batch dims
    ``batch = (x_dims, y_dims)``; result dims: batch, free dims of x, free dims of y."""
    dims = ((tuple(contracting[0]), tuple(contracting[1])), (tuple(batch[0]), tuple(batch[1])))
    if (
        x.dtype == y.dtype
        and out_dtype is not None
        and lax.dot_algorithm.as_algorithm(precision) is None
    ):
        # Operands already promoted (the callers' _promote) and no DotAlgorithm preset to
        # round them first: bind without lax's re-checking.
        return lax.dot_general_p.bind(
            x,
            y,
            dimension_numbers=dims,
            precision=canonicalize_precision(precision),
            preferred_element_type=dtypes.canonicalize_dtype(out_dtype),
        )
    return lax.dot_general(x, y, dims, precision=precision, preferred_element_type=out_dtype)


def _finish(x, dtype, weak: bool):
    """The product with jax.numpy's result dtype and weak flag."""
    aval = x.aval
    if aval.dtype == dtype and aval.weak_type == weak:
        return x
    return lax.convert_element_type(x, dtype, weak)


def _ravel(x):
    return lax.reshape(x, (x.size,))


def _move_last(x, axes):
    """Transpose ``x`` so that ``axes`` (in that order) become its last dimensions."""
    rest = [i for i in range(x.ndim) if i not in axes]
    return lax.transpose(x, tuple(rest) + tuple(axes))


def _diagonal_last(x, k: int):
    """The generalised diagonal ``x[..., i, i, ..., i]`` of the last ``k`` dims (all of one
    size ``n``): flatten them to ``n**k`` and slice with the stride between ``(i, ..., i)``
    and ``(i+1, ..., i+1)``, which is ``1 + n + ... + n**(k-1)``."""
    n = x.shape[-1]
    lead = tuple(x.shape[:-k])
    flat = lax.reshape(x, lead + (n**k,))
    stride = sum(n**j for j in range(k))
    zeros = (0,) * len(lead)
    return lax.slice(flat, zeros + (0,), lead + (n**k,), (1,) * len(lead) + (stride,))


# -- matrix and vector products -----------------------------------------------------------------


def matmul(a: ArrayLike, b: ArrayLike, *, precision=None, preferred_element_type=None) -> Array:
    """Matrix product with numpy's ``matmul`` rules.

    1-D operands are treated as vectors (the added dimension is removed again) and leading
    batch dimensions broadcast. A size-1 batch dimension is squeezed rather than broadcast, so
    ``dot_general`` only batches the dimensions both operands really have.

    Args:
      a, b: arrays of at least one dimension.
      precision: passed to ``lax.dot_general``.
      preferred_element_type: result dtype (default: the promoted dtype of ``a`` and ``b``).

    Returns:
      The product, of shape ``broadcast(a.shape[:-2], b.shape[:-2]) + a.shape[-2:-1] +
      b.shape[-1:]`` (without the dims of 1-D operands).

    Example: ``matmul(ones((5, 2, 3)), ones((3, 4))).shape == (5, 2, 4)``.
    """
    promoted = None if preferred_element_type is not None else _promote_same(a, b)
    if promoted is None:
        promoted = _promote("matmul", (a, b), preferred_element_type)
    (a, b), out_dtype, weak = promoted
    a_shape, b_shape = a.shape, b.shape
    for i, shape in enumerate((a_shape, b_shape)):
        if not shape:
            raise ValueError(
                f"matmul: input operand {i} must have ndim at least 1, but it has "
                f"shape {shape}; use multiply for scalars"
            )
    a_is_mat, b_is_mat = len(a_shape) > 1, len(b_shape) > 1
    b_contract = len(b_shape) - 2 if b_is_mat else 0
    if a_shape[-1] != b_shape[b_contract]:
        raise TypeError(
            f"matmul: contraction dimensions do not match: {a_shape} @ {b_shape} "
            f"({a_shape[-1]} != {b_shape[b_contract]})"
        )
    if len(a_shape) <= 2 and len(b_shape) <= 2:  # no batch dims: one dot_general, in order
        out = _dot_general(
            a, b, ((len(a_shape) - 1,), (b_contract,)), ((), ()), out_dtype, precision
        )
        return _finish(out, out_dtype, weak)
    a_batch, b_batch = a.shape[:-2], b.shape[:-2]
    nbatch = max(len(a_batch), len(b_batch))
    a_batch = (None,) * (nbatch - len(a_batch)) + tuple(a_batch)
    b_batch = (None,) * (nbatch - len(b_batch)) + tuple(b_batch)
    # Output position of each dimension, in the order dot_general emits them.
    idx_batch, idx_a_free, idx_b_free = [], [], []
    a_squeeze, b_squeeze, a_bdims, b_bdims = [], [], [], []
    for i, (da, db) in enumerate(zip(a_batch, b_batch)):
        a_pos = i - (nbatch - len(a.shape[:-2]))  # this dim's index in a (before squeezing)
        b_pos = i - (nbatch - len(b.shape[:-2]))
        if da is None:
            idx_b_free.append(i)
        elif db is None:
            idx_a_free.append(i)
        elif da == db:
            a_bdims.append(a_pos - len(a_squeeze))
            b_bdims.append(b_pos - len(b_squeeze))
            idx_batch.append(i)
        elif da == 1:
            a_squeeze.append(a_pos)
            idx_b_free.append(i)
        elif db == 1:
            b_squeeze.append(b_pos)
            idx_a_free.append(i)
        else:
            raise ValueError(
                f"matmul: batch dimensions cannot broadcast: {a.shape} @ {b.shape} "
                f"(batch shapes {a.shape[:-2]} and {b.shape[:-2]})"
            )
    if a_is_mat:
        idx_a_free.append(nbatch)
    if b_is_mat:
        idx_b_free.append(nbatch + a_is_mat)
    a = lax.squeeze(a, a_squeeze)
    b = lax.squeeze(b, b_squeeze)
    out = _dot_general(
        a, b, ((a.ndim - 1,), (b.ndim - 1 - b_is_mat,)), (a_bdims, b_bdims), out_dtype, precision
    )
    perm = np.argsort(idx_batch + idx_a_free + idx_b_free)
    return _finish(lax.transpose(out, tuple(int(p) for p in perm)), out_dtype, weak)


def dot(a: ArrayLike, b: ArrayLike, *, precision=None, preferred_element_type=None) -> Array:
    """numpy's ``dot``: a product of scalars, the sum over the last axis of ``a`` and the
    second-to-last of ``b`` (the only axis of a 1-D ``b``).

    Example: ``dot(ones((2, 3)), ones((4, 3, 5))).shape == (2, 4, 5)``.
    """
    (a, b), out_dtype, weak = _promote("dot", (a, b), preferred_element_type)
    if a.ndim == 0 or b.ndim == 0:
        from fungrad.numpy import ufuncs

        a = lax.convert_element_type(a, out_dtype, weak)
        b = lax.convert_element_type(b, out_dtype, weak)
        return ufuncs.multiply(a, b)
    b_axis = max(b.ndim - 2, 0)
    if a.shape[-1] != b.shape[b_axis]:
        raise TypeError(
            f"dot: shapes {a.shape} and {b.shape} not aligned: {a.shape[-1]} "
            f"(dim {a.ndim - 1}) != {b.shape[b_axis]} (dim {b_axis})"
        )
    out = _dot_general(a, b, ((a.ndim - 1,), (b_axis,)), ((), ()), out_dtype, precision)
    return _finish(out, out_dtype, weak)


def _conj(x):
    """The complex conjugate of a complex ``x``; a real ``x`` itself."""
    return lax.conj(x) if dtypes.kind(x.dtype) == "c" else x


def vdot(a, b, *, precision=None, preferred_element_type=None):
    """The dot product of the flattened ``a`` and ``b`` (which must have the same size),
    conjugating ``a`` when it is complex: ``sum(conj(a) * b)``, as numpy and jnp.

    Example: ``vdot(ones((2, 3)), ones((3, 2)))`` is ``6.0``.
    """
    (a, b), out_dtype, weak = _promote("vdot", (a, b), preferred_element_type)
    a = _conj(a)
    if a.size != b.size:
        raise TypeError(
            f"vdot: operands must have the same size, got shapes {a.shape} "
            f"(size {a.size}) and {b.shape} (size {b.size})"
        )
    out = _dot_general(_ravel(a), _ravel(b), ((0,), (0,)), ((), ()), out_dtype, precision)
    return _finish(out, out_dtype, weak)


def vecdot(x1, x2, /, *, axis: int = -1, precision=None, preferred_element_type=None):
    """The dot product of vectors along ``axis``, broadcasting the other dimensions.

    Example: ``vecdot(ones((4, 3)), ones(3)).shape == (4,)``.
    """
    (x1, x2), out_dtype, weak = _promote("vecdot", (x1, x2), preferred_element_type)
    x1 = _conj(x1)  # the array API's vecdot conjugates its first argument
    if x1.ndim == 0 or x2.ndim == 0:
        raise ValueError(
            f"vecdot: operands must have at least one dimension, got shapes "
            f"{x1.shape} and {x2.shape}"
        )
    ax1 = util.canonicalize_axis(axis, x1.ndim, "vecdot")
    ax2 = util.canonicalize_axis(axis, x2.ndim, "vecdot")
    if x1.shape[ax1] != x2.shape[ax2]:
        raise ValueError(
            f"vecdot: axes must match; got shapes {x1.shape} and {x2.shape} with axis={axis}"
        )
    # (..., 1, n) @ (..., n, 1) -> (..., 1, 1): matmul does the batch broadcasting.
    row = lax.expand_dims(_move_last(x1, (ax1,)), (-2,))
    col = lax.expand_dims(_move_last(x2, (ax2,)), (-1,))
    out = matmul(row, col, precision=precision, preferred_element_type=out_dtype)
    return _finish(lax.squeeze(out, (-2, -1)), out_dtype, weak)


def inner(a, b, *, precision=None, preferred_element_type=None):
    """The sum over the last axes of ``a`` and ``b``; result shape
    ``a.shape[:-1] + b.shape[:-1]``. Scalars multiply."""
    (a, b), out_dtype, weak = _promote("inner", (a, b), preferred_element_type)
    if a.ndim == 0 or b.ndim == 0:
        return dot(a, b, precision=precision, preferred_element_type=preferred_element_type)
    if a.shape[-1] != b.shape[-1]:
        raise TypeError(f"inner: last dimensions must match, got shapes {a.shape} and {b.shape}")
    out = _dot_general(a, b, ((a.ndim - 1,), (b.ndim - 1,)), ((), ()), out_dtype, precision)
    return _finish(out, out_dtype, weak)


def outer(a, b):
    """The outer product of the flattened ``a`` and ``b``: ``out[i, j] = a[i] * b[j]``."""
    from fungrad.numpy import ufuncs

    (a, b), _, _ = _promote("outer", (a, b))
    a, b = _ravel(a), _ravel(b)
    return ufuncs.multiply(lax.expand_dims(a, (1,)), lax.expand_dims(b, (0,)))


def _tensordot_axes(a, b, axes):
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if not 0 <= n <= min(a.ndim, b.ndim):
            raise TypeError(
                f"tensordot: axes={n} must be between 0 and the smaller rank of "
                f"the operands (shapes {a.shape} and {b.shape})"
            )
        return tuple(range(a.ndim - n, a.ndim)), tuple(range(n))
    if isinstance(axes, (list, tuple)) and len(axes) == 2:
        ax_a, ax_b = ([x] if isinstance(x, (int, np.integer)) else list(x) for x in axes)
        if len(ax_a) != len(ax_b):
            raise TypeError(f"tensordot: axes lists must have equal length, got {ax_a} and {ax_b}")
        ax_a = tuple(util.canonicalize_axis(x, a.ndim, "tensordot") for x in ax_a)
        ax_b = tuple(util.canonicalize_axis(x, b.ndim, "tensordot") for x in ax_b)
        if len(set(ax_a)) != len(ax_a) or len(set(ax_b)) != len(ax_b):
            raise ValueError(f"tensordot: repeated axis in axes={axes}")
        return ax_a, ax_b
    raise TypeError(f"tensordot: axes must be an int or a pair of sequences of ints, got {axes!r}")


def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None):
    """Sum products over ``axes``: an int ``n`` (the last ``n`` axes of ``a`` with the first
    ``n`` of ``b``) or a pair ``(axes_a, axes_b)``. The result has the remaining axes of ``a``
    followed by those of ``b``.

    Example: ``tensordot(ones((2, 3, 4)), ones((3, 4, 5))).shape == (2, 5)``.
    """
    (a, b), out_dtype, weak = _promote("tensordot", (a, b), preferred_element_type)
    ax_a, ax_b = _tensordot_axes(a, b, axes)
    for i, j in zip(ax_a, ax_b):
        if a.shape[i] != b.shape[j]:
            raise TypeError(
                f"tensordot: shape mismatch along contracted axes: {a.shape} axis "
                f"{i} has size {a.shape[i]} but {b.shape} axis {j} has size "
                f"{b.shape[j]}"
            )
    out = _dot_general(a, b, (ax_a, ax_b), ((), ()), out_dtype, precision)
    return _finish(out, out_dtype, weak)


def kron(a, b):
    """The Kronecker product: block ``(i, j, ...)`` of the result is ``a[i, j, ...] * b``.

    The lower-rank operand gets leading size-1 dims; the result shape is the elementwise
    product of the shapes.
    """
    from fungrad.numpy import ufuncs

    (a, b), _, _ = _promote("kron", (a, b))
    nd = max(a.ndim, b.ndim)
    a, b = lax.broadcast_to_rank(a, nd), lax.broadcast_to_rank(b, nd)
    out_shape = tuple(m * n for m, n in zip(a.shape, b.shape))
    # a -> (a0, 1, a1, 1, ...), b -> (1, b0, 1, b1, ...); their product interleaves the blocks.
    a = lax.expand_dims(a, tuple(range(1, 2 * nd, 2)))
    b = lax.expand_dims(b, tuple(range(0, 2 * nd, 2)))
    return lax.reshape(ufuncs.multiply(a, b), out_shape)


# -- diagonals ----------------------------------------------------------------------------------


def diagonal(a, offset=0, axis1: int = 0, axis2: int = 1):
    """The diagonal ``a[..., i, i + offset]`` of the 2-D sub-arrays spanned by ``axis1`` and
    ``axis2``; those axes are removed and the diagonal becomes the last axis.

    Example: ``diagonal(arange(6).reshape(2, 3), 1)`` is ``[1, 5]``.
    """
    util.check_arraylike("diagonal", a)
    a = util.asarray(a, fun_name="diagonal")
    if a.ndim < 2:
        raise ValueError(
            f"diagonal requires an array of at least two dimensions, got shape {a.shape}"
        )
    ax1 = util.canonicalize_axis(axis1, a.ndim, "diagonal")
    ax2 = util.canonicalize_axis(axis2, a.ndim, "diagonal")
    if ax1 == ax2:
        raise ValueError(f"diagonal: axis1 and axis2 cannot be the same (both {ax1})")
    offset = operator.index(offset)
    x = _move_last(a, (ax1, ax2))
    r, c = x.shape[-2:]
    n = max(0, min(r, c - offset) if offset >= 0 else min(r + offset, c))
    lead = tuple(x.shape[:-2])
    flat = lax.reshape(x, lead + (r * c,))
    # Element (i + r0, i + c0) sits at flat index (r0 * c + c0) + i * (c + 1).
    start = (offset if offset >= 0 else -offset * c) if n else 0
    limit = start + (n - 1) * (c + 1) + 1 if n else 0
    zeros = (0,) * len(lead)
    return lax.slice(flat, zeros + (start,), lead + (limit,), (1,) * len(lead) + (c + 1,))


def trace(a, offset=0, axis1: int = 0, axis2: int = 1, dtype=None):
    """The sum of ``diagonal(a, offset, axis1, axis2)`` (``dtype`` as in ``sum``: integers
    and bools accumulate in at least the default integer)."""
    from fungrad.numpy import reductions

    return reductions.sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def _diag_matrix(v, k: int):
    """The square matrix with the 1-D ``v`` on diagonal ``k`` and zeros elsewhere: ``v``
    padded with ``n`` zeros between elements (interior padding) is the flattened matrix."""
    m = v.shape[0]
    n = m + abs(k)
    start = k if k >= 0 else -k * n
    used = m + max(m - 1, 0) * n
    flat = lax.pad(v, 0, ((start, n * n - start - used, n),))
    return lax.reshape(flat, (n, n))


def diag(v, k=0):
    """A 1-D ``v`` becomes a square matrix with ``v`` on diagonal ``k``; a 2-D ``v`` gives its
    ``k``-th diagonal.

    Example: ``diag(array([1, 2]), 1)`` is ``[[0, 1, 0], [0, 0, 2], [0, 0, 0]]``.
    """
    util.check_arraylike("diag", v)
    v = util.asarray(v, fun_name="diag")
    k = operator.index(k)
    if v.ndim == 1:
        return _diag_matrix(v, k)
    if v.ndim == 2:
        return diagonal(v, k)
    raise ValueError(f"diag: input must be 1-D or 2-D, got shape {v.shape}")


def diagflat(v, k=0):
    """``diag`` of the flattened ``v``: a square matrix with ``ravel(v)`` on diagonal ``k``."""
    util.check_arraylike("diagflat", v)
    v = util.asarray(v, fun_name="diagflat")
    return _diag_matrix(_ravel(v), operator.index(k))


# -- einsum -------------------------------------------------------------------------------------
# A label is a letter (str) or, for the dims an ellipsis covers, a negative int: the ellipsis
# dims are right-aligned across operands, so dim -1 of every ellipsis shares label -1.

_OPTIMIZE = (True, False, "auto", "greedy")
#: opt_einsum's path strategies, which JAX passes on: fungrad orders the contractions greedily
#: for each of them (the order changes the cost, not the value beyond float rounding)
_STRATEGIES = (
    "optimal",
    "dp",
    "branch-all",
    "branch-2",
    "branch-1",
    "random-greedy",
    "random-greedy-128",
    "auto-hq",
)


def _einsum_path(optimize, n: int):
    """An explicit contraction path (``einsum_path``'s, with or without its leading
    ``"einsum_path"``) as a list of index pairs, or None for a strategy."""
    if isinstance(optimize, (str, bool)) or optimize is None:
        if optimize in _OPTIMIZE or optimize in _STRATEGIES:
            return None
    elif isinstance(optimize, (list, tuple)):
        path = [tuple(p) for p in optimize if not (isinstance(p, str) and p == "einsum_path")]
        if all(len(p) == 2 for p in path) and len(path) == max(n - 1, 0):
            return path
    raise ValueError(
        f"einsum: optimize={optimize!r} is not supported; use one of "
        f"{_OPTIMIZE + _STRATEGIES} (fungrad orders the contractions greedily for every "
        "strategy, or left to right for False) or an explicit path of n-1 index pairs"
    )


def _einsum_tokens(spec: str, subscripts: str):
    """``"ab...c"`` -> ``["a", "b", ..., "c"]``, validating the characters."""
    tokens, i = [], 0
    while i < len(spec):
        if spec.startswith("...", i):
            if ... in tokens:
                raise ValueError(
                    f"einsum: more than one ellipsis in term {spec!r} of {subscripts!r}"
                )
            tokens.append(...)
            i += 3
        elif spec[i] in string.ascii_letters:
            tokens.append(spec[i])
            i += 1
        else:
            raise ValueError(
                f"einsum: invalid subscript character {spec[i]!r} in {subscripts!r} "
                "(use letters a-z, A-Z and '...')"
            )
    return tokens


def _einsum_parse(subscripts: str, shapes):
    """The labels of each operand and of the output."""
    spec = subscripts.replace(" ", "")
    explicit = "->" in spec
    inputs, output = spec.split("->", 1) if explicit else (spec, None)
    terms = inputs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(
            f"einsum: subscripts {subscripts!r} name {len(terms)} operands, but "
            f"{len(shapes)} were given"
        )
    in_labels, n_ellipsis = [], 0
    for i, (term, shape) in enumerate(zip(terms, shapes)):
        tokens = _einsum_tokens(term, subscripts)
        n_letters = len(tokens) - (... in tokens)
        n_ell = len(shape) - n_letters
        if n_ell < 0 or (n_ell and ... not in tokens):
            raise ValueError(
                f"einsum: subscript {term!r} does not contain the correct number "
                f"of indices for operand {i} of shape {tuple(shape)}"
            )
        labels = []
        for t in tokens:
            labels.extend(range(-n_ell, 0) if t is ... else [t])
        in_labels.append(labels)
        n_ellipsis = max(n_ellipsis, n_ell)
    all_letters = [m for labels in in_labels for m in labels if isinstance(m, str)]
    if not explicit:
        unique = sorted(m for m in set(all_letters) if all_letters.count(m) == 1)
        return in_labels, list(range(-n_ellipsis, 0)) + unique
    out = []
    for t in _einsum_tokens(output, subscripts):
        if t is ...:
            out.extend(range(-n_ellipsis, 0))
        elif t not in all_letters:
            raise ValueError(
                f"einsum: output subscript {t!r} of {subscripts!r} does not appear in any input"
            )
        elif t in out:
            raise ValueError(
                f"einsum: output subscript {t!r} appears more than once in {subscripts!r}"
            )
        else:
            out.append(t)
    return in_labels, out


def _label_name(m) -> str:
    return repr(m) if isinstance(m, str) else f"... dim {m}"


def _einsum_sizes(in_labels, arrays):
    """Each label's size; sizes of one label must agree, except that 1 broadcasts."""
    sizes = {}
    for i, (labels, x) in enumerate(zip(in_labels, arrays)):
        own = {}
        for m, d in zip(labels, x.shape):
            if own.setdefault(m, d) != d:
                raise ValueError(
                    f"einsum: label {_label_name(m)} is repeated in operand {i} "
                    f"(shape {x.shape}) with different sizes {own[m]} and {d}; "
                    "a repeated label takes a diagonal and needs equal sizes"
                )
        for m, d in own.items():
            prev = sizes.setdefault(m, d)
            if prev == 1:
                sizes[m] = d
            elif d not in (1, prev):
                raise ValueError(
                    f"einsum: size of label {_label_name(m)} for operand {i} "
                    f"({d}, shape {x.shape}) does not match previous terms "
                    f"({prev})"
                )
    return sizes


def _einsum_sum(x, labels, drop):
    """Sum ``x`` over the dims labelled ``drop`` (``reduce_or`` for bool, as JAX does)."""
    axes = tuple(i for i, m in enumerate(labels) if m in drop)
    if not axes:
        return x, labels
    x = lax.reduce_or(x, axes) if x.dtype == np.bool_ else lax.reduce_sum(x, axes)
    return x, [m for m in labels if m not in drop]


def _einsum_prepare(x, labels, sizes):
    """Take the diagonal of labels repeated within the operand, and drop the size-1 dims that
    broadcast against a larger size (the operand does not depend on that label)."""
    for m in [m for m in dict.fromkeys(labels) if labels.count(m) > 1]:
        axes = tuple(i for i, m2 in enumerate(labels) if m2 == m)
        x = _diagonal_last(_move_last(x, axes), len(axes))
        labels = [m2 for m2 in labels if m2 != m] + [m]
    squeeze = tuple(i for i, m in enumerate(labels) if x.shape[i] == 1 and sizes[m] != 1)
    x = lax.squeeze(x, squeeze)
    return x, [m for i, m in enumerate(labels) if i not in squeeze]


def _einsum_contract(x, x_labels, y, y_labels, keep, out_dtype, precision, dot_general=None):
    """One pairwise contraction: shared labels still needed (``keep``) are batch dims, the
    other shared labels are contracted (by ``dot_general`` where einsum was given one)."""
    x, x_labels = _einsum_sum(
        x, x_labels, [m for m in x_labels if m not in y_labels and m not in keep]
    )
    y, y_labels = _einsum_sum(
        y, y_labels, [m for m in y_labels if m not in x_labels and m not in keep]
    )
    shared = [m for m in x_labels if m in y_labels]
    batch = [m for m in shared if m in keep]
    contract = [m for m in shared if m not in keep]
    if x.dtype != y.dtype:  # an earlier product already has preferred_element_type
        x = lax.convert_element_type(x, out_dtype)
        y = lax.convert_element_type(y, out_dtype)

    def dims(labels):
        return [x_labels.index(m) for m in labels], [y_labels.index(m) for m in labels]

    if dot_general is None:
        out = _dot_general(x, y, dims(contract), dims(batch), out_dtype, precision)
    else:
        (xc, yc), (xb, yb) = dims(contract), dims(batch)
        numbers = ((tuple(xc), tuple(yc)), (tuple(xb), tuple(yb)))
        out = dot_general(x, y, numbers, precision, preferred_element_type=out_dtype)
    labels = (
        batch
        + [m for m in x_labels if m not in y_labels]
        + [m for m in y_labels if m not in x_labels]
    )
    return out, labels


def _einsum_needed(terms, skip, out_labels):
    needed = set(out_labels)
    for k, (_, labels) in enumerate(terms):
        if k not in skip:
            needed.update(labels)
    return needed


def _einsum_pick(terms, out_labels, sizes, greedy: bool):
    """The pair of terms to contract next: greedily, the pair (sharing a label if any does)
    whose result is smallest relative to its inputs; otherwise the first two."""
    if not greedy:
        return 0, 1
    best = None
    for i, j in itertools.combinations(range(len(terms)), 2):
        (x, xl), (y, yl) = terms[i], terms[j]
        keep = _einsum_needed(terms, (i, j), out_labels)
        result = set(m for m in xl + yl if m in keep)
        cost = math.prod(sizes[m] for m in result) - x.size - y.size
        key = (not set(xl) & set(yl), cost, i, j)
        best = key if best is None or key < best else best
    return best[2], best[3]


def _einsum_sublists(first, rest):
    """einsum(op0, sublist0, op1, sublist1, ..., [sublist_out]) -> a subscripts string."""
    args = (first,) + tuple(rest)
    operands, sublists = args[0::2], list(args[1::2])
    output = args[-1] if len(args) % 2 else None
    if output is not None:
        operands = operands[:-1]

    def term(sub):
        out = ""
        for s in sub:
            if s is ...:
                out += "..."
            elif isinstance(s, (int, np.integer)) and 0 <= s < len(string.ascii_letters):
                out += string.ascii_letters[s]
            else:
                raise TypeError(
                    f"einsum: subscript lists hold ints in [0, 52) and Ellipsis, got {s!r}"
                )
        return out

    spec = ",".join(term(s) for s in sublists)
    if output is not None:
        spec += "->" + term(output)
    return spec, operands


def einsum(
    subscripts,
    /,
    *operands,
    out=None,
    optimize="auto",
    precision=None,
    preferred_element_type=None,
    _dot_general=None,
    out_sharding=None,
) -> Array:
    """Einstein summation: ``einsum("ij,jk->ik", a, b)`` is ``a @ b``.

    Supports implicit output (the labels used once, sorted, after the ellipsis dims) and
    explicit ``->`` output, ``...`` broadcasting, repeated labels within an operand (a
    diagonal), labels summed away and any number of operands, which are contracted pairwise
    with ``dot_general`` in a greedy order (``optimize=False`` contracts left to right). The
    sublist form ``einsum(a, [0, 1], b, [1, 2], [0, 2])`` is accepted too.

    NB: as in JAX, ellipsis dims missing from an explicit output are summed (numpy raises).

    Args:
      subscripts: the subscripts string (or the first operand of the sublist form).
      *operands: the arrays.
      optimize: ``"auto"``, ``"greedy"``, ``True`` or one of opt_einsum's other strategies
        (``"optimal"``, ``"dp"``, ...: greedy order), ``False`` (left to right), or an explicit
        path of index pairs (``einsum_path``'s), followed as given.
      precision, preferred_element_type: passed to ``lax.dot_general``;
        ``preferred_element_type`` is also the result dtype.
      out: not supported (JAX's NotImplementedError): einsum returns a new array.
      _dot_general: JAX's hook for the pairwise products, called as ``_dot_general(x, y,
        dimension_numbers, precision, preferred_element_type=...)`` in place of
        ``lax.dot_general`` (libraries pass their own, e.g. flax's quantised products).
      out_sharding: accepted for JAX's signature; fungrad's results are unsharded (one
        device, docs/sharding.md).
    """
    del out_sharding
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.einsum is not supported.")
    if not isinstance(subscripts, str):
        subscripts, operands = _einsum_sublists(subscripts, operands)
    path = _einsum_path(optimize, len(operands))
    if not operands:
        raise ValueError("einsum: at least one operand is required")
    arrays, out_dtype, weak = _promote("einsum", operands, preferred_element_type)
    in_labels, out_labels = _einsum_parse(subscripts, [x.shape for x in arrays])
    sizes = _einsum_sizes(in_labels, arrays)
    terms = [_einsum_prepare(x, labels, sizes) for x, labels in zip(arrays, in_labels)]
    # Labels found in one term only, and not in the output, are summed before any product.
    terms = [
        _einsum_sum(
            x, labels, [m for m in labels if m not in _einsum_needed(terms, (k,), out_labels)]
        )
        for k, (x, labels) in enumerate(terms)
    ]
    while len(terms) > 1:
        if path:
            i, j = sorted(path.pop(0))
            if i == j or not 0 <= i < j < len(terms):
                raise ValueError(
                    f"einsum: the path's pair {(i, j)} does not name two of the "
                    f"{len(terms)} terms left (each step contracts two, appending the result)"
                )
        else:
            i, j = _einsum_pick(terms, out_labels, sizes, optimize is not False)
        keep = _einsum_needed(terms, (i, j), out_labels)
        product = _einsum_contract(*terms[i], *terms[j], keep, out_dtype, precision, _dot_general)
        terms = [t for k, t in enumerate(terms) if k not in (i, j)] + [product]
    x, labels = terms[0]
    x, labels = _einsum_sum(x, labels, [m for m in labels if m not in out_labels])
    x = lax.transpose(x, tuple(labels.index(m) for m in out_labels))
    return _finish(x, out_dtype, weak)


# -- convolutions -------------------------------------------------------------------------------


def _conv1d(fun_name, a, v, mode, flip, precision, preferred_element_type):
    util.check_arraylike(fun_name, a, v)
    if preferred_element_type is None:
        a, v = util.promote_dtypes_inexact(a, v)
    else:
        a, v = util.promote_dtypes(a, v)
    if a.ndim != 1 or v.ndim != 1:
        raise ValueError(
            f"{fun_name}: only 1-D inputs are supported, got shapes {a.shape} and {v.shape}"
        )
    if a.shape[0] == 0 or v.shape[0] == 0:
        raise ValueError(f"{fun_name}: inputs cannot be empty, got shapes {a.shape} and {v.shape}")
    reverse_out = False
    if a.shape[0] < v.shape[0]:  # slide the shorter array; correlate then runs backwards
        a, v = v, a
        reverse_out = not flip
    if flip:
        v = lax.rev(v, (0,))
    m = v.shape[0]
    if mode == "valid":
        padding = ((0, 0),)
    elif mode == "same":
        padding = ((m // 2, m - m // 2 - 1),)
    elif mode == "full":
        padding = ((m - 1, m - 1),)
    else:
        raise ValueError(f"{fun_name}: mode must be one of 'full', 'same', 'valid', got {mode!r}")

    def conv(a, v):
        out = lax.conv_general_dilated(
            lax.reshape(a, (1, 1, a.shape[0])),
            lax.reshape(v, (1, 1, m)),
            (1,),
            padding,
            precision=precision,
            preferred_element_type=preferred_element_type,
        )
        return lax.reshape(out, (out.shape[-1],))

    if dtypes.kind(a.dtype) == "c":  # four real convolutions: (ar + i ai) * (vr + i vi)
        ar, ai, vr, vi = lax.real(a), lax.imag(a), lax.real(v), lax.imag(v)
        out = lax.complex(lax.sub(conv(ar, vr), conv(ai, vi)), lax.add(conv(ar, vi), conv(ai, vr)))
    else:
        out = conv(a, v)
    return lax.rev(out, (0,)) if reverse_out else out


def convolve(a, v, mode: str = "full", *, precision=None, preferred_element_type=None):
    """1-D discrete convolution ``out[n] = sum_m a[m] v[n - m]`` (numpy's ``convolve``),
    computed with ``lax.conv_general_dilated``. Integer inputs give floats, as in JAX.

    Example: ``convolve(array([1., 2, 3]), array([0., 1]))`` is ``[0., 1, 2, 3]``.
    """
    return _conv1d("convolve", a, v, mode, True, precision, preferred_element_type)


def correlate(a, v, mode: str = "valid", *, precision=None, preferred_element_type=None):
    """1-D cross-correlation ``out[k] = sum_n a[n + k] conj(v[n])`` (numpy's ``correlate``;
    ``conj`` matters for complex ``v`` only)."""
    util.check_arraylike("correlate", a, v)
    v = _conj(util.asarray(v, fun_name="correlate"))
    return _conv1d("correlate", a, v, mode, False, precision, preferred_element_type)


# -- cross product ------------------------------------------------------------------------------


def cross(a, b, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis=None):
    """The cross product of 2- or 3-vectors along ``axisa`` / ``axisb`` (``axis`` sets all
    three), broadcasting the other dimensions; 2-vectors have an implicit zero z-component, and
    two 2-vectors give the scalar z-component.
    """
    from fungrad.numpy import ufuncs

    (a, b), _, _ = _promote("cross", (a, b))
    if axis is not None:
        axisa = axisb = axisc = axis
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(
            f"cross: operands must have at least one dimension, got shapes {a.shape} and {b.shape}"
        )
    a = _move_last(a, (util.canonicalize_axis(axisa, a.ndim, "cross"),))
    b = _move_last(b, (util.canonicalize_axis(axisb, b.ndim, "cross"),))
    if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
        raise ValueError(
            f"cross: the vector dimension must have size 2 or 3, got shapes "
            f"{a.shape} and {b.shape} (vector axis last)"
        )

    def comp(x, i):
        if i < x.shape[-1]:
            return lax.index_in_dim(x, i, -1, keepdims=False)
        return lax.full_like(lax.index_in_dim(x, 0, -1, keepdims=False), 0)

    a0, a1, a2 = (comp(a, i) for i in range(3))
    b0, b1, b2 = (comp(b, i) for i in range(3))
    mul, sub = ufuncs.multiply, ufuncs.subtract
    z = sub(mul(a0, b1), mul(a1, b0))
    if a.shape[-1] == 2 and b.shape[-1] == 2:
        return z
    x = sub(mul(a1, b2), mul(a2, b1))
    y = sub(mul(a2, b0), mul(a0, b2))
    c = lax.concatenate([lax.expand_dims(t, (-1,)) for t in (x, y, z)], x.ndim)
    return _move_axis_from_last(c, util.canonicalize_axis(axisc, c.ndim, "cross"))


def _move_axis_from_last(x, axis: int):
    perm = list(range(x.ndim - 1))
    perm.insert(axis, x.ndim - 1)
    return lax.transpose(x, tuple(perm))
