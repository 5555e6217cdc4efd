"""tapegrad on an NVIDIA GPU (CuPy) beside PyTorch CUDA, in one run.

- **mlp**: the MLP 784-512-512-10 training step of ``bench/user_code.py`` (log-softmax
  cross-entropy written from ``tnp`` ops, the plain ``[p - lr * g ...]`` update), float32, at
  batch 1024: tapegrad eager and under ``jit``, PyTorch CUDA eager.
- **chain**: the small-op chain of ``bench/user_code.py`` (16 elements, 100 steps of 6 ops)
  forward+backward, per op, tapegrad eager and ``jit(grad)``, PyTorch CUDA eager.

Every column is timed in the same interleaved rounds of wall-clock time, the device
synchronized at the end of each call; each keeps its best round. Ratios only: never quote a
lone absolute time. Needs CuPy and a CUDA device (``pip install -e ".[gpu]"``).

Run: ``python bench/gpu.py [--repeat 7]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import best_times_interleaved, optional, table  # noqa: E402
from user_code import mlp_data, tg_chain, tg_sgd_step  # noqa: E402

import tapegrad as tg  # noqa: E402


def _synced(fn, sync):
    def run():
        out = fn()
        sync()
        return out

    return run


def mlp_bench(repeat, cp, torch):
    init, _, _ = mlp_data()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1024, 784)).astype(np.float32)
    y = rng.integers(0, 10, 1024)
    dev = "cuda:0"
    params = [(tg.Tensor(w, device=dev), tg.Tensor(b, device=dev)) for w, b in init]
    batch = (tg.Tensor(x, device=dev), tg.Tensor(y, device=dev))
    jstep = tg.jit(tg_sgd_step)
    state = {"eager": params, "jit": params}

    def eager():
        loss, state["eager"] = tg_sgd_step(state["eager"], *batch)
        return loss

    def jitted():
        loss, state["jit"] = jstep(state["jit"], *batch)
        return loss

    sync = cp.cuda.Device().synchronize
    cols = {"tapegrad": _synced(eager, sync), "tapegrad jit(step)": _synced(jitted, sync)}
    if torch is not None:
        tp = [(torch.tensor(w, device="cuda").requires_grad_(),
               torch.tensor(b, device="cuda").requires_grad_()) for w, b in init]
        opt = torch.optim.SGD([t for p in tp for t in p], lr=0.01)
        tx, ty = torch.tensor(x, device="cuda"), torch.tensor(y, device="cuda")

        def tstep():
            opt.zero_grad(set_to_none=True)
            h = tx
            for w, b in tp[:-1]:
                h = torch.relu(h @ w + b)
            w, b = tp[-1]
            loss = torch.nn.functional.cross_entropy(h @ w + b, ty)
            loss.backward()
            opt.step()
            return loss

        cols["PyTorch CUDA eager"] = _synced(tstep, torch.cuda.synchronize)
    for fn in cols.values():  # warm up: traces, kernels compiled, caches filled
        for _ in range(3):
            fn()
    times = best_times_interleaved(list(cols.values()), repeat, 10, time.perf_counter)
    return dict(zip(cols, times))


def chain_bench(repeat, cp, torch, steps=100):
    rng = np.random.default_rng(0)
    x, w, c = (rng.standard_normal(16) for _ in range(3))
    dev = "cuda:0"
    tx, tw, tc = (tg.Tensor(a, device=dev) for a in (x, w, c))
    g = tg.grad(lambda v: tg_chain(v, tw, tc, steps))
    jg = tg.jit(g)
    sync = cp.cuda.Device().synchronize
    cols = {"tapegrad grad": _synced(lambda: g(tx), sync),
            "tapegrad jit(grad)": _synced(lambda: jg(tx), sync)}
    if torch is not None:
        px = torch.tensor(x, device="cuda", requires_grad=True)
        pw, pc = torch.tensor(w, device="cuda"), torch.tensor(c, device="cuda")

        def tfb():
            total = 0.0
            yy = px
            for _ in range(steps):
                yy = torch.tanh(yy * pw + pc)
                yy = torch.logaddexp(yy, torch.zeros((), dtype=yy.dtype, device="cuda"))
                total = total + torch.sum(yy)
            (gx,) = torch.autograd.grad(total, px)
            return gx

        cols["PyTorch CUDA eager"] = _synced(tfb, torch.cuda.synchronize)
    for fn in cols.values():
        fn()
        fn()
    times = best_times_interleaved(list(cols.values()), repeat, 3, time.perf_counter)
    return {k: t / (6 * steps) for k, t in zip(cols, times)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    cp = optional("cupy")
    if cp is None or not tg.backend.cupy_available():
        sys.exit("bench/gpu.py needs CuPy and a CUDA device")
    torch = optional("torch")
    if torch is not None and not torch.cuda.is_available():
        torch = None
    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"device: {name}; CuPy {cp.__version__}"
          + (f"; PyTorch {torch.__version__}" if torch else ""))
    base = "PyTorch CUDA eager" if torch is not None else "tapegrad"
    mlp = mlp_bench(args.repeat, cp, torch)
    print("\nMLP 784-512-512-10 step, batch 1024, float32:")
    print(table([[k, f"{v / mlp[base]:.2f}x"] for k, v in mlp.items()], ["step", f"vs {base}"]))
    base = "PyTorch CUDA eager" if torch is not None else "tapegrad grad"
    ch = chain_bench(args.repeat, cp, torch)
    print("\nsmall-op chain (16 elements), forward+backward per op:")
    print(table([[k, f"{v / ch[base]:.2f}x"] for k, v in ch.items()],
                ["implementation", f"vs {base}"]))


if __name__ == "__main__":
    main()
