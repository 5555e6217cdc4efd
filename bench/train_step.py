"""Milliseconds per training step: tapegrad beside hand-written NumPy and other libraries.

Workloads (float32, single thread, plain SGD update, softmax cross-entropy):

- **MLP**: 784-512-512-10 with ReLU, batch 128.
- **CNN**: input ``(64, 1, 28, 28)``; conv3x3(16, padding 1), ReLU, max-pool 2; conv3x3(32,
  padding 1), ReLU, max-pool 2; linear(1568 -> 10).
- **Peak memory** (tracemalloc) of one forward+backward of a 50-layer width-256 ReLU MLP
  (256-256-...-256-10, batch 256).

Columns, each when installed: hand-written NumPy forward/backward (the floor: the gradients
derived by hand, BLAS calls on contiguous arrays, in-place SGD), tapegrad (``value_and_grad``
+ ``optim.apply_gradients`` with ``optim.sgd``), the same with the update in its two-call
form (``tx.update`` + ``optim.apply_updates``), the step under ``tg.jit`` (traced once, then
its tape replays), PyTorch eager,
JAX with and without ``jit``, HIPS autograd. Every implementation computes the same loss from
the same initial weights (checked before timing). All timings come from one run, in
interleaved rounds of process CPU time, and are reported as ratios to hand-written NumPy
measured in that run (best of ``--repeat`` rounds). Freed large blocks stay in the C heap for
reuse (``_util.steady_allocator``, process-wide, so for every column alike), as in the other
benchmarks: otherwise whether a fresh array costs a page fault per 4 KB depends on the order of
earlier frees, not on the work.

Run: ``python bench/train_step.py [--repeat 7] [--only mlp,cnn,memory] [--markdown FILE]``.
"""

from __future__ import annotations

import os

# Single thread everywhere, set before NumPy/BLAS, PyTorch or XLA start their thread pools; on
# Linux the process is also pinned to one CPU, so libraries that start helper threads anyway
# (XLA's runtime) cannot use a second core.
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"):
    os.environ[_v] = "1"
os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false"
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
import importlib.metadata  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import (  # noqa: E402
    best_times_interleaved,
    init_dense,
    np_dense_step,
    np_softmax_xent,
    optional,
    steady_allocator,
    table,
)

import tapegrad as tg  # noqa: E402
import tapegrad.nn.functional as F  # noqa: E402
from tapegrad import optim  # noqa: E402

LR = 0.01


def tg_dense_loss(params, x, y):
    *hidden, last = params
    for p in hidden:
        x = F.relu(F.linear(x, p["w"], p["b"]))
    return F.cross_entropy(F.linear(x, last["w"], last["b"]), y)


def tg_step_fn(loss_fn, tx, fused=True):
    """A pure training step ``(params, opt_state, *batch) -> (loss, params, opt_state)``:
    ``optim.apply_gradients`` (``fused``), or its two-call form ``tx.update`` then
    ``optim.apply_updates``."""
    vg = tg.value_and_grad(loss_fn)

    def step(params, opt_state, *batch):
        loss, grads = vg(params, *batch)
        if fused:
            params, opt_state = optim.apply_gradients(tx, grads, opt_state, params)
        else:
            updates, opt_state = tx.update(grads, opt_state, params)
            params = optim.apply_updates(params, updates)
        return loss, params, opt_state

    return step


def stateful(step, params, opt_state, batch):
    """Wrap a pure step into a closure that carries params/opt_state between calls."""
    state = [params, opt_state]

    def run():
        loss, state[0], state[1] = step(state[0], state[1], *batch)
        return loss

    return run


def jitted(step, params, opt_state, batch):
    """``tg.jit`` of the whole pure step: traced once, then its tape replays (no user Python)."""
    return stateful(tg.jit(step), params, opt_state, batch)


# -- (a) MLP 784-512-512-10 ------------------------------------------------------------------
def mlp_impls(args):
    rng = np.random.default_rng(0)
    sizes = (784, 512, 512, 10)
    x = rng.standard_normal((128, 784)).astype(np.float32)
    y = rng.integers(0, 10, 128)
    init = init_dense(rng, sizes)
    impls = {}

    np_params = [(w.copy(), b.copy()) for w, b in init]
    impls["NumPy (hand-written)"] = (
        lambda: np_dense_step(np_params, x, y, LR)[0],
        np_dense_step([(w.copy(), b.copy()) for w, b in init], x, y, 0)[0],
    )

    tx = optim.sgd(LR)
    tparams = [{"w": tg.Tensor(w), "b": tg.Tensor(b)} for w, b in init]
    step = tg_step_fn(tg_dense_loss, tx)
    batch = (tg.Tensor(x), tg.Tensor(y))
    first = float(step(tparams, tx.init(tparams), *batch)[0])
    impls["tapegrad"] = (stateful(step, tparams, tx.init(tparams), batch), first)
    two_calls = tg_step_fn(tg_dense_loss, tx, fused=False)
    impls["tapegrad (update + apply_updates)"] = (
        stateful(two_calls, tparams, tx.init(tparams), batch),
        first,
    )
    impls["tapegrad jit(step)"] = (jitted(step, tparams, tx.init(tparams), batch), first)

    torch = optional("torch")
    if torch is not None:
        torch.set_num_threads(1)
        tp = [(torch.tensor(w).requires_grad_(), torch.tensor(b).requires_grad_()) for w, b in init]
        opt = torch.optim.SGD([t for p in tp for t in p], lr=LR)
        tx_, ty_ = torch.tensor(x), torch.tensor(y)

        def torch_loss():
            h = tx_
            for i, (w, b) in enumerate(tp):
                h = torch.addmm(b, h, w)
                if i < len(tp) - 1:
                    h = torch.relu(h)
            return torch.nn.functional.cross_entropy(h, ty_)

        def torch_step():
            opt.zero_grad(set_to_none=True)
            loss = torch_loss()
            loss.backward()
            opt.step()
            return loss

        with torch.no_grad():
            impls["PyTorch eager"] = (torch_step, float(torch_loss()))

    jax = optional("jax")
    if jax is not None:
        import jax.numpy as jnp

        def jax_loss(params, x, y):
            h = x
            for i, (w, b) in enumerate(params):
                h = h @ w + b
                if i < len(params) - 1:
                    h = jax.nn.relu(h)
            logp = jax.nn.log_softmax(h)
            return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

        impls.update(jax_impls(jax, jax_loss, init, (jnp.asarray(x), jnp.asarray(y))))

    ag = optional("autograd")
    if ag is not None:
        import autograd.numpy as anp

        def ag_loss(params, x, y):
            h = x
            for i, (w, b) in enumerate(params):
                h = anp.dot(h, w) + b
                if i < len(params) - 1:
                    h = anp.maximum(h, 0.0)
            return ag_xent(anp, h, y)

        impls["HIPS autograd"] = autograd_impl(ag, ag_loss, init, (x, y))
    return impls


def ag_xent(anp, z, y):
    m = anp.max(z, axis=1, keepdims=True)
    lse = anp.log(anp.sum(anp.exp(z - m), axis=1)) + m[:, 0]
    return anp.mean(lse - z[np.arange(z.shape[0]), y])


def jax_impls(jax, loss_fn, init, batch):
    vg = jax.value_and_grad(loss_fn)

    def step(params, x, y):
        loss, grads = vg(params, x, y)
        new = jax.tree_util.tree_map(lambda p, g: p - LR * g, params, grads)
        return loss, new

    first = float(loss_fn(init, *batch))
    out = {}
    for name, fn in (("JAX jit", jax.jit(step)), ("JAX (no jit)", step)):
        state = [jax.tree_util.tree_map(jax.numpy.asarray, init)]

        def run(fn=fn, state=state):
            loss, state[0] = fn(state[0], *batch)
            return loss.block_until_ready()

        out[name] = (run, first)
    return out


def autograd_impl(ag, loss_fn, init, batch):
    vg = ag.value_and_grad(loss_fn)
    state = [[(w.copy(), b.copy()) for w, b in init]]

    def run():
        loss, grads = vg(state[0], *batch)
        state[0] = [(w - LR * gw, b - LR * gb) for (w, b), (gw, gb) in zip(state[0], grads)]
        return loss

    return run, float(loss_fn(init, *batch))


# -- (b) small CNN -----------------------------------------------------------------------------
def np_conv3x3_fwd(x, w, b):
    """Same-padded 3x3 convolution by im2col: one BLAS call. Returns output and the columns."""
    n, c, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # n c h w 3 3
    cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(n * h * wd, c * 9)  # one copy
    out = cols @ w.reshape(w.shape[0], -1).T
    out += b
    return out.reshape(n, h, wd, -1).transpose(0, 3, 1, 2), cols


def np_conv3x3_bwd(g, cols, w, x_shape, need_dx):
    n, c, h, wd = x_shape
    o = w.shape[0]
    gm = g.transpose(0, 2, 3, 1).reshape(n * h * wd, o)
    dw = (gm.T @ cols).reshape(w.shape)
    db = gm.sum(axis=0)
    if not need_dx:
        return None, dw, db
    dcols = (gm @ w.reshape(o, -1)).reshape(n, h, wd, c, 3, 3)
    dxp = np.zeros((n, c, h + 2, wd + 2), g.dtype)
    for i in range(3):  # col2im: nine shifted, strided adds
        for j in range(3):
            dxp[:, :, i : i + h, j : j + wd] += dcols[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    return dxp[:, :, 1:-1, 1:-1], dw, db


def np_pool_fwd(x):
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def np_pool_bwd(g, x, out):
    n, c, h, w = x.shape
    xr = x.reshape(n, c, h // 2, 2, w // 2, 2)
    mask = xr == out[:, :, :, None, :, None]
    return (mask * g[:, :, :, None, :, None]).reshape(x.shape)


def np_cnn_step(p, x, y, lr):
    h1, cols1 = np_conv3x3_fwd(x, p["c1w"], p["c1b"])
    a1 = np.maximum(h1, 0.0)
    q1 = np_pool_fwd(a1)
    h2, cols2 = np_conv3x3_fwd(q1, p["c2w"], p["c2b"])
    a2 = np.maximum(h2, 0.0)
    q2 = np_pool_fwd(a2)
    flat = q2.reshape(q2.shape[0], -1)
    z = flat @ p["fw"] + p["fb"]
    loss, dz = np_softmax_xent(z, y)
    g = {"fw": flat.T @ dz, "fb": dz.sum(axis=0)}
    dq2 = (dz @ p["fw"].T).reshape(q2.shape)
    dh2 = np_pool_bwd(dq2, a2, q2) * (h2 > 0)
    dq1, g["c2w"], g["c2b"] = np_conv3x3_bwd(dh2, cols2, p["c2w"], q1.shape, True)
    dh1 = np_pool_bwd(dq1, a1, q1) * (h1 > 0)
    _, g["c1w"], g["c1b"] = np_conv3x3_bwd(dh1, cols1, p["c1w"], x.shape, False)
    if lr:
        for k in p:
            p[k] -= lr * g[k]
    return loss, g


def tg_cnn_loss(p, x, y):
    h = F.max_pool2d(F.relu(F.conv2d(x, p["c1w"], p["c1b"], padding=1)), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, p["c2w"], p["c2b"], padding=1)), 2)
    return F.cross_entropy(F.linear(h.reshape(h.shape[0], -1), p["fw"], p["fb"]), y)


def cnn_impls(args):
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
    impls = {}
    np_params = {k: v.copy() for k, v in init.items()}
    ref = np_cnn_step({k: v.copy() for k, v in init.items()}, x, y, 0)[0]
    impls["NumPy (hand-written)"] = (lambda: np_cnn_step(np_params, x, y, LR)[0], ref)

    tx = optim.sgd(LR)
    tparams = {k: tg.Tensor(v) for k, v in init.items()}
    step = tg_step_fn(tg_cnn_loss, tx)
    batch = (tg.Tensor(x), tg.Tensor(y))
    first = float(step(tparams, tx.init(tparams), *batch)[0])
    impls["tapegrad"] = (stateful(step, tparams, tx.init(tparams), batch), first)
    two_calls = tg_step_fn(tg_cnn_loss, tx, fused=False)
    impls["tapegrad (update + apply_updates)"] = (
        stateful(two_calls, tparams, tx.init(tparams), batch),
        first,
    )
    impls["tapegrad jit(step)"] = (jitted(step, tparams, tx.init(tparams), batch), first)

    torch = optional("torch")
    if torch is not None:
        torch.set_num_threads(1)
        tf = torch.nn.functional
        tp = {k: torch.tensor(v).requires_grad_() for k, v in init.items()}
        opt = torch.optim.SGD(list(tp.values()), lr=LR)
        tx_, ty_ = torch.tensor(x), torch.tensor(y)

        def torch_loss():
            h = tf.max_pool2d(torch.relu(tf.conv2d(tx_, tp["c1w"], tp["c1b"], padding=1)), 2)
            h = tf.max_pool2d(torch.relu(tf.conv2d(h, tp["c2w"], tp["c2b"], padding=1)), 2)
            return tf.cross_entropy(torch.addmm(tp["fb"], h.flatten(1), tp["fw"]), ty_)

        def torch_step():
            opt.zero_grad(set_to_none=True)
            loss = torch_loss()
            loss.backward()
            opt.step()
            return loss

        with torch.no_grad():
            impls["PyTorch eager"] = (torch_step, float(torch_loss()))

    jax = optional("jax")
    if jax is not None:
        import jax.numpy as jnp
        from jax import lax

        def jconv(h, w, b):
            dn = ("NCHW", "OIHW", "NCHW")
            out = lax.conv_general_dilated(h, w, (1, 1), ((1, 1), (1, 1)), dimension_numbers=dn)
            return out + b[None, :, None, None]

        def jpool(h):
            return lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

        def jax_loss(p, x, y):
            h = jpool(jax.nn.relu(jconv(x, p["c1w"], p["c1b"])))
            h = jpool(jax.nn.relu(jconv(h, p["c2w"], p["c2b"])))
            logp = jax.nn.log_softmax(h.reshape(h.shape[0], -1) @ p["fw"] + p["fb"])
            return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

        impls.update(jax_impls(jax, jax_loss, init, (jnp.asarray(x), jnp.asarray(y))))

    ag = optional("autograd")
    if ag is not None:
        import autograd.numpy as anp

        def ag_conv(h, w, b):
            # HIPS autograd has no im2col primitive: nine shifted slices, one einsum each.
            n, c, hh, ww = h.shape
            hp = anp.pad(h, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="constant")
            out = b[None, :, None, None]
            for i in range(3):
                for j in range(3):
                    out = out + anp.einsum(
                        "nchw,oc->nohw", hp[:, :, i : i + hh, j : j + ww], w[:, :, i, j]
                    )
            return out

        def ag_pool(h):
            n, c, hh, ww = h.shape
            return anp.max(anp.max(h.reshape(n, c, hh // 2, 2, ww // 2, 2), axis=5), axis=3)

        def ag_loss(p, x, y):
            h = ag_pool(anp.maximum(ag_conv(x, p["c1w"], p["c1b"]), 0.0))
            h = ag_pool(anp.maximum(ag_conv(h, p["c2w"], p["c2b"]), 0.0))
            return ag_xent(anp, anp.dot(h.reshape(h.shape[0], -1), p["fw"]) + p["fb"], y)

        vg = ag.value_and_grad(ag_loss)
        state = [{k: v.copy() for k, v in init.items()}]

        def ag_step():
            loss, g = vg(state[0], x, y)
            state[0] = {k: v - LR * g[k] for k, v in state[0].items()}
            return loss

        impls["HIPS autograd"] = (ag_step, float(ag_loss(init, x, y)))
    return impls


# -- timing and memory -------------------------------------------------------------------------
def time_impls(title, impls, repeat, number, skip=()):
    """Best CPU seconds per step of each implementation, all timed in interleaved rounds (each
    round runs every implementation once, so the machine's drifts hit them alike). JAX without
    jit and HIPS autograd, several times slower, run a tenth as many steps per round."""
    ref = impls["NumPy (hand-written)"][1]
    for name, (_, first) in impls.items():
        if not np.isclose(first, ref, rtol=2e-4):
            raise AssertionError(f"{title}: {name} computes loss {first}, NumPy {ref}")
    names = [n for n in impls if n not in skip]
    slow = [n for n in names if "no jit" in n or "autograd" in n]
    fast = [n for n in names if n not in slow]
    clock = time.process_time
    times = dict(
        zip(fast, best_times_interleaved([impls[n][0] for n in fast], repeat, number, clock))
    )
    if slow:
        n_slow = max(1, number // 10)
        t = best_times_interleaved([impls[n][0] for n in slow], repeat, n_slow, clock)
        times.update(zip(slow, t))
    print(f"  {title}: timed", file=sys.stderr)
    return {n: times[n] for n in names}


def peak_memory(args):
    """Peak bytes traced by tracemalloc during one forward+backward (beyond inputs/params)."""
    rng = np.random.default_rng(2)
    sizes = (256,) * 50 + (10,)
    x = rng.standard_normal((256, 256)).astype(np.float32)
    y = rng.integers(0, 10, 256)
    init = init_dense(rng, sizes)
    tparams = [{"w": tg.Tensor(w), "b": tg.Tensor(b)} for w, b in init]
    tbatch = (tg.Tensor(x), tg.Tensor(y))
    g_tg = tg.grad(tg_dense_loss)

    runs = {
        "NumPy (hand-written)": lambda: np_dense_step(init, x, y, 0)[1],
        "tapegrad": lambda: g_tg(tparams, *tbatch),
    }
    ag = optional("autograd")
    if ag is not None:
        import autograd.numpy as anp

        def ag_loss(params, x, y):
            h = x
            for i, (w, b) in enumerate(params):
                h = anp.dot(h, w) + b
                if i < len(params) - 1:
                    h = anp.maximum(h, 0.0)
            return ag_xent(anp, h, y)

        runs["HIPS autograd"] = lambda: ag.grad(ag_loss)(init, x, y)
    peaks = {}
    for name, fn in runs.items():
        fn()  # warm caches (tapegrad compiles nothing, but imports/lazy tables settle)
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        grads = fn()
        peaks[name] = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
        del grads
    return peaks


def versions():
    out = [f"Python {platform.python_version()}", f"NumPy {np.__version__}"]
    for name in ("torch", "jax", "autograd"):
        m = optional(name)
        if m is not None:
            out.append(f"{name} {importlib.metadata.version(name)}")
    return ", ".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=7, help="timing rounds; the best counts")
    p.add_argument("--number", type=int, default=10, help="steps per timing round")
    p.add_argument("--only", default="mlp,cnn,memory", help="comma list of mlp, cnn, memory")
    p.add_argument("--markdown", default=None, help="also write the Markdown section here")
    args = p.parse_args(argv)
    parts = set(args.only.split(","))
    steady = steady_allocator()
    lines = [
        "All numbers are ratios to the hand-written NumPy step measured in the same run "
        f"(single thread pinned to one core, float32, best of {args.repeat} interleaved rounds "
        f"of process CPU time{', freed blocks kept for reuse' if steady else ''}; "
        f"{versions()}). Below 1.0x is faster than NumPy. Reproduce with "
        "`python bench/train_step.py`.",
        "",
    ]
    step_tables = []
    if "mlp" in parts:
        step_tables.append(("MLP 784-512-512-10, batch 128", mlp_impls(args)))
    if "cnn" in parts:
        step_tables.append(
            ("CNN conv16-pool-conv32-pool-linear, batch 64x1x28x28", cnn_impls(args))
        )
    results = {}
    for title, impls in step_tables:
        results[title] = time_impls(title, impls, args.repeat, args.number)
    if results:
        names = []
        for t in results.values():
            names += [n for n in t if n not in names]
        rows = []
        for name in names:
            row = [name]
            for t in results.values():
                row.append(f"{t[name] / t['NumPy (hand-written)']:.2f}x" if name in t else "-")
            rows.append(row)
        lines += [table(rows, ["training step"] + list(results)), ""]
    if "memory" in parts:
        peaks = peak_memory(args)
        base = peaks["NumPy (hand-written)"]
        rows = [[n, f"{v / base:.2f}x"] for n, v in peaks.items()]
        lines += [
            "Peak memory allocated during one forward+backward of a 50-layer width-256 ReLU MLP "
            "(batch 256, float32), traced with `tracemalloc`, as a ratio to hand-written NumPy "
            "(which keeps one activation per layer for the backward pass):",
            "",
            table(rows, ["forward+backward", "peak memory vs NumPy"]),
            "",
        ]
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    return results


if __name__ == "__main__":
    main()
