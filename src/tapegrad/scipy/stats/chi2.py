"""``tapegrad.scipy.stats.chi2``: the chi-squared distribution with ``df`` degrees of
freedom, the gamma distribution with shape ``df / 2`` and scale ``2 scale``.

Functions of ``(x, df, loc=0, scale=1)`` as ``scipy.stats.chi2``'s methods, through
:mod:`tapegrad.scipy.stats.gamma`: differentiable to every order in every argument,
batched under ``vmap``; ``df <= 0`` or ``scale <= 0`` gives NaN.
"""

from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad.core.tensor import Tensor
from tapegrad.numpy._docs import sections
from tapegrad.scipy.stats import gamma as _gamma
from tapegrad.scipy.stats._util import DF_ARGS, composed, floats

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]


def _args(x, df, loc, scale):
    x, df, loc, scale = floats(x, df, loc, scale)
    return x, 0.5 * df, loc, 2.0 * scale


@sections(DF_ARGS)
def logpdf(x, df, loc=0, scale=1) -> Tensor:
    """Log of the density ``z**(df/2-1) e**(-z/2) / (2**(df/2) Gamma(df/2) scale)``,
    ``z = (x - loc) / scale >= 0``."""
    return _gamma.logpdf(*_args(x, df, loc, scale))


pdf = composed(tnp.exp, logpdf, "pdf", "The density; arguments as :func:`logpdf`.")


def cdf(x, df, loc=0, scale=1) -> Tensor:
    """The CDF ``gammainc(df/2, z/2)``; arguments as :func:`logpdf`."""
    return _gamma.cdf(*_args(x, df, loc, scale))


logcdf = composed(tnp.log, cdf, "logcdf", "``log(cdf)``; arguments as :func:`logpdf`.")


def sf(x, df, loc=0, scale=1) -> Tensor:
    """The survival function ``gammaincc(df/2, z/2)``; arguments as :func:`logpdf`."""
    return _gamma.sf(*_args(x, df, loc, scale))


logsf = composed(tnp.log, sf, "logsf", "``log(sf)``; arguments as :func:`logpdf`.")
