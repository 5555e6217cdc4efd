"""``tapegrad.scipy.stats.beta``: the beta distribution with shapes ``a`` and ``b``.

Functions of ``(x, a, b, loc=0, scale=1)`` as ``scipy.stats.beta``'s methods, written with
:mod:`tapegrad.scipy.special` (``xlogy``, ``xlog1py``, ``betaln``, ``betainc``), so they
differentiate to every order in ``x``, ``a``, ``b``, ``loc`` and ``scale`` (the shape
derivatives of the CDF go through those of ``betainc``) and batch under ``vmap``. Arguments
broadcast; ``a <= 0``, ``b <= 0`` or ``scale <= 0`` gives NaN, as SciPy.
"""

from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad.core.tensor import Tensor
from tapegrad.scipy import special
from tapegrad.scipy.stats._util import all_positive, composed, floats, log, safe, where_valid

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]


def _setup(x, a, b, loc, scale):
    x, a, b, loc, scale = floats(x, a, b, loc, scale)
    ok = all_positive(a, b, scale)
    return ok, safe(ok, a, 1.0), safe(ok, b, 1.0), (x - loc) / scale, scale


def logpdf(x, a, b, loc=0, scale=1) -> Tensor:
    """Log of the density ``z**(a-1) (1-z)**(b-1) / (B(a, b) scale)`` for
    ``z = (x - loc) / scale`` in ``[0, 1]`` (``-inf`` outside).

    Args:
        x: Values.
        a, b: Shapes, ``> 0``.
        loc: Location.
        scale: Scale, ``> 0``. All broadcast together.

    Returns:
        Tensor of the broadcast shape.

    Derivatives: of ``xlogy(a - 1, z) + xlog1py(b - 1, -z) - betaln(a, b) - log(scale)``.
    """
    ok, a, b, z, scale = _setup(x, a, b, loc, scale)
    inside = (z >= 0) & (z <= 1)
    zs = safe(inside, z, 0.5)
    out = (special.xlogy(a - 1.0, zs) + special.xlog1py(b - 1.0, -zs) - special.betaln(a, b)
           - log(scale))
    return where_valid(ok, tnp.where(inside, out, -float("inf")))


pdf = composed(tnp.exp, logpdf, "pdf", "The density ``exp(logpdf)``; arguments as :func:`logpdf`.")


def cdf(x, a, b, loc=0, scale=1) -> Tensor:
    """The CDF ``betainc(a, b, clip(z, 0, 1))``; arguments as :func:`logpdf`.

    Derivatives: the density in ``x``; in ``a`` and ``b`` the shape derivatives of
    :func:`tapegrad.scipy.special.betainc`.
    """
    ok, a, b, z, _ = _setup(x, a, b, loc, scale)
    return where_valid(ok, special.betainc(a, b, tnp.clip(z, 0.0, 1.0)))


def sf(x, a, b, loc=0, scale=1) -> Tensor:
    """The survival function ``betainc(b, a, 1 - clip(z, 0, 1))`` (accurate in the right
    tail); arguments as :func:`logpdf`."""
    ok, a, b, z, _ = _setup(x, a, b, loc, scale)
    return where_valid(ok, special.betainc(b, a, 1.0 - tnp.clip(z, 0.0, 1.0)))


logcdf = composed(tnp.log, cdf, "logcdf", "``log(cdf)``; arguments as :func:`logpdf`.")
logsf = composed(tnp.log, sf, "logsf", "``log(sf)``; arguments as :func:`logpdf`.")
