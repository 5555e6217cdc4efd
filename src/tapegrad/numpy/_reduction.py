"""Reductions and cumulative ops of ``tapegrad.numpy``, with NumPy's names and arguments.

``axis`` is an int, a tuple of ints or ``None`` (all axes) unless stated otherwise; negative
axes count from the end; ``keepdims=True`` keeps each reduced axis with size 1. Output dtypes
follow NumPy. Each function checks its arguments before doing any work (through the op's
``output_shape``), so errors name the function, the axis and the Tensor's shape.
"""

from __future__ import annotations

import numpy as _np

from tapegrad import ops as _ops
from tapegrad.numpy._core import _install_methods, _tensor
from tapegrad.ops.reduction import normalize_axis as _normalize_axis
from tapegrad.tensor import Tensor

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


def _apply(op, x, real=False, **params):
    x = _tensor(x)
    if real and x.dtype.kind == "c":
        raise TypeError(f"{op.oper}: complex inputs are not supported (got dtype {x.dtype})")
    return op.apply(x, **params)  # bad axes: forward raises, apply explains via output_shape


def sum(x, axis=None, keepdims=False) -> Tensor:  # noqa: A001
    """Sum over ``axis``.

    Args:
        x: Tensor of shape ``(d_0, ..., d_{n-1})``, any numeric dtype.
        axis: Axis or tuple of axes to reduce; ``None`` reduces all axes.
        keepdims: Keep reduced axes with size 1.

    Returns:
        Tensor of the reduced shape; dtype as NumPy's ``sum`` (booleans and small integers
        promote to int64). The sum over an empty axis is 0.

    Raises:
        ValueError: if an axis is out of range or repeated, naming it and ``x.ndim``.
        TypeError: if ``axis`` is not None, an int or a tuple of ints.
    """
    return _apply(_ops.Sum, x, axis=axis, keepdims=keepdims)


def mean(x, axis=None, keepdims=False) -> Tensor:
    """Arithmetic mean over ``axis`` (see :func:`sum` for ``axis`` and ``keepdims``).

    Returns:
        Tensor of the reduced shape; floating inputs keep their dtype, integers give float64.

    Raises:
        ValueError: if an axis is out of range, or a reduced axis has size 0 (the mean of an
            empty set is undefined; NumPy would return NaN with a warning).
    """
    return _apply(_ops.Mean, x, axis=axis, keepdims=keepdims)


def prod(x, axis=None, keepdims=False) -> Tensor:
    """Product over ``axis`` (see :func:`sum`); the product over an empty axis is 1.

    The gradient is the product of the other elements of each slice, computed without
    division, so it is exact when ``x`` holds zeros (at every order).

    Raises:
        ValueError: if an axis is out of range or repeated.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> tg.grad(tnp.prod)(tg.Tensor([2.0, 0.0, 4.0]))
        Tensor([0., 8., 0.], dtype=float32)
    """
    return _apply(_ops.Prod, x, axis=axis, keepdims=keepdims)


def max(x, axis=None, keepdims=False) -> Tensor:  # noqa: A001
    """Maximum over ``axis`` (NumPy ``amax``; NaN propagates).

    Gradient convention at ties: the cotangent is split equally among the tied maximal
    elements (as for ``maximum``).

    Args:
        x: Tensor of shape ``(d_0, ..., d_{n-1})``.
        axis: Axis or tuple of axes; ``None`` reduces all axes.
        keepdims: Keep reduced axes with size 1.

    Returns:
        Tensor of ``x``'s dtype with the reduced shape.

    Raises:
        ValueError: if an axis is out of range, or a reduced axis has size 0 (as NumPy).
        TypeError: for complex inputs (they have no order).

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> x = tg.Tensor([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]])
        >>> tnp.max(x, axis=1)
        Tensor([3., 2.], dtype=float32)
        >>> tg.grad(lambda v: tnp.max(v, axis=1).sum())(x)
        Tensor([[0. , 0.5, 0.5],
                [1. , 0. , 0. ]], dtype=float32)
    """
    return _apply(_ops.Max, x, real=True, axis=axis, keepdims=keepdims)


def min(x, axis=None, keepdims=False) -> Tensor:  # noqa: A001
    """Minimum over ``axis`` (see :func:`max`); ties split the gradient equally.

    Raises:
        ValueError: if an axis is out of range, or a reduced axis has size 0.
        TypeError: for complex inputs.
    """
    return _apply(_ops.Min, x, real=True, axis=axis, keepdims=keepdims)


amax = max
amin = min


def argmax(x, axis=None, keepdims=False) -> Tensor:
    """Indices of the maximum along ``axis`` (NumPy semantics), an int64 Tensor, no gradient.

    Args:
        x: Tensor of shape ``(d_0, ..., d_{n-1})``.
        axis: One int, or ``None`` for the index into the flattened Tensor.
        keepdims: Keep the reduced axis (all axes for ``axis=None``) with size 1.

    Returns:
        int64 Tensor; the first occurrence at ties.

    Raises:
        ValueError: if the axis is out of range, or the reduced axis (the whole Tensor for
            ``None``) is empty.
        TypeError: if ``axis`` is a tuple (NumPy takes one axis).
    """
    return _apply(_ops.ArgMax, x, axis=axis, keepdims=keepdims)


def argmin(x, axis=None, keepdims=False) -> Tensor:
    """Indices of the minimum along ``axis`` (see :func:`argmax`); no gradient."""
    return _apply(_ops.ArgMin, x, axis=axis, keepdims=keepdims)


def var(x, axis=None, ddof=0, keepdims=False) -> Tensor:
    """Variance ``sum((x - mean)**2) / (n - ddof)`` over ``axis`` (n elements per slice).

    Args:
        x: Real Tensor of shape ``(d_0, ..., d_{n-1})``.
        axis: Axis or tuple of axes; ``None`` reduces all axes.
        ddof: Delta degrees of freedom (0: population variance, 1: unbiased estimate).
        keepdims: Keep reduced axes with size 1.

    Returns:
        Tensor of the reduced shape; floating inputs keep their dtype, integers give float64.

    Raises:
        ValueError: if an axis is out of range, a reduced axis has size 0, or ``ddof >= n``
            (NumPy would warn and return inf or NaN).
        TypeError: for complex inputs.
    """
    return _apply(_ops.Var, x, real=True, axis=axis, ddof=ddof, keepdims=keepdims)


def std(x, axis=None, ddof=0, keepdims=False) -> Tensor:
    """Standard deviation ``sqrt(var(x, axis, ddof))`` (see :func:`var`).

    Gradient convention at zero spread (all reduced elements equal, where ``std`` has a kink):
    0, the minimum-norm subgradient; never NaN.

    Raises:
        ValueError: as :func:`var`.
        TypeError: for complex inputs.
    """
    return _apply(_ops.Std, x, real=True, axis=axis, ddof=ddof, keepdims=keepdims)


def logsumexp(x, axis=None, keepdims=False) -> Tensor:
    """Numerically stable ``log(sum(exp(x)))`` along ``axis``.

    Computed as ``m + log1p(sum_{i != k} exp(x_i - m))`` with ``m = x_k = max(x)``: no
    overflow for any finite input, accurate to a few ulps. The gradient is ``softmax(x)``
    along ``axis``, computed as ``exp(x - out)`` (never overflows).

    Args:
        x: Real Tensor of shape ``(..., n)``; float32 or float64 (integers give float64).
        axis: Axis or tuple of axes to reduce; ``None`` reduces all axes.
        keepdims: Keep reduced axes with size 1.

    Returns:
        Tensor of ``x``'s floating dtype with the reduced shape; nats if ``x`` holds
        log-probabilities. ``-inf`` for an all ``-inf`` slice (zero gradient there) and for an
        empty reduction.

    Raises:
        ValueError: if an axis is out of range or repeated.
        TypeError: for complex inputs.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> x = tg.Tensor([1e4, 1e4])
        >>> tnp.logsumexp(x)  # 1e4 + log(2); exp(1e4) alone would overflow
        Tensor(10000.693, dtype=float32)
        >>> tg.grad(tnp.logsumexp)(x)
        Tensor([0.5, 0.5], dtype=float32)

    References:
        Blanchard, Higham and Higham, "Accurately computing the log-sum-exp and
        softmax functions", IMA J. Numer. Anal. 41(4), 2021.
    """
    return _apply(_ops.LogSumExp, x, real=True, axis=axis, keepdims=keepdims)


_INF = float("inf")
_VECTOR_ORDS = (None, 0, 1, 2, _INF, -_INF)
_MATRIX_ORDS = (None, "fro", 1, -1, _INF, -_INF)


def norm(x, ord=None, axis=None, keepdims=False) -> Tensor:  # noqa: A002
    """Vector or matrix norm, as ``numpy.linalg.norm`` (re-exported as ``tnp.linalg.norm``).

    Which norm:
        - ``axis=None``: with ``ord=None`` the 2-norm of the flattened Tensor; otherwise ``x``
          must be 1-D (vector norm) or 2-D (matrix norm).
        - ``axis`` an int: vector norms along it. ``ord``: ``None`` or 2 (Euclidean),
          1 (``sum |x|``), ``inf`` (``max |x|``), ``-inf`` (``min |x|``), 0 (the number of
          nonzero entries; zero gradient).
        - ``axis`` a pair ``(row, col)``: matrix norms. ``ord``: ``None`` or ``'fro'``
          (Frobenius), 1 / -1 (max / min over columns of the absolute column sums),
          ``inf`` / ``-inf`` (max / min over rows of the absolute row sums), 2 / -2 (largest /
          smallest singular value), ``'nuc'`` (sum of the singular values).

    Gradient conventions (never NaN): the 2-norm and Frobenius norm have gradient 0 at
    ``x = 0``; ``|x|`` has gradient ``sign(x)`` (0 at 0); max/min ties split the gradient
    equally. The singular-value norms have gradient ``U diag(g) Vh`` through
    :func:`tapegrad.numpy.linalg.svd` (Townsend 2016); a repeated largest (smallest) singular
    value splits it equally.

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
    """
    x = _tensor(x)
    if x.dtype.kind == "c":
        raise TypeError(f"norm: complex inputs are not supported (got dtype {x.dtype})")
    if x.dtype.kind != "f":
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
    from tapegrad.numpy._elementwise import abs as _abs

    if ord is None or (not isinstance(ord, str) and ord == 2):
        return _ops.Norm2.apply(x, axis=a, keepdims=keepdims)
    if isinstance(ord, str) or ord not in _VECTOR_ORDS:
        raise ValueError(
            f"norm: unsupported vector norm order ord={ord!r}; use None, 0, 1, 2, inf or -inf"
        )
    if ord == 1:
        return sum(_abs(x), axis=a, keepdims=keepdims)
    if ord == 0:  # number of nonzero entries: piecewise constant, zero gradient
        nonzero = _ops.NotEqual.apply(x, 0).astype(x.dtype)
        return sum(nonzero, axis=a, keepdims=keepdims)
    if x.shape[a] == 0:
        if ord > 0:  # NumPy 2: the largest |x| of nothing is 0 (a sum gives that shape)
            return sum(_abs(x), axis=a, keepdims=keepdims)
        raise ValueError(
            f"norm: ord={ord!r} takes a min over axis {a}, which is empty (shape {x.shape})"
        )
    reduce = max if ord > 0 else min
    return reduce(_abs(x), axis=a, keepdims=keepdims)


def _spectral_norm(x, ord, row, col, keepdims):  # noqa: A002
    """Matrix norms from the singular values: largest (2), smallest (-2) or their sum
    ('nuc'); gradient ``U diag(g) Vh`` through the differentiable SVD."""
    from tapegrad.numpy._linalg import svdvals
    from tapegrad.numpy._shape import expand_dims, moveaxis

    s = svdvals(moveaxis(x, (row, col), (-2, -1)))
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
    if keepdims:
        out = expand_dims(expand_dims(out, -1), -1)
        out = moveaxis(out, (-2, -1), (row, col)) if x.ndim > 2 else out
    return out


def _matrix_norm(x, ord, row, col, keepdims):  # noqa: A002
    from tapegrad.numpy._elementwise import abs as _abs
    from tapegrad.numpy._shape import reshape

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
        if ord < 0:
            raise ValueError(
                f"norm: ord={ord!r} takes a min over axis {over}, which is empty "
                f"(shape {x.shape})"
            )
        out = sum(sums, axis=over, keepdims=True)  # NumPy 2: the max of nothing is 0
    else:
        reduce = max if ord > 0 else min
        out = reduce(sums, axis=over, keepdims=True)
    if keepdims:
        return out
    return reshape(out, tuple(s for i, s in enumerate(x.shape) if i not in (row, col)))


def _flat_or(x, axis, op):
    from tapegrad.numpy._shape import reshape

    x = _tensor(x)
    if axis is None:
        return reshape(x, (x.size,)), 0
    if x.ndim == 0:
        raise ValueError(f"{op}: a 0-d Tensor has no axis {axis}; use axis=None")
    return x, axis


def cumsum(x, axis=None) -> Tensor:
    """Cumulative sum along ``axis`` (an int), or of the flattened Tensor for ``None``.

    Returns:
        Tensor of ``x``'s shape (1-D for ``axis=None``); dtype as NumPy's ``cumsum``.

    Raises:
        ValueError: if ``axis`` is out of range.
        TypeError: if ``axis`` is not an int or None.
    """
    x, axis = _flat_or(x, axis, "cumsum")
    return _apply(_ops.CumSum, x, axis=axis)


def cumprod(x, axis=None) -> Tensor:
    """Cumulative product along ``axis`` (an int), or of the flattened Tensor for ``None``.

    The gradient is exact with zeros in ``x``, at every order (no division by ``x``); it
    costs ``O(n log n)`` per slice of length ``n``.

    Raises:
        ValueError: if ``axis`` is out of range.
        TypeError: if ``axis`` is not an int or None.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> x = tg.Tensor([2.0, 0.0, 3.0])
        >>> tnp.cumprod(x)
        Tensor([2., 0., 0.], dtype=float32)
        >>> tg.grad(lambda v: tnp.cumprod(v).sum())(x)  # exact despite the zero
        Tensor([1., 8., 0.], dtype=float32)
    """
    x, axis = _flat_or(x, axis, "cumprod")
    return _apply(_ops.CumProd, x, axis=axis)


def any(x, axis=None, keepdims=False) -> Tensor:  # noqa: A001
    """Whether any element over ``axis`` is nonzero; a boolean Tensor with no gradient."""
    return _apply(_ops.Any, x, axis=axis, keepdims=keepdims)


def all(x, axis=None, keepdims=False) -> Tensor:  # noqa: A001
    """Whether all elements over ``axis`` are nonzero; a boolean Tensor with no gradient."""
    return _apply(_ops.All, x, axis=axis, keepdims=keepdims)


_install_methods(
    {
        "sum": sum,
        "mean": mean,
        "prod": prod,
        "max": max,
        "min": min,
        "argmax": argmax,
        "argmin": argmin,
        "var": var,
        "std": std,
        "logsumexp": logsumexp,
        "cumsum": cumsum,
        "cumprod": cumprod,
        "any": any,
        "all": all,
    }
)
