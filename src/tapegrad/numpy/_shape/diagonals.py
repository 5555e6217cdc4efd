"""Triangles and diagonals: ``tril``, ``triu``, ``diagonal``, ``trace``, ``diag`` and
``diagflat``."""

from __future__ import annotations

import operator

import numpy as _np

from tapegrad import ops as _ops
from tapegrad.core.backend import get_backend as _get_backend
from tapegrad.core.tensor import Tensor
from tapegrad.core.tensor import const as _tconst
from tapegrad.numpy._core import _tensor
from tapegrad.numpy._shape.indexing import _index
from tapegrad.numpy._shape.reshaping import ravel, transpose
from tapegrad.ops._registry import ns as _ns
from tapegrad.ops.movement import IndexSlot as _Slot
from tapegrad.ops.movement import check_axis as _check_axis

__all__ = [
    "tril",
    "triu",
    "diagonal",
    "trace",
    "diag",
    "diagflat",
]


def _tri_mask(x, k, lower, op) -> Tensor:
    if x.ndim == 0:
        raise ValueError(f"{op}: needs a Tensor with at least 1 axis, got shape ()")
    n, m = x.shape[-2:] if x.ndim >= 2 else (x.shape[-1], x.shape[-1])
    xp = _get_backend(x.device)
    mask = xp.tri(n, m, k=operator.index(k), dtype=bool)
    return _tconst(mask if lower else ~mask)


def tril(x, k=0) -> Tensor:
    """Lower triangle of the last two axes: elements with ``col - row <= k`` kept, others 0.

    As NumPy, a 1-D ``x`` of length ``n`` is treated as every row of an ``(n, n)`` matrix.
    Gradient: the cotangent masked the same way.
    """
    x = _tensor(x)
    mask = _tri_mask(x, k, True, "tril")
    return _ns.where(mask, x, _tconst(_get_backend(x.device).zeros((), x.dtype)))


def triu(x, k=0) -> Tensor:
    """Upper triangle of the last two axes: elements with ``col - row >= k`` kept, others 0."""
    x = _tensor(x)
    mask = _tri_mask(x, operator.index(k) - 1, False, "triu")
    return _ns.where(mask, x, _tconst(_get_backend(x.device).zeros((), x.dtype)))


def diagonal(x, offset=0, axis1=0, axis2=1) -> Tensor:
    """Diagonal ``x[..., i, i + offset]`` of the plane (``axis1``, ``axis2``) (``numpy.diagonal``).

    Returns:
        Tensor with ``axis1`` and ``axis2`` removed and the diagonal appended as the last axis
        (length ``max(0, min(n1 - max(-offset, 0), n2 - max(offset, 0)))``). A copy, not a view.

    Gradient: the cotangent written onto the diagonal of zeros.

    Raises:
        ValueError: if ``x.ndim < 2``, an axis is out of range, or ``axis1 == axis2``.
    """
    x = _tensor(x)
    if x.ndim < 2:
        raise ValueError(f"diagonal: needs a Tensor with at least 2 axes, got shape {x.shape}")
    a1 = _check_axis(axis1, x.ndim, "diagonal", "axis1")
    a2 = _check_axis(axis2, x.ndim, "diagonal", "axis2")
    if a1 == a2:
        raise ValueError(f"diagonal: axis1 and axis2 cannot be the same (both {a1})")
    offset = operator.index(offset)
    y = transpose(x, [a for a in range(x.ndim) if a not in (a1, a2)] + [a1, a2])
    n1, n2 = x.shape[a1], x.shape[a2]
    r0, c0 = max(-offset, 0), max(offset, 0)
    n = max(0, min(n1 - r0, n2 - c0))
    rows, cols = _np.arange(n) + r0, _np.arange(n) + c0
    return _index(y, (Ellipsis, _Slot(0, False), _Slot(1, False)), (rows, cols))


def trace(x, offset=0, axis1=0, axis2=1, dtype=None, out=None) -> Tensor:
    """Sum along a diagonal (NumPy's ``trace``; see :func:`diagonal`).

    Args:
        x: Tensor with at least 2 dimensions, shape ``(..., n1, ..., n2, ...)``.
        offset: Diagonal offset (positive: above the main diagonal).
        axis1, axis2: The two axes the diagonal runs along.
        dtype: The accumulator's and result's dtype (NumPy's ``sum`` rules when ``None``).
        out: Must be ``None`` (Tensors are immutable).

    Returns:
        Tensor of ``x``'s shape without ``axis1`` and ``axis2``. Gradient: the cotangent on the
        diagonal, zero elsewhere.

    Raises:
        ValueError: for fewer than 2 dimensions or equal axes (see :func:`diagonal`).
        TypeError: for ``out=``.
    """
    return _ns.sum(diagonal(x, offset, axis1, axis2), axis=-1, dtype=dtype, out=out)



def diag(v, k=0) -> Tensor:
    """Extract a diagonal or build a diagonal matrix (NumPy ``diag``).

    Args:
        v: 1-D Tensor of length ``n``: the result is the ``(n + |k|, n + |k|)`` matrix with
            ``v`` on diagonal ``k`` and zeros elsewhere. 2-D Tensor: its ``k``-th diagonal
            (as :func:`diagonal`).
        k: Diagonal offset (> 0 above the main diagonal, < 0 below).

    Returns:
        Tensor of ``v``'s dtype. Differentiable: the cotangent is gathered from (1-D) or
        written onto (2-D) the diagonal.

    Raises:
        ValueError: if ``v`` is neither 1-D nor 2-D.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.diag(tnp.asarray([1.0, 2.0]), k=1)
        Tensor([[0., 1., 0.],
                [0., 0., 2.],
                [0., 0., 0.]], dtype=float32)
    """
    v = _tensor(v)
    k = operator.index(k)
    if v.ndim == 1:
        n = v.shape[0]
        m = n + abs(k)
        rows = _np.arange(n) + max(-k, 0)
        cols = _np.arange(n) + max(k, 0)
        return _ops.ScatterAdd.apply(v, rows, cols, shape=(m, m),
                                     key=(_Slot(0, False), _Slot(1, False)))
    if v.ndim == 2:
        return diagonal(v, k)
    raise ValueError(f"diag: input must be 1-D or 2-D, got shape {v.shape}")


def diagflat(v, k=0) -> Tensor:
    """A 2-D Tensor with the flattened ``v`` on diagonal ``k`` (NumPy ``diagflat``); see
    :func:`diag`.

    Args:
        v: Tensor/array/number of any shape (flattened, length ``n``).
        k: Diagonal offset (positive: above the main diagonal).

    Returns:
        Tensor of shape ``(n + |k|, n + |k|)`` and ``v``'s dtype, zero off the diagonal;
        differentiable (the cotangent's diagonal goes back to ``v``).

    Raises:
        TypeError: for a non-numeric ``v`` or a non-integer ``k``.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.diagflat(tnp.asarray([[1, 2]])).shape
        (2, 2)
    """
    return diag(ravel(_tensor(v)), k)
