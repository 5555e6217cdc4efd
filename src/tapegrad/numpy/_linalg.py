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

import numpy as _np

from tapegrad import ops as _ops
from tapegrad.numpy._core import _install_methods, _tensor
from tapegrad.ops._registry import ns as _ns
from tapegrad.tensor import Tensor

__all__ = ["matmul", "dot", "vdot", "inner", "outer", "tensordot", "einsum"]

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
            raise ValueError(
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
            ax_a, ax_b = axes
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
    return tensordot(a, b, axes=([a.ndim - 1], [kb]))


def vdot(a, b) -> Tensor:
    """Dot product of the flattened operands, a 0-d Tensor (NumPy ``vdot`` for real inputs).

    Raises:
        ValueError: if the sizes differ, naming both shapes.
        TypeError: for complex inputs (vdot conjugates its first operand, and tapegrad has no
            conjugate yet).
    """
    a, b = _tensor(a), _tensor(b)
    if a.dtype.kind == "c" or b.dtype.kind == "c":
        raise TypeError("vdot: complex inputs are not supported (no conjugation yet)")
    if a.size != b.size:
        raise ValueError(
            f"vdot: operands must have the same number of elements, got shapes {a.shape} "
            f"({a.size}) and {b.shape} ({b.size})"
        )
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
    return tensordot(a, b, axes=([a.ndim - 1], [b.ndim - 1]))


def outer(a, b) -> Tensor:
    """Outer product of the flattened operands: ``out[i, j] = a.ravel()[i] * b.ravel()[j]``.

    Returns:
        Tensor of shape ``(a.size, b.size)``.
    """
    a, b = _tensor(a), _tensor(b)
    return _reshape(a, (a.size, 1)) * _reshape(b, (1, b.size))


# -- tapegrad.numpy.linalg ------------------------------------------------------------------
def svdvals(a) -> Tensor:
    """Singular values of ``(..., m, n)`` matrices, descending, shape ``(..., min(m, n))``
    (NumPy 2 ``linalg.svdvals``). Gradient ``U diag(g) Vh``, defined everywhere.

    Raises:
        See :func:`svd`.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.linalg.svdvals(tnp.asarray([[0.0, 2.0], [1.0, 0.0]]))
        Tensor([2., 1.], dtype=float32)
    """
    return _ops.Svd.api(a, full_matrices=False, compute_uv=False)


_install_methods({"dot": dot})
