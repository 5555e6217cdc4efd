"""Binomial checkpointing (*revolve*) for reverse mode through ``scan`` and ``while_loop``.

With ``checkpoint=k`` a loop's forward keeps no carries (a while loop records its trip count
``n``); its backward is one :class:`Revolve` primitive that reverses the ``n`` steps holding at
most ``k`` carries at once: it advances from a stored carry to a position chosen by the
binomial rule, stores the carry there, and recurses on the part to the right with one slot
less, then on the part to the left with the slot back (Griewank and Walther, "Algorithm 799:
revolve", ACM TOMS 26(1), 2000). The number of recomputed steps is the optimum of that
recurrence, ``r * n - C(k + r, r - 1)`` where ``r`` is the least integer with
``C(k + r, r) >= n`` (so ``k`` carries reverse ``C(k + r, r)`` steps with ``r`` sweeps:
memory grows like the ``r``-th root of the trip count, the log for ``r`` near ``k``).

This module holds the schedule; the primitive that runs it on a loop's body is
:class:`tapegrad.transforms.control.Revolve`, whose ``forward`` runs the schedule on backend
arrays (the body and its vjp compiled once each) and whose ``backward``, ``jvp`` and batching
rule fall back on the keep-every-carry formulation (the same cotangents, written with the loop
primitives on Tensors), so derivatives of every order are correct, with the memory of the
default mode at order two.
"""

from __future__ import annotations

import contextlib
from math import comb

import numpy as np

__all__ = ["check_checkpoint", "next_split", "optimal_advances", "reverse_steps", "recording"]

_RECORDERS: list = []


@contextlib.contextmanager
def recording():
    """Collect a record ``{"n", "k", "advances", "peak"}`` per reversed loop run meanwhile
    (tests and benchmarks read the peak of stored carries and the recomputed steps)."""
    got: list = []
    _RECORDERS.append(got)
    try:
        yield got
    finally:
        _RECORDERS.remove(got)


def check_checkpoint(who: str, checkpoint):
    """``checkpoint`` validated: None, or an int >= 1 (the most carries held at once)."""
    if checkpoint is None:
        return None
    if isinstance(checkpoint, bool) or not isinstance(checkpoint, (int, np.integer)):
        raise TypeError(f"{who}: checkpoint must be None or a positive int (the most carries "
                        f"the backward pass holds at once), got {type(checkpoint).__name__} "
                        f"{checkpoint!r}. Pass for example checkpoint=50.")
    if checkpoint < 1:
        raise ValueError(f"{who}: checkpoint must be a positive int (the most carries the "
                         f"backward pass holds at once), got {int(checkpoint)}. Pass "
                         "checkpoint=None to keep every carry, or an int >= 1.")
    return int(checkpoint)


def _beta(c: int, r: int) -> int:
    """Steps that ``c`` stored carries reverse with ``r`` sweeps: ``C(c + r, c)``."""
    return comb(c + r, c) if r >= 0 else 0


def next_split(length: int, slots: int) -> int:
    """How many steps to advance before storing the next carry, reversing ``length >= 2``
    steps with ``slots >= 2`` carries (the start's included): the least ``j`` at which
    ``j + T(length - j, slots - 1) + T(j, slots)`` stops decreasing, where ``T(l, c)`` is the
    optimal number of recomputed steps (its increments are the repetition numbers)."""
    q = 1
    while True:
        lo = max(_beta(slots, q - 1), length - _beta(slots - 1, q + 1), 1)
        if lo <= _beta(slots, q) - 1:
            return min(lo, length - 1)
        q += 1


def optimal_advances(length: int, slots: int) -> int:
    """The least number of recomputed steps that reverse ``length`` steps holding at most
    ``slots`` carries (the start's included): ``r * length - C(slots + r, r - 1)``."""
    if length <= 1:
        return 0
    if slots == 1:
        return length * (length - 1) // 2
    r = 0
    while _beta(slots, r) < length:
        r += 1
    return r * length - _beta(slots + 1, r - 1)


def reverse_steps(n: int, k: int, init, advance, back) -> dict:
    """Run ``back(t, carry_t)`` for ``t = n - 1, ..., 0`` where ``carry_{t+1} =
    advance(t, carry_t)`` and ``carry_0 = init``, holding at most ``k`` carries (``init``
    included), recomputing by the binomial rule. Returns ``{"advances", "peak"}``."""
    stack = [(0, init)]
    advances = 0
    peak = 1
    b = n
    while b > 0:
        a, carry = stack[-1]
        length = b - a
        free = k - len(stack)
        if length == 1:
            back(a, carry)
            b = a
            if len(stack) > 1:
                stack.pop()
            continue
        if free == 0:  # no slot: advance to the last step from the top carry
            for t in range(a, b - 1):
                carry = advance(t, carry)
            advances += length - 1
            back(b - 1, carry)
            b -= 1
            continue
        m = a + next_split(length, free + 1)
        for t in range(a, m):
            carry = advance(t, carry)
        advances += m - a
        stack.append((m, carry))
        peak = max(peak, len(stack))
    return {"advances": advances, "peak": peak if n else 0}
