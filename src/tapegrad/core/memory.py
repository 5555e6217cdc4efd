"""Memory as a tape transform: what a backward replay holds, and which residuals to keep.

A *residual* is a value a ``backward`` rule reads (what ``forward`` passed to
``ctx.save_for_backward``). A recorded :class:`~tapegrad.core.tape.Tape` knows every residual, its
size and which entries read it, so the memory of a backward replay is a property of the
program: :func:`residual_report` (``Tape.residual_bytes()``) computes it, and
:func:`select_residuals` picks the residuals a :func:`~tapegrad.checkpoint` policy keeps
(JAX's ``checkpoint_policies``, computed from the recorded program instead of declared).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from tapegrad.core.function import saved_values
from tapegrad.core.tensor import Tensor

__all__ = ["ResidualReport", "residual_report", "residual_spec", "select_residuals",
           "residual_ranks"]

class ResidualReport(NamedTuple):
    """What a backward replay of a tape holds (bytes; temporaries inside one rule excluded).

    Attributes:
        peak_bytes: The most held at once during the replay: residuals not yet released
            plus live cotangents.
        residual_bytes: Residuals held when the replay starts, the tape's inputs excluded.
        input_bytes: Residuals that are the tape's inputs (the caller holds them anyway).
        entries: ``(index, oper, bytes)`` for each entry that is the first reader of some
            residuals (their bytes), largest first.
    """

    peak_bytes: int
    residual_bytes: int
    input_bytes: int
    entries: tuple

    def __str__(self) -> str:
        rows = [f"peak {self.peak_bytes:,} B; residuals {self.residual_bytes:,} B "
                f"(+ {self.input_bytes:,} B of inputs)"]
        rows += [f"  #{i} {oper}: {b:,} B" for i, oper, b in self.entries[:10]]
        return "\n".join(rows)


def _entries(tape) -> list:
    """The tape's primitive applications (its guards left out)."""
    return [e for e in tape.entries if hasattr(e, "out_nodes")]


def _nbytes(aval) -> int:
    shape, dtype = aval
    return math.prod(shape) * np.dtype(dtype).itemsize


def residual_spec(entry) -> tuple:
    """Where each residual of ``entry`` comes from: a node id (an int: one of the entry's
    inputs or outputs), or ``("const", value)`` for a value that is no node of the tape."""
    ctx = entry.ctx
    if ctx is None:
        return ()
    ins = [n if n >= 0 else ("const", c) for n, c in zip(entry.in_nodes, entry.consts)]
    return saved_values(entry.saved, ins, entry.out_nodes, lambda v: ("const", v))


def residual_report(tape) -> ResidualReport:
    """The memory a backward replay of ``tape`` needs (``Tape.residual_bytes()``).

    Each residual is released after the backward rule of the first entry that reads it (the
    replay runs the entries last to first), and each cotangent lives from the first backward
    rule that produces it to the backward rule of the entry that made its value.

    Args:
        tape: A :class:`~tapegrad.core.tape.Tape` (from ``tg.trace``).

    Returns:
        A :class:`ResidualReport`.
    """
    entries = _entries(tape)
    inputs = set(tape.in_nodes)
    first_reader: dict = {}  # residual key -> (first entry index, bytes, is_input)
    for i, e in enumerate(entries):
        for r in residual_spec(e):
            if isinstance(r, int):
                key, size, is_in = ("n", r), _nbytes(tape.avals[r]), r in inputs
            else:
                arr = r[1]._array if isinstance(r[1], Tensor) else r[1]
                if not hasattr(arr, "nbytes"):
                    continue
                key, size, is_in = ("c", id(arr)), int(arr.nbytes), False
            if key not in first_reader:
                first_reader[key] = (i, size, is_in)
    n = len(entries)
    held = [0] * (n + 1)  # residual bytes held while entry j's backward runs (j = n: before)
    by_entry: dict = {}
    total = inputs_b = 0
    for i, size, is_in in first_reader.values():
        if is_in:
            inputs_b += size
            continue
        total += size
        by_entry[i] = by_entry.get(i, 0) + size
        held[i] += size  # held while the replay is at entries i..n-1 (a prefix sum below)
    for j in range(1, n + 1):
        held[j] += held[j - 1]
    # Cotangents: node v is live while the replay is between its last reader and its maker.
    maker = {v: i for i, e in enumerate(entries) for v in e.out_nodes}
    born: dict = {}
    for i, e in enumerate(entries):
        if e.ctx is None:
            continue
        for v in e.in_nodes:
            if v >= 0:
                born[v] = max(born.get(v, -1), i)
    for r in tape.out_refs:
        if isinstance(r, int):
            born[r] = n
    live = [0] * (n + 2)
    for v, b in born.items():
        lo = maker.get(v, -1)  # inputs live to the end of the replay
        size = _nbytes(tape.avals[v])
        live[max(lo, 0)] += size
        live[min(b, n) + 1] -= size
    peak = cur = 0
    for j in range(n + 1):
        cur += live[j]
        peak = max(peak, held[j] + cur)
    top = sorted(((i, entries[i].oper, b) for i, b in by_entry.items()), key=lambda r: -r[2])
    return ResidualReport(peak, total, inputs_b, tuple(top))


def _cost(entry, avals) -> float:
    """Operations per output element to recompute ``entry`` (an estimate from shapes, by the
    op's ``cost`` trait): the contracted length of a matrix product (its first operand's last
    axis, or the one before it for a ``transpose_a`` product), the input size per output
    element of other dense ops, 1 for elementwise ones. Per output element, so a batched
    program (``vmap``) ranks its residuals as each example's program does."""
    cost = entry.fn.traits.cost
    if cost == "elementwise":
        return 1.0
    shapes = [avals[v][0] if v >= 0 else np.shape(c._array if isinstance(c, Tensor) else c)
              for v, c in zip(entry.in_nodes, entry.consts)]
    out = max(sum(math.prod(avals[v][0]) for v in entry.out_nodes), 1)
    if cost == "contraction" and shapes and shapes[0]:
        transposed = entry.params.get("transpose_a") and len(shapes[0]) > 1  # op(a) = a^T
        return float(shapes[0][-2 if transposed else -1])
    return max(1.0, sum(math.prod(s) for s in shapes) / out)


def residual_ranks(tape, kept) -> frozenset:
    """``kept`` residual nodes named by position: ``(oper, k)`` for the ``k``-th value that
    ``oper`` entries produce among the residuals. A residual made by a layout op (``reshape``,
    ``transpose``, ``broadcast_to``) is named by the value it rearranges, so a batched recording
    of the same program (``vmap``, which may fold the batch into a matrix product's rows with a
    reshape) names the same residuals."""
    return frozenset(_ranked_candidates(tape)[v] for v in kept)


def _candidates(tape):
    """Each residual a policy may keep, mapped to its origin: the node that computed its values
    (through layout ops); residuals whose origin is an input of the tape are held anyway."""
    entries = _entries(tape)
    maker = {v: e for e in entries for v in e.out_nodes}
    inputs = set(tape.in_nodes)
    out = {}
    for v in sorted({r for e in entries for r in residual_spec(e)
                     if isinstance(r, int) and r not in inputs and r in maker}):
        o = v
        while o in maker and maker[o].fn.traits.rearranges and len(maker[o].in_nodes) >= 1 \
                and maker[o].in_nodes[0] >= 0:
            o = maker[o].in_nodes[0]
        if o in maker:
            out[v] = o
    return out, maker


def _ranked_candidates(tape) -> dict:
    cands, maker = _candidates(tape)
    seen: dict = {}
    rank: dict = {}
    for o in sorted(set(cands.values())):
        oper = maker[o].oper
        rank[o] = (oper, seen.get(oper, 0))
        seen[oper] = seen.get(oper, 0) + 1
    return {v: rank[o] for v, o in cands.items()}


def select_residuals(tape, save_only=None, budget_bytes=None, ranks=None) -> frozenset:
    """The residual nodes of ``tape`` a checkpoint policy keeps (the others are recomputed).

    A residual made by a layout op (``reshape``, ``transpose``, ``broadcast_to``) counts as a
    value of the op that computed what it rearranges: ``save_only={"matmul"}`` keeps a reshaped
    matrix product too.

    Args:
        tape: The recorded body of a checkpointed function.
        save_only: Op names (``oper`` labels, as a tape listing shows them, e.g.
            ``{"matmul", "conv2d"}``): keep the residuals those ops produce.
        budget_bytes: Keep residuals up to this many bytes, most recompute work saved per byte
            first (the outputs of matrix products and convolutions before elementwise ones;
            ties in recording order).
        ranks: Keep exactly these residuals, named as :func:`residual_ranks` names them
            (how ``vmap`` applies each example's choice to the batch).

    Returns:
        A frozenset of node ids.
    """
    if ranks is not None:
        return frozenset(v for v, r in _ranked_candidates(tape).items() if r in ranks)
    origin, maker = _candidates(tape)
    cands = set(origin)
    if save_only is not None:
        cands = {v for v in cands if maker[origin[v]].oper in save_only}
    if budget_bytes is None:
        return frozenset(cands)
    ranked = sorted(cands, key=lambda v: (-_cost(maker[origin[v]], tape.avals)
                                          / np.dtype(tape.avals[v][1]).itemsize, v))
    keep, used = [], 0
    for v in ranked:
        size = _nbytes(tape.avals[v])
        if used + size <= budget_bytes:
            keep.append(v)
            used += size
    return frozenset(keep)
