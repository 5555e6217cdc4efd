"""Losses: mean squared, (binary) cross-entropy, negative log-likelihood, L1, Huber, smooth L1,
Kullback-Leibler divergence and hinge."""

from __future__ import annotations

import math

import numpy as np

from tapegrad import numpy as tnp
from tapegrad.core._keywords import strict_keywords
from tapegrad.core.tensor import Tensor, all_values
from tapegrad.nn._functional._common import (
    _REDUCTIONS,
    _check_reduction,
    _floating,
    _int_arg,
    _like,
    _real_arg,
)
from tapegrad.nn._functional.activations import log_softmax
from tapegrad.ops._registry import bool_arg
from tapegrad.ops.nn import (  # the primitives, defined with their rules in tapegrad.ops
    BinaryCrossEntropy,
    BinaryCrossEntropyWithLogits,
    CrossEntropy,
    HingeLoss,
    MeanSquaredLoss,
    _check_class_targets,
    _check_loss_shapes,
    _const,
    _targets_all_valid,
)

__all__ = [
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
    "CrossEntropy",
    "BinaryCrossEntropy",
    "BinaryCrossEntropyWithLogits",
    "HingeLoss",
    "MeanSquaredLoss",
]

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


def _broadcasts_to(shape, target_shape) -> bool:
    """Whether an array of ``shape`` broadcasts to ``target_shape`` (without growing it)."""
    try:
        return np.broadcast_shapes(target_shape, shape) == tuple(target_shape)
    except ValueError:
        return False


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
