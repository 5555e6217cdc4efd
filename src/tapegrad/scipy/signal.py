"""``tapegrad.scipy.signal``: N-dimensional convolution and correlation, differentiable.

``convolve(in1, in2, mode, method)`` and ``correlate(...)`` with SciPy's signatures, values
(``scipy.signal.convolve``/``correlate``; CuPy arrays make a round trip through host memory)
and modes (``"full"``, ``"valid"``, ``"same"``), for inputs of any (equal) number of
dimensions, differentiable in both inputs to every order and batched under ``vmap``.

Every mode's output is a window of the full convolution, so the rules are those of the full
one: the vjp of a convolution is a correlation, ``g_in1 = convolve(g_full, flip(in2),
"valid")`` and ``g_in2 = convolve(g_full, flip(in1), "valid")`` with ``g_full`` the cotangent
padded with zeros to the full output; the jvp is ``convolve(t1, in2) + convolve(in1, t2)``
(the convolution is bilinear). Complex inputs follow JAX's convention (no conjugates:
convolution is holomorphic in each input); ``correlate`` conjugates ``in2`` as SciPy does and
is differentiated accordingly.
"""

from __future__ import annotations

import numpy as np

import tapegrad.numpy as tnp
from tapegrad.core.function import Function
from tapegrad.core.tensor import Tensor
from tapegrad.ops._registry import tensor_arg
from tapegrad.scipy._base import on_host

__all__ = ["convolve", "correlate"]

_MODES = ("full", "valid", "same")
_METHODS = ("auto", "direct", "fft")


def _window(s1, s2, mode, name="convolve"):
    """``(start, size)`` per dimension of the ``mode`` output inside the full convolution of
    shapes ``s1`` and ``s2``, and the full shape."""
    full = tuple(max(a + b - 1, 0) for a, b in zip(s1, s2))
    if mode == "full":
        return [(0, f) for f in full], full
    if mode == "same":
        return [((b - 1) // 2 if a and b else 0, a) for a, b in zip(s1, s2)], full
    if not (all(a >= b for a, b in zip(s1, s2)) or all(b >= a for a, b in zip(s1, s2))):
        raise ValueError(
            f"{name}: for mode 'valid' one input must be at least as large as the other in "
            f"every dimension; got shapes {tuple(s1)} and {tuple(s2)}"
        )
    if 0 in s1 or 0 in s2:
        raise ValueError(
            f"{name}: mode 'valid' needs non-empty inputs; got shapes {tuple(s1)} and "
            f"{tuple(s2)}"
        )
    return [(min(a, b) - 1, abs(a - b) + 1) for a, b in zip(s1, s2)], full


def _check(name, in1, in2, mode, method):
    if mode not in _MODES:
        raise ValueError(f"{name}: mode must be 'full', 'valid' or 'same', got {mode!r}")
    if method not in _METHODS:
        raise ValueError(f"{name}: method must be 'auto', 'direct' or 'fft', got {method!r}")
    if in1.ndim != in2.ndim:
        raise ValueError(
            f"{name}: in1 and in2 need the same number of dimensions; got shapes {in1.shape} "
            f"and {in2.shape}"
        )
    for arg, t in (("in1", in1), ("in2", in2)):
        if t.dtype.kind not in "fciub":
            raise TypeError(f"{name}: {arg} has dtype {t.dtype}; expected a numeric array")


def _flip(t, first=0):
    """``t`` reversed along every axis from ``first`` on."""
    if t.ndim <= first:
        return t
    return tnp.flip(t, axis=tuple(range(first, t.ndim)))


def _pad_to_full(g, win, full):
    """The cotangent ``g`` of a window, as a cotangent of the full convolution."""
    pads = [(start, f - start - size) for (start, size), f in zip(win, full)]
    if all(p == (0, 0) for p in pads):
        return g
    return tnp.pad(g, pads)


def _take_window(t, win, first=0):
    """The window ``win`` of ``t``'s axes from ``first`` on."""
    idx = (slice(None),) * first + tuple(slice(s, s + n) for s, n in win)
    return t[idx]


class Convolve(Function):
    """N-dimensional convolution of two arrays (primitive of :func:`convolve`)."""

    oper = "convolve"

    @staticmethod
    def forward(ctx, in1, in2, mode="full", method="auto"):
        import scipy.signal as ss

        win, full = _window(in1.shape, in2.shape, mode)
        shape = tuple(n for _, n in win)
        ctx.mode = mode
        ctx.save_for_backward(in1, in2)
        xp = ctx.backend
        if in1.size == 0 or in2.size == 0:
            dtype = np.result_type(in1.dtype, in2.dtype)
            return xp.zeros(shape, dtype)
        out = on_host(xp, lambda a, b: np.asarray(ss.convolve(a, b, mode=mode, method=method)),
                      in1, in2)
        return xp.asarray(out)

    @staticmethod
    def backward(ctx, g):
        in1, in2 = ctx.saved_tensors
        return _conv_vjp(g, in1, in2, ctx.mode, *ctx.needs_input_grad)

    @staticmethod
    def jvp(ctx, t1, t2):
        in1, in2 = ctx.saved_tensors
        mode = ctx.mode
        out = None if t1 is None else Convolve.apply(t1, in2, mode=mode)
        if t2 is not None:
            b = Convolve.apply(in1, t2, mode=mode)
            out = b if out is None else out + b
        return out

    @staticmethod
    def batch(args, batched, size, mode="full", method="auto"):
        in1, in2 = args
        b1, b2 = batched
        s1 = in1.shape[1:] if b1 else in1.shape
        s2 = in2.shape[1:] if b2 else in2.shape
        win, _ = _window(s1, s2, mode)
        if b1 and b2:  # no batched convolution in SciPy: one per example
            if size == 0:
                dtype = np.result_type(in1.dtype, in2.dtype)
                return tnp.zeros((0,) + tuple(n for _, n in win), dtype=dtype)
            return tnp.stack([Convolve.apply(in1[i], in2[i], mode=mode, method=method)
                              for i in range(size)])
        # One batched operand: give the other a size-1 leading axis; the full convolution
        # along the batch axis then keeps the examples apart (a kernel of length 1).
        if not b1:
            in1 = in1.reshape((1,) + in1.shape)
        if not b2:
            in2 = in2.reshape((1,) + in2.shape)
        out = Convolve.apply(in1, in2, mode="full", method=method)
        return _take_window(out, win, first=1)

    @classmethod
    def output_shape(cls, in1, in2, mode="full", method="auto"):
        win, _ = _window(in1, in2, mode)
        return tuple(n for _, n in win)

    @classmethod
    def output_dtype(cls, d1, d2, mode="full", method="auto"):
        return np.result_type(d1, d2)


def _cast_like(g, x):
    """Cotangent ``g`` for input ``x``: the real part for a real ``x`` (JAX's convention)."""
    if g is None:
        return None
    if x.dtype.kind != "c" and g.dtype.kind == "c":
        return tnp.real(g)
    return g


def _conv_vjp(g, in1, in2, mode, n1, n2):
    """Cotangents of ``convolve(in1, in2, mode)`` for ``g``: pad ``g`` to the full output and
    correlate it with the other input (a "valid" convolution with it flipped)."""
    s1, s2 = in1.shape, in2.shape
    if 0 in s1 or 0 in s2:
        return (tnp.zeros_like(in1) if n1 else None), (tnp.zeros_like(in2) if n2 else None)
    win, full = _window(s1, s2, mode)
    gf = _pad_to_full(g, win, full)
    g1 = Convolve.apply(gf, _flip(in2), mode="valid") if n1 else None
    g2 = Convolve.apply(gf, _flip(in1), mode="valid") if n2 else None
    return _cast_like(g1, in1), _cast_like(g2, in2)


class Correlate(Function):
    """N-dimensional cross-correlation (primitive of :func:`correlate`): SciPy's values,
    with the rules of the equivalent ``convolve(in1, flip(conj(in2)), mode)``."""

    oper = "correlate"

    @staticmethod
    def forward(ctx, in1, in2, mode="full", method="auto"):
        import scipy.signal as ss

        win, _ = _window(in1.shape, in2.shape, mode, "correlate")
        ctx.mode = mode
        ctx.save_for_backward(in1, in2)
        xp = ctx.backend
        if in1.size == 0 or in2.size == 0:
            return xp.zeros(tuple(n for _, n in win), np.result_type(in1.dtype, in2.dtype))
        out = on_host(xp, lambda a, b: np.asarray(ss.correlate(a, b, mode=mode,
                                                                method=method)), in1, in2)
        return xp.asarray(out)

    @staticmethod
    def backward(ctx, g):
        in1, in2 = ctx.saved_tensors
        n1, n2 = ctx.needs_input_grad
        cplx = in2.dtype.kind == "c"
        flipped = _flip(tnp.conj(in2) if cplx else in2)
        g1, g2 = _conv_vjp(g, in1, flipped, ctx.mode, n1, n2)
        if g2 is not None:  # the vjp of in2 -> flip(conj(in2)) is g -> conj(flip(g))
            g2 = _flip(tnp.conj(g2) if cplx else g2)
        return g1, g2

    @staticmethod
    def jvp(ctx, t1, t2):
        in1, in2 = ctx.saved_tensors
        out = None if t1 is None else _correlate_composite(t1, in2, ctx.mode)
        if t2 is not None:
            b = _correlate_composite(in1, t2, ctx.mode)
            out = b if out is None else out + b
        return out

    @staticmethod
    def batch(args, batched, size, mode="full", method="auto"):
        in1, in2 = args
        if batched[1]:
            in2 = _flip(tnp.conj(in2) if in2.dtype.kind == "c" else in2, first=1)
        else:
            in2 = _flip(tnp.conj(in2) if in2.dtype.kind == "c" else in2)
        return Convolve.batch([in1, in2], batched, size, mode=mode, method=method)

    @classmethod
    def output_shape(cls, in1, in2, mode="full", method="auto"):
        win, _ = _window(in1, in2, mode, "correlate")
        return tuple(n for _, n in win)

    @classmethod
    def output_dtype(cls, d1, d2, mode="full", method="auto"):
        return np.result_type(d1, d2)


def _correlate_composite(in1, in2, mode):
    """``convolve(in1, flip(conj(in2)), mode)``: the correlation as a convolution."""
    if in2.dtype.kind == "c":
        in2 = tnp.conj(in2)
    return Convolve.apply(in1, _flip(in2), mode=mode)


def _args(name, in1, in2, mode, method):
    in1, in2 = tensor_arg(in1), tensor_arg(in2)
    _check(name, in1, in2, mode, method)
    _window(in1.shape, in2.shape, mode, name)
    return in1, in2


def _axis_list(axes, ndim, name, what):
    out = [int(a) % ndim if -ndim <= int(a) < ndim else None for a in axes]
    if None in out:
        raise ValueError(f"convolve: {what} {list(axes)} names an axis out of range for "
                         f"{name} with {ndim} dimensions")
    return out


def _convolve_axes(in1, in2, mode, method, axes, dot_axes):
    """HIPS autograd's generalized convolution: ``in1``'s ``axes[0]`` convolved with
    ``in2``'s ``axes[1]``, ``dot_axes`` summed over in pairs, the other axes of each kept
    (outer product); the result's axes are ``in1``'s kept, ``in2``'s kept, the convolved."""
    try:
        d1, d2 = (list(d) for d in dot_axes)
        c1, c2 = (list(a) for a in axes) if axes is not None else (None, None)
    except (TypeError, ValueError):
        raise TypeError("convolve: axes and dot_axes must be pairs of sequences of axes, such "
                        "as ([0], [1])") from None
    d1 = _axis_list(d1, in1.ndim, "in1", "dot_axes")
    d2 = _axis_list(d2, in2.ndim, "in2", "dot_axes")
    if c1 is None:  # every axis that is not summed
        c1 = [a for a in range(in1.ndim) if a not in d1]
        c2 = [a for a in range(in2.ndim) if a not in d2]
    c1 = _axis_list(c1, in1.ndim, "in1", "axes")
    c2 = _axis_list(c2, in2.ndim, "in2", "axes")
    if len(c1) != len(c2) or len(d1) != len(d2):
        raise ValueError(f"convolve: axes {axes} and dot_axes {dot_axes} must pair as many "
                         "axes of in1 as of in2")
    for name, used in (("in1", c1 + d1), ("in2", c2 + d2)):
        if len(set(used)) != len(used):
            raise ValueError(f"convolve: an axis of {name} is named twice in axes and dot_axes")
    for a, b in zip(d1, d2):
        if in1.shape[a] != in2.shape[b]:
            raise ValueError(f"convolve: dot_axes pair axis {a} of in1 (length {in1.shape[a]}) "
                             f"with axis {b} of in2 (length {in2.shape[b]}); they must match")
    k1 = [a for a in range(in1.ndim) if a not in c1 + d1]
    k2 = [a for a in range(in2.ndim) if a not in c2 + d2]
    s1 = [in1.shape[a] for a in k1]
    s2 = [in2.shape[a] for a in k2]
    ds = [in1.shape[a] for a in d1]
    ca, cb = [in1.shape[a] for a in c1], [in2.shape[a] for a in c2]
    win, _ = _window(ca, cb, mode)
    out_shape = tuple(s1 + s2 + [n for _, n in win])
    if any(n == 0 for n in ds):
        return tnp.zeros(out_shape, dtype=np.result_type(in1.dtype, in2.dtype))
    # (kept1, 1.., dot, conv) * (1.., kept2, flipped dot, conv): one full N-d convolution
    # multiplies along the kept axes, sums along the dot axes at the middle index, and
    # convolves along the rest
    a = tnp.reshape(tnp.transpose(in1, k1 + d1 + c1), tuple(s1 + [1] * len(s2) + ds + ca))
    b = tnp.transpose(in2, k2 + d2 + c2)
    if d2:
        b = tnp.flip(b, axis=tuple(range(len(k2), len(k2) + len(d2))))
    b = tnp.reshape(b, tuple([1] * len(s1) + s2 + ds + cb))
    full = Convolve.apply(a, b, mode="full", method=method)
    idx = ((slice(None),) * (len(s1) + len(s2)) + tuple(n - 1 for n in ds)
           + tuple(slice(st, st + n) for st, n in win))
    return full[idx]


def convolve(in1, in2, mode="full", method="auto", *, axes=None, dot_axes=((), ())) -> Tensor:
    """N-dimensional convolution ``out[k] = sum_j in1[j] in2[k - j]``
    (``scipy.signal.convolve``), and HIPS autograd's generalization over chosen axes.

    Args:
        in1: Tensor of any shape.
        in2: Tensor with as many dimensions as ``in1`` (any number with ``axes``/``dot_axes``).
        mode: ``"full"`` (every overlap: shape ``n1 + n2 - 1`` per dimension), ``"valid"``
            (full overlaps only: ``|n1 - n2| + 1``; one input must be at least as large as
            the other in every dimension) or ``"same"`` (``in1``'s shape, centered on the full
            output, as SciPy).
        method: ``"auto"``, ``"direct"`` or ``"fft"`` (SciPy's choice of algorithm).
        axes: ``(axes1, axes2)``: convolve only these axes of ``in1`` with these of ``in2``
            (HIPS autograd's ``convolve``); default every axis (every axis not in
            ``dot_axes`` when those are given).
        dot_axes: ``(axes1, axes2)`` of equal lengths, summed over in pairs (a tensordot).
            With ``axes`` or ``dot_axes``, the axes of each input named in neither are kept:
            the result has ``in1``'s kept axes, then ``in2``'s, then the convolved ones.

    Returns:
        Tensor of the mode's shape and the promoted dtype (float32 stays float32). Empty
        inputs give zeros (``"full"``, ``"same"``); 0-d inputs give their product.

    Raises:
        ValueError: for inputs of different numbers of dimensions (without ``axes``), shapes
            that do not fit ``"valid"`` (naming both), empty inputs with ``"valid"``, an
            unknown ``mode``/``method``, or ``axes``/``dot_axes`` that do not pair up.
        TypeError: for ``axes``/``dot_axes`` that are not pairs of sequences.

    Derivatives: ``g_in1 = convolve(g_full, flip(in2), "valid")`` and the same for ``in2``,
    where ``g_full`` is the cotangent padded to the full output (the vjp of a convolution is
    a correlation); forward mode ``convolve(t1, in2) + convolve(in1, t2)``.

    Example:
        >>> import tapegrad as tg
        >>> from tapegrad.scipy import signal
        >>> signal.convolve(tg.Tensor([1.0, 2.0, 3.0]), tg.Tensor([0.0, 1.0, 0.5]))
        Tensor([0. , 1. , 2.5, 4. , 1.5], dtype=float32)
    """
    if axes is not None or tuple(map(tuple, dot_axes)) != ((), ()):
        t1, t2 = tensor_arg(in1), tensor_arg(in2)
        _check("convolve", t1, t1, mode, method)
        _check("convolve", t2, t2, mode, method)
        return _convolve_axes(t1, t2, mode, method, axes, dot_axes)
    in1, in2 = _args("convolve", in1, in2, mode, method)
    if in1.ndim == 0:
        return in1 * in2
    return Convolve.apply(in1, in2, mode=mode, method=method)


def correlate(in1, in2, mode="full", method="auto") -> Tensor:
    """N-dimensional cross-correlation ``out[k] = sum_j in1[j + k] conj(in2[j])`` (offsets as
    SciPy's ``scipy.signal.correlate``): ``convolve(in1, flip(conj(in2)), mode)``.

    Args:
        in1: Tensor of any shape.
        in2: Tensor with as many dimensions as ``in1``.
        mode: ``"full"``, ``"valid"`` or ``"same"``, as :func:`convolve`.
        method: ``"auto"``, ``"direct"`` or ``"fft"``.

    Returns:
        Tensor of the mode's shape (SciPy's values).

    Raises:
        ValueError: as :func:`convolve`.

    Derivatives: those of ``convolve(in1, flip(conj(in2)), mode)``; for complex ``in2`` the
    conjugation makes the map non-holomorphic in ``in2``, and the cotangent follows JAX's
    convention (``conj`` of the flipped convolution cotangent).
    """
    in1, in2 = _args("correlate", in1, in2, mode, method)
    if in1.ndim == 0:
        return in1 * (tnp.conj(in2) if in2.dtype.kind == "c" else in2)
    return Correlate.apply(in1, in2, mode=mode, method=method)
