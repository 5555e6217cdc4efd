"""Layers as thin :class:`~tapegrad.nn.Module` wrappers over :mod:`tapegrad.nn.functional`:
the classic layers, and PyTorch's names (activation modules, ``Conv1d``, ``ConvTranspose2d``,
pooling, ``RMSNorm``, ``GroupNorm``, recurrent cells and ``RNN``/``LSTM``/``GRU``).

Every constructor with parameters takes PyTorch-like arguments plus keyword-only
``key`` (a key from :mod:`tapegrad.random` for reproducible initialization and dropout;
without one, fresh OS entropy is used), ``device`` (``"cpu"`` or ``"cuda:N"``) and ``dtype``
(a floating dtype, float32 by default). A keyword a constructor does not take is a
``TypeError`` naming the closest valid one; PyTorch's options are either implemented with
PyTorch's meaning or refused, never ignored. Linear and
recurrent weights are ``(in, out)`` (the transpose of PyTorch's); convolution weights
``(C_out, C_in / groups, *kernel)`` as in PyTorch (``ConvTranspose2d``: ``(C_in, C_out /
groups, kH, kW)``).
"""

from __future__ import annotations

import numpy as np

from tapegrad import numpy as tnp
from tapegrad import random as _random
from tapegrad.core.backend import backend_of, parse_device
from tapegrad.core.tensor import Tensor
from tapegrad.nn import functional as F
from tapegrad.nn import init
from tapegrad.nn._conv_pool import _divisor
from tapegrad.nn.module import Module, _param_dtype, _place, _positive  # noqa: F401  (shared)

__all__ = [
    "Linear",
    "Conv2d",
    "MaxPool2d",
    "ResidualBlock",
    "RecurrentBlock",
    "LongShortTermMemoryBlock",
    "Embedding",
    "LayerNorm",
    "BatchNorm",
    "Dropout",
    "ScaledDotProductAttention",
    "MultiHeadAttention",
    "ReLU",
    "GELU",
    "Tanh",
    "Sigmoid",
    "SiLU",
    "LeakyReLU",
    "Softmax",
    "LogSoftmax",
    "Flatten",
    "Identity",
    "Conv1d",
    "ConvTranspose2d",
    "AvgPool2d",
    "AdaptiveAvgPool2d",
    "RMSNorm",
    "GroupNorm",
    "RNNCell",
    "LSTMCell",
    "GRUCell",
    "RNN",
    "LSTM",
    "GRU",
]


def _keys(key, n: int):
    """``n`` init keys and the module's own key, split from ``key`` (entropy when None)."""
    if key is None:
        key = _random.key(int(np.random.SeedSequence().entropy))  # pyright: ignore[reportArgumentType]
    ks = _random.split(key, n + 1)
    return ks[:n], ks[n]


def _real(who, name, v, low=None, high=None, high_open=False) -> float:
    """``v`` as a float: a real number (not a bool), finite, within the bounds given."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer,
                                                           np.floating)):
        raise TypeError(f"{who}: {name} must be a number, got {v!r}")
    v = float(v)
    ok = np.isfinite(v) and (low is None or v >= low) and (
        high is None or (v < high if high_open else v <= high))
    if not ok:
        if high is not None:
            want = f"lie in [{low:g}, {high:g}{')' if high_open else ']'}"
        else:
            want = f"be >= {low:g}" if low is not None else "be finite"
        raise ValueError(f"{who}: {name} must {want}, got {v}")
    return v


def _int(who, name, v) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{who}: {name} must be an int, got {v!r}")
    return int(v)


def _prob(who, name, p):
    if p is not None:
        _real(who, name, p, 0.0, 1.0, high_open=True)


def _check_device(who: str, device) -> None:
    """Refuse a bad ``device`` before any submodule is built (naming this layer)."""
    if device is not None:
        try:
            parse_device(device)
        except (TypeError, ValueError) as e:
            raise type(e)(f"{who}: {e}") from None


def _shape_arg(who: str, name: str, value) -> tuple:
    """An int or a sequence of ints (a trailing shape), each positive."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        ns = (value,)
    elif isinstance(value, (tuple, list)):
        ns = tuple(value)
    else:
        raise TypeError(f"{who}: {name} must be an int or a tuple of ints, got {value!r}")
    if not ns:
        raise ValueError(f"{who}: {name} must not be empty")
    _positive(who, **{f"{name}[{i}]": v for i, v in enumerate(ns)})
    return tuple(int(v) for v in ns)


def _bool(who: str, name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{who}: {name} must be a bool, got {value!r}")
    return bool(value)


def _no_inplace(who: str, inplace) -> bool:
    """PyTorch's ``inplace=``: tapegrad's Tensors are immutable, so only False is meaningful
    (and returned)."""
    if _bool(who, "inplace", inplace):
        raise ValueError(
            f"{who}: inplace=True is not possible: tapegrad Tensors are immutable and every "
            "layer returns a new Tensor. Use inplace=False (the default) and keep the result "
            "(x = layer(x))."
        )
    return False


def _one_of(who: str, name: str, value, alias: str, alias_value, default):
    """``value`` or its other spelling ``alias_value`` (one of them, not both), else default."""
    if value is not None and alias_value is not None:
        raise TypeError(f"{who}: give {name} or {alias} (the same setting), not both")
    if value is not None:
        return value
    return default if alias_value is None else alias_value


_TORCH_SIZES = {
    "in_features": "PyTorch's name; here it is input_size",
    "out_features": "PyTorch's name; here it is output_size",
    "num_features": "PyTorch's name; here it is input_size",
    "normalized_shape": "PyTorch's name; here it is input_size",
    "num_embeddings": "PyTorch's name; here it is input_size",
    "embedding_dim": "PyTorch's name; here it is embedding_size",
}
_UNSUPPORTED = "a PyTorch option tapegrad does not implement"


def _tuple(v, n: int):
    """``v`` as PyTorch prints a size in a layer's configuration: an int repeated ``n`` times,
    a sequence as a tuple, a string (``"same"``) as it is."""
    if isinstance(v, str):
        return v
    if isinstance(v, (int, np.integer)):
        return (int(v),) * n
    return tuple(int(a) for a in v)


def _args(*positional, **named) -> str:
    """``extra_repr`` text: the positional values, then ``name=value`` for each named one (a
    string value without quotes, as PyTorch prints ``padding=same``)."""
    parts = [str(v) for v in positional]
    parts += [f"{k}={v}" for k, v in named.items()]
    return ", ".join(parts)


def _conv_repr(c_in, c_out, weight, stride, padding, dilation, groups, bias, **extra) -> str:
    """PyTorch's configuration text of a convolution: sizes as tuples, then the settings that
    differ from the defaults (no padding, dilation 1, one group, a bias)."""
    n = weight.ndim - 2
    named = {"kernel_size": tuple(weight.shape[2:]), "stride": _tuple(stride, n)}
    pad = _tuple(padding, n)
    if pad != "valid" and pad != (0,) * n:
        named["padding"] = pad
    if _tuple(dilation, n) != (1,) * n:
        named["dilation"] = _tuple(dilation, n)
    named.update({k: v for k, v in extra.items() if v != (0,) * n})
    if groups != 1:
        named["groups"] = groups
    if bias is None:
        named["bias"] = False
    return _args(c_in, c_out, **named)


class Linear(Module):
    """Fully connected layer ``y = x W + b``.

    Args:
        input_size: ``in_features``.
        output_size: ``out_features``.
        bias: Whether to add a bias.
        key: Init key.
        device: ``"cpu"`` (default) or ``"cuda:N"`` for the parameters.
        dtype: Floating parameter dtype (``None``: float32).

    Parameters:
        weight ``(input_size, output_size)`` Xavier-uniform; bias ``(output_size,)`` zeros.

    Raises:
        TypeError: for an unknown keyword (naming the closest valid one) or a non-floating
            dtype. ValueError: for non-positive sizes.

    Example:
        >>> import tapegrad as tg
        >>> linear = tg.nn.Linear(4, 2, key=tg.random.key(0))
        >>> linear(tg.random.normal(tg.random.key(1), (3, 4))).shape
        (3, 2)
    """

    _keyword_hints = _TORCH_SIZES

    def __init__(
        self,
        input_size: int,
        output_size: int,
        bias: bool = True,
        *,
        key=None,
        device=None,
        dtype=np.float32,
    ):
        super().__init__()
        _positive("Linear", input_size=input_size, output_size=output_size)
        bias = _bool("Linear", "bias", bias)
        dtype = _param_dtype("Linear", dtype)
        (k,), own = _keys(key, 1)
        self._seed(own)
        self.input_size, self.output_size = int(input_size), int(output_size)
        self.weight = init.xavier_uniform(k, (input_size, output_size), dtype)
        self.register_parameter("bias", init.zeros(None, (output_size,), dtype) if bias else None)
        _place(self, device)

    def extra_repr(self) -> str:
        return _args(
            in_features=self.input_size, out_features=self.output_size, bias=self.bias is not None
        )

    def forward(self, x):
        """``x`` of shape ``(..., input_size)`` -> ``(..., output_size)``."""
        return F.linear(x, self.weight, self.bias)


class Conv2d(Module):
    """2-D convolution over ``(N, C, H, W)`` inputs.

    Args:
        in_channels, out_channels: Channel counts.
        kernel_size: Int or pair.
        stride: Int or pair.
        padding_mode: ``"valid"`` or ``"same"`` (the padding, when ``padding`` is not given),
            or PyTorch's ``"zeros"`` (zero padding of ``padding``, the default there).
        bias: Whether to add a bias.
        padding: Optional int/pair padding (or ``"valid"``/``"same"``) overriding
            ``padding_mode`` (PyTorch style).
        dilation, groups: As in :func:`~tapegrad.nn.functional.conv2d`.
        key, device, dtype: Init key, parameter device and floating dtype (``None``:
            float32).

    Parameters:
        weight ``(out_channels, in_channels / groups, kH, kW)`` Xavier-uniform; bias zeros.

    Raises:
        TypeError: for an unknown keyword or a non-floating dtype.
        ValueError: for non-positive sizes, ``groups`` not dividing both channel counts, an
            unknown ``padding_mode``, or ``padding_mode="same"`` together with ``padding``.
        NotImplementedError: for PyTorch's ``"reflect"``, ``"replicate"`` and ``"circular"``
            padding modes.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding_mode: str = "valid",
        bias: bool = True,
        *,
        padding=None,
        dilation=1,
        groups: int = 1,
        key=None,
        device=None,
        dtype=np.float32,
    ):
        super().__init__()
        _positive("Conv2d", in_channels=in_channels, out_channels=out_channels, groups=groups)
        if in_channels % groups or out_channels % groups:
            raise ValueError(
                f"Conv2d: groups={groups} must divide in_channels={in_channels} and "
                f"out_channels={out_channels}"
            )
        self.padding = _conv_padding("Conv2d", padding_mode, padding)
        bias = _bool("Conv2d", "bias", bias)
        F._pair(stride, "stride", "Conv2d")
        F._pair(dilation, "dilation", "Conv2d")
        dtype = _param_dtype("Conv2d", dtype)
        kh, kw = F._pair(kernel_size, "kernel_size", "Conv2d")
        (k,), own = _keys(key, 1)
        self._seed(own)
        self.stride, self.dilation, self.groups = stride, dilation, groups
        self.weight = init.xavier_uniform(k, (out_channels, in_channels // groups, kh, kw), dtype)
        self.register_parameter("bias", init.zeros(None, (out_channels,), dtype) if bias else None)
        _place(self, device)

    def extra_repr(self) -> str:
        w = self.weight
        return _conv_repr(
            w.shape[1] * self.groups,
            w.shape[0],
            w,
            self.stride,
            self.padding,
            self.dilation,
            self.groups,
            self.bias,
        )

    def forward(self, x):
        """``x`` of shape ``(N, in_channels, H, W)`` -> ``(N, out_channels, H_out, W_out)``."""
        return F.conv2d(
            x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups  # pyright: ignore[reportArgumentType]
        )


def _conv_padding(who: str, padding_mode, padding):
    """The padding a layer passes on: ``padding`` if given, else ``padding_mode``
    (``"valid"``/``"same"``); PyTorch's ``padding_mode="zeros"`` means ``padding`` (0 when
    absent)."""
    if not isinstance(padding_mode, str):  # PyTorch's 5th positional argument is padding
        raise TypeError(
            f"{who}: padding_mode must be 'valid', 'same' or 'zeros', got {padding_mode!r}; "
            f"the 5th positional argument here is padding_mode: pass padding={padding_mode!r}"
        )
    if padding_mode in ("reflect", "replicate", "circular"):
        raise NotImplementedError(
            f"{who}: padding_mode={padding_mode!r} is not implemented; pad the input first "
            "(tnp.pad(x, ..., mode='reflect'/'edge'/'wrap')) and use padding=0"
        )
    if padding_mode not in ("valid", "same", "zeros"):
        raise ValueError(
            f"{who}: padding_mode must be 'valid', 'same' or 'zeros' (zero padding of "
            f"padding=), got {padding_mode!r}"
        )
    if padding is None:
        return 0 if padding_mode == "zeros" else padding_mode
    if padding_mode == "same":
        raise ValueError(
            f"{who}: padding_mode='same' and padding={padding!r} both set the padding; give one"
        )
    return padding


class MaxPool2d(Module):
    """2-D max pooling; ``stride`` defaults to ``kernel_size``.

    ``padding_mode`` is ``"valid"`` or ``"same"``; an int ``padding`` overrides it.
    PyTorch's ``dilation``, ``ceil_mode`` and ``return_indices`` are keyword arguments here,
    with PyTorch's meaning (see :func:`~tapegrad.nn.functional.max_pool2d`).

    Raises:
        TypeError: for an unknown keyword.
        ValueError: for another ``padding_mode``.
    """

    def __init__(self, kernel_size, stride=None, padding_mode: str = "valid", *, padding=None,
                 dilation=1, ceil_mode: bool = False, return_indices: bool = False):
        super().__init__()
        if not isinstance(padding_mode, str):  # PyTorch's 3rd positional argument is padding
            raise TypeError(
                f"MaxPool2d: padding_mode must be 'valid' or 'same', got {padding_mode!r}; the "
                f"3rd positional argument here is padding_mode: pass padding={padding_mode!r}"
            )
        if padding_mode not in ("valid", "same"):
            raise ValueError(
                f"MaxPool2d: padding_mode must be 'valid' or 'same', got {padding_mode!r}"
            )
        if padding is not None and padding_mode == "same":
            raise ValueError(
                f"MaxPool2d: padding_mode='same' and padding={padding!r} both set the padding; "
                "give one"
            )
        F._pair(kernel_size, "kernel_size", "MaxPool2d")
        if stride is not None:
            F._pair(stride, "stride", "MaxPool2d")
        F._pair(dilation, "dilation", "MaxPool2d")
        self.kernel_size, self.stride = kernel_size, stride
        self.padding = padding_mode if padding is None else padding
        self.dilation = dilation
        self.ceil_mode = _bool("MaxPool2d", "ceil_mode", ceil_mode)
        self.return_indices = _bool("MaxPool2d", "return_indices", return_indices)

    def extra_repr(self) -> str:
        stride = self.kernel_size if self.stride is None else self.stride
        return _args(
            kernel_size=self.kernel_size,
            stride=stride,
            padding=0 if self.padding == "valid" else self.padding,
        )

    def forward(self, x):
        """``(N, C, H, W)`` -> ``(N, C, H_out, W_out)`` (and the indices, with
        ``return_indices``)."""
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation,  # pyright: ignore[reportArgumentType]
                            self.ceil_mode, self.return_indices)


class BatchNorm(Module):
    """Batch normalization over all axes but the channel axis 1 (PyTorch's ``BatchNorm1d``
    and ``BatchNorm2d`` in one, with their options and semantics).

    Training mode normalizes with batch statistics and replaces the ``running_mean`` and
    ``running_var`` states with ``(1 - momentum) * running + momentum * batch`` (PyTorch's
    convention; the variance unbiased); in :func:`~tapegrad.nn.functional_call` the new state
    is returned instead. Evaluation mode normalizes with the running statistics.

    Args:
        input_size: Number of channels ``C`` (PyTorch's ``num_features``).
        momentum: Weight of the batch statistics in the running update; ``None`` is PyTorch's
            cumulative moving average (weight ``1 / n`` for the ``n``-th training batch, counted
            in the state ``num_batches_tracked``).
        epsilon: Added to the variance (default ``1e-5``); ``eps`` is PyTorch's spelling (give
            one of them).
        affine: Learn a per-channel ``weight`` and ``bias`` (else both are absent).
        track_running_stats: Keep the running statistics; without them both modes normalize
            with the batch statistics (as PyTorch).
        key: Unused (no random init), accepted for a uniform layer signature.
        device, dtype: Parameter and state device and floating dtype (``None``: float32).

    Parameters: weight (ones), bias (zeros), shape ``(C,)`` (with ``affine``).
    States: running_mean (zeros), running_var (ones), shape ``(C,)`` (with
    ``track_running_stats``); num_batches_tracked (int64 0-d, with ``momentum=None``).

    Raises:
        TypeError: for an unknown keyword, both ``epsilon`` and ``eps``, or a non-floating
            dtype. ValueError: for a non-positive ``input_size``, ``momentum`` outside
            ``[0, 1]`` or a negative ``epsilon``.
    """

    _keyword_hints = _TORCH_SIZES

    def __init__(
        self,
        input_size: int,
        momentum: float | None = 0.1,
        epsilon: float | None = None,
        *,
        eps: float | None = None,
        affine: bool = True,
        track_running_stats: bool = True,
        key=None,
        device=None,
        dtype=np.float32,
    ):
        super().__init__()
        who = "BatchNorm"
        _positive(who, input_size=input_size)
        epsilon = _real(who, "epsilon" if eps is None else "eps",
                        _one_of(who, "epsilon", epsilon, "eps", eps, 1e-5), 0.0)
        if momentum is not None:
            momentum = _real(who, "momentum", momentum, 0.0, 1.0)
        dtype = _param_dtype(who, dtype)
        self.momentum, self.epsilon = momentum, epsilon
        self.input_size = int(input_size)
        self.affine = _bool(who, "affine", affine)
        self.track_running_stats = _bool(who, "track_running_stats", track_running_stats)
        c = (input_size,)
        self.register_parameter("weight", init.ones(None, c, dtype) if affine else None)
        self.register_parameter("bias", init.zeros(None, c, dtype) if affine else None)
        if self.track_running_stats:
            self.register_state("running_mean", init.zeros(None, c, dtype))
            self.register_state("running_var", init.ones(None, c, dtype))
            if momentum is None:
                self.register_state("num_batches_tracked", Tensor(np.zeros((), np.int64)))
        _place(self, device)

    @property
    def eps(self) -> float:
        """PyTorch's name of :attr:`epsilon`."""
        return self.epsilon

    def extra_repr(self) -> str:
        return _args(self.input_size, eps=self.epsilon, momentum=self.momentum,
                     affine=self.affine, track_running_stats=self.track_running_stats)

    def forward(self, x):
        """``(N, C)`` or ``(N, C, ...)`` -> same shape."""
        track = self.track_running_stats
        batch_stats = self.training or not track
        momentum = self.momentum
        if track and self.training and momentum is None:  # the cumulative moving average
            n = self.num_batches_tracked + 1
            self.update_state("num_batches_tracked", n)
            momentum = tnp.astype(tnp.divide(1.0, n), self.running_mean.dtype)
        y, mean, var = F.batch_norm(
            x,
            self.running_mean if track else None,
            self.running_var if track else None,
            self.weight,
            self.bias,
            training=batch_stats,
            momentum=0.0 if momentum is None else momentum,  # pyright: ignore[reportArgumentType]
            eps=self.epsilon,
        )
        if track and self.training:
            self.update_state("running_mean", mean)
            self.update_state("running_var", var)
        return y


class LayerNorm(Module):
    """Layer normalization over the trailing ``input_size`` axes (PyTorch's ``nn.LayerNorm``
    with its options).

    Args:
        input_size: Int or tuple: the trailing shape to normalize over (PyTorch's
            ``normalized_shape``).
        epsilon: Added to the variance (default ``1e-5``); ``eps`` is PyTorch's spelling
            (give one of them).
        elementwise_affine: Learn a gain ``weight`` (and a ``bias``, see below).
        bias: Learn a ``bias`` too (with ``elementwise_affine``).
        key: Unused (no random init).
        device, dtype: Parameter device and floating dtype.

    Parameters: weight (ones) and bias (zeros) of shape ``input_size`` (absent as above).

    Raises:
        TypeError: for an unknown keyword, both ``epsilon`` and ``eps``, or a non-floating
            dtype. ValueError: for non-positive sizes or a negative ``epsilon``.
    """

    _keyword_hints = _TORCH_SIZES

    def __init__(
        self,
        input_size,
        epsilon: float | None = None,
        *,
        eps: float | None = None,
        elementwise_affine: bool = True,
        bias: bool = True,
        key=None,
        device=None,
        dtype=np.float32,
    ):
        super().__init__()
        who = "LayerNorm"
        ns = _shape_arg(who, "input_size", input_size)
        epsilon = _real(who, "epsilon" if eps is None else "eps",
                        _one_of(who, "epsilon", epsilon, "eps", eps, 1e-5), 0.0)
        dtype = _param_dtype(who, dtype)
        affine = _bool(who, "elementwise_affine", elementwise_affine)
        with_bias = _bool(who, "bias", bias)
        self.input_size = int(ns[0]) if len(ns) == 1 else tuple(int(v) for v in ns)
        self.normalized_shape = tuple(int(v) for v in ns)
        self.epsilon = epsilon
        self.register_parameter("weight", init.ones(None, ns, dtype) if affine else None)
        self.register_parameter(
            "bias", init.zeros(None, ns, dtype) if affine and with_bias else None
        )
        _place(self, device)

    @property
    def eps(self) -> float:
        """PyTorch's name of :attr:`epsilon`."""
        return self.epsilon

    def extra_repr(self) -> str:
        return _args(self.normalized_shape, eps=self.epsilon,
                     elementwise_affine=self.weight is not None, bias=self.bias is not None)

    def forward(self, x):
        """``(..., *input_size)`` -> same shape."""
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.epsilon)


class Dropout(Module):
    """Inverted dropout with probability ``p`` in training mode; identity in eval mode.

    ``forward(x, key=None)``: the key defaults to :meth:`Module.next_key` (split off
    ``functional_call``'s key, or the layer's own key in stateful use).

    Args:
        p: Drop probability in ``[0, 1]``.
        inplace: PyTorch's option; only False: Tensors are immutable.
        key: The layer's own key (reproducible masks); fresh entropy without one.

    Raises:
        TypeError: for an unknown keyword. ValueError: for ``p`` outside ``[0, 1]`` or
            ``inplace=True``.
    """

    def __init__(self, p: float = 0.5, inplace: bool = False, *, key=None):
        super().__init__()
        p = _real("Dropout", "p", p, 0.0, 1.0)
        _no_inplace("Dropout", inplace)
        self.p = float(p)
        self.inplace = False
        if key is not None:
            self._seed(key)

    def extra_repr(self) -> str:
        return _args(p=self.p)

    def forward(self, x, key=None):
        """Apply dropout (training mode, ``p > 0``) or return ``x``."""
        if not self.training or self.p == 0.0:
            return x
        return F.dropout(x, self.p, key=key if key is not None else self.next_key())


class Embedding(Module):
    """Lookup table of ``input_size`` vectors of size ``embedding_size``.

    Args:
        input_size: Number of rows (PyTorch's ``num_embeddings``).
        embedding_size: Row size (PyTorch's ``embedding_dim``).
        padding_idx: Optional row (negative counts from the end) that is initialized to zeros
            and gets no gradient (through this layer), as PyTorch's.
        key, device, dtype: Init key, parameter device and floating dtype.

    Parameters: weight ``(input_size, embedding_size)``, standard normal (PyTorch's init).

    Raises:
        TypeError: for an unknown keyword (PyTorch's ``max_norm``, ``norm_type``,
            ``scale_grad_by_freq`` and ``sparse`` are not implemented) or a non-floating dtype.
        ValueError: for non-positive sizes or ``padding_idx`` out of range.
    """

    _keyword_hints = dict(_TORCH_SIZES, max_norm=_UNSUPPORTED, norm_type=_UNSUPPORTED,
                          scale_grad_by_freq=_UNSUPPORTED, sparse=_UNSUPPORTED)

    def __init__(
        self,
        input_size: int,
        embedding_size: int,
        padding_idx: int | None = None,
        *,
        key=None,
        device=None,
        dtype=np.float32,
    ):
        super().__init__()
        _positive("Embedding", input_size=input_size, embedding_size=embedding_size)
        if padding_idx is not None:
            if isinstance(padding_idx, bool) or not isinstance(padding_idx, (int, np.integer)):
                raise TypeError(f"Embedding: padding_idx must be an int or None, got "
                                f"{padding_idx!r}")
            if not -input_size <= padding_idx < input_size:
                raise ValueError(
                    f"Embedding: padding_idx must lie in [-{input_size}, {input_size}), got "
                    f"{padding_idx}"
                )
            padding_idx = int(padding_idx) % input_size
        self.padding_idx = padding_idx
        dtype = _param_dtype("Embedding", dtype)
        (k,), own = _keys(key, 1)
        self._seed(own)
        weight = init.normal(k, (input_size, embedding_size), dtype)
        if padding_idx is not None:
            weight = weight.at[padding_idx].set(0.0)
        self.weight = weight
        _place(self, device)

    def extra_repr(self) -> str:
        if self.padding_idx is None:
            return _args(*self.weight.shape)
        return _args(*self.weight.shape, padding_idx=self.padding_idx)

    def forward(self, x):
        """Integer indices of any shape -> ``x.shape + (embedding_size,)``."""
        w = self.weight
        if self.padding_idx is not None:  # the padding row's value, without a gradient
            rows = tnp.arange(w.shape[0], device=w.device)[:, None] == self.padding_idx
            w = tnp.where(rows, tnp.stop_gradient(w), w)
        return F.embedding(x, w)


class ResidualBlock(Module):
    """Residual block ``relu(F(x) + shortcut(x))`` (He et al., 2016, arXiv:1512.03385).

    ``F`` is conv3x3(stride) -> BatchNorm -> relu -> conv3x3 -> BatchNorm; the shortcut is
    the identity, or conv1x1(stride) -> BatchNorm when the stride or channel count changes.

    Args:
        in_channels, out_channels: Channel counts.
        stride: Stride of the first convolution.
        key, device, dtype: Init key, parameter device and floating dtype.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        stride: int = 1,
        *,
        key=None,
        device=None,
        dtype=np.float32,
    ):
        super().__init__()
        _positive(
            "ResidualBlock", in_channels=in_channels, out_channels=out_channels, stride=stride
        )
        dtype = _param_dtype("ResidualBlock", dtype)
        _check_device("ResidualBlock", device)
        ks, own = _keys(key, 3)
        self._seed(own)
        self.conv1 = Conv2d(
            in_channels, out_channels, 3, stride, bias=False, padding=1, key=ks[0], dtype=dtype
        )
        self.bn1 = BatchNorm(out_channels, dtype=dtype)
        self.conv2 = Conv2d(
            out_channels, out_channels, 3, 1, bias=False, padding=1, key=ks[1], dtype=dtype
        )
        self.bn2 = BatchNorm(out_channels, dtype=dtype)
        if stride != 1 or in_channels != out_channels:
            self.shortcut_conv = Conv2d(
                in_channels, out_channels, 1, stride, bias=False, key=ks[2], dtype=dtype
            )
            self.shortcut_bn = BatchNorm(out_channels, dtype=dtype)
        for _, m in self.named_modules():
            _place(m, device)

    def extra_repr(self) -> str:
        c_out, c_in = self.conv1.weight.shape[:2]
        return _args(c_in, c_out, stride=self.conv1.stride)

    def forward(self, x):
        """``(N, in_channels, H, W)`` -> ``(N, out_channels, ceil(H / stride), ...)``."""
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        if "shortcut_conv" in self._modules:
            x = self.shortcut_bn(self.shortcut_conv(x))
        return F.relu(y + x)


def _zeros_like_rows(x, n: int):
    return Tensor(backend_of(x._array).zeros((x.shape[0], n), dtype=x.dtype))


def _sequence(x, who):
    x = F._floating(x, who)
    if x.ndim != 3:
        raise ValueError(
            f"{who}: input must have shape (batch, seq_len, input_size), got {x.shape}"
        )
    return x


def _recurrent_block_repr(block, first) -> str:
    named = {}
    if "hidden_to_output" in block._modules:
        named["output_size"] = block.hidden_to_output.output_size
    if block.dropout_prob is not None:
        named["dropout_prob"] = block.dropout_prob
    return _args(first.input_size, block.hidden_size, **named)


class RecurrentBlock(Module):
    """Elman RNN ``h_t = tanh(x_t W_ih + b_ih + h_{t-1} W_hh)``.

    Returns the final hidden state ``(batch, hidden_size)``, or ``h_T W_ho + b_ho`` of shape
    ``(batch, output_size)`` when ``output_size`` is given. With ``dropout_prob``, dropout is
    applied (training mode only) to the final hidden state before it is returned or projected.

    Args:
        input_size, hidden_size: Sizes.
        output_size: Optional projection size.
        dropout_prob: Optional dropout probability.

    References:
        Graves, "Generating Sequences With Recurrent Neural Networks", arXiv:1308.0850.
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        output_size: int | None = None,
        dropout_prob: float | None = None,
        *,
        key=None,
        device=None,
        dtype=np.float32,
    ):
        super().__init__()
        _positive("RecurrentBlock", input_size=input_size, hidden_size=hidden_size)
        _prob("RecurrentBlock", "dropout_prob", dropout_prob)
        if output_size is not None:
            _positive("RecurrentBlock", output_size=output_size)
        dtype = _param_dtype("RecurrentBlock", dtype)
        _check_device("RecurrentBlock", device)
        ks, own = _keys(key, 3)
        self._seed(own)
        self.hidden_size = int(hidden_size)
        self.input_to_hidden = Linear(
            input_size, hidden_size, key=ks[0], device=device, dtype=dtype
        )
        self.hidden_to_hidden = Linear(
            hidden_size, hidden_size, bias=False, key=ks[1], device=device, dtype=dtype
        )
        if output_size is not None:
            self.hidden_to_output = Linear(
                hidden_size, output_size, key=ks[2], device=device, dtype=dtype
            )
        self.dropout_prob = dropout_prob

    def extra_repr(self) -> str:
        return _recurrent_block_repr(self, self.input_to_hidden)

    def forward(self, x, hidden_state=None, key=None):
        """``x (batch, seq_len, input_size)``, optional ``hidden_state (batch, hidden_size)``."""
        x = _sequence(x, "RecurrentBlock")
        h = _zeros_like_rows(x, self.hidden_size) if hidden_state is None else hidden_state
        for t in range(x.shape[1]):  # a loop over time steps
            h = F.tanh(self.input_to_hidden(x[:, t]) + self.hidden_to_hidden(h))
        if self.dropout_prob and self.training:
            h = F.dropout(h, self.dropout_prob, key=key if key is not None else self.next_key())
        if "hidden_to_output" in self._modules:
            return self.hidden_to_output(h)
        return h


class LongShortTermMemoryBlock(Module):
    """LSTM over a whole sequence; returns ``(output, cell_state)``.

    Gates ``[i, f, g, o] = x_t W_x + b + h_{t-1} W_h`` (one fused projection each, gate
    order i, f, g, o as in PyTorch); ``c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g)``,
    ``h_t = sigmoid(o) tanh(c_t)``. ``output`` is the final hidden state, projected to
    ``output_size`` when given (after dropout, in training mode, with ``dropout_prob``).

    References:
        Hochreiter and Schmidhuber, "Long Short-Term Memory", Neural Computation, 1997.
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        output_size: int | None = None,
        dropout_prob: float | None = None,
        *,
        key=None,
        device=None,
        dtype=np.float32,
    ):
        super().__init__()
        _positive("LongShortTermMemoryBlock", input_size=input_size, hidden_size=hidden_size)
        _prob("LongShortTermMemoryBlock", "dropout_prob", dropout_prob)
        if output_size is not None:
            _positive("LongShortTermMemoryBlock", output_size=output_size)
        dtype = _param_dtype("LongShortTermMemoryBlock", dtype)
        _check_device("LongShortTermMemoryBlock", device)
        ks, own = _keys(key, 3)
        self._seed(own)
        self.hidden_size = int(hidden_size)
        self.input_to_gates = Linear(
            input_size, 4 * hidden_size, key=ks[0], device=device, dtype=dtype
        )
        self.hidden_to_gates = Linear(
            hidden_size, 4 * hidden_size, bias=False, key=ks[1], device=device, dtype=dtype
        )
        if output_size is not None:
            self.hidden_to_output = Linear(
                hidden_size, output_size, key=ks[2], device=device, dtype=dtype
            )
        self.dropout_prob = dropout_prob

    def extra_repr(self) -> str:
        return _recurrent_block_repr(self, self.input_to_gates)

    def forward(self, x, hidden_state=None, C_t=None, key=None):
        """``x (batch, seq_len, input_size)``; optional initial ``hidden_state`` and ``C_t``
        of shape ``(batch, hidden_size)`` (zeros by default). Returns ``(output, C_T)``."""
        x = _sequence(x, "LongShortTermMemoryBlock")
        n = self.hidden_size
        h = _zeros_like_rows(x, n) if hidden_state is None else hidden_state
        c = _zeros_like_rows(x, n) if C_t is None else C_t
        for t in range(x.shape[1]):  # a loop over time steps
            z = self.input_to_gates(x[:, t]) + self.hidden_to_gates(h)
            i = F.sigmoid(z[:, :n])
            f = F.sigmoid(z[:, n : 2 * n])
            g = F.tanh(z[:, 2 * n : 3 * n])
            o = F.sigmoid(z[:, 3 * n :])
            c = f * c + i * g
            h = o * F.tanh(c)
        out = h
        if self.dropout_prob and self.training:
            out = F.dropout(out, self.dropout_prob, key=key if key is not None else self.next_key())
        if "hidden_to_output" in self._modules:
            out = self.hidden_to_output(out)
        return out, c


class ScaledDotProductAttention(Module):
    """Scaled dot-product attention with post-softmax dropout in training mode.

    ``forward(query, key, value, mask=None, is_causal=False, dropout_key=None)``; see
    :func:`~tapegrad.nn.functional.scaled_dot_product_attention` for the mask contract.
    """

    def __init__(self, dropout_prob: float = 0.1, *, key=None):
        super().__init__()
        _prob("ScaledDotProductAttention", "dropout_prob", dropout_prob)
        self.dropout_prob = float(dropout_prob)
        if key is not None:
            self._seed(key)

    def extra_repr(self) -> str:
        return _args(dropout_prob=self.dropout_prob)

    def forward(self, query, key, value, mask=None, is_causal: bool = False, dropout_key=None):
        """``(..., Lq, E)``, ``(..., Lk, E)``, ``(..., Lk, Ev)`` -> ``(..., Lq, Ev)``."""
        p = self.dropout_prob if self.training else 0.0
        if p > 0 and dropout_key is None:
            dropout_key = self.next_key()
        return F.scaled_dot_product_attention(
            query, key, value, mask, dropout_p=p, is_causal=is_causal, dropout_key=dropout_key
        )


class MultiHeadAttention(Module):
    """Multi-head attention with learned projections.

    Submodules ``query``, ``key``, ``value``, ``output``: Linear ``(hidden_size,
    hidden_size)``, built with the ``key``, ``device`` and ``dtype`` given. ``forward(query,
    key, value, mask=None, is_causal=False, dropout_key=None)`` maps ``(B, L, hidden_size)``
    inputs to ``(B, Lq, hidden_size)``.

    Raises:
        TypeError: for an unknown keyword (PyTorch's ``nn.MultiheadAttention`` takes
            ``embed_dim`` and ``dropout``; here they are ``hidden_size`` and ``dropout_prob``).
    """

    _keyword_hints = {"embed_dim": "PyTorch's name; here it is hidden_size",
                      "dropout": "PyTorch's name; here it is dropout_prob"}

    def __init__(
        self,
        num_heads: int,
        hidden_size: int,
        dropout_prob: float = 0.1,
        *,
        key=None,
        device=None,
        dtype=np.float32,
    ):
        super().__init__()
        _positive("MultiHeadAttention", num_heads=num_heads, hidden_size=hidden_size)
        dtype = _param_dtype("MultiHeadAttention", dtype)
        _check_device("MultiHeadAttention", device)
        if hidden_size % num_heads:
            raise ValueError(
                f"MultiHeadAttention: num_heads={num_heads} must divide hidden_size={hidden_size}"
            )
        _prob("MultiHeadAttention", "dropout_prob", dropout_prob)
        ks, own = _keys(key, 4)
        self._seed(own)
        self.num_heads, self.dropout_prob = int(num_heads), float(dropout_prob)
        for name, k in zip(("query", "key", "value", "output"), ks):
            setattr(
                self, name, Linear(hidden_size, hidden_size, key=k, device=device, dtype=dtype)
            )

    def extra_repr(self) -> str:
        return _args(
            num_heads=self.num_heads,
            hidden_size=self.query.input_size,
            dropout_prob=self.dropout_prob,
        )

    def forward(self, query, key, value, mask=None, is_causal: bool = False, dropout_key=None):
        """Attend from ``query (B, Lq, D)`` to ``key``/``value (B, Lk, D)``."""
        p = self.dropout_prob if self.training else 0.0
        if p > 0 and dropout_key is None:
            dropout_key = self.next_key()
        return F.multi_head_attention(
            query,
            key,
            value,
            self.params,
            self.num_heads,
            mask,
            is_causal=is_causal,
            dropout_p=p,
            dropout_key=dropout_key,
        )


# -- activations, shape helpers --------------------------------------------------------------
class ReLU(Module):
    """Module form of :func:`~tapegrad.nn.functional.relu` (PyTorch's ``nn.ReLU``).

    Args:
        inplace: PyTorch's option; only False (Tensors are immutable).
    """

    def __init__(self, inplace: bool = False):
        super().__init__()
        _no_inplace("ReLU", inplace)
        self.inplace = False

    def forward(self, x):
        """Any shape -> same shape."""
        return F.relu(x)


class GELU(Module):
    """Module form of :func:`~tapegrad.nn.functional.gelu` (PyTorch's ``nn.GELU``).

    Args:
        approximate: ``"none"`` (the default, PyTorch's: the exact ``x Phi(x)``) or
            ``"tanh"`` (the tanh approximation, the default of the functional ``gelu``).

    Raises:
        ValueError: for another ``approximate``.
    """

    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"

    def forward(self, x):
        """Any shape -> same shape."""
        return F.gelu(x, approximate=self.approximate)


class Tanh(Module):
    """Module form of :func:`~tapegrad.nn.functional.tanh` (PyTorch's ``nn.Tanh``)."""

    def forward(self, x):
        """Any shape -> same shape."""
        return F.tanh(x)


class Sigmoid(Module):
    """Module form of :func:`~tapegrad.nn.functional.sigmoid` (PyTorch's ``nn.Sigmoid``)."""

    def forward(self, x):
        """Any shape -> same shape."""
        return F.sigmoid(x)


class SiLU(Module):
    """Module form of :func:`~tapegrad.nn.functional.silu` (PyTorch's ``nn.SiLU``).

    Args:
        inplace: PyTorch's option; only False (Tensors are immutable).
    """

    def __init__(self, inplace: bool = False):
        super().__init__()
        _no_inplace("SiLU", inplace)
        self.inplace = False

    def forward(self, x):
        """Any shape -> same shape."""
        return F.silu(x)


class LeakyReLU(Module):
    """Module form of :func:`~tapegrad.nn.functional.leaky_relu` (PyTorch's
    ``nn.LeakyReLU``).

    Args:
        negative_slope: Slope for negative inputs.
        inplace: PyTorch's option; only False (Tensors are immutable).
    """

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__()
        _no_inplace("LeakyReLU", inplace)
        self.negative_slope = _real("LeakyReLU", "negative_slope", negative_slope)
        self.inplace = False

    def extra_repr(self) -> str:
        return _args(negative_slope=self.negative_slope)

    def forward(self, x):
        """Any shape -> same shape."""
        return F.leaky_relu(x, self.negative_slope)


class Softmax(Module):
    """Module form of :func:`~tapegrad.nn.functional.softmax` along ``dim`` (PyTorch's
    ``nn.Softmax``; ``dim`` defaults to the last axis here rather than an implicit choice)."""

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = _int("Softmax", "dim", dim)

    def extra_repr(self) -> str:
        return _args(dim=self.dim)

    def forward(self, x):
        """Any shape -> same shape; entries along ``dim`` sum to 1."""
        return F.softmax(x, axis=self.dim)


class LogSoftmax(Module):
    """Module form of :func:`~tapegrad.nn.functional.log_softmax` along ``dim`` (PyTorch's
    ``nn.LogSoftmax``; ``dim`` defaults to the last axis)."""

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = _int("LogSoftmax", "dim", dim)

    def extra_repr(self) -> str:
        return _args(dim=self.dim)

    def forward(self, x):
        """Any shape -> same shape (log-probabilities along ``dim``)."""
        return F.log_softmax(x, axis=self.dim)


class Flatten(Module):
    """Flatten axes ``start_dim..end_dim`` (inclusive) into one (PyTorch's ``nn.Flatten``).

    The default keeps the batch axis: ``(N, C, H, W) -> (N, C * H * W)``.

    Raises (on call):
        ValueError: for axes out of range or ``start_dim`` after ``end_dim``.
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim = _int("Flatten", "start_dim", start_dim)
        self.end_dim = _int("Flatten", "end_dim", end_dim)

    def extra_repr(self) -> str:
        return _args(start_dim=self.start_dim, end_dim=self.end_dim)

    def forward(self, x):
        """``(..., d_start, ..., d_end, ...)`` -> ``(..., d_start * ... * d_end, ...)``."""
        return tnp.asarray(x).flatten(self.start_dim, self.end_dim)


class Identity(Module):
    """Returns its input unchanged (PyTorch's ``nn.Identity``); constructor arguments are
    accepted and ignored, as there, so it can stand in for any layer."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        """Returns ``x``."""
        return x


# -- convolution and pooling -----------------------------------------------------------------
class Conv1d(Module):
    """1-D convolution over ``(N, C, L)`` inputs (PyTorch's ``nn.Conv1d``), a thin wrapper
    over :func:`~tapegrad.nn.functional.conv1d`.

    Args:
        in_channels, out_channels: Channel counts.
        kernel_size: Int.
        stride, padding, dilation, groups: As in :func:`~tapegrad.nn.functional.conv1d`
            (``padding`` an int, ``"valid"`` or ``"same"``; zeros).
        bias: Whether to add a bias.
        key, device, dtype: Init key, parameter device and floating dtype.

    Parameters:
        weight ``(out_channels, in_channels / groups, kernel_size)`` Xavier-uniform; bias
        ``(out_channels,)`` zeros.

    Raises:
        ValueError: for non-positive sizes or ``groups`` not dividing both channel counts.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding=0,
        dilation: int = 1,
        groups: int = 1,
        bias: bool = True,
        *,
        key=None,
        device=None,
        dtype=np.float32,
    ):
        super().__init__()
        _positive("Conv1d", in_channels=in_channels, out_channels=out_channels, groups=groups)
        dtype = _param_dtype("Conv1d", dtype)
        if in_channels % groups or out_channels % groups:
            raise ValueError(
                f"Conv1d: groups={groups} must divide in_channels={in_channels} and "
                f"out_channels={out_channels}"
            )
        k_size = F._single(kernel_size, "kernel_size", "Conv1d")
        F._single(stride, "stride", "Conv1d")
        F._single(dilation, "dilation", "Conv1d")
        bias = _bool("Conv1d", "bias", bias)
        (k,), own = _keys(key, 1)
        self._seed(own)
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        self.weight = init.xavier_uniform(k, (out_channels, in_channels // groups, k_size), dtype)
        self.register_parameter("bias", init.zeros(None, (out_channels,), dtype) if bias else None)
        _place(self, device)

    def extra_repr(self) -> str:
        w = self.weight
        return _conv_repr(
            w.shape[1] * self.groups,
            w.shape[0],
            w,
            self.stride,
            self.padding,
            self.dilation,
            self.groups,
            self.bias,
        )

    def forward(self, x):
        """``(N, in_channels, L)`` -> ``(N, out_channels, L_out)``."""
        return F.conv1d(
            x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups
        )


class ConvTranspose2d(Module):
    """2-D transposed convolution over ``(N, C, H, W)`` inputs (PyTorch's
    ``nn.ConvTranspose2d``), a thin wrapper over
    :func:`~tapegrad.nn.functional.conv_transpose2d`.

    Args:
        in_channels, out_channels: Channel counts.
        kernel_size: Int or pair.
        stride, padding, output_padding, groups, dilation: As in
            :func:`~tapegrad.nn.functional.conv_transpose2d`.
        bias: Whether to add a bias.
        key, device, dtype: Init key, parameter device and floating dtype.

    Parameters:
        weight ``(in_channels, out_channels / groups, kH, kW)`` (PyTorch's layout)
        Xavier-uniform; bias ``(out_channels,)`` zeros.

    Raises:
        ValueError: for non-positive sizes or ``groups`` not dividing both channel counts.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups: int = 1,
        bias: bool = True,
        dilation=1,
        *,
        key=None,
        device=None,
        dtype=np.float32,
    ):
        super().__init__()
        who = "ConvTranspose2d"
        dtype = _param_dtype(who, dtype)
        _positive(who, in_channels=in_channels, out_channels=out_channels, groups=groups)
        if in_channels % groups or out_channels % groups:
            raise ValueError(
                f"{who}: groups={groups} must divide in_channels={in_channels} and "
                f"out_channels={out_channels}"
            )
        kh, kw = F._pair(kernel_size, "kernel_size", who)
        F._pair(stride, "stride", who)
        F._pair(dilation, "dilation", who)
        F._pair(output_padding, "output_padding", who, minimum=0)
        bias = _bool(who, "bias", bias)
        (k,), own = _keys(key, 1)
        self._seed(own)
        self.stride, self.padding, self.output_padding = stride, padding, output_padding
        self.groups, self.dilation = groups, dilation
        self.weight = init.xavier_uniform(k, (in_channels, out_channels // groups, kh, kw), dtype)
        self.register_parameter("bias", init.zeros(None, (out_channels,), dtype) if bias else None)
        _place(self, device)

    def extra_repr(self) -> str:
        w = self.weight
        return _conv_repr(
            w.shape[0],
            w.shape[1] * self.groups,
            w,
            self.stride,
            self.padding,
            self.dilation,
            self.groups,
            self.bias,
            output_padding=_tuple(self.output_padding, 2),
        )

    def forward(self, x):
        """``(N, in_channels, H, W)`` -> ``(N, out_channels, H_out, W_out)``."""
        return F.conv_transpose2d(
            x,
            self.weight,
            self.bias,
            self.stride,
            self.padding,
            self.output_padding,
            self.groups,
            self.dilation,
        )


class AvgPool2d(Module):
    """2-D average pooling (PyTorch's ``nn.AvgPool2d``) over
    :func:`~tapegrad.nn.functional.avg_pool2d`; ``stride`` defaults to ``kernel_size``.

    Args:
        kernel_size: Int or pair.
        stride: Int or pair (default ``kernel_size``).
        padding: Int or pair of zero padding (at most half the kernel), or
            ``"valid"``/``"same"``.
        ceil_mode: Round output sizes up, as PyTorch.
        count_include_pad: Divide by the full window (True) or by its non-padding part.
        divisor_override: A nonzero int to divide every window's sum by instead.

    Raises:
        TypeError: for an unknown keyword or a non-bool flag.
        ValueError: for ``divisor_override=0``.
    """

    def __init__(
        self,
        kernel_size,
        stride=None,
        padding=0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override=None,
    ):
        super().__init__()
        F._pair(kernel_size, "kernel_size", "AvgPool2d")
        if stride is not None:
            F._pair(stride, "stride", "AvgPool2d")
        _divisor(divisor_override, "AvgPool2d")
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode = _bool("AvgPool2d", "ceil_mode", ceil_mode)
        self.count_include_pad = _bool("AvgPool2d", "count_include_pad", count_include_pad)
        self.divisor_override = divisor_override

    def extra_repr(self) -> str:
        stride = self.kernel_size if self.stride is None else self.stride
        text = _args(kernel_size=self.kernel_size, stride=stride, padding=self.padding)
        return text if self.count_include_pad else text + ", count_include_pad=False"

    def forward(self, x):
        """``(N, C, H, W)`` -> ``(N, C, H_out, W_out)``."""
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class AdaptiveAvgPool2d(Module):
    """Adaptive average pooling to a fixed ``output_size`` (PyTorch's
    ``nn.AdaptiveAvgPool2d``) over :func:`~tapegrad.nn.functional.adaptive_avg_pool2d`.

    Args:
        output_size: Int or pair ``(Ho, Wo)``; a ``None`` entry keeps that input size.
    """

    def __init__(self, output_size):
        super().__init__()
        sizes = output_size if isinstance(output_size, (tuple, list)) else (output_size,)
        if len(sizes) not in (1, 2) or not all(
            s is None or (isinstance(s, (int, np.integer)) and not isinstance(s, bool))
            for s in sizes
        ):
            raise TypeError(
                f"AdaptiveAvgPool2d: output_size must be an int or a pair of ints (None keeps "
                f"that size), got {output_size!r}"
            )
        if any(s is not None and s < 1 for s in sizes):
            raise ValueError(f"AdaptiveAvgPool2d: output_size must be >= 1, got {output_size!r}")
        self.output_size = output_size

    def extra_repr(self) -> str:
        return _args(output_size=self.output_size)

    def forward(self, x):
        """``(N, C, H, W)`` or ``(C, H, W)`` -> ``(..., Ho, Wo)``."""
        return F.adaptive_avg_pool2d(x, self.output_size)


# -- normalization ---------------------------------------------------------------------------
class RMSNorm(Module):
    """Root-mean-square normalization over the trailing ``normalized_shape`` (PyTorch's
    ``nn.RMSNorm``) over :func:`~tapegrad.nn.functional.rms_norm`.

    Args:
        normalized_shape: Int or tuple: the trailing shape to normalize over.
        eps: Added to the mean square; ``None`` means the input dtype's machine epsilon.
        elementwise_affine: Whether to learn a gain ``weight``.
        device, dtype: Parameter device and floating dtype.

    Parameters:
        weight ``normalized_shape``, ones (absent without ``elementwise_affine``).

    References:
        Zhang and Sennrich, "Root Mean Square Layer Normalization", NeurIPS 2019.
    """

    def __init__(
        self,
        normalized_shape,
        eps: float | None = None,
        elementwise_affine: bool = True,
        *,
        device=None,
        dtype=np.float32,
    ):
        super().__init__()
        dtype = _param_dtype("RMSNorm", dtype)
        ns = _shape_arg("RMSNorm", "normalized_shape", normalized_shape)
        self.normalized_shape = ns
        self.eps = None if eps is None else _real("RMSNorm", "eps", eps, 0.0)
        elementwise_affine = _bool("RMSNorm", "elementwise_affine", elementwise_affine)
        self.register_parameter(
            "weight", init.ones(None, ns, dtype) if elementwise_affine else None
        )
        _place(self, device)

    def extra_repr(self) -> str:
        return _args(
            self.normalized_shape, eps=self.eps, elementwise_affine=self.weight is not None
        )

    def forward(self, x):
        """``(..., *normalized_shape)`` -> same shape."""
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)


class GroupNorm(Module):
    """Group normalization (PyTorch's ``nn.GroupNorm``) over
    :func:`~tapegrad.nn.functional.group_norm`.

    Args:
        num_groups: Number of groups; divides ``num_channels``.
        num_channels: ``C``.
        eps: Added to the variance.
        affine: Whether to learn a per-channel ``weight`` and ``bias``.
        device, dtype: Parameter device and floating dtype.

    Parameters:
        weight (ones) and bias (zeros) of shape ``(num_channels,)`` (absent without
        ``affine``).

    Raises:
        ValueError: if ``num_groups`` does not divide ``num_channels``.

    References:
        Wu and He, "Group Normalization", ECCV 2018.
    """

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        *,
        device=None,
        dtype=np.float32,
    ):
        super().__init__()
        _positive("GroupNorm", num_groups=num_groups, num_channels=num_channels)
        dtype = _param_dtype("GroupNorm", dtype)
        if num_channels % num_groups:
            raise ValueError(
                f"GroupNorm: num_groups={num_groups} must divide num_channels={num_channels}"
            )
        self.num_groups, self.num_channels = int(num_groups), int(num_channels)
        self.eps = _real("GroupNorm", "eps", eps, 0.0)
        affine = _bool("GroupNorm", "affine", affine)
        c = (num_channels,)
        self.register_parameter("weight", init.ones(None, c, dtype) if affine else None)
        self.register_parameter("bias", init.zeros(None, c, dtype) if affine else None)
        _place(self, device)

    def extra_repr(self) -> str:
        return _args(
            self.num_groups, self.num_channels, eps=self.eps, affine=self.weight is not None
        )

    def forward(self, x):
        """``(N, num_channels, *spatial)`` -> same shape."""
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)


# -- recurrent layers ------------------------------------------------------------------------
def _rnn_uniform(key, shape, hidden_size, dtype):
    """PyTorch's recurrent init: ``U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))``."""
    a = 1.0 / np.sqrt(hidden_size)
    return init.uniform(key, shape, dtype, -a, a)


class _CellBase(Module):
    _mode = ""
    _who = ""

    def __init__(self, input_size, hidden_size, bias, key, device, dtype):
        super().__init__()
        _positive(self._who, input_size=input_size, hidden_size=hidden_size)
        bias = _bool(self._who, "bias", bias)
        dtype = _param_dtype(self._who, dtype)
        g = F._GATES[self._mode] * hidden_size
        ks, own = _keys(key, 4)
        self._seed(own)
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        self.weight_ih = _rnn_uniform(ks[0], (input_size, g), hidden_size, dtype)
        self.weight_hh = _rnn_uniform(ks[1], (hidden_size, g), hidden_size, dtype)
        for name, k in (("bias_ih", ks[2]), ("bias_hh", ks[3])):
            self.register_parameter(
                name, _rnn_uniform(k, (g,), hidden_size, dtype) if bias else None
            )
        _place(self, device)

    def extra_repr(self) -> str:
        text = _args(self.input_size, self.hidden_size)
        return text if self.bias_ih is not None else text + ", bias=False"


class RNNCell(_CellBase):
    """One Elman RNN step (PyTorch's ``nn.RNNCell``) over
    :func:`~tapegrad.nn.functional.rnn_cell`: ``h' = act(x W_ih + b_ih + h W_hh + b_hh)``.

    Args:
        input_size, hidden_size: Sizes.
        bias: Whether to add ``b_ih`` and ``b_hh``.
        nonlinearity: ``"tanh"`` or ``"relu"``.
        key, device, dtype: Init key, parameter device and floating dtype.

    Parameters:
        weight_ih ``(input_size, hidden_size)``, weight_hh ``(hidden_size, hidden_size)``,
        bias_ih, bias_hh ``(hidden_size,)``; all ``U(-1/sqrt(hidden_size), +)`` as in PyTorch
        (weights are the transposes of PyTorch's, this library's linear layout).

    References:
        Elman, "Finding Structure in Time", Cognitive Science 14(2), 1990.
    """

    _mode, _who = "rnn_tanh", "RNNCell"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        *,
        key=None,
        device=None,
        dtype=np.float32,
    ):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(
                f"RNNCell: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}"
            )
        super().__init__(input_size, hidden_size, bias, key, device, dtype)
        self.nonlinearity = nonlinearity

    def extra_repr(self) -> str:
        text = _CellBase.extra_repr(self)
        return text if self.nonlinearity == "tanh" else f"{text}, nonlinearity={self.nonlinearity}"

    def forward(self, input, hx=None):
        """``input (batch, input_size)`` (or ``(input_size,)``), optional ``hx (batch,
        hidden_size)`` (zeros) -> the new hidden state ``(batch, hidden_size)``."""
        return F.rnn_cell(
            input,
            hx,
            self.weight_ih,
            self.weight_hh,
            self.bias_ih,
            self.bias_hh,
            self.nonlinearity,
        )


class LSTMCell(_CellBase):
    """One LSTM step (PyTorch's ``nn.LSTMCell``) over
    :func:`~tapegrad.nn.functional.lstm_cell`; gates in PyTorch's order ``i, f, g, o``.

    Args:
        input_size, hidden_size: Sizes.
        bias: Whether to add ``b_ih`` and ``b_hh``.
        key, device, dtype: Init key, parameter device and floating dtype.

    Parameters:
        weight_ih ``(input_size, 4 hidden_size)``, weight_hh ``(hidden_size,
        4 hidden_size)``, bias_ih, bias_hh ``(4 hidden_size,)``; PyTorch's uniform init.

    References:
        Hochreiter and Schmidhuber, "Long Short-Term Memory", Neural Computation, 1997.
    """

    _mode, _who = "lstm", "LSTMCell"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        *,
        key=None,
        device=None,
        dtype=np.float32,
    ):
        super().__init__(input_size, hidden_size, bias, key, device, dtype)

    def forward(self, input, hx=None):
        """``input (batch, input_size)``, optional ``hx = (h, c)`` each ``(batch,
        hidden_size)`` (zeros) -> ``(h', c')``."""
        return F.lstm_cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)


class GRUCell(_CellBase):
    """One GRU step (PyTorch's ``nn.GRUCell``) over :func:`~tapegrad.nn.functional.gru_cell`;
    gates in PyTorch's order ``r, z, n``.

    Args:
        input_size, hidden_size: Sizes.
        bias: Whether to add ``b_ih`` and ``b_hh``.
        key, device, dtype: Init key, parameter device and floating dtype.

    Parameters:
        weight_ih ``(input_size, 3 hidden_size)``, weight_hh ``(hidden_size,
        3 hidden_size)``, bias_ih, bias_hh ``(3 hidden_size,)``; PyTorch's uniform init.

    References:
        Cho et al., "Learning Phrase Representations using RNN Encoder-Decoder for
        Statistical Machine Translation", EMNLP 2014.
    """

    _mode, _who = "gru", "GRUCell"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        *,
        key=None,
        device=None,
        dtype=np.float32,
    ):
        super().__init__(input_size, hidden_size, bias, key, device, dtype)

    def forward(self, input, hx=None):
        """``input (batch, input_size)``, optional ``hx (batch, hidden_size)`` (zeros) -> the
        new hidden state."""
        return F.gru_cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)


class _RNNBase(Module):
    """Multi-layer, optionally bidirectional recurrent layer over whole sequences."""

    _who = ""
    _kind = ""  # the cell of LSTM and GRU ("lstm", "gru"); RNN's depends on its nonlinearity
    _keyword_hints = {"proj_size": _UNSUPPORTED}

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        *,
        key=None,
        device=None,
        dtype=np.float32,
    ):
        self._build(self._kind, input_size, hidden_size, num_layers, bias, batch_first, dropout,
                    bidirectional, key, device, dtype)

    def _build(self, mode, input_size, hidden_size, num_layers, bias, batch_first, dropout,
               bidirectional, key, device, dtype):
        Module.__init__(self)
        who = self._who
        dtype = _param_dtype(who, dtype)
        _positive(who, input_size=input_size, hidden_size=hidden_size, num_layers=num_layers)
        dropout = _real(who, "dropout", dropout, 0.0, 1.0, high_open=True)
        for name, flag in (("bias", bias), ("batch_first", batch_first),
                           ("bidirectional", bidirectional)):
            _bool(who, name, flag)
        self._mode = mode
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        self.num_layers, self.bias = int(num_layers), bool(bias)
        self.batch_first, self.dropout = bool(batch_first), float(dropout)
        self.bidirectional = bool(bidirectional)
        dirs = 2 if bidirectional else 1
        g = F._GATES[mode] * hidden_size
        ks, own = _keys(key, 4 * num_layers * dirs)
        self._seed(own)
        ks = iter(ks)
        for layer in range(num_layers):
            n_in = input_size if layer == 0 else dirs * hidden_size
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                h = hidden_size
                setattr(self, "weight_ih" + sfx, _rnn_uniform(next(ks), (n_in, g), h, dtype))
                setattr(self, "weight_hh" + sfx, _rnn_uniform(next(ks), (h, g), h, dtype))
                for name in ("bias_ih", "bias_hh"):
                    k = next(ks)
                    self.register_parameter(
                        name + sfx, _rnn_uniform(k, (g,), h, dtype) if bias else None
                    )
        _place(self, device)

    def extra_repr(self) -> str:
        named = {}
        if self.num_layers != 1:
            named["num_layers"] = self.num_layers
        for name, default in (
            ("bias", True),
            ("batch_first", False),
            ("dropout", 0.0),
            ("bidirectional", False),
        ):
            if getattr(self, name) != default:
                named[name] = getattr(self, name)
        if self._mode == "rnn_relu":
            named["nonlinearity"] = "relu"
        return _args(self.input_size, self.hidden_size, **named)

    def _step(self, gi, state, w_hh, b_hh):
        if self._mode == "lstm":
            return F._lstm_step(gi, state[0], state[1], w_hh, b_hh)
        if self._mode == "gru":
            return F._gru_step(gi, state, w_hh, b_hh)
        return F._rnn_step(gi, state, w_hh, b_hh, self._mode[4:])

    def _initial(self, hx, x, unbatched):
        """The initial states as lists per (layer, direction), each ``(batch, hidden)``."""
        who, lstm = self._who, self._mode == "lstm"
        n_states = self.num_layers * (2 if self.bidirectional else 1)
        want = (n_states, x.shape[1], self.hidden_size)
        parts = hx if lstm else (hx,)
        if lstm and hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TypeError(f"{who}: hx must be a pair (h_0, c_0) or None")
        if hx is None:
            parts = (None, None) if lstm else (None,)
        out = []
        for p in parts:
            if p is None:
                p = tnp.zeros(want, dtype=x.dtype, device=x.device)
            else:
                p = F._like(p, x)
                if unbatched:
                    if p.ndim != 2:
                        raise ValueError(
                            f"{who}: for an unbatched input the hidden state must have shape "
                            f"{(want[0], want[2])}, got {p.shape}"
                        )
                    p = tnp.expand_dims(p, 1)
                if p.shape != want:
                    raise ValueError(
                        f"{who}: hidden state must have shape (num_layers * num_directions, "
                        f"batch, hidden_size) = {want}, got {p.shape}"
                    )
            out.append([p[i] for i in range(n_states)])
        if lstm:
            return [(h, c) for h, c in zip(*out)]
        return out[0]

    def forward(self, input, hx=None, key=None):
        """Run the whole sequence.

        Args:
            input: ``(L, N, input_size)``, ``(N, L, input_size)`` with ``batch_first``, or
                unbatched ``(L, input_size)``.
            hx: Initial hidden state ``(num_layers * num_directions, N, hidden_size)`` (or
                without ``N`` for an unbatched input), zeros by default; for LSTM a pair
                ``(h_0, c_0)``.
            key: Key for the dropout between layers (training mode, ``dropout > 0``);
                default :meth:`Module.next_key`.

        Returns:
            ``(output, h_n)`` (LSTM: ``(output, (h_n, c_n))``): ``output`` ``(L, N,
            num_directions * hidden_size)`` (batch first with ``batch_first``; no ``N`` for
            an unbatched input) holds the last layer's hidden state at every step (both
            directions concatenated); ``h_n`` the final state of every layer and direction,
            ordered ``layer * num_directions + direction``.

        Raises:
            TypeError: for a non-floating input. ValueError: for mismatched shapes or an
                empty sequence.
        """
        who = self._who
        x = F._floating(input, who)
        if x.ndim not in (2, 3):
            raise ValueError(
                f"{who}: input must have shape (L, N, input_size), (N, L, input_size) with "
                f"batch_first, or (L, input_size), got {x.shape}"
            )
        unbatched = x.ndim == 2
        if unbatched:
            x = tnp.expand_dims(x, 1)
        elif self.batch_first:
            x = tnp.swapaxes(x, 0, 1)
        if x.shape[-1] != self.input_size:
            raise ValueError(f"{who}: expected input_size {self.input_size}, got {x.shape}")
        if x.shape[0] == 0:
            raise ValueError(f"{who}: the sequence is empty (length 0)")
        states = self._initial(hx, x, unbatched)
        dirs = 2 if self.bidirectional else 1
        length = x.shape[0]
        finals = []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                p = {n: getattr(self, n + sfx) for n in ("weight_ih", "weight_hh")}
                b_ih, b_hh = getattr(self, "bias_ih" + sfx), getattr(self, "bias_hh" + sfx)
                gi = F._affine(x, p["weight_ih"], b_ih)  # every step's input projection at once
                state = states[layer * dirs + d]
                hs = [None] * length
                for t in range(length - 1, -1, -1) if d else range(length):
                    state = self._step(gi[t], state, p["weight_hh"], b_hh)
                    hs[t] = state[0] if self._mode == "lstm" else state
                outs.append(tnp.stack(hs, axis=0))
                finals.append(state)
            x = outs[0] if dirs == 1 else tnp.concatenate(outs, axis=-1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, key=key if key is not None else self.next_key())
        if self._mode == "lstm":
            h_n = tnp.stack([s[0] for s in finals], axis=0)
            c_n = tnp.stack([s[1] for s in finals], axis=0)
        else:
            h_n = tnp.stack(finals, axis=0)
        if unbatched:
            x = x[:, 0]
            h_n = h_n[:, 0]
            c_n = c_n[:, 0] if self._mode == "lstm" else None
        elif self.batch_first:
            x = tnp.swapaxes(x, 0, 1)
        return (x, (h_n, c_n)) if self._mode == "lstm" else (x, h_n)


_RNN_ARGS = """
    Args:
        input_size, hidden_size: Sizes.
        num_layers: Stacked layers (each reads the previous
            one's outputs).
        bias: Whether to add ``b_ih`` and ``b_hh``.
        batch_first: Inputs and outputs ``(N, L, features)`` instead of ``(L, N, features)``.
        dropout: Dropout probability on the outputs of every layer but the last (training
            mode only).
        bidirectional: Also run each layer backwards in time and concatenate the two.
        key, device, dtype: Init key (also seeds the dropout), parameter device and floating
            dtype.

    Parameters:
        Per layer ``k`` and direction (suffix ``_l{k}``, and ``_reverse`` for the backward
        one): ``weight_ih`` ``(in_k, G hidden_size)`` with ``in_0 = input_size`` and
        ``in_k = num_directions * hidden_size``, ``weight_hh`` ``(hidden_size, G
        hidden_size)``, ``bias_ih``, ``bias_hh`` ``(G hidden_size,)``; PyTorch's names and
        uniform init, weights transposed (this library's linear layout).
"""


class RNN(_RNNBase):
    __doc__ = (
        """Multi-layer Elman RNN over sequences (PyTorch's ``nn.RNN``), ``G = 1``: each step
    ``h_t = act(x_t W_ih + b_ih + h_{t-1} W_hh + b_hh)``, ``act`` tanh or relu
    (``nonlinearity``). ``forward(input, hx=None, key=None) -> (output, h_n)``.
"""
        + _RNN_ARGS
        + """
    References:
        Elman, "Finding Structure in Time", Cognitive Science 14(2), 1990.
    """
    )
    _who = "RNN"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        nonlinearity: str = "tanh",
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        *,
        key=None,
        device=None,
        dtype=np.float32,
    ):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        self._build("rnn_" + nonlinearity, input_size, hidden_size, num_layers, bias, batch_first,
                    dropout, bidirectional, key, device, dtype)
        self.nonlinearity = nonlinearity


class LSTM(_RNNBase):
    __doc__ = (
        """Multi-layer LSTM over sequences (PyTorch's ``nn.LSTM``), ``G = 4``, gates ``i, f, g,
    o`` (see :func:`~tapegrad.nn.functional.lstm_cell`).
    ``forward(input, hx=None, key=None) -> (output, (h_n, c_n))`` with ``hx = (h_0, c_0)``.
"""
        + _RNN_ARGS
        + """
    References:
        Hochreiter and Schmidhuber, "Long Short-Term Memory", Neural Computation, 1997.
    """
    )
    _who, _kind = "LSTM", "lstm"


class GRU(_RNNBase):
    __doc__ = (
        """Multi-layer gated recurrent unit over sequences (PyTorch's ``nn.GRU``), ``G = 3``,
    gates ``r, z, n`` (see :func:`~tapegrad.nn.functional.gru_cell`).
    ``forward(input, hx=None, key=None) -> (output, h_n)``.
"""
        + _RNN_ARGS
        + """
    References:
        Cho et al., "Learning Phrase Representations using RNN Encoder-Decoder for
        Statistical Machine Translation", EMNLP 2014.

    Example:
        >>> import tapegrad as tg
        >>> gru = tg.nn.GRU(4, 8, num_layers=2, batch_first=True, key=tg.random.key(0))
        >>> output, h_n = gru(tg.random.normal(tg.random.key(1), (3, 5, 4)))
        >>> output.shape, h_n.shape
        ((3, 5, 8), (2, 3, 8))
    """
    )
    _who, _kind = "GRU", "gru"
