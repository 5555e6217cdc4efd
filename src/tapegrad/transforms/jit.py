"""``jit``: trace a function once per input signature and run its compiled :class:`Program`.

``jit(fun)`` traces ``fun`` once per input signature into a :class:`~tapegrad.core.program.Program`
(the tape compiled into straight-line code: dead code dropped, constants folded, repeated
subexpressions merged, transposes laid out, buffers planned) and runs the program afterwards;
``jitted.lower(*args)`` returns the program for inspection.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections import OrderedDict
from typing import Any

import numpy as np

from tapegrad.core import backend as _backend
from tapegrad.core import profiler as _profiler
from tapegrad.core._keywords import strict_keywords
from tapegrad.core.function import new_level, transform_scope
from tapegrad.core.program import Program, _hashable
from tapegrad.core.tape import freeze
from tapegrad.core.tensor import Tensor, const
from tapegrad.core.trace import GuardError, Trace
from tapegrad.core.tree import tree_flatten, tree_map, tree_unflatten
from tapegrad.core.weak import WIDE, WeakScalar
from tapegrad.transforms.reverse import as_primal, lower_output

__all__ = ["jit", "Program", "implicit_state"]  # Program: re-exported from tapegrad.core.program

_PROFILING = _profiler.PROFILING  # nonzero while a tg.profile block is open (in any thread)


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


def _record(call, args: tuple, who: str, static_numbers: bool = False, fuse: bool = False):
    """Trace ``call(*args)`` for ``jit``: Python number leaves as :class:`WeakScalar` inputs
    (or, with ``static_numbers``, as themselves: the program is then for these values), the
    state of stateful objects as implicit inputs and outputs; with ``fuse``, the program's
    elementwise regions run as native kernels (:mod:`tapegrad.core.fusion`).

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
    tape = freeze(trace, in_nodes, treedef, refs, [(v.shape, v.dtype) for v in lowered],
                  out_tree)
    compiled = _Compiled(
        Program(tape, fuse=fuse), static_numbers, n_out, out_tree,
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


def _check_fuse(fuse, who: str) -> None:
    """Refuse a ``fuse`` option that is not a bool (``who`` names the entry point)."""
    if type(fuse) is not bool:
        raise TypeError(
            f"{who}: fuse must be a bool (True to fuse elementwise regions into native "
            f"kernels, False for one NumPy call per op), got {type(fuse).__name__} {fuse!r:.40}"
        )


@strict_keywords
def jit(
    fun=None, *, static_argnums: Any = (), static_argnames: Any = (), cache_size: int = 64,
    fuse: bool = False,
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
          Python type part of the signature (see :mod:`tapegrad.core.weak`); where the function
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
        - With ``fuse=True``, connected regions of elementwise ops run as native kernels
          compiled by numba (one loop, no temporaries; see ``docs/performance.md``). Arithmetic,
          comparisons, selections, casts, ``sqrt``, ``abs``, ``maximum`` and ``minimum`` stay
          bit-exact; transcendental functions (``exp``, ``log``, ``tanh``, ...) come from the C
          math library and may differ from the eager result by a few units in the last place.
          A program's first run (the second call) computes unfused and compiles its kernels.
          Without numba the program runs unfused and the ``tapegrad`` logger says so once; a
          kernel numba cannot compile runs as its NumPy calls, with one logged warning.

    Args:
        fun: The function.
        static_argnums: Int or tuple of ints: positional arguments that are static.
        static_argnames: Str or tuple of str: keyword arguments that are static.
        cache_size: How many signatures to keep compiled programs for (least recently used
            ones are dropped).
        fuse: Bool, default False: fuse elementwise regions into native kernels (numba), for
            speed on many small ops, at the cost of last-bit equality of transcendental ops.

    Returns:
        A function with ``fun``'s signature and results (leaves as Tensors). It has
        ``lower(*args, **kwargs)`` (the :class:`Program` for these arguments),
        ``clear_cache()`` and ``cache_size()``; ``tg.jit.clear_cache()`` clears every jitted
        function's programs.

    Raises:
        TypeError: for an argument that cannot be traced (a string, an object) and is not
            static, naming ``static_argnums``/``static_argnames``; for an unhashable static
            argument; for a ``fuse`` that is not a bool.
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
        >>> fused = tg.jit(lambda x: tnp.sum(x * 2.0 + 1.0), fuse=True)  # kernels with numba
        >>> fused(tg.Tensor([1.0, 2.0])).item()
        8.0
    """
    _check_fuse(fuse, "jit")
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames, cache_size=cache_size,
                                 fuse=fuse)
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

        return _record(call, (dyn, dkw), who, static_numbers, fuse)

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
                if _PROFILING[0]:  # tg.profile: a compiled call is one entry (fused, no op edges)
                    return _profiler.timed(who, "forward", _run)(c, leaves)
                return _run(c, leaves)
            except _Stale as e:
                if e.forever:  # recorded for a structure that is gone: drop it
                    with cache.lock:
                        if progs is not None and c in progs:
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
