"""``vmap``: the batching transform.

``vmap(f)`` runs a function written for one example on a batch. Like every transform it owns a
trace level; its :class:`BatchTrace` keeps no tape: each op on a batched value is handed to the
op's batching rule (``Function.batch``), which computes the whole batch at once with tapegrad
ops one level down (the batch on axis 0). The batched values are Tensors of the vmap level
whose primal is the whole batch, so ``vmap`` composes with ``grad``, ``vjp``, ``jvp``, ``jit``,
``checkpoint`` and itself, to any depth, with no confusion between a batch level and a
differentiation level.

A primitive with no batching rule runs once per example (a loop over the batch, then a stack),
with a one-time warning naming it; give it a rule to avoid that (docs/transforms.md).

References:
    Bradbury et al., JAX (``vmap``, ``in_axes``/``out_axes``); PyTorch's ``torch.func.vmap``.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import optree

from tapegrad.core.backend import backend_of
from tapegrad.core.function import (
    CONTEXT_FIELDS,
    OTHER,
    Applied,
    Function,
    new_level,
    plain_arrays,
    run_primitive,
    transform_scope,
)
from tapegrad.core.tensor import Tensor, const, make, primal_of
from tapegrad.core.trace import Trace
from tapegrad.core.tree import NAMESPACE, tree_flatten, tree_unflatten
from tapegrad.transforms.reverse import check_callable

__all__ = ["vmap", "BatchTrace", "moveaxis", "loop"]


def moveaxis(t: Tensor, src: int, dst: int) -> Tensor:
    """``t`` with axis ``src`` moved to ``dst`` (a transpose; differentiable)."""
    nd = t.ndim
    src, dst = src % nd, dst % nd
    if src == dst:
        return t
    order = [i for i in range(nd) if i != src]
    order.insert(dst, src)
    return t.transpose(tuple(order))


class _Stack(Function):
    """Stack equal-shaped Tensors along a new leading axis (the per-example fallback)."""

    oper = "stack"

    @staticmethod
    def forward(ctx, *arrays):
        return ctx.backend.stack(arrays)

    @staticmethod
    def backward(ctx, g):
        return tuple(g[i] for i in range(g.shape[0]))

    @staticmethod
    def jvp(ctx, *ts):
        shape, dtype = ctx.out_avals[0]
        ts = [const(ctx.backend.zeros(shape[1:], dtype)) if t is None else t for t in ts]
        return _Stack.apply(*ts)

    @staticmethod
    def batch(args, batched, size):
        full = [a if b else _broadcast_batch(a, size) for a, b in zip(args, batched)]
        out = _Stack.apply(*full)  # (n, size, ...): the batch moves to the front
        return moveaxis(out, 1, 0)

    @classmethod
    def output_shape(cls, *shapes):
        return (len(shapes),) + tuple(shapes[0])


def _broadcast_batch(a, size: int) -> Tensor:
    """An unbatched value repeated along a new leading batch axis of ``size``."""
    a = a if isinstance(a, Tensor) else Tensor(np.asarray(a))
    return a.reshape((1,) + a.shape) + const(backend_of(a._concrete()).zeros(
        (size,) + (1,) * a.ndim, a.dtype))


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # tapegrad/


def _user_stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside tapegrad (the user's line)."""
    f, level = sys._getframe(1), 1
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_PACKAGE):
        f, level = f.f_back, level + 1
    return level


def _per_example(fn, args, batched, size, params):
    """``fn`` applied example by example and stacked: the rule of an op without one."""
    # Python's default warning filter shows it once per op and calling line.
    warnings.warn(
        f"vmap: {fn.__name__} ({fn._name()}) has no batching rule, so it runs once per "
        "example in a Python loop; define a static batch(args, batched, size, **params) on "
        "it to batch it (docs/transforms.md).",
        stacklevel=_user_stacklevel(),
    )
    return loop(fn, args, batched, size, params)


def loop(fn, args, batched, size: int, params: dict) -> tuple:
    """The batching rule that applies ``fn`` to each example in turn and stacks the results
    (a tuple of outputs, batch on axis 0): for ops with no vectorized form, such as drawing
    random numbers from each example's own key. An empty batch runs ``fn`` once on zeros to
    learn the output shapes."""
    if size == 0:
        ex = [const(backend_of(a._concrete()).zeros(a.shape[1:], a.dtype)) if b else a
              for a, b in zip(args, batched)]
        outs = fn.apply(*ex, **params)
        outs = outs if isinstance(outs, tuple) else (outs,)
        return tuple(const(backend_of(o._concrete()).zeros((0,) + o.shape, o.dtype))
                     for o in outs)
    rows = []
    for i in range(size):
        outs = fn.apply(*[a[i] if b else a for a, b in zip(args, batched)], **params)
        rows.append(outs if isinstance(outs, tuple) else (outs,))
    return tuple(_Stack.apply(*[r[j] for r in rows]) for j in range(len(rows[0])))


def _is_array(v) -> bool:
    return hasattr(v, "shape") and hasattr(v, "dtype") and not isinstance(v, Tensor)


class BatchTrace(Trace):
    """The trace of one ``vmap``: batched values are Tensors of this level whose primal holds
    the whole batch on axis 0 (``size`` examples). Internal; created by :func:`vmap`."""

    __slots__ = ("size",)
    batched = True

    def __init__(self, level: int, size: int):
        super().__init__(level, replays=False)
        self.size = size

    def tracer(self, value: Tensor) -> Tensor:
        """A Tensor of this level standing for ``value``'s examples (``value``: the batch).

        Its own array is one example's (a view of example 0, or zeros for an empty batch), so
        that ``shape``, ``ndim`` and ``dtype`` inside the vmapped function, and the shapes the
        transforms above record, are those of one example."""
        arr = value._concrete()
        ex = arr[0] if arr.shape[0] else backend_of(arr).zeros(arr.shape[1:], arr.dtype)
        return make(ex, self.level, self, -1, value)

    def record(self, fn, args, params, needs):
        level = self.level
        if self.done:
            raise RuntimeError(
                f"{fn._name()}: an input is a value of a vmap that has already finished (a "
                "leaked tracer); pass it as an argument instead."
            )
        lowered, batched = [], []
        for a in args:
            if type(a) is Tensor and a._level == level:
                lowered.append(primal_of(a))
                batched.append(True)
            else:
                lowered.append(a)
                batched.append(False)
        rule = fn.batch
        if rule is None:
            outs = _per_example(fn, lowered, batched, self.size, params)
            multi = len(outs) != 1
        else:
            res = rule(lowered, tuple(batched), self.size, **params)
            multi = isinstance(res, tuple)
            outs = res if multi else (res,)
        outs = tuple(self.tracer(o if isinstance(o, Tensor) else Tensor(o)) for o in outs)
        if needs is None or not fn.differentiable:  # nothing above differentiates this op
            return Applied(outs, None, multi, (), ())
        # A transform above (vmap(grad(f))) records this op per example: its backward needs the
        # context forward makes for one example (static values, what it saved).
        run = self._example_ctx(fn, lowered, batched, params, needs)
        return Applied(outs, run.ctx, multi, run.saved, run.nondiff)

    def _example_ctx(self, fn, lowered, batched, params, needs):
        """The run of ``forward`` on one example (example 0, or zeros of one example's shape for
        an empty batch): its context, saved values and non-differentiable outputs."""
        arrays = []
        for a, b in zip(lowered, batched):
            v = a._concrete() if isinstance(a, Tensor) else a
            if b:
                v = v[0] if v.shape[0] else backend_of(v).zeros(v.shape[1:], v.dtype)
            arrays.append(v)
        with transform_scope():
            run = run_primitive(fn, lowered, arrays, params,
                                needs if needs is not None else (False,) * len(arrays),
                                plain_arrays(arrays))
        ctx = run.ctx
        spec = run.saved
        if spec is not None:
            ctx.saved_tensors = ()  # the level above sets its own from the spec
            if any(k == OTHER and hasattr(v, "shape") for k, v in spec):
                raise NotImplementedError(
                    f"vmap: {fn._name()}'s forward saves an array that is neither an input nor "
                    "an output, so its backward cannot run per example under vmap"
                )
        if not getattr(fn, "_ctx_arrays_recomputed", False):
            for name, v in ctx.__dict__.items():
                if name not in CONTEXT_FIELDS and (_is_array(v) or (
                        isinstance(v, (tuple, list)) and any(_is_array(e) for e in v))):
                    raise NotImplementedError(
                        f"vmap: {fn._name()}'s forward stores an array in ctx.{name}; under "
                        "vmap its backward would use one example's value for every example. "
                        "Save arrays the backward needs with ctx.save_for_backward(...)."
                    )
        run.saved = () if spec is None else spec
        return run


def vmap(
    fun, in_axes: Any = 0, out_axes: Any = 0, axis_size: int | None = None
) -> Callable[..., Any]:
    """Vectorize ``fun`` over a batch axis: ``vmap(f)(xs)`` is ``stack([f(x) for x in xs])``,
    computed with batched ops instead of a Python loop.

    Args:
        fun: A function written for one example: positional (and keyword) pytrees of Tensors
            in, a pytree of Tensors out.
        in_axes: Where each positional argument's batch axis is: an int (negative counts from
            the end), ``None`` (not batched: the same value for every example), or a pytree
            prefix of the positional arguments (a tuple with one entry per argument, each an
            int, None or a prefix of that argument) as in JAX. Keyword arguments are batched
            along axis 0.
        out_axes: Where to put the batch axis in the outputs: an int, None (the output must
            not depend on the batch), or a pytree prefix of the output.
        axis_size: The batch size, needed only when no argument is batched; when given with
            batched arguments it must equal their batch size.

    Returns:
        The vectorized function: each output leaf gains a batch axis of the batch size at
        ``out_axes``.

    Raises:
        ValueError: for inconsistent batch sizes (naming the arguments and sizes, and
            ``axis_size`` when it differs), an ``in_axes`` structure that does not match the
            arguments, an ``in_axes`` or ``out_axes`` out of range (an output's batch axis
            lies in ``[-(r + 1), r]`` for a per-example rank ``r``), no batched argument
            without ``axis_size``, a negative ``axis_size``, or ``out_axes=None`` for an
            output that depends on the batch.
        TypeError: for a non-callable ``fun``; an ``in_axes``/``out_axes`` leaf that is not an
            int or None (a string, float or bool), or an ``axis_size`` that is not an int;
            for a Python decision (``bool``, ``if``) on a batched value: use ``tnp.where``.

    Example:
        >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
        >>> xs = tg.Tensor(np.arange(6.0).reshape(3, 2))
        >>> tg.vmap(lambda x: tnp.sum(x * x))(xs)
        Tensor([ 1., 13., 41.], dtype=float64)
        >>> per_example = tg.vmap(tg.grad(lambda w, x: tnp.sum(tnp.tanh(x @ w))),
        ...                       in_axes=(None, 0))(tg.Tensor(np.ones((2, 3))), xs)
        >>> per_example.shape
        (3, 2, 3)
    """
    check_callable(fun, "vmap")
    who = f"vmap({getattr(fun, '__name__', 'fun')})"
    in_axes = _axes_spec(in_axes, who, "in_axes")
    out_axes = _axes_spec(out_axes, who, "out_axes")
    if axis_size is not None:
        if isinstance(axis_size, bool) or not isinstance(axis_size, (int, np.integer)):
            raise TypeError(f"{who}: axis_size must be an int or None, got {axis_size!r} "
                            f"({type(axis_size).__name__})")
        axis_size = int(axis_size)
        if axis_size < 0:
            raise ValueError(f"{who}: axis_size must be >= 0, got {axis_size}")

    def vmapped(*args, **kwargs):
        leaves, treedef = tree_flatten((args, kwargs))
        axes = _in_axes(args, kwargs, in_axes, who)
        if len(axes) != len(leaves):  # pragma: no cover - structure checked above
            raise ValueError(f"{who}: in_axes do not match the arguments")
        size = None
        where = []
        for i, (leaf, ax) in enumerate(zip(leaves, axes)):
            if ax is None:
                continue
            t = leaf if isinstance(leaf, Tensor) else Tensor(leaf)
            if t.ndim == 0:
                raise ValueError(f"{who}: argument leaf {i} is 0-d and cannot be batched over "
                                 f"axis {ax}; give it in_axes None")
            if not -t.ndim <= ax < t.ndim:
                raise ValueError(f"{who}: in_axes {ax} is out of range for argument leaf {i} of "
                                 f"shape {t.shape}")
            n = t.shape[ax]
            where.append((i, n))
            if size is None:
                size = n
        if size is None:
            if axis_size is None:
                raise ValueError(f"{who}: no argument is batched (every in_axes is None); give "
                                 "axis_size")
            size = axis_size
        bad = [(i, n) for i, n in where if n != size]
        if bad:
            sizes = ", ".join(f"leaf {i}: {n}" for i, n in where)
            raise ValueError(f"{who}: the batched arguments have different batch sizes "
                             f"({sizes}); every batched axis must have the same length")
        if axis_size is not None and size != axis_size:
            sizes = ", ".join(f"leaf {i}: {n}" for i, n in where)
            raise ValueError(f"{who}: axis_size is {axis_size}, but the batched arguments have "
                             f"batch size {size} ({sizes}); axis_size must equal it (it is "
                             "needed only when no argument is batched)")
        trace = BatchTrace(new_level(), size)
        traced = []
        for leaf, ax in zip(leaves, axes):
            if ax is None:
                traced.append(leaf)
                continue
            t = leaf if isinstance(leaf, Tensor) else Tensor(leaf)
            traced.append(trace.tracer(moveaxis(t, ax, 0)))
        a2, k2 = tree_unflatten(treedef, traced)
        try:
            with transform_scope():
                out = fun(*a2, **k2)
        finally:
            trace.done = True
        out_leaves, out_tree = tree_flatten(out)
        o_axes = _out_axes(out, out_axes, who)
        res = []
        for i, (o, ax) in enumerate(zip(out_leaves, o_axes)):
            if ax is not None:
                rank = np.ndim(o._array if isinstance(o, Tensor) else o)
                if not -(rank + 1) <= ax <= rank:
                    raise ValueError(
                        f"{who}: out_axes {ax} is out of range for output leaf {i}: one "
                        f"example's result has rank {rank}, so the batched result has rank "
                        f"{rank + 1} and its batch axis must lie in [{-(rank + 1)}, {rank}]"
                    )
            if isinstance(o, Tensor) and o._level == trace.level and o._trace is trace:
                v = primal_of(o)
                if ax is None:
                    raise ValueError(f"{who}: output leaf {i} depends on the batch, but its "
                                     "out_axes is None")
                res.append(moveaxis(v, 0, ax))
            elif isinstance(o, Tensor) and o._level > trace.level:
                raise RuntimeError(f"{who}: output leaf {i} is a leaked tracer of an inner "
                                   "transform")
            else:
                if ax is None:
                    res.append(o)
                    continue
                v = o if isinstance(o, Tensor) else Tensor(o)
                res.append(moveaxis(_broadcast_batch(v, size), 0, ax))
        return tree_unflatten(out_tree, res)

    vmapped.__name__ = f"vmap_{getattr(fun, '__name__', 'fun')}"
    vmapped.__doc__ = fun.__doc__
    return vmapped


def _axes_spec(spec, who, what):
    """``in_axes``/``out_axes`` checked: an int (NumPy ints accepted), None, or a pytree with
    those as leaves (a list at the top is a tuple); NumPy ints become ints.

    Raises:
        TypeError: for any other leaf (a string, a float, a bool), naming where it is.
    """
    if spec is None or (type(spec) is int):
        return spec
    if isinstance(spec, list):
        spec = tuple(spec)
    paths, leaves, treedef = optree.tree_flatten_with_path(spec, none_is_leaf=True,  # pyright: ignore[reportArgumentType]
                                                           namespace=NAMESPACE)
    fixed = []
    for path, leaf in zip(paths, leaves):
        if leaf is None or (isinstance(leaf, (int, np.integer)) and not isinstance(
                leaf, (bool, np.bool_))):
            fixed.append(None if leaf is None else int(leaf))
            continue
        where = "".join(f"[{k!r}]" for k in path)
        raise TypeError(
            f"{who}: {what} must be an int, None, or a pytree prefix of the "
            f"{'positional arguments' if what == 'in_axes' else 'output'} with ints and None "
            f"as leaves; got {leaf!r} ({type(leaf).__name__})"
            + (f" at {what}{where}" if where else "")
        )
    return optree.tree_unflatten(treedef, fixed)


def _prefix_leaves(tree, prefix, who, what):
    """One entry of ``prefix`` (ints/None, a pytree prefix of ``tree``) per leaf of ``tree``."""
    if prefix is None or isinstance(prefix, int):
        return [prefix] * len(tree_flatten(tree)[0])
    try:
        full = optree.tree_broadcast_prefix(prefix, tree, none_is_leaf=True, namespace=NAMESPACE)
        axes = optree.tree_leaves(full, none_is_leaf=True, namespace=NAMESPACE)
        # a None in the tree is an empty pytree (no leaf), whatever its axis: drop its entry
        values = optree.tree_leaves(tree, none_is_leaf=True, namespace=NAMESPACE)
        return [a for a, v in zip(axes, values) if v is not None]
    except (ValueError, TypeError) as e:
        raise ValueError(
            f"{who}: {what} {prefix!r} does not match the structure of {tree_flatten(tree)[1]}: "
            f"give an int, None, or a pytree prefix of it ({e})"
        ) from None


def _in_axes(args, kwargs, in_axes, who):
    if isinstance(in_axes, tuple) and len(in_axes) != len(args):
        raise ValueError(f"{who}: in_axes has {len(in_axes)} entries for {len(args)} positional "
                         "arguments; give one per argument (or one int for all)")
    pos = _prefix_leaves(args, in_axes, who, "in_axes")
    return pos + [0] * len(tree_flatten(kwargs)[0])


def _out_axes(out, out_axes, who):
    return _prefix_leaves(out, out_axes, who, "out_axes")
