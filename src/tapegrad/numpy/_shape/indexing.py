"""Indexing: ``take``, ``take_along_axis``, the ``gather`` method, and NumPy's index
tricks (``meshgrid``, ``broadcast_shapes``, ``broadcast_arrays``, ``ix_``)."""

from __future__ import annotations

import numpy as _np

from tapegrad import ops as _ops
from tapegrad.core.tensor import Tensor
from tapegrad.core.tensor import const as _tconst
from tapegrad.numpy._core import _tensor
from tapegrad.numpy._shape.reshaping import _axis_or_flat, broadcast_to, ravel, reshape
from tapegrad.ops._registry import ns as _ns
from tapegrad.ops.movement import IndexSlot as _Slot

__all__ = [
    "take",
    "take_along_axis",
    "meshgrid",
    "broadcast_arrays",
    "broadcast_shapes",
    "ix_",
]


def _index(x, key, arrays) -> Tensor:
    return _ops.GetItem.apply(x, *_ops.indices_on(arrays, x.device), key=key)


def _int_indices(indices, op):
    if isinstance(indices, (int, _np.integer)) and not isinstance(indices, bool):
        return int(indices)
    if isinstance(indices, Tensor):
        if indices.dtype.kind not in "iu":
            raise TypeError(f"{op}: indices must be integers, got dtype {indices.dtype}")
        return indices
    arr = _np.asarray(indices)
    if arr.size == 0 and arr.dtype.kind == "f":
        arr = arr.astype(_np.intp)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{op}: indices must be integers, got dtype {arr.dtype}")
    return arr


def _check_bounds(indices, n, axis, op):
    """NumPy's message, naming ``op``, for concrete CPU indices out of ``[-n, n)``."""
    if isinstance(indices, int):
        vals = _np.asarray(indices)
    elif isinstance(indices, Tensor):
        if indices.device != "cpu":
            return
        vals = indices._array
    elif isinstance(indices, _np.ndarray):
        vals = indices
    else:
        return
    bad = (vals >= n) | (vals < -n)
    if bad.any():
        first = vals[bad].reshape(-1)[0]
        raise IndexError(f"{op}: index {int(first)} is out of bounds for axis {axis} with size {n}")


def take(x, indices, axis=None, mode="raise") -> Tensor:
    """Elements of ``x`` at ``indices`` along ``axis`` (``numpy.take``).

    Args:
        x: Tensor; with ``axis=None`` it is flattened first.
        indices: Int, integer array/list or integer Tensor. Index Tensors are inputs of the
            tape entry, so replays use new indices.
        axis: The axis to index.
        mode: What out-of-range indices do, as NumPy: ``"raise"`` (negative values count from
            the end; anything outside ``[-n, n)`` raises), ``"wrap"`` (taken modulo ``n``) or
            ``"clip"`` (clipped to ``[0, n - 1]``; negative values become 0, as NumPy).

    Returns:
        Tensor of shape ``x.shape[:axis] + indices.shape + x.shape[axis+1:]``.

    Gradient: scatter-add of the cotangent; repeated indices (also those that wrap or clip
    onto the same element) accumulate.

    Raises:
        IndexError: with ``mode="raise"``, if an index is out of bounds, naming the index, axis
            and size; with ``"wrap"``/``"clip"``, for a non-empty take from an empty axis.
        ValueError: for an unknown ``mode``.
        TypeError: for non-integer indices.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.take(tnp.asarray([10.0, 20.0, 30.0]), [-1, 4], mode="wrap")
        Tensor([30., 20.], dtype=float32)
    """
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"take: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    x, ax = _axis_or_flat(x, axis, "take")
    indices = _int_indices(indices, "take")
    n = x.shape[ax]
    if mode == "raise":
        _check_bounds(indices, n, ax, "take")
    else:
        size = 1 if isinstance(indices, int) else int(_np.prod(indices.shape))
        if n == 0 and size:
            raise IndexError(
                f"take: cannot take {size} element(s) from axis {ax}, which is empty "
                f"(mode={mode!r})"
            )
        if n:
            indices = _wrap_or_clip(indices, n, mode)
    pre = (slice(None),) * ax
    if isinstance(indices, int):
        return _index(x, pre + (indices,), ())
    return _index(x, pre + (_Slot(0, False),), (indices,))


def _wrap_or_clip(indices, n, mode):
    """``take``'s ``"wrap"``/``"clip"`` index maps (Tensors through recorded ops)."""
    if isinstance(indices, int):
        return indices % n if mode == "wrap" else min(max(indices, 0), n - 1)
    if isinstance(indices, Tensor):
        return _ns.remainder(indices, n) if mode == "wrap" else _ns.clip(indices, 0, n - 1)
    return _np.remainder(indices, n) if mode == "wrap" else _np.clip(indices, 0, n - 1)


def take_along_axis(x, indices, axis=-1) -> Tensor:
    """Pick ``x`` values along ``axis`` at ``indices`` (``numpy.take_along_axis``), as with
    the output of ``argsort``/``argmax(keepdims=True)``.

    Args:
        x: Tensor of shape ``(n_0, ..., n_k, ...)``.
        indices: Integer Tensor/array with ``x.ndim`` axes, broadcasting against ``x`` on all
            axes but ``axis``. With ``axis=None`` ``x`` is flattened and ``indices`` is 1-D.
        axis: The axis to pick along.

    Returns:
        Tensor of the broadcast shape of ``indices`` and ``x`` (off ``axis``).

    Raises:
        ValueError: if ``indices.ndim != x.ndim`` or the axis is out of range.
        IndexError: if an index is out of bounds.
    """
    x, ax = _axis_or_flat(x, axis, "take_along_axis")
    indices = _int_indices(indices, "take_along_axis")
    if isinstance(indices, int):
        raise ValueError("take_along_axis: indices must be an array with x.ndim axes, not an int")
    if indices.ndim != x.ndim:
        raise ValueError(
            f"take_along_axis: indices (shape {tuple(indices.shape)}) and x (shape {x.shape}) "
            "must have the same number of dimensions"
        )
    _check_bounds(indices, x.shape[ax], ax, "take_along_axis")
    arrays = []
    for i, n in enumerate(x.shape):
        if i == ax:
            arrays.append(indices)
        else:
            shp = [1] * x.ndim
            shp[i] = n
            arrays.append(_np.arange(n).reshape(shp))
    return _index(x, tuple(_Slot(i, False) for i in range(x.ndim)), tuple(arrays))


def _gather(x, index=0) -> Tensor:
    """Rows of ``x`` at ``index`` (``Tensor.gather``): ``take(x, index, axis=0)``.

    Args:
        index: Int (one row, the leading axis dropped) or a sequence/array/Tensor of ints.

    Raises:
        IndexError: if an index is out of bounds.

    Example:
        >>> import tapegrad as tg
        >>> tg.Tensor([[10.0, 20.0], [30.0, 40.0], [50.0, 60.0]]).gather([0, 2])
        Tensor([[10., 20.],
               [50., 60.]], dtype=float32)
    """
    return take(x, index, axis=0)





def meshgrid(*xi, copy=True, sparse=False, indexing="xy") -> tuple:
    """Coordinate grids from 1-D coordinate vectors (NumPy ``meshgrid``).

    Args:
        *xi: Coordinate Tensors (flattened).
        copy: Accepted for NumPy compatibility (Tensors are immutable).
        sparse: Return the broadcastable size-1-padded vectors instead of full grids.
        indexing: ``"xy"`` (Cartesian: the first two output axes swapped) or ``"ij"``
            (matrix indexing).

    Returns:
        Tuple of Tensors; with ``indexing="xy"`` and inputs of lengths ``(n0, n1, n2, ...)``
        each of shape ``(n1, n0, n2, ...)``, with ``"ij"`` ``(n0, n1, n2, ...)``.
        Differentiable (reshapes and broadcasts: gradients sum over the grid).

    Raises:
        ValueError: for another ``indexing``.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> X, Y = tnp.meshgrid(tnp.asarray([1, 2, 3]), tnp.asarray([4, 5]))
        >>> X.shape, Y.numpy().tolist()
        ((2, 3), [[4, 4, 4], [5, 5, 5]])
    """
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    nd = len(xi)
    out = []
    for i, x in enumerate(xi):
        x = ravel(_tensor(x))
        shp = [1] * nd
        shp[i] = x.shape[0]
        if indexing == "xy" and nd > 1 and i < 2:
            shp[0], shp[1] = shp[1], shp[0]
        out.append(reshape(x, tuple(shp)))
    if not sparse:
        out = list(broadcast_arrays(*out))
    return tuple(out)


def broadcast_shapes(*args) -> tuple:
    """The shape that ``args`` (ints or tuples of ints) broadcast to (NumPy
    ``broadcast_shapes``).

    Raises:
        ValueError: if they do not broadcast, naming all of them.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.broadcast_shapes((3, 1), (4,))
        (3, 4)
    """
    try:
        return tuple(_np.broadcast_shapes(*args))
    except ValueError:
        raise ValueError(
            f"broadcast_shapes: shapes {', '.join(str(a) for a in args)} do not broadcast "
            "together (trailing dimensions must be equal or 1)"
        ) from None


def broadcast_arrays(*args) -> tuple:
    """The inputs broadcast to their common shape (NumPy ``broadcast_arrays``; a tuple of
    read-only views). Differentiable: each cotangent is summed back over the broadcast axes.

    Raises:
        ValueError: if the shapes do not broadcast.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> [a.shape for a in tnp.broadcast_arrays(tnp.zeros((3, 1)), tnp.zeros(4))]
        [(3, 4), (3, 4)]
    """
    xs = [_tensor(a) for a in args]
    try:
        shape = tuple(_np.broadcast_shapes(*[a.shape for a in xs]))
    except ValueError:
        raise ValueError(
            f"broadcast_arrays: shapes {', '.join(str(a.shape) for a in xs)} do not broadcast "
            "together"
        ) from None
    return tuple(broadcast_to(a, shape) for a in xs)


def ix_(*args) -> tuple:
    """An open mesh of index arrays (NumPy ``ix_``): ``x[ix_(rows, cols)]`` picks the
    cross-product block.

    Args:
        *args: 1-D integer or boolean sequences/Tensors (booleans: their true positions).

    Returns:
        Tuple of integer Tensors; the ``k``-th has shape ``(1,) * k + (n_k,) + (1,) * ...``.
        No gradient (indices).

    Raises:
        ValueError: if an argument is not 1-D.
        TypeError: for a non-integer, non-boolean argument.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> x = tnp.arange(12).reshape(3, 4)
        >>> x[tnp.ix_([0, 2], [1, 3])]
        Tensor([[ 1,  3],
                [ 9, 11]], dtype=int64)
    """
    nd = len(args)
    out = []
    for k, a in enumerate(args):
        if not isinstance(a, Tensor):
            arr = _np.asarray(a)
            if arr.size == 0:
                arr = arr.astype(_np.intp)
            a = _tconst(arr)
        if a.ndim != 1:
            raise ValueError(f"ix_: every argument must be 1-D, got shape {a.shape} (argument "
                             f"{k})")
        if a.dtype == _np.bool_:
            a = _ns.nonzero(a)[0]
        elif a.dtype.kind not in "iu":
            raise TypeError(f"ix_: arguments must be integer or boolean, got dtype {a.dtype} "
                            f"(argument {k})")
        out.append(reshape(a, (1,) * k + (a.shape[0],) + (1,) * (nd - k - 1)))
    return tuple(out)
