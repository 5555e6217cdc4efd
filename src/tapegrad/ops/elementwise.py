"""Elementwise primitives. Binary ops broadcast like NumPy; ``apply`` sums cotangents back over
broadcast dimensions, so each ``backward`` returns cotangents of the broadcast shape.

Python numbers given as operands stay Python numbers (NumPy's weak scalar promotion keeps the
Tensor's dtype) and receive no cotangent.
"""

from __future__ import annotations

from tapegrad.function import Function

__all__ = [
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Neg",
    "Exp",
    "Log",
    "Sin",
    "Cos",
    "Tanh",
    "AsType",
    "StopGradient",
    "Compare",
]


class Add(Function):
    oper = "add"

    @staticmethod
    def forward(ctx, x, y):
        return x + y

    @staticmethod
    def backward(ctx, g):
        return g, g


class Sub(Function):
    oper = "sub"

    @staticmethod
    def forward(ctx, x, y):
        return x - y

    @staticmethod
    def backward(ctx, g):
        return g, (-g if ctx.needs_input_grad[1] else None)


class Mul(Function):
    oper = "mul"

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        nx, ny = ctx.needs_input_grad
        return (g * y if nx else None), (g * x if ny else None)


class Div(Function):
    """``x / y``. d/dx = 1/y; d/dy = -x/y**2, computed as ``-(g / y) * (x / y)``."""

    oper = "div"

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x / y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        nx, ny = ctx.needs_input_grad
        gx = g / y if (nx or ny) else None
        gy = -gx * (x / y) if ny else None
        return (gx if nx else None), gy


class Pow(Function):
    """``x ** p``. d/dx = p x**(p-1); d/dp = log(x) x**p (needs x > 0 where used)."""

    oper = "pow"

    @staticmethod
    def forward(ctx, x, p):
        ctx.save_for_backward(x, p)
        return x**p

    @staticmethod
    def backward(ctx, g):
        from tapegrad import numpy as tnp

        x, p = ctx.saved_tensors
        nx, np_ = ctx.needs_input_grad
        gx = g * p * x ** (p - 1) if nx else None
        gp = g * tnp.log(x) * x**p if np_ else None
        return gx, gp


class Neg(Function):
    oper = "neg"

    @staticmethod
    def forward(ctx, x):
        return -x

    @staticmethod
    def backward(ctx, g):
        return -g


class Exp(Function):
    oper = "exp"

    @staticmethod
    def forward(ctx, x):
        out = ctx.backend.exp(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g * out


class Log(Function):
    oper = "log"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.backend.log(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g / x


class Sin(Function):
    oper = "sin"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.backend.sin(x)

    @staticmethod
    def backward(ctx, g):
        from tapegrad import numpy as tnp

        (x,) = ctx.saved_tensors
        return g * tnp.cos(x)


class Cos(Function):
    oper = "cos"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.backend.cos(x)

    @staticmethod
    def backward(ctx, g):
        from tapegrad import numpy as tnp

        (x,) = ctx.saved_tensors
        return -g * tnp.sin(x)


class Tanh(Function):
    oper = "tanh"

    @staticmethod
    def forward(ctx, x):
        out = ctx.backend.tanh(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g * (1 - out * out)


class AsType(Function):
    """Cast to ``dtype``; the cotangent is cast back (``apply`` casts it to the input dtype)."""

    oper = "astype"

    @staticmethod
    def forward(ctx, x, dtype):
        return x.astype(dtype)

    @staticmethod
    def backward(ctx, g):
        return g, None

    @classmethod
    def output_shape(cls, shape, dtype=None):
        return tuple(shape)


class StopGradient(Function):
    """Identity whose cotangent is zero: the value is a constant to every transform."""

    oper = "stop_gradient"

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return None


class Compare(Function):
    """Elementwise comparison ``op`` in {eq, ne, lt, le, gt, ge}; boolean output, no gradient."""

    oper = "compare"
    differentiable = False

    @staticmethod
    def forward(ctx, x, y, op):
        xp = ctx.backend
        return getattr(xp, _COMPARE[op])(x, y)


_COMPARE = {
    "eq": "equal",
    "ne": "not_equal",
    "lt": "less",
    "le": "less_equal",
    "gt": "greater",
    "ge": "greater_equal",
}
