"""Products, convolutions, polynomials and interpolation of ``tapegrad.numpy``: ``kron``,
``cross``, ``convolve``, ``correlate``, ``vecdot``, ``matvec``, ``vecmat``,
``matrix_transpose``, ``einsum_path``, the ``poly*`` family of NumPy's power-series
polynomials (coefficients highest degree first), ``roots``, ``vander`` and ``interp``.

Everything here but ``roots`` (the :class:`~tapegrad.ops.Roots` primitive, differentiated by
implicit differentiation) is a composite of differentiable primitives, so it differentiates to
any order in both modes and batches under ``vmap``. Float32 input gives float32 output
(integers give float64), also where NumPy computes in float64 (``interp``, ``polyfit``,
``polyint``).
"""

from __future__ import annotations

import numbers as _numbers

import numpy as _np

from tapegrad import ops as _ops
from tapegrad.core import dtypes as _tg_dtypes
from tapegrad.core.tensor import Tensor
from tapegrad.numpy._core import _tensor, stop_gradient
from tapegrad.numpy._shape import moveaxis, stack
from tapegrad.ops._registry import given_tensor as _given_tensor
from tapegrad.ops._registry import ns as _ns

__all__ = [
    "kron",
    "cross",
    "convolve",
    "correlate",
    "matvec",
    "vecmat",
    "einsum_path",
    "poly",
    "polyval",
    "polyfit",
    "polyder",
    "polyint",
    "polyadd",
    "polysub",
    "polymul",
    "polydiv",
    "roots",
    "vander",
    "interp",
]

_where = _ns.where


def _float(x: Tensor) -> Tensor:
    """``x`` in a floating (or complex) dtype: integers and booleans become float64."""
    return x if x.dtype.kind in "fcV" else x.astype(_np.float64)


def _concrete(value, kind=bool):
    """``kind(value)`` (``bool`` or ``int``) for a data-dependent decision, or None inside
    ``vmap``, where each example may decide differently."""
    try:
        return kind(value)
    except TypeError:
        return None


def _poly1d(p, op: str, name: str = "p") -> Tensor:
    """Polynomial coefficients as a 1-D Tensor (a 0-d value becomes length 1)."""
    if isinstance(p, _np.poly1d):
        p = p.coeffs
    try:
        t = _tensor(p) if _given_tensor(p) else Tensor(_np.asarray(p))
    except TypeError:
        raise TypeError(
            f"{op}: {name} must be numeric polynomial coefficients (a Tensor, array, list or "
            f"number), got {type(p).__name__}"
        ) from None
    if t.ndim == 0:
        t = _ns.reshape(t, (1,))
    if t.ndim != 1:
        raise ValueError(f"{op}: {name} must be 1-D polynomial coefficients, got shape {t.shape}")
    return t


# -- products ------------------------------------------------------------------------------
def kron(a, b):
    """Kronecker product (NumPy's ``kron``): blocks ``a[i, j, ...] * b``.

    Args:
        a, b: Tensors of any shapes; the one with fewer axes gets leading size-1 axes.

    Returns:
        Tensor of shape ``(a.shape[k] * b.shape[k] for each axis k)``; NumPy's dtype promotion.

    Gradient: ``sum`` of the cotangent's blocks times ``b`` (for ``a``) and of ``a``-weighted
    blocks (for ``b``): the products' rule through reshapes, exact at every order.
    """
    a, b = _tensor(a), _tensor(b)
    nd = max(a.ndim, b.ndim)
    sa = (1,) * (nd - a.ndim) + a.shape
    sb = (1,) * (nd - b.ndim) + b.shape
    ai = _ns.reshape(a, tuple(d for s in sa for d in (s, 1)))
    bi = _ns.reshape(b, tuple(d for s in sb for d in (1, s)))
    return _ns.reshape(ai * bi, tuple(x * y for x, y in zip(sa, sb)))


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """Cross product of 3-vectors (or of 2-vectors, as NumPy: the z-component) along the
    given axes, broadcasting the rest (NumPy's ``cross``).

    Args:
        a, b: Tensors whose vector axis has length 2 or 3.
        axisa, axisb: The vector axes of ``a`` and ``b``.
        axisc: The vector axis of the result (3-vectors only).
        axis: If given, overrides all three.

    Returns:
        Tensor of the broadcast shape with the vector axis at ``axisc`` (length 3), or without
        it when both vectors have length 2; NumPy's dtype promotion.

    Gradient: bilinear: ``b x g`` style rules through the component products.

    Raises:
        ValueError: if a vector axis does not have length 2 or 3, or the other axes do not
            broadcast.
    """
    a, b = _tensor(a), _tensor(b)
    if axis is not None:
        axisa = axisb = axisc = axis
    for name, t, ax in (("a", a, axisa), ("b", b, axisb)):
        if t.ndim == 0 or not -t.ndim <= ax < t.ndim:
            raise ValueError(f"cross: axis{name}={ax} is out of bounds for {name} of shape "
                             f"{t.shape}")
    a = moveaxis(a, axisa, -1)
    b = moveaxis(b, axisb, -1)
    na, nb = a.shape[-1], b.shape[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError(
            "cross: incompatible dimensions for cross product (dimension must be 2 or 3), got "
            f"{na} and {nb}")
    a0, a1 = a[..., 0], a[..., 1]
    b0, b1 = b[..., 0], b[..., 1]
    cz = a0 * b1 - a1 * b0
    if na == 2 and nb == 2:
        return cz
    if na == 3 and nb == 3:
        a2, b2 = a[..., 2], b[..., 2]
        cx, cy = a1 * b2 - a2 * b1, a2 * b0 - a0 * b2
    elif na == 2:
        b2 = b[..., 2]
        cx, cy = a1 * b2, -(a0 * b2)
    else:
        a2 = a[..., 2]
        cx, cy = -(a2 * b1), a2 * b0
    shape = _np.broadcast_shapes(cx.shape, cy.shape, cz.shape)
    c = stack([_ns.broadcast_to(v, shape) for v in (cx, cy, cz)], axis=-1)
    if not -c.ndim <= axisc < c.ndim:
        raise ValueError(f"cross: axisc={axisc} is out of bounds for a result with {c.ndim} axes")
    return moveaxis(c, -1, axisc)


def _correlate_full(a, v, conj):
    """``out[i] = sum_n apad[i + n] * v'[n]``: the full correlation, length ``N + M - 1``."""
    m = v.shape[0]
    if conj and v.dtype.kind == "c":
        v = _ns.conj(v)
    ap = _ns.pad(a, (m - 1, m - 1)) if m > 1 else a
    windows = _ns.sliding_window_view(ap, m)  # (N + M - 1, M)
    return _ns.matmul(windows, v)


def _mode_slice(full, n, m, mode, swapped, op):
    if mode in ("full", 2):
        return full
    lo = min(n, m)
    if mode in ("valid", 0):
        return full[lo - 1: lo - 1 + max(n, m) - lo + 1]
    if mode in ("same", 1):
        skip = (lo - 1) - lo // 2
        start = skip if not swapped else (full.shape[0] - max(n, m)) - skip
        return full[start: start + max(n, m)]
    raise ValueError(f"{op}: mode must be 'valid', 'same' or 'full', got {mode!r}")


def _vectors(a, v, op):
    a, v = _tensor(a), _tensor(v)
    if a.ndim == 0:
        a = _ns.reshape(a, (1,))
    if v.ndim == 0:
        v = _ns.reshape(v, (1,))
    if a.ndim != 1 or v.ndim != 1:
        raise ValueError(f"{op}: inputs must be 1-D, got shapes {a.shape} and {v.shape}")
    if a.shape[0] == 0:
        raise ValueError(f"{op}: a cannot be empty")
    if v.shape[0] == 0:
        raise ValueError(f"{op}: v cannot be empty")
    return a, v


def convolve(a, v, mode="full"):
    """Discrete linear convolution of two 1-D sequences (NumPy's ``convolve``):
    ``out[k] = sum_n a[n] v[k - n]``.

    Args:
        a, v: 1-D Tensors (0-d values count as length 1).
        mode: ``'full'`` (length ``N + M - 1``), ``'same'`` (length ``max(N, M)``, centred as
            NumPy) or ``'valid'`` (length ``max(N, M) - min(N, M) + 1``).

    Returns:
        1-D Tensor; NumPy's dtype promotion (no conjugation of complex inputs).

    Gradient: bilinear; each operand's cotangent is the correlation of the cotangent with the
    other operand (through sliding windows and a matrix product).

    Raises:
        ValueError: for an empty or non-1-D input, or an unknown mode.
    """
    a, v = _vectors(a, v, "convolve")
    if v.shape[0] > a.shape[0]:
        a, v = v, a
    full = _correlate_full(a, _ns.flip(v, axis=0), conj=False)
    return _mode_slice(full, a.shape[0], v.shape[0], mode, False, "convolve")


def correlate(a, v, mode="valid"):
    """Cross-correlation of two 1-D sequences (NumPy's ``correlate``):
    ``out[k] = sum_n a[n + k] conj(v[n])``.

    Args:
        a, v: 1-D Tensors (0-d values count as length 1).
        mode: ``'valid'`` (default), ``'same'`` or ``'full'``, as :func:`convolve`.

    Returns:
        1-D Tensor; NumPy's dtype promotion (``v`` is conjugated, as NumPy).

    Gradient: bilinear (sesquilinear in ``v`` for complex input, JAX's convention).

    Raises:
        ValueError: for an empty or non-1-D input, or an unknown mode.
    """
    a, v = _vectors(a, v, "correlate")
    full = _correlate_full(a, v, conj=True)
    n, m = a.shape[0], v.shape[0]
    return _mode_slice(full, n, m, mode, n < m, "correlate")


def _stacked_operands(op, x1, x2, matrix_first):
    """``x1`` and ``x2`` as Tensors, checked as a stack of matrices and one of vectors (in
    that order with ``matrix_first``, else the vectors first) with equal inner sizes."""
    a, b = _tensor(x1), _tensor(x2)
    m, v = (a, b) if matrix_first else (b, a)
    if m.ndim < 2 or v.ndim < 1:
        what = "a matrix and a vector" if matrix_first else "a vector and a matrix"
        raise ValueError(f"{op}: need {what}, got shapes {a.shape} and {b.shape}")
    if v.shape[-1] != m.shape[-1 if matrix_first else -2]:
        raise ValueError(f"{op}: inner sizes differ: {a.shape} and {b.shape}")
    return a, b


def matvec(x1, x2, /):
    """Matrix-vector products ``x1 @ x2`` over stacks: ``(..., m, n)`` times ``(..., n)``
    gives ``(..., m)`` (NumPy 2.2's ``matvec``; no conjugation).

    Raises:
        ValueError: if ``x1`` has fewer than 2 axes, ``x2`` none, or the inner sizes differ.
    """
    a, b = _stacked_operands("matvec", x1, x2, matrix_first=True)
    return _ns.matmul(a, _ns.reshape(b, b.shape + (1,)))[..., 0]


def vecmat(x1, x2, /):
    """Vector-matrix products ``conj(x1) @ x2`` over stacks: ``(..., n)`` times
    ``(..., n, m)`` gives ``(..., m)`` (NumPy 2.2's ``vecmat``; the vector is conjugated).

    Raises:
        ValueError: if ``x2`` has fewer than 2 axes, ``x1`` none, or the inner sizes differ.
    """
    a, b = _stacked_operands("vecmat", x1, x2, matrix_first=False)
    if a.dtype.kind == "c":
        a = _ns.conj(a)
    return _ns.matmul(_ns.reshape(a, a.shape[:-1] + (1, a.shape[-1])), b)[..., 0, :]


def einsum_path(subscripts, *operands, optimize="greedy", einsum_call=False):
    """NumPy's ``einsum_path``: the contraction order ``einsum`` would use, and a report.

    Only the operands' shapes matter; no values are read and nothing is differentiated.

    Returns:
        ``(path, string)`` exactly as ``numpy.einsum_path`` returns them.

    Raises:
        ValueError: as NumPy, for subscripts that do not match the operands.
        TypeError: for the interleaved ``(operand, sublist, ...)`` form (pass a string).
    """
    dummies = []
    for o in operands:
        t = o if isinstance(o, Tensor) else None
        shape = t.shape if t is not None else _np.shape(o)
        dtype = t.dtype if t is not None else _np.asarray(o).dtype
        dummies.append(_np.broadcast_to(_np.zeros((), dtype), shape))
    if not isinstance(subscripts, str):  # the interleaved (operand, sublist) form
        raise TypeError("einsum_path: pass the subscripts as a string")
    return _np.einsum_path(subscripts, *dummies, optimize=optimize, einsum_call=einsum_call)  # pyright: ignore[reportArgumentType]


# -- polynomials ---------------------------------------------------------------------------
def _faddeev_leverrier(a: Tensor) -> Tensor:
    """Characteristic polynomial ``det(z I - A)`` of a square matrix, coefficients highest
    first, by the Faddeev-LeVerrier recursion (matrix products and traces only)."""
    n = a.shape[0]
    eye = Tensor(_np.eye(n, dtype=a.dtype))
    coeffs = [Tensor(_np.ones((), dtype=a.dtype))]
    m = a * 0
    for k in range(1, n + 1):
        m = _ns.matmul(a, m) + coeffs[-1] * eye
        am = _ns.matmul(a, m)
        coeffs.append(-_ns.sum(am * eye) / k)
    return stack(coeffs)


def poly(seq_of_zeros):
    """Coefficients (highest degree first, leading 1) of the monic polynomial with the given
    roots, or of the characteristic polynomial of a square matrix (NumPy's ``poly``).

    Args:
        seq_of_zeros: 1-D Tensor of roots, or a non-empty ``(n, n)`` matrix.

    Returns:
        1-D Tensor of length ``n + 1``; the float dtype of the input (integers: float64). For
        complex roots that come in conjugate pairs the result is real, as NumPy (checked when
        the values are concrete; inside ``vmap`` it stays complex). No roots give ``1.0``.

    Gradient: through the products ``(z - r_1)(z - r_2)...`` (roots); for a matrix through
    the Faddeev-LeVerrier recursion ``M_k = A M_{k-1} + c_{n-k+1} I``,
    ``c_{n-k} = -tr(A M_k) / k`` (exact in exact arithmetic; NumPy goes through the
    eigenvalues instead, and both lose accuracy for large or ill-conditioned matrices).

    Raises:
        ValueError: for input that is neither 1-D nor a non-empty square matrix.

    References:
        U. J. J. Le Verrier (1840); D. K. Faddeev and I. S. Sominsky (1949); see Householder,
        "The Theory of Matrices in Numerical Analysis", 1964.
    """
    z = seq_of_zeros
    z = _tensor(z) if _given_tensor(z) else Tensor(_np.atleast_1d(_np.asarray(z)))
    if z.ndim == 0:
        z = _ns.reshape(z, (1,))
    z = _float(z)
    if z.ndim == 2 and z.shape[0] == z.shape[1] and z.shape[0] != 0:
        return _faddeev_leverrier(z)
    if z.ndim != 1:
        raise ValueError(f"poly: input must be 1d or non-empty square 2d array, got shape "
                         f"{z.shape}")
    if z.shape[0] == 0:
        return 1.0
    a = Tensor(_np.ones(1, dtype=z.dtype))
    zero = Tensor(_np.zeros(1, dtype=z.dtype))
    for i in range(z.shape[0]):
        a = _ns.concatenate([a, zero], axis=0) - _ns.concatenate([zero, a * z[i]], axis=0)
    if a.dtype.kind == "c":
        # NumPy: real coefficients when the roots are closed under conjugation (compared
        # sorted, exactly)
        zc = _ns.conj(z)
        same = _ns.all(z[_ops.ArgSort.apply(z, axis=-1, kind="stable")]
                       == zc[_ops.ArgSort.apply(zc, axis=-1, kind="stable")])
        if _concrete(same):
            a = _ns.real(a)
    return a


def polyval(p, x):
    """Evaluate the polynomial with coefficients ``p`` (highest degree first) at ``x``, by
    Horner's rule (NumPy's ``polyval``).

    Args:
        p: 1-D coefficients (a ``numpy.poly1d`` too).
        x: Tensor of any shape.

    Returns:
        Tensor of ``x``'s shape; NumPy's dtype promotion of ``p`` and ``x``.

    Gradient: ``p'(x)`` to ``x`` and ``x**k`` to each coefficient, through Horner's rule.

    Raises:
        ValueError: if ``p`` is not 1-D.
    """
    p = _poly1d(p, "polyval")
    x = _tensor(x) if _given_tensor(x) else Tensor(_np.asarray(x))
    y = x * 0
    for i in range(p.shape[0]):
        y = y * x + p[i]
    if p.shape[0] == 0:
        y = y + _ns.sum(p)
    return y


def vander(x, N=None, increasing=False):
    """Vandermonde matrix: columns the powers of ``x``, ``x**(N-1), ..., x, 1`` (increasing:
    ``1, x, ...``), NumPy's ``vander``.

    Args:
        x: 1-D Tensor of length ``M``.
        N: The number of columns (default ``M``).
        increasing: Powers from 0 up.

    Returns:
        ``(M, N)`` Tensor of ``x``'s dtype.

    Gradient: ``k x**(k-1)`` per column, through repeated products (exact at ``x = 0``).

    Raises:
        ValueError: if ``x`` is not 1-D or ``N`` is negative.
    """
    x = _tensor(x) if _given_tensor(x) else Tensor(_np.asarray(x))
    if x.ndim != 1:
        raise ValueError(f"vander: x must be a one-dimensional array or sequence, got shape "
                         f"{x.shape}")
    n = x.shape[0] if N is None else N
    if not isinstance(n, (int, _np.integer)) or n < 0:
        raise ValueError(f"vander: N must be a non-negative int, got {N!r}")
    if n == 0:
        return _ns.reshape(x, (x.shape[0], 1))[:, :0]
    cols = [x * 0 + 1]
    for _ in range(1, n):
        cols.append(cols[-1] * x)
    if not increasing:
        cols = cols[::-1]
    return stack(cols, axis=1)


def polyder(p, m=1):
    """The ``m``-th derivative of the polynomial ``p`` (NumPy's ``polyder``).

    Returns:
        1-D Tensor of length ``max(len(p) - m, 0)``; ``p``'s dtype.

    Gradient: linear in ``p`` (each coefficient times its falling factorial).

    Raises:
        ValueError: for a negative ``m``, or ``p`` not 1-D.
    """
    m = int(m)
    if m < 0:
        raise ValueError("polyder: order of derivative must be positive (see polyint)")
    p = _poly1d(p, "polyder")
    for _ in range(m):
        n = p.shape[0] - 1
        if n <= 0:
            return p[:0]
        p = p[:-1] * Tensor(_np.arange(n, 0, -1, dtype=p.dtype if p.dtype.kind in "fciu"
                                       else _np.int64))
    return p


def polyint(p, m=1, k=None):
    """The ``m``-th antiderivative of ``p`` with integration constants ``k`` (NumPy's
    ``polyint``).

    Args:
        p: 1-D coefficients.
        m: Order of the antiderivative.
        k: Integration constants: a scalar (used for every order), or ``m`` values (the first
            for the first integration); default 0.

    Returns:
        1-D Tensor of length ``len(p) + m``; ``p``'s floating dtype (integers: float64).

    Gradient: linear in ``p`` and ``k``.

    Raises:
        ValueError: for a negative ``m`` or too few constants.
    """
    m = int(m)
    if m < 0:
        raise ValueError("polyint: order of integral must be positive (see polyder)")
    p = _float(_poly1d(p, "polyint"))
    if k is None:
        kt = Tensor(_np.zeros(m, dtype=p.dtype))
    else:
        kt = _tensor(k) if _given_tensor(k) else Tensor(_np.atleast_1d(_np.asarray(k)))
        if kt.ndim == 0:
            kt = _ns.reshape(kt, (1,))
        if kt.shape[0] == 1 and m > 1:
            kt = _ns.broadcast_to(kt, (m,))
        if kt.shape[0] < m:
            raise ValueError("polyint: k must be a scalar or a rank-1 array of length 1 or >m.")
    for i in range(m):
        n = p.shape[0]
        scaled = p / Tensor(_np.arange(n, 0, -1, dtype=_np.real(_np.zeros((), p.dtype)).dtype))
        p = _ns.concatenate([scaled, _ns.reshape(kt[i], (1,)).astype(p.dtype)], axis=0)
    return p


def _pad_front(a, n):
    return a if n == 0 else _ns.concatenate([_ns.broadcast_to(a[:1] * 0, (n,)), a], axis=0)


def polyadd(a1, a2):
    """Sum of two polynomials (NumPy's ``polyadd``): the shorter one gets leading zeros.

    Returns:
        1-D Tensor of the longer length; NumPy's dtype promotion. Gradient: ``g`` to each
        (the padded part dropped).
    """
    a, b = _poly1d(a1, "polyadd", "a1"), _poly1d(a2, "polyadd", "a2")
    n = max(a.shape[0], b.shape[0])
    return _pad_front(a, n - a.shape[0]) + _pad_front(b, n - b.shape[0])


def polysub(a1, a2):
    """Difference ``a1 - a2`` of two polynomials (NumPy's ``polysub``); see :func:`polyadd`.

    Args:
        a1, a2: 1-D coefficient Tensors (highest power first), or 0-d values.

    Returns:
        1-D Tensor of the longer length; NumPy's dtype promotion. Gradient: ``g`` to ``a1``,
        ``-g`` to ``a2`` (the padded part dropped).

    Raises:
        ValueError: for coefficients with more than one axis.
        TypeError: for non-numeric coefficients (naming ``polysub``).
    """
    a, b = _poly1d(a1, "polysub", "a1"), _poly1d(a2, "polysub", "a2")
    n = max(a.shape[0], b.shape[0])
    return _pad_front(a, n - a.shape[0]) - _pad_front(b, n - b.shape[0])


def _trim_leading_zeros(t: Tensor) -> Tensor:
    """``t`` without its leading exactly-zero coefficients, keeping at least one (NumPy's
    ``poly1d``); decided on the values, so kept whole inside ``vmap``."""
    while t.shape[0] > 1 and _concrete(t[0] == 0):
        t = t[1:]
    return t


def polymul(a1, a2):
    """Product of two polynomials (NumPy's ``polymul``): the full convolution of their
    coefficients.

    As NumPy (which makes each argument a ``poly1d``), leading coefficients that are exactly
    zero are dropped first, so ``polymul([0, 1], [1, 1])`` is ``[1, 1]``: the result has
    ``len(trim(a1)) + len(trim(a2)) - 1`` coefficients. The decision is taken on the values;
    inside ``vmap``, where each example could decide differently, nothing is dropped (JAX's
    ``trim_leading_zeros=False``).

    Gradient as :func:`convolve`; the dropped zero coefficients get a zero gradient (the
    output's length, not its value, depends on them).

    Args:
        a1, a2: 1-D coefficients, highest degree first (a 0-d value is a constant polynomial;
            ``numpy.poly1d`` objects are accepted).

    Returns:
        1-D Tensor in NumPy's promoted dtype.

    Raises:
        ValueError: for coefficients that are not 0-d or 1-D, or empty.
    """
    t1 = _poly1d(a1, "polymul", "a1")
    t2 = _poly1d(a2, "polymul", "a2")
    if t1.shape[0] == 0 or t2.shape[0] == 0:
        raise ValueError(f"polymul: empty polynomial coefficients (shapes {t1.shape} and "
                         f"{t2.shape}); give at least one coefficient each")
    return convolve(_trim_leading_zeros(t1), _trim_leading_zeros(t2))


def polydiv(u, v):
    """Quotient and remainder of polynomial division ``u / v`` (NumPy's ``polydiv``).

    Returns:
        ``(q, r)``: 1-D Tensors in the common floating dtype; as NumPy, leading remainder
        coefficients that are close to zero (``allclose(r[0], 0, rtol=1e-14)``) are dropped,
        which is decided on the values when they are concrete (inside ``vmap`` only the
        leading ``len(u) - len(v) + 1`` coefficients, zero by construction, are dropped).

    Gradient: through the long division's recurrences (``d = r_k / v_0``,
    ``r <- r - d v``): rational in the coefficients, exact at every order.

    Raises:
        ValueError: for empty coefficients.
        ZeroDivisionError: never; a zero leading coefficient of ``v`` gives inf/NaN, as NumPy.
    """
    u = _float(_poly1d(u, "polydiv", "u"))
    v = _float(_poly1d(v, "polydiv", "v"))
    if u.shape[0] == 0 or v.shape[0] == 0:
        raise ValueError("polydiv: empty polynomial coefficients")
    dtype = _tg_dtypes.result_type(u.dtype, v.dtype)
    u, v = u.astype(dtype), v.astype(dtype)
    m, n = u.shape[0] - 1, v.shape[0] - 1
    scale = 1.0 / v[0]
    r = u
    qs = []
    for k in range(m - n + 1):
        d = scale * r[k]
        qs.append(d)
        r = r.at[k:k + n + 1].add(-(d * v))
    q = stack(qs) if qs else _ns.reshape(u[:1] * 0, (1,))
    drop = max(m - n + 1, 0)
    r = r[drop:] if drop < r.shape[0] else r[-1:]
    while r.shape[0] > 1:
        small = _concrete(_ns.abs(r[0]) <= 1e-8)
        if not small:
            break
        r = r[1:]
    return q, r


def roots(p):
    """The roots of the polynomial with coefficients ``p`` (highest degree first), NumPy's
    ``roots``: the eigenvalues of the companion matrix.

    Args:
        p: 1-D coefficients (integers become float64).

    Returns:
        1-D Tensor: one root per degree of the polynomial after dropping leading zero
        coefficients (each trailing zero coefficient gives a root 0, last); real when every
        root is real, complex otherwise (as NumPy, decided by the values).

    Gradient: by implicit differentiation of ``p(r) = 0``:
    ``dr = -(sum_k dp_k r**(n-1-k)) / p'(r)`` for each simple root (the rule of
    :class:`~tapegrad.ops.Roots`, differentiable again). At a repeated root ``p'(r) = 0`` and
    the roots are not differentiable (they move like a fractional power of the perturbation):
    the derivative there is infinite or NaN (0 where the cotangent is 0).

    Raises:
        ValueError: if ``p`` is not 1-D ("Input must be a rank-1 array.").
    """
    t = _tensor(p) if _given_tensor(p) else Tensor(_np.atleast_1d(_np.asarray(p)))
    if t.ndim == 0:
        t = _ns.reshape(t, (1,))
    if t.ndim != 1:
        raise ValueError(f"roots: input must be a rank-1 array, got shape {t.shape}")
    return _ops.Roots.apply(t)


def _mH(t: Tensor) -> Tensor:
    """The conjugate transpose of a matrix."""
    t = _ns.transpose(t)
    return _ns.conj(t) if t.dtype.kind == "c" else t


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """Least-squares polynomial fit ``p(x) ~ y`` of degree ``deg`` (NumPy's ``polyfit``).

    The Vandermonde matrix ``A`` (weighted rows with ``w``, columns scaled to unit norm as
    NumPy) is solved in the least-squares sense. The value is NumPy's: the SVD solution with
    singular values below ``rcond * s_max`` cut (computed without gradient), refined by one
    step of the normal equations, ``c = c0 + solve(A^T A, A^T (y - A c0))``. That function of
    ``(x, y, w)`` equals the least-squares solution for every input (the correction is the
    solution's change), so its derivatives are those of ``(A^T A)^{-1} A^T y`` at every
    order, with no singular-vector derivatives (which are unbounded at repeated singular
    values).

    Args:
        x: 1-D sample points (``M``).
        y: ``(M,)`` or ``(M, K)`` values (``K`` fits at once).
        deg: Degree of the fit.
        rcond: Relative cut-off of small singular values (default ``M * eps``).
        full: Also return ``(residuals, rank, singular_values, rcond)``.
        w: Weights applied to the residuals (``1/sigma``).
        cov: Also return the covariance matrix of the coefficients (``'unscaled'``: without
            the residual-variance factor).

    Returns:
        Coefficients ``(deg + 1,)`` or ``(deg + 1, K)``, highest degree first; with ``full``,
        ``(coef, residuals, rank, s, rcond)`` (``rank`` a NumPy int32, as NumPy); with ``cov``,
        ``(coef, cov_matrix)`` of shape ``(deg + 1, deg + 1)`` (``(deg + 1, deg + 1, K)``).

    Gradient: with respect to ``x``, ``y`` and ``w``, as described above. For a
    rank-deficient fit (NumPy warns ``RankWarning``; ``rank < deg + 1``) the minimum-norm
    coefficients are returned without a gradient through the refinement (the least-squares
    solution is not a differentiable function there).

    Raises:
        ValueError: for ``deg < 0``; too few points to scale the covariance.
        TypeError: for ``x`` not 1-D or empty, ``y`` not 1-D/2-D, mismatched lengths, or
            ``w`` not 1-D of ``y``'s length (NumPy's errors); for complex ``x`` (complex ``y``
            is fine).
    """
    from tapegrad.numpy import linalg as _linalg

    order = int(deg) + 1
    xt = _float(_tensor(x) if _given_tensor(x) else Tensor(_np.asarray(x)))
    yt = _float(_tensor(y) if _given_tensor(y) else Tensor(_np.asarray(y)))
    if deg < 0:
        raise ValueError("polyfit: expected deg >= 0")
    if xt.ndim != 1:
        raise TypeError(f"polyfit: expected 1D vector for x, got shape {xt.shape}")
    if xt.shape[0] == 0:
        raise TypeError("polyfit: expected non-empty vector for x")
    if yt.ndim < 1 or yt.ndim > 2:
        raise TypeError(f"polyfit: expected 1D or 2D array for y, got shape {yt.shape}")
    if xt.shape[0] != yt.shape[0]:
        raise TypeError(f"polyfit: expected x and y to have same length ({xt.shape[0]} and "
                        f"{yt.shape[0]})")
    if xt.dtype.kind == "c":
        raise TypeError("polyfit: complex x is not supported (the least-squares solve is real)")
    dtype = _tg_dtypes.result_type(xt.dtype, _np.real(_np.zeros((), yt.dtype)).dtype)
    ydtype = _tg_dtypes.result_type(dtype, yt.dtype)
    xt = xt.astype(dtype) if xt.dtype != dtype else xt
    yt = yt.astype(ydtype) if yt.dtype != ydtype else yt
    m = xt.shape[0]
    if rcond is None:
        rcond = m * float(_tg_dtypes.finfo(dtype).eps)
    lhs = vander(xt, order)
    rhs = yt
    if w is not None:
        wt = _float(_tensor(w) if _given_tensor(w) else Tensor(_np.asarray(w)))
        if wt.ndim != 1:
            raise TypeError("polyfit: expected a 1-d array for weights")
        if wt.shape[0] != m:
            raise TypeError("polyfit: expected w and y to have the same length")
        wt = wt.astype(dtype)
        lhs = lhs * _ns.reshape(wt, (m, 1))
        rhs = rhs * (_ns.reshape(wt, (m, 1)) if rhs.ndim == 2 else wt)
    scale = _ns.sqrt(_ns.sum(lhs * lhs, axis=0))
    scale = _where(scale == 0, 1.0, scale)
    lhs = lhs / scale
    rhs2 = rhs if rhs.ndim == 2 else _ns.reshape(rhs, (m, 1))
    # the minimum-norm SVD solution (NumPy's lstsq), without gradient
    u, s, vh = _linalg.svd(stop_gradient(lhs), full_matrices=False)
    cut = s > rcond * (s[:1] if s.shape[0] else 0)
    rank = _concrete(_ns.sum(cut), int)  # pyright: ignore[reportArgumentType]
    s_inv = _where(cut, 1.0 / _where(cut, s, 1.0), 0.0)
    c0 = _ns.matmul(_mH(vh), _ns.reshape(s_inv, (-1, 1)) * _ns.matmul(_mH(u),
                                                                      stop_gradient(rhs2)))
    full_rank = rank is None or rank == order
    if full_rank:
        at = _mH(lhs)
        c = stop_gradient(c0) + _linalg.solve(_ns.matmul(at, lhs),
                                              _ns.matmul(at, rhs2 - _ns.matmul(lhs, c0)))
    else:
        c = c0
    resid = rhs2 - _ns.matmul(lhs, c)
    c = c / _ns.reshape(scale, (order, 1))
    coef = c if rhs.ndim == 2 else c[:, 0]
    if full:
        if full_rank and m > order:
            resids = _ns.sum(_ns.abs(resid) ** 2, axis=0)
        else:
            resids = _ns.reshape(resid[:0, :1] * 0, (0,))
        sv = _linalg.svdvals(lhs)
        return coef, resids, _np.int32(rank if rank is not None else order), sv, rcond
    if cov:
        at = _mH(lhs)
        vbase = _linalg.inv(_ns.matmul(at, lhs))
        vbase = vbase / (_ns.reshape(scale, (order, 1)) * _ns.reshape(scale, (1, order)))
        if cov == "unscaled":
            fac = 1.0
        else:
            if m <= order:
                raise ValueError("polyfit: the number of data points must exceed order to "
                                 "scale the covariance matrix")
            fac = _ns.sum(_ns.abs(resid) ** 2, axis=0) / (m - order)
        if rhs.ndim == 1:
            return coef, vbase * (fac if isinstance(fac, float) else fac[0])  # pyright: ignore[reportIndexIssue]
        fac3 = fac if isinstance(fac, float) else _ns.reshape(fac, (1, 1, -1))
        return coef, _ns.reshape(vbase, (order, order, 1)) * fac3
    return coef


# -- interpolation ---------------------------------------------------------------------------
def interp(x, xp, fp, left=None, right=None, period=None):
    """One-dimensional piecewise-linear interpolation (NumPy's ``interp``).

    Args:
        x: Points to evaluate at, any shape.
        xp: 1-D increasing knots (not checked, as NumPy), or any order with ``period``.
        fp: 1-D values at the knots (real or complex), the length of ``xp``.
        left, right: Values below ``xp[0]`` and above ``xp[-1]`` (default ``fp[0]``,
            ``fp[-1]``); ignored with ``period``.
        period: Period of the knots (angles, ...): ``x`` and ``xp`` are reduced modulo it.

    Returns:
        Tensor of ``x``'s shape; the floating dtype of ``x``, ``xp``, ``fp`` promoted (float32
        stays float32, integers give float64; complex ``fp`` gives complex).

    Gradient: ``(1 - t)`` and ``t`` to the two bracketing values of ``fp`` (``t`` the
    position inside the interval); the slope to ``x`` (one-sided at a knot: the interval
    that starts there, as NumPy's bracketing ``xp[j] <= x < xp[j+1]``; 0 outside
    ``[xp[0], xp[-1]]``); through the interval's ends to ``xp``. ``left``/``right`` get the
    cotangent where they are used.

    Raises:
        ValueError: for ``xp``/``fp`` not 1-D, of different lengths or empty, or a zero
            period.
        TypeError: for complex ``x`` or ``xp``.
    """
    op = "interp"
    xt = _tensor(x) if _given_tensor(x) else Tensor(_np.asarray(x))
    kp = _tensor(xp) if _given_tensor(xp) else Tensor(_np.asarray(xp))
    fv = _tensor(fp) if _given_tensor(fp) else Tensor(_np.asarray(fp))
    if kp.ndim != 1 or fv.ndim != 1:
        raise ValueError(f"{op}: xp and fp must be 1-D, got shapes {kp.shape} and {fv.shape}")
    if kp.shape[0] != fv.shape[0]:
        raise ValueError(f"{op}: fp and xp are not of the same length ({fv.shape[0]} and "
                         f"{kp.shape[0]})")
    if kp.shape[0] == 0:
        raise ValueError(f"{op}: array of sample points is empty")
    if xt.dtype.kind == "c" or kp.dtype.kind == "c":
        raise TypeError(f"{op}: x and xp must be real, got dtypes {xt.dtype} and {kp.dtype}")
    real = _tg_dtypes.result_type(*[_np.real(_np.zeros((), t.dtype)).dtype if t.dtype.kind in "fcV"
                             else _np.dtype(_np.float64) for t in (xt, kp, fv)])
    vdtype = _tg_dtypes.result_type(real, _np.complex64) if fv.dtype.kind == "c" else real
    xt, kp, fv = xt.astype(real), kp.astype(real), fv.astype(vdtype)
    if period is not None:
        if isinstance(period, _numbers.Number) and period == 0:
            raise ValueError(f"{op}: period must be a non-zero value")
        period = abs(period)  # pyright: ignore[reportArgumentType]
        left = right = None
        xt = _ns.remainder(xt, period)
        kp = _ns.remainder(kp, period)
        order = _ops.ArgSort.apply(kp, axis=-1, kind="stable")
        kp, fv = kp[order], fv[order]
        kp = _ns.concatenate([kp[-1:] - period, kp, kp[:1] + period], axis=0)
        fv = _ns.concatenate([fv[-1:], fv, fv[:1]], axis=0)
    n = kp.shape[0]
    lo_val = fv[0] if left is None else left
    hi_val = fv[-1] if right is None else right
    if n == 1:
        res = _where(xt < kp[0], lo_val, _where(xt > kp[0], hi_val, fv[0]))
        return res.astype(vdtype) if res.dtype != vdtype else res
    j = _ops.SearchSorted.apply(kp, xt, side="right") - 1  # xp[j] <= x < xp[j+1]
    j = _ns.clip(j, 0, n - 2)
    x0, x1 = kp[j], kp[j + 1]
    f0, f1 = fv[j], fv[j + 1]
    width = x1 - x0
    slope = (f1 - f0) / _where(width == 0, 1.0, width)
    res = slope * (xt - x0) + f0
    res = _where(xt == kp[-1], fv[-1], res)
    res = _where(xt < kp[0], lo_val, _where(xt > kp[-1], hi_val, res))
    return res.astype(vdtype) if res.dtype != vdtype else res
