"""Per-iteration residual policies for reverse mode through ``scan``.

By default (and with ``remat=False``), or with a body wrapped in ``checkpoint(body,
save_only=..., budget_bytes=...)``, the forward keeps, per iteration, the residuals the policy
selects from the body's recorded tape (every residual by default; the same selection as
:func:`tapegrad.core.memory.select_residuals` makes for a checkpointed call), stacked as extra
outputs of the forward scan; the backward is a reverse scan of a body that runs the body's
backward rules with those residuals and recomputes only the others. Both bodies are traced
once and compiled once; every transform sees two ordinary scans. This module holds the plan
and the backward rules' replay; the scans are built in :mod:`tapegrad.transforms.control`.
"""

from __future__ import annotations

import numpy as np

from tapegrad.core.trace import backward_pass

__all__ = ["ResidualPlan", "plan_residuals", "residual_param", "plan_of", "residual_cotangents"]


class ResidualPlan:
    """What a residual-keeping scan keeps: the base body, the checkpoint program of its tape
    (entries without arrays, each entry's residual sources) and the kept node ids.

    Attributes:
        body: The scan's body (:class:`~tapegrad.transforms.control.Body`).
        prog: The body's tape as a checkpoint program.
        kept: Node ids of the body's tape kept per iteration, in order.
        policy: The policy tuple ``(save_only, budget_bytes, None)``.
    """

    __slots__ = ("body", "prog", "kept", "policy")

    def __init__(self, body, prog, kept, policy):
        self.body, self.prog, self.kept, self.policy = body, prog, kept, policy

    def __repr__(self) -> str:
        return f"residuals({self.body.name}: {len(self.kept)} kept)"


def plan_residuals(body, policy) -> ResidualPlan:
    """The plan for ``body`` under ``policy`` (traced once per body and policy)."""
    from tapegrad.core.memory import select_residuals
    from tapegrad.transforms.checkpoint import _Program

    def make():
        tape = body.tape
        kept = select_residuals(tape, *policy)
        prog = _Program(tape, kept)
        return ResidualPlan(body, prog, tuple(prog.kept) + tuple(prog.kept_outs), policy)

    return body.derived(("residual-plan", policy), make)


def residual_param(body, policy) -> tuple:
    """The scan parameter naming what each iteration keeps: ``(body, save_only, budget_bytes)``
    with the base body (a sub-program) and the policy as plain values (op names sorted), so a
    tape holding it can be written to a file and read back."""
    save_only, budget, _ = policy
    return (body, None if save_only is None else tuple(sorted(save_only)), budget)


def plan_of(param: tuple) -> ResidualPlan:
    """The plan a :func:`residual_param` names (made once per body and policy)."""
    body, save_only, budget = param
    return plan_residuals(body, (None if save_only is None else frozenset(save_only), budget,
                                 None))


def body_outputs(tape, env) -> list:
    from tapegrad.core.tensor import Tensor, const

    return [env[r] if isinstance(r, int) else (r[1] if isinstance(r[1], Tensor)
                                               else const(r[1])) for r in tape.out_refs]


def residual_cotangents(plan: ResidualPlan, inputs: list, res: list, wrt: list, cts: dict,
                        g_res: list) -> list:
    """Cotangents of ``inputs[wrt]`` of the body from the kept residuals ``res``: the
    unkept residuals recomputed, then the body's backward rules. ``cts`` maps an output
    position to its cotangent; ``g_res`` are cotangents of the residuals (None at order 1)."""
    from tapegrad.core.tensor import const
    from tapegrad.transforms.checkpoint import dependent_entries

    prog, tape = plan.prog, plan.body.tape
    env = dict(zip(prog.in_nodes, inputs))
    env.update(zip(plan.kept, res))
    wanted = {r for spec in prog.specs for r in spec if isinstance(r, int)}
    prog.run(env, wanted)
    entries = dependent_entries(prog, env, {prog.in_nodes[i] for i in wrt})
    ct: dict = {}
    for pos, g in cts.items():
        r = tape.out_refs[pos]
        if isinstance(r, int) and g is not None:
            ct[r] = g if r not in ct else ct[r] + g
    for v, g in zip(plan.kept, g_res):
        if g is not None:
            ct[v] = g if v not in ct else ct[v] + g
    backward_pass(entries, ct, prog.avals, consume=True)
    out = []
    for i in wrt:
        g = ct.get(prog.in_nodes[i])
        out.append(g if g is not None else const(np.zeros(*tape.avals[prog.in_nodes[i]])))
    return out
