"""Sorting, searching and counting primitives.

Every op here returns integers or booleans (positions, counts, memberships) and has no gradient
of its own, except :class:`Bincount`, which is linear in its ``weights``. The differentiable
functions built on them live in :mod:`tapegrad.numpy`: ``sort`` and ``partition`` gather the
input through the permutation :class:`ArgSort` / :class:`ArgPartition` return, ``unique``
gathers the first occurrence of each value through :class:`Unique`'s ``index`` output, so
their derivatives are those of a gather (the cotangent scattered back to the chosen
positions), exact to every order.

=================  =====================================================================
primitive          what it returns (NumPy function)
=================  =====================================================================
ArgSort            the sorting permutation along an axis (``argsort``)
ArgPartition       a partitioning permutation along an axis (``argpartition``)
LexSort            the permutation sorting by several keys (``lexsort``)
SearchSorted       insertion positions into a sorted 1-D array (``searchsorted``)
NonZero            the positions of the nonzero elements, one array per axis (``nonzero``)
Unique             first-occurrence index, inverse and counts of the distinct values
Bincount           counts, or sums of ``weights``, per non-negative integer (``bincount``)
IsIn               elementwise membership in a set of values (``isin``)
=================  =====================================================================

Output sizes of :class:`NonZero`, :class:`Unique` and :class:`Bincount` depend on the values,
not only on the shapes: fine eagerly and under ``grad``/``vjp``/``jvp``. A ``jit`` replay runs
the forward rules again, so a jitted function of such values recomputes them; but ``jit``
compiles a program for the sizes it traced (its constants, such as a gradient's seed, have
those sizes), so a jitted *gradient* through a value-dependent size is only valid for inputs
that give the traced sizes (as for boolean-mask indexing). Their batching rules (``vmap``)
compute every example at once and stack the results when all examples have the same output
size; examples of different sizes cannot be stacked, and raise a ``ValueError`` that says so
(the per-example loop could not stack them either). The ops whose inputs pair up example by
example (:class:`SearchSorted`, :class:`IsIn`, :class:`Bincount`, :class:`Unique`,
:class:`NonZero`) take a static ``nbatch``: the number of leading axes of their inputs that are
batch axes, handled in one forward call.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from tapegrad.core.function import Function
from tapegrad.core.tensor import Tensor
from tapegrad.ops._batching import axis_rule, batch_all
from tapegrad.ops._registry import expose, tensor_arg
from tapegrad.ops.movement import Flip, GetItem, IndexSlot, Reshape, check_axis

__all__ = [
    "ArgSort",
    "ArgPartition",
    "LexSort",
    "SearchSorted",
    "NonZero",
    "Unique",
    "Bincount",
    "IsIn",
    "sort_kind",
    "static_ints",
    "data_operand",
]

_INTP = np.dtype(np.intp)
_KINDS = ("quicksort", "mergesort", "heapsort", "stable")


# -- helpers ---------------------------------------------------------------------------------
def sort_kind(kind, stable, op: str):
    """NumPy's ``kind``/``stable`` pair of a sort as one ``kind`` (``None``: the default).

    Raises:
        ValueError: for an unknown kind, or both ``kind`` and ``stable`` given, naming ``op``.
    """
    if stable is not None:
        if kind is not None:
            raise ValueError(f"{op}: give either kind or stable, not both")
        return "stable" if stable else None
    if kind is None:
        return None
    if not isinstance(kind, str) or kind.lower() not in _KINDS:
        raise ValueError(f"{op}: kind must be one of {', '.join(_KINDS)}, got {kind!r}")
    return kind.lower()


def no_order(order, op: str) -> None:
    """NumPy's ``order=`` (field names of structured arrays), which Tensors do not have.

    Raises:
        TypeError: if ``order`` is not None, naming ``op``.
    """
    if order is not None:
        raise TypeError(f"{op}: order= sorts structured arrays by field; Tensors have no fields "
                        "(leave order=None)")


def static_ints(v, op: str, name: str):
    """``v`` (an int, a sequence of ints, a NumPy array or an integer Tensor) as a NumPy intp
    array of the same shape, for values that fix the structure of a result (a ``kth``, an
    insertion position).

    A traced Tensor's values are read element by element through ``int()``, so ``jit`` records
    a guard on each (a replay with other values retraces) and ``vmap`` refuses a per-example
    value with a clear ``TypeError``.

    Raises:
        TypeError: if the values are not integers.
    """
    if isinstance(v, Tensor):
        if v.dtype.kind not in "iu":
            raise TypeError(f"{op}: {name} must be integers, got a Tensor of dtype {v.dtype}")
        if not v.is_traced:
            return np.asarray(v.numpy(), dtype=np.intp)
        flat = Reshape.api(v, (v.size,))
        vals = [int(flat[i]) for i in range(v.size)]
        return np.asarray(vals, dtype=np.intp).reshape(v.shape)
    arr = np.asarray(v)
    if arr.size == 0 and arr.dtype.kind in "fV":
        arr = arr.astype(np.intp)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{op}: {name} must be integers, got {v!r}")
    return arr.astype(np.intp)


def data_operand(v):
    """An operand compared by value (searched for, tested for membership): Tensors pass, other
    data becomes a constant exactly as NumPy reads it (a Python float or a list of floats is
    float64), so that comparisons are NumPy's."""
    if isinstance(v, Tensor):
        return v
    try:
        arr = np.asarray(v)
    except (TypeError, ValueError):
        arr = None
    if arr is None or arr.dtype.kind not in "biufc":
        return tensor_arg(v)
    return Tensor(arr)


def _rows(xp, nbatch: int, fn, *arrays):
    """``fn`` applied to each example of ``arrays`` (their first ``nbatch`` axes are batch
    axes; ``None`` entries pass as ``None``), the results stacked on those axes.

    An empty batch runs ``fn`` once on zeros of one example's shape, for the output shapes.

    Raises:
        ValueError: if the examples' results differ in shape (the sizes depend on the values).
    """
    lead = next(a.shape[:nbatch] for a in arrays if a is not None)
    count = math.prod(lead)
    flat = [None if a is None else a.reshape((count,) + a.shape[nbatch:]) for a in arrays]
    if count == 0:
        ex = [None if a is None else xp.zeros(a.shape[1:], a.dtype) for a in flat]
        outs = fn(*ex)
        single = not isinstance(outs, tuple)
        outs = (outs,) if single else outs
        res = tuple(xp.zeros(lead + o.shape, o.dtype) for o in outs)
        return res[0] if single else res
    results = []
    for i in range(count):
        outs = fn(*[None if a is None else a[i] for a in flat])
        results.append(outs)
    single = not isinstance(results[0], tuple)
    if single:
        results = [(r,) for r in results]
    shapes = {tuple(o.shape for o in r) for r in results}
    if len(shapes) != 1:
        raise ValueError(
            "the examples of this vmap give results of different sizes "
            f"({sorted(shapes)[:3]}...): the output size depends on each example's values, so "
            "the results cannot be stacked"
        )
    res = tuple(xp.stack([r[j] for r in results]).reshape(lead + results[0][j].shape)
                for j in range(len(results[0])))
    return res[0] if single else res


def _batch_lead(args, batched, size, nbatch):
    """The batching rule of an ``nbatch`` op: every Tensor argument with the new batch axis in
    front (an unbatched one broadcast), and ``nbatch + 1``."""
    return batch_all(args, batched, size), nbatch + 1


def _empty_batch(cls, args, batched, **params):
    """An op's result for an empty batch: the op on one example, as ``vmap`` makes it (zeros
    of one example's shape for the batched arguments, the unbatched ones as they are), with a
    batch axis of length 0 in front: the per-example sizes an all-zero example gives."""
    ex = [Tensor(np.zeros(a.shape[1:], a.dtype), device=a.device) if b else a
          for a, b in zip(args, batched)]
    out = cls.apply(*ex, **params)
    outs = out if isinstance(out, tuple) else (out,)
    res = tuple(Reshape.api(o, (1,) + o.shape)[:0] for o in outs)
    return res if isinstance(out, tuple) else res[0]


class _IndexFunction(Function):
    """Base of the integer-valued ops: no gradient, intp outputs, errors passed through when
    they already name the op."""

    differentiable = False

    @classmethod
    def _explain(cls, e, arrays, params=None):
        msg = str(e)
        if msg.startswith(cls._name() + ":"):
            return type(e)(msg)
        return super()._explain(e, arrays, params)

    @classmethod
    def output_dtype(cls, *dtypes, **params):
        return _INTP


# -- sorting ---------------------------------------------------------------------------------
@expose
class ArgSort(_IndexFunction):
    """The permutation that sorts ``x`` along ``axis`` (NumPy ``argsort``); no gradient.

    NaNs sort to the end; complex values sort lexicographically (real part, then imaginary).
    """

    oper = "argsort"
    names = ("argsort",)
    methods = ("argsort",)
    batch = axis_rule("axis", none_means_all=False)  # vmap: the axis moves past the batch

    @staticmethod
    def api(a, axis=-1, kind=None, order=None, *, stable=None, descending=False) -> Tensor:
        """Indices that sort ``a`` along ``axis`` (NumPy ``argsort``).

        Args:
            a: Tensor of any real or complex dtype (complex sorts lexicographically; NaNs go
                last). As NumPy, a 0-d ``a`` counts as 1-D.
            axis: The axis to sort along; ``None`` sorts the flattened Tensor.
            kind: ``"quicksort"`` (default), ``"mergesort"``, ``"heapsort"`` or ``"stable"``;
                ``"stable"``/``"mergesort"`` keep equal elements in their order. (On a GPU
                every sort is stable.)
            order: Must be None (Tensors have no structured dtypes).
            stable: ``True`` for a stable sort (NumPy 2's spelling of ``kind="stable"``).
            descending: Sort from largest to smallest (the array API's keyword); equal
                elements still keep their order under a stable sort.

        Returns:
            intp (int64) Tensor of ``a``'s shape (1-D for ``axis=None``), no gradient. Use it
            with :func:`take_along_axis` to gather ``a`` (that is :func:`sort`, which is
            differentiable).

        Raises:
            ValueError: for an axis out of range, an unknown ``kind``, or both ``kind`` and
                ``stable``.
            TypeError: if ``order`` is given.

        Example:
            >>> import tapegrad.numpy as tnp
            >>> tnp.argsort(tnp.asarray([3.0, 1.0, 2.0]))
            Tensor([1, 2, 0], dtype=int64)
        """
        a = a if type(a) is Tensor else tensor_arg(a)
        no_order(order, "argsort")
        kind = sort_kind(kind, stable, "argsort")
        if axis is None or a.ndim == 0:
            a, axis = Reshape.api(a, (a.size,)), 0
        axis = check_axis(axis, a.ndim, "argsort")
        if not descending:
            return ArgSort.apply(a, axis=axis, kind=kind)
        # the ascending order of the reversed Tensor, read backwards: the largest first, and
        # among equal elements the earliest first (stable)
        rev = ArgSort.apply(Flip.apply(a, axis=(axis,)), axis=axis, kind=kind)
        return Flip.apply((a.shape[axis] - 1) - rev, axis=(axis,))

    @staticmethod
    def forward(ctx, x, axis=-1, kind=None):
        check_axis(axis, x.ndim, "argsort")
        if ctx.backend is np:
            return np.argsort(x, axis=axis, kind=kind)
        return ctx.backend.argsort(x, axis=axis)  # pragma: no cover - GPU only (stable)

    @classmethod
    def output_shape(cls, shape, axis=-1, kind=None):
        check_axis(axis, len(shape), "argsort")
        return tuple(shape)


@expose
class ArgPartition(_IndexFunction):
    """A permutation that partitions ``x`` along ``axis`` around the ``kth`` positions (NumPy
    ``argpartition``): the element at each ``kth`` position is the one a full sort puts there,
    smaller ones come before it and larger ones after (in no particular order). No gradient.
    """

    oper = "argpartition"
    names = ("argpartition",)
    methods = ("argpartition",)
    batch = axis_rule("axis", none_means_all=False)  # vmap: the axis moves past the batch

    @staticmethod
    def api(a, kth, axis=-1, kind="introselect", order=None) -> Tensor:
        """Indices that partition ``a`` along ``axis`` around position(s) ``kth`` (NumPy
        ``argpartition``).

        Args:
            a: Real or complex Tensor (a 0-d one counts as 1-D, as NumPy).
            kth: Int or sequence of ints (negative counts from the end): the positions that
                hold the element a full sort puts there. Static values: a traced Tensor
                ``kth`` is read through ``int()`` (a guard under ``jit``).
            axis: The axis; ``None`` partitions the flattened Tensor.
            kind: ``"introselect"`` (the only kind).
            order: Must be None.

        Returns:
            intp Tensor of ``a``'s shape (1-D for ``axis=None``), no gradient; the order
            within each side is unspecified (NumPy's).

        Raises:
            ValueError: if a ``kth`` is out of range for the axis, the axis is out of range,
                or ``kind`` is not ``"introselect"``.
            TypeError: for a non-integer ``kth`` or a given ``order``.
        """
        a = a if type(a) is Tensor else tensor_arg(a)
        no_order(order, "argpartition")
        if kind != "introselect":
            raise ValueError(f"argpartition: kind must be 'introselect', got {kind!r}")
        if axis is None or a.ndim == 0:
            a, axis = Reshape.api(a, (a.size,)), 0
        axis = check_axis(axis, a.ndim, "argpartition")
        kth = static_ints(kth, "argpartition", "kth")
        if kth.ndim > 1:
            raise ValueError(f"argpartition: kth must be an int or 1-D, got shape {kth.shape}")
        n = a.shape[axis]
        bad = kth[(kth >= n) | (kth < -n)]
        if bad.size:
            raise ValueError(
                f"argpartition: kth={int(bad.reshape(-1)[0])} is out of bounds for axis {axis} "
                f"of size {n} (shape {a.shape})"
            )
        kth = int(kth) if kth.ndim == 0 else tuple(int(k) for k in kth)
        return ArgPartition.apply(a, kth=kth, axis=axis)

    @staticmethod
    def forward(ctx, x, kth=0, axis=-1):
        return ctx.backend.argpartition(x, kth, axis=axis)

    @classmethod
    def output_shape(cls, shape, kth=0, axis=-1):
        check_axis(axis, len(shape), "argpartition")
        return tuple(shape)


@expose
class LexSort(_IndexFunction):
    """The permutation that sorts by several keys (NumPy ``lexsort``): the LAST key is the
    primary one, earlier keys break its ties; a stable sort. No gradient."""

    oper = "lexsort"
    names = ("lexsort",)

    @staticmethod
    def batch(args, batched, size, axis=-1):
        keys = batch_all(args, batched, size)
        if keys[0].ndim == 1:  # 0-d keys: the permutation of one element
            return Tensor(np.zeros(size, np.intp))
        return LexSort.apply(*keys, axis=check_axis(axis, keys[0].ndim - 1, "lexsort") + 1)

    @staticmethod
    def api(keys, axis=-1) -> Tensor:
        """Indirect stable sort by several keys (NumPy ``lexsort``): sorts by ``keys[-1]``,
        then by ``keys[-2]`` among equal ``keys[-1]``, and so on.

        Args:
            keys: A sequence of equal-shape Tensors/arrays, or one Tensor whose first axis
                holds the keys.
            axis: The axis to sort along (of each key).

        Returns:
            intp Tensor of a key's shape (the permutation along ``axis``), no gradient.

        Raises:
            TypeError: for an empty sequence of keys.
            ValueError: if the keys' shapes differ or the axis is out of range.

        Example:
            >>> import tapegrad.numpy as tnp
            >>> surnames = tnp.asarray([1, 0, 1]); first = tnp.asarray([2, 5, 1])
            >>> tnp.lexsort((first, surnames))
            Tensor([1, 2, 0], dtype=int64)
        """
        if isinstance(keys, Tensor) or (hasattr(keys, "shape") and hasattr(keys, "dtype")):
            k = tensor_arg(keys)
            if k.ndim == 0:
                raise TypeError("lexsort: keys must be a sequence of arrays or an array with "
                                "at least one axis, got a 0-d Tensor")
            keys = [k[i] for i in range(k.shape[0])]
        else:
            keys = [data_operand(k) for k in keys]
            keys = [k if isinstance(k, Tensor) else tensor_arg(k) for k in keys]
        if not keys:
            raise TypeError("lexsort: need a sequence of at least one key")
        shapes = {k.shape for k in keys}
        if len(shapes) != 1:
            raise ValueError("lexsort: all keys need the same shape, got "
                             f"{', '.join(str(k.shape) for k in keys)}")
        nd = keys[0].ndim
        if nd == 0:
            return LexSort.apply(*keys, axis=-1)
        return LexSort.apply(*keys, axis=check_axis(axis, nd, "lexsort"))

    @staticmethod
    def forward(ctx, *keys, axis=-1):
        return ctx.backend.lexsort(keys, axis=axis)

    @classmethod
    def output_shape(cls, *shapes, axis=-1):
        return tuple(shapes[0])


# -- searching -------------------------------------------------------------------------------
@expose
class SearchSorted(_IndexFunction):
    """Positions at which to insert ``v`` into the sorted 1-D ``a`` to keep it sorted (NumPy
    ``searchsorted``); no gradient. With ``nbatch = k``, the first ``k`` axes of ``a`` and
    ``v`` are batch axes (one sorted ``a`` per example)."""

    oper = "searchsorted"
    names = ("searchsorted",)

    @staticmethod
    def batch(args, batched, size, side="left", nbatch=0):
        a, v = args
        if not batched[0] and nbatch == 0:
            return SearchSorted.apply(a, v, side=side)
        if size == 0:
            return _empty_batch(SearchSorted, args, batched, side=side, nbatch=nbatch)
        (a, v), nb = _batch_lead([a, v], batched, size, nbatch)
        return SearchSorted.apply(a, v, side=side, nbatch=nb)

    @staticmethod
    def api(a, v, side="left", sorter=None) -> Tensor:
        """Insertion positions of ``v`` into the sorted 1-D ``a`` (NumPy ``searchsorted``).

        ``side="left"``: the first position ``i`` with ``v <= a[i]`` (``a[i-1] < v <= a[i]``);
        ``"right"``: the last (``a[i-1] <= v < a[i]``). The comparison is NumPy's in the common
        dtype of ``a`` and ``v`` (Python numbers and lists are read as NumPy reads them: a
        Python float is float64); NaNs count as larger than everything.

        Args:
            a: 1-D Tensor sorted ascending (or any order with ``sorter``).
            v: Values to place: a number, array or Tensor of any shape.
            side: ``"left"`` or ``"right"``.
            sorter: Optional integer array of the permutation that sorts ``a``
                (``argsort(a)``).

        Returns:
            intp Tensor of ``v``'s shape, no gradient (the result is piecewise constant).

        Raises:
            ValueError: if ``a`` is not 1-D or ``side`` is neither ``"left"`` nor ``"right"``.

        Example:
            >>> import tapegrad.numpy as tnp
            >>> tnp.searchsorted(tnp.asarray([1.0, 2.0, 3.0]), tnp.asarray([2.0, 2.5]))
            Tensor([1, 2], dtype=int64)
        """
        a = tensor_arg(a)
        if a.ndim != 1:
            raise ValueError(f"searchsorted: a must be 1-D, got shape {a.shape}")
        if side not in ("left", "right"):
            raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if sorter is not None:
            sorter = static_ints(sorter, "searchsorted", "sorter") if not isinstance(
                sorter, Tensor) else sorter
            if tuple(sorter.shape) != a.shape:
                raise ValueError(
                    f"searchsorted: sorter must have a's shape {a.shape}, got {tuple(sorter.shape)}"
                )
            a = GetItem.apply(a, sorter, key=(IndexSlot(0, False),))
        return SearchSorted.apply(a, data_operand(v), side=side)

    @staticmethod
    def forward(ctx, a, v, side="left", nbatch=0):
        xp = ctx.backend
        if nbatch == 0:
            return xp.asarray(xp.searchsorted(a, v, side=side))
        return _rows(xp, nbatch, lambda r, w: xp.searchsorted(r, w, side=side), a, v)

    @classmethod
    def output_shape(cls, a_shape, v_shape, side="left", nbatch=0):
        return tuple(v_shape)


@expose
class IsIn(Function):
    """Whether each element of ``element`` is in ``test_elements`` (NumPy ``isin``); a boolean
    result of ``element``'s shape, no gradient. With ``nbatch = k``, the first ``k`` axes of
    both are batch axes (one set per example)."""

    oper = "isin"
    differentiable = False
    names = ("isin",)

    @staticmethod
    def batch(args, batched, size, invert=False, assume_unique=False, nbatch=0):
        element, test = args
        if not batched[1] and nbatch == 0:
            return IsIn.apply(element, test, invert=invert, assume_unique=assume_unique)
        if size == 0:
            return _empty_batch(IsIn, args, batched, invert=invert, assume_unique=assume_unique,
                                nbatch=nbatch)
        (element, test), nb = _batch_lead([element, test], batched, size, nbatch)
        return IsIn.apply(element, test, invert=invert, assume_unique=assume_unique, nbatch=nb)

    @staticmethod
    def api(element, test_elements, assume_unique=False, invert=False, *, kind=None) -> Tensor:
        """Elementwise membership test (NumPy ``isin``): ``element[i]`` equals some entry of
        ``test_elements`` (compared in their common dtype, as NumPy; NaN is in no set).

        Args:
            element: Tensor, array or number.
            test_elements: The values to test against (any shape; flattened).
            assume_unique: Both inputs hold distinct values (a faster algorithm).
            invert: Return ``not isin`` (faster than negating).
            kind: NumPy's algorithm choice (``None``, ``"sort"`` or ``"table"``); the result
                does not depend on it.

        Returns:
            Boolean Tensor of ``element``'s shape, no gradient.

        Raises:
            ValueError: for an unknown ``kind``.

        Example:
            >>> import tapegrad.numpy as tnp
            >>> tnp.isin(tnp.asarray([1, 2, 3]), [2, 5])
            Tensor([False,  True, False], dtype=bool)
        """
        if kind not in (None, "sort", "table"):
            raise ValueError(f"isin: kind must be None, 'sort' or 'table', got {kind!r}")
        return IsIn.apply(data_operand(element), data_operand(test_elements), invert=bool(invert),
                          assume_unique=bool(assume_unique))

    @staticmethod
    def forward(ctx, element, test, invert=False, assume_unique=False, nbatch=0):
        xp = ctx.backend
        if nbatch == 0:
            return xp.asarray(xp.isin(element, test, assume_unique=assume_unique, invert=invert))
        return _rows(xp, nbatch, lambda e, t: xp.isin(e, t, assume_unique=assume_unique,
                                                      invert=invert), element, test)

    @classmethod
    def output_shape(cls, e_shape, t_shape, **params):
        return tuple(e_shape)

    @classmethod
    def output_dtype(cls, *dtypes, **params):
        return np.dtype(np.bool_)


# -- data-dependent sizes --------------------------------------------------------------------
@expose
class NonZero(_IndexFunction):
    """The indices of the nonzero elements, one intp array per axis, in C order (NumPy
    ``nonzero``); no gradient. The number of indices depends on the values.

    With ``nbatch = k`` the first ``k`` axes are batch axes: one tuple of index arrays per
    example (for the non-batch axes), stacked, when every example has the same number of
    nonzero elements.
    """

    oper = "nonzero"
    names = ("nonzero",)
    methods = ("nonzero",)

    @staticmethod
    def batch(args, batched, size, nbatch=0):
        return NonZero.apply(args[0], nbatch=nbatch + 1)

    @staticmethod
    def api(a) -> tuple:
        """Indices of the nonzero (or True) elements (NumPy ``nonzero``; ``where(cond)`` with
        one argument is the same).

        Returns:
            A tuple of ``a.ndim`` intp Tensors of equal length, the positions in C order; no
            gradient. Index ``a`` with the tuple to gather the nonzero values (a
            differentiable gather). Under ``vmap`` every example must have the same number of
            nonzero elements (a ``ValueError`` otherwise).

        Raises:
            ValueError: for a 0-d ``a`` (NumPy 2): use ``nonzero(atleast_1d(a))``.

        Example:
            >>> import tapegrad.numpy as tnp
            >>> tnp.nonzero(tnp.asarray([[0.0, 2.0], [3.0, 0.0]]))
            (Tensor([0, 1], dtype=int64), Tensor([1, 0], dtype=int64))
        """
        a = a if type(a) is Tensor else tensor_arg(a)
        if a.ndim == 0:
            raise ValueError("nonzero: calling nonzero on a 0-d Tensor is not allowed; use "
                             "nonzero(atleast_1d(a))")
        out = NonZero.apply(a)
        return out if isinstance(out, tuple) else (out,)

    @staticmethod
    def forward(ctx, x, nbatch=0):
        xp = ctx.backend
        if x.ndim == nbatch:
            raise ValueError("nonzero: calling nonzero on a 0-d Tensor is not allowed; use "
                             "nonzero(atleast_1d(a))")
        idx = xp.nonzero(x)
        if nbatch == 0:
            return idx[0] if len(idx) == 1 else tuple(idx)  # one output: an array, not a tuple
        lead = x.shape[:nbatch]
        rows = math.prod(lead)
        counts = xp.count_nonzero(x.reshape((rows, -1)), axis=1) if rows else xp.zeros(0)
        c = int(counts[0]) if rows else 0
        if rows and bool((counts != c).any()):
            raise ValueError(
                "nonzero under vmap: the examples have different numbers of nonzero elements "
                f"({int(counts.min())} to {int(counts.max())}), so their indices cannot be "
                "stacked; use tnp.where(cond, x, 0) or a fixed-size selection instead"
            )
        out = tuple(i.reshape(lead + (c,)) for i in idx[nbatch:])
        return out[0] if len(out) == 1 else out

    @classmethod
    def output_shape(cls, shape, nbatch=0):
        raise NotImplementedError("nonzero: the output size depends on the values")

    @classmethod
    def output_dtype(cls, dtype, nbatch=0):
        return _INTP


@expose
class Unique(_IndexFunction):
    """The distinct values of ``x``, as three intp arrays (NumPy ``unique`` with
    ``return_index``, ``return_inverse`` and ``return_counts``): ``index`` (the first
    occurrence of each distinct value, in sorted order of the values), ``inverse`` (for each
    element, the position of its value among the distinct ones) and ``counts``. With
    ``axis=None`` the input is 1-D (per example: ``nbatch`` leading batch axes); otherwise
    distinct slices along ``axis`` are found. No gradient: the values are gathered at
    ``index`` by :func:`tapegrad.numpy.unique`, which is differentiable.
    """

    oper = "unique"

    @staticmethod
    def batch(args, batched, size, axis=None, equal_nan=True, nbatch=0):
        ax = None if axis is None else axis + 1
        return Unique.apply(args[0], axis=ax, equal_nan=equal_nan, nbatch=nbatch + 1)

    @staticmethod
    def forward(ctx, x, axis=None, equal_nan=True, nbatch=0):
        xp = ctx.backend

        def one(r):
            kw = {} if axis is None else {"axis": axis - nbatch}
            if xp is np:
                kw["equal_nan"] = equal_nan
            _, index, inverse, counts = xp.unique(r, return_index=True, return_inverse=True,
                                                  return_counts=True, **kw)
            return (index.astype(np.intp), inverse.reshape(-1).astype(np.intp),
                    counts.astype(np.intp))

        if nbatch == 0:
            return one(x)
        return _rows(xp, nbatch, one, x)

    @classmethod
    def output_shape(cls, shape, **params):
        raise NotImplementedError("unique: the output size depends on the values")

    @classmethod
    def output_dtype(cls, dtype, **params):
        return [_INTP, _INTP, _INTP]


def _bincount_dtype(wdtype):
    """The dtype of weighted counts: floating and complex weights keep theirs (float32 stays
    float32), integer and boolean weights give float64 (NumPy)."""
    wdtype = np.dtype(wdtype)
    return wdtype if wdtype.kind in "fcV" else np.dtype(np.float64)


@expose
class Bincount(Function):
    """The number of occurrences of each value ``0..n-1`` in the non-negative integer ``x``
    (NumPy ``bincount``), or with ``weights`` the sum of the weights of the elements equal to
    each value; ``n = max(max(x) + 1, minlength)``, so the length depends on the values.

    Derivative: linear in ``weights``; the cotangent of ``weights[i]`` is the output
    cotangent at bin ``x[i]`` (a gather). ``x`` is piecewise constant (no gradient). Forward
    mode transposes the backward rule (the op is linear).

    With ``nbatch = k`` the first ``k`` axes of ``x`` (and ``weights``) are batch axes; every
    example must then have the same length ``n`` (pass a ``minlength`` at least as large as
    every example's ``max(x) + 1``).
    """

    oper = "bincount"
    names = ("bincount",)
    nondiff_argnums = (0,)

    @staticmethod
    def batch(args, batched, size, minlength=0, nbatch=0):
        x, w = args
        if size == 0:
            return _empty_batch(Bincount, args, batched, minlength=minlength, nbatch=nbatch)
        if w is None:
            (x,), nb = _batch_lead([x], batched[:1], size, nbatch)
            return Bincount.apply(x, None, minlength=minlength, nbatch=nb)
        (x, w), nb = _batch_lead([x, w], batched, size, nbatch)
        return Bincount.apply(x, w, minlength=minlength, nbatch=nb)

    @staticmethod
    def api(x, weights=None, minlength=0) -> Tensor:
        """Counts (or summed ``weights``) per value of a non-negative integer array (NumPy
        ``bincount``).

        Args:
            x: 1-D Tensor/array of non-negative integers (or booleans).
            weights: Optional Tensor of ``x``'s shape; bin ``j`` sums the weights of the
                elements equal to ``j``. Differentiable.
            minlength: The least number of bins.

        Returns:
            1-D Tensor of length ``max(max(x) + 1, minlength)`` (0 for an empty ``x``):
            intp counts without weights; with weights, floating and complex weights keep their
            dtype (float32 stays float32, where NumPy gives float64; NumPy does not accept
            complex weights), integer and boolean weights give float64 (as NumPy).

        Derivative: the cotangent of ``weights[i]`` is the output cotangent at bin ``x[i]``
        (``bincount`` is a scatter-add of the weights; its transpose is a gather).

        Raises:
            ValueError: if ``x`` is not 1-D, holds a negative value, or ``weights`` has
                another shape; if ``minlength`` is negative.
            TypeError: if ``x`` is not of an integer or boolean dtype.

        Example:
            >>> import tapegrad as tg, tapegrad.numpy as tnp
            >>> x = tnp.asarray([0, 1, 1, 3])
            >>> tnp.bincount(x)
            Tensor([1, 2, 0, 1], dtype=int64)
            >>> w = tg.Tensor([0.5, 1.0, 2.0, 4.0])
            >>> tnp.bincount(x, weights=w)
            Tensor([0.5, 3. , 0. , 4. ], dtype=float32)
            >>> tg.grad(lambda w: (tnp.bincount(x, w) * tnp.arange(4.0)).sum())(w)
            Tensor([0., 1., 1., 3.], dtype=float32)
        """
        x = x if isinstance(x, Tensor) else Tensor(np.asarray(x))
        if x.dtype.kind not in "biu" or x.dtype == np.uint64:
            raise TypeError(f"bincount: x must hold non-negative integers, got dtype {x.dtype}")
        if x.ndim != 1:
            raise ValueError(f"bincount: x must be 1-D, got shape {x.shape}")
        minlength = operator.index(minlength)
        if minlength < 0:
            raise ValueError(f"bincount: minlength must be non-negative, got {minlength}")
        if weights is not None:
            weights = tensor_arg(weights)
            if weights.shape != x.shape:
                raise ValueError(
                    f"bincount: weights (shape {weights.shape}) must have x's shape {x.shape}"
                )
        return Bincount.apply(x, weights, minlength=minlength)

    @staticmethod
    def forward(ctx, x, weights=None, minlength=0, nbatch=0):
        xp = ctx.backend
        if x.size and bool((x < 0).any()):
            raise ValueError("bincount: x must hold non-negative integers, got a negative value")
        ctx.nbatch = nbatch
        ctx.save_for_backward(x)

        def one(r, w):
            n = max(int(r.max()) + 1 if r.size else 0, minlength)
            if w is None:
                return xp.bincount(r.astype(np.intp), minlength=n)
            out = xp.zeros(n, dtype=_bincount_dtype(w.dtype))
            if xp is np:
                np.add.at(out, r.astype(np.intp), w)
            else:  # pragma: no cover - GPU only
                import cupyx  # pyright: ignore[reportMissingImports]

                cupyx.scatter_add(out, r.astype(np.intp), w)
            return out

        if nbatch == 0:
            return one(x, weights)
        return _rows(xp, nbatch, one, x, weights)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return None, _gather_rows(g, x, ctx.nbatch)

    @classmethod
    def output_shape(cls, *shapes, **params):
        raise NotImplementedError("bincount: the output length depends on the values")

    @classmethod
    def output_dtype(cls, x_dtype, w_dtype=None, **params):
        return _INTP if w_dtype is None else _bincount_dtype(w_dtype)


def _gather_rows(g, idx, nbatch: int):
    """``g[b..., idx[b..., j]]``: the last axis of ``g`` gathered at ``idx`` per batch row."""
    if nbatch == 0:
        return GetItem.apply(g, idx, key=(IndexSlot(0, False),))
    lead = tuple(idx.shape[:nbatch])
    arrays = []
    for i, n in enumerate(lead):
        shp = [1] * idx.ndim
        shp[i] = n
        arrays.append(np.arange(n).reshape(shp))
    arrays.append(idx)
    return GetItem.apply(g, *arrays, key=tuple(IndexSlot(k, False) for k in range(nbatch + 1)))
