"""The seeds' layers as thin :class:`~tapegrad.nn.Module` wrappers over
:mod:`tapegrad.nn.functional`.

Every constructor takes the seeds' arguments plus keyword-only ``key`` (a key from
:mod:`tapegrad.random` for reproducible initialization and dropout; without one, fresh OS
entropy is used) and ``dtype`` (float32 by default). Linear weights are ``(in, out)``;
convolution weights ``(C_out, C_in / groups, k, k)``.
"""

from __future__ import annotations

import numpy as np

from tapegrad import random as _random
from tapegrad.backend import backend_of
from tapegrad.nn import functional as F
from tapegrad.nn import init
from tapegrad.nn.module import Module
from tapegrad.tensor import Tensor

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
]


def _keys(key, n: int):
    """``n`` init keys and the module's own key, split from ``key`` (entropy when None)."""
    if key is None:
        key = _random.key(int(np.random.SeedSequence().entropy))
    ks = _random.split(key, n + 1)
    return ks[:n], ks[n]


def _positive(who, **sizes):
    for name, v in sizes.items():
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{who}: {name} must be a positive int, got {v!r}")


def _prob(who, name, p):
    if p is not None and not 0.0 <= p < 1.0:
        raise ValueError(f"{who}: {name} must lie in [0, 1), got {p}")


class Linear(Module):
    """Fully connected layer ``y = x W + b`` (the seeds' ``Linear``).

    Args:
        input_size: ``in_features``. output_size: ``out_features``.
        bias: Whether to add a bias.
        key: Init key. dtype: Parameter dtype.

    Parameters:
        weight ``(input_size, output_size)`` Xavier-uniform; bias ``(output_size,)`` zeros.

    Example:
        >>> import tapegrad as tg
        >>> linear = tg.nn.Linear(4, 2, key=tg.random.key(0))
        >>> linear(tg.random.normal(tg.random.key(1), (3, 4))).shape
        (3, 2)
    """

    def __init__(
        self,
        input_size: int,
        output_size: int,
        bias: bool = True,
        *,
        key=None,
        dtype=np.float32,
        **kwargs,
    ):
        super().__init__()
        _positive("Linear", input_size=input_size, output_size=output_size)
        (k,), own = _keys(key, 1)
        self._seed(own)
        self.input_size, self.output_size = int(input_size), int(output_size)
        self.weight = init.xavier_uniform(k, (input_size, output_size), dtype)
        self.register_parameter("bias", init.zeros(None, (output_size,), dtype) if bias else None)

    def forward(self, x):
        """``x`` of shape ``(..., input_size)`` -> ``(..., output_size)``."""
        return F.linear(x, self.weight, self.bias)


class Conv2d(Module):
    """2-D convolution over ``(N, C, H, W)`` inputs (the seeds' ``Conv2d``).

    Args:
        in_channels, out_channels: Channel counts. kernel_size: Int or pair.
        stride: Int or pair. padding_mode: ``"valid"`` or ``"same"`` (the seeds').
        bias: Whether to add a bias.
        padding: Optional int/pair padding overriding ``padding_mode`` (PyTorch style).
        dilation, groups: As in :func:`~tapegrad.nn.functional.conv2d`.
        key, dtype: Init key and parameter dtype.

    Parameters:
        weight ``(out_channels, in_channels / groups, kH, kW)`` Xavier-uniform; bias zeros.
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
        dtype=np.float32,
        **kwargs,
    ):
        super().__init__()
        _positive("Conv2d", in_channels=in_channels, out_channels=out_channels, groups=groups)
        if in_channels % groups or out_channels % groups:
            raise ValueError(
                f"Conv2d: groups={groups} must divide in_channels={in_channels} and "
                f"out_channels={out_channels}"
            )
        if padding is None and padding_mode not in ("valid", "same"):
            raise ValueError(
                f"Conv2d: padding_mode must be 'valid' or 'same', got {padding_mode!r}"
            )
        kh, kw = F._pair(kernel_size, "kernel_size", "Conv2d")
        (k,), own = _keys(key, 1)
        self._seed(own)
        self.stride, self.dilation, self.groups = stride, dilation, groups
        self.padding = padding_mode if padding is None else padding
        self.weight = init.xavier_uniform(k, (out_channels, in_channels // groups, kh, kw), dtype)
        self.register_parameter("bias", init.zeros(None, (out_channels,), dtype) if bias else None)

    def forward(self, x):
        """``x`` of shape ``(N, in_channels, H, W)`` -> ``(N, out_channels, H_out, W_out)``."""
        return F.conv2d(
            x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups
        )


class MaxPool2d(Module):
    """2-D max pooling (the seeds' ``MaxPool2d``); ``stride`` defaults to ``kernel_size``.

    ``padding_mode`` is ``"valid"`` or ``"same"``; an int ``padding`` overrides it.
    """

    def __init__(
        self, kernel_size, stride=None, padding_mode: str = "valid", *, padding=None, **kwargs
    ):
        super().__init__()
        if padding is None and padding_mode not in ("valid", "same"):
            raise ValueError(
                f"MaxPool2d: padding_mode must be 'valid' or 'same', got {padding_mode!r}"
            )
        self.kernel_size, self.stride = kernel_size, stride
        self.padding = padding_mode if padding is None else padding

    def forward(self, x):
        """``(N, C, H, W)`` -> ``(N, C, H_out, W_out)``."""
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding)


class BatchNorm(Module):
    """Batch normalization over all axes but the channel axis 1 (the seeds' ``BatchNorm``).

    Training mode normalizes with batch statistics and replaces the ``running_mean`` and
    ``running_var`` states with updated ones (in :func:`~tapegrad.nn.functional_call` the new
    state is returned instead); evaluation mode uses the running statistics.

    Args:
        input_size: Number of channels ``C``. momentum: Running-update weight.
        epsilon: Added to the variance.

    Parameters: weight (ones), bias (zeros), shape ``(C,)``.
    States: running_mean (zeros), running_var (ones), shape ``(C,)``.
    """

    def __init__(
        self,
        input_size: int,
        momentum: float = 0.1,
        epsilon: float = 1e-5,
        *,
        key=None,
        dtype=np.float32,
        **kwargs,
    ):
        super().__init__()
        _positive("BatchNorm", input_size=input_size)
        self.momentum, self.epsilon = float(momentum), float(epsilon)
        self.weight = init.ones(None, (input_size,), dtype)
        self.bias = init.zeros(None, (input_size,), dtype)
        self.register_state("running_mean", init.zeros(None, (input_size,), dtype))
        self.register_state("running_var", init.ones(None, (input_size,), dtype))

    def forward(self, x):
        """``(N, C)`` or ``(N, C, ...)`` -> same shape."""
        y, mean, var = F.batch_norm(
            x,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            training=self.training,
            momentum=self.momentum,
            eps=self.epsilon,
        )
        if self.training:
            self.update_state("running_mean", mean)
            self.update_state("running_var", var)
        return y


class LayerNorm(Module):
    """Layer normalization over the last axis (the seeds' ``LayerNorm``).

    Parameters: weight (ones) and bias (zeros) of shape ``(input_size,)``.
    """

    def __init__(
        self, input_size: int, epsilon: float = 1e-5, *, key=None, dtype=np.float32, **kwargs
    ):
        super().__init__()
        _positive("LayerNorm", input_size=input_size)
        self.input_size, self.epsilon = int(input_size), float(epsilon)
        self.weight = init.ones(None, (input_size,), dtype)
        self.bias = init.zeros(None, (input_size,), dtype)

    def forward(self, x):
        """``(..., input_size)`` -> same shape."""
        return F.layer_norm(x, (self.input_size,), self.weight, self.bias, self.epsilon)


class Dropout(Module):
    """Inverted dropout with probability ``p`` in training mode; identity in eval mode.

    ``forward(x, key=None)``: the key defaults to :meth:`Module.next_key` (split off
    ``functional_call``'s key, or the layer's own key in stateful use).
    """

    def __init__(self, p: float = 0.5, *, key=None, **kwargs):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must lie in [0, 1], got {p}")
        self.p = float(p)
        if key is not None:
            self._seed(key)

    def forward(self, x, key=None):
        """Apply dropout (training mode, ``p > 0``) or return ``x``."""
        if not self.training or self.p == 0.0:
            return x
        return F.dropout(x, self.p, key=key if key is not None else self.next_key())


class Embedding(Module):
    """Lookup table of ``input_size`` vectors of size ``embedding_size`` (the seeds').

    Parameters: weight ``(input_size, embedding_size)``, standard normal (PyTorch's init).
    """

    def __init__(
        self, input_size: int, embedding_size: int, *, key=None, dtype=np.float32, **kwargs
    ):
        super().__init__()
        _positive("Embedding", input_size=input_size, embedding_size=embedding_size)
        (k,), own = _keys(key, 1)
        self._seed(own)
        self.weight = init.normal(k, (input_size, embedding_size), dtype)

    def forward(self, x):
        """Integer indices of any shape -> ``x.shape + (embedding_size,)``."""
        return F.embedding(x, self.weight)


class ResidualBlock(Module):
    """Residual block ``relu(F(x) + shortcut(x))`` (He et al., 2016, arXiv:1512.03385).

    ``F`` is conv3x3(stride) -> BatchNorm -> relu -> conv3x3 -> BatchNorm; the shortcut is
    the identity, or conv1x1(stride) -> BatchNorm when the stride or channel count changes.

    Args:
        in_channels, out_channels: Channel counts. stride: Stride of the first convolution.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        stride: int = 1,
        *,
        key=None,
        dtype=np.float32,
        **kwargs,
    ):
        super().__init__()
        _positive(
            "ResidualBlock", in_channels=in_channels, out_channels=out_channels, stride=stride
        )
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


class RecurrentBlock(Module):
    """Elman RNN ``h_t = tanh(x_t W_ih + b_ih + h_{t-1} W_hh)`` (the seeds' ``RecurrentBlock``).

    Returns the final hidden state ``(batch, hidden_size)``, or ``h_T W_ho + b_ho`` of shape
    ``(batch, output_size)`` when ``output_size`` is given. With ``dropout_prob``, dropout is
    applied (training mode only) to the final hidden state before it is returned or projected.

    Args:
        input_size, hidden_size: Sizes. output_size: Optional projection size.
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
        dtype=np.float32,
        **kwargs,
    ):
        super().__init__()
        _positive("RecurrentBlock", input_size=input_size, hidden_size=hidden_size)
        _prob("RecurrentBlock", "dropout_prob", dropout_prob)
        ks, own = _keys(key, 3)
        self._seed(own)
        self.hidden_size = int(hidden_size)
        self.input_to_hidden = Linear(input_size, hidden_size, key=ks[0], dtype=dtype)
        self.hidden_to_hidden = Linear(hidden_size, hidden_size, bias=False, key=ks[1], dtype=dtype)
        if output_size is not None:
            self.hidden_to_output = Linear(hidden_size, output_size, key=ks[2], dtype=dtype)
        self.dropout_prob = dropout_prob

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
    """LSTM (the seeds' ``LongShortTermMemoryBlock``); returns ``(output, cell_state)``.

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
        dtype=np.float32,
        **kwargs,
    ):
        super().__init__()
        _positive("LongShortTermMemoryBlock", input_size=input_size, hidden_size=hidden_size)
        _prob("LongShortTermMemoryBlock", "dropout_prob", dropout_prob)
        ks, own = _keys(key, 3)
        self._seed(own)
        self.hidden_size = int(hidden_size)
        self.input_to_gates = Linear(input_size, 4 * hidden_size, key=ks[0], dtype=dtype)
        self.hidden_to_gates = Linear(
            hidden_size, 4 * hidden_size, bias=False, key=ks[1], dtype=dtype
        )
        if output_size is not None:
            self.hidden_to_output = Linear(hidden_size, output_size, key=ks[2], dtype=dtype)
        self.dropout_prob = dropout_prob

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
    """Scaled dot-product attention with post-softmax dropout in training mode (the seeds').

    ``forward(query, key, value, mask=None, is_causal=False, dropout_key=None)``; see
    :func:`~tapegrad.nn.functional.scaled_dot_product_attention` for the mask contract.
    """

    def __init__(self, dropout_prob: float = 0.1, *, key=None, **kwargs):
        super().__init__()
        _prob("ScaledDotProductAttention", "dropout_prob", dropout_prob)
        self.dropout_prob = float(dropout_prob)
        if key is not None:
            self._seed(key)

    def forward(self, query, key, value, mask=None, is_causal: bool = False, dropout_key=None):
        """``(..., Lq, E)``, ``(..., Lk, E)``, ``(..., Lk, Ev)`` -> ``(..., Lq, Ev)``."""
        p = self.dropout_prob if self.training else 0.0
        if p > 0 and dropout_key is None:
            dropout_key = self.next_key()
        return F.scaled_dot_product_attention(
            query, key, value, mask, dropout_p=p, is_causal=is_causal, dropout_key=dropout_key
        )


class MultiHeadAttention(Module):
    """Multi-head attention with learned projections (the seeds' ``MultiHeadAttention``).

    Submodules ``query``, ``key``, ``value``, ``output``: Linear ``(hidden_size,
    hidden_size)``. ``forward(query, key, value, mask=None, is_causal=False,
    dropout_key=None)`` maps ``(B, L, hidden_size)`` inputs to ``(B, Lq, hidden_size)``.
    """

    def __init__(
        self,
        num_heads: int,
        hidden_size: int,
        dropout_prob: float = 0.1,
        *,
        key=None,
        dtype=np.float32,
        **kwargs,
    ):
        super().__init__()
        _positive("MultiHeadAttention", num_heads=num_heads, hidden_size=hidden_size)
        if hidden_size % num_heads:
            raise ValueError(
                f"MultiHeadAttention: num_heads={num_heads} must divide hidden_size={hidden_size}"
            )
        _prob("MultiHeadAttention", "dropout_prob", dropout_prob)
        ks, own = _keys(key, 4)
        self._seed(own)
        self.num_heads, self.dropout_prob = int(num_heads), float(dropout_prob)
        for name, k in zip(("query", "key", "value", "output"), ks):
            setattr(self, name, Linear(hidden_size, hidden_size, key=k, dtype=dtype))

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
