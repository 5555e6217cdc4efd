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
import math
import numbers
import operator

import numpy as np
from numpy.exceptions import AxisError

from tapegrad.core.function import Function, Traits
from tapegrad.core.tensor import Tensor
from tapegrad.ops import movement as _mv  # Reshape, Transpose (attributes read at call time)
from tapegrad.ops._batching import axis_rule, shift_axes
from tapegrad.ops._registry import bool_arg, dtype_arg, expose, tensor_arg
from tapegrad.ops.elementwise import Abs, AsType, Exp, Maximum, Sign, StopGradient, Where  # pyright: ignore[reportAssignmentType, reportAttributeAccessIssue]
from tapegrad.ops.movement import Shift, _single_axis

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
    "NormP",
    "ExtremumGrad",
    "CumSum",
    "CumProd",
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
            raise AxisError(f"{op}: axis {a} is out of range for a Tensor with ndim {ndim}")
        out.append(a % ndim if ndim else 0)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in {axis!r}")
    return tuple(sorted(out))


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


def _nonempty_shape(op: str, shape, axis, keepdims) -> tuple:
    """The shape rule of a reduction that has no value over an empty set (see
    :func:`_nonempty`)."""
    axes = normalize_axis(axis, len(shape), op)
    _nonempty(op, shape, axes)
    return _reduced_shape(shape, axes, keepdims)


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
    if not ctx.keepdims:
        g = _mv.Reshape.apply(g, _kept_shape(ctx.in_shape, ctx.axes))
    return g


def _operand(x, op: str, real: bool = False) -> Tensor:
    """The input of a public reduction as a Tensor; complex rejected (naming ``op``) when
    ``real``, before any work."""
    if type(x) is not Tensor:
        x = tensor_arg(x)
    if real and x.dtype.kind == "c":
        raise TypeError(f"{op}: complex inputs are not supported (got dtype {x.dtype})")
    return x


def _no_out(out, op: str) -> None:
    """NumPy's ``out=``, which immutable Tensors cannot honour.

    Raises:
        TypeError: if ``out`` is not None, naming ``op``.
    """
    if out is not None:
        raise TypeError(f"{op}: out= is not supported (Tensors are immutable); use the "
                        "returned Tensor")


def _in_dtype(x: Tensor, dtype, op: str) -> Tensor:
    """``x`` cast to NumPy's ``dtype=`` of a reduction (the accumulator and result dtype):
    the reduction then runs on the cast values, as NumPy's does. Differentiable between
    floating and complex dtypes."""
    if dtype is None:
        return x
    dt = dtype_arg(dtype, op)
    return x if x.dtype == dt else AsType.api(x, dt)


def _no_bool_dtype(dtype, op: str) -> None:
    """A spread cannot be computed in booleans (NumPy's ``TypeError``: no boolean subtract)."""
    if dtype is not None and dtype_arg(dtype, op).kind == "b":
        raise TypeError(
            f"{op}: dtype=bool cannot hold deviations from the mean (booleans do not "
            "subtract, as in NumPy); pass a floating dtype"
        )


def _out_dtype(out: Tensor, dtype) -> Tensor:
    """The result cast to ``dtype=`` where the reduction promoted it (integer sums of small
    integers accumulate in int64 here: the same result modulo the width, as NumPy's)."""
    if dtype is None or out.dtype == np.dtype(dtype):
        return out
    return AsType.api(out, np.dtype(dtype))


def _ddof(ddof, correction, op: str):
    """NumPy 2's ``correction=`` (the Array API name) folded into ``ddof``, checked: a real
    number ``>= 0`` (an integral float becomes an int; NumPy ints are accepted).

    Raises:
        TypeError: if ``ddof`` or ``correction`` is not a real number (a string, None, a
            bool, a Tensor).
        ValueError: if both are given, or the value is negative.
    """
    name = "ddof"
    if correction is not None:
        if not (isinstance(ddof, (int, np.integer)) and not isinstance(ddof, bool)
                and ddof == 0):
            raise ValueError(f"{op}: give ddof or correction, not both")
        ddof, name = correction, "correction"
    if isinstance(ddof, (bool, np.bool_)) or not isinstance(ddof, (int, float, np.integer,
                                                                  np.floating)):
        raise TypeError(f"{op}: {name} must be a real number >= 0, got {ddof!r} "
                        f"({type(ddof).__name__})")
    if not 0 <= float(ddof) < math.inf:
        raise ValueError(
            f"{op}: {name} must be a non-negative number (a fraction is allowed, as NumPy's "
            f"and the array API's correction), got {ddof!r}"
        )
    if isinstance(ddof, (float, np.floating)):
        return int(ddof) if float(ddof).is_integer() else float(ddof)
    return int(ddof)


def _accumulate(cls, op: str, x, axis, dtype, out, keepdims) -> Tensor:
    """The public ``op`` (sum, mean or prod: ``cls``) over ``axis``, with NumPy's ``dtype=``
    (the accumulator and result dtype) and ``out=`` (must be None) checked, naming ``op``."""
    keepdims = bool_arg(keepdims, op, "keepdims")
    x = _operand(x, op)
    if dtype is None and out is None:
        return cls.apply(x, axis=axis, keepdims=keepdims)
    _no_out(out, op)
    res = cls.apply(_in_dtype(x, dtype, op), axis=axis, keepdims=keepdims)
    return _out_dtype(res, dtype)


@expose
class Sum(Function):
    """Sum over ``axis``; the sum of an empty set is 0 (NumPy).

    Output dtype as NumPy (small integers and booleans promote to the platform integer).
    Backward: the cotangent broadcast back over the reduced axes.
    """
    batch = axis_rule("axis")  # vmap: the axes move past the batch axis
    traits = Traits(fresh=True, reduction="sum",
                    array_fn=lambda axis=None, keepdims=False: operator.methodcaller(
                        "sum", axis=axis, keepdims=keepdims))

    oper = "sum"
    names = ("sum",)
    methods = ("sum",)

    @staticmethod
    def api(x, axis=None, dtype=None, out=None, keepdims=False) -> Tensor:
        """Sum over ``axis``.

        Args:
            x: Tensor of shape ``(d_0, ..., d_{n-1})``, any numeric dtype.
            axis: Axis or tuple of axes to reduce; ``None`` reduces all axes.
            dtype: Accumulator and result dtype (NumPy's ``dtype=``): ``x`` is cast to it
                first (differentiably between floating/complex dtypes).
            out: Must be None (Tensors are immutable).
            keepdims: Keep reduced axes with size 1.

        Returns:
            Tensor of the reduced shape; dtype as NumPy's ``sum`` (booleans and small integers
            promote to int64), or ``dtype``. The sum over an empty axis is 0.

        Raises:
            ValueError: if an axis is out of range or repeated, naming it and ``x.ndim``.
            TypeError: if ``axis`` is not None, an int or a tuple of ints; if ``dtype`` is not
                a dtype or ``out`` is given.
        """
        return _accumulate(Sum, "sum", x, axis, dtype, out, keepdims)

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

    @staticmethod
    def batch(args, batched, size, shape=(), axes=(), keepdims=False, scale=None):
        g = args[0]
        return SumGrad.apply(g, shape=(g.shape[0],) + tuple(shape),
                             axes=tuple(a + 1 for a in axes), keepdims=keepdims, scale=scale)
    traits = Traits(view="readonly")

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


@expose
class Mean(Function):
    """Arithmetic mean over ``axis``. Backward: cotangent / n broadcast back.

    Output dtype as NumPy (integers give float64). Raises ``ValueError`` over a size-0 axis.
    """
    batch = axis_rule("axis")  # vmap: the axes move past the batch axis
    traits = Traits(fresh=True, reduction="mean")

    oper = "mean"
    names = ("mean",)
    methods = ("mean",)

    @staticmethod
    def api(x, axis=None, dtype=None, out=None, keepdims=False) -> Tensor:
        """Arithmetic mean over ``axis`` (see :func:`sum` for ``axis``, ``dtype``, ``out``
        and ``keepdims``).

        Returns:
            Tensor of the reduced shape; floating inputs keep their dtype, integers give
            float64; with ``dtype``, computed on ``x`` cast to it and returned in it.

        Raises:
            ValueError: if an axis is out of range, or a reduced axis has size 0 (the mean of
                an empty set is undefined; NumPy would return NaN with a warning).
            TypeError: for a ``dtype`` that is not a dtype, or a given ``out``.
        """
        return _accumulate(Mean, "mean", x, axis, dtype, out, keepdims)

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
        return _nonempty_shape("mean", shape, axis, keepdims)

    @staticmethod
    def jvp(ctx, t):
        return Mean.apply(t, axis=ctx.axes, keepdims=ctx.keepdims)


def _to_last(x, axes):
    """Move ``axes`` of Tensor ``x`` to the end and flatten them into one axis of size n.

    Returns ``(x2 of shape kept + (n,), permuted shape, permutation)``.
    """
    rest = tuple(i for i in range(x.ndim) if i not in axes)
    perm = rest + tuple(axes)
    xt = _mv.Transpose.apply(x, axes=perm) if perm != tuple(range(x.ndim)) else x
    pshape = xt.shape
    n = _count(x.shape, axes)
    x2 = _mv.Reshape.apply(xt, tuple(x.shape[i] for i in rest) + (n,))
    return x2, pshape, perm


def _from_last(y2, pshape, perm):
    y = _mv.Reshape.apply(y2, pshape)
    if perm != tuple(range(len(perm))):
        y = _mv.Transpose.apply(y, axes=tuple(int(i) for i in np.argsort(perm)))
    return y


@expose
class Prod(Function):
    """Product over ``axis``; the product of an empty set is 1 (NumPy).

    Backward: ``g`` times the product of the *other* elements of each reduced slice, computed
    without division as ``L * R`` with exclusive prefix and suffix products (``cumprod`` shifted
    by one), so it is exact when the input holds zeros (one zero: only that element gets a
    nonzero gradient; two or more: all zero). Higher derivatives go through :class:`CumProd`,
    which is exact with zeros as well.
    """
    batch = axis_rule("axis")  # vmap: the axes move past the batch axis
    traits = Traits(fresh=True)

    oper = "prod"
    names = ("prod",)
    methods = ("prod",)

    @staticmethod
    def api(x, axis=None, dtype=None, out=None, keepdims=False) -> Tensor:
        """Product over ``axis`` (see :func:`sum`, also for ``dtype`` and ``out``); the
        product over an empty axis is 1.

        The gradient is the product of the other elements of each slice, computed without
        division, so it is exact when ``x`` holds zeros (at every order).

        Raises:
            ValueError: if an axis is out of range or repeated.
            TypeError: for a ``dtype`` that is not a dtype, or a given ``out``.

        Example:
            >>> import tapegrad as tg, tapegrad.numpy as tnp
            >>> tg.grad(tnp.prod)(tg.Tensor([2.0, 0.0, 4.0]))
            Tensor([0., 8., 0.], dtype=float32)
        """
        return _accumulate(Prod, "prod", x, axis, dtype, out, keepdims)

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        axes = _reduction_setup(ctx, x, axis, keepdims, "prod")
        ctx.save_for_backward(x)
        return x.prod(axis=axes, keepdims=keepdims)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        g = SumGrad.apply(g, shape=ctx.in_shape, axes=ctx.axes, keepdims=ctx.keepdims)
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


def _unary_reduction(cls, op: str, x, axis, out, keepdims) -> Tensor:
    """The public ``op`` (``cls``: max, min, argmax, argmin, any, all) over ``axis``, with
    ``keepdims`` and NumPy's ``out=`` (must be None) checked, naming ``op``."""
    keepdims = bool_arg(keepdims, op, "keepdims")
    _no_out(out, op)
    return cls.apply(_operand(x, op), axis=axis, keepdims=keepdims)


def _extremum_forward(ctx, x, axis, keepdims, op: str):
    """Forward of max/min (``op``, the array method): the extremum, saved with ``x``."""
    axes = _reduction_setup(ctx, x, axis, keepdims, op)
    _nonempty(op, x.shape, axes)
    out = getattr(x, op)(axis=axes, keepdims=keepdims)
    ctx.save_for_backward(x, out)
    return out


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
    # vmap: the axes (of x, input 1: g has fewer axes without keepdims) move past the batch axis
    batch = axis_rule("axes", of=1)

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
        x, out = ctx.saved_tensors
        hit = AsType.apply(x == _mv.Reshape.apply(out, ctx.kept), x.dtype)
        count = Maximum.api(Sum.apply(hit, axis=ctx.axes, keepdims=True), 1.0)
        gg = Sum.apply(h * hit, axis=ctx.axes, keepdims=True) / count
        if not ctx.keepdims:
            gg = _mv.Reshape.apply(gg, out.shape)
        return gg, None, None

    @classmethod
    def output_shape(cls, g, x, out, axes=None, keepdims=False):
        return tuple(x)

    @classmethod
    def output_dtype(cls, g, x, out, **params):
        return np.dtype(x)


@expose
class Max(Function):
    """Maximum over ``axis`` (NumPy ``amax``; NaN propagates).

    Gradient convention at ties: the cotangent is split equally among the elements equal to the
    maximum (as PyTorch's ``amax``); this is a valid subgradient and keeps
    ``max(x) == max(x)`` symmetric in its arguments. Where the maximum is NaN the gradient is 0.
    Complex input is ordered as NumPy orders it (lexicographically: real part, then imaginary
    part), and the cotangent goes to the selected element unchanged (JAX's convention).

    Raises ``ValueError`` when a reduced axis has size 0.
    """
    batch = axis_rule("axis")  # vmap: the axes move past the batch axis
    traits = Traits(fresh=True)

    oper = "max"
    names = ("max", "amax")
    methods = ("max",)

    @staticmethod
    def api(x, axis=None, out=None, keepdims=False) -> Tensor:
        """Maximum over ``axis`` (NumPy ``amax``, also ``tnp.amax``; NaN propagates).

        Gradient convention at ties: the cotangent is split equally among the tied maximal
        elements (as for ``maximum``).

        Args:
            x: Tensor of shape ``(d_0, ..., d_{n-1})``.
            axis: Axis or tuple of axes; ``None`` reduces all axes.
            out: Must be None (Tensors are immutable).
            keepdims: Keep reduced axes with size 1.

        Returns:
            Tensor of ``x``'s dtype with the reduced shape. Complex input is ordered as NumPy
            orders it: by the real part, then the imaginary part.

        Raises:
            ValueError: if an axis is out of range, or a reduced axis has size 0 (as NumPy).
            TypeError: for a given ``out``.

        Example:
            >>> import tapegrad as tg, tapegrad.numpy as tnp
            >>> x = tg.Tensor([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]])
            >>> tnp.max(x, axis=1)
            Tensor([3., 2.], dtype=float32)
            >>> tg.grad(lambda v: tnp.max(v, axis=1).sum())(x)
            Tensor([[0. , 0.5, 0.5],
                    [1. , 0. , 0. ]], dtype=float32)
        """
        return _unary_reduction(Max, "max", x, axis, out, keepdims)

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        return _extremum_forward(ctx, x, axis, keepdims, "max")

    backward = staticmethod(_extremum_backward)  # pyright: ignore[reportAssignmentType]

    @classmethod
    def output_dtype(cls, dtype, **params):
        return np.dtype(dtype)

    @classmethod
    def output_shape(cls, shape, axis=None, keepdims=False):
        return _nonempty_shape("max", shape, axis, keepdims)


@expose
class Min(Function):
    """Minimum over ``axis`` (NumPy ``amin``); ties split the gradient equally, complex input
    is ordered lexicographically (see :class:`Max`). Raises ``ValueError`` when a reduced axis
    has size 0."""
    batch = axis_rule("axis")  # vmap: the axes move past the batch axis
    traits = Traits(fresh=True)

    oper = "min"
    names = ("min", "amin")
    methods = ("min",)

    @staticmethod
    def api(x, axis=None, out=None, keepdims=False) -> Tensor:
        """Minimum over ``axis`` (see :func:`max`; also ``tnp.amin``); ties split the gradient
        equally.

        Raises:
            ValueError: if an axis is out of range, or a reduced axis has size 0.
            TypeError: for a given ``out``.
        """
        return _unary_reduction(Min, "min", x, axis, out, keepdims)

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        return _extremum_forward(ctx, x, axis, keepdims, "min")

    backward = staticmethod(_extremum_backward)  # pyright: ignore[reportAssignmentType]

    @classmethod
    def output_dtype(cls, dtype, **params):
        return np.dtype(dtype)

    @classmethod
    def output_shape(cls, shape, axis=None, keepdims=False):
        return _nonempty_shape("min", shape, axis, keepdims)


def _arg_batch(cls, args, batched, size, axis=None, keepdims=False):
    """The batching rule of an index reduction (argmax, argmin and their NaN-ignoring forms):
    one call with the axis shifted past the batch axis, or, for the flattened input (``axis
    None``), the flat index per example."""
    x = args[0]
    if axis is not None:
        return cls.apply(x, axis=shift_axes(axis, x.ndim - 1, cls._name()), keepdims=keepdims)
    flat = cls.apply(x.reshape((x.shape[0], -1)), axis=1)  # the flat index per example
    return flat.reshape((x.shape[0],) + (1,) * (x.ndim - 1)) if keepdims else flat


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


@expose
class ArgMax(Function):
    """Index of the maximum along one ``axis`` (int) or of the flattened input (``None``),
    NumPy semantics: the first occurrence at ties, int64 (``intp``) output, no gradient."""

    batch = classmethod(_arg_batch)

    oper = "argmax"
    differentiable = False
    names = ("argmax",)
    methods = ("argmax",)

    @staticmethod
    def api(x, axis=None, out=None, *, keepdims=False) -> Tensor:
        """Indices of the maximum along ``axis`` (NumPy semantics), an int64 Tensor, no
        gradient.

        Args:
            x: Tensor of shape ``(d_0, ..., d_{n-1})``.
            axis: One int, or ``None`` for the index into the flattened Tensor.
            keepdims: Keep the reduced axis (all axes for ``axis=None``) with size 1.

        Returns:
            int64 Tensor; the first occurrence at ties.

        Raises:
            ValueError: if the axis is out of range, or the reduced axis (the whole Tensor for
                ``None``) is empty.
            TypeError: if ``axis`` is a tuple (NumPy takes one axis), or ``out`` is given.
        """
        return _unary_reduction(ArgMax, "argmax", x, axis, out, keepdims)

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


@expose
class ArgMin(Function):
    """Index of the minimum (see :class:`ArgMax`); first occurrence at ties, no gradient."""

    batch = classmethod(_arg_batch)

    oper = "argmin"
    differentiable = False
    names = ("argmin",)
    methods = ("argmin",)

    @staticmethod
    def api(x, axis=None, out=None, *, keepdims=False) -> Tensor:
        """Indices of the minimum along ``axis`` (see :func:`argmax`); no gradient."""
        return _unary_reduction(ArgMin, "argmin", x, axis, out, keepdims)

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
    if isinstance(ddof, (bool, np.bool_)) or not isinstance(
            ddof, (numbers.Real, np.integer, np.floating)):
        raise TypeError(f"{op}: ddof must be a real number >= 0, got {ddof!r}")
    if not 0 <= float(ddof) < math.inf:
        raise ValueError(
            f"{op}: ddof must be a non-negative number (a fraction is allowed, as NumPy's "
            f"and the array API's correction), got {ddof!r}"
        )
    n = _count(shape, axes)
    _nonempty(op, shape, axes)
    if n - float(ddof) <= 0:
        raise ValueError(
            f"{op}: ddof={ddof} leaves {n - float(ddof):g} degrees of freedom for {n} elements per "
            f"reduction (shape {tuple(shape)}, axes {axes}); need ddof < {n}"
        )
    return n


def _spread(cls, op: str, x, axis, dtype, out, ddof, keepdims, correction) -> Tensor:
    """The public ``op`` (var or std: ``cls``): its arguments checked, naming ``op``, and
    ``dtype=`` applied as NumPy's (computed on ``x`` cast to it, returned in it)."""
    keepdims = bool_arg(keepdims, op, "keepdims")
    x = _operand(x, op)
    ddof = _ddof(ddof, correction, op)
    if dtype is None and out is None:
        return cls.apply(x, axis=axis, ddof=ddof, keepdims=keepdims)
    _no_out(out, op)
    _no_bool_dtype(dtype, op)
    x = _operand(_in_dtype(x, dtype, op), op)
    return _out_dtype(cls.apply(x, axis=axis, ddof=ddof, keepdims=keepdims), dtype)


def _spread_setup(ctx, x, axis, ddof, keepdims, op: str) -> tuple:
    """Forward of var/std (``op``): the reduced axes; ``ctx.dof = n - ddof`` (checked)."""
    axes = _reduction_setup(ctx, x, axis, keepdims, op)
    ctx.dof = _var_check(op, x.shape, axes, ddof) - ddof
    return axes


def _spread_shape(op: str, shape, axis, ddof, keepdims) -> tuple:
    """The shape rule of var/std (``op``), with :func:`_var_check`'s checks."""
    axes = normalize_axis(axis, len(shape), op)
    _var_check(op, shape, axes, ddof)
    return _reduced_shape(shape, axes, keepdims)


def _centered(x: Tensor, ctx) -> Tensor:
    """``x - mean(x)`` over the reduced axes, conjugated for complex ``x`` (the backward of
    var/std, in JAX's convention for a real function of complex input)."""
    centered = x - Mean.apply(x, axis=ctx.axes, keepdims=True)
    if x.dtype.kind == "c":
        centered = centered.conj()
    return centered


def _over_spread(g: Tensor, out: Tensor, ctx, dof=None) -> Tensor:
    """``g / (out * dof)`` (``g / out`` without ``dof``) with the reduced axes kept, and 0
    where ``out`` is 0: the backward scale of std and of the 2-norm, whose convention at
    ``out = 0`` (zero spread, ``x = 0``) is the minimum-norm subgradient, never NaN."""
    out = _expand(out, ctx)
    zero = out == 0
    safe = Where.apply(zero, 1.0, out)
    return Where.apply(zero, 0.0, _expand(g, ctx) / (safe if dof is None else safe * dof))


@expose
class Var(Function):
    """Variance ``sum(|x - mean|**2) / (n - ddof)`` over ``axis`` (real-valued also for
    complex ``x``, as NumPy).

    Backward: ``g * 2 (x - mean) / (n - ddof)``, with the mean recomputed by tapegrad ops; for
    complex ``x`` ``g * 2 conj(x - mean) / (n - ddof)`` (JAX's convention for a real function
    of complex input). Raises ``ValueError`` when a reduced axis has size 0 or ``ddof >= n``.
    """
    batch = axis_rule("axis")  # vmap: the axes move past the batch axis

    oper = "var"
    names = ("var",)
    methods = ("var",)

    @staticmethod
    def api(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *,
            correction=None) -> Tensor:
        """Variance ``sum(|x - mean|**2) / (n - ddof)`` over ``axis`` (n elements per slice).

        Args:
            x: Real or complex Tensor of shape ``(d_0, ..., d_{n-1})``.
            axis: Axis or tuple of axes; ``None`` reduces all axes.
            dtype: Compute on ``x`` cast to this dtype, and return it (NumPy's ``dtype=``).
            out: Must be None (Tensors are immutable).
            ddof: Delta degrees of freedom (0: population variance, 1: unbiased estimate); a
                non-negative number, fractions included (as NumPy).
            keepdims: Keep reduced axes with size 1.
            correction: NumPy 2's (the Array API's) name for ``ddof``; give one of the two.

        Returns:
            Tensor of the reduced shape; floating inputs keep their dtype, integers give
            float64, complex inputs give the real dtype of their precision (as NumPy).

        Raises:
            ValueError: if an axis is out of range, a reduced axis has size 0, or
                ``ddof >= n`` (NumPy would warn and return inf or NaN); if both ``ddof`` and
                ``correction`` are given.
            TypeError: for a ``dtype`` that is not a dtype or is ``bool``, or a given ``out``.
        """
        return _spread(Var, "var", x, axis, dtype, out, ddof, keepdims, correction)

    @staticmethod
    def forward(ctx, x, axis=None, ddof=0, keepdims=False):
        axes = _spread_setup(ctx, x, axis, ddof, keepdims, "var")
        ctx.save_for_backward(x)
        return x.var(axis=axes, ddof=ddof, keepdims=keepdims)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        centered = _centered(x, ctx)
        return _expand(g, ctx) * centered * (2.0 / ctx.dof)

    @classmethod
    def output_dtype(cls, dtype, **params):
        return _numpy_dtype("var", np.dtype(dtype))

    @classmethod
    def output_shape(cls, shape, axis=None, ddof=0, keepdims=False):
        return _spread_shape("var", shape, axis, ddof, keepdims)


@expose
class Std(Function):
    """Standard deviation ``sqrt(var(x, ddof))`` over ``axis``.

    Backward: ``g * (x - mean) / ((n - ddof) * std)`` (``conj(x - mean)`` for complex ``x``,
    as :class:`Var`). Convention at zero spread (all reduced
    elements equal, where ``std`` is not differentiable): the gradient is 0, the minimum-norm
    subgradient (as for ``|x|`` at 0), never NaN. Raises ``ValueError`` when a reduced axis
    has size 0 or ``ddof >= n``.
    """
    batch = axis_rule("axis")  # vmap: the axes move past the batch axis

    oper = "std"
    names = ("std",)
    methods = ("std",)

    @staticmethod
    def api(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *,
            correction=None) -> Tensor:
        """Standard deviation ``sqrt(var(x, axis, ddof))`` (see :func:`var`, also for
        ``dtype``, ``out`` and ``correction``).

        Gradient convention at zero spread (all reduced elements equal, where ``std`` has a
        kink): 0, the minimum-norm subgradient; never NaN.

        Raises:
            ValueError: as :func:`var`.
            TypeError: for a ``dtype`` that is not a dtype, or a given ``out``.
        """
        return _spread(Std, "std", x, axis, dtype, out, ddof, keepdims, correction)

    @staticmethod
    def forward(ctx, x, axis=None, ddof=0, keepdims=False):
        axes = _spread_setup(ctx, x, axis, ddof, keepdims, "std")
        out = x.std(axis=axes, ddof=ddof, keepdims=keepdims)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        return _centered(x, ctx) * _over_spread(g, out, ctx, ctx.dof)

    @classmethod
    def output_dtype(cls, dtype, **params):
        return _numpy_dtype("std", np.dtype(dtype))

    @classmethod
    def output_shape(cls, shape, axis=None, ddof=0, keepdims=False):
        return _spread_shape("std", shape, axis, ddof, keepdims)


@expose
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
    batch = axis_rule("axis")  # vmap: the axes move past the batch axis

    oper = "logsumexp"
    names = ("logsumexp",)
    methods = ("logsumexp",)

    @staticmethod
    def api(x, axis=None, keepdims=False) -> Tensor:
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
            log-probabilities. ``-inf`` for an all ``-inf`` slice (zero gradient there) and for
            an empty reduction.

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
        keepdims = bool_arg(keepdims, "logsumexp", "keepdims")
        x = _operand(x, "logsumexp", real=True)
        return LogSumExp.apply(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        xp = ctx.backend
        _real("logsumexp", x.dtype)
        axes = _reduction_setup(ctx, x, axis, keepdims, "logsumexp")
        xf = x if x.dtype.kind in "fV" else x.astype(np.float64)
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
        x, out = ctx.saved_tensors
        # softmax = e / sum(e) with e = exp(x - c) for the constant c = out (>= max(x), so no
        # overflow, and the largest e is >= 1/n). Normalizing makes the result independent of
        # the rounding of c (exp(x - out) alone has an error of order |out| * eps), and since
        # softmax is invariant to c, holding c constant is exact at every order.
        c = _expand(out, ctx)
        if c.is_traced:
            c = StopGradient.apply(c)
        e = Exp.apply(x - Where.apply(c == -np.inf, 0.0, c))
        total = Sum.apply(e, axis=ctx.axes, keepdims=True)
        return _expand(g, ctx) * (e / Where.apply(total == 0, 1.0, total))

    @classmethod
    def output_dtype(cls, dtype, **params):
        dtype = np.dtype(dtype)
        return dtype if dtype.kind in "fV" else np.dtype(np.float64)

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
    batch = axis_rule("axis")  # vmap: the axes move past the batch axis

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
        x, out = ctx.saved_tensors
        return x * _over_spread(g, out, ctx)

    @classmethod
    def output_dtype(cls, dtype, **params):
        with np.errstate(all="ignore"):
            one = np.ones(1, dtype=dtype)
            return np.sqrt((one * one).sum()).dtype

    @classmethod
    def output_shape(cls, shape, axis=None, keepdims=False):
        return _reduced_shape(shape, normalize_axis(axis, len(shape), "norm"), keepdims)


def _check_order(p, op: str = "norm") -> float:
    """The order ``p`` of a :class:`NormP` as a float.

    Raises:
        ValueError: if ``p`` is not a finite nonzero real number, naming ``op``.
    """
    if not isinstance(p, numbers.Real) or not math.isfinite(p) or p == 0:
        raise ValueError(
            f"{op}: the order p of a p-norm must be a finite nonzero real number, got {p!r}"
        )
    return float(p)


def _normp_scale(ctx):
    """``d out / d x`` of :class:`NormP` with its conventions at 0 (``x``'s shape), written
    with tapegrad ops: ``sign(x) (|x| / out)**(p - 1)``, 0 where ``out == 0`` and, for
    ``p < 1``, where ``x == 0``. Both bases are made safe before the power (never ``0 / 0``
    or ``0**negative``), so every order is NaN-free there."""
    x, out = ctx.saved_tensors
    p = ctx.p
    f = _expand(out, ctx)
    fzero = f == 0
    r = Abs.apply(x) / Where.apply(fzero, 1.0, f)
    if p < 1:
        xzero = x == 0
        d = Sign.apply(x) * Where.apply(xzero, 1.0, r) ** (p - 1.0)
        d = Where.apply(xzero, 0.0, d)
    else:
        d = Sign.apply(x) * r ** (p - 1.0)
    return Where.apply(fzero, 0.0, d)


class NormP(Function):
    """The vector p-norm ``(sum |x|**p)**(1/p)`` over ``axis`` for a finite real ``p != 0``,
    the value ``numpy.linalg.norm(x, ord=p)`` has for every order other than 0, 1, 2 and
    ``+-inf`` (for ``0 < p < 1`` a quasi-norm; for ``p < 0`` at most ``min |x|``, and 0 when
    an element is 0).

    Forward: ``m (sum (|x| / m)**p)**(1/p)`` with ``m`` the largest ``|x|`` of each slice (the
    smallest for ``p < 0``), the same value as NumPy's unscaled formula but without overflow
    or underflow of ``|x|**p`` (NumPy gives ``inf`` or 0 there, e.g. float32
    ``norm([1e3, 1e3], ord=20)``). Where ``m`` is 0, ``inf`` or NaN the formula runs unscaled,
    as NumPy. An empty slice gives 0 for ``p > 0`` and ``inf`` for ``p < 0`` (NumPy's
    ``0**(1/p)``). Output dtype as :class:`Norm2`.

    Backward: ``g sign(x) (|x| / out)**(p - 1)`` (forward mode transposes it).
    Conventions at 0, never NaN, to every order: where ``out == 0`` (for ``p > 0`` the whole
    slice is 0; for ``p < 0`` some element is 0, and near it the norm behaves as that
    ``|x_i|``) the gradient is 0, the minimum-norm subgradient as for ``|x|`` at 0; for
    ``p < 1`` a zero element gets gradient 0 although its one-sided derivatives are
    ``+-inf`` (PyTorch's convention, consistent with ``sign(0) = 0``). For ``p > 1`` the
    gradient of a zero element is 0, its true value; its second derivative comes out 0 also
    where the true value is infinite (``1 < p < 2``).

    Raises:
        ValueError: if ``p`` is not a finite nonzero real number, or an axis is out of range.
        TypeError: for complex inputs.
    """
    batch = axis_rule("axis")  # vmap: the axes move past the batch axis

    oper = "norm_p"

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False, p=3.0):
        xp = ctx.backend
        _real("norm", x.dtype)
        ctx.p = p = _check_order(p)
        axes = _reduction_setup(ctx, x, axis, keepdims, "norm")
        a = xp.abs(x)
        if _count(x.shape, axes) == 0:
            dtype = NormP.output_dtype(x.dtype)
            fill = 0.0 if p > 0 else np.inf
            out = xp.full(_reduced_shape(x.shape, axes, keepdims), fill, dtype=dtype)
        else:
            m = a.max(axis=axes, keepdims=True) if p > 0 else a.min(axis=axes, keepdims=True)
            m = xp.where(xp.isfinite(m) & (m > 0), m, xp.ones((), m.dtype))
            s = ((a / m) ** p).sum(axis=axes, keepdims=True)
            out = m * s ** (1.0 / p)
            if not keepdims:
                out = out.reshape(_reduced_shape(x.shape, axes, keepdims))
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        return _expand(g, ctx) * _normp_scale(ctx)

    output_dtype = Norm2.output_dtype  # pyright: ignore[reportAssignmentType]

    @classmethod
    def output_shape(cls, shape, axis=None, keepdims=False, p=3.0):
        _check_order(p)
        return _reduced_shape(shape, normalize_axis(axis, len(shape), "norm"), keepdims)


def _flat_or(x, axis, op):
    """``(x, axis)`` for a scan: the flattened Tensor and axis 0 for ``axis=None``."""
    x = _operand(x, op)
    if axis is None:
        return (x if x.ndim == 1 else _mv.Reshape.apply(x, (x.size,))), 0
    if x.ndim == 0:
        raise ValueError(f"{op}: a 0-d Tensor has no axis {axis}; use axis=None")
    return x, axis


def _scan(cls, op: str, x, axis, dtype, out) -> Tensor:
    """The public ``op`` (cumsum or cumprod: ``cls``) along ``axis`` (``None``: of the
    flattened Tensor), with NumPy's ``dtype=`` and ``out=`` (must be None), naming ``op``."""
    _no_out(out, op)
    x, axis = _flat_or(x, axis, op)
    res = cls.apply(_in_dtype(x, dtype, op), axis=axis)
    return _out_dtype(res, dtype)


def _scan_forward(ctx, x, axis, reverse, op: str):
    """Forward of a scan: the backend's ``op`` (cumsum or cumprod) along ``axis``, from the
    end for ``reverse``; ``ctx.axis`` and ``ctx.reverse`` set for backward."""
    xp = ctx.backend
    if x.ndim == 0:
        raise ValueError(f"{op}: a 0-d Tensor has no axis {axis}; use axis=None to flatten")
    a = ctx.axis = _single_axis(axis, x.ndim, op)
    ctx.reverse = reverse
    scan = getattr(xp, op)
    if reverse:
        return xp.flip(scan(xp.flip(x, axis=a), axis=a), axis=a)
    return scan(x, axis=a)


def _scan_shape(op: str, shape, axis) -> tuple:
    """The shape rule of a scan (``op``): ``shape`` itself, once ``axis`` is checked."""
    if len(shape) == 0:
        raise ValueError(f"{op}: a 0-d Tensor has no axis; use axis=None to flatten")
    _single_axis(axis, len(shape), op)
    return tuple(shape)


@expose
class CumSum(Function):
    """Cumulative sum along one ``axis`` (int); ``reverse=True`` sums from the end.

    Output dtype as NumPy's ``cumsum``. Backward: the cumulative sum of the cotangent in the
    opposite direction (the transpose of a lower-triangular matrix of ones).
    """
    batch = axis_rule("axis", none_means_all=False)  # vmap: the axis moves past the batch

    oper = "cumsum"
    names = ("cumsum",)
    methods = ("cumsum",)

    @staticmethod
    def api(x, axis=None, dtype=None, out=None) -> Tensor:
        """Cumulative sum along ``axis`` (an int), or of the flattened Tensor for ``None``.

        Args:
            x: Tensor.
            axis: An int, or None to flatten first.
            dtype: Accumulator and result dtype (``x`` is cast to it first, as NumPy's
                ``dtype=``).
            out: Must be None (Tensors are immutable).

        Returns:
            Tensor of ``x``'s shape (1-D for ``axis=None``); dtype as NumPy's ``cumsum``, or
            ``dtype``.

        Raises:
            ValueError: if ``axis`` is out of range.
            TypeError: if ``axis`` is not an int or None, ``dtype`` is not a dtype, or ``out``
                is given.
        """
        return _scan(CumSum, "cumsum", x, axis, dtype, out)

    @staticmethod
    def forward(ctx, x, axis=-1, reverse=False):
        return _scan_forward(ctx, x, axis, reverse, "cumsum")

    @staticmethod
    def backward(ctx, g):
        return CumSum.apply(g, axis=ctx.axis, reverse=not ctx.reverse)

    @classmethod
    def output_dtype(cls, dtype, **params):
        return _numpy_dtype("cumsum", np.dtype(dtype))

    @classmethod
    def output_shape(cls, shape, axis=-1, reverse=False):
        return _scan_shape("cumsum", shape, axis)


@expose
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
    batch = axis_rule("axis", none_means_all=False)  # vmap: the axis moves past the batch

    oper = "cumprod"
    names = ("cumprod",)
    methods = ("cumprod",)

    @staticmethod
    def api(x, axis=None, dtype=None, out=None) -> Tensor:
        """Cumulative product along ``axis`` (an int), or of the flattened Tensor for ``None``
        (``dtype`` and ``out`` as :func:`cumsum`).

        The gradient is exact with zeros in ``x``, at every order (no division by ``x``); it
        costs ``O(n log n)`` per slice of length ``n``.

        Raises:
            ValueError: if ``axis`` is out of range.
            TypeError: if ``axis`` is not an int or None, ``dtype`` is not a dtype, or ``out``
                is given.

        Example:
            >>> import tapegrad as tg, tapegrad.numpy as tnp
            >>> x = tg.Tensor([2.0, 0.0, 3.0])
            >>> tnp.cumprod(x)
            Tensor([2., 0., 0.], dtype=float32)
            >>> tg.grad(lambda v: tnp.cumprod(v).sum())(x)  # exact despite the zero
            Tensor([1., 8., 0.], dtype=float32)
        """
        return _scan(CumProd, "cumprod", x, axis, dtype, out)

    @staticmethod
    def forward(ctx, x, axis=-1, reverse=False):
        out = _scan_forward(ctx, x, axis, reverse, "cumprod")
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
        return _scan_shape("cumprod", shape, axis)


@expose
class Any(Function):
    """Whether any element over ``axis`` is nonzero (boolean output, no gradient); ``False``
    over an empty set."""
    batch = axis_rule("axis")  # vmap: the axes move past the batch axis

    oper = "any"
    differentiable = False
    names = ("any",)
    methods = ("any",)

    @staticmethod
    def api(x, axis=None, out=None, keepdims=False) -> Tensor:
        """Whether any element over ``axis`` is nonzero; a boolean Tensor with no gradient.
        ``out`` must be None (Tensors are immutable)."""
        return _unary_reduction(Any, "any", x, axis, out, keepdims)

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


@expose
class All(Function):
    """Whether all elements over ``axis`` are nonzero (boolean output, no gradient); ``True``
    over an empty set."""
    batch = axis_rule("axis")  # vmap: the axes move past the batch axis

    oper = "all"
    differentiable = False
    names = ("all",)
    methods = ("all",)

    @staticmethod
    def api(x, axis=None, out=None, keepdims=False) -> Tensor:
        """Whether all elements over ``axis`` are nonzero; a boolean Tensor with no gradient.
        ``out`` must be None (Tensors are immutable)."""
        return _unary_reduction(All, "all", x, axis, out, keepdims)

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
