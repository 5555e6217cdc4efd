"""Shared helpers of the functional layer: argument checks and conversions."""

from __future__ import annotations

import numpy as np

from tapegrad import numpy as tnp
from tapegrad.core.tensor import Tensor

__all__ = []

_REDUCTIONS = ("none", "mean", "sum")


# -- helpers ---------------------------------------------------------------------------------
def _floating(x, who: str, name: str = "input") -> Tensor:
    x = tnp.asarray(x)
    if x.dtype.kind not in "fV":
        raise TypeError(f"{who}: {name} must be a floating Tensor, got dtype {x.dtype}")
    return x


def _like(value, ref: Tensor, who: str = "tapegrad.nn.functional", name: str = "target"
          ) -> Tensor:
    """``value`` (Tensor/array/list/number) as a Tensor of ``ref``'s floating dtype.

    Raises:
        TypeError: for a value that is not numeric (a string, an object), naming ``who`` and
            ``name``.
    """
    if isinstance(value, Tensor):
        return value if value.dtype == ref.dtype else tnp.astype(value, ref.dtype)
    if hasattr(value, "__cuda_array_interface__"):  # a CuPy array
        return tnp.astype(Tensor(value), ref.dtype)
    try:
        arr = np.asarray(value)
        if arr.dtype.kind not in "biufc":
            raise TypeError(f"dtype {arr.dtype}")
        arr = arr.astype(ref.dtype)
    except (TypeError, ValueError) as e:
        raise TypeError(
            f"{who}: {name} must be numeric (a Tensor, array, list or number), got "
            f"{type(value).__name__} ({e})"
        ) from None
    return Tensor(arr, device=ref.device)


def _real_arg(value, who: str, name: str) -> float:
    """A real-number parameter (``delta``, ``label_smoothing``) as a float.

    Raises:
        TypeError: for a non-number (a string, None, a bool, a Tensor).
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer,
                                                                      np.floating)):
        raise TypeError(f"{who}: {name} must be a real number, got {value!r} "
                        f"({type(value).__name__})")
    return float(value)


def _int_arg(value, who: str, name: str) -> int:
    """An integer parameter (``ignore_index``) as an int (an integral float is accepted, as
    integral float targets are).

    Raises:
        TypeError: for a non-integer (a fractional float, a string, None, a bool).
    """
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{who}: {name} must be an int, got {value!r} ({type(value).__name__})")
    return int(value)


def _check_reduction(reduction, who):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{who}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def _axis(x: Tensor, axis, who: str) -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{who}: axis must be an int, got {axis!r}")
    if not -x.ndim <= axis < max(x.ndim, 1):
        raise ValueError(f"{who}: axis {axis} is out of range for a Tensor of shape {x.shape}")
    return int(axis) % max(x.ndim, 1)


# -- vmap batching rules: shared helpers ----------------------------------------------------
# Every primitive below declares ``batch(args, batched, size, **params)`` (see tapegrad.vmap):
# ``args`` are its inputs one level below the vmap, the batched ones holding the whole batch on
# axis 0 (``batched[i]``), the unbatched ones as given; it returns the whole batch's output,
# batch on axis 0, computed with tapegrad ops in one call of the op (or a few), never a loop.
