"""Shared timing helpers for the benchmarks: best-of-N wall time, ratios in one run."""

from __future__ import annotations

import gc
import time


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
