"""Shape and indexing ops over hypothesis-drawn shapes (scalars, size-1 and size-0 axes where
NumPy allows them), axes and indices: the forward result equals NumPy's exactly (values and
dtype), and gradients match finite differences at orders 1 and 2 in float64.

Each entry of ``SPECS`` draws a case: ``spec(data, dtype) -> (arrays, f, ref)`` where ``f``
takes Tensors and ``ref`` takes the same values as NumPy arrays.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numpy.lib.stride_tricks import sliding_window_view

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads
from tapegrad.testing.strategies import floats_in, shapes

FLOATS = (np.float32, np.float64)


def _array(data, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        elements = floats_in(-3.0, 3.0, width=dtype.itemsize * 8)
    else:
        elements = st.integers(-5, 5)
    return data.draw(hnp.arrays(dtype, shape, elements=elements))


def _distinct(data, shape, dtype, offset=0.0):
    """Values with gaps of at least 0.5 (no ties: min/max are smooth there)."""
    n = int(np.prod(shape))
    perm = data.draw(st.permutations(list(range(n)))) if n else []
    return (np.asarray(perm, dtype=np.float64).reshape(shape) + offset).astype(dtype)


def _axis(data, ndim):
    return data.draw(st.integers(-ndim, ndim - 1))


# -- specs ------------------------------------------------------------------------------------
def spec_reshape(data, dtype):
    shape = data.draw(shapes())
    a = _array(data, shape, dtype)
    new = list(data.draw(st.permutations(shape)))
    if new and a.size and data.draw(st.booleans()):
        new[data.draw(st.integers(0, len(new) - 1))] = -1
    new = tuple(new)
    return [a], (lambda x: x.reshape(new)), (lambda a: a.reshape(new))


def spec_ravel(data, dtype):
    a = _array(data, data.draw(shapes()), dtype)
    return [a], tnp.ravel, np.ravel


def spec_squeeze(data, dtype):
    shape = data.draw(shapes(max_side=2))
    a = _array(data, shape, dtype)
    ones = [i for i, s in enumerate(shape) if s == 1]
    axis = None
    if ones:
        axis = data.draw(st.none() | st.lists(st.sampled_from(ones), unique=True).map(tuple))
    return [a], (lambda x: tnp.squeeze(x, axis)), (lambda a: np.squeeze(a, axis))


def spec_expand_dims(data, dtype):
    a = _array(data, data.draw(shapes()), dtype)
    axis = data.draw(st.integers(-(a.ndim + 1), a.ndim))
    return [a], (lambda x: tnp.expand_dims(x, axis)), (lambda a: np.expand_dims(a, axis))


def spec_transpose(data, dtype):
    a = _array(data, data.draw(shapes()), dtype)
    axes = data.draw(st.one_of(st.none(), st.permutations(range(a.ndim)).map(tuple)))
    return [a], (lambda x: tnp.transpose(x, axes)), (lambda a: np.transpose(a, axes))


def spec_swapaxes(data, dtype):
    a = _array(data, data.draw(shapes(min_dims=1)), dtype)
    i, j = _axis(data, a.ndim), _axis(data, a.ndim)
    return [a], (lambda x: tnp.swapaxes(x, i, j)), (lambda a: np.swapaxes(a, i, j))


def spec_moveaxis(data, dtype):
    a = _array(data, data.draw(shapes(min_dims=1)), dtype)
    k = data.draw(st.integers(1, a.ndim))
    src = data.draw(st.permutations(range(a.ndim)))[:k]
    dst = data.draw(st.permutations(range(-a.ndim, 0)))[:k]
    return [a], (lambda x: tnp.moveaxis(x, src, dst)), (lambda a: np.moveaxis(a, src, dst))


def spec_broadcast_to(data, dtype):
    shape = data.draw(shapes(max_side=3))
    a = _array(data, shape, dtype)
    lead = tuple(data.draw(st.lists(st.integers(0, 3), max_size=2)))
    grown = tuple(data.draw(st.integers(0, 3)) if s == 1 else s for s in shape)
    target = lead + grown
    return [a], (lambda x: tnp.broadcast_to(x, target)), (lambda a: np.broadcast_to(a, target))


def spec_concatenate(data, dtype):
    base = list(data.draw(shapes(min_dims=1)))
    ax = _axis(data, len(base))
    arrs = []
    for _ in range(data.draw(st.integers(1, 3))):
        s = list(base)
        s[ax] = data.draw(st.integers(0, 3))
        arrs.append(_array(data, tuple(s), dtype))
    return (
        arrs,
        lambda *xs: tnp.concatenate(xs, axis=ax),
        lambda *a: np.concatenate(a, axis=ax),
    )


def spec_stack(data, dtype):
    shape = data.draw(shapes())
    arrs = [_array(data, shape, dtype) for _ in range(data.draw(st.integers(1, 3)))]
    ax = data.draw(st.integers(-(len(shape) + 1), len(shape)))
    return arrs, (lambda *xs: tg.Tensor.stack(list(xs), axis=ax)), (lambda *a: np.stack(a, ax))


def spec_array_split(data, dtype):
    a = _array(data, data.draw(shapes(min_dims=1)), dtype)
    ax = _axis(data, a.ndim)
    n = a.shape[ax]
    how = data.draw(
        st.one_of(
            st.integers(1, 4),
            st.lists(st.integers(-n - 1, n + 1), max_size=3),
        )
    )
    return (
        [a],
        lambda x: tnp.array_split(x, how, axis=ax),
        lambda a: np.array_split(a, how, axis=ax),
    )


def spec_split(data, dtype):
    a = _array(data, data.draw(shapes(min_dims=1)), dtype)
    ax = _axis(data, a.ndim)
    n = a.shape[ax]
    k = data.draw(st.sampled_from([d for d in range(1, 5) if n % d == 0]))
    return [a], (lambda x: tnp.split(x, k, axis=ax)), (lambda a: np.split(a, k, axis=ax))


def spec_tile(data, dtype):
    a = _array(data, data.draw(shapes(max_side=3)), dtype)
    reps = tuple(data.draw(st.lists(st.integers(0, 3), max_size=3)))
    return [a], (lambda x: tnp.tile(x, reps)), (lambda a: np.tile(a, reps))


def spec_repeat(data, dtype):
    a = _array(data, data.draw(shapes()), dtype)
    axis = data.draw(st.none() | st.integers(-a.ndim, a.ndim - 1)) if a.ndim else None
    n = a.size if axis is None else a.shape[axis]
    reps = data.draw(st.integers(0, 3) | st.lists(st.integers(0, 3), min_size=n, max_size=n))
    return [a], (lambda x: tnp.repeat(x, reps, axis)), (lambda a: np.repeat(a, reps, axis))


def spec_flip(data, dtype):
    a = _array(data, data.draw(shapes()), dtype)
    choices = st.none()
    if a.ndim:
        choices = (
            choices
            | st.lists(st.integers(0, a.ndim - 1), unique=True).map(tuple)
            | st.integers(-a.ndim, a.ndim - 1)
        )
    axis = data.draw(choices)
    return [a], (lambda x: tnp.flip(x, axis)), (lambda a: np.flip(a, axis))


def spec_roll(data, dtype):
    a = _array(data, data.draw(shapes()), dtype)
    if a.ndim == 0 or data.draw(st.booleans()):
        shift = data.draw(st.integers(-7, 7))
        return [a], (lambda x: tnp.roll(x, shift)), (lambda a: np.roll(a, shift))
    axes = tuple(data.draw(st.lists(st.integers(-a.ndim, a.ndim - 1), min_size=1, max_size=3)))
    shift = tuple(data.draw(st.integers(-7, 7)) for _ in axes)
    return [a], (lambda x: x.roll(shift, axes)), (lambda a: np.roll(a, shift, axes))


def spec_pad(data, dtype):
    shape = data.draw(shapes())
    a = _array(data, shape, dtype)
    mode = data.draw(st.sampled_from(["constant", "edge", "reflect", "symmetric", "wrap"]))
    pw = tuple(
        (0, 0)
        if (mode != "constant" and s == 0)
        else (data.draw(st.integers(0, 4)), data.draw(st.integers(0, 4)))
        for s in shape
    ) or data.draw(st.integers(0, 2))  # a 0-d Tensor: NumPy takes an int
    if mode == "constant":
        cv = data.draw(st.sampled_from([0, 1.5, -2]))
        return (
            [a],
            lambda x: tnp.pad(x, pw, constant_values=cv),
            lambda a: np.pad(a, pw, constant_values=cv),
        )
    return [a], (lambda x: tnp.pad(x, pw, mode=mode)), (lambda a: np.pad(a, pw, mode=mode))


def spec_tril(data, dtype):
    a = _array(data, data.draw(shapes(min_dims=1)), dtype)
    k = data.draw(st.integers(-3, 3))
    if data.draw(st.booleans()):
        return [a], (lambda x: tnp.tril(x, k)), (lambda a: np.tril(a, k))
    return [a], (lambda x: x.triu(k)), (lambda a: np.triu(a, k))


def _diag_args(data, a):
    offset = data.draw(st.integers(-4, 4))
    a1 = _axis(data, a.ndim)
    a2 = data.draw(st.sampled_from([i for i in range(a.ndim) if i != a1 % a.ndim]))
    return offset, a1, a2


def spec_diagonal(data, dtype):
    a = _array(data, data.draw(shapes(min_dims=2)), dtype)
    o, a1, a2 = _diag_args(data, a)
    return [a], (lambda x: tnp.diagonal(x, o, a1, a2)), (lambda a: np.diagonal(a, o, a1, a2))


def spec_trace(data, dtype):
    a = _array(data, data.draw(shapes(min_dims=2)), dtype)
    o, a1, a2 = _diag_args(data, a)
    return [a], (lambda x: x.trace(o, a1, a2)), (lambda a: np.trace(a, o, a1, a2))


def _basic_index(data, shape):
    idx = []
    dims = list(shape)
    use_ellipsis = data.draw(st.booleans())
    while dims:
        kind = data.draw(st.sampled_from(["slice", "int", "none", "stop"]))
        if kind == "stop":
            break
        if kind == "none":
            idx.append(None)
            continue
        n = dims.pop(0)
        if kind == "int" and n:
            idx.append(data.draw(st.integers(-n, n - 1)))
        else:
            start = data.draw(st.none() | st.integers(-n - 1, n + 1))
            stop = data.draw(st.none() | st.integers(-n - 1, n + 1))
            step = data.draw(st.none() | st.sampled_from([-3, -2, -1, 1, 2, 3]))
            idx.append(slice(start, stop, step))
    if use_ellipsis:
        idx.append(Ellipsis)
        if data.draw(st.booleans()):
            idx.append(None)
    return tuple(idx)


def spec_getitem_basic(data, dtype):
    shape = data.draw(shapes())
    a = _array(data, shape, dtype)
    idx = _basic_index(data, shape)
    return [a], (lambda x: x[idx]), (lambda a: a[idx])


def spec_getitem_advanced(data, dtype):
    shape = data.draw(shapes(min_dims=1))
    a = _array(data, shape, dtype)
    idx = []
    for n in shape:
        kind = data.draw(st.sampled_from(["slice", "array", "mask"] if n else ["slice", "mask"]))
        if kind == "slice":
            idx.append(slice(None, None, data.draw(st.sampled_from([1, -1, 2]))))
        elif kind == "array":  # repeated indices included
            idx.append(np.asarray(data.draw(st.lists(st.integers(-n, n - 1), max_size=4)), int))
        else:
            idx.append(np.asarray(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool))
    n_adv = sum(isinstance(i, np.ndarray) for i in idx)
    if n_adv > 1:  # advanced indices must broadcast together: use 1-element or equal lengths
        ints = [i for i in idx if isinstance(i, np.ndarray) and i.dtype != bool]
        m = min((len(i) for i in ints), default=0)
        idx = [i[:m] if isinstance(i, np.ndarray) and i.dtype != bool else i for i in idx]
        masks = [i for i in idx if isinstance(i, np.ndarray) and i.dtype == bool]
        if masks:
            idx = [slice(None) if isinstance(i, np.ndarray) and i.dtype == bool else i for i in idx]
    idx = tuple(idx)
    as_tensor = data.draw(st.booleans())
    tidx = tuple(tg.Tensor(i) if isinstance(i, np.ndarray) and as_tensor else i for i in idx)
    return [a], (lambda x: x[tidx]), (lambda a: a[idx])


def spec_take(data, dtype):
    a = _array(data, data.draw(shapes(min_side=1)), dtype)
    axis = data.draw(st.none() | st.integers(-a.ndim, a.ndim - 1)) if a.ndim else None
    n = a.size if axis is None else a.shape[axis]
    ind = data.draw(st.integers(-n, n - 1) | st.lists(st.integers(-n, n - 1), max_size=4))
    return [a], (lambda x: x.take(ind, axis)), (lambda a: np.take(a, ind, axis))


def spec_take_along_axis(data, dtype):
    a = _array(data, data.draw(shapes(min_dims=1, min_side=1)), dtype)
    ax = _axis(data, a.ndim)
    ishape = tuple(
        data.draw(st.integers(0, 4)) if i == ax % a.ndim else data.draw(st.sampled_from([1, s]))
        for i, s in enumerate(a.shape)
    )
    n = a.shape[ax]
    ind = data.draw(hnp.arrays(np.int64, ishape, elements=st.integers(-n, n - 1)))
    return (
        [a],
        lambda x: tnp.take_along_axis(x, tg.Tensor(ind), ax),
        lambda a: np.take_along_axis(a, ind, ax),
    )


def spec_sliding_window_view(data, dtype):
    a = _array(data, data.draw(shapes(min_dims=1)), dtype)
    axes = data.draw(st.lists(st.integers(0, a.ndim - 1), min_size=1, max_size=2, unique=True))
    ws = tuple(data.draw(st.integers(0, a.shape[ax])) for ax in axes)
    return (
        [a],
        lambda x: tnp.sliding_window_view(x, ws, axes),
        lambda a: sliding_window_view(a, ws, axes),
    )


def spec_strided_windows(data, dtype):
    shape = data.draw(shapes(min_dims=2, max_dims=4, min_side=1))
    a = _array(data, shape, dtype)
    k = data.draw(st.integers(1, min(shape[-2:])))
    s = data.draw(st.integers(1, 3))
    nd = a.ndim

    def ref(a):
        w = sliding_window_view(a, (k, k), (nd - 2, nd - 1))[..., ::s, ::s, :, :]
        return np.transpose(w, (nd - 2, nd - 1, *range(nd - 2), nd, nd + 1))

    return [a], (lambda x: x.strided_windows(k, s)), ref


def _update_case(data, dtype, distinct=False):
    shape = data.draw(shapes(min_dims=1, min_side=1, max_side=4))
    n = shape[0]
    rows_shape = data.draw(shapes(min_dims=1, max_dims=2, max_side=3))
    rows = data.draw(hnp.arrays(np.int64, rows_shape, elements=st.integers(-n, n - 1)))
    basic = data.draw(st.booleans())
    idx = (slice(None, None, -1),) if basic else (rows,)
    sub = np.empty(shape)[idx].shape
    vshape = sub[data.draw(st.integers(0, len(sub))) :]  # v broadcasts over leading axes
    if distinct:
        x = _distinct(data, shape, dtype)
        v = _distinct(data, vshape, dtype, offset=0.5)
    else:
        x, v = _array(data, shape, dtype), _array(data, vshape, dtype)
    return x, v, idx


def _spec_update(method, np_at):
    def spec(data, dtype):
        x, v, idx = _update_case(data, dtype, distinct=method in ("min", "max"))

        def ref(x, v):
            out = x.copy()
            if np_at is None:
                out[idx] = v
            else:
                # Broadcast v to the indexed shape first: NumPy 2.x's ufunc.at reads an
                # implicitly broadcast v wrongly when the index array has two or more
                # dimensions (np.add.at(np.zeros(3), [[0, 1], [2, 0]], [10., 20.]) gives
                # [10, 20, garbage], not [30, 20, 10]). The library works around the same
                # NumPy defect in ops/movement.py:_ufunc_at; the reference must too.
                np_at(out, idx, np.broadcast_to(v, out[idx].shape))
            return out

        return [x, v], (lambda x, v: getattr(x.at[idx], method)(v)), ref

    spec.__name__ = f"spec_at_{method}"
    return spec


SPECS = {
    f.__name__[5:]: f
    for f in [
        spec_reshape,
        spec_ravel,
        spec_squeeze,
        spec_expand_dims,
        spec_transpose,
        spec_swapaxes,
        spec_moveaxis,
        spec_broadcast_to,
        spec_concatenate,
        spec_stack,
        spec_array_split,
        spec_split,
        spec_tile,
        spec_repeat,
        spec_flip,
        spec_roll,
        spec_pad,
        spec_tril,
        spec_diagonal,
        spec_trace,
        spec_getitem_basic,
        spec_getitem_advanced,
        spec_take,
        spec_take_along_axis,
        spec_sliding_window_view,
        spec_strided_windows,
        _spec_update("set", None),
        _spec_update("add", np.add.at),
        _spec_update("multiply", np.multiply.at),
        _spec_update("min", np.minimum.at),
        _spec_update("max", np.maximum.at),
    ]
}


def _leaves(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


@pytest.mark.parametrize("name", sorted(SPECS))
@given(data=st.data())
def test_forward_equals_numpy(name, data):
    dtype = data.draw(st.sampled_from([np.float32, np.float64, np.int32]))
    arrays, f, ref = SPECS[name](data, dtype)
    before = [a.copy() for a in arrays]
    got = _leaves(f(*[tg.Tensor(a) for a in arrays]))
    want = _leaves(ref(*arrays))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        np.testing.assert_array_equal(g.numpy(), w)
    for a, b in zip(arrays, before):  # the caller's arrays are never written
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", sorted(SPECS))
@given(data=st.data())
def test_grads_orders_1_and_2(name, data):
    arrays, f, _ = SPECS[name](data, np.float64)
    check_grads(f, [tg.Tensor(a) for a in arrays], order=2)


@given(data=st.data())
def test_repeated_index_add_accumulates(data):
    shape = data.draw(shapes(min_dims=1, min_side=1, max_side=4))
    n = shape[0]
    rows = np.asarray(data.draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=8)))
    x = _array(data, shape, np.float64)
    v = _array(data, (len(rows),) + shape[1:], np.float64)
    out = tg.Tensor(x).at[rows].add(tg.Tensor(v))
    expected = x.copy()
    for r, vr in zip(rows, v):  # the definition, one write at a time
        expected[r] += vr
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12, atol=1e-12)
    # gradient of a gather: each row gets its cotangent once per occurrence
    w = _array(data, (len(rows),) + shape[1:], np.float64)
    g = tg.grad(lambda t: (t[rows] * tg.Tensor(w)).sum())(tg.Tensor(x))
    expected_g = np.zeros(shape)
    for r, wr in zip(rows, w):
        expected_g[r] += wr
    np.testing.assert_allclose(g.numpy(), expected_g, rtol=1e-12, atol=1e-12)
    # gradient of .add with respect to v: the output cotangent gathered at each write
    gv = tg.grad(lambda u: (tg.Tensor(x).at[rows].add(u) * tg.Tensor(x)).sum())(tg.Tensor(v))
    np.testing.assert_allclose(gv.numpy(), x[rows], rtol=1e-12, atol=1e-12)


@given(data=st.data(), mode=st.sampled_from(["reflect", "symmetric", "wrap"]))
def test_pad_copy_modes_match_numpy_in_both_modes_of_differentiation(data, mode):
    # pads up to three times an axis's length (reflecting or wrapping again), size-1 axes,
    # empty axes left unpadded; forward and reverse mode to order 2
    shape = data.draw(shapes(max_side=3))
    a = _array(data, shape, np.float64)
    pw = tuple(
        (0, 0) if s == 0 else (data.draw(st.integers(0, 3 * s)), data.draw(st.integers(0, 3 * s)))
        for s in shape
    ) or data.draw(st.integers(0, 2))  # a 0-d Tensor: NumPy takes an int
    got = tnp.pad(tg.Tensor(a), pw, mode=mode)
    np.testing.assert_array_equal(got.numpy(), np.pad(a, pw, mode=mode))
    check_grads(lambda x: tnp.pad(x, pw, mode=mode), [tg.Tensor(a)], order=2, modes=("rev", "fwd"))
