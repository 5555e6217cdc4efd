"""Example tests for ``tapegrad.numpy.fft``: values at the edges (n = 1, 2, even and odd
lengths), dtype rules, the transpose rules (not the inverse) and the Hermitian weights of
``rfft``/``irfft``, errors and their messages, lazy shapes and dtypes, and gradients
cross-checked against ``torch.autograd`` (``torch.fft``; torch's complex gradients are the
conjugates of tapegrad's). Randomised checks live in property_tests/test_surface_fft.py."""

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import ops
from tapegrad.testing import check_grads

F = tnp.fft
RNG = np.random.default_rng(7)


def rand(*shape, cplx=False):
    r = RNG.standard_normal(shape)
    return r + 1j * RNG.standard_normal(shape) if cplx else r


def test_every_numpy_fft_name_is_there_and_documented():
    names = {n for n in dir(np.fft) if not n.startswith("_")} - {"helper", "test"}
    assert names <= set(F.__all__)
    for name in F.__all__:
        assert getattr(F, name).__doc__, name
    assert not hasattr(tnp, "rfft")  # only in tapegrad.numpy.fft, as NumPy


@pytest.mark.parametrize(
    "x, want",
    [
        (np.ones(4, np.float32), np.complex64),
        (np.ones(4, np.float16), np.complex64),
        (np.ones(4, np.int32), np.complex128),
        (np.ones(4, bool), np.complex128),
        (np.ones(4, np.complex64), np.complex64),
        (np.ones(4), np.complex128),
    ],
)
def test_dtypes_follow_numpy_2(x, want):
    assert F.fft(x).dtype == want == np.fft.fft(x).dtype
    if x.dtype.kind != "c":
        assert F.rfft(x).dtype == np.fft.rfft(x).dtype
    assert F.irfft(x).dtype == np.fft.irfft(x).dtype
    assert F.hfft(x).dtype == np.fft.hfft(x).dtype


def test_the_vjp_is_the_transpose_not_the_inverse():
    """The DFT matrix W is symmetric: the vjp of fft(x) is fft(g), not ifft(g) (for every
    norm, the same scaling)."""
    g = rand(5, cplx=True)
    x = tg.Tensor(rand(5, cplx=True))
    for norm in ("backward", "ortho", "forward"):
        _, pull = tg.vjp(lambda t, norm=norm: F.fft(t, norm=norm), x)
        np.testing.assert_allclose(pull(tg.Tensor(g))[0].numpy(), np.fft.fft(g, norm=norm))
        _, pull = tg.vjp(lambda t, norm=norm: F.ifft(t, norm=norm), x)
        np.testing.assert_allclose(pull(tg.Tensor(g))[0].numpy(), np.fft.ifft(g, norm=norm))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8])
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_irfft_vjp_weights_the_hermitian_bins(n, norm):
    """vjp of irfft to n points = conj(w * rfft(g)) with rfft's norm swapped and w = 1 at
    the zero bin (and the Nyquist bin for even n), 2 elsewhere: compared with the explicit
    real-linear map written as a dense matrix."""
    m = n // 2 + 1
    g = rand(n)
    x = tg.Tensor(rand(m, cplx=True))
    _, pull = tg.vjp(lambda t: F.irfft(t, n, norm=norm), x)
    got = pull(tg.Tensor(g))[0].numpy()
    # the real Jacobian, column by column: d irfft / d Re X_k and d / d Im X_k
    jr = np.stack([np.fft.irfft(np.eye(m)[k], n, norm=norm) for k in range(m)], 1)
    ji = np.stack([np.fft.irfft(1j * np.eye(m)[k], n, norm=norm) for k in range(m)], 1)
    want = g @ jr - 1j * (g @ ji)  # JAX's convention: dL/dRe - i dL/dIm
    np.testing.assert_allclose(got, want, atol=1e-12)
    w = np.full(m, 2.0)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    swapped = {"backward": "forward", "forward": "backward", "ortho": "ortho"}[norm]
    np.testing.assert_allclose(got, np.conj(w * np.fft.rfft(g, norm=swapped)), atol=1e-12)
    if n % 2 == 0 or n == 1:  # the ignored imaginary parts of the edge bins: zero gradient
        assert got[-1].imag == 0.0 and got[0].imag == 0.0


@pytest.mark.parametrize("n", [1, 2, 3, 6, 7])
def test_rfft_vjp_is_the_real_part_of_a_padded_fft(n):
    g = rand(n // 2 + 1, cplx=True)
    _, pull = tg.vjp(lambda t: F.rfft(t, norm="ortho"), tg.Tensor(rand(n)))
    padded = np.concatenate([g, np.zeros(n - len(g))])
    np.testing.assert_allclose(pull(tg.Tensor(g))[0].numpy(),
                               np.real(np.fft.fft(padded, norm="ortho")), atol=1e-12)


def test_cropping_and_padding_differentiate_as_slices():
    x = rand(6)
    check_grads(lambda t: F.fft(t, 4), (tg.Tensor(x),), order=2, modes=("rev", "fwd"))
    check_grads(lambda t: F.fft(t, 9), (tg.Tensor(x),), order=2, modes=("rev", "fwd"))
    g = tg.grad(lambda t: tnp.sum(tnp.real(F.fft(t, 4))))(tg.Tensor(x))
    np.testing.assert_allclose(g.numpy(), [4.0, 0.0, 0.0, 0.0, 0.0, 0.0])


def test_fftn_repeated_axis_and_s_without_axes():
    x = rand(3, 4, cplx=True)
    np.testing.assert_allclose(F.fftn(x, axes=(1, 1)).numpy(), np.fft.fftn(x, axes=(1, 1)))
    np.testing.assert_allclose(F.fftn(x, s=(2, 3), axes=(1, 1)).numpy(),
                               np.fft.fftn(x, s=(2, 3), axes=(1, 1)))
    # s without axes names the last len(s) axes (NumPy's behaviour, which it deprecates)
    np.testing.assert_allclose(F.fftn(x, s=(5,)).numpy(), np.fft.fftn(x, s=(5,), axes=(1,)))
    np.testing.assert_allclose(F.fftn(x, s=(-1, None), axes=(0, 1)).numpy(), np.fft.fftn(x))
    assert F.fftn(x, axes=()) is not None and F.fftn(x, axes=()).shape == x.shape


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: F.fft(np.ones(4), n=0), ValueError,
         r"fft: invalid number of FFT data points \(0\)"),
        (lambda: F.fft(np.ones(0)), ValueError, r"fft: invalid number of FFT data points \(0\)"),
        (lambda: F.irfft(np.ones(1)), ValueError, r"irfft: invalid number of FFT data points"),
        (lambda: F.fft(np.ones(4), norm="bad"), ValueError, "fft: invalid norm value 'bad'"),
        (lambda: F.fft(np.ones(4), axis=1), ValueError, "fft: axis 1 is out of range"),
        (lambda: F.fft(np.ones(4), out=np.ones(4)), TypeError, "fft: out= is not supported"),
        (lambda: F.rfft(np.ones(4, complex)), TypeError, "rfft: the input must be real"),
        (lambda: F.rfftn(np.ones((2, 2)), axes=()), ValueError, "rfftn: axes must name"),
        (lambda: F.fftn(np.ones((2, 2)), s=(2,), axes=(0, 1)), ValueError,
         "fftn: shape and axes have different lengths"),
        (lambda: F.fft(np.ones(4), n=2.5), TypeError, "fft: n must be an integer"),
        (lambda: F.fftfreq(0), ValueError, r"fftfreq: invalid number of FFT data points"),
        (lambda: F.fft(np.array(["a"])), TypeError, "fft: unsupported dtype"),
    ],
)
def test_errors_name_the_function(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_frequencies_and_shifts():
    np.testing.assert_allclose(F.fftfreq(8, 0.1).numpy(), np.fft.fftfreq(8, 0.1))
    np.testing.assert_allclose(F.rfftfreq(7).numpy(), np.fft.rfftfreq(7))
    assert F.fftfreq(5).dtype == np.float64
    d = tg.Tensor(0.5)
    g = tg.grad(lambda s: tnp.sum(F.fftfreq(6, s) ** 2))(d)  # k^2 / (6 d)^2 summed
    k = np.fft.fftfreq(6) * 6
    np.testing.assert_allclose(g.numpy(), -2 * np.sum(k**2) / (36 * 0.5**3))
    x = rand(3, 4)
    np.testing.assert_allclose(F.fftshift(x).numpy(), np.fft.fftshift(x))
    np.testing.assert_allclose(F.ifftshift(x, axes=1).numpy(), np.fft.ifftshift(x, axes=1))
    check_grads(lambda t: F.fftshift(t, axes=(0,)), (tg.Tensor(x),), order=1)


def test_lazy_results_have_the_eager_shapes_and_dtypes():
    x, z = rand(3, 5).astype(np.float32), rand(3, 5, cplx=True)
    cases = [
        lambda: F.fft(z, 4),
        lambda: F.rfft(x, 7, axis=0),
        lambda: F.irfft(z, 6),
        lambda: F.irfft(z.astype(np.complex64), 7),
        lambda: F.rfftn(x),
        lambda: F.ifft2(x),
    ]
    for case in cases:
        eager = case()
        with tg.lazy():
            lazy = case()
        assert (lazy.shape, lazy.dtype) == (eager.shape, eager.dtype)


def test_primitives_are_registered_without_flat_names():
    for cls in (ops.Fft, ops.Rfft, ops.Irfft):
        assert cls.names == () and cls.batch is not None


def test_forward_mode_is_the_transform_of_the_tangent():
    """The maps are real-linear: jvp(f, x, t) = f(t), whatever x (forward mode comes from
    transposing the backward rules)."""
    z, t = rand(2, 6, cplx=True), rand(2, 6, cplx=True)
    x, u = rand(2, 6), rand(2, 6)
    for f, p, d in [
        (lambda a: F.fftn(a, norm="ortho"), z, t),
        (lambda a: F.ifft(a, norm="forward"), z, t),
        (lambda a: F.rfft(a), x, u),
        (lambda a: F.irfft(a, 9), z, t),
        (lambda a: F.hfft(a, 4, axis=0), z, t),
    ]:
        y, ty = tg.jvp(f, (tg.Tensor(p),), (tg.Tensor(d),))
        np.testing.assert_allclose(ty.numpy(), f(d).numpy(), atol=1e-12)
        assert ty.dtype == y.dtype


# -- cross-checks against torch.autograd -------------------------------------------------------
def _check_torch(ours, theirs, x):
    torch = pytest.importorskip("torch")
    t = torch.tensor(x, requires_grad=True)
    theirs(torch, t).backward()
    got = tg.grad(ours)(tg.Tensor(x)).numpy()
    np.testing.assert_allclose(got, np.conj(t.grad.resolve_conj().numpy()), atol=1e-10)


def _loss_np(y):
    return tnp.sum(tnp.real(y) ** 2 * 0.5 + tnp.imag(y) * 1.5) if y.dtype.kind == "c" else tnp.sum(
        y**3)


def _loss_t(y):
    return (y.real**2 * 0.5 + y.imag * 1.5).sum() if y.is_complex() else (y**3).sum()


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"])
@pytest.mark.parametrize("n", [None, 3, 4, 7])
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_one_dimensional_gradients_match_torch(name, n, norm):
    pytest.importorskip("torch")
    cplx = name not in ("rfft", "ihfft")
    x = rand(2, 5, cplx=cplx)
    _check_torch(lambda t: _loss_np(getattr(F, name)(t, n, -1, norm)),
                 lambda T, t: _loss_t(getattr(T.fft, name)(t, n, -1, norm)), x)


@pytest.mark.parametrize("name", ["fftn", "ifftn", "rfftn", "irfftn", "fft2", "irfft2"])
@pytest.mark.parametrize("s", [None, (3, 6)])
def test_n_dimensional_gradients_match_torch(name, s):
    pytest.importorskip("torch")
    cplx = name not in ("rfftn",)
    x = rand(4, 5, cplx=cplx)
    _check_torch(lambda t: _loss_np(getattr(F, name)(t, s=s, norm="ortho")),
                 lambda T, t: _loss_t(getattr(T.fft, name)(t, s=s, norm="ortho")), x)
