"""``tapegrad.numpy.fft``: NumPy's ``numpy.fft``, differentiable.

Transforms: ``fft``/``ifft`` (1-D), ``fft2``/``ifft2``, ``fftn``/``ifftn`` (complex to
complex), ``rfft``/``irfft``, ``rfft2``/``irfft2``, ``rfftn``/``irfftn`` (real input, half
spectrum), ``hfft``/``ihfft`` (Hermitian-symmetric signals); helpers ``fftshift``,
``ifftshift``, ``fftfreq``, ``rfftfreq``. Signatures and semantics are NumPy 2's: ``n`` (1-D)
or ``s`` (n-D) crops or zero-pads the input along the transformed axes (``-1`` or ``None`` in
``s``: keep that axis' length), ``axis``/``axes`` choose them, and ``norm`` is ``"backward"``
(default: the forward transform unscaled, the inverse scaled by ``1/n``), ``"ortho"``
(``1/sqrt(n)`` both ways) or ``"forward"`` (``1/n`` on the forward transform). Integer and
boolean inputs become float64, float16 becomes float32; float32/complex64 stay in single
precision (complex64 results), as NumPy 2.

Every transform is differentiable in JAX's convention, to any order, in both modes: the vjp of
a transform is the transform's transpose (an FFT of the cotangent with the matching
``norm``, not the inverse), with the Hermitian doubling of the half-spectrum bins of
``rfft``/``irfft`` handled exactly (see :mod:`tapegrad.ops.fft`). Cropping and zero-padding
differentiate as slicing and padding. CUDA Tensors use CuPy's ``fft`` (cuFFT).

Example:
    >>> import tapegrad as tg, tapegrad.numpy as tnp
    >>> tnp.fft.fft(tnp.asarray([1.0, 0.0, 0.0, 0.0]))
    Tensor([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j], dtype=complex64)
    >>> tg.grad(lambda x: tnp.real(tnp.fft.fft(x)).sum())(tnp.asarray([1.0, 2.0, 3.0, 4.0]))
    Tensor([4., 0., 0., 0.], dtype=float32)
"""

from __future__ import annotations

import operator

import numpy as _np
from numpy.exceptions import AxisError

from tapegrad import ops as _ops
from tapegrad.core.tensor import Tensor
from tapegrad.numpy._core import _tensor
from tapegrad.numpy._core import asarray as _asarray
from tapegrad.numpy._docs import sections as _sections
from tapegrad.ops._registry import ns as _ns
from tapegrad.ops.fft import NORMS as _NORMS
from tapegrad.ops.fft import swap_norm as _swap_norm

__all__ = [
    "test",
    "fft",
    "ifft",
    "fft2",
    "ifft2",
    "fftn",
    "ifftn",
    "rfft",
    "irfft",
    "rfft2",
    "irfft2",
    "rfftn",
    "irfftn",
    "hfft",
    "ihfft",
    "fftshift",
    "ifftshift",
    "fftfreq",
    "rfftfreq",
]


# -- argument handling ------------------------------------------------------------------------
def _norm(norm, op: str) -> str:
    if norm is None:
        return "backward"
    if norm not in _NORMS:
        raise ValueError(
            f'{op}: invalid norm value {norm!r}; should be "backward", "ortho" or "forward"'
        )
    return norm


def _no_out(out, op: str) -> None:
    if out is not None:
        raise TypeError(f"{op}: out= is not supported (Tensors are immutable); use the result")


def _input(a, op: str, real: bool = False) -> Tensor:
    """``a`` as a Tensor of a dtype the transforms take (NumPy's conversions)."""
    if isinstance(a, _np.ndarray) and a.dtype.kind not in "biufc":
        raise TypeError(f"{op}: unsupported dtype {a.dtype} (shape {a.shape}); expected numbers")
    x = _tensor(a)
    k = x.dtype.kind
    if k == "c":
        if real:
            raise TypeError(
                f"{op}: the input must be real, got dtype {x.dtype} (shape {x.shape}); use "
                "fft for complex input"
            )
        return x
    if k == "f":
        return x.astype(_np.float32) if x.dtype == _np.float16 else x
    if k in "iub":
        return x.astype(_np.float64)
    raise TypeError(f"{op}: unsupported dtype {x.dtype} (shape {x.shape}); expected numbers")


def _axis(axis, ndim: int, op: str) -> int:
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(f"{op}: axis must be an integer, got {axis!r}") from None
    if not -ndim <= axis < ndim:
        raise AxisError(f"{op}: axis {axis} is out of range for a Tensor with {ndim} dims")
    return axis % ndim


def _points(n, op: str) -> int:
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"{op}: n must be an integer, got {n!r}") from None
    if n < 1:
        raise ValueError(f"{op}: invalid number of FFT data points ({n}) specified")
    return n


def _resize(x: Tensor, axis: int, n: int) -> Tensor:
    """``x`` cropped or zero-padded at the end of ``axis`` to length ``n``."""
    m = x.shape[axis]
    if n == m:
        return x
    if n < m:
        key = (slice(None),) * axis + (slice(0, n),)
        return x[key]
    pad = [(0, 0)] * x.ndim
    pad[axis] = (0, n - m)
    return _ops.Pad.apply(x, pad_width=tuple(pad))


def _cook_nd(x: Tensor, s, axes, op: str, invreal: bool = False):
    """NumPy's ``_cook_nd_args``: the transform lengths and (normalized) axes. ``s`` without
    ``axes`` names the last ``len(s)`` axes; ``-1`` or ``None`` in ``s`` keeps an axis'
    length; for ``invreal`` and no ``s`` the last length is ``2 * (m - 1)``."""
    if s is None:
        shapeless = True
        if axes is None:
            axes = list(range(x.ndim))
        axes = [_axis(a, x.ndim, op) for a in axes]
        s = [x.shape[a] for a in axes]
    else:
        shapeless = False
        try:
            s = list(s)
        except TypeError:
            raise TypeError(f"{op}: s must be a sequence of integers, got {s!r}") from None
        if axes is None:
            if len(s) > x.ndim:
                raise ValueError(
                    f"{op}: s={tuple(s)} names more axes than the Tensor has (shape {x.shape})"
                )
            axes = list(range(x.ndim - len(s), x.ndim))
        axes = [_axis(a, x.ndim, op) for a in axes]
    if len(s) != len(axes):
        raise ValueError(
            f"{op}: shape and axes have different lengths: s={tuple(s)}, axes={tuple(axes)}"
        )
    if invreal and shapeless and axes:
        s[-1] = (x.shape[axes[-1]] - 1) * 2
    s = [x.shape[a] if (n is None or n == -1) else _points(n, op) for n, a in zip(s, axes)]
    return s, axes


# -- complex transforms -----------------------------------------------------------------------
def _c2c(a, s, axes, norm, inverse, op):
    x = _input(a, op)
    norm = _norm(norm, op)
    s, axes = _cook_nd(x, s, axes, op)
    if not axes:
        return x
    for n in s:
        if n < 1:
            raise ValueError(f"{op}: invalid number of FFT data points ({n}) specified")
    if len(set(axes)) == len(axes):
        for n, ax in zip(s, axes):
            x = _resize(x, ax, n)
        return _ops.Fft.apply(x, axes=tuple(axes), norm=norm, inverse=inverse)
    for n, ax in reversed(list(zip(s, axes))):  # a repeated axis: one pass each, as NumPy
        x = _ops.Fft.apply(_resize(x, ax, n), axes=(ax,), norm=norm, inverse=inverse)
    return x


def fft(a, n=None, axis=-1, norm=None, out=None) -> Tensor:
    """One-dimensional discrete Fourier transform (NumPy ``fft.fft``):
    ``y[k] = sum_j x[j] exp(-2 pi i j k / n)`` (scaled by ``norm``).

    Args:
        a: Tensor (real or complex).
        n: Length of the transform: the input is cropped or zero-padded along ``axis`` to
            ``n`` (default: its length).
        axis: The transformed axis.
        norm: ``"backward"`` (default, unscaled), ``"ortho"`` (``1/sqrt(n)``) or
            ``"forward"`` (``1/n``).
        out: Not supported; must be None.

    Returns:
        Complex Tensor (complex64 for float32/complex64 input, else complex128) with length
        ``n`` along ``axis``.

    Gradient: the vjp is ``fft`` of the cotangent with the same ``norm`` (the DFT matrix is
    symmetric; JAX's rule), cropped or padded back; real input receives its real part.

    Raises:
        ValueError: if ``n < 1``, the axis is out of range or ``norm`` is unknown.
        TypeError: for ``out=`` or a non-numeric input.
    """
    _no_out(out, "fft")
    return _c2c(a, None if n is None else [n], [axis], norm, False, "fft")


def ifft(a, n=None, axis=-1, norm=None, out=None) -> Tensor:
    """One-dimensional inverse DFT (NumPy ``fft.ifft``):
    ``x[j] = (1/n) sum_k y[k] exp(2 pi i j k / n)`` with ``norm="backward"``.

    Arguments, result and errors as :func:`fft`. Gradient: the vjp is ``ifft`` of the
    cotangent with the same ``norm`` (the transpose, not the inverse).

    Returns:
        Complex Tensor (complex64 for float32/complex64 input, else complex128) of ``a``'s
        shape with ``axis`` of length ``n``.

    Raises:
        ValueError: for an out-of-range ``axis`` or ``n < 1``. TypeError: for ``out=``.
    """
    _no_out(out, "ifft")
    return _c2c(a, None if n is None else [n], [axis], norm, True, "ifft")


def fftn(a, s=None, axes=None, norm=None, out=None) -> Tensor:
    """N-dimensional DFT over ``axes`` (NumPy ``fft.fftn``).

    Args:
        a: Tensor.
        s: Lengths of the transform along ``axes`` (crop or zero-pad; ``-1``/``None``: keep);
            with ``axes=None`` it names the last ``len(s)`` axes.
        axes: Axes to transform (default: all, or the last ``len(s)``); an axis given twice
            is transformed twice, as NumPy.
        norm: See :func:`fft`.
        out: Not supported; must be None.

    Returns:
        Complex Tensor; ``a`` itself for ``axes=()``.

    Gradient: ``fftn`` of the cotangent with the same ``norm`` (JAX's rule).

    Raises:
        ValueError: for lengths ``< 1``, ``s`` and ``axes`` of different lengths, an axis out of
            range or an unknown ``norm``.
    """
    _no_out(out, "fftn")
    return _c2c(a, s, axes, norm, False, "fftn")


def ifftn(a, s=None, axes=None, norm=None, out=None) -> Tensor:
    """N-dimensional inverse DFT over ``axes`` (NumPy ``fft.ifftn``); arguments as
    :func:`fftn`. Gradient: ``ifftn`` of the cotangent with the same ``norm``.

    Returns:
        Complex Tensor (complex64 for float32/complex64 input, else complex128) of ``a``'s
        shape with ``axes`` resized to ``s``.

    Raises:
        ValueError: for out-of-range axes, ``s`` and ``axes`` of different lengths, or
            non-positive lengths. TypeError: for ``out=``.
    """
    _no_out(out, "ifftn")
    return _c2c(a, s, axes, norm, True, "ifftn")


_C2C_2D = """
    Args:
        a: Tensor with at least 2 axes.
        s: Output lengths along ``axes`` (zero-padded or cropped), default the input's.
        axes: The transformed axes (default ``(-2, -1)``).
        norm: ``"backward"`` (default), ``"ortho"`` or ``"forward"``.
        out: Must be ``None``.

    Returns:
        Complex Tensor (complex64 for float32/complex64 input, else complex128) of ``a``'s
        shape with ``axes`` resized to ``s``.

    Raises:
        ValueError: for out-of-range axes, ``s`` and ``axes`` of different lengths, or
            non-positive lengths.
        TypeError: for ``out=``.
"""


@_sections(_C2C_2D)
def fft2(a, s=None, axes=(-2, -1), norm=None, out=None) -> Tensor:
    """Two-dimensional DFT (NumPy ``fft.fft2``): :func:`fftn` over ``axes=(-2, -1)``."""
    _no_out(out, "fft2")
    return _c2c(a, s, axes, norm, False, "fft2")


@_sections(_C2C_2D)
def ifft2(a, s=None, axes=(-2, -1), norm=None, out=None) -> Tensor:
    """Two-dimensional inverse DFT (NumPy ``fft.ifft2``): :func:`ifftn` over
    ``axes=(-2, -1)``."""
    _no_out(out, "ifft2")
    return _c2c(a, s, axes, norm, True, "ifft2")


# -- real transforms --------------------------------------------------------------------------
def rfft(a, n=None, axis=-1, norm=None, out=None) -> Tensor:
    """DFT of a real input, the ``n // 2 + 1`` non-negative frequency bins (NumPy
    ``fft.rfft``).

    Args:
        a: Real Tensor (integers become float64).
        n: Transform length: ``a`` is cropped or zero-padded along ``axis`` to ``n``.
        axis: The transformed axis.
        norm: See :func:`fft`.
        out: Not supported; must be None.

    Returns:
        Complex Tensor with ``n // 2 + 1`` bins along ``axis``.

    Gradient: ``Re fft(pad(g, n))`` with the same ``norm`` (the transpose of keeping half
    the full spectrum; JAX's rule), exact for even and odd ``n``.

    Raises:
        TypeError: for complex input (as NumPy) or ``out=``.
        ValueError: if ``n < 1``, the axis is out of range or ``norm`` is unknown.
    """
    _no_out(out, "rfft")
    x = _input(a, "rfft", real=True)
    ax = _axis(axis, x.ndim, "rfft")
    n = x.shape[ax] if n is None else _points(n, "rfft")
    if n < 1:
        raise ValueError(f"rfft: invalid number of FFT data points ({n}) specified")
    return _ops.Rfft.apply(_resize(x, ax, n), axis=ax, norm=_norm(norm, "rfft"))


def irfft(a, n=None, axis=-1, norm=None, out=None) -> Tensor:
    """Inverse of :func:`rfft`: ``n`` real points from a half spectrum (NumPy
    ``fft.irfft``).

    Args:
        a: Tensor of half-spectrum bins along ``axis`` (real input counts as complex).
        n: Output length (default ``2 * (m - 1)`` for ``m`` input bins); the input is cropped
            or zero-padded to ``n // 2 + 1`` bins first. The imaginary parts of the
            zero-frequency bin (and, for even ``n``, of the Nyquist bin) are ignored.
        axis: The transformed axis.
        norm: See :func:`fft`.
        out: Not supported; must be None.

    Returns:
        Real Tensor (float32 for complex64/float32 input; float16 for float16 input, as
        NumPy) with length ``n`` along ``axis``.

    Gradient: ``conj(mask * rfft(g))`` with ``rfft``'s norm swapped, ``mask`` 1 at the edge
    bins and 2 at the bins that stand for a conjugate pair (JAX's rule); the ignored
    imaginary parts get a zero gradient.

    Raises:
        ValueError: if ``n < 1``, the axis is out of range or ``norm`` is unknown.
    """
    _no_out(out, "irfft")
    return _irfft(a, n, axis, _norm(norm, "irfft"), "irfft")


def _irfft(a, n, axis, norm, op, conj=False):
    x = _input(a, op)
    if conj and x.dtype.kind == "c":
        x = _ns.conj(x)
    ax = _axis(axis, x.ndim, op)
    n = (x.shape[ax] - 1) * 2 if n is None else _points(n, op)
    if n < 1:
        raise ValueError(f"{op}: invalid number of FFT data points ({n}) specified")
    y = _ops.Irfft.apply(_resize(x, ax, n // 2 + 1), axis=ax, n=n, norm=norm)
    if _tensor(a).dtype == _np.float16:  # NumPy returns a real half input's dtype here
        y = y.astype(_np.float16)
    return y


def rfftn(a, s=None, axes=None, norm=None, out=None) -> Tensor:
    """N-dimensional DFT of a real input (NumPy ``fft.rfftn``): :func:`rfft` over the last
    of ``axes``, then :func:`fft` over the others.

    Args:
        a: Real Tensor.
        s, axes, norm: As :func:`fftn`; ``axes`` must not be empty.
        out: Not supported; must be None.

    Returns:
        Complex Tensor with ``s[-1] // 2 + 1`` bins along ``axes[-1]`` and ``s[i]`` along the
        other axes.

    Gradient: the composition of the transposes of :func:`rfft` and :func:`fft`.

    Raises:
        ValueError: as :func:`fftn`, or for empty ``axes``.
        TypeError: for complex input.
    """
    _no_out(out, "rfftn")
    x = _input(a, "rfftn", real=True)
    norm = _norm(norm, "rfftn")
    s, axes = _cook_nd(x, s, axes, "rfftn")
    if not axes:
        raise ValueError("rfftn: axes must name at least one axis")
    x = _ops.Rfft.apply(_resize(x, axes[-1], s[-1]), axis=axes[-1], norm=norm)
    if len(axes) > 1:
        x = _c2c(x, s[:-1], axes[:-1], norm, False, "rfftn")
    return x


def irfftn(a, s=None, axes=None, norm=None, out=None) -> Tensor:
    """Inverse of :func:`rfftn` (NumPy ``fft.irfftn``): :func:`ifft` over all but the last of
    ``axes``, then :func:`irfft` over the last.

    Args:
        a: Tensor (a half spectrum along ``axes[-1]``).
        s: Output lengths along ``axes`` (default: the input's, and ``2 * (m - 1)`` for the
            last); ``-1``/``None`` keeps an axis' length.
        axes, norm: As :func:`fftn`; ``axes`` must not be empty.
        out: Not supported; must be None.

    Returns:
        Real Tensor with lengths ``s`` along ``axes``.

    Raises:
        ValueError: as :func:`fftn`, or for empty ``axes``.
    """
    _no_out(out, "irfftn")
    x = _input(a, "irfftn")
    norm = _norm(norm, "irfftn")
    s, axes = _cook_nd(x, s, axes, "irfftn", invreal=True)
    if not axes:
        raise ValueError("irfftn: axes must name at least one axis")
    if len(axes) > 1:
        x = _c2c(x, s[:-1], axes[:-1], norm, True, "irfftn")
    n = _points(s[-1], "irfftn")
    return _ops.Irfft.apply(_resize(x, axes[-1], n // 2 + 1), axis=axes[-1], n=n, norm=norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None, out=None) -> Tensor:
    """Two-dimensional DFT of a real input (NumPy ``fft.rfft2``): :func:`rfftn` over
    ``axes=(-2, -1)``.

    Args:
        a: Tensor with at least 2 axes, real.
        s: Output lengths along ``axes`` (zero-padded or cropped), default the input's.
        axes: The transformed axes (default ``(-2, -1)``).
        norm: ``"backward"`` (default), ``"ortho"`` or ``"forward"``.
        out: Must be ``None``.

    Returns:
        Complex Tensor with the last of ``axes`` of length ``s[-1] // 2 + 1`` (the
        non-negative frequencies); complex64 for float32 input, else complex128.

    Raises:
        ValueError: for out-of-range axes, ``s`` and ``axes`` of different lengths, or
            non-positive lengths.
        TypeError: for ``out=``, or complex input (use fft2).
    """
    return rfftn(a, s, axes, norm, out)


def irfft2(a, s=None, axes=(-2, -1), norm=None, out=None) -> Tensor:
    """Inverse of :func:`rfft2` (NumPy ``fft.irfft2``): :func:`irfftn` over
    ``axes=(-2, -1)``.

    Args:
        a: Tensor with at least 2 axes (a half spectrum).
        s: Output lengths along ``axes`` (zero-padded or cropped), default the input's (the last one
            ``2 (m - 1)``).
        axes: The transformed axes (default ``(-2, -1)``).
        norm: ``"backward"`` (default), ``"ortho"`` or ``"forward"``.
        out: Must be ``None``.

    Returns:
        Real Tensor (float32 for complex64 input, else float64) with ``axes`` of lengths ``s``.

    Raises:
        ValueError: for out-of-range axes, ``s`` and ``axes`` of different lengths, or
            non-positive lengths.
        TypeError: for ``out=``.
    """
    return irfftn(a, s, axes, norm, out)


def hfft(a, n=None, axis=-1, norm=None, out=None) -> Tensor:
    """DFT of a signal with Hermitian symmetry given by its first half (NumPy ``fft.hfft``):
    ``irfft(conj(a), n, axis)`` with the ``norm`` direction swapped, a real result.

    Args:
        a: Tensor, the half signal (``n // 2 + 1`` values along ``axis`` are used).
        n: Output length (default ``2 * (m - 1)``).
        axis, norm, out: As :func:`irfft`.

    Returns:
        Real Tensor of length ``n`` along ``axis``.

    Gradient: through :func:`irfft` and ``conj`` (JAX's convention).
    """
    _no_out(out, "hfft")
    return _irfft(a, n, axis, _swap_norm(_norm(norm, "hfft")), "hfft", conj=True)


def ihfft(a, n=None, axis=-1, norm=None, out=None) -> Tensor:
    """Inverse of :func:`hfft` (NumPy ``fft.ihfft``): ``conj(rfft(a, n, axis))`` with the
    ``norm`` direction swapped.

    Args:
        a: Real Tensor.
        n, axis, norm, out: As :func:`rfft`.

    Returns:
        Complex Tensor with ``n // 2 + 1`` bins along ``axis``.

    Gradient: through :func:`rfft` and ``conj``.
    """
    _no_out(out, "ihfft")
    norm = _norm(norm, "ihfft")
    return _ns.conj(rfft(a, n, axis, _swap_norm(norm)))


# -- helpers ----------------------------------------------------------------------------------
def _shift(x, axes, sign, op):
    x = _tensor(x)
    if axes is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axes, (int, _np.integer)):
        axes = (axes,)
    axes = tuple(_axis(a, x.ndim, op) for a in axes)
    if not axes:
        return x
    shift = tuple(sign * (x.shape[a] // 2) for a in axes)
    return _ns.roll(x, shift, axes)


_SHIFT = """
    Args:
        x: Tensor of any shape and dtype.
        axes: Int, tuple of ints, or ``None`` (every axis).

    Returns:
        Tensor of ``x``'s shape and dtype; differentiable (the cotangent rolled back).

    Raises:
        ValueError: for an out-of-range axis (naming the function).
"""


@_sections(_SHIFT)
def fftshift(x, axes=None) -> Tensor:
    """Move the zero-frequency bin to the center (NumPy ``fft.fftshift``): a roll by
    ``n // 2`` along each of ``axes`` (default: all). Differentiable (a permutation)."""
    return _shift(x, axes, 1, "fftshift")


@_sections(_SHIFT)
def ifftshift(x, axes=None) -> Tensor:
    """Inverse of :func:`fftshift` (NumPy ``fft.ifftshift``): a roll by ``-(n // 2)``."""
    return _shift(x, axes, -1, "ifftshift")


def _freq_scale(k: _np.ndarray, n: int, d, device, dtype, op: str):
    """``k / (n d)``: NumPy's arithmetic for a number ``d``, tapegrad's for a Tensor ``d``
    (then differentiable in ``d``), cast to ``dtype`` (the array API's keyword) if given."""
    if dtype is not None:
        dt = _np.dtype(dtype)
        if dt.kind != "f":
            raise TypeError(f"{op}: dtype must be a real floating dtype, got {dt}")
    if isinstance(d, Tensor):
        out = _asarray(k, device=d.device) * (1.0 / (n * d))
    else:
        out = _asarray(k * (1.0 / (n * d)), device=device)
    return out if dtype is None or out.dtype == dtype else out.astype(dtype)


def fftfreq(n, d=1.0, device=None, *, dtype=None) -> Tensor:
    """Sample frequencies of :func:`fft` bins (NumPy ``fft.fftfreq``):
    ``[0, 1, ..., (n-1)//2, -(n//2), ..., -1] / (d n)`` in cycles per unit of ``d``.

    Args:
        n: Window length (a positive integer).
        d: Sample spacing (a number, or a Tensor: the result is then differentiable in it).
        device: Where to create the result (``"cpu"``, ``"cuda:N"``).
        dtype: A real floating dtype for the result (the array API's keyword).

    Returns:
        float64 Tensor of shape ``(n,)`` (for a Tensor ``d``: its dtype's promotion), or
        ``dtype``.

    Raises:
        ValueError: if ``n`` is not a positive integer.
        TypeError: if ``dtype`` is not a real floating dtype.
    """
    n = _points(n, "fftfreq")
    k = _np.concatenate([_np.arange(0, (n - 1) // 2 + 1), _np.arange(-(n // 2), 0)])
    return _freq_scale(k, n, d, device, dtype, "fftfreq")


def rfftfreq(n, d=1.0, device=None, *, dtype=None) -> Tensor:
    """Sample frequencies of :func:`rfft` bins (NumPy ``fft.rfftfreq``):
    ``[0, 1, ..., n//2] / (d n)``.

    Args:
        n: Window length (a positive integer).
        d: Sample spacing (a number or a Tensor).
        device: Where to create the result.
        dtype: A real floating dtype for the result (the array API's keyword).

    Returns:
        float64 Tensor of shape ``(n // 2 + 1,)``, or ``dtype``.

    Raises:
        ValueError: if ``n`` is not a positive integer.
        TypeError: if ``dtype`` is not a real floating dtype.
    """
    n = _points(n, "rfftfreq")
    return _freq_scale(_np.arange(0, n // 2 + 1), n, d, device, dtype, "rfftfreq")


#: NumPy's test runner for ``numpy.fft`` (HIPS autograd's ``autograd.numpy.fft`` re-exports it
#: too); tapegrad's own tests are under ``tests/``.
test = _np.fft.test  # pyright: ignore[reportAttributeAccessIssue]
