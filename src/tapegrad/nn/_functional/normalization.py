"""Normalization: ``layer_norm``, ``batch_norm``, ``rms_norm``, ``group_norm``."""

from __future__ import annotations

import math

import numpy as np

from tapegrad import numpy as tnp
from tapegrad.core import dtypes as _tg_dtypes
from tapegrad.core.tensor import Tensor
from tapegrad.nn._functional._common import _floating, _like

__all__ = [
    "layer_norm",
    "rms_norm",
    "group_norm",
    "batch_norm",
]


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5) -> Tensor:
    """Layer normalization over the trailing ``normalized_shape`` axes (Ba et al., 2016).

    ``y = (x - mean) / sqrt(var + eps) * weight + bias`` with the biased variance.

    Args:
        input: Floating Tensor of shape ``(..., *normalized_shape)``.
        normalized_shape: Int or tuple: the trailing shape to normalize over.
        weight, bias: Optional Tensors of shape ``normalized_shape``.
        eps: Added to the variance.

    Returns:
        Tensor of ``input``'s shape and dtype.

    Raises:
        ValueError: if the trailing shape of ``input`` differs from ``normalized_shape``.
    """
    x = _floating(input, "layer_norm")
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if len(ns) == 0 or x.shape[x.ndim - len(ns) :] != ns or len(ns) > x.ndim:
        raise ValueError(
            f"layer_norm: input of shape {x.shape} does not end with normalized_shape {ns}"
        )
    axes = tuple(range(x.ndim - len(ns), x.ndim))
    xc = x - tnp.mean(x, axis=axes, keepdims=True)
    var = tnp.mean(xc * xc, axis=axes, keepdims=True)
    y = xc / tnp.sqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def batch_norm(
    input,
    running_mean=None,
    running_var=None,
    weight=None,
    bias=None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
):
    """Batch normalization over every axis but the channel axis 1 (Ioffe and Szegedy, 2015).

    In training, normalizes with the batch mean and (biased) variance and returns updated
    running statistics ``(1 - momentum) * running + momentum * batch`` (the running variance
    uses the unbiased batch variance, as PyTorch). In evaluation, normalizes with the running
    statistics and returns them unchanged. Nothing is updated in place.

    Args:
        input: Floating Tensor of shape ``(N, C)`` or ``(N, C, *spatial)``.
        running_mean, running_var: Tensors of shape ``(C,)``; required when not training, may
            be None in training (then None is returned for them).
        weight, bias: Optional Tensors of shape ``(C,)``.
        training: Batch statistics (True) or running statistics (False).
        momentum: Weight of the batch statistics in the running update.
        eps: Added to the variance.

    Returns:
        ``(output, new_running_mean, new_running_var)``; the running statistics carry no
        gradient.

    Raises:
        ValueError: for an input with fewer than 2 dims, missing running statistics in eval,
            or a single value per channel in training.
    """
    who = "batch_norm"
    x = _floating(input, who)
    if x.ndim < 2:
        raise ValueError(f"{who}: input must have shape (N, C, ...), got {x.shape}")
    c = x.shape[1]
    axes = (0,) + tuple(range(2, x.ndim))
    bshape = (1, c) + (1,) * (x.ndim - 2)
    for name, t in (
        ("running_mean", running_mean),
        ("running_var", running_var),
        ("weight", weight),
        ("bias", bias),
    ):
        if t is not None and tuple(t.shape) != (c,):
            raise ValueError(f"{who}: {name} must have shape ({c},), got {tuple(t.shape)}")
    if training:
        n = x.size // c
        if n <= 1:
            raise ValueError(
                f"{who}: training needs more than one value per channel, got input {x.shape}"
            )
        mean = tnp.mean(x, axis=axes, keepdims=True)
        xc = x - mean
        var = tnp.mean(xc * xc, axis=axes, keepdims=True)
        y = xc / tnp.sqrt(var + eps)
        new_mean, new_var = running_mean, running_var
        if running_mean is not None:
            bm = tnp.stop_gradient(tnp.reshape(mean, (c,)))
            new_mean = (1 - momentum) * running_mean + momentum * tnp.astype(bm, running_mean.dtype)
        if running_var is not None:
            bv = tnp.stop_gradient(tnp.reshape(var, (c,))) * (n / (n - 1))
            new_var = (1 - momentum) * running_var + momentum * tnp.astype(bv, running_var.dtype)
    else:
        if running_mean is None or running_var is None:
            raise ValueError(
                f"{who}: evaluation (training=False) needs running_mean and running_var"
            )
        rm = tnp.reshape(_like(running_mean, x), bshape)
        rv = tnp.reshape(_like(running_var, x), bshape)
        y = (x - rm) / tnp.sqrt(rv + eps)
        new_mean, new_var = running_mean, running_var
    if weight is not None:
        y = y * tnp.reshape(weight, bshape)
    if bias is not None:
        y = y + tnp.reshape(bias, bshape)
    return y, new_mean, new_var


def _normalized_shape(x: Tensor, normalized_shape, who: str) -> tuple:
    if isinstance(normalized_shape, (int, np.integer)):
        ns = (int(normalized_shape),)
    else:
        ns = tuple(int(s) for s in normalized_shape)
    if len(ns) == 0 or len(ns) > x.ndim or x.shape[x.ndim - len(ns) :] != ns:
        raise ValueError(f"{who}: input of shape {x.shape} does not end with normalized_shape {ns}")
    if 0 in ns:
        raise ValueError(f"{who}: normalized_shape {ns} is empty; there is nothing to normalize")
    return ns


def rms_norm(input, normalized_shape, weight=None, eps: float | None = None) -> Tensor:
    """Root-mean-square layer normalization (``torch.nn.functional.rms_norm``).

    ``y = x / sqrt(mean(x**2) + eps) * weight``, the mean over the trailing
    ``normalized_shape`` axes: layer normalization without re-centering and without a bias.

    Args:
        input: Floating Tensor of shape ``(..., *normalized_shape)``.
        normalized_shape: Int or tuple: the trailing shape to normalize over.
        weight: Optional Tensor of shape ``normalized_shape`` (the gain).
        eps: Added to the mean square; ``None`` (PyTorch's default) means the machine
            epsilon of ``input``'s dtype (``tnp.finfo(dtype).eps``).

    Returns:
        Tensor of ``input``'s shape and dtype.

    Raises:
        TypeError: for non-floating input.
        ValueError: if ``input`` does not end with ``normalized_shape`` (or that is empty) or
            ``weight`` has another shape.

    References:
        Zhang and Sennrich, "Root Mean Square Layer Normalization", NeurIPS 2019.

    Example:
        >>> import tapegrad as tg
        >>> y = tg.nn.functional.rms_norm(tg.Tensor([[3.0, 4.0]]), 2, eps=0.0)
        >>> [round(v, 4) for v in y.numpy()[0].tolist()]
        [0.8485, 1.1314]
    """
    who = "rms_norm"
    x = _floating(input, who)
    ns = _normalized_shape(x, normalized_shape, who)
    if eps is None:
        eps = float(_tg_dtypes.finfo(x.dtype).eps)
    axes = tuple(range(x.ndim - len(ns), x.ndim))
    y = x / tnp.sqrt(tnp.mean(x * x, axis=axes, keepdims=True) + eps)
    if weight is not None:
        weight = tnp.asarray(weight)
        if tuple(weight.shape) != ns:
            raise ValueError(f"{who}: weight must have shape {ns}, got {tuple(weight.shape)}")
        y = y * weight
    return y


def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5) -> Tensor:
    """Group normalization (``torch.nn.functional.group_norm``): normalize each sample over
    groups of ``C / num_groups`` channels and all spatial positions.

    ``y = (x - mean_g) / sqrt(var_g + eps) * weight[c] + bias[c]`` with the biased variance of
    each (sample, group). Independent of the batch size; ``num_groups = 1`` is layer norm over
    ``(C, *spatial)``, ``num_groups = C`` is instance norm.

    Args:
        input: Floating Tensor of shape ``(N, C, *spatial)``.
        num_groups: Number of groups; divides ``C``.
        weight, bias: Optional Tensors of shape ``(C,)``.
        eps: Added to the variance.

    Returns:
        Tensor of ``input``'s shape and dtype.

    Raises:
        TypeError: for non-floating input.
        ValueError: for fewer than 2 dims, ``num_groups`` not dividing ``C``, an empty
            spatial axis, or a weight or bias of another shape.

    References:
        Wu and He, "Group Normalization", ECCV 2018.
    """
    who = "group_norm"
    x = _floating(input, who)
    if x.ndim < 2:
        raise ValueError(f"{who}: input must have shape (N, C, ...), got {x.shape}")
    n, c = x.shape[:2]
    if (
        isinstance(num_groups, bool)
        or not isinstance(num_groups, (int, np.integer))
        or num_groups < 1
        or c % num_groups
    ):
        raise ValueError(
            f"{who}: num_groups must be a positive int dividing the {c} channels, got "
            f"{num_groups!r}"
        )
    g = int(num_groups)
    if 0 in x.shape[2:]:
        raise ValueError(f"{who}: input {x.shape} has an empty spatial axis; groups would be empty")
    xg = tnp.reshape(x, (n, g, (c // g) * math.prod(x.shape[2:])))
    mean = tnp.mean(xg, axis=-1, keepdims=True)
    xc = xg - mean
    var = tnp.mean(xc * xc, axis=-1, keepdims=True)
    y = tnp.reshape(xc / tnp.sqrt(var + eps), x.shape)
    bshape = (1, c) + (1,) * (x.ndim - 2)
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(tnp.asarray(t).shape) != (c,):
            raise ValueError(f"{who}: {name} must have shape ({c},), got {tuple(t.shape)}")
    if weight is not None:
        y = y * tnp.reshape(tnp.asarray(weight), bshape)
    if bias is not None:
        y = y + tnp.reshape(tnp.asarray(bias), bshape)
    return y
