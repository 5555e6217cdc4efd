"""The implementation of :mod:`tapegrad.nn.functional` (which re-exports it with the functions
of its sibling modules): activations, losses, linear, convolution, pooling, normalization,
dropout, embedding, attention, recurrent cells, windows."""

from __future__ import annotations

import math

import numpy as np

from tapegrad import numpy as tnp
from tapegrad import ops as _ops
from tapegrad import random as _random
from tapegrad.core import dtypes as _tg_dtypes
from tapegrad.core._keywords import strict_keywords
from tapegrad.core.tensor import Tensor, all_values
from tapegrad.ops._registry import bool_arg
from tapegrad.ops.nn import (  # the primitives, defined with their rules in tapegrad.ops
    BinaryCrossEntropy,
    BinaryCrossEntropyWithLogits,
    Conv2d,
    Conv2dInputGrad,
    Conv2dWeightGrad,
    CrossEntropy,
    CrossEntropyGrad,
    Gelu,
    HingeLoss,
    Linear,
    LogSoftmax,
    MaxPool2d,
    MaxPool2dGather,
    MaxPool2dGrad,
    MeanSquaredLoss,
    ScaledDotProductAttention,
    Sigmoid,
    Softmax,
    _check_class_targets,
    _check_loss_shapes,
    _const,
    _out_hw,
    _TakeRows,
    _targets_all_valid,
)

__all__ = [
    # activations
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
    # losses
    "mean_squared_loss",
    "mse_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "cross_entropy",
    "hinge_loss",
    "nll_loss",
    "l1_loss",
    "huber_loss",
    "smooth_l1_loss",
    "kl_div",
    # layers
    "linear",
    "mlp",
    "conv1d",
    "conv2d",
    "adaptive_avg_pool2d",
    "extract_windows",
    "dropout",
    "layer_norm",
    "rms_norm",
    "group_norm",
    "batch_norm",
    "embedding",
    "rnn_cell",
    "lstm_cell",
    "gru_cell",
    "scaled_dot_product_attention",
    "multi_head_attention",
    # fused primitives (Function classes)
    "Relu",
    "Gelu",
    "Tanh",
    "Sigmoid",
    "Softplus",
    "Erf",
    "Softmax",
    "LogSoftmax",
    "CrossEntropy",
    "CrossEntropyGrad",
    "BinaryCrossEntropy",
    "BinaryCrossEntropyWithLogits",
    "HingeLoss",
    "MeanSquaredLoss",
    "Linear",
    "Conv2d",
    "Conv2dInputGrad",
    "Conv2dWeightGrad",
    "MaxPool2d",
    "MaxPool2dGrad",
    "MaxPool2dGather",
    "ScaledDotProductAttention",
]

_REDUCTIONS = ("none", "mean", "sum")


# -- helpers ---------------------------------------------------------------------------------
def _floating(x, who: str, name: str = "input") -> Tensor:
    x = tnp.asarray(x)
    if x.dtype.kind not in "fV":
        raise TypeError(f"{who}: {name} must be a floating Tensor, got dtype {x.dtype}")
    return x


def _like(value, ref: Tensor, who: str = "tapegrad.nn.functional", name: str = "target"
          ) -> Tensor:
    """``value`` (Tensor/array/list/number) as a Tensor of ``ref``'s floating dtype.

    Raises:
        TypeError: for a value that is not numeric (a string, an object), naming ``who`` and
            ``name``.
    """
    if isinstance(value, Tensor):
        return value if value.dtype == ref.dtype else tnp.astype(value, ref.dtype)
    if hasattr(value, "__cuda_array_interface__"):  # a CuPy array
        return tnp.astype(Tensor(value), ref.dtype)
    try:
        arr = np.asarray(value)
        if arr.dtype.kind not in "biufc":
            raise TypeError(f"dtype {arr.dtype}")
        arr = arr.astype(ref.dtype)
    except (TypeError, ValueError) as e:
        raise TypeError(
            f"{who}: {name} must be numeric (a Tensor, array, list or number), got "
            f"{type(value).__name__} ({e})"
        ) from None
    return Tensor(arr, device=ref.device)


def _real_arg(value, who: str, name: str) -> float:
    """A real-number parameter (``delta``, ``label_smoothing``) as a float.

    Raises:
        TypeError: for a non-number (a string, None, a bool, a Tensor).
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer,
                                                                      np.floating)):
        raise TypeError(f"{who}: {name} must be a real number, got {value!r} "
                        f"({type(value).__name__})")
    return float(value)


def _int_arg(value, who: str, name: str) -> int:
    """An integer parameter (``ignore_index``) as an int (an integral float is accepted, as
    integral float targets are).

    Raises:
        TypeError: for a non-integer (a fractional float, a string, None, a bool).
    """
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{who}: {name} must be an int, got {value!r} ({type(value).__name__})")
    return int(value)


def _check_reduction(reduction, who):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{who}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def _axis(x: Tensor, axis, who: str) -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{who}: axis must be an int, got {axis!r}")
    if not -x.ndim <= axis < max(x.ndim, 1):
        raise ValueError(f"{who}: axis {axis} is out of range for a Tensor of shape {x.shape}")
    return int(axis) % max(x.ndim, 1)


# -- vmap batching rules: shared helpers ----------------------------------------------------
# Every primitive below declares ``batch(args, batched, size, **params)`` (see tapegrad.vmap):
# ``args`` are its inputs one level below the vmap, the batched ones holding the whole batch on
# axis 0 (``batched[i]``), the unbatched ones as given; it returns the whole batch's output,
# batch on axis 0, computed with tapegrad ops in one call of the op (or a few), never a loop.


# -- fused elementwise primitives ------------------------------------------------------------
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


# -- losses ----------------------------------------------------------------------------------


_LOSS_HINTS = {
    "weight": "PyTorch's per-element rescaling weight is not implemented; multiply the "
    "reduction='none' loss by it",
    "pos_weight": "PyTorch's positive-class weight is not implemented; weight the "
    "reduction='none' loss yourself",
    "size_average": "PyTorch's deprecated switch; use reduction=",
    "reduce": "PyTorch's deprecated switch; use reduction=",
}


def _loss_inputs(y_pred, y_true, reduction, who):
    _check_reduction(reduction, who)
    p = _floating(y_pred, who, "y_pred")
    y = _like(y_true, p, who, "y_true")
    _check_loss_shapes(who, p.shape, y.shape)
    return p, y


@strict_keywords(hints=_LOSS_HINTS)
def mean_squared_loss(y_pred, y_true, reduction: str = "mean") -> Tensor:
    """Mean squared error ``mean((y_pred - y_true)**2)`` (see :class:`MeanSquaredLoss`).

    Args:
        y_pred: Floating Tensor of any shape.
        y_true: Targets of ``y_pred``'s shape, or a scalar (Tensor, array, list or number).
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"`` (elementwise squares).

    Returns:
        Scalar Tensor (``y_pred``'s shape for ``"none"``) of ``y_pred``'s dtype.

    Raises:
        ValueError: for an unknown reduction or a ``y_true`` whose shape differs from
            ``y_pred``'s (and is not a scalar).

    Example:
        >>> import tapegrad as tg
        >>> float(tg.nn.functional.mean_squared_loss(tg.Tensor([3.0, 5.0]), [2.0, 5.0]))
        0.5
    """
    p, y = _loss_inputs(y_pred, y_true, reduction, "mean_squared_loss")
    return MeanSquaredLoss.apply(p, y, reduction=reduction)


mse_loss = mean_squared_loss


@strict_keywords(hints=_LOSS_HINTS)
def binary_cross_entropy(y_pred, y_true, reduction: str = "mean") -> Tensor:
    """Binary cross-entropy of predicted probabilities (see :class:`BinaryCrossEntropy`).

    ``-(y log p + (1 - y) log(1 - p))``; logs are clamped at -100 (PyTorch), so ``p`` of 0 or
    1 gives a finite loss. For logits use :func:`binary_cross_entropy_with_logits`.

    Args:
        y_pred: Probabilities in ``[0, 1]``, floating Tensor of any shape.
        y_true: Targets in ``[0, 1]`` of ``y_pred``'s shape, or a scalar.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.

    Returns:
        Scalar Tensor (``y_pred``'s shape for ``"none"``), in nats.

    Raises:
        ValueError: if ``y_pred`` has values outside ``[0, 1]``, for a bad reduction or
            a ``y_true`` whose shape differs from ``y_pred``'s (and is not a scalar).
    """
    p, y = _loss_inputs(y_pred, y_true, reduction, "binary_cross_entropy")
    arr = all_values(p)
    if arr.size and (np.nanmin(arr) < 0 or np.nanmax(arr) > 1):
        raise ValueError(
            "binary_cross_entropy: y_pred must hold probabilities in [0, 1], got values in "
            f"[{np.nanmin(arr)}, {np.nanmax(arr)}]; for logits use "
            "binary_cross_entropy_with_logits"
        )
    return BinaryCrossEntropy.apply(p, y, reduction=reduction)


@strict_keywords(hints=_LOSS_HINTS)
def binary_cross_entropy_with_logits(y_pred, y_true, reduction: str = "mean") -> Tensor:
    """Binary cross-entropy of logits, stable for any ``|logits|``.

    Computes ``softplus(x) - y x`` (equal to ``-(y log sigmoid(x) + (1-y) log(1-sigmoid(x)))``)
    without overflow; the gradient is ``sigmoid(x) - y`` (see
    :class:`BinaryCrossEntropyWithLogits`).

    Args:
        y_pred: Logits, floating Tensor of any shape.
        y_true: Targets in ``[0, 1]`` of ``y_pred``'s shape, or a scalar.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.

    Returns:
        Scalar Tensor (``y_pred``'s shape for ``"none"``), in nats.

    Raises:
        ValueError: for a bad reduction or a ``y_true`` whose shape differs from ``y_pred``'s
            (and is not a scalar).
    """
    x, y = _loss_inputs(y_pred, y_true, reduction, "binary_cross_entropy_with_logits")
    return BinaryCrossEntropyWithLogits.apply(x, y, reduction=reduction)


def _int_targets(y_true, who: str, device: str = "cpu") -> Tensor:
    """Class indices as an integer Tensor on ``device`` (the device of the scores): arrays and
    Python data are put there, and CPU Tensors join it as index Tensors do in indexing."""
    if isinstance(y_true, Tensor):
        t = y_true if y_true.device == device or device == "cpu" else y_true.to_device(device)
    else:
        try:
            t = Tensor(y_true if hasattr(y_true, "__cuda_array_interface__")
                       else np.asarray(y_true), device=device)
        except TypeError:
            raise TypeError(
                f"{who}: y_true must hold integer class indices, got "
                f"{type(y_true).__name__} {y_true!r:.40}"
            ) from None
    if t.dtype.kind in "fV":
        arr = all_values(t)
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise TypeError(
                f"{who}: y_true must hold integer class indices, got non-integer floats"
            )
        t = tnp.astype(tnp.stop_gradient(t), np.int64)
    elif t.dtype.kind not in "iu":
        raise TypeError(f"{who}: y_true must hold integer class indices, got dtype {t.dtype}")
    return t


def cross_entropy(
    y_pred,
    y_true,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    reduction: str = "mean",
    *,
    weight=None,
) -> Tensor:
    """Cross-entropy of raw logits against class indices or class probabilities (as
    PyTorch's ``cross_entropy``, with soft targets and class weights).

    Two kinds of target, told apart by shape (as in PyTorch):

    - **class indices**, shape ``y_pred.shape[:-1]``: ``loss_i = -sum_c T_ic
      log_softmax(y_pred_i)_c`` with ``T = (1 - eps) onehot(y_true_i) + eps / C`` (label
      smoothing); entries equal to ``ignore_index`` contribute nothing. Without ``weight``
      this is one fused, stable Function (see :class:`CrossEntropy`).
    - **class probabilities**, floating, of ``y_pred``'s own shape: ``loss_i = -sum_c
      T_ic log_softmax(y_pred_i)_c`` with ``T = (1 - eps) y_true_i + eps / C``.

    With ``weight`` (one non-negative weight per class), each term ``T_ic (-log p_ic)`` is
    multiplied by ``weight[c]``; the ``"mean"`` of class-index targets then divides by the
    sum of ``weight[y_true_i]`` over non-ignored targets (PyTorch's weighted mean).

    Args:
        y_pred: Logits of shape ``(N, C)`` or ``(N, T, C)`` (generally ``(..., C)``), floating.
        y_true: Either class indices of shape ``y_pred.shape[:-1]``, integer (integral floats
            are accepted), each in ``[0, C)`` or equal to ``ignore_index``; or class
            probabilities of ``y_pred``'s shape, floating (each row usually sums to 1).
        ignore_index: Class-index target value that contributes neither loss nor gradient.
            Not applicable to probability targets.
        label_smoothing: ``eps`` in ``[0, 1]``.
        reduction: ``"mean"`` (class indices: over non-ignored targets, weighted by
            ``weight``, 0.0 when all are ignored; probabilities: over the ``prod(shape[:-1])``
            rows), ``"sum"`` or ``"none"`` (shape ``y_pred.shape[:-1]``, zeros at ignored
            targets).
        weight: Keyword-only; optional floating Tensor of shape ``(C,)``.

    Returns:
        Tensor of ``y_pred``'s dtype, in nats.

    Raises:
        TypeError: for non-floating logits, non-integer class indices or non-floating weights.
        ValueError: for a ``y_true`` shape that is neither ``y_pred.shape[:-1]`` nor
            ``y_pred.shape``, targets out of range, ``ignore_index`` given with probability
            targets, a bad ``label_smoothing``, ``weight`` shape or ``reduction``.

    References:
        Szegedy et al., "Rethinking the Inception Architecture for Computer Vision", CVPR 2016
        (label smoothing).

    Example:
        >>> import tapegrad as tg
        >>> logits = tg.Tensor([[2.0, 1.0, 0.1]])
        >>> loss = tg.nn.functional.cross_entropy(logits, [0], label_smoothing=0.1)
        >>> round(float(loss), 4)
        0.5137
        >>> soft = tg.nn.functional.cross_entropy(logits, tg.Tensor([[1.0, 0.0, 0.0]]))
        >>> round(float(soft), 4)
        0.417
    """
    who = "cross_entropy"
    _check_reduction(reduction, who)
    logits = _floating(y_pred, who, "y_pred")
    if logits.ndim < 1 or logits.shape[-1] < 1:
        raise ValueError(f"{who}: y_pred must have a non-empty class axis, got {logits.shape}")
    label_smoothing = _real_arg(label_smoothing, who, "label_smoothing")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{who}: label_smoothing must lie in [0, 1], got {label_smoothing}")
    ignore_index = _int_arg(ignore_index, who, "ignore_index")
    w = _class_weight(weight, logits, who)
    probs = _soft_targets(y_true, logits)
    if probs is not None:
        if ignore_index != -100:
            raise ValueError(
                f"{who}: ignore_index={ignore_index} applies to class-index targets only; "
                f"y_true of shape {probs.shape} holds class probabilities"
            )
        t = probs
        if label_smoothing:
            t = t * (1.0 - label_smoothing) + label_smoothing / logits.shape[-1]
        lp = log_softmax(logits, axis=-1)
        per = -tnp.sum(t * lp if w is None else t * lp * w, axis=-1)
        return _reduce(per, reduction, count=per.size)
    _check_target_kind(who, y_true, logits.shape)
    target = _int_targets(y_true, who, logits.device)
    _check_class_targets(who, logits.shape, target.shape)
    if w is not None:
        return _weighted_nll(
            log_softmax(logits, axis=-1),
            target,
            w,
            int(ignore_index),
            label_smoothing,
            reduction,
            who,
        )
    # targets outside [0, C) other than ignore_index: ValueError from the forward, which checks
    # them in the one reduction that also tells whether any target is ignored
    return CrossEntropy.apply(
        logits,
        target,
        ignore_index=int(ignore_index),
        label_smoothing=float(label_smoothing),
        reduction=reduction,
    )


def _target_aval(y_true) -> tuple:
    """``(shape, dtype kind)`` of a target (Tensor, NumPy or CuPy array, list, number)."""
    if isinstance(y_true, Tensor) or (hasattr(y_true, "shape") and hasattr(y_true, "dtype")):
        return tuple(y_true.shape), np.dtype(y_true.dtype).kind  # pyright: ignore[reportAttributeAccessIssue]
    try:
        arr = np.asarray(y_true)
    except (TypeError, ValueError):
        return None, None
    if arr.dtype.kind not in "biufc":  # not numeric: the conversion names the problem
        return None, None
    return arr.shape, arr.dtype.kind


def _check_target_kind(who: str, y_true, logits_shape) -> None:
    """Raise ValueError for a :func:`cross_entropy` target whose shape fits neither kind of
    target (before its values are read: a float target of the wrong shape is a shape error)."""
    shape, kind = _target_aval(y_true)
    logits_shape = tuple(logits_shape)
    if shape is None or shape == logits_shape[:-1]:
        return
    if shape == logits_shape:  # y_pred's shape, but not floating
        raise ValueError(
            f"{who}: y_true has y_pred's shape {logits_shape} but dtype kind {kind!r}; class "
            "probabilities must be floating (cast them, for example y_true.astype('float32')), "
            f"and class indices have shape {logits_shape[:-1]}"
        )
    raise ValueError(
        f"{who}: y_true of shape {shape} fits neither kind of target for y_pred of shape "
        f"{logits_shape}: class indices have shape {logits_shape[:-1]} (integers), class "
        f"probabilities have y_pred's shape {logits_shape} (floating)"
    )


def _soft_targets(y_true, logits: Tensor):
    """``y_true`` as a Tensor of ``logits``' dtype if it holds class probabilities (floating,
    ``logits``' shape), else None (class indices)."""
    t = y_true if isinstance(y_true, Tensor) else None
    if t is None:
        arr = y_true.get() if hasattr(y_true, "get") else y_true  # a CuPy array  # pyright: ignore[reportAttributeAccessIssue]
        shape, kind = np.shape(arr), np.asarray(arr).dtype.kind
    else:
        shape, kind = t.shape, t.dtype.kind
    if kind not in "fV" or tuple(shape) != tuple(logits.shape):
        return None
    return _like(y_true, logits)


def _class_weight(weight, logits: Tensor, who: str):
    """``weight`` as a ``(C,)`` Tensor of ``logits``' dtype (None stays None)."""
    if weight is None:
        return None
    w = weight if isinstance(weight, Tensor) else Tensor(np.asarray(weight))
    if w.dtype.kind not in "fV":
        raise TypeError(f"{who}: weight must be a floating Tensor, got dtype {w.dtype}")
    c = logits.shape[-1]
    if tuple(w.shape) != (c,):
        raise ValueError(
            f"{who}: weight must have shape ({c},) (one per class), got {tuple(w.shape)}"
        )
    return _like(w, logits)


def _reduce(per: Tensor, reduction: str, count=None, denominator=None) -> Tensor:
    """Reduce an elementwise loss: ``"none"``, ``"sum"``, or ``"mean"`` = the sum over
    ``denominator`` (a Tensor; 0 where it is 0) or over ``count`` elements (NaN for no
    elements when ``count`` is None, as NumPy's mean; 0 for a ``count`` of 0)."""
    if reduction == "none":
        return per
    total = tnp.sum(per)
    if reduction == "sum":
        return total
    if denominator is not None:
        positive = denominator > 0
        return tnp.where(positive, total / tnp.where(positive, denominator, 1.0), 0.0)
    if count is None:
        return total / per.size if per.size else total * math.nan
    return total / max(count, 1)


def _onehot(target: Tensor, n_classes: int, ref: Tensor) -> Tensor:
    """``onehot(target)`` of ``ref``'s dtype, shape ``target.shape + (n_classes,)``; all
    zeros for a target outside ``[0, n_classes)``. Recorded with tapegrad ops, so a replayed
    tape reads new targets."""
    classes = _const(np.arange(n_classes, dtype=np.dtype(target.dtype)), ref)
    return tnp.astype(tnp.equal(tnp.expand_dims(target, -1), classes), ref.dtype)


def _check_targets_in_range(target: Tensor, n_classes: int, ignore_index: int, who: str):
    try:
        _targets_all_valid(all_values(target), n_classes, ignore_index)
    except ValueError as e:
        raise ValueError(f"{who}: {e}") from None


def _weighted_nll(logp, target, weight, ignore_index, label_smoothing, reduction, who):
    """``-sum_c w_c T_ic logp_ic`` over valid targets, ``T = (1 - eps) onehot + eps / C``;
    ``"mean"`` divides by ``sum_i w[t_i]`` over valid targets (PyTorch's weighted mean)."""
    c = logp.shape[-1]
    _check_targets_in_range(target, c, ignore_index, who)
    valid = tnp.astype(tnp.not_equal(target, ignore_index), logp.dtype)
    mask = _onehot(target, c, logp) * tnp.expand_dims(valid, -1)  # ignored rows: all zero
    if weight is not None:
        mask = mask * weight
    per = -tnp.sum(mask * logp, axis=-1)  # w[t_i] * nll_i
    if label_smoothing:
        wl = logp if weight is None else logp * weight
        smooth = -tnp.sum(wl, axis=-1) * valid
        per = (1.0 - label_smoothing) * per + (label_smoothing / c) * smooth
    if reduction != "mean":
        return _reduce(per, reduction)
    return _reduce(per, reduction, denominator=tnp.sum(mask))


def nll_loss(
    input, target, weight=None, ignore_index: int = -100, reduction: str = "mean"
) -> Tensor:
    """Negative log-likelihood of log-probabilities at class indices
    (``torch.nn.functional.nll_loss``, classes last).

    ``loss_i = -weight[t_i] * input[i, t_i]``, 0 where ``t_i == ignore_index``, so
    ``nll_loss(log_softmax(z), t) == cross_entropy(z, t)``.

    Args:
        input: Log-probabilities of shape ``(..., C)``, floating, **classes last** (as
            :func:`cross_entropy` here; PyTorch puts them on axis 1).
        target: Class indices of shape ``input.shape[:-1]``, integer (integral floats are
            accepted), each in ``[0, C)`` or equal to ``ignore_index``.
        weight: Optional floating Tensor of shape ``(C,)``: one weight per class.
        ignore_index: Target value that contributes neither loss nor gradient.
        reduction: ``"mean"`` (the sum over ``sum_i weight[t_i]`` of the non-ignored
            targets; 0.0 when that is 0), ``"sum"`` or ``"none"`` (shape of ``target``).

    Returns:
        Tensor of ``input``'s dtype, in nats when ``input`` holds natural-log probabilities.

    Raises:
        TypeError: for non-floating input or weights, or non-integer targets.
        ValueError: for mismatched shapes, targets out of range, a bad ``weight`` shape or
            ``reduction``.

    Example:
        >>> import tapegrad as tg
        >>> F = tg.nn.functional
        >>> logits = tg.Tensor([[2.0, 1.0, 0.1]])
        >>> float(F.nll_loss(F.log_softmax(logits), [0])) == float(F.cross_entropy(logits, [0]))
        True
    """
    who = "nll_loss"
    _check_reduction(reduction, who)
    logp = _floating(input, who)
    ignore_index = _int_arg(ignore_index, who, "ignore_index")
    shape, _ = _target_aval(target)
    if shape is not None:  # a shape error before the values are read
        _check_class_targets(who, logp.shape, shape, "input", "target")
    target = _int_targets(target, who, logp.device)
    _check_class_targets(who, logp.shape, target.shape, "input", "target")
    w = _class_weight(weight, logp, who)
    return _weighted_nll(logp, target, w, ignore_index, 0.0, reduction, who)


def _pair_loss_inputs(input, target, reduction, who, reductions=_REDUCTIONS):
    if reduction not in reductions:
        raise ValueError(f"{who}: reduction must be one of {reductions}, got {reduction!r}")
    x = _floating(input, who)
    y = _like(target, x, who, "target")
    _check_loss_shapes(who, x.shape, y.shape, "input", "target")
    return x, y


def l1_loss(input, target, reduction: str = "mean") -> Tensor:
    """Mean absolute error ``|input - target|`` (``torch.nn.functional.l1_loss``).

    The derivative at ``input == target`` is 0 (``sign(0)``, as PyTorch).

    Args:
        input: Floating Tensor of any shape.
        target: Tensor of ``input``'s shape, or a scalar.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.

    Returns:
        Tensor of ``input``'s dtype: a scalar, or ``input``'s shape for ``"none"``.

    Raises:
        TypeError: for non-floating input.
        ValueError: for a bad reduction or a target whose shape differs from ``input``'s.

    Example:
        >>> import tapegrad as tg
        >>> float(tg.nn.functional.l1_loss(tg.Tensor([1.0, -2.0]), tg.Tensor([0.0, 0.0])))
        1.5
    """
    x, y = _pair_loss_inputs(input, target, reduction, "l1_loss")
    return _reduce(tnp.abs(x - y), reduction)


def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    """Huber loss (``torch.nn.functional.huber_loss``): quadratic near 0, linear beyond
    ``delta``.

    ``0.5 d**2`` where ``|d| < delta`` else ``delta (|d| - 0.5 delta)``, ``d = input -
    target``: continuous with a continuous first derivative (``d``, clipped to
    ``[-delta, delta]``).

    Args:
        input: Floating Tensor of any shape.
        target: Tensor of ``input``'s shape, or a scalar.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.
        delta: Threshold ``> 0`` between the two regimes, in ``input``'s units.

    Returns:
        Tensor of ``input``'s dtype: a scalar, or ``input``'s shape for ``"none"``.

    Raises:
        ValueError: for ``delta <= 0``, a bad reduction or a target whose shape differs.

    References:
        Huber, "Robust Estimation of a Location Parameter", Ann. Math. Statist. 35(1), 1964.
    """
    x, y = _pair_loss_inputs(input, target, reduction, "huber_loss")
    delta = _real_arg(delta, "huber_loss", "delta")
    if not delta > 0:
        raise ValueError(f"huber_loss: delta must be positive, got {delta}")
    d = x - y
    a = tnp.abs(d)
    per = tnp.where(a < delta, 0.5 * d * d, delta * (a - 0.5 * delta))
    return _reduce(per, reduction)


def smooth_l1_loss(input, target, reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """Smooth L1 loss (``torch.nn.functional.smooth_l1_loss``): ``huber_loss / beta``.

    ``0.5 d**2 / beta`` where ``|d| < beta`` else ``|d| - 0.5 beta``; ``beta = 0`` is
    :func:`l1_loss`.

    Args:
        input: Floating Tensor of any shape.
        target: Tensor of ``input``'s shape, or a scalar.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.
        beta: Threshold ``>= 0``.

    Returns:
        Tensor of ``input``'s dtype: a scalar, or ``input``'s shape for ``"none"``.

    Raises:
        ValueError: for ``beta < 0``, a bad reduction or a target whose shape differs.

    References:
        Girshick, "Fast R-CNN", ICCV 2015, eq. 3.
    """
    x, y = _pair_loss_inputs(input, target, reduction, "smooth_l1_loss")
    beta = _real_arg(beta, "smooth_l1_loss", "beta")
    if not beta >= 0:
        raise ValueError(f"smooth_l1_loss: beta must be >= 0, got {beta}")
    d = x - y
    a = tnp.abs(d)
    if beta == 0:
        return _reduce(a, reduction)
    per = tnp.where(a < beta, (0.5 / beta) * d * d, a - 0.5 * beta)
    return _reduce(per, reduction)


def kl_div(input, target, reduction: str = "mean", log_target: bool = False) -> Tensor:
    """Kullback-Leibler divergence ``KL(target || exp(input))`` pointwise
    (``torch.nn.functional.kl_div``).

    ``input`` holds log-probabilities (for example :func:`log_softmax`); ``target`` holds
    probabilities, or log-probabilities with ``log_target=True``. Pointwise:
    ``target * (log(target) - input)`` (0 where ``target == 0``: ``0 log 0 = 0``), or
    ``exp(target) * (target - input)`` with ``log_target``.

    Args:
        input: Floating Tensor of log-probabilities, any shape ``(N, ...)``.
        target: Tensor of ``input``'s shape (or a scalar): probabilities (``>= 0``; a negative
            one gives NaN, as PyTorch) or, with ``log_target``, log-probabilities.
        reduction: ``"mean"`` (the default, PyTorch's: over *every element*, which is not the
            KL divergence), ``"batchmean"`` (the sum over ``N = input.shape[0]``: the mean KL
            divergence per sample, in nats), ``"sum"`` or ``"none"``.
        log_target: Whether ``target`` holds log-probabilities.

    Returns:
        Tensor of ``input``'s dtype: a scalar, or ``input``'s shape for ``"none"``.

    Raises:
        TypeError: for non-floating input.
        ValueError: for a bad reduction, ``"batchmean"`` of a 0-d input, or a target whose
            shape differs from ``input``'s.

    References:
        Kullback and Leibler, "On Information and Sufficiency", Ann. Math. Statist. 22(1),
        1951.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> F = tg.nn.functional
        >>> p = tg.Tensor([[0.5, 0.5]])
        >>> float(F.kl_div(tnp.log(p), p, reduction="batchmean"))
        0.0
    """
    who = "kl_div"
    x, t = _pair_loss_inputs(input, target, reduction, who, _REDUCTIONS + ("batchmean",))
    if bool_arg(log_target, who, "log_target"):
        per = tnp.exp(t) * (t - x)
    else:
        pos = t > 0
        per = tnp.where(pos, t * tnp.log(tnp.where(pos, t, 1.0)), 0.0) - t * x
        per = tnp.where(t < 0, math.nan, per)  # log of a negative probability
    if reduction == "batchmean":
        if x.ndim == 0:
            raise ValueError(f"{who}: reduction='batchmean' needs an input with a batch axis")
        total = tnp.sum(per)
        return total / x.shape[0] if x.shape[0] else total * math.nan
    return _reduce(per, reduction)


@strict_keywords(hints=_LOSS_HINTS)
def hinge_loss(y_pred, y_true, reduction: str = "none") -> Tensor:
    """Hinge loss ``max(0, 1 - y_true * y_pred)`` for labels in {-1, +1} (see
    :class:`HingeLoss`).

    The derivative is ``-y_true`` where ``y_true * y_pred < 1`` and 0 elsewhere (0 at the
    kink, a subgradient).

    Args:
        y_pred: Scores, floating Tensor of any shape.
        y_true: Labels (usually -1 or +1) of ``y_pred``'s shape, or a scalar.
        reduction: ``"none"`` (default), ``"mean"`` or ``"sum"``.

    Returns:
        Tensor of ``y_pred``'s dtype.

    Raises:
        ValueError: for a bad reduction or a ``y_true`` whose shape differs from ``y_pred``'s
            (and is not a scalar).
    """
    x, y = _loss_inputs(y_pred, y_true, reduction, "hinge_loss")
    return HingeLoss.apply(x, y, reduction=reduction)


# -- linear ----------------------------------------------------------------------------------


def linear(input, weight, bias=None) -> Tensor:
    """Affine map ``input @ weight + bias``.

    With a bias and one dtype throughout, this is the fused :class:`Linear` primitive (one
    BLAS call, the bias added in place into its result; a 1-D input runs as one row, so that
    under :func:`tapegrad.vmap` the whole batch is one BLAS call); otherwise a ``matmul``
    followed by a broadcast ``add`` (NumPy type promotion).

    Args:
        input: Floating Tensor of shape ``(..., in_features)``.
        weight: Tensor of shape ``(in_features, out_features)`` (the ``y = xW + b``
            layout, as Flax; PyTorch stores the transpose).
        bias: Optional Tensor of shape ``(out_features,)``.

    Returns:
        Tensor of shape ``(..., out_features)``, of the promoted dtype of the three inputs.

    Raises:
        TypeError: if ``input`` is not floating.
        ValueError: if ``input.shape[-1] != weight.shape[0]`` or ``bias`` has the wrong shape.
    """
    if type(input) is Tensor and type(weight) is Tensor and type(bias) is Tensor:
        xa, wa, ba = input._array, weight._array, bias._array
        xs, ws = xa.shape, wa.shape
        if (  # the common case, checked on the arrays: straight to the fused primitive
            len(xs) >= 2
            and len(ws) == 2
            and xs[-1] == ws[0]
            and ba.shape == (ws[1],)
            and xa.dtype == wa.dtype == ba.dtype
            and xa.dtype.kind in "fV"
        ):
            return Linear.apply(input, weight, bias)
    x = _floating(input, "linear")
    weight = tnp.asarray(weight)
    if weight.ndim != 2 or x.ndim < 1 or x.shape[-1] != weight.shape[0]:
        raise ValueError(
            f"linear: input of shape {x.shape} and weight of shape {weight.shape} do not fit; "
            "weight must be (in_features, out_features) with in_features == input.shape[-1]"
        )
    if bias is None:
        return tnp.matmul(x, weight)
    bias = tnp.asarray(bias)
    if bias.shape != (weight.shape[1],):
        raise ValueError(f"linear: bias must have shape ({weight.shape[1]},), got {bias.shape}")
    if x.dtype == weight.dtype == bias.dtype:
        if x.ndim >= 2:
            return Linear.apply(x, weight, bias)
        # one example (as inside vmap): a one-row Linear, so that a vmapped linear is one BLAS
        # call for the whole batch and its per-example weight gradients are outer products
        y = Linear.apply(tnp.reshape(x, (1, x.shape[0])), weight, bias)
        return tnp.reshape(y, (weight.shape[1],))
    return tnp.matmul(x, weight) + bias


def mlp(params, x, activation=relu) -> Tensor:
    """A multilayer perceptron on a params pytree from :func:`tapegrad.nn.init.mlp`.

    Args:
        params: List of ``{"weight": (in, out), "bias": (out,)}`` dicts.
        x: Tensor of shape ``(..., sizes[0])``.
        activation: Applied after every layer but the last.

    Returns:
        Tensor of shape ``(..., sizes[-1])``.
    """
    for i, layer in enumerate(params):
        x = linear(x, layer["weight"], layer.get("bias"))
        if i < len(params) - 1:
            x = activation(x)
    return x


# -- convolution -----------------------------------------------------------------------------
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
    c_in, c_out = x.shape[1], w.shape[0]
    if c_in % groups or c_out % groups or w.shape[1] != c_in // groups:
        raise ValueError(
            f"{who}: input has {c_in} channels and weight has shape {w.shape} with groups="
            f"{groups}; need C_in and C_out divisible by groups and weight.shape[1] == "
            f"C_in / groups = {c_in // groups if c_in % groups == 0 else 'n/a'}"
        )
    stride = _pair(stride, "stride", who)
    dilation = _pair(dilation, "dilation", who)
    kernel = tuple(w.shape[2:])
    pads = _resolve_padding(padding, x.shape[2:], kernel, stride, dilation, who)
    out_hw = _out_hw(x.shape[2:], kernel, stride, dilation, pads)
    if min(out_hw) < 1:
        raise ValueError(
            f"{who}: input of spatial size {x.shape[2:]} with padding {pads} is smaller than the "
            f"dilated kernel {kernel} (dilation {dilation}); the output would be empty"
        )
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
    c_in, c_out = x.shape[1], w.shape[0]
    if c_in % groups or c_out % groups or w.shape[1] != c_in // groups:
        raise ValueError(
            f"{who}: input has {c_in} channels and weight has shape {w.shape} with groups="
            f"{groups}; need C_in and C_out divisible by groups and weight.shape[1] == "
            f"C_in / groups"
        )
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


# -- pooling ---------------------------------------------------------------------------------


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


# -- dropout, normalization, embedding -------------------------------------------------------
def dropout(x, p: float = 0.5, key=None, training: bool = True, *, rate=None) -> Tensor:
    """Inverted dropout: zero each element with probability ``p``, scale the rest by
    ``1 / (1 - p)`` (Srivastava et al., 2014); the identity when not training or ``p == 0``.

    Args:
        x: Floating Tensor of any shape.
        p: Drop probability in ``[0, 1]``.
        key: A key from :mod:`tapegrad.random`; required when ``training`` and ``p > 0``.
        training: Apply dropout (True) or return ``x`` unchanged.
        rate: Flax/Optax name for ``p`` (give one of them).

    Returns:
        Tensor of ``x``'s shape and dtype.

    Raises:
        ValueError: if ``p`` is outside ``[0, 1]`` or the key is missing.
    """
    x = _floating(x, "dropout")
    if rate is not None:
        p = rate
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must lie in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if key is None:
        raise ValueError(
            "dropout: training with p > 0 needs a key (dropout(x, p, key=tg.random.split(...)[1]))"
        )
    if p == 1.0:
        return x * 0.0
    keep = _random.bernoulli(key, 1.0 - p, x.shape)
    if x.device != "cpu":
        keep = keep.to_device(x.device)
    return tnp.where(keep, x * (1.0 / (1.0 - p)), 0.0)


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


def embedding(input, weight) -> Tensor:
    """Look up rows of ``weight``: ``weight[input]``.

    Args:
        input: Integer Tensor (or array/list) of indices in ``[0, num_embeddings)``, any shape.
        weight: Tensor of shape ``(num_embeddings, embedding_dim)``.

    Returns:
        Tensor of shape ``input.shape + (embedding_dim,)``; the gradient of ``weight``
        accumulates over repeated indices. The indices are an input of the recorded op, so a
        replayed tape looks up new indices.

    Raises:
        TypeError: for non-integer indices. ValueError: for indices out of range.
    """
    weight = tnp.asarray(weight)
    idx = _int_targets(input, "embedding", weight.device)
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must have shape (num, dim), got {weight.shape}")
    arr = all_values(idx)
    if arr.size and (arr.min() < 0 or arr.max() >= weight.shape[0]):
        raise ValueError(
            f"embedding: indices must lie in [0, {weight.shape[0]}), got values in "
            f"[{arr.min()}, {arr.max()}]"
        )
    return _TakeRows.apply(weight, idx)


# -- attention -------------------------------------------------------------------------------
def _mask_penalty(dtype) -> float:
    return -min(1e9, float(_tg_dtypes.finfo(dtype).max) / 4)


def scaled_dot_product_attention(
    query,
    key,
    value,
    attn_mask=None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    *,
    dropout_key=None,
) -> Tensor:
    """Scaled dot-product attention ``softmax(q k^T / sqrt(E)) v`` (Vaswani et al., 2017).

    The mask contract: a **float** mask is additive with 1.0 meaning *forbidden* and
    0.0 *allowed* (the scores get ``mask * -1e9``); a **boolean** mask is True where
    attention is *allowed* (PyTorch's and MLX's convention). ``is_causal`` forbids keys after
    the query position (top-left aligned, PyTorch); combined with a mask, both apply.
    A query whose keys are all forbidden attends uniformly (finite penalty, no NaN).
    Dropout is applied to the probabilities after the softmax (as in PyTorch), with
    an explicit key. A fused Function: backward recomputes the probabilities.

    Args:
        query: Floating Tensor ``(..., Lq, E)``.
        key: Tensor ``(..., Lk, E)``.
        value: Tensor ``(..., Lk, Ev)``.
        attn_mask: Optional float or boolean mask broadcastable to ``(..., Lq, Lk)``.
        dropout_p: Post-softmax dropout probability in ``[0, 1)``.
        is_causal: Apply a causal mask.
        scale: Score scale; default ``1 / sqrt(E)``.
        dropout_key: Key from :mod:`tapegrad.random`; required when ``dropout_p > 0``.

    Returns:
        Tensor ``(..., Lq, Ev)`` of ``query``'s dtype.

    Raises:
        ValueError: for mismatched shapes, a bad ``dropout_p`` or a missing key.

    References:
        Vaswani et al., "Attention Is All You Need", NeurIPS 2017, section 3.2.1.
    """
    who = "scaled_dot_product_attention"
    q = _floating(query, who, "query")
    k = _like(key, q)
    v = _like(value, q)
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ValueError(f"{who}: query, key and value must be at least 2-D")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"{who}: shapes query {q.shape}, key {k.shape}, value {v.shape} do not fit: need "
            "query (..., Lq, E), key (..., Lk, E), value (..., Lk, Ev)"
        )
    lq, lk = q.shape[-2], k.shape[-2]
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"{who}: dropout_p must lie in [0, 1), got {dropout_p}")
    neg = _mask_penalty(q.dtype)
    bias = None
    if attn_mask is not None:
        m = tnp.asarray(attn_mask)
        if m.dtype == np.bool_:
            bias = tnp.where(m, 0.0, _const(np.asarray(neg, dtype=q.dtype), q))
        else:
            bias = _like(m, q) * neg
        try:
            np.broadcast_shapes(tuple(bias.shape), q.shape[:-1] + (lk,))
        except ValueError:
            raise ValueError(
                f"{who}: attn_mask of shape {tuple(m.shape)} does not broadcast to the scores' "
                f"shape {q.shape[:-1] + (lk,)}"
            ) from None
    if is_causal:
        causal = _const((np.triu(np.ones((lq, lk)), k=1) * neg).astype(q.dtype), q)
        bias = causal if bias is None else bias + causal
    drop = None
    if dropout_p > 0.0:
        if dropout_key is None:
            raise ValueError(f"{who}: dropout_p > 0 needs a dropout_key from tapegrad.random")
        shape = np.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (lq, lk)
        keep = _random.bernoulli(dropout_key, 1.0 - dropout_p, shape)
        drop = tnp.astype(keep, q.dtype) / (1.0 - dropout_p)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    return ScaledDotProductAttention.apply(q, k, v, bias, drop, scale=float(scale))


def multi_head_attention(
    query,
    key,
    value,
    params,
    num_heads: int,
    attn_mask=None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
    dropout_key=None,
) -> Tensor:
    """Multi-head attention (Vaswani et al., 2017, section 3.2.2) on a params pytree.

    ``out = concat_h(attention(q W_q^h, k W_k^h, v W_v^h)) W_o``, each projection a
    :func:`linear` layer.

    Args:
        query: Floating Tensor ``(B, Lq, D)``.
        key, value: Tensors ``(B, Lk, D)``.
        params: ``{"query": {"weight": (D, D), "bias": (D,)}, "key": ..., "value": ...,
            "output": ...}`` (biases may be None or absent).
        num_heads: Number of heads; divides ``D``.
        attn_mask: Optional mask (see :func:`scaled_dot_product_attention`) of shape
            ``(Lq, Lk)`` or ``(B, Lq, Lk)`` (shared by the heads) or ``(B, H, Lq, Lk)``.
        is_causal: Causal masking.
        dropout_p, dropout_key: post-softmax dropout.

    Returns:
        Tensor ``(B, Lq, D)``.

    Raises:
        ValueError: if ``num_heads`` does not divide ``D`` or shapes differ.
    """
    who = "multi_head_attention"
    q = _floating(query, who, "query")
    if q.ndim != 3:
        raise ValueError(f"{who}: query must have shape (B, L, D), got {q.shape}")
    d = q.shape[-1]
    if num_heads < 1 or d % num_heads:
        raise ValueError(f"{who}: num_heads={num_heads} must divide the model size {d}")
    hd = d // num_heads

    def project(x, name):
        p = params[name]
        y = linear(x, p["weight"], p.get("bias"))
        b, l_ = y.shape[:2]
        return tnp.transpose(tnp.reshape(y, (b, l_, num_heads, hd)), (0, 2, 1, 3))

    qh, kh, vh = (
        project(q, "query"),
        project(_like(key, q), "key"),
        project(_like(value, q), "value"),
    )
    mask = attn_mask
    if mask is not None:
        mask = tnp.asarray(mask)
        if mask.ndim == 3:
            mask = tnp.expand_dims(mask, 1)
    out = scaled_dot_product_attention(
        qh, kh, vh, mask, dropout_p=dropout_p, is_causal=is_causal, dropout_key=dropout_key
    )
    b, _, lq, _ = out.shape
    out = tnp.reshape(tnp.transpose(out, (0, 2, 1, 3)), (b, lq, d))
    po = params["output"]
    return linear(out, po["weight"], po.get("bias"))


# -- recurrent cells -------------------------------------------------------------------------
# Weights use this module's linear layout, ``(in_features, gates * hidden_size)`` (PyTorch
# stores the transpose); the gates are stacked along the last axis in PyTorch's order.
_GATES = {"rnn_tanh": 1, "rnn_relu": 1, "lstm": 4, "gru": 3}


def _cell_inputs(who, input, hx, weight_ih, weight_hh, bias_ih, bias_hh, gates):
    """Validated ``(x, [h...], w_ih, w_hh, b_ih, b_hh, hidden_size)`` for a recurrent cell;
    ``hx`` is the list of its states (``[h]``, or ``[h, c]`` for an LSTM), None for zeros."""
    x = _floating(input, who)
    if x.ndim not in (1, 2):
        raise ValueError(
            f"{who}: input must have shape (batch, input_size) or (input_size,), got {x.shape}"
        )
    w_ih, w_hh = _like(weight_ih, x), _like(weight_hh, x)
    if w_hh.ndim != 2 or w_hh.shape[1] % gates or w_hh.shape[0] * gates != w_hh.shape[1]:
        raise ValueError(
            f"{who}: weight_hh must have shape (hidden_size, {gates} * hidden_size), got "
            f"{w_hh.shape}"
        )
    n_h = w_hh.shape[0]
    if w_ih.shape != (x.shape[-1], gates * n_h):
        raise ValueError(
            f"{who}: weight_ih must have shape (input_size, {gates} * hidden_size) = "
            f"{(x.shape[-1], gates * n_h)} for input {x.shape}, got {w_ih.shape}"
        )
    biases = []
    for name, b in (("bias_ih", bias_ih), ("bias_hh", bias_hh)):
        if b is not None:
            b = _like(b, x)
            if b.shape != (gates * n_h,):
                raise ValueError(f"{who}: {name} must have shape ({gates * n_h},), got {b.shape}")
        biases.append(b)
    states = list(hx)
    want = x.shape[:-1] + (n_h,)
    for i, h in enumerate(states):
        if h is None:
            states[i] = tnp.zeros(want, dtype=x.dtype, device=x.device)
            continue
        states[i] = _like(h, x)
        if states[i].shape != want:
            raise ValueError(
                f"{who}: hidden state must have shape {want} for input {x.shape}, got "
                f"{states[i].shape}"
            )
    return x, states, w_ih, w_hh, biases[0], biases[1], n_h


def _affine(x, w, b):
    return linear(x, w, b) if x.ndim >= 2 or b is None else tnp.matmul(x, w) + b


def _rnn_step(gi, h, w_hh, b_hh, nonlinearity):
    z = gi + _affine(h, w_hh, b_hh)
    return tnp.tanh(z) if nonlinearity == "tanh" else relu(z)


def _lstm_step(gi, h, c, w_hh, b_hh):
    n = h.shape[-1]
    z = gi + _affine(h, w_hh, b_hh)
    i = sigmoid(z[..., :n])
    f = sigmoid(z[..., n : 2 * n])
    g = tnp.tanh(z[..., 2 * n : 3 * n])
    o = sigmoid(z[..., 3 * n :])
    c = f * c + i * g
    return o * tnp.tanh(c), c


def _gru_step(gi, h, w_hh, b_hh):
    n = h.shape[-1]
    gh = _affine(h, w_hh, b_hh)
    r = sigmoid(gi[..., :n] + gh[..., :n])
    z = sigmoid(gi[..., n : 2 * n] + gh[..., n : 2 * n])
    cand = tnp.tanh(gi[..., 2 * n :] + r * gh[..., 2 * n :])
    return cand + z * (h - cand)  # (1 - z) * cand + z * h


def rnn_cell(
    input, hx, weight_ih, weight_hh, bias_ih=None, bias_hh=None, nonlinearity: str = "tanh"
) -> Tensor:
    """One step of an Elman RNN (``torch.nn.RNNCell``'s math, as a pure function).

    ``h' = act(x W_ih + b_ih + h W_hh + b_hh)`` with ``act`` tanh or relu.

    Args:
        input: Floating Tensor ``(batch, input_size)`` or unbatched ``(input_size,)``.
        hx: Hidden state ``(batch, hidden_size)`` (or ``(hidden_size,)``); None means zeros.
        weight_ih: ``(input_size, hidden_size)``.
        weight_hh: ``(hidden_size, hidden_size)``.
        bias_ih, bias_hh: Optional ``(hidden_size,)``.
        nonlinearity: ``"tanh"`` or ``"relu"``.

    Returns:
        The new hidden state, shape of ``hx``, ``input``'s dtype.

    Raises:
        TypeError: for non-floating input. ValueError: for mismatched shapes or another
            ``nonlinearity``.

    References:
        Elman, "Finding Structure in Time", Cognitive Science 14(2), 1990.
    """
    who = "rnn_cell"
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"{who}: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
    x, (h,), w_ih, w_hh, b_ih, b_hh, _ = _cell_inputs(
        who, input, [hx], weight_ih, weight_hh, bias_ih, bias_hh, 1
    )
    return _rnn_step(_affine(x, w_ih, b_ih), h, w_hh, b_hh, nonlinearity)


def lstm_cell(input, hx, weight_ih, weight_hh, bias_ih=None, bias_hh=None) -> tuple:
    """One step of a long short-term memory cell (``torch.nn.LSTMCell``'s math, pure).

    Gates ``[i, f, g, o] = x W_ih + b_ih + h W_hh + b_hh`` (PyTorch's order);
    ``c' = sigmoid(f) c + sigmoid(i) tanh(g)``, ``h' = sigmoid(o) tanh(c')``.

    Args:
        input: Floating Tensor ``(batch, input_size)`` or unbatched ``(input_size,)``.
        hx: ``(h, c)``, each ``(batch, hidden_size)`` (or ``(hidden_size,)``); None (or a None
            entry) means zeros.
        weight_ih: ``(input_size, 4 hidden_size)``.
        weight_hh: ``(hidden_size,
            4 hidden_size)``.
        bias_ih, bias_hh: Optional ``(4 hidden_size,)``.

    Returns:
        ``(h', c')``, each of ``h``'s shape.

    Raises:
        TypeError: for non-floating input. ValueError: for mismatched shapes.

    References:
        Hochreiter and Schmidhuber, "Long Short-Term Memory", Neural Computation, 1997;
        Gers, Schmidhuber and Cummins, "Learning to Forget", Neural Computation, 2000.
    """
    who = "lstm_cell"
    if hx is None:
        hx = (None, None)
    if not isinstance(hx, (tuple, list)) or len(hx) != 2:
        raise TypeError(f"{who}: hx must be a pair (h, c) or None, got {type(hx).__name__}")
    x, (h, c), w_ih, w_hh, b_ih, b_hh, _ = _cell_inputs(
        who, input, hx, weight_ih, weight_hh, bias_ih, bias_hh, 4
    )
    return _lstm_step(_affine(x, w_ih, b_ih), h, c, w_hh, b_hh)


def gru_cell(input, hx, weight_ih, weight_hh, bias_ih=None, bias_hh=None) -> Tensor:
    """One step of a gated recurrent unit (``torch.nn.GRUCell``'s math, pure).

    With ``[r, z, n]`` stacked in PyTorch's order: ``r = sigmoid(x W_ir + b_ir + h W_hr +
    b_hr)``, ``z = sigmoid(x W_iz + b_iz + h W_hz + b_hz)``, ``n = tanh(x W_in + b_in + r *
    (h W_hn + b_hn))``, ``h' = (1 - z) n + z h``. (The reset gate multiplies ``h W_hn + b_hn``
    after the product, as in PyTorch and cuDNN; Cho et al. apply it to ``h`` before.)

    Args:
        input: Floating Tensor ``(batch, input_size)`` or unbatched ``(input_size,)``.
        hx: Hidden state ``(batch, hidden_size)`` (or ``(hidden_size,)``); None means zeros.
        weight_ih: ``(input_size, 3 hidden_size)``.
        weight_hh: ``(hidden_size,
            3 hidden_size)``.
        bias_ih, bias_hh: Optional ``(3 hidden_size,)``.

    Returns:
        The new hidden state, ``hx``'s shape, ``input``'s dtype.

    Raises:
        TypeError: for non-floating input. ValueError: for mismatched shapes.

    References:
        Cho et al., "Learning Phrase Representations using RNN Encoder-Decoder for
        Statistical Machine Translation", EMNLP 2014.
    """
    who = "gru_cell"
    x, (h,), w_ih, w_hh, b_ih, b_hh, _ = _cell_inputs(
        who, input, [hx], weight_ih, weight_hh, bias_ih, bias_hh, 3
    )
    return _gru_step(_affine(x, w_ih, b_ih), h, w_hh, b_hh)


# -- windows ---------------------------------------------------------------------------------
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
