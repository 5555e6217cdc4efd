"""Multidimensional histograms: :func:`histogramdd` and :func:`histogram2d` (NumPy's names and
arguments), differentiable in the weights (and, with ``density``, in the edges), as
:func:`tapegrad.numpy.histogram`."""

from __future__ import annotations

import builtins as _builtins
import operator
from typing import Any

import numpy as _np

from tapegrad.core.tensor import Tensor
from tapegrad.numpy._core import _tensor
from tapegrad.numpy._shape import atleast_2d, ravel, reshape, transpose
from tapegrad.numpy._sorting import _bin_edges, bincount, searchsorted
from tapegrad.ops._registry import ns as _ns

__all__ = ["histogramdd", "histogram2d"]


def _per_dim(value, d: int, what: str) -> list:
    """``bins`` or ``range`` for each of the ``d`` dimensions (NumPy's rule: a sequence of
    length ``d``, else the same value for every dimension)."""
    try:
        n = len(value)
    except TypeError:
        return [value] * d
    if n != d:
        raise ValueError(f"histogramdd: the dimension of {what} ({n}) must equal the sample's "
                         f"dimension ({d})")
    return list(value)


def histogramdd(sample, bins: Any = 10, range=None, density=None, weights=None):  # noqa: A002
    """The multidimensional histogram of ``sample`` (NumPy ``histogramdd``).

    Args:
        sample: ``(N, D)`` Tensor/array of ``N`` points in ``D`` dimensions, or a sequence of
            ``D`` 1-D arrays (the coordinates), as NumPy.
        bins: Per dimension (or one value for all): a number of equal-width bins, or the
            increasing bin edges.
        range: Per dimension ``(min, max)`` of the equal-width bins, or ``None`` for the
            data's min and max.
        density: Divide by the total and the bin volumes, so the histogram integrates to 1.
        weights: Optional ``(N,)`` weights: each point adds its weight instead of 1.

    Returns:
        ``(hist, edges)``: ``hist`` of shape ``(n_1, ..., n_D)`` (float64 counts without
        weights, as NumPy; the weights' floating dtype with them) and the list of ``D`` edge
        Tensors. Every bin is half-open except the last along each axis, which includes its
        right edge; points outside the edges (or NaN) are not counted.

    Derivative: ``hist`` is linear in ``weights`` (each weight's cotangent is that of its
    bin); counts are piecewise constant in ``sample``; with ``density`` the division by the
    bin volumes differentiates through the edges (through the data's min and max when
    ``range`` is None).

    Raises:
        ValueError: for bins or range of the wrong length, a non-positive bin count,
            non-increasing edges, a reversed or non-finite range, or weights of another
            length.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> pts = tnp.asarray([[0.1, 0.2], [0.6, 0.7], [0.7, 0.1]])
        >>> hist, edges = tnp.histogramdd(pts, bins=2, range=[(0, 1), (0, 1)])
        >>> hist
        Tensor([[1., 0.],
                [1., 1.]], dtype=float64)
    """
    if isinstance(sample, (Tensor, _np.ndarray)) or hasattr(sample, "__cuda_array_interface__"):
        s = _tensor(sample)
    else:
        s = _tensor(list(sample)) if isinstance(sample, (list, tuple)) else _tensor(sample)
        if s.ndim == 2:
            s = transpose(s)
    if s.ndim != 2:
        s = transpose(atleast_2d(s))
    n_points, d = s.shape
    bins = _per_dim(bins, d, "bins")
    ranges = [None] * d if range is None else _per_dim(range, d, "range")
    w = None
    if weights is not None:
        w = ravel(_tensor(weights))
        if w.shape != (n_points,):
            raise ValueError(f"histogramdd: weights (shape {_tensor(weights).shape}) must hold "
                             f"one weight per point ({n_points})")
    edges, idx, keep = [], [], None
    for i in _builtins.range(d):
        col = s[:, i]
        b = bins[i]
        if _np.ndim(b) == 0 and not isinstance(b, Tensor):
            b = operator.index(b)
            if b < 1:
                raise ValueError(f"histogramdd: bins[{i}] must be positive, when an integer, "
                                 f"got {b}")
        e = _bin_edges(col, b, ranges[i], w, "histogramdd")
        nb = e.shape[0] - 1
        k = searchsorted(e, col, side="right") - 1
        k = _ns.where(col == e[-1], nb - 1, k)  # the last bin includes its right edge
        inside = (col >= e[0]) & (col <= e[-1])
        keep = inside if keep is None else keep & inside
        edges.append(e)
        idx.append(k)
    shape = tuple(int(e.shape[0]) - 1 for e in edges)
    total = int(_np.prod(shape))
    flat = 0
    for k, size in zip(idx, shape):
        flat = flat * size + k
    flat = _ns.where(keep, flat, total)  # points outside: an extra bin, dropped below
    hist = bincount(flat, w, minlength=total + 1)[:total]
    dt = w.dtype if w is not None and w.dtype.kind in "fcV" else _np.dtype(_np.float64)
    hist = reshape(_ns.astype(hist, dt), shape)
    if density:
        norm = _ns.sum(hist)
        for i, e in enumerate(edges):
            view = [1] * d
            view[i] = shape[i]
            hist = hist / reshape(_ns.astype(e[1:] - e[:-1], dt), tuple(view))
        hist = hist / norm
    return hist, edges


def histogram2d(x, y, bins: Any = 10, range=None, density=None, weights=None):  # noqa: A002
    """The two-dimensional histogram of the points ``(x[i], y[i])`` (NumPy
    ``histogram2d``); see :func:`histogramdd`.

    Args:
        x, y: 1-D Tensors/arrays of equal length: the points' coordinates.
        bins: An int (bins in each dimension), a pair of ints, one array of edges for both
            dimensions, or a pair of edge arrays (or an int and an array).
        range: ``[(xmin, xmax), (ymin, ymax)]``, default the data's extent.
        density: Normalise to a density (integrates to 1 over the bins).
        weights: Optional weights, one per point.

    Returns:
        ``(hist, xedges, yedges)``: ``hist`` of shape ``(nx, ny)`` (x along the first axis),
        as :func:`histogramdd`. Differentiable in ``weights`` (and the edges with ``density``).

    Raises:
        ValueError: as :func:`histogramdd`, or for ``x`` and ``y`` of different lengths.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> h, xe, ye = tnp.histogram2d([0.1, 0.6, 0.7], [0.2, 0.7, 0.1], bins=2, range=[(0, 1),
        ...                             (0, 1)])
        >>> h
        Tensor([[1., 0.],
                [1., 1.]], dtype=float64)
    """
    xt, yt = ravel(_tensor(x)), ravel(_tensor(y))
    if xt.shape != yt.shape:
        raise ValueError(f"histogram2d: x and y must have the same length, got {xt.shape[0]} "
                         f"and {yt.shape[0]}")
    try:
        n = len(bins)
    except TypeError:
        n = 1
    if n not in (1, 2):
        bins = [bins, bins]  # one array of edges for both dimensions
    hist, edges = histogramdd([xt, yt], bins, range, density, weights)
    return hist, edges[0], edges[1]
