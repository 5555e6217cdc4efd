"""More of ``torch.nn.functional``, as pure functions: ``one_hot``, ``normalize``,
``cosine_similarity``, ``pairwise_distance``, ``bilinear``, ``instance_norm``, channel
dropout (``dropout1d``/``2d``/``3d``), ``alpha_dropout``, ``embedding_bag`` and
``gumbel_softmax``.

Each is a composition of differentiable :mod:`tapegrad.numpy` operations, so it
differentiates to every order. Randomness comes from an explicit ``key`` (a key from
:mod:`tapegrad.random`), where PyTorch draws from its global generator; running statistics
come in and go out as values, where PyTorch updates them in place.
"""

from __future__ import annotations

import math

import numpy as np

from tapegrad import numpy as tnp
from tapegrad import random as _random
from tapegrad.core._keywords import strict_all
from tapegrad.core.tensor import Tensor, all_values
from tapegrad.nn import _functional as F

__all__ = [
    "one_hot",
    "normalize",
    "cosine_similarity",
    "pairwise_distance",
    "bilinear",
    "instance_norm",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "alpha_dropout",
    "embedding_bag",
    "gumbel_softmax",
]


# -- helpers ----------------------------------------------------------------------------------
def _flag(who: str, name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{who}: {name} must be a bool, got {value!r}")
    return bool(value)


def _no_inplace(who: str, inplace) -> None:
    if _flag(who, "inplace", inplace):
        raise ValueError(
            f"{who}: inplace=True is not possible: tapegrad Tensors are immutable and every "
            "function returns a new Tensor. Use inplace=False (the default) and keep the result."
        )


def _dim(x: Tensor, dim, who: str, name: str = "dim") -> int:
    """``dim`` as a non-negative axis of ``x``."""
    if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{who}: {name} must be an int, got {dim!r}")
    if not -x.ndim <= dim < x.ndim:
        raise ValueError(
            f"{who}: {name}={dim} is out of range for a Tensor of shape {x.shape} "
            f"(valid: {-x.ndim} to {x.ndim - 1})"
        )
    return int(dim) % x.ndim


def _order(who: str, p) -> float:
    """A norm order ``p``: a real number ``>= 0`` or ``inf``."""
    v = F._real_arg(p, who, "p")
    if math.isnan(v) or v < 0:
        raise ValueError(f"{who}: p must be a number >= 0 (or inf), got {p}")
    return v


def _eps(who: str, eps, name: str = "eps") -> float:
    v = F._real_arg(eps, who, name)
    if not (v >= 0 and math.isfinite(v)):
        raise ValueError(f"{who}: {name} must be a finite number >= 0, got {eps}")
    return v


def _prob(who: str, p) -> float:
    v = F._real_arg(p, who, "p")
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"{who}: dropout probability p must lie in [0, 1], got {p}")
    return v


def _need_key(who: str, key):
    if key is None:
        raise ValueError(
            f"{who}: training with p > 0 draws random numbers and needs a key: pass "
            f"key=tg.random.split(...)[1] (tapegrad's randomness is explicit)"
        )
    return key


# -- one-hot, norms, distances ------------------------------------------------------------------
def one_hot(tensor, num_classes: int = -1) -> Tensor:
    """One-hot encoding of class indices (``torch.nn.functional.one_hot``).

    Args:
        tensor: Integer Tensor (or array) of class indices, any shape.
        num_classes: Number of classes ``C``; ``-1`` (default) means ``max(tensor) + 1``.

    Returns:
        int64 Tensor of shape ``tensor.shape + (C,)``: 1 at each index, 0 elsewhere. No
        gradient (the indices are integers).

    Raises:
        TypeError: for a non-integer ``tensor`` or ``num_classes``.
        ValueError: for a negative index, an index ``>= num_classes``, ``num_classes < -1``,
            or ``num_classes=-1`` with an empty ``tensor`` (there is no maximum).

    Example:
        >>> import tapegrad as tg
        >>> tg.nn.functional.one_hot(tg.Tensor([0, 2]), 3)
        Tensor([[1, 0, 0],
                [0, 0, 1]], dtype=int64)
    """
    who = "one_hot"
    t = tnp.asarray(tensor)
    if t.dtype.kind not in "iu":
        raise TypeError(f"{who}: tensor must hold integer class indices, got dtype {t.dtype}")
    if isinstance(num_classes, (bool, np.bool_)) or not isinstance(num_classes, (int, np.integer)):
        raise TypeError(f"{who}: num_classes must be an int, got {num_classes!r}")
    values = all_values(t)
    if values.size and values.min() < 0:
        raise ValueError(f"{who}: class values must be non-negative, got {int(values.min())}")
    if num_classes == -1:
        if values.size == 0:
            raise ValueError(
                f"{who}: cannot infer the number of classes from an empty tensor; pass "
                "num_classes"
            )
        n = int(values.max()) + 1
    elif num_classes < -1:
        raise ValueError(f"{who}: num_classes must be -1 or >= 0, got {num_classes}")
    else:
        n = int(num_classes)
        if values.size and values.max() >= n:
            raise ValueError(
                f"{who}: class value {int(values.max())} is out of range for num_classes={n}"
            )
    classes = F._const(np.arange(n, dtype=np.dtype(t.dtype)), t)
    return tnp.astype(tnp.equal(tnp.expand_dims(t, -1), classes), np.int64)


def _norm(x: Tensor, p: float, axis: int, keepdims: bool) -> Tensor:
    return tnp.linalg.vector_norm(x, ord=p, axis=axis, keepdims=keepdims)  # pyright: ignore[reportArgumentType]


def _no_grad(t) -> Tensor:
    """``t`` without gradient (a constant)."""
    return tnp.stop_gradient(t)  # pyright: ignore[reportReturnType]


def normalize(input, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """``input / max(||input||_p, eps)`` along ``dim`` (``torch.nn.functional.normalize``).

    Args:
        input: Floating Tensor of at least one dimension.
        p: The norm's order (``2``, ``1``, ``inf``, any ``p >= 0``).
        dim: The axis normalized (PyTorch's default 1).
        eps: Lower bound of the divisor (no division by 0); below it the gradient does not
            flow through the norm (PyTorch's ``clamp_min``).

    Returns:
        Tensor of ``input``'s shape and dtype, of unit ``p``-norm along ``dim`` (where the
        norm is at least ``eps``).

    Raises:
        TypeError: for a non-floating input. ValueError: for ``dim`` out of range, ``p < 0``
            or ``eps < 0``.
    """
    who = "normalize"
    x = F._floating(input, who)
    if x.ndim == 0:
        raise ValueError(f"{who}: input must have at least one dimension, got a 0-d Tensor")
    axis = _dim(x, dim, who)
    p = _order(who, p)
    eps = _eps(who, eps)
    return x / tnp.maximum(_norm(x, p, axis, True), eps)


def _broadcast_pair(x1, x2, who: str) -> tuple:
    """``x1`` (floating) and ``x2`` (cast to its dtype) as Tensors, and their broadcast shape.

    Raises:
        TypeError: for a non-floating ``x1`` or a non-numeric ``x2``.
        ValueError: for shapes that do not broadcast, naming ``who``.
    """
    a = F._floating(x1, who, "x1")
    b = F._like(x2, a, who, "x2")
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ValueError(f"{who}: x1 of shape {a.shape} and x2 of shape {b.shape} do not "
                         "broadcast together") from None
    return a, b, shape


def cosine_similarity(x1, x2, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """Cosine of the angle between ``x1`` and ``x2`` along ``dim``
    (``torch.nn.functional.cosine_similarity``).

    Computed as PyTorch does: each input divided by its norm, the norm clamped below at
    ``eps`` for the value only (the gradient flows as if unclamped, PyTorch's ``no_grad``
    clamp), then the product summed along ``dim``.

    Args:
        x1, x2: Floating Tensors that broadcast together.
        dim: The axis of the vectors (PyTorch's default 1).
        eps: Lower bound of each norm.

    Returns:
        Tensor of the broadcast shape without ``dim``, values in ``[-1, 1]``.

    Raises:
        TypeError: for non-floating inputs. ValueError: for shapes that do not broadcast or
            ``dim`` out of range.
    """
    who = "cosine_similarity"
    a, b, shape = _broadcast_pair(x1, x2, who)
    a, b = tnp.broadcast_to(a, shape), tnp.broadcast_to(b, shape)
    axis = _dim(a, dim, who)
    eps = _eps(who, eps)

    def unit(v):
        n = _norm(v, 2.0, axis, True)
        clamped = n + _no_grad(tnp.maximum(n, eps) - n)  # value clamped, slope 1
        return v / clamped

    return tnp.sum(unit(a) * unit(b), axis=axis)


def pairwise_distance(x1, x2, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False
                      ) -> Tensor:
    """``||x1 - x2 + eps||_p`` along the last axis (``torch.nn.functional.pairwise_distance``;
    ``eps`` is added to the difference, as PyTorch does).

    Args:
        x1, x2: Floating Tensors ``(..., D)`` that broadcast together.
        p: The norm's order (``>= 0`` or ``inf``).
        eps: Added to every difference.
        keepdim: Keep the last axis with size 1.

    Returns:
        Tensor of the broadcast shape without (or with size 1) its last axis.

    Raises:
        TypeError: for non-floating inputs. ValueError: for shapes that do not broadcast, or
            ``p < 0``.
    """
    who = "pairwise_distance"
    a, b, shape = _broadcast_pair(x1, x2, who)
    p = _order(who, p)
    eps = F._real_arg(eps, who, "eps")
    keepdim = _flag(who, "keepdim", keepdim)
    d = a - b + eps
    if not shape:
        d = tnp.reshape(d, (1,))
        out = _norm(d, p, 0, keepdim)
        return out
    return _norm(d, p, -1, keepdim)


def bilinear(input1, input2, weight, bias=None) -> Tensor:
    """Bilinear map ``y_o = sum_ij x1_i W_oij x2_j + b_o`` (``torch.nn.functional.bilinear``).

    Args:
        input1: Floating Tensor ``(..., in1)``.
        input2: Tensor ``(..., in2)`` with the same leading shape.
        weight: Tensor ``(out, in1, in2)`` (PyTorch's layout).
        bias: Optional Tensor ``(out,)``.

    Returns:
        Tensor ``(..., out)``.

    Raises:
        TypeError: for a non-floating ``input1``. ValueError: for shapes that do not fit.
    """
    who = "bilinear"
    a = F._floating(input1, who, "input1")
    b = F._like(input2, a, who, "input2")
    w = F._like(weight, a, who, "weight")
    if w.ndim != 3 or a.ndim < 1 or b.ndim < 1 or a.shape[-1] != w.shape[1] \
            or b.shape[-1] != w.shape[2] or a.shape[:-1] != b.shape[:-1]:
        raise ValueError(
            f"{who}: input1 {a.shape}, input2 {b.shape} and weight {w.shape} do not fit; need "
            "input1 (..., in1), input2 (..., in2) with the same leading shape and weight "
            "(out, in1, in2)"
        )
    y = tnp.einsum("...i,oij,...j->...o", a, w, b)
    if bias is not None:
        bb = F._like(bias, a, who, "bias")
        if bb.shape != (w.shape[0],):
            raise ValueError(f"{who}: bias must have shape ({w.shape[0]},), got {bb.shape}")
        y = y + bb
    return y


# -- instance normalization -----------------------------------------------------------------
def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats: bool = True, momentum: float = 0.1, eps: float = 1e-5):
    """Instance normalization (Ulyanov et al., 2016; ``torch.nn.functional.instance_norm``):
    each sample's each channel normalized over its spatial positions.

    ``y = (x - mean) / sqrt(var + eps) * weight[c] + bias[c]``, the mean and biased variance
    over the spatial axes of each ``(n, c)``. With ``use_input_stats=False`` the running
    statistics are used instead. With running statistics and ``use_input_stats``, they are
    updated as PyTorch does, ``(1 - momentum) * running + momentum * batch``, where the batch
    statistic is the mean over the samples of each instance's mean (and unbiased variance);
    nothing is updated in place: the new statistics are returned.

    Args:
        input: Floating Tensor ``(N, C, *spatial)``.
        running_mean, running_var: Optional Tensors ``(C,)`` (both or neither).
        weight, bias: Optional Tensors ``(C,)``.
        use_input_stats: Normalize with each instance's statistics (True) or with the running
            ones (False; then they are required).
        momentum: Weight of the new statistics in the running update.
        eps: Added to the variance.

    Returns:
        The output Tensor (``input``'s shape and dtype) when no running statistics are given;
        otherwise ``(output, new_running_mean, new_running_var)`` (without gradient).

    Raises:
        TypeError: for a non-floating input. ValueError: for fewer than 2 dims, statistics or
            affine parameters of another shape, only one running statistic, a single spatial
            element with ``use_input_stats``, or ``use_input_stats=False`` without running
            statistics.

    References:
        Ulyanov, Vedaldi and Lempitsky, "Instance Normalization: The Missing Ingredient for
        Fast Stylization", arXiv:1607.08022.
    """
    who = "instance_norm"
    x = F._floating(input, who)
    if x.ndim < 2:
        raise ValueError(f"{who}: input must have shape (N, C, *spatial), got {x.shape}")
    use_input_stats = _flag(who, "use_input_stats", use_input_stats)
    momentum = F._real_arg(momentum, who, "momentum")
    eps = _eps(who, eps)
    c = x.shape[1]
    if (running_mean is None) != (running_var is None):
        raise ValueError(f"{who}: give both running_mean and running_var, or neither")
    stats = running_mean is not None
    rm = rv = None
    if stats:
        rm, rv = F._like(running_mean, x, who, "running_mean"), \
            F._like(running_var, x, who, "running_var")
    for name, t in (("running_mean", rm), ("running_var", rv), ("weight", weight),
                    ("bias", bias)):
        if t is not None and tuple(tnp.asarray(t).shape) != (c,):
            raise ValueError(f"{who}: {name} must have shape ({c},), got "
                             f"{tuple(tnp.asarray(t).shape)}")
    bshape = (1, c) + (1,) * (x.ndim - 2)
    axes = tuple(range(2, x.ndim))
    n = math.prod(x.shape[2:])
    if use_input_stats:
        if n <= 1:
            raise ValueError(
                f"{who}: expected more than 1 spatial element per instance to normalize, got "
                f"input {x.shape}"
            )
        mean = tnp.mean(x, axis=axes, keepdims=True)
        xc = x - mean
        var = tnp.mean(xc * xc, axis=axes, keepdims=True)
        y = xc / tnp.sqrt(var + eps)
        if stats:
            bm = _no_grad(tnp.mean(tnp.reshape(mean, x.shape[:2]), axis=0))
            bv = _no_grad(tnp.mean(tnp.reshape(var, x.shape[:2]), axis=0)) * (n / (n - 1))
            rm = (1 - momentum) * _no_grad(rm) + momentum * bm
            rv = (1 - momentum) * _no_grad(rv) + momentum * bv
    else:
        if not stats:
            raise ValueError(
                f"{who}: use_input_stats=False normalizes with the running statistics; pass "
                "running_mean and running_var"
            )
        y = (x - tnp.reshape(rm, bshape)) / tnp.sqrt(tnp.reshape(rv, bshape) + eps)
    if weight is not None:
        y = y * tnp.reshape(F._like(weight, x, who, "weight"), bshape)
    if bias is not None:
        y = y + tnp.reshape(F._like(bias, x, who, "bias"), bshape)
    if not stats:
        return y
    return y, _no_grad(rm), _no_grad(rv)


# -- dropout variants -------------------------------------------------------------------------
def _channel_dropout(who, input, p, training, inplace, key, ndims):
    x = F._floating(input, who)
    p = _prob(who, p)
    training = _flag(who, "training", training)
    _no_inplace(who, inplace)
    batched, unbatched = ndims
    if x.ndim not in ndims:
        raise ValueError(
            f"{who}: expected a {unbatched}-D (unbatched, channels first) or {batched}-D "
            f"(batched) input, got shape {x.shape}"
        )
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    _need_key(who, key)
    lead = 2 if x.ndim == batched else 1
    shape = x.shape[:lead] + (1,) * (x.ndim - lead)
    keep = _random.bernoulli(key, 1.0 - p, shape)
    if x.device != "cpu":
        keep = keep.to_device(x.device)
    return tnp.where(keep, x * (1.0 / (1.0 - p)), 0.0)


def dropout1d(input, p: float = 0.5, training: bool = True, inplace: bool = False, *,
              key=None) -> Tensor:
    """Channel dropout for ``(N, C, L)`` or ``(C, L)`` inputs (``torch.nn.functional.dropout1d``):
    each channel of each sample is zeroed as a whole with probability ``p``, the kept ones
    scaled by ``1 / (1 - p)`` (Tompson et al., 2015).

    Args:
        input: Floating Tensor ``(N, C, L)`` or ``(C, L)``.
        p: Drop probability in ``[0, 1]``.
        training: Apply dropout (True) or return ``input``.
        inplace: PyTorch's option; only False.
        key: A key from :mod:`tapegrad.random` (required when ``training`` and ``p > 0``);
            PyTorch draws from its global generator instead.

    Returns:
        Tensor of ``input``'s shape and dtype.

    Raises:
        ValueError: for another number of dims, ``p`` outside ``[0, 1]`` or a missing key.

    References:
        Tompson et al., "Efficient Object Localization Using Convolutional Networks", CVPR
        2015.
    """
    return _channel_dropout("dropout1d", input, p, training, inplace, key, (3, 2))


def dropout2d(input, p: float = 0.5, training: bool = True, inplace: bool = False, *,
              key=None) -> Tensor:
    """Channel dropout for ``(N, C, H, W)`` or ``(C, H, W)`` inputs
    (``torch.nn.functional.dropout2d``); see :func:`dropout1d`.

    A 3-D input is one unbatched image ``(C, H, W)``: PyTorch's documented meaning (its
    current release still treats it as ``(N, C, L)``, with a warning that this will change).

    Raises:
        ValueError: for another number of dims, ``p`` outside ``[0, 1]`` or a missing key.
    """
    return _channel_dropout("dropout2d", input, p, training, inplace, key, (4, 3))


def dropout3d(input, p: float = 0.5, training: bool = True, inplace: bool = False, *,
              key=None) -> Tensor:
    """Channel dropout for ``(N, C, D, H, W)`` or ``(C, D, H, W)`` inputs
    (``torch.nn.functional.dropout3d``); see :func:`dropout1d`.

    Raises:
        ValueError: for another number of dims, ``p`` outside ``[0, 1]`` or a missing key.
    """
    return _channel_dropout("dropout3d", input, p, training, inplace, key, (5, 4))


#: ``-scale * alpha`` of SELU: the value alpha dropout sets dropped units to.
_ALPHA_PRIME = 1.7580993408473766


def alpha_dropout(input, p: float = 0.5, training: bool = False, inplace: bool = False, *,
                  key=None) -> Tensor:
    """Alpha dropout for self-normalizing networks (Klambauer et al., 2017;
    ``torch.nn.functional.alpha_dropout``, whose ``training`` defaults to False).

    Each element is kept with probability ``1 - p``; a dropped one is set to SELU's negative
    saturation ``-alpha' = -1.7580993...``, and then ``a x + b`` restores zero mean and unit
    variance: ``a = ((1 - p) (1 + p alpha'^2))^{-1/2}``, ``b = a alpha' p``, as PyTorch
    computes them.

    Args:
        input: Floating Tensor of any shape.
        p: Drop probability in ``[0, 1]`` (``p = 1`` gives zeros, as PyTorch).
        training: Apply dropout (True) or return ``input`` (False, the default).
        inplace: PyTorch's option; only False.
        key: A key from :mod:`tapegrad.random` (required when ``training`` and ``0 < p``).

    Returns:
        Tensor of ``input``'s shape and dtype.

    Raises:
        ValueError: for ``p`` outside ``[0, 1]`` or a missing key.

    References:
        Klambauer, Unterthiner, Mayr and Hochreiter, "Self-Normalizing Neural Networks",
        NeurIPS 2017.
    """
    who = "alpha_dropout"
    x = F._floating(input, who)
    p = _prob(who, p)
    training = _flag(who, "training", training)
    _no_inplace(who, inplace)
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    _need_key(who, key)
    keep = _random.bernoulli(key, 1.0 - p, x.shape)
    if x.device != "cpu":
        keep = keep.to_device(x.device)
    a = 1.0 / math.sqrt((_ALPHA_PRIME * _ALPHA_PRIME * p + 1.0) * (1.0 - p))
    kept = x * a + _ALPHA_PRIME * a * p
    dropped = _ALPHA_PRIME * a * (p - 1.0)
    return tnp.where(keep, kept, dropped)


# -- embedding bags ----------------------------------------------------------------------------
_BAG_MODES = ("sum", "mean", "max")


def _index_tensor(value, who: str, name: str, device) -> Tensor:
    t = value if isinstance(value, Tensor) else Tensor(np.asarray(value), device=device)
    if t.dtype.kind not in "iu":
        raise TypeError(f"{who}: {name} must hold integers, got dtype {t.dtype}")
    return t


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type: float = 2.0,
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights=None, include_last_offset: bool = False,
                  padding_idx=None) -> Tensor:
    """Sums, means or maxima of bags of embeddings, without the intermediate ``(bags, len,
    D)`` table (``torch.nn.functional.embedding_bag``).

    The bags: for a 2-D ``input`` ``(B, N)``, each row is one bag of ``N`` indices
    (``offsets`` must be None); for a 1-D ``input`` ``(n,)``, ``offsets`` ``(B,)`` gives the
    start of each bag (``offsets[0] == 0``, non-decreasing), the last bag running to the end;
    with ``include_last_offset``, ``offsets`` ``(B + 1,)`` ends with the input's length
    (PyTorch's CSR format; PyTorch's results for a smaller last offset are inconsistent, here
    it is an error).
    An empty bag gives zeros; so does a bag of ``padding_idx`` entries only, as those are left
    out of every bag (and of the count of ``"mean"``).

    Args:
        input: Integer Tensor ``(B, N)`` or ``(n,)`` of row indices into ``weight``.
        weight: Floating Tensor ``(num_embeddings, D)``.
        offsets: Integer ``(B,)`` (or ``(B + 1,)``) bag starts for a 1-D ``input``.
        max_norm, norm_type, scale_grad_by_freq, sparse: PyTorch's options that rescale rows
            in place or make sparse gradients; not implemented (only their defaults).
        mode: ``"sum"``, ``"mean"`` (default) or ``"max"``.
        per_sample_weights: Floating Tensor of ``input``'s shape: each embedding is scaled by
            its weight before the sum (``mode="sum"`` only); it gets a gradient too.
        include_last_offset: ``offsets`` has one more entry, the end of the last bag.
        padding_idx: A row index (negative counts from the end) left out of the bags.

    Returns:
        Tensor ``(B, D)`` of ``weight``'s dtype. Gradients flow to ``weight`` (in ``"max"`` to
        the maximal entry of each bag) and to ``per_sample_weights``.

    Raises:
        TypeError: for non-integer indices or offsets, a non-floating weight or a bad flag.
        ValueError: for shapes that do not fit, bad offsets, an unknown ``mode``,
            ``per_sample_weights`` with a mode other than ``"sum"``, or an index out of range.
        NotImplementedError: for ``max_norm``, ``scale_grad_by_freq=True`` or ``sparse=True``.
    """
    who = "embedding_bag"
    w = F._floating(weight, who, "weight")
    if w.ndim != 2:
        raise ValueError(f"{who}: weight must have shape (num_embeddings, D), got {w.shape}")
    if max_norm is not None:
        raise NotImplementedError(
            f"{who}: max_norm (renormalizing rows of weight in place) is not implemented; "
            "renormalize the weight yourself (weight / max(norm, max_norm))"
        )
    if _flag(who, "scale_grad_by_freq", scale_grad_by_freq):
        raise NotImplementedError(f"{who}: scale_grad_by_freq=True is not implemented")
    if _flag(who, "sparse", sparse):
        raise NotImplementedError(
            f"{who}: sparse=True (sparse gradients) is not implemented; gradients are dense"
        )
    F._real_arg(norm_type, who, "norm_type")
    include_last_offset = _flag(who, "include_last_offset", include_last_offset)
    if mode not in _BAG_MODES:
        raise ValueError(f"{who}: mode must be one of {_BAG_MODES}, got {mode!r}")
    rows = w.shape[0]
    idx = _index_tensor(input, who, "input", w.device if w.device != "cpu" else None)
    if padding_idx is not None:
        if isinstance(padding_idx, (bool, np.bool_)) or not isinstance(
                padding_idx, (int, np.integer)):
            raise TypeError(f"{who}: padding_idx must be an int or None, got {padding_idx!r}")
        if not -rows <= padding_idx < rows:
            raise ValueError(f"{who}: padding_idx must lie in [-{rows}, {rows}), got "
                             f"{padding_idx}")
        padding_idx = int(padding_idx) % rows
    if idx.ndim == 2:
        if offsets is not None:
            raise ValueError(
                f"{who}: a 2-D input (B, N) is B bags of N indices; offsets must be None, got "
                "offsets"
            )
        n_bags, length = idx.shape
        flat = tnp.reshape(idx, (n_bags * length,))
        bag = F._const(np.repeat(np.arange(n_bags, dtype=np.int64), length), idx)
    elif idx.ndim == 1:
        if offsets is None:
            raise ValueError(f"{who}: a 1-D input needs offsets (the start of each bag)")
        off = _index_tensor(offsets, who, "offsets", w.device if w.device != "cpu" else None)
        if off.ndim != 1:
            raise ValueError(f"{who}: offsets must be 1-D, got shape {off.shape}")
        vals = all_values(off)
        n = idx.shape[0]
        if include_last_offset and vals.size < 1:
            raise ValueError(f"{who}: with include_last_offset, offsets needs at least one "
                             "entry (the end of the last bag)")
        if vals.size and vals.min() < 0:
            raise ValueError(f"{who}: offsets must be >= 0, got {vals.tolist()}")
        if vals.size and vals[0] != 0:
            raise ValueError(f"{who}: offsets[0] must be 0 (the first bag starts at the first "
                             f"index), got {vals[0]}")
        if vals.size and (np.diff(vals) < 0).any():
            raise ValueError(f"{who}: offsets must be non-decreasing, got {vals.tolist()}")
        if vals.size and vals.max() > n:
            raise ValueError(f"{who}: offsets must not exceed the input's length {n}, got "
                             f"{vals.tolist()}")
        if include_last_offset and vals[-1] != n:
            raise ValueError(
                f"{who}: with include_last_offset, the last offset must be the input's length "
                f"{n} (the end of the last bag, as in the CSR format), got {vals.tolist()}"
            )
        n_bags = off.shape[0] - 1 if include_last_offset else off.shape[0]
        flat = idx
        positions = tnp.arange(n, dtype=off.dtype, device=off.device)
        # the bag of each entry (one of a bag that ends at the input's end)
        bag = tnp.searchsorted(off, positions, side="right") - 1
    else:
        raise ValueError(f"{who}: input must be 2-D (B, N) or 1-D with offsets, got shape "
                         f"{idx.shape}")
    valid = tnp.greater_equal(bag, 0) & tnp.less(bag, n_bags)
    if padding_idx is not None:
        valid = valid & tnp.not_equal(flat, padding_idx)
    vecs = F.embedding(flat, w)  # (n, D)
    d = w.shape[1]
    target = tnp.where(valid, bag, n_bags)  # invalid entries go to a spare row, dropped below
    if per_sample_weights is not None:
        if mode != "sum":
            raise ValueError(
                f"{who}: per_sample_weights is only supported for mode='sum' (got "
                f"mode={mode!r})"
            )
        psw = F._like(per_sample_weights, w, who, "per_sample_weights")
        if psw.shape != idx.shape:
            raise ValueError(f"{who}: per_sample_weights must have input's shape {idx.shape}, "
                             f"got {psw.shape}")
        vecs = vecs * tnp.reshape(psw, (-1, 1))
    if mode == "max":
        vecs = tnp.where(tnp.expand_dims(valid, -1), vecs, -np.inf)
        init = tnp.full((n_bags + 1, d), -np.inf, dtype=w.dtype, device=w.device)
        best = init.at[target].max(vecs)[:n_bags]
        count = tnp.zeros((n_bags + 1,), dtype=np.int64, device=w.device).at[target].add(
            tnp.astype(valid, np.int64))[:n_bags]
        return tnp.where(tnp.expand_dims(count > 0, -1), best, 0.0)
    vecs = tnp.where(tnp.expand_dims(valid, -1), vecs, 0.0)
    total = tnp.zeros((n_bags + 1, d), dtype=w.dtype, device=w.device).at[target].add(vecs)
    total = total[:n_bags]
    if mode == "sum":
        return total
    count = tnp.zeros((n_bags + 1,), dtype=w.dtype, device=w.device).at[target].add(
        tnp.astype(valid, w.dtype))[:n_bags]
    return total / tnp.expand_dims(tnp.maximum(count, 1.0), -1)


# -- Gumbel-softmax -------------------------------------------------------------------------
def gumbel_softmax(logits, tau: float = 1.0, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1, *, key=None) -> Tensor:
    """Samples of the Gumbel-softmax (Concrete) distribution, optionally discretized
    (Jang et al., 2017; Maddison et al., 2017; ``torch.nn.functional.gumbel_softmax``).

    ``y = softmax((logits + g) / tau)`` along ``dim``, ``g`` standard Gumbel noise drawn
    with ``key``. With ``hard``, the result is the one-hot of ``argmax(y)`` in the forward
    pass while the gradient is that of ``y`` (the straight-through estimator:
    ``one_hot - stop_gradient(y) + y``, as PyTorch computes it).

    Unlike PyTorch, which draws the noise from its global generator, the noise comes from
    the explicit ``key`` (required): the same key gives the same sample.

    Args:
        logits: Floating Tensor ``(..., C, ...)`` of unnormalized log-probabilities.
        tau: Positive temperature; small values approach one-hot samples.
        hard: Return one-hot samples with straight-through gradients.
        eps: Unused, as in PyTorch (kept for its signature).
        dim: The class axis (default the last).
        key: A key from :mod:`tapegrad.random` (keyword, required).

    Returns:
        Tensor of ``logits``' shape and dtype; along ``dim`` each sample sums to 1 (is
        one-hot with ``hard``). The argmax of a sample is distributed as
        ``categorical(softmax(logits))`` (the Gumbel-max trick).

    Raises:
        TypeError: for non-floating logits or a non-bool ``hard``. ValueError: for
            ``tau <= 0``, a missing key or ``dim`` out of range.

    References:
        Jang, Gu and Poole, "Categorical Reparameterization with Gumbel-Softmax", ICLR 2017.
        Maddison, Mnih and Teh, "The Concrete Distribution", ICLR 2017.
    """
    who = "gumbel_softmax"
    x = F._floating(logits, who, "logits")
    tau = F._real_arg(tau, who, "tau")
    if not (tau > 0 and math.isfinite(tau)):
        raise ValueError(f"{who}: tau must be a positive finite number, got {tau}")
    hard = _flag(who, "hard", hard)
    F._real_arg(eps, who, "eps")
    if x.ndim == 0:
        raise ValueError(f"{who}: logits must have at least one dimension (the classes)")
    axis = _dim(x, dim, who)
    if key is None:
        raise ValueError(
            f"{who}: the Gumbel noise is drawn from an explicit key: pass "
            "key=tg.random.split(...)[1] (PyTorch uses a global generator instead)"
        )
    g = _gumbel_noise(key, x)
    y = F.softmax((x + g) / tau, axis=axis)
    if not hard:
        return y
    index = tnp.argmax(_no_grad(y), axis=axis, keepdims=True)
    classes = tnp.reshape(tnp.arange(x.shape[axis], device=x.device),
                          (x.shape[axis],) + (1,) * (x.ndim - 1 - axis))
    y_hard = tnp.astype(tnp.equal(index, classes), x.dtype)
    return y_hard - _no_grad(y) + y


def _gumbel_noise(key, x: Tensor) -> Tensor:
    """The standard Gumbel noise :func:`gumbel_softmax` adds to ``x`` for ``key``."""
    g = _random.gumbel(key, x.shape, x.dtype)
    return g.to_device(x.device) if x.device != "cpu" else g


strict_all(globals(), __all__)
