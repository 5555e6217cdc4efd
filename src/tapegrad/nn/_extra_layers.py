"""PyTorch's further layers, with PyTorch's names and arguments: ``InstanceNorm1d``,
``InstanceNorm2d``, ``Bilinear``, ``Unflatten``, ``Dropout1d``/``2d``/``3d``,
``AlphaDropout``, ``EmbeddingBag``, ``CosineSimilarity`` and ``PairwiseDistance``: thin
:class:`~tapegrad.nn.Module` wrappers over the pure functions of
:mod:`tapegrad.nn.functional`.
"""

from __future__ import annotations

import numpy as np

from tapegrad import numpy as tnp
from tapegrad.core._keywords import strict_all
from tapegrad.core.tensor import Tensor
from tapegrad.nn import _extra_functional as XF
from tapegrad.nn import init
from tapegrad.nn.layers import (
    _bool,
    _keys,
    _no_inplace,
    _param_dtype,
    _place,
    _positive,
    _real,
)
from tapegrad.nn.module import Module

__all__ = [
    "InstanceNorm1d",
    "InstanceNorm2d",
    "Bilinear",
    "Unflatten",
    "Dropout1d",
    "Dropout2d",
    "Dropout3d",
    "AlphaDropout",
    "EmbeddingBag",
    "CosineSimilarity",
    "PairwiseDistance",
]


def _int(who: str, name: str, value) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{who}: {name} must be an int, got {value!r}")
    return int(value)


# -- instance normalization -------------------------------------------------------------------
class _InstanceNorm(Module):
    _spatial = 1

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False, *, bias: bool = True,
                 device=None, dtype=np.float32):
        super().__init__()
        who = type(self).__name__
        _positive(who, num_features=num_features)
        self.num_features = int(num_features)
        self.eps = _real(who, "eps", eps, 0.0)
        self.momentum = None if momentum is None else _real(who, "momentum", momentum, 0.0,
                                                            1.0)
        self.affine = _bool(who, "affine", affine)
        self.track_running_stats = _bool(who, "track_running_stats", track_running_stats)
        with_bias = _bool(who, "bias", bias)
        dt = _param_dtype(who, dtype)
        c = (self.num_features,)
        self.register_parameter("weight", init.ones(None, c, dt) if self.affine else None)
        self.register_parameter(
            "bias", init.zeros(None, c, dt) if self.affine and with_bias else None
        )
        if self.track_running_stats:
            self.register_state("running_mean", init.zeros(None, c, dt))
            self.register_state("running_var", init.ones(None, c, dt))
        _place(self, device)

    def forward(self, input):
        """Normalize each channel of each sample over its spatial positions; see the class."""
        who = type(self).__name__
        x = tnp.asarray(input)
        batched = 2 + self._spatial
        if x.ndim not in (batched, batched - 1):
            raise ValueError(
                f"{who}: expected a {batched - 1}-D (unbatched) or {batched}-D input, got shape "
                f"{x.shape}"
            )
        unbatched = x.ndim == batched - 1
        if unbatched:
            x = tnp.expand_dims(x, 0)
        if x.shape[1] != self.num_features:
            raise ValueError(
                f"{who}: expected {self.num_features} channels (num_features) on axis "
                f"{0 if unbatched else 1}, got input of shape {tnp.asarray(input).shape}"
            )
        track = self.track_running_stats
        use_input_stats = self.training or not track
        momentum = 0.0 if self.momentum is None else self.momentum  # PyTorch's convention
        out = XF.instance_norm(
            x,
            self.running_mean if track else None,
            self.running_var if track else None,
            self.weight,
            self.bias,
            use_input_stats,
            momentum,
            self.eps,
        )
        if track:
            y, mean, var = out
            if use_input_stats:
                self.update_state("running_mean", mean)
                self.update_state("running_var", var)
        else:
            y = out
        return y[0] if unbatched else y

    def extra_repr(self) -> str:
        """PyTorch's configuration string."""
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


_INSTANCE_DOC = """Instance normalization over ``{shape}`` inputs (PyTorch's ``nn.{name}``), over
    :func:`~tapegrad.nn.functional.instance_norm`: each sample's each channel normalized over
    its spatial positions.

    Training mode (or ``track_running_stats=False``) normalizes with each instance's
    statistics; with ``track_running_stats`` the running statistics are then replaced by
    ``(1 - momentum) * running + momentum * batch`` (the mean over the samples; the variance
    unbiased), and evaluation mode normalizes with them. ``momentum=None`` keeps them fixed
    (PyTorch passes 0 then).

    Args:
        num_features: Number of channels ``C``.
        eps: Added to the variance.
        momentum: Weight of the new statistics in the running update (``None``: 0).
        affine: Learn a per-channel ``weight`` and ``bias`` (PyTorch's default: no).
        track_running_stats: Keep running statistics (PyTorch's default: no).
        bias: With ``affine``, whether to learn the ``bias`` too.
        device, dtype: Parameter and state device and floating dtype (``None``: float32).

    Parameters: weight (ones), bias (zeros), ``(C,)``, with ``affine``.
    States: running_mean (zeros), running_var (ones), ``(C,)``, with ``track_running_stats``
    (PyTorch's unused ``num_batches_tracked`` is not kept).

    Raises:
        TypeError: for bad argument kinds. ValueError: for ``num_features < 1``, a
            ``momentum`` outside ``[0, 1]``, a negative ``eps``; on call, for another number
            of dims or of channels (PyTorch only warns about the channels when ``affine`` is
            off).
"""


class InstanceNorm1d(_InstanceNorm):
    __doc__ = _INSTANCE_DOC.format(shape="(N, C, L)`` or ``(C, L)", name="InstanceNorm1d")
    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    __doc__ = _INSTANCE_DOC.format(shape="(N, C, H, W)`` or ``(C, H, W)", name="InstanceNorm2d")
    _spatial = 2


# -- bilinear, unflatten ------------------------------------------------------------------------
class Bilinear(Module):
    """Bilinear layer ``y = x1^T A x2 + b`` (PyTorch's ``nn.Bilinear``) over
    :func:`~tapegrad.nn.functional.bilinear`.

    Args:
        in1_features, in2_features: Sizes of the two inputs.
        out_features: Output size.
        bias: Whether to add a bias.
        key, device, dtype: Init key, parameter device and floating dtype.

    Parameters:
        weight ``(out_features, in1_features, in2_features)`` (PyTorch's layout) and bias
        ``(out_features,)``, both ``U(-1/sqrt(in1_features), 1/sqrt(in1_features))`` as in
        PyTorch.

    Raises:
        TypeError: for bad argument kinds. ValueError: for non-positive sizes.

    Example:
        >>> import tapegrad as tg
        >>> layer = tg.nn.Bilinear(3, 4, 2, key=tg.random.key(0))
        >>> x1 = tg.random.normal(tg.random.key(1), (5, 3))
        >>> x2 = tg.random.normal(tg.random.key(2), (5, 4))
        >>> layer(x1, x2).shape
        (5, 2)
    """

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True, *, key=None, device=None, dtype=np.float32):
        super().__init__()
        who = "Bilinear"
        _positive(who, in1_features=in1_features, in2_features=in2_features,
                  out_features=out_features)
        with_bias = _bool(who, "bias", bias)
        dt = _param_dtype(who, dtype)
        (kw, kb), own = _keys(key, 2)
        self._seed(own)
        self.in1_features, self.in2_features = int(in1_features), int(in2_features)
        self.out_features = int(out_features)
        bound = 1.0 / np.sqrt(in1_features)
        self.weight = init.uniform(kw, (out_features, in1_features, in2_features), dt,
                                   -bound, bound)
        self.register_parameter(
            "bias", init.uniform(kb, (out_features,), dt, -bound, bound) if with_bias else None
        )
        _place(self, device)

    def forward(self, input1, input2):
        """``(..., in1_features)``, ``(..., in2_features)`` -> ``(..., out_features)``."""
        return XF.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        """PyTorch's configuration string."""
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class Unflatten(Module):
    """Split axis ``dim`` into ``unflattened_size`` (PyTorch's ``nn.Unflatten``), the inverse
    of :class:`~tapegrad.nn.Flatten`.

    Args:
        dim: The axis to split (negative counts from the end).
        unflattened_size: Tuple or list of ints whose product is the size of ``dim``; one
            entry may be ``-1`` (inferred).

    Raises:
        TypeError: for a non-int ``dim`` or an ``unflattened_size`` that is not a tuple or
            list of ints. ValueError (on call): for a size that does not fit.

    Example:
        >>> import tapegrad as tg
        >>> tg.nn.Unflatten(1, (2, 3))(tg.Tensor([[0.0] * 6])).shape
        (1, 2, 3)
    """

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        who = "Unflatten"
        self.dim = _int(who, "dim", dim)
        if not isinstance(unflattened_size, (tuple, list)) or not all(
            isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_))
            for s in unflattened_size
        ):
            raise TypeError(
                f"{who}: unflattened_size must be a tuple or list of ints, got "
                f"{unflattened_size!r}"
            )
        if any(s < -1 for s in unflattened_size) or sum(s == -1 for s in unflattened_size) > 1:
            raise ValueError(
                f"{who}: unflattened_size entries must be >= 0, with at most one -1, got "
                f"{unflattened_size!r}"
            )
        self.unflattened_size = unflattened_size

    def forward(self, input):
        """``(..., d, ...)`` -> ``(..., *unflattened_size, ...)`` at ``dim``."""
        who = "Unflatten"
        x = tnp.asarray(input)
        if not -x.ndim <= self.dim < max(x.ndim, 1):
            raise ValueError(f"{who}: dim={self.dim} is out of range for input of shape "
                             f"{x.shape}")
        d = self.dim % x.ndim
        sizes = tuple(int(s) for s in self.unflattened_size)
        n = x.shape[d]
        known = int(np.prod([s for s in sizes if s != -1]))
        if -1 in sizes:
            if known == 0 or n % known:
                raise ValueError(f"{who}: cannot split size {n} of axis {d} into {sizes}")
            sizes = tuple(n // known if s == -1 else s for s in sizes)
        elif known != n:
            raise ValueError(f"{who}: unflattened_size {sizes} (product {known}) does not "
                             f"match size {n} of axis {d} of input {x.shape}")
        return tnp.reshape(x, x.shape[:d] + sizes + x.shape[d + 1:])

    def extra_repr(self) -> str:
        """PyTorch's configuration string."""
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


# -- dropout variants -------------------------------------------------------------------------
class _DropoutBase(Module):
    _fn = staticmethod(XF.dropout1d)

    def __init__(self, p: float = 0.5, inplace: bool = False, *, key=None):
        super().__init__()
        who = type(self).__name__
        self.p = _real(who, "p", p, 0.0, 1.0)
        self.inplace = _no_inplace(who, inplace)
        if key is not None:
            self._seed(key)

    def forward(self, input, key=None):
        """Apply dropout (training mode, ``p > 0``) or return ``input``; ``key`` defaults to
        :meth:`Module.next_key`."""
        if not self.training or self.p == 0.0:
            return self._check(input)
        return type(self)._fn(input, self.p, training=True,
                              key=key if key is not None else self.next_key())

    def _check(self, input):
        return type(self)._fn(input, self.p, training=False)

    def extra_repr(self) -> str:
        """PyTorch's configuration string."""
        return f"p={self.p}, inplace={self.inplace}"


_DROPOUT_DOC = """Channel dropout (PyTorch's ``nn.{name}``) over
    :func:`~tapegrad.nn.functional.{fn}`: in training mode each channel of ``{shape}`` inputs
    is zeroed as a whole with probability ``p`` and the others scaled by ``1 / (1 - p)``;
    the identity in evaluation mode.

    ``forward(input, key=None)``: the key defaults to :meth:`Module.next_key` (split off
    ``functional_call``'s key, or the layer's own key in stateful use).

    Args:
        p: Drop probability in ``[0, 1]``.
        inplace: PyTorch's option; only False.
        key: The layer's own key (reproducible masks); fresh entropy without one.

    Raises:
        TypeError: for an unknown keyword. ValueError: for ``p`` outside ``[0, 1]`` or
            ``inplace=True``; on call, for another number of dims.
"""


class Dropout1d(_DropoutBase):
    __doc__ = _DROPOUT_DOC.format(name="Dropout1d", fn="dropout1d", shape="(N, C, L)`` or ``(C, L)")
    _fn = staticmethod(XF.dropout1d)


class Dropout2d(_DropoutBase):
    __doc__ = _DROPOUT_DOC.format(name="Dropout2d", fn="dropout2d",
                                  shape="(N, C, H, W)`` or ``(C, H, W)")
    _fn = staticmethod(XF.dropout2d)


class Dropout3d(_DropoutBase):
    __doc__ = _DROPOUT_DOC.format(name="Dropout3d", fn="dropout3d",
                                  shape="(N, C, D, H, W)`` or ``(C, D, H, W)")
    _fn = staticmethod(XF.dropout3d)


class AlphaDropout(_DropoutBase):
    """Alpha dropout (PyTorch's ``nn.AlphaDropout``) over
    :func:`~tapegrad.nn.functional.alpha_dropout`, for networks of ``SELU`` units: in
    training mode dropped units are set to SELU's negative saturation and the result is
    affinely rescaled to keep zero mean and unit variance; the identity in evaluation mode.

    ``forward(input, key=None)``: the key defaults to :meth:`Module.next_key`.

    Args:
        p: Drop probability in ``[0, 1]``.
        inplace: PyTorch's option; only False.
        key: The layer's own key (reproducible masks).

    Raises:
        ValueError: for ``p`` outside ``[0, 1]`` or ``inplace=True``.
    """

    _fn = staticmethod(XF.alpha_dropout)


# -- embedding bags ---------------------------------------------------------------------------
class EmbeddingBag(Module):
    """Sums, means or maxima of bags of embeddings (PyTorch's ``nn.EmbeddingBag``) over
    :func:`~tapegrad.nn.functional.embedding_bag`.

    ``forward(input, offsets=None, per_sample_weights=None)``: ``input`` ``(B, N)`` (each row
    a bag) or ``(n,)`` with ``offsets`` (each bag's start) -> ``(B, embedding_dim)``.

    Args:
        num_embeddings: Number of rows.
        embedding_dim: Row size.
        max_norm, norm_type, scale_grad_by_freq, sparse: PyTorch's options that rescale rows
            in place or make sparse gradients; not implemented (only their defaults).
        mode: ``"sum"``, ``"mean"`` (default) or ``"max"``.
        include_last_offset: ``offsets`` also holds the end of the last bag.
        padding_idx: A row (negative counts from the end) initialized to zeros and left out
            of every bag.
        key, device, dtype: Init key, parameter device and floating dtype.

    Parameters: weight ``(num_embeddings, embedding_dim)``, standard normal (PyTorch's init),
    or the given ``_weight``.

    Raises:
        TypeError: for bad argument kinds. ValueError: for non-positive sizes, an unknown
            ``mode`` or ``padding_idx`` out of range. NotImplementedError: for ``max_norm``,
            ``scale_grad_by_freq=True`` or ``sparse=True``.

    Example:
        >>> import numpy as np, tapegrad as tg
        >>> bag = tg.nn.EmbeddingBag(10, 3, mode="sum", key=tg.random.key(0))
        >>> bag(np.array([1, 2, 4, 5, 4]), offsets=np.array([0, 2])).shape
        (2, 3)
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm=None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                 sparse: bool = False, _weight=None, include_last_offset: bool = False,
                 padding_idx=None, *, key=None, device=None, dtype=np.float32):
        super().__init__()
        who = "EmbeddingBag"
        _positive(who, num_embeddings=num_embeddings, embedding_dim=embedding_dim)
        if max_norm is not None:
            _real(who, "max_norm", max_norm)
            raise NotImplementedError(
                f"{who}: max_norm (renormalizing rows in place) is not implemented"
            )
        norm_type = _real(who, "norm_type", norm_type)
        if _bool(who, "scale_grad_by_freq", scale_grad_by_freq):
            raise NotImplementedError(f"{who}: scale_grad_by_freq=True is not implemented")
        if _bool(who, "sparse", sparse):
            raise NotImplementedError(f"{who}: sparse=True (sparse gradients) is not "
                                      "implemented; gradients are dense")
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"{who}: mode must be 'sum', 'mean' or 'max', got {mode!r}")
        self.include_last_offset = _bool(who, "include_last_offset", include_last_offset)
        n = int(num_embeddings)
        if padding_idx is not None:
            padding_idx = _int(who, "padding_idx", padding_idx)
            if not -n <= padding_idx < n:
                raise ValueError(f"{who}: padding_idx must lie in [-{n}, {n}), got "
                                 f"{padding_idx}")
            padding_idx %= n
        dt = _param_dtype(who, dtype)
        (k,), own = _keys(key, 1)
        self._seed(own)
        self.num_embeddings, self.embedding_dim = n, int(embedding_dim)
        self.max_norm, self.norm_type = None, norm_type
        self.scale_grad_by_freq, self.sparse = False, False
        self.mode, self.padding_idx = mode, padding_idx
        if _weight is None:
            weight = init.normal(k, (n, self.embedding_dim), dt)
            if padding_idx is not None:
                weight = weight.at[padding_idx].set(0.0)
        else:
            if isinstance(_weight, (str, bytes)) or not hasattr(_weight, "shape"):
                raise TypeError(f"{who}: _weight must be a Tensor or array, got "
                                f"{type(_weight).__name__}")
            arr = _weight.numpy() if isinstance(_weight, Tensor) else np.asarray(_weight)
            if arr.shape != (n, self.embedding_dim):
                raise ValueError(f"{who}: _weight must have shape {(n, self.embedding_dim)}, "
                                 f"got {arr.shape}")
            weight = Tensor(arr.astype(dt))
        self.weight = weight
        _place(self, device)

    def forward(self, input, offsets=None, per_sample_weights=None):
        """See the class: ``(B, N)`` or ``(n,)`` with ``offsets`` -> ``(B, embedding_dim)``."""
        return XF.embedding_bag(
            input, self.weight, offsets, mode=self.mode,
            per_sample_weights=per_sample_weights,
            include_last_offset=self.include_last_offset, padding_idx=self.padding_idx,
        )

    def extra_repr(self) -> str:
        """PyTorch's configuration string."""
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type!r}"
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx!r}"
        return s


# -- similarities ---------------------------------------------------------------------------------
class CosineSimilarity(Module):
    """Module form of :func:`~tapegrad.nn.functional.cosine_similarity` (PyTorch's
    ``nn.CosineSimilarity``): ``forward(x1, x2)``.

    Args:
        dim: The axis of the vectors (default 1).
        eps: Lower bound of each norm.

    Raises:
        TypeError: for a non-int ``dim`` or a non-number ``eps``. ValueError: for ``eps < 0``.
    """

    def __init__(self, dim: int = 1, eps: float = 1e-8):
        super().__init__()
        self.dim = _int("CosineSimilarity", "dim", dim)
        self.eps = _real("CosineSimilarity", "eps", eps, 0.0)

    def forward(self, x1, x2):
        """Broadcast ``x1``, ``x2`` -> their shape without ``dim``."""
        return XF.cosine_similarity(x1, x2, self.dim, self.eps)

    def extra_repr(self) -> str:
        """PyTorch's configuration string (empty)."""
        return ""


class PairwiseDistance(Module):
    """Module form of :func:`~tapegrad.nn.functional.pairwise_distance` (PyTorch's
    ``nn.PairwiseDistance``): ``forward(x1, x2)``.

    Args:
        p: The norm's order (``>= 0`` or ``inf``).
        eps: Added to the difference.
        keepdim: Keep the last axis with size 1.

    Raises:
        TypeError: for bad argument kinds. ValueError: for ``p < 0``.
    """

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
        super().__init__()
        who = "PairwiseDistance"
        self.norm = XF._order(who, p)
        self.eps = _real(who, "eps", eps)
        self.keepdim = _bool(who, "keepdim", keepdim)

    def forward(self, x1, x2):
        """``(..., D)``, ``(..., D)`` -> ``(...)`` (``(..., 1)`` with ``keepdim``)."""
        return XF.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)

    def extra_repr(self) -> str:
        """PyTorch's configuration string (empty)."""
        return ""


strict_all(globals(), __all__)
