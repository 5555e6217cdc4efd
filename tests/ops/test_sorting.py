"""Example tests for sorting, searching, counting, selection and set operations: NumPy's
results on specific cases (ties, NaNs, empty inputs, complex), the derivative conventions
(gather through the permutation, first occurrence for unique, weights of bincount and
histogram), the error messages, vmap with equal and unequal per-example sizes, and jit."""

import warnings

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads, check_vmap


def f64(a):
    return tg.Tensor(np.asarray(a, dtype=np.float64))


def same(got, want):
    """Values, shape and dtype equal to NumPy's (NaNs equal)."""
    g = got.numpy()
    want = np.asarray(want)
    assert g.shape == want.shape and g.dtype == want.dtype, (g.shape, g.dtype, want.shape,
                                                              want.dtype)
    np.testing.assert_array_equal(g, want)


# -- sort, argsort, partition, lexsort --------------------------------------------------------
def test_sort_matches_numpy_with_nans_complex_and_ties():
    a = np.array([[3.0, np.nan, 1.0, 1.0], [-0.5, 2.0, np.inf, -np.inf]])
    for axis in (-1, 0, None):
        same(tnp.sort(f64(a), axis=axis), np.sort(a, axis=axis))
        same(tnp.argsort(f64(a), axis=axis, kind="stable"), np.argsort(a, axis=axis,
                                                                         kind="stable"))
    z = np.array([1 + 2j, 1 - 1j, -3 + 0j, 1 + 2j])
    same(tnp.sort(tg.Tensor(z)), np.sort(z))
    same(tnp.argsort(tg.Tensor(z), stable=True), np.argsort(z, kind="stable"))
    same(tnp.argsort(f64(3.0)), np.argsort(np.float64(3.0)))  # a 0-d input counts as 1-D
    same(tnp.sort(tg.Tensor(np.zeros((0, 3)))), np.zeros((0, 3)))


def test_sort_gradient_goes_through_the_permutation():
    x = f64([3.0, 1.0, 2.0])
    g = tg.grad(lambda v: (tnp.sort(v) * f64([1.0, 10.0, 100.0])).sum())(x)
    np.testing.assert_array_equal(g.numpy(), [100.0, 1.0, 10.0])
    check_grads(lambda v: tnp.sort(v, axis=0) ** 2, (f64([[3.0, -1.0], [0.5, 2.0]]),),
                order=2, modes=("rev", "fwd"))


def test_sort_gradient_against_torch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(0).normal(size=(3, 5))
    w = np.random.default_rng(1).normal(size=(3, 5))
    g = tg.grad(lambda v: (tnp.sort(v, axis=1) * f64(w)).sum())(f64(a)).numpy()
    t = torch.tensor(a, requires_grad=True)
    (torch.sort(t, dim=1).values * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(g, t.grad.numpy())


def test_partition_places_kth_and_differentiates():
    a = np.array([7.0, 1.0, 5.0, 3.0, 9.0, 2.0])
    p = tnp.partition(f64(a), [1, 4]).numpy()
    want = np.partition(a, [1, 4])
    np.testing.assert_array_equal(p[[1, 4]], want[[1, 4]])
    assert (p[:1] <= p[1]).all() and (p[2:4] >= p[1]).all() and (p[5:] >= p[4]).all()
    g = tg.grad(lambda v: tnp.partition(v, 2)[2])(f64(a)).numpy()
    np.testing.assert_array_equal(g, a == np.sort(a)[2])
    idx = tnp.argpartition(f64(a), -1)
    assert idx.dtype == np.intp and int(idx[-1]) == 4


def test_sort_errors_name_the_function():
    with pytest.raises(ValueError, match="sort: axis -1 is out of range for a Tensor with ndim 0"):
        tnp.sort(f64(3.0))
    with pytest.raises(ValueError, match="argsort: kind must be one of"):
        tnp.argsort(f64([1.0]), kind="bogo")
    with pytest.raises(ValueError, match="argsort: give either kind or stable"):
        tnp.argsort(f64([1.0]), kind="stable", stable=True)
    with pytest.raises(TypeError, match="sort: order= sorts structured arrays"):
        tnp.sort(f64([1.0]), order="x")
    with pytest.raises(ValueError, match=r"argpartition: kth=5 is out of bounds for axis 0 of "
                                         r"size 3"):
        tnp.argpartition(f64([1.0, 2.0, 3.0]), 5)
    with pytest.raises(ValueError, match="argpartition: kind must be 'introselect'"):
        tnp.partition(f64([1.0]), 0, kind="quick")
    with pytest.raises(TypeError, match="argpartition: kth must be integers"):
        tnp.partition(f64([1.0]), 0.5)


def test_lexsort_keys_forms_and_errors():
    first, last = np.array([2, 5, 1, 5]), np.array([1, 0, 1, 0])
    same(tnp.lexsort((tg.Tensor(first), tg.Tensor(last))), np.lexsort((first, last)))
    same(tnp.lexsort(tg.Tensor(np.stack([first, last]))), np.lexsort(np.stack([first, last])))
    same(tnp.lexsort([first, last]), np.lexsort([first, last]))
    with pytest.raises(TypeError, match="lexsort: need a sequence of at least one key"):
        tnp.lexsort([])
    with pytest.raises(ValueError, match=r"lexsort: all keys need the same shape, got \(2,\), "
                                         r"\(3,\)"):
        tnp.lexsort([[1, 2], [1, 2, 3]])


# -- searchsorted, digitize -------------------------------------------------------------------
def test_searchsorted_compares_as_numpy_in_the_common_dtype():
    a = np.array([0.1, 0.5, 0.5, 2.0], dtype=np.float32)
    for v in (0.1, [0.1, 0.5, 3.0], np.float32(0.1), np.nan):
        for side in ("left", "right"):
            same(tnp.searchsorted(tg.Tensor(a), v, side=side), np.searchsorted(a, v, side=side))
    order = np.array([2, 0, 3, 1])
    b = np.array([5.0, 1.0, 3.0, 2.0])
    same(tnp.searchsorted(f64(b), [2.5], sorter=order), np.searchsorted(b, [2.5], sorter=order))
    with pytest.raises(ValueError, match=r"searchsorted: a must be 1-D, got shape \(2, 2\)"):
        tnp.searchsorted(f64(np.zeros((2, 2))), 1.0)
    with pytest.raises(ValueError, match="searchsorted: side must be 'left' or 'right'"):
        tnp.searchsorted(f64([1.0]), 1.0, side="middle")
    with pytest.raises(ValueError, match="searchsorted: sorter must have a's shape"):
        tnp.searchsorted(f64([1.0, 2.0]), 1.0, sorter=[0])


def test_searchsorted_and_digitize_have_zero_gradient():
    x = f64([0.2, 1.7])
    g = tg.grad(lambda v: (tnp.searchsorted(f64([0.0, 1.0, 2.0]), v) * v).sum())(x)
    np.testing.assert_array_equal(g.numpy(), [1.0, 2.0])  # the index is a constant factor
    assert tnp.digitize(x, f64([0.0, 1.0])).dtype == np.intp


def test_digitize_monotonic_bins_and_errors():
    x = np.array([-1.0, 0.0, 0.5, 1.0, 2.5, 3.0])
    for bins in ([0.0, 1.0, 2.5], [2.5, 1.0, 0.0], [1.0], [0.0, 1.0, 1.0, 2.0]):
        for right in (False, True):
            same(tnp.digitize(f64(x), bins, right=right), np.digitize(x, bins, right=right))
    with pytest.raises(ValueError, match="digitize: bins must be monotonically increasing or "
                                         "decreasing"):
        tnp.digitize(f64(x), [0.0, 2.0, 1.0])
    with pytest.raises(TypeError, match="digitize: x may not be complex"):
        tnp.digitize(tg.Tensor([1j]), [0.0, 1.0])
    with pytest.raises(ValueError, match=r"digitize: bins must be 1-D, got shape \(1, 2\)"):
        tnp.digitize(f64(x), [[0.0, 1.0]])


# -- unique -----------------------------------------------------------------------------------
def test_unique_outputs_match_numpy():
    a = np.array([[2.0, np.nan, 1.0], [2.0, np.nan, -0.0]])
    flags = dict(return_index=True, return_inverse=True, return_counts=True)
    for equal_nan in (True, False):
        got = tnp.unique(f64(a), equal_nan=equal_nan, **flags)
        want = np.unique(a, equal_nan=equal_nan, **flags)
        for g, w in zip(got, want):
            same(g, w)
    rows = np.array([[1, 2], [3, 4], [1, 2]])
    for g, w in zip(tnp.unique(tg.Tensor(rows), axis=0, **flags),
                    np.unique(rows, axis=0, **flags)):
        same(g, w)
    assert tnp.unique(f64(5.0), return_inverse=True)[1].shape == ()
    same(tnp.unique(tg.Tensor(np.zeros(0))), np.zeros(0))


def test_unique_array_api_forms():
    x = np.array([3.0, 1.0, np.nan, 3.0, np.nan])
    same(tnp.unique_values(f64(x)), np.sort(np.unique_values(x)))
    for got, want in ((tnp.unique_counts(f64(x)), np.unique_counts(x)),
                      (tnp.unique_inverse(f64(x)), np.unique_inverse(x)),
                      (tnp.unique_all(f64(x)), np.unique_all(x))):
        assert got._fields == want._fields
        for g, w in zip(got, want):
            same(g, w)


def test_unique_differentiates_at_the_first_occurrence():
    x = f64([2.0, 1.0, 2.0, 3.0])
    g = tg.grad(lambda v: (tnp.unique(v) * f64([1.0, 10.0, 100.0])).sum())(x)
    np.testing.assert_array_equal(g.numpy(), [10.0, 1.0, 0.0, 100.0])
    # away from ties unique is a permutation, smooth in the values
    check_grads(lambda v: tnp.unique(v) ** 2, (f64([2.0, 1.0, 3.5]),), order=2,
                modes=("rev", "fwd"))


# -- nonzero, argwhere, where(cond) -----------------------------------------------------------
def test_nonzero_forms():
    a = np.array([[0.0, 2.0], [-1.0, 0.0]])
    for g, w in zip(tnp.nonzero(f64(a)), np.nonzero(a)):
        same(g, w)
    for g, w in zip(tnp.where(f64(a) > 0), np.where(a > 0)):
        same(g, w)
    for g, w in zip(f64(a).nonzero(), a.nonzero()):
        same(g, w)
    same(tnp.flatnonzero(f64(a)), np.flatnonzero(a))
    same(tnp.argwhere(f64(a)), np.argwhere(a))
    same(tnp.argwhere(f64(0.0)), np.argwhere(np.float64(0.0)))
    same(tnp.argwhere(f64(1.0)), np.argwhere(np.float64(1.0)))
    with pytest.raises(ValueError, match="nonzero: calling nonzero on a 0-d Tensor is not "
                                         "allowed"):
        tnp.nonzero(f64(1.0))
    with pytest.raises(TypeError, match=r"where: give both x and y \(or neither"):
        tnp.where(f64(a) > 0, 1.0)


def test_nonzero_indices_gather_differentiably():
    x = f64([0.0, 2.0, 0.0, 3.0])
    g = tg.grad(lambda v: (v[tnp.nonzero(v)] ** 2).sum())(x)
    np.testing.assert_array_equal(g.numpy(), [0.0, 4.0, 0.0, 6.0])


# -- selection --------------------------------------------------------------------------------
def test_select_dtype_rules_and_gradient():
    x = np.arange(6)
    same(tnp.select([tg.Tensor(x) < 3, tg.Tensor(x) > 3], [-x, x ** 2], 42),
         np.select([x < 3, x > 3], [-x, x ** 2], 42))
    x32 = x.astype(np.float32)
    got = tnp.select([tg.Tensor(x32) > 2], [tg.Tensor(x32)], 0.5)
    same(got, np.select([x32 > 2], [x32], 0.5))  # float32 stays float32 (NEP 50)
    v = f64([-1.0, 0.5, 2.0])
    g = tg.grad(lambda v: tnp.select([v < 0, v > 1], [v * 2.0, v ** 2], v * 5.0).sum())(v)
    np.testing.assert_array_equal(g.numpy(), [2.0, 5.0, 4.0])
    with pytest.raises(ValueError, match=r"select: condlist \(1\) and choicelist \(2\)"):
        tnp.select([v > 0], [v, v])
    with pytest.raises(ValueError, match="select: needs at least one condition"):
        tnp.select([], [])
    with pytest.raises(TypeError, match=r"select: condlist\[0\] must be boolean, got dtype "
                                        "float64"):
        tnp.select([v], [v])


def test_piecewise_evaluates_each_branch_on_its_piece_only():
    x = f64([-4.0, -1.0, 1.0, 4.0])
    seen = []

    def root(v):
        seen.append(v.shape)
        return tnp.sqrt(v)

    y = tnp.piecewise(x, [x < 0, x >= 0], [lambda v: -v, root])
    np.testing.assert_array_equal(y.numpy(), [4.0, 1.0, 1.0, 2.0])
    assert seen == [(2,)]
    g = tg.grad(lambda v: tnp.piecewise(v, [v < 0, v >= 0], [lambda u: -u, tnp.sqrt]).sum())(x)
    np.testing.assert_allclose(g.numpy(), [-1.0, -1.0, 0.5, 0.25])  # no NaN from sqrt(-4)
    xs = np.linspace(-2.5, 2.5, 6)
    same(tnp.piecewise(f64(xs), [f64(xs) < 0], [-1.0, 1.0]),
         np.piecewise(xs, [xs < 0], [-1.0, 1.0]))
    # later conditions win, as NumPy's assignments
    same(tnp.piecewise(f64(xs), [f64(xs) < 1, f64(xs) > -1], [1.0, 2.0]),
         np.piecewise(xs, [xs < 1, xs > -1], [1.0, 2.0]))
    with pytest.raises(ValueError, match=r"piecewise: with 2 condition\(s\), either 2 or 3 "
                                         "functions are expected, got 1"):
        tnp.piecewise(x, [x < 0, x >= 0], [1.0])


def test_choose_modes_gradient_and_errors():
    choices = [np.arange(4.0), 10 * np.arange(4.0), 100 * np.arange(4.0)]
    a = np.array([0, 2, 1, 2])
    tc = [f64(c) for c in choices]
    same(tnp.choose(tg.Tensor(a), tc), np.choose(a, choices))
    same(tnp.choose(tg.Tensor(a + 2), tc, mode="wrap"), np.choose(a + 2, choices, mode="wrap"))
    same(tnp.choose(tg.Tensor(a - 1), tc, mode="clip"), np.choose(a - 1, choices, mode="clip"))
    g = tg.grad(lambda c: tnp.choose(a, [c, 2.0 * c, 3.0 * c]).sum())(f64(np.ones(4)))
    np.testing.assert_array_equal(g.numpy(), [1.0, 3.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"choose: invalid entry in the choice array: every "
                                         r"entry must be in \[0, 3\)"):
        tnp.choose(tg.Tensor(a - 1), tc)
    with pytest.raises(TypeError, match="choose: a must hold integer choice numbers"):
        tnp.choose(f64([0.0]), tc)
    with pytest.raises(TypeError, match="choose: out= is not supported"):
        tnp.choose(a, tc, out=f64(np.zeros(4)))
    with pytest.raises(IndexError):  # traced negatives are sent out of range
        tg.jit(lambda i: tnp.choose(i, tc))(tg.Tensor(a - 1))


def test_compress_and_extract():
    a = np.arange(12.0).reshape(3, 4)
    same(tnp.compress([False, True, True], f64(a), axis=0),
         np.compress([False, True, True], a, axis=0))
    same(tnp.compress([True, False], f64(a), axis=1), np.compress([True, False], a, axis=1))
    same(tnp.compress([0, 1], f64(a)), np.compress([0, 1], a))
    same(tnp.extract(f64(a) > 5, f64(a)), np.extract(a > 5, a))
    with pytest.raises(IndexError, match="compress: index 3 is out of bounds for axis 0 with "
                                         "size 3"):
        tnp.compress([False, False, False, True], f64(a), axis=0)
    with pytest.raises(ValueError, match=r"compress: condition must be 1-D, got shape \(1, 1\)"):
        tnp.compress([[True]], f64(a))
    g = tg.grad(lambda v: (tnp.extract(v > 5, v) ** 2).sum())(f64(a)).numpy()
    np.testing.assert_array_equal(g, np.where(a > 5, 2 * a, 0.0))


# -- bincount, histogram ----------------------------------------------------------------------
def test_bincount_values_dtypes_and_gradient():
    x = np.array([0, 1, 1, 3, 5])
    w = np.array([0.5, 1.0, 2.0, 4.0, 8.0])
    same(tnp.bincount(tg.Tensor(x)), np.bincount(x))
    same(tnp.bincount(tg.Tensor(x), f64(w), minlength=8), np.bincount(x, w, minlength=8))
    same(tnp.bincount(tg.Tensor(x), tg.Tensor(x)), np.bincount(x, x))  # int weights: float64
    assert tnp.bincount(x, tg.Tensor(w.astype(np.float32))).dtype == np.float32
    same(tnp.bincount(tg.Tensor(np.zeros(0, np.int64))), np.bincount(np.zeros(0, np.int64)))
    z = tg.Tensor(w + 1j * w)
    np.testing.assert_allclose(tnp.bincount(x, z).numpy(), np.bincount(x, w) * (1 + 1j))
    check_grads(lambda v: tnp.bincount(x, v) ** 2, (f64(w),), order=2, modes=("rev", "fwd"))
    check_grads(lambda v: tnp.bincount(x, v) ** 2, (z,), order=2, modes=("rev", "fwd"))


def test_bincount_errors():
    with pytest.raises(ValueError, match="bincount: x must hold non-negative integers, got a "
                                         "negative value"):
        tnp.bincount([0, -1])
    with pytest.raises(TypeError, match="bincount: x must hold non-negative integers, got "
                                        "dtype float64"):
        tnp.bincount(np.array([1.0]))
    with pytest.raises(ValueError, match=r"bincount: x must be 1-D, got shape \(1, 1\)"):
        tnp.bincount([[1]])
    with pytest.raises(ValueError, match=r"bincount: weights \(shape \(1,\)\) must have x's "
                                         r"shape \(2,\)"):
        tnp.bincount([0, 1], f64([1.0]))
    with pytest.raises(ValueError, match="bincount: minlength must be non-negative"):
        tnp.bincount([0], minlength=-1)


def test_histogram_matches_numpy_edges_and_counts():
    rng = np.random.default_rng(0)
    d = rng.normal(size=40)
    w = rng.uniform(size=40)
    for kw in (dict(), dict(bins=7), dict(bins=4, range=(-1, 1)), dict(bins=[-2.0, 0.0, 0.5, 3.0]),
               dict(bins=5, density=True), dict(bins="auto"), dict(bins=3, weights=w),
               dict(bins=[-1.0, 0.0, 1.0], weights=w, density=True)):
        tkw = {k: (f64(v) if k == "weights" else v) for k, v in kw.items()}
        got, want = tnp.histogram(f64(d), **tkw), np.histogram(d, **kw)
        if "weights" in kw:
            np.testing.assert_allclose(got[0].numpy(), want[0], rtol=1e-12)
            same(got[1], want[1])
        else:
            same(got[0], want[0])
            same(got[1], want[1])
    d32 = d.astype(np.float32)
    for kw in (dict(bins=6), dict(bins=6, range=(-1.3, 2.1))):
        got, want = tnp.histogram(tg.Tensor(d32), **kw), np.histogram(d32, **kw)
        same(got[0], want[0])
        same(got[1], want[1])
    ints = np.array([1, 1, 4, 9])
    same(tnp.histogram(tg.Tensor(ints), bins=3)[1], np.histogram(ints, bins=3)[1])
    same(tnp.histogram(f64(np.ones(3)), bins=2)[1], np.histogram(np.ones(3), bins=2)[1])
    same(tnp.histogram_bin_edges(f64(d), bins=4), np.histogram_bin_edges(d, bins=4))


def test_histogram_gradients():
    a = f64([0.5, 1.5, 1.7, 3.0])
    g = tg.grad(lambda w: tnp.histogram(a, 3, (0, 3), weights=w)[0][1])(f64(np.ones(4)))
    np.testing.assert_array_equal(g.numpy(), [0.0, 1.0, 1.0, 0.0])
    x = f64([0.3, 1.1, 2.4, 2.9, 1.7])
    check_grads(lambda v: tnp.histogram(v, bins=3, density=True)[0], (x,), order=2,
                modes=("rev", "fwd"))  # through min(v) and max(v)
    check_grads(lambda v: tnp.histogram(v, bins=3)[1], (x,), order=2, modes=("rev", "fwd"))


def test_histogram_errors():
    x = f64([0.0, 1.0])
    with pytest.raises(ValueError, match="histogram: bins must be positive"):
        tnp.histogram(x, bins=0)
    with pytest.raises(ValueError, match=r"histogram: max must be larger than min in range"):
        tnp.histogram(x, range=(1, 0))
    with pytest.raises(ValueError, match=r"histogram: supplied range of \[0, inf\] is not finite"):
        tnp.histogram(x, range=(0, np.inf))
    with pytest.raises(ValueError, match=r"histogram: autodetected range of \[0.0, inf\] is not "
                                         "finite"):
        tnp.histogram(f64([0.0, np.inf]))
    with pytest.raises(ValueError, match="histogram: bins must increase monotonically"):
        tnp.histogram(x, bins=[0.0, 2.0, 1.0])
    with pytest.raises(ValueError, match=r"histogram: weights \(shape \(3,\)\) must have a's "
                                         r"shape \(2,\)"):
        tnp.histogram(x, weights=f64([1.0, 1.0, 1.0]))
    with pytest.raises(TypeError, match="histogram: bins='auto' estimates the number of bins"):
        tg.grad(lambda v: tnp.histogram(v, bins="auto", density=True)[0].sum())(x)
    with pytest.raises(TypeError, match="histogram: bins must be an integer, a string or an "
                                        "array"):
        tnp.histogram(x, bins=1.5)


# -- sets -------------------------------------------------------------------------------------
def test_set_operations_match_numpy():
    a1 = np.array([1.0, 3.0, 4.0, 3.0, np.nan, 5.0])
    a2 = np.array([3.0, 1.0, 2.0, 1.0, np.nan])
    same(tnp.isin(f64(a1), a2), np.isin(a1, a2))
    same(tnp.isin(f64(a1), a2, invert=True), np.isin(a1, a2, invert=True))
    same(tnp.isin(2, f64(a2)), np.isin(2, a2))
    for got, want in zip(tnp.intersect1d(f64(a1), f64(a2), return_indices=True),
                         np.intersect1d(a1, a2, return_indices=True)):
        same(got, want)
    u1, u2 = np.array([5.0, 4.0, 3.0]), np.array([3.0, 0.0, 5.0])
    for got, want in zip(tnp.intersect1d(f64(u1), f64(u2), assume_unique=True,
                                         return_indices=True),
                         np.intersect1d(u1, u2, assume_unique=True, return_indices=True)):
        same(got, want)
    same(tnp.intersect1d(tg.Tensor(a1.astype(np.float32)), f64(a2)),
         np.intersect1d(a1.astype(np.float32), a2))
    same(tnp.union1d(f64(a1), f64(a2)), np.union1d(a1, a2))
    same(tnp.setdiff1d(f64(a1), f64(a2)), np.setdiff1d(a1, a2))
    same(tnp.setdiff1d(f64(u1), f64(u2), assume_unique=True),
         np.setdiff1d(u1, u2, assume_unique=True))
    same(tnp.setxor1d(f64(a1), f64(a2)), np.setxor1d(a1, a2))
    same(tnp.setxor1d(f64([]), f64([])), np.setxor1d([], []))
    with pytest.raises(ValueError, match="isin: kind must be None, 'sort' or 'table'"):
        tnp.isin(f64(a1), a2, kind="hash")


def test_set_operation_gradients_gather_first_occurrences():
    a1, a2 = f64([3.0, 1.0, 3.0, 2.0]), f64([2.0, 5.0, 2.0])
    g1, g2 = tg.grad(lambda x, y: (tnp.union1d(x, y) ** 2).sum(), argnums=(0, 1))(a1, a2)
    np.testing.assert_array_equal(g1.numpy(), [6.0, 2.0, 0.0, 4.0])
    np.testing.assert_array_equal(g2.numpy(), [0.0, 10.0, 0.0])
    g1, g2 = tg.grad(lambda x, y: tnp.intersect1d(x, y).sum(), argnums=(0, 1))(a1, a2)
    np.testing.assert_array_equal(g1.numpy(), [0.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(g2.numpy(), [0.0, 0.0, 0.0])
    g = tg.grad(lambda x: tnp.setdiff1d(x, a2).sum())(a1)
    np.testing.assert_array_equal(g.numpy(), [1.0, 1.0, 0.0, 0.0])
    # away from ties the set operations are smooth in the values
    check_grads(lambda x, y: tnp.setxor1d(x, y) ** 2, (f64([3.0, 1.0]), f64([5.0, 7.5])),
                order=2, modes=("rev", "fwd"))


# -- vmap and jit ----------------------------------------------------------------------------
def test_vmap_of_value_dependent_sizes_needs_equal_sizes():
    equal = f64([[1.0, 0.0, 2.0], [0.0, 3.0, 4.0]])
    check_vmap(lambda v: tnp.nonzero(v), (equal,))
    check_vmap(lambda v: tnp.unique(v, return_counts=True), (f64([[1.0, 1.0, 2.0],
                                                                   [5.0, 4.0, 4.0]]),))
    check_vmap(lambda v: tnp.bincount(tnp.asarray([0, 2, 2]), v), (equal,))
    unequal = f64([[1.0, 0.0, 0.0], [0.0, 3.0, 4.0]])
    with pytest.raises(ValueError, match="nonzero under vmap: the examples have different "
                                         "numbers of nonzero elements"):
        tg.vmap(tnp.nonzero)(unequal)
    with pytest.raises(ValueError, match="different sizes"):
        tg.vmap(tnp.unique)(unequal)
    with pytest.raises(ValueError, match="different sizes"):
        tg.vmap(lambda i: tnp.bincount(i))(tg.Tensor(np.array([[0, 1], [0, 3]])))
    check_vmap(lambda i: tnp.bincount(i, minlength=4), (tg.Tensor(np.array([[0, 1], [0, 3]])),))


def test_vmap_has_a_rule_for_every_sorting_primitive():
    rng = np.random.default_rng(3)
    x = f64(rng.normal(size=(3, 5)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no per-example loop
        check_vmap(lambda v: tnp.argsort(v), (x,))
        check_vmap(lambda v: tnp.argpartition(v, 2), (x,))
        check_vmap(lambda v: tnp.lexsort([v, -v]), (x,))
        check_vmap(lambda v: tnp.searchsorted(tnp.sort(v), v[:2]), (x,))
        check_vmap(lambda v: tnp.searchsorted(f64([-1.0, 0.0, 1.0]), v), (x,))
        check_vmap(lambda v, s: tnp.isin(v, s), (x, x[:, :2]))
        check_vmap(lambda v: tnp.isin(v, f64([0.0])), (x,))
        check_vmap(tg.grad(lambda v: (tnp.sort(v) * tnp.arange(5.0)).sum()), (x,))
        check_vmap(tg.grad(lambda v: (tnp.bincount(tnp.asarray([0, 1, 1, 0, 3]), v) ** 2).sum()),
                   (x,))


def test_jit_recomputes_value_dependent_sizes():
    f = tg.jit(lambda v: (tnp.unique(v) ** 2).sum() + tnp.sort(v)[0] + tnp.nonzero(v)[0].sum())
    for vals in ([1.0, 2.0, 2.0, 0.0], [3.0, 3.0, 3.0, 3.0], [0.0, 5.0, 4.0, 1.0]):
        a = np.array(vals)
        want = (np.unique(a) ** 2).sum() + np.sort(a)[0] + np.nonzero(a)[0].sum()
        assert float(f(f64(a))) == want


def test_traced_kth_is_a_guarded_decision():
    f = tg.jit(lambda v, k: tnp.partition(v, k)[k])
    x = f64([4.0, 1.0, 3.0, 2.0])
    assert float(f(x, tg.Tensor(1))) == 2.0
    assert float(f(x, tg.Tensor(3))) == 4.0  # a new kth retraces (a guard), not a stale one
    with pytest.raises(TypeError, match="inside vmap"):
        tg.vmap(lambda k: tnp.partition(x, k))(tg.Tensor(np.array([0, 1])))
