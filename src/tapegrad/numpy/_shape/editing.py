"""Padding, resizing, trimming, inserting and deleting: ``pad``, ``resize``,
``trim_zeros``, ``insert`` and ``delete``."""

from __future__ import annotations

import math

import numpy as _np

from tapegrad.core.backend import get_backend as _get_backend
from tapegrad.core.tensor import Tensor
from tapegrad.core.tensor import const as _tconst
from tapegrad.numpy._core import _tensor
from tapegrad.numpy._shape.indexing import _index
from tapegrad.numpy._shape.joining import concatenate
from tapegrad.numpy._shape.reordering import flip
from tapegrad.numpy._shape.reshaping import (
    _axis_or_flat,
    broadcast_to,
    moveaxis,
    ravel,
    reshape,
)
from tapegrad.ops._registry import ns as _ns
from tapegrad.ops.movement import IndexSlot as _Slot
from tapegrad.ops.movement import as_shape as _as_shape
from tapegrad.ops.movement import check_axes as _check_axes

__all__ = [
    "pad",
    "resize",
    "trim_zeros",
    "insert",
    "delete",
]

# -- functions of one primitive, defined with it in tapegrad.ops.movement
pad = _ns.pad

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
    x, axis = _axis_or_flat(arr, axis, "insert")
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
    x, axis = _axis_or_flat(arr, axis, "delete")
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
