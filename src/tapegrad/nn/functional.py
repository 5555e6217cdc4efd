"""Pure neural-network functions: activations, losses, linear/convolution/pooling layers,
normalization, dropout, embedding, recurrent cells and attention.

Every function here is pure: parameters come in as Tensors (or pytrees of them), randomness as
an explicit ``key`` from :mod:`tapegrad.random`, running statistics as explicit inputs and
outputs. Signatures follow ``torch.nn.functional``, with NumPy's ``axis`` beside PyTorch's ``dim``.
Every function is differentiable to any order under :func:`tapegrad.grad`.

A few primitives are fused :class:`~tapegrad.Function` subclasses, defined with their rules in
:mod:`tapegrad.ops.nn` and re-exported here, because fusing is the right design (numerically
stable, or far cheaper than a composition): ``LogSoftmax``,
``Softmax``, the losses (``CrossEntropy``, ``BinaryCrossEntropy``,
``BinaryCrossEntropyWithLogits``, ``HingeLoss``, ``MeanSquaredLoss``, each also usable directly
as ``Loss.apply(y_pred, y_true)``) and ``CrossEntropyGrad`` (their backward in one op),
``Linear`` (one BLAS call, bias added in place), ``Conv2d`` (im2col on a strided view, bias
added in place, with its two transposes), ``MaxPool2d`` (maxima of strided views, with its
routing ``MaxPool2dGrad`` and gather ``MaxPool2dGather``), embedding row gathers and
``ScaledDotProductAttention`` (its backward recomputes the probabilities). Their ``backward``
rules are written with tapegrad ops, so higher derivatives work. The elementwise activations
come from :mod:`tapegrad.ops` (``Relu``, ``Sigmoid``, ``Tanh``, ``Softplus``, ``Erf`` are
re-exported here as Function classes; ``Gelu`` defaults to the tanh approximation).

Layout conventions: images are ``(N, C, H, W)``; a linear weight is ``(in_features,
out_features)`` (``y = x @ W + b``, Flax's layout, *not* PyTorch's transposed
one); a convolution weight is ``(C_out, C_in / groups, kH, kW)`` (PyTorch's layout).
"""

from tapegrad.nn import _functional
from tapegrad.nn._functional import *  # noqa: F401,F403
from tapegrad.nn._functional import (  # noqa: F401  (helpers the layers and tests read here)
    _GATES,
    _REDUCTIONS,
    _affine,
    _const,
    _floating,
    _gru_step,
    _like,
    _lstm_step,
    _pair,
    _reduce,
    _resolve_padding,
    _rnn_step,
    _single,
)

__all__ = []
__all__ += _functional.__all__
__all__ += ["conv_transpose2d", "max_pool2d", "avg_pool2d"]

# -- PyTorch's other losses (defined in tapegrad.nn._losses) ---------------------------------
from tapegrad.nn._losses import (  # noqa: E402
    CTCLoss,
    cosine_embedding_loss,
    ctc_loss,
    gaussian_nll_loss,
    hinge_embedding_loss,
    margin_ranking_loss,
    multi_margin_loss,
    multilabel_margin_loss,
    multilabel_soft_margin_loss,
    poisson_nll_loss,
    soft_margin_loss,
    triplet_margin_loss,
)

__all__ += [
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

# -- convolution, pooling, padding and resampling in 1, 2 and 3 spatial dims ------------------
from tapegrad.nn._conv_pool import (  # noqa: E402
    adaptive_avg_pool1d,
    adaptive_avg_pool3d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    adaptive_max_pool3d,
    affine_grid,
    avg_pool1d,
    avg_pool2d,
    avg_pool3d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
    fold,
    grid_sample,
    interpolate,
    max_pool1d,
    max_pool2d,
    max_pool3d,
    pad,
    pixel_shuffle,
    pixel_unshuffle,
    unfold,
)

__all__ += [
    "conv3d",
    "conv_transpose1d",
    "conv_transpose3d",
    "max_pool1d",
    "max_pool3d",
    "avg_pool1d",
    "avg_pool3d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool3d",
    "pad",
    "interpolate",
    "grid_sample",
    "affine_grid",
    "unfold",
    "fold",
    "pixel_shuffle",
    "pixel_unshuffle",
]


# -- more of torch.nn.functional (defined in their own modules, exported here) ---------------
from tapegrad.nn._activations import (  # noqa: E402
    celu,
    elu,
    glu,
    hardsigmoid,
    hardswish,
    hardtanh,
    logsigmoid,
    mish,
    prelu,
    relu6,
    selu,
    softsign,
)
from tapegrad.nn._extra_functional import (  # noqa: E402
    alpha_dropout,
    bilinear,
    cosine_similarity,
    dropout1d,
    dropout2d,
    dropout3d,
    embedding_bag,
    gumbel_softmax,
    instance_norm,
    normalize,
    one_hot,
    pairwise_distance,
)

__all__ += [
    "elu",
    "selu",
    "celu",
    "hardtanh",
    "relu6",
    "hardsigmoid",
    "hardswish",
    "softsign",
    "mish",
    "glu",
    "logsigmoid",
    "prelu",
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
