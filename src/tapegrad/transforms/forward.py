"""Forward mode: ``jvp`` and ``linearize`` (the Jacobians and Hessians built on it are in
:mod:`tapegrad.transforms.jacobians`).

Forward mode owns a trace level like every transform, but its :class:`JVPTrace` keeps no tape:
as each op is recorded it computes the outputs' tangents from the inputs' tangents (stored per
node id). The tangent of an op comes from its ``jvp`` rule when it has one, else from the
transpose of its ``backward``: ``backward(ctx, g)`` is linear in ``g``, so ``J t`` is the vjp
of ``g -> backward(ctx, g)`` applied to the input tangents ``t`` (Townsend, "A new trick for
calculating Jacobian vector products", 2017). Tangent rules are tapegrad operations one level
down, so enclosing transforms record them: forward and reverse mode nest to any order.

References:
    Griewank and Walther, "Evaluating Derivatives", 2nd ed., SIAM 2008 (forward mode, ch. 3).
    Bradbury et al., JAX (semantics and names of jvp and linearize).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tapegrad.core import profiler as _profiler
from tapegrad.core.backend import backend_of
from tapegrad.core.function import new_level, rule_outputs, unbroadcast
from tapegrad.core.tensor import Tensor, const
from tapegrad.core.trace import Trace, apply_step, escaped_rule, interpret, is_escape, run_rule
from tapegrad.core.tree import tree_flatten, tree_unflatten
from tapegrad.transforms.reverse import (
    Traced,
    as_primal,
    check_callable,
    run_traced,
    vjp,
)

__all__ = ["jvp", "linearize", "JVPTrace"]


_PROFILING = _profiler.PROFILING  # nonzero while a tg.profile block is open (in any thread)


def _zeros(shape, dtype, like: Tensor) -> Tensor:
    return const(backend_of(like._concrete()).zeros(shape, dtype))


def _aval(n, c, avals):
    if n >= 0:
        return avals[n]
    return (c.shape, c.dtype) if isinstance(c, Tensor) else None


class JVPTrace(Trace):
    """The trace of one forward-mode transform: tangents per node instead of a tape.

    ``tangents`` maps node ids of this trace to tangent Tensors one level down (a missing node
    has a zero tangent).
    """

    __slots__ = ("tangents",)

    def __init__(self, level: int):
        super().__init__(level, replays=False)
        self.tangents: dict = {}  # (note, the per-entry hook, is this class's)

    def note(self, e) -> None:
        tangents = self.tangents
        ts = [tangents.get(n) if n >= 0 else None for n in e.in_nodes]
        ctx = e.ctx
        if ctx is None or all(t is None for t in ts):
            return
        avals = self.avals
        in_avals = [_aval(n, c, avals) for n, c in zip(e.in_nodes, e.consts)]
        out_avals = [avals[n] for n in e.out_nodes]
        rule = op_tangents if not _PROFILING[0] else _profiler.timed(e.fn, "jvp", op_tangents)
        outs = rule(e.fn, ctx, ts, in_avals, out_avals, e.nondiff, e.watch)
        nondiff = e.nondiff
        for j, (n, t) in enumerate(zip(e.out_nodes, outs)):
            shape, dtype = out_avals[j]
            if t is None or j in nondiff or dtype.kind not in "fcV":
                continue
            if type(t) is not Tensor or t.shape != shape or t.dtype != dtype:
                t = _fit(t, shape, dtype, e.fn)
            tangents[n] = t


_FORCE_TRANSPOSE = False  # tests flip this to compare each jvp rule with the transposed vjp


def op_tangents(cls, ctx, ts, in_avals, out_avals, nondiff=(), watch=None) -> tuple:
    """Output tangents (a tuple, ``None`` for zero) of one op from its input tangents
    (``nondiff``: the outputs marked non-differentiable; ``watch``: the entry's
    :class:`~tapegrad.core.tape.Watch`)."""
    ctx.needs_input_grad = tuple(t is not None for t in ts)
    ctx.out_avals = out_avals
    transpose = cls.jvp is None or _FORCE_TRANSPOSE
    try:
        if transpose:
            return _transpose_tangents(cls, ctx, ts, in_avals, out_avals, nondiff, watch)
        out = run_rule(cls, "jvp", ctx, watch, ts)
    except TypeError as err:
        if not is_escape(err):
            raise
        if transpose and getattr(cls.backward, "once_differentiable", False):
            raise TypeError(
                f"{cls.__name__} has no jvp rule, and its backward, decorated with "
                "@tg.once_differentiable, reads the cotangent as an array, so forward mode "
                f"(jvp, jacfwd, hessian) cannot transpose it. Give {cls.__name__} a static "
                "jvp(ctx, *tangents) rule written with tapegrad operations."
            ) from None
        raise escaped_rule(cls, "backward" if transpose else "jvp", err) from None
    return rule_outputs(cls, "jvp", out, len(out_avals))


def _fit(t, shape, dtype, cls) -> Tensor:
    """Broadcast a rule's tangent to the output's shape and cast it to the output's dtype."""
    if type(t) is not Tensor:
        t = Tensor(np.asarray(t))
    if t.shape != tuple(shape):
        try:
            ok = np.broadcast_shapes(t.shape, tuple(shape)) == tuple(shape)
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(
                f"{cls.__name__}.jvp: tangent of shape {t.shape} does not broadcast to the "
                f"output's shape {tuple(shape)}; a jvp rule must return the output's shape."
            )
        t = t + _zeros(tuple(shape), t.dtype, t)
    if t.dtype != dtype:
        t = t.real if t.dtype.kind == "c" and dtype.kind != "c" else t
        t = t.astype(dtype) if t.dtype != dtype else t
    return t


def _transpose_tangents(cls, ctx, ts, in_avals, out_avals, nondiff, watch) -> tuple:
    """``J t`` as the vjp of the linear map ``g -> backward(ctx, g)`` applied to ``t``.

    The map is linearised at ``g = 1`` rather than ``g = 0``: it is linear, so any point gives
    the same transpose, and rules that special-case a zero cotangent for NaN safety are linear
    only away from zero.
    """
    xp = ctx.backend
    float_outs = [j for j, av in enumerate(out_avals) if av[1].kind in "fcV" and j not in nondiff]
    if not float_outs:
        return (None,) * len(out_avals)
    active = [i for i, t in enumerate(ts) if t is not None]

    def pulled(*gs):
        it = iter(gs)
        glist = [next(it) if j in float_outs else const(xp.zeros(shape, dtype))
                 for j, (shape, dtype) in enumerate(out_avals)]
        grads = run_rule(cls, "backward", ctx, watch, glist)
        grads = rule_outputs(cls, "backward", grads, len(ts))
        res = []
        for i in active:
            shape, dtype = in_avals[i]
            g = grads[i]
            if g is None:
                res.append(const(xp.zeros(shape, dtype)))
                continue
            if type(g) is not Tensor:
                g = const(g if hasattr(g, "shape") else np.asarray(g))
            if g.shape != tuple(shape):
                g = unbroadcast(g, shape, cls, i)
            if g.dtype != dtype:
                g = g.real if g.dtype.kind == "c" and dtype.kind != "c" else g
                g = g.astype(dtype) if g.dtype != dtype else g
            res.append(g)
        return tuple(res)

    seeds = [const(xp.ones(out_avals[j][0], out_avals[j][1])) for j in float_outs]
    _, pull = vjp(pulled, *seeds)
    cts = pull(tuple(ts[i] for i in active))
    out = [None] * len(out_avals)
    for j, c in zip(float_outs, cts):
        out[j] = c
    return tuple(out)


# -- argument handling -------------------------------------------------------------------------
def _flat_primals(primals, who, kinds="fcV"):
    if not isinstance(primals, (tuple, list)):
        raise TypeError(
            f"{who}: primals must be a tuple or list of positional arguments, got "
            f"{type(primals).__name__}; write {who}(f, (x,), (t,)) for one argument."
        )
    primals = tuple(primals)
    leaves, treedef = tree_flatten(primals)
    names = [f"primals[{i}]" for i in range(len(primals))]
    prims = [as_primal(v, i, primals, names, who, kinds=kinds) for i, v in enumerate(leaves)]
    return primals, prims, treedef, names


def _flat_tangents(tangents, primals, prims, treedef, who):
    if not isinstance(tangents, (tuple, list)):
        raise TypeError(
            f"{who}: tangents must be a tuple or list with one entry per primal, got "
            f"{type(tangents).__name__}"
        )
    t_leaves, t_tree = tree_flatten(tuple(tangents))
    if t_tree != treedef:
        raise TypeError(
            f"{who}: tangents have pytree structure {t_tree}, but the primals have structure "
            f"{treedef}; pass one tangent per primal leaf, in the same structure."
        )
    out = []
    for i, (t, p) in enumerate(zip(t_leaves, prims)):
        if isinstance(t, Tensor):
            tt = t
        elif isinstance(t, (int, float, complex)) and not isinstance(t, bool):
            tt = const(np.asarray(t, dtype=p.dtype))
        elif hasattr(t, "shape") and hasattr(t, "dtype"):
            tt = Tensor(t)
        else:
            raise TypeError(f"{who}: tangent {i} is a {type(t).__name__}; expected a Tensor or "
                            f"array of shape {p.shape} and dtype {p.dtype}")
        if tt.shape != p.shape:
            raise ValueError(
                f"{who}: tangent {i} has shape {tt.shape}, but its primal has shape {p.shape}; "
                "tangents must match the primals' shapes and dtypes."
            )
        if tt.dtype != p.dtype:
            raise TypeError(
                f"{who}: tangent {i} has dtype {tt.dtype}, but its primal has dtype {p.dtype}; "
                "tangents must match the primals' dtypes (cast with .astype)."
            )
        out.append(tt)
    return out


def _jvp_core(fun, treedef, prims, tangents, has_aux, who) -> Traced:
    """Run ``fun`` on a forward-mode trace whose inputs (nodes 0, 1, ...) have ``tangents``
    (``None`` is zero); :func:`_tangents_out` reads the outputs' tangents from the result."""
    trace = JVPTrace(new_level())
    trace.tangents.update((node, t) for node, t in enumerate(tangents) if t is not None)
    return run_traced(trace, fun, treedef, prims, has_aux, who)


def _tangents_out(run: Traced) -> list:
    """The tangent of each output leaf of a forward-mode run (``None``: zero)."""
    trace = run.trace
    assert isinstance(trace, JVPTrace)
    tangents = trace.tangents
    return [None if n is None else tangents.get(n) for n in run.out_nodes]


def jvp(fun, primals, tangents, has_aux: bool = False) -> tuple[Any, ...]:
    """Jacobian-vector product (forward mode): ``fun``'s value and its derivative along
    ``tangents``.

    Args:
        fun: Function of ``len(primals)`` positional pytrees returning a pytree of Tensors (or
            ``(out, aux)`` with ``has_aux=True``).
        primals: Tuple (or list) of positional arguments; every leaf is differentiated and must
            be floating or complex (Python floats become float32).
        tangents: Tuple (or list) with the primals' pytree structure, shapes and dtypes.
        has_aux: ``fun`` returns ``(out, aux)``; ``aux`` is returned as is, undifferentiated.

    Returns:
        ``(primals_out, tangents_out)`` (``(primals_out, tangents_out, aux)`` with
        ``has_aux``): ``tangents_out = J(primals) @ tangents`` has ``primals_out``'s structure,
        shapes and dtypes. Outputs that do not depend on the inputs get zero tangents.

    Raises:
        TypeError: if ``fun`` is not callable, ``primals``/``tangents`` are not tuples or
            lists, their structures differ, a tangent's dtype differs from its primal's, a
            primal is integer or boolean, or an output leaf is not numeric.
        ValueError: if a tangent's shape differs from its primal's.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> y, t = tg.jvp(tnp.sin, (tg.Tensor(0.0),), (tg.Tensor(2.0),))
        >>> float(y), float(t)  # sin(0), cos(0) * 2
        (0.0, 2.0)
    """
    check_callable(fun, "jvp")
    primals, prims, treedef, _ = _flat_primals(primals, "jvp")
    tans = _flat_tangents(tangents, primals, prims, treedef, "jvp")
    run = _jvp_core(fun, treedef, prims, tans, has_aux, "jvp")
    t_out = [_zeros(p.shape, p.dtype, p) if t is None else t
             for t, p in zip(_tangents_out(run), run.outs)]
    res = tree_unflatten(run.out_tree, run.outs), tree_unflatten(run.out_tree, t_out)
    return (*res, run.aux) if has_aux else res


def _linearize(fun, primals, has_aux, who, kinds="fcV"):
    primals, prims, treedef, _ = _flat_primals(primals, who, kinds)
    lin = Trace(new_level())  # records the tangent program (below the forward-mode level)
    tin = [lin.new_input(_zeros(p.shape, p.dtype, p)) for p in prims]
    try:
        run = _jvp_core(fun, treedef, prims, tin, has_aux, who)
    finally:
        lin.done = True
    out_tree, p_out, t_out, aux = run.out_tree, run.outs, _tangents_out(run), run.aux
    entries = tuple(lin.entries)
    refs = []
    for t, p in zip(t_out, p_out):
        if t is None:
            refs.append(_zeros(p.shape, p.dtype, p))
        elif t._level == lin.level and t._trace is lin:
            refs.append(t._node)
        else:
            refs.append(t)

    def jvp_fn(*tangents):
        tans = _flat_tangents(tangents, primals, prims, treedef, f"{who}: jvp_fn")
        env = interpret(entries, dict(enumerate(tans)), apply_step, "linearize: jvp_fn")
        return tree_unflatten(out_tree, [env[r] if isinstance(r, int) else r for r in refs])

    return tree_unflatten(out_tree, p_out), jvp_fn, aux


def linearize(fun, *primals):
    """Evaluate ``fun`` once and return its linearization at ``primals``.

    The jvp runs once with symbolic tangents; the tangent computation it records (a linear
    program in the tangents, with the primal residuals as constants) is replayed by
    ``jvp_fn``, so each call costs one tangent pass and no primal work.

    Args:
        fun: Function of positional pytrees returning a pytree of Tensors.
        *primals: The positional arguments; every leaf must be floating.

    Returns:
        ``(primals_out, jvp_fn)``: ``jvp_fn(*tangents)``, with tangents matching the primals'
        structure, shapes and dtypes, returns ``J @ tangents`` with ``primals_out``'s structure.
        ``jvp_fn`` is built of tapegrad ops, so enclosing transforms differentiate it.

    Raises:
        TypeError / ValueError: as :func:`jvp`, for a non-callable ``fun`` and bad primals
            or tangents.
        GuardError: if ``fun`` took a Python decision on a tangent value and new tangents change
            it.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> y, f_jvp = tg.linearize(tnp.exp, tg.Tensor(0.0))
        >>> float(f_jvp(tg.Tensor(3.0)))
        3.0
    """
    check_callable(fun, "linearize")
    out, jvp_fn, _ = _linearize(fun, primals, False, "linearize")
    return out, jvp_fn
