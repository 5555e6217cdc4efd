"""Activations: ``relu``, ``sigmoid``, ``tanh``, ``softmax``, ``log_softmax``, ``gelu``, ``silu``,
``leaky_relu``, ``softplus``, ``erf``, and the fused elementwise primitives."""

from __future__ import annotations

from tapegrad import numpy as tnp
from tapegrad import ops as _ops
from tapegrad.core.tensor import Tensor
from tapegrad.nn._functional._common import _axis, _floating
from tapegrad.ops.nn import (  # the primitives, defined with their rules in tapegrad.ops
    LogSoftmax,
    Sigmoid,
    Softmax,
)

__all__ = [
    "relu",
    "sigmoid",
    "tanh",
    "softmax",
    "log_softmax",
    "gelu",
    "silu",
    "leaky_relu",
    "softplus",
    "erf",
    "Relu",
    "Tanh",
    "Sigmoid",
    "Softplus",
    "Erf",
    "Softmax",
    "LogSoftmax",
]

Softplus = _ops.Softplus  # pyright: ignore[reportAttributeAccessIssue]
Erf = _ops.Erf  # pyright: ignore[reportAttributeAccessIssue]
Relu = _ops.Relu
Tanh = _ops.Tanh  # pyright: ignore[reportAttributeAccessIssue]


# -- activations -----------------------------------------------------------------------------
def relu(x) -> Tensor:
    """Rectified linear unit ``max(x, 0)``.

    Args:
        x: Floating Tensor of any shape.

    Returns:
        Tensor of ``x``'s shape and dtype. The derivative at ``x == 0`` is taken as 0.

    Example:
        >>> import tapegrad as tg
        >>> tg.nn.functional.relu(tg.Tensor([-1.0, 0.0, 2.0]))
        Tensor([0., 0., 2.], dtype=float32)
    """
    return Relu.apply(_floating(x, "relu"))


def sigmoid(x) -> Tensor:
    """Logistic sigmoid ``1 / (1 + exp(-x))``, stable for any ``x`` (see :class:`Sigmoid`).

    Args:
        x: Floating Tensor of any shape.

    Returns:
        Tensor of ``x``'s shape and dtype, values in ``[0, 1]``.
    """
    return Sigmoid.apply(_floating(x, "sigmoid"))


def tanh(x) -> Tensor:
    """Hyperbolic tangent (derivative ``1 - tanh(x)**2``)."""
    return tnp.tanh(_floating(x, "tanh"))


def _axis_or_dim(axis, dim, who):
    if dim is not None:
        if axis != -1 and axis != dim:
            raise TypeError(f"{who}: give axis or dim (PyTorch's name), not both")
        return dim
    return axis


def softmax(x, axis: int = -1, *, dim: int | None = None) -> Tensor:
    """Softmax along ``axis``: ``exp(x_i) / sum_j exp(x_j)``, stable for large inputs.

    Args:
        x: Floating Tensor of shape ``(..., n, ...)``.
        axis: The axis to normalize (default the last). ``dim`` is accepted as an alias.

    Returns:
        Tensor of ``x``'s shape and dtype; entries along ``axis`` are positive and sum to 1.

    Raises:
        TypeError: for a non-floating ``x``. ValueError: for an out-of-range axis.
    """
    x = _floating(x, "softmax")
    return Softmax.apply(x, axis=_axis(x, _axis_or_dim(axis, dim, "softmax"), "softmax"))


def log_softmax(x, axis: int = -1, *, dim: int | None = None) -> Tensor:
    """Log-softmax along ``axis``: ``x_i - log sum_j exp(x_j)`` (PyTorch's ``dim`` accepted).

    More accurate than ``log(softmax(x))``: no underflow to ``log(0)``.

    Args:
        x: Floating Tensor of shape ``(..., n, ...)``.
        axis: The axis to normalize (default the last).

    Returns:
        Tensor of ``x``'s shape and dtype: log-probabilities in nats.

    Raises:
        TypeError: for a non-floating ``x``. ValueError: for an out-of-range axis.
    """
    x = _floating(x, "log_softmax")
    axis = _axis(x, _axis_or_dim(axis, dim, "log_softmax"), "log_softmax")
    return LogSoftmax.apply(x, axis=axis)


def erf(x) -> Tensor:
    """The error function, elementwise (see :class:`Erf`)."""
    return Erf.apply(_floating(x, "erf"))


def gelu(x, approximate: str = "tanh") -> Tensor:
    """Gaussian error linear unit ``x * Phi(x)`` (Hendrycks and Gimpel, 2016).

    Args:
        x: Floating Tensor of any shape.
        approximate: ``"tanh"`` (default, the tanh approximation)
            ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``, or ``"none"`` for the exact
            ``0.5 x (1 + erf(x / sqrt(2)))`` (PyTorch's default).

    Returns:
        Tensor of ``x``'s shape and dtype.

    Raises:
        ValueError: for another ``approximate``.

    References:
        Hendrycks and Gimpel, "Gaussian Error Linear Units (GELUs)", arXiv:1606.08415.
    """
    x = _floating(x, "gelu")
    if approximate in ("tanh", "none"):
        return _ops.Gelu.apply(x, approximate=approximate)
    raise ValueError(f"gelu: approximate must be 'tanh' or 'none', got {approximate!r}")


def silu(x) -> Tensor:
    """Sigmoid linear unit (swish) ``x * sigmoid(x)`` (Elfwing et al., 2018)."""
    x = _floating(x, "silu")
    return x * Sigmoid.apply(x)


def leaky_relu(x, negative_slope: float = 0.01) -> Tensor:
    """``x`` for ``x > 0`` else ``negative_slope * x``; derivative at 0 is ``negative_slope``."""
    x = _floating(x, "leaky_relu")
    return tnp.where(x > 0, x, negative_slope * x)


def softplus(x, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta x)) / beta``, linear (``x``) where ``beta x > threshold`` (PyTorch).

    Evaluated stably for every ``x`` (see :class:`Softplus`).

    Raises:
        ValueError: if ``beta <= 0``.
    """
    x = _floating(x, "softplus")
    if beta <= 0:
        raise ValueError(f"softplus: beta must be positive, got {beta}")
    bx = x * beta if beta != 1.0 else x
    sp = Softplus.apply(bx)
    if beta != 1.0:
        sp = sp / beta
    return tnp.where(bx > threshold, x, sp)
