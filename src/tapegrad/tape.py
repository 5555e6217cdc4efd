"""The explicit tape: recording (:class:`Trace`), the frozen :class:`Tape`, and its replays.

While a transform runs, each ``Function.apply`` on a value it traces appends one *record* to the
transform's :class:`Trace`. When the traced function returns, the records are frozen into a
:class:`Tape` of :class:`TapeEntry` values in execution order (a topological order). A tape
can be printed (one line per entry, like a jaxpr), drawn with Graphviz, replayed forward on new
inputs and replayed backward with a cotangent, any number of times and from many threads.

A record is a plain tuple, built on the hot path::

    (fn, params, ctx, in_nodes, consts, out_nodes, in_avals, out_avals)

(the one-level path stores its trace's node-aval table, a list, in both aval fields instead of
building tuples per op; :func:`record_avals` resolves either form)

``in_nodes[i]`` is the node id of input ``i`` on this trace, or ``-1`` if the input is a
constant here (then ``consts[i]`` holds it); ``ctx`` is ``None`` for entries that carry no
gradient (comparisons, argmax, ops run under ``no_grad``). An aval is ``(shape, dtype)``.
A guard record is ``(GUARD, (kind, node, value, where), None)`` (no context: no gradient).
"""

from __future__ import annotations

import gc
import itertools
import sys
import threading
from typing import Any

import attrs
import numpy as np

from tapegrad.tensor import Tensor, _speedups
from tapegrad.tree import tree_flatten

__all__ = [
    "Tape",
    "TapeEntry",
    "Guard",
    "Trace",
    "GuardError",
    "new_level",
    "set_gc_pause",
    "gc_paused",
]

GUARD = "guard"
_levels = itertools.count(1)
_level_lock = threading.Lock()
_GIL = getattr(sys, "_is_gil_enabled", lambda: True)()  # False on a free-threaded build


def new_level() -> int:
    """A fresh trace level, newer (larger) than every level handed out before."""
    if _GIL:  # next() on an itertools.count is atomic under the interpreter lock
        return next(_levels)
    with _level_lock:
        return next(_levels)


class _PauseTLS(threading.local):
    held = False  # this thread is inside a counted pause


_pause_tls = _PauseTLS()


class _GCPause:
    """Process-wide pause of Python's cyclic garbage collector while transforms run.

    A recording allocates several small container objects per op (the record, its Context,
    the traced Tensors) that all stay alive until the backward replay. Each time the young
    generations fill, CPython's collector traverses them, and every 25% growth of the
    long-lived heap triggers a full collection over *every* object in the process (hundreds
    of thousands once NumPy, SciPy or PyTorch are imported). On a chain of small ops that was
    more than half of ``grad``'s time. Nothing a transform allocates needs the cyclic
    collector (reference counting frees it), so the collector is switched off from the
    outermost transform's entry to its exit and restored after; nested transforms and
    transforms running in several threads share one counter. Cyclic garbage the user's own
    code makes meanwhile is collected as soon as the collector is back.
    """

    __slots__ = ("counted",)
    depth = 0
    enabled = True  # set_gc_pause(False) turns the pause off
    restore = False
    lock = threading.Lock()

    def __enter__(self):
        cls = _GCPause
        # Only a thread's outermost pause takes the lock; nested ones (grad inside grad, the
        # trace and the replay inside value_and_grad) cost one thread-local read.
        self.counted = cls.enabled and not _pause_tls.held
        if self.counted:
            _pause_tls.held = True
            with cls.lock:
                if cls.depth == 0:
                    cls.restore = gc.isenabled()
                    if cls.restore:
                        gc.disable()
                cls.depth += 1
        return self

    def __exit__(self, *exc):
        cls = _GCPause
        if self.counted:
            self.counted = False
            _pause_tls.held = False
            with cls.lock:
                cls.depth -= 1
                if cls.depth == 0 and cls.restore:
                    cls.restore = False
                    gc.enable()
        return False


#: ``with gc_paused(): ...`` pauses Python's cyclic garbage collector inside (see
#: :func:`set_gc_pause`); nests and is thread-safe. The compiled ``GCPause``
#: (src/tapegrad/_speedups.c) when built: the same counter without a lock or a thread-local,
#: which the interpreter lock makes atomic (the Python one where no lock runs).
gc_paused = _speedups.GCPause if _speedups is not None and _GIL else _GCPause


def set_gc_pause(enabled: bool) -> bool:
    """Choose whether transforms pause Python's cyclic garbage collector while they run.

    On by default: ``grad``, ``value_and_grad``, ``vjp`` (and its ``vjp_fn``), ``jvp`` and the
    transforms built on them switch the collector off (:func:`gc.disable`) from the outermost
    transform's entry to its exit, then switch it back on if it was on (a backward replay of
    eight entries or fewer, too short to trigger a collection that matters, runs without the
    pause and its lock). Reference counting
    still frees every Tensor and array as usual; only *cyclic* garbage made inside a transform
    waits until it returns. This halves ``grad``'s time on long chains of small ops (see
    docs/performance.md). Turn it off if the differentiated code itself makes a lot of
    cyclic garbage.

    Args:
        enabled: True to pause the collector during transforms, False to leave it alone.

    Returns:
        The previous setting (bool).

    Raises:
        TypeError: if ``enabled`` is not a bool.

    Example:
        >>> import tapegrad as tg
        >>> previous = tg.set_gc_pause(False)  # leave the collector running during transforms
        >>> tg.set_gc_pause(previous)
        False
    """
    if not isinstance(enabled, bool):
        raise TypeError(f"set_gc_pause: enabled must be a bool, got {type(enabled).__name__}")
    prev = _GCPause.enabled
    _GCPause.enabled = enabled
    if _speedups is not None:
        _speedups.set_gc_pause(enabled)
    return prev


class GuardError(RuntimeError):
    """A tape replay met inputs that change a Python decision taken while recording."""


class Trace:
    """The mutable recorder of one transform (one level). Internal: users see :class:`Tape`.

    ``replays`` says whether the records will be replayed forward (``trace``, ``jit``,
    ``linearize``: every op must be recorded). A trace that only differentiates (``grad``,
    ``vjp``, ``jvp``) passes ``replays=False``, and ops that carry no derivative at its level
    are then not recorded on it (see ``Function._apply_inactive``).
    """

    __slots__ = ("level", "records", "n_nodes", "done", "labels", "avals", "replays")

    def __init__(self, level: int, replays: bool = True):
        self.level = level
        self.replays = replays
        self.records: list = []
        self.n_nodes = 0
        self.done = False
        self.labels: dict = {}
        #: ``(shape, dtype)`` of every node, indexed by node id (see :func:`record_avals`).
        self.avals: list = []

    def new_input(self, primal: Tensor) -> Tensor:
        """A traced Tensor of this level wrapping ``primal``, with a fresh node id."""
        node = self.n_nodes
        self.n_nodes = node + 1
        arr = primal._array
        self.avals.append((arr.shape, arr.dtype))
        if primal.label is not None:
            self.labels[node] = primal.label
        return Tensor._traced(primal, self.level, self, node)


if _speedups is not None:  # the compiled recorder reads and writes Trace's slots directly
    _speedups.init_trace(Trace)


def record_guard(t: Tensor, kind: str, value, where: str) -> None:
    """Record a Python decision on ``t``'s value on every live trace that holds ``t``."""
    while t is not None and t._level:
        trace = t._trace
        if not trace.done:
            trace.records.append((GUARD, (kind, t._node, value, where), None))
        t = t._primal


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


@attrs.frozen
class TapeEntry:
    """One recorded primitive application.

    Attributes:
        fn: The :class:`~tapegrad.function.Function` subclass.
        params: Static keyword parameters given to ``fn.apply``.
        ctx: The :class:`~tapegrad.function.Context` its ``backward`` reads (``None`` when the
            entry carries no gradient).
        in_nodes: Node id per input, ``-1`` for constants.
        consts: The constant inputs (``None`` where ``in_nodes`` names a node).
        out_nodes: Node id per output.
        in_avals: ``(shape, dtype)`` per input (``None`` for Python values).
        out_avals: ``(shape, dtype)`` per output.
    """

    fn: Any
    params: dict
    ctx: Any
    in_nodes: tuple
    consts: tuple
    out_nodes: tuple
    in_avals: tuple
    out_avals: tuple

    @property
    def oper(self) -> str:
        """The Function's label on listings (its ``oper``, else its lowercase class name)."""
        return getattr(self.fn, "oper", None) or self.fn.__name__.lower()


@attrs.frozen
class Guard:
    """A Python decision (``bool``, ``int``, ``float``, ``item``) taken on a traced value.

    Attributes:
        kind: Which conversion was made. node: The value's node. value: What it returned.
        where: ``file:line`` of the decision in user code.
    """

    kind: str
    node: int
    value: Any
    where: str


def _const_aval(c):
    """The aval of a constant input: ``(shape, dtype)`` for a Tensor, None for a Python value."""
    if isinstance(c, Tensor):
        arr = c._array
        return (arr.shape, arr.dtype)
    return None


def record_avals(rec) -> tuple:
    """``(in_avals, out_avals)`` of a record, each a tuple with one ``(shape, dtype)`` (or None
    for a Python value) per input/output.

    The one-level recording path does not build these per op: it stores its trace's node
    table (:attr:`Trace.avals`, a list indexed by node id) in both fields, and the avals of
    constant inputs are read off the constants themselves when someone asks.
    """
    _, _, _, in_nodes, consts, out_nodes, ia, oa = rec
    if type(ia) is list:
        ia = tuple([ia[n] if n >= 0 else _const_aval(c) for n, c in zip(in_nodes, consts)])
    if type(oa) is list:
        oa = tuple([oa[n] for n in out_nodes])
    return ia, oa


def _freeze(records) -> tuple:
    out = []
    for r in records:
        if r[0] is GUARD:
            out.append(Guard(*r[1]))
        else:
            ia, oa = record_avals(r)
            out.append(TapeEntry(*r[:6], ia, oa))
    return tuple(out)


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
        labels: Node id -> label, from ``Tensor.label``.
    """

    entries: tuple
    in_nodes: tuple
    in_avals: tuple
    in_treedef: Any
    out_refs: tuple
    out_avals: tuple
    out_treedef: Any
    labels: dict = attrs.field(factory=dict)
    _prog: Any = attrs.field(default=None, init=False, eq=False, repr=False)

    def __len__(self) -> int:
        return sum(1 for e in self.entries if isinstance(e, TapeEntry))

    # -- listing ------------------------------------------------------------------------------
    def _name(self, n: int) -> str:
        label = self.labels.get(n)
        return f"{_node_name(n)}" + (f"<{label}>" if label else "")

    def __str__(self) -> str:
        ins = " ".join(
            f"{self._name(n)}:{_fmt_aval(a)}" for n, a in zip(self.in_nodes, self.in_avals)
        )
        lines = [f"{{ lambda ; {ins}. let"]
        for e in self.entries:
            if isinstance(e, Guard):
                lines.append(
                    f"    guard {e.kind}({_node_name(e.node)}) == {e.value!r}  # {e.where}"
                )
                continue
            outs = " ".join(
                f"{self._name(n)}:{_fmt_aval(a)}" for n, a in zip(e.out_nodes, e.out_avals)
            )
            params = " ".join(f"{k}={_short(v)}" for k, v in e.params.items())
            args = []
            for n, c in zip(e.in_nodes, e.consts):
                args.append(self._name(n) if n >= 0 else _short_const(c))
            p = f"[{params}]" if params else ""
            lines.append(f"    {outs} = {e.oper}{p} {' '.join(args)}")
        outs = " ".join(
            self._name(r) if isinstance(r, int) else _short_const(r[1]) for r in self.out_refs
        )
        lines.append(f"  in ({outs}) }}")
        return "\n".join(lines)

    __repr__ = __str__

    # -- replay -------------------------------------------------------------------------------
    def _check_inputs(self, leaves):
        from tapegrad.tensor import _to_array

        if len(leaves) != len(self.in_nodes):
            raise ValueError(
                f"Tape.replay: the tape has {len(self.in_nodes)} input leaves, got {len(leaves)}"
            )
        arrays = []
        for i, (leaf, aval) in enumerate(zip(leaves, self.in_avals)):
            arr = _to_array(leaf) if not isinstance(leaf, Tensor) else leaf._concrete()
            if not isinstance(leaf, (Tensor, np.ndarray)) and aval is not None:
                arr = arr.astype(aval[1])
            if aval is not None and (tuple(arr.shape) != tuple(aval[0]) or arr.dtype != aval[1]):
                raise ValueError(
                    f"Tape.replay: input leaf {i} has shape {tuple(arr.shape)} and dtype "
                    f"{arr.dtype}, but the tape was recorded for shape {tuple(aval[0])} and dtype "
                    f"{np.dtype(aval[1])}. Trace the function again for new shapes or dtypes."
                )
            arrays.append(arr)
        return arrays

    def replay(self, *args):
        """Run the recorded program forward on new inputs; returns the output pytree.

        Only the forward rules run, on backend arrays: none of the traced function's Python.

        Args:
            *args: Positional inputs with the recorded pytree structure, shapes and dtypes.

        Returns:
            The output pytree, with Tensors (constants) as leaves.

        Raises:
            ValueError: if structure, shapes or dtypes differ from the recording.
            GuardError: if the new inputs change a Python decision taken while recording; the
                message names the source line of the decision.
        """
        from tapegrad.tree import tree_flatten, tree_unflatten

        leaves, treedef = tree_flatten(tuple(args))
        if treedef != self.in_treedef:
            raise ValueError(
                f"Tape.replay: inputs have structure {treedef}, the tape expects {self.in_treedef}"
            )
        arrays = self._check_inputs(leaves)
        env = run_program(self._program(), self.in_nodes, arrays)
        results = []
        for r in self.out_refs:
            if isinstance(r, int):
                v = env[r]
                results.append(Tensor._const(v if hasattr(v, "shape") else np.asarray(v)))
            else:
                results.append(r[1])
        return tree_unflatten(self.out_treedef, results)

    def _program(self):
        """The entries compiled once into a flat program for :func:`run_program` (cached)."""
        prog = self._prog
        if prog is None:
            prog = compile_program(self.entries, [r for r in self.out_refs if isinstance(r, int)])
            object.__setattr__(self, "_prog", prog)
        return prog

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
        from tapegrad.tree import tree_unflatten

        ct = _seed_cotangents(
            cotangent, self.out_refs, self.out_avals, self.out_treedef, "Tape.vjp"
        )
        records = [
            (e.fn, e.params, e.ctx, e.in_nodes, e.consts, e.out_nodes, e.in_avals, e.out_avals)
            for e in self.entries
            if isinstance(e, TapeEntry)
        ]
        backward_pass(records, ct, consume=False)
        leaves = [_ct_or_zeros(ct.get(n), aval) for n, aval in zip(self.in_nodes, self.in_avals)]
        return tuple(tree_unflatten(self.in_treedef, leaves))

    backward = vjp

    def draw(self, filename: str | None = None, format: str = "svg"):
        """A Graphviz drawing of the tape (needs the ``graphviz`` package).

        Args:
            filename: If given, render to this path (without extension) and return the path.
            format: Output format for rendering, e.g. ``"svg"`` or ``"png"``.

        Returns:
            A ``graphviz.Digraph`` (or the rendered file's path when ``filename`` is given).

        Raises:
            ImportError: if the ``graphviz`` Python package is not installed.
        """
        try:
            import graphviz
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("Tape.draw needs the graphviz package: pip install graphviz") from e
        g = graphviz.Digraph("tape", graph_attr={"rankdir": "LR"})
        for n, a in zip(self.in_nodes, self.in_avals):
            g.node(
                f"n{n}",
                f"{self._name(n)}\n{_fmt_aval(a)}",
                shape="box",
                style="filled",
                fillcolor="lightblue",
            )
        for i, e in enumerate(self.entries):
            if isinstance(e, Guard):
                g.node(f"g{i}", f"guard {e.kind} == {e.value!r}", shape="diamond")
                g.edge(f"n{e.node}", f"g{i}")
                continue
            g.node(f"op{i}", e.oper, shape="ellipse")
            for n in e.in_nodes:
                if n >= 0:
                    g.edge(f"n{n}", f"op{i}")
            for n, a in zip(e.out_nodes, e.out_avals):
                g.node(f"n{n}", f"{self._name(n)}\n{_fmt_aval(a)}", shape="box")
                g.edge(f"op{i}", f"n{n}")
        if filename is not None:
            return g.render(filename, format=format, cleanup=True)
        return g


_GUARD_FNS = {
    "bool": lambda a: bool(np.asarray(a).reshape(())),
    "int": lambda a: int(np.asarray(a).reshape(())),
    "float": lambda a: float(np.asarray(a).reshape(())),
    "item": lambda a: np.asarray(a).reshape(()).item(),
}


def _short(v) -> str:
    if isinstance(v, np.dtype) or isinstance(v, type):
        return np.dtype(v).name
    s = repr(v)
    return s if len(s) <= 40 else s[:37] + "..."


def _short_const(c) -> str:
    if isinstance(c, Tensor):
        if c.size == 1:
            return f"{c._array.reshape(()).item():g}"
        return f"const:{_fmt_aval((c.shape, c.dtype))}"
    return _short(c)


def _ct_or_zeros(g, aval):
    if g is not None:
        return g
    shape, dtype = aval
    return Tensor._const(np.zeros(shape, dtype))


def _seed_cotangents(cotangent, out_refs, out_avals, out_treedef, who: str) -> dict:
    """Check a user cotangent against the outputs and return ``{node: Tensor}``."""
    if type(cotangent) is Tensor and out_treedef.num_nodes == 1:  # one output leaf
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
        elif isinstance(g, (int, float)) and not isinstance(g, bool):
            gt = Tensor._const(np.asarray(g, dtype=dtype))
        elif hasattr(g, "shape") and hasattr(g, "dtype"):
            gt = Tensor._const(g)
        else:
            raise TypeError(
                f"{who}: cotangent leaf {i} has type {type(g).__name__}; expected a Tensor or "
                f"array of shape {tuple(shape)} and dtype {np.dtype(dtype)}"
            )
        garr = gt._array
        if garr.shape != tuple(shape) or garr.dtype != dtype:
            raise ValueError(
                f"{who}: cotangent leaf {i} has shape {tuple(gt.shape)} and dtype {gt.dtype}, but "
                f"the output leaf has shape {tuple(shape)} and dtype {np.dtype(dtype)}"
            )
        if isinstance(ref, int):
            prev = ct.get(ref)
            ct[ref] = gt if prev is None else prev + gt
    return ct


def backward_pass(records: list, ct: dict, consume: bool) -> dict:
    """Replay ``records`` backward, accumulating cotangents into ``ct`` (``{node: Tensor}``).

    With ``consume=True`` the records list is emptied as it goes, so each entry's saved values
    are freed as soon as its backward rule has run (the memory profile of ``grad``). Python's
    cyclic collector is paused meanwhile (:func:`set_gc_pause`), unless the replay is too
    short to allocate enough for a collection to matter.
    """
    if len(records) <= 8:
        return _backward_pass(records, ct, consume)
    with gc_paused():
        return _backward_pass(records, ct, consume)


def _backward_pass(records: list, ct: dict, consume: bool) -> dict:
    n = len(records)
    pop = records.pop
    ctpop = ct.pop
    while n:
        n -= 1
        rec = pop() if consume else records[n]
        if rec[2] is None:  # guards, non-differentiable entries
            continue
        fn, _, ctx, in_nodes, _, out_nodes, in_avals, out_avals = rec
        if len(out_nodes) == 1:
            g = ctpop(out_nodes[0], None)
            if g is None:
                continue
            grads = fn.backward(ctx, g)
        else:
            grads = _multi_grads(rec, ct)
            if grads is None:
                continue
            (grads,) = grads
        if type(grads) is not tuple:
            grads = tuple(grads) if type(grads) is list else (grads,)
        if len(grads) != len(in_nodes):
            raise ValueError(
                f"{fn.__name__}.backward returned {len(grads)} value(s) for {len(in_nodes)} "
                "input(s); return one cotangent (or None) per positional input of forward."
            )
        needs = ctx.needs_input_grad
        i = -1
        for node in in_nodes:
            i += 1
            if node < 0 or not needs[i]:
                continue
            g = grads[i]
            if g is None:
                continue
            if type(g) is not Tensor:
                g = _as_cotangent(g)
            shape, dtype = in_avals[node] if type(in_avals) is list else in_avals[i]
            arr = g._array
            if arr.shape != shape:
                from tapegrad.function import unbroadcast

                g = unbroadcast(g, shape, fn, i)
                arr = g._array
            if arr.dtype is not dtype and arr.dtype != dtype:
                g = g.astype(dtype)
            prev = ct.get(node)
            if prev is None:
                ct[node] = g
            elif not _add_in_place(prev, g):
                ct[node] = prev + g
            prev = None  # drop this frame's reference before the next entry's check
        # Hold nothing of this entry into the next: a cotangent then has the same reference
        # counts here as in the compiled replay (the in-place checks rely on exact counts).
        g = grads = arr = None
    return ct


def _multi_grads(rec, ct: dict):
    """Backward of a record with several outputs: pops their cotangents from ``ct`` and returns
    ``(grads,)``, what its ``backward`` returned, or None when no cotangent reached any output
    (outputs marked non-differentiable get none; missing ones are zeros)."""
    fn, _, ctx, _, _, out_nodes, _, out_avals = rec
    gs = [ct.pop(o, None) for o in out_nodes]
    if all(g is None for g in gs):
        return None
    for j in ctx.__dict__.get("_nondiff", ()):
        gs[j] = None
    if type(out_avals) is list:
        out_avals = [out_avals[o] for o in out_nodes]
    return (fn.backward(ctx, *[_ct_or_zeros(g, a) for g, a in zip(gs, out_avals)]),)


def _as_cotangent(g) -> Tensor:
    """A cotangent a backward rule returned as an array or number, as a Tensor."""
    return Tensor._const(np.asarray(g) if not hasattr(g, "shape") else g)


def _add_in_place(prev: Tensor, g: Tensor) -> bool:
    """Accumulate cotangent ``g`` into ``prev``'s array in place, when no one can tell.

    Several cotangents for one node (a weight used twice, the tangent and primal paths of an
    hvp) are summed as they arrive. ``prev + g`` writes a fresh array, often fresh pages too;
    adding into ``prev``'s own array needs neither, but is only allowed when nothing else can
    see that array: both are first-order NumPy values (no transform records them, nothing is
    deferred), ``prev`` is referenced by the cotangent dict alone and its array by ``prev``
    alone (so no view, saved value, caller or other node shares it), the array owns its data
    and is writable, and the shapes and dtypes already match. This is NumPy's own temporary
    elision, at the level of the backward replay. Returns whether it added.
    """
    pa = prev._array
    ga = g._array
    if (
        type(pa) is not _ndarray
        or type(ga) is not _ndarray
        or prev._level
        or g._level
        or pa.base is not None
        or pa.shape != ga.shape
        or pa.dtype != ga.dtype
        or not pa.flags.writeable
    ):
        return False
    counts = (sys.getrefcount(prev), sys.getrefcount(pa))
    if counts != _EXCLUSIVE:
        if _EXCLUSIVE is None:  # calibrating (below)
            _EXCLUSIVE_SEEN.append(counts)
        return False
    _np_add(pa, ga, out=pa)
    return True


def _calibrate_exclusive() -> tuple:
    """The reference counts :func:`_add_in_place` sees for a cotangent held only by the
    cotangent dict, called as :func:`_backward_pass` calls it. Measured rather than assumed,
    since interpreters differ in which stack references they count; a count that does not match
    only ever disables the in-place path."""
    ct = {0: Tensor._const(np.zeros(2))}
    prev = ct.get(0)
    _add_in_place(prev, Tensor._const(np.zeros(2)))
    prev = None
    return _EXCLUSIVE_SEEN.pop()


_ndarray = np.ndarray
_np_add = np.add
_EXCLUSIVE = None
_EXCLUSIVE_SEEN: list = []


def _refcounts_exact() -> bool:
    """Whether ``sys.getrefcount`` is exact here: with a GIL, yes; a free-threaded build
    (3.13t) splits counts between threads, so the in-place paths that rely on exact counts
    (cotangent sums, ReLU's backward, ``optim.apply_gradients``) stay off there."""
    return getattr(sys, "_is_gil_enabled", lambda: True)()


_EXCLUSIVE = _calibrate_exclusive() if _refcounts_exact() else (-1, -1)


_backward_pass_py = _backward_pass  # the Python replay (tapegrad.function may install the C one)


def compile_program(entries, keep=()) -> tuple:
    """Compile tape entries into steps for :func:`run_program`.

    A step is ``(kind, forward, params, ins, outs, frees)``: ``kind`` 1, 2 or 0 (any arity) for
    primitives, -1 for guards; ``ins`` pairs each input's node id with its constant (a backend
    array or Python value, used when the node id is -1); ``frees`` are the node ids whose last
    use is this step (or that nothing uses), other than the ``keep`` nodes (the tape's
    outputs): the replay drops them right after the step, so an intermediate lives only as
    long as the program needs it, as in hand-written code.
    """
    last: dict = {}
    for k, e in enumerate(entries):
        if isinstance(e, Guard):
            last[e.node] = k
            continue
        for n in e.in_nodes:
            if n >= 0:
                last[n] = k
        for n in e.out_nodes:
            last.setdefault(n, k)  # an output nothing reads dies where it is made
    keep = set(keep)
    frees_at: dict = {}
    for n, k in last.items():
        if n not in keep:
            frees_at.setdefault(k, []).append(n)
    steps = []
    for k, e in enumerate(entries):
        frees = tuple(frees_at.get(k, ()))
        if isinstance(e, Guard):
            steps.append((-1, e, None, None, None, frees))
            continue
        ins = tuple(
            (n, None if n >= 0 else (c._concrete() if isinstance(c, Tensor) else c))
            for n, c in zip(e.in_nodes, e.consts)
        )
        kind = len(ins) if len(ins) in (1, 2) and not e.params else 0
        steps.append((kind, e.fn.forward, e.params, ins, e.out_nodes, frees))
    return tuple(steps)


def run_program(steps, in_nodes, arrays) -> dict:
    """Run compiled steps on input arrays; returns the environment ``{node: array}`` of the
    nodes the program kept (its outputs; see :func:`compile_program`).

    This is the fast path of a replay: forward rules on backend arrays, no Tensors, no pytrees.
    Each step gets a fresh :class:`~tapegrad.function.Context` (rules may store on it), and
    every intermediate is dropped after its last use.
    """
    from tapegrad.backend import device_of, get_backend
    from tapegrad.function import Context

    env = dict(zip(in_nodes, arrays))
    dev = "cpu"
    for a in arrays:
        if type(a) is not np.ndarray and hasattr(a, "shape"):
            dev = device_of(a)
            break
    xp = get_backend(dev)
    new = object.__new__
    cpu = dev == "cpu"
    delete = env.pop
    for kind, fwd, params, ins, outs, frees in steps:
        ctx = new(Context)
        if not cpu:
            ctx.device = dev
            ctx.backend = xp
        if kind == 1:
            n, c = ins[0]
            out = fwd(ctx, env[n] if n >= 0 else c)
        elif kind == 2:
            (n0, c0), (n1, c1) = ins
            out = fwd(ctx, env[n0] if n0 >= 0 else c0, env[n1] if n1 >= 0 else c1)
        elif kind == 0:
            args = []
            for n, c in ins:
                args.append(env[n] if n >= 0 else c)
            out = fwd(ctx, *args, **params)
        else:
            e = fwd
            got = _GUARD_FNS[e.kind](env[e.node])
            if got != e.value:
                raise GuardError(
                    f"Tape.replay: the recording took a Python decision on a traced value at "
                    f"{e.where} ({e.kind}(...) gave {e.value!r}); these inputs give {got!r}, "
                    "so the recorded program no longer matches the function. Trace it again "
                    "for these inputs, or express the branch with tnp.where."
                )
            for n in frees:
                delete(n, None)
            continue
        if len(outs) == 1:
            env[outs[0]] = out
        else:
            for n, o in zip(outs, out):
                env[n] = o
        out = None
        for n in frees:
            delete(n, None)
    return env
