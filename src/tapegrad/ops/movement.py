"""Shape and indexing primitives: reshape, transpose, broadcast_to, getitem and its scatter."""

from __future__ import annotations

import math

import numpy as np

from tapegrad.function import Function

__all__ = [
    "ToDevice",
    "Reshape",
    "Transpose",
    "BroadcastTo",
    "GetItem",
    "ScatterAdd",
    "resolve_shape",
]


def resolve_shape(shape, size: int, op: str = "reshape") -> tuple:
    """Resolve a target shape with at most one ``-1`` for ``size`` elements.

    Raises:
        ValueError: if more than one ``-1`` appears or the sizes differ, naming ``op``.
    """
    shape = tuple(int(s) for s in shape)
    if shape.count(-1) > 1:
        raise ValueError(f"{op}: only one dimension can be -1, got {shape}")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or size % known:
            raise ValueError(f"{op}: cannot reshape {size} elements into shape {shape}")
        shape = tuple(size // known if s == -1 else s for s in shape)
    if math.prod(shape) != size or any(s < 0 for s in shape):
        raise ValueError(f"{op}: cannot reshape {size} elements into shape {shape}")
    return shape


class Reshape(Function):
    """Reshape to ``shape`` (one dimension may be -1). Backward: reshape back."""

    oper = "reshape"

    @staticmethod
    def forward(ctx, x, shape):
        shape = resolve_shape(shape, x.size)
        ctx.in_shape = x.shape
        return x.reshape(shape)

    @staticmethod
    def backward(ctx, g):
        return Reshape.apply(g, ctx.in_shape), None

    @classmethod
    def output_shape(cls, shape, new_shape):
        return resolve_shape(new_shape, math.prod(shape))


class Transpose(Function):
    """Permute axes (``axes=None`` reverses them). Backward: the inverse permutation."""

    oper = "transpose"

    @staticmethod
    def forward(ctx, x, axes=None):
        if axes is None:
            axes = tuple(range(x.ndim))[::-1]
        axes = tuple(int(a) % x.ndim if x.ndim else 0 for a in axes)
        if sorted(axes) != list(range(x.ndim)):
            raise ValueError(
                f"transpose: axes {axes} are not a permutation of the {x.ndim} axes of an "
                f"array of shape {x.shape}"
            )
        ctx.axes = axes
        return x.transpose(axes)

    @staticmethod
    def backward(ctx, g):
        inv = tuple(np.argsort(ctx.axes))
        return Transpose.apply(g, axes=inv)

    @classmethod
    def output_shape(cls, shape, axes=None):
        if axes is None:
            return tuple(shape)[::-1]
        return tuple(shape[a] for a in axes)


class BroadcastTo(Function):
    """Broadcast to ``shape`` (NumPy rules). Backward: ``apply`` sums the cotangent back."""

    oper = "broadcast_to"

    @staticmethod
    def forward(ctx, x, shape):
        try:
            return ctx.backend.broadcast_to(x, tuple(shape))
        except ValueError:
            raise ValueError(
                f"broadcast_to: cannot broadcast shape {x.shape} to {tuple(shape)}"
            ) from None

    @staticmethod
    def backward(ctx, g):
        return g, None

    @classmethod
    def output_shape(cls, shape, new_shape):
        return tuple(np.broadcast_shapes(tuple(shape), tuple(new_shape)))


class GetItem(Function):
    """``x[idx]`` with NumPy's basic and advanced indexing. Backward: scatter-add into zeros."""

    oper = "getitem"

    @staticmethod
    def forward(ctx, x, idx):
        ctx.in_shape = x.shape
        ctx.idx = idx
        return x[idx]

    @staticmethod
    def backward(ctx, g):
        return ScatterAdd.apply(g, ctx.in_shape, ctx.idx), None


class ScatterAdd(Function):
    """``zeros(shape)`` with ``g`` added at ``idx`` (repeated indices accumulate).

    The transpose of :class:`GetItem`; its own backward is ``GetItem``.
    """

    oper = "scatter_add"

    @staticmethod
    def forward(ctx, g, shape, idx):
        xp = ctx.backend
        ctx.idx = idx
        out = xp.zeros(shape, dtype=g.dtype)
        if xp is np:
            np.add.at(out, idx, g)
        else:  # pragma: no cover - GPU
            xp.add.at(out, idx, g)
        return out

    @staticmethod
    def backward(ctx, g):
        return GetItem.apply(g, ctx.idx), None, None


class ToDevice(Function):
    """Copy to ``device``. Backward: copy the cotangent back to the input's device."""

    oper = "to_device"

    @staticmethod
    def forward(ctx, x, device):
        from tapegrad.backend import device_of, to_device

        ctx.in_device = device_of(x)
        return to_device(x, device)

    @staticmethod
    def backward(ctx, g):
        return ToDevice.apply(g, ctx.in_device), None

    @classmethod
    def output_shape(cls, shape, device=None):
        return tuple(shape)
