"""``custom_jvp`` and the primitives whose rules are Python functions. ``custom_jvp`` gives a
Python function your own forward-mode rule, JAX style; reverse mode, ``vmap`` and every order
of differentiation follow from it.

Each call of a decorated function under a transform is one primitive (a
:class:`~tapegrad.Function` subclass named after the function) whose rules come from Python
functions of flat leaves (:class:`Rules`), carried by the call's static parameter
(:class:`RuleCall`):

- ``forward`` runs the primal function on constants;
- ``jvp`` runs the rule on the inputs and tangents one level down (so enclosing transforms
  record it: forward mode nests to any order);
- ``backward`` is the transpose of the rule's tangent map: the rule is linear in the
  tangents, so the vjp of ``t -> rule(primals, t)`` (taken at ``t = 0``) applied to the
  cotangent is ``J^T g``; that vjp is itself made of recorded operations, so reverse mode
  nests too (``grad(grad(f))``, ``hessian``);
- ``batch`` (``vmap``) runs the same primitive with the rules batched by ``vmap``, or example by
  example for rules whose Python depends on values (``Rules.per_example``).

:mod:`tapegrad.transforms.implicit` builds ``custom_root`` and ``custom_linear_solve`` on the same
primitive machinery, with rules of their own.

References:
    Bradbury et al., JAX: ``jax.custom_jvp`` (``defjvp``, ``defjvps``, ``nondiff_argnums``);
    the tutorial "Custom derivative rules for JAX-transformable Python functions".
"""

from __future__ import annotations

import functools
import inspect
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from tapegrad.core.backend import backend_of
from tapegrad.core.function import Function
from tapegrad.core.tensor import Tensor, const
from tapegrad.core.tree import tree_flatten, tree_map, tree_unflatten
from tapegrad.core.weak import WeakScalar
from tapegrad.transforms.reverse import vjp

__all__ = ["custom_jvp", "Rules", "RuleCall", "RuleFunction", "zeros_like"]


def zeros_like(t: Tensor) -> Tensor:
    """A constant zero Tensor of ``t``'s shape, dtype and device (``t`` may be traced)."""
    return const(backend_of(t._concrete()).zeros(t.shape, t.dtype))


def _is_float(t) -> bool:
    return isinstance(t, Tensor) and t.dtype.kind in "fcV"


def array_leaf(v) -> bool:
    """Whether a pytree leaf is an array input of a primitive (Tensor, NumPy or CuPy array,
    NumPy scalar) rather than a static Python value."""
    return isinstance(v, (Tensor, np.ndarray, np.generic)) or hasattr(
        v, "__cuda_array_interface__")


class Rules:
    """The rules of one primitive call, as Python functions of flat leaves.

    Attributes:
        name: For messages.
        fun: ``fun(leaves) -> output pytree``: the primal.
        jvp: ``jvp(leaves, tangents, outs) -> (primal_out_leaves or None, tangent_out_leaves)``;
            ``tangents`` has one entry per leaf (a Tensor, zeros where nothing is perturbed;
            ``None`` for a static leaf), ``outs`` the primal outputs as Tensors when
            ``save_outputs``, else None. Linear in ``tangents``.
        vjp: Optional ``vjp(leaves, outs, cotangents) -> one cotangent (or None) per leaf``;
            without one, reverse mode transposes ``jvp``.
        save_outputs: Whether ``jvp``/``vjp`` read the primal outputs.
        per_example: Under ``vmap``, apply the primitive once per example (rules whose Python
            takes decisions on values, such as an iterative solver) instead of batching the
            rules with ``vmap``.
    """

    __slots__ = ("name", "fun", "jvp", "vjp", "save_outputs", "per_example")

    def __init__(self, name, fun, jvp, vjp=None, save_outputs=False, per_example=False):
        self.name, self.fun, self.jvp, self.vjp = name, fun, jvp, vjp
        self.save_outputs, self.per_example = save_outputs, per_example


class RuleCall:
    """The static parameter of one call of a :class:`RuleFunction`: its rules and the layout
    of its leaves.

    Attributes:
        rules: The :class:`Rules`.
        kinds: Per leaf, whether it is an array input (else a static Python value).
        diff: Per leaf, whether it is differentiated (array, floating, not excluded).
        weak: Per leaf, the Python type of a number ``jit`` traces (passed as its exact value),
            else None.
        nondiff_outs: Output positions that carry no derivative (auxiliary results).
        out_tree: The output's pytree structure (known once the primal ran).
        key: Equal keys make equal calls (``jit`` then merges repeated identical calls);
            None: equal only to itself.
    """

    __slots__ = ("rules", "kinds", "diff", "weak", "nondiff_outs", "out_tree", "key")

    def __init__(self, rules, kinds, diff, weak, nondiff_outs=(), out_tree=None, key=None):
        self.rules: Any = rules
        self.kinds, self.diff, self.weak = kinds, diff, weak
        self.nondiff_outs, self.out_tree, self.key = nondiff_outs, out_tree, key

    def __eq__(self, other):
        if self.key is None or type(other) is not RuleCall:
            return self is other
        return self.key == other.key

    def __hash__(self):
        return id(self) if self.key is None else hash(self.key)

    def __repr__(self) -> str:
        return f"<{self.rules.name}: {len(self.kinds)} leaves>"

    def with_rules(self, rules: Rules) -> RuleCall:
        return RuleCall(rules, self.kinds, self.diff, self.weak, self.nondiff_outs,
                        self.out_tree)


def _leaf_value(a, weak):
    """A leaf as the rules see it: a weakly typed number as its Python value (a constant) or
    a WeakScalar (traced)."""
    if weak is None:
        return a
    if a._level:
        return WeakScalar(a, weak)
    return weak(a._concrete().reshape(()).item())


class RuleFunction(Function):
    """Base of the primitives whose rules are Python functions (:class:`Rules`), carried by
    the static parameter ``call`` (:class:`RuleCall`)."""

    # ctx holds no array forward computed: backward reads inputs and outputs only
    _ctx_arrays_recomputed = True
    # the rules run tapegrad ops on the inputs: each computes bfloat16 itself, as when jit
    # records them
    bfloat16_native = True

    @classmethod
    def forward(cls, ctx, *inputs, call):
        rules = call.rules
        leaves = [(_leaf_value(const(a), w) if w is not None else const(a)) if k else a
                  for a, k, w in zip(inputs, call.kinds, call.weak)]
        out = rules.fun(leaves)
        out_leaves, out_tree = tree_flatten(out)
        if call.out_tree is None:
            call.out_tree = out_tree
        elif out_tree != call.out_tree:
            raise TypeError(f"{rules.name}: the output has structure {out_tree}, but an earlier "
                            f"call gave {call.out_tree}")
        arrays = []
        for i, o in enumerate(out_leaves):
            if not isinstance(o, Tensor):
                if isinstance(o, bool) or not isinstance(o, (numbers.Number, np.ndarray,
                                                             np.generic)):
                    raise TypeError(f"{rules.name}: output leaf {i} is a {type(o).__name__}; "
                                    "the function must return a pytree of Tensors or arrays.")
                o = Tensor(o)
            if o._level:
                raise RuntimeError(
                    f"{rules.name}: the function uses a value that an enclosing transform "
                    "traces but that is not one of its arguments (a closure); pass it as an "
                    "argument."
                )
            arrays.append(o._array)
        ctx.call = call
        ctx.py_values = tuple(None if k else a for a, k in zip(inputs, call.kinds))
        saved = [a for a, k in zip(inputs, call.kinds) if k]
        if rules.save_outputs:
            saved += arrays
        ctx.save_for_backward(*saved)
        nd = [a for j, a in enumerate(arrays) if j in call.nondiff_outs]
        if nd:
            ctx.mark_non_differentiable(*nd)
        if len(arrays) == 1:  # one output: a plain array keeps apply on its single-output path
            return arrays[0]
        return tuple(arrays)

    @staticmethod
    def _unpack(ctx) -> tuple[list[Any], list | None]:
        """The leaves (Tensors one level down, static values) and saved outputs."""
        call = ctx.call
        saved = ctx.saved_tensors
        it = iter(saved)
        leaves = [_leaf_value(next(it), w) if k else v
                  for k, v, w in zip(call.kinds, ctx.py_values, call.weak)]
        outs = list(it) if call.rules.save_outputs else None
        return leaves, outs

    @staticmethod
    def _tangent_args(call, leaves, given: dict) -> list:
        """One tangent per leaf for the rules: ``given[i]`` for perturbed leaves, zeros for
        other array leaves, a zero number for weak numbers, None for static values."""
        res = []
        for i, (v, k, w) in enumerate(zip(leaves, call.kinds, call.weak)):
            if not k:  # a static value: a zero of a Python number's type, else None
                res.append(type(v)(0) if type(v) in (int, float, complex) else None)
            elif w is not None:
                res.append(w(0))
            elif i in given:
                res.append(given[i])
            else:
                res.append(zeros_like(v))
        return res

    @staticmethod
    def _check_tangents(call, tans, avals, who) -> list:
        """The rule's output tangents checked against the outputs' ``(shape, dtype)``: Tensors
        (numbers become arrays), None for non-differentiable outputs."""
        if len(tans) != len(avals):
            raise TypeError(f"{who}: the tangent output has {len(tans)} leaves for "
                            f"{len(avals)} outputs")
        res = []
        for j, (t, (shape, dtype)) in enumerate(zip(tans, avals)):
            if j in call.nondiff_outs or np.dtype(dtype).kind not in "fcV":
                res.append(None)
                continue
            if t is None:
                raise TypeError(f"{who}: tangent output leaf {j} is None; return a zero array "
                                "for an output that does not change")
            if not isinstance(t, Tensor):
                if isinstance(t, (numbers.Number, np.generic)) and not isinstance(t, bool):
                    t = const(np.full(shape, t, dtype))
                elif array_leaf(t):
                    t = Tensor(t)
                else:
                    raise TypeError(f"{who}: tangent output leaf {j} is a "
                                    f"{type(t).__name__}; expected a Tensor or array")
            if t.shape != tuple(shape):
                raise ValueError(
                    f"{who}: tangent output leaf {j} has shape {t.shape}, but the primal "
                    f"output has shape {tuple(shape)}; tangents must match the primal outputs' "
                    "shapes and dtypes."
                )
            if t.dtype != dtype:
                raise TypeError(
                    f"{who}: tangent output leaf {j} has dtype {t.dtype}, but the primal output "
                    f"has dtype {np.dtype(dtype)}; tangents must match the primal outputs' "
                    "dtypes (cast with .astype)."
                )
            res.append(t)
        return res

    @classmethod
    def jvp(cls, ctx, *ts):  # pyright: ignore[reportIncompatibleMethodOverride]
        call = ctx.call
        leaves, outs = cls._unpack(ctx)
        given = {i: t for i, t in enumerate(ts) if t is not None and call.diff[i]}
        tangents = cls._tangent_args(call, leaves, given)
        _, tans = call.rules.jvp(leaves, tangents, outs)
        return tuple(cls._check_tangents(call, list(tans), ctx.out_avals,
                                         f"{call.rules.name}: jvp rule"))

    @classmethod
    def backward(cls, ctx, *gs):
        call = ctx.call
        n = len(call.kinds)
        want = [i for i in range(n) if ctx.needs_input_grad[i] and call.diff[i]]
        if not want:
            return (None,) * n
        leaves, outs = cls._unpack(ctx)
        rules = call.rules
        res: list = [None] * n
        if rules.vjp is not None:
            cts = rules.vjp(leaves, outs, list(gs))
            for i in want:
                res[i] = cts[i]
            return tuple(res)
        avals = [None if g is None else (g.shape, g.dtype) for g in gs]
        live = [j for j, (g, av) in enumerate(zip(gs, avals)) if g is not None
                and j not in call.nondiff_outs and av[1].kind in "fcV"]  # pyright: ignore[reportOptionalSubscript]
        if not live:
            return tuple(res)

        def tangent_map(*t_want):
            tangents = cls._tangent_args(call, leaves, dict(zip(want, t_want)))
            _, tans = rules.jvp(leaves, tangents, outs)
            tans = list(tans)
            if len(tans) != len(gs):
                raise TypeError(f"{rules.name}: jvp rule: the tangent output has {len(tans)} "
                                f"leaves for {len(gs)} outputs")
            checked = cls._check_tangents(
                call, [tans[j] if j in live else None for j in range(len(gs))],
                [av if av is not None else ((), np.dtype(bool)) for av in avals],
                f"{rules.name}: jvp rule")
            return tuple(checked[j] for j in live)

        # The rule is linear in the tangents: its vjp at t = 0 is the transpose J^T.
        _, pull = vjp(tangent_map, *[zeros_like(leaves[i]) for i in want])
        cts = pull(tuple(gs[j] for j in live))
        for i, c in zip(want, cts):
            res[i] = c
        return tuple(res)

    @classmethod
    def batch(cls, args, batched, size, call):
        """``vmap``: the rules batched with ``vmap`` (JAX's rule for ``custom_jvp``), or the
        primitive applied per example (``Rules.per_example``)."""
        from tapegrad.transforms.vmap import loop, vmap

        rules = call.rules
        if rules.per_example:
            outs = loop(cls, args, batched, size, {"call": call})
            return outs[0] if len(outs) == 1 else outs
        axes = tuple(0 if b else None for b in batched)

        def fun(leaves):
            return vmap(lambda *ls: rules.fun(list(ls)), in_axes=axes)(*leaves)

        def jvp(leaves, tangents, outs):
            def one(ls, ts, os):
                p, t = rules.jvp(list(ls), list(ts), None if os is None else list(os))
                return p, list(t)

            o_axes = 0 if outs is not None else None
            return vmap(one, in_axes=(axes, axes, o_axes))(
                tuple(leaves), tuple(tangents), None if outs is None else tuple(outs))

        vjp_rule: Callable | None = None
        if rules.vjp is not None:
            user_vjp = rules.vjp

            def batched_vjp(leaves, outs, gs):
                cts = vmap(lambda ls, os, g: list(user_vjp(list(ls), list(os), list(g))),
                           in_axes=(axes, 0, 0))(tuple(leaves), tuple(outs), tuple(gs))
                return [c if c is None or b else c.sum(axis=0) for c, b in zip(cts, batched)]

            vjp_rule = batched_vjp

        inner = call.with_rules(Rules(rules.name, fun, jvp, vjp_rule, rules.save_outputs))
        outs = cls.apply(*args, call=inner)
        call.out_tree = inner.out_tree
        return outs

    @classmethod
    def output_shape(cls, *shapes, **params):
        raise NotImplementedError("the output shapes of a custom rule are known only by "
                                  "running it")


def _detach(v):
    return v.detach() if isinstance(v, Tensor) and v._level else v


class custom_jvp:  # noqa: N801  (JAX's name)
    """Decorator: a function with a user-defined forward-mode rule, set with :meth:`defjvp`
    (or :meth:`defjvps`); reverse mode and ``vmap`` follow from it (JAX's ``custom_jvp``).

    Use as in JAX::

        @tg.custom_jvp
        def log1pexp(x):
            return tnp.log1p(tnp.exp(x))

        @log1pexp.defjvp
        def log1pexp_jvp(primals, tangents):
            (x,), (x_dot,) = primals, tangents
            return log1pexp(x), x_dot * tnp.where(x > 0, 1 / (1 + tnp.exp(-x)),
                                                  tnp.exp(x) / (1 + tnp.exp(x)))

    Semantics:
        - Outside any transform ``f`` itself runs. Under one, each call is one primitive
          (named after ``f`` on tapes): its value is ``f``'s, its tangent the rule's.
        - The rule gets ``primals`` and ``tangents``, tuples with one entry per positional
          argument (pytrees of the same structure); an argument nothing perturbs gets zeros
          (JAX's ``symbolic_zeros=False``). It returns ``(primal_out, tangent_out)`` with
          ``f``'s output structure, shapes and dtypes. Its primal output should equal
          ``f``'s; tapegrad uses ``f``'s.
        - Reverse mode (``grad``, ``vjp``, ``jacrev``) transposes the rule: the rule must be
          linear in the tangents (as JAX requires). Derivatives of every order differentiate
          the rule, so ``grad(grad(f))`` and ``hessian`` need a rule written with tapegrad
          operations (differentiable in the primals).
        - ``vmap`` batches ``f`` and the rule with ``vmap``; ``jit`` records the primitive
          (``f`` and the rule run inside the compiled program).
        - ``nondiff_argnums``: positional arguments passed to the rule first, before
          ``primals`` and ``tangents``, and left out of both: Python values (functions,
          flags) or arrays that get no derivative (``stop_gradient``). :meth:`defjvps` cannot
          be used with them.
        - Array leaves (Tensors, NumPy arrays) are inputs; other leaves (Python numbers,
          strings) are constants, with tangent ``0`` for numbers and ``None`` otherwise.
        - ``f`` must not use a traced value it closes over (pass it as an argument).

    Args:
        fun: The primal function of positional pytrees (keyword arguments are bound to their
            positions), returning a pytree of Tensors.
        nondiff_argnums: Int or tuple of ints: positions of arguments not differentiated.

    Raises:
        TypeError: if ``fun`` is not callable or ``nondiff_argnums`` is not ints; at a call,
            if the arguments do not bind to ``fun``'s signature; when the rule does not return
            a pair ``(primal_out, tangent_out)`` of ``f``'s output structure, or a tangent has
            another dtype than its primal output.
        ValueError: for an ``nondiff_argnums`` entry out of range at a call, or a tangent of
            another shape than its primal output.
        RuntimeError: if ``f`` is differentiated before a rule was set, or ``f`` uses a
            traced value through a closure.

    References:
        JAX, ``jax.custom_jvp``, and "Custom derivative rules for JAX-transformable Python
        functions" (docs.jax.dev).
    """

    def __init__(self, fun: Callable, nondiff_argnums: int | tuple[int, ...] = ()):
        if not callable(fun):
            raise TypeError(f"custom_jvp: expected a function, got {type(fun).__name__}")
        nd = (nondiff_argnums,) if isinstance(nondiff_argnums, int) else nondiff_argnums
        if isinstance(nondiff_argnums, bool) or not isinstance(nd, (tuple, list)) or not all(
                isinstance(i, int) and not isinstance(i, bool) for i in nd):
            raise TypeError(f"custom_jvp: nondiff_argnums must be an int or a tuple of ints, "
                            f"got {nondiff_argnums!r}")
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(sorted(set(nd)))
        self.jvp: Callable | None = None
        name = getattr(fun, "__name__", "fun")
        self._fn = type(name, (RuleFunction,), {"oper": name})

    def defjvp(self, jvp: Callable, symbolic_zeros: bool = False) -> Callable:
        """Set the rule ``jvp(*nondiff_args, primals, tangents) -> (primal_out,
        tangent_out)``; returns ``jvp``, so it can be used as a decorator.

        Args:
            jvp: The rule.
            symbolic_zeros: Accepted for JAX compatibility with its default ``False``:
                tangents of unperturbed inputs are always passed as zero arrays.

        Raises:
            TypeError: if ``jvp`` is not callable.
            NotImplementedError: for ``symbolic_zeros=True``.
        """
        if not callable(jvp):
            raise TypeError(f"custom_jvp.defjvp: the rule must be callable, got "
                            f"{type(jvp).__name__}")
        if symbolic_zeros:
            raise NotImplementedError(
                "custom_jvp.defjvp: symbolic_zeros=True is not supported; tangents of inputs "
                "nothing perturbs are passed as zero arrays (symbolic_zeros=False).")
        self.jvp = jvp
        return jvp

    def defjvps(self, *jvps: Callable | None) -> None:
        """Set the rule from one function per positional argument,
        ``jvp_i(t_i, primal_out, *primals) -> tangent contribution`` (``None``: no
        dependence), summed (JAX's ``defjvps``).

        Raises:
            TypeError: with ``nondiff_argnums``; for an entry neither callable nor None; at a
                call, if there is not one entry per positional argument.
        """
        if self.nondiff_argnums:
            raise TypeError("custom_jvp.defjvps cannot be used with nondiff_argnums; use "
                            "defjvp.")
        for j in jvps:
            if j is not None and not callable(j):
                raise TypeError(f"custom_jvp.defjvps: each rule must be callable or None, got "
                                f"{type(j).__name__}")

        def jvp(primals, tangents):
            if len(jvps) != len(primals):
                raise TypeError(f"custom_jvp.defjvps: {len(jvps)} rule(s) for "
                                f"{len(primals)} positional argument(s); give one (or None) "
                                "per argument")
            primal_out = self(*primals)
            total = None
            for t, rule in zip(tangents, jvps):
                if rule is None:
                    continue
                part = rule(t, primal_out, *primals)
                total = part if total is None else tree_map(lambda a, b: a + b, total, part)
            if total is None:
                total = tree_map(lambda o: zeros_like(o) if isinstance(o, Tensor) else 0.0,
                                 primal_out)
            return primal_out, total

        self.jvp = jvp

    def _bind(self, args, kwargs) -> tuple:
        if not kwargs:
            return args
        name = self.__name__  # pyright: ignore[reportAttributeAccessIssue]
        try:
            bound = inspect.signature(self.fun).bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"custom_jvp {name}: the arguments do not bind to the function's "
                            f"signature: {e}") from None
        if bound.kwargs:
            raise TypeError(f"custom_jvp {name}: keyword-only arguments "
                            f"({', '.join(bound.kwargs)}) are not supported; make them "
                            "positional")
        return tuple(bound.args)

    def __call__(self, *args, **kwargs):
        args = self._bind(args, kwargs)
        name = self.__name__  # pyright: ignore[reportAttributeAccessIssue]
        n = len(args)
        for i in self.nondiff_argnums:
            if not -n <= i < n:
                raise ValueError(f"custom_jvp {name}: nondiff_argnums {i} is out of range "
                                 f"for {n} positional argument(s)")
        leaves, in_tree = tree_flatten(args)
        if not any((isinstance(v, Tensor) and v._level) or type(v) is WeakScalar
                   for v in leaves):
            return self.fun(*args)  # nothing traces it: the primal function itself
        if self.jvp is None:
            raise RuntimeError(f"custom_jvp: {name} is transformed but has no rule; call "
                               f"{name}.defjvp(rule) first.")
        nd_pos = {i % n for i in self.nondiff_argnums}
        arg_of = [a for a, arg in enumerate(args) for _ in tree_flatten(arg)[0]]
        kinds, diff, weak, inputs = [], [], [], []
        for v, a in zip(leaves, arg_of):
            w = None
            if type(v) is WeakScalar:
                w, v = v.pytype, v.tensor
            elif isinstance(v, (np.ndarray, np.generic)) or hasattr(
                    v, "__cuda_array_interface__"):
                v = Tensor(v)
            k = isinstance(v, Tensor)
            kinds.append(k)
            weak.append(w)
            diff.append(k and w is None and a not in nd_pos and v.dtype.kind in "fcV")
            inputs.append(v)
        call = RuleCall(None, tuple(kinds), tuple(diff), tuple(weak),
                        key=(in_tree, tuple(kinds), tuple(diff), tuple(weak)))
        call.rules = Rules(name, self._flat_fun(in_tree), self._flat_jvp(in_tree, nd_pos, call))
        outs = self._fn.apply(*inputs, call=call)
        outs = outs if isinstance(outs, tuple) else (outs,)
        return tree_unflatten(call.out_tree, list(outs))

    def _flat_fun(self, in_tree):
        def fun(leaves):
            return self.fun(*tree_unflatten(in_tree, leaves))

        return fun

    def _flat_jvp(self, in_tree, nd_pos, call):
        name = self.__name__  # pyright: ignore[reportAttributeAccessIssue]
        who = f"custom_jvp {name}: jvp rule"

        def jvp(leaves, tangents, outs):
            args = tree_unflatten(in_tree, leaves)
            tans = tree_unflatten(in_tree, tangents)
            nd = [tree_map(_detach, args[i]) for i in sorted(nd_pos)]
            primals = tuple(a for i, a in enumerate(args) if i not in nd_pos)
            t = tuple(a for i, a in enumerate(tans) if i not in nd_pos)
            res = self.jvp(*nd, primals, t)  # pyright: ignore[reportOptionalCall]
            if not (isinstance(res, (tuple, list)) and len(res) == 2):
                raise TypeError(f"{who} must return a pair (primal_out, tangent_out), got "
                                f"{type(res).__name__}"
                                + (f" of length {len(res)}" if isinstance(res, (tuple, list))
                                   else ""))
            p_out, t_out = res
            p_leaves, p_tree = tree_flatten(p_out)
            if call.out_tree is not None and p_tree != call.out_tree:
                raise TypeError(f"{who}: primal_out has structure {p_tree}, but {name} returns "
                                f"{call.out_tree}")
            t_leaves, t_tree = _flatten_like(t_out, p_tree)
            if t_tree != p_tree:
                raise TypeError(f"{who}: tangent_out has structure {t_tree}, but primal_out "
                                f"has {p_tree}; return one tangent per output leaf")
            return p_leaves, t_leaves

        return jvp

    def __repr__(self) -> str:
        return f"custom_jvp({getattr(self.fun, '__name__', 'fun')})"


def _flatten_like(tree, like) -> tuple[list, Any]:
    """Leaves of ``tree`` flattened as ``like``: a None where ``like`` has a leaf stays a leaf
    (the tangent of an integer output may be None)."""
    leaves, t = tree_flatten(tree)
    if t == like:
        return leaves, t
    try:
        up_to = like.flatten_up_to(tree)
    except (ValueError, TypeError):
        return leaves, t
    if all(v is None or array_leaf(v) or isinstance(v, numbers.Number) for v in up_to):
        return up_to, like
    return leaves, t
