"""Embedding: ``embedding``, the row gather of a lookup table."""

from __future__ import annotations

from tapegrad import numpy as tnp
from tapegrad.core.tensor import Tensor, all_values
from tapegrad.nn._functional.losses import _int_targets
from tapegrad.ops.nn import (  # the primitives, defined with their rules in tapegrad.ops
    _TakeRows,
)

__all__ = [
    "embedding",
]


def embedding(input, weight) -> Tensor:
    """Look up rows of ``weight``: ``weight[input]``.

    Args:
        input: Integer Tensor (or array/list) of indices in ``[0, num_embeddings)``, any shape.
        weight: Tensor of shape ``(num_embeddings, embedding_dim)``.

    Returns:
        Tensor of shape ``input.shape + (embedding_dim,)``; the gradient of ``weight``
        accumulates over repeated indices. The indices are an input of the recorded op, so a
        replayed tape looks up new indices.

    Raises:
        TypeError: for non-integer indices. ValueError: for indices out of range.
    """
    weight = tnp.asarray(weight)
    idx = _int_targets(input, "embedding", weight.device)
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must have shape (num, dim), got {weight.shape}")
    arr = all_values(idx)
    if arr.size and (arr.min() < 0 or arr.max() >= weight.shape[0]):
        raise ValueError(
            f"embedding: indices must lie in [0, {weight.shape[0]}), got values in "
            f"[{arr.min()}, {arr.max()}]"
        )
    return _TakeRows.apply(weight, idx)
