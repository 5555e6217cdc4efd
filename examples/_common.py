"""Helpers shared by the examples: the digits data split, result lines, loss-curve plots, BLAS
threads, output directories and resumable training state.

Kept apart so each example reads as the training code alone.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import tempfile
import threading

import numpy as np

__all__ = [
    "digits_split",
    "plot_curves",
    "smooth",
    "default_threads",
    "add_run_args",
    "check_run_args",
    "blas_threads",
    "output_dir",
    "stop_on_interrupt",
    "ResumeError",
    "TrainingState",
]


def digits_split(seed: int, test_fraction: float = 0.2):
    """scikit-learn's handwritten digits, scaled to [0, 1], split into train and test sets.

    The 1,797 8x8 grey-level images ship inside scikit-learn (no download). The split is
    stratified by class and fixed by ``seed``.

    Args:
        seed: Seed of the split.
        test_fraction: Share of the images held out for testing (0.2: 360 images).

    Returns:
        ``(x_train, y_train, x_test, y_test)``: float32 images of shape ``(n, 8, 8)`` with
        values in ``[0, 1]``, and int64 labels of shape ``(n,)`` in ``0..9``.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(
        x, y, test_size=test_fraction, random_state=seed, stratify=y
    )
    return x_tr, y_tr, x_te, y_te


def plot_curves(
    path: str, curves: dict, title: str, ylabel: str, xlabel: str = "step", log: bool = False
) -> None:
    """Write a PNG of one or more curves with matplotlib's Agg backend (no display needed).

    Args:
        path: Output file (``.png``); missing parent directories are created.
        curves: ``{label: (xs, ys)}`` or ``{label: ys}`` (then ``xs`` is ``0..len(ys)-1``).
        title, ylabel, xlabel: Axis texts.
        log: Logarithmic x and y axes.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    for label, data in curves.items():
        xs, ys = data if isinstance(data, tuple) else (np.arange(len(data)), data)
        ax.plot(xs, ys, label=label, linewidth=1.2)
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if len(curves) > 1:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    print(f"plot written to {path}")


def smooth(values, window: int = 20) -> np.ndarray:
    """Trailing moving average (for noisy minibatch losses); same length as ``values``."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return v
    c = np.cumsum(np.insert(v, 0, 0.0))
    idx = np.arange(1, v.size + 1)
    lo = np.maximum(0, idx - window)
    return (c[idx] - c[lo]) / (idx - lo)


def default_threads() -> int:
    """The number of CPU cores this process may run on (its affinity mask where the platform
    has one, as in containers and under ``taskset``; otherwise all cores)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def add_run_args(
    p: argparse.ArgumentParser, save_every: int | None, save_every_default: str
) -> None:
    """Add the flags every training example shares: ``--threads``, ``--resume``,
    ``--stop-after`` and ``--save-every`` (default ``save_every``, described in the help as
    ``save_every_default``)."""
    p.add_argument(
        "--threads",
        type=int,
        default=default_threads(),
        help="BLAS threads (set with threadpoolctl); default: the cores this process may use",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue from the training state saved in --out (parameters, optimizer state, "
        "step, keys, loss history): the run goes on exactly as if it had never stopped",
    )
    p.add_argument(
        "--stop-after",
        type=int,
        default=None,
        metavar="STEPS",
        help="stop once this many training steps are done in all, saving the training state "
        "(continue later with --resume)",
    )
    p.add_argument(
        "--save-every",
        type=int,
        default=save_every,
        metavar="STEPS",
        help="save the training state in --out every this many steps (0: only when the run "
        f"stops; default: {save_every_default})",
    )


def check_run_args(p: argparse.ArgumentParser, args) -> None:
    """Reject impossible combinations of :func:`add_run_args`' flags (``p.error`` exits 2)."""
    if args.threads < 1:
        p.error(f"--threads must be at least 1, got {args.threads}")
    if args.stop_after is not None and args.stop_after < 1:
        p.error(f"--stop-after must be at least 1, got {args.stop_after}")
    if args.save_every is not None and args.save_every < 0:
        p.error(f"--save-every must be 0 or more, got {args.save_every}")
    if args.resume and not args.out:
        p.error("--resume needs --out DIR: the directory holding the saved training state")


@contextlib.contextmanager
def blas_threads(n: int):
    """Limit the BLAS libraries NumPy uses (OpenBLAS, MKL, ...) to ``n`` threads inside the
    block, with threadpoolctl. BLAS otherwise starts one thread per core of the machine, even
    where the process may use fewer, and threads fighting over busy cores can make small
    matrix products several times slower."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=n, user_api="blas"):
        yield


@contextlib.contextmanager
def output_dir(out: str | None, prefix: str):
    """``out`` (created if missing), or a temporary directory removed when the block ends."""
    if out:
        os.makedirs(out, exist_ok=True)
        yield out
    else:
        with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
            yield tmp


class stop_on_interrupt:  # noqa: N801 - used like a function: `with stop_on_interrupt() as stop`
    """Turn the first Ctrl-C (SIGINT) inside the block into a request to stop cleanly.

    The training loop checks ``requested`` after each completed step, saves its state and
    ends, so an interrupted run resumes exactly. A second Ctrl-C interrupts at once, as usual.
    Outside the main thread (where signal handlers cannot be set) it does nothing.
    """

    def __init__(self):
        self.requested = False
        self._previous = None

    def _handler(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print("\ninterrupt: stopping after this step (Ctrl-C again to stop at once)", flush=True)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        return False


class ResumeError(ValueError):
    """``--resume`` cannot continue: no saved state, or one from a different run."""


class TrainingState:
    """A run's training state in one file, ``<dir>/<name>.train-state.safetensors``.

    The state is a pytree (parameters, optimizer state, step counter, PRNG keys, the loss
    history) saved with ``tapegrad.io`` (atomically: a crash mid-save keeps the previous
    file), together with ``config``, the settings that shape the run's trajectory. Loading
    refuses a file from a run with other settings, and checks every leaf's structure, shape
    and dtype against a freshly initialized state.

    Args:
        directory: Where the file lives (the example's ``--out``).
        name: The example's name.
        config: ``{setting: value}`` of plain Python values (ints, floats, strings, lists).
    """

    def __init__(self, directory: str, name: str, config: dict):
        self.path = os.path.join(directory, f"{name}.train-state.safetensors")
        self.config = dict(config)

    def save(self, state: dict) -> None:
        """Write ``state`` (a dict pytree) and the config, replacing the previous file."""
        from tapegrad import io

        io.save(self.path, {"config": self.config, "state": state})

    def load(self, fresh: dict, growing: tuple = ()) -> dict:
        """The saved state, checked against ``fresh`` (the state a new run starts from).

        Args:
            fresh: A newly initialized state: the same structure, shapes and dtypes.
            growing: Keys of ``fresh`` whose leaves grow during training (loss histories);
                their shapes are not checked.

        Raises:
            ResumeError: if there is no saved state, the saved run had other settings, or its
                state does not match ``fresh``.
        """
        from tapegrad import io

        if not os.path.exists(self.path):
            raise ResumeError(
                f"--resume: no training state at {self.path}; start the run without --resume "
                "(with the same --out) first"
            )
        try:
            raw = io.load(self.path)
        except io.CheckpointError as e:
            raise ResumeError(f"--resume: {e}") from e
        saved = raw.get("config") if isinstance(raw, dict) else None
        if saved != self.config:
            saved = saved if isinstance(saved, dict) else {}
            diff = ", ".join(
                f"{k}: saved {saved.get(k)!r}, now {self.config.get(k)!r}"
                for k in sorted(set(saved) | set(self.config))
                if saved.get(k) != self.config.get(k)
            )
            raise ResumeError(
                f"--resume: {self.path} is from a run with other settings ({diff}); resume "
                "with the same settings, or start a new run in another --out"
            )
        like = {**fresh, **{k: raw["state"].get(k, fresh[k]) for k in growing}}
        try:
            return io.load(self.path, like={"config": self.config, "state": like})["state"]
        except io.CheckpointError as e:
            raise ResumeError(f"--resume: the saved state does not fit this run: {e}") from e
