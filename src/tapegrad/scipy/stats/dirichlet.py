"""``tapegrad.scipy.stats.dirichlet``: the Dirichlet distribution with concentrations
``alpha`` on the probability simplex.

``logpdf(x, alpha)`` and ``pdf(x, alpha)`` as ``scipy.stats.dirichlet``'s (SciPy has no
CDF for it), written with :mod:`tapegrad.scipy.special` (``gammaln``, ``xlogy``), so they
differentiate to every order in ``x`` and ``alpha`` and batch under ``vmap``.

As in SciPy the components run along the **first** axis of ``x``: ``x`` has shape ``(K,)``
or ``(K, N)`` (N points), or ``K - 1`` components (the last is then ``1 - sum``).
"""

from __future__ import annotations

import numpy as np

import tapegrad.numpy as tnp
from tapegrad.core.tensor import Tensor
from tapegrad.ops._registry import tensor_arg
from tapegrad.scipy import special
from tapegrad.scipy.stats._util import checked

__all__ = ["logpdf", "pdf"]


def _args(x, alpha):
    x, alpha = tensor_arg(x), tensor_arg(alpha)
    if alpha.dtype.kind in "iub":
        alpha = alpha.astype(np.float64)
    if x.dtype.kind in "iub":
        x = x.astype(np.float64)
    if alpha.ndim != 1:
        raise ValueError(
            f"dirichlet: alpha must be one-dimensional, got shape {alpha.shape}"
        )
    k = alpha.shape[0]
    if x.ndim == 0 or x.ndim > 2 or x.shape[0] not in (k, k - 1):
        raise ValueError(
            f"dirichlet: x must have shape (K,) or (K, N) with K = {k} components (or K - 1, "
            f"the last being 1 - sum) along its first axis, as SciPy; got shape {x.shape} for "
            f"alpha of shape {alpha.shape}"
        )
    if x.shape[0] == k - 1:
        last = 1.0 - tnp.sum(x, axis=0, keepdims=True)
        x = tnp.concatenate([x, last], axis=0)
    a = alpha.reshape((k,) + (1,) * (x.ndim - 1))
    x = checked(
        "dirichlet", x,
        (alpha, lambda v: v > 0, "all parameters alpha must be greater than 0"),
        (x, lambda v: v >= 0, "each entry of x must be greater than or equal to 0"),
        (x, lambda v: v <= 1, "each entry of x must be smaller than or equal to 1"),
        (tnp.logical_and(x == 0, a < 1), lambda v: ~v,
         "each entry of x must be greater than 0 where its alpha is below 1"),
        (tnp.abs(tnp.sum(x, axis=0) - 1.0), lambda v: v <= 1e-9,
         "x must lie on the simplex: its entries must sum to 1 (within 1e-9) along the "
         "first axis"),
    )
    return x, alpha, a


def logpdf(x, alpha) -> Tensor:
    """Log of the Dirichlet density
    ``sum_i (alpha_i - 1) log(x_i) - sum_i gammaln(alpha_i) + gammaln(sum_i alpha_i)``.

    Args:
        x: Points on the simplex, components along the first axis: shape ``(K,)``,
            ``(K, N)``, or ``K - 1`` components (SciPy's convention).
        alpha: Concentrations, shape ``(K,)``, all ``> 0``.

    Returns:
        Tensor of shape ``()`` for one point, ``(N,)`` for ``N`` (SciPy squeezes size-1
        results to a scalar too).

    Raises:
        ValueError: (SciPy's checks, also under ``grad``/``vmap``/``jit``) if ``alpha`` is not
            1-D or has an entry ``<= 0``, ``x`` has the wrong shape, an entry outside
            ``[0, 1]``, a 0 where ``alpha < 1``, or does not sum to 1 (within ``1e-9``).

    Derivatives: of the formula (``digamma`` for ``alpha``; ``(alpha_i - 1) / x_i`` for
    ``x``, taken freely in every component: the constraint ``sum x = 1`` is not projected).
    """
    x, alpha, a = _args(x, alpha)
    lnb = tnp.sum(special.gammaln(alpha)) - special.gammaln(tnp.sum(alpha))
    out = tnp.sum(special.xlogy(a - 1.0, x), axis=0) - lnb
    return out.reshape(()) if out.size == 1 else out


def pdf(x, alpha) -> Tensor:
    """The Dirichlet density ``exp(logpdf(x, alpha))``; arguments as :func:`logpdf`."""
    return tnp.exp(logpdf(x, alpha))
