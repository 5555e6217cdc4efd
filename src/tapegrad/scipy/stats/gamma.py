"""``tapegrad.scipy.stats.gamma``: the gamma distribution with shape ``a``.

Functions of ``(x, a, loc=0, scale=1)`` as ``scipy.stats.gamma``'s methods, written with
:mod:`tapegrad.scipy.special` (``gammaln``, ``xlogy``, ``gammainc``, ``gammaincc``), so they
differentiate to every order in ``x``, ``a``, ``loc`` and ``scale`` (the ``a``-derivative of
the CDF goes through the shape derivative of ``gammainc``) and batch under ``vmap``.
Arguments broadcast; ``a <= 0`` or ``scale <= 0`` gives NaN, as SciPy.
"""

from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad.core.tensor import Tensor
from tapegrad.scipy import special
from tapegrad.scipy.stats._util import all_positive, composed, floats, log, safe, where_valid

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]


def _setup(x, a, loc, scale):
    x, a, loc, scale = floats(x, a, loc, scale)
    ok = all_positive(a, scale)
    return ok, safe(ok, a, 1.0), (x - loc) / scale, scale


def logpdf(x, a, loc=0, scale=1) -> Tensor:
    """Log of the density ``z**(a-1) e**-z / (Gamma(a) scale)`` for ``z = (x - loc) / scale
    >= 0`` (``-inf`` below the support).

    Args:
        x: Values.
        a: Shape, ``> 0``.
        loc: Location.
        scale: Scale, ``> 0``. All broadcast together.

    Returns:
        Tensor of the broadcast shape.

    Derivatives: of the formula ``xlogy(a - 1, z) - z - gammaln(a) - log(scale)``.
    """
    ok, a, z, scale = _setup(x, a, loc, scale)
    inside = z >= 0
    zs = safe(inside, z, 1.0)
    out = special.xlogy(a - 1.0, zs) - zs - special.gammaln(a) - log(scale)
    return where_valid(ok, tnp.where(inside, out, -float("inf")))


pdf = composed(tnp.exp, logpdf, "pdf", "The density ``exp(logpdf)``; arguments as :func:`logpdf`.")


def cdf(x, a, loc=0, scale=1) -> Tensor:
    """The CDF ``gammainc(a, max(z, 0))``; arguments as :func:`logpdf`.

    Derivatives: the density in ``x``; in ``a`` the shape derivative of
    :func:`tapegrad.scipy.special.gammainc`.
    """
    ok, a, z, _ = _setup(x, a, loc, scale)
    return where_valid(ok, special.gammainc(a, tnp.maximum(z, 0.0)))


def sf(x, a, loc=0, scale=1) -> Tensor:
    """The survival function ``gammaincc(a, max(z, 0))`` (accurate in the right tail);
    arguments as :func:`logpdf`."""
    ok, a, z, _ = _setup(x, a, loc, scale)
    return where_valid(ok, special.gammaincc(a, tnp.maximum(z, 0.0)))


logcdf = composed(tnp.log, cdf, "logcdf", "``log(cdf)``; arguments as :func:`logpdf`.")
logsf = composed(tnp.log, sf, "logsf", "``log(sf)``; arguments as :func:`logpdf`.")
