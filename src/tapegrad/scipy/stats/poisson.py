"""``tapegrad.scipy.stats.poisson``: the Poisson distribution with mean ``mu``.

Functions of ``(k, mu, loc=0)`` as ``scipy.stats.poisson``'s methods, written with
:mod:`tapegrad.scipy.special` (``xlogy``, ``gammaln``, ``gammainc``, ``gammaincc``), so
they differentiate to every order in ``mu`` and batch under ``vmap``. ``k`` is discrete: the
functions are piecewise constant in it (``pmf`` is 0 off the integers) and get no derivative
in ``k`` or ``loc`` (zero), as for any piecewise-constant argument. Arguments broadcast;
``mu < 0`` gives NaN, as SciPy.
"""

from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad.core.tensor import Tensor
from tapegrad.ops import StopGradient
from tapegrad.scipy import special
from tapegrad.scipy.stats._util import composed, floats, safe, where_valid

__all__ = ["logpmf", "pmf", "cdf", "logcdf", "sf", "logsf"]


def _setup(k, mu, loc):
    k, mu, loc = floats(k, mu, loc)
    kk = k - loc
    if not isinstance(kk, Tensor):  # a Python k and loc: the Tensor is mu
        kk = tnp.full_like(mu, kk)
    kk = StopGradient.apply(kk)
    ok = (mu >= 0) if isinstance(mu, Tensor) else bool(mu >= 0)
    return kk, safe(ok, mu, 1.0), ok


def logpmf(k, mu, loc=0) -> Tensor:
    """Log of the probability mass ``mu**k e**-mu / k!`` at integers ``k - loc >= 0``
    (``-inf`` elsewhere, also off the integers).

    Args:
        k: Values (any real numbers; the mass sits on the integers).
        mu: Mean, ``>= 0``.
        loc: Shift of the support.

    Returns:
        Tensor of the broadcast shape (float64 for integer ``k`` and a Python ``mu``).

    Derivative in ``mu``: ``k / mu - 1`` (of ``xlogy(k, mu) - mu - gammaln(k + 1)``).
    """
    kk, mu, ok = _setup(k, mu, loc)
    inside = (kk >= 0) & (tnp.floor(kk) == kk)
    ks = safe(inside, kk, 0.0)
    out = special.xlogy(ks, mu) - mu - special.gammaln(ks + 1.0)
    return where_valid(ok, tnp.where(inside, out, -float("inf")))


def pmf(k, mu, loc=0) -> Tensor:
    """The probability mass ``exp(logpmf)``; arguments as :func:`logpmf`."""
    return tnp.exp(logpmf(k, mu, loc))


def _tail(fn, below, k, mu, loc):
    """``fn(floor(k - loc) + 1, mu)`` (``gammaincc`` gives the CDF, ``gammainc`` the survival
    function), ``below`` for ``k - loc < 0``, NaN for ``mu < 0``."""
    kk, mu, ok = _setup(k, mu, loc)
    inside = kk >= 0
    n = safe(inside, tnp.floor(kk), 0.0) + 1.0
    return where_valid(ok, tnp.where(inside, fn(n, mu), below))


def cdf(k, mu, loc=0) -> Tensor:
    """The CDF ``P(K <= k) = gammaincc(floor(k - loc) + 1, mu)`` (0 for ``k - loc < 0``);
    arguments as :func:`logpmf`.

    Derivative in ``mu``: minus the gamma density, ``-pmf(floor(k - loc), mu)``.
    """
    return _tail(special.gammaincc, 0.0, k, mu, loc)


def sf(k, mu, loc=0) -> Tensor:
    """The survival function ``P(K > k) = gammainc(floor(k - loc) + 1, mu)`` (1 for
    ``k - loc < 0``); arguments as :func:`logpmf`."""
    return _tail(special.gammainc, 1.0, k, mu, loc)


logcdf = composed(tnp.log, cdf, "logcdf", "``log(cdf)``; arguments as :func:`logpmf`.")
logsf = composed(tnp.log, sf, "logsf", "``log(sf)``; arguments as :func:`logpmf`.")
