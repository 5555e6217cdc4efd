"""Example tests of the elementwise ops: error paths, conventions at kinks (one test per row of
docs/conventions.md), numerical stability at extremes, dtype rules and Tensor methods."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sp

import tapegrad as tg
import tapegrad.numpy as tnp


def T64(v):
    return tg.Tensor(np.asarray(v, dtype=np.float64))


def grad_of(f, x):
    return tg.grad(lambda v: f(v).sum())(x).numpy()


# -- error paths ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fn, name",
    [
        (tnp.add, "add"),
        (tnp.multiply, "mul"),
        (tnp.divide, "div"),
        (tnp.power, "pow"),
        (tnp.maximum, "maximum"),
        (tnp.logaddexp, "logaddexp"),
        (tnp.hypot, "hypot"),
        (tnp.arctan2, "arctan2"),
        (tnp.logical_and, "logical_and"),
        (tnp.less, "less"),
    ],
)
def test_shape_mismatch_names_op_and_shapes(fn, name):
    x, y = tg.Tensor(np.ones((2, 3))), tg.Tensor(np.ones((4,)))
    with pytest.raises(ValueError, match=rf"{name}: shapes \(2, 3\), \(4,\) do not broadcast"):
        fn(x, y)


def test_clip_bound_shape_mismatch_names_clip():
    with pytest.raises(ValueError, match=r"clip: shapes \(3,\), \(2,\)"):
        tnp.clip(tg.Tensor(np.ones(3)), tg.Tensor(np.zeros(2)), 1.0)


def test_where_needs_boolean_condition():
    x = tg.Tensor([1.0, 2.0])
    with pytest.raises(TypeError, match="where: condition must be boolean, got dtype float32"):
        tnp.where(x, x, 0.0)
    assert tnp.where(True, x, 0.0).numpy().tolist() == [1.0, 2.0]


def test_where_takes_its_arguments_by_name():
    # NumPy's names (condition, x, y), as HIPS autograd's where takes them
    x, y = tg.Tensor(np.array([1.0, 2.0, 3.0])), tg.Tensor(np.array([4.0, 5.0, 6.0]))
    cond = np.array([True, False, True])
    for got in (tnp.where(condition=cond, x=x, y=y), tnp.where(cond, x, y=y),
                tnp.where(cond, x=x, y=y)):
        np.testing.assert_array_equal(got.numpy(), [1.0, 5.0, 3.0])
    for g, w in zip(tnp.where(condition=cond), np.where(cond)):
        np.testing.assert_array_equal(g.numpy(), w)
    g = tg.grad(lambda a: tnp.sum(tnp.where(condition=cond, x=a, y=2.0 * a)))(x)
    np.testing.assert_array_equal(g.numpy(), [1.0, 2.0, 1.0])


def test_where_shape_mismatch():
    with pytest.raises(ValueError, match=r"where: shapes \(2,\), \(3,\) do not broadcast"):
        tnp.where(tg.Tensor(np.array([True, False])), tg.Tensor(np.ones(3)), 0.0)


def test_gelu_rejects_unknown_approximation():
    with pytest.raises(ValueError, match="gelu: approximate must be 'none' or 'tanh', got 'erf'"):
        tnp.gelu(tg.Tensor([1.0]), approximate="erf")


def test_round_decimals_must_be_int():
    with pytest.raises(TypeError, match="round: decimals must be an int, got 1.5"):
        tnp.round(tg.Tensor([1.0]), 1.5)


def test_integer_to_negative_integer_power_names_pow():
    with pytest.raises(ValueError, match="pow: Integers to negative integer powers"):
        tnp.power(tg.Tensor(np.array([2, 3])), -1)


def test_bitwise_operators_follow_numpy():
    # &, |, ^, ~ are NumPy's bitwise ufuncs: logical on booleans, bitwise on integers, and a
    # clear TypeError on floats.
    x = tg.Tensor([1.0, 2.0])
    b = x > 1
    np.testing.assert_array_equal((~b).numpy(), [True, False])
    np.testing.assert_array_equal((b & (x < 3)).numpy(), [False, True])
    i = tg.Tensor(np.array([6, 3]))
    np.testing.assert_array_equal((i & 5).numpy(), [4, 1])
    np.testing.assert_array_equal((i | 1).numpy(), [7, 3])
    np.testing.assert_array_equal((~i).numpy(), [-7, -4])
    with pytest.raises(TypeError, match=r"bitwise_and.*float32"):
        x & b
    with pytest.raises(TypeError, match=r"invert.*float32"):
        _ = ~x


def test_out_of_domain_gives_nan_without_warning():
    # pytest turns warnings into errors: none of these may warn.
    neg, big = T64([-1.0]), T64([2.0])
    for f, x in [
        (tnp.sqrt, neg),
        (tnp.log, neg),
        (tnp.log2, neg),
        (tnp.log10, neg),
        (tnp.log1p, T64([-2.0])),
        (tnp.arcsin, big),
        (tnp.arccos, big),
        (tnp.arctanh, big),
        (tnp.arccosh, T64([0.5])),
        (lambda v: v**0.5, neg),
    ]:
        assert np.isnan(f(x).numpy()).all()
    for f, x, want in [
        (tnp.log, T64([0.0]), -np.inf),
        (tnp.reciprocal, T64([0.0]), np.inf),
        (lambda v: v / 0.0, T64([1.0]), np.inf),
        (tnp.arctanh, T64([1.0]), np.inf),
        (tnp.exp, T64([1e4]), np.inf),
        (tnp.sinh, T64([-1e4]), -np.inf),
    ]:
        assert f(x).numpy()[0] == want


# -- conventions at kinks (docs/conventions.md) ---------------------------------------------
def test_maximum_minimum_ties_split_equally():
    x, y = T64([1.0, 2.0, 3.0]), T64([1.0, 5.0, 0.0])
    for fn in (tnp.maximum, tnp.minimum):
        gx, gy = tg.grad(lambda a, b, fn=fn: fn(a, b).sum(), argnums=(0, 1))(x, y)
        assert gx.numpy()[0] == gy.numpy()[0] == 0.5
        assert gx.numpy()[1:].tolist() == ([0.0, 1.0] if fn is tnp.maximum else [1.0, 0.0])
    # a broadcast scalar collects half of each tie (2 x 0.5) plus each win (1)
    g = tg.grad(lambda s: tnp.maximum(T64([2.0, 2.0, 1.0]), s).sum())(T64(2.0))
    assert float(g) == 2.0


def test_clip_boundary_gradient_goes_to_x():
    x = T64([-2.0, -1.0, 0.0, 1.0, 2.0])
    assert grad_of(lambda v: tnp.clip(v, -1.0, 1.0), x).tolist() == [0, 1, 1, 1, 0]
    lo, hi = T64(-1.0), T64(1.0)
    gx, glo, ghi = tg.grad(lambda a, b, c: tnp.clip(a, b, c).sum(), argnums=(0, 1, 2))(x, lo, hi)
    assert gx.numpy().tolist() == [0, 1, 1, 1, 0]
    assert float(glo) == 1.0 and float(ghi) == 1.0  # only the strictly outside points
    # one-sided and inverted bounds (NumPy: a_min > a_max gives a_max everywhere)
    assert grad_of(lambda v: tnp.clip(v, None, 0.0), x).tolist() == [1, 1, 1, 0, 0]
    assert grad_of(lambda v: tnp.clip(v, 0.0, None), x).tolist() == [0, 0, 1, 1, 1]
    _, glo, ghi = tg.grad(lambda a, b, c: tnp.clip(a, b, c).sum(), argnums=(0, 1, 2))(
        x, T64(1.0), T64(-1.0)
    )
    assert float(glo) == 0.0 and float(ghi) == 5.0
    assert tnp.clip(x, None, None) is x


def test_abs_relu_sign_at_zero():
    x = T64([-1.0, 0.0, 2.0])
    assert grad_of(tnp.abs, x).tolist() == [-1.0, 0.0, 1.0]
    assert grad_of(tnp.relu, x).tolist() == [0.0, 0.0, 1.0]
    assert grad_of(tnp.sign, x).tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    "shape, dtype",
    [
        ((128, 512), np.float32),  # the blocked path: float32, contiguous, size % 256 == 0
        ((64, 16, 4, 4), np.float32),
        ((16384,), np.float32),
        ((128, 129), np.float32),  # size not a multiple of 256: the plain call
        ((128, 512), np.float64),
        ((4, 5), np.float32),
        ((0, 512), np.float32),
    ],
)
def test_relu_forward_equals_numpy_maximum(shape, dtype):
    """ReLU's forward is exactly ``np.maximum(x, 0)`` on every path, specials included, and
    returns a fresh C-contiguous array that owns its data."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    flat[: min(6, flat.size)] = [np.nan, -0.0, 0.0, -np.inf, np.inf, -np.nan][: min(6, flat.size)]
    out = tnp.relu(tg.Tensor(x))._array  # the op's own array (numpy() gives a read-only view)
    want = np.maximum(x, 0)
    assert out.dtype == want.dtype and out.shape == want.shape
    np.testing.assert_array_equal(out, want)  # NaN where NaN
    np.testing.assert_array_equal(np.signbit(out), np.signbit(want))
    assert out.flags.c_contiguous and out.base is None and not np.shares_memory(out, x)
    strided = x[..., ::2] if x.ndim > 1 else x[::2]  # non-contiguous input: the plain call
    np.testing.assert_array_equal(tnp.relu(tg.Tensor(strided)).numpy(), np.maximum(strided, 0))


def test_sqrt_at_zero_infinite_unless_masked():
    x = T64([0.0, 4.0])
    assert grad_of(tnp.sqrt, x).tolist() == [np.inf, 0.25]
    masked = grad_of(lambda v: tnp.where(v > 0, tnp.sqrt(v), 0.0), x)
    assert masked.tolist() == [0.0, 0.25]


def test_rounding_has_zero_gradient():
    x = T64([-1.5, 0.5, 0.2, 2.0])
    for fn in (tnp.floor, tnp.ceil, tnp.round, lambda v: tnp.round(v, 1)):
        assert grad_of(fn, x).tolist() == [0.0] * 4


def test_hypot_and_arctan2_at_origin_are_zero():
    z = T64([0.0])
    for fn in (tnp.hypot, tnp.arctan2):
        gx, gy = tg.grad(lambda a, b, fn=fn: fn(a, b).sum(), argnums=(0, 1))(z, z)
        assert gx.numpy().tolist() == [0.0] and gy.numpy().tolist() == [0.0]


def test_power_conventions():
    x = T64([0.0, 2.0])
    # d/dx x**0 = 0, also at 0 (Python and Tensor exponents)
    assert grad_of(lambda v: v**0, x).tolist() == [0.0, 0.0]
    assert grad_of(lambda v: v ** T64(0.0), x).tolist() == [0.0, 0.0]
    # d/dp 0**p = 0 (and log(2) 2**p elsewhere)
    p = T64([-1.0, 1.5])
    gp = tg.grad(lambda q: tnp.power(T64([0.0, 0.0]), q).sum())(p)
    assert gp.numpy().tolist() == [0.0, 0.0]
    gp = tg.grad(lambda q: tnp.power(2.0, q).sum())(p)
    np.testing.assert_allclose(gp.numpy(), np.log(2) * 2.0 ** p.numpy(), rtol=1e-14)


def test_logaddexp_tie_at_infinity_splits():
    for v in (-np.inf, np.inf):
        gx, gy = tg.grad(lambda a, b: tnp.logaddexp(a, b), argnums=(0, 1))(T64(v), T64(v))
        assert float(gx) == float(gy) == 0.5


def test_reduction_max_min_ties_split_equally():
    if not hasattr(tnp, "max"):
        pytest.skip("tnp.max/min (reductions) are not in this build")
    x = T64([3.0, 1.0, 3.0])
    assert tg.grad(lambda v: tnp.max(v))(x).numpy().tolist() == [0.5, 0.0, 0.5]
    assert tg.grad(lambda v: tnp.min(v))(T64([1.0, 1.0, 2.0])).numpy().tolist() == [0.5, 0.5, 0]


# -- NaN safety keeps exact derivatives -------------------------------------------------------
def test_nan_safe_rules_stay_exact_where_the_cotangent_vanishes():
    # f = (sqrt(x) - 2)**2 at x = 4: the cotangent reaching sqrt is exactly 0, yet f'' = 1/8.
    f = lambda x: (tnp.sqrt(x) - 2.0) ** 2  # noqa: E731
    assert float(tg.grad(tg.grad(f))(T64(4.0))) == pytest.approx(1 / 8, rel=1e-14)
    g = lambda x: (tnp.log(x) - 1.0) ** 2  # noqa: E731
    assert float(tg.grad(tg.grad(g))(T64(np.e))) == pytest.approx(2 / np.e**2, rel=1e-14)
    h = lambda y: (3.0 / y - 1.5) ** 2  # noqa: E731  (zero cotangent at y = 2)
    assert float(tg.grad(tg.grad(h))(T64(2.0))) == pytest.approx(2 * (3.0 / 4) ** 2, rel=1e-14)


def test_masked_singularity_third_order_is_finite():
    x = T64([0.0, 1.0])
    f = lambda v: tnp.where(v > 0, tnp.sqrt(v), 0.0).sum()  # noqa: E731
    g3 = tg.grad(lambda v: tg.grad(lambda w: tg.grad(f)(w).sum())(v).sum())(x).numpy()
    assert g3.tolist() == [0.0, 3 / 8]


# -- numerical stability at extremes --------------------------------------------------------
XS = np.array([0.0, 1e-30, 1e-8, 1e-3, 0.5, 1.0, 10.0, 30.0, 100.0, 1e3, 1e4])
XS = np.concatenate([-XS[::-1], XS])


def _close(got, want, dtype):
    tol = {np.float32: 2e-6, np.float64: 1e-14}[dtype]
    np.testing.assert_allclose(got, want.astype(dtype), rtol=tol, atol=np.finfo(dtype).tiny)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sigmoid_softplus_stable(dtype):
    x = XS.astype(dtype)
    x64 = x.astype(np.float64)
    ref_sig = sp.expit(x64)
    ref_softplus = np.maximum(x64, 0) + np.log1p(np.exp(-np.abs(x64)))
    _close(tnp.sigmoid(tg.Tensor(x)).numpy(), ref_sig, dtype)
    _close(tnp.softplus(tg.Tensor(x)).numpy(), ref_softplus, dtype)
    g_sig = grad_of(tnp.sigmoid, tg.Tensor(x))
    g_sp = grad_of(tnp.softplus, tg.Tensor(x))
    assert g_sig.dtype == dtype and np.isfinite(g_sig).all() and np.isfinite(g_sp).all()
    _close(g_sig, sp.expit(x64) * sp.expit(-x64), dtype)
    _close(g_sp, ref_sig, dtype)
    assert tnp.sigmoid(tg.Tensor(x)).dtype == dtype and tnp.softplus(tg.Tensor(x)).dtype == dtype


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_logaddexp_stable(dtype):
    x = XS.astype(dtype)[:, None]
    y = np.array([-1e4, -1e4 + 1, -1.0, 0.0, 2.0, 1e4], dtype)[None, :]
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    ref = np.maximum(x64, y64) + np.log1p(np.exp(-np.abs(x64 - y64)))
    got = tnp.logaddexp(tg.Tensor(x), tg.Tensor(y))
    assert got.dtype == dtype
    _close(got.numpy(), ref, dtype)
    gx, gy = tg.grad(lambda a, b: tnp.logaddexp(a, b).sum(), argnums=(0, 1))(
        tg.Tensor(x), tg.Tensor(y)
    )
    assert np.isfinite(gx.numpy()).all() and np.isfinite(gy.numpy()).all()
    _close(gx.numpy(), sp.expit(x64 - y64).sum(axis=1, keepdims=True), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_log1p_expm1_stable(dtype):
    x = XS[XS > -1].astype(dtype)
    x64 = x.astype(np.float64)
    _close(tnp.log1p(tg.Tensor(x)).numpy(), np.log1p(x64), dtype)
    _close(grad_of(tnp.log1p, tg.Tensor(x)), 1 / (1 + x64), dtype)
    # tiny arguments keep full relative precision (1 + x would round to 1)
    assert tnp.log1p(tg.Tensor(np.array([1e-30], dtype))).numpy()[0] == dtype(1e-30)
    assert tnp.expm1(tg.Tensor(np.array([1e-30], dtype))).numpy()[0] == dtype(1e-30)
    x = XS.astype(dtype)
    x64 = x.astype(np.float64)
    with np.errstate(over="ignore"):
        want = np.expm1(x64).astype(dtype)  # overflows to inf where the true value does
        want_grad = np.exp(x64).astype(dtype)
    got = tnp.expm1(tg.Tensor(x)).numpy()
    finite = np.isfinite(want)
    assert (got[~finite] == np.inf).all()
    _close(got[finite], want[finite].astype(np.float64), dtype)
    g = grad_of(tnp.expm1, tg.Tensor(x))
    fin = np.isfinite(want_grad)
    assert np.isfinite(g[fin]).all()
    _close(g[fin], want_grad[fin].astype(np.float64), dtype)


def test_gelu_forms():
    x = np.linspace(-6, 6, 25)
    got = tnp.gelu(T64(x)).numpy()
    np.testing.assert_allclose(got, x * sp.ndtr(x), rtol=1e-14, atol=1e-300)
    c = np.sqrt(2 / np.pi)
    want = 0.5 * x * (1 + np.tanh(c * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(tnp.gelu(T64(x), approximate="tanh").numpy(), want, rtol=1e-14)
    np.testing.assert_array_equal(tnp.gelu(T64(x), approximate=True).numpy(), want)
    # exact derivative Phi(x) + x phi(x)
    g = grad_of(tnp.gelu, T64(x))
    np.testing.assert_allclose(g, sp.ndtr(x) + x * np.exp(-(x**2) / 2) / np.sqrt(2 * np.pi))
    assert tnp.gelu(tg.Tensor([1.0])).dtype == np.float32
    np.testing.assert_allclose(tnp.gelu(tg.Tensor([-1e4, 1e4])).numpy(), [0.0, 1e4])


def test_erf_matches_scipy_and_keeps_dtype():
    x = np.linspace(-3, 3, 13, dtype=np.float32)
    got = tnp.erf(tg.Tensor(x))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.numpy(), sp.erf(x), rtol=1e-6)
    g = grad_of(tnp.erf, T64(x))
    np.testing.assert_allclose(g, 2 / np.sqrt(np.pi) * np.exp(-(x.astype(np.float64) ** 2)))


# -- dtype rules --------------------------------------------------------------------------------
BINARY = [
    tnp.add, tnp.subtract, tnp.multiply, tnp.divide, tnp.power, tnp.maximum, tnp.minimum,
    tnp.logaddexp, tnp.hypot, tnp.arctan2,
]  # fmt: skip


@pytest.mark.parametrize("fn", BINARY, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_python_numbers_keep_tensor_dtype(fn, dtype):
    x = tg.Tensor(np.array([0.5, 2.0], dtype))
    for other in (2.0, 2, True):
        assert fn(x, other).dtype == dtype
        assert fn(other, x).dtype == dtype
        gx = tg.grad(lambda v, o=other: fn(v, o).sum())(x)
        assert gx.dtype == dtype


def test_python_numbers_keep_dtype_in_unary_style_calls():
    x = tg.Tensor(np.array([0.5, 2.0], np.float32))
    assert tnp.clip(x, 0, 1.0).dtype == np.float32
    assert (x**2).dtype == (2.0**x).dtype == (1 / x).dtype == np.float32
    assert tnp.where(x > 1, x, 0.0).dtype == np.float32


def test_all_python_operands_follow_the_python_data_rules():
    assert tnp.add(1.0, 2.0).dtype == np.float32  # Python floats -> float32
    assert tnp.where(True, 1.0, 0.0).dtype == np.float32
    assert tnp.hypot(3.0, 4.0).dtype == np.float32 and float(tnp.hypot(3.0, 4.0)) == 5.0
    assert tnp.add(1, 2).dtype == np.int64  # Python ints -> int64
    assert tnp.hypot(3, 4).dtype == np.hypot(np.int64(3), 4).dtype  # then NumPy's promotion


def test_integer_inputs_follow_numpy():
    i = tg.Tensor(np.array([1, 2, 4]))
    assert tnp.sqrt(i).dtype == np.sqrt(np.array([1, 2, 4])).dtype
    assert tnp.square(i).dtype == i.dtype and tnp.relu(i).dtype == i.dtype
    assert tnp.reciprocal(i).numpy().tolist() == [1, 0, 0]  # NumPy's integer reciprocal
    assert tnp.floor(i).dtype == np.floor(np.array([1, 2, 4])).dtype


# -- comparisons and logic ------------------------------------------------------------------------
def test_logic_and_classification_are_boolean_and_gradient_free():
    a = tg.Tensor(np.array([True, False, True]))
    b = tg.Tensor(np.array([True, True, False]))
    assert tnp.logical_and(a, b).numpy().tolist() == [True, False, False]
    assert tnp.logical_or(a, b).numpy().tolist() == [True, True, True]
    assert tnp.logical_xor(a, b).numpy().tolist() == [False, True, True]
    assert tnp.logical_not(a).numpy().tolist() == [False, True, False]
    assert (a & b).numpy().tolist() == [True, False, False]
    assert (a | b).numpy().tolist() == [True, True, True]
    assert (a ^ True).numpy().tolist() == [False, True, False]
    assert (~a).numpy().tolist() == [False, True, False]
    # numbers: nonzero is true, as in NumPy
    assert tnp.logical_and(tg.Tensor([0.0, 2.0]), 1.0).numpy().tolist() == [False, True]
    v = T64([1.0, np.nan, np.inf, -np.inf])
    assert tnp.isfinite(v).numpy().tolist() == [True, False, False, False]
    assert tnp.isnan(v).numpy().tolist() == [False, True, False, False]
    assert tnp.isinf(v).numpy().tolist() == [False, False, True, True]
    for out in (tnp.isfinite(v), tnp.equal(v, 1.0), tnp.logical_not(v)):
        assert out.dtype == np.bool_

    def f(x):
        keep = tnp.logical_and(tnp.isfinite(x), x > 0) | tnp.isnan(x)
        return tnp.where(keep & ~tnp.isnan(x), x, 0.0).sum()

    g = tg.grad(f)(T64([2.0, -1.0, np.nan, np.inf]))
    assert g.numpy().tolist() == [1.0, 0.0, 0.0, 0.0]


def test_comparisons_match_numpy():
    x, y = np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 2.0])
    for fn, ref in [
        (tnp.equal, np.equal),
        (tnp.not_equal, np.not_equal),
        (tnp.less, np.less),
        (tnp.less_equal, np.less_equal),
        (tnp.greater, np.greater),
        (tnp.greater_equal, np.greater_equal),
    ]:
        out = fn(T64(x), T64(y))
        assert out.dtype == np.bool_ and out.numpy().tolist() == ref(x, y).tolist()


# -- names and Tensor methods ------------------------------------------------------------------
def test_numpy_aliases():
    assert tnp.true_divide is tnp.divide and tnp.pow is tnp.power
    assert tnp.absolute is tnp.abs and tnp.around is tnp.round
    for a, b in [("asin", "arcsin"), ("acos", "arccos"), ("atan", "arctan"),
                 ("atan2", "arctan2"), ("asinh", "arcsinh"), ("acosh", "arccosh"),
                 ("atanh", "arctanh")]:  # fmt: skip
        assert getattr(tnp, a) is getattr(tnp, b)


def test_tensor_methods_match_numpy():
    a = np.array([-1.5, -0.25, 0.0, 0.6, 2.0])
    x = T64(a)
    pos = T64(np.abs(a) + 0.5)
    assert abs(x).numpy().tolist() == np.abs(a).tolist()
    assert x.abs().numpy().tolist() == np.abs(a).tolist()
    np.testing.assert_allclose(pos.sqrt().numpy(), np.sqrt(np.abs(a) + 0.5))
    np.testing.assert_allclose(pos.log().numpy(), np.log(np.abs(a) + 0.5))
    np.testing.assert_allclose(x.exp().numpy(), np.exp(a))
    np.testing.assert_allclose(x.sigmoid().numpy(), sp.expit(a))
    np.testing.assert_allclose(x.softplus().numpy(), np.logaddexp(a, 0))
    assert x.relu().numpy().tolist() == np.maximum(a, 0).tolist()
    assert x.clip(-1, 1).numpy().tolist() == np.clip(a, -1, 1).tolist()
    assert x.clip(min=0).numpy().tolist() == np.clip(a, 0, None).tolist()
    assert x.clip(max=0).numpy().tolist() == np.clip(a, None, 0).tolist()
    assert x.maximum(0.0).numpy().tolist() == np.maximum(a, 0).tolist()
    assert x.minimum(T64(0.0)).numpy().tolist() == np.minimum(a, 0).tolist()
    assert x.round(1).numpy().tolist() == np.round(a, 1).tolist()
    assert x.floor().numpy().tolist() == np.floor(a).tolist()
    assert x.ceil().numpy().tolist() == np.ceil(a).tolist()
    assert x.sign().numpy().tolist() == np.sign(a).tolist()
    assert x.square().numpy().tolist() == np.square(a).tolist()
    np.testing.assert_allclose(pos.reciprocal().numpy(), 1 / (np.abs(a) + 0.5))
    np.testing.assert_allclose(x.tanh().numpy(), np.tanh(a))
    np.testing.assert_allclose(x.erf().numpy(), sp.erf(a))
    np.testing.assert_allclose(x.gelu().numpy(), a * sp.ndtr(a))
    np.testing.assert_allclose(x.pow(2).numpy(), a**2)
    for name in ("expm1", "sin", "cos", "tan", "arctan", "sinh", "cosh", "arcsinh"):
        np.testing.assert_allclose(getattr(x, name)().numpy(), getattr(np, name)(a))
    for name in ("log1p", "log2", "log10"):
        np.testing.assert_allclose(getattr(pos, name)().numpy(), getattr(np, name)(pos.numpy()))
    small = T64(a / 4)
    for name in ("arcsin", "arccos", "arctanh"):
        np.testing.assert_allclose(getattr(small, name)().numpy(), getattr(np, name)(a / 4))
    np.testing.assert_allclose((pos + 1).arccosh().numpy(), np.arccosh(pos.numpy() + 1))
    assert x.isfinite().numpy().all() and not x.isnan().numpy().any()
    assert not x.isinf().numpy().any()
    assert (x > 0).logical_not().numpy().tolist() == (a <= 0).tolist()


def test_conventions_doc_example_runs():
    import pathlib
    import re

    doc = pathlib.Path(__file__).resolve().parents[2] / "docs" / "conventions.md"
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(), flags=re.S)
    assert blocks, "docs/conventions.md has no python example"
    for code in blocks:
        exec(compile(code, str(doc), "exec"), {})


def test_mul_no_nan_zero_wins_over_inf_and_nan():
    from tapegrad.ops import MulNoNan

    a = T64([0.0, 0.0, 2.0, -0.0])
    b = T64([np.inf, np.nan, np.inf, 3.0])
    assert MulNoNan.apply(a, b).numpy().tolist()[:3] == [0.0, 0.0, np.inf]
    ga, gb = tg.grad(lambda u, v: MulNoNan.apply(u, v).sum(), argnums=(0, 1))(a, b)
    assert gb.numpy().tolist() == [0.0, 0.0, 2.0, 0.0]  # no dependence on b where a == 0
    assert np.isinf(ga.numpy()[0]) and np.isnan(ga.numpy()[1])  # d/da = b, honestly


def test_remainder_and_floor_divide_edge_values_and_dtypes():
    x = np.array([7, -7, 0], dtype=np.int64)
    for got, want in (
        (tnp.remainder(x, 3), np.remainder(x, 3)),
        (tg.Tensor(x) % 3, x % 3),
        (tg.Tensor(x) // -2, x // -2),
        (7 % tg.Tensor(np.array([3.0, -2.0])), 7 % np.array([3.0, -2.0])),
        (7 // tg.Tensor(np.array([3.0, -2.0])), 7 // np.array([3.0, -2.0])),
    ):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), want)
    with np.errstate(all="raise"):  # no warning escapes: NumPy's values at y == 0
        assert np.isnan(tnp.remainder(np.array([1.0]), 0.0).numpy()[0])
        np.testing.assert_array_equal(
            tnp.floor_divide(np.array([1.0, -1.0]), 0.0).numpy(), [np.inf, -np.inf]
        )
        np.testing.assert_array_equal(tnp.remainder(np.array([5]), 0).numpy(), [0])


def test_remainder_gradients():
    x, y = tg.Tensor(np.array([5.5, -2.5])), tg.Tensor(np.array([2.0, 2.0]))
    gx, gy = tg.grad(lambda a, b: tnp.remainder(a, b).sum(), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(gx.numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(gy.numpy(), -np.floor(np.array([5.5, -2.5]) / 2.0))
    g = tg.grad(lambda a: tnp.floor_divide(a, 2.0).sum())(x)
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.0])
