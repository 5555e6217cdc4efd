"""Corruption fuzz for checkpoints: every damaged file is a CheckpointError or an exact load.

Fixed seeds, a few hundred cases each. A damaged file (truncated, bit-flipped, header rewritten,
garbage metadata) must either raise ``io.CheckpointError`` naming the file or load exactly the
saved pytree (structure, container types, dtypes, values). A crafted file, whose metadata is
rewritten and given a valid digest, must raise ``io.CheckpointError`` or load a well-formed
pytree that saves and loads again unchanged; no other exception may escape.
"""

import collections
import hashlib
import json
import os

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import io

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
        assert type(a) is type(b) and a.dtype == b.dtype and np.shape(a) == np.shape(b)
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b)
    else:
        assert a == b


def _tree():
    rng = np.random.default_rng(0)
    return {
        "w": tg.Tensor(rng.normal(size=(3, 4)).astype(np.float32)),
        "b": tg.Tensor(np.zeros(4)),
        "idx": np.arange(5, dtype=np.int64),
        "mask": np.array([True, False, True]),
        "half": np.ones((2, 0), np.float16),
        "c": np.array([1 + 2j], np.complex64),
        "zero_d": np.asarray(2.5),
        "count": np.int32(7),
        "opt": {"step": 12, "lr": 1e-3, "nesterov": True, "name": "adam", "eps": float("inf")},
        "pair": Pair([1, 2.0], (None, "x")),
        "od": collections.OrderedDict([("z", 1), ("a", np.uint8(3))]),
        5: [],
    }


def _header_end(data: bytes) -> int:
    return 8 + int.from_bytes(data[:8], "little")


def _header(data: bytes) -> dict:
    return json.loads(data[8 : _header_end(data)])


def _with_header(header: dict, data: bytes) -> bytes:
    """``data`` with its safetensors header replaced (length prefix and padding redone)."""
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + data[_header_end(data) :]


def _seal(header: dict, data: bytes) -> bytes:
    """Rewrite the header with a valid digest (per the documented rule): a crafted file."""
    header = json.loads(json.dumps(header))
    header["__metadata__"]["tapegrad_sha256"] = "0" * 64
    out = _with_header(header, data)
    digest = hashlib.sha256(out).hexdigest().encode()
    assert out.count(b"0" * 64) >= 1
    zeros = b'"tapegrad_sha256":"' + b"0" * 64 + b'"'
    return out.replace(zeros, b'"tapegrad_sha256":"' + digest + b'"', 1)


def _garbage(rng) -> str:
    choice = int(rng.integers(8))
    if choice == 0:
        return bytes(rng.integers(32, 127, int(rng.integers(0, 200)), dtype=np.uint8)).decode()
    if choice == 1:
        depth = int(rng.integers(1, 100_000))
        return "[" * depth + "]" * depth
    if choice == 2:
        depth = int(rng.integers(1, 100_000))
        return '{"a":' * depth + "0" + "}" * depth
    if choice == 3:
        return json.dumps(rng.normal(size=int(rng.integers(0, 5))).tolist())
    if choice == 4:
        return '{"format":"tapegrad.io","version":2,"tree":' + "[" * 300
    if choice == 5:
        return "9" * int(rng.integers(1, 10_000))
    if choice == 6:
        return json.dumps({"format": "tapegrad.io", "version": int(rng.integers(-3, 4))})
    return '"' + "\\" * int(rng.integers(0, 50))


def _corruptions(data: bytes, seed: int):
    """``(label, bytes)`` pairs: every kind of damage, drawn with a fixed seed."""
    rng = np.random.default_rng(seed)
    end = _header_end(data)
    n = len(data)
    for cut in [0, 1, 7, 8, 9, end - 1, end, end + 1, n - 1]:
        yield f"truncate-{cut}", data[:cut]
    for cut in rng.integers(0, n, 40):
        yield f"truncate-{cut}", data[:cut]
    for _ in range(10):
        yield "append", data + bytes(rng.integers(0, 256, int(rng.integers(1, 64)), np.uint8))
    for region, lo, hi, count in [("header", 0, end, 130), ("data", end, n, 60)]:
        for _ in range(count):
            flipped = bytearray(data)
            for pos in rng.integers(lo, hi, int(rng.integers(1, 4))):
                flipped[pos] ^= 1 << int(rng.integers(8))
            yield f"flip-{region}", bytes(flipped)
    for _ in range(15):
        pos = int(rng.integers(0, n - 16))
        junk = bytes(rng.integers(0, 256, 16, np.uint8))
        yield "overwrite", data[:pos] + junk + data[pos + 16 :]
    for size in [2**64 - 1, 2**63, 2**32, n, n - 7, end, end - 8 + 1, 100_000_001, 0]:
        yield f"header-size-{size}", size.to_bytes(8, "little") + data[8:]
    names = [k for k in _header(data) if k != "__metadata__"]
    for i in range(60):
        header = _header(data)
        entry = header[names[int(rng.integers(len(names)))]]
        what = ("shape", "dtype", "data_offsets")[i % 3]
        if what == "shape":
            big = [0, 1, 2, 3, 7, 2**31, 2**40, 2**63 - 1, -1]
            entry["shape"] = [int(rng.choice(big)) for _ in range(int(rng.integers(0, 4)))]
        elif what == "dtype":
            entry["dtype"] = str(rng.choice(["F16", "F32", "F64", "I8", "U8", "BOOL", "BF16", "X"]))
        else:
            lo, hi = entry["data_offsets"]
            choices = [[hi, lo], [lo, hi + 8], [lo + 8, hi + 8], [0, 2**63], [lo, lo], [-1, hi]]
            entry["data_offsets"] = choices[int(rng.integers(len(choices)))]
        rewritten = _with_header(header, data)
        if rewritten != data:  # drawn the same value again: no damage
            yield f"rewrite-{what}", rewritten
    for _ in range(20):
        header = _header(data)
        header["__metadata__"]["tapegrad"] = _garbage(rng)
        yield "garbage-meta", _with_header(header, data)
    for _ in range(20):  # the same garbage with a valid digest: the structure checks catch it
        header = _header(data)
        header["__metadata__"]["tapegrad"] = _garbage(rng)
        yield "garbage-meta-sealed", _seal(header, data)
    for length in [8, 64, 4096]:
        yield f"random-{length}", bytes(rng.integers(0, 256, length, np.uint8))
    yield "zeros", bytes(64)


def test_corrupted_files_fail_cleanly_or_load_exactly(tmp_path):
    tree = _tree()
    original = tmp_path / "original.safetensors"
    io.save(original, tree)
    data = original.read_bytes()
    path = tmp_path / "damaged.safetensors"
    outcomes = collections.Counter()
    for label, damaged in _corruptions(data, seed=20240611):
        assert damaged != data
        path.write_bytes(damaged)
        for like in (None, tree):
            try:
                back = io.load(path, like=like)
            except io.CheckpointError as e:
                assert "damaged.safetensors" in str(e), (label, str(e))
                outcomes["error"] += 1
                continue
            try:
                _same(back, tree)
            except AssertionError as e:
                raise AssertionError(f"{label}: a damaged file loaded as another value") from e
            outcomes["exact"] += 1
    assert outcomes["error"] + outcomes["exact"] >= 2 * 360


def _json_paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _json_paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _json_paths(v, (*prefix, i))


def _random_json(rng, depth=0):
    choice = int(rng.integers(11 if depth < 3 else 7))
    simple = [
        None,
        True,
        int(rng.integers(-3, 10)),
        2**70,
        float(rng.normal()),
        str(rng.choice(["s", "i", "a", "tree['w']", "tensor", "int", "Pair", ""])),
        "ndarray",
    ]
    if choice < 7:
        return simple[choice]
    if choice in (7, 8):
        return [_random_json(rng, depth + 1) for _ in range(int(rng.integers(0, 3)))]
    keys = ["leaf", "list", "tuple", "dict", "odict", "children", "order", "none", "kind"]
    keys += ["path", "value", "namedtuple", "fields"]
    return {
        str(rng.choice(keys)): _random_json(rng, depth + 1) for _ in range(int(rng.integers(1, 4)))
    }


def _mutate(meta, rng):
    meta = json.loads(json.dumps(meta))
    paths = [p for p in _json_paths(meta) if p]
    target = paths[int(rng.integers(len(paths)))]
    parent = meta
    for k in target[:-1]:
        parent = parent[k]
    action = int(rng.integers(3))
    if action == 0 or (action == 1 and isinstance(parent, list)):
        parent[target[-1]] = _random_json(rng)
    elif action == 1:
        del parent[target[-1]]
    elif isinstance(parent, list):
        parent.insert(int(rng.integers(len(parent) + 1)), _random_json(rng))
    else:
        parent[str(rng.choice(["extra", "leaf", "children", "value"]))] = _random_json(rng)
    return meta


def test_crafted_metadata_fails_cleanly_or_loads_a_well_formed_tree(tmp_path):
    tree = _tree()
    original = tmp_path / "original.safetensors"
    io.save(original, tree)
    data = original.read_bytes()
    meta = json.loads(_header(data)["__metadata__"]["tapegrad"])
    rng = np.random.default_rng(7)
    path = tmp_path / "crafted.safetensors"
    outcomes = collections.Counter()
    for case in range(300):
        header = _header(data)
        header["__metadata__"]["tapegrad"] = json.dumps(_mutate(meta, rng), allow_nan=True)
        path.write_bytes(_seal(header, data))
        for like in (None, tree):
            try:
                back = io.load(path, like=like)
            except io.CheckpointError as e:
                assert "crafted.safetensors" in str(e), (case, str(e))
                outcomes["error"] += 1
                continue
            io.save(tmp_path / "again", back)  # well formed: it saves and loads unchanged
            _same(io.load(tmp_path / "again"), back)
            outcomes["loaded"] += 1
    assert outcomes["error"] > 300  # most mutations break the structure
    assert not os.path.exists(tmp_path / "again") or outcomes["loaded"] > 0


@pytest.mark.parametrize("seed", [1, 2])
def test_random_trees_round_trip_exactly(tmp_path, seed):
    rng = np.random.default_rng(seed)

    def draw(depth=0):
        kind = int(rng.integers(9 if depth < 4 else 5))
        shape = tuple(int(s) for s in rng.integers(0, 3, int(rng.integers(0, 3))))
        dtype = rng.choice(["float32", "float64", "int64", "uint8", "bool", "float16"])
        if kind == 0:
            return tg.Tensor(rng.normal(size=shape).astype(dtype))
        if kind == 1:
            return (rng.normal(size=shape) * 10).astype(dtype)
        if kind == 2:
            return np.dtype(dtype).type(rng.integers(0, 2))
        if kind == 3:
            return [int(rng.integers(-(2**62), 2**62)), float(rng.normal()), bool(rng.integers(2))][
                int(rng.integers(3))
            ]
        if kind == 4:
            return str(rng.choice(["", "adam", "ü", "a'b\"c"]))
        n = int(rng.integers(0, 4))
        if kind == 5:
            return [draw(depth + 1) for _ in range(n)]
        if kind == 6:
            return tuple(draw(depth + 1) for _ in range(n))
        if kind == 7:
            return Pair(draw(depth + 1), draw(depth + 1))
        keys = [str(rng.choice(["a", "b", "c", "w'", "0"])) for _ in range(n)]
        return {k: draw(depth + 1) for k in keys}

    for _ in range(40):
        tree = {"root": draw()}
        io.save(tmp_path / "t", tree)
        _same(io.load(tmp_path / "t"), tree)
        _same(io.load(tmp_path / "t", like=tree), tree)
