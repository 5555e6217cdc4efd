"""Per-iteration residual policies for reverse mode through ``scan``.

By default a scan's backward recomputes each iteration's intermediates from its carry (remat
per step). With ``remat=False``, or a body wrapped in ``checkpoint(body, save_only=...,
budget_bytes=...)``, the forward also keeps, per iteration, the residuals the policy selects
from the body's recorded tape (every residual for ``remat=False``; the same selection as
:func:`tapegrad.core.memory.select_residuals` makes for a checkpointed call), stacked as extra
outputs of the forward scan; the backward is a reverse scan of a body that runs the body's
backward rules with those residuals and recomputes only the others. Both bodies are traced
once and compiled once; every transform sees two ordinary scans.
"""

from __future__ import annotations

from tapegrad.core.function import derive_context
from tapegrad.core.trace import apply_step, backward_pass, interpret

__all__ = ["ResidualPlan", "plan_residuals", "forward_body", "residual_backward"]


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


def forward_body(plan: ResidualPlan):
    """The body that also returns the kept residuals after its outputs."""
    import numpy as np

    from tapegrad.transforms.control import _closed

    body = plan.body
    tape = body.tape

    def make():
        def step(leaves):
            env = interpret(tape.entries, dict(zip(tape.in_nodes, leaves)), apply_step,
                            body.name)
            outs = body_outputs(tape, env)
            return outs + [env[v] for v in plan.kept]

        return _closed(step, [np.zeros(*tape.avals[v]) for v in tape.in_nodes], body.name)

    return body.derived(("residual-forward", plan.policy), make)


def body_outputs(tape, env) -> list:
    from tapegrad.core.tensor import Tensor, const

    return [env[r] if isinstance(r, int) else (r[1] if isinstance(r[1], Tensor)
                                               else const(r[1])) for r in tape.out_refs]


def residual_cotangents(plan: ResidualPlan, inputs: list, res: list, wrt: list, cts: dict,
                        g_res: list) -> list:
    """Cotangents of ``inputs[wrt]`` of the body from the kept residuals ``res``: the
    unkept residuals recomputed, then the body's backward rules. ``cts`` maps an output
    position to its cotangent; ``g_res`` are cotangents of the residuals (None at order 1)."""
    from tapegrad.transforms.control import _zeros

    prog, tape = plan.prog, plan.body.tape
    env = dict(zip(prog.in_nodes, inputs))
    env.update(zip(plan.kept, res))
    wanted = {r for spec in prog.specs for r in spec if isinstance(r, int)}
    prog.run(env, wanted)
    dep = {prog.in_nodes[i] for i in wrt}
    entries = []
    for e, spec in zip(prog.entries, prog.specs):
        if e.ctx is not None and any(v in dep for v in e.in_nodes):
            dep.update(e.out_nodes)
            c = derive_context(
                e.ctx, tuple(n and v in dep for n, v in zip(e.ctx.needs_input_grad,
                                                            e.in_nodes)),
                tuple(env[r] if isinstance(r, int) else r[1] for r in spec))
            entries.append(e._replace(ctx=c))
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
        out.append(g if g is not None else _zeros(tape.avals[prog.in_nodes[i]]))
    return out


def residual_backward(plan, consts, init, xs, cs, res, g_carry, g_ys, g_cs, g_res, needs, p):
    """Cotangents of ``consts + init + xs`` of a residual-keeping scan: a reverse scan of the
    body's backward rules over the saved carries ``cs`` and residuals ``res``."""
    from tapegrad.transforms.control import Scan, _apply, _closed, _is_float, _zeros

    body = plan.body
    n_consts, n_carry, n_xs = len(consts), len(init), len(xs)
    avals = body.out_avals
    n_user = len(avals) - n_carry
    carry_avals, y_avals = avals[:n_carry], avals[n_carry:]
    kc = [i for i in range(n_consts) if needs[i] and _is_float(consts[i].dtype)]
    kk = [i for i in range(n_carry) if _is_float(carry_avals[i][1])]
    kx = [i for i in range(n_xs) if needs[n_consts + n_carry + i] and _is_float(xs[i].dtype)]
    ky = [j for j in range(n_user) if _is_float(y_avals[j][1])]
    out: list = [None] * (n_consts + n_carry + n_xs)
    if not kk and not ky:
        return out
    kr = [j for j, g in enumerate(g_res) if g is not None]
    kg = [i for i in kk if g_cs[i] is not None]
    r_avals = [(tuple(r.shape[1:]), r.dtype) for r in res]
    const_avals = [(tuple(c.shape), c.dtype) for c in consts]
    x_avals = [(tuple(x.shape[1:]), x.dtype) for x in xs]

    def make():
        def step(leaves):
            it = iter(leaves)
            acc = [next(it) for _ in kc]
            ct = [next(it) for _ in kk]
            c_i = [next(it) for _ in range(n_carry)]
            x_i = [next(it) for _ in range(n_xs)]
            gy = [next(it) for _ in ky]
            gc = [next(it) for _ in kg]
            r_i = [next(it) for _ in res]
            gr = dict(zip(kr, [next(it) for _ in kr]))
            cst = [next(it) for _ in range(n_consts)]
            cts = dict(zip(kk, ct))
            cts.update({n_carry + j: g for j, g in zip(ky, gy)})
            got = residual_cotangents(
                plan, c_i + x_i + cst, r_i,
                [n_carry + n_xs + i for i in kc] + kk + [n_carry + i for i in kx], cts,
                [gr.get(j) for j in range(len(res))])
            new_acc = [a + b for a, b in zip(acc, got[:len(kc)])]
            gcd = dict(zip(kg, gc))
            new_ct = [v + gcd[i] if i in gcd else v
                      for i, v in zip(kk, got[len(kc):len(kc) + len(kk)])]
            return new_acc + new_ct + got[len(kc) + len(kk):]

        import numpy as np

        ex = ([const_avals[i] for i in kc] + [carry_avals[i] for i in kk] + list(carry_avals)
              + x_avals + [y_avals[j] for j in ky] + [carry_avals[i] for i in kg] + r_avals
              + [r_avals[j] for j in kr] + const_avals)
        return _closed(step, [np.zeros(*a) for a in ex], f"vjp({body.name})")

    bwd = body.derived(("residual-vjp", plan.policy, tuple(kc), tuple(kx), tuple(kr),
                        tuple(kg)), make)
    length = cs[0].shape[0] if cs else p["length"]
    acc0 = [_zeros(const_avals[i]) for i in kc]
    ct0 = [g_carry[i] if g_carry[i] is not None else _zeros(carry_avals[i]) for i in kk]
    g_y = [g_ys[j] if g_ys[j] is not None else _zeros(
        ((length,) + tuple(y_avals[j][0]), y_avals[j][1])) for j in ky]
    args = (list(consts) + acc0 + ct0 + list(cs) + list(xs) + g_y + [g_cs[i] for i in kg]
            + list(res) + [g_res[j] for j in kr])
    from tapegrad.transforms.control import _any_traced

    outs = _apply(Scan, *args, body=bwd, n_consts=n_consts, n_carry=len(kc) + len(kk),
                  length=length, reverse=not p["reverse"], unroll=p["unroll"],
                  save=_any_traced(args))
    for i, v in zip(kc, outs[:len(kc)]):
        out[i] = v
    for i, v in zip(kk, outs[len(kc):len(kc) + len(kk)]):
        if needs[n_consts + i]:
            out[n_consts + i] = v
    nacc = len(kc) + len(kk)
    for i, v in zip(kx, outs[nacc:nacc + len(kx)]):
        out[n_consts + n_carry + i] = v
    return out
