"""The gamma primitive behind ``gamma``, ``loggamma``, ``beta``, ``dirichlet`` and ``t``.

A gamma sample is drawn by inversion: ``x = P^-1(a, u)`` for a uniform ``u`` in ``(0, 1)``,
where ``P(a, x) = gammainc(a, x)`` is the gamma CDF. Given the key (so given ``u``) the sample is
then a smooth, deterministic function of the shape ``a``, and its derivative is the implicit
reparameterization gradient of Figurnov, Mohamed and Mnih (2018), the rule of JAX's and
TensorFlow Probability's gamma samplers::

    dx/da = -(dP/da)(a, x) / (dP/dx)(a, x),      dP/dx = x**(a-1) e**-x / Gamma(a)

The primitive returns ``y = log x``, which stays finite where ``x`` underflows (``a`` well
below 1): below ``x = 1e-100`` the series ``P(a, x) = x**a / Gamma(a + 1) (1 + O(x))`` gives
``y = (log u + gammaln(a + 1)) / a`` to double precision.
"""

from __future__ import annotations

import numpy as np

import tapegrad.numpy as tnp
from tapegrad.core.function import Function, Traits
from tapegrad.core.tensor import Tensor
from tapegrad.ops._batching import elementwise

__all__ = ["LogGammaincInv"]

#: ``log x`` below which the small-``x`` form of ``P`` is exact to double precision.
SMALL_LOG_X = -230.0


def _host(xp, a):
    return a if xp is np else np.asarray(a.get())  # pragma: no branch - CuPy -> host


class LogGammaincInv(Function):
    """``y = log(P^-1(a, u))``: the log of the gamma variate of shape ``a`` (unit scale) whose
    CDF value is ``u``, elementwise (``a`` and ``u`` broadcast; float64).

    ``a > 0`` and ``u`` in ``(0, 1)``; ``a == 0`` gives ``-inf`` (the variate 0, as JAX), other
    ``a`` and ``u`` outside ``[0, 1]`` give NaN. Values: SciPy's ``gammaincinv`` (relative error
    of ``P(a, x)`` near ``1e-14``), and ``(log u + gammaln(a + 1)) / a`` where that is below
    :data:`SMALL_LOG_X`.

    Derivatives (implicit differentiation of ``P(a, e**y) = u``), written with
    :mod:`tapegrad.scipy.special` so that every order is available::

        dy/du = 1 / (x p(a, x)) = exp(gammaln(a) + x - a y)
        dy/da = -(dP/da)(a, x) dy/du        (dP/da: gammainc's shape derivative)
        dy/da = (digamma(a + 1) - y) / a    where y < SMALL_LOG_X (the same, to 1e-100)
    """

    oper = "log_gammaincinv"
    batch = elementwise  # vmap: broadcast like a ufunc
    traits = Traits(fresh=True)

    @staticmethod
    def forward(ctx, a, u):
        import scipy.special as sp

        xp = ctx.backend
        ah = np.asarray(_host(xp, a), np.float64)
        uh = np.asarray(_host(xp, u), np.float64)
        with np.errstate(all="ignore"):
            small = (np.log(uh) + sp.gammaln(ah + 1.0)) / ah
            y = np.where(small < SMALL_LOG_X, small, np.log(sp.gammaincinv(ah, uh)))
            y = np.where(ah > 0, y, np.where(ah == 0, -np.inf, np.nan))
        out = xp.asarray(y.astype(np.result_type(a.dtype, u.dtype, np.float32)))
        ctx.save_for_backward(a, u, out)
        return out

    @staticmethod
    def partials(a, y):
        """``(dy/da, dy/du)`` as Tensors, written with tapegrad ops on ``a`` and ``y``."""
        from tapegrad.scipy import special

        small = tnp.less(y, SMALL_LOG_X)
        y_big = tnp.where(small, 0.0, y)  # the regular branch at a safe point where unused
        x_big = tnp.exp(y_big)
        inv_density = tnp.exp(special.gammaln(a) + x_big - a * y_big)  # 1 / (x p(a, x))
        d_a_big = -special.GammaincPartial.apply(a, x_big, k=1) * inv_density
        d_a_small = (special.digamma(a + 1.0) - y) / a
        d_a = tnp.where(small, d_a_small, d_a_big)
        d_u = tnp.exp(special.gammaln(a) + tnp.exp(y) - a * y)
        return d_a, d_u

    @staticmethod
    def backward(ctx, g):
        a, _, y = ctx.saved_tensors
        need_a, need_u = ctx.needs_input_grad
        d_a, d_u = LogGammaincInv.partials(a, y)
        return (g * d_a if need_a else None), (g * d_u if need_u else None)

    @staticmethod
    def jvp(ctx, ta, tu):
        a, _, y = ctx.saved_tensors
        d_a, d_u = LogGammaincInv.partials(a, y)
        out: Tensor | None = None
        if ta is not None:
            out = ta * d_a
        if tu is not None:
            out = tu * d_u if out is None else out + tu * d_u
        return out

    @classmethod
    def output_shape(cls, a, u):
        return tuple(np.broadcast_shapes(tuple(a), tuple(u)))

    @classmethod
    def output_dtype(cls, a, u):
        return np.result_type(a, u, np.float32)
