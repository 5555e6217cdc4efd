"""The optimizers of Optax and PyTorch that tapegrad.optim adds, each against a NumPy reference
written from its paper's algorithm (float64, several steps), over drawn pytrees whose leaves
include scalars and size-1 and size-0 dims; and float32 leaves stay float32.

Where the paper and the anchor library differ (an ``eps`` placement, Optax's look-ahead form of
NAdam), the reference follows the library's published formula and says so.
"""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tapegrad as tg
from tapegrad import optim
from tapegrad.optim import _extra
from tapegrad.testing import strategies as tst

STEPS = 5


@st.composite
def problems(draw, max_dims=3):
    """``(shapes, params, grads)``: 1-3 leaves, and ``STEPS`` gradients for each."""
    shapes = draw(st.lists(tst.shapes(max_dims=max_dims, max_side=3), min_size=1, max_size=3))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    params = [rng.normal(size=s) for s in shapes]
    grads = [[rng.normal(size=s) for s in shapes] for _ in range(STEPS)]
    return shapes, params, grads


def _run(tx, params, grads, tree="dict"):
    """The parameters (NumPy leaves, in order) after each step of ``tx``."""
    def pack(leaves):
        ts = [tg.Tensor(x) for x in leaves]
        return {f"k{i}": t for i, t in enumerate(ts)} if tree == "dict" else ts

    p = pack(params)
    state = tx.init(p)
    out = []
    for g in grads:
        p, state = optim.apply_gradients(tx, pack(g), state, p)
        out.append([np.asarray(x.numpy()) for x in tg.tree.tree_leaves(p)])
    return out


def _check(ours, ref, rtol=1e-10):
    for got_step, want_step in zip(ours, ref):
        for got, want in zip(got_step, want_step):
            np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


def _per_leaf(step_fn, params, grads):
    """Apply ``step_fn(p, g, state, t) -> (p, state)`` to every leaf; the trajectory."""
    ps = [p.copy() for p in params]
    states = [None] * len(ps)
    out = []
    for t, g in enumerate(grads, 1):
        for i, (p, gi) in enumerate(zip(ps, g)):
            ps[i], states[i] = step_fn(p, gi, states[i], t)
        out.append([p.copy() for p in ps])
    return out


def _norm(x):
    return float(np.sqrt(np.sum(x * x)))


# -- references, one per paper ----------------------------------------------------------------
def nadam_ref(lr, b1=0.9, b2=0.999, eps=1e-8):
    """Dozat (2016), Algorithm 2 with a constant momentum coefficient, in Optax's form (no
    extra ``b2`` factor on the second moment)."""
    def step(p, g, s, t):
        m, v = s or (0.0 * p, 0.0 * p)
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        m_hat = b1 * m / (1 - b1 ** (t + 1)) + (1 - b1) * g / (1 - b1**t)
        return p - lr * m_hat / (np.sqrt(v / (1 - b2**t)) + eps), (m, v)
    return step


def torch_nadam_ref(lr, b1=0.9, b2=0.999, eps=1e-8, psi=4e-3):
    """Dozat (2016), Algorithm 2 with the momentum schedule ``mu_t = b1 (1 - 0.5 0.96**(t
    psi))`` (PyTorch's NAdam)."""
    def step(p, g, s, t):
        m, v, prod = s or (0.0 * p, 0.0 * p, 1.0)
        mu, mu_next = (b1 * (1 - 0.5 * 0.96 ** (k * psi)) for k in (t, t + 1))
        prod = prod * mu
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        d = np.sqrt(v / (1 - b2**t)) + eps
        p = p - lr * (1 - mu) / (1 - prod) * g / d - lr * mu_next / (1 - prod * mu_next) * m / d
        return p, (m, v, prod)
    return step


def radam_ref(lr, b1=0.9, b2=0.999, eps=1e-8, threshold=5.0):
    """Liu et al. (2020), Algorithm 2, with Optax's ``eps`` and threshold rule."""
    rho_inf = 2 / (1 - b2) - 1

    def step(p, g, s, t):
        m, v = s or (0.0 * p, 0.0 * p)
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        m_hat = m / (1 - b1**t)
        rho = rho_inf - 2 * t * b2**t / (1 - b2**t)
        if rho >= threshold:
            r = math.sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho))
            return p - lr * r * m_hat / (np.sqrt(v / (1 - b2**t)) + eps), (m, v)
        return p - lr * m_hat, (m, v)
    return step


def adamax_ref(lr, b1=0.9, b2=0.999, eps=1e-8):
    """Kingma and Ba (2015), Algorithm 2 (``eps`` inside the max, as Optax and PyTorch)."""
    def step(p, g, s, t):
        m, u = s or (0.0 * p, 0.0 * p)
        m, u = b1 * m + (1 - b1) * g, np.maximum(b2 * u, np.abs(g) + eps)
        return p - lr / (1 - b1**t) * m / u, (m, u)
    return step


def adadelta_ref(lr=1.0, rho=0.9, eps=1e-6):
    """Zeiler (2012), Algorithm 1 (times the learning rate)."""
    def step(p, g, s, t):
        eg, ex = s or (0.0 * p, 0.0 * p)
        eg = rho * eg + (1 - rho) * g * g
        d = np.sqrt(ex + eps) / np.sqrt(eg + eps) * g
        ex = rho * ex + (1 - rho) * d * d
        return p - lr * d, (eg, ex)
    return step


def adabelief_ref(lr, b1=0.9, b2=0.999, eps=1e-16):
    """Zhuang et al. (2020), Algorithm 2."""
    def step(p, g, s, t):
        m, v = s or (0.0 * p, 0.0 * p)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * (g - m) ** 2 + eps
        return p - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps), (m, v)
    return step


def lamb_ref(lr, wd, b1=0.9, b2=0.999, eps=1e-6):
    """You et al. (2020), Algorithm 2 (``phi`` the identity; ratio 1 where a norm is 0)."""
    def step(p, g, s, t):
        m, v = s or (0.0 * p, 0.0 * p)
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        r = (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps) + wd * p
        pn, rn = _norm(p), _norm(r)
        ratio = 1.0 if pn == 0 or rn == 0 else pn / rn
        return p - lr * ratio * r, (m, v)
    return step


def lars_ref(lr, wd, eta=0.001, momentum=0.9):
    """You, Gitman and Ginsburg (2017), Algorithm 1 (ratio 1 where a norm is 0)."""
    def step(p, g, s, t):
        v = 0.0 * p if s is None else s
        g = g + wd * p
        pn, gn = _norm(p), _norm(g)
        local = 1.0 if pn == 0 or gn == 0 else eta * pn / gn
        v = momentum * v + lr * local * g
        return p - v, v
    return step


def novograd_ref(lr, wd, b1=0.9, b2=0.25, eps=1e-6):
    """Ginsburg et al. (2019), Algorithm 1."""
    def step(p, g, s, t):
        n = float(np.sum(g * g))
        if s is None:
            v = n
            m = g / (math.sqrt(v) + eps) + wd * p
        else:
            m, v = s
            v = b2 * v + (1 - b2) * n
            m = b1 * m + g / (math.sqrt(v) + eps) + wd * p
        return p - lr * m, (m, v)
    return step


def sm3_ref(lr, momentum=0.9, eps=1e-8):
    """Anil et al. (2019), SM3-II with one cover set per row/column/... of each leaf (one per
    element for rank <= 1), then Optax's momentum."""
    def step(p, g, s, t):
        if s is None:
            acc = [np.zeros(n) for n in p.shape] if p.ndim >= 2 else [np.zeros(p.shape)]
            s = (acc, 0.0 * p)
        acc, m = s
        if p.ndim >= 2:
            shaped = [a.reshape([n if j == i else 1 for j, n in enumerate(p.shape)])
                      for i, a in enumerate(acc)]
            nu = np.minimum.reduce(np.broadcast_arrays(*shaped)) + g * g
            if nu.size:
                acc = [nu.max(axis=tuple(j for j in range(p.ndim) if j != i))
                       for i in range(p.ndim)]
        else:
            nu = acc[0] + g * g
            acc = [nu]
        with np.errstate(divide="ignore"):
            scaled = np.where(nu > 0, g / np.sqrt(nu + eps), 0.0)
        m = (1 - momentum) * scaled + momentum * m
        return p - lr * m, (acc, m)
    return step


def adafactor_ref(lr, min_dim):
    """Shazeer and Stern (2018), Algorithms 4 (factored, rank-2 leaves) and 5, with update
    clipping (``d = 1``) and the relative step ``lr * max(1e-3, RMS(X))``."""
    def step(p, g, s, t):
        beta = 1 - t ** (-0.8)
        g2 = g * g + 1e-30
        factored = p.ndim == 2 and sorted(p.shape)[0] >= min_dim
        if p.size == 0:
            return p, s
        if factored:
            r, c = s or (np.zeros(p.shape[0]), np.zeros(p.shape[1]))
            r = beta * r + (1 - beta) * g2.sum(axis=1)          # row sums
            c = beta * c + (1 - beta) * g2.sum(axis=0)          # column sums
            v = np.outer(r, c) / r.sum()
            s = (r, c)
        else:
            v = 0.0 * p if s is None else s
            v = beta * v + (1 - beta) * g2
            s = v
        u = g / np.sqrt(v)
        u = u / max(1.0, math.sqrt(np.mean(u * u)) / 1.0)
        scale = max(1e-3, math.sqrt(np.mean(p * p)))
        return p - lr * scale * u, s
    return step


REFERENCES = {
    "nadam": (lambda: optim.nadam(0.1), nadam_ref(0.1)),
    "radam": (lambda: optim.radam(0.1, b2=0.9, threshold=4.5), radam_ref(0.1, b2=0.9,
                                                                       threshold=4.5)),
    "adamax": (lambda: optim.adamax(0.1), adamax_ref(0.1)),
    "adadelta": (lambda: optim.adadelta(), adadelta_ref()),
    "adadelta lr": (lambda: optim.adadelta(0.3, rho=0.5, eps=1e-3), adadelta_ref(0.3, 0.5, 1e-3)),
    "adabelief": (lambda: optim.adabelief(0.1), adabelief_ref(0.1)),
    "lamb": (lambda: optim.lamb(0.1, weight_decay=0.1), lamb_ref(0.1, 0.1)),
    "lars": (lambda: optim.lars(0.5, weight_decay=0.1, trust_coefficient=0.1),
             lars_ref(0.5, 0.1, eta=0.1)),
    "novograd": (lambda: optim.novograd(0.1, weight_decay=0.1), novograd_ref(0.1, 0.1)),
    "sm3": (lambda: optim.sm3(0.1), sm3_ref(0.1)),
    "adafactor": (lambda: optim.adafactor(0.1), adafactor_ref(0.1, 128)),
    "torch nadam": (lambda: optim.chain(_extra.ScaleByTorchNAdam(), optim.sgd(0.05)),
                    torch_nadam_ref(0.05)),
}


@pytest.mark.parametrize("name", sorted(REFERENCES))
@given(problem=problems())
def test_each_optimizer_follows_its_paper(name, problem):
    make, ref_step = REFERENCES[name]
    _, params, grads = problem
    _check(_run(make(), params, grads), _per_leaf(ref_step, params, grads))


@given(problem=problems(max_dims=2))
def test_factored_adafactor_follows_the_paper(problem):
    _, params, grads = problem
    tx = optim.adafactor(0.1, min_dim_size_to_factor=1)
    _check(_run(tx, params, grads, tree="list"), _per_leaf(adafactor_ref(0.1, 1), params, grads))


@given(problem=problems(), k=st.integers(1, 3), alpha=st.sampled_from([0.0, 0.5, 1.0]))
def test_lookahead_follows_the_paper(problem, k, alpha):
    """Zhang et al. (2019), Algorithm 1, with SGD as the inner optimizer."""
    _, params, grads = problem
    tx = optim.lookahead(optim.sgd(0.1), sync_period=k, slow_step_size=alpha)
    p = optim.LookaheadParams.init_synced([tg.Tensor(x) for x in params])
    state = tx.init(p)
    fast = [x.copy() for x in params]
    slow = [x.copy() for x in params]
    for t, g in enumerate(grads, 1):
        p, state = optim.apply_gradients(tx, [tg.Tensor(x) for x in g], state, p)
        fast = [f - 0.1 * gi for f, gi in zip(fast, g)]
        if t % k == 0:
            slow = [s + alpha * (f - s) for s, f in zip(slow, fast)]
            fast = [s.copy() for s in slow]
        for got, want in zip(p.fast, fast):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
        for got, want in zip(p.slow, slow):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


@given(problem=problems(), decay=st.sampled_from([0.0, 0.5, 0.9]))
def test_parameter_ema_averages_the_parameters_after_each_step(problem, decay):
    _, params, grads = problem
    tx = optim.chain(optim.sgd(0.1, momentum=0.5), optim.parameter_ema(decay))
    plain = optim.sgd(0.1, momentum=0.5)
    traj = _run(plain, params, grads, tree="list")
    p = [tg.Tensor(x) for x in params]
    state = tx.init(p)
    avg = None
    for g, want_p in zip(grads, traj):
        p, state = optim.apply_gradients(tx, [tg.Tensor(x) for x in g], state, p)
        avg = [w.copy() for w in want_p] if avg is None else [
            decay * a + (1 - decay) * w for a, w in zip(avg, want_p)]
        for got, want in zip(p, want_p):  # the updates pass through unchanged
            np.testing.assert_array_equal(got.numpy(), want)
        for got, want in zip(state[-1]["ema_params"], avg):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


@given(problem=problems())
def test_ema_zero_nans_centralize_and_schedules_follow_their_formulas(problem):
    _, params, grads = problem
    decay = 0.8
    tx = optim.chain(optim.zero_nans(), optim.centralize(), optim.ema(decay),
                     optim.scale_by_schedule(lambda n: -0.1 / (n + 1)))
    p = [tg.Tensor(x) for x in params]
    state = tx.init(p)
    want = [x.copy() for x in params]
    e = [np.zeros_like(x) for x in params]
    for t, g in enumerate(grads, 1):
        g = [x.copy() for x in g]
        if g[0].size:
            g[0].flat[0] = np.nan
        p, state = optim.apply_gradients(tx, [tg.Tensor(x) for x in g], state, p)
        for i, gi in enumerate(g):
            gi = np.where(np.isnan(gi), 0.0, gi)
            if gi.ndim > 1 and gi.size:
                gi = gi - gi.mean(axis=tuple(range(1, gi.ndim)), keepdims=True)
            e[i] = decay * e[i] + (1 - decay) * gi
            want[i] = want[i] - 0.1 / t * e[i] / (1 - decay**t)
        for got, w in zip(p, want):
            np.testing.assert_allclose(got.numpy(), w, rtol=1e-12, atol=1e-12)
        assert bool(state[0]["found_nan"][0]) == bool(g[0].size)


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_float32_leaves_stay_float32(name):
    make, _ = REFERENCES[name]
    rng = np.random.default_rng(0)
    params = {"w": tg.Tensor(rng.normal(size=(3, 2)).astype(np.float32)),
              "b": tg.Tensor(np.float32(0.5) * np.ones(2, np.float32))}
    tx = make()
    state = tx.init(params)
    for _ in range(3):
        grads = {k: tg.Tensor(rng.normal(size=v.shape).astype(np.float32))
                 for k, v in params.items()}
        params, state = optim.apply_gradients(tx, grads, state, params)
    for v in params.values():
        assert v.dtype == np.float32
        assert np.all(np.isfinite(v.numpy()))
    for leaf in tg.tree.tree_leaves(state):
        if isinstance(leaf, tg.Tensor) and leaf.ndim > 0 and leaf.dtype.kind == "f":
            assert leaf.dtype == np.float32


def _schedule_free_ref(params, grads, base_step, lr_of, b1, power):
    """Defazio et al. (2024), Algorithm 1: gradients at ``y = (1 - b1) z + b1 x``, a base
    step on ``z`` (its weight decay taken at ``y``), ``x`` the average of the ``z`` with
    weights ``lr_max**power`` (``c_{t+1} = w_t / sum_{i <= t} w_i``, so the first step sets
    ``x = z``)."""
    z = [p.copy() for p in params]
    x = [p.copy() for p in params]
    y = [p.copy() for p in params]
    states = [None] * len(params)
    lr_max, total, out = 0.0, 0.0, []
    for t, g in enumerate(grads, 1):
        lr_max = max(lr_max, lr_of(t))
        w = lr_max**power
        total += w
        c = w / total if total else 0.0
        for i, gi in enumerate(g):
            z[i], states[i] = base_step(z[i], gi, y[i], states[i], t)
            x[i] = (1 - c) * x[i] + c * z[i]
        y = [(1 - b1) * zi + b1 * xi for zi, xi in zip(z, x)]
        out.append(y)
    return out, x


@given(problem=problems(), b1=st.sampled_from([0.5, 0.9, 1.0]), power=st.sampled_from([1.0, 2.0]))
def test_schedule_free_follows_the_paper(problem, b1, power):
    _, params, grads = problem

    def sgd_step(z, g, y, s, t):
        return z - 0.1 * g, s

    def adamw_step(z, g, y, s, t, b2=0.999, eps=1e-8, wd=0.1):  # the decay is taken at y
        v = 0.0 * z if s is None else s
        v = b2 * v + (1 - b2) * g * g
        return z - 0.01 * (g / (np.sqrt(v / (1 - b2**t)) + eps) + wd * y), v

    for tx, step, lr in (
        (optim.schedule_free_sgd(0.1, b1=b1, weight_lr_power=power), sgd_step, 0.1),
        (optim.schedule_free_adamw(0.01, b1=b1, weight_decay=0.1, weight_lr_power=power),
         adamw_step, 0.01),
    ):
        want, x = _schedule_free_ref(params, grads, step, lambda t, lr=lr: lr, b1, power)
        _check(_run(tx, params, grads, tree="list"), want)
        p = [tg.Tensor(v) for v in params]
        state = tx.init(p)
        for g in grads:
            p, state = optim.apply_gradients(tx, [tg.Tensor(v) for v in g], state, p)
        for got, w in zip(optim.schedule_free_eval_params(state, p), x):
            np.testing.assert_allclose(got.numpy(), w, rtol=1e-9, atol=1e-9)
