"""``tapegrad.nn``: pure neural-network functions and thin stateful layers over them.

- :mod:`tapegrad.nn.functional`: activations, losses, linear/conv/pool, normalization,
  dropout, embedding and attention as pure functions (``import tapegrad.nn.functional as F``).
- :mod:`tapegrad.nn.init`: initializers, each taking a key; ``init.mlp`` builds a params pytree.
- :class:`Module`, :class:`ModuleList` and the seeds' layers (:class:`Linear`,
  :class:`Conv2d`, ...), with :func:`functional_call` to run a Module as a pure function of
  its parameters.
"""

from tapegrad.nn import functional, init
from tapegrad.nn.layers import (
    BatchNorm,
    Conv2d,
    Dropout,
    Embedding,
    LayerNorm,
    Linear,
    LongShortTermMemoryBlock,
    MaxPool2d,
    MultiHeadAttention,
    RecurrentBlock,
    ResidualBlock,
    ScaledDotProductAttention,
)
from tapegrad.nn.module import Module, ModuleList, functional_call

__all__ = [
    "functional",
    "init",
    "functional_call",
    "Module",
    "ModuleList",
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
]
