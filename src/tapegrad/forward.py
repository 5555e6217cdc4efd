"""Forward mode and the transforms derived from it: ``jvp``, ``linearize``, ``jacfwd``,
``jacrev``, ``jacobian``, ``hessian`` and ``hvp``.

Forward mode owns a trace level like every transform, but its :class:`JVPTrace` keeps no tape:
``Function.apply`` hands it each record as the op runs, and the trace immediately computes the
outputs' tangents from the inputs' tangents (stored per node id). The tangent of an op comes
from its static ``jvp(ctx, *tangents)`` rule when it has one (``tapegrad.ops.jvp_rules``,
imported by ``tapegrad.ops``, gives them to the core ops), else from the transpose of its
``backward``: ``backward(ctx, g)`` is linear in ``g``, so ``J t`` is the vjp of
``g -> backward(ctx, g)`` applied to the input tangents ``t`` (the "double vjp" construction;
Townsend, "A new trick for calculating Jacobian vector products", 2017). Tangent rules are
tapegrad operations one level down, so enclosing transforms record them: forward and reverse
mode nest to any order (``jvp`` of ``grad``, ``grad`` of ``jvp``, ``jacfwd(jacrev(f))``).

References:
    Griewank and Walther, "Evaluating Derivatives", 2nd ed., SIAM 2008 (forward mode, ch. 3).
    Bradbury et al., JAX (semantics and names of jvp, linearize, jacfwd, jacrev, hessian).
"""

from __future__ import annotations

import numbers

import numpy as np

from tapegrad.function import Function, unbroadcast
from tapegrad.tape import (
    _GUARD_FNS,
    GUARD,
    GuardError,
    Trace,
    gc_paused,
    new_level,
    record_avals,
)
from tapegrad.tensor import Tensor, _primal_of
from tapegrad.transforms import _check_argnums, _leaf_path, _lower, select_argnums, vjp
from tapegrad.tree import tree_flatten, tree_map, tree_unflatten

__all__ = ["jvp", "linearize", "jacfwd", "jacrev", "jacobian", "hessian", "hvp", "JVPTrace"]


def _is_float(dtype) -> bool:
    return np.dtype(dtype).kind in "fc"


def _zeros(shape, dtype, like=None) -> Tensor:
    if like is not None:
        from tapegrad.backend import backend_of

        xp = backend_of(like._array)
    else:
        xp = np
    arr = xp.zeros(shape, dtype)
    if type(arr) is np.ndarray:
        arr.flags.writeable = False
    return Tensor._const(arr)


# -- the forward-mode trace --------------------------------------------------------------------
class _TangentRecorder:
    """Stands in for a Trace's record list: computes tangents as records are appended."""

    __slots__ = ("trace",)

    def __init__(self, trace):
        self.trace = trace

    def append(self, rec) -> None:
        cls = rec[0]
        if cls is GUARD:  # a Python decision: nothing to differentiate
            return
        _, params, ctx, in_nodes, consts, out_nodes, _, _ = rec
        tangents = self.trace.tangents
        ts = [tangents.get(n) if n >= 0 else None for n in in_nodes]
        if ctx is None or all(t is None for t in ts):
            return  # no gradient through this op, or all tangents zero
        in_avals, out_avals = record_avals(rec)
        outs = _op_tangents(cls, ctx, ts, in_avals, out_avals)
        nondiff = ctx.__dict__.get("_nondiff", ())
        j = -1
        for n in out_nodes:
            j += 1
            t = outs[j]
            if n >= 0 and t is not None and j not in nondiff:
                shape, dtype = out_avals[j]
                if dtype.kind in "fc":
                    if type(t) is Tensor:  # the common case: already the output's aval
                        arr = t._array
                        if arr.shape == shape and arr.dtype == dtype:
                            tangents[n] = t
                            continue
                    tangents[n] = _fit(t, shape, dtype, cls)


class JVPTrace(Trace):
    """The trace of one forward-mode transform: tangents per node instead of a tape.

    Internal; created by :func:`jvp` and :func:`linearize`. ``tangents`` maps node ids of this
    trace to tangent Tensors one level down (a missing node has a zero tangent).
    """

    __slots__ = ("tangents",)

    def __init__(self, level: int):
        super().__init__(level, replays=False)
        self.records = _TangentRecorder(self)
        self.tangents: dict = {}


_FORCE_TRANSPOSE = False  # tests flip this to compare each jvp rule with the transposed vjp


def _op_tangents(cls, ctx, ts, in_avals, out_avals) -> tuple:
    """Output tangents (a tuple, ``None`` for zero) of one op from its input tangents."""
    ctx.needs_input_grad = tuple(t is not None for t in ts)
    ctx.out_avals = out_avals
    rule = cls.jvp
    if rule is not None and not _FORCE_TRANSPOSE:
        out = rule(ctx, *ts)
        if type(out) is not tuple:
            out = tuple(out) if isinstance(out, list) else (out,)
        if len(out) != len(out_avals):
            raise ValueError(
                f"{cls.__name__}.jvp returned {len(out)} tangent(s) for {len(out_avals)} "
                "output(s); return one tangent (or None) per output of forward."
            )
        return out
    return _transpose_tangents(cls, ctx, ts, in_avals, out_avals)


def _fit(t, shape, dtype, cls) -> Tensor:
    """Broadcast a rule's tangent to the output's shape and cast it to the output's dtype."""
    from tapegrad.function import _load_tnp

    tnp = _load_tnp()

    if type(t) is not Tensor:
        t = tnp.asarray(t)
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
        t = tnp.broadcast_to(t, tuple(shape))
    if t.dtype != dtype:
        t = t.astype(dtype)
    return t


def _transpose_tangents(cls, ctx, ts, in_avals, out_avals) -> tuple:
    """``J t`` as the vjp of the linear map ``g -> backward(ctx, g)`` applied to ``t``.

    The map is linearised at ``g = 1`` rather than ``g = 0``: it is linear, so any point gives
    the same transpose, and rules that special-case a zero cotangent for NaN safety (sqrt's
    ``where(g == 0, 0, ...)``) are linear only away from zero.
    """
    xp = ctx.backend
    nondiff = getattr(ctx, "_nondiff", ())
    float_outs = [j for j, av in enumerate(out_avals) if _is_float(av[1]) and j not in nondiff]
    if not float_outs:
        return (None,) * len(out_avals)
    active = [i for i, t in enumerate(ts) if t is not None]

    def pulled(*gs):
        glist = []
        k = 0
        for j, (shape, dtype) in enumerate(out_avals):
            if j in float_outs:
                glist.append(gs[k])
                k += 1
            else:
                glist.append(Tensor._const(xp.zeros(shape, dtype)))
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
                res.append(Tensor._const(xp.zeros(shape, dtype)))
                continue
            if type(g) is not Tensor:
                g = Tensor._const(g if hasattr(g, "shape") else np.asarray(g))
            if g.shape != tuple(shape):
                g = unbroadcast(g, shape, cls, i)
            if g.dtype != dtype:
                g = g.astype(dtype)
            res.append(g)
        return tuple(res)

    seeds = [Tensor._const(xp.ones(out_avals[j][0], out_avals[j][1])) for j in float_outs]
    _, pull = vjp(pulled, *seeds)
    cts = pull(tuple(ts[i] for i in active))
    out = [None] * len(out_avals)
    for j, c in zip(float_outs, cts):
        out[j] = c
    return tuple(out)


# -- argument handling -------------------------------------------------------------------------
def _primal_tensor(leaf, i, tree, prefix, who) -> Tensor:
    if isinstance(leaf, Tensor):
        t = leaf
    elif isinstance(leaf, bool) or not (
        isinstance(leaf, (numbers.Number, np.ndarray, np.generic))
        or hasattr(leaf, "__cuda_array_interface__")
    ):
        raise TypeError(
            f"{who}: primal {_leaf_path(tree, i, prefix)} is a {type(leaf).__name__}, which is "
            "not a differentiable value; pytree leaves must be Tensors, arrays or numbers "
            "(close over static values instead)."
        )
    else:
        t = Tensor(leaf)
    if not _is_float(t.dtype):
        raise TypeError(
            f"{who}: primal {_leaf_path(tree, i, prefix)} has dtype {t.dtype} (shape {t.shape}); "
            "forward mode differentiates floating inputs only (JAX would need a float0 "
            "tangent). Close over integer and boolean values (functools.partial) or cast them "
            "with .astype('float32')."
        )
    return t


def _tangent_tensor(t, p: Tensor, i, tree, prefix, who) -> Tensor:
    if type(t) is Tensor and t.shape == p.shape and t.dtype == p.dtype:
        return t  # the common case; the leaf's path is worked out only for an error
    where = _leaf_path(tree, i, prefix)
    if isinstance(t, Tensor):
        tt = t
    elif isinstance(t, (int, float)) and not isinstance(t, bool):
        tt = Tensor._const(np.asarray(t, dtype=p.dtype))
    elif hasattr(t, "shape") and hasattr(t, "dtype"):
        tt = Tensor(t)
    else:
        raise TypeError(
            f"{who}: tangent for primal {where} is a {type(t).__name__}; expected a Tensor or "
            f"array of shape {p.shape} and dtype {p.dtype}"
        )
    if tt.shape != p.shape:
        raise ValueError(
            f"{who}: tangent for primal {where} has shape {tt.shape}, but the primal has shape "
            f"{p.shape}; tangents must match the primals' shapes and dtypes."
        )
    if tt.dtype != p.dtype:
        raise TypeError(
            f"{who}: tangent for primal {where} has dtype {tt.dtype}, but the primal has dtype "
            f"{p.dtype}; tangents must match the primals' dtypes (cast with .astype)."
        )
    return tt


def _flat_primals(primals, who, prefix="primals"):
    if not isinstance(primals, (tuple, list)):
        raise TypeError(
            f"{who}: primals must be a tuple or list of positional arguments, got "
            f"{type(primals).__name__}; write {who}(f, (x,), (t,)) for one argument."
        )
    primals = tuple(primals)
    leaves, treedef = tree_flatten(primals)
    names = [f"{prefix}[{i}]" for i in range(len(primals))]
    prims = [_primal_tensor(v, i, primals, names, who) for i, v in enumerate(leaves)]
    return primals, prims, treedef, names


def _flat_tangents(tangents, primals, prims, treedef, names, who):
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
    return [
        _tangent_tensor(t, p, i, primals, names, who)
        for i, (t, p) in enumerate(zip(t_leaves, prims))
    ]


# -- jvp -------------------------------------------------------------------------------------
def _jvp_core(fun, args, treedef, prims, tangents, has_aux, who):
    """Run ``fun`` on a forward-mode trace.

    Returns ``(out_tree, primal leaves, tangent leaves (None = zero), aux)``.
    """
    trace = JVPTrace(new_level())
    traced = [trace.new_input(p) for p in prims]
    for node, t in enumerate(tangents):
        if t is not None:
            trace.tangents[node] = t
    try:
        with gc_paused():
            out = fun(*tree_unflatten(treedef, traced))
    finally:
        trace.done = True
    aux = None
    if has_aux:
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(
                f"{who}: has_aux=True needs the function to return a pair (output, aux), got "
                f"{type(out).__name__}"
            )
        out, aux = out
        aux = tree_map(lambda v: _lower(v, trace.level, who), aux)
    out_leaves, out_tree = tree_flatten(out)
    p_out, t_out = [], []
    for i, o in enumerate(out_leaves):
        if not isinstance(o, Tensor):
            if isinstance(o, bool) or not isinstance(o, (numbers.Number, np.ndarray, np.generic)):
                raise TypeError(
                    f"{who}: output leaf {_leaf_path((out,), i, 'out')} is a "
                    f"{type(o).__name__}; the function must return a pytree of Tensors, arrays "
                    "or numbers (use has_aux=True for other values)."
                )
            o = Tensor(o)
        if o._level == trace.level:
            p_out.append(_primal_of(o))
            t_out.append(trace.tangents.get(o._node))
        elif o._level > trace.level:
            raise RuntimeError(
                f"{who}: output {_leaf_path((out,), i, 'out')} is traced by an inner transform "
                "that has already finished (a leaked tracer)"
            )
        else:
            p_out.append(o)
            t_out.append(None)
    return out_tree, p_out, t_out, aux


def jvp(fun, primals, tangents, has_aux: bool = False):
    """Jacobian-vector product (forward mode): ``fun``'s value and its derivative along
    ``tangents``.

    Args:
        fun: Function of ``len(primals)`` positional pytrees returning a pytree of Tensors (or
            ``(out, aux)`` with ``has_aux=True``).
        primals: Tuple (or list) of positional arguments; every leaf is differentiated and must
            be floating (Python numbers become float32).
        tangents: Tuple (or list) with the primals' pytree structure, shapes and dtypes.
        has_aux: ``fun`` returns ``(out, aux)``; ``aux`` is returned as is, undifferentiated.

    Returns:
        ``(primals_out, tangents_out)`` (``(primals_out, tangents_out, aux)`` with
        ``has_aux``): ``tangents_out = J(primals) @ tangents`` has ``primals_out``'s structure,
        shapes and dtypes. Outputs that do not depend on the inputs get zero tangents;
        integer and boolean outputs get zero tangents of their own dtype (JAX's float0).

    Raises:
        TypeError: if ``primals``/``tangents`` are not tuples or lists, their structures differ
            (naming both), a tangent's dtype differs from its primal's, a primal is integer or
            boolean (forward mode differentiates floating inputs; close over such values), or
            an output leaf is not numeric.
        ValueError: if a tangent's shape differs from its primal's (naming both).

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> y, t = tg.jvp(tnp.sin, (tg.Tensor(0.0),), (tg.Tensor(2.0),))
        >>> float(y), float(t)  # sin(0), cos(0) * 2
        (0.0, 2.0)
    """
    primals, prims, treedef, names = _flat_primals(primals, "jvp")
    tans = _flat_tangents(tangents, primals, prims, treedef, names, "jvp")
    out_tree, p_out, t_out, aux = _jvp_core(fun, primals, treedef, prims, tans, has_aux, "jvp")
    t_out = [_zeros(p.shape, p.dtype, p) if t is None else t for t, p in zip(t_out, p_out)]
    res = tree_unflatten(out_tree, p_out), tree_unflatten(out_tree, t_out)
    return (*res, aux) if has_aux else res


# -- linearize -----------------------------------------------------------------------------
class _LinearRecorder(list):
    """A record list that also remembers every output node id (including non-differentiable
    outputs, which records mark -1), so the tangent program can be replayed."""

    def __init__(self, trace):
        super().__init__()
        self.trace = trace

    def append(self, rec) -> None:
        if rec[0] is not GUARD:
            n = len(rec[5])
            first = self.trace.n_nodes - n
            rec = rec + (tuple(range(first, first + n)),)
        super().append(rec)


def _guard_fields(rec) -> tuple:
    """``(kind, node, value, where)`` of a guard record (``(GUARD, fields, None)``)."""
    return tuple(rec[1]) if len(rec) == 3 else tuple(rec[1:5])


def _replay(records, env: dict) -> None:
    """Re-apply recorded ops to the Tensors in ``env`` (node -> Tensor), differentiably."""
    for rec in records:
        if rec[0] is GUARD:
            kind, node, value, where = _guard_fields(rec)
            got = _GUARD_FNS[kind](env[node].numpy())
            if got != value:
                raise GuardError(
                    f"linearize: the tangent program took a Python decision at {where} "
                    f"({kind}(...) gave {value!r}); these tangents give {got!r}. Call jvp "
                    "for these tangents instead."
                )
            continue
        fn, params, _, in_nodes, consts = rec[:5]
        args = [env[n] if n >= 0 else c for n, c in zip(in_nodes, consts)]
        outs = fn.apply(*args, **params)
        if type(outs) is not tuple:
            outs = (outs,)
        for n, o in zip(rec[8], outs):
            env[n] = o


def _linearize(fun, primals, has_aux, who):
    primals, prims, treedef, names = _flat_primals(primals, who)
    lin = Trace(new_level())
    lin.records = _LinearRecorder(lin)
    tin = [lin.new_input(_zeros(p.shape, p.dtype, p)) for p in prims]
    try:
        out_tree, p_out, t_out, aux = _jvp_core(fun, primals, treedef, prims, tin, has_aux, who)
    finally:
        lin.done = True
    records = list(lin.records)
    refs = []
    for t, p in zip(t_out, p_out):
        if t is None:
            refs.append(("const", _zeros(p.shape, p.dtype, p)))
        elif t._level == lin.level:
            refs.append(t._node)
        else:
            refs.append(("const", t))
    primals_out = tree_unflatten(out_tree, p_out)

    def jvp_fn(*tangents):
        tans = _flat_tangents(tangents, primals, prims, treedef, names, "linearize: jvp_fn")
        env = dict(enumerate(tans))
        _replay(records, env)
        return tree_unflatten(out_tree, [env[r] if isinstance(r, int) else r[1] for r in refs])

    return primals_out, jvp_fn, aux


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
        structure, shapes and dtypes, returns ``J @ tangents`` with ``primals_out``'s structure
        (equal to ``jvp(fun, primals, tangents)[1]``). ``jvp_fn`` is built of tapegrad ops, so
        enclosing transforms differentiate it.

    Raises:
        TypeError / ValueError: as :func:`jvp`, for bad primals or for tangents given to
            ``jvp_fn`` that do not match the primals.
        GuardError: if ``fun`` took a Python decision on a tangent value and new tangents change
            it.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> y, f_jvp = tg.linearize(tnp.exp, tg.Tensor(0.0))
        >>> float(f_jvp(tg.Tensor(3.0)))
        3.0
    """
    out, jvp_fn, _ = _linearize(fun, primals, False, "linearize")
    return out, jvp_fn


# -- Jacobians ---------------------------------------------------------------------------------
class _Stack(Function):
    """Stack equal-shaped Tensors along a new ``axis`` (private helper of the Jacobians)."""

    oper = "stack"

    @staticmethod
    def forward(ctx, *arrays, axis):
        ctx.axis = axis
        return ctx.backend.stack(arrays, axis=axis)

    @staticmethod
    def backward(ctx, g):
        from tapegrad.ops.movement import GetItem

        n = g.shape[ctx.axis]
        pre = (slice(None),) * ctx.axis
        return tuple(GetItem.apply(g, pre + (i,)) for i in range(n))

    @staticmethod
    def jvp(ctx, *ts):
        shape, dtype = ctx.out_avals[0]
        part = shape[: ctx.axis] + shape[ctx.axis + 1 :]
        xp = ctx.backend
        ts = [Tensor._const(xp.zeros(part, dtype)) if t is None else t for t in ts]
        return _Stack.apply(*ts, axis=ctx.axis)

    @classmethod
    def output_shape(cls, *shapes, axis):
        s = tuple(shapes[0])
        return s[:axis] + (len(shapes),) + s[axis:]


def _stack(parts, axis, shape, dtype, like):
    """Stack ``parts`` along ``axis`` and reshape to ``shape`` (zeros when there are none)."""
    from tapegrad.ops.movement import Reshape

    if not parts:
        return _zeros(shape, dtype, like)
    return Reshape.apply(_Stack.apply(*parts, axis=axis), tuple(shape))


def _jac_setup(fun, argnums, args, kwargs, who):
    _, diff, partial = select_argnums(fun, argnums, args, kwargs, who)
    return diff, partial


def _check_outputs(p_out, out_tree, who):
    for i, o in enumerate(p_out):
        if not isinstance(o, Tensor):
            raise TypeError(
                f"{who}: output leaf {i} of {out_tree} is a {type(o).__name__}; a Jacobian "
                "needs the function to return a pytree of Tensors or arrays."
            )


def _assemble(blocks, out_tree, diff_tree, argnums):
    """``blocks[j][k]``: Jacobian of output leaf j w.r.t. input leaf k -> JAX's nesting."""
    per_out = []
    for row in blocks:
        ins = tree_unflatten(diff_tree, row)
        per_out.append(ins[0] if isinstance(argnums, int) else tuple(ins))
    return tree_unflatten(out_tree, per_out)


def _one_hot(p: Tensor, i: int) -> Tensor:
    from tapegrad.backend import backend_of

    xp = backend_of(p._array)
    e = xp.zeros(p.size, p.dtype)
    e[i] = 1
    e = e.reshape(p.shape)
    if type(e) is np.ndarray:
        e.flags.writeable = False
    return Tensor._const(e)


def jacfwd(fun, argnums=0, has_aux: bool = False):
    """Jacobian of ``fun`` by forward mode: one tangent pass per input element.

    ``fun`` is linearized once (:func:`linearize`), then the tangent program is replayed on
    each basis vector of the selected inputs. Prefer it to :func:`jacrev` when there are fewer
    inputs than outputs.

    Args:
        fun: Function returning a pytree of Tensors (or ``(out, aux)`` with ``has_aux``).
        argnums: Int or tuple of ints: the positional arguments to differentiate (pytrees of
            floating Tensors, arrays or numbers).
        has_aux: ``fun`` returns ``(out, aux)``; the result is then ``(jacobian, aux)``.

    Returns:
        A function with ``fun``'s signature returning the Jacobian: ``fun``'s output pytree
        with each leaf of shape ``out_shape`` replaced by the selected argument's pytree whose
        leaves have shape ``out_shape + in_shape`` (a tuple of such pytrees for a tuple
        ``argnums``), as JAX's ``jacfwd``. Dtypes are the outputs'.

    Raises:
        TypeError: for a bad ``argnums``, integer inputs, or non-array outputs.
        ValueError: if an ``argnums`` entry is out of range.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> tg.jacfwd(lambda x: x * x)(tg.Tensor([1.0, 2.0]))
        Tensor([[2., 0.],
                [0., 4.]], dtype=float32)
    """
    _check_argnums(argnums, "jacfwd")

    def jacfwd_f(*args, **kwargs):
        diff, partial = _jac_setup(fun, argnums, args, kwargs, "jacfwd")
        out, jvp_fn, aux = _linearize(partial, diff, has_aux, "jacfwd")
        p_out, out_tree = tree_flatten(out)
        _check_outputs(p_out, out_tree, "jacfwd")
        in_leaves, diff_tree = tree_flatten(diff)
        prims = [v if isinstance(v, Tensor) else Tensor(v) for v in in_leaves]
        cols = [[[] for _ in prims] for _ in p_out]  # cols[j][k]: list of out-shaped columns
        zero_t = [_zeros(p.shape, p.dtype, p) for p in prims]
        for k, p in enumerate(prims):
            for i in range(p.size):
                ts = list(zero_t)
                ts[k] = _one_hot(p, i)
                res = tree_flatten(jvp_fn(*tree_unflatten(diff_tree, ts)))[0]
                for j, r in enumerate(res):
                    cols[j][k].append(r)
        blocks = []
        for j, o in enumerate(p_out):
            blocks.append(
                [
                    _stack(cols[j][k], o.ndim, o.shape + p.shape, o.dtype, o)
                    for k, p in enumerate(prims)
                ]
            )
        jac = _assemble(blocks, out_tree, diff_tree, argnums)
        return (jac, aux) if has_aux else jac

    jacfwd_f.__name__ = f"jacfwd_{getattr(fun, '__name__', 'fun')}"
    jacfwd_f.__doc__ = f"Jacobian of {getattr(fun, '__name__', 'fun')} (forward mode)."
    return jacfwd_f


def jacrev(fun, argnums=0, has_aux: bool = False):
    """Jacobian of ``fun`` by reverse mode: one backward pass per output element.

    ``fun`` runs once under :func:`~tapegrad.vjp`; its ``vjp_fn`` is applied to each basis
    cotangent. Prefer it to :func:`jacfwd` when there are fewer outputs than inputs.

    Args:
        fun: Function returning a pytree of Tensors (or ``(out, aux)`` with ``has_aux``).
        argnums: Int or tuple of ints: the positional arguments to differentiate.
        has_aux: ``fun`` returns ``(out, aux)``; the result is then ``(jacobian, aux)``.

    Returns:
        A function with ``fun``'s signature returning the Jacobian, nested as in
        :func:`jacfwd` (leaves of shape ``out_shape + in_shape``). Dtypes are the inputs'.

    Raises:
        TypeError: for a bad ``argnums``, integer inputs, or non-array outputs.
        ValueError: if an ``argnums`` entry is out of range.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> tg.jacrev(lambda x: tnp.sum(x * x))(tg.Tensor([1.0, 2.0]))
        Tensor([2., 4.], dtype=float32)
    """
    _check_argnums(argnums, "jacrev")

    def jacrev_f(*args, **kwargs):
        diff, partial = _jac_setup(fun, argnums, args, kwargs, "jacrev")
        try:
            res = vjp(partial, *diff, has_aux=has_aux)
        except TypeError as e:
            if not str(e).startswith("vjp:"):
                raise
            raise TypeError("jacrev:" + str(e)[4:]) from e
        out, vjp_fn = res[0], res[1]
        aux = res[2] if has_aux else None
        p_out, out_tree = tree_flatten(out)
        _check_outputs(p_out, out_tree, "jacrev")
        in_leaves, diff_tree = tree_flatten(diff)
        prims = [v if isinstance(v, Tensor) else Tensor(v) for v in in_leaves]
        zero_ct = [_zeros(o.shape, o.dtype, o) for o in p_out]
        rows = [[[] for _ in prims] for _ in p_out]  # rows[j][k]: list of in-shaped rows
        for j, o in enumerate(p_out):
            for i in range(o.size):
                cts = list(zero_ct)
                cts[j] = _one_hot(o, i)
                res = tree_flatten(vjp_fn(tree_unflatten(out_tree, cts)))[0]
                for k, r in enumerate(res):
                    rows[j][k].append(r)
        blocks = []
        for j, o in enumerate(p_out):
            blocks.append(
                [_stack(rows[j][k], 0, o.shape + p.shape, p.dtype, p) for k, p in enumerate(prims)]
            )
        jac = _assemble(blocks, out_tree, diff_tree, argnums)
        return (jac, aux) if has_aux else jac

    jacrev_f.__name__ = f"jacrev_{getattr(fun, '__name__', 'fun')}"
    jacrev_f.__doc__ = f"Jacobian of {getattr(fun, '__name__', 'fun')} (reverse mode)."
    return jacrev_f


#: Alias of :func:`jacrev`, as in JAX.
jacobian = jacrev


def hessian(fun, argnums=0, has_aux: bool = False):
    """Hessian of scalar ``fun``: ``jacfwd(jacrev(fun))`` (forward-over-reverse).

    Args:
        fun: Function returning a real scalar Tensor (or ``(value, aux)`` with ``has_aux``).
        argnums: Int or tuple of ints: the positional arguments to differentiate.
        has_aux: ``fun`` returns ``(value, aux)``; the result is then ``(hessian, aux)``.

    Returns:
        A function with ``fun``'s signature returning the Hessian: for one array input of shape
        ``in_shape``, a Tensor of shape ``in_shape + in_shape``; for pytrees, nested as
        ``jacfwd(jacrev(fun))`` (input structure within input structure).

    Raises:
        TypeError / ValueError: as :func:`jacfwd` and :func:`jacrev`.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> tg.hessian(lambda x: tnp.sum(x ** 3))(tg.Tensor([1.0, 2.0]))
        Tensor([[ 6.,  0.],
                [ 0., 12.]], dtype=float32)
    """
    return jacfwd(jacrev(fun, argnums, has_aux), argnums, has_aux)


def hvp(fun, primals, tangents):
    """Hessian-vector product ``H(primals) @ tangents`` without forming the Hessian, as the
    gradient of the directional derivative: ``grad(lambda *p: jvp(fun, p, tangents)[1])``
    (reverse-over-forward).

    Costs one forward pass with its tangent pass, then one backward pass through both: a small
    constant times a gradient, whatever the number of parameters (Pearlmutter, "Fast exact
    multiplication by the Hessian", Neural Computation 1994). It is the same product as
    forward-over-reverse ``jvp(grad(fun), ...)`` (JAX's ``hvp`` recipe), which an eager library
    cannot run as cheaply: there the primal gradient is computed alongside its tangent and then
    thrown away (on an MLP loss, every ``x.T @ g`` weight gradient). Reverse-over-forward
    computes nothing it discards: the cotangent of the primal output is zero, so only the
    products the tangent output depends on are pulled back.

    Args:
        fun: Scalar-valued function (shape ``()``, floating) of ``len(primals)`` positional
            pytrees; the gradient is taken with respect to all of them.
        primals: Tuple (or list) of positional arguments (floating leaves).
        tangents: Tuple (or list) with the primals' structure, shapes and dtypes.

    Returns:
        ``H @ tangents`` with the structure of ``primals[0]`` for one primal, else a tuple with
        one pytree per primal; leaves have the primals' shapes and dtypes.

    Raises:
        TypeError: if ``primals`` is not a non-empty tuple or list; as :func:`jvp` for tangents
            whose structure or dtype differ from the primals'.
        ValueError: as :func:`jvp` for tangent shapes; if ``fun`` does not return a real
            scalar.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> tg.hvp(lambda x: tnp.sum(x ** 3), (tg.Tensor([1.0, 2.0]),), (tg.Tensor([1.0, 0.0]),))
        Tensor([6., 0.], dtype=float32)
    """
    from tapegrad.transforms import grad

    if not isinstance(primals, (tuple, list)):
        raise TypeError(
            f"hvp: primals must be a tuple or list of positional arguments, got "
            f"{type(primals).__name__}"
        )
    n = len(primals)
    if n == 0:
        raise TypeError("hvp: needs at least one primal")

    def directional_derivative(*ps):
        out, t_out = jvp(fun, ps, tangents)
        if not (
            isinstance(out, Tensor) and out.ndim == 0 and np.issubdtype(out.dtype, np.floating)
        ):
            desc = (
                f"shape {out.shape} and dtype {out.dtype}"
                if isinstance(out, Tensor)
                else type(out).__name__
            )
            raise ValueError(
                f"hvp: fun must return a real scalar (shape () and a floating dtype), got {desc}"
            )
        return t_out

    h = grad(directional_derivative, argnums=tuple(range(n)))(*primals)
    return h[0] if n == 1 else h
