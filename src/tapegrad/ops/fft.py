"""Discrete Fourier transform primitives: complex-to-complex (``Fft``), real-to-complex
(``Rfft``) and complex-to-real (``Irfft``).

Each primitive transforms its input at its own lengths (no zero-padding or cropping: the
public functions of :mod:`tapegrad.numpy.fft` resize the input first with differentiable
slicing and padding), with NumPy's ``norm`` modes ``"backward"`` (the forward transform
unscaled, the inverse scaled by ``1/n``), ``"ortho"`` (both by ``1/sqrt(n)``) and
``"forward"`` (the forward by ``1/n``). The forward rules call the backend's ``fft``
module (NumPy's pocketfft, or cuFFT through CuPy for CUDA arrays); no primitive is exposed in
the flat ``tapegrad.numpy`` namespace (``names = ()``).

Derivatives. The vjps are the transposes in JAX's convention (the cotangent pairing
``Re sum(g * y)``), which are transforms of the cotangent, not inverses:

* ``Fft``: the DFT matrix is symmetric, so the transpose of ``fftn`` (``ifftn``) with a given
  ``norm`` is ``fftn`` (``ifftn``) with the same ``norm``;
* ``Rfft`` over ``n`` points (``n // 2 + 1`` outputs): the real part of ``fft`` (same
  ``norm``) of the cotangent zero-padded to ``n`` (JAX's ``_rfft_transpose``);
* ``Irfft`` to ``n`` points: ``conj(mask * rfft(g))`` with ``rfft``'s ``norm`` swapped
  (``"backward"`` <-> ``"forward"``), where ``mask`` is 1 at the zero-frequency bin and, for
  even ``n``, at the Nyquist bin, and 2 at every other bin (they stand for two conjugate bins
  of the full spectrum; JAX's ``_irfft_transpose``). The imaginary parts of the edge bins,
  which ``irfft`` ignores, get a zero cotangent.

All three maps are real-linear, so forward mode (the jvp, the op applied to the tangent) is
the transpose of these rules, which tapegrad derives from the backward.

References:
    JAX, ``jax/_src/lax/fft.py`` (transpose rules); NumPy, ``numpy.fft`` (semantics).
"""

from __future__ import annotations

import numpy as np
from numpy.exceptions import AxisError

from tapegrad.core.backend import get_backend
from tapegrad.core.function import Function, Traits
from tapegrad.core.tensor import Tensor, const
from tapegrad.ops._batching import shift_axes
from tapegrad.ops._registry import expose
from tapegrad.ops.elementwise import Conj, Real
from tapegrad.ops.movement import Pad

__all__ = ["Fft", "Rfft", "Irfft", "NORMS", "swap_norm"]

#: The ``norm`` modes, as NumPy names them.
NORMS = ("backward", "ortho", "forward")
_SWAP = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def swap_norm(norm: str) -> str:
    """The ``norm`` with the scaling moved to the other direction (NumPy's
    ``_swap_direction``): ``"backward"`` <-> ``"forward"``, ``"ortho"`` unchanged."""
    return _SWAP[norm]


def _complex_dtype(dtype) -> np.dtype:
    """complex64 for float32/complex64 (NumPy 2 keeps single precision), else complex128."""
    d = np.dtype(dtype)
    return np.dtype(np.complex64) if d in (np.float32, np.complex64) else np.dtype(np.complex128)


def _real_dtype(dtype) -> np.dtype:
    return np.dtype(np.float32) if np.dtype(dtype) in (np.float32, np.complex64) else np.dtype(
        np.float64)


def _check_axes(shape, axes, op):
    nd = len(shape)
    for a in axes:
        if not -nd <= a < nd:
            raise AxisError(f"{op}: axis {a} is out of range for a Tensor of shape {shape}")
    return tuple(a % nd for a in axes)


@expose
class Fft(Function):
    """``fftn`` (``inverse=False``) or ``ifftn`` (``inverse=True``) over ``axes`` at the
    input's lengths, with ``norm`` in ``("backward", "ortho", "forward")``.

    Output: the input's shape, complex (complex64 for float32/complex64 input, complex128
    otherwise). Backward: the same transform of the cotangent (the DFT matrix is symmetric);
    a real input receives the real part (JAX's convention).
    """

    oper = "fft"
    names = ()
    traits = Traits(fresh=True)

    @staticmethod
    def batch(args, batched, size, axes, norm="backward", inverse=False):
        (x,) = args
        return Fft.apply(x, axes=shift_axes(tuple(axes), x.ndim - 1, "fft"), norm=norm,
                         inverse=inverse)

    @staticmethod
    def forward(ctx, x, axes, norm="backward", inverse=False):
        axes = _check_axes(x.shape, axes, "ifftn" if inverse else "fftn")
        xp = ctx.backend
        out = (xp.fft.ifftn if inverse else xp.fft.fftn)(x, axes=axes, norm=norm)
        ctx.axes, ctx.norm, ctx.inverse = axes, norm, inverse
        dt = _complex_dtype(x.dtype)
        return out if out.dtype == dt else out.astype(dt)

    @staticmethod
    def backward(ctx, g):
        return Fft.apply(g, axes=ctx.axes, norm=ctx.norm, inverse=ctx.inverse)

    @classmethod
    def output_shape(cls, shape, axes, norm="backward", inverse=False):
        _check_axes(shape, axes, "fftn")
        return tuple(shape)

    @classmethod
    def output_dtype(cls, dtype, axes, norm="backward", inverse=False):
        return _complex_dtype(dtype)


@expose
class Rfft(Function):
    """``rfft`` of a real input along ``axis`` at its length ``n``: the ``n // 2 + 1``
    non-negative frequency bins, complex (complex64 for float32).

    Backward: ``Re fft(pad(g, n), norm)`` (the transpose of "full transform, keep the first
    ``n // 2 + 1`` bins"; JAX's rule), real like the input.
    """

    oper = "rfft"
    names = ()
    traits = Traits(fresh=True)

    @staticmethod
    def batch(args, batched, size, axis, norm="backward"):
        (x,) = args
        return Rfft.apply(x, axis=shift_axes(axis, x.ndim - 1, "rfft"), norm=norm)

    @staticmethod
    def forward(ctx, x, axis, norm="backward"):
        (axis,) = _check_axes(x.shape, (axis,), "rfft")
        if x.dtype.kind == "c":
            raise TypeError(f"rfft: the input must be real, got dtype {x.dtype}")
        out = ctx.backend.fft.rfft(x, axis=axis, norm=norm)
        ctx.axis, ctx.norm, ctx.n = axis, norm, x.shape[axis]
        dt = _complex_dtype(x.dtype)
        return out if out.dtype == dt else out.astype(dt)

    @staticmethod
    def backward(ctx, g):
        n, axis = ctx.n, ctx.axis
        pad = [(0, 0)] * g.ndim
        pad[axis] = (0, n - g.shape[axis])
        full = Pad.apply(g, pad_width=tuple(pad)) if n > g.shape[axis] else g
        return Real.apply(Fft.apply(full, axes=(axis,), norm=ctx.norm, inverse=False))

    @classmethod
    def output_shape(cls, shape, axis, norm="backward"):
        (axis,) = _check_axes(shape, (axis,), "rfft")
        out = list(shape)
        out[axis] = shape[axis] // 2 + 1
        return tuple(out)

    @classmethod
    def output_dtype(cls, dtype, axis, norm="backward"):
        return _complex_dtype(dtype)


def _hermitian_mask(n: int, m: int, axis: int, ndim: int, like: Tensor) -> Tensor:
    """The weights of the ``m = n // 2 + 1`` half-spectrum bins along ``axis``: 1 for the
    zero-frequency bin (and the Nyquist bin for even ``n``), 2 for the others."""
    w = np.full(m, 2.0, dtype=_real_dtype(like.dtype))
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    shape = [1] * ndim
    shape[axis] = m
    w = w.reshape(shape)
    if like.device == "cpu":
        return const(w)
    xp = get_backend(like.device)  # pragma: no cover - GPU only
    with xp.cuda.Device(int(like.device.split(":")[1])):  # pragma: no cover - GPU only
        return const(xp.asarray(w))


@expose
class Irfft(Function):
    """``irfft`` along ``axis`` to ``n`` real points from its ``n // 2 + 1`` half-spectrum
    bins (the input must have exactly that length there); real output (float32 for
    complex64 input). The imaginary parts of the zero-frequency bin and, for even ``n``, of
    the Nyquist bin are ignored, as NumPy.

    Backward: ``conj(mask * rfft(g, norm=swapped))`` with ``mask`` 1 at those edge bins and 2
    elsewhere (JAX's rule): each interior bin stands for itself and its conjugate partner.
    """

    oper = "irfft"
    names = ()
    traits = Traits(fresh=True)

    @staticmethod
    def batch(args, batched, size, axis, n, norm="backward"):
        (x,) = args
        return Irfft.apply(x, axis=shift_axes(axis, x.ndim - 1, "irfft"), n=n,
                           norm=norm)

    @staticmethod
    def forward(ctx, x, axis, n, norm="backward"):
        (axis,) = _check_axes(x.shape, (axis,), "irfft")
        if x.shape[axis] != n // 2 + 1:
            raise ValueError(
                f"irfft: the input needs n // 2 + 1 = {n // 2 + 1} bins along axis {axis} for "
                f"n = {n}, got shape {x.shape}"
            )
        out = ctx.backend.fft.irfft(x, n=n, axis=axis, norm=norm)
        ctx.axis, ctx.norm, ctx.n = axis, norm, n
        dt = _real_dtype(x.dtype)
        return out if out.dtype == dt else out.astype(dt)

    @staticmethod
    def backward(ctx, g):
        axis, n = ctx.axis, ctx.n
        c = Rfft.apply(g, axis=axis, norm=swap_norm(ctx.norm))
        c = c * _hermitian_mask(n, c.shape[axis], axis, c.ndim, g)
        return Conj.apply(c)

    @classmethod
    def output_shape(cls, shape, axis, n, norm="backward"):
        (axis,) = _check_axes(shape, (axis,), "irfft")
        out = list(shape)
        out[axis] = n
        return tuple(out)

    @classmethod
    def output_dtype(cls, dtype, axis, n, norm="backward"):
        return _real_dtype(dtype)
