"""Structured control flow: ``scan``, ``fori_loop``, ``while_loop``, ``cond`` and ``switch``.

Each construct is one primitive. Its tape entry holds the body as a sub-program (a
:class:`~tapegrad.Tape` traced once, on the shapes and dtypes of the carry), so a loop of any
trip count is one entry on the tape, one step of a ``jit`` program, and the body is compiled
once (:class:`~tapegrad.program.Program`).

Values a body reads from its surroundings (closures over Tensors that an enclosing transform
traces) are found while the body is traced and become explicit inputs of the primitive
(JAX's closure conversion), so every transform sees them.

Every rule is written with these same primitives on Tensors, so the transforms compose to any
order: the ``backward`` of a scan is a reverse scan whose body is the vjp of the forward body,
its ``jvp`` a scan of the body's jvp, its batching rule a scan of the batched body.

Memory of reverse mode through ``scan`` (JAX's default): the forward keeps, per iteration, the
carry at its start and every residual its backward rules read (stacked outputs of the
primitive, ``_residuals.py``), so the backward is one reverse scan of the body's backward rules
that recomputes nothing. ``remat=True`` keeps only the carries and recomputes each iteration's
intermediates from its carry (remat per step: the body's intermediates are held for one
iteration at a time, and the backward costs about two forward passes of the body); a body
wrapped in a checkpoint policy keeps what the policy selects. ``while_loop`` keeps the carries
and recomputes (its trip count is known only when it ends). With ``checkpoint=k`` the forward
keeps no carries and the backward is one ``revolve`` primitive holding at most ``k`` (binomial
checkpointing, ``_revolve.py``).
"""

from __future__ import annotations

import numbers
from typing import Any

import attrs
import numpy as np

from tapegrad.core.backend import device_of
from tapegrad.core.function import Function, Traits, _state, new_level, transform_scope
from tapegrad.core.program import Program
from tapegrad.core.subprogram import SubProgram
from tapegrad.core.tape import freeze
from tapegrad.core.tensor import Tensor, const
from tapegrad.core.trace import Trace, apply_step, interpret
from tapegrad.core.tree import tree_flatten, tree_unflatten
from tapegrad.ops import Concatenate, Where
from tapegrad.transforms import _body_cache, _control_check, _revolve
from tapegrad.transforms._revolve import check_checkpoint

__all__ = ["scan", "fori_loop", "while_loop", "cond", "switch", "Body"]


# -- sub-programs -------------------------------------------------------------------------------
class _BodyTrace(Trace):
    """The trace of a body: a Tensor of an enclosing level that an op reads (a closure) becomes
    a new input of the sub-program (``lifted``), so the enclosing transform sees it as an
    input of the control-flow primitive rather than the body's ops one by one."""

    __slots__ = ("lifted", "lift_nodes", "_lift_map")

    def __init__(self, level: int):
        super().__init__(level, replays=True)
        self.lifted: list = []
        self.lift_nodes: list = []
        self._lift_map: dict = {}

    def lift(self, t: Tensor) -> Tensor:
        """This trace's input standing for the enclosing value ``t``."""
        got = self._lift_map.get(id(t))
        if got is None:
            got = self.new_input(const(t._concrete()))
            self._lift_map[id(t)] = got
            self.lifted.append(t)
            self.lift_nodes.append(got._node)
        return got

    def record(self, fn, args, params, needs):
        level = self.level
        if any(type(a) is Tensor and 0 < a._level < level for a in args):
            args = tuple([self.lift(a) if type(a) is Tensor and 0 < a._level < level else a
                          for a in args])
        return super().record(fn, args, params, needs)


def _flat_treedef(n: int):
    return tree_flatten(tuple(range(n)))[1]


class Body(SubProgram):
    """A sub-program of a control-flow primitive: a traced function of a flat list of arrays
    (the explicit inputs, then the values it closed over) returning a flat list of arrays.

    Attributes:
        tape: The :class:`~tapegrad.Tape` of the body (printed nested in its parent's listing,
            written nested by ``Tape.to_json``).
        name: The traced function's name, for listings and messages.
        out_avals: ``(shape, dtype)`` of each output.
    """

    __slots__ = ("out_avals", "_prog", "_derived", "_fuse")

    kind = "control.body"

    def __init__(self, tape, name: str, fuse: bool = False):
        super().__init__(tape, name)
        self.out_avals = tuple((tuple(s), np.dtype(d)) for s, d in tape.out_avals)
        self._prog = None
        self._derived: dict = {}
        self._fuse = fuse  # compiled with jit's fusion (a body of a fused program)

    def fused(self) -> Body:
        """This body compiled with ``jit``'s fusion (its elementwise regions as kernels)."""
        if self._fuse:
            return self
        return self.derived("fused", lambda: Body(self.tape, self.name, fuse=True))

    def run(self, arrays) -> tuple:
        """The outputs on backend arrays, through the compiled program."""
        prog = self._prog
        if prog is None:
            prog = self._prog = Program(self.tape, fuse=self._fuse)
        return prog(list(arrays))

    def _ready(self, arrays):
        """The compiled program and the device of ``arrays`` (like the loop's inputs), or
        ``(program, None)`` where the program must run through its call (a first run that
        compiles kernels or checks a loaded tape, or inside ``tg.debug_nans``)."""
        prog = self._prog
        if prog is None:
            prog = self._prog = Program(self.tape, fuse=self._fuse)
        if prog._cold or prog._unchecked or _state.debug:
            return prog, None
        for a in arrays:
            if type(a) is not np.ndarray and hasattr(a, "shape"):
                return prog, device_of(a)
        return prog, "cpu"

    def runner(self, arrays):
        """A function of backend arrays (like ``arrays``), given as positional arguments,
        returning the outputs: the compiled program's function itself where nothing needs
        checking per call (a loop calls it once per iteration, inside one
        :func:`transform_scope`), else :meth:`run`."""
        prog, dev = self._ready(arrays)
        return (lambda *a: prog(list(a))) if dev is None else prog._compiled(dev)

    def looper(self, arrays, n_carry: int, n_xs: int, n_save: int):
        """The body's loop as one generated function (``Program.loop``), or None where the
        iterations must run one call at a time (a program whose first run compiles or checks
        it, or inside ``tg.debug_nans``, which checks every op)."""
        prog, dev = self._ready(arrays)
        return None if dev is None else prog.loop(dev, n_carry, n_xs, n_save)

    def apply(self, tensors) -> list:
        """The outputs on Tensors: every entry through its Function's ``apply`` (so that the
        transforms in progress see each primitive)."""
        tape = self.tape
        env = interpret(tape.entries, dict(zip(tape.in_nodes, tensors)), apply_step,
                        self.name)
        return [env[r] if isinstance(r, int) else (r[1] if isinstance(r[1], Tensor)
                                                   else const(r[1])) for r in tape.out_refs]

    def derived(self, key, make):
        """A body derived from this one (its vjp, jvp or batched form), traced once per key."""
        got = self._derived.get(key)
        if got is None:
            got = self._derived[key] = make()
        return got

    def outputs_only(self, keep: tuple) -> Body:
        """This body computing only its outputs at the positions ``keep`` (in order); a
        compiled program of it drops the work only the others needed."""
        tape = self.tape

        def make():
            return Body(attrs.evolve(tape, out_refs=tuple(tape.out_refs[i] for i in keep),
                                     out_avals=tuple(tape.out_avals[i] for i in keep),
                                     out_treedef=_flat_treedef(len(keep))), self.name,
                        fuse=self._fuse)

        return self.derived(("outputs", keep), make)


def trace_body(fun, examples, name: str) -> tuple[Body, list]:
    """Trace ``fun`` (a flat list of input Tensors -> a flat list of output leaves) on inputs
    with the values ``examples`` (backend arrays). Returns the :class:`Body` and the enclosing
    traced Tensors it closed over (its extra inputs, after the explicit ones, in order)."""
    trace = _BodyTrace(new_level())
    traced = [trace.new_input(const(a)) for a in examples]
    try:
        with transform_scope():
            outs = fun(traced)
        refs, avals = [], []
        for o in outs:
            if type(o) is not Tensor:
                o = Tensor(o)
            b = o._box
            if b is not None and b.level == trace.level and b.trace is trace:
                refs.append(b.node)
            elif 0 < o._level < trace.level:
                refs.append(trace.lift(o)._node)  # an enclosing value passed through
            elif o._level > trace.level:
                raise RuntimeError(f"{name}: an output is traced by an inner transform that has "
                                   "already finished (a leaked tracer)")
            else:
                refs.append(("const", o))
            avals.append((tuple(o.shape), o.dtype))
    finally:
        trace.done = True
    in_nodes = [t._node for t in traced] + trace.lift_nodes
    tape = freeze(trace, in_nodes, _flat_treedef(len(in_nodes)), refs, avals,
                  _flat_treedef(len(refs)))
    return Body(tape, name), list(trace.lifted)


def _closed(fun, examples, name: str) -> Body:
    """:func:`trace_body` for a function of its explicit inputs only (a rule's derived body)."""
    body, lifted = trace_body(fun, examples, name)
    if lifted:  # pragma: no cover - derived bodies read only their inputs
        raise RuntimeError(f"{name}: a derived body closed over a traced value")
    return body


def _traced_once(fns, extra, trace):
    """Bodies traced once per signature (:mod:`tapegrad.transforms._body_cache`): ``trace()``
    returns ``(bodies, lifted, aux)`` (``lifted``: per body, the enclosing Tensors it read);
    a call with the signature of an earlier one reuses its bodies and ``aux``, its lifted
    inputs being the new call's Tensors in the same places."""
    sig = _body_cache.signature(fns, extra)
    hit = _body_cache.lookup(sig)
    if hit is not None and sig is not None:
        bodies, positions, aux = hit
        lifted = []
        for b, pos in zip(bodies, positions):
            got = sig.take(pos, b.tape.in_avals[b.n_in - len(pos):])
            if got is None:
                break
            lifted.append(got)
        else:
            return bodies, lifted, aux
    bodies, lifted, aux = trace()
    if sig is not None:
        positions = [sig.positions(lift) for lift in lifted]
        if all(p is not None for p in positions):
            _body_cache.store(sig, (bodies, positions, aux))
    return bodies, lifted, aux


def _avals_key(leaves) -> tuple:
    return tuple((tuple(t.shape), t.dtype) for t in leaves)


# -- helpers ----------------------------------------------------------------------------------
def _fname(f) -> str:
    return getattr(f, "__name__", type(f).__name__)


def _is_float(dtype) -> bool:
    return np.dtype(dtype).kind in "fcV"


def _aval_str(aval) -> str:
    shape, dtype = aval
    return f"{np.dtype(dtype).name}{list(shape)}"


def _as_leaf(v, who: str, what: str) -> Tensor:
    """A pytree leaf as a Tensor (numbers and arrays become constants)."""
    if isinstance(v, Tensor):
        return v
    if isinstance(v, (numbers.Number, np.ndarray, np.generic)):
        return Tensor(v)
    raise TypeError(f"{who}: {what} holds a leaf of type {type(v).__name__}; leaves must be "
                    "Tensors, arrays or numbers.")


def _leaves(tree, who: str, what: str) -> tuple[list, Any]:
    leaves, treedef = tree_flatten(tree)
    return [_as_leaf(v, who, what) for v in leaves], treedef


def _zeros(aval) -> Tensor:
    shape, dtype = aval
    return const(np.zeros(shape, dtype))


def _example(t: Tensor):
    return t._concrete()


def _any_traced(tensors) -> bool:
    return any(type(t) is Tensor and t._level for t in tensors)


def _check_leaves(who, fname, what, got, want, got_tree, want_tree, fix: str,
                  source: str) -> list:
    """Output leaves of a body checked against the expected structure, shapes and dtypes;
    Python numbers and arrays are cast to the expected dtype."""
    if got_tree != want_tree:
        raise TypeError(f"{who}: {fname} returned {what} with structure {got_tree}, but "
                        f"expected {want_tree} (the structure of {source}). {fix}")
    res = []
    for i, (v, (shape, dtype)) in enumerate(zip(got, want)):
        if not isinstance(v, Tensor):
            if isinstance(v, (numbers.Number, np.ndarray, np.generic)):
                v = const(np.asarray(v, dtype=dtype))
            else:
                raise TypeError(f"{who}: {fname} returned {what} leaf {i} of type "
                                f"{type(v).__name__}; expected a Tensor.")
        if tuple(v.shape) != tuple(shape) or v.dtype != dtype:
            raise TypeError(
                f"{who}: {fname} returned {what} leaf {i} of type "
                f"{_aval_str((v.shape, v.dtype))}, but {source} has type "
                f"{_aval_str((shape, dtype))}. {fix}")
        res.append(v)
    return res


def _apply(fn, *args, **params) -> tuple:
    """``fn.apply(*args, **params)``, its outputs always as a tuple."""
    out = fn.apply(*args, **params)
    return out if isinstance(out, tuple) else (out,)


def _nonzero(g):
    """``g``, or None for a constant of zeros (or None)."""
    if g is None or (type(g) is Tensor and not g._level and not g._concrete().any()):
        return None
    return g


def _outputs(arrays: list):
    """A forward's outputs: one array alone (a primitive's single-output form), else a tuple."""
    return arrays[0] if len(arrays) == 1 else tuple(arrays)


# -- scan -------------------------------------------------------------------------------------
def _kept_plan(residuals):
    """The residual plan a scan's ``residuals`` parameter names, or None: for none, and for a
    scan read from a tape file (a loaded tape has no record of what each op saved, so the
    backward of its replay treats the kept residuals as outputs and recomputes)."""
    if residuals is None or residuals[0].tape.loaded:
        return None
    from tapegrad.transforms._residuals import plan_of

    return plan_of(residuals)


def _scan_prune(params: dict, used: tuple):
    """A scan computing fewer outputs (``Traits.prune``): stacked ``ys`` nothing reads are
    dropped from the body (with the work only they need), and with no saved carry read, none is
    saved. The carries stay (each iteration needs them)."""
    body, n_carry, save = params["body"], params["n_carry"], params["save"]
    n_ys = len(body.out_avals) - n_carry
    ys_used = used[n_carry:n_carry + n_ys]
    save_used = any(used[n_carry + n_ys:])
    if all(ys_used) and (save_used or not save):
        return None
    keep = tuple(range(n_carry)) + tuple(n_carry + j for j, u in enumerate(ys_used) if u)
    new: dict = {**params, "residuals": None}  # (what a backward reads: a program has none)
    if not all(ys_used):
        new["body"] = body.outputs_only(keep)
    if save and not save_used:
        new["save"] = False
    kept = keep + (tuple(range(n_carry + n_ys, len(used))) if new["save"] else ())
    return new, kept


class Scan(Function):
    """The primitive behind :func:`scan`: inputs ``consts + init + xs`` (leaves), outputs
    ``carry + ys`` and, with ``save``, the carry at the start of each iteration (stacked)."""

    traits = Traits(prune=_scan_prune)

    # runs tapegrad ops (or a recorded body) on its inputs: each computes bfloat16 itself
    bfloat16_native = True

    oper = "scan"
    _ctx_arrays_recomputed = True
    check_loaded = staticmethod(_control_check.check_scan)  # a tape file's entry (Tape.from_json)

    @staticmethod
    def forward(ctx, *arrays, body, n_consts, n_carry, length, reverse, unroll, save,
                checkpoint=None, residuals=None):
        xp = ctx.backend
        ctx.params = dict(body=body, n_consts=n_consts, n_carry=n_carry, length=length,
                          reverse=reverse, unroll=unroll, save=save, checkpoint=checkpoint,
                          residuals=residuals)
        consts = list(arrays[:n_consts])
        carry = list(arrays[n_consts:n_consts + n_carry])
        xs = arrays[n_consts + n_carry:]
        n = xs[0].shape[0] if xs else length  # the stacked xs say how long (a while's backward)
        ys = [xp.empty((n,) + tuple(s), d) for s, d in body.out_avals[n_carry:]]
        cs = [xp.empty((n,) + c.shape, c.dtype) for c in carry] if save else []
        k = min(n, unroll)
        chunks = (n // k) if k > 1 else 0
        rest = n - chunks * k
        # ``unroll=k``: whole chunks of k iterations run as one body (k copies of it, traced
        # once); the iterations left over run one at a time
        if chunks:
            run_k = _unrolled(body, k, n_carry, n_consts, reverse, save).runner(list(arrays))
            with transform_scope():
                for j in (range(chunks - 1, -1, -1) if reverse else range(chunks)):
                    lo = rest + j * k if reverse else j * k
                    outs = run_k(*carry, *[x[lo:lo + k] for x in xs], *consts)
                    carry = list(outs[:n_carry])
                    for b, y in zip(ys + cs, outs[n_carry:]):
                        b[lo:lo + k] = y
        order = range(rest - 1, -1, -1) if reverse else range(n - rest, n)
        loop = body.looper(arrays, n_carry, len(xs), len(cs)) if rest else None
        if loop is not None:  # the loop as code: carries in locals, rows read and written inline
            with transform_scope():
                carry = loop(order, *carry, *xs, *consts, *ys, *cs)
        elif rest:  # one compiled call per iteration (first runs, tg.debug_nans)
            run = body.runner(arrays)
            rows = list(zip(*[list(x) for x in xs])) if xs else [()] * n  # each iteration's x
            with transform_scope():
                for i in order:
                    for b, c in zip(cs, carry):
                        b[i] = c
                    outs = run(*carry, *rows[i], *consts)
                    carry = outs[:n_carry]
                    for b, y in zip(ys, outs[n_carry:]):
                        b[i] = y
        # (with residuals, the stacked ones past the body's own ys are the backward's too)
        plan = _kept_plan(residuals)
        final = [xp.array(c, copy=True) for c in carry]
        kept: list = []
        if plan is not None:  # the stacked residuals, and the outputs that are residuals too
            kept = ys[len(plan.body.out_avals) - n_carry:]
            src = _kept_sources(plan, n_carry)
            kept += ([final[i] for k, i in src if k == "carry"]
                     + [ys[i] for k, i in src if k == "y"])
        ctx.save_for_backward(*arrays, *cs, *kept)
        ctx.n_in = len(arrays)
        return _outputs(final + ys + cs)

    @staticmethod
    def backward(ctx, *gs):
        p = ctx.params
        saved = ctx.saved_tensors
        n_consts, n_carry = p["n_consts"], p["n_carry"]
        ins = saved[:ctx.n_in]
        consts = list(ins[:n_consts])
        init = list(ins[n_consts:n_consts + n_carry])
        xs = list(ins[n_consts + n_carry:])
        body = p["body"]
        n_ys = len(body.out_avals) - n_carry
        g_carry = list(gs[:n_carry])
        g_ys = list(gs[n_carry:n_carry + n_ys])
        if p.get("checkpoint") and not p["save"]:  # binomial checkpointing
            return _revolve_backward(body, consts, init, xs, g_carry, g_ys,
                                     ctx.needs_input_grad, p)
        plan = _kept_plan(p.get("residuals"))
        if plan is not None and p["save"]:  # each iteration's residuals kept
            n_user = len(plan.body.out_avals) - n_carry
            cs = list(saved[ctx.n_in:ctx.n_in + n_carry])
            src = _kept_sources(plan, n_carry)
            it = iter(saved[ctx.n_in + n_carry:])
            stacked = [next(it) for k, _ in src if k == "stack"]
            finals = {i: next(it) for k, i in src if k == "carry"}
            outs_y = {i: next(it) for k, i in src if k == "y"}
            g_stacked = [_nonzero(g) for g in g_ys[n_user:]]
            res, g_res = [], []
            for k, i in src:  # (a residual read from an output has its cotangent there)
                res.append(stacked[i] if k == "stack" else outs_y[i] if k == "y"
                           else _after(cs[i], finals[i], p["reverse"]))
                g_res.append(g_stacked[i] if k == "stack" else None)
            return _residual_backward(plan, consts, init, xs, cs, res, g_carry,
                                     g_ys[:n_user], [_nonzero(g) for g in gs[n_carry + n_ys:]],
                                     g_res, ctx.needs_input_grad, p)
        if p["save"]:
            cs = list(saved[ctx.n_in:])
            g_cs = list(gs[n_carry + n_ys:])
        else:  # the carries again, from a forward that keeps them
            outs = _apply(Scan, *ins, **{**p, "save": True})
            cs = list(outs[n_carry + n_ys:])
            g_cs = [None] * n_carry
        needs = ctx.needs_input_grad
        return _scan_backward(body, consts, init, xs, cs, g_carry, g_ys, g_cs, needs, p)

    @staticmethod
    def jvp(ctx, *ts):
        p = ctx.params
        ins = ctx.saved_tensors[:ctx.n_in]
        return _scan_jvp(ins, ts, p)

    @staticmethod
    def batch(args, batched, size, **p):
        return _scan_batch(args, batched, size, p)

    @classmethod
    def output_shape(cls, *shapes, **params):
        raise NotImplementedError("scan's outputs are known by tracing its body")


def _unrolled(body: Body, k: int, n_carry: int, n_consts: int, reverse: bool,
              save: bool) -> Body:
    """``k`` iterations of a scan's ``body`` as one body (traced once per ``k``): inputs
    ``carry + xs chunks (k, ...) + consts``, outputs ``carry + ys (k, ...)`` and, with ``save``,
    the carry at the start of each of the k iterations (stacked)."""
    def make():
        avals = body.tape.in_avals
        n_x = len(avals) - n_carry - n_consts
        y_avals = body.out_avals[n_carry:]

        def step(leaves):
            carry = leaves[:n_carry]
            xs = leaves[n_carry:n_carry + n_x]
            consts = leaves[n_carry + n_x:]
            ys: list = [[None] * k for _ in y_avals]
            cs: list = [[None] * k for _ in range(n_carry)]
            for i in (range(k - 1, -1, -1) if reverse else range(k)):
                for c, v in zip(cs, carry):
                    c[i] = v
                outs = body.apply(list(carry) + [x[i] for x in xs] + list(consts))
                carry = outs[:n_carry]
                for y, v in zip(ys, outs[n_carry:]):
                    y[i] = v
            stacked = [Concatenate.apply(*[v.reshape((1,) + tuple(v.shape)) for v in y], axis=0)
                       for y in ys + (cs if save else [])]
            return list(carry) + stacked

        ex = ([np.zeros(s, d) for s, d in avals[:n_carry]]
              + [np.zeros((k,) + tuple(s), d) for s, d in avals[n_carry:n_carry + n_x]]
              + [np.zeros(s, d) for s, d in avals[n_carry + n_x:]])
        got = _closed(step, ex, f"unroll{k}({body.name})")
        return got.fused() if body._fuse else got

    return body.derived(("unroll", k, n_carry, n_consts, reverse, save), make)


def _scan_backward(body, consts, init, xs, cs, g_carry, g_ys, g_cs, needs, p):
    """Cotangents of ``consts + init + xs``: a reverse scan of the body's vjp over the saved
    carries ``cs``."""
    n_consts, n_carry = len(consts), len(init)
    avals = body.out_avals
    carry_avals = avals[:n_carry]
    y_avals = avals[n_carry:]
    kc = [i for i in range(n_consts) if needs[i] and _is_float(consts[i].dtype)]
    kk = [i for i in range(n_carry) if _is_float(carry_avals[i][1])]
    kx = [i for i in range(len(xs)) if needs[n_consts + n_carry + i]
          and _is_float(xs[i].dtype)]
    ky = [j for j in range(len(y_avals)) if _is_float(y_avals[j][1])]
    res: list = [None] * (n_consts + n_carry + len(xs))
    if not kk and not ky:
        return tuple(res)
    const_avals = [(tuple(c.shape), c.dtype) for c in consts]
    x_avals = [(tuple(x.shape[1:]), x.dtype) for x in xs]
    key = ("vjp", tuple(kc), tuple(kx))

    def make():
        def step(leaves):
            it = iter(leaves)
            acc = [next(it) for _ in kc]
            ct = [next(it) for _ in kk]
            c_i = [next(it) for _ in range(n_carry)]
            x_i = [next(it) for _ in xs]
            gy = [next(it) for _ in ky]
            gc = [next(it) for _ in kk]
            cst = [next(it) for _ in range(n_consts)]
            cts = _vjp_of(body, c_i + x_i + cst,
                          [n_carry + len(xs) + i for i in kc] + list(kk)
                          + [n_carry + i for i in kx],
                          list(kk) + [n_carry + j for j in ky], ct + gy)
            new_acc = [a + b for a, b in zip(acc, cts[:len(kc)])]
            new_ct = [a + b for a, b in zip(cts[len(kc):len(kc) + len(kk)], gc)]
            return new_acc + new_ct + cts[len(kc) + len(kk):]

        ex = ([_zeros(const_avals[i]) for i in kc] + [_zeros(carry_avals[i]) for i in kk]
              + [_zeros(a) for a in carry_avals] + [_zeros(a) for a in x_avals]
              + [_zeros(y_avals[j]) for j in ky] + [_zeros(carry_avals[i]) for i in kk]
              + [_zeros(a) for a in const_avals])
        return _closed(step, [e._array for e in ex], f"vjp({body.name})")

    bwd = body.derived(key, make)

    def z(t, aval):
        return t if t is not None else _zeros(aval)

    acc0 = [_zeros(const_avals[i]) for i in kc]
    ct0 = [z(g_carry[i], carry_avals[i]) for i in kk]
    length = cs[0].shape[0] if cs else p["length"]
    g_y = [z(g_ys[j], ((length,) + tuple(y_avals[j][0]), y_avals[j][1])) for j in ky]
    g_c = [z(g_cs[i], ((length,) + tuple(carry_avals[i][0]), carry_avals[i][1])) for i in kk]
    args = consts + acc0 + ct0 + cs + xs + g_y + g_c
    outs = _apply(Scan, *args, body=bwd, n_consts=n_consts, n_carry=len(kc) + len(kk),
                      length=length, reverse=not p["reverse"], unroll=p["unroll"],
                      save=_any_traced(args))
    outs = outs if isinstance(outs, tuple) else (outs,)
    _place_cotangents(res, outs, kc, kk, kx, needs, n_consts, n_carry)
    return tuple(res)


def _place_cotangents(res: list, outs, kc, kk, kx, needs, n_consts: int, n_carry: int) -> None:
    """Write the outputs of a reverse scan of a body's vjp into ``res`` (one slot per input
    ``consts + init + xs``): the accumulated cotangents of the consts ``kc``, the final
    cotangents of the carries ``kk`` (where ``needs`` wants them), then the stacked
    cotangents of the xs ``kx``."""
    for i, v in zip(kc, outs[:len(kc)]):
        res[i] = v
    for i, v in zip(kk, outs[len(kc):len(kc) + len(kk)]):
        if needs[n_consts + i]:
            res[n_consts + i] = v
    nacc = len(kc) + len(kk)
    for i, v in zip(kx, outs[nacc:nacc + len(kx)]):
        res[n_consts + n_carry + i] = v


class Revolve(Function):
    """The backward pass of a checkpointed ``scan`` or ``while_loop``.

    Inputs: ``consts + init + xs + g_carry + g_ys`` and, for a while loop, ``count`` and the
    condition's constants. Outputs: the cotangents of the constants in ``kc``, of the float
    carries ``kk`` (of ``init``) and of the xs in ``kx``.
    """

    # runs tapegrad ops (or a recorded body) on its inputs: each computes bfloat16 itself
    bfloat16_native = True

    oper = "revolve"
    _ctx_arrays_recomputed = True

    @staticmethod
    def forward(ctx, *arrays, body, vjp_body, n_consts, n_carry, n_xs, kc, kk, kx, ky, length,
                reverse, checkpoint, cond_body, n_cconsts):
        xp = ctx.backend
        ctx.params = dict(body=body, vjp_body=vjp_body, n_consts=n_consts, n_carry=n_carry,
                          n_xs=n_xs, kc=kc, kk=kk, kx=kx, ky=ky, length=length,
                          reverse=reverse, checkpoint=checkpoint, cond_body=cond_body,
                          n_cconsts=n_cconsts)
        ctx.save_for_backward(*arrays)
        it = iter(arrays)
        consts = [next(it) for _ in range(n_consts)]
        init = [next(it) for _ in range(n_carry)]
        xs = [next(it) for _ in range(n_xs)]
        g_carry = [next(it) for _ in kk]
        g_ys = [next(it) for _ in ky]
        if cond_body is not None:
            n = int(np.asarray(next(it)).reshape(()))
        else:
            n = int(xs[0].shape[0]) if xs else length
        acc = [xp.zeros_like(consts[i]) for i in kc]
        ct = [xp.array(g, copy=True) for g in g_carry]
        ct_xs = [xp.zeros_like(xs[i]) for i in kx]

        def pos(t):
            return n - 1 - t if reverse else t

        def advance(t, carry):
            i = pos(t)
            return list(body.run(list(carry) + [x[i] for x in xs] + consts)[:n_carry])

        def back(t, carry):
            i = pos(t)
            outs = vjp_body.run(ct + list(carry) + [x[i] for x in xs] + [g[i] for g in g_ys]
                                + consts)
            for j, d in enumerate(outs[:len(kc)]):
                acc[j] = acc[j] + d
            ct[:] = outs[len(kc):len(kc) + len(kk)]
            for j, d in enumerate(outs[len(kc) + len(kk):]):
                ct_xs[j][i] = d

        stats = _revolve.reverse_steps(n, checkpoint, init, advance, back)
        for rec in _revolve._RECORDERS:
            rec.append({"n": n, "k": checkpoint, **stats})
        res = [xp.asarray(a) for a in acc] + [xp.asarray(c) for c in ct] + ct_xs
        return res[0] if len(res) == 1 else tuple(res)

    @staticmethod
    def backward(ctx, *gs):
        from tapegrad.transforms.reverse import vjp

        ins = list(ctx.saved_tensors)
        p = ctx.params
        active = [i for i, (a, need) in enumerate(zip(ins, ctx.needs_input_grad))
                  if need and a.dtype.kind in "fcV"]
        if not active:
            return (None,) * len(ins)

        def replay(*d):
            full = list(ins)
            for i, v in zip(active, d):
                full[i] = v
            return tuple(_revolve_fallback(full, p))

        outs, pull = vjp(replay, *[ins[i] for i in active])
        cts = pull(tuple(g if g is not None else _zeros((tuple(o.shape), o.dtype))
                          for g, o in zip(gs, outs)))
        res: list = [None] * len(ins)
        for i, c in zip(active, cts):
            res[i] = c
        return tuple(res)

    @staticmethod
    def jvp(ctx, *ts):
        from tapegrad.transforms.forward import jvp

        ins = list(ctx.saved_tensors)
        p = ctx.params
        active = [i for i, t in enumerate(ts) if t is not None]

        def replay(*d):
            full = list(ins)
            for i, v in zip(active, d):
                full[i] = v
            return tuple(_revolve_fallback(full, p))

        _, t_out = jvp(replay, tuple(ins[i] for i in active), tuple(ts[i] for i in active))
        return tuple(t_out)

    @staticmethod
    def batch(args, batched, size, **p):
        """One reversal per member (each with its own trip count), stacked: the memory bound
        holds per member."""
        from tapegrad.ops import Concatenate

        per = []
        for m in range(size):
            member = [a[m] if b else a for a, b in zip(args, batched)]
            out = Revolve.apply(*member, **p)
            per.append(out if isinstance(out, tuple) else (out,))
        if not per:
            raise NotImplementedError("revolve: vmap over an empty batch")
        return tuple(Concatenate.apply(*[o[j].reshape((1,) + tuple(o[j].shape)) for o in per],
                                       axis=0) for j in range(len(per[0])))

    @classmethod
    def output_shape(cls, *shapes, **params):
        raise NotImplementedError("revolve's outputs are known by running the loop")


def _residual_forward_body(plan, outputs_too: bool = False):
    """The body that also returns kept residuals after its outputs: those that are not among
    the body's outputs (a scan has those already: its carries and ``ys``,
    :func:`_kept_sources`), or with ``outputs_too`` every kept residual, in the plan's
    order."""
    from tapegrad.transforms._residuals import body_outputs

    body = plan.body
    tape = body.tape
    outs_set = {r for r in tape.out_refs if isinstance(r, int)}
    extra = [v for v in plan.kept if outputs_too or v not in outs_set]

    def make():
        def step(leaves):
            env = interpret(tape.entries, dict(zip(tape.in_nodes, leaves)), apply_step,
                            body.name)
            outs = body_outputs(tape, env)
            return outs + [env[v] for v in extra]

        return _closed(step, [np.zeros(*tape.avals[v]) for v in tape.in_nodes], body.name)

    return body.derived(("residual-forward", plan.policy, outputs_too), make)


def _kept_sources(plan, n_carry: int) -> list:
    """Where a residual-keeping scan finds each kept residual (in the plan's order):
    ``("stack", k)``, the forward's k-th extra stacked output; ``("carry", i)``, carry ``i``
    after the iteration (the saved carries shifted by one, then the final carry: a residual
    that is the next carry is not stored twice); ``("y", j)``, the iteration's output ``j``
    (already stacked)."""
    pos: dict = {}
    for i, r in enumerate(plan.body.tape.out_refs):
        if isinstance(r, int):
            pos.setdefault(r, i)
    out, k = [], 0
    for v in plan.kept:
        i = pos.get(v)
        if i is None:
            out.append(("stack", k))
            k += 1
        else:
            out.append(("carry", i) if i < n_carry else ("y", i - n_carry))
    return out


def _after(c: Tensor, last: Tensor, reverse: bool) -> Tensor:
    """The carries after each iteration, from ``c`` (stacked, each at the start of its
    iteration) and the final carry ``last``."""
    if c.shape[0] == 0:
        return c
    last = last.reshape((1,) + tuple(last.shape))
    return Concatenate.apply(last, c[:-1], axis=0) if reverse else Concatenate.apply(
        c[1:], last, axis=0)


def _residual_backward(plan, consts, init, xs, cs, res, g_carry, g_ys, g_cs, g_res, needs, p):
    """Cotangents of ``consts + init + xs`` of a residual-keeping scan: a reverse scan of the
    body's backward rules over the saved carries ``cs`` and residuals ``res``."""
    from tapegrad.transforms._residuals import residual_cotangents

    body = plan.body
    n_consts, n_carry, n_xs = len(consts), len(init), len(xs)
    avals = body.out_avals
    n_user = len(avals) - n_carry
    carry_avals, y_avals = avals[:n_carry], avals[n_carry:]
    kc = [i for i in range(n_consts) if needs[i] and _is_float(consts[i].dtype)]
    kk = [i for i in range(n_carry) if _is_float(carry_avals[i][1])]
    kx = [i for i in range(n_xs) if needs[n_consts + n_carry + i] and _is_float(xs[i].dtype)]
    ky = [j for j in range(n_user) if _is_float(y_avals[j][1])]
    out: list = [None] * (n_consts + n_carry + n_xs)
    if not kk and not ky:
        return out
    kr = [j for j, g in enumerate(g_res) if g is not None]
    kg = [i for i in kk if g_cs[i] is not None]
    r_avals = [(tuple(r.shape[1:]), r.dtype) for r in res]
    const_avals = [(tuple(c.shape), c.dtype) for c in consts]
    x_avals = [(tuple(x.shape[1:]), x.dtype) for x in xs]

    def make():
        def step(leaves):
            it = iter(leaves)
            acc = [next(it) for _ in kc]
            ct = [next(it) for _ in kk]
            c_i = [next(it) for _ in range(n_carry)]
            x_i = [next(it) for _ in range(n_xs)]
            gy = [next(it) for _ in ky]
            gc = [next(it) for _ in kg]
            r_i = [next(it) for _ in res]
            gr = dict(zip(kr, [next(it) for _ in kr]))
            cst = [next(it) for _ in range(n_consts)]
            cts = dict(zip(kk, ct))
            cts.update({n_carry + j: g for j, g in zip(ky, gy)})
            got = residual_cotangents(
                plan, c_i + x_i + cst, r_i,
                [n_carry + n_xs + i for i in kc] + kk + [n_carry + i for i in kx], cts,
                [gr.get(j) for j in range(len(res))])
            new_acc = [a + b for a, b in zip(acc, got[:len(kc)])]
            gcd = dict(zip(kg, gc))
            new_ct = [v + gcd[i] if i in gcd else v
                      for i, v in zip(kk, got[len(kc):len(kc) + len(kk)])]
            return new_acc + new_ct + got[len(kc) + len(kk):]

        ex = ([const_avals[i] for i in kc] + [carry_avals[i] for i in kk] + list(carry_avals)
              + x_avals + [y_avals[j] for j in ky] + [carry_avals[i] for i in kg] + r_avals
              + [r_avals[j] for j in kr] + const_avals)
        return _closed(step, [np.zeros(*a) for a in ex], f"vjp({body.name})")

    bwd = body.derived(("residual-vjp", plan.policy, tuple(kc), tuple(kx), tuple(kr),
                        tuple(kg)), make)
    length = cs[0].shape[0] if cs else p["length"]
    acc0 = [_zeros(const_avals[i]) for i in kc]
    ct0 = [g_carry[i] if g_carry[i] is not None else _zeros(carry_avals[i]) for i in kk]
    g_y = [g_ys[j] if g_ys[j] is not None else _zeros(
        ((length,) + tuple(y_avals[j][0]), y_avals[j][1])) for j in ky]
    args = (list(consts) + acc0 + ct0 + list(cs) + list(xs) + g_y + [g_cs[i] for i in kg]
            + list(res) + [g_res[j] for j in kr])
    outs = _apply(Scan, *args, body=bwd, n_consts=n_consts, n_carry=len(kc) + len(kk),
                  length=length, reverse=not p["reverse"], unroll=p["unroll"],
                  save=_any_traced(args))
    _place_cotangents(out, outs, kc, kk, kx, needs, n_consts, n_carry)
    return out


def _revolve_backward(body, consts, init, xs, g_carry, g_ys, needs, p, count=None,
                      cconsts=None) -> list:
    """Cotangents of ``consts + init + xs`` by binomial checkpointing: one :class:`Revolve`
    whose forward reverses the loop holding at most ``p["checkpoint"]`` carries (a while
    loop's trip count ``count``, its condition and constants ``cconsts`` given)."""
    n_consts, n_carry, n_xs = len(consts), len(init), len(xs)
    avals = body.out_avals
    carry_avals, y_avals = avals[:n_carry], avals[n_carry:]
    kc = tuple(i for i in range(n_consts) if needs[i] and _is_float(consts[i].dtype))
    kk = tuple(i for i in range(n_carry) if _is_float(carry_avals[i][1]))
    kx = tuple(i for i in range(n_xs) if needs[n_consts + n_carry + i]
               and _is_float(xs[i].dtype))
    ky = tuple(j for j in range(len(y_avals)) if _is_float(y_avals[j][1]))
    res: list = [None] * (n_consts + n_carry + n_xs)
    if not (kk or ky) or not (kc or kk or kx):
        return res
    const_avals = [(tuple(c.shape), c.dtype) for c in consts]
    x_avals = [(tuple(x.shape[1:]), x.dtype) for x in xs]

    def make():
        def step(leaves):
            it = iter(leaves)
            ct = [next(it) for _ in kk]
            c_i = [next(it) for _ in range(n_carry)]
            x_i = [next(it) for _ in range(n_xs)]
            gy = [next(it) for _ in ky]
            cst = [next(it) for _ in range(n_consts)]
            return _vjp_of(body, c_i + x_i + cst,
                           [n_carry + n_xs + i for i in kc] + list(kk)
                           + [n_carry + i for i in kx],
                           list(kk) + [n_carry + j for j in ky], ct + gy)

        ex = ([carry_avals[i] for i in kk] + list(carry_avals) + x_avals
              + [y_avals[j] for j in ky] + const_avals)
        return _closed(step, [np.zeros(*a) for a in ex], f"vjp({body.name})")

    vjp_body = body.derived(("revolve", kc, kx), make)
    length = int(xs[0].shape[0]) if xs else p.get("length")
    g_c = [g_carry[i] if g_carry[i] is not None else _zeros(carry_avals[i]) for i in kk]
    g_y = [g_ys[j] if g_ys[j] is not None else _zeros(
        ((length,) + tuple(y_avals[j][0]), y_avals[j][1])) for j in ky]
    extra = [] if count is None else [count] + list(cconsts or [])
    outs = _apply(Revolve, *consts, *init, *xs, *g_c, *g_y, *extra, body=body,
                  vjp_body=vjp_body, n_consts=n_consts, n_carry=n_carry, n_xs=n_xs, kc=kc,
                  kk=kk, kx=kx, ky=ky, length=length, reverse=bool(p.get("reverse", False)),
                  checkpoint=p["checkpoint"],
                  cond_body=p.get("cond_body") if count is not None else None,
                  n_cconsts=len(cconsts or []))
    for i, v in zip(kc, outs):
        res[i] = v
    for i, v in zip(kk, outs[len(kc):]):
        res[n_consts + i] = v
    for i, v in zip(kx, outs[len(kc) + len(kk):]):
        res[n_consts + n_carry + i] = v
    return res


def _revolve_fallback(ins: list, p: dict) -> list:
    """The outputs of :class:`Revolve` on Tensors, from a forward that keeps every carry (the
    default mode's formulation): its derivatives are those of the checkpointed backward."""
    body, n_consts, n_carry, n_xs = p["body"], p["n_consts"], p["n_carry"], p["n_xs"]
    kc, kk, kx, ky = p["kc"], p["kk"], p["kx"], p["ky"]
    it = iter(ins)
    consts = [next(it) for _ in range(n_consts)]
    init = [next(it) for _ in range(n_carry)]
    xs = [next(it) for _ in range(n_xs)]
    n_ys = len(body.out_avals) - n_carry
    g_carry: list = [None] * n_carry
    for i in kk:
        g_carry[i] = next(it)
    g_ys: list = [None] * n_ys
    for j in ky:
        g_ys[j] = next(it)
    if p["cond_body"] is None:
        outs = _apply(Scan, *consts, *init, *xs, body=body, n_consts=n_consts, n_carry=n_carry,
                      length=p["length"], reverse=p["reverse"], unroll=1, save=True)
        cs = list(outs[n_carry + n_ys:])
        needs = ([i in kc for i in range(n_consts)] + [True] * n_carry
                 + [i in kx for i in range(n_xs)])
        res = _scan_backward(body, consts, init, xs, cs, g_carry, g_ys, [None] * n_carry,
                             needs, {"reverse": p["reverse"], "unroll": 1,
                                     "length": p["length"]})
        return ([res[i] for i in kc] + [res[n_consts + i] for i in kk]
                + [res[n_consts + n_carry + i] for i in kx])
    next(it)  # the trip count: the loop below counts again
    cconsts = list(it)
    outs = _apply(While, *init, *cconsts, *consts, cond_body=p["cond_body"], body=body,
                  n_carry=n_carry, n_cconsts=len(cconsts), save=True)
    cs = list(outs[n_carry + 1:2 * n_carry + 1])
    cts = _while_backward(body, consts, cs, outs[n_carry], outs[2 * n_carry + 1], g_carry,
                          [None] * n_carry, [i in kc for i in range(n_consts)])
    return [cts[i] for i in kc] + [cts[n_consts + i] for i in kk]


def _vjp_of(body: Body, inputs: list, wrt: list, outs_sel: list, cts: list) -> list:
    """Cotangents of ``inputs[wrt]`` of ``body`` (on ``inputs``) for cotangents ``cts`` on its
    outputs ``outs_sel``."""
    from tapegrad.transforms.reverse import vjp

    if not wrt:
        return []

    def f(*d):
        full = list(inputs)
        for i, v in zip(wrt, d):
            full[i] = v
        outs = body.apply(full)
        return tuple(outs[j] for j in outs_sel)

    _, pull = vjp(f, *[inputs[i] for i in wrt])
    return list(pull(tuple(cts)))


def _jvp_of(body: Body, inputs: list, tangents: list) -> tuple[list, list]:
    """Outputs of ``body`` on ``inputs`` and their tangents (``tangents``: one per input, None
    for integer inputs); integer outputs get no tangent (None)."""
    from tapegrad.transforms.forward import jvp

    pos = [i for i, t in enumerate(tangents) if t is not None]
    float_outs = [j for j, a in enumerate(body.out_avals) if _is_float(a[1])]

    def f(*d):
        full = list(inputs)
        for i, v in zip(pos, d):
            full[i] = v
        outs = body.apply(full)
        return tuple(outs[j] for j in float_outs)

    if not pos:
        outs = body.apply(list(inputs))
        return outs, [None] * len(outs)
    prim, tan = jvp(f, tuple(inputs[i] for i in pos), tuple(tangents[i] for i in pos))
    outs = body.apply(list(inputs)) if len(float_outs) != len(body.out_avals) else None
    res_p, res_t = [], []
    k = 0
    for j in range(len(body.out_avals)):
        if j in float_outs:
            res_p.append(prim[k])
            res_t.append(tan[k])
            k += 1
        else:
            res_p.append(outs[j])  # pyright: ignore[reportOptionalSubscript]
            res_t.append(None)
    return res_p, res_t


def _scan_jvp(ins, ts, p):
    """Tangents of a scan's outputs: a scan of the body's jvp."""
    body = p["body"]
    n_consts, n_carry = p["n_consts"], p["n_carry"]
    consts = list(ins[:n_consts])
    init = list(ins[n_consts:n_consts + n_carry])
    xs = list(ins[n_consts + n_carry:])
    avals = body.out_avals
    n_ys = len(avals) - n_carry
    n_out = n_carry + n_ys + (n_carry if p["save"] else 0)
    tc = [i for i in range(n_consts) if ts[i] is not None]
    tx = [i for i in range(len(xs)) if ts[n_consts + n_carry + i] is not None]
    kk = [i for i in range(n_carry) if _is_float(avals[i][1])]
    if not tc and not tx and all(ts[n_consts + i] is None for i in kk):
        return (None,) * n_out
    ky = [j for j in range(n_ys) if _is_float(avals[n_carry + j][1])]
    key = ("jvp", tuple(tc), tuple(tx))
    n_x = len(xs)

    def make():
        def step(leaves):
            it = iter(leaves)
            c = [next(it) for _ in range(n_carry)]
            dc = [next(it) for _ in kk]
            x = [next(it) for _ in range(n_x)]
            dx = [next(it) for _ in tx]
            cst = [next(it) for _ in range(n_consts)]
            dcst = [next(it) for _ in tc]
            tangents: list = [None] * (n_carry + n_x + n_consts)
            for i, t in zip(kk, dc):
                tangents[i] = t
            for i, t in zip(tx, dx):
                tangents[n_carry + i] = t
            for i, t in zip(tc, dcst):
                tangents[n_carry + n_x + i] = t
            outs, touts = _jvp_of(body, c + x + cst, tangents)
            tcar = [touts[i] if touts[i] is not None else _zeros(avals[i]) for i in kk]
            tys = [touts[n_carry + j] if touts[n_carry + j] is not None
                   else _zeros(avals[n_carry + j]) for j in ky]
            return outs[:n_carry] + tcar + outs[n_carry:] + tys

        ex = ([_example(a) for a in init] + [_example(init[i]) for i in kk]
              + [_example(x)[0] if x.shape[0] else np.zeros(x.shape[1:], x.dtype) for x in xs]
              + [np.zeros(xs[i].shape[1:], xs[i].dtype) for i in tx]
              + [_example(c) for c in consts] + [_example(consts[i]) for i in tc])
        return _closed(step, ex, f"jvp({body.name})")

    jb = body.derived(key, make)
    t_init = [ts[n_consts + i] if ts[n_consts + i] is not None else _zeros(
        (tuple(init[i].shape), init[i].dtype)) for i in kk]
    args = (consts + [ts[i] for i in tc] + init + t_init + xs
            + [ts[n_consts + n_carry + i] for i in tx])
    outs = _apply(Scan, *args, body=jb, n_consts=n_consts + len(tc), n_carry=n_carry + len(kk),
                      length=p["length"], reverse=p["reverse"], unroll=p["unroll"],
                      save=p["save"])
    outs = outs if isinstance(outs, tuple) else (outs,)
    nk = n_carry + len(kk)
    res: list = [None] * n_out
    for i, t in zip(kk, outs[n_carry:nk]):
        res[i] = t
    ys_all = outs[nk:nk + n_ys + len(ky)]
    for j, t in zip(ky, ys_all[n_ys:]):
        res[n_carry + j] = t
    if p["save"]:
        cs_all = outs[nk + n_ys + len(ky):]
        for i, t in zip(kk, cs_all[n_carry:]):
            res[n_carry + n_ys + i] = t
    return tuple(res)


def _swap01(t: Tensor) -> Tensor:
    return t.swapaxes(0, 1) if t.ndim >= 2 else t


def _broadcast_batch(t: Tensor, size: int) -> Tensor:
    from tapegrad.ops import BroadcastTo

    return BroadcastTo.apply(t.reshape((1,) + tuple(t.shape)), (size,) + tuple(t.shape))


def _scan_batch(args, batched, size, p):
    """``vmap`` of a scan: a scan of the batched body; every carry is batched, the batch axis
    of the stacked xs and ys is moved behind the scanned one."""
    from tapegrad.transforms.vmap import vmap

    body = p["body"]
    n_consts, n_carry = p["n_consts"], p["n_carry"]
    consts = list(args[:n_consts])
    init = [a if b else _broadcast_batch(a, size)
            for a, b in zip(args[n_consts:n_consts + n_carry],
                            batched[n_consts:n_consts + n_carry])]
    xs = [(_swap01(a) if b else a) for a, b in zip(args[n_consts + n_carry:],
                                                    batched[n_consts + n_carry:])]
    xb = tuple(batched[n_consts + n_carry:])
    cb = tuple(batched[:n_consts])
    key = ("batch", cb, xb, size)

    def make():
        axes = (0,) * n_carry + tuple(0 if b else None for b in xb) + tuple(
            0 if b else None for b in cb)

        def step(leaves):
            return list(vmap(lambda *ls: tuple(body.apply(list(ls))), in_axes=axes,
                             out_axes=0)(*leaves))

        ex = ([_example(c) for c in init]
              + [(_example(x)[0] if x.shape[0] else np.zeros(x.shape[1:], x.dtype)) for x in xs]
              + [_example(c) for c in consts])
        return _closed(step, ex, f"vmap({body.name})")

    bb = body.derived(key, make)
    outs = _apply(Scan, *consts, *init, *xs, body=bb, n_consts=n_consts, n_carry=n_carry,
                      length=p["length"], reverse=p["reverse"], unroll=p["unroll"],
                      save=p["save"], checkpoint=p.get("checkpoint"))
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    res = outs[:n_carry] + [_swap01(y) for y in outs[n_carry:]]
    return tuple(res)


def _loop_policy(who: str, f, remat, checkpoint):
    """``f`` unwrapped from ``checkpoint(f, save_only=..., budget_bytes=...)`` and the
    residual policy each iteration applies (None: recompute each iteration's residuals).
    ``remat=None`` keeps every residual unless ``checkpoint`` or a body policy says otherwise."""
    if remat is not None and not isinstance(remat, (bool, np.bool_)):
        raise TypeError(f"{who}: remat must be None or a bool (False keeps every iteration's "
                        f"residuals), got {type(remat).__name__} {remat!r}")
    inner = getattr(f, "_tapegrad_checkpoint", None)
    policy = None
    if inner is not None:
        f, policy = inner
    if (remat is not None and not remat) or (remat is None and policy is None
                                              and checkpoint is None):
        policy = (None, None, None)
    if policy is not None and checkpoint is not None:
        raise ValueError(f"{who}: checkpoint={checkpoint} recomputes every iteration from a "
                         "few stored carries, so it cannot keep residuals (remat=False or a "
                         "checkpoint(body, save_only=..., budget_bytes=...) policy). Use one "
                         "or the other.")
    return f, policy


def scan(f, init, xs=None, length=None, reverse=False, unroll=1, *, checkpoint=None,
         remat=None):
    """Loop ``f`` over the leading axis of ``xs``, carrying a state: JAX's ``lax.scan``.

    Semantics (one primitive on the tape, the body traced once)::

        def scan(f, init, xs, length=None):
            carry, ys = init, []
            for x in xs:
                carry, y = f(carry, x)
                ys.append(y)
            return carry, stack(ys)

    Args:
        f: ``f(carry, x) -> (carry, y)``. ``carry`` keeps the pytree structure, shapes and
            dtypes of ``init``; ``y`` is any pytree of Tensors.
        init: Initial carry: a pytree of Tensors, arrays or numbers.
        xs: Pytree of Tensors of shape ``(length, ...)`` scanned over their leading axis, or
            None (then ``x`` is None and ``length`` is required).
        length: Number of iterations; optional when ``xs`` is given (must then agree).
        reverse: Run from the last element to the first (``ys`` keep their positions).
        unroll: Iterations of the body per trip of the compiled loop (JAX's meaning): a
            positive int ``k`` runs ``k`` copies of the body as one program per trip (fewer
            trips, more room for the program's optimisations; the results are identical);
            ``True`` unrolls the whole loop, ``False`` is 1.
        checkpoint: Memory of reverse mode. None (default): the forward keeps the carry at
            the start of every iteration (``length`` carries). An int ``k >= 1``: keep none;
            the backward holds at most ``k`` carries at once and recomputes the others from
            them by binomial checkpointing (*revolve*); see docs/transforms.md for the cost.
        remat: Memory and time of reverse mode per iteration. None (default): as False,
            unless ``checkpoint`` is given or ``f`` is wrapped in a checkpoint policy. False:
            the forward keeps every iteration's residuals (what the body's backward rules
            read) with its carry, so the backward recomputes nothing (JAX's default). True:
            keep only the carries and recompute each iteration's intermediates from its
            carry in the backward (remat per step: less memory, about one more forward pass
            of time). A body wrapped in ``checkpoint(body, save_only=..., budget_bytes=...)``
            keeps, per iteration, the residuals that policy selects.

    Returns:
        ``(carry, ys)``: the final carry and the stacked ``y`` (each leaf of shape
        ``(length, ...)``).

    Raises:
        TypeError: if ``f`` returns a carry of another structure, shape or dtype than
            ``init`` (the message names ``f``, what it returned and what was expected), or
            does not return a pair, or ``unroll`` is not an int or a bool.
        ValueError: if the leaves of ``xs`` differ in their leading axis, or ``length``
            disagrees with them, or none is given, or ``unroll`` is below 1, or
            ``checkpoint`` is below 1, or ``checkpoint`` is combined with kept residuals
            (``remat=False`` or a policy).
        TypeError: if ``checkpoint`` is neither None nor an int, or ``remat`` is neither None
            nor a bool.

    Example:
        >>> import tapegrad as tg, numpy as np
        >>> def step(c, x):
        ...     c = c + x
        ...     return c, c * 2.0
        >>> c, ys = tg.scan(step, tg.Tensor(0.0), tg.Tensor([1.0, 2.0, 3.0]))
        >>> float(c), ys.tolist()
        (6.0, [2.0, 6.0, 12.0])
    """
    who = "scan"
    if not callable(f):
        raise TypeError(f"scan: f must be callable, got {type(f).__name__}")
    if not isinstance(unroll, (bool, int, np.integer)):
        raise TypeError(f"scan: unroll must be a positive int or a bool, got "
                        f"{type(unroll).__name__} {unroll!r}")
    if not isinstance(unroll, bool) and unroll < 1:
        raise ValueError(f"scan: unroll must be a positive int (iterations per loop trip) or "
                         f"a bool, got {unroll!r}. Use unroll=1 for no unrolling.")
    checkpoint = check_checkpoint("scan", checkpoint)
    f, policy = _loop_policy("scan", f, remat, checkpoint)
    init_leaves, init_tree = _leaves(init, who, "init")
    xs_leaves, xs_tree = _leaves(xs, who, "xs") if xs is not None else ([], None)
    lengths = {int(x.shape[0]) if x.ndim else -1 for x in xs_leaves}
    if -1 in lengths:
        raise ValueError("scan: every leaf of xs needs a leading axis to scan over; got a "
                         "0-d leaf. Give xs leaves of shape (length, ...).")
    if len(lengths) > 1:
        raise ValueError(f"scan: the leaves of xs have different leading axis sizes "
                         f"{sorted(lengths)}; they must all equal the number of iterations.")
    if length is not None:
        if not isinstance(length, (int, np.integer)) or isinstance(length, bool) or length < 0:
            raise ValueError(f"scan: length must be a non-negative int, got {length!r}")
        if lengths and length != next(iter(lengths)):
            raise ValueError(f"scan: length={length} but xs have leading axis size "
                             f"{next(iter(lengths))}; they must agree.")
        n = int(length)
    elif lengths:
        n = next(iter(lengths))
    else:
        raise ValueError("scan: with xs=None, give length= (the number of iterations).")
    unroll = max(n, 1) if unroll is True else 1 if unroll is False else int(unroll)
    fname = _fname(f)
    carry_avals = [(tuple(t.shape), t.dtype) for t in init_leaves]
    n_carry = len(init_leaves)
    y_tree: list = [None]
    fix = "Return a carry of the same structure, shapes and dtypes as init (cast with astype)."

    def flat(leaves):
        carry = tree_unflatten(init_tree, leaves[:n_carry])
        x = tree_unflatten(xs_tree, leaves[n_carry:]) if xs_tree is not None else None
        out = f(carry, x)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(f"scan: {fname} must return a pair (carry, y), got "
                            f"{type(out).__name__}")
        c_leaves, c_tree = tree_flatten(out[0])
        c_leaves = _check_leaves(who, fname, "carry", c_leaves, carry_avals, c_tree,
                                 init_tree, fix, "init")
        y_leaves, y_tree[0] = tree_flatten(out[1])
        return c_leaves + [_as_leaf(v, who, f"{fname}'s y") for v in y_leaves]

    def trace():
        ex = [_example(t) for t in init_leaves] + [
            _example(x)[0] if x.shape[0] else np.zeros(x.shape[1:], x.dtype) for x in xs_leaves]
        body, lifted = trace_body(flat, ex, fname)
        return [body], [lifted], y_tree[0]

    extra = ("scan", init_tree, _avals_key(init_leaves), xs_tree,
             tuple((tuple(x.shape[1:]), x.dtype) for x in xs_leaves))
    (body,), (lifted,), y_tree[0] = _traced_once((f,), extra, trace)
    args = lifted + init_leaves + xs_leaves
    residuals = None
    n_ys = len(body.out_avals) - n_carry
    if policy is not None and _any_traced(args):  # each iteration keeps its residuals
        from tapegrad.transforms._residuals import plan_residuals, residual_param

        residuals = residual_param(body, policy)
        body = _residual_forward_body(plan_residuals(body, policy))
    outs = _apply(Scan, *args, body=body, n_consts=len(lifted), n_carry=n_carry, length=n,
                  reverse=bool(reverse), unroll=unroll,
                  save=checkpoint is None and _any_traced(args), checkpoint=checkpoint,
                  residuals=residuals)
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    carry = tree_unflatten(init_tree, outs[:n_carry])
    ys = tree_unflatten(y_tree[0], outs[n_carry:n_carry + n_ys])
    return carry, ys


def fori_loop(lower, upper, body_fun, init_val, *, checkpoint=None, remat=None):
    """``for i in range(lower, upper): val = body_fun(i, val)``, as one primitive (JAX's
    ``lax.fori_loop``).

    With Python-int bounds it is a :func:`scan` of known length (reverse-mode ready); with
    Tensor bounds it is a :func:`while_loop` whose trip count is read at run time (reverse
    mode through it records the trip count).

    Args:
        lower: First index: an int or an integer Tensor.
        upper: Bound (exclusive): an int or an integer Tensor.
        body_fun: ``body_fun(i, val) -> val``; ``i`` is an int64 Tensor scalar; ``val``
            keeps ``init_val``'s structure, shapes and dtypes (a leaf that mixing with ``i``
            promoted, such as float32 + int64 -> float64, is cast back).
        init_val: Initial value, a pytree of Tensors, arrays or numbers.
        checkpoint: Memory of reverse mode, as for :func:`scan` and :func:`while_loop`: None
            keeps every iteration's value, an int ``k >= 1`` holds at most ``k`` at once.
        remat: As for :func:`scan`. With Python-int bounds the default (None) keeps every
            iteration's residuals, True recomputes them, and a ``checkpoint(body_fun,
            save_only=...)`` policy applies per iteration; with Tensor bounds (a while loop)
            the default recomputes them and keeping them is refused.

    Returns:
        The final value (``init_val`` when ``upper <= lower``).

    Raises:
        TypeError: for non-integer bounds, a non-int ``checkpoint``, or a ``body_fun`` that
            changes the value's structure, shape or dtype.
        ValueError: if ``checkpoint`` is below 1, or residuals are to be kept
            (``remat=False`` or a policy) with Tensor bounds or with ``checkpoint``.
        TypeError: if ``remat`` is neither None nor a bool.

    Example:
        >>> import tapegrad as tg
        >>> float(tg.fori_loop(0, 4, lambda i, v: v * 2.0 + i, tg.Tensor(1.0)))
        27.0
    """
    if not callable(body_fun):
        raise TypeError(f"fori_loop: body_fun must be callable, got {type(body_fun).__name__}")
    checkpoint = check_checkpoint("fori_loop", checkpoint)
    inner = getattr(body_fun, "_tapegrad_checkpoint", None)
    static = all(isinstance(b, (int, np.integer)) and not isinstance(b, bool)
                 for b in (lower, upper))
    # (by default a scan keeps each iteration's residuals; a while_loop recomputes them)
    body_fun, policy = _loop_policy("fori_loop", body_fun,
                                    True if remat is None and not static else remat, checkpoint)
    for name, b in (("lower", lower), ("upper", upper)):
        dt = getattr(b, "dtype", None) if not isinstance(b, (bool, int, float)) else None
        kind = dt.kind if isinstance(dt, np.dtype) else None
        if not (isinstance(b, (int, np.integer)) and not isinstance(b, bool)) and kind not in (
                "i", "u"):
            raise TypeError(f"fori_loop: {name} must be an int or an integer Tensor, got "
                            f"{type(b).__name__}" + (f" of dtype {dt}" if kind else ""))
    fname = _fname(body_fun)
    want = [(t.dtype if isinstance(t, Tensor) else None)
            for t in _leaves(init_val, "fori_loop", "init_val")[0]]

    def call(i, val):
        """``body_fun(i, val)``, with a leaf that mixing with the int64 ``i`` promoted (float32
        + int64 -> float64, NumPy's rule) cast back to the value's dtype."""
        out = body_fun(i, val)
        leaves, tree = tree_flatten(out)
        if len(leaves) == len(want):
            leaves = [v.astype(d) if isinstance(v, Tensor) and d is not None and v.dtype != d
                      and v.dtype == np.result_type(d, np.int64) else v
                      for v, d in zip(leaves, want)]
            out = tree_unflatten(tree, leaves)
        return out

    if static:
        lo = int(lower)
        n = max(int(upper) - lo, 0)

        def step(carry, _):
            i, val = carry
            return (i + 1, call(i, val)), None

        step.__name__ = fname
        if inner is not None:  # the policy applies to each iteration of the scan
            step._tapegrad_checkpoint = (step, inner[1])  # pyright: ignore[reportFunctionMemberAccess]
        (_, val), _ = scan(step, (Tensor(np.int64(lo)), init_val), None, length=n,
                           checkpoint=checkpoint, remat=remat)
        return val
    if policy is not None:
        raise ValueError("fori_loop: keeping each iteration's residuals (remat=False or a "
                         "checkpoint(body_fun, save_only=...) policy) needs Python-int bounds "
                         "(the loop is then a scan); with Tensor bounds it is a while_loop, "
                         "whose backward recomputes each iteration from its value.")

    lo_t = lower if isinstance(lower, Tensor) else Tensor(np.int64(lower))
    up_t = upper if isinstance(upper, Tensor) else Tensor(np.int64(upper))
    lo_t = lo_t.astype(np.int64) if lo_t.dtype != np.int64 else lo_t
    up_t = up_t.astype(np.int64) if up_t.dtype != np.int64 else up_t

    def cond_fun(c):
        return c[0] < c[1]

    def body2(c):
        i, up, val = c
        return i + 1, up, call(i, val)

    body2.__name__ = fname
    cond_fun.__name__ = "fori_cond"
    return while_loop(cond_fun, body2, (lo_t, up_t, init_val), checkpoint=checkpoint)[2]


# -- while_loop -------------------------------------------------------------------------------
def _while_prune(params: dict, used: tuple):
    """A while loop computing fewer outputs (``Traits.prune``): with no saved carry read, none
    is saved (the final carry and the trip count stay)."""
    n = params["n_carry"] + 1
    if not params["save"] or any(used[n:]):
        return None
    return dict(params, save=False), tuple(range(n))


class While(Function):
    """The primitive behind :func:`while_loop`: inputs ``carry + cond consts + body consts``;
    outputs the final carry, the trip count (int64, no gradient) and, with ``save``, the carry
    at the start of each iteration (stacked) and the iterations done before each."""

    traits = Traits(prune=_while_prune)

    # runs tapegrad ops (or a recorded body) on its inputs: each computes bfloat16 itself
    bfloat16_native = True

    oper = "while"
    _ctx_arrays_recomputed = True
    check_loaded = staticmethod(_control_check.check_while)  # a tape file's entry (Tape.from_json)

    @staticmethod
    def forward(ctx, *arrays, cond_body, body, n_carry, n_cconsts, save, checkpoint=None):
        xp = ctx.backend
        carry = list(arrays[:n_carry])
        cc = list(arrays[n_carry:n_carry + n_cconsts])
        bc = list(arrays[n_carry + n_cconsts:])
        kept: list = []
        n = 0
        run_cond = cond_body.runner(arrays)
        run = body.runner(arrays)
        with transform_scope():
            while bool(run_cond(*carry, *cc)[0]):
                if save:
                    kept.append(carry)
                carry = run(*carry, *bc)
                n += 1
        if save:
            cs = [xp.stack([k[i] for k in kept]) if kept else
                  xp.empty((0,) + arrays[i].shape, arrays[i].dtype) for i in range(n_carry)]
        else:
            cs = []
        ctx.params = dict(cond_body=cond_body, body=body, n_carry=n_carry, n_cconsts=n_cconsts,
                          save=save, checkpoint=checkpoint)
        ctx.n_in = len(arrays)
        count = xp.asarray(np.int64(n))
        # with save, the iterations done before each row (a batch's finished members repeat)
        steps = [xp.arange(n, dtype=np.int64)] if save else []
        ctx.save_for_backward(*arrays, count, *cs, *steps)
        ctx.mark_non_differentiable(count, *steps)
        return tuple([xp.array(c, copy=True) for c in carry] + [count] + cs + steps)

    @staticmethod
    def backward(ctx, *gs):
        p = ctx.params
        n_carry, n_cc = p["n_carry"], p["n_cconsts"]
        saved = ctx.saved_tensors
        ins = list(saved[:ctx.n_in])
        bconsts = ins[n_carry + n_cc:]
        body = p["body"]
        needs = ctx.needs_input_grad
        g_carry = list(gs[:n_carry])
        res: list = [None] * len(ins)
        count = saved[ctx.n_in]
        if p.get("checkpoint") and not p["save"]:  # binomial checkpointing
            cconsts = ins[n_carry:n_carry + n_cc]
            nb = [needs[n_carry + n_cc + i] for i in range(len(bconsts))]
            cts = _revolve_backward(body, bconsts, ins[:n_carry], [], g_carry, [],
                                    tuple(nb) + (True,) * n_carry, p, count, cconsts)
            for i in range(len(bconsts)):
                res[n_carry + n_cc + i] = cts[i]
            for i in range(n_carry):
                if needs[i]:
                    res[i] = cts[len(bconsts) + i]
            return tuple(res)
        if p["save"]:
            cs = list(saved[ctx.n_in + 1:ctx.n_in + 1 + n_carry])
            steps = saved[ctx.n_in + 1 + n_carry]
            # (a zero constant the engine filled in for an unused output is no cotangent: its
            # rows' count is that of the recording, not of a later run under jit)
            g_cs = [_nonzero(g) for g in gs[n_carry + 1:n_carry + 1 + n_carry]]
        else:
            outs = _apply(While, *ins, **{**p, "save": True})
            cs = list(outs[n_carry + 1:n_carry + 1 + n_carry])
            steps = outs[n_carry + 1 + n_carry]
            g_cs = [None] * n_carry
        nb = [needs[n_carry + n_cc + i] for i in range(len(bconsts))]
        cts = _while_backward(body, bconsts, cs, count, steps, g_carry, g_cs, nb)
        for i in range(len(bconsts)):
            res[n_carry + n_cc + i] = cts[i]
        for i in range(n_carry):
            if needs[i]:
                res[i] = cts[len(bconsts) + i]
        return tuple(res)

    @staticmethod
    def jvp(ctx, *ts):
        return _while_jvp(ctx, ts)

    @staticmethod
    def batch(args, batched, size, **p):
        return _while_batch(args, batched, size, p)

    @classmethod
    def output_shape(cls, *shapes, **params):
        raise NotImplementedError("a while loop's trip count is known only by running it")


def _while_backward(body, bconsts, cs, count, steps, g_carry, g_cs, needs_b) -> list:
    """Cotangents of a while loop's body constants and initial value: a reverse scan of the
    body's backward rules over the saved values ``cs`` (one row per iteration). The residuals
    of every iteration are computed first, all at once, by the body batched over the rows (one
    vectorized pass, no loop), so the reverse scan runs only the backward rules. A row whose
    ``steps`` (iterations done before it) reached ``count`` (a member of a batch that had
    finished) passes the cotangent through unchanged."""
    from tapegrad.transforms._residuals import plan_residuals, residual_cotangents
    from tapegrad.transforms.vmap import vmap

    avals = body.out_avals
    n_carry, n_bc = len(avals), len(bconsts)
    kk = [i for i in range(n_carry) if _is_float(avals[i][1])]
    kb = [i for i in range(n_bc) if needs_b[i] and _is_float(bconsts[i].dtype)]
    res: list = [None] * (n_bc + n_carry)
    if not kk:
        return res
    rows = cs[0].shape[0]
    b_avals = [(tuple(c.shape), c.dtype) for c in bconsts]
    kg = [i for i in kk if g_cs[i] is not None]  # (the rows' count is known only at run time)
    plan = plan_residuals(body, (None, None, None))
    r_avals = [body.tape.avals[v] for v in plan.kept]
    if not r_avals:  # (a body whose backward rules need nothing it computes)
        plan = None

    def make():
        def step(leaves):
            it = iter(leaves)
            acc = [next(it) for _ in kb]
            ct = [next(it) for _ in kk]
            i = next(it)
            c_i = [next(it) for _ in range(n_carry)]
            r_i = [next(it) for _ in r_avals]
            gc = dict(zip(kg, [next(it) for _ in kg]))
            cst = [next(it) for _ in range(n_bc)]
            n = next(it)
            keep = i < n
            wrt = [n_carry + j for j in kb] + kk
            if plan is None:
                cts = _vjp_of(body, c_i + cst, wrt, kk, ct)
            else:
                cts = residual_cotangents(plan, c_i + cst, r_i, wrt, dict(zip(kk, ct)),
                                          [None] * len(r_i))
            new_acc = [Where.apply(keep, a + d, a) for a, d in zip(acc, cts[:len(kb)])]
            new_ct = [Where.apply(keep, d, c) for d, c in zip(cts[len(kb):], ct)]
            return new_acc + [v + gc[i] if i in gc else v for i, v in zip(kk, new_ct)]

        ex = ([np.zeros(*b_avals[j]) for j in kb] + [np.zeros(*avals[i]) for i in kk]
              + [np.int64(0)] + [np.zeros(*a) for a in avals] + [np.zeros(*a) for a in r_avals]
              + [np.zeros(*avals[i]) for i in kg] + [np.zeros(*a) for a in b_avals]
              + [np.int64(0)])
        return _closed(step, [np.asarray(e) for e in ex], f"vjp({body.name})")

    bwd = body.derived(("wvjp", tuple(kb), tuple(kg), plan is not None), make)
    if plan is None:
        kept = []
    elif rows:  # every iteration's residuals at once: the body batched over the saved rows
        fwd = _residual_forward_body(plan, outputs_too=True)
        axes = (0,) * n_carry + (None,) * n_bc
        outs = vmap(lambda *ls: tuple(fwd.apply(list(ls))), in_axes=axes, out_axes=0)(
            *cs, *bconsts)
        kept = list(outs[n_carry:])
    else:
        kept = [_zeros(((0,) + tuple(s), d)) for s, d in r_avals]
    acc0 = [_zeros(b_avals[j]) for j in kb]
    ct0 = [g_carry[i] if g_carry[i] is not None else _zeros(avals[i]) for i in kk]
    g_c = [g_cs[i] for i in kg]
    args = list(bconsts) + [count] + acc0 + ct0 + [steps] + list(cs) + kept + g_c
    outs = _apply(Scan, *args, body=bwd, n_consts=n_bc + 1, n_carry=len(kb) + len(kk),
                  length=rows, reverse=True, unroll=1, save=_any_traced(args))
    outs = outs if isinstance(outs, tuple) else (outs,)
    for j, v in zip(kb, outs[:len(kb)]):
        res[j] = v
    for i, v in zip(kk, outs[len(kb):len(kb) + len(kk)]):
        res[n_bc + i] = v
    return res


def _while_jvp(ctx, ts):
    p = ctx.params
    n_carry, n_cc = p["n_carry"], p["n_cconsts"]
    ins = list(ctx.saved_tensors[:ctx.n_in])
    init = ins[:n_carry]
    cconsts = ins[n_carry:n_carry + n_cc]
    bconsts = ins[n_carry + n_cc:]
    cond_body, body = p["cond_body"], p["body"]
    n_bc = len(bconsts)
    n_out = n_carry + 1 + (n_carry + 1 if p["save"] else 0)
    kk = [i for i in range(n_carry) if _is_float(init[i].dtype)]
    tb = [i for i in range(n_bc) if ts[n_carry + n_cc + i] is not None]
    if not tb and all(ts[i] is None for i in kk):
        return (None,) * n_out
    key = ("jvp", tuple(tb))

    def make():
        def step(leaves):
            it = iter(leaves)
            c = [next(it) for _ in range(n_carry)]
            dc = [next(it) for _ in kk]
            cst = [next(it) for _ in range(n_bc)]
            dcst = [next(it) for _ in tb]
            tangents: list = [None] * (n_carry + n_bc)
            for i, t in zip(kk, dc):
                tangents[i] = t
            for i, t in zip(tb, dcst):
                tangents[n_carry + i] = t
            outs, touts = _jvp_of(body, c + cst, tangents)
            return outs + [touts[i] if touts[i] is not None else _zeros(body.out_avals[i])
                           for i in kk]

        def cond_step(leaves):
            return cond_body.apply(leaves[:n_carry] + leaves[n_carry + len(kk):])

        ex_c = [_example(a) for a in init] + [_example(init[i]) for i in kk]
        jb = _closed(step, ex_c + [_example(c) for c in bconsts]
                     + [_example(bconsts[i]) for i in tb], f"jvp({body.name})")
        jc = _closed(cond_step, ex_c + [_example(c) for c in cconsts], cond_body.name)
        return jb, jc

    jb, jc = body.derived(key, make)
    t_init = [ts[i] if ts[i] is not None else _zeros((tuple(init[i].shape), init[i].dtype))
              for i in kk]
    args = init + t_init + cconsts + bconsts + [ts[n_carry + n_cc + i] for i in tb]
    outs = _apply(While, *args, cond_body=jc, body=jb, n_carry=n_carry + len(kk), n_cconsts=n_cc,
                       save=p["save"])
    nk = n_carry + len(kk)
    res: list = [None] * n_out
    for i, t in zip(kk, outs[n_carry:nk]):
        res[i] = t
    if p["save"]:
        cs_all = outs[nk + 1:nk + 1 + nk]
        for i, t in zip(kk, cs_all[n_carry:]):
            res[n_carry + 1 + i] = t
    return tuple(res)


def _while_batch(args, batched, size, p):
    """``vmap`` of a while loop: run until every member is done, masking finished members
    (their carry stays as it was)."""
    from tapegrad.transforms.vmap import vmap

    n_carry, n_cc = p["n_carry"], p["n_cconsts"]
    cond_body, body = p["cond_body"], p["body"]
    init = [a if b else _broadcast_batch(a, size)
            for a, b in zip(args[:n_carry], batched[:n_carry])]
    cconsts = list(args[n_carry:n_carry + n_cc])
    bconsts = list(args[n_carry + n_cc:])
    ccb = tuple(batched[n_carry:n_carry + n_cc])
    bcb = tuple(batched[n_carry + n_cc:])
    key = ("batch", ccb, bcb, size)

    def make():
        c_axes = (0,) * n_carry + tuple(0 if b else None for b in ccb)
        b_axes = (0,) * n_carry + tuple(0 if b else None for b in bcb)

        def preds(c, cc):
            return vmap(lambda *ls: cond_body.apply(list(ls))[0], in_axes=c_axes,
                        out_axes=0)(*(c + cc))

        def cond_step(leaves):  # carries, counts, cond consts
            return [preds(leaves[:n_carry], leaves[n_carry + 1:]).any()]

        def step(leaves):  # carries, counts, body consts, cond consts
            c, counts = leaves[:n_carry], leaves[n_carry]
            bc = leaves[n_carry + 1:n_carry + 1 + n_bc]
            pred = preds(c, leaves[n_carry + 1 + n_bc:])
            new = vmap(lambda *ls: tuple(body.apply(list(ls))), in_axes=b_axes, out_axes=0)(
                *(c + bc))
            res = []
            for old, nw in zip(c, new):
                m = pred.reshape((size,) + (1,) * (nw.ndim - 1))
                res.append(Where.apply(m, nw, old))
            return res + [counts + pred.astype(np.int64)]

        ex_c = [_example(a) for a in init] + [np.zeros(size, np.int64)]
        jc = _closed(cond_step, ex_c + [_example(c) for c in cconsts], f"vmap({cond_body.name})")
        jb = _closed(step, ex_c + [_example(c) for c in bconsts] + [_example(c) for c in cconsts],
                     f"vmap({body.name})")
        return jb, jc

    n_bc = len(bconsts)
    jb, jc = body.derived(key, make)
    counts0 = const(np.zeros(size, np.int64))
    outs = _apply(While, *init, counts0, *cconsts, *bconsts, *cconsts, cond_body=jc, body=jb,
                  n_carry=n_carry + 1, n_cconsts=n_cc, save=p["save"],
                  checkpoint=p.get("checkpoint"))
    outs = list(outs)
    res = outs[:n_carry] + [outs[n_carry]]  # the carry, each member's trip count
    if p["save"]:  # each member's rows, and the iterations it had done before each row
        res += [_swap01(c) for c in outs[n_carry + 2:n_carry + 2 + n_carry + 1]]
    return tuple(res)


def while_loop(cond_fun, body_fun, init_val, *, checkpoint=None):
    """``while cond_fun(val): val = body_fun(val)``, as one primitive (JAX's
    ``lax.while_loop``), differentiable in reverse mode too.

    The trip count may depend on the data. Reverse mode records it: the forward keeps the
    value at the start of every iteration (memory: trip count x one value, the primitive's
    stacked output); the backward computes the residuals of every iteration at once, by the
    body batched over those values (one vectorized pass, not a loop), and runs the loop in
    reverse through the body's backward rules (memory at that point: trip count x the body's
    residuals). With ``checkpoint=k`` the backward holds at most ``k`` values and
    recomputes the others from them instead. Under ``vmap`` the loop runs until every member
    is done; finished members keep their value and their rows pass the cotangent through
    unchanged.

    Args:
        cond_fun: ``cond_fun(val) -> bool`` scalar Tensor (or Python bool).
        body_fun: ``body_fun(val) -> val`` with ``init_val``'s structure, shapes and dtypes.
        init_val: Initial value: a pytree of Tensors, arrays or numbers.
        checkpoint: Memory of reverse mode. None (default): keep every iteration's value.
            An int ``k >= 1``: the forward keeps only the trip count; the backward holds at
            most ``k`` values at once and recomputes the others from them by binomial
            checkpointing (*revolve*); see docs/transforms.md for the cost.

    Returns:
        The final value.

    Raises:
        TypeError: if ``cond_fun`` does not return a boolean scalar, ``body_fun`` changes
            the value's structure, shape or dtype, or ``checkpoint`` is not None or an int.
        ValueError: if ``checkpoint`` is below 1.

    Example:
        >>> import tapegrad as tg
        >>> f = lambda x: tg.while_loop(lambda v: v < 10.0, lambda v: v * 1.5, x)
        >>> float(f(tg.Tensor(1.0))), float(tg.grad(f)(tg.Tensor(1.0)))
        (11.390625, 11.390625)
    """
    who = "while_loop"
    for name, fn in (("cond_fun", cond_fun), ("body_fun", body_fun)):
        if not callable(fn):
            raise TypeError(f"while_loop: {name} must be callable, got {type(fn).__name__}")
    checkpoint = check_checkpoint("while_loop", checkpoint)
    init_leaves, init_tree = _leaves(init_val, who, "init_val")
    avals = [(tuple(t.shape), t.dtype) for t in init_leaves]
    n_carry = len(init_leaves)
    cname, bname = _fname(cond_fun), _fname(body_fun)

    def cflat(leaves):
        out = cond_fun(tree_unflatten(init_tree, leaves))
        t = out if isinstance(out, Tensor) else (
            Tensor(np.bool_(out)) if isinstance(out, (bool, np.bool_)) else None)
        if t is None or t.shape != () or t.dtype != np.bool_:
            seen = (f"{_aval_str((t.shape, t.dtype))}" if t is not None
                    else type(out).__name__)
            raise TypeError(f"while_loop: {cname} must return a boolean scalar, got {seen}. "
                            "Reduce it (for example with .all() or .any()).")
        return [t]

    fix = "Return a value of the same structure, shapes and dtypes as init_val."

    def bflat(leaves):
        out = body_fun(tree_unflatten(init_tree, leaves))
        got, tree = tree_flatten(out)
        return _check_leaves(who, bname, "value", got, avals, tree, init_tree, fix,
                             "init_val")

    def trace():
        ex = [_example(t) for t in init_leaves]
        cbody, clifted = trace_body(cflat, ex, cname)
        bbody, blifted = trace_body(bflat, ex, bname)
        return [cbody, bbody], [clifted, blifted], None

    (cbody, bbody), (clifted, blifted), _ = _traced_once(
        (cond_fun, body_fun), ("while_loop", init_tree, tuple(avals)), trace)
    args = init_leaves + clifted + blifted
    save = checkpoint is None and _any_traced(args)
    outs = _apply(While, *args, cond_body=cbody, body=bbody, n_carry=n_carry,
                       n_cconsts=len(clifted), save=save, checkpoint=checkpoint)
    return tree_unflatten(init_tree, list(outs[:n_carry]))


# -- cond / switch ----------------------------------------------------------------------------
class Switch(Function):
    """The primitive behind :func:`switch` and :func:`cond`: inputs ``index + operands +
    consts``; branch ``k`` reads the operands and ``consts[spans[k][0]:spans[k][1]]``."""

    # runs tapegrad ops (or a recorded body) on its inputs: each computes bfloat16 itself
    bfloat16_native = True

    oper = "switch"
    _ctx_arrays_recomputed = True
    check_loaded = staticmethod(_control_check.check_switch)  # a tape file's entry (Tape.from_json)

    @staticmethod
    def forward(ctx, index, *arrays, branches, n_ops, spans):
        k = int(np.clip(int(np.asarray(index).reshape(())), 0, len(branches) - 1))
        lo, hi = spans[k]
        ops = list(arrays[:n_ops])
        outs = branches[k].run(ops + list(arrays[n_ops + lo:n_ops + hi]))
        ctx.params = dict(branches=branches, n_ops=n_ops, spans=spans)
        ctx.save_for_backward(index, *arrays)
        ctx.mark_non_differentiable()
        xp = ctx.backend
        return _outputs([xp.array(o, copy=True) for o in outs])

    @staticmethod
    def backward(ctx, *gs):
        p = ctx.params
        saved = list(ctx.saved_tensors)
        index, rest = saved[0], saved[1:]
        branches, n_ops, spans = p["branches"], p["n_ops"], p["spans"]
        needs = ctx.needs_input_grad[1:]
        want = [i for i, a in enumerate(rest) if needs[i] and _is_float(a.dtype)]
        if not want:
            return (None,) * (1 + len(rest))
        avals = branches[0].out_avals
        fo = [j for j, a in enumerate(avals) if _is_float(a[1])]
        key = ("vjp", tuple(want))
        in_avals = [(tuple(a.shape), a.dtype) for a in rest]

        def make():
            def one(k):
                lo, hi = spans[k]

                def step(leaves):
                    vals = leaves[:len(rest)]
                    g = leaves[len(rest):]
                    inputs = vals[:n_ops] + vals[n_ops + lo:n_ops + hi]
                    mine = [i for i in want if i < n_ops or lo <= i - n_ops < hi]
                    pos = [i if i < n_ops else n_ops + (i - n_ops - lo) for i in mine]
                    cts = _vjp_of(branches[k], inputs, pos, fo, g)
                    got = dict(zip(mine, cts))
                    return [got[i] if i in got else _zeros(in_avals[i]) for i in want]

                ex = [_example(a) for a in rest] + [np.zeros(*avals[j]) for j in fo]
                return _closed(step, ex, f"vjp({branches[k].name})")

            return tuple(one(k) for k in range(len(branches)))

        vb = branches[0].derived(key, make)
        g = [gs[j] if gs[j] is not None else _zeros(avals[j]) for j in fo]
        n_in = len(rest)
        outs = _apply(Switch, index, *rest, *g, branches=vb, n_ops=n_in + len(g),
                            spans=tuple((0, 0) for _ in vb))
        outs = outs if isinstance(outs, tuple) else (outs,)
        res: list = [None] * (1 + n_in)
        for i, v in zip(want, outs):
            res[1 + i] = v
        return tuple(res)

    @staticmethod
    def jvp(ctx, *ts):
        p = ctx.params
        saved = list(ctx.saved_tensors)
        index, rest = saved[0], saved[1:]
        branches, n_ops, spans = p["branches"], p["n_ops"], p["spans"]
        tin = [i for i, t in enumerate(ts[1:]) if t is not None]
        avals = branches[0].out_avals
        if not tin:
            return (None,) * len(avals)
        key = ("jvp", tuple(tin))

        def make():
            def one(k):
                lo, hi = spans[k]

                def step(leaves):
                    vals = leaves[:len(rest)]
                    tl = leaves[len(rest):]
                    inputs = vals[:n_ops] + vals[n_ops + lo:n_ops + hi]
                    tangents: list = [None] * len(inputs)
                    for i, t in zip(tin, tl):
                        if i < n_ops:
                            tangents[i] = t
                        elif lo <= i - n_ops < hi:
                            tangents[n_ops + i - n_ops - lo] = t
                    _, touts = _jvp_of(branches[k], inputs, tangents)
                    return [t if t is not None else _zeros(a) for t, a in zip(touts, avals)]

                ex = [_example(a) for a in rest] + [_example(rest[i]) for i in tin]
                return _closed(step, ex, f"jvp({branches[k].name})")

            return tuple(one(k) for k in range(len(branches)))

        jb = branches[0].derived(key, make)
        outs = _apply(Switch, index, *rest, *[ts[1 + i] for i in tin], branches=jb,
                            n_ops=len(rest) + len(tin), spans=tuple((0, 0) for _ in jb))
        outs = outs if isinstance(outs, tuple) else (outs,)
        return tuple(t if _is_float(a[1]) else None for t, a in zip(outs, avals))

    @staticmethod
    def batch(args, batched, size, **p):
        from tapegrad.transforms.vmap import vmap

        branches, n_ops, spans = p["branches"], p["n_ops"], p["spans"]
        index, rest = args[0], list(args[1:])
        rb = tuple(batched[1:])

        def batched_branch(k):
            lo, hi = spans[k]
            idx = list(range(n_ops)) + list(range(n_ops + lo, n_ops + hi))
            axes = tuple(0 if rb[i] else None for i in idx)

            def make():
                def step(leaves):
                    return list(vmap(lambda *ls: tuple(branches[k].apply(list(ls))),
                                     in_axes=axes, out_axes=0)(*leaves))

                return _closed(step, [_example(rest[i]) for i in idx],
                               f"vmap({branches[k].name})")

            return branches[k].derived(("batch", axes, size), make), idx

        made = [batched_branch(k) for k in range(len(branches))]
        if not batched[0]:
            vb = tuple(m[0] for m in made)
            outs = _apply(Switch, index, *rest, branches=vb, n_ops=len(rest),
                                spans=tuple((0, 0) for _ in vb))
            return outs if isinstance(outs, tuple) else (outs,)
        # a batched index: every branch runs on the whole batch, a select picks per member
        results = [bk.apply([rest[i] for i in idx]) for bk, idx in made]
        out = list(results[0])
        for k in range(1, len(results)):
            for j, v in enumerate(results[k]):
                m = (index >= k).reshape((size,) + (1,) * (v.ndim - 1))
                out[j] = Where.apply(m, v, out[j])
        return tuple(out)

    @classmethod
    def output_shape(cls, *shapes, **params):
        return [tuple(s) for s, _ in params["branches"][0].out_avals]

    @classmethod
    def output_dtype(cls, *dtypes, **params):
        return [d for _, d in params["branches"][0].out_avals]


def switch(index, branches, *operands):
    """Apply ``branches[index](*operands)``, as one primitive (JAX's ``lax.switch``).

    ``index`` is clamped to ``[0, len(branches) - 1]``. Every branch is traced once; they
    must return the same pytree structure, shapes and dtypes. Under ``vmap`` with a batched
    ``index`` every branch runs and a select picks each member's result; derivatives flow
    only through the branch taken.

    Args:
        index: Integer scalar (an int or an integer Tensor).
        branches: Sequence of callables, each ``branch(*operands) -> out``.
        *operands: Pytrees of Tensors, arrays or numbers passed to the branch.

    Returns:
        The chosen branch's output.

    Raises:
        TypeError: if ``index`` is not an integer scalar, ``branches`` is empty or holds a
            non-callable, or the branches' outputs differ in structure, shape or dtype (the
            message names both branches).

    Example:
        >>> import tapegrad as tg
        >>> fs = [lambda x: x + 1.0, lambda x: x * 10.0]
        >>> float(tg.switch(1, fs, tg.Tensor(2.0)))
        20.0
    """
    return _switch("switch", index, branches, operands)


def _switch(who, index, branches, operands, roles=None):
    branches = list(branches) if isinstance(branches, (list, tuple)) else None
    if not branches:
        raise TypeError(f"{who}: branches must be a non-empty list or tuple of callables")
    for k, b in enumerate(branches):
        if not callable(b):
            raise TypeError(f"{who}: branch {k} is a {type(b).__name__}, not a callable")
    idx = index if isinstance(index, Tensor) else Tensor(index) if isinstance(
        index, (int, np.integer, np.ndarray, bool, np.bool_)) else None
    if idx is None or idx.shape != () or idx.dtype.kind not in "iub":
        seen = _aval_str((idx.shape, idx.dtype)) if idx is not None else type(index).__name__
        raise TypeError(f"{who}: the index must be an integer scalar, got {seen}")
    if idx.dtype.kind == "b" or idx.dtype != np.int64:
        idx = idx.astype(np.int64)
    op_leaves, op_tree = _leaves(tuple(operands), who, "operands")
    n_ops = len(op_leaves)
    out_tree: list = [None]
    first_name: list = [None]

    def trace():
        ex = [_example(t) for t in op_leaves]
        bodies: list = []
        lifts: list = []
        for k, b in enumerate(branches):
            bname = _fname(b) + (f" ({roles[k]})" if roles else "")

            def flat(leaves, b=b, bname=bname, k=k):
                out = b(*tree_unflatten(op_tree, leaves))
                got, tree = tree_flatten(out)
                got = [_as_leaf(v, who, f"{bname}'s output") for v in got]
                if k == 0:
                    out_tree[0] = tree
                    first_name[0] = bname
                    return got
                first = first_name[0] if roles else f"{first_name[0]} (branch 0)"
                return _check_leaves(who, bname, "output", got, bodies[0].out_avals, tree,
                                     out_tree[0], "Every branch must return the same "
                                     "structure, shapes and dtypes.", f"the output of {first}")

            body, lifted = trace_body(flat, ex, bname)
            bodies.append(body)
            lifts.append(lifted)
        return bodies, lifts, out_tree[0]

    extra = (who, tuple(roles or ()), op_tree, _avals_key(op_leaves))
    bodies, lifts, out_tree[0] = _traced_once(tuple(branches), extra, trace)
    consts, spans = [], []
    for lifted in lifts:
        spans.append((len(consts), len(consts) + len(lifted)))
        consts.extend(lifted)
    outs = _apply(Switch, idx, *op_leaves, *consts, branches=tuple(bodies), n_ops=n_ops,
                        spans=tuple(spans))
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    return tree_unflatten(out_tree[0], outs)


def cond(pred, true_fun, false_fun, *operands):
    """``true_fun(*operands) if pred else false_fun(*operands)``, as one primitive (JAX's
    ``lax.cond``): both branches are traced, one runs.

    Under ``vmap`` with a batched ``pred`` both branches run and a select picks each
    member's result.

    Args:
        pred: Boolean (or integer) scalar: a bool, an int or a Tensor.
        true_fun: Callable on ``*operands``.
        false_fun: Callable on ``*operands`` returning the structure, shapes and dtypes that
            ``true_fun`` returns.
        *operands: Pytrees of Tensors, arrays or numbers.

    Returns:
        The output of the branch taken.

    Raises:
        TypeError: if ``pred`` is not a scalar, or the branches' outputs differ (naming
            both functions and the types seen).

    Example:
        >>> import tapegrad as tg
        >>> f = lambda x: tg.cond(x > 0, lambda v: v * v, lambda v: -v, x)
        >>> float(f(tg.Tensor(3.0))), float(tg.grad(f)(tg.Tensor(3.0)))
        (9.0, 6.0)
    """
    p = pred if isinstance(pred, Tensor) else Tensor(pred) if isinstance(
        pred, (bool, int, np.bool_, np.integer, np.ndarray)) else None
    if p is None or p.shape != () or p.dtype.kind not in "biu":
        seen = _aval_str((p.shape, p.dtype)) if p is not None else type(pred).__name__
        raise TypeError(f"cond: pred must be a boolean scalar, got {seen}")
    if p.dtype.kind != "b":
        p = p != 0
    return _switch("cond", p.astype(np.int64), [false_fun, true_fun], operands,
                   ("false_fun", "true_fun"))
