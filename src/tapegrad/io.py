"""Checkpoints: save and load pytrees (parameters, Module state, Optimizer state) on safetensors.

A checkpoint is one safetensors file (format version 2). Every array leaf (Tensor, NumPy/CuPy
array, NumPy scalar) is a tensor named by its pytree path (``"tree['layer']['w']"``); the
container structure (dicts with their key order, OrderedDicts, lists, tuples, namedtuples,
``None``) and the Python scalar leaves (``int``, ``float``, ``bool``, ``str``: step counters,
hyperparameters) are JSON in the file's metadata (key ``"tapegrad"``). There is no pickle:
loading an untrusted file cannot run code, and it yields only containers, arrays and plain
scalars.

Every byte is verified. The metadata key ``"tapegrad_sha256"`` holds the SHA-256 digest of the
whole file, computed with the digest's own 64 hex digits written as ``"0"`` characters, so it
covers the safetensors header (tensor names, dtypes, shapes, offsets), the structure, the
scalars and the tensor data alike. Loading checks the digest before it trusts anything, then
validates the decoded structure (field types, nesting depth at most ``MAX_DEPTH`` containers,
one record per leaf), so a damaged or hand-edited file raises :class:`CheckpointError` naming
the file instead of loading as a different value. Files of format version 1 (written by earlier
tapegrad releases, whose digest covered only the tensor data) are refused with a
:class:`CheckpointError` that says the version is unsupported.

Writes are atomic: the data goes to a temporary file next to the target, named
``.<name>.tapegrad-tmp-<pid>-<16 hex digits>``, which is flushed and fsynced, then renamed over
the target with :func:`os.replace` (and the directory fsynced on POSIX); a crash mid-write
leaves the old file intact. A save killed outright (``SIGKILL``, power loss) can leave its
temporary file behind; the next :func:`save` to the same path removes such stale files (those
of a process that no longer runs and that no process holds locked), never one that a live save
is writing.

Example:
    >>> import os, tempfile
    >>> import numpy as np
    >>> import tapegrad as tg
    >>> from tapegrad import io
    >>> tree = {"w": tg.Tensor(np.ones((2, 3), np.float32)), "step": 7, "extra": None}
    >>> with tempfile.TemporaryDirectory() as folder:  # removed with its files
    ...     path = os.path.join(folder, "ckpt.safetensors")
    ...     io.save(path, tree)
    ...     back = io.load(path, like=tree)
    >>> back["step"], back["w"].shape, back["w"].dtype, back["extra"]
    (7, (2, 3), dtype('float32'), None)
"""

from __future__ import annotations

import collections
import contextlib
import errno
import hashlib
import hmac
import json
import os
import re
import reprlib
import secrets
import stat
from typing import Any

import numpy as np
import optree

from tapegrad.core import dtypes as _tg_dtypes
from tapegrad.core.tensor import Tensor
from tapegrad.core.tree import NAMESPACE, tree_flatten_with_path, tree_paths, tree_unflatten

try:  # advisory locks tell a live writer's temporary file from a stale one (POSIX)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

__all__ = ["save", "load", "CheckpointError", "MAX_DEPTH"]

_FORMAT = "tapegrad.io"
_VERSION = 2
_META_KEY = "tapegrad"
_DIGEST_KEY = "tapegrad_sha256"
_PREFIX = "tree"
_TMP_TAG = ".tapegrad-tmp-"

MAX_DEPTH = 256
"""Deepest container nesting a checkpoint may hold (the root container is depth 0)."""

# Each container level is a record object holding a list: two JSON levels, plus a few for the
# top-level object and dict-key pairs.
_MAX_JSON_DEPTH = 2 * MAX_DEPTH + 8
_SCALARS = {"bool": bool, "int": int, "float": float, "str": str}
_ARRAY_KINDS = ("tensor", "ndarray", "generic")
_DTYPES = frozenset(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
    + ["float16", "float32", "float64", "complex64", "bfloat16"]
)
_HEX64 = re.compile(r"[0-9a-f]{64}")
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)


class CheckpointError(ValueError):
    """A checkpoint file is unreadable, corrupted, unsupported, or does not match ``like=``."""


class _Corrupt(Exception):
    """Internal: the decoded metadata breaks the format (message says where)."""


def _path_arg(fn: str, path, other, other_name: str, usage: str) -> str:
    """``path`` as a str, or a TypeError that spots the swapped ``torch.save(obj, f)`` order."""
    if isinstance(path, (str, bytes, os.PathLike)):
        return os.fsdecode(os.fspath(path))
    if isinstance(other, (str, bytes, os.PathLike)):
        raise TypeError(
            f"io.{fn}: the arguments are swapped: got a {type(path).__name__} as path and the "
            f"path-like {other!r} as {other_name}. The order is {usage} (unlike torch.{fn}, "
            f"which takes the object first)."
        )
    hint = ""
    if hasattr(path, "read") or hasattr(path, "write"):
        hint = f" io.{fn} takes a path, not a file object, so that it can replace files atomically."
    raise TypeError(
        f"io.{fn}: path must be a str or os.PathLike, got {type(path).__name__}; the call is "
        f"{usage}.{hint}"
    )


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


def _leaf_array(leaf):
    """``(kind, host_array)`` for an array leaf, else ``None``."""
    if isinstance(leaf, Tensor):
        return "tensor", leaf.numpy()
    if isinstance(leaf, np.ndarray):
        return "ndarray", leaf
    if isinstance(leaf, np.generic):
        return "generic", np.asarray(leaf)
    if hasattr(leaf, "__cuda_array_interface__") and hasattr(leaf, "get"):
        return "ndarray", leaf.get()
    return None


def _encode(node, counter: list, where: str, depth: int = 0):
    """JSON structure of ``node``; leaves become ``{"leaf": index}`` in optree flatten order."""
    if optree.tree_is_leaf(node, namespace=NAMESPACE):
        counter[0] += 1
        return {"leaf": counter[0] - 1}
    if depth >= MAX_DEPTH:
        raise TypeError(
            f"io.save: the pytree nests containers deeper than io.MAX_DEPTH = {MAX_DEPTH} "
            f"levels (at {where}); checkpoints store at most {MAX_DEPTH} levels."
        )
    one = optree.tree_flatten_one_level(node, namespace=NAMESPACE)
    t = type(node)
    d = depth + 1
    if t is dict or t is collections.OrderedDict:
        keys = list(one.entries)
        children = [_encode(c, counter, f"{where}[{k!r}]", d) for k, c in zip(keys, one.children)]
        position = {k: i for i, k in enumerate(keys)}
        return {
            "dict" if t is dict else "odict": [_encode_key(k, where) for k in keys],
            "children": children,
            "order": [position[k] for k in node.keys()],
        }
    if t is list or t is tuple:
        children = [_encode(c, counter, f"{where}[{i}]", d) for i, c in enumerate(one.children)]
        return {t.__name__: children}
    if node is None:
        return {"none": None}
    if optree.is_namedtuple_instance(node):
        children = [_encode(c, counter, f"{where}.{f}", d) for f, c in zip(t._fields, one.children)]
        return {"namedtuple": t.__name__, "fields": list(t._fields), "children": children}
    children = [_encode(c, counter, f"{where}[{i}]", d) for i, c in enumerate(one.children)]
    return {"node": f"{t.__module__}.{t.__qualname__}", "children": children}


def _serialize(tree) -> list:
    """The checkpoint's bytes as buffers to write in order (the digest filled in)."""
    import safetensors.numpy as stn

    structure = _encode(tree, [0], _PREFIX)
    paths, leaves, _ = tree_flatten_with_path(tree, prefix=_PREFIX)
    if len(set(paths)) != len(paths):
        raise TypeError("io.save: two leaves of the pytree have the same path; cannot store it")
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
            records.append({"kind": kind, "path": path})
        elif type(leaf) in (bool, int, float, str):
            records.append({"kind": type(leaf).__name__, "path": path, "value": leaf})
        else:
            raise TypeError(
                f"io.save: leaf {path} is a {type(leaf).__name__}; checkpoints hold Tensors, "
                "NumPy/CuPy arrays, NumPy scalars and Python int/float/bool/str leaves."
            )
    meta = {"format": _FORMAT, "version": _VERSION, "tree": structure, "leaves": records}
    try:
        text = json.dumps(meta, allow_nan=True, separators=(",", ":"))
    except ValueError as e:  # an int too long for JSON
        raise TypeError(f"io.save: a scalar leaf cannot be written as JSON: {e}") from None
    data = stn.save(arrays, metadata={_META_KEY: text, _DIGEST_KEY: "0" * 64})
    start = _digest_offset(data, "0" * 64)
    if start is None:  # pragma: no cover - safetensors wrote its header differently
        raise RuntimeError("io.save: could not place the digest in the safetensors header")
    digest = hashlib.sha256(data).hexdigest()  # the placeholder zeros are what the rule hashes
    view = memoryview(data)
    return [view[:start], digest.encode("ascii"), view[start + 64 :]]


def _digest_offset(data: bytes, digest: str):
    """Offset of the digest's 64 hex digits in ``data``'s header, or ``None`` (not exactly once)."""
    n = int.from_bytes(data[:8], "little")
    header = bytes(data[8 : 8 + n])
    needle = f'"{_DIGEST_KEY}":"{digest}"'.encode("ascii")
    pos = header.find(needle)
    if pos < 0 or header.find(needle, pos + 1) >= 0:
        return None
    return 8 + pos + len(needle) - 65


# -- atomic write -----------------------------------------------------------------------------
def _write_all(f, pieces) -> None:
    """Write the buffers ``pieces`` to the open file ``f`` (a seam for tests of crashes)."""
    for piece in pieces:
        f.write(piece)


def _default_mode(path: str) -> int:
    try:
        return os.stat(path).st_mode & 0o777
    except FileNotFoundError:  # a new file gets the usual 0o666 & ~umask (read, then restored)
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def _named(e: OSError, path: str) -> OSError:
    """``e`` again, with a message that names the user's ``path`` (not the temporary file)."""
    msg = f"io.save: cannot write {path!r}: {e.strerror or e}"
    try:
        return type(e)(e.errno, msg) if e.errno is not None else type(e)(msg)
    except Exception:  # pragma: no cover - an OSError subclass with another signature
        return OSError(e.errno, msg)


def _pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a running process on this machine (POSIX; unsure counts as alive)."""
    if pid > 2**31 - 1:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, owned by another user
        return True
    return True


def _remove_if_stale(tmp: str, pid: int) -> None:
    """Delete the temporary file ``tmp`` of writer ``pid`` if no live save is writing it."""
    if pid == os.getpid():
        return  # this process (another thread) may be writing it
    if os.name == "nt":  # pragma: no cover - Windows refuses to delete a file open for writing
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return
    if _pid_alive(pid):
        return
    # The pid runs nowhere here; a writer on another machine or in another pid namespace
    # sharing this directory still holds its lock, which the kernel drops when it dies.
    try:
        fd = os.open(tmp, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # a live writer holds it
            except OSError:
                pass  # no locks on this filesystem: the pid rule decides alone
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    finally:
        os.close(fd)


def _remove_stale_temps(directory: str, name: str) -> None:
    """Best effort: remove stale ``.<name>.tapegrad-tmp-<pid>-<hex>`` files in ``directory``."""
    prefix = f".{name}{_TMP_TAG}"
    pattern = re.compile(re.escape(prefix) + r"([1-9][0-9]{0,9})-[0-9a-f]{16}")
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        m = pattern.fullmatch(entry.name)
        try:
            regular = entry.is_file(follow_symlinks=False)
        except OSError:
            continue
        if m and regular:
            _remove_if_stale(entry.path, int(m.group(1)))


def _create_temp(directory: str, name: str):
    """Create, lock and open ``.<name>.tapegrad-tmp-<pid>-<16 hex>`` in ``directory``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = os.path.join(directory, f".{name}{_TMP_TAG}{os.getpid()}-{secrets.token_hex(8)}")
        try:
            fd = os.open(tmp, flags, 0o600)
        except FileExistsError:
            continue
        if fcntl is not None:
            with contextlib.suppress(OSError):  # no locks on this filesystem: the pid guards it
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd, tmp
    raise FileExistsError(errno.EEXIST, "no unused temporary file name")  # pragma: no cover


def _target(path: str) -> tuple[str, str, str]:
    """``(absolute path, directory, file name)`` of a save target, checked before any work."""
    target = os.path.abspath(path)
    directory, name = os.path.split(target)
    if path.endswith(tuple(sep for sep in (os.sep, os.altsep) if sep)) or os.path.isdir(target):
        raise IsADirectoryError(
            errno.EISDIR, f"io.save: {path!r} names a directory; give a file path"
        )
    if not os.path.isdir(directory):
        raise FileNotFoundError(
            errno.ENOENT,
            f"io.save: cannot write {path!r}: its directory {directory!r} does not exist "
            "(create it first, for example with os.makedirs(directory, exist_ok=True))",
        )
    return target, directory, name


def _atomic_write(path: str, target: str, directory: str, name: str, pieces) -> None:
    mode = _default_mode(target)
    _remove_stale_temps(directory, name)
    try:
        fd, tmp = _create_temp(directory, name)
    except OSError as e:
        raise _named(e, path) from e
    try:
        with os.fdopen(fd, "wb") as f:
            _write_all(f, pieces)
            f.flush()
            os.fsync(f.fileno())
            os.chmod(tmp, mode)
            if os.name != "nt":  # rename while still locked, so no cleaner can take it
                os.replace(tmp, target)
        if os.name == "nt":  # pragma: no cover - Windows renames closed files only
            os.replace(tmp, target)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise _named(e, path) from e
        raise
    if os.name != "nt":
        with contextlib.suppress(OSError):  # make the rename durable where the OS allows it
            dfd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)


def save(path, tree) -> None:
    """Write the pytree ``tree`` to ``path`` as a verified safetensors checkpoint, atomically.

    The argument order is ``save(path, tree)`` (``torch.save`` takes ``(obj, f)``; the swapped
    call raises a TypeError that says so). Before writing, stale temporary files that earlier,
    killed saves to the same ``path`` left behind (``.<name>.tapegrad-tmp-<pid>-<hex>``) are
    removed; files of a save still running are kept.

    Args:
        path: File path (str, bytes or path-like); its directory must exist. An existing file
            is replaced only once the new one is completely on disk.
        tree: Pytree of Tensors, NumPy/CuPy arrays (any shape, size-0 included), NumPy scalars
            and Python int/float/bool/str leaves, in dicts (str or int keys), OrderedDicts,
            lists, tuples, namedtuples and ``None``, nested at most :data:`MAX_DEPTH`
            containers deep; for example ``params``, ``module.state_dict()`` or
            ``optimizer.state_dict()``. Other registered pytree nodes are stored too but need
            ``like=`` to load. Array dtypes: bool, (u)int8-64, float16/32/64, bfloat16,
            complex64; they are stored exactly (non-native byte order as native). GPU arrays
            are copied to the host.

    Raises:
        TypeError: if the arguments are swapped (a pytree first and a path second) or
            ``path`` is not path-like; for an unsupported leaf, dict key or dtype, or a tree
            nested too deeply (naming its path).
        FileNotFoundError: if the directory of ``path`` does not exist (the message names
            ``path`` and that directory).
        IsADirectoryError: if ``path`` names a directory.
        OSError: if the file cannot be written; the message names ``path``, and the old file,
            if any, is left intact.
    """
    path = _path_arg("save", path, tree, "tree", "save(path, tree)")
    target, directory, name = _target(path)
    pieces = _serialize(tree)
    _atomic_write(path, target, directory, name, pieces)


# -- load -------------------------------------------------------------------------------------
class _NotRegular(ValueError):
    """Internal: a path names something other than a regular file of fixed size."""


def _read_file(path: str) -> bytes:
    """The bytes of the regular file ``path`` (a symbolic link is followed to its target).

    Anything else (a directory, a device such as ``/dev/zero``, a FIFO, a socket) is refused
    before it is opened, and again on the open file, so a path swapped in between is caught
    too. The file is opened without blocking (a FIFO cannot stall the caller) and read only up
    to the size it had when opened: a file that grows while it is read, or a ``/proc`` file
    (which reports size 0), is refused rather than read without end.

    Raises:
        OSError: if the file cannot be opened or read.
        _NotRegular (a ValueError): if it is not a regular file, or its size changes while it
            is read; the message says which, without the path.
    """
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise _NotRegular("is not a regular file")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    with open(fd, "rb", closefd=True) as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _NotRegular("is not a regular file")
        size = info.st_size
        data = f.read(size + 1)
    if len(data) != size:
        raise _NotRegular(
            f"is not a regular file of fixed size (its size said {size} bytes, reading gave "
            f"{'more' if len(data) > size else len(data)})"
        )
    return data


def _read(path: str) -> bytes:
    try:
        return _read_file(path)
    except _NotRegular as e:
        raise CheckpointError(f"io.load: {path!r} {e}") from None
    except (OSError, ValueError) as e:  # ValueError: a path with a NUL byte
        raise CheckpointError(
            f"io.load: cannot read {path!r}: {getattr(e, 'strerror', None) or e}"
        ) from None


def _verify_digest(data: bytes, digest) -> None:
    """Check the whole-file SHA-256 ``digest`` (see the module docstring for the rule)."""
    if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
        raise _Corrupt("its SHA-256 digest field is malformed")
    start = _digest_offset(data, digest)
    if start is None:
        raise _Corrupt("its SHA-256 digest field is malformed")
    view = memoryview(data)
    h = hashlib.sha256()
    h.update(view[:start])
    h.update(b"0" * 64)
    h.update(view[start + 64 :])
    if not hmac.compare_digest(h.hexdigest(), digest):
        raise _Corrupt("its bytes do not match its SHA-256 digest")


def _json_depth(text: str) -> int:
    """Deepest ``[``/``{`` nesting of the JSON ``text`` (strings skipped), without recursion."""
    skeleton = _JSON_STRING.sub("", text).encode("utf-8", "replace")
    b = np.frombuffer(skeleton, np.uint8)
    if b.size == 0:
        return 0
    step = np.zeros(b.size, np.int64)
    step[(b == ord("[")) | (b == ord("{"))] = 1
    step[(b == ord("]")) | (b == ord("}"))] = -1
    return int(np.cumsum(step).max())


def _unique_pairs(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"duplicate keys in a JSON object: {sorted(set(keys))!r}")
    return dict(pairs)


def _parse_meta(text):
    if not isinstance(text, str):
        raise _Corrupt("its tapegrad metadata is not a string")
    depth = _json_depth(text)
    if depth > _MAX_JSON_DEPTH:
        raise _Corrupt(f"its metadata nests {depth} levels deep (at most {_MAX_JSON_DEPTH})")
    try:
        return json.loads(text, object_pairs_hook=_unique_pairs)
    except (ValueError, RecursionError) as e:
        raise _Corrupt(f"its metadata is not valid JSON ({e})") from None


def _short(x) -> str:
    """A bounded repr (depth, length) of a decoded JSON value, for messages."""
    return reprlib.repr(x)


def _list(x, what: str, where: str) -> list:
    if type(x) is not list:
        raise _Corrupt(f"the {what} of the record at {where} is {_short(x)}, not a list")
    return x


def _decode_key(enc, where: str):
    if type(enc) is list and len(enc) == 2:
        kind, value = enc
        if kind == "s" and type(value) is str:
            return value
        if kind == "i" and type(value) is int:
            return value
    raise _Corrupt(f"bad dict key record {_short(enc)} at {where}")


_NODE = object()  # stands for a registered pytree node (rebuilt only from like=)


class _Decoder:
    """Rebuilds the container structure, checking every record (no trust in the file)."""

    def __init__(self, leaves: list):
        self.leaves = leaves
        self.next_leaf = 0
        self.node_at = None  # path of the first registered node, if any
        self.namedtuples = {}  # (typename, fields) -> class, one per distinct record

    def build(self, struct, where: str, depth: int):
        if type(struct) is not dict or not struct:
            raise _Corrupt(f"bad structure record {_short(struct)} at {where}")
        fields = set(struct)
        if fields == {"leaf"}:
            i = struct["leaf"]
            if type(i) is not int or i != self.next_leaf or i >= len(self.leaves):
                raise _Corrupt(f"bad leaf record {_short(struct)} at {where}")
            self.next_leaf += 1
            return self.leaves[i]
        if depth >= MAX_DEPTH:
            raise _Corrupt(f"its structure nests deeper than {MAX_DEPTH} levels at {where}")
        d = depth + 1
        if fields in ({"dict", "children", "order"}, {"odict", "children", "order"}):
            kind = "dict" if "dict" in fields else "odict"
            keys = [_decode_key(k, where) for k in _list(struct[kind], "keys", where)]
            children = _list(struct["children"], "children", where)
            order = _list(struct["order"], "order", where)
            if (
                len(set(keys)) != len(keys)
                or len(children) != len(keys)
                or any(type(j) is not int for j in order)
                or sorted(order) != list(range(len(keys)))
            ):
                raise _Corrupt(f"bad {kind} record at {where}")
            built = [self.build(c, f"{where}[{k!r}]", d) for k, c in zip(keys, children)]
            items = [(keys[j], built[j]) for j in order]
            return dict(items) if kind == "dict" else collections.OrderedDict(items)
        if fields == {"list"} or fields == {"tuple"}:
            (kind,) = fields
            children = _list(struct[kind], kind, where)
            built = [self.build(c, f"{where}[{i}]", d) for i, c in enumerate(children)]
            return built if kind == "list" else tuple(built)
        if fields == {"none"}:
            if struct["none"] is not None:
                raise _Corrupt(f"bad None record {_short(struct)} at {where}")
            return None
        if fields == {"namedtuple", "fields", "children"}:
            typename, names = struct["namedtuple"], _list(struct["fields"], "fields", where)
            children = _list(struct["children"], "children", where)
            if type(typename) is not str or len(names) != len(children):
                raise _Corrupt(f"bad namedtuple record at {where}")
            if any(type(f) is not str for f in names):
                raise _Corrupt(f"bad namedtuple field names {_short(names)} at {where}")
            cls = self.namedtuples.get((typename, tuple(names)))
            if cls is None:
                try:
                    cls = collections.namedtuple(typename, names)
                except (TypeError, ValueError) as e:
                    raise _Corrupt(f"bad namedtuple record at {where}: {e}") from None
                self.namedtuples[(typename, tuple(names))] = cls
            return cls(*[self.build(c, f"{where}.{f}", d) for f, c in zip(names, children)])
        if fields == {"node", "children"}:
            if type(struct["node"]) is not str:
                raise _Corrupt(f"bad node record at {where}")
            for i, c in enumerate(_list(struct["children"], "children", where)):
                self.build(c, f"{where}[{i}]", d)
            if self.node_at is None:
                self.node_at = (where, struct["node"])
            return _NODE
        raise _Corrupt(f"unknown structure record with fields {sorted(fields)} at {where}")


def _rebuild_leaves(records, arrays: dict) -> tuple[list, list]:
    """``(paths, leaves)`` from the leaf records, each checked against the file's tensors."""
    records = _list(records, "leaves", "the top level")
    paths, leaves, used = [], [], set()
    for i, r in enumerate(records):
        if type(r) is not dict:
            raise _Corrupt(f"leaf record {i} is {_short(r)}, not an object")
        kind, p = r.get("kind"), r.get("path")
        if type(kind) is not str:
            raise _Corrupt(f"leaf record {i} has a kind {_short(kind)}, not a str")
        if type(p) is not str or p in used:
            raise _Corrupt(f"leaf record {i} has a bad or repeated path {_short(p)}")
        used.add(p)
        if kind in _ARRAY_KINDS:
            if set(r) != {"kind", "path"} or p not in arrays:
                raise _Corrupt(f"leaf record {i} ({_short(p)}) does not name one of its tensors")
            arr = arrays[p]
            if arr.dtype.name not in _DTYPES or (kind == "generic" and arr.ndim != 0):
                raise _Corrupt(f"tensor {p!r} has a bad dtype or shape for a {kind} leaf")
            leaf = Tensor(arr) if kind == "tensor" else arr if kind == "ndarray" else arr[()]
        elif kind in _SCALARS:
            if set(r) != {"kind", "path", "value"} or type(r["value"]) is not _SCALARS[kind]:
                raise _Corrupt(f"leaf record {i} ({_short(p)}) is not a valid {kind} record")
            leaf = r["value"]
        else:
            raise _Corrupt(f"leaf record {i} has an unknown kind {_short(kind)}")
        paths.append(p)
        leaves.append(leaf)
    extra = sorted(set(arrays) - used)
    if extra:
        raise _Corrupt(f"its tensors {_short(extra)} are not in its structure")
    return paths, leaves


def _header(data: bytes) -> dict:
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])  # safetensors has parsed and bounded it already
    if type(header) is not dict:
        raise ValueError("header is not an object")
    return header


def _describe(leaf) -> str:
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
        return f"{type(leaf).__name__} of shape {tuple(leaf.shape)}, dtype {leaf.dtype}"
    return f"{type(leaf).__name__} {leaf!r}"


def _check_like(path: str, got_paths: list, leaves: list, like) -> Any:
    want_paths, want_leaves, treedef = tree_flatten_with_path(like, prefix=_PREFIX)
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


def _unsupported(path: str, version) -> CheckpointError:
    hint = ""
    if version == 1:
        hint = (
            " Version 1 files verified only their tensor data, not their structure and scalars;"
            " their arrays can still be read with safetensors.numpy.load_file, then saved again"
            " with io.save."
        )
    return CheckpointError(
        f"io.load: {path!r} has checkpoint format version {_short(version)}, which is "
        f"unsupported: this tapegrad reads format version {_VERSION}.{hint}"
    )


def load(path, like=None) -> Any:
    """Read and verify a checkpoint written by :func:`save`.

    Nothing from the file is trusted before its whole-file SHA-256 digest matches; then every
    record of the structure is checked (types, nesting depth, one record per leaf and tensor).

    Args:
        path: File path (str, bytes or path-like).
        like: Optional pytree the checkpoint must match: the same leaf paths (keys), and for
            each array leaf of ``like`` the same shape and dtype (for each scalar leaf, the same
            Python type). The result then has ``like``'s container types (namedtuples,
            registered classes) with the file's leaves.

    Returns:
        The pytree: Tensors where Tensors were saved (on the CPU; use ``to_device``), NumPy
        arrays and scalars where those were, each with its saved shape and dtype; Python
        scalars exactly; containers as saved (dict key order kept; namedtuples come back as
        namedtuples of the same name and fields).

    Raises:
        CheckpointError (a ValueError): if the file is missing or unreadable, not a regular
            file (a device such as ``/dev/zero``, a FIFO or a directory is refused before it is
            read, and never blocks), truncated or corrupted in any byte (digest mismatch, bad
            header, malformed or too deeply nested structure), is not a tapegrad checkpoint,
            has an unsupported format version (such as version 1), or does not match ``like``
            (listing missing and unexpected keys, or the first shape/dtype difference). Every
            message names the file.
        TypeError: if the arguments are swapped (a pytree first and a path second) or ``path``
            is not path-like; or if the file holds a registered pytree node and ``like`` is
            not given.
    """
    path = _path_arg("load", path, like, "like", "load(path, like=tree)")
    return _load_bytes(_read(path), path, like)


def _safetensors_arrays(data: bytes) -> dict:
    """The tensors of a safetensors file as read-only NumPy arrays (safetensors' NumPy reader,
    with its dtype table extended by ``BF16``: bfloat16, from ``ml_dtypes``)."""
    import safetensors
    import safetensors.numpy as stn

    out = {}
    for name, view in safetensors.deserialize(data):
        if view["dtype"] == "BF16":
            dtype = _tg_dtypes.bfloat16
        else:
            dtype = stn._getdtype(view["dtype"])
        out[name] = np.frombuffer(view["data"], dtype=dtype).reshape(view["shape"])
    return out


def _load_bytes(data: bytes, path: str, like=None) -> Any:
    """:func:`load` on the bytes ``data`` already read from ``path`` (named in messages)."""
    try:
        arrays = _safetensors_arrays(data)
        header = _header(data)
    except Exception as e:  # SafetensorError: truncated, bad header, ...
        raise CheckpointError(
            f"io.load: {path!r} is not a readable safetensors file (truncated or corrupted?): {e}"
        ) from None
    md = header.get("__metadata__")
    if type(md) is not dict or not ({_META_KEY, _DIGEST_KEY} & set(md)):
        raise CheckpointError(
            f"io.load: {path!r} is a safetensors file but not a tapegrad checkpoint (no "
            "tapegrad metadata); read it with safetensors directly."
        )
    try:
        if _DIGEST_KEY in md:
            _verify_digest(data, md[_DIGEST_KEY])
        if _META_KEY not in md:
            raise _Corrupt("it has no tapegrad metadata")
        meta = _parse_meta(md[_META_KEY])
        if type(meta) is not dict or meta.get("format") != _FORMAT:
            raise _Corrupt("its metadata is not a tapegrad.io record")
        if meta.get("version") != _VERSION or type(meta.get("version")) is not int:
            raise _unsupported(path, meta.get("version"))
        if _DIGEST_KEY not in md:
            raise _Corrupt("it has no SHA-256 digest")
        if set(meta) != {"format", "version", "tree", "leaves"}:
            raise _Corrupt(f"its metadata has fields {sorted(meta)}")
        paths, leaves = _rebuild_leaves(meta["leaves"], arrays)
        decoder = _Decoder(leaves)
        tree = decoder.build(meta["tree"], _PREFIX, 0)
        if decoder.next_leaf != len(leaves):
            raise _Corrupt(
                f"its structure has {decoder.next_leaf} leaves, its records {len(leaves)}"
            )
        if decoder.node_at is None and tree_paths(tree, prefix=_PREFIX) != paths:
            raise _Corrupt("its leaf paths do not match its structure")
    except _Corrupt as e:
        raise CheckpointError(f"io.load: {path!r} is corrupted: {e}") from None
    if like is not None:
        return _check_like(path, paths, leaves, like)
    if decoder.node_at is not None:
        where, cls = decoder.node_at
        raise TypeError(
            f"io.load: {path!r} holds a {cls} pytree node at {where}, which only "
            "load(path, like=...) can rebuild (pass a pytree of the same structure as like)"
        )
    return tree
