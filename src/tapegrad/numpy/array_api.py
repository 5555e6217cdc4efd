"""``tapegrad.numpy.array_api``: the Python array API standard's namespace (version 2024.12)
for Tensors.

Library code written against the standard (``xp = x.__array_namespace__()``, or
``array_api_compat.array_namespace(x)``) runs on Tensors through this module, and everything it
computes is differentiable like the rest of :mod:`tapegrad.numpy`::

    xp = x.__array_namespace__()
    y = xp.sum(xp.sin(x) ** 2, axis=-1)

The namespace is built from :mod:`tapegrad.numpy` when it is imported: a function of the
standard whose ``tapegrad.numpy`` version already has the standard's signature is that very
function (``sum``, ``prod``, ``cumulative_sum``, ``vecdot``, ``reshape``, ``unstack``,
``expand_dims``...); the few whose arguments differ (``std``/``var`` take ``correction``,
``asarray``'s ``copy=False`` shares a NumPy array, ``squeeze`` needs ``axis``...) get a thin
adapter here; functions ``tapegrad.numpy`` does not have yet are absent (see :data:`MISSING`), and
appear as soon as ``tapegrad.numpy`` gains them. The ``linalg`` extension is
``xp.linalg``; the ``fft`` extension is ``xp.fft`` when ``tapegrad.numpy`` has one.

Dtypes and defaults: the dtype objects are NumPy dtypes (``xp.float32 == np.dtype("float32")``,
equal to ``Tensor.dtype``). Python floats and float lists become **float32** (tapegrad's
default, as in PyTorch), Python ints **int64**, complex numbers **complex64**, bools bool;
``__array_namespace_info__().default_dtypes()`` reports exactly this (the inspection namespace
is ``tapegrad.numpy``'s own, one definition for both). Devices are the strings ``"cpu"`` and
``"cuda:N"``.

Tensors are immutable, so ``__setitem__`` and in-place operators do not write into a Tensor:
``x[i] = v`` raises ``TypeError`` (use ``x.at[i].set(v)``), and ``x += y`` rebinds ``x`` to a
new Tensor, as with JAX arrays.

References:
    Python array API standard, version 2024.12: https://data-apis.org/array-api/2024.12/
"""

from __future__ import annotations

import builtins as _builtins
import math as _math
import operator as _operator
import types as _types
from typing import Any, NamedTuple

import numpy as _np
from numpy.exceptions import AxisError as _AxisError

from tapegrad import numpy as _tnp_module
from tapegrad.core import dtypes as _tg_dtypes
from tapegrad.core.tensor import Tensor
from tapegrad.numpy._dlpack import from_dlpack
from tapegrad.numpy._info import DTYPES as _DTYPES
from tapegrad.numpy._info import (  # noqa: F401  (re-exported: shared with tapegrad.numpy)
    __array_api_version__,
    __array_namespace_info__,
)
from tapegrad.ops._registry import bool_arg as _bool_arg

# tapegrad.numpy assembles its namespace at import time (from the ops' declarations), so a type
# checker cannot list its functions: it is typed as Any here.
_tnp: Any = _tnp_module

# -- constants and dtypes -------------------------------------------------------------------
e = _math.e
inf = _math.inf
nan = _math.nan
pi = _math.pi
newaxis = None

bool = _np.dtype("bool")  # noqa: A001  (the standard's name)
int8, int16, int32, int64 = (_np.dtype(f"int{b}") for b in (8, 16, 32, 64))
uint8, uint16, uint32, uint64 = (_np.dtype(f"uint{b}") for b in (8, 16, 32, 64))
float32, float64 = _np.dtype("float32"), _np.dtype("float64")
complex64, complex128 = _np.dtype("complex64"), _np.dtype("complex128")


#: The standard's main-namespace functions (2024.12), in the specification's order.
STANDARD_FUNCTIONS = (
    # creation
    "arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like",
    "linspace", "meshgrid", "ones", "ones_like", "tril", "triu", "zeros", "zeros_like",
    # data types
    "astype", "can_cast", "finfo", "iinfo", "isdtype", "result_type",
    # elementwise
    "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and",
    "bitwise_left_shift", "bitwise_invert", "bitwise_or", "bitwise_right_shift", "bitwise_xor",
    "ceil", "clip", "conj", "copysign", "cos", "cosh", "divide", "equal", "exp", "expm1",
    "floor", "floor_divide", "greater", "greater_equal", "hypot", "imag", "isfinite", "isinf",
    "isnan", "less", "less_equal", "log", "log1p", "log2", "log10", "logaddexp", "logical_and",
    "logical_not", "logical_or", "logical_xor", "maximum", "minimum", "multiply", "negative",
    "nextafter", "not_equal", "positive", "pow", "real", "reciprocal", "remainder", "round",
    "sign", "signbit", "sin", "sinh", "square", "sqrt", "subtract", "tan", "tanh", "trunc",
    # indexing
    "take", "take_along_axis",
    # linear algebra
    "matmul", "matrix_transpose", "tensordot", "vecdot",
    # manipulation
    "broadcast_arrays", "broadcast_to", "concat", "expand_dims", "flip", "moveaxis",
    "permute_dims", "repeat", "reshape", "roll", "squeeze", "stack", "tile", "unstack",
    # searching
    "argmax", "argmin", "count_nonzero", "nonzero", "searchsorted", "where",
    # sets
    "unique_all", "unique_counts", "unique_inverse", "unique_values",
    # sorting
    "argsort", "sort",
    # statistics
    "cumulative_prod", "cumulative_sum", "max", "mean", "min", "prod", "std", "sum", "var",
    # utility
    "all", "any", "diff",
)  # fmt: skip
#: The ``linalg`` extension's functions (2024.12).
LINALG_FUNCTIONS = (
    "cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul", "matrix_norm",
    "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv", "qr", "slogdet",
    "solve", "svd", "svdvals", "tensordot", "trace", "vecdot", "vector_norm",
)  # fmt: skip
#: The ``fft`` extension's functions (2024.12).
FFT_FUNCTIONS = (
    "fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft",
    "fftfreq", "rfftfreq", "fftshift", "ifftshift",
)  # fmt: skip


def _arr(x, op: str = "array_api") -> Tensor:
    """``x`` as a Tensor (Tensors pass unchanged)."""
    if isinstance(x, Tensor):
        return x
    return asarray(x)


def _dtype(dtype, op: str):
    try:
        dt = _np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{op}: {dtype!r} is not a dtype (use e.g. xp.float32)") from None
    if dt not in _DTYPES.values():
        raise TypeError(
            f"{op}: dtype {dt} is not one of the array API's dtypes ({', '.join(_DTYPES)})"
        )
    return dt


def _axes(axis, ndim: int, op: str) -> tuple:
    """``axis`` (None, int or tuple) as a tuple of non-negative axes of an ``ndim``-d array."""
    if axis is None:
        return tuple(range(ndim))
    seq = axis if isinstance(axis, tuple) else (axis,)
    out = []
    for a in seq:
        a = _operator.index(a)
        if not -ndim <= a < _builtins.max(ndim, 1) or (ndim == 0 and a not in (0, -1)):
            raise _AxisError(f"{op}: axis {a} is out of bounds for an array of {ndim} dims")
        out.append(a % ndim if ndim else 0)
    return tuple(out)


# -- creation -------------------------------------------------------------------------------
def asarray(obj, /, *, dtype=None, device=None, copy=None) -> Tensor:
    """A Tensor from ``obj`` (a Tensor, array, DLPack object, Python scalar or nested sequence).

    Args:
        obj: The data. Python floats become float32, ints int64, complex numbers complex64,
            bools bool (tapegrad's defaults); arrays keep their dtype.
        dtype: Output dtype; inferred from ``obj`` when ``None``.
        device: ``"cpu"`` or ``"cuda:N"``; ``obj``'s device (or ``"cpu"``) when ``None``.
        copy: ``True``: always copy. ``False``: never copy: a NumPy array (or any DLPack
            producer) is shared zero-copy, so writing into it afterwards changes the Tensor;
            ``ValueError`` when a copy is needed (Python data, a dtype or device change).
            ``None`` (default): share a Tensor or a read-only array, copy a writeable array
            (Tensors are immutable, so they never alias a buffer their caller can write).

    Returns:
        A Tensor; ``obj`` itself when it is a Tensor of the requested dtype and device and
        ``copy`` is not ``True``.

    Raises:
        ValueError: if ``copy=False`` and a copy is needed.
        TypeError: if ``obj`` is not numeric data or ``dtype`` is not a dtype of the standard.
    """
    if dtype is not None:
        dtype = _dtype(dtype, "asarray")
    if isinstance(obj, Tensor):
        out = obj
        if dtype is not None and out.dtype != dtype:
            if copy is False:
                raise ValueError(
                    f"asarray: copy=False, but casting {out.dtype} to {dtype} needs a copy"
                )
            out = _tnp.astype(out, dtype)
        elif copy and not out.is_traced:
            out = Tensor(_np.array(out.numpy())) if out.device == "cpu" else out
        if device is not None and out.device != device:
            if copy is False:
                raise ValueError(
                    f"asarray: copy=False, but moving from {out.device} to {device} is a copy"
                )
            out = _tnp.to_device(out, device)
        return out
    if copy is False:
        if not hasattr(obj, "__dlpack__"):
            raise ValueError(
                f"asarray: copy=False, but {type(obj).__name__} data must be copied into a "
                "Tensor (only arrays with DLPack support can be shared)"
            )
        out = from_dlpack(obj, device=device, copy=False)
        if dtype is not None and out.dtype != dtype:
            raise ValueError(f"asarray: copy=False, but casting {out.dtype} to {dtype} copies")
        return out
    if isinstance(obj, _np.ndarray) and not obj.flags.writeable and not copy:
        out = from_dlpack(obj) if obj.dtype.kind in "biufc" else Tensor(obj)
        if dtype is not None and out.dtype != dtype:
            out = _tnp.astype(out, dtype)
        return out if device is None else _tnp.to_device(out, device)
    if not isinstance(obj, _np.ndarray) and hasattr(obj, "__dlpack__") and not isinstance(
        obj, _np.generic
    ):
        try:
            obj = _np.from_dlpack(obj, copy=True)
        except (BufferError, RuntimeError, TypeError, ValueError):
            pass  # a GPU producer, or one NumPy cannot read: Tensor() decides
    if isinstance(obj, (list, tuple)) and _builtins.any(isinstance(v, Tensor) for v in _flat(obj)):
        out = _tnp.stack([asarray(v) for v in obj]) if obj else Tensor(_np.zeros(0, float32))
        if dtype is not None and out.dtype != dtype:
            out = _tnp.astype(out, dtype)
        return out if device is None else _tnp.to_device(out, device)
    return Tensor(obj, dtype=dtype, device=device)


def _flat(seq):
    for v in seq:
        if isinstance(v, (list, tuple)):
            yield from _flat(v)
        else:
            yield v


def arange(start, /, stop=None, step=1, *, dtype=None, device=None) -> Tensor:
    """Evenly spaced values in ``[start, stop)`` (``[0, start)`` with one argument).

    Python ints give int64, Python floats float32 unless ``dtype`` is given. See
    :func:`tapegrad.numpy.arange`.
    """
    return _tnp.arange(start, stop, step, dtype=dtype, device=device)


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None) -> Tensor:
    """The ``(n_rows, n_cols)`` matrix with ones on diagonal ``k`` (float32 by default)."""
    return _tnp.eye(n_rows, n_cols, k=k, dtype=dtype, device=device)


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True) -> Tensor:
    """``num`` evenly spaced values from ``start`` to ``stop`` (float32 by default)."""
    return _tnp.linspace(start, stop, num, endpoint=endpoint, dtype=dtype, device=device)


def meshgrid(*arrays, indexing="xy") -> list:
    """Coordinate grids from 1-D arrays (``indexing="xy"``: Cartesian, ``"ij"``: matrix).

    Args:
        *arrays: 1-D Tensors (or arrays) of sizes ``n1, n2, ...``, all of one dtype.
        indexing: ``"xy"`` gives shape ``(n2, n1, n3, ...)``, ``"ij"`` ``(n1, n2, n3, ...)``.

    Returns:
        A list of Tensors of that shape; differentiable (a broadcast of each input).

    Raises:
        ValueError: for an input that is not 1-D or an unknown ``indexing``.
    """
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    xs = [_arr(a) for a in arrays]
    for i, a in enumerate(xs):
        if a.ndim != 1:
            raise ValueError(f"meshgrid: array {i} must be 1-D, got shape {a.shape}")
    sizes = [a.shape[0] for a in xs]
    if indexing == "xy" and len(xs) >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, a in enumerate(xs):
        axis = i
        if indexing == "xy" and len(xs) >= 2 and i < 2:
            axis = 1 - i
        shape = [1] * len(xs)
        shape[axis] = a.shape[0]
        out.append(_tnp.broadcast_to(_tnp.reshape(a, tuple(shape)), tuple(sizes)))
    return out


# -- data types -----------------------------------------------------------------------------
def astype(x, dtype, /, *, copy=True, device=None) -> Tensor:
    """``x`` cast to ``dtype`` (and moved to ``device``); differentiable between float dtypes.

    Raises:
        TypeError: if ``dtype`` is not a dtype of the standard.
    """
    x = _arr(x)
    out = _tnp.astype(x, _dtype(dtype, "astype"), copy=copy)
    return out if device is None else _tnp.to_device(out, device)


class finfo_object(NamedTuple):  # noqa: N801  (the standard's name)
    """Machine limits of a floating dtype: ``bits``, ``eps``, ``max``, ``min``,
    ``smallest_normal`` (Python floats) and ``dtype``."""

    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: Any


class iinfo_object(NamedTuple):  # noqa: N801  (the standard's name)
    """Limits of an integer dtype: ``bits``, ``max``, ``min`` (Python ints) and ``dtype``."""

    bits: int
    max: int
    min: int
    dtype: Any


def _dtype_of(type_or_array, op: str):
    if isinstance(type_or_array, Tensor):
        return type_or_array.dtype
    return _dtype(type_or_array, op)


def finfo(type, /) -> finfo_object:  # noqa: A002  (the standard's name)
    """Machine limits of a floating dtype (or a floating Tensor's dtype).

    For complex dtypes the limits, and ``dtype``, are those of the real component's dtype
    (``finfo(complex64).dtype`` is ``float32``), as the standard says.

    Raises:
        TypeError: if the dtype is not floating.
    """
    dt = _dtype_of(type, "finfo")
    if dt.kind not in "fc":
        raise TypeError(f"finfo: expected a floating dtype, got {dt}")
    fi = _tg_dtypes.finfo(dt)
    return finfo_object(
        int(fi.bits), float(fi.eps), float(fi.max), float(fi.min),
        float(fi.smallest_normal), _np.dtype(fi.dtype),
    )  # fmt: skip


def iinfo(type, /) -> iinfo_object:  # noqa: A002  (the standard's name)
    """Limits of an integer dtype (or an integer Tensor's dtype).

    Raises:
        TypeError: if the dtype is not an integer dtype.
    """
    dt = _dtype_of(type, "iinfo")
    if dt.kind not in "iu":
        raise TypeError(f"iinfo: expected an integer dtype, got {dt}")
    ii = _np.iinfo(dt)
    return iinfo_object(int(ii.bits), int(ii.max), int(ii.min), dt)


def isdtype(dtype, kind) -> _builtins.bool:
    """Whether ``dtype`` is of ``kind``: a dtype, a kind name (``"bool"``, ``"signed integer"``,
    ``"unsigned integer"``, ``"integral"``, ``"real floating"``, ``"complex floating"``,
    ``"numeric"``) or a tuple of those.

    Raises:
        TypeError: if ``dtype`` is not a dtype or ``kind`` is not a valid kind.
    """
    if isinstance(dtype, Tensor) or not isinstance(dtype, (_np.dtype, type)):
        raise TypeError(f"isdtype: expected a dtype, got {type_name(dtype)}")
    return _builtins.bool(_np.isdtype(_np.dtype(dtype), kind))


def type_name(v) -> str:
    """The type's name, for messages."""
    return type(v).__name__


def result_type(*arrays_and_dtypes):
    """The dtype that type promotion gives for Tensors, dtypes and Python scalars.

    Raises:
        TypeError: with no argument, or for an argument that is none of these.
    """
    if not arrays_and_dtypes:
        raise TypeError("result_type: at least one array or dtype is required")
    args = []
    for a in arrays_and_dtypes:
        if isinstance(a, Tensor):
            args.append(a.dtype)
        elif isinstance(a, (_builtins.bool, int, float, complex)):
            args.append(a)
        else:
            args.append(_dtype(a, "result_type"))
    if _builtins.all(isinstance(a, (_builtins.bool, int, float, complex)) for a in args):
        raise TypeError("result_type: at least one array or dtype is required (got scalars)")
    return _np.dtype(_np.result_type(*args))


def can_cast(from_, to, /) -> _builtins.bool:
    """Whether ``from_`` (a dtype or Tensor) casts to ``to`` under the promotion rules."""
    src = _dtype_of(from_, "can_cast")
    return _builtins.bool(_np.can_cast(src, _dtype(to, "can_cast"), casting="safe"))


# -- elementwise names the standard spells differently --------------------------------------
def bitwise_invert(x, /) -> Tensor:
    """Bitwise NOT of an integer or boolean Tensor (``~x``)."""
    return _tnp.invert(x)


def bitwise_left_shift(x1, x2, /) -> Tensor:
    """``x1 << x2`` elementwise for integers."""
    return _tnp.left_shift(x1, x2)


def bitwise_right_shift(x1, x2, /) -> Tensor:
    """``x1 >> x2`` elementwise for integers."""
    return _tnp.right_shift(x1, x2)


# -- linear algebra -------------------------------------------------------------------------
def matrix_transpose(x, /) -> Tensor:
    """The last two axes swapped: ``(..., m, n)`` -> ``(..., n, m)``.

    Raises:
        ValueError: if ``x`` has fewer than two dimensions.
    """
    x = _arr(x)
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose: expected at least 2 dims, got shape {x.shape}")
    return _tnp.swapaxes(x, -1, -2)


# -- manipulation ---------------------------------------------------------------------------
def broadcast_arrays(*arrays) -> list:
    """The inputs broadcast to their common shape (differentiable).

    Raises:
        ValueError: if the shapes do not broadcast.
    """
    xs = [_arr(a) for a in arrays]
    try:
        shape = _np.broadcast_shapes(*(a.shape for a in xs))
    except ValueError:
        raise ValueError(
            f"broadcast_arrays: shapes {[a.shape for a in xs]} do not broadcast"
        ) from None
    return [a if a.shape == shape else _tnp.broadcast_to(a, shape) for a in xs]


def concat(arrays, /, *, axis=0) -> Tensor:
    """The arrays joined along ``axis`` (``None``: flattened first)."""
    xs = [_arr(a) for a in arrays]
    if axis is None:
        return _tnp.concatenate([_tnp.reshape(a, (-1,)) for a in xs], axis=0)
    return _tnp.concatenate(xs, axis=axis)


def squeeze(x, /, axis) -> Tensor:
    """``x`` without the size-1 axes ``axis`` (an int or tuple).

    Raises:
        ValueError: if an axis named does not have size 1.
    """
    return _tnp.squeeze(_arr(x), axis=axis)


# -- searching ------------------------------------------------------------------------------
def count_nonzero(x, /, *, axis=None, keepdims=False) -> Tensor:
    """The number of non-zero elements along ``axis`` (int64, no gradient)."""
    keepdims = _bool_arg(keepdims, "count_nonzero", "keepdims")
    x = _arr(x)
    return _tnp.sum(_tnp.astype(x != 0, int64), axis=axis, keepdims=keepdims)


# -- statistics -----------------------------------------------------------------------------
def _corrected(op, x, axis, correction, keepdims):
    fn = _tnp.var if op == "var" else _tnp.std
    return fn(_arr(x), axis=axis, correction=correction, keepdims=keepdims)


def var(x, /, *, axis=None, correction=0.0, keepdims=False) -> Tensor:
    """The variance over ``axis`` with ``correction`` degrees of freedom removed
    (``correction=1``: the unbiased sample variance; a fractional correction is allowed)."""
    return _corrected("var", x, axis, correction, keepdims)


def std(x, /, *, axis=None, correction=0.0, keepdims=False) -> Tensor:
    """The standard deviation, ``sqrt(var(x, axis=axis, correction=correction))``."""
    return _corrected("std", x, axis, correction, keepdims)


# -- utility --------------------------------------------------------------------------------
def _diff(x, /, *, axis=-1, n=1, prepend=None, append=None) -> Tensor:
    """The ``n``-th forward difference along ``axis`` (``x[1:] - x[:-1]``, repeated ``n`` times),
    after joining ``prepend`` and ``append`` along that axis. Differentiable.

    Raises:
        ValueError: for a negative ``n`` or an out-of-range ``axis``.
    """
    t: Any = _arr(x)  # Any: Tensor's operators and indexing are installed at import time
    if n < 0:
        raise ValueError(f"diff: n must be non-negative, got {n}")
    (a,) = _axes(axis, t.ndim, "diff")
    parts = [t]
    if prepend is not None:
        parts.insert(0, _arr(prepend))
    if append is not None:
        parts.append(_arr(append))
    if len(parts) > 1:
        t = _tnp.concatenate(parts, axis=a)
    lead = (slice(None),) * a
    for _ in range(n):
        t = t[lead + (slice(1, None),)] - t[lead + (slice(None, -1),)]
    return t


# -- sorting: the standard's keyword-only signature, stable by default ----------------------
def sort(x, /, *, axis=-1, descending=False, stable=True) -> Tensor:
    """``x`` sorted along ``axis`` (largest first when ``descending``); differentiable through
    the selection (see ``tapegrad.numpy.sort``)."""
    return _tnp.sort(_arr(x), axis=axis, stable=_builtins.bool(stable), descending=descending)


def argsort(x, /, *, axis=-1, descending=False, stable=True) -> Tensor:
    """The indices that sort ``x`` along ``axis`` (int64); ties keep their order (stable),
    also when ``descending``."""
    x = _arr(x)
    if x.ndim == 0:
        return _tnp.zeros((), dtype=int64)
    return _tnp.argsort(x, axis=axis, stable=_builtins.bool(stable), descending=descending)


_ADAPTERS = {
    "asarray": asarray, "arange": arange, "eye": eye, "linspace": linspace,
    "meshgrid": meshgrid, "from_dlpack": from_dlpack, "astype": astype, "finfo": finfo,
    "iinfo": iinfo, "isdtype": isdtype, "result_type": result_type, "can_cast": can_cast,
    "bitwise_invert": bitwise_invert, "bitwise_left_shift": bitwise_left_shift,
    "bitwise_right_shift": bitwise_right_shift, "matrix_transpose": matrix_transpose,
    "broadcast_arrays": broadcast_arrays, "concat": concat, "squeeze": squeeze,
    "count_nonzero": count_nonzero, "var": var, "std": std, "sort": sort, "argsort": argsort,
}  # fmt: skip
# Composites used only while tapegrad.numpy has no function of that name.
_FALLBACKS = {"diff": _diff}


def _pick(name: str):
    """The namespace's function ``name``: an adapter, tapegrad.numpy's own, or None."""
    if name in _ADAPTERS:
        return _ADAPTERS[name]
    fn = getattr(_tnp, name, None)
    if callable(fn) and not isinstance(fn, type):
        return fn
    return _FALLBACKS.get(name)


def _linalg_pick(name: str, space):
    if name in _LINALG_ADAPTERS:
        return _LINALG_ADAPTERS[name]
    fn = getattr(space, name, None)
    return fn if callable(fn) and not isinstance(fn, type) else None


# -- the linalg extension -------------------------------------------------------------------
def _diagonal(x, /, *, offset=0) -> Tensor:
    """The diagonal ``offset`` of the last two axes: ``(..., m, n)`` -> ``(..., k)``."""
    return _tnp.diagonal(_arr(x), offset, axis1=-2, axis2=-1)


def _trace(x, /, *, offset=0, dtype=None) -> Tensor:
    """The sum of diagonal ``offset`` of the last two axes; dtype rules as ``sum``."""
    return _tnp.trace(_arr(x), offset, axis1=-2, axis2=-1, dtype=dtype)


def _matrix_norm(x, /, *, keepdims=False, ord="fro") -> Tensor:  # noqa: A002
    """The matrix norm ``ord`` (``"fro"``, ``"nuc"``, 1, -1, 2, -2, inf, -inf) of the last two
    axes (see ``tapegrad.numpy.linalg.norm``)."""
    keepdims = _bool_arg(keepdims, "matrix_norm", "keepdims")
    return _tnp.linalg.norm(_arr(x), ord=ord, axis=(-2, -1), keepdims=keepdims)


def _vector_norm(x, /, *, axis=None, keepdims=False, ord=2) -> Tensor:  # noqa: A002
    """The vector ``ord``-norm over ``axis`` (all axes when ``None``; a tuple of axes is
    flattened into one vector)."""
    keepdims = _bool_arg(keepdims, "vector_norm", "keepdims")
    x = _arr(x)
    axes = _axes(axis, x.ndim, "vector_norm")
    if len(axes) == 1:
        return _tnp.linalg.norm(x, ord=ord, axis=axes[0], keepdims=keepdims)
    rest = [a for a in range(x.ndim) if a not in axes]
    moved = _tnp.permute_dims(x, tuple(rest) + axes) if x.ndim else x
    flat = _tnp.reshape(moved, tuple(x.shape[a] for a in rest) + (-1,))
    out = _tnp.linalg.norm(flat, ord=ord, axis=-1)
    if keepdims:
        out = _tnp.reshape(out, tuple(1 if a in axes else x.shape[a] for a in range(x.ndim)))
    return out


def _pinv(x, /, *, rtol=None) -> Tensor:
    """Moore-Penrose pseudo-inverse; singular values below ``rtol`` times the largest are
    treated as zero (default ``max(m, n) * eps``)."""
    return _tnp.linalg.pinv(_arr(x), rtol=rtol)


_LINALG_ADAPTERS = {
    "diagonal": _diagonal, "trace": _trace, "matrix_norm": _matrix_norm,
    "vector_norm": _vector_norm, "matrix_transpose": matrix_transpose, "pinv": _pinv,
}  # fmt: skip


# -- the fft extension: the standard's keyword-only signatures, norm="backward" by default -----
def _fft_1d(name: str):
    def fn(x, /, *, n=None, axis=-1, norm="backward") -> Tensor:
        return getattr(_tnp.fft, name)(_arr(x), n=n, axis=axis, norm=norm)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"``{name}`` along ``axis`` (length ``n``), as ``tapegrad.numpy.fft.{name}``; "
                  "``norm`` is ``'backward'``, ``'ortho'`` or ``'forward'``.")
    return fn


def _fft_nd(name: str):
    def fn(x, /, *, s=None, axes=None, norm="backward") -> Tensor:
        return getattr(_tnp.fft, name)(_arr(x), s=s, axes=axes, norm=norm)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"``{name}`` over ``axes`` (lengths ``s``), as ``tapegrad.numpy.fft.{name}``; "
                  "``norm`` is ``'backward'``, ``'ortho'`` or ``'forward'``.")
    return fn


_FFT_ADAPTERS = {
    **{n: _fft_1d(n) for n in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")},
    **{n: _fft_nd(n) for n in ("fftn", "ifftn", "rfftn", "irfftn")},
}


def _submodule(name: str, names, pick) -> _types.ModuleType:
    mod = _types.ModuleType(f"{__name__}.{name}", f"The array API ``{name}`` extension.")
    present = [n for n in names if pick(n) is not None]
    for n in present:
        setattr(mod, n, pick(n))
    mod.__all__ = present  # type: ignore[attr-defined]
    return mod


# -- the namespace: the adapters above, and tapegrad.numpy's own functions, one line each ----
# (a test keeps these lines equal to what _pick finds for STANDARD_FUNCTIONS)
empty = _tnp.empty
empty_like = _tnp.empty_like
full = _tnp.full
full_like = _tnp.full_like
ones = _tnp.ones
ones_like = _tnp.ones_like
tril = _tnp.tril
triu = _tnp.triu
zeros = _tnp.zeros
zeros_like = _tnp.zeros_like
abs = _tnp.abs
acos = _tnp.acos
acosh = _tnp.acosh
add = _tnp.add
asin = _tnp.asin
asinh = _tnp.asinh
atan = _tnp.atan
atan2 = _tnp.atan2
atanh = _tnp.atanh
bitwise_and = _tnp.bitwise_and
bitwise_or = _tnp.bitwise_or
bitwise_xor = _tnp.bitwise_xor
ceil = _tnp.ceil
clip = _tnp.clip
conj = _tnp.conj
copysign = _tnp.copysign
cos = _tnp.cos
cosh = _tnp.cosh
divide = _tnp.divide
equal = _tnp.equal
exp = _tnp.exp
expm1 = _tnp.expm1
floor = _tnp.floor
floor_divide = _tnp.floor_divide
greater = _tnp.greater
greater_equal = _tnp.greater_equal
hypot = _tnp.hypot
imag = _tnp.imag
isfinite = _tnp.isfinite
isinf = _tnp.isinf
isnan = _tnp.isnan
less = _tnp.less
less_equal = _tnp.less_equal
log = _tnp.log
log1p = _tnp.log1p
log2 = _tnp.log2
log10 = _tnp.log10
logaddexp = _tnp.logaddexp
logical_and = _tnp.logical_and
logical_not = _tnp.logical_not
logical_or = _tnp.logical_or
logical_xor = _tnp.logical_xor
maximum = _tnp.maximum
minimum = _tnp.minimum
multiply = _tnp.multiply
negative = _tnp.negative
nextafter = _tnp.nextafter
not_equal = _tnp.not_equal
positive = _tnp.positive
pow = _tnp.pow
real = _tnp.real
reciprocal = _tnp.reciprocal
remainder = _tnp.remainder
round = _tnp.round
sign = _tnp.sign
signbit = _tnp.signbit
sin = _tnp.sin
sinh = _tnp.sinh
square = _tnp.square
sqrt = _tnp.sqrt
subtract = _tnp.subtract
tan = _tnp.tan
tanh = _tnp.tanh
trunc = _tnp.trunc
take = _tnp.take
take_along_axis = _tnp.take_along_axis
matmul = _tnp.matmul
tensordot = _tnp.tensordot
vecdot = _tnp.vecdot
broadcast_to = _tnp.broadcast_to
expand_dims = _tnp.expand_dims
flip = _tnp.flip
moveaxis = _tnp.moveaxis
permute_dims = _tnp.permute_dims
repeat = _tnp.repeat
reshape = _tnp.reshape
roll = _tnp.roll
stack = _tnp.stack
tile = _tnp.tile
unstack = _tnp.unstack
argmax = _tnp.argmax
argmin = _tnp.argmin
nonzero = _tnp.nonzero
searchsorted = _tnp.searchsorted
where = _tnp.where
unique_all = _tnp.unique_all
unique_counts = _tnp.unique_counts
unique_inverse = _tnp.unique_inverse
unique_values = _tnp.unique_values
cumulative_prod = _tnp.cumulative_prod
cumulative_sum = _tnp.cumulative_sum
max = _tnp.max
mean = _tnp.mean
min = _tnp.min
prod = _tnp.prod
sum = _tnp.sum
all = _tnp.all
any = _tnp.any
diff = _tnp.diff
linalg = _submodule("linalg", LINALG_FUNCTIONS,
                    lambda n: _linalg_pick(n, getattr(_tnp, "linalg", None)))
fft = _submodule("fft", FFT_FUNCTIONS, lambda n, space=_tnp.fft: _FFT_ADAPTERS.get(
    n, getattr(space, n, None)) if hasattr(space, n) else None)

#: Functions of the standard (and its extensions) this namespace does not provide yet.
MISSING = tuple(
    [n for n in STANDARD_FUNCTIONS if n not in globals()]
    + [f"linalg.{n}" for n in LINALG_FUNCTIONS if n not in linalg.__all__]
    + [f"fft.{n}" for n in FFT_FUNCTIONS if n not in fft.__all__]
)

__all__ = [
    "FFT_FUNCTIONS", "LINALG_FUNCTIONS", "MISSING", "STANDARD_FUNCTIONS",
    "__array_api_version__", "__array_namespace_info__", "abs", "acos", "acosh", "add", "all",
    "any", "arange", "argmax", "argmin", "argsort", "asarray", "asin", "asinh", "astype",
    "atan", "atan2", "atanh", "bitwise_and", "bitwise_invert", "bitwise_left_shift",
    "bitwise_or", "bitwise_right_shift", "bitwise_xor", "bool", "broadcast_arrays",
    "broadcast_to", "can_cast", "ceil", "clip", "complex128", "complex64", "concat", "conj",
    "copysign", "cos", "cosh", "count_nonzero", "cumulative_prod", "cumulative_sum", "diff",
    "divide", "e", "empty", "empty_like", "equal", "exp", "expand_dims", "expm1", "eye", "fft",
    "finfo", "finfo_object", "flip", "float32", "float64", "floor", "floor_divide",
    "from_dlpack", "full", "full_like", "greater", "greater_equal", "hypot", "iinfo",
    "iinfo_object", "imag", "inf", "int16", "int32", "int64", "int8", "isdtype", "isfinite",
    "isinf", "isnan", "less", "less_equal", "linalg", "linspace", "log", "log10", "log1p",
    "log2", "logaddexp", "logical_and", "logical_not", "logical_or", "logical_xor", "matmul",
    "matrix_transpose", "max", "maximum", "mean", "meshgrid", "min", "minimum", "moveaxis",
    "multiply", "nan", "negative", "newaxis", "nextafter", "nonzero", "not_equal", "ones",
    "ones_like", "permute_dims", "pi", "positive", "pow", "prod", "real", "reciprocal",
    "remainder", "repeat", "reshape", "result_type", "roll", "round", "searchsorted", "sign",
    "signbit", "sin", "sinh", "sort", "sqrt", "square", "squeeze", "stack", "std", "subtract",
    "sum", "take", "take_along_axis", "tan", "tanh", "tensordot", "tile", "tril", "triu",
    "trunc", "uint16", "uint32", "uint64", "uint8", "unique_all", "unique_counts",
    "unique_inverse", "unique_values", "unstack", "var", "vecdot", "where", "zeros",
    "zeros_like",
]  # fmt: skip
