"""Structured loops: a jitted gradient through ``tg.scan`` against the unrolled Python loop.

Three measurements from one run (ratios carry over between machines, absolute times do not):

1. First call (trace, record, compile, run) of ``tg.jit(tg.grad(loss))`` for a 10,000-step
   ``scan`` of an RNN cell (hidden 32): seconds, and the compiled program's step count.
2. The same program's step count at 100 and at 10,000 steps (it must not grow).
3. Per-step time of the jitted gradient at 100 steps: the scan (by default, keeping each
   iteration's residuals, and with ``remat=True``) against the loop unrolled in Python (all
   jitted), as ratios of CPU time (``time.process_time``, best of ``--repeat`` interleaved
   rounds: a shared machine's load disturbs it far less than wall time).

Run: ``python bench/control_flow.py [--repeat 7] [--steps 10000]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import best_times_interleaved  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402

HIDDEN = 32


def cell(params, h, x):
    return tnp.tanh(h @ params["w"] + x @ params["u"] + params["b"])


def loss_scan(params, h0, xs, remat=None):
    def step(h, x):
        h = cell(params, h, x)
        return h, (h * h).sum()

    h, ys = tg.scan(step, h0, xs, remat=remat)
    return ys.sum() + (h * h).sum()


def loss_unrolled(params, h0, xs):
    h, total = h0, 0.0
    for i in range(xs.shape[0]):
        h = cell(params, h, xs[i])
        total = total + (h * h).sum()
    return total + (h * h).sum()


def setup(steps: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    params = {"w": tg.Tensor(rng.normal(size=(HIDDEN, HIDDEN)) / np.sqrt(HIDDEN)),
              "u": tg.Tensor(rng.normal(size=(4, HIDDEN))),
              "b": tg.Tensor(np.zeros(HIDDEN))}
    return params, tg.Tensor(np.zeros(HIDDEN)), tg.Tensor(rng.normal(size=(steps, 4)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--steps", type=int, default=10_000)
    args = p.parse_args(argv)

    params, h0, xs = setup(args.steps)
    g = tg.jit(tg.grad(loss_scan))
    t0, c0 = time.perf_counter(), time.process_time()
    g(params, h0, xs)
    first, first_cpu = time.perf_counter() - t0, time.process_time() - c0
    big = g.lower(params, h0, xs).steps
    small_args = setup(100)
    small = tg.jit(tg.grad(loss_scan)).lower(*small_args).steps
    print(f"scan, {args.steps} steps: jitted grad first call {first:.2f} s ({first_cpu:.2f} s "
          f"CPU); program steps "
          f"{big} (at 100 steps: {small})")

    gs = tg.jit(tg.grad(loss_scan))
    gr = tg.jit(tg.grad(lambda *a: loss_scan(*a, remat=True)))
    gu = tg.jit(tg.grad(loss_unrolled))
    ts, tr, tu = best_times_interleaved(
        [lambda: gs(*small_args), lambda: gr(*small_args), lambda: gu(*small_args)],
        repeat=args.repeat, clock=time.process_time)
    print(f"100 steps, jitted grad per step (CPU time): scan {ts / 100 * 1e6:.1f} us, scan "
          f"with remat=True {tr / 100 * 1e6:.1f} us, unrolled {tu / 100 * 1e6:.1f} us; "
          f"scan / unrolled = {ts / tu:.2f}, remat=True / unrolled = {tr / tu:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
