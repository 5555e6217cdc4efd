"""Shape changes, joining, reordering and indexing of ``tapegrad.numpy``.

NumPy names and arguments; every function returns a new Tensor (views are read-only) and is
differentiable in its Tensor input(s) to any order. Axis arguments accept negative values;
an out-of-range axis is a ``ValueError`` naming the op, the axis and ``ndim``.

The functions that apply one primitive (``reshape``, ``transpose``, ``broadcast_to``,
``concatenate``, ``split``, ``flip``, ``roll``, ``pad``, ``sliding_window_view``) are defined
with their primitives in :mod:`tapegrad.ops.movement`, together with the Tensor methods
``reshape``, ``transpose``, ``T``, ``__getitem__``, ``broadcast_to``, ``flip``, ``roll``,
``pad`` and ``Tensor.cat``; this module re-exports them and defines the composites.

Tensor methods installed here: ``view``, ``ravel``, ``flatten``, ``squeeze``, ``unsqueeze``,
``permute``, ``swapaxes``, ``moveaxis``, ``expand``, ``repeat``, ``tile``, ``tril``, ``triu``,
``diagonal``, ``trace``, ``take``, ``gather``, ``strided_windows`` and the static
``Tensor.stack``. (``Tensor.at`` lives in :mod:`tapegrad.at`.)
"""

from __future__ import annotations

import math
import operator

import numpy as _np

from tapegrad import dtypes as _tg_dtypes
from tapegrad import ops as _ops
from tapegrad.backend import get_backend as _get_backend
from tapegrad.numpy._core import _install_methods, _tensor
from tapegrad.numpy._reduction import sum as _sum
from tapegrad.ops._registry import ns as _ns
from tapegrad.ops.movement import IndexSlot as _Slot
from tapegrad.ops.movement import _concat_shape
from tapegrad.ops.movement import as_shape as _as_shape
from tapegrad.ops.movement import as_tensor_list as _as_tensor_list
from tapegrad.ops.movement import cast_all as _cast_all
from tapegrad.ops.movement import check_axes as _check_axes
from tapegrad.ops.movement import check_axis as _check_axis
from tapegrad.ops.movement import no_out as _no_out
from tapegrad.ops.movement import split_pieces as _split_pieces
from tapegrad.ops.movement import swap_axes as _swap_axes
from tapegrad.tensor import Tensor
from tapegrad.tensor import const as _tconst

__all__ = [
    "reshape",
    "ravel",
    "squeeze",
    "expand_dims",
    "transpose",
    "permute_dims",
    "swapaxes",
    "moveaxis",
    "broadcast_to",
    "concatenate",
    "concat",
    "stack",
    "unstack",
    "split",
    "array_split",
    "tile",
    "repeat",
    "flip",
    "roll",
    "pad",
    "tril",
    "triu",
    "diagonal",
    "trace",
    "take",
    "take_along_axis",
    "sliding_window_view",
    "strided_windows",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "hstack",
    "vstack",
    "row_stack",
    "dstack",
    "column_stack",
    "block",
    "append",
    "hsplit",
    "vsplit",
    "dsplit",
    "diag",
    "diagflat",
    "rot90",
    "fliplr",
    "flipud",
    "rollaxis",
    "resize",
    "trim_zeros",
    "insert",
    "delete",
    "r_",
    "c_",
    "meshgrid",
    "broadcast_arrays",
    "broadcast_shapes",
    "ix_",
]


# -- functions of one primitive, defined with it in tapegrad.ops.movement ------------------------
reshape = _ns.reshape
transpose = _ns.transpose
permute_dims = _ns.permute_dims
broadcast_to = _ns.broadcast_to
concatenate = _ns.concatenate
concat = _ns.concat
split = _ns.split
flip = _ns.flip
roll = _ns.roll
pad = _ns.pad
sliding_window_view = _ns.sliding_window_view


# -- shapes ---------------------------------------------------------------------------------
def ravel(x) -> Tensor:
    """Flatten to 1-D in C order: shape ``(x.size,)``."""
    x = _tensor(x)
    return reshape(x, (x.size,))


def squeeze(x, axis=None) -> Tensor:
    """Remove size-1 axes: all of them (``axis=None``) or the given int/tuple of axes.

    Raises:
        ValueError: if an axis is out of range, or a selected axis does not have size 1
            (naming the axis, its size and the shape).
    """
    x = _tensor(x)
    if axis is None:
        axes = tuple(i for i, s in enumerate(x.shape) if s == 1)
    else:
        axes = _check_axes(axis, x.ndim, "squeeze")
        for a in axes:
            if x.shape[a] != 1:
                raise ValueError(
                    f"squeeze: cannot squeeze axis {a} of a Tensor of shape {x.shape}: its size "
                    f"is {x.shape[a]}, not 1"
                )
    return reshape(x, tuple(s for i, s in enumerate(x.shape) if i not in axes))


def expand_dims(x, axis) -> Tensor:
    """Insert size-1 axes so that they sit at positions ``axis`` (int or tuple) of the result.

    Raises:
        numpy.exceptions.AxisError: (a ``ValueError`` and an ``IndexError``, as NumPy's and
            the array API's ``expand_dims`` raise) if an axis is out of range for the
            result's ``ndim``.
        ValueError: if an axis is repeated.
    """
    x = _tensor(x)
    n_new = 1 if isinstance(axis, (int, _np.integer)) else len(tuple(axis))
    out_nd = x.ndim + n_new
    axes = set(_check_axes(axis, out_nd, "expand_dims"))
    it = iter(x.shape)
    return reshape(x, tuple(1 if i in axes else next(it) for i in range(out_nd)))


def swapaxes(x, axis1: int, axis2: int) -> Tensor:
    """Exchange two axes.

    Raises:
        ValueError: if an axis is out of range, naming it and ``x.ndim``.
    """
    return _swap_axes(_tensor(x), axis1, axis2)


def moveaxis(x, source, destination) -> Tensor:
    """Move axes ``source`` (int or sequence) to positions ``destination``; the others keep
    their order.

    Raises:
        ValueError: if the two have different lengths, or an axis is out of range or repeated.
    """
    x = _tensor(x)
    src = _check_axes(source, x.ndim, "moveaxis", "source")
    dst = _check_axes(destination, x.ndim, "moveaxis", "destination")
    if len(src) != len(dst):
        raise ValueError(
            f"moveaxis: source {source!r} and destination {destination!r} must have the same "
            "number of elements"
        )
    order = [a for a in range(x.ndim) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(x, order)


# -- joining and splitting ------------------------------------------------------------------
def stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind") -> Tensor:
    """Join a sequence of equal-shape Tensors along a new axis at position ``axis``.

    Args:
        arrays: Sequence of Tensors (arrays, numbers, lists) of one shape.
        axis: Where the new axis goes, in ``[-ndim - 1, ndim]``.
        out: Must be None (Tensors are immutable).
        dtype: Cast every input to this dtype first (NumPy's keyword).
        casting: Which casts ``dtype`` may make (NumPy's rule names; default ``"same_kind"``).

    Returns:
        Tensor of shape ``shape[:axis] + (len(arrays),) + shape[axis:]``; dtype by NumPy
        promotion, or ``dtype``.

    Raises:
        ValueError: for an empty sequence, shapes that differ (naming them) or an axis out of
            range for ``ndim + 1``; an unknown ``casting``.
        TypeError: for ``out=``, or a cast ``casting`` forbids.

    Example:
        >>> import tapegrad as tg
        >>> tg.Tensor.stack([tg.Tensor([1.0, 2.0]), tg.Tensor([3.0, 4.0])]).shape
        (2, 2)
    """
    _no_out(out, "stack")
    xs = _cast_all(_as_tensor_list(arrays, "stack"), dtype, casting, "stack")
    shapes = {a.shape for a in xs}
    if len(shapes) != 1:
        raise ValueError(
            f"stack: all input Tensors must have the same shape, got shapes "
            f"{', '.join(str(a.shape) for a in xs)}"
        )
    ax = _check_axis(axis, xs[0].ndim + 1, "stack")
    return _ops.Concatenate.apply(*[expand_dims(a, ax) for a in xs], axis=ax)


def unstack(x, /, *, axis=0) -> tuple:
    """The slices of ``x`` along ``axis``, as a tuple (NumPy 2.1's and the array API's
    ``unstack``, the inverse of :func:`stack`).

    Args:
        x: Tensor of shape ``(d_0, ..., d_{n-1})`` with at least one axis.
        axis: The axis to take apart (negative counts from the end).

    Returns:
        Tuple of ``d_axis`` Tensors of ``x``'s dtype and shape without ``axis`` (an empty
        tuple when ``d_axis`` is 0). Differentiable: one :func:`split`, whose cotangent is one
        concatenation.

    Raises:
        ValueError: for a 0-d ``x``.
        numpy.exceptions.AxisError: (a ``ValueError`` and an ``IndexError``) if ``axis`` is out
            of range.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> a, b = tnp.unstack(tnp.asarray([[1.0, 2.0], [3.0, 4.0]]), axis=1)
        >>> b
        Tensor([2., 4.], dtype=float32)
    """
    x = _tensor(x)
    if x.ndim == 0:
        raise ValueError("unstack: x must have at least one axis, got a 0-d Tensor")
    ax = _check_axis(axis, x.ndim, "unstack")
    n = x.shape[ax]
    if n == 0:
        return ()
    rest = x.shape[:ax] + x.shape[ax + 1 :]
    if n == 1:
        return (reshape(x, rest),)
    return tuple(reshape(p, rest) for p in split(x, n, axis=ax))


def array_split(x, indices_or_sections, axis=0) -> list:
    """Like :func:`split`, but an int ``k`` need not divide the axis: the first ``n % k``
    pieces get one extra element (``numpy.array_split``)."""
    return _split_pieces(x, indices_or_sections, axis, "array_split", False)


# -- repetition -----------------------------------------------------------------------------
def tile(x, reps) -> Tensor:
    """Repeat the whole Tensor ``reps`` times along each axis (``numpy.tile``); shorter of
    ``reps`` and ``x.shape`` is padded with leading 1s.

    Gradient: the cotangent summed over the copies (a broadcast, then reshapes).

    Raises:
        ValueError: if a repetition count is negative.
    """
    x = _tensor(x)
    reps = _as_shape(reps, "tile")
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: repetitions must be >= 0, got {reps}")
    nd = max(x.ndim, len(reps))
    reps = (1,) * (nd - len(reps)) + reps
    shape = (1,) * (nd - x.ndim) + x.shape
    inter = tuple(v for s in shape for v in (1, s))
    expanded = tuple(v for r, s in zip(reps, shape) for v in (r, s))
    y = broadcast_to(reshape(x, inter), expanded)
    return reshape(y, tuple(r * s for r, s in zip(reps, shape)))


def repeat(x, repeats, axis=None) -> Tensor:
    """Repeat each element ``repeats`` times along ``axis`` (``numpy.repeat``).

    Args:
        x: Tensor; with ``axis=None`` it is flattened first.
        repeats: An int, or one non-negative int per element along the axis (a length-1
            sequence applies to all). Static: a traced Tensor is not accepted.
        axis: The axis to repeat along.

    Returns:
        Tensor of ``x``'s dtype. Gradient: each element gets the sum of its copies' cotangents.

    Raises:
        ValueError: for negative repeats or a length that matches neither 1 nor the axis.
    """
    x = _tensor(x)
    if axis is None:
        x, ax = ravel(x), 0
    else:
        ax = _check_axis(axis, x.ndim, "repeat")
    n = x.shape[ax]
    reps = _np.asarray(repeats.numpy() if isinstance(repeats, Tensor) else repeats)
    if reps.dtype.kind not in "iu" and not (reps.size == 0 and reps.dtype.kind == "f"):
        raise TypeError(f"repeat: repeats must be integers, got dtype {reps.dtype}")
    reps = reps.astype(_np.int64)
    if reps.ndim > 1:
        raise ValueError(f"repeat: repeats must be an int or 1-D, got shape {reps.shape}")
    if (reps < 0).any():
        raise ValueError("repeat: repeats must be >= 0")
    if reps.ndim == 0 or reps.size == 1:
        r = int(reps.reshape(-1)[0])
        inter = x.shape[: ax + 1] + (1,) + x.shape[ax + 1 :]
        y = broadcast_to(reshape(x, inter), x.shape[: ax + 1] + (r,) + x.shape[ax + 1 :])
        return reshape(y, x.shape[:ax] + (n * r,) + x.shape[ax + 1 :])
    if reps.size != n:
        raise ValueError(
            f"repeat: got {reps.size} repeats for an axis of size {n} (axis {ax}, shape "
            f"{x.shape}); give one per element or a single one"
        )
    index = _np.repeat(_np.arange(n), reps)
    return _index(x, (slice(None),) * ax + (_Slot(0, False),), (index,))


# -- triangles and diagonals ----------------------------------------------------------------
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
    return _sum(diagonal(x, offset, axis1, axis2), axis=-1, dtype=dtype, out=out)


# -- gathering ------------------------------------------------------------------------------
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
    x = _tensor(x)
    if axis is None:
        x, ax = ravel(x), 0
    else:
        ax = _check_axis(axis, x.ndim, "take")
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
    x = _tensor(x)
    if axis is None:
        x, ax = ravel(x), 0
    else:
        ax = _check_axis(axis, x.ndim, "take_along_axis")
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


# -- sliding windows ------------------------------------------------------------------------
def strided_windows(x, kernel_size: int, stride: int = 1) -> Tensor:
    """Square sliding windows over the last two axes (``Tensor.strided_windows``).

    Args:
        x: Tensor of shape ``(..., H, W)``, typically ``(batch, channels, H, W)``.
        kernel_size: Window side ``k``.
        stride: Step ``s`` between window positions.

    Returns:
        Tensor of shape ``(H_out, W_out, ..., k, k)`` with ``H_out = (H - k) // s + 1`` and
        ``W_out = (W - k) // s + 1``: a strided view, permuted.

    Gradient: one scatter-add over all windows (overlapping windows accumulate).

    Raises:
        ValueError: if ``x.ndim < 2``, ``k`` exceeds ``H`` or ``W``, or ``stride < 1``.

    Example:
        >>> import numpy as np, tapegrad as tg
        >>> tg.Tensor(np.zeros((2, 3, 10, 10))).strided_windows(kernel_size=3, stride=1).shape
        (8, 8, 2, 3, 3, 3)
    """
    x = _tensor(x)
    if x.ndim < 2:
        raise ValueError(f"strided_windows: needs a Tensor of shape (..., H, W), got {x.shape}")
    k, s = operator.index(kernel_size), operator.index(stride)
    nd = x.ndim
    w = _ops.SlidingWindow.apply(
        x, window_shape=(k, k), axis=(nd - 2, nd - 1), step=(1,) * (nd - 2) + (s, s)
    )
    return transpose(w, (nd - 2, nd - 1, *range(nd - 2), nd, nd + 1))


# -- at-least-n-d, stacking and splitting ----------------------------------------------------
def _atleast(arys, nd, op):
    out = []
    for a in arys:
        a = _tensor(a)
        if a.ndim < nd:
            if nd == 3 and a.ndim == 1:
                a = reshape(a, (1, a.shape[0], 1))
            elif nd == 3 and a.ndim == 2:
                a = reshape(a, a.shape + (1,))
            else:
                a = reshape(a, (1,) * (nd - a.ndim) + a.shape)
        out.append(a)
    return out[0] if len(out) == 1 else tuple(out)


def atleast_1d(*arys):
    """Each input with at least one axis (NumPy ``atleast_1d``): a 0-d Tensor becomes shape
    ``(1,)``; others are returned as they are.

    Returns:
        One Tensor for one input, else a tuple. Differentiable (reshapes).

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.atleast_1d(1.0).shape, [a.shape for a in tnp.atleast_1d(1.0, tnp.zeros((2, 2)))]
        ((1,), [(1,), (2, 2)])
    """
    return _atleast(arys, 1, "atleast_1d")


def atleast_2d(*arys):
    """Each input with at least two axes (NumPy ``atleast_2d``): shape ``()`` becomes
    ``(1, 1)``, ``(n,)`` becomes ``(1, n)``. One Tensor for one input, else a tuple.

    Args:
        *arys: Tensors, arrays or numbers.

    Returns:
        A Tensor (a tuple of Tensors for several inputs) of each input's dtype with at least
        two axes; differentiable (a reshape).

    Raises:
        TypeError: for a non-numeric input.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.atleast_2d(tnp.zeros(3)).shape
        (1, 3)
    """
    return _atleast(arys, 2, "atleast_2d")


def atleast_3d(*arys):
    """Each input with at least three axes (NumPy ``atleast_3d``): ``()`` becomes
    ``(1, 1, 1)``, ``(n,)`` becomes ``(1, n, 1)``, ``(m, n)`` becomes ``(m, n, 1)``. One Tensor
    for one input, else a tuple.

    Args:
        *arys: Tensors, arrays or numbers.

    Returns:
        A Tensor (a tuple of Tensors for several inputs) of each input's dtype with at least
        three axes; differentiable (a reshape).

    Raises:
        TypeError: for a non-numeric input.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.atleast_3d(tnp.zeros(3)).shape, tnp.atleast_3d(tnp.zeros((2, 3))).shape
        ((1, 3, 1), (2, 3, 1))
    """
    return _atleast(arys, 3, "atleast_3d")


def _stack_list(tup, op, dtype=None, casting="same_kind"):
    if isinstance(tup, (Tensor, _np.ndarray)) or hasattr(tup, "__cuda_array_interface__"):
        # one array is the sequence of its slices along axis 0, as NumPy iterates it
        t = _tensor(tup)
        if t.ndim == 0:
            raise TypeError(f"{op}: a 0-d array is not a sequence of arrays to stack; pass a "
                            "list or tuple (for example [x])")
        if t.shape[0] == 0:
            raise ValueError(f"{op}: need at least one array to stack, got an array of shape "
                             f"{t.shape}")
        tup = [_ops.Reshape.api(p, t.shape[1:])
               for p in _split_pieces(t, t.shape[0], 0, op, True)]
    elif not isinstance(tup, (list, tuple)):
        raise TypeError(f"{op}: the arrays to stack must be given as a list, tuple or array, "
                        f"got {type(tup).__name__}")
    return _cast_all(_as_tensor_list(tup, op), dtype, casting, op)


def _join(xs, axis, op) -> Tensor:
    """``Concatenate`` of ``xs`` along ``axis``; a shape mismatch is reported as ``op``'s."""
    _concat_shape([x.shape for x in xs], axis, op)
    return _ops.Concatenate.apply(*xs, axis=axis)


def hstack(tup, *, dtype=None, casting="same_kind") -> Tensor:
    """Join a sequence of Tensors horizontally (NumPy ``hstack``): along axis 1, or axis 0
    for 1-D inputs (0-d inputs count as 1-D).

    Args:
        tup: List or tuple of Tensors/arrays/numbers.
        dtype: Optional result dtype (each input cast to it, under ``casting``).
        casting: NumPy's casting rule for ``dtype``.

    Returns:
        Tensor; dtype by NumPy promotion (or ``dtype``). Differentiable (a concatenation).

    Raises:
        TypeError: if ``tup`` is not a list, tuple or array (an array stacks its slices along
            axis 0, as NumPy iterates it), or a cast breaks ``casting``.
        ValueError: for no inputs or shapes that differ off the joining axis.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.hstack([tnp.asarray([1, 2]), tnp.asarray([3])])
        Tensor([1, 2, 3], dtype=int64)
    """
    xs = _stack_list(tup, "hstack", dtype, casting)
    xs = [atleast_1d(a) for a in xs]
    return _join(xs, 0 if xs[0].ndim == 1 else 1, "hstack")


def vstack(tup, *, dtype=None, casting="same_kind") -> Tensor:
    """Join a sequence of Tensors vertically (NumPy ``vstack``): along axis 0, after making
    each at least 2-D (``(n,)`` becomes ``(1, n)``).

    Args:
        tup: List or tuple of Tensors/arrays/numbers of shapes ``(n,)`` or ``(m_i, n, ...)``;
            or one Tensor/array, the sequence of its slices along axis 0 (as NumPy).
        dtype: Optional result dtype (each input cast to it, under ``casting``).
        casting: NumPy's casting rule for ``dtype``.

    Returns:
        Tensor of shape ``(sum m_i, n, ...)``; dtype by NumPy promotion (or ``dtype``).
        Differentiable (a concatenation: each input gets its slice of the cotangent).

    Raises:
        TypeError: if ``tup`` is not a list, tuple or array (an array stacks its slices along
            axis 0, as NumPy iterates it), or a cast breaks ``casting``.
        ValueError: for no inputs, or shapes that differ off axis 0 (naming ``vstack``).

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.vstack([tnp.asarray([1, 2]), tnp.asarray([3, 4])]).shape
        (2, 2)
    """
    xs = _stack_list(tup, "vstack", dtype, casting)
    return _join([atleast_2d(a) for a in xs], 0, "vstack")


def row_stack(tup, *, dtype=None, casting="same_kind") -> Tensor:
    """Same as :func:`vstack` (NumPy's older name, deprecated there): arguments, result and
    errors as :func:`vstack`.

    Returns:
        Tensor of shape ``(sum m_i, n, ...)``; dtype by NumPy promotion (or ``dtype``).

    Raises:
        TypeError: if ``tup`` is not a list, tuple or array. ValueError: for no inputs or
            shapes that differ off axis 0.
    """
    return vstack(tup, dtype=dtype, casting=casting)


def dstack(tup) -> Tensor:
    """Join a sequence of Tensors depth-wise (NumPy ``dstack``): along axis 2, after making
    each at least 3-D (``(n,)`` becomes ``(1, n, 1)``, ``(m, n)`` becomes ``(m, n, 1)``).

    Args:
        tup: List or tuple of Tensors/arrays/numbers.

    Returns:
        Tensor of shape ``(m, n, sum k_i, ...)``; dtype by NumPy promotion. Differentiable.

    Raises:
        TypeError: if ``tup`` is not a list, tuple or array (an array stacks its slices along
            axis 0), or is a 0-d array.
        ValueError: for no inputs, or shapes that differ off axis 2 (naming ``dstack``).

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.dstack([tnp.asarray([1, 2]), tnp.asarray([3, 4])]).shape
        (1, 2, 2)
    """
    xs = _stack_list(tup, "dstack")
    return _join([atleast_3d(a) for a in xs], 2, "dstack")


def column_stack(tup) -> Tensor:
    """Stack 1-D Tensors as the columns of a 2-D Tensor (NumPy ``column_stack``); inputs with
    two or more axes are joined along axis 1 as they are.

    Args:
        tup: List or tuple of Tensors/arrays/numbers: 1-D of length ``n``, or ``(n, k_i, ...)``.

    Returns:
        Tensor of shape ``(n, sum k_i, ...)`` (a 1-D input counts ``k_i = 1``); dtype by NumPy
        promotion. Differentiable.

    Raises:
        TypeError: if ``tup`` is not a list, tuple or array (an array stacks its slices along
            axis 0), or is a 0-d array.
        ValueError: for no inputs, or lengths/shapes that differ off axis 1 (naming
            ``column_stack``).

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.column_stack([tnp.asarray([1, 2]), tnp.asarray([3, 4])])
        Tensor([[1, 3],
                [2, 4]], dtype=int64)
    """
    xs = _stack_list(tup, "column_stack")
    cols = [transpose(atleast_2d(a)) if a.ndim < 2 else a for a in xs]
    return _join(cols, 1, "column_stack")


def _block_depth(x, op, path="arrays"):
    """The nesting depth of a block layout (lists only) and the largest leaf ndim."""
    if isinstance(x, tuple):
        raise TypeError(f"{op}: {path} is a tuple; only lists arrange blocks (NumPy): use a "
                        "list, or wrap a tuple meant as an array in tnp.asarray")
    if isinstance(x, list):
        if not x:
            raise ValueError(f"{op}: {path} is an empty list; blocks cannot be empty")
        found = [_block_depth(v, op, f"{path}[{i}]") for i, v in enumerate(x)]
        if len({d for d, _ in found}) != 1:
            raise ValueError(f"{op}: list depths are mismatched inside {path} (depths "
                             f"{[d + 1 for d, _ in found]}); every block must be nested equally")
        return found[0][0] + 1, max(n for _, n in found)
    return 0, _tensor(x).ndim


def _block_build(x, depth, nd):
    if isinstance(x, list):
        parts = [_block_build(v, depth - 1, nd) for v in x]
        return _ops.Concatenate.apply(*parts, axis=nd - depth)
    a = _tensor(x)
    return reshape(a, (1,) * (nd - a.ndim) + a.shape) if a.ndim < nd else a


def block(arrays) -> Tensor:
    """Assemble a Tensor from nested lists of blocks (NumPy ``block``): the innermost lists
    are joined along the last axis, the next level along the second-to-last, and so on; every
    block is first given ``max(depth, largest ndim)`` axes by prepending size-1 axes.

    Returns:
        Tensor; dtype by NumPy promotion. Differentiable (concatenations).

    Raises:
        TypeError: for a tuple in the layout (NumPy only accepts lists).
        ValueError: for an empty list, mismatched nesting depths, or block shapes that do not
            fit together.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> A = tnp.eye(2); B = tnp.zeros((2, 1))
        >>> tnp.block([[A, B], [tnp.ones((1, 2)), tnp.ones((1, 1))]]).shape
        (3, 3)
    """
    depth, nd = _block_depth(arrays, "block")
    return _block_build(arrays, depth, max(depth, nd))


def append(arr, values, axis=None) -> Tensor:
    """``values`` appended at the end of ``arr`` (NumPy ``append``): with ``axis=None`` both
    are flattened first; otherwise they are joined along ``axis`` (shapes must match off it).

    Args:
        arr, values: Tensors/arrays/numbers.
        axis: The joining axis; ``None`` flattens both first.

    Returns:
        Tensor: 1-D of length ``arr.size + values.size`` for ``axis=None``, else ``arr``'s shape
        with ``axis`` lengthened by ``values.shape[axis]``; dtype by NumPy promotion.
        Differentiable in both.

    Raises:
        ValueError: for an out-of-range ``axis`` or shapes that differ off ``axis`` (naming
            ``append``).

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.append(tnp.asarray([1, 2]), [[3], [4]])
        Tensor([1, 2, 3, 4], dtype=int64)
    """
    a, v = _tensor(arr), _tensor(values)
    if axis is None:
        return _join([ravel(a), ravel(v)], 0, "append")
    return _join([a, v], axis, "append")


def hsplit(ary, indices_or_sections) -> list:
    """Split horizontally (NumPy ``hsplit``): along axis 1, or axis 0 for 1-D ``ary``. See
    :func:`split` for ``indices_or_sections``.

    Raises:
        ValueError: for a 0-d ``ary``, or sections that do not divide the axis.
    """
    a = _tensor(ary)
    if a.ndim == 0:
        raise ValueError("hsplit: only works on Tensors with at least 1 axis, got shape ()")
    return _split_pieces(a, indices_or_sections, 1 if a.ndim > 1 else 0, "hsplit", True)


def vsplit(ary, indices_or_sections) -> list:
    """Split vertically, along axis 0 (NumPy ``vsplit``; ``ary`` needs at least 2 axes).

    Args:
        ary: Tensor with at least 2 axes, shape ``(n, ...)``.
        indices_or_sections: An int ``k`` (``k`` equal pieces: ``n`` must be divisible by ``k``)
            or a sorted sequence of split points along axis 0.

    Returns:
        List of Tensors of ``ary``'s dtype, each a view-like slice ``(n_i, ...)``; differentiable
        (each piece's cotangent goes back to its slice).

    Raises:
        ValueError: for fewer than 2 axes, or an axis that does not split into equal sections
            (naming ``vsplit``; use ``array_split``).
    """
    a = _tensor(ary)
    if a.ndim < 2:
        raise ValueError(f"vsplit: only works on Tensors with at least 2 axes, got {a.shape}")
    return _split_pieces(a, indices_or_sections, 0, "vsplit", True)


def dsplit(ary, indices_or_sections) -> list:
    """Split depth-wise, along axis 2 (NumPy ``dsplit``; ``ary`` needs at least 3 axes).

    Args:
        ary: Tensor with at least 3 axes, shape ``(a, b, n, ...)``.
        indices_or_sections: An int ``k`` (``n`` divisible by ``k``) or split points along axis 2.

    Returns:
        List of Tensors of ``ary``'s dtype, ``(a, b, n_i, ...)`` each; differentiable.

    Raises:
        ValueError: for fewer than 3 axes, or an axis that does not split into equal sections
            (naming ``dsplit``).
    """
    a = _tensor(ary)
    if a.ndim < 3:
        raise ValueError(f"dsplit: only works on Tensors with at least 3 axes, got {a.shape}")
    return _split_pieces(a, indices_or_sections, 2, "dsplit", True)


# -- diagonals and rotations -----------------------------------------------------------------
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


def fliplr(m) -> Tensor:
    """Reverse the order along axis 1 (NumPy ``fliplr``; needs at least 2 axes).

    Args:
        m: Tensor with at least 2 axes.

    Returns:
        Tensor of ``m``'s shape and dtype; differentiable (the flipped cotangent).

    Raises:
        ValueError: for fewer than 2 axes (naming ``fliplr``).
    """
    m = _tensor(m)
    if m.ndim < 2:
        raise ValueError(f"fliplr: input must have at least 2 axes, got shape {m.shape}")
    return flip(m, 1)


def flipud(m) -> Tensor:
    """Reverse the order along axis 0 (NumPy ``flipud``; needs at least 1 axis).

    Args:
        m: Tensor with at least 1 axis.

    Returns:
        Tensor of ``m``'s shape and dtype; differentiable (the flipped cotangent).

    Raises:
        ValueError: for a 0-d input (naming ``flipud``).
    """
    m = _tensor(m)
    if m.ndim < 1:
        raise ValueError("flipud: input must have at least 1 axis, got shape ()")
    return flip(m, 0)


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


# -- resizing, trimming, inserting, deleting -------------------------------------------------
def resize(a, new_shape) -> Tensor:
    """A Tensor of ``new_shape`` filled with ``a``'s elements in C order, repeated cyclically
    as needed (NumPy ``resize``; zeros when ``a`` or the result is empty).

    Derivative: a gather, so each element's cotangent sums over its copies.

    Raises:
        ValueError: for a negative dimension.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.resize(tnp.asarray([[0, 1], [2, 3]]), (2, 3))
        Tensor([[0, 1, 2],
                [3, 0, 1]], dtype=int64)
    """
    x = ravel(_tensor(a))
    shp = _as_shape(new_shape, "resize")
    if any(s < 0 for s in shp):
        raise ValueError(f"resize: all dimensions of new_shape must be non-negative, got {shp}")
    n = math.prod(shp)
    if x.size == 0 or n == 0:
        return _tconst(_get_backend(x.device).zeros(shp, x.dtype))
    idx = _np.arange(n) % x.size
    return reshape(_index(x, (_Slot(0, False),), (idx,)), shp)


def trim_zeros(filt, trim="fb", axis=None) -> Tensor:
    """Remove the leading and/or trailing slices that are all zero (NumPy ``trim_zeros``,
    NumPy 2.2's ``axis``): the smallest box holding every nonzero element, along the chosen
    axes; an all-zero input trims to size 0 along them.

    Args:
        filt: Tensor of any shape.
        trim: ``"fb"`` (both sides), ``"f"`` (front) or ``"b"`` (back).
        axis: An int, a tuple of ints, or None (all axes).

    Returns:
        Tensor (its size depends on the values; under ``vmap`` every example must keep the
        same size). Differentiable: a gather of the kept elements.

    Raises:
        ValueError: for an unknown ``trim`` or an axis out of range.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.trim_zeros(tnp.asarray([0, 0, 1, 2, 0, 3, 0]))
        Tensor([1, 2, 0, 3], dtype=int64)
    """
    x = _tensor(filt)
    t = trim.lower() if isinstance(trim, str) else trim
    if t not in ("fb", "bf", "f", "b"):
        raise ValueError(f"trim_zeros: trim must be 'fb', 'f' or 'b', got {trim!r}")
    axes = _check_axes(axis, x.ndim, "trim_zeros")
    if not axes:
        return x
    nz = x != 0
    out = x
    for ax in axes:
        others = tuple(i for i in range(x.ndim) if i != ax)
        hit = _ns.any(nz, axis=others) if others else nz
        keep = hit.astype(_np.int64)
        front = _ns.cumsum(keep) > 0
        back = flip(_ns.cumsum(flip(keep, 0)), 0) > 0
        seen = hit | ~hit  # all True
        if "f" in t:
            seen = seen & front
        if "b" in t:
            seen = seen & back
        if "f" not in t or "b" not in t:  # an all-zero input trims fully either way (NumPy)
            seen = seen & _ns.any(nz)
        idx = _ns.nonzero(seen)[0]
        out = _index(out, (slice(None),) * ax + (_Slot(0, False),), (idx,))
    return out


def _static_positions(obj, n, op):
    """``obj`` (int, slice, sequence, array or Tensor of ints or booleans) as a NumPy array of
    positions along an axis of size ``n`` (booleans: their true positions)."""
    from tapegrad.ops.sorting import static_ints

    if isinstance(obj, slice):
        return _np.arange(*obj.indices(n), dtype=_np.intp), False
    if isinstance(obj, Tensor) and obj.dtype == _np.bool_:
        mask = _np.asarray([bool(v) for v in obj]) if obj.is_traced else obj.numpy()
        if mask.ndim != 1:
            raise ValueError(f"{op}: a boolean obj must be 1-D, got shape {mask.shape}")
        return _np.flatnonzero(mask), False
    if not isinstance(obj, Tensor):
        arr = _np.asarray(obj)
        if arr.dtype == _np.bool_:
            if arr.ndim != 1:
                raise ValueError(f"{op}: a boolean obj must be 1-D, got shape {arr.shape}")
            return _np.flatnonzero(arr), False
    arr = static_ints(obj, op, "obj")
    if arr.ndim > 1:
        raise ValueError(f"{op}: obj must be an int or 1-D, got shape {arr.shape}")
    return arr, arr.ndim == 0


def insert(arr, obj, values, axis=None) -> Tensor:
    """``arr`` with ``values`` inserted before the positions ``obj`` along ``axis`` (NumPy
    ``insert``).

    Args:
        arr: Tensor; flattened when ``axis`` is None.
        obj: Where to insert: an int (all of ``values`` goes there, as one block), a slice,
            or a sequence of ints (one value, or one slice of ``values``, per position;
            positions refer to ``arr`` before insertion). Static: a traced Tensor ``obj`` is
            read through ``int()`` (a guard under ``jit``).
        values: Tensor, array or number, cast to ``arr``'s dtype and broadcast as NumPy does.
        axis: The axis to insert along.

    Returns:
        Tensor of ``arr``'s dtype. Differentiable in ``arr`` and ``values`` (a gather from
        their concatenation).

    Raises:
        IndexError: for a position outside ``[-n, n]``.
        ValueError: if ``obj`` has more than one axis, or ``values`` does not broadcast to
            the inserted block.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.insert(tnp.asarray([1.0, 2.0, 3.0]), [1, 1], [8.0, 9.0])
        Tensor([1., 8., 9., 2., 3.], dtype=float32)
    """
    x = _tensor(arr)
    if axis is None:
        x = ravel(x)
        axis = 0
    else:
        axis = _check_axis(axis, x.ndim, "insert")
    n = x.shape[axis]
    positions, scalar = _static_positions(obj, n, "insert")
    v = _ns.astype(values, x.dtype) if isinstance(values, Tensor) else _tconst(
        _get_backend(x.device).asarray(_np.asarray(values, dtype=x.dtype)))
    if v.ndim < x.ndim:
        v = reshape(v, (1,) * (x.ndim - v.ndim) + v.shape)
    if positions.size == 1:
        index = int(positions.reshape(-1)[0])
        if not -n <= index <= n:
            raise IndexError(f"insert: index {index} is out of bounds for axis {axis} with "
                             f"size {n}")
        if index < 0:
            index += n
        if scalar:
            v = moveaxis(v, 0, axis)
        block_shape = x.shape[:axis] + (v.shape[axis],) + x.shape[axis + 1:]
        v = _broadcast_values(v, block_shape)
        pre = (slice(None),) * axis
        return concatenate([x[pre + (slice(None, index),)], v, x[pre + (slice(index, None),)]],
                           axis=axis)
    pos = positions.copy()
    bad = pos[(pos < -n) | (pos > n)]
    if bad.size:
        raise IndexError(f"insert: index {int(bad[0])} is out of bounds for axis {axis} with "
                         f"size {n}")
    pos[pos < 0] += n
    k = pos.size
    order = _np.argsort(pos, kind="stable")
    pos[order] += _np.arange(k)
    src = _np.empty(n + k, dtype=_np.intp)
    old = _np.ones(n + k, dtype=bool)
    old[pos] = False
    src[old] = _np.arange(n)
    src[pos] = n + _np.arange(k)
    v = _broadcast_values(v, x.shape[:axis] + (k,) + x.shape[axis + 1:])
    both = concatenate([x, v], axis=axis)
    return _index(both, (slice(None),) * axis + (_Slot(0, False),), (src,))


def _broadcast_values(v, shape):
    try:
        _np.broadcast_to(_np.broadcast_to(_np.zeros((), _np.int8), v.shape), shape)
    except ValueError:
        raise ValueError(f"insert: values of shape {v.shape} do not broadcast to the inserted "
                         f"block of shape {shape}") from None
    return broadcast_to(v, shape)


def delete(arr, obj, axis=None) -> Tensor:
    """``arr`` without the entries ``obj`` along ``axis`` (NumPy ``delete``).

    Args:
        arr: Tensor; flattened when ``axis`` is None.
        obj: An int, a slice, a sequence/array of ints, a boolean mask of the axis's length,
            or an integer/boolean Tensor (also a traced one: the deletion is then a recorded
            op, so a ``jit`` replay deletes the new positions).
        axis: The axis to delete along.

    Returns:
        Tensor of ``arr``'s dtype. Differentiable: a gather of the kept entries.

    Raises:
        IndexError: for an int position outside ``[-n, n)``.
        ValueError: for a boolean mask of the wrong shape.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.delete(tnp.asarray([[1, 2, 3], [4, 5, 6]]), 1, axis=1)
        Tensor([[1, 3],
                [4, 6]], dtype=int64)
    """
    x = _tensor(arr)
    if axis is None:
        x = ravel(x)
        axis = 0
    else:
        axis = _check_axis(axis, x.ndim, "delete")
    n = x.shape[axis]
    pre = (slice(None),) * axis
    if isinstance(obj, Tensor) and obj.is_traced:
        if obj.dtype == _np.bool_:
            if obj.shape != (n,):
                raise ValueError(f"delete: a boolean obj must have shape ({n},), got {obj.shape}")
            keep = ~obj
        else:
            if obj.dtype.kind not in "iu":
                raise TypeError(f"delete: obj must hold integers or booleans, got {obj.dtype}")
            keep = _tconst(_get_backend(x.device).ones(n, bool)).at[obj].set(False)
        return _index(x, pre + (_Slot(0, False),), (_ns.nonzero(keep)[0],))
    if isinstance(obj, slice):
        keep = _np.ones(n, bool)
        keep[obj] = False
    else:
        vals = obj.numpy() if isinstance(obj, Tensor) else _np.asarray(obj)
        if vals.dtype == _np.bool_:
            if vals.shape != (n,):
                raise ValueError(f"delete: a boolean obj must have shape ({n},), got "
                                 f"{vals.shape}")
            keep = ~vals
        else:
            if vals.size == 0 and vals.dtype.kind == "f":
                vals = vals.astype(_np.intp)
            if vals.dtype.kind not in "iu":
                raise TypeError(f"delete: obj must hold integers or booleans, got {vals.dtype}")
            bad = vals[(vals < -n) | (vals >= n)]
            if bad.size:
                raise IndexError(f"delete: index {int(bad.reshape(-1)[0])} is out of bounds for "
                                 f"axis {axis} with size {n}")
            keep = _np.ones(n, bool)
            keep[vals.reshape(-1)] = False
    return _index(x, pre + (_Slot(0, False),), (_np.flatnonzero(keep),))


# -- index tricks ----------------------------------------------------------------------------
class _AxisConcatenator:
    """NumPy's ``r_``/``c_`` index expressions for Tensors: ``r_[a, b, 1.0, 0:3]`` joins its
    entries along an axis. Slices become ranges (``start:stop:step`` as :func:`arange`,
    ``start:stop:nj`` as ``linspace`` with ``n`` points; Python data becomes float32/int64 as
    in :func:`~tapegrad.numpy.arange`), numbers become one-element arrays, and a leading
    string directive ``"axis"`` or ``"axis,ndmin[,trans1d]"`` sets the joining axis, the least
    number of axes of each entry and where 1-D entries' axis goes (NumPy's rules). The dtype is
    the promotion of the entries (Python numbers weakly typed). Differentiable in Tensor
    entries (a concatenation). The matrix directives ``"r"``/``"c"`` are not supported
    (tapegrad has no matrix class).
    """

    def __init__(self, name, axis=0, ndmin=1, trans1d=-1):
        self._name, self.axis, self.ndmin, self.trans1d = name, axis, ndmin, trans1d

    def __len__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return f"tapegrad.numpy.{self._name}"

    def __getitem__(self, key):
        from tapegrad.numpy._core import array as _array
        from tapegrad.numpy._creation import arange as _arange
        from tapegrad.numpy._creation import linspace as _linspace

        op = self._name
        if isinstance(key, str):
            raise ValueError(f"{op}: the string form builds a numpy.matrix, which tapegrad does "
                             "not have; give the entries")
        if not isinstance(key, tuple):
            key = (key,)
        axis, ndmin, trans1d = self.axis, self.ndmin, self.trans1d
        objs, kinds = [], []
        for k, item in enumerate(key):
            if isinstance(item, slice):
                start = 0 if item.start is None else item.start
                step = 1 if item.step is None else item.step
                if isinstance(step, (complex, _np.complexfloating)):
                    new = _linspace(start, item.stop, num=int(abs(step)))
                else:
                    new = _arange(start, item.stop, step)
                if ndmin > 1:
                    new = _array(new, ndmin=ndmin)
                    if trans1d != -1:
                        new = swapaxes(new, -1, trans1d)
                objs.append(new)
                kinds.append(new.dtype)  # pyright: ignore[reportAttributeAccessIssue]
            elif isinstance(item, str):
                if k != 0:
                    raise ValueError(f"{op}: a string directive must be the first entry")
                if item in ("r", "c"):
                    raise ValueError(f"{op}: the matrix directives 'r'/'c' build numpy.matrix "
                                     "objects, which tapegrad does not have")
                try:
                    vec = [int(v) for v in item.split(",")]
                except ValueError:
                    raise ValueError(f"{op}: unknown directive {item!r}") from None
                if len(vec) > 3:
                    raise ValueError(f"{op}: unknown directive {item!r}")
                axis = vec[0]
                if len(vec) > 1:
                    ndmin = vec[1]
                if len(vec) > 2:
                    trans1d = vec[2]
            elif type(item) in (int, float, complex, bool) or isinstance(item, _np.generic):
                objs.append(item)
                kinds.append(item if type(item) in (int, float, complex, bool) else item.dtype)
            else:
                item_ndim = item.ndim if isinstance(item, Tensor) else _np.ndim(item)
                new = _array(item, ndmin=ndmin)
                if trans1d != -1 and item_ndim < ndmin:
                    k2 = ndmin - item_ndim
                    k1 = trans1d + k2 + 1 if trans1d < 0 else trans1d
                    defaxes = list(range(ndmin))
                    new = transpose(new, defaxes[:k1] + defaxes[k2:] + defaxes[k1:k2])
                objs.append(new)
                kinds.append(new.dtype)
        if not objs:
            raise ValueError(f"{op}: needs at least one entry to join")
        dt = _tg_dtypes.result_type(*kinds)
        objs = [_array(o, dtype=dt, ndmin=ndmin) if not isinstance(o, Tensor)
                else _ns.astype(o, dt) for o in objs]
        return _ops.Concatenate.apply(*objs, axis=axis)


#: Row-wise joining by index expression (NumPy ``r_``): ``r_[x, 0.0, y]``, ``r_[0:5]``,
#: ``r_["0,2", a, b]``; see :class:`_AxisConcatenator`.
r_ = _AxisConcatenator("r_", 0)
#: Column-wise joining by index expression (NumPy ``c_``): 1-D entries become columns of a
#: 2-D result (``r_["-1,2,0", ...]``).
c_ = _AxisConcatenator("c_", -1, ndmin=2, trans1d=0)


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


# -- Tensor methods -------------------------------------------------------------------------
# (``reshape``, ``transpose``, ``T``, ``__getitem__``, ``broadcast_to``, ``flip``, ``roll``,
# ``pad`` and ``cat`` are declared with their primitives in tapegrad.ops.movement.)
def _varargs(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return args


def _method_view(self, *shape):
    """``view(*shape)`` as in PyTorch: same as :meth:`reshape` (a new Tensor; data is immutable,
    so sharing is unobservable)."""
    return reshape(self, _varargs(shape))


def _method_flatten(self, start_dim=0, end_dim=-1):
    """Flatten axes ``start_dim..end_dim`` (inclusive) into one; the defaults give NumPy's
    ``flatten()`` (1-D). A 0-d Tensor becomes shape ``(1,)``."""
    if self.ndim == 0:
        return reshape(self, (1,))
    s = _check_axis(start_dim, self.ndim, "flatten", "start_dim")
    e = _check_axis(end_dim, self.ndim, "flatten", "end_dim")
    if s > e:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    shape = self.shape
    return reshape(self, shape[:s] + (math.prod(shape[s : e + 1]),) + shape[e + 1 :])


def _method_permute(self, *dims):
    """``x.permute(1, 0, 2)`` or ``x.permute((1, 0, 2))``: NumPy's ``transpose(axes)``."""
    return transpose(self, _varargs(dims))


def _method_expand(self, *shape):
    """``expand(*shape)`` as in PyTorch: broadcast to ``shape``; ``-1`` keeps that axis's size.

    New axes may only be added at the front, and must not be -1.
    """
    shape = _as_shape(_varargs(shape), "expand")
    lead = len(shape) - self.ndim
    if lead < 0:
        raise ValueError(
            f"expand: target shape {shape} has fewer axes than the Tensor's shape {self.shape}"
        )
    if any(s == -1 for s in shape[:lead]):
        raise ValueError(f"expand: -1 is not allowed for a new leading axis, got {shape}")
    full = shape[:lead] + tuple(self.shape[i] if s == -1 else s for i, s in enumerate(shape[lead:]))
    return broadcast_to(self, full)


def _method_unsqueeze(self, dim):
    """Insert a size-1 axis at ``dim`` (PyTorch's name for :func:`expand_dims`)."""
    return expand_dims(self, dim)


def _method_repeat(self, repeats, axis=None):
    """NumPy's ``ndarray.repeat`` (each element repeated; not PyTorch's ``repeat``, which is
    :func:`tile`)."""
    return repeat(self, repeats, axis)


_install_methods(
    {
        "view": _method_view,
        "ravel": ravel,
        "flatten": _method_flatten,
        "squeeze": squeeze,
        "unsqueeze": _method_unsqueeze,
        "permute": _method_permute,
        "swapaxes": swapaxes,
        "moveaxis": moveaxis,
        "expand": _method_expand,
        "repeat": _method_repeat,
        "tile": tile,
        "tril": tril,
        "triu": triu,
        "diagonal": diagonal,
        "trace": trace,
        "take": take,
        "gather": _gather,
        "strided_windows": strided_windows,
        "stack": staticmethod(stack),
    }
)
