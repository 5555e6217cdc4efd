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
    "Sqrt",
    "Abs",
    "Sign",
    "Where",
    "Maximum",
    "Minimum",
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


class Sqrt(Function):
    """``sqrt(x)``. d/dx = 1 / (2 sqrt(x)); at ``x = 0`` the derivative is infinite, and a zero
    cotangent gives a zero gradient there (never NaN)."""

    oper = "sqrt"

    @staticmethod
    def forward(ctx, x):
        out = ctx.backend.sqrt(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        from tapegrad import numpy as tnp

        (out,) = ctx.saved_tensors
        safe = tnp.where(g == 0, 1.0, out)
        return tnp.where(g == 0, 0.0, g / (2 * safe))


class Abs(Function):
    """``|x|``. d/dx = sign(x); convention at 0: 0 (as NumPy's sign, PyTorch and JAX)."""

    oper = "abs"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.backend.abs(x)

    @staticmethod
    def backward(ctx, g):
        from tapegrad import numpy as tnp

        (x,) = ctx.saved_tensors
        return g * tnp.sign(x)


class Sign(Function):
    """``sign(x)`` in {-1, 0, 1}; zero gradient everywhere."""

    oper = "sign"

    @staticmethod
    def forward(ctx, x):
        return ctx.backend.sign(x)

    @staticmethod
    def backward(ctx, g):
        return None


class Where(Function):
    """``where(cond, x, y)``: ``x`` where ``cond`` is true, else ``y`` (broadcasting).

    The cotangent goes to ``x`` where ``cond`` holds and to ``y`` elsewhere; ``cond`` (boolean)
    gets none.
    """

    oper = "where"

    @staticmethod
    def forward(ctx, cond, x, y):
        ctx.save_for_backward(cond)
        return ctx.backend.where(cond, x, y)

    @staticmethod
    def backward(ctx, g):
        from tapegrad import numpy as tnp

        (cond,) = ctx.saved_tensors
        _, nx, ny = ctx.needs_input_grad
        gx = tnp.where(cond, g, 0.0) if nx else None
        gy = tnp.where(cond, 0.0, g) if ny else None
        return None, gx, gy


class Maximum(Function):
    """Elementwise ``maximum(x, y)``. Ties split the gradient equally (half to each), as the
    seeds document."""

    oper = "maximum"

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return ctx.backend.maximum(x, y)

    @staticmethod
    def backward(ctx, g):
        return _minmax_backward(ctx, g, greater=True)


class Minimum(Function):
    """Elementwise ``minimum(x, y)``. Ties split the gradient equally (half to each)."""

    oper = "minimum"

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return ctx.backend.minimum(x, y)

    @staticmethod
    def backward(ctx, g):
        return _minmax_backward(ctx, g, greater=False)


def _minmax_backward(ctx, g, greater: bool):
    from tapegrad import numpy as tnp

    x, y = ctx.saved_tensors
    nx, ny = ctx.needs_input_grad
    win = (x > y) if greater else (x < y)
    tie = x == y
    wx = tnp.where(win, 1.0, tnp.where(tie, 0.5, 0.0))
    gx = g * wx if nx else None
    gy = g * (1.0 - wx) if ny else None
    return gx, gy
