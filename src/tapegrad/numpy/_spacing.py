"""Evenly spaced samples with Tensor endpoints: :func:`linspace`'s differentiable path,
:func:`logspace` and :func:`geomspace` (NumPy's names and arguments).

With numbers or NumPy arrays as endpoints these are constants, computed by NumPy in float64
and cast to the result dtype (float32 by default, as :func:`tapegrad.numpy.linspace`). With a
Tensor endpoint (traced ones included) they are built from tapegrad operations, so they are
differentiable in every Tensor argument, in the result dtype of those arguments (NumPy's
promotion, float64 for integer endpoints).
"""

from __future__ import annotations

import operator

import numpy as _np

from tapegrad.core import dtypes as _tg_dtypes
from tapegrad.core.tensor import Tensor
from tapegrad.numpy._core import _tensor, astype, stop_gradient, to_device
from tapegrad.numpy._shape import broadcast_to, concatenate, expand_dims, moveaxis, reshape
from tapegrad.ops._registry import given_tensor as _given_tensor
from tapegrad.ops._registry import ns as _ns

__all__ = ["logspace", "geomspace"]


def _num(num, op: str) -> int:
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"{op}: num must be non-negative, got {num}")
    return num


def _operands(values) -> list:
    """The arguments as Tensors of one dtype (NumPy's promotion, Python numbers weakly typed)
    on the device of the Tensor arguments (at least one is a Tensor)."""
    ts = [_tensor(v) if _given_tensor(v) else None for v in values]
    device = next(t.device for t in ts if t is not None)
    others = [v if t is not None or isinstance(v, (int, float, complex)) else _np.asarray(v)
              for t, v in zip(ts, values)]
    dt = _tg_dtypes.result_type(*[t.dtype if t is not None else v for t, v in zip(ts, others)])
    return [t if t is not None else Tensor(_np.asarray(v, dt), device=device)
            for t, v in zip(ts, others)]


def _inexact(*dtypes):
    """NumPy's ``result_type(..., ensure_inexact=True)``: integers and bools become float64."""
    dt = _tg_dtypes.result_type(*dtypes)
    return dt if dt.kind in "fcV" else _np.dtype(_np.float64)


def _axis(axis, ndim: int, op: str) -> int:
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"{op}: axis {axis} is out of bounds for the result's {ndim} axes")
    return axis % ndim


def linspace_of_tensors(start, stop, num, endpoint, retstep, dtype, axis, device, op="linspace"):
    """:func:`tapegrad.numpy.linspace` when ``start`` or ``stop`` is a Tensor: NumPy's
    ``start + i * (stop - start) / div`` with the last sample ``stop`` itself, differentiable
    in both endpoints.

    Returns:
        Tensor ``(num, *broadcast shape)`` (``num`` moved to ``axis``), and with ``retstep`` the
        step: a Tensor, NaN where ``div`` is 0 (``num`` 0 or 1 with ``endpoint``).
    """
    num = _num(num, op)
    s, e = _operands([start, stop])
    calc = _inexact(s.dtype, e.dtype)
    out_dt = calc if dtype is None else _np.dtype(dtype)
    if calc.kind == "f" and out_dt.kind == "c":
        calc = out_dt
    shape = tuple(_np.broadcast_shapes(s.shape, e.shape))
    s = broadcast_to(astype(s, calc), shape)
    e = broadcast_to(astype(e, calc), shape)
    ax = _axis(axis, len(shape) + 1, op)
    div = num - 1 if endpoint else num
    delta = e - s
    i = Tensor(_np.arange(num, dtype=calc).reshape((num,) + (1,) * len(shape)), device=s.device)
    if div > 0:
        step = delta / div
        y = i * step + s
    else:
        step = Tensor(_np.full(shape, _np.nan, dtype=calc), device=s.device)
        y = i * delta + s
    if endpoint and num > 1:
        y = concatenate([y[:-1], reshape(e, (1,) + shape)], axis=0)
    if ax != 0:
        y = moveaxis(y, 0, ax)
    if out_dt.kind in "iub":
        y = _ns.floor(y)
    y = astype(y, out_dt)
    if device is not None:
        y = to_device(y, device)
    return (y, step) if retstep else y


def _constant(values, dtype, device, op) -> Tensor:
    """NumPy's float64 (or complex128) samples cast to ``dtype`` (float32 by default)."""
    if dtype is None:
        dt = _np.dtype(_np.complex64 if values.dtype.kind == "c" else _np.float32)
    else:
        dt = _np.dtype(dtype)
    return Tensor(values.astype(dt), device=device)


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0, *,
             device=None) -> Tensor:
    """``base ** linspace(start, stop, num)``: samples evenly spaced on a log scale (NumPy
    ``logspace``).

    Args:
        start, stop: Exponents of the first and last samples (numbers, arrays or Tensors,
            broadcast together).
        num: Number of samples, ``>= 0``.
        endpoint: Include ``base ** stop``.
        base: Base of the logarithm (a number, array or Tensor, broadcast with the endpoints;
            the samples run along ``axis``).
        dtype: Result dtype. Default: the Tensor arguments' dtype (NumPy's promotion; integers
            give float64), float32 when none is a Tensor (as :func:`linspace`).
        axis: Where the samples go when the arguments are arrays.
        device: ``"cpu"`` or ``"cuda:N"`` (default: the Tensor arguments' device, else CPU).

    Returns:
        Tensor of shape ``(num, *broadcast shape)`` with ``num`` at ``axis``. Differentiable in
        ``start``, ``stop`` and ``base`` when they are Tensors (``d/dstart`` of sample ``i`` is
        ``(1 - i/div) log(base) base**y_i``).

    Raises:
        ValueError: for a negative ``num`` or an ``axis`` out of range.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> tnp.logspace(0.0, 2.0, 3)
        Tensor([  1.,  10., 100.], dtype=float32)
        >>> tg.grad(lambda b: tnp.logspace(0.0, 2.0, 3, base=b).sum())(tg.Tensor(10.0))
        Tensor(21., dtype=float32)
    """
    num = _num(num, "logspace")
    if not any(_given_tensor(v) for v in (start, stop, base)):
        with _np.errstate(all="ignore"):
            values = _np.logspace(start, stop, num, endpoint, base, axis=axis)
        return _constant(values, dtype, device, "logspace")
    start, stop, base = _operands([start, stop, base])
    nd = max(start.ndim, stop.ndim, base.ndim)
    start, stop, base = (reshape(v, (1,) * (nd - v.ndim) + v.shape) for v in (start, stop, base))
    y = linspace_of_tensors(start, stop, num, endpoint, False, None, axis, None, "logspace")
    ax = _axis(axis, nd + 1, "logspace")
    out = _ns.power(expand_dims(base, ax), y)
    if dtype is not None:
        out = astype(out, dtype)
    return to_device(out, device) if device is not None else out


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0, *, device=None) -> Tensor:
    """Samples evenly spaced on a log scale from ``start`` to ``stop`` (NumPy ``geomspace``):
    a geometric progression, each sample a constant multiple of the previous one.

    Args:
        start, stop: First and last values (numbers, arrays or Tensors, broadcast; nonzero).
            Negative real endpoints of one sign give negative samples; complex endpoints
            follow the arc between them, as NumPy.
        num: Number of samples, ``>= 0``.
        endpoint: Include ``stop``.
        dtype: Result dtype. Default: the Tensor arguments' dtype (integers give float64),
            float32 (complex64) when none is a Tensor.
        axis: Where the samples go when the endpoints are arrays.
        device: ``"cpu"`` or ``"cuda:N"``.

    Returns:
        Tensor of shape ``(num, *broadcast shape)`` with ``num`` at ``axis``; the first and
        last samples are ``start`` and ``stop`` themselves. Differentiable in Tensor endpoints
        (real and complex).

    Raises:
        ValueError: if an endpoint is zero (NumPy's error), ``num`` is negative or ``axis`` is
            out of range.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.geomspace(1.0, 1000.0, 4)
        Tensor([   1.,   10.,  100., 1000.], dtype=float32)
    """
    num = _num(num, "geomspace")
    if not any(_given_tensor(v) for v in (start, stop)):
        values = _np.geomspace(start, stop, num, endpoint, axis=axis)
        return _constant(values, dtype, device, "geomspace")
    s, e = _operands([start, stop])
    if bool(_ns.any(stop_gradient(s) == 0)) or bool(_ns.any(stop_gradient(e) == 0)):
        raise ValueError("geomspace: a geometric sequence cannot include zero (start or stop "
                         "is 0)")
    dt = _inexact(s.dtype, e.dtype)
    s, e = astype(s, dt), astype(e, dt)
    shape = tuple(_np.broadcast_shapes(s.shape, e.shape))
    s, e = broadcast_to(s, shape), broadcast_to(e, shape)
    # rotate start onto the positive real axis, interpolate the logarithms, rotate back
    sign = s / _ns.abs(s) if dt.kind == "c" else stop_gradient(_ns.sign(s))
    lo, hi = s / sign, e / sign
    mid = linspace_of_tensors(_ns.log10(lo), _ns.log10(hi), num, endpoint, False, None, 0, None,
                              "geomspace")
    res = _ns.power(10.0, mid)
    if num > 0:  # the endpoints themselves, not 10 ** log10 of them
        parts = [reshape(lo, (1,) + shape)]
        if num > 1 and endpoint:
            parts += [res[1:-1], reshape(hi, (1,) + shape)]
        else:
            parts.append(res[1:])
        res = concatenate(parts, axis=0)
    res = res * sign
    ax = _axis(axis, len(shape) + 1, "geomspace")
    if ax != 0:
        res = moveaxis(res, 0, ax)
    if dtype is not None:
        res = astype(res, dtype)
    return to_device(res, device) if device is not None else res
