"""Property tests of ``tapegrad.scipy``: one table per submodule, checked on drawn shapes
(broadcasting, size-0 and size-1 dimensions) and values for forward values and dtypes against
SciPy, gradients of orders 1 and 2 in reverse and forward mode against central finite
differences (float64; complex where SciPy accepts complex input), and ``vmap`` against the
per-example loop (every new primitive has a batching rule)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pytest
import scipy.linalg as sl
import scipy.signal as ss
import scipy.special as sp
import scipy.stats as sst
from hypothesis import given, settings
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.scipy import linalg, signal, special, stats
from tapegrad.testing import check_grads, check_vmap
from tapegrad.testing.strategies import arrays, broadcastable_shapes, floats_in

FEW = settings(max_examples=6)  # the slower tables: every row still runs several examples

POLES = [0.0, -1.0, -2.0, -3.0]


def dom(low, high, exclude=None, margin=0.1):
    return floats_in(low, high, exclude=exclude, margin=margin)


class Spec(NamedTuple):
    name: str
    fn: Callable  # tapegrad, on Tensors
    ref: Callable  # SciPy, on arrays
    domains: tuple  # one strategy of real values per argument
    complex_domains: tuple | None = None  # (real, imag) strategies per argument, if complex
    grad_rtol: float = 1e-5


_IM = dom(-1.0, 1.0)


def _c(re, im=_IM):
    return (re, im)


SPECIAL = [
    Spec("gamma", special.gamma, sp.gamma, (dom(-3.5, 4.0, POLES, 0.15),),
         (_c(dom(0.3, 3.0)),)),
    Spec("gammaln", special.gammaln, sp.gammaln, (dom(-3.5, 6.0, POLES, 0.15),)),
    Spec("digamma", special.digamma, sp.digamma, (dom(-3.5, 6.0, POLES, 0.15),),
         (_c(dom(0.3, 4.0)),)),
    Spec("polygamma", lambda x: special.polygamma(2, x), lambda x: sp.polygamma(2, x),
         (dom(-2.5, 6.0, POLES, 0.2),)),
    Spec("multigammaln", lambda a: special.multigammaln(a, 3), lambda a: sp.multigammaln(a, 3),
         (dom(1.2, 6.0),)),
    Spec("rgamma", special.rgamma, sp.rgamma, (dom(-3.5, 4.0),), (_c(dom(-2.0, 3.0)),)),
    Spec("beta", special.beta, sp.beta, (dom(0.2, 5.0), dom(0.2, 5.0))),
    Spec("betaln", special.betaln, sp.betaln, (dom(0.2, 5.0), dom(0.2, 5.0))),
    Spec("betainc", special.betainc, sp.betainc, (dom(0.3, 8.0), dom(0.3, 8.0), dom(0.05, 0.95)),
         grad_rtol=1e-4),
    Spec("gammainc", special.gammainc, sp.gammainc, (dom(0.3, 8.0), dom(0.1, 12.0)),
         grad_rtol=1e-4),
    Spec("gammaincc", special.gammaincc, sp.gammaincc, (dom(0.3, 8.0), dom(0.1, 12.0)),
         grad_rtol=1e-4),
    Spec("erf", special.erf, sp.erf, (dom(-3.0, 3.0),), (_c(dom(-2.0, 2.0)),)),
    Spec("erfc", special.erfc, sp.erfc, (dom(-3.0, 3.0),), (_c(dom(-2.0, 2.0)),)),
    Spec("erfinv", special.erfinv, sp.erfinv, (dom(-0.95, 0.95),)),
    Spec("erfcinv", special.erfcinv, sp.erfcinv, (dom(0.05, 1.95),)),
    Spec("expit", special.expit, sp.expit, (dom(-6.0, 6.0),)),
    Spec("logit", special.logit, sp.logit, (dom(0.05, 0.95),)),
    Spec("ndtr", special.ndtr, sp.ndtr, (dom(-4.0, 4.0),), (_c(dom(-2.0, 2.0)),)),
    Spec("log_ndtr", special.log_ndtr, sp.log_ndtr, (dom(-20.0, 5.0),), (_c(dom(-2.0, 2.0)),)),
    Spec("ndtri", special.ndtri, sp.ndtri, (dom(0.08, 0.92),)),
    Spec("xlogy", special.xlogy, sp.xlogy, (dom(-3.0, 3.0), dom(0.1, 5.0)),
         (_c(dom(-2.0, 2.0)), _c(dom(0.5, 3.0)))),
    Spec("xlog1py", special.xlog1py, sp.xlog1py, (dom(-3.0, 3.0), dom(-0.8, 5.0)),
         (_c(dom(-2.0, 2.0)), _c(dom(0.5, 3.0)))),
    Spec("entr", special.entr, sp.entr, (dom(0.05, 5.0),)),
    Spec("i0", special.i0, sp.i0, (dom(-5.0, 5.0),)),
    Spec("i0e", special.i0e, sp.i0e, (dom(-5.0, 5.0, [0.0]),)),
    Spec("i1", special.i1, sp.i1, (dom(-5.0, 5.0),)),
    Spec("i1e", special.i1e, sp.i1e, (dom(-5.0, 5.0, [0.0]),)),
    Spec("iv", lambda x: special.iv(1.5, x), lambda x: sp.iv(1.5, x), (dom(0.1, 6.0),),
         (_c(dom(0.3, 3.0)),)),
    Spec("ive", lambda x: special.ive(1.5, x), lambda x: sp.ive(1.5, x), (dom(0.1, 6.0),),
         (_c(dom(0.3, 3.0)),)),
    Spec("j0", special.j0, sp.j0, (dom(-8.0, 8.0),)),
    Spec("j1", special.j1, sp.j1, (dom(-8.0, 8.0),)),
    Spec("jn", lambda x: special.jn(2, x), lambda x: sp.jn(2, x), (dom(-8.0, 8.0),),
         (_c(dom(-3.0, 3.0)),)),
    Spec("y0", special.y0, sp.y0, (dom(0.3, 10.0),)),
    Spec("y1", special.y1, sp.y1, (dom(0.3, 10.0),)),
    Spec("yn", lambda x: special.yn(2, x), lambda x: sp.yn(2, x), (dom(0.5, 10.0),)),
]


def _draw_args(data, spec, shapes, dtype=np.float64):
    out = []
    for s, d in zip(shapes, spec.domains):
        out.append(data.draw(arrays(s, np.float64, elements=d)).astype(dtype))
    return out


@pytest.mark.parametrize("spec", SPECIAL, ids=lambda s: s.name)
@FEW
@given(data=st.data())
def test_special_values_and_gradients(spec, data):
    shapes = data.draw(broadcastable_shapes(len(spec.domains), max_dims=2, max_side=3))
    args = _draw_args(data, spec, shapes)
    ref = np.asarray(spec.ref(*args))
    out = spec.fn(*[tg.Tensor(a) for a in args])
    assert out.shape == ref.shape and out.dtype == ref.dtype == np.float64
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12, atol=1e-300)
    # float32 in, float32 out
    out32 = spec.fn(*[tg.Tensor(a.astype(np.float32)) for a in args])
    assert out32.dtype == np.float32
    np.testing.assert_allclose(out32.numpy(), ref, rtol=2e-4, atol=1e-6)
    check_grads(spec.fn, [tg.Tensor(a) for a in args], order=2, modes=("rev", "fwd"),
                rtol=spec.grad_rtol)


@pytest.mark.parametrize("spec", [s for s in SPECIAL if s.complex_domains],
                         ids=lambda s: s.name)
@FEW
@given(data=st.data())
def test_special_complex(spec, data):
    shapes = data.draw(broadcastable_shapes(len(spec.domains), max_dims=1, max_side=3))
    args = [data.draw(arrays(s, np.float64, elements=re))
            + 1j * data.draw(arrays(s, np.float64, elements=im))
            for s, (re, im) in zip(shapes, spec.complex_domains)]
    ref = np.asarray(spec.ref(*args))
    out = spec.fn(*[tg.Tensor(a) for a in args])
    assert out.dtype == ref.dtype == np.complex128
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12)
    check_grads(spec.fn, [tg.Tensor(a) for a in args], order=2, modes=("rev", "fwd"))


@pytest.mark.parametrize("spec", SPECIAL, ids=lambda s: s.name)
@FEW
@given(data=st.data())
def test_special_vmap(spec, data):
    # check_vmap compares an empty batch with one call on zeros, outside multigammaln's domain
    b = data.draw(st.integers(1 if spec.name == "multigammaln" else 0, 2))
    shapes = data.draw(broadcastable_shapes(len(spec.domains), max_dims=1, max_side=2))
    batched = [data.draw(st.booleans()) for _ in shapes]
    batched[0] = True
    args, axes = [], []
    for s, d, on in zip(shapes, spec.domains, batched):
        full = ((b,) + tuple(s)) if on else tuple(s)
        args.append(tg.Tensor(data.draw(arrays(full, np.float64, elements=d))))
        axes.append(0 if on else None)
    check_vmap(spec.fn, tuple(args), in_axes=tuple(axes), rtol=1e-12, atol=1e-300)
    if b:  # the batching rules of the backward's primitives too
        check_vmap(tg.grad(lambda *a: tnp.sum(spec.fn(*a))), tuple(args), in_axes=tuple(axes),
                   rtol=1e-10, atol=1e-14)


# -- logsumexp and softmax -----------------------------------------------------------------
@given(data=st.data())
def test_logsumexp_softmax(data):
    shape = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple))
    a = data.draw(arrays(shape, np.float64, elements=dom(-5.0, 5.0)))
    b = data.draw(arrays(shape, np.float64, elements=dom(-2.0, 2.0)))
    b[np.abs(b) < 1e-100] = 0.0  # SciPy's own reference overflows (and warns) on subnormal b
    axis = data.draw(st.sampled_from([None, 0, -1, tuple(range(len(shape)))]))
    keep = data.draw(st.booleans())
    np.testing.assert_allclose(special.logsumexp(a, axis=axis, keepdims=keep).numpy(),
                               sp.logsumexp(a, axis=axis, keepdims=keep), rtol=1e-12)
    got = special.logsumexp(a, axis=axis, b=b, keepdims=keep, return_sign=True)
    want = sp.logsumexp(a, axis=axis, b=b, keepdims=keep, return_sign=True)
    np.testing.assert_allclose(got[0].numpy(), want[0], rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(got[1].numpy(), want[1])
    np.testing.assert_allclose(special.softmax(a, axis=axis).numpy(), sp.softmax(a, axis=axis),
                               rtol=1e-12)
    np.testing.assert_allclose(special.log_softmax(a, axis=axis).numpy(),
                               sp.log_softmax(a, axis=axis), rtol=1e-12, atol=1e-13)
    bp = np.abs(b) + 0.1
    check_grads(lambda a, b: special.logsumexp(a, axis=axis, b=b, keepdims=keep),
                (tg.Tensor(a), tg.Tensor(bp)), order=2, modes=("rev", "fwd"))
    check_grads(lambda a: special.softmax(a, axis=axis), (tg.Tensor(a),), order=2,
                modes=("rev", "fwd"))
    z = a + 1j * b
    np.testing.assert_allclose(special.logsumexp(z, axis=axis).numpy(),
                               sp.logsumexp(z, axis=axis), rtol=1e-12, atol=1e-15)
    check_grads(lambda z: special.logsumexp(z, axis=axis), (tg.Tensor(z),), order=2,
                modes=("rev", "fwd"))


# -- linalg --------------------------------------------------------------------------------
def _matrix(data, batch, n, kind, dtype=np.float64):
    """Well-conditioned test matrices: ``I + 0.3 R`` (general), ``B B^H + n I`` (Hermitian
    positive definite)."""
    r = data.draw(arrays(batch + (n, n), np.float64, elements=dom(-1.0, 1.0)))
    if dtype == np.complex128:
        r = r + 1j * data.draw(arrays(batch + (n, n), np.float64, elements=dom(-1.0, 1.0)))
    if kind == "spd":
        return r @ np.conj(np.swapaxes(r, -1, -2)) + n * np.eye(n)
    return np.eye(n) + 0.3 * r


def _loop(fn, *arrays_, core=2):
    batch = np.broadcast_shapes(*[a.shape[:-core] if core else a.shape for a in arrays_])
    if not batch:
        return np.asarray(fn(*arrays_))
    if 0 in batch:  # no example to loop over: the empty result of one example's shape
        one = np.asarray(fn(*[np.eye(*a.shape[-2:], dtype=a.dtype) for a in arrays_]))
        return np.zeros(batch + one.shape, one.dtype)
    full = [np.broadcast_to(a, batch + a.shape[-2:]) for a in arrays_]
    return np.stack([fn(*[a[i] for a in full]) for i in np.ndindex(*batch)]).reshape(
        batch + np.shape(fn(*[a[(0,) * len(batch)] for a in full])))


LINALG = {
    "expm": (linalg.expm, sl.expm, "gen"),
    "logm": (linalg.logm, sl.logm, "spd"),
    "sqrtm": (linalg.sqrtm, sl.sqrtm, "spd"),
    "inv": (linalg.inv, sl.inv, "gen"),
    "det": (linalg.det, sl.det, "gen"),
    "cholesky": (linalg.cholesky, sl.cholesky, "spd"),
    "cholesky_lower": (lambda a: linalg.cholesky(a, lower=True),
                       lambda a: sl.cholesky(a, lower=True), "spd"),
}


@pytest.mark.parametrize("name", list(LINALG))
@FEW
@given(data=st.data())
def test_linalg_matrix_functions(name, data):
    fn, ref, kind = LINALG[name]
    batch = data.draw(st.sampled_from([(), (1,), (2,), (0,)]))
    n = data.draw(st.integers(1, 3))
    dtype = data.draw(st.sampled_from([np.float64, np.complex128]))
    a = _matrix(data, batch, n, kind, dtype)
    out = fn(tg.Tensor(a))
    want = _loop(ref, a) if 0 not in batch else None
    if want is not None:
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-10, atol=1e-12)
        assert out.dtype == want.dtype
    check_grads(fn, (tg.Tensor(a),), order=2, modes=("rev", "fwd"))
    if batch and batch[0]:
        check_vmap(fn, (tg.Tensor(a),), rtol=1e-10, atol=1e-12)


@FEW
@given(data=st.data())
def test_solve_triangular(data):
    ba, bb = data.draw(broadcastable_shapes(2, max_dims=1, max_side=2))
    n = data.draw(st.integers(1, 3))
    vector = data.draw(st.booleans())
    trans = data.draw(st.sampled_from([0, 1, 2, "N", "T", "C"]))
    lower, unit = data.draw(st.booleans()), data.draw(st.booleans())
    dtype = data.draw(st.sampled_from([np.float64, np.complex128]))
    a = _matrix(data, ba, n, "gen", dtype)
    b = data.draw(arrays((n,) if vector else bb + (n, 2), np.float64, elements=dom(-2.0, 2.0)))

    def f(a, b):
        return linalg.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit)

    def ref(a2, b2):
        return sl.solve_triangular(a2, b2, trans=trans, lower=lower, unit_diagonal=unit)

    if vector:
        want = ref(a, b) if not ba else np.array([ref(m, b) for m in a.reshape((-1, n, n))]
                                                 ).reshape(ba + (n,))
    else:
        want = _loop(ref, a, b)
    np.testing.assert_allclose(f(a, b).numpy(), want, rtol=1e-10, atol=1e-12)
    check_grads(f, (tg.Tensor(a), tg.Tensor(b)), order=2, modes=("rev", "fwd"))
    if ba:
        check_vmap(f, (tg.Tensor(a), tg.Tensor(b)), in_axes=(0, None), rtol=1e-10, atol=1e-12)


@FEW
@given(data=st.data())
def test_solve_sylvester(data):
    n, m = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    batch = data.draw(st.sampled_from([(), (2,)]))
    dtype = data.draw(st.sampled_from([np.float64, np.complex128]))
    a = _matrix(data, batch, n, "gen", dtype)
    b = _matrix(data, batch, m, "gen", dtype)
    q = data.draw(arrays(batch + (n, m), np.float64, elements=dom(-2.0, 2.0)))
    want = _loop(sl.solve_sylvester, a, b, q)
    np.testing.assert_allclose(linalg.solve_sylvester(a, b, q).numpy(), want, rtol=1e-10,
                               atol=1e-12)
    check_grads(linalg.solve_sylvester, (tg.Tensor(a), tg.Tensor(b), tg.Tensor(q)), order=2,
                modes=("rev", "fwd"))
    if batch:
        check_vmap(linalg.solve_sylvester, (tg.Tensor(a), tg.Tensor(b), tg.Tensor(q[0])),
                   in_axes=(0, 0, None), rtol=1e-10, atol=1e-12)


# -- signal --------------------------------------------------------------------------------
@settings(max_examples=15)
@given(data=st.data())
def test_convolve_correlate(data):
    nd = data.draw(st.integers(1, 3))
    s1 = tuple(data.draw(st.lists(st.integers(1, 4), min_size=nd, max_size=nd)))
    mode = data.draw(st.sampled_from(["full", "same", "valid"]))
    if mode == "valid":  # one input at least as large in every dimension
        s2 = tuple(data.draw(st.integers(1, k)) for k in s1)
        if data.draw(st.booleans()):
            s1, s2 = s2, s1
    else:
        s2 = tuple(data.draw(st.lists(st.integers(1, 4), min_size=nd, max_size=nd)))
    which = data.draw(st.sampled_from(["convolve", "correlate"]))
    method = data.draw(st.sampled_from(["auto", "direct", "fft"]))
    cplx = data.draw(st.booleans())
    a = data.draw(arrays(s1, np.float64, elements=dom(-2.0, 2.0)))
    b = data.draw(arrays(s2, np.float64, elements=dom(-2.0, 2.0)))
    if cplx:
        b = b + 1j * data.draw(arrays(s2, np.float64, elements=dom(-2.0, 2.0)))
    fn = getattr(signal, which)
    want = getattr(ss, which)(a, b, mode=mode, method=method)
    got = fn(a, b, mode=mode, method=method)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-10)
    check_grads(lambda x, y: fn(x, y, mode=mode), (tg.Tensor(a), tg.Tensor(b)), order=2,
                modes=("rev", "fwd"))
    bsize = data.draw(st.integers(0, 2))
    axes = data.draw(st.sampled_from([(0, None), (None, 0), (0, 0)]))
    args = [tg.Tensor(np.stack([a * (i + 1) for i in range(bsize)]) if ax == 0 and bsize
                      else (np.zeros((0,) + a.shape) if ax == 0 else a)) for ax in axes[:1]]
    args.append(tg.Tensor(np.stack([b + i for i in range(bsize)]) if axes[1] == 0 and bsize
                          else (np.zeros((0,) + b.shape, b.dtype) if axes[1] == 0 else b)))
    check_vmap(lambda x, y: fn(x, y, mode=mode), tuple(args), in_axes=axes, rtol=1e-10,
               atol=1e-10)


# -- stats ---------------------------------------------------------------------------------
CONT = {
    "norm": (stats.norm, sst.norm, (dom(-4.0, 4.0),), (dom(-1.0, 1.0), dom(0.5, 2.0))),
    "t": (stats.t, sst.t, (dom(-4.0, 4.0),), (dom(0.8, 8.0), dom(-1.0, 1.0), dom(0.5, 2.0))),
    "gamma": (stats.gamma, sst.gamma, (dom(0.6, 6.0),), (dom(0.6, 5.0), dom(-0.3, 0.3),
                                                          dom(0.5, 2.0))),
    "chi2": (stats.chi2, sst.chi2, (dom(0.6, 6.0),), (dom(1.0, 6.0), dom(-0.3, 0.3),
                                                       dom(0.5, 2.0))),
    "beta": (stats.beta, sst.beta, (dom(0.1, 0.9),), (dom(0.6, 5.0), dom(0.6, 5.0),
                                                       dom(-0.05, 0.05), dom(1.0, 1.2))),
}
METHODS = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]


@pytest.mark.parametrize("dist", list(CONT))
@pytest.mark.parametrize("method", METHODS)
@settings(max_examples=4)
@given(data=st.data())
def test_continuous_distributions(dist, method, data):
    mod, ref, xdom, pdoms = CONT[dist]
    shapes = data.draw(broadcastable_shapes(1 + len(pdoms), max_dims=1, max_side=3))
    args = [data.draw(arrays(s, np.float64, elements=d))
            for s, d in zip(shapes, xdom + pdoms)]
    got = getattr(mod, method)(*args)
    want = getattr(ref, method)(*args)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-9, atol=1e-300)
    check_grads(getattr(mod, method), [tg.Tensor(a) for a in args], order=2,
                modes=("rev", "fwd"), rtol=1e-4)


@pytest.mark.parametrize("method", ["logpmf", "pmf", "cdf", "logcdf", "sf", "logsf"])
@settings(max_examples=6)
@given(data=st.data())
def test_poisson(method, data):
    k = data.draw(arrays((3,), np.float64, elements=st.sampled_from([-1.0, 0.0, 1.0, 2.5, 4.0,
                                                                        7.0])))
    mu = data.draw(arrays((3,), np.float64, elements=dom(0.2, 6.0)))
    loc = data.draw(st.sampled_from([0, 1]))
    got = getattr(stats.poisson, method)(k, mu, loc)
    np.testing.assert_allclose(got.numpy(), getattr(sst.poisson, method)(k, mu, loc),
                               rtol=1e-10, atol=1e-300)
    finite = np.isin(k - loc, [0.0, 1.0, 4.0, 7.0]) if "pmf" in method else k - loc >= 0
    if finite.any():
        check_grads(lambda m: getattr(stats.poisson, method)(k[finite], m, loc),
                    (tg.Tensor(mu[finite]),), order=2, modes=("rev", "fwd"))


@settings(max_examples=8)
@given(data=st.data())
def test_dirichlet_and_multivariate_normal(data):
    k = data.draw(st.integers(2, 4))
    alpha = data.draw(arrays((k,), np.float64, elements=dom(0.5, 4.0)))
    npts = data.draw(st.integers(1, 3))
    raw = data.draw(arrays((k, npts), np.float64, elements=dom(0.3, 1.0)))
    x = raw / raw.sum(axis=0)
    np.testing.assert_allclose(stats.dirichlet.logpdf(x, alpha).numpy(),
                               sst.dirichlet.logpdf(x, alpha), rtol=1e-10)
    # K - 1 components keep every perturbation on the simplex
    check_grads(stats.dirichlet.logpdf, (tg.Tensor(x[:-1]), tg.Tensor(alpha)), order=2,
                modes=("rev", "fwd"), rtol=1e-3, atol=1e-5)  # FD error near the boundary
    d = data.draw(st.integers(1, 3))
    mean = data.draw(arrays((d,), np.float64, elements=dom(-1.0, 1.0)))
    cov = _matrix(data, (), d, "spd")
    xs = data.draw(arrays((npts, d), np.float64, elements=dom(-2.0, 2.0)))
    for c in (cov, np.diag(cov), float(cov[0, 0])):
        np.testing.assert_allclose(stats.multivariate_normal.logpdf(xs, mean, c).numpy(),
                                   sst.multivariate_normal.logpdf(xs, mean, c), rtol=1e-10)
    check_grads(stats.multivariate_normal.logpdf, (tg.Tensor(xs), tg.Tensor(mean),
                                                   tg.Tensor(cov)), order=2, modes=("rev", "fwd"))
