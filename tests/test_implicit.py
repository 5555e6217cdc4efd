"""custom_root and custom_linear_solve: implicit differentiation, exact to second order.

The references are the implicit function theorem worked out by hand (in NumPy), central
finite differences of a solve accurate to machine precision, and JAX's ``lax.custom_root`` /
``lax.custom_linear_solve`` (skipped without JAX).
"""

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.core.tape import GuardError

# -- a scalar root: x^3 + theta x - 1 = 0 -------------------------------------------------------


def newton(f, x):
    """Newton's method with a convergence test: Python control flow, never differentiated."""
    for _ in range(60):
        step = f(x) / tg.grad(f)(x)
        x = x - step
        if abs(float(step)) < 1e-15:
            break
    return x


def scalar_tangent_solve(g, y):
    return y / g(1.0)


def x_star(theta):
    return tg.custom_root(lambda x: x**3 + theta * x - 1.0, tg.Tensor(np.float64(1.0)),
                          newton, scalar_tangent_solve)


def accurate_root(theta: float) -> float:
    """The real root of x^3 + theta x - 1, polished by Newton in float64."""
    x = max(r.real for r in np.roots([1.0, 0.0, theta, -1.0]) if abs(r.imag) < 1e-9)
    for _ in range(5):
        x -= (x**3 + theta * x - 1) / (3 * x**2 + theta)
    return x


def scalar_derivatives(theta: float):
    """x*, dx*/dtheta and d2x*/dtheta2 by the implicit function theorem: with
    F = x^3 + theta x - 1, F_x = 3x^2 + theta, F_theta = x, x' = -x / F_x and, differentiating
    that quotient, x'' = -(x' F_x - x (6 x x' + 1)) / F_x^2."""
    x = accurate_root(theta)
    fx = 3 * x**2 + theta
    d1 = -x / fx
    d2 = -(d1 * fx - x * (6 * x * d1 + 1)) / fx**2
    return x, d1, d2


@pytest.mark.parametrize("theta", [0.3, 0.7, 2.0])
def test_newton_root_gradient_and_hessian_equal_the_implicit_function_theorem(theta):
    x, d1, d2 = scalar_derivatives(theta)
    th = tg.Tensor(np.float64(theta))
    np.testing.assert_allclose(float(x_star(th)), x, rtol=1e-14)
    np.testing.assert_allclose(float(tg.grad(x_star)(th)), d1, rtol=1e-12)
    np.testing.assert_allclose(float(tg.grad(tg.grad(x_star))(th)), d2, rtol=1e-12)
    np.testing.assert_allclose(float(tg.hessian(x_star)(th)), d2, rtol=1e-12)
    np.testing.assert_allclose(float(tg.jacfwd(tg.jacfwd(x_star))(th)), d2, rtol=1e-12)
    _, t = tg.jvp(x_star, (th,), (tg.Tensor(np.float64(1.0)),))
    np.testing.assert_allclose(float(t), d1, rtol=1e-12)
    # and the formulas against finite differences of the accurate solve
    h = 1e-4
    fd1 = (accurate_root(theta + h) - accurate_root(theta - h)) / (2 * h)
    h2 = 1e-3
    fd2 = (accurate_root(theta + h2) - 2 * x + accurate_root(theta - h2)) / h2**2
    np.testing.assert_allclose(d1, fd1, rtol=1e-7)
    np.testing.assert_allclose(d2, fd2, rtol=1e-5)


def test_newton_root_under_jit_and_vmap():
    thetas = np.array([0.3, 0.7, 2.0])
    want = np.array([scalar_derivatives(t) for t in thetas])
    jg = tg.jit(tg.grad(tg.grad(x_star)))
    for t, (_, _, d2) in zip(thetas, want):  # the recording, then the compiled program
        np.testing.assert_allclose(float(jg(tg.Tensor(np.float64(t)))), d2, rtol=1e-12)
    ths = tg.Tensor(thetas)
    np.testing.assert_allclose(tg.vmap(x_star)(ths).numpy(), want[:, 0], rtol=1e-14)
    np.testing.assert_allclose(tg.vmap(tg.grad(x_star))(ths).numpy(), want[:, 1], rtol=1e-12)
    np.testing.assert_allclose(tg.vmap(tg.hessian(x_star))(ths).numpy(), want[:, 2], rtol=1e-12)
    jv = tg.jit(tg.vmap(tg.grad(tg.grad(x_star))))
    for s in (0.0, 0.1):
        w = np.array([scalar_derivatives(t + s)[2] for t in thetas])
        np.testing.assert_allclose(jv(tg.Tensor(thetas + s)).numpy(), w, rtol=1e-12)
    # the Hessian of a loss of the roots of a batch: d2/dtheta2 sum(x*^2) is diagonal
    h = tg.hessian(lambda th: tnp.sum(tg.vmap(x_star)(th) ** 2))(ths)
    np.testing.assert_allclose(np.diag(h.numpy()),
                               2 * want[:, 1] ** 2 + 2 * want[:, 0] * want[:, 2], rtol=1e-12)
    np.testing.assert_allclose(h.numpy() - np.diag(np.diag(h.numpy())), 0.0, atol=1e-15)


# -- a vector root: x_i^3 + theta_i x_i + (C x)_i - c_i = 0 -------------------------------------
C = np.array([[0.0, 0.2], [0.3, 0.0]])
RHS = np.array([1.0, 2.0])
W = np.array([1.0, 2.0])


def vector_newton(f, x):
    for _ in range(40):
        x = x - tnp.linalg.solve(tg.jacfwd(f)(x), f(x))
    return x


def dense_tangent_solve(g, y):
    return tnp.linalg.solve(tg.jacobian(g)(y), y)


def vector_root(theta):
    f = lambda x: x**3 + theta * x + tg.Tensor(C) @ x - tg.Tensor(RHS)  # noqa: E731
    return tg.custom_root(f, tg.Tensor(np.ones(2)), vector_newton, dense_tangent_solve)


def phi(theta):
    return tnp.sum(vector_root(theta) * tg.Tensor(W))


def accurate_vector_root(theta):
    x = np.ones(2)
    for _ in range(60):
        x = x - np.linalg.solve(np.diag(3 * x**2 + theta) + C, x**3 + theta * x + C @ x - RHS)
    return x


def vector_derivatives(theta):
    """x*, its Jacobian d x_i / d theta_k and second derivatives d2 x_i / d theta_k d theta_l
    by the implicit function theorem: F_x x_k = -e_k x_k (F_theta = diag(x)) and
    F_x x_kl = -(6 x x_k x_l + e_k x_l + e_l x_k) (elementwise in i)."""
    x = accurate_vector_root(theta)
    fx = np.diag(3 * x**2 + theta) + C
    jac = -np.linalg.solve(fx, np.diag(x))  # [i, k]
    second = np.zeros((2, 2, 2))  # [i, k, l]
    for k in range(2):
        for m in range(2):
            r = 6 * x * jac[:, k] * jac[:, m] + np.eye(2)[k] * jac[:, m] + np.eye(2)[m] * jac[:, k]
            second[:, k, m] = -np.linalg.solve(fx, r)
    return x, jac, second


def test_vector_newton_root_gradient_and_hessian_equal_the_implicit_function_theorem():
    theta = np.array([0.7, 1.1])
    x, jac, second = vector_derivatives(theta)
    th = tg.Tensor(theta)
    np.testing.assert_allclose(vector_root(th).numpy(), x, rtol=1e-14)
    np.testing.assert_allclose(tg.jacrev(vector_root)(th).numpy(), jac, rtol=1e-12)
    np.testing.assert_allclose(tg.jacfwd(vector_root)(th).numpy(), jac, rtol=1e-12)
    hess = np.einsum("i,ikl->kl", W, second)
    np.testing.assert_allclose(tg.grad(phi)(th).numpy(), W @ jac, rtol=1e-12)
    np.testing.assert_allclose(tg.hessian(phi)(th).numpy(), hess, rtol=1e-11)
    np.testing.assert_allclose(tg.jacrev(tg.grad(phi))(th).numpy(), hess, rtol=1e-11)
    np.testing.assert_allclose(tg.jit(tg.hessian(phi))(th).numpy(), hess, rtol=1e-11)
    # finite differences of the accurate solve
    h = 1e-4
    fd = np.stack([(accurate_vector_root(theta + h * e) - accurate_vector_root(theta - h * e))
                   / (2 * h) for e in np.eye(2)], axis=1)
    np.testing.assert_allclose(jac, fd, rtol=1e-7)
    g = lambda t: W @ vector_derivatives(t)[1]  # noqa: E731
    fd2 = np.stack([(g(theta + h * e) - g(theta - h * e)) / (2 * h) for e in np.eye(2)])
    np.testing.assert_allclose(hess, fd2, rtol=1e-7)
    # vmap: a batch of parameter vectors
    thetas = np.array([[0.7, 1.1], [0.4, 2.0], [1.5, 0.9]])
    hs = tg.vmap(tg.hessian(phi))(tg.Tensor(thetas)).numpy()
    for t, hb in zip(thetas, hs):
        np.testing.assert_allclose(hb, np.einsum("i,ikl->kl", W, vector_derivatives(t)[2]),
                                   rtol=1e-11)


def test_vector_root_matches_jax():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    with jax.enable_x64(True):
        def j_newton(f, x):
            for _ in range(12):  # quadratic convergence from x = 1
                x = x - jnp.linalg.solve(jax.jacfwd(f)(x), f(x))
            return x

        def j_phi(theta):
            x = jax.lax.custom_root(
                lambda x: x**3 + theta * x + C @ x - RHS, jnp.ones(2), j_newton,
                lambda g, y: jnp.linalg.solve(jax.jacobian(g)(y), y))
            return jnp.sum(x * W)

        reference = jax.jit(lambda t: (jax.grad(j_phi)(t), jax.hessian(j_phi)(t)))
        for theta in (np.array([0.7, 1.1]), np.array([0.2, 3.0])):
            th = tg.Tensor(theta)
            g, h = reference(theta)
            np.testing.assert_allclose(tg.grad(phi)(th).numpy(), g, rtol=1e-12)
            np.testing.assert_allclose(tg.hessian(phi)(th).numpy(), h, rtol=1e-10)


def test_root_has_aux_and_no_derivative_in_the_initial_guess():
    def solve_counting(f, x):
        iterations = 0
        while iterations < 60:
            step = f(x) / tg.grad(f)(x)
            x = x - step
            iterations += 1
            if abs(float(step)) < 1e-15:
                break
        return x, tg.Tensor(iterations)

    def root(theta, guess):
        return tg.custom_root(lambda x: x**3 + theta * x - 1.0, guess, solve_counting,
                              scalar_tangent_solve, has_aux=True)

    th, guess = tg.Tensor(np.float64(0.7)), tg.Tensor(np.float64(1.0))
    x, iters = root(th, guess)
    assert int(iters) > 2
    g_theta, g_guess = tg.grad(lambda t, x0: root(t, x0)[0], argnums=(0, 1))(th, guess)
    np.testing.assert_allclose(float(g_theta), scalar_derivatives(0.7)[1], rtol=1e-12)
    assert float(g_guess) == 0.0


def test_root_errors_are_clear():
    th = tg.Tensor(np.float64(0.7))
    one = tg.Tensor(np.float64(1.0))
    f = lambda x: x**3 + th * x - 1.0  # noqa: E731
    with pytest.raises(TypeError, match="custom_root: solve must be callable"):
        tg.custom_root(f, one, None, scalar_tangent_solve)
    with pytest.raises(TypeError, match="initial_guess leaf 0 has dtype int64"):
        tg.custom_root(f, tg.Tensor(1), newton, scalar_tangent_solve)
    with pytest.raises(TypeError, match="f returns structure"):
        tg.custom_root(lambda x: (x, x), one, newton, scalar_tangent_solve)
    with pytest.raises(ValueError, match="f's output leaf 0 has shape"):
        tg.custom_root(lambda x: tnp.stack([x, x]), one, newton, scalar_tangent_solve)
    with pytest.raises(ValueError, match="solve's solution leaf 0 has shape"):
        tg.custom_root(f, one, lambda f, x: tnp.stack([x, x]), scalar_tangent_solve)
    with pytest.raises(TypeError, match="with has_aux=True, solve must return a pair"):
        tg.custom_root(f, one, newton, scalar_tangent_solve, has_aux=True)
    with pytest.raises(TypeError, match="tangent_solve's result has structure"):
        tg.grad(lambda t: tg.custom_root(lambda x: x**3 + t * x - 1.0, one, newton,
                                         lambda g, y: (y, y)))(th)

    def solve_closing_over(theta):  # reads theta itself rather than through f
        return lambda f, x: x * 0.0 + (1.0 / (1.0 + theta))

    with pytest.raises(RuntimeError, match="closure"):
        tg.grad(lambda t: tg.custom_root(lambda x: x * (1.0 + t) - 1.0, one,
                                         solve_closing_over(t), scalar_tangent_solve))(th)
    branching = lambda x: tnp.where(x > 0, x - 1.0, x + 1.0) * th if False else (  # noqa: E731
        x - 1.0 if float(tg.stop_gradient(x)) > 0.5 else x + 1.0)
    with pytest.raises(GuardError, match="Python decision"):
        tg.custom_root(branching, one, lambda f, x: f(x * 0.0 + 0.2), scalar_tangent_solve)


# -- custom_linear_solve ------------------------------------------------------------------------
RNG = np.random.default_rng(5)
A0 = RNG.normal(size=(3, 3)) + 3 * np.eye(3)
S0 = A0 @ A0.T  # symmetric positive definite
B0 = RNG.normal(size=3)


def dense_solve(matvec, b):
    return tnp.linalg.solve(tg.jacfwd(matvec)(b), b)


def cg(matvec, b):
    """Conjugate gradients with a Python stopping test (symmetric positive definite A)."""
    x = b * 0.0
    r = b - matvec(x)
    p = r
    rs = float(tnp.sum(r * r))
    if rs == 0.0:  # b = 0 (recording a tangent program runs the solver on zeros)
        return x
    for _ in range(50):
        ap = matvec(p)
        alpha = rs / float(tnp.sum(p * ap))
        x = x + alpha * p
        r = r - alpha * ap
        new = float(tnp.sum(r * r))
        if new < 1e-30:
            break
        p = r + (new / rs) * p
        rs = new
    return x


def lin_loss(a, b):
    x = tg.custom_linear_solve(lambda v: a @ v, b, dense_solve, dense_solve)
    return tnp.sum(tnp.sin(x) * x)


def np_lin_loss(a, b):
    x = np.linalg.solve(a, b)
    return np.sum(np.sin(x) * x)


def test_linear_solve_derivatives_equal_jax():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    with jax.enable_x64(True):
        def j_dense(matvec, b):
            return jnp.linalg.solve(jax.jacfwd(matvec)(b), b)

        def j_loss(a, b):
            x = jax.lax.custom_linear_solve(lambda v: a @ v, b, j_dense, j_dense)
            return jnp.sum(jnp.sin(x) * x)

        As = np.stack([A0, A0 + 0.5 * np.eye(3), A0.T])

        @jax.jit
        def reference(a, b, a2, batch):  # JAX's answers, in one compiled call
            return (j_loss(a, b), jax.grad(j_loss, argnums=(0, 1))(a, b),
                    jax.hessian(j_loss, argnums=0)(a, b), jax.hessian(j_loss, argnums=1)(a, b),
                    jax.jacfwd(jax.grad(j_loss, argnums=0), argnums=1)(a, b),
                    jax.grad(j_loss, argnums=(0, 1))(a2, b),
                    jax.vmap(jax.hessian(j_loss, argnums=1), in_axes=(0, None))(batch, b))

        ref = reference(A0, B0, A0 + 0.5, As)
        close = dict(rtol=1e-10, atol=1e-13)
        a, b = tg.Tensor(A0), tg.Tensor(B0)
        np.testing.assert_allclose(float(lin_loss(a, b)), float(ref[0]), rtol=1e-13)
        for got, want in zip(tg.grad(lin_loss, argnums=(0, 1))(a, b), ref[1]):
            np.testing.assert_allclose(got.numpy(), want, **close)
        for argnums in (0, 1):
            want = ref[2 + argnums]
            np.testing.assert_allclose(tg.hessian(lin_loss, argnums=argnums)(a, b).numpy(),
                                       want, **close)
            np.testing.assert_allclose(
                tg.jacrev(tg.grad(lin_loss, argnums=argnums), argnums=argnums)(a, b).numpy(),
                want, **close)
        np.testing.assert_allclose(
            tg.jacfwd(tg.grad(lin_loss, argnums=0), argnums=1)(a, b).numpy(), ref[4], **close)
        jg = tg.jit(tg.grad(lin_loss, argnums=(0, 1)))
        for s, want in ((0.0, ref[1]), (0.5, ref[5])):  # the recording, then the program
            for got, w in zip(jg(a + s, b), want):
                np.testing.assert_allclose(got.numpy(), w, **close)
        got = tg.vmap(tg.hessian(lin_loss, argnums=1), in_axes=(0, None))(tg.Tensor(As), b)
        np.testing.assert_allclose(got.numpy(), ref[6], **close)


def test_linear_solve_against_numpy_and_finite_differences():
    a, b = tg.Tensor(A0), tg.Tensor(B0)
    np.testing.assert_allclose(float(lin_loss(a, b)), np_lin_loss(A0, B0), rtol=1e-13)
    ga = tg.grad(lin_loss)(a, b).numpy()
    h = 1e-6
    fd = np.zeros((3, 3))
    for i in range(3):
        for j in range(3):
            e = np.zeros((3, 3))
            e[i, j] = h
            fd[i, j] = (np_lin_loss(A0 + e, B0) - np_lin_loss(A0 - e, B0)) / (2 * h)
    np.testing.assert_allclose(ga, fd, rtol=1e-7, atol=1e-9)


def test_symmetric_cg_with_python_control_flow_under_vmap_jit_and_second_order():
    def loss(s, b):
        x = tg.custom_linear_solve(lambda v: s @ v, b, cg, symmetric=True)
        return tnp.sum(x**3)

    def np_loss(s, b):
        return np.sum(np.linalg.solve(s, b) ** 3)

    s, b = tg.Tensor(S0), tg.Tensor(B0)
    np.testing.assert_allclose(float(loss(s, b)), np_loss(S0, B0), rtol=1e-10)
    x = np.linalg.solve(S0, B0)
    # d/db sum(x^3) = S^-T (3 x^2); the Hessian in b: S^-T diag(6 x) S^-1
    si = np.linalg.inv(S0)
    np.testing.assert_allclose(tg.grad(loss, argnums=1)(s, b).numpy(), si.T @ (3 * x**2),
                               rtol=1e-10)
    np.testing.assert_allclose(tg.hessian(loss, argnums=1)(s, b).numpy(),
                               si.T @ np.diag(6 * x) @ si, rtol=1e-9)
    bs = np.stack([B0, -B0, 2 * B0])  # cg runs once per example (its stopping test)
    got = tg.vmap(tg.grad(loss, argnums=1), in_axes=(None, 0))(s, tg.Tensor(bs)).numpy()
    want = np.stack([si.T @ (3 * np.linalg.solve(S0, v) ** 2) for v in bs])
    np.testing.assert_allclose(got, want, rtol=1e-10)
    jg = tg.jit(tg.grad(loss, argnums=1))
    for v in bs:
        np.testing.assert_allclose(jg(s, tg.Tensor(v)).numpy(),
                                   si.T @ (3 * np.linalg.solve(S0, v) ** 2), rtol=1e-10)


def test_linear_solve_forward_mode_without_transpose_solve_and_has_aux():
    a, b = tg.Tensor(A0), tg.Tensor(B0)

    def solve_aux(matvec, b):
        return dense_solve(matvec, b), tg.Tensor(7)

    def f(a, b):
        x, aux = tg.custom_linear_solve(lambda v: a @ v, b, solve_aux, has_aux=True)
        assert int(aux) == 7
        return x

    x = f(a, b)
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(A0, B0), rtol=1e-13)
    jac = tg.jacfwd(f, argnums=1)(a, b)  # forward mode solves again: no transpose needed
    np.testing.assert_allclose(jac.numpy(), np.linalg.inv(A0), rtol=1e-12)
    with pytest.raises(TypeError, match="needs transpose_solve"):
        tg.grad(lambda b: tnp.sum(f(a, b)))(b)


def test_linear_solve_errors_are_clear():
    b = tg.Tensor(B0)
    with pytest.raises(TypeError, match="custom_linear_solve: matvec must be callable"):
        tg.custom_linear_solve(3, b, dense_solve)
    with pytest.raises(TypeError, match="b leaf 0 has dtype int64"):
        tg.custom_linear_solve(lambda v: v, tg.Tensor([1, 2]), dense_solve)
    with pytest.raises(TypeError, match="matvec returns structure"):
        tg.custom_linear_solve(lambda v: (v, v), b, dense_solve)
    with pytest.raises(ValueError, match="matvec's output leaf 0 has shape"):
        tg.custom_linear_solve(lambda v: v[:2], b, dense_solve)
    with pytest.raises(ValueError, match="solve's solution leaf 0 has shape"):
        tg.custom_linear_solve(lambda v: v, b, lambda mv, b: b[:2])
