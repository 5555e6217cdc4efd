"""Sorting, searching, counting, selection and set operations of tapegrad.numpy over
hypothesis-drawn shapes (size-0 and size-1 axes), values with ties, axes and positions: the
forward result equals NumPy's exactly (values, shapes and dtypes); the functions that return
values of their inputs have gradients that match finite differences at orders 1 and 2 in both
modes (drawn away from ties, where they are smooth); every primitive's batching rule equals
the per-example loop (``check_vmap``), batched and unbatched operands, batch sizes 0 to 3.
"""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads, check_vmap
from tapegrad.testing.strategies import floats_in, shapes

batch = st.integers(0, 3)


def _ties(data, shape, dtype=np.float64):
    """Small integer values (many ties), as floats of ``dtype`` (or ints)."""
    return data.draw(hnp.arrays(np.int64, shape, elements=st.integers(-3, 3))).astype(dtype)


def _distinct(data, shape, dtype=np.float64):
    """Values at least 0.5 apart (no ties: sorting is a smooth permutation there)."""
    n = int(np.prod(shape))
    perm = np.asarray(data.draw(st.permutations(list(range(n)))) if n else [], dtype=np.float64)
    jitter = data.draw(hnp.arrays(np.float64, (n,), elements=floats_in(0.0, 0.4)))
    return ((perm + jitter) * 0.7 - 1.0).reshape(shape).astype(dtype)


def _same(got, want):
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        g = g.numpy()
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_array_equal(g, w)


# -- forward: equal to NumPy ------------------------------------------------------------------
def case_sort(data, dtype):
    a = _ties(data, data.draw(shapes(min_dims=1, max_side=4)), dtype)
    axis = data.draw(st.none() | st.integers(-a.ndim, a.ndim - 1))
    return (lambda: tnp.sort(tg.Tensor(a), axis=axis, kind="stable"),
            lambda: np.sort(a, axis=axis, kind="stable"))


def case_argsort(data, dtype):
    a = _ties(data, data.draw(shapes(max_side=4)), dtype)
    axis = data.draw(st.none() | st.integers(-max(a.ndim, 1), max(a.ndim, 1) - 1))
    return (lambda: tnp.argsort(tg.Tensor(a), axis=axis, stable=True),
            lambda: np.argsort(a, axis=axis, kind="stable"))


def case_lexsort(data, dtype):
    shape = data.draw(shapes(min_dims=1, max_side=4))
    keys = [_ties(data, shape, dtype) for _ in range(data.draw(st.integers(1, 3)))]
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    return (lambda: tnp.lexsort([tg.Tensor(k) for k in keys], axis=axis),
            lambda: np.lexsort(keys, axis=axis))


def case_searchsorted(data, dtype):
    a = np.sort(_ties(data, (data.draw(st.integers(0, 5)),), dtype))
    v = _ties(data, data.draw(shapes(max_side=3)), dtype) + 0.5 * data.draw(st.integers(0, 1))
    side = data.draw(st.sampled_from(["left", "right"]))
    return (lambda: tnp.searchsorted(tg.Tensor(a), tg.Tensor(v), side=side),
            lambda: np.searchsorted(a, v, side=side))


def case_unique(data, dtype):
    a = _ties(data, data.draw(shapes(max_side=4)), dtype)
    if a.size and dtype != np.int64 and data.draw(st.booleans()):
        a.flat[0] = np.nan
    flags = dict(return_index=True, return_inverse=True, return_counts=True,
                 equal_nan=data.draw(st.booleans()))
    return lambda: tnp.unique(tg.Tensor(a), **flags), lambda: np.unique(a, **flags)


def case_unique_axis(data, dtype):
    shape = data.draw(shapes(min_dims=1, max_dims=3, max_side=3))
    a = data.draw(hnp.arrays(np.int64, shape, elements=st.integers(0, 1))).astype(dtype)
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
    flags = dict(return_index=True, return_inverse=True, return_counts=True)
    return (lambda: tnp.unique(tg.Tensor(a), axis=axis, **flags),
            lambda: np.unique(a, axis=axis, **flags))


def case_unique_all(data, dtype):
    a = _ties(data, data.draw(shapes(max_side=4)), dtype)
    return lambda: tuple(tnp.unique_all(tg.Tensor(a))), lambda: tuple(np.unique_all(a))


def case_nonzero(data, dtype):
    a = _ties(data, data.draw(shapes(min_dims=1, max_side=4)), dtype)
    fn = data.draw(st.sampled_from(["nonzero", "flatnonzero", "argwhere"]))
    return lambda: getattr(tnp, fn)(tg.Tensor(a)), lambda: getattr(np, fn)(a)


def case_bincount(data, dtype):
    x = data.draw(hnp.arrays(np.int64, (data.draw(st.integers(0, 6)),),
                             elements=st.integers(0, 5)))
    minlength = data.draw(st.integers(0, 8))
    if data.draw(st.booleans()):
        w = _ties(data, x.shape, dtype)
        return (lambda: tnp.bincount(tg.Tensor(x), tg.Tensor(w), minlength),
                lambda: np.bincount(x, w, minlength).astype(
                    w.dtype if w.dtype.kind == "f" else np.float64))
    return lambda: tnp.bincount(tg.Tensor(x), None, minlength), lambda: np.bincount(x, None,
                                                                                    minlength)


def case_isin(data, dtype):
    a = _ties(data, data.draw(shapes(max_side=4)), dtype)
    t = _ties(data, data.draw(shapes(max_side=3)), dtype)
    invert = data.draw(st.booleans())
    return (lambda: tnp.isin(tg.Tensor(a), tg.Tensor(t), invert=invert),
            lambda: np.isin(a, t, invert=invert))


def case_digitize(data, dtype):
    bins = np.unique(_ties(data, (data.draw(st.integers(1, 5)),), dtype))
    if data.draw(st.booleans()):
        bins = bins[::-1].copy()
    x = _ties(data, data.draw(shapes(max_side=4)), dtype) + 0.5 * data.draw(st.integers(0, 1))
    right = data.draw(st.booleans())
    return (lambda: tnp.digitize(tg.Tensor(x), tg.Tensor(bins), right=right),
            lambda: np.digitize(x, bins, right=right))


def case_histogram(data, dtype):
    a = _ties(data, data.draw(shapes(max_side=4)), dtype) * 0.7
    kind = data.draw(st.sampled_from(["int", "range", "edges"]))
    bins = data.draw(st.integers(1, 5))
    rng = None
    if kind == "range":
        lo = data.draw(st.integers(-3, 2))
        rng = (lo, lo + data.draw(st.integers(1, 3)))
    elif kind == "edges":
        bins = np.unique(_ties(data, (data.draw(st.integers(2, 5)),), dtype))
        if bins.size < 2:
            bins = np.array([0.0, 1.0], dtype)
    if kind == "int" and a.size and not np.isfinite(a).all():
        return lambda: (), lambda: ()
    return (lambda: tnp.histogram(tg.Tensor(a), bins, rng),
            lambda: np.histogram(a, bins, rng))


def case_select(data, dtype):
    shp = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=4, max_side=3)).input_shapes
    c1, c2 = (_ties(data, s, dtype) > 0 for s in shp[:2])
    x, y = _ties(data, shp[2], dtype), _ties(data, shp[3], dtype)
    return (lambda: tnp.select([tg.Tensor(c1), tg.Tensor(c2)], [tg.Tensor(x), tg.Tensor(y)], 7),
            lambda: np.select([c1, c2], [x, y], 7))


def case_choose(data, dtype):
    shp = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=3, max_side=3)).input_shapes
    a = data.draw(hnp.arrays(np.int64, shp[0], elements=st.integers(-2, 3)))
    choices = [_ties(data, shp[1], dtype), _ties(data, shp[2], dtype)]
    mode = data.draw(st.sampled_from(["wrap", "clip"]))
    return (lambda: tnp.choose(tg.Tensor(a), [tg.Tensor(c) for c in choices], mode=mode),
            lambda: np.choose(a, choices, mode=mode))


def case_compress(data, dtype):
    a = _ties(data, data.draw(shapes(min_dims=1, max_side=4)), dtype)
    axis = data.draw(st.none() | st.integers(-a.ndim, a.ndim - 1))
    n = a.size if axis is None else a.shape[axis]
    cond = data.draw(st.lists(st.booleans(), max_size=n))
    return (lambda: tnp.compress(cond, tg.Tensor(a), axis=axis),
            lambda: np.compress(cond, a, axis=axis))


def case_extract(data, dtype):
    a = _ties(data, data.draw(shapes(max_side=4)), dtype)
    return lambda: tnp.extract(tg.Tensor(a) > 0, tg.Tensor(a)), lambda: np.extract(a > 0, a)


def case_piecewise(data, dtype):
    a = _ties(data, data.draw(shapes(max_side=4)), dtype)
    funcs = [lambda v: v * 2, -1, lambda v: v * v]
    return (lambda: tnp.piecewise(tg.Tensor(a), [tg.Tensor(a) < 0, tg.Tensor(a) > 1], funcs),
            lambda: np.piecewise(a, [a < 0, a > 1], funcs))


def case_sets(data, dtype):
    a1 = _ties(data, data.draw(shapes(max_dims=2, max_side=4)), dtype)
    a2 = _ties(data, data.draw(shapes(max_dims=2, max_side=4)), dtype)
    name = data.draw(st.sampled_from(["intersect1d", "union1d", "setdiff1d", "setxor1d"]))
    kw = {"return_indices": True} if name == "intersect1d" and data.draw(st.booleans()) else {}
    return (lambda: getattr(tnp, name)(tg.Tensor(a1), tg.Tensor(a2), **kw),
            lambda: getattr(np, name)(a1, a2, **kw))


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


@pytest.mark.parametrize("name", sorted(CASES))
@given(data=st.data())
def test_forward_equals_numpy(name, data):
    dtype = data.draw(st.sampled_from([np.float64, np.float32, np.int64]))
    got, want = CASES[name](data, dtype)
    _same(got(), want())


@given(data=st.data(), dtype=st.sampled_from([np.float64, np.float32]))
def test_partition_places_the_kth_elements(data, dtype):
    a = _ties(data, data.draw(shapes(min_dims=1, min_side=1, max_side=5)), dtype)
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
    n = a.shape[axis]
    kth = data.draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=2, unique=True))
    got = tnp.partition(tg.Tensor(a), kth, axis=axis).numpy()
    assert got.dtype == a.dtype
    full = np.sort(a, axis=axis)
    for k in kth:
        np.testing.assert_array_equal(np.take(got, k, axis), np.take(full, k, axis))
    np.testing.assert_array_equal(np.sort(got, axis=axis), full)  # a permutation of a
    idx = tnp.argpartition(tg.Tensor(a), kth, axis=axis).numpy()
    np.testing.assert_array_equal(np.take_along_axis(a, idx, axis), got)


# -- gradients ---------------------------------------------------------------------------------
def grad_sort(data):
    a = _distinct(data, data.draw(shapes(min_dims=1, max_side=4)))
    axis = data.draw(st.none() | st.integers(-a.ndim, a.ndim - 1))
    return [a], lambda x: tnp.sort(x, axis=axis) ** 2


def grad_partition(data):
    a = _distinct(data, data.draw(shapes(min_dims=1, min_side=1, max_side=4)))
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
    k = data.draw(st.integers(0, a.shape[axis] - 1))
    return [a], lambda x: tnp.take(tnp.partition(x, k, axis=axis), k, axis=axis) ** 3


def grad_unique(data):
    a = _distinct(data, data.draw(shapes(max_side=4)))
    return [a], lambda x: tnp.unique(x) * tnp.sin(tnp.unique(x))


def grad_bincount(data):
    x = data.draw(hnp.arrays(np.int64, (data.draw(st.integers(0, 6)),),
                             elements=st.integers(0, 4)))
    w = _distinct(data, x.shape)
    return [w], lambda v: tnp.bincount(x, v, minlength=2) ** 2


def grad_histogram(data):
    a = _distinct(data, (data.draw(st.integers(1, 6)),)) + 0.05  # off the edges below
    w = _distinct(data, a.shape)
    density = data.draw(st.booleans())
    return [a, w], lambda x, v: tnp.histogram(tnp.stop_gradient(x), 4, (-1.0, 4.0),
                                              weights=v, density=density)[0] ** 2


def grad_histogram_edges(data):
    a = _distinct(data, (data.draw(st.integers(2, 6)),))
    # the counts jump where a value crosses an interior bin edge (a measure-zero set: with
    # no jitter, a = [-1, -0.3, 0.4, 1.1] lies exactly on the edges linspace(-1, 1.1, 4) and
    # the central difference saw -1785), so keep every value 0.01 away from them
    inner = np.linspace(a.min(), a.max(), 4)[1:-1]
    assume(np.all(np.abs(a[:, None] - inner[None, :]) > 1e-2))
    return [a], lambda x: (tnp.histogram(x, bins=3, density=True)[0], tnp.histogram(x, 3)[1])


def grad_select(data):
    shp = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_side=3)).input_shapes
    x, y = _distinct(data, shp[0]), _distinct(data, shp[1])
    return [x, y], lambda u, v: tnp.select([u > 0.3, v < 0.3], [u * v, v ** 2], u)


def grad_choose(data):
    shp = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=3, max_side=3)).input_shapes
    a = data.draw(hnp.arrays(np.int64, shp[0], elements=st.integers(0, 1)))
    return ([_distinct(data, shp[1]), _distinct(data, shp[2])],
            lambda u, v: tnp.choose(a, [u ** 2, tnp.sin(v)]))


def grad_piecewise(data):
    a = _distinct(data, data.draw(shapes(max_side=4)))
    return [a], lambda x: tnp.piecewise(x, [x < 0.5], [lambda v: v ** 3, tnp.exp])


def grad_compress_extract(data):
    a = _distinct(data, data.draw(shapes(min_dims=1, max_side=4)))
    cond = data.draw(st.lists(st.booleans(), max_size=a.shape[0]))
    return [a], lambda x: (tnp.compress(cond, x, axis=0) ** 2,
                           tnp.extract(x > 0.3, x) ** 2)


def grad_sets(data):
    a1 = _distinct(data, (data.draw(st.integers(0, 4)),))
    a2 = _distinct(data, (data.draw(st.integers(0, 4)),)) + 0.3 * 0.7  # never equal to a1's
    return [a1, a2], lambda u, v: (tnp.union1d(u, v) ** 2, tnp.setdiff1d(u, v) ** 3,
                                   tnp.setxor1d(u, v) * 2.0, tnp.intersect1d(u, u) ** 2)


GRADS = {name[5:]: fn for name, fn in globals().items() if name.startswith("grad_")}


@pytest.mark.parametrize("name", sorted(GRADS))
@settings(max_examples=10)
@given(data=st.data())
def test_grads_orders_1_and_2_both_modes(name, data):
    arrays, f = GRADS[name](data)
    check_grads(f, [tg.Tensor(a) for a in arrays], order=2, modes=("rev", "fwd"))


@settings(max_examples=10)
@given(data=st.data())
def test_complex_sort_unique_bincount_grads(data):
    n = data.draw(st.integers(1, 4))
    re = _distinct(data, (n,))
    z = re + 1j * data.draw(hnp.arrays(np.float64, (n,), elements=floats_in(-1.0, 1.0)))
    _same(tnp.sort(tg.Tensor(z)), np.sort(z))
    _same(tnp.unique(tg.Tensor(z)), np.unique(z))
    idx = np.arange(n) % 2
    check_grads(lambda v: (tnp.sort(v) ** 2, tnp.unique(v) * 1j, tnp.bincount(idx, v) ** 2),
                [tg.Tensor(z)], order=2, modes=("rev", "fwd"))


# -- batching rules ----------------------------------------------------------------------------
def _batched(data, make, b):
    return tg.Tensor(np.stack([make() for _ in range(b)]) if b else
                     np.zeros((0,) + np.shape(make())))


@settings(max_examples=10)
@given(data=st.data(), b=batch)
def test_vmap_sorting_primitives(data, b):
    shape = data.draw(shapes(min_dims=1, max_side=4))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = _batched(data, lambda: _ties(data, shape), b)
    check_vmap(lambda v: tnp.argsort(v, axis=axis, stable=True), (x,))
    check_vmap(lambda v: tnp.sort(v, axis=None, stable=True), (x,))
    check_vmap(lambda v: tnp.lexsort([v, -v, v * 0.0], axis=axis), (x,))
    if shape[axis]:
        k = data.draw(st.integers(0, shape[axis] - 1))
        check_vmap(lambda v: tnp.sort(tnp.argpartition(v, k, axis=axis), axis=axis), (x,))
        check_vmap(tg.grad(lambda v: (tnp.partition(v, k, axis=axis) ** 2).sum()), (x,))
    check_vmap(tg.grad(lambda v: (tnp.sort(v, axis=axis) * tnp.sin(v)).sum()), (x,))


@settings(max_examples=10)
@given(data=st.data(), b=batch, axes=st.sampled_from([(0, 0), (0, None), (None, 0)]),
       side=st.sampled_from(["left", "right"]))
def test_vmap_searchsorted_and_isin(data, b, axes, side):
    n = data.draw(st.integers(0, 4))
    vshape = data.draw(shapes(max_side=3))

    def sorted_a():
        return np.sort(_ties(data, (n,)))

    a = _batched(data, sorted_a, b) if axes[0] == 0 else tg.Tensor(sorted_a())
    v = _batched(data, lambda: _ties(data, vshape), b) if axes[1] == 0 else tg.Tensor(
        _ties(data, vshape))
    check_vmap(lambda s, w: tnp.searchsorted(s, w, side=side), (a, v), in_axes=axes)
    check_vmap(lambda s, w: tnp.isin(w, s, invert=side == "left"), (a, v), in_axes=axes)
    check_vmap(lambda s, w: tnp.digitize(w, tnp.asarray([-1.0, 0.5, 2.0])), (a, v),
               in_axes=axes)
    check_vmap(lambda s, w: tnp.searchsorted(tnp.sort(tnp.concatenate([s, w.reshape(-1)])), w),
               (a, v), in_axes=axes)


@settings(max_examples=10)
@given(data=st.data(), b=batch)
def test_vmap_value_dependent_sizes_with_equal_sizes(data, b):
    # the same multiset of values per example, permuted: equal numbers of distinct values and
    # of nonzero entries in every example. (For an empty batch a value-dependent size is the
    # one an all-zero example gives at that op; a composite of several such ops is checked on
    # non-empty batches only.)
    base = _ties(data, (data.draw(st.integers(1, 5)),))
    rows = [data.draw(st.permutations(list(base))) for _ in range(b)]
    x = tg.Tensor(np.asarray(rows, dtype=np.float64).reshape(b, base.size))
    check_vmap(lambda v: tnp.unique(v, return_index=True, return_inverse=True,
                                    return_counts=True), (x,))
    check_vmap(lambda v: tnp.nonzero(v), (x,))
    check_vmap(lambda v: tnp.nonzero(v.reshape(1, -1)), (x,))
    check_vmap(lambda v: tnp.argwhere(v), (x,))
    if b:
        check_vmap(lambda v: tnp.setxor1d(v, tnp.asarray([0.0, 9.0])), (x,))
    check_vmap(tg.grad(lambda v: (tnp.unique(v) ** 2).sum()), (x,))
    idx = tg.Tensor(np.abs(np.asarray(rows, dtype=np.int64)).reshape(b, base.size)
                     if b else np.zeros((0, base.size), np.int64))
    w = _batched(data, lambda: _distinct(data, (base.size,)), b)
    check_vmap(lambda i: tnp.bincount(i, minlength=4), (idx,))
    check_vmap(lambda i, u: tnp.bincount(i, u, minlength=4), (idx, w))
    check_vmap(lambda u: tnp.bincount(np.arange(base.size) % 2, u), (w,))
    check_vmap(lambda i: tnp.bincount(i, w[0] if b else None, minlength=4), (idx,))
    check_vmap(tg.grad(lambda u, i: (tnp.bincount(i, u, minlength=4) ** 2).sum()), (w, idx))
