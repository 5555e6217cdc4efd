"""The cache of traced control-flow bodies, across calls.

A body (the ``f`` of ``scan``, the functions of ``while_loop``, the branches of ``switch``) is
traced once per *signature*: the construct, the carry's structure, shapes and dtypes, and what
the Python functions close over. Calling ``scan(step, ...)`` again with the same signature
reuses the traced body, its compiled program and every body derived from it (its vjp, jvp,
batched form), so a loop in a training step is traced on the first step only.

What a function's signature holds (JAX keys its traced loop bodies on the function object; this
cache keys on what makes two function objects behave alike, so a lambda made anew on each call
is traced once too):

- its code object, and recursively the same for each function it holds;
- the values it closes over (closure cells, default arguments, the bound ``self`` of a method,
  a ``functools.partial``'s arguments) and the Tensors among the globals its code names,
  flattened as pytrees: a concrete Tensor by identity (Tensors are immutable, so the same
  object is the same value), a number, string, dtype or ``None`` by value;
- a Tensor traced by an enclosing transform by its shape and dtype only: the body reads it
  as an explicit input (closure conversion), so a hit passes the new call's Tensor in its place.

Anything else (an ``ndarray``, which can be written in place; an arbitrary object) makes the
call uncacheable: it is traced afresh, as it would be without the cache. State a body reads in
other ways (a global changed between calls and read through another module) is captured at the
first trace, as ``jax.jit`` captures it.
"""

from __future__ import annotations

import functools
import threading
import types
from collections import OrderedDict

import numpy as np

from tapegrad.core.tensor import Tensor
from tapegrad.core.tree import tree_flatten

__all__ = ["Signature", "signature", "lookup", "store", "clear", "size"]

_MAX = 256  # entries kept (least recently used dropped first)
_DEPTH = 4  # how deep functions held by functions are followed
_LOCK = threading.Lock()
_CACHE: OrderedDict = OrderedDict()


class _Uncacheable(Exception):
    pass


class _Ref:
    """An identity key for an object whose ``==`` is not a plain boolean (a Tensor)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other) -> bool:
        return type(other) is _Ref and other.obj is self.obj


_SCALARS = (type(None), bool, int, float, complex, str, bytes, np.generic, np.dtype)


class Signature:
    """The cache key of a call's Python functions, and the traced Tensors they hold (in key
    order: a cached body's lifted inputs are found among them by position)."""

    __slots__ = ("key", "traced")

    def __init__(self, key, traced: list):
        self.key = key
        self.traced = traced

    def positions(self, lifted) -> tuple | None:
        """Where each of ``lifted`` (the enclosing Tensors a trace read) sits in
        :attr:`traced`; None if one is not there (the body reached it another way)."""
        where = {id(t): i for i, t in enumerate(self.traced)}
        got = tuple(where.get(id(t), -1) for t in lifted)
        return None if -1 in got else got

    def take(self, positions, avals) -> list | None:
        """The Tensors of this call at ``positions`` (the lifted inputs of a cached body), or
        None when one differs from ``avals`` (the ``(shape, dtype)`` the body reads there)."""
        got = [self.traced[i] for i in positions]
        for t, (shape, dtype) in zip(got, avals):
            a = t._concrete()
            if tuple(a.shape) != tuple(shape) or a.dtype != dtype:
                return None
        return got


def _leaf(v, traced: list, depth: int, seen: set):
    if type(v) is Tensor:
        if v._level:
            traced.append(v)
            return ("t", tuple(v.shape), v.dtype)
        return _Ref(v)
    if isinstance(v, _SCALARS):
        return (type(v), v)
    if isinstance(v, (types.ModuleType, type)):
        return _Ref(v)
    if callable(v):
        return _function(v, traced, depth, seen)
    raise _Uncacheable


def _tree(v, traced: list, depth: int, seen: set):
    if type(v) is Tensor or isinstance(v, _SCALARS):
        return _leaf(v, traced, depth, seen)
    leaves, treedef = tree_flatten(v)
    if len(leaves) == 1 and leaves[0] is v:  # not a container
        return _leaf(v, traced, depth, seen)
    return (treedef, tuple(_leaf(x, traced, depth, seen) for x in leaves))


def _function(f, traced: list, depth: int, seen: set):
    if depth > _DEPTH:
        raise _Uncacheable
    if id(f) in seen:  # (recursion: already keyed above)
        return ("seen",)
    seen = seen | {id(f)}
    if isinstance(f, types.FunctionType):
        code = f.__code__
        cells = tuple(_tree(c.cell_contents, traced, depth + 1, seen) if _full(c) else ("empty",)
                      for c in (f.__closure__ or ()))
        glob = f.__globals__
        names = []
        for name in code.co_names:
            if name in glob:
                g = glob[name]
                if type(g) is Tensor or isinstance(g, types.FunctionType):
                    names.append((name, _leaf(g, traced, depth + 1, seen)))
        return (_Ref(code), cells, _tree(f.__defaults__, traced, depth + 1, seen),
                _tree(f.__kwdefaults__, traced, depth + 1, seen), tuple(names))
    if isinstance(f, types.MethodType):
        return ("method", _function(f.__func__, traced, depth + 1, seen),
                _tree(f.__self__, traced, depth + 1, seen))
    if isinstance(f, functools.partial):
        return ("partial", _function(f.func, traced, depth + 1, seen),
                _tree(f.args, traced, depth + 1, seen), _tree(f.keywords, traced, depth + 1, seen))
    if isinstance(f, types.BuiltinFunctionType):
        return _Ref(f)
    # a callable object: its class's code and its fields (a Module is a pytree)
    leaves, treedef = tree_flatten(f)
    if len(leaves) == 1 and leaves[0] is f:
        raise _Uncacheable
    return ("object", _Ref(type(f)), treedef,
            tuple(_leaf(x, traced, depth + 1, seen) for x in leaves))


def _full(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def signature(fns, extra) -> Signature | None:
    """The :class:`Signature` of the Python callables ``fns`` with the hashable ``extra``
    (the construct, the structure, shapes and dtypes of its operands), or None when some
    value they hold cannot be keyed (the call is traced afresh)."""
    traced: list = []
    try:
        key = (extra, tuple(_function(f, traced, 0, set()) for f in fns))
        hash(key)
    except (_Uncacheable, TypeError):
        return None
    return Signature(key, traced)


def lookup(sig: Signature | None):
    """The cached value stored under ``sig`` (None when absent or ``sig`` is None)."""
    if sig is None:
        return None
    with _LOCK:
        got = _CACHE.get(sig.key)
        if got is not None:
            _CACHE.move_to_end(sig.key)
        return got


def store(sig: Signature | None, value) -> None:
    """Keep ``value`` under ``sig`` (nothing when ``sig`` is None)."""
    if sig is None:
        return
    with _LOCK:
        _CACHE[sig.key] = value
        while len(_CACHE) > _MAX:
            _CACHE.popitem(last=False)


def clear() -> None:
    """Drop every cached body."""
    with _LOCK:
        _CACHE.clear()


def size() -> int:
    """How many bodies are cached."""
    return len(_CACHE)
