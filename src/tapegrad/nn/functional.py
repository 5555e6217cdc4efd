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

from tapegrad.nn import _activations, _conv_pool, _extra_functional, _functional, _losses
from tapegrad.nn._activations import *  # noqa: F401,F403
from tapegrad.nn._conv_pool import *  # noqa: F401,F403
from tapegrad.nn._extra_functional import *  # noqa: F401,F403
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
from tapegrad.nn._losses import *  # noqa: F401,F403

__all__ = []
__all__ += _functional.__all__
# the rest of torch.nn.functional, each part defined in its own module: activations,
# normalization, dropout variants and similarities; losses; convolution, pooling, padding and
# resampling in 1, 2 and 3 spatial dims
__all__.extend(_activations.__all__)
__all__.extend(_extra_functional.__all__)
__all__.extend(_losses.__all__)
__all__.extend(_conv_pool.__all__)
