"""fungrad.numpy statistics: cov, corrcoef, bincount, digitize, interp (jax.numpy semantics).

All are compositions of other fungrad.numpy functions and lax. Differences from numpy follow
JAX: ``bincount`` counts negative values in bin 0 and drops values past ``length``;
``cov`` takes the absolute value of negative weights and does not clamp a negative
normalisation ``N - ddof`` to 0.
"""

from __future__ import annotations

import operator

import numpy as np

from fungrad import core, dtypes, lax
from fungrad.numpy import creation, linear, manipulation, reductions, sorting, ufuncs, util

__all__ = ["bincount", "corrcoef", "cov", "digitize", "interp"]


def _check_inexact_dtype(fun_name: str, dtype):
    if dtype is None:
        return None
    dt = dtypes.canonicalize_dtype(dtype)
    if not dtypes.is_inexact(dt):
        raise ValueError(f"{fun_name}: dtype must be a floating or complex dtype, got {dt.name}")
    return dt


def _sample_weights(fun_name: str, name: str, w, nobs: int):
    """Validate a 1-d weight vector of length ``nobs`` (numpy's RuntimeErrors and messages)."""
    util.check_arraylike(fun_name, w, names=[name])
    w = util.asarray(w)
    if w.ndim > 1:
        raise RuntimeError(f"{fun_name}: cannot handle multidimensional {name} (shape {w.shape})")
    if w.ndim == 0 or w.shape[0] != nobs:
        raise RuntimeError(
            f"{fun_name}: incompatible numbers of samples ({nobs}) and {name} (shape {w.shape})"
        )
    return w


def cov(
    m,
    y=None,
    rowvar: bool = True,
    bias: bool = False,
    ddof=None,
    fweights=None,
    aweights=None,
    dtype=None,
):
    """Covariance matrix of the variables in ``m`` (and ``y``), as numpy.cov.

    Args:
        m: 1-d or 2-d array; each row is a variable and each column an observation (the
            other way round with ``rowvar=False``).
        y: optional extra variables, stacked after ``m``'s.
        rowvar: whether rows (True) or columns (False) are the variables.
        bias: normalise by ``N`` instead of ``N - 1`` (ignored when ``ddof`` is given).
        ddof: delta degrees of freedom; overrides ``bias``.
        fweights: integer frequency weights, one per observation.
        aweights: observation ("analytic") weights, one per observation.
        dtype: optional floating dtype to compute in.

    Returns:
        A ``(n_vars, n_vars)`` array, or a 0-d array for a single variable.

    Example:
        >>> cov(fnp.array([[0., 1., 2.], [2., 1., 0.]]))   # [[1., -1.], [-1., 1.]]
    """
    util.check_arraylike("cov", m)
    if y is not None:
        util.check_arraylike("cov", y, names=["y"])
        m, y = util.promote_dtypes_inexact(m, y)
        if y.ndim > 2:
            raise ValueError(f"cov: y has more than 2 dimensions (shape {y.shape})")
    else:
        [m] = util.promote_dtypes_inexact(m)
    if m.ndim > 2:
        raise ValueError(f"cov: m has more than 2 dimensions (shape {m.shape})")
    dtype = _check_inexact_dtype("cov", dtype)
    X = manipulation.atleast_2d(m)
    if not rowvar and m.ndim != 1:
        X = X.T
    if X.shape[0] == 0:
        return creation.zeros((0, 0), X.dtype)
    if y is not None:
        y2 = manipulation.atleast_2d(y)
        if not rowvar and y2.shape[0] != 1:
            y2 = y2.T
        if y2.shape[1] != X.shape[1]:
            raise ValueError(
                f"cov: m and y must have the same number of observations, got "
                f"{X.shape[1]} and {y2.shape[1]} (shapes {m.shape} and {y.shape}, "
                f"rowvar={rowvar})"
            )
        X = manipulation.concatenate((X, y2), axis=0)
    if dtype is not None:
        X = lax.convert_element_type(X, dtype)
    nvars, nobs = X.shape
    if nobs == 0:  # numpy warns and returns NaN; so does JAX, without the warning
        return creation.full(() if nvars == 1 else (nvars, nvars), np.nan, X.dtype)
    if ddof is None:
        ddof = 0 if bias else 1
    try:
        ddof = operator.index(ddof)
    except TypeError:
        raise TypeError(f"cov: ddof must be an int, got {ddof!r}") from None

    w = None
    if fweights is not None:
        fweights = _sample_weights("cov", "fweights", fweights, nobs)
        if not dtypes.is_int(fweights.dtype):
            raise TypeError(f"cov: fweights must be integers, got dtype {fweights.dtype.name}")
        w = ufuncs.abs(lax.convert_element_type(fweights, X.dtype))
    if aweights is not None:
        aweights = _sample_weights("cov", "aweights", aweights, nobs)
        aweights = ufuncs.abs(lax.convert_element_type(aweights, X.dtype))
        w = aweights if w is None else w * aweights

    if w is None:
        avg = reductions.mean(X, axis=1, keepdims=True)
        f = nobs - ddof
    else:
        w_sum = reductions.sum(w)
        avg = reductions.sum(X * w, axis=1, keepdims=True) / w_sum
        if ddof == 0:
            f = w_sum
        elif aweights is None:
            f = w_sum - ddof
        else:
            f = w_sum - ddof * reductions.sum(w * aweights) / w_sum
    X = X - avg
    X_T = (X if w is None else X * w).T
    if dtypes.kind(X_T.dtype) == "c":
        X_T = lax.conj(X_T)
    return manipulation.squeeze(ufuncs.true_divide(linear.dot(X, X_T), f))


def corrcoef(x, y=None, rowvar: bool = True, dtype=None):
    """Pearson correlation coefficients ``cov / (std_i std_j)``, clipped to ``[-1, 1]``.

    A variable with zero variance gives NaN in its row and column (numpy warns; fungrad, like
    JAX, does not).
    """
    util.check_arraylike("corrcoef", x)
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return c / c  # NaN for nan/inf/0 variance, 1 otherwise
    d = linear.diagonal(c)
    stddev = ufuncs.sqrt(lax.real(d) if dtypes.kind(d.dtype) == "c" else d)
    c = c / manipulation.expand_dims(stddev, 1) / manipulation.expand_dims(stddev, 0)
    if dtypes.kind(c.dtype) == "c":  # numpy clips the real and imaginary parts
        return lax.complex(ufuncs.clip(lax.real(c), -1, 1), ufuncs.clip(lax.imag(c), -1, 1))
    return ufuncs.clip(c, -1, 1)


def _concrete_max(x):
    """The maximum of a concrete integer array, for sizing ``bincount``'s output."""
    if isinstance(x, core.Tracer):
        val = x.to_concrete_value()
        if val is None:
            raise core.ConcretizationTypeError(
                "bincount: the output length depends on the values of x, which are traced "
                f"({x.aval.str_short()}); pass a static length= argument"
            )
    else:
        val = np.asarray(x)
    return int(val.max())


def bincount(x, weights=None, minlength=0, *, length=None):
    """Count occurrences (or sum ``weights``) of each non-negative integer value in ``x``.

    Output length is ``length`` if given (values ``>= length`` are dropped), else
    ``max(minlength, x.max() + 1)``, which needs ``x`` concrete (pass ``length=`` under
    jit). NB: negative values count towards bin 0, as in JAX (numpy raises).

    Example:
        >>> bincount(fnp.array([0, 1, 1, 3]))   # [1, 2, 0, 1] (int32)
    """
    util.check_arraylike("bincount", x)
    x = util.asarray(x)
    if dtypes.is_bool(x.dtype):
        x = lax.convert_element_type(x, dtypes.default_int_dtype())
    if not dtypes.is_int(x.dtype):
        raise TypeError(f"bincount: x must have an integer dtype, got {x.dtype.name}")
    if x.ndim != 1:
        raise ValueError(f"bincount: x must be 1-dimensional, got shape {x.shape}")
    try:
        minlength = operator.index(minlength)
    except TypeError:
        raise TypeError(f"bincount: minlength must be an int, got {minlength!r}") from None
    if minlength < 0:
        raise ValueError(f"bincount: minlength must be non-negative, got {minlength}")
    if length is None:
        length = max(minlength, _concrete_max(x) + 1 if x.size else 0)
    else:
        try:
            length = operator.index(length)
        except TypeError:
            raise TypeError(f"bincount: length must be a concrete int, got {length!r}") from None
        if length < 0:
            raise ValueError(f"bincount: length must be non-negative, got {length}")
    if weights is None:
        weights = creation.ones(x.shape, dtypes.default_int_dtype())
    else:
        util.check_arraylike("bincount", weights, names=["weights"])
        weights = util.asarray(weights)
        if weights.shape != x.shape:
            raise ValueError(
                f"bincount: weights must have the shape of x, got x {x.shape} and "
                f"weights {weights.shape}"
            )
    return creation.zeros(length, weights.dtype).at[ufuncs.maximum(x, 0)].add(weights, mode="drop")


def digitize(x, bins, right: bool = False, *, method=None):
    """Indices of the bins (monotonic 1-d ``bins``) each value of ``x`` falls into.

    For increasing bins, ``i`` with ``bins[i-1] <= x < bins[i]`` (``<`` and ``<=`` swapped
    with ``right=True``); decreasing bins are handled as numpy does. ``method`` is passed to
    ``searchsorted``.
    """
    util.check_arraylike("digitize", x, bins)
    x, bins = util.asarray(x), util.asarray(bins)
    if bins.ndim != 1:
        raise ValueError(f"digitize: bins must be 1-dimensional, got shape {bins.shape}")
    if bins.shape[0] == 0:
        return creation.zeros(x.shape, dtypes.int32)
    side = "left" if right else "right"
    kwds = {} if method is None else {"method": method}
    increasing = bins[-1] >= bins[0]
    return sorting.where(
        increasing,
        sorting.searchsorted(bins, x, side=side, **kwds),
        bins.shape[0] - sorting.searchsorted(bins[::-1], x, side=side, **kwds),
    )


def interp(x, xp, fp, left=None, right=None, period=None):
    """One-dimensional linear interpolation of ``(xp, fp)`` (``xp`` increasing) at ``x``.

    ``left`` / ``right`` are the values below ``xp[0]`` / above ``xp[-1]`` (default
    ``fp[0]`` / ``fp[-1]``), or the string ``"extrapolate"`` to extend the end segments.
    With ``period``, ``xp`` is treated as periodic (``left`` / ``right`` are ignored).

    Example:
        >>> interp(fnp.array([1.5]), fnp.array([1., 2.]), fnp.array([10., 20.]))   # [15.]
    """
    util.check_arraylike("interp", x, xp, fp)
    xp, fp = util.asarray(xp), util.asarray(fp)
    if xp.shape != fp.shape or xp.ndim != 1:
        raise ValueError(
            f"interp: xp and fp must be 1-dimensional arrays of equal size, got "
            f"shapes {xp.shape} and {fp.shape}"
        )
    if xp.shape[0] == 0:
        raise ValueError("interp: xp and fp are empty; at least one sample point is needed")
    extrapolate = {}
    for name, v in (("left", left), ("right", right)):
        if isinstance(v, str):
            if v != "extrapolate":
                raise ValueError(
                    f"interp: the only valid string value of {name} is 'extrapolate', got {v!r}"
                )
            extrapolate[name] = True
        else:
            if v is not None:
                util.check_arraylike("interp", v, names=[name])
            extrapolate[name] = False
    x, xp = util.promote_dtypes_inexact(x, xp)
    [fp] = util.promote_dtypes_inexact(fp)
    if period is not None:
        util.check_arraylike("interp", period, names=["period"])
        if np.ndim(period) != 0:
            raise ValueError(f"interp: period must be a scalar, got shape {np.shape(period)}")
        period = ufuncs.abs(period)
        x = ufuncs.remainder(x, period)
        xp = ufuncs.remainder(xp, period)
        xp, fp = lax.sort_key_val(xp, fp)
        xp = manipulation.concatenate([xp[-1:] - period, xp, xp[:1] + period])
        fp = manipulation.concatenate([fp[-1:], fp, fp[:1]])
    if xp.shape[0] == 1:  # one sample point: a zero-width segment, so every x gets fp[0]
        xp, fp = manipulation.concatenate([xp, xp]), manipulation.concatenate([fp, fp])
    i = ufuncs.clip(sorting.searchsorted(xp, x, side="right"), 1, xp.shape[0] - 1)
    df = fp[i] - fp[i - 1]
    dx = xp[i] - xp[i - 1]
    delta = x - xp[i - 1]
    epsilon = float(np.spacing(np.finfo(xp.dtype).eps))
    dx0 = ufuncs.abs(dx) <= epsilon  # equal sample points: take the left value (no 0/0)
    f = sorting.where(dx0, fp[i - 1], fp[i - 1] + (delta / sorting.where(dx0, 1, dx)) * df)
    if period is None:
        if not extrapolate["left"]:
            f = sorting.where(x < xp[0], fp[0] if left is None else left, f)
        if not extrapolate["right"]:
            f = sorting.where(x > xp[-1], fp[-1] if right is None else right, f)
    return f
