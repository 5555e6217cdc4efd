"""Reordering: ``flip``, ``roll``, ``rot90``, ``fliplr``, ``flipud`` and ``rollaxis``."""

from __future__ import annotations

import operator

from tapegrad.core.tensor import Tensor
from tapegrad.numpy._core import _tensor
from tapegrad.numpy._docs import sections as _sections
from tapegrad.numpy._shape.reshaping import transpose
from tapegrad.ops._registry import ns as _ns
from tapegrad.ops.movement import check_axis as _check_axis

__all__ = [
    "flip",
    "roll",
    "rot90",
    "fliplr",
    "flipud",
    "rollaxis",
]

# -- functions of one primitive, defined with it in tapegrad.ops.movement
flip = _ns.flip
roll = _ns.roll

def rot90(m, k=1, axes=(0, 1)) -> Tensor:
    """Rotate by 90 degrees ``k`` times in the plane of ``axes``, from the first axis towards
    the second (NumPy ``rot90``). Differentiable (flips and a transpose).

    Raises:
        ValueError: if ``axes`` is not two different axes in range.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.rot90(tnp.asarray([[1, 2], [3, 4]]))
        Tensor([[2, 4],
                [1, 3]], dtype=int64)
    """
    m = _tensor(m)
    axes = tuple(axes)
    if len(axes) != 2:
        raise ValueError(f"rot90: axes must be a pair of axes, got {axes}")
    a0 = _check_axis(axes[0], m.ndim, "rot90", "axes[0]")
    a1 = _check_axis(axes[1], m.ndim, "rot90", "axes[1]")
    if a0 == a1:
        raise ValueError(f"rot90: the two axes must be different, got {axes}")
    k = operator.index(k) % 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, a0), a1)
    perm = list(range(m.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return transpose(flip(m, a1), perm)
    return flip(transpose(m, perm), a1)


_FLIP = """
    Args:
        m: Tensor with at least {need}.

    Returns:
        Tensor of ``m``'s shape and dtype; differentiable (the flipped cotangent).

    Raises:
        ValueError: for {fewer} (naming ``{op}``).
"""


@_sections(_FLIP, need="2 axes", fewer="fewer than 2 axes", op="fliplr")
def fliplr(m) -> Tensor:
    """Reverse the order along axis 1 (NumPy ``fliplr``; needs at least 2 axes)."""
    return _flip_axis(m, 1, "fliplr")


@_sections(_FLIP, need="1 axis", fewer="a 0-d input", op="flipud")
def flipud(m) -> Tensor:
    """Reverse the order along axis 0 (NumPy ``flipud``; needs at least 1 axis)."""
    return _flip_axis(m, 0, "flipud")


def _flip_axis(m, axis: int, op: str) -> Tensor:
    """``m`` reversed along ``axis``; ``ValueError`` naming ``op`` if it has no such axis."""
    m = _tensor(m)
    if m.ndim <= axis:
        need = "1 axis" if axis == 0 else f"{axis + 1} axes"
        raise ValueError(f"{op}: input must have at least {need}, got shape {m.shape}")
    return flip(m, axis)


def rollaxis(a, axis, start=0) -> Tensor:
    """Move ``axis`` so that it comes before position ``start`` (NumPy ``rollaxis``; prefer
    :func:`moveaxis`).

    Raises:
        ValueError: if ``axis`` is out of range or ``start`` is not in ``[-ndim, ndim]``.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.rollaxis(tnp.zeros((3, 4, 5, 6)), 3, 1).shape
        (3, 6, 4, 5)
    """
    a = _tensor(a)
    n = a.ndim
    axis = _check_axis(axis, n, "rollaxis")
    given = start = operator.index(start)
    if start < 0:
        start += n
    if not 0 <= start < n + 1:
        raise ValueError(f"rollaxis: start must be in [{-n}, {n}], got {given}")
    if axis < start:
        start -= 1
    if axis == start:
        return a
    order = [i for i in range(n) if i != axis]
    order.insert(start, axis)
    return transpose(a, order)
