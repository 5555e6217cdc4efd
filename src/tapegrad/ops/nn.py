"""Neural-network primitives: the fused ops behind :mod:`tapegrad.nn.functional`.

Each is a :class:`~tapegrad.Function` with its rules side by side, fused because fusing is the
right design (numerically stable, or far cheaper than a composition): ``Softmax`` and
``LogSoftmax``; the losses (``CrossEntropy``, ``BinaryCrossEntropy``,
``BinaryCrossEntropyWithLogits``, ``HingeLoss``, ``MeanSquaredLoss``, each also usable directly
as ``Loss.apply(y_pred, y_true)``) and ``CrossEntropyGrad`` (their backward in one op);
``Linear`` (one BLAS call, bias added in place); ``Conv2d`` (im2col on a strided view, bias
added in place, with its two transposes ``Conv2dInputGrad`` and ``Conv2dWeightGrad``);
``MaxPool2d`` (maxima of strided views, with its routing ``MaxPool2dGrad`` and gather
``MaxPool2dGather``); embedding row gathers; and ``ScaledDotProductAttention`` (its backward
recomputes the probabilities). Their ``backward`` rules are written with tapegrad ops, so
higher derivatives work, and every one has a batching rule (``vmap``).

The public functions (argument checks, PyTorch's options, docstrings) are in
:mod:`tapegrad.nn.functional`, which re-exports these classes under the same names.

Layout conventions: images are ``(N, C, H, W)``; a linear weight is ``(in_features,
out_features)`` (``y = x @ W + b``); a convolution weight is ``(C_out, C_in / groups, kH, kW)``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from tapegrad.core import dtypes as _tg_dtypes
from tapegrad.core.function import Function, Traits
from tapegrad.core.tensor import Tensor, const
from tapegrad.ops._batching import align, per_example_ndim, shift_axes
from tapegrad.ops._registry import ns, tensor_arg
from tapegrad.ops.elementwise import Gelu as _Gelu
from tapegrad.ops.elementwise import Sigmoid
from tapegrad.ops.linalg import MatMul

__all__ = [
    "Softmax", "LogSoftmax", "Gelu", "CrossEntropy", "CrossEntropyGrad", "BinaryCrossEntropy",
    "BinaryCrossEntropyWithLogits", "HingeLoss", "MeanSquaredLoss", "Linear", "Conv2d",
    "Conv2dInputGrad", "Conv2dWeightGrad", "MaxPool2d", "MaxPool2dGrad", "MaxPool2dGather",
    "ScaledDotProductAttention",
]


# -- array-namespace helpers the rules share ---------------------------------------------------
def _zeros(shape, dtype, device=None) -> Tensor:
    """A constant zero Tensor (on ``device``, the CPU by default)."""
    z = np.zeros(shape, dtype)
    t = const(z)
    return t if device in (None, "cpu") else t.to_device(device)


def _ones_like(x: Tensor) -> Tensor:
    """A constant Tensor of ones of ``x``'s shape, dtype and device."""
    return const(x._concrete() * 0 + 1) if x.device != "cpu" else const(np.ones(x.shape, x.dtype))


def _expand_dims(x: Tensor, axis: int) -> Tensor:
    """``x`` with a new axis of length 1 at ``axis``."""
    axis = axis % (x.ndim + 1)
    return ns.reshape(x, x.shape[:axis] + (1,) + x.shape[axis:])


def _swapaxes(x: Tensor, a: int, b: int) -> Tensor:
    """``x`` with axes ``a`` and ``b`` exchanged."""
    order = list(range(x.ndim))
    order[a], order[b] = order[b], order[a]
    return ns.transpose(x, tuple(order))


def _const(array, ref: Tensor) -> Tensor:
    """A constant Tensor holding the NumPy ``array`` on ``ref``'s device."""
    return Tensor(array, device=ref.device if ref.device != "cpu" else None)


def _with_batch(a, batched: bool, size: int) -> Tensor:
    """``a`` with the batch on axis 0: ``a`` itself if batched, else broadcast along a new
    leading axis of ``size`` (a read-only view, no copy)."""
    if batched:
        return a
    a = tensor_arg(a)
    return ns.broadcast_to(ns.reshape(a, (1,) + a.shape), (size,) + a.shape)


def _example_shape(a, batched: bool) -> tuple:
    """The shape of one example of ``a`` (a Tensor, array or scalar)."""
    shape = tuple(a.shape) if hasattr(a, "shape") else np.shape(a)
    return shape[1:] if batched else shape


def _merge_batch(a: Tensor) -> Tensor:
    """``(B, N, ...)`` as ``(B * N, ...)``: the vmap axis merged into the op's own batch axis."""
    return ns.reshape(a, (a.shape[0] * a.shape[1],) + a.shape[2:])


def _sum_examples(per: Tensor) -> Tensor:
    """Each example's sum: ``per`` ``(B, ...)`` summed over its example axes, shape ``(B,)``."""
    axes = tuple(range(1, per.ndim))
    return ns.sum(per, axis=axes) if axes else per


def _zeros_batch(shape, ref: Tensor) -> Tensor:
    """A constant of zeros: the whole output of an op on an empty batch (``shape[0] == 0``)."""
    return _zeros(shape, dtype=ref.dtype, device=ref.device)


# The elementwise primitives live in tapegrad.ops; these names keep Function-style calls
# (``Sigmoid.apply(x)``, ``Relu.apply(x)``, ``Tanh.apply(x)``) working from here.


def _normalize_batch(cls, args, batched, size, axis=-1):
    """The batching rule of :class:`Softmax` and :class:`LogSoftmax`: the per-example ``axis``
    shifted past the batch axis (a 0-d example normalizes over a length-1 axis)."""
    (x,) = args
    nd = x.ndim - 1
    if nd == 0:
        shift_axes(axis, 1, cls.oper)  # 0 and -1 only, as for one example (a length-1 axis)
        return ns.reshape(cls.apply(ns.reshape(x, (size, 1)), axis=1), (size,))
    return cls.apply(x, axis=shift_axes(axis, nd, cls.oper))


class _Normalization:
    """What :class:`Softmax` and :class:`LogSoftmax` share (a base listed before
    :class:`~tapegrad.Function`): the forward around each one's ``normalized`` (of ``x``
    shifted by its maximum along ``axis``, for stability; an empty ``x`` gives an empty
    result), the output saved for backward, the batching rule and the shape rule."""

    @staticmethod
    def normalized(xp, s, axis):  # pragma: no cover - each subclass defines it
        raise NotImplementedError

    @classmethod
    def forward(cls, ctx, x, axis=-1):
        xp = ctx.backend
        ctx.axis = axis
        if x.size == 0:
            out = xp.empty_like(x)
        else:
            out = cls.normalized(xp, x - x.max(axis=axis, keepdims=True), axis)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def saved_output(ctx) -> tuple:
        """``(y, axis)``: the saved output and the axis to sum over in backward."""
        (y,) = ctx.saved_tensors
        return y, (ctx.axis if y.ndim else None)  # a 0-d input: its one element

    batch = classmethod(_normalize_batch)

    @classmethod
    def output_shape(cls, shape, axis=-1):
        return tuple(shape)


class Softmax(_Normalization, Function):
    """``exp(x) / sum(exp(x))`` along ``axis``, shifted by the maximum for stability.

    Backward: ``y * (g - sum(g * y, axis))`` with the saved output ``y``.
    """

    oper = "softmax"

    @staticmethod
    def normalized(xp, s, axis):
        e = xp.exp(s)
        return e / e.sum(axis=axis, keepdims=True)

    @staticmethod
    def backward(ctx, g):
        y, axis = Softmax.saved_output(ctx)
        return y * (g - ns.sum(g * y, axis=axis, keepdims=True))


class LogSoftmax(_Normalization, Function):
    """``x - logsumexp(x)`` along ``axis``, shifted by the maximum for stability.

    Backward: ``g - exp(y) * sum(g, axis)`` with the saved output ``y``.

    References:
        Blanchard, Higham and Higham, "Accurately computing the log-sum-exp and softmax
        functions", IMA J. Numer. Anal., 2021.
    """

    oper = "log_softmax"

    @staticmethod
    def normalized(xp, s, axis):
        return s - xp.log(xp.exp(s).sum(axis=axis, keepdims=True))

    @staticmethod
    def backward(ctx, g):
        y, axis = LogSoftmax.saved_output(ctx)
        return g - ns.exp(y) * ns.sum(g, axis=axis, keepdims=True)


class Gelu(_Gelu):
    """The ``Gelu`` Function: :class:`tapegrad.ops.Gelu` with the tanh approximation
    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` as the default, so
    ``Gelu.apply(x)`` gives the tanh-approximated values (``approximate="tanh"`` in PyTorch)."""

    @staticmethod
    def forward(ctx, x, approximate="tanh"):
        return _Gelu.forward(ctx, x, approximate)


def _loss_forward(ctx, a, b, per, reduction):
    """Save the inputs and reduce the elementwise loss ``per`` (empty mean: NaN, as NumPy)."""
    ctx.save_for_backward(a, b)
    ctx.reduction = reduction
    ctx.n = per.size
    if reduction == "none":
        return per
    if reduction == "sum":
        return per.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        return per.sum() / per.dtype.type(per.size)


def _loss_scale(ctx, g):
    """The cotangent of each element of the unreduced loss (broadcasts against it)."""
    return g * (1.0 / ctx.n) if ctx.reduction == "mean" and ctx.n else g


def _check_loss_shapes(who: str, pred_shape, target_shape, pred="y_pred", target="y_true"):
    """Raise ValueError unless the target has the prediction's shape (or is a scalar).

    An elementwise loss never broadcasts a target against a prediction of another shape: a
    ``(N, 1)`` prediction against an ``(N,)`` target would otherwise compare every prediction
    with every target (an ``(N, N)`` loss) and give a silently wrong answer.
    """
    pred_shape, target_shape = tuple(pred_shape), tuple(target_shape)
    if target_shape == pred_shape or target_shape == ():
        return
    hint = ""
    if math.prod(pred_shape) == math.prod(target_shape):
        hint = f" Reshape one to the other (for example {target}.reshape({pred_shape}))."
    raise ValueError(
        f"{who}: {pred} of shape {pred_shape} and {target} of shape {target_shape} differ; the "
        f"loss compares them elementwise, so {target} must have {pred}'s shape (or be a "
        f"scalar).{hint}"
    )


def _reduce_examples(per: Tensor, reduction: str) -> Tensor:
    """Reduce each example's own elements of an unreduced batched loss ``per`` ``(B, ...)``:
    ``"none"`` keeps it, ``"sum"`` and ``"mean"`` give ``(B,)`` (the mean of an empty example
    is NaN, as the unbatched loss's)."""
    if reduction == "none":
        return per
    total = _sum_examples(per)
    if reduction == "sum":
        return total
    n = math.prod(per.shape[1:])
    return total / n if n else total * math.nan


class _Loss(Function):
    """Base of the loss Functions: inputs ``(y_pred, y_true)`` of one shape (or a scalar
    ``y_true``), keyword ``reduction``.

    Batching rule (vmap): the unreduced loss of the whole batch in one call (an unbatched
    operand broadcast along the batch, a per-example scalar target broadcast over its example),
    then each example's own elements reduced, so ``"mean"`` divides by one example's size.
    """

    default_reduction = "mean"

    @classmethod
    def batch(cls, args, batched, size, reduction=None):
        reduction = cls.default_reduction if reduction is None else reduction
        p, y = args
        bp, by = batched
        ps, ys = _example_shape(p, bp), _example_shape(y, by)
        _check_loss_shapes(cls.oper, ps, ys)  # pyright: ignore[reportArgumentType]
        p = _with_batch(p, bp, size)
        if by and ys != ps:  # one scalar target per example
            y = ns.broadcast_to(ns.reshape(y, (size,) + (1,) * len(ps)), p.shape)
        elif not by and ys:
            y = _with_batch(y, False, size)
        return _reduce_examples(cls.apply(p, y, reduction="none"), reduction)

    @classmethod
    def output_shape(cls, a, b, reduction="mean"):
        _check_loss_shapes(cls.oper, a, b)  # pyright: ignore[reportArgumentType]
        return tuple(a) if reduction == "none" else ()


def _cotangents(ctx, ga, gb):
    na, nb = ctx.needs_input_grad
    return (ga() if na else None), (gb() if nb else None)


class MeanSquaredLoss(_Loss):
    """``(y_pred - y_true)**2``, reduced (default ``"mean"``, as PyTorch's ``mse_loss``).

    Backward: ``2 (y_pred - y_true) / N`` times the cotangent (``N`` elements, for ``"mean"``).
    """

    oper = "mean_squared_loss"

    @staticmethod
    def forward(ctx, y_pred, y_true, reduction="mean"):
        _check_loss_shapes("mean_squared_loss", y_pred.shape, y_true.shape)
        d = y_pred - y_true
        return _loss_forward(ctx, y_pred, y_true, d * d, reduction)

    @staticmethod
    def backward(ctx, g):
        p, y = ctx.saved_tensors
        s = _loss_scale(ctx, g)
        return _cotangents(ctx, lambda: 2.0 * (p - y) * s, lambda: -2.0 * (p - y) * s)


class BinaryCrossEntropy(_Loss):
    """``-(y log p + (1 - y) log(1 - p))``, reduced, with each log clamped at -100
    (PyTorch's convention, so ``p`` of exactly 0 or 1 gives a finite loss).

    Backward: ``(p - y) / max(p (1 - p), 1e-12)`` for ``p`` and ``log(1 - p) - log p`` for
    ``y`` (logs clamped as in forward), times the cotangent (over ``N`` for ``"mean"``).
    """

    oper = "binary_cross_entropy"

    @staticmethod
    def forward(ctx, y_pred, y_true, reduction="mean"):
        _check_loss_shapes("binary_cross_entropy", y_pred.shape, y_true.shape)
        xp = ctx.backend
        with np.errstate(divide="ignore"):
            lp = xp.maximum(xp.log(y_pred), -100)
            l1p = xp.maximum(xp.log1p(-y_pred), -100)
        per = -(y_true * lp + (1 - y_true) * l1p)
        return _loss_forward(ctx, y_pred, y_true, per, reduction)

    @staticmethod
    def backward(ctx, g):
        p, y = ctx.saved_tensors
        s = _loss_scale(ctx, g)

        def gy():
            tiny = float(_tg_dtypes.finfo(p.dtype).tiny)
            lp = ns.maximum(ns.log(ns.maximum(p, tiny)), -100.0)
            l1p = ns.maximum(ns.log(ns.maximum(1 - p, tiny)), -100.0)
            return (l1p - lp) * s

        return _cotangents(ctx, lambda: (p - y) / ns.maximum(p * (1 - p), 1e-12) * s, gy)


class BinaryCrossEntropyWithLogits(_Loss):
    """``softplus(x) - y x`` (binary cross-entropy of logits), reduced; no overflow for any
    ``|x|``.

    Backward: ``sigmoid(x) - y`` for ``x`` and ``-x`` for ``y``, times the cotangent.
    """

    oper = "binary_cross_entropy_with_logits"

    @staticmethod
    def forward(ctx, y_pred, y_true, reduction="mean"):
        _check_loss_shapes("binary_cross_entropy_with_logits", y_pred.shape, y_true.shape)
        xp = ctx.backend
        x = y_pred
        per = xp.maximum(x, 0) + xp.log1p(xp.exp(-xp.abs(x))) - x * y_true
        return _loss_forward(ctx, y_pred, y_true, per, reduction)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        s = _loss_scale(ctx, g)
        return _cotangents(ctx, lambda: (Sigmoid.apply(x) - y) * s, lambda: -x * s)


class HingeLoss(_Loss):
    """``max(0, 1 - y_true * y_pred)``, reduced (default ``"none"``).

    Backward: ``-y_true`` where ``y_true * y_pred < 1``, else 0 (0 at the kink, a
    subgradient), times the cotangent; symmetrically ``-y_pred`` for ``y_true``.

    References:
        Cortes and Vapnik, "Support-vector networks", Machine Learning, 1995.
    """

    oper = "hinge_loss"
    default_reduction = "none"

    @staticmethod
    def forward(ctx, y_pred, y_true, reduction="none"):
        _check_loss_shapes("hinge_loss", y_pred.shape, y_true.shape)
        per = ctx.backend.maximum(1 - y_true * y_pred, 0)
        return _loss_forward(ctx, y_pred, y_true, per, reduction)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        s = _loss_scale(ctx, g)
        active = (1 - y * x) > 0
        return _cotangents(
            ctx,
            lambda: ns.where(active, -y * s, 0.0),
            lambda: ns.where(active, -x * s, 0.0),
        )


def _pick(xp, s, t):
    """``s[..., t]`` along the last axis: ``s`` ``(..., C)``, integer ``t`` ``(...)``."""
    if s.ndim == 2:
        return s[xp.arange(s.shape[0]), t]
    return xp.take_along_axis(s, t.astype(np.intp)[..., None], axis=-1)[..., 0]


_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _targets_all_valid(target, n_classes: int, ignore_index: int) -> bool:
    """Whether every entry of the integer array ``target`` is a class index in
    ``[0, n_classes)`` other than ``ignore_index`` (one reduction in the common case: a negative
    index, viewed as unsigned, is larger than any class count).

    Raises:
        ValueError: naming the first target that is neither a class index nor ``ignore_index``.
    """
    if target.size == 0:
        return True
    dtype = target.dtype
    t = target.view(_UNSIGNED[dtype.itemsize]) if dtype.kind == "i" else target
    if int(t.max()) < n_classes:  # every target a class index
        return not 0 <= ignore_index < n_classes or not bool((target == ignore_index).any())
    bad = (target != ignore_index) & ((target < 0) | (target >= n_classes))
    if bad.any():
        raise ValueError(
            f"target {int(target[bad].reshape(-1)[0])} is out of range for {n_classes} classes "
            f"(expected [0, {n_classes}) or ignore_index={ignore_index})"
        )
    return False


def _xent_grad(xp, logits, target, g, ignore_index, eps, reduction, stats=None):
    """``(softmax(logits) - T) * valid * scale`` (see :class:`CrossEntropyGrad`) as one fresh
    array of ``logits``' shape and dtype, corrected in place.

    ``stats``: ``(m, se, all_valid)`` from :class:`CrossEntropy`'s forward on these logits and
    targets (``m`` the row maxima, ``se`` the row sums of ``exp(logits - m)``, both
    ``(..., 1)``), so that its first-order backward skips both reductions and the targets'
    check; the values are exactly those computed without them.
    """
    dt = logits.dtype.type
    if stats is None:
        m, se, all_valid = logits.max(axis=-1, keepdims=True), None, None
    else:
        m, se, all_valid = stats
    d = logits - m  # the one fresh array, then in place
    xp.exp(d, out=d)
    d /= d.sum(axis=-1, keepdims=True) if se is None else se
    if eps:
        d -= dt(eps / logits.shape[-1])
    valid = None
    if all_valid is None:
        valid = target != ignore_index
        all_valid = bool(valid.all())
    elif not all_valid:
        valid = target != ignore_index
    safe = target if all_valid else xp.where(valid, target, 0)
    if d.ndim == 2:  # rows are distinct, so the fancy-indexed update is exact
        d[xp.arange(d.shape[0]), safe] -= dt(1.0 - eps)
    else:
        idx = safe.astype(np.intp)[..., None]
        hit = xp.take_along_axis(d, idx, axis=-1)
        hit -= dt(1.0 - eps)
        xp.put_along_axis(d, idx, hit, axis=-1)
    if all_valid and reduction != "none":
        # one scale for every row: g, or g over the number of targets
        d *= g / dt(max(target.size, 1)) if reduction == "mean" else g
        return d
    w = xp.ones(target.shape, d.dtype) if all_valid else valid.astype(d.dtype)  # pyright: ignore[reportOptionalMemberAccess]
    if reduction == "mean":
        w *= g / dt(max(int(valid.sum()), 1))  # pyright: ignore[reportOptionalMemberAccess]
    else:
        w *= g
    d *= w[..., None]
    return d


class CrossEntropy(Function):
    """Fused log-softmax + negative log-likelihood over the last axis of ``logits``.

    ``loss_i = -sum_c T_ic log_softmax(logits_i)_c`` with the smoothed target
    ``T_ic = (1 - eps) [c == t_i] + eps / C`` (Szegedy et al., 2016); entries with
    ``t_i == ignore_index`` contribute nothing. ``"mean"`` divides by the number of
    non-ignored targets (0 when every target is ignored). A target that is neither a class
    index in ``[0, C)`` nor ``ignore_index`` raises ValueError.

    Backward: :class:`CrossEntropyGrad`, ``(softmax(logits) - T) * valid * scale`` where
    ``scale`` is the cotangent (``"none"``/``"sum"``) or the cotangent over the count
    (``"mean"``), in one fused op; its own backward is written with tapegrad ops, so higher
    derivatives work.

    Batching rule (vmap): the unreduced loss of the whole batch in one call, then each
    example's own reduction (``"mean"`` over that example's count of valid targets); the
    backward's rule likewise turns each example's scale into per-target cotangents of one
    ``reduction="none"`` call.
    """

    oper = "cross_entropy"

    @staticmethod
    def forward(ctx, logits, target, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
        xp = ctx.backend
        _check_class_targets("cross_entropy", logits.shape, target.shape)
        ctx.save_for_backward(logits, target)
        ctx.ignore_index = ignore_index
        ctx.label_smoothing = label_smoothing
        ctx.reduction = reduction
        dt = logits.dtype.type
        eps = label_smoothing
        all_valid = _targets_all_valid(target, logits.shape[-1], ignore_index)
        valid = None if all_valid else target != ignore_index
        m = logits.max(axis=-1, keepdims=True)
        s = logits - m
        picked = _pick(xp, s, target if all_valid else xp.where(valid, target, 0))
        s_mean = s.mean(axis=-1) if eps else None
        xp.exp(s, out=s)
        se = s.sum(axis=-1, keepdims=True)
        lse = xp.log(se)[..., 0]
        # nll = -log_softmax[target] = lse - s[target]
        nll = lse - picked
        per = nll if eps == 0 else (1 - eps) * nll - eps * (s_mean - lse)
        if not all_valid:
            per = xp.where(valid, per, dt(0))
        if reduction == "none":
            return per.astype(logits.dtype, copy=False)
        total = per.sum()
        if reduction == "sum":
            return total.astype(logits.dtype)
        count = max(target.size if all_valid else int(valid.sum()), 1)  # pyright: ignore[reportOptionalMemberAccess]
        return xp.asarray(total / dt(count), dtype=logits.dtype)

    @staticmethod
    def backward(ctx, g):
        if not ctx.needs_input_grad[0]:
            return None, None
        logits, target = ctx.saved_tensors
        params = dict(
            ignore_index=ctx.ignore_index,
            label_smoothing=ctx.label_smoothing,
            reduction=ctx.reduction,
        )
        return CrossEntropyGrad.apply(logits, target, g, **params), None

    @staticmethod
    def batch(args, batched, size, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
        # the unreduced loss of the whole batch in one call, then each example's own reduction
        logits, target = _xent_batch_inputs(args, batched, size)
        per = CrossEntropy.apply(
            logits,
            target,
            ignore_index=ignore_index,
            label_smoothing=label_smoothing,
            reduction="none",
        )
        if reduction == "none":
            return per
        total = _sum_examples(per)
        if reduction == "sum":
            return total
        return total / _xent_counts(target, ignore_index, logits.dtype)

    @classmethod
    def output_shape(cls, logits, target, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
        _check_class_targets("cross_entropy", logits, target)
        return tuple(target) if reduction == "none" else ()

    @classmethod
    def output_dtype(cls, logits, target, **params):
        return np.dtype(logits)


class CrossEntropyGrad(Function):
    """The backward of :class:`CrossEntropy`, fused: ``(softmax(logits) - T) * valid * scale``.

    Inputs: ``logits`` ``(..., C)`` (floating), ``target`` ``(...)`` (integer class indices or
    ``ignore_index``), the loss cotangent ``g`` (shape ``(...)`` for ``reduction="none"``, else
    ``()``); static ``ignore_index``, ``label_smoothing`` (``eps``) and ``reduction`` as in
    :class:`CrossEntropy`. ``T = (1 - eps) onehot(target) + eps / C``; ``valid`` is 0 at ignored
    targets; ``scale`` is ``g`` (``"none"``, ``"sum"``) or ``g / max(count, 1)`` (``"mean"``,
    ``count`` the number of valid targets). Output: ``logits``' shape and dtype.

    Forward is one softmax written into a fresh array that is then corrected in place (the
    target entries, the smoothing, one multiply by ``valid * scale``): no other array of the
    logits' size. Backward (written with tapegrad ops, so every order works): the output is
    linear in ``g`` (``d/dg``: ``sum(h * CrossEntropyGrad(logits, target, 1))`` over the class
    axis, and over everything for the scalar reductions) and a softmax in ``logits``
    (``d/dlogits``: ``p * (k - sum(k * p))`` with ``k = h * valid * scale``, ``p`` the
    softmax); ``target`` gets none.
    """

    oper = "cross_entropy_grad"

    @staticmethod
    def forward(ctx, logits, target, g, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
        ctx.save_for_backward(logits, target, g)
        ctx.ignore_index = ignore_index
        ctx.label_smoothing = label_smoothing
        ctx.reduction = reduction
        return _xent_grad(ctx.backend, logits, target, g, ignore_index, label_smoothing, reduction)

    @staticmethod
    def backward(ctx, h):
        logits, target, g = ctx.saved_tensors
        nl, _, ng = ctx.needs_input_grad
        params = dict(
            ignore_index=ctx.ignore_index,
            label_smoothing=ctx.label_smoothing,
            reduction=ctx.reduction,
        )
        gl = gg = None
        if nl:
            valid = ns.astype(ns.not_equal(target, ctx.ignore_index), logits.dtype)
            scale = g * valid
            if ctx.reduction == "mean":
                scale = scale / ns.maximum(ns.sum(valid), 1.0)
            p = Softmax.apply(logits, axis=-1)
            k = h * _expand_dims(scale, -1)
            gl = p * (k - ns.sum(k * p, axis=-1, keepdims=True))
        if ng:
            unit = CrossEntropyGrad.apply(logits, target, _ones_like(g), **params)
            gg = ns.sum(h * unit, axis=-1 if ctx.reduction == "none" else None)
        return gl, None, gg

    @staticmethod
    def batch(args, batched, size, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
        # one call with reduction "none": each example's scale (its cotangent, over its own
        # count of valid targets for "mean") becomes a per-target cotangent
        logits, target = _xent_batch_inputs(args[:2], batched[:2], size)
        g, bg = args[2], batched[2]
        k = target.ndim - 1  # one example's target axes
        if reduction == "none":
            if bg:  # lined up with the targets' axes (g may broadcast against them)
                g = ns.reshape(g, (size,) + (1,) * (k + 1 - g.ndim) + g.shape[1:])
        else:
            if reduction == "mean":
                g = g / _xent_counts(target, ignore_index, logits.dtype)
                bg = True
            if bg:
                g = ns.reshape(g, (size,) + (1,) * k)
        return CrossEntropyGrad.apply(
            logits,
            target,
            g,
            ignore_index=ignore_index,
            label_smoothing=label_smoothing,
            reduction="none",
        )

    @classmethod
    def output_shape(cls, logits, target, g, **params):
        return tuple(logits)

    @classmethod
    def output_dtype(cls, logits, target, g, **params):
        return np.dtype(logits)


def _xent_batch_inputs(args, batched, size):
    """Batched ``(logits, target)`` of :class:`CrossEntropy` and :class:`CrossEntropyGrad`
    (an unbatched one broadcast along the batch), checked per example."""
    logits, target = args
    _check_class_targets(
        "cross_entropy", _example_shape(logits, batched[0]), _example_shape(target, batched[1])
    )
    return _with_batch(logits, batched[0], size), _with_batch(target, batched[1], size)


def _xent_counts(target: Tensor, ignore_index: int, dtype) -> Tensor:
    """Each example's count of valid (non-ignored) targets, at least 1, as ``dtype``: the
    divisor of :class:`CrossEntropy`'s ``"mean"``; ``target`` is ``(B, ...)``."""
    valid = ns.astype(ns.not_equal(target, ignore_index), dtype)
    return ns.maximum(_sum_examples(valid), 1.0)


def _check_class_targets(who: str, logits_shape, target_shape, pred="y_pred", target="y_true"):
    """Raise ValueError unless class-index targets have the logits' shape minus the class axis."""
    logits_shape, target_shape = tuple(logits_shape), tuple(target_shape)
    if len(logits_shape) < 1 or logits_shape[-1] < 1:
        raise ValueError(f"{who}: {pred} must have a non-empty class axis, got {logits_shape}")
    if target_shape != logits_shape[:-1]:
        raise ValueError(
            f"{who}: {target} of shape {target_shape} does not match {pred} of shape "
            f"{logits_shape}; expected {logits_shape[:-1]} (class indices, classes last)"
        )


class Linear(Function):
    """Fused affine map ``y = x @ w + b`` for ``x`` of shape ``(..., in)`` with at least two
    dimensions, ``w`` ``(in, out)`` and ``b`` ``(out,)``, all of one floating dtype.

    Forward: one BLAS call, then the bias added in place into that fresh product (no second
    output-sized array). Backward: ``g @ w.T`` for ``x``, ``x.T @ g`` (leading axes flattened
    into the batch) for ``w`` and ``g.sum(leading axes)`` for ``b``, written with tapegrad ops
    (``matmul`` with its transpose flags, ``sum``), so every order of derivative works; each
    is computed only when that input needs a gradient. For a single row ``x.T @ g`` is the
    outer product ``x.T * g`` (a multiply: no one-term contraction through BLAS), which is
    what per-example weight gradients under :func:`tapegrad.vmap` become.

    Batching rule (vmap): with shared ``w`` and ``b`` the batch is merged into the rows (one
    BLAS call for the whole batch); with per-example ``w`` or ``b`` (an ensemble) one batched
    ``matmul`` and a broadcast add.
    """

    oper = "linear"
    traits = Traits(cost="contraction")

    @staticmethod
    def forward(ctx, x, w, b):
        if x.ndim < 2 or getattr(b, "ndim", None) != 1:
            Linear.output_shape(x.shape, w.shape, getattr(b, "shape", b))  # the clear error
        ctx.save_for_backward(x, w)
        out = x @ w
        out += b  # ``out`` is this op's own fresh array; no input is touched
        return out

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        nx, nw, nb = ctx.needs_input_grad
        # matmul's transpose flags: contiguous products, no transpose entry (no strided
        # transposed cotangent under a second derivative)
        gx = MatMul.apply(g, w, transpose_b=True) if nx else None
        if g.ndim > 2 and (nw or nb):
            rows = math.prod(g.shape[:-1])  # not -1: ambiguous for zero features
            g = ns.reshape(g, (rows, g.shape[-1]))
            x = ns.reshape(x, (rows, x.shape[-1]))
        if not nw:
            gw = None
        elif g.shape[0] == 1:  # one row: the outer product, exactly (one term per entry)
            gw = ns.reshape(x, (x.shape[-1], 1)) * g
        else:
            gw = MatMul.apply(x, g, transpose_a=True)
        gb = ns.sum(g, axis=0) if nb else None
        return gx, gw, gb

    @staticmethod
    def batch(args, batched, size):
        x, w, b = args
        bx, bw, bb = batched
        Linear.output_shape(_example_shape(x, bx), _example_shape(w, bw),  # one example's
                            None if b is None else _example_shape(b, bb))  # contract
        if not (bw or bb):  # shared weights: the batch merged into the rows, one BLAS call
            rows = x.shape[:-1]
            out = Linear.apply(ns.reshape(x, (math.prod(rows), x.shape[-1])), w, b)
            return ns.reshape(out, rows + (w.shape[-1],))
        # per-example weights (an ensemble): one batched matmul, then the bias
        ex = _example_shape(x, bx)
        n_in, n_out = w.shape[-2:]
        m = math.prod(ex[:-1])
        y = ns.matmul(ns.reshape(x, ((size,) if bx else ()) + (m, n_in)), w)
        y = y + (ns.reshape(b, (size, 1, n_out)) if bb else b)
        return ns.reshape(y, (size,) + ex[:-1] + (n_out,))

    @classmethod
    def output_shape(cls, x, w, b):
        if (len(x) < 2 or len(w) != 2 or x[-1] != w[0] or not isinstance(b, tuple)
                or tuple(b) != (w[1],)):
            raise ValueError(
                f"linear: input {x}, weight {w} and bias {b} do not fit; need input (..., in) "
                "with at least 2 dimensions, weight (in, out) and bias (out,)"
            )
        return tuple(x[:-1]) + (w[1],)


def _out_hw(hw, kernel, stride, dilation, pads):
    """Output size per spatial axis (any number of them); ``pads`` ``(lo0, hi0, lo1, ...)``."""
    return tuple(
        (size + p0 + p1 - d * (k - 1) - 1) // s + 1
        for size, k, s, d, p0, p1 in zip(hw, kernel, stride, dilation, pads[0::2], pads[1::2])
    )


def _pad(xp, x, pads, value=0):
    """``x`` ``(N, C, *spatial)`` with ``pads = (lo0, hi0, lo1, hi1, ...)`` of ``value`` on its
    spatial axes (``(top, bottom, left, right)`` for images; ``x`` itself if none)."""
    if not any(pads):
        return x
    spatial = x.shape[2:]
    lo, hi = pads[0::2], pads[1::2]
    out = xp.empty(x.shape[:2] + tuple(n + a + b for n, a, b in zip(spatial, lo, hi)),
                   dtype=x.dtype)
    if value == 0:
        out[...] = 0  # cheaper than np.pad's per-edge fills
    else:
        out.fill(value)
    out[(slice(None),) * 2 + tuple(slice(a, a + n) for a, n in zip(lo, spatial))] = x
    return out


def _windows(xp, x, kernel, stride, dilation, out_hw, offsets_first=True):
    """Read-only strided view of the windows of ``x`` ``(N, C, *spatial)`` (no copy).

    Shape ``(N, C, *kernel, *out)`` (``offsets_first``, the im2col layout whose innermost
    axis runs along an image row) or ``(N, C, *out, *kernel)``.
    """
    n, c = x.shape[:2]
    s0, s1 = x.strides[:2]
    sp = x.strides[2:]
    offs = tuple((k, st * d) for k, st, d in zip(kernel, sp, dilation))
    pos = tuple((o, st * s) for o, st, s in zip(out_hw, sp, stride))
    dims = ((n, s0), (c, s1)) + ((offs + pos) if offsets_first else (pos + offs))
    shape, strides = tuple(d for d, _ in dims), tuple(st for _, st in dims)
    if xp is np:
        return np.lib.stride_tricks.as_strided(x, shape, strides, writeable=False)
    return xp.lib.stride_tricks.as_strided(x, shape, strides)  # pragma: no cover - GPU


def _im2col(xp, x, kernel, stride, pads, dilation, groups, batch_first=True):
    """Columns of padded ``x`` (one copy of a strided view) and the output size ``(Ho, Wo)``.

    ``batch_first``: ``(N, G, K, L)`` (the forward's layout: a batched matmul gives NCHW
    directly); else ``(G, K, N * L)`` (one long matmul per group for the weight gradient).
    ``K = C/G * prod(kernel)`` runs over (channel, kernel offsets), ``L = prod(out)`` (any
    number of spatial axes). The copy's innermost axis is an image row, so it streams.
    """
    n, c = x.shape[:2]
    nd = x.ndim - 2
    out_hw = _out_hw(x.shape[2:], kernel, stride, dilation, pads)
    win = _windows(xp, _pad(xp, x, pads), kernel, stride, dilation, out_hw)
    k = c // groups * math.prod(kernel)
    length = math.prod(out_hw)
    win = win.reshape((n, groups, c // groups) + win.shape[2:])
    if batch_first:
        return win.reshape(n, groups, k, length), out_hw
    order = (1, 2) + tuple(range(3, 3 + nd)) + (0,) + tuple(range(3 + nd, 3 + 2 * nd))
    cols = win.transpose(order).reshape(groups, k, n * length)
    return cols, out_hw


def _conv_forward(xp, x, w, stride, pads, dilation, groups, b=None):
    """``conv(x, w) (+ b)`` as one batched matmul on the im2col columns; ``(N, O, *out)``."""
    cols, out_hw = _im2col(xp, x, w.shape[2:], stride, pads, dilation, groups)
    o = w.shape[0]
    out = xp.matmul(w.reshape(groups, o // groups, -1), cols)  # (N, G, Og, L), fresh
    out = out.reshape((x.shape[0], o) + tuple(out_hw))
    if b is not None:
        out += b.reshape((1, o) + (1,) * len(out_hw))  # into this op's own array
    return out


def _conv_weight_grad(xp, x, g, kernel, stride, pads, dilation, groups):
    """``dw = sum over batch and pixels of g * columns``: one matmul per group."""
    cols, _ = _im2col(xp, x, kernel, stride, pads, dilation, groups, batch_first=False)
    n, o = g.shape[:2]
    og = o // groups
    length = math.prod(g.shape[2:])
    gm = g.reshape(n, groups, og, length).transpose(1, 2, 0, 3).reshape(groups, og, -1)
    gw = xp.matmul(gm, cols.transpose(0, 2, 1))  # (G, Og, K)
    return gw.reshape((o, x.shape[1] // groups) + tuple(kernel))


def _conv_input_grad(xp, g, w, in_hw, stride, pads, dilation, groups):
    """``dx``: a batched matmul to column cotangents, then col2im as one strided add per
    kernel offset (a loop over the ``prod(kernel)`` offsets, never over images or pixels)."""
    n, o = g.shape[:2]
    out_hw = g.shape[2:]
    og = o // groups
    cg, kernel = w.shape[1], w.shape[2:]
    wm = w.reshape(groups, og, cg * math.prod(kernel)).transpose(0, 2, 1)  # (G, K, Og)
    dcols = xp.matmul(wm, g.reshape(n, groups, og, math.prod(out_hw)))  # (N, G, K, L)
    dcols = dcols.reshape((n, groups * cg) + tuple(kernel) + tuple(out_hw))
    lo, hi = pads[0::2], pads[1::2]
    padded = tuple(size + a + b for size, a, b in zip(in_hw, lo, hi))
    dx = xp.zeros((n, groups * cg) + padded, dtype=dcols.dtype)
    full = (slice(None),) * 2
    for offset in itertools.product(*(range(k) for k in kernel)):  # offsets, never pixels
        at = tuple(slice(i * d, i * d + s * (m - 1) + 1, s)
                   for i, d, s, m in zip(offset, dilation, stride, out_hw))
        dx[full + at] += dcols[full + offset]
    if not any(pads):
        return dx
    return xp.ascontiguousarray(dx[full + tuple(slice(a, a + m) for a, m in zip(lo, in_hw))])


# Batching rules of the three convolution ops. A batched image operand with shared weights
# merges the vmap axis into N. Per-example weights (an ensemble, or per-example weight
# gradients) use grouped convolution: the B examples become B times as many channel groups,
# each example's channels (and weights) one block of groups. A shared operand against a
# batched weight-side operand is stacked along that operand's channels instead (no copy of it).
def _to_groups(a: Tensor) -> Tensor:
    """``(B, N, C, ...)`` as ``(N, B * C, ...)``: each example's channels one block."""
    a = _swapaxes(a, 0, 1)
    return ns.reshape(a, (a.shape[0], a.shape[1] * a.shape[2]) + a.shape[3:])


def _from_groups(y: Tensor, size: int) -> Tensor:
    """``(N, B * C, ...)`` back to ``(B, N, C, ...)``."""
    n, bc = y.shape[:2]
    return _swapaxes(ns.reshape(y, (n, size, bc // size) + y.shape[2:]), 0, 1)


def _stack_in_groups(a: Tensor, groups: int, axis: int) -> Tensor:
    """``a`` ``(B, ..., C, ...)`` (``C`` on ``axis`` of one example) with the batch stacked
    inside each of the ``groups`` channel groups: axis ``axis`` of the result (one example's
    axes) holds ``(groups, B, C / groups)`` flattened."""
    size, c = a.shape[0], a.shape[axis + 1]
    split = a.shape[1 : axis + 1] + (groups, c // groups) + a.shape[axis + 2 :]
    a = ns.reshape(a, (size,) + split)
    order = tuple(range(1, axis + 2)) + (0,) + tuple(range(axis + 2, a.ndim))
    a = ns.transpose(a, order)  # (..., groups, B, C / groups, ...)
    return ns.reshape(a, a.shape[:axis] + (groups * size * (c // groups),) + a.shape[axis + 3 :])


def _unstack_groups(y: Tensor, size: int, groups: int, axis: int) -> Tensor:
    """The inverse of :func:`_stack_in_groups`: ``y`` whose axis ``axis`` holds ``(groups, B,
    C / groups)`` as ``(B, ..., C, ...)``."""
    c = y.shape[axis] // (size * groups)
    y = ns.reshape(y, y.shape[:axis] + (groups, size, c) + y.shape[axis + 1 :])
    order = (axis + 1,) + tuple(i for i in range(y.ndim) if i != axis + 1)
    y = ns.transpose(y, order)  # (B, ..., groups, C / groups, ...)
    return ns.reshape(y, y.shape[: axis + 1] + (groups * c,) + y.shape[axis + 3 :])


def _conv_shape(fn, args, batched, **params) -> tuple:
    """One example's output shape of the convolution op ``fn``."""
    shapes = [_example_shape(a, b) if a is not None else None for a, b in zip(args, batched)]
    return fn.output_shape(*shapes, **params)


def _save_conv(ctx, a, b, stride, padding, dilation, groups) -> None:
    """Forward of the convolution ops: save both operands, and the convolution's parameters
    (``ctx.conv``, what each backward passes on to the others)."""
    ctx.save_for_backward(a, b)
    ctx.conv = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)


class Conv2d(Function):
    """2-D cross-correlation ``y[n, o] = sum_c x[n, c] * w[o, c] (+ b[o])`` over windows
    (im2col: one copy of a strided view of the padded input, then one batched matmul whose
    result is already NCHW; the optional bias is added in place into that fresh result).

    Inputs ``x`` ``(N, C, H, W)``, ``w`` ``(O, C/groups, kh, kw)`` and optionally ``b``
    ``(O,)``. Static params: ``stride`` and ``dilation`` pairs, ``padding`` as ``(top, bottom,
    left, right)``, ``groups``. Any number of spatial axes works the same way (``conv3d``,
    ``conv1d``-style and the transposed convolutions use it): ``x`` ``(N, C, *spatial)``,
    ``w`` ``(O, C/groups, *kernel)``, one ``stride``/``dilation`` entry per axis and
    ``padding`` ``(lo0, hi0, lo1, hi1, ...)``. Backward: :class:`Conv2dInputGrad` (col2im) for
    ``x``, :class:`Conv2dWeightGrad` for ``w`` and ``g.sum((0, 2, 3))`` for ``b``; the three
    convolution ops are each other's transposes, so every order of derivative stays within
    them.

    Batching rules (vmap) of the three: shared weights merge the vmap axis into ``N``;
    per-example weights, and per-example weight gradients, are one grouped convolution with
    ``B * groups`` groups (each example's channels one block); a shared operand against a
    batched one on the weight side is stacked along the channels instead.
    """

    oper = "conv2d"
    traits = Traits(cost="dense")

    @staticmethod
    def forward(ctx, x, w, b=None, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1):
        _save_conv(ctx, x, w, stride, padding, dilation, groups)
        return _conv_forward(ctx.backend, x, w, stride, padding, dilation, groups, b)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        nx, nw = ctx.needs_input_grad[:2]
        gx = Conv2dInputGrad.apply(g, w, in_hw=x.shape[2:], **ctx.conv) if nx else None
        gw = Conv2dWeightGrad.apply(x, g, kernel=w.shape[2:], **ctx.conv) if nw else None
        if len(ctx.needs_input_grad) == 2:
            return gx, gw
        gb = ns.sum(g, axis=(0,) + tuple(range(2, g.ndim))) if ctx.needs_input_grad[2] else None
        return gx, gw, gb

    @staticmethod
    def batch(args, batched, size, groups=1, **conv):
        x, w = args[:2]
        bx, bw = batched[:2]
        b = args[2] if len(args) > 2 else None
        bb = len(args) > 2 and batched[2]
        if not bw and bx:  # shared weights: the batch merged into N (and a shared bias fused)
            fused = () if b is None or bb else (b,)
            y = Conv2d.apply(_merge_batch(x), w, *fused, groups=groups, **conv)
            y = ns.reshape(y, x.shape[:2] + y.shape[1:])
            if not bb:
                return y
        elif not bw:  # only the bias is per example
            y = Conv2d.apply(x, w, groups=groups, **conv)
        elif size == 0:
            shape = _conv_shape(Conv2d, args[:2], batched[:2], groups=groups, **conv)
            return _zeros_batch((0,) + shape, x)
        elif bx:  # per-example images and weights: B * groups groups
            y = Conv2d.apply(_to_groups(x), _merge_batch(w), groups=size * groups, **conv)
            y = _from_groups(y, size)
        else:  # shared images, per-example weights: stacked as output channels
            y = Conv2d.apply(x, _stack_in_groups(w, groups, 0), groups=groups, **conv)
            y = _unstack_groups(y, size, groups, 1)
        if b is None:
            return y
        o, nd = b.shape[-1], w.ndim - 2 - bw  # one example's spatial axes
        return y + ns.reshape(b, (size, 1, o) + (1,) * nd if bb else (o,) + (1,) * nd)

    @classmethod
    def output_shape(
        cls, x, w, b=None, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1
    ):
        return (x[0], w[0]) + _out_hw(x[2:], w[2:], stride, dilation, padding)


class Conv2dInputGrad(Function):
    """The transpose of :class:`Conv2d` in its input: ``g, w -> dx`` (col2im with a loop over
    kernel offsets only). Backward: ``Conv2d(ct, w)`` for ``g``, ``Conv2dWeightGrad(ct, g)``
    for ``w``."""

    oper = "conv2d_input_grad"
    traits = Traits(cost="dense")

    @staticmethod
    def forward(
        ctx, g, w, in_hw=(1, 1), stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1
    ):
        _save_conv(ctx, g, w, stride, padding, dilation, groups)
        return _conv_input_grad(ctx.backend, g, w, in_hw, stride, padding, dilation, groups)

    @staticmethod
    def backward(ctx, ct):
        g, w = ctx.saved_tensors
        ng, nw = ctx.needs_input_grad
        gg = Conv2d.apply(ct, w, **ctx.conv) if ng else None
        gw = Conv2dWeightGrad.apply(ct, g, kernel=w.shape[2:], **ctx.conv) if nw else None
        return gg, gw

    @staticmethod
    def batch(args, batched, size, groups=1, **conv):
        g, w = args
        bg, bw = batched
        if not bw:  # shared weights: the batch merged into N
            y = Conv2dInputGrad.apply(_merge_batch(g), w, groups=groups, **conv)
            return ns.reshape(y, g.shape[:2] + y.shape[1:])
        if size == 0:
            shape = _conv_shape(Conv2dInputGrad, args, batched, groups=groups, **conv)
            return _zeros_batch((0,) + shape, w)
        if bg:  # per-example cotangents and weights: B * groups groups
            y = Conv2dInputGrad.apply(_to_groups(g), _merge_batch(w), groups=size * groups, **conv)
            return _from_groups(y, size)
        # a shared cotangent, per-example weights: stacked as input channels
        y = Conv2dInputGrad.apply(g, _stack_in_groups(w, 1, 1), groups=groups, **conv)
        return _unstack_groups(y, size, groups, 1)

    @classmethod
    def output_shape(cls, g, w, in_hw=(1, 1), groups=1, **conv):
        return (g[0], w[1] * groups) + tuple(in_hw)


class Conv2dWeightGrad(Function):
    """The transpose of :class:`Conv2d` in its weight: ``x, g -> dw``. Backward:
    ``Conv2dInputGrad(g, ct)`` for ``x``, ``Conv2d(x, ct)`` for ``g``."""

    oper = "conv2d_weight_grad"
    traits = Traits(cost="dense")

    @staticmethod
    def forward(
        ctx, x, g, kernel=(1, 1), stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1
    ):
        _save_conv(ctx, x, g, stride, padding, dilation, groups)
        return _conv_weight_grad(ctx.backend, x, g, kernel, stride, padding, dilation, groups)

    @staticmethod
    def backward(ctx, ct):
        x, g = ctx.saved_tensors
        nx, ng = ctx.needs_input_grad
        gx = Conv2dInputGrad.apply(g, ct, in_hw=x.shape[2:], **ctx.conv) if nx else None
        gg = Conv2d.apply(x, ct, **ctx.conv) if ng else None
        return gx, gg

    @staticmethod
    def batch(args, batched, size, groups=1, **conv):
        # per-example weight gradients: a sum over N, so the batch goes into the channel groups
        x, g = args
        bx, bg = batched
        if size == 0:
            shape = _conv_shape(Conv2dWeightGrad, args, batched, groups=groups, **conv)
            return _zeros_batch((0,) + shape, g)
        if bx and bg:  # B * groups groups
            y = Conv2dWeightGrad.apply(_to_groups(x), _to_groups(g), groups=size * groups, **conv)
            return ns.reshape(y, (size, y.shape[0] // size) + y.shape[1:])
        if bx:  # per-example images, a shared cotangent: stacked as input channels
            y = Conv2dWeightGrad.apply(_stack_in_groups(x, groups, 1), g, groups=groups, **conv)
            return _unstack_groups(y, size, 1, 1)
        # shared images, per-example cotangents: stacked as output channels
        y = Conv2dWeightGrad.apply(x, _stack_in_groups(g, groups, 1), groups=groups, **conv)
        return _unstack_groups(y, size, groups, 0)

    @classmethod
    def output_shape(cls, x, g, kernel=(1, 1), groups=1, **conv):
        return (g[1], x[1] // groups) + tuple(kernel)


def _offset_views(x, kernel, stride, out_hw, dilation=None):
    """The ``prod(kernel)`` strided views ``(N, C, *out_hw)`` of ``x`` ``(N, C, *spatial)``,
    one per kernel offset, in row-major offset order (views, no copies)."""
    dilation = dilation or (1,) * len(kernel)
    full = (slice(None),) * 2
    return [
        x[full + tuple(slice(i * d, i * d + s * (m - 1) + 1, s)
                       for i, d, s, m in zip(offset, dilation, stride, out_hw))]
        for offset in itertools.product(*(range(k) for k in kernel))
    ]


def _pool_hits(xp, x, out, kernel, stride, padding, dilation=None):
    """``(padded shape, [(offset index, hit mask)])``: for each kernel offset, where that
    window element is the window's maximum ``out`` and no earlier offset was (the first
    maximum wins ties, as ``argmax``; a NaN maximum goes to the window's first NaN)."""
    xpad = _pad(xp, x, padding, -np.inf)  # pyright: ignore[reportArgumentType]
    views = _offset_views(xpad, kernel, stride, out.shape[2:], dilation)
    nan = bool(xp.isnan(out.sum()))  # conservative: any NaN (or inf - inf) takes the slow path
    outnan = xp.isnan(out) if nan else None
    taken = None
    hits = []
    for k, v in enumerate(views):
        hit = v == out
        if nan:
            hit |= xp.isnan(v) & outnan
        if taken is None:
            taken = hit.copy() if len(views) > 1 else None
        else:
            hit = hit > taken  # hit and not taken, one pass over booleans
            if k < len(views) - 1:
                taken |= hit
        hits.append((k, hit))
    return xpad.shape, hits


def _pool_batch(cls, args, batched, size, **pool):
    """The batching rule of the max-pooling ops: the batch merged into N (an unbatched operand
    broadcast along the batch first)."""
    args = [_with_batch(a, b, size) for a, b in zip(args, batched)]
    y = cls.apply(*[_merge_batch(a) for a in args], **pool)
    return ns.reshape(y, args[0].shape[:2] + y.shape[1:])


class MaxPool2d(Function):
    """Max pooling of ``x`` ``(N, C, H, W)`` (floating) over ``kernel`` windows moved by
    ``stride``, with ``padding = (top, bottom, left, right)`` of ``-inf``.

    Any number of spatial axes (``max_pool1d`` and ``max_pool3d`` use it too): ``x``
    ``(N, C, *spatial)`` with ``kernel``, ``stride`` and ``dilation`` one entry per spatial
    axis and ``padding`` ``(lo0, hi0, lo1, hi1, ...)`` (asymmetric: ``ceil_mode`` pads the end
    further); ``dilation=None`` means 1 on every axis.

    Forward: ``prod(kernel) - 1`` elementwise maxima of strided views (a loop over kernel
    offsets, never over pixels). Saves ``x`` and the output (no index array). Backward:
    :class:`MaxPool2dGrad`, the cotangent routed to each window's first maximum (row-major
    order of the kernel offsets, as PyTorch).
    """

    oper = "max_pool2d"
    batch = classmethod(_pool_batch)

    @staticmethod
    def forward(ctx, x, kernel=(1, 1), stride=(1, 1), padding=(0, 0, 0, 0), dilation=None):
        xp = ctx.backend
        ctx.pool = dict(kernel=kernel, stride=stride, padding=padding, dilation=dilation)
        out_hw = _out_hw(x.shape[2:], kernel, stride, dilation or (1,) * len(kernel), padding)
        views = _offset_views(_pad(xp, x, padding, -np.inf), kernel, stride, out_hw, dilation)  # pyright: ignore[reportArgumentType]
        out = xp.maximum(views[0], views[1]) if len(views) > 1 else views[0].copy()
        for v in views[2:]:
            xp.maximum(out, v, out=out)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        return MaxPool2dGrad.apply(g, x, out, **ctx.pool)

    @classmethod
    def output_shape(cls, x, kernel=(1, 1), stride=(1, 1), padding=(0, 0, 0, 0), dilation=None):
        return tuple(x[:2]) + _out_hw(x[2:], kernel, stride, dilation or (1,) * len(kernel),
                                      padding)


def _routing_setup(ctx, x, out, kernel, stride, padding, dilation):
    """Forward of :class:`MaxPool2dGrad` and :class:`MaxPool2dGather`: save ``x`` and ``out``
    and the pooling parameters (``ctx.pool``); return :func:`_pool_hits`'s ``(padded shape,
    hits)``."""
    ctx.pool = dict(kernel=kernel, stride=stride, padding=padding, dilation=dilation)
    ctx.save_for_backward(x, out)
    return _pool_hits(ctx.backend, x, out, kernel, stride, padding, dilation)


def _routing_backward(ctx, ct, transpose):
    """Backward of :class:`MaxPool2dGrad` and :class:`MaxPool2dGather`, each linear in its
    first input and the other's ``transpose``: ``transpose`` of ``ct`` at the saved maxima for
    the first input, nothing for ``x`` and ``out`` (they only locate the maxima)."""
    x, out = ctx.saved_tensors
    first = transpose.apply(ct, x, out, **ctx.pool) if ctx.needs_input_grad[0] else None
    return first, None, None


class MaxPool2dGrad(Function):
    """The backward of :class:`MaxPool2d`: ``g`` ``(N, C, Ho, Wo)`` routed to the first
    maximum of each window of ``x`` (``out`` is the pooled ``x``); ``x``'s shape.

    One comparison, one boolean update and one multiply per kernel offset on output-sized
    strided views; when the windows tile ``x`` exactly each offset writes its own positions
    (no zero fill, no accumulation). Linear in ``g``, piecewise constant in ``x`` and ``out``:
    the backward is :class:`MaxPool2dGather` for ``g`` and nothing for the others.
    """

    oper = "max_pool2d_grad"
    batch = classmethod(_pool_batch)
    nondiff_argnums = (1, 2)  # piecewise constant in x and out (they only locate the maxima)

    @staticmethod
    def forward(ctx, g, x, out, kernel=(1, 1), stride=(1, 1), padding=(0, 0, 0, 0),
                dilation=None):
        xp = ctx.backend
        shape, hits = _routing_setup(ctx, x, out, kernel, stride, padding, dilation)
        out_hw = out.shape[2:]
        exact = (
            not any(padding) and tuple(stride) == tuple(kernel)
            and not any(d != 1 for d in dilation or ())
            and shape[2:] == tuple(k * m for k, m in zip(kernel, out_hw))
        )
        dx = (xp.empty if exact else xp.zeros)(shape, dtype=g.dtype)
        views = _offset_views(dx, kernel, stride, out_hw, dilation)
        finite = bool(xp.isfinite(g.sum()))
        for k, hit in hits:
            if exact and finite:
                xp.multiply(g, hit, out=views[k])  # straight into this op's fresh array
                continue
            part = g * hit if finite else xp.where(hit, g, 0)
            if exact:
                views[k][...] = part
            else:
                views[k] += part
        if any(padding):
            crop = tuple(slice(a, a + m) for a, m in zip(padding[0::2], x.shape[2:]))
            dx = xp.ascontiguousarray(dx[(slice(None),) * 2 + crop])
        return dx

    @staticmethod
    def backward(ctx, h):
        return _routing_backward(ctx, h, MaxPool2dGather)

    @classmethod
    def output_shape(cls, g, x, out, **params):
        return tuple(x)

    @classmethod
    def output_dtype(cls, g, x, out, **params):
        return np.dtype(g)


class MaxPool2dGather(Function):
    """The transpose of :class:`MaxPool2dGrad`: ``h`` (``x``'s shape) read at each window's
    first maximum; ``out``'s shape. Backward: :class:`MaxPool2dGrad` for ``h``."""

    oper = "max_pool2d_gather"
    batch = classmethod(_pool_batch)
    nondiff_argnums = (1, 2)  # piecewise constant in x and out (they only locate the maxima)

    @staticmethod
    def forward(ctx, h, x, out, kernel=(1, 1), stride=(1, 1), padding=(0, 0, 0, 0),
                dilation=None):
        xp = ctx.backend
        _, hits = _routing_setup(ctx, x, out, kernel, stride, padding, dilation)
        views = _offset_views(_pad(xp, h, padding), kernel, stride, out.shape[2:], dilation)
        res = xp.zeros(out.shape, dtype=h.dtype)
        for k, hit in hits:
            res += xp.where(hit, views[k], 0)
        return res

    @staticmethod
    def backward(ctx, ct):
        return _routing_backward(ctx, ct, MaxPool2dGrad)

    @classmethod
    def output_shape(cls, h, x, out, **params):
        return tuple(out)

    @classmethod
    def output_dtype(cls, h, x, out, **params):
        return np.dtype(h)


def _flat_rows(idx: Tensor, batched: bool, size: int, rows: int) -> Tensor:
    """Row indices into the ``(B * rows, ...)`` flat table of ``B`` stacked ``(rows, ...)``
    tables: example ``b``'s index ``i`` becomes ``b * rows + i`` (a negative ``i`` counted from
    the end of its own table, as NumPy), shape ``(B,) + one example's index shape``. An index
    outside ``[-rows, rows)`` becomes ``B * rows``, out of range of the flat table too, so the
    lookup raises IndexError as the unbatched one does instead of reading another example's
    row."""
    nd = idx.ndim - batched
    offsets = _const(np.arange(size, dtype=np.int64).reshape((size,) + (1,) * nd) * rows, idx)
    idx = ns.where(idx < 0, idx + rows, idx)
    bad = (idx < 0) | (idx >= rows)
    return ns.where(bad, size * rows, idx + offsets)


class _TakeRows(Function):
    """``weight[idx]`` for an integer index Tensor. Backward: :class:`_ScatterRows`."""

    oper = "take_rows"

    @staticmethod
    def forward(ctx, weight, idx):
        ctx.save_for_backward(idx)
        ctx.rows = weight.shape[0]
        return weight[idx]

    @staticmethod
    def backward(ctx, g):
        (idx,) = ctx.saved_tensors
        return _ScatterRows.apply(g, idx, rows=ctx.rows), None

    @staticmethod
    def batch(args, batched, size):
        weight, idx = args
        idx = tensor_arg(idx)
        if not batched[0]:  # a shared table: the batched indices look up in it directly
            return _TakeRows.apply(weight, idx)
        rows = weight.shape[1]  # per-example tables: one flat table of B * rows rows
        flat = ns.reshape(weight, (size * rows,) + weight.shape[2:])
        return _TakeRows.apply(flat, _flat_rows(idx, batched[1], size, rows))

    @classmethod
    def output_shape(cls, weight, idx):
        return tuple(idx) + tuple(weight[1:])

    @classmethod
    def output_dtype(cls, weight, idx):
        return np.dtype(weight)


class _ScatterRows(Function):
    """Zeros of shape ``(rows, dim)`` with the rows of ``g`` summed in at ``idx`` (the
    transpose of :class:`_TakeRows`). Backward: :class:`_TakeRows`."""

    oper = "scatter_rows"

    @staticmethod
    def forward(ctx, g, idx, rows=0):
        xp = ctx.backend
        ctx.save_for_backward(idx)
        out = xp.zeros((rows,) + g.shape[idx.ndim :], dtype=g.dtype)
        flat = g.reshape((idx.size,) + g.shape[idx.ndim :])
        if xp is np:
            np.add.at(out, idx.reshape(-1), flat)
        else:  # pragma: no cover - GPU
            xp.add.at(out, idx.reshape(-1), flat)
        return out

    @staticmethod
    def backward(ctx, ct):
        (idx,) = ctx.saved_tensors
        return _TakeRows.apply(ct, idx), None

    @staticmethod
    def batch(args, batched, size, rows=0):
        # one scatter into a flat table of B * rows rows, each example's rows one block
        g, idx = args
        idx = tensor_arg(idx)
        flat = _flat_rows(idx, batched[1], size, rows)
        out = _ScatterRows.apply(_with_batch(g, batched[0], size), flat, rows=size * rows)
        return ns.reshape(out, (size, rows) + out.shape[1:])

    @classmethod
    def output_shape(cls, g, idx, rows=0):
        return (rows,) + tuple(g[len(idx) :])

    @classmethod
    def output_dtype(cls, g, idx, **params):
        return np.dtype(g)


class ScaledDotProductAttention(Function):
    """Fused ``(softmax(q k^T * scale + bias) * drop) @ v``.

    Positional inputs ``q (..., Lq, E)``, ``k (..., Lk, E)``, ``v (..., Lk, Ev)``, then an
    optional additive ``bias`` and an optional scaled dropout multiplier ``drop`` (both
    broadcastable to ``(..., Lq, Lk)``, or None). Forward keeps no probabilities; backward
    recomputes them with tapegrad ops (as fused attention kernels do) and applies
    ``dv = P~^T g``, ``dP = (g v^T) * drop``, ``dS = P (dP - sum(dP P))``,
    ``dq = dS k * scale``, ``dk = dS^T q * scale``.
    """

    oper = "scaled_dot_product_attention"
    traits = Traits(cost="dense")

    @staticmethod
    def forward(ctx, q, k, v, bias, drop, scale=1.0):
        xp = ctx.backend
        s = (q @ xp.swapaxes(k, -1, -2)) * q.dtype.type(scale)
        if bias is not None:
            s = s + bias
        e = xp.exp(s - s.max(axis=-1, keepdims=True))
        p = e / e.sum(axis=-1, keepdims=True)
        if drop is not None:
            p = p * drop
        ctx.scale = scale
        ctx.has_bias = bias is not None
        ctx.has_drop = drop is not None
        ctx.save_for_backward(*[a for a in (q, k, v, bias, drop) if a is not None])
        return p @ v

    @staticmethod
    def backward(ctx, g):
        saved = list(ctx.saved_tensors)
        q, k, v = saved[:3]
        rest = saved[3:]
        bias = rest.pop(0) if ctx.has_bias else None
        drop = rest.pop(0) if ctx.has_drop else None
        nq, nk, nv, nb, nd = ctx.needs_input_grad
        scale = ctx.scale
        s = ns.matmul(q, _swapaxes(k, -1, -2)) * scale
        if bias is not None:
            s = s + bias
        p = Softmax.apply(s, axis=-1)
        pd = p * drop if drop is not None else p
        gv = ns.matmul(_swapaxes(pd, -1, -2), g) if nv else None
        gq = gk = gb = gd = None
        if nq or nk or nb or nd:
            gpd = ns.matmul(g, _swapaxes(v, -1, -2))
            if nd:
                gd = gpd * p
            gp = gpd * drop if drop is not None else gpd
            gs = p * (gp - ns.sum(gp * p, axis=-1, keepdims=True))
            if nq:
                gq = ns.matmul(gs, k) * scale
            if nk:
                gk = ns.matmul(_swapaxes(gs, -1, -2), q) * scale
            if nb:
                gb = gs
        return gq, gk, gv, gb, gd

    @staticmethod
    def batch(args, batched, size, scale=1.0):
        # the batch becomes one more leading (stack) dimension: every batched operand gets it
        # in front of its examples' broadcast dimensions, which the unbatched ones broadcast
        # against from the right, so the whole batch is one call
        nd = max(per_example_ndim(a, b) for a, b in zip(args, batched) if a is not None)
        return ScaledDotProductAttention.apply(*align(args, batched, nd), scale=scale)

    @classmethod
    def output_shape(cls, q, k, v, bias, drop, scale=1.0):
        batch = np.broadcast_shapes(tuple(q[:-2]), tuple(k[:-2]), tuple(v[:-2]))
        return tuple(batch) + (q[-2], v[-1])

    @classmethod
    def output_dtype(cls, q, k, v, bias, drop, **params):
        return np.dtype(q)
