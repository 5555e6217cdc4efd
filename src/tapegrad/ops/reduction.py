"""Reductions over ``axis`` (int, tuple of ints, or None for all) with ``keepdims``, and the
cumulative (scan) ops.

Every backward rule is written with tapegrad ops, so each reduction is differentiable to any
order. Conventions at kinks (documented on each class):

- ``max``/``min``: ties split the cotangent equally among the tied elements.
- ``std``: zero gradient where the spread is zero (the minimum-norm subgradient).
- ``Norm2`` (the Euclidean norm): zero gradient at ``x = 0`` (the minimum-norm subgradient).
- ``prod``/``cumprod``: exact with zeros in the input (products of the other elements, never
  ``out / x``), at every order.

Reductions that have no value over an empty set (``mean``, ``var``, ``std``, ``max``, ``min``,
``argmax``, ``argmin``) raise ``ValueError`` when a reduced axis has size 0 (NumPy raises for
``max`` and returns NaN with a warning for ``mean``; tapegrad decides instead of warning).
"""

from __future__ import annotations

import functools

import numpy as np

from tapegrad.function import Function

__all__ = [
    "Sum",
    "SumGrad",
    "Mean",
    "Prod",
    "Max",
    "Min",
    "ArgMax",
    "ArgMin",
    "Var",
    "Std",
    "LogSumExp",
    "Norm2",
    "ExtremumGrad",
    "CumSum",
    "CumProd",
    "Shift",
    "Any",
    "All",
    "normalize_axis",
]


def normalize_axis(axis, ndim: int, op: str) -> tuple:
    """``axis`` (None, int or tuple) as a sorted tuple of non-negative ints.

    Raises:
        ValueError: if an axis is out of range for ``ndim`` or repeated, naming ``op``.
        TypeError: if ``axis`` is not None, an int or a tuple/list of ints.
    """
    if axis is None:
        return tuple(range(ndim))
    if type(axis) is int and 0 <= axis < ndim:  # the common cases first
        return (axis,)
    if type(axis) is tuple and axis and all([type(a) is int and 0 <= a < ndim for a in axis]):
        if len(axis) == 1 or (len(set(axis)) == len(axis) and list(axis) == sorted(axis)):
            return axis
    if isinstance(axis, np.integer):
        axis = int(axis)
    axes = (axis,) if isinstance(axis, int) and not isinstance(axis, bool) else axis
    if not isinstance(axes, (tuple, list)) or not all(
        isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in axes
    ):
        raise TypeError(f"{op}: axis must be None, an int or a tuple of ints, got {axis!r}")
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < ndim:
            raise ValueError(f"{op}: axis {a} is out of range for a Tensor with ndim {ndim}")
        out.append(a % ndim if ndim else 0)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in {axis!r}")
    return tuple(sorted(out))


def _single_axis(axis, ndim: int, op: str) -> int:
    """One axis (an int) as a non-negative int; ``ValueError`` if out of range."""
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{op}: axis must be an int, got {axis!r}")
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"{op}: axis {axis} is out of range for a Tensor with ndim {ndim}")
    return axis % ndim


def _kept_shape(shape, axes):
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def _reduced_shape(shape, axes, keepdims):
    if keepdims:
        return _kept_shape(shape, axes)
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def _count(shape, axes) -> int:
    n = 1
    for a in axes:
        n *= shape[a]
    return n


def _nonempty(op: str, shape, axes) -> None:
    if _count(shape, axes) == 0:
        raise ValueError(
            f"{op}: reduction over axes {axes} of a Tensor of shape {tuple(shape)} covers no "
            f"elements, and {op} of an empty set is undefined; reduce over non-empty axes"
        )


def _real(op: str, dtype) -> None:
    if np.dtype(dtype).kind == "c":
        raise TypeError(f"{op}: complex inputs are not supported (got dtype {dtype})")


@functools.cache
def _numpy_dtype(fn_name: str, dtype) -> np.dtype:
    """The dtype NumPy's ``fn_name`` (a reduction/scan method) gives for ``dtype`` inputs."""
    with np.errstate(all="ignore"):
        return getattr(np.ones(2, dtype=dtype), fn_name)().dtype


def _reduction_setup(ctx, x, axis, keepdims, op):
    axes = normalize_axis(axis, x.ndim, op)
    ctx.in_shape = x.shape
    ctx.axes = axes
    ctx.keepdims = keepdims
    return axes


def _expand(g, ctx):
    """The output cotangent with the reduced axes kept (size 1), ready to broadcast."""
    from tapegrad import numpy as tnp

    if not ctx.keepdims:
        g = tnp.reshape(g, _kept_shape(ctx.in_shape, ctx.axes))
    return g


class Sum(Function):
    """Sum over ``axis``; the sum of an empty set is 0 (NumPy).

    Output dtype as NumPy (small integers and booleans promote to the platform integer).
    Backward: the cotangent broadcast back over the reduced axes.
    """

    oper = "sum"

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        axes = _reduction_setup(ctx, x, axis, keepdims, "sum")
        return x.sum(axis=axes, keepdims=keepdims)

    @staticmethod
    def backward(ctx, g):
        return SumGrad.apply(g, shape=ctx.in_shape, axes=ctx.axes, keepdims=ctx.keepdims)

    @classmethod
    def output_dtype(cls, dtype, **params):
        return _numpy_dtype("sum", np.dtype(dtype))

    @classmethod
    def output_shape(cls, shape, axis=None, keepdims=False):
        return _reduced_shape(shape, normalize_axis(axis, len(shape), "sum"), keepdims)

    @staticmethod
    def jvp(ctx, t):
        return Sum.apply(t, axis=ctx.axes, keepdims=ctx.keepdims)


class SumGrad(Function):
    """The backward of :class:`Sum` and :class:`Mean`, fused into one primitive: the cotangent
    ``g`` (the reduction's output shape) with the reduced ``axes`` put back as size 1, times
    ``scale`` (``1/n`` for a mean; ``None`` for 1), broadcast to ``shape``. The result is a
    read-only broadcast view: no copy of the input's size is made.

    Linear in ``g``; its backward (the transpose) is the matching :class:`Sum` times ``scale``,
    written with tapegrad ops, so every order is exact.
    """

    oper = "sum_grad"

    @staticmethod
    def forward(ctx, g, shape=(), axes=(), keepdims=False, scale=None):
        ctx.shape, ctx.axes, ctx.keepdims, ctx.scale = shape, axes, keepdims, scale
        xp = ctx.backend
        if scale is not None:
            g = xp.multiply(g, scale, dtype=g.dtype)
        kept = g.reshape(_kept_shape(shape, axes))
        if type(kept) is np.ndarray and kept.flags.c_contiguous and kept.size:
            # The same read-only view np.broadcast_to makes (stride 0 along the reduced axes),
            # built directly: broadcast_to goes through nditer, several times the cost.
            strides = tuple(
                0 if k != s else st for k, s, st in zip(kept.shape, shape, kept.strides)
            )
            out = np.ndarray(shape, kept.dtype, kept, 0, strides)
            out.flags.writeable = False
            return out
        return xp.broadcast_to(kept, shape)

    @staticmethod
    def backward(ctx, h):
        s = Sum.apply(h, axis=ctx.axes, keepdims=ctx.keepdims)
        return s if ctx.scale is None else s * ctx.scale

    @staticmethod
    def jvp(ctx, t):
        return SumGrad.apply(
            t, shape=ctx.shape, axes=ctx.axes, keepdims=ctx.keepdims, scale=ctx.scale
        )

    @classmethod
    def output_shape(cls, g, shape=(), axes=(), keepdims=False, scale=None):
        return tuple(shape)

    @classmethod
    def output_dtype(cls, dtype, **params):
        return np.dtype(dtype)


class Mean(Function):
    """Arithmetic mean over ``axis``. Backward: cotangent / n broadcast back.

    Output dtype as NumPy (integers give float64). Raises ``ValueError`` over a size-0 axis.
    """

    oper = "mean"

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        axes = _reduction_setup(ctx, x, axis, keepdims, "mean")
        _nonempty("mean", x.shape, axes)
        ctx.n = _count(x.shape, axes)
        return x.mean(axis=axes, keepdims=keepdims)

    @staticmethod
    def backward(ctx, g):
        return SumGrad.apply(
            g, shape=ctx.in_shape, axes=ctx.axes, keepdims=ctx.keepdims, scale=1.0 / ctx.n
        )

    @classmethod
    def output_dtype(cls, dtype, **params):
        return _numpy_dtype("mean", np.dtype(dtype))

    @classmethod
    def output_shape(cls, shape, axis=None, keepdims=False):
        axes = normalize_axis(axis, len(shape), "mean")
        _nonempty("mean", shape, axes)
        return _reduced_shape(shape, axes, keepdims)

    @staticmethod
    def jvp(ctx, t):
        return Mean.apply(t, axis=ctx.axes, keepdims=ctx.keepdims)


def _to_last(x, axes):
    """Move ``axes`` of Tensor ``x`` to the end and flatten them into one axis of size n.

    Returns ``(x2 of shape kept + (n,), permuted shape, permutation)``.
    """
    from tapegrad import numpy as tnp

    rest = tuple(i for i in range(x.ndim) if i not in axes)
    perm = rest + tuple(axes)
    xt = tnp.transpose(x, perm) if perm != tuple(range(x.ndim)) else x
    pshape = xt.shape
    n = _count(x.shape, axes)
    x2 = tnp.reshape(xt, tuple(x.shape[i] for i in rest) + (n,))
    return x2, pshape, perm


def _from_last(y2, pshape, perm):
    from tapegrad import numpy as tnp

    y = tnp.reshape(y2, pshape)
    if perm != tuple(range(len(perm))):
        y = tnp.transpose(y, tuple(int(i) for i in np.argsort(perm)))
    return y


class Prod(Function):
    """Product over ``axis``; the product of an empty set is 1 (NumPy).

    Backward: ``g`` times the product of the *other* elements of each reduced slice, computed
    without division as ``L * R`` with exclusive prefix and suffix products (``cumprod`` shifted
    by one), so it is exact when the input holds zeros (one zero: only that element gets a
    nonzero gradient; two or more: all zero). Higher derivatives go through :class:`CumProd`,
    which is exact with zeros as well.
    """

    oper = "prod"

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        axes = _reduction_setup(ctx, x, axis, keepdims, "prod")
        ctx.save_for_backward(x)
        return x.prod(axis=axes, keepdims=keepdims)

    @staticmethod
    def backward(ctx, g):
        from tapegrad import numpy as tnp

        (x,) = ctx.saved_tensors
        g = tnp.broadcast_to(_expand(g, ctx), ctx.in_shape)
        if not ctx.axes or x.size == 0:
            return g
        x2, pshape, perm = _to_last(x, ctx.axes)
        left = Shift.apply(CumProd.apply(x2, axis=-1), axis=-1, shift=1, fill=1)
        right = Shift.apply(CumProd.apply(x2, axis=-1, reverse=True), axis=-1, shift=-1, fill=1)
        return g * _from_last(left * right, pshape, perm)

    @classmethod
    def output_dtype(cls, dtype, **params):
        return _numpy_dtype("prod", np.dtype(dtype))

    @classmethod
    def output_shape(cls, shape, axis=None, keepdims=False):
        return _reduced_shape(shape, normalize_axis(axis, len(shape), "prod"), keepdims)


def _extremum_backward(ctx, g):
    """Cotangent of max/min: ``g`` split equally among the elements equal to the extremum."""
    x, out = ctx.saved_tensors
    return ExtremumGrad.apply(g, x, out, axes=ctx.axes, keepdims=ctx.keepdims)


def _tie_weights(xp, x, out_kept, axes):
    """``hit / count``: 1/k at the k elements equal to the extremum, 0 elsewhere (and where
    the extremum is NaN)."""
    hit = x == out_kept
    if xp is np and len(axes) == hit.ndim:  # a full reduction: count_nonzero is one fast pass
        count = np.asarray(np.count_nonzero(hit)).reshape((1,) * hit.ndim)
    else:
        count = hit.sum(axis=axes, keepdims=True)
    return hit, xp.maximum(count, 1)


class ExtremumGrad(Function):
    """The backward of :class:`Max` and :class:`Min`, fused: ``g`` (the output cotangent)
    broadcast back and split equally among the elements equal to the extremum ``out``.

    Two passes over ``x`` (a comparison and a multiply) instead of five ops. The result is
    linear in ``g`` and piecewise constant in ``x``: its own backward sends ``h`` back to ``g``
    as ``sum(h * hit / count)`` over the reduced axes (written with tapegrad ops, so every
    order is exact) and nothing to ``x`` or ``out``.
    """

    oper = "extremum_grad"
    nondiff_argnums = (1, 2)  # piecewise constant in x and out (they only locate the maxima)

    @staticmethod
    def forward(ctx, g, x, out, axes, keepdims):
        xp = ctx.backend
        kept = _kept_shape(x.shape, axes)
        ctx.axes, ctx.keepdims, ctx.kept = axes, keepdims, kept
        ctx.save_for_backward(x, out)
        hit, count = _tie_weights(xp, x, out.reshape(kept), axes)
        w = (g.reshape(kept) / count).astype(x.dtype, copy=False)
        # hit * w, as a cast then an in-place scale: NumPy's bool-times-float loop is about
        # twice as slow as the cast, and the common weight 1 (no ties, unit cotangent) needs
        # no multiply at all. Values are the same: 1 * w and 0 * w (NaN where w is).
        res = hit.astype(x.dtype)
        if w.size != 1 or w.reshape(()) != 1:
            res *= w
        return res

    @staticmethod
    def backward(ctx, h):
        from tapegrad import numpy as tnp

        x, out = ctx.saved_tensors
        hit = tnp.astype(x == tnp.reshape(out, ctx.kept), x.dtype)
        count = tnp.maximum(tnp.sum(hit, axis=ctx.axes, keepdims=True), 1.0)
        gg = tnp.sum(h * hit, axis=ctx.axes, keepdims=True) / count
        if not ctx.keepdims:
            gg = tnp.reshape(gg, out.shape)
        return gg, None, None

    @classmethod
    def output_shape(cls, g, x, out, axes=None, keepdims=False):
        return tuple(x)

    @classmethod
    def output_dtype(cls, g, x, out, **params):
        return np.dtype(x)


class Max(Function):
    """Maximum over ``axis`` (NumPy ``amax``; NaN propagates).

    Gradient convention at ties: the cotangent is split equally among the elements equal to the
    maximum (as the seeds document for ``maximum``); this is a valid subgradient and keeps
    ``max(x) == max(x)`` symmetric in its arguments. Where the maximum is NaN the gradient is 0.

    Raises ``ValueError`` when a reduced axis has size 0, ``TypeError`` for complex inputs.
    """

    oper = "max"

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        _real("max", x.dtype)
        axes = _reduction_setup(ctx, x, axis, keepdims, "max")
        _nonempty("max", x.shape, axes)
        out = x.max(axis=axes, keepdims=keepdims)
        ctx.save_for_backward(x, out)
        return out

    backward = staticmethod(_extremum_backward)

    @classmethod
    def output_dtype(cls, dtype, **params):
        return np.dtype(dtype)

    @classmethod
    def output_shape(cls, shape, axis=None, keepdims=False):
        axes = normalize_axis(axis, len(shape), "max")
        _nonempty("max", shape, axes)
        return _reduced_shape(shape, axes, keepdims)


class Min(Function):
    """Minimum over ``axis`` (NumPy ``amin``); ties split the gradient equally (see
    :class:`Max`). Raises ``ValueError`` when a reduced axis has size 0, ``TypeError`` for
    complex inputs."""

    oper = "min"

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        _real("min", x.dtype)
        axes = _reduction_setup(ctx, x, axis, keepdims, "min")
        _nonempty("min", x.shape, axes)
        out = x.min(axis=axes, keepdims=keepdims)
        ctx.save_for_backward(x, out)
        return out

    backward = staticmethod(_extremum_backward)

    @classmethod
    def output_dtype(cls, dtype, **params):
        return np.dtype(dtype)

    @classmethod
    def output_shape(cls, shape, axis=None, keepdims=False):
        axes = normalize_axis(axis, len(shape), "min")
        _nonempty("min", shape, axes)
        return _reduced_shape(shape, axes, keepdims)


def _arg_shape(op, shape, axis, keepdims):
    if axis is None:
        if len(shape) and _count(shape, range(len(shape))) == 0:
            raise ValueError(f"{op}: attempt to get {op} of an empty Tensor of shape {shape}")
        return (1,) * len(shape) if keepdims else ()
    a = _single_axis(axis, len(shape), op)
    if shape[a] == 0:
        raise ValueError(
            f"{op}: axis {a} of a Tensor of shape {tuple(shape)} has size 0; {op} of an empty "
            "sequence is undefined"
        )
    return _reduced_shape(shape, (a,), keepdims)


class ArgMax(Function):
    """Index of the maximum along one ``axis`` (int) or of the flattened input (``None``),
    NumPy semantics: the first occurrence at ties, int64 (``intp``) output, no gradient."""

    oper = "argmax"
    differentiable = False

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        _arg_shape("argmax", x.shape, axis, keepdims)
        return ctx.backend.argmax(x, axis=axis, keepdims=keepdims)

    @classmethod
    def output_dtype(cls, dtype, **params):
        return np.dtype(np.intp)

    @classmethod
    def output_shape(cls, shape, axis=None, keepdims=False):
        return _arg_shape("argmax", tuple(shape), axis, keepdims)


class ArgMin(Function):
    """Index of the minimum (see :class:`ArgMax`); first occurrence at ties, no gradient."""

    oper = "argmin"
    differentiable = False

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        _arg_shape("argmin", x.shape, axis, keepdims)
        return ctx.backend.argmin(x, axis=axis, keepdims=keepdims)

    @classmethod
    def output_dtype(cls, dtype, **params):
        return np.dtype(np.intp)

    @classmethod
    def output_shape(cls, shape, axis=None, keepdims=False):
        return _arg_shape("argmin", tuple(shape), axis, keepdims)


def _var_check(op, shape, axes, ddof):
    if isinstance(ddof, bool) or not isinstance(ddof, (int, np.integer)) or ddof < 0:
        raise ValueError(f"{op}: ddof must be a non-negative int, got {ddof!r}")
    n = _count(shape, axes)
    _nonempty(op, shape, axes)
    if n - ddof <= 0:
        raise ValueError(
            f"{op}: ddof={ddof} leaves {n - ddof} degrees of freedom for {n} elements per "
            f"reduction (shape {tuple(shape)}, axes {axes}); need ddof < {n}"
        )
    return n


class Var(Function):
    """Variance ``sum((x - mean)**2) / (n - ddof)`` over ``axis``.

    Backward: ``g * 2 (x - mean) / (n - ddof)``, with the mean recomputed by tapegrad ops.
    Raises ``ValueError`` when a reduced axis has size 0 or ``ddof >= n``.
    """

    oper = "var"

    @staticmethod
    def forward(ctx, x, axis=None, ddof=0, keepdims=False):
        _real("var", x.dtype)
        axes = _reduction_setup(ctx, x, axis, keepdims, "var")
        ctx.dof = _var_check("var", x.shape, axes, ddof) - ddof
        ctx.save_for_backward(x)
        return x.var(axis=axes, ddof=ddof, keepdims=keepdims)

    @staticmethod
    def backward(ctx, g):
        from tapegrad import numpy as tnp

        (x,) = ctx.saved_tensors
        centered = x - tnp.mean(x, axis=ctx.axes, keepdims=True)
        return _expand(g, ctx) * centered * (2.0 / ctx.dof)

    @classmethod
    def output_dtype(cls, dtype, **params):
        return _numpy_dtype("var", np.dtype(dtype))

    @classmethod
    def output_shape(cls, shape, axis=None, ddof=0, keepdims=False):
        axes = normalize_axis(axis, len(shape), "var")
        _var_check("var", shape, axes, ddof)
        return _reduced_shape(shape, axes, keepdims)


class Std(Function):
    """Standard deviation ``sqrt(var(x, ddof))`` over ``axis``.

    Backward: ``g * (x - mean) / ((n - ddof) * std)``. Convention at zero spread (all reduced
    elements equal, where ``std`` is not differentiable): the gradient is 0, the minimum-norm
    subgradient (as for ``|x|`` at 0), never NaN. Raises ``ValueError`` when a reduced axis
    has size 0 or ``ddof >= n``.
    """

    oper = "std"

    @staticmethod
    def forward(ctx, x, axis=None, ddof=0, keepdims=False):
        _real("std", x.dtype)
        axes = _reduction_setup(ctx, x, axis, keepdims, "std")
        ctx.dof = _var_check("std", x.shape, axes, ddof) - ddof
        out = x.std(axis=axes, ddof=ddof, keepdims=keepdims)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        from tapegrad import numpy as tnp

        x, out = ctx.saved_tensors
        out = _expand(out, ctx)
        zero = out == 0
        safe = tnp.where(zero, 1.0, out)
        centered = x - tnp.mean(x, axis=ctx.axes, keepdims=True)
        scale = tnp.where(zero, 0.0, _expand(g, ctx) / (safe * ctx.dof))
        return centered * scale

    @classmethod
    def output_dtype(cls, dtype, **params):
        return _numpy_dtype("std", np.dtype(dtype))

    @classmethod
    def output_shape(cls, shape, axis=None, ddof=0, keepdims=False):
        axes = normalize_axis(axis, len(shape), "std")
        _var_check("std", shape, axes, ddof)
        return _reduced_shape(shape, axes, keepdims)


class LogSumExp(Function):
    """``log(sum(exp(x)))`` over ``axis``, computed stably.

    Forward (the shifted ``log1p`` form of Blanchard, Higham and Higham 2021): with
    ``m = max(x)`` and one maximal element ``k`` set aside, ``m + log1p(sum_{i != k}
    exp(x_i - m))``: no overflow, and accurate when the sum is near 1. An all ``-inf`` slice
    gives ``-inf``; an empty reduction gives ``-inf`` (the log of an empty sum, as SciPy).
    Integer inputs give float64.

    Backward: ``g * softmax(x)``, with ``softmax(x) = e / sum(e)`` and ``e = exp(x - out)``
    (``out`` held constant: no overflow as ``out >= max(x)``, and the normalization removes the
    error of order ``|out| * eps`` that ``exp(x - out)`` alone carries for large ``|x|``).
    Where the result is ``-inf`` the gradient is 0.

    References:
        Blanchard, Higham and Higham, "Accurately computing the log-sum-exp and softmax
        functions", IMA J. Numer. Anal. 41(4), 2021.
    """

    oper = "logsumexp"

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        xp = ctx.backend
        _real("logsumexp", x.dtype)
        axes = _reduction_setup(ctx, x, axis, keepdims, "logsumexp")
        xf = x if x.dtype.kind == "f" else x.astype(np.float64)
        n = _count(x.shape, axes)
        if n == 0:
            out = xp.full(_reduced_shape(x.shape, axes, keepdims), -np.inf, dtype=xf.dtype)
        else:
            rest = tuple(i for i in range(x.ndim) if i not in axes)
            x2 = xf.transpose(rest + axes).reshape(tuple(x.shape[i] for i in rest) + (n,))
            m = x2.max(axis=-1, keepdims=True)
            m_safe = xp.where(xp.isfinite(m), m, xp.zeros_like(m))
            with np.errstate(under="ignore", over="ignore", invalid="ignore"):
                e = xp.exp(x2 - m_safe)
                k = xp.argmax(x2, axis=-1)[..., None]  # the one maximal term set aside
                e = xp.where(xp.arange(n) == k, xp.zeros((), dtype=e.dtype), e)
                out = m + xp.log1p(e.sum(axis=-1, keepdims=True))
            out = out.reshape(_reduced_shape(x.shape, axes, keepdims))
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        from tapegrad import numpy as tnp

        x, out = ctx.saved_tensors
        # softmax = e / sum(e) with e = exp(x - c) for the constant c = out (>= max(x), so no
        # overflow, and the largest e is >= 1/n). Normalizing makes the result independent of
        # the rounding of c (exp(x - out) alone has an error of order |out| * eps), and since
        # softmax is invariant to c, holding c constant is exact at every order.
        c = tnp.stop_gradient(_expand(out, ctx))
        e = tnp.exp(x - tnp.where(c == -np.inf, 0.0, c))
        total = tnp.sum(e, axis=ctx.axes, keepdims=True)
        return _expand(g, ctx) * (e / tnp.where(total == 0, 1.0, total))

    @classmethod
    def output_dtype(cls, dtype, **params):
        dtype = np.dtype(dtype)
        return dtype if dtype.kind == "f" else np.dtype(np.float64)

    @classmethod
    def output_shape(cls, shape, axis=None, keepdims=False):
        axes = normalize_axis(axis, len(shape), "logsumexp")
        return _reduced_shape(shape, axes, keepdims)


class Norm2(Function):
    """Euclidean norm ``sqrt(sum(x**2))`` over ``axis`` (the vector 2-norm, and the Frobenius
    norm over two axes), as ``numpy.linalg.norm`` computes it (no rescaling).

    Backward: ``g * x / out``. Convention at ``x = 0`` (all reduced elements zero, where the
    norm is not differentiable): the gradient is 0, the minimum-norm subgradient, never NaN.
    The norm of an empty slice is 0.
    """

    oper = "norm2"

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        _real("norm", x.dtype)
        axes = _reduction_setup(ctx, x, axis, keepdims, "norm")
        out = ctx.backend.sqrt((x * x).sum(axis=axes, keepdims=keepdims))
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        from tapegrad import numpy as tnp

        x, out = ctx.saved_tensors
        out = _expand(out, ctx)
        zero = out == 0
        scale = tnp.where(zero, 0.0, _expand(g, ctx) / tnp.where(zero, 1.0, out))
        return x * scale

    @classmethod
    def output_dtype(cls, dtype, **params):
        with np.errstate(all="ignore"):
            one = np.ones(1, dtype=dtype)
            return np.sqrt((one * one).sum()).dtype

    @classmethod
    def output_shape(cls, shape, axis=None, keepdims=False):
        return _reduced_shape(shape, normalize_axis(axis, len(shape), "norm"), keepdims)


def _scan_setup(ctx, x, axis, op):
    if x.ndim == 0:
        raise ValueError(f"{op}: a 0-d Tensor has no axis {axis}; use axis=None to flatten")
    a = _single_axis(axis, x.ndim, op)
    ctx.axis = a
    return a


class CumSum(Function):
    """Cumulative sum along one ``axis`` (int); ``reverse=True`` sums from the end.

    Output dtype as NumPy's ``cumsum``. Backward: the cumulative sum of the cotangent in the
    opposite direction (the transpose of a lower-triangular matrix of ones).
    """

    oper = "cumsum"

    @staticmethod
    def forward(ctx, x, axis=-1, reverse=False):
        xp = ctx.backend
        a = _scan_setup(ctx, x, axis, "cumsum")
        ctx.reverse = reverse
        if reverse:
            return xp.flip(xp.cumsum(xp.flip(x, axis=a), axis=a), axis=a)
        return xp.cumsum(x, axis=a)

    @staticmethod
    def backward(ctx, g):
        return CumSum.apply(g, axis=ctx.axis, reverse=not ctx.reverse)

    @classmethod
    def output_dtype(cls, dtype, **params):
        return _numpy_dtype("cumsum", np.dtype(dtype))

    @classmethod
    def output_shape(cls, shape, axis=-1, reverse=False):
        if len(shape) == 0:
            raise ValueError("cumsum: a 0-d Tensor has no axis; use axis=None to flatten")
        _single_axis(axis, len(shape), "cumsum")
        return tuple(shape)


class CumProd(Function):
    """Cumulative product along one ``axis`` (int); ``reverse=True`` multiplies from the end.

    Backward without division, exact with zeros in the input: for the forward direction,
    ``dL/dx_i = y_{i-1} * r_i`` with ``y`` the output (``y_{-1} = 1``) and
    ``r_i = sum_{k >= i} g_k prod_{i < j <= k} x_j``, the reverse linear recurrence
    ``r_i = g_i + x_{i+1} r_{i+1}``, evaluated by recursive doubling (Hillis and Steele, 1986)
    in ``ceil(log2 n)`` steps of shifts, products and sums. Since the rule is made of
    polynomial ops (and ``cumprod`` itself), every higher derivative is exact with zeros too.
    Cost ``O(n log n)`` per slice in backward.

    References:
        Hillis and Steele, "Data parallel algorithms", Commun. ACM 29(12), 1986.
    """

    oper = "cumprod"

    @staticmethod
    def forward(ctx, x, axis=-1, reverse=False):
        xp = ctx.backend
        a = _scan_setup(ctx, x, axis, "cumprod")
        ctx.reverse = reverse
        if reverse:
            out = xp.flip(xp.cumprod(xp.flip(x, axis=a), axis=a), axis=a)
        else:
            out = xp.cumprod(x, axis=a)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        a = ctx.axis
        s = -1 if ctx.reverse else 1
        n = x.shape[a]
        before = Shift.apply(out, axis=a, shift=s, fill=1)  # y_{i-1}
        coef = Shift.apply(x, axis=a, shift=-s, fill=0)  # x_{i+1}
        r = g
        d = 1
        while d < n:
            r = r + coef * Shift.apply(r, axis=a, shift=-s * d, fill=0)
            if 2 * d < n:
                coef = coef * Shift.apply(coef, axis=a, shift=-s * d, fill=0)
            d *= 2
        return before * r

    @classmethod
    def output_dtype(cls, dtype, **params):
        return _numpy_dtype("cumprod", np.dtype(dtype))

    @classmethod
    def output_shape(cls, shape, axis=-1, reverse=False):
        if len(shape) == 0:
            raise ValueError("cumprod: a 0-d Tensor has no axis; use axis=None to flatten")
        _single_axis(axis, len(shape), "cumprod")
        return tuple(shape)


class Shift(Function):
    """Shift along ``axis`` by ``shift`` places, filling the vacated places with ``fill``:
    ``out[i] = x[i - shift]`` where ``0 <= i - shift < n``, else ``fill``. Same shape and dtype.

    A building block of the scan gradients. Backward: the cotangent shifted by ``-shift``
    with zero fill (the transpose).
    """

    oper = "shift"

    @staticmethod
    def forward(ctx, x, axis=-1, shift=0, fill=0):
        xp = ctx.backend
        a = _single_axis(axis, x.ndim, "shift")
        ctx.axis = a
        ctx.shift = shift
        n = x.shape[a]
        out = xp.full(x.shape, fill, dtype=x.dtype)
        k = min(abs(shift), n)
        src = [slice(None)] * x.ndim
        dst = [slice(None)] * x.ndim
        if shift >= 0:
            src[a], dst[a] = slice(0, n - k), slice(k, n)
        else:
            src[a], dst[a] = slice(k, n), slice(0, n - k)
        out[tuple(dst)] = x[tuple(src)]
        return out

    @staticmethod
    def backward(ctx, g):
        return Shift.apply(g, axis=ctx.axis, shift=-ctx.shift, fill=0)

    @classmethod
    def output_dtype(cls, dtype, **params):
        return np.dtype(dtype)

    @classmethod
    def output_shape(cls, shape, axis=-1, shift=0, fill=0):
        _single_axis(axis, len(shape), "shift")
        return tuple(shape)


class Any(Function):
    """Whether any element over ``axis`` is nonzero (boolean output, no gradient); ``False``
    over an empty set."""

    oper = "any"
    differentiable = False

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        axes = normalize_axis(axis, x.ndim, "any")
        return ctx.backend.any(x, axis=axes, keepdims=keepdims)

    @classmethod
    def output_dtype(cls, dtype, **params):
        return np.dtype(np.bool_)

    @classmethod
    def output_shape(cls, shape, axis=None, keepdims=False):
        return _reduced_shape(shape, normalize_axis(axis, len(shape), "any"), keepdims)


class All(Function):
    """Whether all elements over ``axis`` are nonzero (boolean output, no gradient); ``True``
    over an empty set."""

    oper = "all"
    differentiable = False

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        axes = normalize_axis(axis, x.ndim, "all")
        return ctx.backend.all(x, axis=axes, keepdims=keepdims)

    @classmethod
    def output_dtype(cls, dtype, **params):
        return np.dtype(np.bool_)

    @classmethod
    def output_shape(cls, shape, axis=None, keepdims=False):
        return _reduced_shape(shape, normalize_axis(axis, len(shape), "all"), keepdims)
