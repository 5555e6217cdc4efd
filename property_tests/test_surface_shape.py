"""The construction and shape functions of tapegrad.numpy over hypothesis-drawn shapes (size-0
and size-1 axes, scalars where NumPy allows them), axes and positions: the forward result
equals NumPy's exactly (values and dtype, float32 and float64), gradients match finite
differences at orders 1 and 2 in both modes (float64, complex128 where marked), and ``vmap``
equals the per-example loop with no op falling back to it.

Each entry of ``SPECS`` draws a case: ``spec(data, dtype) -> (arrays, f, ref)`` where ``f``
takes Tensors and ``ref`` takes the same values as NumPy arrays.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads, check_vmap
from tapegrad.testing.strategies import floats_in, shapes


def _array(data, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        re = data.draw(hnp.arrays(np.float64, shape, elements=floats_in(-3.0, 3.0)))
        im = data.draw(hnp.arrays(np.float64, shape, elements=floats_in(-3.0, 3.0)))
        return re + 1j * im
    width = dtype.itemsize * 8
    return data.draw(hnp.arrays(dtype, shape, elements=floats_in(-3.0, 3.0, width=width)))


def _nonzero(data, shape, dtype):
    """Values with |v| >= 0.5 (never zero: trimming does not depend on them)."""
    a = _array(data, shape, dtype)
    return np.where(np.abs(a) < 0.5, 1.0, a).astype(dtype)


def _axis(data, ndim):
    return data.draw(st.integers(-ndim, ndim - 1))


def _leaves(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


# -- specs ------------------------------------------------------------------------------------
def spec_hstack(data, dtype):
    base = list(data.draw(shapes(min_dims=1, max_dims=3, max_side=3)))
    ax = 0 if len(base) == 1 else 1
    arrs = []
    for _ in range(data.draw(st.integers(1, 3))):
        s = list(base)
        s[ax] = data.draw(st.integers(0, 3))
        arrs.append(_array(data, tuple(s), dtype))
    return arrs, lambda *xs: tnp.hstack(xs), lambda *a: np.hstack(a)


def spec_vstack(data, dtype):
    base = list(data.draw(shapes(min_dims=1, max_dims=3, max_side=3)))
    arrs = []
    for _ in range(data.draw(st.integers(1, 3))):
        s = list(base)
        if len(s) > 1:
            s[0] = data.draw(st.integers(0, 3))
        arrs.append(_array(data, tuple(s), dtype))
    return arrs, lambda *xs: tnp.vstack(xs), lambda *a: np.vstack(a)


def spec_dstack(data, dtype):
    base = list(data.draw(shapes(min_dims=0, max_dims=3, max_side=3)))
    arrs = []
    for _ in range(data.draw(st.integers(1, 3))):
        s = list(base)
        if len(s) == 3:
            s[2] = data.draw(st.integers(0, 3))
        arrs.append(_array(data, tuple(s), dtype))
    return arrs, lambda *xs: tnp.dstack(xs), lambda *a: np.dstack(a)


def spec_column_stack(data, dtype):
    n = data.draw(st.integers(0, 3))
    arrs = [_array(data, data.draw(st.sampled_from([(n,), (n, data.draw(st.integers(0, 2)))])),
                   dtype) for _ in range(data.draw(st.integers(1, 3)))]
    return arrs, lambda *xs: tnp.column_stack(xs), lambda *a: np.column_stack(a)


def spec_block(data, dtype):
    m, r, p, q = (data.draw(st.integers(0, 2)) for _ in range(4))
    arrs = [_array(data, s, dtype) for s in ((m, p), (m, q), (r, p), (r, q))]
    return (arrs, lambda a, b, c, d: tnp.block([[a, b], [c, d]]),
            lambda a, b, c, d: np.block([[a, b], [c, d]]))


def spec_append(data, dtype):
    shape = data.draw(shapes(min_dims=1, max_side=3))
    axis = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1))
    other = list(shape)
    if axis is not None:
        other[axis] = data.draw(st.integers(0, 3))
    else:
        other = list(data.draw(shapes(max_side=3)))
    arrs = [_array(data, shape, dtype), _array(data, tuple(other), dtype)]
    return arrs, lambda x, v: tnp.append(x, v, axis), lambda x, v: np.append(x, v, axis)


def spec_splits(data, dtype):
    fn, ref, nd = data.draw(st.sampled_from([(tnp.hsplit, np.hsplit, 1), (tnp.vsplit, np.vsplit, 2),
                                             (tnp.dsplit, np.dsplit, 3)]))
    shape = data.draw(shapes(min_dims=nd, max_dims=3, max_side=4))
    ax = {1: 1 if len(shape) > 1 else 0, 2: 0, 3: 2}[nd]
    n = shape[ax]
    if data.draw(st.booleans()) and n:
        ios = data.draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
    else:
        ios = sorted(data.draw(st.lists(st.integers(0, n), max_size=3)))
    return [_array(data, shape, dtype)], lambda x: fn(x, ios), lambda x: ref(x, ios)


def spec_atleast(data, dtype):
    fn, ref = data.draw(st.sampled_from([(tnp.atleast_1d, np.atleast_1d),
                                         (tnp.atleast_2d, np.atleast_2d),
                                         (tnp.atleast_3d, np.atleast_3d)]))
    arrs = [_array(data, data.draw(shapes(max_side=3)), dtype)
            for _ in range(data.draw(st.integers(1, 2)))]
    return arrs, fn, ref


def spec_diag(data, dtype):
    shape = data.draw(shapes(min_dims=1, max_dims=2, max_side=4))
    k = data.draw(st.integers(-3, 3))
    return [_array(data, shape, dtype)], lambda x: tnp.diag(x, k), lambda x: np.diag(x, k)


def spec_diagflat(data, dtype):
    k = data.draw(st.integers(-2, 2))
    return ([_array(data, data.draw(shapes(max_side=3)), dtype)], lambda x: tnp.diagflat(x, k),
            lambda x: np.diagflat(x, k))


def spec_rot90(data, dtype):
    shape = data.draw(shapes(min_dims=2, max_side=3))
    a0 = data.draw(st.integers(-len(shape), len(shape) - 1))
    a1 = data.draw(st.integers(-len(shape), len(shape) - 1).filter(
        lambda v: v % len(shape) != a0 % len(shape)))
    k = data.draw(st.integers(-2, 5))
    return ([_array(data, shape, dtype)], lambda x: tnp.rot90(x, k, (a0, a1)),
            lambda x: np.rot90(x, k, (a0, a1)))


def spec_flips(data, dtype):
    fn, ref, nd = data.draw(st.sampled_from([(tnp.fliplr, np.fliplr, 2),
                                             (tnp.flipud, np.flipud, 1)]))
    return [_array(data, data.draw(shapes(min_dims=nd, max_side=3)), dtype)], fn, ref


def spec_rollaxis(data, dtype):
    shape = data.draw(shapes(min_dims=1, max_side=3))
    n = len(shape)
    axis, start = _axis(data, n), data.draw(st.integers(-n, n))
    return ([_array(data, shape, dtype)], lambda x: tnp.rollaxis(x, axis, start),
            lambda x: np.rollaxis(x, axis, start))


def spec_resize(data, dtype):
    new = data.draw(shapes(max_dims=2, max_side=5))
    return ([_array(data, data.draw(shapes(max_side=3)), dtype)], lambda x: tnp.resize(x, new),
            lambda x: np.resize(x, new))


def spec_trim_zeros(data, dtype):
    core = data.draw(shapes(min_dims=1, max_dims=2, min_side=1, max_side=3))
    pw = [(data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))) for _ in core]
    trim = data.draw(st.sampled_from(["fb", "f", "b"]))
    axis = data.draw(st.none() | st.integers(-len(core), len(core) - 1))
    return ([_nonzero(data, core, dtype)],
            lambda x: tnp.trim_zeros(tnp.pad(x, pw), trim, axis),
            lambda x: np.trim_zeros(np.pad(x, pw), trim, axis))


def spec_insert(data, dtype):
    shape = data.draw(shapes(min_dims=1, max_dims=2, max_side=3))
    axis = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1))
    n = int(np.prod(shape)) if axis is None else shape[axis]
    flat_shape = (n,) if axis is None else shape
    ax = 0 if axis is None else axis % len(shape)
    if data.draw(st.booleans()):
        obj = data.draw(st.integers(-n, n))
        k = data.draw(st.integers(1, 2))
        vshape = list(flat_shape)
        vshape[ax] = k
        vshape = tuple(vshape)
        if len(vshape) == 1:  # a 1-D block of k values
            values_shape = (k,)
        else:  # NumPy moves the first axis of values to the axis for a scalar obj
            values_shape = (k,) + tuple(s for i, s in enumerate(vshape) if i != ax)
    else:
        obj = data.draw(st.lists(st.integers(-n, n), max_size=3))
        vshape = list(flat_shape)
        vshape[ax] = len(obj)
        values_shape = tuple(vshape)
    arrs = [_array(data, shape, dtype), _array(data, values_shape, dtype)]
    return (arrs, lambda x, v: tnp.insert(x, obj, v, axis),
            lambda x, v: np.insert(x, obj, v, axis))


def spec_delete(data, dtype):
    shape = data.draw(shapes(min_dims=1, max_dims=2, max_side=4))
    axis = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1))
    n = int(np.prod(shape)) if axis is None else shape[axis]
    if n and data.draw(st.booleans()):
        obj = data.draw(st.integers(-n, n - 1))
    elif data.draw(st.booleans()):
        obj = slice(data.draw(st.integers(-4, 4)), data.draw(st.integers(-4, 4)),
                    data.draw(st.sampled_from([1, 2, -1])))
    else:
        obj = data.draw(st.lists(st.integers(-n, n - 1), max_size=3)) if n else []
    return ([_array(data, shape, dtype)], lambda x: tnp.delete(x, obj, axis),
            lambda x: np.delete(x, obj, axis))


def spec_r_(data, dtype):
    arrs = [_array(data, (data.draw(st.integers(0, 3)),), dtype) for _ in range(2)]
    k = data.draw(st.integers(0, 4))
    return (arrs, lambda a, b: tnp.r_[a, b, a],
            lambda a, b: np.r_[a, b, a]) if k else (arrs, lambda a, b: tnp.r_["0,2", a, a],
                                                     lambda a, b: np.r_["0,2", a, a])


def spec_c_(data, dtype):
    n = data.draw(st.integers(0, 3))
    arrs = [_array(data, (n,), dtype), _array(data, (n, data.draw(st.integers(0, 2))), dtype)]
    return arrs, lambda a, b: tnp.c_[a, b, a], lambda a, b: np.c_[a, b, a]


def spec_meshgrid(data, dtype):
    arrs = [_array(data, (data.draw(st.integers(0, 3)),), dtype)
            for _ in range(data.draw(st.integers(1, 3)))]
    indexing = data.draw(st.sampled_from(["xy", "ij"]))
    sparse = data.draw(st.booleans())
    return (arrs, lambda *xs: tnp.meshgrid(*xs, indexing=indexing, sparse=sparse),
            lambda *a: np.meshgrid(*a, indexing=indexing, sparse=sparse))


def spec_broadcast_arrays(data, dtype):
    shps = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=3, max_side=3)).input_shapes
    return ([_array(data, s, dtype) for s in shps], tnp.broadcast_arrays,
            lambda *a: np.broadcast_arrays(*a))


def spec_array_nested(data, dtype):
    shape = data.draw(shapes(max_dims=2, max_side=3))
    arrs = [_array(data, shape, dtype) for _ in range(3)]
    return (arrs, lambda a, b, c: tnp.array([[a, b], [c, a]]),
            lambda a, b, c: np.array([[a, b], [c, a]]))


def spec_tri_gather(data, dtype):
    n, m = data.draw(st.integers(0, 4)), data.draw(st.integers(0, 4))
    k = data.draw(st.integers(-2, 2))
    lower = data.draw(st.booleans())
    tfn, nfn = (tnp.tril_indices, np.tril_indices) if lower else (tnp.triu_indices,
                                                                 np.triu_indices)
    return ([_array(data, (n, m), dtype)], lambda x: x[tfn(n, k, m)],
            lambda x: x[nfn(n, k, m)])


def spec_ix_(data, dtype):
    shape = data.draw(shapes(min_dims=2, max_dims=2, min_side=1, max_side=4))
    rows = data.draw(st.lists(st.integers(0, shape[0] - 1), max_size=3))
    cols = data.draw(st.lists(st.booleans(), min_size=shape[1], max_size=shape[1]))
    return ([_array(data, shape, dtype)], lambda x: x[tnp.ix_(rows, cols)],
            lambda x: x[np.ix_(rows, cols)])


SPECS = {name[5:]: fn for name, fn in globals().items() if name.startswith("spec_")}
COMPLEX = ("block", "diag", "rot90", "insert", "array_nested", "r_", "meshgrid", "resize")


# -- properties -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(SPECS))
@given(data=st.data())
def test_forward_equals_numpy(name, data):
    dtype = data.draw(st.sampled_from([np.float32, np.float64]))
    arrays, f, ref = SPECS[name](data, dtype)
    before = [a.copy() for a in arrays]
    got = _leaves(f(*[tg.Tensor(a) for a in arrays]))
    want = _leaves(ref(*arrays))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape, (g.shape, w.shape)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        np.testing.assert_array_equal(g.numpy(), w)
    for a, b in zip(arrays, before):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", sorted(SPECS))
@settings(max_examples=10)
@given(data=st.data())
def test_grads_orders_1_and_2_both_modes(name, data):
    arrays, f, _ = SPECS[name](data, np.float64)
    check_grads(f, [tg.Tensor(a) for a in arrays], order=2, modes=("rev", "fwd"))


@pytest.mark.parametrize("name", COMPLEX)
@settings(max_examples=10)
@given(data=st.data())
def test_complex_grads(name, data):
    arrays, f, ref = SPECS[name](data, np.complex128)
    got = _leaves(f(*[tg.Tensor(a) for a in arrays]))
    for g, w in zip(got, _leaves(ref(*arrays))):
        np.testing.assert_array_equal(g.numpy(), np.asarray(w))
    check_grads(f, [tg.Tensor(a) for a in arrays], order=2, modes=("rev", "fwd"))


@pytest.mark.parametrize("name", sorted(SPECS))
@settings(max_examples=10)
@given(data=st.data(), b=st.integers(0, 3))
def test_vmap_equals_the_loop(name, data, b):
    arrays, f, _ = SPECS[name](data, np.float64)
    if not arrays:
        return
    batched = [np.stack([a] * b) if b else np.zeros((0,) + a.shape) for a in arrays]
    batched[0] = np.stack([_array(data, arrays[0].shape, np.float64) for _ in range(b)]) if b \
        else batched[0]
    if name == "trim_zeros":  # the nonzero pattern (hence the size) is the same per example
        batched[0] = np.where(np.abs(batched[0]) < 0.5, 1.0, batched[0])
    axes = tuple(0 if i == 0 or data.draw(st.booleans()) else None for i in range(len(arrays)))
    args = [tg.Tensor(x) if ax == 0 else tg.Tensor(a)
            for x, a, ax in zip(batched, arrays, axes)]
    check_vmap(f, tuple(args), in_axes=axes)
