"""Forward mode and derived transforms: costs relative to the gradient, and checkpoint memory.

Four measurements, each reported as a ratio from one run (absolute times vary by machine).
Times are the best of ``--repeat`` interleaved rounds of process CPU time, with one compute
thread per library (see :func:`best_times`):

1. hvp time / grad time on the loss of an MLP 784-512-512-10 (softmax cross-entropy, batch
   128, float32), with ReLU (the MLP of ``bench/train_step.py``) and with tanh: ``tg.hvp``
   against ``tg.grad``, ``jvp(grad(loss))`` for the others. Theory: about 2-4 (the tangent
   pass repeats every matmul of the gradient with one or two tangent operands); the exact
   multiply-add count gives 1.92 for ReLU and 2.08 for tanh (docs/transforms.md).
2. jvp time / forward time on the same loss (tangent along all parameters). Theory: about 3.
3. jacfwd time / jacrev time on ``tanh(W x) * exp(0.1 x W)``-style functions with 100 inputs
   and 10 outputs (jacrev should win: 10 backward passes against 100 tangent passes) and
   10 inputs and 100 outputs (jacfwd should win).
4. Peak memory (tracemalloc) of the gradient of a 50-layer width-1024 tanh MLP with and
   without checkpointing, and the memory the recorded forward holds for the backward pass.

Columns for PyTorch (``torch.func``) and JAX (``jax.jit``) appear when they are installed.
Freed large blocks stay in the C heap for reuse (``_util.steady_allocator``, process-wide, so
for every library alike): otherwise whether a fresh output array costs a page fault per 4 KB
depends on the order of earlier frees, not on the work.

Run: ``python bench/transforms.py [--repeat 7] [--mem-batch 256]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tracemalloc

# One compute thread per library: on a shared machine, multi-threaded BLAS turns the load of
# other processes into large timing noise, and one thread each keeps the libraries comparable.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault(
    "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
)

import numpy as np  # noqa: E402  (after the thread settings)

sys.path.insert(0, os.path.dirname(__file__))
from _util import optional, steady_allocator, table  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402

SIZES = (784, 512, 512, 10)


def best_times(fns, repeat):
    """Best CPU seconds per call of each function, timed in interleaved rounds.

    Every library runs with one compute thread, so the process's CPU time is the work done,
    and the load of other processes on a shared machine (which inflates wall time) does not
    enter. Timing the functions one after another within each round, keeping each one's best
    round, keeps their ratios comparable.
    """
    import time

    for fn in fns:
        fn()  # warm up (and compile, for jit)
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            gc.collect()
            t0 = time.process_time()
            fn()
            best[i] = min(best[i], time.process_time() - t0)
    return best


BATCH = 128


# -- the MLP loss (same data for every library) ---------------------------------------------
def _data(seed=0):
    rng = np.random.default_rng(seed)
    params = [
        ((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32), np.zeros(b, np.float32))
        for a, b in zip(SIZES[:-1], SIZES[1:])
    ]
    tangents = [
        (
            rng.standard_normal(w.shape).astype(np.float32),
            rng.standard_normal(b.shape).astype(np.float32),
        )
        for w, b in params
    ]
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y = np.eye(SIZES[-1], dtype=np.float32)[rng.integers(0, SIZES[-1], BATCH)]
    return params, tangents, x, y


def _mlp_loss(lib, activation="relu"):
    """The same loss written in tapegrad.numpy, torch or jax.numpy (``lib`` names it), with
    ``activation`` ``"relu"`` or ``"tanh"`` between the layers."""

    def loss(params, x, y, ns):
        if activation == "tanh":
            act = ns.tanh
        elif lib == "jax":
            import jax

            act = jax.nn.relu
        else:
            act = ns.relu
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = act(h)
        if lib == "tapegrad":
            shift = tg.stop_gradient(tnp.mean(h, axis=1, keepdims=True))
            z = h - shift
            lse = tnp.log(tnp.sum(tnp.exp(z), axis=1, keepdims=True))
            return -tnp.sum((z - lse) * y) / BATCH
        if lib == "torch":
            return -(ns.log_softmax(h, dim=1) * y).sum() / BATCH
        import jax

        return -(jax.nn.log_softmax(h, axis=1) * y).sum() / BATCH

    return loss


def mlp_ratios(repeat, activation="relu"):
    params, tangents, x, y = _data()
    rows = []
    loss = _mlp_loss("tapegrad", activation)
    tp = [(tg.Tensor(w), tg.Tensor(b)) for w, b in params]
    tv = [(tg.Tensor(w), tg.Tensor(b)) for w, b in tangents]
    tx, ty = tg.Tensor(x), tg.Tensor(y)

    def f(p):
        return loss(p, tx, ty, tnp)

    g = tg.grad(f)
    t_fwd, t_grad, t_hvp, t_jvp = best_times(
        [
            lambda: f(tp),
            lambda: g(tp),
            lambda: tg.hvp(f, (tp,), (tv,)),
            lambda: tg.jvp(f, (tp,), (tv,)),
        ],
        repeat,
    )
    rows.append(("tapegrad", t_hvp / t_grad, t_jvp / t_fwd, t_grad / t_fwd))

    torch = optional("torch")
    if torch is not None:
        torch.set_num_threads(1)
        from torch.func import grad as tgrad
        from torch.func import jvp as tjvp

        tl = _mlp_loss("torch", activation)
        pp = [(torch.tensor(w), torch.tensor(b)) for w, b in params]
        vv = [(torch.tensor(w), torch.tensor(b)) for w, b in tangents]
        xx, yy = torch.tensor(x), torch.tensor(y)

        def tf(p):
            return tl(p, xx, yy, torch)

        def fwd():
            with torch.no_grad():
                return tf(pp)

        t_fwd, t_grad, t_hvp, t_jvp = best_times(
            [
                fwd,
                lambda: tgrad(tf)(pp),
                lambda: tjvp(tgrad(tf), (pp,), (vv,)),
                lambda: tjvp(tf, (pp,), (vv,)),
            ],
            repeat,
        )
        rows.append(("PyTorch (torch.func)", t_hvp / t_grad, t_jvp / t_fwd, t_grad / t_fwd))

    jax = optional("jax")
    if jax is not None:
        import jax.numpy as jnp

        jl = _mlp_loss("jax", activation)
        pp = [(jnp.asarray(w), jnp.asarray(b)) for w, b in params]
        vv = [(jnp.asarray(w), jnp.asarray(b)) for w, b in tangents]
        xx, yy = jnp.asarray(x), jnp.asarray(y)

        def jf(p):
            return jl(p, xx, yy, jnp)

        fwd = jax.jit(jf)
        grd = jax.jit(jax.grad(jf))
        hvp = jax.jit(lambda p, v: jax.jvp(jax.grad(jf), (p,), (v,))[1])
        jvp = jax.jit(lambda p, v: jax.jvp(jf, (p,), (v,)))

        def ready(out):
            return jax.block_until_ready(out)

        t_fwd, t_grad, t_hvp, t_jvp = best_times(
            [
                lambda: ready(fwd(pp)),
                lambda: ready(grd(pp)),
                lambda: ready(hvp(pp, vv)),
                lambda: ready(jvp(pp, vv)),
            ],
            repeat,
        )
        rows.append(("JAX (jit)", t_hvp / t_grad, t_jvp / t_fwd, t_grad / t_fwd))
    return rows


# -- jacfwd vs jacrev ------------------------------------------------------------------------
def _jac_fn(n_in, n_out, seed=1):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((n_out, n_in)) / np.sqrt(n_in)).astype(np.float32)
    x = rng.standard_normal(n_in).astype(np.float32)
    return w, x


def _jac_case(n_in, n_out, repeat) -> dict:
    """``{library: jacfwd time / jacrev time}`` for one function shape."""
    w, x = _jac_fn(n_in, n_out)
    out = {}
    tw, tx = tg.Tensor(w), tg.Tensor(x)

    def f(x):
        return tnp.tanh(tw @ x) * tnp.exp(0.1 * tnp.sum(x))

    jf, jr = tg.jacfwd(f), tg.jacrev(f)
    a, b = best_times([lambda: jf(tx), lambda: jr(tx)], repeat)
    out["tapegrad"] = a / b
    torch = optional("torch")
    if torch is not None:
        from torch.func import jacfwd, jacrev

        ww, xx = torch.tensor(w), torch.tensor(x)

        def tf(x):
            return torch.tanh(ww @ x) * torch.exp(0.1 * x.sum())

        a, b = best_times([lambda: jacfwd(tf)(xx), lambda: jacrev(tf)(xx)], repeat)
        out["PyTorch (torch.func)"] = a / b
    jax = optional("jax")
    if jax is not None:
        import jax.numpy as jnp

        ww, xx = jnp.asarray(w), jnp.asarray(x)

        def jfn(x):
            return jnp.tanh(ww @ x) * jnp.exp(0.1 * x.sum())

        jf2, jr2 = jax.jit(jax.jacfwd(jfn)), jax.jit(jax.jacrev(jfn))
        a, b = best_times(
            [lambda: jax.block_until_ready(jf2(xx)), lambda: jax.block_until_ready(jr2(xx))],
            repeat,
        )
        out["JAX (jit)"] = a / b
    return out


def jac_ratios(repeat):
    wide = _jac_case(100, 10, repeat)
    tall = _jac_case(10, 100, repeat)
    return [(lib, wide[lib], tall[lib]) for lib in wide]


# -- checkpoint memory -----------------------------------------------------------------------
def _deep_params(layers, width, seed=2):
    rng = np.random.default_rng(seed)
    return [
        (
            tg.Tensor((rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)),
            tg.Tensor(np.zeros(width, np.float32)),
        )
        for _ in range(layers)
    ]


def _block(params, h):
    for w, b in params:
        h = tnp.tanh(h @ w + b)
    return h


def _deep_loss(segment):
    """Loss of the deep MLP; ``segment`` layers per checkpoint (0: no checkpointing)."""

    def loss(params, x):
        h = x
        if segment:
            for i in range(0, len(params), segment):
                h = tg.checkpoint(_block)(params[i : i + segment], h)
        else:
            h = _block(params, h)
        return tnp.mean(h * h)

    return loss


def _measure(fn):
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    out = fn()
    held = tracemalloc.get_traced_memory()[0] - base
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    del out
    return held, peak


def memory_rows(layers, width, batch):
    params = _deep_params(layers, width)
    x = tg.Tensor(np.random.default_rng(3).standard_normal((batch, width)).astype(np.float32))
    seg = max(1, int(round(np.sqrt(layers))))
    rows = []
    base = None
    for name, s in (("no checkpointing", 0), ("every layer", 1), (f"every {seg} layers", seg)):
        loss = _deep_loss(s)
        # memory the recorded forward keeps for the backward pass (vjp before the pullback)
        held, _ = _measure(lambda loss=loss: tg.vjp(loss, params, x))
        # peak of the whole parameter gradient (includes the 50 gradient matrices it returns)
        _, peak_p = _measure(lambda loss=loss: tg.grad(loss)(params, x))
        # peak of the input gradient (the working memory alone: parameters are constants)
        _, peak_x = _measure(lambda loss=loss: tg.grad(loss, argnums=1)(params, x))
        if base is None:
            base = (held, peak_p, peak_x)
        rows.append((name, held / base[0], peak_p / base[1], peak_x / base[2]))
    return rows, seg


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--layers", type=int, default=50)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--mem-batch", type=int, default=256)
    p.add_argument("--parts", default="mlp,jac,mem", help="comma-separated: mlp, jac, mem")
    args = p.parse_args(argv)
    parts = set(args.parts.split(","))
    steady_allocator()

    def fmt(rows):
        return [[r[0]] + [f"{v:.2f}" for v in r[1:]] for r in rows]

    if "mlp" in parts:
        for activation in ("relu", "tanh"):
            print(f"## hvp and jvp cost (MLP 784-512-512-10, {activation}, batch 128, float32)\n")
            print(
                table(
                    fmt(mlp_ratios(args.repeat, activation)),
                    ["library", "hvp / grad", "jvp / forward", "grad / forward"],
                ),
                flush=True,
            )
            print()
    if "jac" in parts:
        print("\n## jacfwd time / jacrev time (> 1: jacrev faster)\n")
        rows = fmt(jac_ratios(args.repeat))
        print(table(rows, ["library", "100 in, 10 out", "10 in, 100 out"]), flush=True)
    if "mem" not in parts:
        return
    rows, seg = memory_rows(args.layers, args.width, args.mem_batch)
    print(
        f"\n## checkpoint memory ({args.layers} layers, width {args.width}, batch "
        f"{args.mem_batch}, float32; ratios to no checkpointing)\n"
    )
    print(
        table(
            fmt(rows),
            [
                "checkpointing",
                "held for backward",
                "peak, grad w.r.t. params",
                "peak, grad w.r.t. input",
            ],
        )
    )


if __name__ == "__main__":
    main()
