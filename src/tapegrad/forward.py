"""Forward mode and the transforms derived from it: ``jvp``, ``linearize``, ``jacfwd``,
``jacrev``, ``jacobian``, ``hessian`` and ``hvp``.

Forward mode owns a trace level like every transform, but its :class:`JVPTrace` keeps no tape:
as each op is recorded it computes the outputs' tangents from the inputs' tangents (stored per
node id). The tangent of an op comes from its ``jvp`` rule when it has one, else from the
transpose of its ``backward``: ``backward(ctx, g)`` is linear in ``g``, so ``J t`` is the vjp
of ``g -> backward(ctx, g)`` applied to the input tangents ``t`` (Townsend, "A new trick for
calculating Jacobian vector products", 2017). Tangent rules are tapegrad operations one level
down, so enclosing transforms record them: forward and reverse mode nest to any order.

References:
    Griewank and Walther, "Evaluating Derivatives", 2nd ed., SIAM 2008 (forward mode, ch. 3).
    Bradbury et al., JAX (semantics and names of jvp, linearize, jacfwd, jacrev, hessian).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tapegrad import profiler as _profiler
from tapegrad.backend import backend_of
from tapegrad.function import new_level, transform_scope, unbroadcast
from tapegrad.tape import Guard, Trace, check_watch, escaped_rule, is_escape, replay_guard
from tapegrad.tensor import Tensor, const
from tapegrad.transforms import (
    as_primal,
    check_argnums,
    check_callable,
    check_output_dtype,
    grad,
    lower_output,
    select_argnums,
    split_aux,
    vjp,
)
from tapegrad.tree import tree_flatten, tree_unflatten
from tapegrad.vmap import vmap

__all__ = ["jvp", "linearize", "jacfwd", "jacrev", "jacobian", "hessian", "hvp", "JVPTrace"]


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
        outs = rule(e.fn, ctx, ts, in_avals, out_avals)
        nondiff = ctx.__dict__.get("_nondiff", ())
        for j, (n, t) in enumerate(zip(e.out_nodes, outs)):
            shape, dtype = out_avals[j]
            if t is None or j in nondiff or dtype.kind not in "fcV":
                continue
            if type(t) is not Tensor or t.shape != shape or t.dtype != dtype:
                t = _fit(t, shape, dtype, e.fn)
            tangents[n] = t


_FORCE_TRANSPOSE = False  # tests flip this to compare each jvp rule with the transposed vjp


def op_tangents(cls, ctx, ts, in_avals, out_avals) -> tuple:
    """Output tangents (a tuple, ``None`` for zero) of one op from its input tangents."""
    ctx.needs_input_grad = tuple(t is not None for t in ts)
    ctx.out_avals = out_avals
    rule = cls.jvp
    transpose = rule is None or _FORCE_TRANSPOSE
    name = "backward" if transpose else "jvp"
    if ctx._watch is not None:  # an enclosing transform records this rule
        check_watch(cls, ctx, name)
    try:
        if transpose:
            return _transpose_tangents(cls, ctx, ts, in_avals, out_avals)
        out = rule(ctx, *ts)  # pyright: ignore[reportOptionalCall]
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
        raise escaped_rule(cls, name, err) from None
    if type(out) is not tuple:
        out = tuple(out) if isinstance(out, list) else (out,)
    if len(out) != len(out_avals):
        raise ValueError(
            f"{cls.__name__}.jvp returned {len(out)} tangent(s) for {len(out_avals)} output(s); "
            "return one tangent (or None) per output of forward."
        )
    return out


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


def _transpose_tangents(cls, ctx, ts, in_avals, out_avals) -> tuple:
    """``J t`` as the vjp of the linear map ``g -> backward(ctx, g)`` applied to ``t``.

    The map is linearised at ``g = 1`` rather than ``g = 0``: it is linear, so any point gives
    the same transpose, and rules that special-case a zero cotangent for NaN safety are linear
    only away from zero.
    """
    xp = ctx.backend
    nondiff = ctx.__dict__.get("_nondiff", ())
    float_outs = [j for j, av in enumerate(out_avals) if av[1].kind in "fcV" and j not in nondiff]
    if not float_outs:
        return (None,) * len(out_avals)
    active = [i for i, t in enumerate(ts) if t is not None]

    def pulled(*gs):
        it = iter(gs)
        glist = [next(it) if j in float_outs else const(xp.zeros(shape, dtype))
                 for j, (shape, dtype) in enumerate(out_avals)]
        grads = cls.backward(ctx, *glist)
        if type(grads) is not tuple:
            grads = tuple(grads) if isinstance(grads, list) else (grads,)
        if len(grads) != len(ts):
            raise ValueError(
                f"{cls.__name__}.backward returned {len(grads)} value(s) for {len(ts)} "
                "input(s); return one cotangent (or None) per positional input of forward."
            )
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


def _jvp_core(fun, treedef, prims, tangents, has_aux, who):
    """Run ``fun`` on a forward-mode trace: ``(out_tree, primal outs, tangent outs, aux)``
    (``None`` tangents are zero)."""
    trace = JVPTrace(new_level())
    traced = [trace.new_input(p) for p in prims]
    for node, t in enumerate(tangents):
        if t is not None:
            trace.tangents[node] = t
    try:
        with transform_scope():
            out = fun(*tree_unflatten(treedef, traced))
    finally:
        trace.done = True
    out, aux = split_aux(out, has_aux, trace, who)
    out_leaves, out_tree = tree_flatten(out)
    p_out, t_out = [], []
    for i, o in enumerate(out_leaves):
        low, node = lower_output(o, trace, i, out, who)
        p_out.append(low)
        t_out.append(None if node is None else trace.tangents.get(node))
    return out_tree, p_out, t_out, aux


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
    out_tree, p_out, t_out, aux = _jvp_core(fun, treedef, prims, tans, has_aux, "jvp")
    t_out = [_zeros(p.shape, p.dtype, p) if t is None else t for t, p in zip(t_out, p_out)]
    res = tree_unflatten(out_tree, p_out), tree_unflatten(out_tree, t_out)
    return (*res, aux) if has_aux else res


def _replay(entries, env: dict) -> None:
    """Re-apply recorded entries to the Tensors in ``env`` (node -> Tensor), differentiably."""
    for e in entries:
        if type(e) is Guard:
            replay_guard(e, env[e.node], "linearize: jvp_fn")
            continue
        args = [env[n] if n >= 0 else c for n, c in zip(e.in_nodes, e.consts)]
        outs = e.fn.apply(*args, **e.params)
        for n, o in zip(e.out_nodes, outs if isinstance(outs, tuple) else (outs,)):
            env[n] = o


def _linearize(fun, primals, has_aux, who, kinds="fcV"):
    primals, prims, treedef, _ = _flat_primals(primals, who, kinds)
    lin = Trace(new_level())  # records the tangent program (below the forward-mode level)
    tin = [lin.new_input(_zeros(p.shape, p.dtype, p)) for p in prims]
    try:
        out_tree, p_out, t_out, aux = _jvp_core(fun, treedef, prims, tin, has_aux, who)
    finally:
        lin.done = True
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
        env = dict(enumerate(tans))
        _replay(entries, env)
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
