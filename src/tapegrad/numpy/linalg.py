"""``tapegrad.numpy.linalg``: NumPy 2's ``numpy.linalg`` namespace, differentiable.

Decompositions (``cholesky``, ``eig``, ``eigh``, ``qr``, ``svd``), their value-only forms
(``eigvals``, ``eigvalsh``, ``svdvals``), inverses and solvers (``inv``, ``pinv``, ``solve``,
``lstsq``, ``tensorinv``, ``tensorsolve``), determinants (``det``, ``slogdet``), norms and
numbers (``norm``, ``vector_norm``, ``matrix_norm``, ``cond``, ``matrix_rank``), products
(``matmul``, ``multi_dot``, ``matrix_power``, ``outer``, ``tensordot``, ``vecdot``,
``cross``) and views (``diagonal``, ``trace``, ``matrix_transpose``). Batched ``(..., m, n)``
inputs are accepted wherever NumPy accepts them; real and complex dtypes wherever NumPy
does, differentiated in JAX's convention (``grad`` of a real loss of ``z = x + iy`` is
``dL/dx - i dL/dy``). Errors name the function (a singular matrix raises
``numpy.linalg.LinAlgError``, a ``ValueError``).

The gradient rules follow Giles (2008), Murray (2016), Seeger et al. (2017), Townsend (2016),
Golub and Pereyra (1973) and JAX; see :mod:`tapegrad.ops.linalg`, where the primitives'
functions are defined with their rules. Each docstring says what happens at repeated
eigenvalues or singular values.
"""

import numpy as _numpy
from numpy.linalg import LinAlgError

from tapegrad import ops as _ops
from tapegrad.numpy._linalg import (
    cond,
    cross,
    diagonal,
    eigvals,
    eigvalsh,
    lstsq,
    matmul,
    matrix_norm,
    matrix_power,
    matrix_rank,
    matrix_transpose,
    multi_dot,
    norm,
    outer,
    svdvals,
    tensordot,
    tensorinv,
    tensorsolve,
    trace,
    vecdot,
    vector_norm,
)
from tapegrad.ops.linalg import EighResult, EigResult, QRResult, SlogdetResult, SVDResult

__all__ = [
    "test",
    "LinAlgError",
    "EigResult",
    "EighResult",
    "QRResult",
    "SlogdetResult",
    "SVDResult",
    "cholesky",
    "cond",
    "cross",
    "det",
    "diagonal",
    "eig",
    "eigh",
    "eigvals",
    "eigvalsh",
    "inv",
    "lstsq",
    "matmul",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "matrix_transpose",
    "multi_dot",
    "norm",
    "outer",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "svd",
    "svdvals",
    "tensordot",
    "tensorinv",
    "tensorsolve",
    "trace",
    "vecdot",
    "vector_norm",
]

inv = _ops.Inv.api
solve = _ops.Solve.api
det = _ops.Det.api
slogdet = _ops.SlogDet.api
cholesky = _ops.Cholesky.api
svd = _ops.Svd.api
eig = _ops.Eig.api
eigh = _ops.Eigh.api
qr = _ops.Qr.api
pinv = _ops.Pinv.api


#: NumPy's test runner for ``numpy.linalg`` (HIPS autograd's ``autograd.numpy.linalg`` re-exports it
#: too); tapegrad's own tests are under ``tests/``.
test = _numpy.linalg.test  # pyright: ignore[reportAttributeAccessIssue]
