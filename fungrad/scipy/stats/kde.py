"""Gaussian kernel density estimation (``jax.scipy.stats.gaussian_kde``).

The estimate is a weighted mixture of normals ``N(x_i, covariance)`` centred on the data
points, with ``covariance`` the (weighted) data covariance times ``factor**2`` (Scott's or
Silverman's rule, a scalar or a callable). Densities are evaluated in whitened coordinates:
with ``L`` the Cholesky factor of ``covariance``, ``log k(x, x_i) = -|L^-1 (x - x_i)|**2 / 2
- log det(2 pi covariance) / 2``, and ``logpdf`` reduces with ``logsumexp`` so far-away
points keep a finite log-density. The object is a pytree (its arrays are leaves), so it can
be passed through ``jit``/``vmap``/``grad``.
"""

from __future__ import annotations

import numpy as np

import fungrad.numpy as fnp
from fungrad import random, tree_util
from fungrad.numpy import util
from fungrad.scipy import special
from fungrad.scipy.stats.multivariate_normal import _forward_substitution

__all__ = ["gaussian_kde"]

_FIELDS = ("neff", "dataset", "weights", "covariance", "inv_cov")


def _log_norm_const(chol, d):
    """``-log det(2 pi L L^T) / 2`` from the Cholesky factor ``L``."""
    return -fnp.sum(fnp.log(fnp.diagonal(chol))) - 0.5 * d * np.log(2.0 * np.pi)


@tree_util.register_pytree_node_class
class gaussian_kde:  # noqa: N801  (JAX's and SciPy's name)
    """A Gaussian KDE of ``dataset`` (shape ``(d, n)``: ``n`` points in ``d`` dimensions;
    1-D data is one dimension).

    Args:
        dataset: the data points, ``(d, n)`` or ``(n,)``.
        bw_method: ``"scott"`` (default, ``neff**(-1/(d+4))``), ``"silverman"``
            (``(neff (d+2) / 4)**(-1/(d+4))``), a scalar factor, or a callable taking the
            kde and returning the factor.
        weights: optional non-negative weights ``(n,)`` (normalised to sum 1).

    Attributes: ``dataset``, ``weights``, ``neff`` (effective sample size
    ``1 / sum(weights**2)``), ``covariance``, ``inv_cov``, ``d``, ``n``.
    """

    __slots__ = _FIELDS

    def __init__(self, dataset, bw_method=None, weights=None):
        util.check_arraylike("gaussian_kde", dataset)
        dataset = fnp.atleast_2d(dataset)
        if dataset.ndim != 2:
            raise ValueError(
                f"gaussian_kde: dataset must be 1-D (n,) or 2-D (d, n), got shape {dataset.shape}"
            )
        if np.issubdtype(dataset.dtype, np.complexfloating):
            raise TypeError("gaussian_kde: complex data is not supported; pass real arrays")
        if dataset.size <= 1:
            raise ValueError(
                f"gaussian_kde: dataset must have more than one element, got shape {dataset.shape}"
            )
        d, n = dataset.shape
        if weights is None:
            [dataset] = util.promote_dtypes_inexact(dataset, fun_name="gaussian_kde")
            weights = fnp.full((n,), 1.0 / n, dtype=dataset.dtype)
        else:
            util.check_arraylike("gaussian_kde", weights, names=["weights"])
            dataset, weights = util.promote_dtypes_inexact(
                dataset, weights, fun_name="gaussian_kde"
            )
            weights = fnp.atleast_1d(weights)
            if weights.shape != (n,):
                raise ValueError(
                    f"gaussian_kde: weights must have shape ({n},) (one per data "
                    f"point), got {weights.shape}"
                )
            weights = weights / fnp.sum(weights)
        self._set("dataset", dataset)
        self._set("weights", weights)
        neff = self._set("neff", 1.0 / fnp.sum(weights**2))
        if bw_method is None or (isinstance(bw_method, str) and bw_method == "scott"):
            factor = neff ** (-1.0 / (d + 4))
        elif isinstance(bw_method, str) and bw_method == "silverman":
            factor = (neff * (d + 2) / 4.0) ** (-1.0 / (d + 4))
        elif isinstance(bw_method, str):
            raise ValueError(
                f"gaussian_kde: bw_method must be 'scott', 'silverman', a scalar "
                f"or a callable, got {bw_method!r}"
            )
        elif callable(bw_method):
            factor = bw_method(self)
        elif fnp.ndim(bw_method) == 0:
            factor = bw_method
        else:
            raise ValueError(
                f"gaussian_kde: bw_method must be 'scott', 'silverman', a scalar "
                f"or a callable, got an array of shape {fnp.shape(bw_method)}"
            )
        data_cov = fnp.atleast_2d(fnp.cov(dataset, rowvar=True, bias=False, aweights=weights))
        self._set("covariance", data_cov * factor**2)
        self._set("inv_cov", fnp.linalg.inv(data_cov) / factor**2)

    def _set(self, name, value):
        object.__setattr__(self, name, value)
        return value

    def __setattr__(self, name, value):
        raise AttributeError(f"gaussian_kde is immutable; cannot set {name!r}")

    def tree_flatten(self):
        return tuple(getattr(self, f) for f in _FIELDS), None

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        del aux_data
        kde = object.__new__(cls)
        for name, value in zip(_FIELDS, children):
            object.__setattr__(kde, name, value)
        return kde

    @property
    def d(self) -> int:
        """Number of dimensions."""
        return self.dataset.shape[0]

    @property
    def n(self) -> int:
        """Number of data points."""
        return self.dataset.shape[1]

    def _points(self, fun_name, points):
        util.check_arraylike(fun_name, points)
        points = fnp.atleast_2d(points)
        if np.issubdtype(points.dtype, np.complexfloating):
            raise TypeError(f"gaussian_kde.{fun_name}: complex points are not supported")
        d, m = points.shape
        if d != self.d:
            if d == 1 and m == self.d:  # one point given as a flat vector
                return points.reshape(self.d, 1)
            raise ValueError(
                f"gaussian_kde.{fun_name}: points have dimension {d}, the "
                f"dataset has dimension {self.d} (pass shape ({self.d}, m))"
            )
        return points

    def _log_kernels(self, points):
        """``(m, n)``: ``log N(points_j; dataset_i, covariance)``."""
        chol = fnp.linalg.cholesky(self.covariance)
        diff = points.T[:, None, :] - self.dataset.T[None, :, :]  # (m, n, d)
        z = _forward_substitution(chol, diff)
        return _log_norm_const(chol, self.d) - 0.5 * fnp.sum(z * z, axis=-1)

    def logpdf(self, x):
        """Log of the estimated density at the points ``x`` (``(d, m)``); ``(m,)``."""
        log_k = self._log_kernels(self._points("logpdf", x))
        return special.logsumexp(log_k, axis=1, b=self.weights[None, :])

    def evaluate(self, points):
        """The estimated density at ``points`` (``(d, m)``); ``(m,)``."""
        log_k = self._log_kernels(self._points("evaluate", points))
        return fnp.sum(self.weights[None, :] * fnp.exp(log_k), axis=1)

    __call__ = evaluate
    pdf = evaluate

    def _convolved_mass(self, cov, mean_points, data, weights):
        """``sum_i w_i N(mean_j; data_i, self.covariance + cov)`` for each mean point."""
        chol = fnp.linalg.cholesky(self.covariance + cov)
        diff = mean_points.T[:, None, :] - data.T[None, :, :]
        z = _forward_substitution(chol, diff)
        log_k = _log_norm_const(chol, self.d) - 0.5 * fnp.sum(z * z, axis=-1)
        return fnp.sum(weights[None, :] * fnp.exp(log_k), axis=1)

    def integrate_gaussian(self, mean, cov):
        """``integral kde(x) N(x; mean, cov) dx`` (mean ``(d,)``, cov ``(d, d)``)."""
        mean = fnp.atleast_1d(fnp.squeeze(mean))
        cov = fnp.atleast_2d(cov)
        if mean.shape != (self.d,) or cov.shape != (self.d, self.d):
            raise ValueError(
                f"gaussian_kde.integrate_gaussian: mean must have shape "
                f"({self.d},) and cov ({self.d}, {self.d}), got {mean.shape} and "
                f"{cov.shape}"
            )
        return self._convolved_mass(cov, mean[:, None], self.dataset, self.weights)[0]

    def integrate_box_1d(self, low, high):
        """``integral_low^high kde(x) dx`` for a one-dimensional kde (scalar limits)."""
        if self.d != 1:
            raise ValueError(
                f"gaussian_kde.integrate_box_1d: the kde must be 1-D, it has d = {self.d}"
            )
        if fnp.ndim(low) != 0 or fnp.ndim(high) != 0:
            raise ValueError("gaussian_kde.integrate_box_1d: low and high must be scalars")
        sigma = fnp.sqrt(self.covariance[0, 0])
        data = self.dataset[0]
        mass = special.ndtr((high - data) / sigma) - special.ndtr((low - data) / sigma)
        return fnp.sum(self.weights * mass)

    def integrate_kde(self, other):
        """``integral self(x) other(x) dx`` for another kde of the same dimension."""
        if other.d != self.d:
            raise ValueError(
                f"gaussian_kde.integrate_kde: dimensions differ ({self.d} and {other.d})"
            )
        per_point = self._convolved_mass(
            other.covariance, other.dataset, self.dataset, self.weights
        )
        return fnp.sum(per_point * other.weights)

    def resample(self, key, shape=()):
        """Draw ``shape`` samples: a data point chosen by weight plus ``N(0, covariance)``
        noise; ``(d,) + shape``."""
        shape = random._canonical_shape("gaussian_kde.resample", shape)
        ind_key, eps_key = random.split(random._check_prng_key("gaussian_kde.resample", key))
        ind = random.choice(ind_key, self.n, shape=shape, p=self.weights)
        eps = random.multivariate_normal(
            eps_key,
            fnp.zeros(self.d, self.covariance.dtype),
            self.covariance,
            shape=shape,
            dtype=self.dataset.dtype,
        )
        return self.dataset[:, ind] + fnp.moveaxis(eps, -1, 0)
