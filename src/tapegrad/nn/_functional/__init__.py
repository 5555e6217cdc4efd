"""The implementation of :mod:`tapegrad.nn.functional` (which re-exports it with the functions
of its sibling modules), one module per concept: activations, losses, linear, convolution,
pooling, dropout, normalization, embedding, attention, recurrent cells, windows."""

import tapegrad.nn._functional.activations as activations
import tapegrad.nn._functional.affine as affine
import tapegrad.nn._functional.attention as attention
import tapegrad.nn._functional.conv as conv
import tapegrad.nn._functional.embeddings as embeddings
import tapegrad.nn._functional.losses as losses
import tapegrad.nn._functional.noise as noise
import tapegrad.nn._functional.normalization as normalization
import tapegrad.nn._functional.pooling as pooling
import tapegrad.nn._functional.recurrent as recurrent
import tapegrad.nn._functional.windows as windows
from tapegrad.nn._functional._common import (  # noqa: F401
    _REDUCTIONS,
    _check_reduction,
    _floating,
    _like,
    _real_arg,
)
from tapegrad.nn._functional.activations import *  # noqa: F401,F403
from tapegrad.nn._functional.affine import *  # noqa: F401,F403
from tapegrad.nn._functional.attention import *  # noqa: F401,F403
from tapegrad.nn._functional.conv import *  # noqa: F401,F403
from tapegrad.nn._functional.conv import (  # noqa: F401
    _check_groups,
    _check_nonempty,
    _image,
    _pair,
    _resolve_padding,
    _single,
)
from tapegrad.nn._functional.embeddings import *  # noqa: F401,F403
from tapegrad.nn._functional.losses import *  # noqa: F401,F403
from tapegrad.nn._functional.losses import (  # noqa: F401
    _broadcasts_to,
    _check_loss_shapes,
    _const,
    _pair_loss_inputs,
    _reduce,
)
from tapegrad.nn._functional.noise import *  # noqa: F401,F403
from tapegrad.nn._functional.normalization import *  # noqa: F401,F403
from tapegrad.nn._functional.pooling import *  # noqa: F401,F403
from tapegrad.nn._functional.pooling import _adaptive_matrix, _pool_params  # noqa: F401
from tapegrad.nn._functional.recurrent import *  # noqa: F401,F403
from tapegrad.nn._functional.recurrent import _GATES, _affine, _gru_step, _lstm_step, _rnn_step  # noqa: F401
from tapegrad.nn._functional.windows import *  # noqa: F401,F403
from tapegrad.ops.nn import (  # the primitives, defined with their rules in tapegrad.ops
    Conv2dInputGrad,
    Conv2dWeightGrad,
    CrossEntropyGrad,
    Gelu,
    MaxPool2d,
    MaxPool2dGather,
    MaxPool2dGrad,
)

# the fused primitives without a wrapper here, defined with their rules in tapegrad.ops.nn
__all__ = [
    "Gelu",
    "CrossEntropyGrad",
    "Conv2dInputGrad",
    "Conv2dWeightGrad",
    "MaxPool2d",
    "MaxPool2dGrad",
    "MaxPool2dGather",
]
__all__ += activations.__all__
__all__ += affine.__all__
__all__ += attention.__all__
__all__ += conv.__all__
__all__ += embeddings.__all__
__all__ += losses.__all__
__all__ += noise.__all__
__all__ += normalization.__all__
__all__ += pooling.__all__
__all__ += recurrent.__all__
__all__ += windows.__all__
