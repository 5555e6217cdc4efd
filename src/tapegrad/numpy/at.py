"""Functional index updates: ``x.at[idx].set(v)``, ``.add(v)``, ``.multiply(v)``, ``.min(v)``,
``.max(v)`` and ``.get()`` (JAX's ``.at`` semantics).

Tensors are immutable, so ``x[idx] = v`` raises a ``TypeError``; ``x.at[idx].set(v)`` returns a
new Tensor equal to ``x`` except at ``idx`` and leaves ``x`` unchanged. ``idx`` is any index
``x[idx]`` accepts (slices, ints, ``None``, ``...``, integer arrays and Tensors, boolean
masks). ``v`` broadcasts to the shape of ``x[idx]`` and is cast to ``x``'s dtype.

Repeated indices: ``add``, ``multiply``, ``min`` and ``max`` apply once per occurrence
(``numpy.add.at`` and friends: ``x.at[[0, 0]].add(1.0)`` adds 2 to ``x[0]``); for ``set`` the
last write wins. All updates are differentiable in both ``x`` and ``v``, to any order.

Importing this module installs the ``Tensor.at`` property (``tapegrad`` imports it).

Example:
    >>> import tapegrad as tg
    >>> x = tg.Tensor([1.0, 2.0, 3.0])
    >>> x.at[0].set(10.0)
    Tensor([10.,  2.,  3.], dtype=float32)
    >>> x.at[[0, 0, 2]].add(1.0)
    Tensor([3., 2., 4.], dtype=float32)
    >>> x
    Tensor([1., 2., 3.], dtype=float32)
"""

from __future__ import annotations

import numpy as np

from tapegrad import ops as _ops
from tapegrad.core.tensor import Tensor
from tapegrad.ops.elementwise import AsType as _AsType
from tapegrad.ops.movement import split_index as _split_index

__all__ = ["IndexUpdateHelper", "IndexUpdateRef"]


class IndexUpdateHelper:
    """The object ``x.at`` returns; index it (``x.at[idx]``) to get an :class:`IndexUpdateRef`."""

    __slots__ = ("_tensor",)

    def __init__(self, tensor: Tensor):
        self._tensor = tensor

    def __getitem__(self, idx) -> IndexUpdateRef:
        return IndexUpdateRef(self._tensor, idx)

    def __repr__(self) -> str:
        return f"IndexUpdateHelper({self._tensor!r})"


class IndexUpdateRef:
    """``x.at[idx]``: the methods below return updated copies of ``x``.

    Gradients (``g`` the output cotangent):
        - ``set``: ``x`` gets ``g`` zeroed at ``idx``; ``v`` gets ``g[idx]`` for the writes
          that took effect, summed over ``v``'s broadcasting.
        - ``add``: ``x`` gets ``g``; ``v`` gets ``g[idx]`` (summed over broadcasting).
        - ``multiply``: ``x`` gets ``g`` times the product scattered at each element; ``v``
          gets ``g * x`` times the product of the other factors applied at the same element.
        - ``min``/``max``: ``g`` goes to whichever of ``x`` and the writes gave the result;
          ties split it equally.

    Raises:
        IndexError: for an index ``x[idx]`` rejects (out of bounds, ...).
        ValueError: if ``v`` does not broadcast to the shape of ``x[idx]``.
        TypeError: if ``v`` is not numeric.
    """

    __slots__ = ("_tensor", "_idx")

    def __init__(self, tensor: Tensor, idx):
        self._tensor = tensor
        self._idx = idx

    def __repr__(self) -> str:
        return f"IndexUpdateRef({self._tensor!r}, {self._idx!r})"

    def _prepare(self, values):
        x = self._tensor
        if isinstance(values, Tensor):
            v = values if values.dtype == x.dtype else _AsType.api(values, x.dtype)
        elif hasattr(values, "__cuda_array_interface__"):
            v = Tensor(values, dtype=x.dtype)
        else:
            try:
                arr = np.asarray(values)
            except (TypeError, ValueError) as e:
                raise TypeError(
                    f"at[]: values must be numeric, got {type(values).__name__}: {e}"
                ) from None
            if arr.dtype.kind not in "biufc":
                raise TypeError(f"at[]: values must be numeric, got dtype {arr.dtype}")
            v = Tensor(arr.astype(x.dtype), device=x.device)
        if v.device != x.device:
            raise ValueError(
                f"at[]: values live on {v.device} but the Tensor on {x.device}; move them with "
                ".to_device(...)"
            )
        key, arrays = _split_index(self._idx, x.device)
        return x, v, key, arrays

    def get(self) -> Tensor:
        """``x[idx]``."""
        return self._tensor[self._idx]

    def set(self, values) -> Tensor:
        """A copy of ``x`` with ``x[idx] = values`` (the last write wins for repeated indices)."""
        x, v, key, arrays = self._prepare(values)
        return _ops.ScatterSet.apply(x, v, *arrays, key=key)

    def add(self, values) -> Tensor:
        """A copy of ``x`` with ``values`` added at ``idx``; repeated indices accumulate."""
        x, v, key, arrays = self._prepare(values)
        return _ops.ScatterAddInto.apply(x, v, *arrays, key=key)

    def multiply(self, values) -> Tensor:
        """A copy of ``x`` multiplied by ``values`` at ``idx``; repeated indices multiply again."""
        x, v, key, arrays = self._prepare(values)
        return _ops.ScatterMul.apply(x, v, *arrays, key=key)

    mul = multiply

    def min(self, values) -> Tensor:  # noqa: A003
        """A copy of ``x`` with ``x[idx] = minimum(x[idx], values)``, over all repeats."""
        x, v, key, arrays = self._prepare(values)
        return _ops.ScatterMinMax.apply(x, v, *arrays, key=key, op="min")

    def max(self, values) -> Tensor:  # noqa: A003
        """A copy of ``x`` with ``x[idx] = maximum(x[idx], values)``, over all repeats."""
        x, v, key, arrays = self._prepare(values)
        return _ops.ScatterMinMax.apply(x, v, *arrays, key=key, op="max")


def _at(self: Tensor) -> IndexUpdateHelper:
    return IndexUpdateHelper(self)


#: The Tensor method of this module (attached by :mod:`tapegrad.numpy.methods`).
METHODS = (
    {
        "at": property(
            _at,
            doc="Functional index updates: ``x.at[idx].set(v)``, ``.add(v)``, ``.multiply(v)``, "
            "``.min(v)``, ``.max(v)``, ``.get()``; see :mod:`tapegrad.numpy.at`.",
        )
    }
)
