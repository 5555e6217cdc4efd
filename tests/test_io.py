"""Checkpoints: exact round trips, atomic writes, clear errors on bad files."""

import collections
import json
import os

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

    def crash(f, data):
        f.write(data[: len(data) // 2])
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(io, "_write_all", crash)
    with pytest.raises(OSError, match="simulated"):
        io.save(path, {"w": np.arange(1000.0)})
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.safetensors"]  # no temporary file left behind
    _same(io.load(path), old)


def test_crash_at_rename_and_new_file(tmp_path, monkeypatch):
    def no_replace(src, dst):
        raise OSError("power cut (simulated)")

    monkeypatch.setattr(io.os, "replace", no_replace)
    with pytest.raises(OSError, match="power cut"):
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


def test_corrupted_metadata(tmp_path):
    import safetensors.numpy as stn

    meta = {"format": "tapegrad.io", "version": 1, "tree": {"leaf": 0}, "leaves": [{"kind": "?"}]}
    stn.save_file({}, str(tmp_path / "bad"), metadata={"tapegrad": json.dumps(meta)})
    with pytest.raises(io.CheckpointError, match="bad.*corrupted metadata"):
        io.load(tmp_path / "bad")
    meta["version"] = 99
    stn.save_file({}, str(tmp_path / "v99"), metadata={"tapegrad": json.dumps(meta)})
    with pytest.raises(io.CheckpointError, match="version 99"):
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
    assert os.listdir(tmp_path) == []


def test_loaded_tensors_are_independent_of_the_file(tmp_path):
    path = tmp_path / "x"
    io.save(path, {"w": tg.Tensor(np.ones(3))})
    back = io.load(path)
    io.save(path, {"w": tg.Tensor(np.zeros(3))})
    np.testing.assert_array_equal(back["w"].numpy(), np.ones(3))
