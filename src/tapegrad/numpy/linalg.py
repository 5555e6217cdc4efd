"""``tapegrad.numpy.linalg``: NumPy's ``numpy.linalg`` names, differentiable.

``inv``, ``solve``, ``det``, ``slogdet``, ``cholesky``, ``svd``, ``svdvals`` and ``norm`` take
batched ``(..., n, n)`` (``svd``: ``(..., m, n)``) inputs wherever NumPy does; errors name the
function (a singular matrix raises
``numpy.linalg.LinAlgError``, a ``ValueError``, naming the op). ``matmul``, ``tensordot`` and
``outer`` are re-exported from :mod:`tapegrad.numpy` as in NumPy 2. The gradient rules follow
Giles (2008), Murray (2016) and Townsend (2016); see :mod:`tapegrad.ops.linalg`, where the
primitives' functions are defined with their rules.
"""

from numpy.linalg import LinAlgError

from tapegrad import ops as _ops
from tapegrad.numpy._linalg import matmul, outer, svdvals, tensordot
from tapegrad.numpy._reduction import norm
from tapegrad.ops.linalg import SlogdetResult, SVDResult

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

inv = _ops.Inv.api
solve = _ops.Solve.api
det = _ops.Det.api
slogdet = _ops.SlogDet.api
cholesky = _ops.Cholesky.api
svd = _ops.Svd.api
