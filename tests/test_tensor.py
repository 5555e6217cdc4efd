import re

import attrs
import numpy as np
import pytest

import tapegrad as tg


def test_construction_defaults_and_dtypes():
    assert tg.Tensor(1.0).dtype == np.float32
    assert tg.Tensor([1.0, 2, 3]).dtype == np.float32  # Python floats -> float32
    assert tg.Tensor([1, 2, 3]).dtype == np.int64  # Python ints -> int64 (NumPy, PyTorch)
    assert tg.Tensor(3).dtype == np.int64
    assert tg.Tensor(1 + 2j).dtype == np.complex64
    assert tg.Tensor([True, False]).dtype == np.bool_
    a64 = np.arange(3, dtype=np.float64)
    assert tg.Tensor(a64).dtype == np.float64  # arrays keep their dtype
    assert tg.Tensor(np.arange(3)).dtype == np.int64
    assert tg.Tensor([1, 2], dtype="float64").dtype == np.float64


def test_metadata():
    x = tg.Tensor(np.zeros((2, 3, 4)), label="x")
    assert x.shape == (2, 3, 4) and x.ndim == 3 and x.size == 24
    assert x.device == "cpu" and x.label == "x"
    assert x.T.shape == (4, 3, 2)
    assert len(x) == 2
    assert [t.shape for t in x] == [(3, 4), (3, 4)]


def test_callers_array_is_never_touched_and_value_is_read_only():
    a = np.arange(4.0)
    x = tg.Tensor(a)
    assert a.flags.writeable  # the caller's array keeps its flags
    with pytest.raises(ValueError):
        x.numpy()[0] = 5.0  # the Tensor's view is read-only
    a[0] = 7.0  # the Tensor owns a copy: the caller writing its array changes nothing
    assert x.numpy()[0] == 0.0


def test_a_reused_buffer_does_not_change_a_recorded_gradient():
    # A data loader that reuses its buffer: the Tensor and the vjp's saved values must not
    # follow the caller's writes (they shared memory before, giving [1, 1] here).
    src = np.array([1.0, 2.0])
    x = tg.Tensor(src)
    _, vjp_fn = tg.vjp(tg.numpy.sin, x)
    src[:] = 0.0
    np.testing.assert_allclose(vjp_fn(tg.Tensor(np.ones(2)))[0].numpy(), np.cos([1.0, 2.0]))
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])
    view = np.broadcast_to(src, (2,))  # read-only, yet its base can still be written
    y = tg.Tensor(view)
    src[:] = 5.0
    np.testing.assert_array_equal(y.numpy(), [0.0, 0.0])


def test_frozen_record():
    x = tg.Tensor([1.0])
    assert attrs.has(tg.Tensor)
    with pytest.raises(AttributeError, match="immutable"):
        x.label = "y"
    with pytest.raises(AttributeError, match="immutable"):
        x.foo = 1


def test_setitem_points_to_at():
    x = tg.Tensor([1.0, 2.0])
    with pytest.raises(TypeError, match=r"x = x\.at\[idx\]\.set\(v\)"):
        x[0] = 3.0


def test_identity_hash_and_comparisons_are_tensors():
    x, y = tg.Tensor([1.0, 2.0]), tg.Tensor([1.0, 3.0])
    assert hash(x) != hash(tg.Tensor([1.0, 2.0])) or x is not y
    eq = x == y
    assert isinstance(eq, tg.Tensor) and eq.dtype == np.bool_
    np.testing.assert_array_equal(eq.numpy(), [True, False])
    np.testing.assert_array_equal((x < y).numpy(), [False, True])
    np.testing.assert_array_equal((x >= 2.0).numpy(), [False, True])
    assert {x: 1}[x] == 1


def test_operators_and_reflected_forms():
    x = tg.Tensor([1.0, 2.0])
    np.testing.assert_allclose((2.0 - x).numpy(), [1.0, 0.0])
    np.testing.assert_allclose((2.0 / x).numpy(), [2.0, 1.0])
    np.testing.assert_allclose((2.0**x).numpy(), [2.0, 4.0])
    np.testing.assert_allclose((-x).numpy(), [-1.0, -2.0])
    np.testing.assert_allclose((np.array([1.0, 1.0]) + x).numpy(), [2.0, 3.0])
    assert isinstance(np.array([1.0, 1.0]) * x, tg.Tensor)
    m = tg.Tensor(np.eye(2))
    np.testing.assert_allclose((np.ones((2, 2)) @ m).numpy(), np.ones((2, 2)))
    x2 = x
    x2 += 1  # rebinds to a new Tensor, as in JAX
    np.testing.assert_allclose(x.numpy(), [1.0, 2.0])
    np.testing.assert_allclose(x2.numpy(), [2.0, 3.0])


def test_python_scalars_keep_the_tensor_dtype():
    x = tg.Tensor(np.ones(2, np.float64))
    assert (x * 2.5).dtype == np.float64
    y = tg.Tensor(np.ones(2, np.float32))
    assert (y * 2.5).dtype == np.float32 and (3 - y).dtype == np.float32


def test_item_numpy_array_and_conversions():
    x = tg.Tensor([[3.5]])
    assert x.item() == 3.5 and float(x) == 3.5 and int(tg.Tensor(2.0)) == 2
    assert bool(tg.Tensor(1.0))
    np.testing.assert_array_equal(np.asarray(x), [[3.5]])
    with pytest.raises(ValueError, match="one-element"):
        tg.Tensor([1.0, 2.0]).item()
    with pytest.raises(ValueError, match="ambiguous"):
        bool(tg.Tensor([1.0, 2.0]))


def test_astype_convert_to_detach_to_device():
    x = tg.Tensor([1.5, 2.5])
    assert x.astype("float64").dtype == np.float64
    assert x.convert_to(np.int32).dtype == np.int32
    assert x.detach().shape == (2,)
    assert x.to_device("cpu") is x
    with pytest.raises(ValueError, match="device"):
        x.to_device("tpu")


def test_repr_is_readable():
    r = repr(tg.Tensor([1.0, 2.0], label="w"))
    assert r.startswith("Tensor([1., 2.]") and "float32" in r and "'w'" in r


def test_non_numeric_data_is_a_type_error():
    with pytest.raises(TypeError, match="numeric"):
        tg.Tensor(["a", "b"])
    with pytest.raises(TypeError):
        tg.Tensor({"a": 1})
    # a NumPy array of strings or objects too (it used to become a Tensor of dtype <U1)
    for a in (np.array(["a", "b"]), np.array([object()]), np.array(["2020-01-01"], "M8[D]")):
        want = re.escape(f"expected a numeric array, got dtype {a.dtype}")
        with pytest.raises(TypeError, match=want):
            tg.Tensor(a)
    assert tg.Tensor(np.array(["1.5"]), dtype="float64").numpy().tolist() == [1.5]


def test_traced_tensor_cannot_silently_become_numpy():
    def f(x):
        np.asarray(x)
        return x.sum()

    with pytest.raises(TypeError, match=r"np.asarray.*stop_gradient\(x\).numpy\(\)"):
        tg.grad(f)(tg.Tensor([1.0]))
