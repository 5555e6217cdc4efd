"""The explicit tape: the recorder (:class:`Trace`), its entries, and the frozen :class:`Tape`.

While a transform runs, each ``Function.apply`` on a value it traces calls the transform's
:meth:`Trace.record`, which computes the value one level down and notes one
:class:`TapeEntry` (its Function, static parameters, context, and the node ids of its inputs
and outputs). When the traced function returns, the entries are frozen into a :class:`Tape`
in execution order (a topological order). A tape can be printed (one line per entry, like a
jaxpr), drawn, replayed forward on new inputs and replayed backward with a cotangent, any
number of times and from many threads. Forward mode and linearization are traces that override
:meth:`Trace.note` (what to do with each entry); batching overrides :meth:`Trace.record`.
"""

from __future__ import annotations

import shutil
from typing import Any, NamedTuple

import attrs
import numpy as np

from tapegrad import backend as _backend
from tapegrad import function as _function
from tapegrad import profiler as _profiler
from tapegrad.function import Context, _state, base_apply, unbroadcast
from tapegrad.tensor import Tensor, _s_array, _s_box, caller_line, const, make, primal_of
from tapegrad.tree import tree_flatten, tree_unflatten

__all__ = ["Tape", "TapeEntry", "Guard", "Trace", "GuardError", "backward_pass"]

_new = object.__new__
_tuple_new = tuple.__new__
_ndarray = np.ndarray


class GuardError(RuntimeError):
    """A tape replay met inputs that change a Python decision taken while recording."""


class TapeEntry(NamedTuple):
    """One recorded primitive application (immutable).

    Attributes:
        fn: The :class:`~tapegrad.function.Function` subclass.
        params: Static keyword parameters given to ``fn.apply``.
        ctx: The :class:`~tapegrad.function.Context` its ``backward`` reads (``None`` when the
            entry carries no gradient at its level).
        in_nodes: Node id per input, ``-1`` for an input that is a constant at this level.
        consts: Per input, the constant (a Tensor or Python value), ``None`` for nodes.
        out_nodes: Node id per output.
    """

    fn: Any
    params: dict
    ctx: Any
    in_nodes: tuple
    consts: tuple
    out_nodes: tuple

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


def check_guard(g: Guard, array, who: str) -> None:
    """Raise :class:`GuardError` if ``array`` changes the decision ``g`` recorded."""
    got = guard_value(g.kind, array)
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


def replay_guard(g: Guard, t: Tensor, who: str) -> None:
    """Check guard ``g`` on ``t``, a value of a replay; when ``t`` is itself traced, the
    decision is taken again on the transforms tracing it (guards there, a refusal inside
    ``vmap``), as the recorded function took it.

    Raises:
        GuardError: if ``t`` changes the decision.
    """
    got = guard_value(g.kind, _backend.to_device(t._concrete(), "cpu"))
    if t._level:
        t._trace.decide(t, g.kind, got, only_branch=True)
    if not guard_holds(g, got):
        raise GuardError(
            f"{who}: the recording took a Python decision on a traced value at {g.where} "
            f"({g.kind}(...) gave {_show(g.value)}); these inputs give {_show(got)}. Trace the "
            "function again for these inputs."
        )


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


#: Context attributes the engine sets (never a forward's own arrays).
_ENGINE_KEYS = frozenset({"saved_tensors", "backend", "device", "needs_input_grad", "_site",
                          "_spec", "_nondiff", "_watch", "out_avals"})


class Watch(NamedTuple):
    """Set on a backward rule's context when an enclosing transform traces the op's inputs, so
    that it records (differentiates, replays or batches) whatever the rule computes.

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
    """

    trace: Any
    fn: Any
    inputs: Any
    params: dict
    constants: tuple


def _floating_array(v, given) -> bool:
    """Whether ``v`` is a floating array or NumPy scalar not among the ids ``given`` (the op's
    static parameters and non-Tensor inputs: values passed in, not computed)."""
    if type(v) is Tensor or id(v) in given:
        return False
    dt = getattr(v, "dtype", None)
    return hasattr(v, "shape") and isinstance(dt, np.dtype) and dt.kind in "fcV"


def _watch(fn, ctx, trace, lowered, params, spec) -> None:
    """Set ``ctx._watch`` (:class:`Watch`) for a rule an enclosing ``trace`` will record: for
    a once-differentiable rule, or when ``forward`` left floating arrays the rule would read
    as constants."""
    if getattr(fn.backward, "once_differentiable", False):
        ctx._watch = Watch(trace, fn, tuple(lowered), params, ())
        return
    if getattr(fn, "_ctx_arrays_recomputed", False):
        return
    names = []
    given = None
    for name, v in ctx.__dict__.items():
        if name in _ENGINE_KEYS or v is None or type(v) in (bool, int, float, str):
            continue
        if given is None:
            given = {id(a) for a in lowered if type(a) is not Tensor}
            given.update(id(p) for p in params.values())
        if _floating_array(v, given) or (isinstance(v, (tuple, list))
                                         and any(_floating_array(e, given) for e in v)):
            names.append(f"ctx.{name}")
    for j, (kind, v) in enumerate(spec):
        if kind == 2 and isinstance(v, Tensor) and v._level == 0 and v.dtype.kind in "fcV":
            names.append(f"ctx.saved_tensors[{j}] (an array that is neither an input nor an "
                         "output of forward)")
    if names:
        ctx._watch = Watch(trace, fn, None, params, tuple(names))


def check_watch(fn, ctx, rule: str) -> None:
    """Refuse to run ``rule`` (``"backward"`` or ``"jvp"``) of ``fn`` where an enclosing
    transform records it and it would read arrays ``forward`` computed as constants.

    Raises:
        TypeError: naming the Function, the arrays and the fixes.
    """
    w = ctx._watch
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

    def record(self, fn, args, params, needs):
        """Apply ``fn`` at this level to ``args`` (some traced here): compute the outputs one
        level down, note the entry (:meth:`note`) and return the outputs traced here.

        ``needs`` is the base context's ``needs_input_grad`` (whether any level wants each
        input's cotangent), worked out by the outermost level (``None`` there).

        Returns ``(outputs, base ctx, saved spec, multi, non-differentiable outputs)``; the
        outputs are Tensors (a tuple).
        """
        level = self.level
        if self.done:
            raise RuntimeError(
                f"{fn._name()}: an input is a traced value of a transform that has already "
                "finished (a leaked tracer, for example one stored in a global or a closure "
                "and used after grad/vjp returned). Pass it as an argument instead."
            )
        st = _state
        diff = fn.differentiable and level > st.limit
        nd = fn.nondiff_argnums
        lowered, in_nodes, consts, level_needs, arrays = [], [], [], [], []
        cpu = True
        active = False
        sub = 0
        k = 0
        for a in args:
            if type(a) is Tensor:
                b = a._box
                lv = 0 if b is None else b[0]
                if lv == level:
                    if b[1] is not self:  # pyright: ignore[reportOptionalCall, reportOptionalSubscript]
                        raise RuntimeError(f"{fn._name()}: inputs from two traces of one level")
                    in_nodes.append(b[2])  # pyright: ignore[reportOptionalSubscript]
                    consts.append(None)
                    p = b[3]  # pyright: ignore[reportOptionalSubscript]
                    a = p if p is not None else primal_of(a)
                    if diff and a._array.dtype.kind in "fcV" and not (nd and k in nd):
                        active = True
                        level_needs.append(True)
                    else:
                        level_needs.append(False)
                    b = a._box
                    lv = 0 if b is None else b[0]
                else:
                    in_nodes.append(-1)
                    consts.append(a)
                    level_needs.append(False)
                if lv > sub:
                    sub = lv
                    sub_trace = b[1]  # pyright: ignore[reportOptionalSubscript]
                arr = a._array
                if type(arr) is not _ndarray:
                    cpu = False
                arrays.append(arr)
            else:
                in_nodes.append(-1)
                consts.append(a)
                level_needs.append(False)
                arrays.append(a)
            lowered.append(a)
            k += 1
        level_needs = tuple(level_needs)
        if not cpu:  # NumPy constants join the device of the Tensor inputs (on the tape too)
            _function._check_devices(fn, lowered, arrays)
            for i, a in enumerate(arrays):
                if a is not lowered[i] and type(lowered[i]) is not Tensor:
                    lowered[i] = consts[i] = a
        if sub:
            if needs is None:  # what any level wants: a Tensor traced somewhere, floating
                needs = tuple([type(a) is Tensor and a._level > 0 and not (nd and i in nd)
                               and a._array.dtype.kind in "fcV" for i, a in enumerate(args)])
            louts, ctx0, spec, multi, nondiff = sub_trace.record(fn, lowered, params, needs)
            prims = list(louts)  # the outputs one level down, as Tensors
        else:  # the lowest recording level: only this level wants cotangents
            louts, ctx0, spec, multi, nondiff, prims = base_apply(
                fn, lowered, arrays, cpu, params, level_needs if needs is None else needs
            )
        if not active and not self.replays:  # no derivative here: constants at this level
            if not sub:
                louts = tuple([const(a) for a in louts])
            return louts, ctx0, spec, multi, nondiff
        ctx = None
        if active and not (nondiff and not multi):  # (a lone non-differentiable output: none)
            if sub:
                ctx = _new(Context)
                ctx.__dict__.update(ctx0.__dict__)
                ctx.needs_input_grad = level_needs
                if spec:
                    ctx.saved_tensors = tuple(
                        [lowered[v] if kind == 0 else (prims[v] if kind == 1 else v)  # pyright: ignore[reportOptionalSubscript]
                         for kind, v in spec]
                    )
                # the backward rule runs while sub_trace watches these inputs: it records it
                _watch(fn, ctx, sub_trace, lowered, params, spec)  # pyright: ignore[reportPossiblyUnboundVariable]
            else:  # base_apply set the level-0 saved values
                ctx = ctx0
                if needs is not None:
                    ctx.needs_input_grad = level_needs
            if nondiff:
                ctx._nondiff = nondiff
            if st.debug:  # where the user called the op, for tg.debug_nans' message
                ctx._site = caller_line()
        avals = self.avals
        node = len(avals)
        if len(louts) == 1:
            arr = louts[0]._array if sub else louts[0]  # pyright: ignore[reportAttributeAccessIssue]
            avals.append((arr.shape, arr.dtype))
            out = _new(Tensor)
            _s_array(out, arr)
            _s_box(out, (level, self, node, None if prims is None else prims[0], None))
            outs = (out,)
            out_nodes = (node,)
        else:
            outs, out_nodes = [], []
            for j, lo in enumerate(louts):
                arr = lo._array if sub else lo  # pyright: ignore[reportAttributeAccessIssue]
                avals.append((arr.shape, arr.dtype))
                outs.append(make(arr, level, self, node, None if prims is None else prims[j]))
                out_nodes.append(node)
                node += 1
            outs, out_nodes = tuple(outs), tuple(out_nodes)
        self._note(_tuple_new(TapeEntry, (fn, params, ctx, tuple(in_nodes), tuple(consts),
                                          out_nodes)))
        return outs, ctx0, spec, multi, nondiff

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

    def freeze(self, in_nodes, in_treedef, out_refs, out_avals, out_treedef) -> Tape:
        """The immutable :class:`Tape` of what this trace recorded."""
        return Tape(
            entries=tuple(self.entries),
            in_nodes=tuple(in_nodes),
            in_avals=tuple(self.avals[n] for n in in_nodes),
            in_treedef=in_treedef,
            out_refs=tuple(out_refs),
            out_avals=tuple(out_avals),
            out_treedef=out_treedef,
            avals=tuple(self.avals),
            labels=dict(self.labels),
            level=self.level,
        )


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
        if ctx._watch is not None:  # an enclosing transform records this rule
            check_watch(fn, ctx, "backward")
        rule = fn.backward if not _PROFILING[0] else _profiler.timed(fn, "backward", fn.backward)
        try:
            if st.debug:  # tg.debug_nans: ops inside this rule report "the backward of fn"
                previous = st.backward_of
                st.backward_of = (fn._name(), ctx.__dict__.get("_site", "<unknown>"))  # pyright: ignore[reportAttributeAccessIssue]
                try:
                    grads = rule(ctx, *gs)
                finally:
                    st.backward_of = previous
            else:
                grads = rule(ctx, *gs)
        except TypeError as err:
            if is_escape(err):
                raise escaped_rule(fn, "backward", err) from None
            raise
        if type(grads) is not tuple:
            grads = tuple(grads) if type(grads) is list else (grads,)
        in_nodes = e.in_nodes
        if len(grads) != len(in_nodes):
            raise ValueError(
                f"{fn.__name__}.backward returned {len(grads)} value(s) for {len(in_nodes)} "
                "input(s); return one cotangent (or None) per positional input of forward."
            )
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
    nondiff = e.ctx.__dict__.get("_nondiff", ())
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


_PROFILING = _profiler.PROFILING  # nonzero while a tg.profile block is open (in any thread)

#: The compiler of a Tape into a program (``tapegrad.jit.Program``, registered by that module
#: when it is imported, as the ops layer attaches Tensor's methods): ``compiler(tape)`` returns
#: a callable from the input arrays to the output arrays.
compiler = None


# -- the frozen tape ---------------------------------------------------------------------------
def _fmt_aval(aval) -> str:
    if aval is None:
        return "py"
    shape, dtype = aval
    d = np.dtype(dtype)
    short = {"f": "f", "i": "i", "u": "u", "b": "bool", "c": "c"}[d.kind]
    if d.kind != "b":
        short += str(d.itemsize * 8)
    return f"{short}[{','.join(str(s) for s in shape)}]"


def _node_name(n: int) -> str:
    s = ""
    n += 1
    while n:
        n, r = divmod(n - 1, 26)
        s = chr(97 + r) + s
    return s


def _short(v) -> str:
    if isinstance(v, type) and issubclass(v, _function.Function):
        return v._name()
    if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(
            v, (np.generic, bool, int, float, complex))):
        return np.dtype(v).name
    if isinstance(v, type):
        return v.__name__
    s = repr(v)
    return s if len(s) <= 40 else s[:37] + "..."


def _short_const(c) -> str:
    if isinstance(c, Tensor):
        if c.size == 1:
            return f"{c._concrete().reshape(()).item():g}"
        return f"const:{_fmt_aval((c.shape, c.dtype))}"
    return _short(c)


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


@attrs.frozen
class Tape:
    """An immutable recording of a traced function.

    Attributes:
        entries: Tuple of :class:`TapeEntry` and :class:`Guard`, in execution order.
        in_nodes: Node id of each input leaf (flattened pytree order).
        in_avals: ``(shape, dtype)`` of each input leaf.
        in_treedef: Pytree structure of the positional inputs (a tuple).
        out_refs: Per output leaf, a node id (int) or ``("const", value)``.
        out_avals: ``(shape, dtype)`` of each output leaf.
        out_treedef: Pytree structure of the output.
        avals: ``(shape, dtype)`` of every node, indexed by node id.
        labels: Node id -> label, from ``Tensor.label``.
        level: The trace level it was recorded at (its traced values carry it).
        loaded: True for a tape read from a file (:meth:`from_json`): it holds no residuals,
            so it replays but has no :meth:`vjp` of its own.
    """

    entries: tuple
    in_nodes: tuple
    in_avals: tuple
    in_treedef: Any
    out_refs: tuple
    out_avals: tuple
    out_treedef: Any
    avals: tuple = ()
    labels: dict = attrs.field(factory=dict)
    level: int = 0
    loaded: bool = False
    _prog: Any = attrs.field(default=None, init=False, eq=False, repr=False)

    def __len__(self) -> int:
        return sum(1 for e in self.entries if type(e) is TapeEntry)

    def _name(self, n: int) -> str:
        label = self.labels.get(n)
        return _node_name(n) + (f"<{label}>" if label else "")

    def __str__(self) -> str:
        ins = " ".join(
            f"{self._name(n)}:{_fmt_aval(a)}" for n, a in zip(self.in_nodes, self.in_avals)
        )
        lines = [f"{{ lambda ; {ins}. let"]
        for e in self.entries:
            if type(e) is Guard:
                lines.append(
                    f"    guard {e.kind}({_node_name(e.node)}) == {_show(e.value)}  # {e.where}"
                )
                continue
            outs = " ".join(f"{self._name(n)}:{_fmt_aval(self.avals[n])}" for n in e.out_nodes)
            params = " ".join(f"{k}={_short(v)}" for k, v in e.params.items())
            args = [self._name(n) if n >= 0 else _short_const(c)
                    for n, c in zip(e.in_nodes, e.consts)]
            p = f"[{params}]" if params else ""
            lines.append(f"    {outs} = {e.oper}{p} {' '.join(args)}")
        outs = " ".join(
            self._name(r) if isinstance(r, int) else _short_const(r[1]) for r in self.out_refs
        )
        lines.append(f"  in ({outs}) }}")
        return "\n".join(lines)

    __repr__ = __str__

    def _arrays(self, leaves, treedef, who: str) -> list:
        if treedef != self.in_treedef:
            raise ValueError(f"{who}: inputs have structure {treedef}, the tape expects "
                             f"{self.in_treedef}")
        arrays = []
        for i, (leaf, aval) in enumerate(zip(leaves, self.in_avals)):
            arr = leaf._concrete() if isinstance(leaf, Tensor) else Tensor(leaf)._array
            if not isinstance(leaf, (Tensor, np.ndarray)) and arr.dtype != aval[1]:
                arr = arr.astype(aval[1])
            if tuple(arr.shape) != tuple(aval[0]) or arr.dtype != aval[1]:
                raise ValueError(
                    f"{who}: input leaf {i} has shape {tuple(arr.shape)} and dtype {arr.dtype}, "
                    f"but the tape was recorded for shape {tuple(aval[0])} and dtype "
                    f"{np.dtype(aval[1])}. Trace the function again for new shapes or dtypes."
                )
            arrays.append(arr)
        return arrays

    def replay(self, *args):
        """Run the recorded program forward on new inputs; returns the output pytree.

        Only the forward rules run, on backend arrays, compiled into one straight-line program
        the first time (:class:`tapegrad.jit.Program`): none of the traced function's Python.
        On values a transform traces (inside ``grad``, ``jvp``, ``vmap``, ``jit``, ...) each
        entry runs through its Function instead, so a replay differentiates and batches like
        the function it was recorded from.

        Args:
            *args: Positional inputs with the recorded pytree structure, shapes and dtypes.

        Returns:
            The output pytree, with Tensors (constants) as leaves.

        Raises:
            ValueError: if structure, shapes or dtypes differ from the recording; for a tape
                read from a file (:meth:`from_json`), if an entry fails on these inputs or
                gives outputs of other shapes or dtypes than the file declares (checked on the
                first replay, and on every replay on traced inputs), naming the entry.
            GuardError: if the new inputs change a Python decision taken while recording; the
                message names the source line of the decision.
        """
        leaves, treedef = tree_flatten(tuple(args))
        if any(type(t) is Tensor and t._level for t in leaves):
            return self._evaluate(leaves, treedef)
        arrays = self._arrays(leaves, treedef, "Tape.replay")
        prog = self._prog
        if prog is None:  # compiled once (tapegrad.jit.Program), then run on every replay
            prog = compiler(self)  # pyright: ignore[reportOptionalCall]
            object.__setattr__(self, "_prog", prog)
        # tg.profile: the compiled program is one entry, like a jitted call
        outs = prog(arrays) if not _PROFILING[0] else _profiler.timed("replay", "forward",
                                                                      prog)(arrays)
        results = [o if isinstance(o, Tensor) else const(o) for o in outs]
        return tree_unflatten(self.out_treedef, results)

    def _evaluate(self, leaves, treedef):
        """Replay on traced inputs: every entry through its Function's ``apply``, so that the
        transforms in progress (``grad``, ``jvp``, ``vmap``, ...) see the recorded primitives."""
        arrays = self._arrays([const(t._array) if type(t) is Tensor else t for t in leaves],
                              treedef, "Tape.replay")
        # (checked on each traced Tensor's own array: it has the per-example shape); the other
        # leaves (arrays, Python numbers) enter as constants of the recorded dtype
        env = dict(zip(self.in_nodes, [t if type(t) is Tensor else const(a)
                                       for t, a in zip(leaves, arrays)]))
        for i, e in enumerate(self.entries):
            if type(e) is Guard:
                replay_guard(e, env[e.node], "Tape.replay")
                continue
            args = [env[n] if n >= 0 else c for n, c in zip(e.in_nodes, e.consts)]
            if not self.loaded:
                outs = e.fn.apply(*args, **e.params)
            else:  # a tape from a file: each entry checked against what the file declares
                try:
                    outs = e.fn.apply(*args, **e.params)
                except (ValueError, GuardError, FloatingPointError, MemoryError):
                    raise
                except Exception as err:
                    raise _loaded_failure("Tape.replay", i, e, err) from err
                _check_outputs("Tape.replay", i, e, [o._array for o in (
                    outs if isinstance(outs, (tuple, list)) else (outs,))], self.avals)
            env.update(zip(e.out_nodes, outs if isinstance(outs, (tuple, list)) else (outs,)))
        return tree_unflatten(self.out_treedef, [
            env[r] if isinstance(r, int) else (r[1] if isinstance(r[1], Tensor) else const(r[1]))
            for r in self.out_refs])

    def vjp(self, cotangent):
        """Replay backward: cotangents of the inputs for ``cotangent`` on the output.

        Args:
            cotangent: A pytree with the output's structure, shapes and dtypes.

        Returns:
            A tuple with one cotangent pytree per positional input, each matching that input's
            structure, shapes and dtypes.

        Raises:
            ValueError / TypeError: if the cotangent's structure, shape or dtype differs from
                the output's.
        """
        self._residuals("Tape.vjp")
        ct = _seed_cotangents(cotangent, self.out_refs, self.out_avals, self.out_treedef,
                              "Tape.vjp")
        with _function.transform_scope():
            backward_pass(list(self.entries), ct, self.avals, consume=True)
        leaves = [ct[n] if n in ct else const(np.zeros(*aval))
                  for n, aval in zip(self.in_nodes, self.in_avals)]
        return tuple(tree_unflatten(self.in_treedef, leaves))

    backward = vjp

    def _residuals(self, who: str) -> None:
        if self.loaded:
            raise ValueError(
                f"{who}: this tape was loaded from a file and holds no residuals; differentiate "
                "its replay instead: tg.vjp(tape.replay, *inputs)"
            )

    def residual_bytes(self):
        """What a backward replay of this tape holds: the residuals (values the ``backward``
        rules read) and cotangents, at the start and at the peak, and which entries hold them.

        Returns:
            A :class:`tapegrad.memory.ResidualReport`.

        Raises:
            ValueError: for a tape loaded from a file (it holds no residuals).
        """
        from tapegrad.memory import residual_report

        self._residuals("Tape.residual_bytes")
        return residual_report(self)

    def to_dot(self) -> str:
        """The tape as Graphviz DOT source (a string; no Graphviz needed to make it)."""
        def q(s):  # a DOT string: backslashes and quotes escaped, line breaks as \n
            s = str(s).replace("\\", "\\\\").replace('"', '\\"')
            return '"' + s.replace("\r", "").replace("\n", "\\n") + '"'

        lines = ["digraph tape {", "  rankdir=LR;"]
        for n, a in zip(self.in_nodes, self.in_avals):
            lines.append(f"  n{n} [label={q(self._name(n) + chr(10) + _fmt_aval(a))}, "
                         "shape=box, style=filled, fillcolor=lightblue];")
        for i, e in enumerate(self.entries):
            if type(e) is Guard:
                lines.append(f"  g{i} [label={q(f'guard {e.kind} == {_show(e.value)}')}, "
                             "shape=diamond];")
                lines.append(f"  n{e.node} -> g{i};")
                continue
            lines.append(f"  op{i} [label={q(e.oper)}, shape=ellipse];")
            lines.extend(f"  n{n} -> op{i};" for n in e.in_nodes if n >= 0)
            for n in e.out_nodes:
                label = self._name(n) + "\n" + _fmt_aval(self.avals[n])
                lines.append(f"  n{n} [label={q(label)}, shape=box];")
                lines.append(f"  op{i} -> n{n};")
        lines.append("}")
        return "\n".join(lines)

    def draw(self, filename: str | None = None, format: str = "svg"):
        """A Graphviz drawing of the tape.

        Needs the ``graphviz`` Python package and Graphviz's ``dot`` program (which draws the
        picture, in a file or in a notebook); :meth:`to_dot` gives the DOT source without
        either.

        Args:
            filename: If given, render to this path (without extension) and return the path.
            format: Output format for rendering, e.g. ``"svg"`` or ``"png"``.

        Returns:
            A ``graphviz.Source`` (or the rendered file's path when ``filename`` is given).

        Raises:
            ImportError: if the ``graphviz`` Python package is not installed.
            RuntimeError: if Graphviz's ``dot`` program is not on ``PATH``; the message says
                how to install it.
        """
        try:
            import graphviz
        except ImportError as e:
            raise ImportError("Tape.draw needs the graphviz package (pip install graphviz) and "
                              "Graphviz's dot program; Tape.to_dot() needs neither") from e
        if shutil.which("dot") is None:
            raise RuntimeError(_NO_DOT)
        src = graphviz.Source(self.to_dot())
        if filename is not None:
            try:
                return src.render(filename, format=format, cleanup=True)
            except graphviz.ExecutableNotFound as e:  # dot went away, or cannot run
                raise RuntimeError(_NO_DOT) from e
        return src


_NO_DOT = (
    "Tape.draw: Graphviz's dot program was not found on PATH (the graphviz Python package only "
    "drives it). Install Graphviz: sudo apt-get install graphviz (Debian, Ubuntu), "
    "brew install graphviz (macOS), conda install -c conda-forge graphviz (conda), or the "
    "installer from https://graphviz.org/download/ (Windows, then add its bin folder to PATH); "
    "then restart Python. Tape.to_dot() gives the DOT source without it."
)
