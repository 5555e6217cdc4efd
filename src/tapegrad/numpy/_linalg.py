"""Linear algebra of ``tapegrad.numpy`` (``matmul``, ...)."""

from __future__ import annotations

from tapegrad import ops as _ops
from tapegrad.numpy._core import _install_methods, _tensor
from tapegrad.tensor import Tensor

__all__ = ["matmul"]


# -- linear algebra -------------------------------------------------------------------------
def matmul(a, b) -> Tensor:
    """Matrix product with NumPy's ``matmul`` semantics (1-D promotion, batch broadcasting).

    Args:
        a: Tensor of shape ``(..., n, k)`` or ``(k,)``.
        b: Tensor of shape ``(..., k, m)`` or ``(k,)``.

    Returns:
        Tensor of shape ``(..., n, m)`` with 1-D operands' added axes removed.

    Raises:
        ValueError: if the inner dimensions differ or batch dimensions do not broadcast,
            naming both shapes.
    """
    return _ops.MatMul.apply(_tensor(a), _tensor(b))


def _rmatmul(x, y):
    return matmul(y, x)


_install_methods({"__matmul__": matmul, "__rmatmul__": _rmatmul, "matmul": matmul})
