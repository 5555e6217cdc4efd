"""Sliding windows of images: ``extract_windows``."""

from __future__ import annotations

from tapegrad import numpy as tnp
from tapegrad.nn._functional.conv import _resolve_padding, _single

__all__ = [
    "extract_windows",
]


def extract_windows(x, kernel_size: int, stride: int, padding_mode: str = "valid") -> tuple:
    """Sliding ``kernel_size x kernel_size`` windows of ``(N, C, H, W)`` images, keeping the
    graph (differentiable; an im2col view).

    Args:
        x: Tensor (or array) of shape ``(N, C, H, W)``.
        kernel_size: Window side ``k >= 1``.
        stride: Step ``s >= 1`` between windows, in both directions.
        padding_mode: ``"valid"`` (no padding: ``H_out = (H - k) // s + 1``) or ``"same"``
            (zero padding so that ``H_out = ceil(H / s)``; the extra odd row/column goes at
            the bottom/right, as :func:`conv2d`'s ``"same"``).

    Returns:
        ``(windows, (H_out, W_out))``: ``windows`` of shape ``(H_out, W_out, N, C, k, k)``
        with ``windows[i, j] = x_padded[:, :, i s : i s + k, j s : j s + k]``, differentiable
        (the gradient sums the cotangents of overlapping windows), and the output size.

    Raises:
        TypeError: for non-int ``kernel_size`` or ``stride``.
        ValueError: for another number of dims, a bad ``padding_mode``, sizes < 1 or a
            ``"valid"`` window larger than the image.

    Example:
        >>> import tapegrad as tg
        >>> x = tg.random.normal(tg.random.key(0), (2, 3, 32, 32))
        >>> windows, size = tg.nn.extract_windows(x, 3, 1, padding_mode="same")
        >>> windows.shape, size
        ((32, 32, 2, 3, 3, 3), (32, 32))
    """
    who = "extract_windows"
    x = tnp.asarray(x)
    if x.ndim != 4:
        raise ValueError(f"{who}: x must have shape (N, C, H, W), got {x.shape}")
    k = _single(kernel_size, "kernel_size", who)
    s = _single(stride, "stride", who)
    if padding_mode not in ("valid", "same"):
        raise ValueError(f"{who}: padding_mode must be 'valid' or 'same', got {padding_mode!r}")
    pt, pb, pl, pr = _resolve_padding(padding_mode, x.shape[2:], (k, k), (s, s), (1, 1), who)
    if pt or pb or pl or pr:
        x = tnp.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    h, w = x.shape[2:]
    if k > h or k > w:
        raise ValueError(f"{who}: kernel_size {k} is larger than the (padded) image {(h, w)}")
    windows = tnp.strided_windows(x, k, s)
    return windows, (windows.shape[0], windows.shape[1])
