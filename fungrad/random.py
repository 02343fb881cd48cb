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
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import numpy as np

from fungrad import core, dtypes, lax
from fungrad.array import Array

__all__ = [
    "PRNGKey", "key", "key_data", "wrap_key_data", "clone", "split", "fold_in", "bits",
    "uniform", "normal", "bernoulli", "randint", "choice", "permutation", "categorical",
    "truncated_normal", "multivariate_normal", "gumbel", "exponential", "laplace", "logistic",
    "cauchy",
]

_KEY_HELP = ("a PRNG key is a uint32 array of shape (2,), as returned by "
             "fungrad.random.PRNGKey(seed), key(seed), split or fold_in")


# -- keys ----------------------------------------------------------------------------------------

def _is_array(x) -> bool:
    return type(x) is Array or isinstance(x, (core.Tracer, np.ndarray))


def _check_key_data(name: str, key, allow_batched: bool = False):
    """``key`` as an Array/tracer after checking it is a uint32 key (batch of keys if allowed)."""
    if not _is_array(key):
        raise TypeError(f"{name}: expected a PRNG key, got a value of type "
                        f"{type(key).__name__}; {_KEY_HELP}")
    key = lax.utils.operand(key, name)
    ok = key.dtype == np.uint32 and key.ndim >= 1 and key.shape[-1] == 2
    if ok and (allow_batched or key.ndim == 1):
        return key
    what = core.get_aval(key).str_short()
    hint = (" (a batch of keys: use fungrad.vmap to map over it)" if ok else "")
    raise TypeError(f"{name}: expected a single PRNG key, got an array {what}{hint}; "
                    f"{_KEY_HELP}")


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
        seed = np.int64(seed)
    if isinstance(seed, np.integer):
        seed = np.asarray(seed)
    if not _is_array(seed) or seed.dtype.kind not in "iu":
        what = (core.get_aval(seed).str_short() if _is_array(seed) or isinstance(seed, float)
                else type(seed).__name__)
        raise TypeError(f"{name}: the seed must be an integer scalar, got {what}")
    if seed.ndim:
        raise TypeError(f"{name}: the seed must be a scalar, got an array of shape {seed.shape} "
                        "(use fungrad.vmap to make a batch of keys)")
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
        raise ValueError(f"{name}: only the 'threefry2x32' PRNG implementation is available, "
                         f"got impl={impl!r}")


def key_data(keys) -> Array:
    """The uint32 data of a key or batch of keys (NB: keys are already their data here)."""
    return _check_key_data("key_data", keys, allow_batched=True)


def wrap_key_data(key_bits_array, *, impl=None) -> Array:
    """Check that ``key_bits_array`` is uint32 key data of shape ``(..., 2)`` and return it
    (NB: fungrad keys are raw uint32 arrays, so there is nothing to wrap)."""
    _check_impl("wrap_key_data", impl)
    return _check_key_data("wrap_key_data", key_bits_array, allow_batched=True)


def clone(key) -> Array:
    """Return ``key`` (JAX's ``clone`` matters only for its stateful key types)."""
    return _check_prng_key("clone", key)


def _canonical_shape(name: str, shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        shape = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"{name}: shape must be a sequence of integers, got {shape!r}") from None
    if any(d < 0 for d in shape):
        raise ValueError(f"{name}: shape must be non-negative, got {shape}")
    return shape


def _counters(name: str, shape: tuple[int, ...]):
    """The low word of the 64-bit row-major iota over ``shape`` (JAX's ``iota_2x32_shape``;
    the high word is 0 for any array that fits in memory)."""
    size = math.prod(shape)
    if size > 2 ** 32:
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
        if not 0 <= data < 2 ** 32:
            raise OverflowError(f"fold_in: Python integer {data} is out of bounds for uint32")
        data = _u32(data)
    elif not _is_array(data) and not isinstance(data, np.generic):
        raise TypeError(f"fold_in: data must be an integer scalar, got {type(data).__name__}")
    data = lax.utils.operand(data, "fold_in")
    if data.ndim:
        raise TypeError(f"fold_in: data must be a scalar, got an array of shape {data.shape} "
                        "(use fungrad.vmap to fold in a batch)")
    data = lax.convert_element_type(data, np.uint32)
    k1, k2 = _key_words(key)
    y1, y2 = lax.threefry2x32(k1, k2, _u32(0), data)
    return lax.concatenate([lax.broadcast(y1, (1,)), lax.broadcast(y2, (1,))], 0)


_UINT_DTYPES = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: np.dtype(np.uint32),
                64: np.dtype(np.uint64)}


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
    dtype = dtypes.default_uint_dtype() if dtype is None else dtypes.canonicalize_dtype(dtype)
    if dtype.kind != "u":
        raise ValueError(f"bits: dtype must be an unsigned integer dtype, got {dtype}")
    return _random_bits(key, dtype.itemsize * 8, _canonical_shape("bits", shape))


# -- shared helpers for samplers -----------------------------------------------------------------

def _float_dtype(name: str, dtype) -> np.dtype:
    dt = dtypes.canonicalize_dtype(float if dtype is None else dtype)
    if dt.kind != "f":
        raise ValueError(f"{name}: dtype must be a float dtype, got {dt}")
    return dt


def _check_shape(name: str, shape, *param_shapes) -> None:
    from fungrad.numpy import util
    if param_shapes:
        out = util.broadcast_shapes(shape, *param_shapes, fun_name=name)
        if out != tuple(shape):
            raise ValueError(f"{name}: parameter shapes {', '.join(map(str, param_shapes))} "
                             f"must broadcast to the shape argument {tuple(shape)}, but "
                             f"broadcasting gives {out}")


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
    scaled = lax.add(lax.mul(floats, _bcast(lax.sub(maxval, minval), shape)),
                     _bcast(minval, shape))
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
    ``mean + L @ z`` with ``L = cholesky(cov)`` and ``z`` standard normal.

    ``shape`` is the batch shape (the result is ``shape + (n,)``); it defaults to the broadcast
    of ``mean.shape[:-1]`` and ``cov.shape[:-2]``. NB: only ``method="cholesky"`` is available
    (JAX also has ``"svd"`` and ``"eigh"``).
    """
    from fungrad import numpy as fnp
    from fungrad.numpy import util
    key = _check_prng_key("multivariate_normal", key)
    util.check_arraylike("multivariate_normal", mean, cov)
    mean, cov = util.promote_dtypes_inexact(mean, cov)
    if method != "cholesky":
        raise ValueError(f"multivariate_normal: only method='cholesky' is available, got "
                         f"{method!r}")
    dtype = mean.dtype if dtype is None else _float_dtype("multivariate_normal", dtype)
    if mean.ndim < 1 or cov.ndim < 2:
        raise ValueError(f"multivariate_normal: mean must have ndim >= 1 and cov ndim >= 2, "
                         f"got shapes {mean.shape} and {cov.shape}")
    n = mean.shape[-1]
    if tuple(cov.shape[-2:]) != (n, n):
        raise ValueError(f"multivariate_normal: cov must have shape (..., {n}, {n}) to match "
                         f"mean of shape {mean.shape}, got {cov.shape}")
    if shape is None:
        shape = util.broadcast_shapes(mean.shape[:-1], cov.shape[:-2],
                                      fun_name="multivariate_normal")
    else:
        shape = _canonical_shape("multivariate_normal", shape)
        _check_shape("multivariate_normal", shape, mean.shape[:-1], cov.shape[:-2])
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
    x = _uniform(key, _canonical_shape("logistic", shape), dtype,
                 float(dtypes.finfo(dtype).tiny), 1.0)
    return lax.sub(lax.log(x), lax.log1p(lax.neg(x)))


def cauchy(key, shape=(), dtype=None) -> Array:
    """Standard Cauchy floats: ``tan(pi * (u - 1/2))``."""
    key = _check_prng_key("cauchy", key)
    dtype = _float_dtype("cauchy", dtype)
    u = _uniform(key, _canonical_shape("cauchy", shape), dtype,
                 float(dtypes.finfo(dtype).eps), 1.0)
    half, pi = Array(np.array(0.5, dtype)), Array(np.array(np.pi, dtype))
    return lax.tan(lax.mul(pi, lax.sub(u, half)))


_GUMBEL_MODES = ("low", "high")


def gumbel(key, shape=(), dtype=None, mode=None) -> Array:
    """Standard Gumbel floats: ``-log(-log(u))``.

    ``mode="high"`` combines two uniforms so the largest samples reach ~32 instead of ~16
    (float32). NB: JAX's third mode, ``"highest"``, is not available.
    """
    key = _check_prng_key("gumbel", key)
    dtype = _float_dtype("gumbel", dtype)
    shape = _canonical_shape("gumbel", shape)
    mode = "low" if mode is None else mode
    if mode not in _GUMBEL_MODES:
        raise ValueError(f"gumbel: mode must be one of {_GUMBEL_MODES}, got {mode!r}")
    return _gumbel(key, shape, dtype, mode)


def _gumbel(key, shape, dtype, mode):
    info = dtypes.finfo(dtype)
    if mode == "high":
        u = _uniform(key, (2, *shape), dtype, 0.0, 1.0)
        high = lax.index_in_dim(u, 0, keepdims=False)
        low = lax.index_in_dim(u, 1, keepdims=False)
        c = Array(np.array(2.0 ** -info.nmant, dtype))
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
    if p.dtype.kind != "f":
        raise TypeError(f"bernoulli: the probability p must have a floating dtype, got "
                        f"{p.dtype}")
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
    from fungrad.numpy import util
    key = _check_prng_key("randint", key)
    dtype = dtypes.canonicalize_dtype(int if dtype is None else dtype)
    if dtype.kind not in "iu":
        raise TypeError(f"randint: dtype must be an integer dtype, got {dtype}")
    shape = _canonical_shape("randint", shape)
    util.check_arraylike("randint", minval, maxval)
    info = np.iinfo(dtype)
    sample_dtype = dtype
    if info.bits < 32:
        # Sample in 32 bits to avoid biased results, then convert.
        sample_dtype = np.dtype(np.int32)
        i32 = np.dtype(np.int32)
        minval = _clip_const(lax.convert_element_type(util.asarray(minval), i32),
                             int(info.min), int(info.max))
        maxval = _clip_const(lax.convert_element_type(util.asarray(maxval), i32),
                             int(info.min), int(info.max) + 1)
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
    if minval.dtype.kind not in "iu":
        minval = lax.convert_element_type(minval, int_dtype)
    if maxval.dtype.kind not in "iu":
        maxval = lax.convert_element_type(maxval, int_dtype)
    # maxval beyond dtype's range (e.g. randint(key, shape, 0, 256, uint8)) widens the span.
    dtype_max = _convert_and_clip_integer(Array(np.array(np.iinfo(dtype).max, dtype)),
                                          maxval.dtype)
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
    span = lax.select_n(lax.bitwise_and(maxval_out_of_range, lax.gt(maxval, minval)),
                        span, lax.add(span, one))
    # (hi * 2**nbits + lo) mod span, with 2**nbits mod span computed without overflow.
    multiplier = lax.rem(Array(np.array(2 ** (nbits // 2), udtype)), span)
    multiplier = lax.rem(lax.mul(multiplier, multiplier), span)
    offset = lax.add(lax.mul(lax.rem(higher_bits, span), multiplier),
                     lax.rem(lower_bits, span))
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
        if x.dtype.kind not in "iu":
            raise TypeError(f"permutation: x must be an integer or an array of at least one "
                            f"dimension, got {core.get_aval(x).str_short()}")
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
        raise ValueError(f"choice: cannot take a larger sample (size {n_draws}) than the "
                         f"population (size {n_inputs}) when replace=False")
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
            raise ValueError(f"choice: p must be None or a 1-D vector of the size of "
                             f"a.shape[axis]; p has shape {p_arr.shape} and a.shape[axis] is "
                             f"{n_inputs}")
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
    out_shape = shape if arr.ndim == 0 else (
        tuple(arr.shape[:axis]) + shape + tuple(arr.shape[axis + 1:]))
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
    prefix = shape[:len(shape) - len(batch_shape)]
    if replace:
        neg_axis = axis - ndim
        logits_shape = list(shape[len(shape) - len(batch_shape):])
        logits_shape.insert(axis, logits.shape[axis])
        g = gumbel(key, (*prefix, *logits_shape), logits.dtype, mode=mode)
        return fnp.argmax(fnp.add(g, lax.expand_dims(logits, tuple(range(len(prefix))))),
                          axis=neg_axis)
    logits = fnp.add(logits, gumbel(key, tuple(logits.shape), logits.dtype, mode=mode))
    k = math.prod(prefix)
    if k > logits.shape[axis]:
        raise ValueError(f"categorical: the number of samples without replacement ({k}) "
                         f"cannot exceed the number of categories ({logits.shape[axis]})")
    perm = tuple(i for i in range(ndim) if i != axis) + (axis,)  # move axis to the end
    _, indices = lax.top_k(lax.transpose(logits, perm), k)
    dimensions = (indices.ndim - 1, *range(indices.ndim - 1))
    return lax.reshape(indices, shape, dimensions)
