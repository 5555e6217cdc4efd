"""Example tests for the names ``tapegrad.numpy`` shares with ``autograd.numpy`` that have no
derivative or write in place: the passthroughs take Tensors (traced ones too, where they
return indices, flags or strings) and return NumPy's result; NumPy's classes and settings are
NumPy's own; the in-place writers raise a TypeError that points to ``.at[]``; the file
functions round-trip Tensors; the window functions give NumPy's values; ``ndarray`` is the
array type; and the errors of the new differentiable names."""

import io
import os

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.numpy import _passthrough


def f64(x):
    return tg.Tensor(np.asarray(x, dtype=np.float64))


def same(got, want):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w)
        return
    if isinstance(want, np.ndarray) and want.dtype.kind in "biufc":
        assert isinstance(got, tg.Tensor), type(got)
        assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
        np.testing.assert_array_equal(got.numpy(), want)
    else:
        assert type(got) is type(want) and np.all(got == want), (got, want)


A = np.arange(6.0).reshape(2, 3)
I8 = np.array([[1, 0, 1], [0, 1, 1]], dtype=np.uint8)
DATES = np.array(["2024-01-05", "2024-01-08", "NaT"], dtype="datetime64[D]")
# name -> (positional arguments, keyword arguments); Tensors replace the arrays below
CALLS = {
    "unravel_index": ((np.array([5, 1, 3]), (2, 3)), {}),
    "ravel_multi_index": (((np.array([1, 0]), np.array([2, 1])), (2, 3)), {}),
    "may_share_memory": ((A, A), {}),
    "shares_memory": ((A, np.zeros(2)), {}),
    "iterable": ((A,), {}),
    "isfortran": ((A,), {}),
    "min_scalar_type": ((np.array([3, 300]),), {}),
    "common_type": ((A, np.array([1, 2])), {}),
    "mintypecode": ((["f", "d"],), {}),
    "typename": (("d",), {}),
    "isnat": ((DATES,), {}),
    "packbits": ((I8,), {"axis": 1}),
    "unpackbits": ((np.array([5, 160], dtype=np.uint8),), {}),
    "array2string": ((A,), {"precision": 2}),
    "array_repr": ((A,), {}),
    "array_str": ((A,), {}),
    "format_float_positional": ((np.float64(0.25),), {}),
    "format_float_scientific": ((np.float64(1234.5),), {"precision": 2}),
    "base_repr": ((10, 3), {}),
    "binary_repr": ((-3,), {"width": 5}),
    "busday_count": ((DATES[:1], DATES[1:2]), {}),
    "busday_offset": ((DATES[:2], 2), {}),
    "is_busday": ((DATES[:2],), {}),
    "datetime_as_string": ((DATES[:2],), {}),
    "datetime_data": ((DATES.dtype,), {}),
}


def _tensors(v):
    if isinstance(v, np.ndarray) and v.dtype.kind in "biufc":
        return tg.Tensor(v)
    if isinstance(v, tuple):
        return tuple(_tensors(e) for e in v)
    return v


def test_every_passthrough_is_probed():
    on_values = {n for n in _passthrough.__all__
                 if getattr(getattr(tnp, n), "__module__", "") == "tapegrad.numpy"}
    assert on_values == set(CALLS)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_passthroughs_take_tensors_and_return_numpys_result(name):
    args, kwargs = CALLS[name]
    want = getattr(np, name)(*args, **kwargs)
    fn = getattr(tnp, name)
    if name in ("may_share_memory", "shares_memory", "isfortran"):  # facts about buffers
        assert fn(*args, **kwargs) == want
        return
    same(fn(*_tensors(args), **kwargs), want)
    if any(isinstance(a, np.ndarray) and a.dtype.kind == "f" for a in args):
        # inside a transform too: the result has no derivative, so the values are read
        def f(x):
            out = fn(*_tensors(tuple(x if a is A else a for a in args)), **kwargs)
            same(out, want)
            return tnp.sum(x)

        tg.grad(f)(f64(A))


def test_passthroughs_refuse_values_traced_by_jit_and_vmap(tmp_path):
    # a replayed tape would keep the first call's result; a batched value is many values
    x = f64(A)
    for name, fn in [("array2string", lambda v: tnp.array2string(v)),
                     ("unravel_index", lambda v: tnp.unravel_index(tnp.argmax(v), (2, 3))),
                     ("save", lambda v: tnp.save(tmp_path / "x.npy", v))]:
        with pytest.raises(TypeError, match=rf"^{name}: .*under jit/trace it would run once"):
            tg.jit(lambda v, fn=fn: fn(v) and v)(x)
        with pytest.raises(TypeError, match=rf"^{name}: .*under vmap the value stands for a "
                                            "whole batch"):
            tg.vmap(lambda v, fn=fn: fn(v) and v)(x)
    assert not (tmp_path / "x.npy").exists()


def test_passthroughs_name_themselves_in_numpys_errors():
    with pytest.raises(TypeError, match="^isnat: ufunc 'isnat' is only defined"):
        tnp.isnat(tg.Tensor([1.0]))
    with pytest.raises(ValueError, match="^unravel_index: index 9 is out of bounds"):
        tnp.unravel_index(9, (2, 3))


def test_memory_facts_read_the_tensor_buffers():
    x = f64(A)
    assert tnp.shares_memory(x, x) and tnp.may_share_memory(x, x[0])
    assert not tnp.shares_memory(x, f64(A))
    assert tnp.iterable(x) and not tnp.iterable(f64(1.0))
    assert tnp.min_scalar_type(tg.Tensor(300)) == np.uint16
    assert tnp.min_scalar_type(tg.Tensor([3, 300])) == np.int64  # arrays keep their dtype
    assert tnp.common_type(x, tg.Tensor(np.array([1], np.float32))) is np.float64


@pytest.mark.parametrize("name", ["broadcast", "busdaycalendar", "flatiter", "ndenumerate",
                                  "ndindex", "poly1d", "ufunc",
                                  "frompyfunc", "matrix", "asmatrix", "bmat", "recarray",
                                  "errstate", "seterr", "geterr", "seterrcall", "geterrcall",
                                  "getbufsize", "setbufsize", "printoptions",
                                  "set_printoptions", "get_printoptions", "get_include", "info",
                                  "show_config", "show_runtime", "test", "memmap"])
def test_numpys_own_objects(name):
    assert getattr(tnp, name) is getattr(np, name)


def test_numpys_objects_read_tensors_outside_transforms():
    x = f64(A)
    assert tnp.broadcast(x, f64([1.0, 2.0, 3.0])).shape == (2, 3)
    assert [i for i, _ in tnp.ndenumerate(x)][-1] == (1, 2)
    assert [float(v) for v in tnp.nditer(x)] == A.ravel().tolist()
    with tnp.printoptions(precision=1):
        assert "0.3" in repr(f64([1 / 3]))
    assert len(tnp.nested_iters(x, [[0], [1]])) == 2
    for use in (lambda v: list(tnp.nditer(v)), lambda v: tnp.nested_iters([v], [[0], [1]]),
                lambda v: list(tnp.ndenumerate(v)), lambda v: tnp.broadcast(v, v)):
        with pytest.raises(TypeError, match=r"of a Tensor that a transform is differentiating"):
            tg.grad(lambda v, use=use: use(v) and v.sum())(x)


@pytest.mark.parametrize("name", ["copyto", "fill_diagonal", "place", "put", "put_along_axis",
                                  "putmask"])
def test_in_place_writers_point_to_at(name):
    args = {"copyto": (f64(A), f64(A)), "fill_diagonal": (f64(np.eye(2)), 1.0),
            "place": (f64(A), A > 2, [0.0]), "put": (f64(A), [0], [1.0]),
            "put_along_axis": (f64(A), np.zeros((2, 1), int), 0.0, 1),
            "putmask": (f64(A), A > 2, 0.0)}[name]
    with pytest.raises(TypeError, match=rf"^{name}: .*in place.*immutable.*\.at\["):
        getattr(tnp, name)(*args)


def test_the_at_forms_the_errors_show_compute_numpys_results():
    a = np.eye(3)
    want = a.copy()
    np.fill_diagonal(want, 5.0)
    got = f64(a).at[tnp.diag_indices_from(f64(a))].set(5.0)
    np.testing.assert_array_equal(got.numpy(), want)
    want = A.copy()
    np.putmask(want, A > 2, -1.0)
    np.testing.assert_array_equal(tnp.where(A > 2, -1.0, f64(A)).numpy(), want)
    want = A.copy()
    np.put(want, [0, 4], [7.0, 8.0])
    got = tnp.reshape(tnp.ravel(f64(A)).at[tg.Tensor([0, 4])].set(f64([7.0, 8.0])), A.shape)
    np.testing.assert_array_equal(got.numpy(), want)


# -- files and buffers -------------------------------------------------------------------------
def test_save_load_round_trips_tensors(tmp_path):
    x = f64(A)
    tnp.save(tmp_path / "x.npy", x)
    back = tnp.load(tmp_path / "x.npy")
    assert isinstance(back, tg.Tensor) and back.dtype == np.float64
    np.testing.assert_array_equal(back.numpy(), A)
    assert tnp.load(tmp_path / "x.npy", mmap_mode="r").shape == (2, 3)
    tnp.savez(tmp_path / "p.npz", x, w=tg.Tensor([1, 2]))
    with tnp.load(tmp_path / "p.npz") as z:
        assert sorted(z) == ["arr_0", "w"] and len(z) == 2
        np.testing.assert_array_equal(z["arr_0"].numpy(), A)
        assert z["w"].dtype == np.int64
    tnp.savez_compressed(tmp_path / "c.npz", y=x)
    np.testing.assert_array_equal(tnp.load(tmp_path / "c.npz")["y"].numpy(), A)
    with pytest.raises(ValueError, match="^load: .*allow_pickle"):
        np.save(tmp_path / "o.npy", np.array([{}], dtype=object))
        tnp.load(tmp_path / "o.npy")


def test_text_and_buffer_readers_return_tensors_of_numpys_dtype(tmp_path):
    path = os.fspath(tmp_path / "x.txt")
    tnp.savetxt(path, f64(A))
    for got in (tnp.loadtxt(path), tnp.genfromtxt(path)):
        assert got.dtype == np.float64 and got.shape == (2, 3)
        np.testing.assert_array_equal(got.numpy(), A)
    A.tofile(tmp_path / "x.bin")
    np.testing.assert_array_equal(tnp.fromfile(tmp_path / "x.bin").numpy(), A.ravel())
    np.testing.assert_array_equal(tnp.frombuffer(A.tobytes()).numpy(), A.ravel())
    np.testing.assert_array_equal(tnp.fromstring("1 2 3", sep=" ").numpy(), [1.0, 2.0, 3.0])
    regex = tnp.fromregex(io.StringIO("1 2\n3 4\n"), r"(\d) (\d)", [("a", int), ("b", int)])
    assert isinstance(regex, np.ndarray) and regex["b"].tolist() == [2, 4]  # structured
    got = tnp.fromiter((tg.Tensor(v) for v in [1.0, 2.5]), dtype=float)
    np.testing.assert_array_equal(got.numpy(), [1.0, 2.5])
    with pytest.raises(TypeError, match="item\\(\\) of a Tensor that a transform is "
                                        "differentiating"):
        tg.grad(lambda x: tnp.fromiter(iter([x]), dtype=float).sum())(f64(1.0))


# -- types, version, windows -------------------------------------------------------------------
def test_ndarray_is_the_array_type():
    x = f64(A)
    assert isinstance(x, tnp.ndarray) and isinstance(A, tnp.ndarray)
    assert not isinstance([1.0], tnp.ndarray) and not isinstance(1.0, tnp.ndarray)
    assert issubclass(tg.Tensor, tnp.ndarray) and not issubclass(list, tnp.ndarray)
    seen = []
    tg.grad(lambda v: seen.append(isinstance(v, tnp.ndarray)) or v.sum())(x)
    assert seen == [True]
    with pytest.raises(TypeError, match="not a constructor; make a Tensor with tnp.asarray"):
        tnp.ndarray((2, 3))


def test_scalar_types_and_version_are_numpys():
    for name in ("longdouble", "clongdouble", "long", "ulong", "bytes_", "str_", "void",
                 "object_", "character", "flexible", "datetime64", "timedelta64", "record"):
        assert getattr(tnp, name) is getattr(np, name)
    assert tnp.__version__ == np.__version__
    assert tnp.zeros(2, dtype=tnp.longdouble).dtype == np.longdouble


@pytest.mark.parametrize("name", ["bartlett", "blackman", "hamming", "hanning"])
def test_windows_are_numpys_values_in_float32(name):
    for m in range(-1, 8):
        got = getattr(tnp, name)(m)
        want = getattr(np, name)(m)
        assert got.dtype == np.float32 and got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want.astype(np.float32), atol=1e-7)
    assert getattr(tnp, name)(4.0).shape == (4,)
    with pytest.raises(TypeError, match=f"{name}: M must be an integer"):
        getattr(tnp, name)(2.5)


def test_kaiser_values_and_errors():
    np.testing.assert_allclose(tnp.kaiser(6, 2.5).numpy(), np.kaiser(6, 2.5).astype(np.float32))
    assert tnp.kaiser(4, f64(1.0)).dtype == np.float64
    assert tnp.kaiser(4, tg.Tensor(np.array(2))).dtype == np.float64
    with pytest.raises(ValueError, match="kaiser: beta must be a scalar"):
        tnp.kaiser(3, f64([1.0, 2.0]))


# -- errors of the differentiable names --------------------------------------------------------
def test_errors_name_the_function():
    with pytest.raises(ValueError, match="geomspace: a geometric sequence cannot include zero"):
        tnp.geomspace(f64(0.0), 1.0)
    with pytest.raises(ValueError, match="linspace: num must be non-negative"):
        tnp.linspace(f64(0.0), 1.0, -1)
    with pytest.raises(ValueError, match="logspace: axis 3 is out of bounds"):
        tnp.logspace(f64([0.0]), 1.0, 3, axis=3)
    with pytest.raises(TypeError, match="unwrap: complex phases"):
        tnp.unwrap(tg.Tensor([1j]))
    with pytest.raises(ValueError, match="unwrap: p must have at least one axis"):
        tnp.unwrap(f64(1.0))
    with pytest.raises(ValueError, match=r"histogramdd: the dimension of bins \(3\)"):
        tnp.histogramdd(f64(np.zeros((4, 2))), bins=[1, 2, 3])
    with pytest.raises(ValueError, match="histogramdd: bins\\[0\\] must be positive"):
        tnp.histogramdd(f64(np.zeros((4, 1))), bins=0)
    with pytest.raises(ValueError, match="histogramdd: weights .* one weight per point"):
        tnp.histogramdd(f64(np.zeros((4, 1))), weights=f64(np.ones(3)))
    with pytest.raises(ValueError, match="histogram2d: x and y must have the same length"):
        tnp.histogram2d(f64([1.0]), f64([1.0, 2.0]))
    with pytest.raises(ValueError, match="make_diagonal: axis1 .* and axis2 .* must be distinct"):
        tnp.make_diagonal(f64([1.0, 2.0]), axis1=0, axis2=-2)
    with pytest.raises(ValueError, match="make_diagonal: D must have at least one axis"):
        tnp.make_diagonal(f64(1.0))
    with pytest.raises(ValueError, match="apply_along_axis: cannot apply along an axis when any "
                                         "iteration dimension is 0"):
        tnp.apply_along_axis(tnp.sum, 1, f64(np.zeros((0, 2))))
    with pytest.raises(ValueError, match="apply_along_axis: the function returned results of "
                                         "different shapes"):
        tnp.apply_along_axis(lambda v: v[: int(v[0]) + 1], 1, f64([[0.0, 1.0], [1.0, 1.0]]))
    with pytest.raises(ValueError, match="apply_over_axes: the function is not returning an "
                                         "array of the correct shape"):
        tnp.apply_over_axes(lambda a, ax: tnp.sum(a), f64(np.ones((2, 2, 2))), [0])
    with pytest.raises(ValueError, match="vectorize: not a valid gufunc signature"):
        tnp.vectorize(tnp.sum, signature="(n->()")
    with pytest.raises(ValueError, match="vectorize: inconsistent size for core dimension 'n'"):
        tnp.vectorize(lambda a, b: tnp.sum(a * b), signature="(n),(n)->()")(f64([1.0]),
                                                                            f64([1.0, 2.0]))
    with pytest.raises(ValueError, match="vectorize: cannot call vectorize on size 0 inputs"):
        tnp.vectorize(tnp.sin)(f64(np.zeros(0)))
    with pytest.raises(ValueError, match="asarray_chkfinite: array must not contain infs"):
        tnp.asarray_chkfinite(f64([1.0, np.nan]))
    with pytest.raises(TypeError, match="require: Tensors are immutable, so 'W'"):
        tnp.require(f64(A), requirements=["W"])
    with pytest.raises(ValueError, match="require: unknown requirement 'X'"):
        tnp.require(f64(A), requirements="X")
    with pytest.raises(TypeError, match="fromfunction: like= is not supported"):
        tnp.fromfunction(lambda i: i, (2,), like=A)


def test_vectorize_forms():
    @tnp.vectorize
    def half(v):
        return v / 2

    np.testing.assert_array_equal(half(f64([2.0, 4.0])).numpy(), [1.0, 2.0])

    @tnp.vectorize(otypes=[np.float64], excluded={"scale"})
    def scaled(v, scale):
        return v * scale[0]

    np.testing.assert_array_equal(scaled(f64([1.0, 2.0]), scale=[3.0]).numpy(), [3.0, 6.0])
    pair = tnp.vectorize(lambda v: (v, v * v))(f64([1.0, 3.0]))
    assert isinstance(pair, tuple) and pair[1].numpy().tolist() == [1.0, 9.0]
    assert tnp.vectorize(tnp.sin, otypes="d")(f64(np.zeros((0, 2)))).shape == (0, 2)
