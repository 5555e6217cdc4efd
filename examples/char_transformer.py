"""Train a small decoder-only transformer on the Python standard library's own docstrings.

Real English text that every Python installation carries: the documentation strings of a fixed
list of standard-library modules (their functions, classes and methods), collected with
``inspect`` in a deterministic order: a few hundred kilobytes, no download. A character-level
GPT-style model (token and position ``Embedding``, pre-LayerNorm blocks of causal
``MultiHeadAttention`` and a GELU MLP, ``cross_entropy``) learns to predict the next character.
Training is the pure loop: ``value_and_grad`` of a loss written with ``nn.functional_call``,
and an Optax-style ``chain(clip_by_global_norm, adamw)`` with a warmup-cosine schedule.

The training state (parameters, optimizer state, step, data key, loss history) is saved in
``--out`` every 100 steps and when the run stops; ``--resume`` continues from it exactly
(``--stop-after N`` stops after N steps, as does Ctrl-C).

It reports the validation loss in bits per character beside a unigram baseline (the
cross-entropy of the validation text under the training text's character frequencies, what a
model that ignores context achieves at best) and prints a sample.

Run:  python examples/char_transformer.py          (a few minutes on one CPU core)
      python examples/char_transformer.py --quick  (CI: must end below the unigram baseline)
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import math
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    TrainingState,
    add_run_args,
    blas_threads,
    check_run_args,
    output_dir,
    plot_curves,
    run_main,
    smooth,
    stop_on_interrupt,
)

import tapegrad as tg  # noqa: E402
import tapegrad.nn.functional as F  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402
from tapegrad import io, nn, optim  # noqa: E402

# Pure-Python standard-library modules present on every CPython >= 3.10 install, importable
# without side effects. The order is fixed; so is the order of members within each module.
STDLIB_MODULES = (
    "abc argparse ast base64 bisect calendar cmd codecs collections configparser contextlib "
    "copy csv dataclasses datetime decimal difflib dis email.message enum fileinput fnmatch "
    "fractions ftplib functools getopt gettext glob gzip hashlib heapq hmac html.parser "
    "http.client http.cookies http.server imaplib inspect io ipaddress json.decoder "
    "json.encoder locale logging logging.handlers lzma mailbox mimetypes numbers operator "
    "optparse os pathlib pdb pickle pickletools pkgutil platform plistlib poplib pprint "
    "pydoc queue quopri random re reprlib sched secrets selectors shelve shlex shutil smtplib "
    "socket socketserver ssl statistics string struct subprocess symtable tarfile tempfile "
    "textwrap threading timeit tokenize trace traceback types typing unittest.case "
    "unittest.mock urllib.parse urllib.request uuid warnings wave weakref zipfile zipimport"
).split()


def collect_docstrings(modules=STDLIB_MODULES, max_chars: int | None = None) -> str:
    """Docstrings of ``modules`` and of their own functions, classes and methods, as text.

    Members are visited in sorted order; only objects defined in the module itself count, each
    docstring once (``inspect.getdoc`` removes indentation). Characters outside printable
    ASCII are dropped, so the vocabulary is small and the same everywhere.

    Args:
        modules: Module names to import (missing ones are skipped).
        max_chars: Stop once this many characters are collected (``None``: all).

    Returns:
        The docstrings joined by blank lines.

    Raises:
        RuntimeError: if almost nothing was found (Python run with ``-OO`` strips docstrings).
    """
    seen, parts, total = set(), [], 0

    def add(obj):
        nonlocal total
        doc = inspect.getdoc(obj) if obj is not None else None
        if not doc or len(doc) < 40 or doc in seen:
            return
        seen.add(doc)
        text = "".join(c for c in doc if c == "\n" or " " <= c <= "~")
        parts.append(text)
        total += len(text) + 2

    for name in modules:
        # Reading deprecated members (typing.io, ...) warns; their docstrings are text like any.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                mod = importlib.import_module(name)
            except ImportError:
                continue
            add(mod)
            for attr, obj in sorted(vars(mod).items()):
                if attr.startswith("_") or getattr(obj, "__module__", None) != mod.__name__:
                    continue
                if inspect.isclass(obj):
                    add(obj)
                    for meth_name, meth in sorted(vars(obj).items()):
                        if not meth_name.startswith("_") and callable(meth):
                            add(meth)
                elif inspect.isfunction(obj):
                    add(obj)
        if max_chars is not None and total >= max_chars:
            break
    text = "\n\n".join(parts)
    if len(text) < 10_000:
        raise RuntimeError(
            f"collect_docstrings: only {len(text)} characters of docstrings found; is Python "
            "running with -OO (which strips docstrings)?"
        )
    return text[:max_chars] if max_chars is not None else text


class Block(nn.Module):
    """Pre-LayerNorm transformer block: ``x + attn(ln(x))``, then ``x + mlp(ln(x))``."""

    def __init__(self, key, dim: int, heads: int):
        super().__init__()
        k1, k2, k3 = tg.random.split(key, 3)
        self.ln1 = nn.LayerNorm(dim)
        self.attn = nn.MultiHeadAttention(heads, dim, dropout_prob=0.0, key=k1)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim, key=k2)
        self.proj = nn.Linear(4 * dim, dim, key=k3)

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, is_causal=True)
        return x + self.proj(F.gelu(self.fc(self.ln2(x))))


class CharTransformer(nn.Module):
    """Decoder-only transformer over characters: ``(B, T)`` int ids -> ``(B, T, vocab)`` logits.

    Args:
        key: Init key. vocab: Number of characters. context: Longest sequence ``T``.
        dim: Model width. heads: Attention heads (divide ``dim``). layers: Number of blocks.
    """

    def __init__(self, key, vocab: int, context: int, dim: int, heads: int, layers: int):
        super().__init__()
        keys = tg.random.split(key, layers + 3)
        self.context = context
        self.tok = nn.Embedding(vocab, dim, key=keys[0])
        self.pos = nn.Embedding(context, dim, key=keys[1])
        self.blocks = nn.ModuleList([Block(k, dim, heads) for k in keys[3:]])
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, key=keys[2])

    def forward(self, idx):
        t = idx.shape[-1]
        x = self.tok(idx) + self.pos(np.arange(t))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def scaled_init(model: CharTransformer, key) -> dict:
    """GPT-2 style initialization: N(0, 0.02) weights (residual projections scaled by
    ``1/sqrt(2 * layers)``), zero biases, unit LayerNorm gains. Returns the params pytree."""
    n_layers = len(model.blocks)
    flat = model.parameters
    keys = tg.random.split(key, len(flat))
    new = {}
    for k, (name, p) in zip(keys, sorted(flat.items())):
        if name.endswith("bias"):
            new[name] = tnp.zeros(p.shape, dtype=p.dtype)
        elif ".ln" in name or name.startswith("ln_"):
            new[name] = p
        else:
            std = (
                0.02 / math.sqrt(2 * n_layers)
                if name.endswith(("proj.weight", "output.weight"))
                else 0.02
            )
            new[name] = tg.random.normal(k, p.shape, p.dtype, std=std)
    return new


def unflatten(flat: dict) -> dict:
    """``{"a.b": v}`` -> ``{"a": {"b": v}}`` (the nested form of ``Module.params``)."""
    tree: dict = {}
    for name, v in flat.items():
        *path, leaf = name.split(".")
        node = tree
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = v
    return tree


class NextChar(nn.AbstractLLMForwardFn):
    """The decoder-only forward function: ``train`` maps ``(B, T)`` ids to ``(B, T, vocab)``
    logits, ``sample`` a context to the next character's logits ``(B, vocab)``."""

    def train(self, model, batch_data):
        return model(batch_data)

    def sample(self, model, batch_data):
        return model(batch_data)[:, -1]


FORWARD = NextChar()


def loss_fn(params, model, x, y):
    """Mean next-character cross-entropy in nats over a ``(B, T)`` batch."""
    logits = FORWARD(lambda ids: nn.functional_call(model, params, ids)[0], x, mode="train")
    return F.cross_entropy(logits, y)


def get_batch(key, data: np.ndarray, batch: int, context: int):
    """``batch`` random windows of ``data``: inputs ``(B, T)`` and next-character targets."""
    starts = tg.random.randint(key, (batch,), 0, len(data) - context - 1).numpy()
    idx = starts[:, None] + np.arange(context + 1)[None, :]
    win = data[idx]
    return win[:, :-1], win[:, 1:]


def evaluate(model, params, data: np.ndarray, context: int, max_windows: int) -> float:
    """Mean cross-entropy in bits per character over non-overlapping windows of ``data``."""
    n = min(max_windows, (len(data) - 1) // context)
    idx = np.arange(n)[:, None] * context + np.arange(context + 1)[None, :]
    win = data[idx]
    total = 0.0
    for i in range(0, n, 64):
        x, y = win[i : i + 64, :-1], win[i : i + 64, 1:]
        total += float(loss_fn(params, model, x, y)) * len(x)
    return total / n / math.log(2)


def unigram_bits(train: np.ndarray, valid: np.ndarray, vocab: int) -> float:
    """Cross-entropy (bits/char) of ``valid`` under ``train``'s add-one smoothed frequencies."""
    counts = np.bincount(train, minlength=vocab) + 1.0
    logp = np.log2(counts / counts.sum())
    return float(-logp[valid].mean())


def sample(model, params, key, prompt_ids, length: int, temperature: float) -> list:
    """Draw ``length`` characters after ``prompt_ids`` (keyed, so reproducible)."""
    ids = list(prompt_ids)
    for i in range(length):
        ctx = np.asarray(ids[-model.context :])[None, :]
        logits = FORWARD(lambda ids: nn.functional_call(model, params, ids)[0], ctx,
                         mode="sample").numpy()[0].astype(np.float64)
        z = logits / temperature
        p = np.exp(z - z.max())
        p /= p.sum()
        u = float(tg.random.uniform(tg.random.fold_in(key, i), (), np.float64))
        ids.append(int(min(np.searchsorted(np.cumsum(p), u), len(p) - 1)))
    return ids[len(prompt_ids) :]


def build_model(args, vocab: int, key_model, key_init):
    """The model of this example and its initial params pytree (:func:`scaled_init`)."""
    model = CharTransformer(key_model, vocab, args.context, args.dim, args.heads, args.layers)
    return model, unflatten(scaled_init(model, key_init))


def train(args, build=build_model, name: str = "char_transformer") -> dict:
    """Train, evaluate, sample, checkpoint; ``--resume`` continues a run saved in ``--out``.
    ``build(args, vocab, key_model, key_init)`` makes the model and its initial params pytree
    (default :func:`build_model`); ``name`` names the checkpoint and training-state files.

    Returns ``{"validation_bits", "baseline_bits", "losses", "params", "step", "stopped"}``;
    a run that stops early (``--stop-after``, Ctrl-C) has no validation loss and says in
    ``"interrupted"`` whether Ctrl-C stopped it.
    """
    with blas_threads(args.threads), output_dir(args.out, "tapegrad-chars-") as out:
        return _train(args, out, build, name)


def _train(args, out_dir: str, build=build_model, name: str = "char_transformer") -> dict:
    t_data = time.perf_counter()
    text = collect_docstrings(max_chars=args.max_chars)
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = np.fromiter((stoi[c] for c in text), dtype=np.int64, count=len(text))
    split = int(0.9 * len(data))
    train_data, valid_data = data[:split], data[split:]
    baseline = unigram_bits(train_data, valid_data, len(chars))
    print(
        f"corpus: {len(text):,} characters of stdlib docstrings ({len(chars)} distinct), "
        f"{len(train_data):,} train / {len(valid_data):,} validation; "
        f"collected in {time.perf_counter() - t_data:.1f} s"
    )
    print(f"unigram baseline: {baseline:.3f} bits/char")

    key = tg.random.key(args.seed)
    k_model, k_init, k_data, k_sample = tg.random.split(key, 4)
    model, params = build(args, len(chars), k_model, k_init)
    print(f"model: {model.num_parameters():,} parameters, {args.steps} steps")

    schedule = optim.warmup_cosine_schedule(
        args.lr,
        warmup_steps=max(1, args.steps // 20),
        lr_decay_iters=args.steps,
        min_lr=args.lr / 10,
    )
    tx = optim.chain(optim.clip_by_global_norm(1.0), optim.adamw(schedule, weight_decay=0.01))
    vg = tg.value_and_grad(loss_fn)

    # Everything the rest of the run depends on; resuming from it continues the same run.
    settings = ("seed", "steps", "batch_size", "context", "dim", "heads", "layers", "lr")
    ckpt = TrainingState(
        out_dir,
        name,
        {**{k: getattr(args, k) for k in settings}, "max_chars": args.max_chars},
    )
    state = {
        "params": params,
        "opt_state": tx.init(params),
        "step": 0,
        "key_data": k_data,
        "losses": np.zeros(0),  # bits/char per step
        "evals": np.zeros((0, 2)),  # (step, validation bits/char)
    }
    if args.resume:
        state = ckpt.load(state, growing=("losses", "evals"))
        print(f"resumed from {ckpt.path} at step {state['step']} of {args.steps}")
    params, opt_state, k_data = state["params"], state["opt_state"], state["key_data"]
    start = done = state["step"]
    losses = [float(v) for v in state["losses"]]
    evals = [(int(s), float(v)) for s, v in state["evals"]]
    stop = args.steps if args.stop_after is None else min(args.steps, args.stop_after)

    def snapshot():
        return {
            "params": params,
            "opt_state": opt_state,
            "step": done,
            "key_data": k_data,
            "losses": np.asarray(losses, np.float64),
            "evals": np.asarray(evals, np.float64).reshape(-1, 2),
        }

    from tqdm import tqdm

    t0 = time.perf_counter()
    with (
        tqdm(
            total=args.steps, initial=start, desc="char transformer", unit="step", disable=None
        ) as bar,
        stop_on_interrupt() as interrupt,
    ):
        for step in range(start, stop):
            x, y = get_batch(
                tg.random.fold_in(k_data, step), train_data, args.batch_size, args.context
            )
            loss, grads = vg(params, model, x, y)
            updates, opt_state = tx.update(grads, opt_state, params)
            params = optim.apply_updates(params, updates)
            losses.append(float(loss) / math.log(2))
            done = step + 1
            bar.update(1)
            if step % 10 == 0:
                bar.set_postfix(bits=f"{losses[-1]:.3f}")
            if args.eval_every and done % args.eval_every == 0 and done < args.steps:
                evals.append(
                    (done, evaluate(model, params, valid_data, args.context, args.eval_windows))
                )
                bar.write(f"step {done}: validation {evals[-1][1]:.3f} bits/char")
            if args.out and args.save_every and done % args.save_every == 0:
                ckpt.save(snapshot())
            if interrupt.requested:
                break
    seconds = time.perf_counter() - t0
    if args.out:
        ckpt.save(snapshot())
    resumed = f" (resumed at step {start})" if start else ""
    print(f"trained {done - start} steps in {seconds:.1f} s{resumed}")
    if done < args.steps:
        where = (
            f"continue with --resume --out {out_dir}" if args.out else "pass --out DIR to resume"
        )
        print(f"stopped after step {done} of {args.steps}; {where}")
        return {
            "losses": losses,
            "params": params,
            "step": done,
            "stopped": True,
            "interrupted": interrupt.requested,
        }

    val = evaluate(model, params, valid_data, args.context, args.eval_windows)
    evals.append((args.steps, val))
    print(
        f"validation loss: {val:.3f} bits/char (unigram baseline {baseline:.3f}, "
        f"{100 * (1 - val / baseline):.0f}% lower)"
    )

    prompt = "Return the "
    out = sample(
        model,
        params,
        k_sample,
        [stoi[c] for c in prompt if c in stoi],
        args.sample_chars,
        args.temperature,
    )
    print("sample:")
    print(prompt + "".join(chars[i] for i in out))

    path = os.path.join(out_dir, f"{name}.safetensors")
    io.save(path, {"params": params, "chars": "".join(chars)})
    print(f"checkpoint: {path}" + ("" if args.out else " (temporary; keep it with --out DIR)"))
    if args.plot:
        xs = np.arange(1, len(losses) + 1)
        plot_curves(
            args.plot,
            {
                "train (moving average)": (xs, smooth(losses)),
                "validation": ([s for s, _ in evals], [v for _, v in evals]),
                "unigram baseline": (xs[[0, -1]], [baseline, baseline]),
            },
            title="character transformer on stdlib docstrings",
            ylabel="cross-entropy (bits/char)",
        )
    return {
        "validation_bits": val,
        "baseline_bits": baseline,
        "losses": losses,
        "params": params,
        "step": done,
        "stopped": False,
    }


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Train a small character-level decoder-only transformer on the Python "
        "standard library's docstrings; reports validation bits/char beside a unigram "
        "baseline and prints a sample.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--steps", type=int, default=800, help="training steps")
    p.add_argument("--batch-size", type=int, default=32, help="sequences per step")
    p.add_argument("--context", type=int, default=64, help="context length T (characters)")
    p.add_argument("--dim", type=int, default=128, help="model width")
    p.add_argument("--heads", type=int, default=4, help="attention heads")
    p.add_argument("--layers", type=int, default=2, help="transformer blocks")
    p.add_argument("--lr", type=float, default=3e-3, help="peak AdamW learning rate")
    p.add_argument("--max-chars", type=int, default=600_000, help="corpus size cap")
    p.add_argument("--eval-every", type=int, default=250, help="validation every N steps (0: end)")
    p.add_argument("--eval-windows", type=int, default=256, help="validation windows of T chars")
    p.add_argument("--sample-chars", type=int, default=300, help="length of the printed sample")
    p.add_argument("--temperature", type=float, default=0.8, help="sampling temperature")
    p.add_argument("--seed", type=int, default=0, help="seed of init, batches and sample")
    p.add_argument("--quick", action="store_true", help="short run for CI (about a minute)")
    p.add_argument(
        "--out",
        default=None,
        help="directory for the checkpoint and the training state (default: a temporary "
        "directory, removed at the end)",
    )
    p.add_argument("--plot", default=None, metavar="PATH", help="write a loss-curve PNG here")
    add_run_args(p, save_every=100, save_every_default="100")
    args = p.parse_args(argv)
    check_run_args(p, args)
    if args.quick:
        args.steps = min(args.steps, 200)
        args.dim = min(args.dim, 64)
        args.eval_every = 0
        args.eval_windows = min(args.eval_windows, 64)
        args.sample_chars = min(args.sample_chars, 120)
    return args


def main(argv=None) -> int:
    """Run the script; the exit status: 0, 2 when ``--resume`` cannot continue, 130 after
    Ctrl-C (the training state saved, see :class:`stop_on_interrupt`)."""
    return run_main(parse_args, train, argv)


if __name__ == "__main__":
    raise SystemExit(main())
