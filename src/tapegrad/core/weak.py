"""Weakly typed Python numbers under ``jit``: :class:`WeakScalar`.

Eagerly, a Python number an op meets is *weakly typed* (NumPy's NEP 50, JAX's weak types):
``x_float32 * 0.1`` stays float32 and ``x_float64 * 0.1`` multiplies by 0.1 exactly, while
arithmetic between Python numbers is Python's (double precision, ``int / int`` a float).
``jit`` traces a Python number argument as a :class:`WeakScalar`, so that the recorded program
computes what the eager call computes, in value and dtype, for every value of the number
(the value is an input of the program, its Python type part of the signature):

- with Python numbers and other WeakScalars it computes as Python does, on the number held
  exactly (float64, int64, complex128, bool), and stays weak;
- met with a Tensor or array in an op, it is first cast to the dtype NumPy would give the
  Python number there (``np.result_type(x.dtype, 0.1)``: float32 beside a float32 Tensor),
  and the op is the Tensor's;
- where tapegrad's functions turn a Python number into a Tensor (``tnp.exp(0.1)``), it
  becomes the Tensor ``Tensor(0.1)`` would be (float32, int64, complex64, bool);
- where Python needs the number itself (``if s > 0``, ``int(n)``, ``math.sin(s)``, NumPy),
  the value is read and ``jit`` records the decision as a guard: new values that change it
  trace again, so a program is never reused where it would compute something else;
- ``isinstance(s, float)`` holds as for the number (``type(s)`` is WeakScalar).

Where a function needs a number as a concrete Python value that jit cannot guard (a shape or
an axis given to a function that checks for an int), the recording fails; ``jit`` then
records the function with its numbers static, as the eager call sees them (one program per
value).

Nothing else creates WeakScalars; outside ``jit`` Python numbers are themselves.
"""

from __future__ import annotations

import math
import numbers
import operator

import numpy as np

from tapegrad.core.function import Function, WeakArgument
from tapegrad.core.tensor import Tensor

__all__ = ["WeakScalar", "WIDE"]

#: The dtype holding a Python number of each type exactly (as the program's input).
WIDE = {bool: np.dtype(np.bool_), int: np.dtype(np.int64), float: np.dtype(np.float64),
        complex: np.dtype(np.complex128)}  # fmt: skip
#: The dtype ``Tensor(number)`` gives a Python number of each type.
_DEFAULT = {bool: np.dtype(np.bool_), int: np.dtype(np.int64), float: np.dtype(np.float32),
            complex: np.dtype(np.complex64)}  # fmt: skip
_SAMPLE = {bool: False, int: 0, float: 0.0, complex: 0j}
_RANK = {bool: 0, int: 1, float: 2, complex: 3}
_BY_RANK = (bool, int, float, complex)
_PY_NUMBERS = (bool, int, float, complex)


def _pytype(value) -> type | None:
    """The Python number type of ``value`` (a Python number or WeakScalar), else None."""
    if type(value) is WeakScalar:
        return value._type
    t = type(value)
    if t in _PY_NUMBERS:
        return t
    return None


def _join(a: type, b: type) -> type:
    return _BY_RANK[max(_RANK[a], _RANK[b])]


def _is_strong(value) -> bool:
    return isinstance(value, (Tensor, np.ndarray, np.generic)) or hasattr(
        value, "__cuda_array_interface__")


class WeakScalar(WeakArgument):
    """A Python number that ``jit`` traces (see the module docstring for the rules).

    Attributes:
        tensor: The traced 0-d Tensor holding the number exactly (float64, int64, complex128
            or bool).
        pytype: The Python type it stands for (``bool``, ``int``, ``float`` or ``complex``).
    """

    __slots__ = ("_t", "_type")
    __array_priority__ = 2000  # above Tensor's: a Tensor operator defers to ours

    def __init__(self, tensor: Tensor, pytype: type):
        self._t = tensor
        self._type = pytype

    @property
    def tensor(self) -> Tensor:
        """The traced 0-d Tensor holding the number exactly."""
        return self._t

    @property
    def pytype(self) -> type:
        """The Python type the value stands for."""
        return self._type

    @classmethod
    def resolve(cls, fn, args: tuple) -> tuple:
        """``Function.apply``'s arguments with each WeakScalar made what the eager call would
        have computed with (:func:`resolve`)."""
        return resolve(fn, args)

    @property  # pyright: ignore[reportIncompatibleVariableOverride]
    def __class__(self):  # noqa: D105
        # ``isinstance(s, float)`` holds for a float, as eagerly (``type(s)`` stays
        # WeakScalar): code that tests for a Python number takes the same branch
        return self._type

    # -- becoming a Tensor -----------------------------------------------------------------
    def strong(self, dtype=None) -> Tensor:
        """The Tensor ``Tensor(number)`` would be (float32 for a float, ...), or the number cast
        to ``dtype``."""
        want = _DEFAULT[self._type] if dtype is None else np.dtype(dtype)
        t = self._t
        return t if t.dtype == want else t.astype(want)

    def like(self, other) -> Tensor:
        """The number as NumPy would convert it to meet ``other`` (a Tensor or dtype) in an
        elementwise op: cast to ``np.result_type(other.dtype, number)`` (NEP 50), on
        ``other``'s device.

        Raises:
            OverflowError: for an int that the other operand's integer dtype cannot hold, as
                NumPy (decided on the value: a guard under ``jit``).
        """
        dtype = other if isinstance(other, np.dtype) else np.dtype(other.dtype)
        want = np.result_type(dtype, _SAMPLE[self._type])
        t = self._t
        if self._type is int and want.kind in "iu" and want != t.dtype:
            info = np.iinfo(want)
            inside = (t >= int(info.min)) & (t <= int(info.max))
            if not bool(inside):
                raise OverflowError(
                    f"Python integer {int(t)} out of bounds for {want} (NumPy's rule for a "
                    "Python int meeting an array of that dtype)"
                )
        out = t if t.dtype == want else t.astype(want)
        dev = getattr(other, "device", "cpu")
        if dev != "cpu" and out.device != dev:
            out = out.to_device(dev)
        return out

    # -- Python needs the value: a guard under jit ------------------------------------------
    def _value(self):
        v = self._t.item()
        return self._type(v)

    def __bool__(self) -> bool:
        return bool(self._t)

    def __int__(self) -> int:
        if self._type is complex:
            raise TypeError("int() argument must not be a complex number")
        return int(self._t)

    def __float__(self) -> float:
        if self._type is complex:
            raise TypeError("float() argument must not be a complex number")
        return float(self._t)

    def __complex__(self) -> complex:
        return complex(self._t)

    def __index__(self) -> int:
        if self._type not in (bool, int):
            raise TypeError(f"'{self._type.__name__}' object cannot be interpreted as an integer")
        return int(self._t)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._value(), dtype=dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """A NumPy ufunc sees the Python number (read, a guard under ``jit``)."""
        inputs = tuple(v._value() if type(v) is WeakScalar else v for v in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __hash__(self) -> int:
        return hash(self._value())

    def __round__(self, ndigits=None):
        return round(self._value(), ndigits)

    def __trunc__(self):
        return math.trunc(self._value())

    def __floor__(self):
        return math.floor(self._value())

    def __ceil__(self):
        return math.ceil(self._value())

    def __format__(self, spec: str) -> str:
        return format(self._value(), spec)

    def __repr__(self) -> str:
        return f"WeakScalar({self._type.__name__}, traced)"

    __str__ = __repr__

    def conjugate(self):
        """Python's ``number.conjugate()``."""
        return self if self._type is not complex else _unary(self, "conjugate")

    @property
    def real(self):
        """Python's ``number.real``."""
        if self._type is not complex:
            return self
        return WeakScalar(self._t.real, float)

    @property
    def imag(self):
        """Python's ``number.imag``."""
        if self._type is not complex:
            return _python("mul", int if self._type in (bool, int) else float, self, 0)
        return WeakScalar(self._t.imag, float)


numbers.Number.register(WeakScalar)


class _PythonOp(Function):
    """Python's own arithmetic on weakly typed numbers: ``forward`` computes
    ``op(*numbers)`` with the Python numbers the 0-d inputs hold (so the result is exactly the
    eager one: NumPy's ``power`` and complex products differ from Python's in the last bit)
    and returns it as a 0-d array of ``out``'s exact dtype. Not differentiable: a weakly
    typed number is never what a transform differentiates (``grad`` takes ``Tensor(number)``).
    """

    oper = "python"
    differentiable = False

    @staticmethod
    def forward(ctx, *args, op, out):
        dtype = WIDE[_TYPES[out]]
        if all(not hasattr(a, "shape") or a.shape == () for a in args):
            vals = [a.item() if hasattr(a, "shape") else a for a in args]
            return np.asarray(_PYOP[op](*vals), dtype=dtype)
        # a batch of numbers (vmap): Python's operation on each, broadcast like a ufunc
        vals = [np.asarray(a).astype(object) if hasattr(a, "shape") else a for a in args]
        return np.asarray(np.frompyfunc(_PYOP[op], len(vals), 1)(*vals), dtype=dtype)

    @classmethod
    def batch(cls, args, batched, size, **params):
        """vmap: the examples are numbers, so the batch broadcasts against unbatched ones."""
        return cls.apply(*args, **params)

    @classmethod
    def output_dtype(cls, *dtypes, op, out):
        return WIDE[_TYPES[out]]


_TYPES = {"bool": bool, "int": int, "float": float, "complex": complex}
_SAMPLE_NONZERO = {bool: True, int: 1, float: 1.0, complex: 1 + 0j}


def _python(op: str, out: type, *operands) -> WeakScalar:
    args = [v._t if type(v) is WeakScalar else v for v in operands]
    return WeakScalar(_PythonOp.apply(*args, op=op, out=out.__name__), out)


def _unary(w: WeakScalar, name: str):
    if name == "conjugate":
        return _python("conjugate", w._type if w._type is not bool else int, w)
    op = name.strip("_")
    out = type(_PYOP[op](_SAMPLE_NONZERO[w._type]))  # raises Python's TypeError (~1.0)
    return _python(op, out, w)


_ARITH = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow")
_BITWISE = ("and", "or", "xor", "lshift", "rshift")
_COMPARE = ("lt", "le", "gt", "ge", "eq", "ne")
_PYOP = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
         "truediv": operator.truediv, "floordiv": operator.floordiv, "mod": operator.mod,
         "pow": operator.pow, "and": operator.and_, "or": operator.or_, "xor": operator.xor,
         "lshift": operator.lshift, "rshift": operator.rshift, "lt": operator.lt,
         "le": operator.le, "gt": operator.gt, "ge": operator.ge, "eq": operator.eq,
         "ne": operator.ne, "neg": operator.neg, "pos": operator.pos, "abs": operator.abs,
         "invert": operator.invert, "conjugate": lambda v: v.conjugate()}  # fmt: skip


def _python_binary(name: str, a, b):
    """``a <op> b`` for Python numbers and WeakScalars (at least one weak), computed by Python
    (:class:`_PythonOp`): exactly the eager value, and weakly typed."""
    ta, tb = _pytype(a), _pytype(b)
    out = type(_PYOP[name](_SAMPLE_NONZERO[ta], _SAMPLE_NONZERO[tb]))  # Python's TypeErrors
    if name == "pow":  # the only result whose type depends on the values: decided by guards
        if out is int and _negative(b):
            out = float  # an int to a negative int power is a float
        elif out is float and not _integral(b) and _negative(a):
            out = complex  # a negative float to a fractional power is complex
    return _python(name, out, a, b)


def _negative(v) -> bool:
    """Whether ``v`` (a Python number or WeakScalar) is negative (a guard under ``jit``)."""
    return bool(v < 0)


def _integral(b) -> bool:
    """Whether the exponent ``b`` is integral (a Python int, or a float with no fraction,
    decided on the value)."""
    if _pytype(b) in (bool, int):
        return True
    if _pytype(b) is float:
        return bool(b == math.floor(b)) if type(b) is WeakScalar else float(b).is_integer()
    return False


def _value(v):
    return v._value() if type(v) is WeakScalar else v


def _binary(w: WeakScalar, other, name: str, reflected: bool):
    if _pytype(other) is not None:
        a, b = (other, w) if reflected else (w, other)
        return _python_binary(name, a, b)
    if _is_strong(other):
        t = other if isinstance(other, Tensor) else Tensor(other)
        mine = w.like(t)
        a, b = (t, mine) if reflected else (mine, t)
        return getattr(Tensor, f"__{name}__")(a, b)
    return NotImplemented


def _make_binary(name: str):
    def method(self, other):
        return _binary(self, other, name, False)

    def rmethod(self, other):
        return _binary(self, other, name, True)

    method.__name__, rmethod.__name__ = f"__{name}__", f"__r{name}__"
    return method, rmethod


for _name in _ARITH + _BITWISE:
    _m, _r = _make_binary(_name)
    setattr(WeakScalar, f"__{_name}__", _m)
    setattr(WeakScalar, f"__r{_name}__", _r)
for _name in _COMPARE:
    setattr(WeakScalar, f"__{_name}__", _make_binary(_name)[0])
for _name in ("__neg__", "__pos__", "__abs__", "__invert__"):
    setattr(WeakScalar, _name, lambda self, _n=_name: _unary(self, _n))


def _divmod(self, other):
    return self // other, self % other


def _rdivmod(self, other):
    return other // self, other % self


WeakScalar.__divmod__ = _divmod  # pyright: ignore[reportAttributeAccessIssue]
WeakScalar.__rdivmod__ = _rdivmod  # pyright: ignore[reportAttributeAccessIssue]


def resolve(cls, args: tuple) -> tuple:
    """The positional arguments of ``cls.apply`` with each WeakScalar made a Tensor, as the
    eager call with a Python number there would compute: cast to meet the Tensor arguments
    (NEP 50) for an elementwise op, else its Python value (read, a guard under ``jit``), which
    is what ``forward`` would have been given eagerly (:meth:`WeakScalar.resolve`)."""
    strong = [a for a in args if isinstance(a, Tensor)]
    elementwise = cls.traits.ufunc is not None or getattr(
        getattr(cls, "batch", None), "__name__", "") == "elementwise"
    if strong and elementwise:
        dtype = np.result_type(*[a.dtype for a in strong])
        return tuple(a.like(dtype) if type(a) is WeakScalar else a for a in args)
    return tuple(a._value() if type(a) is WeakScalar else a for a in args)


