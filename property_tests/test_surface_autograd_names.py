"""Property tests for the differentiable names ``tapegrad.numpy`` shares with HIPS autograd's
``autograd.numpy``: ``linspace`` with Tensor endpoints, ``logspace``, ``geomspace``,
``kaiser`` (in ``beta``), ``unwrap``, ``real_if_close``, ``sort_complex``, ``histogramdd`` and
``histogram2d`` (in the weights), ``make_diagonal``, ``apply_along_axis``, ``apply_over_axes``,
``vectorize``, ``fromfunction`` and the conversions ``asanyarray``, ``ascontiguousarray``,
``asfortranarray``, ``asarray_chkfinite`` and ``require``.

Each: forward values, shapes and dtypes against NumPy on drawn shapes (size-0 and size-1 dims
where the function takes them), and gradients at orders 1 and 2 in both modes (reverse and
forward) against central finite differences."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads
from tapegrad.testing.strategies import broadcastable_shapes, floats_in, shapes

MODES = ("rev", "fwd")


def _arr(data, shape, low=-3.0, high=3.0):
    return data.draw(hnp.arrays(np.float64, shape, elements=floats_in(low, high)))


def _close(got, want, rtol=1e-12, atol=1e-12):
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got.numpy(), want, rtol=rtol, atol=atol)


def _grads(f, *args, **kw):
    check_grads(f, tuple(tg.Tensor(a) for a in args), order=2, modes=MODES, **kw)


# -- evenly spaced samples ---------------------------------------------------------------------
@given(data=st.data())
def test_linspace_and_logspace_with_tensor_endpoints(data):
    s1, s2 = data.draw(broadcastable_shapes(2, max_dims=2, max_side=3))
    a, b = _arr(data, s1), _arr(data, s2)
    num = data.draw(st.integers(0, 5))
    endpoint = data.draw(st.booleans())
    nd = len(np.broadcast_shapes(s1, s2))
    axis = data.draw(st.integers(-nd - 1, nd))
    kw = dict(num=num, endpoint=endpoint, axis=axis)
    _close(tnp.linspace(tg.Tensor(a), tg.Tensor(b), **kw), np.linspace(a, b, **kw))
    got, step = tnp.linspace(tg.Tensor(a), b, retstep=True, **kw)
    want, wstep = np.linspace(a, b, retstep=True, **kw)
    _close(got, want)
    np.testing.assert_allclose(step.numpy(), wstep, equal_nan=True)
    _grads(lambda x, y: tnp.linspace(x, y, **kw), a, b)
    base = data.draw(st.floats(0.5, 3.0))
    _close(tnp.logspace(tg.Tensor(a), tg.Tensor(b), base=tg.Tensor(np.float64(base)), **kw),
           np.logspace(a, b, base=base, **kw), rtol=1e-11)
    _grads(lambda x, y, c: tnp.logspace(x, y, base=c, **kw), a, b, np.float64(base))


@given(data=st.data())
def test_geomspace_real_and_complex(data):
    s1, s2 = data.draw(broadcastable_shapes(2, max_dims=2, max_side=3))
    sign = data.draw(st.sampled_from([1.0, -1.0]))
    a, b = sign * _arr(data, s1, 0.2, 5.0), sign * _arr(data, s2, 0.2, 5.0)
    num = data.draw(st.integers(0, 5))
    endpoint = data.draw(st.booleans())
    kw = dict(num=num, endpoint=endpoint)
    _close(tnp.geomspace(tg.Tensor(a), tg.Tensor(b), **kw), np.geomspace(a, b, **kw),
           rtol=1e-11)
    _grads(lambda x, y: tnp.geomspace(x, y, **kw), a, b)
    ca = a * np.exp(1j * _arr(data, s1, -1.0, 1.0))
    cb = b * np.exp(1j * _arr(data, s2, -1.0, 1.0))
    _close(tnp.geomspace(tg.Tensor(ca), tg.Tensor(cb), **kw), np.geomspace(ca, cb, **kw),
           rtol=1e-11, atol=1e-11)
    _grads(lambda x, y: tnp.geomspace(x, y, **kw), ca, cb)


# -- windows and phases ------------------------------------------------------------------------
@given(m=st.integers(-1, 7), beta=st.floats(0.0, 6.0))
def test_kaiser_in_beta(m, beta):
    b = np.float64(beta)
    _close(tnp.kaiser(m, tg.Tensor(b)), np.kaiser(m, b), rtol=1e-11)
    _grads(lambda x: tnp.kaiser(m, x), b)


@given(data=st.data())
def test_unwrap(data):
    shape = data.draw(shapes(min_dims=1, max_dims=3, max_side=5))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    period = data.draw(st.sampled_from([2 * np.pi, 6.0, 1.5]))
    discont = data.draw(st.sampled_from([None, period * 0.7]))
    p = _arr(data, shape, -3 * period, 3 * period)
    dd = np.diff(p, axis=axis)
    limit = period / 2 if discont is None else discont
    # away from the jumps where the correction changes (finite differences would cross them)
    assume(np.all(np.abs(np.abs(dd) - limit) > 1e-2))
    assume(np.all(np.abs(np.mod(dd + period / 2, period)) > 1e-2))
    want = np.unwrap(p, discont=discont, axis=axis, period=period)
    _close(tnp.unwrap(tg.Tensor(p), discont, axis, period=period), want, rtol=1e-11, atol=1e-11)
    _grads(lambda x: tnp.unwrap(x, discont, axis, period=period), p)
    _grads(lambda x, per: tnp.unwrap(x, discont, axis, period=per), p, np.float64(period))


# -- complex helpers ---------------------------------------------------------------------------
@given(data=st.data())
def test_real_if_close_and_sort_complex(data):
    shape = data.draw(shapes(min_dims=1, max_dims=2, max_side=4))
    re = np.arange(int(np.prod(shape)), dtype=np.float64)
    re = (data.draw(st.permutations(list(re))) if re.size else re)
    re = np.asarray(re, dtype=np.float64).reshape(shape) * 0.37 - 1.0
    small = data.draw(st.booleans())
    im = _arr(data, shape, 0.1, 1.0) * (1e-15 if small else 1.0)
    z = re + 1j * im
    _close(tnp.real_if_close(tg.Tensor(z)), np.real_if_close(z))
    if small:  # the real part (a step of the imaginary parts would cross the tolerance)
        _grads(lambda x: tnp.real_if_close(x + 1j * im) * (1.0 + 0.5j), re)
    else:
        _grads(lambda x: tnp.real_if_close(x) * (1.0 + 0.5j), z)
    _close(tnp.sort_complex(tg.Tensor(z)), np.sort_complex(z))
    _close(tnp.sort_complex(tg.Tensor(re)), np.sort_complex(re))
    _grads(tnp.sort_complex, z)
    _grads(lambda x: tnp.sort_complex(x) * (1.0 - 2.0j), re)


# -- histograms --------------------------------------------------------------------------------
@given(data=st.data())
def test_histogramdd_and_histogram2d_in_the_weights(data):
    n = data.draw(st.integers(0, 7))
    d = data.draw(st.integers(1, 3))
    pts = _arr(data, (n, d), -1.0, 1.0)
    w = _arr(data, (n,), 0.1, 2.0)
    bins = data.draw(st.lists(st.integers(1, 3), min_size=d, max_size=d))
    rng = [(-1.0, 1.0)] * d
    density = data.draw(st.booleans()) and n > 0
    assume(not density or n > 0)
    hist, edges = tnp.histogramdd(tg.Tensor(pts), bins, rng, density=density,
                                  weights=tg.Tensor(w))
    want, wedges = np.histogramdd(pts, bins, rng, density=density, weights=w)
    if not density or np.sum(want) != 0:
        _close(hist, want, rtol=1e-12)
    for e, we in zip(edges, wedges, strict=True):
        np.testing.assert_allclose(e.numpy(), we)
    if not density:
        _close(tnp.histogramdd(tg.Tensor(pts), bins, rng)[0], np.histogramdd(pts, bins, rng)[0])
        _grads(lambda v: tnp.histogramdd(pts, bins, rng, weights=v)[0], w)
    if d == 2:
        h2 = tnp.histogram2d(tg.Tensor(pts[:, 0]), tg.Tensor(pts[:, 1]), bins, rng,
                             weights=tg.Tensor(w))
        w2 = np.histogram2d(pts[:, 0], pts[:, 1], bins, rng, weights=w)
        _close(h2[0], w2[0])
        _grads(lambda v: tnp.histogram2d(pts[:, 0], pts[:, 1], bins, rng, weights=v)[0], w)


# -- diagonals ---------------------------------------------------------------------------------
def _numpy_make_diagonal(d, offset, a1, a2):
    """Reference: zeros with ``np.diagonal``'s entries set through index arrays."""
    k = d.shape[-1]
    n = k + abs(offset)
    out = np.zeros(d.shape[:-1] + (n, n), d.dtype)
    i = np.arange(k)
    out[..., i + max(-offset, 0), i + max(offset, 0)] = d
    return np.moveaxis(out, (-2, -1), (a1, a2))


@given(data=st.data())
def test_make_diagonal_inverts_diagonal(data):
    shape = data.draw(shapes(min_dims=1, max_dims=3, max_side=3))
    d = _arr(data, shape)
    offset = data.draw(st.integers(-2, 2))
    nd = len(shape) + 1
    a1, a2 = data.draw(st.lists(st.integers(-nd, nd - 1), min_size=2, max_size=2,
                                unique_by=lambda a: a % nd))
    got = tnp.make_diagonal(tg.Tensor(d), offset, a1, a2)
    _close(got, _numpy_make_diagonal(d, offset, a1, a2))
    np.testing.assert_array_equal(np.diagonal(got.numpy(), offset, a1, a2), d)
    _grads(lambda x: tnp.make_diagonal(x, offset, a1, a2), d)


# -- functional helpers ------------------------------------------------------------------------
@given(data=st.data())
def test_apply_along_axis_and_over_axes(data):
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=1, max_side=3))
    a = _arr(data, shape)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))

    def f1(v):  # a vector result: its shape takes axis's place
        return tnp.stack([tnp.sum(v * v), v[0] * v[-1]])

    def n1(v):
        return np.stack([np.sum(v * v), v[0] * v[-1]])

    _close(tnp.apply_along_axis(f1, axis, tg.Tensor(a)), np.apply_along_axis(n1, axis, a))
    _close(tnp.apply_along_axis(tnp.prod, axis, tg.Tensor(a)),
           np.apply_along_axis(np.prod, axis, a))
    _grads(lambda x: tnp.apply_along_axis(f1, axis, x), a)
    axes = data.draw(st.lists(st.integers(0, len(shape) - 1), max_size=len(shape), unique=True))
    _close(tnp.apply_over_axes(tnp.sum, tg.Tensor(a), axes), np.apply_over_axes(np.sum, a, axes))
    _grads(lambda x: tnp.apply_over_axes(lambda v, ax: tnp.sum(tnp.sin(v) * v, ax), x, axes),
           a)


@given(data=st.data())
def test_vectorize_elementwise_and_with_a_signature(data):
    s1, s2 = data.draw(broadcastable_shapes(2, max_dims=2, max_side=3))
    a, b = _arr(data, s1), _arr(data, s2)
    assume(np.all(np.abs(a) > 1e-2))

    def piece(x, y):  # Python control flow on each element, as NumPy's vectorize allows
        return x * y if x > 0 else tnp.sin(x) - y

    def npiece(x, y):
        return x * y if x > 0 else np.sin(x) - y

    vec = tnp.vectorize(piece, otypes=[np.float64])
    _close(vec(tg.Tensor(a), tg.Tensor(b)), np.vectorize(npiece, otypes=[np.float64])(a, b))
    _grads(vec, a, b)
    n = data.draw(st.integers(1, 3))
    rows = data.draw(shapes(max_dims=2, max_side=3))
    u, v = _arr(data, rows + (n,)), _arr(data, (n,))
    dot = tnp.vectorize(lambda p, q: tnp.sum(p * q), otypes="d", signature="(n),(n)->()")
    _close(dot(tg.Tensor(u), tg.Tensor(v)),
           np.vectorize(lambda p, q: np.sum(p * q), otypes="d", signature="(n),(n)->()")(u, v))
    _grads(dot, u, v)


@given(data=st.data())
def test_fromfunction_differentiates_through_the_closure(data):
    shape = data.draw(shapes(min_dims=1, max_dims=3, max_side=3))
    c = np.float64(data.draw(st.floats(-2.0, 2.0)))

    def grid(k):
        return tnp.fromfunction(lambda *idx: k * sum(idx) + k * k, shape)

    _close(grid(tg.Tensor(c)), np.fromfunction(lambda *idx: c * sum(idx) + c * c, shape))
    _grads(grid, c)


# -- conversions -------------------------------------------------------------------------------
@given(data=st.data())
def test_conversions_are_the_identity_or_a_cast(data):
    shape = data.draw(shapes(max_dims=3, max_side=3))
    a = _arr(data, shape)
    for name, ref in [("asanyarray", np.asanyarray), ("ascontiguousarray", np.ascontiguousarray),
                      ("asfortranarray", np.asfortranarray),
                      ("asarray_chkfinite", np.asarray_chkfinite)]:
        fn = getattr(tnp, name)
        _close(fn(tg.Tensor(a)), ref(a))
        _grads(fn, a)
    _close(tnp.require(tg.Tensor(a), np.complex128, "CA"), np.require(a, np.complex128, "CA"))
    _grads(lambda x: tnp.require(x, np.complex128) * (1 + 1j), a)


# -- scipy: gammasgn, multivariate_normal.entropy, linalg.solve_banded --------------------------
@given(data=st.data())
def test_gammasgn_is_scipys_and_piecewise_constant(data):
    import scipy.special

    from tapegrad.scipy.special import gammasgn

    shape = data.draw(shapes(max_dims=2, max_side=4))
    x = _arr(data, shape, -4.0, 4.0)
    assume(np.all(np.abs(x - np.round(x)) > 1e-2))  # away from the poles
    _close(gammasgn(tg.Tensor(x)), scipy.special.gammasgn(x))
    _grads(gammasgn, x)
    g = tg.grad(lambda v: tnp.sum(gammasgn(v)))(tg.Tensor(x))
    assert not np.any(g.numpy())


@given(data=st.data())
def test_multivariate_normal_entropy(data):
    import scipy.stats

    from tapegrad.scipy.stats import multivariate_normal as mvn

    d = data.draw(st.integers(1, 4))
    r = _arr(data, (d, d), -1.0, 1.0)
    cov = r @ r.T + d * np.eye(d)
    mean = _arr(data, (d,))
    _close(mvn.entropy(tg.Tensor(mean), tg.Tensor(cov)),
           np.asarray(scipy.stats.multivariate_normal.entropy(mean, cov)), rtol=1e-11)
    var = _arr(data, (d,), 0.2, 3.0)
    _close(mvn.entropy(tg.Tensor(mean), tg.Tensor(var)),
           np.asarray(scipy.stats.multivariate_normal.entropy(mean, np.diag(var))), rtol=1e-11)
    _grads(mvn.entropy, mean, cov)
    _grads(mvn.entropy, mean, var)


@given(data=st.data())
def test_solve_banded(data):
    import scipy.linalg

    from tapegrad.scipy.linalg import solve_banded

    lower, upper = data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))
    m = data.draw(st.integers(1, 5))
    ab = _arr(data, (lower + upper + 1, m), -1.0, 1.0)
    ab[upper] += 4.0  # a dominant diagonal: well conditioned
    b = _arr(data, data.draw(st.sampled_from([(m,), (m, 1), (m, 3)])))
    _close(solve_banded((lower, upper), tg.Tensor(ab), tg.Tensor(b)),
           scipy.linalg.solve_banded((lower, upper), ab, b), rtol=1e-11, atol=1e-12)
    _grads(lambda a, y: solve_banded((lower, upper), a, y), ab, b)
