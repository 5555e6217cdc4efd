"""Reshaping: ``reshape``, ``ravel``, ``squeeze``, ``expand_dims``, ``transpose``,
``permute_dims``, ``swapaxes``, ``moveaxis`` and ``broadcast_to``."""

from __future__ import annotations

import numpy as _np

from tapegrad.core.tensor import Tensor
from tapegrad.numpy._core import _tensor
from tapegrad.ops._registry import ns as _ns
from tapegrad.ops.movement import check_axes as _check_axes
from tapegrad.ops.movement import check_axis as _check_axis
from tapegrad.ops.movement import swap_axes as _swap_axes

__all__ = [
    "reshape",
    "ravel",
    "squeeze",
    "expand_dims",
    "transpose",
    "permute_dims",
    "swapaxes",
    "moveaxis",
    "broadcast_to",
]

# -- functions of one primitive, defined with it in tapegrad.ops.movement
reshape = _ns.reshape
transpose = _ns.transpose
permute_dims = _ns.permute_dims
broadcast_to = _ns.broadcast_to

def ravel(x) -> Tensor:
    """Flatten to 1-D in C order: shape ``(x.size,)``."""
    x = _tensor(x)
    return reshape(x, (x.size,))


def squeeze(x, axis=None) -> Tensor:
    """Remove size-1 axes: all of them (``axis=None``) or the given int/tuple of axes.

    Raises:
        ValueError: if an axis is out of range, or a selected axis does not have size 1
            (naming the axis, its size and the shape).
    """
    x = _tensor(x)
    if axis is None:
        axes = tuple(i for i, s in enumerate(x.shape) if s == 1)
    else:
        axes = _check_axes(axis, x.ndim, "squeeze")
        for a in axes:
            if x.shape[a] != 1:
                raise ValueError(
                    f"squeeze: cannot squeeze axis {a} of a Tensor of shape {x.shape}: its size "
                    f"is {x.shape[a]}, not 1"
                )
    return reshape(x, tuple(s for i, s in enumerate(x.shape) if i not in axes))


def expand_dims(x, axis) -> Tensor:
    """Insert size-1 axes so that they sit at positions ``axis`` (int or tuple) of the result.

    Raises:
        numpy.exceptions.AxisError: (a ``ValueError`` and an ``IndexError``, as NumPy's and
            the array API's ``expand_dims`` raise) if an axis is out of range for the
            result's ``ndim``.
        ValueError: if an axis is repeated.
    """
    x = _tensor(x)
    n_new = 1 if isinstance(axis, (int, _np.integer)) else len(tuple(axis))
    out_nd = x.ndim + n_new
    axes = set(_check_axes(axis, out_nd, "expand_dims"))
    it = iter(x.shape)
    return reshape(x, tuple(1 if i in axes else next(it) for i in range(out_nd)))


def _axis_or_flat(x, axis, op: str):
    """``x`` as a Tensor and ``axis`` checked against it; ``axis=None`` works on the flattened
    ``x`` along axis 0 (NumPy's convention for ``take``, ``insert`` and ``delete``)."""
    x = _tensor(x)
    if axis is None:
        return ravel(x), 0
    return x, _check_axis(axis, x.ndim, op)


def swapaxes(x, axis1: int, axis2: int) -> Tensor:
    """Exchange two axes.

    Raises:
        ValueError: if an axis is out of range, naming it and ``x.ndim``.
    """
    return _swap_axes(_tensor(x), axis1, axis2)


def moveaxis(x, source, destination) -> Tensor:
    """Move axes ``source`` (int or sequence) to positions ``destination``; the others keep
    their order.

    Raises:
        ValueError: if the two have different lengths, or an axis is out of range or repeated.
    """
    x = _tensor(x)
    src = _check_axes(source, x.ndim, "moveaxis", "source")
    dst = _check_axes(destination, x.ndim, "moveaxis", "destination")
    if len(src) != len(dst):
        raise ValueError(
            f"moveaxis: source {source!r} and destination {destination!r} must have the same "
            "number of elements"
        )
    order = [a for a in range(x.ndim) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(x, order)
