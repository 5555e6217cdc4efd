"""Elementwise functions and comparisons of ``tapegrad.numpy``."""

from __future__ import annotations

from tapegrad import ops as _ops
from tapegrad.numpy._core import _install_methods, _t, _tensor
from tapegrad.tensor import Tensor

__all__ = [
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
