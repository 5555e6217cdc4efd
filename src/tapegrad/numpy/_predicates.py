"""Comparisons of whole arrays, type predicates and dtype helpers of ``tapegrad.numpy``.

None of these has a gradient. ``isclose`` returns a boolean Tensor (recorded like any op, so
it works on traced values and under ``vmap``). ``allclose``, ``array_equal`` and
``array_equiv`` return a Python ``bool``: on a traced value that is a decision, made exactly as
``bool(x)`` makes it (``Tensor.__bool__``): under ``grad`` it is taken on the current value,
under ``jit`` it is recorded as a guard (a replay on values that decide otherwise traces
again), and inside ``vmap`` it raises ``TypeError`` (each example could decide differently;
use :func:`isclose` with :func:`~tapegrad.numpy.all` and keep a Tensor).

The dtype helpers (``result_type``, ``can_cast``, ``promote_types``, ``finfo``, ``iinfo``,
``issubdtype``, ``isdtype``) are NumPy's, and accept a Tensor wherever NumPy accepts an array
or dtype (the Tensor's dtype is used; a Tensor never counts as a weakly typed Python number).
(``isreal``, ``iscomplex``, ``isneginf`` and ``isposinf`` are elementwise ops of
:mod:`tapegrad.ops.elementwise`.)
"""

from __future__ import annotations

import numpy as _np

from tapegrad.core import dtypes as _dtypes
from tapegrad.core.tensor import Tensor
from tapegrad.numpy._core import _tensor, astype, stop_gradient
from tapegrad.ops._registry import ns as _ns

__all__ = [
    # NumPy 2's astype (with copy= and device=), exported here, after the elementwise module,
    # so that it replaces the bare op function of the same name
    "astype",
    "allclose",
    "isclose",
    "array_equal",
    "array_equiv",
    "isrealobj",
    "iscomplexobj",
    "isscalar",
    "isdtype",
    "result_type",
    "can_cast",
    "promote_types",
    "finfo",
    "iinfo",
    "issubdtype",
]

_PY = (int, float, complex, bool)


def _value(v):
    """An operand compared by value: Python numbers stay weak, the rest becomes a Tensor
    (gradients stopped: the results are booleans)."""
    if type(v) in _PY:
        return v
    t = _tensor(v) if isinstance(v, Tensor) else _tensor(_np.asarray(v))
    return stop_gradient(t)


def _dt(v):
    """A Tensor's dtype; anything else as given (for NumPy's dtype functions)."""
    return v.dtype if isinstance(v, Tensor) else v


def _check_tol(name, v):
    if not bool(_np.all(_np.isfinite(_np.asarray(v)))):
        raise ValueError(f"isclose: {name} must be finite, got {v!r}")


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False) -> Tensor:
    """Elementwise ``|a - b| <= atol + rtol * |b|`` (NumPy ``isclose``; not symmetric in
    ``a`` and ``b``): infinities are close only to themselves, NaN to nothing unless
    ``equal_nan``.

    Args:
        a, b: Tensors, arrays or numbers (broadcast together; complex allowed). An integer
            ``b`` is compared as floating point (as NumPy).
        rtol, atol: Relative and absolute tolerances (finite numbers).
        equal_nan: Count NaN as close to NaN.

    Returns:
        Boolean Tensor of the broadcast shape, no gradient.

    Raises:
        ValueError: for a non-finite tolerance (NumPy warns), or shapes that do not
            broadcast.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.isclose(tnp.asarray([1.0, 1.1, float("nan")]), 1.0)
        Tensor([ True, False, False], dtype=bool)
    """
    _check_tol("rtol", rtol)
    _check_tol("atol", atol)
    x, y = _value(a), _value(b)
    if isinstance(y, Tensor) and y.dtype.kind not in "fc":
        y = _ns.astype(y, _np.result_type(y.dtype, 1.0))
    elif type(y) is int:
        y = float(y)
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        x = _tensor(_np.asarray(x))
    result = ((_ns.abs(x - y) <= atol + rtol * _ns.abs(y)) & _ns.isfinite(y)) | (x == y)  # pyright: ignore[reportArgumentType, reportOperatorIssue]
    if equal_nan:
        result = result | (_ns.isnan(x) & _ns.isnan(y))
    return result


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    """Whether every element of ``a`` is close to ``b`` (NumPy ``allclose``:
    ``all(isclose(a, b, rtol, atol, equal_nan))``), as a Python ``bool``.

    On a traced value this is a decision, taken as ``bool(x)`` takes it: ``jit`` records a
    guard, ``vmap`` raises ``TypeError`` (see the module docstring).

    Raises:
        ValueError: as :func:`isclose`.
        TypeError: inside ``vmap`` on a batched value.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.allclose(tnp.asarray([1.0, 2.0]), [1.0, 2.0 + 1e-9])
        True
    """
    return bool(_ns.all(isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)))


def _as_value_tensor(v):
    return stop_gradient(_tensor(v) if isinstance(v, Tensor) else _tensor(_np.asarray(v)))


def array_equal(a1, a2, equal_nan=False) -> bool:
    """Whether ``a1`` and ``a2`` have the same shape and elements (NumPy ``array_equal``), a
    Python ``bool``; a decision on traced values (see :func:`allclose`).

    Args:
        a1, a2: Tensors, arrays or numbers.
        equal_nan: Count NaNs at the same positions as equal.

    Raises:
        TypeError: inside ``vmap`` on a batched value (with equal shapes).

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.array_equal(tnp.asarray([1.0, float("nan")]), [1.0, float("nan")], equal_nan=True)
        True
    """
    x, y = _as_value_tensor(a1), _as_value_tensor(a2)
    if x.shape != y.shape:
        return False
    same = x == y
    if equal_nan and (x.dtype.kind in "fc" or y.dtype.kind in "fc"):  # pyright: ignore[reportOperatorIssue]
        same = same | (_ns.isnan(x) & _ns.isnan(y))
    return bool(_ns.all(same))


def array_equiv(a1, a2) -> bool:
    """Whether ``a1`` and ``a2`` broadcast together and are equal elementwise (NumPy
    ``array_equiv``), a Python ``bool``; a decision on traced values (see :func:`allclose`).

    Args:
        a1, a2: Tensors, arrays, numbers or nested lists of any shapes.

    Returns:
        Python ``bool`` (``False`` when the shapes do not broadcast); no gradient.

    Raises:
        TypeError: for non-numeric input; inside ``vmap`` (one bool cannot stand for a batch).

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.array_equiv(tnp.asarray([1, 2]), [[1, 2], [1, 2]])
        True
    """
    x, y = _as_value_tensor(a1), _as_value_tensor(a2)
    try:
        _np.broadcast_shapes(x.shape, y.shape)  # pyright: ignore[reportArgumentType]
    except ValueError:
        return False
    return bool(_ns.all(x == y))


def iscomplexobj(x) -> bool:
    """Whether ``x`` has a complex dtype (NumPy ``iscomplexobj``; by type, not by value: a
    complex Tensor with zero imaginary parts counts). Python data is read as NumPy reads it.

    Returns:
        Python ``bool``; no gradient (a question about the type, never the values, so it works
        on traced Tensors too).

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.iscomplexobj(tnp.asarray([1.0])), tnp.iscomplexobj(tnp.asarray([1j]))
        (False, True)
    """
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        dtype = _np.asarray(x).dtype
    return _np.dtype(dtype).kind == "c"


def isrealobj(x) -> bool:
    """Whether ``x`` does not have a complex dtype (NumPy ``isrealobj``:
    ``not iscomplexobj(x)``).

    Returns:
        Python ``bool``; no gradient (a question about the type, never the values, so it works
        on traced Tensors too).
    """
    return not iscomplexobj(x)


def isscalar(element) -> bool:
    """Whether ``element`` is a scalar (NumPy ``isscalar``): Python and NumPy numbers, strings
    and bytes are; arrays and Tensors, 0-d included, are not (as a 0-d NumPy array is not).

    Returns:
        Python ``bool``; no gradient (a question about the type, never the values, so it works
        on traced Tensors too).

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.isscalar(3.0), tnp.isscalar(tnp.asarray(3.0))
        (True, False)
    """
    if isinstance(element, Tensor):
        return False
    return bool(_np.isscalar(element))


def _is_bf16(v) -> bool:
    try:
        return _dtypes.is_bfloat16(v if isinstance(v, _np.dtype) else _np.dtype(
            getattr(v, "dtype", v)))
    except (TypeError, ValueError):
        return False


def _dtype_call(name, fn, *args):
    if any(_is_bf16(a) for a in args if type(a) not in _PY):
        bf = {"result_type": _dtypes.result_type, "finfo": _dtypes.finfo,
              "promote_types": _dtypes.result_type}.get(name)
        if bf is not None:
            return bf(*args)
    try:
        return fn(*args)
    except (TypeError, ValueError) as e:
        raise type(e)(f"{name}: {e}") from None


_BF16_KINDS = ("real floating", "numeric")


def isdtype(dtype, kind) -> bool:
    """Whether ``dtype`` is of ``kind`` (NumPy 2 / Array API ``isdtype``).

    Args:
        dtype: A dtype (or a Tensor: its dtype).
        kind: A dtype, one of ``"bool"``, ``"signed integer"``, ``"unsigned integer"``,
            ``"integral"``, ``"real floating"``, ``"complex floating"``, ``"numeric"``, or a
            tuple of these.

    Raises:
        TypeError, ValueError: as NumPy, for something that is not a dtype or an unknown kind.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.isdtype(tnp.float32, "real floating"), tnp.isdtype(tnp.asarray([1]), "integral")
        (True, True)
    """
    dtype = _dt(dtype)
    if _is_bf16(dtype):  # bfloat16 is a real floating dtype, as in JAX
        kinds = kind if isinstance(kind, tuple) else (kind,)
        return any(k in _BF16_KINDS if isinstance(k, str) else _is_bf16(k) for k in kinds)
    if hasattr(_np, "isdtype"):
        return _dtype_call("isdtype", _np.isdtype, _np.dtype(dtype) if not isinstance(
            dtype, _np.dtype) else dtype, kind)
    kinds = kind if isinstance(kind, tuple) else (kind,)  # pragma: no cover - NumPy 1.x
    groups = {"bool": "b", "signed integer": "i", "unsigned integer": "u",  # pragma: no cover
              "integral": "iu", "real floating": "f", "complex floating": "c",
              "numeric": "iufc"}
    d = _np.dtype(dtype)  # pragma: no cover - NumPy 1.x
    return any(d.kind in groups[k] if isinstance(k, str) else d == _np.dtype(k)
               for k in kinds)  # pragma: no cover - NumPy 1.x


def result_type(*arrays_and_dtypes):
    """The dtype NumPy's promotion gives (NumPy ``result_type``); a Tensor counts by its dtype
    (never weakly, even 0-d), Python numbers weakly (NEP 50).

    Args:
        *arrays_and_dtypes: Tensors, arrays, dtypes, dtype names and Python numbers.

    Returns:
        A NumPy ``dtype``.

    Raises:
        ValueError: with no arguments (naming ``result_type``).
        TypeError: for an argument that is no dtype, array or number.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.result_type(tnp.asarray([1.0]), 2.0), tnp.result_type(tnp.float32, tnp.int64)
        (dtype('float32'), dtype('float64'))
    """
    return _dtype_call("result_type", _np.result_type, *[_dt(a) for a in arrays_and_dtypes])


def can_cast(from_, to, casting="safe") -> bool:
    """Whether a cast from ``from_`` (a dtype or a Tensor) to ``to`` is allowed under
    ``casting`` (``"no"``, ``"equiv"``, ``"safe"``, ``"same_kind"``, ``"unsafe"``; NumPy
    ``can_cast``).

    Raises:
        TypeError: for a Python number ``from_`` (NumPy 2 refuses them: the answer would
            depend on the value).

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.can_cast(tnp.asarray([1.0]), tnp.float64), tnp.can_cast(tnp.float64, "float32")
        (True, False)
    """
    return _dtype_call("can_cast", _np.can_cast, _dt(from_), _dt(to), casting)


def promote_types(type1, type2):
    """The smallest dtype both promote to (NumPy ``promote_types``; Tensors by dtype).

    Args:
        type1, type2: Dtypes, dtype names, or Tensors (by their dtype).

    Returns:
        A NumPy ``dtype``.

    Raises:
        TypeError: for a name that is no data type (naming ``promote_types``).

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.promote_types(tnp.int8, tnp.uint8)
        dtype('int16')
    """
    return _dtype_call("promote_types", _np.promote_types, _dt(type1), _dt(type2))


def finfo(dtype):
    """Machine limits of a floating or complex dtype (NumPy ``finfo``): ``eps``, ``tiny``,
    ``max``, ... A Tensor gives its dtype's limits.

    Raises:
        ValueError: for a non-floating dtype.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> float(tnp.finfo(tnp.asarray([1.0])).eps)
        1.1920928955078125e-07
    """
    return _dtype_call("finfo", _np.finfo, _dt(dtype))


def iinfo(int_type):
    """Machine limits of an integer dtype (NumPy ``iinfo``): ``min``, ``max``, ``bits``. A
    Tensor gives its dtype's limits.

    Raises:
        ValueError: for a non-integer dtype.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.iinfo(tnp.int8).max
        127
    """
    return _dtype_call("iinfo", _np.iinfo, _dt(int_type))


def issubdtype(arg1, arg2) -> bool:
    """Whether ``arg1`` is lower than or equal to ``arg2`` in NumPy's type hierarchy (NumPy
    ``issubdtype``), e.g. ``issubdtype(x.dtype, tnp.floating)``; Tensors by dtype.

    Args:
        arg1: A dtype, dtype name, scalar type or Tensor (by its dtype).
        arg2: A dtype or abstract type (``tnp.floating``, ``tnp.integer``, ...).

    Returns:
        Python ``bool``.

    Raises:
        TypeError: for a name that is no data type (naming ``issubdtype``).

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.issubdtype(tnp.asarray([1.0]), tnp.floating)
        True
    """
    if _is_bf16(_dt(arg1)):  # bfloat16 is floating, as in JAX (NumPy's hierarchy lacks it)
        return _is_bf16(_dt(arg2)) or arg2 in (_np.floating, _np.inexact, _np.number,
                                                _np.generic)
    return _dtype_call("issubdtype", _np.issubdtype, _dt(arg1), _dt(arg2))
