"""Per-example gradients: ``tg.vmap(tg.grad(loss))`` beside hand-written NumPy, a Python loop
of ``tg.grad`` and ``torch.func``.

Workload: the MLP 784-512-512-10 (tanh or ReLU hidden layers, softmax cross-entropy on integer
labels, float32), one gradient per example of a batch of 128, every gradient kept: the weight
gradients alone are ``128 x (784 x 512 + 512 x 512 + 512 x 10)`` floats (about 340 MB), so
the work is dominated by writing the per-example outer products.

Columns (each computes the same gradients, checked with ``allclose`` before any timing):

- **NumPy einsum (hand-written)**, the reference: one batched forward pass, the deltas
  backpropagated by hand, each layer's per-example weight gradients ``einsum('bi,bj->bij',
  activations, deltas)`` and bias gradients the deltas themselves.
- **floor: the outer products alone**: only the writing of the per-example weight gradients
  (``a[:, :, None] * delta[:, None, :]`` on precomputed activations and deltas), which every
  column has to do; the gap between a column and the floor is its own overhead.
- **tapegrad vmap(grad)**: ``tg.vmap(tg.grad(loss), in_axes=(None, 0, 0))(params, X, Y)``
  with ``loss`` written for one example.
- **tapegrad jit(vmap(grad))**: the same, traced once by ``tg.jit`` and then replayed.
- **tapegrad loop of grad**: ``[tg.grad(loss)(params, x, y) for x, y in examples]`` (a list of
  per-example gradients; not stacked, which would only add to its time).
- **torch.func vmap(grad)** (when PyTorch is installed): ``torch.func.vmap(torch.func.grad(
  loss), in_dims=(None, 0, 0))``.

All timings come from one run: single thread, pinned to one core, interleaved rounds of process
CPU time, the median of ``--repeats`` rounds per column, reported as ratios to the NumPy einsum
version. The issue's targets are printed with whether this run met them: vmap(grad) within
1.5x of the NumPy einsum form, and at least 20x faster than the Python loop.

Run: ``python bench/per_example.py [--repeats 7] [--activation tanh|relu] [--batch 128]``.
"""

from __future__ import annotations

import os

# Single thread everywhere, set before NumPy/BLAS and PyTorch start their thread pools; on Linux
# the process is also pinned to one CPU.
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"):
    os.environ[_v] = "1"
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

import argparse  # noqa: E402
import gc  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import optional, steady_allocator, table  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.nn.functional as F  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402

SIZES = (784, 512, 512, 10)
REFERENCE = "NumPy einsum (hand-written)"
VMAP = "tapegrad vmap(grad)"
JIT = "tapegrad jit(vmap(grad))"
FLOOR = "floor: the outer products alone"
LOOP = "tapegrad loop of grad"
TORCH = "torch.func vmap(grad)"


def init_params(rng, sizes=SIZES):
    """``[(w (in, out), b (out,)), ...]`` float32, scaled by ``1 / sqrt(in)``."""
    return [
        (
            (rng.standard_normal((i, o)) / np.sqrt(i)).astype(np.float32),
            (0.1 * rng.standard_normal(o)).astype(np.float32),
        )
        for i, o in zip(sizes[:-1], sizes[1:])
    ]


# -- (reference) hand-written NumPy, the einsum form -------------------------------------------
def numpy_per_example_grads(params, x, y, activation):
    """Per-example gradients ``[(gw (B, in, out), gb (B, out)), ...]`` of the cross-entropy of
    each example, by hand: a batched forward pass, the deltas backpropagated, each weight
    gradient ``einsum('bi,bj->bij', activation_in, delta)``."""
    acts = [x]
    a = x
    for i, (w, b) in enumerate(params):
        a = a @ w
        a += b
        if i < len(params) - 1:
            a = np.tanh(a) if activation == "tanh" else np.maximum(a, 0.0)
            acts.append(a)
    a -= a.max(axis=1, keepdims=True)  # softmax - onehot: the delta of the logits
    np.exp(a, out=a)
    a /= a.sum(axis=1, keepdims=True)
    a[np.arange(len(y)), y] -= 1.0
    delta = a
    grads = [None] * len(params)
    for i in range(len(params) - 1, -1, -1):
        grads[i] = (np.einsum("bi,bj->bij", acts[i], delta), delta)
        if i > 0:
            delta = delta @ params[i][0].T
            h = acts[i]
            delta *= (1.0 - h * h) if activation == "tanh" else (h > 0)
    return grads


# -- tapegrad -----------------------------------------------------------------------------------
def make_loss(activation):
    act = tnp.tanh if activation == "tanh" else F.relu

    def loss(params, x, y):
        """Cross-entropy of ONE example: ``x`` ``(784,)``, ``y`` a class index."""
        *hidden, last = params
        for p in hidden:
            x = act(F.linear(x, p["w"], p["b"]))
        return F.cross_entropy(F.linear(x, last["w"], last["b"]), y)

    return loss


# -- PyTorch ------------------------------------------------------------------------------------
def torch_impl(torch, init, x, y, activation):
    torch.set_num_threads(1)
    from torch.func import grad, vmap

    act = torch.tanh if activation == "tanh" else torch.relu

    def loss(params, x, y):
        *hidden, last = params
        for w, b in hidden:
            x = act(x @ w + b)
        w, b = last
        return torch.nn.functional.cross_entropy(x @ w + b, y)

    params = [(torch.tensor(w), torch.tensor(b)) for w, b in init]
    tx, ty = torch.tensor(x), torch.tensor(y)
    per_example = vmap(grad(loss), in_dims=(None, 0, 0))
    run = lambda: per_example(params, tx, ty)  # noqa: E731
    as_numpy = lambda gs: [(gw.numpy(), gb.numpy()) for gw, gb in gs]  # noqa: E731
    return run, as_numpy


def build(args):
    """``{name: (run, to_numpy)}``: ``run()`` computes every per-example gradient, and
    ``to_numpy(run())`` gives them as ``[(gw (B, in, out), gb (B, out)), ...]``."""
    rng = np.random.default_rng(0)
    init = init_params(rng)
    x = rng.standard_normal((args.batch, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], args.batch)
    impls = {}
    impls[REFERENCE] = (
        lambda: numpy_per_example_grads(init, x, y, args.activation),
        lambda gs: gs,
    )
    # the floor: only writing the per-example weight gradients (outer products of the
    # reference's own activations and deltas, precomputed), as every column must
    ref = numpy_per_example_grads(init, x, y, args.activation)
    acts, deltas = [x], [gb for _, gb in ref]
    for w, b in init[:-1]:
        h = acts[-1] @ w + b
        acts.append(np.tanh(h) if args.activation == "tanh" else np.maximum(h, 0.0))
    impls[FLOOR] = (
        lambda: [(np.multiply(a[:, :, None], d[:, None, :]), d) for a, d in zip(acts, deltas)],
        lambda gs: gs,
    )

    loss = make_loss(args.activation)
    params = [{"w": tg.Tensor(w), "b": tg.Tensor(b)} for w, b in init]
    X, Y = tg.Tensor(x), tg.Tensor(y)
    per_example = tg.vmap(tg.grad(loss), in_axes=(None, 0, 0))
    to_numpy = lambda gs: [(g["w"].numpy(), g["b"].numpy()) for g in gs]  # noqa: E731
    impls[VMAP] = (lambda: per_example(params, X, Y), to_numpy)
    jitted = tg.jit(per_example)
    impls[JIT] = (lambda: jitted(params, X, Y), to_numpy)

    examples = [(tg.Tensor(x[i]), tg.Tensor(y[i])) for i in range(args.batch)]
    grad_fn = tg.grad(loss)
    impls[LOOP] = (
        lambda: [grad_fn(params, xi, yi) for xi, yi in examples],
        lambda rows: [
            (
                np.stack([r[k]["w"].numpy() for r in rows]),
                np.stack([r[k]["b"].numpy() for r in rows]),
            )
            for k in range(len(SIZES) - 1)
        ],
    )

    torch = optional("torch")
    if torch is not None and hasattr(torch, "func"):
        impls[TORCH] = torch_impl(torch, init, x, y, args.activation)
    return impls


def check_same(impls):
    """Assert that every implementation computes the reference's per-example gradients."""
    ref = impls[REFERENCE][1](impls[REFERENCE][0]())
    for name, (run, to_numpy) in impls.items():
        got = to_numpy(run())
        assert len(got) == len(ref), name
        for k, ((gw, gb), (rw, rb)) in enumerate(zip(got, ref)):
            for what, a, b in (("weight", gw, rw), ("bias", gb, rb)):
                assert a.shape == b.shape and a.dtype == b.dtype, (
                    f"{name}: layer {k} {what} gradients: shape {a.shape} {a.dtype}, expected "
                    f"{b.shape} {b.dtype}"
                )
                np.testing.assert_allclose(
                    a, b, rtol=1e-4, atol=1e-5, err_msg=f"{name}: layer {k} {what} gradients"
                )
        del got
        gc.collect()


def median_times(fns, repeats, clock=time.process_time):
    """Median seconds per call of each function, timed in interleaved rounds (one call of each
    per round), after one warm-up call each."""
    for fn in fns:
        fn()
    times = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            gc.collect()
            t0 = clock()
            out = fn()
            times[i].append(clock() - t0)
            del out
    return [statistics.median(t) for t in times]


def versions() -> str:
    parts = [f"Python {platform.python_version()}", f"NumPy {np.__version__}"]
    torch = optional("torch")
    if torch is not None:
        parts.append(f"PyTorch {torch.__version__}")
    return ", ".join(parts)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5, help="timing rounds; the median counts")
    p.add_argument("--batch", type=int, default=128, help="examples per batch")
    p.add_argument("--activation", choices=("tanh", "relu"), default="tanh")
    args = p.parse_args(argv)
    if args.repeats < 1 or args.batch < 1:
        p.error("--repeats and --batch must be >= 1")
    steady = steady_allocator()
    impls = build(args)
    check_same(impls)
    names = list(impls)
    secs = dict(zip(names, median_times([impls[n][0] for n in names], args.repeats)))
    base = secs[REFERENCE]
    rows = [[n, f"{secs[n] * 1e3:.1f}", f"{secs[n] / base:.2f}x"] for n in names]
    title = (
        f"Per-example gradients, MLP 784-512-512-10 ({args.activation}), batch {args.batch}, "
        f"float32: median of {args.repeats} interleaved rounds of process CPU time, single "
        f"thread{', freed blocks kept for reuse' if steady else ''} ({versions()}). Every column "
        "was checked to compute the same gradients first."
    )
    vmap_ratio = secs[VMAP] / base
    speedup = secs[LOOP] / secs[VMAP]
    lines = [
        title,
        "",
        table(rows, ["implementation", "ms", "vs NumPy einsum"]),
        "",
        f"Overhead above the floor: vmap(grad) {(secs[VMAP] - secs[FLOOR]) * 1e3:.1f} ms, loop "
        f"of grad {(secs[LOOP] - secs[FLOOR]) * 1e3:.1f} ms "
        f"({(secs[LOOP] - secs[FLOOR]) / max(secs[VMAP] - secs[FLOOR], 1e-9):.1f}x).",
        f"vmap(grad) vs NumPy einsum: {vmap_ratio:.2f}x (target <= 1.5x: "
        f"{'met' if vmap_ratio <= 1.5 else 'NOT met'})",
        f"vmap(grad) speed-up over the loop of grad: {speedup:.1f}x (target >= 20x: "
        f"{'met' if speedup >= 20 else 'NOT met'})",
    ]
    print("\n".join(lines))
    return secs


if __name__ == "__main__":
    main()
