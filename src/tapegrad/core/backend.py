"""Array backends and devices: NumPy on ``"cpu"``, CuPy on ``"cuda:N"``.

A device is a string. ``"cpu"`` arrays are :class:`numpy.ndarray`; ``"cuda:N"`` arrays are
``cupy.ndarray`` living on GPU ``N``. CuPy is optional: without it (or without a GPU) every
``"cuda"`` request raises a clear :class:`RuntimeError`, and everything else works.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["get_backend", "device_of", "backend_of", "cupy_available", "parse_device", "to_device"]

_cupy = None
_cupy_checked = False


def _load_cupy():
    global _cupy, _cupy_checked
    if not _cupy_checked:
        _cupy_checked = True
        try:  # pragma: no cover - depends on the machine
            import cupy  # pyright: ignore[reportMissingImports]

            cupy.cuda.runtime.getDeviceCount()
            _cupy = cupy
        except Exception:
            _cupy = None
    return _cupy


def cupy_available() -> bool:
    """Whether CuPy imports and at least one CUDA device answers."""
    return _load_cupy() is not None


def parse_device(device) -> str:
    """Normalise a device name: ``"cpu"``, ``"cuda"`` (= ``"cuda:0"``) or ``"cuda:N"``.

    Raises:
        ValueError: if ``device`` is not one of those forms.
    """
    if device is None or device == "cpu":
        return "cpu"
    if isinstance(device, str):
        if device == "cuda" or device == "gpu":
            return "cuda:0"
        if device.startswith("cuda:") and device[5:].isdigit():
            return device
    raise ValueError(f"device: expected 'cpu', 'cuda' or 'cuda:N', got {device!r}")


def get_backend(device: str = "cpu") -> Any:
    """The array module for ``device``: :mod:`numpy` for ``"cpu"``, :mod:`cupy` for ``"cuda:N"``.

    Raises:
        RuntimeError: if a CUDA device is asked for and CuPy or a GPU is missing.
    """
    if device == "cpu":
        return np
    device = parse_device(device)
    if device == "cpu":
        return np
    cp = _load_cupy()
    if cp is None:
        raise RuntimeError(
            f"device {device!r} needs CuPy and a CUDA GPU; install CuPy (pip install "
            "cupy-cuda12x, or pip install -e \".[gpu]\" in a clone of tapegrad) on a machine "
            "with an NVIDIA GPU, or use device='cpu'."
        )
    return cp


def device_of(array) -> str:
    """Device string of a backend array: ``"cpu"`` for NumPy, ``"cuda:N"`` for CuPy."""
    if isinstance(array, (np.ndarray, np.generic)):
        return "cpu"
    dev = getattr(array, "device", None)
    if dev is not None and hasattr(dev, "id"):
        return f"cuda:{dev.id}"
    return "cpu"


def backend_of(array):
    """The array module (numpy or cupy) that owns ``array``."""
    if isinstance(array, (np.ndarray, np.generic)):
        return np
    return get_backend(device_of(array))


def to_device(array, device: str) -> Any:
    """Copy ``array`` to ``device`` (no copy if it is already there)."""
    device = parse_device(device)
    src = device_of(array)
    if src == device:
        return array
    if device == "cpu":
        return array.get()
    cp = get_backend(device)
    with cp.cuda.Device(int(device.split(":")[1])):
        return cp.asarray(array)
