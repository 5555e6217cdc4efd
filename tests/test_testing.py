import numpy as np
import pytest
from hypothesis import given, settings

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads, check_vjp, numerical_jacobian, numerical_jvp
from tapegrad.testing import strategies as tst


def f64(x):
    return tg.Tensor(np.asarray(x, dtype=np.float64))


class WrongFirstOrder(tg.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * g  # should be 2x


class WrongSecondOrder(tg.Function):
    """First derivative right, but it uses an array computed in forward as a constant."""

    @staticmethod
    def forward(ctx, x):
        ctx.two_x = 2 * x  # a forward intermediate: a constant to backward
        return x * x

    @staticmethod
    def backward(ctx, g):
        return g * ctx.two_x


def test_check_grads_accepts_correct_rules_on_pytrees():
    def f(p, x):
        return {"out": tnp.tanh(x @ p["w"]) * p["s"], "aux": tnp.exp(p["s"])}

    p = {"w": f64(np.random.default_rng(0).standard_normal((3, 2))), "s": f64(0.7)}
    check_grads(f, (p, f64(np.ones((4, 3)))), order=2)


def test_check_grads_catches_a_wrong_first_order_rule():
    with pytest.raises(AssertionError, match="finite differences"):
        check_grads(lambda x: WrongFirstOrder.apply(x), (f64([0.5, 1.5]),), order=1)


def test_check_grads_order_two_catches_a_constant_from_forward():
    x = (f64([0.5, 1.5]),)
    check_grads(lambda x: WrongSecondOrder.apply(x), x, order=1)  # first order is right
    with pytest.raises(AssertionError):
        check_grads(lambda x: WrongSecondOrder.apply(x), x, order=2)


def test_check_vjp_and_bad_arguments():
    check_vjp(lambda x: x**3, (f64(2.0),))
    with pytest.raises(ValueError, match="order"):
        check_grads(lambda x: x, (f64(1.0),), order=0)
    with pytest.raises(ValueError, match="mode"):
        check_grads(lambda x: x, (f64(1.0),), modes=("sideways",))


def test_numerical_jacobian_and_jvp():
    a = np.array([[1.0, 2.0], [3.0, 4.0], [0.5, -1.0]])
    jac = numerical_jacobian(lambda x: f64(a) @ x, np.array([0.3, -0.2]))
    np.testing.assert_allclose(jac, a, atol=1e-8)
    (jv,) = numerical_jvp(lambda x: x**2, (f64([1.0, 2.0]),), [np.array([1.0, 0.5])])
    np.testing.assert_allclose(jv, [2.0, 2.0], rtol=1e-6)


@settings(max_examples=10, deadline=None, derandomize=True)
@given(shapes=tst.broadcastable_shapes(2, min_side=0), t=tst.tensors(tst.shapes(max_dims=2)))
def test_strategies_draw_what_they_promise(shapes, t):
    np.broadcast_shapes(*shapes)  # mutually broadcastable
    assert isinstance(t, tg.Tensor) and t.dtype == np.float64
    assert np.all(np.abs(t.numpy()) <= 3.0)
