"""Repetition: ``tile`` and ``repeat``."""

from __future__ import annotations

import numpy as _np

from tapegrad.core.tensor import Tensor
from tapegrad.numpy._core import _tensor
from tapegrad.numpy._shape.indexing import _index
from tapegrad.numpy._shape.reshaping import broadcast_to, ravel, reshape
from tapegrad.ops.movement import IndexSlot as _Slot
from tapegrad.ops.movement import as_shape as _as_shape
from tapegrad.ops.movement import check_axis as _check_axis

__all__ = [
    "tile",
    "repeat",
]


def tile(x, reps) -> Tensor:
    """Repeat the whole Tensor ``reps`` times along each axis (``numpy.tile``); shorter of
    ``reps`` and ``x.shape`` is padded with leading 1s.

    Gradient: the cotangent summed over the copies (a broadcast, then reshapes).

    Raises:
        ValueError: if a repetition count is negative.
    """
    x = _tensor(x)
    reps = _as_shape(reps, "tile")
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: repetitions must be >= 0, got {reps}")
    nd = max(x.ndim, len(reps))
    reps = (1,) * (nd - len(reps)) + reps
    shape = (1,) * (nd - x.ndim) + x.shape
    inter = tuple(v for s in shape for v in (1, s))
    expanded = tuple(v for r, s in zip(reps, shape) for v in (r, s))
    y = broadcast_to(reshape(x, inter), expanded)
    return reshape(y, tuple(r * s for r, s in zip(reps, shape)))


def repeat(x, repeats, axis=None) -> Tensor:
    """Repeat each element ``repeats`` times along ``axis`` (``numpy.repeat``).

    Args:
        x: Tensor; with ``axis=None`` it is flattened first.
        repeats: An int, or one non-negative int per element along the axis (a length-1
            sequence applies to all). Static: a traced Tensor is not accepted.
        axis: The axis to repeat along.

    Returns:
        Tensor of ``x``'s dtype. Gradient: each element gets the sum of its copies' cotangents.

    Raises:
        ValueError: for negative repeats or a length that matches neither 1 nor the axis.
    """
    x = _tensor(x)
    if axis is None:
        x, ax = ravel(x), 0
    else:
        ax = _check_axis(axis, x.ndim, "repeat")
    n = x.shape[ax]
    reps = _np.asarray(repeats.numpy() if isinstance(repeats, Tensor) else repeats)
    if reps.dtype.kind not in "iu" and not (reps.size == 0 and reps.dtype.kind == "f"):
        raise TypeError(f"repeat: repeats must be integers, got dtype {reps.dtype}")
    reps = reps.astype(_np.int64)
    if reps.ndim > 1:
        raise ValueError(f"repeat: repeats must be an int or 1-D, got shape {reps.shape}")
    if (reps < 0).any():
        raise ValueError("repeat: repeats must be >= 0")
    if reps.ndim == 0 or reps.size == 1:
        r = int(reps.reshape(-1)[0])
        inter = x.shape[: ax + 1] + (1,) + x.shape[ax + 1 :]
        y = broadcast_to(reshape(x, inter), x.shape[: ax + 1] + (r,) + x.shape[ax + 1 :])
        return reshape(y, x.shape[:ax] + (n * r,) + x.shape[ax + 1 :])
    if reps.size != n:
        raise ValueError(
            f"repeat: got {reps.size} repeats for an axis of size {n} (axis {ax}, shape "
            f"{x.shape}); give one per element or a single one"
        )
    index = _np.repeat(_np.arange(n), reps)
    return _index(x, (slice(None),) * ax + (_Slot(0, False),), (index,))
