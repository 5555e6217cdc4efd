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

from tapegrad.nn import functional, init
from tapegrad.nn.functional import extract_windows
from tapegrad.nn.layers import (
    GELU,
    GRU,
    LSTM,
    RNN,
    AdaptiveAvgPool2d,
    AvgPool2d,
    BatchNorm,
    Conv1d,
    Conv2d,
    ConvTranspose2d,
    Dropout,
    Embedding,
    Flatten,
    GroupNorm,
    GRUCell,
    Identity,
    LayerNorm,
    LeakyReLU,
    Linear,
    LogSoftmax,
    LongShortTermMemoryBlock,
    LSTMCell,
    MaxPool2d,
    MultiHeadAttention,
    RecurrentBlock,
    ReLU,
    ResidualBlock,
    RMSNorm,
    RNNCell,
    ScaledDotProductAttention,
    Sigmoid,
    SiLU,
    Softmax,
    Tanh,
)
from tapegrad.nn.lm import AbstractLLMForwardFn
from tapegrad.nn.module import Module, ModuleList, Sequential, functional_call, key_stream

__all__ = [
    "functional",
    "init",
    "functional_call",
    "key_stream",
    "extract_windows",
    "AbstractLLMForwardFn",
    "Module",
    "ModuleList",
    "Sequential",
    # layers
    "Linear",
    "Conv2d",
    "MaxPool2d",
    "ResidualBlock",
    "RecurrentBlock",
    "LongShortTermMemoryBlock",
    "Embedding",
    "LayerNorm",
    "BatchNorm",
    "Dropout",
    "ScaledDotProductAttention",
    "MultiHeadAttention",
    # PyTorch's names
    "ReLU",
    "GELU",
    "Tanh",
    "Sigmoid",
    "SiLU",
    "LeakyReLU",
    "Softmax",
    "LogSoftmax",
    "Flatten",
    "Identity",
    "Conv1d",
    "ConvTranspose2d",
    "AvgPool2d",
    "AdaptiveAvgPool2d",
    "RMSNorm",
    "GroupNorm",
    "RNNCell",
    "LSTMCell",
    "GRUCell",
    "RNN",
    "LSTM",
    "GRU",
]
