"""tapegrad on code written the way users write it, beside hand-written NumPy, PyTorch, JAX and
HIPS autograd.

Every workload is spelled as a user would write it, through the ordinary public API, with no
fused helper made for the benchmark:

- **chain**: 16-element float64 arrays; per step ``y = tanh(y * w + c)``,
  ``y = logaddexp(y, 0.0)`` (a Python scalar), ``total = total + sum(y)`` accumulated from the
  Python float ``0.0``: 6 ops per step. Forward+backward per op, under ``grad`` and
  ``jit(grad)`` (HIPS autograd's ``grad`` beside them when installed: the pure-Python
  tracer).
- **mlp**: MLP 784-512-512-10, batch 128, float32; ReLU as ``tnp.maximum(h, 0.0)``; the loss a
  log-softmax cross-entropy written with ``tnp.max``/``exp``/``sum``/``log`` and integer
  indexing; the update ``[p - lr * g for p, g in zip(params, grads)]``. One training step,
  eager and under ``jit``. The NumPy floor updates in place (``w -= lr * gw``); a second
  NumPy column spells the update as the tapegrad code does, to show what the functional
  update alone costs.
- **hvp**: the same MLP loss; a Hessian-vector product written
  ``grad(lambda p: vdot(grad(loss)(p), v))`` (the sum of ``tnp.sum(g * v)`` over the leaves),
  as a ratio to one ``grad``.
- **cnn**: conv3x3(16)-relu-pool2-conv3x3(32)-relu-pool2-linear on 64x1x28x28, float32, through
  ``nn.functional`` (``conv2d``, ``relu``, ``max_pool2d``, ``linear``, ``cross_entropy``) and the
  plain update.
- **rnn**: an Elman RNN, ``h = tanh(x_t @ wx + h @ wh + b)`` for T=20 steps, batch 32, hidden
  128, input 64, float64, loss ``sum(h * h)`` of the last state; gradient in ``(wx, wh, b)``
  under ``jit(grad)``, beside a hand-written NumPy forward and backward.
- **compile**: the chain's first ``jit(grad, fuse=True)`` calls in a fresh process, with an
  empty kernel cache and with the cache the first process left.
- **memory**: peak bytes (tracemalloc) of one forward+backward of a 50-layer width-256 ReLU MLP
  (batch 256, float32), eager and under ``jit``.

All times are ratios measured in one run, in interleaved rounds of process CPU time (each
round times every column once; each keeps its best round), single thread pinned to one core.
Never quote a lone absolute time from this script: the machines are noisy.

The chain, RNN, MLP and CNN workloads are measured under plain ``jit`` (one NumPy call per op,
equal to the eager results to the last bit) and under ``jit(..., fuse=True)`` (elementwise
regions fused into numba kernels; transcendental functions within a few ulp of NumPy's).

Run: ``python bench/user_code.py [--only chain,rnn,mlp,hvp,cnn,compile,memory] [--repeat 7]``.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"):
    os.environ[_v] = "1"
os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false"
os.environ.setdefault("JAX_PLATFORMS", "cpu")
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import (  # noqa: E402
    best_times_interleaved,
    init_dense,
    np_dense_step,
    optional,
    steady_allocator,
    table,
)

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402
from tapegrad.nn import functional as F  # noqa: E402

LR = 0.01
CLOCK = time.process_time


# -- chain -------------------------------------------------------------------------------------
def chain(ns, x, w, c, steps):
    """The chain written with the NumPy-like namespace ``ns`` (``tapegrad.numpy``,
    ``autograd.numpy``, ``jax.numpy``)."""
    total = 0.0
    y = x
    for _ in range(steps):
        y = ns.tanh(y * w + c)
        y = ns.logaddexp(y, 0.0)
        total = total + ns.sum(y)
    return total


def tg_chain(x, w, c, steps):
    return chain(tnp, x, w, c, steps)


def np_chain_grad(x, w, c, steps):
    """Hand-written forward and backward of :func:`tg_chain` with respect to ``x``."""
    ys = []
    y = x
    total = 0.0
    for _ in range(steps):
        t = np.tanh(y * w + c)
        y = np.logaddexp(t, 0.0)
        ys.append((t, y))
        total = total + y.sum()
    g = np.zeros_like(x)
    for t, _ in reversed(ys):
        g = g + 1.0  # d total / d y of this step, plus what flows from later steps
        g = g * (1.0 / (1.0 + np.exp(-t)))  # logaddexp(t, 0)' = sigmoid(t)
        g = g * (1.0 - t * t) * w
    return total, g


def chain_bench(repeat, steps=100):
    rng = np.random.default_rng(0)
    x, w, c = (rng.standard_normal(16) * 0.5 for _ in range(3))
    X, W, C = tg.Tensor(x), tg.Tensor(w), tg.Tensor(c)
    n_ops = 6 * steps
    ref = np_chain_grad(x, w, c, steps)[1]
    cols = {"NumPy (hand-written)": lambda: np_chain_grad(x, w, c, steps)}
    g = tg.grad(lambda X: tg_chain(X, W, C, steps))
    np.testing.assert_allclose(g(X).numpy(), ref, rtol=1e-9)
    cols["tapegrad grad"] = lambda: g(X)
    jg = tg.jit(g)
    np.testing.assert_allclose(jg(X).numpy(), ref, rtol=1e-9)
    cols["tapegrad jit(grad)"] = lambda: jg(X)
    jf = tg.jit(g, fuse=True)
    np.testing.assert_allclose(jf(X).numpy(), ref, rtol=1e-9)
    cols["tapegrad jit(grad, fuse=True)"] = lambda: jf(X)
    torch = optional("torch")
    if torch is not None:
        torch.set_num_threads(1)
        tx, tw, tc = (torch.tensor(a) for a in (x, w, c))

        def torch_fb():
            xx = tx.clone().requires_grad_(True)
            total = 0.0
            y = xx
            for _ in range(steps):
                y = torch.tanh(y * tw + tc)
                y = torch.logaddexp(y, torch.tensor(0.0, dtype=y.dtype))
                total = total + torch.sum(y)
            total.backward()
            return xx.grad

        np.testing.assert_allclose(torch_fb().numpy(), ref, rtol=1e-9)
        cols["PyTorch eager"] = torch_fb
    ag = optional("autograd")
    if ag is not None:  # HIPS autograd: the pure-Python tracer tapegrad's eager mode compares to
        import autograd.numpy as anp

        ag_grad = ag.grad(lambda xx: chain(anp, xx, w, c, steps))
        np.testing.assert_allclose(ag_grad(x), ref, rtol=1e-9)
        cols["HIPS autograd grad"] = lambda: ag_grad(x)
    jax = optional("jax")
    if jax is not None:
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        jj = jax.jit(jax.grad(lambda xx: chain(jnp, xx, w, c, steps)))
        jx = jnp.asarray(x)
        np.testing.assert_allclose(np.asarray(jj(jx)), ref, rtol=1e-9)
        cols["JAX jit(grad)"] = lambda: jj(jx).block_until_ready()
    times = dict(zip(cols, best_times_interleaved(list(cols.values()), repeat, 3, CLOCK)))
    base = times["NumPy (hand-written)"]
    torch_t = times.get("PyTorch eager")
    rows = []
    for name, t in times.items():
        rows.append(
            [
                name,
                f"{t / base:.2f}x",
                "-" if torch_t is None else f"{t / torch_t:.2f}x",
            ]
        )
    head = f"Chain of {n_ops} small ops (16 float64 elements), forward+backward"
    return head, table(rows, ["implementation", "vs NumPy", "vs PyTorch eager"]), times


# -- RNN -----------------------------------------------------------------------------------------
def tg_rnn_loss(params, xs, h0):
    wx, wh, b = params
    h = h0
    for t in range(xs.shape[0]):
        h = tnp.tanh(xs[t] @ wx + h @ wh + b)
    return tnp.sum(h * h)


def np_rnn_grad(params, xs, h0):
    """Hand-written forward and backward of :func:`tg_rnn_loss`."""
    wx, wh, b = params
    hs = [h0]
    for t in range(xs.shape[0]):
        hs.append(np.tanh(xs[t] @ wx + hs[-1] @ wh + b))
    gwx, gwh, gb = np.zeros_like(wx), np.zeros_like(wh), np.zeros_like(b)
    gh = 2.0 * hs[-1]
    for t in range(xs.shape[0] - 1, -1, -1):
        ga = gh * (1.0 - hs[t + 1] * hs[t + 1])
        gwx += xs[t].T @ ga
        gwh += hs[t].T @ ga
        gb += ga.sum(0)
        gh = ga @ wh.T
    return gwx, gwh, gb


def rnn_bench(repeat, T=20, B=32, H=128, D=64):
    rng = np.random.default_rng(3)
    params = (rng.standard_normal((D, H)) / np.sqrt(D), rng.standard_normal((H, H)) / np.sqrt(H),
              np.zeros(H))
    xs, h0 = rng.standard_normal((T, B, D)), np.zeros((B, H))
    ref = np_rnn_grad(params, xs, h0)
    tp = tuple(tg.Tensor(p) for p in params)
    txs, th0 = tg.Tensor(xs), tg.Tensor(h0)
    g = tg.grad(tg_rnn_loss)
    jg = tg.jit(g)
    for a, r in zip(jg(tp, txs, th0), ref):
        np.testing.assert_allclose(a.numpy(), r, rtol=1e-9, atol=1e-12)
    cols = {"NumPy (hand-written)": lambda: np_rnn_grad(params, xs, h0),
            "tapegrad jit(grad)": lambda: jg(tp, txs, th0)}
    jf = tg.jit(g, fuse=True)
    jf(tp, txs, th0)
    cols["tapegrad jit(grad, fuse=True)"] = lambda: jf(tp, txs, th0)
    torch = optional("torch")
    if torch is not None:
        torch.set_num_threads(1)
        tps = [torch.tensor(p) for p in params]
        txs_, th0_ = torch.tensor(xs), torch.tensor(h0)

        def torch_fb():
            ps = [p.clone().requires_grad_(True) for p in tps]
            h = th0_
            for t in range(T):
                h = torch.tanh(txs_[t] @ ps[0] + h @ ps[1] + ps[2])
            (h * h).sum().backward()
            return [p.grad for p in ps]

        cols["PyTorch eager"] = torch_fb
    jax = optional("jax")
    if jax is not None:
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        def jloss(p, xs, h0):
            h = h0
            for t in range(T):
                h = jnp.tanh(xs[t] @ p[0] + h @ p[1] + p[2])
            return jnp.sum(h * h)

        jj = jax.jit(jax.grad(jloss))
        jp, jxs, jh0 = tuple(jnp.asarray(p) for p in params), jnp.asarray(xs), jnp.asarray(h0)
        jj(jp, jxs, jh0)
        cols["JAX jit(grad)"] = lambda: jax.block_until_ready(jj(jp, jxs, jh0))
    return dict(zip(cols, best_times_interleaved(list(cols.values()), repeat, 3, CLOCK)))


# -- compile cost --------------------------------------------------------------------------------
_COMPILE_SCRIPT = """
import time, numpy as np
t0, c0 = time.perf_counter(), time.process_time()
import tapegrad as tg
import tapegrad.numpy as tnp
ti, ci = time.perf_counter(), time.process_time()
rng = np.random.default_rng(0)
x, w, c = (tg.Tensor(rng.standard_normal(16) * 0.5) for _ in range(3))
def chain(x, steps=166):
    total, y = 0.0, x
    for _ in range(steps):
        y = tnp.logaddexp(tnp.tanh(y * w + c), 0.0)
        total = total + tnp.sum(y)
    return total
jg = tg.jit(tg.grad(chain), fuse=True)
jg(x)
t1, c1 = time.perf_counter(), time.process_time()
jg(x)
t2, c2 = time.perf_counter(), time.process_time()
print(ti - t0, t1 - ti, t2 - t1, ci - c0, c1 - ci, c2 - c1)
"""


def compile_cost():
    """The chain's (996 ops) first two ``jit(grad, fuse=True)`` calls in fresh processes: the
    first call records and compiles (the second runs the program: the kernels' compile or
    cache load), with an empty kernel cache, then with the cache the first process left.
    Seconds: ``(import tapegrad, first call, second call)`` in wall time, then the same in
    process CPU time (which leaves out the waits of a busy machine)."""
    import subprocess
    import tempfile

    res = {}
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, TAPEGRAD_CACHE_DIR=d)
        for name in ("cold cache", "warm cache"):
            out = subprocess.run([sys.executable, "-c", _COMPILE_SCRIPT], env=env, check=True,
                                 capture_output=True, text=True).stdout.split()
            res[name] = tuple(float(v) for v in out[:6])
    return res


def compile_rows(res) -> list:
    """Table rows of :func:`compile_cost`: each cache state's first jitted call (the first
    call plus the second) as a ratio to importing tapegrad in the same process (CPU time), and
    the seconds behind it (wall, CPU in parentheses); then warm over cold."""
    rows = []
    for k, (_wi, w1, w2, ci, c1, c2) in res.items():
        rows.append([k, f"{(c1 + c2) / ci:.2f}x", f"{w1 + w2:.2f} s ({c1 + c2:.2f} s CPU)",
                     f"{w1:.2f} + {w2:.2f} s ({c1:.2f} + {c2:.2f} s CPU)"])
    cold, warm = res["cold cache"], res["warm cache"]
    rows.append(["warm / cold", f"{(warm[4] + warm[5]) / (cold[4] + cold[5]):.2f}x", "", ""])
    return rows


# -- MLP -----------------------------------------------------------------------------------------
def tg_mlp_loss(params, x, y):
    h = x
    for w, b in params[:-1]:
        h = tnp.maximum(h @ w + b, 0.0)
    w, b = params[-1]
    logits = h @ w + b
    m = tnp.max(logits, axis=1, keepdims=True)
    z = logits - m
    logp = z - tnp.log(tnp.sum(tnp.exp(z), axis=1, keepdims=True))
    return -tnp.mean(logp[tnp.arange(x.shape[0]), y])


def tg_sgd_step(params, x, y):
    loss, grads = tg.value_and_grad(tg_mlp_loss)(params, x, y)
    new = [(w - LR * gw, b - LR * gb) for (w, b), (gw, gb) in zip(params, grads)]
    return loss, new


def _carry(step, params, batch):
    state = [params]

    def run():
        loss, state[0] = step(state[0], *batch)
        return loss

    return run


def mlp_data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 784)).astype(np.float32)
    y = rng.integers(0, 10, 128)
    return init_dense(rng, (784, 512, 512, 10)), x, y


def torch_mlp(torch, init, x, y):
    torch.set_num_threads(1)
    tp = [(torch.tensor(w).requires_grad_(), torch.tensor(b).requires_grad_()) for w, b in init]
    opt = torch.optim.SGD([t for p in tp for t in p], lr=LR)
    tx_, ty_ = torch.tensor(x), torch.tensor(y)

    def loss_fn():
        h = tx_
        for w, b in tp[:-1]:
            h = torch.relu(h @ w + b)
        w, b = tp[-1]
        return torch.nn.functional.cross_entropy(h @ w + b, ty_)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        opt.step()
        return loss

    return step, loss_fn, tp


def mlp_bench(repeat):
    init, x, y = mlp_data()
    ref = np_dense_step([(w.copy(), b.copy()) for w, b in init], x, y, 0)[0]
    np_params = [(w.copy(), b.copy()) for w, b in init]
    cols = {"NumPy (hand-written)": lambda: np_dense_step(np_params, x, y, LR)}

    def np_functional_step(params, x, y):
        loss, grads = np_dense_step(params, x, y, 0)
        return loss, [(w - LR * gw, b - LR * gb) for (w, b), (gw, gb) in zip(params, grads)]

    cols["NumPy, update [p - lr * g]"] = _carry(
        np_functional_step, [(w.copy(), b.copy()) for w, b in init], (x, y))
    tparams = [(tg.Tensor(w), tg.Tensor(b)) for w, b in init]
    batch = (tg.Tensor(x), tg.Tensor(y))
    first = float(tg_sgd_step(tparams, *batch)[0])
    assert np.isclose(first, ref, rtol=2e-4), (first, ref)
    cols["tapegrad"] = _carry(tg_sgd_step, tparams, batch)
    jstep = tg.jit(tg_sgd_step)
    assert np.isclose(float(jstep(tparams, *batch)[0]), ref, rtol=2e-4)
    cols["tapegrad jit(step)"] = _carry(jstep, tparams, batch)
    fstep = tg.jit(tg_sgd_step, fuse=True)
    cols["tapegrad jit(step, fuse=True)"] = _carry(fstep, tparams, batch)
    torch = optional("torch")
    if torch is not None:
        step, loss_fn, _ = torch_mlp(torch, init, x, y)
        with torch.no_grad():
            assert np.isclose(float(loss_fn()), ref, rtol=2e-4)
        cols["PyTorch eager"] = step
    jax = optional("jax")
    if jax is not None:
        import jax.numpy as jnp

        def jloss(params, x, y):
            h = x
            for w, b in params[:-1]:
                h = jnp.maximum(h @ w + b, 0.0)
            w, b = params[-1]
            logits = h @ w + b
            logp = logits - jax.scipy.special.logsumexp(logits, axis=1, keepdims=True)
            return -jnp.mean(logp[jnp.arange(x.shape[0]), y])

        @jax.jit
        def jstep_(params, x, y):
            loss, grads = jax.value_and_grad(jloss)(params, x, y)
            return loss, jax.tree_util.tree_map(lambda p, g: p - LR * g, params, grads)

        jp = [(jnp.asarray(w), jnp.asarray(b)) for w, b in init]
        jb = (jnp.asarray(x), jnp.asarray(y))
        assert np.isclose(float(jstep_(jp, *jb)[0]), ref, rtol=2e-4)
        run = _carry(jstep_, jp, jb)
        cols["JAX jit(step)"] = lambda: run().block_until_ready()
    times = dict(zip(cols, best_times_interleaved(list(cols.values()), repeat, 5, CLOCK)))
    return times


def compile_bench(repeat):
    """The first call of a freshly jitted MLP step (trace, compile, run once) as a ratio to an
    eager step, both by process CPU time, best of ``repeat``."""
    init, x, y = mlp_data()
    tparams = [(tg.Tensor(w), tg.Tensor(b)) for w, b in init]
    batch = (tg.Tensor(x), tg.Tensor(y))
    first, eager = [], []
    for _ in range(repeat):
        t0 = CLOCK()
        tg.jit(tg_sgd_step)(tparams, *batch)
        first.append(CLOCK() - t0)
        t0 = CLOCK()
        tg_sgd_step(tparams, *batch)
        eager.append(CLOCK() - t0)
    return min(first) / min(eager)


# -- hvp/grad --------------------------------------------------------------------------------------
def matmul_work(fn) -> float:
    """Multiply-adds of the matrix products one call of ``fn`` evaluates (counted by wrapping
    ``MatMul.forward`` for that call, outside any timing)."""
    from tapegrad.ops.linalg import MatMul

    forward, total = MatMul.forward, [0]

    def counting(ctx, a, b, transpose_a=False, transpose_b=False):
        out = MatMul.output_shape(a.shape, b.shape, transpose_a=transpose_a,
                                  transpose_b=transpose_b)
        total[0] += int(np.prod(out)) * a.shape[-2 if transpose_a else -1]
        return forward(ctx, a, b, transpose_a, transpose_b)

    MatMul.forward = staticmethod(counting)
    try:
        fn()
    finally:
        MatMul.forward = staticmethod(forward)
    return total[0]


def hvp_bench(repeat):
    init, x, y = mlp_data()
    tparams = [(tg.Tensor(w), tg.Tensor(b)) for w, b in init]
    rng = np.random.default_rng(3)
    vs = [
        (tg.Tensor(rng.standard_normal(w.shape).astype(np.float32)), tg.Tensor(np.ones_like(b)))
        for w, b in init
    ]
    batch = (tg.Tensor(x), tg.Tensor(y))
    grad_fn = tg.grad(tg_mlp_loss)

    def hvp(p):
        def gv(p):
            gs = grad_fn(p, *batch)
            total = 0.0
            for (gw, gb), (vw, vb) in zip(gs, vs):
                total = total + tnp.sum(gw * vw) + tnp.sum(gb * vb)
            return total

        return tg.grad(gv)(p)

    cols = {"grad": lambda: grad_fn(tparams, *batch), "hvp": lambda: hvp(tparams)}
    work = matmul_work(cols["hvp"]) / matmul_work(cols["grad"])
    jhvp = tg.jit(hvp)
    jgrad = tg.jit(lambda p: grad_fn(p, *batch))
    cols["jit(grad)"] = lambda: jgrad(tparams)
    cols["jit(hvp)"] = lambda: jhvp(tparams)
    torch = optional("torch")
    if torch is not None:
        _, loss_fn, tp = torch_mlp(torch, init, x, y)
        flat = [t for p in tp for t in p]
        tv = [torch.tensor(v.numpy()) for p in vs for v in p]

        def t_grad():
            return torch.autograd.grad(loss_fn(), flat)

        def t_hvp():
            gs = torch.autograd.grad(loss_fn(), flat, create_graph=True)
            dot = sum((g * v).sum() for g, v in zip(gs, tv))
            return torch.autograd.grad(dot, flat)

        cols["PyTorch grad"] = t_grad
        cols["PyTorch hvp"] = t_hvp
    jax = optional("jax")
    if jax is not None:
        import jax.numpy as jnp

        def jloss(params, x, y):
            h = x
            for w, b in params[:-1]:
                h = jnp.maximum(h @ w + b, 0.0)
            w, b = params[-1]
            logits = h @ w + b
            logp = logits - jax.scipy.special.logsumexp(logits, axis=1, keepdims=True)
            return -jnp.mean(logp[jnp.arange(x.shape[0]), y])

        jp = [(jnp.asarray(w), jnp.asarray(b)) for w, b in init]
        jv = [(jnp.asarray(a.numpy()), jnp.asarray(b.numpy())) for a, b in vs]
        jb = (jnp.asarray(x), jnp.asarray(y))
        jgr = jax.jit(jax.grad(jloss))

        def jgv(p, v, x, y):
            gs = jax.grad(jloss)(p, x, y)
            return sum(jnp.sum(a * c) + jnp.sum(b * d) for (a, b), (c, d) in zip(gs, v))

        jh = jax.jit(jax.grad(jgv))
        cols["JAX jit(grad)"] = lambda: jax.block_until_ready(jgr(jp, *jb))
        cols["JAX jit(hvp)"] = lambda: jax.block_until_ready(jh(jp, jv, *jb))
    times = dict(zip(cols, best_times_interleaved(list(cols.values()), repeat, 3, CLOCK)))
    times["matmul work"] = work
    return times


# -- CNN ---------------------------------------------------------------------------------------
def cnn_bench(repeat):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from train_step import np_cnn_step  # the hand-written floor, shared with train_step.py

    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 10, 64)

    def he(shape, fan_in):
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    init = {
        "c1w": he((16, 1, 3, 3), 9),
        "c1b": np.zeros(16, np.float32),
        "c2w": he((32, 16, 3, 3), 144),
        "c2b": np.zeros(32, np.float32),
        "fw": he((32 * 7 * 7, 10), 32 * 7 * 7),
        "fb": np.zeros(10, np.float32),
    }
    ref = np_cnn_step({k: v.copy() for k, v in init.items()}, x, y, 0)[0]
    np_params = {k: v.copy() for k, v in init.items()}
    cols = {"NumPy (hand-written)": lambda: np_cnn_step(np_params, x, y, LR)}

    def loss_fn(p, x, y):
        h = F.max_pool2d(F.relu(F.conv2d(x, p["c1w"], p["c1b"], padding=1)), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, p["c2w"], p["c2b"], padding=1)), 2)
        return F.cross_entropy(F.linear(h.reshape(h.shape[0], -1), p["fw"], p["fb"]), y)

    def step(p, x, y):
        loss, g = tg.value_and_grad(loss_fn)(p, x, y)
        return loss, {k: p[k] - LR * g[k] for k in p}

    tparams = {k: tg.Tensor(v) for k, v in init.items()}
    batch = (tg.Tensor(x), tg.Tensor(y))
    assert np.isclose(float(step(tparams, *batch)[0]), ref, rtol=2e-4)
    cols["tapegrad"] = _carry(step, tparams, batch)
    jstep = tg.jit(step)
    cols["tapegrad jit(step)"] = _carry(jstep, tparams, batch)
    cols["tapegrad jit(step, fuse=True)"] = _carry(tg.jit(step, fuse=True), tparams, batch)
    torch = optional("torch")
    if torch is not None:
        torch.set_num_threads(1)
        tf = torch.nn.functional
        tp = {k: torch.tensor(v).requires_grad_() for k, v in init.items()}
        opt = torch.optim.SGD(list(tp.values()), lr=LR)
        tx_, ty_ = torch.tensor(x), torch.tensor(y)

        def torch_step():
            opt.zero_grad(set_to_none=True)
            h = tf.max_pool2d(torch.relu(tf.conv2d(tx_, tp["c1w"], tp["c1b"], padding=1)), 2)
            h = tf.max_pool2d(torch.relu(tf.conv2d(h, tp["c2w"], tp["c2b"], padding=1)), 2)
            loss = tf.cross_entropy(h.flatten(1) @ tp["fw"] + tp["fb"], ty_)
            loss.backward()
            opt.step()
            return loss

        cols["PyTorch eager"] = torch_step
    return dict(zip(cols, best_times_interleaved(list(cols.values()), repeat, 3, CLOCK)))


# -- memory ------------------------------------------------------------------------------------
def memory_bench():
    rng = np.random.default_rng(2)
    sizes = (256,) * 50 + (10,)
    x = rng.standard_normal((256, 256)).astype(np.float32)
    y = rng.integers(0, 10, 256)
    init = init_dense(rng, sizes)
    tparams = [(tg.Tensor(w), tg.Tensor(b)) for w, b in init]
    batch = (tg.Tensor(x), tg.Tensor(y))
    g = tg.grad(tg_mlp_loss)
    jg = tg.jit(g)
    runs = {
        "NumPy (hand-written)": lambda: np_dense_step(init, x, y, 0)[1],
        "tapegrad": lambda: g(tparams, *batch),
        "tapegrad jit(grad)": lambda: jg(tparams, *batch),
    }
    torch = optional("torch")
    peaks = {}
    for name, fn in runs.items():
        fn()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        out = fn()
        peaks[name] = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
        del out
    del torch
    return peaks


def ratio_rows(times, base_name):
    base = times[base_name]
    return [[n, f"{t / base:.2f}x"] for n, t in times.items()]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=7, help="interleaved rounds; the best counts")
    p.add_argument("--only", default="chain,rnn,mlp,hvp,cnn,compile,memory")
    p.add_argument("--markdown", default=None, help="also write the tables to this file")
    args = p.parse_args(argv)
    parts = set(args.only.split(","))
    steady_allocator()
    out = []
    if "chain" in parts:
        head, tab, _ = chain_bench(args.repeat)
        out += [head, "", tab, ""]
    if "rnn" in parts:
        t = rnn_bench(args.repeat)
        out += ["RNN T=20, batch 32, hidden 128, float64: gradient of the last state's sum of "
                "squares", ""]
        out += [table(ratio_rows(t, "NumPy (hand-written)"), ["", "vs NumPy"]), ""]
    if "compile" in parts:
        res = compile_cost()
        out += ["Chain of 996 ops, jit(grad, fuse=True) in a fresh process: its first jitted "
                "call (the first call, which records and builds the program, plus the second, "
                "which compiles or loads its kernels) as a ratio to `import tapegrad` in the "
                "same process (CPU time); seconds behind it (wall, process CPU in parentheses)",
                ""]
        out += [table(compile_rows(res), ["kernel cache", "first jitted call / import",
                                          "first + second call", "first, second"]), ""]
    if "mlp" in parts:
        t = mlp_bench(args.repeat)
        out += ["MLP 784-512-512-10 training step, batch 128, float32", ""]
        out += [table(ratio_rows(t, "NumPy (hand-written)"), ["step", "vs NumPy"]), ""]
        out += [f"First call of a fresh jit(step) (trace + compile + run) / one eager step: "
                f"{compile_bench(args.repeat):.2f}x", ""]
    if "hvp" in parts:
        t = hvp_bench(args.repeat)
        rows = [["tapegrad hvp / grad", f"{t['hvp'] / t['grad']:.2f}"]]
        rows.append(["floor of eager hvp / grad: multiply-adds of the products each evaluates",
                     f"{t['matmul work']:.2f}"])
        rows.append(["tapegrad jit(hvp) / jit(grad)", f"{t['jit(hvp)'] / t['jit(grad)']:.2f}"])
        rows.append(["tapegrad jit(hvp) / eager grad", f"{t['jit(hvp)'] / t['grad']:.2f}"])
        if "PyTorch hvp" in t:
            rows.append(["PyTorch hvp / grad", f"{t['PyTorch hvp'] / t['PyTorch grad']:.2f}"])
        if "JAX jit(hvp)" in t:
            rows.append(["JAX jit hvp / grad", f"{t['JAX jit(hvp)'] / t['JAX jit(grad)']:.2f}"])
        out += ["Hessian-vector product of the MLP loss, as a ratio to one gradient", ""]
        out += [table(rows, ["", "ratio"]), ""]
    if "cnn" in parts:
        t = cnn_bench(args.repeat)
        out += ["CNN training step, batch 64x1x28x28, float32", ""]
        rows = ratio_rows(t, "NumPy (hand-written)")
        if "PyTorch eager" in t:
            for r in rows:
                r.append(f"{t[r[0]] / t['PyTorch eager']:.2f}x")
        out += [table(rows, ["step", "vs NumPy", "vs PyTorch eager"][: len(rows[0])]), ""]
    if "memory" in parts:
        peaks = memory_bench()
        base = peaks["NumPy (hand-written)"]
        out += ["Peak memory of one forward+backward, 50-layer width-256 MLP, batch 256", ""]
        out += [table([[n, f"{v / base:.2f}x"] for n, v in peaks.items()], ["", "vs NumPy"])]
    text = "\n".join(out)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
