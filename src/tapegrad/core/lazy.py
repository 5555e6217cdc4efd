"""Lazy mode: record operations from shapes alone and run them later, on ``realize()``.

Inside ``with tg.lazy():`` (or after ``tg.mode("lazy")``), an operation on untraced Tensors does
not run its forward rule: it infers the output's shape and dtype with the Function's
``output_shape`` and ``output_dtype`` and returns a Tensor whose array is a deferred
:class:`LazyArray`. ``t.realize()`` (or anything that needs the values: ``numpy()``, ``item()``,
an eager op, a transform) runs the recorded program up to ``t``, once, and checks that each op
produced the shape and dtype it promised. The recorded program is the tape: deferred
execution in functional form.

Operations on values a transform is tracing run immediately even in lazy mode: the transform
records its own tape.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any

import numpy as np

__all__ = ["lazy", "mode", "is_lazy", "LazyArray", "realize_array", "deferred"]


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
    """Set the execution mode for the whole process: ``"eager"`` (default) or ``"lazy"``.

    Raises:
        ValueError: if ``name`` is neither.
    """
    if name not in ("eager", "lazy"):
        raise ValueError(f"mode: expected 'eager' or 'lazy', got {name!r}")
    _GLOBAL["lazy"] = name == "lazy"


def is_lazy() -> bool:
    """True if operations in this thread are currently deferred."""
    return (_GLOBAL["lazy"] or _state.depth > 0) and not _state.realizing


class _LazyNode:
    """One deferred application: ``run(*arrays)`` returns the output arrays (a tuple)."""

    __slots__ = ("run", "args", "avals", "values", "who")

    def __init__(self, run, args, avals, who):
        self.run, self.args, self.avals, self.who = run, args, avals, who
        self.values = None


class LazyArray:
    """A deferred backend array: ``shape`` and ``dtype`` are known, the values are not yet.

    Attributes:
        shape: Tuple of ints.
        dtype: NumPy dtype.
        ndim, size: ints.
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


def defer(run, args, avals, who) -> tuple:
    """LazyArrays for the outputs of ``run(*args)`` (``args``: arrays, LazyArrays or Python
    values), promised to have ``avals`` (``(shape, dtype)`` each)."""
    node = _LazyNode(run, tuple(args), tuple(avals), who)
    return tuple(LazyArray(s, d, node, i) for i, (s, d) in enumerate(avals))


def deferred(fn, shape, dtype) -> LazyArray:
    """A LazyArray produced by calling ``fn()`` (no arguments) on realize."""
    return defer(lambda: (np.asarray(fn()),), (), ((tuple(shape), np.dtype(dtype)),),
                 "Tensor.deferred")[0]


def realize_array(arr) -> Any:
    """The concrete backend array behind ``arr`` (a LazyArray is computed, once)."""
    if type(arr) is not LazyArray:
        return arr
    if arr.node.values is None:
        outer = _state.realizing
        _state.realizing = True
        try:
            _realize_nodes(arr.node)
        finally:
            _state.realizing = outer
    return arr.node.values[arr.index]  # pyright: ignore[reportOptionalSubscript]


def _realize_nodes(root) -> None:
    stack = [root]
    while stack:
        node = stack[-1]
        if node.values is not None:
            stack.pop()
            continue
        pending = [a.node for a in node.args if type(a) is LazyArray and a.node.values is None]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        args = [a.node.values[a.index] if type(a) is LazyArray else a for a in node.args]
        out = tuple(node.run(*args))
        for (shape, dtype), o in zip(node.avals, out):
            if tuple(o.shape) != shape or o.dtype != dtype:
                raise RuntimeError(
                    f"lazy mode: {node.who} promised shape {shape} and dtype {dtype} (its "
                    f"output_shape/output_dtype) but produced shape {tuple(o.shape)} and dtype "
                    f"{o.dtype}"
                )
        node.values = out
        node.args = ()  # release the inputs as soon as they are used
