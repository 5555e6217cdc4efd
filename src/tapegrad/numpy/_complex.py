"""Complex-number helpers of NumPy: :func:`real_if_close` and :func:`sort_complex`, both
differentiable (a real part, a sort)."""

from __future__ import annotations

import numpy as _np

from tapegrad.core import dtypes as _tg_dtypes
from tapegrad.core.tensor import Tensor
from tapegrad.numpy._core import _tensor, astype, stop_gradient
from tapegrad.numpy._sorting import sort
from tapegrad.ops._registry import ns as _ns

__all__ = ["real_if_close", "sort_complex"]


def real_if_close(a, tol=100) -> Tensor:
    """``a``'s real part if every imaginary part is within ``tol`` of zero, else ``a``
    (NumPy ``real_if_close``).

    Args:
        a: Tensor, array, number or list.
        tol: Tolerance on ``|imag|``: a multiple of the dtype's machine epsilon when above 1,
            else an absolute tolerance.

    Returns:
        The real part (a real Tensor of ``a``'s precision) when the test holds, else ``a`` as
        a Tensor; a real ``a`` is returned as it is. Differentiable: the real part keeps the
        derivatives of the real parts (the decision is made on the values).

    Example:
        >>> import tapegrad.numpy as tnp
        >>> z = tnp.asarray([2.1 + 4e-14j, 5.2 + 3e-15j], dtype="complex128")
        >>> tnp.real_if_close(z, tol=1000)
        Tensor([2.1, 5.2], dtype=float64)
        >>> tnp.real_if_close(tnp.asarray([2.1 + 4e-13j]), tol=1000).dtype
        dtype('float32')
    """
    a = _tensor(a)
    if a.dtype.kind != "c":
        return a
    if tol > 1:
        tol = _tg_dtypes.finfo(a.dtype).eps * tol
    if bool(_ns.all(_ns.abs(_ns.imag(stop_gradient(a))) < tol)):
        return _ns.real(a)
    return a


def _complex_type(dtype) -> _np.dtype:
    """NumPy ``sort_complex``'s result type: complex64 for int8, int16, uint8 and uint16,
    the long-double complex for long double, complex128 otherwise (float32 included)."""
    char = _np.dtype(dtype).char
    if dtype.kind == "c":
        return _np.dtype(dtype)
    if char in "bhBH":
        return _np.dtype(_np.complex64)
    if char == "g":
        return _np.dtype(_np.clongdouble)
    return _np.dtype(_np.complex128)


def sort_complex(a) -> Tensor:
    """Sort along the last axis by real part, then imaginary part (NumPy ``sort_complex``).

    Args:
        a: Tensor, array or list (real or complex).

    Returns:
        Complex Tensor of ``a``'s shape: NumPy's dtype (complex64 for small integers,
        complex128 for other real input, float32 included; a complex ``a`` keeps its dtype).
        Differentiable: each output element's cotangent goes to the element it came from
        (ties keep their order, as a stable sort).

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.sort_complex(tnp.asarray([5, 3, 6, 2, 1]))
        Tensor([1.+0.j, 2.+0.j, 3.+0.j, 5.+0.j, 6.+0.j], dtype=complex128)
    """
    a = _tensor(a)
    return astype(sort(a, axis=-1), _complex_type(a.dtype))
