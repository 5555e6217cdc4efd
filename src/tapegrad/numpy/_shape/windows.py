"""Sliding windows: ``sliding_window_view`` and ``strided_windows``."""

from __future__ import annotations

import operator

from tapegrad import ops as _ops
from tapegrad.core.tensor import Tensor
from tapegrad.numpy._core import _tensor
from tapegrad.numpy._shape.reshaping import transpose
from tapegrad.ops._registry import ns as _ns

__all__ = [
    "sliding_window_view",
    "strided_windows",
]

# -- functions of one primitive, defined with it in tapegrad.ops.movement
sliding_window_view = _ns.sliding_window_view

def strided_windows(x, kernel_size: int, stride: int = 1) -> Tensor:
    """Square sliding windows over the last two axes (``Tensor.strided_windows``).

    Args:
        x: Tensor of shape ``(..., H, W)``, typically ``(batch, channels, H, W)``.
        kernel_size: Window side ``k``.
        stride: Step ``s`` between window positions.

    Returns:
        Tensor of shape ``(H_out, W_out, ..., k, k)`` with ``H_out = (H - k) // s + 1`` and
        ``W_out = (W - k) // s + 1``: a strided view, permuted.

    Gradient: one scatter-add over all windows (overlapping windows accumulate).

    Raises:
        ValueError: if ``x.ndim < 2``, ``k`` exceeds ``H`` or ``W``, or ``stride < 1``.

    Example:
        >>> import numpy as np, tapegrad as tg
        >>> tg.Tensor(np.zeros((2, 3, 10, 10))).strided_windows(kernel_size=3, stride=1).shape
        (8, 8, 2, 3, 3, 3)
    """
    x = _tensor(x)
    if x.ndim < 2:
        raise ValueError(f"strided_windows: needs a Tensor of shape (..., H, W), got {x.shape}")
    k, s = operator.index(kernel_size), operator.index(stride)
    nd = x.ndim
    w = _ops.SlidingWindow.apply(
        x, window_shape=(k, k), axis=(nd - 2, nd - 1), step=(1,) * (nd - 2) + (s, s)
    )
    return transpose(w, (nd - 2, nd - 1, *range(nd - 2), nd, nd + 1))
