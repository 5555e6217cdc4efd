"""Checkpoints: exact round trips, atomic writes, clear errors on bad files."""

import collections
import errno
import hashlib
import json
import os
import re
import select
import signal
import subprocess
import sys

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import io, optim

Pair = collections.namedtuple("Pair", "first second")


def _same(a, b):
    """Exact equality of two pytrees: structure, container types, leaf kinds, dtypes, values."""
    assert type(a) is type(b) or (
        isinstance(a, tuple) and hasattr(a, "_fields") and a._fields == b._fields
    ), (type(a), type(b))
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, tg.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    elif isinstance(a, (np.ndarray, np.generic)):
        assert a.dtype == b.dtype and np.shape(a) == np.shape(b)
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b)
    else:
        assert a == b


def _tree():
    rng = np.random.default_rng(0)
    return {
        "zeta": tg.Tensor(rng.normal(size=(2, 3)).astype(np.float32)),
        "alpha": [
            np.arange(5, dtype=np.int64),
            (tg.Tensor(np.zeros((0, 4))), None, np.float64(2.5)),
        ],
        7: {"step": 12, "lr": 1e-3, "flag": True, "name": "adam", "big": 2**70},
        "pair": Pair(tg.Tensor(np.asarray(3.0)), {"mask": np.array([True, False])}),
        "od": collections.OrderedDict([("b", np.int32(4)), ("a", np.zeros(2, np.float16))]),
        "empty": ({}, [], ()),
        "nan": float("nan"),
    }


def test_round_trip_exact(tmp_path):
    tree = _tree()
    path = tmp_path / "ckpt.safetensors"
    io.save(path, tree)
    _same(io.load(path), tree)
    _same(io.load(str(path), like=tree), tree)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_, np.uint8])
@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (4, 1)])
def test_dtypes_and_shapes(tmp_path, dtype, shape):
    arr = (np.arange(int(np.prod(shape))).reshape(shape) % 3).astype(dtype)
    tree = {"t": tg.Tensor(arr), "a": arr}
    io.save(tmp_path / "x", tree)
    _same(io.load(tmp_path / "x"), tree)


def test_non_contiguous_and_single_leaf(tmp_path):
    arr = np.arange(12.0).reshape(3, 4).T
    io.save(tmp_path / "x", arr)
    _same(io.load(tmp_path / "x"), arr)
    io.save(tmp_path / "y", 5)
    assert io.load(tmp_path / "y") == 5


def test_optimizer_and_module_style_state(tmp_path):
    params = {"w": tg.Tensor(np.ones((2, 2))), "b": tg.Tensor(np.zeros(2))}
    opt = optim.Adam(params, lr=0.1)
    opt.step(tg.tree.tree_map(lambda p: p + 1.0, params))
    sd = opt.state_dict()
    io.save(tmp_path / "o", sd)
    back = io.load(tmp_path / "o", like=sd)
    _same(back, sd)
    flat_state = {"layer.weight": np.ones((3, 2), np.float32), "bn.count": np.int64(3)}
    io.save(tmp_path / "m", flat_state)
    _same(io.load(tmp_path / "m"), flat_state)


def test_atomic_write_keeps_old_file_on_crash(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.safetensors"
    old = {"w": np.arange(3.0)}
    io.save(path, old)
    before = path.read_bytes()

    def crash(f, pieces):
        data = b"".join(pieces)
        f.write(data[: len(data) // 2])
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(io, "_write_all", crash)
    with pytest.raises(OSError, match=r"ckpt.safetensors'.*simulated"):
        io.save(path, {"w": np.arange(1000.0)})
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.safetensors"]  # no temporary file left behind
    _same(io.load(path), old)


def test_crash_at_rename_and_new_file(tmp_path, monkeypatch):
    def no_replace(src, dst):
        raise OSError("power cut (simulated)")

    monkeypatch.setattr(io.os, "replace", no_replace)
    with pytest.raises(OSError, match=r"cannot write .*new'.*power cut"):
        io.save(tmp_path / "new", {"w": np.ones(2)})
    assert os.listdir(tmp_path) == []


def test_truncated_and_corrupted_files(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    io.save(path, {"w": np.arange(64.0)})
    data = path.read_bytes()

    path.write_bytes(data[:-10])
    with pytest.raises(io.CheckpointError, match="ckpt.safetensors.*truncated or corrupted"):
        io.load(path)

    path.write_bytes(data[:4])
    with pytest.raises(io.CheckpointError, match="ckpt.safetensors"):
        io.load(path)

    flipped = bytearray(data)
    flipped[-5] ^= 0xFF  # inside the tensor data: only the digest can tell
    path.write_bytes(bytes(flipped))
    with pytest.raises(io.CheckpointError, match="ckpt.safetensors.*SHA-256"):
        io.load(path)

    with pytest.raises(io.CheckpointError, match="cannot read.*missing"):
        io.load(tmp_path / "missing")


def test_foreign_safetensors_file(tmp_path):
    import safetensors.numpy as stn

    stn.save_file({"w": np.ones(2)}, str(tmp_path / "foreign"))
    with pytest.raises(io.CheckpointError, match="foreign.*not a tapegrad checkpoint"):
        io.load(tmp_path / "foreign")


def test_metadata_without_digest_or_of_another_version(tmp_path):
    import safetensors.numpy as stn

    meta = {"format": "tapegrad.io", "version": 2, "tree": {"leaf": 0}, "leaves": [{"kind": "?"}]}
    stn.save_file({}, str(tmp_path / "bad"), metadata={"tapegrad": json.dumps(meta)})
    with pytest.raises(io.CheckpointError, match="bad' is corrupted: it has no SHA-256 digest"):
        io.load(tmp_path / "bad")
    meta["version"] = 99
    stn.save_file({}, str(tmp_path / "v99"), metadata={"tapegrad": json.dumps(meta)})
    with pytest.raises(io.CheckpointError, match="v99.*format version 99, which is unsupported"):
        io.load(tmp_path / "v99")


def test_like_mismatches_name_file_and_keys(tmp_path):
    path = tmp_path / "p.safetensors"
    tree = {"w": tg.Tensor(np.ones((2, 3))), "b": tg.Tensor(np.zeros(3)), "step": 3}
    io.save(path, tree)
    with pytest.raises(
        io.CheckpointError, match=r"p.safetensors.*missing keys \[\"tree\['c'\]\"\]"
    ):
        io.load(path, like={**tree, "c": tg.Tensor(np.ones(1))})
    with pytest.raises(io.CheckpointError, match=r"unexpected keys \[\"tree\['b'\]\"\]"):
        io.load(path, like={"w": tree["w"], "step": 3})
    with pytest.raises(io.CheckpointError, match=r"at tree\['w'\].*shape \(2, 3\).*shape \(3, 2\)"):
        io.load(path, like={**tree, "w": tg.Tensor(np.ones((3, 2)))})
    with pytest.raises(io.CheckpointError, match=r"at tree\['b'\].*float64.*float32"):
        io.load(path, like={**tree, "b": tg.Tensor(np.zeros(3, np.float32))})
    with pytest.raises(io.CheckpointError, match=r"at tree\['step'\].*int 3.*float 3.0"):
        io.load(path, like={**tree, "step": 3.0})


def test_like_rebuilds_registered_nodes(tmp_path):
    class Box:
        def __init__(self, a, b):
            self.a, self.b = a, b

    tg.tree.register(Box, lambda x: ((x.a, x.b), None, ("a", "b")), lambda aux, ch: Box(*ch))
    tree = Box(np.ones(2), {"n": 4})
    io.save(tmp_path / "box", tree)
    with pytest.raises(TypeError, match="box.*only load\\(path, like=...\\) can rebuild"):
        io.load(tmp_path / "box")
    back = io.load(tmp_path / "box", like=tree)
    assert isinstance(back, Box) and back.b == {"n": 4}
    np.testing.assert_array_equal(back.a, np.ones(2))


def test_save_rejects_what_it_cannot_store(tmp_path):
    with pytest.raises(TypeError, match=r"leaf tree\['f'\] is a function"):
        io.save(tmp_path / "x", {"f": lambda: 0})
    with pytest.raises(TypeError, match="dict key 1.5"):
        io.save(tmp_path / "x", {1.5: np.ones(1)})
    with pytest.raises(TypeError, match=r"leaf tree\['c'\] has dtype complex128"):
        io.save(tmp_path / "x", {"c": np.ones(2, np.complex128)})
    with pytest.raises(TypeError, match="scalar leaf cannot be written as JSON"):
        io.save(tmp_path / "x", {"n": 10**5000})
    assert os.listdir(tmp_path) == []


def test_odd_keys_round_trip(tmp_path):
    tree = {"\ud800": np.ones(2), "ü'\"]": {"": np.int8(1), "\n": "\ud800"}, -3: [np.zeros(1)]}
    io.save(tmp_path / "x", tree)
    _same(io.load(tmp_path / "x"), tree)
    _same(io.load(tmp_path / "x", like=tree), tree)


def test_loaded_tensors_are_independent_of_the_file(tmp_path):
    path = tmp_path / "x"
    io.save(path, {"w": tg.Tensor(np.ones(3))})
    back = io.load(path)
    io.save(path, {"w": tg.Tensor(np.zeros(3))})
    np.testing.assert_array_equal(back["w"].numpy(), np.ones(3))


# -- every byte verified ------------------------------------------------------------------------
def _seal(arrays: dict, meta_text: str) -> bytes:
    """A checkpoint with a valid digest around ``meta_text`` (a crafted file), per the docs."""
    import safetensors.numpy as stn

    zeros = b'"tapegrad_sha256":"' + b"0" * 64 + b'"'
    data = stn.save(arrays, metadata={"tapegrad": meta_text, "tapegrad_sha256": "0" * 64})
    digest = hashlib.sha256(data).hexdigest().encode()
    assert data.count(zeros) == 1
    return data.replace(zeros, b'"tapegrad_sha256":"' + digest + b'"')


def _header(data: bytes) -> dict:
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + n])


def _patch(path, old: bytes, new: bytes) -> None:
    data = path.read_bytes()
    assert data.count(old) == 1, (old, data[:400])
    path.write_bytes(data.replace(old, new))


def test_digest_is_sha256_of_the_whole_file(tmp_path):
    path = tmp_path / "ckpt"
    io.save(path, _tree())
    data = path.read_bytes()
    digest = _header(data)["__metadata__"]["tapegrad_sha256"]
    assert data.count(digest.encode()) == 1
    assert hashlib.sha256(data.replace(digest.encode(), b"0" * 64)).hexdigest() == digest


def _hyper():
    return {
        "step": 12,
        "lr": 0.001,
        "flag": True,
        "zero_d": np.asarray(1.5),
        "w": tg.Tensor(np.arange(6.0).reshape(2, 3)),
    }


@pytest.mark.parametrize(
    "old, new",
    [
        (b'\\"value\\":12', b'\\"value\\":13'),  # the step counter
        (b"0.001", b"0.002"),  # the learning rate
        (b'\\"flag\\"]', b'\\"flbg\\"]'),  # a renamed key
        (b"ndarray", b"generic"),  # a leaf kind: a 0-d array would load as a NumPy scalar
    ],
    ids=["step", "lr", "key", "kind"],
)
def test_digest_covers_structure_scalars_and_leaf_kinds(tmp_path, old, new):
    path = tmp_path / "ckpt.safetensors"
    tree = _hyper()
    io.save(path, tree)
    _patch(path, old, new)
    for like in (None, tree):
        with pytest.raises(io.CheckpointError, match="ckpt.safetensors' is corrupted.*SHA-256"):
            io.load(path, like=like)


def test_digest_covers_the_safetensors_header(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    io.save(path, {"w": np.arange(4, dtype=np.float32)})
    _patch(path, b'"dtype":"F32"', b'"dtype":"I32"')  # same size: safetensors itself loads it
    with pytest.raises(io.CheckpointError, match="ckpt.safetensors' is corrupted.*SHA-256"):
        io.load(path)


def _crafted_tree():
    return {
        "a": [np.ones(2, np.float32), 3],
        "b": Pair(1.5, None),
        "c": collections.OrderedDict(x=np.float64(2.0)),
        "d": tg.Tensor(np.zeros((2, 2))),
    }


def _meta_of(tree, tmp_path):
    """The metadata of ``tree``'s checkpoint, as a dict to edit, and its arrays."""
    import safetensors.numpy as stn

    io.save(tmp_path / "original", tree)
    data = (tmp_path / "original").read_bytes()
    return json.loads(_header(data)["__metadata__"]["tapegrad"]), stn.load(data)


def _deep(n: int, inner: str = '{"leaf":0}') -> str:
    return '{"list":[' * n + inner + "]}" * n


CRAFTED = {
    # field types
    "meta is a list": lambda m: [1, 2],
    "leaves is an int": lambda m: {**m, "leaves": 5},
    "leaf record is an int": lambda m: {**m, "leaves": [5] + m["leaves"][1:]},
    "path is an int": lambda m: _set(m, ["leaves", 1, "path"], 5),
    "leaf index is a str": lambda m: _set(m, ["tree", "children", 0, "list", 0], {"leaf": "0"}),
    "leaf index is a bool": lambda m: _set(m, ["tree", "children", 0, "list", 0], {"leaf": False}),
    "order of lists": lambda m: _set(m, ["tree", "order"], [[0], [1], [2], [3]]),
    "keys not a list": lambda m: _set(m, ["tree", "dict"], {"a": 1}),
    "key record of wrong type": lambda m: _set(m, ["tree", "dict", 0], ["s", 5]),
    "int value is a str": lambda m: _set(m, ["leaves", 1, "value"], "3"),
    "float value is an int": lambda m: _set(m, ["leaves", 2, "value"], 2),
    "none holds a value": lambda m: _set(m, ["tree", "children", 1, "children", 1], {"none": 0}),
    "namedtuple fields": lambda m: _set(m, ["tree", "children", 1, "fields"], [1, 2]),
    "namedtuple name": lambda m: _set(m, ["tree", "children", 1, "namedtuple"], "1 bad"),
    # consistency
    "duplicate dict keys": lambda m: _set(m, ["tree", "dict", 1], ["s", "a"]),
    "unknown record": lambda m: _set(m, ["tree", "children", 0], {"set": []}),
    "extra record field": lambda m: _set(m, ["leaves", 0, "extra"], 1),
    "unknown leaf kind": lambda m: _set(m, ["leaves", 1, "kind"], "complex"),
    "tensor not in file": lambda m: _set(m, ["leaves", 0, "path"], "tree['zz']"),
    "generic of shape (2,)": lambda m: _set(m, ["leaves", 0, "kind"], "generic"),
    "a leaf too few": lambda m: {**m, "leaves": m["leaves"][:1] + m["leaves"][2:]},
    "paths swapped": lambda m: _swap_paths(m),
    "extra top field": lambda m: {**m, "extra": 1},
    "format missing": lambda m: {k: v for k, v in m.items() if k != "format"},
    "leaf out of order": lambda m: _set(m, ["tree", "children", 0, "list", 1], {"leaf": 0}),
}


def _set(m, keys, value):
    m = json.loads(json.dumps(m))
    node = m
    for k in keys[:-1]:
        node = node[k]
    node[keys[-1]] = value
    return m


def _swap_paths(m):
    m = json.loads(json.dumps(m))
    a, b = m["leaves"][1], m["leaves"][2]
    a["path"], b["path"] = b["path"], a["path"]
    return m


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_crafted_metadata_with_a_valid_digest_is_a_checkpoint_error(tmp_path, case):
    tree = _crafted_tree()
    meta, arrays = _meta_of(tree, tmp_path)
    path = tmp_path / "crafted.safetensors"
    path.write_bytes(_seal(arrays, json.dumps(CRAFTED[case](meta))))
    for like in (None, tree):
        with pytest.raises(io.CheckpointError, match="crafted.safetensors' is corrupted"):
            io.load(path, like=like)


def test_crafted_file_as_saved_loads(tmp_path):
    tree = _crafted_tree()
    meta, arrays = _meta_of(tree, tmp_path)
    (tmp_path / "f").write_bytes(_seal(arrays, json.dumps(meta)))
    _same(io.load(tmp_path / "f"), tree)


@pytest.mark.parametrize(
    "text",
    [
        '{"format":"tapegrad.io","version":2,"tree":' + _deep(100_000) + ',"leaves":[]}',
        '{"format":"tapegrad.io","version":2,"tree":' + _deep(io.MAX_DEPTH + 1) + ',"leaves":[]}',
        '{"format":"tapegrad.io","version":2,"tree":{"leaf":0},"leaves":'
        + "[" * 50_000
        + "]" * 50_000
        + "}",
        '{"format":"tapegrad.io","version":2,"tree":{"leaf":0,"leaf":0},"leaves":[]}',
        '{"format":"tapegrad.io","version":2,"tree":{"leaf":0},"leaves":[',
        "",
    ],
    ids=["deep-tree", "just-too-deep", "deep-leaves", "duplicate-json-key", "truncated", "empty"],
)
def test_deep_or_invalid_json_is_a_checkpoint_error(tmp_path, text):
    path = tmp_path / "deep.safetensors"
    path.write_bytes(_seal({}, text))
    with pytest.raises(io.CheckpointError, match="deep.safetensors' is corrupted"):
        io.load(path)


def test_nesting_depth_limit(tmp_path):
    tree = 1.0
    for _ in range(io.MAX_DEPTH):
        tree = [tree]
    io.save(tmp_path / "deep", tree)
    _same(io.load(tmp_path / "deep"), tree)
    with pytest.raises(TypeError, match=r"deeper than io.MAX_DEPTH = 256 levels \(at tree\[0\]"):
        io.save(tmp_path / "deeper", [tree])
    assert sorted(os.listdir(tmp_path)) == ["deep"]


def test_version_1_files_are_refused(tmp_path):
    import safetensors.numpy as stn

    meta = {
        "format": "tapegrad.io",
        "version": 1,
        "tree": {"dict": [["s", "w"]], "children": [{"leaf": 0}], "order": [0]},
        "leaves": [{"kind": "ndarray", "path": "tree['w']", "name": "tree['w']"}],
        "sha256": "0" * 64,
    }
    path = tmp_path / "old.safetensors"
    stn.save_file({"tree['w']": np.ones(2)}, str(path), metadata={"tapegrad": json.dumps(meta)})
    with pytest.raises(
        io.CheckpointError,
        match="old.safetensors' has checkpoint format version 1, which is "
        "unsupported: this tapegrad reads format version 2. .*safetensors.numpy.load_file",
    ):
        io.load(path)


def test_not_a_regular_file(tmp_path):
    with pytest.raises(io.CheckpointError, match="cannot read|not a regular file"):
        io.load(tmp_path)


# -- where saves go -----------------------------------------------------------------------------
def test_save_into_a_missing_directory_names_the_path(tmp_path):
    path = tmp_path / "missing" / "ckpt.safetensors"
    with pytest.raises(FileNotFoundError) as info:
        io.save(path, {"w": np.ones(2)})
    msg = str(info.value)
    assert repr(str(path)) in msg and "does not exist" in msg and "tapegrad-tmp" not in msg
    assert info.value.errno == errno.ENOENT
    assert os.listdir(tmp_path) == []


def test_save_onto_a_directory(tmp_path):
    with pytest.raises(IsADirectoryError, match="names a directory"):
        io.save(tmp_path, {"w": np.ones(2)})
    with pytest.raises(IsADirectoryError, match="names a directory"):
        io.save(str(tmp_path / "x") + os.sep, {"w": np.ones(2)})


def test_swapped_arguments_say_the_order(tmp_path):
    tree = {"w": np.ones(2)}
    for path in (tmp_path / "x", str(tmp_path / "x")):
        with pytest.raises(
            TypeError, match=r"io.save: the arguments are swapped.*save\(path, tree\)"
        ):
            io.save(tree, path)
        with pytest.raises(
            TypeError, match=r"io.load: the arguments are swapped.*load\(path, like"
        ):
            io.load(tree, path)
    with (
        open(tmp_path / "f", "wb") as f,
        pytest.raises(TypeError, match="takes a path, not a file object"),
    ):
        io.save(f, tree)
    with pytest.raises(TypeError, match="path must be a str or os.PathLike, got int"):
        io.load(3)
    assert os.listdir(tmp_path) == ["f"]
    io.save(str(tmp_path / "x").encode(), tree)  # bytes paths work too
    _same(io.load(tmp_path / "x"), tree)


# -- stale temporary files ----------------------------------------------------------------------
CHILD = r"""
import sys, time
import numpy as np
from tapegrad import io

def stall(f, pieces):  # write half the checkpoint, then hang until killed
    data = b"".join(bytes(p) for p in pieces)
    f.write(data[: len(data) // 2])
    f.flush()
    print("writing", flush=True)
    time.sleep(120)

io._write_all = stall
io.save(sys.argv[1], {"w": np.arange(100_000.0)})
"""

NOT_A_PID = 9_999_999  # above Linux's largest pid_max (2**22): never a running process


def _temps(directory, name):
    return sorted(f for f in os.listdir(directory) if f.startswith(f".{name}.tapegrad-tmp-"))


@pytest.mark.skipif(os.name == "nt", reason="POSIX signals and locks")
def test_killed_save_leaves_a_temp_file_that_the_next_save_removes(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    io.save(path, {"w": np.zeros(3)})
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready and proc.stdout.readline() == "writing\n"
        temps = _temps(tmp_path, path.name)
        assert len(temps) == 1
        assert re.fullmatch(
            rf"\.ckpt\.safetensors\.tapegrad-tmp-{proc.pid}-[0-9a-f]{{16}}", temps[0]
        )
        io.save(path, {"w": np.ones(3)})  # a live save's temporary file is left alone
        assert _temps(tmp_path, path.name) == temps
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=60) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    assert _temps(tmp_path, path.name) == temps  # SIGKILL leaves it behind, half written
    assert (tmp_path / temps[0]).stat().st_size > 0
    _same(io.load(path), {"w": np.ones(3)})  # the target is intact
    stale = [f".ckpt.safetensors.tapegrad-tmp-{NOT_A_PID}-{i:016x}" for i in range(3)]
    for name in stale:  # as left by more killed saves
        (tmp_path / name).write_bytes(b"x" * 100)
    io.save(path, {"w": np.full(3, 2.0)})
    assert _temps(tmp_path, path.name) == []
    assert sorted(os.listdir(tmp_path)) == ["ckpt.safetensors"]
    _same(io.load(path), {"w": np.full(3, 2.0)})


@pytest.mark.skipif(os.name == "nt", reason="POSIX locks")
def test_only_stale_temp_files_of_the_same_path_are_removed(tmp_path):
    import fcntl

    path = tmp_path / "ckpt.safetensors"
    keep = [
        f".other.safetensors.tapegrad-tmp-{NOT_A_PID}-0123456789abcdef",  # another target
        f".ckpt.safetensors.tapegrad-tmp-{NOT_A_PID}-0123",  # not the pattern
        ".ckpt.safetensors.tapegrad-tmp-0-0123456789abcdef",  # pid 0 is no writer's
        f".ckpt.safetensors.tapegrad-tmp-{os.getpid()}-0123456789abcdef",  # this process
        f".ckpt.safetensors.tapegrad-tmp-{os.getppid()}-0123456789abcdef",  # a live process
    ]
    locked = f".ckpt.safetensors.tapegrad-tmp-{NOT_A_PID}-fedcba9876543210"
    stale = f".ckpt.safetensors.tapegrad-tmp-{NOT_A_PID}-00000000000000ff"
    for name in [*keep, locked, stale]:
        (tmp_path / name).write_bytes(b"x")
    # A writer in another pid namespace or on another machine: its pid means nothing here,
    # but it holds the lock on its temporary file.
    with open(tmp_path / locked, "rb") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        io.save(path, {"w": np.ones(2)})
        assert sorted(os.listdir(tmp_path)) == sorted([*keep, locked, "ckpt.safetensors"])
    io.save(path, {"w": np.ones(2)})
    assert sorted(os.listdir(tmp_path)) == sorted([*keep, "ckpt.safetensors"])
