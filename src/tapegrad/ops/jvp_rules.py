"""Forward-mode (``jvp``) rules for the core primitives, attached to their Function classes.

A rule is a static method ``jvp(ctx, *tangents)`` returning the output tangent (or a tuple, one
per output; ``None`` means zero). ``tangents`` has one entry per positional input: a Tensor one
level below the forward-mode trace, or ``None`` where the input has a zero tangent (or is not a
Tensor). Rules read the same ``ctx`` as ``backward`` (``saved_tensors`` and the static values
``forward`` stored) plus ``ctx.out_avals``, the ``(shape, dtype)`` of each output, which forward
mode sets before calling the rule. Forward mode broadcasts a returned tangent to the output's
shape and casts it to the output's dtype, so rules stay short.

Each rule is written with tapegrad ops, so an enclosing transform records it (``grad`` of a
``jvp``, ``jvp`` of a ``jvp``). Every rule is the Jacobian-vector product whose transpose is the
op's ``backward`` (same conventions at kinks: ``abs`` has derivative 0 at 0, ties of
``maximum``/``minimum`` split half and half); ``tests/test_forward.py`` checks each against the
transpose of ``backward``. A rule is attached only where the class defines none of its own, so
an op module may define ``jvp`` in the class body instead. Ops without a rule use the transpose
of ``backward`` (see :mod:`tapegrad.forward`).

Imported by ``tapegrad/ops/__init__.py``, so the rules are attached whenever the ops are.
"""

from __future__ import annotations

import numpy as np

from tapegrad.ops.elementwise import (
    Abs,
    Add,
    AsType,
    Cos,
    Div,
    Exp,
    Log,
    Maximum,
    Minimum,
    Mul,
    MulNoNan,
    Neg,
    Pow,
    Relu,
    ReluGrad,
    Sign,
    Sin,
    Sqrt,
    Square,
    StopGradient,
    Sub,
    Tanh,
    TanhGrad,
    Where,
)
from tapegrad.ops.linalg import MatMul
from tapegrad.ops.movement import BroadcastTo, GetItem, Reshape, ScatterAdd, Transpose
from tapegrad.ops.reduction import Mean, Sum
from tapegrad.tensor import Tensor

__all__ = ["RULES"]


def _tnp():
    from tapegrad import numpy as tnp

    return tnp


def _nonan(a, b):
    """``a * b``, exactly 0 where ``a == 0`` (the ops' NaN-safe product, :class:`MulNoNan`)."""
    return MulNoNan.apply(a, b)


def _plus(a, b):
    """Sum of two optional tangents (``None`` is zero)."""
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def _add(ctx, tx, ty):
    return _plus(tx, ty)


def _sub(ctx, tx, ty):
    if ty is None:
        return tx
    return -ty if tx is None else tx - ty


def _mul(ctx, tx, ty):
    x, y = ctx.saved_tensors
    return _plus(None if tx is None else tx * y, None if ty is None else x * ty)


def _div(ctx, tx, ty):
    # The transpose of Div.backward: tx / y - (ty / y) * out, NaN-safe where a tangent is 0.
    from tapegrad.ops.elementwise import DivNoNan, MulNoNan

    y, out = ctx.saved_tensors
    if not isinstance(y, Tensor):  # a Python-number divisor
        if y != 0:
            return tx * (1.0 / y)
        y = _tnp().asarray(np.asarray(y, dtype=tx.dtype))
    a = None if tx is None else DivNoNan.apply(tx, y)
    b = None if ty is None else -MulNoNan.apply(DivNoNan.apply(ty, y), out)
    return _plus(a, b)


def _pow(ctx, tx, tp):
    # The transpose of Pow.backward, with its conventions (0 where p == 0; d/dp = 0 at x = 0).
    tnp = _tnp()
    x, p, out = ctx.saved_tensors
    a = b = None
    if tx is not None:
        if isinstance(p, Tensor):
            a = _nonan(tx * p, x ** (p - 1))
        elif p == 0:
            a = None
        elif p == 1:
            a = tx
        elif p == 2:
            a = tx * (2 * x)
        elif p > 1 and float(p).is_integer():
            a = tx * (p * x ** (p - 1))
        else:
            a = _nonan(tx, p * x ** (p - 1))
    if tp is not None:
        if not isinstance(x, Tensor):
            x = tnp.asarray(np.asarray(x, dtype=out.dtype))
        b = _nonan(tp, _nonan(tnp.log(tnp.where(x == 0, 1.0, x)), out))
    return _plus(a, b)


def _neg(ctx, t):
    return -t


def _exp(ctx, t):
    (out,) = ctx.saved_tensors
    return t * out


def _log(ctx, t):
    (x,) = ctx.saved_tensors
    return _nonan(t, 1.0 / x)


def _sin(ctx, t):
    (x,) = ctx.saved_tensors
    return t * _tnp().cos(x)


def _cos(ctx, t):
    (x,) = ctx.saved_tensors
    return -t * _tnp().sin(x)


def _tanh(ctx, t):
    (out,) = ctx.saved_tensors
    return TanhGrad.apply(t, out)


def _tanh_grad(ctx, tg, ty):
    # d[g (1 - y^2)] = dg (1 - y^2) - 2 g y dy
    g, y = ctx.saved_tensors
    return _plus(
        None if tg is None else TanhGrad.apply(tg, y), None if ty is None else -2 * g * y * ty
    )


def _relu(ctx, t):
    (out,) = ctx.saved_tensors
    return ReluGrad.apply(t, out)


def _relu_grad(ctx, tg, ty):
    # Linear in g, piecewise constant in y: the y tangent contributes nothing.
    (y,) = ctx.saved_tensors
    return None if tg is None else ReluGrad.apply(tg, y)


def _mul_no_nan(ctx, ta, tb):
    a, b = ctx.saved_tensors
    return _plus(None if ta is None else _nonan(ta, b), None if tb is None else _nonan(a, tb))


def _square(ctx, t):
    (x,) = ctx.saved_tensors
    return t * (2 * x)


def _sqrt(ctx, t):
    # t / (2 sqrt(x)), zero where the tangent is zero (Sqrt.backward's convention at x = 0).
    (out,) = ctx.saved_tensors
    return _nonan(t, 0.5 / out)


def _abs(ctx, t):
    (x,) = ctx.saved_tensors
    return t * _tnp().sign(x)


def _zero(ctx, *tangents):
    return None


def _where(ctx, tc, tx, ty):
    tnp = _tnp()
    (cond,) = ctx.saved_tensors
    return tnp.where(cond, 0.0 if tx is None else tx, 0.0 if ty is None else ty)


def _minmax(greater):
    def rule(ctx, tx, ty):
        tnp = _tnp()
        x, y = ctx.saved_tensors
        win = (x > y) if greater else (x < y)
        wx = tnp.where(win, 1.0, tnp.where(x == y, 0.5, 0.0))
        return _plus(None if tx is None else tx * wx, None if ty is None else ty * (1.0 - wx))

    return rule


def _sum(ctx, t):
    return Sum.apply(t, axis=ctx.axes, keepdims=ctx.keepdims)


def _mean(ctx, t):
    return Mean.apply(t, axis=ctx.axes, keepdims=ctx.keepdims)


def _reshape(ctx, t, _shape):
    return Reshape.apply(t, tuple(ctx.out_avals[0][0]))


def _transpose(ctx, t):
    return Transpose.apply(t, axes=ctx.axes)


def _broadcast_to(ctx, t, _shape):
    return BroadcastTo.apply(t, tuple(ctx.out_avals[0][0]))


def _getitem(ctx, t, *_index_tangents):
    return GetItem.apply(t, *ctx.saved_tensors, key=ctx.key)


def _scatter_add(ctx, t, *_index_tangents):
    return ScatterAdd.apply(t, *ctx.saved_tensors, shape=tuple(ctx.out_avals[0][0]), key=ctx.key)


def _matmul(ctx, ta, tb):
    a, b = ctx.saved_tensors
    return _plus(
        None if ta is None else MatMul.apply(ta, b), None if tb is None else MatMul.apply(a, tb)
    )


def _astype(ctx, t, _dtype):
    return AsType.apply(t, ctx.out_avals[0][1]) if t.dtype != ctx.out_avals[0][1] else t


#: Function class -> jvp rule, for the ops of tapegrad.ops present when this module was written.
RULES = {
    Add: _add,
    Sub: _sub,
    Mul: _mul,
    Div: _div,
    Pow: _pow,
    Neg: _neg,
    Exp: _exp,
    Log: _log,
    Sin: _sin,
    Cos: _cos,
    Tanh: _tanh,
    TanhGrad: _tanh_grad,
    Relu: _relu,
    ReluGrad: _relu_grad,
    MulNoNan: _mul_no_nan,
    Square: _square,
    Sqrt: _sqrt,
    Abs: _abs,
    Sign: _zero,
    StopGradient: _zero,
    Where: _where,
    Maximum: _minmax(True),
    Minimum: _minmax(False),
    Sum: _sum,
    Mean: _mean,
    Reshape: _reshape,
    Transpose: _transpose,
    BroadcastTo: _broadcast_to,
    GetItem: _getitem,
    ScatterAdd: _scatter_add,
    MatMul: _matmul,
    AsType: _astype,
}

for _cls, _rule in RULES.items():
    if "jvp" not in vars(_cls):  # an op module's own rule wins
        _cls.jvp = staticmethod(_rule)
