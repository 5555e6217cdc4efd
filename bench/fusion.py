"""Would fusing elementwise chains with numexpr speed up tapegrad's compiled programs on the CPU?

The chains measured are the ones ``jit`` runs in ``bench/user_code.py``'s workloads, each as
NumPy calls writing into one buffer (``out=``, as the compiled program does) beside the same
chain as one numexpr expression (one pass, no temporaries):

- **relu backward**: ``g * (h > 0)``;
- **bias + relu**: ``maximum(h + b, 0)`` with ``b`` broadcast over the rows;
- **chain step**: ``logaddexp(tanh(y * w + c), 0)``, the small-op chain's step, in float64.

At 16 elements (the small-op chain) and at 128 x 512 (the MLP's hidden layers), float32
except the chain step; one thread for both libraries, interleaved rounds of process CPU time,
each keeping its best round. ``jit`` fuses only where this shows a gain.

Run: ``pip install numexpr && python bench/fusion.py [--repeat 7]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_v] = "1"

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import best_times_interleaved, optional, table  # noqa: E402


def chains(shape, ne):
    rng = np.random.default_rng(0)
    g, h = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    b = rng.standard_normal(shape[-1:]).astype(np.float32)
    out = np.empty_like(g)
    y, w = g.astype(np.float64), h.astype(np.float64)
    c, out64 = y * 0.5, np.empty_like(y)

    def bias_relu():
        np.add(h, b, out=out)
        np.maximum(out, 0, out=out)

    def chain_step():
        np.multiply(y, w, out=out64)
        np.add(out64, c, out=out64)
        np.tanh(out64, out=out64)
        np.logaddexp(out64, 0.0, out=out64)

    names = {"g": g, "h": h, "b": b, "y": y, "w": w, "c": c}

    def fused(expr, dest):
        return lambda: ne.evaluate(expr, local_dict=names, out=dest)

    return {
        "relu backward": (lambda: np.multiply(g, h > 0, out=out),
                          fused("where(h > 0, g, 0)", out)),
        "bias + relu": (bias_relu, fused("where(h + b > 0, h + b, 0)", out)),
        "chain step": (chain_step, fused("log1p(exp(tanh(y * w + c)))", out64)),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    ne = optional("numexpr")
    if ne is None:
        sys.exit("bench/fusion.py needs numexpr: pip install numexpr")
    ne.set_num_threads(1)
    rows = []
    for shape in ((16,), (128, 512)):
        for name, (np_fn, ne_fn) in chains(shape, ne).items():
            n = 2000 if shape == (16,) else 100
            t_np, t_ne = best_times_interleaved([np_fn, ne_fn], args.repeat, n, time.process_time)
            rows.append([name, "x".join(map(str, shape)), f"{t_ne / t_np:.2f}x"])
    print(f"numexpr {ne.__version__}, NumPy {np.__version__}, one thread:")
    print(table(rows, ["chain", "shape", "numexpr (fused) / NumPy (out=)"]))


if __name__ == "__main__":
    main()
