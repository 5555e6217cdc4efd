"""DLPack, the zero-copy exchange of arrays between libraries: :func:`from_dlpack` and the
Tensor's ``__dlpack__``/``__dlpack_device__`` (attached by :mod:`tapegrad.numpy.methods`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tapegrad.core.backend import get_backend, parse_device
from tapegrad.core.tensor import Tensor, const
from tapegrad.numpy._core import to_device

__all__ = ["from_dlpack"]

# -- DLPack ---------------------------------------------------------------------------------
_KDL_CPU, _KDL_CUDA = 1, 2


def _backend_array(t: Tensor) -> Any:
    """The Tensor's read-only backend array (NumPy on the CPU, CuPy on a GPU)."""
    if t.device == "cpu":
        return t.numpy()  # read-only, no copy
    return t._concrete()  # the CuPy array, never written by tapegrad


def _dlpack(self, *, stream=None, max_version=None, dl_device=None, copy=None):
    """DLPack export (the array API standard's ``__dlpack__``).

    The capsule shares the Tensor's memory and is marked read-only (DLPack 1.0). A consumer
    of the pre-1.0 protocol (no ``max_version``) cannot be told the buffer is read-only, so it
    receives a copy (``copy=False`` then raises ``BufferError``). ``np.from_dlpack(t)`` is a
    read-only NumPy view of the Tensor (no copy); ``torch.from_dlpack(t)`` shares the memory
    too, and since PyTorch has no read-only tensors, writing into that torch tensor would change
    the Tensor: ``.clone()`` it before writing.

    Args:
        stream: ``None`` on the CPU; a CUDA stream (int) for a GPU Tensor, as in the standard.
        max_version: The highest DLPack version ``(major, minor)`` the consumer supports.
        dl_device: ``(device_type, device_id)`` to export to; the Tensor's own by default.
        copy: ``True``: always copy; ``False``: never (``BufferError`` if one is needed);
            ``None``: copy only if needed.

    Returns:
        A ``PyCapsule`` named ``"dltensor"`` or ``"dltensor_versioned"``.

    Raises:
        TypeError: for a traced Tensor (inside a transform the exported buffer would carry no
            gradient): export ``tg.stop_gradient(x)`` if a constant is meant.
        BufferError: when the export asked for cannot be made (see ``copy``, ``dl_device``).
    """
    if self.is_traced:
        raise TypeError(
            "Tensor.__dlpack__: a traced Tensor cannot be exported through DLPack inside a "
            "transform (its gradient would be lost). Export the result after the transform, or "
            "tg.stop_gradient(x) if a constant is really meant."
        )
    arr = _backend_array(self)
    legacy = max_version is None or tuple(max_version)[0] < 1
    if legacy and type(arr) is np.ndarray and not arr.flags.writeable:
        if copy is False:
            raise BufferError(
                "Tensor.__dlpack__: copy=False, but a consumer of the pre-1.0 DLPack protocol "
                "(no max_version) cannot be told that the Tensor's buffer is read-only; a copy "
                "is needed."
            )
        copy = True
    kw = {"max_version": max_version, "copy": copy}
    if dl_device is not None:
        kw["dl_device"] = dl_device
    if stream is not None:
        kw["stream"] = stream
    return arr.__dlpack__(**kw)


def _dlpack_device(self):
    """``(device_type, device_id)``: ``(1, 0)`` (kDLCPU) or ``(2, N)`` (kDLCUDA) for
    ``"cuda:N"``."""
    dev = self.device
    if dev == "cpu":
        return (_KDL_CPU, 0)
    return (_KDL_CUDA, int(dev.split(":")[1]))


def from_dlpack(x, /, *, device=None, copy=None) -> Tensor:
    """A Tensor from any object with ``__dlpack__`` (NumPy, PyTorch, JAX, CuPy arrays...).

    Without a copy the Tensor shares the producer's memory (DLPack's zero-copy exchange): a
    producer that writes into its buffer afterwards changes the Tensor, so pass ``copy=True``
    when the source will be written to. tapegrad itself never writes into the buffer.

    Args:
        x: An object implementing ``__dlpack__`` and ``__dlpack_device__`` (a Tensor is
            returned as it is, or copied with ``copy=True``).
        device: ``"cpu"`` or ``"cuda:N"``; the producer's device by default. A different
            device than the producer's copies.
        copy: ``True``: always copy; ``False``: never copy (``ValueError`` if a copy is needed);
            ``None``: share the memory where possible.

    Returns:
        A constant Tensor (no gradient flows back into the producer) with the producer's
        shape and dtype.

    Raises:
        TypeError: if ``x`` does not implement DLPack, or its dtype is not numeric.
        ValueError: if ``copy=False`` and a copy is needed (another device).
        RuntimeError: for a CUDA producer without CuPy.

    Example:
        >>> import numpy as np
        >>> import tapegrad.numpy as tnp
        >>> a = np.arange(3.0)
        >>> t = tnp.from_dlpack(a)
        >>> t.shape, str(t.dtype), np.shares_memory(t.numpy(), a)
        ((3,), 'float64', True)
    """
    if isinstance(x, Tensor):
        if copy and x.device == "cpu":
            x = Tensor(np.array(x.numpy()))
        return x if device is None else to_device(x, parse_device(device))
    if not hasattr(x, "__dlpack__") or not hasattr(x, "__dlpack_device__"):
        raise TypeError(
            f"from_dlpack: expected an object implementing __dlpack__ and __dlpack_device__ "
            f"(a NumPy, PyTorch, JAX or CuPy array), got {type(x).__name__}"
        )
    src_type, src_id = x.__dlpack_device__()
    src = "cpu" if int(src_type) == _KDL_CPU else f"cuda:{int(src_id)}"
    target = src if device is None else parse_device(device)
    if target != src and copy is False:
        raise ValueError(
            f"from_dlpack: copy=False, but the data is on {src} and device={target!r} was "
            "asked for: moving it is a copy."
        )
    if src == "cpu":
        arr = np.from_dlpack(x, copy=copy)
    else:
        cp: Any = get_backend(src)
        with cp.cuda.Device(int(src.split(":")[1])):
            arr = cp.from_dlpack(x) if copy is None or copy is False else cp.from_dlpack(x).copy()
    if arr.dtype.kind not in "biufc":
        raise TypeError(f"from_dlpack: expected a numeric dtype, got {arr.dtype}")
    if type(arr) is np.ndarray and arr.flags.writeable:
        arr = arr.view()  # tapegrad never writes into a Tensor's buffer
        arr.flags.writeable = False
    t = const(arr)
    return t if target == src else to_device(t, target)


