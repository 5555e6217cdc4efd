"""Hypothesis strategies for tapegrad property tests: shapes, broadcastable shapes, Tensors.

Requires ``hypothesis`` (the ``test`` extra installs it: ``pip install -e ".[test]"`` in a
clone).
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tapegrad.core.tensor import Tensor

__all__ = ["shapes", "broadcastable_shapes", "arrays", "tensors", "floats_in"]


def shapes(min_dims: int = 0, max_dims: int = 3, min_side: int = 0, max_side: int = 4):
    """Array shapes, including scalars ``()``, size-1 and (with ``min_side=0``) size-0 dims."""
    return hnp.array_shapes(
        min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side
    )


def broadcastable_shapes(
    num_shapes: int = 2, min_dims: int = 0, max_dims: int = 3, min_side: int = 0, max_side: int = 4
):
    """Tuples of ``num_shapes`` shapes that broadcast together (NumPy rules)."""
    return hnp.mutually_broadcastable_shapes(
        num_shapes=num_shapes,
        min_dims=min_dims,
        max_dims=max_dims,
        min_side=min_side,
        max_side=max_side,
    ).map(lambda r: r.input_shapes)


def floats_in(
    low: float = -3.0, high: float = 3.0, width: int = 64, exclude=None, margin: float = 1e-2
):
    """Finite floats in ``[low, high]``, optionally at least ``margin`` away from the points
    in ``exclude`` (kinks, poles)."""
    s = st.floats(low, high, allow_nan=False, allow_infinity=False, width=width)  # pyright: ignore[reportArgumentType]
    if exclude:
        s = s.filter(lambda v: all(abs(v - e) > margin for e in exclude))
    return s


def arrays(shape, dtype=np.float64, elements=None):
    """NumPy arrays of ``shape`` and ``dtype`` with ``elements`` (default: floats in [-3, 3])."""
    if elements is None:
        elements = floats_in(width=np.dtype(dtype).itemsize * 8)
    return hnp.arrays(dtype, shape, elements=elements)


def tensors(shape=None, dtype=np.float64, elements=None):
    """Tensors of ``shape`` (a shape or a strategy of shapes; default :func:`shapes`)."""
    shape_st = (
        shapes()
        if shape is None
        else (shape if isinstance(shape, st.SearchStrategy) else st.just(tuple(shape)))
    )
    return shape_st.flatmap(lambda s: arrays(s, dtype, elements)).map(Tensor)
