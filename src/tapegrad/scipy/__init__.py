"""``tapegrad.scipy``: differentiable SciPy, like ``jax.scipy`` and ``autograd.scipy``.

Import it explicitly (``import tapegrad.scipy``; ``import tapegrad`` does not load SciPy's
modules). Submodules:

- :mod:`tapegrad.scipy.special`: special functions (gamma family, incomplete gamma and beta
  with derivatives in every argument, error functions, Bessel functions, logsumexp, ...);
- :mod:`tapegrad.scipy.stats`: distributions as modules of functions
  (``stats.norm.logpdf(x, loc, scale)``), differentiable in the value and the parameters;
- :mod:`tapegrad.scipy.linalg`: ``cholesky``, ``solve_triangular``, ``expm``, ``logm``,
  ``sqrtm``, ``solve_sylvester``, ``inv``, ``det`` with SciPy's signatures;
- :mod:`tapegrad.scipy.signal`: ``convolve`` and ``correlate`` in any number of dimensions;
- :mod:`tapegrad.scipy.integrate`: ``odeint`` (Dormand-Prince, adjoint-method gradients).

Forward values are SciPy's own; every function is differentiable to any order in reverse and
forward mode and batches under ``vmap``.
"""

from tapegrad.scipy import integrate, linalg, signal, special, stats

__all__ = ["special", "stats", "linalg", "signal", "integrate"]
