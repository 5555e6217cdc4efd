"""Checkpoints: save and load pytrees (parameters, Module state, Optimizer state) on safetensors.

A checkpoint is one safetensors file. Every array leaf (Tensor, NumPy/CuPy array, NumPy
scalar) is a tensor named by its pytree path (``"tree['layer']['w']"``); the container structure
(dicts with their key order, OrderedDicts, lists, tuples, namedtuples, ``None``) and the Python
scalar leaves (``int``, ``float``, ``bool``, ``str``: step counters, hyperparameters) are JSON in
the file's metadata, with a SHA-256 digest of the tensor data. There is no pickle: loading an
untrusted file cannot run code, and it yields only containers, arrays and plain scalars.

Writes are atomic: the file is written to a temporary file in the same directory, flushed and
fsynced, then renamed over the target with :func:`os.replace`; a crash mid-write leaves the old
file intact. Loading checks the file (truncation, corruption, digest) and, with ``like=``, the
structure, shapes and dtypes against an expected pytree, raising errors that name the file and
the mismatch.

Example:
    >>> import os, tempfile
    >>> import numpy as np
    >>> import tapegrad as tg
    >>> from tapegrad import io
    >>> tree = {"w": tg.Tensor(np.ones((2, 3), np.float32)), "step": 7, "extra": None}
    >>> path = os.path.join(tempfile.mkdtemp(), "ckpt.safetensors")
    >>> io.save(path, tree)
    >>> back = io.load(path, like=tree)
    >>> back["step"], back["w"].shape, back["w"].dtype, back["extra"]
    (7, (2, 3), dtype('float32'), None)
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import os
import tempfile
from typing import Any

import numpy as np
import optree

from tapegrad import backend as _backend
from tapegrad.tensor import Tensor
from tapegrad.tree import NAMESPACE, tree_flatten_with_path, tree_unflatten

__all__ = ["save", "load", "CheckpointError"]

_FORMAT = "tapegrad.io"
_VERSION = 1
_META_KEY = "tapegrad"
_PREFIX = "tree"
_SCALARS = (bool, int, float, str)
_DTYPES = frozenset(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
    + ["float16", "float32", "float64", "complex64"]
)


class CheckpointError(ValueError):
    """A checkpoint file is unreadable, corrupted, or does not match the expected pytree."""


# -- encoding ---------------------------------------------------------------------------------
def _encode_key(key, where: str):
    if isinstance(key, str):
        return ["s", key]
    if isinstance(key, int) and not isinstance(key, bool):
        return ["i", key]
    raise TypeError(
        f"io.save: dict key {key!r} ({type(key).__name__}) at {where} cannot be stored; "
        "checkpoint dict keys must be str or int."
    )


def _decode_key(enc):
    kind, value = enc
    if kind == "s" and isinstance(value, str):
        return value
    if kind == "i" and isinstance(value, int):
        return value
    raise ValueError(f"bad dict key record {enc!r}")


def _leaf_array(leaf):
    """``(kind, host_array)`` for an array leaf, else ``None``."""
    if isinstance(leaf, Tensor):
        return "tensor", _backend.to_device(leaf._array, "cpu")
    if isinstance(leaf, np.ndarray):
        return "ndarray", leaf
    if isinstance(leaf, np.generic):
        return "generic", np.asarray(leaf)
    if hasattr(leaf, "__cuda_array_interface__") and hasattr(leaf, "get"):
        return "ndarray", leaf.get()
    return None


def _encode(node, counter: list, where: str):
    """JSON structure of ``node``; leaves become ``{"leaf": index}`` in optree flatten order."""
    if optree.tree_is_leaf(node, namespace=NAMESPACE):
        counter[0] += 1
        return {"leaf": counter[0] - 1}
    one = optree.tree_flatten_one_level(node, namespace=NAMESPACE)
    t = type(node)
    if t is dict or t is collections.OrderedDict:
        keys = list(one.entries)
        children = [_encode(c, counter, f"{where}[{k!r}]") for k, c in zip(keys, one.children)]
        position = {k: i for i, k in enumerate(keys)}
        return {
            "dict" if t is dict else "odict": [_encode_key(k, where) for k in keys],
            "children": children,
            "order": [position[k] for k in node.keys()],
        }
    if t is list or t is tuple:
        children = [_encode(c, counter, f"{where}[{i}]") for i, c in enumerate(one.children)]
        return {t.__name__: children}
    if node is None:
        return {"none": None}
    if optree.is_namedtuple_instance(node):
        children = [_encode(c, counter, f"{where}.{f}") for f, c in zip(t._fields, one.children)]
        return {"namedtuple": t.__name__, "fields": list(t._fields), "children": children}
    children = [_encode(c, counter, f"{where}[{i}]") for i, c in enumerate(one.children)]
    return {"node": f"{t.__module__}.{t.__qualname__}", "children": children}


def _decode(struct, leaves: list, path: str):
    if not isinstance(struct, dict) or len(struct) == 0:
        raise ValueError(f"bad structure record at {path}")
    if "leaf" in struct:
        return leaves[struct["leaf"]]
    for kind in ("dict", "odict"):
        if kind in struct:
            keys = [_decode_key(k) for k in struct[kind]]
            children = [_decode(c, leaves, path) for c in struct["children"]]
            if len(keys) != len(children) or sorted(struct["order"]) != list(range(len(keys))):
                raise ValueError(f"bad dict record at {path}")
            items = [(keys[i], children[i]) for i in struct["order"]]
            return dict(items) if kind == "dict" else collections.OrderedDict(items)
    if "list" in struct:
        return [_decode(c, leaves, path) for c in struct["list"]]
    if "tuple" in struct:
        return tuple(_decode(c, leaves, path) for c in struct["tuple"])
    if "none" in struct:
        return None
    if "namedtuple" in struct:
        cls = collections.namedtuple(struct["namedtuple"], struct["fields"])
        return cls(*[_decode(c, leaves, path) for c in struct["children"]])
    if "node" in struct:
        raise TypeError(
            f"it holds a {struct['node']} pytree node at {path}, which only load(path, like=...) "
            "can rebuild (pass a pytree of the same structure as like)"
        )
    raise ValueError(f"unknown structure record {sorted(struct)} at {path}")


def _digest(names: list, arrays: dict) -> str:
    h = hashlib.sha256()
    for n in names:
        a = arrays[n]
        h.update(n.encode())
        h.update(str(a.dtype).encode())
        h.update(repr(tuple(a.shape)).encode())
        h.update(a.tobytes(order="C"))
    return h.hexdigest()


def _serialize(tree) -> bytes:
    import safetensors.numpy as stn

    paths, leaves, _ = tree_flatten_with_path(tree, prefix=_PREFIX)
    if len(set(paths)) != len(paths):
        raise TypeError("io.save: two leaves of the pytree have the same path; cannot store it")
    structure = _encode(tree, [0], _PREFIX)
    records, arrays = [], {}
    for path, leaf in zip(paths, leaves):
        got = _leaf_array(leaf)
        if got is not None:
            kind, arr = got
            if arr.dtype.name not in _DTYPES:
                raise TypeError(
                    f"io.save: leaf {path} has dtype {arr.dtype}, which safetensors cannot "
                    f"store; supported: {', '.join(sorted(_DTYPES))}. Cast it first."
                )
            if not arr.dtype.isnative:
                arr = arr.astype(arr.dtype.newbyteorder("="))
            arrays[path] = arr if arr.flags.c_contiguous else arr.copy(order="C")
            records.append({"kind": kind, "path": path, "name": path})
        elif type(leaf) in _SCALARS:
            records.append({"kind": type(leaf).__name__, "path": path, "value": leaf})
        else:
            raise TypeError(
                f"io.save: leaf {path} is a {type(leaf).__name__}; checkpoints hold Tensors, "
                "NumPy/CuPy arrays, NumPy scalars and Python int/float/bool/str leaves."
            )
    names = [r["name"] for r in records if "name" in r]
    meta = {
        "format": _FORMAT,
        "version": _VERSION,
        "tree": structure,
        "leaves": records,
        "sha256": _digest(names, arrays),
    }
    return stn.save(arrays, metadata={_META_KEY: json.dumps(meta, allow_nan=True)})


# -- atomic write -----------------------------------------------------------------------------
def _write_all(f, data: bytes) -> None:
    """Write ``data`` to the open file ``f`` (a seam for tests that simulate a crash)."""
    f.write(data)


def _default_mode(path: str) -> int:
    try:
        return os.stat(path).st_mode & 0o777
    except FileNotFoundError:  # a new file gets the usual 0o666 & ~umask (read, then restored)
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def _atomic_write(path: str, data: bytes) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    mode = _default_mode(path)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            _write_all(f, data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # make the rename durable where the OS allows it
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def save(path, tree) -> None:
    """Write the pytree ``tree`` to ``path`` as a safetensors checkpoint, atomically.

    Args:
        path: File path (str or path-like); its directory must exist. An existing file is
            replaced only once the new one is completely on disk.
        tree: Pytree of Tensors, NumPy/CuPy arrays, NumPy scalars and Python int/float/bool/str
            leaves, in dicts (str or int keys), OrderedDicts, lists, tuples, namedtuples and
            ``None``; for example ``params``, ``module.state_dict()`` or
            ``optimizer.state_dict()``. Other registered pytree nodes are stored too but need
            ``like=`` to load. Array dtypes: bool, (u)int8-64, float16/32/64, complex64.
            GPU arrays are copied to the host.

    Raises:
        TypeError: for an unsupported leaf, dict key or dtype (naming its path).
        OSError: if the file cannot be written (the old file, if any, is left intact).
    """
    data = _serialize(tree)
    _atomic_write(os.fspath(path), data)


# -- load -------------------------------------------------------------------------------------
def _read(path: str):
    import safetensors.numpy as stn

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise CheckpointError(f"io.load: cannot read {path!r}: {e.strerror or e}") from None
    try:
        arrays = stn.load(data)
    except Exception as e:  # SafetensorError: truncated, bad header, ...
        raise CheckpointError(
            f"io.load: {path!r} is not a readable safetensors file (truncated or corrupted?): {e}"
        ) from None
    try:
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + n])
        meta = json.loads(header["__metadata__"][_META_KEY])
        if meta.get("format") != _FORMAT:
            raise KeyError("format")
    except (KeyError, TypeError, ValueError):
        raise CheckpointError(
            f"io.load: {path!r} is a safetensors file but not a tapegrad checkpoint (no "
            "tapegrad metadata); read it with safetensors directly."
        ) from None
    if meta.get("version") != _VERSION:
        raise CheckpointError(
            f"io.load: {path!r} has checkpoint format version {meta.get('version')!r}; this "
            f"tapegrad reads version {_VERSION}."
        )
    return arrays, meta


def _rebuild_leaves(path: str, arrays: dict, meta: dict) -> list:
    names, leaves = [], []
    try:
        records = meta["leaves"]
        for r in records:
            kind = r["kind"]
            if not isinstance(r["path"], str):
                raise ValueError(f"leaf record {r!r}")
            if kind in ("tensor", "ndarray", "generic"):
                name = r["name"]
                arr = arrays[name]
                names.append(name)
                if kind == "tensor":
                    leaves.append(Tensor(arr))
                elif kind == "ndarray":
                    leaves.append(arr)
                else:
                    leaves.append(arr[()])
            elif kind in ("bool", "int", "float", "str"):
                value = r["value"]
                want = {"bool": bool, "int": int, "float": float, "str": str}[kind]
                if kind == "float" and isinstance(value, int) and not isinstance(value, bool):
                    value = float(value)
                if type(value) is not want:
                    raise ValueError(f"scalar record {r!r}")
                leaves.append(value)
            else:
                raise ValueError(f"unknown leaf kind {kind!r}")
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"io.load: {path!r} has corrupted metadata: {e}") from None
    extra = sorted(set(arrays) - set(names))
    if extra or len(names) != len(set(names)):
        raise CheckpointError(
            f"io.load: {path!r} is corrupted: its tensors {extra} are not in its structure"
        )
    if _digest(names, arrays) != meta.get("sha256"):
        raise CheckpointError(
            f"io.load: {path!r} is corrupted: the tensor data does not match its SHA-256 digest"
        )
    return leaves


def _describe(leaf) -> str:
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
        return f"{type(leaf).__name__} of shape {tuple(leaf.shape)}, dtype {leaf.dtype}"
    return f"{type(leaf).__name__} {leaf!r}"


def _check_like(path: str, meta: dict, leaves: list, like) -> Any:
    want_paths, want_leaves, treedef = tree_flatten_with_path(like, prefix=_PREFIX)
    got_paths = [r["path"] for r in meta["leaves"]]
    if got_paths != want_paths:
        missing = [p for p in want_paths if p not in set(got_paths)]
        unexpected = [p for p in got_paths if p not in set(want_paths)]
        detail = []
        if missing:
            detail.append(f"missing keys {missing}")
        if unexpected:
            detail.append(f"unexpected keys {unexpected}")
        if not detail:
            detail.append("the same keys in a different structure")
        raise CheckpointError(f"io.load: {path!r} does not match like=: " + "; ".join(detail))
    for p, got, want in zip(want_paths, leaves, want_leaves):
        if hasattr(want, "shape") and hasattr(want, "dtype"):
            ok = (
                hasattr(got, "shape")
                and tuple(got.shape) == tuple(want.shape)
                and np.dtype(got.dtype) == np.dtype(want.dtype)
            )
        else:
            ok = type(got) is type(want)
        if not ok:
            raise CheckpointError(
                f"io.load: {path!r} does not match like= at {p}: the file has "
                f"{_describe(got)}, like= has {_describe(want)}"
            )
    return tree_unflatten(treedef, leaves)


def load(path, like=None) -> Any:
    """Read a checkpoint written by :func:`save`.

    Args:
        path: File path (str or path-like).
        like: Optional pytree the checkpoint must match: the same leaf paths (keys), and for
            each array leaf of ``like`` the same shape and dtype (for each scalar leaf, the same
            Python type). The result then has ``like``'s container types (namedtuples,
            registered classes) with the file's leaves.

    Returns:
        The pytree: Tensors where Tensors were saved (on the CPU; use ``to_device``), NumPy
        arrays and scalars where those were, Python scalars exactly, containers as saved
        (namedtuples come back as namedtuples of the same name and fields).

    Raises:
        CheckpointError (a ValueError): if the file is missing, truncated or corrupted (bad
            header, digest mismatch), is not a tapegrad checkpoint, or does not match ``like``
            (listing missing and unexpected keys, or the first shape/dtype difference). Every
            message names the file.
        TypeError: if the file holds a registered pytree node and ``like`` is not given.
    """
    path = os.fspath(path)
    arrays, meta = _read(path)
    leaves = _rebuild_leaves(path, arrays, meta)
    if like is not None:
        try:
            return _check_like(path, meta, leaves, like)
        except (KeyError, TypeError, ValueError, IndexError) as e:
            if isinstance(e, CheckpointError):
                raise
            raise CheckpointError(f"io.load: {path!r} has a corrupted structure: {e}") from None
    try:
        tree = _decode(meta["tree"], leaves, _PREFIX)
    except TypeError as e:
        raise TypeError(f"io.load: {path!r}: {e}") from None
    except (KeyError, ValueError, IndexError) as e:
        raise CheckpointError(f"io.load: {path!r} has a corrupted structure: {e}") from None
    return tree
