"""Property tests of ``tapegrad.random``'s new primitives and its differentiable samplers.

- ``LogGammaincInv`` (``log`` of the inverse gamma CDF, the primitive behind the gamma
  family): values against SciPy, derivatives of orders 1 and 2 in both arguments, reverse and
  forward mode, against finite differences, and ``vmap`` against the loop; on drawn
  broadcasting shapes with size-0 and size-1 dimensions.
- The pathwise samplers with a fixed key (a smooth function of their parameters): orders 1 and
  2 against finite differences on drawn parameter shapes.
- ``_Poisson`` (counts, no derivative): deterministic per key, batched per key, and a constant
  to differentiation.
"""

from __future__ import annotations

import numpy as np
import scipy.special as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import random as tr
from tapegrad.random._gamma import LogGammaincInv
from tapegrad.testing import check_grads, check_vmap
from tapegrad.testing.strategies import arrays, broadcastable_shapes, floats_in

FEW = settings(max_examples=8)


def t64(a):
    return tg.Tensor(np.asarray(a, np.float64))


@FEW
@given(data=st.data())
def test_log_gammaincinv_values_and_gradients(data):
    sa, su = data.draw(broadcastable_shapes(2, max_dims=2, max_side=3))
    a = data.draw(arrays(sa, elements=floats_in(0.2, 30.0)))
    u = data.draw(arrays(su, elements=floats_in(0.02, 0.98)))
    y = LogGammaincInv.apply(t64(a), t64(u))
    assert y.shape == np.broadcast_shapes(sa, su) and y.dtype == np.float64
    np.testing.assert_allclose(y.numpy(), np.log(sp.gammaincinv(a, u)), rtol=1e-12, atol=1e-12)
    check_grads(LogGammaincInv.apply, (t64(a), t64(u)), order=2, modes=("rev", "fwd"),
                eps=1e-5, rtol=1e-5)


@FEW
@given(data=st.data())
def test_log_gammaincinv_in_the_small_sample_regime(data):
    # below x = 1e-100 the value comes from the series; the derivatives stay consistent
    a = data.draw(arrays((2,), elements=floats_in(0.002, 0.01)))
    u = data.draw(arrays((2,), elements=floats_in(1e-6, 1e-3)))
    y = LogGammaincInv.apply(t64(a), t64(u))
    assert (y.numpy() < -230).all()
    np.testing.assert_allclose(y.numpy(), (np.log(u) + sp.gammaln(a + 1)) / a, rtol=1e-13)
    check_grads(LogGammaincInv.apply, (t64(a), t64(u)), order=2, modes=("rev", "fwd"),
                eps=1e-9, rtol=1e-5)


@FEW
@given(data=st.data())
def test_log_gammaincinv_batches(data):
    b = data.draw(st.integers(0, 2))
    shape = data.draw(st.sampled_from([(), (2,), (1, 2)]))
    a = t64(data.draw(arrays((b,) + shape, elements=floats_in(0.3, 9.0))))
    u = t64(data.draw(arrays(shape, elements=floats_in(0.05, 0.95))))
    check_vmap(LogGammaincInv.apply, (a, u), in_axes=(0, None), rtol=1e-12)
    if b:
        check_vmap(tg.grad(lambda a, u: tnp.sum(LogGammaincInv.apply(a, u))), (a, u),
                   in_axes=(0, None), rtol=1e-10)


def _positive(data, shape, low=0.3, high=8.0):
    return t64(data.draw(arrays(shape, elements=floats_in(low, high))))


PARAM_SHAPES = st.sampled_from([(), (1,), (2,), (2, 1), (0,)])


@FEW
@given(data=st.data(), shape=PARAM_SHAPES, seed=st.integers(0, 2**16))
def test_gamma_family_gradients(data, shape, seed):
    k = tr.key(seed)
    a, b = _positive(data, shape), _positive(data, shape)
    check_grads(lambda a: tr.gamma(k, a), (a,), order=2, modes=("rev", "fwd"), eps=1e-5,
                rtol=1e-4)
    check_grads(lambda a, b: tr.beta(k, a, b, (2,) + shape), (a, b), order=2, eps=1e-5,
                rtol=1e-4)
    check_grads(lambda d: tr.t(k, d), (a,), order=2, modes=("rev", "fwd"), eps=1e-5, rtol=1e-4)


@FEW
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_dirichlet_gradients(data, seed):
    k = tr.key(seed)
    shape = data.draw(st.sampled_from([(1,), (3,), (2, 2)]))
    alpha = _positive(data, shape, 0.5, 6.0)
    check_grads(lambda al: tr.dirichlet(k, al), (alpha,), order=2, modes=("rev", "fwd"),
                eps=1e-5, rtol=1e-4)


@FEW
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_truncated_normal_gradients(data, seed):
    k = tr.key(seed)
    sl, sh = data.draw(broadcastable_shapes(2, max_dims=2, max_side=2))
    lo = data.draw(arrays(sl, elements=floats_in(-3.0, 1.0)))
    width = data.draw(arrays(sh, elements=floats_in(0.3, 3.0)))
    hi = np.broadcast_to(lo, np.broadcast_shapes(sl, sh)).max(initial=-3.0) + width
    check_grads(lambda a, b: tr.truncated_normal(k, a, b), (t64(lo), t64(hi)), order=2,
                modes=("rev", "fwd"), eps=1e-6, rtol=1e-4)


@FEW
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_multivariate_normal_gradients(data, seed):
    k = tr.key(seed)
    n = data.draw(st.integers(1, 3))
    batch = data.draw(st.sampled_from([(), (2,), (0,)]))
    mean = t64(data.draw(arrays(batch + (n,), elements=floats_in(-2.0, 2.0))))
    root = t64(data.draw(arrays((n, n), elements=floats_in(-1.0, 1.0))))
    method = data.draw(st.sampled_from(["cholesky", "eigh", "svd"]))

    def sample(m, r):
        cov = tnp.matmul(r, r.T) + 1.5 * tnp.eye(n)
        return tr.multivariate_normal(k, m, cov, method=method)

    check_grads(sample, (mean, root), order=2, eps=1e-6, rtol=1e-4)


@FEW
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_poisson_is_a_constant_per_key(data, seed):
    k = tr.key(seed)
    shape = data.draw(st.sampled_from([(), (3,), (2, 1), (0,)]))
    lam = t64(data.draw(arrays(shape, elements=floats_in(0.0, 40.0))))
    counts = tr.poisson(k, lam)
    np.testing.assert_array_equal(counts.numpy(), tr.poisson(k, lam).numpy())
    assert counts.dtype == np.int64 and counts.shape == shape and (counts.numpy() >= 0).all()
    # no derivative: the counts are constants to grad (d/dlam of lam * counts is counts)
    g = tg.grad(lambda r: tnp.sum(r * tnp.astype(tr.poisson(k, r), np.float64)))(lam)
    np.testing.assert_array_equal(g.numpy(), counts.numpy().astype(np.float64))
    keys = tnp.stack(tr.split(k, 2))
    check_vmap(lambda kk, r: tr.poisson(kk, r), (keys, lam), in_axes=(0, None), rtol=0)
