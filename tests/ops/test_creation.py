"""Example tests for tapegrad.numpy's creation functions: values, dtypes, devices, errors."""

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp


@pytest.mark.parametrize("fn, ref", [(tnp.zeros, np.zeros), (tnp.ones, np.ones)])
def test_zeros_ones_default_float32_and_dtype(fn, ref):
    x = fn((2, 3))
    assert isinstance(x, tg.Tensor) and x.shape == (2, 3) and x.dtype == np.float32
    assert x.device == "cpu"
    np.testing.assert_array_equal(x.numpy(), ref((2, 3)))
    assert fn(4).shape == (4,)
    assert fn(()).shape == ()
    assert fn((0, 2)).shape == (0, 2)
    for dt in (tnp.float64, tnp.int32, tnp.int64, tnp.bool_, "float16"):
        assert fn(2, dtype=dt).dtype == np.dtype(dt)


def test_empty_returns_zeros_deterministically():
    np.testing.assert_array_equal(tnp.empty((3, 2)).numpy(), np.zeros((3, 2)))
    assert tnp.empty(2, dtype=tnp.int64).dtype == np.int64
    np.testing.assert_array_equal(tnp.empty_like(np.ones((2, 2))).numpy(), np.zeros((2, 2)))


def test_full_dtype_rules():
    assert tnp.full((2,), 1.5).dtype == np.float32
    assert tnp.full((2,), 3).dtype == np.int64
    assert tnp.full((2,), True).dtype == np.bool_
    assert tnp.full((2,), np.float64(1.0)).dtype == np.float64
    assert tnp.full((2,), 3, dtype=tnp.float64).dtype == np.float64
    np.testing.assert_array_equal(tnp.full((2, 3), [1.0, 2.0, 3.0]).numpy(), [[1, 2, 3]] * 2)
    with pytest.raises(ValueError, match=r"full: fill_value of shape \(2,\) does not broadcast"):
        tnp.full((2, 3), [1.0, 2.0])
    with pytest.raises(TypeError, match="full: fill_value must be a number"):
        tnp.full((2,), "a")


def test_full_with_tensor_fill_is_differentiable():
    g = tg.grad(lambda v: tnp.full((2, 3), v).sum())(tg.Tensor(np.float64(2.0)))
    assert float(g) == 6.0
    g = tg.grad(lambda v: tnp.full_like(np.ones((4,)), v, dtype=tnp.float64).sum())(
        tg.Tensor(np.float64(1.0))
    )
    assert float(g) == 4.0


def test_like_functions_keep_dtype_shape_device():
    x = tg.Tensor(np.arange(6, dtype=np.int32).reshape(2, 3))
    for fn, val in ((tnp.zeros_like, 0), (tnp.ones_like, 1)):
        y = fn(x)
        assert y.shape == (2, 3) and y.dtype == np.int32 and y.device == "cpu"
        np.testing.assert_array_equal(y.numpy(), np.full((2, 3), val))
        assert fn(x, dtype=tnp.float64).dtype == np.float64
        assert fn(x, shape=(4,)).shape == (4,)
    y = tnp.full_like(x, 7)
    assert y.dtype == np.int32 and (y.numpy() == 7).all()
    assert tnp.zeros_like([1.0, 2.0]).dtype == np.float32  # Python data counts as float32


def test_like_of_traced_value_is_constant():
    def f(x):
        return (x * tnp.ones_like(x)).sum() + tnp.zeros_like(x).sum()

    np.testing.assert_array_equal(tg.grad(f)(tg.Tensor([1.0, 2.0])).numpy(), [1.0, 1.0])


def test_arange_dtypes_match_numpy_rules():
    a = tnp.arange(5)
    assert a.dtype == np.int64
    np.testing.assert_array_equal(a.numpy(), np.arange(5))
    np.testing.assert_array_equal(tnp.arange(2, 10, 3).numpy(), np.arange(2, 10, 3))
    np.testing.assert_array_equal(tnp.arange(5, 0, -2).numpy(), np.arange(5, 0, -2))
    b = tnp.arange(0.0, 1.0, 0.1)
    assert b.dtype == np.float32
    np.testing.assert_array_equal(b.numpy(), np.arange(0.0, 1.0, 0.1).astype(np.float32))
    c = tnp.arange(3, dtype=tnp.float64)
    assert c.dtype == np.float64
    assert tnp.arange(5, 2).shape == (0,)
    with pytest.raises(ValueError, match="arange: step must be nonzero"):
        tnp.arange(0, 5, 0)
    with pytest.raises(TypeError, match="arange: stop must be a Python or NumPy number"):
        tnp.arange(0, "5")


def test_linspace_matches_numpy():
    x = tnp.linspace(0, 1, 5)
    assert x.dtype == np.float32
    np.testing.assert_allclose(x.numpy(), np.linspace(0, 1, 5), rtol=1e-7)
    y, step = tnp.linspace(0, 2, 4, endpoint=False, retstep=True, dtype=tnp.float64)
    ref, ref_step = np.linspace(0, 2, 4, endpoint=False, retstep=True)
    np.testing.assert_array_equal(y.numpy(), ref)
    assert step == ref_step
    np.testing.assert_array_equal(
        tnp.linspace(0, 10, 4, dtype=tnp.int64).numpy(), np.linspace(0, 10, 4, dtype=np.int64)
    )
    z = tnp.linspace([0.0, 1.0], [1.0, 3.0], 3, axis=1)
    np.testing.assert_allclose(z.numpy(), np.linspace([0.0, 1.0], [1.0, 3.0], 3, axis=1))
    assert tnp.linspace(0, 1, 0).shape == (0,)
    with pytest.raises(ValueError, match="linspace: num must be non-negative"):
        tnp.linspace(0, 1, -1)


def test_eye_identity_tri():
    np.testing.assert_array_equal(tnp.eye(3).numpy(), np.eye(3))
    assert tnp.eye(3).dtype == np.float32
    np.testing.assert_array_equal(tnp.eye(2, 4, k=1).numpy(), np.eye(2, 4, k=1))
    np.testing.assert_array_equal(tnp.identity(2, dtype=tnp.int64).numpy(), np.identity(2))
    assert tnp.identity(2, dtype=tnp.int64).dtype == np.int64
    np.testing.assert_array_equal(tnp.tri(3, k=-1).numpy(), np.tri(3, k=-1))
    with pytest.raises(ValueError, match="eye: sizes must be non-negative"):
        tnp.eye(-1)


def test_creation_errors():
    with pytest.raises(ValueError, match=r"zeros: negative dimensions are not allowed, got shape"):
        tnp.zeros((2, -1))
    with pytest.raises(TypeError, match="ones: shape must be an int or a sequence of ints"):
        tnp.ones((2.5,))
    with pytest.raises(TypeError, match="zeros: dtype must be numeric"):
        tnp.zeros(2, dtype=str)
    with pytest.raises(TypeError, match="full: 'nope' is not a dtype"):
        tnp.full(2, 1.0, dtype="nope")
    with pytest.raises(ValueError, match="zeros: device: expected 'cpu'"):
        tnp.zeros(2, device="tpu")


def test_cpu_device_argument():
    for x in (
        tnp.zeros(2, device="cpu"),
        tnp.arange(3, device="cpu"),
        tnp.eye(2, device="cpu"),
        tnp.linspace(0, 1, 3, device="cpu"),
        tnp.full(2, 1.0, device="cpu"),
    ):
        assert x.device == "cpu"


@pytest.mark.gpu
def test_cuda_device_argument():
    pytest.importorskip("cupy")
    if not tg.backend.cupy_available():
        pytest.skip("no CUDA device")
    for x in (
        tnp.zeros((2, 3), device="cuda:0"),
        tnp.ones(3, dtype=tnp.float64, device="cuda"),
        tnp.arange(4, device="cuda:0"),
        tnp.linspace(0, 1, 3, device="cuda:0"),
        tnp.eye(3, device="cuda:0"),
        tnp.full((2,), 2.0, device="cuda:0"),
    ):
        assert x.device == "cuda:0"
    y = tnp.zeros_like(tnp.ones(3, device="cuda:0"))
    assert y.device == "cuda:0" and y.dtype == np.float32
    np.testing.assert_array_equal(tnp.arange(4, device="cuda:0").numpy(), np.arange(4))
