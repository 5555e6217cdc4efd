"""Linear algebra of ``tapegrad.numpy``: matmul, dot, vdot, inner, outer, tensordot, einsum,
and ``svdvals`` (exported from :mod:`tapegrad.numpy.linalg`).

``matmul`` and ``einsum`` are the public functions of the :class:`~tapegrad.ops.MatMul` and
:class:`~tapegrad.ops.Einsum` primitives (defined with them in :mod:`tapegrad.ops.linalg`, as
are ``inv``, ``solve``, ``det``, ``slogdet``, ``cholesky`` and ``svd``, which
:mod:`tapegrad.numpy.linalg` exports); the other products here are compositions of those
primitives with reshapes and transposes, so they differentiate to any order. Integer operands
are allowed in the forward pass (NumPy's dtype promotion); only floating inputs receive
gradients.
"""

from __future__ import annotations

import math
import operator

import numpy as _np
from numpy.exceptions import AxisError

from tapegrad import ops as _ops
from tapegrad.core import dtypes as _tg_dtypes
from tapegrad.core.tensor import Tensor
from tapegrad.numpy import _creation, _reduction, _shape
from tapegrad.numpy._core import _tensor
from tapegrad.ops._registry import bool_arg
from tapegrad.ops._registry import ns as _ns
from tapegrad.ops.reduction import normalize_axis as _normalize_axis

_LinAlgError = _np.linalg.LinAlgError

__all__ = [
    "vecdot",
    "matrix_transpose","matmul", "dot", "vdot", "inner", "outer", "tensordot", "einsum"]

matmul = _ns.matmul
einsum = _ns.einsum


# -- products -------------------------------------------------------------------------------
def _reshape(x, shape):
    shape = tuple(shape)
    return x if x.shape == shape else _ops.Reshape.apply(x, shape)


def _transpose(x, axes):
    axes = tuple(axes)
    return x if axes == tuple(range(x.ndim)) else _ops.Transpose.apply(x, axes=axes)


def _axes_list(ax, ndim: int, which: str, shapes) -> list:
    ax = [ax] if isinstance(ax, (int, _np.integer)) else list(ax)
    out = []
    for v in ax:
        if not isinstance(v, (int, _np.integer)) or isinstance(v, bool):
            raise TypeError(f"tensordot: axes must be ints, got {v!r}")
        if not -ndim <= v < ndim:
            raise AxisError(
                f"tensordot: axis {v} is out of range for {which} with ndim {ndim} (shapes "
                f"{shapes[0]} and {shapes[1]})"
            )
        out.append(int(v) % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"tensordot: repeated axis in {ax} for {which}")
    return out


def tensordot(a, b, axes=2) -> Tensor:
    """Sum products over the given axes of ``a`` and ``b`` (NumPy ``tensordot``).

    Args:
        a: Tensor of any shape.
        b: Tensor of any shape.
        axes: An int ``N`` (the last ``N`` axes of ``a`` with the first ``N`` of ``b``) or a
            pair ``(axes_a, axes_b)`` of ints or equal-length sequences of ints.

    Returns:
        Tensor of shape ``a``'s free axes + ``b``'s free axes (in order); implemented as a
        transpose, a reshape and one matmul.

    Raises:
        ValueError: if contracted dimensions differ (naming both shapes), ``axes`` is negative
            or larger than an operand's ndim, or an axis is out of range or repeated.
        TypeError: if ``axes`` is not an int or a pair.
    """
    a, b = _tensor(a), _tensor(b)
    shapes = (a.shape, b.shape)
    if isinstance(axes, (int, _np.integer)) and not isinstance(axes, bool):
        n = int(axes)
        if n < 0 or n > a.ndim or n > b.ndim:
            raise ValueError(
                f"tensordot: axes={n} must be between 0 and both ndims (shapes {a.shape} and "
                f"{b.shape})"
            )
        ax_a, ax_b = list(range(a.ndim - n, a.ndim)), list(range(n))
    else:
        try:
            ax_a, ax_b = axes  # pyright: ignore[reportAttributeAccessIssue, reportGeneralTypeIssues]
        except (TypeError, ValueError):
            raise TypeError(
                f"tensordot: axes must be an int or a pair of axis sequences, got {axes!r}"
            ) from None
        ax_a = _axes_list(ax_a, a.ndim, "a", shapes)
        ax_b = _axes_list(ax_b, b.ndim, "b", shapes)
        if len(ax_a) != len(ax_b):
            raise ValueError(
                f"tensordot: axes {axes!r} name {len(ax_a)} axes of a but {len(ax_b)} of b"
            )
    for i, j in zip(ax_a, ax_b):
        if a.shape[i] != b.shape[j]:
            raise ValueError(
                f"tensordot: shape mismatch: a{a.shape} axis {i} has size {a.shape[i]} but "
                f"b{b.shape} axis {j} has size {b.shape[j]}"
            )
    free_a = [i for i in range(a.ndim) if i not in ax_a]
    free_b = [j for j in range(b.ndim) if j not in ax_b]
    k = math.prod(a.shape[i] for i in ax_a)
    out_shape = tuple(a.shape[i] for i in free_a) + tuple(b.shape[j] for j in free_b)
    at = _reshape(_transpose(a, free_a + ax_a), (math.prod(a.shape[i] for i in free_a), k))
    bt = _reshape(_transpose(b, ax_b + free_b), (k, math.prod(b.shape[j] for j in free_b)))
    return _reshape(_ops.MatMul.apply(at, bt), out_shape)


def dot(a, b) -> Tensor:
    """NumPy ``dot``: a product for 0-d operands, the inner product of two vectors, a matrix
    product for 2-D, and for N-D ``a`` and M-D ``b`` (M >= 2) the sum over ``a``'s last axis and
    ``b``'s second-to-last: ``dot(a, b)[i, j, k, m] = sum(a[i, j, :] * b[k, :, m])``.

    Args:
        a, b: Tensors (or arrays/numbers).

    Returns:
        Tensor of shape ``a.shape[:-1] + b.shape[:-2] + b.shape[-1:]`` (1-D ``b``:
        ``a.shape[:-1]``).

    Raises:
        ValueError: if the summed dimensions differ, naming both shapes.
    """
    a, b = _tensor(a), _tensor(b)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    kb = 0 if b.ndim == 1 else b.ndim - 2
    if a.shape[-1] != b.shape[kb]:
        raise ValueError(
            f"dot: shapes {a.shape} and {b.shape} are not aligned: {a.shape[-1]} (last dim of "
            f"a) != {b.shape[kb]} (dim {kb} of b)"
        )
    if b.ndim == 1 or (a.ndim <= 2 and b.ndim == 2):
        return _ops.MatMul.apply(a, b)
    return tensordot(a, b, axes=([a.ndim - 1], [kb]))  # pyright: ignore[reportArgumentType]


def vdot(a, b) -> Tensor:
    """Dot product of the flattened operands with the first one conjugated (NumPy ``vdot``):
    ``sum(conj(a.ravel()) * b.ravel())``, a 0-d Tensor.

    Complex operands follow JAX's convention (the conjugation is part of the function):
    ``grad(lambda a: real(vdot(a, b)))(a)`` is ``conj(b)``.

    Raises:
        ValueError: if the sizes differ, naming both shapes.
    """
    a, b = _tensor(a), _tensor(b)
    if a.size != b.size:
        raise ValueError(
            f"vdot: operands must have the same number of elements, got shapes {a.shape} "
            f"({a.size}) and {b.shape} ({b.size})"
        )
    if a.dtype.kind == "c":
        a = _ns.conj(a)
    return _ops.MatMul.apply(_reshape(a, (a.size,)), _reshape(b, (b.size,)))


def inner(a, b) -> Tensor:
    """Sum of products over the last axes (NumPy ``inner``); a product if either is 0-d.

    Returns:
        Tensor of shape ``a.shape[:-1] + b.shape[:-1]``.

    Raises:
        ValueError: if the last dimensions differ, naming both shapes.
    """
    a, b = _tensor(a), _tensor(b)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(
            f"inner: last dimensions of shapes {a.shape} and {b.shape} differ "
            f"({a.shape[-1]} != {b.shape[-1]})"
        )
    return tensordot(a, b, axes=([a.ndim - 1], [b.ndim - 1]))  # pyright: ignore[reportArgumentType]


def outer(a, b) -> Tensor:
    """Outer product of the flattened operands: ``out[i, j] = a.ravel()[i] * b.ravel()[j]``.

    Returns:
        Tensor of shape ``(a.size, b.size)``.
    """
    a, b = _tensor(a), _tensor(b)
    return _reshape(a, (a.size, 1)) * _reshape(b, (1, b.size))


# -- tapegrad.numpy.linalg ------------------------------------------------------------------
# Composites of the primitives above and of tapegrad.ops.linalg's (Svd, Eig, Eigh, Qr, Pinv,
# Inv, Solve, Det): each differentiates through them, to any order.
_INF = float("inf")


def _stop(x):
    return _ops.StopGradient.apply(x) if x.is_traced else x


def _floating(x, op):
    """``x`` with an integer or boolean dtype converted to float64 (NumPy's linalg rule)."""
    if x.dtype.kind in "fcV":
        return x
    if x.dtype.kind not in "iub":
        raise TypeError(f"{op}: unsupported dtype {x.dtype} (shape {x.shape}); expected numbers")
    return x.astype(_np.float64)


def _at_least_2d(x, op):
    if x.ndim < 2:
        raise _LinAlgError(
            f"{op}: {x.ndim}-dimensional array given (shape {x.shape}); the array must be at "
            "least two-dimensional (a (batch of) matrices (..., m, n))"
        )


def _square(x, op):
    _at_least_2d(x, op)
    if x.shape[-1] != x.shape[-2]:
        raise _LinAlgError(
            f"{op}: last 2 dimensions of the array must be square, got shape {x.shape}"
        )


def svdvals(a) -> Tensor:
    """Singular values of ``(..., m, n)`` matrices, real, descending, shape
    ``(..., min(m, n))`` (NumPy 2 ``linalg.svdvals``); real or complex ``a``.

    Gradient ``U^* diag(g) V^T`` (Townsend 2016, JAX's convention), defined everywhere, repeated
    and zero singular values included.

    Raises:
        See :func:`svd`.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.linalg.svdvals(tnp.asarray([[0.0, 2.0], [1.0, 0.0]]))
        Tensor([2., 1.], dtype=float32)
    """
    return _ops.Svd.api(a, full_matrices=False, compute_uv=False)  # pyright: ignore[reportReturnType]


def eigvals(a) -> Tensor:
    """Eigenvalues of general square matrices (NumPy ``linalg.eigvals``), complex.

    Args:
        a: Tensor of shape ``(..., n, n)``, real or complex (integers become float64).

    Returns:
        Complex Tensor of shape ``(..., n)`` in LAPACK's order (complex64 for float32 and
        complex64 input, complex128 otherwise). Unlike NumPy, also complex when every
        eigenvalue of a real matrix is real (as JAX: dtypes may not depend on values).

    Gradient: ``V^{-T} diag(g) V^T`` (Giles 2008, sec. 3.1), real for real ``a``; finite at
    repeated eigenvalues whose eigenvectors are independent (see
    :func:`tapegrad.numpy.linalg.eig`); at a defective matrix, where the eigenvalues are not
    differentiable, it is huge or inf/NaN (``LinAlgError`` if the computed eigenvectors are
    exactly dependent).

    Raises:
        ValueError: if ``a`` is not ``(..., n, n)``.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.linalg.eigvals(tnp.asarray([[2.0, 0.0], [0.0, 3.0]]))
        Tensor([2.+0.j, 3.+0.j], dtype=complex64)
    """
    return _ops.Eig.api(a).eigenvalues


def eigvalsh(a, UPLO="L") -> Tensor:  # noqa: N803 - NumPy's name
    """Eigenvalues of Hermitian (real symmetric) matrices, ascending (NumPy
    ``linalg.eigvalsh``), computed from the Hermitian part ``(a + a^H) / 2`` as
    :func:`eigh` (JAX's convention): NumPy's values for a Hermitian ``a``, and for any ``a``
    the function whose gradient tapegrad computes (NumPy reads one triangle instead).

    Args:
        a: Tensor of shape ``(..., n, n)``, real or complex (integers become float64).
        UPLO: ``'L'`` or ``'U'`` (NumPy's; the Hermitian part has equal triangles).

    Returns:
        Real Tensor of shape ``(..., n)``.

    Gradient: ``sym(V^* diag(g) V^T)`` (Hermitian; Giles 2008), finite everywhere, repeated
    eigenvalues included (the eigenvalues are continuous there; at a crossing the gradient is
    that of the sorted eigenvalue's branch chosen by LAPACK's eigenvectors).

    Raises:
        ValueError: if ``a`` is not ``(..., n, n)`` or ``UPLO`` is invalid.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.linalg.eigvalsh(tnp.asarray([[2.0, 1.0], [1.0, 2.0]]))
        Tensor([1., 3.], dtype=float32)
    """
    return _ops.Eigh.api(a, UPLO=UPLO).eigenvalues


def trace(x, /, *, offset=0, dtype=None) -> Tensor:
    """Sum of the diagonal of the last two axes (NumPy 2 ``linalg.trace``; ``numpy.trace``
    uses the first two axes instead).

    Args:
        x: Tensor of shape ``(..., m, n)``.
        offset: Which diagonal: ``x[..., i, i + offset]``.
        dtype: The accumulator's and result's dtype (NumPy's ``sum`` rules when ``None``:
            small integers widen to int64, unsigned ones to uint64).

    Returns:
        Tensor of shape ``(...)``; dtype ``dtype``, or as NumPy's ``sum``.

    Raises:
        ValueError: if ``x`` has fewer than 2 dimensions.
    """
    x = _tensor(x)
    if x.ndim < 2:
        raise ValueError(f"linalg.trace: input must be at least 2-dimensional, got {x.shape}")
    return _shape.trace(x, offset, -2, -1, dtype=dtype)


def diagonal(x, /, *, offset=0) -> Tensor:
    """The diagonal ``x[..., i, i + offset]`` of the last two axes (NumPy 2
    ``linalg.diagonal``).

    Returns:
        Tensor of shape ``(..., k)``.

    Raises:
        ValueError: if ``x`` has fewer than 2 dimensions.
    """
    x = _tensor(x)
    if x.ndim < 2:
        raise ValueError(
            f"linalg.diagonal: input must be at least 2-dimensional, got shape {x.shape}"
        )
    return _shape.diagonal(x, offset, -2, -1)


def _vector_axis(x1, x2, axis, op):
    """``x1``, ``x2`` with ``axis`` (an axis of each) moved last, and the axis' length."""
    x1, x2 = _tensor(x1), _tensor(x2)
    for x, name in ((x1, "x1"), (x2, "x2")):
        if x.ndim == 0 or not -x.ndim <= axis < x.ndim:
            raise AxisError(
                f"{op}: axis {axis} is out of range for {name} of shape {x.shape}"
            )
    a = _shape.moveaxis(x1, axis, -1) if axis not in (-1, x1.ndim - 1) else x1
    b = _shape.moveaxis(x2, axis, -1) if axis not in (-1, x2.ndim - 1) else x2
    try:
        _np.broadcast_shapes(a.shape[:-1], b.shape[:-1])
    except ValueError:
        raise ValueError(
            f"{op}: shapes {x1.shape} and {x2.shape} do not broadcast (apart from axis {axis})"
        ) from None
    return a, b


def cross(x1, x2, /, *, axis=-1) -> Tensor:
    """Cross product of 3-element vectors along ``axis`` (NumPy 2 ``linalg.cross``), with
    broadcasting of the other dimensions.

    Returns:
        Tensor of the broadcast shape, the vectors along ``axis``.

    Raises:
        ValueError: if either operand does not have length 3 along ``axis`` (``numpy.cross``
            also takes 2-vectors; ``linalg.cross`` does not), or the shapes do not broadcast.
    """
    a, b = _vector_axis(x1, x2, axis, "cross")
    if a.shape[-1] != 3 or b.shape[-1] != 3:
        raise ValueError(
            "cross: both inputs must be (arrays of) 3-dimensional vectors along axis "
            f"{axis}, got shapes {_tensor(x1).shape} and {_tensor(x2).shape}"
        )
    a0, a1, a2 = (a[..., i] for i in range(3))
    b0, b1, b2 = (b[..., i] for i in range(3))
    out = _shape.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)
    return out if axis in (-1, out.ndim - 1) else _shape.moveaxis(out, -1, axis)


def norm(x, ord=None, axis=None, keepdims=False) -> Tensor:  # noqa: A002
    """Vector or matrix norm (NumPy ``linalg.norm``), for real and complex ``x``.

    Real input: :func:`tapegrad.numpy.norm` (every ``ord``, the gradient conventions at
    kinks). Complex input: the Euclidean and Frobenius norms are the norm of the real and
    imaginary parts together (smooth wherever the norm is nonzero, gradient 0 at ``x = 0``);
    ``ord=2, -2, 'nuc'`` of matrices use the complex singular values; every other ``ord`` is
    the real norm of ``abs(x)`` (as NumPy computes it).

    Args:
        x: Tensor; integers become float64.
        ord: As NumPy: vectors: ``None``/2, 1, ``inf``, ``-inf``, 0, any real ``p``;
            matrices: ``None``/``'fro'``, ``'nuc'``, 1, -1, 2, -2, ``inf``, ``-inf``.
        axis: None, an int (vector norms) or a pair of ints (matrix norms).
        keepdims: Keep the normed axes with size 1.

    Returns:
        Real Tensor (float32 for float32/complex64 input, float64 otherwise).

    Gradient: for complex ``x`` JAX's convention (``grad`` of the 2-norm is ``x / norm``);
    matrix 2/-2/nuc through :func:`svd` (Townsend 2016).

    Raises:
        ValueError: for an unsupported ``ord`` or bad ``axis`` (see :func:`tapegrad.numpy.norm`).

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.linalg.norm(tnp.asarray([3 + 4j, 0j]))
        Tensor(5., dtype=float32)
    """
    keepdims = bool_arg(keepdims, "norm", "keepdims")
    x = _tensor(x)
    if x.dtype.kind != "c":
        return _reduction.norm(x, ord=ord, axis=axis, keepdims=keepdims)
    nd = x.ndim
    if axis is None and ord is None:  # the 2-norm of everything
        parts = _shape.stack([_ns.real(x), _ns.imag(x)], axis=-1)
        out = _ops.Norm2.apply(parts, axis=None, keepdims=keepdims)
        return _shape.reshape(out, out.shape[:-1]) if keepdims else out
    if axis is None:
        axes = tuple(range(nd)) if nd in (1, 2) else None
    elif isinstance(axis, (tuple, list)):
        axes = tuple(axis)
    else:
        axes = (axis,)
    if axes is None or len(axes) not in (1, 2):
        return _reduction.norm(_ns.abs(x), ord=ord, axis=axis, keepdims=keepdims)  # its error
    axes = tuple(_normalize_axis(a, nd, "norm")[0] for a in axes)
    matrix = len(axes) == 2
    two = ord is None or (not isinstance(ord, str) and ord == 2 and not matrix) or (
        matrix and ord in ("fro", "f"))
    if two and len(set(axes)) == len(axes):
        parts = _shape.stack([_ns.real(x), _ns.imag(x)], axis=-1)
        out = _ops.Norm2.apply(parts, axis=axes + (nd,), keepdims=keepdims)
        return _shape.reshape(out, out.shape[:-1]) if keepdims else out
    if matrix and ord in (2, -2, "nuc") and axes[0] != axes[1]:
        return _reduction._spectral_norm(x, ord, axes[0], axes[1], keepdims)
    return _reduction.norm(_ns.abs(x), ord=ord, axis=axis, keepdims=keepdims)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2) -> Tensor:  # noqa: A002
    """Vector norm over ``axis`` (NumPy 2 ``linalg.vector_norm``): ``axis=None`` flattens,
    a tuple of axes norms their elements together.

    Args:
        x: Real or complex Tensor.
        axis: None, an int or a tuple of ints.
        keepdims: Keep the normed axes with size 1.
        ord: 2 (default), 1, ``inf``, ``-inf``, 0 or any real ``p`` (see :func:`norm`).

    Returns:
        Real Tensor with the normed axes removed (or size 1).

    Raises:
        ValueError: for a bad ``ord`` or an axis out of range or repeated.
    """
    keepdims = bool_arg(keepdims, "vector_norm", "keepdims")
    x = _floating(_tensor(x), "vector_norm")
    shape = x.shape
    if axis is None:
        y, ax = _shape.reshape(x, (x.size,)), 0
        axes = tuple(range(x.ndim))
    elif isinstance(axis, (tuple, list)):
        axes = tuple(_normalize_axis(a, x.ndim, "vector_norm")[0] for a in axis)
        if len(set(axes)) != len(axes):
            raise ValueError(f"vector_norm: repeated axis in {axis!r}")
        rest = [i for i in range(x.ndim) if i not in axes]
        y = _ns.transpose(x, axes + tuple(rest))
        y = _shape.reshape(y, (math.prod(shape[i] for i in axes),) + tuple(shape[i] for i in rest))
        ax = 0
    else:
        (ax,) = _normalize_axis(axis, x.ndim, "vector_norm")
        axes = (ax,)
        y = x
    out = norm(y, ord=None if ord == 2 else ord, axis=ax)
    if keepdims:
        out = _shape.reshape(out, tuple(1 if i in axes else n for i, n in enumerate(shape)))
    return out


def matrix_norm(x, /, *, keepdims=False, ord="fro") -> Tensor:  # noqa: A002
    """Matrix norm of the last two axes (NumPy 2 ``linalg.matrix_norm``).

    Args:
        x: Real or complex Tensor of shape ``(..., m, n)``.
        keepdims: Keep the two axes with size 1.
        ord: ``'fro'`` (default), ``'nuc'``, 1, -1, 2, -2, ``inf``, ``-inf`` (see :func:`norm`).

    Returns:
        Real Tensor of shape ``(...)``.

    Raises:
        ValueError: if ``x`` has fewer than 2 dimensions or ``ord`` is not a matrix norm.
    """
    keepdims = bool_arg(keepdims, "matrix_norm", "keepdims")
    x = _floating(_tensor(x), "matrix_norm")
    if x.ndim < 2:
        raise ValueError(
            f"matrix_norm: input must be at least 2-dimensional, got shape {x.shape}"
        )
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def matrix_power(a, n) -> Tensor:
    """``a`` multiplied by itself ``n`` times (NumPy ``linalg.matrix_power``), by repeated
    squaring; ``n = 0`` gives the identity, ``n < 0`` powers of ``inv(a)``.

    Args:
        a: Tensor of shape ``(..., m, m)``.
        n: An integer (any sign).

    Returns:
        Tensor of ``a``'s shape; dtype of ``a`` (of ``inv(a)`` for ``n < 0``).

    Raises:
        TypeError: if ``n`` is not an integer.
        numpy.linalg.LinAlgError: if ``a`` is not (a batch of) square matrices; for ``n < 0``
            if a matrix is singular.
    """
    a = _tensor(a)
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"matrix_power: exponent must be an integer, got {n!r}") from None
    _square(a, "matrix_power")
    if n == 0:
        eye = _creation.eye(a.shape[-1], dtype=a.dtype, device=a.device)
        return _ns.broadcast_to(eye, a.shape)
    if n < 0:
        a, n = _ops.Inv.api(a), -n
    result = None
    z = a
    while True:
        if n & 1:
            result = z if result is None else _ops.MatMul.apply(result, z)
        n >>= 1
        if not n:
            return result  # pyright: ignore[reportReturnType]
        z = _ops.MatMul.apply(z, z)


def matrix_rank(A, tol=None, hermitian=False, *, rtol=None):  # noqa: N803 - NumPy's name
    """Rank of matrices by the SVD: the number of singular values above ``tol`` (NumPy
    ``linalg.matrix_rank``). Not differentiable: piecewise constant, its gradient is zero.

    Args:
        A: Tensor of shape ``(..., m, n)``; for fewer than 2 dimensions the result is
            ``int(not all(A == 0))``, as NumPy.
        tol: Absolute threshold (broadcasting against the batch), or None.
        hermitian: Accepted for NumPy compatibility (the general SVD is used).
        rtol: Relative threshold (times the largest singular value) when ``tol`` is None;
            default ``max(m, n) * eps``.

    Returns:
        int64 Tensor of shape ``(...)`` without gradient (a Python int for 0-d/1-d ``A``).

    Raises:
        ValueError: if both ``tol`` and ``rtol`` are given.
    """
    A = _stop(_floating(_tensor(A), "matrix_rank"))
    if tol is not None and rtol is not None:
        raise ValueError("matrix_rank: `tol` and `rtol` can't be both set.")
    if A.ndim < 2:
        return int(bool(_ns.any(A != 0)))
    s = svdvals(A)
    if s.shape[-1] == 0:
        return _ns.sum(s > 0, axis=-1)
    if tol is None:
        if rtol is None:
            rtol = max(A.shape[-2:]) * _tg_dtypes.finfo(s.dtype).eps
        rtol = _tensor(rtol)
        if rtol.ndim:
            rtol = _shape.expand_dims(rtol, -1)
        tol = _ns.max(s, axis=-1, keepdims=True) * rtol
    else:
        tol = _tensor(tol)
        if tol.ndim:
            tol = _shape.expand_dims(tol, -1)
    return _ns.sum(s > tol, axis=-1)


def cond(x, p=None) -> Tensor:
    """Condition number of matrices in the norm ``p`` (NumPy ``linalg.cond``).

    ``p`` None or 2: ``s_max / s_min`` (singular values; any ``(..., m, n)``); -2:
    ``s_min / s_max``; ``'fro'``, ``'nuc'``, 1, -1, ``inf``, ``-inf``:
    ``norm(x, p) * norm(inv(x), p)`` (square matrices). A singular matrix gives ``inf``, as
    NumPy (detected by an exactly zero determinant, LAPACK's own test).

    Gradient: through :func:`svd` (Townsend 2016) or :func:`inv` and :func:`norm`; at a
    singular matrix (value ``inf``) it is NaN or 0.

    Raises:
        numpy.linalg.LinAlgError: if ``x`` is not at least 2-D, or not square for a ``p``
            other than None, 2, -2.
        ValueError: for an unsupported ``p``.
    """
    x = _floating(_tensor(x), "cond")
    _at_least_2d(x, "cond")
    if p is None or (not isinstance(p, str) and p in (2, -2)):
        s = svdvals(x)
        if s.shape[-1] == 0:
            raise _LinAlgError(f"cond: arrays cannot be empty (shape {x.shape})")
        big, small = s[..., 0], s[..., -1]
        r = small / big if p == -2 else big / small
    else:
        _square(x, "cond")
        if x.shape[-1] == 0:
            raise _LinAlgError(f"cond: arrays cannot be empty (shape {x.shape})")
        singular = _ops.Det.api(_stop(x)) == 0
        eye = _creation.eye(x.shape[-1], dtype=x.dtype, device=x.device)
        safe = _ns.where(_shape.expand_dims(_shape.expand_dims(singular, -1), -1), eye, x)
        r = norm(x, p, axis=(-2, -1)) * norm(_ops.Inv.api(safe), p, axis=(-2, -1))
        r = _ns.where(singular, _INF, r)
    bad = _ns.isnan(r)
    if x.size:
        finite = _ns.logical_not(_ns.any(_ns.isnan(_stop(x)), axis=(-2, -1)))
        bad = _ns.logical_and(bad, finite)
    return _ns.where(bad, _INF, r)


def tensorinv(a, ind=2) -> Tensor:
    """Inverse of an N-d array seen as a linear map (NumPy ``linalg.tensorinv``): with
    ``m = prod(a.shape[:ind]) == prod(a.shape[ind:])``, ``a`` reshaped to ``(m, m)`` is
    inverted and the result has shape ``a.shape[ind:] + a.shape[:ind]``.

    Gradient: that of :func:`inv` (Giles 2008).

    Raises:
        ValueError: if ``ind <= 0``.
        numpy.linalg.LinAlgError: if the reshaped matrix is not square or is singular.
    """
    a = _tensor(a)
    ind = operator.index(ind)
    if ind <= 0:
        raise ValueError(f"tensorinv: ind must be a positive integer, got {ind}")
    rows = math.prod(a.shape[:ind])
    cols = math.prod(a.shape[ind:])
    if rows != cols:
        raise _LinAlgError(
            f"tensorinv: a of shape {a.shape} with ind={ind} is not square as a matrix: "
            f"prod(shape[:ind]) = {rows} but prod(shape[ind:]) = {cols}"
        )
    inv = _ops.Inv.api(_reshape(a, (rows, cols)))
    return _reshape(inv, a.shape[ind:] + a.shape[:ind])


def tensorsolve(a, b, axes=None) -> Tensor:
    """Solve ``tensordot(a, x, axes=x.ndim) = b`` for ``x`` (NumPy ``linalg.tensorsolve``).

    Args:
        a: Tensor of shape ``b.shape + Q`` with ``prod(Q) == prod(b.shape)``.
        b: Tensor.
        axes: Axes of ``a`` to move to the end first (None: none).

    Returns:
        Tensor ``x`` of shape ``Q``.

    Gradient: that of :func:`solve` (Giles 2008).

    Raises:
        numpy.linalg.LinAlgError: if the shapes do not make a square system or it is
            singular.
    """
    a, b = _tensor(a), _tensor(b)
    an = a.ndim
    if axes is not None:
        allaxes = list(range(an))
        for k in axes:
            (k,) = _normalize_axis(k, an, "tensorsolve")
            allaxes.remove(k)
            allaxes.append(k)
        a = _ns.transpose(a, tuple(allaxes))
    q = a.shape[b.ndim:]
    prod = math.prod(q)
    if a.size != prod**2 or b.size != prod:
        raise _LinAlgError(
            f"tensorsolve: a of shape {a.shape} and b of shape {b.shape} do not make a square "
            "system: prod(a.shape[b.ndim:]) must equal prod(a.shape[:b.ndim]) = b.size"
        )
    x = _ops.Solve.api(_reshape(a, (prod, prod)), _reshape(b, (prod,)))
    return _reshape(x, q)


def _chain_order(dims):
    """The optimal parenthesization of a matrix chain with dimensions ``dims`` (Cormen et
    al., 15.2): ``s[i][j]`` is the split of the product ``i..j``."""
    n = len(dims) - 1
    m = [[0] * n for _ in range(n)]
    s = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            m[i][j] = _INF  # pyright: ignore[reportArgumentType, reportCallIssue]
            for k in range(i, j):
                c = m[i][k] + m[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < m[i][j]:
                    m[i][j], s[i][j] = c, k
    return s


def _chain(arrays, s, i, j):
    if i == j:
        return arrays[i]
    k = s[i][j]
    return _ops.MatMul.apply(_chain(arrays, s, i, k), _chain(arrays, s, k + 1, j))


def multi_dot(arrays, *, out=None) -> Tensor:
    """Product of two or more matrices in the cheapest order (NumPy ``linalg.multi_dot``);
    the first may be 1-D (a row vector) and the last 1-D (a column vector).

    Args:
        arrays: Sequence of Tensors: 2-D, except the first and last, which may be 1-D.
        out: Not supported (tapegrad never writes into an array); must be None.

    Returns:
        Tensor: ``(n, m)``, or with the vector ends removed as ``dot`` does.

    Raises:
        ValueError: for fewer than two arrays or mismatched inner dimensions.
        TypeError: if ``out`` is given.
        numpy.linalg.LinAlgError: if an array (other than a vector end) is not 2-D.
    """
    if out is not None:
        raise TypeError("multi_dot: out= is not supported (Tensors are immutable); use the result")
    arrays = [_tensor(a) for a in arrays]
    n = len(arrays)
    if n < 2:
        raise ValueError(f"multi_dot: expecting at least two arrays, got {n}")
    if n == 2:
        return dot(arrays[0], arrays[1])
    first, last = arrays[0].ndim, arrays[-1].ndim
    if first == 1:
        arrays[0] = _reshape(arrays[0], (1, arrays[0].shape[0]))
    if last == 1:
        arrays[-1] = _reshape(arrays[-1], (arrays[-1].shape[0], 1))
    for i, x in enumerate(arrays):
        if x.ndim != 2:
            raise _LinAlgError(
                f"multi_dot: array {i} is {x.ndim}-dimensional (shape {x.shape}); arrays "
                "must be two-dimensional (the first and last may be 1-D)"
            )
    for i in range(n - 1):
        if arrays[i].shape[1] != arrays[i + 1].shape[0]:
            raise ValueError(
                f"multi_dot: shapes {arrays[i].shape} (array {i}) and {arrays[i + 1].shape} "
                f"(array {i + 1}) are not aligned"
            )
    dims = [arrays[0].shape[0]] + [x.shape[1] for x in arrays]
    result = _chain(arrays, _chain_order(dims), 0, n - 1)
    if first == 1 and last == 1:
        return _reshape(result, ())
    if first == 1 or last == 1:
        return _reshape(result, (result.size,))
    return result


def lstsq(a, b, rcond=None):
    """Least-squares solution of ``a @ x = b`` (NumPy ``linalg.lstsq``): the minimum-norm
    ``x`` minimizing ``||b - a x||_2``, for full-rank and rank-deficient ``a``.

    Args:
        a: Tensor of shape ``(m, n)``, real or complex.
        b: Tensor of shape ``(m,)`` or ``(m, k)``.
        rcond: Singular values ``<= rcond * max(s)`` count as zero; None (default):
            ``max(m, n) * eps``.

    Returns:
        ``(x, residuals, rank, s)`` as NumPy: ``x`` of shape ``(n,)`` or ``(n, k)``;
        ``residuals`` the squared 2-norms of the columns of ``b - a x`` (shape ``(k,)``, or
        ``(1,)`` for 1-D ``b``) when ``rank == n < m``, else an empty ``(0,)`` Tensor; ``rank``
        a Python int; ``s`` the singular values of ``a``, descending.

    Gradient: ``x = pinv(a) @ b`` through :func:`pinv` (Golub and Pereyra 1973), exact where
    the rank is locally constant (for rank-deficient ``a``, perturbations that keep it);
    ``residuals`` and ``s`` are differentiable too. Inside ``vmap`` the rank (a Python int)
    cannot be computed: use ``pinv(a) @ b`` there.

    Raises:
        numpy.linalg.LinAlgError: if ``a`` is not 2-D, ``b`` not 1-D or 2-D, or their first
            dimensions differ.
    """
    a, b = _floating(_tensor(a), "lstsq"), _floating(_tensor(b), "lstsq")
    if a.ndim != 2:
        raise _LinAlgError(
            f"lstsq: a must be two-dimensional (m, n), got shape {a.shape}"
        )
    if b.ndim not in (1, 2):
        raise _LinAlgError(f"lstsq: b must be 1-D or 2-D, got shape {b.shape}")
    m, n = a.shape
    if b.shape[0] != m:
        raise _LinAlgError(
            f"lstsq: incompatible dimensions: a {a.shape} and b {b.shape} (b needs {m} rows)"
        )
    rdt = _tg_dtypes.result_type(a.dtype, b.dtype)
    real = _np.zeros((), rdt).real.dtype  # pyright: ignore[reportAttributeAccessIssue]
    if rcond is None:
        rcond = float(_tg_dtypes.finfo(real).eps * max(m, n))
    a_ = a.astype(rdt) if a.dtype != rdt else a
    x = _ops.MatMul.apply(_ops.Pinv.api(a_, rcond=rcond), b)
    s = svdvals(a_)
    rank = 0 if s.shape[-1] == 0 else int(
        _ns.sum(_stop(s) > rcond * _ns.max(_stop(s))))
    if rank == n and m > n:
        r = b - _ops.MatMul.apply(a_, x)
        r2 = _ns.real(r * _ns.conj(r)) if r.dtype.kind == "c" else r * r
        residuals = _ns.sum(r2, axis=0)
        if b.ndim == 1:
            residuals = _reshape(residuals, (1,))
    else:
        residuals = _creation.zeros((0,), dtype=real, device=a.device)
    return x, residuals, rank, s


#: The Tensor methods of this module (attached by :mod:`tapegrad.numpy.methods`).
METHODS = {"dot": dot}


def vecdot(x1, x2, /, *, axis=-1):
    """Vector dot product ``sum(conj(x1) * x2)`` along ``axis``, broadcasting the other axes
    (NumPy 2's ``vecdot``; the first operand is conjugated).

    Returns:
        Tensor of the broadcast shape without ``axis``, in the operands' promoted dtype
        (integers do not widen as in :func:`sum`; NumPy's and the array API's rule).

    Gradient: ``g x2`` (conjugated for complex) and ``g conj(x1)``.

    Raises:
        ValueError: if the two vector axes differ in length or an axis is out of range.
    """
    a, b = _tensor(x1), _tensor(x2)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"vecdot: operands need at least one axis, got shapes {a.shape} and "
                         f"{b.shape}")
    for name, t in (("x1", a), ("x2", b)):
        if not -t.ndim <= axis < t.ndim:
            raise AxisError(f"vecdot: axis {axis} is out of range for {name} of shape "
                             f"{t.shape}")
    if a.shape[axis] != b.shape[axis]:
        raise ValueError(
            f"vecdot: the vector axes differ: {a.shape[axis]} (shape {a.shape}) and "
            f"{b.shape[axis]} (shape {b.shape}), axis {axis}")
    if a.dtype.kind == "c":
        a = _ns.conj(a)
    prod = a * b
    # the promoted dtype, as NumPy and the array API: small integers do not widen as in sum
    return _ns.sum(prod, axis=axis, dtype=prod.dtype)


def matrix_transpose(x, /):
    """Swap the last two axes (the array API's ``matrix_transpose``, also ``x.mT``).

    Raises:
        ValueError: if ``x`` has fewer than 2 axes.
    """
    x = _tensor(x)
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose: input must be at least 2-D, got shape {x.shape}")
    return _ns.transpose(x, tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2))
