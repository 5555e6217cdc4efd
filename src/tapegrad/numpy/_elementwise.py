"""Elementwise functions and comparisons of ``tapegrad.numpy``."""

from __future__ import annotations

import numpy as _np

from tapegrad import ops as _ops
from tapegrad.numpy._core import _install_methods, _t, _tensor
from tapegrad.tensor import Tensor

__all__ = [
    "sqrt",
    "abs",
    "sign",
    "where",
    "maximum",
    "minimum",
    "square",
    "add",
    "subtract",
    "multiply",
    "divide",
    "power",
    "negative",
    "exp",
    "log",
    "sin",
    "cos",
    "tanh",
    "equal",
    "not_equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "true_divide",
]


# -- elementwise ----------------------------------------------------------------------------
def add(x, y) -> Tensor:
    """``x + y`` elementwise, broadcasting. Gradient: the cotangent, summed over broadcasts."""
    return _ops.Add.apply(_t(x), _t(y))


def subtract(x, y) -> Tensor:
    """``x - y`` elementwise, broadcasting."""
    return _ops.Sub.apply(_t(x), _t(y))


def multiply(x, y) -> Tensor:
    """``x * y`` elementwise, broadcasting."""
    return _ops.Mul.apply(_t(x), _t(y))


def divide(x, y) -> Tensor:
    """``x / y`` elementwise, broadcasting (true division)."""
    return _ops.Div.apply(_t(x), _t(y))


true_divide = divide


def power(x, p) -> Tensor:
    """``x ** p`` elementwise; differentiable in ``x`` and (for ``x > 0``) in ``p``."""
    return _ops.Pow.apply(_t(x), _t(p))


def negative(x) -> Tensor:
    """``-x`` elementwise."""
    return _ops.Neg.apply(_tensor(x))


def exp(x) -> Tensor:
    """``e**x`` elementwise."""
    return _ops.Exp.apply(_tensor(x))


def log(x) -> Tensor:
    """Natural logarithm elementwise (domain ``x > 0``)."""
    return _ops.Log.apply(_tensor(x))


def sin(x) -> Tensor:
    """Sine of ``x`` in radians."""
    return _ops.Sin.apply(_tensor(x))


def cos(x) -> Tensor:
    """Cosine of ``x`` in radians."""
    return _ops.Cos.apply(_tensor(x))


def tanh(x) -> Tensor:
    """Hyperbolic tangent elementwise."""
    return _ops.Tanh.apply(_tensor(x))


def sqrt(x) -> Tensor:
    """Square root elementwise (domain ``x >= 0``); zero gradient where the cotangent is zero,
    so ``where(x > 0, sqrt(x), 0)`` has a finite gradient at 0."""
    return _ops.Sqrt.apply(_tensor(x))


def square(x) -> Tensor:
    """``x * x`` elementwise."""
    return multiply(x, x)


def abs(x) -> Tensor:  # noqa: A001
    """``|x|`` elementwise; gradient ``sign(x)`` (0 at 0)."""
    return _ops.Abs.apply(_tensor(x))


def sign(x) -> Tensor:
    """``sign(x)`` elementwise in {-1, 0, 1}; zero gradient."""
    return _ops.Sign.apply(_tensor(x))


def where(cond, x, y) -> Tensor:
    """``x`` where ``cond`` else ``y``, broadcasting all three (NumPy ``where``).

    Raises:
        TypeError: if ``cond`` is not boolean.
    """
    cond = _tensor(cond) if not isinstance(cond, bool) else _tensor(_np.asarray(cond))
    if cond.dtype != _np.bool_:
        raise TypeError(f"where: cond must be boolean, got dtype {cond.dtype}")
    return _ops.Where.apply(cond, _t(x), _t(y))


def maximum(x, y) -> Tensor:
    """Elementwise maximum, broadcasting; ties split the gradient equally."""
    return _ops.Maximum.apply(_t(x), _t(y))


def minimum(x, y) -> Tensor:
    """Elementwise minimum, broadcasting; ties split the gradient equally."""
    return _ops.Minimum.apply(_t(x), _t(y))


# -- comparisons (boolean, no gradient) -----------------------------------------------------
def _compare(x, y, op):
    return _ops.Compare.apply(_t(x), _t(y), op)


def equal(x, y) -> Tensor:
    """``x == y`` elementwise, a boolean Tensor with no gradient."""
    return _compare(x, y, "eq")


def not_equal(x, y) -> Tensor:
    """``x != y`` elementwise, a boolean Tensor with no gradient."""
    return _compare(x, y, "ne")


def less(x, y) -> Tensor:
    """``x < y`` elementwise, a boolean Tensor with no gradient."""
    return _compare(x, y, "lt")


def less_equal(x, y) -> Tensor:
    """``x <= y`` elementwise, a boolean Tensor with no gradient."""
    return _compare(x, y, "le")


def greater(x, y) -> Tensor:
    """``x > y`` elementwise, a boolean Tensor with no gradient."""
    return _compare(x, y, "gt")


def greater_equal(x, y) -> Tensor:
    """``x >= y`` elementwise, a boolean Tensor with no gradient."""
    return _compare(x, y, "ge")


def _rsub(x, y):
    return subtract(y, x)


def _rdiv(x, y):
    return divide(y, x)


def _rpow(x, y):
    return power(y, x)


_install_methods(
    {
        "__add__": add,
        "__radd__": add,
        "__sub__": subtract,
        "__rsub__": _rsub,
        "__mul__": multiply,
        "__rmul__": multiply,
        "__truediv__": divide,
        "__rtruediv__": _rdiv,
        "__pow__": power,
        "__rpow__": _rpow,
        "__neg__": negative,
        "__pos__": lambda x: x,
        "__eq__": equal,
        "__ne__": not_equal,
        "__lt__": less,
        "__le__": less_equal,
        "__gt__": greater,
        "__ge__": greater_equal,
        "exp": exp,
        "log": log,
        "sin": sin,
        "cos": cos,
        "tanh": tanh,
    }
)
