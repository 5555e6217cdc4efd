"""Tape.to_json / Tape.from_json: tapes written without pickle and read back checked."""

import json
import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import strategies as tgst

rng = np.random.default_rng(0)
W = tg.Tensor(rng.standard_normal((3, 3)))


def model(x):
    """Closes over W (a constant array), a list and a complex scale; indexes with an array."""
    h = tnp.tanh(x @ W) * np.array([1.0, 2.0, 3.0])
    z = h * (1 - 2j)
    return (tnp.sum(tnp.abs(z) ** 2) + tnp.sum(x[:, [0, 2]])
            + tnp.sum(tnp.logaddexp(x, 0.0)) + tnp.sum(tnp.where(x > 0.5, x, 0.0)))


def roundtrip(tape, tmp_path):
    text = tape.to_json(arrays=tmp_path / "consts.safetensors")
    return tg.Tape.from_json(text), text


def test_a_gradient_tape_round_trips(tmp_path):
    x = tg.Tensor(rng.standard_normal((2, 3)))
    _, tape = tg.trace(tg.grad(model))(x)
    loaded, text = roundtrip(tape, tmp_path)
    assert str(loaded) == str(tape)
    assert "pickle" not in text and json.loads(text)["format"] == "tapegrad.tape"
    for arg in (x, 2 * x, -x):
        np.testing.assert_allclose(loaded.replay(arg).numpy(), tg.grad(model)(arg).numpy())
    np.testing.assert_allclose(tg.jit(loaded.replay)(3 * x).numpy(),
                               tg.grad(model)(3 * x).numpy())


def test_a_loaded_tape_differentiates_through_its_replay(tmp_path):
    x = tg.Tensor(rng.standard_normal((2, 3)))
    out, tape = tg.trace(model)(x)
    loaded, _ = roundtrip(tape, tmp_path)
    with pytest.raises(ValueError, match="holds no residuals"):
        loaded.vjp(tg.Tensor(1.0))
    with pytest.raises(ValueError, match="holds no residuals"):
        loaded.residual_bytes()
    np.testing.assert_allclose(tg.grad(loaded.replay)(x).numpy(), tg.grad(model)(x).numpy())
    xs = tg.Tensor(rng.standard_normal((4, 2, 3)))
    np.testing.assert_allclose(tg.vmap(loaded.replay)(xs).numpy(),
                               [model(xs[i]).numpy() for i in range(4)])


def test_no_constants_no_file_and_pytrees_of_containers():
    def f(p):
        return {"s": tnp.sum(p["w"] * p["b"][0]), "t": (p["b"][1], None)}

    p = {"w": tg.Tensor(np.ones(3)), "b": [tg.Tensor(2.0), tg.Tensor(np.arange(2.0))]}
    _, tape = tg.trace(f)(p)
    loaded = tg.Tape.from_json(tape.to_json())
    q = {"w": tg.Tensor(np.arange(3.0)), "b": [tg.Tensor(-1.0), tg.Tensor(np.ones(2))]}
    got, want = loaded.replay(q), f(q)
    assert set(got) == {"s", "t"} and got["t"][1] is None
    np.testing.assert_allclose(got["s"].numpy(), want["s"].numpy())
    np.testing.assert_allclose(got["t"][0].numpy(), want["t"][0].numpy())


def test_guards_survive_the_file():
    def f(x):
        return tnp.sin(x) if x[0] > 0 else tnp.cos(x)

    _, tape = tg.trace(f)(tg.Tensor(np.array([1.0, 2.0])))
    loaded = tg.Tape.from_json(tape.to_json())
    np.testing.assert_allclose(loaded.replay(tg.Tensor(np.array([3.0, 1.0]))).numpy(),
                               np.sin([3.0, 1.0]))
    with pytest.raises(tg.GuardError):
        loaded.replay(tg.Tensor(np.array([-3.0, 1.0])))


def test_constants_need_a_file_and_the_file_is_checked(tmp_path):
    x = tg.Tensor(rng.standard_normal((2, 3)))
    _, tape = tg.trace(model)(x)
    with pytest.raises(ValueError, match=r"constant array\(s\); give a path"):
        tape.to_json()
    path = tmp_path / "consts.safetensors"
    text = tape.to_json(arrays=path)
    moved = tmp_path / "moved.safetensors"
    os.replace(path, moved)
    with pytest.raises(ValueError, match="cannot read the constants file"):
        tg.Tape.from_json(text)
    assert str(tg.Tape.from_json(text, arrays=moved)) == str(tape)
    data = bytearray(moved.read_bytes())
    data[-1] ^= 1
    moved.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="SHA-256 differs"):
        tg.Tape.from_json(text, arrays=moved)


def test_what_cannot_be_written_or_read_is_named():
    x = tg.Tensor(np.ones(3))
    _, tape = tg.trace(tg.checkpoint(lambda x: tnp.sin(x)))(x)
    with pytest.raises(ValueError, match=r"parameter 'body' of entry 0 \(checkpoint\)"):
        tape.to_json()
    _, tape = tg.trace(lambda x: tnp.sin(x))(x)
    doc = json.loads(tape.to_json())
    with pytest.raises(ValueError, match="not a tapegrad tape"):
        tg.Tape.from_json("{}")
    with pytest.raises(ValueError, match="not JSON"):
        tg.Tape.from_json("{")
    with pytest.raises(ValueError, match="version 2"):
        tg.Tape.from_json(json.dumps(dict(doc, version=2)))
    for op, msg in (("not_a_loaded_module:F", "not imported"),
                    ("os:system", "not a tapegrad Function"),
                    ("tapegrad.ops.elementwise:Nope", "no 'Nope'"),
                    ("tapegrad.tape:Tape", "not a tapegrad Function"),
                    ("tapegrad.ops:__class__", "defines no")):
        bad = dict(doc, entries=[dict(doc["entries"][0], op=op)])
        with pytest.raises(ValueError, match=msg):
            tg.Tape.from_json(json.dumps(bad))
    with pytest.raises(ValueError, match="malformed"):
        tg.Tape.from_json(json.dumps(dict(doc, entries=[{"op": "tapegrad.ops:Sin"}])))


@given(shape=tgst.shapes(max_dims=3), data=st.data(),
       dtype=st.sampled_from([np.float32, np.float64, np.complex128]))
def test_round_trip_replays_the_same_values(shape, data, dtype, tmp_path_factory):
    x = tg.Tensor(data.draw(tgst.arrays(shape)).astype(dtype))
    c = data.draw(tgst.arrays(shape)).astype(dtype)
    axis = data.draw(st.sampled_from([None] + list(range(len(shape)))))

    def f(x):
        y = tnp.exp(x * 0.1) + c
        return tnp.sum(y * tnp.conj(y), axis=axis), tnp.reshape(y, (-1,))[::2]

    _, tape = tg.trace(f)(x)
    path = tmp_path_factory.mktemp("t") / "c.safetensors"
    loaded = tg.Tape.from_json(tape.to_json(arrays=path))
    x2 = tg.Tensor(data.draw(tgst.arrays(shape)).astype(dtype))
    for a, b in zip(loaded.replay(x2), f(x2)):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
