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

from tapegrad.ops import elementwise as _ew
from tapegrad.ops._registry import ns as _ns

_OWN = [c for c in vars(_ew).values() if isinstance(c, type) and c.__module__ == _ew.__name__]
__all__ = sorted({n for cls in _OWN for n in getattr(cls, "names", ())})
globals().update({n: getattr(_ns, n) for n in __all__})
