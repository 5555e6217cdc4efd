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

from tapegrad.core.function import Function, derive_context
from tapegrad.core.tensor import Tensor
from tapegrad.core.tensor import const as _tconst
from tapegrad.core.trace import TapeEntry, apply_step, backward_pass, interpret
from tapegrad.core.tree import tree_flatten, tree_unflatten
from tapegrad.core.weak import WeakScalar

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

    # runs tapegrad ops (or a recorded body) on its inputs: each computes bfloat16 itself
    bfloat16_native = True

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
        from tapegrad.transforms.reverse import vjp

        leaves = Checkpoint._rebuild(ctx, (), ())
        active = [
            i
            for i, (k, need) in enumerate(zip(ctx.body.kinds, ctx.needs_input_grad))
            if k and need and leaves[i].dtype.kind in "fcV"
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
        from tapegrad.transforms.forward import jvp

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
        from tapegrad.transforms.vmap import vmap

        axes = tuple(0 if b else None for b in batched)
        n = len(args)

        def batched_body(*leaves):
            return tuple(vmap(lambda *ls: tuple(body.call(list(ls))), in_axes=axes)(*leaves))

        vbody = _Body(batched_body, tree_flatten(tuple(range(n)))[1], body.kinds)
        return Checkpoint.apply(*args, body=vbody)

    @classmethod
    def output_shape(cls, *shapes, body=None):
        raise NotImplementedError("checkpoint: output shapes are known only by running fun")


class _Program:
    """The recorded body of a checkpointed call with a policy: its entries with their static
    context (no arrays), where each entry's residuals come from (node ids or constants), and
    which residual nodes the call keeps (the rest are recomputed)."""

    __slots__ = ("entries", "specs", "in_nodes", "out_refs", "avals", "kept", "kept_outs", "n_in")

    def __init__(self, tape, kept):
        from tapegrad.core.memory import residual_spec

        self.entries, self.specs = [], []
        for e in tape.entries:
            if type(e) is not TapeEntry:
                continue
            spec = residual_spec(e)
            ctx = None  # the static values only: the residuals are set per backward run
            if e.ctx is not None:
                ctx = derive_context(e.ctx, e.ctx.needs_input_grad, ())
            self.entries.append(e._replace(ctx=ctx))
            self.specs.append(spec)
        self.in_nodes, self.out_refs, self.avals = tape.in_nodes, tape.out_refs, tape.avals
        outs = {r for r in tape.out_refs if isinstance(r, int)}
        self.kept = tuple(sorted(v for v in kept if v not in outs))  # extra outputs
        self.kept_outs = tuple(sorted(v for v in kept if v in outs))  # saved as outputs
        self.n_in = len(tape.in_nodes)

    def run(self, env: dict, wanted) -> dict:
        """Compute the nodes in ``wanted`` (and what they need) from ``env`` with ``apply``."""
        required, run = set(wanted) - env.keys(), []
        for e in reversed(self.entries):
            if any(v in required for v in e.out_nodes):
                run.append(e)
                required.update(v for v in e.in_nodes if v >= 0 and v not in env)
        run.reverse()
        return interpret(run, env, apply_step, "checkpoint")

    def outputs(self, env: dict) -> list:
        return [env[r] if isinstance(r, int) else r[1] for r in self.out_refs]



def dependent_entries(prog, env: dict, dep: set) -> list:
    """The entries of ``prog`` (a recorded program with saved-value ``specs``) that depend on
    the nodes in ``dep`` (which grows with their outputs), each with a context of its own: a
    cotangent wanted only for inputs that depend on ``dep``, and its saved values read from
    ``env`` (``{node: value}``; a spec item that is not a node id holds the value)."""
    entries = []
    for e, spec in zip(prog.entries, prog.specs):
        if e.ctx is not None and any(v in dep for v in e.in_nodes):
            dep.update(e.out_nodes)
            c = derive_context(
                e.ctx, tuple(n and v in dep for n, v in zip(e.ctx.needs_input_grad,
                                                            e.in_nodes)),
                tuple(env[r] if isinstance(r, int) else r[1] for r in spec))
            entries.append(e._replace(ctx=c))
    return entries

class PolicyCheckpoint(Function):
    """The primitive behind ``checkpoint(fun, save_only=..., budget_bytes=...)``.

    ``forward`` records the body once (a :class:`~tapegrad.core.tape.Tape`), picks the residuals the
    policy keeps (:func:`tapegrad.core.memory.select_residuals`), and returns them as extra outputs
    beside the body's outputs, so that every level above sees them as traced values.
    ``backward`` recomputes only the residuals it did not keep, then runs the body's backward
    rules with each entry's residuals; cotangents reaching the kept outputs (at higher orders)
    flow in too.
    """

    # runs tapegrad ops (or a recorded body) on its inputs: each computes bfloat16 itself
    bfloat16_native = True

    oper = "checkpoint"

    @staticmethod
    def forward(ctx, *inputs, body, policy):
        from tapegrad.core.memory import select_residuals
        from tapegrad.transforms.reverse import trace

        kinds = body.kinds
        py = [None if k else a for a, k in zip(inputs, kinds)]

        def tensors_only(*ts):
            it = iter(ts)
            return tuple(body.call([next(it) if k else v for k, v in zip(kinds, py)]))

        outs, tape = trace(tensors_only)(*[_tconst(a) for a, k in zip(inputs, kinds) if k])
        if any(o._level for o in outs):
            raise RuntimeError(f"checkpoint: {body!r} uses a Tensor traced by an enclosing "
                               "transform that is not one of its arguments (a closure)")
        prog = _Program(tape, select_residuals(tape, *policy))
        values = {}
        for e, spec in zip(tape.entries, prog.specs):
            for r, t in zip(spec, e.ctx.saved_tensors if spec else ()):
                if isinstance(r, int) and r in prog.kept:
                    values.setdefault(r, t._array)
        kept = [values[v] for v in prog.kept]
        res = [o._array for o in outs] + kept
        out_arrays = {r: o._array for r, o in zip(prog.out_refs, outs) if isinstance(r, int)}
        del tape, values
        ctx.prog, ctx.body, ctx.py_values, ctx.n_out = prog, body, tuple(py), len(outs)
        ctx.save_for_backward(*[a for a, k in zip(inputs, kinds) if k], *kept,
                              *[out_arrays[v] for v in prog.kept_outs])
        return res[0] if len(res) == 1 else tuple(res)

    @staticmethod
    def backward(ctx, *gs):
        prog = ctx.prog
        saved = ctx.saved_tensors
        env = dict(zip(prog.in_nodes, saved[:prog.n_in]))
        env.update(zip(prog.kept + prog.kept_outs, saved[prog.n_in:]))
        wanted = {r for spec in prog.specs for r in spec if isinstance(r, int)}
        prog.run(env, wanted)
        # Only the nodes that depend on an input needing a cotangent get one.
        tensor_needs = [n for n, k in zip(ctx.needs_input_grad, ctx.body.kinds) if k]
        dep = {v for v, need in zip(prog.in_nodes, tensor_needs) if need}
        entries = dependent_entries(prog, env, dep)
        ct: dict = {}
        refs = [r if isinstance(r, int) else None for r in prog.out_refs] + list(prog.kept)
        for r, g in zip(refs, gs):
            if r is not None and g is not None:
                ct[r] = g if r not in ct else ct[r] + g
        backward_pass(entries, ct, prog.avals, consume=True)
        it = iter(prog.in_nodes)
        return tuple(ct.get(next(it)) if k else None for k in ctx.body.kinds)

    @staticmethod
    def jvp(ctx, *ts):
        from tapegrad.transforms.forward import jvp

        prog = ctx.prog
        prims = ctx.saved_tensors[:prog.n_in]
        tans = [t for t, k in zip(ts, ctx.body.kinds) if k]
        tans = [t if t is not None else _tconst(np.zeros(p.shape, p.dtype))
                for t, p in zip(tans, prims)]

        def replay(*ins):
            env = prog.run(dict(zip(prog.in_nodes, ins)),
                           [r for r in prog.out_refs if isinstance(r, int)] + list(prog.kept))
            return tuple(prog.outputs(env)) + tuple(env[v] for v in prog.kept)

        _, t_out = jvp(replay, tuple(prims), tuple(tans))
        return t_out[0] if len(t_out) == 1 else tuple(t_out)

    @staticmethod
    def batch(args, batched, size, body, policy):
        from tapegrad.transforms.vmap import vmap

        axes = tuple(0 if b else None for b in batched)

        def batched_body(*leaves):
            return tuple(vmap(lambda *ls: tuple(body.call(list(ls))), in_axes=axes)(*leaves))

        vbody = _Body(batched_body, tree_flatten(tuple(range(len(args))))[1], body.kinds)
        # Every example keeps what one example's program keeps (the policy applied to it).
        from tapegrad.core.memory import residual_ranks, select_residuals
        from tapegrad.transforms.reverse import trace

        ex = [(a[0] if a.shape[0] else _tconst(np.zeros(a.shape[1:], a.dtype))) if b else a
              for a, b in zip(args, batched)]
        tensors = [a for a, k in zip(ex, body.kinds) if k]

        def tensors_only(*ts):
            it = iter(ts)
            return tuple(body.call([next(it) if k else v for k, v in zip(body.kinds, ex)]))

        ex_outs, tape = trace(tensors_only)(*[_tconst(t._concrete()) for t in tensors])
        kept = select_residuals(tape, *policy)
        ranks = residual_ranks(tape, kept)
        outs = PolicyCheckpoint.apply(*args, body=vbody, policy=(None, None, ranks))
        if body.out_tree is None:
            body.out_tree = vbody.out_tree
        # The kept residuals come out beside the outputs, and every value a batching rule
        # returns carries the batch: one that depends on no batched input is the same for
        # every example and has no batch axis in the batched program, so it is broadcast.
        tensor_batched = [b for b, k in zip(batched, body.kinds) if k]
        varies = {v for v, b in zip(tape.in_nodes, tensor_batched) if b}
        for e in tape.entries:
            if type(e) is TapeEntry and any(v in varies for v in e.in_nodes):
                varies.update(e.out_nodes)
        outs = list(outs) if isinstance(outs, tuple) else [outs]
        n_out = len(ex_outs)
        for i, v in enumerate(_Program(tape, kept).kept):
            o = outs[n_out + i]
            if v not in varies and o.shape == tuple(tape.avals[v][0]):
                outs[n_out + i] = o.reshape((1,) + o.shape).broadcast_to((size,) + o.shape)
        return tuple(outs) if len(outs) > 1 else outs[0]

    @classmethod
    def output_shape(cls, *shapes, body=None, policy=None):
        raise NotImplementedError("checkpoint: output shapes are known only by running fun")


def _call(fun, args, policy=None):
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
        elif type(v) is WeakScalar:  # a number jit traces: static here too (a guard on it)
            kinds.append(False)
            inputs.append(v.pytype(v.tensor.item()))
        else:
            raise TypeError(
                f"checkpoint: argument leaf {i} of {getattr(fun, '__name__', 'fun')} is a "
                f"{type(v).__name__} ({v!r:.40}); a checkpointed function takes Tensors, arrays "
                "and numbers. Pass other values by closing over them (functools.partial)."
            )
    body = _Body(fun, in_tree, tuple(kinds))
    if policy is None:
        outs = Checkpoint.apply(*inputs, body=body)
    else:
        outs = PolicyCheckpoint.apply(*inputs, body=body, policy=policy)
    outs = outs if isinstance(outs, tuple) else (outs,)
    return tree_unflatten(body.out_tree, list(outs[:body.out_tree.num_leaves]))  # pyright: ignore[reportOptionalMemberAccess]


def checkpoint(fun, *args, save_only=None, budget_bytes=None):
    """Make ``fun`` rematerialise its intermediates in the backward pass instead of keeping
    them (``jax.checkpoint``; ``torch.utils.checkpoint.checkpoint(function, *args)``).

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
        save_only: A policy: a set of op names (``oper`` labels, as a tape listing shows them,
            e.g. ``{"matmul"}``) whose outputs are kept for the backward pass instead of
            recomputed (JAX's ``save_only_these_names``, by op). Default: keep none.
        budget_bytes: A policy: keep at most this many bytes of residuals per call, those that
            save the most recomputation per byte first
            (:func:`tapegrad.core.memory.select_residuals`).

    Returns:
        The checkpointed function (same signature and outputs as ``fun``), or its result when
        ``args`` are given.

    Raises:
        RuntimeError: if ``fun`` uses a Tensor traced by an enclosing transform that is not
            among its arguments (pass it as an argument).
        TypeError: if an argument leaf is not a Tensor, array or number (a string, say),
            ``fun`` returns a leaf that is not a Tensor, array or number, or ``save_only`` is
            not a set of strings.
        ValueError: if ``budget_bytes`` is not a non-negative int.

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
    policy = None
    if save_only is not None or budget_bytes is not None:
        if save_only is not None:
            if isinstance(save_only, str) or not all(isinstance(n, str) for n in save_only):
                raise TypeError("checkpoint: save_only must be a set of op names (strings, as "
                                f"a tape listing shows them), got {save_only!r}")
            save_only = frozenset(save_only)
        if budget_bytes is not None and (isinstance(budget_bytes, bool) or not isinstance(
                budget_bytes, int) or budget_bytes < 0):
            raise ValueError("checkpoint: budget_bytes must be a non-negative int, got "
                             f"{budget_bytes!r}")
        policy = (save_only, budget_bytes, None)
    if args:
        return _call(fun, args, policy)

    @functools.wraps(fun)
    def checkpointed(*a):
        return _call(fun, a, policy)

    # (a loop given a checkpointed body applies the policy to each iteration: control.py)
    checkpointed._tapegrad_checkpoint = (fun, policy)  # pyright: ignore[reportAttributeAccessIssue]
    return checkpointed


#: Alias of :func:`checkpoint`, as in JAX.
remat = checkpoint
