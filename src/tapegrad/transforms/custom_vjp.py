"""``custom_vjp``: give a Python function your own reverse-mode rule as a ``(fwd, bwd)`` pair,
JAX style, for users who prefer it to writing a :class:`~tapegrad.Function` subclass.

Each decorated function becomes a Function subclass (named after it) whose ``forward`` runs
``fwd`` on constants and whose ``backward`` calls ``bwd``. ``bwd`` is written with tapegrad
ops, so it is recorded by enclosing transforms (higher-order derivatives differentiate ``bwd``;
``fwd`` is re-run on the traced inputs so that its residuals carry their derivatives, as JAX
traces ``fwd``). Forward mode transposes ``bwd`` (which must be linear in the cotangent).
"""

from __future__ import annotations

import functools
import numbers

import numpy as np

from tapegrad.core.function import Function, plain_arrays, rule_outputs, run_primitive
from tapegrad.core.tensor import Tensor
from tapegrad.core.tensor import const as _tconst
from tapegrad.core.tree import tree_flatten, tree_structure, tree_unflatten

__all__ = ["custom_vjp", "once_differentiable", "OnceDifferentiableBackward"]


def _out_leaves(out, who) -> list:
    res = []
    for i, o in enumerate(tree_flatten(out)[0]):
        if isinstance(o, Tensor):
            res.append(o)
        elif isinstance(o, (numbers.Number, np.ndarray, np.generic)) and not isinstance(o, bool):
            res.append(Tensor(o))
        else:
            raise TypeError(
                f"{who}: output leaf {i} is a {type(o).__name__}; the function must return a "
                "pytree of Tensors, arrays or numbers."
            )
    return res


class custom_vjp:  # noqa: N801  (JAX's name)
    """Decorator: a function with a user-defined vjp, set with :meth:`defvjp`.

    Use as in JAX::

        @tg.custom_vjp
        def f(x, y):
            return tnp.sin(x) * y

        def f_fwd(x, y):                  # same arguments as f
            return f(x, y), (tnp.cos(x), tnp.sin(x), y)   # (output, residuals)

        def f_bwd(res, g):                # residuals and the output's cotangent
            cos_x, sin_x, y = res
            return (cos_x * g * y, sin_x * g)   # one cotangent per positional argument

        f.defvjp(f_fwd, f_bwd)

    Calling ``f`` outside any transform runs ``f`` itself; under a transform it runs ``fwd``
    and ``bwd``. Arguments are pytrees; Tensor and array leaves are differentiable inputs, other
    leaves (Python numbers, strings) are static constants and get no cotangent.

    Args:
        fun: The primal function of positional pytrees, returning a pytree of Tensors.

    Raises:
        RuntimeError: if ``f`` is differentiated before :meth:`defvjp` was called.
        TypeError: if ``fwd`` does not return an ``(output, residuals)`` pair whose output has
            ``f``'s structure, or ``bwd`` does not return one cotangent pytree (or ``None``)
            per positional argument matching that argument's structure.
        ValueError: if a cotangent from ``bwd`` has the wrong shape (naming the argument).
    """

    def __init__(self, fun):
        if not callable(fun):
            raise TypeError(f"custom_vjp: expected a function, got {type(fun).__name__}")
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.fwd = None
        self.bwd = None
        name = getattr(fun, "__name__", "fun")
        self._fn = type(name, (_CustomVJPFunction,), {"oper": name, "owner": self})

    def defvjp(self, fwd, bwd) -> None:
        """Set the rule: ``fwd(*args) -> (out, residuals)``, ``bwd(residuals, g) -> tuple``
        with one cotangent pytree (or ``None``) per positional argument."""
        if not callable(fwd) or not callable(bwd):
            raise TypeError("custom_vjp.defvjp: fwd and bwd must be callables")
        self.fwd = fwd
        self.bwd = bwd

    def __call__(self, *args):
        leaves, in_tree = tree_flatten(args)
        if not any(isinstance(v, Tensor) and v._level for v in leaves):
            return self.fun(*args)  # nothing to differentiate: the primal function itself
        if self.fwd is None:
            raise RuntimeError(
                f"custom_vjp: {self.__name__} is differentiated but has no rule; call "  # pyright: ignore[reportAttributeAccessIssue]
                f"{self.__name__}.defvjp(fwd, bwd) first."  # pyright: ignore[reportAttributeAccessIssue]
            )
        kinds, inputs = [], []
        for v in leaves:
            if isinstance(v, Tensor) or isinstance(v, np.ndarray):
                kinds.append(True)
                inputs.append(v if isinstance(v, Tensor) else Tensor(v))
            else:
                kinds.append(False)
                inputs.append(v)
        call = _Call(in_tree, tuple(kinds), len(args))
        outs = self._fn.apply(*inputs, call=call)
        outs = outs if isinstance(outs, tuple) else (outs,)
        return tree_unflatten(call.out_tree, list(outs))


class _Call:
    """Pytree layout of one call (a static parameter of the primitive)."""

    __slots__ = ("in_tree", "kinds", "nargs", "out_tree")

    def __init__(self, in_tree, kinds, nargs):
        self.in_tree, self.kinds, self.nargs = in_tree, kinds, nargs
        self.out_tree = None

    def __repr__(self) -> str:
        return f"<{self.nargs} args>"


class _CustomVJPFunction(Function):
    """Base of the per-function primitives made by :class:`custom_vjp`."""

    owner: custom_vjp
    # ctx.residuals is one example's under vmap(grad(f)), but backward recomputes the residuals
    # whenever its inputs are traced (they are then the batch's), so it never reads them there.
    _ctx_arrays_recomputed = True
    # fwd runs tapegrad ops on the inputs: each computes bfloat16 itself, as when jit records
    bfloat16_native = True

    @classmethod
    def _run_fwd(cls, call, leaves):
        owner = cls.owner
        who = f"custom_vjp {owner.__name__}: fwd"  # pyright: ignore[reportAttributeAccessIssue]
        res = owner.fwd(*tree_unflatten(call.in_tree, leaves))  # pyright: ignore[reportOptionalCall]
        if not (isinstance(res, tuple) and len(res) == 2):
            raise TypeError(f"{who} must return a pair (output, residuals), got {type(res)}")
        out, residuals = res
        out_tree = tree_structure(out)
        if call.out_tree is None:
            call.out_tree = out_tree
        elif out_tree != call.out_tree:
            raise TypeError(f"{who} output has structure {out_tree}, expected {call.out_tree}")
        return _out_leaves(out, who), residuals

    @classmethod
    def forward(cls, ctx, *inputs, call):
        leaves = [_tconst(a) if k else a for a, k in zip(inputs, call.kinds)]
        outs, residuals = cls._run_fwd(call, leaves)
        for o in outs:
            if o._level:
                raise RuntimeError(
                    f"custom_vjp {cls.owner.__name__}: fwd uses a Tensor traced by an enclosing "  # pyright: ignore[reportAttributeAccessIssue]
                    "transform that is not one of its arguments (a closure); pass it as an "
                    "argument."
                )
        ctx.call = call
        ctx.py_values = tuple(None if k else a for a, k in zip(inputs, call.kinds))
        ctx.residuals = residuals
        ctx.save_for_backward(*[a for a, k in zip(inputs, call.kinds) if k])
        if len(outs) == 1:  # one output: a plain array keeps apply on its single-output path
            return outs[0]._array
        return tuple(o._array for o in outs)

    @classmethod
    def backward(cls, ctx, *gs):
        owner = cls.owner
        call = ctx.call
        saved = ctx.saved_tensors
        residuals = ctx.residuals
        if any(s._level for s in saved):
            # An outer transform watches the inputs: recompute the residuals from them so that
            # they carry their derivatives (stored ones are constants).
            it = iter(saved)
            leaves = [next(it) if k else v for k, v in zip(call.kinds, ctx.py_values)]
            residuals = cls._run_fwd(call, leaves)[1]
        g = tree_unflatten(call.out_tree, list(gs))
        cts = owner.bwd(residuals, g)  # pyright: ignore[reportOptionalCall]
        who = f"custom_vjp {owner.__name__}: bwd"  # pyright: ignore[reportAttributeAccessIssue]
        if not isinstance(cts, (tuple, list)) or len(cts) != call.nargs:
            raise TypeError(
                f"{who} must return a tuple with one cotangent per positional argument "
                f"({call.nargs}), got {type(cts).__name__}"
                + (f" of length {len(cts)}" if hasattr(cts, "__len__") else "")  # pyright: ignore[reportArgumentType]
            )
        arg_trees = tree_unflatten(call.in_tree, list(range(len(call.kinds))))
        flat = [None] * len(call.kinds)
        for a, (ct, idx_tree) in enumerate(zip(cts, arg_trees)):
            if ct is None:
                continue
            idx, tree = tree_flatten(idx_tree)
            ct_leaves, ct_tree = tree_flatten(ct)
            if ct_tree != tree:
                raise TypeError(
                    f"{who}: cotangent for argument {a} has structure {ct_tree}, but the "
                    f"argument has structure {tree}"
                )
            for i, c in zip(idx, ct_leaves):
                flat[i] = c
        it = iter(saved)
        res = []
        for i, k in enumerate(call.kinds):
            if not k:
                res.append(None)
                continue
            s = next(it)
            c = flat[i]
            if c is not None:
                c = c if isinstance(c, Tensor) else Tensor(c)
                if c.shape != s.shape:
                    raise ValueError(
                        f"{who}: cotangent for input leaf {i} has shape {c.shape}, but the "
                        f"input has shape {s.shape}"
                    )
            res.append(c)
        return tuple(res)

    @classmethod
    def batch(cls, args, batched, size, call):
        """vmap of a call: the same rule, batched. The batched primitive's ``fwd`` and ``bwd``
        are ``vmap`` of the user's (JAX's ``custom_vjp`` batching), with the cotangents of
        unbatched inputs summed over the batch."""
        from tapegrad.transforms.vmap import vmap

        owner = cls.owner
        axes = tuple(0 if b else None for b in batched)

        def unflat(leaves):
            return tree_unflatten(call.in_tree, list(leaves))

        def known(out):
            if call.out_tree is None:
                call.out_tree = tree_structure(out)
            return out

        def fun(*leaves):
            return known(vmap(lambda *ls: owner.fun(*unflat(ls)), in_axes=axes)(*leaves))

        def fwd(*leaves):
            out, residuals = vmap(lambda *ls: owner.fwd(*unflat(ls)), in_axes=axes)(*leaves)  # pyright: ignore[reportOptionalCall]
            return known(out), residuals

        def bwd(residuals, g):
            cts = vmap(owner.bwd)(residuals, g)  # per positional argument, batched
            arg_trees = tree_unflatten(call.in_tree, list(range(len(call.kinds))))
            flat = [None] * len(call.kinds)
            for ct, idx_tree in zip(cts, arg_trees):
                if ct is not None:
                    for i, c in zip(tree_flatten(idx_tree)[0], tree_flatten(ct)[0]):
                        flat[i] = c
            return tuple(None if c is None or not call.kinds[i] else
                         (c if batched[i] else c.sum(axis=0)) for i, c in enumerate(flat))

        inner = custom_vjp(fun)
        inner.__name__ = owner.__name__  # pyright: ignore[reportAttributeAccessIssue]
        inner.defvjp(fwd, bwd)
        outs = tree_flatten(inner(*args))[0]
        return outs[0] if len(outs) == 1 else tuple(outs)

    @classmethod
    def output_shape(cls, *shapes, call=None):
        raise NotImplementedError("custom_vjp: output shapes are known only by running fwd")


# -- once-differentiable rules ---------------------------------------------------------------
def once_differentiable(backward):
    """Decorator for a :class:`~tapegrad.Function`'s ``backward`` that is only meant for first
    derivatives, such as one that computes with NumPy on arrays (PyTorch's
    ``torch.autograd.function.once_differentiable``).

    Without an enclosing transform the rule runs as written. When one traces the op's inputs
    (``grad(grad(f))``, ``hessian``, ``jit(grad(f))``, ``vmap(grad(f))``), the decorated rule
    is recorded as one primitive of the op's inputs and cotangents that reruns ``forward`` and
    then ``backward`` on their values: ``jit`` and ``trace`` replay it on new inputs (no
    value of the first call is kept), ``vmap`` runs it per example, and differentiating it
    again (a second derivative through this op) raises a ``TypeError`` naming the Function,
    instead of a silently wrong result. A rule written with tapegrad operations needs no
    decorator: it differentiates to any order.

    Use it below ``@staticmethod``::

        class Sin(tg.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return np.sin(x)

            @staticmethod
            @tg.once_differentiable
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g.numpy() * np.cos(x.numpy())

    Args:
        backward: The rule, ``backward(ctx, *cotangents)`` (a function or a staticmethod).

    Returns:
        The decorated rule (a staticmethod when given one).

    Raises:
        TypeError: if ``backward`` is not callable. The rule it returns raises ``TypeError``
            when its result is differentiated again.
    """
    if isinstance(backward, staticmethod):
        return staticmethod(once_differentiable(backward.__func__))
    if not callable(backward):
        raise TypeError(
            f"once_differentiable: expected a backward rule (a function), got "
            f"{type(backward).__name__}"
        )

    @functools.wraps(backward)
    def rule(ctx, *cotangents):
        return backward(ctx, *cotangents)

    # Where an enclosing transform records the rule, the engine runs it as one primitive
    # (tapegrad.core.tape.run_rule calls _rerun); at first order it runs as written.
    rule.once_differentiable = True  # pyright: ignore[reportAttributeAccessIssue]
    rule.rerun = _rerun  # pyright: ignore[reportAttributeAccessIssue]
    return rule


def _rerun(w, ctx, cotangents) -> tuple:
    """A once-differentiable rule under an enclosing transform: one primitive of the op's
    inputs and cotangents (:class:`OnceDifferentiableBackward`)."""
    n = len(w.inputs)
    want = tuple(i for i, need in enumerate(ctx.needs_input_grad) if need)
    res: list = [None] * n
    if not want:
        return tuple(res)
    tensors = tuple(type(a) is Tensor for a in w.inputs)
    outs = OnceDifferentiableBackward.apply(*w.inputs, *cotangents, fn=w.fn, n_in=n,
                                            want=want, tensors=tensors, fn_params=w.params)
    for i, o in zip(want, outs if isinstance(outs, tuple) else (outs,)):
        res[i] = o
    return tuple(res)


class OnceDifferentiableBackward(Function):
    """The backward rule of a Function decorated with :func:`once_differentiable`, as one
    primitive: inputs are the op's inputs then its output cotangents; outputs are the
    cotangents of the inputs in ``want`` (one array, or a tuple for several). ``forward``
    reruns the op's ``forward`` (so the values it leaves on ``ctx`` are this call's) and its
    ``backward`` on constants. Differentiating it raises."""

    # runs tapegrad ops (or a recorded body) on its inputs: each computes bfloat16 itself
    bfloat16_native = True

    oper = "once_differentiable_backward"

    @staticmethod
    def forward(ctx, *arrays, fn, n_in, want, tensors, fn_params):
        ins = list(arrays[:n_in])
        values = [_tconst(a) if t else a for a, t in zip(ins, tensors)]
        cpu = all(type(a) is np.ndarray for a, t in zip(ins, tensors) if t) and plain_arrays(ins)
        needs = tuple(i in want for i in range(n_in))
        run = run_primitive(fn, values, ins, fn_params, needs, cpu)
        c = run.ctx
        gs = [None if g is None else _tconst(g) for g in arrays[n_in:]]
        grads = fn.backward(c, *gs)
        grads = rule_outputs(fn, "backward", grads, n_in)
        xp = ctx.backend
        out = []
        for i in want:
            g = grads[i]
            if g is None:
                out.append(xp.zeros(ins[i].shape, ins[i].dtype))
            elif isinstance(g, Tensor):
                out.append(g._concrete())
            else:
                out.append(xp.asarray(g))
        ctx.fn_name = fn.__name__
        return out[0] if len(out) == 1 else tuple(out)

    @staticmethod
    def backward(ctx, *gs):
        raise TypeError(
            f"{ctx.fn_name}.backward is decorated with @tg.once_differentiable, so it has no "
            "derivative of its own, but a transform differentiates it again (a second "
            "derivative through this op: grad of grad, hessian, jvp of grad). Write the "
            "backward with tapegrad operations on ctx.saved_tensors and the cotangents (then "
            "drop the decorator) to differentiate it to any order."
        )

    jvp = backward

    @staticmethod
    def batch(args, batched, size, **params):
        from tapegrad.transforms.vmap import loop

        return loop(OnceDifferentiableBackward, args, batched, size, params)

    @classmethod
    def output_shape(cls, *shapes, **params):
        raise NotImplementedError("once_differentiable: output shapes are known only by "
                                  "running the rule")
