"""The frozen :class:`Tensor` record.

A Tensor wraps a read-only backend array (NumPy or CuPy). Outside any transform a Tensor is a
*constant* (level 0). While a transform runs, the values it differentiates are *traced*: a
Tensor at level ``k`` wraps its value at a lower level (its ``primal``) and names its node on the
trace of level ``k``. Operations never mutate a Tensor; every one returns a new Tensor.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import attrs
import numpy as np

from tapegrad import backend as _backend
from tapegrad.lazy import LazyArray as _LazyArray
from tapegrad.lazy import realize_array as _realize_array

__all__ = ["Tensor", "tensor", "is_floating"]

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_FLOAT_KINDS = ("f", "c")


def is_floating(dtype) -> bool:
    """Whether ``dtype`` is a floating (differentiable) dtype."""
    return np.dtype(dtype).kind in _FLOAT_KINDS


def _caller_line() -> str:
    """``file:line`` of the nearest frame outside the tapegrad package (for guards)."""
    f = sys._getframe(1)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_PKG_DIR):
        f = f.f_back
    if f is None:  # pragma: no cover - only when called from tapegrad itself
        return "<unknown>"
    return f"{f.f_code.co_filename}:{f.f_lineno}"


def _readonly(array):
    """A read-only view of a NumPy array (CuPy arrays have no such flag and pass through)."""
    if type(array) is np.ndarray:
        if array.flags.writeable:
            array = array.view()
            array.flags.writeable = False
    return array


def _to_array(data, dtype=None, device=None):
    """Convert user data into a backend array following tapegrad's dtype rules."""
    if isinstance(data, Tensor):
        arr = data._concrete()
        if dtype is not None:
            arr = arr.astype(dtype)
        if device is not None:
            arr = _backend.to_device(arr, _backend.parse_device(device))
        return arr
    if isinstance(data, np.ndarray) or (
        hasattr(data, "__cuda_array_interface__") and hasattr(data, "dtype")
    ):
        arr = data if dtype is None else data.astype(dtype, copy=False)
    elif isinstance(data, np.generic):
        arr = np.asarray(data, dtype=dtype)
    else:
        try:
            arr = np.asarray(data, dtype=dtype)
        except (ValueError, TypeError) as e:
            raise TypeError(
                f"Tensor: cannot make a numeric array from {type(data).__name__} ({e}); "
                "pass a number, a (nested) list of numbers or a NumPy/CuPy array."
            ) from None
        if dtype is None and arr.dtype.kind in "iuf":
            arr = arr.astype(np.float32)  # Python data defaults to float32
        if arr.dtype.kind not in "biufc":
            raise TypeError(
                f"Tensor: expected numeric data, got an array of dtype {arr.dtype} "
                f"from {type(data).__name__}"
            )
    if device is not None:
        arr = _backend.to_device(arr, _backend.parse_device(device))
    return _readonly(arr)


@attrs.frozen(eq=False, init=False, repr=False, weakref_slot=True)
class Tensor:
    """An immutable n-dimensional array that transforms can differentiate.

    Args:
        data: A number, nested list, NumPy/CuPy array or Tensor. Python data becomes float32
            (booleans stay bool); arrays keep their dtype. The caller's array is never
            modified: the Tensor holds a read-only view.
        dtype: Optional dtype to convert to (NumPy dtype or name).
        device: ``"cpu"`` (default for Python data) or ``"cuda:N"`` (needs CuPy).
        label: Optional name shown in tape listings and graph drawings.

    Attributes:
        shape: Tuple of ints. dtype: NumPy dtype. ndim, size: ints. device: str.
        label: str or None. T: the transpose (axes reversed).

    Raises:
        TypeError: if ``data`` is not numeric; on attribute or item assignment (Tensors are
            immutable: use ``x.at[idx].set(v)``).

    Example:
        >>> import tapegrad as tg
        >>> x = tg.Tensor([1.0, 2.0, 3.0])
        >>> (x * x).sum().item()
        14.0
    """

    _array: Any
    _primal: Any
    _level: int
    _trace: Any
    _node: int
    label: Any

    # NumPy must hand binary operators back to Tensor (np_array + tensor -> Tensor.__radd__).
    __array_ufunc__ = None
    __array_priority__ = 1000

    def __init__(self, data, dtype=None, device=None, label=None):
        _set = object.__setattr__
        _set(self, "_array", _to_array(data, dtype, device))
        _set(self, "_primal", None)
        _set(self, "_level", 0)
        _set(self, "_trace", None)
        _set(self, "_node", -1)
        _set(self, "label", label)

    # -- internal constructors (hot path: no conversion, no checks) -------------------------
    # ``Tensor._const(array, label=None)`` builds a level-0 constant; it is installed below the
    # class (compiled when tapegrad._speedups is built, see :func:`_make`).

    @staticmethod
    def _traced(primal: Tensor, level: int, trace, node: int) -> Tensor:
        return _make(primal._array, primal, level, trace, node, primal.label)

    # -- immutability ------------------------------------------------------------------------
    def __setitem__(self, idx, value):
        raise TypeError(
            "Tensor does not support item assignment (x[idx] = v): Tensors are immutable. "
            "Use the functional update `x = x.at[idx].set(v)` (or .add(v) for x[idx] += v)."
        )

    __hash__ = object.__hash__

    # -- metadata ----------------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        """Tuple of dimension sizes."""
        return self._array.shape

    @property
    def dtype(self):
        """The NumPy dtype (compares equal to names such as ``"float32"``)."""
        return self._array.dtype

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return self._array.ndim

    @property
    def size(self) -> int:
        """Number of elements."""
        return self._array.size

    @property
    def device(self) -> str:
        """``"cpu"`` or ``"cuda:N"``."""
        return _backend.device_of(self._array)

    @property
    def is_traced(self) -> bool:
        """True while a transform is tracing this value (level > 0)."""
        return self._level > 0

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d Tensor; it has no first axis")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d Tensor; it has no first axis")
        for i in range(self.shape[0]):
            yield self[i]

    def __repr__(self) -> str:
        if not self.is_realized:
            return f"Tensor(<deferred>, shape={self.shape}, dtype={self.dtype})"
        body = np.array2string(
            _backend.to_device(self._concrete(), "cpu"), separator=", ", prefix="Tensor("
        )
        extra = f", dtype={self.dtype}"
        if self.device != "cpu":
            extra += f", device={self.device!r}"
        if self.label is not None:
            extra += f", label={self.label!r}"
        if self._level:
            extra += f", traced=level {self._level}"
        return f"Tensor({body}{extra})"

    # -- conversion out ----------------------------------------------------------------------
    def numpy(self):
        """The value as a read-only NumPy array (copied to host from a GPU).

        Inside a transform this is the current value, not a differentiable Tensor.
        """
        return _readonly(_backend.to_device(self._concrete(), "cpu"))

    def __array__(self, dtype=None, copy=None):
        if self._level:
            raise TypeError(
                "Tensor.__array__: a traced Tensor cannot silently become a NumPy array inside "
                "a transform (its gradient would be lost). Use tapegrad.numpy functions "
                "(tnp.sin(x) rather than np.sin(x)), or x.numpy() / tg.stop_gradient(x) if a "
                "constant is really meant."
            )
        arr = self.numpy()
        if dtype is not None:
            arr = arr.astype(dtype)
        if copy:
            arr = arr.copy()
        return arr

    def _decide(self, kind: str, fn):
        """Python decision on a value: record a guard on every live trace holding it."""
        try:
            value = fn(_backend.to_device(self._concrete(), "cpu"))
        except (TypeError, ValueError) as e:
            raise type(e)(f"Tensor.{kind}: {e} (shape {self.shape}, dtype {self.dtype})") from None
        if self._level:
            from tapegrad.tape import record_guard

            record_guard(self, kind, value, _caller_line())
        return value

    def item(self):
        """The single element as a Python number.

        Raises:
            ValueError: if the Tensor has more than one element.
        """
        if self.size != 1:
            raise ValueError(
                f"Tensor.item: only a one-element Tensor converts to a Python number, "
                f"got shape {self.shape}"
            )
        return self._decide("item", lambda a: a.reshape(()).item())

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError(
                f"Tensor.__bool__: the truth value of a Tensor of shape {self.shape} is "
                "ambiguous; reduce it first (tnp.any(x), tnp.all(x))."
            )
        return self._decide("bool", lambda a: bool(a.reshape(())))

    def __float__(self) -> float:
        if self.size != 1:
            raise TypeError(f"float(): Tensor of shape {self.shape} is not a single number")
        return self._decide("float", lambda a: float(a.reshape(())))

    def __int__(self) -> int:
        if self.size != 1:
            raise TypeError(f"int(): Tensor of shape {self.shape} is not a single number")
        return self._decide("int", lambda a: int(a.reshape(())))

    def __index__(self) -> int:
        if self.dtype.kind not in "iub" or self.size != 1:
            raise TypeError(
                f"Tensor.__index__: only a one-element integer Tensor can be used as an index, "
                f"got shape {self.shape}, dtype {self.dtype}"
            )
        return self._decide("int", lambda a: int(a.reshape(())))

    # -- lazy mode ---------------------------------------------------------------------------
    def _concrete(self):
        arr = self._array
        if type(arr) is _LazyArray:
            return _realize_array(arr)
        return arr

    @property
    def is_realized(self) -> bool:
        """False while the value is deferred (lazy mode) and not yet computed."""
        arr = self._array
        return type(arr) is not _LazyArray or arr.realized

    def realize(self) -> Tensor:
        """Run the deferred computation behind this Tensor (lazy mode) and return a Tensor
        holding the concrete array (``self`` when it already holds one).

        Raises:
            RuntimeError: if an op produced another shape or dtype than it promised.
        """
        arr = self._array
        if type(arr) is not _LazyArray:
            return self
        return Tensor._const(_realize_array(arr), self.label)

    @staticmethod
    def deferred(fn, shape, dtype="float32", label=None) -> Tensor:
        """An unrealized Tensor whose value is ``fn()`` (an array of ``shape`` and ``dtype``),
        computed on first use or on :meth:`realize`: the seeds' ``Tensor.deferred``.

        Raises:
            RuntimeError: on realize, if ``fn()`` returns another shape or dtype.
        """
        from tapegrad.lazy import deferred

        return Tensor._const(deferred(fn, shape, dtype), label)

    # -- conversion within tapegrad ----------------------------------------------------------
    def astype(self, dtype) -> Tensor:
        """Cast to ``dtype``; differentiable between floating dtypes."""
        from tapegrad import numpy as tnp

        return tnp.astype(self, dtype)

    convert_to = astype

    def to_device(self, device: str) -> Tensor:
        """Copy to ``device`` (``"cpu"`` or ``"cuda:N"``); differentiable."""
        from tapegrad import numpy as tnp

        return tnp.to_device(self, device)

    def detach(self) -> Tensor:
        """The same value with no gradient (``tg.stop_gradient``)."""
        from tapegrad import numpy as tnp

        return tnp.stop_gradient(self)

    def with_label(self, label: str) -> Tensor:
        """A copy of this Tensor carrying ``label`` (shown in tape listings)."""
        t = _make(self._array, self._primal, self._level, self._trace, self._node, label)
        if self._trace is not None and self._node >= 0:
            self._trace.labels[self._node] = label
        return t


_new = object.__new__
_set = object.__setattr__
_slots = Tensor.__dict__
_s_array = _slots["_array"].__set__
_s_primal = _slots["_primal"].__set__
_s_level = _slots["_level"].__set__
_s_trace = _slots["_trace"].__set__
_s_node = _slots["_node"].__set__
_s_label = _slots["label"].__set__


def _make_py(array, primal, level: int, trace, node: int, label) -> Tensor:
    """A Tensor with these slot values (pure Python: one descriptor call per slot, since the
    frozen class's ``__setattr__`` refuses every assignment)."""
    t = _new(Tensor)
    _s_array(t, array)
    _s_primal(t, primal)
    _s_level(t, level)
    _s_trace(t, trace)
    _s_node(t, node)
    _s_label(t, label)
    return t


def _const_py(array, label=None) -> Tensor:
    """A level-0 constant Tensor over ``array`` (pure Python; see :func:`_make_py`)."""
    return _make_py(array, None, 0, None, -1, label)


# The compiled constructors (src/tapegrad/_speedups.c) fill the slots directly, five times
# faster; the pure-Python ones above are the fallback when the extension was not built, or when
# TAPEGRAD_NO_SPEEDUPS=1 is set (tests compare the two).
_speedups = None
if not os.environ.get("TAPEGRAD_NO_SPEEDUPS"):
    try:
        from tapegrad import _speedups

        _speedups.init(Tensor)
    except ImportError:
        _speedups = None
if _speedups is not None:
    _make = _speedups.make
    _const = _speedups.const
else:
    _make = _make_py
    _const = _const_py
type.__setattr__(Tensor, "_const", _const if _speedups is not None else staticmethod(_const))


def _primal_of(t: Tensor) -> Tensor:
    """The value of traced Tensor ``t`` one level down (its primal).

    The one-level recording path leaves ``_primal`` as ``None`` when the primal is a plain
    level-0 constant over the same array and no rule saved it (one Tensor fewer per op); this
    builds that constant on first use and caches it in the slot.
    """
    p = t._primal
    if p is None:
        p = _const(t._array)
        _s_primal(t, p)
    return p


def _immutable_setattr(self, name, value):
    raise AttributeError(
        f"Tensor is immutable: cannot set attribute {name!r}. Operations return new Tensors; "
        "use x.at[idx].set(v) for functional updates."
    )


def _immutable_delattr(self, name):
    raise AttributeError(f"Tensor is immutable: cannot delete attribute {name!r}")


# attrs refuses a custom __setattr__ on a frozen class; replace its generic message afterwards.
type.__setattr__(Tensor, "__setattr__", _immutable_setattr)
type.__setattr__(Tensor, "__delattr__", _immutable_delattr)


def tensor(data, dtype=None, device=None, label=None) -> Tensor:
    """Make a Tensor (same as ``Tensor(data, dtype, device, label)``)."""
    return Tensor(data, dtype=dtype, device=device, label=label)
