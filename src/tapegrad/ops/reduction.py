"""Reductions over ``axis`` (int, tuple of ints, or None for all) with ``keepdims``."""

from __future__ import annotations

from tapegrad.function import Function

__all__ = ["Sum", "Mean", "normalize_axis"]


def normalize_axis(axis, ndim: int, op: str) -> tuple:
    """``axis`` (None, int or tuple) as a sorted tuple of non-negative ints.

    Raises:
        ValueError: if an axis is out of range for ``ndim`` or repeated, naming ``op``.
        TypeError: if ``axis`` is not None, an int or a tuple/list of ints.
    """
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else axis
    if not isinstance(axes, (tuple, list)) or not all(
        isinstance(a, int) and not isinstance(a, bool) for a in axes
    ):
        raise TypeError(f"{op}: axis must be None, an int or a tuple of ints, got {axis!r}")
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"{op}: axis {a} is out of range for a Tensor with ndim {ndim}")
        out.append(a % ndim if ndim else 0)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in {axis!r}")
    return tuple(sorted(out))


def _kept_shape(shape, axes):
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def _reduced_shape(shape, axes, keepdims):
    if keepdims:
        return _kept_shape(shape, axes)
    return tuple(s for i, s in enumerate(shape) if i not in axes)


class Sum(Function):
    """Sum over ``axis``. Backward: the cotangent broadcast back over the reduced axes."""

    oper = "sum"

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        axes = normalize_axis(axis, x.ndim, "sum")
        ctx.in_shape = x.shape
        ctx.axes = axes
        ctx.keepdims = keepdims
        return x.sum(axis=axes, keepdims=keepdims)

    @staticmethod
    def backward(ctx, g):
        from tapegrad import numpy as tnp

        if not ctx.keepdims:
            g = tnp.reshape(g, _kept_shape(ctx.in_shape, ctx.axes))
        return tnp.broadcast_to(g, ctx.in_shape)

    @classmethod
    def output_shape(cls, shape, axis=None, keepdims=False):
        return _reduced_shape(shape, normalize_axis(axis, len(shape), "sum"), keepdims)


class Mean(Function):
    """Arithmetic mean over ``axis``. Backward: cotangent / n broadcast back."""

    oper = "mean"

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        axes = normalize_axis(axis, x.ndim, "mean")
        ctx.in_shape = x.shape
        ctx.axes = axes
        ctx.keepdims = keepdims
        n = 1
        for a in axes:
            n *= x.shape[a]
        ctx.n = n
        return x.mean(axis=axes, keepdims=keepdims)

    @staticmethod
    def backward(ctx, g):
        from tapegrad import numpy as tnp

        if not ctx.keepdims:
            g = tnp.reshape(g, _kept_shape(ctx.in_shape, ctx.axes))
        return tnp.broadcast_to(g / ctx.n, ctx.in_shape)

    @classmethod
    def output_shape(cls, shape, axis=None, keepdims=False):
        return _reduced_shape(shape, normalize_axis(axis, len(shape), "mean"), keepdims)
