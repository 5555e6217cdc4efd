"""``tapegrad.scipy.stats.multivariate_normal``: the multivariate normal distribution.

``logpdf(x, mean=None, cov=1, allow_singular=False)``, ``pdf`` and ``entropy(mean, cov)`` as
``scipy.stats.multivariate_normal``'s, with SciPy's argument conventions (dimension inferred
from ``mean``, else from ``cov``; ``cov`` a scalar, a diagonal vector or a matrix; the last
axis of ``x`` holds the components, a 1-D ``x`` is one point, or ``N`` points when the
dimension is 1; results squeezed as SciPy does). Written with
:func:`tapegrad.scipy.linalg.cholesky` and :func:`tapegrad.scipy.linalg.solve_triangular`,
so it differentiates to every order in ``x``, ``mean`` and ``cov`` and batches under
``vmap``.
"""

from __future__ import annotations

import numpy as np

import tapegrad.numpy as tnp
from tapegrad.core.tensor import Tensor
from tapegrad.scipy import linalg
from tapegrad.scipy.stats._util import LOG_2PI, checked, floats

__all__ = ["logpdf", "pdf", "entropy"]


def _parameters(x, mean, cov):
    """SciPy's ``_process_parameters``: ``(x, dim, mean (dim,), cov)`` with ``cov`` a 0-d,
    1-D or 2-D Tensor (not expanded), all of one floating dtype."""
    cov = 1.0 if cov is None else cov
    if mean is None:
        x, cov = floats(x, cov)
        dim = 1 if cov.ndim < 2 else cov.shape[0]
        mean = tnp.zeros((dim,), dtype=cov.dtype)
    else:
        x, mean, cov = floats(x, mean, cov)
        dim = mean.size
    if dim == 1:
        if cov.size != 1:
            raise ValueError(
                f"multivariate_normal: dimension 1 (from mean of shape {mean.shape}) needs a "
                f"single variance, got cov of shape {cov.shape}"
            )
        mean = mean.reshape((1,))
        cov = cov.reshape((1,))
    if mean.ndim != 1 or mean.shape[0] != dim:
        raise ValueError(f"multivariate_normal: mean must be a vector of length {dim}, got "
                         f"shape {mean.shape}")
    if cov.ndim == 1 and cov.shape[0] != dim:
        raise ValueError(
            f"multivariate_normal: a 1-D cov holds the variances and needs length {dim}, got "
            f"shape {cov.shape}"
        )
    if cov.ndim == 2 and cov.shape != (dim, dim):
        raise ValueError(
            f"multivariate_normal: cov must be a ({dim}, {dim}) matrix for mean of length "
            f"{dim}, got shape {cov.shape}"
        )
    if cov.ndim > 2:
        raise ValueError(f"multivariate_normal: cov must be at most two-dimensional, got "
                         f"shape {cov.shape}")
    return x, dim, mean, cov


def _quantiles(x, dim):
    """SciPy's ``_process_quantiles``: ``x`` as ``(..., dim)``."""
    if x.ndim == 0:
        x = x.reshape((1,))
    if x.ndim == 1:
        x = x.reshape((-1, 1)) if dim == 1 else x.reshape((1, -1))
    if x.shape[-1] != dim:
        raise ValueError(
            f"multivariate_normal: x must have {dim} components along its last axis, got "
            f"shape {x.shape}"
        )
    return x


def _factor(cov, dim):
    """``(variances (dim,), log det)`` of a scalar or diagonal ``cov``, or ``(lower Cholesky
    factor, log det)`` of a matrix (symmetrized first)."""
    if cov.ndim < 2:
        var = checked("multivariate_normal", cov,
                      (cov, lambda v: v > 0, "the variances (cov) must be positive"))
        var = tnp.broadcast_to(var, (dim,))
        return var, tnp.sum(tnp.log(var))
    sym = 0.5 * (cov + tnp.swapaxes(cov, -1, -2))
    try:
        low = linalg.cholesky(sym, lower=True)
    except np.linalg.LinAlgError:
        raise np.linalg.LinAlgError(
            f"multivariate_normal: cov (shape {cov.shape}) is not positive definite; a "
            "singular covariance is not supported (allow_singular has no effect here)"
        ) from None
    return low, 2.0 * tnp.sum(tnp.log(tnp.diagonal(low, axis1=-2, axis2=-1)), axis=-1)


def logpdf(x, mean=None, cov=1, allow_singular=False) -> Tensor:
    """Log of the multivariate normal density
    ``-(d log(2 pi) + log det(cov) + (x - mean)^T cov^{-1} (x - mean)) / 2``.

    Args:
        x: Points, components along the last axis (``(..., d)``; see the module doc).
        mean: Mean vector ``(d,)`` (default zeros; a number for ``d = 1``).
        cov: Covariance: a number (times the identity), a vector of variances ``(d,)`` or a
            symmetric positive-definite matrix ``(d, d)`` (default 1). A matrix is
            symmetrized, ``(cov + cov^T) / 2``, so its gradient is symmetric (as JAX's).
        allow_singular: Accepted for SciPy compatibility; a singular covariance is not
            supported (its density lives on a subspace) and raises.

    Returns:
        Tensor of shape ``x.shape[:-1]`` with size-1 axes squeezed (SciPy's convention: one
        point gives a 0-d Tensor).

    Raises:
        ValueError: for inconsistent shapes (SciPy's messages), a non-positive variance, or
            a covariance matrix that is not positive definite
            (:class:`numpy.linalg.LinAlgError`), naming multivariate_normal.

    Derivatives: of the formula, through the Cholesky factor ``cov = L L^T``:
    ``log det = 2 sum log diag(L)`` and the Mahalanobis term ``|L^{-1} (x - mean)|**2``
    (Murray 2016 for the Cholesky derivative).
    """
    x, dim, mean, cov = _parameters(x, mean, cov)
    x = _quantiles(x, dim)
    dev = x - mean
    factor, logdet = _factor(cov, dim)
    if cov.ndim < 2:
        maha = tnp.sum(dev * dev / factor, axis=-1)
    else:
        z = linalg.solve_triangular(factor, dev[..., None], lower=True)[..., 0]
        maha = tnp.sum(z * z, axis=-1)
    out = -0.5 * (dim * LOG_2PI + logdet + maha)
    shape = tuple(s for s in out.shape if s != 1)
    return out.reshape(shape) if shape != out.shape else out


def pdf(x, mean=None, cov=1, allow_singular=False) -> Tensor:
    """The multivariate normal density ``exp(logpdf(...))``; arguments as :func:`logpdf`."""
    return tnp.exp(logpdf(x, mean, cov, allow_singular))


def entropy(mean=None, cov=1, allow_singular=False) -> Tensor:
    """Differential entropy of the multivariate normal distribution,
    ``(d (1 + log(2 pi)) + log det(cov)) / 2`` nats (``scipy.stats.multivariate_normal
    .entropy``).

    Args:
        mean: Mean vector ``(d,)`` (it fixes ``d``; the entropy does not depend on it).
        cov: Covariance, as :func:`logpdf` (a number, variances ``(d,)`` or a symmetric
            positive-definite ``(d, d)`` matrix, symmetrized).
        allow_singular: Accepted for SciPy compatibility; a singular covariance raises.

    Returns:
        0-d Tensor of the covariance's floating dtype (nats).

    Raises:
        ValueError: as :func:`logpdf` (inconsistent shapes, non-positive variances, a
            covariance that is not positive definite).

    Derivatives: ``d/dcov = inv(cov) / 2`` (symmetric), zero in ``mean``; through the
    Cholesky factor, to every order.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> from tapegrad.scipy.stats import multivariate_normal
        >>> h = multivariate_normal.entropy(tnp.zeros(2, dtype="float64"), tnp.eye(2) * 2.0)
        >>> round(float(h), 6)  # log(2 pi e) + log(2)
        3.531024
    """
    _, dim, mean, cov = _parameters(0.0 if mean is None else mean, mean, cov)
    _, logdet = _factor(cov, dim)
    return 0.5 * (dim * (1.0 + LOG_2PI) + logdet)
