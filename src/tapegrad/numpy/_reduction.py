"""Reductions and cumulative ops of ``tapegrad.numpy``, with NumPy's names and arguments.

``axis`` is an int, a tuple of ints or ``None`` (all axes) unless stated otherwise; negative
axes count from the end; ``keepdims=True`` keeps each reduced axis with size 1. Output dtypes
follow NumPy. Each function checks its arguments before doing any work (through the op's
``output_shape``), so errors name the function, the axis and the Tensor's shape.
"""

from __future__ import annotations

import numbers as _numbers

import numpy as _np

from tapegrad import ops as _ops
from tapegrad.core.tensor import Tensor
from tapegrad.numpy._core import _tensor
from tapegrad.ops._registry import bool_arg
from tapegrad.ops._registry import ns as _ns
from tapegrad.ops.reduction import normalize_axis as _normalize_axis

__all__ = [
    "sum",
    "mean",
    "prod",
    "max",
    "min",
    "amax",
    "amin",
    "argmax",
    "argmin",
    "var",
    "std",
    "logsumexp",
    "norm",
    "cumsum",
    "cumprod",
    "any",
    "all",
]


sum = _ns.sum  # noqa: A001
mean = _ns.mean
prod = _ns.prod
max = _ns.max  # noqa: A001
min = _ns.min  # noqa: A001
amax = _ns.amax
amin = _ns.amin
argmax = _ns.argmax
argmin = _ns.argmin
var = _ns.var
std = _ns.std
logsumexp = _ns.logsumexp
cumsum = _ns.cumsum
cumprod = _ns.cumprod
any = _ns.any  # noqa: A001
all = _ns.all  # noqa: A001


_INF = float("inf")
_MATRIX_ORDS = (None, "fro", 1, -1, _INF, -_INF)


def norm(x, ord=None, axis=None, keepdims=False) -> Tensor:  # noqa: A002
    """Vector or matrix norm, as ``numpy.linalg.norm`` (re-exported as ``tnp.linalg.norm``).

    Which norm:
        - ``axis=None``: with ``ord=None`` the 2-norm of the flattened Tensor; otherwise ``x``
          must be 1-D (vector norm) or 2-D (matrix norm).
        - ``axis`` an int: vector norms along it. ``ord``: ``None`` or 2 (Euclidean),
          1 (``sum |x|``), ``inf`` (``max |x|``), ``-inf`` (``min |x|``), 0 (the number of
          nonzero entries; zero gradient), and any other real ``p``:
          ``sum(|x|**p)**(1/p)``, as NumPy computes it also for ``0 < p < 1`` (a
          quasi-norm) and ``p < 0`` (then 0 when an entry is 0). It is evaluated with the
          largest ``|x|`` (smallest for ``p < 0``) factored out, so ``|x|**p`` does not
          overflow or underflow where NumPy's direct sum does (NumPy then gives ``inf`` or
          0). Over an empty axis: 0 for ``p > 0``, ``inf`` for ``p < 0`` (as NumPy).
        - ``axis`` a pair ``(row, col)``: matrix norms. ``ord``: ``None`` or ``'fro'``
          (Frobenius), 1 / -1 (max / min over columns of the absolute column sums),
          ``inf`` / ``-inf`` (max / min over rows of the absolute row sums), 2 / -2 (largest /
          smallest singular value), ``'nuc'`` (sum of the singular values).

    Gradient conventions (never NaN): the 2-norm and Frobenius norm have gradient 0 at
    ``x = 0``; ``|x|`` has gradient ``sign(x)`` (0 at 0); max/min ties split the gradient
    equally. The p-norm has gradient ``sign(x) (|x| / norm)**(p - 1)``; where the norm is 0
    (all entries 0 for ``p > 0``, some entry 0 for ``p < 0``) the gradient is 0, and for
    ``p < 1`` a zero entry gets gradient 0 (its one-sided derivatives are ``+-inf``;
    PyTorch's convention). Second derivatives are finite there too (0 where the true value is
    infinite, as at a zero entry for ``1 < p < 2``). The singular-value norms have gradient
    ``U diag(g) Vh`` through :func:`tapegrad.numpy.linalg.svd` (Townsend 2016); a repeated
    largest (smallest) singular value splits it equally.

    Args:
        x: Real Tensor; integer inputs are converted to float64 (as NumPy).
        ord: Order of the norm (see above).
        axis: None, an int, or a pair of ints.
        keepdims: Keep the normed axes with size 1.

    Returns:
        Tensor of ``x``'s floating dtype with the normed axes removed (or kept with size 1).

    Raises:
        ValueError: for an unsupported ``ord``, an ``axis`` of the wrong length or out of
            range, ``axis=None`` with ``ord`` given on a Tensor that is not 1-D or 2-D, or an
            ``inf``/``-inf`` norm over an empty axis.
        TypeError: for complex inputs.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> a = tg.Tensor([[3.0, -4.0], [0.0, 1.0]])
        >>> tnp.norm(a, axis=1)
        Tensor([5., 1.], dtype=float32)
        >>> tnp.norm(a, ord=1)  # matrix 1-norm: largest absolute column sum
        Tensor(5., dtype=float32)
        >>> tg.grad(tnp.norm)(tg.Tensor([0.0, 0.0]))  # convention at 0
        Tensor([0., 0.], dtype=float32)
        >>> tnp.norm(tg.Tensor([3.0, 4.0]), ord=3)  # (27 + 64)**(1/3)
        Tensor(4.4979415, dtype=float32)
        >>> tg.grad(lambda v: tnp.norm(v, ord=0.5))(tg.Tensor([0.0, 4.0]))  # 0 at 0
        Tensor([0., 1.], dtype=float32)
    """
    keepdims = bool_arg(keepdims, "norm", "keepdims")
    x = _tensor(x)
    if x.dtype.kind == "c":
        raise TypeError(f"norm: complex inputs are not supported (got dtype {x.dtype})")
    if x.dtype.kind not in "fV":
        x = x.astype(_np.float64)
    nd = x.ndim
    if axis is None:
        if ord is None:
            return _ops.Norm2.apply(x, axis=None, keepdims=keepdims)
        if nd not in (1, 2):
            raise ValueError(
                f"norm: with ord={ord!r} and axis=None the Tensor must be 1-D or 2-D, got "
                f"shape {x.shape}; pass axis"
            )
        axes = tuple(range(nd))
    elif isinstance(axis, (tuple, list)):
        axes = tuple(axis)
    else:
        axes = (axis,)
    if len(axes) == 1:
        (a,) = _normalize_axis(axes, nd, "norm")
        return _vector_norm(x, ord, a, keepdims)
    if len(axes) == 2:
        row, col = (_normalize_axis(v, nd, "norm")[0] for v in axes)
        if row == col:
            raise ValueError(f"norm: the two axes of a matrix norm must differ, got {axis!r}")
        return _matrix_norm(x, ord, row, col, keepdims)
    raise ValueError(f"norm: axis must be None, an int or a pair of ints, got {axis!r}")


def _vector_norm(x, ord, a, keepdims):  # noqa: A002
    _abs = _ns.abs
    if ord is None or (not isinstance(ord, str) and ord == 2):
        return _ops.Norm2.apply(x, axis=a, keepdims=keepdims)
    if not isinstance(ord, (_numbers.Real, _np.bool_)) or ord != ord:
        raise ValueError(
            f"norm: unsupported vector norm order ord={ord!r}; use None, a real number "
            "(0 counts the nonzero entries), inf or -inf"
        )
    if ord == 1:
        return sum(_abs(x), axis=a, keepdims=keepdims)
    if ord == 0:  # number of nonzero entries: piecewise constant, zero gradient
        nonzero = _ops.NotEqual.apply(x, 0).astype(x.dtype)  # pyright: ignore[reportAttributeAccessIssue, reportOperatorIssue]
        return sum(nonzero, axis=a, keepdims=keepdims)
    if abs(ord) != _INF:
        return _ops.NormP.apply(x, axis=a, keepdims=keepdims, p=float(ord))
    if x.shape[a] == 0:
        if ord > 0:  # NumPy 2: the largest |x| of nothing is 0 (a sum gives that shape)  # pyright: ignore[reportOperatorIssue]
            return sum(_abs(x), axis=a, keepdims=keepdims)
        raise ValueError(
            f"norm: ord={ord!r} takes a min over axis {a}, which is empty (shape {x.shape})"
        )
    reduce = max if ord > 0 else min  # pyright: ignore[reportOperatorIssue]
    return reduce(_abs(x), axis=a, keepdims=keepdims)


def _spectral_norm(x, ord, row, col, keepdims):  # noqa: A002
    """Matrix norms from the singular values: largest (2), smallest (-2) or their sum
    ('nuc'); gradient ``U diag(g) Vh`` through the differentiable SVD."""
    nd = x.ndim
    order = [i for i in range(nd) if i not in (row, col)] + [row, col]
    s: Tensor = _ops.Svd.api(_ns.transpose(x, tuple(order)), full_matrices=False,  # pyright: ignore[reportAssignmentType]
                             compute_uv=False)  # the singular values alone
    if s.shape[-1] == 0:
        if ord == -2:
            raise ValueError(
                f"norm: ord=-2 takes the smallest singular value of an empty matrix "
                f"(shape {x.shape}), which has none"
            )
        out = sum(s, axis=-1)  # NumPy 2: 0 for an empty matrix
    elif ord == 2:
        out = max(s, axis=-1)
    elif ord == -2:
        out = min(s, axis=-1)
    else:
        out = sum(s, axis=-1)
    if keepdims:  # size-1 axes where the matrix axes were
        out = _ns.reshape(out, tuple(1 if i in (row, col) else n for i, n in enumerate(x.shape)))
    return out


def _matrix_norm(x, ord, row, col, keepdims):  # noqa: A002
    _abs, reshape = _ns.abs, _ns.reshape
    if ord is None or ord in ("fro", "f"):
        return _ops.Norm2.apply(x, axis=(row, col), keepdims=keepdims)
    if ord in (2, -2, "nuc"):
        return _spectral_norm(x, ord, row, col, keepdims)
    if isinstance(ord, str) or ord not in _MATRIX_ORDS:
        raise ValueError(
            f"norm: unsupported matrix norm order ord={ord!r}; use None, 'fro', 1, -1, inf or -inf"
        )
    # ord 1/-1: extremum over columns of column sums; inf/-inf: over rows of row sums.
    summed, over = (row, col) if ord in (1, -1) else (col, row)
    sums = sum(_abs(x), axis=summed, keepdims=True)
    if x.shape[over] == 0:
        if ord < 0:  # pyright: ignore[reportOperatorIssue]
            raise ValueError(
                f"norm: ord={ord!r} takes a min over axis {over}, which is empty "
                f"(shape {x.shape})"
            )
        out = sum(sums, axis=over, keepdims=True)  # NumPy 2: the max of nothing is 0
    else:
        reduce = max if ord > 0 else min  # pyright: ignore[reportOperatorIssue]
        out = reduce(sums, axis=over, keepdims=True)
    if keepdims:
        return out
    return reshape(out, tuple(s for i, s in enumerate(x.shape) if i not in (row, col)))
