"""Per-op overhead on a chain of many small ops (issue 2's speed target).

A chain of ``steps`` blocks ``y = tanh(y * w + c)`` on 16-element float64 arrays, then a sum
(3 ops per block + 1): forward, and forward+backward, in microseconds per op. Columns: a
hand-written NumPy forward and backward (the floor), tapegrad (``grad``), tapegrad
``jit(grad)`` (the gradient tape recorded once and replayed), and, when installed, PyTorch
eager, HIPS autograd and JAX without jit.
All measured in one run, in interleaved rounds of process CPU time (every column timed once per
round, each keeping its best round, so the load of other processes on a shared machine hits
them alike); the table reports ratios to hand-written NumPy.

Run: ``python bench/overhead.py [--ops 10000]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

# One compute thread everywhere (set before NumPy/BLAS and PyTorch start their pools), and the
# process pinned to one CPU on Linux: these are small ops, where threads only add noise.
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

import numpy as np  # noqa: E402  (after the thread settings)

sys.path.insert(0, os.path.dirname(__file__))
from _util import best_times_interleaved, optional, table  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402


def numpy_fwd(x, w, c, steps):
    y = x
    for _ in range(steps):
        y = np.tanh(y * w + c)
    return y.sum()


def numpy_fwd_bwd(x, w, c, steps):
    ys = [x]
    y = x
    for _ in range(steps):
        y = np.tanh(y * w + c)
        ys.append(y)
    out = y.sum()
    g = np.ones_like(y)
    for i in range(steps, 0, -1):
        gz = g * (1 - ys[i] * ys[i])
        g = gz * w
    return out, g


def tg_loss(x, w, c, steps):
    y = x
    for _ in range(steps):
        y = tnp.tanh(y * w + c)
    return y.sum()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", type=int, default=10_000, help="ops in the chain (default 10000)")
    p.add_argument("--repeat", type=int, default=5, help="interleaved rounds; the best counts")
    args = p.parse_args(argv)
    steps = max(1, (args.ops - 1) // 3)
    n_ops = 3 * steps + 1
    rng = np.random.default_rng(0)
    x, w, c = (rng.standard_normal(16) * 0.5 for _ in range(3))
    X, W, C = tg.Tensor(x), tg.Tensor(w), tg.Tensor(c)

    fns = {}  # name -> (forward or None, forward+backward, scale of the per-op time)
    fns["numpy"] = (
        lambda: numpy_fwd(x, w, c, steps),
        lambda: numpy_fwd_bwd(x, w, c, steps),
        1.0,
    )
    g_tg = tg.grad(lambda X: tg_loss(X, W, C, steps))
    np.testing.assert_allclose(g_tg(X).numpy(), numpy_fwd_bwd(x, w, c, steps)[1], rtol=1e-10)
    fns["tapegrad"] = (lambda: tg_loss(X, W, C, steps), lambda: g_tg(X), 1.0)
    fast = tg.jit(g_tg)  # traced once, then the recorded tape is replayed
    np.testing.assert_allclose(fast(X).numpy(), numpy_fwd_bwd(x, w, c, steps)[1], rtol=1e-10)
    fns["tapegrad jit(grad)"] = (None, lambda: fast(X), 1.0)

    torch = optional("torch")
    if torch is not None:
        torch.set_num_threads(1)
        tx, tw, tc = (torch.tensor(a) for a in (x, w, c))

        def torch_fb():
            xx = tx.clone().requires_grad_(True)
            y = xx
            for _ in range(steps):
                y = torch.tanh(y * tw + tc)
            y.sum().backward()
            return xx.grad

        def torch_f():
            with torch.no_grad():
                y = tx
                for _ in range(steps):
                    y = torch.tanh(y * tw + tc)
                return y.sum()

        fns["PyTorch eager"] = (torch_f, torch_fb, 1.0)
    ag = optional("autograd")
    if ag is not None:
        import autograd.numpy as anp

        def ag_loss(xx):
            y = xx
            for _ in range(steps):
                y = anp.tanh(y * w + c)
            return anp.sum(y)

        ag_grad = ag.grad(ag_loss)
        fns["HIPS autograd"] = (lambda: ag_loss(x), lambda: ag_grad(x), 1.0)
    jax = optional("jax")
    if jax is not None and args.ops <= 20_000:
        import jax.numpy as jnp

        jax.config.update("jax_enable_x64", True)

        def jax_loss(xx):
            y = xx
            for _ in range(steps // 10):
                y = jnp.tanh(y * w + c)
            return jnp.sum(y)

        jg = jax.grad(jax_loss)
        # JAX without jit is slow: time a tenth of the chain and scale per op.
        scale = steps / max(1, steps // 10)
        fns["JAX (no jit)"] = (
            lambda: jax_loss(x).block_until_ready(),
            lambda: jg(x).block_until_ready(),
            scale,
        )

    # Interleaved rounds of process CPU time; JAX without jit (a tenth of the chain, about
    # 100 times slower per op) only joins the first round.
    order = [(name, k) for name, f in fns.items() for k in (0, 1) if f[k] is not None]
    slow = [(n, k) for n, k in order if n == "JAX (no jit)"]
    fast_order = [o for o in order if o not in slow]
    times = best_times_interleaved(
        [fns[n][k] for n, k in fast_order], args.repeat, clock=time.process_time
    )
    if slow:
        times += best_times_interleaved([fns[n][k] for n, k in slow], 1, clock=time.process_time)
    res = {name: [float("nan"), float("nan")] for name in fns}
    for (name, k), t in zip(fast_order + slow, times):
        res[name][k] = t * fns[name][2]

    base_f, base_fb = res["numpy"]
    rows = []
    for name, (tf, tfb) in res.items():
        rows.append(
            [
                name,
                "-" if tf != tf else f"{tf / n_ops * 1e6:.2f}",
                "-" if tf != tf else f"{tf / base_f:.1f}x",
                f"{tfb / n_ops * 1e6:.2f}",
                f"{tfb / base_fb:.1f}x",
            ]
        )
    print(f"chain of {n_ops} ops on 16-element float64 arrays, single thread\n")
    print(
        table(rows, ["library", "fwd µs/op", "fwd vs NumPy", "fwd+bwd µs/op", "fwd+bwd vs NumPy"])
    )
    return res


if __name__ == "__main__":
    main()
