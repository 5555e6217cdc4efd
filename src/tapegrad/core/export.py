"""Tapes as files: :meth:`Tape.to_json` and :meth:`Tape.from_json`, with no pickle.

A tape is written as JSON (format ``tapegrad.core.tape``, version 1): each entry's primitive by its
name (``"tapegrad.ops.elementwise:Sin"``, module and qualified name), its static parameters,
the node ids of its inputs and outputs, the shape and dtype of every node, the Python decisions
(guards), and the input and output pytree structures. Arrays the tape holds as constants are
not put in the JSON: they go to a safetensors file (written with :func:`tapegrad.io.save`,
atomically and with a digest), which the JSON names together with the SHA-256 of its bytes.

A tape file is data. Loading it never runs code from it and never imports a module:

- primitives are looked up among the :class:`~tapegrad.core.function.Function` subclasses already
  defined in the process (a Function defined outside tapegrad is found once the module that
  defines it has been imported); parameter values that name a type (a namedtuple, a row of an
  op table) are looked up among those defined at the top level of a module that defines a
  Function, and nowhere else;
- parameters are rebuilt from a fixed set of value kinds, dtypes from a fixed set of numeric
  dtypes, pytree structures from tuples, lists, dicts and ``None``;
- a sub-program a primitive holds (a control-flow body, :mod:`tapegrad.core.subprogram`) is a
  nested tape, checked as the outer one is, its kind looked up among registered classes only;
- every entry is checked before the tape is built (node ids in range, each value defined
  before it is used and only once, arity and parameter names that the Function's ``forward``
  accepts, shapes, dtypes, guards, structures), and nesting is bounded, so a malformed file is
  a ValueError naming the entry, never a RecursionError or a failure inside a replay;
- the arrays file must be a regular file; its bytes are checked against the recorded SHA-256
  before anything in it is parsed.

No string from a file reaches generated source: the compiled program
(:class:`tapegrad.transforms.jit.Program`) passes parameters as dictionaries and names its variables
itself. A replay of a loaded tape first runs each entry as written and checks its outputs'
shapes and dtypes against the file.

The SHA-256 detects damage (a truncated or altered arrays file, or one that belongs to another
tape), not deliberate edits: whoever can write the JSON can record the digest of any arrays
file. A re-signed file with changed values, shapes or dtypes loads as written, as a safetensors
or PyTorch checkpoint does.

:class:`~tapegrad.core.tape.Tape`'s ``to_json`` and ``from_json`` call :func:`tape_to_json` and
:func:`tape_fields` (this module knows tapes only as the values they hold).
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import json
import keyword
import math
import os
import re
import sys
import weakref

import numpy as np

from tapegrad import io as _io
from tapegrad.core import backend as _backend
from tapegrad.core.function import Function
from tapegrad.core.subprogram import SubProgram
from tapegrad.core.tensor import Tensor, const
from tapegrad.core.trace import _GUARD_FNS, Guard, TapeEntry
from tapegrad.core.tree import tree_flatten, tree_unflatten

__all__ = ["tape_to_json", "tape_fields"]

FORMAT, VERSION = "tapegrad.core.tape", 1

#: Deepest container nesting of a parameter value or a pytree structure in a tape file.
MAX_DEPTH = 256
# Each container is a JSON object holding a list (two JSON levels), plus the top levels.
_MAX_JSON_DEPTH = 2 * MAX_DEPTH + 16
_MAX_NDIM = 64  # NumPy's limit
#: The dtypes a tape file may name (values, parameters, arrays), by NumPy's ``dtype.str``.
_DTYPES = {
    np.dtype(n).str: np.dtype(n)
    for n in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "float32", "float64", "complex64", "complex128")
}
_HEX64 = re.compile(r"[0-9a-f]{64}")
_NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
_BUILTIN_TYPES = {"int": int, "float": float, "complex": complex, "bool": bool}
_TOP_FIELDS = {"format", "version", "inputs", "in_avals", "in_tree", "avals", "entries",
               "outputs", "out_avals", "out_tree", "labels", "arrays"}
_ENTRY_FIELDS = {"op", "params", "in", "consts", "out"}
_GUARD_FIELDS = {"guard", "node", "value", "where"}
_SUB_FIELDS = _TOP_FIELDS - {"format", "version", "arrays"}
#: What a guard of each kind recorded (``item`` gives whatever the array holds).
_GUARD_VALUES = {"bool": (bool,), "int": (int,), "float": (float,), "complex": (complex,),
                 "item": (bool, int, float, complex)}


class _Leaf(int):
    """A placeholder leaf (its position) while a pytree structure is written or read."""


def _qualname(obj) -> str:
    return f"{obj.__module__}:{obj.__qualname__}"


def _brief(v) -> str:
    """A bounded repr of a decoded JSON value, for messages."""
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


def _is_row(r) -> bool:
    fields = getattr(type(r), "_fields", None)
    return isinstance(r, tuple) and type(fields) is tuple and "name" in fields


def _row_name(r):
    return r[type(r)._fields.index("name")]


class _Names:
    """What a tape file may name, found among what the process has already defined (nothing
    is imported): every Function subclass by ``module:qualname``; and the namedtuple classes and
    the tables of rows (lists or tuples of namedtuples with a ``name`` field) defined at the top
    level of a module that defines a Function. A name two objects share maps to None. Each
    table is gathered on first use."""

    def __init__(self):
        self._functions = self._types = self._tables = None

    @property
    def functions(self) -> dict:
        if self._functions is None:
            found: dict = {}
            seen = {Function}
            stack = [Function]
            while stack:
                for sub in type.__subclasses__(stack.pop()):
                    if sub not in seen:
                        seen.add(sub)
                        stack.append(sub)
                        _put(found, _qualname(sub), sub)
            self._functions = found
        return self._functions

    @property
    def types(self) -> dict:
        if self._types is None:
            self._scan()
        return self._types  # pyright: ignore[reportReturnType]

    @property
    def tables(self) -> dict:
        if self._tables is None:
            self._scan()
        return self._tables  # pyright: ignore[reportReturnType]

    def _scan(self) -> None:
        self._types, self._tables = {}, {}
        modules = {c.__module__ for c in self.functions.values() if c is not None}
        for m in sorted(modules):
            mod = sys.modules.get(m)
            for attr, obj in list(vars(mod).items()) if mod is not None else ():
                if (isinstance(obj, type) and issubclass(obj, tuple)
                        and type(vars(obj).get("_fields")) is tuple and obj.__module__ == m):
                    _put(self._types, _qualname(obj), obj)
                elif isinstance(obj, (list, tuple)) and type(obj) in (list, tuple) and obj and all(
                        _is_row(r) for r in obj):
                    _put(self._tables, f"{m}:{attr}", obj)

    def function(self, name, where: str, who: str):
        fn = self.functions.get(name) if type(name) is str else None
        if fn is None:
            raise ValueError(f"{who}: {where}: {_brief(name)} is {_unknown(name, self.functions)} "
                             "tapegrad Function defined in this process. A Function defined "
                             "outside tapegrad is found once the module that defines it has "
                             "been imported: import it before loading (a tape file never "
                             "imports code)")
        return fn

    def namedtuple(self, name, where: str, who: str):
        cls = self.types.get(name) if type(name) is str else None
        if cls is None:
            raise ValueError(f"{who}: {where}: {_brief(name)} is {_unknown(name, self.types)} "
                             "namedtuple class defined beside a Function in this process")
        return cls

    def row(self, table, name, where: str, who: str):
        rows = self.tables.get(table) if type(table) is str else None
        if rows is None:
            raise ValueError(f"{who}: {where}: {_brief(table)} is {_unknown(table, self.tables)} "
                             "op table defined beside a Function in this process")
        if type(name) is str:
            for r in rows:
                if _row_name(r) == name:
                    return r
        raise ValueError(f"{who}: {where}: the table {table!r} has no row named {_brief(name)}")


def _put(d: dict, key: str, obj) -> None:
    d[key] = obj if d.get(key, obj) is obj else None


def _unknown(name, known: dict) -> str:
    return "the name of more than one" if type(name) is str and name in known else "not a"


_DTYPE_NAMES = ", ".join(str(d) for d in _DTYPES.values())


def _dtype(s, where: str, who: str) -> np.dtype:
    d = _DTYPES.get(s) if type(s) is str else None
    if d is None:
        raise ValueError(f"{who}: {where}: dtype {_brief(s)} is not one a tape file may hold "
                         f"({_DTYPE_NAMES})")
    return d


def _dtype_str(d, where: str, who: str) -> str:
    s = np.dtype(d).str
    if s not in _DTYPES:
        raise ValueError(f"{who}: {where} has dtype {np.dtype(d)}, which a tape file cannot "
                         f"hold (numeric dtypes only: {_DTYPE_NAMES})")
    return s


# -- values ----------------------------------------------------------------------------------
class _Writer:
    def __init__(self, who: str):
        self.arrays: dict = {}
        self.who = who
        self._names = None

    @property
    def names(self) -> _Names:
        if self._names is None:
            self._names = _Names()
        return self._names

    def fail(self, where: str, what: str) -> ValueError:
        return ValueError(f"{self.who}: {where} {what}")

    def array(self, arr, where: str) -> dict:
        arr = np.asarray(_backend.to_device(arr, "cpu"))
        if not arr.dtype.isnative:
            arr = arr.astype(arr.dtype.newbyteorder("="))
        if not arr.flags.c_contiguous:
            arr = arr.copy(order="C")
        key = f"a{len(self.arrays)}"
        rec = {"__array__": key, "dtype": _dtype_str(arr.dtype, where, self.who),
               "shape": list(arr.shape)}
        if arr.dtype.kind == "c":  # stored as its real and imaginary parts (trailing axis)
            arr = np.stack([arr.real, arr.imag], axis=-1)  # pyright: ignore[reportAttributeAccessIssue]
        self.arrays[key] = arr
        return rec

    def value(self, v, where: str, depth: int = 0):
        """``v`` as JSON (tagged dicts for what JSON has no type for)."""
        if v is None or type(v) is bool or type(v) is str:
            return v
        if isinstance(v, str) and not isinstance(v, np.generic):  # a str subclass (an enum)
            return str.__str__(v)
        if type(v) in (int, _Leaf):
            return int(v)
        if type(v) is float:
            return v if math.isfinite(v) else {"__float__": repr(v)}
        if type(v) is complex:
            return {"__complex__": [self.value(v.real, where), self.value(v.imag, where)]}
        if isinstance(v, np.generic):
            return {"__scalar__": _dtype_str(v.dtype, where, self.who),
                    "value": self.value(v.item(), where)}
        if isinstance(v, np.dtype):
            return {"__dtype__": _dtype_str(v, where, self.who)}
        if isinstance(v, type) and issubclass(v, np.generic):
            return {"__scalar_type__": _dtype_str(v, where, self.who)}
        if isinstance(v, type) and v in (int, float, complex, bool):
            return {"__builtin_type__": v.__name__}
        if v is Ellipsis:
            return {"__ellipsis__": True}
        if type(v) is slice:
            parts = (v.start, v.stop, v.step)
            if not all(p is None or type(p) is int for p in parts):
                raise self.fail(where, f"is the slice {v!r}; a tape file holds slices of ints "
                                "and None only")
            return {"__slice__": list(parts)}
        if isinstance(v, Tensor):
            if v.is_traced:
                raise self.fail(where, "is a traced Tensor; only constants are exported")
            return dict(self.array(v._array, where), tensor=True)
        if isinstance(v, np.ndarray) or type(v).__module__.startswith("cupy"):
            return self.array(v, where)
        return self.value_other(v, where, depth)

    def value_other(self, v, where: str, depth: int):
        if depth >= MAX_DEPTH:
            raise self.fail(where, f"nests containers deeper than {MAX_DEPTH} levels, more "
                            "than a tape file holds")
        d = depth + 1
        if isinstance(v, tuple) and hasattr(v, "_fields"):
            return self.named(v, where, d)
        if type(v) is tuple:
            return {"__tuple__": [self.value(x, where, d) for x in v]}
        if type(v) is list:
            return [self.value(x, where, d) for x in v]
        if type(v) is dict:
            return {"__dict__": [[self.value(k, where, d), self.value(x, where, d)]
                                 for k, x in v.items()]}
        if isinstance(v, type) and issubclass(v, Function):
            name = _qualname(v)
            if self.names.functions.get(name) is not v:
                raise self.fail(where, f"is the Function {name}, which cannot be named "
                                "uniquely (another class has the same module and name)")
            return {"__function__": name}
        if isinstance(v, SubProgram):
            kind = type(v).kind
            if SubProgram.registered(kind) is not type(v):
                raise self.fail(where, f"is a {type(v).__name__} sub-program, which is not "
                                "registered under a kind of its own")
            return {"__subprogram__": kind, "name": str(v.name),
                    "tape": _tape_doc(self, v.tape, f"{where}, sub-program {v.name!r}:")}
        raise self.fail(
            where,
            f"is {v!r:.60} (a {type(v).__name__}), which a tape file cannot hold (Python "
            "functions and arbitrary objects are not exported). Trace a function without it, "
            "or export the tape of what runs inside it."
        )

    def named(self, v, where: str, depth: int):
        cls = type(v)
        try:
            fields = [self.value(x, where, depth) for x in v]
        except ValueError:
            # A table row (a namedtuple holding functions): named by the table that lists it.
            for key, rows in self.names.tables.items() if _is_row(v) else ():
                if rows is not None and any(r is v for r in rows):
                    if self.names.row(key, _row_name(v), where, self.who) is v:
                        return {"__row__": key, "name": _row_name(v)}
            raise
        name = _qualname(cls)
        if self.names.types.get(name) is not cls:
            raise self.fail(where, f"is a {name} namedtuple; a tape file holds only namedtuples "
                            "of a class defined at the top level of a module that defines a "
                            "Function (and no other class of the same name)")
        return {"__namedtuple__": name, "fields": fields}

    def structure(self, treedef, n: int, where: str):
        """A pytree structure as nested containers with ``{"leaf": i}`` leaves."""
        return self._struct(tree_unflatten(treedef, [_Leaf(i) for i in range(n)]), where, 0)

    def _struct(self, node, where, depth):
        if type(node) is _Leaf:
            return {"leaf": int(node)}
        if node is None:
            return {"none": True}
        if depth >= MAX_DEPTH:
            raise self.fail(f"the {where} pytree", f"nests deeper than {MAX_DEPTH} containers, "
                            "more than a tape file holds")
        d = depth + 1
        if type(node) is tuple:
            return {"tuple": [self._struct(x, where, d) for x in node]}
        if type(node) is list:
            return {"list": [self._struct(x, where, d) for x in node]}
        if type(node) is dict:
            return {"dict": [[self.value(k, f"a key of the {where} pytree", d),
                              self._struct(x, where, d)] for k, x in node.items()]}
        raise ValueError(
            f"{self.who}: the {where} pytree holds a {type(node).__name__}; a tape file keeps "
            "structures of tuples, lists, dicts and None only"
        )


class _Reader:
    """Rebuilds values and structures from a decoded tape file, checking every record."""

    def __init__(self, arrays: dict, names: _Names, who: str, make_tape=None):
        self.arrays = arrays
        self.names = names
        self.who = who
        self.make_tape = make_tape  # the fields of a nested tape -> a loaded Tape

    def fail(self, where: str, what: str) -> ValueError:
        return ValueError(f"{self.who}: {where}: {what}")

    def value(self, v, where: str, depth: int = 0):
        t = type(v)
        if v is None or t is bool or t is str or t is int or t is float:
            return v
        if depth >= MAX_DEPTH:
            raise self.fail(where, f"nests deeper than {MAX_DEPTH} levels")
        d = depth + 1
        if t is list:
            return [self.value(x, where, d) for x in v]
        if t is not dict or not v:
            raise self.fail(where, f"malformed value {_brief(v)}")
        tag = next(iter(v))
        body = v[tag]

        def need(*more):
            if set(v) != {tag, *more}:
                raise self.fail(where, f"a {tag} record has fields {sorted(v)}, expected "
                                f"{sorted({tag, *more})}")

        if tag == "__float__":
            need()
            if body not in _NONFINITE or type(body) is not str:
                raise self.fail(where, f"{_brief(body)} is not inf, -inf or nan")
            return _NONFINITE[body]
        if tag == "__complex__":
            need()
            parts = [self.value(x, where, d) for x in self._list(body, where)]
            if len(parts) != 2 or not all(type(p) in (int, float) for p in parts):
                raise self.fail(where, f"malformed complex number {_brief(body)}")
            return complex(*parts)
        if tag == "__scalar__":
            need("value")
            dtype = _dtype(body, where, self.who)
            x = self.value(v["value"], where, d)
            if type(x) not in (bool, int, float, complex):
                raise self.fail(where, f"a {dtype} scalar cannot hold {_brief(x)}")
            try:
                with np.errstate(all="ignore"):
                    s = dtype.type(x)
            except (OverflowError, TypeError, ValueError):
                s = None
            if s is None or not (s.item() == x or (s.item() != s.item() and x != x)):
                raise self.fail(where, f"{_brief(x)} is not a {dtype} value")
            return s
        if tag == "__dtype__":
            need()
            return _dtype(body, where, self.who)
        if tag == "__scalar_type__":
            need()
            return _dtype(body, where, self.who).type
        if tag == "__builtin_type__":
            need()
            if type(body) is not str or body not in _BUILTIN_TYPES:
                raise self.fail(where, f"{_brief(body)} is not int, float, complex or bool")
            return _BUILTIN_TYPES[body]
        if tag == "__ellipsis__":
            need()
            if body is not True:
                raise self.fail(where, "malformed ellipsis")
            return Ellipsis
        if tag == "__slice__":
            need()
            parts = self._list(body, where)
            if len(parts) != 3 or not all(p is None or type(p) is int for p in parts):
                raise self.fail(where, f"malformed slice {_brief(body)}")
            return slice(*parts)
        if tag == "__array__":
            if set(v) not in ({tag, "dtype", "shape"}, {tag, "dtype", "shape", "tensor"}):
                raise self.fail(where, f"an array record has fields {sorted(v)}")
            return self.array(v, where)
        if tag == "__tuple__":
            need()
            return tuple([self.value(x, where, d) for x in self._list(body, where)])
        if tag == "__dict__":
            need()
            return self._dict(body, where, d, self.value)
        if tag == "__function__":
            need()
            return self.names.function(body, where, self.who)
        if tag == "__namedtuple__":
            need("fields")
            cls = self.names.namedtuple(body, where, self.who)
            fields = self._list(v["fields"], where)
            if len(fields) != len(cls._fields):
                raise self.fail(where, f"{body} has {len(cls._fields)} fields, the file gives "
                                f"{len(fields)}")
            return cls(*[self.value(x, where, d) for x in fields])
        if tag == "__row__":
            need("name")
            return self.names.row(body, v["name"], where, self.who)
        if tag == "__subprogram__":
            need("name", "tape")
            return self.subprogram(body, v["name"], v["tape"], where)
        raise self.fail(where, f"unknown value kind {_brief(tag)}")

    def subprogram(self, kind, name, doc, where: str):
        """A sub-program: its kind looked up among the registered ones, its tape checked whole
        (as the file's own tape is) and built as a loaded tape."""
        cls = SubProgram.registered(kind)
        if cls is None:
            raise self.fail(where, f"{_brief(kind)} is not a kind of sub-program (known: "
                            f"{sorted(SubProgram._kinds)})")
        if type(name) is not str:
            raise self.fail(where, f"malformed sub-program name {_brief(name)}")
        if self.make_tape is None:
            raise self.fail(where, "a sub-program is read by Tape.from_json only")
        if type(doc) is not dict or set(doc) != _SUB_FIELDS:
            raise self.fail(where, f"malformed sub-program {name!r}: fields "
                            f"{sorted(doc) if type(doc) is dict else _brief(doc)}, expected "
                            f"{sorted(_SUB_FIELDS)}")
        inner = _Reader(self.arrays, self.names, f"{self.who}: {where}, sub-program {name!r}")
        inner.make_tape = self.make_tape
        return cls(self.make_tape(_load_tape(doc, inner, inner.who)), name)

    def array(self, v, where: str):
        key = v["__array__"]
        if type(key) is not str or key not in self.arrays:
            raise self.fail(where, f"the arrays file has no array {_brief(key)}")
        dtype = _dtype(v["dtype"], where, self.who)
        shape = _shape(v["shape"], where, self.who)
        tensor = v.get("tensor", False)
        if type(tensor) is not bool:
            raise self.fail(where, f"malformed array record (tensor={_brief(tensor)})")
        arr = self.arrays[key]
        if dtype.kind == "c":
            part = np.dtype(f"f{dtype.itemsize // 2}")
            if arr.dtype != part or arr.shape != (*shape, 2):
                raise self.fail(where, f"array {key!r} has shape {arr.shape} and dtype "
                                f"{arr.dtype}; a {dtype} array of shape {shape} is stored as "
                                f"{(*shape, 2)} {part}")
            arr = (arr[..., 0] + 1j * arr[..., 1]).astype(dtype)
        if arr.dtype != dtype or arr.shape != shape:
            raise self.fail(where, f"array {key!r} has shape {arr.shape} and dtype {arr.dtype}; "
                            f"the tape expects {shape} and {dtype}")
        return const(arr) if tensor else arr

    def key(self, k, where: str, depth: int):
        k = self.value(k, where, depth)
        if not _plain_key(k):
            raise self.fail(where, f"the dict key {_brief(k)} is not a str, number, bool, None "
                            "or tuple of them")
        return k

    def _dict(self, body, where: str, depth: int, read) -> dict:
        """A dict written as a list of ``[key, value]`` pairs, each value read by ``read``."""
        out = {}
        for pair in self._list(body, where):
            if type(pair) is not list or len(pair) != 2:
                raise self.fail(where, f"malformed dict item {_brief(pair)}")
            k = self.key(pair[0], where, depth)
            if k in out:
                raise self.fail(where, f"the dict key {_brief(k)} appears twice")
            out[k] = read(pair[1], where, depth)
        return out

    def _list(self, x, where: str) -> list:
        if type(x) is not list:
            raise self.fail(where, f"expected a list, got {_brief(x)}")
        return x

    def structure(self, s, n: int, where: str, top_tuple: bool):
        obj = self._struct(s, where, 0)
        if top_tuple and type(obj) is not tuple:
            raise self.fail(where, "the inputs' structure must be a tuple (one item per "
                            "positional input)")
        try:
            leaves, treedef = tree_flatten(obj, is_leaf=lambda x: type(x) is _Leaf)
        except (TypeError, ValueError) as e:
            raise self.fail(where, f"not a pytree structure ({e})") from None
        if [int(x) for x in leaves] != list(range(n)):
            raise self.fail(where, f"the structure does not list leaves 0..{n - 1} once each")
        return treedef

    def _struct(self, s, where: str, depth: int):
        if type(s) is not dict or len(s) != 1:
            raise self.fail(where, f"malformed pytree structure {_brief(s)}")
        (kind, body), = s.items()
        if kind == "leaf":
            if type(body) is not int or body < 0:
                raise self.fail(where, f"malformed leaf {_brief(body)}")
            return _Leaf(body)
        if kind == "none":
            if body is not True:
                raise self.fail(where, f"malformed None record {_brief(body)}")
            return None
        if depth >= MAX_DEPTH:
            raise self.fail(where, f"the structure nests deeper than {MAX_DEPTH} containers")
        d = depth + 1
        if kind == "tuple":
            return tuple([self._struct(x, where, d) for x in self._list(body, where)])
        if kind == "list":
            return [self._struct(x, where, d) for x in self._list(body, where)]
        if kind == "dict":
            return self._dict(body, where, d, self._struct)
        raise self.fail(where, f"unknown pytree node kind {_brief(kind)}")


def _plain_key(k) -> bool:
    if k is None or type(k) in (bool, int, float, str):
        return True
    return type(k) is tuple and all(_plain_key(x) for x in k)


def _shape(s, where: str, who: str) -> tuple:
    if (type(s) is not list or len(s) > _MAX_NDIM
            or not all(type(n) is int and n >= 0 for n in s)
            or math.prod(s) >= 2**63 or any(n >= 2**63 for n in s)):
        raise ValueError(f"{who}: {where}: shape {_brief(s)} is not a list of at most "
                         f"{_MAX_NDIM} non-negative ints")
    return tuple(s)


def _aval_out(a, where: str, who: str) -> list:
    shape, dtype = a
    return [[int(n) for n in shape], _dtype_str(dtype, where, who)]


def _aval_in(a, where: str, who: str) -> tuple:
    if type(a) is not list or len(a) != 2:
        raise ValueError(f"{who}: {where}: malformed shape and dtype {_brief(a)}")
    return _shape(a[0], where, who), _dtype(a[1], where, who)


def _identifier(name) -> bool:
    return type(name) is str and name.isidentifier() and not keyword.iskeyword(name)


def _check_names(params, where: str, who: str) -> None:
    """Parameter names are Python identifiers (not keywords, not jit's ``into``)."""
    for k in params:
        if not _identifier(k) or k == "into":
            raise ValueError(
                f"{who}: {where}: the parameter name {_brief(k)} is not "
                + ("one a tape may hold ('into' is jit's buffer argument)" if k == "into"
                   else "a Python identifier")
            )


_SIGNATURES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _check_call(fn, n_in: int, params: dict, where: str, who: str) -> None:
    """That ``fn.forward(ctx, *n_in inputs, **params)`` binds: arity and parameter names."""
    sig = _SIGNATURES.get(fn)
    if sig is None:
        try:
            sig = _SIGNATURES[fn] = inspect.signature(fn.forward)
        except (TypeError, ValueError):  # a forward Python cannot describe: checked when run
            return
    try:
        sig.bind(None, *([None] * n_in), **params)
    except TypeError as e:
        raise ValueError(f"{who}: {where}: {fn.__qualname__}.forward does not take "
                         f"{n_in} input(s) and the parameters {sorted(params)}: {e}") from None


# -- the methods -----------------------------------------------------------------------------
def tape_to_json(tape, arrays=None) -> str:
    """The tape as JSON text: primitives, static parameters, shapes, dtypes, guards.

    A control-flow entry (``scan``, ``while_loop``, ``cond``/``switch``) holds its bodies as
    sub-programs (:class:`~tapegrad.core.subprogram.SubProgram`): each body's tape is written
    nested in the entry's parameters, in the same form as the file's own tape.

    Constant arrays on the tape (a weight closed over by the traced function, a Python list
    turned into an array, ...) are written to the safetensors file ``arrays``, atomically
    (:func:`tapegrad.io.save`); the JSON names the file and its SHA-256. A tape with no
    constant arrays needs no file.

    Args:
        tape: The :class:`~tapegrad.core.tape.Tape`.
        arrays: Path of the safetensors file for the tape's constant arrays (str or
            path-like), or None when the tape holds none.

    Returns:
        The JSON text (a str). :meth:`Tape.from_json` loads it back.

    Raises:
        ValueError: if the tape holds constant arrays and ``arrays`` is None; if a parameter
            cannot be written (a Python function, as ``checkpoint``'s body or a ``custom_vjp``
            rule holds, another object with no file form, a parameter name that is not a
            Python identifier, a non-numeric dtype, or containers nested deeper than
            ``MAX_DEPTH`` = 256), naming the entry and parameter; if an input or output
            pytree holds containers other than tuples, lists, dicts and None.

    """
    who = "Tape.to_json"
    w = _Writer(who)
    doc = {"format": FORMAT, "version": VERSION, **_tape_doc(w, tape, ""), "arrays": None}
    if w.arrays:
        if arrays is None:
            raise ValueError(
                f"{who}: the tape holds {len(w.arrays)} constant array(s); give a path for them: "
                "tape.to_json(arrays='consts.safetensors')"
            )
        _io.save(arrays, w.arrays)
        path = os.fsdecode(os.fspath(arrays))
        doc["arrays"] = {"file": path, "sha256": hashlib.sha256(_io._read_file(path)).hexdigest()}
    return json.dumps(doc, allow_nan=False)


def _tape_doc(w: _Writer, tape, prefix: str) -> dict:
    """The fields of a tape (the file's, or a sub-program's nested in a parameter) but its
    format, version and arrays record; constant arrays go to ``w.arrays``. ``prefix``: where
    a sub-program sits, for messages (empty for the file's tape)."""
    who = w.who
    at_ = (prefix + " ") if prefix else ""
    entries = []
    for i, e in enumerate(tape.entries):
        if type(e) is Guard:
            entries.append({"guard": e.kind, "node": e.node,
                            "value": w.value(e.value, f"{at_}guard {i}"), "where": str(e.where)})
            continue
        at = f"{at_}entry {i} ({e.oper})"
        name = _qualname(e.fn)
        if w.names.functions.get(name) is not e.fn:
            raise ValueError(f"{who}: {at}: the Function {name} cannot be named uniquely "
                             "(another class has the same module and name)")
        _check_names(e.params, at, who)
        entries.append({
            "op": name,
            "params": {k: w.value(v, f"parameter {k!r} of {at}") for k, v in e.params.items()},
            "in": list(e.in_nodes),
            "consts": [None if n >= 0 else w.value(c, f"constant input {j} of {at}")
                       for j, (n, c) in enumerate(zip(e.in_nodes, e.consts))],
            "out": list(e.out_nodes),
        })
    return {
        "inputs": list(tape.in_nodes),
        "in_avals": [_aval_out(a, f"{at_}input {j}", who) for j, a in enumerate(tape.in_avals)],
        "in_tree": w.structure(tape.in_treedef, len(tape.in_nodes), f"{at_}input"),
        "avals": [_aval_out(a, f"{at_}node {n}", who) for n, a in enumerate(tape.avals)],
        "entries": entries,
        "outputs": [r if isinstance(r, int) else {"const": w.value(r[1], f"{at_}output {j}")}
                    for j, r in enumerate(tape.out_refs)],
        "out_avals": [_aval_out(a, f"{at_}output {j}", who)
                      for j, a in enumerate(tape.out_avals)],
        "out_tree": w.structure(tape.out_treedef, len(tape.out_refs), f"{at_}output"),
        "labels": [[n, str(label)] for n, label in tape.labels.items()],
    }


def tape_fields(text, arrays=None, make_tape=None) -> dict:
    """Load a tape written by :meth:`Tape.to_json`.

    The file is data: loading runs none of it and imports nothing. Primitives are looked up
    among the Function classes already defined (import the module that defines one outside
    tapegrad first); every entry is checked (node ids, the order values are defined and used,
    arity, parameter names the Function accepts, shapes, dtypes, guards, structures) before the
    tape is built. A sub-program nested in a parameter (a loop body, a branch) is checked the
    same way, its kind looked up among the registered sub-program classes only, and a
    control-flow entry's parameters are checked against its bodies (arity, the carry's shapes
    and dtypes, a boolean predicate, branches that agree). The loaded tape prints, replays
    (:meth:`Tape.replay`, which differentiates and batches on traced inputs) and compiles
    (``jit``) like the original; its first replay runs each entry as written and checks its
    outputs' shapes and dtypes against the file. It
    holds no residuals, so it has no :meth:`Tape.vjp` of its own: differentiate its replay
    instead (``tg.vjp(tape.replay, x)``).

    The constants file's SHA-256 detects damage, not deliberate edits: a file re-signed with
    changed values, shapes or dtypes loads as written.

    Args:
        text: The JSON text (str or bytes).
        arrays: Path of the constants file, when it moved since it was written (default: the
            path the JSON names).
        make_tape: Builds a loaded :class:`~tapegrad.core.tape.Tape` from the fields of a
            sub-program's nested tape (``Tape.from_json`` passes it; without it a file holding
            sub-programs is refused).

    Returns:
        The keyword fields of the :class:`~tapegrad.core.tape.Tape` (``Tape.from_json`` builds it).

    Raises:
        TypeError: if ``text`` is not str or bytes, or ``arrays`` is not a path.
        ValueError: if the text is not a tapegrad tape of a known version, or is malformed in
            any way (naming the entry or field): a primitive or type that is not defined in
            this process, an unknown value kind, a non-numeric dtype, a node used before it is
            defined or defined twice, a node id out of range, an arity or parameter name the
            Function does not accept, a bad shape, nesting deeper than ``MAX_DEPTH`` = 256, a
            malformed sub-program or one that disagrees with its entry; if
            the arrays file is missing or not a regular file, or its bytes do not match the
            digest the JSON recorded, or an array's shape or dtype differs.
    """
    who = "Tape.from_json"
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode(json.detect_encoding(text))
        except (UnicodeDecodeError, LookupError) as e:
            raise ValueError(f"{who}: not JSON text: {e}") from None
    if not isinstance(text, str):
        raise TypeError(f"{who}: text must be a str or bytes (the JSON Tape.to_json wrote), "
                        f"got {type(text).__name__}")
    if arrays is not None and not isinstance(arrays, (str, bytes, os.PathLike)):
        raise TypeError(f"{who}: arrays must be a path (str or os.PathLike), got "
                        f"{type(arrays).__name__}")
    depth = _io._json_depth(text)
    if depth > _MAX_JSON_DEPTH:
        raise ValueError(f"{who}: the JSON nests {depth} levels deep; a tape file nests at most "
                         f"{_MAX_JSON_DEPTH}")
    try:
        doc = json.loads(text, object_pairs_hook=_io._unique_pairs)
    except (ValueError, RecursionError) as e:
        raise ValueError(f"{who}: not JSON text: {e}") from None
    if type(doc) is not dict or doc.get("format") != FORMAT:
        raise ValueError(f"{who}: not a tapegrad tape (format {FORMAT!r} expected)")
    if doc.get("version") != VERSION or type(doc.get("version")) is not int:
        raise ValueError(f"{who}: tape format version {_brief(doc.get('version'))}; this "
                         f"tapegrad reads version {VERSION}")
    if set(doc) != _TOP_FIELDS:
        raise ValueError(f"{who}: malformed tape file: fields {sorted(doc)}, expected "
                         f"{sorted(_TOP_FIELDS)}")
    try:
        return _load(doc, arrays, who, make_tape)
    except (KeyError, TypeError, IndexError, AttributeError, OverflowError,
            RecursionError) as e:  # a backstop: the checks above name the problem first
        raise ValueError(f"{who}: malformed tape file ({type(e).__name__}: {e})") from None


def _read_arrays(ref, arrays, who: str) -> dict:
    """The constants file's arrays, its bytes checked against the digest before parsing."""
    if ref is None:
        return {}
    if (type(ref) is not dict or set(ref) != {"file", "sha256"} or type(ref["file"]) is not str
            or type(ref["sha256"]) is not str or not _HEX64.fullmatch(ref["sha256"])):
        raise ValueError(f"{who}: malformed arrays record {_brief(ref)}")
    path = os.fsdecode(os.fspath(arrays)) if arrays is not None else ref["file"]
    try:
        data = _io._read_file(path)
    except _io._NotRegular as e:
        raise ValueError(f"{who}: the constants file {path!r} {e}") from None
    except (OSError, ValueError) as e:
        raise ValueError(f"{who}: cannot read the constants file {path!r}: "
                         f"{getattr(e, 'strerror', None) or e}") from None
    if not hmac.compare_digest(hashlib.sha256(data).hexdigest(), ref["sha256"]):
        raise ValueError(f"{who}: the constants file {path!r} is not the one this tape was "
                         "written with (its SHA-256 differs)")
    try:
        tree = _io._load_bytes(data, path)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{who}: the constants file {path!r} cannot be read: {e}") from None
    if type(tree) is not dict or not all(
            type(k) is str and type(a) is np.ndarray for k, a in tree.items()):
        raise ValueError(f"{who}: the constants file {path!r} does not hold a flat set of "
                         "named arrays")
    return tree


def _load(doc: dict, arrays, who: str, make_tape=None) -> dict:
    r = _Reader(_read_arrays(doc["arrays"], arrays, who), _Names(), who, make_tape)
    return _load_tape(doc, r, who)


def _load_tape(doc: dict, r: _Reader, who: str) -> dict:
    """The fields of a tape (the file's, or a sub-program's), every record checked."""
    avals = tuple(_aval_in(a, f"avals[{n}]", who) for n, a in enumerate(r._list(doc["avals"],
                                                                                 "avals")))
    count = len(avals)
    defined: set = set()

    def node(n, where: str) -> int:
        if type(n) is not int or not 0 <= n < count:
            raise ValueError(f"{who}: {where}: node id {_brief(n)} is not one of the tape's "
                             f"{count} nodes (0..{count - 1}; avals lists one shape and dtype "
                             "per node)")
        return n

    def use(n, where: str) -> int:
        if node(n, where) not in defined:
            raise ValueError(f"{who}: {where}: node {n} is used before any input or entry "
                             "defines it")
        return n

    def define(n, where: str) -> int:
        if node(n, where) in defined:
            raise ValueError(f"{who}: {where}: node {n} is defined twice")
        defined.add(n)
        return n

    in_nodes = tuple(define(n, f"input {j}") for j, n in enumerate(r._list(doc["inputs"],
                                                                           "inputs")))
    in_avals = tuple(_aval_in(a, f"in_avals[{j}]", who)
                     for j, a in enumerate(r._list(doc["in_avals"], "in_avals")))
    if len(in_avals) != len(in_nodes) or any(a != avals[n] for n, a in zip(in_nodes, in_avals)):
        raise ValueError(f"{who}: in_avals does not give the shape and dtype avals gives each "
                         "input")
    entries = []
    for i, e in enumerate(r._list(doc["entries"], "entries")):
        where = f"entry {i}"
        if type(e) is not dict or not (set(e) == _ENTRY_FIELDS or set(e) == _GUARD_FIELDS):
            raise ValueError(f"{who}: {where}: malformed entry {_brief(e)}")
        if "guard" in e:
            entries.append(_guard(e, r, use, avals, where, who))
            continue
        fn = r.names.function(e["op"], where, who)
        where = f"entry {i} ({fn._name()})"
        params = e["params"]
        if type(params) is not dict:
            raise ValueError(f"{who}: {where}: malformed parameters {_brief(params)}")
        _check_names(params, where, who)
        params = {k: r.value(v, f"{where}, parameter {k!r}") for k, v in params.items()}
        ins = r._list(e["in"], where)
        consts = r._list(e["consts"], where)
        if len(consts) != len(ins):
            raise ValueError(f"{who}: {where}: {len(ins)} inputs but {len(consts)} constants")
        ins_ok, consts_ok = [], []
        for j, (n, c) in enumerate(zip(ins, consts)):
            if n == -1 and type(n) is int:
                consts_ok.append(r.value(c, f"{where}, constant input {j}"))
            else:
                use(n, f"{where}, input {j}")
                if c is not None:
                    raise ValueError(f"{who}: {where}: input {j} is node {n} and also a "
                                     "constant")
                consts_ok.append(None)
            ins_ok.append(n)
        _check_call(fn, len(ins_ok), params, where, who)
        check = getattr(fn, "check_loaded", None)
        if check is not None:  # what the primitive's parameters must agree on
            try:
                check(len(ins_ok), params)
            except (TypeError, ValueError) as err:
                raise ValueError(f"{who}: {where}: {err}") from None
        outs = tuple(define(n, f"{where}, output {j}")
                     for j, n in enumerate(r._list(e["out"], where)))
        entries.append(TapeEntry(fn, params, None, tuple(ins_ok), tuple(consts_ok), outs))
    out_refs = []
    for j, o in enumerate(r._list(doc["outputs"], "outputs")):
        if type(o) is dict and set(o) == {"const"}:
            c = r.value(o["const"], f"output {j}")
            if not isinstance(c, Tensor):
                raise ValueError(f"{who}: output {j}: a constant output must be an array, got "
                                 f"{_brief(c)}")
            out_refs.append(("const", c))
        else:
            out_refs.append(use(o, f"output {j}"))
    out_avals = tuple(_aval_in(a, f"out_avals[{j}]", who)
                      for j, a in enumerate(r._list(doc["out_avals"], "out_avals")))
    if len(out_avals) != len(out_refs) or any(
            a != (avals[o] if isinstance(o, int) else (o[1].shape, o[1].dtype))
            for o, a in zip(out_refs, out_avals)):
        raise ValueError(f"{who}: out_avals does not give each output's shape and dtype")
    labels: dict = {}
    for j, item in enumerate(r._list(doc["labels"], "labels")):
        if type(item) is not list or len(item) != 2 or type(item[1]) is not str:
            raise ValueError(f"{who}: labels[{j}]: malformed label {_brief(item)}")
        n = node(item[0], f"labels[{j}]")
        if n in labels:
            raise ValueError(f"{who}: labels[{j}]: node {n} is labelled twice")
        labels[n] = item[1]
    return dict(
        entries=tuple(entries),
        in_nodes=in_nodes,
        in_avals=in_avals,
        in_treedef=r.structure(doc["in_tree"], len(in_nodes), "in_tree", True),
        out_refs=tuple(out_refs),
        out_avals=out_avals,
        out_treedef=r.structure(doc["out_tree"], len(out_refs), "out_tree", False),
        avals=avals,
        labels=labels,
    )


def _guard(e: dict, r: _Reader, use, avals, where: str, who: str) -> Guard:
    kind = e["guard"]
    if type(kind) is not str or kind not in _GUARD_FNS:
        raise ValueError(f"{who}: {where}: unknown guard kind {_brief(kind)}")
    where = f"{where} (guard {kind})"
    n = use(e["node"], where)
    shape, dtype = avals[n]
    value = r.value(e["value"], where)
    if kind == "numpy":  # the whole value read out: an array of the node's shape and dtype
        if not (isinstance(value, np.ndarray) and value.shape == tuple(shape)
                and value.dtype == dtype):
            raise ValueError(f"{who}: {where}: the recorded value is not an array of node "
                             f"{n}'s shape {tuple(shape)} and dtype {dtype}")
    elif math.prod(shape) != 1 or (kind in ("int", "float") and dtype.kind == "c"):
        raise ValueError(f"{who}: {where}: a {kind} decision cannot be taken on node {n} "
                         f"({dtype} of shape {shape})")
    elif type(value) not in _GUARD_VALUES[kind]:
        raise ValueError(f"{who}: {where}: the recorded value {_brief(value)} is not what "
                         f"{kind}() gives")
    if type(e["where"]) is not str:
        raise ValueError(f"{who}: {where}: malformed source location {_brief(e['where'])}")
    return Guard(kind, n, value, e["where"])


