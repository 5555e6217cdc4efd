"""Gradient checkpointing (rematerialisation): ``checkpoint`` / ``remat``.

A checkpointed call is one primitive on the tape. Its ``forward`` runs the function on plain
constants, so none of its intermediates are recorded or kept; the tape entry saves only the
call's inputs. Its ``backward`` runs the function again under :func:`~tapegrad.vjp` and pulls
the cotangents back through that fresh recording, which lives only while this entry's backward
rule runs. Memory for the saved values of a chain of ``n`` checkpointed segments thus falls from
all intermediates to the segments' inputs plus one segment's intermediates, for one extra
forward pass (Griewank and Walther, "Algorithm 799: revolve", ACM TOMS 2000; Chen et al.,
"Training deep nets with sublinear memory cost", 2016).

Because ``backward`` is written with tapegrad ops (a ``vjp``), checkpointed functions nest in
every transform, to any order; forward mode re-runs the function under :func:`~tapegrad.jvp`.
"""

from __future__ import annotations

import functools
import numbers

import numpy as np

from tapegrad.function import Function
from tapegrad.tensor import Tensor
from tapegrad.tensor import const as _tconst
from tapegrad.tree import tree_flatten, tree_unflatten

__all__ = ["checkpoint", "remat"]


class _Body:
    """The checkpointed function with the pytree layout of one call (a static parameter)."""

    __slots__ = ("fun", "in_tree", "kinds", "out_tree")

    def __init__(self, fun, in_tree, kinds):
        self.fun = fun
        self.in_tree = in_tree
        self.kinds = kinds  # per input leaf: True for a Tensor (a positional Tensor input)
        self.out_tree = None

    def __repr__(self) -> str:
        return f"<{getattr(self.fun, '__name__', 'fun')}>"

    def call(self, leaves) -> list:
        """Run the function on input leaves; returns its output leaves as Tensors."""
        out = self.fun(*tree_unflatten(self.in_tree, leaves))
        out_leaves, out_tree = tree_flatten(out)
        if self.out_tree is None:
            self.out_tree = out_tree
        res = []
        for i, o in enumerate(out_leaves):
            if isinstance(o, Tensor):
                res.append(o)
            elif isinstance(o, (numbers.Number, np.ndarray, np.generic)) and not isinstance(
                o, bool
            ):
                res.append(Tensor(o))
            else:
                raise TypeError(
                    f"checkpoint: output leaf {i} of {self!r} is a {type(o).__name__}; a "
                    "checkpointed function must return a pytree of Tensors, arrays or numbers."
                )
        return res


class Checkpoint(Function):
    """The rematerialising primitive behind :func:`checkpoint` (one tape entry per call).

    ``forward`` runs ``body`` on constants and keeps only its inputs; ``backward`` re-runs it
    under ``vjp``; ``jvp`` re-runs it under ``jvp``.
    """

    oper = "checkpoint"

    @staticmethod
    def forward(ctx, *inputs, body):
        leaves = [_tconst(a) if k else a for a, k in zip(inputs, body.kinds)]
        outs = body.call(leaves)
        for o in outs:
            if o._level:
                raise RuntimeError(
                    f"checkpoint: {body!r} uses a Tensor traced by an enclosing transform "
                    "that is not one of its arguments (a closure). Checkpointing recomputes the "
                    "function from its arguments only: pass every differentiated value as an "
                    "argument, for example checkpoint(f)(params, x) rather than "
                    "checkpoint(lambda x: f(params, x))(x)."
                )
        ctx.body = body
        ctx.py_values = tuple(None if k else a for a, k in zip(inputs, body.kinds))
        ctx.save_for_backward(*[a for a, k in zip(inputs, body.kinds) if k])
        if len(outs) == 1:  # one output: a plain array keeps apply on its single-output path
            return outs[0]._array
        return tuple(o._array for o in outs)

    @staticmethod
    def _rebuild(ctx, positions, values):
        """Input leaves: saved Tensors, with ``values`` at ``positions``, Python values as is."""
        body = ctx.body
        saved = iter(ctx.saved_tensors)
        leaves = [next(saved) if k else v for k, v in zip(body.kinds, ctx.py_values)]
        for p, v in zip(positions, values):
            leaves[p] = v
        return leaves

    @staticmethod
    def backward(ctx, *gs):
        from tapegrad.transforms import vjp

        leaves = Checkpoint._rebuild(ctx, (), ())
        active = [
            i
            for i, (k, need) in enumerate(zip(ctx.body.kinds, ctx.needs_input_grad))
            if k and need and leaves[i].dtype.kind in "fc"
        ]
        if not active:
            return (None,) * len(leaves)

        def replay(*d):
            return tuple(ctx.body.call(Checkpoint._rebuild(ctx, active, d)))

        _, pull = vjp(replay, *[leaves[i] for i in active])
        cts = pull(tuple(gs))
        res = [None] * len(leaves)
        for i, c in zip(active, cts):
            res[i] = c
        return tuple(res)

    @staticmethod
    def jvp(ctx, *ts):
        from tapegrad.forward import jvp

        leaves = Checkpoint._rebuild(ctx, (), ())
        active = [i for i, t in enumerate(ts) if t is not None]

        def replay(*d):
            return tuple(ctx.body.call(Checkpoint._rebuild(ctx, active, d)))

        _, t_out = jvp(replay, tuple(leaves[i] for i in active), tuple(ts[i] for i in active))
        return tuple(t_out) if len(t_out) != 1 else t_out[0]

    @staticmethod
    def batch(args, batched, size, body):
        """vmap of a checkpointed call: one checkpointed call of the vmapped body, so the
        batch still keeps only the inputs for the backward pass."""
        from tapegrad.vmap import vmap

        axes = tuple(0 if b else None for b in batched)
        n = len(args)

        def batched_body(*leaves):
            return tuple(vmap(lambda *ls: tuple(body.call(list(ls))), in_axes=axes)(*leaves))

        vbody = _Body(batched_body, tree_flatten(tuple(range(n)))[1], body.kinds)
        return Checkpoint.apply(*args, body=vbody)

    @classmethod
    def output_shape(cls, *shapes, body=None):
        raise NotImplementedError("checkpoint: output shapes are known only by running fun")


def _call(fun, args):
    leaves, in_tree = tree_flatten(args)
    kinds, inputs = [], []
    for i, v in enumerate(leaves):
        if isinstance(v, Tensor):
            kinds.append(True)
            inputs.append(v)
        elif isinstance(v, np.ndarray) or hasattr(v, "__cuda_array_interface__"):
            kinds.append(True)
            inputs.append(Tensor(v))
        elif isinstance(v, (bool, int, float, complex, np.generic)):  # static numbers
            kinds.append(False)
            inputs.append(v)
        else:
            raise TypeError(
                f"checkpoint: argument leaf {i} of {getattr(fun, '__name__', 'fun')} is a "
                f"{type(v).__name__} ({v!r:.40}); a checkpointed function takes Tensors, arrays "
                "and numbers. Pass other values by closing over them (functools.partial)."
            )
    body = _Body(fun, in_tree, tuple(kinds))
    outs = Checkpoint.apply(*inputs, body=body)
    outs = outs if isinstance(outs, tuple) else (outs,)
    return tree_unflatten(body.out_tree, list(outs))


def checkpoint(fun, *args):
    """Make ``fun`` rematerialise its intermediates in the backward pass instead of keeping
    them (``jax.checkpoint``; the seeds' ``checkpoint(run_function, *tensors)``).

    Called as ``checkpoint(fun)`` it returns the checkpointed function; called as
    ``checkpoint(fun, *args)`` it runs ``fun(*args)`` checkpointed at once. Values and
    derivatives of every order are unchanged; the backward pass costs one extra run of ``fun``.

    Args:
        fun: Function of positional pytrees returning a pytree of Tensors. It must be pure:
            the same inputs give the same outputs (draw randomness from an explicit
            ``tapegrad.random`` key passed as an argument). Every differentiated value it uses
            must be an argument, not a closure.
        *args: If given, the arguments to call ``fun`` with immediately. Tensor and array leaves
            are inputs (saved, differentiated when floating); Python numbers are static
            constants.

    Returns:
        The checkpointed function (same signature and outputs as ``fun``), or its result when
        ``args`` are given.

    Raises:
        RuntimeError: if ``fun`` uses a Tensor traced by an enclosing transform that is not
            among its arguments (pass it as an argument).
        TypeError: if an argument leaf is not a Tensor, array or number (a string, say), or
            ``fun`` returns a leaf that is not a Tensor, array or number.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> layer = tg.checkpoint(lambda w, x: tnp.tanh(x @ w))
        >>> w = tg.Tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> g = tg.grad(lambda w: tnp.sum(layer(w, tg.Tensor([[0.5, -0.5]]))))(w)
        >>> g.shape
        (2, 2)
    """
    if not callable(fun):
        raise TypeError(f"checkpoint: fun must be callable, got {type(fun).__name__}")
    if args:
        return _call(fun, args)

    @functools.wraps(fun)
    def checkpointed(*a):
        return _call(fun, a)

    return checkpointed


#: Alias of :func:`checkpoint`, as in JAX.
remat = checkpoint
