"""PyTorch's convolution, pooling, padding and resampling layers in one, two and three
spatial dimensions (``Conv3d``, ``ConvTranspose1d``/``3d``, the 1-D/3-D and adaptive pools,
``Upsample``, ``PixelShuffle``, ``Unfold``/``Fold`` and the padding layers), each a thin
:class:`~tapegrad.nn.Module` over :mod:`tapegrad.nn.functional`.

Constructors take PyTorch's arguments in PyTorch's order and check them where the layer is
built (an error names the layer and the argument); layers with parameters also take
keyword-only ``key``, ``device`` and ``dtype``. ``extra_repr()`` gives PyTorch's
configuration string.
"""

from __future__ import annotations

import numpy as np

from tapegrad.nn import _conv_pool as P
from tapegrad.nn import init
from tapegrad.nn.layers import _bool, _keys, _param_dtype, _place, _positive
from tapegrad.nn.module import Module

__all__ = [
    "Conv3d",
    "ConvTranspose1d",
    "ConvTranspose3d",
    "MaxPool1d",
    "MaxPool3d",
    "AvgPool1d",
    "AvgPool3d",
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "AdaptiveMaxPool3d",
    "Upsample",
    "UpsamplingNearest2d",
    "UpsamplingBilinear2d",
    "PixelShuffle",
    "PixelUnshuffle",
    "Unfold",
    "Fold",
    "ZeroPad1d",
    "ZeroPad2d",
    "ZeroPad3d",
    "ConstantPad1d",
    "ConstantPad2d",
    "ConstantPad3d",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReflectionPad3d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "ReplicationPad3d",
    "CircularPad1d",
    "CircularPad2d",
    "CircularPad3d",
]


def _fmt(v) -> str:
    """A configuration value as PyTorch prints it (tuples as tuples, strings bare)."""
    return str(tuple(v)) if isinstance(v, list) else str(v)


# -- convolutions ----------------------------------------------------------------------------
_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    """The shared constructor and ``extra_repr`` of the N-d convolution layers."""

    _nd = 0
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                 bias, padding_mode, output_padding, key, device, dtype):
        super().__init__()
        who, nd = type(self).__name__, self._nd
        _positive(who, in_channels=in_channels, out_channels=out_channels)
        groups = P._groups(groups, who)
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{who}: groups={groups} must divide in_channels={in_channels} and "
                             f"out_channels={out_channels}")
        kernel = P._ints(kernel_size, nd, "kernel_size", who)
        stride = P._ints(stride, nd, "stride", who)
        dilation = P._ints(dilation, nd, "dilation", who)
        if isinstance(padding, str) and not self._transposed:
            if padding not in ("valid", "same"):
                raise ValueError(f"{who}: padding must be 'valid', 'same', an int or a tuple of "
                                 f"{nd} ints, got {padding!r}")
        else:
            padding = P._ints(padding, nd, "padding", who, minimum=0)
        out_pad = P._ints(output_padding, nd, "output_padding", who, minimum=0)
        if any(op >= s and op >= d for op, s, d in zip(out_pad, stride, dilation)):
            raise ValueError(f"{who}: output_padding {out_pad} must be smaller than stride "
                             f"{stride} or dilation {dilation} on each axis")
        if not isinstance(padding_mode, str) or padding_mode not in _PADDING_MODES:
            raise ValueError(f"{who}: padding_mode must be one of {_PADDING_MODES}, got "
                             f"{padding_mode!r}")
        if self._transposed and padding_mode != "zeros":
            raise ValueError(f"{who}: only padding_mode='zeros' is supported for transposed "
                             f"convolutions (as PyTorch), got {padding_mode!r}")
        bias = _bool(who, "bias", bias)
        dtype = _param_dtype(who, dtype)
        (k,), own = _keys(key, 1)
        self._seed(own)
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size, self.stride, self.padding = kernel, stride, padding
        self.dilation, self.output_padding, self.groups = dilation, out_pad, groups
        self.padding_mode = padding_mode
        shape = ((in_channels, out_channels // groups) if self._transposed
                 else (out_channels, in_channels // groups)) + kernel
        self.weight = init.xavier_uniform(k, shape, dtype)
        self.register_parameter("bias", init.zeros(None, (out_channels,), dtype) if bias else None)
        _place(self, device)

    def extra_repr(self) -> str:
        """PyTorch's configuration string, e.g. ``"2, 4, kernel_size=(3, 3, 3), stride=(1, 1,
        1)"``."""
        nd = self._nd
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * nd:
            s += f", padding={_fmt(self.padding)}"
        if self.dilation != (1,) * nd:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * nd:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


_CONV_ARGS = """
    Args:
        in_channels, out_channels: Channel counts (each divisible by ``groups``).
        kernel_size: Int or tuple of {nd} ints.
        stride, dilation: Ints or tuples of {nd} ints >= 1.
        padding: Int or tuple of {nd} ints >= 0{same}.
        {extra}groups: Number of channel groups.
        bias: Whether to add a bias.
        padding_mode: {modes}
        key, device, dtype: Init key, parameter device and floating dtype (``None``: float32).

    Parameters:
        weight ``{layout}`` Xavier-uniform (as this library's other convolutions); bias
        ``(out_channels,)`` zeros.

    Raises:
        TypeError: for an unknown keyword or bad argument kinds.
        ValueError: for non-positive sizes, ``groups`` not dividing both channel counts, an
            unknown ``padding_mode``{more}.
"""


class Conv3d(_ConvNd):
    __doc__ = """3-D convolution over ``(N, C, D, H, W)`` volumes (PyTorch's ``nn.Conv3d``), a
    thin wrapper over :func:`~tapegrad.nn.functional.conv3d`.
    """ + _CONV_ARGS.format(
        nd=3, same=', or ``"valid"``/``"same"``', extra="",
        modes="``\"zeros\"`` (default), ``\"reflect\"``, ``\"replicate\"`` or ``\"circular\"`` "
              "(the input is padded with :func:`~tapegrad.nn.functional.pad` first, as PyTorch).",
        layout="(out_channels, in_channels / groups, kD, kH, kW)", more="")

    _nd = 3

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 *, key=None, device=None, dtype=np.float32):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, 0, key, device, dtype)

    def forward(self, input):
        """``(N, in_channels, D, H, W)`` (or unbatched) -> ``(N, out_channels, D_out, H_out,
        W_out)``."""
        return _conv_forward(self, input, P.conv3d)


def _conv_forward(layer: _ConvNd, x, conv):
    if layer.padding_mode == "zeros":
        return conv(x, layer.weight, layer.bias, layer.stride, layer.padding, layer.dilation,
                    layer.groups)
    xt, _ = P._spatial_input(x, layer._nd, type(layer).__name__)
    pads = P._conv_pads(layer.padding, xt.shape[2:], layer.kernel_size, layer.stride,
                        layer.dilation, type(layer).__name__)
    widths = tuple(w for i in reversed(range(layer._nd)) for w in pads[2 * i : 2 * i + 2])
    x = P.pad(x, widths, mode=layer.padding_mode)
    return conv(x, layer.weight, layer.bias, layer.stride, 0, layer.dilation, layer.groups)


class _ConvTransposeNd(_ConvNd):
    _transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", *, key=None, device=None, dtype=np.float32):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, output_padding, key, device, dtype)

    def forward(self, input, output_size=None):
        """``(N, in_channels, *spatial)`` (or unbatched) -> ``(N, out_channels, *out)``;
        ``output_size`` (the spatial size wanted, optionally with the leading dims) picks the
        output padding, as PyTorch."""
        who = type(self).__name__
        out_pad = self.output_padding
        if output_size is not None:
            x, _ = P._spatial_input(input, self._nd, who)
            out_pad = _output_padding(who, x.shape[2:], output_size, self.stride, self.padding,
                                      self.dilation, self.kernel_size)
        return P._conv_transpose_nd(self._nd, f"conv_transpose{self._nd}d", input, self.weight,
                                    self.bias, self.stride, self.padding, out_pad, self.groups,
                                    self.dilation)


def _output_padding(who, spatial, output_size, stride, padding, dilation, kernel) -> tuple:
    """PyTorch's ``_output_padding``: the output padding that gives ``output_size``."""
    nd = len(spatial)
    if not isinstance(output_size, (tuple, list)) or not all(P._is_int(s) for s in output_size):
        raise TypeError(f"{who}: output_size must be a tuple of ints, got {output_size!r}")
    size = tuple(int(s) for s in output_size)
    if len(size) in (nd + 1, nd + 2):
        size = size[-nd:]
    if len(size) != nd:
        raise ValueError(f"{who}: output_size must have {nd} or {nd + 2} entries, got "
                         f"{len(size)} ({output_size!r})")
    pads = []
    for d, (n, want, s, p, dl, k) in enumerate(zip(spatial, size, stride, padding, dilation,
                                                   kernel)):
        low = (n - 1) * s - 2 * p + dl * (k - 1) + 1
        if not low <= want <= low + s - 1:
            raise ValueError(f"{who}: requested output_size {size}, but valid sizes of axis {d} "
                             f"range from {low} to {low + s - 1} (for an input of {spatial})")
        pads.append(want - low)
    return tuple(pads)


def _conv_transpose_doc(nd: int, input_shape: str, pair: str, kernel: str) -> str:
    return f"""{nd}-D transposed convolution over ``{input_shape}`` inputs (PyTorch's
    ``nn.ConvTranspose{nd}d``), a thin wrapper over
    :func:`~tapegrad.nn.functional.conv_transpose{nd}d`; ``forward(input, output_size=None)``.
    """ + _CONV_ARGS.format(
        nd=nd, same="", extra=f"output_padding: Int{pair} >= 0, smaller than stride or "
        "dilation.\n        ", modes="``\"zeros\"`` only, as PyTorch.",
        layout=f"(in_channels, out_channels / groups, {kernel})",
        more=", or ``output_padding`` too large")


class ConvTranspose1d(_ConvTransposeNd):
    __doc__ = _conv_transpose_doc(1, "(N, C, L)", "", "k")
    _nd = 1


class ConvTranspose3d(_ConvTransposeNd):
    __doc__ = _conv_transpose_doc(3, "(N, C, D, H, W)", " or triple", "kD, kH, kW")
    _nd = 3


# -- pooling ---------------------------------------------------------------------------------
class _PoolNd(Module):
    _nd = 0

    def _check(self, kernel_size, stride, padding, dilation=1) -> None:
        who, nd = type(self).__name__, self._nd
        kernel = P._ints(kernel_size, nd, "kernel_size", who)
        if stride is not None:
            P._ints(stride, nd, "stride", who)
        pad = P._ints(padding, nd, "padding", who, minimum=0)
        P._ints(dilation, nd, "dilation", who)
        if any(p > k // 2 for p, k in zip(pad, kernel)):
            raise ValueError(f"{who}: padding {padding!r} must be at most half the kernel size "
                             f"{kernel_size!r}")


class _MaxPoolNd(_PoolNd):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False):
        super().__init__()
        who = type(self).__name__
        self._check(kernel_size, stride, padding, dilation)
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding, self.dilation = padding, dilation
        self.return_indices = _bool(who, "return_indices", return_indices)
        self.ceil_mode = _bool(who, "ceil_mode", ceil_mode)

    def forward(self, input):
        """Max pooling of ``(N, C, *spatial)`` (or unbatched) input; with ``return_indices``
        a pair ``(values, indices)``."""
        fn = P.max_pool1d if self._nd == 1 else P.max_pool3d
        return fn(input, self.kernel_size, self.stride, self.padding, self.dilation,
                  self.ceil_mode, self.return_indices)

    def extra_repr(self) -> str:
        """PyTorch's configuration string."""
        return (f"kernel_size={_fmt(self.kernel_size)}, stride={_fmt(self.stride)}, "
                f"padding={_fmt(self.padding)}, dilation={_fmt(self.dilation)}, "
                f"ceil_mode={self.ceil_mode}")


_MAX_POOL_DOC = """{nd}-D max pooling (PyTorch's ``nn.MaxPool{nd}d``) over
    :func:`~tapegrad.nn.functional.max_pool{nd}d`.

    Args:
        kernel_size: Int{tuple}.
        stride: Int{tuple} (default ``kernel_size``).
        padding: Int{tuple} of ``-inf`` padding, at most half the kernel.
        dilation: Int{tuple} >= 1.
        return_indices: Also return the indices of the maxima.
        ceil_mode: Round output sizes up, as PyTorch.

    Raises:
        TypeError: for an unknown keyword or bad argument kinds.
        ValueError: for sizes < 1 or too much padding.
"""


class MaxPool1d(_MaxPoolNd):
    __doc__ = _MAX_POOL_DOC.format(nd=1, tuple="")
    _nd = 1


class MaxPool3d(_MaxPoolNd):
    __doc__ = _MAX_POOL_DOC.format(nd=3, tuple=" or triple")
    _nd = 3


class AvgPool1d(_PoolNd):
    """1-D average pooling (PyTorch's ``nn.AvgPool1d``) over
    :func:`~tapegrad.nn.functional.avg_pool1d`.

    Args:
        kernel_size: Int.
        stride: Int (default ``kernel_size``).
        padding: Int of zero padding, at most half the kernel.
        ceil_mode: Round the output length up, as PyTorch.
        count_include_pad: Count the padding in the divisor.

    Raises:
        TypeError: for an unknown keyword or bad argument kinds.
        ValueError: for sizes < 1 or too much padding.
    """

    _nd = 1

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True):
        super().__init__()
        self._check(kernel_size, stride, padding)
        self.kernel_size = P._ints(kernel_size, 1, "kernel_size", "AvgPool1d")
        self.stride = self.kernel_size if stride is None else P._ints(stride, 1, "stride",
                                                                       "AvgPool1d")
        self.padding = P._ints(padding, 1, "padding", "AvgPool1d", minimum=0)
        self.ceil_mode = _bool("AvgPool1d", "ceil_mode", ceil_mode)
        self.count_include_pad = _bool("AvgPool1d", "count_include_pad", count_include_pad)

    def forward(self, input):
        """``(N, C, L)`` (or ``(C, L)``) -> ``(N, C, L_out)``."""
        return P._avg_pool_nd(1, "avg_pool1d", input, self.kernel_size, self.stride,
                              self.padding, self.ceil_mode, self.count_include_pad)

    def extra_repr(self) -> str:
        """PyTorch's configuration string."""
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool3d(_PoolNd):
    """3-D average pooling (PyTorch's ``nn.AvgPool3d``) over
    :func:`~tapegrad.nn.functional.avg_pool3d`.

    Args:
        kernel_size: Int or triple.
        stride: Int or triple (default ``kernel_size``).
        padding: Int or triple of zero padding, at most half the kernel.
        ceil_mode: Round output sizes up, as PyTorch.
        count_include_pad: Count the padding in the divisor.
        divisor_override: A nonzero int to divide every window's sum by instead.

    Raises:
        TypeError: for an unknown keyword or bad argument kinds.
        ValueError: for sizes < 1, too much padding or ``divisor_override=0``.
    """

    _nd = 3

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override=None):
        super().__init__()
        self._check(kernel_size, stride, padding)
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding = padding
        self.ceil_mode = _bool("AvgPool3d", "ceil_mode", ceil_mode)
        self.count_include_pad = _bool("AvgPool3d", "count_include_pad", count_include_pad)
        self.divisor_override = P._divisor(divisor_override, "AvgPool3d")

    def forward(self, input):
        """``(N, C, D, H, W)`` (or unbatched) -> ``(N, C, D_out, H_out, W_out)``."""
        return P.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        """PyTorch's configuration string."""
        return (f"kernel_size={_fmt(self.kernel_size)}, stride={_fmt(self.stride)}, "
                f"padding={_fmt(self.padding)}")


def _output_size_arg(who: str, nd: int, output_size):
    """Check an adaptive pool's ``output_size`` (ints >= 1; ``None`` entries for 2-D/3-D)."""
    sizes = output_size if isinstance(output_size, (tuple, list)) else (output_size,)
    if len(sizes) not in (1, nd) or not all(
            (s is None and nd > 1) or P._is_int(s) for s in sizes):
        want = "an int" if nd == 1 else f"an int or a tuple of {nd} ints (None keeps that size)"
        raise TypeError(f"{who}: output_size must be {want}, got {output_size!r}")
    if any(s is not None and s < 1 for s in sizes):
        raise ValueError(f"{who}: output_size must be >= 1, got {output_size!r}")
    return output_size


class _AdaptivePool(Module):
    _nd = 0

    def extra_repr(self) -> str:
        """PyTorch's configuration string."""
        return f"output_size={_fmt(self.output_size)}"


class _AdaptiveAvgPool(_AdaptivePool):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = _output_size_arg(type(self).__name__, self._nd, output_size)

    def forward(self, input):
        """Adaptive average pooling of ``(N, C, *spatial)`` (or unbatched) input."""
        fn = P.adaptive_avg_pool1d if self._nd == 1 else P.adaptive_avg_pool3d
        return fn(input, self.output_size)


class _AdaptiveMaxPool(_AdaptivePool):
    def __init__(self, output_size, return_indices: bool = False):
        super().__init__()
        self.output_size = _output_size_arg(type(self).__name__, self._nd, output_size)
        self.return_indices = _bool(type(self).__name__, "return_indices", return_indices)

    def forward(self, input):
        """Adaptive max pooling of ``(N, C, *spatial)`` (or unbatched) input; with
        ``return_indices`` a pair ``(values, indices)``."""
        fn = (P.adaptive_max_pool1d, P.adaptive_max_pool2d, P.adaptive_max_pool3d)[self._nd - 1]
        return fn(input, self.output_size, self.return_indices)


_ADAPTIVE_DOC = """{nd}-D adaptive {kind} pooling to a fixed ``output_size`` (PyTorch's
    ``nn.Adaptive{Kind}Pool{nd}d``) over
    :func:`~tapegrad.nn.functional.adaptive_{kind}_pool{nd}d`.

    Args:
        output_size: {size}{indices}

    Raises:
        TypeError: for an unknown keyword or a bad ``output_size`` kind.
        ValueError: for an output size < 1.
"""
_SIZE_1 = "Int >= 1."
_SIZE_N = "Int or tuple of {nd} ints; a ``None`` entry keeps that input size."
_INDICES = "\n        return_indices: Also return the flat indices of the maxima."


class AdaptiveAvgPool1d(_AdaptiveAvgPool):
    __doc__ = _ADAPTIVE_DOC.format(nd=1, kind="avg", Kind="Avg", size=_SIZE_1, indices="")
    _nd = 1


class AdaptiveAvgPool3d(_AdaptiveAvgPool):
    __doc__ = _ADAPTIVE_DOC.format(nd=3, kind="avg", Kind="Avg", size=_SIZE_N.format(nd=3),
                                   indices="")
    _nd = 3


class AdaptiveMaxPool1d(_AdaptiveMaxPool):
    __doc__ = _ADAPTIVE_DOC.format(nd=1, kind="max", Kind="Max", size=_SIZE_1,
                                   indices=_INDICES)
    _nd = 1


class AdaptiveMaxPool2d(_AdaptiveMaxPool):
    __doc__ = _ADAPTIVE_DOC.format(nd=2, kind="max", Kind="Max", size=_SIZE_N.format(nd=2),
                                   indices=_INDICES)
    _nd = 2


class AdaptiveMaxPool3d(_AdaptiveMaxPool):
    __doc__ = _ADAPTIVE_DOC.format(nd=3, kind="max", Kind="Max", size=_SIZE_N.format(nd=3),
                                   indices=_INDICES)
    _nd = 3


# -- resampling ------------------------------------------------------------------------------
def _resample_args(who, size, scale_factor, mode, align_corners, recompute_scale_factor):
    if size is not None:
        sizes = size if isinstance(size, (tuple, list)) else (size,)
        if not sizes or not all(P._is_int(s) for s in sizes):
            raise TypeError(f"{who}: size must be an int or a tuple of ints, got {size!r}")
        if any(s < 1 for s in sizes):
            raise ValueError(f"{who}: size must be >= 1, got {size!r}")
    if scale_factor is not None:
        factors = scale_factor if isinstance(scale_factor, (tuple, list)) else (scale_factor,)
        if not factors or not all(
                isinstance(f, (int, float, np.integer, np.floating))
                and not isinstance(f, (bool, np.bool_)) for f in factors):
            raise TypeError(f"{who}: scale_factor must be a number or a tuple of numbers, got "
                            f"{scale_factor!r}")
        if not all(np.isfinite(f) and f > 0 for f in factors):
            raise ValueError(f"{who}: scale_factor must be positive and finite, got "
                             f"{scale_factor!r}")
        scale_factor = (tuple(float(f) for f in scale_factor)
                        if isinstance(scale_factor, (tuple, list)) else float(scale_factor))
    if not isinstance(mode, str):
        raise TypeError(f"{who}: mode must be a string, got {mode!r}")
    if mode not in P._INTERP_MODES:
        raise ValueError(f"{who}: mode must be one of {', '.join(map(repr, P._INTERP_MODES))}, "
                         f"got {mode!r}")
    if align_corners is not None:
        align_corners = _bool(who, "align_corners", align_corners)
        if mode not in P._INTERP_DIMS:
            raise ValueError(f"{who}: align_corners can only be set with the interpolating "
                             f"modes linear, bilinear, bicubic and trilinear, not {mode!r}")
    if recompute_scale_factor is not None:
        recompute_scale_factor = _bool(who, "recompute_scale_factor", recompute_scale_factor)
    return size, scale_factor, align_corners, recompute_scale_factor


class Upsample(Module):
    """Resize ``(N, C, ...)`` inputs (PyTorch's ``nn.Upsample``) with
    :func:`~tapegrad.nn.functional.interpolate`.

    Args:
        size: Output spatial size (int or tuple).
        scale_factor: Number or tuple; give ``size`` or ``scale_factor``, not both (checked
            when called).
        mode: ``"nearest"`` (default), ``"nearest-exact"``, ``"linear"``, ``"bilinear"``,
            ``"bicubic"``, ``"trilinear"`` or ``"area"``.
        align_corners: For the linear modes and ``"bicubic"``.
        recompute_scale_factor: As in :func:`~tapegrad.nn.functional.interpolate`.

    Raises:
        TypeError: for an unknown keyword or bad argument kinds.
        ValueError: for sizes or factors that are not positive, an unknown mode, or
            ``align_corners`` with a mode that has no corners.
    """

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.size, self.scale_factor, self.align_corners, self.recompute_scale_factor = (
            _resample_args(type(self).__name__, size, scale_factor, mode, align_corners,
                           recompute_scale_factor))
        self.mode = mode

    def forward(self, input):
        """The resized input."""
        if (self.size is None) == (self.scale_factor is None):
            raise ValueError(f"{type(self).__name__}: give exactly one of size and "
                             "scale_factor when building the layer")
        return P.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             self.recompute_scale_factor)

    def extra_repr(self) -> str:
        """PyTorch's configuration string."""
        info = (f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None
                else f"size={self.size!r}")
        return info + f", mode={self.mode!r}"


_UPSAMPLING_DOC = """2-D {what} (PyTorch's ``nn.{name}``):
    ``Upsample(size, scale_factor, {mode})``.

    Args:
        size: Output size (int or pair).
        scale_factor: Number or pair; give ``size`` or ``scale_factor``, not both.

    Raises:
        TypeError, ValueError: as :class:`Upsample`.
    """


class UpsamplingNearest2d(Upsample):
    __doc__ = _UPSAMPLING_DOC.format(what="nearest-neighbour upsampling",
                                     name="UpsamplingNearest2d", mode='mode="nearest"')

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    __doc__ = _UPSAMPLING_DOC.format(what="bilinear upsampling with ``align_corners=True``",
                                     name="UpsamplingBilinear2d",
                                     mode='mode="bilinear", align_corners=True')

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class _PixelShuffleNd(Module):
    """A pixel (un)shuffle: ``_fn(input, factor)``, the factor kept under the name ``_arg``."""

    _arg = ""

    @staticmethod
    def _fn(input, factor, /):
        raise NotImplementedError

    def _set_factor(self, factor) -> None:
        setattr(self, self._arg, P._shuffle_factor(factor, self._arg, type(self).__name__))

    def forward(self, input):
        """The rearranged input."""
        return type(self)._fn(input, getattr(self, self._arg))

    def extra_repr(self) -> str:
        """PyTorch's configuration string."""
        return f"{self._arg}={getattr(self, self._arg)}"


_SHUFFLE_DOC = """``{shapes}`` (PyTorch's ``nn.{name}``), see
    :func:`~tapegrad.nn.functional.{fn}`.

    Args:
        {arg}: ``r >= 1``.

    Raises:
        TypeError: for a non-int factor. ValueError: for a factor < 1.
    """


class PixelShuffle(_PixelShuffleNd):
    __doc__ = _SHUFFLE_DOC.format(shapes="(*, C r^2, H, W) -> (*, C, H r, W r)",
                                  name="PixelShuffle", fn="pixel_shuffle", arg="upscale_factor")
    _arg, _fn = "upscale_factor", staticmethod(P.pixel_shuffle)

    def __init__(self, upscale_factor: int):
        super().__init__()
        self._set_factor(upscale_factor)


class PixelUnshuffle(_PixelShuffleNd):
    __doc__ = _SHUFFLE_DOC.format(shapes="(*, C, H r, W r) -> (*, C r^2, H, W)",
                                  name="PixelUnshuffle", fn="pixel_unshuffle",
                                  arg="downscale_factor")
    _arg, _fn = "downscale_factor", staticmethod(P.pixel_unshuffle)

    def __init__(self, downscale_factor: int):
        super().__init__()
        self._set_factor(downscale_factor)


class Unfold(Module):
    """Sliding blocks as columns, im2col (PyTorch's ``nn.Unfold``), see
    :func:`~tapegrad.nn.functional.unfold`.

    Args:
        kernel_size: Int or pair.
        dilation: Int or pair >= 1.
        padding: Int or pair >= 0.
        stride: Int or pair >= 1.

    Raises:
        TypeError: for an unknown keyword or bad argument kinds. ValueError: for sizes out of
            range.
    """

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        P._block_args(kernel_size, dilation, padding, stride, "Unfold")
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input):
        """``(N, C, H, W)`` -> ``(N, C * kh * kw, L)``."""
        return P.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        """PyTorch's configuration string."""
        return (f"kernel_size={_fmt(self.kernel_size)}, dilation={_fmt(self.dilation)}, "
                f"padding={_fmt(self.padding)}, stride={_fmt(self.stride)}")


class Fold(Module):
    """Columns of sliding blocks summed back into images, col2im (PyTorch's ``nn.Fold``), see
    :func:`~tapegrad.nn.functional.fold`.

    Args:
        output_size: Int or pair ``(H, W)``.
        kernel_size, dilation, padding, stride: As in :class:`Unfold`.

    Raises:
        TypeError: for an unknown keyword or bad argument kinds. ValueError: for sizes out of
            range.
    """

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        P._ints(output_size, 2, "output_size", "Fold")
        P._block_args(kernel_size, dilation, padding, stride, "Fold")
        self.output_size, self.kernel_size, self.dilation = output_size, kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input):
        """``(N, C * kh * kw, L)`` -> ``(N, C, H, W)``."""
        return P.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self) -> str:
        """PyTorch's configuration string."""
        return (f"output_size={_fmt(self.output_size)}, kernel_size={_fmt(self.kernel_size)}, "
                f"dilation={_fmt(self.dilation)}, padding={_fmt(self.padding)}, "
                f"stride={_fmt(self.stride)}")


# -- padding ---------------------------------------------------------------------------------
class _PadNd(Module):
    _nd = 0
    _mode = "constant"

    def _widths(self, padding) -> tuple:
        """``padding`` (an int for every side, or ``2 nd`` ints, last axis first) as a tuple."""
        who, n = type(self).__name__, 2 * self._nd
        if P._is_int(padding):
            return (int(padding),) * n
        if (isinstance(padding, (tuple, list)) and len(padding) == n
                and all(P._is_int(p) for p in padding)):
            return tuple(int(p) for p in padding)
        raise TypeError(f"{who}: padding must be an int or a tuple of {n} ints (before and "
                        f"after, last axis first), got {padding!r}")

    def forward(self, input):
        """The padded input (the last ``nd`` axes of a ``(C, ...)`` or ``(N, C, ...)``
        Tensor)."""
        return P.pad(input, self.padding, mode=self._mode,
                     value=getattr(self, "value", None))

    def extra_repr(self) -> str:
        """PyTorch's configuration string."""
        return f"{self.padding}"


class _PlainPad(_PadNd):
    def __init__(self, padding):
        super().__init__()
        self.padding = self._widths(padding)


class _ConstantPad(_PadNd):
    def __init__(self, padding, value):
        super().__init__()
        self.padding = self._widths(padding)
        if isinstance(value, (bool, np.bool_)) or not isinstance(
                value, (int, float, np.integer, np.floating)):
            raise TypeError(f"{type(self).__name__}: value must be a number, got {value!r}")
        self.value = value

    def extra_repr(self) -> str:
        """PyTorch's configuration string."""
        return f"padding={self.padding}, value={self.value}"


class _ZeroPad(_PlainPad):
    def forward(self, input):
        """The zero-padded input."""
        return P.pad(input, self.padding)


_PAD_DOC = """{what} (PyTorch's ``nn.{name}``), with :func:`~tapegrad.nn.functional.pad`.

    Args:
        padding: An int (every side) or a tuple of {n} ints ``(left, right{more})``, last axis
            first{neg}.{value}

    Raises:
        TypeError: for a bad ``padding``{vtype}.
"""
_WHAT = {
    "Zero": "Pad the last {nd} axes with zeros",
    "Constant": "Pad the last {nd} axes with ``value``",
    "Reflection": "Pad the last {nd} axes with their reflection (edge not repeated)",
    "Replication": "Pad the last {nd} axes by repeating the edge elements",
    "Circular": "Pad the last {nd} axes by wrapping around",
}
_MORE = {1: "", 2: ", top, bottom", 3: ", top, bottom, front, back"}


def _pad_doc(kind: str, nd: int) -> str:
    return _PAD_DOC.format(
        what=_WHAT[kind].format(nd=nd), name=f"{kind}Pad{nd}d", n=2 * nd, more=_MORE[nd],
        neg="; negative widths crop" if kind in ("Zero", "Constant") else "",
        value="\n        value: The fill value." if kind == "Constant" else "",
        vtype=" or a non-number ``value``" if kind == "Constant" else "")


class ZeroPad1d(_ZeroPad):
    __doc__ = _pad_doc("Zero", 1)
    _nd = 1


class ZeroPad2d(_ZeroPad):
    __doc__ = _pad_doc("Zero", 2)
    _nd = 2


class ZeroPad3d(_ZeroPad):
    __doc__ = _pad_doc("Zero", 3)
    _nd = 3


class ConstantPad1d(_ConstantPad):
    __doc__ = _pad_doc("Constant", 1)
    _nd = 1


class ConstantPad2d(_ConstantPad):
    __doc__ = _pad_doc("Constant", 2)
    _nd = 2


class ConstantPad3d(_ConstantPad):
    __doc__ = _pad_doc("Constant", 3)
    _nd = 3


class ReflectionPad1d(_PlainPad):
    __doc__ = _pad_doc("Reflection", 1)
    _nd, _mode = 1, "reflect"


class ReflectionPad2d(_PlainPad):
    __doc__ = _pad_doc("Reflection", 2)
    _nd, _mode = 2, "reflect"


class ReflectionPad3d(_PlainPad):
    __doc__ = _pad_doc("Reflection", 3)
    _nd, _mode = 3, "reflect"


class ReplicationPad1d(_PlainPad):
    __doc__ = _pad_doc("Replication", 1)
    _nd, _mode = 1, "replicate"


class ReplicationPad2d(_PlainPad):
    __doc__ = _pad_doc("Replication", 2)
    _nd, _mode = 2, "replicate"


class ReplicationPad3d(_PlainPad):
    __doc__ = _pad_doc("Replication", 3)
    _nd, _mode = 3, "replicate"


class CircularPad1d(_PlainPad):
    __doc__ = _pad_doc("Circular", 1)
    _nd, _mode = 1, "circular"


class CircularPad2d(_PlainPad):
    __doc__ = _pad_doc("Circular", 2)
    _nd, _mode = 2, "circular"


class CircularPad3d(_PlainPad):
    __doc__ = _pad_doc("Circular", 3)
    _nd, _mode = 3, "circular"
