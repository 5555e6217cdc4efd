"""Differential tests of scan, fori_loop, cond and switch against JAX (float64, 1e-10): random
small bodies (pytree carries, closures over a differentiated parameter), their values and
derivatives of orders 1 and 2, under vmap and jit, on drawn sizes (size-0 and size-1
dimensions, zero-length loops). Skipped without JAX."""

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
    "ident": lambda m, v: v,
}
NAMES = sorted(UNARY)


@pytest.fixture(autouse=True, scope="module")
def _x64():
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", old)


def lib(m):
    """The control-flow functions of the library ``m`` (tapegrad.numpy or jax.numpy)."""
    if m is tnp:
        return tg.scan, tg.fori_loop, tg.cond, tg.switch
    return jax.lax.scan, jax.lax.fori_loop, jax.lax.cond, jax.lax.switch


def build(m, kind, ops, reverse):
    """A scalar loss of ``(h0, xs, w)`` built around one construct ``kind`` whose body is made
    of the drawn unary ``ops``; ``w`` is read by closure."""
    a, b, c, d, e = (functools.partial(UNARY[o], m) for o in ops)
    scan, fori_loop, cond, switch = lib(m)

    def step(carry, x, w):
        h, s = carry
        h_new = 0.5 * a(h) * w + 0.3 * b(x) + 0.2 * c(h * x)
        s_new = s + m.sum(d(h_new) * w)
        return (h_new, s_new), e(h_new) * x

    def loss(h0, xs, w):
        if kind == "scan":
            (h, s), ys = scan(lambda cr, x: step(cr, x, w), (h0, m.sum(h0) * 0.0), xs,
                              reverse=reverse)
            return m.sum(m.tanh(h)) + s + m.sum(ys * 0.7)
        if kind == "fori":
            n = xs.shape[0]
            padded = m.concatenate([xs, m.zeros((1,) + xs.shape[1:])])  # JAX indexes at trace

            def body(i, cr):
                return step(cr, padded[i] + 0.1 * i, w)[0]

            h, s = fori_loop(0, n, body, (h0, m.sum(h0) * 0.0))
            return m.sum(m.tanh(h)) + s
        if kind == "cond":
            pred = m.sum(h0) > 0.1
            out = cond(pred, lambda u, v: a(u) * v + b(w), lambda u, v: c(u * w) + d(v), h0,
                       m.sum(xs, axis=0))
            return m.sum(e(out))
        # switch: an index in {0, 1, 2} from the data, clamped past the ends
        idx = (m.sum(h0) > 0.0).astype(np.int64) + (m.sum(h0) > 0.5).astype(np.int64) * 3 - 1
        out = switch(idx, [lambda u: a(u) * w, lambda u: b(u + w), lambda u: c(u) * d(w)],
                     h0 + m.sum(xs, axis=0))
        return m.sum(e(out))

    return loss


@st.composite
def cases(draw):
    n = draw(st.integers(0, 3))
    steps = draw(st.integers(0, 3))
    kind = draw(st.sampled_from(["scan", "fori", "cond", "switch"]))
    ops = tuple(draw(st.sampled_from(NAMES)) for _ in range(5))
    return kind, n, steps, ops, draw(st.booleans()), draw(st.integers(0, 2**16))


def close(a, b):
    ua, ub = tg.tree.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(ua) == len(ub)
    for u, v in zip(ua, ub):
        np.testing.assert_allclose(np.asarray(u.numpy()), np.asarray(v), **TOL)


@settings(max_examples=10)
@given(case=cases())
def test_control_flow_matches_jax_at_orders_1_and_2_under_vmap_and_jit(case):
    kind, n, steps, ops, reverse, seed = case
    rng = np.random.default_rng(seed)
    h0, xs0, w0 = rng.uniform(-1, 1, n), rng.uniform(-1, 1, (steps, n)), rng.uniform(-1, 1, n)
    th, txs = rng.uniform(-1, 1, n), rng.uniform(-1, 1, (steps, n))
    hb = np.stack([h0, -h0 + 0.3, h0 * 0.5 + 0.6])  # a batch of h0 for vmap
    loss_t = build(tnp, kind, ops, reverse)
    loss_j = build(jnp, kind, ops, reverse)

    def reference(h0, xs0, w0, th, txs, hb):  # JAX's answers, in one compiled call
        return (loss_j(h0, xs0, w0),
                jax.grad(loss_j, argnums=(0, 1, 2))(h0, xs0, w0),
                jax.jvp(lambda a, b: loss_j(a, b, w0), (h0, xs0), (th, txs)),
                jax.hessian(loss_j, argnums=2)(h0, xs0, w0),
                jax.jacrev(jax.grad(loss_j, argnums=2), argnums=0)(h0, xs0, w0),
                jax.jacfwd(jax.grad(loss_j, argnums=1), argnums=2)(h0, xs0, w0),
                jax.vmap(jax.grad(loss_j, argnums=(0, 2)), in_axes=(0, None, None))(hb, xs0, w0),
                jax.vmap(jax.hessian(loss_j, argnums=2), in_axes=(0, None, None))(hb, xs0, w0),
                jax.hessian(loss_j, argnums=2)(h0 + 0.25, xs0, w0))

    ref = jax.jit(reference)(h0, xs0, w0, th, txs, hb)
    h, xs, w = tg.Tensor(h0), tg.Tensor(xs0), tg.Tensor(w0)
    close(loss_t(h, xs, w), ref[0])
    close(tg.grad(loss_t, argnums=(0, 1, 2))(h, xs, w), ref[1])
    close(tg.jvp(lambda a, b: loss_t(a, b, w), (h, xs), (tg.Tensor(th), tg.Tensor(txs))), ref[2])
    close(tg.hessian(loss_t, argnums=2)(h, xs, w), ref[3])
    close(tg.jacrev(tg.grad(loss_t, argnums=2), argnums=0)(h, xs, w), ref[4])
    close(tg.jacfwd(tg.grad(loss_t, argnums=1), argnums=2)(h, xs, w), ref[5])
    close(tg.vmap(tg.grad(loss_t, argnums=(0, 2)), in_axes=(0, None, None))(tg.Tensor(hb), xs, w),
          ref[6])
    close(tg.vmap(tg.hessian(loss_t, argnums=2), in_axes=(0, None, None))(tg.Tensor(hb), xs, w),
          ref[7])
    # jit: the recording, then the compiled program on another input
    jh = tg.jit(tg.hessian(loss_t, argnums=2))
    close(jh(h, xs, w), ref[3])
    close(jh(h + 0.25, xs, w), ref[8])
