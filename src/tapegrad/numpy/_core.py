"""Core of ``tapegrad.numpy``: operand conversion, dtypes, casting, devices, stop_gradient.

See the package docstring for the conventions.

Write ordinary NumPy-style code with ``import tapegrad.numpy as tnp`` and differentiate it with
the transforms. Inputs may be Tensors, NumPy/CuPy arrays or Python numbers; Python numbers keep
the Tensor operand's dtype (NumPy's weak scalar promotion), lists become float32 Tensors.
Broadcasting follows NumPy. Every function returns a new Tensor.
"""

from __future__ import annotations

import numpy as _np

from tapegrad import ops as _ops
from tapegrad.ops._registry import install_methods as _install
from tapegrad.ops._registry import operand as _t  # noqa: F401  (used by sibling modules)
from tapegrad.ops._registry import tensor_arg as _tensor  # noqa: F401
from tapegrad.tensor import Tensor

__all__ = [
    "asarray",
    "array",
    "astype",
    "stop_gradient",
    "to_device",
    "float16",
    "float32",
    "float64",
    "int32",
    "int64",
    "bool_",
]

float16, float32, float64 = _np.float16, _np.float32, _np.float64
int32, int64, bool_ = _np.int32, _np.int64, _np.bool_


def asarray(x, dtype=None, device=None) -> Tensor:
    """A Tensor from ``x`` (no copy of a Tensor or array of the right dtype and device).

    Python data becomes float32 unless ``dtype`` is given; arrays keep their dtype.
    """
    if isinstance(x, Tensor) and dtype is None and device is None:
        return x
    if isinstance(x, Tensor) and x.is_traced and dtype is not None:
        return astype(x, dtype)
    return Tensor(x, dtype=dtype, device=device)


def array(x, dtype=None, device=None) -> Tensor:
    """A Tensor holding a copy of ``x``'s data (see :func:`asarray`)."""
    if isinstance(x, Tensor):
        return asarray(x, dtype=dtype, device=device)
    if isinstance(x, _np.ndarray):
        x = x.copy()
    return Tensor(x, dtype=dtype, device=device)


astype = _ops.AsType.api


def stop_gradient(x):
    """The same value(s) with zero gradient under every transform; works on pytrees."""
    from tapegrad.tree import tree_map

    def one(v):
        if isinstance(v, Tensor):
            return _ops.StopGradient.apply(v) if v.is_traced else v
        return v

    return tree_map(one, x)


to_device = _ops.ToDevice.api


def _install_methods(methods: dict) -> None:
    """Attach ``methods`` to :class:`Tensor` (the ops layer's registry does the attaching)."""
    _install(methods)

