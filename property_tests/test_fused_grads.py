"""The fused backward primitives (UnaryGrad, BinaryGrad, ReluGrad, ExtremumGrad, DivNoNan,
MulNoNan, SumGrad) as functions in their own right: forward against the NumPy formula,
gradients at orders 1 and 2."""

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import tapegrad as tg
from tapegrad import ops
from tapegrad.ops.elementwise import BINARY, UNARY, array_ns
from tapegrad.testing import check_grads
from tapegrad.testing.strategies import arrays, broadcastable_shapes, floats_in


def _pair(data, lo=-2.0, hi=2.0):
    sa, sb = data.draw(broadcastable_shapes(2, max_dims=2, min_side=1, max_side=3))
    a = data.draw(arrays(sa, np.float64, floats_in(lo, hi)))
    b = data.draw(arrays(sb, np.float64, floats_in(lo, hi)))
    return a, b


_DOMAINS = {"arccosh": (1.2, 2.0)}
_SMOOTH_UNARY = [r for r in UNARY if r.deriv is not None and not r.piecewise]
_SMOOTH_BINARY = [r for r in BINARY if r.dx is not None and not r.piecewise]


@pytest.mark.parametrize("row", _SMOOTH_UNARY, ids=[r.name for r in _SMOOTH_UNARY])
@given(data=st.data())
def test_unary_grad(row, data):
    # g * f'(x) from the row's formula, as a function of g, x and out taken independently
    lo, hi = _DOMAINS.get(row.name, (0.2, 0.8))
    g, x = _pair(data, lo, hi)
    if row.name == "sinc":
        # sinc's rule switches at |x| = 1/4 from (cos(pi x) - out) / x to a Taylor series in
        # x alone: with out an independent input the partial derivatives in x and out jump
        # there (they agree only along out = sinc(x)), so keep the finite-difference steps
        # (eps times a standard-normal tangent) on one side.
        assume(np.all(np.abs(np.abs(x) - 0.25) > 1e-3))
    out = np.asarray(getattr(tg.numpy, row.name)(tg.Tensor(x)).numpy())
    res = ops.UnaryGrad.apply(tg.Tensor(g), tg.Tensor(x), tg.Tensor(out), row=row)
    want = g * row.deriv(array_ns(np), x, out)
    np.testing.assert_allclose(res.numpy(), want, rtol=1e-12)
    # step 2e-5, not 1e-4: near x = 0.2 the order-2 check differentiates g / x**2 (log, log2,
    # ...), whose central-difference truncation error at eps 1e-4 reached 2.7e-5 relative
    # (log at x = g = 0.203125); at 3e-5 and below it agrees to 1e-7.
    check_grads(
        lambda g, x, o: ops.UnaryGrad.apply(g, x, o, row=row),
        (tg.Tensor(g), tg.Tensor(x), tg.Tensor(out)), order=2, modes=("fwd", "rev"), eps=2e-5,
    )


@pytest.mark.parametrize("row", _SMOOTH_BINARY, ids=[r.name for r in _SMOOTH_BINARY])
@given(data=st.data(), wrt=st.sampled_from([0, 1]))
def test_binary_grad(row, data, wrt):
    g, x = _pair(data, 0.5, 2.0)
    y = data.draw(arrays(x.shape, np.float64, floats_in(0.5, 2.0)))
    out = getattr(tg.numpy, row.name)(tg.Tensor(x), tg.Tensor(y)).numpy()
    if wrt == 1 and row.dy is None or wrt == 0 and row.dx is None:
        return
    d = row.dx if wrt == 0 else row.dy
    res = ops.BinaryGrad.apply(tg.Tensor(g), tg.Tensor(x), tg.Tensor(y), tg.Tensor(out),
                               row=row, wrt=wrt)
    np.testing.assert_allclose(res.numpy(), g * d(array_ns(np), x, y, out), rtol=1e-12)
    check_grads(
        lambda g, x, y, o: ops.BinaryGrad.apply(g, x, y, o, row=row, wrt=wrt),
        (tg.Tensor(g), tg.Tensor(x), tg.Tensor(y), tg.Tensor(out)), order=2,
    )


@given(data=st.data())
def test_div_no_nan(data):
    g, d = _pair(data, 0.5, 2.0)
    sign = data.draw(st.sampled_from([1.0, -1.0]))
    d = d * sign
    out = ops.DivNoNan.apply(tg.Tensor(g), tg.Tensor(d))
    np.testing.assert_allclose(out.numpy(), g / d, rtol=1e-13)
    check_grads(ops.DivNoNan.apply, (tg.Tensor(g), tg.Tensor(d)), order=2)
    # zero cotangent at a pole: exactly zero, never NaN (both fast and masked paths)
    for n in (3, 100):
        z = ops.DivNoNan.apply(tg.Tensor(np.zeros(n)), tg.Tensor(np.zeros(n)))
        assert np.all(z.numpy() == 0)
        # one value repeated (0-d, or the stride-0 view a sum's backward hands on): zero
        # gives zeros at the poles, nonzero gives the plain quotient
        poles = tg.Tensor(np.zeros(n))
        for g0 in (np.float64(0.0), np.broadcast_to(0.0, (n,))):
            assert np.all(ops.DivNoNan.apply(tg.Tensor(g0), poles).numpy() == 0)
        with np.errstate(divide="ignore"):
            for g0 in (np.float64(-2.0), np.broadcast_to(3.0, (n,))):
                out = ops.DivNoNan.apply(tg.Tensor(g0), tg.Tensor(np.zeros(1)))
                np.testing.assert_array_equal(out.numpy(), g0 / np.zeros(1))


@given(data=st.data())
def test_mul_no_nan(data):
    a, b = _pair(data)
    out = ops.MulNoNan.apply(tg.Tensor(a), tg.Tensor(b))
    np.testing.assert_allclose(out.numpy(), a * b, rtol=1e-13)
    check_grads(ops.MulNoNan.apply, (tg.Tensor(a), tg.Tensor(b)), order=2)
    big = np.zeros(100)
    z = ops.MulNoNan.apply(tg.Tensor(big), tg.Tensor(np.full(100, np.inf)))
    assert np.all(z.numpy() == 0)


@given(data=st.data())
def test_extremum_grad(data):
    n = data.draw(st.integers(1, 4))
    x = np.sort(data.draw(arrays((2, n), np.float64, floats_in(-2, 2))), axis=1)
    x = x + np.arange(n) * 1e-2  # distinct entries: no ties
    keepdims = data.draw(st.booleans())
    out = x.max(axis=1, keepdims=keepdims)
    g = data.draw(arrays(out.shape, np.float64, floats_in(-2, 2)))
    res = ops.ExtremumGrad.apply(
        tg.Tensor(g), tg.Tensor(x), tg.Tensor(out), axes=(1,), keepdims=keepdims
    )
    expected = (x == x.max(axis=1, keepdims=True)) * g.reshape(2, 1)
    np.testing.assert_allclose(res.numpy(), expected)

    def f(gt):  # linear in g: orders 1 and 2 against finite differences
        return ops.ExtremumGrad.apply(
            gt, tg.Tensor(x), tg.Tensor(out), axes=(1,), keepdims=keepdims
        )

    check_grads(f, (tg.Tensor(g),), order=2)


@given(data=st.data())
def test_sum_grad(data):
    from tapegrad.testing.strategies import shapes

    shape = data.draw(shapes(max_dims=3, min_side=0, max_side=3))
    nd = len(shape)
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, max(nd - 1, 0)), max_size=nd))))
    axes = tuple(a for a in axes if a < nd)
    keepdims = data.draw(st.booleans())
    scale = data.draw(st.sampled_from([None, 0.25, -3.0]))
    x = np.zeros(shape)
    gshape = x.sum(axis=axes, keepdims=keepdims).shape
    g = data.draw(arrays(gshape, np.float64, floats_in(-2, 2)))
    params = dict(shape=shape, axes=axes, keepdims=keepdims, scale=scale)
    out = ops.SumGrad.apply(tg.Tensor(g), **params)
    kept = tuple(1 if i in axes else s for i, s in enumerate(shape))
    want = np.broadcast_to(g.reshape(kept) * (1.0 if scale is None else scale), shape)
    assert out.shape == shape and out.dtype == g.dtype
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-13)
    check_grads(
        lambda t: ops.SumGrad.apply(t, **params), (tg.Tensor(g),), order=2, modes=("fwd", "rev")
    )


@given(data=st.data())
def test_relu_grad(data):
    g, y = _pair(data)
    y = np.maximum(y, 0.0)  # a relu output; kinks (y == 0) included
    g0, y0 = g.copy(), y.copy()
    out = ops.ReluGrad.apply(tg.Tensor(g), tg.Tensor(y))
    np.testing.assert_array_equal(out.numpy(), np.where(y > 0, g, 0.0))
    np.testing.assert_array_equal(g, g0)  # inputs untouched
    np.testing.assert_array_equal(y, y0)
    # linear in g, piecewise constant in y (the kinks are excluded from the finite differences)
    y_off = np.where(y > 0, y + 0.5, -0.5)
    check_grads(ops.ReluGrad.apply, (tg.Tensor(g), tg.Tensor(y_off)), order=2)


def test_relu_grad_non_finite_cotangent_where_masked():
    for n in (3, 100):  # both the product and the where path
        g = np.full(n, np.inf)
        g[::2] = np.nan
        y = np.zeros(n)
        y[1] = 2.0
        out = ops.ReluGrad.apply(tg.Tensor(g), tg.Tensor(y)).numpy()
        np.testing.assert_array_equal(out, np.where(y > 0, g, 0.0))
        assert out.dtype == np.float64
    f32 = ops.ReluGrad.apply(tg.Tensor(np.ones(4, np.float32)), tg.Tensor(np.ones(4, np.float32)))
    assert f32.dtype == np.float32
