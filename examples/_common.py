"""Helpers shared by the examples: the digits data split, result lines, loss-curve plots and the
``--distributed`` setup.

Kept apart so each example reads as the training code alone. Only :func:`distributed` uses
tapegrad.
"""

from __future__ import annotations

import os

import numpy as np


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


def distributed(args):
    """``tapegrad.distributed``, initialized, when ``args.distributed`` is set; else ``None``.

    Run under ``mpirun -n N``: every rank trains on its part of each global batch of
    ``args.batch_size`` examples, which must therefore divide evenly among the ``N`` ranks.
    """
    if not getattr(args, "distributed", False):
        return None
    from tapegrad import distributed as dist

    dist.init()
    if args.batch_size % dist.world_size():
        raise SystemExit(
            f"--batch-size {args.batch_size} must be divisible by the {dist.world_size()} ranks"
        )
    return dist
