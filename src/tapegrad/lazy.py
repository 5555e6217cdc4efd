"""Lazy mode: record operations from shapes alone and run them later, on ``realize()``.

Inside ``with tg.lazy():`` (or after ``tg.mode("lazy")``), an operation on untraced Tensors does
not run its forward rule: it infers the output's shape and dtype with the Function's
``output_shape`` and ``output_dtype`` and returns a Tensor whose array is a deferred
:class:`LazyArray`. ``t.realize()`` (or anything that needs the values: ``numpy()``, ``item()``,
an eager op, a transform) runs the recorded program up to ``t``, once, and checks that each op
produced the shape and dtype it promised. The recorded program is the tape; lazy mode is the
seeds' ``lazy()``/``realize()`` in functional form.

Operations on values a transform is tracing run immediately even in lazy mode: the transform
records its own tape.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import numpy as np

__all__ = ["lazy", "mode", "is_lazy", "LazyArray", "realize_array"]


class _LazyState(threading.local):
    depth = 0
    realizing = False  # set while realize() runs ops: they must execute, not defer again


_state = _LazyState()
_GLOBAL = {"lazy": False}


@contextmanager
def lazy():
    """Context manager: operations inside are recorded, not run, until ``realize()``.

    Per thread; nests. Example:
        >>> import tapegrad as tg
        >>> with tg.lazy():
        ...     y = tg.Tensor([1.0, 2.0]) * 3.0
        >>> y.is_realized
        False
        >>> y.realize().numpy().tolist()
        [3.0, 6.0]
    """
    _state.depth += 1
    try:
        yield
    finally:
        _state.depth -= 1


def mode(name: str) -> None:
    """Set the execution mode persistently for the process: ``"eager"`` (default) or ``"lazy"``.

    Raises:
        ValueError: if ``name`` is neither.
    """
    if name not in ("eager", "lazy"):
        raise ValueError(f"mode: expected 'eager' or 'lazy', got {name!r}")
    _GLOBAL["lazy"] = name == "lazy"


def is_lazy() -> bool:
    """True if operations in this thread are currently deferred."""
    return _GLOBAL["lazy"] or _state.depth > 0


class _LazyNode:
    """One deferred application: a Function, its inputs and static parameters."""

    __slots__ = ("fn", "args", "params", "avals", "values", "thunk")

    def __init__(self, fn, args, params, avals, thunk=None):
        self.fn, self.args, self.params, self.avals = fn, args, params, avals
        self.values = None
        self.thunk = thunk


class LazyArray:
    """A deferred backend array: ``shape`` and ``dtype`` are known, the values are not yet.

    Attributes:
        shape: Tuple of ints. dtype: NumPy dtype. ndim, size: ints.
    """

    __slots__ = ("shape", "dtype", "node", "index")

    def __init__(self, shape, dtype, node, index=0):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.node = node
        self.index = index

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def realized(self) -> bool:
        """Whether the values have been computed."""
        return self.node.values is not None

    def __repr__(self) -> str:
        state = "realized" if self.realized else "pending"
        return f"LazyArray(shape={self.shape}, dtype={self.dtype}, {state})"


def deferred(fn, shape, dtype) -> LazyArray:
    """A LazyArray produced by calling ``fn()`` (no arguments) on realize."""
    return LazyArray(shape, dtype, _LazyNode(None, (), {}, ((tuple(shape), np.dtype(dtype)),), fn))


def record(cls, args, params):
    """Defer ``cls.apply(*args, **params)``; returns Tensor(s) holding LazyArrays, or None when
    the op cannot infer its output (it then runs immediately)."""
    from tapegrad.tensor import Tensor

    if _state.realizing:
        return None
    shapes = [a._array.shape if type(a) is Tensor else a for a in args]
    dtypes = [a._array.dtype if type(a) is Tensor else a for a in args]
    try:
        shape = cls.output_shape(*shapes, **params)
        dtype = cls.output_dtype(*dtypes, **params)
    except NotImplementedError:
        return None
    multi = isinstance(shape, list)
    shapes_out = shape if multi else [shape]
    dtypes_out = dtype if isinstance(dtype, list) else [dtype] * len(shapes_out)
    avals = tuple((tuple(s), np.dtype(d)) for s, d in zip(shapes_out, dtypes_out))
    node = _LazyNode(cls, tuple(args), params, avals)
    outs = tuple(Tensor._const(LazyArray(s, d, node, i)) for i, (s, d) in enumerate(avals))
    return outs if multi else outs[0]


def realize_array(arr):
    """The concrete backend array behind ``arr`` (a LazyArray is computed, once)."""
    if type(arr) is not LazyArray:
        return arr
    if arr.node.values is not None:
        return arr.node.values[arr.index]
    outer = _state.realizing
    _state.realizing = True
    try:
        _realize_nodes(arr.node)
    finally:
        _state.realizing = outer
    return arr.node.values[arr.index]


def _realize_nodes(root) -> None:
    from tapegrad.tensor import Tensor

    stack = [root]
    while stack:
        node = stack[-1]
        if node.values is not None:
            stack.pop()
            continue
        pending = [
            a._array.node
            for a in node.args
            if type(a) is Tensor and type(a._array) is LazyArray and a._array.node.values is None
        ]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        node.values = _run(node)
        node.args = ()  # release the inputs as soon as they are used


def _run(node) -> tuple:
    from tapegrad.tensor import Tensor

    if node.thunk is not None:
        out = (np.asarray(node.thunk()),)
        who = "Tensor.deferred"
    else:
        args = [a._array if type(a) is Tensor else a for a in node.args]
        args = [realize_array(a) for a in args]
        res = node.fn.apply(*[Tensor._const(a) if hasattr(a, "shape") else a for a in args],
                            **node.params)
        out = tuple(t._array for t in res) if isinstance(res, tuple) else (res._array,)
        who = node.fn._name()
    for (shape, dtype), o in zip(node.avals, out):
        if tuple(o.shape) != shape or o.dtype != dtype:
            raise RuntimeError(
                f"lazy mode: {who} promised shape {shape} and dtype {dtype} (its output_shape/"
                f"output_dtype) but produced shape {tuple(o.shape)} and dtype {o.dtype}"
            )
    return out
