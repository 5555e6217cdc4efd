"""NumPy dispatch (NEP 13 ``__array_ufunc__``, NEP 18 ``__array_function__``) and DLPack
exchange with NumPy, PyTorch and JAX (``tapegrad.numpy.interop``)."""

from __future__ import annotations

import operator
import types

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.numpy.interop import from_dlpack, numpy_dispatch_target


def t64(a):
    return tg.Tensor(np.asarray(a, dtype=np.float64))


X = t64([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])


# -- NumPy code runs on Tensors, traced and differentiable --------------------------------------
def test_grad_of_numpy_code_equals_the_tnp_version():
    f_np = lambda x: np.sum(np.sin(x) * x)  # noqa: E731
    f_tnp = lambda x: tnp.sum(tnp.sin(x) * x)  # noqa: E731
    x = X
    g = tg.grad(f_np)(x)
    assert isinstance(g, tg.Tensor)
    np.testing.assert_allclose(g.numpy(), tg.grad(f_tnp)(x).numpy(), rtol=1e-15)
    a = x.numpy()
    np.testing.assert_allclose(g.numpy(), np.cos(a) * a + np.sin(a), rtol=1e-14)


def test_numpy_code_under_jit_vmap_jvp_and_second_order():
    def f(x):
        y = np.tanh(x) @ np.transpose(x)
        return np.mean(np.exp(-y), keepdims=True)[0, 0] + np.linalg.det(y + 3 * np.eye(2))

    def f_tnp(x):
        y = tnp.tanh(x) @ tnp.transpose(x)
        return tnp.mean(tnp.exp(-y), keepdims=True)[0, 0] + tnp.linalg.det(y + 3 * tnp.eye(2))

    x = X
    want = tg.grad(f_tnp)(x).numpy()
    np.testing.assert_allclose(tg.jit(tg.grad(f))(x).numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(tg.jit(tg.grad(f))(x * 2).numpy(),
                               tg.grad(f_tnp)(x * 2).numpy(), rtol=1e-12)  # fmt: skip
    xs = tnp.stack([x, x * 0.5, -x])
    np.testing.assert_allclose(tg.vmap(tg.grad(f))(xs).numpy(),
                               tg.vmap(tg.grad(f_tnp))(xs).numpy(), rtol=1e-12)  # fmt: skip
    v = tnp.ones_like(x)
    out, tan = tg.jvp(f, (x,), (v,))
    out2, tan2 = tg.jvp(f_tnp, (x,), (v,))
    np.testing.assert_allclose([out.item(), tan.item()], [out2.item(), tan2.item()], rtol=1e-12)
    h = tg.hessian(lambda x: np.sum(np.sin(x) ** 2))(x[0])
    h_tnp = tg.hessian(lambda x: tnp.sum(tnp.sin(x) ** 2))(x[0])
    np.testing.assert_allclose(h.numpy(), h_tnp.numpy(), rtol=1e-12)


@pytest.mark.parametrize(
    "f, f_tnp",
    [
        (lambda x: np.concatenate([x, x * 2], axis=1), lambda x: tnp.concatenate([x, x * 2], 1)),
        (lambda x: np.stack([x, x], axis=0), lambda x: tnp.stack([x, x], axis=0)),
        (lambda x: np.mean(x, axis=0, keepdims=True), lambda x: tnp.mean(x, 0, keepdims=True)),
        (lambda x: np.sum(x, axis=1), lambda x: tnp.sum(x, axis=1)),
        (lambda x: np.linalg.norm(x), lambda x: tnp.linalg.norm(x)),
        (lambda x: np.linalg.solve(x @ x.T + np.eye(2), x), lambda x: tnp.linalg.solve(
            x @ x.T + tnp.eye(2), x)),
        (lambda x: np.where(x > 0, x, 0.1 * x), lambda x: tnp.where(x > 0, x, 0.1 * x)),
        (lambda x: np.einsum("ij,kj->ik", x, x), lambda x: tnp.einsum("ij,kj->ik", x, x)),
        (lambda x: np.abs(x) + np.power(x, 2) + np.arctan2(x, 1.5), lambda x: tnp.abs(x)
         + tnp.power(x, 2) + tnp.arctan2(x, 1.5)),
        (lambda x: np.clip(x, -0.5, 1.0), lambda x: tnp.clip(x, -0.5, 1.0)),
        (lambda x: np.reshape(x, (3, 2)), lambda x: tnp.reshape(x, (3, 2))),
        (lambda x: np.std(x, axis=1, ddof=1), lambda x: tnp.std(x, axis=1, ddof=1)),
    ],
)
def test_numpy_functions_match_tnp_values_and_gradients(f, f_tnp):
    x = X
    got, want = f(x), f_tnp(x)
    assert isinstance(got, tg.Tensor) and got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-14)
    g = tg.grad(lambda x: tnp.sum(f(x) ** 2))(x)
    g_tnp = tg.grad(lambda x: tnp.sum(f_tnp(x) ** 2))(x)
    np.testing.assert_allclose(g.numpy(), g_tnp.numpy(), rtol=1e-12)


def test_mixed_numpy_arrays_are_constants():
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    g = tg.grad(lambda x: np.sum(np.multiply(a, x) + np.maximum(a, x)))(X)
    np.testing.assert_allclose(g.numpy(), a + (X.numpy() > a), rtol=1e-15)
    # np.linalg.solve(ndarray, Tensor): dispatched by the Tensor in second position
    m = np.array([[2.0, 0.0], [0.0, 4.0]])
    g = tg.grad(lambda b: np.sum(np.linalg.solve(m, b)))(t64([1.0, 1.0]))
    np.testing.assert_allclose(g.numpy(), [0.5, 0.25])


def test_binary_operators_between_arrays_and_tensors_return_tensors():
    a = np.array([1.0, 2.0, 3.0])
    x = t64([3.0, 2.0, 1.0])
    for out in (a + x, a - x, a * x, a / x, a ** x, a @ x, a < x, a == x, np.float64(2.0) * x):
        assert isinstance(out, tg.Tensor)
    np.testing.assert_allclose((a - x).numpy(), [-2.0, 0.0, 2.0])
    assert (a < x).dtype == np.bool_ and (a < x).numpy().tolist() == [True, False, False]
    assert (np.float32(2.0) * tg.Tensor([1.0])).dtype == np.float32
    assert (np.float64(2.0) * tg.Tensor([1.0])).dtype == np.float64  # NumPy's promotion
    g = tg.grad(lambda x: tnp.sum(a * x) + a @ x)(x)
    np.testing.assert_allclose(g.numpy(), 2 * a)


def test_ufunc_methods():
    x = X
    np.testing.assert_allclose(np.add.reduce(x).numpy(), x.numpy().sum(axis=0))
    np.testing.assert_allclose(np.add.reduce(x, axis=1, keepdims=True).numpy(),
                               x.numpy().sum(axis=1, keepdims=True))  # fmt: skip
    np.testing.assert_allclose(np.multiply.reduce(x, None).numpy(), x.numpy().prod())
    np.testing.assert_allclose(np.maximum.reduce(x, axis=1).numpy(), x.numpy().max(axis=1))
    np.testing.assert_allclose(np.logaddexp.reduce(x, axis=0).numpy(),
                               np.logaddexp.reduce(x.numpy(), axis=0), rtol=1e-14)  # fmt: skip
    np.testing.assert_allclose(np.multiply.accumulate(x, axis=1).numpy(),
                               np.multiply.accumulate(x.numpy(), axis=1))  # fmt: skip
    np.testing.assert_allclose(np.add.accumulate(x).numpy(), np.add.accumulate(x.numpy()))
    v = t64([1.0, 2.0])
    np.testing.assert_allclose(np.multiply.outer(v, x).numpy(),
                               np.multiply.outer(v.numpy(), x.numpy()))  # fmt: skip
    np.testing.assert_allclose(np.subtract.outer(np.arange(3.0), v).numpy(),
                               np.subtract.outer(np.arange(3.0), v.numpy()))  # fmt: skip
    g = tg.grad(lambda v: np.sum(np.multiply.outer(v, v)))(v)
    np.testing.assert_allclose(g.numpy(), 2 * v.numpy().sum() * np.ones(2))
    assert tg.grad(lambda x: np.add.reduce(x, axis=None))(x).numpy().tolist() == [[1.0] * 3] * 2


def test_ufunc_method_errors():
    x = X
    with pytest.raises(TypeError, match=r"numpy\.add\.at updates an array in place.*x\.at"):
        np.add.at(x, [0], 1.0)
    with pytest.raises(TypeError, match=r"numpy\.subtract\.reduce is not supported.*"
                                        r"np\.add\.reduce \(tnp\.sum\)"):
        np.subtract.reduce(x)
    with pytest.raises(TypeError, match=r"numpy\.maximum\.accumulate is not supported"):
        np.maximum.accumulate(x)
    with pytest.raises(TypeError, match=r"numpy\.add\.reduceat is not supported"):
        np.add.reduceat(x, [0, 1])
    with pytest.raises(TypeError, match=r"numpy\.add\.reduce: the keyword initial=1\.0"):
        np.add.reduce(x, initial=1.0)


# -- errors -------------------------------------------------------------------------------------
def test_out_arguments_are_a_clear_error():
    x = X
    buf = np.empty((2, 3))
    with pytest.raises(TypeError, match=r"numpy\.sin: out= is not supported.*immutable"):
        np.sin(x, out=buf)
    with pytest.raises(TypeError, match=r"numpy\.sum: out= is not supported"):
        np.sum(x, axis=0, out=np.empty(3))
    with pytest.raises(TypeError, match=r"numpy\.concatenate: out= is not supported"):
        np.concatenate([x, x], out=np.empty((4, 3)))
    a = np.zeros((2, 3))
    with pytest.raises(TypeError, match=r"a = a \+ t rather than a \+= t"):
        a += x
    assert (a == 0).all()
    # out=None is NumPy's default: accepted
    assert np.sum(x, out=None).shape == ()
    assert np.mean(x, axis=0, dtype=None).shape == (3,)


def test_unsupported_ufunc_keywords():
    with pytest.raises(TypeError, match=r"numpy\.sin: the keyword where=.*tnp\.where"):
        np.sin(X, where=np.array([True, False, True]))
    with pytest.raises(TypeError, match=r"numpy\.sin: the keyword dtype=.*tnp\.astype"):
        np.sin(X, dtype=np.float32)
    assert np.sin(X, casting="same_kind").shape == X.shape  # defaults are fine


def test_functions_tapegrad_lacks_pass_through_numpy_as_autograd_does():
    # outside transforms NumPy's own function runs on the value and returns its plain result
    # (tapegrad.numpy has every function of NumPy's namespace: these are from its submodules)
    from numpy.polynomial import polynomial as P

    x = X
    np.testing.assert_array_equal(np.emath.logn(2, x), np.emath.logn(2, x.numpy()))
    h = P.polyval2d(x[0], x[1], np.eye(2))
    np.testing.assert_array_equal(h, P.polyval2d(x.numpy()[0], x.numpy()[1], np.eye(2)))
    assert type(h) is np.ndarray
    # inside grad/jvp, a function of boolean values only (no derivative to lose) passes too
    w = tg.Tensor(np.array([0.5, -1.0, 2.0]))
    c = np.array([[1, 2], [3, 4]])

    def f(v):
        n = int(P.polyval2d(v > 0, v > 0, c).sum())  # 10 + 1 + 10
        return tnp.sum(v * v) * n

    np.testing.assert_allclose(tg.grad(f)(w).numpy(), 2 * w.numpy() * 21)
    _, t = tg.jvp(f, (w,), (tg.Tensor(np.ones(3)),))
    assert float(t) == 21 * 2 * float(np.sum(w.numpy()))


def test_passthroughs_that_would_lose_a_gradient_name_the_numpy_function():
    from numpy.polynomial import polynomial as P

    w = tg.Tensor(np.array([0.5, -1.0, 2.0]))
    with pytest.raises(TypeError, match=r"numpy\.logn was called with a tapegrad Tensor, but "
                                        r"tapegrad\.numpy has no 'logn'.*floating \(complex128\)"):
        tg.grad(lambda v: tnp.sum(tg.Tensor(np.emath.logn(2, v))))(w)
    c = np.eye(2)
    with pytest.raises(TypeError, match=r"numpy\.polyval2d .*has no 'polyval2d'.*jit"):
        tg.jit(lambda v: tnp.sum(v) * P.polyval2d(v > 0, v > 0, c).sum())(w)
    with pytest.raises(TypeError, match=r"numpy\.polyval2d .*has no 'polyval2d'.*vmap"):
        tg.vmap(lambda v: tnp.sum(v) * P.polyval2d(v > 0, v > 0, c).sum())(
            tg.Tensor(np.ones((2, 3))))
    with pytest.raises(TypeError, match=r"put: NumPy's put writes into its first argument in "
                                        r"place.*\.at\[ind\]\.set"):
        np.put(X, [0], [1.0])


def test_arguments_tapegrad_does_not_take():
    with pytest.raises(TypeError, match=r"numpy\.sum dispatches to tapegrad\.numpy\.sum\(x, "
                                        r"axis=None.*keepdims=False\).*where"):
        np.sum(X, where=np.ones((2, 3), bool))


def test_traced_tensor_still_refuses_to_become_an_array():
    with pytest.raises(TypeError, match=r"np.asarray.* a transform is differentiating") as info:
        tg.grad(lambda x: np.asarray(x).sum())(X)
    # the advice points at what works: NumPy's functions on the Tensor record
    assert "NumPy's functions called on Tensors, record" in str(info.value)
    with pytest.raises(TypeError, match=r"np.asarray\) of a batched value inside vmap"):
        tg.vmap(lambda x: np.asarray(x).sum())(X)
    np.testing.assert_array_equal(np.asarray(X), X.numpy())  # a constant converts


INTEGER_TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                 np.uint64, np.intp, np.bool_]


@pytest.mark.parametrize("sctype", INTEGER_TYPES, ids=lambda t: t.__name__)
def test_numpy_integer_types_of_a_traced_tensor_decide_as_int(sctype):
    # np.int64(x) asks for an integer array: no derivative is lost, so a one-element Tensor
    # converts as int(x) does (a decision, guarded on replaying tapes) ...
    seen = []

    def f(x):
        seen.append((sctype(x[0]), sctype(x[1:2])))
        return tnp.sum(x * x)

    tg.grad(f)(tg.Tensor(np.array([2.7, 1.0])))
    scalar, one = seen[0]
    assert scalar == np.array(2.7).astype(sctype) and type(scalar) is sctype
    assert one.shape == (1,) and one.dtype == sctype and one[0] == sctype(1)
    f_jit = tg.jit(lambda x: x * tnp.asarray(float(sctype(x[0]))))
    for v in (2.0, 3.0, 0.0):  # a guard on the decided value: a new value retraces
        assert f_jit(tg.Tensor(np.array([v]))).item() == v * float(np.array(v).astype(sctype))
    # ... and several elements raise int()'s error, pointing to astype
    kind = "bool" if sctype is np.bool_ else "int"
    with pytest.raises((TypeError, ValueError), match=rf"^{kind}\(\): only a one-element Tensor "
                       rf"converts.*x\.astype\('{np.dtype(sctype).name}'\)"):
        tg.grad(lambda x: sctype(x) and tnp.sum(x))(tg.Tensor(np.array([2.7, 1.0])))


def test_numpy_float_types_of_a_traced_tensor_still_refuse():
    with pytest.raises(TypeError, match="of a Tensor that a transform is differentiating"):
        tg.grad(lambda x: np.float64(x) * 1.0 and tnp.sum(x))(tg.Tensor(np.array([2.0])))


# -- NumPy dispatch inside vmap: batched Tensors reach tapegrad.numpy's batching rules ----------
VMAP_CASES = {
    "ufuncs": (lambda x: np.exp(np.sin(x)) * np.cos(x) - np.square(x), (0,)),
    "sum": (lambda x: np.sum(x), (0,)),
    "sum_axis": (lambda x: np.sum(x, axis=0, keepdims=True), (0,)),
    "mean_neg_axis": (lambda x: np.mean(x, axis=-1), (0,)),
    "norm": (lambda x: np.linalg.norm(x), (0,)),
    "add_reduce": (lambda x: np.add.reduce(x, axis=1), (0,)),
    "cumprod": (lambda x: np.multiply.accumulate(x, axis=0), (0,)),
    "outer": (lambda x, w: np.multiply.outer(np.max(x, axis=0), w), (0, None)),
    "concat_where": (lambda x: np.concatenate([np.where(x > 0, x, 0.0), x]), (0,)),
    "metadata": (lambda x: x * np.ndim(x) + np.size(x) + np.shape(x)[-1], (0,)),
    "matmul": (lambda x, w: np.matmul(np.transpose(x), w), (0, 0)),
    "solve": (lambda x, w: np.linalg.solve(x @ np.transpose(x) + 4 * np.eye(2), w), (0, None)),
}


@pytest.mark.parametrize("name", sorted(VMAP_CASES))
@pytest.mark.parametrize("size", [0, 1, 3])
def test_numpy_functions_under_vmap_match_the_loop(name, size):
    from tapegrad.testing import check_vmap

    f, in_axes = VMAP_CASES[name]
    rng = np.random.default_rng(size)
    xs = t64(rng.normal(size=(size, 2, 3)))
    n_args = len(in_axes)
    args = (xs,) if n_args == 1 else (xs, t64(rng.normal(size=(size, 2, 3)) if in_axes[1] == 0
                                               else rng.normal(size=(2,))))  # fmt: skip
    if name == "outer":
        args = (xs, t64(rng.normal(size=(4,))))
    check_vmap(f, args, in_axes=in_axes)
    # vmap(grad) of a batch of size 0 runs solve's forward on a zero matrix (a limitation of
    # vmap with tnp.linalg.solve as well), so that one combination checks values only.
    if not (name == "solve" and size == 0):
        check_vmap(tg.grad(lambda *a: tnp.sum(f(*a) ** 2)), args, in_axes=in_axes)


def test_numpy_code_on_batched_values_equals_tnp():
    """np.sin / np.sum on a batched Tensor run the same batching rules as tnp's own calls."""
    xs = t64(np.random.default_rng(0).normal(size=(4, 3)))
    f = lambda x: np.sum(np.sin(x) * x)  # noqa: E731
    f_tnp = lambda x: tnp.sum(tnp.sin(x) * x)  # noqa: E731
    for t in (tg.vmap, lambda g: tg.jit(tg.vmap(g))):
        np.testing.assert_allclose(t(f)(xs).numpy(), t(f_tnp)(xs).numpy(), rtol=1e-15)
        np.testing.assert_allclose(t(tg.grad(f))(xs).numpy(),
                                   t(tg.grad(f_tnp))(xs).numpy(), rtol=1e-15)  # fmt: skip
    a = xs.numpy()
    np.testing.assert_allclose(tg.vmap(f)(xs).numpy(), np.sum(np.sin(a) * a, axis=1))
    # in_axes=1, nested vmap, and a NumPy array constant on the left of a batched Tensor
    w = np.array([1.0, -2.0, 0.5, 3.0])
    np.testing.assert_allclose(tg.vmap(lambda x: w @ np.sin(x), in_axes=1)(xs).numpy(),
                               w @ np.sin(a))  # fmt: skip
    np.testing.assert_allclose(tg.vmap(tg.vmap(lambda x: np.sum(np.cos(x))))(xs).numpy(),
                               np.cos(a))  # fmt: skip
    with pytest.raises(TypeError, match="has no 'logn'"):
        tg.vmap(lambda x: np.emath.logn(2, x))(xs)


def test_metadata_functions_work_on_traced_tensors():
    seen = {}

    def f(x):
        seen["shape"], seen["ndim"], seen["size"] = np.shape(x), np.ndim(x), np.size(x)
        seen["rt"] = np.result_type(x, np.float32)
        seen["complex"] = np.iscomplexobj(x)
        return np.sum(np.copy(x) ** 2)

    g = tg.grad(f)(X)
    assert seen == {"shape": (2, 3), "ndim": 2, "size": 6, "rt": np.float64, "complex": False}
    np.testing.assert_allclose(g.numpy(), 2 * X.numpy())


def test_dispatch_is_table_free(monkeypatch):
    """A function tapegrad.numpy gains later dispatches with no registration."""
    calls = []

    def median(x, axis=None, keepdims=False):
        calls.append(axis)
        return tnp.mean(x, axis=axis, keepdims=keepdims)

    monkeypatch.setattr(tnp, "median", median, raising=False)
    out = np.median(X, axis=0)
    assert calls == [0] and out.shape == (3,)
    assert numpy_dispatch_target(np.median) is median

    def eigvalsh(a):
        return tnp.linalg.svdvals(a)

    monkeypatch.setattr(tnp.linalg, "eigvalsh", eigvalsh, raising=False)
    assert np.linalg.eigvalsh(X @ X.T).shape == (2,)

    fft = types.SimpleNamespace(fft=lambda a, n=None, axis=-1, norm=None: tnp.sum(a, axis=axis))
    monkeypatch.setattr(tnp, "fft", fft, raising=False)
    assert np.fft.fft(X).shape == (2,)

    def arccosh_ufunc(x):
        return x * 0

    monkeypatch.setattr(tnp, "spacing", arccosh_ufunc, raising=False)
    assert (np.spacing(X).numpy() == 0).all()


def test_foreign_operand_types_get_notimplemented():
    class Other:
        def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
            return "other"

    assert np.add(X, Other()) == "other"

    class OtherFn:
        def __array_function__(self, func, types, args, kwargs):
            return NotImplemented

    with pytest.raises(TypeError, match="no implementation found"):
        np.concatenate([X, OtherFn()])


# -- DLPack -------------------------------------------------------------------------------------
def test_numpy_from_dlpack_is_a_read_only_view():
    x = t64([1.0, 2.0, 3.0])
    a = np.from_dlpack(x)
    assert np.shares_memory(a, x.numpy()) and not a.flags.writeable
    assert x.__dlpack_device__() == (1, 0)
    c = np.from_dlpack(x, copy=True)
    assert not np.shares_memory(c, x.numpy()) and c.flags.writeable


def test_legacy_consumers_get_a_copy():
    x = t64([1.0, 2.0])
    assert type(x.__dlpack__()).__name__ == "PyCapsule"  # a copy, exportable without flags
    with pytest.raises(BufferError, match="pre-1.0 DLPack protocol"):
        x.__dlpack__(copy=False)


def test_traced_tensor_cannot_be_exported():
    with pytest.raises(TypeError, match="Tensor.__dlpack__: a traced Tensor"):
        tg.grad(lambda x: np.from_dlpack(x).sum())(t64([1.0]))


def test_from_dlpack_numpy_zero_copy_and_copy():
    a = np.arange(6.0).reshape(2, 3)
    t = tnp.from_dlpack(a)
    assert np.shares_memory(t.numpy(), a) and t.dtype == np.float64 and t.shape == (2, 3)
    assert not t.numpy().flags.writeable
    a[0, 0] = 10.0  # shared memory: the documented aliasing
    assert t.numpy()[0, 0] == 10.0
    c = tnp.from_dlpack(a, copy=True)
    assert not np.shares_memory(c.numpy(), a)
    assert tnp.from_dlpack(t) is t
    assert tnp.from_dlpack(t, device="cpu") is t
    assert not np.shares_memory(tnp.from_dlpack(t, copy=True).numpy(), t.numpy())
    for dt in ("bool", "int8", "uint16", "int64", "float32", "complex128"):
        src = np.ones(3, dtype=dt)
        assert tnp.from_dlpack(src).dtype == dt
    g = tg.grad(lambda w: tnp.sum(w * tnp.from_dlpack(a)))(tnp.ones((2, 3), dtype="float64"))
    np.testing.assert_array_equal(g.numpy(), a)


def test_from_dlpack_errors():
    with pytest.raises(TypeError, match="from_dlpack: expected an object implementing "
                                        "__dlpack__.*got list"):
        tnp.from_dlpack([1.0, 2.0])
    with pytest.raises(ValueError, match="device"):
        tnp.from_dlpack(np.ones(2), device="tpu")


def test_torch_exchange_is_zero_copy_both_ways():
    torch = pytest.importorskip("torch")
    x = t64([1.0, 2.0, 3.0])
    tt = torch.from_dlpack(x)
    assert tt.data_ptr() == x.numpy().ctypes.data and tt.dtype == torch.float64
    assert tt.tolist() == [1.0, 2.0, 3.0]
    src = torch.arange(4, dtype=torch.float32)
    t = tnp.from_dlpack(src)
    assert t.numpy().ctypes.data == src.data_ptr() and t.dtype == np.float32
    assert t.numpy().tolist() == [0.0, 1.0, 2.0, 3.0]
    i = tnp.from_dlpack(torch.tensor([[1, 2]], dtype=torch.int32))
    assert i.dtype == np.int32 and i.shape == (1, 2)
    # gradients through a tensor that came from torch agree with torch.autograd
    w = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64, requires_grad=True)
    (torch.sin(w) * w).sum().backward()
    g = tg.grad(lambda v: np.sum(np.sin(v) * v))(tnp.from_dlpack(w.detach()))
    np.testing.assert_allclose(g.numpy(), w.grad.numpy(), rtol=1e-14)


def test_jax_exchange_both_ways():
    jnp = pytest.importorskip("jax.numpy")
    x = t64([1.0, 2.0, 3.0])
    j = jnp.from_dlpack(x)  # JAX asks with the pre-1.0 protocol: it receives a copy
    assert j.dtype == jnp.float64 or j.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(j), [1.0, 2.0, 3.0])
    src = jnp.arange(4.0)
    t = tnp.from_dlpack(src)
    assert t.numpy().ctypes.data == src.unsafe_buffer_pointer()  # zero-copy into tapegrad
    np.testing.assert_array_equal(t.numpy(), np.arange(4.0))


@pytest.mark.gpu
def test_cupy_exchange_is_zero_copy():
    cp = pytest.importorskip("cupy")
    if not tg.backend.cupy_available():
        pytest.skip("no CUDA device")
    x = tg.Tensor(np.arange(3.0), device="cuda:0")
    assert x.__dlpack_device__() == (2, 0)
    c = cp.from_dlpack(x)
    back = tnp.from_dlpack(c)
    assert back.device == "cuda:0" and back.numpy().tolist() == [0.0, 1.0, 2.0]
    assert from_dlpack(c, device="cpu").device == "cpu"


# -- operators: every binary operator, reflected and in-place, against NumPy ---------------------
_BINARY_OPERATORS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "@": operator.matmul,
    "<<": operator.lshift, ">>": operator.rshift, "&": operator.and_, "|": operator.or_,
    "^": operator.xor, "<": operator.lt, "<=": operator.le, "==": operator.eq,
    "!=": operator.ne, ">": operator.gt, ">=": operator.ge, "divmod": divmod,
}  # fmt: skip
_IN_PLACE = {
    "+": operator.iadd, "-": operator.isub, "*": operator.imul, "/": operator.itruediv,
    "//": operator.ifloordiv, "%": operator.imod, "**": operator.ipow, "@": operator.imatmul,
    "<<": operator.ilshift, ">>": operator.irshift, "&": operator.iand, "|": operator.ior,
    "^": operator.ixor,
}  # fmt: skip
_OPERAND_DTYPES = ["bool", "uint8", "int32", "int64", "float32", "float64", "complex64"]


def _operands(dtype):
    """Two (2, 2) arrays of ``dtype`` (no zero divisors, small positive exponents) and a
    Python scalar of the matching kind."""
    if dtype == "bool":
        a, b = np.array([[True, False], [True, True]]), np.array([[True, True], [False, True]])
        return a, b, True
    a = np.array([[8, 3], [5, 2]]).astype(dtype)
    b = np.array([[1, 2], [3, 1]]).astype(dtype)
    kind = np.dtype(dtype).kind
    return a, b, {"u": 2, "i": 2, "f": 2.0, "c": 2.0 + 1.0j}[kind]


def _numpy_or_error(fn, x, y):
    try:
        with np.errstate(all="ignore"):
            return fn(x, y)
    except TypeError as e:  # NumPy has no loop for these dtypes
        return e


def _assert_same(got, want, what):
    if isinstance(want, TypeError):
        assert isinstance(got, TypeError), f"{what}: NumPy raises TypeError, got {got!r}"
        return
    assert not isinstance(got, Exception), f"{what}: raised {got!r}, NumPy gives {want!r}"
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), what
        for g, w in zip(got, want):
            _assert_same(g, w, what)
        return
    assert isinstance(got, tg.Tensor), f"{what}: got {type(got).__name__}, not a Tensor"
    w = np.asarray(want)
    assert got.dtype == w.dtype, f"{what}: dtype {got.dtype}, NumPy {w.dtype}"
    np.testing.assert_array_equal(got.numpy(), w, err_msg=what)


@pytest.mark.parametrize("symbol", list(_BINARY_OPERATORS))
def test_every_binary_operator_and_its_reflected_form_match_numpy(symbol):
    fn = _BINARY_OPERATORS[symbol]
    for dtype in _OPERAND_DTYPES:
        a, b, s = _operands(dtype)
        cases = {  # operands for tapegrad, and the NumPy operands they stand for
            "Tensor op Tensor": ((tg.Tensor(a), tg.Tensor(b)), (a, b)),
            "Tensor op ndarray": ((tg.Tensor(a), b), (a, b)),
            "ndarray op Tensor": ((a, tg.Tensor(b)), (a, b)),  # NumPy defers to Tensor
            "Tensor op scalar": ((tg.Tensor(a), s), (a, s)),
            "scalar op Tensor": ((s, tg.Tensor(b)), (s, b)),  # the reflected operator
        }
        for name, ((x, y), (xn, yn)) in cases.items():
            if symbol == "@" and "scalar" in name:
                continue
            want = _numpy_or_error(fn, xn, yn)
            try:
                got = fn(x, y)
            except TypeError as e:
                got = e
            _assert_same(got, want, f"{dtype}: {name} with {symbol}")


@pytest.mark.parametrize("symbol", list(_IN_PLACE))
def test_in_place_operators_rebind_to_the_binary_result(symbol):
    # Tensors are immutable: `x op= y` rebinds x to `x op y` (as JAX arrays do), whatever the
    # dtype it promotes to, and the Tensor x named before is unchanged.
    fn, ifn = _BINARY_OPERATORS[symbol], _IN_PLACE[symbol]
    for dtype in _OPERAND_DTYPES:
        a, b, s = _operands(dtype)
        for y, yn in ((tg.Tensor(b), b), (b, b), (s, s)):
            if symbol == "@" and not isinstance(yn, np.ndarray):
                continue
            x = tg.Tensor(a)
            before = x
            want = _numpy_or_error(fn, a, yn)
            try:
                got = ifn(x, y)
            except TypeError as e:
                got = e
            _assert_same(got, want, f"{dtype}: x {symbol}= {type(y).__name__}")
            np.testing.assert_array_equal(before.numpy(), a)


def test_every_attached_reflected_operator_swaps_its_operands():
    # The class of the `>>` bug: each reflected operator y.__rX__(x) computes x X y, and each
    # forward one computes self X other, for every operator the ops layer attaches.
    from tapegrad.ops._registry import METHODS, REFLECTED

    a, b = tg.Tensor(np.array([8, 3])), tg.Tensor(np.array([1, 2]))
    reflected = [n for n in METHODS if n in REFLECTED]
    assert {"__rrshift__", "__rlshift__", "__rsub__", "__rtruediv__"} <= set(reflected)
    for name in reflected:
        forward = "__" + name[3:]
        assert forward in METHODS, name
        want = getattr(a, forward)(b)
        got = getattr(b, name)(a)
        _assert_same(got, tuple(w.numpy() for w in want) if isinstance(want, tuple)
                     else want.numpy(), name)
    # a name that merely starts with "__r" is not reflected
    assert {"__rshift__", "__round__"}.isdisjoint(REFLECTED)
    assert (tg.Tensor([8]) >> 1).numpy().tolist() == [4]
