"""The compiled tape: :class:`Program`.

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

A step whose op is a ufunc, or declares the function of arrays it computes (``array_fn``:
matrix products, sums, index reads), calls that function directly on the CPU: no context, no
per-call checks (the inputs' shapes and dtypes are the recorded ones).

What the planning may assume about each op is its :class:`~tapegrad.core.function.Traits`.
``Tape.replay`` and :func:`tapegrad.jit` run programs.
"""

from __future__ import annotations

import itertools
import threading

import numpy as np

from tapegrad.core import backend as _backend
from tapegrad.core import dtypes as _dtypes
from tapegrad.core import fusion as _fusion
from tapegrad.core.function import (
    Context,
    _state,
    plain_arrays,
    run_primitive,
    transform_scope,
    widened_forward,
)
from tapegrad.core.subprogram import SubProgram
from tapegrad.core.tensor import Tensor, const
from tapegrad.core.trace import (
    Guard,
    GuardError,
    _check_outputs,
    _loaded_failure,
    check_guard,
    interpret,
)

__all__ = ["Program"]

_COMPILE_LOCK = threading.Lock()  # a fused program's first run compiles its kernels


def _hashable(v) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


def _fused(v):
    """A step's parameter that is a sub-program, or a tuple of them (branches), fused."""
    if isinstance(v, SubProgram):
        return v.fused()
    if type(v) is tuple and v and all(isinstance(x, SubProgram) for x in v):
        return tuple(x.fused() for x in v)
    return v


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
        return run_primitive(fn, arrays, arrays, params, (False,) * len(arrays),
                             plain_arrays(arrays), False).outs
    values = [const(a) if hasattr(a, "shape") and type(a) is not np.ndarray
              and not isinstance(a, (np.generic, np.dtype)) else a for a in arrays]
    return run_primitive(fn, values, arrays, params, (False,) * len(arrays), False, False).outs


def _array_step(dev: str):
    """The step of :func:`~tapegrad.core.tape.interpret` that runs an entry on arrays on ``dev``."""
    def step(e, args):
        return _run_step(e.fn, e.params, [_const_array(a) for a in args], dev)

    return step


def _widens(step, avals) -> bool:
    """Whether ``step`` runs on bfloat16 inputs that its op computes in float32 (see
    :func:`~tapegrad.core.function.widened_forward`): known from the recorded dtypes, so a
    program without bfloat16 values pays nothing for them."""
    if getattr(step.fn, "bfloat16_native", True):  # (a fused kernel takes no bfloat16)
        return False
    bf16 = _dtypes.bfloat16
    return any((avals[v][1] if k == "v" else getattr(v, "dtype", None)) == bf16
               for k, v in step.ins)



def _last_uses(steps) -> dict:
    """``{node: index of the last step reading it}`` over a program's steps (a guard reads
    its node)."""
    last: dict = {}
    for i, s in enumerate(steps):
        for n in ([s.node] if type(s) is Guard else [v for k, v in s.ins if k == "v"]):
            last[n] = i
    return last

class Program:
    """A :class:`~tapegrad.Tape` compiled into one straight-line Python function.

    Built by :func:`jit` (``jitted.lower(*args)`` returns it) and by ``Tape.replay``. Calling it
    with the input arrays (in the tape's flattened input order, of the recorded shapes and
    dtypes) returns the output arrays; ``str(program)`` lists it one line per primitive call,
    after dead-code elimination, constant folding, common-subexpression elimination and buffer
    planning (a line ``... into x`` writes its result into ``x``'s buffer, which dies there).
    A program built for ``jit(f, fuse=True)`` computes its first run unfused, one step at a
    time, and compiles its fused kernels on that run's arguments; later runs call them.

    Attributes:
        tape: The tape it was compiled from.
        source: The generated Python source.
        steps: Number of primitive calls left after the optimisations.
        folded, merged, dropped: How many entries constant folding, common-subexpression
            elimination and dead-code elimination removed.
        fused: How many transposes the layout pass removed (cancelled, or computed by the
            product that fed them).
        groups: The :class:`~tapegrad.core.fusion.FusedGroup` records of a program built for
            ``jit(f, fuse=True)``: each runs a region of elementwise steps as one native kernel
            (a line ``fused[op op ...]`` in the listing); empty otherwise.

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

    def __init__(self, tape, keep_inputs: bool = True, fuse: bool = False):
        self.tape = tape
        self._fuse = fuse
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
            effect = e.fn.traits.effect  # run at every call, as written: never folded or merged
            if all(kind == "c" for kind, _ in ins) and not effect:  # constant folding
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
            if not effect and _hashable(tuple(e.params.items())):
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
            elif any(n in needed for n in s.outs) or s.fn.traits.effect:
                if s.fn.traits.prune is not None and not all(n in needed for n in s.outs):
                    self._prune(s, needed)
                needed.update(v for k, v in s.ins if k == "v")
                live_steps.append(s)
        live_steps.reverse()
        self.dropped = len(steps) - len(live_steps)
        self._steps, self._outputs = live_steps, outputs
        self.groups: list = []
        if self._fuse:  # elementwise regions as native kernels (tapegrad.core.fusion)
            for s in live_steps:  # and so are those of the sub-programs a step runs
                if type(s) is not Guard and any(isinstance(v, (SubProgram, tuple))
                                                for v in s.params.values()):
                    s.params = {k: _fused(v) for k, v in s.params.items()}
            self._live = live_steps
            self._steps, self.groups = _fusion.fuse(live_steps, outputs, tape.avals, _Step)
        self._cold = bool(self.groups)  # kernels compile at the first run
        self._plan(tape)

    @staticmethod
    def _prune(s: _Step, needed: set) -> None:
        """Drop the outputs of step ``s`` that nothing reads, where its op can compute fewer
        (``Traits.prune``)."""
        got = s.fn.traits.prune(s.params, tuple(n in needed for n in s.outs))
        if got is not None:
            s.params, kept = got
            s.outs = [s.outs[i] for i in kept]
            s.avals = [s.avals[i] for i in kept]

    def _first_run(self, arrays, dev: str) -> tuple:
        """The first run of a fused program: its steps one by one, unfused, then (on the CPU)
        each kernel compiled on its own arguments from that run. A kernel numba cannot compile
        leaves its group's steps as NumPy calls: the steps are fused again without it, and
        planned anew. Returns the output arrays."""
        live = self._live
        last = _last_uses(live)
        keep = {v for k, v in self._outputs if k == "v"}
        env = dict(zip(self.tape.in_nodes, arrays))
        for i, s in enumerate(live):
            if type(s) is Guard:
                check_guard(s, env[s.node], "jit")
                continue
            ins = {v for k, v in s.ins if k == "v"}
            outs = _run_step(s.fn, s.params, [env[v] if k == "v" else v for k, v in s.ins], dev)
            env.update(zip(s.outs, outs))
            for n in ins:  # kernels read small values only: keep those for compiling
                big = getattr(env[n], "size", 0) > _fusion.MAX_SIZE
                if big and last[n] == i and n not in keep:
                    del env[n]
        result = tuple(env[v] if k == "v" else v for k, v in self._outputs)
        if dev != "cpu":  # kernels run on NumPy arrays: this program runs unfused here
            return result
        with _COMPILE_LOCK:  # (no user code runs while it is held)
            while self._cold:
                fused = [s for s in self._steps
                         if type(s) is not Guard and type(s.fn) is _fusion.FusedGroup]
                made = {n for s in fused for n in s.outs}  # a kernel's outputs: new C arrays
                ok = True
                for s in fused:
                    args = [(np.array(env[v], order="C") if v in made else env[v])
                            if k == "v" else v for k, v in s.ins]
                    ok = s.fn.compile(args) and ok
                if ok:
                    self._cold = False
                    self.__dict__.pop("_fns", None)  # (a source from before, in debug_nans)
                    break
                for s in live:  # fuse again without the kernels numba could not compile
                    if type(s) is not Guard:
                        s.out_into = None
                steps, groups = _fusion.fuse(live, self._outputs, self.tape.avals, _Step)
                self._steps, self.groups = steps, groups
                self._plan(self.tape)
                self.__dict__.pop("_fns", None)
                self._cold = bool(groups)
        return result

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
        last = _last_uses(steps)
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
                    and "into" not in s.params and not _widens(s, tape.avals)):
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
        for forwards, contexts, parameter dicts, constants, guards and constant outputs, and
        ``U3``/``D3`` for the ufuncs and array functions steps call directly. Nothing
        from the tape (an op's label, a parameter's name or value, a node id, a label, a dtype)
        is ever written into the text: every such value reaches the program through its
        globals, and parameters are passed as ``**P3``.
        """
        g, ins, lines, outs = self._statements(device)
        return "\n".join([f"def program({', '.join(ins)}):", *lines,
                          f"    return ({', '.join(outs)}{',' if len(outs) == 1 else ''})"]), g

    def _statements(self, device: str, keep_inputs: bool = False):
        """The program's body for :meth:`_source` and :meth:`loop`: its globals, the names of
        its inputs, its statements (indented once) and the expressions of its outputs. With
        ``keep_inputs``, no statement deletes an input's name (a loop's next iteration reads
        its constants and carries by the same names)."""
        xp = _backend.get_backend(device)
        g = {"_guard": check_guard, "_asarray": xp.asarray, "_tuple": tuple,
             "_seq": (tuple, list)}

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
        inputs = set(self.tape.in_nodes) if keep_inputs else ()
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
                    lines.append(f"    {outs[:-1]} = {call}")
                elif (direct := self._direct(s, device)) is not None:
                    g[f"D{j}"] = direct  # the array function itself: no context, no checks
                    lines.append(f"    {outs[:-1]} = D{j}({', '.join(args)})")
                    if s.avals[0][0] == ():  # a NumPy scalar: a 0-d array
                        lines.append(f"    {outs[:-1]} = _asarray({outs[:-1]})")
                elif type(s.fn) is _fusion.FusedGroup and device == "cpu":
                    g[f"F{j}"] = s.fn.call  # the kernel itself: its outputs, no context
                    call = f"F{j}({', '.join(args)})"
                    lines.append(f"    {outs[:-1] if len(s.outs) == 1 else outs} = {call}")
                    if s.fn.reduced is not None:  # a trailing reduction's output, made flat
                        g[f"S{j}"] = s.fn.reduced
                        red = name(s.outs[-1])
                        lines.append(f"    {red} = {red}.reshape(S{j})")
                else:
                    n_in = len(s.ins)
                    cls = ctx_classes.get(n_in)
                    if cls is None:
                        attrs = {"needs_input_grad": (False,) * n_in}
                        if device != "cpu":
                            attrs.update(device=device, backend=xp)  # pyright: ignore[reportArgumentType]
                        cls = ctx_classes[n_in] = type(f"_Ctx{n_in}", (Context,), attrs)
                        g[f"C{n_in}"] = cls
                    g[f"F{j}"] = (widened_forward(s.fn) if _widens(s, self.tape.avals)
                                  else s.fn.forward)
                    kw = ""
                    if s.params:  # by name, from a dict: no parameter name enters the source
                        g[f"P{j}"] = dict(s.params)
                        kw += f", **P{j}"
                    if s.out_into is not None:  # the forward writes into the dying buffer
                        kw += f", into={name(s.out_into)}"
                    call = f"F{j}({', '.join([f'C{n_in}()', *args])}{kw})"
                    if len(s.outs) == 1:  # one output, given alone or as a 1-tuple (split)
                        lines.append(f"    {outs[:-1]} = {call}")
                        lines.append(f"    if type({outs[:-1]}) in _seq: {outs} = {outs[:-1]}")
                    else:
                        lines.append(f"    {outs} = {call}" if s.outs else f"    {call}")
                    for n, (shape, _) in zip(s.outs, s.avals):
                        if shape == ():  # a NumPy scalar from a reduction: a 0-d array
                            lines.append(f"    {name(n)} = _asarray({name(n)})")
            dead = [n for n in self._frees.get(i, ()) if n not in inputs]
            if dead:
                lines.append(f"    del {', '.join(name(n) for n in dead)}")
        outs = []
        for j, (k, v) in enumerate(self._outputs):
            if k == "v":
                outs.append(name(v))
            else:
                g[f"O{j}"] = constant(v)
                outs.append(f"O{j}")
        return g, ins, lines, outs

    def loop(self, device: str, n_carry: int, n_xs: int, n_save: int):
        """This program as the body of a loop, generated as one Python function: the loop
        itself is code, the carries live in local variables and each iteration's rows are
        read and written inline (no call, packing or unpacking per iteration).

        The program's inputs are ``n_carry`` carries, ``n_xs`` per-iteration rows, then
        constants; its outputs the ``n_carry`` new carries, then per-iteration outputs. The
        function returned takes ``(order, *carries, *xs, *constants, *ys, *saved)``: for each
        ``i`` of the iterable ``order`` it writes the carries into ``saved[j][i]`` (the first
        ``n_save`` of them), runs the body on the carries, the rows ``xs[j][i]`` and the
        constants, writes its other outputs into ``ys[j][i]``, and carries on with its new
        carries; it returns the last carries (a tuple). Compiled once per arguments."""
        key = ("loop", device, n_carry, n_xs, n_save)
        cache = self.__dict__.setdefault("_fns", {})
        fn = cache.get(key)
        if fn is not None:
            return fn
        g, ins, lines, outs = self._statements(device, keep_inputs=True)
        carry, xs, consts = ins[:n_carry], ins[n_carry:n_carry + n_xs], ins[n_carry + n_xs:]
        n_ys = len(outs) - n_carry
        args = (["_order"] + [f"_c{j}" for j in range(n_carry)] + [f"_x{j}" for j in range(n_xs)]
                + [f"_k{j}" for j in range(len(consts))] + [f"_y{j}" for j in range(n_ys)]
                + [f"_s{j}" for j in range(n_save)])
        src = [f"def loop({', '.join(args)}):"]
        src += [f"    {v} = _c{j}" for j, v in enumerate(carry)]
        src += [f"    {v} = _k{j}" for j, v in enumerate(consts)]
        src.append("    for _i in _order:")
        src += [f"        _s{j}[_i] = {carry[j]}" for j in range(n_save)]
        src += [f"        {v} = _x{j}[_i]" for j, v in enumerate(xs)]
        src += ["    " + line for line in lines]
        src += [f"        _y{j}[_i] = {outs[n_carry + j]}" for j in range(n_ys)]
        if n_carry:  # (one assignment: a body may swap its carries)
            src.append(f"        {', '.join(carry)}, = {', '.join(outs[:n_carry])},")
        src.append(f"    return ({', '.join(carry)}{',' if n_carry == 1 else ''})")
        exec(compile("\n".join(src), f"<tapegrad loop {id(self):x}>", "exec"), g)  # noqa: S102
        fn = cache[key] = g["loop"]
        return fn

    def _direct(self, s: _Step, device: str):
        """The function of arrays step ``s`` is on ``device``, called without a context: the
        ufunc of an op that is one (without parameters), or its ``array_fn`` trait's function
        for its parameters; None where the step runs through its ``forward`` (another device,
        several outputs, a write into a dying buffer, bfloat16 inputs it widens). The program's
        inputs have the recorded shapes and dtypes, so the checks ``forward`` makes hold."""
        if device != "cpu" or len(s.outs) != 1 or s.out_into is not None \
                or _widens(s, self.tape.avals):
            return None
        traits = s.fn.traits
        if traits.ufunc is not None and not s.params:
            return getattr(np, traits.ufunc)
        if traits.array_fn is not None:
            return traits.array_fn(**s.params)
        return None

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
        if self._cold and not _state.debug:  # a fused program's first run compiles kernels
            with transform_scope():
                return self._first_run(arrays, dev)
        if self._unchecked:  # a tape from a file: its entries run as written first, checked
            self._check(arrays, dev)  # (before its source is made from their parameters)
            self._unchecked = False
        fn = self._compiled(dev)
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
