"""``tapegrad.scipy.linalg``: SciPy's linear algebra with SciPy's signatures, differentiable.

``cholesky``, ``solve_triangular``, ``solve_sylvester``, ``expm``, ``logm``, ``sqrtm``, ``inv``
and ``det``. Matrices may be batched ``(..., n, n)`` (batch dimensions broadcast); forward
values are SciPy's (``scipy.linalg``, one call per matrix; CuPy arrays make a round trip
through host memory), ``inv`` and ``det`` are :mod:`tapegrad.numpy.linalg`'s. Every function
is differentiable to any order in reverse and forward mode (each rule is written with the
functions of this module, so it differentiates again) and batches under ``vmap``.

Complex matrices follow JAX's convention: for the holomorphic functions (``expm``, ``logm``,
``sqrtm``, ``solve_sylvester``, ``solve_triangular`` with ``trans`` 0 or 1, ``inv``, ``det``)
the rules use plain transposes, not conjugate ones (the cotangent of ``A`` is
``g f'(A)``); ``cholesky`` (which reads one triangle of a Hermitian matrix) and ``trans='C'``
are differentiated as the real-differentiable maps they are.

Dtypes: float32 (complex64) in gives float32 (complex64) out, integers give float64; ``logm``
and ``sqrtm`` of a real matrix with eigenvalues on the negative real axis are complex, as in
SciPy (their cotangent for the real input is then the real part, JAX's convention).

References:
    N. J. Higham, "Functions of Matrices: Theory and Computation", SIAM 2008 (Thm. 3.6: the
    Frechet derivative of a primary matrix function from the function of a block triangular
    matrix; sec. 6.1: the square root's derivative solves a Sylvester equation).
    I. Najfeld and T. F. Havel, "Derivatives of the matrix exponential and their
    computation", Adv. Appl. Math. 16, 1995.
    M. B. Giles, "An extended collection of matrix derivative results for forward and reverse
    mode algorithmic differentiation", 2008 (triangular solves, Sylvester equations).
    I. Murray, "Differentiation of the Cholesky decomposition", arXiv:1602.07527, 2016.
"""

from __future__ import annotations

import numpy as np

import tapegrad.numpy as tnp
from tapegrad.core import dtypes as _tg_dtypes
from tapegrad.core.function import Function, Traits
from tapegrad.core.tensor import Tensor
from tapegrad.ops._batching import align
from tapegrad.ops._registry import tensor_arg
from tapegrad.scipy._base import fit_dtype, on_host
from tapegrad.transforms.vmap import loop

__all__ = ["cholesky", "solve_triangular", "solve_banded", "solve_sylvester", "expm", "logm",
           "sqrtm", "inv", "det"]

LinAlgError = np.linalg.LinAlgError


# -- helpers ---------------------------------------------------------------------------------
def _mT(t):
    """Swap the last two axes (differentiable)."""
    return tnp.swapaxes(t, -1, -2)


def _mH(t):
    """Conjugate transpose of the last two axes."""
    t = _mT(t)
    return tnp.conj(t) if t.dtype.kind == "c" else t


def _square(name, arg, shape):
    shape = tuple(shape)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(
            f"{name}: {arg} must be a square matrix or a batch of them, shape (..., n, n); got "
            f"shape {shape}"
        )
    return shape


def _checked(name, arg, x):
    """``x`` as a Tensor of a dtype the decompositions take (see :func:`_check_dtype`)."""
    if isinstance(x, np.ndarray) and x.dtype.kind not in "fciub":
        _check_dtype(name, arg, x)  # a non-numeric array cannot become a Tensor: say so here
    t = tensor_arg(x)
    _check_dtype(name, arg, t)
    return t


def _check_dtype(name, arg, t):
    if (t.dtype.kind not in "fciub" and t.dtype != _tg_dtypes.bfloat16) or (
            t.dtype == np.float16):
        raise TypeError(
            f"{name}: {arg} has dtype {t.dtype} (shape {t.shape}); expected float32, float64, "
            "complex64, complex128 or bfloat16 (integers are computed in float64, bfloat16 in "
            "float32)"
        )


def _batch(name, shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(
            f"{name}: batch dimensions {', '.join(str(tuple(s)) for s in shapes)} do not "
            "broadcast"
        ) from None


def _loop(fn, arrays, cores, out_core, dtype):
    """``fn`` (a 2-D SciPy routine) over the broadcast batch of ``arrays`` (``cores[i]`` core
    dimensions each): an array of shape ``batch + out_core``. ``dtype``: the result dtype
    for an empty batch or empty matrices (no call is made then)."""
    batch = np.broadcast_shapes(*[a.shape[: a.ndim - c] for a, c in zip(arrays, cores)])
    full = [np.broadcast_to(a, batch + a.shape[a.ndim - c:]) for a, c in zip(arrays, cores)]
    if 0 in batch or 0 in out_core or any(0 in a.shape[a.ndim - c:]
                                          for a, c in zip(arrays, cores)):
        return np.zeros(batch + tuple(out_core), dtype)
    if not batch:
        return np.asarray(fn(*full))
    res = [np.asarray(fn(*[a[idx] for a in full])) for idx in np.ndindex(*batch)]
    out = np.stack(res).reshape(batch + res[0].shape)
    return out


def _result_dtype(*dtypes):
    """SciPy's LAPACK dtype for these input dtypes, then tapegrad's float32 rule."""
    d = np.result_type(*[np.dtype(x) if np.dtype(x).kind in "fc" else np.float64
                         for x in dtypes])
    return d


def _host(ctx, fn, *arrays):
    """``fn`` on host arrays (a round trip for CuPy)."""
    return on_host(ctx.backend, fn, *arrays)


def _real_part_for(x, g):
    """The cotangent ``g`` for input ``x``: its real part if ``x`` is real (JAX's convention
    for a real input of a complex result)."""
    if g is not None and x.dtype.kind != "c" and g.dtype.kind == "c":
        return tnp.real(g)
    return g


def _stacked(cls, args, batched, size, **params):
    """Batching rule of a one-matrix op: the batch is one more leading batch dimension."""
    return cls.apply(*args, **params)


def _aligned(cores):
    """Batching rule of an op of several operands with ``cores[i]`` core dimensions each:
    batched operands get size-1 axes so that the per-example batch dimensions line up."""

    def rule(cls, args, batched, size, **params):
        nd = max(a.ndim - b - c for a, b, c in zip(args, batched, cores))
        out = [align([a], [True], nd + c)[0] if b else a
               for a, b, c in zip(args, batched, cores)]
        return cls.apply(*out, **params)

    return classmethod(rule)


# -- solve_triangular ------------------------------------------------------------------------
def _tri_mask(t, lower, unit):
    """The triangle of ``t`` that a triangular solve reads (strict when ``unit``)."""
    k = -1 if unit else 0
    return tnp.tril(t, k) if lower else tnp.triu(t, -k)


def _op(t, trans):
    return _mT(t) if trans else t


class SolveTriangular(Function):
    """``op(A) x = b`` for triangular ``A`` (primitive of :func:`solve_triangular`;
    ``trans`` 0 or 1, ``trans='C'`` is composed with ``conj``)."""

    oper = "solve_triangular"

    @staticmethod
    def forward(ctx, a, b, trans=0, lower=False, unit_diagonal=False, check_finite=True):
        import scipy.linalg as sl

        if trans not in (0, 1):  # the public function composes trans='C' (2) with conj
            raise ValueError(f"solve_triangular: the primitive takes trans 0 or 1, got {trans!r}")
        vector = b.ndim == 1
        ctx.vector = vector
        ctx.flags = (trans, lower, unit_diagonal)
        ctx.real = (a.dtype.kind != "c", b.dtype.kind != "c")

        def solve(a2, b2):
            return sl.solve_triangular(a2, b2, trans=trans, lower=lower,
                                       unit_diagonal=unit_diagonal,
                                       check_finite=check_finite)

        dtype = _result_dtype(a.dtype, b.dtype)
        if vector:
            x = _host(ctx, lambda a_, b_: _loop(solve, [a_, b_], [2, 1], (a.shape[-1],),
                                                dtype), a, b)
        else:
            x = _host(ctx, lambda a_, b_: _loop(solve, [a_, b_], [2, 2], b.shape[-2:], dtype),
                      a, b)
        x = fit_dtype(ctx.backend, x, (a, b))
        ctx.save_for_backward(a, x)
        return x

    @staticmethod
    def backward(ctx, g):
        a, x = ctx.saved_tensors
        trans, lower, unit = ctx.flags
        na, nb = ctx.needs_input_grad
        gb = _solve_like(ctx, a, g, 1 - trans)
        ga = None
        if na:
            if ctx.vector:
                gm = -(gb[..., :, None] * x[..., None, :])
            else:
                gm = -tnp.matmul(gb, _mT(x))
            ga = _tri_mask(_op(gm, trans), lower, unit)
            ga = tnp.real(ga) if ctx.real[0] and ga.dtype.kind == "c" else ga
        if nb and ctx.real[1] and gb.dtype.kind == "c":
            gb = tnp.real(gb)
        return ga, (gb if nb else None)

    @staticmethod
    def jvp(ctx, ta, tb):
        a, x = ctx.saved_tensors
        trans, lower, unit = ctx.flags
        rhs = tb
        if ta is not None:
            dm = _op(_tri_mask(ta, lower, unit), trans)
            dmx = tnp.matmul(dm, x[..., None])[..., 0] if ctx.vector else tnp.matmul(dm, x)
            rhs = -dmx if rhs is None else rhs - dmx
        return _solve_like(ctx, a, rhs, trans)

    @staticmethod
    def batch(args, batched, size, **params):
        a, b = args
        a_nd = a.ndim - batched[0]
        if b.ndim - batched[1] == 1:
            if not batched[1]:
                return SolveTriangular.apply(a, b, **params)
            n = b.shape[-1]
            b = b.reshape((size,) + (1,) * (a_nd - 2) + (n, 1))
            x = SolveTriangular.apply(a, b, **params)
            return x.reshape(x.shape[:-1])
        nd = max(a_nd, b.ndim - batched[1])
        a, b = align([a, b], batched, nd)
        return SolveTriangular.apply(a, b, **params)

    @classmethod
    def output_shape(cls, a, b, **params):
        _square("solve_triangular", "a", a)
        n = a[-1]
        if len(b) == 0 or (len(b) == 1 and b[0] != n) or (len(b) >= 2 and b[-2] != n):
            raise ValueError(
                f"solve_triangular: a of shape {a} needs b of shape ({n},) or (..., {n}, k), "
                f"got {b}"
            )
        if len(b) == 1:
            return tuple(a[:-1])
        return _batch("solve_triangular", [a[:-2], b[:-2]]) + tuple(b[-2:])

    @classmethod
    def output_dtype(cls, a, b, **params):
        return fit_dtype(np, np.zeros((), _result_dtype(a, b)), (np.zeros((), a),
                                                                  np.zeros((), b))).dtype


def _solve_like(ctx, a, rhs, trans):
    """A triangular solve with ``a``'s flags for a right-hand side shaped like the primal's
    ``b`` or ``x`` (vectors ``(..., n)`` when ``b`` was a vector)."""
    _, lower, unit = ctx.flags
    if ctx.vector and rhs.ndim > 1:  # a batch of vectors: one column each
        x = SolveTriangular.apply(a, rhs[..., None], trans=trans, lower=lower,
                                  unit_diagonal=unit, check_finite=False)
        return x[..., 0]
    return SolveTriangular.apply(a, rhs, trans=trans, lower=lower, unit_diagonal=unit,
                                 check_finite=False)


_TRANS = {0: 0, 1: 1, 2: 2, "N": 0, "T": 1, "C": 2, "n": 0, "t": 1, "c": 2}


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     check_finite=True) -> Tensor:
    """Solve ``op(a) x = b`` for triangular ``a`` (``scipy.linalg.solve_triangular``).

    Only the triangle given by ``lower`` is read (and not its diagonal when
    ``unit_diagonal``), so only that triangle receives a gradient.

    Args:
        a: Tensor of shape ``(..., n, n)``.
        b: Tensor of shape ``(n,)`` (a vector, solved against every matrix of ``a``) or
            ``(..., n, k)``; batch dimensions broadcast with ``a``'s.
        trans: ``0``/``'N'`` solves ``a x = b``, ``1``/``'T'`` ``a^T x = b``, ``2``/``'C'``
            ``a^H x = b``.
        lower: Use the lower triangle of ``a`` (default: the upper one, as SciPy).
        unit_diagonal: Assume the diagonal of ``a`` is all ones (it is not read).
        overwrite_b: Accepted for SciPy compatibility (tapegrad never writes its inputs).
        check_finite: Check that the inputs hold only finite numbers (SciPy's check).

    Returns:
        Tensor ``x`` of shape ``a.shape[:-1]`` for a 1-D ``b``, else the broadcast batch
        shape ``+ (n, k)``.

    Raises:
        ValueError: for shapes that do not fit (naming both), a bad ``trans``, or non-finite
            input with ``check_finite``.
        numpy.linalg.LinAlgError: if a diagonal entry is zero (a singular matrix).

    Derivatives (Giles 2008, sec. 2.3.1): with ``M = op(a)``, ``gb = M^{-T} g`` (one more
    triangular solve) and ``gM = -gb x^T``, restricted to the triangle that is read; forward
    mode ``dx = M^{-1} (db - dM x)``.
    """
    if trans not in _TRANS:
        raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got "
                         f"{trans!r}")
    trans = _TRANS[trans]
    a, b = _checked("solve_triangular", "a", a), _checked("solve_triangular", "b", b)
    SolveTriangular.output_shape(a.shape, b.shape)
    if trans == 2:
        if a.dtype.kind == "c":
            a = tnp.conj(a)
        trans = 1
    return SolveTriangular.apply(a, b, trans=trans, lower=bool(lower),
                                 unit_diagonal=bool(unit_diagonal),
                                 check_finite=bool(check_finite))


# -- solve_banded ----------------------------------------------------------------------------
def _band_gather(t, rows, cols, valid):
    """``t[rows, cols]`` where ``valid``, else 0 (constant index arrays; differentiable)."""
    m = t.shape[1]
    picked = t[tnp.asarray(rows), tnp.asarray(np.clip(cols, 0, max(m - 1, 0)))]
    return tnp.where(tnp.asarray(valid), picked, 0)


def _band_transpose(ab, lower, upper):
    """Band storage of ``A^T`` from that of ``A`` (``lower`` and ``upper`` swap):
    ``abT[k, j] = ab[l + u - k, j + k - l]`` (zero outside the matrix)."""
    m = ab.shape[1]
    k, j = np.meshgrid(np.arange(lower + upper + 1), np.arange(m), indexing="ij")
    cols = j + k - lower
    return _band_gather(ab, lower + upper - k, cols, (cols >= 0) & (cols < m))


class SolveBanded(Function):
    """``A x = b`` for a banded ``A`` in LAPACK band storage (primitive of
    :func:`solve_banded`): ``ab[u + i - j, j] = A[i, j]``."""

    oper = "solve_banded"

    @classmethod
    def batch(cls, args, batched, size, **params):
        """vmap: SciPy's band solver takes one system at a time, so each example is solved
        in turn (an explicit loop, stacked)."""
        return loop(cls, args, batched, size, params)[0]

    @staticmethod
    def forward(ctx, ab, b, lower=0, upper=0, check_finite=True):
        import scipy.linalg as sl

        ctx.lu = (lower, upper)
        ctx.real = (ab.dtype.kind != "c", b.dtype.kind != "c")
        x = _host(ctx, lambda a_, b_: sl.solve_banded((lower, upper), a_, b_,
                                                       check_finite=check_finite), ab, b)
        x = fit_dtype(ctx.backend, np.asarray(x), (ab, b))
        ctx.save_for_backward(ab, x)
        return x

    @staticmethod
    def backward(ctx, g):
        ab, x = ctx.saved_tensors
        lower, upper = ctx.lu
        gb = SolveBanded.apply(_band_transpose(ab, lower, upper), g, lower=upper, upper=lower,
                               check_finite=False)
        gab = None
        if ctx.needs_input_grad[0]:  # -gb x^T on the band: gab[k, j] = -gb[k + j - u] x[j]
            m = ab.shape[1]
            k, j = np.meshgrid(np.arange(lower + upper + 1), np.arange(m), indexing="ij")
            rows = k + j - upper
            ok = tnp.asarray((rows >= 0) & (rows < m))
            gi = gb[tnp.asarray(np.clip(rows, 0, max(m - 1, 0)))]
            prod = gi * x if x.ndim == 1 else tnp.sum(gi * x[None], axis=-1)
            gab = -tnp.where(ok, prod, 0)
            if ctx.real[0] and gab.dtype.kind == "c":
                gab = tnp.real(gab)
        if ctx.real[1] and gb.dtype.kind == "c":  # a real b of a complex system
            gb = tnp.real(gb)
        return gab, gb

    @classmethod
    def output_shape(cls, ab, b, lower=0, upper=0, check_finite=True):
        if len(ab) != 2 or ab[0] != lower + upper + 1:
            raise ValueError(f"solve_banded: ab must have shape ({lower + upper + 1}, M) for "
                             f"(l, u) = ({lower}, {upper}), got {ab}")
        if len(b) not in (1, 2) or b[0] != ab[1]:
            raise ValueError(f"solve_banded: b must have shape ({ab[1]},) or ({ab[1]}, K) for "
                             f"ab of shape {ab}, got {b}")
        return tuple(b)

    @classmethod
    def output_dtype(cls, ab, b, **params):
        return fit_dtype(np, np.zeros((), _result_dtype(ab, b)), (np.zeros((), ab),
                                                                   np.zeros((), b))).dtype


def solve_banded(l_and_u, ab, b, overwrite_ab=False, overwrite_b=False,
                 check_finite=True) -> Tensor:
    """Solve ``A x = b`` for a banded matrix ``A`` given in band storage
    (``scipy.linalg.solve_banded``).

    Args:
        l_and_u: ``(l, u)``: the numbers of nonzero sub- and superdiagonals.
        ab: Tensor ``(l + u + 1, M)``: ``ab[u + i - j, j] = A[i, j]`` (LAPACK's band storage;
            the unused corners are not read and get a zero gradient).
        b: Tensor ``(M,)`` or ``(M, K)``.
        overwrite_ab, overwrite_b: Accepted for SciPy compatibility (tapegrad never writes
            its inputs).
        check_finite: Check that the inputs hold only finite numbers (SciPy's check).

    Returns:
        Tensor ``x`` of ``b``'s shape; dtype by promotion (float32 stays float32).

    Raises:
        ValueError: for shapes that do not fit (naming both) or non-finite input with
            ``check_finite``.
        numpy.linalg.LinAlgError: for a singular matrix.

    Derivatives (as :func:`solve_triangular`'s): ``gb = A^{-T} g``, one more banded solve
    with the transposed band, and ``gA = -gb x^T`` on the band; forward mode transposes it.
    Plain transposes for complex input (JAX's convention: holomorphic in ``ab`` and ``b``).

    Example:
        >>> import tapegrad as tg
        >>> from tapegrad.scipy.linalg import solve_banded
        >>> ab = tg.Tensor([[0.0, 1.0, 1.0], [4.0, 4.0, 4.0], [1.0, 1.0, 0.0]], dtype="float64")
        >>> solve_banded((1, 1), ab, tg.Tensor([5.0, 6.0, 5.0], dtype="float64"))
        Tensor([1., 1., 1.], dtype=float64)
    """
    try:
        lower, upper = (int(v) for v in l_and_u)
    except (TypeError, ValueError):
        raise TypeError(f"solve_banded: l_and_u must be a pair of ints (l, u), got "
                        f"{l_and_u!r}") from None
    if lower < 0 or upper < 0:
        raise ValueError(f"solve_banded: l and u must be non-negative, got ({lower}, {upper})")
    ab = _checked("solve_banded", "ab", ab)
    b = _checked("solve_banded", "b", b)
    SolveBanded.output_shape(ab.shape, b.shape, lower, upper)
    return SolveBanded.apply(ab, b, lower=lower, upper=upper, check_finite=bool(check_finite))


# -- cholesky --------------------------------------------------------------------------------
def _phi(p):
    """Lower triangle of ``p`` with the diagonal halved (Murray 2016)."""
    return tnp.tril(p) - 0.5 * (p * tnp.eye(p.shape[-1], dtype=p.dtype))


class CholeskyFactor(Function):
    """Cholesky factor of a Hermitian positive-definite matrix (primitive of
    :func:`cholesky`): ``L`` with ``A = L L^H`` (``lower``) or ``U = L^H`` with
    ``A = U^H U``. It factors the Hermitian part ``(A + A^H) / 2`` (what :func:`cholesky`
    gives it already), so that its value and its rules (which take the Hermitian part of a
    tangent and give a Hermitian cotangent) are one function's for every input."""

    oper = "cholesky"
    traits = Traits(cost="dense")
    batch = classmethod(_stacked)

    @staticmethod
    def forward(ctx, a, lower=False, check_finite=True):
        import scipy.linalg as sl

        _square("cholesky", "a", a.shape)
        xp = ctx.backend
        a = (a + (xp.conj(xp.swapaxes(a, -1, -2)) if a.dtype.kind == "c"
                  else xp.swapaxes(a, -1, -2))) * 0.5

        def chol(a2):
            try:
                return sl.cholesky(a2, lower=lower, check_finite=check_finite)
            except LinAlgError:
                raise LinAlgError(
                    f"the matrix (shape {tuple(a.shape)}, dtype {a.dtype}) is not "
                    "positive definite; cholesky needs a Hermitian positive-definite matrix "
                    "in every batch entry"
                ) from None

        out = _host(ctx, lambda a_: _loop(chol, [a_], [2], a.shape[-2:],
                                          _result_dtype(a.dtype)), a)
        out = fit_dtype(ctx.backend, out, (a,))
        ctx.lower = lower
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (f,) = ctx.saved_tensors
        if ctx.lower:
            low, gl = f, g
        else:  # U = conj(L)^T: the cotangent of L is conj(gU)^T
            low, gl = _mH(f), _mH(g)
        cplx = low.dtype.kind == "c"
        p = tnp.matmul(_mH(low), tnp.conj(gl) if cplx else gl)
        ph = _phi(p)
        s = 0.5 * (ph + _mH(ph))
        x = solve_triangular(low, s, trans=2, lower=True)  # L^{-H} S
        ga = _mH(solve_triangular(low, _mH(x), trans=2, lower=True))  # (L^{-H} S) L^{-1}
        return tnp.conj(ga) if cplx else ga

    @staticmethod
    def jvp(ctx, ta):
        (f,) = ctx.saved_tensors
        low = f if ctx.lower else _mH(f)
        ta = 0.5 * (ta + _mH(ta))  # the tangent of the Hermitian part
        z = solve_triangular(low, ta, lower=True)  # L^{-1} dA
        w = _mH(solve_triangular(low, _mH(z), lower=True))  # L^{-1} dA L^{-H}
        dl = tnp.matmul(low, _phi(w))
        return dl if ctx.lower else _mH(dl)

    @classmethod
    def output_shape(cls, a, **params):
        return _square("cholesky", "a", a)

    @classmethod
    def output_dtype(cls, a, **params):
        return fit_dtype(np, np.zeros((), _result_dtype(a)), (np.zeros((), a),)).dtype


def cholesky(a, lower=False, overwrite_a=False, check_finite=True) -> Tensor:
    """Cholesky factor of a Hermitian (symmetric) positive-definite matrix
    (``scipy.linalg.cholesky``): upper ``U`` with ``a = U^H U`` by default, lower ``L`` with
    ``a = L L^H`` when ``lower``.

    As in SciPy only one triangle of ``a`` is read (the upper one by default, the lower one
    with ``lower``); the other is taken to be its conjugate transpose. The derivative is that
    of exactly this function: only the read triangle receives a gradient, so finite
    differences of ``cholesky`` itself agree with it.

    Args:
        a: Tensor of shape ``(..., n, n)``, real or complex.
        lower: Return the lower factor (default: upper, as SciPy).
        overwrite_a: Accepted for SciPy compatibility (tapegrad never writes its inputs).
        check_finite: Check that ``a`` holds only finite numbers (SciPy's check).

    Returns:
        Tensor of shape ``(..., n, n)``, triangular.

    Raises:
        ValueError: if ``a`` is not ``(..., n, n)`` or holds non-finite numbers.
        numpy.linalg.LinAlgError: if a matrix is not positive definite, naming cholesky.

    Derivatives (Murray 2016, written for complex matrices as JAX does): with
    ``Phi(X)`` the lower triangle of ``X`` with its diagonal halved, forward mode
    ``dL = L Phi(L^{-1} dA L^{-H})``; reverse mode ``gA = conj(L^{-H} S L^{-1})`` with
    ``S = (Phi(P) + Phi(P)^H) / 2`` and ``P = L^H conj(gL)``, mapped to the read triangle.
    """
    a = _checked("cholesky", "a", a)
    _square("cholesky", "a", a.shape)
    strict = tnp.tril(a, -1) if lower else tnp.triu(a, 1)
    diag = a * tnp.eye(a.shape[-1], dtype=a.dtype)
    herm = strict + _mH(strict) + 0.5 * (diag + _mH(diag))  # LAPACK reads Re(diag)
    return CholeskyFactor.apply(herm, lower=bool(lower), check_finite=bool(check_finite))


# -- solve_sylvester -------------------------------------------------------------------------
class SolveSylvester(Function):
    """``A X + X B = Q`` for ``X`` (primitive of :func:`solve_sylvester`)."""

    oper = "solve_sylvester"
    batch = _aligned((2, 2, 2))

    @staticmethod
    def forward(ctx, a, b, q):
        import scipy.linalg as sl

        SolveSylvester.output_shape(a.shape, b.shape, q.shape)
        dtype = _result_dtype(a.dtype, b.dtype, q.dtype)
        out = _host(ctx, lambda *v: _loop(sl.solve_sylvester, list(v), [2, 2, 2],
                                          q.shape[-2:], dtype), a, b, q)
        out = fit_dtype(ctx.backend, out, (a, b, q))
        ctx.save_for_backward(a, b, out)
        return out

    @staticmethod
    def backward(ctx, g):
        a, b, x = ctx.saved_tensors
        na, nb, nq = ctx.needs_input_grad
        y = SolveSylvester.apply(_mT(a), _mT(b), g)
        ga = -tnp.matmul(y, _mT(x)) if na else None
        gb = -tnp.matmul(_mT(x), y) if nb else None
        return ga, gb, (y if nq else None)

    @staticmethod
    def jvp(ctx, ta, tb, tq):
        a, b, x = ctx.saved_tensors
        rhs = tq
        for t in (None if ta is None else -tnp.matmul(ta, x),
                  None if tb is None else -tnp.matmul(x, tb)):
            if t is not None:
                rhs = t if rhs is None else rhs + t
        return SolveSylvester.apply(a, b, rhs)

    @classmethod
    def output_shape(cls, a, b, q):
        _square("solve_sylvester", "a", a)
        _square("solve_sylvester", "b", b)
        if len(q) < 2 or q[-2] != a[-1] or q[-1] != b[-1]:
            raise ValueError(
                f"solve_sylvester: a of shape {tuple(a)} and b of shape {tuple(b)} need q of "
                f"shape (..., {a[-1]}, {b[-1]}), got {tuple(q)}"
            )
        return _batch("solve_sylvester", [a[:-2], b[:-2], q[:-2]]) + tuple(q[-2:])

    @classmethod
    def output_dtype(cls, a, b, q):
        zs = [np.zeros((), d) for d in (a, b, q)]
        return fit_dtype(np, np.zeros((), _result_dtype(a, b, q)), zs).dtype


def solve_sylvester(a, b, q) -> Tensor:
    """Solve the Sylvester equation ``a x + x b = q`` (``scipy.linalg.solve_sylvester``,
    Bartels-Stewart).

    Args:
        a: Tensor of shape ``(..., n, n)``.
        b: Tensor of shape ``(..., m, m)``.
        q: Tensor of shape ``(..., n, m)``; batch dimensions of the three broadcast.

    Returns:
        Tensor ``x`` of shape ``batch + (n, m)``. The solution is unique when ``a`` and
        ``-b`` have no eigenvalue in common; otherwise the result holds inf/NaN (as SciPy).

    Raises:
        ValueError: for shapes that do not fit, naming them.

    Derivatives (differentiating ``a x + x b = q``; Giles 2008): forward mode solves
    ``a dx + dx b = dq - da x - x db``; reverse mode solves the adjoint equation
    ``a^T y + y b^T = g`` and gives ``gq = y``, ``ga = -y x^T``, ``gb = -x^T y``.
    """
    a, b, q = (_checked("solve_sylvester", n, v) for n, v in (("a", a), ("b", b), ("q", q)))
    SolveSylvester.output_shape(a.shape, b.shape, q.shape)
    return SolveSylvester.apply(a, b, q)


# -- matrix functions --------------------------------------------------------------------------
def _block_frechet(fn, a, e):
    """The Frechet derivative ``L_f(a, e)`` of the primary matrix function ``fn`` as the
    upper-right block of ``fn([[a, e], [0, a]])`` (Higham 2008, Thm. 3.6)."""
    n = a.shape[-1]
    e = e if e.dtype == a.dtype else e.astype(np.result_type(a.dtype, e.dtype))
    a = a if a.dtype == e.dtype else a.astype(e.dtype)
    zero = tnp.zeros_like(a)
    top = tnp.concatenate([a, e], axis=-1)
    bottom = tnp.concatenate([zero, a], axis=-1)
    big = fn(tnp.concatenate([top, bottom], axis=-2))
    return big[..., :n, n:]


class _MatrixFunction(Function):
    """A primary matrix function of ``(..., n, n)`` computed by SciPy, one matrix at a time.
    Its derivative is the Frechet derivative, from the function itself on the block matrix
    ``[[A, E], [0, A]]`` unless a subclass says otherwise."""

    batch = classmethod(_stacked)
    scipy_name = ""

    @classmethod
    def compute(cls, a):  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def forward(cls, ctx, a):
        _square(cls.oper, "A", a.shape)
        out = _host(ctx, lambda a_: _loop(cls.compute, [a_], [2], a.shape[-2:],
                                          _result_dtype(a.dtype)), a)
        out = fit_dtype(ctx.backend, out, (a,))
        ctx.save_for_backward(a, out)
        return out

    @classmethod
    def frechet(cls, a, out, e):
        """``L_f(a, e)`` (Tensors)."""
        return _block_frechet(cls.apply, a, e)

    @classmethod
    def backward(cls, ctx, g):
        a, out = ctx.saved_tensors
        ga = cls.frechet(_mT(a), _mT(out), g)  # the adjoint of L_f(A, .) is L_f(A^T, .)
        return _real_part_for(a, ga)

    @classmethod
    def jvp(cls, ctx, t):
        a, out = ctx.saved_tensors
        return cls.frechet(a, out, t)

    @classmethod
    def output_shape(cls, a):
        return _square(cls.oper, "A", a)

    @classmethod
    def output_dtype(cls, a):
        return fit_dtype(np, np.zeros((), _result_dtype(a)), (np.zeros((), a),)).dtype


class Expm(_MatrixFunction):
    """The matrix exponential (primitive of :func:`expm`)."""

    oper = "expm"

    @staticmethod
    def compute(a):
        import scipy.linalg as sl

        return sl.expm(a)


def expm(A) -> Tensor:
    """The matrix exponential ``exp(A) = sum_k A**k / k!`` (``scipy.linalg.expm``,
    scaling and squaring with Pade approximants, Al-Mohy and Higham 2009).

    Args:
        A: Tensor of shape ``(..., n, n)``, real or complex.

    Returns:
        Tensor of ``A``'s shape.

    Raises:
        ValueError: if ``A`` is not ``(..., n, n)``.

    Derivative: the Frechet derivative ``L(A, E)``, the upper-right block of
    ``expm([[A, E], [0, A]])`` (Najfeld and Havel 1995; Higham 2008, Thm. 3.6), in forward
    mode ``L(A, dA)`` and in reverse mode ``L(A^T, g)``; each is ``expm`` again, so every
    order follows.

    Example:
        >>> import tapegrad as tg
        >>> from tapegrad.scipy import linalg
        >>> A = tg.Tensor([[0.0, 1.0], [0.0, 0.0]])
        >>> linalg.expm(A)
        Tensor([[1., 1.],
                [0., 1.]], dtype=float32)
    """
    A = _checked("expm", "A", A)
    _square("expm", "A", A.shape)
    return Expm.apply(A)


class Logm(_MatrixFunction):
    """The principal matrix logarithm (primitive of :func:`logm`)."""

    oper = "logm"

    @staticmethod
    def compute(a):
        import scipy.linalg as sl

        # float32/complex64 in double precision (cast back by the caller): SciPy's float32
        # logm warns that its own result may be inaccurate
        return sl.logm(a.astype(np.promote_types(a.dtype, np.float64)))

    @classmethod
    def output_dtype(cls, a):
        raise NotImplementedError("logm: the dtype depends on the eigenvalues")


def logm(A, disp=True) -> Tensor:
    """The principal matrix logarithm, the inverse of :func:`expm` with eigenvalues in the
    strip ``|Im| < pi`` (``scipy.linalg.logm``, inverse scaling and squaring, Al-Mohy and
    Higham 2012).

    Args:
        A: Tensor of shape ``(..., n, n)`` with no eigenvalue on the closed negative real
            axis for a real result (a real ``A`` with negative eigenvalues gives a complex
            result, as SciPy).
        disp: Accepted for SciPy compatibility (SciPy's own warnings are shown).

    Returns:
        Tensor of ``A``'s shape; float32 in gives float32 out (SciPy computes in double).

    Raises:
        ValueError: if ``A`` is not ``(..., n, n)``.

    Derivative: the Frechet derivative of the logarithm, the inverse of that of ``expm`` at
    ``logm(A)``, obtained as the upper-right block of ``logm([[A, E], [0, A]])`` (Higham 2008,
    Thm. 3.6, which holds for every primary matrix function); forward mode ``L(A, dA)``,
    reverse mode ``L(A^T, g)``. Each is ``logm`` again, so every order follows.
    """
    A = _checked("logm", "A", A)
    _square("logm", "A", A.shape)
    return Logm.apply(A)


class Sqrtm(_MatrixFunction):
    """The principal matrix square root (primitive of :func:`sqrtm`); its derivative solves
    a Sylvester equation."""

    oper = "sqrtm"

    @staticmethod
    def compute(a):
        import scipy.linalg as sl

        return sl.sqrtm(a)

    @classmethod
    def frechet(cls, a, out, e):
        # X X = A gives X dX + dX X = dA (Higham 2008, sec. 6.1).
        return SolveSylvester.apply(out, out, e)

    @classmethod
    def output_dtype(cls, a):
        raise NotImplementedError("sqrtm: the dtype depends on the eigenvalues")


def sqrtm(A, disp=True, blocksize=64) -> Tensor:
    """The principal matrix square root ``X`` with ``X @ X = A`` (``scipy.linalg.sqrtm``,
    the Schur method of Deadman, Higham and Ralha 2013).

    Args:
        A: Tensor of shape ``(..., n, n)``. A real ``A`` with negative eigenvalues gives a
            complex result, as SciPy.
        disp, blocksize: Accepted for SciPy compatibility.

    Returns:
        Tensor of ``A``'s shape.

    Raises:
        ValueError: if ``A`` is not ``(..., n, n)``.

    Derivative (Higham 2008, sec. 6.1): differentiating ``X X = A``, ``dX`` solves the
    Sylvester equation ``X dX + dX X = dA`` (forward mode); reverse mode solves
    ``X^T gA + gA X^T = g``. Unique when no two eigenvalues of ``X`` sum to zero: at a
    singular ``A`` (where the square root is not differentiable) the result is inf/NaN.
    """
    A = _checked("sqrtm", "A", A)
    _square("sqrtm", "A", A.shape)
    return Sqrtm.apply(A)


# -- inv and det (tapegrad.numpy.linalg's) ---------------------------------------------------
def inv(a, overwrite_a=False, check_finite=True) -> Tensor:
    """Inverse of a square matrix or a batch of them (``scipy.linalg.inv``), computed by
    :func:`tapegrad.numpy.linalg.inv`.

    Args:
        a: Tensor of shape ``(..., n, n)``, real or complex.
        overwrite_a, check_finite: Accepted for SciPy compatibility (non-finite input gives a
            non-finite result).

    Returns:
        Tensor of shape ``(..., n, n)``.

    Raises:
        ValueError: if ``a`` is not ``(..., n, n)``.
        numpy.linalg.LinAlgError: if a matrix is singular.

    Derivative (Giles 2008, sec. 3.1): ``gA = -A^{-T} g A^{-T}`` (plain transposes for
    complex ``A``: ``inv`` is holomorphic).
    """
    return tnp.linalg.inv(a)


def det(a, overwrite_a=False, check_finite=True) -> Tensor:
    """Determinant of a square matrix or a batch of them (``scipy.linalg.det``), computed by
    :func:`tapegrad.numpy.linalg.det`.

    Args:
        a: Tensor of shape ``(..., n, n)``, real or complex.
        overwrite_a, check_finite: Accepted for SciPy compatibility.

    Returns:
        Tensor of shape ``(...)`` (float32 for float32 input; SciPy gives float64 there).

    Raises:
        ValueError: if ``a`` is not ``(..., n, n)``.
        numpy.linalg.LinAlgError: when differentiating at a singular matrix.

    Derivative (Giles 2008, sec. 3.1): ``gA = g det(A) A^{-T}``.
    """
    return tnp.linalg.det(a)
