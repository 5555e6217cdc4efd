"""NumPy's functional programming helpers: :func:`apply_along_axis`, :func:`apply_over_axes`,
:class:`vectorize` and :func:`fromfunction`.

Each calls the user's function on Tensors (slices, elements or index grids) and assembles the
results with tapegrad operations, so the result is differentiable wherever the function is:
they are loops in Python, as NumPy's are (use :func:`tapegrad.vmap` for a batched version).
"""

from __future__ import annotations

import itertools
import operator
import re
from typing import Any

import numpy as _np

from tapegrad.core import dtypes as _tg_dtypes
from tapegrad.core.tensor import Tensor
from tapegrad.numpy._core import _tensor, astype
from tapegrad.numpy._creation import indices
from tapegrad.numpy._shape import broadcast_to, expand_dims, moveaxis, reshape, stack

__all__ = ["apply_along_axis", "apply_over_axes", "vectorize", "fromfunction"]


def _result(v) -> Tensor:
    """A function's result as a Tensor; Python and NumPy values keep NumPy's dtypes."""
    if isinstance(v, Tensor):
        return v
    if isinstance(v, (list, tuple)):
        return _tensor(v) if any(isinstance(e, Tensor) for e in v) else Tensor(_np.asarray(v))
    return Tensor(_np.asarray(v))


def _stacked(results: list, outer: tuple, op: str) -> Tensor:
    shapes = {r.shape for r in results}
    if len(shapes) != 1:
        raise ValueError(f"{op}: the function returned results of different shapes "
                         f"{sorted(shapes)}; every call must return the same shape")
    dt = _tg_dtypes.result_type(*[r.dtype for r in results])
    out = stack([astype(r, dt) for r in results])
    return reshape(out, outer + results[0].shape)


def apply_along_axis(func1d, axis, arr, *args, **kwargs) -> Tensor:
    """Apply ``func1d`` to the 1-D slices of ``arr`` along ``axis`` (NumPy
    ``apply_along_axis``).

    Args:
        func1d: ``f(slice, *args, **kwargs)`` taking a 1-D Tensor and returning a Tensor (or
            number) of one shape for every slice.
        axis: The axis the slices run along.
        arr: Tensor/array.
        *args, **kwargs: Passed to ``func1d``.

    Returns:
        Tensor of shape ``arr.shape[:axis] + result.shape + arr.shape[axis + 1:]``; dtype the
        promotion of the results'. Differentiable wherever ``func1d`` is: the slices are
        ``arr``'s entries and the results are stacked.

    Raises:
        ValueError: if an iteration axis is empty (NumPy's error), ``axis`` is out of range,
            or the results differ in shape.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> x = tg.Tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> tnp.apply_along_axis(lambda v: v[0] * v[1], 1, x)
        Tensor([ 2., 12.], dtype=float32)
        >>> tg.grad(lambda x: tnp.apply_along_axis(tnp.sum, 0, x * x).sum())(x)
        Tensor([[2., 4.],
                [6., 8.]], dtype=float32)
    """
    a = _tensor(arr)
    ax = operator.index(axis)
    if not -a.ndim <= ax < a.ndim:
        raise ValueError(f"apply_along_axis: axis {axis} is out of bounds for an array of "
                         f"{a.ndim} axes")
    ax %= a.ndim
    moved = moveaxis(a, ax, -1)
    outer = moved.shape[:-1]
    if any(n == 0 for n in outer):
        raise ValueError("apply_along_axis: cannot apply along an axis when any iteration "
                         f"dimension is 0 (shape {a.shape}, axis {ax})")
    results = [_result(func1d(moved[idx], *args, **kwargs)) for idx in _np.ndindex(*outer)]
    out = _stacked(results, outer, "apply_along_axis")
    k = results[0].ndim  # the result's axes take the place of axis
    return moveaxis(out, tuple(range(len(outer), len(outer) + k)),
                    tuple(range(ax, ax + k)))


def apply_over_axes(func, a, axes) -> Tensor:
    """Apply ``func(a, axis)`` repeatedly over ``axes``, keeping the number of axes (NumPy
    ``apply_over_axes``): a reduced axis is put back with length 1.

    Args:
        func: ``f(a, axis)`` returning ``a`` with ``axis`` kept or reduced away (as
            ``tnp.sum``).
        a: Tensor/array.
        axes: An axis or a sequence of axes, applied in order.

    Returns:
        Tensor with ``a``'s number of axes. Differentiable wherever ``func`` is.

    Raises:
        ValueError: if ``func`` returns a Tensor with neither ``a.ndim`` nor ``a.ndim - 1``
            axes.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.apply_over_axes(tnp.sum, tnp.ones((2, 3, 4)), [0, 2])
        Tensor([[[8.],
                 [8.],
                 [8.]]], dtype=float32)
    """
    val = _tensor(a)
    n = val.ndim
    for axis in ([axes] if _np.ndim(axes) == 0 else list(axes)):
        axis = operator.index(axis)
        if axis < 0:
            axis += n
        res = _result(func(val, axis))
        if res.ndim != val.ndim:
            res = expand_dims(res, axis)
            if res.ndim != val.ndim:
                raise ValueError("apply_over_axes: the function is not returning an array of "
                                 f"the correct shape (got {res.ndim - 1} axes for {n})")
        val = res
    return val


def fromfunction(function, shape, *, dtype: Any = float, like=None, **kwargs):
    """Call ``function`` on the index grids of ``shape`` (NumPy ``fromfunction``):
    ``function(i0, i1, ...)`` with ``i_k`` the coordinate of axis ``k`` at each point.

    Args:
        function: Called once with ``len(shape)`` Tensors of ``shape`` (and ``**kwargs``).
        shape: The grid's shape.
        dtype: The coordinates' dtype (NumPy's default float64).
        like: Accepted for NumPy's signature (must be None).
        **kwargs: Passed to ``function``.

    Returns:
        Whatever ``function`` returns; differentiable in the Tensors it closes over.

    Raises:
        TypeError: for a non-None ``like``.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.fromfunction(lambda i, j: i + j, (2, 3), dtype=int)
        Tensor([[0, 1, 2],
                [1, 2, 3]], dtype=int64)
    """
    if like is not None:
        raise TypeError("fromfunction: like= is not supported (tapegrad returns Tensors)")
    return function(*indices(tuple(shape), dtype=dtype), **kwargs)


_DIM = r"\w+"
_CORE = rf"\((?:{_DIM}(?:,{_DIM})*)?\)"
_ARGS = rf"{_CORE}(?:,{_CORE})*"
_SIGNATURE = re.compile(rf"^{_ARGS}->{_ARGS}$")


def _parse_signature(signature: str):
    """``(input core dims, output core dims)`` of a gufunc signature ``"(m,n),(n)->(m)"``."""
    sig = signature.replace(" ", "")
    if not _SIGNATURE.match(sig):
        raise ValueError(f"vectorize: not a valid gufunc signature: {signature!r}")
    ins, outs = sig.split("->")
    parse = [[tuple(re.findall(_DIM, arg)) for arg in re.findall(_CORE, side)]
             for side in (ins, outs)]
    return parse[0], parse[1]


class vectorize:  # noqa: N801 - NumPy's name
    """A function that loops ``pyfunc`` over broadcast arrays (NumPy ``vectorize``).

    ``vectorize(f)(x, y)`` broadcasts ``x`` and ``y`` and calls ``f`` on each pair of
    elements, as 0-d Tensors (or, with ``signature``, on each pair of core sub-arrays), then
    stacks the results: differentiable wherever ``f`` is. It is a loop in Python, as NumPy's;
    :func:`tapegrad.vmap` batches a function instead.

    Args:
        pyfunc: The function (``vectorize`` also works as a decorator, with or without
            arguments).
        otypes: Output dtypes (a string of type codes such as ``"d"`` or a list of dtypes):
            each output is cast to them; needed for empty inputs, as in NumPy.
        doc: Docstring of the vectorized function (default ``pyfunc``'s).
        excluded: Positions or keyword names of arguments passed to ``pyfunc`` unchanged.
        cache: Accepted for NumPy's signature (each call runs ``pyfunc`` once per element).
        signature: A gufunc signature such as ``"(n),(n)->()"``: the named core dimensions
            of each argument are passed whole, the rest loops.

    Returns (when called):
        A Tensor (a tuple of Tensors when ``pyfunc`` returns a tuple) of the broadcast loop
        shape followed by the output core dimensions.

    Raises:
        ValueError: for a bad signature, inconsistent core dimensions, results of different
            shapes, or an empty input without ``otypes``.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> relu = tnp.vectorize(lambda v: v if v > 0 else 0.0 * v)
        >>> relu(tg.Tensor([-1.0, 2.0]))
        Tensor([-0.,  2.], dtype=float32)
        >>> tg.grad(lambda x: relu(x).sum())(tg.Tensor([-1.0, 2.0]))
        Tensor([0., 1.], dtype=float32)
    """

    def __init__(self, pyfunc=None, otypes=None, doc=None, excluded=None, cache=False,
                 signature=None):
        self.pyfunc = pyfunc
        if isinstance(otypes, str):
            otypes = list(otypes)
        self.otypes = None if otypes is None else [_np.dtype(t) for t in otypes]
        self.excluded = set() if excluded is None else set(excluded)
        self.cache = cache
        self.signature = signature
        self._core = None if signature is None else _parse_signature(signature)
        self.__doc__ = doc if doc is not None else getattr(pyfunc, "__doc__", None)

    def __call__(self, *args, **kwargs):
        if self.pyfunc is None:  # @vectorize(otypes=...) as a decorator
            if len(args) != 1 or kwargs or not callable(args[0]):
                raise TypeError("vectorize: used as a decorator, it takes the function")
            return vectorize(args[0], self.otypes, None, self.excluded or None, self.cache,
                             self.signature)
        pos = [i for i in range(len(args)) if i not in self.excluded]
        names = [k for k in kwargs if k not in self.excluded]
        ts = [_tensor(args[i]) for i in pos] + [_tensor(kwargs[k]) for k in names]
        ins_core = ([()] * len(ts)) if self._core is None else self._core[0]
        if len(ins_core) != len(ts):
            raise ValueError(f"vectorize: the signature {self.signature!r} names "
                             f"{len(ins_core)} inputs, got {len(ts)}")
        sizes: dict = {}
        loops = []
        for t, core in zip(ts, ins_core):
            if t.ndim < len(core):
                raise ValueError(f"vectorize: an input of shape {t.shape} has fewer axes than "
                                 f"its core dimensions {core}")
            for name, n in zip(core, t.shape[t.ndim - len(core):]):
                if sizes.setdefault(name, n) != n:
                    raise ValueError(f"vectorize: inconsistent size for core dimension "
                                     f"{name!r}: {sizes[name]} and {n}")
            loops.append(t.shape[:t.ndim - len(core)])
        loop = tuple(_np.broadcast_shapes(*loops)) if loops else ()
        ts = [broadcast_to(t, loop + t.shape[t.ndim - len(c):]) for t, c in zip(ts, ins_core)]
        if any(n == 0 for n in loop):
            return self._empty(loop, sizes)
        results = []
        for idx in itertools.product(*[range(n) for n in loop]):
            call_args = list(args)
            call_kwargs = dict(kwargs)
            parts = [t[idx] if idx else t for t in ts]
            for i, v in zip(pos, parts):
                call_args[i] = v
            for k, v in zip(names, parts[len(pos):]):
                call_kwargs[k] = v
            results.append(self.pyfunc(*call_args, **call_kwargs))
        multi = isinstance(results[0], tuple)
        columns = list(zip(*results)) if multi else [results]
        outs = []
        for j, col in enumerate(columns):
            vals = [_result(v) for v in col]
            if self.otypes is not None:
                vals = [astype(v, self.otypes[j]) for v in vals]
            if self._core is not None and j < len(self._core[1]):
                want = self._core[1][j]
                if vals[0].ndim != len(want):
                    raise ValueError(f"vectorize: output {j} has {vals[0].ndim} axes, the "
                                     f"signature says {len(want)}")
            outs.append(_stacked(vals, loop, "vectorize"))
        return tuple(outs) if multi else outs[0]

    def _empty(self, loop, sizes):
        if self.otypes is None:
            raise ValueError("vectorize: cannot call vectorize on size 0 inputs unless "
                             "`otypes` is set")
        outs_core = [()] * len(self.otypes) if self._core is None else self._core[1]
        outs = []
        for dt, core in zip(self.otypes, outs_core):
            shape = loop + tuple(sizes.get(name, 0) for name in core)
            outs.append(Tensor(_np.zeros(shape, dt)))
        return tuple(outs) if len(outs) > 1 else outs[0]

