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
from tapegrad import profiler as _profiler
from tapegrad import tape as _tape
from tapegrad.function import Context, _state, run_forward, transform_scope
from tapegrad.tape import Guard, GuardError, _check_outputs, _loaded_failure, check_guard
from tapegrad.tensor import Tensor, const
from tapegrad.transforms import trace
from tapegrad.tree import tree_flatten, tree_unflatten

__all__ = ["jit", "Program"]


_PROFILING = _profiler.PROFILING  # nonzero while a tg.profile block is open (in any thread)


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
            perm_of = getattr(s.fn, "permutation", None)
            src = s.ins[0][1] if perm_of is not None and s.ins and s.ins[0][0] == "v" else None
            if perm_of is not None and src is not None and len(s.outs) == 1:
                ndim = len(s.avals[0][0])
                perm = perm_of(ndim, **s.params)
                inner = producer.get(src)
                if inner is not None and getattr(inner.fn, "permutation", None) is not None \
                        and inner.ins[0][0] == "v":
                    first = inner.fn.permutation(ndim, **inner.params)
                    if tuple(first[i] for i in perm) == tuple(range(ndim)):  # they cancel
                        alias[s.outs[0]] = inner.ins[0]
                        self.fused += 1
                        continue
                swap = tuple(range(ndim - 2)) + (ndim - 1, ndim - 2) if ndim >= 2 else None
                if (inner is not None and perm == swap and uses.get(src) == 1
                        and getattr(inner.fn, "transposed", None) is not None
                        and len(inner.outs) == 1):
                    ins, params = inner.fn.transposed(inner.ins, inner.params)
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
        ctx = object.__new__(Context)
        ctx.needs_input_grad = (False,) * len(arrays)
        host = (np.ndarray, np.generic, np.dtype)
        dev = next((_backend.device_of(a) for a in arrays
                    if hasattr(a, "shape") and not isinstance(a, host)), "cpu")
        if dev != "cpu":  # NumPy constants join the device, as in an eager call
            ctx.device, ctx.backend = dev, _backend.get_backend(dev)
            arrays = [_backend.to_device(a, dev) if type(a) is np.ndarray else a for a in arrays]
        with transform_scope():
            out = run_forward(fn, ctx, list(arrays), params)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        return tuple(o if hasattr(o, "shape") else np.asarray(o) for o in outs)

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
            ufunc = getattr(s.fn, "ufunc", None)
            if ufunc is not None and s.params:
                ufunc = None
            if ((ufunc is not None or getattr(s.fn, "into", False)) and len(s.outs) == 1
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
            view = getattr(s.fn, "view", False)
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
                elif ufunc is not None or getattr(s.fn, "fresh", False) or getattr(
                        s.fn, "into", False):
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
                if s.out_into is not None and s.fn.ufunc is not None and not s.params:
                    g[f"U{j}"] = getattr(xp, s.fn.ufunc)  # the ufunc, into the dying buffer
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
        env = dict(zip(tape.in_nodes, arrays))
        xp = _backend.get_backend(dev)
        with transform_scope():
            for i, e in enumerate(tape.entries):
                if type(e) is Guard:
                    check_guard(e, env[e.node], "Tape.replay")
                    continue
                ctx = object.__new__(Context)
                ctx.needs_input_grad = (False,) * len(e.in_nodes)
                if dev != "cpu":
                    ctx.device, ctx.backend = dev, xp
                args = []
                for n, c in zip(e.in_nodes, e.consts):
                    if n >= 0:
                        args.append(env[n])
                    else:
                        c = _const_array(c)
                        args.append(_backend.to_device(c, dev) if dev != "cpu"
                                    and type(c) is np.ndarray else c)
                try:
                    out = run_forward(e.fn, ctx, args, e.params)
                except (ValueError, GuardError, FloatingPointError, MemoryError):
                    raise
                except Exception as err:
                    raise _loaded_failure("Tape.replay", i, e, err) from err
                outs = out if isinstance(out, (tuple, list)) else (out,)
                outs = [o if hasattr(o, "shape") and not isinstance(o, np.generic)
                        else xp.asarray(o) for o in outs]
                _check_outputs("Tape.replay", i, e, outs, tape.avals)
                env.update(zip(e.out_nodes, outs))

    def _interpret(self, arrays, dev) -> tuple:
        env = dict(zip(self.tape.in_nodes, arrays))
        xp = _backend.get_backend(dev)
        with transform_scope():
            for s in self._steps:
                if type(s) is Guard:
                    check_guard(s, env[s.node], "jit")
                    continue
                ctx = object.__new__(Context)
                ctx.needs_input_grad = (False,) * len(s.ins)
                if dev != "cpu":
                    ctx.device, ctx.backend = dev, xp
                out = run_forward(s.fn, ctx, [env[v] if k == "v" else v for k, v in s.ins],
                                  s.params)
                for n, o in zip(s.outs, out if isinstance(out, (tuple, list)) else (out,)):
                    env[n] = np.asarray(o) if not hasattr(o, "shape") else o
        return tuple(env[v] if k == "v" else v for k, v in self._outputs)

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


class _Cache:
    """The programs of one jitted function: signature -> list of programs (one per branch a
    guard selects), least recently used signatures dropped beyond ``size``."""

    def __init__(self, size):
        self.size = size
        self.lock = threading.Lock()
        self.entries: OrderedDict = OrderedDict()

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()


def _signature(leaves, who):
    sig = []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, Tensor):
            arr = leaf._array
            sig.append((arr.shape, arr.dtype, _backend.device_of(arr)))
        elif hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
            sig.append((tuple(leaf.shape), np.dtype(leaf.dtype), _backend.device_of(leaf)))
        elif isinstance(leaf, (bool, int, float, complex, np.generic)):
            sig.append(type(leaf))
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

    Semantics (as JAX's ``jit``):
        - Every argument not named static is an input: a pytree of Tensors, arrays or numbers
          (Python ints become int64 and floats float32 inputs: a new value runs the same
          program). Keyword arguments are inputs too.
        - Static arguments (``static_argnums``, ``static_argnames``) are passed to ``fun`` as
          they are and are part of the signature: each new value compiles again. Use them for
          shapes, flags, strings and other Python values; they must be hashable.
        - Values ``fun`` closes over are constants of the recording.
        - Python side effects happen only while tracing.
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
        traced = any(isinstance(v, Tensor) and v.is_traced for v in leaves)
        key = None if traced else (treedef, statics, skw, _signature(leaves, who))
        return dyn, dkw, statics, skw, leaves, key

    def compile_for(dyn, dkw, statics, skw):
        n = len(dyn) + len(statics)
        static_at = dict(statics)
        kw_static = dict(skw)

        def call(d, k):
            it = iter(d)
            full = [static_at[i] if i in static_at else next(it) for i in range(n)]
            return fun(*full, **k, **kw_static)

        out, tape = trace(call)(dyn, dkw)
        return out, tape, Program(tape)

    def run(prog, leaves):
        arrays = [v._concrete() if isinstance(v, Tensor) else Tensor(v)._array for v in leaves]
        # tg.profile: the whole compiled call is one entry (its fused kernels have no op edges)
        outs = prog(arrays) if not _PROFILING[0] else _profiler.timed(who, "forward", prog)(arrays)
        res = [const(o) if not isinstance(o, Tensor) else o for o in outs]
        return tree_unflatten(prog.tape.out_treedef, res)

    def jitted(*args, **kwargs):
        dyn, dkw, statics, skw, leaves, key = prepare(args, kwargs)
        if key is None:  # an outer transform traces this call: run fun for it to see
            return fun(*args, **kwargs)
        with cache.lock:
            progs = cache.entries.get(key)
            if progs is not None:
                cache.entries.move_to_end(key)
        for prog in progs or ():
            try:
                return run(prog, leaves)
            except GuardError:
                continue  # a Python decision flipped: another branch's program, or a new one
        out, tape, prog = compile_for(dyn, dkw, statics, skw)
        with cache.lock:
            branches = cache.entries.setdefault(key, [])
            branches.append(prog)
            if len(branches) > _MAX_BRANCHES:  # guards flipping on every call: keep the newest
                del branches[0]
            cache.entries.move_to_end(key)
            while len(cache.entries) > cache.size:
                cache.entries.popitem(last=False)
        return out

    def lower(*args, **kwargs):
        dyn, dkw, statics, skw, leaves, key = prepare(args, kwargs)
        if key is None:
            raise TypeError(f"{who}.lower: the arguments are traced by an outer transform")
        progs = cache.entries.get(key)
        if progs:
            return progs[-1]
        _, _, prog = compile_for(dyn, dkw, statics, skw)
        with cache.lock:
            cache.entries.setdefault(key, []).append(prog)
        return prog

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
