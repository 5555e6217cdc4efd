"""The CuPy path. Skips cleanly where CuPy or a CUDA device is missing (CI never has one)."""

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp

pytestmark = pytest.mark.gpu

cp = pytest.importorskip("cupy")
if not tg.backend.cupy_available():  # pragma: no cover - depends on the machine
    pytest.skip("no CUDA device", allow_module_level=True)


def test_grad_on_the_gpu_matches_cpu():
    rng = np.random.default_rng(0)
    w, x = rng.standard_normal((3, 2)), rng.standard_normal((4, 3))

    def loss(w, x):
        return (tnp.tanh(x @ w) ** 2).mean()

    g_cpu = tg.grad(loss)(tg.Tensor(w), tg.Tensor(x))
    wg, xg = tg.Tensor(w, device="cuda"), tg.Tensor(x, device="cuda")
    g_gpu = tg.grad(loss)(wg, xg)
    assert g_gpu.device == "cuda:0"
    np.testing.assert_allclose(g_gpu.numpy(), g_cpu.numpy(), rtol=1e-10)


def test_to_device_round_trip_carries_the_gradient_back():
    x = tg.Tensor(np.arange(3.0))
    g = tg.grad(lambda x: (x.to_device("cuda") ** 2).sum())(x)
    assert g.device == "cpu"
    np.testing.assert_allclose(g.numpy(), [0.0, 2.0, 4.0])


def test_mixed_devices_name_both():
    with pytest.raises(ValueError, match="cpu.*cuda:0|cuda:0.*cpu"):
        tg.Tensor([1.0]) + tg.Tensor([1.0], device="cuda")


def test_tape_replay_on_the_gpu():
    f = tg.grad(lambda x: (tnp.sin(x) * x).sum())
    x = tg.Tensor(np.linspace(0, 1, 5), device="cuda")
    _, tape = tg.trace(f)(x)
    y = tg.Tensor(np.linspace(1, 2, 5), device="cuda")
    np.testing.assert_allclose(tape.replay(y).numpy(), f(y).numpy(), rtol=1e-12)


def test_conv_layer_on_the_gpu():
    key = tg.random.key(0)
    w = tg.nn.init.xavier_uniform(key, (4, 1, 3, 3))
    x = np.random.default_rng(1).standard_normal((2, 1, 6, 6)).astype(np.float32)
    out_cpu = tg.nn.functional.conv2d(tg.Tensor(x), w)
    out_gpu = tg.nn.functional.conv2d(tg.Tensor(x, device="cuda"), w.to_device("cuda"))
    np.testing.assert_allclose(out_gpu.numpy(), out_cpu.numpy(), rtol=1e-5, atol=1e-5)


def test_holomorphic_derivatives_on_the_gpu_match_cpu():
    z = np.array([0.3 + 0.7j, -1.2 + 0.4j, 0.8 - 1.1j])
    f = lambda v: tnp.sum(tnp.exp(v) * v**2)  # noqa: E731
    for dev in ("cpu", "cuda"):
        g = tg.grad(f, holomorphic=True)(tg.Tensor(z, device=dev))
        gg = tg.grad(lambda v: tnp.sum(tg.grad(f, holomorphic=True)(v)), holomorphic=True)(
            tg.Tensor(z, device=dev))
        j = tg.jacfwd(tnp.sin, holomorphic=True)(tg.Tensor(z, device=dev))
        assert g.device == ("cuda:0" if dev == "cuda" else "cpu")
        np.testing.assert_allclose(g.numpy(), np.exp(z) * (z**2 + 2 * z), rtol=1e-12)
        np.testing.assert_allclose(gg.numpy(), np.exp(z) * (z**2 + 4 * z + 2), rtol=1e-12)
        np.testing.assert_allclose(j.numpy(), np.diag(np.cos(z)), rtol=1e-12, atol=1e-15)


def test_heaviside_gradient_on_the_gpu():
    x, h = np.array([0.0, 1.0, -1.0]), np.array([0.3, 0.3, 0.3])
    gh = tg.grad(lambda b: tnp.sum(tnp.heaviside(tg.Tensor(x, device="cuda"), b)))(
        tg.Tensor(h, device="cuda"))
    np.testing.assert_array_equal(gh.numpy(), [1.0, 0.0, 0.0])


def test_numpy_passthrough_of_a_gpu_tensor_returns_numpys_result():
    x = tg.Tensor(np.array([0.0, 4.0, 7.0]), device="cuda")
    np.testing.assert_array_equal(np.unwrap(x), np.unwrap(np.array([0.0, 4.0, 7.0])))
