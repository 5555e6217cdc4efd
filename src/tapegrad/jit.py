"""The compiled tape: ``jit`` and :class:`Program`.

Because every backward rule is made of recorded ops, tracing ``grad(f)`` (or a whole training
step) gives one flat tape of primitive forwards. :class:`Program` compiles such a tape into a
straight-line Python function that calls the rules' array functions directly: no Tensor
wrapping, no pytrees, no per-entry interpretation. Before generating the code it

- drops dead entries (an unused ``exp`` or ``matmul`` does not run),
- folds entries whose inputs are all constants into constants, computed once,
- merges repeated entries (the same primitive, parameters and inputs: every tapegrad
  primitive is a pure function of its inputs),
- lays out transposes: two that cancel are dropped, and a transpose of a product nothing else
  reads is computed as one product of the transposed operands (``b^T @ a^T``, one contiguous
  result instead of a strided view), and
- plans buffers: each value is released right after its last use, and an elementwise op whose
  input is a program-owned buffer that dies at that op writes its result into that buffer
  (``out=``), so a replay allocates no more than the math needs. Inputs, constants and the
  program's outputs are never written.

``jit(fun)`` traces ``fun`` once per input signature into a :class:`Program` and runs the
program afterwards; ``jitted.lower(*args)`` returns the program for inspection.
"""

from __future__ import annotations

import functools
import itertools
import threading
import weakref
from collections import OrderedDict
from typing import Any

import numpy as np

from tapegrad import backend as _backend
from tapegrad import tape as _tape
from tapegrad._keywords import strict_keywords
from tapegrad.function import Context, _state, new_level, run_primitive, transform_scope
from tapegrad.tape import (
    Guard,
    GuardError,
    Trace,
    _check_outputs,
    _loaded_failure,
    check_guard,
    interpret,
)
from tapegrad.tensor import Tensor, const
from tapegrad.transforms import as_primal, lower_output
from tapegrad.tree import tree_flatten, tree_map, tree_unflatten
from tapegrad.weak import WIDE, WeakScalar

__all__ = ["jit", "Program", "implicit_state"]


def _hashable(v) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


def _const_array(c):
    return c._concrete() if isinstance(c, Tensor) else c


class _Step:
    """One primitive call of a program: ``outs = fn.forward(ctx, *ins, **params)``; an input is
    ``("v", node)`` (a value of the program) or ``("c", value)`` (a constant)."""

    __slots__ = ("fn", "params", "ins", "outs", "avals", "out_into")

    def __init__(self, fn, params, ins, outs, avals):
        self.fn, self.params, self.ins, self.outs, self.avals = fn, params, ins, outs, avals
        self.out_into = None  # the node whose dying buffer receives the output (out=)


def _fmt(ref, names) -> str:
    kind, v = ref
    if kind == "v":
        return names(v)
    if isinstance(v, np.dtype):  # has a shape and ndim of its own: not an array
        return str(v)
    if isinstance(v, np.ndarray) or hasattr(v, "shape"):
        return "const:" + "x".join(str(s) for s in v.shape) if v.ndim else f"{v.item():g}"
    s = repr(v)
    return s if len(s) <= 30 else s[:27] + "..."


def _run_step(fn, params, arrays: list, dev: str) -> tuple:
    """The output arrays of one program step run on ``dev`` (:func:`run_primitive`): values of
    the program are on ``dev``, NumPy constants join it, as in an eager call."""
    if dev == "cpu":
        return run_primitive(fn, arrays, arrays, params, (False,) * len(arrays), True,
                             False).outs
    values = [const(a) if hasattr(a, "shape") and type(a) is not np.ndarray
              and not isinstance(a, (np.generic, np.dtype)) else a for a in arrays]
    return run_primitive(fn, values, arrays, params, (False,) * len(arrays), False, False).outs


def _array_step(dev: str):
    """The step of :func:`~tapegrad.tape.interpret` that runs an entry on arrays on ``dev``."""
    def step(e, args):
        return _run_step(e.fn, e.params, [_const_array(a) for a in args], dev)

    return step


class Program:
    """A :class:`~tapegrad.Tape` compiled into one straight-line Python function.

    Built by :func:`jit` (``jitted.lower(*args)`` returns it) and by ``Tape.replay``. Calling it
    with the input arrays (in the tape's flattened input order, of the recorded shapes and
    dtypes) returns the output arrays; ``str(program)`` lists it one line per primitive call,
    after dead-code elimination, constant folding, common-subexpression elimination and buffer
    planning (a line ``... into x`` writes its result into ``x``'s buffer, which dies there).

    Attributes:
        tape: The tape it was compiled from.
        source: The generated Python source.
        steps: Number of primitive calls left after the optimisations.
        folded, merged, dropped: How many entries constant folding, common-subexpression
            elimination and dead-code elimination removed.
        fused: How many transposes the layout pass removed (cancelled, or computed by the
            product that fed them).

    The generated source holds only names the compiler makes up (``v0, v1, ...`` for values,
    numbered slots for functions, parameter dicts and constants): no string from the tape (an
    op's label, a parameter's name or value, a node id, a label) is ever written into it.

    Raises:
        GuardError: when called with inputs that change a Python decision taken while the tape
            was recorded (see ``Tape.replay``).
        ValueError: for a tape read from a file (``Tape.from_json``) that does not compile, or
            whose first run finds an entry that fails or gives outputs of other shapes or
            dtypes than the file declares (the first call runs the tape's entries one by one
            and checks each, naming the entry).
    """

    def __init__(self, tape, keep_inputs: bool = True):
        self.tape = tape
        # A tape read from a file: its first run checks each entry against the file.
        self._unchecked = bool(tape.loaded)
        if not tape.loaded:
            self._build(tape)
            return
        try:
            self._build(tape)
        except ValueError:
            raise
        except Exception as e:  # parameters from the file that an op's traits reject
            raise ValueError(f"Program: the tape loaded from a file does not compile: "
                             f"{type(e).__name__}: {e}") from e

    # -- analysis --------------------------------------------------------------------------
    def _build(self, tape) -> None:
        entries = tape.entries
        avals = tape.avals
        value_of: dict = {}  # node -> ("v", node) | ("c", array): what a node is now
        for n in tape.in_nodes:
            value_of[n] = ("v", n)
        steps: list = []
        seen: dict = {}  # CSE: key -> output refs
        self.folded = 0
        self.merged = 0
        for i, e in enumerate(entries):
            if type(e) is Guard:
                ref = value_of.get(e.node, ("v", e.node))
                if ref[0] == "c":  # decided at compile time: the recorded value is the value
                    continue
                steps.append(e._replace(node=ref[1]))
                continue
            ins = tuple(
                value_of.get(n, ("v", n)) if n >= 0 else ("c", _const_array(c))
                for n, c in zip(e.in_nodes, e.consts)
            )
            if all(kind == "c" for kind, _ in ins):  # constant folding
                try:
                    outs = self._fold(e.fn, e.params, [v for _, v in ins])
                except (ValueError, GuardError, FloatingPointError, MemoryError):
                    raise
                except Exception as err:
                    if not tape.loaded:
                        raise
                    raise _loaded_failure("Program", i, e, err) from err
                if tape.loaded:
                    _check_outputs("Program", i, e, outs, avals)
                for n, o in zip(e.out_nodes, outs):
                    value_of[n] = ("c", o)
                self.folded += 1
                continue
            key = None
            if _hashable(tuple(e.params.items())):
                key = (e.fn, tuple(sorted(e.params.items())),
                       tuple((k, v if k == "v" else id(v)) for k, v in ins))
                if key in seen:  # common subexpression: the same pure call again
                    for n, ref in zip(e.out_nodes, seen[key]):
                        value_of[n] = ref
                    self.merged += 1
                    continue
            step = _Step(e.fn, e.params, ins, e.out_nodes, [avals[n] for n in e.out_nodes])
            steps.append(step)
            refs = tuple(("v", n) for n in e.out_nodes)
            for n, ref in zip(e.out_nodes, refs):
                value_of[n] = ref
            if key is not None:
                seen[key] = refs
        outputs = []
        for r in tape.out_refs:
            if isinstance(r, int):
                outputs.append(value_of.get(r, ("v", r)))
            else:
                outputs.append(("c", _const_array(r[1])))
        steps, outputs = self._layout(steps, outputs)
        # dead-code elimination: keep what the outputs and the guards need
        needed = {v for k, v in outputs if k == "v"}
        live_steps = []
        for s in reversed(steps):
            if type(s) is Guard:
                needed.add(s.node)
                live_steps.append(s)
            elif any(n in needed for n in s.outs):
                needed.update(v for k, v in s.ins if k == "v")
                live_steps.append(s)
        live_steps.reverse()
        self.dropped = len(steps) - len(live_steps)
        self._steps, self._outputs = live_steps, outputs
        self._plan(tape)

    def _layout(self, steps: list, outputs: list) -> tuple:
        """Layout pass: a transpose of a transpose that cancels is dropped (its output is the
        first one's input), and a transpose that swaps the last two axes of a product nothing
        else reads is computed by the same op on the inputs and parameters its ``transposed``
        rule gives (``b^T @ a^T``: a contiguous result, no strided view for the elementwise ops
        downstream)."""
        uses: dict = {}
        for s in steps:
            for n in ([s.node] if type(s) is Guard else [v for k, v in s.ins if k == "v"]):
                uses[n] = uses.get(n, 0) + 1
        for k, v in outputs:
            if k == "v":
                uses[v] = uses.get(v, 0) + 1
        producer: dict = {}
        alias: dict = {}  # node -> the ref that replaces it
        kept = []
        self.fused = 0
        for s in steps:
            if type(s) is Guard:
                ref = alias.get(s.node)
                kept.append(s if ref is None or ref[0] != "v" else s._replace(node=ref[1]))
                continue
            s.ins = tuple(alias.get(v, (k, v)) if k == "v" else (k, v) for k, v in s.ins)
            perm_of = s.fn.traits.permutation
            src = s.ins[0][1] if perm_of is not None and s.ins and s.ins[0][0] == "v" else None
            if perm_of is not None and src is not None and len(s.outs) == 1:
                ndim = len(s.avals[0][0])
                perm = perm_of(ndim, **s.params)
                inner = producer.get(src)
                if inner is not None and inner.fn.traits.permutation is not None \
                        and inner.ins[0][0] == "v":
                    first = inner.fn.traits.permutation(ndim, **inner.params)
                    if tuple(first[i] for i in perm) == tuple(range(ndim)):  # they cancel
                        alias[s.outs[0]] = inner.ins[0]
                        self.fused += 1
                        continue
                swap = tuple(range(ndim - 2)) + (ndim - 1, ndim - 2) if ndim >= 2 else None
                if (inner is not None and perm == swap and uses.get(src) == 1
                        and inner.fn.traits.transposed is not None
                        and len(inner.outs) == 1):
                    ins, params = inner.fn.traits.transposed(inner.ins, inner.params)
                    if self._shape_of(inner.fn, ins, params) == s.avals[0][0]:
                        inner.ins, inner.params = tuple(ins), params
                        inner.outs, inner.avals = s.outs, s.avals
                        producer[s.outs[0]] = inner
                        self.fused += 1
                        continue
            kept.append(s)
            for n in s.outs:
                producer[n] = s
        outputs = [alias.get(v, (k, v)) if k == "v" else (k, v) for k, v in outputs]
        return kept, outputs

    def _shape_of(self, fn, ins, params):
        """``fn``'s output shape on a step's inputs ``ins`` and ``params`` (None where ``fn``
        does not apply)."""
        avals = self.tape.avals
        shapes = [avals[v][0] if k == "v" else np.shape(v) for k, v in ins]
        try:
            return tuple(fn.output_shape(*shapes, **params))
        except (ValueError, TypeError, NotImplementedError):
            return None

    def _fold(self, fn, params, arrays) -> tuple:
        host = (np.ndarray, np.generic, np.dtype)
        dev = next((_backend.device_of(a) for a in arrays
                    if hasattr(a, "shape") and not isinstance(a, host)), "cpu")
        with transform_scope():  # NumPy constants join the device, as in an eager call
            return _run_step(fn, params, list(arrays), dev)

    def _plan(self, tape) -> None:
        """Liveness and in-place writes: which values die at each step, and which elementwise
        steps can write into a dying input buffer the program owns."""
        steps = self._steps
        last: dict = {}
        for i, s in enumerate(steps):
            for n in ([s.node] if type(s) is Guard else [v for k, v in s.ins if k == "v"]):
                last[n] = i
        keep = {v for k, v in self._outputs if k == "v"}
        owned: dict = {}  # node -> buffer id (arrays the program made; views share the id)
        users: dict = {}  # buffer id -> nodes that may reference it
        readonly = set()  # nodes that are read-only views (broadcasts): never written into
        for i, s in enumerate(steps):
            if type(s) is Guard:
                continue
            traits = s.fn.traits
            ufunc = traits.ufunc if not s.params else None
            if ((ufunc is not None or traits.into) and len(s.outs) == 1
                    and "into" not in s.params):
                shape, dtype = s.avals[0]
                for k, v in s.ins:
                    if (k == "v" and v in owned and v not in readonly and last.get(v) == i
                            and v not in keep
                            and all(last.get(u, -1) <= i and u not in keep
                                    for u in users[owned[v]])
                            and tape.avals[v] == (shape, dtype)):
                        s.out_into = v
                        break
            view = traits.view
            first = s.ins[0][1] if s.ins and s.ins[0][0] == "v" else None
            for n in s.outs:
                if view:
                    if first not in owned:
                        continue  # a view of something the program does not own
                    buf = owned[first]
                    if view == "readonly" or first in readonly:
                        readonly.add(n)
                elif s.out_into is not None:
                    buf = owned[s.out_into]
                elif ufunc is not None or traits.fresh or traits.into:
                    buf = n
                else:
                    continue  # may alias an input: never written into
                owned[n] = buf
                users.setdefault(buf, []).append(n)
        frees: dict = {}
        for n, i in last.items():
            if n not in keep:
                frees.setdefault(i, []).append(n)
        for i, s in enumerate(steps):  # outputs nothing reads die where they are made
            if type(s) is not Guard:
                for n in s.outs:
                    if n not in last and n not in keep:
                        frees.setdefault(i, []).append(n)
        self._frees = frees

    # -- code generation -------------------------------------------------------------------
    def _source(self, device: str):
        """The program's Python source and the globals it runs with.

        The source is made only of names made up here: ``v0, v1, ...`` for values (numbered in
        order of appearance, not by node id), ``F3``/``C2``/``P3``/``K3_0``/``G4``/``O0`` slots
        for forwards, contexts, parameter dicts, constants, guards and constant outputs. Nothing
        from the tape (an op's label, a parameter's name or value, a node id, a label, a dtype)
        is ever written into the text: every such value reaches the program through its
        globals, and parameters are passed as ``**P3``.
        """
        xp = _backend.get_backend(device)
        g = {"_guard": check_guard, "_asarray": xp.asarray, "_tuple": tuple}

        def constant(v):  # NumPy constants join the program's device, as in an eager call
            return _backend.to_device(v, device) if device != "cpu" and type(
                v) is np.ndarray else v

        lines = []
        names: dict = {}

        def name(n):
            got = names.get(n)
            if got is None:
                got = names[n] = f"v{len(names)}"
            return got

        ins = [name(n) for n in self.tape.in_nodes]
        lines.append(f"def program({', '.join(ins)}):")
        ctx_classes: dict = {}
        counter = itertools.count()
        for i, s in enumerate(self._steps):
            if type(s) is Guard:
                j = next(counter)
                g[f"G{j}"] = s
                lines.append(f"    _guard(G{j}, {name(s.node)}, 'jit')")
            else:
                j = next(counter)
                args = []
                for k, v in s.ins:
                    if k == "v":
                        args.append(name(v))
                    else:
                        g[f"K{j}_{len(args)}"] = constant(v)
                        args.append(f"K{j}_{len(args)}")
                outs = ", ".join(name(n) for n in s.outs) + ("," if len(s.outs) == 1 else "")
                ufunc = s.fn.traits.ufunc
                if s.out_into is not None and ufunc is not None and not s.params:
                    g[f"U{j}"] = getattr(xp, ufunc)  # the ufunc, into the dying buffer
                    call = f"U{j}({', '.join(args)}, out={name(s.out_into)})"
                    lines.append(f"    {outs} = {call},")
                else:
                    n_in = len(s.ins)
                    cls = ctx_classes.get(n_in)
                    if cls is None:
                        attrs = {"needs_input_grad": (False,) * n_in}
                        if device != "cpu":
                            attrs.update(device=device, backend=xp)  # pyright: ignore[reportArgumentType]
                        cls = ctx_classes[n_in] = type(f"_Ctx{n_in}", (Context,), attrs)
                        g[f"C{n_in}"] = cls
                    g[f"F{j}"] = s.fn.forward
                    kw = ""
                    if s.params:  # by name, from a dict: no parameter name enters the source
                        g[f"P{j}"] = dict(s.params)
                        kw += f", **P{j}"
                    if s.out_into is not None:  # the forward writes into the dying buffer
                        kw += f", into={name(s.out_into)}"
                    call = f"F{j}(C{n_in}(), {', '.join(args)}{kw})"
                    if len(s.outs) == 1:
                        call = f"({call},)"
                    lines.append(f"    {outs} = {call}")
                    for n, (shape, _) in zip(s.outs, s.avals):
                        if shape == ():  # a NumPy scalar from a reduction: a 0-d array
                            lines.append(f"    {name(n)} = _asarray({name(n)})")
            dead = self._frees.get(i)
            if dead:
                lines.append(f"    del {', '.join(name(n) for n in dead)}")
        outs = []
        for j, (k, v) in enumerate(self._outputs):
            if k == "v":
                outs.append(name(v))
            else:
                g[f"O{j}"] = constant(v)
                outs.append(f"O{j}")
        lines.append(f"    return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")
        return "\n".join(lines), g

    def _compiled(self, device: str):
        cache = self.__dict__.setdefault("_fns", {})
        fn = cache.get(device)
        if fn is None:
            src, g = self._source(device)
            exec(compile(src, f"<tapegrad program {id(self):x}>", "exec"), g)  # noqa: S102
            fn = cache[device] = g["program"]
        return fn

    @property
    def source(self) -> str:
        """The generated Python source (for NumPy arrays)."""
        return self._source("cpu")[0]

    @property
    def steps(self) -> int:
        return sum(1 for s in self._steps if type(s) is not Guard)

    def __call__(self, arrays: list) -> tuple:
        """Run the program on the input arrays; returns the output arrays (a tuple)."""
        dev = "cpu"
        for a in arrays:
            if type(a) is not np.ndarray and hasattr(a, "shape"):
                dev = _backend.device_of(a)
                break
        fn = self._compiled(dev)
        if self._unchecked:  # a tape from a file: its entries run as written first, checked
            self._check(arrays, dev)
            self._unchecked = False
        if _state.debug:  # tg.debug_nans checks every op: run them one by one
            return self._interpret(arrays, dev)
        with transform_scope():
            return fn(*arrays)

    def _check(self, arrays, dev) -> None:
        """Run the entries of a tape read from a file as written, one by one, and check that
        each gives the shapes and dtypes the file declares (what the compiled program's
        planning relied on); a failure is a ValueError naming the entry."""
        tape = self.tape
        with transform_scope():
            interpret(tape.entries, dict(zip(tape.in_nodes, arrays)), _array_step(dev),
                      "Tape.replay", tape.avals)

    def _interpret(self, arrays, dev) -> tuple:
        """The tape's entries one by one on the arrays (inside ``tg.debug_nans``, which checks
        every op)."""
        tape = self.tape
        with transform_scope():
            env = interpret(tape.entries, dict(zip(tape.in_nodes, arrays)), _array_step(dev),
                            "jit")
        return tuple(env[r] if isinstance(r, int) else _const_array(r[1])
                     for r in tape.out_refs)

    def __str__(self) -> str:
        tape = self.tape
        names = tape._name
        ins = " ".join(f"{names(n)}" for n in tape.in_nodes)
        lines = [f"{{ program ; {ins}. let"]
        for s in self._steps:
            if type(s) is Guard:
                lines.append(f"    guard {s.kind}({names(s.node)}) == {s.value!r}")
                continue
            outs = " ".join(names(n) for n in s.outs)
            params = " ".join(f"{k}={v!r:.30}" for k, v in s.params.items())
            args = " ".join(_fmt(r, names) for r in s.ins)
            into = f"  into {names(s.out_into)}" if s.out_into is not None else ""
            lines.append(f"    {outs} = {s.fn._name()}{f'[{params}]' if params else ''} {args}"
                         f"{into}")
        outs = " ".join(_fmt(r, names) for r in self._outputs)
        lines.append(f"  in ({outs}) }}")
        return "\n".join(lines)

    __repr__ = __str__


# -- jit -------------------------------------------------------------------------------------
_ALL_CACHES: weakref.WeakSet = weakref.WeakSet()
_PY_NUMBERS = (bool, int, float, complex)


class _Cache:
    """The programs of one jitted function: signature -> list of compiled programs (one per
    branch a guard selects), least recently used signatures dropped beyond ``size``."""

    def __init__(self, size):
        self.size = size
        self.lock = threading.Lock()
        self.entries: OrderedDict = OrderedDict()
        self.static_keys: set = set()  # signatures whose numbers are static (by value)

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()
            self.static_keys.clear()


class _ImplicitState(threading.local):
    """Per thread: the :class:`_Capture` of the ``jit`` recording running, or None."""

    capture: Any = None


#: Read by stateful objects (``tapegrad.nn.Module``): while ``implicit_state.capture`` is set,
#: a ``jit`` recording is running on this thread, and reading or replacing their state goes
#: through it (:meth:`_Capture.read`, :meth:`_Capture.write`).
implicit_state = _ImplicitState()


class _Capture:
    """The state of stateful objects a ``jit`` recording reads and writes besides its
    arguments: a Module's parameters, states and random key (as ``torch.compile`` treats a
    module's state). Each value read becomes an implicit input of the program, read afresh
    from its owner at every call; each value replaced becomes an implicit output, written back
    after every call. So a jitted function sees a model's current parameters after an
    optimizer step, and a Dropout's key advances at every call as it does eagerly.

    An owner implements ``_implicit_get(slot)``, ``_implicit_set(slot, value)`` (no hooks) and
    ``_implicit_snapshot()``: a tuple summing up its configuration, whose first item is a
    version number that a change of structure or attributes replaces for good (a program
    recorded before it is dropped), the rest (a mode) may come back; a program is reused only
    while it is equal.
    """

    def __init__(self, trace: Trace):
        self.trace = trace
        # (id, slot) -> (owner, slot, what the recording computes with, kind, info): kind
        # "tensor" (an input; info its aval), "number" (a weakly typed input; info its type) or
        # "value" (anything else: info the value, compared at every call)
        self.reads: dict = {}
        self.writes: dict = {}  # (id, slot) -> (owner, slot, value)
        self.saved: dict = {}  # (id, slot) -> (owner, slot, value before the recording)
        self.owners: dict = {}  # id -> (owner, snapshot)
        self.outer = False  # a value another transform traces was read: no reusable program

    def touch(self, owner) -> None:
        """Note ``owner``: its configuration after the recording is checked before the
        program is reused."""
        if id(owner) not in self.owners:
            self.owners[id(owner)] = (owner, owner._implicit_snapshot())

    def read(self, owner, slot, value):
        """The value to compute with for ``owner``'s ``slot`` (which holds ``value``): an
        implicit input of the program (the same one for every read)."""
        self.touch(owner)
        key = (id(owner), slot)
        if key in self.writes:  # replaced during this recording: it holds the new value
            return value
        hit = self.reads.get(key)
        if hit is not None:
            return hit[2]
        if type(value) in _PY_NUMBERS:  # a Python number: weakly typed, as an argument
            w = WeakScalar(self.trace.new_input(const(np.asarray(value, WIDE[type(value)]))),
                           type(value))
            self.reads[key] = (owner, slot, w, "number", type(value))
            return w
        if not isinstance(value, Tensor):
            self.reads[key] = (owner, slot, value, "value", value)
            return value
        if value._level:  # traced by another transform: computed with as it is, not reused
            self.outer = True
            return value
        if not value.is_realized:
            value = value.realize()
        t = self.trace.new_input(value)
        self.reads[key] = (owner, slot, t, "tensor", (value.shape, value.dtype, value.device))
        return t

    def write(self, owner, slot, old, new) -> None:
        """Note that ``owner``'s ``slot`` (holding ``old``) now holds ``new``: an implicit
        output of the program."""
        self.touch(owner)
        key = (id(owner), slot)
        self.saved.setdefault(key, (owner, slot, old))
        self.writes[key] = (owner, slot, new)

    def undo(self) -> None:
        """The recording failed: put back every value it replaced."""
        for owner, slot, old in self.saved.values():
            owner._implicit_set(slot, old)


class _Compiled:
    """One compiled program of a jitted function and what it reads and writes besides its
    arguments."""

    __slots__ = ("program", "static_numbers", "n_out", "out_treedef", "reads", "writes",
                 "const_writes", "owners")

    def __init__(self, program, static_numbers, n_out, out_treedef, reads, writes,
                 const_writes, owners):
        self.program, self.static_numbers = program, static_numbers
        self.n_out, self.out_treedef = n_out, out_treedef
        self.reads, self.writes, self.const_writes = reads, writes, const_writes
        self.owners = owners


class _Stale(GuardError):
    """The state a program reads (a Module's mode, structure, shapes) changed since it was
    recorded: another program, or a new recording. ``forever``: it can never fit again."""

    def __init__(self, message: str, forever: bool = False):
        super().__init__(message)
        self.forever = forever


class _Outer(Exception):
    """A state value is traced by another transform: run the function itself for it."""


def _big_int(v) -> bool:
    """A Python int int64 cannot hold: static (its value is part of the signature)."""
    return type(v) is int and not -(2**63) <= v < 2**63


def _input_array(v, static_numbers: bool = False):
    """The program input for argument leaf ``v``: a Python number held exactly (it is weakly
    typed; a dummy when it is static), a Tensor's array, or an array."""
    t = type(v)
    if t in _PY_NUMBERS:
        if static_numbers or _big_int(v):
            return np.zeros((), np.int64)
        return np.asarray(v, WIDE[t])
    return v._concrete() if isinstance(v, Tensor) else Tensor(v)._array


def _exact_number(v):
    """A result leaf: a Python number (weakly typed or constant) as a 0-d Tensor holding it
    exactly (the dtype ``np.asarray`` gives it), anything else as it is."""
    if type(v) is WeakScalar:
        return v.tensor
    if type(v) in _PY_NUMBERS:
        return const(np.asarray(v, WIDE[type(v)]))
    return v


def _record(call, args: tuple, who: str, static_numbers: bool = False):
    """Trace ``call(*args)`` for ``jit``: Python number leaves as :class:`WeakScalar` inputs
    (or, with ``static_numbers``, as themselves: the program is then for these values), the
    state of stateful objects as implicit inputs and outputs.

    Returns ``(out, compiled)``; ``compiled`` is None when the recording read a value another
    transform traces (the result is right, but no program can be reused).
    """
    leaves, treedef = tree_flatten(args)
    trace = Trace(new_level(), True)
    traced = []
    for i, v in enumerate(leaves):
        if _big_int(v) or (static_numbers and type(v) in _PY_NUMBERS):
            # static: the program is for this value (an unused input)
            trace.new_input(const(np.zeros((), np.int64)))
            traced.append(v)
        elif type(v) in _PY_NUMBERS:
            t = trace.new_input(const(np.asarray(v, WIDE[type(v)])))
            traced.append(WeakScalar(t, type(v)))
        else:
            p = as_primal(v, i, args, ["args", "kwargs"], who, allow_int=True)
            traced.append(trace.new_input(p))
    cap = _Capture(trace)
    previous = implicit_state.capture
    implicit_state.capture = cap
    done = False
    try:
        with transform_scope():
            out = call(*tree_unflatten(treedef, traced))
        out = tree_map(_exact_number, out)
        out_leaves, out_tree = tree_flatten(out)
        refs, lowered = [], []
        for i, o in enumerate(out_leaves):
            low, node = lower_output(o, trace, i, out, who)
            refs.append(node if node is not None else ("const", low))
            lowered.append(low)
        writes, const_writes, new_values = [], [], []
        for owner, slot, v in cap.writes.values():
            if type(v) is WeakScalar:
                v = v.tensor
            if isinstance(v, Tensor):
                low, node = lower_output(v, trace, 0, v, who)
                if node is None:
                    const_writes.append((owner, slot, low))
                else:
                    writes.append((owner, slot))
                    refs.append(node)
                    lowered.append(low)
                new_values.append((owner, slot, low))
            else:
                const_writes.append((owner, slot, v))
                new_values.append((owner, slot, v))
        done = True
    finally:
        implicit_state.capture = previous
        trace.done = True
        if not done:
            cap.undo()
    for owner, slot, v in new_values:  # the state after this first call: concrete values
        owner._implicit_set(slot, v)
    n_out = len(out_leaves)
    result = tree_unflatten(out_tree, lowered[:n_out])
    if cap.outer:
        return result, None
    reads = list(cap.reads.values())
    in_nodes = list(range(len(leaves))) + [
        (r[2].tensor if r[3] == "number" else r[2])._node for r in reads if r[3] != "value"]
    tape = trace.freeze(in_nodes, treedef, refs, [(v.shape, v.dtype) for v in lowered], out_tree)
    compiled = _Compiled(
        Program(tape), static_numbers, n_out, out_tree,
        tuple((owner, slot, kind, info) for owner, slot, _, kind, info in reads),
        tuple(writes), tuple(const_writes),
        tuple((o, o._implicit_snapshot()) for o, _ in cap.owners.values()),  # as left
    )
    return result, compiled


def _run(c: _Compiled, leaves):
    """Run a compiled program on argument leaves and the current implicit state.

    Raises:
        GuardError: when the program does not fit (a guard flips, or the state it reads
            changed its configuration, shape or dtype).
        _Outer: when a state value is traced by another transform.
    """
    for owner, snapshot in c.owners:
        now = owner._implicit_snapshot()
        if now != snapshot:
            raise _Stale("jit: a stateful object's configuration changed",
                         forever=now[0] != snapshot[0])
    extra = []
    ndarray = np.ndarray
    for owner, slot, kind, info in c.reads:
        v = owner._implicit_get(slot)
        if kind == "tensor":
            if type(v) is not Tensor:
                raise _Stale("jit: a state is no longer a Tensor")
            box = v._box
            if box is not None and box.level:
                raise _Outer
            a = v._array
            if type(a) is ndarray:
                if a.shape != info[0] or a.dtype != info[1] or info[2] != "cpu":
                    raise _Stale("jit: a state changed its shape, dtype or device")
            else:
                a = v._concrete()
                if (a.shape, a.dtype, _backend.device_of(a)) != info:
                    raise _Stale("jit: a state changed its shape, dtype or device")
            extra.append(a)
        elif kind == "number":
            if type(v) is not info:
                raise _Stale("jit: a state number changed its type")
            extra.append(np.asarray(v, WIDE[info]))
        elif not (v is info or (type(v) is type(info) and v == info)):
            raise _Stale("jit: a state value the recording used changed")
    arrays = [_input_array(v, c.static_numbers) for v in leaves]
    arrays.extend(extra)
    outs = c.program(arrays)
    res = [const(o) if not isinstance(o, Tensor) else o for o in outs]
    n = c.n_out
    for (owner, slot), value in zip(c.writes, res[n:]):
        owner._implicit_set(slot, value)
    for owner, slot, value in c.const_writes:
        owner._implicit_set(slot, value)
    return tree_unflatten(c.out_treedef, res[:n])


def _signature(leaves, who):
    sig = []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, Tensor):
            arr = leaf._array
            sig.append((arr.shape, arr.dtype, _backend.device_of(arr)))
        elif hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
            sig.append((tuple(leaf.shape), np.dtype(leaf.dtype), _backend.device_of(leaf)))
        elif _big_int(leaf):
            sig.append((int, leaf))  # too large for int64: static, by value
        elif isinstance(leaf, (bool, int, float, complex, np.generic)):
            sig.append(type(leaf))  # a Python number: its type (weakly typed), not its value
        else:
            raise TypeError(
                f"{who}: argument leaf {i} is a {type(leaf).__name__} ({leaf!r:.40}), which jit "
                "cannot trace; pass it as a static argument (jit(f, static_argnums=...) or "
                "static_argnames=...), or close over it."
            )
    return tuple(sig)


#: How many programs one signature keeps, one per outcome of its guards (a guard on a value
#: that changes on every call, such as ``x.numpy()``, would otherwise add one per call).
_MAX_BRANCHES = 8


@strict_keywords
def jit(
    fun=None, *, static_argnums: Any = (), static_argnames: Any = (), cache_size: int = 64
) -> Any:
    """Compile ``fun``: trace it once per input signature into a :class:`Program`, and run the
    compiled program on later calls with that signature.

    The first call with a given signature (pytree structure, shapes, dtypes and devices of the
    array arguments, and the static arguments' values) runs ``fun`` under ``trace``; the
    recorded tape is compiled into straight-line Python (dead code dropped, constants folded,
    repeated subexpressions merged, buffers planned: see :class:`Program`). Later calls run
    that program on the arrays: none of ``fun``'s Python, no pytrees inside, no Tensors. This is
    the fast path for many small ops, and it composes with the transforms from the outside:
    ``tg.jit(tg.grad(loss))`` and ``tg.jit(train_step)`` (loss, ``value_and_grad`` and the
    optimizer update, with the optimizer state and PRNG keys as inputs and outputs) each
    compile into one program.

    Semantics (as JAX's ``jit``; ``jit(fun)(*args)`` equals ``fun(*args)`` in value and dtype):
        - Every argument not named static is an input: a pytree of Tensors, arrays or numbers.
          Keyword arguments are inputs too. A Python number is weakly typed, as eagerly (and
          as JAX's weak types): ``x_float32 * s`` stays float32 and ``x_float64 * s`` uses
          ``s`` exactly; its value is an input (a new value runs the same program) and its
          Python type part of the signature (see :mod:`tapegrad.weak`); where the function
          needs it as a concrete value (a shape, an axis), the programs are for each value, as
          for a static argument. A result that is a Python number eagerly is a 0-d Tensor
          holding it exactly (float64, int64, complex128 or bool).
        - Static arguments (``static_argnums``, ``static_argnames``) are passed to ``fun`` as
          they are and are part of the signature: each new value compiles again. Use them for
          shapes, flags, strings and other Python values; they must be hashable.
        - Values ``fun`` closes over are constants of the recording, except the state of a
          :class:`~tapegrad.nn.Module` it calls (closed over or static): its parameters,
          states and random key are read at every call and what ``fun`` replaces is written
          back (as ``torch.compile``), so the program sees the parameters after an optimizer
          step, a BatchNorm's running statistics are updated and a Dropout draws a new mask
          at every call, as eagerly; a change of mode (``eval()``), structure or
          hyperparameter records a new program.
        - Python side effects happen only while tracing; so do NumPy's global random functions
          (``np.random.rand``): their draws are constants of the recording. Draw random
          numbers from :mod:`tapegrad.random` keys passed as arguments (or a Module's key,
          which advances at every call).
        - A Python decision on data (``if x.sum() > 0``, ``int(n)``, ``x.numpy()``) is a guard:
          when new inputs flip it, ``fun`` is traced again for them (the programs of the last
          8 outcomes are kept). Reading a whole array (``x.numpy()``, ``np.asarray(x)``) guards
          on every element, so it retraces for each new value: keep such reads out of jitted
          code, or compute on the Tensor.
        - Called on values another transform is tracing (inside ``grad``), ``fun`` simply
          runs, so that transform can differentiate it.

    Args:
        fun: The function.
        static_argnums: Int or tuple of ints: positional arguments that are static.
        static_argnames: Str or tuple of str: keyword arguments that are static.
        cache_size: How many signatures to keep compiled programs for (least recently used
            ones are dropped).

    Returns:
        A function with ``fun``'s signature and results (leaves as Tensors). It has
        ``lower(*args, **kwargs)`` (the :class:`Program` for these arguments),
        ``clear_cache()`` and ``cache_size()``; ``tg.jit.clear_cache()`` clears every jitted
        function's programs.

    Raises:
        TypeError: for an argument that cannot be traced (a string, an object) and is not
            static, naming ``static_argnums``/``static_argnames``; for an unhashable static
            argument.
        ValueError: for a ``static_argnums`` entry out of range.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> fast_grad = tg.jit(tg.grad(lambda w: (tnp.sin(w) * w).sum()))
        >>> g1 = fast_grad(tg.Tensor([0.0, 1.0]))   # traces and compiles
        >>> g2 = fast_grad(tg.Tensor([2.0, 3.0]))   # runs the program
        >>> g2.shape
        (2,)
        >>> reshape = tg.jit(lambda x, n: tnp.reshape(x, (n, -1)), static_argnums=1)
        >>> reshape(tg.Tensor([1.0, 2.0, 3.0, 4.0]), 2).shape
        (2, 2)
    """
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames, cache_size=cache_size)
    if not callable(fun):
        raise TypeError(f"jit: fun must be callable, got {type(fun).__name__}")
    s_nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    s_names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
    name = getattr(fun, "__name__", "fun")
    who = f"jit({name})"
    cache = _Cache(cache_size)
    _ALL_CACHES.add(cache)

    def split(args, kwargs):
        n = len(args)
        nums = set()
        for a in s_nums:
            if not -n <= a < n:
                raise ValueError(f"{who}: static_argnums {a} out of range for {n} arguments")
            nums.add(a % n)
        dyn = tuple(a for i, a in enumerate(args) if i not in nums)
        statics = tuple((i, args[i]) for i in sorted(nums))
        dkw = {k: v for k, v in kwargs.items() if k not in s_names}
        skw = tuple(sorted((k, v) for k, v in kwargs.items() if k in s_names))
        for i, v in statics + skw:
            if not _hashable(v):
                raise TypeError(f"{who}: static argument {i!r} is an unhashable "
                                f"{type(v).__name__}; static arguments must be hashable")
        return dyn, dkw, statics, skw

    def prepare(args, kwargs):
        dyn, dkw, statics, skw = split(args, kwargs)
        leaves, treedef = tree_flatten((dyn, dkw))
        traced = implicit_state.capture is not None or any(
            (isinstance(v, Tensor) and v.is_traced) or type(v) is WeakScalar for v in leaves)
        key = None if traced else (treedef, statics, skw, _signature(leaves, who))
        return dyn, dkw, statics, skw, leaves, key

    def compile_for(dyn, dkw, statics, skw, static_numbers=False):
        n = len(dyn) + len(statics)
        static_at = dict(statics)
        kw_static = dict(skw)

        def call(d, k):
            it = iter(d)
            full = [static_at[i] if i in static_at else next(it) for i in range(n)]
            return fun(*full, **k, **kw_static)

        return _record(call, (dyn, dkw), who, static_numbers)

    def by_value(key, leaves):
        """The key of a signature whose numbers are static: with their values."""
        return (key, tuple((type(v), v) for v in leaves if type(v) in _PY_NUMBERS))

    def record(dyn, dkw, statics, skw, key, leaves):
        """Record a program: numbers weakly typed; if the function needs one of them as a
        concrete Python number where jit cannot guard it (a shape, an axis, an isinstance
        test that raises), then with the numbers static, as the eager call sees them."""
        if key in cache.static_keys:
            return by_value(key, leaves), compile_for(dyn, dkw, statics, skw, True)
        try:
            return key, compile_for(dyn, dkw, statics, skw)
        except Exception:
            if not any(type(v) in _PY_NUMBERS for v in leaves):
                raise
        got = compile_for(dyn, dkw, statics, skw, True)  # the eager call's own error, if any
        cache.static_keys.add(key)
        return by_value(key, leaves), got

    def jitted(*args, **kwargs):
        dyn, dkw, statics, skw, leaves, key = prepare(args, kwargs)
        if key is None:  # an outer transform (or jit recording) traces this call: run fun
            return fun(*args, **kwargs)
        lookup = by_value(key, leaves) if key in cache.static_keys else key
        with cache.lock:
            progs = cache.entries.get(lookup)
            if progs is not None:
                cache.entries.move_to_end(lookup)
        for c in list(progs or ()):
            try:
                return _run(c, leaves)
            except _Stale as e:
                if e.forever:  # recorded for a structure that is gone: drop it
                    with cache.lock:
                        if c in progs:
                            progs.remove(c)
                continue
            except GuardError:
                continue  # a Python decision flipped: another branch's program, or a new one
            except _Outer:  # the state is traced by another transform: let it see fun
                return fun(*args, **kwargs)
        key, (out, c) = record(dyn, dkw, statics, skw, key, leaves)
        if c is not None:
            with cache.lock:
                branches = cache.entries.setdefault(key, [])
                branches.append(c)
                if len(branches) > _MAX_BRANCHES:  # guards flipping on every call: keep newest
                    del branches[0]
                cache.entries.move_to_end(key)
                while len(cache.entries) > cache.size:
                    cache.entries.popitem(last=False)
        return out

    def lower(*args, **kwargs):
        dyn, dkw, statics, skw, leaves, key = prepare(args, kwargs)
        if key is None:
            raise TypeError(f"{who}.lower: the arguments are traced by an outer transform")
        progs = cache.entries.get(by_value(key, leaves) if key in cache.static_keys else key)
        if progs:
            return progs[-1].program
        key, (_, c) = record(dyn, dkw, statics, skw, key, leaves)
        if c is None:
            raise TypeError(f"{who}.lower: the state of a Module it calls is traced by an "
                            "outer transform")
        with cache.lock:
            cache.entries.setdefault(key, []).append(c)
        return c.program

    jitted.__name__ = f"jit_{name}"
    jitted.__doc__ = fun.__doc__
    jitted.__wrapped__ = fun
    jitted.lower = lower
    jitted.clear_cache = cache.clear
    jitted.cache_size = lambda: sum(len(v) for v in cache.entries.values())
    return jitted


def _clear_all() -> None:
    """Drop the compiled programs of every jitted function."""
    for c in list(_ALL_CACHES):
        c.clear()


jit.clear_cache = _clear_all
_tape.compiler = Program  # Tape.replay runs the compiled program too
