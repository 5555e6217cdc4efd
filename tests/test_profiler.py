"""tg.profile: exact counts per op and phase, times that add up, the Chrome trace, nesting,
threads, exceptions, and no cost when no profile is open."""

import asyncio
import json
import threading
import time

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.core import profiler
from tapegrad.core.profiler import BACKWARD_PASS


def three_sines(x):
    return (tnp.sin(x) + tnp.sin(2.0 * x) + tnp.sin(3.0 * x)).sum()


X = tg.Tensor([0.5, 1.0, 1.5])


def counts(p) -> dict:
    return {key: s.calls for key, s in p.stats.items()}


def test_counts_of_a_known_program_forward_and_backward():
    with tg.profile() as p:
        tg.grad(three_sines)(X)
    assert counts(p) == {
        ("sin", "forward"): 3, ("mul", "forward"): 2, ("add", "forward"): 2,
        ("sum", "forward"): 1,
        ("sin", "backward"): 3, ("mul", "backward"): 2, ("add", "backward"): 2,
        ("sum", "backward"): 1, (BACKWARD_PASS, "backward"): 1,
    }  # fmt: skip


def test_eager_ops_are_forward_rows_and_each_call_counts():
    with tg.profile() as p:
        for _ in range(4):
            three_sines(X)
    assert counts(p) == {("sin", "forward"): 12, ("mul", "forward"): 8,
                         ("add", "forward"): 8, ("sum", "forward"): 4}  # fmt: skip


def test_grad_of_grad_counts_every_derivative_rule_as_backward():
    """The inner gradient's backward rules (and the ops they are made of) run inside the
    outer forward pass: they count as backward, never as forward ops."""
    with tg.profile() as p:
        tg.grad(tg.grad(lambda x: tnp.sin(x)))(tg.Tensor(0.5))
    c = counts(p)
    assert {k: v for k, v in c.items() if k[1] == "forward"} == {("sin", "forward"): 1}
    assert c[BACKWARD_PASS, "backward"] == 2  # the inner pass and the outer one
    # in the inner pass; the outer pass differentiates that pass's unary_grad, whose second
    # derivative for sin depends on x alone, so no cotangent reaches sin's output again
    assert c["sin", "backward"] == 1 and c["unary_grad", "backward"] == 1
    rules = {k[0] for k in c if k[1] == "backward"} - {BACKWARD_PASS, "sin"}
    assert rules and all(c[r, "backward"] >= 1 for r in rules)  # the derivative's own ops


def test_forward_mode_rules_are_jvp_rows():
    with tg.profile() as p:
        tg.jvp(three_sines, (X,), (tg.Tensor(np.ones(3, np.float32)),))
    c = counts(p)
    assert c["sin", "forward"] == 3 and c["sin", "jvp"] == 3 and c["sum", "jvp"] == 1
    assert not any(phase == "backward" for _, phase in c)


def test_a_jitted_call_is_one_row_named_after_the_function():
    f = tg.jit(three_sines)
    f(X)  # traced and compiled before the block
    with tg.profile() as p:
        for _ in range(3):
            f(X)
    assert counts(p) == {("jit(three_sines)", "forward"): 3}
    g = tg.jit(three_sines)
    with tg.profile() as p:
        g(X)  # the first call traces: its ops are rows
        g(X)
    assert counts(p) == {("sin", "forward"): 3, ("mul", "forward"): 2, ("add", "forward"): 2,
                         ("sum", "forward"): 1, ("jit(three_sines)", "forward"): 1}  # fmt: skip


def test_times_are_nonnegative_and_add_up():
    def slow(x):
        return tg.grad(lambda x: (tnp.tanh(x @ x.T) ** 2).sum())(x)

    x = tg.Tensor(np.random.default_rng(0).standard_normal((60, 60)))
    t0 = time.perf_counter()
    with tg.profile() as p:
        for _ in range(3):
            slow(x)
    outside = time.perf_counter() - t0
    rows = list(p.stats.values())
    assert rows and all(r.total_s >= r.self_s >= 0 and r.calls > 0 for r in rows)
    # the self times partition the time in ops: the top-level calls' totals
    events = p.events
    tops = sum(e.duration_ns for e in events if not _inside_another(e, events)) / 1e9
    assert sum(r.self_s for r in rows) == pytest.approx(tops, rel=1e-9)
    assert tops <= p.wall_s <= outside
    # the rows list every event once
    assert sum(r.calls for r in rows) == len(events)
    for r in rows:
        mine = [e for e in events if (e.op, e.phase) == (r.op, r.phase)]
        assert sum(e.duration_ns for e in mine) / 1e9 == pytest.approx(r.total_s, rel=1e-9)
    # sorted by total time, largest first
    totals = [r.total_s for r in rows]
    assert totals == sorted(totals, reverse=True)
    # a backward pass contains its rules
    bp = p.stats[BACKWARD_PASS, "backward"]
    assert bp.calls == 3 and bp.total_s > bp.self_s


def _inside_another(e, events) -> bool:
    return any(o is not e and o.thread == e.thread and o.start_ns <= e.start_ns
               and e.start_ns + e.duration_ns <= o.start_ns + o.duration_ns
               and o.duration_ns > e.duration_ns for o in events)  # fmt: skip


def test_table_lists_every_row_sorted():
    with tg.profile() as p:
        tg.grad(three_sines)(X)
    text = str(p)
    lines = text.splitlines()
    assert lines[0].split() == ["op", "phase", "calls", "total", "ms", "self", "ms", "mean",
                                "us", "self", "%"]  # fmt: skip
    body = lines[2:-1]
    assert len(body) == len(p.stats)
    assert [tuple(line.split()[:2]) for line in body] == [
        (BACKWARD_PASS.split()[0], "pass)") if op == BACKWARD_PASS else (op, phase)
        for op, phase in p.stats
    ]
    assert lines[-1].startswith("wall time ")
    assert p.table() == text
    limited = p.table(sort_by="calls", limit=2).splitlines()
    assert len(limited) == 2 + 2 + 2  # header, rule, 2 rows, "... more rows", wall time
    assert limited[2].split()[2] == "3"  # the most calls first (sin, 3)
    with pytest.raises(ValueError, match="sort_by must be one of"):
        p.table(sort_by="time")
    with pytest.raises(ValueError, match="limit must be"):
        p.table(limit=-1)


def test_chrome_trace_is_valid_json_with_the_expected_events(tmp_path):
    with tg.profile() as p:
        tg.grad(three_sines)(X)
    path = p.export_chrome_trace(tmp_path / "trace.json")
    assert path == str(tmp_path / "trace.json")
    assert sorted(q.name for q in tmp_path.iterdir()) == ["trace.json"]  # no temporary left
    doc = json.loads((tmp_path / "trace.json").read_text())
    complete = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    meta = [e for e in doc["traceEvents"] if e["ph"] == "M"]
    assert {e["name"] for e in meta} == {"process_name", "thread_name"}
    assert len(complete) == len(p.events)
    got = {}
    for e in complete:
        assert set(e) >= {"name", "cat", "ph", "ts", "dur", "pid", "tid"}
        assert e["dur"] >= 0 and e["ts"] >= 0 and e["cat"] == e["args"]["phase"]
        got[e["name"], e["cat"]] = got.get((e["name"], e["cat"]), 0) + 1
    assert got == counts(p)
    # a rule's event lies inside its backward pass's event
    (bp,) = [e for e in complete if e["name"] == BACKWARD_PASS]
    for e in complete:
        if e["cat"] == "backward" and e is not bp:
            assert bp["ts"] <= e["ts"] and e["ts"] + e["dur"] <= bp["ts"] + bp["dur"] + 1e-3


def test_chrome_trace_write_failure_leaves_the_folder_as_it_was(tmp_path, monkeypatch):
    with tg.profile() as p:
        three_sines(X)
    (tmp_path / "trace.json").write_text("old")

    def fail(*args):
        raise OSError("disk full")

    monkeypatch.setattr(profiler.os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        p.export_chrome_trace(str(tmp_path / "trace.json"))
    assert sorted(q.name for q in tmp_path.iterdir()) == ["trace.json"]
    assert (tmp_path / "trace.json").read_text() == "old"


def test_nested_profiles_both_record_the_inner_block():
    with tg.profile() as outer:
        three_sines(X)
        with tg.profile() as inner:
            tg.grad(three_sines)(X)
        tnp.cos(X)
    assert counts(inner)["sin", "forward"] == 3 and ("cos", "forward") not in counts(inner)
    assert counts(outer)["sin", "forward"] == 6 and counts(outer)["cos", "forward"] == 1
    assert counts(outer)["sin", "backward"] == 3


def test_profiling_in_one_thread_does_not_see_other_threads():
    started, stop = threading.Event(), threading.Event()
    seen = {}

    def busy():  # runs tanh in a loop while the main thread profiles
        started.set()
        while not stop.is_set():
            tnp.tanh(X)

    def profiled():  # a profile opened in another thread sees only its own ops
        with tg.profile() as p:
            tnp.exp(X)
            time.sleep(0.05)
        seen["worker"] = counts(p)

    t = threading.Thread(target=busy)
    t.start()
    started.wait()
    try:
        with tg.profile() as p:
            three_sines(X)
            worker = threading.Thread(target=profiled)  # started inside the block
            worker.start()
            worker.join()
            time.sleep(0.05)
    finally:
        stop.set()
        t.join()
    assert counts(p) == {("sin", "forward"): 3, ("mul", "forward"): 2, ("add", "forward"): 2,
                         ("sum", "forward"): 1}  # fmt: skip
    assert seen["worker"] == {("exp", "forward"): 1}
    assert {e.thread for e in p.events} == {threading.get_ident()}
    assert profiler.PROFILING[0] == 0


def test_asyncio_tasks_keep_their_own_profiles():
    async def task(n):
        with tg.profile() as p:
            for _ in range(n):
                tnp.sin(X)
                await asyncio.sleep(0)
        return counts(p)

    async def main():
        return await asyncio.gather(task(2), task(5))

    assert asyncio.run(main()) == [{("sin", "forward"): 2}, {("sin", "forward"): 5}]


def test_an_exception_inside_the_block_still_closes_the_profile():
    with pytest.raises(ValueError, match="boom"):
        with tg.profile() as p:
            three_sines(X)
            raise ValueError("boom")
    assert profiler.PROFILING[0] == 0 and profiler._SESSION.get() is None
    assert counts(p)[("sin", "forward")] == 3 and p.wall_s > 0
    wall = p.wall_s
    three_sines(X)  # after the block: not recorded, and the wall time is fixed
    assert counts(p)[("sin", "forward")] == 3 and p.wall_s == wall


def test_an_op_that_raises_is_counted_and_leaves_the_profile_usable():
    with tg.profile() as p:
        with pytest.raises(ValueError):
            tnp.add(tg.Tensor(np.ones(3)), tg.Tensor(np.ones(4)))
        with pytest.raises(ZeroDivisionError):  # raised inside a backward rule
            tg.grad(lambda x: _Boom.apply(x).sum())(X)
        three_sines(X)
    c = counts(p)
    assert c["add", "forward"] == 3 and c["sin", "forward"] == 3
    assert c["_boom", "backward"] == 1 and c[BACKWARD_PASS, "backward"] == 1


class _Boom(tg.Function):
    oper = "_boom"

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        raise ZeroDivisionError("boom")


def test_a_profile_is_used_once_and_has_a_repr():
    p = tg.profile()
    assert "closed" in repr(p) and p.wall_s == 0.0 and p.stats == {}
    with p:
        assert "open" in repr(p)
        three_sines(X)
    assert "8 calls of 4 ops" in repr(p)
    with pytest.raises(RuntimeError, match="already been used"):
        with p:
            pass


def test_no_profile_no_records_and_no_hook_state():
    assert profiler.PROFILING[0] == 0
    tg.grad(three_sines)(X)
    assert profiler._SESSION.get() is None


def test_ops_inside_an_op_nest_and_self_times_partition():
    """checkpoint's forward runs the function's ops (rows of their own, nested inside it);
    its backward rule recomputes and differentiates them (all inside the rule's row)."""
    with tg.profile() as p:
        tg.grad(lambda x: tg.checkpoint(three_sines)(x))(X)
    assert counts(p) == {
        ("checkpoint", "forward"): 1, ("sin", "forward"): 3, ("mul", "forward"): 2,
        ("add", "forward"): 2, ("sum", "forward"): 1,
        ("checkpoint", "backward"): 1, (BACKWARD_PASS, "backward"): 1,
    }  # fmt: skip
    s = p.stats
    inner = sum(s[op, "forward"].total_s for op in ("sin", "mul", "add", "sum"))
    ck = s["checkpoint", "forward"]
    assert ck.self_s == pytest.approx(ck.total_s - inner, abs=1e-9)
    (outer,) = [e for e in p.events if e.op == "checkpoint" and e.phase == "forward"]
    for e in p.events:
        if e.phase == "forward" and e.op != "checkpoint":
            assert outer.start_ns <= e.start_ns <= e.start_ns + e.duration_ns <= (
                outer.start_ns + outer.duration_ns)
