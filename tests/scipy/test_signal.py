"""Example tests of ``tapegrad.scipy.signal``: values against SciPy, derivatives against
the transposed operation, batching, and the errors raised."""

import numpy as np
import pytest
import scipy.signal as ss

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.scipy import signal
from tapegrad.testing import check_grads, check_vmap

X = np.array([1.0, -2.0, 0.5, 3.0, 0.25])
K = np.array([0.5, 1.0, -1.0])


@pytest.mark.parametrize("name", ["convolve", "correlate"])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_values_match_scipy(name, mode):
    for a, b in [(X, K), (K, X), (np.outer(X, K), np.outer(K, K[:2]))]:
        got = getattr(signal, name)(a, b, mode=mode)
        want = getattr(ss, name)(a, b, mode=mode)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-14)


def test_dtypes_and_complex():
    assert signal.convolve(X.astype(np.float32), K.astype(np.float32)).dtype == np.float32
    z = K + 1j * K[::-1]
    np.testing.assert_allclose(signal.correlate(X, z).numpy(), ss.correlate(X, z), rtol=1e-12)
    assert signal.correlate(X, z).dtype == np.complex128
    assert signal.convolve(np.arange(3), np.arange(2)).dtype == ss.convolve(np.arange(3),
                                                                          np.arange(2)).dtype


def test_gradient_is_the_correlation_with_the_cotangent():
    g = np.array([1.0, 0.0, 2.0, -1.0, 0.5, 1.0, 0.0])
    gx = tg.grad(lambda x: tnp.sum(signal.convolve(x, K) * g))(tg.Tensor(X))
    np.testing.assert_allclose(gx.numpy(), ss.correlate(g, K, mode="valid"), rtol=1e-12)
    check_grads(lambda a, b: signal.correlate(a, b, mode="same"), (tg.Tensor(X), tg.Tensor(K)),
                order=2, modes=("rev", "fwd"))


def test_torch_cross_check():
    torch = pytest.importorskip("torch")
    x = torch.tensor(X[None, None], requires_grad=True)
    k = torch.tensor(K[None, None], requires_grad=True)
    torch.nn.functional.conv1d(x, k).square().sum().backward()  # a 'valid' correlation
    gx, gk = tg.grad(lambda a, b: tnp.sum(signal.correlate(a, b, mode="valid") ** 2),
                     argnums=(0, 1))(tg.Tensor(X), tg.Tensor(K))
    np.testing.assert_allclose(gx.numpy(), x.grad.numpy()[0, 0], rtol=1e-12)
    np.testing.assert_allclose(gk.numpy(), k.grad.numpy()[0, 0], rtol=1e-12)


def test_vmap_over_signals_and_kernels():
    xs = tg.Tensor(np.stack([X, 2 * X, X[::-1]]))
    ks = tg.Tensor(np.stack([K, -K, K ** 2]))
    check_vmap(signal.convolve, (xs, tg.Tensor(K)), in_axes=(0, None))
    check_vmap(signal.correlate, (xs, ks), in_axes=(0, 0))
    check_vmap(lambda a, b: signal.convolve(a, b, mode="same"), (tg.Tensor(X), ks),
               in_axes=(None, 0))


def test_empty_and_zero_dimensional_inputs():
    # an empty input contributes nothing: zeros of the mode's shape (SciPy raises here)
    for mode, shape in [("full", (2,)), ("same", (0,))]:
        got = signal.convolve(np.zeros(0), K, mode=mode)
        assert got.shape == shape
        np.testing.assert_array_equal(got.numpy(), np.zeros(shape))
    assert signal.correlate(np.ones((2, 0)), np.ones((1, 3))).shape == (2, 2)
    with pytest.raises(ValueError, match=r"convolve: mode 'valid' needs non-empty inputs"):
        signal.convolve(np.zeros(0), K, mode="valid")
    np.testing.assert_allclose(signal.convolve(np.array(2.0), np.array(3.0)).numpy(),
                               ss.convolve(np.array(2.0), np.array(3.0)))


@pytest.mark.parametrize("call, match", [
    (lambda: signal.convolve(np.ones(3), np.ones((2, 2))),
     r"convolve: in1 and in2 need the same number of dimensions; got shapes \(3,\) and "
     r"\(2, 2\)"),
    (lambda: signal.correlate(np.ones(3), np.ones(2), mode="bad"),
     "correlate: mode must be 'full', 'valid' or 'same', got 'bad'"),
    (lambda: signal.convolve(np.ones(3), np.ones(2), method="bad"),
     "convolve: method must be 'auto', 'direct' or 'fft', got 'bad'"),
    (lambda: signal.convolve(np.ones((3, 1)), np.ones((1, 3)), mode="valid"),
     r"convolve: for mode 'valid' one input must be at least as large as the other in every "
     r"dimension; got shapes \(3, 1\) and \(1, 3\)"),
])
def test_bad_input_is_explained(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# -- HIPS autograd's generalization: axes and dot_axes ---------------------------------------
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolve_over_chosen_axes_and_dot_axes(mode):
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((3, 5, 2)), rng.standard_normal((2, 4, 3))
    # every axis convolved is SciPy's convolution
    for x, y in [(a, a[:, :3]), (a[:2, :3], b.transpose(0, 2, 1))]:
        np.testing.assert_allclose(
            signal.convolve(x, y, mode, axes=([0, 1, 2], [0, 1, 2])).numpy(),
            ss.convolve(x, y, mode), rtol=1e-12, atol=1e-13)
    # axis 1 of a with axis 1 of b; axis 0 of a summed with axis 2 of b; a's axis 2 and b's
    # axis 0 kept: out[k1, k2, n] = sum_d conv(a[d, :, k1], b[k2, :, d])[n]
    got = signal.convolve(a, b, mode, axes=([1], [1]), dot_axes=([0], [2]))
    want = np.array([[sum(ss.convolve(a[d, :, k1], b[k2, :, d], mode) for d in range(3))
                      for k2 in range(2)] for k1 in range(2)])
    assert got.shape == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-13)
    # no convolved axis: a tensordot
    np.testing.assert_allclose(
        signal.convolve(a, b, mode, axes=([], []), dot_axes=([0, 2], [2, 0])).numpy(),
        np.tensordot(a, b, axes=([0, 2], [2, 0])), rtol=1e-12)
    check_grads(lambda x, y: signal.convolve(x, y, mode, axes=([1], [1]), dot_axes=([0], [2])),
                (tg.Tensor(a), tg.Tensor(b)), order=2, modes=("rev", "fwd"))


def test_convolve_axes_errors():
    a, b = np.ones((3, 4)), np.ones((3, 2))
    with pytest.raises(ValueError, match=r"convolve: dot_axes pair axis 0 of in1 \(length 3\) "
                                         r"with axis 1 of in2 \(length 2\)"):
        signal.convolve(a, b, axes=([1], [0]), dot_axes=([0], [1]))
    with pytest.raises(ValueError, match="convolve: axes .* must pair as many axes"):
        signal.convolve(a, b, axes=([0, 1], [0]))
    with pytest.raises(ValueError, match="convolve: axes \\[3\\] names an axis out of range "
                                         "for in1"):
        signal.convolve(a, b, axes=([3], [0]))
    with pytest.raises(ValueError, match="convolve: an axis of in1 is named twice"):
        signal.convolve(a, b, axes=([0], [0]), dot_axes=([0], [1]))
    with pytest.raises(TypeError, match="convolve: axes and dot_axes must be pairs"):
        signal.convolve(a, b, axes=3)
    with pytest.raises(ValueError, match="convolve: for mode 'valid' one input must be"):
        signal.convolve(np.ones((3, 2)), np.ones((2, 3)), "valid", axes=([0, 1], [0, 1]))
