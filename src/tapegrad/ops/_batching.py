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

from tapegrad.tensor import Tensor

__all__ = ["elementwise", "axis_rule", "per_example_ndim", "shift_axes", "batch_all", "align"]


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


def shift_axes(axis, ndim: int):
    """A per-example ``axis`` (None, an int or a tuple, negatives allowed) of an example with
    ``ndim`` axes, as axes of the batch (shifted past axis 0; None: every example axis)."""
    if axis is None:
        return tuple(range(1, ndim + 1))
    if isinstance(axis, (tuple, list)):
        return tuple((int(a) % max(ndim, 1)) + 1 for a in axis)
    return (int(axis) % max(ndim, 1)) + 1


def axis_rule(*names, none_means_all=True):
    """A batching rule for an op of one batched input whose parameters ``names`` are axes of
    it (shifted past the batch axis; ``None`` meaning all axes when ``none_means_all``)."""

    def rule(cls, args, batched, size, **params):
        x = args[0]
        args = batch_all(args, batched, size) if not all(
            b for a, b in zip(args, batched) if isinstance(a, Tensor)) else list(args)
        pe = x.ndim - 1 if batched[0] else x.ndim
        for n in names:
            if n in params and (params[n] is not None or none_means_all):
                params[n] = shift_axes(params[n], pe)
        return cls.apply(*args, **params)

    return classmethod(rule)
