"""Train a pure-pytree MLP on scikit-learn's handwritten digits with tapegrad.

The main job, end to end: the 1,797 8x8 digit images that ship inside scikit-learn (no
download), a multilayer perceptron whose parameters are a plain pytree (a list of
``{"w", "b"}`` dicts), gradients from ``tg.value_and_grad(loss_fn)(params, batch)``, and a pure
Adam update (``tapegrad.optim.adam`` + ``apply_updates``). Minibatches come from a keyed
permutation, so a run is reproducible from ``--seed``. After training it prints the accuracy on
a held-out 20% split, saves the parameters with ``tapegrad.io``, loads them back and prints
the accuracy again.

The training state (parameters, Adam state, step, data-order key, loss history) is saved in
``--out`` once per epoch and when the run stops; ``--resume`` continues from it exactly, as
if the run had never stopped (``--stop-after N`` stops after N steps, as does Ctrl-C).

With ``--distributed`` under ``mpiexec -n N`` it trains data-parallel (``tapegrad.distributed``):
each rank takes its part of every global batch, and the gradients are averaged across the ranks
before Adam, so the steps are one process's (up to float rounding). Rank 0 reports and writes;
``--resume`` works the same way, every rank continuing from the saved state.

Run:  python examples/digits_mlp.py            (about 97-99% test accuracy)
      python examples/digits_mlp.py --quick    (a few seconds; CI asserts >= 95%)
      python examples/digits_mlp.py --out ckpt --stop-after 500; then add --resume
      mpiexec -n 2 python examples/digits_mlp.py --distributed   (data-parallel, same result)
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    TrainingState,
    add_run_args,
    agree,
    blas_threads,
    check_run_args,
    digits_split,
    distributed,
    lead_print,
    output_dir,
    plot_curves,
    run_main,
    smooth,
    stop_on_interrupt,
)

import tapegrad as tg  # noqa: E402
import tapegrad.nn.functional as F  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402
from tapegrad import io, optim  # noqa: E402


def init_mlp(key, sizes) -> list:
    """He-normal weights and zero biases for a ReLU MLP: a list of ``{"w", "b"}`` dicts.

    Layer ``i`` has ``w`` of shape ``(sizes[i], sizes[i+1])`` and ``b`` of shape
    ``(sizes[i+1],)``, float32. ``key`` (from ``tapegrad.random``) fixes the draw.
    """
    params = []
    keys = tg.random.split(key, len(sizes) - 1)
    for k, n_in, n_out in zip(keys, sizes[:-1], sizes[1:]):
        w = tg.random.normal(k, (n_in, n_out), std=float(np.sqrt(2.0 / n_in)))
        params.append({"w": w, "b": tnp.zeros(n_out, dtype=np.float32)})
    return params


def mlp(params, x):
    """Logits of shape ``(batch, classes)`` for images ``x`` of shape ``(batch, features)``."""
    *hidden, last = params
    for layer in hidden:
        x = tnp.maximum(x @ layer["w"] + layer["b"], 0.0)
    return x @ last["w"] + last["b"]


def loss_fn(params, batch):
    x, y = batch
    return F.cross_entropy(mlp(params, x), y)  # mean softmax cross-entropy, nats


def accuracy(params, x, y, batch: int = 512) -> float:
    """Share of ``x`` classified as ``y`` (eager forward passes, no tape)."""
    hits = 0
    for i in range(0, len(x), batch):
        logits = mlp(params, tg.Tensor(x[i : i + batch])).numpy()
        hits += int((logits.argmax(axis=-1) == y[i : i + batch]).sum())
    return hits / len(x)


def train(args) -> dict:
    """Train, evaluate, checkpoint; ``--resume`` continues a run saved in ``--out``.

    Returns ``{"accuracy", "reloaded_accuracy", "losses", "params", "step", "stopped"}``;
    a run that stops early (``--stop-after``, Ctrl-C) has no accuracies and says in
    ``"interrupted"`` whether Ctrl-C stopped it; the ranks other than 0 of a ``--distributed``
    run have no accuracies either.
    """
    dist = distributed(args)  # None in one process
    with blas_threads(args.threads), output_dir(args.out, "tapegrad-digits-") as out:
        return _train(args, out, dist)


def _train(args, out: str, dist) -> dict:
    lead = dist is None or dist.rank() == 0  # rank 0 reports, evaluates and saves
    say = lead_print(dist)  # print on rank 0 only
    x_tr, y_tr, x_te, y_te = digits_split(args.seed)
    x_tr, x_te = x_tr.reshape(len(x_tr), -1), x_te.reshape(len(x_te), -1)
    sizes = (x_tr.shape[1], *args.hidden, 10)
    key_init, key_batches = tg.random.split(tg.random.key(args.seed))
    params = init_mlp(key_init, sizes)
    tx = optim.adam(args.lr)
    if dist:
        params = dist.broadcast(params, root=0)  # every rank starts from rank 0's parameters
        tx = optim.chain(dist.allreduce_mean(), tx)  # gradients averaged across ranks
    step = tg.value_and_grad(loss_fn)
    steps_per_epoch = len(x_tr) // args.batch_size
    total = args.epochs * steps_per_epoch

    # Everything the rest of the run depends on; resuming from it continues the same run.
    ckpt = TrainingState(
        out,
        "digits_mlp",
        {
            "seed": args.seed,
            "hidden": list(args.hidden),
            "batch_size": args.batch_size,
            "lr": args.lr,
            "ranks": dist.world_size() if dist else 1,
        },
        dist,
    )
    state = {
        "params": params,
        "opt_state": tx.init(params),
        "step": 0,
        "key_batches": key_batches,
        "losses": np.zeros(0),
    }
    if args.resume:
        state = ckpt.load(state, growing=("losses",))
        say(f"resumed from {ckpt.path} at step {state['step']} of {total}")
    params, opt_state, key_batches = state["params"], state["opt_state"], state["key_batches"]
    start = done = state["step"]
    losses = [float(v) for v in state["losses"]]
    stop = total if args.stop_after is None else min(total, args.stop_after)
    save_every = steps_per_epoch if args.save_every is None else args.save_every

    def snapshot():
        return {
            "params": params,
            "opt_state": opt_state,
            "step": done,
            "key_batches": key_batches,
            "losses": np.asarray(losses, np.float64),
        }

    from tqdm import tqdm

    t0 = time.perf_counter()
    perm_epoch = None
    stopping = False
    with (
        tqdm(
            total=total,
            initial=start,
            desc="digits MLP",
            unit="step",
            disable=None if lead else True,
        ) as bar,
        stop_on_interrupt(verbose=lead) as interrupt,
    ):
        for s in range(start, stop):
            epoch, i = divmod(s, steps_per_epoch)
            if epoch != perm_epoch:
                # A keyed permutation: the same (seed, epoch) always gives the same batches.
                perm = tg.random.permutation(tg.random.fold_in(key_batches, epoch), len(x_tr))
                perm, perm_epoch = perm.numpy(), epoch
            idx = perm[i * args.batch_size : (i + 1) * args.batch_size]
            if dist:
                idx = dist.shard(idx)  # this rank's part of the global batch
            batch = (tg.Tensor(x_tr[idx]), y_tr[idx])
            loss, grads = step(params, batch)
            updates, opt_state = tx.update(grads, opt_state, params)
            params = optim.apply_updates(params, updates)
            loss, stopping = agree(dist, loss, interrupt.requested)  # the same on every rank
            losses.append(loss)
            done = s + 1
            bar.update(1)
            if i % 10 == 0:
                bar.set_postfix(loss=f"{losses[-1]:.4f}", epoch=epoch + 1)
            if args.out and save_every and done % save_every == 0:
                ckpt.save(snapshot())
            if stopping:
                break
    seconds = time.perf_counter() - t0
    if args.out:
        ckpt.save(snapshot())
    resumed = f" (resumed at step {start})" if start else ""
    say(f"trained {done - start} steps in {seconds:.1f} s{resumed}")
    if done < total:
        where = f"continue with --resume --out {out}" if args.out else "pass --out DIR to resume"
        say(f"stopped after step {done} of {total}; {where}")
        return {
            "losses": losses,
            "params": params,
            "step": done,
            "stopped": True,
            "interrupted": stopping,
        }
    if not lead:
        return {"losses": losses, "params": params, "step": done, "stopped": False}

    acc = accuracy(params, x_te, y_te)
    print(f"last epoch's mean loss {np.mean(losses[-steps_per_epoch:]):.4f}")
    print(f"test accuracy: {100 * acc:.1f}%")

    # Save with tapegrad.io, load back (checked against the live structure), evaluate again.
    path = os.path.join(out, "digits_mlp.safetensors")
    io.save(path, params)
    reloaded = io.load(path, like=params)
    acc2 = accuracy(reloaded, x_te, y_te)
    print(f"checkpoint: {path}" + ("" if args.out else " (temporary; keep it with --out DIR)"))
    print(f"reloaded test accuracy: {100 * acc2:.1f}%")
    if args.plot:
        plot_curves(
            args.plot,
            {"minibatch": losses, "moving average (20)": smooth(losses)},
            title=f"digits MLP {'-'.join(map(str, sizes))}, Adam lr={args.lr}",
            ylabel="cross-entropy (nats)",
        )
    return {
        "accuracy": acc,
        "reloaded_accuracy": acc2,
        "losses": losses,
        "params": params,
        "step": done,
        "stopped": False,
    }


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Train an MLP on scikit-learn's 8x8 digits with tapegrad (pure pytree "
        "params, value_and_grad, optim.adam); prints the test accuracy on a held-out 20%.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--epochs", type=int, default=30, help="passes over the training set")
    p.add_argument("--batch-size", type=int, default=32, help="minibatch size")
    p.add_argument("--hidden", type=int, nargs="+", default=[512], help="hidden layer widths")
    p.add_argument("--lr", type=float, default=2e-3, help="Adam learning rate")
    p.add_argument("--seed", type=int, default=0, help="seed of the split, init and batches")
    p.add_argument("--quick", action="store_true", help="short run for CI (a few seconds)")
    p.add_argument(
        "--out",
        default=None,
        help="directory for the checkpoint and the training state (default: a temporary "
        "directory, removed at the end)",
    )
    p.add_argument("--plot", default=None, metavar="PATH", help="write a loss-curve PNG here")
    add_run_args(p, save_every=None, save_every_default="once per epoch", distributed=True)
    args = p.parse_args(argv)
    check_run_args(p, args)
    if args.quick:
        args.epochs = min(args.epochs, 10)
    return args


def main(argv=None) -> int:
    """Run the script; the exit status: 0, 2 when ``--resume`` cannot continue, 130 after
    Ctrl-C (the training state saved, see :class:`stop_on_interrupt`)."""
    return run_main(parse_args, train, argv)


if __name__ == "__main__":
    raise SystemExit(main())
