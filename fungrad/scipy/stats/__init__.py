"""``fungrad.scipy.stats``: probability distributions with jax.scipy.stats's names.

One module per distribution (``norm``, ``gamma``, ``poisson``, ...), each with the functions
JAX has for it (``logpdf``/``pdf``/``cdf``/``logcdf``/``sf``/``logsf``/``ppf``/``isf`` for
continuous distributions, ``logpmf``/``pmf`` for discrete ones) and the same signatures and
defaults (``loc=0, scale=1``). All are written on fungrad.numpy, so they differentiate,
vectorise and compile. Points outside the support give ``-inf`` log-densities; invalid
parameters give NaN where JAX gives NaN. Also :func:`mode`, :func:`rankdata`, :func:`sem`
and :class:`gaussian_kde`.
"""

from fungrad.scipy.stats import (  # noqa: F401
    bernoulli,
    beta,
    betabinom,
    binom,
    cauchy,
    chi2,
    dirichlet,
    expon,
    gamma,
    gennorm,
    geom,
    gumbel_l,
    gumbel_r,
    laplace,
    logistic,
    multinomial,
    multivariate_normal,
    nbinom,
    norm,
    pareto,
    poisson,
    t,
    truncnorm,
    uniform,
    vonmises,
    wrapcauchy,
)
from fungrad.scipy.stats._core import mode, rankdata, sem  # noqa: F401
from fungrad.scipy.stats.kde import gaussian_kde  # noqa: F401
