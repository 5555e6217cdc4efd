"""Signal-processing helpers of NumPy: the window functions (:func:`bartlett`,
:func:`blackman`, :func:`hamming`, :func:`hanning`, :func:`kaiser`) and phase :func:`unwrap`.

The windows of a length ``M`` alone are constants (NumPy's values, computed in float64, as
float32 Tensors, tapegrad's dtype for values made from Python numbers); :func:`kaiser` is
differentiable in a Tensor ``beta``. :func:`unwrap` is differentiable in the phases (its
correction is a multiple of ``period``, piecewise constant in them) and in ``period``.
"""

from __future__ import annotations

import math
import operator

import numpy as _np

from tapegrad.core import dtypes as _tg_dtypes
from tapegrad.core.tensor import Tensor
from tapegrad.numpy._core import _tensor, astype
from tapegrad.numpy._docs import sections as _sections
from tapegrad.numpy._shape import concatenate, moveaxis
from tapegrad.numpy._statistics import diff
from tapegrad.ops._registry import given_tensor as _given_tensor
from tapegrad.ops._registry import ns as _ns

__all__ = ["bartlett", "blackman", "hamming", "hanning", "kaiser", "unwrap"]


def _length(M, op: str) -> int:  # noqa: N803 - NumPy's name
    try:
        return operator.index(M)
    except TypeError:
        if isinstance(M, float) and M.is_integer():
            return int(M)
        raise TypeError(f"{op}: M must be an integer number of points, got {M!r}") from None


def _window(values) -> Tensor:
    return Tensor(_np.asarray(values, dtype=_np.float64).astype(_np.float32))


_WINDOW = """
    Args:
        M: Number of points (an int; ``M < 1`` gives an empty window).

    Returns:
        float32 constant Tensor of shape ``(max(M, 0),)``{returns}

    Raises:
        TypeError: if ``M`` is not an integer.
"""


@_sections(_WINDOW, returns=""": ``1 - |n| / ((M - 1) / 2)`` for the
        centred sample positions ``n``, zero at both ends, peak 1.""")
def bartlett(M) -> Tensor:  # noqa: N803
    """The Bartlett (triangular) window of ``M`` points (NumPy ``bartlett``).

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.bartlett(5)
        Tensor([0. , 0.5, 1. , 0.5, 0. ], dtype=float32)
    """
    return _window(_np.bartlett(_length(M, "bartlett")))


@_sections(_WINDOW, returns=" (NumPy's float64 values, cast).")
def blackman(M) -> Tensor:  # noqa: N803
    """The Blackman window of ``M`` points (NumPy ``blackman``):
    ``0.42 - 0.5 cos(2 pi k / (M - 1)) + 0.08 cos(4 pi k / (M - 1))``.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.blackman(3)
        Tensor([-1.3877788e-17,  1.0000000e+00, -1.3877788e-17], dtype=float32)
    """
    return _window(_np.blackman(_length(M, "blackman")))


@_sections(_WINDOW, returns=".")
def hamming(M) -> Tensor:  # noqa: N803
    """The Hamming window of ``M`` points (NumPy ``hamming``):
    ``0.54 - 0.46 cos(2 pi k / (M - 1))``.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.hamming(3)
        Tensor([0.08, 1.  , 0.08], dtype=float32)
    """
    return _window(_np.hamming(_length(M, "hamming")))


@_sections(_WINDOW, returns=".")
def hanning(M) -> Tensor:  # noqa: N803
    """The Hann window of ``M`` points (NumPy ``hanning``): ``0.5 - 0.5 cos(2 pi k / (M - 1))``.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.hanning(3)
        Tensor([0., 1., 0.], dtype=float32)
    """
    return _window(_np.hanning(_length(M, "hanning")))


def kaiser(M, beta) -> Tensor:  # noqa: N803
    """The Kaiser window of ``M`` points and shape ``beta`` (NumPy ``kaiser``):
    ``I0(beta sqrt(1 - (2 k / (M - 1) - 1)**2)) / I0(beta)``.

    Args:
        M: Number of points (an int; ``M < 1`` gives an empty window).
        beta: Shape parameter (a number, or a 0-d Tensor/array: differentiable).

    Returns:
        Tensor of shape ``(max(M, 0),)``: float32 for a number ``beta``, else ``beta``'s
        floating dtype (float64 for an integer array). Differentiable in a Tensor ``beta``
        (through :func:`tapegrad.numpy.i0`).

    Raises:
        TypeError: if ``M`` is not an integer or ``beta`` is complex.
        ValueError: if ``beta`` is not a scalar.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> tnp.kaiser(3, 0.0)
        Tensor([1., 1., 1.], dtype=float32)
        >>> g = tg.grad(lambda b: tnp.kaiser(3, b).sum())(tg.Tensor(1.0))
        >>> round(float(g), 4)  # the sum is 1 + 2 / I0(beta): -2 I1(1) / I0(1)**2
        -0.7052
    """
    m = _length(M, "kaiser")
    if not _given_tensor(beta) and not isinstance(beta, _np.ndarray):
        return _window(_np.kaiser(m, beta))
    b = _tensor(beta)
    if b.ndim != 0:
        raise ValueError(f"kaiser: beta must be a scalar, got shape {b.shape}")
    if b.dtype.kind == "c":
        raise TypeError(f"kaiser: beta must be real, got dtype {b.dtype}")
    if b.dtype.kind not in "fV":
        b = astype(b, _np.float64)
    if m < 1:
        return Tensor(_np.zeros((0,), b.dtype), device=b.device)
    if m == 1:
        return Tensor(_np.ones((1,), b.dtype), device=b.device)
    n = _np.arange(m, dtype=_np.float64)
    alpha = (m - 1) / 2.0
    r = Tensor(_np.sqrt(1.0 - ((n - alpha) / alpha) ** 2).astype(b.dtype), device=b.device)
    return _ns.i0(b * r) / _ns.i0(b)


def unwrap(p, discont=None, axis=-1, *, period=2 * math.pi) -> Tensor:
    """Unwrap phases: replace each jump between neighbours along ``axis`` larger than
    ``discont`` by its equivalent modulo ``period`` (NumPy ``unwrap``).

    Args:
        p: Tensor/array of phases (radians by default), real.
        discont: Largest jump left as it is (default ``period / 2``; smaller values act as
            ``period / 2``).
        axis: Axis to unwrap along.
        period: Size of the range the input wraps around (default ``2 pi``; a number or a
            0-d Tensor).

    Returns:
        Tensor of ``p``'s shape; ``p``'s floating dtype (float64 for integer phases with a
        float ``period``, as NumPy). Differentiable: the derivative in ``p`` is the identity
        (the correction is a multiple of ``period``, piecewise constant), and in ``period``
        the number of periods added.

    Raises:
        TypeError: for complex phases.
        ValueError: for a 0-d ``p`` or an ``axis`` out of range.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.unwrap(tnp.asarray([0.0, 3.0, 6.5, 0.2]), period=6.0)
        Tensor([0. , 3. , 0.5, 0.2], dtype=float32)
    """
    p = _tensor(p)
    if p.dtype.kind == "c":
        raise TypeError("unwrap: complex phases are not supported (unwrap their angle)")
    if p.ndim == 0:
        raise ValueError("unwrap: p must have at least one axis, got a 0-d array")
    ax = operator.index(axis)
    if not -p.ndim <= ax < p.ndim:
        raise ValueError(f"unwrap: axis {axis} is out of bounds for an array of {p.ndim} axes")
    ax %= p.ndim
    if p.shape[ax] == 0:
        return p
    per = _tensor(period) if _given_tensor(period) else period
    dd = diff(p, axis=ax)
    dtype = _tg_dtypes.result_type(dd.dtype, per.dtype if isinstance(per, Tensor) else per)
    integer = dtype.kind in "iub"
    if integer:
        high, rem = divmod(per, 2)
        ambiguous = rem == 0
    else:
        high, ambiguous = per / 2, True
        dd = astype(dd, dtype)
    low = -high
    ddmod = _ns.mod(dd - low, per) + low
    if ambiguous:  # a jump of exactly +period/2 keeps its sign
        ddmod = _ns.where((ddmod == low) & (dd > 0), high, ddmod)
    correct = ddmod - dd
    limit = per / 2 if discont is None else discont
    correct = _ns.where(_ns.abs(dd) < limit, 0, correct)
    moved = moveaxis(astype(p, dtype), ax, 0)
    corr = moveaxis(_ns.cumsum(correct, axis=ax), ax, 0)
    out = concatenate([moved[:1], moved[1:] + corr], axis=0)
    return moveaxis(out, 0, ax)
