"""Reverse mode through a long ``tg.while_loop`` with binomial checkpointing.

A ``while_loop`` of ``--steps`` iterations (100,000 by default) of a small RNN-like cell on a
float64 vector of 16 (the trip count is read from the data), differentiated with respect to
its initial value and its weights. One run measures, for ``checkpoint=None`` (every carry
kept) and ``checkpoint=K`` (``--checkpoint``, 50 by default):

1. the time of the forward alone and of ``value_and_grad`` (best of ``--repeat``), and their
   ratio;
2. the most carries the backward pass held at once and the steps it recomputed (counted by
   the schedule itself);
3. the peak of memory allocated during ``value_and_grad`` (``tracemalloc``, a separate run)
   and the bytes of one carry.

Then, for a ``scan`` of ``--scan-steps`` steps of an RNN cell (hidden 32), the gradient's time
and peak memory in each mode of the reverse pass: remat per step (``remat=True``), every
residual kept (the default, ``remat=False``), a ``checkpoint(step, save_only={"tanh"})`` policy, and
``checkpoint=K``.

Run: ``python bench/while_checkpoint.py [--steps 100000] [--checkpoint 50] [--repeat 1]
[--scan-steps 2000]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402
from tapegrad.transforms import _revolve  # noqa: E402

N = 16


def make_loss(checkpoint):
    def loss(h0, w, steps):
        def cond(c):
            return c[1] < steps

        def body(c):
            h, t = c
            return h + 1e-4 * tnp.tanh(h @ w), t + 1.0

        h, _ = tg.while_loop(cond, body, (h0, tnp.zeros((), dtype=np.float64)),
                             checkpoint=checkpoint)
        return (h * h).sum()

    return loss


def scan_loss(mode, k):
    def loss(params, h0, xs):
        def step(h, x):
            h = tnp.tanh(h @ params["w"] + x @ params["u"] + params["b"])
            return h, (h * h).sum()

        f = tg.checkpoint(step, save_only={"tanh"}) if mode == "policy" else step
        h, ys = tg.scan(f, h0, xs, remat=mode != "keep",
                        checkpoint=k if mode == "checkpoint" else None)
        return ys.sum() + (h * h).sum()

    return loss


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--checkpoint", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--scan-steps", type=int, default=2000)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    h0 = tg.Tensor(rng.normal(size=N))
    w = tg.Tensor(rng.normal(size=(N, N)) / np.sqrt(N))
    steps = tg.Tensor(np.float64(a.steps))
    rows = []
    t_fwd = best(lambda: make_loss(None)(h0, w, steps), a.repeat)
    results = {}
    for ck in (None, a.checkpoint):
        vg = tg.value_and_grad(make_loss(ck), argnums=(0, 1))
        with _revolve.recording() as rec:
            t = best(lambda vg=vg: vg(h0, w, steps), a.repeat)
        tracemalloc.start()
        _, grads = vg(h0, w, steps)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        results[ck] = grads
        held = rec[-1]["peak"] if rec else a.steps
        recomputed = rec[-1]["advances"] if rec else 0
        rows.append((str(ck), f"{t:.2f}", f"{t / t_fwd:.2f}", held, recomputed,
                     f"{peak / 1e6:.1f}"))
    same = all(np.allclose(np.asarray(x), np.asarray(y), rtol=1e-12, atol=0)
               for x, y in zip(results[None], results[a.checkpoint]))
    print(f"while_loop of {a.steps} steps, carry float64[{N}] ({N * 8} bytes) + a counter; "
          f"forward alone {t_fwd:.2f} s")
    print(f"optimal recomputed steps for k={a.checkpoint}: "
          f"{_revolve.optimal_advances(a.steps, a.checkpoint)}; gradients agree: {same}")
    print(f"{'checkpoint':>10} {'grad s':>8} {'x fwd':>6} {'held':>7} {'recomp':>8} "
          f"{'peak MB':>8}")
    for r in rows:
        print(f"{r[0]:>10} {r[1]:>8} {r[2]:>6} {r[3]:>7} {r[4]:>8} {r[5]:>8}")

    hidden, n = 32, a.scan_steps
    params = {"w": tg.Tensor(rng.normal(size=(hidden, hidden)) / np.sqrt(hidden)),
              "u": tg.Tensor(rng.normal(size=(4, hidden))), "b": tg.Tensor(np.zeros(hidden))}
    sh0, sxs = tg.Tensor(np.zeros(hidden)), tg.Tensor(rng.normal(size=(n, 4)))
    print(f"\nscan of {n} steps, RNN cell hidden {hidden}: grad w.r.t. the weights")
    print(f"{'mode':>12} {'grad s':>8} {'peak MB':>8}")
    base = None
    for mode in ("remat", "keep", "policy", "checkpoint"):
        g = tg.grad(scan_loss(mode, a.checkpoint))
        g(params, sh0, sxs)
        t = best(lambda g=g: g(params, sh0, sxs), max(a.repeat, 3))
        tracemalloc.start()
        got = g(params, sh0, sxs)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        if base is None:
            base = got
        same = all(np.allclose(np.asarray(got[k]), np.asarray(base[k]), rtol=1e-12, atol=0)
                   for k in base)
        print(f"{mode:>12} {t:>8.3f} {peak / 1e6:>8.2f}" + ("" if same else "  (differs!)"))


if __name__ == "__main__":
    main()
