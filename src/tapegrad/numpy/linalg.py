"""``tapegrad.numpy.linalg``: NumPy's ``numpy.linalg`` names, differentiable.

``inv``, ``solve``, ``det``, ``slogdet``, ``cholesky``, ``svd``, ``svdvals`` and ``norm`` take
batched ``(..., n, n)`` (``svd``: ``(..., m, n)``) inputs wherever NumPy does; errors name the
function (a singular matrix raises
``numpy.linalg.LinAlgError``, a ``ValueError``, naming the op). ``matmul``, ``tensordot`` and
``outer`` are re-exported from :mod:`tapegrad.numpy` as in NumPy 2. The gradient rules follow
Giles (2008), Murray (2016) and Townsend (2016); see :mod:`tapegrad.ops.linalg`.
"""

from numpy.linalg import LinAlgError

from tapegrad.numpy._linalg import (
    SlogdetResult,
    SVDResult,
    cholesky,
    det,
    inv,
    matmul,
    outer,
    slogdet,
    solve,
    svd,
    svdvals,
    tensordot,
)
from tapegrad.numpy._reduction import norm

__all__ = [
    "LinAlgError",
    "SlogdetResult",
    "SVDResult",
    "cholesky",
    "det",
    "inv",
    "matmul",
    "norm",
    "outer",
    "slogdet",
    "solve",
    "svd",
    "svdvals",
    "tensordot",
]
