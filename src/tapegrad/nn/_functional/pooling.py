"""Pooling: ``adaptive_avg_pool2d`` and the helpers the other pools share."""

from __future__ import annotations

import numpy as np

from tapegrad import numpy as tnp
from tapegrad.core.tensor import Tensor
from tapegrad.nn._functional._common import _floating
from tapegrad.nn._functional.conv import _pair, _resolve_padding, _single
from tapegrad.ops.nn import (  # the primitives, defined with their rules in tapegrad.ops
    _const,
    _out_hw,
)

__all__ = [
    "adaptive_avg_pool2d",
]


def _pool_params(x, kernel_size, stride, padding, who):
    kernel = _pair(kernel_size, "kernel_size", who)
    stride = kernel if stride is None else _pair(stride, "stride", who)
    pads = _resolve_padding(padding, x.shape[2:], kernel, stride, (1, 1), who)
    if not isinstance(padding, str) and (pads[0] > kernel[0] // 2 or pads[2] > kernel[1] // 2):
        raise ValueError(f"{who}: padding {padding} must be at most half the kernel size {kernel}")
    out_hw = _out_hw(x.shape[2:], kernel, stride, (1, 1), pads)
    if min(out_hw) < 1:
        raise ValueError(
            f"{who}: input of spatial size {x.shape[2:]} is smaller than the kernel {kernel}"
        )
    return kernel, stride, pads


def _adaptive_matrix(size: int, out: int, dtype) -> np.ndarray:
    """``(out, size)`` averaging matrix of PyTorch's adaptive bins: row ``i`` averages
    ``[floor(i size / out), ceil((i + 1) size / out))``."""
    m = np.zeros((out, size), dtype=dtype)
    for i in range(out):
        start, end = (i * size) // out, -(-((i + 1) * size) // out)
        m[i, start:end] = 1.0 / (end - start)
    return m


def adaptive_avg_pool2d(input, output_size) -> Tensor:
    """2-D adaptive average pooling (``torch.nn.functional.adaptive_avg_pool2d``): average
    over PyTorch's bins so that the output has ``output_size``, whatever the input size.

    Output ``(i, j)`` averages rows ``[floor(i H / Ho), ceil((i + 1) H / Ho))`` and the
    columns likewise; the bins overlap when ``Ho`` does not divide ``H``. Computed as two
    matrix products with constant averaging matrices (``A_h x A_w^T``), so it is linear and
    differentiable to any order.

    Args:
        input: Floating Tensor of shape ``(N, C, H, W)`` or ``(C, H, W)``.
        output_size: Int or pair ``(Ho, Wo)``; a ``None`` entry keeps that input size.

    Returns:
        Tensor of shape ``(..., Ho, Wo)``, ``input``'s dtype.

    Raises:
        TypeError: for non-floating input or a bad ``output_size`` kind.
        ValueError: for another number of dims, or an output size < 1.

    Example:
        >>> import tapegrad as tg
        >>> x = tg.random.normal(tg.random.key(0), (2, 3, 7, 5))
        >>> tg.nn.functional.adaptive_avg_pool2d(x, (3, None)).shape
        (2, 3, 3, 5)
    """
    who = "adaptive_avg_pool2d"
    x = _floating(input, who)
    if x.ndim not in (3, 4):
        raise ValueError(f"{who}: input must have shape (N, C, H, W) or (C, H, W), got {x.shape}")
    if output_size is None or isinstance(output_size, (int, np.integer)):
        output_size = (output_size, output_size)
    if not isinstance(output_size, (tuple, list)) or len(output_size) != 2:
        raise TypeError(f"{who}: output_size must be an int or a pair, got {output_size!r}")
    h, w = x.shape[-2:]
    ho, wo = (
        size if o is None else _single(o, "output_size", who)
        for o, size in zip(output_size, (h, w))
    )
    if ho == 0 or wo == 0:  # only from an empty input axis with None
        raise ValueError(f"{who}: output size ({ho}, {wo}) must be >= 1")
    y = x
    if ho != h:
        y = tnp.matmul(_const(_adaptive_matrix(h, ho, x.dtype), x), y)
    if wo != w:
        y = tnp.matmul(y, _const(_adaptive_matrix(w, wo, x.dtype).T.copy(), x))
    return y
