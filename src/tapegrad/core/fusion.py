"""Fusion of a compiled program's elementwise regions into native kernels (numba on the CPU).

:class:`~tapegrad.core.program.Program` (built by :func:`~tapegrad.jit`) runs one NumPy call per
primitive. This pass groups connected runs of elementwise steps of one iteration shape (ufuncs,
broadcasting operands, Python scalars, casts, and the fused backward rules of the elementwise
table) into :class:`FusedGroup` steps; each group runs as one native loop over the output
elements, with no temporary arrays. A sum or mean over all axes or one axis of a value the
group computes ends it (:class:`~tapegrad.core.function.Traits` ``reduction``; the kernel adds
in NumPy's order, to the bit). Matrix products, convolutions, linear algebra, other
reductions, gathers and scatters stay library calls.

What an op computes comes from its :class:`~tapegrad.core.function.Traits`: ``ufunc`` (a NumPy
ufunc, no parameters) or ``formula`` (a formula in NumPy-named functions, evaluated here on
symbolic scalars). Kernel source is written only from this module's fixed vocabulary of
expression templates and dtype names: no op label, parameter, user value or string from a tape
ever becomes source text; user constants (arrays and Python numbers) are kernel arguments.

The pass runs only for a function jitted with ``tg.jit(f, fuse=True)``: a kernel computes
transcendental functions with the C math library, within a few ulp of NumPy's own loops, so
fusion is a per-function choice of speed over last-bit equality with the eager call.

Groups with the same structure (ops, dtypes, broadcasting pattern) share one kernel, compiled
once per dtypes and ranks of its arguments (arrays of any layout). A program's first run
computes its results unfused and compiles its kernels on the arguments it met
(:meth:`FusedGroup.compile`); later runs call the compiled versions directly. Kernels are
compiled by numba with its on-disk cache, in files named by the hash of their source under
:func:`cache_dir`, so a new process reuses them. Without numba, programs run unfused and the
``tapegrad`` logger says so once. A kernel numba cannot compile runs as the group's NumPy
calls from then on, and the ``tapegrad`` logger warns once, naming the group's ops.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import sys
import threading
import types

import numpy as np

from tapegrad.core import dtypes as _dtypes
from tapegrad.core.function import Traits
from tapegrad.core.trace import Guard

__all__ = ["FusedGroup", "available", "cache_dir"]

_log = logging.getLogger("tapegrad")

#: Most steps in one group: larger groups take longer for LLVM to compile; repeated blocks of
#: this size share kernels.
MAX_GROUP = 32

#: Largest iteration size (elements) at which kernels compute transcendental functions (the C
#: math library's, one element at a time); on larger arrays NumPy's vectorized loops are
#: faster, so those ops stay NumPy calls and the kernels hold exact arithmetic only.
SMALL = 64

#: Largest iteration size (elements) of a group: on larger arrays a NumPy call costs little
#: beside its memory traffic, and NumPy's vectorized loops beat a kernel's scalar loop.
MAX_SIZE = 16384

#: Vocabulary ops computed by the C math library (within a few ulp of NumPy's own loops).
_LIBM = frozenset({"power", "logaddexp", "hypot", "arctan2", "exp", "expm1", "log", "log1p",
                   "log2", "log10", "sin", "cos", "tan", "sinh", "cosh", "tanh", "arctan",
                   "arcsinh", "sigmoid"})

_STATE: dict = {"warned": False}
_LOCK = threading.Lock()
_KERNELS: dict = {}  # source hash -> compiled numba dispatcher
_BROKEN: set = set()  # keys of kernels numba failed to compile: their groups run unfused
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # numba highlights its messages


def available() -> bool:
    """Whether numba is installed, so that ``tg.jit(f, fuse=True)`` fuses elementwise regions
    into native kernels (without it, such a function runs unfused and the ``tapegrad`` logger
    says so once).

    Returns:
        True when numba can be imported.

    Example:
        >>> import tapegrad.core.fusion as fusion
        >>> isinstance(fusion.available(), bool)
        True
    """
    return _numba() is not None


def cache_dir() -> str:
    """The directory holding the generated kernel sources and numba's compiled kernels:
    ``$TAPEGRAD_CACHE_DIR`` if set, else ``~/.cache/tapegrad/kernels``. It should be writable
    by you alone: the kernels in it are imported as code.

    Returns:
        The directory's path (created on first use).
    """
    base = os.environ.get("TAPEGRAD_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "tapegrad", "kernels")
    return base


def _numba():
    mod = sys.modules.get("numba")
    if mod is not None:
        return mod
    if _STATE.get("no_numba"):
        return None
    try:
        import numba  # pyright: ignore[reportMissingImports]
    except ImportError:
        _STATE["no_numba"] = True
        if not _STATE["warned"]:
            _STATE["warned"] = True
            _log.info("jit(fuse=True): numba is not installed, so programs run unfused (one "
                      "NumPy call per op); install numba (pip install -e \".[jit]\" in a clone) "
                      "to fuse elementwise regions")
        return None
    return numba


# -- symbolic scalars ------------------------------------------------------------------------
class _NotFusable(Exception):
    """The op's formula uses something outside the kernel vocabulary."""


_BF16 = _dtypes.bfloat16
_DTYPES = {np.dtype(n): n for n in ("bool", "float32", "float64", "complex64", "complex128")}
_DTYPES[np.dtype(bool)] = "bool_"
_WIDE = (np.dtype(np.float64), np.dtype(np.complex128))

#: op -> (kind, arity, template). Kinds: "arith" (operands cast to the result dtype), "cmp"
#: (operands cast to their common dtype; bool result), "unary" (operand cast to the result
#: dtype), "keep" (operand as it is), "bool" (bool operands).
_VOCAB: dict = {
    "add": ("arith", 2, "({0} + {1})"),
    "subtract": ("arith", 2, "({0} - {1})"),
    "multiply": ("arith", 2, "({0} * {1})"),
    "true_divide": ("arith", 2, "({0} / {1})"),
    "divide": ("arith", 2, "({0} / {1})"),
    "power": ("arith", 2, "({0} ** {1})"),
    "maximum": ("arith", 2, "({0} if ({0} >= {1} or {0} != {0}) else {1})"),
    "minimum": ("arith", 2, "({0} if ({0} <= {1} or {0} != {0}) else {1})"),
    "logaddexp": ("arith", 2, "np.logaddexp({0}, {1})"),
    "hypot": ("arith", 2, "np.hypot({0}, {1})"),
    "arctan2": ("arith", 2, "np.arctan2({0}, {1})"),
    "negative": ("unary", 1, "(-{0})"),
    "positive": ("unary", 1, "(+{0})"),
    "square": ("unary", 1, "({0} * {0})"),
    "exp": ("unary", 1, "np.exp({0})"),
    "expm1": ("unary", 1, "np.expm1({0})"),
    "log": ("unary", 1, "np.log({0})"),
    "log1p": ("unary", 1, "np.log1p({0})"),
    "log2": ("unary", 1, "np.log2({0})"),
    "log10": ("unary", 1, "np.log10({0})"),
    "sqrt": ("unary", 1, "np.sqrt({0})"),
    "sin": ("unary", 1, "np.sin({0})"),
    "cos": ("unary", 1, "np.cos({0})"),
    "tan": ("unary", 1, "np.tan({0})"),
    "sinh": ("unary", 1, "np.sinh({0})"),
    "cosh": ("unary", 1, "np.cosh({0})"),
    "tanh": ("unary", 1, "np.tanh({0})"),
    "arctan": ("unary", 1, "np.arctan({0})"),
    "arcsinh": ("unary", 1, "np.arcsinh({0})"),
    "sigmoid": ("unary", 1, "({1} / ({1} + np.exp(-{0})))"),  # scipy's expit, as written
    "absolute": ("keep", 1, "abs({0})"),
    "conjugate": ("keep", 1, "np.conj({0})"),
    "greater": ("cmp", 2, "({0} > {1})"),
    "greater_equal": ("cmp", 2, "({0} >= {1})"),
    "less": ("cmp", 2, "({0} < {1})"),
    "less_equal": ("cmp", 2, "({0} <= {1})"),
    "equal": ("cmp", 2, "({0} == {1})"),
    "not_equal": ("cmp", 2, "({0} != {1})"),
    "isfinite": ("keep", 1, "np.isfinite({0})"),
    "isnan": ("keep", 1, "np.isnan({0})"),
    "logical_and": ("bool", 2, "({0} and {1})"),
    "logical_or": ("bool", 2, "({0} or {1})"),
    "logical_not": ("bool", 1, "(not {0})"),
    "where": ("where", 3, "({1} if {0} else {2})"),
    "astype": ("cast", 1, "{0}"),
}
#: float64 ops numba computes with the same C function as ``math`` (equal to the bit, special
#: values included); ``math``'s name is much cheaper for numba to type.
_MATH = {"exp": "exp", "expm1": "expm1", "log": "log", "log1p": "log1p", "log2": "log2",
         "log10": "log10", "sqrt": "sqrt", "sin": "sin", "cos": "cos", "tan": "tan",
         "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "arctan": "atan", "arcsinh": "asinh"}
_REAL_ONLY = {"maximum", "minimum", "logaddexp", "hypot", "arctan2", "greater",
              "greater_equal", "less", "less_equal", "sigmoid", "log2", "log10", "expm1",
              "log1p", "arctan", "arcsinh", "power"}

_RESULT: dict = {}


def _spec(a):
    """A NumPy stand-in for operand ``a`` (a node's dtype, or a weak Python number)."""
    return np.zeros((), a.dtype) if a.dtype is not None else a.value


def _result_dtype(op: str, args) -> np.dtype:
    """The dtype NumPy's ufunc ``op`` gives on these operands (weak Python numbers included)."""
    key = (op, tuple(a.dtype if a.dtype is not None else type(a.value) for a in args))
    got = _RESULT.get(key)
    if got is None:
        fn = getattr(np, "logical_and" if op in ("logical_and", "logical_or") else op, None)
        if op == "sigmoid":
            fn = np.negative
        if not isinstance(fn, np.ufunc):
            raise _NotFusable(op)
        with np.errstate(all="ignore"):
            got = _RESULT[key] = np.asarray(fn(*[_spec(a) for a in args])).dtype
    return got


class _Node:
    """One value of a kernel: an input slot (``op == "in"``), a literal (``"lit"``, a weak
    Python number from an op's formula) or a vocabulary op on other nodes."""

    __slots__ = ("op", "args", "dtype", "value", "loop")

    def __init__(self, op, args, dtype, value=None, loop=None):
        self.op, self.args, self.dtype, self.value, self.loop = op, args, dtype, value, loop


def _node(v) -> _Node:
    if isinstance(v, _Sym):
        return v.node
    if type(v) in (bool, int, float, complex):
        if type(v) is float and not math.isfinite(v) or type(v) is int and abs(v) >= 2**53:
            raise _NotFusable("literal")
        return _Node("lit", (), None, v)
    raise _NotFusable(type(v).__name__)


def _apply(op: str, *vals) -> _Sym:
    if op not in _VOCAB:
        raise _NotFusable(op)
    args = tuple(_node(v) for v in vals)
    kind = _VOCAB[op][0]
    if all(a.dtype is None for a in args):
        raise _NotFusable("literal-only op")
    if kind == "where":
        cond, a, b = args
        if cond.dtype != np.bool_:
            raise _NotFusable("where")
        dtype = _result_dtype("add", (a, b))
        loop = dtype
    elif kind == "bool":
        if any(a.dtype != np.bool_ for a in args):
            raise _NotFusable(op)
        dtype = loop = np.dtype(np.bool_)
    else:
        dtype = _result_dtype(op, args)
        loop = dtype
        if kind == "cmp":
            loop = _result_dtype("add", args)
    for a in (dtype, loop):
        if a not in _DTYPES:
            raise _NotFusable(str(a))
    if op in _REAL_ONLY and (loop.kind == "c" or dtype.kind == "c"):
        raise _NotFusable(op)
    if kind in ("arith", "unary") and dtype.kind == "b":
        raise _NotFusable(op)
    return _Sym(_Node(op, args, dtype, loop=loop))


class _Sym:
    """A symbolic scalar: what an op's formula computes with inside the fusion pass."""

    __slots__ = ("node",)
    __hash__ = None  # pyright: ignore[reportAssignmentType]

    def __init__(self, node: _Node):
        self.node = node

    @property
    def dtype(self) -> np.dtype:
        return self.node.dtype

    def __bool__(self):
        raise _NotFusable("a Python decision on a value")

    def astype(self, dtype) -> _Sym:
        dtype = np.dtype(dtype)
        src = self.node.dtype
        if dtype not in _DTYPES or (src.kind == "c" and dtype.kind != "c") or (
                dtype.kind == "b" and src.kind != "b"):
            raise _NotFusable("astype")
        if dtype == src:
            return self
        return _Sym(_Node("astype", (self.node,), dtype, loop=dtype))


def _operator(op: str, n: int, reflected: bool = False):
    """A Python operator of :class:`_Sym` as the vocabulary's function ``op`` (``n`` operands;
    ``reflected``: the other operand comes first)."""
    if n == 1:
        return lambda self: _apply(op, self)
    if reflected:
        return lambda self, o: _apply(op, o, self)
    return lambda self, o: _apply(op, self, o)


# Python's operators on symbolic scalars, each the vocabulary's function NumPy maps it to
for _name, _op in (("add", "add"), ("sub", "subtract"), ("mul", "multiply"),
                   ("truediv", "true_divide"), ("pow", "power"), ("and", "logical_and"),
                   ("or", "logical_or")):
    setattr(_Sym, f"__{_name}__", _operator(_op, 2))
    setattr(_Sym, f"__r{_name}__", _operator(_op, 2, reflected=True))
for _name, _op in (("eq", "equal"), ("ne", "not_equal"), ("lt", "less"), ("le", "less_equal"),
                   ("gt", "greater"), ("ge", "greater_equal")):
    setattr(_Sym, f"__{_name}__", _operator(_op, 2))
for _name, _op in (("neg", "negative"), ("pos", "positive"), ("abs", "absolute"),
                   ("invert", "logical_not")):
    setattr(_Sym, f"__{_name}__", _operator(_op, 1))


class _SymNS:
    """The namespace formulas see: NumPy names of the vocabulary, on symbolic scalars."""

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in _VOCAB or name == "astype":
            raise _NotFusable(name)
        return lambda *a: _apply(name, *a)

    @staticmethod
    def abs(x):
        return _apply("absolute", x)

    @staticmethod
    def conj(x):
        return _apply("conjugate", x)


_NS = _SymNS()


# -- grouping --------------------------------------------------------------------------------
def _expr(step, ins: list):
    """The nodes ``step`` computes (one per output) from the symbolic inputs ``ins``; None if
    it is not fusable."""
    traits: Traits = step.fn.traits
    if traits.effect:
        return None
    try:
        if traits.formula is not None:
            out = traits.formula(_NS, *ins, **step.params)
        elif traits.ufunc is not None and not step.params and traits.ufunc in _VOCAB:
            out = _apply(traits.ufunc, *ins)
        else:
            return None
    except (_NotFusable, TypeError, AttributeError, ValueError):
        return None
    outs = out if isinstance(out, tuple) else (out,)
    if len(outs) != len(step.outs) or not all(
            isinstance(o, _Sym) and o.node.dtype == aval[1]
            for o, aval in zip(outs, step.avals)):
        return None
    return [o.node for o in outs]


class _Group:
    """A group being built: its steps, iteration shape, inputs and the nodes it computes."""

    def __init__(self, shape):
        self.shape = shape
        self.steps: list = []
        self.inputs: list = []  # refs, in slot order
        self.slot: dict = {}  # ref key -> input node
        self.value: dict = {}  # program node -> _Node computed in the group
        self.nodes: list = []  # (program node, _Node) per step
        self.ext_reads: set = set()  # program values from outside the kernel reads
        self.reduction: tuple | None = None  # trailing: (input node, kind, axis, out, dtype)


class FusedGroup:
    """A fused group of elementwise steps run as one native kernel: the ``fn`` of one program
    step (``str(program)`` shows it as ``fused[op op ...]``).

    numba compiles the kernel at the program's first run (:meth:`compile`, on the run's own
    arguments). A kernel it cannot compile or type is never called: the program is fused
    again with that group's steps left as NumPy calls, and the ``tapegrad`` logger warns once,
    naming the ops.

    Attributes:
        ops: The labels of the fused primitives, in program order.
        key: The hash of the kernel's source: groups with equal keys share one kernel.
        source: The kernel's generated Python source (compiled by numba).
    """

    traits = Traits(fresh=True)

    def __init__(self, ops, key, source, kernel, n_out, reduced=None):
        self.ops, self.key, self.source = tuple(ops), key, source
        self._kernel, self._n_out = kernel, n_out
        self.reduced = reduced  # the shape of a trailing reduction's output (the last one)
        self._entry = None  # the compiled version's entry point, once compiled

    @property
    def call(self):
        """The kernel, called with the step's inputs: it returns the one output array, or a
        sequence of them (a tuple, or the rows of one array holding outputs of one dtype), in
        output order. Once compiled (:meth:`compile`), numba's compiled version itself: it
        checks each argument's type as it converts it (a wrong one is a TypeError), with no
        dispatch on types."""
        return self._entry or self._kernel

    def forward(self, ctx, *args):
        out = self._kernel(*args)
        out = list(out) if self._n_out > 1 else [out]
        if self.reduced is not None:  # (the kernel gives it flat)
            out[-1] = out[-1].reshape(self.reduced)
        return tuple(out) if self._n_out > 1 else out[0]

    def compile(self, args) -> bool:
        """Compile the kernel for arguments like ``args``, unless it is compiled for them
        already (or load it from numba's on-disk cache, without setting up numba's compiler,
        when a process compiled it before). A kernel is compiled once per dtype and rank of its
        arguments: arrays of any
        layout, writable or not, share one compiled version (groups of one structure share it,
        whichever values they read).

        Args:
            args: The arrays and numbers the kernel is called with (its step's inputs).

        Returns:
            False when numba cannot compile it: its key is then noted (no group builds this
            kernel again) and the ``tapegrad`` logger warns once, naming the ops.
        """
        if self.key in _BROKEN:
            return False
        try:
            sig = _signature(args)
            with _LOCK:
                kernel = self._kernel
                if sig not in kernel.overloads and not _load_cached(kernel, sig):
                    kernel.disable_compile(False)
                    try:
                        kernel.compile(sig)
                    finally:  # calls convert to a compiled version; they never compile
                        if kernel.signatures:
                            kernel.disable_compile(True)
                self._entry = kernel.overloads[sig].entry_point
            self._entry(*args)
        except Exception as e:  # a typing or lowering error, or any other failure to build
            with _LOCK:
                warn = self.key not in _BROKEN
                _BROKEN.add(self.key)
            if warn:
                why = (_ANSI.sub("", str(e)).strip().splitlines() or [""])[0][:200]
                _log.warning("jit(fuse=True): numba could not compile the fused kernel of "
                             "[%s] (%s: %s); these ops run as NumPy calls instead",
                             " ".join(self.ops), type(e).__name__, why)
            return False
        return True

    def _name(self) -> str:
        return "fused[" + " ".join(self.ops) + "]"

    def __repr__(self) -> str:
        return f"<FusedGroup {self._name()}>"


def _load_cached(kernel, sig) -> bool:
    """Load ``kernel``'s compiled version for ``sig`` from numba's on-disk cache, as numba's
    ``Dispatcher.compile`` does, less one step: its ``load_overload`` first refreshes numba's
    compiler (imports and registers every typing and lowering rule numba has, 0.3-0.5 s once
    per process, scipy.linalg included), which loading compiled machine code does not use.
    numba's runtime (the allocator a kernel's ``np.empty`` calls) is started as that refresh
    would. A kernel that must be compiled (a miss) still goes through numba's public
    ``compile``, which refreshes its compiler itself.

    Returns:
        True when the compiled version was loaded; False on a cache miss, or if this numba
        has no such cache (the caller then compiles, which also loads a cached version).
    """
    load = getattr(getattr(kernel, "_cache", None), "_load_overload", None)
    if load is None:  # pragma: no cover - a numba without its FunctionCache
        return False
    from numba.core.compiler_lock import global_compiler_lock  # pyright: ignore[reportMissingImports]
    from numba.core.runtime.nrt import rtsys  # pyright: ignore[reportMissingImports]

    ctx = kernel.targetctx
    try:
        with global_compiler_lock:
            if not _STATE.get("runtime"):
                rtsys.initialize(ctx)
                _STATE["runtime"] = True
            cres = load(sig, ctx)
            if cres is None:
                return False
            kernel._cache_hits[sig] += 1  # (numba's own count: ``kernel.stats``)
            ctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
            kernel.add_overload(cres)
    except Exception:  # a stale or unreadable entry: numba's compile decides
        return False
    return True


def _ref_key(ref):
    """Inputs with equal keys are one kernel argument: a value, a Python number, or a
    constant array by its memory and layout (arrays of a program are never written)."""
    kind, v = ref
    if kind == "v":
        return ("v", v)
    if isinstance(v, np.ndarray):
        return ("a", v.__array_interface__["data"][0], v.shape, v.strides, v.dtype)
    return ("c", id(v))


def _signature(args) -> tuple:
    """The numba signature a kernel is compiled for on ``args``: each array as a read-only
    array of any layout (of its dtype and rank), each number as its numba type."""
    numba = _numba()
    assert numba is not None
    types_ = numba.types
    return tuple(types_.Array(numba.from_dtype(a.dtype), a.ndim, "A", readonly=True)
                 if isinstance(a, np.ndarray) else numba.typeof(a) for a in args)


def _const_ok(v) -> bool:
    if type(v) in (bool, int, float, complex):
        return type(v) is not int or abs(v) < 2**53
    return isinstance(v, (np.ndarray, np.generic)) and v.dtype in _DTYPES


def fuse(steps: list, outputs: list, avals: dict, make_step) -> tuple:
    """Group a program's elementwise steps.

    Args:
        steps: The program's steps (and guards), in order.
        outputs: The program's output refs.
        avals: ``(shape, dtype)`` of every value.
        make_step: ``make_step(fn, params, ins, outs, avals)`` builds a program step.

    Returns:
        ``(steps, groups)``: the steps with each group of two or more replaced by one step
        running its :class:`FusedGroup`, and the groups. A group whose kernel numba failed
        to compile before (:meth:`FusedGroup.compile`) keeps its steps.
    """
    if not available():
        return steps, []

    items: list = []  # program steps and groups (each at the place it closes), in order
    cur: _Group | None = None

    def close():
        nonlocal cur
        if cur is not None:
            g, cur = cur, None
            if len(g.steps) >= 2:
                items.append(g)
            else:
                items.extend(g.steps)

    for s in steps:
        if type(s) is Guard:
            if cur is not None and s.node in cur.value:
                close()
            items.append(s)
            continue
        if cur is not None and _add_reduction(cur, s, avals):
            close()  # a reduction ends its group
            continue
        shape, dtype = s.avals[0] if s.avals else ((), None)
        fusable = (len(s.outs) >= 1 and dtype in _DTYPES and len(shape) >= 1
                   and math.prod(shape) <= MAX_SIZE
                   and all(a == s.avals[0][0] for a, _ in s.avals)
                   and not s.fn.traits.effect
                   and (s.fn.traits.formula is not None or s.fn.traits.ufunc is not None)
                   and not any((avals[v][1] if k == "v" else getattr(v, "dtype", None)) == _BF16
                               for k, v in s.ins))  # bfloat16 ops widen (core.function)
        if fusable and cur is not None and (cur.shape != shape or len(cur.steps) >= MAX_GROUP):
            close()
        if fusable:
            if cur is None:
                cur = _Group(shape)
            if _add(cur, s, avals) is not None:
                continue
            if cur.steps:
                close()
            cur = _Group(shape)
            if _add(cur, s, avals) is not None:
                continue
            cur = None
        if cur is not None and (s.fn.traits.effect or any(
                k == "v" and v in cur.value for k, v in s.ins)):
            close()
        items.append(s)
    close()
    # from the end, who reads each value later: a fused group only what its kernel reads (a
    # formula may ignore an operand); a group that is not fused, what its steps read
    later = {v for k, v in outputs if k == "v"}
    new: list = []
    groups: list = []
    for it in reversed(items):
        if type(it) is Guard:
            later.add(it.node)
            new.append(it)
            continue
        if type(it) is not _Group:
            later.update(v for k, v in it.ins if k == "v")
            new.append(it)
            continue
        step = _emit(it, [n for n, _ in it.nodes if n in later], avals, make_step)
        if step is None:  # no kernel (numba failed on this one before): the steps as they are
            for s in reversed(it.steps):
                later.update(v for k, v in s.ins if k == "v")
                new.append(s)
            continue
        later.update(it.ext_reads)
        new.append(step)
        groups.append(step.fn)
    new.reverse()
    groups.reverse()
    return new, groups


def _add_reduction(g: _Group, s, avals) -> bool:
    """End group ``g`` with step ``s`` if it is a sum or mean (:class:`Traits` ``reduction``)
    over all axes or one axis of a real floating value the group computes at its iteration
    shape: the kernel then sums in NumPy's order (pairwise along a last axis, in axis order
    otherwise), to the bit."""
    kind = s.fn.traits.reduction
    if kind not in ("sum", "mean") or len(s.ins) != 1 or len(s.outs) != 1 or not g.steps:
        return False
    k, v = s.ins[0]
    if k != "v" or v not in g.value or avals[v][0] != g.shape or not math.prod(g.shape):
        return False
    dtype = avals[v][1]
    if dtype not in (np.float32, np.float64) or s.avals[0][1] != dtype:
        return False
    axis, nd = s.params.get("axis"), len(g.shape)
    if isinstance(axis, tuple) and len(axis) == 1:
        axis = axis[0]
    if isinstance(axis, tuple) and sorted(a % nd for a in axis) == list(range(nd)):
        axis = None
    if axis is not None and (type(axis) is not int or not -nd <= axis < nd):
        return False
    if set(s.params) - {"axis", "keepdims"}:
        return False
    g.reduction = (g.value[v], kind, None if axis is None else axis % nd, s.outs[0], dtype)
    g.steps.append(s)
    return True


def _pairwise(a, start, n, zero):  # pragma: no cover - compiled by numba
    """NumPy's pairwise summation of ``a[start:start + n]`` (its order, to the bit): eight
    running sums over blocks of up to 128 elements, halves (multiples of 8) above."""
    if n < 8:
        res = zero
        for i in range(start, start + n):
            res += a[i]
        return res
    if n <= 128:
        r0, r1, r2, r3 = a[start], a[start + 1], a[start + 2], a[start + 3]
        r4, r5, r6, r7 = a[start + 4], a[start + 5], a[start + 6], a[start + 7]
        i = start + 8
        end = start + n - n % 8
        while i < end:
            r0 += a[i]
            r1 += a[i + 1]
            r2 += a[i + 2]
            r3 += a[i + 3]
            r4 += a[i + 4]
            r5 += a[i + 5]
            r6 += a[i + 6]
            r7 += a[i + 7]
            i += 8
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while i < start + n:
            res += a[i]
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise(a, start, n2, zero) + _pairwise(a, start + n2, n - n2, zero)


def _pairwise_kernel(numba):
    """:func:`_pairwise` compiled by numba (its recursive call bound to the compiled one)."""
    got = _STATE.get("pairwise")
    if got is None:
        scope: dict = {}
        fn = types.FunctionType(_pairwise.__code__, scope, "_pairwise")
        got = scope["_pairwise"] = _STATE["pairwise"] = numba.njit(
            error_model="numpy", nogil=True)(fn)
    return got


def _input(g: _Group, ref, added: list, dtype, value) -> _Node:
    """The input node of group ``g`` for ``ref``: an array of ``dtype`` whose ``value`` is its
    shape, or a Python number (dtype None, ``value`` the number); made on first use, its key
    noted in ``added``."""
    key = _ref_key(ref)
    node = g.slot.get(key)
    if node is None:
        node = g.slot[key] = _Node("in", (len(g.inputs),), dtype, value)
        g.inputs.append(ref)
        added.append(key)
    return node


def _add(g: _Group, s, avals) -> list | None:
    """Add step ``s`` to group ``g``; None (and ``g`` unchanged) when it does not fit."""
    syms = []
    added = []
    for ref in s.ins:
        kind, v = ref
        if kind == "v" and v in g.value:
            syms.append(_Sym(g.value[v]))
            continue
        if kind == "v":
            shape, dtype = avals[v]
        elif isinstance(v, np.dtype):
            syms.append(v)
            continue
        elif not _const_ok(v):
            _undo(g, added)
            return None
        elif type(v) in (bool, int, float, complex):
            syms.append(_Sym(_input(g, ref, added, None, v)))
            continue
        else:
            shape, dtype = np.shape(v), v.dtype
        if dtype not in _DTYPES or len(shape) > len(g.shape) or any(
                a not in (1, b) for a, b in zip(shape[::-1], g.shape[::-1])):
            _undo(g, added)
            return None
        syms.append(_Sym(_input(g, ref, added, dtype, shape)))
    nodes = _expr(s, syms)
    if nodes is None:
        _undo(g, added)
        return None
    operand = {id(sym.node): ref for sym, ref in zip(syms, s.ins) if isinstance(sym, _Sym)}
    small = math.prod(g.shape) <= SMALL
    seen: set = set()
    reads = set()
    todo = list(nodes)
    while todo:  # the operands the step's expression really reads (its own nodes only)
        nd = todo.pop()
        if id(nd) in seen:
            continue
        seen.add(id(nd))
        ref = operand.get(id(nd))
        if ref is not None:
            if ref[0] == "v" and ref[1] not in g.value:
                reads.add(ref[1])
            continue
        if nd.op in _LIBM and not small:
            _undo(g, added)
            return None
        if nd.op != "in":
            todo.extend(nd.args)
    g.ext_reads.update(reads)
    for n, node in zip(s.outs, nodes):
        g.value[n] = node
        g.nodes.append((n, node))
    g.steps.append(s)
    return nodes


def _undo(g: _Group, keys) -> None:
    for key in keys:
        g.slot.pop(key)
        g.inputs.pop()


# -- code generation -------------------------------------------------------------------------
def _emit(g: _Group, out_nodes: list, avals, make_step):
    """The program step running group ``g`` as one kernel that returns the values
    ``out_nodes`` (None if it cannot be built)."""
    wanted = set(out_nodes)
    outs = [(n, node) for n, node in g.nodes if n in wanted]
    red = g.reduction
    if not outs and red is None:
        return None
    order = _postorder([nd for _, nd in outs] + ([red[0]] if red is not None else []))
    # inputs actually used by the output expressions (a formula may ignore an operand)
    used = sorted((nd for nd in order[0] if nd.op == "in"), key=lambda nd: nd.args[0])
    ins = [g.inputs[nd.args[0]] for nd in used]
    try:
        src = _source(g.shape, used, outs, red and red[:3], order)
    except _NotFusable:
        return None
    key = hashlib.sha256(src.encode()).hexdigest()[:16]
    if key in _BROKEN:
        return None
    kernel = _kernel(src)
    if kernel is None:
        return None
    nodes = [n for n, _ in outs] + ([red[3]] if red is not None else [])
    fg = FusedGroup([s.fn._name() for s in g.steps], key, src, kernel, len(nodes),
                    avals[red[3]][0] if red is not None else None)
    return make_step(fg, {}, tuple(ins), tuple(nodes), [avals[n] for n in nodes])


def _postorder(roots: list) -> tuple:
    """Every node the ``roots`` compute from, each once, operands before the nodes that use
    them (left to right, roots in order): one pass, no recursion however deep the
    expressions. Returns ``(order, ends)``: ``order[:ends[j]]`` is what ``roots[:j + 1]``
    need."""
    order: list = []
    ends: list = []
    seen: set = set()
    for root in roots:
        if id(root) not in seen:
            seen.add(id(root))
            stack = [(root, iter(root.args if root.op != "in" else ()))]
            while stack:
                nd, it = stack[-1]
                for a in it:
                    if id(a) not in seen:
                        seen.add(id(a))
                        stack.append((a, iter(a.args if a.op != "in" else ())))
                        break
                else:
                    stack.pop()
                    order.append(nd)
        ends.append(len(order))
    return order, ends


def _source(shape: tuple, used: list, outs: list, red=None, order=None) -> str:
    """Kernel source for iteration shape ``shape`` (only its rank and which axes have size 1
    enter the text), input nodes ``used`` (slots renumbered in order), output nodes and a
    trailing reduction ``red``: ``(node, "sum" or "mean", axis or None)``, its output last.
    ``order``: :func:`_postorder` of the outputs and the reduced node."""
    if order is None:
        order = _postorder([nd for _, nd in outs] + ([red[0]] if red is not None else []))
    nd = len(shape)
    arg = {id(u): f"a{j}" for j, u in enumerate(used)}
    lines = []
    params = [arg[id(u)] for u in used] if used else []
    lines.append(f"def kernel({', '.join(params)}):")
    # each axis's length: from an input that spans it, or 1
    dims = []
    for k in range(nd):
        expr = None
        if shape[k] != 1:
            for u in used:
                if u.dtype is None or not isinstance(u.value, tuple):
                    continue
                ushape = u.value
                j = k - (nd - len(ushape))
                if j >= 0 and ushape[j] != 1:
                    expr = f"{arg[id(u)]}.shape[{j}]"
                    break
        if expr is None:
            if shape[k] != 1:
                raise _NotFusable("axis")
            expr = "1"
        lines.append(f"    n{k} = {expr}")
        dims.append(f"n{k}")
    head = len(lines)  # where the arguments' conversions go
    hoisted: set = set()
    # outputs of one dtype are the rows of one array (one array for numba to return, and
    # NumPy's row iteration to split); outputs of several dtypes, a tuple of arrays
    block = red is None and len(outs) > 1 and len({node.dtype for _, node in outs}) == 1
    if block:
        lines.append(f"    o = np.empty(({len(outs)}, {', '.join(dims)}), "
                     f"np.{_DTYPES[outs[0][1].dtype]})")
    else:
        for j, (_, node) in enumerate(outs):
            lines.append(f"    o{j} = np.empty(({', '.join(dims)},), np.{_DTYPES[node.dtype]})")
    if red is not None:
        dt = f"np.{_DTYPES[red[0].dtype]}"
        lines.append(f"    r = np.empty({' * '.join(dims)}, {dt})")
    idx_all = ", ".join(f"i{k}" for k in range(nd))
    ind = "    "
    for k in range(nd):
        lines.append(f"{ind}for i{k} in range(n{k}):")
        ind += "    "
    body: list = []
    names: dict = {}

    def cast(nd_, dtype):
        expr = names[id(nd_)]
        if nd_.dtype is None:  # a weak Python number: NumPy converts it to the loop dtype
            if nd_.op == "lit" and type(nd_.value) is float and dtype == np.float64:
                return expr  # (a float literal is a float64 already)
            if nd_.op == "in":  # an argument: converted once, before the loop
                got = f"{expr}_{_DTYPES[dtype]}"
                if got not in hoisted:
                    hoisted.add(got)
                    lines.insert(head, f"    {got} = np.{_DTYPES[dtype]}({expr})")
                return got
            return f"np.{_DTYPES[dtype]}({expr})"
        if nd_.dtype != dtype:
            return f"np.{_DTYPES[dtype]}({expr})"
        return expr

    def gen(node) -> None:  # (its operands have their names already)
        if node.op == "in":
            a = arg[id(node)]
            if node.dtype is None:  # a Python number argument
                names[id(node)] = a
                return
            ushape = node.value
            idx = [("0" if ushape[j] == 1 else f"i{j + nd - len(ushape)}")
                   for j in range(len(ushape))]
            expr = f"{a}[{', '.join(idx)}]" if idx else f"{a}[()]"
        elif node.op == "lit":
            v = node.value
            if type(v) is bool:
                expr = "True" if v else "False"
            elif type(v) is int:
                expr = str(int(v))
            elif type(v) is float:
                expr = repr(float(v))
            else:
                expr = f"complex({float(v.real)!r}, {float(v.imag)!r})"
            names[id(node)] = expr
            return
        else:
            kind, _, tmpl = _VOCAB[node.op]
            if kind in ("arith", "cmp"):
                parts = [cast(a, node.loop) for a in node.args]
            elif kind == "unary":
                parts = [cast(node.args[0], node.loop)]
                if node.loop == np.float64 and node.op in _MATH:  # the same C function,
                    tmpl = f"math.{_MATH[node.op]}({{0}})"  # typed faster by numba
                if node.op == "sigmoid" and node.loop == np.float64:
                    tmpl = "(1.0 / (1.0 + math.exp(-{0})))"
                elif node.op == "sigmoid":
                    parts.append(f"np.{_DTYPES[node.loop]}(1.0)")
            elif kind == "where":
                parts = [names[id(node.args[0])], cast(node.args[1], node.loop),
                         cast(node.args[2], node.loop)]
            elif kind == "cast":
                parts = [cast(node.args[0], node.dtype)]
            else:
                parts = [names[id(a)] for a in node.args]
            expr = tmpl.format(*parts)
            if kind in ("unary", "arith", "keep") and node.op != "isfinite" and \
                    node.op != "isnan" and not (kind != "keep" and node.loop == node.dtype
                                                and node.dtype in _WIDE):
                # (numba computes float64 and complex128 operands in their own dtype, as
                # NumPy does; a narrower result is cast back, as NumPy's loop rounds it)
                expr = f"np.{_DTYPES[node.dtype]}({expr})"
        name = f"t{len(body) - n_out}"
        body.append(f"{ind}{name} = {expr}")
        names[id(node)] = name

    nodes, ends = order
    start = 0
    n_out = 0  # the lines of body that store an output (the others are named t0, t1, ...)
    for j, (_, node) in enumerate(outs):
        for x in nodes[start:ends[j]]:
            gen(x)
        start = ends[j]
        v = names[id(node)]
        body.append(f"{ind}o[{j}, {idx_all}] = {v}" if block else f"{ind}o{j}[{idx_all}] = {v}")
        n_out += 1
    for x in nodes[start:]:  # (the reduced node's own)
        gen(x)
    if red is not None:  # the reduced value, in C order, summed after the loop
        node, kind, axis = red
        flat = "i0"
        for k in range(1, nd):
            flat = f"({flat} * n{k} + i{k})"
        body.append(f"{ind}r[{flat}] = {names[id(node)]}")
    lines.extend(body)
    if red is not None:
        node, kind, axis = red
        dt = f"np.{_DTYPES[node.dtype]}"
        axes = range(nd) if axis is None else [axis]
        inner = " * ".join(["1"] + [f"n{k}" for k in range(nd) if axis is not None and k > axis])
        outer = " * ".join(["1"] + [f"n{k}" for k in range(nd) if axis is not None and k < axis])
        lines += [f"    zero = {dt}(0)",
                  f"    kk = {' * '.join(f'n{k}' for k in axes)}",
                  f"    inner = {inner}",
                  f"    outer = {outer}",
                  f"    q = np.empty(outer * inner, {dt})",
                  "    for a in range(outer):",
                  "        if inner == 1:  # along the last axis: NumPy's pairwise sum",
                  "            q[a] = zero + _pairwise(r, a * kk, kk, zero)",
                  "        else:  # along an outer axis: in axis order",
                  "            for b in range(inner):",
                  "                base = a * kk * inner + b",
                  "                s = zero + r[base]",
                  "                for k in range(1, kk):",
                  "                    s += r[base + k * inner]",
                  "                q[a * inner + b] = s"]
        if kind == "mean":
            lines.append(f"    q /= {dt}(kk)")
        outs_txt = [f"o{j}" for j in range(len(outs))] + ["q"]
        lines.append(f"    return ({', '.join(outs_txt)},)" if outs else "    return q")
    elif block:
        lines.append("    return o")
    elif len(outs) == 1:
        lines.append("    return o0")
    else:
        lines.append(f"    return ({', '.join(f'o{j}' for j in range(len(outs)))},)")
    return "import math\n\nimport numpy as np\n\n\n" + "\n".join(lines) + "\n"


def _kernel(src: str):
    """The numba kernel compiled from ``src`` (shared by every group with this source), or
    None when it cannot be written to the cache directory or compiled."""
    key = hashlib.sha256(src.encode()).hexdigest()[:24]
    with _LOCK:
        got = _KERNELS.get(key)
        if got is not None:
            return got
        numba = _numba()
        if numba is None:
            return None
        try:
            folder = cache_dir()
            os.makedirs(folder, mode=0o700, exist_ok=True)
            path = os.path.join(folder, f"k_{key}.py")
            text = None
            if os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            if text != src:  # never import a file other than the source made here
                tmp = f"{path}.{os.getpid()}.tmp"
                with open(tmp, "w", encoding="utf-8") as f:
                    f.write(src)
                os.replace(tmp, path)
            # The text run is the one generated here (the file gives numba's cache its key)
            # (a module of its own, registered: numba's cache finds the kernel's globals there)
            module = types.ModuleType(f"tapegrad_kernel_{key}")
            module.__file__ = path
            if "_pairwise(" in src:  # the one helper a kernel may call
                module.__dict__["_pairwise"] = _pairwise_kernel(numba)
            exec(compile(src, path, "exec"), module.__dict__)  # noqa: S102
            sys.modules[module.__name__] = module
            fn = numba.njit(cache=True, error_model="numpy", nogil=True)(module.kernel)
        except OSError as e:
            _log.info("jit: cannot write fused kernels to %s (%s): running unfused",
                      cache_dir(), e)
            return None
        _KERNELS[key] = fn
        return fn
