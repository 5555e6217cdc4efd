"""Example tests of ``tapegrad.scipy.integrate.odeint``: solutions against closed forms and
SciPy's ``odeint``, adjoint and forward-sensitivity derivatives against closed forms and
finite differences (every argument: ``y0``, ``t``, ``args``), pytrees, ``vmap``, and the
errors raised."""

import numpy as np
import pytest
import scipy.integrate as si

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.scipy.integrate import odeint
from tapegrad.testing import check_grads, check_vmap

T = np.array([0.0, 0.4, 1.0, 1.7])


def decay(y, t, k):
    return -k * y


def oscillator(y, t, w, c):
    return tnp.stack([y[1], -w * w * y[0] - c * y[1] + tnp.sin(t)])


def test_solution_matches_closed_form_and_scipy():
    y0 = np.array([1.0, 2.0])
    ys = odeint(decay, y0, T, 0.7)
    assert ys.shape == (4, 2) and ys.dtype == np.float64
    np.testing.assert_allclose(ys.numpy(), y0 * np.exp(-0.7 * T)[:, None], rtol=1e-7)
    np.testing.assert_array_equal(ys.numpy()[0], y0)
    want = si.odeint(lambda y, t: oscillator(tg.Tensor(y), t, 1.3, 0.2).numpy(), [1.0, 0.0], T,
                     rtol=1e-11, atol=1e-11)
    got = odeint(oscillator, np.array([1.0, 0.0]), T, 1.3, 0.2, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-7, atol=1e-9)


def test_float32_and_pytree_state():
    ys = odeint(decay, np.ones(2, np.float32), T.astype(np.float32), 0.5, rtol=1e-5,
                atol=1e-6)
    assert ys.dtype == np.float32
    np.testing.assert_allclose(ys.numpy()[:, 0], np.exp(-0.5 * T), rtol=1e-4)

    def f(state, t, k):
        return {"pos": state["vel"], "vel": -k * state["pos"]}

    out = odeint(f, {"pos": np.array(1.0), "vel": np.array(0.0)}, T, 4.0)
    assert set(out) == {"pos", "vel"} and out["pos"].shape == (4,)
    np.testing.assert_allclose(out["pos"].numpy(), np.cos(2.0 * T), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(out["vel"].numpy(), -2.0 * np.sin(2.0 * T), rtol=1e-6,
                               atol=1e-8)


def test_adjoint_gradients_match_closed_forms():
    # y(t) = y0 exp(-k (t - t0)): dy(t1)/dy0, dy(t1)/dk, dy(t1)/dt1, dy(t1)/dt0
    y0, k = 1.5, 0.8
    t = np.array([0.2, 1.1])

    def last(y0_, t_, k_):
        return odeint(decay, tnp.reshape(y0_, (1,)), t_, k_)[-1, 0]

    g_y0, g_t, g_k = tg.grad(last, argnums=(0, 1, 2))(
        *[tg.Tensor(np.asarray(v, dtype=np.float64)) for v in (y0, t, k)])
    e = np.exp(-k * (t[1] - t[0]))
    np.testing.assert_allclose(g_y0.item(), e, rtol=1e-7)
    np.testing.assert_allclose(g_k.item(), -y0 * (t[1] - t[0]) * e, rtol=1e-7)
    np.testing.assert_allclose(g_t.numpy(), [k * y0 * e, -k * y0 * e], rtol=1e-7)
    # forward mode gives the same
    _, tan = tg.jvp(lambda kk: last(y0, t, kk), (tg.Tensor(k, dtype="float64"),),
                    (tg.Tensor(1.0, dtype="float64"),))
    np.testing.assert_allclose(tan.item(), g_k.item(), rtol=1e-7)
    # second order: d2 y / dk2 = y0 (t1 - t0)**2 e
    h = tg.grad(tg.grad(lambda kk: last(y0, t, kk)))(tg.Tensor(k, dtype="float64"))
    np.testing.assert_allclose(h.item(), y0 * (t[1] - t[0]) ** 2 * e, rtol=1e-6)


def test_gradients_of_every_argument_to_order_two():
    def f(y0, t, w, c):
        return odeint(oscillator, y0, t, w, c, rtol=1e-10, atol=1e-10)

    args = (tg.Tensor(np.array([1.0, -0.5])), tg.Tensor(np.array([0.0, 0.3, 0.6])),
            tg.Tensor(1.3), tg.Tensor(0.2))
    args = tuple(a.astype("float64") for a in args)
    check_grads(f, args, order=1, modes=("rev", "fwd"), rtol=1e-5, atol=1e-6)
    check_grads(lambda w: f(args[0], args[1][:2], w, args[3])[-1, 0], (args[2],), order=2,
                modes=("rev", "fwd"), rtol=1e-4, atol=1e-5)


def test_vmap_solves_each_example():
    y0s = tg.Tensor(np.array([[1.0, 0.0], [0.5, 0.5], [0.0, 2.0]]))
    ws = tg.Tensor(np.array([1.0, 1.5, 0.5]))
    t = tg.Tensor(T[:3])

    def f(y0, w):
        return odeint(oscillator, y0, t, w, 0.1)

    check_vmap(f, (y0s, ws), in_axes=(0, 0), rtol=1e-8, atol=1e-10)
    check_vmap(f, (y0s, tg.Tensor(1.2, dtype="float64")), in_axes=(0, None), rtol=1e-8,
               atol=1e-10)
    check_vmap(tg.grad(lambda y0, w: tnp.sum(f(y0, w))), (y0s, ws), rtol=1e-7, atol=1e-9)


def test_gradient_matches_finite_differences_of_scipys_solutions():
    # the adjoint gradient in a parameter against a central difference of SciPy's solutions
    w0, eps = 1.3, 1e-5

    def sol(w):
        return si.odeint(lambda y, t: oscillator(tg.Tensor(y), t, w, 0.2).numpy(), [1.0, 0.0],
                         T, rtol=1e-10, atol=1e-10)[-1, 0]

    g = tg.grad(lambda w: odeint(oscillator, np.array([1.0, 0.0]), T, w, 0.2, rtol=1e-10,
                                 atol=1e-10)[-1, 0])(tg.Tensor(w0, dtype="float64"))
    np.testing.assert_allclose(g.item(), (sol(w0 + eps) - sol(w0 - eps)) / (2 * eps),
                               rtol=1e-4)


@pytest.mark.parametrize("call, exc, match", [
    (lambda: odeint(decay, np.array([1.0]), np.array([1.0, 0.5]), 1.0), ValueError,
     r"odeint: t must be finite and strictly increasing"),
    (lambda: odeint(decay, np.array([1.0]), np.array([0.0, np.nan]), 1.0), ValueError,
     r"odeint: t must be finite"),
    (lambda: odeint(decay, np.array([1.0]), np.array([[0.0, 0.5]]), 1.0), ValueError,
     r"odeint: t must be a 1-D array of times, got shape \(1, 2\)"),
    (lambda: odeint(decay, np.array([1]), np.array([0.0, 0.5]), 1.0), TypeError,
     r"odeint: y0 must hold real floating arrays \(float32 or float64\), got a leaf of dtype "
     r"int64"),
    (lambda: odeint(decay, np.array([1.0 + 1j]), np.array([0.0, 0.5]), 1.0), TypeError,
     "odeint: y0 must hold real floating arrays"),
    (lambda: odeint(lambda y, t: -y[:1], np.array([1.0, 2.0]), np.array([0.0, 0.5])),
     ValueError, r"odeint: func returned a leaf of shape \(1,\) where y0 has shape \(2,\)"),
    (lambda: odeint(lambda y, t: (y, y), np.array([1.0]), np.array([0.0, 0.5])), TypeError,
     "func must return the structure of y0"),
    (lambda: odeint(lambda y, t: y * y, np.array([1.0]), np.array([0.0, 2.0]), mxstep=50),
     RuntimeError, r"odeint: more than mxstep=50 steps between t=0 and t=2 \(reached t=0\.9"),
    (lambda: odeint(decay, {}, np.array([0.0, 0.5]), 1.0), ValueError, "odeint: y0 has no "
                                                                        "leaves"),
])
def test_bad_input_is_explained(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
