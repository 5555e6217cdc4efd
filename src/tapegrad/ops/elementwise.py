"""Elementwise primitives: arithmetic, powers, exponentials and logarithms, trigonometric and
hyperbolic functions, special functions, activations, rounding, comparisons and logic.

Rules common to every op here (each class states only what differs):

- **Shapes.** Inputs broadcast like NumPy; the output has the broadcast shape. ``apply`` sums
  each cotangent back over broadcast dimensions, so ``backward`` returns cotangents of the
  broadcast shape. Shapes that do not broadcast raise ``ValueError`` naming the op and the
  shapes.
- **Dtypes.** NumPy's type promotion. Python numbers given as operands stay Python numbers (NEP
  50 weak promotion keeps the Tensor's dtype: ``float32 Tensor * 2.0`` is float32) and receive
  no cotangent. Transcendental functions of integer inputs are float64, as in NumPy. Only
  floating inputs have gradients; a cotangent is cast to its input's dtype.
- **Domain.** Outside an op's domain the forward gives NaN (inside it, at a pole, ``inf``) like
  NumPy, but silently: forwards run under ``np.errstate`` and never warn.
- **NaN safety.** Where a derivative is unbounded (``sqrt`` and ``log`` at 0, ``arcsin`` at
  +-1, ``x / 0``, ...) the rule gives a zero cotangent, not ``0 * inf = NaN``, wherever the
  incoming cotangent is zero. So ``where(x > 0, sqrt(x), 0.0)`` has gradient 0 at ``x = 0``, to
  every order. Such a rule computes the derivative factor ``d`` (which may be ``inf`` or NaN)
  and returns ``MulNoNan.apply(g, d)``: ``g * d``, but exactly 0 where ``g == 0`` (TensorFlow's
  ``multiply_no_nan``). Unlike substituting the operand (``g / where(g == 0, 1, x)``) this
  keeps the rule exact, second derivatives included, where ``g`` happens to be 0 at a regular
  point; and its own backward is again ``MulNoNan``, so every order stays NaN-free.
- **Kinks.** Conventions at non-differentiable points are listed in ``docs/conventions.md``
  and stated in each class.

Every ``backward`` is written with tapegrad operations (``tapegrad.numpy``) on the saved
Tensors, so every rule here is differentiable again, to any order.
"""

from __future__ import annotations

import math

import numpy as np

from tapegrad.function import Function
from tapegrad.tensor import Tensor

__all__ = [
    "Add", "Sub", "Mul", "Div", "Pow", "Neg", "Exp", "Log", "Sin", "Cos", "Tanh",
    "TanhGrad",
    "AsType", "StopGradient", "Compare", "Sqrt", "Abs", "Sign", "Where", "Maximum", "Minimum",
    "Square", "Reciprocal", "Expm1", "Log1p", "Log2", "Log10", "Tan", "Arcsin", "Arccos",
    "Arctan", "Arctan2", "Sinh", "Cosh", "Arcsinh", "Arccosh", "Arctanh", "Clip", "Floor",
    "Ceil", "Round", "Remainder", "FloorDivide", "Erf", "Erfc", "Logaddexp", "Hypot", "Sigmoid",
    "Softplus", "Relu", "Gelu",
    "ReluGrad", "MulNoNan",
    "DivNoNan", "LogicalAnd", "LogicalOr", "LogicalXor", "LogicalNot", "IsFinite", "IsNan", "IsInf",
]  # fmt: skip

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_C = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715


def _tnp():
    # ops sit below tapegrad.numpy (imports point down); backward rules reach it lazily.
    from tapegrad import numpy as tnp

    return tnp


def _quiet():
    """Silence NumPy's floating-point warnings: out-of-domain inputs give NaN/inf, as decided."""
    return np.errstate(divide="ignore", invalid="ignore", over="ignore")


def _special(xp):
    """``scipy.special`` for NumPy arrays, ``cupyx.scipy.special`` for CuPy arrays."""
    if xp is np:
        import scipy.special

        return scipy.special
    import cupyx.scipy.special  # pragma: no cover - GPU only

    return cupyx.scipy.special  # pragma: no cover - GPU only


def _all_finite(xp, out):
    """Whether every entry of ``out`` (a floating array) is finite, in one cheap pass.

    The NaN-safe rules below compute the plain product or quotient first and redo it with a
    mask only when this says no. It uses ``vdot(out, out)`` (a BLAS dot, about 2.5 times faster
    than NumPy's pairwise ``sum`` at a million float64 entries): a NaN or infinite entry makes it
    non-finite. It can also say no for finite entries whose squares overflow (above about 1e19
    in float32); callers then take their exact path, so the answer is only ever slower, never
    wrong. Dtypes narrower than float32 sum in float32 instead.
    """
    if out.dtype.itemsize >= 4:
        return bool(xp.isfinite(xp.vdot(out, out)))
    return bool(xp.isfinite(out.sum(dtype=xp.float32)))


class MulNoNan(Function):
    """``a * b``, but exactly 0 wherever ``a == 0``, even where ``b`` is ``inf`` or NaN.

    The building block of NaN-safe backward rules: ``MulNoNan.apply(g, d)`` multiplies a
    cotangent ``g`` by a derivative factor ``d`` that may be unbounded where ``g`` is zero (as
    TensorFlow's ``multiply_no_nan``). Derivatives: ``b`` (0 where the incoming cotangent is
    0) and ``a`` (exactly 0 where ``a == 0``, however large the cotangent: the output does not
    depend on ``b`` there), each applied with ``MulNoNan`` again, so every order stays NaN-free.
    """

    oper = "mul_no_nan"

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        xp = ctx.backend
        with _quiet():
            out = a * b
            # Only a non-finite product can hide a NaN at a == 0 (0 * inf): when every product
            # is finite, a * b is already 0 wherever a == 0 (one pass saved).
            if out.size > 64 and _all_finite(xp, out):
                return out
        return xp.where(a == 0, 0, out)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        ga = MulNoNan.apply(g, b) if na else None
        gb = MulNoNan.apply(a, g) if nb else None
        return ga, gb


def _nonan(g, d):
    """``g * d``, 0 where ``g == 0`` (see :class:`MulNoNan`)."""
    return MulNoNan.apply(g, d)


class DivNoNan(Function):
    """``g / d``, but exactly 0 wherever ``g == 0``, even where ``d`` is 0 or NaN.

    The NaN-safe form of "cotangent over derivative denominator" (``log``'s ``g / x``,
    ``divide``'s ``g / y``, ...) in one pass instead of a reciprocal and a :class:`MulNoNan`.
    Derivatives: ``1 / d`` for ``g`` and ``-g / d**2 = -out / d`` for ``d``, both applied
    NaN-safely (zero where the incoming cotangent, or ``g``, is zero), so every order stays
    NaN-free.
    """

    oper = "div_no_nan"

    @staticmethod
    def forward(ctx, g, d):
        xp = ctx.backend
        with _quiet():
            out = g / d
        ctx.save_for_backward(d, out)
        if out.size == 0:
            return out
        if g.ndim == 0 or not any(g.strides):
            # One value repeated (a scalar, or the broadcast view a sum's backward returns):
            # a nonzero one leaves nothing to zero, without a pass over ``out``.
            if g[(0,) * g.ndim] != 0:
                return out
        elif out.size > 64:
            with _quiet():
                if _all_finite(xp, out):
                    return out  # every quotient finite: g / d is already 0 wherever g == 0
        out = xp.where(g == 0, 0, out)
        ctx.save_for_backward(d, out)
        return out

    @staticmethod
    def backward(ctx, h):
        d, out = ctx.saved_tensors
        ng, nd = ctx.needs_input_grad
        gg = DivNoNan.apply(h, d) if ng else None
        # -h g / d**2 = -(out h) / d, zero wherever out (so g) is zero: out goes first in
        # MulNoNan, which guarantees 0 where its first argument is 0, at every order.
        gd = -DivNoNan.apply(MulNoNan.apply(out, h), d) if nd else None
        return gg, gd


def _divnonan(g, d):
    """``g / d``, 0 where ``g == 0`` (see :class:`DivNoNan`)."""
    return DivNoNan.apply(g, d)


# -- arithmetic -------------------------------------------------------------------------------
class Add(Function):
    """``x + y``. Derivatives: 1 and 1."""

    oper = "add"

    @staticmethod
    def forward(ctx, x, y):
        return x + y

    @staticmethod
    def backward(ctx, g):
        return g, g


class Sub(Function):
    """``x - y``. Derivatives: 1 and -1."""

    oper = "sub"

    @staticmethod
    def forward(ctx, x, y):
        return x - y

    @staticmethod
    def backward(ctx, g):
        return g, (-g if ctx.needs_input_grad[1] else None)


class Mul(Function):
    """``x * y``. Derivatives: ``y`` and ``x``."""

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
    """True division ``x / y``.

    Derivatives: ``1 / y`` and ``-x / y**2``, computed as ``-(g / y) * out`` from the saved
    output ``out = x / y`` (no ``y**2`` to overflow, two passes fewer than recomputing ``x / y``).
    Integer inputs give float64 (NumPy's true division).
    Domain: ``y != 0``; ``x / 0`` is ``+-inf`` or NaN without a warning. NaN-safe: where the
    cotangent is 0 both cotangents are 0, also at ``y = 0``.
    """

    oper = "div"

    @staticmethod
    def forward(ctx, x, y):
        with _quiet():
            out = x / y
        ctx.save_for_backward(y, out)
        return out

    @staticmethod
    def backward(ctx, g):
        y, out = ctx.saved_tensors
        nx, ny = ctx.needs_input_grad
        if isinstance(y, (int, float)):
            if y != 0:
                return g * (1.0 / y), None
            y = _tnp().asarray(np.asarray(y, dtype=g.dtype))
        q = _divnonan(g, y)  # g / y, 0 where g == 0
        gx = q if nx else None
        gy = -MulNoNan.apply(q, out) if ny else None  # 0 where q == 0, even if out is inf
        return gx, gy


class Pow(Function):
    """``x ** p`` with a Tensor or Python-number exponent.

    Derivatives: ``d/dx = p x**(p-1)`` and ``d/dp = log(x) x**p``.

    Conventions: ``d/dx`` is 0 where ``p == 0`` (``x**0 = 1`` is constant, even at ``x = 0``,
    as PyTorch). ``d/dp`` is 0 at ``x = 0``, to every order (``0**p`` is constant in ``p > 0``;
    for ``p <= 0`` this follows JAX), and NaN for ``x < 0`` (the real power is not
    differentiable in ``p`` there). NaN-safe where the derivative is infinite or NaN (``x = 0``
    with ``p < 1``, ``x < 0`` with non-integer ``p``, ``d/dp`` at ``x <= 0``): a zero cotangent
    gives a zero gradient.

    Dtypes: NumPy's (``float32 ** 2`` is float32; integers to negative integer powers raise
    ``ValueError`` as in NumPy). Domain: ``x ** p`` for ``x < 0`` and non-integer ``p`` is NaN.
    """

    oper = "pow"

    @staticmethod
    def forward(ctx, x, p):
        with _quiet():
            out = x**p
        ctx.save_for_backward(x, p, out)
        return out

    @staticmethod
    def backward(ctx, g):
        tnp = _tnp()
        x, p, out = ctx.saved_tensors
        nx, np_ = ctx.needs_input_grad
        gx = gp = None
        if nx:
            if isinstance(p, Tensor):
                gx = _nonan(g * p, x ** (p - 1))
            elif p == 0:
                gx = None
            elif p == 1:
                gx = g
            elif p == 2:
                gx = g * (2 * x)
            elif p > 1 and float(p).is_integer():
                gx = g * (p * x ** (p - 1))
            else:
                gx = _nonan(g, p * x ** (p - 1))
        if np_:
            if not isinstance(x, Tensor):
                x = tnp.asarray(np.asarray(x, dtype=out.dtype))
            # log(1) = 0 where x == 0 (JAX's convention); MulNoNan(0, out) is 0 even for out = inf
            gp = _nonan(g, _nonan(tnp.log(tnp.where(x == 0, 1.0, x)), out))
        return gx, gp


class Neg(Function):
    """``-x``. Derivative: -1."""

    oper = "neg"

    @staticmethod
    def forward(ctx, x):
        return -x

    @staticmethod
    def backward(ctx, g):
        return -g


class Square(Function):
    """``x * x``. Derivative: ``2 x``. Integer inputs stay integer (NumPy's ``square``)."""

    oper = "square"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with _quiet():
            return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (2 * x)


class Reciprocal(Function):
    """``1 / x``. Derivative: ``-1 / x**2``.

    Dtypes: NumPy's ``reciprocal`` (integer inputs stay integer and truncate, so
    ``reciprocal(2) == 0``; use ``1.0 / x`` for a float result). Domain: ``x != 0``;
    ``1 / 0 = inf``. NaN-safe at 0.
    """

    oper = "reciprocal"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with _quiet():
            return ctx.backend.reciprocal(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _nonan(g, -1.0 / (x * x))


# -- exponentials and logarithms --------------------------------------------------------------
class Exp(Function):
    """``e**x``. Derivative: ``e**x`` (the output). Overflows to ``inf`` without a warning."""

    oper = "exp"

    @staticmethod
    def forward(ctx, x):
        with _quiet():
            out = ctx.backend.exp(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g * out


class Expm1(Function):
    """``exp(x) - 1``, accurate for small ``|x|``.

    Derivative: ``exp(x)`` (recomputed from ``x``, not as ``out + 1``, which loses all
    relative precision for large negative ``x``). Overflows to ``inf`` without a warning.
    """

    oper = "expm1"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with _quiet():
            return ctx.backend.expm1(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * _tnp().exp(x)


class Log(Function):
    """Natural logarithm. Derivative: ``1 / x``. Domain ``x > 0``: ``log(0) = -inf``,
    ``log(x < 0) = NaN``. NaN-safe at 0."""

    oper = "log"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with _quiet():
            return ctx.backend.log(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _divnonan(g, x)


class Log1p(Function):
    """``log(1 + x)``, accurate for small ``|x|``. Derivative: ``1 / (1 + x)``.
    Domain ``x > -1`` (``-inf`` at -1, NaN below). NaN-safe at -1."""

    oper = "log1p"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with _quiet():
            return ctx.backend.log1p(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _divnonan(g, (1 + x))


class Log2(Function):
    """Base-2 logarithm. Derivative: ``1 / (x ln 2)``. Domain ``x > 0``. NaN-safe at 0."""

    oper = "log2"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with _quiet():
            return ctx.backend.log2(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _divnonan(g, (x * _LN2))


class Log10(Function):
    """Base-10 logarithm. Derivative: ``1 / (x ln 10)``. Domain ``x > 0``. NaN-safe at 0."""

    oper = "log10"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with _quiet():
            return ctx.backend.log10(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _divnonan(g, (x * _LN10))


class Logaddexp(Function):
    """``log(exp(x) + exp(y))`` without overflow: ``max(x, y) + log1p(exp(-|x - y|))``.

    Derivatives: ``sigmoid(x - y)`` and ``sigmoid(y - x)`` (each in [0, 1], finite for any
    finite inputs). Convention: where ``x == y == +-inf`` (``x - y`` is NaN) each gets 1/2.
    """

    oper = "logaddexp"

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        with _quiet():
            return ctx.backend.logaddexp(x, y)

    @staticmethod
    def backward(ctx, g):
        tnp = _tnp()
        x, y = ctx.saved_tensors
        nx, ny = ctx.needs_input_grad
        tie = tnp.logical_and(tnp.equal(x, y), tnp.isinf(x))  # inf - inf would be NaN
        d = tnp.where(tie, 0.0, x) - tnp.where(tie, 0.0, y)
        gx = g * Sigmoid.apply(d) if nx else None
        gy = g * Sigmoid.apply(-d) if ny else None
        return gx, gy


# -- trigonometric and hyperbolic ---------------------------------------------------------------
class Sin(Function):
    """Sine (radians). Derivative: ``cos(x)``."""

    oper = "sin"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with _quiet():
            return ctx.backend.sin(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * _tnp().cos(x)


class Cos(Function):
    """Cosine (radians). Derivative: ``-sin(x)``."""

    oper = "cos"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with _quiet():
            return ctx.backend.cos(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return -g * _tnp().sin(x)


class Tan(Function):
    """Tangent (radians). Derivative: ``1 + tan(x)**2``; poles at ``pi/2 + k pi``."""

    oper = "tan"

    @staticmethod
    def forward(ctx, x):
        with _quiet():
            out = ctx.backend.tan(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g * (1 + out * out)


class Arcsin(Function):
    """Inverse sine, in radians in [-pi/2, pi/2]. Derivative: ``1 / sqrt((1 - x)(1 + x))``.
    Domain ``[-1, 1]`` (NaN outside); the derivative is infinite at +-1, NaN-safe there."""

    oper = "arcsin"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with _quiet():
            return ctx.backend.arcsin(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _divnonan(g, _tnp().sqrt((1 - x) * (1 + x)))


class Arccos(Function):
    """Inverse cosine, in radians in [0, pi]. Derivative: ``-1 / sqrt((1 - x)(1 + x))``.
    Domain ``[-1, 1]`` (NaN outside); the derivative is infinite at +-1, NaN-safe there."""

    oper = "arccos"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with _quiet():
            return ctx.backend.arccos(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _nonan(g, -1.0 / _tnp().sqrt((1 - x) * (1 + x)))


class Arctan(Function):
    """Inverse tangent, in radians in (-pi/2, pi/2). Derivative: ``1 / (1 + x**2)``."""

    oper = "arctan"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.backend.arctan(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g / (1 + x * x)


class Arctan2(Function):
    """``arctan2(x1, x2)``: the angle of the point ``(x2, x1)``, in radians in [-pi, pi].

    Derivatives: ``x2 / (x1**2 + x2**2)`` and ``-x1 / (x1**2 + x2**2)``. Convention at the
    origin (no derivative): both 0, never NaN.
    """

    oper = "arctan2"

    @staticmethod
    def forward(ctx, x1, x2):
        ctx.save_for_backward(x1, x2)
        return ctx.backend.arctan2(x1, x2)

    @staticmethod
    def backward(ctx, g):
        tnp = _tnp()
        x1, x2 = ctx.saved_tensors
        n1, n2 = ctx.needs_input_grad
        r2 = x1 * x1 + x2 * x2
        r2 = tnp.where(r2 == 0, 1.0, r2)
        g1 = g * x2 / r2 if n1 else None
        g2 = -g * x1 / r2 if n2 else None
        return g1, g2


class Hypot(Function):
    """``sqrt(x**2 + y**2)`` without overflow or underflow.

    Derivatives: ``x / hypot`` and ``y / hypot``. Convention at the origin (a kink, like
    ``abs`` at 0): both 0, never NaN.
    """

    oper = "hypot"

    @staticmethod
    def forward(ctx, x, y):
        out = ctx.backend.hypot(x, y)
        ctx.save_for_backward(x, y, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, y, out = ctx.saved_tensors
        nx, ny = ctx.needs_input_grad
        r = _tnp().where(out == 0, 1.0, out)
        gx = g * x / r if nx else None
        gy = g * y / r if ny else None
        return gx, gy


class Sinh(Function):
    """Hyperbolic sine. Derivative: ``cosh(x)``. Overflows to ``+-inf`` without a warning."""

    oper = "sinh"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with _quiet():
            return ctx.backend.sinh(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * _tnp().cosh(x)


class Cosh(Function):
    """Hyperbolic cosine. Derivative: ``sinh(x)``. Overflows to ``inf`` without a warning."""

    oper = "cosh"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with _quiet():
            return ctx.backend.cosh(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * _tnp().sinh(x)


class Tanh(Function):
    """Hyperbolic tangent. Derivative: ``1 - tanh(x)**2`` (from the output)."""

    oper = "tanh"

    @staticmethod
    def forward(ctx, x):
        out = ctx.backend.tanh(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return TanhGrad.apply(g, out)


class TanhGrad(Function):
    """``g * (1 - y**2)``: the backward of :class:`Tanh` given its output ``y``, fused into one
    primitive (one pass over memory instead of three ops). Its own backward, written with
    tapegrad ops, keeps every order exact: d/dg = ``1 - y**2``, d/dy = ``-2 g y``.
    """

    oper = "tanh_grad"

    @staticmethod
    def forward(ctx, g, y):
        ctx.save_for_backward(g, y)
        return g * (1 - y * y)

    @staticmethod
    def backward(ctx, h):
        g, y = ctx.saved_tensors
        ng, ny = ctx.needs_input_grad
        return (TanhGrad.apply(h, y) if ng else None), (-2 * h * g * y if ny else None)


class Arcsinh(Function):
    """Inverse hyperbolic sine. Derivative: ``1 / sqrt(x**2 + 1)``, computed as
    ``1 / hypot(x, 1)`` so it does not overflow for large ``|x|``."""

    oper = "arcsinh"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.backend.arcsinh(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g / Hypot.apply(x, 1.0)


class Arccosh(Function):
    """Inverse hyperbolic cosine. Derivative: ``1 / sqrt((x - 1)(x + 1))``. Domain ``x >= 1``
    (NaN below); the derivative is infinite at 1, NaN-safe there."""

    oper = "arccosh"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with _quiet():
            return ctx.backend.arccosh(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _divnonan(g, _tnp().sqrt((x - 1) * (x + 1)))


class Arctanh(Function):
    """Inverse hyperbolic tangent. Derivative: ``1 / ((1 - x)(1 + x))``. Domain ``(-1, 1)``
    (``+-inf`` at +-1, NaN outside); NaN-safe at +-1."""

    oper = "arctanh"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with _quiet():
            return ctx.backend.arctanh(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _divnonan(g, ((1 - x) * (1 + x)))


# -- roots, absolute value, sign ----------------------------------------------------------------
class Sqrt(Function):
    """Square root. Derivative: ``1 / (2 sqrt(x))``. Domain ``x >= 0`` (NaN below).

    Convention at 0: the derivative is ``+inf`` (as PyTorch and JAX), but a zero cotangent
    gives a zero gradient there (never NaN), so ``where(x > 0, sqrt(x), 0.0)`` is finite.
    """

    oper = "sqrt"

    @staticmethod
    def forward(ctx, x):
        with _quiet():
            out = ctx.backend.sqrt(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return _divnonan(g, out * 2.0)


class Abs(Function):
    """``|x|``. Derivative: ``sign(x)``; convention at 0: 0, consistent with ``sign(0) = 0``
    (as PyTorch; JAX's ``abs`` gives 1 there)."""

    oper = "abs"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.backend.abs(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * _tnp().sign(x)


class Sign(Function):
    """``sign(x)`` in {-1, 0, 1} (NaN for NaN); zero gradient everywhere (also at 0)."""

    oper = "sign"

    @staticmethod
    def forward(ctx, x):
        return ctx.backend.sign(x)

    @staticmethod
    def backward(ctx, g):
        return None


# -- piecewise: where, maximum, minimum, clip, rounding --------------------------------------
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
        tnp = _tnp()
        (cond,) = ctx.saved_tensors
        _, nx, ny = ctx.needs_input_grad
        gx = tnp.where(cond, g, 0.0) if nx else None
        gy = tnp.where(cond, 0.0, g) if ny else None
        return None, gx, gy


class Maximum(Function):
    """Elementwise ``maximum(x, y)`` (NaN propagates). Convention at ties ``x == y``: the
    gradient is split equally, half to each (as the seeds document)."""

    oper = "maximum"

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return ctx.backend.maximum(x, y)

    @staticmethod
    def backward(ctx, g):
        return _minmax_backward(ctx, g, greater=True)


class Minimum(Function):
    """Elementwise ``minimum(x, y)`` (NaN propagates). Convention at ties: split equally."""

    oper = "minimum"

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return ctx.backend.minimum(x, y)

    @staticmethod
    def backward(ctx, g):
        return _minmax_backward(ctx, g, greater=False)


def _minmax_backward(ctx, g, greater: bool):
    tnp = _tnp()
    x, y = ctx.saved_tensors
    nx, ny = ctx.needs_input_grad
    win = (x > y) if greater else (x < y)
    half = tnp.where(x == y, g * 0.5, 0.0)  # keeps g's dtype (0.0 is a weak Python scalar)
    gx = tnp.where(win, g, half) if nx else None
    gy = tnp.where(win, 0.0, tnp.where(x == y, half, g)) if ny else None
    return gx, gy


class Clip(Function):
    """``clip(x, a_min, a_max) = minimum(maximum(x, a_min), a_max)``; a bound may be ``None``.

    Derivatives: 1 to ``x`` where ``a_min <= x <= a_max``, 1 to ``a_min`` where ``x < a_min``,
    1 to ``a_max`` where the result is ``a_max`` and ``x > a_max`` (or ``a_min > a_max``).
    Convention at the boundary ``x == a_min`` or ``x == a_max``: the whole gradient goes to
    ``x``, as PyTorch's ``clamp`` (pytorch/pytorch#7049) and TensorFlow's ``clip_by_value``:
    the bounds are inclusive, so a value exactly at a bound is treated as inside. With
    ``a_min > a_max`` the result is ``a_max`` everywhere (NumPy) and the gradient goes to
    ``a_max``.
    """

    oper = "clip"

    @staticmethod
    def forward(ctx, x, a_min, a_max):
        ctx.save_for_backward(x, a_min, a_max)
        return ctx.backend.clip(x, a_min, a_max)

    @staticmethod
    def backward(ctx, g):
        tnp = _tnp()
        x, lo, hi = ctx.saved_tensors
        nx, nlo, nhi = ctx.needs_input_grad
        below = None if lo is None else tnp.less(x, lo)
        above = None
        if hi is not None:
            above = tnp.greater(x if lo is None else tnp.where(below, lo, x), hi)
            if below is not None:
                below = tnp.logical_and(below, tnp.logical_not(above))
        out_x = below if above is None else (above if below is None else None)
        if above is not None and below is not None:
            out_x = tnp.logical_or(below, above)
        gx = None
        if nx:
            gx = g if out_x is None else tnp.where(out_x, 0.0, g)
        glo = tnp.where(below, g, 0.0) if nlo else None
        ghi = tnp.where(above, g, 0.0) if nhi else None
        return gx, glo, ghi


class Floor(Function):
    """Largest integer ``<= x`` (dtype kept). Zero gradient everywhere (also at the jumps)."""

    oper = "floor"

    @staticmethod
    def forward(ctx, x):
        return ctx.backend.floor(x)

    @staticmethod
    def backward(ctx, g):
        return None


class Remainder(Function):
    """``x - floor(x / y) * y``, NumPy's ``remainder`` (``%``; the result has ``y``'s sign).

    Derivatives: 1 for ``x`` and ``-floor(x / y)`` for ``y``, the one-sided values at the
    jumps (where ``x / y`` is an integer), as PyTorch and JAX. ``y == 0`` gives NaN for floats
    and 0 for integers, without a warning (NumPy's values). Integer results have no gradient.
    """

    oper = "remainder"

    @staticmethod
    def forward(ctx, x, y):
        xp = ctx.backend
        with _quiet():
            out = xp.remainder(x, y)
        ctx.save_for_backward(x, y)
        return out

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        nx, ny = ctx.needs_input_grad
        gy = None
        if ny:
            gy = -g * FloorDivide.apply(x, y)  # piecewise constant: no gradient of its own
        return (g if nx else None), gy


class FloorDivide(Function):
    """``floor(x / y)``, NumPy's ``floor_divide`` (``//``). Piecewise constant: zero gradient
    everywhere (also at the jumps). ``y == 0`` gives ``+-inf``/NaN for floats and 0 for
    integers, without a warning (NumPy's values)."""

    oper = "floor_divide"

    @staticmethod
    def forward(ctx, x, y):
        with _quiet():
            return ctx.backend.floor_divide(x, y)

    @staticmethod
    def backward(ctx, g):
        return None, None


class Ceil(Function):
    """Smallest integer ``>= x`` (dtype kept). Zero gradient everywhere (also at the jumps)."""

    oper = "ceil"

    @staticmethod
    def forward(ctx, x):
        return ctx.backend.ceil(x)

    @staticmethod
    def backward(ctx, g):
        return None


class Round(Function):
    """Round to ``decimals`` decimals, halves to even (NumPy's ``round``); dtype kept.
    Zero gradient everywhere (also at the jumps)."""

    oper = "round"

    @staticmethod
    def forward(ctx, x, decimals=0):
        return ctx.backend.round(x, decimals)

    @staticmethod
    def backward(ctx, g):
        return None


# -- special functions and activations --------------------------------------------------------
class Erf(Function):
    """Error function ``erf(x) = 2/sqrt(pi) int_0^x exp(-t**2) dt`` (``scipy.special.erf``).

    Derivative: ``2/sqrt(pi) exp(-x**2)``. Float32 stays float32; integers give float64.
    """

    oper = "erf"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _special(ctx.backend).erf(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (_TWO_OVER_SQRT_PI * _tnp().exp(-(x * x)))


class Erfc(Function):
    """Complementary error function ``1 - erf(x)``, accurate where ``erf(x)`` is near 1
    (``scipy.special.erfc``). Derivative: ``-2/sqrt(pi) exp(-x**2)``."""

    oper = "erfc"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _special(ctx.backend).erfc(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (-_TWO_OVER_SQRT_PI * _tnp().exp(-(x * x)))


class Sigmoid(Function):
    """Logistic sigmoid ``1 / (1 + exp(-x))``, stable for any ``x``.

    Forward: ``1 / (1 + e)`` for ``x >= 0`` and ``e / (1 + e)`` for ``x < 0``, with
    ``e = exp(-|x|) <= 1``: never overflows, and keeps full relative precision in both tails.
    Derivative: ``sigmoid(x) sigmoid(-x)`` (accurate also where ``1 - sigmoid(x)`` would
    round to 0).
    """

    oper = "sigmoid"

    @staticmethod
    def forward(ctx, x):
        xp = ctx.backend
        e = xp.exp(-xp.abs(x))
        out = xp.where(x >= 0, 1 / (1 + e), e / (1 + e))
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        return g * (out * Sigmoid.apply(-x))


class Softplus(Function):
    """``log(1 + exp(x))``, stable for any ``x``: computed as ``logaddexp(x, 0)``
    (``max(x, 0) + log1p(exp(-|x|))``), so it equals ``x`` for large ``x`` and ``exp(x)`` (to
    full relative precision) for very negative ``x``. Derivative: ``sigmoid(x)``."""

    oper = "softplus"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.backend.logaddexp(x, 0)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * Sigmoid.apply(x)


_ZERO_BLOCKS: dict = {}


def _relu(xp, x):
    """``maximum(x, 0)``, exactly; for large contiguous float32 NumPy arrays computed against a
    block of zeros instead of the scalar 0.

    NumPy (2.x, x86) runs ``maximum`` with a scalar operand through a loop about twice as slow
    as with two arrays (25 against 13 µs for 128x512 float32); viewing ``x`` as rows of 256
    and broadcasting one read-only zero row keeps the fast loop with no array of ``x``'s size.
    The values are the same ufunc's on the same operands: NaN stays NaN and ``-0.0`` gives
    ``0.0`` either way. float64 and small arrays gain nothing and take the plain call.
    """
    if (
        type(x) is np.ndarray
        and x.dtype == np.float32
        and x.size >= 16384
        and not x.size % 256
        and x.flags.c_contiguous
    ):
        zeros = _ZERO_BLOCKS.get(x.dtype)
        if zeros is None:
            zeros = np.zeros(256, x.dtype)
            zeros.flags.writeable = False
            _ZERO_BLOCKS[x.dtype] = zeros
        out = np.empty(x.shape, x.dtype)
        np.maximum(x.reshape(-1, 256), zeros, out=out.reshape(-1, 256))
        return out
    return xp.maximum(x, 0)


class Relu(Function):
    """``max(x, 0)``; dtype kept. Derivative: 1 for ``x > 0``, else 0; convention at 0: 0
    (as PyTorch and JAX).

    The backward is :class:`ReluGrad` of the cotangent and the saved output."""

    oper = "relu"

    @staticmethod
    def forward(ctx, x):
        out = _relu(ctx.backend, x)
        # The output carries the mask (out > 0 exactly where x > 0, NaN in neither), so the
        # input need not outlive this op: the next layer keeps the output alive anyway.
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return ReluGrad.apply(g, out)


_SAME_SIZE_INT = {2: "i2", 4: "i4", 8: "i8"}  # float16/32/64 viewed as integers of their size


class ReluGrad(Function):
    """``where(y > 0, g, 0)``: the backward of :class:`Relu` given its output ``y``, fused into
    one primitive (a comparison and a multiply instead of a comparison and a ``where``, which
    NumPy runs several times slower).

    Exactly ``where``'s values, ``+0.0`` where ``y <= 0`` (or NaN) whatever ``g`` holds there,
    inf and NaN included: ``g``'s bits, viewed as integers of its size, are multiplied by the
    mask (0 or 1), which keeps or clears every bit, with no floating-point product that could
    turn ``inf * 0`` into NaN, and no finiteness check. ``g`` and ``y`` broadcast; the result
    has ``g``'s dtype. The
    result is linear in ``g`` and piecewise constant in ``y``: its backward sends
    ``ReluGrad(h, y)`` to ``g`` and nothing to ``y``, so every order stays within this op.
    """

    oper = "relu_grad"
    nondiff_argnums = (1,)  # piecewise constant in y

    @staticmethod
    def forward(ctx, g, y):
        ctx.save_for_backward(y)
        xp = ctx.backend
        bits = _SAME_SIZE_INT.get(g.dtype.itemsize) if g.dtype.kind == "f" else None
        if bits is not None:  # the mask applied to g's bits: where(y > 0, g, +0.0), exactly
            shape = g.shape if g.shape == y.shape else np.broadcast_shapes(g.shape, y.shape)
            out = xp.empty(shape, g.dtype)
            xp.multiply(g.view(bits), y > 0, out=out.view(bits))
            return out
        if _all_finite(xp, g):  # no inf * 0 to warn about or to correct
            if g.shape == y.shape:
                # the mask cast to g's dtype, then scaled in place: NumPy's float-times-bool
                # multiply loop is slower than a cast and a same-type multiply
                out = (y > 0).astype(g.dtype)
                out *= g
                return out
            return g * (y > 0)
        mask = y > 0
        with _quiet():
            out = g * mask
        return xp.where(mask, g, 0).astype(out.dtype, copy=False)

    @staticmethod
    def backward(ctx, h):
        (y,) = ctx.saved_tensors
        return (ReluGrad.apply(h, y) if ctx.needs_input_grad[0] else None), None

    @classmethod
    def output_dtype(cls, g, y):
        return np.dtype(g)


class Gelu(Function):
    """Gaussian error linear unit (Hendrycks and Gimpel, 2016, arXiv:1606.08415).

    ``approximate="none"``: ``x Phi(x)`` with ``Phi`` the standard normal CDF
    (``scipy.special.ndtr``); derivative ``Phi(x) + x phi(x)``, ``Phi(x) = erfc(-x/sqrt2)/2``,
    ``phi(x) = exp(-x**2/2)/sqrt(2 pi)``.

    ``approximate="tanh"``: ``0.5 x (1 + tanh(u))``, ``u = sqrt(2/pi) (x + 0.044715 x**3)``;
    derivative ``0.5 (1 + t) + 0.5 x (1 - t**2) sqrt(2/pi) (1 + 3 * 0.044715 x**2)``,
    ``t = tanh(u)``.
    """

    oper = "gelu"

    @staticmethod
    def forward(ctx, x, approximate="none"):
        xp = ctx.backend
        ctx.save_for_backward(x)
        ctx.approximate = approximate
        with _quiet():
            if approximate == "tanh":
                return 0.5 * x * (1 + xp.tanh(_GELU_C * (x + _GELU_A * (x * x * x))))
            return x * _special(xp).ndtr(x)

    @staticmethod
    def backward(ctx, g):
        tnp = _tnp()
        (x,) = ctx.saved_tensors
        if ctx.approximate == "tanh":
            x2 = x * x
            t = tnp.tanh(_GELU_C * (x + _GELU_A * (x2 * x)))
            d = 0.5 * (1 + t) + (0.5 * _GELU_C) * x * (1 - t * t) * (1 + (3 * _GELU_A) * x2)
        else:
            cdf = 0.5 * Erfc.apply(-_INV_SQRT2 * x)
            d = cdf + x * (_INV_SQRT_2PI * tnp.exp(-0.5 * (x * x)))
        return g * d


# -- casts and gradient control ---------------------------------------------------------------
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

    @classmethod
    def output_dtype(cls, in_dtype, dtype=None):
        return np.dtype(dtype)


class StopGradient(Function):
    """Identity whose cotangent is zero: the value is a constant to every transform."""

    oper = "stop_gradient"

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return None


# -- comparisons and logic: boolean results, no gradient -------------------------------------
class Compare(Function):
    """Elementwise comparison ``op`` in {eq, ne, lt, le, gt, ge}; boolean output, no gradient."""

    oper = "compare"
    differentiable = False

    @classmethod
    def output_dtype(cls, *dtypes, **params):
        return np.dtype(bool)

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


class LogicalAnd(Function):
    """Truth-value ``x and y`` elementwise (nonzero is true); boolean, no gradient."""

    oper = "logical_and"
    differentiable = False

    @staticmethod
    def forward(ctx, x, y):
        return ctx.backend.logical_and(x, y)


class LogicalOr(Function):
    """Truth-value ``x or y`` elementwise (nonzero is true); boolean, no gradient."""

    oper = "logical_or"
    differentiable = False

    @staticmethod
    def forward(ctx, x, y):
        return ctx.backend.logical_or(x, y)


class LogicalXor(Function):
    """Truth-value ``x != y`` elementwise (nonzero is true); boolean, no gradient."""

    oper = "logical_xor"
    differentiable = False

    @staticmethod
    def forward(ctx, x, y):
        return ctx.backend.logical_xor(x, y)


class LogicalNot(Function):
    """Truth-value ``not x`` elementwise (nonzero is true); boolean, no gradient."""

    oper = "logical_not"
    differentiable = False

    @staticmethod
    def forward(ctx, x):
        return ctx.backend.logical_not(x)


class IsFinite(Function):
    """True where ``x`` is neither infinite nor NaN; boolean, no gradient."""

    oper = "isfinite"
    differentiable = False

    @staticmethod
    def forward(ctx, x):
        return ctx.backend.isfinite(x)


class IsNan(Function):
    """True where ``x`` is NaN; boolean, no gradient."""

    oper = "isnan"
    differentiable = False

    @staticmethod
    def forward(ctx, x):
        return ctx.backend.isnan(x)


class IsInf(Function):
    """True where ``x`` is ``+inf`` or ``-inf``; boolean, no gradient."""

    oper = "isinf"
    differentiable = False

    @staticmethod
    def forward(ctx, x):
        return ctx.backend.isinf(x)
