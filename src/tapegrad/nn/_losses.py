"""PyTorch's other losses as pure functions: Poisson and Gaussian negative log-likelihoods, the
margin and embedding losses, and the connectionist temporal classification (CTC) loss.

Each function takes ``torch.nn.functional``'s arguments and computes its values and gradients
(checked against PyTorch in float64), without the deprecated ``size_average``/``reduce``
switches (use ``reduction=``). All but :func:`ctc_loss` are compositions of differentiable
:mod:`tapegrad.numpy` operations, so they differentiate to any order and work under ``vmap``,
``jvp`` and ``jit`` with no rules of their own. :func:`ctc_loss` is one primitive,
:class:`CTCLoss`: its forward is the log-space alpha recursion on backend arrays, its backward
the alpha-beta recursion written with tapegrad operations (so it differentiates again).

The classes of a multi-class loss are on the last axis, as everywhere in
:mod:`tapegrad.nn.functional` (for these losses PyTorch's layout is the same: ``(N, C)``).
"""

from __future__ import annotations

import math

import numpy as np

from tapegrad import numpy as tnp
from tapegrad.core import dtypes as _tg_dtypes
from tapegrad.core._keywords import strict_keywords
from tapegrad.core.function import Function
from tapegrad.core.tensor import Tensor, all_values
from tapegrad.nn._functional import (
    _broadcasts_to,
    _check_loss_shapes,
    _check_reduction,
    _floating,
    _like,
    _pair_loss_inputs,
    _real_arg,
    _reduce,
)
from tapegrad.ops._registry import bool_arg
from tapegrad.ops.nn import _with_batch

__all__ = [
    "poisson_nll_loss",
    "gaussian_nll_loss",
    "margin_ranking_loss",
    "cosine_embedding_loss",
    "triplet_margin_loss",
    "multi_margin_loss",
    "multilabel_margin_loss",
    "multilabel_soft_margin_loss",
    "soft_margin_loss",
    "hinge_embedding_loss",
    "ctc_loss",
    "CTCLoss",
]

_HINTS = {
    "size_average": "PyTorch's deprecated switch; use reduction=",
    "reduce": "PyTorch's deprecated switch; use reduction=",
}


# -- argument checks -------------------------------------------------------------------------
def _finite(value, who: str, name: str, low: float | None = None, strict: bool = False) -> float:
    """A finite real parameter (``margin``, ``eps``, ``p``), at least (or above) ``low``."""
    v = _real_arg(value, who, name)
    if not math.isfinite(v) or (low is not None and (v <= low if strict else v < low)):
        bound = "" if low is None else f" and {'>' if strict else '>='} {low:g}"
        raise ValueError(f"{who}: {name} must be a finite number{bound}, got {value!r}")
    return v


def _same_shapes(who: str, named: dict) -> None:
    """Raise ValueError unless every Tensor in ``named`` (name -> Tensor) has one shape."""
    shapes = {n: tuple(t.shape) for n, t in named.items()}
    first = next(iter(shapes.values()))
    if any(s != first for s in shapes.values()):
        shown = ", ".join(f"{n} {s}" for n, s in shapes.items())
        raise ValueError(f"{who}: {', '.join(shapes)} must have one shape, got {shown}")


def _two_inputs(input1, input2, reduction, who: str) -> tuple:
    """A pair loss's checked ``reduction`` and its two floating inputs of one shape and dtype."""
    _check_reduction(reduction, who)
    x1 = _floating(input1, who, "input1")
    x2 = _like(_floating(input2, who, "input2"), x1, who, "input2")
    _same_shapes(who, {"input1": x1, "input2": x2})
    return x1, x2


def _hinge(z: Tensor, at_zero: bool) -> Tensor:
    """``max(z, 0)``; its derivative at ``z == 0`` is 1 if ``at_zero`` (PyTorch's ``clamp_min``)
    or 0 (the kernels that test ``z > 0``)."""
    return tnp.where(z >= 0 if at_zero else z > 0, z, 0.0)


def _integers(value, who: str, name: str, device: str) -> Tensor:
    """Integer data (labels, lengths) as an integer Tensor on ``device``.

    Raises:
        TypeError: for a non-numeric value, or one whose dtype is not an integer dtype.
    """
    if isinstance(value, Tensor):
        t = value if value.device == device or device == "cpu" else value.to_device(device)
    else:
        try:
            arr = (value if hasattr(value, "__cuda_array_interface__")
                   else np.asarray(value))
            if arr.size == 0 and arr.dtype.kind in "fV":  # an empty list: no labels at all
                arr = arr.astype(np.int64)
            t = Tensor(arr, device=device if device != "cpu" else None)
        except (TypeError, ValueError):
            raise TypeError(f"{who}: {name} must hold integers, got {type(value).__name__} "
                            f"{value!r:.40}") from None
    if t.dtype.kind not in "iu":
        raise TypeError(f"{who}: {name} must have an integer dtype, got {t.dtype}; cast it "
                        f"(for example {name}.astype('int64'))")
    return t


# -- Poisson and Gaussian negative log-likelihoods -------------------------------------------
@strict_keywords(hints=_HINTS)
def poisson_nll_loss(input, target, log_input: bool = True, full: bool = False,
                     eps: float = 1e-8, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of a Poisson distribution (``torch.nn.functional.poisson_nll_loss``).

    With ``log_input`` (the default) ``input`` is the log of the rate and the loss is
    ``exp(input) - target * input``; otherwise ``input`` is the rate and the loss is
    ``input - target * log(input + eps)``. ``full`` adds Stirling's approximation of
    ``log(target!)``, ``target * log(target) - target + 0.5 * log(2 pi target)``, where
    ``target > 1`` (0 elsewhere), so the loss is the full negative log-likelihood.

    Args:
        input: Floating Tensor of any shape: log-rates, or rates (``log_input=False``).
        target: Counts (usually non-negative integers, any real accepted) of ``input``'s
            shape, or a scalar; differentiable.
        log_input: Whether ``input`` holds log-rates.
        full: Add the Stirling term.
        eps: ``>= 0``, added to the rate inside the log when ``log_input`` is False.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"`` (``input``'s shape).

    Returns:
        Tensor of ``input``'s dtype, in nats.

    Raises:
        TypeError: for non-floating input, non-numeric target or non-bool flags.
        ValueError: for a bad reduction or ``eps``, or a target of another shape.

    Example:
        >>> import tapegrad as tg
        >>> F = tg.nn.functional
        >>> round(float(F.poisson_nll_loss(tg.Tensor([0.0, 1.0]), tg.Tensor([1.0, 2.0]))), 4)
        0.8591
    """
    who = "poisson_nll_loss"
    x, y = _pair_loss_inputs(input, target, reduction, who)
    log_input = bool_arg(log_input, who, "log_input")
    full = bool_arg(full, who, "full")
    eps = _finite(eps, who, "eps", 0.0)
    per = tnp.exp(x) - y * x if log_input else x - y * tnp.log(x + eps)
    if full:
        big = y > 1
        ys = tnp.where(big, y, 2.0)  # a value where every term is finite (no NaN derivative)
        stirling = ys * tnp.log(ys) - ys + 0.5 * tnp.log((2 * math.pi) * ys)
        per = per + tnp.where(big, stirling, 0.0)
    return _reduce(per, reduction)


def _gaussian_var(var, x: Tensor, who: str) -> Tensor:
    """``var`` shaped to broadcast against ``x`` by PyTorch's rules (see gaussian_nll_loss)."""
    if not isinstance(var, Tensor) and np.ndim(var) == 0 and not hasattr(var, "shape"):
        v = _real_arg(var, who, "var")  # a number: one variance for every element
        if v < 0:
            raise ValueError(f"{who}: var must be non-negative, got {v}")
        return tnp.full(x.shape, v, dtype=x.dtype, device=x.device)
    v = _like(var, x, who, "var")
    values = all_values(v)
    if values.size and np.nanmin(values) < 0:
        raise ValueError(f"{who}: var has negative entries (min {np.nanmin(values)}); "
                         "variances must be >= 0")
    if v.shape == x.shape:
        return v
    if v.shape == x.shape[:-1]:  # one variance per example: the last axis shares it
        return tnp.expand_dims(v, -1)
    differ = [i for i, (a, b) in enumerate(zip(x.shape, v.shape)) if a != b]
    if v.ndim == x.ndim and len(differ) == 1 and v.shape[differ[0]] == 1:
        return v  # one axis of size 1, shared along that axis
    raise ValueError(
        f"{who}: var of shape {v.shape} does not fit input of shape {x.shape}: give input's "
        f"shape, input's shape without its last axis {x.shape[:-1]}, or input's shape with one "
        "axis of size 1"
    )


@strict_keywords(hints=_HINTS)
def gaussian_nll_loss(input, target, var, full: bool = False, eps: float = 1e-6,
                      reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of a Gaussian (``torch.nn.functional.gaussian_nll_loss``).

    ``0.5 * (log(v) + (input - target)**2 / v)``, plus ``0.5 * log(2 pi)`` with ``full``,
    where ``v = max(var, eps)``. As in PyTorch the clamp is invisible to the gradient: the
    derivative in ``var`` is that of the formula at ``v`` (the clamp is not differentiated).

    ``var`` fits ``input`` by PyTorch's rules: ``input``'s shape (one variance per element),
    ``input``'s shape without its last axis (one per example, shared along the last axis),
    ``input``'s shape with one axis of size 1 (shared along that axis), or a number.

    Args:
        input: Floating Tensor ``(N, *)`` or ``(*)``: the means.
        target: Samples: ``input``'s shape, or a shape that broadcasts to it (PyTorch allows
            one axis of size 1); differentiable.
        var: Non-negative variances (Tensor or number, see above); differentiable.
        full: Add the constant ``0.5 * log(2 pi)``.
        eps: ``>= 0``; the smallest variance used.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"`` (``input``'s shape).

    Returns:
        Tensor of ``input``'s dtype, in nats.

    Raises:
        TypeError: for non-floating input or non-numeric target or var.
        ValueError: for a negative variance, a var or target shape that does not fit,
            a bad ``eps`` or reduction.

    Example:
        >>> import tapegrad as tg
        >>> F = tg.nn.functional
        >>> float(F.gaussian_nll_loss(tg.Tensor([1.0, 2.0]), tg.Tensor([1.0, 2.0]), 1.0))
        0.0
    """
    who = "gaussian_nll_loss"
    _check_reduction(reduction, who)
    x = _floating(input, who)
    y = _like(target, x, who, "target")
    if not _broadcasts_to(y.shape, x.shape):
        raise ValueError(f"{who}: target of shape {y.shape} does not broadcast to input's "
                         f"shape {x.shape}")
    full = bool_arg(full, who, "full")
    eps = _finite(eps, who, "eps", 0.0)
    v = _gaussian_var(var, x, who)
    # max(var, eps) in value; in the derivative, var itself (PyTorch clamps without autograd)
    v = tnp.where(v < eps, (v - tnp.stop_gradient(v)) + eps, v)
    d = x - y
    per = 0.5 * (tnp.log(v) + d * d / v)
    if full:
        per = per + 0.5 * math.log(2 * math.pi)
    return _reduce(per, reduction)


# -- margin and embedding losses -------------------------------------------------------------
@strict_keywords(hints=_HINTS)
def margin_ranking_loss(input1, input2, target, margin: float = 0.0,
                        reduction: str = "mean") -> Tensor:
    """Margin ranking loss ``max(0, -target * (input1 - input2) + margin)``
    (``torch.nn.functional.margin_ranking_loss``).

    ``target`` is 1 where ``input1`` should rank higher, -1 where ``input2`` should.

    Args:
        input1, input2: Floating Tensors of one shape.
        target: Tensor of their shape, or a scalar (usually 1 or -1); differentiable.
        margin: Real number.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.

    Returns:
        Tensor of ``input1``'s dtype.

    Raises:
        ValueError: for inputs of different shapes, a target of another shape, or a bad
            reduction.

    Example:
        >>> import tapegrad as tg
        >>> F = tg.nn.functional
        >>> float(F.margin_ranking_loss(tg.Tensor([1.0, 0.0]), tg.Tensor([0.0, 1.0]), [1, 1]))
        0.5
    """
    who = "margin_ranking_loss"
    x1, x2 = _two_inputs(input1, input2, reduction, who)
    y = _like(target, x1, who, "target")
    _check_loss_shapes(who, x1.shape, y.shape, "input1", "target")
    margin = _finite(margin, who, "margin")
    return _reduce(_hinge(margin - y * (x1 - x2), at_zero=True), reduction)


@strict_keywords(hints=_HINTS)
def hinge_embedding_loss(input, target, margin: float = 1.0,
                         reduction: str = "mean") -> Tensor:
    """Hinge embedding loss (``torch.nn.functional.hinge_embedding_loss``): ``input`` where
    ``target == 1``, ``max(0, margin - input)`` where ``target == -1``.

    As in PyTorch, a target that is neither 1 nor -1 contributes both terms.

    Args:
        input: Floating Tensor of any shape (usually distances).
        target: Labels (1 or -1) of ``input``'s shape, or a scalar; no gradient.
        margin: Real number.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.

    Returns:
        Tensor of ``input``'s dtype.

    Raises:
        ValueError: for a target of another shape or a bad reduction.

    Example:
        >>> import tapegrad as tg
        >>> F = tg.nn.functional
        >>> F.hinge_embedding_loss(tg.Tensor([0.3, 0.3]), [1, -1], reduction="none")
        Tensor([0.3, 0.7], dtype=float32)
    """
    who = "hinge_embedding_loss"
    x, y = _pair_loss_inputs(input, target, reduction, who)
    margin = _finite(margin, who, "margin")
    per = (tnp.where(y != 1, _hinge(margin - x, at_zero=True), 0.0)
           + tnp.where(y != -1, x, 0.0))
    return _reduce(per, reduction)


@strict_keywords(hints=_HINTS)
def soft_margin_loss(input, target, reduction: str = "mean") -> Tensor:
    """Two-class logistic loss ``log(1 + exp(-target * input))``
    (``torch.nn.functional.soft_margin_loss``), computed without overflow.

    Args:
        input: Floating Tensor of any shape (scores).
        target: Labels (1 or -1) of ``input``'s shape, or a scalar; differentiable.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.

    Returns:
        Tensor of ``input``'s dtype, in nats.

    Raises:
        ValueError: for a target of another shape or a bad reduction.

    Example:
        >>> import tapegrad as tg
        >>> F = tg.nn.functional
        >>> round(float(F.soft_margin_loss(tg.Tensor([0.0]), [1.0])), 4)
        0.6931
    """
    who = "soft_margin_loss"
    x, y = _pair_loss_inputs(input, target, reduction, who)
    return _reduce(tnp.logaddexp(0.0, -y * x), reduction)


@strict_keywords(hints=_HINTS)
def multilabel_soft_margin_loss(input, target, weight=None, reduction: str = "mean") -> Tensor:
    """Multi-label one-versus-all logistic loss
    (``torch.nn.functional.multilabel_soft_margin_loss``).

    ``loss_n = -mean_c w_c (y_nc log sigmoid(x_nc) + (1 - y_nc) log sigmoid(-x_nc))``, the
    mean over the classes (last axis), then the reduction over the examples.

    Args:
        input: Floating Tensor ``(N, C)`` or ``(C,)`` (generally ``(..., C)``): scores.
        target: Targets in ``[0, 1]`` of ``input``'s shape (or a scalar); differentiable.
        weight: Optional floating weights that broadcast to ``input``'s shape, usually
            ``(C,)``; differentiable.
        reduction: ``"mean"`` (default, over examples), ``"sum"`` or ``"none"`` (shape
            ``input.shape[:-1]``).

    Returns:
        Tensor of ``input``'s dtype, in nats.

    Raises:
        TypeError: for non-floating input or weight.
        ValueError: for a 0-d input, a target or weight that does not fit, a bad reduction.

    Example:
        >>> import tapegrad as tg
        >>> F = tg.nn.functional
        >>> round(float(F.multilabel_soft_margin_loss(tg.Tensor([[0.0, 0.0]]), [[1.0, 0.0]])), 4)
        0.6931
    """
    who = "multilabel_soft_margin_loss"
    _check_reduction(reduction, who)
    x = _floating(input, who)
    if x.ndim == 0:
        raise ValueError(f"{who}: input must have a class axis (shape (N, C) or (C,)), got a "
                         "0-d Tensor")
    y = _like(target, x, who, "target")
    _check_loss_shapes(who, x.shape, y.shape, "input", "target")
    per = y * tnp.logaddexp(0.0, -x) + (1 - y) * tnp.logaddexp(0.0, x)
    if weight is not None:
        w = _like(_floating(weight, who, "weight"), x, who, "weight")
        if not _broadcasts_to(w.shape, x.shape):
            raise ValueError(f"{who}: weight of shape {w.shape} does not broadcast to input's "
                             f"shape {x.shape}; give one weight per class, shape "
                             f"({x.shape[-1]},)")
        per = per * w
    c = x.shape[-1]
    per = tnp.sum(per, axis=-1) / c if c else tnp.sum(per, axis=-1) * math.nan
    return _reduce(per, reduction)


@strict_keywords(hints=_HINTS)
def cosine_embedding_loss(input1, input2, target, margin: float = 0.0,
                          reduction: str = "mean") -> Tensor:
    """Cosine embedding loss (``torch.nn.functional.cosine_embedding_loss``): ``1 - cos``
    where ``target == 1``, ``max(0, cos - margin)`` where ``target == -1``, 0 elsewhere.

    ``cos = <x1, x2> / sqrt((|x1|^2 + 1e-12) (|x2|^2 + 1e-12))`` along the last axis (the
    ``1e-12`` is PyTorch's, so a zero vector gives ``cos = 0``).

    Args:
        input1, input2: Floating Tensors of one shape, ``(N, D)`` or ``(D,)``.
        target: Labels (1 or -1) of shape ``(N,)`` (or ``()`` for 1-D inputs); no gradient.
        margin: Real number, usually in ``[-1, 1]``.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"`` (shape ``(N,)`` or ``()``).

    Returns:
        Tensor of ``input1``'s dtype.

    Raises:
        ValueError: for inputs that are not 1-D or 2-D or differ in shape, a target of
            another shape than ``input1.shape[:-1]``, a bad reduction.

    Example:
        >>> import tapegrad as tg
        >>> F = tg.nn.functional
        >>> float(F.cosine_embedding_loss(tg.Tensor([[1.0, 0.0]]), tg.Tensor([[0.0, 1.0]]), [1]))
        1.0
    """
    who = "cosine_embedding_loss"
    x1, x2 = _two_inputs(input1, input2, reduction, who)
    if x1.ndim not in (1, 2):
        raise ValueError(f"{who}: input1 and input2 must have shape (N, D) or (D,), got "
                         f"{x1.shape}")
    y = _like(target, x1, who, "target")
    if y.shape != x1.shape[:-1]:
        raise ValueError(f"{who}: target of shape {y.shape} does not fit inputs of shape "
                         f"{x1.shape}; expected {x1.shape[:-1]} (one label per pair)")
    margin = _finite(margin, who, "margin")
    tiny = 1e-12
    dot = tnp.sum(x1 * x2, axis=-1)
    denom = tnp.sqrt((tnp.sum(x1 * x1, axis=-1) + tiny) * (tnp.sum(x2 * x2, axis=-1) + tiny))
    cos = dot / denom
    per = tnp.where(y == 1, 1 - cos, 0.0) + tnp.where(y == -1, _hinge(cos - margin, True), 0.0)
    return _reduce(per, reduction)


def _pairwise_distance(a: Tensor, b: Tensor, p: float, eps: float) -> Tensor:
    """``||a - b + eps||_p`` along the last axis (PyTorch's ``pairwise_distance``); the
    derivative at a zero difference is 0, as PyTorch's norm."""
    d = tnp.abs(a - b + eps)
    if math.isinf(p):
        return tnp.max(d, axis=-1) if d.shape[-1] else tnp.sum(d, axis=-1)
    s = tnp.sum(d * d if p == 2 else d**p, axis=-1)
    pos = s > 0
    safe = tnp.where(pos, s, 1.0)
    return tnp.where(pos, tnp.sqrt(safe) if p == 2 else safe ** (1.0 / p), 0.0)


@strict_keywords(hints=_HINTS)
def triplet_margin_loss(anchor, positive, negative, margin: float = 1.0, p: float = 2.0,
                        eps: float = 1e-6, swap: bool = False,
                        reduction: str = "mean") -> Tensor:
    """Triplet margin loss ``max(0, margin + d(a, p) - d(a, n))``
    (``torch.nn.functional.triplet_margin_loss``).

    ``d(x, y) = ||x - y + eps||_p`` along the last axis (PyTorch's ``pairwise_distance``).
    With ``swap``, ``d(a, n)`` is replaced by ``min(d(a, n), d(p, n))`` (Balntas et al.,
    2016).

    Args:
        anchor, positive, negative: Floating Tensors of one shape, ``(N, D)`` or ``(D,)``
            (the last axis is the embedding).
        margin: ``> 0``.
        p: Norm degree ``> 0`` (``math.inf`` for the maximum norm).
        eps: Real number added to each difference (PyTorch's, to avoid a zero norm).
        swap: Use the distance swap.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"`` (shape ``(N,)`` or ``()``).

    Returns:
        Tensor of ``anchor``'s dtype.

    Raises:
        ValueError: for 0-d inputs or inputs of different shapes, ``margin <= 0``,
            ``p <= 0`` or a bad reduction.

    References:
        Schroff, Kalenichenko and Philbin, "FaceNet", CVPR 2015; Balntas, Riba, Ponsa and
        Mikolajczyk, "Learning local feature descriptors with triplets and shallow
        convolutional neural networks", BMVC 2016 (the swap).

    Example:
        >>> import tapegrad as tg
        >>> F = tg.nn.functional
        >>> a, pos, neg = tg.Tensor([[0.0, 0.0]]), tg.Tensor([[3.0, 4.0]]), tg.Tensor([[0.0, 1.0]])
        >>> round(float(F.triplet_margin_loss(a, pos, neg, eps=0.0)), 4)
        5.0
    """
    who = "triplet_margin_loss"
    _check_reduction(reduction, who)
    a = _floating(anchor, who, "anchor")
    pos = _like(_floating(positive, who, "positive"), a, who, "positive")
    neg = _like(_floating(negative, who, "negative"), a, who, "negative")
    _same_shapes(who, {"anchor": a, "positive": pos, "negative": neg})
    if a.ndim == 0:
        raise ValueError(f"{who}: anchor, positive and negative must have an embedding axis "
                         "(shape (N, D) or (D,)), got 0-d Tensors")
    margin = _finite(margin, who, "margin", 0.0, strict=True)
    pv = _real_arg(p, who, "p")
    if not pv > 0 or math.isnan(pv):
        raise ValueError(f"{who}: p must be > 0 (math.inf for the maximum norm), got {p!r}")
    eps = _finite(eps, who, "eps")
    swap = bool_arg(swap, who, "swap")
    d_pos = _pairwise_distance(a, pos, pv, eps)
    d_neg = _pairwise_distance(a, neg, pv, eps)
    if swap:
        d_neg = tnp.minimum(d_neg, _pairwise_distance(pos, neg, pv, eps))
    return _reduce(_hinge(margin + d_pos - d_neg, at_zero=True), reduction)


# -- multi-class margin losses ---------------------------------------------------------------
def _class_scores(input, who: str) -> Tensor:
    """Scores ``(N, C)``, ``(C,)`` or 0-d (one class), floating, with ``C > 0``."""
    x = _floating(input, who)
    if x.ndim > 2 or (x.ndim >= 1 and x.shape[-1] == 0):
        raise ValueError(f"{who}: input must have shape (N, C) or (C,) with C > 0 (or be 0-d), "
                         f"got {x.shape}")
    return x


def _check_labels(values: np.ndarray, low: int, high: int, who: str, name: str) -> None:
    """Raise ValueError unless every entry of ``values`` lies in ``[low, high)``."""
    if values.size and (values.min() < low or values.max() >= high):
        bad = values[(values < low) | (values >= high)].ravel()[0]
        raise ValueError(f"{who}: {name} value {bad} is out of range; expected values in "
                         f"[{low}, {high - 1}]")


@strict_keywords(hints=_HINTS)
def multi_margin_loss(input, target, p: int = 1, margin: float = 1.0, weight=None,
                      reduction: str = "mean") -> Tensor:
    """Multi-class hinge loss (``torch.nn.functional.multi_margin_loss``).

    For each example with scores ``x`` and class ``y``:
    ``loss = sum_{j != y} w_y max(0, margin - x_y + x_j)**p / C``.

    Args:
        input: Floating scores ``(N, C)`` or ``(C,)`` (a 0-d input is one class), ``C > 0``.
        target: Class indices: shape ``(N,)`` for ``(N, C)`` input, ``()`` or ``(1,)``
            for ``(C,)`` input; integers in ``[0, C)``.
        p: 1 or 2.
        margin: Real number.
        weight: Optional floating weights ``(C,)``, one per class (``w_y`` above);
            differentiable.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"`` (shape of ``target``).

    Returns:
        Tensor of ``input``'s dtype.

    Raises:
        TypeError: for non-floating input or weight, non-integer targets or ``p``.
        ValueError: for ``p`` other than 1 or 2, shapes that do not fit, targets out of
            range, a bad reduction.

    Example:
        >>> import tapegrad as tg
        >>> F = tg.nn.functional
        >>> round(float(F.multi_margin_loss(tg.Tensor([[0.1, 0.2, 0.4, 0.8]]), [3])), 4)
        0.325
    """
    who = "multi_margin_loss"
    _check_reduction(reduction, who)
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, np.integer, float)):
        raise TypeError(f"{who}: p must be 1 or 2, got {p!r}")
    if p not in (1, 2):
        raise ValueError(f"{who}: p must be 1 or 2, got {p!r}")
    margin = _finite(margin, who, "margin")
    x = _class_scores(input, who)
    t = _integers(target, who, "target", x.device)
    n = x.shape[0] if x.ndim == 2 else 1
    if t.ndim > 1 or t.size != n or (x.ndim == 2 and t.shape != (n,)):
        expected = f"({n},)" if x.ndim == 2 else "() or (1,)"
        raise ValueError(f"{who}: target of shape {t.shape} does not fit input of shape "
                         f"{x.shape}; expected {expected}")
    c = x.shape[-1] if x.ndim else 1
    _check_labels(all_values(t), 0, c, who, "target")
    rows = tnp.reshape(x, (n, c))
    labels = tnp.reshape(t, (n,))
    picked = tnp.take_along_axis(rows, tnp.expand_dims(labels, -1), axis=-1)  # (n, 1)
    z = margin - picked + rows
    h = _hinge(z, at_zero=False)
    if p == 2:
        h = h * h
    others = tnp.not_equal(tnp.expand_dims(labels, -1), tnp.arange(c, device=x.device))
    per = tnp.sum(tnp.where(others, h, 0.0), axis=-1)
    if weight is not None:
        w = _like(_floating(weight, who, "weight"), x, who, "weight")
        if w.shape != (c,):
            raise ValueError(f"{who}: weight must have shape ({c},) (one per class), got "
                             f"{w.shape}")
        per = per * tnp.take(w, labels)
    per = tnp.reshape(per / c, t.shape)
    return _reduce(per, reduction)


@strict_keywords(hints=_HINTS)
def multilabel_margin_loss(input, target, reduction: str = "mean") -> Tensor:
    """Multi-label hinge loss (``torch.nn.functional.multilabel_margin_loss``).

    Each row of ``target`` lists the example's classes, ended by the first ``-1`` (the rest
    of the row is ignored). With ``J`` those classes and ``x`` the scores:
    ``loss = sum_{j in J} sum_{i not in J} max(0, 1 - (x_j - x_i)) / C`` (a class listed
    twice counts twice, as in PyTorch).

    Args:
        input: Floating scores ``(N, C)`` or ``(C,)`` (a 0-d input is one class), ``C > 0``.
        target: Integer Tensor of ``input``'s shape, values in ``[-1, C)``.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"`` (shape ``(N,)`` for 2-D
            input, ``()`` otherwise).

    Returns:
        Tensor of ``input``'s dtype.

    Raises:
        TypeError: for non-floating input or non-integer targets.
        ValueError: for a target of another shape, values out of range, a bad reduction.

    Example:
        >>> import tapegrad as tg
        >>> F = tg.nn.functional
        >>> x = tg.Tensor([[0.1, 0.2, 0.4, 0.8]])
        >>> round(float(F.multilabel_margin_loss(x, [[3, 0, -1, 1]])), 4)
        0.85
    """
    who = "multilabel_margin_loss"
    _check_reduction(reduction, who)
    x = _class_scores(input, who)
    t = _integers(target, who, "target", x.device)
    if t.shape != x.shape and not (x.ndim == 0 and t.shape == (1,)):
        raise ValueError(f"{who}: target of shape {t.shape} does not fit input of shape "
                         f"{x.shape}; expected input's shape (class lists padded with -1)")
    c = x.shape[-1] if x.ndim else 1
    _check_labels(all_values(t), -1, c, who, "target")
    n = x.shape[0] if x.ndim == 2 else 1
    rows = tnp.reshape(x, (n, c))
    labels = tnp.reshape(t, (n, c))
    listed = tnp.cumprod(tnp.astype(labels >= 0, np.int64), axis=-1)  # before the first -1
    classes = tnp.arange(c, device=x.device)
    onehot = tnp.equal(tnp.expand_dims(labels, -1), classes)  # (n, slot, class)
    counts = tnp.sum(tnp.astype(onehot, x.dtype) * tnp.expand_dims(
        tnp.astype(listed, x.dtype), -1), axis=1)  # (n, C): how often each class is listed
    others = counts == 0
    z = 1 - tnp.expand_dims(rows, -1) + tnp.expand_dims(rows, 1)  # z[n, j, i]
    h = _hinge(z, at_zero=False) * tnp.expand_dims(counts, -1)
    per = tnp.sum(tnp.where(tnp.expand_dims(others, 1), h, 0.0), axis=(1, 2)) / c
    per = per if x.ndim == 2 else tnp.reshape(per, ())
    return _reduce(per, reduction)


# -- connectionist temporal classification ---------------------------------------------------
def _extended(xp, targets, blank: int):
    """The extended label sequences ``(N, 2S + 1)``: a blank before, between and after the
    labels (Graves et al., 2006, section 4.1)."""
    n, s = targets.shape
    ext = xp.full((n, 2 * s + 1), blank, dtype=targets.dtype)
    ext[:, 1::2] = targets
    return ext


def _ctc_nll(xp, lp, targets, il, tl, blank: int):
    """``-log p(target | log_probs)`` ``(N,)`` by the log-space alpha recursion on backend
    arrays: ``lp`` ``(T, N, C)``, padded ``targets`` ``(N, S)``, lengths ``(N,)``."""
    t_max, n, c = lp.shape
    ext = _extended(xp, targets, blank)
    width = ext.shape[1]
    s = xp.arange(width)
    valid = s[None, :] < (2 * tl + 1)[:, None]
    labels = ext[valid]
    if labels.size and (labels.min() < 0 or labels.max() >= c):
        raise ValueError(f"ctc_loss: a target label is out of range for {c} classes")
    ext = xp.where(valid, ext, blank)  # the padding past each target: never read
    skip = xp.zeros((n, width), dtype=bool)
    skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    neg = -np.inf
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        emit = xp.where(valid[None], lp[:, xp.arange(n)[:, None], ext], neg)  # (T, N, 2S+1)
        final = xp.full((n, width), neg, dtype=lp.dtype)  # alpha at each example's last frame
        la = final
        for t in range(t_max):
            if t == 0:
                la = xp.where(s[None, :] < 2, emit[0], neg)
            else:
                prev1 = xp.concatenate([xp.full((n, 1), neg, lp.dtype), la[:, :-1]], axis=1)
                prev2 = xp.concatenate([xp.full((n, 2), neg, lp.dtype), la], axis=1)[:, :width]
                prev2 = xp.where(skip, prev2, neg)
                m = xp.maximum(xp.maximum(la, prev1), prev2)
                m = xp.where(xp.isfinite(m), m, 0)
                la = xp.log(xp.exp(la - m) + xp.exp(prev1 - m) + xp.exp(prev2 - m)) + m + emit[t]
            final = xp.where((il == t + 1)[:, None], la, final)
        rows = xp.arange(n)
        last = final[rows, 2 * tl]
        before = xp.where(tl > 0, final[rows, xp.maximum(2 * tl - 1, 0)], neg)
        ll = xp.logaddexp(last, before)
    ll = xp.where(il == 0, xp.where(tl == 0, 0.0, neg), ll)
    return (-ll).astype(lp.dtype, copy=False)


def _sentinel(dtype) -> float:
    """A finite stand-in for ``log 0`` in the differentiable recursion: far below any real
    log-probability, yet three of them add up without overflow."""
    return -1e30 if _tg_dtypes.finfo(dtype).max > 1e35 else float(_tg_dtypes.finfo(dtype).min) / 16


def _shift(a: Tensor, k: int, fill: float, forward: bool = True) -> Tensor:
    """``a`` ``(N, W)`` moved ``k`` places along its last axis (towards higher indices when
    ``forward``), the freed places filled with ``fill``."""
    n, width = a.shape
    pad = tnp.full((n, k), fill, dtype=a.dtype, device=a.device)
    if forward:
        return tnp.concatenate([pad, a], axis=1)[:, :width]
    return tnp.concatenate([a, pad], axis=1)[:, k:]


def _lse3(a: Tensor, b: Tensor, c: Tensor) -> Tensor:
    return tnp.logaddexp(tnp.logaddexp(a, b), c)


def _ctc_grad(lp: Tensor, targets: Tensor, il: Tensor, tl: Tensor, blank: int,
              zero_infinity: bool) -> Tensor:
    """``d nll / d log_probs`` ``(T, N, C)``, written with tapegrad ops (so it differentiates
    again): ``-sum_{s: l'_s = c} alpha_t(s) beta_t(s) / y_t(c) / p``, by the alpha and beta
    recursions in log space (Graves et al., 2006, eqs. 14-16), each including the emission
    at ``t``. Zero for ``t >= input_length``; NaN (0 with ``zero_infinity``) for an example
    whose target cannot be aligned, where the loss is infinite."""
    t_max, n, c = lp.shape
    dt = lp.dtype
    if t_max == 0 or n == 0:
        return tnp.zeros(lp.shape, dtype=dt, device=lp.device)
    neg = _sentinel(dt)
    width = 2 * targets.shape[1] + 1
    blanks = tnp.full(targets.shape, blank, dtype=targets.dtype, device=lp.device)
    ext = tnp.concatenate([tnp.reshape(tnp.stack([blanks, targets], axis=-1), (n, width - 1)),
                           tnp.full((n, 1), blank, dtype=targets.dtype, device=lp.device)],
                          axis=1)  # blank, l_1, blank, l_2, ..., blank
    s = tnp.arange(width, device=lp.device)
    valid = tnp.expand_dims(s, 0) < tnp.expand_dims(2 * tl + 1, 1)
    ext = tnp.where(valid, ext, blank)  # the padding past each target: never read
    skip = (ext != blank) & (ext != _shift(ext, 2, -1))  # l'_s may follow l'_{s-2}
    skip = skip & (tnp.expand_dims(s, 0) >= 2)
    skip_next = _shift(skip, 2, False, forward=False)  # s may be followed by s + 2
    emit = tnp.take_along_axis(lp, tnp.broadcast_to(tnp.expand_dims(ext, 0),
                                                     (t_max, n, width)), axis=-1)
    emit = tnp.where(valid, tnp.maximum(emit, neg), neg)
    alphas = [tnp.where(tnp.expand_dims(s, 0) < 2, emit[0], neg)]
    for t in range(1, t_max):
        la = alphas[-1]
        alphas.append(_lse3(la, _shift(la, 1, neg), tnp.where(skip, _shift(la, 2, neg), neg))
                      + emit[t])
    log_alpha = tnp.stack(alphas)
    two_tl = tnp.expand_dims(2 * tl, 1)
    last = (tnp.expand_dims(s, 0) == two_tl) | (tnp.expand_dims(s, 0) == two_tl - 1)
    first_t = tnp.expand_dims(il - 1, 1)
    betas: list = [None] * t_max
    lb = tnp.full((n, width), neg, dtype=dt, device=lp.device)
    for t in range(t_max - 1, -1, -1):
        rec = _lse3(lb, _shift(lb, 1, neg, forward=False),
                    tnp.where(skip_next, _shift(lb, 2, neg, forward=False), neg)) + emit[t]
        lb = tnp.where(first_t == t, tnp.where(last, emit[t], neg),
                       tnp.where(first_t > t, rec, neg))
        betas[t] = lb
    log_beta = tnp.stack(betas)
    # log p(l | x): alpha at each example's last frame, in its last two extended positions
    at_end = tnp.take_along_axis(log_alpha, tnp.broadcast_to(
        tnp.reshape(tnp.clip(il - 1, 0, t_max - 1), (1, n, 1)), (1, n, width)), axis=0)[0]
    end = tnp.take_along_axis(at_end, tnp.expand_dims(2 * tl, 1), axis=1)[:, 0]
    before = tnp.take_along_axis(at_end, tnp.expand_dims(tnp.maximum(2 * tl - 1, 0), 1),
                                 axis=1)[:, 0]
    log_p = tnp.logaddexp(end, tnp.where(tl > 0, before, neg))
    log_p = tnp.where(il == 0, tnp.where(tl == 0, 0.0, neg), log_p)
    feasible = log_p > 0.5 * neg
    log_p = tnp.where(feasible, log_p, 0.0)
    arg = log_alpha + log_beta - emit - tnp.reshape(log_p, (1, n, 1))
    occupancy = tnp.exp(tnp.where(tnp.reshape(feasible, (1, n, 1)), arg, neg))  # (T, N, 2S+1)
    classes = tnp.arange(c, device=lp.device)
    onehot = tnp.astype(tnp.equal(tnp.expand_dims(ext, -1), classes), dt)  # (N, 2S+1, C)
    per_class = tnp.matmul(tnp.transpose(occupancy, (1, 0, 2)), onehot)  # (N, T, C)
    grad = -tnp.transpose(per_class, (1, 0, 2))
    infeasible = tnp.reshape(~feasible, (1, n, 1))
    if zero_infinity:
        return tnp.where(infeasible, 0.0, grad)
    frames = (tnp.reshape(tnp.arange(t_max, device=lp.device), (t_max, 1, 1))
              < tnp.reshape(il, (1, n, 1)))
    return tnp.where(infeasible & frames, math.nan, grad)


def _check_ctc_arrays(lp_shape, targets_shape, il_shape, tl_shape, blank) -> None:
    """The shapes :class:`CTCLoss` takes (ValueError naming ``ctc_loss`` otherwise)."""
    if len(lp_shape) != 3 or len(targets_shape) != 2:
        raise ValueError(f"ctc_loss: the primitive takes log_probs (T, N, C) and padded targets "
                         f"(N, S), got {tuple(lp_shape)} and {tuple(targets_shape)}")
    n = lp_shape[1]
    if targets_shape[0] != n or tuple(il_shape) != (n,) or tuple(tl_shape) != (n,):
        raise ValueError(f"ctc_loss: targets {tuple(targets_shape)}, input_lengths "
                         f"{tuple(il_shape)} and target_lengths {tuple(tl_shape)} do not fit "
                         f"a batch of {n} (log_probs {tuple(lp_shape)})")
    if not 0 <= blank < lp_shape[2]:
        raise ValueError(f"ctc_loss: blank={blank} is out of range for {lp_shape[2]} classes")


class CTCLoss(Function):
    """Connectionist temporal classification loss ``-log p(target | log_probs)`` per example.

    Inputs: ``log_probs`` ``(T, N, C)`` (floating), padded ``targets`` ``(N, S)``,
    ``input_lengths`` and ``target_lengths`` ``(N,)`` (integers, already checked by
    :func:`ctc_loss`); static ``blank`` and ``zero_infinity`` (an infinite loss becomes 0).
    Output: ``(N,)``, ``log_probs``' dtype.

    Forward: the log-space alpha recursion on backend arrays, vectorised over the batch and
    the extended label sequence (a loop over time only). Backward: ``g * d nll / d log_probs``
    by the alpha-beta recursion written with tapegrad ops (so it differentiates again): the
    derivative of this forward with respect to ``log_probs`` as given,
    ``-sum_s alpha beta / (y p)`` over the extended positions of each class. PyTorch's rule
    adds ``exp(log_probs)``, which is only the same once a ``log_softmax`` before the loss is
    differentiated; through a ``log_softmax`` the two agree exactly. Forward mode: the same
    gradient contracted with the tangent. Batching (vmap): the vmap axis folds into ``N``, in
    one call.

    References:
        Graves, Fernandez, Gomez and Schmidhuber, "Connectionist Temporal Classification:
        Labelling Unsegmented Sequence Data with Recurrent Neural Networks", ICML 2006.
    """

    oper = "ctc_loss"

    @staticmethod
    def forward(ctx, log_probs, targets, input_lengths, target_lengths, blank=0,
                zero_infinity=False):
        _check_ctc_arrays(log_probs.shape, targets.shape, input_lengths.shape,
                          target_lengths.shape, blank)
        ctx.save_for_backward(log_probs, targets, input_lengths, target_lengths)
        ctx.blank = blank
        ctx.zero_infinity = zero_infinity
        xp = ctx.backend
        nll = _ctc_nll(xp, log_probs, targets, input_lengths, target_lengths, blank)
        if zero_infinity:
            nll = xp.where(xp.isinf(nll), nll.dtype.type(0), nll)
        return nll

    @staticmethod
    def backward(ctx, g):
        if not ctx.needs_input_grad[0]:
            return None, None, None, None
        lp, targets, il, tl = ctx.saved_tensors
        grad = _ctc_grad(lp, targets, il, tl, ctx.blank, ctx.zero_infinity)
        return grad * tnp.reshape(g, (1, -1, 1)), None, None, None

    @staticmethod
    def jvp(ctx, t_lp, t_targets, t_il, t_tl):
        if t_lp is None:
            return None
        lp, targets, il, tl = ctx.saved_tensors
        grad = _ctc_grad(lp, targets, il, tl, ctx.blank, ctx.zero_infinity)
        return tnp.sum(grad * t_lp, axis=(0, 2))

    @staticmethod
    def batch(args, batched, size, blank=0, zero_infinity=False):
        lp, targets, il, tl = (_with_batch(a, b, size) for a, b in zip(args, batched))
        b, t_max, n, c = lp.shape
        lp = tnp.reshape(tnp.transpose(lp, (1, 0, 2, 3)), (t_max, b * n, c))
        out = CTCLoss.apply(lp, tnp.reshape(targets, (b * n, targets.shape[-1])),
                            tnp.reshape(il, (b * n,)), tnp.reshape(tl, (b * n,)),
                            blank=blank, zero_infinity=zero_infinity)
        return tnp.reshape(out, (b, n))

    @classmethod
    def output_shape(cls, log_probs, targets, input_lengths, target_lengths, blank=0,
                     zero_infinity=False):
        _check_ctc_arrays(log_probs, targets, input_lengths, target_lengths, blank)
        return (log_probs[1],)

    @classmethod
    def output_dtype(cls, log_probs, targets, input_lengths, target_lengths, **params):
        return np.dtype(log_probs)


def _lengths(value, who: str, name: str, n: int, unbatched: bool, device: str) -> Tensor:
    """Lengths as an integer Tensor ``(N,)``: ``(N,)`` given, or ``()``/``(1,)`` unbatched."""
    t = _integers(value, who, name, device)
    if unbatched and t.shape in ((), (1,)):
        return tnp.reshape(t, (1,))
    if t.shape != (n,):
        expected = "() or (1,)" if unbatched else f"({n},)"
        raise ValueError(f"{who}: {name} must have shape {expected} (one length per "
                         f"sequence), got {t.shape}")
    return t


def _ctc_targets(targets: Tensor, tl: Tensor, n: int, unbatched: bool, who: str) -> Tensor:
    """Targets as a padded integer Tensor ``(N, S)`` (concatenated ones gathered)."""
    lengths = all_values(tl)
    if unbatched:
        if targets.ndim != 1:
            raise ValueError(f"{who}: targets of an unbatched (T, C) log_probs must be 1-D (the "
                             f"label sequence), got shape {targets.shape}")
        targets = tnp.reshape(targets, (1, targets.shape[0]))
    if targets.ndim == 2:
        if targets.shape[0] != n:
            raise ValueError(f"{who}: padded targets must have shape (N={n}, S), got "
                             f"{targets.shape}")
        if lengths.size and lengths.max() > targets.shape[1]:
            raise ValueError(f"{who}: target_lengths reach {lengths.max()} but the padded "
                             f"targets hold {targets.shape[1]} labels per sequence")
        return targets
    if targets.ndim != 1:
        raise ValueError(f"{who}: targets must be padded (N, S) or concatenated 1-D, got shape "
                         f"{targets.shape}")
    total = targets.shape[0]
    sums = lengths.reshape(-1, n).sum(axis=-1) if n else np.zeros(1, np.int64)
    if np.any(sums != total):
        raise ValueError(f"{who}: concatenated targets hold {total} labels but target_lengths "
                         f"sum to {int(sums.ravel()[0])}; they must be equal")
    # padded to the longest target; to the total under a transform, where the longest one
    # may change from call to call but the total is the shape
    width = total if targets.is_traced or tl.is_traced else int(lengths.max(initial=0))
    if width == 0:
        return tnp.zeros((n, 0), dtype=targets.dtype, device=targets.device)
    pos = tnp.arange(width, device=targets.device)
    start = tnp.cumsum(tl) - tl
    inside = tnp.expand_dims(pos, 0) < tnp.expand_dims(tl, 1)
    index = tnp.where(inside, tnp.expand_dims(start, 1) + pos, 0)
    return tnp.where(inside, tnp.take(targets, index), 0)


@strict_keywords(hints=_HINTS)
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """Connectionist temporal classification loss (``torch.nn.functional.ctc_loss``).

    The negative log-probability of each target label sequence under all of its alignments
    to the frames (Graves et al., 2006), summed over paths by the log-space alpha recursion
    (see :class:`CTCLoss`). A target needs at least ``target_length + repeats`` frames
    (``repeats``: equal labels next to each other, which need a blank between them);
    otherwise its loss is infinite.

    Gradient convention: the gradient with respect to ``log_probs`` is the derivative of
    this function as written (what JAX's ``optax.ctc_loss`` gives). PyTorch's rule
    assumes the ``log_probs`` came from a ``log_softmax`` and adds ``exp(log_probs)``; the
    two give the same gradient for anything before that ``log_softmax``. For an infinite
    loss the gradient is NaN on its frames (0 with ``zero_infinity``), as in PyTorch.

    Args:
        log_probs: Floating Tensor ``(T, N, C)`` or ``(T, C)`` (unbatched): log-probabilities
            of the ``C`` classes (blank included) at each of ``T`` frames, usually a
            ``log_softmax`` output.
        targets: Integer labels, each in ``[0, C)`` and not ``blank``: padded ``(N, S)``
            (row ``n`` holds its ``target_lengths[n]`` labels first; the rest is ignored), or
            all concatenated, 1-D of length ``sum(target_lengths)``; ``(S,)`` when unbatched.
        input_lengths: Frames of each sequence, each in ``[0, T]``: integer sequence or
            Tensor ``(N,)`` (``()`` or ``(1,)`` unbatched).
        target_lengths: Labels of each target, each ``>= 0``, like ``input_lengths``.
        blank: Index of the blank class, in ``[0, C)``.
        reduction: ``"mean"`` (default: each loss divided by its target length, at least 1,
            then the mean over the batch, as PyTorch), ``"sum"`` or ``"none"`` (shape
            ``(N,)``, or ``()`` unbatched).
        zero_infinity: Replace infinite losses (and their gradients) by 0.

    Returns:
        Tensor of ``log_probs``' dtype, in nats.

    Raises:
        TypeError: for non-floating ``log_probs``, non-integer targets or lengths, a
            non-int ``blank`` or non-bool ``zero_infinity``.
        ValueError: for shapes that do not fit, lengths out of range, labels out of range or
            equal to ``blank``, a bad ``blank`` or reduction.

    References:
        Graves, Fernandez, Gomez and Schmidhuber, "Connectionist Temporal Classification:
        Labelling Unsegmented Sequence Data with Recurrent Neural Networks", ICML 2006.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> F = tg.nn.functional
        >>> lp = F.log_softmax(tg.Tensor([[0.0, 2.0], [0.0, 0.0], [2.0, 0.0]]))  # (T=3, C=2)
        >>> round(float(F.ctc_loss(lp, [1], 3, 1, reduction="sum")), 4)
        0.1109
    """
    who = "ctc_loss"
    _check_reduction(reduction, who)
    zero_infinity = bool_arg(zero_infinity, who, "zero_infinity")
    if isinstance(blank, (bool, np.bool_)) or not isinstance(blank, (int, np.integer)):
        raise TypeError(f"{who}: blank must be an int (the blank class), got {blank!r}")
    lp = _floating(log_probs, who, "log_probs")
    if lp.ndim not in (2, 3):
        raise ValueError(f"{who}: log_probs must have shape (T, N, C) or (T, C), got {lp.shape}")
    unbatched = lp.ndim == 2
    if unbatched:
        lp = tnp.expand_dims(lp, 1)
    t_max, n, c = lp.shape
    if not 0 <= blank < c:
        raise ValueError(f"{who}: blank={blank} is out of range for C={c} classes (log_probs "
                         f"{lp.shape}); expected 0 <= blank < {c}")
    il = _lengths(input_lengths, who, "input_lengths", n, unbatched, lp.device)
    tl = _lengths(target_lengths, who, "target_lengths", n, unbatched, lp.device)
    il_v, tl_v = all_values(il), all_values(tl)
    if il_v.size and (il_v.min() < 0 or il_v.max() > t_max):
        bad = il_v[(il_v < 0) | (il_v > t_max)].ravel()[0]
        raise ValueError(f"{who}: input_lengths must lie in [0, T={t_max}], got {bad}")
    if tl_v.size and tl_v.min() < 0:
        raise ValueError(f"{who}: target_lengths must be >= 0, got {tl_v.min()}")
    padded = _ctc_targets(_integers(targets, who, "targets", lp.device), tl, n, unbatched, who)
    labels = all_values(padded)
    if labels.size:
        width = labels.shape[-1]
        used = labels[np.arange(width) < tl_v.reshape(tl_v.shape + (1,))]
        _check_labels(used, 0, c, who, "targets")
        if np.any(used == blank):
            raise ValueError(f"{who}: targets contain the blank label {blank} within "
                             "target_lengths; a target sequence holds non-blank labels only")
    nll = CTCLoss.apply(lp, padded, il, tl, blank=int(blank), zero_infinity=zero_infinity)
    if reduction == "none":
        return nll[0] if unbatched else nll
    if reduction == "sum":
        return tnp.sum(nll)
    per = nll / tnp.astype(tnp.maximum(tl, 1), nll.dtype)
    return tnp.sum(per) / n if n else tnp.sum(per) * math.nan
