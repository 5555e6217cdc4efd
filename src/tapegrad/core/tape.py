"""The frozen, explicit :class:`Tape`: what a transform recorded, as an immutable value.

A tape holds its entries (:class:`~tapegrad.core.trace.TapeEntry` and
:class:`~tapegrad.core.trace.Guard`) in execution order (a topological order). It can be printed
(one line per entry, like a jaxpr), drawn, replayed forward on new inputs (compiled once into a
:class:`~tapegrad.core.program.Program`) and replayed backward with a cotangent, any number of times
and from many threads; it is written to and read from files (:mod:`tapegrad.core.export`) and its
memory is a property of the program (:mod:`tapegrad.core.memory`).
"""

from __future__ import annotations

import shutil
from typing import Any

import attrs
import numpy as np

from tapegrad.core import export as _export
from tapegrad.core import function as _function
from tapegrad.core import profiler as _profiler
from tapegrad.core.memory import residual_report
from tapegrad.core.program import Program
from tapegrad.core.tensor import Tensor, const
from tapegrad.core.trace import (  # noqa: F401  (TapeEntry, Guard, GuardError, Trace: re-exported)
    Guard,
    GuardError,
    TapeEntry,
    Trace,
    _fmt_aval,
    _seed_cotangents,
    _show,
    apply_step,
    backward_pass,
    interpret,
)
from tapegrad.core.tree import tree_flatten, tree_unflatten

__all__ = ["Tape", "TapeEntry", "Guard", "GuardError", "freeze"]

_PROFILING = _profiler.PROFILING  # nonzero while a tg.profile block is open (in any thread)


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


def _sub_listings(params: dict) -> list:
    """The listing lines of the sub-programs a control-flow entry holds (a parameter value, or
    a tuple of them, with a ``sub_program`` Tape), indented under the entry, like a jaxpr's."""
    lines = []
    for k, v in params.items():
        subs = v if isinstance(v, tuple) else (v,)
        for j, sub in enumerate(subs):
            t = getattr(sub, "sub_program", None)
            if isinstance(t, Tape):
                label = k if not isinstance(v, tuple) else f"{k}[{j}]"
                lines.append(f"      {label} = " + str(t).replace("\n", "\n      "))
    return lines


def _short_const(c) -> str:
    if isinstance(c, Tensor):
        if c.size == 1:
            return f"{c._concrete().reshape(()).item():g}"
        return f"const:{_fmt_aval((c.shape, c.dtype))}"
    return _short(c)


def freeze(trace, in_nodes, in_treedef, out_refs, out_avals, out_treedef) -> Tape:
    """The immutable :class:`Tape` of what ``trace`` (a finished
    :class:`~tapegrad.core.trace.Trace`) recorded."""
    return Tape(
        entries=tuple(trace.entries),
        in_nodes=tuple(in_nodes),
        in_avals=tuple(trace.avals[n] for n in in_nodes),
        in_treedef=in_treedef,
        out_refs=tuple(out_refs),
        out_avals=tuple(out_avals),
        out_treedef=out_treedef,
        avals=tuple(trace.avals),
        labels=dict(trace.labels),
        level=trace.level,
    )


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
            lines.extend(_sub_listings(e.params))
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
        the first time (:class:`tapegrad.core.program.Program`): none of the traced function's
        Python.
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
        if prog is None:  # compiled once (core.program.Program), then run on every replay
            prog = Program(self)
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
        interpret(self.entries, env, apply_step, "Tape.replay",
                  self.avals if self.loaded else None)
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
            A :class:`tapegrad.core.memory.ResidualReport`.

        Raises:
            ValueError: for a tape loaded from a file (it holds no residuals).
        """
        self._residuals("Tape.residual_bytes")
        return residual_report(self)

    def to_json(self, arrays=None) -> str:
        """The tape as JSON text, with no pickle: primitives, static parameters, shapes,
        dtypes, guards (:func:`tapegrad.core.export.tape_to_json` has the details).

        Args:
            arrays: Path of the safetensors file for the tape's constant arrays (str or
                path-like), or None when the tape holds none.

        Returns:
            The JSON text (a str); :meth:`from_json` loads it back.

        Raises:
            ValueError: if the tape holds constant arrays and ``arrays`` is None, or holds a
                parameter with no file form (a Python function, such as ``checkpoint``'s body),
                naming the entry and parameter.

        Example:
            >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
            >>> _, tape = tg.trace(lambda x: tnp.sum(tnp.sin(x) * 2.0))(tg.Tensor(np.ones(3)))
            >>> again = tg.Tape.from_json(tape.to_json())
            >>> str(again) == str(tape)
            True
        """
        return _export.tape_to_json(self, arrays)

    @staticmethod
    def from_json(text, arrays=None) -> Tape:
        """Load a tape written by :meth:`to_json`, as data: nothing in it runs or is imported
        (:func:`tapegrad.core.export.tape_fields` has the details). The loaded tape prints, replays
        and compiles like the original; its first replay checks each entry against the file.
        It holds no residuals: differentiate its replay (``tg.vjp(tape.replay, x)``).

        Args:
            text: The JSON text (str or bytes).
            arrays: Path of the safetensors file the JSON names, when it names one.

        Returns:
            A :class:`Tape` (``loaded=True``).

        Raises:
            TypeError: if ``text`` is not a str or bytes.
            ValueError: for a malformed or inconsistent file, naming what is wrong.
        """
        return Tape(**_export.tape_fields(text, arrays, _loaded_tape), loaded=True)

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


def _loaded_tape(fields: dict) -> Tape:
    """A sub-program's tape read from a file (:func:`tapegrad.core.export.tape_fields`)."""
    return Tape(**fields, loaded=True)
