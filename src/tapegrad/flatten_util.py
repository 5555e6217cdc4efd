"""``ravel_pytree``: a pytree of arrays as one flat vector and back (JAX's
``jax.flatten_util.ravel_pytree``; HIPS autograd's ``autograd.misc.flatten``, also available
as :func:`tapegrad.flatten`).

The vector is built with tapegrad operations, so it is differentiable: flatten the parameters
to hand them to an optimizer that works on vectors (``scipy.optimize.minimize``), or compute a
Hessian of a function of a whole pytree as one matrix.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad.core.tensor import Tensor
from tapegrad.core.tree import tree_flatten, tree_flatten_with_path, tree_unflatten

__all__ = ["ravel_pytree", "flatten"]


def ravel_pytree(pytree: Any) -> tuple[Tensor, Callable[[Any], Any]]:
    """Flatten a pytree of arrays into one 1-D Tensor, with the function that undoes it.

    Args:
        pytree: Any pytree (nested dicts, lists, tuples, registered classes) whose leaves are
            Tensors, arrays or numbers (Python floats become float32, as everywhere in
            tapegrad).

    Returns:
        ``(flat, unravel)``: ``flat`` is the leaves raveled in the pytree's leaf order and
        concatenated, of the leaves' promoted dtype (float32 for an empty pytree);
        ``unravel(v)`` takes a 1-D vector of ``flat``'s size and returns a pytree of the same
        structure, each leaf of its original shape and dtype. Both directions are
        differentiable (a concatenation; slices, reshapes and casts).

    Raises:
        TypeError: for a leaf that is not numeric (naming its path); from ``unravel``, for a
            vector that is not 1-D.
        ValueError: from ``unravel``, for a vector of the wrong size.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> params = {"b": tnp.zeros(2), "w": tnp.ones((2, 2))}
        >>> flat, unravel = tg.ravel_pytree(params)
        >>> flat
        Tensor([0., 0., 1., 1., 1., 1.], dtype=float32)
        >>> unravel(flat * 2.0)["w"]
        Tensor([[2., 2.],
                [2., 2.]], dtype=float32)
    """
    leaves, treedef = tree_flatten(pytree)
    tensors = []
    for i, leaf in enumerate(leaves):
        try:
            tensors.append(tnp.asarray(leaf))
        except TypeError:
            path = tree_flatten_with_path(pytree, "pytree")[0][i]
            raise TypeError(f"ravel_pytree: leaf {path} is a {type(leaf).__name__}, not an "
                            "array or number") from None
    shapes = [t.shape for t in tensors]
    dtypes = [t.dtype for t in tensors]
    sizes = [math.prod(s) for s in shapes]
    dtype = np.result_type(*dtypes) if dtypes else np.dtype(np.float32)
    if tensors:
        flat = tnp.concatenate([tnp.ravel(tnp.astype(t, dtype)) for t in tensors])
    else:
        flat = tnp.zeros((0,), dtype=dtype)
    total = sum(sizes)

    def unravel(vector):
        v = tnp.asarray(vector)
        if v.ndim != 1:
            raise TypeError(f"unravel: expected a 1-D vector of size {total}, got shape "
                            f"{v.shape}")
        if v.shape[0] != total:
            raise ValueError(f"unravel: expected a vector of size {total} (the pytree's "
                             f"{len(shapes)} leaves), got size {v.shape[0]}")
        out, start = [], 0
        for shape, dt, n in zip(shapes, dtypes, sizes):
            piece = tnp.reshape(v[start:start + n], shape)
            out.append(tnp.astype(piece, dt) if piece.dtype != dt else piece)
            start += n
        return tree_unflatten(treedef, out)

    return flat, unravel


flatten = ravel_pytree  # HIPS autograd's name (autograd.misc.flatten)
