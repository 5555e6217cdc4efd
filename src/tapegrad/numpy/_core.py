"""Core of ``tapegrad.numpy``: operand conversion, dtypes, casting, devices, stop_gradient.

See the package docstring for the conventions.

Write ordinary NumPy-style code with ``import tapegrad.numpy as tnp`` and differentiate it with
the transforms. Inputs may be Tensors, NumPy/CuPy arrays or Python numbers; Python numbers keep
the Tensor operand's dtype (NumPy's weak scalar promotion), lists become float32 Tensors.
Broadcasting follows NumPy. Every function returns a new Tensor.
"""

from __future__ import annotations

import builtins as _builtins
import math
import operator
from typing import Any as _Any

import numpy as _np

from tapegrad import ops as _ops
from tapegrad.core import dtypes as _dtypes
from tapegrad.core.backend import parse_device as _parse_device
from tapegrad.core.tensor import Tensor
from tapegrad.ops._registry import operand as _t  # noqa: F401  (used by sibling modules)
from tapegrad.ops._registry import tensor_arg as _tensor  # noqa: F401

_builtin_bool = _builtins.bool

__all__ = [
    "asarray",
    "array",
    "copy",
    "ndim",
    "shape",
    "size",
    "stop_gradient",
    "to_device",
    # dtypes (NumPy's scalar types) and constants
    "dtype",
    "float16",
    "float32",
    "bfloat16",
    "float64",
    "complex64",
    "complex128",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool_",
    "bool",
    "intp",
    "uintp",
    "int_",
    "uint",
    "half",
    "single",
    "double",
    "csingle",
    "cdouble",
    "byte",
    "ubyte",
    "short",
    "ushort",
    "intc",
    "uintc",
    "longlong",
    "ulonglong",
    "generic",
    "number",
    "integer",
    "signedinteger",
    "unsignedinteger",
    "inexact",
    "floating",
    "complexfloating",
    "pi",
    "e",
    "inf",
    "nan",
    "newaxis",
    "euler_gamma",
]

#: NumPy's dtype class and scalar types, so that ``tnp.float32``, ``x.dtype == tnp.int64`` and
#: ``tnp.issubdtype(x.dtype, tnp.floating)`` read as with NumPy.
dtype = _np.dtype
float16, float32, float64 = _np.float16, _np.float32, _np.float64
#: bfloat16 (``ml_dtypes.bfloat16``, the type JAX uses): 8 exponent bits, 7 mantissa bits.
bfloat16 = _dtypes.bfloat16.type
complex64, complex128 = _np.complex64, _np.complex128
int8, int16, int32, int64 = _np.int8, _np.int16, _np.int32, _np.int64
uint8, uint16, uint32, uint64 = _np.uint8, _np.uint16, _np.uint32, _np.uint64
bool_ = bool = _np.bool_  # noqa: A001
intp, uintp, int_, uint = _np.intp, _np.uintp, _np.int_, _np.uint
half, single, double, csingle, cdouble = (_np.half, _np.single, _np.double, _np.csingle,
                                          _np.cdouble)
byte, ubyte, short, ushort = _np.byte, _np.ubyte, _np.short, _np.ushort
intc, uintc, longlong, ulonglong = _np.intc, _np.uintc, _np.longlong, _np.ulonglong
generic, number, integer, signedinteger = _np.generic, _np.number, _np.integer, _np.signedinteger
unsignedinteger, inexact, floating = _np.unsignedinteger, _np.inexact, _np.floating
complexfloating = _np.complexfloating

#: Constants, as NumPy's (Python floats; ``newaxis`` is ``None``).
pi, e, inf, nan, euler_gamma = _np.pi, _np.e, _np.inf, _np.nan, _np.euler_gamma
newaxis = None

_ORDERS = (None, "K", "A", "C", "F")
_PY_NUMBERS = (int, float, complex, _builtin_bool)


def _has_tensor(obj) -> _builtin_bool:
    """Whether a nested list/tuple holds a Tensor somewhere."""
    for v in obj:
        if isinstance(v, Tensor):
            return True
        if isinstance(v, (list, tuple)) and _has_tensor(v):
            return True
    return False


def _leaves(obj, out: list) -> None:
    for v in obj:
        if isinstance(v, (list, tuple)):
            _leaves(v, out)
        else:
            out.append(v)


def _nested(obj, dt, op: str, device: str) -> Tensor:
    """A Tensor from a nested list/tuple holding Tensors: each leaf cast to ``dt`` (Tensors
    with the differentiable cast; other data made on ``device``), then stacked level by level
    (differentiable)."""
    if not isinstance(obj, (list, tuple)):
        if isinstance(obj, Tensor):
            return obj if obj.dtype == dt else _ops.AsType.api(obj, dt)
        try:
            return Tensor(_np.asarray(obj, dtype=dt), device=device)
        except (TypeError, ValueError) as err:
            raise TypeError(f"{op}: cannot convert {type(obj).__name__} to {dt} ({err})") from None
    parts = [_nested(v, dt, op, device) for v in obj]
    if not parts:
        return Tensor(_np.zeros((0,), dt), device=device)
    shapes = {p.shape for p in parts}
    if len(shapes) != 1:
        raise ValueError(
            f"{op}: the nested sequence is not rectangular: its elements have shapes "
            f"{', '.join(str(p.shape) for p in parts)} (NumPy: an inhomogeneous shape)"
        )
    return _ops.Concatenate.apply(*[_ops.Reshape.api(p, (1,) + p.shape) for p in parts], axis=0)


def _python_dtype(v) -> _np.dtype:
    """The dtype a Python number gets alone (tapegrad's defaults)."""
    if isinstance(v, _builtin_bool):
        return _np.dtype(_np.bool_)
    if isinstance(v, int):
        return _np.dtype(_np.int64)
    if isinstance(v, float):
        return _np.dtype(_np.float32)
    return _np.dtype(_np.complex64)


def _from_nested(obj, dtype, op: str) -> Tensor:
    leaves: list = []
    _leaves(obj, leaves)
    if dtype is None:
        kinds = []
        for v in leaves:
            if isinstance(v, Tensor) or isinstance(v, (_np.ndarray, _np.generic)):
                kinds.append(v.dtype)
            elif isinstance(v, _PY_NUMBERS):
                kinds.append(_python_dtype(v))  # as tnp.asarray(v) alone: float32, int64...
            else:
                try:
                    kinds.append(_np.asarray(v).dtype)
                except (TypeError, ValueError):
                    raise TypeError(
                        f"{op}: cannot make a numeric array from {type(v).__name__}"
                    ) from None
        dt = _dtypes.result_type(*kinds)
    else:
        dt = _np.dtype(dtype)
    if dt.kind not in "biufc" and dt != _dtypes.bfloat16:
        raise TypeError(f"{op}: expected numeric data, got dtype {dt}")
    device = next(v.device for v in leaves if isinstance(v, Tensor))
    return _nested(obj, dt, op, device)


def _check_order(order, op: str) -> None:
    if order not in _ORDERS:
        raise ValueError(f"{op}: order must be one of 'K', 'A', 'C', 'F' or None, got {order!r}")


def asarray(a, dtype=None, order=None, *, device=None, copy=None) -> Tensor:
    """``a`` as a Tensor (NumPy ``asarray``): a Tensor of the right dtype and device is
    returned as it is.

    Args:
        a: A Tensor, NumPy/CuPy array, number or nested list/tuple. A nested list/tuple may
            hold Tensors (also traced ones, mixed with numbers and arrays): it is then built
            from them with differentiable ops, as ``autograd.numpy.array([x, y])``. Python
            data follows tapegrad's rules (floats become float32, ints int64); arrays keep
            their dtype. A nested list holding arrays, NumPy scalars or Tensors gets the
            promotion of its leaves' dtypes, each leaf taken as it would be alone: the dtype
            :func:`stack` gives (a list of float64 arrays is float64; ``[x_float32, 1.0]`` is
            float32; ``[x_int8, 1]`` is int64, as NumPy's ``array``).
        dtype: Target dtype; a traced Tensor is cast differentiably (:func:`astype`).
        order: ``None``, ``"K"``, ``"A"``, ``"C"`` or ``"F"``; accepted for NumPy
            compatibility. Tensors are immutable, so memory layout is not observable.
        device: ``"cpu"`` or ``"cuda:N"``.
        copy: ``None`` (copy when needed), ``True`` (a new Tensor; copying an immutable Tensor
            is unobservable, so a Tensor is returned as it is) or ``False`` (never copy:
            ``ValueError`` when a conversion is needed, as NumPy; any non-Tensor input needs
            one, since a Tensor owns its data).

    Returns:
        Tensor.

    Raises:
        ValueError: with ``copy=False`` when a copy is needed; for a nested sequence that is
            not rectangular; for an unknown ``order``.
        TypeError: for non-numeric data.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> def f(x, y):
        ...     return tnp.asarray([[x, 2.0 * y], [y, 1.0]])
        >>> f(tg.Tensor(1.0), tg.Tensor(3.0))
        Tensor([[1., 6.],
                [3., 1.]], dtype=float32)
        >>> tg.grad(lambda x: tnp.sum(f(x, x) ** 2))(tg.Tensor(1.0))
        Tensor(12., dtype=float32)
    """
    _check_order(order, "asarray")
    if isinstance(a, Tensor):
        if dtype is not None and _np.dtype(dtype) == a.dtype:
            dtype = None
        if device is not None and _parse_device(device) == a.device:
            device = None
        need = dtype is not None or device is not None
        if copy is False and need:
            raise ValueError(
                f"asarray: copy=False, but converting a Tensor of dtype {a.dtype} on "
                f"{a.device} to dtype {dtype}, device {device} makes a copy"
            )
        if dtype is None and device is None:
            return a
        if a.is_traced:
            out = astype(a, dtype) if dtype is not None else a
            return to_device(out, device) if device is not None else out
        return Tensor(a, dtype=dtype, device=device)
    if copy is False:
        raise ValueError(
            f"asarray: copy=False, but {type(a).__name__} input needs a copy to become a Tensor "
            "(a Tensor owns its data); use copy=None"
        )
    if isinstance(a, (list, tuple)) and _has_tensor(a):
        out = _from_nested(a, dtype, "asarray")
        return to_device(out, device) if device is not None else out
    return Tensor(a, dtype=dtype, device=device)


def array(object, dtype=None, *, copy=True, order="K", ndmin=0, device=None) -> Tensor:  # noqa: A002
    """A Tensor holding ``object``'s data (NumPy ``array``); see :func:`asarray` for the
    conversion rules, nested lists of Tensors included (differentiable).

    Args:
        object: Tensor, array, number or nested list/tuple (which may hold Tensors).
        dtype: Target dtype.
        copy: As :func:`asarray` (default ``True``: a new Tensor; a Tensor is immutable, so it
            may be returned as it is).
        order: Accepted for compatibility (see :func:`asarray`).
        ndmin: The least number of axes: size-1 axes are prepended.
        device: ``"cpu"`` or ``"cuda:N"``.

    Raises:
        ValueError: as :func:`asarray`, or a negative ``ndmin``.
        TypeError: for non-numeric data.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.array([1, 2], ndmin=3).shape
        (1, 1, 2)
    """
    _check_order(order, "array")
    ndmin = operator.index(ndmin)
    if ndmin < 0:
        raise ValueError(f"array: ndmin must be non-negative, got {ndmin}")
    out = asarray(object, dtype=dtype, device=device, copy=None if copy else False)
    if out.ndim < ndmin:
        out = _ops.Reshape.api(out, (1,) * (ndmin - out.ndim) + out.shape)
    return out


def astype(x, dtype, /, *, copy=True, device=None) -> Tensor:  # exported by _predicates
    """``x`` cast to ``dtype`` (NumPy 2 ``astype``; also the method ``x.astype(dtype)``).

    Differentiable between floating and complex dtypes: the cotangent is cast back (a
    complex-to-real cast keeps the real part, JAX's convention); integer and boolean results
    carry no gradient.

    Args:
        x: Tensor, array or number.
        dtype: Target dtype (NumPy dtype, type or name).
        copy: Accepted for NumPy compatibility; Tensors are immutable, so a cast to the same
            dtype returns ``x`` itself either way.
        device: Optionally also move the result to ``"cpu"`` or ``"cuda:N"``.

    Raises:
        TypeError: if ``dtype`` is not a dtype.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.astype(tnp.asarray([1.7, -1.7]), tnp.int32)
        Tensor([ 1, -1], dtype=int32)
    """
    out = _ops.AsType.api(x, dtype)
    return to_device(out, device) if device is not None else out


def copy(a, order="K") -> Tensor:
    """``a`` as a Tensor with its own data (NumPy ``copy``). Tensors are immutable, so a
    Tensor is returned as it is (no copy is observable); other input is converted as by
    :func:`asarray`. Differentiable (the identity).

    Args:
        a: Tensor, array, number or nested list (traced Tensors inside lists too).
        order: Accepted for NumPy's signature; tapegrad's layout is its own.

    Returns:
        Tensor of ``a``'s shape and dtype (Python floats float32, as :func:`asarray`).

    Raises:
        TypeError: for non-numeric data.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.copy([1.0, 2.0])
        Tensor([1., 2.], dtype=float32)
    """
    _check_order(order, "copy")
    return a if isinstance(a, Tensor) else asarray(a)


def ndim(a) -> int:
    """The number of axes of ``a`` (NumPy ``ndim``); Python data is read as NumPy reads it.

    Args:
        a: Tensor, array, number or nested list.

    Returns:
        Python ``int``; no gradient (works on traced Tensors: it reads only the shape).

    Raises:
        ValueError: for ragged nested lists (as NumPy).

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.ndim(tnp.zeros((2, 3))), tnp.ndim(5.0)
        (2, 0)
    """
    return a.ndim if isinstance(a, Tensor) else _np.ndim(a)


def shape(a) -> tuple:
    """The shape of ``a`` as a tuple of ints (NumPy ``shape``).

    Args:
        a: Tensor, array, number or nested list.

    Returns:
        Tuple of Python ints; no gradient (works on traced Tensors).

    Raises:
        ValueError: for ragged nested lists (as NumPy).

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.shape(tnp.zeros((2, 3))), tnp.shape([[1, 2]])
        ((2, 3), (1, 2))
    """
    return tuple(a.shape) if isinstance(a, Tensor) else _np.shape(a)


def size(a, axis=None) -> int:
    """The number of elements of ``a``, or along ``axis`` (an int or a tuple of ints: the
    product of those axes' lengths) (NumPy ``size``).

    Raises:
        ValueError: if an axis is out of range.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.size(tnp.zeros((2, 3))), tnp.size(tnp.zeros((2, 3)), axis=1)
        (6, 3)
    """
    shp = shape(a)
    if axis is None:
        return math.prod(shp)
    from tapegrad.ops.movement import check_axes

    return math.prod(shp[i] for i in check_axes(axis, len(shp), "size"))


def stop_gradient(x):
    """The same value(s) with zero gradient under every transform; works on pytrees."""
    from tapegrad.core.tree import tree_map

    def one(v):
        if isinstance(v, Tensor):
            return _ops.StopGradient.apply(v) if v.is_traced else v
        return v

    return tree_map(one, x)


to_device = _ops.ToDevice.api


def _torch_spelling(value) -> _Any:
    """A ``torch.device`` or ``torch.dtype`` as the string tapegrad reads (``"cuda:0"``,
    ``"float32"``); anything else unchanged."""
    if type(value).__module__ == "torch":
        text = str(value)
        return text[len("torch."):] if text.startswith("torch.") else text
    return value


def _is_device(value) -> _builtin_bool:
    return isinstance(value, str) and (value in ("cpu", "cuda", "gpu") or value.startswith("cuda:"))


def _method_to(
    self, *args, device: _Any = None, dtype: _Any = None, non_blocking=False, copy=False
) -> Tensor:
    """The Tensor on ``device`` and/or cast to ``dtype`` (PyTorch's ``Tensor.to``).

    ``x.to("cuda")``, ``x.to("float64")``, ``x.to("cpu", "float32")``, ``x.to(other)`` (the
    device and dtype of Tensor ``other``), or the keywords ``device=`` and ``dtype=``. A
    ``torch.device`` or ``torch.dtype`` is read by its name. Both steps are differentiable:
    the cotangent is cast back to the input's dtype (between floating and complex dtypes;
    see :func:`astype`) and copied back to its device. Nothing is copied when the Tensor is
    already there (Tensors are immutable, so ``copy`` changes nothing), and ``non_blocking``
    is accepted for PyTorch's signature.

    Args:
        *args: Up to two of: a device string (``"cpu"``, ``"cuda"``, ``"cuda:N"``), a dtype
            (NumPy dtype, type or name), a Tensor.
        device: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
        dtype: The dtype to cast to.
        non_blocking, copy: Accepted as PyTorch's; no effect.

    Returns:
        A Tensor (``self`` when neither device nor dtype changes).

    Raises:
        TypeError: for an argument that is neither a device, a dtype nor a Tensor, or a device
            or dtype given twice.
        RuntimeError: for a GPU device without CuPy or a GPU.

    Example:
        >>> import tapegrad as tg
        >>> tg.Tensor([1.5, 2.5]).to("float64").to("cpu")
        Tensor([1.5, 2.5], dtype=float64)
    """
    if len(args) > 2:
        raise TypeError(f"Tensor.to: expected at most 2 positional arguments, got {len(args)}")
    for a in args:
        a = _torch_spelling(a)
        if isinstance(a, Tensor):
            found = (("device", a.device), ("dtype", a.dtype))
        elif _is_device(a):
            found = (("device", a),)
        else:
            try:
                found = (("dtype", _np.dtype(a)),)
            except TypeError:
                raise TypeError(
                    f"Tensor.to: expected a device ('cpu', 'cuda', 'cuda:N'), a dtype or a "
                    f"Tensor, got {a!r}"
                ) from None
        for what, value in found:
            if (device if what == "device" else dtype) is not None:
                raise TypeError(f"Tensor.to: {what} given twice")
            if what == "device":
                device = value
            else:
                dtype = value
    out = self
    if dtype is not None:
        out = astype(out, _torch_spelling(dtype))
    if device is not None:
        out = to_device(out, _torch_spelling(device))
    return out


def _method_cpu(self) -> Tensor:
    """The Tensor on the CPU (PyTorch's ``Tensor.cpu``; ``x.to_device("cpu")``)."""
    return to_device(self, "cpu")


def _method_cuda(self, device: _Any = None, non_blocking=False) -> Tensor:
    """The Tensor on a GPU (PyTorch's ``Tensor.cuda``; ``x.to_device("cuda:N")``).

    Args:
        device: ``None`` (GPU 0), an int ``N`` or a device string.
        non_blocking: Accepted as PyTorch's; no effect.

    Raises:
        RuntimeError: without CuPy or a GPU.
    """
    if device is None:
        device = "cuda:0"
    elif isinstance(device, int) and not isinstance(device, _builtin_bool):
        device = f"cuda:{device}"
    return to_device(self, _torch_spelling(device))


#: The Tensor methods of this module (attached by :mod:`tapegrad.numpy.methods`).
METHODS = {"to": _method_to, "cpu": _method_cpu, "cuda": _method_cuda}

