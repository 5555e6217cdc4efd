"""Convolution, pooling, padding and resampling in one, two and three spatial dimensions:
the functional forms PyTorch users reach for (``conv3d``, ``conv_transpose1d``/``3d``, the
max/average/adaptive pools, ``pad``, ``interpolate``, ``grid_sample``, ``unfold``/``fold``,
``pixel_shuffle``/``pixel_unshuffle``).

Re-exported from :mod:`tapegrad.nn.functional`. The convolutions and the max pools run on the
primitives of that module (``Conv2d`` and its two transposes, ``MaxPool2d`` and its routing
ops), which take any number of spatial axes; everything else is composed of differentiable
:mod:`tapegrad.numpy` operations (gathers with ``take``/``take_along_axis``, ``pad``,
``matmul``, reshapes), so gradients of every order, ``vmap`` and ``jit`` work through all of
it. Nothing loops over pixels: loops run over kernel offsets, axes or interpolation taps.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from tapegrad import numpy as tnp
from tapegrad.core.backend import backend_of
from tapegrad.core.tensor import Tensor
from tapegrad.nn._functional import (
    _adaptive_matrix,
    _check_groups,
    _check_nonempty,
    _floating,
    _image,
    _like,
    _pool_params,
)
from tapegrad.ops.nn import Conv2d, Conv2dInputGrad, MaxPool2d, _const, _conv_forward, _out_hw

__all__ = [
    "conv_transpose2d",
    "max_pool2d",
    "avg_pool2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose3d",
    "max_pool1d",
    "max_pool3d",
    "avg_pool1d",
    "avg_pool3d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool3d",
    "pad",
    "interpolate",
    "grid_sample",
    "affine_grid",
    "unfold",
    "fold",
    "pixel_shuffle",
    "pixel_unshuffle",
]

_DIMS = {1: "L", 2: "H, W", 3: "D, H, W"}


# -- argument parsing ------------------------------------------------------------------------
def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _ints(v, n: int, name: str, who: str, minimum: int = 1) -> tuple:
    """``v`` (an int, or a tuple/list of ``n`` ints) as a tuple of ``n`` ints ``>= minimum``.

    Raises:
        TypeError: for anything else (a float, a string, a bool, a tuple of the wrong length).
        ValueError: for an entry below ``minimum``.
    """
    if _is_int(v):
        t = (int(v),) * n
    elif isinstance(v, (tuple, list)) and len(v) == n and all(_is_int(a) for a in v):
        t = tuple(int(a) for a in v)
    else:
        want = "an int" if n == 1 else f"an int or a tuple of {n} ints"
        raise TypeError(f"{who}: {name} must be {want}, got {v!r}")
    if any(a < minimum for a in t):
        raise ValueError(f"{who}: {name} must be >= {minimum}, got {v!r}")
    return t


def _flag(v, name: str, who: str) -> bool:
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{who}: {name} must be a bool, got {v!r}")
    return bool(v)


def _spatial_input(input, nd: int, who: str, unbatched: bool = True) -> tuple:
    """``(x, was_unbatched)``: a floating ``(N, C, *spatial)`` Tensor with ``nd`` spatial axes
    (a ``(C, *spatial)`` input gets a batch axis of 1 when ``unbatched``)."""
    x = _floating(input, who)
    if x.ndim == nd + 2:
        return x, False
    if unbatched and x.ndim == nd + 1:
        return tnp.expand_dims(x, 0), True
    want = f"(N, C, {_DIMS[nd]})" + (f" or (C, {_DIMS[nd]})" if unbatched else "")
    raise ValueError(f"{who}: input must have shape {want}, got {x.shape}")


def _unbatch(y: Tensor, unbatched: bool) -> Tensor:
    return tnp.squeeze(y, axis=0) if unbatched else y


# -- convolutions ----------------------------------------------------------------------------
def _groups(groups, who: str) -> int:
    if not _is_int(groups):
        raise TypeError(f"{who}: groups must be a positive int, got {groups!r}")
    if groups < 1:
        raise ValueError(f"{who}: groups must be a positive int, got {groups!r}")
    return int(groups)


def _weight(weight, x: Tensor, nd: int, layout: str, who: str) -> Tensor:
    w = tnp.asarray(weight)
    if w.dtype.kind not in "fV":
        raise TypeError(f"{who}: weight must be a floating Tensor, got dtype {w.dtype}")
    if w.ndim != nd + 2:
        k = ", ".join(f"k{c}" for c in "DHW"[3 - nd :]) if nd > 1 else "k"
        raise ValueError(f"{who}: weight must have shape ({layout}, {k}), got {w.shape}")
    return w if w.dtype == x.dtype else tnp.astype(w, x.dtype)


def _bias(bias, c_out: int, x: Tensor, who: str):
    if bias is None:
        return None
    b = tnp.asarray(bias)
    if b.dtype.kind not in "fV":
        raise TypeError(f"{who}: bias must be a floating Tensor, got dtype {b.dtype}")
    if b.shape != (c_out,):
        raise ValueError(f"{who}: bias must have shape ({c_out},), got {b.shape}")
    return _like(b, x, who, "bias")


def _conv_pads(padding, spatial, kernel, stride, dilation, who) -> tuple:
    """``(lo0, hi0, lo1, hi1, ...)`` from an int, a tuple, ``"valid"`` or ``"same"``."""
    nd = len(spatial)
    if isinstance(padding, str):
        if padding == "valid":
            return (0,) * (2 * nd)
        if padding == "same":
            pads = []
            for size, k, s, d in zip(spatial, kernel, stride, dilation):
                total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
                pads += [total // 2, total - total // 2]
            return tuple(pads)
        raise ValueError(
            f"{who}: padding must be 'valid', 'same', an int or a tuple of {nd} ints, got "
            f"{padding!r}"
        )
    p = _ints(padding, nd, "padding", who, minimum=0)
    return tuple(v for a in p for v in (a, a))


def _conv_nd(nd, who, input, weight, bias, stride, padding, dilation, groups) -> Tensor:
    x, unbatched = _spatial_input(input, nd, who)
    w = _weight(weight, x, nd, "C_out, C_in / groups", who)
    groups = _groups(groups, who)
    _, c_out = _check_groups(x, w, groups, who)
    stride = _ints(stride, nd, "stride", who)
    dilation = _ints(dilation, nd, "dilation", who)
    kernel = tuple(w.shape[2:])
    pads = _conv_pads(padding, x.shape[2:], kernel, stride, dilation, who)
    _check_nonempty(x, kernel, stride, dilation, pads, repr(padding), who)
    b = _bias(bias, c_out, x, who)
    conv = dict(stride=stride, padding=pads, dilation=dilation, groups=groups)
    y = Conv2d.apply(x, w, **conv) if b is None else Conv2d.apply(x, w, b, **conv)
    return _unbatch(y, unbatched)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """3-D convolution (cross-correlation, as ``torch.nn.functional.conv3d``) over
    ``(N, C, D, H, W)`` volumes.

    One batched matmul on a strided (im2col) view of the padded input, and its two transposes
    as gradients (the primitives of :func:`conv2d`, which take any number of spatial axes),
    so it differentiates to any order and batches under ``vmap``.

    Args:
        input: Floating Tensor of shape ``(N, C_in, D, H, W)`` or ``(C_in, D, H, W)``.
        weight: Tensor of shape ``(C_out, C_in / groups, kD, kH, kW)``.
        bias: Optional Tensor of shape ``(C_out,)``.
        stride: Int or triple, >= 1.
        padding: Int or triple of zeros on both sides, ``"valid"`` (none) or ``"same"``
            (output size ``ceil(size / stride)``; odd extra padding at the end, as TensorFlow;
            equal to PyTorch's ``"same"``, which allows stride 1 only).
        dilation: Int or triple, >= 1.
        groups: Number of channel groups; divides ``C_in`` and ``C_out``.

    Returns:
        Tensor of shape ``(N, C_out, D_out, H_out, W_out)`` (no ``N`` for an unbatched input),
        ``D_out = (D + 2 pD - dD (kD - 1) - 1) // sD + 1`` and likewise.

    Raises:
        TypeError: for non-floating input or weight, or bad parameter kinds.
        ValueError: for mismatched shapes, channels or groups, or an empty output.

    Example:
        >>> import tapegrad as tg
        >>> x = tg.random.normal(tg.random.key(0), (2, 3, 6, 6, 6))
        >>> w = tg.random.normal(tg.random.key(1), (4, 3, 3, 3, 3))
        >>> tg.nn.functional.conv3d(x, w, stride=2, padding=1).shape
        (2, 4, 3, 3, 3)
    """
    return _conv_nd(3, "conv3d", input, weight, bias, stride, padding, dilation, groups)


def _conv_transpose_nd(
    nd, who, input, weight, bias, stride, padding, output_padding, groups, dilation
) -> Tensor:
    x, unbatched = _spatial_input(input, nd, who)
    w = _weight(weight, x, nd, "C_in, C_out / groups", who)
    groups = _groups(groups, who)
    c_in, c_out = x.shape[1], w.shape[1] * groups
    if w.shape[0] != c_in or c_in % groups:
        raise ValueError(
            f"{who}: input has {c_in} channels and weight has shape {w.shape} with groups="
            f"{groups}; need weight.shape[0] == C_in, divisible by groups"
        )
    stride = _ints(stride, nd, "stride", who)
    dilation = _ints(dilation, nd, "dilation", who)
    pad = _ints(padding, nd, "padding", who, minimum=0)
    out_pad = _ints(output_padding, nd, "output_padding", who, minimum=0)
    if any(op >= s and op >= d for op, s, d in zip(out_pad, stride, dilation)):
        raise ValueError(
            f"{who}: output_padding {out_pad} must be smaller than stride {stride} or dilation "
            f"{dilation} on each axis"
        )
    kernel = tuple(w.shape[2:])
    out = tuple(
        (size - 1) * s - 2 * p + d * (k - 1) + op + 1
        for size, s, p, d, k, op in zip(x.shape[2:], stride, pad, dilation, kernel, out_pad)
    )
    if min(out) < 1:
        raise ValueError(
            f"{who}: input of spatial size {x.shape[2:]} with padding {pad} gives an empty "
            f"output {out}"
        )
    b = _bias(bias, c_out, x, who)
    # The input-gradient primitive's adjoint (a convolution) must map back to x's size: an
    # output padding of at least the stride (allowed below the dilation) takes e = op - s + 1
    # from the end padding, and whatever that padding cannot give is appended as zeros
    # (rows no input reaches).
    extra = tuple(max(op - (s - 1), 0) for op, s in zip(out_pad, stride))
    zeros = tuple(max(e - p, 0) for e, p in zip(extra, pad))
    pads = tuple(v for p, e in zip(pad, extra) for v in (p, max(p - e, 0)))
    y = Conv2dInputGrad.apply(x, w, in_hw=tuple(o - z for o, z in zip(out, zeros)),
                              stride=stride, padding=pads, dilation=dilation, groups=groups)
    if any(zeros):
        y = tnp.pad(y, ((0, 0), (0, 0)) + tuple((0, z) for z in zeros))
    if b is not None:
        y = y + tnp.reshape(b, (1, c_out) + (1,) * nd)
    return _unbatch(y, unbatched)


def conv_transpose1d(
    input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1
) -> Tensor:
    """1-D transposed convolution (``torch.nn.functional.conv_transpose1d``): the gradient of
    :func:`conv1d` with respect to its input, used to upsample sequences.

    ``y[n, o, i s - p + a d] += x[n, c, i] w[c, o, a]`` (per group). Runs as the input-gradient
    primitive of the convolution (col2im, a loop over kernel offsets only), whose transposes
    are the convolution and its weight gradient, so every order of derivative works.

    Args:
        input: Floating Tensor of shape ``(N, C_in, L)`` or ``(C_in, L)``.
        weight: Tensor of shape ``(C_in, C_out / groups, k)`` (PyTorch's layout).
        bias: Optional Tensor of shape ``(C_out,)``.
        stride: Int >= 1.
        padding: Int >= 0: ``dilation (k - 1) - padding`` zeros are implicitly added to each
            side of the input (PyTorch's meaning).
        output_padding: Int >= 0, smaller than ``stride`` or ``dilation``: extra length at the
            end of the output.
        groups: Number of channel groups; divides ``C_in`` and ``C_out``.
        dilation: Int >= 1.

    Returns:
        Tensor of shape ``(N, C_out, L_out)``, ``L_out = (L - 1) s - 2 p + d (k - 1) +
        output_padding + 1``.

    Raises:
        TypeError: for non-floating input or weight, or bad parameter kinds.
        ValueError: for mismatched shapes, channels or groups, a too large ``output_padding``
            or an empty output.

    Example:
        >>> import tapegrad as tg
        >>> x = tg.random.normal(tg.random.key(0), (2, 4, 5))
        >>> w = tg.random.normal(tg.random.key(1), (4, 3, 3))
        >>> tg.nn.functional.conv_transpose1d(x, w, stride=2, padding=1, output_padding=1).shape
        (2, 3, 10)
    """
    return _conv_transpose_nd(1, "conv_transpose1d", input, weight, bias, stride, padding,
                              output_padding, groups, dilation)


def conv_transpose3d(
    input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1
) -> Tensor:
    """3-D transposed convolution (``torch.nn.functional.conv_transpose3d``): the gradient of
    :func:`conv3d` with respect to its input, used to upsample volumes.

    Args:
        input: Floating Tensor of shape ``(N, C_in, D, H, W)`` or ``(C_in, D, H, W)``.
        weight: Tensor of shape ``(C_in, C_out / groups, kD, kH, kW)`` (PyTorch's layout).
        bias: Optional Tensor of shape ``(C_out,)``.
        stride, padding, output_padding, dilation: Ints or triples, as in
            :func:`conv_transpose1d` per axis.
        groups: Number of channel groups; divides ``C_in`` and ``C_out``.

    Returns:
        Tensor of shape ``(N, C_out, D_out, H_out, W_out)``, ``D_out = (D - 1) sD - 2 pD +
        dD (kD - 1) + opD + 1`` and likewise.

    Raises:
        TypeError: for non-floating input or weight, or bad parameter kinds.
        ValueError: for mismatched shapes, channels or groups, a too large ``output_padding``
            or an empty output.

    Example:
        >>> import tapegrad as tg
        >>> x = tg.random.normal(tg.random.key(0), (1, 4, 3, 3, 3))
        >>> w = tg.random.normal(tg.random.key(1), (4, 2, 2, 2, 2))
        >>> tg.nn.functional.conv_transpose3d(x, w, stride=2).shape
        (1, 2, 6, 6, 6)
    """
    return _conv_transpose_nd(3, "conv_transpose3d", input, weight, bias, stride, padding,
                              output_padding, groups, dilation)


# -- max and average pooling -----------------------------------------------------------------
def _pool_geometry(spatial, kernel, stride, padding, dilation, ceil_mode, who) -> tuple:
    """``(pads, out)``: PyTorch's pooled size per axis (``ceil_mode``: the last window must
    start inside the input or the left padding) and the padding ``(lo0, hi0, ...)`` that makes
    every window fit (``hi`` grows by what ``ceil_mode``'s last window overhangs)."""
    pads, out = [], []
    for size, k, s, p, d in zip(spatial, kernel, stride, padding, dilation):
        span = size + 2 * p - d * (k - 1) - 1
        n = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (n - 1) * s >= size + p:
            n -= 1
        if n < 1 or span < 0:
            raise ValueError(
                f"{who}: input of spatial size {tuple(spatial)} with padding {tuple(padding)} "
                f"is smaller than the (dilated) kernel {tuple(kernel)}; the output would be empty"
            )
        out.append(n)
        pads += [p, p + max(0, (n - 1) * s + d * (k - 1) + 1 - size - 2 * p)]
    return tuple(pads), tuple(out)


def _pool_args(nd, x, kernel_size, stride, padding, dilation, who) -> tuple:
    kernel = _ints(kernel_size, nd, "kernel_size", who)
    stride = kernel if stride is None or stride == [] or stride == () else _ints(
        stride, nd, "stride", who)
    padding = _ints(padding, nd, "padding", who, minimum=0)
    dilation = _ints(dilation, nd, "dilation", who)
    if any(p > k // 2 for p, k in zip(padding, kernel)):
        raise ValueError(
            f"{who}: padding {padding} must be at most half the kernel size {kernel}"
        )
    return kernel, stride, padding, dilation


def _max_pool_indices(x: Tensor, kernel, stride, pads, dilation, out) -> Tensor:
    """The flat index (into each input plane) of every window's first maximum, PyTorch's
    ``return_indices``: an int64 Tensor of the pooled shape (no gradient)."""
    spatial = x.shape[2:]
    xpad = tnp.pad(x, ((0, 0), (0, 0)) + tuple(zip(pads[0::2], pads[1::2])),
                   constant_values=-np.inf)
    views = []
    for offset in itertools.product(*(range(k) for k in kernel)):
        key = (slice(None),) * 2 + tuple(slice(i * d, i * d + s * (m - 1) + 1, s)
                                         for i, d, s, m in zip(offset, dilation, stride, out))
        views.append(xpad[key])
    which = tnp.argmax(tnp.stack(views, axis=-1), axis=-1)  # first maximum, first NaN
    plane = np.array([math.prod(spatial[i + 1 :]) for i in range(len(spatial))])
    offsets = np.array(list(itertools.product(*(range(k) for k in kernel))), np.int64)
    offset_flat = (offsets * np.array(dilation) * plane).sum(-1)
    base = np.zeros(out, np.int64)
    for ax, (m, s, p) in enumerate(zip(out, stride, pads[0::2])):
        shape = [1] * len(out)
        shape[ax] = m
        base = base + ((np.arange(m) * s - p) * plane[ax]).reshape(shape)
    return _const(base, x) + tnp.take(_const(offset_flat, x), which)


def _max_pool_nd(nd, who, input, kernel_size, stride, padding, dilation, ceil_mode,
                 return_indices):
    x, unbatched = _spatial_input(input, nd, who)
    kernel, stride, padding, dilation = _pool_args(
        nd, x, kernel_size, stride, padding, dilation, who)
    ceil_mode = _flag(ceil_mode, "ceil_mode", who)
    return_indices = _flag(return_indices, "return_indices", who)
    pads, out = _pool_geometry(x.shape[2:], kernel, stride, padding, dilation, ceil_mode, who)
    y = MaxPool2d.apply(x, kernel=kernel, stride=stride, padding=pads,
                        dilation=None if dilation == (1,) * nd else dilation)
    if not return_indices:
        return _unbatch(y, unbatched)
    idx = _max_pool_indices(x, kernel, stride, pads, dilation, out)
    return _unbatch(y, unbatched), _unbatch(idx, unbatched)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """1-D max pooling over ``(N, C, L)`` sequences (``torch.nn.functional.max_pool1d``).

    Each output is the maximum of its window (``-inf`` padding); the gradient goes to that
    window's first maximum (PyTorch's choice on ties). Maxima of strided views, a loop over
    kernel offsets only; its gradient and that gradient's own derivative are primitives too.

    Args:
        input: Floating Tensor of shape ``(N, C, L)`` or ``(C, L)``.
        kernel_size: Int >= 1.
        stride: Int >= 1; defaults to ``kernel_size``.
        padding: Int >= 0, at most ``kernel_size // 2``: ``-inf`` on both ends.
        dilation: Int >= 1: the spacing of the window's elements.
        ceil_mode: Round the output length up (an extra, partial window at the end, which must
            start inside the input or the left padding), as PyTorch.
        return_indices: Also return each maximum's index into the input length (an int64
            Tensor, PyTorch's layout for ``max_unpool1d``).

    Returns:
        Tensor of shape ``(N, C, L_out)``, ``L_out = floor_or_ceil((L + 2 p - d (k - 1) - 1)
        / s) + 1``; with ``return_indices`` a pair ``(values, indices)``.

    Raises:
        TypeError: for non-floating input or bad parameter kinds.
        ValueError: for another number of dims, too much padding or an empty output.

    Example:
        >>> import tapegrad as tg
        >>> x = tg.Tensor([[[1.0, 3.0, 2.0, 5.0, 4.0]]])
        >>> tg.nn.functional.max_pool1d(x, 2, ceil_mode=True)
        Tensor([[[3., 5., 4.]]], dtype=float32)
    """
    return _max_pool_nd(1, "max_pool1d", input, kernel_size, stride, padding, dilation,
                        ceil_mode, return_indices)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """3-D max pooling over ``(N, C, D, H, W)`` volumes (``torch.nn.functional.max_pool3d``).

    As :func:`max_pool1d` on each of the three axes; ties go to the first maximum in
    row-major order of the window, as PyTorch; ``return_indices`` gives flat indices into
    each ``D * H * W`` input volume.

    Args:
        input: Floating Tensor of shape ``(N, C, D, H, W)`` or ``(C, D, H, W)``.
        kernel_size, stride, padding, dilation: Ints or triples (``stride`` defaults to
            ``kernel_size``; ``padding`` at most half the kernel).
        ceil_mode: Round output sizes up, as PyTorch.
        return_indices: Also return the indices of the maxima.

    Returns:
        Tensor of shape ``(N, C, D_out, H_out, W_out)`` (or ``(values, indices)``).

    Raises:
        TypeError: for non-floating input or bad parameter kinds.
        ValueError: for another number of dims, too much padding or an empty output.

    Example:
        >>> import tapegrad as tg
        >>> x = tg.random.normal(tg.random.key(0), (2, 3, 8, 8, 8))
        >>> tg.nn.functional.max_pool3d(x, 3, stride=2, padding=1).shape
        (2, 3, 4, 4, 4)
    """
    return _max_pool_nd(3, "max_pool3d", input, kernel_size, stride, padding, dilation,
                        ceil_mode, return_indices)


def _divisors(spatial, kernel, stride, padding, out, count_include_pad, divisor_override,
              dtype) -> np.ndarray:
    """The reciprocal of PyTorch's average-pool divisor at every output position: the window
    clipped to the padded input (``count_include_pad``), or to the input itself, or a fixed
    ``divisor_override``."""
    if divisor_override is not None:
        return np.full(out, 1.0 / divisor_override, dtype)
    recip = np.ones((), dtype)
    for ax, (size, k, s, p, m) in enumerate(zip(spatial, kernel, stride, padding, out)):
        start = np.arange(m) * s - p
        end = np.minimum(start + k, size + p)
        if count_include_pad:
            count = end - start
        else:
            count = np.minimum(end, size) - np.maximum(start, 0)
        shape = [1] * len(out)
        shape[ax] = m
        recip = recip * (1.0 / count.astype(dtype)).reshape(shape)
    return np.ascontiguousarray(np.broadcast_to(recip, out))


def _divisor(divisor_override, who: str):
    """PyTorch's ``divisor_override``: None or a nonzero int."""
    if divisor_override is None:
        return None
    if not _is_int(divisor_override):
        raise TypeError(f"{who}: divisor_override must be an int or None, got "
                        f"{divisor_override!r}")
    if divisor_override == 0:
        raise ValueError(f"{who}: divisor_override must not be zero")
    return int(divisor_override)


def _avg_pool_nd(nd, who, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                 divisor_override=None) -> Tensor:
    x, unbatched = _spatial_input(input, nd, who)
    kernel, stride, padding, _ = _pool_args(nd, x, kernel_size, stride, padding, 1, who)
    ceil_mode = _flag(ceil_mode, "ceil_mode", who)
    count_include_pad = _flag(count_include_pad, "count_include_pad", who)
    _divisor(divisor_override, who)
    pads, out = _pool_geometry(x.shape[2:], kernel, stride, padding, (1,) * nd, ceil_mode, who)
    n, c = x.shape[:2]
    ones = _const(np.ones((1, 1) + kernel, dtype=x.dtype), x)
    flat = tnp.reshape(x, (n * c, 1) + x.shape[2:])
    s = Conv2d.apply(flat, ones, stride=stride, padding=pads, dilation=(1,) * nd, groups=1)
    recip = _divisors(x.shape[2:], kernel, stride, padding, out, count_include_pad,
                      divisor_override, x.dtype)
    y = tnp.reshape(s, (n, c) + out) * _const(recip, x)
    return _unbatch(y, unbatched)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True) -> Tensor:
    """1-D average pooling over ``(N, C, L)`` sequences (``torch.nn.functional.avg_pool1d``).

    A sum over each window (a depthwise convolution with a kernel of ones) divided by
    PyTorch's divisor: the window's length within the zero-padded input
    (``count_include_pad=True``, the windows ``ceil_mode`` adds past the padding count only
    their part inside it) or within the input alone.

    Args:
        input: Floating Tensor of shape ``(N, C, L)`` or ``(C, L)``.
        kernel_size: Int >= 1.
        stride: Int >= 1 (default ``kernel_size``).
        padding: Int >= 0, at most ``kernel_size // 2``: zeros on both ends.
        ceil_mode: Round the output length up, as PyTorch.
        count_include_pad: Count the padding in the divisor.

    Returns:
        Tensor of shape ``(N, C, L_out)``.

    Raises:
        TypeError: for non-floating input or bad parameter kinds.
        ValueError: for another number of dims, too much padding or an empty output.

    Example:
        >>> import tapegrad as tg
        >>> x = tg.Tensor([[[1.0, 2.0, 3.0, 4.0, 5.0]]])
        >>> tg.nn.functional.avg_pool1d(x, 2, ceil_mode=True)
        Tensor([[[1.5, 3.5, 5. ]]], dtype=float32)
    """
    return _avg_pool_nd(1, "avg_pool1d", input, kernel_size, stride, padding, ceil_mode,
                        count_include_pad)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None) -> Tensor:
    """3-D average pooling over ``(N, C, D, H, W)`` volumes
    (``torch.nn.functional.avg_pool3d``).

    Args:
        input: Floating Tensor of shape ``(N, C, D, H, W)`` or ``(C, D, H, W)``.
        kernel_size, stride, padding: Ints or triples (``stride`` defaults to
            ``kernel_size``; ``padding`` at most half the kernel, zeros).
        ceil_mode: Round output sizes up, as PyTorch.
        count_include_pad: Count the padding in the divisor.
        divisor_override: A nonzero int to divide every window's sum by instead.

    Returns:
        Tensor of shape ``(N, C, D_out, H_out, W_out)``.

    Raises:
        TypeError: for non-floating input or bad parameter kinds.
        ValueError: for another number of dims, too much padding, an empty output or
            ``divisor_override=0``.

    Example:
        >>> import tapegrad as tg
        >>> x = tg.random.normal(tg.random.key(0), (2, 3, 5, 5, 5))
        >>> tg.nn.functional.avg_pool3d(x, 2, ceil_mode=True).shape
        (2, 3, 3, 3, 3)
    """
    return _avg_pool_nd(3, "avg_pool3d", input, kernel_size, stride, padding, ceil_mode,
                        count_include_pad, divisor_override)


# -- adaptive pooling ------------------------------------------------------------------------
def _adaptive_sizes(x: Tensor, nd: int, output_size, who: str) -> tuple:
    if output_size is None or _is_int(output_size):
        sizes = (output_size,) * nd
    elif isinstance(output_size, (tuple, list)) and len(output_size) == nd:
        sizes = tuple(output_size)
    else:
        raise TypeError(f"{who}: output_size must be an int or a tuple of {nd} ints (None "
                        f"keeps that size), got {output_size!r}")
    out = []
    for s, size in zip(sizes, x.shape[2:]):
        if s is None:
            if nd == 1:
                raise TypeError(f"{who}: output_size must be an int, got None")
            s = size
        elif not _is_int(s):
            raise TypeError(f"{who}: output_size must hold ints or None, got {output_size!r}")
        if s < 1:
            raise ValueError(f"{who}: output_size must be >= 1, got {output_size!r}")
        out.append(int(s))
    return tuple(out)


def _adaptive_avg_nd(nd, who, input, output_size) -> Tensor:
    x, unbatched = _spatial_input(input, nd, who)
    out = _adaptive_sizes(x, nd, output_size, who)
    y = x
    for ax, (size, m) in enumerate(zip(x.shape[2:], out)):
        if size == m:
            continue
        axis = 2 + ax
        mat = _const(np.ascontiguousarray(_adaptive_matrix(size, m, x.dtype).T), x)
        y = tnp.swapaxes(tnp.matmul(tnp.swapaxes(y, axis, -1), mat), axis, -1)
    return _unbatch(y, unbatched)


def adaptive_avg_pool1d(input, output_size) -> Tensor:
    """1-D adaptive average pooling (``torch.nn.functional.adaptive_avg_pool1d``): output
    ``i`` averages ``[floor(i L / L_out), ceil((i + 1) L / L_out))``, whatever ``L``.

    A matrix product with a constant averaging matrix, so linear and differentiable to any
    order.

    Args:
        input: Floating Tensor of shape ``(N, C, L)`` or ``(C, L)``.
        output_size: Int >= 1.

    Returns:
        Tensor of shape ``(N, C, output_size)``.

    Raises:
        TypeError: for non-floating input or a non-int ``output_size``.
        ValueError: for another number of dims or ``output_size < 1``.

    Example:
        >>> import tapegrad as tg
        >>> tg.nn.functional.adaptive_avg_pool1d(tg.Tensor([[[1.0, 2.0, 3.0, 4.0, 5.0]]]), 2)
        Tensor([[[2., 4.]]], dtype=float32)
    """
    return _adaptive_avg_nd(1, "adaptive_avg_pool1d", input, output_size)


def adaptive_avg_pool3d(input, output_size) -> Tensor:
    """3-D adaptive average pooling (``torch.nn.functional.adaptive_avg_pool3d``): PyTorch's
    bins on each of the three axes (one constant averaging matrix per axis).

    Args:
        input: Floating Tensor of shape ``(N, C, D, H, W)`` or ``(C, D, H, W)``.
        output_size: Int or triple; a ``None`` entry keeps that input size.

    Returns:
        Tensor of shape ``(..., D_out, H_out, W_out)``.

    Raises:
        TypeError: for non-floating input or a bad ``output_size`` kind.
        ValueError: for another number of dims or an output size < 1.

    Example:
        >>> import tapegrad as tg
        >>> x = tg.random.normal(tg.random.key(0), (2, 3, 7, 5, 4))
        >>> tg.nn.functional.adaptive_avg_pool3d(x, (3, None, 2)).shape
        (2, 3, 3, 5, 2)
    """
    return _adaptive_avg_nd(3, "adaptive_avg_pool3d", input, output_size)


def _adaptive_bins(size: int, m: int) -> np.ndarray:
    """``(m, kmax)`` input indices of PyTorch's adaptive bins ``[floor(i size / m),
    ceil((i + 1) size / m))``, each row padded by repeating its last index."""
    start = (np.arange(m) * size) // m
    end = -(-((np.arange(m) + 1) * size) // m)
    kmax = int((end - start).max())
    return np.minimum(start[:, None] + np.arange(kmax), end[:, None] - 1)


def _adaptive_max_nd(nd, who, input, output_size, return_indices):
    x, unbatched = _spatial_input(input, nd, who)
    out = _adaptive_sizes(x, nd, output_size, who)
    return_indices = _flag(return_indices, "return_indices", who)
    spatial = x.shape[2:]
    if all(size % m == 0 for size, m in zip(spatial, out)):  # equal bins: one max pool
        kernel = tuple(size // m for size, m in zip(spatial, out))
        pads = (0,) * (2 * nd)
        y = MaxPool2d.apply(x, kernel=kernel, stride=kernel, padding=pads)
        if not return_indices:
            return _unbatch(y, unbatched)
        idx = _max_pool_indices(x, kernel, kernel, pads, (1,) * nd, out)
        return _unbatch(y, unbatched), _unbatch(idx, unbatched)
    y, flat = x, None
    # innermost axis first: the first maximum along W of each row, then the first such row...,
    # which is the first maximum of the whole bin in row-major order (PyTorch's on ties)
    for ax in reversed(range(nd)):
        axis, size, m = 2 + ax, spatial[ax], out[ax]
        bins = _adaptive_bins(size, m)
        kmax = bins.shape[1]

        def gather(t, bins=bins, axis=axis, m=m, kmax=kmax):
            g = tnp.take(t, bins.reshape(-1), axis=axis)
            return tnp.reshape(g, g.shape[:axis] + (m, kmax) + g.shape[axis + 1 :])

        windows = gather(y)
        which = tnp.argmax(windows, axis=axis + 1, keepdims=True)
        y = tnp.squeeze(tnp.take_along_axis(windows, which, axis=axis + 1), axis=axis + 1)
        if return_indices:
            plane = math.prod(spatial[ax + 1 :])
            chosen = tnp.take_along_axis(
                _const(np.broadcast_to(bins.reshape((1,) * axis + bins.shape + (1,) * (
                    nd - ax - 1)), windows.shape).copy(), x), which, axis=axis + 1)
            pos = tnp.squeeze(chosen, axis=axis + 1) * plane
            if flat is not None:
                inner = gather(flat)
                pos = pos + tnp.squeeze(tnp.take_along_axis(inner, which, axis=axis + 1),
                                        axis=axis + 1)
            flat = pos
    if not return_indices:
        return _unbatch(y, unbatched)
    return _unbatch(y, unbatched), _unbatch(flat, unbatched)  # pyright: ignore[reportArgumentType]


_ADAPTIVE_MAX_DOC = """{nd}-D adaptive max pooling (``torch.nn.functional.adaptive_max_pool{nd}d``):
    the maximum over each of PyTorch's bins ``[floor(i size / out), ceil((i + 1) size / out))``
    on every axis, whatever the input size.

    Equal bins (each output size divides its input size) are one max pool; otherwise, per
    axis (innermost first), a gather of the bins' elements, a first-maximum ``argmax`` and a
    gather of it. The gradient goes to each bin's first maximum in row-major order (PyTorch's
    choice on ties; a NaN is a maximum).

    Args:
        input: Floating Tensor of shape ``(N, C, {dims})`` or ``(C, {dims})``.
        output_size: {size_doc}
        return_indices: Also return the flat index of each maximum into its input plane (an
            int64 Tensor, as PyTorch).

    Returns:
        Tensor of shape ``(..., {outs})``; with ``return_indices`` a pair
        ``(values, indices)``.

    Raises:
        TypeError: for non-floating input or a bad ``output_size`` kind.
        ValueError: for another number of dims or an output size < 1.

    Example:
        >>> import tapegrad as tg
        >>> x = tg.random.normal(tg.random.key(0), {example_shape})
        >>> tg.nn.functional.adaptive_max_pool{nd}d(x, {example_size}).shape
        {example_out}
    """


def adaptive_max_pool1d(input, output_size, return_indices=False):
    return _adaptive_max_nd(1, "adaptive_max_pool1d", input, output_size, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    return _adaptive_max_nd(2, "adaptive_max_pool2d", input, output_size, return_indices)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    return _adaptive_max_nd(3, "adaptive_max_pool3d", input, output_size, return_indices)


adaptive_max_pool1d.__doc__ = _ADAPTIVE_MAX_DOC.format(
    nd=1, dims="L", size_doc="Int >= 1.", outs="L_out", example_shape="(2, 3, 10)",
    example_size="4", example_out="(2, 3, 4)")
adaptive_max_pool2d.__doc__ = _ADAPTIVE_MAX_DOC.format(
    nd=2, dims="H, W", size_doc="Int or pair; a ``None`` entry keeps that input size.",
    outs="H_out, W_out", example_shape="(2, 3, 7, 5)", example_size="(3, None)",
    example_out="(2, 3, 3, 5)")
adaptive_max_pool3d.__doc__ = _ADAPTIVE_MAX_DOC.format(
    nd=3, dims="D, H, W", size_doc="Int or triple; a ``None`` entry keeps that input size.",
    outs="D_out, H_out, W_out", example_shape="(1, 2, 5, 6, 7)", example_size="2",
    example_out="(1, 2, 2, 2, 2)")


# -- padding ---------------------------------------------------------------------------------
_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
              "circular": "wrap"}


def pad(input, pad, mode: str = "constant", value=None) -> Tensor:
    """Pad (or, with negative widths, crop) the trailing axes of ``input``
    (``torch.nn.functional.pad``).

    ``pad`` lists ``(before, after)`` widths from the last axis backwards: ``(left, right)``
    pads the last axis, ``(left, right, top, bottom)`` the last two, and so on. Negative
    widths crop; crops apply before the padding (so ``"circular"`` wraps the cropped axis, as
    PyTorch). Built on :func:`tapegrad.numpy.pad` and slicing: differentiable to any order
    (the copying modes add each padded element's cotangent into the element it copies).

    Args:
        input: Tensor. ``"constant"`` pads any number of trailing axes (``len(pad) / 2 <=
            input.ndim``); the other modes pad the last 1, 2 or 3 axes of a Tensor with 1 or 2
            more axes (``(C, L)``/``(N, C, L)``, ``(C, H, W)``/``(N, C, H, W)``,
            ``(C, D, H, W)``/``(N, C, D, H, W)``).
        pad: Tuple (or list) of an even number of ints.
        mode: ``"constant"`` (``value``), ``"reflect"`` (mirror, edge not repeated; each width
            smaller than the axis), ``"replicate"`` (repeat the edge element) or
            ``"circular"`` (wrap around; each width at most the axis).
        value: The fill of ``"constant"`` (default 0); the other modes take none.

    Returns:
        Tensor of ``input``'s dtype with each padded axis ``size + before + after`` long.

    Raises:
        TypeError: for a ``pad`` that is not a sequence of ints, or a non-number ``value``.
        ValueError: for an odd or too long ``pad``, an unknown ``mode``, a ``value`` with a
            mode other than ``"constant"``, another number of dims for a non-constant mode,
            widths the mode cannot reach, or a crop that leaves a negative size.

    Example:
        >>> import tapegrad as tg
        >>> x = tg.Tensor([[[1.0, 2.0, 3.0]]])
        >>> tg.nn.functional.pad(x, (2, 1), mode="reflect")
        Tensor([[[3., 2., 1., 2., 3., 2.]]], dtype=float32)
        >>> tg.nn.functional.pad(x, (-1, 2), value=9.0)
        Tensor([[[2., 3., 9., 9.]]], dtype=float32)
    """
    who = "pad"
    x = tnp.asarray(input)
    if not isinstance(pad, (tuple, list)) or not all(_is_int(p) for p in pad):
        raise TypeError(f"{who}: pad must be a tuple of ints (before, after, ...; last axis "
                        f"first), got {pad!r}")
    widths = [int(p) for p in pad]
    if len(widths) % 2:
        raise ValueError(f"{who}: pad must have an even number of entries, two per padded axis "
                         f"(last axis first), got {tuple(widths)}")
    k = len(widths) // 2
    if k > x.ndim:
        raise ValueError(f"{who}: pad {tuple(widths)} pads {k} axes but input has only "
                         f"{x.ndim} (shape {x.shape})")
    if not isinstance(mode, str) or mode not in _PAD_MODES:
        raise ValueError(f"{who}: mode must be 'constant', 'reflect', 'replicate' or "
                         f"'circular', got {mode!r}")
    if mode != "constant":
        if value is not None and value != 0:
            raise ValueError(f"{who}: mode {mode!r} takes no value (only 'constant' fills with "
                             f"one), got value={value!r}")
        if k not in (1, 2, 3) or x.ndim not in (k + 1, k + 2):
            raise ValueError(
                f"{who}: mode {mode!r} pads the last 1, 2 or 3 axes of an input with 1 or 2 "
                f"more axes (2-D/3-D input for 2 widths, 3-D/4-D for 4, 4-D/5-D for 6); got "
                f"{len(widths)} widths for an input of shape {x.shape}"
            )
        fill = 0
    elif value is None:
        fill = 0
    else:
        if isinstance(value, (bool, np.bool_)) or not isinstance(
                value, (int, float, np.integer, np.floating)):
            raise TypeError(f"{who}: value must be a number, got {value!r}")
        fill = value
    pairs = [(0, 0)] * (x.ndim - k) + [(widths[2 * i], widths[2 * i + 1])
                                       for i in reversed(range(k))]
    grow = tuple((max(b, 0), max(a, 0)) for b, a in pairs)
    crops = tuple((max(-b, 0), max(-a, 0)) for b, a in pairs)
    if mode in ("reflect", "replicate"):  # PyTorch pads the input, then crops the result
        for ax, ((b, a), (gb, ga), n) in enumerate(zip(pairs, grow, x.shape)):
            if ax >= x.ndim - k and n + b + a < 1:
                raise ValueError(f"{who}: pad {tuple(widths)} leaves axis {ax} of size {n} "
                                 f"with size {n + b + a}; mode {mode!r} needs at least 1")
            if mode == "reflect" and (gb or ga) and (gb >= n or ga >= n):
                raise ValueError(f"{who}: mode 'reflect' needs each width smaller than the "
                                 f"axis; got widths {(gb, ga)} for axis {ax} of size {n}")
        y = tnp.pad(x, grow, mode=_PAD_MODES[mode]) if any(b or a for b, a in grow) else x
        return _crop(y, crops)
    for ax, ((lo, cut), n) in enumerate(zip(crops, x.shape)):  # crops first
        if lo + cut > n:
            raise ValueError(f"{who}: pad {tuple(widths)} crops {lo + cut} elements from axis "
                             f"{ax} of size {n}")
    x = _crop(x, crops)
    if not any(b or a for b, a in grow):
        return x
    if mode == "constant":
        return tnp.pad(x, grow, constant_values=fill)
    for ax, ((b, a), n) in enumerate(zip(grow, x.shape)):
        if b > n or a > n:
            raise ValueError(f"{who}: mode 'circular' wraps at most once: widths {(b, a)} "
                             f"exceed axis {ax} of size {n} (after any crop)")
    return tnp.pad(x, grow, mode="wrap")


def _crop(x: Tensor, crops) -> Tensor:
    """``x`` with ``(lo, hi)`` elements cut from the ends of each axis."""
    if not any(lo or hi for lo, hi in crops):
        return x
    return x[tuple(slice(lo, n - hi) for (lo, hi), n in zip(crops, x.shape))]


# -- interpolation ---------------------------------------------------------------------------
_INTERP_DIMS = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}
_INTERP_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear",
                 "area")


def _axis_shape(ndim: int, axis: int, m: int) -> tuple:
    shape = [1] * ndim
    shape[axis] = m
    return tuple(shape)


def _opmath(dtype):
    """The type PyTorch computes source indices in: double for float64, float otherwise."""
    return np.float64 if np.dtype(dtype) == np.float64 else np.float32


def _source_scale(size, m, align_corners, scale, op):
    """PyTorch's ``area_pixel_compute_scale``: input pixels per output pixel, in ``op``."""
    if align_corners:
        return op(size - 1) / op(m - 1) if m > 1 else op(0)
    if scale is not None and scale > 0:
        return op(1.0 / scale)
    return op(size) / op(m)


def _floor_index(src, size):
    """PyTorch's ``guard_index_and_lambda``: the lower index (``floorf``: floored in float32,
    as PyTorch) and the fraction past it, clipped to ``[0, 1]``."""
    i0 = np.minimum(np.floor(src.astype(np.float32)).astype(np.int64), size - 1)
    return i0, np.clip(src - i0.astype(src.dtype), 0, 1)


def _cubic_weights(t, a=-0.75):
    """The four weights of Keys' cubic convolution at fraction ``t`` (``a = -0.75``, as
    PyTorch and OpenCV)."""

    def near(v):  # |v| <= 1
        return ((a + 2) * v - (a + 3)) * v * v + 1

    def far(v):  # 1 < |v| < 2
        return ((a * v - 5 * a) * v + 8 * a) * v - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _resample_axis(y: Tensor, axis: int, m: int, mode: str, align_corners: bool, scale):
    """``y`` resampled to length ``m`` along ``axis`` (``mode``: ``"nearest"``,
    ``"nearest-exact"``, ``"linear"`` or ``"cubic"``): PyTorch's source indices, computed in
    its arithmetic, then gathers and weights."""
    size = y.shape[axis]
    op = _opmath(y.dtype)
    if mode == "linear" and m == size:
        return y  # PyTorch's linear kernels copy an axis that keeps its size
    ratio = _source_scale(size, m, align_corners, scale, op)
    dst = np.arange(m).astype(op)
    if mode == "nearest2d":  # PyTorch's 2-D kernel (nearest_idx): copies, halvings, float32
        if m == size:
            return y
        if m == 2 * size:
            return tnp.take(y, np.arange(m) >> 1, axis=axis)
        ratio = _source_scale(size, m, False, scale, np.float32)
        op = np.float32
    if mode in ("nearest", "nearest2d"):
        src = np.floor((ratio * dst.astype(op)).astype(np.float32)).astype(np.int64)
        return tnp.take(y, np.minimum(src, size - 1), axis=axis)
    src = ratio * dst if align_corners else ratio * (dst + op(0.5)) - op(0.5)
    if mode == "nearest-exact":
        src = np.floor((np.maximum(src, op(0)) + op(0.5)).astype(np.float32)).astype(np.int64)
        return tnp.take(y, np.minimum(src, size - 1), axis=axis)
    shape = _axis_shape(y.ndim, axis, m)
    if mode == "linear":
        i0, lam = _floor_index(np.maximum(src, op(0)), size)
        i1 = np.minimum(i0 + 1, size - 1)
        w1 = _const(lam.astype(y.dtype).reshape(shape), y)
        w0 = _const((1 - lam).astype(y.dtype).reshape(shape), y)
        return tnp.take(y, i0, axis=axis) * w0 + tnp.take(y, i1, axis=axis) * w1
    i0, t = _floor_index(src, size)
    terms = [tnp.take(y, np.clip(i0 - 1 + j, 0, size - 1), axis=axis)
             * _const(w.astype(y.dtype).reshape(shape), y)
             for j, w in enumerate(_cubic_weights(t))]
    return terms[0] + terms[1] + terms[2] + terms[3]


def interpolate(input, size=None, scale_factor=None, mode: str = "nearest",
                align_corners=None, recompute_scale_factor=None, antialias: bool = False
                ) -> Tensor:
    """Resize the spatial axes of ``(N, C, ...)`` input (``torch.nn.functional.interpolate``).

    Each axis is resampled in turn with PyTorch's index conventions: ``"nearest"`` takes
    input ``floor(i * in / out)`` (``floor((i + 1/2) * in / out)`` for ``"nearest-exact"``);
    the linear modes and ``"bicubic"`` map output ``i`` to input ``(i + 1/2) * in / out - 1/2``
    (``i * (in - 1) / (out - 1)`` with ``align_corners``; the linear modes clamp it at 0)
    and weigh their 2 or 4 neighbours (bicubic: Keys' cubic convolution with ``a = -0.75``,
    edge indices clamped); ``"area"`` is :func:`adaptive_avg_pool2d` and its 1-D/3-D forms.
    With ``scale_factor`` (and ``recompute_scale_factor`` not True) the source positions use
    ``1 / scale_factor`` instead of ``in / out``, as PyTorch. Gathers (``take``) and
    elementwise weights: differentiable to any order.

    Args:
        input: Floating Tensor ``(N, C, L)``, ``(N, C, H, W)`` or ``(N, C, D, H, W)``:
            ``"linear"`` needs 3-D, ``"bilinear"``/``"bicubic"`` 4-D, ``"trilinear"`` 5-D.
        size: Output spatial size: an int (every axis) or a tuple with one int per axis.
        scale_factor: A positive number or tuple of them; output size
            ``floor(in * scale_factor)``. Give ``size`` or ``scale_factor``, not both.
        mode: ``"nearest"``, ``"nearest-exact"``, ``"linear"``, ``"bilinear"``,
            ``"bicubic"``, ``"trilinear"`` or ``"area"``.
        align_corners: For the linear modes and ``"bicubic"``: map the corner pixels' centres
            onto each other (default False); the other modes take None.
        recompute_scale_factor: True: compute the output size from ``scale_factor``, then
            interpolate as if that size had been given.
        antialias: PyTorch's anti-aliased downsampling; only False is implemented.

    Returns:
        Tensor ``(N, C, *size)`` of ``input``'s dtype.

    Raises:
        TypeError: for non-floating input or bad argument kinds.
        ValueError: for an unknown mode, the wrong number of dims for the mode, both or none
            of ``size`` and ``scale_factor``, ``align_corners`` with a mode that has no
            corners, or an output size < 1.
        NotImplementedError: for ``antialias=True``.

    Example:
        >>> import tapegrad as tg
        >>> x = tg.Tensor([[[1.0, 2.0, 4.0]]])
        >>> tg.nn.functional.interpolate(x, scale_factor=2, mode="linear")
        Tensor([[[1.  , 1.25, 1.75, 2.5 , 3.5 , 4.  ]]], dtype=float32)
        >>> tg.nn.functional.interpolate(x, size=5, mode="nearest")
        Tensor([[[1., 1., 2., 2., 4.]]], dtype=float32)
    """
    who = "interpolate"
    x = _floating(input, who)
    if not isinstance(mode, str) or mode not in _INTERP_MODES:
        raise ValueError(f"{who}: mode must be one of {', '.join(map(repr, _INTERP_MODES))}, "
                         f"got {mode!r}")
    nd = x.ndim - 2
    if nd not in (1, 2, 3):
        raise ValueError(f"{who}: input must have 3, 4 or 5 dims (N, C, *spatial), got shape "
                         f"{x.shape}")
    need = _INTERP_DIMS.get(mode)
    if need is not None and need != nd:
        raise ValueError(f"{who}: mode {mode!r} needs a {need + 2}-D input (N, C, "
                         f"{_DIMS[need]}), got a {x.ndim}-D input of shape {x.shape}")
    if align_corners is not None:
        if need is None:
            raise ValueError(f"{who}: align_corners can only be set with the interpolating "
                             f"modes linear, bilinear, bicubic and trilinear, not {mode!r}")
        align_corners = _flag(align_corners, "align_corners", who)
    align_corners = bool(align_corners)
    if _flag(antialias, "antialias", who):
        raise NotImplementedError(f"{who}: antialias=True is not implemented; low-pass filter "
                                  "first (for example avg_pool2d) or use mode='area'")
    if recompute_scale_factor is not None:
        recompute_scale_factor = _flag(recompute_scale_factor, "recompute_scale_factor", who)
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{who}: give exactly one of size and scale_factor, got "
                         f"size={size!r}, scale_factor={scale_factor!r}")
    spatial = x.shape[2:]
    if scale_factor is None:
        if recompute_scale_factor:
            raise ValueError(f"{who}: recompute_scale_factor is not meaningful with an "
                             "explicit size")
        out = _ints(size, nd, "size", who)
        scales = (None,) * nd
    else:
        if isinstance(scale_factor, (tuple, list)):
            factors = tuple(scale_factor)
            if len(factors) != nd:
                raise ValueError(f"{who}: scale_factor has {len(factors)} entries for an input "
                                 f"with {nd} spatial axes (shape {x.shape})")
        else:
            factors = (scale_factor,) * nd
        for f in factors:
            if isinstance(f, (bool, np.bool_)) or not isinstance(
                    f, (int, float, np.integer, np.floating)):
                raise TypeError(f"{who}: scale_factor must be a number or a tuple of numbers, "
                                f"got {scale_factor!r}")
            if not (np.isfinite(f) and f > 0):
                raise ValueError(f"{who}: scale_factor must be positive and finite, got "
                                 f"{scale_factor!r}")
        out = tuple(math.floor(float(n) * float(f)) for n, f in zip(spatial, factors))
        if min(out) < 1:
            raise ValueError(f"{who}: scale_factor {scale_factor!r} gives the empty output "
                             f"size {out} for input size {spatial}")
        scales = (None,) * nd if recompute_scale_factor else tuple(float(f) for f in factors)
    if mode == "area":
        return _adaptive_avg_nd(nd, who, x, out)
    kind = {"bicubic": "cubic"}.get(mode, "linear" if need is not None else mode)
    if kind == "nearest" and nd == 2:
        kind = "nearest2d"
    y = x
    for ax in range(nd):
        y = _resample_axis(y, 2 + ax, out[ax], kind, align_corners, scales[ax])
    return y


# -- grid sampling ---------------------------------------------------------------------------
def _reflect(c: Tensor, twice_low: int, twice_high: int) -> Tensor:
    """PyTorch's ``reflect_coordinates``: ``c`` mirrored into ``[low, high]`` (bounds given
    doubled so that they stay integers)."""
    if twice_low == twice_high:
        return c * 0.0
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    c = tnp.abs(c - low)
    extra = tnp.fmod(c, span)
    flips = tnp.floor(c / span)
    even = tnp.fmod(flips, 2.0) == 0
    return tnp.where(even, extra + low, span - extra + low)


def _grid_coords(g: Tensor, size: int, padding_mode: str, align_corners: bool) -> Tensor:
    """Normalized grid coordinates in ``[-1, 1]`` as input pixel coordinates, with the padding
    mode's clipping or reflection."""
    if align_corners:
        c = (g + 1.0) * ((size - 1) / 2)
    else:
        c = ((g + 1.0) * size - 1.0) / 2
    if padding_mode == "border":
        c = tnp.clip(c, 0.0, size - 1.0)
    elif padding_mode == "reflection":
        c = _reflect(c, 0, 2 * (size - 1)) if align_corners else _reflect(c, -1, 2 * size - 1)
        c = tnp.clip(c, 0.0, size - 1.0)
    return c


def grid_sample(input, grid, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners=None) -> Tensor:
    """Sample ``input`` at the points of ``grid`` (``torch.nn.functional.grid_sample``), the
    sampler of spatial transformer networks.

    ``grid[n, ..., :]`` holds normalized ``(x, y)`` (4-D input) or ``(x, y, z)`` (5-D)
    coordinates: -1 is the left/top/front edge of the input and +1 the right/bottom/back one
    (pixel centres with ``align_corners=True``, pixel edges otherwise). Bilinear (trilinear)
    weights of the surrounding pixels, or the nearest pixel (half to even, as PyTorch);
    points outside the input read zeros, the border value, or the reflection. Gathers and
    elementwise ops, so it is differentiable to any order in ``input`` and, for
    ``"bilinear"``, in ``grid`` (``"nearest"`` has a zero gradient in ``grid``).

    Args:
        input: Floating Tensor ``(N, C, H, W)`` or ``(N, C, D, H, W)``.
        grid: Floating Tensor ``(N, H_out, W_out, 2)`` or ``(N, D_out, H_out, W_out, 3)``.
        mode: ``"bilinear"`` or ``"nearest"``.
        padding_mode: ``"zeros"``, ``"border"`` or ``"reflection"``.
        align_corners: Whether -1 and +1 are the corner pixels' centres (default False).

    Returns:
        Tensor ``(N, C, H_out, W_out)`` or ``(N, C, D_out, H_out, W_out)``.

    Raises:
        TypeError: for non-floating input or grid, or a non-bool ``align_corners``.
        ValueError: for mismatched shapes or an unknown mode or padding mode.
        NotImplementedError: for ``mode="bicubic"``.

    Example:
        >>> import tapegrad as tg
        >>> x = tg.Tensor([[[[0.0, 1.0], [2.0, 3.0]]]])
        >>> grid = tg.Tensor([[[[0.0, 0.0], [-1.0, -1.0]]]])
        >>> tg.nn.functional.grid_sample(x, grid, align_corners=True)
        Tensor([[[[1.5, 0. ]]]], dtype=float32)
    """
    who = "grid_sample"
    x = _floating(input, who)
    g = _floating(grid, who, "grid")
    if x.ndim not in (4, 5):
        raise ValueError(f"{who}: input must have shape (N, C, H, W) or (N, C, D, H, W), got "
                         f"{x.shape}")
    nd = x.ndim - 2
    if g.ndim != x.ndim or g.shape[-1] != nd or g.shape[0] != x.shape[0]:
        want = "(N, H_out, W_out, 2)" if nd == 2 else "(N, D_out, H_out, W_out, 3)"
        raise ValueError(f"{who}: grid must have shape {want} with input's N = {x.shape[0]}, "
                         f"got {g.shape} for input {x.shape}")
    if mode == "bicubic":
        raise NotImplementedError(f"{who}: mode='bicubic' is not implemented; use 'bilinear' "
                                  "or 'nearest'")
    if mode not in ("bilinear", "nearest"):
        raise ValueError(f"{who}: mode must be 'bilinear' or 'nearest', got {mode!r}")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"{who}: padding_mode must be 'zeros', 'border' or 'reflection', got "
                         f"{padding_mode!r}")
    align_corners = False if align_corners is None else _flag(align_corners, "align_corners",
                                                             who)
    g = g if g.dtype == x.dtype else tnp.astype(g, x.dtype)
    n, c = x.shape[:2]
    spatial = x.shape[2:]
    out = g.shape[1:-1]
    q = math.prod(out)
    flat_x = tnp.reshape(x, (n, c, math.prod(spatial)))
    # spatial axis a (D/H/W order) is grid component nd - 1 - a (grid holds x, y, z)
    coords = [tnp.reshape(_grid_coords(g[..., nd - 1 - a], spatial[a], padding_mode,
                                       align_corners), (n, 1, q)) for a in range(nd)]
    plane = [math.prod(spatial[a + 1 :]) for a in range(nd)]

    def read(idx, weight):
        """``weight * input`` at the float pixel coordinates ``idx``; zero outside."""
        flat, valid = None, None
        for a, i in enumerate(idx):
            ok = (i >= 0) & (i <= spatial[a] - 1)
            valid = ok if valid is None else valid & ok
            ii = tnp.astype(tnp.clip(i, 0, spatial[a] - 1), np.int64) * plane[a]
            flat = ii if flat is None else flat + ii
        vals = tnp.take_along_axis(flat_x, flat, axis=2)
        return vals * tnp.where(valid, weight, 0.0)

    if mode == "nearest":
        idx = [tnp.round(ca) for ca in coords]  # piecewise constant: no gradient
        y = read(idx, tnp.ones_like(coords[0]))
    else:
        lows = [tnp.floor(ca) for ca in coords]  # piecewise constant: no gradient
        fracs = [ca - lo for ca, lo in zip(coords, lows)]
        y = None
        for corner in itertools.product((0, 1), repeat=nd):
            weight = None
            for a, bit in enumerate(corner):
                wa = fracs[a] if bit else 1.0 - fracs[a]
                weight = wa if weight is None else weight * wa
            term = read([lo + bit for lo, bit in zip(lows, corner)], weight)
            y = term if y is None else y + term
    return tnp.reshape(y, (n, c) + tuple(out))


def affine_grid(theta, size, align_corners=None) -> Tensor:
    """The sampling grid of a batch of affine maps (``torch.nn.functional.affine_grid``), for
    :func:`grid_sample`.

    Output point ``(x, y[, z])`` of the normalized output grid (``[-1, 1]``, pixel centres;
    the corner pixels' centres at ``+-1`` with ``align_corners=True``) maps to
    ``theta @ (x, y[, z], 1)``.

    Args:
        theta: Floating Tensor ``(N, 2, 3)`` (2-D) or ``(N, 3, 4)`` (3-D).
        size: The output size ``(N, C, H, W)`` or ``(N, C, D, H, W)``.
        align_corners: As in :func:`grid_sample` (default False).

    Returns:
        Tensor ``(N, H, W, 2)`` or ``(N, D, H, W, 3)``; differentiable in ``theta``.

    Raises:
        TypeError: for non-floating ``theta`` or a bad ``size``.
        ValueError: for shapes that do not match.

    Example:
        >>> import numpy as np
        >>> import tapegrad as tg
        >>> theta = tg.Tensor(np.array([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]]))
        >>> tg.nn.functional.affine_grid(theta, (1, 1, 2, 2), align_corners=True)[0, :, :, 0]
        Tensor([[-1.,  1.],
                [-1.,  1.]], dtype=float64)
    """
    who = "affine_grid"
    th = _floating(theta, who, "theta")
    if not isinstance(size, (tuple, list)) or len(size) not in (4, 5) or not all(
            _is_int(s) for s in size):
        raise TypeError(f"{who}: size must be a tuple (N, C, H, W) or (N, C, D, H, W) of ints, "
                        f"got {size!r}")
    nd = len(size) - 2
    if th.shape != (size[0], nd, nd + 1):
        raise ValueError(f"{who}: theta must have shape ({size[0]}, {nd}, {nd + 1}) for size "
                         f"{tuple(size)}, got {th.shape}")
    if min(size[2:]) < 1:
        raise ValueError(f"{who}: size must have positive spatial sizes, got {tuple(size)}")
    align_corners = False if align_corners is None else _flag(align_corners, "align_corners",
                                                             who)

    def base(m):
        if m == 1:
            return np.zeros(1)
        v = np.linspace(-1.0, 1.0, m)
        return v if align_corners else v * (m - 1) / m

    spatial = tuple(int(s) for s in size[2:])
    axes = [base(m) for m in spatial]  # D/H/W order
    mesh = np.meshgrid(*axes, indexing="ij")
    pts = np.stack([mesh[nd - 1 - i] for i in range(nd)] + [np.ones(spatial)], axis=-1)
    pts = _const(pts.reshape(-1, nd + 1).astype(th.dtype), th)  # (P, nd + 1), x first
    grid = tnp.matmul(pts, tnp.swapaxes(th, 1, 2))  # (N, P, nd)
    return tnp.reshape(grid, (size[0],) + spatial + (nd,))


# -- im2col and pixel shuffles ---------------------------------------------------------------
def _eye_kernel(c: int, kernel: tuple, dtype, ref: Tensor) -> Tensor:
    """The ``(C * kh * kw, 1, kh, kw)`` one-hot weight whose grouped convolution (groups
    ``C``) copies each window element to its own channel, in PyTorch's ``unfold`` order."""
    k = math.prod(kernel)
    eye = np.eye(k, dtype=dtype).reshape((k, 1) + kernel)
    return _const(np.tile(eye, (c, 1, 1, 1)), ref)


def _block_args(kernel_size, dilation, padding, stride, who) -> tuple:
    return (_ints(kernel_size, 2, "kernel_size", who), _ints(dilation, 2, "dilation", who),
            _ints(padding, 2, "padding", who, minimum=0), _ints(stride, 2, "stride", who))


def unfold(input, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Sliding local blocks of images as columns, im2col (``torch.nn.functional.unfold``).

    Column ``l`` holds block ``l`` (row-major over block positions) with its ``C * kh * kw``
    values in (channel, kernel row, kernel column) order. Runs as a grouped convolution with
    one-hot weights (one strided-view copy and one batched matmul), so it is differentiable
    to any order; :func:`fold` is its transpose.

    Args:
        input: Floating Tensor ``(N, C, H, W)`` or ``(C, H, W)``.
        kernel_size: Int or pair.
        dilation: Int or pair >= 1.
        padding: Int or pair >= 0 of zeros.
        stride: Int or pair >= 1.

    Returns:
        Tensor ``(N, C * kh * kw, L)``, ``L`` the number of blocks.

    Raises:
        TypeError: for non-floating input or bad parameter kinds.
        ValueError: for another number of dims or no block fitting.

    Example:
        >>> import tapegrad as tg
        >>> x = tg.random.normal(tg.random.key(0), (2, 3, 5, 5))
        >>> tg.nn.functional.unfold(x, 3, padding=1).shape
        (2, 27, 25)
    """
    who = "unfold"
    x, unbatched = _spatial_input(input, 2, who)
    kernel, dilation, padding, stride = _block_args(kernel_size, dilation, padding, stride, who)
    pads = (padding[0], padding[0], padding[1], padding[1])
    out = _out_hw(x.shape[2:], kernel, stride, dilation, pads)
    if min(out) < 1:
        raise ValueError(f"{who}: no block of kernel_size {kernel} (dilation {dilation}) fits "
                         f"the input of spatial size {x.shape[2:]} with padding {padding}")
    n, c = x.shape[:2]
    w = _eye_kernel(c, kernel, x.dtype, x)
    y = Conv2d.apply(x, w, stride=stride, padding=pads, dilation=dilation, groups=c)
    return _unbatch(tnp.reshape(y, (n, c * math.prod(kernel), math.prod(out))), unbatched)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Sum columns of sliding blocks back into images, col2im (``torch.nn.functional.fold``),
    the transpose of :func:`unfold`: overlapping blocks add up.

    Args:
        input: Floating Tensor ``(N, C * kh * kw, L)`` or ``(C * kh * kw, L)``.
        output_size: Int or pair ``(H, W)``: the image size.
        kernel_size, dilation, padding, stride: As in :func:`unfold`.

    Returns:
        Tensor ``(N, C, H, W)``.

    Raises:
        TypeError: for non-floating input or bad parameter kinds.
        ValueError: for another number of dims, a channel count not divisible by
            ``kh * kw``, or ``L`` not the number of blocks for ``output_size``.

    Example:
        >>> import tapegrad as tg
        >>> x = tg.random.normal(tg.random.key(0), (2, 3, 6, 6))
        >>> F = tg.nn.functional
        >>> F.fold(F.unfold(x, 2, stride=2), (6, 6), 2, stride=2).shape
        (2, 3, 6, 6)
    """
    who = "fold"
    x = _floating(input, who)
    if x.ndim not in (2, 3):
        raise ValueError(f"{who}: input must have shape (N, C * kh * kw, L) or "
                         f"(C * kh * kw, L), got {x.shape}")
    unbatched = x.ndim == 2
    if unbatched:
        x = tnp.expand_dims(x, 0)
    size = _ints(output_size, 2, "output_size", who)
    kernel, dilation, padding, stride = _block_args(kernel_size, dilation, padding, stride, who)
    k = math.prod(kernel)
    if x.shape[1] % k:
        raise ValueError(f"{who}: input's dim 1 ({x.shape[1]}) must be divisible by the kernel "
                         f"size {kernel[0]} * {kernel[1]} = {k}")
    pads = (padding[0], padding[0], padding[1], padding[1])
    blocks = _out_hw(size, kernel, stride, dilation, pads)
    if min(blocks) < 1 or x.shape[2] != math.prod(blocks):
        raise ValueError(f"{who}: input has {x.shape[2]} blocks, but output_size {size} with "
                         f"kernel_size {kernel}, dilation {dilation}, padding {padding} and "
                         f"stride {stride} has {max(0, math.prod(blocks))} "
                         f"({blocks[0]} x {blocks[1]})")
    n, c = x.shape[0], x.shape[1] // k
    w = _eye_kernel(c, kernel, x.dtype, x)
    cols = tnp.reshape(x, (n, c * k) + blocks)
    y = Conv2dInputGrad.apply(cols, w, in_hw=size, stride=stride, padding=pads,
                              dilation=dilation, groups=c)
    return _unbatch(y, unbatched)


def _shuffle_factor(v, name: str, who: str) -> int:
    if not _is_int(v):
        raise TypeError(f"{who}: {name} must be a positive int, got {v!r}")
    if v < 1:
        raise ValueError(f"{who}: {name} must be a positive int, got {v!r}")
    return int(v)


def _shuffle_input(input, factor, name: str, who: str) -> tuple:
    """A pixel (un)shuffle's input as a Tensor of at least 3 dims and its checked factor."""
    x = tnp.asarray(input)
    r = _shuffle_factor(factor, name, who)
    if x.ndim < 3:
        raise ValueError(f"{who}: input must have at least 3 dims (*, C, H, W), got {x.shape}")
    return x, r


def pixel_shuffle(input, upscale_factor: int) -> Tensor:
    """Rearrange ``(*, C r^2, H, W)`` into ``(*, C, H r, W r)``
    (``torch.nn.functional.pixel_shuffle``; Shi et al., 2016): each group of ``r^2`` channels
    becomes an ``r x r`` block of pixels. A reshape and a transpose.

    Args:
        input: Tensor with at least 3 dims, ``C r^2`` channels in dim -3.
        upscale_factor: ``r >= 1``.

    Returns:
        Tensor ``(*, C, H r, W r)``.

    Raises:
        TypeError: for a non-int factor.
        ValueError: for fewer than 3 dims or channels not divisible by ``r^2``.

    References:
        Shi et al., "Real-Time Single Image and Video Super-Resolution Using an Efficient
        Sub-Pixel Convolutional Neural Network", CVPR 2016.

    Example:
        >>> import tapegrad as tg
        >>> x = tg.random.normal(tg.random.key(0), (2, 8, 3, 3))
        >>> tg.nn.functional.pixel_shuffle(x, 2).shape
        (2, 2, 6, 6)
    """
    who = "pixel_shuffle"
    x, r = _shuffle_input(input, upscale_factor, "upscale_factor", who)
    *lead, c, h, w = x.shape
    if c % (r * r):
        raise ValueError(f"{who}: input's channels ({c}) must be divisible by upscale_factor^2 "
                         f"= {r * r}")
    lead = tuple(lead)
    k = len(lead)
    y = tnp.reshape(x, lead + (c // (r * r), r, r, h, w))
    y = tnp.transpose(y, tuple(range(k + 1)) + (k + 3, k + 1, k + 4, k + 2))
    return tnp.reshape(y, lead + (c // (r * r), h * r, w * r))


def pixel_unshuffle(input, downscale_factor: int) -> Tensor:
    """Rearrange ``(*, C, H r, W r)`` into ``(*, C r^2, H, W)``
    (``torch.nn.functional.pixel_unshuffle``), the inverse of :func:`pixel_shuffle`.

    Args:
        input: Tensor with at least 3 dims, spatial sizes divisible by ``r``.
        downscale_factor: ``r >= 1``.

    Returns:
        Tensor ``(*, C r^2, H, W)``.

    Raises:
        TypeError: for a non-int factor.
        ValueError: for fewer than 3 dims or spatial sizes not divisible by ``r``.

    Example:
        >>> import tapegrad as tg
        >>> x = tg.random.normal(tg.random.key(0), (2, 2, 6, 6))
        >>> tg.nn.functional.pixel_unshuffle(x, 3).shape
        (2, 18, 2, 2)
    """
    who = "pixel_unshuffle"
    x, r = _shuffle_input(input, downscale_factor, "downscale_factor", who)
    *lead, c, h, w = x.shape
    if h % r or w % r:
        raise ValueError(f"{who}: input's spatial size ({h}, {w}) must be divisible by "
                         f"downscale_factor = {r}")
    lead = tuple(lead)
    k = len(lead)
    y = tnp.reshape(x, lead + (c, h // r, r, w // r, r))
    y = tnp.transpose(y, tuple(range(k + 1)) + (k + 2, k + 4, k + 1, k + 3))
    return tnp.reshape(y, lead + (c * r * r, h // r, w // r))


# -- the 2-D forms (tapegrad.nn.functional re-exports them) ---------------------------------
def conv_transpose2d(
    input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1
) -> Tensor:
    """2-D transposed convolution (``torch.nn.functional.conv_transpose2d``): the gradient of
    :func:`conv2d` with respect to its input, used to upsample.

    ``y[n, o, i*s - p + a*d, j*s - p + b*d] += x[n, c, i, j] * w[c, o, a, b]`` (per group).
    Runs as the input-gradient Function of :func:`conv2d` (col2im with a loop over kernel
    offsets only), whose transposes are the convolution and its weight gradient, so every
    order of derivative works.

    Args:
        input: Floating Tensor of shape ``(N, C_in, H, W)`` or ``(C_in, H, W)``.
        weight: Tensor of shape ``(C_in, C_out / groups, kH, kW)`` (PyTorch's layout).
        bias: Optional Tensor of shape ``(C_out,)``.
        stride: Int or pair >= 1.
        padding: Int or pair >= 0: ``dilation (k - 1) - padding`` zeros are implicitly added
            to each side of the input (PyTorch's meaning).
        output_padding: Int or pair >= 0, smaller than ``stride`` or ``dilation``: extra
            rows/columns at the bottom/right of the output (to pick among the input sizes a
            stride-``s`` convolution maps to one size).
        groups: Number of channel groups; divides ``C_in`` and ``C_out``.
        dilation: Int or pair >= 1.

    Returns:
        Tensor of shape ``(N, C_out, H_out, W_out)`` with ``H_out = (H - 1) sH - 2 pH +
        dH (kH - 1) + opH + 1``.

    Raises:
        TypeError: for non-floating input or bad parameter kinds.
        ValueError: for mismatched channels or groups, an ``output_padding`` not below the
            stride or the dilation, or an empty output.

    References:
        Dumoulin and Visin, "A guide to convolution arithmetic for deep learning",
        arXiv:1603.07285, section 4.

    Example:
        >>> import tapegrad as tg
        >>> x = tg.random.normal(tg.random.key(0), (1, 4, 5, 5))
        >>> w = tg.random.normal(tg.random.key(1), (4, 2, 3, 3))
        >>> tg.nn.functional.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1).shape
        (1, 2, 10, 10)
    """

    return _conv_transpose_nd(2, "conv_transpose2d", input, weight, bias, stride, padding,
                              output_padding, groups, dilation)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """2-D max pooling over ``(N, C, H, W)`` images (``torch.nn.functional.max_pool2d``).

    Each output is the maximum of its window (``-inf`` padding); the gradient is routed to that
    window's first maximum in row-major order (PyTorch's choice on ties).

    Args:
        input: Floating Tensor of shape ``(N, C, H, W)`` (or ``(C, H, W)`` with an int or pair
            ``padding``).
        kernel_size: Int or pair.
        stride: Int or pair; defaults to ``kernel_size``.
        padding: Int or pair of ``-inf`` padding (at most half the kernel), or
            ``"valid"``/``"same"`` (as for :func:`conv2d`; then ``dilation=1`` and
            ``ceil_mode=False``).
        dilation: Int or pair >= 1: the spacing of the window's elements.
        ceil_mode: Round output sizes up (a last, partial window that starts inside the input
            or the left padding), as PyTorch.
        return_indices: Also return each maximum's flat index into its ``H * W`` input plane
            (an int64 Tensor, as PyTorch).

    Returns:
        Tensor of shape ``(N, C, H_out, W_out)``; with ``return_indices`` a pair
        ``(values, indices)``.

    Raises:
        TypeError: for non-floating input or bad parameter kinds.
        ValueError: for another number of dims, too much padding or an input smaller than the
            kernel.
    """

    who = "max_pool2d"
    if isinstance(padding, str) and padding == "valid":
        padding = 0
    if not isinstance(padding, str):
        return _max_pool_nd(2, who, input, kernel_size, stride, padding, dilation, ceil_mode,
                            return_indices)
    x = _image(input, who)
    if _ints(dilation, 2, "dilation", who) != (1, 1) or _flag(ceil_mode, "ceil_mode", who):
        raise ValueError(f"{who}: padding={padding!r} takes dilation=1 and ceil_mode=False; "
                         "give an int or pair padding to use them")
    kernel, stride, pads = _pool_params(x, kernel_size, stride, padding, who)
    y = MaxPool2d.apply(x, kernel=kernel, stride=stride, padding=pads)
    if not _flag(return_indices, "return_indices", who):
        return y
    return y, _max_pool_indices(x, kernel, stride, pads, (1, 1), y.shape[2:])


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None) -> Tensor:
    """2-D average pooling over ``(N, C, H, W)`` images (``torch.nn.functional.avg_pool2d``):
    each window's sum (a depthwise convolution with a kernel of ones) over PyTorch's divisor.

    Args:
        input: Floating Tensor of shape ``(N, C, H, W)`` (or ``(C, H, W)`` with an int or pair
            ``padding``).
        kernel_size: Int or pair.
        stride: Int or pair (default ``kernel_size``).
        padding: Int or pair of zero padding (at most half the kernel), or
            ``"valid"``/``"same"`` (then ``ceil_mode=False`` and no ``divisor_override``).
        ceil_mode: Round output sizes up, as PyTorch.
        count_include_pad: Divide by the window's size within the padded input (True,
            PyTorch's default; the extra windows of ``ceil_mode`` count only their part inside
            it) or by its number of input elements.
        divisor_override: A nonzero int to divide every window's sum by instead.

    Returns:
        Tensor of shape ``(N, C, H_out, W_out)``.

    Raises:
        TypeError: for non-floating input or bad parameter kinds.
        ValueError: for another number of dims, too much padding, an input smaller than the
            kernel or ``divisor_override=0``.
    """

    who = "avg_pool2d"
    if isinstance(padding, str) and padding == "valid":
        padding = 0
    if not isinstance(padding, str):
        return _avg_pool_nd(2, who, input, kernel_size, stride, padding, ceil_mode,
                            count_include_pad, divisor_override)
    x = _image(input, who)
    if _flag(ceil_mode, "ceil_mode", who) or divisor_override is not None:
        raise ValueError(f"{who}: padding={padding!r} takes ceil_mode=False and no "
                         "divisor_override; give an int or pair padding to use them")
    count_include_pad = _flag(count_include_pad, "count_include_pad", who)
    kernel, stride, pads = _pool_params(x, kernel_size, stride, padding, who)
    n, c, h, w = x.shape
    xp = backend_of(x._array)
    ones = Tensor(xp.ones((1, 1) + kernel, dtype=x.dtype))
    flat = tnp.reshape(x, (n * c, 1, h, w))
    s = Conv2d.apply(flat, ones, stride=stride, padding=pads, dilation=(1, 1), groups=1)
    if count_include_pad:
        s = s * (1.0 / (kernel[0] * kernel[1]))
    else:
        counts = _conv_forward(
            np, np.ones((1, 1, h, w)), np.ones((1, 1) + kernel), stride, pads, (1, 1), 1
        )
        s = s / _const(counts.astype(x.dtype), x)
    return tnp.reshape(s, (n, c) + s.shape[2:])
