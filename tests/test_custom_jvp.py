"""custom_jvp: a user forward-mode rule; reverse mode by transposing it; every order, vmap, jit.

The rules below are deliberately *not* the true derivatives (a factor 2, a clipped slope), so
a test that passes shows the rule was used, not the primal function's own derivative.
"""

import functools

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads

RNG = np.random.default_rng(7)


def _t(*shape):
    return tg.Tensor(RNG.uniform(-1, 1, size=shape))


@tg.custom_jvp
def sin2(x):
    """sin with a rule that says its slope is 2 cos: derivative of order k is 2^k sin^(k)."""
    return tnp.sin(x)


@sin2.defjvp
def _sin2_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return sin2(x), 2.0 * tnp.cos(x) * t


def test_the_rule_gives_every_derivative_in_both_modes_and_every_order():
    x = _t(4)
    xs = x.numpy()
    np.testing.assert_allclose(sin2(x).numpy(), np.sin(xs))
    _, t = tg.jvp(sin2, (x,), (tg.Tensor(np.ones(4)),))
    np.testing.assert_allclose(t.numpy(), 2 * np.cos(xs))
    np.testing.assert_allclose(tg.grad(lambda v: tnp.sum(sin2(v)))(x).numpy(), 2 * np.cos(xs))
    # second order: the rule's tangent 2 cos(x) t is differentiated again (its primal part)
    gg = tg.grad(lambda v: tnp.sum(tg.grad(lambda w: tnp.sum(sin2(w)))(v)))(x)
    np.testing.assert_allclose(gg.numpy(), -2 * np.sin(xs))
    h = tg.hessian(lambda v: tnp.sum(sin2(v)))(x)
    np.testing.assert_allclose(h.numpy(), np.diag(-2 * np.sin(xs)), atol=1e-15)
    np.testing.assert_allclose(tg.jacfwd(sin2)(x).numpy(), np.diag(2 * np.cos(xs)), atol=1e-15)
    np.testing.assert_allclose(tg.jacrev(sin2)(x).numpy(), np.diag(2 * np.cos(xs)), atol=1e-15)
    v = tg.Tensor(np.arange(4.0))
    np.testing.assert_allclose(tg.hvp(lambda w: tnp.sum(sin2(w)), (x,), (v,)).numpy(),
                               -2 * np.sin(xs) * np.arange(4.0))
    _, lin = tg.linearize(sin2, x)
    np.testing.assert_allclose(lin(v).numpy(), 2 * np.cos(xs) * np.arange(4.0))


def test_under_vmap_and_jit():
    xs = _t(3, 2)
    a = xs.numpy()
    np.testing.assert_allclose(tg.vmap(sin2)(xs).numpy(), np.sin(a))
    g = tg.vmap(tg.grad(lambda v: tnp.sum(sin2(v))))(xs)
    np.testing.assert_allclose(g.numpy(), 2 * np.cos(a))
    g = tg.grad(lambda v: tnp.sum(tg.vmap(sin2)(v)))(xs)
    np.testing.assert_allclose(g.numpy(), 2 * np.cos(a))
    jg = tg.jit(tg.grad(lambda v: tnp.sum(sin2(v))))
    for k in range(3):  # the compiled program, with new values
        np.testing.assert_allclose(jg(xs + float(k)).numpy(), 2 * np.cos(a + k))
    jh = tg.jit(tg.vmap(tg.hessian(lambda v: tnp.sum(sin2(v)))))
    h = jh(xs)
    for i in range(3):
        np.testing.assert_allclose(h.numpy()[i], np.diag(-2 * np.sin(a[i])), atol=1e-15)
    np.testing.assert_allclose(tg.jit(sin2)(xs).numpy(), np.sin(a))
    np.testing.assert_allclose(tg.grad(lambda v: tnp.sum(tg.jit(sin2)(v)))(xs).numpy(),
                               2 * np.cos(a))


def test_one_primitive_on_the_tape_and_the_function_itself_outside_transforms():
    calls = []

    @tg.custom_jvp
    def f(x):
        calls.append(1)
        return tnp.sin(x) * 3.0

    f.defjvp(lambda p, t: (f(*p), tnp.cos(p[0]) * t[0] * 3.0))
    f(_t(2))
    assert len(calls) == 1  # no transform: f itself, once
    _, tape = tg.trace(f)(_t(2))
    assert [e.oper for e in tape.entries] == ["f"]
    # jit(value_and_grad(f)): the rule's own call of f merges with the forward's: one f
    prog = tg.jit(tg.value_and_grad(lambda v: tnp.sum(f(v)))).lower(_t(2))
    assert str(prog).count(" f[") == 1
    # jit(grad(f)): the primal value is not needed, so f does not run at all
    assert " f[" not in str(tg.jit(tg.grad(lambda v: tnp.sum(f(v)))).lower(_t(2)))


def test_rule_with_a_true_derivative_passes_check_grads_and_defjvps_matches_defjvp():
    @tg.custom_jvp
    def f(x, y):
        return tnp.sin(x) * y

    f.defjvps(lambda x_dot, out, x, y: tnp.cos(x) * x_dot * y,
              lambda y_dot, out, x, y: tnp.sin(x) * y_dot)
    x, y = _t(3), _t(3)
    check_grads(f, (x, y), order=2, modes=("fwd", "rev"))
    gx, gy = tg.grad(lambda a, b: tnp.sum(f(a, b)), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx.numpy(), np.cos(x.numpy()) * y.numpy())
    np.testing.assert_allclose(gy.numpy(), np.sin(x.numpy()))

    @tg.custom_jvp
    def g(x, y):
        return x * y

    g.defjvps(None, lambda y_dot, out, x, y: x * y_dot)  # None: no dependence on x
    gx, gy = tg.grad(lambda a, b: tnp.sum(g(a, b)), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx.numpy(), 0.0)
    np.testing.assert_allclose(gy.numpy(), x.numpy())


def test_pytrees_several_outputs_and_keywords():
    @tg.custom_jvp
    def f(p, x):
        return {"u": p["w"] * x, "v": (tnp.exp(x), p["b"])}

    @f.defjvp
    def f_jvp(primals, tangents):
        (p, x), (pt, xt) = primals, tangents
        return f(p, x), {"u": pt["w"] * x + p["w"] * xt, "v": (tnp.exp(x) * xt, pt["b"])}

    p = {"w": _t(3), "b": _t(2)}
    x = _t(3)

    def loss(p, x):
        o = f(p, x=x)  # bound to its position
        return tnp.sum(o["u"] ** 2) + tnp.sum(o["v"][0]) + tnp.sum(o["v"][1] ** 3)

    check_grads(loss, (p, x), order=2, modes=("fwd", "rev"))
    g = tg.grad(loss)(p, x)
    np.testing.assert_allclose(g["b"].numpy(), 3 * p["b"].numpy() ** 2)


def test_nondiff_argnums_take_functions_and_stop_gradients_of_arrays():
    @functools.partial(tg.custom_jvp, nondiff_argnums=(0, 2))
    def apply(fn, x, scale):
        return fn(x) * scale

    @apply.defjvp
    def apply_jvp(fn, scale, primals, tangents):  # nondiff arguments first, as in JAX
        (x,), (t,) = primals, tangents
        return apply(fn, x, scale), 2.0 * t * scale

    x, s = _t(3), _t(3)
    g = tg.grad(lambda v: tnp.sum(apply(tnp.tanh, v, s)))(x)
    np.testing.assert_allclose(g.numpy(), 2 * s.numpy())
    # an array in nondiff_argnums gets no derivative (JAX's stop_gradient)
    gs = tg.grad(lambda sc: tnp.sum(apply(tnp.tanh, x, sc)))(s)
    np.testing.assert_allclose(gs.numpy(), 0.0)
    h = tg.hessian(lambda v: tnp.sum(apply(tnp.tanh, v, s)))(x)
    np.testing.assert_allclose(h.numpy(), 0.0)
    np.testing.assert_allclose(tg.vmap(tg.grad(lambda v: tnp.sum(apply(tnp.tanh, v, s))))(
        _t(2, 3)).numpy(), 2 * np.broadcast_to(s.numpy(), (2, 3)))


def test_static_numbers_integer_arrays_and_jit_numbers():
    @tg.custom_jvp
    def f(x, n, k):
        return x * n + tnp.sum(k)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x, n, k), (xt, nt, kt) = primals, tangents
        assert nt == 0 and kt.dtype.kind == "i" and not np.any(kt.numpy())
        return f(x, n, k), xt * n

    k = tg.Tensor(np.arange(3))
    x = _t(3)
    np.testing.assert_allclose(tg.grad(lambda v: tnp.sum(f(v, 2.5, k)))(x).numpy(), 2.5)
    jf = tg.jit(lambda v, n: tnp.sum(f(v, n, k)))
    for n in (2.0, 3.0):  # a Python number jit traces: an input of the program
        np.testing.assert_allclose(jf(x, n).numpy(), np.sum(x.numpy() * n + 3))
    jg = tg.jit(tg.grad(lambda v, n: tnp.sum(f(v, n, k))))
    for n in (2.0, 3.0):
        np.testing.assert_allclose(jg(x, n).numpy(), n)


def test_errors_are_clear():
    with pytest.raises(TypeError, match="custom_jvp: expected a function"):
        tg.custom_jvp(3)
    with pytest.raises(TypeError, match="nondiff_argnums must be an int or a tuple"):
        tg.custom_jvp(tnp.sin, nondiff_argnums="0")

    @tg.custom_jvp
    def f(x):
        return tnp.sin(x)

    with pytest.raises(RuntimeError, match="f.defjvp"):
        tg.grad(lambda v: tnp.sum(f(v)))(_t(2))
    with pytest.raises(TypeError, match="rule must be callable"):
        f.defjvp(1)
    with pytest.raises(NotImplementedError, match="symbolic_zeros"):
        f.defjvp(lambda p, t: p, symbolic_zeros=True)
    f.defjvp(lambda p, t: tnp.cos(p[0]) * t[0])  # not a pair
    with pytest.raises(TypeError, match="must return a pair"):
        tg.jvp(f, (_t(2),), (_t(2),))
    f.defjvp(lambda p, t: (f(*p), tnp.cos(p[0][:1]) * t[0][:1]))
    with pytest.raises(ValueError, match="tangent output leaf 0 has shape"):
        tg.grad(lambda v: tnp.sum(f(v)))(_t(2))
    f.defjvp(lambda p, t: (f(*p), (t[0] * 1.0).astype("float32")))
    with pytest.raises(TypeError, match="has dtype float32, but the primal output"):
        tg.jvp(f, (_t(2),), (_t(2),))
    f.defjvp(lambda p, t: (f(*p), (t[0], t[0])))
    with pytest.raises(TypeError, match="tangent_out has structure"):
        tg.jvp(f, (_t(2),), (_t(2),))
    f.defjvp(lambda p, t: ((f(*p), 1.0), t[0]))
    with pytest.raises(TypeError, match="primal_out has structure"):
        tg.jvp(f, (_t(2),), (_t(2),))
    with pytest.raises(TypeError, match="do not bind"):
        f(_t(2), y=1)

    def outer(y):
        @tg.custom_jvp
        def closes_over(x):
            return x * y

        closes_over.defjvp(lambda p, t: (closes_over(*p), t[0] * y))
        return tnp.sum(closes_over(y * 2.0))

    with pytest.raises(RuntimeError, match="closure"):
        tg.grad(outer)(_t(2))

    g = tg.custom_jvp(lambda a, b: a * b, nondiff_argnums=(5,))
    g.defjvp(lambda *a: None)
    with pytest.raises(ValueError, match="nondiff_argnums 5 is out of range"):
        tg.grad(lambda v: tnp.sum(g(v, v)))(_t(2))
    with pytest.raises(TypeError, match="defjvps cannot be used with nondiff_argnums"):
        g.defjvps(None)
    h = tg.custom_jvp(lambda a, b: a * b)
    h.defjvps(lambda t, o, a, b: t * b)  # one rule for two arguments
    with pytest.raises(TypeError, match="1 rule"):
        tg.jvp(h, (_t(2), _t(2)), (_t(2), _t(2)))
