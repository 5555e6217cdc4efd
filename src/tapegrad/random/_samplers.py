"""Samplers with JAX's names, signatures and shape rules (``jax.random``).

Each continuous sampler is a deterministic, differentiable transform (``tapegrad.numpy`` and
``tapegrad.scipy.special`` ops, in float64) of numbers drawn from the key, rounded to ``dtype``
at the end; the discrete ones return integers and carry no gradient.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad.core.function import Function
from tapegrad.core.tensor import Tensor
from tapegrad.random._gamma import LogGammaincInv
from tapegrad.random._keys import (
    _check_key,
    _check_shape,
    _draw,
    _generator,
    _shape,
    normal,
    split,
)
from tapegrad.transforms.vmap import loop

__all__ = [
    "exponential", "laplace", "logistic", "gumbel", "cauchy", "truncated_normal",
    "gamma", "loggamma", "beta", "dirichlet", "t", "multivariate_normal", "orthogonal",
    "categorical", "choice", "poisson",
]  # fmt: skip

_F64 = np.dtype(np.float64)


# -- arguments ---------------------------------------------------------------------------------
def _out_dtype(who: str, dtype, params=()) -> np.dtype:
    """``dtype`` checked to be floating, or (``None``) the floating dtype of the Tensor and
    array parameters promoted together (float32 when there are none, as for Python numbers)."""
    if dtype is None:
        kinds = [p.dtype for p in params if isinstance(p, (Tensor, np.ndarray, np.generic))
                 and p.dtype.kind == "f"]
        return np.dtype(np.result_type(*kinds)) if kinds else np.dtype(np.float32)
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{who}: dtype must be a floating dtype, got {dtype!r}") from None
    if dtype.kind != "f":
        raise TypeError(f"{who}: dtype must be a floating dtype (float32 or float64), got {dtype}")
    return dtype


def _real(who: str, name: str, x, check=None) -> Tensor:
    """A real parameter as a float64 Tensor (differentiable where ``x`` is a floating Tensor).

    Python numbers and arrays are checked with ``check(array) -> message or None`` (a
    ``ValueError`` naming the function and argument); values inside Tensors are not inspected
    (they may be traced): outside the domain the samples are NaN, as in JAX.
    """
    if isinstance(x, Tensor):
        if x.dtype.kind not in "iuf":
            raise TypeError(f"{who}: {name} must be a real Tensor, got dtype {x.dtype}")
        return x if x.dtype == _F64 else tnp.astype(x, _F64)
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{who}: {name} must be a real number or array, got a bool")
    try:
        arr = np.asarray(x)
    except Exception:  # noqa: BLE001 - anything that is not array-like
        arr = None
    if arr is None or arr.dtype.kind not in "iuf":
        got = f"an array of dtype {arr.dtype}" if arr is not None else type(x).__name__
        raise TypeError(f"{who}: {name} must be a real number, array or Tensor, got {got}")
    arr = arr.astype(np.float64)
    if check is not None:
        msg = check(arr)
        if msg is not None:
            raise ValueError(f"{who}: {name} {msg}")
    return Tensor(arr)


def _positive(arr):
    if arr.size and not (arr > 0).all():
        return f"must be > 0, got {arr.min() if arr.ndim else float(arr)}"
    return None


def _batch_shape(who: str, shape, *param_shapes) -> tuple:
    """``shape`` (JAX's rule: the parameters' shapes broadcast to it), or their broadcast shape
    when ``shape`` is None."""
    if shape is None:
        try:
            return tuple(np.broadcast_shapes(*param_shapes)) if param_shapes else ()
        except ValueError:
            raise ValueError(
                f"{who}: the parameter shapes {', '.join(map(str, param_shapes))} do not "
                "broadcast together"
            ) from None
    shape = _shape(shape, who)
    _check_shape(who, shape, *param_shapes)
    return shape


def _on(x: Tensor, like: Tensor) -> Tensor:
    """The draws ``x`` (CPU Tensors) on the device of the parameter ``like``."""
    return x if like.device == "cpu" else x.to_device(like.device)


def _rounded(x: Tensor, dtype: np.dtype) -> Tensor:
    return x if x.dtype == dtype else tnp.astype(x, dtype)


def _open_uniform(key, shape, who) -> Tensor:
    """Float64 uniforms on ``(0, 1)``: ``uniform(key, shape, float64)`` with 0 moved to the
    smallest normal float64."""
    return _draw(key, "open", shape, _F64, None, None, who)


# -- transforms of one uniform ----------------------------------------------------------------
def _simple(who, key, shape, dtype, transform) -> Tensor:
    k = _check_key(key, who)
    shape = _shape(shape, who)
    dtype = _out_dtype(who, dtype)
    return _rounded(transform(_open_uniform(k, shape, who)), dtype)


_SIMPLE_ARGS = """
    Args:
        key: A key from :func:`key` or :func:`split`.
        shape: Output shape (an int or a tuple of ints; default ``()``).
        dtype: Floating dtype of the result (default float32).

    Returns:
        Tensor of ``shape`` and ``dtype``, computed in float64 and rounded.

    Raises:
        TypeError: for a bad key or a non-floating dtype. ValueError: for a negative size.
"""


def exponential(key, shape: Any = (), dtype: Any = None) -> Tensor:
    """Standard exponential samples (density ``e**-x`` on ``x >= 0``), as
    ``jax.random.exponential``.

    The sample is ``-log1p(-u)`` (``scipy.stats.expon.ppf(u)``), ``u`` the uniforms of
    ``uniform(key, shape, float64)`` on ``(0, 1)``.
    __ARGS__
    Example:
        >>> import tapegrad as tg
        >>> x = tg.random.exponential(tg.random.key(0), (1000,))
        >>> x.shape, x.dtype, bool((x.numpy() > 0).all())
        ((1000,), dtype('float32'), True)
    """
    return _simple("random.exponential", key, shape, dtype, lambda u: -tnp.log1p(-u))


def laplace(key, shape: Any = (), dtype: Any = None) -> Tensor:
    """Standard Laplace samples (density ``exp(-|x|) / 2``), as ``jax.random.laplace``.

    The sample is ``scipy.stats.laplace.ppf(u)``: ``log(2u)`` for ``u < 1/2``, else
    ``-log(2 - 2u)``, ``u`` the uniforms of ``uniform(key, shape, float64)`` on ``(0, 1)``.
    __ARGS__"""

    def transform(u):
        low = tnp.less(u, 0.5)
        return tnp.where(low, tnp.log(2.0 * tnp.where(low, u, 0.25)),
                         -tnp.log(2.0 - 2.0 * tnp.where(low, 0.75, u)))

    return _simple("random.laplace", key, shape, dtype, transform)


def logistic(key, shape: Any = (), dtype: Any = None) -> Tensor:
    """Standard logistic samples (density ``e**-x / (1 + e**-x)**2``), as
    ``jax.random.logistic``.

    The sample is ``log(u) - log1p(-u)`` (``scipy.stats.logistic.ppf(u)``), ``u`` the uniforms
    of ``uniform(key, shape, float64)`` on ``(0, 1)``.
    __ARGS__"""
    return _simple("random.logistic", key, shape, dtype, lambda u: tnp.log(u) - tnp.log1p(-u))


def gumbel(key, shape: Any = (), dtype: Any = None) -> Tensor:
    """Standard Gumbel samples (of the maximum; density ``exp(-x - e**-x)``), as
    ``jax.random.gumbel``.

    The sample is ``-log(-log(u))`` (``scipy.stats.gumbel_r.ppf(u)``), ``u`` the uniforms of
    ``uniform(key, shape, float64)`` on ``(0, 1)``. Every draw uses 53 random bits and float64
    arithmetic, so JAX's ``mode`` argument (a float32 precision switch) is not needed.
    __ARGS__"""
    return _simple("random.gumbel", key, shape, dtype, lambda u: -tnp.log(-tnp.log(u)))


def cauchy(key, shape: Any = (), dtype: Any = None) -> Tensor:
    """Standard Cauchy samples (density ``1 / (pi (1 + x**2))``), as ``jax.random.cauchy``.

    The sample is ``tan(pi (u - 1/2))`` (``scipy.stats.cauchy.ppf(u)``), ``u`` the uniforms of
    ``uniform(key, shape, float64)`` on ``(0, 1)``.
    __ARGS__"""
    return _simple("random.cauchy", key, shape, dtype, lambda u: tnp.tan(math.pi * (u - 0.5)))


for _f in (exponential, laplace, logistic, gumbel, cauchy):
    _f.__doc__ = _f.__doc__.replace("    __ARGS__", _SIMPLE_ARGS.rstrip("\n"))  # pyright: ignore[reportOptionalMemberAccess]


# -- truncated normal ---------------------------------------------------------------------------
def _truncated_normal_icdf(u: Tensor, lower: Tensor, upper: Tensor) -> Tensor:
    """The quantile function of the standard normal truncated to ``[lower, upper]`` at ``u``
    (float64), ``scipy.stats.truncnorm.ppf(u, lower, upper)``; an interval on the right of 0
    is mirrored to the left, where ``ndtr`` keeps its relative precision."""
    from tapegrad.scipy import special

    flip = tnp.greater(lower, 0.0)
    c = tnp.where(flip, -lower, lower)
    d = tnp.where(flip, -upper, upper)
    pc = special.ndtr(c)
    z = special.ndtri(pc + u * (special.ndtr(d) - pc))
    return tnp.where(flip, -z, z)


def truncated_normal(key, lower, upper, shape: Any = None, dtype: Any = None) -> Tensor:
    """Standard normal samples truncated to ``(lower, upper)``, as
    ``jax.random.truncated_normal``.

    The sample is the truncated normal's quantile function at a uniform ``u`` of
    ``uniform(key, shape, float64)`` on ``(0, 1)``, ``scipy.stats.truncnorm.ppf(u, lower,
    upper)``: ``ndtri(ndtr(lower) + u (ndtr(upper) - ndtr(lower)))`` (computed on the mirrored
    interval when ``lower > 0``, for precision in the right tail), then clipped into the open
    interval as JAX does. Infinite bounds are allowed.

    Args:
        key: A key.
        lower, upper: Bounds (numbers, arrays or Tensors), ``lower < upper``; they broadcast.
        shape: Output shape; the bounds' shapes must broadcast to it. Default (``None``): their
            broadcast shape.
        dtype: Floating dtype of the result; default: the bounds' floating dtype (float32 for
            Python numbers).

    Returns:
        Tensor of ``shape`` and ``dtype`` with values in ``(lower, upper)``.

    Raises:
        TypeError: for a bad key, non-real bounds or a non-floating dtype.
        ValueError: if numeric bounds have ``lower >= upper``, or the shapes do not fit.

    Derivatives:
        Pathwise in ``lower`` and ``upper`` (the sample is a smooth function of the bounds
        given the key), of every order.
    """
    who = "random.truncated_normal"
    k = _check_key(key, who)
    dtype = _out_dtype(who, dtype, (lower, upper))
    lo = _real(who, "lower", lower)
    hi = _real(who, "upper", upper)
    if not isinstance(lower, Tensor) and not isinstance(upper, Tensor):
        bad = ~(np.asarray(lower, np.float64) < np.asarray(upper, np.float64))
        if np.any(bad):
            raise ValueError(f"{who}: need lower < upper, got lower={lower!r}, upper={upper!r}")
    shape = _batch_shape(who, shape, lo.shape, hi.shape)
    u = _on(_open_uniform(k, shape, who), lo)
    x = _rounded(_truncated_normal_icdf(u, lo, hi), dtype)
    lo_d = tnp.stop_gradient(_rounded(lo, dtype))
    hi_d = tnp.stop_gradient(_rounded(hi, dtype))
    return tnp.clip(x, tnp.nextafter(lo_d, np.inf), tnp.nextafter(hi_d, -np.inf))


# -- gamma family -----------------------------------------------------------------------------
def _log_gamma(who: str, key: Tensor, a: Tensor, shape: tuple) -> Tensor:
    """``log`` of unit-scale gamma samples of shape ``a`` (float64, broadcast to ``shape``)."""
    return LogGammaincInv.apply(a, _on(_open_uniform(key, shape, who), a))


_GAMMA_DERIVATIVES = """Derivatives:
        In ``a``: the implicit reparameterization gradient ``dx/da = -(dP/da) / (dP/dx)``
        at the drawn sample (``P = gammainc(a, x)``, the gamma CDF), as JAX's and TensorFlow
        Probability's samplers: the samples are drawn by inverting ``P`` at a uniform of the
        key, so this is the exact derivative of the sample given the key, and finite
        differences with a fixed key agree with it. Every order is available (JAX stops at the
        first)."""


def gamma(key, a, shape: Any = None, dtype: Any = None) -> Tensor:
    """Gamma samples of shape ``a`` and unit scale (density ``x**(a-1) e**-x / Gamma(a)``), as
    ``jax.random.gamma``.

    ``x = P^-1(a, u)`` with ``P = gammainc`` and ``u`` a uniform of the key on ``(0, 1)``
    (computed in log space, see :func:`loggamma`). For another scale ``theta`` multiply by it;
    ``gamma(key, df / 2) * 2`` is a chi-squared sample.

    Args:
        key: A key.
        a: Shape parameter ``> 0`` (number, array or Tensor).
        shape: Output shape; ``a``'s shape must broadcast to it. Default: ``a``'s shape.
        dtype: Floating dtype; default ``a``'s floating dtype (float32 for a Python number).

    Returns:
        Tensor of ``shape`` and ``dtype``. Where ``a`` is far below 1 the samples can round to
        0; use :func:`loggamma` there.

    Raises:
        TypeError: for a bad key, a non-real ``a`` or a non-floating dtype.
        ValueError: if a numeric ``a`` is not positive, or the shapes do not fit.

    __DERIVATIVES__

    Example:
        >>> import tapegrad as tg
        >>> k = tg.random.key(0)
        >>> a = tg.Tensor(2.5, dtype="float64")
        >>> g = tg.grad(lambda a: tg.random.gamma(k, a))(a)  # d sample / d a
        >>> bool(g.numpy() > 0)
        True
    """
    logs, dtype = _log_gamma_draw("random.gamma", key, a, shape, dtype)
    return _rounded(tnp.exp(logs), dtype)


def _log_gamma_draw(who: str, key, a, shape, dtype) -> tuple[Tensor, Any]:
    """:func:`gamma`'s and :func:`loggamma`'s arguments checked, and the logs of the samples
    (float64): ``(logs, output dtype)``."""
    k = _check_key(key, who)
    dtype = _out_dtype(who, dtype, (a,))
    a64 = _real(who, "a", a, _positive)
    return _log_gamma(who, k, a64, _batch_shape(who, shape, a64.shape)), dtype


def loggamma(key, a, shape: Any = None, dtype: Any = None) -> Tensor:
    """Logs of gamma samples, ``log(gamma(key, a, shape))``, computed without underflow, as
    ``jax.random.loggamma``.

    ``log P^-1(a, u)``; where the sample is below ``1e-100`` (``a`` well below 1), from the
    series ``P(a, x) = x**a / Gamma(a + 1)`` instead: ``(log u + gammaln(a + 1)) / a``.
    Arguments, returns and errors as :func:`gamma` (the same samples for the same key).

    __DERIVATIVES__
    """
    logs, dtype = _log_gamma_draw("random.loggamma", key, a, shape, dtype)
    return _rounded(logs, dtype)


def beta(key, a, b, shape: Any = None, dtype: Any = None) -> Tensor:
    """Beta samples (density ``x**(a-1) (1-x)**(b-1) / B(a, b)`` on ``[0, 1]``), as
    ``jax.random.beta``.

    ``G_a / (G_a + G_b)`` for gamma samples of shapes ``a`` and ``b`` drawn from
    ``split(key)``, computed from their logs (:func:`loggamma`), as JAX does, so that small
    ``a`` and ``b`` do not give ``0 / 0``.

    Args:
        key: A key.
        a, b: Shape parameters ``> 0`` (numbers, arrays or Tensors); they broadcast.
        shape: Output shape; the parameters' shapes must broadcast to it. Default: their
            broadcast shape.
        dtype: Floating dtype; default the parameters' floating dtype (float32 for numbers).

    Returns:
        Tensor of ``shape`` and ``dtype``.

    Raises:
        TypeError: for a bad key, non-real parameters or a non-floating dtype.
        ValueError: if a numeric parameter is not positive, or the shapes do not fit.

    Derivatives:
        In ``a`` and ``b``, through the gamma samples' implicit reparameterization gradients
        (see :func:`gamma`), of every order.
    """
    who = "random.beta"
    k = _check_key(key, who)
    dtype = _out_dtype(who, dtype, (a, b))
    a64 = _real(who, "a", a, _positive)
    b64 = _real(who, "b", b, _positive)
    shape = _batch_shape(who, shape, a64.shape, b64.shape)
    ka, kb = split(k)
    ya = _log_gamma(who, ka, a64, shape)
    yb = _log_gamma(who, kb, b64, shape)
    top = tnp.stop_gradient(tnp.maximum(ya, yb))  # the ratio does not depend on the shift
    ea = tnp.exp(ya - top)
    eb = tnp.exp(yb - top)
    return _rounded(ea / (ea + eb), dtype)


def dirichlet(key, alpha, shape: Any = None, dtype: Any = None) -> Tensor:
    """Dirichlet samples (points of the simplex with density ``prod x_i**(alpha_i - 1) /
    B(alpha)``), as ``jax.random.dirichlet``.

    Independent gamma samples of shapes ``alpha`` normalized along the last axis, computed from
    their logs (a softmax of :func:`loggamma` samples), as JAX does.

    Args:
        key: A key.
        alpha: Concentrations ``> 0``, shape ``(..., K)`` (``K >= 1``).
        shape: Batch shape of the result; ``alpha.shape[:-1]`` must broadcast to it. Default:
            ``alpha.shape[:-1]``.
        dtype: Floating dtype; default ``alpha``'s floating dtype (float32 for numbers).

    Returns:
        Tensor of shape ``shape + (K,)`` whose rows sum to 1.

    Raises:
        TypeError: for a bad key, a non-real ``alpha`` or a non-floating dtype.
        ValueError: if ``alpha`` is 0-d, a numeric ``alpha`` is not positive, or the shapes
            do not fit.

    Derivatives:
        In ``alpha``, through the gamma samples' implicit reparameterization gradients (see
        :func:`gamma`), of every order.
    """
    who = "random.dirichlet"
    k = _check_key(key, who)
    dtype = _out_dtype(who, dtype, (alpha,))
    al = _real(who, "alpha", alpha, _positive)
    if al.ndim < 1:
        raise ValueError(f"{who}: alpha must have at least 1 dimension (..., K), got a 0-d value")
    shape = _batch_shape(who, shape, al.shape[:-1])
    y = _log_gamma(who, k, al, shape + al.shape[-1:])
    e = tnp.exp(y - tnp.stop_gradient(tnp.max(y, axis=-1, keepdims=True)))
    return _rounded(e / tnp.sum(e, axis=-1, keepdims=True), dtype)


def t(key, df, shape: Any = None, dtype: Any = None) -> Tensor:
    """Student's t samples with ``df`` degrees of freedom, as ``jax.random.t``.

    ``n sqrt(df / (2 G))`` for a standard normal ``n`` and a gamma sample ``G`` of shape
    ``df / 2``, drawn from ``split(key)`` (JAX's construction; computed from ``log G``).

    Args:
        key: A key.
        df: Degrees of freedom ``> 0`` (number, array or Tensor).
        shape: Output shape; ``df``'s shape must broadcast to it. Default: ``df``'s shape.
        dtype: Floating dtype; default ``df``'s floating dtype (float32 for a number).

    Returns:
        Tensor of ``shape`` and ``dtype``.

    Raises:
        TypeError: for a bad key, a non-real ``df`` or a non-floating dtype.
        ValueError: if a numeric ``df`` is not positive, or the shapes do not fit.

    Derivatives:
        In ``df``, through the gamma sample's implicit reparameterization gradient (see
        :func:`gamma`), of every order.
    """
    who = "random.t"
    k = _check_key(key, who)
    dtype = _out_dtype(who, dtype, (df,))
    df64 = _real(who, "df", df, _positive)
    shape = _batch_shape(who, shape, df64.shape)
    kn, kg = split(k)
    n = _on(normal(kn, shape, np.float64), df64)
    half = df64 * 0.5
    y = _log_gamma(who, kg, half, shape)
    return _rounded(n * tnp.exp(0.5 * (tnp.log(half) - y)), dtype)


# -- multivariate ---------------------------------------------------------------------------
def multivariate_normal(key, mean, cov, shape: Any = None, dtype: Any = None,
                        method: str = "cholesky") -> Tensor:
    """Multivariate normal samples ``mean + F z`` (``F F^T = cov``, ``z`` standard normal), as
    ``jax.random.multivariate_normal``.

    ``F`` is ``cholesky(cov)`` (``method="cholesky"``), ``v sqrt(w)`` from ``eigh(cov)``
    (``"eigh"``) or ``u sqrt(s)`` from ``svd(cov)`` (``"svd"``; these two accept singular
    covariances). ``z`` is ``normal(key, shape + (n,), float64)``.

    Args:
        key: A key.
        mean: Mean, shape ``(..., n)``.
        cov: Covariance, shape ``(..., n, n)``, symmetric positive definite (semi-definite
            for ``"eigh"`` and ``"svd"``); only its lower triangle is read by ``"cholesky"``.
        shape: Batch shape of the result; ``mean.shape[:-1]`` and ``cov.shape[:-2]`` must
            broadcast to it. Default: their broadcast shape.
        dtype: Floating dtype; default the floating dtype of ``mean`` and ``cov`` (float32 for
            nested lists of Python numbers).
        method: ``"cholesky"``, ``"eigh"`` or ``"svd"``.

    Returns:
        Tensor of shape ``shape + (n,)``.

    Raises:
        TypeError: for a bad key, non-real parameters or a non-floating dtype.
        ValueError: for an unknown method, ``mean.ndim < 1``, ``cov.ndim < 2``, a ``cov`` not of
            shape ``(..., n, n)``, or shapes that do not fit.

    Derivatives:
        Pathwise in ``mean`` and ``cov`` (through the factorization's derivative), of every
        order.
    """
    who = "random.multivariate_normal"
    k = _check_key(key, who)
    if method not in ("cholesky", "eigh", "svd"):
        raise ValueError(f"{who}: method must be 'cholesky', 'eigh' or 'svd', got {method!r}")
    dtype = _out_dtype(who, dtype, (mean, cov))
    mu = _real(who, "mean", mean)
    sigma = _real(who, "cov", cov)
    if mu.ndim < 1:
        raise ValueError(f"{who}: mean must have at least 1 dimension (..., n), got a 0-d value")
    n = mu.shape[-1]
    if sigma.ndim < 2 or sigma.shape[-2:] != (n, n):
        raise ValueError(
            f"{who}: cov must have shape (..., {n}, {n}) to match mean's {mu.shape}, got "
            f"{sigma.shape}"
        )
    shape = _batch_shape(who, shape, mu.shape[:-1], sigma.shape[:-2])
    if method == "cholesky":
        factor = tnp.linalg.cholesky(sigma)
    elif method == "eigh":
        w, v = tnp.linalg.eigh(sigma)
        factor = v * tnp.sqrt(w)[..., None, :]
    else:
        u, s, _ = tnp.linalg.svd(sigma)
        factor = u * tnp.sqrt(s)[..., None, :]
    z = _on(normal(k, shape + (n,), np.float64), mu)
    return _rounded(mu + tnp.matmul(factor, z[..., None])[..., 0], dtype)


def orthogonal(key, n: int, shape: Any = (), dtype: Any = None, m: int | None = None) -> Tensor:
    """Orthogonal matrices drawn uniformly (Haar measure on ``O(n)``), as
    ``jax.random.orthogonal``; semi-orthogonal ``n x m`` ones when ``m`` is given.

    Mezzadri's construction: ``Q R = z`` (QR of a standard normal
    ``(*shape, max(n, m), min(n, m))`` matrix ``z``), the columns of ``Q`` multiplied by the
    signs of ``diag(R)`` (so that the factorization is the one with a positive diagonal);
    transposed when ``n < m``. For ``n <= m`` the rows are orthonormal (``A A^T = I_n``), for
    ``m <= n`` the columns (``A^T A = I_m``).

    Args:
        key: A key.
        n: Number of rows (an int ``>= 0``).
        shape: Batch shape (default ``()``).
        dtype: Floating dtype (default float32; JAX's complex unitary matrices are not
            available).
        m: Number of columns (default ``n``).

    Returns:
        Tensor of shape ``(*shape, n, m)``.

    Raises:
        TypeError: for a bad key, a non-int ``n``/``m`` or a non-floating dtype.
        ValueError: for negative ``n``, ``m`` or sizes.

    References:
        Mezzadri, "How to generate random matrices from the classical compact groups",
        Notices of the AMS 54(5), 2007.
    """
    who = "random.orthogonal"
    k = _check_key(key, who)
    shape = _shape(shape, who)
    dtype = _out_dtype(who, dtype)
    m = n if m is None else m
    for name, v in (("n", n), ("m", m)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{who}: {name} must be an int, got {type(v).__name__}")
        if v < 0:
            raise ValueError(f"{who}: {name} must be >= 0, got {v}")
    n, m = int(n), int(m)
    z = normal(k, shape + (max(n, m), min(n, m)), np.float64)
    q, r = tnp.linalg.qr(z)
    d = tnp.diagonal(r, axis1=-2, axis2=-1)
    x = q * tnp.sign(d)[..., None, :]
    if n < m:
        x = tnp.swapaxes(x, -1, -2)
    return _rounded(x, dtype)


# -- discrete ---------------------------------------------------------------------------------
def categorical(key, logits, axis: int = -1, shape: Any = None, replace: bool = True) -> Tensor:
    """Category indices drawn with probabilities ``softmax(logits, axis)``, as
    ``jax.random.categorical``.

    The Gumbel-max trick: ``argmax(logits + gumbel(key, ...), axis)``; without replacement the
    Gumbel top-k trick (the ``k`` largest perturbed logits, ``k`` the size of ``shape``'s
    leading dimensions beyond the batch shape).

    Args:
        key: A key.
        logits: Unnormalized log-probabilities (``-inf`` for an impossible category), the
            categories along ``axis``.
        axis: Axis of the categories.
        shape: Output shape; the batch shape (``logits``' shape without ``axis``) must
            broadcast to it. Default: the batch shape. Leading extra dimensions give several
            samples per distribution.
        replace: Draw with replacement (default); ``False`` draws distinct categories per
            distribution (at most as many as there are).

    Returns:
        int64 Tensor of ``shape`` (no gradient).

    Raises:
        TypeError: for a bad key or non-real logits.
        ValueError: for a bad axis, shapes that do not fit, or more samples than categories
            without replacement.
    """
    who = "random.categorical"
    k = _check_key(key, who)
    lg = _real(who, "logits", logits)
    if lg.ndim < 1:
        raise ValueError(f"{who}: logits must have at least 1 dimension, got a 0-d value")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{who}: axis must be an int, got {type(axis).__name__}")
    if not -lg.ndim <= axis < lg.ndim:
        raise ValueError(f"{who}: axis {axis} is out of range for logits of shape {lg.shape}")
    axis = int(axis) % lg.ndim
    batch = lg.shape[:axis] + lg.shape[axis + 1:]
    shape = _batch_shape(who, shape, batch)
    prefix = shape[: len(shape) - len(batch)]
    if replace:
        full = list(shape[len(prefix):])
        full.insert(axis, lg.shape[axis])
        g = _on(gumbel(k, prefix + tuple(full), np.float64), lg)
        lgx = lg.reshape((1,) * len(prefix) + lg.shape)
        return tnp.argmax(g + lgx, axis=axis + len(prefix))
    count = math.prod(prefix)
    if count > lg.shape[axis]:
        raise ValueError(
            f"{who}: {count} samples without replacement exceed the {lg.shape[axis]} categories"
        )
    noisy = tnp.moveaxis(lg + _on(gumbel(k, lg.shape, np.float64), lg), axis, -1)
    top = tnp.argsort(-noisy, axis=-1)[..., :count]  # (*batch, count)
    return tnp.moveaxis(top, -1, 0).reshape(shape)


def choice(key, a, shape: Any = (), replace: bool = True, p=None, axis: int = 0) -> Tensor:
    """A random sample of ``a``'s entries (or of ``range(a)`` for an int), as
    ``jax.random.choice``.

    Uniform without ``p``: ``randint`` indices (with replacement) or the first entries of a
    permutation (without). With probabilities ``p``: the inverse CDF of ``cumsum(p)`` at
    uniforms (with replacement) or the Gumbel top-k trick (without).

    Args:
        key: A key.
        a: An int ``n`` (sample from ``range(n)``) or an array/Tensor (sample its slices along
            ``axis``).
        shape: Number of samples as a shape (default ``()``: one).
        replace: With replacement (default).
        p: Optional probabilities, shape ``(n,)`` (normalized here; non-negative).
        axis: Axis of ``a`` to sample along.

    Returns:
        For an int ``a``: int64 Tensor of ``shape``. For an array: its slices, of shape
        ``a.shape[:axis] + shape + a.shape[axis + 1:]`` and ``a``'s dtype (differentiable in
        ``a``: an indexing op).

    Raises:
        TypeError: for a bad key or ``a``.
        ValueError: for an empty population with samples to draw, more samples than entries
            without replacement, a ``p`` of the wrong shape or with negative entries, or a bad
            axis.
    """
    who = "random.choice"
    k = _check_key(key, who)
    shape = _shape(shape, who)
    if isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_)):
        arr = None
        n = int(a)
        if n < 0:
            raise ValueError(f"{who}: a must be a non-negative int or an array, got {n}")
    else:
        arr = a if isinstance(a, Tensor) else Tensor(a)
        if arr.ndim == 0:
            raise ValueError(f"{who}: a must be an int or an array of at least 1 dimension, "
                             "got a 0-d array")
        if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not (
                -arr.ndim <= axis < arr.ndim):
            raise ValueError(f"{who}: axis {axis!r} is out of range for a of shape {arr.shape}")
        axis = int(axis) % arr.ndim
        n = arr.shape[axis]
    draws = math.prod(shape)
    if draws == 0:
        if arr is None:
            return Tensor(np.zeros(shape, np.int64))
        out_shape = arr.shape[:axis] + shape + arr.shape[axis + 1:]
        none = _on(Tensor(np.zeros(shape, np.int64)), arr)
        return tnp.take(arr, none, axis=axis).reshape(out_shape)
    if n <= 0:
        raise ValueError(f"{who}: a must have at least one entry when samples are drawn")
    if not replace and draws > n:
        raise ValueError(f"{who}: cannot take {draws} samples from {n} entries with "
                         "replace=False")
    if p is None:
        if replace:
            ind = _draw(k, "randint", shape, np.int64, 0, n, who)
        else:
            ind = _draw(k, "permutation", (), np.int64, n, None, who)[:draws].reshape(shape)
    else:
        pr = _real(who, "p", p, lambda v: "must be non-negative" if (v < 0).any() else None)
        if pr.shape != (n,):
            raise ValueError(f"{who}: p must have shape ({n},) (one entry per choice), got "
                             f"{pr.shape}")
        pr = pr.detach()
        if replace:
            cum = tnp.cumsum(pr)
            u = _on(_draw(k, "uniform", shape, _F64, 0.0, 1.0, who), pr)
            r = cum[-1] * (1.0 - u)
            ind = tnp.searchsorted(cum, r)
        else:
            noisy = _on(gumbel(k, (n,), np.float64), pr) + tnp.log(pr)
            ind = tnp.argsort(-noisy)[:draws].reshape(shape)
        ind = tnp.astype(ind, np.int64)
    if arr is None:
        return ind
    out_shape = arr.shape[:axis] + shape + arr.shape[axis + 1:]
    return tnp.take(arr, _on(ind.reshape(-1), arr), axis=axis).reshape(out_shape)


class _Poisson(Function):
    """Poisson counts of rates ``lam`` (float64, broadcast to ``shape``) from a key (no
    gradient); -1 where a rate is negative or not finite (JAX's value there)."""

    oper = "random_poisson"
    differentiable = False

    @classmethod
    def batch(cls, args, batched, size, **params):
        """vmap: each example draws from its own key (a loop over the examples)."""
        return loop(cls, args, batched, size, params)[0]

    @staticmethod
    def forward(ctx, k, lam, shape, dtype):
        lam = np.broadcast_to(np.asarray(lam, np.float64), shape)
        ok = np.isfinite(lam) & (lam >= 0)
        try:
            counts = _generator(k).poisson(np.where(ok, lam, 0.0), size=shape)
        except ValueError:
            raise ValueError(
                f"random.poisson: a rate is too large for the sampler (largest "
                f"{float(lam[ok].max())}); rates up to about 1e18 are supported"
            ) from None
        return np.where(ok, counts, -1).astype(dtype)

    @classmethod
    def output_shape(cls, key_shape, lam_shape, shape, dtype):
        return tuple(shape)

    @classmethod
    def output_dtype(cls, key_dtype, lam_dtype, shape, dtype):
        return np.dtype(dtype)


def poisson(key, lam, shape: Any = None, dtype: Any = None) -> Tensor:
    """Poisson counts with rates ``lam``, as ``jax.random.poisson``.

    NumPy's Poisson sampler (inversion for small rates, transformed rejection (PTRS) for
    rates of 10 and more: the algorithms JAX uses) seeded from the key.

    Args:
        key: A key.
        lam: Rates ``>= 0`` (number, array or Tensor). Rates inside a Tensor are not checked:
            a negative or non-finite one gives -1, as in JAX.
        shape: Output shape; ``lam``'s shape must broadcast to it. Default: ``lam``'s shape.
        dtype: Integer dtype of the counts (default int64).

    Returns:
        Integer Tensor of ``shape`` (no gradient).

    Raises:
        TypeError: for a bad key, a non-real ``lam`` or a non-integer dtype.
        ValueError: for a negative numeric rate, shapes that do not fit, or a rate above about
            ``1e18``.
    """
    who = "random.poisson"
    k = _check_key(key, who)
    dtype = np.dtype(np.int64 if dtype is None else dtype)
    if dtype.kind not in "iu":
        raise TypeError(f"{who}: dtype must be an integer dtype, got {dtype}")
    rate = _real(who, "lam", lam,
                 lambda v: "must be >= 0 and finite" if not (np.isfinite(v) & (v >= 0)).all()
                 else None)
    shape = _batch_shape(who, shape, rate.shape)
    host = tnp.stop_gradient(rate if rate.device == "cpu" else rate.to_device("cpu"))
    return _on(_Poisson.apply(k, host, shape=shape, dtype=dtype), rate)
