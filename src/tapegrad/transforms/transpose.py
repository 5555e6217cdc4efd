"""``linear_transpose``: the transpose of a linear function, as a function (JAX's
``jax.linear_transpose``).

A linear ``f`` equals its own linearization at zero, so its transpose is the vjp of ``f`` at
zero: ``f`` is recorded once, at zeros of the primals' shapes and dtypes, and the returned
function replays that record backward (no primal work per call). Two checks guard against a
function that is not linear: ``f(0)`` must be exactly zero (an affine offset is not linear),
and at one fixed probe direction ``u`` (deterministic, entries of both signs) ``f(u)`` must
equal ``J(0) u``, the derivative at zero along ``u`` (a nonlinearity such as ``x * x``,
``sin`` or ``relu`` makes them differ). JAX checks linearity structurally, op by op; the probe
catches what a structural check does and more (``x * x``), but a function that is linear
along the probe direction only can pass it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tapegrad.core import dtypes as _tg_dtypes
from tapegrad.core.backend import backend_of
from tapegrad.core.tensor import Tensor, const
from tapegrad.core.tree import tree_flatten, tree_unflatten
from tapegrad.transforms.forward import jvp
from tapegrad.transforms.reverse import check_callable, vjp

__all__ = ["linear_transpose"]


def _aval(leaf, i: int):
    """``(shape, dtype, like)`` of a primal leaf: a Tensor, array, number, or an object with
    ``shape`` and ``dtype`` (such as ``jax.ShapeDtypeStruct``)."""
    if isinstance(leaf, Tensor):
        return leaf.shape, leaf.dtype, leaf
    if isinstance(leaf, bool):
        dtype = np.dtype(bool)
        return (), dtype, None
    if isinstance(leaf, (int, float, complex)):
        return (), Tensor(leaf).dtype, None
    shape, dtype = getattr(leaf, "shape", None), getattr(leaf, "dtype", None)
    if shape is None or dtype is None:
        raise TypeError(f"linear_transpose: primal leaf {i} is a {type(leaf).__name__}; "
                        "expected a Tensor, an array, a number, or an object with shape and "
                        "dtype")
    return tuple(shape), np.dtype(dtype), leaf if hasattr(leaf, "__array__") or hasattr(
        leaf, "__cuda_array_interface__") else None


def _zeros(shape, dtype, like):
    xp = np
    if like is not None:
        arr = like._concrete() if isinstance(like, Tensor) else like
        xp = backend_of(arr) if hasattr(arr, "shape") else np
    return const(xp.zeros(shape, dtype))


def _probe(shape, dtype, k: int, like):
    """A fixed direction with entries of both signs, the same on every run."""
    n = int(np.prod(shape))
    base = 0.5 + ((np.arange(n) * 0.6180339887 + 0.3 * k) % 1.0)
    sign = np.where(np.arange(n) % 3 == 1, -1.0, 1.0)
    v = (base * sign).reshape(shape)
    if np.dtype(dtype).kind == "c":
        v = v + 1j * np.roll(v, 1)
    v = v.astype(dtype)
    if like is not None:
        arr = like._concrete() if isinstance(like, Tensor) else like
        if hasattr(arr, "shape") and type(arr) is not np.ndarray:
            v = backend_of(arr).asarray(v)
    return const(v)


def _value(t) -> np.ndarray:
    """The value of an output leaf, read for the linearity checks without any transform
    taking note (a batched value gives one example's)."""
    t = t if isinstance(t, Tensor) else Tensor(t)
    a = t._concrete()
    return np.asarray(a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else a)


def linear_transpose(fun: Callable, *primals) -> Callable:
    """The transpose of the linear function ``fun``, as a function of output cotangents.

    Args:
        fun: A function linear in its positional arguments (pytrees of floating or complex
            arrays); values it closes over are constants (differentiable by enclosing
            transforms).
        *primals: Example arguments: only their pytree structure, shapes and dtypes are used
            (Tensors, arrays, numbers, or objects with ``shape`` and ``dtype``).

    Returns:
        ``transpose_fn(out_cotangent)``: for a cotangent with ``fun``'s output structure,
        shapes and dtypes, a tuple with one cotangent pytree per primal (their structure,
        shapes and dtypes): ``<transpose_fn(ct), x> == <ct, fun(x)>``. For complex
        functions it is the transpose, not the conjugate transpose (as JAX). It is built of
        tapegrad operations, so it can be jitted, vmapped and differentiated.

    Raises:
        TypeError: if ``fun`` is not callable; a primal or output leaf is not floating or
            complex; at a call, if the cotangent's structure or a leaf's dtype differs from
            the output's.
        ValueError: if ``fun`` is detectably not linear: ``fun(0)`` is not zero (an offset),
            or ``fun(u)`` differs from its derivative at zero along a fixed probe ``u`` (see
            the module docstring); at a call, if a cotangent leaf's shape differs.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> A = tg.Tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> f_t = tg.linear_transpose(lambda x: A @ x, tg.Tensor([0.0, 0.0]))
        >>> f_t(tg.Tensor([1.0, 0.0]))  # A.T @ [1, 0]
        (Tensor([1., 2.], dtype=float32),)

    References:
        JAX, ``jax.linear_transpose``.
    """
    check_callable(fun, "linear_transpose")
    leaves, in_tree = tree_flatten(primals)
    zeros, probes = [], []
    for i, leaf in enumerate(leaves):
        shape, dtype, like = _aval(leaf, i)
        if dtype.kind not in "fcV":
            raise TypeError(f"linear_transpose: primal leaf {i} has dtype {dtype}; a linear "
                            "function is transposed over floating or complex inputs")
        zeros.append(_zeros(shape, dtype, like))
        probes.append(_probe(shape, dtype, i, like))
    z = tree_unflatten(in_tree, zeros)
    out0, pull = vjp(fun, *z)
    out_leaves, out_tree = tree_flatten(out0)
    out_avals = []
    for j, o in enumerate(out_leaves):
        if not (isinstance(o, Tensor) and o.dtype.kind in "fcV"):
            what = f"dtype {o.dtype}" if isinstance(o, Tensor) else type(o).__name__
            raise TypeError(f"linear_transpose: output leaf {j} has {what}; a linear function "
                            "returns floating or complex arrays")
        out_avals.append((o.shape, o.dtype))
        v = _value(o)
        if v.size and not np.all(v == 0):
            raise ValueError(
                f"linear_transpose: fun is not linear: fun(0) is not zero (output leaf {j} "
                f"holds {np.max(np.abs(v)):.3g} at most), so it has an offset (an affine "
                "function). Subtract fun(0) first, or transpose the linear part only."
            )
    _check_probe(fun, z, tree_unflatten(in_tree, probes))

    def transpose_fn(out_cotangent):
        ct_leaves, ct_tree = tree_flatten(out_cotangent)
        if ct_tree != out_tree:
            raise TypeError(f"linear_transpose: cotangent has structure {ct_tree}, but fun's "
                            f"output has {out_tree}")
        cts = []
        for j, (c, (shape, dtype)) in enumerate(zip(ct_leaves, out_avals)):
            c = c if isinstance(c, Tensor) else (
                const(np.asarray(c, dtype)) if isinstance(c, (int, float, complex))
                and not isinstance(c, bool) else Tensor(c))
            if c.shape != tuple(shape):
                raise ValueError(f"linear_transpose: cotangent leaf {j} has shape {c.shape}, "
                                 f"but the output has shape {tuple(shape)}")
            if c.dtype != dtype:
                raise TypeError(f"linear_transpose: cotangent leaf {j} has dtype {c.dtype}, "
                                f"but the output has dtype {dtype}")
            cts.append(c)
        return pull(tree_unflatten(out_tree, cts))

    transpose_fn.__name__ = f"transpose_{getattr(fun, '__name__', 'fun')}"
    return transpose_fn


def _check_probe(fun, zeros, probes) -> None:
    """Raise ValueError unless ``fun(u) == J(0) u`` at the probe ``u``."""
    _, t_out = jvp(fun, tuple(zeros), tuple(probes))
    f_u = fun(*probes)
    got, want = tree_flatten(f_u)[0], tree_flatten(t_out)[0]
    for j, (a, b) in enumerate(zip(got, want)):
        va, vb = _value(a), _value(b)
        if va.shape != vb.shape:
            raise ValueError(f"linear_transpose: fun is not linear: output leaf {j} changes "
                             "shape with the input's values")
        eps = _tg_dtypes.finfo(vb.dtype).eps if vb.dtype.kind in "fcV" else 1e-7
        scale = max(float(np.max(np.abs(va), initial=0.0)), float(np.max(np.abs(vb),
                                                                          initial=0.0)))
        err = float(np.max(np.abs(va - vb), initial=0.0))
        if not err <= np.sqrt(eps) * max(scale, _tg_dtypes.finfo(vb.dtype).tiny * 1e10):
            raise ValueError(
                f"linear_transpose: fun is not linear: at a probe input u, output leaf {j} of "
                f"fun(u) differs from the derivative at zero along u by {err:.3g} (relative "
                f"{err / max(scale, 1e-300):.3g}); a linear function equals its derivative. "
                "Transpose the linear part only (for example the jvp of f: "
                "tg.linearize(f, x)[1])."
            )
