"""``tapegrad.nn``: pure neural-network functions and thin stateful layers over them.

- :mod:`tapegrad.nn.functional`: activations, losses, linear/conv/pool, normalization,
  dropout, embedding, recurrent cells and attention as pure functions
  (``import tapegrad.nn.functional as F``).
- :mod:`tapegrad.nn.init`: initializers, each taking a key; ``init.mlp`` builds a params pytree.
- :class:`Module`, :class:`ModuleList`, :class:`Sequential`, the layers
  (:class:`Linear`, :class:`Conv2d`, ...) under PyTorch's names (:class:`ReLU`, :class:`GRU`,
  :class:`GroupNorm`, ...), with :func:`functional_call` to run a Module as a pure function
  of its parameters. A Module is also a pytree: transforms take models as arguments
  (``tg.grad(loss)(model, x)`` returns a model-shaped gradient), and :func:`key_stream` gives
  such a model its random keys.
- :func:`extract_windows` (sliding windows of images) and :class:`AbstractLLMForwardFn` (the
  forward-function interface of language-model training and sampling loops).
"""

import tapegrad.nn._activation_layers as _activation_layers
import tapegrad.nn._conv_pool_layers as _conv_pool_layers
import tapegrad.nn._extra_layers as _extra_layers
import tapegrad.nn._loss_modules as _loss_modules
import tapegrad.nn._transformer as _transformer
from tapegrad.nn import functional, init, layers
from tapegrad.nn._activation_layers import *  # noqa: F401,F403
from tapegrad.nn._conv_pool_layers import *  # noqa: F401,F403
from tapegrad.nn._extra_layers import *  # noqa: F401,F403
from tapegrad.nn._loss_modules import *  # noqa: F401,F403
from tapegrad.nn._transformer import *  # noqa: F401,F403
from tapegrad.nn.functional import extract_windows
from tapegrad.nn.layers import *  # noqa: F401,F403
from tapegrad.nn.lm import AbstractLLMForwardFn
from tapegrad.nn.module import Module, ModuleList, Sequential, functional_call, key_stream

__all__ = []
# the layers, under this library's and PyTorch's names: linear, convolution, pooling, padding,
# resampling, normalization, dropout, embedding, recurrent, attention and activations
__all__ += layers.__all__
__all__ += _conv_pool_layers.__all__
__all__ += _activation_layers.__all__
__all__ += _extra_layers.__all__
# the Module machinery, the functional forms and the initializers
__all__ += [
    "functional",
    "init",
    "functional_call",
    "key_stream",
    "extract_windows",
    "AbstractLLMForwardFn",
    "Module",
    "ModuleList",
    "Sequential",
]
# the Transformer family and PyTorch's loss Modules
__all__ += _transformer.__all__
__all__ += _loss_modules.__all__
