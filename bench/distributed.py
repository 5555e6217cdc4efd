"""Data-parallel training on MPI ranks against one process: throughput and allreduce cost.

Workload: the MLP 784-512-512-10 (ReLU, float32, 669,706 parameters in 6 leaves) trained with
softmax cross-entropy and SGD on a global batch of 256 synthetic examples, one BLAS thread per
process (not pinned: on a machine shared with other work, a pinned process cannot move off a
busy core). One process takes the whole global batch each step; ``--ranks`` processes
launched with ``mpiexec`` each take their part of it (``dist.shard``) and average the
gradients with ``dist.allreduce_mean()`` (one fused ``MPI_Allreduce`` of all gradients per
step). With ``--jit`` the gradient and the SGD update each run as a ``tg.jit`` program, and
the ranks call ``dist.allreduce(grads, "mean")`` between the two.

Reported, as ratios measured in one run (rounds alternate between the two set-ups, and within a
round of the ranks, passes with and without the allreduce alternate; each keeps its best):

- throughput (examples per second) of the ranks together over one process, and the same with
  the allreduce left out (each rank stepping on its own part: the ceiling that the per-rank
  compute allows);
- the allreduce's share of the ranks' step time, both as measured inside the training step
  (waiting for the slower rank included) and alone (after a barrier, ranks in step);
- in one process without MPI, the step time on the global batch over the step time on one
  rank's part of it, for tapegrad's step and for a hand-written NumPy step: the ceiling that
  the per-step costs which do not shrink with the batch leave;
- bytes each rank passes to MPI per step and the number of MPI calls per step;
- whether the ranks' parameters after the timed steps equal one process's (float rounding).

Run: ``python bench/distributed.py [--ranks 2] [--steps 20] [--repeat 5] [--jit]
[--markdown FILE]``.
(``--worker`` is the part each rank runs; the script launches it itself.)
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"):
    os.environ[_v] = "1"  # one BLAS thread per process, before NumPy starts its pool

import argparse  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import best_times_interleaved, np_dense_step, steady_allocator, table  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.nn.functional as F  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402
from tapegrad import optim  # noqa: E402

SIZES = (784, 512, 512, 10)
GLOBAL_BATCH = 256
LR = 0.01


def init_params(seed: int = 0) -> list:
    keys = tg.random.split(tg.random.key(seed), len(SIZES) - 1)
    return [
        {
            "w": tg.random.normal(k, (a, b), std=float(np.sqrt(2.0 / a))),
            "b": tnp.zeros(b, dtype=np.float32),
        }
        for k, a, b in zip(keys, SIZES[:-1], SIZES[1:])
    ]


def loss_fn(params, x, y):
    *hidden, last = params
    for layer in hidden:
        x = tnp.maximum(x @ layer["w"] + layer["b"], 0.0)
    return F.cross_entropy(x @ last["w"] + last["b"], y)


def data(steps: int):
    g = np.random.default_rng(1)
    n = GLOBAL_BATCH * steps
    return g.standard_normal((n, SIZES[0])).astype(np.float32), g.integers(0, 10, n)


#: ``--jit``: the gradient and the SGD update each run as a ``tg.jit`` compiled program, with
#: ``dist.allreduce(grads, "mean")`` between the two (a collective is not traced), instead of
#: eager ``value_and_grad`` and ``optim.chain(dist.allreduce_mean(), optim.sgd(LR))``.
JIT = False


def train(params, x, y, batches, allreduce: bool):
    """SGD steps over ``batches`` (index arrays), the gradients averaged across ranks when
    ``allreduce``; returns the params and the seconds per step."""
    from tapegrad import distributed as dist

    grad_fn = tg.value_and_grad(loss_fn)
    if JIT:
        grad_fn = tg.jit(grad_fn)
        tx = optim.sgd(LR)
        update = tg.jit(lambda g, s, p: optim.apply_gradients(tx, g, s, p))
    else:
        tx = optim.chain(dist.allreduce_mean(), optim.sgd(LR)) if allreduce else optim.sgd(LR)

        def update(g, s, p):
            return optim.apply_gradients(tx, g, s, p)

    state = tx.init(params)
    t0, c0 = time.perf_counter(), time.process_time()
    for idx in batches:
        _, grads = grad_fn(params, tg.Tensor(x[idx]), tg.Tensor(y[idx]))
        if JIT and allreduce:
            grads = dist.allreduce(grads, "mean")
        params, state = update(grads, state, params)
    wall = time.perf_counter() - t0
    global CORE_SHARE
    CORE_SHARE = (time.process_time() - c0) / wall  # 1.0: the process had a core to itself
    return params, wall / len(batches)


CORE_SHARE = 1.0


def run_single(steps: int):
    x, y = data(steps)
    batches = [np.arange(s * GLOBAL_BATCH, (s + 1) * GLOBAL_BATCH) for s in range(steps)]
    train(init_params(), x, y, batches[:2], False)  # warm up
    return train(init_params(), x, y, batches, False)


def one_process_scaling(ranks: int, repeat: int) -> dict:
    """Step time on the global batch over step time on one rank's part of it, in one process
    (no MPI; interleaved rounds): the ceiling of ``ranks`` ranks' throughput that the per-step
    costs not shrinking with the batch leave, for tapegrad's step and for hand-written NumPy's
    (in-place update)."""
    x, y = data(1)
    part = GLOBAL_BATCH // ranks
    params = init_params()
    tx = optim.sgd(LR)
    state = tx.init(params)
    grad_fn = tg.value_and_grad(loss_fn)
    update = lambda g, s, p: optim.apply_gradients(tx, g, s, p)  # noqa: E731
    if JIT:
        grad_fn, update = tg.jit(grad_fn), tg.jit(update)

    def tg_step(n):
        _, grads = grad_fn(params, tg.Tensor(x[:n]), tg.Tensor(y[:n]))
        update(grads, state, params)

    np_params = [(layer["w"].numpy().copy(), layer["b"].numpy().copy()) for layer in params]
    fns = [lambda: tg_step(GLOBAL_BATCH), lambda: tg_step(part),
           lambda: np_dense_step(np_params, x, y, LR), lambda: np_dense_step(np_params, x[:part],
                                                                       y[:part], LR)]
    t = best_times_interleaved(fns, repeat, 5)
    return {"tapegrad": t[0] / t[1], "numpy": t[2] / t[3]}


def worker(steps: int, out: str) -> None:
    """What every rank runs: the timed steps, then the allreduce alone; rank 0 reports."""
    from tapegrad import distributed as dist

    dist.init()
    x, y = data(steps)
    batches = [
        dist.shard(np.arange(s * GLOBAL_BATCH, (s + 1) * GLOBAL_BATCH)) for s in range(steps)
    ]
    train(dist.broadcast(init_params()), x, y, batches[:2], True)  # warm up (and the check)
    per_step = no_comm = float("inf")
    for _ in range(3):  # alternating passes with and without the allreduce; each keeps its best
        dist.barrier()
        dist.comm_stats(reset=True)
        got, t = train(dist.broadcast(init_params()), x, y, batches, True)
        stats = dist.comm_stats(reset=True)
        t = max(dist.allgather(t))  # the slower rank's
        if t < per_step:
            params, per_step, s = got, t, stats
            share = min(dist.allgather(CORE_SHARE))  # the least of the ranks'
        # The same steps with the allreduce left out (each rank on its own): the ceiling.
        dist.barrier()
        _, t = train(dist.broadcast(init_params()), x, y, batches, False)
        no_comm = min(no_comm, max(dist.allgather(t)))
    in_step = s["allreduce_seconds"] / steps
    # The allreduce alone: ranks in step after a barrier, the same gradients.
    grads = tg.grad(loss_fn)(params, tg.Tensor(x[batches[0]]), y[batches[0]])
    alone, alone_mpi = float("inf"), 0.0
    for _ in range(10):
        dist.barrier()
        dist.comm_stats(reset=True)
        t0 = time.perf_counter()
        dist.allreduce(grads, "mean")
        t = time.perf_counter() - t0
        if t < alone:
            alone, alone_mpi = t, dist.comm_stats()["allreduce_seconds"]
    if dist.rank() == 0:
        np.savez(out, *[leaf.numpy() for leaf in tg.tree.tree_leaves(params)])
        report = {
            "ranks": dist.world_size(),
            "per_step": per_step,
            "allreduce_in_step": in_step,
            "allreduce_alone": alone,
            "allreduce_alone_mpi": alone_mpi,
            "bytes_per_step": s["allreduce_bytes"] / steps,
            "calls_per_step": (s["allreduce_calls"] + s["check_calls"]) / steps,
            "core_share": share,
            "per_step_no_comm": no_comm,
        }
        print("RESULT " + json.dumps(report), flush=True)


def mpiexec(n: int) -> list:
    local = pathlib.Path(sys.executable).with_name("mpiexec")
    exe = str(local) if local.exists() else shutil.which("mpiexec") or shutil.which("mpirun")
    if exe is None:
        raise SystemExit('bench/distributed.py: no mpiexec; pip install "tapegrad[distributed]"')
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    extra = ["--oversubscribe"] if re.search(r"Open MPI|OpenRTE|PRRTE", version) else []
    return [exe, "-n", str(n), *extra]


def run_ranks(n: int, steps: int, out: str) -> dict:
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [*mpiexec(n), sys.executable, os.path.abspath(__file__), "--worker",
           *(["--jit"] if JIT else [])]
    res = subprocess.run(
        [*cmd, "--steps", str(steps), "--out", out], capture_output=True, text=True, env=env
    )
    if res.returncode != 0:
        raise SystemExit(f"the {n}-rank job failed:\n{res.stdout}{res.stderr}")
    line = next(s for s in res.stdout.splitlines() if s.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=2, help="MPI ranks of the data-parallel job")
    p.add_argument("--steps", type=int, default=20, help="timed training steps per round")
    p.add_argument("--repeat", type=int, default=5, help="rounds per set-up (best kept)")
    p.add_argument("--markdown", default=None, help="also write the table to this file")
    p.add_argument("--jit", action="store_true",
                   help="run the gradient and the update as tg.jit programs, in every set-up")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    global JIT
    JIT = args.jit
    steady_allocator()
    if args.worker:
        worker(args.steps, args.out)
        return 0
    if GLOBAL_BATCH % args.ranks:
        raise SystemExit(f"--ranks must divide the global batch {GLOBAL_BATCH}")
    best_single, best_ranks = None, None
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "params.npz")
        for _ in range(args.repeat):  # alternate, so drifts of the machine hit both alike
            params, per_step = run_single(args.steps)
            if best_single is None or per_step < best_single[1]:
                best_single = (params, per_step, CORE_SHARE)
            r = run_ranks(args.ranks, args.steps, out)
            if best_ranks is None or r["per_step"] < best_ranks["per_step"]:
                best_ranks = r
        saved = np.load(out)
        got = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    ref = [leaf.numpy() for leaf in tg.tree.tree_leaves(best_single[0])]
    diff = max(float(np.max(np.abs(a - b))) for a, b in zip(got, ref))
    scaling = one_process_scaling(args.ranks, args.repeat)
    single, r = best_single[1], best_ranks
    n_params = sum(a * b + b for a, b in zip(SIZES[:-1], SIZES[1:]))
    rows = [
        [f"throughput, {r['ranks']} ranks / 1 process", f"{single / r['per_step']:.2f}x"],
        [
            f"throughput, {r['ranks']} ranks without the allreduce / 1 process (the ceiling)",
            f"{single / r['per_step_no_comm']:.2f}x",
        ],
        [
            f"one process: step time on the global batch / on 1/{r['ranks']} of it, tapegrad; "
            "hand-written NumPy",
            f"{scaling['tapegrad']:.2f}x; {scaling['numpy']:.2f}x",
        ],
        [
            "MPI_Allreduce / step time, in the steps (waiting for the other rank included)",
            f"{r['allreduce_in_step'] / r['per_step']:.1%}",
        ],
        [
            "dist.allreduce / step time, alone (packing included)",
            f"{r['allreduce_alone'] / r['per_step']:.1%} "
            f"(of which MPI_Allreduce {r['allreduce_alone_mpi'] / r['per_step']:.1%})",
        ],
        ["bytes per rank per step", f"{r['bytes_per_step']:,.0f} ({n_params:,} float32)"],
        ["MPI calls per step", f"{r['calls_per_step']:g}"],
        ["parameters vs 1 process, max abs difference", f"{diff:.1e}"],
        [
            "CPU time / wall time (1.0: a core to itself), 1 process; least of the ranks",
            f"{best_single[2]:.2f}; {r['core_share']:.2f}",
        ],
    ]
    text = (
        f"MLP {'-'.join(map(str, SIZES))}, global batch {GLOBAL_BATCH}, SGD, float32, "
        f"{'gradient and update under tg.jit' if JIT else 'eager'}, one BLAS "
        f"thread per process; {args.steps} steps per round, best of {args.repeat} rounds.\n\n"
        + table(rows, ["measure", "value"])
    )
    print(text)
    if args.markdown:
        pathlib.Path(args.markdown).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
