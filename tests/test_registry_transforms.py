"""Registry-driven transform tests: every primitive in ``fungrad.core.primitives`` is applied to
a small random example and pushed through its jvp, transpose and batching rules.

``SAMPLES`` maps each primitive's name to ``rng -> (fn, args)``: ``fn(*args)`` binds that
primitive (through its public lax wrapper, or through fg.custom_jvp/custom_vjp/checkpoint and
lax.cond/while_loop/scan for the higher-order ones) on float64 inputs kept away from kinks,
poles and ties, with integer/bool operands where the primitive needs them. ``fn`` never depends
on ``rng`` (only ``args`` do), so examples drawn with different seeds batch together.

Oracles, all independent of the rules under test:

* derivatives: ``check_grads`` (central differences and the jvp/vjp dot-product identity,
  float64) for every floating-output primitive with a jvp rule; integer-valued outputs must
  get a zero tangent, both through ``fg.jvp`` and from the jvp rule called directly on the
  primitive's equation with nonzero float tangents (``fg.jvp`` skips the rule when every input
  is an integer); primitives in ``no_jvp`` must raise NotDifferentiableError naming them;
* vmap: a Python loop of eager calls over 3 examples (exact for integer/bool outputs), with all
  operands batched along axis 0, along the last axis, and with the first operand unbatched.

Adding a primitive without adding a sample here fails ``test_every_primitive_has_a_sample``.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import core, lax, tree_util
from fungrad.ad_checkpoint import checkpoint_name
from fungrad.array import Array
from fungrad.lax import windowed_reductions as windowed
from fungrad.lax.indexing import GatherDimensionNumbers as GDN
from fungrad.lax.indexing import ScatterDimensionNumbers as SDN
from fungrad.lax.linalg_eig import geev_p
from fungrad.testing import check_grads
from fungrad.transforms.jvp import NotDifferentiableError, Zero, jvp_rules, no_jvp, zeros_like_aval

S = (2, 3)  # the shape of most operands

# Internal primitives that user code cannot bind on its own, so they have no sample.
EXEMPT = {
    # Staged by custom_vjp's linearization (the bwd function applied to the residuals); it
    # exists only inside linear jaxprs on the way to transposition and has no jvp/batch rule.
    "custom_lin",
    # checkify's check: no outputs, an effect (raises on a failed check); its jvp, batching
    # and discharge are tested in test_checkify.py.
    "check",
    # Callbacks into Python (effects, no derivative): tested in test_debug_callbacks.py.
    "debug_callback",
    "pure_callback",
    "io_callback",
    # Collectives: bound only under vmap(axis_name=...), where they become the batching rule
    # (there is no eager value outside it); tested in test_lax_collectives.py.
    "psum",
    "pmax",
    "pmin",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "ppermute",
    "axis_index",
}

# Floating-output primitives whose jvp rule is zero by definition, so finite differences of
# the primal are not their derivative: the tangent is checked to be zero instead.
ZERO_DERIVATIVE = {"stop_gradient"}

# Primitives differentiable in one mode only (as in JAX); the other mode must raise a TypeError
# matching the pattern given here.
ONE_MODE = {
    # a dynamic trip count cannot be transposed (no record of the iterations)
    "while": ("fwd", "rev", "while_loop"),
    # a custom_vjp function defines only its reverse-mode rule
    "custom_vjp_call": ("rev", "fwd", "custom_vjp"),
}


# -- input generators ----------------------------------------------------------------------------


def _unif(rng, lo, hi, shape=S):
    return rng.uniform(lo, hi, shape)


def _away0(rng, lo, hi, shape=S):
    """|x| in [lo, hi] with a random sign (away from a kink or pole at 0)."""
    return rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)


def _off_int(rng, shape=S):
    """At least 0.2 away from every integer (floor/ceil jump there)."""
    return rng.integers(-3, 3, shape) + rng.uniform(0.2, 0.8, shape)


def _near_int(rng, shape=S):
    """At least 0.2 away from every half-integer (round jumps there)."""
    return rng.integers(-3, 3, shape) + rng.uniform(-0.3, 0.3, shape)


def _ints(rng, lo, hi, shape=S, dtype=np.int32):
    return rng.integers(lo, hi, shape).astype(dtype)


def _bools(rng, shape=S):
    return rng.random(shape) < 0.5


def _distinct_from(rng, x):
    """An operand at least 0.2 away from ``x`` elementwise (max/min ties, clamp kinks)."""
    return x + rng.uniform(0.2, 1.0, x.shape) * rng.choice([-1.0, 1.0], x.shape)


def _some_equal(rng, x):
    """An operand equal to ``x`` in about half of the positions (comparisons see ties)."""
    return np.where(rng.random(x.shape) < 0.5, x, rng.uniform(-2, 2, x.shape))


def _unary(f, gen):
    return lambda rng: (f, (gen(rng),))


def _binary(f, gen_x, gen_y):
    return lambda rng: (f, (gen_x(rng), gen_y(rng)))


# -- samples of the higher-order primitives ------------------------------------------------------


def _linear_solve_fn(a, b):
    # x = (3 I + a a^T)^-1 b through custom_linear_solve (solve: linalg.solve, symmetric;
    # derivatives come from the implicit rules)
    m = 3.0 * fnp.eye(3, dtype=a.dtype) + fnp.outer(a, a)
    return lax.custom_linear_solve(
        lambda x: m @ x, b, lambda mv, c: fnp.linalg.solve(m, c), symmetric=True
    )


@fg.custom_jvp
def _sin_times(x, y):
    return lax.mul(lax.sin(x), y)


@_sin_times.defjvp
def _sin_times_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    return _sin_times(x, y), lax.add(lax.mul(lax.mul(lax.cos(x), y), tx), lax.mul(lax.sin(x), ty))


@fg.custom_vjp
def _exp_times(x, y):
    return lax.mul(lax.exp(x), y)


def _exp_times_fwd(x, y):
    e = lax.exp(x)
    return lax.mul(e, y), (e, y)


def _exp_times_bwd(res, ct):
    e, y = res
    return lax.mul(lax.mul(e, y), ct), lax.mul(e, ct)


_exp_times.defvjp(_exp_times_fwd, _exp_times_bwd)


def _cond_fn(pred, x, y):
    return lax.cond(pred, lambda a, b: lax.mul(lax.sin(a), b), lambda a, b: lax.sub(a, b), x, y)


def _while_fn(n, x):
    # n (a per-example trip count) makes the loop predicate batched under vmap.
    def body(carry):
        i, v = carry
        return lax.add(i, 1), lax.mul(lax.sin(v), 1.5)

    return lax.while_loop(lambda c: lax.lt(c[0], n), body, (np.int32(0), x))[1]


def _scan_fn(c, xs):
    def body(carry, x):
        return lax.add(lax.mul(carry, x), lax.sin(carry)), lax.mul(carry, lax.cos(x))

    return lax.scan(body, c, xs)


def _reduce_window(computation, init):
    return lambda x: lax.reduce_window(x, init, computation, (1, 2), (1, 1), "VALID")


_POOL = dict(  # windows over S with padding: as many windows as S has elements
    window_dimensions=(2, 2),
    window_strides=(1, 1),
    padding=((1, 0), (0, 1)),
    base_dilation=(1, 1),
    window_dilation=(1, 1),
)


def _select_and(prim, select_prim):
    return lambda v, x: prim.bind(v, x, select_prim=select_prim, **_POOL)


def _apart(rng, shape=S):
    """Values at least 0.4 apart, shuffled (no ties: the selection is locally constant)."""
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.5 + rng.uniform(0, 0.1, n)).reshape(shape)


_ROWS = GDN(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
_ROW_UPDATES = SDN(
    update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,)
)


def _unique_rows(rng):
    return rng.permutation(4)[:2].astype(np.int32).reshape(2, 1)


def _scatter(f):
    def fn(x, idx, u):
        return f(x, idx, u, _ROW_UPDATES, unique_indices=True)

    return lambda rng: (
        fn,
        (_unif(rng, 0.5, 2, (4, 3)), _unique_rows(rng), _unif(rng, 0.5, 2, (2, 3))),
    )


def _dot_general(x, y):
    return lax.dot_general(x, y, (((1,), (0,)), ((), ())))


def _conv(lhs, rhs):
    return lax.conv_general_dilated(lhs, rhs, window_strides=(1,), padding=((1, 0),))


def _clamp_sample(rng):
    lo, hi = _unif(rng, -1.5, -0.5), _unif(rng, 0.5, 1.5)
    # x inside, below and above [lo, hi], never within 0.2 of an end
    x = np.where(rng.random(S) < 0.5, rng.uniform(-0.3, 0.3, S), _away0(rng, 1.7, 2.5))
    return lax.clamp, (lo, x, hi)


def _complex_parts(x, y):
    z = lax.mul(lax.complex(x, y), lax.complex(y, x))  # a product mixes the parts
    return lax.real(z), lax.imag(z)


def _conj_parts(x, y):
    z = lax.mul(lax.conj(lax.complex(x, y)), lax.conj(y))  # conj of complex and of real
    return lax.real(z), lax.imag(z)


def _fft_parts(x, y):
    # every FFT type on S = (2, 3): FFT over the last axis, IRFFT of length (2, 4), RFFT
    z = lax.complex(x, y)
    w = lax.fft(z, "FFT", (3,))
    r = lax.fft(lax.add(x, y), "RFFT", (2, 3))
    return lax.real(w), lax.imag(w), lax.fft(z, "IRFFT", (2, 4)), lax.real(r), lax.imag(r)


def _fft_c2c(x):
    from fungrad.lax.fft import fft_c2c_p

    return fft_c2c_p.bind(x, inverse=False)


def _spd(rng):
    m = _unif(rng, -1, 1, (3, 3))
    return m @ m.T + 3 * np.eye(3)


def _eigh_fn(x):
    # eigenvectors are defined up to sign: their squares are not; distinct eigenvalues
    v, w = lax.linalg.eigh(x)
    return lax.mul(v, v), w


def _svd_fn(x):
    # singular vectors up to sign: their squares are not (a tall matrix, reduced factors)
    u, s, vt = lax.linalg.svd(x, full_matrices=False)
    return lax.mul(u, u), s, lax.mul(vt, vt)


def _eig_fn(x):
    # the eigenvalues (the only derivative eig has, as in JAX) as real and imaginary parts
    (w,) = lax.linalg.eig(x, compute_left_eigenvectors=False, compute_right_eigenvectors=False)
    return lax.real(w), lax.imag(w)


def _rotation_block(rng):
    """A 3x3 matrix with a well-separated complex pair and a real eigenvalue."""
    base = np.array([[1.0, 2.0, 0.0], [-2.0, 1.0, 0.0], [0.0, 0.0, 3.0]])
    return base + 0.2 * _unif(rng, -1, 1, (3, 3))


def _spread(rng):
    """A symmetric 3x3 matrix with well-separated eigenvalues (1, 3, 5 rotated)."""
    q, _ = np.linalg.qr(_unif(rng, -1, 1, (3, 3)))
    return (q * np.array([1.0, 3.0, 5.0])) @ q.T + 0.1 * _unif(rng, -1, 1, (3, 3))


# -- the table ------------------------------------------------------------------------------------

SAMPLES = {
    # elementwise, unary
    "abs": _unary(lax.abs, lambda r: _away0(r, 0.2, 2)),
    "acos": _unary(lax.acos, lambda r: _unif(r, -0.9, 0.9)),
    "acosh": _unary(lax.acosh, lambda r: _unif(r, 1.2, 3)),
    "asin": _unary(lax.asin, lambda r: _unif(r, -0.9, 0.9)),
    "asinh": _unary(lax.asinh, lambda r: _unif(r, -3, 3)),
    "atan": _unary(lax.atan, lambda r: _unif(r, -3, 3)),
    "atanh": _unary(lax.atanh, lambda r: _unif(r, -0.9, 0.9)),
    "cbrt": _unary(lax.cbrt, lambda r: _away0(r, 0.2, 3)),
    "ceil": _unary(lax.ceil, _off_int),
    "clz": _unary(lax.clz, lambda r: _ints(r, -(2**31), 2**31 - 1)),
    "cos": _unary(lax.cos, lambda r: _unif(r, -3, 3)),
    "cosh": _unary(lax.cosh, lambda r: _unif(r, -2, 2)),
    "digamma": _unary(lax.digamma, lambda r: _unif(r, 0.3, 4)),
    "erf": _unary(lax.erf, lambda r: _unif(r, -2, 2)),
    "erf_inv": _unary(lax.erf_inv, lambda r: _unif(r, -0.9, 0.9)),
    "erfc": _unary(lax.erfc, lambda r: _unif(r, -2, 2)),
    "exp": _unary(lax.exp, lambda r: _unif(r, -2, 2)),
    "exp2": _unary(lax.exp2, lambda r: _unif(r, -2, 2)),
    "expm1": _unary(lax.expm1, lambda r: _unif(r, -2, 2)),
    "floor": _unary(lax.floor, _off_int),
    "integer_pow": _unary(lambda x: lax.integer_pow(x, 3), lambda r: _unif(r, -2, 2)),
    "is_finite": _unary(
        lax.is_finite, lambda r: np.where(r.random(S) < 0.3, np.inf, _unif(r, -2, 2))
    ),
    "lgamma": _unary(lax.lgamma, lambda r: _unif(r, 0.3, 4)),
    "log": _unary(lax.log, lambda r: _unif(r, 0.2, 3)),
    "log1p": _unary(lax.log1p, lambda r: _unif(r, -0.7, 3)),
    "logistic": _unary(lax.logistic, lambda r: _unif(r, -3, 3)),
    "neg": _unary(lax.neg, lambda r: _unif(r, -2, 2)),
    "not": _unary(lax.bitwise_not, lambda r: _ints(r, -100, 100)),
    "population_count": _unary(lax.population_count, lambda r: _ints(r, -(2**31), 2**31 - 1)),
    "round": _unary(lax.round, _near_int),
    "rsqrt": _unary(lax.rsqrt, lambda r: _unif(r, 0.2, 3)),
    "sign": _unary(lax.sign, lambda r: _away0(r, 0.2, 2)),
    "sin": _unary(lax.sin, lambda r: _unif(r, -3, 3)),
    "sinh": _unary(lax.sinh, lambda r: _unif(r, -2, 2)),
    "sqrt": _unary(lax.sqrt, lambda r: _unif(r, 0.2, 3)),
    "square": _unary(lax.square, lambda r: _unif(r, -2, 2)),
    "stop_gradient": _unary(lax.stop_gradient, lambda r: _unif(r, -2, 2)),
    "name": _unary(lambda x: checkpoint_name(x, "h"), lambda r: _unif(r, -2, 2)),
    "sharding_constraint": _unary(
        lambda x: lax.with_sharding_constraint(
            x, fg.NamedSharding(fg.make_mesh((1,), ("x",)), fg.P("x"))
        ),
        lambda r: _unif(r, -2, 2),
    ),
    "optimization_barrier": _binary(
        lambda x, y: lax.mul(*lax.optimization_barrier((x, y))),
        lambda r: _unif(r, -2, 2),
        lambda r: _unif(r, -2, 2),
    ),
    "reduce_precision": _unary(
        lambda x: lax.reduce_precision(x, 11, 44), lambda r: _unif(r, -2, 2)
    ),
    "tan": _unary(lax.tan, lambda r: _unif(r, -1.2, 1.2)),
    "tanh": _unary(lax.tanh, lambda r: _unif(r, -2, 2)),
    "convert_element_type": _unary(
        lambda x: lax.convert_element_type(x, np.float32), lambda r: _unif(r, -2, 2)
    ),
    "bitcast_convert_type": _unary(
        lambda x: lax.bitcast_convert_type(x, np.int64), lambda r: _unif(r, -2, 2)
    ),
    # elementwise, binary and more
    "add": _binary(lax.add, lambda r: _unif(r, -2, 2), lambda r: _unif(r, -2, 2)),
    "sub": _binary(lax.sub, lambda r: _unif(r, -2, 2), lambda r: _unif(r, -2, 2)),
    "mul": _binary(lax.mul, lambda r: _unif(r, -2, 2), lambda r: _unif(r, -2, 2)),
    "div": _binary(lax.div, lambda r: _unif(r, -2, 2), lambda r: _away0(r, 0.5, 2)),
    # |x / y| in (k + 0.2, k + 0.8): away from rem's jumps at integer quotients
    "rem": lambda r: (
        lax.rem,
        (lambda y: (y * _away0(r, 0.2, 0.8) + y * r.integers(0, 3, S), y))(_away0(r, 1, 2)),
    ),
    "pow": _binary(lax.pow, lambda r: _unif(r, 0.3, 2), lambda r: _unif(r, -2, 2)),
    "atan2": _binary(lax.atan2, lambda r: _away0(r, 0.3, 2), lambda r: _away0(r, 0.3, 2)),
    "max": lambda r: (lax.max, (lambda x: (x, _distinct_from(r, x)))(_unif(r, -2, 2))),
    "min": lambda r: (lax.min, (lambda x: (x, _distinct_from(r, x)))(_unif(r, -2, 2))),
    "nextafter": _binary(lax.nextafter, lambda r: _unif(r, -2, 2), lambda r: _unif(r, -2, 2)),
    "eq": lambda r: (lax.eq, (lambda x: (x, _some_equal(r, x)))(_unif(r, -2, 2))),
    "ne": lambda r: (lax.ne, (lambda x: (x, _some_equal(r, x)))(_unif(r, -2, 2))),
    "lt": lambda r: (lax.lt, (lambda x: (x, _some_equal(r, x)))(_unif(r, -2, 2))),
    "le": lambda r: (lax.le, (lambda x: (x, _some_equal(r, x)))(_unif(r, -2, 2))),
    "gt": lambda r: (lax.gt, (lambda x: (x, _some_equal(r, x)))(_unif(r, -2, 2))),
    "ge": lambda r: (lax.ge, (lambda x: (x, _some_equal(r, x)))(_unif(r, -2, 2))),
    "and": _binary(lax.bitwise_and, lambda r: _ints(r, -100, 100), lambda r: _ints(r, -100, 100)),
    "or": _binary(lax.bitwise_or, _bools, _bools),
    "xor": _binary(lax.bitwise_xor, lambda r: _ints(r, -100, 100), lambda r: _ints(r, -100, 100)),
    "shift_left": _binary(lax.shift_left, lambda r: _ints(r, -100, 100), lambda r: _ints(r, 0, 12)),
    "shift_right_arithmetic": _binary(
        lax.shift_right_arithmetic, lambda r: _ints(r, -(10**6), 10**6), lambda r: _ints(r, 0, 12)
    ),
    "shift_right_logical": _binary(
        lax.shift_right_logical, lambda r: _ints(r, -(10**6), 10**6), lambda r: _ints(r, 0, 12)
    ),
    "select_n": lambda r: (
        lax.select_n,
        (_ints(r, 0, 3), _unif(r, -2, 2), _unif(r, -2, 2), _unif(r, -2, 2)),
    ),
    "clamp": _clamp_sample,
    # reductions
    "reduce_sum": _unary(lambda x: lax.reduce_sum(x, (1,)), lambda r: _unif(r, -2, 2)),
    "reduce_max": _unary(lambda x: lax.reduce_max(x, (1,)), lambda r: _unif(r, -2, 2)),
    "reduce_min": _unary(lambda x: lax.reduce_min(x, (0,)), lambda r: _unif(r, -2, 2)),
    "reduce_prod": _unary(lambda x: lax.reduce_prod(x, (1,)), lambda r: _away0(r, 0.5, 2)),
    "reduce_and": _unary(lambda x: lax.reduce_and(x, (1,)), _bools),
    "reduce_or": _unary(lambda x: lax.reduce_or(x, (0,)), _bools),
    "reduce_xor": _unary(lambda x: lax.reduce_xor(x, (1,)), lambda r: _ints(r, -100, 100)),
    "argmax": _unary(lambda x: lax.argmax(x, 1, np.int32), lambda r: _unif(r, -2, 2)),
    "argmin": _unary(lambda x: lax.argmin(x, 0, np.int32), lambda r: _unif(r, -2, 2)),
    "cumsum": _unary(lambda x: lax.cumsum(x, 1), lambda r: _unif(r, -2, 2)),
    "cumprod": _unary(lambda x: lax.cumprod(x, 1, reverse=True), lambda r: _away0(r, 0.5, 2)),
    "cummax": _unary(lambda x: lax.cummax(x, 1), lambda r: _unif(r, -2, 2)),
    "cummin": _unary(lambda x: lax.cummin(x, 0, reverse=True), lambda r: _unif(r, -2, 2)),
    "cumlogsumexp": _unary(lambda x: lax.cumlogsumexp(x, 1), lambda r: _unif(r, -2, 2)),
    "reduce_window_sum": _unary(_reduce_window(lax.add, 0.0), lambda r: _unif(r, -2, 2)),
    "reduce_window_max": _unary(_reduce_window(lax.max, -np.inf), lambda r: _unif(r, -2, 2)),
    "reduce_window_min": _unary(_reduce_window(lax.min, np.inf), lambda r: _unif(r, -2, 2)),
    "select_and_gather_add": _binary(
        _select_and(windowed.select_and_gather_add_p, lax.ge_p),
        lambda r: _unif(r, -2, 2),
        _apart,
    ),
    "select_and_scatter_add": _binary(
        _select_and(windowed.select_and_scatter_add_p, lax.le_p),
        lambda r: _unif(r, -2, 2),
        _apart,
    ),
    # shapes
    "broadcast_in_dim": _unary(
        lambda x: lax.broadcast_in_dim(x, (2, 4, 3), (0, 2)), lambda r: _unif(r, -2, 2)
    ),
    "reshape": _unary(lambda x: lax.reshape(x, (3, 2)), lambda r: _unif(r, -2, 2)),
    "transpose": _unary(lambda x: lax.transpose(x, (1, 0)), lambda r: _unif(r, -2, 2)),
    "squeeze": _unary(lambda x: lax.squeeze(x, (1,)), lambda r: _unif(r, -2, 2, (2, 1, 3))),
    "concatenate": _binary(
        lambda x, y: lax.concatenate([x, y], 1),
        lambda r: _unif(r, -2, 2),
        lambda r: _unif(r, -2, 2, (2, 2)),
    ),
    "pad": _binary(
        lambda x, v: lax.pad(x, v, ((1, 0, 0), (-1, 2, 1))),
        lambda r: _unif(r, -2, 2),
        lambda r: _unif(r, -2, 2, ()),
    ),
    "slice": _unary(lambda x: lax.slice(x, (0, 1), (2, 3), (1, 1)), lambda r: _unif(r, -2, 2)),
    "dynamic_slice": lambda r: (
        lambda x, i, j: lax.dynamic_slice(x, (i, j), (1, 2)),
        (_unif(r, -2, 2), _ints(r, 0, 2, ()), _ints(r, 0, 2, ())),
    ),
    "dynamic_update_slice": lambda r: (
        lambda x, u, i: lax.dynamic_update_slice(x, u, (np.int32(0), i)),
        (_unif(r, -2, 2), _unif(r, -2, 2, (2, 2)), _ints(r, 0, 2, ())),
    ),
    "rev": _unary(lambda x: lax.rev(x, (1,)), lambda r: _unif(r, -2, 2)),
    "iota": _unary(lambda x: lax.add(x, lax.iota(np.int32, 3)), lambda r: _ints(r, -5, 5, (3,))),
    # contractions
    "dot_general": _binary(
        _dot_general, lambda r: _unif(r, -2, 2), lambda r: _unif(r, -2, 2, (3, 4))
    ),
    "conv_general_dilated": _binary(
        _conv, lambda r: _unif(r, -2, 2, (1, 2, 5)), lambda r: _unif(r, -2, 2, (3, 2, 2))
    ),
    # gather / scatter (unique in-bounds indices: every scatter is differentiable)
    "gather": lambda r: (
        lambda x, idx: lax.gather(x, idx, _ROWS, (1, 3)),
        (_unif(r, -2, 2, (4, 3)), _ints(r, 0, 4, (2, 1))),
    ),
    "scatter": _scatter(lax.scatter),
    "scatter-add": _scatter(lax.scatter_add),
    "scatter-mul": _scatter(lax.scatter_mul),
    "scatter-min": _scatter(lax.scatter_min),
    "scatter-max": _scatter(lax.scatter_max),
    # sorting (random floats: no ties)
    "sort": _binary(
        lambda k, v: lax.sort((k, v), dimension=1, num_keys=1),
        lambda r: _unif(r, -2, 2),
        lambda r: _unif(r, -2, 2),
    ),
    "top_k": _unary(lambda x: lax.top_k(x, 2), lambda r: _unif(r, -2, 2)),
    # random bits
    "threefry2x32": lambda r: (
        lax.threefry2x32,
        tuple(_ints(r, 0, 2**32, shape, np.uint32) for shape in ((), (), S, S)),
    ),
    # control flow and custom rules
    "cond": lambda r: (_cond_fn, (np.bool_(r.random() < 0.5), _unif(r, -2, 2), _unif(r, -2, 2))),
    "while": lambda r: (_while_fn, (_ints(r, 1, 4, ()), _unif(r, -2, 2))),
    "scan": _binary(_scan_fn, lambda r: _unif(r, -1, 1, (3,)), lambda r: _unif(r, -1, 1, (4, 3))),
    "custom_jvp_call": _binary(_sin_times, lambda r: _unif(r, -2, 2), lambda r: _unif(r, -2, 2)),
    "custom_vjp_call": _binary(_exp_times, lambda r: _unif(r, -2, 2), lambda r: _unif(r, -2, 2)),
    "checkpoint": _binary(
        fg.checkpoint(lambda x, y: lax.mul(lax.sin(x), y)),
        lambda r: _unif(r, -2, 2),
        lambda r: _unif(r, -2, 2),
    ),
    "linear_solve": _binary(
        _linear_solve_fn, lambda r: _unif(r, -1, 1, (3,)), lambda r: _unif(r, -1, 1, (3,))
    ),
    # complex numbers, on real inputs and outputs (so the harness's float oracles apply):
    # each sample builds a complex value, applies the primitive and takes parts back
    "complex": _binary(_complex_parts, lambda r: _unif(r, -2, 2), lambda r: _unif(r, -2, 2)),
    "real": _binary(_complex_parts, lambda r: _unif(r, -2, 2), lambda r: _unif(r, -2, 2)),
    "imag": _binary(_complex_parts, lambda r: _unif(r, -2, 2), lambda r: _unif(r, -2, 2)),
    "conj": _binary(_conj_parts, lambda r: _unif(r, -2, 2), lambda r: _unif(r, -2, 2)),
    # the FFT (complex through lax.complex) and the interleaved 1-D transform it compiles to
    "fft": _binary(_fft_parts, lambda r: _unif(r, -2, 2), lambda r: _unif(r, -2, 2)),
    "fft_c2c": _unary(_fft_c2c, lambda r: _unif(r, -2, 2, (3, 2))),
    # dense linear algebra: a well-conditioned SPD matrix, a well-conditioned lower triangle
    "cholesky": _unary(lambda x: lax.linalg.cholesky(x), _spd),
    # decompositions: QR's signs are LAPACK's (smooth away from zero columns); the full Q of a
    # tall matrix exercises the completion's derivative
    "qr": _unary(lambda x: lax.linalg.qr(x), lambda r: _unif(r, -1, 1, (4, 3))),
    "geqrf": _unary(lambda x: lax.linalg.geqrf(x), lambda r: _unif(r, -1, 1, (4, 3))),
    "eigh": _unary(_eigh_fn, _spread),
    "eig": _unary(_eig_fn, _rotation_block),
    "geev": _unary(
        lambda x: geev_p.bind(x, compute_left=True, compute_right=True), _rotation_block
    ),
    # Schur and Hessenberg (LAPACK gees / gehrd; no derivative, as in JAX)
    "schur": _unary(lambda x: lax.linalg.schur(x), lambda r: _unif(r, -1, 1, (3, 3))),
    "hessenberg": _unary(lambda x: lax.linalg.hessenberg(x), lambda r: _unif(r, -1, 1, (4, 4))),
    "svd": _unary(_svd_fn, lambda r: _spread(r)[:, :2] + _unif(r, -0.5, 0.5, (3, 2))),
    # LU of a wide matrix (distinct pivot candidates: the pivots do not change nearby)
    "lu": _unary(lambda x: lax.linalg.lu(x), lambda r: _unif(r, -1, 1, (3, 4))),
    "triangular_solve": _binary(
        lambda a, b: lax.linalg.triangular_solve(a, b, left_side=True, lower=True),
        lambda r: np.tril(_unif(r, -0.5, 0.5, (3, 3))) + 2 * np.eye(3),
        lambda r: _unif(r, -1, 1, (3, 2)),
    ),
    "jit": _binary(
        fg.jit(lambda x, y: lax.mul(lax.sin(x), y)),
        lambda r: _unif(r, -2, 2),
        lambda r: _unif(r, -2, 2),
    ),
}

NAMES = sorted(SAMPLES)


# -- helpers --------------------------------------------------------------------------------------


def _seed(name: str) -> int:
    return zlib.crc32(name.encode())


def _sample(name: str, k: int = 0):
    return SAMPLES[name](np.random.default_rng(_seed(name) + k))


def _is_float(x) -> bool:
    return np.asarray(x).dtype.kind == "f"


def _float_output(fn, args) -> bool:
    return any(_is_float(o) for o in tree_util.tree_leaves(fn(*args)))


def _tangents(args, rng):
    """Random float tangents for float operands, zeros for the others."""
    return tuple(
        rng.standard_normal(np.shape(a)) if _is_float(a) else np.zeros_like(a) for a in args
    )


def _assert_zero_tangent(t, what):
    if type(t) is Zero:
        return
    np.testing.assert_array_equal(np.asarray(t), 0, err_msg=what)


def _rule_tangents(fn, args, prim, rng):
    """Evaluate ``fn``'s jaxpr, calling ``jvp_rules[prim]`` on ``prim``'s equations with random
    tangents for float inputs (instantiated zeros for the others); the tangents it returns."""
    closed = fg.make_jaxpr(fn)(*args)
    jaxpr, env, found = closed.jaxpr, {}, []

    def read(v):
        return Array(v.val, v.aval.weak_type) if type(v) is core.Literal else env[v]

    env.update(zip(jaxpr.constvars, closed.consts))
    env.update(zip(jaxpr.invars, [fnp.asarray(a) for a in args]))
    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        out = eqn.primitive.bind(*invals, **eqn.params)
        if eqn.primitive is prim:
            ts = [
                fnp.asarray(rng.standard_normal(x.shape).astype(x.dtype))
                if _is_float(x)
                else zeros_like_aval(core.get_aval(x))
                for x in invals
            ]
            primal, tangent = jvp_rules[prim](invals, ts, **eqn.params)
            for p, o in zip(tree_util.tree_leaves(primal), tree_util.tree_leaves(out)):
                np.testing.assert_array_equal(np.asarray(p), np.asarray(o))
            found.extend(tangent if prim.multiple_results else [tangent])
        env.update(zip(eqn.outvars, out if eqn.primitive.multiple_results else [out]))
    assert found, f"{prim}: not bound at the top level of its sample's jaxpr"
    return found


def _assert_same(got, want, what):
    got_l, want_l = tree_util.tree_leaves(got), tree_util.tree_leaves(want)
    assert len(got_l) == len(want_l), f"{what}: {len(got_l)} outputs vs {len(want_l)}"
    for i, (g, w) in enumerate(zip(got_l, want_l)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (
            f"{what} (output {i}): {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
        )
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12, err_msg=f"{what} ({i})")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{what} (output {i})")


# -- the registry ---------------------------------------------------------------------------------


def test_every_primitive_has_a_sample():
    names = set(core.primitives)
    assert EXEMPT <= names, f"EXEMPT names no primitive: {sorted(EXEMPT - names)}"
    missing = names - EXEMPT - set(SAMPLES)
    assert not missing, f"primitives without a sample in SAMPLES: {sorted(missing)}"
    unknown = set(SAMPLES) - names
    assert not unknown, f"SAMPLES names no primitive: {sorted(unknown)}"
    assert not EXEMPT & set(SAMPLES)


@pytest.mark.parametrize("name", NAMES)
def test_sample_binds_its_primitive(name, x64):
    fn, args = _sample(name)
    eqns = fg.make_jaxpr(fn)(*args).jaxpr.eqns
    assert name in {e.primitive.name for e in eqns}, f"{name}: sample binds {eqns}"
    # the examples of the vmap tests are stackable: same shapes and dtypes for every seed
    _, other = _sample(name, 1)
    assert [(np.shape(a), np.asarray(a).dtype) for a in args] == [
        (np.shape(a), np.asarray(a).dtype) for a in other
    ]


# -- derivatives ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_jvp(name, x64):
    prim = core.primitives[name]
    fn, args = _sample(name)
    rng = np.random.default_rng(_seed(name) + 7)
    if prim in no_jvp:
        assert _float_output(fn, args)
        with pytest.raises(NotDifferentiableError, match=name):
            fg.jvp(fn, args, _tangents(args, rng))
        return
    assert prim in jvp_rules, f"{name}: no jvp rule and no no_jvp entry"
    if _float_output(fn, args) and name not in ZERO_DERIVATIVE:
        if name in ONE_MODE:
            mode, other, message = ONE_MODE[name]
            check_grads(fn, args, order=1, modes=(mode,))
            with pytest.raises(TypeError, match=message):
                check_grads(fn, args, order=1, modes=(other,))
        else:
            check_grads(fn, args, order=1, modes=("fwd", "rev"))
        return
    # integer-valued output (or zero derivative by definition): every output tangent is zero
    _, t_out = fg.jvp(fn, args, _tangents(args, rng))
    for t in tree_util.tree_leaves(t_out):
        _assert_zero_tangent(t, f"{name}: jvp tangent")
    for t in _rule_tangents(fn, args, prim, rng):
        _assert_zero_tangent(t, f"{name}: tangent from its jvp rule")


# -- vmap -----------------------------------------------------------------------------------------


def _examples(name):
    fn, first = _sample(name)
    return fn, [first] + [_sample(name, k)[1] for k in (1, 2)]


@pytest.mark.parametrize("name", NAMES)
def test_vmap_matches_loop(name, x64):
    fn, examples = _examples(name)
    stacked = [np.stack(col) for col in zip(*examples)]
    out = fg.vmap(fn)(*stacked)
    for k, ex in enumerate(examples):
        _assert_same(
            tree_util.tree_map(lambda o, k=k: o[k], out), fn(*ex), f"{name}: vmap example {k}"
        )


@pytest.mark.parametrize("name", [n for n in NAMES if len(_sample(n)[1]) >= 2])
def test_vmap_first_operand_unbatched(name, x64):
    fn, examples = _examples(name)
    first = examples[0][0]
    stacked = [np.stack(col) for col in list(zip(*examples))[1:]]
    n = len(examples[0])
    out = fg.vmap(fn, in_axes=(None,) + (0,) * (n - 1))(first, *stacked)
    for k, ex in enumerate(examples):
        _assert_same(
            tree_util.tree_map(lambda o, k=k: o[k], out),
            fn(first, *ex[1:]),
            f"{name}: vmap (first operand unbatched) example {k}",
        )


@pytest.mark.parametrize("name", NAMES)
def test_vmap_over_last_axis(name, x64):
    # The batch dimension last (in_axes=-1): rules must shift the dimensions their params name.
    fn, examples = _examples(name)
    stacked = [np.stack(col, -1) for col in zip(*examples)]
    out = fg.vmap(fn, in_axes=-1)(*stacked)
    for k, ex in enumerate(examples):
        _assert_same(
            tree_util.tree_map(lambda o, k=k: o[k], out),
            fn(*ex),
            f"{name}: vmap over the last axis, example {k}",
        )
