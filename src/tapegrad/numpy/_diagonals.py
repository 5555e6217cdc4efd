"""Diagonal index tricks of NumPy (:func:`diag_indices`, :func:`diag_indices_from`,
:func:`mask_indices`) and HIPS autograd's :func:`make_diagonal`, the differentiable inverse of
:func:`tapegrad.numpy.diagonal`."""

from __future__ import annotations

import operator

import numpy as _np

from tapegrad.core.tensor import Tensor
from tapegrad.numpy._core import _tensor
from tapegrad.numpy._linalg import tensordot
from tapegrad.numpy._shape import moveaxis
from tapegrad.ops._registry import ns as _ns

__all__ = ["diag_indices", "diag_indices_from", "mask_indices", "make_diagonal"]


def diag_indices(n, ndim=2) -> tuple:
    """Indices of the main diagonal of an ``n x n x ... x n`` array (NumPy ``diag_indices``).

    Args:
        n: Size of each axis (a non-negative int).
        ndim: Number of axes.

    Returns:
        A tuple of ``ndim`` int64 Tensors ``arange(n)`` (constants): ``a[idx]`` reads the
        diagonal and ``a.at[idx].set(v)`` writes it (NumPy's ``fill_diagonal``).

    Raises:
        TypeError: for non-integer sizes.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.zeros((3, 3)).at[tnp.diag_indices(3)].set(1.0)
        Tensor([[1., 0., 0.],
                [0., 1., 0.],
                [0., 0., 1.]], dtype=float32)
    """
    rows = _np.arange(operator.index(n))
    return tuple(Tensor(rows) for _ in range(operator.index(ndim)))


def diag_indices_from(arr) -> tuple:
    """:func:`diag_indices` for the shape of ``arr`` (NumPy ``diag_indices_from``).

    Args:
        arr: Tensor/array with at least two axes, all of one length.

    Returns:
        A tuple of ``arr.ndim`` int64 Tensors (constants).

    Raises:
        ValueError: if ``arr`` has fewer than two axes or axes of different lengths.
    """
    shape = arr.shape if hasattr(arr, "shape") else _np.shape(arr)
    if len(shape) < 2:
        raise ValueError(f"diag_indices_from: input array must be at least 2-d, got shape "
                         f"{tuple(shape)}")
    if len(set(shape)) != 1:
        raise ValueError(f"diag_indices_from: all dimensions of the input must be of equal "
                         f"length, got shape {tuple(shape)}")
    return diag_indices(shape[0], len(shape))


def mask_indices(n, mask_func, k=0) -> tuple:
    """Indices of the nonzero entries that ``mask_func(ones((n, n)), k)`` leaves (NumPy
    ``mask_indices``), for example the upper triangle with ``tnp.triu``.

    Args:
        n: Size of the square matrix.
        mask_func: ``f(matrix, k)`` returning an ``(n, n)`` array or Tensor, as
            ``tnp.triu``/``tnp.tril``.
        k: Passed to ``mask_func``.

    Returns:
        ``(rows, cols)``: two int64 Tensors (constants).

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.mask_indices(3, tnp.triu, 1)
        (Tensor([0, 0, 1], dtype=int64), Tensor([1, 2, 2], dtype=int64))
    """
    n = operator.index(n)
    m = _tensor(mask_func(_np.ones((n, n), dtype=int), k))
    return _ns.nonzero(m != 0)


def make_diagonal(D, offset=0, axis1=0, axis2=1) -> Tensor:  # noqa: N803 - autograd's name
    """Arrays whose diagonal is ``D`` and every other entry zero: the inverse of
    ``diagonal(A, offset, axis1, axis2)`` (HIPS autograd's ``make_diagonal``; NumPy has none).

    Args:
        D: Tensor ``(..., k)``: the diagonals along its last axis.
        offset: Diagonal offset (``> 0`` above the main diagonal, as :func:`diagonal`).
        axis1, axis2: Where the result's two new matrix axes go (row and column of the
            diagonal), as :func:`diagonal`'s arguments; the other axes of ``D`` keep their
            order around them.

    Returns:
        Tensor of ``D``'s dtype with ``D.ndim + 1`` axes, two of them ``k + |offset|`` long,
        such that ``diagonal(make_diagonal(D, o, a1, a2), o, a1, a2)`` equals ``D``.
        Linear, so differentiable to any order (its transpose is :func:`diagonal`).

    Raises:
        ValueError: for a 0-d ``D`` or equal or out-of-range ``axis1``/``axis2``.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.make_diagonal(tnp.asarray([1.0, 2.0]), axis1=-1, axis2=-2)
        Tensor([[1., 0.],
                [0., 2.]], dtype=float32)
    """
    d = _tensor(D)
    if d.ndim == 0:
        raise ValueError("make_diagonal: D must have at least one axis (the diagonal)")
    offset = operator.index(offset)
    k = d.shape[-1]
    n = k + abs(offset)
    nd = d.ndim + 1
    a1, a2 = operator.index(axis1), operator.index(axis2)
    if not (-nd <= a1 < nd and -nd <= a2 < nd) or a1 % nd == a2 % nd:
        raise ValueError(f"make_diagonal: axis1 ({axis1}) and axis2 ({axis2}) must be distinct "
                         f"axes of the {nd}-d result")
    pick = _np.zeros((k, n, n), dtype=d.dtype)
    i = _np.arange(k)
    pick[i, i + max(-offset, 0), i + max(offset, 0)] = 1
    out = tensordot(d, Tensor(pick, device=d.device), axes=1)  # (..., n, n): rows, columns
    return moveaxis(out, (nd - 2, nd - 1), (a1 % nd, a2 % nd))
