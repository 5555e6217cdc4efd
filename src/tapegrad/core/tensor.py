"""The frozen :class:`Tensor` record.

A Tensor wraps a read-only backend array (NumPy or CuPy). Outside any transform a Tensor is a
*constant* (level 0). While a transform runs, the values it differentiates are *traced*: a
Tensor at level ``k`` wraps its value one level down (its ``primal``) and names its node on the
trace of level ``k``. Operations never mutate a Tensor; every one returns a new Tensor. The
operators and NumPy-style methods are attached by :mod:`tapegrad.ops` when it is imported.
"""

from __future__ import annotations

import os
import sys
from itertools import chain as _chain
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from tapegrad.core import backend as _backend
from tapegrad.core import dtypes as _dtypes
from tapegrad.core.lazy import LazyArray as _LazyArray
from tapegrad.core.lazy import realize_array as _realize_array

__all__ = ["Tensor", "Box", "tensor", "is_floating", "sequence_dtype"]

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # tapegrad/
_DEFAULT_DTYPES = {"f": np.float32, "c": np.complex64, "i": np.int64, "b": np.bool_}


def is_floating(dtype) -> bool:
    """Whether ``dtype`` is a floating or complex (differentiable) dtype, bfloat16 included."""
    return _dtypes.is_floating(dtype)


def _numeric(dtype) -> bool:
    """Whether a Tensor can hold ``dtype``: bool, integers, floats (bfloat16 too), complex."""
    return dtype.kind in "biufc" or dtype == _dtypes.bfloat16


_PY_DEFAULTS = {bool: np.dtype(np.bool_), int: np.dtype(np.int64), float: np.dtype(np.float32),
                complex: np.dtype(np.complex64)}
_PY_TYPES = frozenset(_PY_DEFAULTS)


def sequence_dtype(seq):
    """The dtype of a Tensor made from the nested list/tuple ``seq``, when it holds arrays,
    NumPy scalars or Tensors: the promotion of every leaf's dtype, each leaf taken as it would
    be alone (arrays, NumPy scalars and Tensors keep theirs; Python floats are float32, ints
    int64, complex numbers complex64, bools bool). So ``[a, b]`` of float64 arrays is
    float64, as stacking them gives. ``None`` when every leaf is a Python number (then the
    defaults apply as they are) or a leaf is not numeric (NumPy's conversion decides).
    """
    if _PY_TYPES.issuperset(map(type, seq)):
        return None  # the common case: a flat list of Python numbers
    dtypes = set()
    strong = False
    todo = [seq]
    while todo:
        items = todo.pop()
        for t in set(map(type, items)):  # the distinct types: C speed for long flat lists
            default = _PY_DEFAULTS.get(t)
            if default is not None:
                dtypes.add(default)
            elif issubclass(t, (list, tuple)):  # one level down, all sublists at once
                todo.append(list(_chain.from_iterable(v for v in items if type(v) is t)))
            else:
                for v in items:
                    if type(v) is t:
                        dt = getattr(v, "dtype", None)
                        if not isinstance(dt, np.dtype) or not _numeric(dt):
                            return None
                        dtypes.add(dt)
                        strong = True
    return _dtypes.result_type(*dtypes) if strong else None


def caller_line() -> str:
    """``file:line`` of the nearest frame outside the tapegrad package (user code)."""
    f = sys._getframe(1)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_PKG_DIR):
        f = f.f_back
    return "<unknown>" if f is None else f"{f.f_code.co_filename}:{f.f_lineno}"


def _to_array(data, dtype=None, device=None):
    """A backend array owned by the new Tensor, following tapegrad's dtype rules.

    A caller's NumPy/CuPy array is copied (the Tensor must not change when the caller writes
    into its array); a Tensor's array is shared (it is never written). Python floats become
    float32, ints int64, bools bool, complex numbers complex64.
    """
    if isinstance(data, Tensor):
        arr = data._concrete()
        if data._level:  # a new constant from a traced value: read out, like numpy()
            data._trace.decide(data, "numpy", _backend.to_device(arr, "cpu"), what="Tensor(x)")
        if dtype is not None and arr.dtype != np.dtype(dtype):
            arr = arr.astype(dtype)
        if device is not None:
            arr = _backend.to_device(arr, _backend.parse_device(device))
        return arr
    if isinstance(data, np.ndarray):
        if not _numeric(data.dtype) and (dtype is None or not _numeric(np.dtype(dtype))):
            raise TypeError(
                f"Tensor: expected a numeric array, got dtype {data.dtype} (shape {data.shape}); "
                "a Tensor holds booleans, integers, floats or complex numbers (cast with "
                "dtype=, for example Tensor(a, dtype='float32'))."
            )
        arr = np.array(data, dtype=dtype, copy=True)
    elif hasattr(data, "__cuda_array_interface__") and hasattr(data, "dtype"):
        arr = data.astype(data.dtype if dtype is None else dtype, copy=True)
    else:
        if dtype is None and isinstance(data, (list, tuple)):
            dtype = sequence_dtype(data)  # lists of arrays keep the arrays' dtype
        try:
            arr = np.array(data, dtype=dtype)
        except (ValueError, TypeError, OverflowError) as e:
            raise TypeError(
                f"Tensor: cannot make a numeric array from {type(data).__name__} ({e}); pass a "
                "number, a (nested) list of numbers or a NumPy/CuPy array."
            ) from None
        if not _numeric(arr.dtype):
            raise TypeError(
                f"Tensor: expected numeric data, got an array of dtype {arr.dtype} from "
                f"{type(data).__name__}"
            )
        if dtype is None and not isinstance(data, np.generic):
            arr = arr.astype(_DEFAULT_DTYPES.get(arr.dtype.kind, arr.dtype), copy=False)
    if device is not None:
        arr = _backend.to_device(arr, _backend.parse_device(device))
    if type(arr) is np.ndarray:
        arr.flags.writeable = False
    return arr


class Box:
    """The trace state of a Tensor: which transform traces it, and where (internal).

    Attributes:
        level: The level of the trace recording it (0 for a constant).
        trace: That trace (None for a constant).
        node: The value's node id on the trace (-1 for a constant).
        primal: The value one level down (None: the constant over the Tensor's own array,
            built on first use by :func:`primal_of`).
        label: The Tensor's label, or None.
    """

    __slots__ = ("level", "trace", "node", "primal", "label")

    def __init__(self, level: int, trace: Any, node: int, primal: Any, label: Any = None):
        self.level = level
        self.trace = trace
        self.node = node
        self.primal = primal
        self.label = label


_GRAD_HOW = (
    "tapegrad differentiates functions, not Tensors. Write the loss as a function of what it "
    "depends on and transform it:\n"
    "    grads = tg.grad(loss_fn)(params)                 # d loss / d params, shaped like "
    "params\n"
    "    loss, grads = tg.value_and_grad(loss_fn)(params)  # the loss and its gradient at once"
)
_ARGS_HOW = (
    "every floating Tensor can be differentiated: the arguments you pass to the function that "
    "tg.grad transforms are what it differentiates with respect to (argnums=0 by default, "
    "argnums=(0, 1) for two; a pytree argument gives a gradient per leaf). Pass constants as "
    "other arguments, or wrap a value in tg.stop_gradient(x)"
)
_TRACE_HOW = (
    "no graph hangs on a Tensor: tg.trace(f)(x) returns f's output and its Tape (print(tape) "
    "lists each op, tape.draw() draws it)"
)
_CAST_HOW = "write x.astype('{0}') or x.to('{0}')"
_NEW_HOW = (
    "Tensor has no {0}(): make a new Tensor with tapegrad.numpy, for example "
    "tnp.zeros(shape, dtype=x.dtype, device=x.device), tnp.ones_like(x), "
    "tnp.full(shape, value, dtype=x.dtype) or tnp.asarray(data, dtype=x.dtype)."
)

#: Messages for the PyTorch names Tensor does not have: each says what tapegrad does instead.
_TORCH_NAMES = {
    "backward": "Tensor has no backward(): " + _GRAD_HOW,
    "grad": "Tensor has no .grad: gradients are returned, not stored on Tensors (nn.Module and "
    "optim.Optimizer keep the latest ones in their .grads). " + _GRAD_HOW,
    "retain_grad": "Tensor has no retain_grad(): gradients are returned, not stored. "
    + _GRAD_HOW,
    "zero_grad": "Tensor has no zero_grad(): tg.grad returns fresh gradients on each call, so "
    "there is nothing to reset.",
    "requires_grad": "Tensor has no requires_grad: " + _ARGS_HOW + ".",
    "requires_grad_": "Tensor has no requires_grad_(): " + _ARGS_HOW + ".",
    "grad_fn": "Tensor has no grad_fn: " + _TRACE_HOW + ".",
    "is_leaf": "Tensor has no is_leaf: " + _TRACE_HOW + ".",
    "register_hook": "Tensor has no register_hook(): to see or change a cotangent, wrap the "
    "computation in tg.custom_vjp and write its backward rule.",
    "data": "Tensor has no .data: for the value without its derivative write x.detach() (or "
    "tg.stop_gradient(x)); for a NumPy array, x.numpy().",
    "is_cuda": "Tensor has no is_cuda: x.device is 'cpu' or 'cuda:N' (x.device != 'cpu' on a "
    "GPU).",
    "type": "Tensor has no type(): x.dtype is its dtype; x.astype(dtype) or x.to(dtype) "
    "casts.",
    "type_as": "Tensor has no type_as(): write x.astype(other.dtype) or x.to(other).",
    "new_zeros": _NEW_HOW.format("new_zeros"),
    "new_ones": _NEW_HOW.format("new_ones"),
    "new_full": _NEW_HOW.format("new_full"),
    "new_empty": _NEW_HOW.format("new_empty"),
    "new_tensor": _NEW_HOW.format("new_tensor"),
    "float": "Tensor has no float(): " + _CAST_HOW.format("float32") + ".",
    "double": "Tensor has no double(): " + _CAST_HOW.format("float64") + ".",
    "half": "Tensor has no half(): " + _CAST_HOW.format("float16") + ".",
    "long": "Tensor has no long(): " + _CAST_HOW.format("int64") + ".",
    "int": "Tensor has no int(): " + _CAST_HOW.format("int32") + " (int(x) gives a Python int).",
    "short": "Tensor has no short(): " + _CAST_HOW.format("int16") + ".",
    "byte": "Tensor has no byte(): " + _CAST_HOW.format("uint8") + ".",
    "bool": "Tensor has no bool(): " + _CAST_HOW.format("bool") + " (bool(x) gives a Python "
    "bool).",
}


def _missing_attribute(self, name: str):
    """``AttributeError`` for ``x.name``; PyTorch's names say what tapegrad does instead."""
    # name=None (set, so Python does not fill it in): no "Did you mean" beside the message
    msg = _TORCH_NAMES.get(name)
    if msg is not None:
        return AttributeError(msg, name=None, obj=self)
    if name[-1:] == "_" and name[:1] != "_":  # PyTorch's in-place methods: add_, zero_, ...
        return AttributeError(
            f"Tensor has no {name}(): Tensors are immutable, so there are no in-place methods "
            f"(PyTorch's trailing underscore). Compute a new Tensor and rebind the name: "
            "x = x + y for x.add_(y), x = tnp.zeros_like(x) for x.zero_(), x = x.at[idx].set(v) "
            "for x[idx] = v. Gradients need no zeroing: tg.grad returns fresh ones.",
            name=None,
            obj=self,
        )
    # Python adds its "Did you mean" suggestion from name and obj
    return AttributeError(f"'Tensor' object has no attribute {name!r}", name=name, obj=self)


@attrs.frozen(eq=False, init=False, repr=False, weakref_slot=True)
class Tensor:
    """An immutable n-dimensional array that transforms can differentiate.

    Args:
        data: A number, nested list, NumPy/CuPy array or Tensor. Python floats become float32,
            ints int64, bools bool, complex numbers complex64; arrays keep their dtype. A
            nested list holding arrays, NumPy scalars or Tensors gets the promotion of its
            leaves' dtypes, each taken as it would be alone (a list of float64 arrays is
            float64). A caller's array is copied, so writing into it later never changes the
            Tensor.
        dtype: Optional dtype to convert to (NumPy dtype or name).
        device: ``"cpu"`` (default for Python data) or ``"cuda:N"`` (needs CuPy).
        label: Optional name shown in tape listings and graph drawings.
        requires_grad: PyTorch's flag, accepted only as False: any floating Tensor can be
            differentiated, and :func:`tapegrad.grad` differentiates with respect to the
            arguments of the function it transforms (``argnums``).

    Attributes:
        shape: The dimension sizes, a tuple of ints.
        dtype: The NumPy dtype.
        ndim: The number of dimensions (PyTorch's ``x.dim()``).
        size: The number of elements, an int (PyTorch's ``x.numel()``).
        device: ``"cpu"`` or ``"cuda:N"``.
        label: The name shown in tape listings, or None.
        T: The transpose (axes reversed).
        mT: The matrix transpose (the last two axes swapped).
        at: Functional index updates: ``x.at[idx].set(v)``, ``.add(v)``, ...

    A Tensor made from a traced Tensor is a new constant, so it is a read of the value like
    ``x.numpy()``: a guard inside ``jit`` and ``trace``, refused under a transform that
    differentiates a floating ``x`` and for a batched value inside ``vmap`` (compute on ``x``
    itself, or use ``tg.stop_gradient(x)`` for a constant).

    Raises:
        TypeError: if ``data`` is not numeric; for a traced ``data`` as above; on attribute or
            item assignment (Tensors are immutable: use ``x.at[idx].set(v)``); for
            ``requires_grad=True``.
        AttributeError: for a missing attribute; PyTorch's ``backward``, ``grad``,
            ``requires_grad``, ``grad_fn``, in-place methods (``zero_``, ``add_``, ...) and
            casts (``float()``, ``long()``, ...) get a message with the tapegrad way.

    Example:
        >>> import tapegrad as tg
        >>> x = tg.Tensor([1.0, 2.0, 3.0])
        >>> (x * x).sum().item()
        14.0
    """

    _array: Any  # the value (a backend array, or a deferred LazyArray in lazy mode)
    _box: Box | None  # None for an unlabelled constant, else its trace state

    __array_priority__ = 1000

    def __init__(self, data, dtype=None, device=None, label=None, *, requires_grad=False):
        if requires_grad:
            _refuse_requires_grad("Tensor")
        _s_array(self, _to_array(data, dtype, device))
        _s_box(self, None if label is None else Box(0, None, -1, None, label))

    @property
    def label(self):
        """The Tensor's label (shown in tape listings), or None."""
        b = self._box
        return None if b is None else b.label

    @property
    def _level(self) -> int:
        b = self._box
        return 0 if b is None else b.level

    @property
    def _trace(self) -> Any:
        b = self._box
        return None if b is None else b.trace

    @property
    def _node(self) -> int:
        b = self._box
        return -1 if b is None else b.node

    @property
    def _primal(self):
        b = self._box
        return None if b is None else b.primal

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
        """Number of elements (NumPy's attribute, a Python int; PyTorch's ``x.size()`` is
        :attr:`shape` here, and ``x.numel()`` is this number too)."""
        return self._array.size

    def numel(self) -> int:
        """Number of elements (PyTorch's name for :attr:`size`)."""
        return self._array.size

    def dim(self) -> int:
        """Number of dimensions (PyTorch's name for :attr:`ndim`)."""
        return self._array.ndim

    @property
    def device(self) -> str:
        """``"cpu"`` or ``"cuda:N"``."""
        return _backend.device_of(self._array)

    @property
    def is_traced(self) -> bool:
        """True while a transform is tracing this value (level > 0)."""
        b = self._box
        return b is not None and b.level > 0

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d Tensor; it has no first axis")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d Tensor; it has no first axis")
        for i in range(self.shape[0]):
            yield self[i]

    def _batched_over(self):
        """The batch size of the innermost running ``vmap`` holding this value (or None)."""
        t = self
        while t is not None and t._level:
            trace = t._trace
            if trace.batched and not trace.done:
                return trace.size
            t = t._primal
        return None

    def __repr__(self) -> str:
        if self._level and self._batched_over() is not None:
            return (f"Tensor(<batched over {self._batched_over()} examples>, shape={self.shape}, "
                    f"dtype={self.dtype})")
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
    def numpy(self) -> np.ndarray:
        """The value as a read-only NumPy array (copied to host from a GPU).

        Reading a value out of a transform is a Python decision on it, like ``float(x)``:
        inside ``jit`` and ``trace`` it is recorded as a guard (a call whose value differs
        traces again, so the array is never a stale constant); inside a transform that
        differentiates a floating value it is refused (the array would carry no derivative:
        write ``tg.stop_gradient(x).numpy()`` when a constant is meant); inside ``vmap`` a
        batched value is refused. ``np.asarray(x)`` and ``np.array(x)`` do the same.

        Raises:
            TypeError: for a floating value that ``grad``, ``vjp``, ``jvp`` or another
                differentiating transform traces; for a batched value inside ``vmap``.
        """
        arr = _backend.to_device(self._concrete(), "cpu")
        if self._level:
            self._trace.decide(self, "numpy", arr)
        if arr.flags.writeable:
            arr = arr.view()
            arr.flags.writeable = False
        return arr

    def tolist(self) -> Any:
        """The value as nested Python lists of Python numbers (NumPy's ``ndarray.tolist``; a
        Python number for a 0-d Tensor).

        A read of the value like :meth:`numpy`: a guard inside ``jit`` and ``trace``, refused
        for a floating value that a differentiating transform traces and for a batched value
        inside ``vmap``.

        Raises:
            TypeError: for a traced value as above.

        Example:
            >>> import tapegrad as tg
            >>> tg.Tensor([[1, 2], [3, 4]]).tolist()
            [[1, 2], [3, 4]]
        """
        arr = _backend.to_device(self._concrete(), "cpu")
        if self._level:
            self._trace.decide(self, "numpy", arr, what="tolist()")
        return arr.tolist()

    def clone(self) -> Tensor:
        """``self`` (PyTorch's ``clone``): Tensors are immutable, so a copy could never differ
        from the original."""
        return self

    def contiguous(self) -> Tensor:
        """``self`` (PyTorch's ``contiguous``): memory layout is the backend's business, and
        every op accepts any layout."""
        return self

    if not TYPE_CHECKING:  # (type checkers keep reporting unknown attributes)

        def __getattr__(self, name: str):
            # only reached for a name the class does not have
            if name[:2] == "__":  # a protocol probe (NumPy asks for __array_interface__)
                raise AttributeError(name)
            raise _missing_attribute(self, name)

    def __array__(self, dtype=None, copy=None):
        if self._level and dtype is not None and np.dtype(dtype).kind in "iub":
            # np.int64(x), np.bool_(x): a cast with no derivative, decided as int(x)/bool(x)
            return self._as_integer_array(np.dtype(dtype))
        arr = self.numpy()
        if dtype is not None and arr.dtype != np.dtype(dtype):
            return arr.astype(dtype)
        return arr.copy() if copy else arr

    def _as_integer_array(self, dtype) -> np.ndarray:
        """A traced one-element Tensor as an integer or boolean NumPy array (what NumPy's
        scalar types ask for), decided as ``int()``/``bool()`` are, with their errors."""
        kind = "bool" if dtype.kind == "b" else "int"
        try:
            value = self._decide(kind, lambda a: a.astype(dtype)[()])
        except (TypeError, ValueError) as e:
            raise type(e)(f"{e} For the values as a {dtype.name} Tensor, write "
                          f"x.astype('{dtype.name}').") from None
        return np.full(self.shape, value, dtype)

    def _decide(self, kind: str, fn):
        """A Python decision on the value, recorded as a guard on every trace holding it."""
        if self.size != 1:  # NumPy's error types: ValueError for item/bool, else TypeError
            raise (ValueError if kind in ("item", "bool") else TypeError)(
                f"{kind}(): only a one-element Tensor converts to a Python value, got shape "
                f"{self.shape}" + (" (the truth value of several elements is ambiguous)"
                                   if kind == "bool" else "")
                + "; reduce it first (tnp.any(x), tnp.all(x), x.sum())."
            )
        value = fn(_backend.to_device(self._concrete(), "cpu").reshape(()))
        if self._level:
            self._trace.decide(self, kind, value)
        return value

    def item(self):
        """The single element as a Python number.

        Raises:
            ValueError: if the Tensor has more than one element.
            TypeError: inside a transform that
                differentiates it (the result would carry no derivative: use
                ``tg.stop_gradient(x).item()`` when a constant is meant).
        """
        return self._decide("item", lambda a: a.item())

    def __bool__(self) -> bool:
        return self._decide("bool", bool)

    def __float__(self) -> float:
        return self._decide("float", float)

    def __complex__(self) -> complex:
        return self._decide("complex", complex)

    def __int__(self) -> int:
        return self._decide("int", int)

    def __index__(self) -> int:
        if self.dtype.kind not in "iub":
            raise TypeError(
                f"Tensor.__index__: only an integer Tensor can be used as an index, got dtype "
                f"{self.dtype} (shape {self.shape})"
            )
        return self._decide("int", int)

    # -- lazy mode ---------------------------------------------------------------------------
    def _concrete(self) -> Any:
        arr = self._array
        return _realize_array(arr) if type(arr) is _LazyArray else arr

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
        if type(self._array) is not _LazyArray:
            return self
        return make(_realize_array(self._array), 0, None, -1, None, self.label)

    @staticmethod
    def deferred(fn, shape, dtype="float32", label=None) -> Tensor:
        """An unrealized Tensor whose value is ``fn()`` (an array of ``shape`` and ``dtype``),
        computed on first use or on :meth:`realize` (lazy mode).

        Raises:
            RuntimeError: on realize, if ``fn()`` returns another shape or dtype.
        """
        from tapegrad.core.lazy import deferred

        return make(deferred(fn, shape, dtype), 0, None, -1, None, label)

    def with_label(self, label: str) -> Tensor:
        """A copy of this Tensor carrying ``label`` (shown in tape listings)."""
        b = self._box
        if b is None:
            return make(self._array, 0, None, -1, None, label)
        if b.trace is not None:
            b.trace.labels[b.node] = label
        return make(self._array, b.level, b.trace, b.node, b.primal, label)

    if TYPE_CHECKING:
        # The operators and NumPy-style methods the ops layer attaches when it is imported
        # (tapegrad.ops._registry.install_methods), declared for type checkers; a test keeps
        # this list equal to what is attached.
        @property
        def T(self) -> Tensor: ...
        def __abs__(self) -> Tensor: ...
        def __add__(self, other) -> Tensor: ...
        def __and__(self, other) -> Tensor: ...
        def __array_function__(self, func, types, args, kwargs) -> Any: ...
        def __array_namespace__(self, *, api_version=...) -> Any: ...
        def __array_ufunc__(self, ufunc, method, *inputs: Any, **kwargs: Any) -> Any: ...
        def __divmod__(self, other) -> tuple[Tensor, Tensor]: ...
        def __dlpack__(self, *, stream=..., max_version=..., dl_device=..., copy=...) -> Any: ...
        def __dlpack_device__(self) -> tuple[int, int]: ...
        def __eq__(self, other: Any) -> Tensor: ...  # type: ignore[override]
        def __floordiv__(self, other) -> Tensor: ...
        def __ge__(self, other) -> Tensor: ...
        def __getitem__(self, idx) -> Tensor: ...
        def __gt__(self, other) -> Tensor: ...
        def __invert__(self) -> Tensor: ...
        def __le__(self, other) -> Tensor: ...
        def __lshift__(self, other) -> Tensor: ...
        def __lt__(self, other) -> Tensor: ...
        def __matmul__(self, other) -> Tensor: ...
        def __mod__(self, other) -> Tensor: ...
        def __mul__(self, other) -> Tensor: ...
        def __ne__(self, other: Any) -> Tensor: ...  # type: ignore[override]
        def __neg__(self) -> Tensor: ...
        def __or__(self, other) -> Tensor: ...
        def __pos__(self) -> Tensor: ...
        def __pow__(self, other) -> Tensor: ...
        def __radd__(self, other) -> Tensor: ...
        def __rand__(self, other) -> Tensor: ...
        def __rdivmod__(self, other) -> tuple[Tensor, Tensor]: ...
        def __rfloordiv__(self, other) -> Tensor: ...
        def __rlshift__(self, other) -> Tensor: ...
        def __rmatmul__(self, other) -> Tensor: ...
        def __rmod__(self, other) -> Tensor: ...
        def __rmul__(self, other) -> Tensor: ...
        def __ror__(self, other) -> Tensor: ...
        def __round__(self, decimals=...) -> Tensor: ...
        def __rpow__(self, other) -> Tensor: ...
        def __rrshift__(self, other) -> Tensor: ...
        def __rshift__(self, other) -> Tensor: ...
        def __rsub__(self, other) -> Tensor: ...
        def __rtruediv__(self, other) -> Tensor: ...
        def __rxor__(self, other) -> Tensor: ...
        def __sub__(self, other) -> Tensor: ...
        def __truediv__(self, other) -> Tensor: ...
        def __xor__(self, other) -> Tensor: ...
        def abs(self) -> Tensor: ...
        def all(self, axis=..., out=..., keepdims=...) -> Tensor: ...
        def any(self, axis=..., out=..., keepdims=...) -> Tensor: ...
        def arccos(self) -> Tensor: ...
        def arccosh(self) -> Tensor: ...
        def arcsin(self) -> Tensor: ...
        def arcsinh(self) -> Tensor: ...
        def arctan(self) -> Tensor: ...
        def arctanh(self) -> Tensor: ...
        def argmax(self, axis=..., out=..., *, keepdims=...) -> Tensor: ...
        def argmin(self, axis=..., out=..., *, keepdims=...) -> Tensor: ...
        def argpartition(self, kth, axis=..., kind=..., order=...) -> Tensor: ...
        def argsort(
            self, axis=..., kind=..., order=..., *, stable=..., descending=...
        ) -> Tensor: ...
        def astype(self, dtype, copy=...) -> Tensor: ...
        @property
        def at(self) -> Any: ...
        def broadcast_to(self, shape) -> Tensor: ...
        @staticmethod
        def cat(arrays, axis=..., out=..., *, dtype=..., casting=...) -> Tensor: ...
        def cbrt(self) -> Tensor: ...
        def ceil(self) -> Tensor: ...
        def clip(self, a_min=..., a_max=..., *, min=..., max=...) -> Tensor: ...
        def conj(self) -> Tensor: ...
        def conjugate(self) -> Tensor: ...
        def convert_to(self, dtype, copy=...) -> Tensor: ...
        def cos(self) -> Tensor: ...
        def cosh(self) -> Tensor: ...
        def cpu(self) -> Tensor: ...
        def cuda(self, device=..., non_blocking=...) -> Tensor: ...
        def cumprod(self, axis=..., dtype=..., out=...) -> Tensor: ...
        def cumsum(self, axis=..., dtype=..., out=...) -> Tensor: ...
        def detach(self) -> Tensor: ...
        def diagonal(self, offset=..., axis1=..., axis2=...) -> Tensor: ...
        def dot(self, b) -> Tensor: ...
        def erf(self) -> Tensor: ...
        def erfc(self) -> Tensor: ...
        def exp(self) -> Tensor: ...
        def exp2(self) -> Tensor: ...
        def expand(self, *shape: Any) -> Tensor: ...
        def expm1(self) -> Tensor: ...
        def flatten(self, start_dim=..., end_dim=...) -> Tensor: ...
        def flip(self, axis=...) -> Tensor: ...
        def floor(self) -> Tensor: ...
        def gather(self, index=...) -> Tensor: ...
        def gelu(self, approximate=...) -> Tensor: ...
        @property
        def imag(self) -> Tensor: ...
        def isfinite(self) -> Tensor: ...
        def isinf(self) -> Tensor: ...
        def isnan(self) -> Tensor: ...
        def log(self) -> Tensor: ...
        def log10(self) -> Tensor: ...
        def log1p(self) -> Tensor: ...
        def log2(self) -> Tensor: ...
        def logical_not(self) -> Tensor: ...
        def logsumexp(self, axis=..., keepdims=...) -> Tensor: ...
        @property
        def mT(self) -> Tensor: ...
        def matmul(self, b) -> Tensor: ...
        def max(self, axis=..., out=..., keepdims=...) -> Tensor: ...
        def maximum(self, y) -> Tensor: ...
        def mean(self, axis=..., dtype=..., out=..., keepdims=...) -> Tensor: ...
        def min(self, axis=..., out=..., keepdims=...) -> Tensor: ...
        def minimum(self, y) -> Tensor: ...
        def moveaxis(self, source, destination) -> Tensor: ...
        def nonzero(self) -> tuple[Tensor, ...]: ...
        def pad(self, pad_width, mode=..., constant_values=...) -> Tensor: ...
        def permute(self, *dims: Any) -> Tensor: ...
        def pow(self, y) -> Tensor: ...
        def prod(self, axis=..., dtype=..., out=..., keepdims=...) -> Tensor: ...
        def ravel(self) -> Tensor: ...
        @property
        def real(self) -> Tensor: ...
        def reciprocal(self) -> Tensor: ...
        def relu(self) -> Tensor: ...
        def repeat(self, repeats, axis=...) -> Tensor: ...
        def reshape(self, *shape: Any) -> Tensor: ...
        def rint(self) -> Tensor: ...
        def roll(self, shifts, dims=...) -> Tensor: ...
        def round(self, decimals=...) -> Tensor: ...
        def sigmoid(self) -> Tensor: ...
        def sign(self) -> Tensor: ...
        def sin(self) -> Tensor: ...
        def sinh(self) -> Tensor: ...
        def softplus(self) -> Tensor: ...
        def sqrt(self) -> Tensor: ...
        def square(self) -> Tensor: ...
        def squeeze(self, axis=...) -> Tensor: ...
        @staticmethod
        def stack(arrays, axis=..., out=..., *, dtype=..., casting=...) -> Tensor: ...
        def std(
            self, axis=..., dtype=..., out=..., ddof=..., keepdims=..., *, correction=...
        ) -> Tensor: ...
        def strided_windows(self, kernel_size, stride=...) -> Tensor: ...
        def sum(self, axis=..., dtype=..., out=..., keepdims=...) -> Tensor: ...
        def swapaxes(self, axis1, axis2) -> Tensor: ...
        def take(self, indices, axis=..., mode=...) -> Tensor: ...
        def tan(self) -> Tensor: ...
        def tanh(self) -> Tensor: ...
        def tile(self, reps) -> Tensor: ...
        def to(self, *args: Any, device=..., dtype=..., non_blocking=..., copy=...) -> Tensor: ...
        def to_device(self, device, *, stream=...) -> Tensor: ...
        def trace(self, offset=..., axis1=..., axis2=..., dtype=..., out=...) -> Tensor: ...
        def transpose(self, *axes: Any, dim0=..., dim1=...) -> Tensor: ...
        def tril(self, k=...) -> Tensor: ...
        def triu(self, k=...) -> Tensor: ...
        def trunc(self) -> Tensor: ...
        def unsqueeze(self, dim) -> Tensor: ...
        def var(
            self, axis=..., dtype=..., out=..., ddof=..., keepdims=..., *, correction=...
        ) -> Tensor: ...
        def view(self, *shape: Any) -> Tensor: ...


_new = object.__new__
_s_array = Tensor.__dict__["_array"].__set__
_s_box = Tensor.__dict__["_box"].__set__


def make(array, level, trace, node, primal, label=None) -> Tensor:
    """A Tensor with these field values, without conversion or checks (internal).

    The frozen class refuses attribute assignment, so each slot is filled through its
    descriptor: the cheapest way to build an attrs record without running its checks.
    """
    t = _new(Tensor)
    _s_array(t, array)
    _s_box(t, Box(level, trace, node, primal, label))
    return t


def const(array) -> Tensor:
    """A level-0 constant Tensor over a backend ``array`` the caller will not write (internal)."""
    t = _new(Tensor)
    _s_array(t, array)
    _s_box(t, None)
    return t


def primal_of(t: Tensor) -> Tensor:
    """The value of traced ``t`` one level down (built and cached on first use when it is the
    level-0 constant over ``t``'s own array)."""
    b = t._box
    p = b.primal  # pyright: ignore[reportOptionalMemberAccess]
    if p is None:
        p = b.primal = const(t._array)  # pyright: ignore[reportOptionalMemberAccess]
    return p


def host_value(t: Tensor) -> np.ndarray:
    """``t``'s value as a NumPy array, for library code that only decides on it or computes a
    result that carries no derivative (counts, indices, shapes): recorded as a guard on every
    ``jit``/``trace`` recording ``t``, refused for a batched value inside ``vmap``, and allowed
    under a differentiating transform (unlike ``t.numpy()``)."""
    arr = _backend.to_device(t._concrete(), "cpu")
    if t._level:
        t._trace.decide(t, "numpy", arr, only_branch=True)
    return arr


def all_values(t: Tensor) -> np.ndarray:
    """Every value ``t`` stands for, as a NumPy array, for checking inputs: its value, or
    inside ``vmap`` the values of all examples (the batch's array, batch axes first). It
    carries no derivative: never compute results from it."""
    while t._level:
        t = primal_of(t)
    return _backend.to_device(t._concrete(), "cpu")


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


def tensor(data, dtype=None, device=None, label=None, *, requires_grad=False) -> Tensor:
    """Make a Tensor (same as ``Tensor(data, dtype, device, label)``).

    Raises:
        TypeError: for ``requires_grad=True`` (see :class:`Tensor`).
    """
    if requires_grad:
        _refuse_requires_grad("tensor")
    return Tensor(data, dtype=dtype, device=device, label=label)


def _refuse_requires_grad(who: str):
    raise TypeError(
        f"{who}: requires_grad=True is PyTorch's; tapegrad needs no flag: " + _ARGS_HOW + ". "
        "For example\n"
        "    x = tg.tensor([1.0, 2.0])\n"
        "    g = tg.grad(lambda x: (x * x).sum())(x)   # d/dx, no requires_grad needed"
    )
