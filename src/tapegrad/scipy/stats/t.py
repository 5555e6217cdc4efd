"""``tapegrad.scipy.stats.t``: Student's t distribution with ``df`` degrees of freedom.

Functions of ``(x, df, loc=0, scale=1)`` as ``scipy.stats.t``'s methods, written with
:mod:`tapegrad.scipy.special` (``gammaln``, ``betainc``), so they differentiate to every
order in ``x``, ``df``, ``loc`` and ``scale`` (the ``df``-derivative of the CDF goes through
the shape-parameter derivatives of ``betainc``) and batch under ``vmap``. Arguments
broadcast; ``df <= 0`` or ``scale <= 0`` gives NaN, as SciPy.
"""

from __future__ import annotations

import math

import tapegrad.numpy as tnp
from tapegrad.core.tensor import Tensor
from tapegrad.numpy._docs import sections
from tapegrad.scipy import special
from tapegrad.scipy.stats._util import (
    DF_ARGS,
    all_positive,
    composed,
    floats,
    log,
    safe,
    where_valid,
)

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]

_LOG_PI = math.log(math.pi)


@sections(DF_ARGS, before="Derivatives:")
def logpdf(x, df, loc=0, scale=1) -> Tensor:
    """Log of the density ``Gamma((df+1)/2) / (Gamma(df/2) sqrt(df pi) scale)
    (1 + z**2/df)**(-(df+1)/2)``, ``z = (x - loc) / scale``.

    Derivatives: of the formula (``digamma`` for ``df``).
    """
    x, df, loc, scale = floats(x, df, loc, scale)
    ok = all_positive(df, scale)
    dfs = safe(ok, df, 1.0)
    z = (x - loc) / scale
    half = 0.5 * (dfs + 1.0)
    out = (special.gammaln(half) - special.gammaln(0.5 * dfs) - 0.5 * (log(dfs) + _LOG_PI)
           - log(scale) - half * tnp.log1p(z * z / dfs))
    return where_valid(ok, out)


pdf = composed(tnp.exp, logpdf, "pdf", "The density ``exp(logpdf)``; arguments as :func:`logpdf`.")


def _tail(z, df):
    """``P(T > |z|)`` for the standard t: ``I_{df/(df+z**2)}(df/2, 1/2) / 2``, or the
    complementary ``(1 - I_{z**2/(df+z**2)}(1/2, df/2)) / 2`` when ``z**2 < df`` (no
    cancellation near ``z = 0``)."""
    z2 = z * z
    small = z2 < df
    w = z2 + df
    far = 0.5 * special.betainc(0.5 * df, 0.5, safe(~small, df / w, 0.5))
    near = 0.5 - 0.5 * special.betainc(0.5, 0.5 * df, safe(small, z2 / w, 0.5))
    return tnp.where(small, near, far)


def _cdf_sf(x, df, loc, scale):
    """``(ok, z, tail, center, odd)``: ``odd = cdf - 1/2`` as its Taylor polynomial
    ``pdf(0) (z - (df + 1) / (6 df) z**3)``, used for ``|z| < 1e-4`` (``center``; error
    ``O(z**5)``, below double precision) where the ``z**2``-form of ``tail`` has ``0 * inf``
    derivatives (at ``z = 0``, or where ``z**2`` underflows)."""
    x, df, loc, scale = floats(x, df, loc, scale)
    ok = all_positive(df, scale)
    dfs = safe(ok, df, 1.0)
    z = (x - loc) / scale
    center = tnp.abs(z) < 1e-4
    tail = _tail(safe(~center, z, 1.0), dfs)
    half = 0.5 * (dfs + 1.0)
    pdf0 = tnp.exp(special.gammaln(half) - special.gammaln(0.5 * dfs)
                   - 0.5 * (tnp.log(dfs) + _LOG_PI))
    odd = pdf0 * (z - (dfs + 1.0) / (6.0 * dfs) * (z * z * z))
    return ok, z, tail, center, odd


def cdf(x, df, loc=0, scale=1) -> Tensor:
    """The CDF, ``P(T <= z)``: ``tail`` for ``z < 0`` and ``1 - tail`` otherwise, with
    ``tail = I_{df/(df+z**2)}(df/2, 1/2) / 2`` (Abramowitz and Stegun 26.7.1) computed by
    :func:`tapegrad.scipy.special.betainc`; arguments as :func:`logpdf`.

    Derivatives: through ``betainc``, in ``df`` by its shape-parameter derivatives. For
    ``|z| < 1e-4``, value and derivatives are those of the Taylor polynomial ``1/2 + pdf(0)
    (z - (df + 1) z**3 / (6 df))`` (exact to double precision; the ``z**2`` form has
    ``0 * inf`` derivatives at ``z = 0``).
    """
    ok, z, tail, center, odd = _cdf_sf(x, df, loc, scale)
    return where_valid(ok, tnp.where(center, 0.5 + odd,
                                     tnp.where(z < 0, tail, 1.0 - tail)))


def sf(x, df, loc=0, scale=1) -> Tensor:
    """The survival function ``1 - cdf``, accurate in the right tail; arguments and
    derivatives as :func:`cdf`."""
    ok, z, tail, center, odd = _cdf_sf(x, df, loc, scale)
    return where_valid(ok, tnp.where(center, 0.5 - odd,
                                     tnp.where(z > 0, tail, 1.0 - tail)))


logcdf = composed(tnp.log, cdf, "logcdf", "``log(cdf)`` (as SciPy); arguments as :func:`logpdf`.")
logsf = composed(tnp.log, sf, "logsf", "``log(sf)`` (as SciPy); arguments as :func:`logpdf`.")
