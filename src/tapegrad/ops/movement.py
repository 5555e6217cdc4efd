"""Shape and indexing primitives: data movement with no arithmetic on values.

Every op here is linear in its differentiable input, so each ``backward`` is the transpose of
``forward`` written with these same primitives (reshape back, permute back, split what was
concatenated, scatter-add what was gathered). The pairs are:

=================  ===========================================================
forward            backward
=================  ===========================================================
Reshape            Reshape to the input shape
Transpose          Transpose by the inverse permutation
BroadcastTo        (``apply`` sums the cotangent back over broadcast axes)
GetItem            ScatterAdd into zeros (repeated indices accumulate)
ScatterAdd         GetItem
Concatenate        Split at the input boundaries
Split              Concatenate (or a sum of scatters when pieces overlap)
Flip               Flip
Roll               Roll by the negated shift
Pad                slice (constant) or ScatterAdd through the pad's index map (other modes)
SlidingWindow      WindowScatterAdd: every window added back (no loop over elements)
WindowScatterAdd   SlidingWindow
ScatterAddInto     cotangent (x); cotangent gathered at the index (v)
ScatterSet         cotangent zeroed at the index (x); gathered cotangent of the winners (v)
ScatterMul         cotangent times the scattered product (x); product of the others (v)
ScatterMinMax      cotangent to the selected operand(s), ties split equally
DuplicatePairs     none (integer output)
ToDevice           ToDevice back
=================  ===========================================================

The ``ScatterAddInto``/``ScatterSet``/``ScatterMul``/``ScatterMinMax`` ops implement the
functional ``x.at[idx]`` updates of :mod:`tapegrad.numpy.at`.

Public names: each primitive's ``api`` is its ``tapegrad.numpy`` function (``reshape``,
``transpose``/``permute_dims``, ``broadcast_to``, ``concatenate``/``concat``, ``split``,
``flip``, ``roll``, ``pad``, ``sliding_window_view``, ``to_device``). The Tensor methods
declared here are ``reshape``, ``transpose``, ``T``, ``__getitem__``, ``broadcast_to``,
``flip``, ``roll``, ``pad``, ``to_device`` and the static ``Tensor.cat``; the composites built
from these (``squeeze``, ``stack``, ``moveaxis``, ``tile``, ``take``, ...) live in
``tapegrad.numpy``.

Indexing ops take the index as a static *key* (slices, ints, ``None``, ``Ellipsis`` and
:class:`IndexSlot` placeholders) plus the index arrays as positional inputs, so index Tensors
computed inside a traced function (labels, argmax results) are inputs of the tape entry and a
replay on new inputs uses the new indices. :func:`split_index` makes the pair from a NumPy-style
index.
"""

from __future__ import annotations

import math
import operator
from typing import NamedTuple

import numpy as np
from numpy.exceptions import AxisError

from tapegrad.core.backend import device_of as _device_of
from tapegrad.core.backend import get_backend as _get_backend
from tapegrad.core.backend import parse_device as _parse_device
from tapegrad.core.function import Function, Traits
from tapegrad.core.tensor import Tensor
from tapegrad.core.tensor import const as _tconst
from tapegrad.ops._batching import align, axis_rule, batch_all, example_axis, shift_axes
from tapegrad.ops._registry import METHODS as _METHODS
from tapegrad.ops._registry import dtype_arg, expose, tensor_arg
from tapegrad.ops._registry import ns as _ns
from tapegrad.ops.elementwise import AsType, Where

__all__ = [
    "Shift",
    "ToDevice",
    "Reshape",
    "Transpose",
    "BroadcastTo",
    "GetItem",
    "ScatterAdd",
    "ScatterAddInto",
    "ScatterSet",
    "ScatterMul",
    "ScatterMinMax",
    "DuplicatePairs",
    "Concatenate",
    "Split",
    "Flip",
    "Roll",
    "Pad",
    "SlidingWindow",
    "WindowScatterAdd",
    "IndexSlot",
    "split_index",
    "indices_on",
    "resolve_shape",
    "as_shape",
    "as_tensor_list",
    "cast_all",
    "no_out",
    "check_axis",
    "check_axes",
    "split_pieces",
    "swap_axes",
]


# -- helpers ---------------------------------------------------------------------------------
def check_axis(axis, ndim: int, op: str, name: str = "axis") -> int:
    """``axis`` as a non-negative int in ``[0, ndim)``.

    Raises:
        TypeError: if ``axis`` is not an int.
        ValueError: if it is out of range, naming ``op``, the axis and ``ndim``.
    """
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{op}: {name} must be an int, got {axis!r}")
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise AxisError(f"{op}: {name} {axis} is out of range for a Tensor with ndim {ndim}")
    return axis % ndim


def check_axes(axis, ndim: int, op: str, name: str = "axis") -> tuple:
    """``axis`` (None for all, an int, or a sequence of ints) as a tuple of non-negative ints,
    in the order given.

    Raises:
        TypeError: if an entry is not an int.
        ValueError: if an axis is out of range or repeated, naming ``op``.
    """
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = tuple(check_axis(a, ndim, op, name) for a in axes)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated {name} in {tuple(axes)}")
    return out


def resolve_shape(shape, size: int, op: str = "reshape", in_shape=None) -> tuple:
    """Resolve a target shape with at most one ``-1`` for ``size`` elements.

    Raises:
        ValueError: if more than one ``-1`` appears, a size is negative, or the number of
            elements differs, naming ``op`` (and the input shape when given).
    """
    if type(shape) is tuple and all(type(s) is int for s in shape) \
            and min(shape, default=0) >= 0 and math.prod(shape) == size:  # already resolved
        return shape
    shape = tuple(operator.index(s) for s in shape)
    src = f" (from a Tensor of shape {tuple(in_shape)})" if in_shape is not None else ""
    if shape.count(-1) > 1:
        raise ValueError(f"{op}: only one dimension can be -1, got {shape}")
    if any(s < -1 for s in shape):
        raise ValueError(f"{op}: negative dimension in shape {shape}")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or size % known:
            raise ValueError(f"{op}: cannot reshape {size} elements into shape {shape}{src}")
        shape = tuple(size // known if s == -1 else s for s in shape)
    if math.prod(shape) != size:
        raise ValueError(f"{op}: cannot reshape {size} elements into shape {shape}{src}")
    return shape


def as_shape(shape, op: str) -> tuple:
    """``shape`` (an int or a sequence of ints) as a tuple of Python ints.

    Raises:
        TypeError: if it is neither, naming ``op``.
    """
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    try:
        return tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(
            f"{op}: shape must be an int or a sequence of ints, got {shape!r}"
        ) from None


class IndexSlot(NamedTuple):
    """Placeholder in an index key for the ``k``-th index array (a positional input)."""

    k: int
    is_bool: bool

    def __repr__(self) -> str:
        return f"<{'mask' if self.is_bool else 'idx'}{self.k}>"


def _index_array(e):
    """An index array (NumPy, CuPy or integer/boolean Tensor) from a list, array or Tensor."""
    if isinstance(e, Tensor):
        if e.dtype.kind not in "iub":
            raise IndexError(
                f"getitem: Tensors used as indices must have an integer or boolean dtype, got "
                f"shape {e.shape} dtype {e.dtype}"
            )
        return e
    if hasattr(e, "__cuda_array_interface__") and hasattr(e, "dtype"):
        arr = e
    else:
        try:
            arr = np.asarray(e)
        except (TypeError, ValueError) as err:
            raise IndexError(
                f"getitem: cannot use {type(e).__name__} as an index ({err})"
            ) from None
        if arr.size == 0 and arr.dtype.kind == "f":  # x[[]] is an empty integer index
            arr = arr.astype(np.intp)
    if arr.dtype.kind not in "iub":
        raise IndexError(
            f"getitem: arrays used as indices must have an integer or boolean dtype, got dtype "
            f"{arr.dtype}"
        )
    return arr


def _static_int(v):
    return None if v is None else operator.index(v)


def indices_on(arrays, device: str) -> tuple:
    """Index arrays for a Tensor on ``device``: integer and boolean index Tensors on the CPU
    join ``device``, as PyTorch takes CPU index tensors for a CUDA tensor (so that
    ``x[tnp.arange(n), y]`` runs on a GPU); everything else is returned as it is."""
    if device == "cpu":
        return tuple(arrays)
    return tuple(a.to_device(device) if type(a) is Tensor and a.device == "cpu" else a
                 for a in arrays)


def split_index(idx, device: str = "cpu") -> tuple:
    """Split a NumPy-style index into ``(key, arrays)``.

    ``key`` is a tuple of slices, ints, ``None``, ``Ellipsis`` and :class:`IndexSlot`
    placeholders; ``arrays`` holds the index arrays in slot order (integer or boolean Tensors,
    NumPy or CuPy arrays). Python lists, tuples inside the index tuple (``x[(0, 1), (2, 3)]``)
    and bools become NumPy arrays, as NumPy reads them.
    Index Tensors on the CPU join ``device``, the device of the indexed Tensor (as PyTorch
    takes CPU index tensors for a CUDA tensor: ``x[tnp.arange(n), y]`` runs on a GPU).

    Raises:
        IndexError: for an index of a kind NumPy rejects (float, string, ...), naming getitem.
    """
    if not isinstance(idx, tuple):
        idx = (idx,)
    key, arrays = [], []
    for e in idx:
        if e is None or e is Ellipsis:
            key.append(e)
        elif isinstance(e, slice):
            key.append(slice(_static_int(e.start), _static_int(e.stop), _static_int(e.step)))
        elif isinstance(e, (bool, np.bool_)):
            arrays.append(np.asarray(bool(e)))
            key.append(IndexSlot(len(arrays) - 1, True))
        elif isinstance(e, (int, np.integer)):
            key.append(int(e))
        elif (isinstance(e, (Tensor, list, tuple, np.ndarray))
              or hasattr(e, "__cuda_array_interface__")):  # a tuple inside the index: an array
            arr = _index_array(e)
            arrays.append(arr)
            key.append(IndexSlot(len(arrays) - 1, arr.dtype.kind == "b"))  # pyright: ignore[reportAttributeAccessIssue, reportMissingImports]
        else:
            raise IndexError(
                "getitem: only integers, slices (:), ellipsis (...), None and integer or boolean "
                f"arrays/Tensors are valid indices, got {type(e).__name__} {e!r}"
            )
    return tuple(key), indices_on(arrays, device)


def _build_index(key, arrays, xp):
    if not arrays:
        return key
    out = []
    for e in key:
        if type(e) is IndexSlot:
            a = arrays[e.k]
            out.append(a if xp is np or not isinstance(a, np.ndarray) else xp.asarray(a))
        else:
            out.append(e)
    return tuple(out)


def _indexer(key):
    """``x[key]`` for a basic ``key`` (:class:`GetItem`'s ``array_fn`` trait: valid for every
    ``x`` of the recorded shape); None for index arrays, whose values ``forward`` checks on
    every call (an out-of-bounds index is an IndexError naming getitem)."""
    return None if _has_advanced(key) else operator.itemgetter(key)


def _has_advanced(key) -> bool:
    return any(type(e) is IndexSlot for e in key)


def _ufunc_at(xp, name: str, out, idx, values, op: str):
    """``xp.<name>.at(out, idx, values)`` (unbuffered, repeated indices all apply).

    ``values`` is broadcast to the indexed shape first: NumPy 2.x's ``ufunc.at`` reads
    implicitly broadcast values wrongly when an index array has more than one dimension.
    """
    sub = xp.broadcast_to(xp.zeros((), dtype=np.int8), out.shape)[idx].shape
    if np.shape(values) != sub:
        values = xp.broadcast_to(values, sub)
    at = getattr(getattr(xp, name), "at", None)
    if at is not None:
        at(out, idx, values)
        return
    import cupyx  # pragma: no cover - GPU only  # pyright: ignore[reportMissingImports]

    fn = {  # pragma: no cover - GPU only
        "add": cupyx.scatter_add,
        "maximum": cupyx.scatter_max,
        "minimum": cupyx.scatter_min,
    }.get(name)
    if fn is None:  # pragma: no cover - GPU only
        raise NotImplementedError(f"{op}: {name}.at is not available on this backend")
    fn(out, idx, values)  # pragma: no cover - GPU only


def _index_layout(key, nds, ex_ndim: int):
    """How indexing one example (``ex_ndim`` axes) with ``key`` lays out its result, ``nds``
    being each index array's number of axes: ``(n, k, q)`` with ``n`` the result's axes, ``k``
    those the advanced indices make (0: none) and ``q`` the result axes before them where NumPy
    keeps them in place (``None`` where they are separated by a slice, ``...`` or ``None`` and
    so come first). Integers count as advanced indices when an array index is present."""
    slots = [e for e in key if type(e) is IndexSlot]
    k = max([1 if e.is_bool else nds[e.k] for e in slots], default=0)
    consumed = sum((nds[e.k] if e.is_bool else 1) if type(e) is IndexSlot else
                   (1 if isinstance(e, (int, slice)) else 0) for e in key)
    n = k + sum(1 for e in key if isinstance(e, slice) or e is None) + ex_ndim - consumed
    if not slots:
        return n, 0, 0
    pos = [i for i, e in enumerate(key) if type(e) is IndexSlot or type(e) is int]
    if pos != list(range(pos[0], pos[-1] + 1)):
        return n, k, None
    q = sum(ex_ndim - consumed if e is Ellipsis else 1 for e in key[:pos[0]])
    return n, k, q


def _batched_masks_as_indices(key, arrays, arr_batched, size):
    """``key`` and its index arrays with each per-example boolean mask replaced by the integer
    positions it selects (one index array per mask axis, batch first), which index the same
    elements when every example's mask selects equally many.

    Raises:
        ValueError: if the examples' masks select different numbers of elements.
    """
    if not any(type(e) is IndexSlot and e.is_bool and arr_batched[e.k] for e in key):
        return key, arrays, arr_batched
    new_key, new_arrays, new_batched = [], [], []
    for e in key:
        if type(e) is not IndexSlot:
            new_key.append(e)
            continue
        a = arrays[e.k]
        if not (e.is_bool and arr_batched[e.k]):
            new_key.append(IndexSlot(len(new_arrays), e.is_bool))
            new_arrays.append(a)
            new_batched.append(arr_batched[e.k])
            continue
        mask = a._concrete() if isinstance(a, Tensor) else a
        xp = _get_backend(_device_of(mask))
        flat = mask.reshape((size, -1))
        counts = flat.sum(axis=1)
        if size and bool((counts != counts[0]).any()):
            raise ValueError(
                "getitem under vmap: a boolean mask that differs between examples selects a "
                f"different number of elements in each ({int(counts.min())} to "
                f"{int(counts.max())}); use tnp.where(mask, x, 0) instead"
            )
        c = int(counts[0]) if size else 0
        if mask.ndim == 1:  # a 0-d mask per example, the same in each: True is a new axis
            if c != 1:
                raise ValueError("getitem under vmap: a per-example 0-d boolean index that "
                                 "is False is not supported; use tnp.where instead")
            new_key.append(None)
            continue
        _, pos = xp.nonzero(flat)  # row-major: each example's positions in order
        pos = pos.reshape((size, c))
        for ix in xp.unravel_index(pos, mask.shape[1:]):
            new_key.append(IndexSlot(len(new_arrays), False))
            new_arrays.append(ix.astype(np.int64))
            new_batched.append(True)
    return tuple(new_key), tuple(new_arrays), tuple(new_batched)


def batch_index(ex_ndim: int, arrays, arr_batched, key, size):
    """The batched form of indexing each example (``ex_ndim`` axes; the batch on axis 0 of
    the indexed array) with ``key`` and
    the index ``arrays`` (``arr_batched[i]``: whether ``arrays[i]`` holds one index array per
    example, on axis 0). Used by the batching rules of :class:`GetItem` and the scatters.

    Returns ``(key, arrays, perm)``: indexing the batch with the new key and arrays gives the
    per-example results with the batch axis at the front when ``perm`` is ``None``, otherwise
    after ``transpose(result, perm)``.

    Raises:
        ValueError: for a boolean mask that differs between examples (each example would
            select a different number of elements).
    """
    key, arrays, arr_batched = _batched_masks_as_indices(key, arrays, arr_batched, size)
    nds = [a.ndim - 1 if b else np.ndim(a) for a, b in zip(arrays, arr_batched)]
    n, k, q = _index_layout(key, nds, ex_ndim)
    if not any(arr_batched):  # the same index for every example: a leading ':'
        new_key = (slice(None),) + tuple(key)
        if k and q is None:  # separated advanced indices come first: (adv, batch, rest)
            return new_key, tuple(arrays), (k,) + tuple(range(k)) + tuple(range(k + 1, n + 1))
        return new_key, tuple(arrays), None
    # Example-specific indices: an index of the example in front joins the advanced indices,
    # which then come first: (batch, adv, rest).
    new_key, new_arrays = [IndexSlot(0, False)], [np.arange(size).reshape((size,) + (1,) * k)]
    for e in key:
        if type(e) is not IndexSlot:
            new_key.append(e)
            continue
        a = arrays[e.k]
        if e.is_bool:  # the same mask for every example: its positions, one array per axis
            mask = a._concrete() if isinstance(a, Tensor) else a
            if not mask.ndim:
                raise ValueError("getitem under vmap: a 0-d boolean index together with "
                                 "per-example index arrays is not supported; use None")
            for nz in mask.nonzero():
                new_key.append(IndexSlot(len(new_arrays), False))
                new_arrays.append(nz)
            continue
        if arr_batched[e.k] and nds[e.k] < k:
            a = a.reshape((a.shape[0],) + (1,) * (k - nds[e.k]) + tuple(a.shape[1:]))
        new_key.append(IndexSlot(len(new_arrays), False))
        new_arrays.append(a)
    if not q:
        return tuple(new_key), tuple(new_arrays), None
    perm = ((0,) + tuple(range(1 + k, 1 + k + q)) + tuple(range(1, 1 + k))
            + tuple(range(1 + k + q, n + 1)))
    return tuple(new_key), tuple(new_arrays), perm


def _indexed_shape(shape, key, arrays) -> tuple:
    """The shape of ``zeros(shape)[key]`` (integer index arrays by their shapes, masks by
    their values)."""
    dummy = np.broadcast_to(np.zeros((), np.int8), tuple(shape))
    idx = []
    for e in key:
        if type(e) is IndexSlot:
            a = arrays[e.k]
            if e.is_bool:
                idx.append(np.asarray(a._concrete() if isinstance(a, Tensor) else a))
            else:
                idx.append(np.zeros(tuple(a.shape), np.intp))
        else:
            idx.append(e)
    return dummy[tuple(idx)].shape


def _batch_gather(x, arrays, batched, key, size):
    """The batching rule of :class:`GetItem` (``batched``: x's flag, then the arrays')."""
    if not batched[0]:
        x = x.reshape((1,) + x.shape).broadcast_to((size,) + x.shape)
    new_key, new_arrays, perm = batch_index(x.ndim - 1, arrays, batched[1:], key, size)
    out = GetItem.apply(x, *new_arrays, key=new_key)
    return out if perm is None else Transpose.apply(out, axes=perm)


def _batch_scatter(cls, args, batched, size, key, **params):
    """The batching rule of the scatters ``cls(x, v, *arrays, key)``: each example's ``x`` gets
    its ``v`` at its index. ``v`` is laid out like the batched index's result."""
    x, v, *arrays = args
    if not batched[0]:
        x = x.reshape((1,) + x.shape).broadcast_to((size,) + x.shape)
    new_key, new_arrays, perm = batch_index(x.ndim - 1, arrays, batched[2:], key, size)
    v = _batch_values(v, batched[1], size, _indexed_shape(x.shape, new_key, new_arrays), perm)
    return cls.apply(x, v, *new_arrays, key=new_key, **params)


def _batch_values(v, v_batched, size, raw_shape, perm):
    """Per-example values ``v`` laid out for a batched scatter whose indexed region has shape
    ``raw_shape`` (the batch at the front after ``transpose(., perm)``)."""
    if perm is None and not v_batched:
        return v  # broadcasts against (batch, ...) from the right
    canon = raw_shape if perm is None else tuple(raw_shape[p] for p in perm)
    if not isinstance(v, Tensor):
        v = Tensor(v)
    if v_batched:
        pe = v.ndim - 1
        v = v.reshape((size,) + (1,) * (len(canon) - 1 - pe) + v.shape[1:])
    else:
        v = v.reshape((1,) * (len(canon) - v.ndim) + v.shape)
    v = v.broadcast_to(canon)
    if perm is None:
        return v
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return Transpose.apply(v, axes=tuple(inv))


class _MovementFunction(Function):
    """Base of this module's Functions: their forward rules raise errors that already name the
    op and the shapes, and those pass through unchanged."""

    @classmethod
    def _explain(cls, e, arrays, params=None):
        msg = str(e)
        if msg.startswith(cls._name() + ":") or msg.startswith("at["):
            return type(e)(msg)
        return super()._explain(e, arrays, params)


# -- reshape, transpose, broadcast -----------------------------------------------------------
@expose
class Reshape(_MovementFunction):
    """Reshape to ``shape`` (one dimension may be -1), C order. Backward: reshape back.

    Shapes: ``(*in_shape) -> shape`` with ``prod(in_shape) == prod(shape)``.

    Raises:
        ValueError: if the element counts differ or ``shape`` has more than one -1, naming
            both shapes.
    """

    traits = Traits(view=True, rearranges=True)

    oper = "reshape"
    names = ("reshape",)

    @staticmethod
    def batch(args, batched, size):
        x, shape = args
        ex = x.shape[1:]
        return Reshape.apply(x, (size,) + resolve_shape(shape, math.prod(ex), "reshape", ex))

    @staticmethod
    def forward(ctx, x, shape):
        shape = resolve_shape(shape, x.size, "reshape", x.shape)
        ctx.in_shape = x.shape
        return x.reshape(shape)

    @staticmethod
    def api(x, shape, *, copy=None) -> Tensor:
        """Reshape to ``shape`` in C order (an int or tuple; one entry may be -1).

        Args:
            x: Tensor of any shape.
            shape: Target shape with the same number of elements; a single -1 is inferred.
            copy: ``None``, ``True`` or ``False`` (NumPy 2.1's and the array API's keyword).
                Tensors are immutable, so whether the result shares ``x``'s memory cannot be
                observed: every value gives the same Tensor, and ``copy=False`` never fails.

        Returns:
            Tensor of shape ``shape`` and ``x``'s dtype.

        Raises:
            ValueError: if the number of elements differs or more than one -1 is given, naming
                both shapes.
            TypeError: if ``copy`` is not ``None`` or a bool.

        Example:
            >>> import tapegrad.numpy as tnp
            >>> tnp.reshape(tnp.asarray([1.0, 2.0, 3.0, 4.0]), (2, -1)).shape
            (2, 2)
        """
        x = x if type(x) is Tensor else tensor_arg(x)
        shape = as_shape(shape, "reshape")
        if copy is not None and copy is not True and copy is not False:
            raise TypeError(f"reshape: copy must be None, True or False, got {copy!r}")
        if shape == x.shape:
            return x
        return Reshape.apply(x, shape)

    @staticmethod
    def backward(ctx, g):
        return Reshape.apply(g, ctx.in_shape), None

    @classmethod
    def output_shape(cls, shape, new_shape):
        return resolve_shape(new_shape, math.prod(shape), "reshape", shape)

    @staticmethod
    def jvp(ctx, t, _shape):
        return Reshape.apply(t, tuple(ctx.out_avals[0][0]))


def _permutation(axes, ndim: int, shape, op: str = "transpose") -> tuple:
    if axes is None:
        return tuple(range(ndim))[::-1]
    axes = tuple(axes)
    if len(axes) != ndim:
        raise ValueError(
            f"{op}: axes {axes} do not match a Tensor of shape {tuple(shape)} (ndim {ndim}); "
            f"give a permutation of all {ndim} axes"
        )
    perm = check_axes(axes, ndim, op, "axis")
    return perm


def _axes_order(ndim, axes=None) -> tuple:
    """The permutation :class:`Transpose` applies to an input of ``ndim`` axes (its
    ``permutation`` trait, for ``jit``'s layout pass)."""
    return tuple(reversed(range(ndim))) if axes is None else tuple(a % ndim for a in axes)


@expose
class Transpose(_MovementFunction):
    """Permute axes: ``out.shape[i] == x.shape[axes[i]]``; ``axes=None`` reverses them.
    Backward: transpose by the inverse permutation.

    Raises:
        ValueError: if ``axes`` is not a permutation of ``range(ndim)`` (wrong length, out of
            range or repeated), naming the axes and the shape.
    """

    @staticmethod
    def batch(args, batched, size, axes=None):
        x = args[0]
        nd = x.ndim - 1
        if axes is None:
            return Transpose.apply(x, axes=(0,) + tuple(reversed(range(1, nd + 1))))
        return Transpose.apply(x, axes=(0,) + tuple(example_axis(a, nd, "transpose") + 1
                                                    for a in axes))

    traits = Traits(view=True, rearranges=True, permutation=_axes_order)

    oper = "transpose"
    names = ("transpose", "permute_dims")

    @staticmethod
    def forward(ctx, x, axes=None):
        axes = _permutation(axes, x.ndim, x.shape)
        ctx.axes = axes
        return x.transpose(axes)

    @staticmethod
    def api(x, axes=None) -> Tensor:
        """Permute the axes: ``out.shape[i] == x.shape[axes[i]]``; ``axes=None`` reverses them.
        ``permute_dims`` is NumPy 2's name for the same function.

        Raises:
            ValueError: if ``axes`` is not a permutation of ``range(x.ndim)``, naming the axes
                and the shape.
        """
        x = x if type(x) is Tensor else tensor_arg(x)
        if axes is not None:
            axes = tuple(operator.index(a) for a in axes)
            if axes == tuple(range(x.ndim)):
                return x
        elif x.ndim < 2:
            return x
        return Transpose.apply(x, axes=axes)

    @staticmethod
    def backward(ctx, g):
        inv = tuple(int(i) for i in np.argsort(ctx.axes))
        return Transpose.apply(g, axes=inv)

    @classmethod
    def output_shape(cls, shape, axes=None):
        shape = tuple(shape)
        return tuple(shape[a] for a in _permutation(axes, len(shape), shape))

    @staticmethod
    def jvp(ctx, t):
        return Transpose.apply(t, axes=ctx.axes)


def _broadcast_to_shape(shape, new_shape, op="broadcast_to") -> tuple:
    shape, new_shape = tuple(shape), tuple(new_shape)
    lead = len(new_shape) - len(shape)
    ok = lead >= 0 and all(s == n or s == 1 for s, n in zip(shape, new_shape[lead:]))
    if not ok or any(n < 0 for n in new_shape):
        raise ValueError(
            f"{op}: cannot broadcast a Tensor of shape {shape} to shape {new_shape} (NumPy "
            "broadcasting: trailing dimensions must be equal or 1, and the target may only add "
            "leading dimensions)"
        )
    return new_shape


@expose
class BroadcastTo(_MovementFunction):
    """Broadcast to ``shape`` (NumPy rules, read-only view). Backward: ``apply`` sums the
    cotangent back over the broadcast axes.

    Raises:
        ValueError: if ``x``'s shape does not broadcast to ``shape``, naming both.
    """

    @staticmethod
    def batch(args, batched, size, **params):
        x, shape = args
        x = align([x], [True], len(shape))[0]
        return BroadcastTo.apply(x, (x.shape[0],) + tuple(shape))

    traits = Traits(view="readonly", rearranges=True)

    oper = "broadcast_to"
    names = ("broadcast_to",)
    methods = ("broadcast_to",)

    @staticmethod
    def forward(ctx, x, shape):
        shape = _broadcast_to_shape(x.shape, shape)
        return ctx.backend.broadcast_to(x, shape)

    @staticmethod
    def api(x, shape) -> Tensor:
        """Broadcast to ``shape`` (NumPy rules: only size-1 or missing leading axes grow).

        Gradient: the cotangent summed back over the broadcast axes.

        Raises:
            ValueError: if ``x``'s shape does not broadcast to ``shape``, naming both.
        """
        x = x if type(x) is Tensor else tensor_arg(x)
        shape = as_shape(shape, "broadcast_to")
        if x.shape == shape:
            return x
        return BroadcastTo.apply(x, shape)

    @staticmethod
    def backward(ctx, g):
        return g, None

    @classmethod
    def output_shape(cls, shape, new_shape):
        return _broadcast_to_shape(shape, new_shape)

    @staticmethod
    def jvp(ctx, t, _shape):
        return BroadcastTo.apply(t, tuple(ctx.out_avals[0][0]))


# -- indexing ---------------------------------------------------------------------------------
def _keep_index(ctx, key, index_arrays, *saved) -> None:
    """What an indexing op keeps for its backward: the static index ``key`` (``ctx.key``), and
    ``saved`` then the index arrays as saved Tensors (traced by an outer transform)."""
    ctx.key = key
    ctx.save_for_backward(*saved, *index_arrays)


@expose
class GetItem(_MovementFunction):
    """``x[idx]`` with NumPy's basic and advanced indexing (slices with any step, ints,
    ``None``, ``Ellipsis``, integer arrays, boolean masks) given as ``key`` plus index arrays.

    Backward: :class:`ScatterAdd` of the cotangent into zeros of ``x``'s shape; an element read
    several times (repeated indices, overlapping windows) accumulates all its cotangents.

    Raises:
        IndexError: as NumPy (index out of bounds, wrong mask shape, too many indices), with
            the message prefixed by ``getitem:`` and ``x``'s shape.
    """
    traits = Traits(view=True, array_fn=_indexer)

    oper = "getitem"
    methods = ("__getitem__",)

    @staticmethod
    def batch(args, batched, size, key):
        return _batch_gather(args[0], args[1:], batched, key, size)

    @staticmethod
    def api(x, idx) -> Tensor:
        """``x[idx]`` with NumPy's basic and advanced indexing (slices, ints, ``None``, ``...``,
        integer arrays/Tensors, boolean masks). Index Tensors are inputs of the tape entry, so a
        replay uses new indices.

        Gradient: the cotangent scattered back (added) to the positions read; an element read
        several times accumulates all its cotangents.

        Raises:
            IndexError: for an index NumPy rejects (out of bounds, wrong mask shape, a float or
                string index), naming getitem and ``x``'s shape.
        """
        if type(idx) is int or type(idx) is slice:  # fast path (iteration, simple slices)
            if type(idx) is slice:
                idx = slice(
                    None if idx.start is None else operator.index(idx.start),
                    None if idx.stop is None else operator.index(idx.stop),
                    None if idx.step is None else operator.index(idx.step),
                )
            return GetItem.apply(x, key=(idx,))
        key, arrays = split_index(idx, x.device)
        return GetItem.apply(x, *arrays, key=key)

    @staticmethod
    def forward(ctx, x, *index_arrays, key):
        idx = _build_index(key, index_arrays, ctx.backend)
        try:
            out = x[idx]
        except IndexError as e:
            raise IndexError(f"getitem: {e} (indexing a Tensor of shape {x.shape})") from None
        ctx.in_shape = x.shape
        _keep_index(ctx, key, index_arrays)
        return out

    @staticmethod
    def backward(ctx, g):
        arrays = ctx.saved_tensors
        gx = ScatterAdd.apply(g, *arrays, shape=ctx.in_shape, key=ctx.key)
        return (gx,) + (None,) * len(arrays)

    @classmethod
    def output_shape(cls, shape, *index_arrays, key):
        """Output shape without running the op; each index array is given as its shape (a
        Tensor's) or as its value (a NumPy array).

        Raises:
            NotImplementedError: for a boolean-mask Tensor given by shape only (the output
                shape depends on the mask's values).
            IndexError: for an int index out of range, as NumPy.
        """
        dummy = np.broadcast_to(np.zeros((), np.int8), tuple(shape))
        idx = []
        for e in key:
            if type(e) is IndexSlot:
                a = index_arrays[e.k]
                if hasattr(a, "shape") and hasattr(a, "dtype"):
                    idx.append(np.asarray(a))
                elif e.is_bool:
                    raise NotImplementedError(
                        "getitem: the output shape of boolean-mask indexing depends on the "
                        "mask's values, not only on its shape"
                    )
                else:
                    idx.append(np.zeros(tuple(a), np.intp))
            else:
                idx.append(e)
        try:
            return dummy[tuple(idx)].shape
        except IndexError as err:
            raise IndexError(
                f"getitem: {err} (indexing a Tensor of shape {tuple(shape)})"
            ) from None

    @classmethod
    def output_dtype(cls, dtype, *index_dtypes, key):
        return np.dtype(dtype)

    @staticmethod
    def jvp(ctx, t, *_index_tangents):
        return GetItem.apply(t, *ctx.saved_tensors, key=ctx.key)


class ScatterAdd(_MovementFunction):
    """``zeros(shape)`` with ``g`` added at ``key``/``index_arrays`` (``g`` broadcast to the
    indexed shape); repeated indices accumulate (``numpy.add.at``).

    The transpose of :class:`GetItem`; its own backward is :class:`GetItem`.
    """

    oper = "scatter_add"

    @staticmethod
    def batch(args, batched, size, shape, key):
        g, *arrays = args
        new_key, new_arrays, perm = batch_index(len(shape), arrays, batched[1:], key, size)
        raw = _indexed_shape((size,) + tuple(shape), new_key, new_arrays)
        g = _batch_values(g, batched[0], size, raw, perm)
        return ScatterAdd.apply(g, *new_arrays, shape=(size,) + tuple(shape), key=new_key)

    @staticmethod
    def forward(ctx, g, *index_arrays, shape, key):
        xp = ctx.backend
        idx = _build_index(key, index_arrays, xp)
        out = xp.zeros(shape, dtype=g.dtype)
        # combine=None: basic indexing never repeats an element, so it is a plain write
        _write_at(xp, out, idx, g, key, "add", None, "scatter_add", "add",
                  (f"target shape {tuple(shape)}", f"into shape {tuple(shape)}"))
        _keep_index(ctx, key, index_arrays)
        return out

    @staticmethod
    def backward(ctx, g):
        arrays = ctx.saved_tensors
        return (GetItem.apply(g, *arrays, key=ctx.key),) + (None,) * len(arrays)

    @classmethod
    def output_shape(cls, g_shape, *index_shapes, shape, key):
        return tuple(shape)

    @classmethod
    def output_dtype(cls, dtype, *index_dtypes, shape, key):
        return np.dtype(dtype)

    @staticmethod
    def jvp(ctx, t, *_index_tangents):
        return ScatterAdd.apply(t, *ctx.saved_tensors, shape=tuple(ctx.out_avals[0][0]),
                                key=ctx.key)


#: The functional updates ``x.at[idx].<name>(v)``: name -> (the verb of their error
#: messages, the ufunc that combines an element with ``v`` (None: ``v`` replaces it), the
#: operator for it on a basic index (None: the backend's ufunc)).
_UPDATES = {"add": ("add", "add", operator.add), "set": ("write", None, None),
            "multiply": ("apply", "multiply", operator.mul),
            "max": ("apply", "maximum", None), "min": ("apply", "minimum", None)}


def _write_at(xp, out, idx, v, key, ufunc, combine, label: str, verb: str, target: tuple):
    """Write ``v`` into ``out`` at ``idx`` (the index ``key`` describes), in place: an
    advanced index (which may repeat an element) through NumPy's unbuffered ``ufunc.at``
    (``ufunc`` None: a plain write), a basic one as ``combine(out[idx], v)`` (None: ``v``).

    Raises:
        IndexError: for an index out of range, as ``"<label>: <error> (<target[0]>)"``.
        ValueError: for values that do not broadcast to the indexed shape, naming ``verb``
            and the target as ``target[1]``.
    """
    try:
        if ufunc is not None and _has_advanced(key):
            _ufunc_at(xp, ufunc, out, idx, v, label)
        elif combine is None:
            out[idx] = v
        else:
            out[idx] = combine(out[idx], v)
    except IndexError as e:
        raise IndexError(f"{label}: {e} ({target[0]})") from None
    except ValueError as e:
        raise ValueError(
            f"{label}: cannot {verb} values of shape {np.shape(v)} at the index "
            f"{target[1]} ({e})"
        ) from None


def _update(ctx, x, v, index_arrays, key, name: str):
    """Forward of ``x.at[idx].<name>(v)`` (add, set, multiply, max or min): a copy of ``x``
    updated at the index (unbuffered, with NumPy's ``ufunc.at``, where an advanced index may
    repeat an element).

    Raises:
        IndexError: for an index out of range, naming the update and ``x``'s shape.
        ValueError: for values that do not broadcast to the indexed shape.
    """
    xp = ctx.backend
    verb, ufunc, op = _UPDATES[name]
    combine = op if op is not None or ufunc is None else getattr(xp, ufunc)
    idx = _build_index(key, index_arrays, xp)
    out = x.copy()
    _write_at(xp, out, idx, v, key, ufunc, combine, f"at[].{name}", verb,
              (f"Tensor of shape {x.shape}", f"of a Tensor of shape {x.shape}"))
    return out


class _ScatterInto:
    """What the functional updates ``x.at[idx].add/set/multiply`` share (a base listed before
    :class:`_MovementFunction`): the forward (the subclass's ``update``, with ``x`` and ``v``
    kept for backward where ``keeps_operands``), the batching rule (:func:`_batch_scatter`),
    and a result of ``x``'s shape and dtype."""

    update = "add"  # a key of _UPDATES
    keeps_operands = False

    @classmethod
    def forward(cls, ctx, x, v, *index_arrays, key):
        out = _update(ctx, x, v, index_arrays, key, cls.update)
        _keep_index(ctx, key, index_arrays, *((x, v) if cls.keeps_operands else ()))
        return out

    batch = classmethod(_batch_scatter)

    @classmethod
    def output_shape(cls, shape, v_shape, *index_shapes, key):
        return tuple(shape)

    @classmethod
    def output_dtype(cls, dtype, v_dtype, *index_dtypes, key):
        return np.dtype(dtype)


class ScatterAddInto(_ScatterInto, _MovementFunction):
    """``x`` with ``x[idx] += v`` applied unbuffered (``numpy.add.at`` on a copy): every
    repeated index adds again. Backward: ``x`` gets the cotangent, ``v`` the cotangent gathered
    at the index (``apply`` sums it over ``v``'s broadcasting)."""

    oper = "scatter_add_into"
    update = "add"

    @staticmethod
    def backward(ctx, g):
        arrays = ctx.saved_tensors
        gv = GetItem.apply(g, *arrays, key=ctx.key) if ctx.needs_input_grad[1] else None
        return (g, gv) + (None,) * len(arrays)


def _const_like(fill, shape, dtype, like: Tensor) -> Tensor:
    xp = _get_backend(like.device)
    return _tconst(xp.full(shape, fill, dtype=dtype))


class ScatterSet(_ScatterInto, _MovementFunction):
    """``x`` with ``x[idx] = v`` (``v`` broadcast to the indexed shape), as a new array. With
    repeated indices the last write wins (NumPy assignment order).

    Backward: ``x`` gets the cotangent zeroed at the index; ``v`` gets the cotangent gathered
    at the index, only for the writes that won (``apply`` sums it over ``v``'s broadcasting).
    The winners are found by scattering each write's position number and reading it back (as
    JAX's scatter rule does), all with tapegrad ops, so the rule differentiates again.
    """

    oper = "scatter_set"
    update = "set"

    @staticmethod
    def backward(ctx, g):
        arrays = ctx.saved_tensors
        key = ctx.key
        nx, nv = ctx.needs_input_grad[:2]
        gx = gv = None
        if nx:
            ones = _const_like(True, g.shape, np.bool_, g)
            keep = ScatterSet.apply(ones, False, *arrays, key=key)
            gx = Where.apply(keep, g, 0.0)
        if nv:
            gv = GetItem.apply(g, *arrays, key=key)
            if _has_advanced(key) and gv.size:
                xp = _get_backend(g.device)
                ids = _tconst(xp.arange(gv.size, dtype=np.int64).reshape(gv.shape))
                minus = _const_like(-1, g.shape, np.int64, g)
                written = ScatterSet.apply(minus, ids, *arrays, key=key)
                won = GetItem.apply(written, *arrays, key=key) == ids
                gv = Where.apply(won, gv, 0.0)
        return (gx, gv) + (None,) * len(arrays)


class ScatterMul(_ScatterInto, _MovementFunction):
    """``x`` with ``x[idx] *= v`` applied unbuffered (``numpy.multiply.at``): every repeated
    index multiplies again.

    Backward: ``gx = g * M`` with ``M`` the product scattered into ones; for ``v``, each write
    ``j`` at position ``p`` gets ``g[p] * x[p] * prod(v_k, k != j at p)``. The product of the
    other writes is a segmented scan: the writes sorted by the element they land on, then
    exclusive products from both ends within each run of equal elements (recursive doubling,
    Hillis and Steele 1986), with no division, so it is exact at zeros and to every order, and
    every shape in it is fixed by the index's shape (it batches under ``vmap`` like any op).
    """

    oper = "scatter_mul"
    update = "multiply"
    keeps_operands = True

    @staticmethod
    def backward(ctx, g):
        x, v, *arrays = ctx.saved_tensors
        key = ctx.key
        nx, nv = ctx.needs_input_grad[:2]
        gx = gv = None
        if nx:
            ones = _const_like(1, x.shape, x.dtype, x)
            gx = g * ScatterMul.apply(ones, v, *arrays, key=key)
        if nv:
            gxv = GetItem.apply(g * x, *arrays, key=key)
            if not _has_advanced(key):
                gv = gxv
            else:
                gv = gxv * _others_product(BroadcastTo.api(v, gxv.shape), x, arrays, key)
        return (gx, gv) + (None,) * len(arrays)


def _single_axis(axis, ndim: int, op: str) -> int:
    """One axis (an int) as a non-negative int; ``ValueError`` if out of range."""
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{op}: axis must be an int, got {axis!r}")
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise AxisError(f"{op}: axis {axis} is out of range for a Tensor with ndim {ndim}")
    return axis % ndim


class Shift(Function):
    """Shift along ``axis`` by ``shift`` places, filling the vacated places with ``fill``:
    ``out[i] = x[i - shift]`` where ``0 <= i - shift < n``, else ``fill``. Same shape and dtype.

    A building block of the scan gradients. Backward: the cotangent shifted by ``-shift``
    with zero fill (the transpose).
    """
    batch = axis_rule("axis", none_means_all=False)  # vmap: the axis moves past the batch

    oper = "shift"

    @staticmethod
    def forward(ctx, x, axis=-1, shift=0, fill=0):
        xp = ctx.backend
        a = _single_axis(axis, x.ndim, "shift")
        ctx.axis = a
        ctx.shift = shift
        n = x.shape[a]
        out = xp.full(x.shape, fill, dtype=x.dtype)
        k = min(abs(shift), n)
        src = [slice(None)] * x.ndim
        dst = [slice(None)] * x.ndim
        if shift >= 0:
            src[a], dst[a] = slice(0, n - k), slice(k, n)
        else:
            src[a], dst[a] = slice(k, n), slice(0, n - k)
        out[tuple(dst)] = x[tuple(src)]
        return out

    @staticmethod
    def backward(ctx, g):
        return Shift.apply(g, axis=ctx.axis, shift=-ctx.shift, fill=0)

    @classmethod
    def output_dtype(cls, dtype, **params):
        return np.dtype(dtype)

    @classmethod
    def output_shape(cls, shape, axis=-1, shift=0, fill=0):
        _single_axis(axis, len(shape), "shift")
        return tuple(shape)


def _others_product(vb: Tensor, x: Tensor, arrays, key) -> Tensor:
    """For each write ``j`` (``vb`` of the indexed shape), the product of the other writes
    that land on the same element of ``x`` (1 where there are none); tapegrad ops only, every
    shape fixed by ``vb``'s (see :class:`ScatterMul`)."""
    xp = _get_backend(x.device)
    n = vb.size
    ones = _const_like(1, vb.shape, vb.dtype, vb)
    if n < 2:
        return ones
    iota = _tconst(xp.arange(x.size, dtype=np.int64).reshape(x.shape))
    target = Reshape.api(GetItem.apply(iota, *arrays, key=key), (n,))
    slot = (IndexSlot(0, False),)
    order = _ns.argsort(target, kind="stable")
    s = GetItem.apply(target, order, key=slot)  # sorted: equal targets are contiguous runs
    v = GetItem.apply(Reshape.api(vb, (n,)), order, key=slot)

    def exclusive(sign):
        """Product of the writes before (``sign`` 1) or after (-1) each in its run."""
        same = s == Shift.apply(s, axis=0, shift=sign, fill=-1)
        acc = Where.apply(same, Shift.apply(v, axis=0, shift=sign, fill=1), 1.0)
        d = 1
        while d < n:  # inclusive segmented scan of acc by recursive doubling
            same = s == Shift.apply(s, axis=0, shift=sign * d, fill=-1)
            acc = acc * Where.apply(same, Shift.apply(acc, axis=0, shift=sign * d, fill=1), 1.0)
            d *= 2
        return acc

    others = exclusive(1) * exclusive(-1)
    back = GetItem.apply(others, _ns.argsort(order, kind="stable"), key=slot)
    return Reshape.api(back, vb.shape)


class DuplicatePairs(_MovementFunction):
    """All ordered pairs ``(j, k)``, ``j != k``, of positions of a 1-D integer array holding
    equal values (the writes of a scatter that land on the same element), vectorised: sort,
    then enumerate each group of equal values. Returns two int64 arrays; no gradient.

    Size: the sum of ``g * (g - 1)`` over groups of ``g`` equal values (0 when all differ).
    """

    oper = "duplicate_pairs"
    differentiable = False

    @staticmethod
    def batch(args, batched, size):
        """Each example's pairs, stacked; examples with different numbers of pairs cannot be
        stacked (a ``ValueError``, as for ``nonzero``)."""
        ids = args[0]
        rows = [DuplicatePairs.apply(ids[i]) for i in range(size)]
        counts = sorted({r[0].shape[0] for r in rows})
        if len(counts) > 1:
            raise ValueError(
                "duplicate_pairs under vmap: the examples have different numbers of pairs of "
                f"equal values ({counts[0]} to {counts[-1]}), so they cannot be stacked"
            )
        if not rows:
            empty = _tconst(np.zeros((0, 0), dtype=np.int64))
            return empty, empty
        return tuple(Concatenate.apply(*[Reshape.api(r[j], (1, counts[0])) for r in rows],
                                       axis=0) for j in range(2))

    @staticmethod
    def forward(ctx, ids):
        xp = ctx.backend
        n = ids.shape[0]
        if n < 2:
            empty = xp.zeros(0, dtype=np.int64)
            return empty, empty.copy()
        order = xp.argsort(ids, kind="stable")
        s = ids[order]
        new = xp.concatenate([xp.ones(1, dtype=bool), s[1:] != s[:-1]])
        starts = xp.flatnonzero(new)
        sizes = xp.diff(xp.concatenate([starts, xp.asarray([n])]))
        group = xp.cumsum(new) - 1
        g = sizes[group]
        start = starts[group]
        rank = xp.arange(n) - start
        first = xp.cumsum(g) - g
        c = xp.arange(int(g.sum())) - xp.repeat(first, g)
        keep = c != xp.repeat(rank, g)
        j = order[xp.repeat(xp.arange(n), g)[keep]].astype(np.int64)
        k = order[(xp.repeat(start, g) + c)[keep]].astype(np.int64)
        return j, k

    @classmethod
    def output_shape(cls, shape):
        raise NotImplementedError(
            "duplicate_pairs: the output size depends on the values, not only on the shape"
        )


class ScatterMinMax(_MovementFunction):
    """``x`` with ``x[idx] = op(x[idx], v)`` applied unbuffered (``numpy.maximum.at`` /
    ``numpy.minimum.at``) for ``op`` in {``"max"``, ``"min"``}: with repeated indices the
    extreme of ``x`` and all writes wins.

    Backward: the cotangent of each output element goes to the operand(s) equal to it; ties
    split it equally among all tied operands (the convention of :class:`Maximum`).
    """

    oper = "scatter_minmax"

    batch = classmethod(_batch_scatter)

    @staticmethod
    def forward(ctx, x, v, *index_arrays, key, op):
        if op not in ("max", "min"):
            raise ValueError(f"scatter_minmax: op must be 'max' or 'min', got {op!r}")
        out = _update(ctx, x, v, index_arrays, key, op)
        _keep_index(ctx, key, index_arrays, x, v, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, v, out, *arrays = ctx.saved_tensors
        key = ctx.key
        nx, nv = ctx.needs_input_grad[:2]
        dtype = g.dtype
        picked = GetItem.apply(out, *arrays, key=key)
        v_hit = AsType.api(v == picked, dtype)
        x_hit = AsType.api(x == out, dtype)
        count = x_hit + ScatterAdd.apply(v_hit, *arrays, shape=x.shape, key=key)
        share = g / count
        gx = share * x_hit if nx else None
        gv = GetItem.apply(share, *arrays, key=key) * v_hit if nv else None
        return (gx, gv) + (None,) * len(arrays)

    @classmethod
    def output_shape(cls, shape, v_shape, *index_shapes, key, op):
        return tuple(shape)

    @classmethod
    def output_dtype(cls, dtype, v_dtype, *index_dtypes, key, op):
        return np.dtype(dtype)


# -- joining and splitting --------------------------------------------------------------------
def _concat_shape(shapes, axis, op="concatenate") -> tuple:
    shapes = [tuple(s) for s in shapes]
    if not shapes:
        raise ValueError(f"{op}: need at least one Tensor to concatenate")
    nd = len(shapes[0])
    if nd == 0:
        raise ValueError(f"{op}: zero-dimensional Tensors cannot be concatenated; use stack")
    ax = check_axis(axis, nd, op)
    rest = shapes[0][:ax] + shapes[0][ax + 1 :]
    for s in shapes:
        if len(s) != nd or s[:ax] + s[ax + 1 :] != rest:
            raise ValueError(
                f"{op}: all input shapes must match except along axis {ax}, got shapes "
                f"{', '.join(str(t) for t in shapes)}"
            )
    return shapes[0][:ax] + (sum(s[ax] for s in shapes),) + shapes[0][ax + 1 :]


def as_tensor_list(arrays, op: str) -> list:
    """A non-empty sequence of operands as a list of Tensors.

    Raises:
        TypeError: if ``arrays`` is a Tensor or not iterable, naming ``op``.
        ValueError: if it is empty.
    """
    if isinstance(arrays, Tensor) or not hasattr(arrays, "__iter__"):
        raise TypeError(f"{op}: expected a sequence of Tensors, got {type(arrays).__name__}")
    xs = [tensor_arg(a) for a in arrays]
    if not xs:
        raise ValueError(f"{op}: need at least one Tensor")
    return xs


def cast_all(xs: list, dtype, casting, op: str) -> list:
    """NumPy's ``dtype=``/``casting=`` of the joining functions: every input cast to ``dtype``
    (differentiably between floating dtypes), each cast allowed by ``casting``.

    Raises:
        TypeError: if ``dtype`` is not a dtype, or ``casting`` forbids a cast, naming ``op``.
        ValueError: for an unknown ``casting``.
    """
    if casting not in ("no", "equiv", "safe", "same_kind", "unsafe"):
        raise ValueError(
            f"{op}: casting must be 'no', 'equiv', 'safe', 'same_kind' or 'unsafe', got "
            f"{casting!r}"
        )
    if dtype is None:
        return xs
    dt = dtype_arg(dtype, op)
    for a in xs:
        if not np.can_cast(a.dtype, dt, casting=casting):
            raise TypeError(
                f"{op}: cannot cast dtype {a.dtype} to {dt} under casting={casting!r}; pass "
                "casting='unsafe' to allow it"
            )
    return [a if a.dtype == dt else AsType.api(a, dt) for a in xs]


def no_out(out, op: str) -> None:
    """NumPy's ``out=``, which immutable Tensors cannot take.

    Raises:
        TypeError: if ``out`` is given, naming ``op``.
    """
    if out is not None:
        raise TypeError(
            f"{op}: out= is not supported (tapegrad never writes in place); use the returned "
            "Tensor"
        )


@expose
class Concatenate(_MovementFunction):
    """Join Tensors along an existing ``axis``; the result dtype follows NumPy promotion.

    Shapes: ``(..., n_i, ...) -> (..., sum(n_i), ...)``. Backward: :class:`Split` at the
    input boundaries.

    Raises:
        ValueError: for no inputs, 0-d inputs, an axis out of range, or shapes that differ
            off the axis, naming all shapes.
    """

    @staticmethod
    def batch(args, batched, size, axis):
        xs = batch_all(args, batched, size)
        return Concatenate.apply(*xs, axis=shift_axes(axis, xs[0].ndim - 1, "concatenate"))
    traits = Traits(fresh=True)

    oper = "concatenate"
    names = ("concatenate", "concat")

    @staticmethod
    def api(arrays, axis=0, out=None, *, dtype=None, casting="same_kind") -> Tensor:
        """Join a sequence of Tensors along an existing axis (``axis=None`` flattens them first).

        Also the static method ``Tensor.cat(arrays, axis=0)``.

        Args:
            arrays: Sequence of Tensors with equal shapes except along ``axis``.
            axis: The joining axis.
            out: Must be None (Tensors are immutable).
            dtype: Cast every input to this dtype first (NumPy's keyword).
            casting: Which casts ``dtype`` may make (NumPy's rule names; default
                ``"same_kind"``).

        Returns:
            Tensor with ``sum(a.shape[axis])`` along ``axis``; dtype by NumPy promotion, or
            ``dtype``.

        Raises:
            ValueError: for an empty sequence, 0-d inputs, an axis out of range, or shapes that
                differ off the axis (naming all shapes); an unknown ``casting``.
            TypeError: for ``out=``, or a cast ``casting`` forbids.
        """
        no_out(out, "concatenate")
        xs = cast_all(as_tensor_list(arrays, "concatenate"), dtype, casting, "concatenate")
        if axis is None:
            xs, axis = [Reshape.api(a, (a.size,)) for a in xs], 0
        return Concatenate.apply(*xs, axis=axis)

    @staticmethod
    def forward(ctx, *xs, axis):
        _concat_shape([x.shape for x in xs], axis)
        ax = check_axis(axis, xs[0].ndim, "concatenate")
        ctx.axis = ax
        ctx.sizes = tuple(x.shape[ax] for x in xs)
        return ctx.backend.concatenate(xs, axis=ax)

    @staticmethod
    def backward(ctx, g):
        cuts = tuple(int(c) for c in np.cumsum(ctx.sizes)[:-1])
        parts = Split.apply(g, cuts, axis=ctx.axis)
        return tuple(parts)

    @classmethod
    def output_shape(cls, *shapes, axis):
        return _concat_shape(shapes, axis)


def _split_indices(x, indices_or_sections, axis, op, equal) -> tuple:
    """The cut positions of ``split``/``array_split`` along ``axis`` of ``x``."""
    n = x.shape[axis]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError(f"{op}: number of sections must be larger than 0, got {k}")
        if equal and n % k:
            raise ValueError(
                f"{op}: an axis of size {n} (axis {axis}, shape {x.shape}) does not split into "
                f"{k} equal sections; use array_split"
            )
        q, r = divmod(n, k)
        sizes = [q + 1] * r + [q] * (k - r)
        return tuple(int(c) for c in np.cumsum(sizes)[:-1])
    return tuple(operator.index(i) for i in indices_or_sections)


def split_pieces(x, indices_or_sections, axis, op: str, equal: bool) -> list:
    """``split`` (``equal=True``: an int must divide the axis) or ``array_split``
    (``equal=False``) of ``x`` along ``axis``, errors naming ``op``; see :class:`Split`."""
    x = x if type(x) is Tensor else tensor_arg(x)
    if x.ndim == 0:
        raise ValueError(f"{op}: a 0-d Tensor cannot be split")
    ax = check_axis(axis, x.ndim, op)
    cuts = _split_indices(x, indices_or_sections, ax, op, equal)
    return list(Split.apply(x, cuts, axis=ax))


def _split_bounds(indices, n: int) -> tuple:
    """(start, stop) of each piece of ``numpy.split(x, indices)`` along an axis of size n."""
    edges = [0, *(operator.index(i) for i in indices), n]
    out = []
    for a, b in zip(edges[:-1], edges[1:]):
        start, stop, _ = slice(a, b).indices(n)
        out.append((start, max(start, stop)))
    return tuple(out)


@expose
class Split(_MovementFunction):
    """Split ``x`` along ``axis`` at the cut positions ``indices`` (``numpy.split`` with a list
    of indices: piece ``i`` is ``x[indices[i-1]:indices[i]]`` with slice semantics).

    Returns a tuple of ``len(indices) + 1`` Tensors. Backward: :class:`Concatenate` of the
    cotangents when the pieces tile ``x`` (increasing cuts), otherwise the sum of each piece's
    cotangent scattered back to its slice.
    """

    @staticmethod
    def batch(args, batched, size, axis):
        x, indices = args
        return Split.apply(x, indices, axis=shift_axes(axis, x.ndim - 1, "split"))
    traits = Traits(view=True)

    oper = "split"
    names = ("split",)

    @staticmethod
    def api(x, indices_or_sections, axis=0) -> list:
        """Split into pieces along ``axis`` (``numpy.split``).

        Args:
            x: Tensor with at least one axis.
            indices_or_sections: An int ``k`` (``k`` equal pieces) or a sorted sequence of cut
                positions (piece ``i`` is ``x[cuts[i-1]:cuts[i]]`` along ``axis``).
            axis: The axis to split.

        Returns:
            List of Tensors, views of ``x``.

        Raises:
            ValueError: if ``k`` does not divide the axis, ``k <= 0`` or the axis is out of
                range.
        """
        return split_pieces(x, indices_or_sections, axis, "split", True)

    @staticmethod
    def forward(ctx, x, indices, *, axis):
        if x.ndim == 0:
            raise ValueError("split: a 0-d Tensor cannot be split")
        ax = check_axis(axis, x.ndim, "split")
        bounds = _split_bounds(indices, x.shape[ax])
        ctx.axis, ctx.bounds, ctx.in_shape = ax, bounds, x.shape
        pre = (slice(None),) * ax
        return tuple(x[pre + (slice(a, b),)] for a, b in bounds)

    @staticmethod
    def backward(ctx, *gs):
        bounds, ax = ctx.bounds, ctx.axis
        tiles = (
            bounds[0][0] == 0
            and bounds[-1][1] == ctx.in_shape[ax]
            and all(b0[1] == b1[0] for b0, b1 in zip(bounds[:-1], bounds[1:]))
        )
        if tiles:
            return Concatenate.apply(*gs, axis=ax), None
        pre = (slice(None),) * ax
        total = None
        for g, (a, b) in zip(gs, bounds):
            part = ScatterAdd.apply(g, shape=ctx.in_shape, key=pre + (slice(a, b),))
            total = part if total is None else total + part
        return total, None

    @classmethod
    def output_shape(cls, shape, indices, *, axis):
        """A list with one shape per piece."""
        shape = tuple(shape)
        ax = check_axis(axis, len(shape), "split")
        return [
            shape[:ax] + (b - a,) + shape[ax + 1 :] for a, b in _split_bounds(indices, shape[ax])
        ]

    @classmethod
    def output_dtype(cls, dtype, indices, *, axis):
        return [np.dtype(dtype)] * (len(tuple(indices)) + 1)


# -- reordering -------------------------------------------------------------------------------
@expose
class Flip(_MovementFunction):
    """Reverse the order of elements along ``axis`` (a tuple of axes). Backward: the same flip.

    Raises:
        ValueError: if an axis is out of range or repeated.
    """
    batch = axis_rule("axis")  # vmap: the axes move past the batch axis
    traits = Traits(view=True)

    oper = "flip"
    names = ("flip",)
    methods = ("flip",)

    @staticmethod
    def api(x, axis=None) -> Tensor:
        """Reverse the order of elements along ``axis`` (int, tuple, or ``None`` for all).

        Raises:
            ValueError: if an axis is out of range or repeated.
        """
        x = x if type(x) is Tensor else tensor_arg(x)
        axes = check_axes(axis, x.ndim, "flip")
        if not axes:
            return x
        return Flip.apply(x, axis=axes)

    @staticmethod
    def forward(ctx, x, *, axis):
        axes = check_axes(axis, x.ndim, "flip")
        ctx.axes = axes
        return ctx.backend.flip(x, axes) if axes else x

    @staticmethod
    def backward(ctx, g):
        return Flip.apply(g, axis=ctx.axes)

    @classmethod
    def output_shape(cls, shape, *, axis):
        check_axes(axis, len(shape), "flip")
        return tuple(shape)


@expose
class Roll(_MovementFunction):
    """Roll elements by ``shift`` along ``axis`` (``numpy.roll``): elements pushed past the end
    come back at the start. ``shift`` and ``axis`` are equal-length tuples (the same axis may
    repeat: shifts add); ``axis=None`` rolls the flattened array by one int ``shift``.
    Backward: roll by ``-shift``.
    """
    traits = Traits(fresh=True)

    oper = "roll"
    names = ("roll",)

    @staticmethod
    def batch(args, batched, size, shift, axis):
        x = args[0]
        if axis is None:  # each example rolls flat (a tuple of shifts adds up, as NumPy's)
            flat = Reshape.apply(x, (size, math.prod(x.shape[1:])))
            total = int(np.sum(shift))
            return Reshape.apply(Roll.apply(flat, shift=(total,), axis=(1,)), x.shape)
        return Roll.apply(x, shift=shift, axis=shift_axes(tuple(axis), x.ndim - 1, "roll"))

    @staticmethod
    def api(x, shift, axis=None) -> Tensor:
        """Roll elements by ``shift`` along ``axis`` (``numpy.roll``): elements pushed past the
        last position come back at the first.

        Args:
            x: Tensor.
            shift: Int, or a tuple of ints matched (broadcast) with ``axis``.
            axis: Int, tuple of ints, or ``None`` to roll the flattened Tensor (then ``shift``
                is one int) and restore the shape.

        Raises:
            ValueError: if an axis is out of range, or shift and axis lengths do not match.
        """
        x = x if type(x) is Tensor else tensor_arg(x)
        if axis is None:
            if not isinstance(shift, (int, np.integer)):
                raise ValueError(f"roll: with axis=None, shift must be an int, got {shift!r}")
            return Roll.apply(x, shift=int(shift), axis=None)
        axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
        shifts = (shift,) if isinstance(shift, (int, np.integer)) else tuple(shift)
        try:
            shifts, axes = np.broadcast_arrays(np.asarray(shifts), np.asarray(axes))
        except ValueError:
            raise ValueError(
                f"roll: shift {shift!r} and axis {axis!r} must have matching lengths"
            ) from None
        axes = tuple(check_axis(int(a), x.ndim, "roll") for a in axes.reshape(-1))
        shifts = tuple(int(s) for s in shifts.reshape(-1))
        return Roll.apply(x, shift=shifts, axis=axes)

    @staticmethod
    def forward(ctx, x, *, shift, axis):
        if axis is not None:
            for a in axis:
                check_axis(a, x.ndim, "roll")
        ctx.shift, ctx.axis = shift, axis
        return ctx.backend.roll(x, shift, axis)

    @staticmethod
    def backward(ctx, g):
        s = ctx.shift
        neg = -s if isinstance(s, int) else tuple(-i for i in s)
        return Roll.apply(g, shift=neg, axis=ctx.axis)

    @classmethod
    def output_shape(cls, shape, *, shift, axis):
        return tuple(shape)


_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")
#: ``mode`` names ``pad`` accepts: NumPy's, and PyTorch's ``replicate`` and ``circular``.
_PAD_ALIASES = {
    "constant": "constant",
    "edge": "edge",
    "replicate": "edge",
    "reflect": "reflect",
    "symmetric": "symmetric",
    "wrap": "wrap",
    "circular": "wrap",
}


def _pad_mode(mode) -> str:
    try:
        return _PAD_ALIASES[mode]
    except (KeyError, TypeError):
        raise ValueError(
            "pad: mode must be 'constant', 'edge' (alias 'replicate'), 'reflect', 'symmetric' "
            f"or 'wrap' (alias 'circular'), got {mode!r}"
        ) from None


def _numpy_pad_width(pad_width, ndim: int) -> tuple:
    """NumPy's ``pad_width`` forms as one ``(before, after)`` pair of ints per axis."""
    arr = np.asarray(pad_width)
    if arr.size == 0:
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"pad: pad_width must hold integers, got {pad_width!r}")
    if ndim == 0:
        return ()
    try:
        pairs = np.broadcast_to(arr, (ndim, 2))
    except ValueError:
        raise ValueError(
            f"pad: pad_width {pad_width!r} does not broadcast to one (before, after) pair for "
            f"each of the {ndim} axes"
        ) from None
    return tuple((int(b), int(a)) for b, a in pairs)


def _method_pad_width(pad_width, ndim: int) -> tuple:
    """``Tensor.pad``'s forms: int; flat (l, r[, t, b, ...]) last axis first; pairs."""
    if isinstance(pad_width, (int, np.integer)):
        return ((int(pad_width),) * 2,) * ndim
    pw = tuple(pad_width)
    if pw and all(isinstance(p, (int, np.integer)) for p in pw):
        if len(pw) % 2 or len(pw) // 2 > ndim:
            raise ValueError(
                f"pad: a flat pad_width needs an even number of entries, two per padded axis "
                f"(last axis first) and at most {2 * ndim} for ndim {ndim}, got {pw}"
            )
        pairs = [(int(pw[i]), int(pw[i + 1])) for i in range(0, len(pw), 2)]
        pairs = [(0, 0)] * (ndim - len(pairs)) + pairs[::-1]
        return tuple(pairs)
    return _numpy_pad_width(pw, ndim)


def _pad_shape(shape, pad_width, mode) -> tuple:
    shape = tuple(shape)
    if mode not in _PAD_MODES:
        raise ValueError(f"pad: mode must be one of {_PAD_MODES}, got {mode!r}")
    if len(pad_width) != len(shape):
        raise ValueError(
            f"pad: pad_width has {len(pad_width)} (before, after) pairs for a Tensor of shape "
            f"{shape}; give one pair per axis"
        )
    for ax, ((b, a), n) in enumerate(zip(pad_width, shape)):
        if b < 0 or a < 0:
            raise ValueError(f"pad: pad widths must be >= 0, got {tuple(pad_width)}")
        if mode != "constant" and n == 0 and (b or a):
            raise ValueError(
                f"pad: cannot pad the empty axis {ax} of a Tensor of shape {shape} in mode "
                f"{mode!r}; only 'constant' can extend an empty axis"
            )
    return tuple(n + b + a for (b, a), n in zip(pad_width, shape))


@expose
class Pad(_MovementFunction):
    """Pad each axis with ``pad_width[i] = (before, after)`` elements (``numpy.pad``).

    Modes: ``"constant"`` fills with ``constant_values`` (static; cast to ``x``'s dtype);
    the others copy elements of ``x``, as NumPy: ``"edge"`` repeats the edge element,
    ``"reflect"`` mirrors without repeating the edge, ``"symmetric"`` mirrors repeating it,
    ``"wrap"`` continues periodically from the other end. Pads longer than the axis reflect
    (or wrap) again.

    Backward: ``constant`` slices the interior out of the cotangent; the copying modes
    scatter-add the cotangent through the pad's index map (each padded element adds into the
    element it copies), axis by axis.
    """

    @staticmethod
    def batch(args, batched, size, pad_width, **params):
        return Pad.apply(args[0], pad_width=((0, 0),) + tuple(pad_width), **params)
    traits = Traits(fresh=True)

    oper = "pad"
    names = ("pad",)

    @staticmethod
    def api(x, pad_width, mode="constant", constant_values=0) -> Tensor:
        """Pad with ``numpy.pad``'s arguments and semantics.

        Args:
            x: Tensor.
            pad_width: ``n`` (every side of every axis), ``(before, after)`` or ``((b, a),)``
                (every axis), or ``((b0, a0), (b1, a1), ...)`` (one pair per axis). NumPy forms
                only: for the PyTorch-style flat ``(left, right, top, bottom)`` form use
                :meth:`Tensor.pad`.
            mode: How the new elements are filled (for ``x = [1, 2, 3]`` padded by 2 on each
                side):

                - ``"constant"``: ``constant_values`` (``[0, 0, 1, 2, 3, 0, 0]``);
                - ``"edge"`` (alias ``"replicate"``): the edge element
                  (``[1, 1, 1, 2, 3, 3, 3]``);
                - ``"reflect"``: the mirror image, edge not repeated
                  (``[3, 2, 1, 2, 3, 2, 1]``);
                - ``"symmetric"``: the mirror image, edge repeated (``[2, 1, 1, 2, 3, 3, 2]``);
                - ``"wrap"`` (alias ``"circular"``): periodic continuation, the other end's
                  elements (``[2, 3, 1, 2, 3, 1, 2]``).

                For ``reflect``, ``symmetric`` and ``wrap`` a pad longer than the axis
                reflects or wraps again, as NumPy.
            constant_values: Fill value for ``"constant"``, cast to ``x``'s dtype: a number, or
                a one-element Tensor, which then receives the cotangents of the padded
                positions.

        Returns:
            Tensor of shape ``x.shape[i] + b_i + a_i`` per axis, ``x``'s dtype.

        Gradient: ``constant`` slices the interior; the other modes add each padded element's
        cotangent into the element it copies.

        Raises:
            ValueError: for negative widths, an unknown mode, pad_width that fits no form,
                padding an empty axis in a mode other than ``constant``, or a non-scalar fill
                value.
            TypeError: if pad_width does not hold integers.

        Example:
            >>> import tapegrad.numpy as tnp
            >>> tnp.pad(tnp.asarray([1.0, 2.0, 3.0]), 2, mode="wrap")
            Tensor([2., 3., 1., 2., 3., 1., 2.], dtype=float32)
            >>> tnp.pad(tnp.asarray([1.0, 2.0, 3.0]), (1, 2), mode="symmetric")
            Tensor([1., 1., 2., 3., 3., 2.], dtype=float32)
        """
        x = x if type(x) is Tensor else tensor_arg(x)
        mode = _pad_mode(mode)
        pw = _numpy_pad_width(pad_width, x.ndim)
        if not any(b or a for b, a in pw):
            return x
        if mode != "constant":
            return Pad.apply(x, pad_width=pw, mode=mode)
        if isinstance(constant_values, Tensor):
            if constant_values.size != 1:
                raise ValueError(
                    "pad: constant_values must be a single number or a one-element Tensor, got "
                    f"shape {constant_values.shape}"
                )
            # differentiable fill value: padded positions take it, the interior takes x
            xp = _get_backend(x.device)
            interior = _tconst(xp.pad(xp.ones(x.shape, dtype=bool), pw))
            fill = AsType.api(Reshape.api(constant_values, ()), x.dtype)
            return Where.apply(interior, Pad.apply(x, pad_width=pw, mode=mode), fill)
        if np.ndim(constant_values) != 0:
            raise ValueError(
                "pad: constant_values must be a single number (per-axis fill values are not "
                f"supported), got {constant_values!r}"
            )
        return Pad.apply(x, pad_width=pw, mode=mode, constant_values=constant_values)

    @staticmethod
    def forward(ctx, x, *, pad_width, mode="constant", constant_values=0):
        _pad_shape(x.shape, pad_width, mode)
        ctx.in_shape, ctx.pad_width, ctx.mode = x.shape, pad_width, mode
        xp = ctx.backend
        if mode == "constant":
            return xp.pad(x, pad_width, mode="constant", constant_values=constant_values)
        return xp.pad(x, pad_width, mode=mode)

    @staticmethod
    def backward(ctx, g):
        pw, mode, in_shape = ctx.pad_width, ctx.mode, ctx.in_shape
        if mode == "constant":
            key = tuple(slice(b, b + n) for (b, _), n in zip(pw, in_shape))
            return GetItem.apply(g, key=key)
        shape = list(g.shape)
        for ax, ((b, a), n) in enumerate(zip(pw, in_shape)):
            if not (b or a):
                continue
            index_map = np.pad(np.arange(n), (b, a), mode=mode)
            shape[ax] = n
            key = (slice(None),) * ax + (IndexSlot(0, False),)
            g = ScatterAdd.apply(g, index_map, shape=tuple(shape), key=key)
        return g

    @classmethod
    def output_shape(cls, shape, *, pad_width, mode="constant", constant_values=0):
        return _pad_shape(shape, pad_width, mode)


def _window_shape(shape, window_shape, axis, step, op="sliding_window_view") -> tuple:
    shape = tuple(shape)
    nd = len(shape)
    if len(window_shape) != len(axis):
        raise ValueError(
            f"{op}: window_shape {tuple(window_shape)} and axis {tuple(axis)} must have the same "
            "length"
        )
    if len(step) != nd:
        raise ValueError(f"{op}: step needs one entry per axis of shape {shape}, got {step}")
    if any(s < 1 for s in step):
        raise ValueError(f"{op}: step/stride must be >= 1, got {tuple(step)}")
    trimmed = list(shape)
    for w, a in zip(window_shape, axis):
        ax = check_axis(a, nd, op)
        if w < 0:
            raise ValueError(f"{op}: window_shape cannot contain negative values, got {w}")
        if trimmed[ax] < w:
            raise ValueError(
                f"{op}: window of size {w} along axis {ax} is larger than that axis (shape {shape})"
            )
        trimmed[ax] -= w - 1
    positions = tuple((m - 1) // s + 1 if m > 0 else 0 for m, s in zip(trimmed, step))
    return positions + tuple(window_shape)


@expose
class SlidingWindow(_MovementFunction):
    """All windows of ``window_shape`` over ``axis`` as a read-only strided view
    (``numpy.lib.stride_tricks.sliding_window_view``), taking every ``step[i]``-th window
    position along axis ``i``.

    Shapes: ``x.shape`` with each windowed axis of size ``n`` replaced by the number of window
    positions ``(n - w) // step + 1``, followed by ``window_shape``.

    Backward: :class:`WindowScatterAdd`, which adds every window back onto its place
    (overlapping windows accumulate).

    Raises:
        ValueError: if a window is larger than its axis, lengths differ, or a step is < 1.
    """
    @staticmethod
    def batch(args, batched, size, window_shape, axis, step):
        x = args[0]
        nd = x.ndim - 1
        return SlidingWindow.apply(x, window_shape=window_shape, step=(1,) + tuple(step),
                                   axis=shift_axes(tuple(axis), nd, "sliding_window_view"))
    traits = Traits(view="readonly")

    oper = "sliding_window"
    names = ("sliding_window_view",)

    @staticmethod
    def api(x, window_shape, axis=None) -> Tensor:
        """All windows of ``window_shape`` (``numpy.lib.stride_tricks.sliding_window_view``).

        Args:
            x: Tensor.
            window_shape: Int or tuple: the window size along each axis of ``axis``.
            axis: Int or tuple of axes (the same axis may repeat); ``None`` means all axes, and
                then ``window_shape`` has one entry per axis.

        Returns:
            Read-only strided view of shape ``x.shape`` with each windowed axis of size ``n``
            replaced by ``n - w + 1``, followed by ``window_shape``.

        Gradient: one scatter-add over all windows (overlaps accumulate).

        Raises:
            ValueError: if a window is larger than its axis or the lengths differ.
        """
        x = x if type(x) is Tensor else tensor_arg(x)
        ws = as_shape(window_shape, "sliding_window_view")
        if axis is None:
            if len(ws) != x.ndim:
                raise ValueError(
                    f"sliding_window_view: with axis=None, window_shape {ws} needs one entry per "
                    f"axis of shape {x.shape}"
                )
            axes = tuple(range(x.ndim))
        else:
            axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
            axes = tuple(check_axis(a, x.ndim, "sliding_window_view") for a in axes)
        return SlidingWindow.apply(x, window_shape=ws, axis=axes, step=(1,) * x.ndim)

    @staticmethod
    def forward(ctx, x, *, window_shape, axis, step):
        _window_shape(x.shape, window_shape, axis, step)
        xp = ctx.backend
        axes = tuple(a % x.ndim for a in axis)
        if xp is np:
            from numpy.lib.stride_tricks import sliding_window_view
        else:  # pragma: no cover - GPU only
            from cupy.lib.stride_tricks import sliding_window_view  # pyright: ignore[reportMissingImports]
        out = sliding_window_view(x, tuple(window_shape), axes) if axes else x
        if any(s != 1 for s in step):
            out = out[tuple(slice(None, None, s) for s in step)]
        ctx.in_shape, ctx.window_shape, ctx.axes, ctx.step = x.shape, window_shape, axes, step
        return out

    @staticmethod
    def backward(ctx, g):
        return WindowScatterAdd.apply(
            g,
            in_shape=ctx.in_shape,
            window_shape=ctx.window_shape,
            axis=ctx.axes,
            step=ctx.step,
        )

    @classmethod
    def output_shape(cls, shape, *, window_shape, axis, step):
        return _window_shape(shape, window_shape, axis, step)


_MAX_OFFSET_LOOP = 64


class WindowScatterAdd(_MovementFunction):
    """The transpose of :class:`SlidingWindow`: ``zeros(in_shape)`` with each window of ``g``
    (shape ``positions + window_shape``) added back where it was read from.

    Forward: for small windows (at most 64 elements) one strided slice-add per window offset,
    each a whole-array NumPy operation; otherwise a single ``add.at`` through index arrays of
    every window element. Neither loops over elements or window positions in Python.
    Backward: :class:`SlidingWindow`.
    """

    oper = "window_scatter_add"

    @staticmethod
    def batch(args, batched, size, in_shape, window_shape, axis, step):
        return WindowScatterAdd.apply(
            args[0], in_shape=(size,) + tuple(in_shape), window_shape=window_shape,
            axis=shift_axes(tuple(axis), len(in_shape), "window_scatter_add"),
            step=(1,) + tuple(step))

    @staticmethod
    def forward(ctx, g, *, in_shape, window_shape, axis, step):
        xp = ctx.backend
        nd = len(in_shape)
        out = xp.zeros(in_shape, dtype=g.dtype)
        ctx.window_shape, ctx.axes, ctx.step = window_shape, axis, step
        if g.size == 0:
            return out
        pos = g.shape[:nd]
        if math.prod(window_shape) <= _MAX_OFFSET_LOOP:
            import itertools

            for offs in itertools.product(*(range(w) for w in window_shape)):
                start = [0] * nd
                for o, a in zip(offs, axis):
                    start[a] += o
                region = tuple(
                    slice(b, b + s * (n - 1) + 1, s) for b, n, s in zip(start, pos, step)
                )
                out[region] += g[(Ellipsis,) + offs] if offs else g
            return out
        arrays = []
        for i in range(nd):
            shp = [1] * g.ndim
            shp[i] = pos[i]
            idx = (xp.arange(pos[i]) * step[i]).reshape(shp)
            for j, (w, a) in enumerate(zip(window_shape, axis)):
                if a == i:
                    wshp = [1] * g.ndim
                    wshp[nd + j] = w
                    idx = idx + xp.arange(w).reshape(wshp)
            arrays.append(idx)
        _ufunc_at(xp, "add", out, tuple(arrays), g, "window_scatter_add")
        return out

    @staticmethod
    def backward(ctx, g):
        return SlidingWindow.apply(g, window_shape=ctx.window_shape, axis=ctx.axes, step=ctx.step)

    @classmethod
    def output_shape(cls, shape, *, in_shape, window_shape, axis, step):
        return tuple(in_shape)


# -- devices ----------------------------------------------------------------------------------
def _copy_stream(stream, src: str, dst: str):
    """``to_device``'s ``stream`` as a CuPy stream (a context manager) for a copy ``src`` ->
    ``dst``; DLPack's ints: 1 legacy default, 2 per-thread default, larger a pointer."""
    gpu = dst if dst != "cpu" else src
    if gpu == "cpu":
        raise ValueError(
            f"to_device: stream={stream!r} is for a copy to or from a GPU, but this copy is "
            f"from {src} to {dst}; pass stream=None"
        )
    if isinstance(stream, (bool, np.bool_)):
        raise TypeError(f"to_device: stream must be an int or a CuPy stream, got {stream!r}")
    cp = _get_backend(gpu)
    if isinstance(stream, (int, np.integer)):
        stream = int(stream)
        if stream <= 0:
            raise ValueError(
                f"to_device: stream must be 1 (legacy default), 2 (per-thread default) or a "
                f"CUDA stream pointer, got {stream}"
            )
        if stream == 1:
            return cp.cuda.Stream.null
        if stream == 2:
            return cp.cuda.Stream.ptds
        return cp.cuda.ExternalStream(stream)
    if hasattr(stream, "ptr") and hasattr(stream, "__enter__"):  # cupy.cuda.Stream and kin
        return stream
    raise TypeError(
        f"to_device: stream must be an int or a CuPy stream, got {type(stream).__name__}"
    )


@expose
class ToDevice(Function):
    """Copy to ``device``. Backward: copy the cotangent back to the input's device."""
    traits = Traits(view=True)

    oper = "to_device"
    names = ("to_device",)
    methods = ("to_device",)

    @staticmethod
    def batch(args, batched, size):
        return ToDevice.apply(args[0], args[1])

    @staticmethod
    def api(x, device: str, *, stream=None) -> Tensor:
        """Copy to ``device`` (``"cpu"`` or ``"cuda:N"``); the cotangent is copied back.

        Args:
            x: Tensor (or array or number).
            device: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
            stream: The CUDA stream the copy runs on (the array API's ``to_device`` keyword):
                ``None`` (the current stream), a CuPy stream object, or an int as DLPack
                spells streams (1: the legacy default stream, 2: the per-thread default
                stream, larger: a ``cudaStream_t`` pointer). Only for a copy to or from a
                GPU; a copy between CPU Tensors takes ``None`` only, as NumPy's.

        Returns:
            Tensor on ``device`` (``x`` itself when it is already there).

        Raises:
            ValueError: for a device string that is not ``"cpu"`` or ``"cuda[:N]"``; for a
                ``stream`` with no GPU end, or the int 0 (DLPack's disallowed value).
            TypeError: for a ``stream`` that is neither an int nor a CuPy stream.
            RuntimeError: if the device's backend (CuPy) is not available.
        """
        x = x if type(x) is Tensor else tensor_arg(x)
        device = _parse_device(device)
        if stream is not None:
            stream = _copy_stream(stream, x.device, device)
        if x.device == device:
            return x
        _get_backend(device)
        if stream is None:
            return ToDevice.apply(x, device)
        with stream:
            return ToDevice.apply(x, device)

    @staticmethod
    def forward(ctx, x, device):
        from tapegrad.core.backend import device_of, to_device

        ctx.in_device = device_of(x)
        return to_device(x, device)

    @staticmethod
    def backward(ctx, g):
        return ToDevice.apply(g, ctx.in_device), None

    @classmethod
    def output_shape(cls, shape, device=None):
        return tuple(shape)


# -- Tensor methods whose call forms differ from the tapegrad.numpy functions ------------------
def swap_axes(x: Tensor, axis1, axis2, op: str = "swapaxes") -> Tensor:
    """``x`` with axes ``axis1`` and ``axis2`` exchanged (one :class:`Transpose`).

    Raises:
        ValueError: if an axis is out of range, naming ``op``, the axis and ``x.ndim``.
    """
    a1 = check_axis(axis1, x.ndim, op, "axis1")
    a2 = check_axis(axis2, x.ndim, op, "axis2")
    axes = list(range(x.ndim))
    axes[a1], axes[a2] = axes[a2], axes[a1]
    return Transpose.api(x, axes)


def _method_reshape(self, *shape) -> Tensor:
    """``x.reshape(2, 3)`` or ``x.reshape((2, 3))``; see :func:`tapegrad.numpy.reshape`."""
    shape = as_shape(shape[0] if len(shape) == 1 else shape, "reshape")
    if shape == self.shape:
        return self
    return Reshape.apply(self, shape)


def _method_transpose(self, *axes, dim0=None, dim1=None) -> Tensor:
    """Transpose, accepting NumPy's and PyTorch's call forms.

    - ``x.transpose()``: reverse all axes (NumPy; for 2-D also PyTorch's ``t()``).
    - ``x.transpose(a, b)`` with exactly two ints, or ``x.transpose(dim0=a, dim1=b)``: swap
      axes ``a`` and ``b`` (PyTorch's form). On a 2-D Tensor this differs from NumPy only for
      ``transpose(0, 1)``, which swaps instead of returning ``x``.
    - ``x.transpose((i, j, k, ...))`` (one tuple/list) or ``x.transpose(i, j, k)`` with other
      than two ints: NumPy's permutation. Use a tuple (or :meth:`permute`) for a two-axis
      permutation.

    Raises:
        TypeError: if both axes and ``dim0``/``dim1`` are given.
        ValueError: if an axis is out of range or the axes are not a permutation.
    """
    if dim0 is not None or dim1 is not None:
        if axes:
            raise TypeError("transpose: give either axes or dim0/dim1, not both")
        return swap_axes(self, 0 if dim0 is None else dim0, 1 if dim1 is None else dim1)
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        return Transpose.api(self, tuple(axes[0]))
    if len(axes) == 2:
        return swap_axes(self, axes[0], axes[1])
    if len(axes) == 1 and axes[0] is None:
        return Transpose.api(self)
    return Transpose.api(self, axes or None)


def _method_roll(self, shifts, dims=None) -> Tensor:
    """``x.roll(shifts, dims=None)`` (PyTorch's argument names): :func:`tapegrad.numpy.roll`
    with ``axis=dims``."""
    return Roll.api(self, shifts, dims)


def _method_pad(self, pad_width, mode="constant", constant_values=0) -> Tensor:
    """Pad, also accepting PyTorch's ``pad_width`` forms.

    - an int: every side of every axis;
    - a flat tuple of ints ``(left, right)``, ``(left, right, top, bottom)``, ...: pairs for
      the last axis first, then the one before it (PyTorch's ``F.pad`` order);
    - a tuple of ``(before, after)`` pairs: NumPy's per-axis form.

    ``mode`` and ``constant_values`` are as in :func:`tapegrad.numpy.pad`.

    Raises:
        ValueError: for a flat pad_width of odd length or with more pairs than axes, and as
            :func:`tapegrad.numpy.pad`.

    Example:
        >>> import tapegrad as tg
        >>> tg.Tensor([[1.0, 2.0]]).pad((1, 0, 0, 1)).numpy().tolist()
        [[0.0, 1.0, 2.0], [0.0, 0.0, 0.0]]
    """
    return Pad.api(self, _method_pad_width(pad_width, self.ndim), mode, constant_values)


def _transpose_property(self) -> Tensor:
    return Transpose.api(self)


_METHODS.update(
    {
        "reshape": _method_reshape,
        "transpose": _method_transpose,
        "T": property(_transpose_property, doc="The transpose (axes reversed)."),
        "roll": _method_roll,
        "pad": _method_pad,
        "cat": staticmethod(Concatenate.api),
    }
)
