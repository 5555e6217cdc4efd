"""Linear algebra of ``tapegrad.numpy``: matmul, dot, vdot, inner, outer, tensordot, einsum,
and the ``tapegrad.numpy.linalg`` functions (inv, solve, det, slogdet, cholesky, norm), which
are defined here and exported from :mod:`tapegrad.numpy.linalg`.

Products are compositions of the :class:`~tapegrad.ops.MatMul` and
:class:`~tapegrad.ops.Einsum` primitives with reshapes and transposes, so they differentiate to
any order. Integer operands are allowed in the forward pass (NumPy's dtype promotion); only
floating inputs receive gradients.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as _np

from tapegrad import ops as _ops
from tapegrad.numpy._core import _install_methods, _tensor
from tapegrad.tensor import Tensor

__all__ = ["matmul", "dot", "vdot", "inner", "outer", "tensordot", "einsum"]


# -- products -------------------------------------------------------------------------------
def matmul(a, b) -> Tensor:
    """Matrix product with NumPy's ``matmul`` semantics (1-D promotion, batch broadcasting).

    Args:
        a: Tensor of shape ``(..., n, k)`` or ``(k,)``.
        b: Tensor of shape ``(..., k, m)`` or ``(k,)``.

    Returns:
        Tensor of shape ``(..., n, m)`` with 1-D operands' added axes removed; dtype by NumPy
        promotion.

    Raises:
        ValueError: if an operand is 0-d, the inner dimensions differ or batch dimensions do
            not broadcast, naming both shapes.
    """
    return _ops.MatMul.apply(_tensor(a), _tensor(b))


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


# -- einsum ---------------------------------------------------------------------------------
def _sublist_label(v) -> str:
    if v is Ellipsis:
        return "..."
    if isinstance(v, (int, _np.integer)) and not isinstance(v, bool) and 0 <= v < 52:
        return chr(ord("A") + v) if v < 26 else chr(ord("a") + v - 26)
    raise ValueError(f"einsum: sublist labels must be ints in [0, 52) or Ellipsis, got {v!r}")


def _from_sublists(args):
    args = list(args)
    operands, terms = [], []
    while len(args) >= 2:
        operands.append(args.pop(0))
        terms.append("".join(_sublist_label(v) for v in args.pop(0)))
    subscripts = ",".join(terms)
    if args:
        subscripts += "->" + "".join(_sublist_label(v) for v in args[0])
    return subscripts, operands


def einsum(subscripts, *operands, optimize=False) -> Tensor:
    """Einstein summation (NumPy ``einsum``), differentiable in every operand.

    Accepts everything NumPy does: explicit (``'ij,jk->ik'``) and implicit (``'ij,jk'``:
    labels that occur once, in ASCII order) outputs, ``'...'`` broadcasting over leading (or
    middle) dimensions, repeated labels for diagonals and traces (``'ii->i'``, ``'ii'``),
    size-1 broadcasting of labelled dimensions, any number of operands, and the sublist form
    ``einsum(op0, [0, 1], op1, [1, 2], [0, 2])``.

    Args:
        subscripts: The subscripts string (or, in the sublist form, the first operand).
        *operands: Tensors/arrays/numbers (Python numbers become float32 0-d Tensors).
        optimize: Passed to the backend's ``einsum`` (``False``, ``True``, ``'greedy'``,
            ``'optimal'`` or an explicit path); used for the backward einsums too.

    Returns:
        Tensor with the output labels' dimensions, dtype by NumPy promotion.

    Raises:
        ValueError: if the subscripts and operand shapes do not match (wrong operand count,
            number of dimensions, label sizes, output labels), naming the subscripts and shapes.
        TypeError: if ``subscripts`` is neither a str nor a sublist form.

    References:
        The backward of each operand is again an einsum (see :class:`tapegrad.ops.Einsum`).
    """
    if isinstance(subscripts, str):
        ops_ = list(operands)
    else:
        subscripts, ops_ = _from_sublists((subscripts,) + operands)
    tensors = [_tensor(o) for o in ops_]
    inputs, output, _ = _ops.parse_einsum(subscripts, [t.shape for t in tensors])
    expr = ",".join(inputs) + "->" + output
    return _ops.Einsum.apply(*tensors, subscripts=expr, optimize=optimize)


# -- tapegrad.numpy.linalg ------------------------------------------------------------------
def inv(a) -> Tensor:
    """Inverse of a square matrix or a batch of them.

    Args:
        a: Tensor of shape ``(..., n, n)``; float32 or float64 (ints become float64).

    Returns:
        Tensor of shape ``(..., n, n)``.

    Raises:
        ValueError: if ``a`` is not ``(..., n, n)``.
        numpy.linalg.LinAlgError: (a ValueError) if a matrix is singular, naming inv.

    References:
        Giles 2008, sec. 3.1: ``gA = -A^{-T} g A^{-T}``.
    """
    return _ops.Inv.apply(_tensor(a))


def solve(a, b) -> Tensor:
    """Solve ``a @ x = b`` for ``x``, batched, with NumPy 2 semantics.

    Args:
        a: Tensor of shape ``(..., n, n)``.
        b: Tensor of shape ``(n,)`` (a vector, solved against every matrix of ``a``) or
            ``(..., n, k)`` (a stack of matrices; batch dimensions broadcast with ``a``'s).

    Returns:
        Tensor ``x`` of shape ``a.shape[:-1]`` for a 1-D ``b``, else
        ``broadcast(a.shape[:-2], b.shape[:-2]) + (n, k)``.

    Raises:
        ValueError: for mismatched shapes, naming both.
        numpy.linalg.LinAlgError: if a matrix is singular, naming solve.

    References:
        Giles 2008, sec. 3.1: ``gb = a^{-T} g`` and ``ga = -gb x^T``.
    """
    return _ops.Solve.apply(_tensor(a), _tensor(b))


def det(a) -> Tensor:
    """Determinant of square matrices (NumPy ``linalg.det``).

    Args:
        a: Tensor of shape ``(..., n, n)``; float32 or float64 (ints become float64).

    Returns:
        Tensor of shape ``(...)`` (``det`` of a ``0 x 0`` matrix is 1).

    Raises:
        ValueError: if ``a`` is not ``(..., n, n)``.
        numpy.linalg.LinAlgError: when differentiating at a singular matrix: the gradient
            ``g det(a) a^{-T}`` (Giles 2008, sec. 3.1) needs an invertible ``a``.

    References:
        Giles, "An extended collection of matrix derivative results for forward and reverse
        mode algorithmic differentiation", 2008.
    """
    return _ops.Det.apply(_tensor(a))


SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])


def slogdet(a) -> SlogdetResult:
    """Sign and natural log of the absolute determinant, each of shape ``(...)``.

    Args:
        a: Tensor of shape ``(..., n, n)``.

    Returns:
        ``SlogdetResult(sign, logabsdet)`` (a namedtuple, as NumPy); ``sign`` is +-1 (0 for a
        singular matrix, with ``logabsdet = -inf``) and carries no gradient; ``logabsdet`` has
        gradient ``g a^{-T}`` (Giles 2008), which raises ``LinAlgError`` at a singular matrix.

    Raises:
        ValueError: if ``a`` is not ``(..., n, n)``.
    """
    sign, logabs = _ops.SlogDet.apply(_tensor(a))
    return SlogdetResult(sign, logabs)


def cholesky(a, upper=False) -> Tensor:
    """Cholesky factor of symmetric positive-definite matrices (NumPy ``linalg.cholesky``).

    Args:
        a: Tensor of shape ``(..., n, n)``; only its lower (``upper=True``: upper) triangle is
            read, as in NumPy.
        upper: Return upper ``U`` with ``a = U^T U`` instead of lower ``L`` with ``a = L L^T``.

    Returns:
        Tensor of shape ``(..., n, n)``, triangular.

    Raises:
        ValueError: if ``a`` is not ``(..., n, n)``.
        numpy.linalg.LinAlgError: if a matrix is not positive definite, naming cholesky.

    References:
        Murray, "Differentiation of the Cholesky decomposition", 2016. The gradient is the
        symmetric one (as PyTorch and JAX): it equals the gradient of
        ``cholesky((a + a^T) / 2)``.
    """
    return _ops.Cholesky.apply(_tensor(a), upper=bool(upper))


SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])


def svd(a, full_matrices=True, compute_uv=True):
    """Singular value decomposition ``a = U @ (S[..., None] * Vh)`` (NumPy ``linalg.svd``).

    Args:
        a: Tensor of shape ``(..., m, n)``, real (integers become float64).
        full_matrices: ``U`` is ``(..., m, m)`` and ``Vh`` ``(..., n, n)`` if True (NumPy's
            default), else ``(..., m, k)`` and ``(..., k, n)`` with ``k = min(m, n)``.
        compute_uv: If False, return only ``S``.

    Returns:
        ``SVDResult(U, S, Vh)`` (a namedtuple, as NumPy), or ``S`` alone with
        ``compute_uv=False``; ``S`` has shape ``(..., k)``, descending.

    Gradient: Townsend (2016), see :class:`tapegrad.ops.Svd`. Functions of ``S`` alone are
    differentiable everywhere; functions of ``U``/``Vh`` need distinct singular values and
    must not depend on the vectors' arbitrary signs. With ``full_matrices=True`` and
    ``m != n`` differentiating raises (the extra vectors are not unique; as in JAX): use
    ``full_matrices=False``.

    Raises:
        ValueError: if ``a`` has fewer than 2 dimensions.
        TypeError: for complex or float16 inputs.
        numpy.linalg.LinAlgError: if the decomposition does not converge.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> a = tg.Tensor([[3.0, 0.0], [0.0, -2.0]])
        >>> tnp.linalg.svd(a).S
        Tensor([3., 2.], dtype=float32)
        >>> tg.grad(lambda m: tnp.linalg.svd(m, compute_uv=False).sum())(a)  # U @ Vh
        Tensor([[ 1.,  0.],
                [ 0., -1.]], dtype=float32)
    """
    a = _tensor(a)
    if a.dtype.kind == "c":
        raise TypeError(f"svd: complex inputs are not supported (got dtype {a.dtype})")
    if not compute_uv:
        return _ops.Svd.apply(a, full_matrices=False)[1]
    return SVDResult(*_ops.Svd.apply(a, full_matrices=bool(full_matrices)))


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
    return svd(a, full_matrices=False, compute_uv=False)


def _rmatmul(x, y):
    return matmul(y, x)


_install_methods({"__matmul__": matmul, "__rmatmul__": _rmatmul, "matmul": matmul, "dot": dot})
