"""Contractions: the ``dot_general`` primitive and its wrappers ``dot`` and ``batch_matmul``.

``dot_general(lhs, rhs, dimension_numbers=((lhs_contract, rhs_contract), (lhs_batch,
rhs_batch)))`` multiplies along the batch dimensions, sums over the contracting ones and lays
the result out as XLA does: batch dimensions, then the free dimensions of lhs, then those of
rhs. The operands share one dtype (the wrappers promote mixed dtypes as JAX does); the result
has ``preferred_element_type`` when given, else the operand dtype. ``precision`` is recorded
for the compilers; the numpy reference always computes at full precision.

dot_general is bilinear: its jvp is the sum of the two one-sided products, its transposes are
dot_generals of the cotangent with the other operand (JAX's ``_dot_general_transpose_lhs/rhs``),
and its batch rule folds the vmapped dimension into the dimension numbers (a batch dimension
when both operands are vmapped, a free dimension when one is) instead of broadcasting.
"""

from __future__ import annotations

import enum
import functools
import math
import operator

import numpy as np

from fungrad import core, dtypes
from fungrad.core import ShapedArray
from fungrad.lax.dot_algorithm import apply_algorithm, as_algorithm
from fungrad.lax.utils import (
    ANY_OR_COMPLEX,
    check_kinds,
    ignore_fp_errors,
    operand,
    specialized_impls,
    standard_primitive,
)
from fungrad.lowering import kernel
from fungrad.transforms.jvp import defjvp
from fungrad.transforms.transpose import deflinear_transpose, is_undefined_primal
from fungrad.transforms.vmap import batch_rules

__all__ = ["Precision", "dot_general", "dot", "batch_matmul", "dot_general_p"]


class Precision(enum.Enum):
    """Precision of a contraction on accelerators (``DEFAULT``, ``HIGH``, ``HIGHEST``).

    Also constructible from JAX's strings: ``Precision("highest")``.
    """

    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value):
        names = {
            "default": cls.DEFAULT,
            "fastest": cls.DEFAULT,
            "bfloat16": cls.DEFAULT,
            "high": cls.HIGH,
            "bfloat16_3x": cls.HIGH,
            "tensorfloat32": cls.HIGH,
            "highest": cls.HIGHEST,
            "float32": cls.HIGHEST,
        }
        return names.get(value.lower()) if isinstance(value, str) else None

    def __repr__(self):
        return f"Precision.{self.name}"

    def __str__(self):
        return self.name


def canonicalize_precision(precision):
    """``None`` or a pair of :class:`Precision` (one per operand), from None, a Precision, a
    string or a pair of those."""
    if precision is None:
        return None
    if as_algorithm(precision) is not None:
        # an algorithm is applied by the wrappers (lax.dot_general, conv_general_dilated);
        # the primitive computes the contraction of the operands they round at full precision
        return (Precision.HIGHEST, Precision.HIGHEST)
    if isinstance(precision, (Precision, str)):
        p = _precision(precision)
        return (p, p)
    if isinstance(precision, (list, tuple)) and len(precision) == 2:
        return (_precision(precision[0]), _precision(precision[1]))
    raise ValueError(
        f"precision must be None, a lax.Precision, one of its names ('default', "
        f"'high', 'highest', ...), a pair of those, or a lax.DotAlgorithm or "
        f"lax.DotAlgorithmPreset (or a preset's name), got {precision!r}"
    )


def _precision(p) -> Precision:
    if as_algorithm(p) is not None:
        raise ValueError(
            f"precision: {p!r} is a dot algorithm, which applies to both operands: "
            "pass it alone, not in a pair"
        )
    try:
        return Precision(p)
    except ValueError:
        raise ValueError(
            f"precision: {p!r} is not a lax.Precision or one of its names "
            "('default', 'high', 'highest', 'fastest', 'tensorfloat32', "
            "'float32', 'bfloat16')"
        ) from None


# -- result dtypes shared with conv_general_dilated ----------------------------------------------


def check_preferred_element_type(name: str, input_dtype: np.dtype, preferred) -> np.dtype:
    """The result dtype of a contraction of ``input_dtype`` operands. As in JAX, integer
    inputs may not be narrowed (nor turned into bool); float and bool inputs take any dtype."""
    if preferred is None:
        return input_dtype
    check_kinds(name, preferred, ANY_OR_COMPLEX, "preferred_element_type")
    if dtypes.kind(input_dtype) in "iu" and (
        dtypes.kind(preferred) == "b" or preferred.itemsize < input_dtype.itemsize
    ):
        raise TypeError(
            f"{name}: preferred_element_type {preferred.name} must not be narrower "
            f"than the operand dtype {input_dtype.name}"
        )
    return preferred


def accumulation_dtype(input_dtype: np.dtype, out_dtype: np.dtype) -> np.dtype:
    """The dtype the numpy reference contracts in: float32 or float64 for float inputs (float16
    accumulates in float32), int64 for integer and bool inputs (products wrap modulo 2**64, so
    the final cast gives XLA's wrapped result) unless the result is float. A complex input or
    result contracts in complex64 or complex128 (the widest precision of the two); a real
    result of complex inputs is the real part, as in XLA."""
    if "c" in (dtypes.kind(input_dtype), dtypes.kind(out_dtype)):
        wide = np.dtype(np.float64) in (
            dtypes.real_dtype(input_dtype),
            dtypes.real_dtype(out_dtype),
        )
        return np.dtype(np.complex128 if wide else np.complex64)
    if dtypes.kind(input_dtype) == "f" or dtypes.kind(out_dtype) == "f":
        widest = max(
            input_dtype.itemsize if dtypes.kind(input_dtype) == "f" else 0,
            out_dtype.itemsize if dtypes.kind(out_dtype) == "f" else 0,
        )
        return np.dtype(np.float64 if widest == 8 else np.float32)
    return np.dtype(np.int64)


def cast_result(x: np.ndarray, out_dtype: np.dtype):
    """Cast a reference result to ``out_dtype`` with convert_element_type's semantics
    (saturating float -> int, NaN -> 0, nonzero -> True, integers wrap)."""
    from fungrad.lax import elementwise

    if x.dtype == out_dtype:
        return np.asarray(x)[()]
    return elementwise.convert_element_type_p.impl(x, new_dtype=out_dtype, weak_type=False)


# -- dot_general --------------------------------------------------------------------------------


def _check_dims(side: str, shape, contract, batch) -> None:
    name = "dot_general"
    if any(not 0 <= d < len(shape) for d in contract + batch):
        raise TypeError(
            f"{name}: {side} dimension numbers must be in [0, {len(shape)}) for "
            f"{side} of shape {shape}, got {side}_contracting {contract} and "
            f"{side}_batch {batch}"
        )
    if len(set(contract)) != len(contract) or len(set(batch)) != len(batch):
        raise TypeError(
            f"{name}: {side} dimension numbers must be distinct, got "
            f"{side}_contracting {contract} and {side}_batch {batch}"
        )
    if set(contract) & set(batch):
        raise TypeError(
            f"{name}: {side} batch dimensions {batch} overlap its contracting dimensions {contract}"
        )


def _free_dims(ndim: int, contract, batch) -> tuple[int, ...]:
    return tuple(d for d in range(ndim) if d not in contract and d not in batch)


def _dot_general_abstract_eval(lhs, rhs, *, dimension_numbers, precision, preferred_element_type):
    name = "dot_general"
    (lc, rc), (lb, rb) = dimension_numbers
    if lhs.dtype != rhs.dtype:
        raise TypeError(
            f"{name} requires operands of the same dtype, got {lhs.dtype.name} and "
            f"{rhs.dtype.name} (convert one with lax.convert_element_type)"
        )
    check_kinds(name, lhs.dtype, ANY_OR_COMPLEX)
    _check_dims("lhs", lhs.shape, lc, lb)
    _check_dims("rhs", rhs.shape, rc, rb)
    for what, ld, rd in (("contracting", lc, rc), ("batch", lb, rb)):
        lsizes = tuple(lhs.shape[d] for d in ld)
        rsizes = tuple(rhs.shape[d] for d in rd)
        if lsizes != rsizes:
            raise TypeError(
                f"{name}: {what} dimensions must have equal sizes, got lhs "
                f"{what} {ld} of shape {lhs.shape} (sizes {lsizes}) and rhs "
                f"{what} {rd} of shape {rhs.shape} (sizes {rsizes})"
            )
    out_dtype = check_preferred_element_type(name, lhs.dtype, preferred_element_type)
    shape = (
        tuple(lhs.shape[d] for d in lb)
        + tuple(lhs.shape[d] for d in _free_dims(lhs.ndim, lc, lb))
        + tuple(rhs.shape[d] for d in _free_dims(rhs.ndim, rc, rb))
    )
    return ShapedArray(shape, out_dtype, lhs.weak_type and rhs.weak_type)


@ignore_fp_errors
def _dot_general_impl(lhs, rhs, *, dimension_numbers, precision, preferred_element_type):
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    return _dot_plan(
        lhs.shape, lhs.dtype, rhs.shape, rhs.dtype, dimension_numbers, preferred_element_type
    )(lhs, rhs)


#: eager float32 matrix-vector products and dots contracting more than this many elements
#: sum chunks of this many (one batched numpy matmul over the chunks, views of the operands)
#: and add the chunks' results in float64 (issue 15: numpy's sdot of 2^18 positive values was
#: 19 eps of ``|a| @ |b|`` off, jit's blocked reduction 0.1; float64 copies of the operands
#: cost 3-75x the float32 time, the chunks ~1x)
EAGER_CHUNK = 4096


@ignore_fp_errors
def _chunked_product(a, c):
    """``a @ c`` for 2-d float32 ``a`` [m, k] and ``c`` [k, n]: chunks of ``EAGER_CHUNK``
    contraction elements multiplied in float32 (BLAS), their results summed in float64."""
    (m, k), n = a.shape, c.shape[1]
    nc = k // EAGER_CHUNK
    cut = nc * EAGER_CHUNK
    parts = np.matmul(
        a[:, :cut].reshape(m, nc, EAGER_CHUNK).transpose(1, 0, 2),
        c[:cut].reshape(nc, EAGER_CHUNK, n),
    )
    total = parts.sum(axis=0, dtype=np.float64)
    if cut < k:
        total += np.dot(a[:, cut:], c[cut:])
    return total.astype(np.float32)


@functools.lru_cache(maxsize=1024)
def _dot_plan(lhs_shape, lhs_dtype, rhs_shape, rhs_dtype, dimension_numbers, preferred):
    """``fn(lhs, rhs)`` computing one signature of dot_general in numpy, with every layout
    decision taken once: each operand is transposed to (batch, free, contracting) order and
    flattened to 3-d, so one batched matmul (BLAS for floats) computes every case; identity
    transposes and reshapes are skipped, and without batch dimensions the product is one 2-d
    ``np.dot``. Eager code repeats signatures, and this bookkeeping costs more than a small
    product: with the plan cached, a call costs the lookup and the numpy calls."""
    (lc, rc), (lb, rb) = dimension_numbers
    out_dtype = lhs_dtype if preferred is None else preferred
    acc = accumulation_dtype(lhs_dtype, out_dtype)
    lf = _free_dims(len(lhs_shape), lc, lb)
    rf = _free_dims(len(rhs_shape), rc, rb)
    out_shape = (
        tuple(lhs_shape[d] for d in lb)
        + tuple(lhs_shape[d] for d in lf)
        + tuple(rhs_shape[d] for d in rf)
    )
    if 0 in out_shape or 0 in lhs_shape:  # an empty result, or an empty sum (zeros)
        return lambda lhs, rhs: cast_result(np.zeros(out_shape, acc), out_dtype)
    b, m, n, k = (
        math.prod([shape[d] for d in dims])
        for shape, dims in ((lhs_shape, lb), (lhs_shape, lf), (rhs_shape, rf), (lhs_shape, lc))
    )
    batched = bool(lb)
    a_shape, c_shape = ((b, m, k), (b, k, n)) if batched else ((m, k), (k, n))
    a_prep = _operand_prep(lhs_shape, lhs_dtype, lb + lf + lc, acc, a_shape)
    c_prep = _operand_prep(rhs_shape, rhs_dtype, rb + rc + rf, acc, c_shape)
    # NOTE: a contraction of size 1 is one product per element, computed as such: numpy's dot
    # sends a (1, 1) operand to BLAS's axpy, which skips the whole update when the scalar is
    # 0 (inf * 0 gave 0, not NaN; -3 * 0 gave +0, not -0, as XLA's single product does).
    product = np.multiply if k == 1 else np.matmul if batched else np.dot  # (ignore_fp_errors)
    if not batched and acc == np.float32 and k > EAGER_CHUNK and min(m, n) == 1:
        product = _chunked_product  # numpy's (BLAS's) sdot/sgemv run one sum through all k
    reshape_out = out_shape != (a_shape[:-1] + c_shape[-1:] if not batched else (b, m, n))
    cast = acc != out_dtype

    def run(lhs, rhs):
        out = product(a_prep(lhs), c_prep(rhs))
        if reshape_out:
            out = out.reshape(out_shape)
        return cast_result(out, out_dtype) if cast else out[()]

    return run


def _operand_prep(shape, dtype, perm, acc, flat_shape):
    """``fn(x)``: ``x`` transposed by ``perm``, cast to ``acc`` and reshaped to ``flat_shape``,
    each step only when it changes something."""
    steps = []
    if perm != tuple(range(len(shape))):
        steps.append(lambda x: x.transpose(perm))
    if dtype != acc:
        steps.append(lambda x: x.astype(acc))
    if flat_shape != tuple(shape[d] for d in perm):
        steps.append(lambda x: x.reshape(flat_shape))
    if not steps:
        return lambda x: x
    if len(steps) == 1:
        return steps[0]

    def prep(x):
        for step in steps:
            x = step(x)
        return x

    return prep


dot_general_p = standard_primitive("dot_general", _dot_general_impl, _dot_general_abstract_eval)
specialized_impls[dot_general_p] = (
    lambda lhs, rhs, *, dimension_numbers, precision, preferred_element_type: _dot_plan(
        lhs.shape, lhs.dtype, rhs.shape, rhs.dtype, dimension_numbers, preferred_element_type
    )
)


def _dot_general_jvp_lhs(t, lhs, rhs, **params):
    return dot_general_p.bind(t, rhs, **params)


def _dot_general_jvp_rhs(t, lhs, rhs, **params):
    return dot_general_p.bind(lhs, t, **params)


def _ranges_like(*xs):
    """Consecutive ranges with the lengths of ``xs``: (0..len(x0)), (len(x0)..), ..."""
    start = 0
    for x in xs:
        yield tuple(range(start, start + len(x)))
        start += len(x)


@functools.lru_cache(maxsize=1024)
def _transpose_lhs_layout(x_ndim: int, y_ndim: int, dimension_numbers, swap_ans: bool):
    """(dimension numbers of the product of the cotangent with y, the permutation putting its
    result in x's order) for :func:`_dot_general_transpose_lhs`: pure index work on the
    signature, done once per signature."""
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    x_kept = _free_dims(x_ndim, x_contract, x_batch)
    y_kept = _free_dims(y_ndim, y_contract, y_batch)
    if swap_ans:
        ans_batch, ans_y, _ = _ranges_like(x_batch, y_kept, x_kept)
    else:
        ans_batch, _, ans_y = _ranges_like(x_batch, x_kept, y_kept)
    dims = ((ans_y, y_kept), (ans_batch, y_batch))
    x_contract_sorted_by_y = tuple(int(x_contract[i]) for i in np.argsort(y_contract))
    unsorted_axes = tuple(x_batch) + x_kept + x_contract_sorted_by_y
    return dims, tuple(int(i) for i in np.argsort(unsorted_axes))


def _dot_general_transpose_lhs(
    g, x_aval, y, *, dimension_numbers, precision, preferred_element_type, swap_ans=False
):
    # JAX's _dot_general_transpose_lhs: contract g with y over y's free dims (and pair the batch
    # dims); the result comes out as (batch, x free, x contracting sorted by y's), which a
    # transpose puts back in x's order.
    from fungrad import lax
    from fungrad.lax import elementwise

    dims, out_axes = _transpose_lhs_layout(
        x_aval.ndim, core.get_aval(y).ndim, dimension_numbers, swap_ans
    )
    if g.dtype != y.dtype:  # a preferred_element_type: contract in the wider dtype
        common = np.promote_types(g.dtype, y.dtype)
        g = lax.convert_element_type(g, common)
        y = lax.convert_element_type(y, common)
        preferred_element_type = None
    out = dot_general_p.bind(
        g,
        y,
        dimension_numbers=dims,
        precision=precision,
        preferred_element_type=preferred_element_type,
    )
    x_bar = lax.transpose(out, out_axes)
    if x_bar.dtype != x_aval.dtype:  # (a complex cotangent of a real operand: its real part)
        x_bar = elementwise._convert_quietly(x_bar, x_aval.dtype)
    return x_bar


def _dot_general_transpose(ct, x, y, *, dimension_numbers, precision, preferred_element_type):
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    if is_undefined_primal(x) and is_undefined_primal(y):
        raise TypeError(
            "dot_general: cannot transpose with respect to both operands (the "
            "product of two linear inputs is not linear)"
        )
    if is_undefined_primal(x):
        return [
            _dot_general_transpose_lhs(
                ct,
                x.aval,
                y,
                dimension_numbers=dimension_numbers,
                precision=precision,
                preferred_element_type=preferred_element_type,
            ),
            None,
        ]
    swapped = ((y_contract, x_contract), (y_batch, x_batch))
    return [
        None,
        _dot_general_transpose_lhs(
            ct,
            y.aval,
            x,
            dimension_numbers=swapped,
            precision=precision,
            preferred_element_type=preferred_element_type,
            swap_ans=True,
        ),
    ]


def _bump(dims, b: int) -> tuple[int, ...]:
    """Dimension numbers of the unbatched operand renumbered for the batched one (dimension
    ``b`` inserted)."""
    return tuple(d + (d >= b) for d in dims)


def _dot_general_batch(
    axis_size, args, dims, *, dimension_numbers, precision, preferred_element_type
):
    # JAX's _dot_general_batch_dim_nums: no data moves, only the dimension numbers change.
    (lhs, rhs), (lbd, rbd) = args, dims
    (lc, rc), (lb, rb) = dimension_numbers
    if lbd is not None and rbd is not None:
        # both vmapped: the vmapped dims become one more (leading) batch dimension
        new = ((_bump(lc, lbd), _bump(rc, rbd)), ((lbd,) + _bump(lb, lbd), (rbd,) + _bump(rb, rbd)))
        out_dim = 0
    elif lbd is not None:
        # lhs only: the vmapped dim is one more free dimension of lhs
        lhs_free = _free_dims(core.get_aval(lhs).ndim, _bump(lc, lbd), _bump(lb, lbd))
        out_dim = len(lb) + sum(1 for d in lhs_free if d < lbd)
        new = ((_bump(lc, lbd), rc), (_bump(lb, lbd), rb))
    else:
        rhs_free = _free_dims(core.get_aval(rhs).ndim, _bump(rc, rbd), _bump(rb, rbd))
        out_dim = core.get_aval(lhs).ndim - len(lc) + sum(1 for d in rhs_free if d < rbd)
        new = ((lc, _bump(rc, rbd)), (lb, _bump(rb, rbd)))
    out = dot_general_p.bind(
        lhs,
        rhs,
        dimension_numbers=new,
        precision=precision,
        preferred_element_type=preferred_element_type,
    )
    return out, out_dim


defjvp(dot_general_p, _dot_general_jvp_lhs, _dot_general_jvp_rhs)
deflinear_transpose(dot_general_p, _dot_general_transpose)
batch_rules[dot_general_p] = _dot_general_batch


def _dimension_numbers(dimension_numbers):
    try:
        (lc, rc), (lb, rb) = dimension_numbers
        return (
            (tuple(map(operator.index, lc)), tuple(map(operator.index, rc))),
            (tuple(map(operator.index, lb)), tuple(map(operator.index, rb))),
        )
    except (TypeError, ValueError):
        raise TypeError(
            "dot_general: dimension_numbers must be ((lhs_contracting, "
            "rhs_contracting), (lhs_batch, rhs_batch)), sequences of ints, got "
            f"{dimension_numbers!r}"
        ) from None


def _promoted_operands(name: str, lhs, rhs):
    """Both operands with their JAX-promoted common dtype (Python scalars are weak)."""
    from fungrad.lax import elementwise

    x, y = operand(lhs, name), operand(rhs, name)
    if x.dtype == y.dtype:
        return x, y
    dt, weak = dtypes.promote_types(dtypes.dtype_and_weak(x), dtypes.dtype_and_weak(y))
    return (
        elementwise.convert_element_type(x, dt, weak_type=weak),
        elementwise.convert_element_type(y, dt, weak_type=weak),
    )


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """General tensor contraction.

    Args:
      lhs, rhs: arrays (mixed dtypes are promoted first, as in JAX).
      dimension_numbers: ``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``.
      precision: None, a :class:`Precision`, its name, or a pair of those; or a
        :class:`DotAlgorithm` / :class:`DotAlgorithmPreset` (or a preset's name), which rounds
        the float operands and picks the accumulation type (fungrad/lax/dot_algorithm.py).
      preferred_element_type: the result dtype (e.g. int32 for int8 inputs).

    Returns:
      The contraction: batch dims, then lhs free dims, then rhs free dims.

    Example: ``dot_general(a, b, (((1,), (0,)), ((), ())))`` is the matrix product ``a @ b``.
    """
    x, y = _promoted_operands("dot_general", lhs, rhs)
    algorithm = as_algorithm(precision)
    if algorithm is not None:
        x, y, acc, finish = apply_algorithm("dot_general", x, y, algorithm, preferred_element_type)
        return finish(dot_general(x, y, dimension_numbers, None, acc))
    preferred = (
        None
        if preferred_element_type is None
        else dtypes.canonicalize_dtype(preferred_element_type)
    )
    return dot_general_p.bind(
        x,
        y,
        dimension_numbers=_dimension_numbers(dimension_numbers),
        precision=canonicalize_precision(precision),
        preferred_element_type=preferred,
    )


def dot(lhs, rhs, precision=None, preferred_element_type=None):
    """Vector/matrix product: vector.vector, matrix.vector, vector.matrix or matrix.matrix.

    Other ranks need :func:`dot_general` (or ``fungrad.numpy.dot`` / ``matmul``).

    Example: ``dot(jnp.ones((2, 3)), jnp.ones(3))`` is ``[3., 3.]``.
    """
    x, y = operand(lhs, "dot"), operand(rhs, "dot")
    if x.ndim not in (1, 2) or y.ndim not in (1, 2):
        raise ValueError(
            f"dot: operands must be vectors or matrices, got shapes {x.shape} and "
            f"{y.shape}; use lax.dot_general for other ranks"
        )
    dims = (((x.ndim - 1,), (0,)), ((), ()))
    return dot_general(
        x, y, dims, precision=precision, preferred_element_type=preferred_element_type
    )


def batch_matmul(lhs, rhs, precision=None):
    """Batched matrix product over the leading dimensions: ``(..., m, k) @ (..., k, n)``.

    Example: shapes ``(5, 2, 3)`` and ``(5, 3, 4)`` give ``(5, 2, 4)``.
    """
    x, y = operand(lhs, "batch_matmul"), operand(rhs, "batch_matmul")
    if min(x.ndim, y.ndim) < 2 or x.ndim != y.ndim:
        raise ValueError(
            f"batch_matmul: operands must have the same rank, at least 2, got "
            f"shapes {x.shape} and {y.shape}"
        )
    batch = tuple(range(x.ndim - 2))
    return dot_general(x, y, (((x.ndim - 1,), (y.ndim - 2,)), (batch, batch)), precision=precision)


# -- lowering: a Gemm step where the backend's policy wants one, an inline reduction otherwise
# (where the policy says so, a matrix times a vector read along the matrix's rows is the inline
# reduction whatever its size, and one read down the matrix's columns a column sum:
# _is_row_dot, _column_dot)


def _layout_of(x) -> tuple[int, ...] | None:
    """The order of x's dims in memory when x is a (permuted) view of a stored buffer."""
    if x.view is None:
        return None
    _, p = x.view
    inv = [0] * len(p)
    for j, q in enumerate(p):
        inv[q] = j
    return tuple(inv)


def _operand_buffer(ctx, x, order, trans_order):
    """x's buffer laid out in ``order`` (trans False) or ``trans_order`` (trans True),
    storing a copy when it is neither: in ``trans_order`` when that keeps x's innermost
    dim in memory innermost (the copy then reads runs of contiguous elements, as it writes
    them: the attention scores' keys, (b, t, h, d) stored as (b, h, t, d) for a transposed
    product, not (b, h, d, t) one element per row: 0.9 of 1.0 ms less), else in ``order``."""
    lay = _layout_of(x)
    if lay == tuple(order) or (lay is not None and lay == tuple(trans_order)):
        return x.view[0], lay != tuple(order)
    identity = tuple(range(len(x.shape)))
    if x.view is None and identity in (tuple(order), tuple(trans_order)):
        # store x itself (BLAS transposes if need be): its other readers then load it too
        return ctx.materialize(x).buffer, tuple(order) != identity
    inner = _memory_order(x)[-1:]
    trans = tuple(order[-1:]) != inner and tuple(trans_order[-1:]) == inner
    t = ctx.materialize(
        kernel.transposed(ctx, x, trans_order if trans else order, "dot_general operand")
    )
    return t.buffer, trans


def _memory_order(x) -> tuple[int, ...]:
    """The order of x's dims in memory: its view's when x reads a stored buffer through a
    permutation, else its own (a lazy tensor's elements are computed in any order)."""
    return _layout_of(x) or tuple(range(len(x.shape)))


def _is_row_dot(lhs, rhs, lc, rc, lb, rb, lf, rf, m, n) -> bool:
    """A matrix-vector (or vector-vector) product, batched or not, whose vector side is one
    element wide (``n == 1``, or ``m == 1`` with the roles swapped) and whose matrix is read
    along its rows: its contraction dims are its last ones in memory (``A @ v``, ``v @ A.T``,
    ``einsum('bij,bj->bi')``). Where the policy's ``inline_row_dots`` holds it is the inline
    reduction, which reads each row contiguously and sums it in blocks combined pairwise
    (issue 15: a k = 1e6 dot was 5.7e-7 off in the CPU's gemm library and 9.6e-7 in BLAS,
    1.2e-8 inline; timings in ``lowering/cpu/policy.py``). A matrix read down its columns
    (``v @ A``) would make the inline reduction walk the columns: see :func:`_column_dot`."""
    return (n == 1 and _memory_order(lhs) == lb + lf + lc) or (
        m == 1 and _memory_order(rhs) == rb + rf + rc
    )


def _column_dot(ctx, lhs, rhs, dimension_numbers, out_shape, out_dtype):
    """A vector times a matrix read down its columns (``v @ A``, ``A.T @ v``; the vector side one
    element wide, no batch dims, as wide an output as the policy's ``column_dot`` wants) as a
    column sum of the products in the matrix's memory order: ``out[j] = sum_k v[k] * A[k, j]``
    walks A row by row, accumulating into partial rows of at most ``COLUMN_SUM_BLOCK`` products,
    which are then summed the same way (``reduce._column_reduction``): one pass over A, and an
    error bounded like the column sums' (a gemm's runs through all k: BLAS's gemv was 113 eps of
    ``|v| @ |A|`` off at k = 2^18, 1.4e-5 relative). Returns None where that does not apply (the
    product is then a gemm): the matrix not laid out so, batch dims, or an output width and
    contracted length the policy declines (timings in ``lowering/cpu/policy.py``)."""
    from fungrad.lax.reduce import _column_reduction

    (lc, rc), (lb, rb) = dimension_numbers
    lf, rf = _free_dims(len(lhs.shape), lc, lb), _free_dims(len(rhs.shape), rc, rb)
    m, n = (math.prod(x.shape[d] for d in f) for x, f in ((lhs, lf), (rhs, rf)))
    if lb:
        return None
    if m == 1 and _memory_order(rhs) == rc + rf:
        mat, vec, mc, mf, vc, skip = rhs, lhs, rc, rf, lc, len(lf)  # out: lf (ones) + rf
    elif n == 1 and _memory_order(lhs) == lc + lf:
        mat, vec, mc, mf, vc, skip = lhs, rhs, lc, lf, rc, 0  # out: lf + rf (ones)
    else:
        return None
    if not ctx.planner.policy.column_dot(max(m, n), min(mat.shape[d] for d in mc)):
        return None
    order = mc + mf

    def product(idx):  # idx: the matrix's dims in memory order
        mi, vi = [None] * len(mat.shape), [ctx.iconst(0)] * len(vec.shape)
        for d, i in zip(order, idx):
            mi[d] = i
        for d, i in zip(vc, idx):
            vi[d] = i
        return ctx.op(
            "mul",
            ctx.convert(vec.at(tuple(vi)), out_dtype),
            ctx.convert(mat.at(tuple(mi)), out_dtype),
        )

    products = kernel.from_fn([mat.shape[d] for d in order], out_dtype, product, "dot_general")
    sums = _column_reduction(ctx, products, tuple(range(len(mc))), "add")
    if sums.shape == tuple(out_shape):
        return sums
    return kernel.from_fn(
        out_shape,
        out_dtype,  # the vector side's unit dims dropped
        lambda idx: sums.at(idx[skip : skip + len(mf)]),
        "dot_general",
    )


def stores_operands(policy, eqn) -> bool:
    """Whether the dot_general equation ``eqn`` will be a :class:`Gemm` reading both operands
    from memory (its rule stores a lazy operand first): a float matrix-matrix product the policy
    wants as a gemm (``m, n > 1``: never the inline row dot or the column dot of a vector). A
    rule lowered earlier that would evaluate such an operand in a loop nest of its own (a
    column sum of it: a bias gradient beside the weight gradient) reads the stored operand
    instead of recomputing it (``reduce._reduce_lowering``)."""
    lhs, rhs = (v.aval for v in eqn.invars)
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    out_dtype = eqn.params["preferred_element_type"] or lhs.dtype
    if not (lhs.dtype == rhs.dtype == out_dtype and dtypes.kind(np.dtype(out_dtype)) == "f"):
        return False
    lf, rf = _free_dims(len(lhs.shape), lc, lb), _free_dims(len(rhs.shape), rc, rb)
    b, m, n, k = (
        math.prod(shape[d] for d in dims)
        for shape, dims in ((lhs.shape, lb), (lhs.shape, lf), (rhs.shape, rf), (lhs.shape, lc))
    )
    if accumulation_dtype(lhs.dtype, out_dtype) != out_dtype:
        return False
    return min(m, n) > 1 and k > 0 and policy.wants_gemm(m, n, k, b, np.dtype(out_dtype))


def _dot_general_lowering(ctx, lhs, rhs, *, dimension_numbers, precision, preferred_element_type):
    from fungrad.lowering.fusion import Gemm

    (lc, rc), (lb, rb) = dimension_numbers
    out_dtype = lhs.dtype if preferred_element_type is None else preferred_element_type
    acc = accumulation_dtype(lhs.dtype, out_dtype)
    lf, rf = _free_dims(len(lhs.shape), lc, lb), _free_dims(len(rhs.shape), rc, rb)
    out_shape = (
        tuple(lhs.shape[d] for d in lb)
        + tuple(lhs.shape[d] for d in lf)
        + tuple(rhs.shape[d] for d in rf)
    )
    b, m, n, k = (
        math.prod(shape[d] for d in dims)
        for shape, dims in ((lhs.shape, lb), (lhs.shape, lf), (rhs.shape, rf), (lhs.shape, lc))
    )
    policy = ctx.planner.policy
    if (
        dtypes.kind(acc) == "f"
        and lhs.dtype == rhs.dtype == out_dtype == acc
        and min(m, n, k) > 0
        and policy.wants_gemm(m, n, k, b, acc)
        and not (policy.inline_row_dots and _is_row_dot(lhs, rhs, lc, rc, lb, rb, lf, rf, m, n))
    ):
        column = _column_dot(ctx, lhs, rhs, dimension_numbers, out_shape, out_dtype)
        if column is not None:
            return column
        a_buf, trans_a = _operand_buffer(ctx, lhs, lb + lf + lc, lb + lc + lf)
        if trans_a and not policy.gemm_transposes_both:  # rhs in place, stored so if need be
            b_buf, trans_b = _operand_buffer(ctx, rhs, rb + rc + rf, rb + rc + rf)
        else:
            b_buf, trans_b = _operand_buffer(ctx, rhs, rb + rc + rf, rb + rf + rc)
        nb, nl = len(lb), len(lf)
        swapped = (
            tuple(range(nb)) + tuple(range(nb + nl, len(out_shape))) + tuple(range(nb, nb + nl))
        )
        if (
            ctx.planner.read_permutation() == swapped
            and swapped != tuple(range(len(swapped)))
            and (policy.gemm_transposes_both or trans_a or trans_b)
        ):
            # every reader transposes the result: write C^T = B^T A^T, its readers' layout
            c_buf = ctx.planner.new_buffer([out_shape[d] for d in swapped], out_dtype, "temp")
            ctx.planner.add_step(
                Gemm("dot_general", b_buf, a_buf, c_buf, n, m, k, not trans_b, not trans_a, b)
            )
            inverse = tuple(swapped.index(d) for d in range(len(swapped)))
            return kernel.transposed(
                ctx, ctx.planner.buffer_tensor(c_buf, "dot_general"), inverse, "dot_general"
            )
        c_buf = ctx.planner.new_buffer(out_shape, out_dtype, "temp")
        ctx.planner.add_step(Gemm("dot_general", a_buf, b_buf, c_buf, m, n, k, trans_a, trans_b, b))
        return ctx.planner.buffer_tensor(c_buf, "dot_general")
    nb, nf = len(lb), len(lf)
    k_extents = [lhs.shape[d] for d in lc]

    def element(idx):
        def body(*r):
            li, ri = [None] * len(lhs.shape), [None] * len(rhs.shape)
            for j, (dl, dr) in enumerate(zip(lb, rb)):
                li[dl] = ri[dr] = idx[j]
            for j, d in enumerate(lf):
                li[d] = idx[nb + j]
            for j, d in enumerate(rf):
                ri[d] = idx[nb + nf + j]
            for j, (dl, dr) in enumerate(zip(lc, rc)):
                li[dl] = ri[dr] = r[j]
            return ctx.op(
                "mul", ctx.convert(lhs.at(tuple(li)), acc), ctx.convert(rhs.at(tuple(ri)), acc)
            )

        if 0 in k_extents:
            return ctx.const(0, out_dtype)
        if math.prod(k_extents) == 1:  # one product, its sign kept (XLA's size-1 contraction)
            return ctx.convert(body(*[ctx.iconst(0)] * len(k_extents)), out_dtype)
        return ctx.convert(ctx.reduce("add", k_extents, body), out_dtype)

    return kernel.from_fn(out_shape, out_dtype, element, "dot_general")


kernel.register_lowering(dot_general_p, _dot_general_lowering)
