"""Shared timing helpers for the benchmarks: best-of-N wall time, ratios in one run."""

from __future__ import annotations

import ctypes
import gc
import sys
import time

import numpy as np


def best_time(fn, repeat: int = 5, number: int = 1) -> float:
    """Best (minimum) seconds per call of ``fn`` over ``repeat`` rounds of ``number`` calls."""
    fn()  # warm up
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def best_times_interleaved(fns, repeat: int = 5, number: int = 1, clock=time.perf_counter) -> list:
    """Best seconds per call of each function in ``fns``, timed in interleaved rounds.

    Each round times every function once (``number`` calls each), so slow drifts of the
    machine's state (other processes, frequency, caches) hit all of them alike and their
    ratios stay comparable; each function keeps its best round. ``clock`` is wall time by
    default; ``time.process_time`` leaves out the time the process waits for a core (right
    for single-threaded work on a shared machine).
    """
    for fn in fns:
        fn()  # warm up
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            gc.collect()
            t0 = clock()
            for _ in range(number):
                fn()
            best[i] = min(best[i], (clock() - t0) / number)
    return best


def optional(name: str):
    """Import ``name`` if installed, else None (benchmarks add a column only when present)."""
    try:
        return __import__(name)
    except Exception:
        return None


def table(rows, headers) -> str:
    """A GitHub-flavoured Markdown table."""
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def steady_allocator() -> bool:
    """Keep freed large blocks in the C heap for reuse (glibc only; process-wide).

    By default glibc returns a freed multi-megabyte block to the OS and the next allocation of
    that size maps fresh pages, whose first touch costs a page fault each: an 8 MB temporary
    can cost more in page faults than in arithmetic, and which side of a comparison pays
    depends on the order of frees, not on the work (ratios then swing between 1.0x and 1.5x
    from run to run). Raising ``M_MMAP_THRESHOLD`` to its maximum (32 MiB) and
    ``M_TRIM_THRESHOLD`` to 1 GiB makes such blocks reusable, as the caching allocators of
    PyTorch and JAX do. It applies to every column of a benchmark alike. Returns True if
    applied (Linux with glibc), False otherwise.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # from <malloc.h>
    ok = libc.mallopt(m_mmap_threshold, 32 * 1024 * 1024) == 1
    return ok and libc.mallopt(m_trim_threshold, 1 << 30) == 1


# -- shared pieces of the hand-written NumPy steps --------------------------------------------
def np_softmax_xent(z, y):
    """Mean cross-entropy of logits ``z`` (N, C) against int labels ``y``, and dL/dz."""
    n = z.shape[0]
    m = z.max(axis=1, keepdims=True)
    e = np.exp(z - m)
    s = e.sum(axis=1, keepdims=True)
    loss = float(np.mean(np.log(s[:, 0]) + m[:, 0] - z[np.arange(n), y]))
    dz = e / s
    dz[np.arange(n), y] -= 1.0
    dz /= n
    return loss, dz


def np_dense_step(params, x, y, lr):
    """Forward, backward and in-place SGD for a ReLU MLP ``params = [(W, b), ...]``.

    Keeps one array per layer for the backward pass (the ReLU output, which also gives the
    ReLU mask), applies ReLU and the bias in place, and updates the weights in place (none
    when ``lr`` is 0): the floor the benchmarks compare against. Returns ``(loss, grads)``.
    """
    acts = [x]
    a = x
    for i, (w, b) in enumerate(params):
        a = a @ w
        a += b
        if i < len(params) - 1:
            np.maximum(a, 0.0, out=a)
            acts.append(a)
    loss, g = np_softmax_xent(a, y)
    grads = [None] * len(params)
    for i in range(len(params) - 1, -1, -1):
        w, _ = params[i]
        grads[i] = (acts[i].T @ g, g.sum(axis=0))
        if i > 0:
            g = g @ w.T
            g *= acts[i] > 0
    if lr:
        for (w, b), (gw, gb) in zip(params, grads):
            w -= lr * gw
            b -= lr * gb
    return loss, grads


def init_dense(rng, sizes):
    """He-initialised float32 ``[(W, b), ...]`` of a ReLU MLP with layer widths ``sizes``."""
    return [
        (
            (rng.standard_normal((i, o)) * np.sqrt(2.0 / i)).astype(np.float32),
            np.zeros(o, np.float32),
        )
        for i, o in zip(sizes[:-1], sizes[1:])
    ]
