"""Jacobians, Hessians and their products, built on the modes of differentiation: ``jacfwd``
(forward mode under ``vmap``), ``jacrev`` / ``jacobian`` (reverse mode under ``vmap``),
``hessian`` (forward over reverse), ``hvp`` and HIPS autograd's ``elementwise_grad``.

References:
    Griewank and Walther, "Evaluating Derivatives", 2nd ed., SIAM 2008.
    Bradbury et al., JAX (semantics and names of jacfwd, jacrev, hessian).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tapegrad.core.backend import backend_of
from tapegrad.core.tensor import Tensor, const
from tapegrad.core.tree import tree_flatten, tree_unflatten
from tapegrad.transforms.forward import _linearize, _zeros, jvp
from tapegrad.transforms.reverse import (
    as_primal,
    check_argnums,
    check_callable,
    check_output_dtype,
    grad,
    select_argnums,
    vjp,
)
from tapegrad.transforms.vmap import vmap

__all__ = ["jacfwd", "jacrev", "jacobian", "hessian", "hvp", "elementwise_grad"]


# -- Jacobians ---------------------------------------------------------------------------------
def _check_outputs(p_out, out_tree, who):
    for i, o in enumerate(p_out):
        if not isinstance(o, Tensor):
            raise TypeError(f"{who}: output leaf {i} of {out_tree} is a {type(o).__name__}; a "
                            "Jacobian needs the function to return a pytree of Tensors or arrays.")


def _basis(leaves) -> tuple:
    """The standard basis of the flattened ``leaves``, one batch of ``n = sum(sizes)``
    directions: per leaf a constant of shape ``(n, *leaf.shape)`` (its rows one-hot where they
    fall in that leaf, zero elsewhere), and the leaves' offsets into the ``n`` rows."""
    offsets, n = [], 0
    for leaf in leaves:
        offsets.append(n)
        n += leaf.size
    out = []
    for leaf, off in zip(leaves, offsets):
        e = backend_of(leaf._concrete()).zeros((n, leaf.size), leaf.dtype)
        e[off:off + leaf.size] = backend_of(e).eye(leaf.size, dtype=leaf.dtype)
        out.append(const(e.reshape((n,) + leaf.shape)))
    return out, offsets


def _assemble(blocks, out_tree, diff_tree, argnums):
    """``blocks[j][k]``: Jacobian of output leaf j w.r.t. input leaf k -> JAX's nesting."""
    per_out = []
    for row in blocks:
        ins = tree_unflatten(diff_tree, row)
        per_out.append(ins[0] if isinstance(argnums, int) else tuple(ins))
    return tree_unflatten(out_tree, per_out)


def jacfwd(
    fun, argnums: int | tuple[int, ...] = 0, has_aux: bool = False, holomorphic: bool = False
) -> Callable[..., Any]:
    """Jacobian of ``fun`` by forward mode: one tangent pass over all input directions.

    ``fun`` is linearized once (:func:`linearize`), then the tangent program runs once under
    :func:`~tapegrad.vmap` on the whole standard basis of the selected inputs (no Python loop
    over basis vectors). Prefer it to :func:`jacrev` when there are fewer inputs than outputs.

    Args:
        fun: Function returning a pytree of Tensors (or ``(out, aux)`` with ``has_aux``).
        argnums: Int or tuple of ints: the positional arguments to differentiate.
        has_aux: ``fun`` returns ``(out, aux)``; the result is then ``(jacobian, aux)``.
        holomorphic: ``fun`` is holomorphic in complex inputs (and returns complex outputs):
            the entries are complex derivatives ``d out_i / d z_j``, as JAX's
            ``holomorphic=True``. Without it the inputs must be real (JAX's rule: a complex
            input has two real directions per entry, which one column cannot hold).

    Returns:
        A function with ``fun``'s signature returning the Jacobian: ``fun``'s output pytree
        with each leaf of shape ``out_shape`` replaced by the selected argument's pytree whose
        leaves have shape ``out_shape + in_shape`` (a tuple of such pytrees for a tuple
        ``argnums``), as JAX's ``jacfwd``. Dtypes are the outputs'.

    Raises:
        TypeError: for a non-callable ``fun`` (when the transform is made), a bad
            ``argnums``, integer inputs, or non-array outputs; complex inputs without
            ``holomorphic=True`` (the message names it); with ``holomorphic=True``, real
            inputs or real outputs.
        ValueError: if an ``argnums`` entry is out of range.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> tg.jacfwd(lambda x: x * x)(tg.Tensor([1.0, 2.0]))
        Tensor([[2., 0.],
                [0., 4.]], dtype=float32)
    """
    check_callable(fun, "jacfwd")
    check_argnums(argnums, "jacfwd")

    def jacfwd_f(*args, **kwargs):
        _, diff, partial = select_argnums(fun, argnums, args, kwargs, "jacfwd")
        out, jvp_fn, aux = _linearize(partial, diff, has_aux, "jacfwd",
                                      "c" if holomorphic else "fV")
        p_out, out_tree = tree_flatten(out)
        _check_outputs(p_out, out_tree, "jacfwd")
        if holomorphic:
            for i, o in enumerate(p_out):
                check_output_dtype(o, f"output leaf {i}", "jacfwd", True)
        in_leaves, diff_tree = tree_flatten(diff)
        prims = [v if isinstance(v, Tensor) else Tensor(v) for v in in_leaves]
        basis, offsets = _basis(prims)
        n = sum(p.size for p in prims)
        if n:  # every column at once: the tangent program, batched over the basis
            cols = tree_flatten(vmap(jvp_fn)(*tree_unflatten(diff_tree, basis)))[0]
        blocks = []
        for j, o in enumerate(p_out):
            row = []
            for p, off in zip(prims, offsets):
                shape = o.shape + p.shape
                if not (n and o.size and p.size):
                    row.append(_zeros(shape, o.dtype, o))
                    continue
                c = cols[j][off:off + p.size]  # (p.size, *o.shape): basis along the input
                row.append(c.transpose(tuple(range(1, c.ndim)) + (0,)).reshape(shape))
            blocks.append(row)
        jac = _assemble(blocks, out_tree, diff_tree, argnums)
        return (jac, aux) if has_aux else jac

    jacfwd_f.__name__ = f"jacfwd_{getattr(fun, '__name__', 'fun')}"
    return jacfwd_f


def jacrev(
    fun, argnums: int | tuple[int, ...] = 0, has_aux: bool = False, holomorphic: bool = False
) -> Callable[..., Any]:
    """Jacobian of ``fun`` by reverse mode: one backward pass over all output directions.

    ``fun`` runs once under :func:`~tapegrad.vjp`; its ``vjp_fn`` runs once under
    :func:`~tapegrad.vmap` on the whole standard basis of the outputs (no Python loop over
    basis vectors). Prefer it to :func:`jacfwd` when there are fewer outputs than inputs.

    Args:
        fun: Function returning a pytree of Tensors (or ``(out, aux)`` with ``has_aux``).
        argnums: Int or tuple of ints: the positional arguments to differentiate.
        has_aux: ``fun`` returns ``(out, aux)``; the result is then ``(jacobian, aux)``.
        holomorphic: ``fun`` is holomorphic in complex inputs and returns complex outputs: the
            entries are complex derivatives ``d out_i / d z_j`` (JAX's ``holomorphic=True``).
            Without it the outputs must be real; complex inputs of a real ``fun`` then get
            JAX's gradient convention (``df/dx - i df/dy`` per entry, as :func:`grad`).

    Returns:
        A function with ``fun``'s signature returning the Jacobian, nested as in
        :func:`jacfwd` (leaves of shape ``out_shape + in_shape``). Dtypes are the inputs'.

    Raises:
        TypeError: for a non-callable ``fun`` (when the transform is made), a bad
            ``argnums``, integer inputs, or non-array outputs; complex outputs without
            ``holomorphic=True`` (the message names it); with ``holomorphic=True``, real
            inputs or real outputs.
        ValueError: if an ``argnums`` entry is out of range.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> tg.jacrev(lambda x: tnp.sum(x * x))(tg.Tensor([1.0, 2.0]))
        Tensor([2., 4.], dtype=float32)
    """
    check_callable(fun, "jacrev")
    check_argnums(argnums, "jacrev")

    def jacrev_f(*args, **kwargs):
        _, diff, partial = select_argnums(fun, argnums, args, kwargs, "jacrev")
        try:
            # every selected leaf floating (complex with holomorphic), before running fun: a
            # Module's key, which vjp would hold constant, has no row in a Jacobian
            d_leaves = tree_flatten(diff)[0]
            names = [f"primals[{i}]" for i in range(len(diff))]
            for i, v in enumerate(d_leaves):
                as_primal(v, i, diff, names, "jacrev", kinds="c" if holomorphic else "fcV")
            res = vjp(partial, *diff, has_aux=has_aux)
        except TypeError as e:
            if not str(e).startswith("vjp:"):
                raise
            raise TypeError("jacrev:" + str(e)[4:]) from e
        out, vjp_fn = res[0], res[1]
        aux = res[2] if has_aux else None
        p_out, out_tree = tree_flatten(out)
        _check_outputs(p_out, out_tree, "jacrev")
        for i, o in enumerate(p_out):
            check_output_dtype(o, f"output leaf {i}", "jacrev", holomorphic)
        in_leaves, diff_tree = tree_flatten(diff)
        prims = [v if isinstance(v, Tensor) else Tensor(v) for v in in_leaves]
        basis, offsets = _basis(p_out)
        n = sum(o.size for o in p_out)
        if n:  # every row at once: the backward pass, batched over the basis
            rows = tree_flatten(vmap(vjp_fn)(tree_unflatten(out_tree, basis)))[0]
        blocks = []
        for o, off in zip(p_out, offsets):
            row = []
            for k, p in enumerate(prims):
                shape = o.shape + p.shape
                if not (n and o.size and p.size):
                    row.append(_zeros(shape, p.dtype, p))
                    continue
                row.append(rows[k][off:off + o.size].reshape(shape))
            blocks.append(row)
        jac = _assemble(blocks, out_tree, diff_tree, argnums)
        return (jac, aux) if has_aux else jac

    jacrev_f.__name__ = f"jacrev_{getattr(fun, '__name__', 'fun')}"
    return jacrev_f


#: Alias of :func:`jacrev`, as in JAX.
jacobian = jacrev


def hessian(
    fun, argnums: int | tuple[int, ...] = 0, has_aux: bool = False, holomorphic: bool = False
) -> Callable[..., Any]:
    """Hessian of scalar ``fun``: ``jacfwd(jacrev(fun))`` (forward-over-reverse).

    Args:
        fun: Function returning a real scalar Tensor (or ``(value, aux)`` with ``has_aux``);
            with ``holomorphic=True``, a complex scalar of complex inputs.
        argnums: Int or tuple of ints: the positional arguments to differentiate.
        has_aux: ``fun`` returns ``(value, aux)``; the result is then ``(hessian, aux)``.
        holomorphic: The complex second derivatives ``d^2 f / dz_i dz_j`` of a holomorphic
            ``fun`` (passed to both :func:`jacrev` and :func:`jacfwd`, as JAX). Without it the
            inputs must be real.

    Returns:
        A function with ``fun``'s signature returning the Hessian: for one array input of shape
        ``in_shape``, a Tensor of shape ``in_shape + in_shape``; for pytrees, nested as
        ``jacfwd(jacrev(fun))``.

    Raises:
        TypeError / ValueError: as :func:`jacfwd` and :func:`jacrev` (a non-callable ``fun``
            when the transform is made).

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> tg.hessian(lambda x: tnp.sum(x ** 3))(tg.Tensor([1.0, 2.0]))
        Tensor([[ 6.,  0.],
                [ 0., 12.]], dtype=float32)
    """
    check_callable(fun, "hessian")
    return jacfwd(jacrev(fun, argnums, has_aux, holomorphic), argnums, has_aux, holomorphic)


def hvp(fun, primals, tangents):
    """Hessian-vector product ``H(primals) @ tangents`` without forming the Hessian, as the
    gradient of the directional derivative (reverse-over-forward).

    Costs one forward pass with its tangent pass, then one backward pass through both
    (Pearlmutter, "Fast exact multiplication by the Hessian", Neural Computation 1994).

    Args:
        fun: Scalar-valued function (shape ``()``, floating) of ``len(primals)`` positional
            pytrees; the gradient is taken with respect to all of them.
        primals: Tuple (or list) of positional arguments (floating leaves).
        tangents: Tuple (or list) with the primals' structure, shapes and dtypes.

    Returns:
        ``H @ tangents`` with the structure of ``primals[0]`` for one primal, else a tuple with
        one pytree per primal; leaves have the primals' shapes and dtypes.

    Raises:
        TypeError: if ``fun`` is not callable or ``primals`` is not a non-empty tuple or
            list; as :func:`jvp` for bad tangents.
        ValueError: as :func:`jvp` for tangent shapes; if ``fun`` does not return a real scalar.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> tg.hvp(lambda x: tnp.sum(x ** 3), (tg.Tensor([1.0, 2.0]),), (tg.Tensor([1.0, 0.0]),))
        Tensor([6., 0.], dtype=float32)
    """
    check_callable(fun, "hvp")
    if not isinstance(primals, (tuple, list)) or not primals:
        raise TypeError(
            "hvp: primals must be a non-empty tuple or list of positional arguments, got "
            f"{primals!r:.60}"
        )
    n = len(primals)

    def directional_derivative(*ps):
        out, t_out = jvp(fun, ps, tangents)
        if not (isinstance(out, Tensor) and out.ndim == 0 and out.dtype.kind in "fV"):
            desc = (f"shape {out.shape} and dtype {out.dtype}" if isinstance(out, Tensor)
                    else type(out).__name__)
            raise ValueError(
                f"hvp: fun must return a real scalar (shape () and a floating dtype), got {desc}"
            )
        return t_out

    h = grad(directional_derivative, argnums=tuple(range(n)))(*primals)
    return h[0] if n == 1 else h


def elementwise_grad(fun, argnums=0, has_aux: bool = False):
    """The derivative of an elementwise ``fun`` at every element (HIPS autograd's name).

    Computes the sum of each column of ``fun``'s Jacobian, ``vjp(fun, x)(ones)``, in one
    backward pass, exactly as autograd's ``elementwise_grad``. When ``fun`` acts elementwise
    (the Jacobian is diagonal) that is the derivative at each element, the same values as
    ``vmap(grad(fun))`` over the flattened elements, without running ``fun`` per element.

    Args:
        fun: Function of positional pytrees returning one Tensor (or ``(out, aux)`` with
            ``has_aux``), floating.
        argnums: Int or tuple of ints: the positional arguments to differentiate.
        has_aux: ``fun`` returns ``(out, aux)``; the result is then ``(grads, aux)``.

    Returns:
        A function with ``fun``'s signature returning, for each selected argument, a Tensor of
        its shape and dtype (a tuple of them for a tuple ``argnums``).

    Raises:
        TypeError: for a non-callable ``fun`` (when the transform is made), a bad
            ``argnums``, or a ``fun`` that does not return one floating Tensor.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> tg.elementwise_grad(tnp.tanh)(tg.Tensor([0.0, 1.0]))
        Tensor([1.        , 0.41997433], dtype=float32)
    """
    check_callable(fun, "elementwise_grad")
    check_argnums(argnums, "elementwise_grad")

    def elementwise_grad_f(*args, **kwargs):
        pos, diff, partial = select_argnums(fun, argnums, args, kwargs, "elementwise_grad")
        res = vjp(partial, *diff, has_aux=has_aux)
        out = res[0]
        if not (isinstance(out, Tensor) and out.dtype.kind in "fcV"):
            raise TypeError(
                "elementwise_grad: fun must return one floating Tensor, got "
                + (f"dtype {out.dtype}" if isinstance(out, Tensor) else type(out).__name__)
            )
        ones = const(backend_of(out._concrete()).ones(out.shape, out.dtype))
        g = res[1](ones)
        g = g[pos[0]] if isinstance(argnums, int) else tuple(g[p] for p in pos)
        return (g, res[2]) if has_aux else g

    elementwise_grad_f.__name__ = f"elementwise_grad_{getattr(fun, '__name__', 'fun')}"
    return elementwise_grad_f

