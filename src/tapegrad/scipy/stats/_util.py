"""Helpers of ``tapegrad.scipy.stats``: argument conversion, SciPy's conventions for invalid
parameters, and value checks that raise SciPy's errors."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, ParamSpec

import numpy as np

import tapegrad.numpy as tnp
from tapegrad.core.function import Function, Traits
from tapegrad.core.tensor import Tensor
from tapegrad.ops._batching import batch_all
from tapegrad.scipy._base import operands

__all__ = ["floats", "log", "where_valid", "checked", "all_positive", "composed", "LOG_2PI",
           "LOG_SQRT_2PI", "NAN"]

LOG_2PI = math.log(2.0 * math.pi)
LOG_SQRT_2PI = 0.5 * LOG_2PI
NAN = float("nan")


def floats(*xs):
    """The arguments as floating Tensors of one dtype: the promoted dtype of the Tensor and
    array arguments (integers and booleans count as float64, SciPy's distributions compute
    in floating point); Python numbers take that dtype (NumPy's weak promotion). When every
    argument is a Python number the dtype is float32, tapegrad's default for Python data."""
    ts = operands(*xs)
    dtypes = [np.float64 if t.dtype.kind in "iub" else t.dtype for t in ts
              if isinstance(t, Tensor)]
    dtype = np.result_type(*dtypes)
    if dtype.kind not in "fc":
        dtype = np.dtype(np.float64)
    out = []
    for t in ts:
        if isinstance(t, Tensor):
            out.append(t if t.dtype == dtype else t.astype(dtype))
        else:
            out.append(tnp.asarray(t, dtype=dtype))
    return out


def log(v):
    """``log(v)``: ``math.log`` for a Python number (NaN for ``v <= 0``), else ``tnp.log``."""
    if isinstance(v, Tensor):
        return tnp.log(v)
    return math.log(v) if v > 0 else (-math.inf if v == 0 else NAN)


def where_valid(cond, value):
    """``value`` where ``cond`` holds, NaN elsewhere (SciPy's result for invalid parameters).
    ``cond`` may be a Python bool (a parameter given as a number)."""
    if cond is True:
        return value
    if cond is False:
        return value * NAN
    return tnp.where(cond, value, NAN)


def positive(v):
    """``v > 0`` as a Python bool for a number, a boolean Tensor otherwise."""
    return bool(v > 0) if not isinstance(v, Tensor) else v > 0


def all_positive(*vs):
    """Whether every one of ``vs`` is ``> 0``: a Python bool when all are numbers, else a
    boolean Tensor (elementwise, broadcast)."""
    conds = [positive(v) for v in vs]
    if all(isinstance(c, bool) for c in conds):
        return all(conds)
    return functools.reduce(tnp.logical_and, conds)


P = ParamSpec("P")

#: The Args and Returns sections of the log-density of a distribution of ``(x, df, loc,
#: scale)`` (Student's t, chi-squared).
DF_ARGS = """
    Args:
        x: Values.
        df: Degrees of freedom, ``> 0``.
        loc: Location.
        scale: Scale, ``> 0``. All broadcast together.

    Returns:
        Tensor of the broadcast shape.
"""

#: The Returns and Raises sections of a method that :func:`composed` documents.
_COMPOSED_SECTIONS = """

    Returns:
        Floating Tensor of the arguments' broadcast shape; NaN where a parameter is out of its
        range (as SciPy).

    Raises:
        ValueError: if the arguments' shapes do not broadcast.
        TypeError: for non-numeric arguments.
    """


def composed(outer: Callable[[Any], Any], inner: Callable[P, Tensor], name: str,
             summary: str) -> Callable[P, Tensor]:
    """The distribution method ``name``: ``outer(inner(*args, **kwargs))`` (``pdf`` is
    ``exp(logpdf)``, ``logcdf`` is ``log(cdf)``, ...), with ``inner``'s signature and module,
    documented by ``summary`` and the Returns and Raises sections these methods share."""

    @functools.wraps(inner)
    def method(*args: P.args, **kwargs: P.kwargs) -> Tensor:
        return outer(inner(*args, **kwargs))

    method.__name__ = method.__qualname__ = name
    method.__doc__ = summary + _COMPOSED_SECTIONS
    return method


def safe(cond, x, fill):
    """``where(cond, x, fill)`` for feeding a branch that is only used where ``cond`` holds
    (keeps NaN and inf out of the unused branch and its derivatives)."""
    if not isinstance(x, Tensor) or cond is True:
        return x
    return tnp.where(cond, x, fill)


class CheckValues(Function):
    """Identity on its first input that first checks elementwise predicates on each input
    and raises ``ValueError`` with the matching message where one fails (SciPy's argument
    validation). The checks run in the forward pass on concrete values, so they also run
    under ``grad``, on every example of a ``vmap`` and when a ``jit`` tape replays."""

    oper = "check_values"
    traits = Traits(view=True)

    @staticmethod
    def forward(ctx, x, *others, preds, messages):
        for arr, pred, msg in zip((x, *others), preds, messages):
            if pred is not None and not bool(pred(arr).all()):
                raise ValueError(msg)
        return x

    @staticmethod
    def backward(ctx, g):
        n = len(ctx.needs_input_grad)
        return (g,) + (None,) * (n - 1) if n > 1 else g

    @staticmethod
    def jvp(ctx, t, *_):
        return t

    @classmethod
    def batch(cls, args, batched, size, **params):
        if not batched[0]:
            args = [batch_all([args[0]], [False], size)[0], *args[1:]]
        return cls.apply(*args, **params)

    @classmethod
    def output_shape(cls, x, *others, **params):
        return tuple(x)

    @classmethod
    def output_dtype(cls, x, *others, **params):
        return x


_CHECKS: dict = {}


def checked(name, x, *checks):
    """``x`` after checking ``(value, predicate, message)`` triples (see
    :class:`CheckValues`); a failure raises ``ValueError("<name>: <message> ...")``.
    ``value`` may be ``x`` itself or any Tensor."""
    values = [v for v, _, _ in checks]
    if not values:
        return x
    cls = _CHECKS.get(name)
    if cls is None:
        cls = _CHECKS[name] = type(f"CheckValues_{name}", (CheckValues,), {"oper": name})
    preds = tuple([None] + [p for _, p, _ in checks])
    messages = tuple([""] + [m for _, _, m in checks])
    return cls.apply(x, *values, preds=preds, messages=messages)
