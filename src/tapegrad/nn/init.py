"""Parameter initializers: pure functions of a key and a shape, returning new Tensors.

Each takes a key from :mod:`tapegrad.random` first (``xavier_uniform(key, shape)``); ``shape``
may also be a Tensor, whose shape and dtype are then used (the functional form of PyTorch's
``xavier_uniform_(tensor)``, which re-initializes its argument in place).

Fans: for a 2-D weight ``(in_features, out_features)`` (the layout of :func:`linear`),
``fan_in = shape[0]`` and ``fan_out = shape[1]``; for a convolution weight
``(C_out, C_in / groups, *kernel)``, ``fan_in = shape[1] * prod(kernel)`` and
``fan_out = shape[0] * prod(kernel)`` (PyTorch). Xavier uses only their sum, so it agrees with
:func:`compute_in_out_tensor_count` either way.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tapegrad import random as _random
from tapegrad.core.tensor import Tensor

__all__ = [
    "xavier_uniform",
    "xavier_normal",
    "kaiming_uniform",
    "kaiming_normal",
    "zeros",
    "ones",
    "normal",
    "uniform",
    "orthogonal",
    "trunc_normal",
    "compute_in_out_tensor_count",
    "calculate_gain",
    "mlp",
]

#: The docstrings' Args and Returns of the initializers with a ``gain`` (their
#: ``__GAIN_ARGS__`` line).
_GAIN_ARGS = """    Args:
        key: A key.
        shape: Tuple (>= 2 dims) or a Tensor (its shape and dtype).
        dtype: Floating dtype (default float32, or the Tensor's).
        gain: Scale factor (see :func:`calculate_gain`).

    Returns:
        A new Tensor of ``shape``.
"""


def _shape_dtype(shape, dtype):
    if isinstance(shape, Tensor):
        return tuple(shape.shape), np.dtype(dtype if dtype is not None else shape.dtype)
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    return tuple(int(s) for s in shape), np.dtype(dtype if dtype is not None else np.float32)


def compute_in_out_tensor_count(tensor) -> tuple[int, int]:
    """Fan counts ``(shape[0] * rf, shape[1] * rf)`` with ``rf = prod(shape[2:])``.

    Args:
        tensor: A Tensor, array or shape tuple with at least 2 dims.

    Returns:
        ``(input_tensor_count, output_tensor_count)``: ``(5, 10)`` for ``(5, 10)`` and
        ``(144, 27)`` for ``(16, 3, 3, 3)``.

    Raises:
        ValueError: for fewer than 2 dims.
    """
    shape = tuple(tensor.shape) if hasattr(tensor, "shape") else tuple(tensor)
    if len(shape) < 2:
        raise ValueError(f"compute_in_out_tensor_count: need at least 2 dims, got shape {shape}")
    rf = math.prod(shape[2:])
    return shape[0] * rf, shape[1] * rf


def _fans(shape, who) -> tuple[int, int]:
    if len(shape) < 2:
        raise ValueError(f"{who}: fans need a shape with at least 2 dims, got {shape}")
    if len(shape) == 2:
        return shape[0], shape[1]
    rf = math.prod(shape[2:])
    return shape[1] * rf, shape[0] * rf


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """Recommended gain for ``nonlinearity`` (PyTorch's table): linear/sigmoid 1, tanh 5/3,
    relu sqrt(2), leaky_relu sqrt(2 / (1 + slope^2)), selu 3/4.

    Raises:
        ValueError: for an unknown nonlinearity.
    """
    if nonlinearity in ("linear", "conv2d", "sigmoid", "identity"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3.0
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1.0 + slope * slope))
    if nonlinearity == "selu":
        return 0.75
    raise ValueError(f"calculate_gain: unknown nonlinearity {nonlinearity!r}")


def xavier_uniform(key, shape, dtype=None, gain: float = 1.0) -> Tensor:
    """Glorot/Xavier uniform: ``U(-a, a)`` with ``a = gain * sqrt(6 / (fan_in + fan_out))``.

    __GAIN_ARGS__

    References:
        Glorot and Bengio, "Understanding the difficulty of training deep feedforward neural
        networks", AISTATS 2010.

    Example:
        >>> import tapegrad as tg
        >>> w = tg.nn.init.xavier_uniform(tg.random.key(0), (3, 4))
        >>> bool(abs(w.numpy()).max() <= (6 / 7) ** 0.5)
        True
    """
    shape, dtype = _shape_dtype(shape, dtype)
    fan_in, fan_out = _fans(shape, "xavier_uniform")
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return _random.uniform(key, shape, dtype, -a, a)


def xavier_normal(key, shape, dtype=None, gain: float = 1.0) -> Tensor:
    """Glorot/Xavier normal: ``N(0, std^2)`` with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    shape, dtype = _shape_dtype(shape, dtype)
    fan_in, fan_out = _fans(shape, "xavier_normal")
    return _random.normal(key, shape, dtype, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


def _kaiming_std(shape, a, mode, nonlinearity, who):
    fan_in, fan_out = _fans(shape, who)
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"{who}: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan = fan_in if mode == "fan_in" else fan_out
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform(
    key, shape, dtype=None, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu"
) -> Tensor:
    """He/Kaiming uniform: ``U(-b, b)`` with ``b = gain * sqrt(3 / fan)`` (PyTorch's defaults).

    References:
        He et al., "Delving Deep into Rectifiers", ICCV 2015.
    """
    shape, dtype = _shape_dtype(shape, dtype)
    b = math.sqrt(3.0) * _kaiming_std(shape, a, mode, nonlinearity, "kaiming_uniform")
    return _random.uniform(key, shape, dtype, -b, b)


def kaiming_normal(
    key, shape, dtype=None, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu"
) -> Tensor:
    """He/Kaiming normal: ``N(0, std^2)`` with ``std = gain / sqrt(fan)``."""
    shape, dtype = _shape_dtype(shape, dtype)
    std = _kaiming_std(shape, a, mode, nonlinearity, "kaiming_normal")
    return _random.normal(key, shape, dtype, 0.0, std)


def zeros(key, shape, dtype=None) -> Tensor:
    """All zeros (``key`` is accepted for a uniform signature and not used)."""
    shape, dtype = _shape_dtype(shape, dtype)
    return Tensor(np.zeros(shape, dtype))


def ones(key, shape, dtype=None) -> Tensor:
    """All ones (``key`` is accepted for a uniform signature and not used)."""
    shape, dtype = _shape_dtype(shape, dtype)
    return Tensor(np.ones(shape, dtype))


def normal(key, shape, dtype=None, mean: float = 0.0, std: float = 1.0) -> Tensor:
    """``N(mean, std^2)`` samples."""
    shape, dtype = _shape_dtype(shape, dtype)
    return _random.normal(key, shape, dtype, mean, std)


def uniform(key, shape, dtype=None, a: float = 0.0, b: float = 1.0) -> Tensor:
    """``U(a, b)`` samples."""
    shape, dtype = _shape_dtype(shape, dtype)
    return _random.uniform(key, shape, dtype, a, b)


def orthogonal(key, shape, dtype=None, gain: float = 1.0) -> Tensor:
    """A (semi-)orthogonal matrix, scaled by ``gain`` (PyTorch's ``orthogonal_``).

    The shape is viewed as ``(rows, cols) = (shape[0], prod(shape[1:]))``; a standard normal
    matrix of that shape (of its transpose when ``rows < cols``) is factored ``Q R`` and
    ``Q``'s columns are multiplied by the signs of ``R``'s diagonal, which makes ``Q`` a
    sample from the Haar (uniform) distribution over orthogonal matrices (Mezzadri). So the
    columns are orthonormal when ``rows >= cols`` (``W^T W = gain**2 I``), else the rows
    (``W W^T = gain**2 I``).

    __GAIN_ARGS__

    Raises:
        ValueError: for fewer than 2 dims.

    References:
        Saxe, McClelland and Ganguli, "Exact solutions to the nonlinear dynamics of learning
        in deep linear neural networks", ICLR 2014; Mezzadri, "How to generate random
        matrices from the classical compact groups", Notices of the AMS 54(5), 2007.

    Example:
        >>> import numpy as np, tapegrad as tg
        >>> w = tg.nn.init.orthogonal(tg.random.key(0), (5, 3), np.float64).numpy()
        >>> bool(np.allclose(w.T @ w, np.eye(3)))
        True
    """
    shape, dtype = _shape_dtype(shape, dtype)
    if len(shape) < 2:
        raise ValueError(f"orthogonal: needs a shape with at least 2 dims, got {shape}")
    rows, cols = shape[0], math.prod(shape[1:])
    if rows * cols == 0:
        return Tensor(np.zeros(shape, dtype))
    a = _random.normal(key, (max(rows, cols), min(rows, cols)), np.float64).numpy()
    q, r = np.linalg.qr(a)
    q = q * np.where(np.diagonal(r) < 0, -1.0, 1.0)
    if rows < cols:
        q = q.T
    return Tensor((gain * q).reshape(shape).astype(dtype))


for _f in (xavier_uniform, orthogonal):
    _f.__doc__ = _f.__doc__.replace("    __GAIN_ARGS__\n", _GAIN_ARGS)  # pyright: ignore[reportOptionalMemberAccess]
del _f


def trunc_normal(
    key, shape, dtype=None, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0
) -> Tensor:
    """Samples of ``N(mean, std**2)`` conditioned on ``[a, b]`` (PyTorch's ``trunc_normal_``).

    ``a`` and ``b`` are absolute bounds, not multiples of ``std`` (as in PyTorch): the
    default ``[-2, 2]`` is two standard deviations only when ``std == 1``. Drawn by inverting
    the truncated normal's CDF at uniform samples (``scipy.stats.truncnorm``), which stays
    accurate far in the tails; every value lies in ``[a, b]``.

    Args:
        key: A key.
        shape: Tuple or int, or a Tensor (its shape and dtype).
        dtype: Floating dtype (default float32, or the Tensor's).
        mean: Mean of the normal before truncation.
        std: Its standard deviation, ``> 0``.
        a, b: Bounds, ``a < b``.

    Returns:
        A new Tensor of ``shape``.

    Raises:
        ValueError: for ``std <= 0`` or ``a >= b``.

    Example:
        >>> import tapegrad as tg
        >>> w = tg.nn.init.trunc_normal(tg.random.key(0), (1000,), std=0.02, a=-0.04, b=0.04)
        >>> bool(abs(w.numpy()).max() <= 0.04)
        True
    """
    from scipy.stats import truncnorm

    shape, dtype = _shape_dtype(shape, dtype)
    if not std > 0:
        raise ValueError(f"trunc_normal: std must be positive, got {std}")
    if not a < b:
        raise ValueError(f"trunc_normal: need a < b, got a={a}, b={b}")
    alpha, beta = (a - mean) / std, (b - mean) / std
    u = _random.uniform(key, shape, np.float64).numpy()
    z = truncnorm.ppf(u, alpha, beta)
    x = np.clip(mean + std * z, a, b)
    return Tensor(x.astype(dtype))


def mlp(key, sizes, dtype: Any = np.float32) -> list:
    """Parameters of a multilayer perceptron as a pure pytree.

    Args:
        key: A key (split once per layer).
        sizes: Layer widths ``(in, hidden..., out)``, at least two.
        dtype: Floating dtype.

    Returns:
        List of ``{"weight": (sizes[i], sizes[i+1]) Xavier-uniform, "bias": zeros}`` dicts,
        for :func:`tapegrad.nn.functional.mlp`.

    Raises:
        ValueError: for fewer than two sizes.
    """
    sizes = tuple(int(s) for s in sizes)
    if len(sizes) < 2:
        raise ValueError(f"init.mlp: need at least input and output sizes, got {sizes}")
    keys = _random.split(key, len(sizes) - 1)
    return [
        {"weight": xavier_uniform(k, (a, b), dtype), "bias": zeros(None, (b,), dtype)}
        for k, a, b in zip(keys, sizes[:-1], sizes[1:])
    ]
