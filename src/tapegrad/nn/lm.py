"""The language-model forward-function interface, :class:`AbstractLLMForwardFn`.

A training or sampling loop for language models treats each batch as opaque and hands it,
with the model, to a forward function that knows how the architecture reads it: a
decoder-only model takes token ids, an encoder-decoder model a source and a target. The
loop stays the same for both; only the forward function changes.
"""

from __future__ import annotations

import abc
from typing import Any

__all__ = ["AbstractLLMForwardFn"]

_MODES = ("train", "sample")


class AbstractLLMForwardFn(abc.ABC):
    """Interface of a language model's forward function: :meth:`train` and :meth:`sample`.

    Subclasses implement both; an instance is called as ``forward_fn(model, batch_data,
    mode="train")`` (or ``mode="sample"``), which dispatches to the method of that name.
    ``model`` is whatever the loop holds: a :class:`~tapegrad.nn.Module`, or a pure function
    of the inputs such as ``lambda ids: nn.functional_call(module, params, ids)[0]``, so the
    same forward function serves a stateful loop and a :func:`tapegrad.grad` of a loss.

    Example:
        >>> import numpy as np, tapegrad as tg
        >>> class NextToken(tg.nn.AbstractLLMForwardFn):
        ...     def train(self, model, batch_data):
        ...         return model(batch_data)              # (B, T, vocab) logits
        ...     def sample(self, model, batch_data):
        ...         return model(batch_data)[:, -1]       # next-token logits (B, vocab)
        >>> embed = tg.nn.Embedding(10, 10, key=tg.random.key(0))
        >>> forward_fn = NextToken()
        >>> ids = np.array([[1, 2, 3]])
        >>> forward_fn(embed, ids, mode="train").shape, forward_fn(embed, ids, "sample").shape
        ((1, 3, 10), (1, 10))
    """

    @abc.abstractmethod
    def train(self, model: Any, batch_data: Any) -> Any:
        """The training-mode forward pass.

        Args:
            model: The model (a Module, or a function of the inputs).
            batch_data: One batch, in whatever form the architecture reads.

        Returns:
            Training-mode outputs, typically logits ``(B, T, vocab)``.
        """

    @abc.abstractmethod
    def sample(self, model: Any, batch_data: Any) -> Any:
        """The forward pass used to generate: outputs to sample the next tokens from.

        Args:
            model: The model (a Module, or a function of the inputs).
            batch_data: The context to continue.

        Returns:
            Sampling-mode outputs, typically the next token's logits ``(B, vocab)``.
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def __call__(self, model: Any, batch_data: Any, mode: str = "train") -> Any:
        """Dispatch to :meth:`train` or :meth:`sample`.

        Raises:
            ValueError: for a ``mode`` other than ``"train"`` or ``"sample"``.
        """
        if mode == "train":
            return self.train(model, batch_data)
        if mode == "sample":
            return self.sample(model, batch_data)
        raise ValueError(f"{type(self).__name__}: mode must be one of {_MODES}, got {mode!r}")
