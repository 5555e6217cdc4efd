"""Where the time goes: :func:`profile` times every op the engine runs inside a ``with`` block.

The engine's call sites (a primitive's forward rule, its backward rule, its forward-mode tangent
rule, a jitted call) test one module-level counter, :data:`PROFILING`, which is nonzero only
while some ``with profile()`` block is open in some thread; only then do they look up the
block of their own context (a :class:`contextvars.ContextVar`), so a profile sees the work of
the thread (or asyncio task) that opened it and nothing else, and costs nothing when no block
is open.
"""

from __future__ import annotations

import contextvars
import json
import os
import tempfile
import threading
import time
from typing import Any, NamedTuple

__all__ = ["profile", "Profile", "OpStats", "Event", "PROFILING", "BACKWARD_PASS"]

#: How many ``with profile()`` blocks are open, in all threads together: the engine's call
#: sites test ``PROFILING[0]`` (a list, so that modules read it without an attribute lookup).
PROFILING = [0]
_PROFILING_LOCK = threading.Lock()

_PHASES = ("forward", "backward", "jvp")


class OpStats(NamedTuple):
    """What one op cost in one phase, summed over its calls.

    Attributes:
        op: The op's name (its ``oper`` label, as on tape listings), or ``jit(f)`` for a
            call of a jitted function ``f``.
        phase: ``"forward"`` (the op's forward rule), ``"backward"`` (its backward rule, the
            ops the rule runs included) or ``"jvp"`` (its forward-mode tangent rule, likewise).
        calls: How many times it ran.
        total_s: Wall time in seconds, from start to end of each call, summed.
        self_s: ``total_s`` less the time of the ops timed inside these calls (a control-flow
            op's body, a jitted call's first trace), so the ``self_s`` of all rows add up to
            the time spent in ops.
    """

    op: str
    phase: str
    calls: int
    total_s: float
    self_s: float

    @property
    def mean_s(self) -> float:
        """Mean wall time of one call, in seconds."""
        return self.total_s / self.calls if self.calls else 0.0


class Event(NamedTuple):
    """One timed call, as the Chrome trace shows it.

    Attributes:
        op: The op's name.
        phase: ``"forward"``, ``"backward"`` or ``"jvp"``.
        start_ns: Start, in nanoseconds of :func:`time.perf_counter_ns`.
        duration_ns: Wall time of the call, in nanoseconds.
        thread: The identifier of the thread that ran it (:func:`threading.get_ident`).
    """

    op: str
    phase: str
    start_ns: int
    duration_ns: int
    thread: int


_new_event = tuple.__new__  # an Event without NamedTuple's argument handling


class _Stack:
    """The calls being timed in one context: the open spans (each holding the time of the
    calls timed inside it), how many derivative rules are running (their ops belong to the
    rule) and how many backward passes (the ops a pass runs between rules belong to it)."""

    __slots__ = ("spans", "rule_depth", "pass_depth")

    def __init__(self):
        self.spans: list = []
        self.rule_depth = 0
        self.pass_depth = 0


class _Session(NamedTuple):
    profiles: tuple  # the open profiles of this context, outermost first
    stack: _Stack


_SESSION: contextvars.ContextVar[_Session | None] = contextvars.ContextVar(
    "tapegrad_profile", default=None
)


class Profile:
    """The record of one ``with tg.profile() as p:`` block (see :func:`profile`).

    Read it during or after the block: ``print(p)`` (or :meth:`table`) shows one row per op and
    phase, sorted by total time; :attr:`stats` has the same numbers as data; :attr:`events` every
    timed call; :meth:`export_chrome_trace` writes them for chrome://tracing or Perfetto.
    """

    def __init__(self):
        self._stats: dict = {}  # (op, phase) -> [calls, total_ns, self_ns]
        self._events: list = []
        self._start_ns: int | None = None
        self._end_ns: int | None = None
        self._token: Any = None

    # -- the block ------------------------------------------------------------------------
    def __enter__(self) -> Profile:
        if self._start_ns is not None:
            raise RuntimeError("profile: this Profile has already been used; call "
                               "tg.profile() again for a new block")
        outer = _SESSION.get()
        stack = outer.stack if outer is not None else _Stack()
        profiles = (outer.profiles if outer is not None else ()) + (self,)
        with _PROFILING_LOCK:
            PROFILING[0] += 1
        self._token = _SESSION.set(_Session(profiles, stack))
        self._start_ns = time.perf_counter_ns()
        return self

    def __exit__(self, *exc) -> bool:
        self._end_ns = time.perf_counter_ns()
        try:
            _SESSION.reset(self._token)
        finally:
            with _PROFILING_LOCK:
                PROFILING[0] -= 1
        return False

    def _add(self, op: str, phase: str, start: int, duration: int, self_ns: int, tid: int):
        key = (op, phase)
        row = self._stats.get(key)
        if row is None:
            self._stats[key] = [1, duration, self_ns]
        else:
            row[0] += 1
            row[1] += duration
            row[2] += self_ns
        self._events.append(_new_event(Event, (op, phase, start, duration, tid)))

    # -- results --------------------------------------------------------------------------
    @property
    def wall_s(self) -> float:
        """Wall time of the block in seconds (so far, while it is still open)."""
        if self._start_ns is None:
            return 0.0
        end = self._end_ns if self._end_ns is not None else time.perf_counter_ns()
        return (end - self._start_ns) / 1e9

    @property
    def stats(self) -> dict:
        """``{(op, phase): OpStats}``, largest total time first (a new dict on each read)."""
        rows = [OpStats(op, phase, n, total / 1e9, own / 1e9)
                for (op, phase), (n, total, own) in self._stats.items()]  # fmt: skip
        rows.sort(key=lambda r: (-r.total_s, r.op, r.phase))
        return {(r.op, r.phase): r for r in rows}

    @property
    def events(self) -> tuple:
        """Every timed call, as :class:`Event` records, in the order they ended."""
        return tuple(self._events)

    def table(self, sort_by: str = "total", limit: int | None = None) -> str:
        """The statistics as a text table, one row per op and phase.

        Args:
            sort_by: ``"total"`` (total time, the default), ``"self"`` (self time) or
                ``"calls"``; largest first.
            limit: Show at most this many rows (the largest).

        Returns:
            The table, ending with the block's wall time and the share of it spent in ops.

        Raises:
            ValueError: for another ``sort_by`` or a negative ``limit``.
        """
        keys = {"total": lambda r: r.total_s, "self": lambda r: r.self_s,
                "calls": lambda r: r.calls}  # fmt: skip
        if sort_by not in keys:
            raise ValueError(f"Profile.table: sort_by must be one of {sorted(keys)}, got "
                             f"{sort_by!r}")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                  or limit < 0):
            raise ValueError(f"Profile.table: limit must be a non-negative int or None, got "
                             f"{limit!r}")
        rows = sorted(self.stats.values(), key=lambda r: (-keys[sort_by](r), r.op, r.phase))
        in_ops = sum(r.self_s for r in rows)
        shown = rows if limit is None else rows[:limit]
        head = ["op", "phase", "calls", "total ms", "self ms", "mean us", "self %"]
        body = [[r.op, r.phase, str(r.calls), f"{r.total_s * 1e3:.3f}", f"{r.self_s * 1e3:.3f}",
                 f"{r.mean_s * 1e6:.1f}", f"{100 * r.self_s / in_ops:.1f}%" if in_ops else "-"]
                for r in shown]  # fmt: skip
        widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h)
                  for i, h in enumerate(head)]  # fmt: skip

        def line(cells):
            return "  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                             for i, (c, w) in enumerate(zip(cells, widths))).rstrip()  # fmt: skip

        out = [line(head), line(["-" * w for w in widths]), *(line(row) for row in body)]
        if len(shown) < len(rows):
            out.append(f"... {len(rows) - len(shown)} more rows")
        wall = self.wall_s
        share = f" ({100 * in_ops / wall:.0f}%)" if wall > 0 else ""
        out.append(f"wall time {wall * 1e3:.3f} ms; in ops {in_ops * 1e3:.3f} ms{share}")
        return "\n".join(out)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        state = "open" if self._end_ns is None and self._start_ns is not None else "closed"
        calls = sum(n for n, _, _ in self._stats.values())
        return f"<Profile ({state}): {calls} calls of {len(self._stats)} ops and phases>"

    def export_chrome_trace(self, path) -> str:
        """Write the timed calls as a Chrome trace (JSON trace event format) to ``path``.

        Open it in chrome://tracing or https://ui.perfetto.dev: each call is a complete
        (``"X"``) event named after its op, in the category of its phase, on the thread that
        ran it; a call inside another (a control-flow body, a jitted call's trace) nests under
        it. Times are microseconds from the start of the block. The file is written to a
        temporary file beside ``path`` and renamed over it, so a reader never sees half of it.

        Args:
            path: The file to write (``str`` or path-like), conventionally ``*.json``.

        Returns:
            The path written, as a string.

        Raises:
            OSError: if the file cannot be written (the directory is left as it was).
        """
        path = os.fspath(path)
        t0 = self._start_ns or 0
        pid = os.getpid()
        events: list = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                         "args": {"name": "tapegrad"}}]  # fmt: skip
        for tid in sorted({e.thread for e in self._events}):
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                           "args": {"name": f"thread {tid}"}})  # fmt: skip
        for e in self._events:
            events.append({"name": e.op, "cat": e.phase, "ph": "X", "pid": pid,
                           "tid": e.thread, "ts": (e.start_ns - t0) / 1e3,
                           "dur": e.duration_ns / 1e3, "args": {"phase": e.phase}})  # fmt: skip
        text = json.dumps({"traceEvents": events, "displayTimeUnit": "ms"})
        folder = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                                   dir=folder)  # fmt: skip
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return path


def profile() -> Profile:
    """Time every op run inside a ``with`` block: ``with tg.profile() as p: ...; print(p)``.

    Each call of an op is timed (wall time, :func:`time.perf_counter_ns`) in its phase:

    - ``forward``: the op's forward rule, on arrays (eager calls, and the forward pass of
      ``grad``, ``vjp``, ``jvp``, ``vmap``, ``trace``);
    - ``backward``: the op's backward rule, together with the ops the rule is made of (they are
      not rows of their own: a backward pass shows as the backward rows of the ops it
      differentiates), and one ``(backward pass)`` row per pass, whose self time is the work
      between the rules (adding up the cotangents of a value used several times). Under
      ``grad(grad(f))`` the inner gradient's backward pass runs inside the outer forward
      pass; it and the outer one count as backward;
    - ``jvp``: the op's forward-mode tangent rule (``jvp``, ``jacfwd``, ``hessian``), likewise.

    A call of a jitted function is one ``forward`` row named ``jit(f)``: its compiled program
    runs with no op boundaries to time (as fused kernels, with ``fuse=True``). Its first call
    for new shapes traces ``f`` and compiles it, and those ops show as rows of their own.

    The profile sees the thread (or asyncio task) that opened it: ops that other threads run
    meanwhile are not recorded, not even those of threads started inside the block. Blocks
    nest; an inner block's calls are recorded by the outer one too. While no block is open
    the engine pays one integer test per op.

    Returns:
        A :class:`Profile` to use as a context manager; read it during or after the block.

    Raises:
        RuntimeError: entering the same :class:`Profile` twice.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> def f(x):
        ...     return (tnp.sin(x) + tnp.sin(2.0 * x) + tnp.sin(3.0 * x)).sum()
        >>> with tg.profile() as p:
        ...     g = tg.grad(f)(tg.Tensor([0.5, 1.0]))
        >>> p.stats["sin", "forward"].calls, p.stats["sin", "backward"].calls
        (3, 3)
        >>> print(p.table(limit=2))  # doctest: +SKIP
    """
    return Profile()


# -- the engine's side: called only while PROFILING[0] is nonzero -----------------------------
def _name_of(fn) -> str:
    name = getattr(fn, "_name", None)
    return name() if name is not None else str(fn)


#: The row of a backward pass itself: its ``self_s`` is the work between the rules (adding up
#: the cotangents of a value used several times, reducing them to the input's shape).
BACKWARD_PASS = "(backward pass)"


def forward_call(fn, func, *args):
    """``func(*args)`` (a forward rule of op ``fn``, a Function class), timed as its
    ``forward`` when a profile is open in this context and no derivative rule or backward pass
    owns it: :func:`timed` without a wrapper per call."""
    session = _SESSION.get()
    if session is None:
        return func(*args)
    stack = session.stack
    if stack.rule_depth or stack.pass_depth:
        return func(*args)
    spans = stack.spans
    span = [0]  # time of the calls timed inside this one
    spans.append(span)
    start = time.perf_counter_ns()
    try:
        return func(*args)
    finally:
        end = time.perf_counter_ns()
        spans.pop()
        duration = end - start
        if spans:
            spans[-1][0] += duration
        op = fn._name()
        tid = _thread_id()
        for p in session.profiles:
            p._add(op, "forward", start, duration, duration - span[0], tid)


_thread_id = threading.get_ident


def timed(fn, phase: str, func):
    """``func``, or a wrapper that times it as op ``fn``'s ``phase`` when a profile is open in
    this context (``fn``: a Function class, or the name of the op or of a jitted call).

    ``phase`` is ``"forward"`` (a forward rule, a jitted call), ``"backward"`` or ``"jvp"``
    (a derivative rule: timed with the ops it runs, which are not timed apart) or ``"pass"``
    (a backward pass: the rules it runs are timed, the ops between them belong to the pass,
    whose row is :data:`BACKWARD_PASS`, phase ``"backward"``).
    """
    session = _SESSION.get()
    if session is None:
        return func
    stack = session.stack
    if stack.rule_depth or (phase == "forward" and stack.pass_depth):
        return func
    if phase == "pass":
        op, phase, depth = BACKWARD_PASS, "backward", "pass_depth"
    else:
        op = fn if isinstance(fn, str) else _name_of(fn)
        depth = None if phase == "forward" else "rule_depth"

    def timed_call(*args, **kwargs):
        spans = stack.spans
        span = [0]  # time of the calls timed inside this one
        spans.append(span)
        if depth is not None:
            setattr(stack, depth, getattr(stack, depth) + 1)
        start = time.perf_counter_ns()
        try:
            return func(*args, **kwargs)
        finally:
            end = time.perf_counter_ns()
            if depth is not None:
                setattr(stack, depth, getattr(stack, depth) - 1)
            spans.pop()
            duration = end - start
            if spans:
                spans[-1][0] += duration
            tid = _thread_id()
            for p in session.profiles:
                p._add(op, phase, start, duration, duration - span[0], tid)

    return timed_call
