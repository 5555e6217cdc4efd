"""custom_vjp: a user (fwd, bwd) pair built on Function."""

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads

RNG = np.random.default_rng(3)


def _t(*shape):
    return tg.Tensor(RNG.uniform(-1, 1, size=shape))


@tg.custom_vjp
def sin_times(x, y):
    return tnp.sin(x) * y


def _fwd(x, y):
    return sin_times(x, y), (tnp.cos(x), tnp.sin(x), y)


def _bwd(res, g):
    cos_x, sin_x, y = res
    return (cos_x * g * y, sin_x * g)


sin_times.defvjp(_fwd, _bwd)


def test_rule_is_used_and_derivatives_are_right():
    x, y = _t(3), _t(3)
    np.testing.assert_allclose(sin_times(x, y).numpy(), np.sin(x.numpy()) * y.numpy())
    gx, gy = tg.grad(lambda x, y: tnp.sum(sin_times(x, y)), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx.numpy(), np.cos(x.numpy()) * y.numpy())
    np.testing.assert_allclose(gy.numpy(), np.sin(x.numpy()))
    check_grads(sin_times, (x, y), order=2, modes=("fwd", "rev"))
    _, tape = tg.trace(sin_times)(x, y)
    assert [e.oper for e in tape.entries] == ["sin_times"]


def test_the_user_rule_is_what_gets_differentiated():
    @tg.custom_vjp
    def clip_grad(x):
        return x * 1.0

    clip_grad.defvjp(lambda x: (x * 1.0, None), lambda res, g: (tnp.minimum(g, 0.5),))
    g = tg.grad(lambda x: tnp.sum(3.0 * clip_grad(x)))(_t(3))
    np.testing.assert_allclose(g.numpy(), [0.5, 0.5, 0.5])


def test_pytree_arguments_and_static_values():
    @tg.custom_vjp
    def affine(p, x, scale):
        return (p["w"] * x + p["b"]) * scale

    def fwd(p, x, scale):
        return affine(p, x, scale), (p, x, scale)

    def bwd(res, g):
        p, x, scale = res
        return ({"w": g * x * scale, "b": g * scale}, g * p["w"] * scale, None)

    affine.defvjp(fwd, bwd)
    p, x = {"w": _t(2), "b": _t(2)}, _t(2)
    check_grads(lambda p, x: affine(p, x, 3.0), (p, x), order=2, modes=("fwd", "rev"))


def test_errors():
    @tg.custom_vjp
    def f(x):
        return x * 2.0

    x = _t(2)
    np.testing.assert_allclose(f(x).numpy(), 2 * x.numpy())  # no rule needed outside transforms
    with pytest.raises(RuntimeError, match=r"call f.defvjp\(fwd, bwd\) first"):
        tg.grad(lambda x: tnp.sum(f(x)))(x)
    f.defvjp(lambda x: (x * 2.0, None), lambda res, g: g * 2.0)  # not a tuple
    with pytest.raises(TypeError, match="bwd must return a tuple with one cotangent"):
        tg.grad(lambda x: tnp.sum(f(x)))(x)
    f.defvjp(lambda x: (x * 2.0, None), lambda res, g: (tnp.sum(g),))
    with pytest.raises(ValueError, match=r"cotangent for input leaf 0 has shape \(\)"):
        tg.grad(lambda x: tnp.sum(f(x)))(x)
    f.defvjp(lambda x: x * 2.0, lambda res, g: (g,))
    with pytest.raises(TypeError, match="fwd must return a pair"):
        tg.grad(lambda x: tnp.sum(f(x)))(x)
    with pytest.raises(TypeError, match="custom_vjp: expected a function"):
        tg.custom_vjp(3)
