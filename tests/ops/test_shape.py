"""Example tests for shape and indexing ops: the seeds' call forms, error messages, gradients
of specific cases (repeated indices, pad modes, .at updates), output_shape and tape replay."""

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import ops
from tapegrad.testing import check_grads


def f64(a):
    return tg.Tensor(np.asarray(a, dtype=np.float64))


def arange(*shape):
    return f64(np.arange(int(np.prod(shape))).reshape(shape))


# -- the seeds' call forms --------------------------------------------------------------------
def test_view_is_reshape_with_varargs():
    x = tg.Tensor(np.array([1, 2, 3, 4]))
    assert x.view(2, 2).shape == (2, 2)
    assert x.view((4, 1)).shape == (4, 1)
    assert x.view(-1, 2).shape == (2, 2)
    assert x.reshape(2, 2).dtype == x.dtype


def test_expand_keeps_minus_one_axes():
    x = tg.Tensor([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(x.expand(3, 3).numpy(), [[1, 2, 3]] * 3)
    y = arange(2, 1)
    assert y.expand(4, -1, 5).shape == (4, 2, 5)
    assert y.expand((2, 3)).shape == (2, 3)
    with pytest.raises(ValueError, match="expand: -1 is not allowed for a new leading axis"):
        y.expand(-1, 2, 3)
    with pytest.raises(ValueError, match=r"broadcast_to: cannot broadcast .* shape \(2, 1\) to "):
        y.expand(3, 3)


def test_permute_and_transpose_forms():
    x = arange(2, 3, 4)
    assert x.permute(1, 0, 2).shape == (3, 2, 4)
    assert x.permute((2, 0, 1)).shape == (4, 2, 3)
    assert x.transpose().shape == (4, 3, 2)  # NumPy: reverse
    assert x.transpose(0, 2).shape == (4, 3, 2)  # seeds/PyTorch: swap two dims
    assert x.transpose(dim0=1, dim1=2).shape == (2, 4, 3)
    assert x.transpose((1, 2, 0)).shape == (3, 4, 2)  # NumPy permutation as one tuple
    assert x.transpose(2, 1, 0).shape == (4, 3, 2)
    m = tg.Tensor([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(m.transpose(0, 1).numpy(), [[1, 3], [2, 4]])  # seeds' example
    np.testing.assert_array_equal(m.transpose((0, 1)).numpy(), m.numpy())  # NumPy identity
    np.testing.assert_array_equal(m.T.numpy(), [[1, 3], [2, 4]])
    with pytest.raises(ValueError, match=r"transpose: axes \(0, 0, 1\) do not match|repeated"):
        x.permute(0, 0, 1)
    with pytest.raises(
        ValueError, match=r"transpose: axes \(0, 1\) do not match a Tensor of shape"
    ):
        tnp.transpose(x, (0, 1))
    with pytest.raises(
        ValueError, match="swapaxes: axis1 3 is out of range for a Tensor with ndim 3"
    ):
        x.transpose(3, 0)


def test_static_stack_and_cat():
    t1, t2 = tg.Tensor([1.0, 2.0]), tg.Tensor([3.0, 4.0])
    np.testing.assert_array_equal(tg.Tensor.stack([t1, t2], axis=0).numpy(), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(tg.Tensor.stack([t1, t2], axis=1).numpy(), [[1, 3], [2, 4]])
    r1, r2 = tg.Tensor([[1.0, 2.0]]), tg.Tensor([[3.0, 4.0]])
    np.testing.assert_array_equal(tg.Tensor.cat([r1, r2], axis=0).numpy(), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(tg.Tensor.cat([r1, r2], axis=1).numpy(), [[1, 2, 3, 4]])


def test_roll_seeds_form():
    x = tg.Tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    np.testing.assert_array_equal(x.roll(shifts=2, dims=0).numpy(), [4, 5, 1, 2, 3])
    m = arange(2, 3)
    np.testing.assert_array_equal(m.roll(1).numpy(), np.roll(np.arange(6.0).reshape(2, 3), 1))
    np.testing.assert_array_equal(
        m.roll((1, 1), (0, 1)).numpy(), np.roll(m.numpy(), (1, 1), (0, 1))
    )
    with pytest.raises(ValueError, match="roll: axis 2 is out of range for a Tensor with ndim 2"):
        m.roll(1, 2)


def test_pad_seeds_forms():
    x = tg.Tensor([[1.0, 2.0], [3.0, 4.0]])
    p = x.pad(pad_width=1, mode="constant", constant_values=0)
    np.testing.assert_array_equal(p.numpy(), np.pad(x.numpy(), 1))
    # 2-tuple: (left, right) of the last axis only
    np.testing.assert_array_equal(x.pad((1, 2)).numpy(), np.pad(x.numpy(), ((0, 0), (1, 2))))
    # 4-tuple: (left, right, top, bottom): the last axis first, then the one before
    np.testing.assert_array_equal(x.pad((1, 0, 2, 3)).numpy(), np.pad(x.numpy(), ((2, 3), (1, 0))))
    # tuple of pairs: per axis, as NumPy
    np.testing.assert_array_equal(
        x.pad(((1, 0), (0, 2)), constant_values=7).numpy(),
        np.pad(x.numpy(), ((1, 0), (0, 2)), constant_values=7),
    )
    b = arange(2, 2, 3)
    np.testing.assert_array_equal(
        b.pad((1, 1, 0, 1), mode="edge").numpy(),
        np.pad(b.numpy(), ((0, 0), (0, 1), (1, 1)), mode="edge"),
    )
    with pytest.raises(ValueError, match="pad: a flat pad_width needs an even number"):
        x.pad((1, 2, 3))
    with pytest.raises(ValueError, match="at most 4 for ndim 2"):
        x.pad((1, 1, 1, 1, 1, 1))


def test_tnp_pad_uses_numpy_forms():
    x = arange(2, 3)
    # NumPy: a flat (before, after) pair applies to every axis (unlike Tensor.pad)
    np.testing.assert_array_equal(tnp.pad(x, (1, 2)).numpy(), np.pad(x.numpy(), (1, 2)))
    for mode in ("edge", "reflect", "symmetric", "wrap"):
        np.testing.assert_array_equal(
            tnp.pad(x, ((2, 5), (4, 1)), mode=mode).numpy(),
            np.pad(x.numpy(), ((2, 5), (4, 1)), mode=mode),
        )
    np.testing.assert_array_equal(
        tnp.pad(x, 1, mode="replicate").numpy(), np.pad(x.numpy(), 1, mode="edge")
    )
    np.testing.assert_array_equal(  # PyTorch's name for wrap
        tnp.pad(x, 1, mode="circular").numpy(), np.pad(x.numpy(), 1, mode="wrap")
    )
    with pytest.raises(ValueError, match="pad: pad widths must be >= 0"):
        tnp.pad(x, -1)
    for bad in ("mean", "linear_ramp", None):  # NumPy modes tapegrad does not have, and junk
        with pytest.raises(ValueError, match="pad: mode must be 'constant', 'edge'"):
            tnp.pad(x, 1, mode=bad)
    for mode in ("reflect", "symmetric", "wrap"):
        with pytest.raises(ValueError, match="pad: cannot pad the empty axis 0"):
            tnp.pad(f64(np.zeros((0, 2))), 1, mode=mode)
    with pytest.raises(ValueError, match="does not broadcast to one"):
        tnp.pad(x, (1, 2, 3))


def test_pad_wrap_and_symmetric_by_hand():
    x = f64([1.0, 2.0, 3.0])
    # wrap continues periodically; symmetric mirrors with the edge repeated
    np.testing.assert_array_equal(tnp.pad(x, 2, mode="wrap").numpy(), [2, 3, 1, 2, 3, 1, 2])
    np.testing.assert_array_equal(
        tnp.pad(x, 2, mode="symmetric").numpy(), [2, 1, 1, 2, 3, 3, 2]
    )
    # d(sum of out * w)/dx_i adds the weights of every output copying x_i
    w = f64(np.arange(1.0, 8.0))
    g = tg.grad(lambda x: (tnp.pad(x, 2, mode="wrap") * w).sum())(x)
    np.testing.assert_array_equal(g.numpy(), [3 + 6, 1 + 4 + 7, 2 + 5])
    g = tg.grad(lambda x: (tnp.pad(x, 2, mode="symmetric") * w).sum())(x)
    np.testing.assert_array_equal(g.numpy(), [2 + 3, 1 + 4 + 7, 5 + 6])


@pytest.mark.parametrize("mode", ["reflect", "symmetric", "wrap"])
def test_pad_longer_than_the_axis_matches_numpy(mode):
    # pads of several times the axis length reflect (or wrap) again, as NumPy
    x = arange(2, 3)
    pw = ((5, 7), (8, 4))
    np.testing.assert_array_equal(
        tnp.pad(x, pw, mode=mode).numpy(), np.pad(x.numpy(), pw, mode=mode)
    )
    one = f64([[4.0]])  # a single element: every mode copies it
    np.testing.assert_array_equal(tnp.pad(one, 2, mode=mode).numpy(), np.full((5, 5), 4.0))
    g = tg.grad(lambda t: tnp.pad(t, 2, mode=mode).sum())(one)
    assert float(g[0, 0]) == 25.0
    check_grads(lambda x: tnp.pad(x, pw, mode=mode), (x,), order=2, modes=("rev", "fwd"))


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric", "wrap"])
def test_pad_modes_through_the_tensor_method_jit_and_lazy(mode):
    x = arange(2, 3)
    want = np.pad(x.numpy(), ((0, 0), (2, 1)), mode=mode)
    np.testing.assert_array_equal(x.pad((2, 1), mode=mode).numpy(), want)
    f = tg.jit(tg.grad(lambda t: (tnp.pad(t, ((0, 0), (2, 1)), mode=mode) ** 2).sum()))
    ref = tg.grad(lambda t: (tnp.pad(t, ((0, 0), (2, 1)), mode=mode) ** 2).sum())
    for a in (x, arange(2, 3) * 2.0):
        np.testing.assert_allclose(f(a).numpy(), ref(a).numpy())
    with tg.lazy():
        y = tnp.pad(x, ((0, 0), (2, 1)), mode=mode)
    np.testing.assert_array_equal(y.numpy(), want)


def test_pad_fill_value_tensor_gets_the_padded_cotangents():
    x = arange(2, 2)
    c = f64(1.5)
    out = tnp.pad(x, ((1, 0), (0, 2)), constant_values=c)
    np.testing.assert_array_equal(
        out.numpy(), np.pad(x.numpy(), ((1, 0), (0, 2)), constant_values=1.5)
    )
    gc = tg.grad(lambda c: tnp.pad(x, ((1, 0), (0, 2)), constant_values=c).sum())(c)
    assert float(gc) == 3 * 4 - 4  # padded positions
    check_grads(lambda x, c: x.pad(1, constant_values=c), (x, c), order=2)
    with pytest.raises(ValueError, match="pad: constant_values must be a single number"):
        tnp.pad(x, 1, constant_values=(1, 2))


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric", "wrap"])
def test_pad_gradient_counts_copies(mode):
    x = f64([1.0, 2.0, 3.0])
    g = tg.grad(lambda x: tnp.pad(x, (2, 3), mode=mode).sum())(x)
    # d/dx_i of the sum = how many output elements copy x_i
    copies = np.pad(np.arange(3), (2, 3), mode=mode)
    expected = np.bincount(copies, minlength=3).astype(float)
    if mode == "constant":
        expected = np.ones(3)
    np.testing.assert_array_equal(g.numpy(), expected)
    check_grads(lambda x: tnp.pad(x, ((1, 4), (3, 2)), mode=mode), (arange(2, 3),), order=2)


def test_strided_windows_seeds_shape_and_values():
    rng = np.random.default_rng(0)
    a = rng.random((2, 3, 10, 10))
    w = tg.Tensor(a).strided_windows(kernel_size=3, stride=1)
    assert w.shape == (8, 8, 2, 3, 3, 3)
    w2 = tg.Tensor(a).strided_windows(3, 2)
    assert w2.shape == (4, 4, 2, 3, 3, 3)
    for i in range(4):
        for j in range(4):
            np.testing.assert_array_equal(
                w2.numpy()[i, j], a[:, :, 2 * i : 2 * i + 3, 2 * j : 2 * j + 3]
            )
    with pytest.raises(ValueError, match="window of size 11 along axis 2 is larger"):
        tg.Tensor(a).strided_windows(11, 1)
    with pytest.raises(ValueError, match="step/stride must be >= 1"):
        tg.Tensor(a).strided_windows(3, 0)


def test_strided_windows_gradient_counts_overlaps():
    x = arange(1, 1, 4, 4)
    g = tg.grad(lambda x: x.strided_windows(3, 1).sum())(x)
    cover = np.array([1, 2, 2, 1], float)
    np.testing.assert_array_equal(g.numpy()[0, 0], np.outer(cover, cover))
    check_grads(lambda x: x.strided_windows(2, 2), (arange(2, 1, 5, 4),), order=2)


def test_sliding_window_view_matches_numpy():
    from numpy.lib.stride_tricks import sliding_window_view

    x = arange(4, 5)
    np.testing.assert_array_equal(
        tnp.sliding_window_view(x, (2, 3)).numpy(), sliding_window_view(x.numpy(), (2, 3))
    )
    np.testing.assert_array_equal(
        tnp.sliding_window_view(x, 2, axis=1).numpy(),
        sliding_window_view(x.numpy(), 2, axis=1),
    )
    with pytest.raises(ValueError, match="window_shape .* needs one entry per axis"):
        tnp.sliding_window_view(x, 2)


def test_gather_rows():
    x = tg.Tensor([[10.0, 20.0], [30.0, 40.0], [50.0, 60.0]])
    np.testing.assert_array_equal(x.gather([0, 2]).numpy(), [[10, 20], [50, 60]])
    np.testing.assert_array_equal(x.gather(1).numpy(), [30, 40])
    np.testing.assert_array_equal(x.gather(np.array([2, 2])).numpy(), [[50, 60], [50, 60]])
    g = tg.grad(lambda x: x.gather([0, 2, 0]).sum())(f64(x.numpy()))
    np.testing.assert_array_equal(g.numpy(), [[2, 2], [0, 0], [1, 1]])
    with pytest.raises(IndexError, match="take: index 3 is out of bounds for axis 0 with size 3"):
        x.gather([0, 3])


# -- getitem -------------------------------------------------------------------------------------
def test_getitem_forms_match_numpy():
    a = np.arange(60.0).reshape(3, 4, 5)
    x = tg.Tensor(a)
    mask = a[:, 0, 0] > 10
    cases = [
        (1, -1),
        (slice(None, None, -1), None, Ellipsis, 2),
        (Ellipsis, slice(4, 0, -2)),
        ([0, 0, 2],),
        (np.array([[0, 1], [2, 2]]), slice(1, 3), np.array([4, 0])),
        (mask,),
        (a > 30,),
        (None, 1, [3, 1], None),
        (slice(None), np.array([True, False, True, True])),
        (),
        ((0, 1, 0), (3, 3, 2)),  # tuples inside the index tuple are index arrays
        ((2, 0), slice(None), (4,)),
        (((0, 1), (1, 2)),),
        ((), 1),
    ]
    for idx in cases:
        np.testing.assert_array_equal(x[idx].numpy(), a[idx])
        assert x[idx].dtype == a[idx].dtype
    np.testing.assert_array_equal(x[tg.Tensor(np.array([2, 0]))].numpy(), a[[2, 0]])
    np.testing.assert_array_equal(x[tg.Tensor(mask)].numpy(), a[mask])
    np.testing.assert_array_equal(x[tg.Tensor(np.array(1)), 2].numpy(), a[1, 2])


def test_tuple_index_arrays_in_getitem_and_at():
    a = np.arange(24.0).reshape(2, 3, 4)
    x = f64(a)
    g = tg.grad(lambda x: (x[(0, 1, 0), (2, 2, 1)] ** 2).sum())(x)
    want = np.zeros_like(a)
    np.add.at(want, ((0, 1, 0), (2, 2, 1)), 2 * a[(0, 1, 0), (2, 2, 1)])
    np.testing.assert_array_equal(g.numpy(), want)
    check_grads(lambda x: x[(1, 0), :, (3, 3)], (x,), order=2, modes=("rev", "fwd"))
    ref = a.copy()
    ref[(0, 1), (2, 0)] = -1.0
    np.testing.assert_array_equal(x.at[(0, 1), (2, 0)].set(-1.0).numpy(), ref)
    with pytest.raises(IndexError, match="getitem: .*integer or boolean"):
        x[(0.5, 1), 0]


def test_getitem_errors_name_the_op():
    x = tg.Tensor([1.0, 2.0, 3.0])
    with pytest.raises(
        IndexError, match="getitem: index 5 is out of bounds for axis 0 with size 3"
    ):
        x[5]
    with pytest.raises(IndexError, match="getitem: index 5 is out of bounds"):
        x[[0, 5]]
    with pytest.raises(IndexError, match="getitem: .*too many indices"):
        x[0, 0]
    with pytest.raises(IndexError, match="getitem: .*integer or boolean"):
        x[tg.Tensor([0.0])]
    with pytest.raises(IndexError, match="getitem: only integers, slices"):
        x[1.5]
    with pytest.raises(IndexError, match="getitem: .*boolean index did not match"):
        x[np.array([True, False])]


def test_repeated_indices_accumulate_in_the_gradient():
    x = f64([1.0, 2.0, 3.0, 4.0])
    g = tg.grad(lambda x: (x[[0, 0, 3, 0]] * f64([1.0, 2.0, 3.0, 4.0])).sum())(x)
    np.testing.assert_array_equal(g.numpy(), [7.0, 0.0, 0.0, 3.0])
    m = arange(3, 3)
    g2 = tg.grad(lambda m: m[[0, 0, 1], [1, 1, 2]].sum())(m)
    np.testing.assert_array_equal(g2.numpy(), [[0, 2, 0], [0, 0, 1], [0, 0, 0]])
    check_grads(lambda m: m[[0, 0, 1], ::-1][:, None], (m,), order=2)


def test_item_assignment_points_to_at():
    x = tg.Tensor([1.0, 2.0])
    with pytest.raises(TypeError, match=r"x.at\[idx\].set\(v\)"):
        x[0] = 5.0


def test_len_and_iter():
    x = arange(3, 2)
    assert len(x) == 3
    rows = list(x)
    assert len(rows) == 3 and all(r.shape == (2,) for r in rows)
    np.testing.assert_array_equal(rows[2].numpy(), [4.0, 5.0])
    g = tg.grad(lambda x: sum(r[1] * i for i, r in enumerate(x)))(x)
    np.testing.assert_array_equal(g.numpy(), [[0, 0], [0, 1], [0, 2]])
    with pytest.raises(TypeError, match="0-d"):
        len(tg.Tensor(1.0))


def test_index_tensors_are_tape_inputs_so_replay_uses_new_indices():
    def f(x, i):
        return (x[i] * 2.0).sum()

    x = arange(5)
    _, tape = tg.trace(tg.grad(f))(x, tg.Tensor(np.array([0, 0])))
    g = tape.replay(x, tg.Tensor(np.array([3, 4])))
    np.testing.assert_array_equal(g.numpy(), [0, 0, 0, 2, 2])


# -- take, take_along_axis ---------------------------------------------------------------------
def test_take_and_take_along_axis():
    a = np.arange(12.0).reshape(3, 4)
    x = tg.Tensor(a)
    np.testing.assert_array_equal(x.take([5, -1]).numpy(), np.take(a, [5, -1]))
    np.testing.assert_array_equal(tnp.take(x, [[0, 0]], axis=1).numpy(), np.take(a, [[0, 0]], 1))
    order = np.argsort(-a, axis=1)
    np.testing.assert_array_equal(
        tnp.take_along_axis(x, order, axis=1).numpy(), np.take_along_axis(a, order, 1)
    )
    with pytest.raises(IndexError, match="take: index 4 is out of bounds for axis 1 with size 4"):
        tnp.take(x, [4], axis=1)
    with pytest.raises(ValueError, match="take_along_axis: .* same number of dimensions"):
        tnp.take_along_axis(x, np.array([0, 1]), axis=1)
    with pytest.raises(TypeError, match="take: indices must be integers"):
        tnp.take(x, [0.5])
    with pytest.raises(ValueError, match="take: axis 2 is out of range for a Tensor with ndim 2"):
        tnp.take(x, [0], axis=2)


# -- reshape family ----------------------------------------------------------------------------
def test_reshape_errors_name_shapes():
    x = arange(2, 3)
    with pytest.raises(ValueError, match=r"reshape: cannot reshape 6 elements into shape \(4,"):
        x.reshape(4, -1)
    with pytest.raises(ValueError, match=r"from a Tensor of shape \(2, 3\)"):
        x.view(5)
    with pytest.raises(ValueError, match="only one dimension can be -1"):
        x.reshape(-1, -1)


def test_squeeze_expand_flatten():
    x = arange(1, 3, 1)
    assert tnp.squeeze(x).shape == (3,)
    assert x.squeeze(axis=-1).shape == (1, 3)
    assert x.squeeze((0, 2)).shape == (3,)
    with pytest.raises(ValueError, match=r"squeeze: cannot squeeze axis 1 .* its size is 3, not 1"):
        x.squeeze(1)
    with pytest.raises(
        ValueError, match="squeeze: axis 3 is out of range for a Tensor with ndim 3"
    ):
        x.squeeze(3)
    assert tnp.expand_dims(x, (0, -1)).shape == (1, 1, 3, 1, 1)
    assert x.unsqueeze(1).shape == (1, 1, 3, 1)
    with pytest.raises(ValueError, match="expand_dims: axis 5 is out of range"):
        tnp.expand_dims(x, 5)
    y = arange(2, 3, 4)
    assert y.flatten().shape == (24,)
    assert y.flatten(1).shape == (2, 12)
    assert y.flatten(0, 1).shape == (6, 4)
    assert y.ravel().shape == (24,)
    assert tg.Tensor(1.0).flatten().shape == (1,)
    assert tnp.moveaxis(y, [0, 1], [-1, -2]).shape == (4, 3, 2)
    with pytest.raises(ValueError, match="moveaxis: source .* same number of elements"):
        tnp.moveaxis(y, [0, 1], [0])


# -- joining and splitting ---------------------------------------------------------------------
def test_concatenate_and_stack_errors_name_shapes():
    a, b = arange(2, 3), arange(3, 3)
    assert tnp.concatenate([a, b]).shape == (5, 3)
    assert tnp.concatenate([a, b], axis=None).shape == (15,)
    with pytest.raises(
        ValueError,
        match=r"concatenate: all input shapes must match except along axis 1, got shapes "
        r"\(2, 3\), \(3, 3\)",
    ):
        tnp.concatenate([a, b], axis=1)
    with pytest.raises(ValueError, match="concatenate: zero-dimensional"):
        tnp.concatenate([tg.Tensor(1.0), tg.Tensor(2.0)])
    with pytest.raises(ValueError, match=r"stack: all input Tensors must have the same shape, "):
        tnp.stack([a, b])
    with pytest.raises(ValueError, match="stack: axis 3 is out of range for a Tensor with ndim 3"):
        tnp.stack([a, a], axis=3)
    with pytest.raises(TypeError, match="concatenate: expected a sequence of Tensors"):
        tnp.concatenate(a)


def test_split_and_array_split():
    x = arange(7, 2)
    parts = tnp.array_split(x, 3)
    assert [p.shape for p in parts] == [(3, 2), (2, 2), (2, 2)]
    with pytest.raises(ValueError, match="split: an axis of size 7 .* does not split into 3"):
        tnp.split(x, 3)
    parts = tnp.split(x, [2, 5])
    assert [p.shape for p in parts] == [(2, 2), (3, 2), (2, 2)]

    def f(x):
        a, b, c = tnp.split(x, [2, 5])
        return (a * 1.0).sum() + (b * 2.0).sum() + (c * 3.0).sum()

    g = tg.grad(f)(x)
    np.testing.assert_array_equal(g.numpy()[:, 0], [1, 1, 2, 2, 2, 3, 3])
    # an unused piece gets a zero cotangent
    g = tg.grad(lambda x: tnp.split(x, [2])[1].sum())(x)
    np.testing.assert_array_equal(g.numpy()[:, 0], [0, 0, 1, 1, 1, 1, 1])


def test_tile_and_repeat():
    x = arange(2, 2)
    np.testing.assert_array_equal(tnp.tile(x, (2, 1, 3)).numpy(), np.tile(x.numpy(), (2, 1, 3)))
    np.testing.assert_array_equal(x.repeat(2).numpy(), np.repeat(x.numpy(), 2))
    np.testing.assert_array_equal(x.repeat([1, 3], axis=1).numpy(), np.repeat(x.numpy(), [1, 3], 1))
    g = tg.grad(lambda x: x.repeat([1, 3], axis=1).sum())(x)
    np.testing.assert_array_equal(g.numpy(), [[1, 3], [1, 3]])
    g = tg.grad(lambda x: tnp.tile(x, 3).sum())(x)
    np.testing.assert_array_equal(g.numpy(), np.full((2, 2), 3.0))
    with pytest.raises(ValueError, match="repeat: got 3 repeats for an axis of size 2"):
        x.repeat([1, 2, 3], axis=0)
    with pytest.raises(ValueError, match="repeat: repeats must be >= 0"):
        x.repeat(-1)
    with pytest.raises(ValueError, match="tile: repetitions must be >= 0"):
        tnp.tile(x, -1)


def test_tril_triu_diagonal_trace():
    a = np.arange(24.0).reshape(2, 3, 4)
    x = tg.Tensor(a)
    np.testing.assert_array_equal(tnp.tril(x, 1).numpy(), np.tril(a, 1))
    np.testing.assert_array_equal(x.triu(-1).numpy(), np.triu(a, -1))
    np.testing.assert_array_equal(tnp.diagonal(x, 1, 1, 2).numpy(), np.diagonal(a, 1, 1, 2))
    np.testing.assert_array_equal(x.trace(-1, 2, 0).numpy(), np.trace(a, -1, 2, 0))
    g = tg.grad(lambda m: tnp.trace(m))(arange(3, 3))
    np.testing.assert_array_equal(g.numpy(), np.eye(3))
    # dtype= as NumPy's trace (it was a TypeError)
    x32 = tg.Tensor(a.astype(np.float32))
    t64 = tnp.trace(x32, 1, dtype=np.float64)
    assert t64.dtype == np.trace(a.astype(np.float32), 1, dtype=np.float64).dtype == np.float64
    np.testing.assert_array_equal(t64.numpy(), np.trace(a, 1))
    assert np.trace(x32, dtype=np.float64).dtype == np.float64  # NumPy dispatch too
    with pytest.raises(ValueError, match="diagonal: axis1 and axis2 cannot be the same"):
        tnp.diagonal(x, 0, 1, -2)
    with pytest.raises(ValueError, match=r"diagonal: needs a Tensor with at least 2 axes"):
        tnp.diagonal(arange(3))


def test_flip():
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(tnp.flip(tg.Tensor(a)).numpy(), np.flip(a))
    np.testing.assert_array_equal(tg.Tensor(a).flip(1).numpy(), np.flip(a, 1))
    with pytest.raises(ValueError, match="flip: repeated axis"):
        tnp.flip(tg.Tensor(a), (1, -1))


def test_broadcast_to_errors():
    with pytest.raises(
        ValueError, match=r"broadcast_to: cannot broadcast a Tensor of shape \(3,\)"
    ):
        tnp.broadcast_to(tg.Tensor([1.0, 2.0, 3.0]), (4,))
    with pytest.raises(ValueError, match="broadcast_to: cannot broadcast"):
        tnp.broadcast_to(arange(2, 3), (3,))


# -- functional .at updates --------------------------------------------------------------------
def test_at_set_add_follow_jax_semantics():
    x = tg.Tensor([1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(x.at[1].set(9.0).numpy(), [1, 9, 3, 4])
    np.testing.assert_array_equal(x.at[1:3].set(tg.Tensor([7.0, 8.0])).numpy(), [1, 7, 8, 4])
    np.testing.assert_array_equal(x.at[[0, 0, 2]].add(1.0).numpy(), [3, 2, 4, 4])
    np.testing.assert_array_equal(x.at[x.numpy() > 2].set(0.0).numpy(), [1, 2, 0, 0])
    np.testing.assert_array_equal(x.at[[0, 0]].multiply(3.0).numpy(), [9, 2, 3, 4])
    np.testing.assert_array_equal(x.at[[1, 3]].min(2.5).numpy(), [1, 2, 3, 2.5])
    np.testing.assert_array_equal(x.at[::2].max(tg.Tensor([0.0, 5.0])).numpy(), [1, 2, 5, 4])
    np.testing.assert_array_equal(x.at[2].get().numpy(), 3.0)
    np.testing.assert_array_equal(x.numpy(), [1, 2, 3, 4])  # unchanged
    assert x.at[0].set(np.float64(1.5)).dtype == np.float32  # values take x's dtype
    with pytest.raises(ValueError, match=r"at\[\]\.set: cannot write values of shape \(3,\)"):
        x.at[:2].set(tg.Tensor([1.0, 2.0, 3.0]))
    with pytest.raises(IndexError, match=r"at\[\]\.add: index 7 is out of bounds"):
        x.at[[7]].add(1.0)
    with pytest.raises(TypeError, match=r"at\[\]: values must be numeric"):
        x.at[0].set("a")


@pytest.mark.parametrize("method", ["set", "add", "multiply", "min", "max"])
def test_at_with_2d_index_and_broadcast_values(method):
    # regression: NumPy's ufunc.at misreads implicitly broadcast values with a 2-D index
    x, v = np.array([2.0, 3.0]), np.array([0.5, 4.0])
    idx = np.array([[0, 1], [0, 1]])
    out = getattr(f64(x).at[idx], method)(f64(v))
    ref = x.copy()
    for i, val in zip(idx.reshape(-1), np.broadcast_to(v, idx.shape).reshape(-1)):
        ref[i] = {
            "set": val,
            "add": ref[i] + val,
            "multiply": ref[i] * val,
            "min": min(ref[i], val),
            "max": max(ref[i], val),
        }[method]
    np.testing.assert_array_equal(out.numpy(), ref)
    check_grads(lambda x, v: getattr(x.at[idx], method)(v), (f64(x), f64(v)), order=2)


def test_at_set_gradients():
    x = f64([1.0, 2.0, 3.0, 4.0])
    v = f64([10.0, 20.0])
    w = f64([1.0, 2.0, 3.0, 4.0])

    def f(x, v):
        return (x.at[[1, 3]].set(v) * w).sum()

    gx, gv = tg.grad(f, argnums=(0, 1))(x, v)
    np.testing.assert_array_equal(gx.numpy(), [1, 0, 3, 0])  # zeroed at the index
    np.testing.assert_array_equal(gv.numpy(), [2, 4])  # gathered cotangent
    # a broadcast value gets the sum over its copies
    gs = tg.grad(lambda s: (x.at[[1, 3]].set(s) * w).sum())(f64(5.0))
    assert float(gs) == 6.0
    # repeated indices: only the last write took effect, only it gets the cotangent
    gv = tg.grad(lambda v: (x.at[[2, 2]].set(v) * w).sum())(v)
    np.testing.assert_array_equal(gv.numpy(), [0, 3])
    check_grads(lambda x, v: x.at[[2, 0, 2]].set(v), (x, f64([1.0, 2.0, 3.0])), order=2)


def test_at_multiply_gradient_with_zeros_and_repeats():
    x = f64([2.0, 3.0])
    v = f64([0.0, 5.0, 0.5])

    def f(x, v):
        return x.at[[0, 0, 0]].multiply(v)

    gx, gv = tg.grad(lambda x, v: f(x, v).sum(), argnums=(0, 1))(x, v)
    np.testing.assert_array_equal(gx.numpy(), [0.0, 1.0])
    np.testing.assert_allclose(gv.numpy(), [2.0 * 5.0 * 0.5, 0.0, 0.0])
    check_grads(f, (x, v), order=2)
    check_grads(f, (x, f64([0.0, 0.0, 2.0])), order=2)
    check_grads(f, (x, f64([1.5, -2.0, 0.5])), order=2)


def test_at_min_max_ties_split():
    x = f64([1.0, 5.0])
    gx, gv = tg.grad(lambda x, v: x.at[[0, 0]].max(v).sum(), argnums=(0, 1))(x, f64([1.0, 0.0]))
    np.testing.assert_array_equal(gx.numpy(), [0.5, 1.0])  # x[0] ties with v[0]
    np.testing.assert_array_equal(gv.numpy(), [0.5, 0.0])
    gx, gv = tg.grad(lambda x, v: x.at[1].min(v).sum(), argnums=(0, 1))(x, f64(2.0))
    np.testing.assert_array_equal(gx.numpy(), [1.0, 0.0])
    assert float(gv) == 1.0


# -- one definition per op ----------------------------------------------------------------------
def test_public_functions_and_core_methods_are_declared_by_the_primitives():
    from tapegrad.ops._registry import METHODS

    for fn, cls in [
        (tnp.reshape, ops.Reshape),
        (tnp.transpose, ops.Transpose),
        (tnp.permute_dims, ops.Transpose),
        (tnp.broadcast_to, ops.BroadcastTo),
        (tnp.concatenate, ops.Concatenate),
        (tnp.concat, ops.Concatenate),
        (tnp.split, ops.Split),
        (tnp.flip, ops.Flip),
        (tnp.roll, ops.Roll),
        (tnp.pad, ops.Pad),
        (tnp.sliding_window_view, ops.SlidingWindow),
    ]:
        assert fn is cls.api, fn.__name__
        assert fn.__doc__ and "Raises:" in fn.__doc__, fn.__name__
    # the methods the engine itself calls (unbroadcast's g.reshape, x.T, x[i]) come from ops
    for name in ("reshape", "transpose", "T", "__getitem__", "broadcast_to"):
        assert name in METHODS
        assert tg.Tensor.__dict__[name] is METHODS[name], name
    assert tg.Tensor.__dict__["__getitem__"] is ops.GetItem.api


# -- output_shape ------------------------------------------------------------------------------
def test_output_shapes():
    from tapegrad.ops.movement import IndexSlot

    assert ops.Reshape.output_shape((2, 6), (3, -1)) == (3, 4)
    assert ops.Transpose.output_shape((2, 3, 4), axes=(2, 0, 1)) == (4, 2, 3)
    assert ops.BroadcastTo.output_shape((3, 1), (2, 3, 4)) == (2, 3, 4)
    with pytest.raises(ValueError, match="broadcast_to: cannot broadcast"):
        ops.BroadcastTo.output_shape((3,), (1,))
    key = (slice(None, None, -2), IndexSlot(0, False), None)
    assert ops.GetItem.output_shape((5, 4), (2, 3), key=key) == (3, 2, 3, 1)
    with pytest.raises(IndexError, match="getitem: index 7 is out of bounds"):
        ops.GetItem.output_shape((5,), key=(7,))
    with pytest.raises(NotImplementedError, match="boolean-mask"):
        ops.GetItem.output_shape((5,), (5,), key=(IndexSlot(0, True),))
    mask = np.array([True, False, True, True, False])
    assert ops.GetItem.output_shape((5, 2), mask, key=(IndexSlot(0, True),)) == (3, 2)
    assert ops.ScatterAdd.output_shape((2,), (2,), shape=(5,), key=(IndexSlot(0, False),)) == (5,)
    assert ops.Concatenate.output_shape((2, 3), (4, 3), axis=0) == (6, 3)
    with pytest.raises(ValueError, match="concatenate: all input shapes must match"):
        ops.Concatenate.output_shape((2, 3), (4, 2), axis=0)
    assert ops.Split.output_shape((7, 2), (2, 5), axis=0) == [(2, 2), (3, 2), (2, 2)]
    assert ops.Flip.output_shape((2, 3), axis=(1,)) == (2, 3)
    assert ops.Roll.output_shape((2, 3), shift=(1,), axis=(0,)) == (2, 3)
    assert ops.Pad.output_shape((2, 3), pad_width=((1, 0), (2, 2)), mode="edge") == (3, 7)
    assert ops.Pad.output_shape((1, 2), pad_width=((3, 4), (0, 5)), mode="wrap") == (8, 7)
    with pytest.raises(ValueError, match="pad: mode must be one of"):
        ops.Pad.output_shape((2,), pad_width=((1, 1),), mode="mean")
    assert ops.SlidingWindow.output_shape(
        (2, 10, 10), window_shape=(3, 3), axis=(1, 2), step=(1, 2, 2)
    ) == (2, 4, 4, 3, 3)
    assert ops.ScatterSet.output_shape((4,), (2,), (2,), key=(IndexSlot(0, False),)) == (4,)


def test_duplicate_pairs_matches_brute_force():
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 4, size=12)
    j, k = ops.DuplicatePairs.apply(tg.Tensor(ids))
    got = sorted(zip(j.numpy().tolist(), k.numpy().tolist()))
    want = sorted((a, b) for a in range(12) for b in range(12) if a != b and ids[a] == ids[b])
    assert got == want
    j, k = ops.DuplicatePairs.apply(tg.Tensor(np.arange(5)))
    assert j.shape == k.shape == (0,)


def test_forward_errors_through_apply_name_the_op_once():
    with pytest.raises(ValueError) as e:
        ops.Concatenate.apply(arange(2, 3), arange(2, 2), axis=0)
    assert str(e.value).startswith("concatenate: all input shapes must match")
    assert "concatenate: concatenate" not in str(e.value)


LAZY_CASES = {
    "getitem": lambda x: x[[0, 0, 2], 1:, None],
    "getitem_tensor_index": lambda x: x[tg.Tensor(np.array([2, 0]))],
    "getitem_mask_tensor": lambda x: x[tg.Tensor(x.numpy() > 20)],
    "take_along_axis": lambda x: tnp.take_along_axis(x, np.zeros((3, 2, 5), int), 1),
    "split": lambda x: tnp.split(x, [1, 3], axis=1)[1],
    "concat_stack": lambda x: tnp.stack([tnp.concatenate([x, x], 1)] * 2, -1),
    "pad_roll_flip": lambda x: tnp.flip(tnp.roll(tnp.pad(x, 1, mode="reflect"), 2, 1), 0),
    "diagonal_trace": lambda x: tnp.trace(x, 0, 1, 2) + tnp.diagonal(x, 1, 1, 2).sum(-1),
    "strided_windows": lambda x: x.strided_windows(2, 1),
    "at_updates": lambda x: x.at[[0, 0]].add(1.0).at[1].set(2.0).at[[2, 2]].multiply(3.0),
    "repeat_tile": lambda x: tnp.tile(x.repeat([1, 2, 0], axis=0), (2, 1, 1)),
}


@pytest.mark.parametrize("name", sorted(LAZY_CASES))
def test_lazy_mode_matches_eager(name):
    a = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    f = LAZY_CASES[name]
    want = f(tg.Tensor(a)).numpy()
    with tg.lazy():
        y = f(tg.Tensor(a))
    got = y.numpy()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


# -- take modes -------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["raise", "wrap", "clip"])
def test_take_modes_match_numpy(mode):
    x = np.arange(12.0).reshape(3, 4)
    cases = [[0, 2, -1], [[3, -4], [1, 1]], 2, -3, np.array([], dtype=np.int64)]
    if mode != "raise":
        cases += [[5, -7, 9], 11, -9]
    for idx in cases:
        want = np.take(x, idx, axis=1, mode=mode)
        for given in (idx, tg.Tensor(np.asarray(idx, dtype=np.int64))):
            got = tnp.take(x, given, axis=1, mode=mode)
            assert got.shape == want.shape
            np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(
        tnp.take(x, [13, -1], mode=mode if mode != "raise" else "wrap").numpy(),
        np.take(x, [13, -1], mode=mode if mode != "raise" else "wrap"),
    )


def test_take_wrap_and_clip_gradients_accumulate():
    x = tg.Tensor(np.arange(4.0))
    g = tg.grad(lambda t: tnp.take(t, [0, 4, -4, 9], mode="wrap").sum())(x)
    np.testing.assert_array_equal(g.numpy(), [3.0, 1.0, 0.0, 0.0])
    g = tg.grad(lambda t: tnp.take(t, [-2, 0, 7], mode="clip").sum())(x)
    np.testing.assert_array_equal(g.numpy(), [2.0, 0.0, 0.0, 1.0])


def test_take_mode_replays_with_new_index_tensors():
    x = tg.Tensor(np.arange(5.0))
    _, tape = tg.trace(lambda t, i: tnp.take(t, i, mode="wrap"))(
        x, tg.Tensor(np.array([6, -1]))
    )
    out = tape.replay(x, tg.Tensor(np.array([7, 10])))
    np.testing.assert_array_equal(out.numpy(), [2.0, 0.0])


def test_take_mode_errors():
    with pytest.raises(ValueError, match="take: mode must be 'raise', 'wrap' or 'clip'"):
        tnp.take(np.ones(3), [0], mode="bad")
    with pytest.raises(IndexError, match="take: cannot take 1 element"):
        tnp.take(np.ones(0), [0], mode="clip")
    with pytest.raises(IndexError, match="take: index 3 is out of bounds"):
        tnp.take(np.ones(3), [3])
    assert tnp.take(np.ones(0), np.array([], dtype=np.int64), mode="wrap").shape == (0,)
