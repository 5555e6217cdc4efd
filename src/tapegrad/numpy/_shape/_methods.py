"""The Tensor methods of the shape functions (attached by :mod:`tapegrad.numpy.methods`)."""

from __future__ import annotations

import math

from tapegrad.numpy._shape.diagonals import diagonal, trace, tril, triu
from tapegrad.numpy._shape.indexing import _gather, take
from tapegrad.numpy._shape.joining import stack
from tapegrad.numpy._shape.repetition import repeat, tile
from tapegrad.numpy._shape.reshaping import (
    broadcast_to,
    expand_dims,
    moveaxis,
    ravel,
    reshape,
    squeeze,
    swapaxes,
    transpose,
)
from tapegrad.numpy._shape.windows import strided_windows
from tapegrad.ops.movement import as_shape as _as_shape
from tapegrad.ops.movement import check_axis as _check_axis

__all__ = []


# -- Tensor methods -------------------------------------------------------------------------
# (``reshape``, ``transpose``, ``T``, ``__getitem__``, ``broadcast_to``, ``flip``, ``roll``,
# ``pad`` and ``cat`` are declared with their primitives in tapegrad.ops.movement.)
def _varargs(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return args


def _method_view(self, *shape):
    """``view(*shape)`` as in PyTorch: same as :meth:`reshape` (a new Tensor; data is immutable,
    so sharing is unobservable)."""
    return reshape(self, _varargs(shape))


def _method_flatten(self, start_dim=0, end_dim=-1):
    """Flatten axes ``start_dim..end_dim`` (inclusive) into one; the defaults give NumPy's
    ``flatten()`` (1-D). A 0-d Tensor becomes shape ``(1,)``."""
    if self.ndim == 0:
        return reshape(self, (1,))
    s = _check_axis(start_dim, self.ndim, "flatten", "start_dim")
    e = _check_axis(end_dim, self.ndim, "flatten", "end_dim")
    if s > e:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    shape = self.shape
    return reshape(self, shape[:s] + (math.prod(shape[s : e + 1]),) + shape[e + 1 :])


def _method_permute(self, *dims):
    """``x.permute(1, 0, 2)`` or ``x.permute((1, 0, 2))``: NumPy's ``transpose(axes)``."""
    return transpose(self, _varargs(dims))


def _method_expand(self, *shape):
    """``expand(*shape)`` as in PyTorch: broadcast to ``shape``; ``-1`` keeps that axis's size.

    New axes may only be added at the front, and must not be -1.
    """
    shape = _as_shape(_varargs(shape), "expand")
    lead = len(shape) - self.ndim
    if lead < 0:
        raise ValueError(
            f"expand: target shape {shape} has fewer axes than the Tensor's shape {self.shape}"
        )
    if any(s == -1 for s in shape[:lead]):
        raise ValueError(f"expand: -1 is not allowed for a new leading axis, got {shape}")
    full = shape[:lead] + tuple(self.shape[i] if s == -1 else s for i, s in enumerate(shape[lead:]))
    return broadcast_to(self, full)


def _method_unsqueeze(self, dim):
    """Insert a size-1 axis at ``dim`` (PyTorch's name for :func:`expand_dims`)."""
    return expand_dims(self, dim)


def _method_repeat(self, repeats, axis=None):
    """NumPy's ``ndarray.repeat`` (each element repeated; not PyTorch's ``repeat``, which is
    :func:`tile`)."""
    return repeat(self, repeats, axis)


#: The Tensor methods of this module (attached by :mod:`tapegrad.numpy.methods`).
METHODS = (
    {
        "view": _method_view,
        "ravel": ravel,
        "flatten": _method_flatten,
        "squeeze": squeeze,
        "unsqueeze": _method_unsqueeze,
        "permute": _method_permute,
        "swapaxes": swapaxes,
        "moveaxis": moveaxis,
        "expand": _method_expand,
        "repeat": _method_repeat,
        "tile": tile,
        "tril": tril,
        "triu": triu,
        "diagonal": diagonal,
        "trace": trace,
        "take": take,
        "gather": _gather,
        "strided_windows": strided_windows,
        "stack": staticmethod(stack),
    }
)
