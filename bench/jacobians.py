"""Jacobians and Hessians through vmap: ratios to one vjp/grad, beside PyTorch's torch.func.

- **jacrev**: ``tg.jacrev(f)(x)`` for ``f: R^100 -> R^100``,
  ``f(x) = tanh(W2 @ tanh(W1 @ x + b1))`` (hidden width 100, float64), as a ratio to one
  ``vjp`` call (forward and one backward). Also ``jacfwd``.
- **hessian**: ``tg.hessian(g)(p)`` for a scalar function of 100 parameters
  (``g(p) = sum(log(1 + (A @ p) ** 2))`` with ``A`` 200x100, float64), as a ratio to one
  ``grad`` call.

Columns: tapegrad, and PyTorch (``torch.func.jacrev``/``hessian`` over ``torch.func.vjp``/
``grad``) when installed, each as a ratio to its own library's single vjp/grad, measured in
interleaved rounds in one run, single thread. The values are checked against each other
before timing. Never quote a lone absolute time from this script.

Run: ``python bench/jacobians.py [--repeat 7]``.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import best_times_interleaved, optional, table  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402

N = 100


def _data():
    rng = np.random.default_rng(0)
    return {
        "W1": rng.standard_normal((N, N)) / np.sqrt(N), "b1": rng.standard_normal(N),
        "W2": rng.standard_normal((N, N)) / np.sqrt(N), "x": rng.standard_normal(N),
        "A": rng.standard_normal((2 * N, N)) / np.sqrt(N), "p": rng.standard_normal(N),
    }


def _tapegrad(d):
    W1, b1, W2, A = (tg.Tensor(d[k]) for k in ("W1", "b1", "W2", "A"))
    x, p = tg.Tensor(d["x"]), tg.Tensor(d["p"])

    def f(x):
        return tnp.tanh(W2 @ tnp.tanh(W1 @ x + b1))

    def g(p):
        return tnp.sum(tnp.log(1 + (A @ p) ** 2))

    ct = tg.Tensor(np.ones(N))
    return {
        "vjp": lambda: tg.vjp(f, x)[1](ct),
        "jacrev": lambda: tg.jacrev(f)(x),
        "jacfwd": lambda: tg.jacfwd(f)(x),
        "grad": lambda: tg.grad(g)(p),
        "hessian": lambda: tg.hessian(g)(p),
    }


def _torch(d):
    torch = optional("torch")
    if torch is None:
        return None
    torch.set_num_threads(1)
    from torch.func import grad, hessian, jacfwd, jacrev, vjp

    W1, b1, W2, A = (torch.tensor(d[k]) for k in ("W1", "b1", "W2", "A"))
    x, p = torch.tensor(d["x"]), torch.tensor(d["p"])

    def f(x):
        return torch.tanh(W2 @ torch.tanh(W1 @ x + b1))

    def g(p):
        return torch.sum(torch.log(1 + (A @ p) ** 2))

    ct = torch.ones(N, dtype=torch.float64)
    return {
        "vjp": lambda: vjp(f, x)[1](ct),
        "jacrev": lambda: jacrev(f)(x),
        "jacfwd": lambda: jacfwd(f)(x),
        "grad": lambda: grad(g)(p),
        "hessian": lambda: hessian(g)(p),
    }


def _np(v):
    if isinstance(v, tuple):
        v = v[0]
    return v.numpy() if hasattr(v, "numpy") else np.asarray(v)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    d = _data()
    cols = {"tapegrad": _tapegrad(d)}
    t = _torch(d)
    if t is not None:
        cols["PyTorch (torch.func)"] = t
    for name, fns in cols.items():  # the same numbers everywhere before timing
        for k in ("jacrev", "jacfwd", "hessian"):
            np.testing.assert_allclose(_np(fns[k]()), _np(cols["tapegrad"][k]()), rtol=1e-8,
                                       atol=1e-10, err_msg=f"{name} {k}")
    rows = []
    for what, base in (("jacrev", "vjp"), ("jacfwd", "vjp"), ("hessian", "grad")):
        row = [f"{what} / one {base}"]
        for fns in cols.values():
            tb, tw = best_times_interleaved([fns[base], fns[what]], repeat=args.repeat,
                                            clock=time.process_time)
            row.append(f"{tw / tb:.2f}x")
        rows.append(row)
    print(table(rows, ["ratio (R^100)"] + list(cols)))


if __name__ == "__main__":
    main()
