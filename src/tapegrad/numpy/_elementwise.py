"""Elementwise functions, comparisons and logic of ``tapegrad.numpy``.

Conventions shared by every function here:

- Operands may be Tensors, NumPy/CuPy arrays or Python numbers; they broadcast like NumPy and
  the result has the broadcast shape. Shapes that do not broadcast raise ``ValueError`` naming
  the op and the shapes.
- Dtypes follow NumPy's promotion; a Python number keeps the other operand's dtype
  (``tnp.maximum(x32, 0.0)`` is float32). When every operand is a Python number the first
  becomes a float32 Tensor (tapegrad's default for Python data). Transcendental functions of
  integer inputs are float64, as in NumPy. Gradients exist for floating inputs only.
- Out of the domain the result is NaN (``inf`` at a pole), without a warning. Rules whose
  derivative is unbounded give a zero gradient wherever the cotangent is zero, so
  ``where(x > 0, sqrt(x), 0.0)`` has a finite gradient at 0.
- Conventions at kinks (``abs``, ``relu``, ``maximum``, ``clip``, ...) are tabulated in
  ``docs/conventions.md``.
"""

from __future__ import annotations

import numpy as _np

from tapegrad.ops import elementwise as _ew
from tapegrad.ops._registry import ns as _ns
from tapegrad.ops._registry import tensor_arg as _tensor_arg

_OWN = [c for c in vars(_ew).values() if isinstance(c, type) and c.__module__ == _ew.__name__]
__all__ = sorted({n for cls in _OWN for n in getattr(cls, "names", ())})
globals().update({n: getattr(_ns, n) for n in __all__})


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """Replace NaN with ``nan``, ``+inf`` with ``posinf`` and ``-inf`` with ``neginf`` (NumPy's
    ``nan_to_num``); the real and imaginary parts of complex input are treated separately.

    Args:
        x: Tensor, array or number of any dtype; integer and boolean input is returned as is.
        copy: Accepted for NumPy compatibility (tapegrad never modifies in place).
        nan: The value for NaN (default 0.0).
        posinf: The value for ``+inf`` (default: the largest finite value of the dtype).
        neginf: The value for ``-inf`` (default: the most negative finite value).

    Returns:
        Tensor of ``x``'s shape and dtype.

    Gradient: ``g`` where the entry is finite, 0 where it was replaced (the replacement is a
    constant). The replacement values get no gradient.
    """
    x = _tensor_arg(x)
    kind = x.dtype.kind
    if kind not in "fc":
        return x
    finfo = _np.finfo(x.dtype)
    hi = finfo.max if posinf is None else posinf
    lo = finfo.min if neginf is None else neginf

    def fix(v):
        v = _ns.where(_ns.isnan(v), nan, v)
        v = _ns.where(_ns.isposinf(v), hi, v)
        return _ns.where(_ns.isneginf(v), lo, v)

    if kind == "c":
        return fix(_ns.real(x)) + 1j * fix(_ns.imag(x))
    return fix(x)


__all__ = sorted([*__all__, "nan_to_num"])
