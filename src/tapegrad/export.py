"""Tapes as files: :meth:`Tape.to_json` and :meth:`Tape.from_json`, with no pickle.

A tape is written as JSON (format ``tapegrad.tape``, version 1): each entry's primitive by its
importable name (``"tapegrad.ops.elementwise:Sin"``), its static parameters, the node ids of
its inputs and outputs, the shape and dtype of every node, the Python decisions (guards), and
the input and output pytree structures. Arrays the tape holds as constants are not put in the
JSON: they go to a safetensors file (written with :func:`tapegrad.io.save`, atomically and with
a digest), which the JSON names together with the SHA-256 of its bytes.

Loading never runs code from the file: primitives are looked up among the
:class:`~tapegrad.function.Function` classes already defined (a module under ``tapegrad`` is
imported on demand; any other module must be imported by the caller first), parameters are
rebuilt from a fixed set of value kinds, and the arrays file is checked byte for byte against
the digest before it is read.

Importing this module attaches the two methods to :class:`~tapegrad.tape.Tape` (``import
tapegrad`` does it).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import os
import sys

import numpy as np

from tapegrad import backend as _backend
from tapegrad import io as _io
from tapegrad.function import Function
from tapegrad.tape import Guard, Tape, TapeEntry
from tapegrad.tensor import Tensor, const
from tapegrad.tree import tree_flatten, tree_unflatten

__all__ = ["tape_to_json", "tape_from_json"]

FORMAT, VERSION = "tapegrad.tape", 1


class _Leaf(int):
    """A placeholder leaf (its position) while a pytree structure is written."""


def _qualname(obj) -> str:
    return f"{obj.__module__}:{obj.__qualname__}"


def _resolve(name: str, who: str):
    """The object named ``module:qualname``, importing only modules under ``tapegrad``."""
    if not isinstance(name, str) or name.count(":") != 1:
        raise ValueError(f"{who}: {name!r} is not a 'module:qualname' name")
    mod_name, qual = name.split(":")
    mod = sys.modules.get(mod_name)
    if mod is None:
        if mod_name != "tapegrad" and not mod_name.startswith("tapegrad."):
            raise ValueError(
                f"{who}: {name!r} lives in module {mod_name!r}, which is not imported; import "
                "the module that defines it before loading (a file never imports other code)"
            )
        try:
            mod = importlib.import_module(mod_name)
        except ImportError as e:
            raise ValueError(f"{who}: no module {mod_name!r} for {name!r}") from e
    obj = mod
    for part in qual.split("."):
        if part.startswith("__") or not hasattr(obj, part):
            raise ValueError(f"{who}: {mod_name!r} defines no {qual!r}")
        obj = getattr(obj, part)
    return obj


# -- values ----------------------------------------------------------------------------------
class _Writer:
    def __init__(self, where: str):
        self.arrays: dict = {}
        self.where = where

    def array(self, arr) -> dict:
        arr = np.asarray(_backend.to_device(arr, "cpu"))
        if not arr.flags.c_contiguous:
            arr = arr.copy(order="C")
        key = f"a{len(self.arrays)}"
        rec = {"__array__": key, "dtype": arr.dtype.str, "shape": list(arr.shape)}
        if arr.dtype.kind == "c":  # stored as its real and imaginary parts (trailing axis)
            arr = np.stack([arr.real, arr.imag], axis=-1)  # pyright: ignore[reportAttributeAccessIssue]
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("="))
        self.arrays[key] = arr
        return rec

    def value(self, v, where: str):
        """``v`` as JSON (tagged dicts for what JSON has no type for)."""
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int) and type(v) in (int, _Leaf):
            return int(v)
        if type(v) is float:
            return v if math.isfinite(v) else {"__float__": repr(v)}
        if type(v) is complex:
            return {"__complex__": [self.value(v.real, where), self.value(v.imag, where)]}
        if isinstance(v, np.generic):
            return {"__scalar__": v.dtype.str, "value": self.value(v.item(), where)}
        if isinstance(v, np.dtype):
            return {"__dtype__": v.str}
        if isinstance(v, type) and issubclass(v, np.generic):
            return {"__scalar_type__": np.dtype(v).str}
        if isinstance(v, type) and v in (int, float, complex, bool):
            return {"__builtin_type__": v.__name__}
        if v is Ellipsis:
            return {"__ellipsis__": True}
        if type(v) is slice:
            return {"__slice__": [self.value(p, where) for p in (v.start, v.stop, v.step)]}
        if isinstance(v, Tensor):
            if v.is_traced:
                raise ValueError(f"{self.where}: {where} is a traced Tensor; only constants "
                                 "are exported")
            return dict(self.array(v._array), tensor=True)
        if isinstance(v, np.ndarray) or type(v).__module__.startswith("cupy"):
            return self.array(v)
        if isinstance(v, tuple) and hasattr(v, "_fields"):
            return self.named(v, where)
        if type(v) is tuple:
            return {"__tuple__": [self.value(x, where) for x in v]}
        if type(v) is list:
            return [self.value(x, where) for x in v]
        if type(v) is dict:
            return {"__dict__": [[self.value(k, where), self.value(x, where)]
                                 for k, x in v.items()]}
        if isinstance(v, type) and issubclass(v, Function):
            return {"__function__": _qualname(v)}
        raise ValueError(
            f"{self.where}: {where} is {v!r} (a {type(v).__name__}), which a tape file cannot "
            "hold (Python functions and arbitrary objects are not exported). Trace a function "
            "without it, or export the tape of what runs inside it."
        )

    def named(self, v, where: str):
        cls = type(v)
        try:
            fields = [self.value(x, where) for x in v]
        except ValueError:
            # A table row (a namedtuple holding functions): named by the table that lists it.
            name = getattr(v, "name", None)
            mod = sys.modules.get(cls.__module__)
            for attr, seq in vars(mod).items() if name is not None else ():
                if type(seq) in (list, tuple) and any(r is v for r in seq):
                    return {"__row__": f"{cls.__module__}:{attr}", "name": name}
            raise
        return {"__namedtuple__": _qualname(cls), "fields": fields}

    def structure(self, treedef, n: int, where: str):
        """A pytree structure as nested containers with ``{"leaf": i}`` leaves."""
        return self._struct(tree_unflatten(treedef, [_Leaf(i) for i in range(n)]), where)

    def _struct(self, node, where):
        if type(node) is _Leaf:
            return {"leaf": int(node)}
        if node is None:
            return {"none": True}
        if type(node) is tuple:
            return {"tuple": [self._struct(x, where) for x in node]}
        if type(node) is list:
            return {"list": [self._struct(x, where) for x in node]}
        if type(node) is dict:
            return {"dict": [[self.value(k, where), self._struct(x, where)]
                             for k, x in node.items()]}
        raise ValueError(
            f"{self.where}: the {where} pytree holds a {type(node).__name__}; a tape file keeps "
            "structures of tuples, lists, dicts and None only"
        )


class _Reader:
    def __init__(self, arrays: dict, who: str):
        self.arrays = arrays
        self.who = who

    def value(self, v):
        if v is None or isinstance(v, (bool, str, int, float)):
            return v
        if type(v) is list:
            return [self.value(x) for x in v]
        if type(v) is not dict or len(v) == 0:
            raise ValueError(f"{self.who}: malformed value {v!r}")
        tag = next(iter(v))
        if tag == "__float__":
            return float(v[tag])
        if tag == "__complex__":
            re_, im = (self.value(x) for x in v[tag])
            return complex(re_, im)
        if tag == "__scalar__":
            return np.dtype(v[tag]).type(self.value(v["value"]))
        if tag == "__dtype__":
            return np.dtype(v[tag])
        if tag == "__scalar_type__":
            return np.dtype(v[tag]).type
        if tag == "__builtin_type__":
            return {"int": int, "float": float, "complex": complex, "bool": bool}[v[tag]]
        if tag == "__ellipsis__":
            return Ellipsis
        if tag == "__slice__":
            return slice(*(self.value(x) for x in v[tag]))
        if tag == "__array__":
            key = v[tag]
            if key not in self.arrays:
                raise ValueError(f"{self.who}: the arrays file has no array {key!r}")
            arr = np.asarray(self.arrays[key])
            dtype, shape = np.dtype(v["dtype"]), tuple(v["shape"])
            if dtype.kind == "c":
                arr = (arr[..., 0] + 1j * arr[..., 1]).astype(dtype)
            if arr.dtype != dtype or arr.shape != shape:
                raise ValueError(f"{self.who}: array {key!r} has shape {arr.shape} and dtype "
                                 f"{arr.dtype}; the tape expects {shape} and {dtype}")
            return const(arr) if v.get("tensor") else arr
        if tag == "__tuple__":
            return tuple(self.value(x) for x in v[tag])
        if tag == "__dict__":
            return {self._key(k): self.value(x) for k, x in v[tag]}
        if tag == "__function__":
            fn = _resolve(v[tag], self.who)
            if not (isinstance(fn, type) and issubclass(fn, Function)):
                raise ValueError(f"{self.who}: {v[tag]!r} is not a tapegrad Function")
            return fn
        if tag == "__namedtuple__":
            cls = _resolve(v[tag], self.who)
            if not (isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")):
                raise ValueError(f"{self.who}: {v[tag]!r} is not a namedtuple class")
            return cls(*(self.value(x) for x in v["fields"]))
        if tag == "__row__":
            table = _resolve(v[tag], self.who)
            for row in table if type(table) in (list, tuple) else ():  # pyright: ignore[reportGeneralTypeIssues]
                if getattr(row, "name", None) == v["name"]:
                    return row
            raise ValueError(f"{self.who}: {v[tag]!r} has no row named {v['name']!r}")
        raise ValueError(f"{self.who}: unknown value kind {tag!r}")

    def _key(self, k):
        k = self.value(k)
        return tuple(k) if type(k) is list else k

    def structure(self, s, n: int, where: str):
        obj = self._struct(s)
        leaves, treedef = tree_flatten(obj, is_leaf=lambda x: type(x) is _Leaf)
        if [int(x) for x in leaves] != list(range(n)):
            raise ValueError(f"{self.who}: the {where} structure does not list leaves 0..{n - 1}")
        return treedef

    def _struct(self, s):
        if type(s) is not dict or len(s) != 1:
            raise ValueError(f"{self.who}: malformed pytree structure {s!r}")
        (kind, body), = s.items()
        if kind == "leaf":
            return _Leaf(body)
        if kind == "none":
            return None
        if kind == "tuple":
            return tuple(self._struct(x) for x in body)
        if kind == "list":
            return [self._struct(x) for x in body]
        if kind == "dict":
            return {self._key(k): self._struct(x) for k, x in body}
        raise ValueError(f"{self.who}: unknown pytree node kind {kind!r}")


def _aval(a):
    return [list(a[0]), np.dtype(a[1]).str]


# -- the methods -----------------------------------------------------------------------------
def tape_to_json(self: Tape, arrays=None) -> str:
    """The tape as JSON text: primitives, static parameters, shapes, dtypes, guards.

    Constant arrays on the tape (a weight closed over by the traced function, a Python list
    turned into an array, ...) are written to the safetensors file ``arrays``, atomically
    (:func:`tapegrad.io.save`); the JSON names the file and its SHA-256. A tape with no
    constant arrays needs no file.

    Args:
        arrays: Path of the safetensors file for the tape's constant arrays (str or
            path-like), or None when the tape holds none.

    Returns:
        The JSON text (a str). :meth:`Tape.from_json` loads it back.

    Raises:
        ValueError: if the tape holds constant arrays and ``arrays`` is None; if a parameter
            cannot be written (a Python function, as ``checkpoint``'s body or a ``custom_vjp``
            rule holds, or another object with no file form), naming the entry and parameter;
            if an input or output pytree holds containers other than tuples, lists, dicts and
            None.

    Example:
        >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
        >>> _, tape = tg.trace(lambda x: tnp.sum(tnp.sin(x) * 2.0))(tg.Tensor(np.ones(3)))
        >>> again = tg.Tape.from_json(tape.to_json())
        >>> str(again) == str(tape)
        True
    """
    who = "Tape.to_json"
    w = _Writer(who)
    entries = []
    for i, e in enumerate(self.entries):
        if type(e) is Guard:
            entries.append({"guard": e.kind, "node": e.node,
                            "value": w.value(e.value, f"guard {i}"), "where": e.where})
            continue
        at = f"entry {i} ({e.oper})"
        entries.append({
            "op": _qualname(e.fn),
            "params": {k: w.value(v, f"parameter {k!r} of {at}") for k, v in e.params.items()},
            "in": list(e.in_nodes),
            "consts": [None if n >= 0 else w.value(c, f"constant input {j} of {at}")
                       for j, (n, c) in enumerate(zip(e.in_nodes, e.consts))],
            "out": list(e.out_nodes),
        })
    doc = {
        "format": FORMAT, "version": VERSION,
        "inputs": list(self.in_nodes),
        "in_avals": [_aval(a) for a in self.in_avals],
        "in_tree": w.structure(self.in_treedef, len(self.in_nodes), "input"),
        "avals": [_aval(a) for a in self.avals],
        "entries": entries,
        "outputs": [r if isinstance(r, int) else {"const": w.value(r[1], f"output {j}")}
                    for j, r in enumerate(self.out_refs)],
        "out_avals": [_aval(a) for a in self.out_avals],
        "out_tree": w.structure(self.out_treedef, len(self.out_refs), "output"),
        "labels": [[n, str(label)] for n, label in self.labels.items()],
        "arrays": None,
    }
    if w.arrays:
        if arrays is None:
            raise ValueError(
                f"{who}: the tape holds {len(w.arrays)} constant array(s); give a path for them: "
                "tape.to_json(arrays='consts.safetensors')"
            )
        _io.save(arrays, w.arrays)
        path = os.fspath(arrays)
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        doc["arrays"] = {"file": path, "sha256": digest}
    return json.dumps(doc, allow_nan=False)


def tape_from_json(text, arrays=None) -> Tape:
    """Load a tape written by :meth:`Tape.to_json`.

    The loaded tape prints, replays (:meth:`Tape.replay`, which differentiates and batches on
    traced inputs) and compiles (``jit``) like the original. It holds no residuals, so it has
    no :meth:`Tape.vjp` of its own: differentiate its replay instead
    (``tg.vjp(tape.replay, x)``).

    Args:
        text: The JSON text (str or bytes).
        arrays: Path of the constants file, when it moved since it was written (default: the
            path the JSON names).

    Returns:
        A :class:`Tape`.

    Raises:
        ValueError: if the text is not a tapegrad tape of a known version, is malformed, names
            a primitive that is not defined (a module outside ``tapegrad`` must be imported
            first) or an unknown value kind; if the arrays file is missing, or its bytes do not
            match the digest the JSON recorded, or an array's shape or dtype differs.
    """
    who = "Tape.from_json"
    try:
        doc = json.loads(text)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{who}: not JSON text: {e}") from None
    if type(doc) is not dict or doc.get("format") != FORMAT:
        raise ValueError(f"{who}: not a tapegrad tape (format {FORMAT!r} expected)")
    if doc.get("version") != VERSION:
        raise ValueError(f"{who}: tape format version {doc.get('version')!r}; this tapegrad "
                         f"reads version {VERSION}")
    try:
        return _load(doc, arrays, who)
    except (KeyError, TypeError, IndexError) as e:
        raise ValueError(f"{who}: malformed tape file ({type(e).__name__}: {e})") from None


def _load(doc: dict, arrays, who: str) -> Tape:
    loaded: dict = {}
    ref = doc["arrays"]
    if ref is not None:
        path = os.fspath(arrays) if arrays is not None else ref["file"]
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ValueError(f"{who}: cannot read the constants file {path!r}: {e}") from None
        if hashlib.sha256(data).hexdigest() != ref["sha256"]:
            raise ValueError(f"{who}: the constants file {path!r} is not the one this tape was "
                             "written with (its SHA-256 differs)")
        loaded = _io.load(path)
        loaded = {k: v._array if isinstance(v, Tensor) else v for k, v in loaded.items()}
    r = _Reader(loaded, who)

    def aval(a):
        return (tuple(int(d) for d in a[0]), np.dtype(a[1]))

    entries = []
    for e in doc["entries"]:
        if "guard" in e:
            entries.append(Guard(e["guard"], int(e["node"]), r.value(e["value"]), e["where"]))
            continue
        fn = _resolve(e["op"], who)
        if not (isinstance(fn, type) and issubclass(fn, Function)):
            raise ValueError(f"{who}: {e['op']!r} is not a tapegrad Function")
        ins = tuple(int(n) for n in e["in"])
        consts = tuple(None if n >= 0 else r.value(c) for n, c in zip(ins, e["consts"]))
        entries.append(TapeEntry(fn, {k: r.value(v) for k, v in e["params"].items()}, None,
                                 ins, consts, tuple(int(n) for n in e["out"])))
    in_nodes = tuple(int(n) for n in doc["inputs"])
    outs = doc["outputs"]
    return Tape(
        entries=tuple(entries),
        in_nodes=in_nodes,
        in_avals=tuple(aval(a) for a in doc["in_avals"]),
        in_treedef=r.structure(doc["in_tree"], len(in_nodes), "input"),
        out_refs=tuple(o if isinstance(o, int) else ("const", r.value(o["const"]))
                       for o in outs),
        out_avals=tuple(aval(a) for a in doc["out_avals"]),
        out_treedef=r.structure(doc["out_tree"], len(outs), "output"),
        avals=tuple(aval(a) for a in doc["avals"]),
        labels={int(n): label for n, label in doc["labels"]},
        loaded=True,
    )


def _attach() -> None:
    Tape.to_json = tape_to_json  # pyright: ignore[reportAttributeAccessIssue]
    Tape.from_json = staticmethod(tape_from_json)  # pyright: ignore[reportAttributeAccessIssue]


_attach()
