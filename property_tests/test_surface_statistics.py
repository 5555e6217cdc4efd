"""Property tests of tapegrad.numpy's statistics: NaN-ignoring reductions, order statistics
(every quantile method), averages, covariance, scans, differences and integrals, on drawn
shapes (size-0 and size-1 axes included) and drawn axes: values and dtypes against NumPy,
gradients at orders 1 and 2 in both modes against finite differences, and vmap (values and
gradients) against a Python loop."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads, check_vmap
from tapegrad.testing.strategies import floats_in

METHODS = ["inverted_cdf", "averaged_inverted_cdf", "closest_observation",
           "interpolated_inverted_cdf", "hazen", "weibull", "linear", "median_unbiased",
           "normal_unbiased", "lower", "higher", "midpoint", "nearest"]


@st.composite
def arrays_and_axis(draw, min_side=0, nan=False, distinct=False, min_dims=1):
    """A float64 array (NaNs sprinkled in with ``nan``; well-separated values with
    ``distinct``, so order statistics and extrema do not tie) and an axis (None, an int or a
    tuple)."""
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=3, min_side=min_side,
                                  max_side=4))
    size = int(np.prod(shape))
    if distinct:
        perm = draw(st.permutations(range(size)))
        x = (np.asarray(perm, dtype=np.float64) * 0.37 - 1.0).reshape(shape)
    else:
        x = draw(hnp.arrays(np.float64, shape, elements=floats_in(-3.0, 3.0)))
    if nan and size:
        mask = draw(hnp.arrays(np.bool_, shape))
        x = np.where(mask, np.nan, x)
    nd = len(shape)
    axis = draw(st.one_of(st.none(), st.integers(-nd, nd - 1),
                          st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd,
                                   unique=True).map(tuple)))
    return x, axis


def _np(fn, *args, **kw):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return getattr(np, fn)(*args, **kw)


def _close(got, want, rtol=1e-12):
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got.numpy(), want, rtol=rtol, atol=1e-12, equal_nan=True)


NAN_REDUCTIONS = ["nansum", "nanmean", "nanvar", "nanstd", "nanprod", "nanmax", "nanmin",
                  "nanmedian"]


@pytest.mark.parametrize("name", NAN_REDUCTIONS)
@given(data=st.data(), keepdims=st.booleans(), f32=st.booleans())
def test_nan_reductions_match_numpy(name, data, keepdims, f32):
    x, axis = data.draw(arrays_and_axis(nan=True))
    if name in ("nanmax", "nanmin", "nanmedian"):
        axes = range(x.ndim) if axis is None else np.atleast_1d(axis)
        assume(all(x.shape[a] for a in axes))
    if f32:
        x = x.astype(np.float32)
    got = getattr(tnp, name)(tg.Tensor(x), axis=axis, keepdims=keepdims)
    _close(got, _np(name, x, axis=axis, keepdims=keepdims), rtol=1e-5 if f32 else 1e-12)


@pytest.mark.parametrize("name", NAN_REDUCTIONS)
@given(data=st.data())
def test_nan_reductions_grads(name, data):
    x, axis = data.draw(arrays_and_axis(min_side=1, nan=True, distinct=True))
    if name in ("nanstd", "nanvar"):
        x = x * (1 + 0.01 * np.arange(x.size).reshape(x.shape))  # no zero spread
    # slices of NaN only give NaN (zero gradient): nan_to_num makes the finite differences 0
    check_grads(lambda v: tnp.nan_to_num(getattr(tnp, name)(v, axis=axis)), (tg.Tensor(x),),
                order=2, modes=("rev", "fwd"))
    g = tg.grad(lambda v: tnp.nansum(getattr(tnp, name)(v, axis=axis)))(tg.Tensor(x)).numpy()
    assert np.all(g[np.isnan(x)] == 0)


@pytest.mark.parametrize("method", METHODS)
@given(data=st.data(), nan=st.booleans(), keepdims=st.booleans(), q=st.one_of(
    floats_in(0.0, 1.0), st.lists(floats_in(0.0, 1.0), min_size=0, max_size=3)))
def test_quantiles_match_numpy(method, data, nan, keepdims, q):
    x, axis = data.draw(arrays_and_axis(min_side=1, nan=nan))
    fn = "nanquantile" if nan else "quantile"
    got = getattr(tnp, fn)(tg.Tensor(x), q, axis=axis, method=method, keepdims=keepdims)
    _close(got, _np(fn, x, q, axis=axis, method=method, keepdims=keepdims))


@given(data=st.data(), method=st.sampled_from(METHODS), nan=st.booleans())
def test_quantile_grads(data, method, nan):
    x, axis = data.draw(arrays_and_axis(min_side=1, nan=nan, distinct=True))
    q = data.draw(st.lists(floats_in(0.02, 0.98), min_size=1, max_size=2))
    fn = tnp.nanquantile if nan else tnp.quantile
    check_grads(lambda v: tnp.nan_to_num(fn(v, q, axis=axis, method=method)), (tg.Tensor(x),),
                order=2, modes=("rev", "fwd"))


@given(data=st.data(), method=st.sampled_from(["linear", "hazen", "weibull", "median_unbiased",
                                               "normal_unbiased", "interpolated_inverted_cdf"]))
def test_quantile_grads_in_q(data, method):
    x, axis = data.draw(arrays_and_axis(min_side=2, distinct=True))
    q = np.asarray(data.draw(st.lists(floats_in(0.05, 0.95), min_size=1, max_size=3)))
    n = x.size if axis is None else int(np.prod([x.shape[a] for a in np.atleast_1d(axis)]))
    # keep the finite differences off the knots of the piecewise-linear function of q
    alpha, beta = {"linear": (1, 1), "hazen": (0.5, 0.5), "weibull": (0, 0),
                   "median_unbiased": (1 / 3, 1 / 3), "normal_unbiased": (3 / 8, 3 / 8),
                   "interpolated_inverted_cdf": (0, 1)}[method]
    v = n * q + alpha + q * (1 - alpha - beta) - 1
    assume(np.all(np.abs(v - np.round(v)) > 1e-3))
    check_grads(lambda p: tnp.quantile(tg.Tensor(x), p, axis=axis, method=method),
                (tg.Tensor(q),), order=2, modes=("rev", "fwd"))


@given(data=st.data(), b=st.integers(0, 3))
def test_order_statistics_batch(data, b):
    x, axis = data.draw(arrays_and_axis(min_side=1, nan=True))
    xb = np.stack([x] * b) if b else np.zeros((0,) + x.shape)
    if b:
        xb = xb + np.arange(b).reshape((b,) + (1,) * x.ndim)
    q = [0.25, 0.8]
    check_vmap(lambda v: tnp.nanquantile(v, q, axis=axis), (tg.Tensor(xb),))
    check_vmap(lambda v: tnp.median(v, axis=axis), (tg.Tensor(np.nan_to_num(xb)),))
    check_vmap(tg.grad(lambda v: tnp.nansum(tnp.nanpercentile(v, 30.0, axis=axis))),
               (tg.Tensor(xb),))


@given(data=st.data(), keepdims=st.booleans(), weighted=st.booleans())
def test_average_matches_numpy_and_grads(data, keepdims, weighted):
    x, axis = data.draw(arrays_and_axis(min_side=1))
    w = None
    if weighted:
        axes = tuple(range(x.ndim)) if axis is None else tuple(
            a % x.ndim for a in np.atleast_1d(axis))
        shape = x.shape if axis is None else tuple(x.shape[a] for a in axes)
        w = data.draw(hnp.arrays(np.float64, shape, elements=floats_in(0.5, 2.0)))
    got = tnp.average(tg.Tensor(x), axis=axis, weights=w, keepdims=keepdims)
    _close(got, _np("average", x, axis=axis, weights=w, keepdims=keepdims))
    args = (tg.Tensor(x),) if w is None else (tg.Tensor(x), tg.Tensor(w))
    check_grads(lambda *v: tnp.average(v[0], axis=axis, weights=v[1] if w is not None else None),
                args, order=2, modes=("rev", "fwd"))


@given(data=st.data(), rowvar=st.booleans(), bias=st.booleans(), weights=st.booleans())
def test_cov_corrcoef_match_numpy_and_grads(data, rowvar, bias, weights):
    k, n = data.draw(st.integers(1, 3)), data.draw(st.integers(3, 5))
    m = data.draw(hnp.arrays(np.float64, (k, n) if rowvar else (n, k), elements=floats_in()))
    # no constant variable, and no two exactly collinear ones (at |corrcoef| = 1 finite
    # differences of the correlation lose their accuracy: the all-zero draw plus a linear ramp
    # failed the order-2 check)
    m = m + np.sin(np.arange(m.size).reshape(m.shape) * 1.7) * 0.3
    aw = data.draw(hnp.arrays(np.float64, (n,), elements=floats_in(0.5, 2.0))) if weights \
        else None
    got = tnp.cov(tg.Tensor(m), rowvar=rowvar, bias=bias, aweights=aw)
    _close(got, _np("cov", m, rowvar=rowvar, bias=bias, aweights=aw), rtol=1e-10)
    check_grads(lambda v: tnp.cov(v, rowvar=rowvar, bias=bias, aweights=aw), (tg.Tensor(m),),
                order=2, modes=("rev", "fwd"))
    if k > 1:
        _close(tnp.corrcoef(tg.Tensor(m), rowvar=rowvar), _np("corrcoef", m, rowvar=rowvar),
               rtol=1e-10)
        check_grads(lambda v: tnp.corrcoef(v, rowvar=rowvar), (tg.Tensor(m),), order=2,
                    modes=("rev", "fwd"))


@given(data=st.data(), include=st.booleans(), name=st.sampled_from(
    ["cumulative_sum", "cumulative_prod", "nancumsum", "nancumprod"]))
def test_scans(data, include, name):
    x, _ = data.draw(arrays_and_axis(nan=name.startswith("nan")))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    kw = {"include_initial": include} if name.startswith("cum") else {}
    got = getattr(tnp, name)(tg.Tensor(x), axis=axis, **kw)
    _close(got, _np(name, x, axis=axis, **kw))
    if x.size:
        check_grads(lambda v: getattr(tnp, name)(v, axis=axis, **kw), (tg.Tensor(x),),
                    order=2, modes=("rev", "fwd"))


@given(data=st.data(), n=st.integers(0, 3), pre=st.booleans())
def test_diff_and_trapezoid(data, n, pre):
    x, _ = data.draw(arrays_and_axis())
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    kw = {"prepend": 0.5} if pre else {}
    _close(tnp.diff(tg.Tensor(x), n=n, axis=axis, **kw), _np("diff", x, n=n, axis=axis, **kw))
    _close(tnp.trapezoid(tg.Tensor(x), dx=0.7, axis=axis),
           _np("trapezoid", x, dx=0.7, axis=axis))
    if x.size:
        check_grads(lambda v: tnp.diff(v, n=n, axis=axis, **kw), (tg.Tensor(x),), order=2,
                    modes=("rev", "fwd"))
        xs = np.cumsum(np.full(x.shape[axis], 0.6))
        check_grads(lambda v, c: tnp.trapezoid(v, x=c, axis=axis), (tg.Tensor(x), tg.Tensor(xs)),
                    order=2, modes=("rev", "fwd"))


@given(data=st.data(), edge_order=st.sampled_from([1, 2]), uniform=st.booleans())
def test_gradient(data, edge_order, uniform):
    x, _ = data.draw(arrays_and_axis(min_side=3))
    axis = data.draw(st.integers(0, x.ndim - 1))
    n = x.shape[axis]
    coords = 0.8 if uniform else np.cumsum(
        data.draw(hnp.arrays(np.float64, (n,), elements=floats_in(0.5, 1.5))))
    got = tnp.gradient(tg.Tensor(x), coords if uniform else tg.Tensor(coords), axis=axis,
                       edge_order=edge_order)
    _close(got, _np("gradient", x, coords, axis=axis, edge_order=edge_order), rtol=1e-10)
    args = (tg.Tensor(x),) if uniform else (tg.Tensor(x), tg.Tensor(coords))
    check_grads(lambda v, *c: tnp.gradient(v, c[0] if c else coords, axis=axis,
                                           edge_order=edge_order),
                args, order=2, modes=("rev", "fwd"))


@given(data=st.data(), b=st.integers(0, 3))
def test_reductions_batch(data, b):
    x, axis = data.draw(arrays_and_axis(min_side=1, nan=True))
    xb = np.stack([x * (i + 1) for i in range(b)]) if b else np.zeros((0,) + x.shape)
    for fn in (tnp.nanmean, tnp.nanstd, tnp.nanmax, tnp.nansum):
        check_vmap(lambda v, fn=fn: fn(v, axis=axis), (tg.Tensor(xb),))
    check_vmap(tg.grad(lambda v: tnp.nansum(tnp.nanvar(v, axis=axis))), (tg.Tensor(xb),))
    x1 = np.nan_to_num(xb)
    check_vmap(lambda v: tnp.cumulative_sum(v, axis=-1, include_initial=True),
               (tg.Tensor(x1),))
    check_vmap(lambda v: tnp.nanargmax(v, axis=-1), (tg.Tensor(x1),))
