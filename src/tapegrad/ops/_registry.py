"""The op registry: each primitive declares its public names; the functions follow from it.

A primitive (a :class:`~tapegrad.Function` subclass) declares, beside its rules:

- ``names``: the ``tapegrad.numpy`` names it is exposed under (the first is the canonical one);
- ``methods``: the Tensor methods and operators it is attached as (``"__mul__"``; a name
  ``"__rX__"`` is the reflected operator, called with the operands swapped);
- ``api``: optionally, the public function itself (a static method: argument handling and the
  docstring users read); without one, a function of the op's arity is made (``f(x)`` or
  ``f(x, y)``, operands converted as everywhere in ``tapegrad.numpy``), documented by the
  class's docstring.

:func:`expose` (a class decorator) registers a primitive: its functions go into :data:`ns`, the
namespace ``tapegrad.numpy`` re-exports and backward rules call (``ns.where(...)``), and its
methods into :data:`METHODS`, which :mod:`tapegrad.numpy.methods` attaches to :class:`Tensor`
with the NumPy layer's (as HIPS autograd's numpy layer attaches its boxes' methods).
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np

from tapegrad.core.tensor import Tensor, const
from tapegrad.core.weak import WeakScalar

__all__ = ["ns", "METHODS", "expose", "tensor_arg", "operands", "EXPOSED",
           "bool_arg", "dtype_arg", "register_nested", "given_tensor"]

#: Every public op function by name (``tapegrad.numpy`` re-exports it).
ns = types.SimpleNamespace()
#: Tensor method and operator name -> function.
METHODS: dict = {}
#: Every exposed primitive, in definition order.
EXPOSED: list = []

_PY_SCALARS = (int, float, complex)

#: ``[builder]``: makes a Tensor from a nested list/tuple that holds Tensors, differentiably
#: (``tapegrad.numpy.asarray``, registered by :func:`register_nested` when ``tapegrad.numpy``
#: is imported: the conversion rules live there).
_NESTED: list = [None]


def register_nested(builder) -> None:
    """Set the function :func:`tensor_arg` builds a list or tuple holding Tensors with."""
    _NESTED[0] = builder


def _holds_tensor(obj) -> bool:
    for v in obj:
        if isinstance(v, Tensor) or (isinstance(v, (list, tuple)) and _holds_tensor(v)):
            return True
    return False


def given_tensor(v) -> bool:
    """Whether ``v`` is a Tensor or a (nested) list/tuple holding one: data that
    :func:`tensor_arg` builds with Tensor operations (other data may keep NumPy's dtypes)."""
    return isinstance(v, Tensor) or (isinstance(v, (list, tuple)) and _holds_tensor(v))


def tensor_arg(x) -> Tensor:
    """An operand as a Tensor: Tensors pass, arrays and Python data follow ``Tensor``'s rules;
    a (nested) list or tuple holding Tensors, traced ones too, is stacked differentiably, as
    HIPS autograd takes ``np.mean([x, y])``."""
    if type(x) is Tensor:
        return x
    if isinstance(x, Tensor):
        return x
    if type(x) is WeakScalar:  # a Python number jit traces: what Tensor(number) would be
        return x.strong()
    if isinstance(x, np.generic):
        return const(np.asarray(x))
    if isinstance(x, (list, tuple)) and _NESTED[0] is not None and _holds_tensor(x):
        return _NESTED[0](x)
    try:
        return Tensor(x)
    except TypeError:
        got = (f"an array of dtype {x.dtype}" if isinstance(x, np.ndarray)
               else type(x).__name__)
        raise TypeError(
            f"tapegrad.numpy: expected a numeric Tensor, array or number, got {got}"
        ) from None


def bool_arg(value, op: str, name: str) -> bool:
    """A flag argument (``keepdims``, ``log_target``, ...) as a bool: ``True``/``False``,
    NumPy bools and, as NumPy, integers (their truth value).

    Raises:
        TypeError: for anything else (a string such as ``"yes"``, None, a float, a Tensor),
            naming the function and the argument.
    """
    if value is True or value is False:
        return value
    if isinstance(value, (bool, int, np.bool_, np.integer)):
        return bool(value)
    shown = repr(value)
    raise TypeError(
        f"{op}: {name} must be a bool (True or False), got "
        f"{shown if len(shown) <= 40 else shown[:37] + '...'} ({type(value).__name__})"
    )


def dtype_arg(dtype, op: str) -> np.dtype:
    """NumPy's ``dtype=`` argument (a dtype, a name such as ``"float32"``, a type) as a dtype.

    Raises:
        TypeError: if NumPy does not take ``dtype`` for a dtype, naming ``op``.
    """
    try:
        return np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{op}: dtype {dtype!r} is not a dtype") from None


def operand(x):
    """A binary operand: Tensors and Python numbers pass (numbers stay weakly typed, NumPy's
    NEP 50 promotion), everything else becomes a Tensor."""
    t = type(x)
    if t is Tensor or t is float or t is int or t is complex or t is WeakScalar:
        return x
    if isinstance(x, bool) or isinstance(x, Tensor):
        return x
    if x is None:
        raise TypeError(
            "tapegrad.numpy: an operand is None; expected a Tensor, array or number (to test "
            "for None, write `x is None`)"
        )
    return tensor_arg(x)


def operands(x, y):
    """Two operands; when both are Python numbers the first becomes a Tensor. Arrays and
    Python data (not Tensors) join the device of a Tensor operand, as Python numbers do."""
    if type(x) is Tensor and type(y) is Tensor:
        return x, y
    if type(x) is WeakScalar or type(y) is WeakScalar:
        return _weak_operands(x, y)
    x0, y0 = x, y
    x, y = operand(x), operand(y)
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        x = tensor_arg(x)
    elif isinstance(x, Tensor) and isinstance(y, Tensor):
        if not isinstance(x0, Tensor) and y.device != x.device:
            x = x.to_device(y.device)
        elif not isinstance(y0, Tensor) and x.device != y.device:
            y = y.to_device(x.device)
    return x, y


def _weak_operands(x: Any, y: Any) -> tuple:
    """:func:`operands` where a Python number jit traces (a WeakScalar) stands: as the eager
    call with the number, it is cast to meet a Tensor operand (NEP 50), and when neither
    operand is a Tensor the first becomes one (``Tensor(number)``'s dtype)."""
    x = x if type(x) is WeakScalar else operand(x)
    y = y if type(y) is WeakScalar else operand(y)
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        x = x.strong() if type(x) is WeakScalar else tensor_arg(x)
    if type(x) is WeakScalar:
        x = x.like(y)
    if type(y) is WeakScalar:
        y = y.like(x)
    return x, y


def _default_api(cls):
    """The public function of an op without ``api``: ``f(x)`` or ``f(x, y)``."""
    apply = cls.apply
    arity = getattr(cls, "arity", 1)
    if arity == 1:

        def fn(x):  # pyright: ignore[reportArgumentType, reportRedeclaration]
            return apply(x if type(x) is Tensor else tensor_arg(x))

    elif arity == 2:

        def fn(x, y):
            if type(x) is not Tensor or type(y) is not Tensor:
                x, y = operands(x, y)
            return apply(x, y)

    else:  # pragma: no cover - a declaration error
        raise TypeError(f"expose: {cls.__name__} needs an api for arity {arity}")
    fn.__doc__ = cls.__doc__
    return fn


#: Python's reflected binary operators (``y.__rX__(x)`` computes ``x X y``). Named one by one:
#: a prefix test would take ``__rshift__`` and ``__round__`` for reflected ones.
REFLECTED = frozenset(
    f"__r{n}__" for n in ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod",
                          "divmod", "pow", "lshift", "rshift", "and", "xor", "or")
)


def _operator(cls, api, name):
    """A Tensor operator: straight to ``cls.apply`` for a Tensor or Python number operand."""
    apply = cls.apply
    if name in REFLECTED:

        def method(self, other):
            t = type(other)
            if t is Tensor or t is float or t is int:
                return apply(other, self)
            return api(other, self)

    else:

        def method(self, other):
            t = type(other)
            if t is Tensor or t is float or t is int:
                return apply(self, other)
            return api(self, other)

    method.__name__ = name
    method.__doc__ = api.__doc__
    return method


def expose(cls):
    """Class decorator: register ``cls``'s public names and methods (see the module doc)."""
    api = cls.__dict__.get("api")
    if isinstance(api, staticmethod):
        api = api.__func__
    if api is None:
        api = _default_api(cls)
    elif not api.__doc__:
        api.__doc__ = cls.__doc__  # the class's docstring documents its public function
    names = getattr(cls, "names", ())
    if names:
        api.__name__ = api.__qualname__ = names[0]
    api.__module__ = "tapegrad.numpy"
    cls.api = staticmethod(api)  # pyright: ignore[reportArgumentType]
    for name in names:
        setattr(ns, name, api)
    for name in getattr(cls, "methods", ()):
        binary_operator = name.startswith("__") and getattr(cls, "arity", 1) == 2
        METHODS[name] = _operator(cls, api, name) if binary_operator else api
    EXPOSED.append(cls)
    return cls

