"""``tapegrad.scipy.special``: SciPy's special functions, differentiable.

Use it as ``jax.scipy.special`` or ``autograd.scipy.special``::

    import tapegrad as tg
    from tapegrad.scipy import special

    tg.grad(lambda a: special.gammaln(a).sum())(tg.Tensor([0.5, 3.0]))  # digamma

Conventions shared by every function here (each states only what differs):

- **Values** are SciPy's own (``scipy.special``; ``cupyx.scipy.special`` for CuPy arrays where
  it has the function, else a round trip through host memory).
- **Shapes.** Arguments broadcast like a ufunc; the result has the broadcast shape. Shapes that
  do not broadcast raise ``ValueError`` naming the function and the shapes.
- **Dtypes.** SciPy's: float32 in gives float32 out (also where SciPy computes in double),
  integers give float64. Python numbers are weakly typed (``gammainc(2.0, x32)`` is float32);
  when every argument is a Python number the first becomes a Tensor (float32 for a float, as
  everywhere in tapegrad).
- **Derivatives** of every order, in reverse and forward mode, with respect to every argument
  in which the function is differentiable; each rule below is written with the functions of
  this module, so higher orders follow (``gamma' = gamma digamma``,
  ``digamma' = polygamma(1, .)``, ``polygamma(n, .)' = polygamma(n + 1, .)``). Integer orders
  (``n`` of ``polygamma``, ``jn``, ``yn``) and the real order ``v`` of ``iv``/``ive`` are not
  differentiated: asking for that derivative (the order is a traced Tensor) raises
  ``NotImplementedError`` naming the argument, never a silent zero.
- **Complex** inputs are accepted where SciPy accepts them (``gamma``, ``digamma``, ``rgamma``,
  ``erf``, ``erfc``, ``ndtr``, ``log_ndtr``, ``xlogy``, ``xlog1py``, ``iv``, ``ive``, ``jn``,
  ``logsumexp``), with JAX's convention: the cotangent of ``z`` is ``g f'(z)`` for a
  holomorphic ``f`` (no conjugate), so ``grad`` of a real function of ``z = x + iy`` is
  ``df/dx - i df/dy``. Real-only functions raise ``TypeError`` for complex input.
- **NaN safety.** Where a derivative is infinite (``erfinv`` at +-1, ``logit`` at 0 and 1,
  ``entr`` at 0, ...) a zero cotangent gives a zero gradient, not NaN.
- ``vmap`` batches every function here with no per-example loop.
"""

from __future__ import annotations

import inspect
import math

import numpy as np

import tapegrad.numpy as tnp
from tapegrad.core.backend import backend_of
from tapegrad.core.tensor import Tensor
from tapegrad.ops import DivNoNan, StopGradient
from tapegrad.ops._registry import bool_arg, tensor_arg
from tapegrad.scipy import _incomplete
from tapegrad.scipy._base import Elementwise, NoDerivative, operands
from tapegrad.transforms.forward import jvp as _jvp

__all__ = [
    "gamma", "gammaln", "gammasgn", "digamma", "psi", "polygamma", "multigammaln", "rgamma",
    "beta", "betaln", "betainc", "gammainc", "gammaincc",
    "erf", "erfc", "erfinv", "erfcinv", "expit", "logit", "ndtr", "log_ndtr", "ndtri",
    "logsumexp", "softmax", "log_softmax", "xlogy", "xlog1py", "entr",
    "i0", "i0e", "i1", "i1e", "iv", "ive", "j0", "j1", "jn", "y0", "y1", "yn",
]  # fmt: skip

_SQRT_PI_2 = math.sqrt(math.pi) / 2.0
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _real(name, **args):
    """Raise ``TypeError`` if an argument is complex (``name`` is real-only in SciPy)."""
    for arg, v in args.items():
        if isinstance(v, complex) or (isinstance(v, Tensor) and v.dtype.kind == "c"):
            what = (f"dtype {v.dtype} of shape {v.shape}" if isinstance(v, Tensor)
                    else repr(v))
            raise TypeError(
                f"{name}: {arg} must be real (float32 or float64), got {what}; "
                f"scipy.special.{name} has no complex version"
            )


def _order(name, v):
    """Raise ``TypeError`` for a complex order (SciPy has none)."""
    _real(name, **{"order": v})


def _public(prim, doc=None, *, check: str | None = "real", derivative=None, use=None):
    """The public function of the elementwise primitive ``prim``: named by its ``oper``,
    taking its ``argnames`` (positional or keyword), converting them with :func:`operands`
    and checking them with ``check`` (``"real"``: every argument real, as :func:`_real`;
    ``"order"``: the first argument real, as :func:`_order`; ``None``: no check).

    ``doc`` is its docstring; without one, ``doc`` is the summary of a one-argument function
    and the docstring is completed with the Args, Returns, Raises (for ``check="real"``;
    ``use`` names the function to use for complex input) and Derivative (``derivative``)
    sections these functions share."""
    name, argnames = prim.oper, prim.argnames
    if derivative is not None:
        (arg,) = argnames
        kind = ("Real Tensor, array or number." if check == "real"
                else "Tensor, array or number; real or complex.")
        raises = ""
        if check == "real":
            instead = f" (use :func:`{use}`)" if use else ""
            raises = f"\n\n    Raises:\n        TypeError: for complex input{instead}."
        doc = (f"{doc}\n\n    Args:\n        {arg}: {kind}\n\n    Returns:\n        Tensor of "
               f"``{arg}``'s shape.{raises}\n\n    Derivative: {derivative}\n    ")
    signature = inspect.Signature(
        [inspect.Parameter(a, inspect.Parameter.POSITIONAL_OR_KEYWORD) for a in argnames],
        return_annotation="Tensor",
    )

    def function(*args, **kwargs) -> Tensor:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{name}() {e}") from None
        vals = operands(*bound.args)
        if check == "real":
            _real(name, **dict(zip(argnames, vals)))
        elif check == "order":
            _order(name, vals[0])
        return prim.apply(*vals)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = doc
    function.__signature__ = signature  # pyright: ignore[reportFunctionMemberAccess]
    return function


def _nested(f, vals, orders):
    """``d^(k_1 + k_2 + ...) f / (d v_1^k_1 d v_2^k_2 ...)`` at ``vals`` for an elementwise
    ``f``, by nested forward-mode derivatives along ones: exact to every order, and recorded
    by enclosing transforms (so it differentiates again)."""
    for i, k in enumerate(orders):
        for _ in range(k):
            f = _along(f, i)
    return f(*vals)


def _along(f, i):
    """The derivative of elementwise ``f`` in its argument ``i`` (forward mode along ones)."""

    def df(*v):
        def one(t):
            w = list(v)
            w[i] = t
            return f(*w)

        return _jvp(one, (v[i],), (tnp.ones_like(v[i]),))[1]

    return df


# -- complex polygamma (SciPy's is real only; the derivatives of complex gamma/digamma need it)
_B2K = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510,
        43867 / 798, -174611 / 330, 854513 / 138, -236364091 / 2730, 8553103 / 6,
        -23749461029 / 870]  # fmt: skip
_MAX_SHIFT = 100000


def _psi_n(n: int, z):
    """``polygamma(n, z)`` for an int ``n >= 1`` and complex 1-D ``z``: the recurrence
    ``psi_n(z) = psi_n(z + m) + (-1)**(n+1) n! sum_{k<m} (z + k)**-(n+1)`` up to ``|z + m| >= R``,
    then the asymptotic series (Abramowitz and Stegun 6.4.11) with 14 Bernoulli terms."""
    R = 20.0 + 2.0 * n
    shift = np.where(np.abs(z.imag) < R, np.ceil(np.maximum(R - z.real, 0.0)), 0.0)
    too_far = shift > _MAX_SHIFT
    shift = np.where(too_far, 0.0, shift).astype(np.int64)
    acc = np.zeros(z.shape, np.complex128)
    for k in range(int(shift.max(initial=0))):
        live = k < shift
        acc[live] += (z[live] + k) ** -(n + 1)
    w = z + shift
    s = math.factorial(n - 1) / w**n + math.factorial(n) / (2.0 * w ** (n + 1))
    for k, b in enumerate(_B2K, start=1):
        s = s + b * (math.factorial(2 * k + n - 1) / math.factorial(2 * k)) / w ** (2 * k + n)
    out = (-1.0) ** (n + 1) * (s + math.factorial(n) * acc)
    out[too_far] = np.nan
    return out


def _polygamma_complex(n, z):
    n, z = np.broadcast_arrays(np.asarray(n), np.asarray(z, np.complex128))
    out = np.full(z.shape, np.nan + 0j)
    import scipy.special as sp

    for k in np.unique(n):
        m = n == k
        if k == 0:
            out[m] = sp.digamma(z[m])
        elif k > 0 and float(k).is_integer():
            out[m] = _psi_n(int(k), z[m].ravel()).reshape(z[m].shape)
    return out


# -- gamma family --------------------------------------------------------------------------
class Gamma(Elementwise):
    """The gamma function (primitive of :func:`gamma`)."""

    oper = "gamma"
    derivs = (lambda x, out: out * digamma(x),)


gamma = _public(
    Gamma,
    """The gamma function ``Gamma(x)`` (``scipy.special.gamma``).

    Args:
        x: Tensor, array or number; real or complex. Poles at ``0, -1, -2, ...``.

    Returns:
        Tensor of ``x``'s shape; float32/complex64 for single-precision input, else
        float64/complex128.

    Derivative: ``Gamma(x) digamma(x)`` (holomorphic for complex ``x``).

    Example:
        >>> import tapegrad as tg
        >>> from tapegrad.scipy import special
        >>> special.gamma(tg.Tensor([1.0, 5.0]))
        Tensor([ 1., 24.], dtype=float32)
    """,
    check=None,
)


class Gammaln(Elementwise):
    """``log|Gamma(x)|`` (primitive of :func:`gammaln`)."""

    oper = "gammaln"
    derivs = (lambda x, out: digamma(x),)


gammaln = _public(
    Gammaln,
    """Logarithm of the absolute value of the gamma function (``scipy.special.gammaln``).

    Args:
        x: Real Tensor, array or number; ``inf`` at the poles ``0, -1, -2, ...``.

    Returns:
        Tensor of ``x``'s shape (float32 for float32 input, else float64).

    Raises:
        TypeError: for complex input (SciPy's ``gammaln`` is real; ``loggamma`` is complex).

    Derivative: ``digamma(x)`` (also for ``x < 0``, where ``log|Gamma|`` is smooth between
    the poles).
    """,
)


class Digamma(Elementwise):
    """The digamma function (primitive of :func:`digamma`)."""

    oper = "digamma"
    derivs = (lambda x, out: polygamma(1, x),)


digamma = _public(
    Digamma,
    """The digamma function ``psi(x) = Gamma'(x) / Gamma(x)`` (``scipy.special.digamma``;
    :func:`psi` is the same function).

    Args:
        x: Tensor, array or number; real or complex. Poles at ``0, -1, -2, ...``.

    Returns:
        Tensor of ``x``'s shape (single precision in, single precision out).

    Derivative: ``polygamma(1, x)`` (the trigamma function; for complex ``x`` computed by
    tapegrad, see :func:`polygamma`).
    """,
    check=None,
)


psi = digamma


class Polygamma(Elementwise):
    """The polygamma function (primitive of :func:`polygamma`)."""

    oper = "polygamma"
    argnames = ("n", "x")

    @staticmethod
    def fn(sp, n, x):
        if np.iscomplexobj(x):
            return _polygamma_complex(n, x)
        if not isinstance(x, np.ndarray):  # cupyx's polygamma takes an array order only
            n = backend_of(x).asarray(n)
        return sp.polygamma(n, x)

    derivs = (NoDerivative("n is an integer order; pass it as an int or a constant Tensor"),
              lambda n, x, out: polygamma(n + 1, x))


polygamma = _public(
    Polygamma,
    """The polygamma function ``psi^(n)(x)``, the ``n``-th derivative of digamma
    (``scipy.special.polygamma``).

    Args:
        n: Non-negative integer order(s) (an int, or an integer array/Tensor broadcasting with
            ``x``); ``polygamma(0, x)`` is ``digamma(x)``.
        x: Tensor, array or number. Complex ``x`` is supported here (SciPy's is real only):
            for ``n >= 1`` by the recurrence ``psi_n(z) = psi_n(z + 1) - (-1)**n n! / z**(n+1)``
            up to ``|z| >= 20 + 2n`` and the asymptotic series (Abramowitz and Stegun 6.4.11),
            relative error about ``1e-15``; NaN where ``Re z < -1e5``.

    Returns:
        Tensor of the broadcast shape (float32 for float32 ``x``, else float64/complex128).

    Raises:
        NotImplementedError: when the derivative with respect to ``n`` is requested.

    Derivative in ``x``: ``polygamma(n + 1, x)``.
    """,
    check="order",
)


class Multigammaln(Elementwise):
    """The multivariate log-gamma function (primitive of :func:`multigammaln`)."""

    oper = "multigammaln"
    argnames = ("a",)
    derivs = (lambda a, out, d: sum(digamma(a - 0.5 * j) for j in range(d)),)

    @classmethod
    def output_dtype(cls, dtype, d):
        return np.dtype(np.float32) if dtype == np.float32 else np.dtype(np.float64)


def multigammaln(a, d: int) -> Tensor:
    """The log of the multivariate gamma function of dimension ``d``
    (``scipy.special.multigammaln``):
    ``log Gamma_d(a) = d (d - 1) / 4 log(pi) + sum_{j=0}^{d-1} gammaln(a - j / 2)``.

    Args:
        a: Real Tensor, array or number; every entry must exceed ``(d - 1) / 2``.
        d: Positive int, the dimension.

    Returns:
        Tensor of ``a``'s shape (float32 for float32 input, else float64).

    Raises:
        ValueError: if an entry of ``a`` is ``<= (d - 1) / 2`` (SciPy's check), naming the
            function.
        TypeError: if ``d`` is not an int, or ``a`` is complex.

    Derivative: ``sum_{j=0}^{d-1} digamma(a - j / 2)``.
    """
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise TypeError(f"multigammaln: d must be a positive int, got {d!r}")
    a = tensor_arg(a)
    _real("multigammaln", a=a)
    return Multigammaln.apply(a, d=int(d))


def _rgamma_deriv(x, out):
    # -rgamma(x) digamma(x) away from the poles of Gamma; for Re x < 1/2 the reflection form
    # 1/Gamma(x) = Gamma(1 - x) sin(pi x) / pi, whose derivative
    # Gamma(1 - x) (cos(pi x) - digamma(1 - x) sin(pi x) / pi) is finite at 0, -1, -2, ...
    # (where 1/Gamma has simple zeros) and exact to every order.
    xr = tnp.real(x) if x.dtype.kind == "c" else x
    left = xr < 0.5
    xl = tnp.where(left, x, 0.0)
    xh = tnp.where(left, 1.0, x)
    g1 = gamma(1.0 - xl)
    dl = g1 * (tnp.cos(math.pi * xl) - digamma(1.0 - xl) * tnp.sin(math.pi * xl) / math.pi)
    dh = -rgamma(xh) * digamma(xh)
    return tnp.where(left, dl, dh)


class Rgamma(Elementwise):
    """``1 / Gamma(x)`` (primitive of :func:`rgamma`)."""

    oper = "rgamma"
    derivs = (_rgamma_deriv,)


rgamma = _public(
    Rgamma,
    """The reciprocal gamma function ``1 / Gamma(x)``, an entire function
    (``scipy.special.rgamma``; 0 at ``0, -1, -2, ...``).

    Args:
        x: Tensor, array or number; real or complex.

    Returns:
        Tensor of ``x``'s shape (single precision in, single precision out).

    Derivative: ``-rgamma(x) digamma(x)``; for ``Re x < 1/2`` through the reflection formula
    ``1/Gamma(x) = Gamma(1 - x) sin(pi x) / pi``, so it is finite and exact (to every order) at
    the zeros ``0, -1, -2, ...`` too (slope ``(-1)**n n!`` at ``-n``).
    """,
    check=None,
)


class Gammasgn(Elementwise):
    """The sign of the gamma function (primitive of :func:`gammasgn`)."""

    oper = "gammasgn"
    derivs = (None,)  # piecewise constant


gammasgn = _public(
    Gammasgn,
    """The sign of the gamma function, ``1`` or ``-1`` (``scipy.special.gammasgn``: NaN at
    the poles ``-1, -2, ...`` and at NaN; ``0.0`` gives ``1`` and ``-0.0`` gives ``-1``).

    Args:
        x: Real Tensor, array or number.

    Returns:
        Tensor of ``x``'s shape and floating dtype (single precision in, single precision out).

    Derivative: zero (piecewise constant), in both modes; ``gamma(x) = gammasgn(x) *
    exp(gammaln(x))`` differentiates through ``gammaln``.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> from tapegrad.scipy.special import gammasgn
        >>> gammasgn(tnp.asarray([0.5, -0.5, -1.5]))
        Tensor([ 1., -1.,  1.], dtype=float32)
    """,
    check=None,
)


# -- beta family ------------------------------------------------------------------------------
class Beta(Elementwise):
    """The beta function (primitive of :func:`beta`)."""

    oper = "beta"
    argnames = ("a", "b")
    derivs = (lambda a, b, out: out * (digamma(a) - digamma(a + b)),
              lambda a, b, out: out * (digamma(b) - digamma(a + b)))


beta = _public(
    Beta,
    """The beta function ``B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b)``
    (``scipy.special.beta``).

    Args:
        a, b: Real Tensors, arrays or numbers; broadcast together.

    Returns:
        Tensor of the broadcast shape.

    Raises:
        TypeError: for complex input. ValueError: if the shapes do not broadcast.

    Derivatives: ``B(a, b) (digamma(a) - digamma(a + b))`` and the same with ``a`` and ``b``
    swapped.
    """,
)


class Betaln(Elementwise):
    """``log|B(a, b)|`` (primitive of :func:`betaln`)."""

    oper = "betaln"
    argnames = ("a", "b")
    derivs = (lambda a, b, out: digamma(a) - digamma(a + b),
              lambda a, b, out: digamma(b) - digamma(a + b))


betaln = _public(
    Betaln,
    """Natural log of the absolute value of the beta function (``scipy.special.betaln``),
    accurate where ``B(a, b)`` itself under- or overflows.

    Args:
        a, b: Real Tensors, arrays or numbers; broadcast together.

    Returns:
        Tensor of the broadcast shape.

    Raises:
        TypeError: for complex input. ValueError: if the shapes do not broadcast.

    Derivatives: ``digamma(a) - digamma(a + b)`` and ``digamma(b) - digamma(a + b)``.
    """,
)


def _beta_density(a, b, x):
    """``x**(a-1) (1-x)**(b-1) / B(a, b)``, the x-derivative of ``betainc``."""
    return tnp.exp(xlogy(a - 1.0, x) + xlog1py(b - 1.0, -x) - betaln(a, b))


def _gamma_density(a, x):
    """``x**(a-1) e**-x / Gamma(a)``, the x-derivative of ``gammainc``."""
    return tnp.exp(xlogy(a - 1.0, x) - x - gammaln(a))


class BetaincPartial(Elementwise):
    """``d^(i+j)/(da^i db^j) betainc(a, b, x)`` for ``i + j >= 1`` (a primitive: no closed
    form), computed by :func:`tapegrad.scipy._incomplete.betainc_partial`. Its own derivatives
    in ``a`` and ``b`` raise ``i`` or ``j`` by one; in ``x`` they are the matching derivatives
    of the beta density (nested forward mode), so every order is available."""

    oper = "betainc_partial"
    argnames = ("a", "b", "x")
    host_only = True

    @staticmethod
    def fn(sp, a, b, x, i, j):
        return _incomplete.betainc_partial(a, b, x, i, j)

    derivs = (
        lambda a, b, x, out, i, j: BetaincPartial.apply(a, b, x, i=i + 1, j=j),
        lambda a, b, x, out, i, j: BetaincPartial.apply(a, b, x, i=i, j=j + 1),
        lambda a, b, x, out, i, j: _nested(_beta_density, _as_tensors(a, b, x), (i, j, 0)),
    )


def _as_tensors(*vals):
    like = next(v for v in vals if isinstance(v, Tensor))
    return [v if isinstance(v, Tensor) else tnp.full_like(like, v) for v in vals]


class Betainc(Elementwise):
    """The regularized incomplete beta function (primitive of :func:`betainc`)."""

    oper = "betainc"
    argnames = ("a", "b", "x")
    derivs = (
        lambda a, b, x, out: BetaincPartial.apply(a, b, x, i=1, j=0),
        lambda a, b, x, out: BetaincPartial.apply(a, b, x, i=0, j=1),
        lambda a, b, x, out: _beta_density(a, b, x),
    )


betainc = _public(
    Betainc,
    """The regularized incomplete beta function
    ``I_x(a, b) = int_0^x t**(a-1) (1-t)**(b-1) dt / B(a, b)`` (``scipy.special.betainc``).

    Args:
        a, b: Real Tensors, arrays or numbers, ``> 0``.
        x: Real Tensor, array or number in ``[0, 1]``; the three broadcast together.

    Returns:
        Tensor of the broadcast shape; NaN outside the domain (as SciPy).

    Raises:
        TypeError: for complex input. ValueError: if the shapes do not broadcast.

    Derivatives:
        In ``x``: the beta density ``x**(a-1) (1-x)**(b-1) / B(a, b)``.
        In ``a`` and ``b`` (no closed form): the Taylor coefficients of the continued fraction
        of Abramowitz and Stegun 26.5.8 (Numerical Recipes 6.4) evaluated in truncated Taylor
        arithmetic in ``(a, b)``, with ``I_x(a, b) = 1 - I_{1-x}(b, a)`` for
        ``x > (a + 1) / (a + b + 2)``. Relative accuracy better than ``1e-11`` against mpmath
        for ``a, b`` in [0.05, 1000] (first, second and mixed derivatives); NaN where the
        expansion does not converge in 20000 terms (``a`` or ``b`` beyond about ``1e7``). Every
        order is available (each derivative of that primitive is another one).
    """,
)


# -- incomplete gamma -------------------------------------------------------------------------
class GammaincPartial(Elementwise):
    """``d^k/da^k gammainc(a, x)`` for ``k >= 1`` (a primitive: no closed form), computed by
    :func:`tapegrad.scipy._incomplete.gammainc_partial`. Its derivative in ``a`` is the one of
    order ``k + 1``; in ``x`` the ``k``-th ``a``-derivative of the gamma density (nested
    forward mode), so every order is available."""

    oper = "gammainc_partial"
    argnames = ("a", "x")
    host_only = True

    @staticmethod
    def fn(sp, a, x, k):
        return _incomplete.gammainc_partial(a, x, k)

    derivs = (
        lambda a, x, out, k: GammaincPartial.apply(a, x, k=k + 1),
        lambda a, x, out, k: _nested(_gamma_density, _as_tensors(a, x), (k, 0)),
    )


class Gammainc(Elementwise):
    """The regularized lower incomplete gamma function (primitive of :func:`gammainc`)."""

    oper = "gammainc"
    argnames = ("a", "x")
    derivs = (lambda a, x, out: GammaincPartial.apply(a, x, k=1),
              lambda a, x, out: _gamma_density(a, x))


_GAMMAINC_DA = """In ``a`` (no closed form): the Taylor coefficients, in truncated Taylor
        arithmetic in ``a``, of the series ``P = x**a e**-x / Gamma(a + 1) sum_n x**n /
        ((a + 1) ... (a + n))`` for ``x < a + 1`` (Abramowitz and Stegun 6.5.29) and of
        Legendre's continued fraction for ``Q = 1 - P`` otherwise (A&S 6.5.31, modified Lentz);
        the approach of JAX's ``igamma_grad_a``. Relative accuracy better than ``1e-11``
        against mpmath for ``a`` in [0.05, 1000] (first, second and third derivatives); NaN
        where the expansion does not converge in 20000 terms (``a`` beyond about ``1e7``). Every
        order is available."""


gammainc = _public(
    Gammainc,
    """The regularized lower incomplete gamma function
    ``P(a, x) = int_0^x t**(a-1) e**-t dt / Gamma(a)`` (``scipy.special.gammainc``).

    Args:
        a: Real Tensor, array or number, ``> 0``.
        x: Real Tensor, array or number, ``>= 0``; broadcasts with ``a``.

    Returns:
        Tensor of the broadcast shape; NaN outside the domain (as SciPy).

    Raises:
        TypeError: for complex input. ValueError: if the shapes do not broadcast.

    Derivatives:
        In ``x``: the gamma density ``x**(a-1) e**-x / Gamma(a)``.
        __DA__
    """.replace("__DA__", _GAMMAINC_DA),
)


class Gammaincc(Elementwise):
    """The regularized upper incomplete gamma function (primitive of :func:`gammaincc`)."""

    oper = "gammaincc"
    argnames = ("a", "x")
    derivs = (lambda a, x, out: -GammaincPartial.apply(a, x, k=1),
              lambda a, x, out: -_gamma_density(a, x))


gammaincc = _public(
    Gammaincc,
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``
    (``scipy.special.gammaincc``), accurate where ``P`` is close to 1.

    Args:
        a: Real Tensor, array or number, ``> 0``.
        x: Real Tensor, array or number, ``>= 0``; broadcasts with ``a``.

    Returns:
        Tensor of the broadcast shape; NaN outside the domain.

    Raises:
        TypeError: for complex input. ValueError: if the shapes do not broadcast.

    Derivatives:
        In ``x``: minus the gamma density.
        In ``a``: minus that of :func:`gammainc` (same method and accuracy).
    """,
)


# -- error function family --------------------------------------------------------------------
erf = tnp.erf
erfc = tnp.erfc


class Erfinv(Elementwise):
    """Inverse error function (primitive of :func:`erfinv`)."""

    oper = "erfinv"
    nonan = True
    derivs = (lambda x, out: _SQRT_PI_2 * tnp.exp(out * out),)


erfinv = _public(
    Erfinv,
    """Inverse of the error function on ``[-1, 1]`` (``scipy.special.erfinv``; ``+-inf`` at
    ``+-1``, NaN outside).""",
    derivative="``sqrt(pi)/2 exp(erfinv(x)**2)``; infinite at ``+-1`` (NaN-safe there).",
)


class Erfcinv(Elementwise):
    """Inverse complementary error function (primitive of :func:`erfcinv`)."""

    oper = "erfcinv"
    nonan = True
    derivs = (lambda x, out: -_SQRT_PI_2 * tnp.exp(out * out),)


erfcinv = _public(
    Erfcinv,
    """Inverse of the complementary error function on ``[0, 2]``
    (``scipy.special.erfcinv``; ``+inf`` at 0, ``-inf`` at 2, NaN outside).""",
    derivative="``-sqrt(pi)/2 exp(erfcinv(x)**2)``; infinite at 0 and 2 (NaN-safe there).",
)


def expit(x) -> Tensor:
    """The logistic sigmoid ``1 / (1 + exp(-x))`` (``scipy.special.expit``): tapegrad's
    :func:`tapegrad.numpy.sigmoid`, stable for every ``x``.

    Args:
        x: Real Tensor, array or number.

    Returns:
        Tensor of ``x``'s shape (float32 stays float32).

    Raises:
        TypeError: for complex input.

    Derivative: ``expit(x) expit(-x)``.
    """
    (x,) = operands(x)
    _real("expit", x=x)
    return tnp.sigmoid(x)


class Logit(Elementwise):
    """``log(p / (1 - p))`` (primitive of :func:`logit`)."""

    oper = "logit"
    argnames = ("p",)
    nonan = True
    derivs = (lambda p, out: 1.0 / (p * (1.0 - p)),)


logit = _public(
    Logit,
    """The logit ``log(p / (1 - p))``, inverse of :func:`expit` (``scipy.special.logit``;
    ``-inf`` at 0, ``inf`` at 1, NaN outside ``[0, 1]``).""",
    derivative="``1 / (p (1 - p))``; infinite at 0 and 1 (NaN-safe there).",
)


class Ndtr(Elementwise):
    """The standard normal CDF (primitive of :func:`ndtr`)."""

    oper = "ndtr"
    derivs = (lambda x, out: tnp.exp(-0.5 * (x * x)) / _SQRT_2PI,)


ndtr = _public(
    Ndtr,
    """The standard normal cumulative distribution function
    ``Phi(x) = (1 + erf(x / sqrt(2))) / 2`` (``scipy.special.ndtr``).""",
    derivative="the standard normal density ``exp(-x**2 / 2) / sqrt(2 pi)``.",
    check=None,
)


class LogNdtr(Elementwise):
    """``log(ndtr(x))`` (primitive of :func:`log_ndtr`)."""

    oper = "log_ndtr"
    derivs = (lambda x, out: tnp.exp(-0.5 * (x * x) - _LOG_SQRT_2PI - out),)


log_ndtr = _public(
    LogNdtr,
    """Log of the standard normal CDF, accurate far in the left tail
    (``scipy.special.log_ndtr``).""",
    derivative="""``phi(x) / Phi(x)``, computed as ``exp(-x**2/2 - log(sqrt(2 pi)) -
    log_ndtr(x))``: finite (about ``-x``) far in the left tail, where ``Phi`` underflows.""",
    check=None,
)


class Ndtri(Elementwise):
    """The inverse of :func:`ndtr` (primitive of :func:`ndtri`)."""

    oper = "ndtri"
    argnames = ("p",)
    nonan = True
    derivs = (lambda p, out: _SQRT_2PI * tnp.exp(0.5 * (out * out)),)


ndtri = _public(
    Ndtri,
    """The standard normal quantile function, inverse of :func:`ndtr`
    (``scipy.special.ndtri``; ``-inf`` at 0, ``inf`` at 1, NaN outside ``[0, 1]``).""",
    derivative="``sqrt(2 pi) exp(ndtri(p)**2 / 2)``; infinite at 0 and 1 (NaN-safe there).",
)


# -- logsumexp and softmax ----------------------------------------------------------------------
def _reduced_size(shape, axis):
    if axis is None:
        return int(np.prod(shape))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return int(np.prod([shape[a] for a in axes]))


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """``log(sum(b * exp(a)))`` along ``axis``, computed stably (``scipy.special.logsumexp``).

    Without ``b`` and for real ``a`` this is :func:`tapegrad.numpy.logsumexp` (the shifted
    form of Blanchard, Higham and Higham 2021). Otherwise the sum is shifted by the largest
    real part of ``a`` where ``b != 0`` (held constant: the result does not depend on it, so
    the derivative is exact at every order).

    Args:
        a: Tensor, array or number; real or complex.
        axis: Axis or tuple of axes to reduce; ``None`` (the default, as SciPy) reduces all.
        b: Optional scale factors broadcasting with ``a`` (may be negative or zero).
        keepdims: Keep the reduced axes with size 1.
        return_sign: Also return the sign of the sum: then the first result is
            ``log|sum|`` and the second ``sign(sum)`` (for complex input, ``sum / |sum|``).

    Returns:
        Tensor of ``a``'s dtype with the reduced shape (``-inf`` for an empty reduction), or
        ``(result, sign)`` with ``return_sign``. Without ``return_sign`` a negative real sum
        gives NaN, as SciPy.

    Raises:
        ValueError: if ``a`` and ``b`` do not broadcast or ``axis`` is out of range.

    Derivative: ``softmax``-weighted: ``d/da_i = b_i exp(a_i) / sum``, ``d/db_i =
    exp(a_i) / sum``.

    References:
        Blanchard, Higham and Higham, "Accurately computing the log-sum-exp and softmax
        functions", IMA J. Numer. Anal. 41(4), 2021.
    """
    keepdims = bool_arg(keepdims, "logsumexp", "keepdims")
    a = tensor_arg(a)
    if b is None and not return_sign and a.dtype.kind != "c":
        return tnp.logsumexp(a, axis=axis, keepdims=keepdims)
    if b is not None:
        b = tensor_arg(b)
        try:
            shape = np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            raise ValueError(
                f"logsumexp: a of shape {a.shape} and b of shape {b.shape} do not broadcast"
            ) from None
        a = tnp.broadcast_to(a, shape)
        b = tnp.broadcast_to(b, shape)
    ar = tnp.real(a) if a.dtype.kind == "c" else a
    ar = StopGradient.apply(ar)
    if b is not None:
        ar = tnp.where(b != 0, ar, -np.inf)
    if _reduced_size(a.shape, axis) == 0:
        c = tnp.zeros_like(tnp.sum(ar, axis=axis, keepdims=True))
    else:
        c = tnp.max(ar, axis=axis, keepdims=True)
        c = tnp.where(tnp.isfinite(c), c, 0.0)
    e = tnp.exp(a - c)
    if b is not None:
        e = e * b
    s = tnp.sum(e, axis=axis, keepdims=True)
    if return_sign:
        mag = tnp.abs(s)
        out = tnp.log(mag) + c
        if s.dtype.kind == "c":
            sign = s / tnp.where(mag == 0, 1.0, mag)
        else:
            sign = tnp.sign(s)
    else:
        out = tnp.log(s) + c
    if not keepdims:
        out = _squeeze(out, axis, a.ndim)
        if return_sign:
            sign = _squeeze(sign, axis, a.ndim)
    return (out, sign) if return_sign else out


def _squeeze(t, axis, ndim):
    if axis is None:
        return t.reshape(())
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = {int(x) % max(ndim, 1) for x in axes}
    return t.reshape(tuple(s for i, s in enumerate(t.shape) if i not in axes))


def softmax(x, axis=None) -> Tensor:
    """The softmax ``exp(x) / sum(exp(x))`` along ``axis`` (``scipy.special.softmax``).

    Args:
        x: Real Tensor, array or number.
        axis: Axis or tuple of axes to normalize over; ``None`` (the default, as SciPy)
            normalizes over all entries.

    Returns:
        Tensor of ``x``'s shape and dtype, summing to 1 along ``axis``.

    Raises:
        TypeError: for complex input.

    Derivative: that of the composite ``exp(x - logsumexp(x, axis, keepdims=True))``:
    ``J v = s * (v - sum(s * v))`` with ``s = softmax(x)``.
    """
    x = tensor_arg(x)
    _real("softmax", x=x)
    return tnp.exp(x - tnp.logsumexp(x, axis=axis, keepdims=True))


def log_softmax(x, axis=None) -> Tensor:
    """The log of :func:`softmax`, ``x - logsumexp(x)`` along ``axis``
    (``scipy.special.log_softmax``), accurate where the softmax underflows.

    Args:
        x: Real Tensor, array or number.
        axis: Axis or tuple of axes; ``None`` (the default, as SciPy) uses all entries.

    Returns:
        Tensor of ``x``'s shape and dtype.

    Raises:
        TypeError: for complex input.

    Derivative: ``J v = v - sum(softmax(x) * v)``.
    """
    x = tensor_arg(x)
    _real("log_softmax", x=x)
    return x - tnp.logsumexp(x, axis=axis, keepdims=True)


# -- x log y -------------------------------------------------------------------------------------
class Xlogy(Elementwise):
    """``x log(y)``, 0 where ``x == 0`` (primitive of :func:`xlogy`)."""

    oper = "xlogy"
    argnames = ("x", "y")
    derivs = (lambda x, y, out: tnp.log(y),
              lambda x, y, out: DivNoNan.apply(x, y))


xlogy = _public(
    Xlogy,
    """``x * log(y)``, with ``0`` wherever ``x == 0`` (even at ``y = 0``)
    (``scipy.special.xlogy``).

    Args:
        x, y: Tensors, arrays or numbers, real or complex; broadcast together.

    Returns:
        Tensor of the broadcast shape.

    Raises:
        ValueError: if the shapes do not broadcast.

    Derivatives (holomorphic; as JAX): ``log(y)`` in ``x`` and ``x / y`` in ``y``, the latter
    exactly 0 where ``x == 0`` (the function is 0 for every ``y`` there).
    """,
    check=None,
)


class Xlog1py(Elementwise):
    """``x log1p(y)``, 0 where ``x == 0`` (primitive of :func:`xlog1py`)."""

    oper = "xlog1py"
    argnames = ("x", "y")
    derivs = (lambda x, y, out: tnp.log1p(y),
              lambda x, y, out: DivNoNan.apply(x, 1.0 + y))


xlog1py = _public(
    Xlog1py,
    """``x * log1p(y)``, with ``0`` wherever ``x == 0`` (even at ``y = -1``)
    (``scipy.special.xlog1py``).

    Args:
        x, y: Tensors, arrays or numbers, real or complex; broadcast together.

    Returns:
        Tensor of the broadcast shape.

    Raises:
        ValueError: if the shapes do not broadcast.

    Derivatives: ``log1p(y)`` in ``x`` and ``x / (1 + y)`` in ``y`` (exactly 0 where
    ``x == 0``).
    """,
    check=None,
)


class Entr(Elementwise):
    """``-x log(x)`` (primitive of :func:`entr`)."""

    oper = "entr"
    nonan = True
    derivs = (lambda x, out: -(tnp.log(x) + 1.0),)


entr = _public(
    Entr,
    """Elementwise entropy ``-x log(x)`` for ``x > 0``, ``0`` at ``x = 0`` and ``-inf`` for
    ``x < 0`` (``scipy.special.entr``).""",
    derivative="""``-(log(x) + 1)`` (as JAX): ``+inf`` at 0 (NaN-safe: a zero cotangent gives
    0), NaN for ``x < 0`` where the function is constantly ``-inf``.""",
)


# -- Bessel functions --------------------------------------------------------------------------
_ORDER = NoDerivative(
    "the derivative in the order has no closed form and is not implemented; pass the order "
    "as a number or a constant Tensor"
)
_INT_ORDER = NoDerivative("n is an integer order; pass it as an int or a constant Tensor")


def _sign(x):
    return tnp.sign(tnp.real(x) if x.dtype.kind == "c" else x)


class I0(Elementwise):
    """Modified Bessel function of order 0 (primitive of :func:`i0`)."""

    oper = "i0"
    derivs = (lambda x, out: i1(x),)


i0 = _public(
    I0,
    """Modified Bessel function of the first kind of order 0, ``I_0(x)``
    (``scipy.special.i0``).""",
    use="iv",
    derivative="``I_1(x)`` (DLMF 10.29.3).",
)


class I0e(Elementwise):
    """Exponentially scaled ``I_0`` (primitive of :func:`i0e`)."""

    oper = "i0e"
    derivs = (lambda x, out: i1e(x) - tnp.sign(x) * out,)


i0e = _public(
    I0e,
    """Exponentially scaled modified Bessel function of order 0, ``exp(-|x|) I_0(x)``
    (``scipy.special.i0e``), finite for large ``|x|``.""",
    use="ive",
    derivative="""``i1e(x) - sign(x) i0e(x)`` (0 at the kink ``x = 0``, where both one-sided
    derivatives have magnitude 1).""",
)


class I1(Elementwise):
    """Modified Bessel function of order 1 (primitive of :func:`i1`)."""

    oper = "i1"
    derivs = (lambda x, out: 0.5 * (i0(x) + iv(2, x)),)


i1 = _public(
    I1,
    """Modified Bessel function of the first kind of order 1, ``I_1(x)``
    (``scipy.special.i1``).""",
    use="iv",
    derivative="``(I_0(x) + I_2(x)) / 2`` (DLMF 10.29.1).",
)


class I1e(Elementwise):
    """Exponentially scaled ``I_1`` (primitive of :func:`i1e`)."""

    oper = "i1e"
    derivs = (lambda x, out: 0.5 * (i0e(x) + ive(2, x)) - tnp.sign(x) * out,)


i1e = _public(
    I1e,
    """Exponentially scaled modified Bessel function of order 1, ``exp(-|x|) I_1(x)``
    (``scipy.special.i1e``).""",
    use="ive",
    derivative="``(i0e(x) + ive(2, x)) / 2 - sign(x) i1e(x)``.",
)


class Iv(Elementwise):
    """Modified Bessel function of real order (primitive of :func:`iv`)."""

    oper = "iv"
    argnames = ("v", "z")
    derivs = (_ORDER, lambda v, z, out: 0.5 * (iv(v - 1, z) + iv(v + 1, z)))


iv = _public(
    Iv,
    """Modified Bessel function of the first kind of real order, ``I_v(z)``
    (``scipy.special.iv``).

    Args:
        v: Real order(s): Tensor, array or number.
        z: Tensor, array or number, real or complex (for real ``z < 0`` the order must be an
            integer, else NaN, as SciPy); broadcasts with ``v``.

    Returns:
        Tensor of the broadcast shape.

    Raises:
        NotImplementedError: when the derivative with respect to ``v`` is requested.
        TypeError: for a complex order.

    Derivative in ``z``: ``(I_{v-1}(z) + I_{v+1}(z)) / 2`` (DLMF 10.29.1; holomorphic).
    """,
    check="order",
)


class Ive(Elementwise):
    """Exponentially scaled ``I_v`` (primitive of :func:`ive`). Not holomorphic for complex
    ``z`` (the factor ``exp(-|Re z|)``): its rules give the two Wirtinger derivatives."""

    oper = "ive"
    argnames = ("v", "z")
    derivs = (_ORDER, None)

    @classmethod
    def _parts(cls, ctx):
        """``(d/dz, d/dconj(z))`` of ``ive(v, z)``."""
        v, z, out = ctx.saved_tensors
        h = 0.5 * (ive(v - 1, z) + ive(v + 1, z))
        if z.dtype.kind != "c":
            return h - tnp.sign(z) * out, None
        b = (-0.5 * _sign(z)) * out
        return h + b, b

    @classmethod
    def backward(cls, ctx, g):
        nv, nz = ctx.needs_input_grad
        cls._partials(ctx, (nv, False))  # raises for the order
        if not nz:
            return None, None
        dz, dzbar = cls._parts(ctx)
        gz = g * dz
        if dzbar is not None:
            gz = gz + tnp.conj(g * dzbar)
        return None, gz

    @classmethod
    def jvp(cls, ctx, tv, tz):
        cls._partials(ctx, (tv is not None, False))
        if tz is None:
            return None
        dz, dzbar = cls._parts(ctx)
        out = dz * tz
        if dzbar is not None:
            out = out + dzbar * tnp.conj(tz)
        return out


ive = _public(
    Ive,
    """Exponentially scaled modified Bessel function ``exp(-|Re z|) I_v(z)``
    (``scipy.special.ive``), finite for large ``|z|``.

    Args:
        v: Real order(s).
        z: Tensor, array or number, real or complex; broadcasts with ``v``.

    Returns:
        Tensor of the broadcast shape.

    Raises:
        NotImplementedError: when the derivative with respect to ``v`` is requested.
        TypeError: for a complex order.

    Derivative in ``z``: for real ``z``, ``(ive(v-1, z) + ive(v+1, z)) / 2 - sign(z) ive(v,
    z)`` (the kink at 0 gets ``sign(0) = 0``). For complex ``z`` the function is not
    holomorphic; with ``h`` the first term, ``df/dz = h - sign(Re z) ive / 2`` and
    ``df/dconj(z) = -sign(Re z) ive / 2``, combined by JAX's convention (cotangent
    ``g df/dz + conj(g df/dconj(z))``).
    """,
    check="order",
)


class J0(Elementwise):
    """Bessel function of order 0 (primitive of :func:`j0`)."""

    oper = "j0"
    derivs = (lambda x, out: -j1(x),)


j0 = _public(
    J0,
    "Bessel function of the first kind of order 0, ``J_0(x)`` (``scipy.special.j0``).",
    use="jn",
    derivative="``-J_1(x)`` (DLMF 10.6.3).",
)


class J1(Elementwise):
    """Bessel function of order 1 (primitive of :func:`j1`)."""

    oper = "j1"
    derivs = (lambda x, out: 0.5 * (j0(x) - jn(2, x)),)


j1 = _public(
    J1,
    "Bessel function of the first kind of order 1, ``J_1(x)`` (``scipy.special.j1``).",
    use="jn",
    derivative="``(J_0(x) - J_2(x)) / 2`` (DLMF 10.6.1).",
)


class Jn(Elementwise):
    """Bessel function of the first kind (primitive of :func:`jn`)."""

    oper = "jn"
    argnames = ("n", "z")
    fn = staticmethod(lambda sp, n, z: sp.jv(n, z))
    derivs = (_INT_ORDER, lambda n, z, out: 0.5 * (jn(n - 1, z) - jn(n + 1, z)))


jn = _public(
    Jn,
    """Bessel function of the first kind, ``J_n(z)`` (``scipy.special.jn``, which is
    ``jv``: a non-integer order is accepted too).

    Args:
        n: Order(s): Tensor, array or number.
        z: Tensor, array or number, real or complex; broadcasts with ``n``.

    Returns:
        Tensor of the broadcast shape.

    Raises:
        NotImplementedError: when the derivative with respect to ``n`` is requested.
        TypeError: for a complex order.

    Derivative in ``z``: ``(J_{n-1}(z) - J_{n+1}(z)) / 2`` (DLMF 10.6.1; holomorphic).
    """,
    check="order",
)


class Y0(Elementwise):
    """Bessel function of the second kind of order 0 (primitive of :func:`y0`)."""

    oper = "y0"
    derivs = (lambda x, out: -y1(x),)


y0 = _public(
    Y0,
    """Bessel function of the second kind of order 0, ``Y_0(x)`` (``scipy.special.y0``;
    ``-inf`` at 0, NaN for ``x < 0``).""",
    derivative="``-Y_1(x)`` (DLMF 10.6.3).",
)


class Y1(Elementwise):
    """Bessel function of the second kind of order 1 (primitive of :func:`y1`)."""

    oper = "y1"
    derivs = (lambda x, out: 0.5 * (y0(x) - yn(2, x)),)


y1 = _public(
    Y1,
    "Bessel function of the second kind of order 1, ``Y_1(x)`` (``scipy.special.y1``).",
    derivative="``(Y_0(x) - Y_2(x)) / 2`` (DLMF 10.6.1).",
)


class Yn(Elementwise):
    """Bessel function of the second kind of integer order (primitive of :func:`yn`)."""

    oper = "yn"
    argnames = ("n", "x")
    derivs = (_INT_ORDER, lambda n, x, out: 0.5 * (yn(n - 1, x) - yn(n + 1, x)))


yn = _public(
    Yn,
    """Bessel function of the second kind of integer order, ``Y_n(x)``
    (``scipy.special.yn``).

    Args:
        n: Integer order(s).
        x: Real Tensor, array or number; broadcasts with ``n``.

    Returns:
        Tensor of the broadcast shape.

    Raises:
        NotImplementedError: when the derivative with respect to ``n`` is requested.
        TypeError: for complex input.

    Derivative in ``x``: ``(Y_{n-1}(x) - Y_{n+1}(x)) / 2`` (DLMF 10.6.1).
    """,
)
