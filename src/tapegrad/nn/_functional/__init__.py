"""The implementation of :mod:`tapegrad.nn.functional` (which re-exports it with the functions
of its sibling modules), one module per concept: activations, losses, linear, convolution,
pooling, dropout, normalization, embedding, attention, recurrent cells, windows."""

from tapegrad.nn._functional._common import (  # noqa: F401  (helpers the sibling modules read)
    _REDUCTIONS,
    _check_reduction,
    _floating,
    _like,
    _real_arg,
)
from tapegrad.nn._functional.activations import (
    Erf,
    LogSoftmax,
    Relu,
    Sigmoid,
    Softmax,
    Softplus,
    Tanh,
    erf,
    gelu,
    leaky_relu,
    log_softmax,
    relu,
    sigmoid,
    silu,
    softmax,
    softplus,
    tanh,
)
from tapegrad.nn._functional.affine import (
    Linear,
    linear,
    mlp,
)
from tapegrad.nn._functional.attention import (
    ScaledDotProductAttention,
    multi_head_attention,
    scaled_dot_product_attention,
)
from tapegrad.nn._functional.conv import (  # noqa: F401
    Conv2d,
    _check_groups,
    _image,
    _pair,
    _resolve_padding,
    _single,
    conv1d,
    conv2d,
)
from tapegrad.nn._functional.embeddings import (
    embedding,
)
from tapegrad.nn._functional.losses import (  # noqa: F401
    BinaryCrossEntropy,
    BinaryCrossEntropyWithLogits,
    CrossEntropy,
    HingeLoss,
    MeanSquaredLoss,
    _check_loss_shapes,
    _const,
    _reduce,
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    hinge_loss,
    huber_loss,
    kl_div,
    l1_loss,
    mean_squared_loss,
    mse_loss,
    nll_loss,
    smooth_l1_loss,
)
from tapegrad.nn._functional.noise import (
    dropout,
)
from tapegrad.nn._functional.normalization import (
    batch_norm,
    group_norm,
    layer_norm,
    rms_norm,
)
from tapegrad.nn._functional.pooling import (  # noqa: F401
    _adaptive_matrix,
    _pool_params,
    adaptive_avg_pool2d,
)
from tapegrad.nn._functional.recurrent import (  # noqa: F401
    _GATES,
    _affine,
    _gru_step,
    _lstm_step,
    _rnn_step,
    gru_cell,
    lstm_cell,
    rnn_cell,
)
from tapegrad.nn._functional.windows import (
    extract_windows,
)
from tapegrad.ops.nn import (  # the primitives, defined with their rules in tapegrad.ops
    Conv2dInputGrad,
    Conv2dWeightGrad,
    CrossEntropyGrad,
    Gelu,
    MaxPool2d,
    MaxPool2dGather,
    MaxPool2dGrad,
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
