"""Example tests for the whole-array comparisons, type predicates and dtype helpers of
tapegrad.numpy: NumPy's answers (infinities, NaNs, complex, broadcasting), Tensors accepted
where NumPy takes arrays or dtypes, and decisions on traced values (grad takes them, jit
guards them, vmap refuses them)."""

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_vmap


def f64(a):
    return tg.Tensor(np.asarray(a, dtype=np.float64))


CASES = [
    (np.array([1.0, 1.0 + 1e-9, np.inf, -np.inf, np.nan, 2.0]),
     np.array([1.0, 1.0, np.inf, np.inf, np.nan, 2.1])),
    (np.array([[1.0], [1e-9]]), np.array([1.0, 0.0, 1e-7])),
    (np.array([1 + 1j, 2 - 1j]), np.array([1 + 1j, 2 - 1.0000001j])),
    (np.array([1, 2, 3]), np.array([1, 2, 4])),
]


@pytest.mark.parametrize("a, b", CASES)
def test_isclose_and_allclose_match_numpy(a, b):
    for kw in ({}, {"equal_nan": True}, {"rtol": 0.0, "atol": 0.05}):
        got = tnp.isclose(tg.Tensor(a), tg.Tensor(b), **kw)
        want = np.isclose(a, b, **kw)
        assert got.dtype == np.bool_ and got.shape == want.shape
        np.testing.assert_array_equal(got.numpy(), want)
        assert tnp.allclose(tg.Tensor(a), b, **kw) is bool(np.allclose(a, b, **kw))


def test_isclose_python_numbers_and_int_b():
    assert bool(tnp.isclose(1.0, 1.0 + 1e-10))
    np.testing.assert_array_equal(tnp.isclose(f64([1.0, 2.0]), 1).numpy(), [True, False])
    np.testing.assert_array_equal(
        tnp.isclose(tg.Tensor(np.array([-128], np.int8)), tg.Tensor(np.array([127], np.int8))
                    ).numpy(), np.isclose(np.array([-128], np.int8), np.array([127], np.int8)))
    with pytest.raises(ValueError, match="isclose: atol must be finite"):
        tnp.isclose(1.0, 1.0, atol=np.inf)
    with pytest.raises(ValueError, match="do not broadcast"):
        tnp.isclose(f64([1.0, 2.0]), f64([1.0, 2.0, 3.0]))


def test_array_equal_and_equiv():
    a = np.array([1.0, np.nan])
    assert tnp.array_equal(f64(a), a) is False
    assert tnp.array_equal(f64(a), a, equal_nan=True) is True
    assert tnp.array_equal(f64([1.0, 2.0]), [1.0, 2.0, 3.0]) is False
    assert tnp.array_equal(tg.Tensor([1, 2]), [1, 2], equal_nan=True) is True
    assert tnp.array_equiv(f64([1.0, 2.0]), [[1.0, 2.0], [1.0, 2.0]]) is True
    assert tnp.array_equiv(f64([1.0, 2.0]), [[1.0, 2.0], [1.0, 3.0]]) is False
    assert tnp.array_equiv(f64([1.0, 2.0]), [1.0, 2.0, 3.0]) is False


def test_decisions_on_traced_values_follow_bool():
    def f(x):
        return x * 2.0 if tnp.allclose(x, 1.0) else x * 3.0

    g = tg.grad(lambda x: f(x).sum())
    np.testing.assert_array_equal(g(f64([1.0, 1.0])).numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(g(f64([1.0, 2.0])).numpy(), [3.0, 3.0])
    jf = tg.jit(f)  # a guard: other values decide again
    np.testing.assert_array_equal(jf(f64([1.0, 1.0])).numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(jf(f64([1.0, 2.0])).numpy(), [3.0, 6.0])
    np.testing.assert_array_equal(jf(f64([1.0, 1.0])).numpy(), [2.0, 2.0])
    je = tg.jit(lambda x: x + 1.0 if tnp.array_equal(x, [1.0, 2.0]) else x)
    np.testing.assert_array_equal(je(f64([1.0, 2.0])).numpy(), [2.0, 3.0])
    np.testing.assert_array_equal(je(f64([0.0, 2.0])).numpy(), [0.0, 2.0])
    for pred in (lambda x: tnp.allclose(x, 1.0), lambda x: tnp.array_equal(x, x * 1.0),
                 lambda x: tnp.array_equiv(x, 1.0)):
        with pytest.raises(TypeError, match=r"bool\(\) of a batched value inside vmap"):
            tg.vmap(pred)(f64([[1.0], [2.0]]))
    check_vmap(lambda x: tnp.isclose(x, 1.0), (f64([[1.0, 2.0], [1.0 + 1e-9, 0.0]]),))
    check_vmap(lambda x, y: tnp.isclose(x, y, equal_nan=True),
               (f64([[1.0, np.nan]]), f64([[1.0, np.nan]])))


def test_elementwise_type_predicates():
    z = np.array([1 + 0j, 1 + 1j, np.inf + 0j])
    for fn in ("isreal", "iscomplex"):
        np.testing.assert_array_equal(getattr(tnp, fn)(tg.Tensor(z)).numpy(),
                                      getattr(np, fn)(z))
        np.testing.assert_array_equal(getattr(tnp, fn)(f64([1.0])).numpy(),
                                      getattr(np, fn)(np.array([1.0])))
    x = np.array([np.inf, -np.inf, 0.0, np.nan])
    for fn in ("isposinf", "isneginf"):
        np.testing.assert_array_equal(getattr(tnp, fn)(f64(x)).numpy(), getattr(np, fn)(x))
    g = tg.grad(lambda v: (tnp.where(tnp.isposinf(v), 0.0, v) ** 2).sum())(f64([1.0, np.inf]))
    np.testing.assert_array_equal(g.numpy(), [2.0, 0.0])


def test_object_predicates():
    assert tnp.iscomplexobj(tg.Tensor([1 + 0j])) and not tnp.iscomplexobj(f64([1.0]))
    assert tnp.iscomplexobj(1j) and not tnp.iscomplexobj([1.0, 2.0])
    assert tnp.isrealobj(f64([1.0])) and not tnp.isrealobj(tg.Tensor([1j]))
    assert tnp.isscalar(3.0) and tnp.isscalar(np.float32(1)) and tnp.isscalar("a")
    assert not tnp.isscalar(f64(3.0)) and not tnp.isscalar(np.array(3.0)) and not \
        tnp.isscalar([1])
    x = tg.Tensor([1.0])
    assert tg.grad(lambda v: v.sum() * (2.0 if tnp.isrealobj(v) else 3.0))(x).numpy()[0] == 2.0
    assert tg.vmap(lambda v: v * (2.0 if tnp.iscomplexobj(v) else 3.0))(f64([[1.0]])).shape \
        == (1, 1)  # a decision on the dtype, not on values: fine under vmap


def test_dtype_helpers_accept_tensors():
    x32, xi = tg.Tensor(np.float32([1.0])), tg.Tensor(np.array([1], np.int8))
    assert tnp.result_type(x32, 1.0) == np.float32
    assert tnp.result_type(x32, np.float64) == np.float64
    assert tnp.result_type(tg.Tensor(np.float32(1.0)), xi) == np.float32  # 0-d is not weak
    assert tnp.result_type(xi, 3) == np.int8
    assert tnp.can_cast(x32, np.float64) and not tnp.can_cast(x32, np.int32)
    assert tnp.can_cast(x32, np.int32, casting="unsafe")
    assert tnp.promote_types(xi, np.uint8) == np.int16
    assert tnp.finfo(x32).eps == np.finfo(np.float32).eps
    assert tnp.finfo(np.float64).max == np.finfo(np.float64).max
    assert tnp.iinfo(xi).min == -128
    assert tnp.issubdtype(x32, tnp.floating) and not tnp.issubdtype(xi, np.floating)
    assert tnp.isdtype(x32, "real floating") and tnp.isdtype(np.int8, ("integral", "bool"))
    assert not tnp.isdtype(tnp.complex64, "real floating")
    with pytest.raises(ValueError, match="finfo: data type .*int8.* not inexact"):
        tnp.finfo(xi)
    with pytest.raises(ValueError, match="iinfo: Invalid integer data type"):
        tnp.iinfo(x32)
    with pytest.raises(TypeError, match="can_cast: can_cast\\(\\) does not support Python"):
        tnp.can_cast(1.0, np.float32)
    with pytest.raises(ValueError, match="isdtype: kind argument"):
        tnp.isdtype(np.float32, "floaty")
