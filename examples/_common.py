"""Helpers shared by the examples: the digits data split, result lines, loss-curve plots, BLAS
threads, output directories, Ctrl-C, resumable training state and the ``--distributed`` set-up.

Kept apart so each example reads as the training code alone.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import tempfile
import threading

import numpy as np

__all__ = [
    "digits_split",
    "plot_curves",
    "smooth",
    "add_run_args",
    "check_run_args",
    "blas_threads",
    "output_dir",
    "stop_on_interrupt",
    "INTERRUPTED",
    "interrupted",
    "run_main",
    "ResumeError",
    "TrainingState",
    "distributed",
    "lead_print",
    "agree",
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


def add_run_args(
    p: argparse.ArgumentParser,
    save_every: int | None,
    save_every_default: str,
    distributed: bool = False,
) -> None:
    """Add the flags every training example shares: ``--threads`` (default 1), ``--resume``,
    ``--stop-after`` and ``--save-every`` (default ``save_every``, described in the help as
    ``save_every_default``); with ``distributed``, also ``--distributed``."""
    each = " in each rank under --distributed" if distributed else ""
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help=f"BLAS threads{each} (set with threadpoolctl). One is fastest for these small "
        "matrices and stays fast on a busy machine; results are reproducible for a given "
        "number of threads (another number may change the last digits)",
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
    if distributed:
        p.add_argument(
            "--distributed",
            action="store_true",
            help="data-parallel across MPI ranks (mpiexec -n N python ... --distributed): "
            "--batch-size is the global batch, divided evenly among the ranks, and every rank "
            "applies the same averaged step. Rank 0 alone prints, evaluates and writes in "
            "--out; with --resume every rank loads the same saved state, so --out must be on a "
            "file system all ranks share, and the number of ranks must be the saved run's. "
            "--stop-after and Ctrl-C stop every rank after the same step",
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
    block, with threadpoolctl. BLAS otherwise starts one thread per core of the machine, and
    threads fighting over busy cores (other programs, other ranks) make the examples' small
    matrix products many times slower; a BLAS with several threads may also sum in another
    order, which changes the last digits of the results."""
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
    ends, so an interrupted run resumes exactly; the script then exits with status
    :data:`INTERRUPTED` (130). A second Ctrl-C interrupts at once, as usual (also status 130).
    Outside the main thread (where signal handlers cannot be set) it does nothing.

    Args:
        verbose: Print that the run will stop (False on the ranks other than 0 of a
            data-parallel run, which ``mpiexec`` also passes the Ctrl-C to).
    """

    def __init__(self, verbose: bool = True):
        self.requested = False
        self.verbose = verbose
        self._previous = None

    def _handler(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        if self.verbose:
            print(
                "\ninterrupt: stopping after this step (Ctrl-C again to stop at once)", flush=True
            )

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        return False


#: The exit status of a run stopped by Ctrl-C: 128 + SIGINT, as shells report a program that
#: SIGINT ended, so that a script or a job scheduler running the example sees the interruption.
INTERRUPTED = 130


def interrupted(args) -> int:
    """Called by a script's ``main`` when Ctrl-C raised ``KeyboardInterrupt`` (a second Ctrl-C
    in the training loop, or one outside it): says so on stderr, without a traceback, and
    returns :data:`INTERRUPTED`.

    Under ``--distributed`` it raises the interrupt again instead: ``tapegrad.distributed``'s
    exception hook then ends every rank at once (``MPI_Abort``), where a rank that returned
    would leave the others waiting in their next collective.
    """
    if getattr(args, "distributed", False):
        raise KeyboardInterrupt
    print("interrupted", file=sys.stderr)
    return INTERRUPTED


def run_main(parse_args, train, argv=None) -> int:
    """A training script's ``main``: ``train(parse_args(argv))``; the exit status: 0, 2 when
    ``--resume`` cannot continue (:class:`ResumeError`), 130 after Ctrl-C (the training state
    saved, see :class:`stop_on_interrupt`)."""
    args = parse_args(argv)
    try:
        result = train(args)
    except ResumeError as e:
        if e.report:  # in a --distributed run, every rank raises it and rank 0 says why
            print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # a second Ctrl-C, or one outside the training loop
        return interrupted(args)
    return INTERRUPTED if result.get("interrupted") else 0


class ResumeError(ValueError):
    """``--resume`` cannot continue: no saved state, or one from a different run.

    ``report`` is False on the ranks other than 0 of a data-parallel run, where every rank
    raises it and rank 0 alone needs to say why.
    """

    def __init__(self, message: str, report: bool = True):
        super().__init__(message)
        self.report = report


class TrainingState:
    """A run's training state in one file, ``<dir>/<name>.train-state.safetensors``.

    The state is a pytree (parameters, optimizer state, step counter, PRNG keys, the loss
    history) saved with ``tapegrad.io`` (atomically: a crash mid-save keeps the previous
    file), together with ``config``, the settings that shape the run's trajectory. Loading
    refuses a file from a run with other settings, and checks every leaf's structure, shape
    and dtype against a freshly initialized state.

    In a data-parallel run (``dist`` given) the ranks hold the same state, so rank 0 alone
    writes it; on resuming, every rank reads the file (in a directory all ranks share), and
    the ranks compare digests of what they read, so that all continue from the same state.
    Should any rank fail to read it, or read another state, every rank raises
    :class:`ResumeError`, so no rank is left waiting.

    Args:
        directory: Where the file lives (the example's ``--out``).
        name: The example's name.
        config: ``{setting: value}`` of plain Python values (ints, floats, strings, lists).
        dist: ``tapegrad.distributed``, initialized, in a data-parallel run; else ``None``.
    """

    def __init__(self, directory: str, name: str, config: dict, dist=None):
        self.path = os.path.join(directory, f"{name}.train-state.safetensors")
        self.config = dict(config)
        self.dist = dist

    def save(self, state: dict) -> None:
        """Write ``state`` (a dict pytree) and the config, replacing the previous file (on
        rank 0 only in a data-parallel run; the other ranks return at once)."""
        from tapegrad import io

        if self.dist is None or self.dist.rank() == 0:
            io.save(self.path, {"config": self.config, "state": state})

    def load(self, fresh: dict, growing: tuple = ()) -> dict:
        """The saved state, checked against ``fresh`` (the state a new run starts from).

        In a data-parallel run this is a collective: every rank must call it.

        Args:
            fresh: A newly initialized state: the same structure, shapes and dtypes.
            growing: Keys of ``fresh`` whose leaves grow during training (loss histories);
                their shapes are not checked.

        Raises:
            ResumeError: if there is no saved state, the saved run had other settings, or its
                state does not match ``fresh``; in a data-parallel run, on every rank if any
                rank cannot read it, or if the ranks read different states.
        """
        if self.dist is None:
            return self._read(fresh, growing)
        dist = self.dist
        error, state = None, fresh
        try:
            state = self._read(fresh, growing)
        except ResumeError as e:
            error = e
        failed = int(dist.allreduce(np.int64(error is not None), "sum"))
        if failed:  # every rank raises; rank 0 says why, and so do the ranks that failed alone
            everyone = failed == dist.world_size()
            report = dist.rank() == 0 or (error is not None and not everyone)
            if error is None:
                error = (
                    f"--resume: {failed} of {dist.world_size()} ranks could not read {self.path}"
                )
            shared = "" if everyone else " (--out must be a directory all ranks share)"
            raise ResumeError(f"{error}{shared}", report=report)
        digests = dist.allgather(_digest(state), name="digest").reshape(dist.world_size(), -1)
        if (digests != digests[0]).any():  # not one file: some rank read an older copy
            raise ResumeError(
                f"--resume: the ranks read different training states from {self.path} (--out "
                "must be a directory all ranks share)",
                report=dist.rank() == 0,
            )
        return state

    def _read(self, fresh: dict, growing: tuple) -> dict:
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


def _digest(state) -> np.ndarray:
    """SHA-256 of a pytree's structure and leaves (shapes, dtypes, bytes): 32 uint8."""
    import hashlib

    import tapegrad as tg

    h = hashlib.sha256(str(tg.tree.tree_structure(state)).encode())
    for leaf in tg.tree.tree_leaves(state):
        arr = np.ascontiguousarray(leaf.numpy() if isinstance(leaf, tg.Tensor) else leaf)
        h.update(f"{arr.shape}{arr.dtype.str}".encode())
        h.update(arr.tobytes())
    return np.frombuffer(h.digest(), np.uint8)


def distributed(args):
    """``tapegrad.distributed``, initialized, when ``args.distributed`` is set; else ``None``.

    Run under ``mpiexec -n N``: every rank trains on its part of each global batch of
    ``args.batch_size`` examples, which must therefore divide evenly among the ``N`` ranks
    (otherwise every rank exits with that message, as it does without mpi4py).
    """
    if not getattr(args, "distributed", False):
        return None
    from tapegrad import distributed as dist

    try:
        dist.init()
    except ImportError as e:  # mpi4py missing: say what to install, without a traceback
        raise SystemExit(f"--distributed: {e}") from e
    if args.batch_size % dist.world_size():
        raise SystemExit(
            f"--batch-size {args.batch_size} must be divisible by the {dist.world_size()} ranks"
        )
    return dist


def lead_print(dist):
    """``print`` on rank 0 (and in one process); on the other ranks a function that prints
    nothing, so that a data-parallel run reports once."""
    if dist is None or dist.rank() == 0:
        return print
    return lambda *args, **kwargs: None


def agree(dist, loss, stop: bool) -> tuple:
    """This step's loss and whether to stop after it, the same on every rank.

    Args:
        dist: ``tapegrad.distributed``, initialized, or ``None`` in one process.
        loss: This rank's loss (a scalar Tensor or number): the mean over its part of the batch.
        stop: Whether this rank was asked to stop (Ctrl-C, see :class:`stop_on_interrupt`).

    Returns:
        ``(loss, stop)``: in one process ``(float(loss), stop)``; in a data-parallel run, with
        one small allreduce, the mean of the ranks' losses (the global batch's mean loss, the
        parts being equal) and whether any rank was asked to stop, so that every rank stops
        after the same step.
    """
    if dist is None:
        return float(loss), bool(stop)
    total = dist.allreduce(np.array([float(loss), float(bool(stop))]), "sum", name="step")
    return float(total[0]) / dist.world_size(), bool(total[1] > 0)
