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

The primitive's ``forward`` runs the schedule on backend arrays (the body and its vjp
compiled once each); its ``backward``, ``jvp`` and batching rule fall back on the keep-every-
carry formulation (the same cotangents, written with the loop primitives on Tensors), so
derivatives of every order are correct, with the memory of the default mode at order two.
"""

from __future__ import annotations

import contextlib
from math import comb

import numpy as np

from tapegrad.core.function import Function

__all__ = ["Revolve", "check_checkpoint", "next_split", "reverse_steps", "recording"]

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


class Revolve(Function):
    """The backward pass of a checkpointed ``scan`` or ``while_loop``.

    Inputs: ``consts + init + xs + g_carry + g_ys`` and, for a while loop, ``count`` and the
    condition's constants. Outputs: the cotangents of the constants in ``kc``, of the float
    carries ``kk`` (of ``init``) and of the xs in ``kx``.
    """

    # runs tapegrad ops (or a recorded body) on its inputs: each computes bfloat16 itself
    bfloat16_native = True

    oper = "revolve"
    _ctx_arrays_recomputed = True

    @staticmethod
    def forward(ctx, *arrays, body, vjp_body, n_consts, n_carry, n_xs, kc, kk, kx, ky, length,
                reverse, checkpoint, cond_body, n_cconsts):
        xp = ctx.backend
        ctx.params = dict(body=body, vjp_body=vjp_body, n_consts=n_consts, n_carry=n_carry,
                          n_xs=n_xs, kc=kc, kk=kk, kx=kx, ky=ky, length=length,
                          reverse=reverse, checkpoint=checkpoint, cond_body=cond_body,
                          n_cconsts=n_cconsts)
        ctx.save_for_backward(*arrays)
        it = iter(arrays)
        consts = [next(it) for _ in range(n_consts)]
        init = [next(it) for _ in range(n_carry)]
        xs = [next(it) for _ in range(n_xs)]
        g_carry = [next(it) for _ in kk]
        g_ys = [next(it) for _ in ky]
        if cond_body is not None:
            n = int(np.asarray(next(it)).reshape(()))
        else:
            n = int(xs[0].shape[0]) if xs else length
        acc = [xp.zeros_like(consts[i]) for i in kc]
        ct = [xp.array(g, copy=True) for g in g_carry]
        ct_xs = [xp.zeros_like(xs[i]) for i in kx]

        def pos(t):
            return n - 1 - t if reverse else t

        def advance(t, carry):
            i = pos(t)
            return list(body.run(list(carry) + [x[i] for x in xs] + consts)[:n_carry])

        def back(t, carry):
            i = pos(t)
            outs = vjp_body.run(ct + list(carry) + [x[i] for x in xs] + [g[i] for g in g_ys]
                                + consts)
            for j, d in enumerate(outs[:len(kc)]):
                acc[j] = acc[j] + d
            ct[:] = outs[len(kc):len(kc) + len(kk)]
            for j, d in enumerate(outs[len(kc) + len(kk):]):
                ct_xs[j][i] = d

        stats = reverse_steps(n, checkpoint, init, advance, back)
        for rec in _RECORDERS:
            rec.append({"n": n, "k": checkpoint, **stats})
        res = [xp.asarray(a) for a in acc] + [xp.asarray(c) for c in ct] + ct_xs
        return res[0] if len(res) == 1 else tuple(res)

    @staticmethod
    def backward(ctx, *gs):
        from tapegrad.transforms.control import _revolve_fallback
        from tapegrad.transforms.reverse import vjp

        ins = list(ctx.saved_tensors)
        p = ctx.params
        active = [i for i, (a, need) in enumerate(zip(ins, ctx.needs_input_grad))
                  if need and a.dtype.kind in "fcV"]
        if not active:
            return (None,) * len(ins)

        def replay(*d):
            full = list(ins)
            for i, v in zip(active, d):
                full[i] = v
            return tuple(_revolve_fallback(full, p))

        outs, pull = vjp(replay, *[ins[i] for i in active])
        cts = pull(tuple(g if g is not None else _zeros_like(o) for g, o in zip(gs, outs)))
        res: list = [None] * len(ins)
        for i, c in zip(active, cts):
            res[i] = c
        return tuple(res)

    @staticmethod
    def jvp(ctx, *ts):
        from tapegrad.transforms.control import _revolve_fallback
        from tapegrad.transforms.forward import jvp

        ins = list(ctx.saved_tensors)
        p = ctx.params
        active = [i for i, t in enumerate(ts) if t is not None]

        def replay(*d):
            full = list(ins)
            for i, v in zip(active, d):
                full[i] = v
            return tuple(_revolve_fallback(full, p))

        _, t_out = jvp(replay, tuple(ins[i] for i in active), tuple(ts[i] for i in active))
        return tuple(t_out)

    @staticmethod
    def batch(args, batched, size, **p):
        """One reversal per member (each with its own trip count), stacked: the memory bound
        holds per member."""
        from tapegrad.ops import Concatenate

        per = []
        for m in range(size):
            member = [a[m] if b else a for a, b in zip(args, batched)]
            out = Revolve.apply(*member, **p)
            per.append(out if isinstance(out, tuple) else (out,))
        if not per:
            raise NotImplementedError("revolve: vmap over an empty batch")
        return tuple(Concatenate.apply(*[o[j].reshape((1,) + tuple(o[j].shape)) for o in per],
                                       axis=0) for j in range(len(per[0])))

    @classmethod
    def output_shape(cls, *shapes, **params):
        raise NotImplementedError("revolve's outputs are known by running the loop")


def _zeros_like(t):
    from tapegrad.core.tensor import const

    return const(np.zeros(t.shape, t.dtype))
