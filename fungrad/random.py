"""``fungrad.random``: JAX's counter-based random numbers, bit for bit.

Keys are *raw* keys, JAX's legacy representation: uint32 arrays of shape ``(2,)``.
``PRNGKey(seed)`` makes one; ``split`` and ``fold_in`` derive new independent keys; samplers
(``uniform``, ``normal``, ``randint``, ...) are pure functions of a key, so the same key always
gives the same numbers and a key should be used once and then split.

NB: JAX's ``jax.random.key(seed)`` returns a *typed* scalar key (dtype ``key<fry>``). fungrad has
no key dtypes: here ``key(seed)`` returns the same uint32[2] array as ``PRNGKey(seed)``,
``key_data(key)`` returns its argument and ``wrap_key_data(data)`` checks and returns ``data``.

Everything follows JAX's default Threefry-2x32 implementation with
``jax_threefry_partitionable=True`` (JAX's default since 0.5): the random bits of element ``i``
(in row-major order) of a sample are ``y1 ^ y2`` where ``(y1, y2) = threefry2x32(key, (0, i))``,
and ``split(key, n)[i]`` is ``(y1, y2)`` itself. The samplers are written on ``fungrad.lax`` and
``fungrad.numpy`` only, so they can be traced.

The other distributions (gamma and its family, poisson, binomial, multinomial, ...) follow
JAX's documented algorithms and key splits, so they too give JAX's numbers, up to a few ulps
where ``log``/``pow``/``erf_inv`` round differently (see each docstring). ``gamma`` lives in
:mod:`fungrad.random_gamma` with its implicit-reparameterisation derivative.
NB: ``multivariate_normal``'s ``"svd"``/``"eigh"`` draws equal JAX's numbers only where the
decompositions pick LAPACK's signs for the vectors (the distribution is the same).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import numpy as np

from fungrad import core, dtypes, lax
from fungrad.array import Array

__all__ = [
    "PRNGKey",
    "key",
    "key_data",
    "key_impl",
    "wrap_key_data",
    "clone",
    "split",
    "fold_in",
    "bits",
    "uniform",
    "normal",
    "bernoulli",
    "randint",
    "choice",
    "permutation",
    "categorical",
    "truncated_normal",
    "multivariate_normal",
    "gumbel",
    "exponential",
    "laplace",
    "logistic",
    "cauchy",
    "gamma",
    "loggamma",
    "beta",
    "dirichlet",
    "chisquare",
    "f",
    "t",
    "pareto",
    "lognormal",
    "rayleigh",
    "wald",
    "triangular",
    "weibull_min",
    "maxwell",
    "rademacher",
    "double_sided_maxwell",
    "generalized_normal",
    "ball",
    "geometric",
    "poisson",
    "binomial",
    "multinomial",
    "orthogonal",
]

_KEY_HELP = (
    "a PRNG key is a uint32 array of shape (2,), as returned by "
    "fungrad.random.PRNGKey(seed), key(seed), split or fold_in"
)


# -- keys ----------------------------------------------------------------------------------------


def _is_array(x) -> bool:
    return type(x) is Array or isinstance(x, (core.Tracer, np.ndarray))


def _check_key_data(name: str, key, allow_batched: bool = False):
    """``key`` as an Array/tracer after checking it is a uint32 key (batch of keys if allowed)."""
    if not _is_array(key):
        raise TypeError(
            f"{name}: expected a PRNG key, got a value of type {type(key).__name__}; {_KEY_HELP}"
        )
    key = lax.utils.operand(key, name)
    ok = key.dtype == np.uint32 and key.ndim >= 1 and key.shape[-1] == 2
    if ok and (allow_batched or key.ndim == 1):
        return key
    what = core.get_aval(key).str_short()
    if ok:  # a batch of keys where one is expected: a ValueError, as JAX raises
        raise ValueError(
            f"{name}: expected a single PRNG key, got a batch of keys {what}; "
            f"use fungrad.vmap to map over it (e.g. vmap(lambda k: {name}(k, "
            f"...))(keys))"
        )
    raise TypeError(f"{name}: expected a single PRNG key, got an array {what}; {_KEY_HELP}")


def _check_prng_key(name: str, key):
    return _check_key_data(name, key)


def _key_words(key):
    """The two uint32 words of a key, as 0-d arrays."""
    return (lax.index_in_dim(key, 0, keepdims=False), lax.index_in_dim(key, 1, keepdims=False))


def _u32(value: int) -> Array:
    return Array(np.uint32(value))


def _seed_array(name: str, seed):
    if isinstance(seed, bool) or (_is_array(seed) and seed.dtype == np.bool_):
        raise TypeError(f"{name}: the seed must be an integer, got a bool")
    if isinstance(seed, int):
        # As JAX: go through int64, so that in 32-bit mode seeds wrap to their low 32 bits.
        try:
            seed = np.int64(seed)
        except OverflowError:
            raise OverflowError(
                f"{name}: the seed {seed} does not fit in a 64-bit integer; "
                "pass a seed in [-2**63, 2**63)"
            ) from None
    if isinstance(seed, np.integer):
        seed = np.asarray(seed)
    if not _is_array(seed) or dtypes.kind(seed.dtype) not in "iu":
        what = (
            core.get_aval(seed).str_short()
            if _is_array(seed) or isinstance(seed, float)
            else type(seed).__name__
        )
        raise TypeError(f"{name}: the seed must be an integer scalar, got {what}")
    if seed.ndim:
        raise TypeError(
            f"{name}: the seed must be a scalar, got an array of shape {seed.shape} "
            "(use fungrad.vmap to make a batch of keys)"
        )
    if isinstance(seed, np.ndarray):
        with np.errstate(all="ignore"):
            seed = Array(seed.astype(dtypes.canonicalize_dtype(seed.dtype))[()])
    return seed


def PRNGKey(seed) -> Array:  # noqa: N802 (JAX's name)
    """A PRNG key (uint32[2]) from an integer seed, equal to ``jax.random.PRNGKey(seed)``.

    A 64-bit seed ``s`` (with ``enable_x64``) gives ``[s >> 32, s & 0xFFFFFFFF]``; a 32-bit seed
    gives ``[0, s mod 2**32]``. Python ints go through int64 and, in 32-bit mode, wrap to
    their low 32 bits. Example: ``PRNGKey(42)`` is ``[0, 42]``.
    """
    return _make_key("PRNGKey", seed)


def _make_key(name: str, seed) -> Array:
    seed = _seed_array(name, seed)
    if seed.dtype.itemsize == 8:
        hi = lax.convert_element_type(lax.shift_right_logical(seed, 32), np.uint32)
    else:
        hi = _u32(0)
    lo = lax.convert_element_type(seed, np.uint32)
    return lax.concatenate([lax.broadcast(hi, (1,)), lax.broadcast(lo, (1,))], 0)


def key(seed, *, impl=None) -> Array:
    """A PRNG key from an integer seed.

    NB: JAX returns a typed scalar key here; fungrad has no key dtypes and returns the same
    uint32[2] key as :func:`PRNGKey`. Only the default ``impl`` (``"threefry2x32"``) exists.
    """
    _check_impl("key", impl)
    return _make_key("key", seed)


def _check_impl(name: str, impl) -> None:
    if impl not in (None, "threefry2x32"):
        raise ValueError(
            f"{name}: only the 'threefry2x32' PRNG implementation is available, got impl={impl!r}"
        )


def key_data(keys) -> Array:
    """The uint32 data of a key or batch of keys (NB: keys are already their data here)."""
    return _check_key_data("key_data", keys, allow_batched=True)


def wrap_key_data(key_bits_array, *, impl=None) -> Array:
    """Check that ``key_bits_array`` is uint32 key data of shape ``(..., 2)`` and return it
    (NB: fungrad keys are raw uint32 arrays, so there is nothing to wrap)."""
    _check_impl("wrap_key_data", impl)
    return _check_key_data("wrap_key_data", key_bits_array, allow_batched=True)


def key_impl(keys) -> str:
    """The name of the PRNG implementation of a key or batch of keys: ``"threefry2x32"``
    (the only one fungrad has)."""
    _check_key_data("key_impl", keys, allow_batched=True)
    return "threefry2x32"


def clone(key) -> Array:
    """Return ``key`` (JAX's ``clone`` matters only for its stateful key types)."""
    return _check_prng_key("clone", key)


def _static_int(name: str, what: str, d) -> int:
    """``d`` as a Python int; a traced value is a ConcretizationTypeError (a TypeError, as
    JAX's) saying that ``what`` of ``name`` must be static."""
    if isinstance(d, core.Tracer):
        from fungrad.numpy import util

        d = util.concrete_or_error(d, f"{what} of {name} (it must be static)")
    return operator.index(d)


def _canonical_shape(name: str, shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer, core.Tracer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        shape = tuple(_static_int(name, "the shape argument", d) for d in shape)
    except core.ConcretizationTypeError:
        raise
    except TypeError:
        raise TypeError(f"{name}: shape must be a sequence of integers, got {shape!r}") from None
    if any(d < 0 for d in shape):  # a TypeError, as JAX's shape check raises
        raise TypeError(f"{name}: shape must be non-negative, got {shape}")
    return shape


def _dtype(name: str, dtype) -> np.dtype:
    """``dtype`` canonicalized, an unknown one a TypeError naming the sampler."""
    try:
        return dtypes.canonicalize_dtype(dtype)
    except TypeError as e:
        raise TypeError(f"{name}: {e}") from None


def _counters(name: str, shape: tuple[int, ...]):
    """The low word of the 64-bit row-major iota over ``shape`` (JAX's ``iota_2x32_shape``;
    the high word is 0 for any array that fits in memory)."""
    size = math.prod(shape)
    if size > 2**32:
        raise ValueError(f"{name}: cannot draw more than 2**32 values at once, got shape {shape}")
    if not shape:
        return _u32(0)
    return lax.reshape(lax.iota(np.uint32, size), shape)


def _threefry_shape(name: str, key, shape):
    """``threefry2x32(key, (0, i))`` for every row-major position ``i`` of ``shape``."""
    k1, k2 = _key_words(key)
    return lax.threefry2x32(k1, k2, _u32(0), _counters(name, shape))


def _split(key, num) -> Array:
    shape = _canonical_shape("split", tuple(num) if isinstance(num, Sequence) else num)
    y1, y2 = _threefry_shape("split", key, shape)
    nd = len(shape)
    return lax.concatenate([lax.expand_dims(y1, (nd,)), lax.expand_dims(y2, (nd,))], nd)


def split(key, num=2) -> Array:
    """Split a key into ``num`` new keys (an int, or a shape): shape ``(*num, 2)``.

    Example: ``k1, k2 = split(PRNGKey(0))``.
    """
    return _split(_check_prng_key("split", key), num)


def fold_in(key, data) -> Array:
    """A new key derived from ``key`` and the 32-bit integer ``data`` (e.g. a step count)."""
    key = _check_prng_key("fold_in", key)
    if isinstance(data, int) and not isinstance(data, bool):
        if not 0 <= data < 2**32:
            raise OverflowError(f"fold_in: Python integer {data} is out of bounds for uint32")
        data = _u32(data)
    elif not _is_array(data) and not isinstance(data, np.generic):
        raise TypeError(f"fold_in: data must be an integer scalar, got {type(data).__name__}")
    data = lax.utils.operand(data, "fold_in")
    if data.ndim:
        raise TypeError(
            f"fold_in: data must be a scalar, got an array of shape {data.shape} "
            "(use fungrad.vmap to fold in a batch)"
        )
    data = lax.convert_element_type(data, np.uint32)
    k1, k2 = _key_words(key)
    y1, y2 = lax.threefry2x32(k1, k2, _u32(0), data)
    return lax.concatenate([lax.broadcast(y1, (1,)), lax.broadcast(y2, (1,))], 0)


_UINT_DTYPES = {
    8: np.dtype(np.uint8),
    16: np.dtype(np.uint16),
    32: np.dtype(np.uint32),
    64: np.dtype(np.uint64),
}


def _random_bits(key, bit_width: int, shape: tuple[int, ...]):
    """Uniform random bits: uint{bit_width} of ``shape``."""
    y1, y2 = _threefry_shape("bits", key, shape)
    dtype = _UINT_DTYPES[bit_width]
    if bit_width == 64:
        hi = lax.convert_element_type(y1, dtype)
        lo = lax.convert_element_type(y2, dtype)
        return lax.bitwise_or(lax.shift_left(hi, 32), lo)
    out = lax.bitwise_xor(y1, y2)
    return out if bit_width == 32 else lax.convert_element_type(out, dtype)


def bits(key, shape=(), dtype=None) -> Array:
    """Uniform random bits as unsigned integers (uint32 by default; uint64 with x64)."""
    key = _check_prng_key("bits", key)
    dtype = dtypes.default_uint_dtype() if dtype is None else _dtype("bits", dtype)
    if dtypes.kind(dtype) != "u":
        raise ValueError(f"bits: dtype must be an unsigned integer dtype, got {dtype}")
    return _random_bits(key, dtype.itemsize * 8, _canonical_shape("bits", shape))


# -- shared helpers for samplers -----------------------------------------------------------------


def _float_dtype(name: str, dtype) -> np.dtype:
    dt = _dtype(name, float if dtype is None else dtype)
    if dtypes.kind(dt) != "f":
        raise ValueError(f"{name}: dtype must be a float dtype, got {dt}")
    return dt


def _check_shape(name: str, shape, *param_shapes) -> None:
    from fungrad.numpy import util

    if param_shapes:
        out = util.broadcast_shapes(shape, *param_shapes, fun_name=name)
        if out != tuple(shape):
            raise ValueError(
                f"{name}: parameter shapes {', '.join(map(str, param_shapes))} "
                f"must broadcast to the shape argument {tuple(shape)}, but "
                f"broadcasting gives {out}"
            )


def _check_broadcast(name: str, shape, *params) -> None:
    """TypeError naming ``name`` unless ``shape`` and the parameters' shapes broadcast
    together (the sample is their broadcast; JAX's elementwise ops raise TypeError)."""
    from fungrad.numpy import util

    shapes = [tuple(shape)] + [tuple(np.shape(x)) for x in params]
    try:
        util.broadcast_shapes(*shapes, fun_name=name)
    except ValueError as e:
        raise TypeError(str(e)) from None


def _bcast(x, shape):
    """``x`` broadcast to ``shape`` (0-d arrays are left alone: lax ops broadcast them)."""
    from fungrad.numpy import util

    if not x.shape or tuple(x.shape) == tuple(shape):
        return x
    return util.broadcast_to_shape(x, shape)


def _param(name: str, x, dtype):
    """A sampler parameter as an array of ``dtype`` (strongly typed, as JAX converts it)."""
    from fungrad.numpy import util

    util.check_arraylike(name, x)
    return lax.convert_element_type(util.asarray(x), dtype)


# -- continuous samplers -------------------------------------------------------------------------


def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0) -> Array:
    """Uniform floats in ``[minval, maxval)`` (float32 by default).

    As in JAX: random bits fill the mantissa of a float in ``[1, 2)``, 1 is subtracted, and
    the result is scaled to the range. Example: ``uniform(PRNGKey(0), (3,))``.
    """
    key = _check_prng_key("uniform", key)
    dtype = _float_dtype("uniform", dtype)
    shape = _canonical_shape("uniform", shape)
    return _uniform(key, shape, dtype, minval, maxval)


def _uniform(key, shape, dtype, minval, maxval):
    minval = _param("uniform", minval, dtype)
    maxval = _param("uniform", maxval, dtype)
    _check_shape("uniform", shape, minval.shape, maxval.shape)
    info = dtypes.finfo(dtype)
    nbits, nmant = info.bits, info.nmant
    rng_bits = nbits if nmant >= 8 else 8  # 8-bit floats take 8 random bits
    uint_dtype = _UINT_DTYPES[nbits]
    bits_ = _random_bits(key, rng_bits, shape)
    if rng_bits != nbits:
        bits_ = lax.convert_element_type(bits_, uint_dtype)
    one_bits = int(np.array(1.0, dtype).view(uint_dtype))
    float_bits = lax.bitwise_or(lax.shift_right_logical(bits_, rng_bits - nmant), one_bits)
    floats = lax.sub(lax.bitcast_convert_type(float_bits, dtype), Array(np.ones((), dtype)))
    scaled = lax.add(lax.mul(floats, _bcast(lax.sub(maxval, minval), shape)), _bcast(minval, shape))
    return lax.max(_bcast(minval, shape), scaled)


def normal(key, shape=(), dtype=None) -> Array:
    """Standard normal floats: ``sqrt(2) * erf_inv(u)`` for ``u`` uniform in ``(-1, 1)``."""
    key = _check_prng_key("normal", key)
    dtype = _float_dtype("normal", dtype)
    shape = _canonical_shape("normal", shape)
    return _normal(key, shape, dtype)


def _normal(key, shape, dtype):
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype), dtype=dtype)
    u = _uniform(key, shape, dtype, Array(lo), Array(np.ones((), dtype)))
    return lax.mul(Array(np.array(np.sqrt(2), dtype)), lax.erf_inv(u))


def truncated_normal(key, lower, upper, shape=None, dtype=None) -> Array:
    """Standard normal floats conditioned on ``lower < x < upper`` (inverse-CDF sampling).

    ``shape`` defaults to the broadcast shape of ``lower`` and ``upper``.
    """
    key = _check_prng_key("truncated_normal", key)
    dtype = _float_dtype("truncated_normal", dtype)
    lower = _param("truncated_normal", lower, dtype)
    upper = _param("truncated_normal", upper, dtype)
    if shape is None:
        from fungrad.numpy import util

        shape = util.broadcast_shapes(lower.shape, upper.shape, fun_name="truncated_normal")
    else:
        shape = _canonical_shape("truncated_normal", shape)
        _check_shape("truncated_normal", shape, lower.shape, upper.shape)
    sqrt2 = Array(np.array(np.sqrt(2), dtype))
    a = lax.erf(lax.div(lower, sqrt2))
    b = lax.erf(lax.div(upper, sqrt2))
    u = _uniform(key, shape, dtype, a, b)
    out = lax.mul(sqrt2, lax.erf_inv(u))
    # Clamp into the open interval: rounding may land exactly on (or past) a bound.
    lo = lax.nextafter(lax.stop_gradient(lower), Array(np.array(np.inf, dtype)))
    hi = lax.nextafter(lax.stop_gradient(upper), Array(np.array(-np.inf, dtype)))
    return lax.min(lax.max(out, _bcast(lo, shape)), _bcast(hi, shape))


def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky") -> Array:
    """Normal vectors with mean ``mean`` (``(..., n)``) and covariance ``cov`` (``(..., n, n)``):
    ``mean + F @ z`` with ``z`` standard normal and ``F F^T = cov``: ``F = cholesky(cov)``
    (``method="cholesky"``), ``U sqrt(S)`` of ``svd(cov)`` (``"svd"``) or ``V sqrt(W)`` of
    ``eigh(cov)`` (``"eigh"``; both also take a semi-definite ``cov``), as JAX computes them.

    ``shape`` is the batch shape (the result is ``shape + (n,)``); it defaults to the broadcast
    of ``mean.shape[:-1]`` and ``cov.shape[:-2]``. NB: the svd/eigh draws have the right
    distribution, but equal JAX's numbers only where fungrad's decomposition picks LAPACK's
    signs for the singular / eigen vectors.
    """
    from fungrad import numpy as fnp
    from fungrad.numpy import util

    key = _check_prng_key("multivariate_normal", key)
    util.check_arraylike("multivariate_normal", mean, cov)
    mean, cov = util.promote_dtypes_inexact(mean, cov)
    if method not in ("cholesky", "svd", "eigh"):
        raise ValueError(
            f"multivariate_normal: method must be one of 'cholesky', 'svd', 'eigh', got {method!r}"
        )
    dtype = mean.dtype if dtype is None else _float_dtype("multivariate_normal", dtype)
    if mean.ndim < 1 or cov.ndim < 2:
        raise ValueError(
            f"multivariate_normal: mean must have ndim >= 1 and cov ndim >= 2, "
            f"got shapes {mean.shape} and {cov.shape}"
        )
    n = mean.shape[-1]
    if tuple(cov.shape[-2:]) != (n, n):
        raise ValueError(
            f"multivariate_normal: cov must have shape (..., {n}, {n}) to match "
            f"mean of shape {mean.shape}, got {cov.shape}"
        )
    if shape is None:
        shape = util.broadcast_shapes(
            mean.shape[:-1], cov.shape[:-2], fun_name="multivariate_normal"
        )
    else:
        shape = _canonical_shape("multivariate_normal", shape)
        _check_shape("multivariate_normal", shape, mean.shape[:-1], cov.shape[:-2])
    if method == "svd":
        u, s, _ = fnp.linalg.svd(cov)
        factor = fnp.multiply(u, fnp.sqrt(s[..., None, :]))
    elif method == "eigh":
        w, v = fnp.linalg.eigh(cov)
        factor = fnp.multiply(v, fnp.sqrt(w[..., None, :]))
    else:
        factor = fnp.linalg.cholesky(cov)
    z = _normal(key, (*shape, n), dtype)
    return fnp.add(mean, fnp.einsum("...ij,...j->...i", factor, z))


def exponential(key, shape=(), dtype=None) -> Array:
    """Exponential(1) floats: ``-log1p(-u)``."""
    key = _check_prng_key("exponential", key)
    dtype = _float_dtype("exponential", dtype)
    u = _uniform(key, _canonical_shape("exponential", shape), dtype, 0.0, 1.0)
    return lax.neg(lax.log1p(lax.neg(u)))


def laplace(key, shape=(), dtype=None) -> Array:
    """Laplace(0, 1) floats: ``sign(u) * log1p(-|u|)`` for ``u`` uniform in ``(-1, 1)``."""
    key = _check_prng_key("laplace", key)
    dtype = _float_dtype("laplace", dtype)
    minval = -1.0 + float(dtypes.finfo(dtype).epsneg)
    u = _uniform(key, _canonical_shape("laplace", shape), dtype, minval, 1.0)
    return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))))


def logistic(key, shape=(), dtype=None) -> Array:
    """Standard logistic floats: ``log(u) - log1p(-u)``."""
    key = _check_prng_key("logistic", key)
    dtype = _float_dtype("logistic", dtype)
    x = _uniform(
        key, _canonical_shape("logistic", shape), dtype, float(dtypes.finfo(dtype).tiny), 1.0
    )
    return lax.sub(lax.log(x), lax.log1p(lax.neg(x)))


def cauchy(key, shape=(), dtype=None) -> Array:
    """Standard Cauchy floats: ``tan(pi * (u - 1/2))``."""
    key = _check_prng_key("cauchy", key)
    dtype = _float_dtype("cauchy", dtype)
    u = _uniform(key, _canonical_shape("cauchy", shape), dtype, float(dtypes.finfo(dtype).eps), 1.0)
    half, pi = Array(np.array(0.5, dtype)), Array(np.array(np.pi, dtype))
    return lax.tan(lax.mul(pi, lax.sub(u, half)))


_GUMBEL_MODES = ("low", "high", "highest")


def gumbel(key, shape=(), dtype=None, mode=None) -> Array:
    """Standard Gumbel floats: ``-log(-log(u))``.

    ``mode="high"`` combines two uniforms so the largest samples reach ~32 instead of ~16
    (float32); ``mode="highest"`` (float32 only; other dtypes use ``"high"``) turns 64 random
    bits into a float with the leading zeros as exponent, so nothing is lost near 0 or 1.
    """
    key = _check_prng_key("gumbel", key)
    dtype = _float_dtype("gumbel", dtype)
    shape = _canonical_shape("gumbel", shape)
    mode = "low" if mode is None else mode
    if mode not in _GUMBEL_MODES:
        raise ValueError(f"gumbel: mode must be one of {_GUMBEL_MODES}, got {mode!r}")
    return _gumbel(key, shape, dtype, mode)


def _bits64_to_float32(hi, lo):
    """The 64-bit fixed-point fraction ``hi:lo`` (in ``[0, 1)``) as a float32 keeping all the
    precision float32 has near 0: the count of leading zeros becomes the exponent."""
    u32 = np.uint32
    hiclz, loclz = lax.clz(hi), lax.clz(lo)
    hi_empty = lax.eq(hiclz, _u32(32))
    mantissa = lax.bitwise_or(
        lax.shift_left(hi, hiclz),
        lax.select(
            hi_empty,
            lax.shift_left(lo, loclz),
            lax.shift_right_logical(lo, lax.sub(_u32(32), hiclz)),
        ),
    )
    mantissa = lax.bitwise_and(lax.shift_right_logical(mantissa, _u32(8)), _u32((1 << 23) - 1))
    zeros = lax.select(hi_empty, lax.add(loclz, _u32(32)), hiclz)
    exp = lax.shift_left(lax.sub(_u32(126), zeros), _u32(23))
    exp = lax.bitwise_and(exp, Array(u32((1 << 30) - (1 << 22))))
    return lax.bitcast_convert_type(lax.bitwise_or(exp, mantissa), np.float32)


def _gumbel_highest(key, shape):
    y1, y2 = _threefry_shape("gumbel", key, (2, *shape))
    bits = lax.bitwise_xor(y1, y2)
    hi = lax.index_in_dim(bits, 0, keepdims=False)
    lo = lax.index_in_dim(bits, 1, keepdims=False)
    # 1 - bits in 64-bit fixed point: two's complement with the carry into the high word
    carry = lax.convert_element_type(lax.eq(lax.bitwise_not(lo), _u32(0xFFFFFFFF)), np.uint32)
    neg_hi = lax.add(lax.bitwise_not(hi), carry)
    neg_lo = lax.add(lax.bitwise_not(lo), _u32(1))
    below_half = lax.lt(hi, _u32(1 << 31))
    x = _bits64_to_float32(lax.select(below_half, hi, neg_hi), lax.select(below_half, lo, neg_lo))
    # x is u for u < 1/2 and 1 - u otherwise: log1p(-u) is then log(x)
    return lax.select(
        below_half,
        lax.neg(lax.log(lax.neg(lax.log1p(lax.neg(x))))),
        lax.neg(lax.log(lax.neg(lax.log(x)))),
    )


def _gumbel(key, shape, dtype, mode):
    info = dtypes.finfo(dtype)
    if mode == "highest" and dtype == np.float32:
        return _gumbel_highest(key, shape)
    if mode in ("high", "highest"):
        u = _uniform(key, (2, *shape), dtype, 0.0, 1.0)
        high = lax.index_in_dim(u, 0, keepdims=False)
        low = lax.index_in_dim(u, 1, keepdims=False)
        c = Array(np.array(2.0**-info.nmant, dtype))
        refined = lax.add(lax.add(high, lax.mul(c, low)), Array(np.array(info.tiny, dtype)))
        x = lax.select_n(lax.ge(high, Array(np.array(0.5, dtype))), refined, high)
        return lax.neg(lax.log(lax.neg(lax.log1p(lax.neg(x)))))
    u = _uniform(key, shape, dtype, float(info.tiny), 1.0)
    return lax.neg(lax.log(lax.neg(lax.log(u))))


# -- discrete samplers ---------------------------------------------------------------------------


def bernoulli(key, p=0.5, shape=None, mode="low") -> Array:
    """Booleans that are True with probability ``p`` (``uniform < p``).

    ``shape`` defaults to ``p``'s shape. ``mode="high"`` uses two uniforms, which keeps very
    small ``p`` (below ~1e-7 in float32) accurate.
    """
    from fungrad.numpy import util

    if mode not in ("high", "low"):
        raise ValueError(f"bernoulli: mode must be 'high' or 'low', got {mode!r}")
    key = _check_prng_key("bernoulli", key)
    util.check_arraylike("bernoulli", p)
    p = util.asarray(p)
    if dtypes.kind(p.dtype) != "f":
        raise TypeError(f"bernoulli: the probability p must have a floating dtype, got {p.dtype}")
    dtype = p.dtype
    p = lax.convert_element_type(p, dtype)
    if shape is None:
        shape = tuple(p.shape)
    else:
        shape = _canonical_shape("bernoulli", shape)
        _check_shape("bernoulli", shape, p.shape)
    if mode == "high":
        u = _uniform(key, (2, *shape), dtype, 0.0, 1.0)
        u1 = lax.index_in_dim(u, 0, keepdims=False)
        u2 = lax.index_in_dim(u, 1, keepdims=False)
        # the resolution of one uniform sample is 2**-nmant
        u2 = lax.mul(u2, Array(np.array(2.0 ** -dtypes.finfo(dtype).nmant, dtype)))
        return lax.lt(u2, lax.sub(_bcast(p, shape), u1))
    return lax.lt(_uniform(key, shape, dtype, 0.0, 1.0), _bcast(p, shape))


def _convert_and_clip_integer(val, dtype):
    """``val`` (integer) converted to the integer ``dtype``, clipped to its range rather than
    wrapped."""
    vinfo, info = np.iinfo(val.dtype), np.iinfo(dtype)
    lo = Array(np.array(max(info.min, vinfo.min), val.dtype))
    hi = Array(np.array(min(info.max, vinfo.max), val.dtype))
    return lax.convert_element_type(lax.min(lax.max(val, lo), hi), dtype)


def randint(key, shape, minval, maxval, dtype=None) -> Array:
    """Uniform integers in ``[minval, maxval)`` (int32 by default; int64 with x64).

    As in JAX, ``2 * nbits`` random bits are reduced modulo the span, so the bias is tiny
    unless the span is huge; ``maxval <= minval`` gives ``minval``.
    """
    try:
        return _randint_checked(key, shape, minval, maxval, dtype)
    except OverflowError as e:  # a Python int bound outside the dtype's range
        raise OverflowError(
            f"randint: {e}; pass bounds within the range of the dtype (or a wider dtype)"
        ) from None


def _randint_checked(key, shape, minval, maxval, dtype):
    from fungrad.numpy import util

    key = _check_prng_key("randint", key)
    dtype = _dtype("randint", int if dtype is None else dtype)
    if dtypes.kind(dtype) not in "iu":
        raise TypeError(f"randint: dtype must be an integer dtype, got {dtype}")
    shape = _canonical_shape("randint", shape)
    util.check_arraylike("randint", minval, maxval)
    info = np.iinfo(dtype)
    sample_dtype = dtype
    if info.bits < 32:
        # Sample in 32 bits to avoid biased results, then convert.
        sample_dtype = np.dtype(np.int32)
        i32 = np.dtype(np.int32)
        minval = _clip_const(
            lax.convert_element_type(util.asarray(minval), i32), int(info.min), int(info.max)
        )
        maxval = _clip_const(
            lax.convert_element_type(util.asarray(maxval), i32), int(info.min), int(info.max) + 1
        )
    out = _randint(key, shape, minval, maxval, sample_dtype)
    return lax.convert_element_type(out, dtype)


def _clip_const(x, lo: int, hi: int):
    return lax.min(lax.max(x, Array(np.array(lo, x.dtype))), Array(np.array(hi, x.dtype)))


def _randint(key, shape, minval, maxval, dtype):
    from fungrad.numpy import util

    minval = util.asarray(minval)
    maxval = util.asarray(maxval)
    _check_shape("randint", shape, minval.shape, maxval.shape)
    int_dtype = dtypes.default_int_dtype()
    if dtypes.kind(minval.dtype) not in "iu":
        minval = lax.convert_element_type(minval, int_dtype)
    if dtypes.kind(maxval.dtype) not in "iu":
        maxval = lax.convert_element_type(maxval, int_dtype)
    # maxval beyond dtype's range (e.g. randint(key, shape, 0, 256, uint8)) widens the span.
    dtype_max = _convert_and_clip_integer(Array(np.array(np.iinfo(dtype).max, dtype)), maxval.dtype)
    maxval_out_of_range = lax.gt(maxval, dtype_max)
    minval = _bcast(_convert_and_clip_integer(minval, dtype), shape)
    maxval = _bcast(_convert_and_clip_integer(maxval, dtype), shape)
    maxval_out_of_range = _bcast(maxval_out_of_range, shape)
    nbits = np.iinfo(dtype).bits
    keys = _split(key, 2)
    k1 = lax.index_in_dim(keys, 0, keepdims=False)
    k2 = lax.index_in_dim(keys, 1, keepdims=False)
    higher_bits = _random_bits(k1, nbits, shape)
    lower_bits = _random_bits(k2, nbits, shape)
    udtype = _UINT_DTYPES[nbits]
    one = Array(np.ones((), udtype))
    span = lax.convert_element_type(lax.sub(maxval, minval), udtype)
    # span = 1 when maxval <= minval, so minval is returned.
    span = lax.select_n(lax.le(maxval, minval), span, lax.full_like(span, 1))
    # maxval out of range: the span is one larger (wrapping to 0 means "all values").
    span = lax.select_n(
        lax.bitwise_and(maxval_out_of_range, lax.gt(maxval, minval)), span, lax.add(span, one)
    )
    # (hi * 2**nbits + lo) mod span, with 2**nbits mod span computed without overflow.
    multiplier = lax.rem(Array(np.array(2 ** (nbits // 2), udtype)), span)
    multiplier = lax.rem(lax.mul(multiplier, multiplier), span)
    offset = lax.add(lax.mul(lax.rem(higher_bits, span), multiplier), lax.rem(lower_bits, span))
    offset = lax.rem(offset, span)
    return lax.add(minval, lax.convert_element_type(offset, dtype))


def _shuffle(key, x, axis: int):
    """Shuffle ``x`` along ``axis`` by sorting on random 32-bit keys, repeated enough rounds
    that ties are negligible (JAX's algorithm)."""
    exponent = 3
    uint32max = np.iinfo(np.uint32).max
    num_rounds = int(np.ceil(exponent * np.log(max(1, x.size)) / np.log(uint32max)))
    for _ in range(num_rounds):
        keys = _split(key, 2)
        key = lax.index_in_dim(keys, 0, keepdims=False)
        subkey = lax.index_in_dim(keys, 1, keepdims=False)
        sort_keys = _random_bits(subkey, 32, tuple(x.shape))
        _, x = lax.sort_key_val(sort_keys, x, axis)
    return x


def permutation(key, x, axis=0, independent=False) -> Array:
    """A random permutation of ``arange(x)`` (integer ``x``) or of ``x`` along ``axis``.

    With ``independent=True`` every slice along ``axis`` is shuffled independently.
    """
    from fungrad import numpy as fnp
    from fungrad.numpy import util

    key = _check_prng_key("permutation", key)
    util.check_arraylike("permutation", x)
    x = util.asarray(x)
    if not x.ndim:
        if dtypes.kind(x.dtype) not in "iu":
            raise TypeError(
                f"permutation: x must be an integer or an array of at least one "
                f"dimension, got {core.get_aval(x).str_short()}"
            )
        return _shuffle(key, fnp.arange(int(x)), 0)
    axis = util.canonicalize_axis(axis, x.ndim, "permutation")
    if independent or x.ndim == 1:
        return _shuffle(key, x, axis)
    ind = _shuffle(key, fnp.arange(x.shape[axis]), 0)
    return fnp.take(x, ind, axis=axis)


def choice(key, a, shape=(), replace=True, p=None, axis=0) -> Array:
    """A random sample of ``shape`` from ``a`` (or ``arange(a)`` for an integer ``a``), with or
    without replacement, uniformly or with probabilities ``p``."""
    from fungrad import numpy as fnp
    from fungrad.numpy import util

    key = _check_prng_key("choice", key)
    if not isinstance(shape, Sequence):
        raise TypeError(f"choice: shape must be a sequence, got {shape!r}")
    shape = _canonical_shape("choice", shape)
    util.check_arraylike("choice", a)
    arr = util.asarray(a)
    if arr.ndim == 0:
        n_inputs = int(arr)
    else:
        axis = util.canonicalize_axis(axis, arr.ndim, "choice")
        n_inputs = arr.shape[axis]
    n_draws = math.prod(shape)
    if n_draws == 0:
        return fnp.zeros(shape, dtype=arr.dtype)
    if n_inputs <= 0:
        raise ValueError("choice: a must be greater than 0 unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise ValueError(
            f"choice: cannot take a larger sample (size {n_draws}) than the "
            f"population (size {n_inputs}) when replace=False"
        )
    if p is None:
        if replace:
            ind = randint(key, shape, 0, n_inputs)
            result = ind if arr.ndim == 0 else fnp.take(arr, ind, axis=axis)
        else:
            perm = permutation(key, n_inputs if arr.ndim == 0 else arr, axis)
            result = lax.slice_in_dim(perm, 0, n_draws, axis=axis if arr.ndim else 0)
    else:
        util.check_arraylike("choice", p)
        (p_arr,) = util.promote_dtypes_inexact(p)
        int_dtype = dtypes.default_int_dtype()
        if p_arr.shape != (n_inputs,):
            raise ValueError(
                f"choice: p must be None or a 1-D vector of the size of "
                f"a.shape[axis]; p has shape {p_arr.shape} and a.shape[axis] is "
                f"{n_inputs}"
            )
        if replace:
            p_cuml = fnp.cumsum(p_arr)
            total = lax.index_in_dim(p_cuml, -1, keepdims=False)
            r = fnp.multiply(total, fnp.subtract(1, uniform(key, shape, p_cuml.dtype)))
            ind = lax.convert_element_type(fnp.searchsorted(p_cuml, r), int_dtype)
        else:
            # Gumbel top-k trick.
            g = fnp.add(gumbel(key, (n_inputs,), p_arr.dtype), fnp.log(p_arr))
            ind = lax.convert_element_type(lax.top_k(g, n_draws)[1], int_dtype)
        result = ind if arr.ndim == 0 else fnp.take(arr, ind, axis=axis)
    out_shape = (
        shape if arr.ndim == 0 else (tuple(arr.shape[:axis]) + shape + tuple(arr.shape[axis + 1 :]))
    )
    return lax.reshape(result, out_shape)


def categorical(key, logits, axis=-1, shape=None, replace=True, mode=None) -> Array:
    """Category indices drawn with probabilities ``softmax(logits, axis)`` (Gumbel-max trick;
    Gumbel top-k without replacement). ``shape`` defaults to ``logits.shape`` without ``axis``.
    """
    from fungrad import numpy as fnp
    from fungrad.numpy import util

    key = _check_prng_key("categorical", key)
    util.check_arraylike("categorical", logits)
    logits = util.asarray(logits)
    ndim = logits.ndim
    if ndim == 0:
        raise ValueError("categorical: logits must have at least one dimension")
    axis = util.canonicalize_axis(axis, ndim, "categorical")
    batch_shape = tuple(d for i, d in enumerate(logits.shape) if i != axis)
    if shape is None:
        shape = batch_shape
    else:
        shape = _canonical_shape("categorical", shape)
        _check_shape("categorical", shape, batch_shape)
    prefix = shape[: len(shape) - len(batch_shape)]
    if replace:
        neg_axis = axis - ndim
        logits_shape = list(shape[len(shape) - len(batch_shape) :])
        logits_shape.insert(axis, logits.shape[axis])
        g = gumbel(key, (*prefix, *logits_shape), logits.dtype, mode=mode)
        return fnp.argmax(
            fnp.add(g, lax.expand_dims(logits, tuple(range(len(prefix))))), axis=neg_axis
        )
    logits = fnp.add(logits, gumbel(key, tuple(logits.shape), logits.dtype, mode=mode))
    k = math.prod(prefix)
    if k > logits.shape[axis]:
        raise ValueError(
            f"categorical: the number of samples without replacement ({k}) "
            f"cannot exceed the number of categories ({logits.shape[axis]})"
        )
    perm = tuple(i for i in range(ndim) if i != axis) + (axis,)  # move axis to the end
    _, indices = lax.top_k(lax.transpose(logits, perm), k)
    dimensions = (indices.ndim - 1, *range(indices.ndim - 1))
    return lax.reshape(indices, shape, dimensions)


# -- distributions built on gamma, normal and uniform ---------------------------------------------
# Each follows JAX's documented algorithm with the same key splits, so a key gives JAX's numbers
# (up to a few ulps where log/pow/lgamma round differently; a rejection sampler can then, very
# rarely, take another branch).


def _sampler_shape(name: str, shape, *params):
    """``shape`` checked against the parameters' shapes; by default their broadcast shape."""
    from fungrad.numpy import util

    param_shapes = [tuple(p.shape) for p in params]
    if shape is None:
        return util.broadcast_shapes(*param_shapes, fun_name=name) if params else ()
    shape = _canonical_shape(name, shape)
    _check_shape(name, shape, *param_shapes)
    return shape


def _params(name: str, dtype, *xs, check_cast: bool = True):
    """The parameters as arrays of ``dtype``. With ``check_cast`` (JAX checks for most
    samplers) an array whose dtype would not promote to ``dtype`` is an error, e.g. float32
    parameters for a float16 sample; Python scalars always convert."""
    if check_cast:
        from fungrad.numpy import util

        util.check_arraylike(name, *xs)
        for x in xs:
            if dtypes.result_type(x, dtype) != dtype:
                what = util.asarray(x).dtype
                raise ValueError(
                    f"{name}: cannot safely cast a parameter of dtype {what} to "
                    f"the sample dtype {dtype}; pass dtype={what} or convert the "
                    f"parameter"
                )
    return [_param(name, x, dtype) for x in xs]


def _gamma_sampler(name: str, key, a, shape, dtype, log_space: bool):
    from fungrad.random_gamma import gamma_samples

    key = _check_prng_key(name, key)
    dtype = _float_dtype(name, dtype)
    (a,) = _params(name, dtype, a, check_cast=False)
    shape = _sampler_shape(name, shape, a)
    return gamma_samples(key, _bcast_full(a, shape), log_space)


def _bcast_full(x, shape):
    """``x`` broadcast to exactly ``shape`` (0-d included)."""
    from fungrad.numpy import util

    return x if tuple(x.shape) == tuple(shape) else util.broadcast_to_shape(x, shape)


def gamma(key, a, shape=None, dtype=None) -> Array:
    """Gamma(a) floats (unit scale), density ``x**(a-1) e**-x / Gamma(a)`` for ``a > 0``.

    Marsaglia-Tsang rejection per element, each with its own key split from ``key`` (JAX's
    scheme: the same numbers as ``jax.random.gamma``). Differentiable in ``a`` (implicit
    reparameterisation, as JAX). ``shape`` defaults to ``a.shape``. Divide by a rate or multiply
    by a scale for other parameterisations.
    """
    return _gamma_sampler("gamma", key, a, shape, dtype, False)


def loggamma(key, a, shape=None, dtype=None) -> Array:
    """``log`` of Gamma(a) samples, computed in log space: ``exp(loggamma(...))`` equals
    ``gamma(...)`` for the same key, but tiny samples (``a << 1``) keep their precision."""
    return _gamma_sampler("loggamma", key, a, shape, dtype, True)


def beta(key, a, b, shape=None, dtype=None) -> Array:
    """Beta(a, b) floats in ``[0, 1]``: ``Ga / (Ga + Gb)`` from two log-gamma samples (keys
    ``split(key)``), scaled by their maximum so small ``a``, ``b`` keep precision."""
    key = _check_prng_key("beta", key)
    dtype = _float_dtype("beta", dtype)
    a, b = _params("beta", dtype, a, b)
    shape = _sampler_shape("beta", shape, a, b)
    key_a, key_b = _split_keys(key, 2)
    log_a = loggamma(key_a, _bcast_full(a, shape), shape, dtype)
    log_b = loggamma(key_b, _bcast_full(b, shape), shape, dtype)
    log_max = lax.max(log_a, log_b)
    ga = lax.exp(lax.sub(log_a, log_max))
    gb = lax.exp(lax.sub(log_b, log_max))
    return lax.div(ga, lax.add(ga, gb))


def _split_keys(key, num: int):
    keys = _split(key, num)
    return [lax.index_in_dim(keys, i, keepdims=False) for i in range(num)]


def dirichlet(key, alpha, shape=None, dtype=None) -> Array:
    """Dirichlet(alpha) vectors along the last axis (``alpha``: ``(..., n)``): the softmax of
    log-gamma samples. ``shape`` is the batch shape (result ``shape + (n,)``), by default
    ``alpha.shape[:-1]``."""
    from fungrad import nn

    key = _check_prng_key("dirichlet", key)
    dtype = _float_dtype("dirichlet", dtype)
    (alpha,) = _params("dirichlet", dtype, alpha, check_cast=False)
    if alpha.ndim < 1:
        raise ValueError(
            f"dirichlet: alpha must have at least one dimension (the categories), "
            f"got a scalar of shape {tuple(alpha.shape)}"
        )
    if shape is None:
        shape = tuple(alpha.shape[:-1])
    else:
        shape = _canonical_shape("dirichlet", shape)
        _check_shape("dirichlet", shape, tuple(alpha.shape[:-1]))
    full = (*shape, alpha.shape[-1])
    log_g = loggamma(key, _bcast_full(alpha, full), full, dtype)
    return nn.softmax(log_g, -1)


def chisquare(key, df, shape=None, dtype=None) -> Array:
    """Chi-square(df) floats: ``2 * exp(loggamma(df / 2))``."""
    key = _check_prng_key("chisquare", key)
    dtype = _float_dtype("chisquare", dtype)
    (df,) = _params("chisquare", dtype, df)
    shape = _sampler_shape("chisquare", shape, df)
    log_g = loggamma(key, lax.div(df, _c(df, 2)), shape, dtype)
    return lax.mul(lax.exp(log_g), Array(np.array(2, dtype)))


def _c(x, value):
    return Array(np.array(value, x.dtype))


def f(key, dfnum, dfden, shape=None, dtype=None) -> Array:
    """F(dfnum, dfden) floats: ``(chi2(dfnum) / dfnum) / (chi2(dfden) / dfden)``."""
    key = _check_prng_key("f", key)
    dtype = _float_dtype("f", dtype)
    dfnum, dfden = _params("f", dtype, dfnum, dfden)
    shape = _sampler_shape("f", shape, dfnum, dfden)
    key_den, key_num = _split_keys(key, 2)
    num = lax.div(chisquare(key_num, dfnum, shape, dtype), dfnum)
    den = lax.div(chisquare(key_den, dfden, shape, dtype), dfden)
    return lax.div(num, den)


def t(key, df, shape=None, dtype=None) -> Array:
    """Student's t(df) floats: ``n * sqrt((df / 2) / g)``, ``n`` normal, ``g ~ Gamma(df / 2)``."""
    key = _check_prng_key("t", key)
    dtype = _float_dtype("t", dtype)
    (df,) = _params("t", dtype, df)
    shape = _sampler_shape("t", shape, df)
    key_n, key_g = _split_keys(key, 2)
    n = _normal(key_n, shape, dtype)
    half_df = lax.div(df, _c(df, 2))
    g = gamma(key_g, half_df, shape, dtype)
    return lax.mul(n, lax.sqrt(lax.div(_bcast(half_df, shape), g)))


def pareto(key, b, shape=None, dtype=None) -> Array:
    """Pareto(b) floats on ``[1, inf)``: ``exp(e / b)`` with ``e`` exponential."""
    key = _check_prng_key("pareto", key)
    dtype = _float_dtype("pareto", dtype)
    (b,) = _params("pareto", dtype, b)
    shape = _sampler_shape("pareto", shape, b)
    e = exponential(key, shape, dtype)
    return lax.exp(lax.div(e, _bcast(b, shape)))


def lognormal(key, sigma=np.float32(1), shape=None, dtype=None) -> Array:
    """Log-normal floats: ``exp(sigma * n)`` with ``n`` standard normal."""
    key = _check_prng_key("lognormal", key)
    dtype = _float_dtype("lognormal", dtype)
    (sigma,) = _params("lognormal", dtype, sigma)
    shape = _sampler_shape("lognormal", shape, sigma)
    return lax.exp(lax.mul(_normal(key, shape, dtype), _bcast(sigma, shape)))


def rayleigh(key, scale, shape=None, dtype=None) -> Array:
    """Rayleigh(scale) floats: ``scale * sqrt(-2 log(u))``."""
    key = _check_prng_key("rayleigh", key)
    dtype = _float_dtype("rayleigh", dtype)
    (scale,) = _params("rayleigh", dtype, scale)
    shape = _sampler_shape("rayleigh", shape, scale)
    u = _uniform(key, shape, dtype, 0.0, 1.0)
    root = lax.sqrt(lax.mul(lax.log(u), Array(np.array(-2, dtype))))
    return lax.mul(_bcast_full(scale, shape), root)


def wald(key, mean, shape=None, dtype=None) -> Array:
    """Wald (inverse Gaussian, unit shape) floats with mean ``mean`` (Michael, Schucany and
    Haas's transformation with one normal and one uniform, keys ``split(key)``)."""
    key = _check_prng_key("wald", key)
    dtype = _float_dtype("wald", dtype)
    (mean,) = _params("wald", dtype, mean)
    shape = _sampler_shape("wald", shape, mean)
    k1, k2 = _split_keys(key, 2)
    mean = _bcast_full(mean, shape)
    v = _normal(k1, shape, dtype)
    z = _uniform(k2, shape, dtype, 0.0, 1.0)
    y = lax.integer_pow(v, 2)
    y_sq = lax.integer_pow(y, 2)
    mean_sq = lax.integer_pow(mean, 2)
    two, four = _c(mean, 2), _c(mean, 4)
    root = lax.sqrt(lax.add(lax.mul(lax.mul(four, mean), y), lax.mul(mean_sq, y_sq)))
    x = lax.sub(lax.add(mean, lax.div(lax.mul(mean_sq, y), two)), lax.mul(lax.div(mean, two), root))
    return lax.select(lax.le(z, lax.div(mean, lax.add(mean, x))), x, lax.div(mean_sq, x))


def triangular(key, left, mode, right, shape=None, dtype=None) -> Array:
    """Triangular(left, mode, right) floats by inverting the CDF of one uniform."""
    key = _check_prng_key("triangular", key)
    dtype = _float_dtype("triangular", dtype)
    left, mode, right = _params("triangular", dtype, left, mode, right)
    shape = _sampler_shape("triangular", shape, left, mode, right)
    left, mode, right = (_bcast_full(x, shape) for x in (left, mode, right))
    width = lax.sub(right, left)
    fc = lax.div(lax.sub(mode, left), width)
    u = _uniform(key, shape, dtype, 0.0, 1.0)
    out1 = lax.add(left, lax.sqrt(lax.mul(lax.mul(u, width), lax.sub(mode, left))))
    one_minus_u = lax.sub(_c(u, 1), u)
    out2 = lax.sub(right, lax.sqrt(lax.mul(lax.mul(one_minus_u, width), lax.sub(right, mode))))
    return lax.select(lax.lt(u, fc), out1, out2)


def weibull_min(key, scale, concentration, shape=(), dtype=None) -> Array:
    """Weibull floats: ``(-log1p(-u)) ** (1 / concentration) * scale`` (inverse CDF)."""
    from fungrad import numpy as fnp
    from fungrad.numpy import util

    key = _check_prng_key("weibull_min", key)
    dtype = _float_dtype("weibull_min", dtype)
    shape = _canonical_shape("weibull_min", shape)
    util.check_arraylike("weibull_min", scale, concentration)
    _check_broadcast("weibull_min", shape, scale, concentration)
    u = _uniform(key, shape, dtype, 0.0, 1.0)
    e = lax.neg(lax.log1p(lax.neg(u)))
    return fnp.multiply(fnp.power(e, fnp.divide(1.0, concentration)), scale)


def maxwell(key, shape=(), dtype=None) -> Array:
    """Maxwell floats: the length of a standard normal 3-vector."""
    from fungrad import numpy as fnp

    key = _check_prng_key("maxwell", key)
    dtype = _float_dtype("maxwell", dtype)
    shape = _canonical_shape("maxwell", shape)
    return fnp.linalg.norm(_normal(key, (*shape, 3), dtype), axis=-1)


def rademacher(key, shape=(), dtype=None) -> Array:
    """Random signs: -1 or +1 with equal probability (int32 by default)."""
    key = _check_prng_key("rademacher", key)
    dtype = _dtype("rademacher", int if dtype is None else dtype)
    shape = _canonical_shape("rademacher", shape)
    return _rademacher(key, shape, dtype)


def _rademacher(key, shape, dtype):
    b = lax.convert_element_type(bernoulli(key, 0.5, shape), np.int32)
    return lax.convert_element_type(lax.sub(lax.mul(_c(b, 2), b), _c(b, 1)), dtype)


def double_sided_maxwell(key, loc, scale, shape=(), dtype=None) -> Array:
    """Double-sided Maxwell floats: ``sign * maxwell * scale + loc``.

    As in JAX the result shape is ``shape + broadcast(loc.shape, scale.shape)``, where an
    empty ``shape`` is first replaced by that broadcast shape.
    """
    from fungrad import numpy as fnp
    from fungrad.numpy import util

    key = _check_prng_key("double_sided_maxwell", key)
    dtype = _float_dtype("double_sided_maxwell", dtype)
    shape = _canonical_shape("double_sided_maxwell", shape)
    util.check_arraylike("double_sided_maxwell", loc, scale)
    param_shape = util.broadcast_shapes(
        np.shape(loc), np.shape(scale), fun_name="double_sided_maxwell"
    )
    shape = (shape or param_shape) + param_shape
    maxwell_key, sign_key = _split_keys(key, 2)
    m = maxwell(maxwell_key, shape, dtype)
    sign = _rademacher(sign_key, shape, dtype)
    return fnp.add(fnp.multiply(lax.mul(sign, m), scale), loc)


def generalized_normal(key, p, shape=(), dtype=None) -> Array:
    """Generalized normal floats, density ``p / (2 Gamma(1/p)) exp(-|x|**p)``: a random sign
    times ``Gamma(1/p) ** (1/p)``."""
    from fungrad import numpy as fnp

    key = _check_prng_key("generalized_normal", key)
    dtype = _float_dtype("generalized_normal", dtype)
    shape = _canonical_shape("generalized_normal", shape)
    (p,) = _params("generalized_normal", dtype, p, check_cast=False)
    _check_shape("generalized_normal", shape, tuple(p.shape))
    k_g, k_r = _split_keys(key, 2)
    inv_p = fnp.divide(1, p)
    g = gamma(k_g, inv_p, shape, dtype)
    r = _rademacher(k_r, shape, dtype)
    return lax.mul(r, fnp.power(g, inv_p))


def orthogonal(key, n, shape=(), dtype=None, m=None) -> Array:
    """Uniformly (Haar) distributed matrices with orthonormal columns (or rows), of shape
    ``(*shape, n, m)`` (``m`` defaults to ``n``): the Q of a QR decomposition of a standard
    normal ``(max(n, m), min(n, m))`` matrix with its columns' signs fixed so that R has a
    positive diagonal (Mezzadri 2007), transposed when ``n < m``; JAX's numbers."""
    from fungrad import numpy as fnp

    key = _check_prng_key("orthogonal", key)
    dtype = _float_dtype("orthogonal", dtype)
    shape = _canonical_shape("orthogonal", shape)
    try:
        n = _static_int("orthogonal", "n", n)
        m = n if m is None else _static_int("orthogonal", "m", m)
    except core.ConcretizationTypeError:
        raise
    except TypeError:
        raise TypeError(
            f"orthogonal: n and m must be Python integers, got n={n!r}, m={m!r}"
        ) from None
    if n < 0 or m < 0:
        raise ValueError(f"orthogonal: n and m must be non-negative, got n={n}, m={m}")
    z = _normal(key, (*shape, max(n, m), min(n, m)), dtype)
    q, r = fnp.linalg.qr(z)
    signs = lax.sign(fnp.diagonal(r, 0, -2, -1))
    q = fnp.multiply(q, fnp.expand_dims(signs, -2))
    return fnp.swapaxes(q, -2, -1) if n < m else q


def ball(key, d, p=2, shape=(), dtype=None) -> Array:
    """Points uniform in the ``d``-dimensional unit ``p``-norm ball (shape ``shape + (d,)``):
    generalized normal vectors divided by ``(sum |g|**p + e) ** (1/p)``, ``e`` exponential."""
    from fungrad import numpy as fnp

    key = _check_prng_key("ball", key)
    dtype = _float_dtype("ball", dtype)
    shape = _canonical_shape("ball", shape)
    try:
        d = _static_int("ball", "the dimension d", d)
    except core.ConcretizationTypeError:
        raise
    except TypeError:
        raise TypeError(
            f"ball: the dimension d must be a concrete integer, got {type(d).__name__}"
        ) from None
    if d < 0:  # a TypeError, as JAX's shape check raises
        raise TypeError(f"ball: the dimension d must be non-negative, got {d}")
    k1, k2 = _split_keys(key, 2)
    g = generalized_normal(k1, p, (*shape, d), dtype)
    e = exponential(k2, shape, dtype)
    norm = fnp.power(fnp.add(fnp.sum(fnp.power(fnp.abs(g), p), axis=-1), e), fnp.divide(1, p))
    return fnp.divide(g, lax.expand_dims(norm, (len(shape),)))


# -- discrete samplers built on uniform ------------------------------------------------------------


def _int_dtype(name: str, dtype) -> np.dtype:
    dt = _dtype(name, int if dtype is None else dtype)
    if dtypes.kind(dt) not in "iu":
        raise ValueError(f"{name}: dtype must be an integer dtype, got {dt}")
    return dt


def geometric(key, p, shape=None, dtype=None) -> Array:
    """Geometric(p) integers >= 1 (trials up to the first success):
    ``floor(log(u) / log1p(-p)) + 1``."""
    from fungrad import numpy as fnp
    from fungrad.numpy import util

    key = _check_prng_key("geometric", key)
    dtype = _int_dtype("geometric", dtype)
    util.check_arraylike("geometric", p)
    (p,) = util.promote_dtypes_inexact(p)
    shape = _sampler_shape("geometric", shape, p)
    u = _uniform(key, shape, p.dtype, 0.0, 1.0)
    u = fnp.where(lax.eq(u, _c(u, 0)), _c(u, 1), u)
    log_q = _bcast_full(lax.log1p(lax.neg(p)), shape)
    g = lax.add(lax.floor(lax.div(lax.log(u), log_q)), _c(u, 1))
    return lax.convert_element_type(g, dtype)


def poisson(key, lam, shape=None, dtype=None) -> Array:
    """Poisson(lam) integers (int32 by default), ``lam >= 0`` (computed in float32, as JAX).

    ``lam < 10``: Knuth's method (multiply uniforms until below ``exp(-lam)``); otherwise
    Hormann's transformed rejection. Both loop over the whole array with one key per round.
    """
    from fungrad.numpy import util

    key = _check_prng_key("poisson", key)
    dtype = _int_dtype("poisson", dtype)
    util.check_arraylike("poisson", lam)
    lam = util.asarray(lam)
    shape = tuple(lam.shape) if shape is None else _canonical_shape("poisson", shape)
    lam = lax.convert_element_type(util.broadcast_to_shape(lam, shape, "poisson"), np.float32)
    use_knuth = lax.bitwise_or(lax.ne(lam, lam), lax.lt(lam, _c(lam, 10)))
    lam_knuth = lax.select(use_knuth, lam, lax.full_like(lam, 0))
    lam_rejection = lax.select(use_knuth, lax.full_like(lam, 1e5), lam)
    max_iters = Array(np.array(np.iinfo(dtype).max, dtype))
    out = lax.select(
        use_knuth,
        _poisson_knuth(key, lam_knuth, shape, dtype, max_iters),
        _poisson_rejection(key, lam_rejection, shape, dtype, max_iters),
    )
    return lax.select(lax.eq(lam, _c(lam, 0)), lax.full_like(out, 0), out)


def _any_true(pred):
    return lax.reduce_or(pred, tuple(range(pred.ndim)))


def _poisson_knuth(key, lam, shape, dtype, max_iters):
    neg_lam = lax.neg(lam)

    def body(state):
        i, k, key, log_prod = state
        key, subkey = _split_keys(key, 2)
        k = lax.select(lax.gt(log_prod, neg_lam), lax.add(k, _c(k, 1)), k)
        u = _uniform(subkey, shape, np.dtype(np.float32), 0.0, 1.0)
        return lax.add(i, _c(i, 1)), k, key, lax.add(log_prod, lax.log(u))

    def cond(state):
        i, _, _, log_prod = state
        return lax.bitwise_and(_any_true(lax.gt(log_prod, neg_lam)), lax.lt(i, max_iters))

    init = (_c(max_iters, 0), lax.full(shape, 0, dtype), key, lax.full(shape, 0, np.float32))
    k = lax.while_loop(cond, body, init)[1]
    return lax.sub(k, _c(k, 1))


def _poisson_rejection(key, lam, shape, dtype, max_iters):
    log_lam = lax.log(lam)
    b = lax.add(_c(lam, 0.931), lax.mul(_c(lam, 2.53), lax.sqrt(lam)))
    a = lax.add(_c(lam, -0.059), lax.mul(_c(lam, 0.02483), b))
    inv_alpha = lax.add(_c(lam, 1.1239), lax.div(_c(lam, 1.1328), lax.sub(b, _c(lam, 3.4))))
    v_r = lax.sub(_c(lam, 0.9277), lax.div(_c(lam, 3.6224), lax.sub(b, _c(lam, 2))))
    f32 = np.dtype(np.float32)

    def body(state):
        i, k_out, accepted, key = state
        key, key0, key1 = _split_keys(key, 3)
        u = lax.sub(_uniform(key0, shape, f32, 0.0, 1.0), _c(lam, 0.5))
        v = _uniform(key1, shape, f32, 0.0, 1.0)
        us = lax.sub(_c(lam, 0.5), lax.abs(u))
        k = lax.floor(
            lax.add(
                lax.add(lax.mul(lax.add(lax.div(lax.mul(_c(lam, 2), a), us), b), u), lam),
                _c(lam, 0.43),
            )
        )
        s = lax.log(lax.div(lax.mul(v, inv_alpha), lax.add(lax.div(a, lax.mul(us, us)), b)))
        t_ = lax.sub(lax.add(lax.neg(lam), lax.mul(k, log_lam)), lax.lgamma(lax.add(k, _c(k, 1))))
        accept1 = lax.bitwise_and(lax.ge(us, _c(us, 0.07)), lax.le(v, v_r))
        reject = lax.bitwise_or(
            lax.lt(k, _c(k, 0)), lax.bitwise_and(lax.lt(us, _c(us, 0.013)), lax.gt(v, us))
        )
        accept = lax.bitwise_or(accept1, lax.bitwise_and(lax.bitwise_not(reject), lax.le(s, t_)))
        k_out = lax.select(accept, k, k_out)
        return lax.add(i, _c(i, 1)), k_out, lax.bitwise_or(accepted, accept), key

    def cond(state):
        i, _, accepted, _ = state
        return lax.bitwise_and(_any_true(lax.bitwise_not(accepted)), lax.lt(i, max_iters))

    init = (_c(max_iters, 0), lax.full(shape, -1, f32), lax.full(shape, False, np.bool_), key)
    return lax.convert_element_type(lax.while_loop(cond, body, init)[1], dtype)


_STIRLING_TAIL = (
    0.0810614667953272,
    0.0413406959554092,
    0.0276779256849983,
    0.02079067210376509,
    0.0166446911898211,
    0.0138761288230707,
    0.0118967099458917,
    0.0104112652619720,
    0.00925546218271273,
    0.00833056343336287,
)


def _stirling_tail(k):
    """``log(k!) - (Stirling's approximation)``: tabulated for ``k <= 9``, else its series."""
    from fungrad import numpy as fnp

    table = Array(np.array(_STIRLING_TAIL, k.dtype))
    small = lax.le(k, _c(k, 9))
    k = lax.clamp(_c(k, 0), k, _c(k, 9))
    kp1 = lax.add(k, _c(k, 1))
    kp1sq = lax.mul(kp1, kp1)
    approx = lax.div(
        lax.sub(
            _c(k, 1.0 / 12),
            lax.div(lax.sub(_c(k, 1.0 / 360), lax.div(_c(k, 1.0 / 1260), kp1sq)), kp1sq),
        ),
        kp1,
    )
    index = lax.convert_element_type(lax.floor(k), np.int32)
    return lax.select(small, fnp.take(table, index), approx)


def _binomial_inversion(key, count, prob, shape, max_iters):
    """Count geometric waiting times until they pass ``count`` (for ``count * p <= 10``)."""
    log1mp = lax.log1p(lax.neg(prob))

    def body(state):
        i, num_geom, geom_sum, key = state
        subkey, key = _split_keys(key, 2)
        num_geom = lax.select(lax.le(geom_sum, count), lax.add(num_geom, _c(num_geom, 1)), num_geom)
        u = _uniform(subkey, shape, prob.dtype, 0.0, 1.0)
        geom = lax.ceil(lax.div(lax.log(u), log1mp))
        return lax.add(i, _c(i, 1)), num_geom, lax.add(geom_sum, geom), key

    def cond(state):
        i, _, geom_sum, _ = state
        return lax.bitwise_and(_any_true(lax.le(geom_sum, count)), lax.lt(i, max_iters))

    zeros = lax.full(shape, 0, prob.dtype)
    k = lax.while_loop(cond, body, (_c(max_iters, 0), zeros, zeros, key))[1]
    return lax.sub(k, _c(k, 1))


def _btrs(key, count, prob, shape, max_iters):
    """Hormann's transformed rejection with squeeze (BTRS) for ``count * p > 10``."""

    def c(v):
        return _c(prob, v)

    one = c(1)
    q = lax.sub(one, prob)
    stddev = lax.sqrt(lax.mul(lax.mul(count, prob), q))
    b = lax.add(c(1.15), lax.mul(c(2.53), stddev))
    a = lax.add(lax.add(c(-0.0873), lax.mul(c(0.0248), b)), lax.mul(c(0.01), prob))
    cc = lax.add(lax.mul(count, prob), c(0.5))
    v_r = lax.sub(c(0.92), lax.div(c(4.2), b))
    r = lax.div(prob, q)
    alpha = lax.mul(lax.add(c(2.83), lax.div(c(5.1), b)), stddev)
    m = lax.floor(lax.mul(lax.add(count, one), prob))
    # the parts of the bound that do not depend on k
    bound_m = lax.mul(
        lax.add(m, c(0.5)),
        lax.log(lax.div(lax.add(m, one), lax.mul(r, lax.add(lax.sub(count, m), one)))),
    )

    def body(state):
        i, k_out, accepted, key = state
        key, key0, key1 = _split_keys(key, 3)
        u = _uniform(key0, shape, prob.dtype, 0.0, 1.0)
        v = _uniform(key1, shape, prob.dtype, 0.0, 1.0)
        u = lax.sub(u, c(0.5))
        us = lax.sub(c(0.5), lax.abs(u))
        accept1 = lax.bitwise_and(lax.ge(us, c(0.07)), lax.le(v, v_r))
        k = lax.floor(lax.add(lax.mul(lax.add(lax.div(lax.mul(c(2), a), us), b), u), cc))
        reject = lax.bitwise_or(lax.lt(k, c(0)), lax.gt(k, count))
        v = lax.log(lax.div(lax.mul(v, alpha), lax.add(lax.div(a, lax.mul(us, us)), b)))
        n_k1 = lax.add(lax.sub(count, k), one)
        ub = lax.add(
            lax.add(
                lax.add(
                    bound_m,
                    lax.mul(
                        lax.add(count, one), lax.log(lax.div(lax.add(lax.sub(count, m), one), n_k1))
                    ),
                ),
                lax.mul(lax.add(k, c(0.5)), lax.log(lax.div(lax.mul(r, n_k1), lax.add(k, one)))),
            ),
            _stirling_tail(m),
        )
        ub = lax.sub(
            lax.sub(lax.add(ub, _stirling_tail(lax.sub(count, m))), _stirling_tail(k)),
            _stirling_tail(lax.sub(count, k)),
        )
        accept = lax.bitwise_or(accept1, lax.bitwise_and(lax.bitwise_not(reject), lax.le(v, ub)))
        k_out = lax.select(accept, k, k_out)
        return lax.add(i, _c(i, 1)), k_out, lax.bitwise_or(accepted, accept), key

    def cond(state):
        i, _, accepted, _ = state
        return lax.bitwise_and(_any_true(lax.bitwise_not(accepted)), lax.lt(i, max_iters))

    init = (
        _c(max_iters, 0),
        lax.full(shape, -1, prob.dtype),
        lax.full(shape, False, np.bool_),
        key,
    )
    return lax.while_loop(cond, body, init)[1]


def binomial(key, n, p, shape=None, dtype=None) -> Array:
    """Binomial(n, p) counts as floats (float32 by default), as TensorFlow and JAX sample them:
    inversion (summing geometric waiting times) when ``n * min(p, 1-p) <= 10``, otherwise
    BTRS rejection. Non-integer ``n`` is floored; NaN or negative ``n``, and NaN or negative
    ``p``, give NaN; infinite ``n`` gives inf."""
    from fungrad import numpy as fnp
    from fungrad.numpy import util

    key = _check_prng_key("binomial", key)
    util.check_arraylike("binomial", n, p)
    dtype = _float_dtype("binomial", dtype)
    (p,) = util.promote_dtypes_inexact(p)
    count = lax.convert_element_type(util.asarray(n), p.dtype)
    shape = _sampler_shape("binomial", shape, count, p)
    count, p = _bcast_full(count, shape), _bcast_full(p, shape)

    def c(v):
        return _c(p, v)

    p_lt_half = lax.lt(p, c(0.5))
    q = lax.select(p_lt_half, p, lax.sub(c(1.0), p))
    count_nan_or_neg = lax.bitwise_or(lax.ne(count, count), lax.lt(count, c(0.0)))
    count_inf = lax.eq(lax.abs(count), c(np.inf))
    q_is_nan = lax.ne(q, q)
    q_lt_0 = lax.lt(q, c(0.0))
    q = lax.select(lax.bitwise_or(q_is_nan, q_lt_0), lax.full_like(q, 0.01), q)
    use_inversion = lax.bitwise_or(count_nan_or_neg, lax.le(lax.mul(count, q), c(10.0)))
    count = lax.floor(count)
    count_inv = lax.select(use_inversion, count, lax.full_like(count, 0.0))
    count_btrs = lax.select(use_inversion, lax.full_like(count, 1e4), count)
    q_btrs = lax.select(use_inversion, lax.full_like(q, 0.5), q)
    max_iters = Array(np.array(dtypes.finfo(dtype).max, p.dtype))
    samples = lax.select(
        use_inversion,
        _binomial_inversion(key, count_inv, q, shape, max_iters),
        _btrs(key, count_btrs, q_btrs, shape, max_iters),
    )
    samples = lax.convert_element_type(samples, dtype)
    invalid = lax.bitwise_or(lax.bitwise_or(q_lt_0, q_is_nan), count_nan_or_neg)
    samples = fnp.where(invalid, np.nan, samples)
    samples = fnp.where(lax.bitwise_and(count_inf, lax.bitwise_not(invalid)), np.inf, samples)
    keep = lax.bitwise_or(
        lax.bitwise_or(p_lt_half, count_nan_or_neg), lax.bitwise_or(q_is_nan, count_inf)
    )
    return lax.select(keep, samples, lax.sub(lax.convert_element_type(count, dtype), samples))


def multinomial(key, n, p, *, shape=None, dtype=None, unroll=1) -> Array:
    """Multinomial counts (floats) of ``n`` trials over the outcomes on ``p``'s last axis, one
    binomial per outcome on the remaining trials (keys ``split(key, p.shape[-1])``).

    NB: as in JAX 0.10's code (its docstring says otherwise), ``shape`` is the full result
    shape including the outcome axis, and defaults to ``p.shape``.
    """
    from fungrad import numpy as fnp
    from fungrad.numpy import util

    key = _check_prng_key("multinomial", key)
    util.check_arraylike("multinomial", n, p)
    n, p = util.promote_dtypes_inexact(n, p)
    if p.ndim < 1:
        raise ValueError(
            f"multinomial: p must have at least one dimension (the outcomes), got "
            f"shape {tuple(p.shape)}"
        )
    shape = tuple(p.shape) if shape is None else _canonical_shape("multinomial", shape)
    if not shape:
        raise ValueError("multinomial: shape must include the outcome axis, got ()")
    n = util.broadcast_to_shape(n, shape[:-1], "multinomial")
    p = util.broadcast_to_shape(p, shape, "multinomial")
    p = fnp.moveaxis(p, -1, 0)
    remaining = lax.cumsum(p, 0, reverse=True)
    ratios = lax.div(p, fnp.where(lax.eq(remaining, _c(remaining, 0)), 1, remaining))
    keys = _split(key, p.shape[0])

    def step(remainder, ratio_key):
        ratio, k = ratio_key
        count = binomial(k, remainder, fnp.clip(ratio, 0, 1), dtype=remainder.dtype)
        return lax.sub(remainder, count), count

    _, counts = lax.scan(step, n, (ratios, keys), unroll=unroll)
    out = fnp.moveaxis(counts, 0, -1)
    # JAX casts the counts to any dtype asked for (int32 counts included).
    return out if dtype is None else lax.convert_element_type(out, _dtype("multinomial", dtype))
