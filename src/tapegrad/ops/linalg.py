"""Linear-algebra primitives: matmul, einsum, inv, solve, det, slogdet, cholesky, svd, eigh,
eig, qr, pinv.

Each primitive is one definition: its forward, backward and shape/dtype rules and its public
function (``api``, with the docstring users read). ``matmul`` and ``einsum`` are exposed in
``tapegrad.numpy`` (and ``@``, ``x.matmul``); the others only in ``tapegrad.numpy.linalg``
(``names = ()``, so nothing enters the flat namespace). Products built from several
primitives (``dot``, ``tensordot``, ...) live in ``tapegrad.numpy``.

Every backward rule is written with tapegrad ops (matmul, einsum, solve, ...) on the saved
input/output Tensors, so second and higher derivatives work. Complex inputs follow JAX's
convention: a backward rule is the transpose of the jvp for the pairing ``Re sum(g * dy)``
(no conjugation of holomorphic rules; ``grad`` of a real loss of ``z = x + iy`` is
``dL/dx - i dL/dy``), and a real input of a complex computation receives the real part.
Matrix rules follow

* M. B. Giles, "An extended collection of matrix derivative results for forward and reverse
  mode algorithmic differentiation", Oxford NA report 08/01, 2008 (inv, solve, det, slogdet,
  eig, eigh);
* I. Murray, "Differentiation of the Cholesky decomposition", arXiv:1602.07527, 2016
  (cholesky);
* J. Townsend, "Differentiating the singular value decomposition", 2016, and Z.-Q. Wan and
  S.-X. Zhang, "Automatic differentiation for complex valued SVD", arXiv:1909.02659, 2019
  (svd);
* M. Seeger, A. Hetzel, Z. Dai, E. Meissner and N. D. Lawrence, "Auto-differentiating linear
  algebra", arXiv:1710.08717, 2017, and S. F. Walter and L. Lehmann, "Algorithmic
  differentiation of linear algebra functions with application in optimum experimental
  design", 2018 (qr);
* G. H. Golub and V. Pereyra, "The differentiation of pseudo-inverses and nonlinear least
  squares problems whose variables separate", SIAM J. Numer. Anal. 10(2), 1973 (pinv);
* JAX (``jax/_src/lax/linalg.py``, ``jax/_src/numpy/linalg.py``): the jvp rules whose
  transposes these are, and the gauge conventions of eigh and svd.

Batched operands have shape ``(..., m, n)``; batch dimensions broadcast like NumPy's
``numpy.linalg`` gufuncs and ``apply`` sums cotangents back over broadcast dimensions. Under
``vmap`` the batch is one more leading stack dimension. On CUDA (CuPy) singular or
indefinite matrices may go undetected (CuPy does not check by default) and give inf/NaN
instead of a ``LinAlgError``; ``eig`` (which CuPy lacks) runs on the host there.
"""

from __future__ import annotations

import math
import operator
import string
from collections import namedtuple

import numpy as np

from tapegrad.core import dtypes as _tg_dtypes
from tapegrad.core.backend import get_backend
from tapegrad.core.function import Function, Traits
from tapegrad.core.tensor import Tensor, const, host_value
from tapegrad.ops._batching import align
from tapegrad.ops._registry import expose, tensor_arg
from tapegrad.ops.elementwise import Conj, DivNoNan, Imag, Real
from tapegrad.ops.movement import Concatenate, GetItem, Reshape, Transpose, cast_all, no_out
from tapegrad.ops.reduction import Sum

__all__ = [
    "MatMul",
    "Einsum",
    "Inv",
    "Solve",
    "Det",
    "SlogDet",
    "Cholesky",
    "Svd",
    "Eigh",
    "Eig",
    "Qr",
    "Pinv",
    "SlogdetResult",
    "SVDResult",
    "EighResult",
    "EigResult",
    "QRResult",
    "parse_einsum",
]

_LinAlgError = np.linalg.LinAlgError


# -- helpers for the rules (views and constants) ---------------------------------------------
_SWAP_LAST: dict = {}


def _mT(t: Tensor) -> Tensor:
    """``t`` with its last two axes swapped (a view), differentiable."""
    n = t.ndim
    axes = _SWAP_LAST.get(n)
    if axes is None:
        axes = _SWAP_LAST[n] = (*range(n - 2), n - 1, n - 2)
    return Transpose.apply(t, axes=axes)


def _H(t: Tensor) -> Tensor:
    """The conjugate transpose of ``t``'s last two axes (the transpose for real ``t``)."""
    return Conj.apply(_mT(t)) if t.dtype.kind == "c" else _mT(t)


def _hermitian_part(xp, a):
    """``(a + a^H) / 2`` on backend arrays: the input a symmetric-matrix op computes on (JAX's
    ``symmetrize_input``), so that its value and its (Hermitian) derivative are those of one
    function for every input, Hermitian or not."""
    if a.dtype.kind not in "fc":  # integers: LAPACK computes in float64
        a = a.astype(_lapack_dtype(a.dtype))
    ah = xp.swapaxes(a, -1, -2)
    if a.dtype.kind == "c":
        ah = xp.conj(ah)
    return (a + ah) * a.dtype.type(0.5)


def _conj(t: Tensor) -> Tensor:
    """``conj(t)`` (``t`` itself when real)."""
    return Conj.apply(t) if t.dtype.kind == "c" else t


def _real_dtype(dtype) -> np.dtype:
    """The real dtype of the same precision (float64 for complex128)."""
    return np.zeros((), dtype).real.dtype


def _append_axes(t: Tensor, k: int = 1) -> Tensor:
    """``t`` with ``k`` trailing size-1 axes (a view)."""
    return Reshape.apply(t, t.shape + (1,) * k)


def _row(t: Tensor) -> Tensor:
    """``t`` of shape ``(..., n)`` as ``(..., 1, n)`` (a view)."""
    return Reshape.apply(t, t.shape[:-1] + (1,) + t.shape[-1:])


def _constant(like: Tensor, build) -> Tensor:
    """A constant Tensor ``build(xp)`` on ``like``'s device (``xp`` its array module)."""
    device = like.device
    if device == "cpu":
        return const(build(np))
    xp = get_backend(device)  # pragma: no cover - GPU only
    with xp.cuda.Device(int(device.split(":")[1])):  # pragma: no cover - GPU only
        return const(build(xp))


def _eye(n: int, like: Tensor) -> Tensor:
    """The ``n x n`` identity in ``like``'s dtype and device."""
    return _constant(like, lambda xp: xp.eye(n, dtype=like.dtype))


def _ones(n: int, like: Tensor) -> Tensor:
    """A ones vector ``(n,)`` in ``like``'s dtype and device."""
    return _constant(like, lambda xp: xp.ones((n,), dtype=like.dtype))


# -- matmul ---------------------------------------------------------------------------------
def _matmul_shape(a, b):
    a = tuple(a) if isinstance(a, tuple) else np.shape(a)
    b = tuple(b) if isinstance(b, tuple) else np.shape(b)
    if len(a) == 0 or len(b) == 0:
        raise ValueError(f"matmul: operands must be at least 1-D, got shapes {a} and {b}")
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ValueError(
            f"matmul: shapes {a} and {b} are not aligned: {a2[-1]} (last dim of the first) "
            f"!= {b2[-2]} ({'only' if len(b) == 1 else 'second-to-last'} dim of the second)"
        )
    try:
        batch = np.broadcast_shapes(a2[:-2], b2[:-2])
    except ValueError:
        raise ValueError(
            f"matmul: batch dimensions of shapes {a} and {b} do not broadcast"
        ) from None
    out = tuple(batch) + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def _reshape(t: Tensor, shape: tuple) -> Tensor:
    """``t`` reshaped to ``shape`` (``t`` itself if it has that shape)."""
    return t if t.shape == shape else Reshape.apply(t, shape)


def _sum_to_vector(t: Tensor, shape: tuple) -> Tensor:
    """A cotangent ``(..., 1, k)`` of a promoted vector, summed over the batch dimensions and
    reshaped to the vector's ``shape`` ``(k,)``."""
    if t.ndim > 2:
        t = t.sum(axis=tuple(range(t.ndim - 2)))
    return Reshape.apply(t, shape)


def _mm(a: Tensor, b: Tensor, ta: bool = False, tb: bool = False) -> Tensor:
    """``op(a) @ op(b)`` with ``op`` swapping the last two axes where ``ta`` (``tb``) is set:
    one :class:`MatMul` call (no transpose entry, a contiguous result)."""
    if ta:
        return MatMul.apply(a, b, transpose_a=True, transpose_b=True) if tb else \
            MatMul.apply(a, b, transpose_a=True)
    return MatMul.apply(a, b, transpose_b=True) if tb else MatMul.apply(a, b)


def _check_transposes(a, b, ta, tb) -> None:
    """A transposed operand must have at least two axes."""
    for name, shape, t in (("a", a, ta), ("b", b, tb)):
        if t and len(shape) < 2:
            raise ValueError(
                f"matmul: transpose_{name}=True needs an operand with at least 2 axes, got "
                f"shapes {tuple(a)} and {tuple(b)}"
            )


def _swap_last(shape: tuple) -> tuple:
    return (*shape[:-2], shape[-1], shape[-2])


_PRODUCTS = {  # op(a) @ op(b) on arrays, by (transpose_a, transpose_b)
    (False, False): operator.matmul,
    (True, False): lambda a, b: a.swapaxes(-1, -2) @ b,
    (False, True): lambda a, b: a @ b.swapaxes(-1, -2),
    (True, True): lambda a, b: a.swapaxes(-1, -2) @ b.swapaxes(-1, -2),
}


def _product(transpose_a=False, transpose_b=False):
    """The product :class:`MatMul` computes on arrays with these flags (its ``array_fn``
    trait): ``op(a) @ op(b)``, an operand's last two axes swapped where its flag is set."""
    return _PRODUCTS[bool(transpose_a), bool(transpose_b)]


def _swapped_product(ins: tuple, params: dict):
    """The inputs and parameters of the product equal to a :class:`MatMul`'s with its last two
    axes swapped, ``op(b)^T @ op(a)^T`` (its ``transposed`` trait, for ``jit``'s layout
    pass): ``(ins, params)``."""
    ta, tb = params.get("transpose_a", False), params.get("transpose_b", False)
    new = {}
    if not tb:
        new["transpose_a"] = True
    if not ta:
        new["transpose_b"] = True
    return (ins[1], ins[0]), new


@expose
class MatMul(Function):
    """NumPy ``matmul`` (``a @ b``): 1-D operands are promoted to matrices and the added axis is
    removed; batch dimensions broadcast.

    The keyword parameters ``transpose_a`` and ``transpose_b`` (default False; BLAS's
    ``transA``/``transB``, as in ``tf.linalg.matmul`` and XLA's ``dot_general``) multiply an
    operand with its last two axes swapped, without a transpose entry: the derivative rules
    use them, so every cotangent of a product is a fresh contiguous array (a transposed
    cotangent would be a strided view, and elementwise ops on a strided ``(512, 512)`` float32
    view run about 20 times slower than on a contiguous one).

    Backward of ``op(a) @ op(b)``: ``ga = g @ op(b)^T``, ``gb = op(a)^T @ g`` (each written as
    one product with the matching flags, transposed back where the operand was transposed);
    ``apply`` sums them over broadcast batch dimensions. With a 1-D operand the same products
    are formed with the vector as a one-row (one-column) matrix, and the vector's cotangent is
    summed over the batch dimensions.
    """

    @staticmethod
    def batch(args, batched, size, transpose_a=False, transpose_b=False):
        a, b = args
        if transpose_a or transpose_b:  # one example's operands are matrices: swap them here
            _check_transposes(a.shape, b.shape, transpose_a, transpose_b)
            a = _mT(a) if transpose_a else a
            b = _mT(b) if transpose_b else b
        ba, bb = batched
        na = a.ndim - ba if isinstance(a, Tensor) else 0  # one example's ndim
        nb = b.ndim - bb if isinstance(b, Tensor) else 0
        if na == 0 or nb == 0:  # a scalar operand: matmul's own error
            return MatMul.apply(a, b)
        if ba and not bb and nb == 2:  # a shared matrix: the batch joins a's rows, one product
            if na <= 2:
                k = a.shape[-1]
                out = MatMul.apply(Reshape.apply(a, (a.shape[0] * a.shape[1], k))
                                   if na == 2 else a, b)
                return out if na == 1 else Reshape.apply(out, a.shape[:-1] + b.shape[-1:])
        if bb and not ba and na == 2 and nb == 1:  # per-example vectors times a shared matrix
            return MatMul.apply(b, _mT(a))
        # one example's vectors become matrices, so the batch is a stack dimension
        if ba and na == 1:
            a = a.reshape((a.shape[0], 1, a.shape[1]))
        elif not ba and na == 1:
            a = a.reshape((1, a.shape[0]))
        if bb and nb == 1:
            b = b.reshape((b.shape[0], b.shape[1], 1))
        elif not bb and nb == 1:
            b = b.reshape((b.shape[0], 1))
        ra, rb = max(na, 2), max(nb, 2)  # one example's ranks as matrices
        rank = max(ra, rb)
        if ba and ra < rank:  # line up the stack dimensions with the batch first
            a = a.reshape((a.shape[0],) + (1,) * (rank - ra) + a.shape[1:])
        if bb and rb < rank:
            b = b.reshape((b.shape[0],) + (1,) * (rank - rb) + b.shape[1:])
        if not ba:
            a = a.reshape((1,) * (rank + 1 - a.ndim) + a.shape)
        if not bb:
            b = b.reshape((1,) * (rank + 1 - b.ndim) + b.shape)
        out = MatMul.apply(a, b)
        if na == 1:
            out = out.reshape(out.shape[:-2] + out.shape[-1:])
        if nb == 1:
            out = out.reshape(out.shape[:-1])
        return out

    traits = Traits(fresh=True, transposed=_swapped_product, cost="contraction",
                    array_fn=_product)

    oper = "matmul"
    arity = 2
    names = ("matmul",)
    methods = ("__matmul__", "__rmatmul__", "matmul")

    @staticmethod
    def forward(ctx, a, b, transpose_a=False, transpose_b=False):
        ctx.transposes = (transpose_a, transpose_b)
        if transpose_a or transpose_b:
            _check_transposes(np.shape(a), np.shape(b), transpose_a, transpose_b)
            ctx.save_for_backward(a, b)
            return _product(transpose_a, transpose_b)(a, b)
        try:
            bad = a.ndim == 0 or b.ndim == 0 or a.shape[-1] != b.shape[0 if b.ndim == 1 else -2]
        except AttributeError:  # a Python number, from the ``@`` operator
            bad = True
        if bad:
            _matmul_shape(np.shape(a), np.shape(b))
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        ta, tb = ctx.transposes
        a_vec, b_vec = a.ndim == 1, b.ndim == 1
        if not a_vec and not b_vec:  # (batches of) matrices, the hot path: two products
            ga = gb = None
            if na:  # g @ op(b)^T, transposed back for a transposed a: op(b) @ g^T
                ga = _mm(b, g, tb, True) if ta else _mm(g, b, False, not tb)
            if nb:  # op(a)^T @ g, transposed back for a transposed b: g^T @ op(a)
                gb = _mm(g, a, True, ta) if tb else _mm(a, g, not ta, False)
            return ga, gb
        if ta or tb:  # a vector times a transposed matrix: the cotangents of op(a) and op(b),
            # transposed back (views; a rare case, off the hot path)
            ga, gb = MatMul._vector_cotangents(_mT(a) if ta else a, _mT(b) if tb else b, g,
                                               na, nb)
            return (_mT(ga) if ta and ga is not None else ga,
                    _mT(gb) if tb and gb is not None else gb)
        return MatMul._vector_cotangents(a, b, g, na, nb)

    @staticmethod
    def _vector_cotangents(a, b, g, na, nb):
        """The cotangents of ``a @ b`` where ``a`` or ``b`` is a vector."""
        a_vec, b_vec = a.ndim == 1, b.ndim == 1
        if a_vec and b_vec:  # inner product -> scalar
            return (g * b if na else None), (g * a if nb else None)
        ga = gb = None
        if a_vec:  # (k,) @ (..., k, m) -> (..., m)
            if na:  # sum over (..., m) of b[..., :, m] g[..., m]
                ga = MatMul.apply(b, g) if b.ndim == 2 else _sum_to_vector(
                    _mm(_row(g), b, False, True), a.shape
                )
            if nb:  # outer products a g[...]^T: a product with a one-term sum is a multiply
                gb = Reshape.apply(a, (a.shape[0], 1)) * _row(g)
            return ga, gb
        # (..., n, k) @ (k,) -> (..., n)
        if na:  # outer products g[...] b^T, a multiply
            ga = _append_axes(g) * Reshape.apply(b, (1, b.shape[0]))
        if nb:  # sum over (..., n) of g[..., n] a[..., n, :]: one (N,) @ (N, k) product
            rows = math.prod(a.shape[:-1])
            gb = MatMul.apply(_reshape(g, (rows,)), _reshape(a, (rows, b.shape[0])))
        return ga, gb

    @classmethod
    def output_shape(cls, a, b, transpose_a=False, transpose_b=False):
        if transpose_a or transpose_b:
            _check_transposes(a, b, transpose_a, transpose_b)
            a = _swap_last(tuple(a)) if transpose_a else a
            b = _swap_last(tuple(b)) if transpose_b else b
        return _matmul_shape(a, b)

    @staticmethod
    def jvp(ctx, ta, tb):  # bilinear: op(ta) @ op(b) + op(a) @ op(tb)
        a, b = ctx.saved_tensors
        fa, fb = ctx.transposes
        ga = None if ta is None else _mm(ta, b, fa, fb)
        gb = None if tb is None else _mm(a, tb, fa, fb)
        return ga if gb is None else (gb if ga is None else ga + gb)

    @staticmethod
    def api(a, b) -> Tensor:
        """Matrix product with NumPy's ``matmul`` semantics (1-D promotion, batch broadcasting).

        Args:
            a: Tensor of shape ``(..., n, k)`` or ``(k,)``.
            b: Tensor of shape ``(..., k, m)`` or ``(k,)``.

        Returns:
            Tensor of shape ``(..., n, m)`` with 1-D operands' added axes removed; dtype by
            NumPy promotion.

        Raises:
            ValueError: if an operand is 0-d, the inner dimensions differ or batch dimensions
                do not broadcast, naming both shapes.
        """
        return MatMul.apply(
            a if type(a) is Tensor else tensor_arg(a), b if type(b) is Tensor else tensor_arg(b)
        )


# -- einsum ---------------------------------------------------------------------------------
_LETTERS = string.ascii_letters


def _shapes_str(shapes) -> str:
    return ", ".join(str(tuple(s)) for s in shapes)


def _implicit_output(terms) -> str:
    """The output of an implicit-mode einsum: the letters that appear once, sorted."""
    letters = "".join(terms).replace(".", "")
    return "".join(sorted(c for c in set(letters) if letters.count(c) == 1))


def parse_einsum(subscripts: str, shapes) -> tuple:
    """Parse and check einsum ``subscripts`` against operand ``shapes`` (NumPy's rules).

    The ellipsis is expanded into fresh letters (right-aligned, so ellipsis dimensions broadcast
    like NumPy's), and an implicit output (no ``->``) becomes explicit: the ellipsis dimensions
    followed by the letters that occur exactly once, in ASCII order.

    Args:
        subscripts: Comma-separated input labels, optionally ``->`` and output labels; letters
            ``a-zA-Z`` and at most one ``...`` per term. Spaces are ignored.
        shapes: One shape tuple per operand.

    Returns:
        ``(inputs, output, sizes)``: a list of label strings (one per operand, one letter per
        dimension), the output label string, and a dict label -> broadcast size.

    Raises:
        ValueError: naming the subscripts and the shapes, if the number of operands, the number
            of dimensions, a label's sizes (equal or 1 across operands, equal within one operand
            for a repeated label), or the output labels are wrong, or if more than 52 distinct
            labels would be needed.
    """
    if not isinstance(subscripts, str):
        raise TypeError(f"einsum: subscripts must be a str, got {type(subscripts).__name__}")
    shapes = [tuple(s) for s in shapes]
    where = f"subscripts {subscripts!r} with operand shapes {_shapes_str(shapes)}"
    s = subscripts.replace(" ", "")
    if s.count("->") > 1:
        raise ValueError(f"einsum: more than one '->' in {where}")
    if "->" in s:
        lhs, out = s.split("->")
    else:
        lhs, out = s, None
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(
            f"einsum: {where}: the subscripts name {len(terms)} operand(s) but {len(shapes)} "
            "were given"
        )

    def check_term(t, what):
        body = t.replace("...", "", 1)
        if "." in body:
            raise ValueError(f"einsum: {where}: {what} has a '.' that is not part of one '...'")
        bad = [c for c in body if c not in _LETTERS]
        if bad:
            raise ValueError(
                f"einsum: {where}: {what} has invalid label {bad[0]!r} (labels are a-z, A-Z)"
            )
        return body

    bodies = [check_term(t, f"operand {i}'s subscripts {t!r}") for i, t in enumerate(terms)]
    if out is not None:
        check_term(out, f"output subscripts {out!r}")
    used = set("".join(bodies)) | (set(out) - {"."} if out else set())
    free = [c for c in _LETTERS if c not in used]
    ell_ndim = 0
    for i, (t, b, shp) in enumerate(zip(terms, bodies, shapes)):
        if "..." in t:
            k = len(shp) - len(b)
            if k < 0:
                raise ValueError(
                    f"einsum: {where}: operand {i} has {len(shp)} dimension(s) but its "
                    f"subscripts {t!r} name {len(b)}"
                )
            ell_ndim = max(ell_ndim, k)
        elif len(b) != len(shp):
            raise ValueError(
                f"einsum: {where}: operand {i} has {len(shp)} dimension(s) but its subscripts "
                f"{t!r} name {len(b)} (use '...' for the rest)"
            )
    if ell_ndim > len(free):
        raise ValueError(f"einsum: {where}: too many distinct dimensions (at most 52 labels)")
    ell = "".join(free[:ell_ndim])
    inputs = []
    for t, b, shp in zip(terms, bodies, shapes):
        if "..." in t:
            k = len(shp) - len(b)
            pre, post = t.split("...")
            inputs.append(pre + (ell[ell_ndim - k :] if k else "") + post)
        else:
            inputs.append(b)
    if out is None:
        counts = {}
        for lab in "".join(bodies):
            counts[lab] = counts.get(lab, 0) + 1
        output = ell + "".join(sorted(c for c, n in counts.items() if n == 1))
    else:
        body = out.replace("...", "", 1)
        for c in body:
            if body.count(c) > 1:
                raise ValueError(f"einsum: {where}: output label {c!r} appears more than once")
            if c not in "".join(bodies):
                raise ValueError(
                    f"einsum: {where}: output label {c!r} does not appear in any operand"
                )
        if "..." in out:
            pre, post = out.split("...")
            output = pre + ell + post
        elif ell_ndim:
            raise ValueError(
                f"einsum: {where}: the ellipsis covers {ell_ndim} dimension(s) but the output "
                "subscripts have no '...' to hold them"
            )
        else:
            output = body
    sizes: dict = {}
    for i, (labs, shp) in enumerate(zip(inputs, shapes)):
        own: dict = {}
        for lab, n in zip(labs, shp):
            if lab in own and own[lab] != n:
                raise ValueError(
                    f"einsum: {where}: label {lab!r} is repeated in operand {i} with different "
                    f"sizes {own[lab]} and {n}"
                )
            own[lab] = n
            prev = sizes.get(lab)
            if prev is None or prev == 1:
                sizes[lab] = n
            elif n != 1 and n != prev:
                raise ValueError(
                    f"einsum: {where}: label {lab!r} has sizes {prev} and {n}, which do not "
                    "broadcast (sizes must be equal or 1)"
                )
    return inputs, output, sizes


def _einsum_shape(subscripts, shapes):
    inputs, output, sizes = parse_einsum(subscripts, shapes)
    return tuple(sizes[c] for c in output)


@expose
class Einsum(Function):
    """Einstein summation over any number of operands (NumPy ``einsum``).

    ``subscripts`` is normally the explicit, ellipsis-free form made by :func:`parse_einsum`
    (``tapegrad.numpy.einsum`` passes that); ``optimize`` goes to the backend's ``einsum``, for
    the backward einsums too (an explicit contraction path, which fits only the forward
    operands, becomes ``'greedy'`` there).

    Backward: the cotangent of operand ``k`` is itself an einsum of the output cotangent with
    the other operands, onto operand ``k``'s labels. Three details make it exact:

    * a label repeated in operand ``k`` (a diagonal, such as ``'ii->i'``) gets a fresh label per
      extra occurrence, tied to the first by an identity matrix operand, so the cotangent lands
      on the diagonal;
    * a label that is summed out and sized by operand ``k`` alone gets a ones vector operand,
      which broadcasts the cotangent along it;
    * a size-1 dimension of operand ``k`` that broadcast against a larger one is summed out and
      restored as size 1 by a reshape.
    """

    @staticmethod
    def batch(args, batched, size, subscripts, optimize=False):
        ins, _, out = subscripts.replace(" ", "").partition("->")
        terms = ins.split(",")
        if not _:
            out = _implicit_output(terms)
        letter = next(c for c in _LETTERS if c not in subscripts)
        new = [letter + t if b else t for t, b in zip(terms, batched)]
        return Einsum.apply(*args, subscripts=",".join(new) + "->" + letter + out,
                            optimize=optimize)

    oper = "einsum"
    traits = Traits(cost="dense")
    names = ("einsum",)

    @staticmethod
    def forward(ctx, *operands, subscripts, optimize=False):
        inputs, output, _ = parse_einsum(subscripts, [o.shape for o in operands])
        expr = ",".join(inputs) + "->" + output
        ctx.inputs, ctx.output, ctx.optimize = inputs, output, optimize
        ctx.save_for_backward(*operands)
        return ctx.backend.einsum(expr, *operands, optimize=optimize)

    @staticmethod
    def backward(ctx, g):
        ops = ctx.saved_tensors
        inputs, output = ctx.inputs, ctx.output
        sizes: dict = {}
        for labs, o in zip(inputs, ops):
            for lab, n in zip(labs, o.shape):
                if sizes.get(lab, 1) == 1:
                    sizes[lab] = n
        used = set("".join(inputs))
        optimize = ctx.optimize
        if isinstance(optimize, (list, tuple)):  # an explicit path fits the forward only
            optimize = "greedy"
        grads = []
        for k, (labs, op) in enumerate(zip(inputs, ops)):
            if not ctx.needs_input_grad[k]:
                grads.append(None)
                continue
            fresh = iter(c for c in _LETTERS if c not in used)
            others = [(g, output)] + [
                (o, lb) for j, (lb, o) in enumerate(zip(inputs, ops)) if j != k
            ]
            sized = {lab for t, lb in others for lab, n in zip(lb, t.shape) if n == sizes[lab]}
            extra = []
            result = []
            seen = set()
            for lab, n in zip(labs, op.shape):
                if n == 1 and sizes[lab] != 1:
                    continue  # broadcast dimension: summed, restored by the reshape below
                if lab in seen:
                    f = next(fresh)
                    extra.append((_eye(sizes[lab], g), lab + f))
                    result.append(f)
                    continue
                seen.add(lab)
                result.append(lab)
                if lab not in sized:
                    extra.append((_ones(sizes[lab], g), lab))
                    sized.add(lab)
            terms = others + extra
            expr = ",".join(lb for _, lb in terms) + "->" + "".join(result)
            gk = Einsum.apply(*[t for t, _ in terms], subscripts=expr, optimize=optimize)
            if gk.shape != op.shape:
                gk = Reshape.apply(gk, op.shape)
            grads.append(gk)
        return tuple(grads)

    @classmethod
    def output_shape(cls, *shapes, subscripts, optimize=False):
        return _einsum_shape(subscripts, shapes)

    @staticmethod
    def api(subscripts, *operands, out=None, dtype=None, order="K", casting="safe",
            optimize=False) -> Tensor:
        """Einstein summation (NumPy ``einsum``), differentiable in every operand.

        Accepts everything NumPy does: explicit (``'ij,jk->ik'``) and implicit (``'ij,jk'``:
        labels that occur once, in ASCII order) outputs, ``'...'`` broadcasting over leading
        (or middle) dimensions, repeated labels for diagonals and traces (``'ii->i'``,
        ``'ii'``), size-1 broadcasting of labelled dimensions, any number of operands, and the
        sublist form ``einsum(op0, [0, 1], op1, [1, 2], [0, 2])``.

        Args:
            subscripts: The subscripts string (or, in the sublist form, the first operand).
            *operands: Tensors/arrays/numbers (Python numbers become float32 0-d Tensors).
            out: Must be None (Tensors are immutable).
            dtype: Compute in this dtype: every operand is cast to it first (NumPy's keyword).
            order: ``"C"``, ``"F"``, ``"A"`` or ``"K"``, accepted for NumPy's signature
                (memory layout is not observable on a Tensor).
            casting: Which casts ``dtype`` may make (NumPy's default for einsum: ``"safe"``).
            optimize: Passed to the backend's ``einsum`` (``False``, ``True``, ``'greedy'``,
                ``'optimal'`` or an explicit path); used for the backward einsums too.

        Returns:
            Tensor with the output labels' dimensions, dtype by NumPy promotion (or ``dtype``).

        Raises:
            ValueError: if the subscripts and operand shapes do not match (wrong operand count,
                number of dimensions, label sizes, output labels), naming the subscripts and
                shapes; for an unknown ``order`` or ``casting``.
            TypeError: if ``subscripts`` is neither a str nor a sublist form; for ``out=`` or
                a cast ``casting`` forbids.

        References:
            The backward of each operand is again an einsum (see
            :class:`tapegrad.ops.Einsum`).
        """
        if isinstance(subscripts, str):
            ops_ = list(operands)
        else:
            subscripts, ops_ = _from_sublists((subscripts,) + operands)
        no_out(out, "einsum")
        if order not in ("C", "F", "A", "K"):
            raise ValueError(f"einsum: order must be 'C', 'F', 'A' or 'K', got {order!r}")
        tensors = cast_all([tensor_arg(o) for o in ops_], dtype, casting, "einsum")
        inputs, output, _ = parse_einsum(subscripts, [t.shape for t in tensors])
        expr = ",".join(inputs) + "->" + output
        return Einsum.apply(*tensors, subscripts=expr, optimize=optimize)


def _sublist_label(v) -> str:
    if v is Ellipsis:
        return "..."
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool) and 0 <= v < 52:
        return chr(ord("A") + v) if v < 26 else chr(ord("a") + v - 26)
    raise ValueError(f"einsum: sublist labels must be ints in [0, 52) or Ellipsis, got {v!r}")


def _from_sublists(args):
    """``einsum``'s sublist form ``(op0, labels0, op1, labels1, ..., [out])`` as
    ``(subscripts, operands)``."""
    args = list(args)
    operands, terms = [], []
    while len(args) >= 2:
        operands.append(args.pop(0))
        terms.append("".join(_sublist_label(v) for v in args.pop(0)))
    subscripts = ",".join(terms)
    if args:
        subscripts += "->" + "".join(_sublist_label(v) for v in args[0])
    return subscripts, operands


# -- square-matrix helpers ------------------------------------------------------------------
def _square_shape(shape, op: str, name: str = "a") -> tuple:
    shape = tuple(shape)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(
            f"{op}: {name} must be a (batch of) square matrices of shape (..., n, n), got "
            f"shape {shape}"
        )
    return shape


def _check_float(a, op):
    if a.dtype.kind not in "fciub" or a.dtype == np.float16:
        raise TypeError(
            f"unsupported dtype {a.dtype} (shape {tuple(a.shape)}); {op} needs float32 or "
            "float64 (float16 is not supported by the LAPACK routines)"
        )


def _expand2(t: Tensor) -> Tensor:
    """``t`` of shape ``(...)`` as ``(..., 1, 1)`` (a view)."""
    return _append_axes(t, 2)


def _lapack_dtype(*dtypes) -> np.dtype:
    """The result dtype of NumPy's ``linalg`` routines: float and complex dtypes promote,
    integer and boolean ones count as float64."""
    return np.result_type(
        *[d if np.dtype(d).kind in "fc" else np.dtype(np.float64) for d in dtypes]
    )


def _stacked(cls, args, batched, size, **params):
    """vmap rule of an op on the last two axes: the batch is one more stack dimension."""
    return cls.apply(*args, **params)


class _DenseStack:
    """What the inverses and decompositions of ``(..., m, n)`` stacks declare alike (a base
    listed before :class:`~tapegrad.Function`): vmap's batch is one more stack dimension, jit
    costs them as dense matrix work, and the result has LAPACK's dtype."""

    batch = classmethod(_stacked)  # vmap: the batch is one more stack dimension
    traits = Traits(cost="dense")

    @classmethod
    def output_dtype(cls, dtype, **params):
        """LAPACK's result dtype (an op with several outputs lists theirs)."""
        return _lapack_dtype(dtype)


def _square_input(a, op: str) -> None:
    """Check a forward's input: a (batch of) square matrices of a LAPACK dtype, naming ``op``."""
    _square_shape(a.shape, op)
    _check_float(a, op)


def _linalg_function(name: str):
    """Class decorator, above ``@expose``, for an op exposed only in ``tapegrad.numpy.linalg``
    (``names = ()``: nothing in the flat namespace; :mod:`tapegrad.numpy.linalg` exports
    ``cls.api``): names its ``api`` ``tapegrad.numpy.linalg.<name>``."""

    def decorate(cls):
        fn = cls.api
        fn.__name__ = fn.__qualname__ = name
        fn.__module__ = "tapegrad.numpy.linalg"
        return cls

    return decorate


def _singular(op: str, a) -> _LinAlgError:
    return _LinAlgError(
        f"matrix is singular (shape {tuple(a.shape)}, dtype {a.dtype}); {op} needs an "
        "invertible matrix (in every batch entry)"
    )


@_linalg_function("inv")
@expose
class Inv(_DenseStack, Function):
    """Matrix inverse ``X = A^{-1}`` of ``(..., n, n)``.

    Backward (Giles 2008, sec. 3.1): ``gA = -X^T g X^T``.
    """

    oper = "inv"
    names = ()

    @staticmethod
    def forward(ctx, a):
        _square_input(a, "inv")
        try:
            out = ctx.backend.linalg.inv(a)
        except _LinAlgError:
            raise _singular("inv", a) from None
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        xt = _mT(x)
        return -MatMul.apply(MatMul.apply(xt, g), xt)

    @classmethod
    def output_shape(cls, shape):
        return _square_shape(shape, "inv")

    @staticmethod
    def api(a) -> Tensor:
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
        return Inv.apply(tensor_arg(a))


def _solve_shape(a, b):
    a, b = tuple(a), tuple(b)
    _square_shape(a, "solve")
    n = a[-1]
    if len(b) == 0:
        raise ValueError(f"solve: b must be at least 1-D, got shape {b} (a has shape {a})")
    if len(b) == 1:
        if b[0] != n:
            raise ValueError(
                f"solve: a of shape {a} needs b of shape ({n},) or (..., {n}, k), got {b}"
            )
        return a[:-1]
    if b[-2] != n:
        raise ValueError(
            f"solve: a of shape {a} needs b of shape ({n},) or (..., {n}, k), got {b} (a 1-D b "
            "is a vector; any other b is a stack of matrices, as in NumPy 2)"
        )
    try:
        batch = np.broadcast_shapes(a[:-2], b[:-2])
    except ValueError:
        raise ValueError(f"solve: batch dimensions of a {a} and b {b} do not broadcast") from None
    return tuple(batch) + b[-2:]


@_linalg_function("solve")
@expose
class Solve(Function):
    """Solve ``A X = B`` for ``X`` (NumPy 2 rules: a 1-D ``b`` is a vector, any other ``b`` a
    (batch of) matrices; batch dimensions broadcast).

    Backward (Giles 2008, sec. 3.1): ``gB = A^{-T} g`` (one more solve) and ``gA = -gB X^T``.
    """

    oper = "solve"
    traits = Traits(cost="dense")
    names = ()

    @staticmethod
    def batch(args, batched, size):
        a, b = args
        a_nd = a.ndim - batched[0]
        if b.ndim - batched[1] == 1:  # a vector per example
            if not batched[1]:
                return Solve.apply(a, b)  # NumPy 2's rule: one vector against every matrix
            n = b.shape[-1]
            b = Reshape.apply(b, (size,) + (1,) * (a_nd - 2) + (n, 1))
            x = Solve.apply(a, b)
            return Reshape.apply(x, x.shape[:-1])
        nd = max(a_nd, b.ndim - batched[1])
        return Solve.apply(*align([a, b], batched, nd))

    @staticmethod
    def forward(ctx, a, b):
        _solve_shape(a.shape, b.shape)
        _check_float(a, "solve")
        xp = ctx.backend
        try:
            if b.ndim == 1 and a.ndim > 2 and xp is not np:  # NumPy 2's vector rule for CuPy
                x = xp.linalg.solve(a, xp.broadcast_to(b[:, None], a.shape[:-1] + (1,)))[..., 0]
            else:
                x = xp.linalg.solve(a, b)
        except _LinAlgError:
            raise _singular("solve", a) from None
        ctx.vector = b.ndim == 1
        ctx.save_for_backward(a, x)
        return x

    @staticmethod
    def backward(ctx, g):
        a, x = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        if ctx.vector:
            g = _append_axes(g)
            x = _append_axes(x)
        gb = Solve.apply(_mT(a), g)
        ga = -MatMul.apply(gb, _mT(x)) if na else None
        if not nb:
            gb = None
        elif ctx.vector:
            gb = Reshape.apply(gb, gb.shape[:-1])
        return ga, gb

    @classmethod
    def output_shape(cls, a, b):
        return _solve_shape(a, b)

    @classmethod
    def output_dtype(cls, a, b):
        return _lapack_dtype(a, b)

    @staticmethod
    def api(a, b) -> Tensor:
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
        return Solve.apply(tensor_arg(a), tensor_arg(b))


@_linalg_function("det")
@expose
class Det(_DenseStack, Function):
    """Determinant of ``(..., n, n)`` matrices; output shape ``(...)``.

    Backward (Giles 2008, sec. 3.1): ``gA = g det(A) A^{-T}``. Needs an invertible ``A``: the
    gradient at a singular matrix (the adjugate) raises a ``LinAlgError`` naming det.
    """

    oper = "det"
    names = ()

    @staticmethod
    def forward(ctx, a):
        _square_input(a, "det")
        out = ctx.backend.linalg.det(a)
        ctx.save_for_backward(a, out)
        return out

    @staticmethod
    def backward(ctx, g):
        a, d = ctx.saved_tensors
        return _expand2(g * d) * _mT(_inv_for_grad(a, "det"))

    @classmethod
    def output_shape(cls, shape):
        return _square_shape(shape, "det")[:-2]

    @staticmethod
    def api(a) -> Tensor:
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
            Giles, "An extended collection of matrix derivative results for forward and
            reverse mode algorithmic differentiation", 2008.
        """
        return Det.apply(tensor_arg(a))


def _inv_for_grad(a, op):
    try:
        return Inv.apply(a)
    except _LinAlgError:
        raise _LinAlgError(
            f"{op}: the gradient at a singular matrix (shape {tuple(a.shape)}) is not supported: "
            "it needs the adjugate; perturb the matrix or use a nonsingular one"
        ) from None


#: ``slogdet``'s result, as NumPy's.
SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"], module="tapegrad.numpy.linalg")
SlogdetResult.__doc__ = """The result of :func:`tapegrad.numpy.linalg.slogdet` (a namedtuple, as
NumPy's): ``sign`` (no gradient) and ``logabsdet``, with ``det = sign * exp(logabsdet)``."""


@_linalg_function("slogdet")
@expose
class SlogDet(_DenseStack, Function):
    """``(sign, log|det|)`` of ``(..., n, n)`` matrices, both of shape ``(...)``.

    ``sign`` is non-differentiable. Backward of ``log|det A|`` (Giles 2008): ``gA = g A^{-T}``;
    a singular matrix (``sign == 0``) raises a ``LinAlgError`` naming slogdet.
    """

    oper = "slogdet"
    names = ()

    @staticmethod
    def forward(ctx, a):
        _square_input(a, "slogdet")
        sign, logabs = ctx.backend.linalg.slogdet(a)
        sign, logabs = ctx.backend.asarray(sign), ctx.backend.asarray(logabs)
        ctx.mark_non_differentiable(sign)
        ctx.save_for_backward(a)
        return sign, logabs

    @staticmethod
    def backward(ctx, gsign, glog):
        (a,) = ctx.saved_tensors
        return _expand2(glog) * _mT(_inv_for_grad(a, "slogdet"))

    @classmethod
    def output_shape(cls, shape):
        """Shapes of ``(sign, logabsdet)``: both ``shape[:-2]``."""
        batch = _square_shape(shape, "slogdet")[:-2]
        return [batch, batch]

    @classmethod
    def output_dtype(cls, dtype):
        """Dtypes of ``(sign, logabsdet)``: ``logabsdet`` is real, ``sign`` complex for a
        complex ``a``."""
        d = _lapack_dtype(dtype)
        return [d, np.zeros((), d).real.dtype]  # pyright: ignore[reportAttributeAccessIssue]

    @staticmethod
    def api(a) -> SlogdetResult:
        """Sign and natural log of the absolute determinant, each of shape ``(...)``.

        Args:
            a: Tensor of shape ``(..., n, n)``.

        Returns:
            ``SlogdetResult(sign, logabsdet)`` (a namedtuple, as NumPy); ``sign`` is +-1 (0 for
            a singular matrix, with ``logabsdet = -inf``) and carries no gradient;
            ``logabsdet`` has gradient ``g a^{-T}`` (Giles 2008), which raises ``LinAlgError``
            at a singular matrix.

        Raises:
            ValueError: if ``a`` is not ``(..., n, n)``.
        """
        sign, logabs = SlogDet.apply(tensor_arg(a))
        return SlogdetResult(sign, logabs)


@_linalg_function("cholesky")
@expose
class Cholesky(_DenseStack, Function):
    """Cholesky factor of symmetric positive-definite ``(..., n, n)`` matrices: lower ``L`` with
    ``A = L L^T`` (or, with ``upper=True``, ``U = L^T`` with ``A = U^T U``).

    The factor is that of the symmetric part ``(A + A^T) / 2`` (JAX's ``symmetrize_input``):
    for a symmetric ``A`` exactly NumPy's, and for any ``A`` the function whose derivative
    the rules compute, so finite differences agree with the gradient everywhere. (NumPy reads
    one triangle instead; its value differs from this one only for a non-symmetric ``A``.)

    Backward (Murray 2016, eq. 10, symmetrised as in PyTorch and JAX): with
    ``P = L^H conj(gL)`` and ``Phi(P)`` its lower triangle with the diagonal halved,
    ``gA = conj(L^{-H} (Phi(P) + Phi(P)^H) / 2 L^{-1})`` (JAX's convention for complex
    input; ``L^T``, ``Phi(P)^T`` and no conjugate for real input), a Hermitian matrix. It is
    the gradient for Hermitian perturbations of ``A``: differentiate
    ``cholesky((A + A^H) / 2)`` to compare with finite differences.
    """

    oper = "cholesky"
    names = ()

    @staticmethod
    def forward(ctx, a, upper=False):
        _square_input(a, "cholesky")
        xp = ctx.backend
        a = _hermitian_part(xp, a)
        try:
            if upper and xp is np:
                out = xp.linalg.cholesky(a, upper=True)
            elif upper:
                out = xp.swapaxes(xp.linalg.cholesky(xp.swapaxes(a, -1, -2)), -1, -2)
            else:
                out = xp.linalg.cholesky(a)
        except _LinAlgError:
            raise _LinAlgError(
                f"matrix is not positive definite (shape {tuple(a.shape)}, dtype {a.dtype}); "
                "cholesky needs a symmetric positive-definite matrix in every batch entry"
            ) from None
        ctx.upper = upper
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (lo,) = ctx.saved_tensors
        if ctx.upper:  # U = L^H: the cotangent of L is gU^H
            lo, g = _H(lo), _H(g)
        cplx = lo.dtype.kind == "c"
        n = lo.shape[-1]
        strict = _constant(g, lambda xp: xp.tri(n, k=-1, dtype=g.real.dtype))
        eye = _eye(n, g)
        lh = _H(lo)
        p = MatMul.apply(lh, _conj(g) if cplx else g)  # L^H conj(gL) (JAX's convention)
        ps = p * strict
        d = p * eye
        # M = (Phi(P) + Phi(P)^H) / 2, Phi: the lower triangle with the diagonal halved
        m = 0.5 * (ps + _H(ps)) + (0.25 * (d + _conj(d)) if cplx else 0.5 * d)
        x = Solve.apply(lh, m)  # L^{-H} M
        ga = _H(Solve.apply(lh, _H(x)))  # (L^{-H} M) L^{-1}
        return _conj(ga) if cplx else ga

    @classmethod
    def output_shape(cls, shape, upper=False):
        return _square_shape(shape, "cholesky")

    @staticmethod
    def api(a, upper=False) -> Tensor:
        """Cholesky factor of symmetric positive-definite matrices (NumPy ``linalg.cholesky``).

        Args:
            a: Tensor of shape ``(..., n, n)``, symmetric positive definite. The factor is
                computed from the symmetric part ``(a + a^T) / 2`` (as JAX): NumPy's value for
                a symmetric ``a``; for a non-symmetric one this function, not NumPy's (which
                reads one triangle), is the one the gradient differentiates.
            upper: Return upper ``U`` with ``a = U^T U`` instead of lower ``L`` with
                ``a = L L^T``.

        Returns:
            Tensor of shape ``(..., n, n)``, triangular.

        Raises:
            ValueError: if ``a`` is not ``(..., n, n)``.
            numpy.linalg.LinAlgError: if a matrix is not positive definite, naming cholesky.

        References:
            Murray, "Differentiation of the Cholesky decomposition", 2016. The gradient is the
            symmetric one (as PyTorch and JAX), the derivative of the function computed.
        """
        return Cholesky.apply(tensor_arg(a), upper=bool(upper))


# -- singular value decomposition ------------------------------------------------------------
def _matrix_dims(shape, op: str) -> tuple:
    """``(batch, m, n, k = min(m, n))`` of a (batch of) matrices' ``shape``.

    Raises:
        ValueError: for fewer than 2 dimensions, naming ``op``.
    """
    shape = tuple(shape)
    if len(shape) < 2:
        raise ValueError(
            f"{op}: a must be a (batch of) matrices of shape (..., m, n), got shape {shape}"
        )
    *batch, m, n = shape
    return tuple(batch), m, n, min(m, n)


def _svd_shapes(shape, full_matrices=False):
    batch, m, n, k = _matrix_dims(shape, "svd")
    if full_matrices:
        return [batch + (m, m), batch + (k,), batch + (n, n)]
    return [batch + (m, k), batch + (k,), batch + (k, n)]


#: ``svd``'s result, as NumPy's.
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"], module="tapegrad.numpy.linalg")
SVDResult.__doc__ = """The result of :func:`tapegrad.numpy.linalg.svd` (a namedtuple, as NumPy's):
``U``, the singular values ``S`` (real, descending) and ``Vh``, ``a = U @ (S[..., None] * Vh)``."""


@_linalg_function("svd")
@expose
class Svd(_DenseStack, Function):
    """Singular value decomposition ``A = U diag(S) Vh`` of real or complex ``(..., m, n)``
    matrices.

    Outputs, with ``k = min(m, n)``: ``U`` ``(..., m, k)`` (``(..., m, m)`` with
    ``full_matrices=True``), ``S`` ``(..., k)`` real and descending, ``Vh`` ``(..., k, n)``
    (``(..., n, n)``). As in NumPy, singular vectors are unique only up to a sign (real) or a
    phase (complex: ``U -> U D``, ``Vh -> D^* Vh`` with ``|D_ii| = 1``), so only functions of
    ``U`` and ``Vh`` invariant under that change (and any function of ``S``) have well-defined
    derivatives.

    Backward: the transpose of JAX's ``svd`` jvp (Townsend 2016; Wan and Zhang 2019 for the
    complex phase term), in JAX's convention (``^*`` conjugates, ``^T`` transposes, ``^H``
    both). With ``J = U^T gU``, ``K = V^T gV`` (``gV = gVh^H``), ``F_ij = 1 / (s_j^2 - s_i^2)``
    off the diagonal (0 on it)::

        C  = diag(gS) + F * ((J - J^H) S) + F * (S (K - K^H)) + diag(i Im(J_ii) / s_i)
        gA = U^* C V^T + (I - U^* U^T) gU S^{-1} V^T + U^* S^{-1} gV^H (I - V^* V^T)

    For real ``A`` this is the familiar ``U [skew(U^T gU) F S + S skew(V^T gV) F + diag(gS)]
    Vh + ...`` (PyTorch's formula). The phase term is JAX's gauge: the tangent of ``U`` carries
    the imaginary part of ``diag(U^H dA V) / S``, that of ``V`` none.

    The divisions are NaN-safe (0 where the numerator is 0): a loss of the singular values
    alone (a norm) has the finite gradient ``U^* diag(gS) V^T`` even with repeated or zero
    singular values. A loss that depends on the singular vectors of a repeated singular value
    has no derivative (the vectors are not unique): its gradient is inf/NaN, as in PyTorch
    and JAX (0 in the rare case that the cotangent's component coupling the two vectors is
    exactly 0, the NaN-safe division's convention).

    Raises:
        ValueError: for inputs with fewer than 2 dimensions; in backward, for
            ``full_matrices=True`` with ``m != n`` (the extra singular vectors are not
            unique; use ``full_matrices=False``, as in JAX).
        numpy.linalg.LinAlgError: if LAPACK does not converge.
    """

    oper = "svd"
    names = ()

    @staticmethod
    def forward(ctx, a, full_matrices=False):
        _svd_shapes(a.shape)
        _check_float(a, "svd")
        u, s, vh = ctx.backend.linalg.svd(a, full_matrices=full_matrices)
        ctx.full_matrices = full_matrices
        ctx.save_for_backward(u, s, vh)
        return u, s, vh

    @staticmethod
    def backward(ctx, gu, gs, gvh):
        u, s, vh = ctx.saved_tensors
        m, n = u.shape[-2], vh.shape[-1]
        k = s.shape[-1]
        if ctx.full_matrices and m != n:
            raise ValueError(
                f"svd: the gradient with full_matrices=True is defined only for square "
                f"matrices (got m={m}, n={n}): the extra singular vectors are not unique. "
                "Use svd(a, full_matrices=False)."
            )
        cplx = u.dtype.kind == "c"
        ut = _mT(u)
        uc = Conj.apply(u) if cplx else u  # U^*
        vt = Conj.apply(vh) if cplx else vh  # V^T = conj(Vh)
        s_row = _row(s)  # (..., 1, k): scales columns
        s_col = _append_axes(s)  # (..., k, 1): scales rows
        s2 = s * s
        eye = _eye(k, s)
        # e[i, j] = s_j^2 - s_i^2 off the diagonal and 1 on it (where the numerators are 0),
        # so no derivative of the division below ever divides by a structural zero.
        e = _row(s2) - _append_axes(s2) + eye
        utgu = MatMul.apply(ut, gu)  # J
        vtgv = MatMul.apply(vt, _H(gvh))  # K = V^T gV
        jj = utgu - _H(utgu)
        kk = vtgv - _H(vtgv)
        if cplx:  # J - J^H has the imaginary diagonal 2i Im(J_ii): not part of this term
            off = 1.0 - eye
            jj, kk = jj * off, kk * off
        inner = DivNoNan.apply(jj * s_row, e) + DivNoNan.apply(s_col * kk, e) + eye * _row(gs)
        if cplx:  # the phase term diag(i Im(J_ii) / s_i) (JAX's gauge)
            jdiag = Imag.apply(Sum.apply(utgu * eye, axis=-1))
            inner = inner + eye * _row(DivNoNan.apply(jdiag, s) * 1j)
        ga = MatMul.apply(MatMul.apply(uc, inner), vt)
        if m > k:  # (I - U^* U^T) gU S^{-1} V^T
            proj = gu - MatMul.apply(uc, utgu)
            ga = ga + MatMul.apply(DivNoNan.apply(proj, s_row), vt)
        if n > k:  # U^* S^{-1} gV^H (I - V^* V^T)
            proj = gvh - MatMul.apply(_H(vtgv), vt)
            ga = ga + MatMul.apply(uc, DivNoNan.apply(proj, s_col))
        return ga

    @classmethod
    def output_shape(cls, shape, full_matrices=False):
        """Shapes of ``(U, S, Vh)``."""
        return _svd_shapes(shape, full_matrices)

    @classmethod
    def output_dtype(cls, dtype, full_matrices=False):
        """Dtypes of ``(U, S, Vh)``: ``S`` is real, ``U`` and ``Vh`` complex for a complex
        ``a``; integers count as float64."""
        d = _lapack_dtype(dtype)
        return [d, _real_dtype(d), d]

    @staticmethod
    def api(a, full_matrices=True, compute_uv=True, hermitian=False):
        """Singular value decomposition ``a = U @ (S[..., None] * Vh)`` (NumPy ``linalg.svd``).

        Args:
            a: Tensor of shape ``(..., m, n)``; float32, float64, complex64 or complex128
                (integers become float64).
            full_matrices: ``U`` is ``(..., m, m)`` and ``Vh`` ``(..., n, n)`` if True (NumPy's
                default), else ``(..., m, k)`` and ``(..., k, n)`` with ``k = min(m, n)``.
            compute_uv: If False, return only ``S``.
            hermitian: Accepted for NumPy compatibility: the same decomposition is computed by
                the general routine (NumPy then uses ``eigh``; the singular values agree, the
                singular vectors may differ in sign or phase, which NumPy leaves arbitrary
                anyway).

        Returns:
            ``SVDResult(U, S, Vh)`` (a namedtuple, as NumPy), or ``S`` alone with
            ``compute_uv=False``; ``S`` has shape ``(..., k)``, real, descending; ``U`` and
            ``Vh`` have ``a``'s (floating) dtype.

        Gradient: Townsend (2016), with JAX's phase convention for complex input (Wan and
        Zhang 2019), see :class:`tapegrad.ops.Svd`. Functions of ``S`` alone are
        differentiable everywhere (a repeated or zero singular value included). Functions of
        ``U``/``Vh`` need distinct singular values (at a repeated one the gradient is inf/NaN,
        as in JAX and PyTorch) and must not depend on the vectors' arbitrary signs or phases.
        With ``full_matrices=True`` and ``m != n`` differentiating raises (the extra vectors
        are not unique; as in JAX): use ``full_matrices=False``.

        Raises:
            ValueError: if ``a`` has fewer than 2 dimensions.
            TypeError: for float16 or non-numeric inputs.
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
        a = tensor_arg(a)
        if not compute_uv:
            return Svd.apply(a, full_matrices=False)[1]
        return SVDResult(*Svd.apply(a, full_matrices=bool(full_matrices)))


# -- eigendecompositions ---------------------------------------------------------------------
def _eigen_inner(w: Tensor, gw: Tensor, x: Tensor, eye: Tensor) -> Tensor:
    """The inner matrix of the eigendecompositions' backward (Giles 2008): ``x``'s
    off-diagonal divided by ``w_j - w_i`` (NaN-safe: 0 where ``x`` is 0), and the eigenvalues'
    cotangent ``gw`` on the diagonal; ``eye`` is the identity of ``w``'s size."""
    e = _row(w) - _append_axes(w) + eye  # w_j - w_i off the diagonal, 1 on it
    return DivNoNan.apply(x * (1.0 - eye), e) + eye * _row(gw)


def _diag_part(t: Tensor, eye: Tensor) -> Tensor:
    """The diagonal ``(..., n)`` of ``(..., n, n)`` matrices (differentiable)."""
    return Sum.apply(t * eye, axis=-1)


def _on_host(xp, fn, *arrays):
    """``fn`` (a NumPy routine) on CuPy ``arrays`` through the host (CuPy lacks it)."""
    outs = fn(*[xp.asnumpy(a) for a in arrays])  # pragma: no cover - GPU only
    return tuple(xp.asarray(o) for o in outs)  # pragma: no cover - GPU only


#: ``eigh``'s result, as NumPy's.
EighResult = namedtuple(
    "EighResult", ["eigenvalues", "eigenvectors"], module="tapegrad.numpy.linalg"
)
#: ``eig``'s result, as NumPy's.
EigResult = namedtuple("EigResult", ["eigenvalues", "eigenvectors"], module="tapegrad.numpy.linalg")
#: ``qr``'s result, as NumPy's.
QRResult = namedtuple("QRResult", ["Q", "R"], module="tapegrad.numpy.linalg")
EighResult.__doc__ = """The result of :func:`tapegrad.numpy.linalg.eigh` (a namedtuple, as NumPy's):
``eigenvalues`` ``(..., n)`` real, ascending, and ``eigenvectors`` ``(..., n, n)``, the
columns."""
EigResult.__doc__ = """The result of :func:`tapegrad.numpy.linalg.eig` (a namedtuple, as NumPy's):
``eigenvalues`` ``(..., n)`` and ``eigenvectors`` ``(..., n, n)`` (columns of unit norm), both
complex."""
QRResult.__doc__ = """The result of :func:`tapegrad.numpy.linalg.qr` (a namedtuple, as NumPy's):
``Q`` with orthonormal columns and upper-triangular ``R``, ``a = Q @ R``."""


@_linalg_function("eigh")
@expose
class Eigh(_DenseStack, Function):
    """Eigendecomposition ``A = V diag(w) V^H`` of Hermitian (real symmetric) ``(..., n, n)``
    matrices.

    The decomposition is that of the Hermitian part ``(A + A^H) / 2`` (JAX's
    ``symmetrize_input``): for a Hermitian ``A`` exactly NumPy's, and for any ``A`` the
    function the derivative below differentiates, so finite differences agree with the
    gradient everywhere. (NumPy reads the ``UPLO`` triangle instead; ``UPLO`` is accepted and
    only picks the triangle LAPACK reads of the already Hermitian part.)

    Outputs: ``w`` ``(..., n)`` real, ascending; ``V`` ``(..., n, n)`` with orthonormal
    columns, ``a``'s dtype. Each eigenvector is unique only up to a sign (real) or a phase
    (complex).

    Derivative (Giles 2008, sec. 3.1; JAX's ``eigh`` jvp and convention): for a Hermitian
    tangent ``dA`` (this op takes ``(dA + dA^H) / 2``), with ``P = V^H dA V`` and
    ``F_ij = 1 / (w_j - w_i)`` off the diagonal (0 on it)::

        dw = Re diag(P),   dV = V (F * P)

    (JAX's gauge: ``V^H dV`` has a zero diagonal, so a complex eigenvector's phase does not
    move.) Backward, its transpose: ``gA = sym(V^* (diag(gw) + F * (V^T gV)) V^T)`` with
    ``sym(X) = (X + X^H) / 2``, a Hermitian matrix (as PyTorch and JAX): the derivative of the
    function computed, for every input.

    Repeated eigenvalues: ``F`` is inf there. The division is NaN-safe (0 where the numerator
    is 0), so a loss of the eigenvalues alone (``eigvalsh``) has the finite gradient
    ``V^* diag(gw) V^T`` everywhere; a loss that depends on the eigenvectors of a repeated
    eigenvalue has no derivative (they are not unique) and gets inf/NaN, as in JAX and
    PyTorch (0 in the rare case that the cotangent's component coupling the two eigenvectors
    is exactly 0, the NaN-safe division's convention).
    """

    oper = "eigh"
    names = ()

    @staticmethod
    def forward(ctx, a, UPLO="L"):  # noqa: N803 - NumPy's name
        _square_input(a, "eigh")
        xp = ctx.backend
        w, v = xp.linalg.eigh(_hermitian_part(xp, a), UPLO=UPLO)
        ctx.save_for_backward(w, v)
        return w, v

    @staticmethod
    def backward(ctx, gw, gv):
        w, v = ctx.saved_tensors
        inner = _eigen_inner(w, gw, MatMul.apply(_mT(v), gv), _eye(w.shape[-1], w))
        ga = MatMul.apply(MatMul.apply(_conj(v), inner), _mT(v))
        return (ga + _H(ga)) * 0.5

    @classmethod
    def output_shape(cls, shape, UPLO="L"):  # noqa: N803
        shape = _square_shape(shape, "eigh")
        return [shape[:-1], shape]

    @classmethod
    def output_dtype(cls, dtype, UPLO="L"):  # noqa: N803
        d = _lapack_dtype(dtype)
        return [_real_dtype(d), d]

    @staticmethod
    def api(a, UPLO="L") -> EighResult:  # noqa: N803
        """Eigenvalues and eigenvectors of Hermitian (real symmetric) matrices (NumPy
        ``linalg.eigh``).

        Args:
            a: Tensor of shape ``(..., n, n)``, real or complex (integers become float64),
                Hermitian. The decomposition is that of ``(a + a^H) / 2`` (as JAX): NumPy's
                for a Hermitian ``a``; for another ``a`` NumPy reads one triangle instead,
                and this function (whose gradient tapegrad computes) differs from it.
            UPLO: ``'L'`` or ``'U'`` (NumPy's; the Hermitian part has equal triangles).

        Returns:
            ``EighResult(eigenvalues, eigenvectors)`` (a namedtuple, as NumPy): ``(..., n)``
            real eigenvalues in ascending order and ``(..., n, n)`` eigenvectors (columns), of
            ``a``'s dtype.

        Gradient: Giles (2008), in JAX's convention; the gradient is Hermitian (for Hermitian
        perturbations, as JAX and PyTorch), see :class:`tapegrad.ops.Eigh`. Functions of the
        eigenvalues alone are differentiable everywhere, repeated eigenvalues included;
        functions of the eigenvectors must not depend on their sign or phase, and get an
        inf/NaN gradient at a repeated eigenvalue (the eigenvectors are not unique).

        Raises:
            ValueError: if ``a`` is not ``(..., n, n)`` or ``UPLO`` is not ``'L'``/``'U'``.
            TypeError: for float16 or non-numeric inputs.
            numpy.linalg.LinAlgError: if the decomposition does not converge.

        Example:
            >>> import tapegrad.numpy as tnp
            >>> tnp.linalg.eigh(tnp.asarray([[2.0, 1.0], [1.0, 2.0]])).eigenvalues
            Tensor([1., 3.], dtype=float32)
        """
        if UPLO not in ("L", "U"):
            raise ValueError(f"eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
        return EighResult(*Eigh.apply(tensor_arg(a), UPLO=UPLO))


def _complex_dtype(dtype) -> np.dtype:
    """The complex dtype of ``dtype``'s precision (complex128 for integers)."""
    d = _lapack_dtype(dtype)
    return np.result_type(d, np.complex64)


@_linalg_function("eig")
@expose
class Eig(Function):
    """Eigendecomposition ``A V = V diag(w)`` of general ``(..., n, n)`` matrices.

    Outputs are complex, also for real ``A`` (``complex64`` for float32, ``complex128`` for
    float64): ``w`` ``(..., n)`` and ``V`` ``(..., n, n)`` whose columns have unit 2-norm, as
    NumPy returns them. (NumPy returns real arrays when every eigenvalue of a real matrix
    happens to be real; a traced program needs dtypes that do not depend on values, so here
    they are always complex, as in JAX: take ``.real`` when you know them to be real.)

    Derivative (Giles 2008, sec. 3.1; Boeddeker et al. 2017, eq. 4.60): with
    ``P = V^{-1} dA V`` and ``F_ij = 1 / (w_j - w_i)`` off the diagonal (0 on it),
    ``dw = diag(P)`` and ``dV = V (X - diag((V^H V X)_ii))`` with ``X = F * P``: the second
    term is the gauge term that keeps every eigenvector at unit norm and fixes its phase
    (``v_i^H dv_i = 0``, the convention of JAX's ``eigh``; the normalization term of HIPS
    autograd's and PyTorch's rules). Backward, its transpose in JAX's convention::

        Z = V^T gV,   W = Z - V^T V^* diag(diag(Z)),
        gA = V^{-T} (diag(gw) + F * W) V^T

    and for real ``A`` its real part (JAX's rule for a real input of a complex computation),
    so the gradient of a real loss of ``eig(A)`` is real.

    Repeated eigenvalues: ``F`` is inf there. The division is NaN-safe (0 where the numerator
    is 0), so a loss of the eigenvalues alone (``eigvals``) has a finite gradient wherever
    ``V`` is invertible (a repeated eigenvalue with independent eigenvectors, such as the
    identity's, included); a loss of the eigenvectors of a repeated eigenvalue gets inf/NaN
    (0 where the cotangent coupling the two eigenvectors is exactly 0, the NaN-safe division's
    convention). At a defective matrix (a Jordan block: ``V`` singular) the eigenvalues are not
    differentiable (they move like the square root of a perturbation): the gradient is huge or
    inf/NaN where LAPACK's ``V`` is numerically singular, and raises ``LinAlgError`` where it
    is exactly singular. (Symmetric functions such as ``sum(w) = trace(A)`` stay exact.)
    """
    batch = classmethod(_stacked)  # vmap: the batch is one more stack dimension

    oper = "eig"
    names = ()

    @staticmethod
    def forward(ctx, a):
        _square_input(a, "eig")
        xp = ctx.backend
        cdt = _complex_dtype(a.dtype)
        if a.shape[-1] == 0:
            w = xp.zeros(a.shape[:-1], cdt)
            v = xp.zeros(a.shape, cdt)
        elif xp is np or hasattr(xp.linalg, "eig"):
            w, v = xp.linalg.eig(a)
        else:  # pragma: no cover - GPU only: CuPy has no general eig
            w, v = _on_host(xp, np.linalg.eig, a)
        w, v = w.astype(cdt, copy=False), v.astype(cdt, copy=False)
        ctx.real_input = a.dtype.kind != "c"
        ctx.save_for_backward(w, v)
        return w, v

    @staticmethod
    def backward(ctx, gw, gv):
        w, v = ctx.saved_tensors
        eye = _eye(w.shape[-1], w)
        vt = _mT(v)
        z = MatMul.apply(vt, gv)
        gram_t = MatMul.apply(vt, Conj.apply(v))  # (V^H V)^T
        inner = _eigen_inner(w, gw, z - gram_t * _row(_diag_part(z, eye)), eye)
        try:
            ga = Solve.apply(vt, MatMul.apply(inner, vt))
        except _LinAlgError:
            raise _LinAlgError(
                f"eig: the gradient at a defective matrix (shape {tuple(v.shape)}: its "
                "eigenvectors are linearly dependent) is not defined"
            ) from None
        return Real.apply(ga) if ctx.real_input else ga

    @classmethod
    def output_shape(cls, shape):
        shape = _square_shape(shape, "eig")
        return [shape[:-1], shape]

    @classmethod
    def output_dtype(cls, dtype):
        c = _complex_dtype(dtype)
        return [c, c]

    @staticmethod
    def api(a) -> EigResult:
        """Eigenvalues and right eigenvectors of square matrices (NumPy ``linalg.eig``).

        Args:
            a: Tensor of shape ``(..., n, n)``, real or complex (integers become float64).

        Returns:
            ``EigResult(eigenvalues, eigenvectors)`` (a namedtuple, as NumPy): ``(..., n)``
            eigenvalues (in LAPACK's order, not sorted) and ``(..., n, n)`` eigenvectors
            (columns, unit 2-norm), both complex: complex64 for float32/complex64 input,
            complex128 otherwise. Unlike NumPy, the result is complex also when every
            eigenvalue of a real matrix is real (a dtype that depends on values cannot be
            traced; JAX does the same).

        Gradient: Giles (2008) with the unit-norm gauge term, see :class:`tapegrad.ops.Eig`;
        real for a real ``a``. Functions of the eigenvalues are differentiable wherever the
        eigenvectors are independent; functions of the eigenvectors must not depend on their
        phase and get an inf/NaN gradient at a repeated eigenvalue.

        Raises:
            ValueError: if ``a`` is not ``(..., n, n)``.
            TypeError: for float16 or non-numeric inputs.
            numpy.linalg.LinAlgError: if the decomposition does not converge; when
                differentiating at a defective matrix whose computed eigenvectors are exactly
                dependent (nearly dependent ones give a huge or inf/NaN gradient).

        Example:
            >>> import tapegrad.numpy as tnp
            >>> tnp.linalg.eig(tnp.asarray([[0.0, -1.0], [1.0, 0.0]])).eigenvalues
            Tensor([0.+1.j, 0.-1.j], dtype=complex64)
        """
        return EigResult(*Eig.apply(tensor_arg(a)))


# -- QR ---------------------------------------------------------------------------------------
_QR_MODES = ("reduced", "complete", "r", "raw")


def _qr_shapes(shape, mode="reduced"):
    batch, m, n, k = _matrix_dims(shape, "qr")
    if mode == "complete":
        return [batch + (m, m), batch + (m, n)]
    return [batch + (m, k), batch + (k, n)]


def _triangle_mask(n: int, like: Tensor, k: int) -> Tensor:
    """The ``n x n`` upper-triangle mask ``j - i >= k`` in ``like``'s real dtype."""
    dt = _real_dtype(like.dtype)
    return _constant(like, lambda xp: xp.triu(xp.ones((n, n), dtype=dt), k))


def _qr_backward_tall(q, r, gq, gr):
    """``gA`` of ``Q, R = qr(A)`` for ``m >= n`` (reduced): the transpose of JAX's qr jvp
    (Walter and Lehmann 2018; Seeger et al. 2017), in JAX's convention::

        M = gR R^T - Q^T gQ,   N = triu(M, 1) + triu(M, 1)^H + Re diag(M),
        gA = (gQ + Q^* N) R^{-T}
    """
    n = r.shape[-1]
    m_ = MatMul.apply(gr, _mT(r)) - MatMul.apply(_mT(q), gq)
    upper = m_ * _triangle_mask(n, m_, 1)
    eye = _constant(m_, lambda xp: xp.eye(n, dtype=_real_dtype(m_.dtype)))
    diag = (Real.apply(m_) if m_.dtype.kind == "c" else m_) * eye
    nmat = upper + _H(upper) + diag
    b = gq + MatMul.apply(_conj(q), nmat)
    try:
        return _mT(Solve.apply(r, _mT(b)))
    except _LinAlgError:
        raise _LinAlgError(
            f"qr: the gradient needs a matrix of full column rank (R of shape "
            f"{tuple(r.shape)} is singular)"
        ) from None


@_linalg_function("qr")
@expose
class Qr(_DenseStack, Function):
    """QR decomposition ``A = Q R`` of ``(..., m, n)`` matrices, ``k = min(m, n)``.

    ``mode='reduced'``: ``Q`` ``(..., m, k)`` with orthonormal columns, ``R`` ``(..., k, n)``
    upper triangular; ``mode='complete'``: ``Q`` ``(..., m, m)`` unitary, ``R``
    ``(..., m, n)``. Both have ``a``'s (floating) dtype. The factors are LAPACK's (signs of
    ``R``'s diagonal as NumPy returns them). LAPACK's Householder step skips a column that is
    already reduced (its subdiagonal exactly zero and, for complex input, its diagonal real), so
    there the signs, and ``Q``, jump: the derivative is that of the factorization continued
    with the signs returned at the point (the one-sided derivatives differ; finite
    differences across such a point do not converge).

    Backward (Seeger et al. 2017; Walter and Lehmann 2018; the transpose of JAX's qr jvp, in
    JAX's convention), for ``m >= n``::

        M = gR R^T - Q^T gQ,   N = triu(M, 1) + triu(M, 1)^H + Re diag(M),
        gA = (gQ + Q^* N) R^{-T}

    For ``m < n`` (PyTorch's extension; JAX raises), ``A = [X | Y]`` with ``X`` square:
    ``Q, U = qr(X)``, ``R = [U | Q^H Y]``, so ``gY = Q^* gV`` and ``gX`` is the square rule
    with ``gQ + (Y gV^T)^*`` for ``gQ`` (``gR = [gU | gV]``).

    Differentiable for ``mode='reduced'`` at every shape, and for ``mode='complete'`` when
    ``m <= n`` (then it equals 'reduced'); ``complete`` with ``m > n`` raises in backward (the
    last ``m - n`` columns of ``Q`` are not unique), as in PyTorch. The rule needs ``R``'s
    leading ``k x k`` block invertible (full rank): a rank-deficient ``A`` raises
    ``LinAlgError`` when differentiated.
    """

    oper = "qr"
    names = ()

    @staticmethod
    def forward(ctx, a, mode="reduced"):
        if mode not in ("reduced", "complete"):  # the public qr maps 'r' to 'reduced'
            raise ValueError(f"qr: the primitive takes mode 'reduced' or 'complete', got "
                             f"{mode!r}")
        _qr_shapes(a.shape, mode)
        _check_float(a, "qr")
        xp = ctx.backend
        if xp is not np and a.ndim > 2:  # pragma: no cover - GPU only
            q, r = _qr_stacked(xp, a, mode)
        else:
            q, r = xp.linalg.qr(a, mode=mode)
        ctx.mode = mode
        ctx.save_for_backward(q, r)
        return q, r

    @staticmethod
    def backward(ctx, gq, gr):
        q, r = ctx.saved_tensors
        m, n = q.shape[-2], r.shape[-1]
        if m > n and ctx.mode == "complete":
            raise ValueError(
                f"qr: the gradient with mode='complete' is defined only for m <= n (got "
                f"m={m}, n={n}): the last m - n columns of Q are not unique. Use "
                "mode='reduced'."
            )
        if m >= n:
            return _qr_backward_tall(q, r, gq, gr)
        u = GetItem.apply(r, key=(Ellipsis, slice(None, m)))
        vpart = GetItem.apply(r, key=(Ellipsis, slice(m, None)))
        gu = GetItem.apply(gr, key=(Ellipsis, slice(None, m)))
        gvpart = GetItem.apply(gr, key=(Ellipsis, slice(m, None)))
        y = MatMul.apply(q, vpart)  # A's last n - m columns
        gq = gq + _conj(MatMul.apply(y, _mT(gvpart)))
        gx = _qr_backward_tall(q, u, gq, gu)
        gy = MatMul.apply(_conj(q), gvpart)
        return Concatenate.apply(gx, gy, axis=-1)

    @classmethod
    def output_shape(cls, shape, mode="reduced"):
        """Shapes of ``(Q, R)``."""
        return _qr_shapes(shape, mode)

    @classmethod
    def output_dtype(cls, dtype, mode="reduced"):
        d = _lapack_dtype(dtype)
        return [d, d]

    @staticmethod
    def api(a, mode="reduced"):
        """QR decomposition (NumPy ``linalg.qr``), batched over leading dimensions.

        Args:
            a: Tensor of shape ``(..., m, n)``, real or complex (integers become float64).
            mode: ``'reduced'`` (default): ``Q`` ``(..., m, k)``, ``R`` ``(..., k, n)`` with
                ``k = min(m, n)``; ``'complete'``: ``Q`` ``(..., m, m)``, ``R``
                ``(..., m, n)``; ``'r'``: ``R`` ``(..., k, n)`` alone. (NumPy's ``'raw'``
                Householder form is not supported: it is LAPACK's internal representation,
                with no useful derivative.)

        Returns:
            ``QRResult(Q, R)`` (a namedtuple, as NumPy), or ``R`` for ``mode='r'``.

        Gradient: Seeger et al. (2017) / Walter and Lehmann (2018), see
        :class:`tapegrad.ops.Qr`: every shape for ``'reduced'`` and ``'r'``; ``'complete'``
        only when ``m <= n`` (for ``m > n`` differentiating raises ``ValueError``). ``a``
        must have full rank (``min(m, n)``) to be differentiated.

        Raises:
            ValueError: if ``a`` has fewer than 2 dimensions or ``mode`` is unknown.
            TypeError: for float16 or non-numeric inputs.

        Example:
            >>> import tapegrad.numpy as tnp
            >>> q, r = tnp.linalg.qr(tnp.asarray([[3.0, 1.0], [4.0, 2.0]]))
            >>> abs(r[0, 0])
            Tensor(5., dtype=float32)
        """
        if mode not in _QR_MODES:
            raise ValueError(
                f"qr: unknown mode {mode!r}; use 'reduced', 'complete' or 'r'"
            )
        if mode == "raw":
            raise ValueError(
                "qr: mode='raw' (LAPACK's Householder reflectors) is not supported; use "
                "'reduced', 'complete' or 'r'"
            )
        a = tensor_arg(a)
        if mode == "r":
            return Qr.apply(a, mode="reduced")[1]
        return QRResult(*Qr.apply(a, mode=mode))


def _qr_stacked(xp, a, mode):  # pragma: no cover - GPU only
    """CuPy's qr on a stack of matrices, one matrix at a time if it has no batched qr."""
    try:
        return xp.linalg.qr(a, mode=mode)
    except (ValueError, TypeError, NotImplementedError):
        flat = a.reshape((-1,) + a.shape[-2:])
        pairs = [xp.linalg.qr(x, mode=mode) for x in flat]
        q = xp.stack([p[0] for p in pairs]).reshape(a.shape[:-2] + pairs[0][0].shape)
        r = xp.stack([p[1] for p in pairs]).reshape(a.shape[:-2] + pairs[0][1].shape)
        return q, r


# -- pseudo-inverse ---------------------------------------------------------------------------
class _NoValue:
    """The default of an argument that was not given (NumPy's ``<no value>``)."""

    def __repr__(self) -> str:
        return "<no value>"


_NO_VALUE = _NoValue()


def _stack_cutoff(v, a, op: str, name: str):
    """A cutoff for each matrix of ``a``'s stack: a float for a scalar, else the array
    broadcast to the stack shape ``a.shape[:-2]`` as nested tuples of floats (a static
    parameter of the op, as NumPy's and the array API's ``pinv`` take an array ``rtol``)."""
    if isinstance(v, Tensor):
        v = host_value(v)  # a cutoff carries no derivative: a guard under jit, never refused
    arr = np.asarray(v)
    if arr.dtype.kind not in "iuf":
        raise TypeError(
            f"{op}: {name} must be real (a number or a real array), got dtype {arr.dtype}"
        )
    if arr.ndim == 0:
        return float(arr)
    stack = tuple(a.shape[:-2])
    try:
        arr = np.broadcast_to(arr, stack)
    except ValueError:
        raise ValueError(
            f"{op}: {name} of shape {arr.shape} does not broadcast to the stack shape {stack} "
            f"of a (shape {tuple(a.shape)}); give one cutoff per matrix"
        ) from None
    return _nested_tuple(arr.astype(np.float64).tolist()) if stack else float(arr)


def _nested_tuple(v):
    return tuple(_nested_tuple(e) for e in v) if isinstance(v, list) else v


def _cutoff(rcond, rtol, a, op: str, default: float):
    """The relative cutoff of ``pinv`` from NumPy's ``rcond``/``rtol`` pair: a float, or one
    per matrix of the stack (nested tuples)."""
    if rcond is None:
        if rtol is _NO_VALUE:
            return default
        if rtol is None:
            eps = _tg_dtypes.finfo(_real_dtype(_lapack_dtype(a.dtype))).eps
            return float(max(a.shape[-2:]) * eps)
        return _stack_cutoff(rtol, a, op, "rtol")
    if rtol is not _NO_VALUE:
        raise ValueError(f"{op}: rtol and rcond can't both be set")
    return _stack_cutoff(rcond, a, op, "rcond")


def _pinv_shape(shape):
    shape = tuple(shape)
    if len(shape) < 2:
        raise ValueError(
            f"pinv: a must be a (batch of) matrices of shape (..., m, n), got shape {shape}"
        )
    return shape[:-2] + (shape[-1], shape[-2])


@_linalg_function("pinv")
@expose
class Pinv(_DenseStack, Function):
    """Moore-Penrose pseudo-inverse ``P`` ``(..., n, m)`` of ``(..., m, n)`` matrices, by the
    SVD with singular values ``<= rcond * max(s)`` treated as zero (NumPy's algorithm).

    Derivative (Golub and Pereyra 1973, Theorem 4.3; JAX's ``pinv`` jvp), valid where the
    rank is locally constant (the discarded singular values stay discarded)::

        dP = -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P

    Backward, its transpose in JAX's convention::

        gA = -P^T g P^T + ((I - A P) g^T P P^H)^* + (P^H P g^T (I - P A))^*

    At a matrix whose rank would change under perturbation (a singular value exactly at the
    cutoff) the pseudo-inverse is discontinuous and this is the derivative of the constant-rank
    branch.
    """

    oper = "pinv"
    names = ()

    @staticmethod
    def forward(ctx, a, rcond=1e-15):
        _pinv_shape(a.shape)
        _check_float(a, "pinv")
        xp = ctx.backend
        if xp is np:
            p = np.linalg.pinv(a, rcond=np.asarray(rcond) if type(rcond) is tuple else rcond)
        else:  # pragma: no cover - GPU only: NumPy's algorithm on CuPy
            p = _pinv_svd(xp, a, rcond)
        ctx.save_for_backward(a, p)
        return p

    @staticmethod
    def backward(ctx, g):
        a, p = ctx.saved_tensors
        m, n = a.shape[-2], a.shape[-1]
        pt = _mT(p)
        ph = _H(p)
        gt = _mT(g)
        ga = -MatMul.apply(MatMul.apply(pt, g), pt)
        e1 = _eye(m, p) - MatMul.apply(a, p)
        e2 = _eye(n, p) - MatMul.apply(p, a)
        ga = ga + _conj(MatMul.apply(MatMul.apply(e1, gt), MatMul.apply(p, ph)))
        ga = ga + _conj(MatMul.apply(MatMul.apply(ph, p), MatMul.apply(gt, e2)))
        return ga

    @classmethod
    def output_shape(cls, shape, rcond=1e-15):
        return _pinv_shape(shape)

    @staticmethod
    def api(a, rcond=None, hermitian=False, *, rtol=_NO_VALUE) -> Tensor:
        """Moore-Penrose pseudo-inverse (NumPy ``linalg.pinv``), batched.

        Args:
            a: Tensor of shape ``(..., m, n)``, real or complex (integers become float64).
            rcond: Relative cutoff: singular values ``<= rcond * max(s)`` count as zero. A
                number, or a real array broadcasting to the stack shape ``a.shape[:-2]`` (one
                cutoff per matrix). NumPy's default: ``1e-15`` when neither ``rcond`` nor
                ``rtol`` is given.
            hermitian: Accepted for NumPy compatibility; the general SVD is used (same
                result).
            rtol: NumPy 2's (and the array API's) name for the cutoff, number or array as
                ``rcond``; ``rtol=None`` means ``max(m, n) * eps``. Give at most one of
                ``rcond`` and ``rtol``.

        Returns:
            Tensor of shape ``(..., n, m)`` and ``a``'s (floating) dtype.

        Gradient: Golub and Pereyra (1973), see :class:`tapegrad.ops.Pinv`; exact where the
        rank is locally constant (for a rank-deficient ``a``: perturbations that keep the
        rank), as JAX. The rule divides by no singular-value gaps, so repeated singular values
        are harmless; where a singular value crosses the cutoff (the rank changes) ``pinv`` is
        discontinuous and the gradient is that of the constant-rank branch.

        Raises:
            ValueError: if ``a`` has fewer than 2 dimensions, both ``rcond`` and ``rtol``
                are given, or an array cutoff does not broadcast to the stack shape.
            TypeError: if the cutoff is not real or is a traced Tensor; for float16 or
                non-numeric input.

        Example:
            >>> import tapegrad.numpy as tnp
            >>> tnp.linalg.pinv(tnp.asarray([[2.0, 0.0], [0.0, 0.0]]))
            Tensor([[0.5, 0. ],
                    [0. , 0. ]], dtype=float32)
        """
        a = tensor_arg(a)
        _pinv_shape(a.shape)
        return Pinv.apply(a, rcond=_cutoff(rcond, rtol, a, "pinv", 1e-15))


def _pinv_svd(xp, a, rcond):  # pragma: no cover - GPU only
    """NumPy's pinv algorithm with the backend's SVD."""
    m, n = a.shape[-2:]
    if m == 0 or n == 0:
        return xp.zeros(a.shape[:-2] + (n, m), dtype=_lapack_dtype(a.dtype))
    u, s, vh = xp.linalg.svd(a, full_matrices=False)
    if type(rcond) is tuple:  # one cutoff per matrix of the stack
        rcond = xp.asarray(rcond, dtype=s.dtype)[..., None]
    cutoff = rcond * s.max(axis=-1, keepdims=True)
    large = s > cutoff
    sinv = xp.where(large, 1.0 / xp.where(large, s, 1.0), 0.0).astype(s.dtype)
    return xp.matmul(xp.conj(xp.swapaxes(vh, -1, -2)) * sinv[..., None, :],
                     xp.conj(xp.swapaxes(u, -1, -2)))
