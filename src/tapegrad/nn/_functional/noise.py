"""Dropout: ``dropout`` with an explicit key."""

from __future__ import annotations

from tapegrad import numpy as tnp
from tapegrad import random as _random
from tapegrad.core.tensor import Tensor
from tapegrad.nn._functional._common import _floating

__all__ = [
    "dropout",
]


def dropout(x, p: float = 0.5, key=None, training: bool = True, *, rate=None) -> Tensor:
    """Inverted dropout: zero each element with probability ``p``, scale the rest by
    ``1 / (1 - p)`` (Srivastava et al., 2014); the identity when not training or ``p == 0``.

    Args:
        x: Floating Tensor of any shape.
        p: Drop probability in ``[0, 1]``.
        key: A key from :mod:`tapegrad.random`; required when ``training`` and ``p > 0``.
        training: Apply dropout (True) or return ``x`` unchanged.
        rate: Flax/Optax name for ``p`` (give one of them).

    Returns:
        Tensor of ``x``'s shape and dtype.

    Raises:
        ValueError: if ``p`` is outside ``[0, 1]`` or the key is missing.
    """
    x = _floating(x, "dropout")
    if rate is not None:
        p = rate
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must lie in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if key is None:
        raise ValueError(
            "dropout: training with p > 0 needs a key (dropout(x, p, key=tg.random.split(...)[1]))"
        )
    if p == 1.0:
        return x * 0.0
    keep = _random.bernoulli(key, 1.0 - p, x.shape)
    if x.device != "cpu":
        keep = keep.to_device(x.device)
    return tnp.where(keep, x * (1.0 / (1.0 - p)), 0.0)
