"""Checking a batching rule: ``vmap(f)`` against ``f`` applied example by example."""

from __future__ import annotations

import warnings

import numpy as np

from tapegrad.core.tensor import Tensor
from tapegrad.core.tree import tree_flatten, tree_unflatten
from tapegrad.transforms.vmap import vmap

__all__ = ["check_vmap"]


def _example(leaf, ax, i):
    if ax is None:
        return leaf
    arr = leaf.numpy() if isinstance(leaf, Tensor) else np.asarray(leaf)
    return Tensor(np.take(arr, i, axis=ax))


def check_vmap(f, args: tuple, in_axes=0, out_axes=0, atol: float = 1e-10, rtol: float = 1e-7,
               allow_loop: bool = False) -> None:
    """Check that ``vmap(f, in_axes, out_axes)(*args)`` equals ``f`` run on each example in a
    Python loop and stacked at ``out_axes``: values, shapes and dtypes. With an empty batch only
    shapes and dtypes are compared, against ``f`` on one stand-in example: zeros, or where
    ``f`` raises a ValueError on zeros (a singular solve), identity matrices on the last two
    axes (ones below two axes).

    Args:
        f: The per-example function (positional pytrees of Tensors in, a pytree out).
        args: The batched arguments, a tuple.
        in_axes: As :func:`tapegrad.vmap`: an int, None, or a tuple with one entry per
            argument (an int or None; a pytree prefix is not supported here).
        out_axes: An int: where the batch axis of every output leaf is.
        atol, rtol: Tolerances of the value comparison.
        allow_loop: Whether an op may fall back to the per-example loop (its warning is
            otherwise turned into a failure: every op in ``f`` must have a batching rule).

    Raises:
        AssertionError: naming the output leaf and the largest difference, on a mismatch of
            values, shapes or dtypes, or when an op has no batching rule (unless
            ``allow_loop``).
        ValueError: if the batched arguments disagree on the batch size.
    """
    args = tuple(args)
    axes = in_axes if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
    sizes = {(a.shape if isinstance(a, Tensor) else np.shape(a))[ax]
             for a, ax in zip(args, axes) if ax is not None}
    if len(sizes) != 1:
        raise ValueError(f"check_vmap: the batched arguments need one batch size, got {sizes}")
    size = sizes.pop()
    with warnings.catch_warnings():
        if not allow_loop:
            warnings.filterwarnings("error", message="vmap: .* has no batching rule")
        try:
            got = vmap(f, in_axes=tuple(axes), out_axes=out_axes)(*args)
        except UserWarning as w:
            raise AssertionError(f"check_vmap: {w}") from None
    got_leaves, got_tree = tree_flatten(got)
    rows = [tree_flatten(f(*[_example(a, ax, i) for a, ax in zip(args, axes)]))
            for i in range(size)]
    for j, g in enumerate(got_leaves):
        g = g.numpy() if isinstance(g, Tensor) else np.asarray(g)
        if size:
            want = np.stack([np.asarray(r[0][j].numpy() if isinstance(r[0][j], Tensor)
                                        else r[0][j]) for r in rows], axis=out_axes)
        else:  # an empty batch: only the shape and dtype can be compared (of one stand-in
            # example: zeros, or identity matrices where f rejects zeros, a singular solve)
            ex = _stand_in(f, args, axes)
            e = np.asarray(tree_flatten(ex)[0][j].numpy())
            ax = out_axes % (e.ndim + 1)
            want = np.zeros(e.shape[:ax] + (0,) + e.shape[ax:], e.dtype)
        if g.shape != want.shape or g.dtype != want.dtype:
            raise AssertionError(
                f"check_vmap: output leaf {j}: vmap gave shape {g.shape} dtype {g.dtype}, the "
                f"loop shape {want.shape} dtype {want.dtype}")
        if not np.allclose(g, want, atol=atol, rtol=rtol, equal_nan=True):
            diff = np.max(np.abs(g.astype(np.complex128) - want))
            raise AssertionError(
                f"check_vmap: output leaf {j} differs from the loop by up to {diff:.3g}")
    if size:
        tree_unflatten(got_tree, got_leaves)  # same structure as one example's result
        if got_tree != rows[0][1]:
            raise AssertionError(f"check_vmap: output structure {got_tree} differs from one "
                                 f"example's {rows[0][1]}")


def _stand_in(f, args, axes):
    """``f`` on one stand-in example of an empty batch: zeros, or where ``f`` rejects zeros
    (a ValueError such as LinAlgError for a singular matrix), identity matrices."""
    def run(fill):
        return f(*[_example(a, ax, 0) if ax is None else
                   Tensor(fill(tuple(np.delete(np.shape(a), ax)), _dtype(a)))
                   for a, ax in zip(args, axes)])

    try:
        return run(np.zeros)
    except (ValueError, ArithmeticError):
        return run(_filler)


def _filler(shape, dtype) -> np.ndarray:
    """A stand-in example for an empty batch, valid where zeros are not (a solve's matrix):
    identity matrices on the last two axes, ones below two axes."""
    shape = tuple(int(n) for n in shape)
    if len(shape) < 2:
        return np.ones(shape, dtype)
    return np.broadcast_to(np.eye(shape[-2], shape[-1], dtype=dtype), shape).copy()


def _dtype(a):
    return a.dtype if hasattr(a, "dtype") else np.asarray(a).dtype
