"""Example tests for the reductions (tapegrad.ops.reduction, tapegrad.numpy._reduction):
error paths, conventions at ties and kinks, zeros in products, logsumexp stability, Tensor
methods and output_shape."""

import math
import warnings

import numpy as np
import pytest
import scipy.special

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import ops
from tapegrad.testing import check_grads, numerical_jacobian


def _t(a, dtype=np.float64):
    return tg.Tensor(np.asarray(a, dtype=dtype))


def _hessian(f, x):
    """Dense Hessian of scalar ``f`` at 1-D ``x`` by reverse over reverse."""
    g = tg.grad(f)
    return np.stack(
        [tg.grad(lambda v, i=i: g(v)[i])(x).numpy() for i in range(x.shape[0])]  # noqa: B023
    )


# -- errors -----------------------------------------------------------------------------------
ALL_AXIS_REDUCTIONS = [
    tnp.sum,
    tnp.mean,
    tnp.prod,
    tnp.max,
    tnp.min,
    tnp.var,
    tnp.std,
    tnp.logsumexp,
    tnp.any,
    tnp.all,
]


@pytest.mark.parametrize("fn", ALL_AXIS_REDUCTIONS, ids=lambda f: f.__name__)
def test_out_of_range_axis_names_axis_and_ndim(fn):
    x = _t(np.ones((2, 3)))
    with pytest.raises(ValueError, match=rf"{fn.__name__}: axis 2 is out of range .* ndim 2"):
        fn(x, axis=2)
    with pytest.raises(ValueError, match=r"axis -3 is out of range"):
        fn(x, axis=(0, -3))
    with pytest.raises(ValueError, match="repeated axis"):
        fn(x, axis=(1, -1))
    with pytest.raises(TypeError, match="axis must be None, an int or a tuple of ints"):
        fn(x, axis=1.5)


@pytest.mark.parametrize(
    "fn", [tnp.mean, tnp.max, tnp.min, tnp.var, tnp.std], ids=lambda f: f.__name__
)
def test_undefined_empty_reductions_raise(fn):
    x = _t(np.ones((0, 3)))
    with pytest.raises(ValueError, match=rf"{fn.__name__}: reduction over axes \(0,\)"):
        fn(x, axis=0)
    with pytest.raises(ValueError, match="covers no elements"):
        fn(x)
    # reducing a non-empty axis of an empty Tensor is fine (empty result), as in NumPy
    assert fn(x, axis=1).shape == (0,)


def test_empty_reductions_with_identity_follow_numpy():
    x = np.ones((0, 3))
    assert tnp.sum(x, axis=0).numpy().tolist() == [0.0, 0.0, 0.0]
    assert tnp.prod(x, axis=0).numpy().tolist() == [1.0, 1.0, 1.0]
    assert tnp.any(x, axis=0).numpy().tolist() == [False] * 3
    assert tnp.all(x, axis=0).numpy().tolist() == [True] * 3
    assert np.isneginf(tnp.logsumexp(x, axis=0).numpy()).all()
    assert tnp.norm(x).item() == 0.0
    assert tnp.cumsum(x, axis=0).shape == (0, 3)


def test_argmax_errors_and_semantics():
    x = _t([[1.0, 5.0, 5.0], [7.0, 0.0, 7.0]])
    assert tnp.argmax(x, axis=1).numpy().tolist() == [1, 0]  # first occurrence at ties
    assert tnp.argmin(x, axis=0).numpy().tolist() == [0, 1, 0]
    assert tnp.argmax(x).item() == 3
    assert tnp.argmax(x, keepdims=True).shape == (1, 1)
    assert tnp.argmax(x, axis=-1, keepdims=True).shape == (2, 1)
    assert tnp.argmax(x).dtype == np.argmax(np.ones(2)).dtype
    with pytest.raises(TypeError, match="argmax: axis must be an int"):
        tnp.argmax(x, axis=(0, 1))
    with pytest.raises(ValueError, match="argmin: axis 2 is out of range"):
        tnp.argmin(x, axis=2)
    with pytest.raises(ValueError, match="argmax: axis 0 .* has size 0"):
        tnp.argmax(np.ones((0, 2)), axis=0)
    with pytest.raises(ValueError, match="argmin: attempt to get argmin of an empty"):
        tnp.argmin(np.ones((0, 2)))
    # no gradient flows through an index
    grad = tg.grad(lambda v: (v * tnp.argmax(v, axis=1).astype(np.float64)[:, None]).sum())(x)
    np.testing.assert_array_equal(grad.numpy(), [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])


def test_var_ddof_errors():
    x = _t(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"var: ddof=3 leaves 0 degrees of freedom .* ddof < 3"):
        tnp.var(x, axis=1, ddof=3)
    with pytest.raises(ValueError, match="std: ddof must be a non-negative number"):
        tnp.std(x, ddof=-1)
    with pytest.raises(ValueError, match="var: (ddof|correction) must be a non-negative number"):
        tnp.var(x, correction=float("nan"))
    z = np.array([1 + 2j, -0.5j, 3.0])  # complex input: NumPy's real variance of |z - mean|
    np.testing.assert_allclose(tnp.var(z).numpy(), np.var(z))


def test_norm_errors():
    x = _t(np.ones((2, 3, 4)))
    with pytest.raises(ValueError, match="norm: with ord=1 and axis=None the Tensor must be 1-D"):
        tnp.norm(x, ord=1)
    with pytest.raises(ValueError, match="unsupported vector norm order ord='fro'"):
        tnp.norm(x, ord="fro", axis=0)
    for bad in (np.nan, 1j):
        with pytest.raises(ValueError, match=r"unsupported vector norm order ord=(nan|1j)"):
            tnp.norm(x, ord=bad, axis=0)
    with pytest.raises(ValueError, match="norm: the order p of a p-norm must be a finite nonzero"):
        ops.NormP.apply(x, axis=0, p=0.0)
    with pytest.raises(TypeError, match="norm: complex inputs are not supported"):
        tnp.norm(np.ones(3, np.complex64), ord=3)
    with pytest.raises(ValueError, match="unsupported matrix norm order ord=0"):
        tnp.norm(x, ord=0, axis=(0, 1))
    for o in (2, -2, "nuc"):  # the singular-value norms, batched over the remaining axis
        np.testing.assert_allclose(
            tnp.norm(x, ord=o, axis=(0, 1)).numpy(),
            np.linalg.norm(np.ones((2, 3, 4)), ord=o, axis=(0, 1)),
            rtol=1e-6,
        )
    with pytest.raises(ValueError, match="axis must be None, an int or a pair"):
        tnp.norm(x, axis=(0, 1, 2))
    with pytest.raises(ValueError, match="two axes of a matrix norm must differ"):
        tnp.norm(x, axis=(1, -2))
    with pytest.raises(ValueError, match="norm: axis 3 is out of range"):
        tnp.norm(x, axis=3)
    # NumPy 2: the inf-norm of an empty axis is 0; the -inf norm is undefined
    np.testing.assert_array_equal(tnp.norm(np.ones((0, 2)), ord=np.inf, axis=0).numpy(), [0, 0])
    with pytest.raises(ValueError, match="norm: ord=-inf takes a min over axis 0, which is empty"):
        tnp.norm(np.ones((0, 2)), ord=-np.inf, axis=0)


def test_scan_errors():
    with pytest.raises(ValueError, match="cumsum: axis 1 is out of range .* ndim 1"):
        tnp.cumsum(np.ones(3), axis=1)
    with pytest.raises(ValueError, match="cumprod: a 0-d Tensor has no axis 0"):
        tnp.cumprod(np.float64(2.0), axis=0)
    with pytest.raises(TypeError, match="cumsum: axis must be an int"):
        tnp.cumsum(np.ones((2, 2)), axis=(0, 1))


def test_output_shape_matches_forward_and_checks_before_work():
    shape = (2, 3, 4)
    x = _t(np.random.default_rng(0).standard_normal(shape))
    cases = [
        (ops.Sum, dict(axis=(0, 2), keepdims=True)),
        (ops.Mean, dict(axis=-1)),
        (ops.Prod, dict(axis=None, keepdims=True)),
        (ops.Max, dict(axis=1)),
        (ops.Min, dict(axis=(0, 1))),
        (ops.ArgMax, dict(axis=2, keepdims=True)),
        (ops.ArgMin, dict(axis=None)),
        (ops.Var, dict(axis=0, ddof=1)),
        (ops.Std, dict(axis=(1, 2), keepdims=True)),
        (ops.LogSumExp, dict(axis=-2)),
        (ops.Norm2, dict(axis=(0, 2))),
        (ops.NormP, dict(axis=(0, 2), p=0.5)),
        (ops.NormP, dict(axis=1, keepdims=True, p=-3)),
        (ops.CumSum, dict(axis=1)),
        (ops.CumProd, dict(axis=-1, reverse=True)),
        (ops.Shift, dict(axis=0, shift=-1, fill=1.0)),
        (ops.Any, dict(axis=0)),
        (ops.All, dict(keepdims=True)),
    ]
    for op, params in cases:
        assert op.output_shape(shape, **params) == op.apply(x, **params).shape, op.__name__
    with pytest.raises(ValueError, match="max: reduction over axes"):
        ops.Max.output_shape((0, 2), axis=0)
    with pytest.raises(ValueError, match="var: ddof=2"):
        ops.Var.output_shape((2,), ddof=2)


# -- conventions at ties and kinks -------------------------------------------------------------
def test_max_ties_split_gradient_equally():
    x = _t([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    g = tg.grad(lambda v: tnp.max(v, axis=1).sum())(x).numpy()
    np.testing.assert_allclose(g, [[0.0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    g = tg.grad(lambda v: tnp.max(v))(x).numpy()
    np.testing.assert_allclose(g, [[0.0, 0.5, 0.5], [0.0, 0.0, 0.0]])
    g = tg.grad(lambda v: tnp.min(v, axis=0, keepdims=True).sum())(x).numpy()
    np.testing.assert_allclose(g, [[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]])
    # the seeds' example: x.max(axis=0, keepdims=True), gradient at the maxima
    y = tg.Tensor(np.array([[1.0, 5.0], [3.0, 4.0]]))
    assert y.max(axis=0, keepdims=True).numpy().tolist() == [[3.0, 5.0]]
    np.testing.assert_array_equal(
        tg.grad(lambda v: v.max(axis=0).sum())(y).numpy(), [[0.0, 1.0], [1.0, 0.0]]
    )


def test_max_second_derivative_is_zero_and_ties_count_with_cotangent():
    x = _t([4.0, 4.0, 1.0])
    np.testing.assert_array_equal(_hessian(lambda v: tnp.max(v) * 3.0, x), np.zeros((3, 3)))
    _, vjp_fn = tg.vjp(lambda v: tnp.max(v, axis=0), x)
    np.testing.assert_allclose(vjp_fn(_t(2.0))[0].numpy(), [1.0, 1.0, 0.0])


def test_std_and_norm_gradients_are_zero_at_the_kink():
    c = _t([[2.0, 2.0, 2.0], [1.0, 2.0, 3.0]])
    g = tg.grad(lambda v: tnp.std(v, axis=1, ddof=1).sum())(c).numpy()
    np.testing.assert_allclose(g[0], 0.0)
    np.testing.assert_allclose(g[1], [-0.5, 0.0, 0.5])
    z = _t([0.0, 0.0, 0.0])
    for f in (
        lambda v: tnp.norm(v),
        lambda v: tnp.norm(v, ord=2),
        lambda v: tnp.norm(v, ord=1),
        lambda v: tnp.norm(v, ord=np.inf),
        lambda v: tnp.norm(tnp.reshape(v, (1, 3)), ord="fro"),
        lambda v: tnp.std(v),
    ):
        assert np.array_equal(tg.grad(f)(z).numpy(), np.zeros(3))
        assert np.isfinite(_hessian(f, z)).all()


# -- zeros in products -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "vals",
    [[2.0, 3.0, 4.0], [2.0, 0.0, 4.0], [0.0, 3.0, 0.0], [0.0, 0.0, 0.0], [5.0], [0.0]],
    ids=str,
)
def test_prod_gradient_and_hessian_exact_with_zeros(vals):
    x = _t(vals)
    n = len(vals)
    others = [math.prod(v for j, v in enumerate(vals) if j != i) for i in range(n)]
    np.testing.assert_array_equal(tg.grad(tnp.prod)(x).numpy(), others)
    hess = np.array(
        [
            [
                0.0 if i == k else math.prod(v for j, v in enumerate(vals) if j not in (i, k))
                for k in range(n)
            ]
            for i in range(n)
        ]
    )
    np.testing.assert_array_equal(_hessian(tnp.prod, x), hess)
    check_grads(tnp.prod, (x,), order=3)


def test_prod_with_zeros_over_several_axes():
    a = np.array([[[1.0, 0.0], [2.0, 3.0]], [[0.0, 0.0], [4.0, 5.0]]])
    x = _t(a)
    f = lambda v: tnp.prod(v, axis=(0, 2))  # noqa: E731
    np.testing.assert_array_equal(f(x).numpy(), np.prod(a, axis=(0, 2)))
    jac = numerical_jacobian(f, x)
    got = np.stack([tg.vjp(f, x)[1](_t(e))[0].numpy() for e in np.eye(2)])
    np.testing.assert_allclose(got, jac, atol=1e-8)
    check_grads(f, (x,), order=2)


def test_cumprod_with_zeros_exact_to_third_order():
    a = np.array([[2.0, 0.0, 3.0, 0.0, -1.5], [0.0, 1.5, 2.0, -0.5, 1.0]])
    x = _t(a)
    for axis in (0, 1, -1):
        f = lambda v, axis=axis: tnp.cumprod(v, axis=axis)  # noqa: E731
        np.testing.assert_array_equal(f(x).numpy(), np.cumprod(a, axis=axis))
        jac = numerical_jacobian(f, x).reshape(a.size, a.size)
        got = np.stack(
            [tg.vjp(f, x)[1](_t(e.reshape(a.shape)))[0].numpy().ravel() for e in np.eye(a.size)]
        )
        np.testing.assert_allclose(got, jac, atol=1e-8)
        check_grads(f, (x,), order=3)
    check_grads(lambda v: ops.CumProd.apply(v, axis=1, reverse=True), (x,), order=2)


def test_cumsum_and_cumprod_flatten_with_axis_none():
    a = np.arange(6.0).reshape(2, 3) + 1
    np.testing.assert_array_equal(tnp.cumsum(a).numpy(), np.cumsum(a))
    np.testing.assert_array_equal(tnp.cumprod(a).numpy(), np.cumprod(a))
    np.testing.assert_array_equal(tnp.cumsum(np.float64(2.0)).numpy(), np.cumsum(2.0))
    g = tg.grad(lambda v: tnp.cumsum(v).sum())(_t(a)).numpy()
    np.testing.assert_array_equal(g, [[6.0, 5.0, 4.0], [3.0, 2.0, 1.0]])
    assert tnp.cumsum(np.array([True, True])).dtype == np.cumsum(np.array([True])).dtype


def test_shift_and_its_transpose():
    a = np.arange(1.0, 5.0)
    np.testing.assert_array_equal(ops.Shift.apply(_t(a), shift=1, fill=9.0).numpy(), [9, 1, 2, 3])
    np.testing.assert_array_equal(ops.Shift.apply(_t(a), shift=-2).numpy(), [3, 4, 0, 0])
    np.testing.assert_array_equal(ops.Shift.apply(_t(a), shift=7).numpy(), [0, 0, 0, 0])
    check_grads(lambda v: ops.Shift.apply(v, axis=0, shift=-1, fill=1.0), (_t(a),), order=2)


# -- logsumexp stability -----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_logsumexp_is_stable_for_large_magnitudes(dtype):
    a = np.array([[1e4, 1e4 - 1.0, -1e4], [-1e4, -1e4, -1e4 + 2.0]], dtype=dtype)
    x = tg.Tensor(a)
    out = tnp.logsumexp(x, axis=1)
    assert out.dtype == dtype
    # exact values: m + log(sum exp(x - m)) in float64 (the offsets are exact in float32 too)
    expected = [
        1e4 + math.log1p(math.exp(-1.0)),
        (-1e4 + 2.0) + math.log1p(2 * math.exp(-2.0)),
    ]
    np.testing.assert_allclose(out.numpy(), expected, rtol=np.finfo(dtype).eps)
    g = tg.grad(lambda v: tnp.logsumexp(v, axis=1).sum())(x).numpy()
    assert np.isfinite(g).all()
    ref = scipy.special.softmax(a.astype(np.float64), axis=1)
    np.testing.assert_allclose(g, ref, rtol=10 * np.finfo(dtype).eps, atol=1e-30)
    assert g.dtype == dtype
    big = tnp.logsumexp(tg.Tensor(np.full(5, 1e4, dtype=dtype)))
    np.testing.assert_allclose(big.item(), 1e4 + math.log(5.0), rtol=np.finfo(dtype).eps)


def test_logsumexp_accuracy_near_one_and_infinities():
    # the log1p form keeps digits when one term dominates (Blanchard, Higham and Higham)
    a = np.array([0.0, -40.0])
    np.testing.assert_allclose(tnp.logsumexp(a).item(), math.exp(-40.0), rtol=1e-15)
    x = _t([[-np.inf, -np.inf], [0.0, -np.inf]])
    out = tnp.logsumexp(x, axis=1)
    assert np.isneginf(out.numpy()[0]) and out.numpy()[1] == 0.0
    g = tg.grad(lambda v: tnp.logsumexp(v, axis=1).sum())(x).numpy()
    np.testing.assert_array_equal(g, [[0.0, 0.0], [1.0, 0.0]])
    assert tnp.logsumexp(np.array([1, 2], dtype=np.int32)).dtype == np.float64
    with pytest.raises(TypeError, match="logsumexp: complex"):
        tnp.logsumexp(np.ones(2, dtype=np.complex64))


# -- Tensor methods ----------------------------------------------------------------------------
def test_tensor_methods_match_numpy():
    a = np.random.default_rng(1).standard_normal((3, 4))
    x = tg.Tensor(a)
    pairs = [
        (x.sum(axis=0), a.sum(axis=0)),
        (x.mean(axis=1, keepdims=True), a.mean(axis=1, keepdims=True)),
        (x.prod(), a.prod()),
        (x.max(axis=1), a.max(axis=1)),
        (x.min(axis=(0, 1)), a.min(axis=(0, 1))),
        (x.argmax(axis=0), a.argmax(axis=0)),
        (x.argmin(), a.argmin()),
        (x.var(ddof=1), a.var(ddof=1)),
        (x.std(axis=0, keepdims=True), a.std(axis=0, keepdims=True)),
        (x.cumsum(axis=1), a.cumsum(axis=1)),
        (x.cumprod(axis=0), a.cumprod(axis=0)),
        (x.logsumexp(axis=-1), scipy.special.logsumexp(a, axis=-1)),
        ((x > 0).any(axis=0), (a > 0).any(axis=0)),
        ((x > -5).all(), (a > -5).all()),
    ]
    for got, want in pairs:
        assert got.dtype == np.asarray(want).dtype
        assert got.shape == np.shape(want)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    assert tnp.amax is tnp.max and tnp.amin is tnp.min


def test_norm_matches_numpy_linalg():
    a = np.random.default_rng(2).standard_normal((3, 4, 2)).astype(np.float32)
    cases = [
        dict(),
        dict(axis=1),
        dict(ord=1, axis=-1, keepdims=True),
        dict(ord=np.inf, axis=0),
        dict(ord=-np.inf, axis=2),
        dict(ord="fro", axis=(0, 2)),
        dict(ord=1, axis=(2, 0)),
        dict(ord=-1, axis=(0, 1), keepdims=True),
        dict(ord=np.inf, axis=(1, 2)),
        dict(ord=-np.inf, axis=(2, 1)),
    ]
    for kw in cases:
        got, want = tnp.norm(a, **kw), np.linalg.norm(a, **kw)
        assert got.dtype == want.dtype and got.shape == want.shape, kw
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, err_msg=str(kw))
    m = a[0]
    for o in (None, "fro", 1, -1, np.inf, -np.inf):
        np.testing.assert_allclose(tnp.norm(m, ord=o).numpy(), np.linalg.norm(m, ord=o), 1e-6)
    assert tnp.norm(np.array([3, 4])).dtype == np.float64


# -- vector p-norms of every real order -------------------------------------------------------
P_ORDERS = [3, 0.5, -1, -2.5, 1.5, 4.0, 0.25, 10, np.float32(3.0), np.int64(-3)]


@pytest.mark.parametrize("p", P_ORDERS, ids=repr)
def test_vector_norm_of_every_real_order_matches_numpy(p):
    # a regression test: orders other than None/0/1/2/inf/-inf used to raise ValueError
    a = np.random.default_rng(3).uniform(0.5, 2.0, (3, 4)) * np.array([1, -1, 1, -1])
    for kw in (dict(axis=0), dict(axis=1, keepdims=True), dict(axis=-1)):
        for dtype in (np.float32, np.float64):
            got = tnp.norm(a.astype(dtype), ord=p, **kw)
            want = np.linalg.norm(a.astype(dtype), ord=p, **kw)
            assert got.dtype == want.dtype and got.shape == want.shape, (p, kw)
            rtol = 1e-5 if dtype == np.float32 else 1e-13
            np.testing.assert_allclose(got.numpy(), want, rtol=rtol, err_msg=str(kw))
        check_grads(lambda v, kw=kw: tnp.norm(v, ord=p, **kw), (_t(a),), order=2)
    v = a[0]  # axis=None on a 1-D Tensor, and a linalg.norm alias
    np.testing.assert_allclose(tnp.linalg.norm(v, p).item(), np.linalg.norm(v, p), rtol=1e-13)
    assert tnp.norm(np.array([3, 4]), ord=p).dtype == np.float64  # integers: float64


def _p_norm_grad(v, p):
    """The p-norm's gradient with the documented conventions at 0, in float64 NumPy."""
    v = np.asarray(v, dtype=np.float64)
    with np.errstate(all="ignore"):
        n = np.sum(np.abs(v) ** p) ** (1 / p)
        if n == 0:
            return np.zeros_like(v)
        g = np.sign(v) * (np.abs(v) / n) ** (p - 1)
    return np.where(v == 0, 0.0, g)


@pytest.mark.parametrize("p", [0.5, 0.25, 1.5, 3, -1, -2.5])
@pytest.mark.parametrize(
    "vals",
    [[0.0, 0.0, 0.0], [0.0, 1.0, -2.0], [0.0, 0.0, 2.0], [-0.0, 3.0, 4.0], [1.0, 2.0, -3.0]],
    ids=str,
)
def test_p_norm_gradient_at_zero_entries_is_finite_and_follows_the_convention(p, vals):
    x = _t(vals)
    f = lambda v: tnp.norm(v, ord=p)  # noqa: E731
    with np.errstate(divide="ignore"):  # NumPy warns for 0**negative; tapegrad does not
        np.testing.assert_allclose(f(x).item(), np.linalg.norm(vals, ord=p), rtol=1e-14)
    g = tg.grad(f)(x).numpy()
    np.testing.assert_allclose(g, _p_norm_grad(vals, p), rtol=1e-14, atol=1e-300)
    if p < 0 and 0.0 in vals:
        np.testing.assert_array_equal(g, 0.0)  # the norm is 0 there and behaves as |x_i|
    assert np.isfinite(_hessian(f, x)).all()
    # forward mode agrees with reverse mode (one-hot tangents)
    for i in range(len(vals)):
        _, t = tg.jvp(f, (x,), (_t(np.eye(len(vals))[i]),))
        assert t.item() == pytest.approx(g[i], rel=1e-14, abs=1e-300)


def test_p_norm_hand_values_at_zero():
    # (|0|**0.5 + |4|**0.5)**2 = 4; d/dx_1 = (|x_1| / 4)**-0.5 = 1; the zero entry gets 0
    np.testing.assert_array_equal(
        tg.grad(lambda v: tnp.norm(v, ord=0.5))(_t([0.0, 4.0])).numpy(), [0.0, 1.0]
    )
    # p = 3 at x = 0: the minimum-norm subgradient 0
    np.testing.assert_array_equal(tg.grad(lambda v: tnp.norm(v, ord=3))(_t([0.0, 0.0])).numpy(),
                                  [0.0, 0.0])
    # p = -1 with a zero entry: the norm is 0 and so is the gradient
    x = _t([0.0, 2.0, -5.0])
    assert tnp.norm(x, ord=-1).item() == 0.0
    np.testing.assert_array_equal(tg.grad(lambda v: tnp.norm(v, ord=-1))(x).numpy(), [0, 0, 0])


def test_p_norm_does_not_overflow_where_the_direct_sum_does():
    a = np.array([1e3, -1e3], dtype=np.float32)
    with np.errstate(over="ignore"):
        assert np.isinf(np.linalg.norm(a, ord=20))  # NumPy's unscaled |x|**20 overflows
    got = tnp.norm(a, ord=20)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.item(), 1e3 * 2 ** (1 / 20), rtol=1e-6)
    tiny = np.array([1e-30, 2e-30], dtype=np.float32)  # |x|**4 underflows to 0 in float32
    want = np.linalg.norm(tiny.astype(np.float64), ord=4)
    np.testing.assert_allclose(tnp.norm(tiny, ord=4).item(), want, rtol=1e-6)
    small = np.array([1e-3, 5.0], dtype=np.float32)  # |x|**-20 overflows for the tiny entry
    np.testing.assert_allclose(
        tnp.norm(small, ord=-20).item(), np.linalg.norm(small.astype(np.float64), ord=-20),
        rtol=1e-6,
    )
    g = tg.grad(lambda v: tnp.norm(v, ord=20))(tg.Tensor(a)).numpy()
    np.testing.assert_allclose(g, [2 ** (-19 / 20), -(2 ** (-19 / 20))], rtol=1e-5)


def test_p_norm_special_values_and_empty_axes_follow_numpy():
    for p in (3, 0.5, -1.5):
        for vals in ([np.inf, 1.0], [-np.inf, np.inf], [np.nan, 1.0], [0.0, 0.0]):
            with np.errstate(all="ignore"):
                want = np.linalg.norm(np.array(vals), ord=p)
            np.testing.assert_array_equal(tnp.norm(np.array(vals), ord=p).numpy(), want)
        empty = np.ones((0, 2))
        with np.errstate(divide="ignore"):  # NumPy: 0**(1/p), a warning for p < 0
            want = np.linalg.norm(empty, ord=p, axis=0)
        got = tnp.norm(empty, ord=p, axis=0)
        np.testing.assert_array_equal(got.numpy(), want)  # 0 for p > 0, inf for p < 0
        f = lambda v, p=p: tnp.norm(v, ord=p, axis=0).sum()  # noqa: E731
        assert tg.grad(f)(_t(empty)).shape == (0, 2)


# -- Tensor methods and public names come from the op declarations ---------------------------
def test_public_functions_and_methods_are_the_ops_api():
    from tapegrad.ops._registry import METHODS

    for cls in (ops.Sum, ops.Mean, ops.Prod, ops.Max, ops.Min, ops.ArgMax, ops.ArgMin, ops.Var,
                ops.Std, ops.LogSumExp, ops.CumSum, ops.CumProd, ops.Any, ops.All):
        for name in cls.names:
            assert getattr(tnp, name) is cls.api, name
        for name in cls.methods:
            assert METHODS[name] is cls.api and getattr(tg.Tensor, name) is cls.api, name
        assert cls.api.__module__ == "tapegrad.numpy" and cls.api.__doc__
    assert ops.Max.names == ("max", "amax") and ops.Min.names == ("min", "amin")


OP_CASES = [
    (ops.Sum, dict(axis=0)),
    (ops.Mean, dict(axis=(0, 1), keepdims=True)),
    (ops.Prod, dict()),
    (ops.Max, dict(axis=1)),
    (ops.Min, dict()),
    (ops.ArgMax, dict(axis=0)),
    (ops.ArgMin, dict()),
    (ops.Var, dict(axis=1, ddof=1)),
    (ops.Std, dict()),
    (ops.LogSumExp, dict(axis=-1)),
    (ops.Norm2, dict(axis=0)),
    (ops.NormP, dict(axis=1, p=3.5)),
    (ops.CumSum, dict(axis=1)),
    (ops.CumProd, dict(axis=0)),
    (ops.Shift, dict(axis=1, shift=1)),
    (ops.Any, dict(axis=0)),
    (ops.All, dict()),
]


@pytest.mark.parametrize("op, params", OP_CASES, ids=lambda v: getattr(v, "__name__", ""))
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32, np.bool_])
def test_output_shape_and_dtype_are_what_forward_returns(op, params, dtype):
    if dtype == np.bool_ and op in (ops.Var, ops.Std, ops.LogSumExp, ops.Norm2, ops.NormP,
                                    ops.Mean):
        return  # NumPy has no such reductions of booleans worth promising
    x = tg.Tensor(np.arange(1, 7).reshape(2, 3).astype(dtype))
    out = op.apply(x, **params)
    assert op.output_shape(x.shape, **params) == out.shape
    assert op.output_dtype(x.dtype, **params) == out.dtype


def test_lazy_mode_defers_reductions():
    if not hasattr(tg, "lazy"):
        pytest.skip("lazy mode is not part of this build")
    a = np.arange(12.0).reshape(3, 4)
    x = tg.Tensor(a)
    with tg.lazy():
        y = tnp.logsumexp(tnp.cumprod(x, axis=1) / 100.0, axis=0) + tnp.std(x, axis=0, ddof=1)
        i = tnp.argmax(x.astype(np.int32), axis=1)
        assert y.shape == (4,) and i.shape == (3,) and i.dtype == np.intp
    want = scipy.special.logsumexp(np.cumprod(a, axis=1) / 100.0, axis=0) + a.std(0, ddof=1)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-12)
    np.testing.assert_array_equal(i.numpy(), [3, 3, 3])


# -- dtype= and integer promotion: every reduction and scan, against NumPy -------------------------
_DTYPE_REDUCTIONS = ["sum", "prod", "mean", "std", "var", "cumsum", "cumprod", "nansum",
                     "nanprod", "nanmean", "nanstd", "nanvar", "nancumsum", "nancumprod",
                     "cumulative_sum", "cumulative_prod", "trace"]  # fmt: skip
_IN_DTYPES = ["bool", "int8", "uint8", "int16", "uint32", "int64", "uint64", "float16",
              "float32", "float64", "complex64"]  # fmt: skip
_OUT_DTYPES = [None, "bool", "int8", "uint8", "int32", "int64", "uint64", "float32", "float64",
               "complex128"]  # fmt: skip


@pytest.mark.parametrize("name", _DTYPE_REDUCTIONS)
def test_reductions_honour_dtype_and_promote_integers_as_numpy(name):
    for in_dtype in _IN_DTYPES:
        a = (np.arange(1, 7).reshape(2, 3) % 3).astype(in_dtype)
        args = (a, 0) if name.startswith("cumulative") else (a,)
        for out_dtype in _OUT_DTYPES:
            kw = {"axis": args[1]} if len(args) == 2 else {}
            if out_dtype is not None:
                kw["dtype"] = out_dtype
            what = f"{name}({in_dtype}, dtype={out_dtype})"
            if out_dtype == "bool" and name in ("std", "var", "nanstd", "nanvar"):
                # NumPy raises for boolean input only (no boolean subtract) and otherwise
                # returns a meaningless boolean: tapegrad always raises
                with pytest.raises(TypeError, match=f"{name}: dtype=bool cannot hold"):
                    getattr(tnp, name)(tg.Tensor(a), **kw)
                continue
            try:
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    # NumPy warns that a cast of complex to real keeps the real part, as
                    # tapegrad's cast does (tapegrad decides, it does not warn)
                    warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
                    want = np.asarray(getattr(np, name)(a, **kw))
            except TypeError:
                with pytest.raises(TypeError):
                    getattr(tnp, name)(tg.Tensor(a), **kw)
                continue
            got = getattr(tnp, name)(tg.Tensor(a), **kw)
            assert got.dtype == want.dtype, f"{what}: {got.dtype}, NumPy {want.dtype}"
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-3, err_msg=what)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int32", "uint32", "float32",
                                   "complex64"])  # fmt: skip
def test_vecdot_keeps_the_promoted_dtype(dtype):
    # as NumPy's and the array API's vecdot: no widening of small integers (sum's rule)
    from tapegrad.numpy import array_api

    a = np.array([[1, 0, 1], [1, 1, 0]]).astype(dtype)
    b = np.array([1, 1, 0]).astype(dtype)
    want = np.vecdot(a, b)
    for fn in (tnp.vecdot, tnp.linalg.vecdot, array_api.vecdot, array_api.linalg.vecdot):
        got = fn(tg.Tensor(a), tg.Tensor(b))
        assert got.dtype == want.dtype, (fn, dtype)
        np.testing.assert_array_equal(got.numpy(), want)


def test_fractional_ddof_and_correction_as_numpy():
    x = np.random.default_rng(3).normal(size=(3, 4))
    np.testing.assert_allclose(tnp.std(x, axis=0, correction=0.5).numpy(),
                               np.std(x, axis=0, ddof=0.5))  # fmt: skip
    np.testing.assert_allclose(tnp.var(x, ddof=1.5).numpy(), np.var(x, ddof=1.5))
    check_grads(lambda v: tnp.std(v, axis=1, correction=0.5), (_t(x),), order=2,
                modes=("rev", "fwd"))  # fmt: skip


def test_einsum_takes_numpys_dtype_casting_and_order():
    a = np.arange(6, dtype=np.uint8).reshape(2, 3)
    b = np.ones((2, 3))
    for spec, ops_, kw in [("ij->", (a,), {"dtype": np.float32}),
                           ("ij,ij->i", (b, b), {"dtype": np.float32, "casting": "same_kind"}),
                           ("ij->j", (a,), {"dtype": np.int64, "order": "C"}),
                           ("ij,ij->", (a, a), {})]:  # fmt: skip
        got = tnp.einsum(spec, *[tg.Tensor(o) for o in ops_], **kw)
        want = np.einsum(spec, *ops_, **kw)
        assert got.dtype == want.dtype, (spec, kw)
        np.testing.assert_allclose(got.numpy(), want)
    with pytest.raises(TypeError, match="einsum: cannot cast dtype float64 to float32 under "
                                        "casting='safe'"):  # fmt: skip
        tnp.einsum("ij,ij->i", b, b, dtype=np.float32)
    with pytest.raises(TypeError, match="einsum: out= is not supported"):
        tnp.einsum("ij->", b, out=np.empty(()))
    g = tg.grad(lambda x: tnp.einsum("i,i->", x, x, dtype=np.float64))(tg.Tensor([1.0, 2.0]))
    assert g.dtype == np.float32 and g.numpy().tolist() == [2.0, 4.0]


# -- flag and count arguments: keepdims, ddof ------------------------------------------------------
def _with_keepdims():
    """Every public function (and Tensor method) taking ``keepdims``, by its public name."""
    import importlib
    import inspect

    spaces = {"tnp": tnp, "tnp.linalg": tnp.linalg,
              "F": importlib.import_module("tapegrad.nn.functional"),
              "special": importlib.import_module("tapegrad.scipy.special"),
              "xp": importlib.import_module("tapegrad.numpy.array_api")}
    spaces["xp.linalg"] = spaces["xp"].linalg
    found = {}
    for prefix, space in spaces.items():
        for name in dir(space):
            fn = getattr(space, name)
            if name.startswith("_") or not callable(fn) or isinstance(fn, type):
                continue
            try:
                params = inspect.signature(fn).parameters
            except (TypeError, ValueError):
                continue
            if "keepdims" in params:
                found[f"{prefix}.{name}"] = (name, fn)
    for name in dir(tg.Tensor):
        fn = getattr(tg.Tensor, name, None)
        if callable(fn) and not name.startswith("_"):
            try:
                if "keepdims" in inspect.signature(fn).parameters:
                    found[f"Tensor.{name}"] = (name, fn)
            except (TypeError, ValueError):
                pass
    return found


_KEEPDIMS = _with_keepdims()


def test_every_keepdims_is_a_checked_bool():
    # keepdims="yes" gave a bare "'str' object cannot be interpreted as an integer" (or nothing)
    assert len(_KEEPDIMS) >= 60  # the search found the reductions
    x = _t(np.arange(1.0, 7.0).reshape(2, 3))
    for public, (name, fn) in _KEEPDIMS.items():
        extra = (50.0,) if "percentile" in name else (0.5,) if "quantile" in name else ()
        for bad in ("yes", None, 1.0, tg.Tensor(True)):
            with pytest.raises(TypeError) as info:
                fn(x, *extra, keepdims=bad)
            msg = str(info.value)
            assert "keepdims must be a bool (True or False), got" in msg, (public, msg)
            assert msg.split(":")[0] in (name, name.lstrip("a")), (public, msg)  # amax: max
        # NumPy's spellings of a bool are accepted and mean what they say
        kept = fn(x, *extra, axis=0, keepdims=True) if "axis" in _params(fn) else None
        if kept is not None:
            for same in (1, np.True_, np.int64(1)):
                np.testing.assert_array_equal(fn(x, *extra, axis=0, keepdims=same).numpy(),
                                              kept.numpy())


def _params(fn):
    import inspect

    return inspect.signature(fn).parameters


def test_ddof_is_a_checked_real_number():
    x = _t(np.arange(6.0).reshape(2, 3))
    for fn in (tnp.std, tnp.var):
        name = fn.__name__
        for bad in ("1", None, True, tg.Tensor(1)):
            with pytest.raises(TypeError, match=rf"{name}: ddof must be a real number >= 0"):
                fn(x, ddof=bad)
            with pytest.raises(TypeError, match=rf"{name}: correction must be a real number"):
                fn(x, correction=bad if bad is not None else "x")
        with pytest.raises(ValueError, match=rf"{name}: ddof must be a non-negative .*got -1"):
            fn(x, ddof=-1)
        # a fractional ddof is NumPy's too
        np.testing.assert_allclose(fn(x, ddof=1.5).numpy(), getattr(np, name)(x.numpy(), ddof=1.5))
        np.testing.assert_allclose(fn(x, ddof=np.int64(1)).numpy(),
                                   getattr(np, name)(x.numpy(), ddof=1))
