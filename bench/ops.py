"""Per-op cost at three sizes (issue 3's speed target).

For elementwise, reduction and matmul ops on 1-, 1,000- and 1,000,000-element float64 inputs:
tapegrad forward+backward (``tg.vjp`` then the pullback) beside a hand-written NumPy forward and
backward of the same op, timed in interleaved rounds in one run and reported as a ratio.
Target: within 1.2x of NumPy at 1,000,000 elements, where the work dominates the per-op
overhead.

Times are process CPU time (the work done, not the time spent waiting for the core on a
shared machine), best of ``--repeat`` interleaved rounds. Both columns run in one process with
glibc's allocator set to keep freed large blocks for reuse (:func:`_util.steady_allocator`), so
page faults on fresh 8 MB temporaries, which depend on the order of frees rather than on the
work, do not decide the ratio; ``--default-allocator`` turns that off.

Run: ``python bench/ops.py [--sizes 1 1000 1000000] [--default-allocator]``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _util import best_times_interleaved, steady_allocator, table  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402


def _np_cases():
    """name -> (tapegrad fn of (x, y), numpy fwd+bwd of (x, y, g), uses y)."""
    return {
        "add": (lambda x, y: x + y, lambda x, y, g: (x + y, g, g), True),
        "multiply": (lambda x, y: x * y, lambda x, y, g: (x * y, g * y, g * x), True),
        "divide": (lambda x, y: x / y, lambda x, y, g: (x / y, g / y, -g * x / (y * y)), True),
        "exp": (lambda x, y: tnp.exp(x), lambda x, y, g: (lambda o: (o, g * o))(np.exp(x)), False),
        "log": (lambda x, y: tnp.log(x), lambda x, y, g: (np.log(x), g / x), False),
        "tanh": (
            lambda x, y: tnp.tanh(x),
            lambda x, y, g: (lambda o: (o, g * (1 - o * o)))(np.tanh(x)),
            False,
        ),
        "sqrt": (
            lambda x, y: tnp.sqrt(x),
            lambda x, y, g: (lambda o: (o, g / (2 * o)))(np.sqrt(x)),
            False,
        ),
        "sum": (
            lambda x, y: x.sum(),
            lambda x, y, g: (x.sum(), np.broadcast_to(g, x.shape)),
            False,
        ),
        "mean": (
            lambda x, y: x.mean(),
            lambda x, y, g: (x.mean(), np.broadcast_to(g / x.size, x.shape)),
            False,
        ),
        "max": (
            lambda x, y: tnp.max(x),
            lambda x, y, g: (lambda m: (m, g * (x == m)))(x.max()),
            False,
        ),
    }


def run_case(name, n, repeat):
    tg_fn, np_fb, binary = _np_cases()[name]
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 2.0, n)
    y = rng.uniform(0.5, 2.0, n)
    X, Y = tg.Tensor(x), tg.Tensor(y)
    out = tg_fn(X, Y)
    g = np.ones(out.shape)
    G = tg.Tensor(g)
    if binary:

        def tg_fb():
            _, f = tg.vjp(tg_fn, X, Y)
            return f(G)

    else:

        def tg_fb():
            _, f = tg.vjp(lambda a: tg_fn(a, None), X)
            return f(G)

    number = max(1, 5_000_000 // max(n, 1) // 1000) if n < 1_000_000 else 20
    t_tg, t_np = best_times_interleaved(
        [tg_fb, lambda: np_fb(x, y, g)], repeat, number, clock=time.process_time
    )
    return t_tg, t_np


def run_matmul(n, repeat):
    k = max(1, int(round(math.sqrt(n))))
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((k, k)), rng.standard_normal((k, k))
    A, B = tg.Tensor(a), tg.Tensor(b)
    g = np.ones((k, k))
    G = tg.Tensor(g)

    def tg_fb():
        _, f = tg.vjp(tnp.matmul, A, B)
        return f(G)

    def np_fb():
        return a @ b, g @ b.T, a.T @ g

    number = 5 if n >= 1_000_000 else max(1, 5000 // max(n, 1))
    t_tg, t_np = best_times_interleaved([tg_fb, np_fb], repeat, number, clock=time.process_time)
    return t_tg, t_np, k


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 1000, 1_000_000])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument(
        "--default-allocator",
        action="store_true",
        help="leave glibc's allocator at its defaults (fresh 8 MB temporaries page-fault)",
    )
    args = p.parse_args(argv)
    steady = False if args.default_allocator else steady_allocator()
    if hasattr(os, "sched_setaffinity"):  # one core: the other's load does not migrate us
        os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    rows = []
    for name in _np_cases():
        row = [name]
        for n in args.sizes:
            t_tg, t_np = run_case(name, n, args.repeat)
            row.append(f"{t_tg / t_np:.2f}x")
        rows.append(row)
    row = ["matmul (k x k, k*k ~ n)"]
    for n in args.sizes:
        t_tg, t_np, _ = run_matmul(n, args.repeat)
        row.append(f"{t_tg / t_np:.2f}x")
    rows.append(row)
    print(
        "forward+backward time, tapegrad / hand-written NumPy (float64, single process; "
        + (
            "large freed blocks kept for reuse, see bench/_util.steady_allocator"
            if steady
            else "default allocator"
        )
        + ")\n"
    )
    print(table(rows, ["op"] + [f"n={n:,}" for n in args.sizes]))


if __name__ == "__main__":
    main()
