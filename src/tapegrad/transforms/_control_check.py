"""What the parameters of a control-flow entry read from a tape file must agree on.

``Tape.from_json`` checks each sub-program's tape on its own; these checks tie the bodies to
their entry (arity, the carry's shapes and dtypes, a boolean predicate, branches that agree),
so that a file whose entry and bodies disagree is a ValueError naming the entry when it is
read, not a failure inside a replay.
"""

from __future__ import annotations

import numpy as np

from tapegrad.core.subprogram import SubProgram

__all__ = ["check_scan", "check_while", "check_switch"]


def _count(params: dict, name: str) -> int:
    v = params[name]
    if type(v) is not int or v < 0:
        raise ValueError(f"the parameter {name!r} is {v!r}; expected a non-negative int")
    return v


def _flag(params: dict, name: str) -> bool:
    v = params[name]
    if type(v) is not bool:
        raise ValueError(f"the parameter {name!r} is {v!r}; expected a bool")
    return v


def _body(params: dict, name: str, n_in: int, what: str) -> SubProgram:
    b = params[name]
    if not isinstance(b, SubProgram):
        raise ValueError(f"the parameter {name!r} is a {type(b).__name__}; expected a "
                         "sub-program")
    if b.n_in != n_in:
        raise ValueError(f"the sub-program {name!r} ({b.name}) takes {b.n_in} inputs; "
                         f"{what} needs {n_in}")
    return b


def _avals(avals) -> list:
    return [(tuple(s), np.dtype(d)) for s, d in avals]


def check_scan(n_in: int, params: dict) -> None:
    """A ``scan`` entry: inputs ``consts + carry + xs``; the body maps ``carry + x + consts``
    to ``carry + y`` with the carry's shapes and dtypes."""
    n_consts, n_carry = _count(params, "n_consts"), _count(params, "n_carry")
    _count(params, "length")
    _flag(params, "reverse")
    _flag(params, "save")
    unroll = params["unroll"]
    if type(unroll) is not int or unroll < 1:
        raise ValueError(f"the parameter 'unroll' is {unroll!r}; expected a positive int")
    if n_consts + n_carry > n_in:
        raise ValueError(f"{n_in} inputs cannot hold n_consts={n_consts} and n_carry={n_carry}")
    body = _body(params, "body", n_in, "the entry's inputs")
    ins, outs = _avals(body.tape.in_avals), _avals(body.tape.out_avals)
    if len(outs) < n_carry or outs[:n_carry] != ins[:n_carry]:
        raise ValueError(f"the body ({body.name}) does not return a carry of the shapes and "
                         f"dtypes it takes: takes {ins[:n_carry]}, returns {outs[:n_carry]}")
    if params.get("residuals") is not None:
        _check_residuals(params["residuals"], body, n_in)


def _check_residuals(res, body: SubProgram, n_in: int) -> None:
    """A scan keeping each iteration's residuals: ``(base body, save_only, budget_bytes)``;
    the entry's body takes the base body's inputs and returns its outputs, then the residuals.
    (Which residuals a policy keeps is known only on a recorded tape: a loaded scan's backward
    recomputes them.)"""
    if type(res) is not tuple or len(res) != 3:
        raise ValueError(f"the parameter 'residuals' is {res!r:.80}; expected (body, save_only, "
                         "budget_bytes)")
    base, save_only, budget = res
    if not isinstance(base, SubProgram) or base.n_in != n_in:
        raise ValueError("the parameter 'residuals' needs the base body as a sub-program of "
                         f"{n_in} inputs, got {base!r:.60}")
    if save_only is not None and (type(save_only) is not tuple
                                  or not all(type(n) is str for n in save_only)):
        raise ValueError(f"the residual policy's save_only is {save_only!r:.60}; expected "
                         "None or a tuple of op names")
    if budget is not None and (type(budget) is not int or budget < 0):
        raise ValueError(f"the residual policy's budget_bytes is {budget!r}; expected None or a "
                         "non-negative int")
    base_outs, outs = _avals(base.tape.out_avals), _avals(body.tape.out_avals)
    if (_avals(base.tape.in_avals) != _avals(body.tape.in_avals)
            or outs[:len(base_outs)] != base_outs):
        raise ValueError(f"the body ({body.name}) does not take the inputs and return the "
                         f"outputs of its base body ({base.name}) before the residuals: "
                         f"returns {outs}, the base body {base_outs}")


def check_while(n_in: int, params: dict) -> None:
    """A ``while`` entry: inputs ``carry + cond consts + body consts``; the predicate is a
    boolean scalar; the body returns the carry's shapes and dtypes."""
    n_carry, n_cc = _count(params, "n_carry"), _count(params, "n_cconsts")
    _flag(params, "save")
    if n_carry + n_cc > n_in:
        raise ValueError(f"{n_in} inputs cannot hold n_carry={n_carry} and n_cconsts={n_cc}")
    cond = _body(params, "cond_body", n_carry + n_cc, "the carry and the cond constants")
    body = _body(params, "body", n_in - n_cc, "the carry and the body constants")
    if _avals(cond.tape.out_avals) != [((), np.dtype(bool))]:
        raise ValueError(f"the predicate ({cond.name}) returns {list(cond.tape.out_avals)}; "
                         "expected one boolean scalar")
    carry = _avals(body.tape.in_avals)[:n_carry]
    if _avals(body.tape.out_avals) != carry or _avals(cond.tape.in_avals)[:n_carry] != carry:
        raise ValueError(f"the body ({body.name}) and the predicate ({cond.name}) do not take "
                         f"and return the carry's shapes and dtypes {carry}")


def check_switch(n_in: int, params: dict) -> None:
    """A ``switch`` entry: inputs ``index + operands + consts``; branch ``k`` reads the
    operands and ``consts[spans[k][0]:spans[k][1]]``; every branch returns the same."""
    n_ops = _count(params, "n_ops")
    branches, spans = params["branches"], params["spans"]
    if type(branches) is not tuple or not branches:
        raise ValueError("the parameter 'branches' is not a non-empty tuple of sub-programs")
    if (type(spans) is not tuple or len(spans) != len(branches)
            or not all(type(s) is tuple and len(s) == 2 and all(type(i) is int for i in s)
                       for s in spans)):
        raise ValueError(f"the parameter 'spans' is not one (start, stop) pair of ints per "
                         f"branch: {spans!r:.80}")
    n_consts = n_in - 1 - n_ops
    if n_consts < 0:
        raise ValueError(f"{n_in} inputs cannot hold the index and n_ops={n_ops} operands")
    first = None
    for k, ((lo, hi), b) in enumerate(zip(spans, branches)):
        if not 0 <= lo <= hi <= n_consts:
            raise ValueError(f"branch {k}'s constants {lo}:{hi} are not within the entry's "
                             f"{n_consts}")
        b = _body({"b": b}, "b", n_ops + hi - lo, f"branch {k}")
        outs = _avals(b.tape.out_avals)
        if first is None:
            first = outs
        elif outs != first:
            raise ValueError(f"branch {k} ({b.name}) returns {outs}, branch 0 returns {first}")
