"""Example tests for construction and shape functions of tapegrad.numpy: arrays built from
nested lists of (traced) Tensors, the stacking, splitting, diagonal, rotation, insertion and
index-trick functions, NumPy's signatures (copy=, ndmin=, dtype=/out=/correction= of the
reductions, clip's min=/max=), the dtype names and constants, and tapegrad.numpy.random."""

import warnings

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads, check_vmap


def f64(a):
    return tg.Tensor(np.asarray(a, dtype=np.float64))


def same(got, want):
    g = got.numpy()
    want = np.asarray(want)
    assert g.shape == want.shape and g.dtype == want.dtype, (g.shape, g.dtype, want.shape,
                                                              want.dtype)
    np.testing.assert_array_equal(g, want)


# -- array / asarray of nested Tensors --------------------------------------------------------
def test_array_of_traced_tensors_is_differentiable():
    def f(x, y):
        return tnp.array([[x, 2.0 * y], [y * y, 1.0]])

    x, y = f64(1.5), f64(-2.0)
    np.testing.assert_array_equal(f(x, y).numpy(), [[1.5, -4.0], [4.0, 1.0]])
    gx, gy = tg.grad(lambda x, y: (f(x, y) ** 2).sum(), argnums=(0, 1))(x, y)
    assert float(gx) == 3.0 and float(gy) == 8.0 * -2.0 + 4.0 * (-2.0) ** 3
    check_grads(f, (x, y), order=2, modes=("rev", "fwd"))
    check_grads(lambda v: tnp.asarray([v[0] * v[1], (v[0], 3.0)[1], v[1]]), (f64([1.0, 2.0]),),
                order=2, modes=("rev", "fwd"))


def test_array_of_tensors_dtype_rules():
    x32 = tg.Tensor(np.float32(2.0))
    assert tnp.array([x32, 1.0]).dtype == np.float32  # Python numbers are weak
    assert tnp.array([x32, np.float64(1.0)]).dtype == np.float64  # NumPy scalars are not
    assert tnp.array([x32, 1j]).dtype == np.complex64
    assert tnp.array([tg.Tensor(1), 2]).dtype == np.int64
    assert tnp.array([x32, 1], dtype=np.float64).dtype == np.float64
    z = tg.Tensor(np.complex128(1 + 1j))
    check_grads(lambda z: tnp.asarray([z, z * z, 2.0]) ** 2, (z,), order=2, modes=("rev", "fwd"))
    rows = tnp.asarray([tg.Tensor([1.0, 2.0]), np.array([3.0, 4.0], np.float32)])
    assert rows.shape == (2, 2) and rows.dtype == np.float32


def _array_functions(arity):
    """Every tapegrad.numpy (and linalg, fft) function that takes ``arity`` float64 vectors
    alone (``name``, the function, how many of the vectors it takes)."""
    from tapegrad.numpy import _inplace, _io, _passthrough

    x = f64([0.3, 0.6, 0.9])
    # functions on values (text, files, NumPy's objects and settings) are not array operands
    skip = {"asarray", "array", "copy", "stop_gradient", "test", *_passthrough.__all__,
            *_io.__all__, *_inplace.__all__}
    out = []
    for mod in (tnp, tnp.linalg, tnp.fft):
        for name in mod.__all__:
            fn = getattr(mod, name)
            if not callable(fn) or isinstance(fn, type) or name in skip:
                continue
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    res = fn(*[x] * arity)
            except Exception:  # noqa: BLE001 - needs other arguments: not in this class
                continue
            leaves = [res] if isinstance(res, tg.Tensor) else tg.tree.tree_leaves(res)
            if leaves and all(isinstance(v, tg.Tensor) for v in leaves):
                out.append((f"{mod.__name__}.{name}/{arity}", fn, arity))
    return out


@pytest.mark.parametrize("name,fn,arity", _array_functions(1) + _array_functions(2),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_every_function_takes_a_list_of_traced_tensors(name, fn, arity):
    # HIPS autograd's np.mean([x, y]): a list holding traced Tensors is an array operand
    x = f64([0.3, 0.6, 0.9])

    def as_list(v):  # the first operand a list of traced scalars, the second the Tensor
        return fn([v[0], v[1] * 1.0, v[2]], *[v] * (arity - 1))

    def as_array(v):
        return fn(*[v] * arity)

    want_out = as_array(x)
    got_out = as_list(x)
    for g, w in zip(tg.tree.tree_leaves(got_out), tg.tree.tree_leaves(want_out), strict=True):
        same(g, w)
    if not any(v.dtype.kind in "fc" for v in tg.tree.tree_leaves(want_out)):
        return  # integer/boolean results: no derivative to compare
    u = tg.tree.tree_map(lambda o: f64(np.cos(np.arange(o.size)).reshape(o.shape))
                         .astype(o.dtype), want_out)
    got = tg.vjp(as_list, x)[1](u)[0]
    want = tg.vjp(as_array, x)[1](u)[0]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


def test_array_of_tensors_errors_and_vmap():
    with pytest.raises(ValueError, match=r"asarray: the nested sequence is not rectangular: "
                                         r"its elements have shapes \(2,\), \(3,\)"):
        tnp.asarray([tg.Tensor([1.0, 2.0]), tg.Tensor([1.0, 2.0, 3.0])])
    with pytest.raises(TypeError, match="asarray: expected numeric data, got dtype <U"):
        tnp.asarray([tg.Tensor(1.0), "a"])
    check_vmap(lambda v: tnp.array([[v[0], 1.0], [v[1] ** 2, v[0]]]), (f64(np.ones((3, 2))),))


def test_asarray_copy_order_device_and_ndmin():
    x = tg.Tensor([1.0, 2.0])
    assert tnp.asarray(x) is x and tnp.asarray(x, copy=True) is x and tnp.array(x) is x
    assert tnp.asarray(x, copy=False) is x
    with pytest.raises(ValueError, match="asarray: copy=False, but converting a Tensor of dtype "
                                         "float32"):
        tnp.asarray(x, dtype=np.float64, copy=False)
    with pytest.raises(ValueError, match="asarray: copy=False, but list input needs a copy"):
        tnp.asarray([1.0], copy=False)
    with pytest.raises(ValueError, match="array: copy=False|asarray: copy=False"):
        tnp.array(np.ones(2), copy=False)
    with pytest.raises(ValueError, match="asarray: order must be one of"):
        tnp.asarray(x, order="Z")
    assert tnp.asarray([1, 2], order="F").dtype == np.int64
    assert tnp.array([1.0, 2.0], ndmin=3).shape == (1, 1, 2)
    with pytest.raises(ValueError, match="array: ndmin must be non-negative"):
        tnp.array([1.0], ndmin=-1)
    a = np.ones(2)
    t = tnp.array(a)
    a[0] = 5.0  # the Tensor owns a copy
    assert float(t[0]) == 1.0
    assert tnp.asarray(x, device="cpu") is x
    assert tg.grad(lambda v: tnp.asarray(v, dtype=np.float64).sum())(x).dtype == np.float32


def test_astype_copy_and_device():
    x = tg.Tensor([1.5, -1.5])
    same(tnp.astype(x, np.int32), np.array([1, -1], np.int32))
    assert tnp.astype(x, np.float32, copy=False) is x
    assert tnp.astype(x, "float64", device="cpu").dtype == np.float64
    with pytest.raises(TypeError, match="astype: 'nope' is not a dtype"):
        tnp.astype(x, "nope")


def test_copy_ndim_shape_size():
    x = tg.Tensor(np.zeros((2, 3)))
    assert tnp.copy(x) is x and tnp.copy([1.0]).dtype == np.float32
    assert tg.grad(lambda v: tnp.copy(v).sum())(x).shape == (2, 3)
    assert tnp.ndim(x) == 2 and tnp.ndim([[1, 2]]) == 2 and tnp.ndim(3.0) == 0
    assert tnp.shape(x) == (2, 3) and tnp.shape(5) == ()
    assert tnp.size(x) == 6 and tnp.size(x, 1) == 3 and tnp.size(x, (0, 1)) == 6
    assert tnp.size([[1, 2, 3]]) == 3
    with pytest.raises(ValueError, match="size: axis 2 is out of range"):
        tnp.size(x, 2)


def test_dtype_names_and_constants_are_numpys():
    for name in ("float16", "float32", "float64", "complex64", "complex128", "int8", "int16",
                 "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool_", "intp",
                 "uintp", "half", "single", "double", "csingle", "cdouble", "floating",
                 "integer", "number", "inexact", "complexfloating", "signedinteger",
                 "unsignedinteger", "generic", "dtype"):
        assert getattr(tnp, name) is getattr(np, name), name
    assert tnp.bool is np.bool_
    assert tnp.pi == np.pi and tnp.e == np.e and tnp.inf == np.inf and np.isnan(tnp.nan)
    assert tnp.newaxis is None and tnp.euler_gamma == np.euler_gamma
    assert tg.Tensor([1.0])[:, tnp.newaxis].shape == (1, 1)
    assert tnp.zeros(2, dtype=tnp.int8).dtype == tnp.int8


# -- creation of index grids ------------------------------------------------------------------
def test_tri_indices_and_indices():
    for fn, ref in ((tnp.tril_indices, np.tril_indices), (tnp.triu_indices, np.triu_indices)):
        for args in ((3,), (3, 1), (2, -1, 4), (0,)):
            for g, w in zip(fn(*args), ref(*args)):
                same(g, w)
    a = np.zeros((3, 4))
    for g, w in zip(tnp.tril_indices_from(f64(a), 1), np.tril_indices_from(a, 1)):
        same(g, w)
    for g, w in zip(tnp.triu_indices_from(a), np.triu_indices_from(a)):
        same(g, w)
    with pytest.raises(ValueError, match=r"tril_indices_from: arr must be 2-D, got shape \(3,\)"):
        tnp.tril_indices_from(f64(np.zeros(3)))
    with pytest.raises(ValueError, match="tril_indices: sizes must be non-negative"):
        tnp.tril_indices(-1)
    same(tnp.indices((2, 3)), np.indices((2, 3)))
    same(tnp.indices((2,), dtype=np.int32), np.indices((2,), dtype=np.int32))
    for g, w in zip(tnp.indices((2, 3), sparse=True), np.indices((2, 3), sparse=True)):
        same(g, w)
    with pytest.raises(ValueError, match="indices: negative dimensions are not allowed"):
        tnp.indices((2, -1))
    x = f64(np.arange(9.0).reshape(3, 3))
    g = tg.grad(lambda v: v[tnp.tril_indices(3)].sum())(x)
    same(g, np.tril(np.ones((3, 3))))


# -- stacking, splitting ----------------------------------------------------------------------
def test_stacks_and_their_errors():
    a, b = np.arange(3.0), np.arange(3.0, 6.0)
    same(tnp.hstack([f64(a), f64(b)]), np.hstack([a, b]))
    same(tnp.hstack((f64(1.0), f64(2.0))), np.hstack((1.0, 2.0)))
    same(tnp.vstack([f64(a), f64(b)]), np.vstack([a, b]))
    same(tnp.row_stack([f64(a), f64(b)]), np.vstack([a, b]))
    same(tnp.dstack([f64(a), f64(b)]), np.dstack([a, b]))
    same(tnp.column_stack([f64(a), f64(b)]), np.column_stack([a, b]))
    same(tnp.column_stack([f64(np.ones((3, 2))), f64(a)]), np.column_stack([np.ones((3, 2)), a]))
    same(tnp.hstack([tg.Tensor([1, 2]), f64([0.5])], dtype=np.float32),
         np.hstack([np.array([1, 2]), np.array([0.5])], dtype=np.float32))
    with pytest.raises(TypeError, match="hstack: cannot cast dtype float64 to int64 under "
                                        "casting='same_kind'"):
        tnp.hstack([f64(a)], dtype=np.int64)
    with pytest.raises(TypeError, match="vstack: the arrays to stack must be given as a list, "
                                        "tuple or array, got generator"):
        tnp.vstack(v for v in [f64(a)])
    # the stacking function names itself (it was "concatenate: ...")
    with pytest.raises(ValueError, match="vstack: all input shapes must match except along axis"
                                         " 0, got shapes"):
        tnp.vstack([f64(a), f64(np.ones(2))])
    for name, args in [("hstack", ([np.ones((2, 2)), np.ones((3, 2))],)),
                       ("dstack", ([np.ones((2, 3)), np.ones((2, 4))],)),
                       ("column_stack", ([np.ones(3), np.ones(4)],)),
                       ("append", (np.ones((2, 3)), np.ones((2, 4)), 0))]:
        with pytest.raises(ValueError, match=rf"^{name}: all input shapes must match"):
            getattr(tnp, name)(*args)
    same(tnp.append(f64(a), [[7.0]]), np.append(a, [[7.0]]))
    same(tnp.append(f64(np.ones((2, 2))), f64(np.zeros((1, 2))), axis=0),
         np.append(np.ones((2, 2)), np.zeros((1, 2)), axis=0))


@pytest.mark.parametrize("name", ["hstack", "vstack", "row_stack", "dstack", "column_stack"])
def test_stacking_one_array_stacks_its_slices_as_numpy(name):
    # NumPy iterates an array passed as the sequence (HIPS autograd's suite calls vstack(x))
    fn = getattr(tnp, name)
    ref = np.vstack if name == "row_stack" else getattr(np, name)
    rng = np.random.default_rng(3)
    for shape in [(1,), (3,), (2, 3), (3, 1), (2, 0), (2, 3, 4), (1, 2, 1)]:
        a = rng.standard_normal(shape)
        same(fn(f64(a)), ref(a))
        same(fn(a), ref(a))  # a NumPy array too
        check_grads(fn, (f64(a),), order=2, modes=("rev", "fwd"))
    with pytest.raises(TypeError, match=rf"{'vstack' if name == 'row_stack' else name}: a 0-d "
                                        "array is not a sequence"):
        fn(f64(1.0))
    with pytest.raises(ValueError, match="need at least one array"):
        fn(f64(np.zeros((0, 2))))


def test_block_layouts_and_errors():
    A, B = np.eye(2), np.arange(4.0).reshape(2, 2)
    for layout in ([[A, B], [B, A]], [A, B], [[[A]], [[B]]], [1.0, [2.0]][:1], [[1.0, 2.0]]):
        tl = _to_tensors(layout)
        same(tnp.block(tl), np.block(layout))
    same(tnp.block(f64(A)), np.block(A))
    check_grads(lambda a, b: tnp.block([[a, b], [b * b, a]]), (f64(A), f64(B)), order=2,
                modes=("rev", "fwd"))
    with pytest.raises(ValueError, match=r"block: list depths are mismatched inside arrays"):
        tnp.block([[f64(A)], f64(B)])
    with pytest.raises(ValueError, match=r"block: arrays\[1\] is an empty list"):
        tnp.block([[f64(A)], []])
    with pytest.raises(TypeError, match="block: arrays is a tuple; only lists arrange blocks"):
        tnp.block((f64(A), f64(B)))


def _to_tensors(layout):
    if isinstance(layout, list):
        return [_to_tensors(v) for v in layout]
    return f64(layout)


def test_splits():
    x = np.arange(24.0).reshape(2, 3, 4)
    for fn, ref, arg in ((tnp.hsplit, np.hsplit, 3), (tnp.vsplit, np.vsplit, 2),
                         (tnp.dsplit, np.dsplit, [1, 3])):
        for g, w in zip(fn(f64(x), arg), ref(x, arg)):
            same(g, w)
    for g, w in zip(tnp.hsplit(f64(np.arange(4.0)), 2), np.hsplit(np.arange(4.0), 2)):
        same(g, w)
    with pytest.raises(ValueError, match="hsplit: only works on Tensors with at least 1 axis"):
        tnp.hsplit(f64(1.0), 1)
    with pytest.raises(ValueError, match=r"vsplit: only works on Tensors with at least 2 axes"):
        tnp.vsplit(f64([1.0]), 1)
    with pytest.raises(ValueError, match=r"dsplit: only works on Tensors with at least 3 axes"):
        tnp.dsplit(f64(np.ones((2, 2))), 1)
    with pytest.raises(ValueError, match="hsplit"):
        tnp.hsplit(f64(x), 5)


def test_atleast_nd():
    for fn, ref in ((tnp.atleast_1d, np.atleast_1d), (tnp.atleast_2d, np.atleast_2d),
                    (tnp.atleast_3d, np.atleast_3d)):
        for shape in ((), (3,), (2, 3), (2, 3, 4, 1)):
            a = np.ones(shape)
            assert fn(f64(a)).shape == ref(a).shape
        got, want = fn(f64(1.0), f64(np.ones(2))), ref(1.0, np.ones(2))
        assert isinstance(got, tuple) and [g.shape for g in got] == [w.shape for w in want]


# -- diagonals, rotations ---------------------------------------------------------------------
def test_diag_diagflat_rot90_flips_rollaxis():
    v, m = np.array([1.0, 2.0, 3.0]), np.arange(12.0).reshape(3, 4)
    for k in (-2, 0, 1):
        same(tnp.diag(f64(v), k), np.diag(v, k))
        same(tnp.diag(f64(m), k), np.diag(m, k))
        same(tnp.diagflat(f64(m[:2, :2]), k), np.diagflat(m[:2, :2], k))
    check_grads(lambda u: tnp.diag(u, -1) ** 2, (f64(v),), order=2, modes=("rev", "fwd"))
    with pytest.raises(ValueError, match=r"diag: input must be 1-D or 2-D, got shape \(1, 1, 1\)"):
        tnp.diag(f64(np.ones((1, 1, 1))))
    x = np.arange(24.0).reshape(2, 3, 4)
    for k in range(-1, 5):
        for axes in ((0, 1), (2, 0), (-1, -2)):
            same(tnp.rot90(f64(x), k, axes), np.rot90(x, k, axes))
    with pytest.raises(ValueError, match="rot90: the two axes must be different"):
        tnp.rot90(f64(x), 1, (0, -3))
    with pytest.raises(ValueError, match=r"rot90: axes must be a pair of axes"):
        tnp.rot90(f64(x), 1, (0, 1, 2))
    same(tnp.fliplr(f64(m)), np.fliplr(m))
    same(tnp.flipud(f64(v)), np.flipud(v))
    with pytest.raises(ValueError, match="fliplr: input must have at least 2 axes"):
        tnp.fliplr(f64(v))
    with pytest.raises(ValueError, match="flipud: input must have at least 1 axis"):
        tnp.flipud(f64(1.0))
    for axis, start in ((2, 0), (0, 3), (1, -1), (-1, 1), (1, 1)):
        same(tnp.rollaxis(f64(x), axis, start), np.rollaxis(x, axis, start))
    with pytest.raises(ValueError, match=r"rollaxis: start must be in \[-3, 3\], got 4"):
        tnp.rollaxis(f64(x), 0, 4)


def test_diag_and_rot90_gradients_against_torch():
    torch = pytest.importorskip("torch")
    v = np.array([1.0, -2.0, 3.0])
    w = np.random.default_rng(0).normal(size=(4, 4))
    g = tg.grad(lambda u: (tnp.diag(u, 1) * f64(w)).sum())(f64(v)).numpy()
    t = torch.tensor(v, requires_grad=True)
    (torch.diag(t, 1) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(g, t.grad.numpy())
    m = np.arange(6.0).reshape(2, 3)
    wr = np.random.default_rng(1).normal(size=(3, 2))
    g = tg.grad(lambda u: (tnp.rot90(u) * f64(wr)).sum())(f64(m)).numpy()
    t = torch.tensor(m, requires_grad=True)
    (torch.rot90(t) * torch.tensor(wr)).sum().backward()
    np.testing.assert_allclose(g, t.grad.numpy())


# -- resize, trim_zeros, insert, delete -------------------------------------------------------
def test_resize_and_trim_zeros():
    a = np.array([[0.0, 1.0], [2.0, 3.0]])
    for shape in ((2, 3), (1, 4), 5, (0,), (3, 0)):
        same(tnp.resize(f64(a), shape), np.resize(a, shape))
    same(tnp.resize(f64(np.zeros(0)), 3), np.resize(np.zeros(0), 3))
    g = tg.grad(lambda u: tnp.resize(u, 7).sum())(f64(a))
    same(g, np.array([[2.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="resize: all dimensions of new_shape must be "
                                         "non-negative"):
        tnp.resize(f64(a), (-1, 2))
    z = np.array([[0, 0, 0, 0], [0, 1, 0, 2], [0, 0, 0, 0]])
    for trim in ("fb", "f", "b", "B"):
        for axis in (None, 0, 1, (0, 1), -1):
            same(tnp.trim_zeros(tg.Tensor(z), trim, axis), np.trim_zeros(z, trim, axis))
    e = np.zeros((2, 3))
    for trim in ("fb", "f", "b"):
        same(tnp.trim_zeros(f64(e), trim), np.trim_zeros(e, trim))
    same(tnp.trim_zeros(f64([0.0, 0.0, 1.0, 0.0, 2.0, 0.0])),
         np.trim_zeros(np.array([0.0, 0.0, 1.0, 0.0, 2.0, 0.0])))
    with pytest.raises(ValueError, match="trim_zeros: trim must be 'fb', 'f' or 'b'"):
        tnp.trim_zeros(f64([0.0]), "x")


def test_insert_matches_numpy():
    b = np.arange(6)
    for obj, values in ((1, 9), ([1, 1], [7, 8]), (slice(2, 4), [7, 8]), ([], []),
                        ([0, 6, 3], 5), ([-6, 6], [1, 2]), (np.array([True, False, True, False,
                                                                       False, False]), 9),
                        (2, [7, 8, 9]), (tg.Tensor(2), 4), (-1, 9), (-6, [7, 8])):
        same(tnp.insert(tg.Tensor(b), obj, values), np.insert(b, np.asarray(obj) if isinstance(
            obj, tg.Tensor) else obj, values))
    x = np.arange(8).reshape(2, 4)
    for obj, values, axis in (((1, 3), 999, 1), (1, [[5], [6]], 1), (1, [5, 6, 7, 8], 0),
                              ([1], [[5], [6]], 1), (2, 7.5, None)):
        same(tnp.insert(tg.Tensor(x), obj, values, axis=axis), np.insert(x, obj, values,
                                                                         axis=axis))
    with pytest.raises(IndexError, match="insert: index 7 is out of bounds for axis 0 with "
                                         "size 6"):
        tnp.insert(tg.Tensor(b), 7, 1)
    with pytest.raises(IndexError, match="insert: index -8 is out of bounds"):
        tnp.insert(tg.Tensor(b), [1, -8], 1)
    with pytest.raises(ValueError, match=r"insert: values of shape \(2, 1\) do not broadcast to "
                                         r"the inserted block of shape \(2,\)"):
        tnp.insert(tg.Tensor(b), -1, [[1], [2]])
    with pytest.raises(ValueError, match=r"insert: obj must be an int or 1-D"):
        tnp.insert(tg.Tensor(b), [[1]], 1)


def test_insert_and_delete_gradients():
    x = f64(np.arange(1.0, 9.0).reshape(2, 4))
    check_grads(lambda u, v: tnp.insert(u, [1, 3], v, axis=1), (x, f64([[10.0], [20.0]])),
                order=2, modes=("rev", "fwd"))
    check_grads(lambda u: tnp.delete(u, [0, 2], axis=1) ** 2, (x,), order=2,
                modes=("rev", "fwd"))


def test_delete_matches_numpy_and_traced_indices():
    b = np.arange(6.0)
    for obj in (1, -1, [0, 2], slice(1, None, 2), slice(None, None, -2), [],
                np.array([True, False, True, False, False, False]), tg.Tensor([0, 5])):
        ref = obj.numpy() if isinstance(obj, tg.Tensor) else obj
        same(tnp.delete(f64(b), obj), np.delete(b, ref))
    x = np.arange(8.0).reshape(2, 4)
    same(tnp.delete(f64(x), [0, 3], axis=1), np.delete(x, [0, 3], axis=1))
    same(tnp.delete(f64(x), 0), np.delete(x, 0))
    f = tg.jit(lambda v, i: tnp.delete(v, i))  # a traced index: recorded, replayed with new values
    same(f(f64(b), tg.Tensor([1, 2])), np.delete(b, [1, 2]))
    same(f(f64(b), tg.Tensor([0, 4])), np.delete(b, [0, 4]))
    same(tg.jit(lambda v, m: tnp.delete(v, m))(f64(b), tg.Tensor(b > 3)), np.delete(b, b > 3))
    with pytest.raises(IndexError, match="delete: index 6 is out of bounds for axis 0 with "
                                         "size 6"):
        tnp.delete(f64(b), 6)
    with pytest.raises(ValueError, match=r"delete: a boolean obj must have shape \(6,\)"):
        tnp.delete(f64(b), np.array([True, False]))
    with pytest.raises(TypeError, match="delete: obj must hold integers or booleans"):
        tnp.delete(f64(b), [0.5])


# -- index tricks -----------------------------------------------------------------------------
def test_r_and_c_match_numpy():
    a32 = np.array([1.0, 2.0], np.float32)
    same(tnp.r_[tg.Tensor(a32), 0.0, tg.Tensor(a32)], np.r_[a32, 0.0, a32])
    same(tnp.r_[0:5, 7, 8], np.r_[0:5, 7, 8])
    same(tnp.r_[0:1:5j], np.r_[0:1:5j].astype(np.float32))
    same(tnp.r_[-1:1:0.5], np.r_[-1:1:0.5].astype(np.float32))
    two = [np.array([1, 2]), np.array([3, 4])]
    for directive in ("0,2", "0,2,0", "1,2", "1,3,1", "-1,2,-1"):
        same(tnp.r_[directive, tg.Tensor(two[0]), tg.Tensor(two[1])],
             np.r_[directive, two[0], two[1]])
    x = np.arange(6).reshape(2, 3)
    same(tnp.r_["-1", tg.Tensor(x), tg.Tensor(x)], np.r_["-1", x, x])
    same(tnp.c_[tg.Tensor([1, 2, 3]), tg.Tensor([4, 5, 6])], np.c_[[1, 2, 3], [4, 5, 6]])
    same(tnp.c_[tg.Tensor([[1, 2, 3]]), 0, 0, tg.Tensor([[4, 5, 6]])],
         np.c_[np.array([[1, 2, 3]]), 0, 0, np.array([[4, 5, 6]])])
    assert len(tnp.r_) == 0 and repr(tnp.c_) == "tapegrad.numpy.c_"
    check_grads(lambda u: tnp.r_[u, 1.0, u ** 2], (f64([1.0, 2.0]),), order=2,
                modes=("rev", "fwd"))
    check_grads(lambda u: tnp.c_[u, u ** 2], (f64([1.0, 2.0]),), order=2, modes=("rev", "fwd"))
    with pytest.raises(ValueError, match="r_: the matrix directives 'r'/'c'"):
        tnp.r_["r", 1, 2]
    with pytest.raises(ValueError, match="r_: a string directive must be the first entry"):
        tnp.r_[1, "0"]
    with pytest.raises(ValueError, match="r_: unknown directive 'a,b'"):
        tnp.r_["a,b", 1]
    with pytest.raises(ValueError, match="c_: the string form builds a numpy.matrix"):
        tnp.c_["1, 2"]


def test_meshgrid_broadcast_and_ix():
    x, y, z = np.array([1, 2, 3]), np.array([4, 5]), np.array([6.0, 7.0])
    for indexing in ("xy", "ij"):
        for sparse in (False, True):
            got = tnp.meshgrid(tg.Tensor(x), tg.Tensor(y), tg.Tensor(z), indexing=indexing,
                               sparse=sparse)
            want = np.meshgrid(x, y, z, indexing=indexing, sparse=sparse)
            assert isinstance(got, tuple)
            for g, w in zip(got, want):
                same(g, w)
    assert tnp.meshgrid() == ()
    with pytest.raises(ValueError, match="meshgrid: indexing must be 'xy' or 'ij'"):
        tnp.meshgrid(tg.Tensor(x), indexing="yx")
    g = tg.grad(lambda u: tnp.meshgrid(u, f64([1.0, 2.0]))[0].sum())(f64([1.0, 2.0, 3.0]))
    same(g, np.full(3, 2.0))
    assert tnp.broadcast_shapes((3, 1), (4,), 1) == (3, 4)
    with pytest.raises(ValueError, match=r"broadcast_shapes: shapes \(2,\), \(3,\) do not "
                                         "broadcast"):
        tnp.broadcast_shapes((2,), (3,))
    a, b = tnp.broadcast_arrays(f64(np.ones((3, 1))), 2.0)
    assert a.shape == b.shape == (3, 1)
    with pytest.raises(ValueError, match="broadcast_arrays: shapes"):
        tnp.broadcast_arrays(f64(np.ones(2)), f64(np.ones(3)))
    m = np.arange(12).reshape(3, 4)
    same(tg.Tensor(m)[tnp.ix_([0, 2], [True, False, True, True])],
         m[np.ix_([0, 2], [True, False, True, True])])
    for g, w in zip(tnp.ix_([], tg.Tensor([1, 2])), np.ix_([], [1, 2])):
        same(g, w)
    with pytest.raises(ValueError, match=r"ix_: every argument must be 1-D"):
        tnp.ix_([[0]])
    with pytest.raises(TypeError, match="ix_: arguments must be integer or boolean"):
        tnp.ix_([0.5])


# -- NumPy signatures of the reductions, clip -------------------------------------------------
def test_reduction_dtype_out_and_correction():
    i8 = np.array([100, 100, 100], np.int8)
    for name in ("sum", "prod", "cumsum", "cumprod"):
        fn, ref = getattr(tnp, name), getattr(np, name)
        same(fn(tg.Tensor(i8), dtype=np.int8), ref(i8, dtype=np.int8))  # wraps as NumPy's
        same(fn(tg.Tensor(i8), dtype=np.float32), ref(i8, dtype=np.float32))
        with pytest.raises(TypeError, match=f"{name}: out= is not supported"):
            fn(tg.Tensor(i8), out=np.zeros(3))
    x = np.array([[1.0, 2.0, 4.0], [3.0, 5.0, 9.0]], np.float32)
    same(tnp.mean(tg.Tensor(x), axis=0, dtype=np.float64), np.mean(x, axis=0, dtype=np.float64))
    same(tnp.mean(tg.Tensor(np.array([1, 2])), dtype=np.int64), np.mean([1, 2], dtype=np.int64))
    same(tnp.sum(tg.Tensor(x), 1, np.float64, None, True), np.sum(x, 1, np.float64, None, True))
    for name in ("var", "std"):
        fn, ref = getattr(tnp, name), getattr(np, name)
        np.testing.assert_allclose(fn(tg.Tensor(x), axis=1, correction=1).numpy(),
                                   ref(x, axis=1, ddof=1), rtol=1e-6)
        same(fn(tg.Tensor(x), 0, np.float64, None, 1), ref(x, 0, np.float64, None, 1))
        np.testing.assert_allclose(fn(tg.Tensor(x), correction=1.0).numpy(), ref(x, ddof=1),
                                   rtol=1e-6)
        with pytest.raises(ValueError, match=f"{name}: give ddof or correction, not both"):
            fn(tg.Tensor(x), ddof=1, correction=1)
    for name in ("max", "min", "argmax", "argmin", "any", "all"):
        with pytest.raises(TypeError, match=f"{name}: out= is not supported"):
            getattr(tnp, name)(tg.Tensor(x), None, np.zeros(()))
    with pytest.raises(TypeError, match="sum: dtype 'nope' is not a dtype"):
        tnp.sum(tg.Tensor(x), dtype="nope")
    # dtype= is differentiable between floating dtypes
    check_grads(lambda v: tnp.sum(v ** 2, axis=0, dtype=np.complex128), (f64(x),), order=2,
                modes=("rev", "fwd"))
    check_grads(lambda v: tnp.cumprod(v, axis=1, dtype=np.float64), (f64(x),), order=2,
                modes=("rev", "fwd"))
    check_grads(lambda v: tnp.var(v, axis=1, correction=1), (f64(x),), order=2,
                modes=("rev", "fwd"))


def test_clip_min_max_keywords():
    x = f64([-2.0, 0.5, 3.0])
    same(tnp.clip(x, min=-1.0, max=1.0), np.clip(x.numpy(), min=-1.0, max=1.0))
    same(tnp.clip(x, max=1.0), np.clip(x.numpy(), max=1.0))
    same(tnp.clip(x, a_min=0.0), np.clip(x.numpy(), 0.0, None))
    g = tg.grad(lambda v: tnp.clip(v, min=-1.0, max=1.0).sum())(x)
    same(g, np.array([0.0, 1.0, 0.0]))
    # both spellings at once is NumPy's ValueError (the keywords were silently ignored)
    with pytest.raises(ValueError, match="clip: pass the bounds either as a_min/a_max or as "
                                         "min=/max="):
        tnp.clip(x, -1.0, 1.0, min=0.0)
    with pytest.raises(ValueError, match="clip: .* not both"):
        tnp.clip(x, a_max=1.0, max=2.0)


# -- tapegrad.numpy.random --------------------------------------------------------------------
def test_numpy_random_is_numpys_random_module():
    import tapegrad.numpy.random as tr

    assert tnp.random is tr
    for name in ("default_rng", "Generator", "seed", "rand", "randn", "normal", "uniform",
                 "choice", "permutation", "RandomState", "SeedSequence", "PCG64"):
        assert getattr(tr, name) is getattr(np.random, name)
    assert sorted(tr.__all__) == sorted(np.random.__all__)
    a = tr.default_rng(1).normal(size=3)
    np.testing.assert_array_equal(a, np.random.default_rng(1).normal(size=3))
    assert "tapegrad.random" in tr.__doc__


# -- nested lists of arrays, NumPy scalars, Tensors and Python numbers: one dtype rule ----------
# Each leaf counts with the dtype it would get alone (arrays, NumPy scalars and Tensors their
# own; Python floats float32, ints int64, complex numbers complex64, bools bool), and the
# result has their promotion: what stacking the leaves gives, and NumPy's `array` on the same
# leaves once the Python numbers are given tapegrad's dtypes.
_ROWS = {  # name -> (a length-2 row, the NumPy row it stands for)
    "py-float": ([1.5, 2.0], np.array([1.5, 2.0], np.float32)),
    "py-int": ([1, 2], np.array([1, 2], np.int64)),
    "py-bool": ([True, False], np.array([True, False])),
    "py-complex": ([1j, 2.0], np.array([1j, 2.0], np.complex64)),
    "f16": (np.array([1.5, 2.0], np.float16),) * 2,
    "f32": (np.array([1.5, 2.0], np.float32),) * 2,
    "f64": (np.array([1.5, 2.0]),) * 2,
    "i8": (np.array([1, 2], np.int8),) * 2,
    "u8": (np.array([1, 2], np.uint8),) * 2,
    "np-scalars-f64": ([np.float64(1.5), 2.0], np.array([1.5, 2.0])),
    "np-scalars-i8": ([np.int8(1), 2], np.array([1, 2], np.int64)),
    "tensor-f32": (tg.Tensor(np.array([1.5, 2.0], np.float32)), np.array([1.5, 2.0], np.float32)),
    "tensor-f64": (f64([1.5, 2.0]), np.array([1.5, 2.0])),
    "tensor-i8": (tg.Tensor(np.array([1, 2], np.int8)), np.array([1, 2], np.int8)),
}
_MAKERS = {  # tapegrad function -> NumPy reference, on a list of rows
    "Tensor": (tg.Tensor, np.array), "array": (tnp.array, np.array),
    "asarray": (tnp.asarray, np.asarray), "stack": (tnp.stack, np.stack),
    "concatenate": (tnp.concatenate, np.concatenate), "vstack": (tnp.vstack, np.vstack),
    "hstack": (tnp.hstack, np.hstack), "column_stack": (tnp.column_stack, np.column_stack),
    "dstack": (tnp.dstack, np.dstack),
}  # fmt: skip


@pytest.mark.parametrize("maker", list(_MAKERS))
def test_lists_of_arrays_get_the_promoted_dtype_of_their_rows(maker):
    fn, ref = _MAKERS[maker]
    for n1, (r1, w1) in _ROWS.items():
        for n2, (r2, w2) in _ROWS.items():
            if maker == "Tensor" and "tensor" in n1 + n2:
                continue  # Tensor() takes data, not Tensors inside lists
            got = fn([r1, r2])
            want = ref([w1, w2])
            if maker in ("Tensor", "array", "asarray") and n1[:3] == n2[:3] == "py-":
                # Python data alone is one array: NumPy's kind, tapegrad's default widths
                want = np.array([r1, r2])
                want = want.astype({"f": np.float32, "c": np.complex64}.get(want.dtype.kind,
                                                                         want.dtype))
            assert got.dtype == want.dtype, f"{maker}([{n1}, {n2}]): {got.dtype}, want {want.dtype}"
            np.testing.assert_array_equal(got.numpy(), want)
            # nested one level deeper, the same rule
            if maker in ("Tensor", "array", "asarray"):
                assert fn([[r1], [r2]]).dtype == want.dtype, (maker, n1, n2)


def test_array_of_float64_arrays_stays_float64_as_stack_does():
    rows = [np.ones(2), np.ones(2)]
    assert tnp.array(rows).dtype == tnp.stack(rows).dtype == np.float64
    assert tnp.asarray(rows).dtype == tg.Tensor(rows).dtype == np.float64
    assert tnp.array([1.0, 2.0]).dtype == np.float32  # Python floats alone: float32
    assert tnp.array([np.float64(1.0), 2.0]).dtype == np.float64
    assert tnp.array([np.ones(2, np.float32), [1.0, 2.0]]).dtype == np.float32


def test_lists_with_traced_tensors_follow_the_same_rule():
    # traced Tensors (built with differentiable ops) give the dtype concrete data gives
    def f(x):
        got = tnp.array([x, np.ones(2)])
        assert got.dtype == np.float64
        assert tnp.array([x, [1, 2]]).dtype == tnp.stack([x, [1, 2]]).dtype == np.float64
        got = tnp.array([x, [1.5, 2.0]])
        assert got.dtype == np.float32
        return tnp.sum(got)

    x = tg.Tensor(np.array([1.0, 2.0], np.float32))
    assert tg.grad(f)(x).numpy().tolist() == [1.0, 1.0]
    i8 = tg.Tensor(np.array([1, 2], np.int8))
    assert tnp.array([i8, [1, 2]]).dtype == tnp.stack([i8, [1, 2]]).dtype == np.int64


@pytest.mark.parametrize("name", ["concatenate", "stack", "hstack", "vstack"])
def test_joining_functions_take_numpys_dtype_and_casting(name):
    fn, ref = getattr(tnp, name), getattr(np, name)
    rows = [np.ones(2), np.array([1.0, 2.0], np.float32)]
    for dtype, casting in [("float32", "same_kind"), ("float64", "safe"), ("int8", "unsafe"),
                           ("complex64", "same_kind")]:  # fmt: skip
        got = fn(rows, dtype=dtype, casting=casting)
        want = ref(rows, dtype=dtype, casting=casting)
        assert got.dtype == want.dtype, (name, dtype)
        np.testing.assert_array_equal(got.numpy(), want)
    with pytest.raises(TypeError, match=f"{name}: cannot cast dtype float64 to int32 under "
                                        "casting='same_kind'"):  # fmt: skip
        fn(rows, dtype="int32")
    with pytest.raises(ValueError, match=f"{name}: casting must be"):
        fn(rows, casting="sometimes")
    if name in ("concatenate", "stack"):
        with pytest.raises(TypeError, match=f"{name}: out= is not supported"):
            fn(rows, out=np.empty(4))
    g = tg.grad(lambda x: tnp.sum(fn([x, x], dtype=np.float64)))(tg.Tensor([1.0, 2.0]))
    assert g.dtype == np.float32 and g.numpy().tolist() == [2.0, 2.0]


def test_linspace_and_arange_bounds_that_are_arrays_keep_their_dtype():
    # Python numbers give float32; float64 arrays and NumPy scalars keep float64, as NumPy
    for args in [(np.zeros(2), np.ones(2), 3), (np.float64(0), 1.0, 4), (0.0, np.ones(3), 3),
                 (np.zeros(2, np.float32), 1.0, 3), (0, 1j, 3), (np.complex128(0), 1, 3)]:
        got, want = tnp.linspace(*args), np.linspace(*args)
        want_dt = np.result_type(want.dtype, np.float32) if any(
            isinstance(a, (np.ndarray, np.generic)) for a in args) else {
            "f": np.float32, "c": np.complex64}[want.dtype.kind]  # fmt: skip
        assert got.dtype == want_dt, args
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    assert tnp.linspace(0, 1, 3).dtype == np.float32
    assert tnp.arange(np.float64(0.5), 3).dtype == np.float64
    assert tnp.arange(0.5, 3).dtype == np.float32 and tnp.arange(3).dtype == np.int64
