"""Example tests of tapegrad.numpy's statistics (tapegrad.numpy._statistics and the
NanArgMax/NanArgMin primitives): error messages, the conventions at ties, NaN and
zero spread, the quantile methods and weights against NumPy, and gradient cross-checks against
torch.autograd where torch is installed."""

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads, check_vmap

RNG = np.random.default_rng(0)
A = RNG.normal(size=(4, 6))
NAN_A = A.copy()
NAN_A[0, 1] = NAN_A[2, 3] = np.nan
NAN_A[3, :] = np.nan  # a slice of NaN only


def T(a, dtype=np.float64):
    return tg.Tensor(np.asarray(a, dtype=dtype))


def grad_sum(f, *args, argnums=0):
    return tg.grad(lambda *v: tnp.sum(f(*v)), argnums=argnums)(*args)


# -- errors ----------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [tnp.nansum, tnp.nanmean, tnp.nanvar, tnp.nanstd, tnp.nanmax,
                                tnp.nanmin, tnp.nanprod, tnp.nancumsum, tnp.nancumprod,
                                tnp.nanargmax, tnp.median, tnp.nanmedian, tnp.ptp])
def test_out_is_refused_naming_the_function(fn):
    with pytest.raises(TypeError, match=rf"^{fn.__name__}: out= is not supported"):
        fn(T(A), None, out=np.empty(6)) if fn is not tnp.nanargmax else fn(T(A), out=1)


def test_quantile_argument_errors():
    x = T(A)
    with pytest.raises(ValueError, match=r"quantile: Quantiles must be in the range \[0, 1\]"):
        tnp.quantile(x, 1.5)
    with pytest.raises(ValueError, match=r"percentile: Percentiles must be in the range"):
        tnp.percentile(x, [10, 101])
    with pytest.raises(ValueError, match=r"nanquantile: Quantiles must be"):
        tnp.nanquantile(x, np.nan)
    with pytest.raises(ValueError, match="quantile: 'cubic' is not a valid method"):
        tnp.quantile(x, 0.5, method="cubic")
    with pytest.raises(ValueError, match="only method 'inverted_cdf' supports weights"):
        tnp.quantile(x, 0.5, weights=np.ones(A.shape))
    with pytest.raises(ValueError, match="weights must be non-negative"):
        tnp.quantile(x, 0.5, method="inverted_cdf", weights=-np.ones(A.shape))
    with pytest.raises(ValueError, match="weights included NaN, inf or were all zero"):
        tnp.quantile(x, 0.5, axis=1, method="inverted_cdf", weights=np.zeros(6))
    with pytest.raises(ValueError, match=r"weights \(shape \(5,\)\) must have the shape of a"):
        tnp.quantile(x, 0.5, axis=1, method="inverted_cdf", weights=np.ones(5))
    with pytest.raises(ValueError, match="quantile of an empty set is undefined"):
        tnp.median(T(np.ones((3, 0))), axis=1)
    with pytest.raises(TypeError, match="quantile: a must be an array of real numbers"):
        tnp.quantile(T([1j], np.complex128), 0.5)
    with pytest.raises(TypeError, match="median: boolean input is not supported"):
        tnp.median(T([True, False], np.bool_))
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        tnp.quantile(x, 0.5, axis=2)


def test_complex_extrema_order_as_numpy_and_pass_the_cotangent_to_the_selected_entry():
    # NumPy orders complex numbers lexicographically (real part, then imaginary part); max,
    # min, nanmax, nanmin and ptp refused complex input before
    z = np.array([[1 + 2j, 1 + 3j, -2j, np.nan], [0.5 + 0j, 0.5 - 1j, 2 - 5j, 1j]])
    for name in ("max", "min", "nanmax", "nanmin", "ptp"):
        arr = z if name.startswith("nan") else np.nan_to_num(z)
        for axis in (None, 0, 1):
            want = getattr(np, name)(arr, axis=axis)
            got = getattr(tnp, name)(T(arr, np.complex128), axis=axis)
            assert got.dtype == want.dtype == np.complex128
            np.testing.assert_array_equal(got.numpy(), want)
    g = tg.grad(lambda v: tnp.real(tnp.max(v) * (2 - 1j)))(T(np.nan_to_num(z), np.complex128))
    want = np.zeros(z.shape, complex)
    want[1, 2] = 2 - 1j  # the max 2-5j; Re((2 - 1j)(x + iy)) = 2x + y: df/dx - i df/dy
    np.testing.assert_array_equal(g.numpy(), want)
    w = np.array([[0.3 + 1j, -1.2 + 0.5j, 2.1 - 1j], [1.7 + 2j, -0.4 - 2j, 0.9 + 0j]])
    for name in ("max", "min", "nanmax", "nanmin", "ptp"):
        check_grads(lambda v, n=name: getattr(tnp, n)(v, axis=1), (T(w, np.complex128),),
                    order=2, modes=("rev", "fwd"))


def test_nan_reduction_errors():
    with pytest.raises(ValueError, match="nanargmax: All-NaN slice encountered"):
        tnp.nanargmax(T(NAN_A), axis=1)
    with pytest.raises(ValueError, match="nanargmin: All-NaN slice encountered"):
        tnp.nanargmin(T([np.nan, np.nan]))
    with pytest.raises(ValueError, match="nanmax: reduction over axes .* covers no elements; "
                                         "pass initial="):
        tnp.nanmax(T(np.ones((2, 0))), axis=1)
    with pytest.raises(ValueError, match="nanmin: a where= mask needs initial="):
        tnp.nanmin(T(A), where=A > 0)
    with pytest.raises(ValueError, match="nanvar: give ddof or correction, not both"):
        tnp.nanvar(T(A), ddof=1, correction=1)
    with pytest.raises(TypeError, match="nansum: where must be boolean"):
        tnp.nansum(T(A), where=np.ones(A.shape))


def test_scan_difference_and_integral_errors():
    with pytest.raises(ValueError, match="cumulative_sum: axis must be specified for "
                                         "multi-dimensional arrays"):
        tnp.cumulative_sum(T(A))
    with pytest.raises(ValueError, match="cumulative_prod: x must have at least one dimension"):
        tnp.cumulative_prod(T(1.0))
    with pytest.raises(ValueError, match="diff: order must be non-negative but got -1"):
        tnp.diff(T(A), n=-1)
    with pytest.raises(ValueError, match="diff requires input that is at least one dimensional"):
        tnp.diff(T(1.0))
    with pytest.raises(ValueError, match=r"gradient: shape of array too small .* at least "
                                         r"\(edge_order \+ 1\) elements"):
        tnp.gradient(T([1.0, 2.0]), edge_order=2)
    with pytest.raises(ValueError, match="gradient: 'edge_order' greater than 2 not supported"):
        tnp.gradient(T(A), edge_order=3)
    with pytest.raises(ValueError, match="gradient: when 1d, distances must match the length"):
        tnp.gradient(T(A), T([1.0, 2.0]), axis=1)
    with pytest.raises(TypeError, match="gradient: invalid number of spacing arguments"):
        tnp.gradient(T(A), 1.0, 2.0, 3.0)
    with pytest.raises(TypeError, match="gradient: boolean input is not supported"):
        tnp.gradient(T([True, False, True], np.bool_))
    with pytest.raises(ValueError, match="trapezoid: x has 3 points, y has 6 along axis 1"):
        tnp.trapezoid(T(A), x=[1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match=r"ediff1d: dtype of `to_begin` \(float64\) must be "
                                        "compatible"):
        tnp.ediff1d(T([1, 2, 4], np.int64), to_begin=[0.5])


def test_cov_and_average_errors():
    with pytest.raises(ValueError, match="cov: m has more than 2 dimensions"):
        tnp.cov(T(np.ones((2, 2, 2))))
    with pytest.raises(RuntimeError, match="cov: incompatible numbers of samples and fweights"):
        tnp.cov(T(A), fweights=[1, 2])
    with pytest.raises(RuntimeError, match="cov: cannot handle multidimensional aweights"):
        tnp.cov(T(A), aweights=np.ones((2, 6)))
    with pytest.raises(ValueError, match="cov: aweights cannot be negative"):
        tnp.cov(T(A), aweights=-np.ones(6))
    with pytest.raises(TypeError, match="cov: fweights must be integer"):
        tnp.cov(T(A), fweights=np.full(6, 1.5))
    with pytest.raises(ZeroDivisionError, match="average: weights sum to zero"):
        tnp.average(T(A), axis=1, weights=np.zeros(6))
    with pytest.raises(ValueError, match=r"average: weights of shape \(6,\) differ from a's"):
        tnp.average(T(A), weights=np.ones(6))
    with pytest.raises(ValueError, match=r"must have a's shape \(4, 6\) or the shape \(6,\)"):
        tnp.average(T(A), axis=1, weights=np.ones(4))


# -- NaN conventions -------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["nansum", "nanmean", "nanvar", "nanstd", "nanprod",
                                  "nanmax", "nanmin", "nanmedian"])
def test_nan_reductions_match_numpy_and_give_nan_positions_zero_gradient(name):
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning) if name not in (
            "nansum", "nanprod") else _nullcontext():
        want = getattr(np, name)(NAN_A, axis=1)
    got = getattr(tnp, name)(T(NAN_A), axis=1)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, equal_nan=True)
    g = grad_sum(lambda v: getattr(tnp, name)(v, axis=1), T(NAN_A)).numpy()
    assert np.all(np.isfinite(g))
    assert np.all(g[np.isnan(NAN_A)] == 0)
    check_grads(lambda v: getattr(tnp, name)(v, axis=1), (T(NAN_A[:3]),), order=2,
                modes=("rev", "fwd"))


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_nanmax_initial_where_and_ties():
    x = T([[1.0, np.nan, 3.0, 3.0], [np.nan, np.nan, np.nan, np.nan]])
    got = tnp.nanmax(x, axis=1)
    assert np.isnan(got.numpy()[1]) and got.numpy()[0] == 3.0
    g = grad_sum(lambda v: tnp.nanmax(v, axis=1), x).numpy()
    np.testing.assert_array_equal(g, [[0, 0, 0.5, 0.5], [0, 0, 0, 0]])
    np.testing.assert_array_equal(tnp.nanmax(x, axis=1, initial=5.0).numpy(), [5.0, 5.0])
    mask = np.array([[True, True, False, True], [True] * 4])
    np.testing.assert_array_equal(tnp.nanmin(x, axis=1, initial=10.0, where=mask).numpy(),
                                  np.nanmin(x.numpy(), axis=1, initial=10.0, where=mask))
    np.testing.assert_array_equal(tnp.nanmax(T(np.ones((2, 0))), axis=1, initial=-1.0).numpy(),
                                  [-1.0, -1.0])


def test_nanstd_gradient_is_zero_at_zero_spread():
    g = grad_sum(tnp.nanstd, T([2.0, np.nan, 2.0, 2.0])).numpy()
    np.testing.assert_array_equal(g, [0.0, 0.0, 0.0, 0.0])


def test_nanvar_ddof_correction_mean_and_where():
    x = T(NAN_A[:3])
    np.testing.assert_allclose(tnp.nanvar(x, axis=1, correction=1).numpy(),
                               np.nanvar(NAN_A[:3], axis=1, ddof=1))
    m = np.nanmean(NAN_A[:3], axis=1, keepdims=True)
    np.testing.assert_allclose(tnp.nanvar(x, axis=1, mean=m).numpy(),
                               np.nanvar(NAN_A[:3], axis=1, mean=m))
    w = A[:3] > -0.5
    np.testing.assert_allclose(tnp.nanmean(x, axis=1, where=w).numpy(),
                               np.nanmean(NAN_A[:3], axis=1, where=w))
    np.testing.assert_allclose(tnp.nansum(x, axis=0, where=w, initial=1.0).numpy(),
                               np.nansum(NAN_A[:3], axis=0, where=w, initial=1.0))


def test_nanargmax_nanargmin():
    for fn in ("nanargmax", "nanargmin"):
        got = getattr(tnp, fn)(T(NAN_A[:3]), axis=1, keepdims=True)
        want = getattr(np, fn)(NAN_A[:3], axis=1, keepdims=True)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), want)
        assert int(getattr(tnp, fn)(T(NAN_A[:3]))) == getattr(np, fn)(NAN_A[:3])
        check_vmap(lambda v, fn=fn: getattr(tnp, fn)(v), (T(NAN_A[:3]),))
        check_vmap(lambda v, fn=fn: getattr(tnp, fn)(v, axis=0, keepdims=True),
                   (T(NAN_A[:3]),))
    with pytest.raises(ValueError, match="All-NaN slice"):  # also under vmap
        tg.vmap(tnp.nanargmax)(T(NAN_A))


# -- order statistics ------------------------------------------------------------------------
METHODS = ["inverted_cdf", "averaged_inverted_cdf", "closest_observation",
           "interpolated_inverted_cdf", "hazen", "weibull", "linear", "median_unbiased",
           "normal_unbiased", "lower", "higher", "midpoint", "nearest"]


@pytest.mark.parametrize("method", METHODS)
def test_every_quantile_method_matches_numpy(method):
    q = [0.0, 0.1, 1 / 3, 0.5, 0.75, 0.99, 1.0]
    for axis in (None, 0, 1, (0, 1)):
        got = tnp.quantile(T(A), q, axis=axis, method=method)
        want = np.quantile(A, q, axis=axis, method=method)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-13)
        got = tnp.nanquantile(T(NAN_A[:3]), q, axis=axis, method=method, keepdims=True)
        want = np.nanquantile(NAN_A[:3], q, axis=axis, method=method, keepdims=True)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-13)
    ints = np.arange(7) * 3 % 5
    got, want = tnp.quantile(T(ints, np.int64), 0.4, method=method), \
        np.quantile(ints, 0.4, method=method)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got.numpy(), want)


def test_quantile_dtypes_follow_numpy():
    x32 = T(A, np.float32)
    assert tnp.quantile(x32, 0.3).dtype == np.float32  # a Python q is weak
    assert tnp.quantile(x32, [0.3]).dtype == np.float64  # a list is float64, as NumPy
    assert tnp.median(x32).dtype == np.float32
    assert tnp.median(T([1, 2, 3, 4], np.int64)).dtype == np.float64


def test_median_gradient_goes_to_the_middle_order_statistics():
    x = T([5.0, 1.0, 4.0, 2.0])  # sorted 1 2 4 5: the middle pair 2, 4
    np.testing.assert_array_equal(grad_sum(tnp.median, x).numpy(), [0, 0, 0.5, 0.5])
    x = T([3.0, 1.0, 3.0])  # a tie at the median: the stable sort's middle element
    np.testing.assert_array_equal(grad_sum(tnp.median, x).numpy(), [1, 0, 0])
    x = T([[7.0, np.nan, 1.0], [2.0, 3.0, 4.0]])
    assert np.isnan(tnp.median(x, axis=1).numpy()[0])
    np.testing.assert_array_equal(grad_sum(lambda v: tnp.median(v, axis=1), x).numpy(),
                                  [[0, 0, 0], [0, 1, 0]])
    np.testing.assert_array_equal(grad_sum(lambda v: tnp.nanmedian(v, axis=1), x).numpy(),
                                  [[0.5, 0, 0.5], [0, 1, 0]])


def test_quantile_gradient_in_q_is_the_slope_between_order_statistics():
    x = T([0.0, 10.0, 20.0, 40.0])
    # linear: virtual index 3 q; between 20 and 40 the slope is 20 * 3
    g = tg.grad(lambda q: tnp.quantile(x, q))(T(0.8)).numpy()
    np.testing.assert_allclose(g, 60.0)
    assert tg.grad(lambda q: tnp.quantile(x, q, method="lower"))(T(0.8)).numpy() == 0
    check_grads(lambda q: tnp.percentile(x, q, method="hazen"), (T([12.0, 55.0, 71.0]),),
                order=2, modes=("rev", "fwd"))


def test_weighted_inverted_cdf_quantiles():
    w = RNG.uniform(size=A.shape)
    for ws, axis in ((w, 1), (w[0], 1), (w, None)):
        got = tnp.quantile(T(A), [0.2, 0.5, 0.9], axis=axis, method="inverted_cdf", weights=ws)
        want = np.quantile(A, [0.2, 0.5, 0.9], axis=axis, method="inverted_cdf", weights=ws)
        np.testing.assert_array_equal(got.numpy(), want)
    got = tnp.nanquantile(T(NAN_A[:3]), 0.5, axis=1, method="inverted_cdf", weights=w[:3])
    want = np.nanquantile(NAN_A[:3], 0.5, axis=1, method="inverted_cdf", weights=w[:3])
    np.testing.assert_array_equal(got.numpy(), want)
    g = grad_sum(lambda v: tnp.quantile(v, 0.5, axis=1, method="inverted_cdf", weights=w), T(A))
    assert np.all(g.numpy().sum(axis=1) == 1.0)  # one selected element per row


def test_order_statistics_batch_with_per_example_probabilities():
    x = T(RNG.normal(size=(3, 5)))
    q = T([0.1, 0.5, 0.95])
    check_vmap(lambda v, p: tnp.quantile(v, p), (x, q))
    check_vmap(tg.grad(lambda v, p: tnp.quantile(v, p)), (x, q))
    check_vmap(lambda v: tnp.nanpercentile(v, [25.0, 50.0]), (T(NAN_A[:3]),))


# -- averages, spreads, covariance -----------------------------------------------------------
def test_average_ptp_count_nonzero():
    w = RNG.uniform(size=6)
    avg, scl = tnp.average(T(A), axis=1, weights=w, returned=True)
    want_avg, want_scl = np.average(A, axis=1, weights=w, returned=True)
    np.testing.assert_allclose(avg.numpy(), want_avg)
    np.testing.assert_allclose(scl.numpy(), want_scl)
    np.testing.assert_allclose(tnp.average(T(A), axis=(0, 1), weights=RNG.uniform(size=A.shape),
                                           keepdims=True).shape, (1, 1))
    check_grads(lambda v, ww: tnp.average(v, axis=1, weights=ww), (T(A), T(w)), order=2,
                modes=("rev", "fwd"))
    x = T([[1.0, 5.0, 5.0], [2.0, 2.0, 0.0]])
    np.testing.assert_array_equal(tnp.ptp(x, axis=1).numpy(), [4.0, 2.0])
    np.testing.assert_array_equal(grad_sum(lambda v: tnp.ptp(v, axis=1), x).numpy(),
                                  [[-1, 0.5, 0.5], [0.5, 0.5, -1]])
    c = tnp.count_nonzero(x - 2.0, axis=0)
    assert c.dtype == np.intp and c.numpy().tolist() == [1, 1, 2]
    assert int(tnp.count_nonzero(x)) == 5 and tnp.count_nonzero(x, keepdims=True).shape == (1, 1)


def test_cov_and_corrcoef_options_match_numpy():
    fw = np.array([1, 2, 1, 3, 1, 1])
    aw = RNG.uniform(size=6)
    for kw in ({}, {"bias": True}, {"ddof": 0}, {"rowvar": False}, {"fweights": fw},
               {"aweights": aw}, {"fweights": fw, "aweights": aw, "ddof": 2}):
        np.testing.assert_allclose(tnp.cov(T(A), **kw).numpy(), np.cov(A, **kw), rtol=1e-12)
    np.testing.assert_allclose(tnp.cov(T(A[0]), T(A[1])).numpy(), np.cov(A[0], A[1]))
    assert tnp.cov(T(A[0])).shape == ()
    z = A + 1j * RNG.normal(size=A.shape)
    np.testing.assert_allclose(tnp.cov(T(z, np.complex128)).numpy(), np.cov(z), rtol=1e-12)
    np.testing.assert_allclose(tnp.corrcoef(T(z, np.complex128)).numpy(), np.corrcoef(z),
                               rtol=1e-12)
    np.testing.assert_allclose(tnp.corrcoef(T(A), rowvar=False).numpy(),
                               np.corrcoef(A, rowvar=False), rtol=1e-12)
    assert tnp.cov(T(A, np.float32)).dtype == np.float32  # NumPy would give float64
    assert tnp.cov(T(A, np.float32), dtype=np.float64).dtype == np.float64
    assert tnp.cov(T(np.zeros((0, 3)))).shape == (0, 0)
    check_grads(lambda v: tnp.cov(v, aweights=aw), (T(A),), order=2, modes=("rev", "fwd"))
    check_grads(tnp.corrcoef, (T(A),), order=2, modes=("rev", "fwd"))
    # the unit diagonal has derivative 0
    g = tg.jacrev(lambda v: tnp.diagonal(tnp.corrcoef(v)))(T(A)).numpy()
    np.testing.assert_allclose(g, 0, atol=1e-12)


# -- scans, differences, integrals -----------------------------------------------------------
def test_cumulative_sum_prod_match_numpy():
    for inc in (False, True):
        for fn in ("cumulative_sum", "cumulative_prod"):
            got = getattr(tnp, fn)(T(A), axis=1, include_initial=inc)
            want = getattr(np, fn)(A, axis=1, include_initial=inc)
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-13)
        i = np.array([1, 2, 3], np.int32)
        assert tnp.cumulative_sum(T(i, np.int32), include_initial=inc).dtype == \
            np.cumulative_sum(i, include_initial=inc).dtype
    check_grads(lambda v: tnp.cumulative_prod(v, axis=0, include_initial=True), (T(A),),
                order=2, modes=("rev", "fwd"))


def test_diff_ediff1d_gradient_trapezoid_match_numpy():
    np.testing.assert_allclose(tnp.diff(T(A), n=2, axis=0, prepend=1.0, append=A[:1]).numpy(),
                               np.diff(A, n=2, axis=0, prepend=1.0, append=A[:1]))
    b = np.array([True, False, False, True])
    np.testing.assert_array_equal(tnp.diff(T(b, np.bool_)).numpy(), np.diff(b))
    assert tnp.diff(T(A), n=0) is not None and tnp.diff(T(A), n=7, axis=1).shape == (4, 0)
    np.testing.assert_allclose(tnp.ediff1d(T(A), to_begin=[1, 2], to_end=5.0).numpy(),
                               np.ediff1d(A, to_begin=[1, 2], to_end=5.0))
    xs = np.cumsum(RNG.uniform(0.5, 1.5, size=6))
    for eo in (1, 2):
        for args in ((), (2.0,), (0.5, T(xs))):
            got = tnp.gradient(T(A), *args, edge_order=eo)
            want = np.gradient(A, *[a.numpy() if isinstance(a, tg.Tensor) else a
                                    for a in args], edge_order=eo)
            for g, w in zip(got, want):
                np.testing.assert_allclose(g.numpy(), w, rtol=1e-12)
        got = tnp.gradient(T(A), T(xs), axis=-1, edge_order=eo)
        np.testing.assert_allclose(got.numpy(), np.gradient(A, xs, axis=-1, edge_order=eo))
        check_grads(lambda f, c, eo=eo: tnp.gradient(f, c, axis=1, edge_order=eo), (T(A), T(xs)),
                    order=2, modes=("rev", "fwd"))
    np.testing.assert_allclose(tnp.trapezoid(T(A), dx=0.5, axis=0).numpy(),
                               np.trapezoid(A, dx=0.5, axis=0))
    np.testing.assert_allclose(tnp.trapezoid(T(A), x=xs).numpy(), np.trapezoid(A, x=xs))
    x2 = np.cumsum(RNG.uniform(size=A.shape), axis=0)
    np.testing.assert_allclose(tnp.trapezoid(T(A), x=T(x2), axis=0).numpy(),
                               np.trapezoid(A, x=x2, axis=0))
    assert tnp.trapezoid(T([1, 2, 3], np.int64)).dtype == np.float64


# -- torch cross-checks ------------------------------------------------------------------------
def _torch_grads(fn, *arrays):
    torch = pytest.importorskip("torch")
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    gs = torch.autograd.grad(fn(torch, *ts).sum(), ts)
    return [g.numpy() for g in gs]


@pytest.mark.parametrize("name,ours,theirs", [
    ("nansum", lambda v: tnp.nansum(v, axis=1), lambda t, v: t.nansum(v, dim=1)),
    ("nanmean", lambda v: tnp.nanmean(v, axis=0), lambda t, v: t.nanmean(v, dim=0)),
    ("quantile", lambda v: tnp.quantile(v, [0.2, 0.7], axis=1),
     lambda t, v: t.quantile(v, t.tensor([0.2, 0.7], dtype=v.dtype), dim=1)),
    ("nanquantile", lambda v: tnp.nanquantile(v, 0.35, axis=1),
     lambda t, v: t.nanquantile(v, 0.35, dim=1)),
    ("cov", lambda v: tnp.cov(v), lambda t, v: t.cov(v)),
    ("corrcoef", lambda v: tnp.corrcoef(v), lambda t, v: t.corrcoef(v)),
    ("diff", lambda v: tnp.diff(v, n=2, axis=0), lambda t, v: t.diff(v, n=2, dim=0)),
    ("trapezoid", lambda v: tnp.trapezoid(v, dx=0.3), lambda t, v: t.trapezoid(v, dx=0.3)),
    ("gradient", lambda v: tnp.gradient(v, axis=1),
     lambda t, v: t.gradient(v, dim=1)[0]),
    ("cumulative_prod", lambda v: tnp.cumulative_prod(v, axis=1),
     lambda t, v: t.cumprod(v, dim=1)),
])
def test_gradients_match_torch(name, ours, theirs):
    x = NAN_A[:3] if name.startswith("nan") else A
    (want,) = _torch_grads(theirs, x)
    got = grad_sum(ours, T(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_weighted_cov_gradient_matches_torch():
    fw = np.array([1, 2, 1, 3, 1, 1])
    aw = RNG.uniform(0.5, 1.0, size=6)
    torch = pytest.importorskip("torch")
    want = _torch_grads(lambda t, v, a: t.cov(v, fweights=t.tensor(fw), aweights=a), A, aw)
    got = tg.grad(lambda v, a: tnp.sum(tnp.cov(v, fweights=fw, aweights=a)),
                  argnums=(0, 1))(T(A), T(aw))
    assert torch is not None
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-10)


def test_average_weights_follow_the_order_of_a_tuple_axis():
    # Used to demand weights in sorted-axis order: axis=(1, 0) with (3, 2) weights raised.
    a, w = RNG.normal(size=(2, 3)), RNG.uniform(0.5, 1.0, size=(3, 2))
    np.testing.assert_allclose(tnp.average(T(a), axis=(1, 0), weights=T(w)).numpy(),
                               np.average(a, axis=(1, 0), weights=w))
    a, w = RNG.normal(size=(2, 3, 4)), RNG.uniform(0.5, 1.0, size=(4, 2))
    np.testing.assert_allclose(tnp.average(T(a), axis=(2, 0), weights=T(w)).numpy(),
                               np.average(a, axis=(2, 0), weights=w))
