import numpy as np
import pytest
from hypothesis import given, settings

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads, check_rule, check_vjp, numerical_jacobian, numerical_jvp
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
    # at second order the engine itself refuses the array forward left on ctx
    with pytest.raises(TypeError, match=r"WrongSecondOrder.backward: forward left floating "
                                        r"arrays \(ctx.two_x\)"):
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


class ConjugatedScale(tg.Function):
    """``c * z`` with PyTorch's convention in backward (``g * conj(c)``): wrong in tapegrad's."""

    @staticmethod
    def forward(ctx, z, c):
        ctx.save_for_backward(c)
        return z * c

    @staticmethod
    def backward(ctx, g):
        (c,) = ctx.saved_tensors
        return g * tnp.conj(c), None


def _c128(shape, seed=0):
    rng = np.random.default_rng(seed)
    return tg.Tensor(rng.standard_normal(shape) + 1j * rng.standard_normal(shape))


@pytest.mark.parametrize("f", [
    lambda z: z * z,                      # holomorphic
    lambda z: tnp.abs(z) ** 2,            # real-valued, not holomorphic
    lambda z: tnp.conj(z) * tnp.exp(z),   # neither
    lambda z: tnp.real(z) * tnp.imag(z),  # complex in, real out
])
def test_check_grads_checks_complex_functions_in_both_modes(f):
    check_grads(f, (_c128((3,)),), order=2, modes=("rev", "fwd"))


def test_check_grads_catches_the_conjugated_complex_convention():
    z, c = _c128((3,)), _c128((3,), seed=1)
    check_grads(lambda z: z * c, (z,), order=1)  # the built-in rule is JAX's convention
    with pytest.raises(AssertionError, match="finite differences"):
        check_grads(lambda z: ConjugatedScale.apply(z, c), (z,), order=1)


def test_complex_gradient_of_a_real_function_is_df_dx_minus_i_df_dy():
    z0 = 0.3 + 0.4j
    g = tg.grad(lambda z: tnp.abs(z) ** 2)(tg.Tensor(np.complex128(z0)))
    eps = 1e-6
    f = lambda z: abs(z) ** 2  # noqa: E731
    dfdx = (f(z0 + eps) - f(z0 - eps)) / (2 * eps)
    dfdy = (f(z0 + 1j * eps) - f(z0 - 1j * eps)) / (2 * eps)
    np.testing.assert_allclose(complex(g), dfdx - 1j * dfdy, rtol=1e-6)


def test_numerical_jvp_extrapolates_away_the_curvature_error():
    # d/dx sin(50 x) = 50 cos(50 x): a central difference with eps 1e-4 is off by about
    # (50 eps)**2 / 6 = 4e-6 relative; Richardson's extrapolation by about (50 eps)**4 / 120
    x = f64([0.3, -0.7])
    want = 50 * np.cos(50 * x.numpy())
    t = [np.ones(2)]
    (plain,) = numerical_jvp(lambda v: tnp.sin(50 * v), (x,), t, richardson=False)
    (extrapolated,) = numerical_jvp(lambda v: tnp.sin(50 * v), (x,), t)
    assert np.max(np.abs(plain - want) / np.abs(want)) > 1e-6
    np.testing.assert_allclose(extrapolated, want, rtol=1e-9)


def test_check_grads_order_two_of_a_steep_function_needs_no_tuned_step():
    # the order-2 check differentiates the pullback, whose curvature grows like 80**3: a plain
    # central difference at the default step was off by more than rtol 1e-5
    check_grads(lambda v: tnp.sin(80 * v) * tnp.exp(3 * v), (f64([0.31, -0.52, 1.1]),), order=2,
                modes=("rev", "fwd"))


# -- check_rule -------------------------------------------------------------------------------
class RowSum(tg.Function):
    """Sum over the last axis, with correct backward, jvp and batching rules."""

    @staticmethod
    def forward(ctx, x):
        ctx.n = x.shape[-1]
        return x.sum(axis=-1)

    @staticmethod
    def backward(ctx, g):
        return tnp.broadcast_to(g[..., None], g.shape + (ctx.n,))

    @staticmethod
    def jvp(ctx, t):
        return tnp.sum(t, axis=-1)

    @staticmethod
    def batch(args, batched, size):
        return RowSum.apply(args[0])  # the batch is a leading axis: the last axis stays


class RowSumWrongBatch(RowSum):
    @staticmethod
    def batch(args, batched, size):
        return tnp.sum(args[0], axis=1)  # sums axis 0 of each example instead of the last


class RowSumWrongJvp(RowSum):
    @staticmethod
    def jvp(ctx, t):
        return 2 * tnp.sum(t, axis=-1)


class RowSumStoresArray(RowSum):
    @staticmethod
    def forward(ctx, x):
        ctx.n = x.shape[-1]
        ctx.x = x  # an array on ctx: vmap(grad) cannot run its backward per example
        return x.sum(axis=-1)


def test_check_rule_accepts_correct_rules():
    x = np.arange(12.0).reshape(3, 4)
    check_rule(RowSum, (x,))
    check_rule(tnp.max, (x,), {"axis": 1})


@pytest.mark.parametrize("cls, check", [(RowSumWrongBatch, "vmap over argument 0"),
                                        (RowSumWrongJvp, "jvp_vjp"),
                                        (RowSumStoresArray, "vmap_grad")])
def test_check_rule_names_the_failed_check(cls, check):
    with pytest.raises(AssertionError, match=check):
        check_rule(cls, (np.arange(12.0).reshape(3, 4),))


def test_check_rule_reports_an_op_with_no_batching_rule():
    class NoRule(tg.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            return g * 2.0

    with pytest.raises(AssertionError, match="vmap over argument 0.*no batching rule"):
        check_rule(NoRule, (np.ones(3),), checks=("vmap",))


def test_check_rule_checks_errors_and_reports_them():
    x = np.ones((3, 4))
    check_rule(tnp.sum, (x,), {"axis": 2}, raises=ValueError)  # vmap raises it too
    with pytest.raises(AssertionError, match="raised .*AxisError|raised .*ValueError"):
        check_rule(tnp.sum, (x,), {"axis": 2})
    with pytest.raises(AssertionError, match="expected ValueError, but the function returned"):
        check_rule(tnp.sum, (x,), {"axis": 1}, raises=ValueError)
    with pytest.raises(ValueError, match="unknown checks"):
        check_rule(tnp.sum, (x,), checks=("vmap", "jac"))
    with pytest.raises(TypeError, match="Function subclass or callable"):
        check_rule(3, (x,))


def test_check_rule_differentiates_complex_arguments_by_parts():
    z = np.array([1.0 + 2.0j, -0.5 + 0.3j])
    check_rule(lambda v: tnp.abs(v) ** 2, (z,))
