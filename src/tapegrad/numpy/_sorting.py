"""Sorting, searching, counting, selecting and set operations of ``tapegrad.numpy``.

NumPy's names, arguments and results. Index-valued results (``argsort``, ``nonzero``,
``searchsorted``, ``digitize``, counts) are integer Tensors with no gradient. Functions that
return values of the input select them through an index, and their derivative is that of the
gather: ``sort`` and ``partition`` gather through the permutation (as HIPS autograd's and JAX's
``sort``), ``unique`` and the set operations gather the first occurrence of each value,
``select``/``choose``/``piecewise`` pass the cotangent to the chosen operand, and
``bincount``/``histogram`` are linear in their ``weights``.

Output sizes that depend on the values (``nonzero``, ``unique``, the set operations,
``compress``, ``extract``, ``bincount``) are fine eagerly and under ``grad``/``jvp``; under
``vmap`` every example must give the same size (a clear ``ValueError`` otherwise), since the
results are stacked; under ``jit`` the values are recomputed on each call, but a jitted
gradient through such a size holds only for inputs that give the sizes it was traced with
(see :mod:`tapegrad.ops.sorting`).

The functions that apply one primitive (``argsort``, ``argpartition``, ``lexsort``,
``searchsorted``, ``nonzero``, ``isin``, ``bincount``) are defined with their primitives in
:mod:`tapegrad.ops.sorting`; this module re-exports them and defines the composites.
"""

from __future__ import annotations

import operator
from typing import NamedTuple

import numpy as _np

from tapegrad import ops as _ops
from tapegrad.core import dtypes as _tg_dtypes
from tapegrad.core.tensor import Tensor, all_values
from tapegrad.numpy._core import _tensor
from tapegrad.numpy._creation import zeros_like as _zeros_like
from tapegrad.numpy._docs import sections as _sections
from tapegrad.numpy._shape import _check_bounds, concatenate, ravel, reshape, stack
from tapegrad.numpy._shape import take_along_axis as _take_along_axis
from tapegrad.ops._registry import given_tensor as _given_tensor
from tapegrad.ops._registry import ns as _ns
from tapegrad.ops.movement import IndexSlot as _Slot
from tapegrad.ops.movement import check_axis as _check_axis
from tapegrad.ops.sorting import data_operand as _data

__all__ = [
    "sort",
    "argsort",
    "partition",
    "argpartition",
    "lexsort",
    "searchsorted",
    "unique",
    "unique_values",
    "unique_counts",
    "unique_inverse",
    "unique_all",
    "nonzero",
    "flatnonzero",
    "argwhere",
    "select",
    "piecewise",
    "choose",
    "compress",
    "extract",
    "digitize",
    "bincount",
    "histogram",
    "histogram_bin_edges",
    "isin",
    "intersect1d",
    "union1d",
    "setdiff1d",
    "setxor1d",
]

argsort = _ns.argsort
argpartition = _ns.argpartition
lexsort = _ns.lexsort
searchsorted = _ns.searchsorted
nonzero = _ns.nonzero
isin = _ns.isin
bincount = _ns.bincount


def _gather(x, index, axis=0) -> Tensor:
    """``take(x, index, axis)`` for a valid integer Tensor ``index`` (no checks)."""
    return _ops.GetItem.apply(x, index, key=(slice(None),) * axis + (_Slot(0, False),))


# -- sorting ---------------------------------------------------------------------------------
def sort(a, axis=-1, kind=None, order=None, *, stable=None, descending=False) -> Tensor:
    """A sorted copy of ``a`` along ``axis`` (NumPy ``sort``).

    Args:
        a: Tensor of a real or complex dtype (complex sorts lexicographically; NaNs go last).
        axis: The axis to sort along; ``None`` sorts the flattened Tensor.
        kind: ``"quicksort"`` (default), ``"mergesort"``, ``"heapsort"`` or ``"stable"``.
        order: Must be None (Tensors have no structured dtypes).
        stable: ``True`` for a stable sort (NumPy 2).
        descending: Sort from largest to smallest (the array API's keyword).

    Returns:
        Tensor of ``a``'s dtype and shape (1-D for ``axis=None``).

    Derivative: ``sort(a) = take_along_axis(a, argsort(a))``, a gather through the sorting
    permutation (as HIPS autograd's ``grad_sort`` and JAX): the cotangent of ``out[i]`` goes
    to the element that was moved to position ``i``. Between equal elements the permutation
    decides which gets which cotangent; both choices give the same derivative of any
    function of the sorted values that is symmetric in ties, and a stable ``kind`` makes the
    choice deterministic.

    Raises:
        ValueError: if the axis is out of range (a 0-d ``a`` has no axis ``-1``: pass
            ``axis=None``), or for an unknown ``kind``.
        TypeError: if ``order`` is given.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> x = tg.Tensor([3.0, 1.0, 2.0])
        >>> tnp.sort(x)
        Tensor([1., 2., 3.], dtype=float32)
        >>> tg.grad(lambda v: (tnp.sort(v) * tnp.asarray([1.0, 10.0, 100.0])).sum())(x)
        Tensor([100.,   1.,  10.], dtype=float32)
    """
    a = _tensor(a)
    if axis is None:
        a, axis = ravel(a), 0
    axis = _check_axis(axis, a.ndim, "sort")
    idx = argsort(a, axis=axis, kind=kind, order=order, stable=stable, descending=descending)
    return _take_along_axis(a, idx, axis=axis)


def partition(a, kth, axis=-1, kind="introselect", order=None) -> Tensor:
    """A partitioned copy of ``a`` (NumPy ``partition``): the element at each ``kth``
    position is the one a full sort puts there, smaller ones before it, larger ones after
    (each side in an unspecified order).

    Args:
        a: Real or complex Tensor.
        kth: Int or sequence of ints (static; negative counts from the end).
        axis: The axis; ``None`` partitions the flattened Tensor.
        kind: ``"introselect"``.
        order: Must be None.

    Returns:
        Tensor of ``a``'s dtype and shape (1-D for ``axis=None``).

    Derivative: a gather through the partitioning permutation of :func:`argpartition` (as
    :func:`sort`).

    Raises:
        ValueError: for a ``kth`` or axis out of range, or another ``kind``.
        TypeError: if ``order`` is given or ``kth`` is not integral.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.partition(tnp.asarray([3.0, 4.0, 2.0, 1.0]), 2)[2]
        Tensor(3., dtype=float32)
    """
    a = _tensor(a)
    if axis is None:
        a, axis = ravel(a), 0
    axis = _check_axis(axis, a.ndim, "partition")
    idx = argpartition(a, kth, axis=axis, kind=kind, order=order)
    return _take_along_axis(a, idx, axis=axis)


# -- unique ----------------------------------------------------------------------------------
class UniqueAllResult(NamedTuple):
    """The result of :func:`unique_all`."""

    values: Tensor
    indices: Tensor
    inverse_indices: Tensor
    counts: Tensor


class UniqueCountsResult(NamedTuple):
    """The result of :func:`unique_counts`."""

    values: Tensor
    counts: Tensor


class UniqueInverseResult(NamedTuple):
    """The result of :func:`unique_inverse`."""

    values: Tensor
    inverse_indices: Tensor


def _unique(x, axis, equal_nan):
    """``(values, index, inverse, counts)`` of NumPy's ``unique`` (values gathered)."""
    x = _tensor(x)
    if axis is None:
        flat = ravel(x)
        index, inverse, counts = _ops.Unique.apply(flat, equal_nan=bool(equal_nan))
        return _gather(flat, index), index, reshape(inverse, x.shape), counts
    ax = _check_axis(axis, x.ndim, "unique")
    index, inverse, counts = _ops.Unique.apply(x, axis=ax, equal_nan=bool(equal_nan))
    return _gather(x, index, ax), index, inverse, counts


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, sorted=True):  # noqa: A002
    """The sorted distinct elements of ``ar`` (NumPy ``unique``), and optionally where they
    first occur, how to rebuild ``ar`` from them, and how often each occurs.

    Args:
        ar: Tensor of any dtype.
        return_index: Also return ``index``: the first occurrence of each value
            (``ar.flat[index] == values``).
        return_inverse: Also return ``inverse``: ``values[inverse]`` rebuilds ``ar`` (shape
            of ``ar`` for ``axis=None``, as NumPy 2; 1-D along ``axis``).
        return_counts: Also return the number of occurrences of each value.
        axis: ``None`` (flatten) or the axis along which distinct slices are found.
        equal_nan: Collapse all NaNs into one value (NumPy's default) or keep each.
        sorted: Accepted for NumPy 2.3 compatibility; the values are always sorted (a valid
            answer for ``sorted=False``, which leaves the order unspecified).

    Returns:
        ``values`` alone, or a tuple ``(values, [index], [inverse], [counts])`` in that order.
        Values keep ``ar``'s dtype; the others are intp Tensors with no gradient.

    Derivative: ``values = take(ar, index)``, a gather at the first occurrence of each value:
    the cotangent of a distinct value goes to its first occurrence in ``ar`` (JAX's
    ``jnp.unique`` gathers through a stable sort, which picks the same element; HIPS autograd
    defines no derivative for ``unique``).

    Under ``vmap``, every example must have the same number of distinct values.

    Raises:
        ValueError: if the axis is out of range.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> x = tg.Tensor([2.0, 1.0, 2.0, 3.0])
        >>> values, counts = tnp.unique(x, return_counts=True)
        >>> values, counts
        (Tensor([1., 2., 3.], dtype=float32), Tensor([1, 2, 1], dtype=int64))
        >>> tg.grad(lambda v: (tnp.unique(v) ** 2).sum())(x)  # first occurrences only
        Tensor([4., 2., 0., 6.], dtype=float32)
    """
    values, index, inverse, counts = _unique(ar, axis, equal_nan)
    out = (values,)
    if return_index:
        out += (index,)
    if return_inverse:
        out += (inverse,)
    if return_counts:
        out += (counts,)
    return out[0] if len(out) == 1 else out


def unique_values(x) -> Tensor:
    """The distinct values of ``x`` (NumPy 2 / Array API ``unique_values``), sorted (the Array
    API leaves the order unspecified; NaNs are each distinct, ``equal_nan=False``).

    Derivative: a gather at each value's first occurrence (see :func:`unique`).

    Args:
        x: Tensor of any shape (flattened).

    Returns:
        1-D Tensor of ``x``'s dtype, sorted.

    Raises:
        TypeError: for non-numeric input.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.unique_values(tnp.asarray([3, 1, 3]))
        Tensor([1, 3], dtype=int64)
    """
    return _unique(x, None, False)[0]


def unique_counts(x) -> UniqueCountsResult:
    """``(values, counts)`` of the distinct values of ``x`` (NumPy 2 ``unique_counts``; NaNs
    each distinct). ``values`` as :func:`unique_values`; ``counts`` intp, no gradient.

    Args:
        x: Tensor of any shape (flattened).

    Returns:
        A named tuple: ``values`` (``x``'s dtype) and ``counts`` (intp), 1-D and of equal length.

    Raises:
        TypeError: for non-numeric input.
    """
    values, _, _, counts = _unique(x, None, False)
    return UniqueCountsResult(values, counts)


def unique_inverse(x) -> UniqueInverseResult:
    """``(values, inverse_indices)`` (NumPy 2 ``unique_inverse``): ``values[inverse_indices]``
    rebuilds ``x``; ``inverse_indices`` has ``x``'s shape (intp, no gradient).

    Args:
        x: Tensor of any shape (flattened).

    Returns:
        A named tuple: ``values`` (1-D, ``x``'s dtype) and ``inverse_indices`` (intp,
        ``x``'s shape).

    Raises:
        TypeError: for non-numeric input.
    """
    values, _, inverse, _ = _unique(x, None, False)
    return UniqueInverseResult(values, inverse)


def unique_all(x) -> UniqueAllResult:
    """``(values, indices, inverse_indices, counts)`` (NumPy 2 ``unique_all``): the distinct
    values, their first occurrences in the flattened ``x``, the inverse (``x``'s shape) and
    the counts. Derivative of ``values``: a gather at ``indices`` (see :func:`unique`).

    Args:
        x: Tensor of any shape (flattened).

    Returns:
        A named tuple: ``values`` (1-D, ``x``'s dtype), ``indices`` and ``counts`` (1-D intp) and
        ``inverse_indices`` (intp, ``x``'s shape).

    Raises:
        TypeError: for non-numeric input.
    """
    return UniqueAllResult(*_unique(x, None, False))


# -- positions -------------------------------------------------------------------------------
def flatnonzero(a) -> Tensor:
    """Indices of the nonzero elements of the flattened ``a`` (NumPy ``flatnonzero``): an intp
    Tensor, no gradient.

    Args:
        a: Tensor of any shape and dtype.

    Returns:
        1-D ``intp`` Tensor of the flat indices of the nonzero entries.

    Raises:
        TypeError: for non-numeric input.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.flatnonzero(tnp.asarray([[0, 3], [4, 0]]))
        Tensor([1, 2], dtype=int64)
    """
    return nonzero(ravel(_tensor(a)))[0]


def argwhere(a) -> Tensor:
    """The positions of the nonzero elements as rows (NumPy ``argwhere``).

    Returns:
        intp Tensor of shape ``(N, a.ndim)`` (``N`` nonzero elements, C order), no gradient.
        A 0-d ``a`` gives shape ``(1, 0)`` or ``(0, 0)``, as NumPy.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.argwhere(tnp.asarray([[0, 3], [4, 0]]))
        Tensor([[0, 1],
                [1, 0]], dtype=int64)
    """
    a = _tensor(a)
    if a.ndim == 0:
        return argwhere(reshape(a, (1,)))[:, :0]
    return stack(nonzero(a), axis=-1)


# -- selecting -------------------------------------------------------------------------------
def _weak(v):
    """Python numbers stay as they are (weakly typed); the rest becomes a Tensor."""
    return v if type(v) in (int, float, complex, bool) else _tensor(v)


def _dtype_of(v):
    return v.dtype if isinstance(v, Tensor) else v


def _bool_tensor(c, op, what):
    c = _tensor(c)
    if c.dtype != _np.bool_:
        raise TypeError(f"{op}: {what} must be boolean, got dtype {c.dtype} (shape {c.shape})")
    return c


def select(condlist, choicelist, default=0) -> Tensor:
    """Elementwise, the entry of the first choice whose condition holds, else ``default``
    (NumPy ``select``).

    Args:
        condlist: Sequence of boolean Tensors/arrays.
        choicelist: Sequence of the same length: Tensors, arrays or numbers.
        default: Where no condition holds: a number or Tensor.

    Returns:
        Tensor of the broadcast shape of all conditions and choices; dtype by NumPy's
        promotion of the choices and ``default`` (Python numbers weakly typed, as NumPy 2).

    Derivative: each element's cotangent goes to the choice (or default) that was selected;
    conditions get none.

    Raises:
        ValueError: if the lists differ in length or are empty, or the shapes do not
            broadcast.
        TypeError: if a condition is not boolean.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> x = tnp.arange(6)
        >>> tnp.select([x < 3, x > 3], [-x, x**2], 42)
        Tensor([ 0, -1, -2, 42, 16, 25], dtype=int64)
    """
    condlist, choicelist = list(condlist), list(choicelist)
    if len(condlist) != len(choicelist):
        raise ValueError(
            f"select: condlist ({len(condlist)}) and choicelist ({len(choicelist)}) must have "
            "the same length"
        )
    if not condlist:
        raise ValueError("select: needs at least one condition")
    conds = [_bool_tensor(c, "select", f"condlist[{i}]") for i, c in enumerate(condlist)]
    choices = [_weak(c) for c in choicelist]
    default = _weak(default)
    try:
        dtype = _tg_dtypes.result_type(*[_dtype_of(c) for c in choices + [default]])
    except TypeError as e:
        raise TypeError(f"select: the choices and default have no common dtype ({e})") from None
    shapes = [c.shape for c in conds] + [c.shape for c in choices + [default]
                                         if isinstance(c, Tensor)]
    try:
        shape = _np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(
            f"select: shapes {', '.join(str(s) for s in shapes)} do not broadcast together"
        ) from None
    dev = conds[0].device
    out = _ns.astype(default, dtype) if isinstance(default, Tensor) else Tensor(
        _np.asarray(default, dtype=dtype), device=dev)
    for cond, choice in zip(conds[::-1], choices[::-1]):
        choice = _ns.astype(choice, dtype) if isinstance(choice, Tensor) else Tensor(
            _np.asarray(choice, dtype=dtype), device=dev)
        out = _ops.Where.apply(cond, choice, out)
    return _ns.broadcast_to(out, shape)


def _piecewise_conds(x, condlist):
    if isinstance(condlist, (bool, _np.bool_)):
        return [condlist]
    if isinstance(condlist, (Tensor, _np.ndarray)):
        c = _tensor(condlist)
        if c.ndim == x.ndim:
            return [c]
        return [c[i] for i in range(c.shape[0])] if c.ndim else [c]
    condlist = list(condlist)
    if condlist and x.ndim != 0 and not isinstance(condlist[0], (list, tuple, _np.ndarray,
                                                                 Tensor)):
        return [condlist]
    return condlist


def piecewise(x, condlist, funclist, *args, **kw) -> Tensor:
    """Evaluate a piecewise-defined function (NumPy ``piecewise``): wherever ``condlist[i]``
    holds, the result is ``funclist[i](x[condlist[i]], *args, **kw)`` (or the constant
    ``funclist[i]``), and 0 where no condition holds.

    Args:
        x: Tensor (the domain).
        condlist: Boolean Tensors/arrays of ``x``'s shape (or one of them). Where several
            hold, the LAST one wins (NumPy's order of assignment).
        funclist: Callables ``f(values, *args, **kw)`` taking the 1-D Tensor of selected
            values and returning a Tensor of that length (or a scalar), or constants; one
            per condition, plus optionally one more for where no condition holds.
        *args, **kw: Passed to each callable.

    Returns:
        Tensor of ``x``'s shape and dtype (results are cast to it, as NumPy).

    Derivative: each function is differentiated on the values it was given (a masked
    gather), and its result is scattered into place; so a function only ever sees its own
    piece (no NaN from evaluating a branch outside its domain). The conditions get none.
    Under ``vmap`` the conditions must not differ between examples (use :func:`where`).

    Raises:
        ValueError: if the number of functions is neither ``len(condlist)`` nor one more.
        TypeError: if a condition is not boolean.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> x = tg.Tensor([-2.0, -1.0, 1.0, 4.0])
        >>> tnp.piecewise(x, [x < 0, x >= 0], [lambda v: -v, tnp.sqrt])
        Tensor([2., 1., 1., 2.], dtype=float32)
    """
    x = _tensor(x)
    funclist = list(funclist)
    conds = [_bool_tensor(c, "piecewise", f"condlist[{i}]")
             for i, c in enumerate(_piecewise_conds(x, condlist))]
    n, n2 = len(conds), len(funclist)
    if n == n2 - 1:
        if conds:
            anyc = conds[0]
            for c in conds[1:]:
                anyc = anyc | c
            conds.append(~anyc)
        else:
            conds.append(Tensor(_np.ones(x.shape, bool), device=x.device))
    elif n != n2:
        raise ValueError(
            f"piecewise: with {n} condition(s), either {n} or {n + 1} functions are expected, "
            f"got {n2}"
        )
    conds = [_ns.broadcast_to(c, x.shape) for c in conds]
    y = _zeros_like(x)
    for cond, func in zip(conds, funclist):
        if not callable(func):
            y = y.at[cond].set(func if not isinstance(func, Tensor) else func.astype(x.dtype))
            continue
        vals = x[cond]
        if vals.size > 0:
            res = func(vals, *args, **kw)
            res = _ns.astype(res, x.dtype) if isinstance(res, Tensor) else res
            y = y.at[cond].set(res)
    return y


def choose(a, choices, out=None, mode="raise") -> Tensor:
    """Pick, elementwise, the entry of ``choices[a]`` (NumPy ``choose``).

    Args:
        a: Integer Tensor/array of choice numbers in ``[0, n)`` (``n = len(choices)``).
        choices: Sequence of ``n`` Tensors/arrays (or one Tensor whose first axis holds them);
            ``a`` and all choices broadcast together.
        out: Must be None (Tensors are immutable).
        mode: Out-of-range ``a``: ``"raise"`` (an error), ``"wrap"`` (modulo ``n``) or
            ``"clip"`` (to ``[0, n - 1]``).

    Returns:
        Tensor of the broadcast shape; dtype by NumPy promotion of the choices.

    Derivative: each element's cotangent goes to the chosen entry (summed over
    broadcasting); ``a`` gets none.

    Raises:
        ValueError: with ``mode="raise"``, for a choice number outside ``[0, n)``; for an
            unknown ``mode``; if the shapes do not broadcast.
        TypeError: for a non-integer ``a`` or a given ``out``.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.choose(tnp.asarray([0, 1, 0]), [tnp.asarray([1.0, 2.0, 3.0]), 10.0 * tnp.ones(3)])
        Tensor([ 1., 10.,  3.], dtype=float32)
    """
    if out is not None:
        raise TypeError("choose: out= is not supported (Tensors are immutable); use the result")
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    a = _tensor(a) if _given_tensor(a) else Tensor(_np.asarray(a))
    if a.dtype.kind not in "iub":
        raise TypeError(f"choose: a must hold integer choice numbers, got dtype {a.dtype}")
    if isinstance(choices, Tensor):
        choices = [choices[i] for i in range(choices.shape[0])]
    choices = [_tensor(c) for c in choices]
    n = len(choices)
    if n == 0:
        raise ValueError("choose: needs at least one choice")
    try:
        shape = _np.broadcast_shapes(a.shape, *[c.shape for c in choices])
    except ValueError:
        raise ValueError(
            f"choose: a (shape {a.shape}) and the choices (shapes "
            f"{', '.join(str(c.shape) for c in choices)}) do not broadcast together"
        ) from None
    dtype = _tg_dtypes.result_type(*[c.dtype for c in choices])
    stacked = stack([_ns.broadcast_to(_ns.astype(c, dtype), shape) for c in choices], axis=0)
    idx = _ns.broadcast_to(a, shape)
    if mode == "wrap":
        idx = _ns.remainder(idx, n)
    elif mode == "clip":
        idx = _ns.clip(idx, 0, n - 1)
    elif not a.is_traced:
        vals = a.numpy()
        if vals.size and (vals.min() < 0 or vals.max() >= n):
            raise ValueError(f"choose: invalid entry in the choice array: every entry must be "
                             f"in [0, {n}) for {n} choices (mode='raise'), got "
                             f"{vals.min()}..{vals.max()}")
    else:  # traced: negative entries are sent out of range, so the gather raises
        idx = _ops.Where.apply(idx < 0, n, idx)
    return _take_along_axis(stacked, reshape(idx, (1,) + shape), axis=0)[0]


def compress(condition, a, axis=None, out=None) -> Tensor:
    """The slices of ``a`` along ``axis`` where ``condition`` is true (NumPy ``compress``).

    Args:
        condition: 1-D boolean (or truthy) Tensor/array; entries beyond ``a``'s length must be
            false; a shorter condition leaves the rest out.
        a: Tensor; flattened when ``axis`` is None.
        axis: The axis to select along.
        out: Must be None.

    Returns:
        Tensor with the selected slices (their number depends on ``condition``).

    Derivative: a gather (the cotangent goes back to the selected slices).

    Raises:
        ValueError: if ``condition`` is not 1-D; if the axis is out of range.
        IndexError: if ``condition`` is true beyond the end of the axis.
        TypeError: for a given ``out``.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.compress([False, True], tnp.asarray([[1, 2], [3, 4]]), axis=0)
        Tensor([[3, 4]], dtype=int64)
    """
    if out is not None:
        raise TypeError("compress: out= is not supported (Tensors are immutable)")
    a = _tensor(a)
    cond = _tensor(condition) if _given_tensor(condition) else Tensor(_np.asarray(condition))
    if cond.ndim != 1:
        raise ValueError(f"compress: condition must be 1-D, got shape {cond.shape}")
    if axis is None:
        a, axis = ravel(a), 0
    axis = _check_axis(axis, a.ndim, "compress")
    idx = nonzero(cond)[0]
    _check_bounds(idx, a.shape[axis], axis, "compress")
    return _gather(a, idx, axis)


def extract(condition, arr) -> Tensor:
    """The elements of ``arr`` where ``condition`` is nonzero, flattened (NumPy ``extract``:
    ``take(ravel(arr), flatnonzero(condition))``). Derivative: a gather.

    Raises:
        IndexError: if ``condition`` has a nonzero entry beyond ``arr``'s size.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> x = tnp.arange(6.0).reshape(2, 3)
        >>> tnp.extract(x > 3.0, x)
        Tensor([4., 5.], dtype=float32)
    """
    arr = ravel(_tensor(arr))
    cond = _tensor(condition) if _given_tensor(condition) else Tensor(_np.asarray(condition))
    idx = nonzero(ravel(cond))[0]
    _check_bounds(idx, arr.shape[0], 0, "extract")
    return _gather(arr, idx)


# -- binning ---------------------------------------------------------------------------------
def digitize(x, bins, right=False) -> Tensor:
    """The index of the bin each value of ``x`` falls in (NumPy ``digitize``).

    For increasing ``bins``: ``i`` with ``bins[i-1] <= x < bins[i]`` (``right=False``) or
    ``bins[i-1] < x <= bins[i]`` (``right=True``); for decreasing bins the inequalities turn
    around. Values below / above all bins give 0 / ``len(bins)``.

    Args:
        x: Real Tensor, array or number.
        bins: 1-D monotonic (increasing or decreasing) Tensor/array.
        right: Which side of each bin is closed.

    Returns:
        intp Tensor of ``x``'s shape, no gradient.

    Raises:
        TypeError: for complex ``x``.
        ValueError: if ``bins`` is not 1-D or not monotonic.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.digitize(tnp.asarray([0.2, 6.4, 3.0]), tnp.asarray([0.0, 1.0, 2.5, 4.0]))
        Tensor([1, 4, 3], dtype=int64)
    """
    x = _data(x)
    if x.dtype.kind == "c":
        raise TypeError("digitize: x may not be complex")
    bins = _data(bins)
    if bins.ndim != 1:
        raise ValueError(f"digitize: bins must be 1-D, got shape {bins.shape}")
    side = "left" if right else "right"
    if bins.shape[0] > 1:
        increasing = bool(_ns.all(bins[1:] >= bins[:-1]))
        if not increasing:
            if not bool(_ns.all(bins[1:] <= bins[:-1])):
                raise ValueError("digitize: bins must be monotonically increasing or decreasing")
            return bins.shape[0] - searchsorted(bins[::-1], x, side=side)
    return searchsorted(bins, x, side=side)


def _outer_edges(a, range_, op):
    """NumPy's ``_get_outer_edges``: ``(first, last)`` from ``range`` or the data (Tensors
    from the data's min/max, differentiable), an empty range widened by 0.5 each side."""
    if range_ is not None:
        try:
            first, last = range_
        except (TypeError, ValueError):
            raise ValueError(f"{op}: range must be a pair (min, max), got {range_!r}") from None
        if bool(first > last):
            raise ValueError(f"{op}: max must be larger than min in range ({first}, {last})")
        if not (bool(_np.isfinite(first) if not isinstance(first, Tensor) else
                     _ns.isfinite(first)) and bool(_np.isfinite(last) if not isinstance(
                         last, Tensor) else _ns.isfinite(last))):
            raise ValueError(f"{op}: supplied range of [{first}, {last}] is not finite")
    elif a.size == 0:
        first, last = 0, 1
    else:
        first, last = _ns.min(a), _ns.max(a)
        if not bool(_ns.isfinite(first) & _ns.isfinite(last)):
            raise ValueError(
                f"{op}: autodetected range of [{all_values(first)}, {all_values(last)}] is not "
                "finite"
            )
    if isinstance(first, Tensor) or isinstance(last, Tensor):
        same = first == last
        return _ops.Where.apply(same, first - 0.5, first), _ops.Where.apply(same, last + 0.5,
                                                                            last)
    if first == last:
        first, last = first - 0.5, last + 0.5
    return first, last


def _bin_edges(a, bins, range_, weights, op):
    """NumPy's ``_get_bin_edges`` with tapegrad ops: ``(edges, uniform)``."""
    if isinstance(bins, str):
        if a.is_traced:
            raise TypeError(
                f"{op}: bins={bins!r} estimates the number of bins from the data's values, "
                "which a transform is tracing; compute the edges outside it "
                "(numpy.histogram_bin_edges) and pass them as bins"
            )
        try:
            edges = _np.histogram_bin_edges(
                a.numpy(), bins, range_, None if weights is None else _tensor(weights).numpy())
        except (TypeError, ValueError) as e:
            raise type(e)(f"{op}: {e}") from None
        return Tensor(edges)
    if _np.ndim(bins) == 0 and not isinstance(bins, Tensor):
        try:
            nb = operator.index(bins)
        except TypeError:
            raise TypeError(f"{op}: bins must be an integer, a string or an array, got "
                            f"{bins!r}") from None
        if nb < 1:
            raise ValueError(f"{op}: bins must be positive when an integer, got {nb}")
        first, last = _outer_edges(a, range_, op)
        bin_type = _tg_dtypes.result_type(_dtype_of(first), _dtype_of(last), a.dtype)
        if bin_type.kind in "biu":
            bin_type = _tg_dtypes.result_type(bin_type, float)
        # numpy.linspace(first, last, nb + 1): computed in the dtype of first, last and a
        # Python float, then cast: arange(nb) * ((last - first) / nb) + first, then last.
        calc = _tg_dtypes.result_type(_dtype_of(first), _dtype_of(last), float(nb))
        f = _tensor(first) if _given_tensor(first) else Tensor(_np.asarray(first), device=a.device)
        la = _tensor(last) if _given_tensor(last) else Tensor(_np.asarray(last), device=a.device)
        f, la = _ns.astype(f, calc), _ns.astype(la, calc)
        step = (la - f) / nb
        ramp = Tensor(_np.arange(nb, dtype=calc), device=a.device) * step + f
        edges = _ns.astype(concatenate([ramp, reshape(la, (1,))]), bin_type)
        if nb > 1 and bool(_ns.any(edges[:-1] >= edges[1:])):
            raise ValueError(f"{op}: too many bins for the data range; cannot create {nb} "
                             "finite-sized bins")
        return edges
    edges = _tensor(bins) if _given_tensor(bins) else Tensor(_np.asarray(bins),
                                                                   device=a.device)
    if edges.ndim != 1:
        raise ValueError(f"{op}: bins must be 1-D when an array, got shape {edges.shape}")
    if edges.shape[0] > 1 and bool(_ns.any(edges[:-1] > edges[1:])):
        raise ValueError(f"{op}: bins must increase monotonically when an array")
    return edges


def _check_weights(a, weights, op):
    if weights is None:
        return None
    w = _tensor(weights)
    if w.shape != a.shape:
        raise ValueError(f"{op}: weights (shape {w.shape}) must have a's shape {a.shape}")
    return ravel(w)


def histogram_bin_edges(a, bins=10, range=None, weights=None) -> Tensor:  # noqa: A002
    """The bin edges :func:`histogram` uses (NumPy ``histogram_bin_edges``).

    Args:
        a: Real Tensor (flattened).
        bins: Number of equal-width bins (an int), their edges (a 1-D increasing
            Tensor/array), or the name of a NumPy estimator (``"auto"``, ``"fd"``, ...).
        range: ``(min, max)`` of the equal-width bins; default the data's min and max (an
            empty range is widened by 0.5 on each side).
        weights: Only checked (shape); estimators reject them, as NumPy.

    Returns:
        1-D Tensor of ``n + 1`` edges, dtype as NumPy (``a``'s floating dtype, float64 for
        integer data).

    Derivative: the equal-width edges are ``first + i * (last - first) / n``; with
    ``range=None`` they depend on ``min(a)`` and ``max(a)`` (ties split, as :func:`max`).
    Given edges pass through; estimated (string) edges are constants, and need a concrete
    ``a`` (not inside a transform).

    Raises:
        ValueError: for a non-positive bin count, a reversed or non-finite range, non-finite
            data with ``range=None``, non-monotonic or non-1-D edges, or too many bins for
            the range.
        TypeError: for a string ``bins`` inside a transform.
    """
    a = _tensor(a)
    w = _check_weights(a, weights, "histogram_bin_edges")
    return _bin_edges(ravel(a), bins, range, w, "histogram_bin_edges")


def histogram(a, bins=10, range=None, density=None, weights=None):  # noqa: A002
    """The histogram of ``a`` (NumPy ``histogram``): counts (or summed ``weights``) of the
    values in each bin; every bin is half-open ``[e_i, e_{i+1})`` except the last,
    ``[e_{n-1}, e_n]``; values outside the edges (and NaNs) are not counted.

    Args:
        a: Real Tensor (flattened).
        bins, range: See :func:`histogram_bin_edges`.
        density: Divide by the total and the bin widths, so the histogram integrates to 1.
        weights: Optional Tensor of ``a``'s shape: each value adds its weight instead of 1.

    Returns:
        ``(hist, bin_edges)``: ``hist`` intp counts without weights, of ``weights``' dtype
        with them (as NumPy); with ``density`` floating: the edges' dtype (float64 for
        float64 data, as NumPy; float32 data stays float32 where NumPy gives float64).

    Derivative: the counts are piecewise constant in ``a`` (no gradient); ``hist`` is linear
    in ``weights`` (a scatter-add: the cotangent of ``weights[i]`` is that of the bin holding
    ``a[i]``); with ``density`` the division by the widths differentiates through the edges
    (through ``min(a)``/``max(a)`` when ``range`` is None). Under ``vmap``, pass ``range`` (or
    edges): autodetected ranges are checked for finiteness, a decision per example.

    Raises:
        ValueError: as :func:`histogram_bin_edges`, or for ``weights`` of another shape.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> hist, edges = tnp.histogram(tnp.asarray([0.5, 1.5, 1.7, 3.0]), bins=3, range=(0, 3))
        >>> hist, edges
        (Tensor([1, 2, 1], dtype=int64), Tensor([0., 1., 2., 3.], dtype=float32))
        >>> w = tg.Tensor([1.0, 2.0, 3.0, 4.0])
        >>> tg.grad(lambda w: tnp.histogram(tnp.asarray([0.5, 1.5, 1.7, 3.0]), 3, (0, 3),
        ...                                 weights=w)[0][1])(w)
        Tensor([0., 1., 1., 0.], dtype=float32)
    """
    a = _tensor(a)
    w = _check_weights(a, weights, "histogram")
    a = ravel(a)
    edges = _bin_edges(a, bins, range, w, "histogram")
    n = edges.shape[0] - 1
    idx = searchsorted(edges, a, side="right") - 1
    first, last = edges[0], edges[-1]
    idx = _ops.Where.apply(a == last, n - 1, idx)
    keep = (a >= first) & (a <= last)
    idx = _ops.Where.apply(keep, idx, n)  # outside the edges: an extra bin, dropped below
    hist = bincount(idx, w, minlength=n + 1)[:n]
    if w is not None and hist.dtype != w.dtype:
        hist = _ns.astype(hist, w.dtype)
    if density:
        dt = edges.dtype if w is None else _tg_dtypes.result_type(w.dtype, edges.dtype)
        widths = _ns.astype(edges[1:] - edges[:-1], dt)
        hist = _ns.astype(hist, dt)
        hist = hist / widths / _ns.sum(hist)
    return hist, edges


# -- set operations --------------------------------------------------------------------------
def _flat(x):
    return ravel(_tensor(x))


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False):
    """The sorted values present in both ``ar1`` and ``ar2`` (NumPy ``intersect1d``).

    Args:
        ar1, ar2: Tensors/arrays (flattened).
        assume_unique: Both hold distinct values (skips :func:`unique`; with repeats the
            result is unspecified, as NumPy).
        return_indices: Also return the indices of the first occurrence of each common
            value in the flattened ``ar1`` and ``ar2``.

    Returns:
        The 1-D Tensor of common values (dtype: NumPy promotion of the two), or
        ``(values, ar1_indices, ar2_indices)``. NaN is never common (NaN != NaN).

    Derivative: the values are gathered from ``ar1`` (at each value's first occurrence), so
    only ``ar1`` gets a cotangent.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.intersect1d(tnp.asarray([1, 3, 4, 3]), tnp.asarray([3, 1, 2, 1]))
        Tensor([1, 3], dtype=int64)
    """
    a1, a2 = _flat(ar1), _flat(ar2)
    dtype = _tg_dtypes.result_type(a1.dtype, a2.dtype)
    if assume_unique:
        u1, u2 = a1, a2
        i1 = i2 = None
    else:
        u1, i1 = unique(a1, return_index=True)
        u2, i2 = unique(a2, return_index=True)
    pos1 = flatnonzero(isin(u1, u2, assume_unique=True))
    if assume_unique:
        pos1 = _gather(pos1, argsort(_gather(u1, pos1), kind="stable"))
    values = _ns.astype(_gather(u1, pos1), dtype)
    if not return_indices:
        return values
    if assume_unique:
        s2 = argsort(u2, kind="stable")
        pos2 = _gather(s2, searchsorted(u2, values, sorter=s2))
    else:
        pos2 = searchsorted(u2, values)
    ind1 = pos1 if i1 is None else _gather(i1, pos1)
    ind2 = pos2 if i2 is None else _gather(i2, pos2)
    return values, ind1, ind2


_SET_OP = """
    Args:
        ar1, ar2: Tensors of any shapes (flattened).{unique}

    Returns:
        1-D Tensor; dtype {dtype}.

    Raises:
        TypeError: for non-numeric input.
"""
_ASSUME_UNIQUE = """
        assume_unique: Both inputs hold distinct values (skips the deduplication)."""


@_sections(_SET_OP, unique="", dtype="by NumPy promotion of the two")
def union1d(ar1, ar2) -> Tensor:
    """The sorted distinct values of ``ar1`` and ``ar2`` together (NumPy ``union1d``:
    ``unique(concatenate((ravel(ar1), ravel(ar2))))``).

    Derivative: a gather at each value's first occurrence in the concatenation (in ``ar1``
    if it is there, else in ``ar2``).

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.union1d(tnp.asarray([-1, 0, 1]), tnp.asarray([-2, 0, 2]))
        Tensor([-2, -1,  0,  1,  2], dtype=int64)
    """
    return unique(concatenate([_flat(ar1), _flat(ar2)]))  # pyright: ignore[reportReturnType]


def _distinct(ar, assume_unique) -> Tensor:
    """The distinct values of ``ar``: flattened as it is with ``assume_unique``, else
    :func:`unique`."""
    return _flat(ar) if assume_unique else unique(ar)  # pyright: ignore[reportReturnType]


@_sections(_SET_OP, unique=_ASSUME_UNIQUE, dtype="``ar1``'s")
def setdiff1d(ar1, ar2, assume_unique=False) -> Tensor:
    """The sorted distinct values of ``ar1`` that are not in ``ar2`` (NumPy ``setdiff1d``;
    with ``assume_unique`` the values keep ``ar1``'s order, as NumPy). Dtype: ``ar1``'s.

    Derivative: a gather from ``ar1`` at each value's first occurrence.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.setdiff1d(tnp.asarray([1, 2, 3, 2, 4, 1]), tnp.asarray([3, 4, 5, 6]))
        Tensor([1, 2], dtype=int64)
    """
    u1, u2 = _distinct(ar1, assume_unique), _distinct(ar2, assume_unique)
    keep = isin(u1, u2, assume_unique=True, invert=True)
    return _gather(u1, flatnonzero(keep))


@_sections(_SET_OP, unique=_ASSUME_UNIQUE, dtype="by NumPy promotion of the two")
def setxor1d(ar1, ar2, assume_unique=False) -> Tensor:
    """The sorted values in exactly one of ``ar1`` and ``ar2`` (NumPy ``setxor1d``). Dtype:
    NumPy promotion of the two. (NaNs are never equal, so each NaN is kept, as NumPy.)

    Derivative: a gather at each value's first occurrence in ``ar1`` or ``ar2``.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.setxor1d(tnp.asarray([1, 2, 3, 2, 4]), tnp.asarray([2, 3, 5, 7, 5]))
        Tensor([1, 4, 5, 7], dtype=int64)
    """
    u1, u2 = _distinct(ar1, assume_unique), _distinct(ar2, assume_unique)
    aux = concatenate([u1, u2])
    if aux.size == 0:
        return aux
    values, _, _, counts = _unique(aux, None, False)
    return _gather(values, flatnonzero(counts == 1))

