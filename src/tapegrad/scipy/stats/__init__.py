"""``tapegrad.scipy.stats``: probability distributions as modules of functions, like
``jax.scipy.stats``: ``stats.norm.logpdf(x, loc=0, scale=1)``.

Modules: :mod:`~tapegrad.scipy.stats.norm`, :mod:`~tapegrad.scipy.stats.t`,
:mod:`~tapegrad.scipy.stats.gamma`, :mod:`~tapegrad.scipy.stats.beta`,
:mod:`~tapegrad.scipy.stats.chi2` (``pdf logpdf cdf logcdf sf logsf``; ``norm`` also has
``ppf isf``), :mod:`~tapegrad.scipy.stats.poisson` (``pmf logpmf cdf logcdf sf logsf``),
:mod:`~tapegrad.scipy.stats.dirichlet` (``pdf logpdf``) and
:mod:`~tapegrad.scipy.stats.multivariate_normal` (``pdf logpdf``).

Each function takes SciPy's arguments (``loc`` and ``scale`` where SciPy has them), gives
SciPy's values (NaN for invalid parameters, ``-inf`` log-density outside the support) and
is a composite of :mod:`tapegrad.scipy.special` functions, so it differentiates to every
order in the value and in every continuous parameter (the shape parameters of the gamma,
beta and t CDFs included) and batches under ``vmap``.
"""

from tapegrad.scipy.stats import beta, chi2, dirichlet, gamma, multivariate_normal, norm, poisson, t

__all__ = ["norm", "t", "gamma", "beta", "chi2", "poisson", "dirichlet", "multivariate_normal"]
