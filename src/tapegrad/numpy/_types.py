"""The rest of NumPy's type names: the array type :class:`ndarray` (for ``isinstance``
checks) and NumPy's remaining scalar types (``longdouble``, ``str_``, ``datetime64``, ...),
re-exported as NumPy's own, as the other dtype names of ``tapegrad.numpy`` are."""

from __future__ import annotations

import numpy as _np

from tapegrad.core.tensor import Tensor

__all__ = ["ndarray", "longdouble", "clongdouble", "long", "ulong", "bytes_", "str_", "void",
           "object_", "character", "flexible", "datetime64", "timedelta64", "record"]

longdouble, clongdouble = _np.longdouble, _np.clongdouble
long, ulong = _np.long, _np.ulong  # noqa: A001 - NumPy's names
bytes_, str_, void, object_ = _np.bytes_, _np.str_, _np.void, _np.object_
character, flexible = _np.character, _np.flexible
datetime64, timedelta64, record = _np.datetime64, _np.timedelta64, _np.record
# the extended-precision names exist where the platform's long double has 80 or 128 bits
if hasattr(_np, "float96"):
    float96, complex192 = _np.float96, _np.complex192  # pyright: ignore[reportAttributeAccessIssue]
    __all__ += ["float96", "complex192"]
if hasattr(_np, "float128"):
    float128, complex256 = _np.float128, _np.complex256
    __all__ += ["float128", "complex256"]


def _is_array_type(t) -> bool:
    return issubclass(t, (Tensor, _np.ndarray)) or hasattr(t, "__cuda_array_interface__")


class _ArrayType(type):
    def __instancecheck__(cls, obj) -> bool:
        return _is_array_type(type(obj))

    def __subclasscheck__(cls, sub) -> bool:
        return isinstance(sub, type) and _is_array_type(sub)


class ndarray(metaclass=_ArrayType):  # noqa: N801 - NumPy's name
    """The array type, for ``isinstance(x, tnp.ndarray)``: true for Tensors (traced ones too,
    as HIPS autograd's ``isinstance`` sees through its boxes) and for NumPy and CuPy arrays,
    as JAX's ``jnp.ndarray`` is the type of its arrays and tracers.

    It is not a constructor: make Tensors with :func:`tapegrad.numpy.asarray`,
    :func:`tapegrad.numpy.zeros` or :func:`tapegrad.numpy.empty`.

    Raises:
        TypeError: when called.

    Example:
        >>> import numpy as np, tapegrad.numpy as tnp
        >>> isinstance(tnp.ones(2), tnp.ndarray), isinstance(np.ones(2), tnp.ndarray)
        (True, True)
        >>> isinstance([1.0], tnp.ndarray)
        False
    """

    def __new__(cls, *args, **kwargs):
        raise TypeError("tapegrad.numpy.ndarray is the array type for isinstance checks, not a "
                        "constructor; make a Tensor with tnp.asarray(data), tnp.zeros(shape) or "
                        "tnp.empty(shape)")
