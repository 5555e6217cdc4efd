"""Elementwise functions, comparisons and logic of ``tapegrad.numpy``.

Conventions shared by every function here:

- Operands may be Tensors, NumPy/CuPy arrays or Python numbers; they broadcast like NumPy and
  the result has the broadcast shape. Shapes that do not broadcast raise ``ValueError`` naming
  the op and the shapes.
- Dtypes follow NumPy's promotion; a Python number keeps the other operand's dtype
  (``tnp.maximum(x32, 0.0)`` is float32). When every operand is a Python number the first
  becomes a float32 Tensor (tapegrad's default for Python data). Transcendental functions of
  integer inputs are float64, as in NumPy. Gradients exist for floating inputs only.
- Out of the domain the result is NaN (``inf`` at a pole), without a warning. Rules whose
  derivative is unbounded give a zero gradient wherever the cotangent is zero, so
  ``where(x > 0, sqrt(x), 0.0)`` has a finite gradient at 0.
- Conventions at kinks (``abs``, ``relu``, ``maximum``, ``clip``, ...) are tabulated in
  ``docs/conventions.md``.
"""

from __future__ import annotations

import numpy as _np

from tapegrad import ops as _ops
from tapegrad.numpy._core import _install_methods, _t, _tensor
from tapegrad.tensor import Tensor

__all__ = [
    # arithmetic
    "add", "subtract", "multiply", "divide", "true_divide", "power", "pow", "negative",
    "square", "reciprocal",
    # exponentials and logarithms
    "exp", "expm1", "log", "log1p", "log2", "log10", "logaddexp",
    # trigonometric and hyperbolic
    "sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "asin", "acos", "atan",
    "atan2", "hypot", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "asinh", "acosh",
    "atanh",
    # roots, absolute value, sign, piecewise
    "sqrt", "abs", "absolute", "sign", "where", "maximum", "minimum", "clip", "floor", "ceil",
    "round", "around", "remainder", "mod", "floor_divide",
    # special functions and activations
    "erf", "erfc", "sigmoid", "softplus", "relu", "gelu",
    # comparisons and logic
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and",
    "logical_or", "logical_xor", "logical_not", "isfinite", "isnan", "isinf",
]  # fmt: skip


def _bin(x, y):
    """Binary operands: Tensors stay, Python numbers stay weak, two numbers -> float32 Tensor."""
    if type(x) is Tensor and type(y) is Tensor:
        return x, y
    x, y = _t(x), _t(y)
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        x = _tensor(x)
    return x, y


# -- arithmetic -------------------------------------------------------------------------------
def add(x, y) -> Tensor:
    """``x + y`` elementwise, broadcasting.

    Args:
        x, y: Tensors, arrays or Python numbers of broadcastable shapes.

    Returns:
        Tensor of the broadcast shape and the promoted dtype. Gradient: the cotangent, summed
        over broadcast dimensions, to each operand.

    Raises:
        ValueError: if the shapes do not broadcast (the message names ``add`` and the shapes).
    """
    return _ops.Add.apply(*_bin(x, y))


def subtract(x, y) -> Tensor:
    """``x - y`` elementwise, broadcasting (see :func:`add`). Gradients: ``g`` and ``-g``."""
    return _ops.Sub.apply(*_bin(x, y))


def multiply(x, y) -> Tensor:
    """``x * y`` elementwise, broadcasting (see :func:`add`). Gradients: ``g y`` and ``g x``."""
    return _ops.Mul.apply(*_bin(x, y))


def divide(x, y) -> Tensor:
    """True division ``x / y`` elementwise, broadcasting (``true_divide`` is the same function).

    Args:
        x, y: Tensors, arrays or Python numbers of broadcastable shapes.

    Returns:
        Tensor of the broadcast shape; integer inputs give float64 (NumPy). ``x / 0`` is
        ``+-inf`` (NaN for ``0 / 0``) without a warning. Gradients ``g / y`` and
        ``-g x / y**2``; both are 0 where the cotangent is 0, also at ``y = 0``.

    Raises:
        ValueError: if the shapes do not broadcast.
    """
    return _ops.Div.apply(*_bin(x, y))


true_divide = divide


def power(x, p) -> Tensor:
    """``x ** p`` elementwise, broadcasting; ``pow`` is the same function.

    Args:
        x: Base: Tensor, array or Python number.
        p: Exponent: Tensor, array or Python number (a Python number keeps ``x``'s dtype:
            ``power(x32, 2)`` is float32).

    Returns:
        Tensor of the broadcast shape and NumPy's result dtype. Negative bases with
        non-integer exponents give NaN; ``0 ** p`` for ``p < 0`` is ``inf``.

        Gradients: ``p x**(p-1)`` for ``x`` (0 where ``p == 0``; 0 where the cotangent is 0,
        also at ``x = 0`` with ``p < 1``) and ``log(x) x**p`` for ``p`` (0 at ``x = 0``, NaN for
        ``x < 0``).

    Raises:
        ValueError: if the shapes do not broadcast, or for integers to negative integer powers
            (as NumPy).
    """
    return _ops.Pow.apply(*_bin(x, p))


pow = power  # noqa: A001  (NumPy 2 / array-API name)


def negative(x) -> Tensor:
    """``-x`` elementwise. Gradient: ``-g``."""
    return _ops.Neg.apply(_tensor(x))


def square(x) -> Tensor:
    """``x * x`` elementwise (integers stay integer). Gradient: ``2 x g``."""
    return _ops.Square.apply(_tensor(x))


def reciprocal(x) -> Tensor:
    """``1 / x`` elementwise, NumPy's ``reciprocal``.

    Integer inputs stay integer and truncate (``reciprocal(2) == 0``), as in NumPy; write
    ``1.0 / x`` or cast first for a float result. ``1 / 0 = inf`` without a warning.
    Gradient: ``-g / x**2``, 0 where the cotangent is 0 (also at ``x = 0``).
    """
    return _ops.Reciprocal.apply(_tensor(x))


# -- exponentials and logarithms --------------------------------------------------------------
def exp(x) -> Tensor:
    """``e**x`` elementwise; overflows to ``inf`` without a warning. Gradient: ``g e**x``."""
    return _ops.Exp.apply(_tensor(x))


def expm1(x) -> Tensor:
    """``e**x - 1`` elementwise, accurate for small ``|x|``.

    Overflows to ``inf`` without a warning (``x > 88.7`` in float32, ``x > 709.8`` in float64);
    tends to -1 for very negative ``x``. Gradient: ``g e**x``.
    """
    return _ops.Expm1.apply(_tensor(x))


def log(x) -> Tensor:
    """Natural logarithm elementwise. Domain ``x > 0``: ``log(0) = -inf``, negative ``x`` gives
    NaN (no warning). Gradient ``g / x``; 0 where the cotangent is 0, also at ``x = 0``."""
    return _ops.Log.apply(_tensor(x))


def log1p(x) -> Tensor:
    """``log(1 + x)`` elementwise, accurate for small ``|x|``. Domain ``x > -1`` (``-inf`` at
    -1, NaN below). Gradient ``g / (1 + x)``; 0 where the cotangent is 0, also at -1."""
    return _ops.Log1p.apply(_tensor(x))


def log2(x) -> Tensor:
    """Base-2 logarithm elementwise. Domain ``x > 0``. Gradient ``g / (x ln 2)``; 0 where the
    cotangent is 0, also at ``x = 0``."""
    return _ops.Log2.apply(_tensor(x))


def log10(x) -> Tensor:
    """Base-10 logarithm elementwise. Domain ``x > 0``. Gradient ``g / (x ln 10)``; 0 where the
    cotangent is 0, also at ``x = 0``."""
    return _ops.Log10.apply(_tensor(x))


def logaddexp(x, y) -> Tensor:
    """``log(exp(x) + exp(y))`` elementwise without overflow or underflow, broadcasting.

    Exact to float precision for any finite inputs (``logaddexp(1e4, 1e4) = 1e4 + log 2``).
    Gradients: ``g sigmoid(x - y)`` and ``g sigmoid(y - x)``, each finite; at ``x == y ==
    +-inf`` each operand gets ``g / 2``.

    Raises:
        ValueError: if the shapes do not broadcast.
    """
    return _ops.Logaddexp.apply(*_bin(x, y))


# -- trigonometric and hyperbolic ---------------------------------------------------------------
def sin(x) -> Tensor:
    """Sine of ``x`` in radians. Gradient: ``g cos(x)``."""
    return _ops.Sin.apply(_tensor(x))


def cos(x) -> Tensor:
    """Cosine of ``x`` in radians. Gradient: ``-g sin(x)``."""
    return _ops.Cos.apply(_tensor(x))


def tan(x) -> Tensor:
    """Tangent of ``x`` in radians (poles at ``pi/2 + k pi``). Gradient: ``g (1 + tan(x)**2)``."""
    return _ops.Tan.apply(_tensor(x))


def arcsin(x) -> Tensor:
    """Inverse sine in radians, in [-pi/2, pi/2]; ``asin`` is the same function.

    Domain ``[-1, 1]`` (NaN outside, no warning). Gradient ``g / sqrt(1 - x**2)``: infinite at
    +-1, but 0 where the cotangent is 0.
    """
    return _ops.Arcsin.apply(_tensor(x))


def arccos(x) -> Tensor:
    """Inverse cosine in radians, in [0, pi]; ``acos`` is the same function.

    Domain ``[-1, 1]`` (NaN outside, no warning). Gradient ``-g / sqrt(1 - x**2)``: infinite at
    +-1, but 0 where the cotangent is 0.
    """
    return _ops.Arccos.apply(_tensor(x))


def arctan(x) -> Tensor:
    """Inverse tangent in radians, in (-pi/2, pi/2); ``atan`` is the same function.
    Gradient: ``g / (1 + x**2)``."""
    return _ops.Arctan.apply(_tensor(x))


def arctan2(x1, x2) -> Tensor:
    """Angle of the point ``(x2, x1)`` in radians, in [-pi, pi] (NumPy's ``arctan2``;
    ``atan2`` is the same function), broadcasting.

    Gradients: ``g x2 / (x1**2 + x2**2)`` and ``-g x1 / (x1**2 + x2**2)``; at the origin, where
    the angle has no derivative, both are 0.

    Raises:
        ValueError: if the shapes do not broadcast.
    """
    return _ops.Arctan2.apply(*_bin(x1, x2))


def hypot(x, y) -> Tensor:
    """``sqrt(x**2 + y**2)`` elementwise without overflow, broadcasting.

    Gradients: ``g x / hypot`` and ``g y / hypot``; at the origin (a kink, like ``abs`` at 0)
    both are 0.

    Raises:
        ValueError: if the shapes do not broadcast.
    """
    return _ops.Hypot.apply(*_bin(x, y))


def sinh(x) -> Tensor:
    """Hyperbolic sine; overflows to ``+-inf`` without a warning. Gradient: ``g cosh(x)``."""
    return _ops.Sinh.apply(_tensor(x))


def cosh(x) -> Tensor:
    """Hyperbolic cosine; overflows to ``inf`` without a warning. Gradient: ``g sinh(x)``."""
    return _ops.Cosh.apply(_tensor(x))


def tanh(x) -> Tensor:
    """Hyperbolic tangent. Gradient: ``g (1 - tanh(x)**2)``."""
    return _ops.Tanh.apply(_tensor(x))


def arcsinh(x) -> Tensor:
    """Inverse hyperbolic sine; ``asinh`` is the same function. Gradient:
    ``g / sqrt(x**2 + 1)`` (as ``g / hypot(x, 1)``, no overflow)."""
    return _ops.Arcsinh.apply(_tensor(x))


def arccosh(x) -> Tensor:
    """Inverse hyperbolic cosine; ``acosh`` is the same function.

    Domain ``x >= 1`` (NaN below, no warning). Gradient ``g / sqrt(x**2 - 1)``: infinite at 1,
    but 0 where the cotangent is 0.
    """
    return _ops.Arccosh.apply(_tensor(x))


def arctanh(x) -> Tensor:
    """Inverse hyperbolic tangent; ``atanh`` is the same function.

    Domain ``(-1, 1)`` (``+-inf`` at +-1, NaN outside; no warning). Gradient
    ``g / (1 - x**2)``: infinite at +-1, but 0 where the cotangent is 0.
    """
    return _ops.Arctanh.apply(_tensor(x))


asin, acos, atan, atan2 = arcsin, arccos, arctan, arctan2
asinh, acosh, atanh = arcsinh, arccosh, arctanh


# -- roots, absolute value, sign, piecewise ---------------------------------------------------
def sqrt(x) -> Tensor:
    """Square root elementwise. Domain ``x >= 0`` (NaN below, no warning).

    Gradient ``g / (2 sqrt(x))``: ``+inf`` at 0 for a nonzero cotangent (as PyTorch and JAX),
    0 where the cotangent is 0, so ``where(x > 0, sqrt(x), 0.0)`` has a finite gradient at 0.
    """
    return _ops.Sqrt.apply(_tensor(x))


def abs(x) -> Tensor:  # noqa: A001
    """``|x|`` elementwise (``absolute`` is the same function). Gradient ``g sign(x)``: 0 at 0."""
    return _ops.Abs.apply(_tensor(x))


absolute = abs


def sign(x) -> Tensor:
    """``sign(x)`` elementwise in {-1, 0, 1} (NaN for NaN); zero gradient everywhere."""
    return _ops.Sign.apply(_tensor(x))


def where(cond, x, y) -> Tensor:
    """``x`` where ``cond`` else ``y``, broadcasting all three (NumPy ``where``).

    Args:
        cond: Boolean Tensor, array or Python bool.
        x, y: Values; Tensors, arrays or Python numbers.

    Returns:
        Tensor of the broadcast shape. Gradient: the cotangent goes to ``x`` where ``cond``
        holds and to ``y`` elsewhere.

    Raises:
        TypeError: if ``cond`` is not boolean (compare first, e.g. ``x > 0``).
        ValueError: if the shapes do not broadcast.
    """
    cond = _tensor(cond) if not isinstance(cond, bool) else _tensor(_np.asarray(cond))
    if cond.dtype != _np.bool_:
        raise TypeError(
            f"where: cond must be boolean, got dtype {cond.dtype} (shape {cond.shape}); "
            "pass a comparison such as x > 0, or cast with cond.astype(bool)"
        )
    return _ops.Where.apply(cond, *_bin(x, y))


def maximum(x, y) -> Tensor:
    """Elementwise maximum, broadcasting; NaN propagates.

    Gradient: to the larger operand; at ties ``x == y`` split equally (``g / 2`` each).

    Raises:
        ValueError: if the shapes do not broadcast.
    """
    return _ops.Maximum.apply(*_bin(x, y))


def minimum(x, y) -> Tensor:
    """Elementwise minimum, broadcasting; NaN propagates.

    Gradient: to the smaller operand; at ties ``x == y`` split equally (``g / 2`` each).

    Raises:
        ValueError: if the shapes do not broadcast.
    """
    return _ops.Minimum.apply(*_bin(x, y))


def clip(a, a_min=None, a_max=None) -> Tensor:
    """Limit ``a`` to ``[a_min, a_max]``: ``minimum(maximum(a, a_min), a_max)`` (NumPy ``clip``).

    Args:
        a: Tensor, array or number.
        a_min: Lower bound (Tensor, array, number) or ``None`` for none.
        a_max: Upper bound or ``None``. With both ``None`` ``a`` is returned unchanged.

    Returns:
        Tensor of the broadcast shape of ``a`` and the bounds, with NumPy's dtype (Python-number
        bounds keep ``a``'s dtype). With ``a_min > a_max`` the result is ``a_max`` (NumPy).

        Gradient: to ``a`` where ``a_min <= a <= a_max`` (bounds inclusive: at the boundary the
        whole gradient goes to ``a``, as PyTorch's ``clamp``), else to the active bound.

    Raises:
        ValueError: if the shapes do not broadcast.
    """
    a = _tensor(a)
    if a_min is None and a_max is None:
        return a
    lo = None if a_min is None else _t(a_min)
    hi = None if a_max is None else _t(a_max)
    return _ops.Clip.apply(a, lo, hi)


def floor(x) -> Tensor:
    """Largest integer ``<= x`` elementwise (dtype kept). Zero gradient everywhere."""
    return _ops.Floor.apply(_tensor(x))


def ceil(x) -> Tensor:
    """Smallest integer ``>= x`` elementwise (dtype kept). Zero gradient everywhere."""
    return _ops.Ceil.apply(_tensor(x))


def remainder(x, y) -> Tensor:
    """``x - floor(x / y) * y`` elementwise, broadcasting (NumPy's ``remainder``, alias
    ``mod``, the ``%`` operator): the result has the sign of ``y``.

    Gradients: ``g`` to ``x`` and ``-g floor(x / y)`` to ``y`` (one-sided at the jumps, as
    PyTorch and JAX). ``y == 0`` gives NaN for floats and 0 for integers, without a warning.

    Raises:
        ValueError: if the shapes do not broadcast.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.remainder(tnp.asarray([-3.0, 5.5]), 2.0)
        Tensor([1. , 1.5], dtype=float32)
    """
    return _ops.Remainder.apply(*_bin(x, y))


mod = remainder


def floor_divide(x, y) -> Tensor:
    """``floor(x / y)`` elementwise, broadcasting (NumPy's ``floor_divide``, the ``//``
    operator). Zero gradient everywhere. ``y == 0`` gives ``+-inf``/NaN for floats and 0 for
    integers, without a warning.

    Raises:
        ValueError: if the shapes do not broadcast.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.asarray([-3.0, 5.5]) // 2.0
        Tensor([-2.,  2.], dtype=float32)
    """
    return _ops.FloorDivide.apply(*_bin(x, y))


def round(x, decimals: int = 0) -> Tensor:  # noqa: A001
    """Round to ``decimals`` decimals (negative: tens, hundreds...), halves to even, like NumPy
    (``around`` is the same function). Dtype kept. Zero gradient everywhere.

    Raises:
        TypeError: if ``decimals`` is not an int.
    """
    if isinstance(decimals, bool) or not isinstance(decimals, (int, _np.integer)):
        raise TypeError(f"round: decimals must be an int, got {decimals!r}")
    return _ops.Round.apply(_tensor(x), decimals=int(decimals))


around = round


# -- special functions and activations --------------------------------------------------------
def erf(x) -> Tensor:
    """Error function ``2/sqrt(pi) int_0^x exp(-t**2) dt`` (``scipy.special.erf``).

    Float32 stays float32, integers give float64. Gradient: ``g 2/sqrt(pi) exp(-x**2)``.
    """
    return _ops.Erf.apply(_tensor(x))


def erfc(x) -> Tensor:
    """Complementary error function ``1 - erf(x)``, accurate for large ``x``
    (``scipy.special.erfc``). Gradient: ``-g 2/sqrt(pi) exp(-x**2)``."""
    return _ops.Erfc.apply(_tensor(x))


def sigmoid(x) -> Tensor:
    """Logistic sigmoid ``1 / (1 + exp(-x))`` (``scipy.special.expit``), stable for any ``x``.

    Never overflows and keeps full relative precision in both tails (``sigmoid(-100)`` is
    ``3.7e-44``, not 0, in float64). Gradient: ``g sigmoid(x) sigmoid(-x)``, finite everywhere.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> float(tnp.sigmoid(tg.Tensor(0.0)))
        0.5
    """
    return _ops.Sigmoid.apply(_tensor(x))


def softplus(x) -> Tensor:
    """``log(1 + exp(x))``, stable for any ``x`` (``logaddexp(x, 0)``).

    Equals ``x`` for large ``x`` and ``exp(x)`` for very negative ``x``, to float precision.
    Gradient: ``g sigmoid(x)``.
    """
    return _ops.Softplus.apply(_tensor(x))


def relu(x) -> Tensor:
    """Rectified linear unit ``maximum(x, 0)``; dtype kept.

    Gradient: ``g`` where ``x > 0``, else 0; at ``x = 0`` the gradient is 0 (as PyTorch and
    JAX).
    """
    return _ops.Relu.apply(_tensor(x))


def gelu(x, approximate="none") -> Tensor:
    """Gaussian error linear unit (Hendrycks and Gimpel, 2016).

    Args:
        x: Tensor, array or number.
        approximate: ``"none"`` (exact, ``x Phi(x)`` with the normal CDF ``Phi``) or ``"tanh"``
            (``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x**3)))``), PyTorch's names. A bool is
            accepted as JAX's ``approximate`` (``True`` means ``"tanh"``).

    Returns:
        Tensor of ``x``'s shape and (floating) dtype. Gradient: ``g (Phi(x) + x phi(x))`` for
        the exact form, the derivative of the tanh formula for the approximation.

    Raises:
        ValueError: for another ``approximate``.

    References:
        D. Hendrycks and K. Gimpel, "Gaussian Error Linear Units (GELUs)", arXiv:1606.08415.
    """
    if approximate is True or approximate is False:
        approximate = "tanh" if approximate else "none"
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _ops.Gelu.apply(_tensor(x), approximate=approximate)


# -- comparisons and logic (boolean, no gradient) -------------------------------------------
def _compare(x, y, op):
    return _ops.Compare.apply(*_bin(x, y), op)


def equal(x, y) -> Tensor:
    """``x == y`` elementwise, broadcasting; a boolean Tensor with no gradient."""
    return _compare(x, y, "eq")


def not_equal(x, y) -> Tensor:
    """``x != y`` elementwise, broadcasting; a boolean Tensor with no gradient."""
    return _compare(x, y, "ne")


def less(x, y) -> Tensor:
    """``x < y`` elementwise, broadcasting; a boolean Tensor with no gradient."""
    return _compare(x, y, "lt")


def less_equal(x, y) -> Tensor:
    """``x <= y`` elementwise, broadcasting; a boolean Tensor with no gradient."""
    return _compare(x, y, "le")


def greater(x, y) -> Tensor:
    """``x > y`` elementwise, broadcasting; a boolean Tensor with no gradient."""
    return _compare(x, y, "gt")


def greater_equal(x, y) -> Tensor:
    """``x >= y`` elementwise, broadcasting; a boolean Tensor with no gradient."""
    return _compare(x, y, "ge")


def logical_and(x, y) -> Tensor:
    """Truth value of ``x and y`` elementwise (nonzero is true), broadcasting; boolean, no
    gradient. ``a & b`` on boolean Tensors is the same."""
    return _ops.LogicalAnd.apply(*_bin(x, y))


def logical_or(x, y) -> Tensor:
    """Truth value of ``x or y`` elementwise, broadcasting; boolean, no gradient. ``a | b`` on
    boolean Tensors is the same."""
    return _ops.LogicalOr.apply(*_bin(x, y))


def logical_xor(x, y) -> Tensor:
    """Truth value of ``x xor y`` elementwise, broadcasting; boolean, no gradient. ``a ^ b`` on
    boolean Tensors is the same."""
    return _ops.LogicalXor.apply(*_bin(x, y))


def logical_not(x) -> Tensor:
    """Truth value of ``not x`` elementwise; boolean, no gradient. ``~a`` on a boolean Tensor is
    the same."""
    return _ops.LogicalNot.apply(_tensor(x))


def isfinite(x) -> Tensor:
    """True where ``x`` is neither infinite nor NaN; boolean, no gradient."""
    return _ops.IsFinite.apply(_tensor(x))


def isnan(x) -> Tensor:
    """True where ``x`` is NaN; boolean, no gradient."""
    return _ops.IsNan.apply(_tensor(x))


def isinf(x) -> Tensor:
    """True where ``x`` is ``+inf`` or ``-inf``; boolean, no gradient."""
    return _ops.IsInf.apply(_tensor(x))


# -- Tensor operators and methods -------------------------------------------------------------
def _operator(cls, fallback, reflected=False):
    """A Tensor operator method: straight to ``cls.apply`` for the common operands (a Tensor
    or a Python number), else through the ``tnp`` function ``fallback`` (conversions)."""
    apply = cls.apply
    if reflected:

        def method(self, other):
            t = type(other)
            if t is Tensor or t is float or t is int:
                return apply(other, self)
            return fallback(other, self)

    else:

        def method(self, other):
            t = type(other)
            if t is Tensor or t is float or t is int:
                return apply(self, other)
            return fallback(self, other)

    method.__name__ = fallback.__name__
    method.__doc__ = fallback.__doc__
    return method


def _rpow(x, y):
    return power(y, x)


def _bool_operator(name, fn):
    """``&``, ``|``, ``^`` on boolean Tensors (logical ops); integer bitwise ops are not
    provided, so anything else is a TypeError rather than a silent truth-value op."""

    def op(x, y):
        ty = y.dtype if isinstance(y, Tensor) else _np.asarray(y).dtype
        if x.dtype != _np.bool_ or ty != _np.bool_:
            raise TypeError(
                f"Tensor.{name}: only boolean Tensors support this operator (logical "
                f"{fn.__name__}), got dtypes {x.dtype} and {ty}; compare first (x > 0) or use "
                f"tnp.{fn.__name__}"
            )
        return fn(x, y)

    op.__name__ = name
    return op


def _invert(x):
    if x.dtype != _np.bool_:
        raise TypeError(
            f"Tensor.__invert__: only boolean Tensors support ~ (logical not), got dtype "
            f"{x.dtype}; use tnp.logical_not or -x"
        )
    return logical_not(x)


def _clip_method(self, min=None, max=None):  # noqa: A002  (NumPy's ndarray.clip names)
    return clip(self, min, max)


_and = _bool_operator("__and__", logical_and)
_or = _bool_operator("__or__", logical_or)
_xor = _bool_operator("__xor__", logical_xor)

_install_methods(
    {
        "__add__": _operator(_ops.Add, add),
        "__radd__": _operator(_ops.Add, add, reflected=True),
        "__sub__": _operator(_ops.Sub, subtract),
        "__rsub__": _operator(_ops.Sub, subtract, reflected=True),
        "__mul__": _operator(_ops.Mul, multiply),
        "__rmul__": _operator(_ops.Mul, multiply, reflected=True),
        "__truediv__": _operator(_ops.Div, divide),
        "__rtruediv__": _operator(_ops.Div, divide, reflected=True),
        "__pow__": power,
        "__rpow__": _rpow,
        "__mod__": _operator(_ops.Remainder, remainder),
        "__rmod__": _operator(_ops.Remainder, remainder, reflected=True),
        "__floordiv__": _operator(_ops.FloorDivide, floor_divide),
        "__rfloordiv__": _operator(_ops.FloorDivide, floor_divide, reflected=True),
        "__neg__": negative,
        "__pos__": lambda x: x,
        "__abs__": abs,
        "__eq__": equal,
        "__ne__": not_equal,
        "__lt__": less,
        "__le__": less_equal,
        "__gt__": greater,
        "__ge__": greater_equal,
        "__and__": _and,
        "__rand__": _and,
        "__or__": _or,
        "__ror__": _or,
        "__xor__": _xor,
        "__rxor__": _xor,
        "__invert__": _invert,
        "abs": abs,
        "sign": sign,
        "sqrt": sqrt,
        "square": square,
        "reciprocal": reciprocal,
        "exp": exp,
        "expm1": expm1,
        "log": log,
        "log1p": log1p,
        "log2": log2,
        "log10": log10,
        "sin": sin,
        "cos": cos,
        "tan": tan,
        "arcsin": arcsin,
        "arccos": arccos,
        "arctan": arctan,
        "sinh": sinh,
        "cosh": cosh,
        "tanh": tanh,
        "arcsinh": arcsinh,
        "arccosh": arccosh,
        "arctanh": arctanh,
        "erf": erf,
        "clip": _clip_method,
        "maximum": maximum,
        "minimum": minimum,
        "floor": floor,
        "ceil": ceil,
        "round": round,
        "sigmoid": sigmoid,
        "softplus": softplus,
        "relu": relu,
        "gelu": gelu,
        "isfinite": isfinite,
        "isnan": isnan,
        "isinf": isinf,
        "logical_not": logical_not,
        "pow": power,
    }
)
