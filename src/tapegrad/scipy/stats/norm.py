"""``tapegrad.scipy.stats.norm``: the normal distribution ``N(loc, scale**2)``.

Functions of ``(x, loc=0, scale=1)`` as ``scipy.stats.norm``'s methods, written with
:mod:`tapegrad.scipy.special` (``ndtr``, ``log_ndtr``, ``ndtri``), so they differentiate to
every order in ``x``, ``loc`` and ``scale`` and batch under ``vmap``. Arguments broadcast;
float32 stays float32, integers become float64; ``scale <= 0`` gives NaN, as SciPy.
"""

from __future__ import annotations

import tapegrad.numpy as tnp
from tapegrad.core.tensor import Tensor
from tapegrad.scipy import special
from tapegrad.scipy.stats._util import LOG_SQRT_2PI, floats, log, positive, where_valid

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]


def _z(x, loc, scale):
    x, loc, scale = floats(x, loc, scale)
    return (x - loc) / scale, scale


def logpdf(x, loc=0, scale=1) -> Tensor:
    """Log of the normal density ``-(x - loc)**2 / (2 scale**2) - log(scale) - log(2 pi)/2``.

    Args:
        x: Values; Tensor, array or number.
        loc: Mean (broadcasts with ``x``).
        scale: Standard deviation, ``> 0`` (NaN otherwise).

    Returns:
        Tensor of the broadcast shape.

    Derivatives (of the formula): ``-z / scale`` in ``x``, ``z / scale`` in ``loc`` and
    ``(z**2 - 1) / scale`` in ``scale``, with ``z = (x - loc) / scale``.

    Example:
        >>> import tapegrad as tg
        >>> from tapegrad.scipy.stats import norm
        >>> tg.grad(lambda mu: norm.logpdf(2.0, mu, 1.0))(tg.Tensor(0.5))
        Tensor(1.5, dtype=float32)
    """
    z, scale = _z(x, loc, scale)
    return where_valid(positive(scale), -0.5 * (z * z) - log(scale) - LOG_SQRT_2PI)


def pdf(x, loc=0, scale=1) -> Tensor:
    """The normal density, ``exp(logpdf(x, loc, scale))``; arguments as :func:`logpdf`."""
    return tnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1) -> Tensor:
    """The normal CDF ``ndtr((x - loc) / scale)``; arguments as :func:`logpdf`.

    Derivatives: the density in ``x`` (and its negative in ``loc``), ``-z pdf`` in ``scale``
    (through :func:`tapegrad.scipy.special.ndtr`).
    """
    z, scale = _z(x, loc, scale)
    return where_valid(positive(scale), special.ndtr(z))


def logcdf(x, loc=0, scale=1) -> Tensor:
    """Log of the normal CDF, ``log_ndtr((x - loc) / scale)``, accurate far in the left
    tail; arguments as :func:`logpdf`."""
    z, scale = _z(x, loc, scale)
    return where_valid(positive(scale), special.log_ndtr(z))


def sf(x, loc=0, scale=1) -> Tensor:
    """The survival function ``1 - cdf``, computed as ``ndtr(-z)`` (accurate in the right
    tail); arguments as :func:`logpdf`."""
    z, scale = _z(x, loc, scale)
    return where_valid(positive(scale), special.ndtr(-z))


def logsf(x, loc=0, scale=1) -> Tensor:
    """Log of the survival function, ``log_ndtr(-z)``; arguments as :func:`logpdf`."""
    z, scale = _z(x, loc, scale)
    return where_valid(positive(scale), special.log_ndtr(-z))


def ppf(q, loc=0, scale=1) -> Tensor:
    """The quantile function (inverse CDF) ``loc + scale ndtri(q)``.

    Args:
        q: Probabilities in ``[0, 1]`` (``-inf`` and ``inf`` at the ends, NaN outside).
        loc, scale: As :func:`logpdf`.

    Returns:
        Tensor of the broadcast shape.

    Derivative in ``q``: ``1 / pdf(ppf(q, loc, scale), loc, scale)`` (through
    :func:`tapegrad.scipy.special.ndtri`; infinite at 0 and 1).
    """
    q, loc, scale = floats(q, loc, scale)
    return where_valid(positive(scale), loc + scale * special.ndtri(q))


def isf(q, loc=0, scale=1) -> Tensor:
    """The inverse survival function ``loc - scale ndtri(q)`` (``ppf(1 - q)``, accurate for
    small ``q``); arguments as :func:`ppf`."""
    q, loc, scale = floats(q, loc, scale)
    return where_valid(positive(scale), loc - scale * special.ndtri(q))
