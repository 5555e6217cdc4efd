"""The array API's inspection namespace and version for ``tapegrad.numpy``.

``tapegrad.numpy`` and :mod:`tapegrad.numpy.array_api` share this one definition:
``tnp.__array_namespace_info__()`` and ``xp.__array_namespace_info__()`` report the same
defaults, dtypes and devices (NumPy's main namespace has its own, in the same way).

References:
    Python array API standard, version 2024.12, "Inspection API":
    https://data-apis.org/array-api/2024.12/API_specification/inspection.html
"""

from __future__ import annotations

from typing import Any

import numpy as _np

from tapegrad.core.backend import cupy_available as _cupy_available
from tapegrad.core.backend import get_backend as _get_backend

__all__ = ["__array_api_version__", "__array_namespace_info__"]

#: The version of the array API standard the namespace follows.
__array_api_version__ = "2024.12"

#: The standard's dtypes by name (NumPy dtype objects).
DTYPES = {
    name: _np.dtype(name)
    for name in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "float32", "float64", "complex64", "complex128")
}  # fmt: skip
#: tapegrad's defaults: Python floats become float32, complex numbers complex64, ints int64.
DEFAULT_DTYPES = {
    "real floating": _np.dtype("float32"),
    "complex floating": _np.dtype("complex64"),
    "integral": _np.dtype("int64"),
    "indexing": _np.dtype("int64"),
}


def _devices() -> list:
    out = ["cpu"]
    if _cupy_available():
        cp: Any = _get_backend("cuda:0")
        out += [f"cuda:{i}" for i in range(cp.cuda.runtime.getDeviceCount())]
    return out


def _check_device(device, op: str) -> None:
    if device is not None and device not in _devices():
        raise ValueError(
            f"__array_namespace_info__().{op}: unknown device {device!r}; expected one of "
            f"{_devices()} or None"
        )


class __array_namespace_info__:  # noqa: N801  (the standard's name)
    """The array API's inspection utilities (``tnp.__array_namespace_info__()``).

    Example:
        >>> import tapegrad.numpy as tnp
        >>> info = tnp.__array_namespace_info__()
        >>> info.default_dtypes()["real floating"]
        dtype('float32')
        >>> info.default_device()
        'cpu'
    """

    def capabilities(self) -> dict:
        """``{"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}``
        (data-dependent shapes work in eager mode; ``jit``, ``vmap`` and lazy mode need static
        shapes)."""
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self) -> str:
        """``"cpu"``: where Tensors made from Python data live."""
        return "cpu"

    def default_dtypes(self, *, device=None) -> dict:
        """``{"real floating": float32, "complex floating": complex64, "integral": int64,
        "indexing": int64}``, on every device.

        Raises:
            ValueError: for a device that is not one of :meth:`devices`.
        """
        _check_device(device, "default_dtypes")
        return dict(DEFAULT_DTYPES)

    def dtypes(self, *, device=None, kind=None) -> dict:
        """The supported dtypes by name, optionally only those of ``kind`` (a kind name as
        in ``isdtype``: ``"bool"``, ``"signed integer"``, ``"unsigned integer"``,
        ``"integral"``, ``"real floating"``, ``"complex floating"``, ``"numeric"``, or a tuple
        of them); the same on every device.

        Raises:
            ValueError: for a device that is not one of :meth:`devices`, or an unknown kind.
        """
        _check_device(device, "dtypes")
        if kind is None:
            return dict(DTYPES)
        return {k: v for k, v in DTYPES.items() if bool(_np.isdtype(v, kind))}

    def devices(self) -> list:
        """``["cpu"]`` and ``"cuda:N"`` for each GPU CuPy sees."""
        return _devices()
