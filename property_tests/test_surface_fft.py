"""Property tests for ``tapegrad.numpy.fft``: every transform on drawn shapes (size-0 and
size-1 batch dimensions), axes, lengths ``n``/``s`` (cropping and zero-padding, even and odd)
and ``norm`` modes, for real and complex inputs. Forward values and dtypes must equal
NumPy's; gradients must match central differences at orders 1 and 2 in both modes (JAX's
convention for complex values); the primitives' vmap rules must equal the per-example loop,
their gradients too.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads, check_vmap
from tapegrad.testing.strategies import arrays, floats_in, shapes

F = tnp.fft
NORMS = st.sampled_from([None, "backward", "ortho", "forward"])


def draw_input(data, shape, cplx):
    x = data.draw(arrays(shape, np.float64, elements=floats_in(-2.0, 2.0)))
    if cplx:
        x = x + 1j * data.draw(arrays(shape, np.float64, elements=floats_in(-2.0, 2.0)))
    return x


def assert_close(out, ref, single=False):
    ref = np.asarray(ref)
    got = out.numpy()
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    tol = 1e-4 if single else 1e-10
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)


def grads_ok(f, x):
    check_grads(f, (tg.Tensor(x),), order=2, modes=("rev", "fwd"))


ONE_D = {  # name: (function, takes complex input)
    "fft": (F.fft, True),
    "ifft": (F.ifft, True),
    "rfft": (F.rfft, False),
    "irfft": (F.irfft, True),
    "hfft": (F.hfft, True),
    "ihfft": (F.ihfft, False),
}


def _one_d_case(data, name):
    _, cplx_ok = ONE_D[name]
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=0, max_side=4))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    shape = list(shape)
    shape[axis] = data.draw(st.integers(2 if name in ("irfft", "hfft") else 1, 5))
    n = data.draw(st.one_of(st.none(), st.integers(1, 7)))
    cplx = cplx_ok and data.draw(st.booleans())
    return draw_input(data, tuple(shape), cplx), n, axis, data.draw(NORMS)


@pytest.mark.parametrize("name", sorted(ONE_D))
@given(data=st.data())
def test_one_dimensional_transforms(name, data):
    fn = getattr(F, name)
    ref = getattr(np.fft, name)
    x, n, axis, norm = _one_d_case(data, name)
    assert_close(fn(x, n, axis, norm), ref(x, n, axis, norm))
    single = x.astype(np.complex64 if x.dtype.kind == "c" else np.float32)
    assert_close(fn(single, n, axis, norm), ref(single, n, axis, norm), single=True)
    grads_ok(lambda t: fn(t, n, axis, norm), x)


N_D = {  # name: (takes complex input, inverse-real (s defaults from 2 (m - 1)))
    "fftn": (True, False),
    "ifftn": (True, False),
    "rfftn": (False, False),
    "irfftn": (True, True),
    "fft2": (True, False),
    "ifft2": (True, False),
    "rfft2": (False, False),
    "irfft2": (True, True),
}


@pytest.mark.parametrize("name", sorted(N_D))
@given(data=st.data())
def test_n_dimensional_transforms(name, data):
    cplx_ok, invreal = N_D[name]
    fn, ref = getattr(F, name), getattr(np.fft, name)
    two = name.endswith("2")
    nd = data.draw(st.integers(2 if two else 1, 3))
    shape = list(data.draw(shapes(min_dims=nd, max_dims=nd, min_side=1, max_side=4)))
    if two:
        axes = (-2, -1)
    else:
        k = data.draw(st.integers(1, nd))
        axes = tuple(data.draw(st.permutations(range(nd)))[:k])
    if invreal:
        shape[axes[-1]] = max(shape[axes[-1]], 2)
    s = None
    if data.draw(st.booleans()):
        s = tuple(data.draw(st.sampled_from([-1, 1, 2, 3, 5])) for _ in axes)
    x = draw_input(data, tuple(shape), cplx_ok and data.draw(st.booleans()))
    norm = data.draw(NORMS)
    kwargs = {"s": s, "norm": norm} if two else {"s": s, "axes": axes, "norm": norm}
    assert_close(fn(x, **kwargs), ref(x, **kwargs))
    grads_ok(lambda t: fn(t, **kwargs), x)


@given(data=st.data())
def test_empty_batch_dimensions(data):
    batch = data.draw(shapes(min_dims=1, max_dims=2, min_side=0, max_side=2))
    n = data.draw(st.integers(1, 5))
    x = draw_input(data, batch + (n,), False)
    z = draw_input(data, batch + (n,), True)
    assert_close(F.fft(z), np.fft.fft(z))
    assert_close(F.rfft(x), np.fft.rfft(x))
    assert_close(F.irfft(z, 2 * n), np.fft.irfft(z, 2 * n))
    grads_ok(lambda t: F.rfft(t, n + 1), x)


@given(data=st.data())
def test_shifts_and_frequencies(data):
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=0, max_side=5))
    x = draw_input(data, shape, data.draw(st.booleans()))
    axes = data.draw(st.one_of(st.none(), st.integers(0, len(shape) - 1),
                               st.just(tuple(range(len(shape))))))
    assert_close(F.fftshift(x, axes), np.fft.fftshift(x, axes))
    assert_close(F.ifftshift(x, axes), np.fft.ifftshift(x, axes))
    assert_close(F.ifftshift(F.fftshift(x, axes), axes), x)
    n = data.draw(st.integers(1, 9))
    d = data.draw(floats_in(0.1, 3.0))
    assert_close(F.fftfreq(n, d), np.fft.fftfreq(n, d))
    assert_close(F.rfftfreq(n, d), np.fft.rfftfreq(n, d))


# -- vmap rules of the primitives ---------------------------------------------------------------
VMAP = {
    "fft": (lambda x: F.fft(x, 5), True),
    "ifftn": (lambda x: F.ifftn(x, axes=(0, -1)), True),
    "rfft": (lambda x: F.rfft(x, 4, axis=0), False),
    "irfft": (lambda x: F.irfft(x, 5), True),
    "rfftn": (lambda x: F.rfftn(x, norm="ortho"), False),
    "irfft2": (lambda x: F.irfft2(x, s=(3, 4), norm="forward"), True),
}


@pytest.mark.parametrize("name", sorted(VMAP))
@given(data=st.data())
def test_vmap_rules(name, data):
    f, cplx = VMAP[name]
    size = data.draw(st.integers(0, 2))
    example = data.draw(shapes(min_dims=2, max_dims=2, min_side=1, max_side=3))
    in_axis = data.draw(st.integers(0, 2))
    shape = list(example)
    shape.insert(in_axis, size)
    x = tg.Tensor(draw_input(data, tuple(shape), cplx))
    check_vmap(f, (x,), in_axes=in_axis)

    def loss(t):
        y = f(t)
        return tnp.sum(tnp.real(y) ** 2) + (tnp.sum(tnp.imag(y)) if y.dtype.kind == "c" else 0.0)

    check_vmap(tg.grad(loss), (x,), in_axes=in_axis)
