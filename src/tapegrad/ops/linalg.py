"""Linear-algebra primitives: matmul, einsum, inv, solve, det, slogdet, cholesky, norms.

Every backward rule is written with tapegrad ops (matmul, einsum, solve, ...) on the saved
input/output Tensors, so second and higher derivatives work. Matrix rules follow

* M. B. Giles, "An extended collection of matrix derivative results for forward and reverse
  mode algorithmic differentiation", Oxford NA report 08/01, 2008 (inv, solve, det, slogdet);
* I. Murray, "Differentiation of the Cholesky decomposition", arXiv:1602.07527, 2016
  (cholesky);
* J. Townsend, "Differentiating the singular value decomposition", 2016 (svd).

Batched operands have shape ``(..., n, n)``; batch dimensions broadcast like NumPy's
``numpy.linalg`` gufuncs and ``apply`` sums cotangents back over broadcast dimensions.
On CUDA (CuPy) singular or indefinite matrices may go undetected (CuPy does not check by
default) and give inf/NaN instead of a ``LinAlgError``.
"""

from __future__ import annotations

import string

import numpy as np

from tapegrad.function import Function

__all__ = [
    "MatMul",
    "Einsum",
    "Inv",
    "Solve",
    "Det",
    "SlogDet",
    "Cholesky",
    "Svd",
    "parse_einsum",
]

_LinAlgError = np.linalg.LinAlgError


# -- matmul ---------------------------------------------------------------------------------
def _matmul_shape(a, b):
    a, b = tuple(a), tuple(b)
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


class MatMul(Function):
    """NumPy ``matmul`` (``a @ b``): 1-D operands are promoted to matrices and the added axis is
    removed; batch dimensions broadcast.

    Backward (for 2-D): ``ga = g @ b.T``, ``gb = a.T @ g``; 1-D and batched cases reshape to
    that form and sum over broadcast batch dimensions.
    """

    oper = "matmul"

    @staticmethod
    def forward(ctx, a, b):
        if a.ndim == 0 or b.ndim == 0 or a.shape[-1] != b.shape[0 if b.ndim == 1 else -2]:
            _matmul_shape(a.shape, b.shape)
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, g):
        from tapegrad import numpy as tnp

        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        a_vec, b_vec = a.ndim == 1, b.ndim == 1
        if a_vec and b_vec:  # inner product -> scalar
            return (g * b if na else None), (g * a if nb else None)
        a2 = tnp.reshape(a, (1, a.shape[0])) if a_vec else a
        b2 = tnp.reshape(b, (b.shape[0], 1)) if b_vec else b
        g2 = g
        if a_vec:
            g2 = tnp.expand_dims(g2, -2)
        if b_vec:
            g2 = tnp.expand_dims(g2, -1)
        ga = gb = None
        if na:
            ga = tnp.matmul(g2, tnp.swapaxes(b2, -1, -2))
            ga = _sum_to_ndim(ga, a2.ndim)
            if a_vec:
                ga = tnp.reshape(ga, a.shape)
        if nb:
            gb = tnp.matmul(tnp.swapaxes(a2, -1, -2), g2)
            gb = _sum_to_ndim(gb, b2.ndim)
            if b_vec:
                gb = tnp.reshape(gb, b.shape)
        return ga, gb

    @classmethod
    def output_shape(cls, a, b):
        return _matmul_shape(a, b)

    @staticmethod
    def jvp(ctx, ta, tb):
        a, b = ctx.saved_tensors
        ga = None if ta is None else MatMul.apply(ta, b)
        gb = None if tb is None else MatMul.apply(a, tb)
        return ga if gb is None else (gb if ga is None else ga + gb)


def _sum_to_ndim(t, ndim):
    from tapegrad import numpy as tnp

    extra = t.ndim - ndim
    if extra > 0:
        t = tnp.sum(t, axis=tuple(range(extra)))
    return t


# -- einsum ---------------------------------------------------------------------------------
_LETTERS = string.ascii_letters


def _shapes_str(shapes) -> str:
    return ", ".join(str(tuple(s)) for s in shapes)


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

    oper = "einsum"

    @staticmethod
    def forward(ctx, *operands, subscripts, optimize=False):
        inputs, output, _ = parse_einsum(subscripts, [o.shape for o in operands])
        expr = ",".join(inputs) + "->" + output
        ctx.inputs, ctx.output, ctx.optimize = inputs, output, optimize
        ctx.save_for_backward(*operands)
        return ctx.backend.einsum(expr, *operands, optimize=optimize)

    @staticmethod
    def backward(ctx, g):
        from tapegrad import numpy as tnp

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
                    eye = tnp.eye(sizes[lab], dtype=g.dtype, device=g.device)
                    extra.append((eye, lab + f))
                    result.append(f)
                    continue
                seen.add(lab)
                result.append(lab)
                if lab not in sized:
                    extra.append((tnp.ones((sizes[lab],), dtype=g.dtype, device=g.device), lab))
                    sized.add(lab)
            terms = others + extra
            expr = ",".join(lb for _, lb in terms) + "->" + "".join(result)
            gk = Einsum.apply(*[t for t, _ in terms], subscripts=expr, optimize=optimize)
            if gk.shape != op.shape:
                gk = tnp.reshape(gk, op.shape)
            grads.append(gk)
        return tuple(grads)

    @classmethod
    def output_shape(cls, *shapes, subscripts, optimize=False):
        return _einsum_shape(subscripts, shapes)


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


def _mT(t):
    from tapegrad import numpy as tnp

    return tnp.swapaxes(t, -1, -2)


def _expand2(t):
    from tapegrad import numpy as tnp

    return tnp.expand_dims(tnp.expand_dims(t, -1), -1)


def _singular(op: str, a) -> _LinAlgError:
    return _LinAlgError(
        f"matrix is singular (shape {tuple(a.shape)}, dtype {a.dtype}); {op} needs an "
        "invertible matrix (in every batch entry)"
    )


class Inv(Function):
    """Matrix inverse ``X = A^{-1}`` of ``(..., n, n)``.

    Backward (Giles 2008, sec. 3.1): ``gA = -X^T g X^T``.
    """

    oper = "inv"

    @staticmethod
    def forward(ctx, a):
        _square_shape(a.shape, "inv")
        _check_float(a, "inv")
        try:
            out = ctx.backend.linalg.inv(a)
        except _LinAlgError:
            raise _singular("inv", a) from None
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        from tapegrad import numpy as tnp

        (x,) = ctx.saved_tensors
        xt = _mT(x)
        return -tnp.matmul(tnp.matmul(xt, g), xt)

    @classmethod
    def output_shape(cls, shape):
        return _square_shape(shape, "inv")


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


class Solve(Function):
    """Solve ``A X = B`` for ``X`` (NumPy 2 rules: a 1-D ``b`` is a vector, any other ``b`` a
    (batch of) matrices; batch dimensions broadcast).

    Backward (Giles 2008, sec. 3.1): ``gB = A^{-T} g`` (one more solve) and ``gA = -gB X^T``.
    """

    oper = "solve"

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
        from tapegrad import numpy as tnp

        a, x = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        if ctx.vector:
            g = tnp.expand_dims(g, -1)
            x = tnp.expand_dims(x, -1)
        gb = Solve.apply(_mT(a), g)
        ga = -tnp.matmul(gb, _mT(x)) if na else None
        if not nb:
            gb = None
        elif ctx.vector:
            gb = tnp.reshape(gb, gb.shape[:-1])
        return ga, gb

    @classmethod
    def output_shape(cls, a, b):
        return _solve_shape(a, b)


class Det(Function):
    """Determinant of ``(..., n, n)`` matrices; output shape ``(...)``.

    Backward (Giles 2008, sec. 3.1): ``gA = g det(A) A^{-T}``. Needs an invertible ``A``: the
    gradient at a singular matrix (the adjugate) raises a ``LinAlgError`` naming det.
    """

    oper = "det"

    @staticmethod
    def forward(ctx, a):
        _square_shape(a.shape, "det")
        _check_float(a, "det")
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


def _inv_for_grad(a, op):
    try:
        return Inv.apply(a)
    except _LinAlgError:
        raise _LinAlgError(
            f"{op}: the gradient at a singular matrix (shape {tuple(a.shape)}) is not supported: "
            "it needs the adjugate; perturb the matrix or use a nonsingular one"
        ) from None


class SlogDet(Function):
    """``(sign, log|det|)`` of ``(..., n, n)`` matrices, both of shape ``(...)``.

    ``sign`` is non-differentiable. Backward of ``log|det A|`` (Giles 2008): ``gA = g A^{-T}``;
    a singular matrix (``sign == 0``) raises a ``LinAlgError`` naming slogdet.
    """

    oper = "slogdet"

    @staticmethod
    def forward(ctx, a):
        _square_shape(a.shape, "slogdet")
        _check_float(a, "slogdet")
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
        return batch, batch


class Cholesky(Function):
    """Cholesky factor of symmetric positive-definite ``(..., n, n)`` matrices: lower ``L`` with
    ``A = L L^T`` (or, with ``upper=True``, ``U = L^T`` with ``A = U^T U``). Like NumPy, only the
    lower (upper) triangle of ``A`` is read.

    Backward (Murray 2016, eq. 10, symmetrised as in PyTorch and JAX): with
    ``P = L^T gL`` and ``Phi(P)`` its lower triangle with the diagonal halved,
    ``gA = L^{-T} (Phi(P) + Phi(P)^T) / 2 L^{-1}``, a symmetric matrix. It is the gradient
    for symmetric perturbations of ``A``: differentiate ``cholesky((A + A^T) / 2)`` to compare
    with finite differences.
    """

    oper = "cholesky"

    @staticmethod
    def forward(ctx, a, upper=False):
        _square_shape(a.shape, "cholesky")
        _check_float(a, "cholesky")
        xp = ctx.backend
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
        from tapegrad import numpy as tnp

        (lo,) = ctx.saved_tensors
        if ctx.upper:
            lo, g = _mT(lo), _mT(g)
        n = lo.shape[-1]
        strict = tnp.tri(n, k=-1, dtype=g.dtype, device=g.device)
        eye = tnp.eye(n, dtype=g.dtype, device=g.device)
        p = tnp.matmul(_mT(lo), g)
        ps = p * strict
        m = 0.5 * (ps + _mT(ps) + p * eye)
        lt = _mT(lo)
        x = Solve.apply(lt, m)  # L^{-T} M
        return _mT(Solve.apply(lt, _mT(x)))  # (L^{-T} M) L^{-1}

    @classmethod
    def output_shape(cls, shape, upper=False):
        return _square_shape(shape, "cholesky")


# -- singular value decomposition ------------------------------------------------------------
def _svd_shapes(shape, full_matrices=False):
    shape = tuple(shape)
    if len(shape) < 2:
        raise ValueError(
            f"svd: a must be a (batch of) matrices of shape (..., m, n), got shape {shape}"
        )
    *batch, m, n = shape
    k = min(m, n)
    batch = tuple(batch)
    if full_matrices:
        return [batch + (m, m), batch + (k,), batch + (n, n)]
    return [batch + (m, k), batch + (k,), batch + (k, n)]


class Svd(Function):
    """Singular value decomposition ``A = U diag(S) Vh`` of ``(..., m, n)`` matrices.

    Outputs, with ``k = min(m, n)``: ``U`` ``(..., m, k)`` (``(..., m, m)`` with
    ``full_matrices=True``), ``S`` ``(..., k)`` in descending order, ``Vh`` ``(..., k, n)``
    (``(..., n, n)``). As in NumPy, the signs of singular vectors are arbitrary, so only
    sign-invariant functions of ``U`` and ``Vh`` (and any function of ``S``) have well-defined
    derivatives.

    Backward (Townsend 2016; the same form as PyTorch's), with ``E_ij = s_j^2 - s_i^2`` off
    the diagonal (1 on it),
    ``skew(X) = X - X^T``, ``gV = gVh^T``::

        gA = U [skew(U^T gU) / E * S + S * skew(V^T gV) / E + diag(gS)] Vh
             + (I - U U^T) gU S^{-1} Vh + U S^{-1} gV^T (I - V V^T)

    The divisions are NaN-safe (0 where the numerator is 0): a loss of the singular values
    alone (a norm) has the finite gradient ``U diag(gS) Vh`` even with repeated or zero
    singular values. A loss that depends on the singular vectors of a repeated singular value
    has no derivative (the vectors are not unique), and its gradient is inf/NaN, as in PyTorch
    and JAX.

    Raises:
        ValueError: for inputs with fewer than 2 dimensions; in backward, for
            ``full_matrices=True`` with ``m != n`` (the extra singular vectors are not
            unique; use ``full_matrices=False``, as in JAX).
        numpy.linalg.LinAlgError: if LAPACK does not converge.
    """

    oper = "svd"

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
        from tapegrad import numpy as tnp
        from tapegrad.ops.elementwise import DivNoNan

        u, s, vh = ctx.saved_tensors
        m, n = u.shape[-2], vh.shape[-1]
        k = s.shape[-1]
        if ctx.full_matrices and m != n:
            raise ValueError(
                f"svd: the gradient with full_matrices=True is defined only for square "
                f"matrices (got m={m}, n={n}): the extra singular vectors are not unique. "
                "Use svd(a, full_matrices=False)."
            )
        ut = _mT(u)
        v = _mT(vh)
        gv = _mT(gvh)
        s_row = tnp.expand_dims(s, -2)  # (..., 1, k): scales columns
        s_col = tnp.expand_dims(s, -1)  # (..., k, 1): scales rows
        s2 = s * s
        eye = tnp.eye(k, dtype=gs.dtype, device=gs.device)
        # e[i, j] = s_j^2 - s_i^2 off the diagonal and 1 on it (where skew(.) is 0 anyway),
        # so no derivative of the division below ever divides by a structural zero.
        e = tnp.expand_dims(s2, -2) - tnp.expand_dims(s2, -1) + eye
        utgu = tnp.matmul(ut, gu)
        vtgv = tnp.matmul(vh, gv)
        j = DivNoNan.apply(utgu - _mT(utgu), e)
        kk = DivNoNan.apply(vtgv - _mT(vtgv), e)
        inner = j * s_row + s_col * kk + eye * tnp.expand_dims(gs, -2)
        ga = tnp.matmul(tnp.matmul(u, inner), vh)
        if m > k:  # (I - U U^T) gU S^{-1} Vh
            proj = gu - tnp.matmul(u, utgu)
            ga = ga + tnp.matmul(DivNoNan.apply(proj, s_row), vh)
        if n > k:  # U S^{-1} gV^T (I - V V^T)
            proj = gv - tnp.matmul(v, vtgv)
            ga = ga + tnp.matmul(u, DivNoNan.apply(_mT(proj), s_col))
        return ga

    @classmethod
    def output_shape(cls, shape, full_matrices=False):
        """Shapes of ``(U, S, Vh)``."""
        return _svd_shapes(shape, full_matrices)

    @classmethod
    def output_dtype(cls, dtype, full_matrices=False):
        d = np.dtype(dtype)
        if d.kind != "f":
            d = np.dtype(np.float64)
        return [d, d, d]


# -- norms ----------------------------------------------------------------------------------
