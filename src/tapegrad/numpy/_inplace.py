"""NumPy's in-place writers (:func:`copyto`, :func:`fill_diagonal`, :func:`place`, :func:`put`,
:func:`put_along_axis`, :func:`putmask`): Tensors are immutable, so each raises a
``TypeError`` that shows the functional ``x.at[...]`` update computing the same result."""

from __future__ import annotations

from typing import NoReturn

__all__ = ["copyto", "fill_diagonal", "place", "put", "put_along_axis", "putmask"]


def _refuse(name: str, fix: str) -> NoReturn:
    raise TypeError(
        f"{name}: NumPy's {name} writes into its first argument in place, and Tensors are "
        f"immutable. Compute the new Tensor with a functional update instead: {fix}"
    )


def copyto(dst, src, casting="same_kind", where=True) -> NoReturn:
    """Not supported: NumPy's ``copyto`` writes into ``dst`` in place.

    Raises:
        TypeError: always, showing the functional form
            ``dst = tnp.where(where, tnp.astype(src, dst.dtype), dst)`` (or
            ``dst.at[...].set(src)``).
    """
    _refuse("copyto", "dst = tnp.where(where, tnp.astype(src, dst.dtype), dst), or "
            "dst = dst.at[idx].set(src) for part of it.")


def fill_diagonal(a, val, wrap=False) -> NoReturn:
    """Not supported: NumPy's ``fill_diagonal`` writes into ``a`` in place.

    Raises:
        TypeError: always, showing ``a = a.at[tnp.diag_indices_from(a)].set(val)``.
    """
    _refuse("fill_diagonal", "a = a.at[tnp.diag_indices_from(a)].set(val).")


def place(arr, mask, vals) -> NoReturn:
    """Not supported: NumPy's ``place`` writes into ``arr`` in place.

    Raises:
        TypeError: always, showing ``arr = arr.at[mask].set(values)`` (``values`` the first
            ``mask.sum()`` of ``vals``, repeated as needed).
    """
    _refuse("place", "arr = arr.at[mask].set(values), with values of length mask.sum() (NumPy "
            "repeats vals to that length).")


def put(a, ind, v, mode="raise") -> NoReturn:
    """Not supported: NumPy's ``put`` writes into ``a`` in place.

    Raises:
        TypeError: always, showing
            ``a = tnp.reshape(tnp.ravel(a).at[ind].set(v), a.shape)``.
    """
    _refuse("put", "a = tnp.reshape(tnp.ravel(a).at[ind].set(v), a.shape) (flat indices).")


def put_along_axis(arr, indices, values, axis) -> NoReturn:
    """Not supported: NumPy's ``put_along_axis`` writes into ``arr`` in place.

    Raises:
        TypeError: always, showing the ``.at[]`` update with the indices
            :func:`tapegrad.numpy.take_along_axis` reads.
    """
    _refuse("put_along_axis", "arr = arr.at[idx].set(values), with idx the index tuple that "
            "take_along_axis(arr, indices, axis) reads: tnp.indices broadcast along the other "
            "axes and indices along axis.")


def putmask(a, mask, values) -> NoReturn:
    """Not supported: NumPy's ``putmask`` writes into ``a`` in place.

    Raises:
        TypeError: always, showing ``a = tnp.where(mask, values, a)`` (``values`` broadcast
            to ``a``'s shape) or ``a = a.at[mask].set(...)``.
    """
    _refuse("putmask", "a = tnp.where(mask, values, a) (values of a's shape), or "
            "a = a.at[mask].set(values).")
