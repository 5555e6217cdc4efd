"""Floating dtypes beyond NumPy's: ``bfloat16`` (from ``ml_dtypes``, the type JAX uses).

NumPy has no bfloat16 of its own; ``ml_dtypes`` registers one as a NumPy extension dtype
(its ``kind`` is ``"V"``, so NumPy's ``issubdtype(..., np.floating)`` does not know it). This
module is the one place tapegrad asks "is this a floating dtype?" and "what do these dtypes
promote to?" with bfloat16 included, following JAX's promotion lattice:

- ``bfloat16`` with ``bool`` or any integer dtype gives ``bfloat16``;
- with ``float16`` gives ``float32`` (neither holds the other);
- with ``float32``/``float64``/``complex64``/``complex128`` gives that wider dtype;
- with a Python float (weakly typed) stays ``bfloat16``.

Every op computes on bfloat16 as JAX does on a CPU: its inputs are widened to float32, the
op runs there, and a floating result is rounded back to bfloat16 (one rounding per op).
"""

from __future__ import annotations

import ml_dtypes as _ml_dtypes
import numpy as np

__all__ = ["bfloat16", "is_floating", "is_bfloat16", "result_type", "finfo", "canonical"]

#: The bfloat16 dtype (8 exponent bits, 7 mantissa bits), as ``ml_dtypes.bfloat16``.
bfloat16 = np.dtype(_ml_dtypes.bfloat16)
_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)
_PY_SCALARS = (bool, int, float, complex)


def is_bfloat16(dtype) -> bool:
    """Whether ``dtype`` is bfloat16."""
    return dtype is bfloat16 or dtype == bfloat16


def canonical(dtype) -> np.dtype:
    """``np.dtype(dtype)``, with the name ``"bfloat16"`` understood (NumPy knows it once
    ``ml_dtypes`` is imported)."""
    if isinstance(dtype, str) and dtype == "bfloat16":
        return bfloat16
    return np.dtype(dtype)


def is_floating(dtype) -> bool:
    """Whether ``dtype`` is a floating or complex (differentiable) dtype, bfloat16 included."""
    d = canonical(dtype)
    return d.kind in "fc" or d == bfloat16


def result_type(*args) -> np.dtype:
    """NumPy's ``result_type`` (Python numbers weakly typed), extended to bfloat16 with JAX's
    rules: bfloat16 beside bool, integers or Python floats stays bfloat16; beside float16 it
    gives float32; beside a wider float or a complex dtype it gives that dtype.

    Args:
        *args: dtypes, arrays, Tensors or Python numbers.

    Returns:
        The promoted NumPy dtype.
    """
    dts = []
    scalars = []
    bf = False
    for a in args:
        if type(a) in _PY_SCALARS:
            scalars.append(a)
            continue
        d = canonical(a) if isinstance(a, (type, str, np.dtype)) else np.dtype(a.dtype)
        if d == bfloat16:
            bf = True
        else:
            dts.append(d)
    if not bf:
        return np.result_type(*dts, *scalars)
    floats = [d for d in dts if d.kind in "fc"]
    if not floats:
        if any(type(s) is complex for s in scalars):
            return np.dtype(np.complex64)
        return bfloat16
    wide = np.result_type(*floats)
    if wide == _F16:
        return _F32
    return np.result_type(wide, _F32, *scalars)


def finfo(dtype):
    """Machine limits of a floating dtype (``numpy.finfo``, or ``ml_dtypes.finfo`` for
    bfloat16): ``eps``, ``max``, ``min``, ``tiny``, ``bits``, ``resolution``.

    Args:
        dtype: A floating dtype, its name, or a Tensor/array of it.

    Returns:
        The finfo record.

    Raises:
        ValueError: if ``dtype`` is not a floating dtype (NumPy's error).

    Example:
        >>> from tapegrad.core import dtypes
        >>> float(dtypes.finfo(dtypes.bfloat16).eps)
        0.0078125
    """
    d = canonical(dtype) if isinstance(dtype, (type, str, np.dtype)) else np.dtype(dtype.dtype)
    if d == bfloat16:
        return _ml_dtypes.finfo(d)
    return np.finfo(d)
