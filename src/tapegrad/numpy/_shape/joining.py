"""Joining and splitting: ``concatenate``, ``stack`` and their variants (``hstack``,
``vstack``, ``dstack``, ``column_stack``, ``block``, ``append``), ``split`` and its
variants, ``unstack`` and ``atleast_1d/2d/3d``."""

from __future__ import annotations

import numpy as _np

from tapegrad import ops as _ops
from tapegrad.core.tensor import Tensor
from tapegrad.numpy._core import _tensor
from tapegrad.numpy._docs import sections as _sections
from tapegrad.numpy._shape.reshaping import expand_dims, ravel, reshape, transpose
from tapegrad.ops._registry import ns as _ns
from tapegrad.ops.movement import _concat_shape
from tapegrad.ops.movement import as_tensor_list as _as_tensor_list
from tapegrad.ops.movement import cast_all as _cast_all
from tapegrad.ops.movement import check_axis as _check_axis
from tapegrad.ops.movement import no_out as _no_out
from tapegrad.ops.movement import split_pieces as _split_pieces

__all__ = [
    "concatenate",
    "concat",
    "stack",
    "unstack",
    "split",
    "array_split",
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
]

# -- functions of one primitive, defined with it in tapegrad.ops.movement
concatenate = _ns.concatenate
concat = _ns.concat
split = _ns.split

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


_ATLEAST = """
    Args:
        *arys: Tensors, arrays or numbers.

    Returns:
        A Tensor (a tuple of Tensors for several inputs) of each input's dtype with at least
        {axes} axes; differentiable (a reshape).

    Raises:
        TypeError: for a non-numeric input.
"""


@_sections(_ATLEAST, axes="two")
def atleast_2d(*arys):
    """Each input with at least two axes (NumPy ``atleast_2d``): shape ``()`` becomes
    ``(1, 1)``, ``(n,)`` becomes ``(1, n)``. One Tensor for one input, else a tuple.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.atleast_2d(tnp.zeros(3)).shape
        (1, 3)
    """
    return _atleast(arys, 2, "atleast_2d")


@_sections(_ATLEAST, axes="three")
def atleast_3d(*arys):
    """Each input with at least three axes (NumPy ``atleast_3d``): ``()`` becomes
    ``(1, 1, 1)``, ``(n,)`` becomes ``(1, n, 1)``, ``(m, n)`` becomes ``(m, n, 1)``. One Tensor
    for one input, else a tuple.

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
