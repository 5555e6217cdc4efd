"""Differential tests of custom_jvp against JAX (float64, 1e-10): random functions with random
rules (not their true derivatives, so only using the rule can agree), their values and
derivatives of orders 1 and 2, under vmap and jit, on drawn shapes (broadcasting, size-1 and
size-0 dimensions). Skipped without JAX."""

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.numpy as tnp

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

TOL = dict(rtol=1e-10, atol=1e-10)
UNARY = {
    "sin": lambda m, v: m.sin(v),
    "cos": lambda m, v: m.cos(v),
    "tanh": lambda m, v: m.tanh(v),
    "exp_half": lambda m, v: m.exp(0.5 * v),
    "square": lambda m, v: v * v,
    "softplus": lambda m, v: m.log1p(m.exp(v)),
    "one": lambda m, v: v * 0.0 + 1.0,
}
NAMES = sorted(UNARY)


@pytest.fixture(autouse=True, scope="module")
def _x64():
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", old)


def build(m, ops, nondiff_scale):
    """``f(x, y) = A(x) B(y) + C(x)`` with the rule ``t = D(x) E(y) x_dot + F(x) G(y) y_dot``
    (times a static scale passed through ``nondiff_argnums``), in the library ``m``."""
    a, b, c, d, e, f_, g = (functools.partial(UNARY[o], m) for o in ops)
    cj = tg.custom_jvp if m is tnp else jax.custom_jvp

    @functools.partial(cj, nondiff_argnums=(2,) if nondiff_scale else ())
    def f(x, y, *scale):
        return a(x) * b(y) + c(x)

    def rule(*args):
        scale = args[0] if nondiff_scale else 1.0
        (x, y), (xd, yd) = args[-2], args[-1]
        return f(x, y, *args[:-2]), scale * (d(x) * e(y) * xd + f_(x) * g(y) * yd)

    f.defjvp(rule)

    def loss(x, y, w):
        out = f(x, y, 1.5) if nondiff_scale else f(x, y)
        return m.sum(m.tanh(out) * w)

    return f, loss


@st.composite
def cases(draw):
    rank = draw(st.integers(0, 2))
    shape = tuple(draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank)))
    # y broadcasts against x: a suffix of x's shape, some dimensions 1
    k = draw(st.integers(0, len(shape)))
    y_shape = tuple(1 if draw(st.booleans()) else s for s in shape[len(shape) - k:])
    ops = tuple(draw(st.sampled_from(NAMES)) for _ in range(7))
    seed = draw(st.integers(0, 2**16))
    return shape, y_shape, ops, seed, draw(st.booleans())


def close(a, b):
    for u, v in zip(tg.tree.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(u.numpy()), np.asarray(v), **TOL)


@settings(max_examples=12)
@given(case=cases())
def test_custom_jvp_matches_jax_at_orders_1_and_2_under_vmap_and_jit(case):
    shape, y_shape, ops, seed, nondiff = case
    rng = np.random.default_rng(seed)
    out_shape = np.broadcast_shapes(shape, y_shape)
    x0, y0 = rng.uniform(-1, 1, shape), rng.uniform(-1, 1, y_shape)
    w0 = rng.uniform(-1, 1, out_shape)
    f_t, loss_t = build(tnp, ops, nondiff)
    f_j, loss_j = build(jnp, ops, nondiff)
    x, y, w = tg.Tensor(x0), tg.Tensor(y0), tg.Tensor(w0)
    args = (1.5,) if nondiff else ()

    tx, ty = rng.uniform(-1, 1, shape), rng.uniform(-1, 1, y_shape)
    xs0 = np.stack([x0, x0 * 0.5 - 0.1])  # a batch of x (y and w shared) for vmap

    def reference(x0, y0, w0, tx, ty, xs0):  # JAX's answers, in one compiled call
        return (f_j(x0, y0, *args), jax.jvp(lambda a, b: f_j(a, b, *args), (x0, y0), (tx, ty)),
                jax.grad(loss_j, argnums=(0, 1))(x0, y0, w0), jax.hessian(loss_j)(x0, y0, w0),
                jax.jacrev(jax.grad(loss_j, argnums=1), argnums=0)(x0, y0, w0),
                jax.hessian(loss_j)(x0 + 0.25, y0, w0),
                jax.vmap(jax.grad(loss_j), in_axes=(0, None, None))(xs0, y0, w0),
                jax.vmap(jax.hessian(loss_j), in_axes=(0, None, None))(xs0, y0, w0))

    ref = jax.jit(reference)(x0, y0, w0, tx, ty, xs0)
    close(f_t(x, y, *args), ref[0])
    close(tg.jvp(lambda a, b: f_t(a, b, *args), (x, y), (tg.Tensor(tx), tg.Tensor(ty))), ref[1])
    close(tg.grad(loss_t, argnums=(0, 1))(x, y, w), ref[2])
    # order 2: reverse over reverse, forward over reverse
    close(tg.hessian(loss_t)(x, y, w), ref[3])
    close(tg.jacrev(tg.grad(loss_t, argnums=1), argnums=0)(x, y, w), ref[4])
    # jit: the recording, then the compiled program on another input
    jh = tg.jit(tg.hessian(loss_t))
    close(jh(x, y, w), ref[3])
    close(jh(x + 0.25, y, w), ref[5])
    close(tg.vmap(tg.grad(loss_t), in_axes=(0, None, None))(tg.Tensor(xs0), y, w), ref[6])
    close(tg.jit(tg.vmap(tg.hessian(loss_t), in_axes=(0, None, None)))(tg.Tensor(xs0), y, w),
          ref[7])
