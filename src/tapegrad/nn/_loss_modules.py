"""PyTorch's loss Modules (``nn.MSELoss``, ``nn.CrossEntropyLoss``, ``nn.CTCLoss``, ...): each
holds its configuration, checked where it is built, and calls its :mod:`tapegrad.nn.functional`
loss.

A loss Module has no parameters; a class ``weight`` is a state (PyTorch's buffer). As in
PyTorch, ``print`` shows the bare class name. The deprecated ``size_average``/``reduce``
switches are refused with a pointer to ``reduction=``.
"""

from __future__ import annotations

import math

import numpy as np

from tapegrad import numpy as tnp
from tapegrad.core.tensor import Tensor
from tapegrad.nn import functional as F
from tapegrad.nn._functional import _REDUCTIONS, _broadcasts_to, _floating, _like, _reduce
from tapegrad.nn.module import Module

__all__ = [
    "PoissonNLLLoss",
    "GaussianNLLLoss",
    "MarginRankingLoss",
    "CosineEmbeddingLoss",
    "TripletMarginLoss",
    "MultiMarginLoss",
    "MultiLabelMarginLoss",
    "MultiLabelSoftMarginLoss",
    "SoftMarginLoss",
    "HingeEmbeddingLoss",
    "CTCLoss",
    "MSELoss",
    "L1Loss",
    "HuberLoss",
    "SmoothL1Loss",
    "KLDivLoss",
    "BCELoss",
    "BCEWithLogitsLoss",
    "NLLLoss",
    "CrossEntropyLoss",
]

_HINTS = {
    "size_average": "PyTorch's deprecated switch; use reduction=",
    "reduce": "PyTorch's deprecated switch; use reduction=",
}


def _reduction(who: str, value, choices=_REDUCTIONS) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{who}: reduction must be one of {choices}, got {value!r}")
    return value


def _number(who: str, name: str, value, low: float | None = None, strict: bool = False,
            allow_inf: bool = False) -> float:
    """A real number (not a bool), finite unless ``allow_inf``, at least (above) ``low``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{who}: {name} must be a number, got {value!r}")
    v = float(value)
    ok = not math.isnan(v) and (allow_inf or math.isfinite(v))
    if ok and low is not None:
        ok = v > low if strict else v >= low
    if not ok:
        bound = "" if low is None else f" {'>' if strict else '>='} {low:g}"
        raise ValueError(f"{who}: {name} must be a {'' if allow_inf else 'finite '}number"
                         f"{bound}, got {value!r}")
    return v


def _flag(who: str, name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{who}: {name} must be a bool, got {value!r}")
    return bool(value)


def _weight_tensor(who: str, name: str, weight, kind: str = "") -> Tensor:
    """``weight`` (a floating array, Tensor or number) as a floating Tensor; ``kind`` (such as
    ``" (one weight per class)"``) follows "floating Tensor" in the error."""
    if isinstance(weight, Tensor):
        w = weight
    else:
        try:
            arr = np.asarray(weight)
        except (TypeError, ValueError):
            arr = np.asarray(None)
        if arr.dtype.kind not in "iuf" or isinstance(weight, (str, bytes, bool, np.bool_)):
            raise TypeError(f"{who}: {name} must be a floating Tensor{kind} or None, got "
                            f"{weight!r:.60}")
        w = Tensor(arr.astype(np.float64) if arr.dtype.kind not in "fV" else arr)
    if w.dtype.kind not in "fV":
        raise TypeError(f"{who}: {name} must be floating, got dtype {w.dtype}")
    return w


def _elementwise_weight(module: Module, who: str, name: str, weight) -> None:
    """Store ``weight`` (None, or floating weights that broadcast to the input) as a state."""
    if weight is None:
        setattr(module, name, None)
    else:
        module.register_state(name, _weight_tensor(who, name, weight))


def _class_weight(module: Module, who: str, weight) -> None:
    """Store ``weight`` (None, or a 1-D floating array/Tensor) as the state ``weight``."""
    if weight is None:
        module.weight = None
        return
    w = _weight_tensor(who, "weight", weight, " (one weight per class)")
    if w.ndim != 1:
        raise ValueError(f"{who}: weight must be 1-D (one weight per class), got shape "
                         f"{w.shape}")
    module.register_state("weight", w)


class _Loss(Module):
    """Base of the loss Modules: a ``reduction`` and PyTorch's (empty) ``extra_repr``."""

    _keyword_hints = _HINTS

    def extra_repr(self) -> str:
        """PyTorch's configuration string for a loss: empty (``print`` shows ``Name()``)."""
        return ""


class _MarginLoss(_Loss):
    """A loss Module configured by a real ``margin`` and its ``reduction``."""

    def __init__(self, margin: float = 0.0, reduction: str = "mean"):
        super().__init__()
        self.margin = _number(type(self).__name__, "margin", margin)
        self.reduction = _reduction(type(self).__name__, reduction)


class _ReductionLoss(_Loss):
    """A loss Module configured by its ``reduction`` alone."""

    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = _reduction(type(self).__name__, reduction)


class PoissonNLLLoss(_Loss):
    """Module form of :func:`~tapegrad.nn.functional.poisson_nll_loss` (PyTorch's
    ``nn.PoissonNLLLoss``).

    Args:
        log_input: Whether the input holds log-rates.
        full: Add the Stirling term.
        eps: ``>= 0``, added to the rate inside the log when ``log_input`` is False.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.

    Example:
        >>> import tapegrad as tg
        >>> loss = tg.nn.PoissonNLLLoss()
        >>> round(float(loss(tg.Tensor([0.0, 1.0]), tg.Tensor([1.0, 2.0]))), 4)
        0.8591
    """

    def __init__(self, log_input: bool = True, full: bool = False, eps: float = 1e-8,
                 reduction: str = "mean"):
        super().__init__()
        who = "PoissonNLLLoss"
        self.log_input = _flag(who, "log_input", log_input)
        self.full = _flag(who, "full", full)
        self.eps = _number(who, "eps", eps, 0.0)
        self.reduction = _reduction(who, reduction)

    def forward(self, log_input, target):
        """Input and target of one shape -> the loss (input's shape for ``"none"``)."""
        return F.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full,
                                  eps=self.eps, reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """Module form of :func:`~tapegrad.nn.functional.gaussian_nll_loss` (PyTorch's
    ``nn.GaussianNLLLoss``; its arguments are keyword-only, as there).

    Args:
        full: Add ``0.5 log(2 pi)``.
        eps: ``>= 0``, the smallest variance used.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
    """

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean"):
        super().__init__()
        who = "GaussianNLLLoss"
        self.full = _flag(who, "full", full)
        self.eps = _number(who, "eps", eps, 0.0)
        self.reduction = _reduction(who, reduction)

    def forward(self, input, target, var):
        """Means, samples and variances (see the function) -> the loss."""
        return F.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps,
                                   reduction=self.reduction)


class MarginRankingLoss(_MarginLoss):
    """Module form of :func:`~tapegrad.nn.functional.margin_ranking_loss` (PyTorch's
    ``nn.MarginRankingLoss``).

    Args:
        margin: Real number.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
    """

    def forward(self, input1, input2, target):
        """Two inputs and the target of one shape -> the loss."""
        return F.margin_ranking_loss(input1, input2, target, margin=self.margin,
                                     reduction=self.reduction)


class HingeEmbeddingLoss(_MarginLoss):
    """Module form of :func:`~tapegrad.nn.functional.hinge_embedding_loss` (PyTorch's
    ``nn.HingeEmbeddingLoss``).

    Args:
        margin: Real number.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
    """

    def __init__(self, margin: float = 1.0, reduction: str = "mean"):
        super().__init__(margin, reduction)

    def forward(self, input, target):
        """Input and labels (1 or -1) of one shape -> the loss."""
        return F.hinge_embedding_loss(input, target, margin=self.margin,
                                      reduction=self.reduction)


class SoftMarginLoss(_ReductionLoss):
    """Module form of :func:`~tapegrad.nn.functional.soft_margin_loss` (PyTorch's
    ``nn.SoftMarginLoss``).

    Args:
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
    """

    def forward(self, input, target):
        """Scores and labels (1 or -1) of one shape -> the loss."""
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_Loss):
    """Module form of :func:`~tapegrad.nn.functional.multilabel_soft_margin_loss`
    (PyTorch's ``nn.MultiLabelSoftMarginLoss``).

    Args:
        weight: Optional floating weights ``(C,)``, one per class (kept as a state).
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
    """

    def __init__(self, weight=None, reduction: str = "mean"):
        super().__init__()
        _class_weight(self, "MultiLabelSoftMarginLoss", weight)
        self.reduction = _reduction("MultiLabelSoftMarginLoss", reduction)

    def forward(self, input, target):
        """Scores ``(N, C)`` and targets in ``[0, 1]`` of their shape -> the loss."""
        return F.multilabel_soft_margin_loss(input, target, weight=self.weight,
                                             reduction=self.reduction)


class CosineEmbeddingLoss(_MarginLoss):
    """Module form of :func:`~tapegrad.nn.functional.cosine_embedding_loss` (PyTorch's
    ``nn.CosineEmbeddingLoss``).

    Args:
        margin: Real number, usually in ``[-1, 1]``.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
    """

    def forward(self, input1, input2, target):
        """Inputs ``(N, D)`` (or ``(D,)``) and labels ``(N,)`` (or ``()``) -> the loss."""
        return F.cosine_embedding_loss(input1, input2, target, margin=self.margin,
                                       reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """Module form of :func:`~tapegrad.nn.functional.triplet_margin_loss` (PyTorch's
    ``nn.TripletMarginLoss``).

    Args:
        margin: ``> 0``.
        p: Norm degree ``> 0`` (``math.inf`` allowed).
        eps: Added to each difference.
        swap: Use the distance swap.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
    """

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6,
                 swap: bool = False, reduction: str = "mean"):
        super().__init__()
        who = "TripletMarginLoss"
        self.margin = _number(who, "margin", margin, 0.0, strict=True)
        self.p = _number(who, "p", p, 0.0, strict=True, allow_inf=True)
        self.eps = _number(who, "eps", eps)
        self.swap = _flag(who, "swap", swap)
        self.reduction = _reduction(who, reduction)

    def forward(self, anchor, positive, negative):
        """Three Tensors ``(N, D)`` (or ``(D,)``) -> the loss."""
        return F.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p,
                                     eps=self.eps, swap=self.swap, reduction=self.reduction)


class MultiMarginLoss(_Loss):
    """Module form of :func:`~tapegrad.nn.functional.multi_margin_loss` (PyTorch's
    ``nn.MultiMarginLoss``).

    Args:
        p: 1 or 2.
        margin: Real number.
        weight: Optional floating weights ``(C,)`` (kept as a state).
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
    """

    def __init__(self, p: int = 1, margin: float = 1.0, weight=None, reduction: str = "mean"):
        super().__init__()
        who = "MultiMarginLoss"
        if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, np.integer)):
            raise TypeError(f"{who}: p must be the int 1 or 2, got {p!r}")
        if p not in (1, 2):
            raise ValueError(f"{who}: p must be 1 or 2, got {p!r}")
        self.p = int(p)
        self.margin = _number(who, "margin", margin)
        _class_weight(self, who, weight)
        self.reduction = _reduction(who, reduction)

    def forward(self, input, target):
        """Scores ``(N, C)`` and class indices ``(N,)`` -> the loss."""
        return F.multi_margin_loss(input, target, p=self.p, margin=self.margin,
                                   weight=self.weight, reduction=self.reduction)


class MultiLabelMarginLoss(_ReductionLoss):
    """Module form of :func:`~tapegrad.nn.functional.multilabel_margin_loss` (PyTorch's
    ``nn.MultiLabelMarginLoss``).

    Args:
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
    """

    def forward(self, input, target):
        """Scores ``(N, C)`` and class lists ``(N, C)`` ended by -1 -> the loss."""
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class CTCLoss(_Loss):
    """Module form of :func:`~tapegrad.nn.functional.ctc_loss` (PyTorch's ``nn.CTCLoss``).

    Args:
        blank: Index ``>= 0`` of the blank class.
        reduction: ``"mean"`` (each loss over its target length, then the batch mean),
            ``"sum"`` or ``"none"``.
        zero_infinity: Replace infinite losses (and their gradients) by 0.

    Example:
        >>> import numpy as np, tapegrad as tg
        >>> ctc = tg.nn.CTCLoss()
        >>> log_probs = tg.nn.functional.log_softmax(tg.Tensor(np.zeros((4, 2, 3))))
        >>> ctc(log_probs, [[1, 2], [1, 1]], [4, 4], [2, 2]).shape
        ()
    """

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False):
        super().__init__()
        who = "CTCLoss"
        if isinstance(blank, (bool, np.bool_)) or not isinstance(blank, (int, np.integer)):
            raise TypeError(f"{who}: blank must be an int (the blank class), got {blank!r}")
        if blank < 0:
            raise ValueError(f"{who}: blank must be >= 0, got {blank}")
        self.blank = int(blank)
        self.reduction = _reduction(who, reduction)
        self.zero_infinity = _flag(who, "zero_infinity", zero_infinity)

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        """``(T, N, C)`` log-probabilities, targets, and the lengths -> the loss."""
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=self.blank,
                          reduction=self.reduction, zero_infinity=self.zero_infinity)


# -- the losses that were already functions ----------------------------------------------------
class MSELoss(_ReductionLoss):
    """Module form of :func:`~tapegrad.nn.functional.mse_loss` (PyTorch's ``nn.MSELoss``).

    Args:
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.

    Example:
        >>> import tapegrad as tg
        >>> float(tg.nn.MSELoss()(tg.Tensor([3.0, 5.0]), tg.Tensor([2.0, 5.0])))
        0.5
    """

    def forward(self, input, target):
        """Input and target of one shape (or a scalar target) -> the loss."""
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_ReductionLoss):
    """Module form of :func:`~tapegrad.nn.functional.l1_loss` (PyTorch's ``nn.L1Loss``).

    Args:
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
    """

    def forward(self, input, target):
        """Input and target of one shape -> the loss."""
        return F.l1_loss(input, target, reduction=self.reduction)


class HuberLoss(_Loss):
    """Module form of :func:`~tapegrad.nn.functional.huber_loss` (PyTorch's ``nn.HuberLoss``).

    Args:
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        delta: ``> 0``.
    """

    def __init__(self, reduction: str = "mean", delta: float = 1.0):
        super().__init__()
        self.reduction = _reduction("HuberLoss", reduction)
        self.delta = _number("HuberLoss", "delta", delta, 0.0, strict=True)

    def forward(self, input, target):
        """Input and target of one shape -> the loss."""
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class SmoothL1Loss(_Loss):
    """Module form of :func:`~tapegrad.nn.functional.smooth_l1_loss` (PyTorch's
    ``nn.SmoothL1Loss``).

    Args:
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        beta: ``>= 0``.
    """

    def __init__(self, reduction: str = "mean", beta: float = 1.0):
        super().__init__()
        self.reduction = _reduction("SmoothL1Loss", reduction)
        self.beta = _number("SmoothL1Loss", "beta", beta, 0.0)

    def forward(self, input, target):
        """Input and target of one shape -> the loss."""
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class KLDivLoss(_Loss):
    """Module form of :func:`~tapegrad.nn.functional.kl_div` (PyTorch's ``nn.KLDivLoss``).

    Args:
        reduction: ``"mean"`` (over every element, PyTorch's default), ``"batchmean"`` (the
            KL divergence per sample), ``"sum"`` or ``"none"``.
        log_target: Whether the target holds log-probabilities.
    """

    def __init__(self, reduction: str = "mean", log_target: bool = False):
        super().__init__()
        self.reduction = _reduction("KLDivLoss", reduction, _REDUCTIONS + ("batchmean",))
        self.log_target = _flag("KLDivLoss", "log_target", log_target)

    def forward(self, input, target):
        """Log-probabilities and the target of one shape -> the divergence."""
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class BCELoss(_Loss):
    """Module form of :func:`~tapegrad.nn.functional.binary_cross_entropy` (PyTorch's
    ``nn.BCELoss``), with PyTorch's ``weight``.

    Args:
        weight: Optional floating weights that broadcast to the input (kept as a state): each
            element's loss is multiplied by its weight before the reduction.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
    """

    def __init__(self, weight=None, reduction: str = "mean"):
        super().__init__()
        _elementwise_weight(self, "BCELoss", "weight", weight)
        self.reduction = _reduction("BCELoss", reduction)

    def forward(self, input, target):
        """Probabilities and targets in ``[0, 1]`` of one shape -> the loss, in nats."""
        if self.weight is None:
            return F.binary_cross_entropy(input, target, reduction=self.reduction)
        per = F.binary_cross_entropy(input, target, reduction="none")
        return _reduce(per * _weights(self.weight, per, "BCELoss", "weight"), self.reduction)


def _weights(w: Tensor, per: Tensor, who: str, name: str) -> Tensor:
    """``w`` as ``per``'s dtype, checked to broadcast to ``per``'s shape."""
    if not _broadcasts_to(w.shape, per.shape):
        raise ValueError(f"{who}: {name} of shape {w.shape} does not broadcast to the input's "
                         f"shape {per.shape}")
    return _like(w, per, who, name)


class BCEWithLogitsLoss(_Loss):
    """Module form of :func:`~tapegrad.nn.functional.binary_cross_entropy_with_logits`
    (PyTorch's ``nn.BCEWithLogitsLoss``), with PyTorch's ``weight`` and ``pos_weight``.

    With ``pos_weight`` ``p`` the loss of logit ``x`` and target ``y`` is
    ``p y softplus(-x) + (1 - y) softplus(x)`` (the positive term weighted), computed without
    overflow.

    Args:
        weight: Optional floating weights that broadcast to the input (a state): each element's
            loss is multiplied by its weight before the reduction.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        pos_weight: Optional floating weights of the positive term that broadcast to the input
            (a state), usually one per class (last axis).
    """

    def __init__(self, weight=None, reduction: str = "mean", pos_weight=None):
        super().__init__()
        _elementwise_weight(self, "BCEWithLogitsLoss", "weight", weight)
        self.reduction = _reduction("BCEWithLogitsLoss", reduction)
        _elementwise_weight(self, "BCEWithLogitsLoss", "pos_weight", pos_weight)

    def forward(self, input, target):
        """Logits and targets in ``[0, 1]`` of one shape -> the loss, in nats."""
        who = "BCEWithLogitsLoss"
        if self.weight is None and self.pos_weight is None:
            return F.binary_cross_entropy_with_logits(input, target, reduction=self.reduction)
        per = F.binary_cross_entropy_with_logits(input, target, reduction="none")
        if self.pos_weight is not None:
            x = _floating(input, who)
            y = _like(target, x, who, "target")
            pw = _weights(self.pos_weight, per, who, "pos_weight")
            per = per + (pw - 1) * y * tnp.logaddexp(0.0, -x)
        if self.weight is not None:
            per = per * _weights(self.weight, per, who, "weight")
        return _reduce(per, self.reduction)


class NLLLoss(_Loss):
    """Module form of :func:`~tapegrad.nn.functional.nll_loss` (PyTorch's ``nn.NLLLoss``;
    classes last, as the function).

    Args:
        weight: Optional floating weights ``(C,)``, one per class (a state).
        ignore_index: Target value that contributes nothing.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
    """

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__()
        _class_weight(self, "NLLLoss", weight)
        self.ignore_index = _index("NLLLoss", ignore_index)
        self.reduction = _reduction("NLLLoss", reduction)

    def forward(self, input, target):
        """Log-probabilities ``(..., C)`` and class indices ``(...)`` -> the loss."""
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


def _index(who: str, value) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{who}: ignore_index must be an int, got {value!r}")
    return int(value)


class CrossEntropyLoss(_Loss):
    """Module form of :func:`~tapegrad.nn.functional.cross_entropy` (PyTorch's
    ``nn.CrossEntropyLoss``; logits with classes last, as the function: ``(N, C)`` is
    PyTorch's layout, ``(N, d, C)`` is PyTorch's ``(N, C, d)`` moved).

    Args:
        weight: Optional floating weights ``(C,)``, one per class (a state).
        ignore_index: Class-index target value that contributes nothing.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        label_smoothing: In ``[0, 1]``.

    Example:
        >>> import tapegrad as tg
        >>> loss = tg.nn.CrossEntropyLoss(label_smoothing=0.1)
        >>> round(float(loss(tg.Tensor([[2.0, 1.0, 0.1]]), [0])), 4)
        0.5137
    """

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean",
                 label_smoothing: float = 0.0):
        super().__init__()
        who = "CrossEntropyLoss"
        _class_weight(self, who, weight)
        self.ignore_index = _index(who, ignore_index)
        self.reduction = _reduction(who, reduction)
        self.label_smoothing = _number(who, "label_smoothing", label_smoothing, 0.0)
        if self.label_smoothing > 1:
            raise ValueError(f"{who}: label_smoothing must lie in [0, 1], got {label_smoothing}")

    def forward(self, input, target):
        """Logits ``(..., C)`` and class indices ``(...)`` or probabilities -> the loss."""
        return F.cross_entropy(input, target, ignore_index=self.ignore_index,
                               label_smoothing=self.label_smoothing, reduction=self.reduction,
                               weight=self.weight)
