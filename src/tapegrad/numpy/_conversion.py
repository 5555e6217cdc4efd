"""NumPy's array conversions with layout or checking flags: :func:`asanyarray`,
:func:`ascontiguousarray`, :func:`asfortranarray`, :func:`asarray_chkfinite` and
:func:`require`. Tensors are immutable and own their data, so a layout request changes
nothing observable; each returns a Tensor as :func:`tapegrad.numpy.asarray` does
(differentiable: the identity, or a cast)."""

from __future__ import annotations

from tapegrad.core.tensor import Tensor
from tapegrad.numpy._core import asarray, stop_gradient
from tapegrad.numpy._shape import reshape
from tapegrad.ops._registry import ns as _ns

__all__ = ["asanyarray", "ascontiguousarray", "asfortranarray", "asarray_chkfinite", "require"]


def _at_least_1d(t: Tensor) -> Tensor:
    return reshape(t, (1,)) if t.ndim == 0 else t


def asanyarray(a, dtype=None, order=None, *, like=None, device=None) -> Tensor:
    """``a`` as a Tensor (NumPy ``asanyarray``; there are no array subclasses here): the same
    as :func:`tapegrad.numpy.asarray`.

    Args:
        a: Tensor, array, number or nested list (which may hold Tensors).
        dtype: Target dtype (a traced Tensor is cast differentiably).
        order: Accepted for NumPy's signature.
        like: Accepted for NumPy's signature (must be None).
        device: ``"cpu"`` or ``"cuda:N"``.

    Returns:
        Tensor; a Tensor of the right dtype and device is returned as it is.

    Raises:
        TypeError: for non-numeric data or a non-None ``like``.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.asanyarray([1, 2])
        Tensor([1, 2], dtype=int64)
    """
    if like is not None:
        raise TypeError("asanyarray: like= is not supported (tapegrad returns Tensors)")
    return asarray(a, dtype=dtype, order=order, device=device)


def ascontiguousarray(a, dtype=None, *, like=None) -> Tensor:
    """``a`` as a Tensor of at least one axis (NumPy ``ascontiguousarray``; a Tensor's memory
    layout is not observable, so only the 0-d case changes the result).

    Args:
        a: Tensor, array, number or nested list.
        dtype: Target dtype.
        like: Accepted for NumPy's signature (must be None).

    Returns:
        Tensor with ``max(a.ndim, 1)`` axes. Differentiable (a reshape, or a cast).

    Raises:
        TypeError: for non-numeric data or a non-None ``like``.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.ascontiguousarray(3.0).shape
        (1,)
    """
    if like is not None:
        raise TypeError("ascontiguousarray: like= is not supported (tapegrad returns Tensors)")
    return _at_least_1d(asarray(a, dtype=dtype))


def asfortranarray(a, dtype=None, *, like=None) -> Tensor:
    """``a`` as a Tensor of at least one axis (NumPy ``asfortranarray``); see
    :func:`ascontiguousarray`.

    Returns:
        Tensor with ``max(a.ndim, 1)`` axes. Differentiable.

    Raises:
        TypeError: for non-numeric data or a non-None ``like``.
    """
    if like is not None:
        raise TypeError("asfortranarray: like= is not supported (tapegrad returns Tensors)")
    return _at_least_1d(asarray(a, dtype=dtype))


def asarray_chkfinite(a, dtype=None, order=None) -> Tensor:
    """``a`` as a Tensor, checked to hold no NaN or infinity (NumPy ``asarray_chkfinite``).

    Args:
        a: Tensor, array, number or nested list.
        dtype: Target dtype.
        order: Accepted for NumPy's signature.

    Returns:
        Tensor (the identity on a Tensor: differentiable).

    Raises:
        ValueError: if an entry is NaN or infinite (a decision on the values, as NumPy's).

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.asarray_chkfinite([1.0, float("inf")])
        Traceback (most recent call last):
        ...
        ValueError: asarray_chkfinite: array must not contain infs or NaNs
    """
    t = asarray(a, dtype=dtype, order=order)
    if t.dtype.kind in "fc" and not bool(_ns.all(_ns.isfinite(stop_gradient(t)))):
        raise ValueError("asarray_chkfinite: array must not contain infs or NaNs")
    return t


_FLAGS = {"C": "C", "C_CONTIGUOUS": "C", "CONTIGUOUS": "C", "F": "F", "F_CONTIGUOUS": "F",
          "FORTRAN": "F", "A": "A", "ALIGNED": "A", "W": "W", "WRITEABLE": "W", "O": "O",
          "OWNDATA": "O", "E": "E", "ENSUREARRAY": "E"}


def require(a, dtype=None, requirements=None, *, like=None) -> Tensor:
    """``a`` as a Tensor of ``dtype`` meeting ``requirements`` (NumPy ``require``).

    Args:
        a: Tensor, array, number or nested list.
        dtype: Target dtype.
        requirements: Flags (a string or a list): ``"C"``, ``"F"``, ``"A"``, ``"O"``,
            ``"E"`` (and their long names) always hold for a Tensor (contiguous, aligned,
            owning its data, not a subclass); ``"W"`` (writeable) never does.
        like: Accepted for NumPy's signature (must be None).

    Returns:
        Tensor (the identity or a cast: differentiable).

    Raises:
        TypeError: for ``"W"``: Tensors are immutable (use ``x.at[idx].set(v)``); for a
            non-None ``like``.
        ValueError: for an unknown flag.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.require([1, 2], dtype="float64", requirements="CA").dtype
        dtype('float64')
    """
    if like is not None:
        raise TypeError("require: like= is not supported (tapegrad returns Tensors)")
    flags = [] if requirements is None else (
        list(requirements) if isinstance(requirements, str) and requirements.upper() not in
        _FLAGS else [requirements] if isinstance(requirements, str) else list(requirements))
    for f in flags:
        if str(f).upper() not in _FLAGS:
            raise ValueError(f"require: unknown requirement {f!r}; use C, F, A, W, O or E")
        if _FLAGS[str(f).upper()] == "W":
            raise TypeError("require: Tensors are immutable, so 'W' (writeable) cannot hold; "
                            "update with x.at[idx].set(v) instead")
    return asarray(a, dtype=dtype)
