"""Shape changes and indexing of ``tapegrad.numpy``."""

from __future__ import annotations

import numpy as _np

from tapegrad import ops as _ops
from tapegrad.numpy._core import _install_methods, _tensor
from tapegrad.tensor import Tensor

__all__ = ["reshape", "transpose", "swapaxes", "expand_dims", "broadcast_to"]


# -- shapes ---------------------------------------------------------------------------------
def reshape(x, shape) -> Tensor:
    """Reshape to ``shape`` (a tuple; one entry may be -1).

    Raises:
        ValueError: if the number of elements differs, naming both shapes.
    """
    if isinstance(shape, int):
        shape = (shape,)
    return _ops.Reshape.apply(_tensor(x), tuple(shape))


def transpose(x, axes=None) -> Tensor:
    """Permute the axes (``None`` reverses them)."""
    return _ops.Transpose.apply(_tensor(x), axes=None if axes is None else tuple(axes))


def swapaxes(x, axis1: int, axis2: int) -> Tensor:
    """Exchange two axes."""
    x = _tensor(x)
    nd = x.ndim
    for a in (axis1, axis2):
        if not -nd <= a < nd:
            raise ValueError(f"swapaxes: axis {a} is out of range for ndim {nd}")
    axes = list(range(nd))
    axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
    return _ops.Transpose.apply(x, axes=tuple(axes))


def expand_dims(x, axis: int) -> Tensor:
    """Insert a size-1 axis at ``axis``."""
    x = _tensor(x)
    nd = x.ndim + 1
    if not -nd <= axis < nd:
        raise ValueError(f"expand_dims: axis {axis} is out of range for ndim {x.ndim}")
    axis %= nd
    shape = x.shape[:axis] + (1,) + x.shape[axis:]
    return _ops.Reshape.apply(x, shape)


def broadcast_to(x, shape) -> Tensor:
    """Broadcast to ``shape`` (NumPy rules); the gradient sums back."""
    x = _tensor(x)
    shape = tuple(shape)
    if x.shape == shape:
        return x
    return _ops.BroadcastTo.apply(x, shape)


def _getitem(x, idx):
    if isinstance(idx, Tensor):
        idx = idx.numpy()
    elif isinstance(idx, tuple):
        idx = tuple(i.numpy() if isinstance(i, Tensor) else i for i in idx)
    elif isinstance(idx, list):
        idx = _np.asarray(idx)
    return _ops.GetItem.apply(x, idx)


def _method_reshape(self, *shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return reshape(self, shape)


def _method_transpose(self, *axes):
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = tuple(axes[0])
    return transpose(self, axes or None)


_install_methods(
    {
        "__getitem__": _getitem,
        "reshape": _method_reshape,
        "transpose": _method_transpose,
        "swapaxes": swapaxes,
        "T": property(lambda self: transpose(self), doc="The transpose (axes reversed)."),
    }
)
