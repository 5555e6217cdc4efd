"""Convolution: ``conv1d`` and ``conv2d``, with their padding and stride helpers."""

from __future__ import annotations

import numpy as np

from tapegrad import numpy as tnp
from tapegrad.core.tensor import Tensor
from tapegrad.nn._functional._common import _floating
from tapegrad.ops.nn import (  # the primitives, defined with their rules in tapegrad.ops
    Conv2d,
    _out_hw,
)

__all__ = [
    "conv1d",
    "conv2d",
    "Conv2d",
]


def _pair(v, name: str, who: str, minimum: int = 1) -> tuple:
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        v = (int(v), int(v))
    elif (
        isinstance(v, (tuple, list))
        and len(v) == 2
        and all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in v)
    ):
        v = (int(v[0]), int(v[1]))
    else:
        raise TypeError(f"{who}: {name} must be an int or a pair of ints, got {v!r}")
    if min(v) < minimum:
        raise ValueError(f"{who}: {name} must be >= {minimum}, got {v}")
    return v


def _resolve_padding(padding, hw, kernel, stride, dilation, who):
    """Padding as ``(top, bottom, left, right)``; 'same' is TensorFlow's rule for any stride."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0, 0, 0)
        if padding == "same":
            pads = []
            for size, k, s, d in zip(hw, kernel, stride, dilation):
                out = -(-size // s)
                total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
                pads += [total // 2, total - total // 2]
            return tuple(pads)
        raise ValueError(
            f"{who}: padding must be 'valid', 'same', an int or a pair, got {padding!r}"
        )
    ph, pw = _pair(padding, "padding", who, minimum=0)
    return (ph, ph, pw, pw)


def _image(x, who: str) -> Tensor:
    x = _floating(x, who)
    if x.ndim != 4:
        raise ValueError(f"{who}: input must have shape (N, C, H, W), got {x.shape}")
    return x


def _check_nonempty(x, kernel, stride, dilation, pads, shown_padding, who: str) -> None:
    """Check that a convolution of input ``x`` (``(N, C, *spatial)``) has a non-empty output
    (``_out_hw``); the error shows the padding as ``shown_padding``."""
    if min(_out_hw(x.shape[2:], kernel, stride, dilation, pads)) < 1:
        raise ValueError(
            f"{who}: input of spatial size {x.shape[2:]} with padding {shown_padding} is smaller "
            f"than the dilated kernel {kernel} (dilation {dilation}); the output would be empty"
        )


def _check_groups(x, w, groups: int, who: str, show_per_group: bool = False) -> tuple:
    """A grouped convolution's channel counts ``(C_in, C_out)``, checked: both divisible by
    ``groups``, and ``weight.shape[1] == C_in / groups``.

    Raises:
        ValueError: naming ``who``, the channel count, the weight's shape and ``groups``.
    """
    c_in, c_out = x.shape[1], w.shape[0]
    if c_in % groups or c_out % groups or w.shape[1] != c_in // groups:
        per = f" = {c_in // groups if c_in % groups == 0 else 'n/a'}" if show_per_group else ""
        raise ValueError(
            f"{who}: input has {c_in} channels and weight has shape {w.shape} with groups="
            f"{groups}; need C_in and C_out divisible by groups and weight.shape[1] == "
            f"C_in / groups{per}"
        )
    return c_in, c_out


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """2-D convolution (cross-correlation, as in PyTorch) over ``(N, C, H, W)`` images.

    Vectorised: one batched matmul on a strided (im2col) view for forward and for each
    gradient; no Python loop over pixels.

    Args:
        input: Floating Tensor of shape ``(N, C_in, H, W)``.
        weight: Tensor of shape ``(C_out, C_in / groups, kH, kW)``.
        bias: Optional Tensor of shape ``(C_out,)``.
        stride: Int or pair ``(sH, sW)``, >= 1.
        padding: Int or pair (zeros on both sides), or ``"valid"`` (none) or
            ``"same"`` (output size ``ceil(H / sH)``; extra odd padding goes at the bottom/right,
            as in TensorFlow; equal to PyTorch's ``"same"`` for stride 1).
        dilation: Int or pair, >= 1.
        groups: Number of channel groups; divides ``C_in`` and ``C_out``.

    Returns:
        Tensor of shape ``(N, C_out, H_out, W_out)`` with
        ``H_out = (H + pad_top + pad_bottom - dH (kH - 1) - 1) // sH + 1``.

    Raises:
        TypeError: for non-floating input or bad parameter kinds.
        ValueError: for mismatched channels, groups, or an input smaller than the kernel.
    """
    who = "conv2d"
    x = _image(input, who)
    w = tnp.asarray(weight)
    if w.ndim != 4:
        raise ValueError(
            f"{who}: weight must have shape (C_out, C_in/groups, kH, kW), got {w.shape}"
        )
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{who}: groups must be a positive int, got {groups!r}")
    c_in, c_out = _check_groups(x, w, groups, who, show_per_group=True)
    stride = _pair(stride, "stride", who)
    dilation = _pair(dilation, "dilation", who)
    kernel = tuple(w.shape[2:])
    pads = _resolve_padding(padding, x.shape[2:], kernel, stride, dilation, who)
    _check_nonempty(x, kernel, stride, dilation, pads, pads, who)
    if w.dtype != x.dtype:
        w = tnp.astype(w, x.dtype)
    conv = dict(stride=stride, padding=pads, dilation=dilation, groups=groups)
    if bias is None:
        return Conv2d.apply(x, w, **conv)
    bias = tnp.asarray(bias)
    if bias.shape != (c_out,):
        raise ValueError(f"{who}: bias must have shape ({c_out},), got {bias.shape}")
    if bias.dtype == x.dtype:
        return Conv2d.apply(x, w, bias, **conv)  # bias added in place into the fresh output
    return Conv2d.apply(x, w, **conv) + tnp.reshape(bias, (1, c_out, 1, 1))


def _single(v, name: str, who: str, minimum: int = 1) -> int:
    if isinstance(v, (tuple, list)) and len(v) == 1:
        v = v[0]
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{who}: {name} must be an int, got {v!r}")
    if v < minimum:
        raise ValueError(f"{who}: {name} must be >= {minimum}, got {v}")
    return int(v)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """1-D convolution (cross-correlation, as in PyTorch) over ``(N, C, L)`` sequences.

    Runs as :func:`conv2d` on a height-1 image, so it shares its vectorised im2col forward,
    its transposes as gradients and every order of derivative.

    Args:
        input: Floating Tensor of shape ``(N, C_in, L)``.
        weight: Tensor of shape ``(C_out, C_in / groups, k)``.
        bias: Optional Tensor of shape ``(C_out,)``.
        stride: Int >= 1.
        padding: Int (zeros on both ends), ``"valid"`` (none) or ``"same"`` (output length
            ``ceil(L / stride)``; extra odd padding at the end, as in TensorFlow; equal to
            PyTorch's ``"same"`` for stride 1).
        dilation: Int >= 1.
        groups: Number of channel groups; divides ``C_in`` and ``C_out``.

    Returns:
        Tensor of shape ``(N, C_out, L_out)`` with
        ``L_out = (L + 2 padding - dilation (k - 1) - 1) // stride + 1``.

    Raises:
        TypeError: for non-floating input or bad parameter kinds.
        ValueError: for mismatched channels or groups, or an input shorter than the dilated
            kernel.

    Example:
        >>> import tapegrad as tg
        >>> x = tg.random.normal(tg.random.key(0), (2, 3, 10))
        >>> w = tg.random.normal(tg.random.key(1), (4, 3, 5))
        >>> tg.nn.functional.conv1d(x, w, padding="same").shape
        (2, 4, 10)
    """
    who = "conv1d"
    x = _floating(input, who)
    if x.ndim != 3:
        raise ValueError(f"{who}: input must have shape (N, C, L), got {x.shape}")
    w = tnp.asarray(weight)
    if w.ndim != 3:
        raise ValueError(f"{who}: weight must have shape (C_out, C_in/groups, k), got {w.shape}")
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
        raise ValueError(f"{who}: groups must be a positive int, got {groups!r}")
    c_in, c_out = _check_groups(x, w, groups, who)
    s = _single(stride, "stride", who)
    d = _single(dilation, "dilation", who)
    k = w.shape[2]
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise ValueError(f"{who}: padding must be 'valid', 'same' or an int, got {padding!r}")
        pads = _resolve_padding(padding, (1, x.shape[2]), (1, k), (1, s), (1, d), who)
    else:
        p = _single(padding, "padding", who, minimum=0)
        pads = (0, 0, p, p)
    length = (x.shape[2] + pads[2] + pads[3] - d * (k - 1) - 1) // s + 1
    if length < 1:
        raise ValueError(
            f"{who}: input of length {x.shape[2]} with padding {pads[2:]} is shorter than the "
            f"dilated kernel (k={k}, dilation={d}); the output would be empty"
        )
    if w.dtype != x.dtype:
        w = tnp.astype(w, x.dtype)
    n = x.shape[0]
    conv = dict(stride=(1, s), padding=pads, dilation=(1, d), groups=int(groups))
    x4 = tnp.reshape(x, (n, c_in, 1, x.shape[2]))
    w4 = tnp.reshape(w, (c_out, w.shape[1], 1, k))
    if bias is not None:
        bias = tnp.asarray(bias)
        if bias.shape != (c_out,):
            raise ValueError(f"{who}: bias must have shape ({c_out},), got {bias.shape}")
        if bias.dtype != x.dtype:
            bias = tnp.astype(bias, x.dtype)
        y = Conv2d.apply(x4, w4, bias, **conv)
    else:
        y = Conv2d.apply(x4, w4, **conv)
    return tnp.reshape(y, (n, c_out, length))
