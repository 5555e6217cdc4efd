"""Primitives behind ``tapegrad.numpy``'s statistics and polynomial functions.

Most of those functions (``nanmean``, ``quantile``, ``cov``, ``polyfit``, ``interp``, ...) are
composites of existing ops, in :mod:`tapegrad.numpy._statistics` and
:mod:`tapegrad.numpy._polynomial` (quantiles gather their order statistics with
:class:`~tapegrad.ops.sorting.ArgSort`; ``interp`` finds knot intervals with
:class:`~tapegrad.ops.sorting.SearchSorted`). The few primitives they need live here:

- :class:`NanArgMax` / :class:`NanArgMin`: NumPy's ``nanargmax``/``nanargmin`` (no gradient).
- :class:`Roots`: the roots of a polynomial (the eigenvalues of its companion matrix, as
  NumPy's ``roots``), differentiated by implicit differentiation of ``p(r) = 0``.

Each has a batching rule (``vmap``) beside its forward and backward.
"""

from __future__ import annotations

import numpy as np

from tapegrad.core.function import Function
from tapegrad.core.tensor import Tensor
from tapegrad.ops._registry import bool_arg, expose, tensor_arg
from tapegrad.ops.elementwise import Where
from tapegrad.ops.movement import Concatenate
from tapegrad.ops.reduction import _arg_batch, _arg_shape

__all__ = ["NanArgMax", "NanArgMin", "Roots"]


class _NanArg(Function):
    """Index of the extremum along ``axis`` ignoring NaN (NumPy semantics), no gradient."""

    differentiable = False

    @classmethod
    def forward(cls, ctx, x, axis=None, keepdims=False):
        _arg_shape(cls._name(), x.shape, axis, keepdims)
        fn = getattr(ctx.backend, cls._name())
        if x.dtype.kind in "fcV" and x.size:
            nan = ctx.backend.isnan(x)
            if (nan.all() if axis is None else nan.all(axis=axis).any()):
                raise ValueError(
                    f"All-NaN slice encountered (shape {tuple(x.shape)}, axis {axis}); "
                    f"{cls._name()} of a slice of NaN only has no answer"
                )
        return ctx.backend.asarray(fn(x, axis=axis, keepdims=keepdims))

    batch = classmethod(_arg_batch)

    @classmethod
    def output_shape(cls, shape, axis=None, keepdims=False):
        return _arg_shape(cls._name(), tuple(shape), axis, keepdims)

    @classmethod
    def _call(cls, a, axis, out, keepdims):
        keepdims = bool_arg(keepdims, cls._name(), "keepdims")
        if out is not None:
            raise TypeError(f"{cls._name()}: out= is not supported (tapegrad never writes in "
                            "place); use the returned Tensor")
        return cls.apply(tensor_arg(a), axis=axis, keepdims=keepdims)

    @classmethod
    def output_dtype(cls, dtype, **params):
        return np.dtype(np.intp)


@expose
class NanArgMax(_NanArg):
    """Indices of the maximum along ``axis`` ignoring NaN (NumPy's ``nanargmax``), an int64
    (``intp``) Tensor with no gradient.

    Args:
        a: Tensor of shape ``(d_0, ..., d_{n-1})``.
        axis: One int, or ``None`` for the index into the flattened Tensor.
        out: Not supported (must be None).
        keepdims: Keep the reduced axis (all axes for ``axis=None``) with size 1.

    Returns:
        ``intp`` Tensor; the first occurrence at ties.

    Raises:
        ValueError: if a slice holds only NaN ("All-NaN slice encountered", as NumPy), if the
            axis is out of range or the reduced axis is empty.
        TypeError: if ``out`` is given.
    """

    oper = "nanargmax"
    names = ("nanargmax",)

    @staticmethod
    def api(a, axis=None, out=None, *, keepdims=False) -> Tensor:
        return NanArgMax._call(a, axis, out, keepdims)


@expose
class NanArgMin(_NanArg):
    """Indices of the minimum along ``axis`` ignoring NaN (NumPy's ``nanargmin``); see
    :func:`nanargmax` for the arguments, the result and the errors."""

    oper = "nanargmin"
    names = ("nanargmin",)

    @staticmethod
    def api(a, axis=None, out=None, *, keepdims=False) -> Tensor:
        return NanArgMin._call(a, axis, out, keepdims)


NanArgMax.api.__doc__ = NanArgMax.__doc__
NanArgMin.api.__doc__ = NanArgMin.__doc__


def _companion_roots(xp, p):
    """Roots of the polynomials in the rows of ``p`` (shape ``(..., N)``, leading coefficient
    nonzero): the eigenvalues of the companion matrices, as NumPy's ``roots``."""
    n = p.shape[-1]
    lead = p.shape[:-1]
    if n <= 1:
        return xp.zeros(lead + (0,), dtype=np.float64)
    a = xp.zeros(lead + (n - 1, n - 1), dtype=p.dtype)
    if n > 2:
        idx = xp.arange(n - 2)
        a[..., idx + 1, idx] = 1
    a[..., 0, :] = -p[..., 1:] / p[..., :1]
    return xp.linalg.eigvals(a)


class Roots(Function):
    """The roots of the polynomial ``p[0] z**(n-1) + ... + p[n-1]`` (NumPy's ``roots``).

    Forward as NumPy: leading zero coefficients are dropped, the roots of what remains are
    the eigenvalues of its companion matrix (``numpy.linalg.eigvals``: same values, same
    order), and each trailing zero coefficient adds a root 0 at the end. The dtype is real
    when every root is real, complex otherwise (data-dependent, as NumPy); integers give
    float64. Rows of a 2-D ``p`` (the batching rule's form) are separate polynomials, which
    must then have the same numbers of leading and trailing zeros.

    Derivative, by implicit differentiation of ``P(r) = 0`` with ``P`` the full polynomial
    (its zero coefficients included): ``dr_i = -(sum_k dp_k r_i**(n-1-k)) / P'(r_i)``, so the
    cotangent of ``p_k`` is ``-sum_i g_i r_i**(n-1-k) / P'(r_i)`` (holomorphic: no conjugate;
    a real ``p`` takes the real part). The rule is written with tapegrad ops on ``p`` and the
    roots, so it differentiates again; forward mode transposes it. At a repeated root
    ``P'(r) = 0``: the roots are not differentiable there (a double root moves like the
    square root of the perturbation) and the derivative is infinite or NaN, except that a
    zero cotangent gives 0.
    """

    oper = "roots"

    @staticmethod
    def forward(ctx, p):
        xp = ctx.backend
        p_in = p
        if p.dtype.kind not in "fcV":
            p = p.astype(np.float64)
        nz = p != 0
        if p.ndim == 1:
            nz = nz[None]
        any_nz = nz.any(axis=0)
        cols = xp.nonzero(any_nz)[0]
        if cols.size == 0:
            roots = xp.zeros(p.shape[:-1] + (0,), dtype=np.float64)
            ctx.save_for_backward(p_in, roots)
            return roots
        first = int(xp.argmax(nz, axis=-1).max()) if nz.shape[0] else 0
        last = int(p.shape[-1] - 1 - xp.argmax(nz[..., ::-1], axis=-1).min())
        if (xp.argmax(nz, axis=-1) != first).any() or \
                (p.shape[-1] - 1 - xp.argmax(nz[..., ::-1], axis=-1) != last).any() or \
                not nz.any(axis=-1).all():
            raise ValueError(
                "under vmap, every polynomial of the batch must have the same number of "
                "leading and of trailing zero coefficients (the number of roots depends on "
                "them)"
            )
        core = _companion_roots(xp, p[..., first:last + 1])
        trailing = p.shape[-1] - 1 - last
        if trailing:
            zeros = xp.zeros(core.shape[:-1] + (trailing,), dtype=core.dtype)
            core = xp.concatenate([core, zeros], axis=-1)
        ctx.save_for_backward(p_in, core)
        return core

    @staticmethod
    def backward(ctx, g):
        p, r = ctx.saved_tensors
        m, n = r.shape[-1], p.shape[-1]
        if m == 0:
            return None
        # P'(r) by Horner's rule, then w = -g / P'(r) (0 where g == 0, also at a double root)
        dpr = p[..., 0:1] * (n - 1)
        for k in range(1, n - 1):
            dpr = dpr * r + p[..., k:k + 1] * (n - 1 - k)
        zero = g == 0
        w = Where.apply(zero, 0.0, -g) / Where.apply(zero, 1.0, dpr)
        # cotangent of p_k: sum_i w_i r_i**(n-1-k)
        parts = []
        power = w
        for _ in range(n):
            parts.append(power.sum(axis=-1, keepdims=True))
            power = power * r
        return Concatenate.apply(*parts[::-1], axis=p.ndim - 1)

    @classmethod
    def batch(cls, args, batched, size):
        return cls.apply(args[0])  # rows are separate polynomials

    @classmethod
    def output_shape(cls, shape):
        raise NotImplementedError("roots: the number of roots depends on the values")

    @classmethod
    def output_dtype(cls, dtype):
        raise NotImplementedError("roots: the dtype depends on the values")
