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

from tapegrad import ops as _ops
from tapegrad.backend import get_backend as _get_backend
from tapegrad.numpy._core import _install_methods, _tensor
from tapegrad.numpy._reduction import sum as _sum
from tapegrad.ops._registry import ns as _ns
from tapegrad.ops.movement import IndexSlot as _Slot
from tapegrad.ops.movement import as_shape as _as_shape
from tapegrad.ops.movement import as_tensor_list as _as_tensor_list
from tapegrad.ops.movement import check_axes as _check_axes
from tapegrad.ops.movement import check_axis as _check_axis
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
        ValueError: if an axis is out of range for the result's ``ndim`` or repeated.
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
def stack(arrays, axis=0) -> Tensor:
    """Join a sequence of equal-shape Tensors along a new axis at position ``axis``.

    Returns:
        Tensor of shape ``shape[:axis] + (len(arrays),) + shape[axis:]``.

    Raises:
        ValueError: for an empty sequence, shapes that differ (naming them) or an axis out of
            range for ``ndim + 1``.

    Example:
        >>> import tapegrad as tg
        >>> tg.Tensor.stack([tg.Tensor([1.0, 2.0]), tg.Tensor([3.0, 4.0])]).shape
        (2, 2)
    """
    xs = _as_tensor_list(arrays, "stack")
    shapes = {a.shape for a in xs}
    if len(shapes) != 1:
        raise ValueError(
            f"stack: all input Tensors must have the same shape, got shapes "
            f"{', '.join(str(a.shape) for a in xs)}"
        )
    ax = _check_axis(axis, xs[0].ndim + 1, "stack")
    return _ops.Concatenate.apply(*[expand_dims(a, ax) for a in xs], axis=ax)


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


def trace(x, offset=0, axis1=0, axis2=1) -> Tensor:
    """Sum along a diagonal (see :func:`diagonal`); the dtype follows NumPy's ``sum``."""
    return _sum(diagonal(x, offset, axis1, axis2), axis=-1)


# -- gathering ------------------------------------------------------------------------------
def _index(x, key, arrays) -> Tensor:
    return _ops.GetItem.apply(x, *arrays, key=key)


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
    """Rows of ``x`` at ``index`` (the seeds' ``Tensor.gather``): ``take(x, index, axis=0)``.

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
    """Square sliding windows over the last two axes (the seeds' ``strided_windows``).

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


# -- Tensor methods -------------------------------------------------------------------------
# (``reshape``, ``transpose``, ``T``, ``__getitem__``, ``broadcast_to``, ``flip``, ``roll``,
# ``pad`` and ``cat`` are declared with their primitives in tapegrad.ops.movement.)
def _varargs(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return args


def _method_view(self, *shape):
    """The seeds' ``view(*shape)``: same as :meth:`reshape` (a new Tensor; data is immutable,
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
    """The seeds' ``expand(*shape)``: broadcast to ``shape``; ``-1`` keeps that axis's size.

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
