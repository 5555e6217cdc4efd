"""The recorder: :class:`Trace`, the :class:`TapeEntry` it notes per primitive application, the
Python decisions it guards (:class:`Guard`), the one tape interpreter and the backward replay.

While a transform runs, each ``Function.apply`` on a value it traces calls the transform's
:meth:`Trace.record`, which computes the value one level down and notes one
:class:`TapeEntry` (its Function, static parameters, context, and the node ids of its inputs
and outputs). When the traced function returns, the entries are frozen into a
:class:`~tapegrad.core.tape.Tape` in execution order (a topological order). Forward mode and
linearization are traces that override :meth:`Trace.note` (what to do with each entry);
batching overrides :meth:`Trace.record`. :func:`interpret` runs entries forward (on Tensors
through ``apply``, or on arrays), :func:`backward_pass` runs their ``backward`` rules.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from tapegrad.core import backend as _backend
from tapegrad.core import dtypes as _dtypes
from tapegrad.core import function as _function
from tapegrad.core import profiler as _profiler
from tapegrad.core.function import (
    CONTEXT_FIELDS,
    OTHER,
    Applied,
    _check_devices,
    _state,
    derive_context,
    rule_outputs,
    run_primitive,
    saved_values,
    unbroadcast,
)
from tapegrad.core.tensor import Box, Tensor, _s_array, _s_box, caller_line, const, make, primal_of
from tapegrad.core.tree import tree_flatten

__all__ = ["TapeEntry", "Guard", "Trace", "GuardError", "Watch", "backward_pass", "interpret",
           "apply_step", "check_guard", "run_rule"]

_new = object.__new__
_tuple_new = tuple.__new__
_ndarray = np.ndarray
_BF16 = _dtypes.bfloat16
_PROFILING = _profiler.PROFILING  # nonzero while a tg.profile block is open (in any thread)

class GuardError(RuntimeError):
    """A tape replay met inputs that change a Python decision taken while recording."""


class TapeEntry(NamedTuple):
    """One recorded primitive application (immutable).

    Attributes:
        fn: The :class:`~tapegrad.core.function.Function` subclass.
        params: Static keyword parameters given to ``fn.apply``.
        ctx: The :class:`~tapegrad.core.function.Context` its ``backward`` reads (``None`` when the
            entry carries no gradient at its level).
        in_nodes: Node id per input, ``-1`` for an input that is a constant at this level.
        consts: Per input, the constant (a Tensor or Python value), ``None`` for nodes.
        out_nodes: Node id per output.
        saved: Where each value in ``ctx.saved_tensors`` comes from (a tuple of
            :class:`~tapegrad.core.function.Saved`: an input, an output or another value).
        nondiff: Positions of the outputs ``forward`` marked non-differentiable.
        watch: A :class:`Watch` when an enclosing transform records this entry's rules, else
            None.
        site: ``file:line`` of the user code that applied the op (kept inside
            :func:`~tapegrad.debug_nans` only), else None.
    """

    fn: Any
    params: dict
    ctx: Any
    in_nodes: tuple
    consts: tuple
    out_nodes: tuple
    saved: tuple = ()
    nondiff: tuple = ()
    watch: Any = None
    site: Any = None

    @property
    def oper(self) -> str:
        """The Function's label on listings (its ``oper``, else its lowercase class name)."""
        return self.fn._name()


class Guard(NamedTuple):
    """A Python decision taken on a traced value: ``bool``, ``int``, ``float``, ``complex``,
    ``item`` (a Python number), or ``numpy`` (the whole value read as a NumPy array, by
    ``Tensor.numpy()`` or ``np.asarray``).

    Attributes:
        kind: Which conversion was made.
        node: The value's node.
        value: What it returned (for ``numpy``, a read-only copy of the array; a replay must
            meet exactly this array).
        where: ``file:line`` of the decision in user code.
    """

    kind: str
    node: int
    value: Any
    where: str


def _host_copy(a) -> np.ndarray:
    """A read-only NumPy copy of array ``a`` (the value a ``numpy`` guard holds)."""
    arr = np.array(a, copy=True)
    arr.flags.writeable = False
    return arr


_GUARD_FNS = {
    "bool": lambda a: bool(a.reshape(())),
    "int": lambda a: int(a.reshape(())),
    "float": lambda a: float(a.reshape(())),
    "complex": lambda a: complex(a.reshape(())),
    "item": lambda a: a.reshape(()).item(),
    "numpy": _host_copy,
}


def guard_value(kind: str, array):
    """What the decision ``kind`` gives on ``array`` (a NumPy array, or a host copy of one)."""
    return _GUARD_FNS[kind](np.asarray(array))


def guard_holds(g: Guard, got) -> bool:
    """Whether ``got`` (from :func:`guard_value`) is the value ``g`` recorded: numbers compare
    equal, arrays have the same shape, dtype and elements (NaN matching NaN)."""
    if g.kind != "numpy":
        return got == g.value
    want = g.value
    return (got.shape == want.shape and got.dtype == want.dtype
            and bool(np.array_equal(got, want, equal_nan=got.dtype.kind in "fcV")))


def _show(value) -> str:
    """A guard's value for listings (arrays shortened)."""
    if isinstance(value, np.ndarray):
        if value.size <= 4:
            return np.array2string(value, separator=", ")
        return f"<array {_fmt_aval((value.shape, value.dtype))}>"
    return repr(value)


def check_guard(g: Guard, value, who: str) -> None:
    """Raise :class:`GuardError` if ``value`` (a backend array, or a Tensor of a replay)
    changes the decision ``g`` recorded. On a traced Tensor the decision is taken again on the
    transforms tracing it (guards there, a refusal inside ``vmap``), as the recorded function
    took it."""
    if type(value) is Tensor:
        got = guard_value(g.kind, _backend.to_device(value._concrete(), "cpu"))
        if value._level:
            value._trace.decide(value, g.kind, got, only_branch=True)
    else:
        got = guard_value(g.kind, value if type(value) is np.ndarray
                          else _backend.to_device(value, "cpu"))
    if not guard_holds(g, got):
        raise GuardError(
            f"{who}: the recording took a Python decision on a traced value at {g.where} "
            f"({g.kind}(...) gave {_show(g.value)}); these inputs give {_show(got)}, so the "
            "recorded program no longer matches the function. Trace it again for these "
            "inputs, or express the branch with tnp.where."
        )


def _loaded_failure(who: str, i: int, e: TapeEntry, err: BaseException) -> ValueError:
    """The error for entry ``i`` of a tape read from a file whose forward failed with ``err``
    (parameters from the file that the op cannot take)."""
    return ValueError(f"{who}: entry {i} ({e.oper}) of a tape loaded from a file fails: "
                      f"{type(err).__name__}: {err}")


def _check_outputs(who: str, i: int, e: TapeEntry, outs, avals) -> None:
    """Raise ValueError unless the arrays ``outs`` that entry ``i`` of a tape read from a file
    produced have the number, shapes and dtypes of its output nodes in ``avals``."""
    if len(outs) != len(e.out_nodes):
        raise ValueError(f"{who}: entry {i} ({e.oper}) of a tape loaded from a file gives "
                         f"{len(outs)} output(s); the file declares {len(e.out_nodes)}")
    for n, o in zip(e.out_nodes, outs):
        shape, dtype = avals[n]
        d = getattr(o, "dtype", None)
        got = (tuple(np.shape(o)), np.dtype(d if d is not None else np.asarray(o).dtype))
        if got != (tuple(shape), dtype):
            raise ValueError(
                f"{who}: entry {i} ({e.oper}) of a tape loaded from a file gives node {n} shape "
                f"{got[0]} and dtype {got[1]}; the file declares shape {tuple(shape)} and dtype "
                f"{dtype}"
            )


def interpret(entries, env: dict, step, who: str, avals=None) -> dict:
    """The one tape interpreter: run ``entries`` in order on the values in ``env`` (node id ->
    value, filled in place; a node already there keeps its value) and return ``env``.

    ``step(entry, args)`` runs one entry on its inputs and returns its outputs (a tuple):
    Tensors through ``fn.apply`` (so that transforms in progress see each primitive; see
    :func:`apply_step`), or backend arrays through :func:`~tapegrad.core.function.run_primitive`.
    Guards are checked by :func:`check_guard`. With ``avals`` (a tape read from a file) each
    entry's failure and outputs are checked against what the file declares.

    Raises:
        GuardError: if a value changes a recorded decision.
        ValueError: for an entry of a loaded tape that fails or gives other shapes or dtypes.
    """
    for i, e in enumerate(entries):
        if type(e) is Guard:
            check_guard(e, env[e.node], who)
            continue
        args = [env[n] if n >= 0 else c for n, c in zip(e.in_nodes, e.consts)]
        if avals is None:
            outs = step(e, args)
        else:  # a tape from a file: each entry checked against what the file declares
            try:
                outs = step(e, args)
            except (ValueError, GuardError, FloatingPointError, MemoryError):
                raise
            except Exception as err:
                raise _loaded_failure(who, i, e, err) from err
            _check_outputs(who, i, e, [o._array if type(o) is Tensor else o for o in outs],
                           avals)
        for n, o in zip(e.out_nodes, outs):
            env.setdefault(n, o)
    return env


def apply_step(e: TapeEntry, args) -> tuple:
    """One entry on Tensors, through its Function's ``apply`` (a step of :func:`interpret`)."""
    outs = e.fn.apply(*args, **e.params)
    return outs if type(outs) is tuple else (outs,)


def _escape(message: str) -> TypeError:
    """The TypeError for a traced value read as a Python or NumPy value where a transform
    would lose its derivative, marked so that a rule's caller can name the rule."""
    err = TypeError(message)
    err._tapegrad_escape = True  # pyright: ignore[reportAttributeAccessIssue]
    return err


def is_escape(err: BaseException) -> bool:
    """Whether ``err`` was raised by :func:`_escape`."""
    return getattr(err, "_tapegrad_escape", False)


def escaped_rule(fn, rule: str, e: TypeError) -> TypeError:
    """The error for a ``backward``/``jvp`` rule of ``fn`` that read a traced value as a
    NumPy array or Python number (it then computes off the tape)."""
    return TypeError(
        f"{fn.__name__}.{rule} read a value as a NumPy array or Python number while an "
        "enclosing transform differentiates that rule (a higher-order derivative), so the "
        f"result would silently lose that path ({e}). Write {rule} with tapegrad operations "
        "on the Tensors it receives (ctx.saved_tensors and the cotangents: tapegrad.numpy "
        "functions, NumPy's functions and ufuncs on Tensors, and operators all record), or, "
        f"if {fn.__name__} is only meant for first derivatives, decorate its backward with "
        "@tg.once_differentiable (differentiating it again then raises)."
    )


class Watch(NamedTuple):
    """Kept on a tape entry when an enclosing transform traces the op's inputs, so that it
    records (differentiates, replays or batches) whatever the entry's rules compute.

    Attributes:
        trace: The enclosing (lower-level) trace.
        fn: The Function.
        inputs: The op's inputs as that trace sees them (kept for a
            :func:`~tapegrad.once_differentiable` rule, which reruns the op from them), or
            None.
        params: The op's keyword parameters.
        constants: Names of floating arrays ``forward`` left to the rule (free context
            attributes, saved arrays that are neither inputs nor outputs): constants to the
            enclosing transform.
        rerun: For a once-differentiable ``backward``: ``rerun(watch, ctx, cotangents)``, the
            rule as one primitive of the op's inputs and cotangents (the decorator's); else
            None.
    """

    trace: Any
    fn: Any
    inputs: Any
    params: dict
    constants: tuple
    rerun: Any = None


def _floating_array(v, given) -> bool:
    """Whether ``v`` is a floating array or NumPy scalar not among the ids ``given`` (the op's
    static parameters and non-Tensor inputs: values passed in, not computed)."""
    if type(v) is Tensor or id(v) in given:
        return False
    dt = getattr(v, "dtype", None)
    return hasattr(v, "shape") and isinstance(dt, np.dtype) and dt.kind in "fcV"


def _watch(fn, ctx, trace, lowered, params, spec) -> Watch | None:
    """The :class:`Watch` of rules an enclosing ``trace`` will record, when they need one: a
    once-differentiable rule, or a rule that would read floating arrays ``forward`` left as
    constants."""
    rerun = getattr(fn.backward, "rerun", None)
    if rerun is not None:
        return Watch(trace, fn, tuple(lowered), params, (), rerun)
    if getattr(fn, "_ctx_arrays_recomputed", False):
        return None
    names = []
    given = None
    for name, v in ctx.__dict__.items():
        if name in CONTEXT_FIELDS or v is None or type(v) in (bool, int, float, str):
            continue
        if given is None:
            given = {id(a) for a in lowered if type(a) is not Tensor}
            given.update(id(p) for p in params.values())
        if _floating_array(v, given) or (isinstance(v, (tuple, list))
                                         and any(_floating_array(e, given) for e in v)):
            names.append(f"ctx.{name}")
    for j, saved in enumerate(spec):
        v = saved.ref
        if saved.kind == OTHER and isinstance(v, Tensor) and v._level == 0 \
                and v.dtype.kind in "fcV":
            names.append(f"ctx.saved_tensors[{j}] (an array that is neither an input nor an "
                         "output of forward)")
    return Watch(trace, fn, None, params, tuple(names)) if names else None


def run_rule(fn, rule: str, ctx, watch, args):
    """``fn``'s ``rule`` (``"backward"`` or ``"jvp"``) on ``ctx`` and ``args``, under the
    entry's ``watch``: refused where it would read ``forward``'s arrays as constants of an
    enclosing transform (:func:`check_watch`), and a once-differentiable ``backward`` run as
    one primitive where an enclosing transform records it."""
    if watch is not None:
        check_watch(fn, watch, rule)
        if watch.rerun is not None and rule == "backward" and not watch.trace.done:
            return watch.rerun(watch, ctx, args)
    return getattr(fn, rule)(ctx, *args)


def check_watch(fn, w: Watch, rule: str) -> None:
    """Refuse to run ``rule`` (``"backward"`` or ``"jvp"``) of ``fn`` where an enclosing
    transform records it and it would read arrays ``forward`` computed as constants.

    Raises:
        TypeError: naming the Function, the arrays and the fixes.
    """
    if not w.constants:
        return
    trace = w.trace
    if trace.done or (not trace.replays and trace.level <= _function._state.limit):
        return
    what = ("records it to replay (jit, trace), which would keep this call's values for "
            "every later call") if trace.replays else (
        "differentiates it (a higher-order derivative), which would silently lose their "
        "derivatives")
    raise TypeError(
        f"{fn.__name__}.{rule}: forward left floating arrays ({', '.join(w.constants)}) that "
        f"the rule reads as constants, but an enclosing transform {what}. Save inputs and "
        f"outputs with ctx.save_for_backward and recompute the rest in {rule} with tapegrad "
        "operations, or, if the op is only meant for first derivatives, decorate its "
        "backward with @tg.once_differentiable (it then runs under jit and trace, and "
        "differentiating it again raises)."
    )


def _leaked(fn) -> RuntimeError:
    return RuntimeError(
        f"{fn._name()}: an input is a traced value of a transform that has already finished "
        "(a leaked tracer, for example one stored in a global or a closure and used after "
        "grad/vjp returned). Pass it as an argument instead."
    )


def _needs(fn, args) -> tuple:
    """``needs_input_grad`` of the lowest level: whether any level may want each input's
    cotangent (a floating Tensor some transform traces, not in ``nondiff_argnums``)."""
    nd = fn.nondiff_argnums
    return tuple([type(a) is Tensor and a._level > 0 and not (nd and i in nd)
                  and a._array.dtype.kind in "fcV" for i, a in enumerate(args)])


class Trace:
    """The recorder of one transform (one level). Internal: users see :class:`Tape`.

    ``replays`` says whether the entries will be replayed forward (``trace``, ``jit``,
    ``linearize``: every op is recorded). A trace that only differentiates (``grad``, ``vjp``,
    ``jvp``) passes ``replays=False``: an op that carries no derivative at its level (a
    non-differentiable op, an op under :func:`~tapegrad.no_grad`, or one whose only inputs
    traced here are ``nondiff_argnums``) then runs one level down, and its output is a constant
    at this level, so no cotangent is computed for it or upstream of it.
    """

    __slots__ = ("level", "entries", "avals", "done", "labels", "replays", "_note")
    #: Whether this level's values stand for a batch of examples (``vmap``): no single Python
    #: value can be read from them.
    batched = False

    def __init__(self, level: int, replays: bool = True):
        self.level = level
        self.replays = replays
        self.entries: list = []
        self._note = self.entries.append if type(self).note is Trace.note else self.note
        self.avals: list = []  # (shape, dtype) of every node, indexed by node id
        self.done = False
        self.labels: dict = {}

    def new_input(self, primal: Tensor) -> Tensor:
        """A traced Tensor of this level wrapping ``primal``, with a fresh node id."""
        node = len(self.avals)
        arr = primal._array
        self.avals.append((arr.shape, arr.dtype))
        if primal.label is not None:
            self.labels[node] = primal.label
        return make(arr, self.level, self, node, primal, primal.label)

    def record(self, fn, args, params, needs) -> Applied:
        """Apply ``fn`` at this level to ``args`` (some traced here): compute the outputs one
        level down, note the entry (:meth:`note`) and return the outputs traced here.

        ``needs`` is the base context's ``needs_input_grad`` (whether any level wants each
        input's cotangent), worked out by the outermost level (``None`` there).

        Returns an :class:`~tapegrad.core.function.Applied` record whose ``outs`` are the outputs
        traced here (Tensors) and whose ``ctx`` is the lowest level's context.
        """
        if self.done:
            raise _leaked(fn)
        level = self.level
        diff = fn.differentiable and level > _state.limit
        nd = fn.nondiff_argnums
        # Each input as this level sees it: a node of this trace (then its value one level
        # down, and whether this level wants its cotangent) or a constant.
        lowered, arrays, in_nodes, consts, wants = [], [], [], [], []
        below = None  # the trace of the next level down that traces an input, if any
        cpu = True
        for k, a in enumerate(args):
            if type(a) is Tensor:
                b = a._box
                if b is not None and b.level == level:
                    if b.trace is not self:
                        raise RuntimeError(f"{fn._name()}: inputs from two traces of one level")
                    in_nodes.append(b.node)
                    consts.append(None)
                    a = b.primal
                    if a is None:
                        a = primal_of(args[k])
                    wants.append(diff and a._array.dtype.kind in "fcV" and not (nd and k in nd))
                    b = a._box
                else:
                    in_nodes.append(-1)
                    consts.append(a)
                    wants.append(False)
                if b is not None and b.level and (below is None or b.level > below.level):
                    below = b.trace
                arr = a._array
                if type(arr) is not _ndarray or arr.dtype is _BF16:  # a device, or widening
                    cpu = False
                arrays.append(arr)
            else:
                in_nodes.append(-1)
                consts.append(a)
                wants.append(False)
                if type(a) is _ndarray and a.dtype is _BF16:
                    cpu = False
                arrays.append(a)
            lowered.append(a)
        if not cpu:  # NumPy constants join the device of the Tensor inputs (on the tape too)
            _check_devices(fn, lowered, arrays)
            lowered = [v if type(v) is Tensor else a for v, a in zip(lowered, arrays)]
            consts = [None if n >= 0 else v for n, v in zip(in_nodes, lowered)]
        wants = tuple(wants)
        active = True in wants
        # The outputs one level down: recorded (and computed) by the next trace, or computed
        # (with the level-0 saved values set on its context).
        if below is not None:
            run = below.record(fn, lowered, params, _needs(fn, args) if needs is None else needs)
            prims = run.outs
        else:
            run = run_primitive(fn, lowered, arrays, params, wants if needs is None else needs, cpu)
            prims = run.prims
        if not active and not self.replays:  # no derivative at this level: constants here
            if below is None:
                run.outs = tuple(prims or [const(a) for a in run.outs])
            return run
        ctx = watch = site = None
        if active and not (run.nondiff and not run.multi):  # (a lone non-differentiable output)
            if below is not None:  # this level's context; the rules run while below watches
                spec = run.saved
                ctx = derive_context(run.ctx, wants,
                                     saved_values(spec, lowered, prims) if spec else None)
                watch = _watch(fn, ctx, below, lowered, params, spec or ())
            else:
                ctx = run.ctx
                if needs is not None:
                    ctx.needs_input_grad = wants
            if _state.debug:  # where the user called the op, for tg.debug_nans' message
                site = caller_line()
        # The outputs traced here: fresh nodes over the values one level down.
        avals = self.avals
        node = len(avals)
        values = run.outs
        if len(values) == 1:
            arr = values[0]._array if below is not None else values[0]
            avals.append((arr.shape, arr.dtype))
            t = _new(Tensor)
            _s_array(t, arr)
            _s_box(t, Box(level, self, node, None if prims is None else prims[0]))
            outs = (t,)
            out_nodes = (node,)
        else:
            outs, out_nodes = [], []
            for j, v in enumerate(values):
                arr = v._array if below is not None else v
                avals.append((arr.shape, arr.dtype))
                t = _new(Tensor)
                _s_array(t, arr)
                _s_box(t, Box(level, self, node, None if prims is None else prims[j]))
                outs.append(t)
                out_nodes.append(node)
                node += 1
            outs, out_nodes = tuple(outs), tuple(out_nodes)
        self._note(_tuple_new(TapeEntry, (
            fn, params, ctx, tuple(in_nodes), tuple(consts), out_nodes, run.saved or (),
            run.nondiff, watch, site)))
        run.outs = outs  # the same record, now holding this level's Tensors
        return run

    def note(self, entry: TapeEntry) -> None:
        """Keep ``entry`` (forward mode overrides this to compute tangents instead)."""
        self.entries.append(entry)

    def decide(self, t: Tensor, kind: str, value, only_branch: bool = False,
               what: str | None = None) -> None:
        """A Python decision on ``t``'s value: a guard on every replaying trace holding it.

        ``kind`` is ``bool``, ``int``, ``float``, ``complex``, ``item`` or ``numpy`` (the whole
        array read out: ``value`` is that NumPy array; ``what`` names the call for messages,
        such as ``"Tensor(x)"``). ``only_branch=True`` says the value
        only picks a branch or feeds a non-differentiable result (a tape's guard replayed, a
        check inside an op), so a differentiating transform has nothing to lose.

        Raises:
            TypeError: for ``float``/``complex``/``item``/``numpy`` of a floating value that a
                differentiating transform traces (the result would carry no derivative); for
                any decision on a batched value inside ``vmap``.
        """
        where = None
        while t is not None and t._level:
            trace = t._trace
            if not trace.done:
                if trace.batched:
                    if kind == "numpy":
                        raise TypeError(
                            f"{what or 'numpy() (or np.asarray)'} of a batched value inside "
                            "vmap: it stands for every example at once. Compute on the Tensor "
                            "itself, or return it from the vmapped function to get the stacked "
                            "values."
                        )
                    raise TypeError(
                        f"{kind}() of a batched value inside vmap: each example may give a "
                        "different answer, so one Python value cannot stand for them. Write "
                        "the branch with tnp.where(cond, a, b) (or decide on tnp.any/tnp.all "
                        "of the whole batch outside vmap)."
                    )
                if trace.replays:
                    if where is None:
                        where = caller_line()
                    trace.entries.append(Guard(kind, t._node, _host_copy(value)
                                               if kind == "numpy" else value, where))
                elif (
                    not only_branch
                    and kind in ("float", "complex", "item", "numpy")
                    and t.dtype.kind in "fcV"
                    and trace.level > _function._state.limit
                ):
                    if kind == "numpy" and what is not None:
                        raise _escape(
                            f"{what} of a Tensor that a transform is differentiating makes a "
                            "constant: it would carry no derivative, so the gradient would "
                            "silently lose this path. Use x itself (tnp.asarray(x) keeps it "
                            "traced too), or write tg.stop_gradient(x) if a constant is meant."
                        )
                    if kind == "numpy":
                        raise _escape(
                            "numpy() (or np.asarray/np.array) of a Tensor that a transform is "
                            "differentiating: the NumPy array would carry no derivative, so "
                            "the gradient would silently lose this path. Keep computing with "
                            "Tensors (tapegrad.numpy functions, and NumPy's functions called "
                            "on Tensors, record), or write tg.stop_gradient(x).numpy() if a "
                            "constant is meant."
                        )
                    fix = (f"tg.stop_gradient(x).{kind}()" if kind == "item"
                           else f"{kind}(tg.stop_gradient(x))")
                    raise _escape(
                        f"{kind}() of a Tensor that a transform is differentiating: the Python "
                        "number would carry no derivative, so the gradient would silently "
                        "lose this path. Keep computing with Tensors (tapegrad.numpy ops), or "
                        f"write {fix} if a constant is meant."
                    )
            t = t._primal  # pyright: ignore[reportAssignmentType]
        return None


# -- the backward replay -----------------------------------------------------------------------
def _as_cotangent(g) -> Tensor:
    """A cotangent a backward rule returned as an array or number, as a Tensor."""
    return const(np.asarray(g) if not hasattr(g, "shape") else g)


def _fit_cotangent(g: Tensor, shape, dtype, fn, i) -> Tensor:
    """Sum a cotangent over broadcast dimensions and cast it to its input's dtype (the real
    part for a real input of a complex computation, JAX's convention)."""
    if g._array.shape != shape:
        g = unbroadcast(g, shape, fn, i)
    gd = g._array.dtype
    if gd != dtype:
        if gd.kind == "c" and dtype.kind != "c":
            g = g.real
        if g._array.dtype != dtype:
            g = g.astype(dtype)
    return g


def backward_pass(entries: list, ct: dict, avals, consume: bool, _timed=False) -> dict:
    """Replay ``entries`` backward, accumulating cotangents into ``ct`` (``{node: Tensor}``).

    With ``consume=True`` the list is emptied as it goes, so each entry's saved values are
    freed as soon as its backward rule has run (the memory profile of ``grad``).
    """
    if _PROFILING[0] and not _timed:  # tg.profile: the pass is a row, its rules rows inside
        return _profiler.timed(None, "pass", backward_pass)(entries, ct, avals, consume, True)
    st = _function._state
    n = len(entries)
    pop = entries.pop
    while n:
        n -= 1
        e = pop() if consume else entries[n]
        if type(e) is Guard:
            continue
        ctx = e.ctx
        if ctx is None:
            continue
        fn, out_nodes = e.fn, e.out_nodes
        if len(out_nodes) == 1:
            g = ct.pop(out_nodes[0], None)
            if g is None:
                continue
            gs = (g,)
        else:
            gs = _multi_cotangents(e, ct, avals)
            if gs is None:
                continue
        try:
            if e.watch is None and not st.debug and not _PROFILING[0]:
                grads = fn.backward(ctx, *gs)
            else:  # an enclosing transform records the rule, tg.debug_nans, or tg.profile
                rule = run_rule if not _PROFILING[0] else _profiler.timed(fn, "backward", run_rule)
                previous = st.backward_of
                if st.debug:  # ops inside this rule report "the backward of fn"
                    st.backward_of = (fn._name(), e.site or "<unknown>")
                try:
                    grads = rule(fn, "backward", ctx, e.watch, gs)
                finally:
                    st.backward_of = previous
        except TypeError as err:
            if is_escape(err):
                raise escaped_rule(fn, "backward", err) from None
            raise
        if type(grads) is not tuple:
            grads = tuple(grads) if type(grads) is list else (grads,)
        in_nodes = e.in_nodes
        if len(grads) != len(in_nodes):
            rule_outputs(fn, "backward", grads, len(in_nodes))  # raises, naming the rule
        needs = ctx.needs_input_grad
        for i, node in enumerate(in_nodes):
            if node < 0 or not needs[i]:
                continue
            g = grads[i]
            if g is None:
                continue
            if type(g) is not Tensor:
                g = _as_cotangent(g)
            shape, dtype = avals[node]
            arr = g._array
            if arr.shape != shape or arr.dtype != dtype:
                g = _fit_cotangent(g, shape, dtype, fn, i)
            prev = ct.get(node)
            ct[node] = g if prev is None else prev + g
    return ct


def _multi_cotangents(e: TapeEntry, ct: dict, avals):
    """The cotangents of an entry with several outputs, popped from ``ct`` (zeros for missing
    ones, none for outputs marked non-differentiable); None when no cotangent reached any."""
    gs = [ct.pop(o, None) for o in e.out_nodes]
    if all(g is None for g in gs):
        return None
    nondiff = e.nondiff
    full = []
    for j, (g, o) in enumerate(zip(gs, e.out_nodes)):
        if j in nondiff:
            g = None
        elif g is None:  # zeros on the device of the cotangents that did arrive
            shape, dtype = avals[o]
            xp = _backend.backend_of(next(x for x in gs if x is not None)._concrete())
            g = const(xp.zeros(shape, dtype))
        full.append(g)
    return full


def _fmt_aval(aval) -> str:
    if aval is None:
        return "py"
    shape, dtype = aval
    d = np.dtype(dtype)
    short = {"f": "f", "i": "i", "u": "u", "b": "bool", "c": "c"}[d.kind]
    if d.kind != "b":
        short += str(d.itemsize * 8)
    return f"{short}[{','.join(str(s) for s in shape)}]"


def _seed_cotangents(cotangent, out_refs, out_avals, out_treedef, who: str) -> dict:
    """Check a user cotangent against the outputs and return ``{node: Tensor}``."""
    if type(cotangent) is Tensor and out_treedef.num_nodes == 1:
        leaves, treedef = (cotangent,), out_treedef
    else:
        leaves, treedef = tree_flatten(cotangent)
    if treedef != out_treedef:
        raise TypeError(
            f"{who}: cotangent has pytree structure {treedef}, but the function's output has "
            f"structure {out_treedef}; pass one cotangent per output leaf, in the same structure."
        )
    ct: dict = {}
    for i, (g, ref, aval) in enumerate(zip(leaves, out_refs, out_avals)):
        shape, dtype = aval
        if isinstance(g, Tensor):
            gt = g
        elif isinstance(g, (int, float, complex)) and not isinstance(g, bool):
            gt = const(np.asarray(g, dtype=dtype))
        elif hasattr(g, "shape") and hasattr(g, "dtype"):
            gt = Tensor(g)
        else:
            raise TypeError(
                f"{who}: cotangent leaf {i} has type {type(g).__name__}; expected a Tensor or "
                f"array of shape {tuple(shape)} and dtype {np.dtype(dtype)}"
            )
        if gt.shape != tuple(shape) or gt.dtype != dtype:
            raise ValueError(
                f"{who}: cotangent leaf {i} has shape {tuple(gt.shape)} and dtype {gt.dtype}, but "
                f"the output leaf has shape {tuple(shape)} and dtype {np.dtype(dtype)}"
            )
        if isinstance(ref, int):
            prev = ct.get(ref)
            ct[ref] = gt if prev is None else prev + gt
    return ct
