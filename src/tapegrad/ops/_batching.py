"""Batching rules shared by many primitives (``Function.batch``, used by ``vmap``).

A rule is called as ``rule(args, batched, size, **params)``: ``args`` are the op's inputs one
level below the ``vmap`` (Tensors holding the whole batch on axis 0 where ``batched[i]``, the
unbatched values as they are elsewhere), ``size`` the batch size, ``params`` the op's static
parameters. It returns the op's output(s) for the whole batch, batch on axis 0, computed with
tapegrad ops (so that every transform around ``vmap`` sees them).

``elementwise`` serves every op that broadcasts its inputs like a ufunc; ``axis_rule`` every op
whose static parameters name axes of one (per-example) input.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

from tapegrad.core.tensor import Tensor

try:
    from numpy.exceptions import AxisError
except ImportError:  # pragma: no cover - NumPy < 1.25
    from numpy import AxisError  # pyright: ignore[reportAttributeAccessIssue]

__all__ = [
    "elementwise", "scaled_cotangent", "axis_rule", "per_example_ndim", "shift_axes",
    "example_axis", "batch_all", "align", "AxisError",
]


def per_example_ndim(a, batched: bool) -> int:
    """The number of axes one example of ``a`` has."""
    if not isinstance(a, Tensor) and not hasattr(a, "ndim"):
        return 0
    return a.ndim - 1 if batched else a.ndim


def align(args, batched, nd: int) -> list:
    """Batched Tensors reshaped to ``(B,) + (1,) * k + shape`` so that their examples have
    ``nd`` axes: NumPy broadcasting then pairs their axes with the unbatched operands'."""
    out = []
    for a, b in zip(args, batched):
        if b:
            pe = a.ndim - 1
            if pe < nd:
                a = a.reshape((a.shape[0],) + (1,) * (nd - pe) + a.shape[1:])
        out.append(a)
    return out


def batch_all(args, batched, size) -> list:
    """Every Tensor argument with the batch on axis 0 (unbatched ones broadcast: a view)."""
    out = []
    for a, b in zip(args, batched):
        if not b and isinstance(a, Tensor):
            a = a.reshape((1,) + a.shape).broadcast_to((size,) + a.shape)
        out.append(a)
    return out


def _elementwise_rule(cls, args, batched, size, **params):
    nd = max(per_example_ndim(a, b) for a, b in zip(args, batched))
    return cls.apply(*align(args, batched, nd), **params)


#: The batching rule of an elementwise op (its inputs broadcast like a ufunc's); use as
#: ``batch = elementwise`` in the class body.
elementwise = classmethod(_elementwise_rule)


def _scaled_cotangent_rule(cls, args, batched, size, **params):
    g = args[0]
    if not batched[0] and any(batched[1:]) and isinstance(g, Tensor):
        # the output has g's shape: a batch that reaches it only through the other inputs
        # (a derivative constant in them) must still appear in it
        args = [g.reshape((1,) + g.shape).broadcast_to((size,) + g.shape), *args[1:]]
        batched = (True, *batched[1:])
    return _elementwise_rule(cls, args, batched, size, **params)


#: The batching rule of an elementwise op whose output has the shape of its first input, the
#: cotangent ``g`` (a backward rule such as ``g * f'(x)``): as :data:`elementwise`, with ``g``
#: given the batch axis when only the other inputs have it.
scaled_cotangent = classmethod(_scaled_cotangent_rule)


def example_axis(axis, ndim: int, op: str = "") -> int:
    """One per-example ``axis`` (negatives allowed) of an example with ``ndim`` axes, as a
    non-negative int.

    Raises:
        numpy.exceptions.AxisError: (a ``ValueError`` and ``IndexError``) if ``axis`` is out
            of range, naming ``op``, the axis and ``ndim``: never wrapped around.
        TypeError: if ``axis`` is not an int.
    """
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{op or 'vmap'}: axis must be an int, got {axis!r}")
    a = int(axis)
    if not -ndim <= a < ndim:
        raise AxisError(f"{op or 'vmap'}: axis {a} is out of range for a Tensor with ndim "
                        f"{ndim} (axes of one example, inside vmap)")
    return a % ndim


def shift_axes(axis, ndim: int, op: str = ""):
    """A per-example ``axis`` (None, an int or a tuple, negatives allowed) of an example with
    ``ndim`` axes, as axes of the batch (shifted past axis 0; None: every example axis).

    Raises:
        numpy.exceptions.AxisError: if an axis is out of range for ``ndim`` (naming ``op``).
    """
    if axis is None:
        return tuple(range(1, ndim + 1))
    if isinstance(axis, (tuple, list)):
        return tuple(example_axis(a, ndim, op) + 1 for a in axis)
    return example_axis(axis, ndim, op) + 1


@functools.cache
def _defaults(fn) -> dict:
    """The keyword defaults of ``fn`` (a Function's ``forward``)."""
    return {k: p.default for k, p in inspect.signature(fn).parameters.items()
            if p.default is not inspect.Parameter.empty}


def axis_rule(*names, none_means_all=True, of: int = 0):
    """A batching rule for an op whose parameters ``names`` are axes of its input ``of``
    (shifted past the batch axis; ``None`` meaning all axes when ``none_means_all``). A
    parameter left out takes the default of the op's ``forward``. The other Tensor inputs are
    batched along (unbatched ones broadcast)."""

    def rule(cls, args, batched, size, **params):
        x = args[of]
        pe = x.ndim - 1 if batched[of] else x.ndim
        args = batch_all(args, batched, size) if not all(
            b for a, b in zip(args, batched) if isinstance(a, Tensor)) else list(args)
        defaults = _defaults(cls.forward)
        for n in names:
            value = params[n] if n in params else defaults.get(n)
            if value is not None or none_means_all:
                params[n] = shift_axes(value, pe, cls._name())
        return cls.apply(*args, **params)

    return classmethod(rule)
