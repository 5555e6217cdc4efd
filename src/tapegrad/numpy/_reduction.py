"""Reductions of ``tapegrad.numpy``."""

from __future__ import annotations

from tapegrad import ops as _ops
from tapegrad.numpy._core import _install_methods, _tensor
from tapegrad.tensor import Tensor

__all__ = ["sum", "mean"]


# -- reductions -----------------------------------------------------------------------------
def sum(x, axis=None, keepdims=False) -> Tensor:  # noqa: A001
    """Sum over ``axis`` (int, tuple or None for all axes); ``keepdims`` keeps size-1 axes.

    Raises:
        ValueError: if an axis is out of range, naming it and ``x.ndim``.
    """
    return _ops.Sum.apply(_tensor(x), axis=axis, keepdims=keepdims)


def mean(x, axis=None, keepdims=False) -> Tensor:
    """Arithmetic mean over ``axis`` (see :func:`sum`)."""
    return _ops.Mean.apply(_tensor(x), axis=axis, keepdims=keepdims)


_install_methods({"sum": sum, "mean": mean})
