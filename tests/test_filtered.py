"""Equinox's filtered transforms: grad and jit over trees that mix arrays with other leaves."""

import numpy as np
import pytest

import tapegrad as tg


def _loss(p):
    return (p["act"](p["w"]) * p["n"]).sum() + p["b"] * p["x"]


def _tree():
    return {"w": np.array([0.5, -1.0]), "n": np.array(3), "act": np.tanh, "name": "layer",
            "b": np.float64(2.0), "x": 1.5}


def test_filter_grad_differentiates_the_floating_array_leaves_only():
    t = _tree()
    g = tg.filter_grad(_loss)(t)
    assert g["n"] is None and g["act"] is None and g["name"] is None and g["x"] is None
    np.testing.assert_allclose(g["w"].numpy(), 3 / np.cosh(t["w"]) ** 2, rtol=1e-12)
    assert float(g["b"]) == 1.5  # a NumPy scalar is an array; a Python float is not
    value, g2 = tg.filter_value_and_grad(_loss)(t)
    np.testing.assert_allclose(float(value), float(_loss(t)), rtol=1e-12)
    np.testing.assert_array_equal(g2["w"].numpy(), g["w"].numpy())
    # plain grad refuses the same tree and points here
    with pytest.raises(TypeError, match="tg.filter_grad"):
        tg.grad(_loss)(t)


def test_filter_grad_has_aux_and_other_arguments():
    def loss(p, scale):
        return (p["w"] ** 2).sum() * scale, p["name"]

    grads, aux = tg.filter_grad(loss, has_aux=True)(_tree(), 2.0)
    assert aux == "layer" and grads["name"] is None
    np.testing.assert_allclose(grads["w"].numpy(), [2.0, -4.0])
    (value, aux), _ = tg.filter_value_and_grad(loss, has_aux=True)(_tree(), 1.0)
    assert float(value) == 1.25 and aux == "layer"
    for make in (tg.filter_grad, tg.filter_value_and_grad, tg.filter_jit):
        with pytest.raises(TypeError, match="fun must be callable"):
            make(3)  # pyright: ignore[reportArgumentType]


def test_filter_jit_traces_arrays_and_keys_on_the_other_leaves():
    calls = []

    def f(p, x):
        calls.append(1)
        return {"y": p["act"](x * p["w"]), "name": p["name"], "n": p["n"] * 2}

    fast = tg.filter_jit(f)
    t = _tree()
    out = fast(t, np.ones(2))
    assert out["name"] == "layer" and int(out["n"]) == 6
    np.testing.assert_allclose(out["y"].numpy(), np.tanh(t["w"]))
    out = fast({**t, "w": np.array([2.0, 3.0])}, np.ones(2))  # new array values: same program
    np.testing.assert_allclose(out["y"].numpy(), np.tanh([2.0, 3.0]))
    assert len(calls) == 1 and fast.cache_size() == 1
    fast({**t, "act": np.sin}, np.ones(2))  # a new static leaf: compiles again
    fast({**t, "x": 2.5}, np.ones(2))  # a Python number is static too (Equinox)
    assert len(calls) == 3 and fast.cache_size() == 3
    fast.clear_cache()
    assert fast.cache_size() == 0
    # plain jit refuses the function leaf and points to static arguments
    with pytest.raises(TypeError, match="static"):
        tg.jit(f)(t, np.ones(2))
