"""Gradient checks against central finite differences, in float64, to any order.

The reverse-mode check is the adjoint identity ``<u, J t> == <J^T u, t>`` for random tangents
``t`` and cotangents ``u``: ``J t`` is measured by central differences, ``J^T u`` comes from
:func:`tapegrad.vjp`. For order ``k`` the same check is applied to the function
``x -> vjp(f, x)[1](u)``, recursively, as JAX's ``check_grads`` does.

Complex leaves get complex tangents and cotangents, and the identity is the one JAX's
convention satisfies: ``Re<J t, u> == Re<t, conj(vjp(conj(u)))>`` (``<a, b> = sum(conj(a) b)``),
which holds for every real-differentiable function, holomorphic or not. Under it ``grad`` of a
real-valued ``f(z)``, ``z = x + iy``, is ``df/dx - i df/dy`` (JAX's and HIPS autograd's; the
conjugate of PyTorch's).
"""

from __future__ import annotations

import numpy as np

from tapegrad.core.tensor import Tensor
from tapegrad.core.tree import tree_flatten, tree_map, tree_unflatten
from tapegrad.transforms.reverse import vjp

__all__ = ["check_grads", "check_vjp", "numerical_jacobian", "numerical_jvp"]

_DEFAULT_TOL = {np.dtype("float32"): 2e-2, np.dtype("float64"): 1e-5}


_WIDE = {"f": np.float64, "c": np.complex128}


def _to64(x):
    if isinstance(x, Tensor):
        k = x.dtype.kind
        return Tensor(x.numpy().astype(_WIDE[k])) if k in _WIDE else x
    if isinstance(x, complex):
        return Tensor(np.asarray(x, dtype=np.complex128))
    if isinstance(x, (float, int)) and not isinstance(x, bool):
        return Tensor(np.asarray(x, dtype=np.float64))
    if isinstance(x, np.ndarray) and x.dtype.kind in _WIDE:
        return Tensor(x.astype(_WIDE[x.dtype.kind]))
    return x


def _arr(x) -> np.ndarray:
    a = np.asarray(x.numpy() if isinstance(x, Tensor) else x)
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


def _leaves64(tree):
    return [_arr(v) for v in tree_flatten(tree)[0]]


def _vdot(a_leaves, b_leaves) -> float:
    """``Re sum <a, b>`` over the leaves (``<a, b> = sum(conj(a) * b)``)."""
    return float(sum(np.real(np.vdot(a, b)) for a, b in zip(a_leaves, b_leaves)))


def _rand_like(rng, a: np.ndarray) -> np.ndarray:
    """Standard normal values of ``a``'s shape, complex (both parts) for a complex ``a``."""
    r = rng.standard_normal(np.shape(a))
    if np.iscomplexobj(a):
        r = r + 1j * rng.standard_normal(np.shape(a))
    return r


def _axpy(tree, tangent_leaves, eps):
    leaves, treedef = tree_flatten(tree)
    return tree_unflatten(
        treedef, [Tensor(_arr(v) + eps * t) for v, t in zip(leaves, tangent_leaves)]
    )


def numerical_jvp(f, args: tuple, tangents: list, eps: float = 1e-4, richardson: bool = True):
    """Directional derivative of ``f`` at ``args`` along ``tangents`` by central differences.

    With ``D(h) = (f(x + h t) - f(x - h t)) / 2h``, whose error is ``c2 h**2 + c4 h**4 + ...``,
    the default is Richardson's extrapolation ``(4 D(eps / 2) - D(eps)) / 3``: the ``h**2``
    term cancels, so the truncation error is ``O(eps**4)`` for four evaluations of ``f``
    instead of two, at about three times the rounding error of ``D(eps)``. A second derivative
    checked with ``eps = 1e-4`` is then limited by rounding (about ``1e-11`` relative), not by
    the curvature of ``f``. ``richardson=False`` gives ``D(eps)`` alone.

    Args:
        f: Function of the positional ``args`` (pytrees).
        args: Tuple of positional arguments.
        tangents: Flat list of float64 arrays, one per leaf of ``args``.
        eps: Step size.
        richardson: Extrapolate from ``D(eps)`` and ``D(eps / 2)`` (default) or not.

    Returns:
        Flat list of float64 arrays, one per output leaf.

    References:
        L. F. Richardson, "The deferred approach to the limit", Phil. Trans. R. Soc. A, 1927.
    """

    def central(h):
        plus = f(*_axpy(tuple(args), tangents, h))
        minus = f(*_axpy(tuple(args), tangents, -h))
        return [(p - m) / (2 * h) for p, m in zip(_leaves64(plus), _leaves64(minus))]

    coarse = central(eps)
    if not richardson:
        return coarse
    return [(4 * fine - c) / 3 for fine, c in zip(central(eps / 2), coarse)]


def numerical_jacobian(f, x, eps: float = 1e-6) -> np.ndarray:
    """Jacobian of ``f`` at ``x`` by central differences, in float64.

    Args:
        f: Function of one Tensor/array returning one Tensor/array.
        x: The point, of shape ``in_shape``.
        eps: Step size.

    Returns:
        NumPy float64 array of shape ``out_shape + in_shape``.
    """
    x0 = _arr(x)
    out_shape = np.shape(_arr(f(Tensor(x0))))
    jac = np.zeros(out_shape + x0.shape)
    flat = x0.reshape(-1)
    for i in range(flat.size):
        e = np.zeros_like(flat)
        e[i] = eps
        hi = _arr(f(Tensor((flat + e).reshape(x0.shape))))
        lo = _arr(f(Tensor((flat - e).reshape(x0.shape))))
        jac.reshape(out_shape + (-1,))[..., i] = (hi - lo) / (2 * eps)
    return jac


def check_vjp(f, args, atol=None, rtol=None, eps=None, seed=0) -> None:
    """Check ``vjp(f, *args)`` against finite differences once (order 1).

    Raises:
        AssertionError: naming both sides of ``<u, J t> == <J^T u, t>`` when they differ.
    """
    rng = np.random.default_rng(seed)
    args = tuple(tree_map(_to64, a) for a in args)
    eps = 1e-4 if eps is None else eps
    in_leaves = _leaves64(args)
    tangents = [_rand_like(rng, v) for v in in_leaves]
    out, vjp_fn = vjp(f, *args)
    out_leaves, out_tree = tree_flatten(out)
    cts = [_rand_like(rng, _arr(o)) for o in out_leaves]
    ct_tree = tree_unflatten(
        out_tree,
        [
            Tensor(np.conj(c).astype(o.dtype if isinstance(o, Tensor) else c.dtype))
            for c, o in zip(cts, out_leaves)
        ],
    )
    num = _vdot(numerical_jvp(f, args, tangents, eps), cts)
    ana = _vdot(tangents, [np.conj(v) for v in _leaves64(vjp_fn(ct_tree))])
    atol = 1e-6 if atol is None else atol
    rtol = 1e-5 if rtol is None else rtol
    scale = max(abs(num), abs(ana))
    if not abs(num - ana) <= atol + rtol * scale:
        raise AssertionError(
            f"check_grads: reverse mode disagrees with finite differences: <J^T u, t> = {ana!r} "
            f"but <u, J t> ~= {num!r} (|diff| = {abs(num - ana):.3g}, atol={atol}, rtol={rtol})"
        )


def check_grads(
    f, args, order: int = 2, modes=("rev",), atol=None, rtol=None, eps=None, seed: int = 0
) -> None:
    """Check ``f``'s derivatives against finite differences in float64, to ``order``.

    Floating leaves of ``args`` are converted to float64 first. At each order the adjoint
    identity ``<u, J t> == <J^T u, t>`` is tested with random tangents ``t`` and cotangents
    ``u`` (drawn from ``seed``); order ``k`` differentiates the order-``k-1`` vjp.

    Args:
        f: Function of the positional ``args`` (pytrees of Tensors/arrays/numbers) returning a
            pytree of Tensors.
        args: Tuple (or list) of positional arguments.
        order: Highest derivative order to check (1, 2, 3, ...).
        modes: Which modes to check; ``"rev"`` (reverse mode, vjp) is supported, ``"fwd"``
            when forward mode is available.
        atol, rtol: Tolerances on the scalar identity (defaults 1e-6 and 1e-5).
        eps: Finite-difference step (default 1e-4); the differences are central and
            Richardson-extrapolated (:func:`numerical_jvp`), accurate to ``O(eps**4)``.
        seed: Seed of the random tangents and cotangents.

    Raises:
        AssertionError: if an identity fails, with both values.
        ValueError: for an unknown mode or ``order < 1``.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> from tapegrad.testing import check_grads
        >>> check_grads(lambda x: tnp.tanh(x) * x, (tg.Tensor([0.1, 0.5]),), order=2)
    """
    if order < 1:
        raise ValueError(f"check_grads: order must be >= 1, got {order}")
    modes = (modes,) if isinstance(modes, str) else tuple(modes)
    for m in modes:
        if m not in ("rev", "fwd"):
            raise ValueError(f"check_grads: unknown mode {m!r}; use 'rev' and/or 'fwd'")
    args = tuple(tree_map(_to64, a) for a in args)
    if "fwd" in modes:
        _check_fwd(f, args, order, atol, rtol, eps, seed)
    if "rev" not in modes:
        return
    check_vjp(f, args, atol, rtol, eps, seed)
    if order > 1:
        rng = np.random.default_rng(seed + 1)
        out = f(*args)
        out_leaves, out_tree = tree_flatten(out)
        u = tree_unflatten(out_tree, [Tensor(_rand_like(rng, _arr(o))) for o in out_leaves])

        def pulled(*a):
            return vjp(f, *a)[1](u)

        check_grads(pulled, args, order - 1, ("rev",), atol, rtol, eps, seed + 2)


def _check_fwd(f, args, order, atol, rtol, eps, seed):
    try:
        from tapegrad.transforms.forward import jvp
    except ImportError as e:  # pragma: no cover - until forward mode lands
        raise ValueError("check_grads: forward mode ('fwd') is not available") from e
    rng = np.random.default_rng(seed + 7)
    in_leaves, treedef = tree_flatten(args)
    tangents = [_rand_like(rng, _arr(v)) for v in in_leaves]
    t_tree = tree_unflatten(treedef, [Tensor(t) for t in tangents])
    _, t_out = jvp(f, args, tuple(t_tree))
    num = numerical_jvp(f, args, tangents, 1e-4 if eps is None else eps)
    ana = _leaves64(t_out)
    for a, n in zip(ana, num):
        np.testing.assert_allclose(
            a,
            n,
            rtol=1e-5 if rtol is None else rtol,
            atol=1e-6 if atol is None else atol,
            err_msg="check_grads: forward mode (jvp) vs finite differences",
        )
    if order > 1:

        def tangent_out(*a):
            return jvp(f, a, tuple(t_tree))[1]

        _check_fwd(tangent_out, args, order - 1, atol, rtol, eps, seed + 3)
