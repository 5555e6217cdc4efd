"""Control-flow bodies as programs: traced once per signature across calls, ``unroll``, and
tapes holding scan / while_loop / cond / switch entries written to JSON and read back."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.transforms import _body_cache

_RUNS: dict = {}  # how many times each counted Python body ran (a global: not a closure)


def _counted(fn, name):
    """``fn``, counting its runs in ``_RUNS[name]``."""
    _RUNS[name] = 0

    def wrapped(*a):
        _RUNS[name] += 1
        return fn(*a)

    return wrapped


def _r(*shape, seed=0):
    return tg.Tensor(np.random.default_rng(seed).normal(size=shape))


# -- the body trace cache -----------------------------------------------------------------------
def test_scan_body_traced_once_per_signature():
    _body_cache.clear()
    step = _counted(lambda c, x: (c * 0.5 + x, c.sum()), "step")
    xs = _r(5, 3)
    a = tg.scan(step, _r(3, seed=1), xs)
    b = tg.scan(step, _r(3, seed=2), xs * 2.0)
    assert _RUNS['step'] == 1
    # the reused body computes on the new values
    c, ys = b
    want = _r(3, seed=2)._concrete()
    for i in range(5):
        ys_i = want.sum()
        want = want * 0.5 + 2.0 * xs._concrete()[i]
        np.testing.assert_allclose(ys._concrete()[i], ys_i)
    np.testing.assert_allclose(c._concrete(), want)
    assert not np.allclose(a[0]._concrete(), c._concrete())
    # another shape, dtype or structure is another signature
    tg.scan(step, _r(4, seed=1), _r(5, 4))
    tg.scan(step, _r(3, seed=1).astype(np.float32), xs.astype(np.float32))
    assert _RUNS['step'] == 3


def test_cache_sees_new_closed_over_tensors():
    _body_cache.clear()
    _RUNS["model"] = 0

    def model(w, xs):
        def step(c, x):
            _RUNS["model"] += 1
            return tnp.tanh(c @ w + x), None

        return tg.scan(step, tg.Tensor(np.zeros(3)), xs)[0]

    xs = _r(4, 3)
    w1, w2 = _r(3, 3, seed=1), _r(3, 3, seed=2)
    out1 = model(w1, xs)
    out2 = model(w2, xs)  # a new function object, the same code, another concrete closure
    assert _RUNS["model"] == 2  # concrete closed-over Tensors are constants of the body: keyed
    model(w1, xs)
    assert _RUNS["model"] == 2
    assert not np.allclose(out1._concrete(), out2._concrete())

    # traced closures (the parameters under grad) are inputs of the body: traced once
    loss = lambda w: model(w, xs).sum()  # noqa: E731
    g1 = tg.grad(loss)(w1)
    n = _RUNS["model"]
    g2 = tg.grad(loss)(w2)
    g1b = tg.grad(loss)(w1)
    assert _RUNS["model"] == n
    np.testing.assert_allclose(g1._concrete(), g1b._concrete())
    assert not np.allclose(g1._concrete(), g2._concrete())

    def unrolled(w):
        c = tg.Tensor(np.zeros(3))
        for i in range(4):
            c = tnp.tanh(c @ w + xs[i])
        return c.sum()

    np.testing.assert_allclose(g2._concrete(), tg.grad(unrolled)(w2)._concrete(), rtol=1e-12)


def test_cache_nested_levels_and_hessian():
    """A body reused under other transform levels gives the values a fresh trace gives."""
    _body_cache.clear()
    xs = _r(3, 2)

    def f(w):
        def step(c, x):
            return c * w + tnp.sin(x * w), c

        return tg.scan(step, tg.Tensor(np.ones(2)), xs)[0].sum()

    w = _r(2, seed=3)
    h1 = tg.hessian(f)(w)
    g1 = tg.grad(f)(w)
    v1 = tg.vmap(tg.grad(f))(tg.Tensor(np.stack([w._concrete(), w._concrete() * 2])))
    _body_cache.clear()
    h2 = tg.hessian(f)(w)
    _body_cache.clear()
    g2 = tg.grad(f)(w)
    np.testing.assert_allclose(h1._concrete(), h2._concrete(), rtol=1e-12)
    np.testing.assert_allclose(g1._concrete(), g2._concrete(), rtol=1e-12)
    np.testing.assert_allclose(v1._concrete()[0], g1._concrete(), rtol=1e-12)
    # grad of a function whose inner grad closes over an outer traced value
    inner = lambda x: tg.grad(lambda y: tg.scan(  # noqa: E731
        lambda c, _: (c * y * x, None), y, None, length=2)[0])(x)
    np.testing.assert_allclose(float(tg.grad(inner)(tg.Tensor(1.5))),
                               float(tg.grad(inner)(tg.Tensor(1.5))))


def test_while_and_switch_bodies_traced_once():
    _body_cache.clear()
    cond_fun = _counted(lambda v: v < 10.0, "cond")
    body_fun = _counted(lambda v: v * 1.5, "body")
    for x in (1.0, 2.0, 3.0):
        got = tg.while_loop(cond_fun, body_fun, tg.Tensor(x))
        want = x
        while want < 10.0:
            want *= 1.5
        assert float(got) == pytest.approx(want)
    assert (_RUNS['cond'], _RUNS['body']) == (1, 1)
    a = _counted(lambda v: v + 1.0, "a")
    b = _counted(lambda v: v * 10.0, "b")
    assert [float(tg.switch(i, [a, b], tg.Tensor(2.0))) for i in (0, 1, 1, 0)] == [
        3.0, 20.0, 20.0, 3.0]
    t = _counted(lambda v: v * v, "t")
    for p in (True, False, True):
        tg.cond(p, t, a, tg.Tensor(2.0))
    assert (_RUNS['a'], _RUNS['b'], _RUNS['t']) == (2, 1, 1)


def test_uncacheable_closures_are_traced_every_call():
    """A body closing over a writeable array is traced afresh: a write is seen."""
    _body_cache.clear()
    arr = np.ones(3)
    _RUNS["arr"] = 0

    def step(c, x):
        _RUNS["arr"] += 1
        return c + tg.Tensor(arr) * x, None

    xs = _r(2, 1)
    first = tg.scan(step, tg.Tensor(np.zeros(3)), xs)[0]
    arr[:] = 2.0
    second = tg.scan(step, tg.Tensor(np.zeros(3)), xs)[0]
    assert _RUNS["arr"] == 2
    np.testing.assert_allclose(second._concrete(), 2.0 * first._concrete())


def test_jitted_grad_reuses_the_traced_bodies():
    _body_cache.clear()
    _RUNS["jit"] = 0

    def loss(w, xs):
        def step(h, x):
            _RUNS["jit"] += 1
            return tnp.tanh(h @ w + x), (h * h).sum()

        h, ys = tg.scan(step, tg.Tensor(np.zeros(3)), xs)
        return ys.sum() + h.sum()

    g = tg.grad(loss)
    w, xs = _r(3, 3, seed=4), _r(6, 3)
    want = g(w, xs)
    n = _RUNS["jit"]
    got = tg.jit(g)(w, xs)
    assert _RUNS["jit"] == n
    np.testing.assert_allclose(got._concrete(), want._concrete(), rtol=1e-12)


# -- unroll -------------------------------------------------------------------------------------
@pytest.mark.parametrize("reverse", [False, True])
def test_unroll_gives_identical_results(reverse):
    w = _r(3, 3, seed=5)
    xs = _r(7, 3, seed=6)

    def loss(w, xs, unroll):
        def step(c, x):
            c = tnp.tanh(c @ w + x)
            return c, (c * c).sum()

        c, ys = tg.scan(step, tg.Tensor(np.ones(3)), xs, reverse=reverse, unroll=unroll)
        return (ys * ys).sum() + c.sum()

    base_v = loss(w, xs, 1)._concrete()
    base_g = tg.grad(loss, argnums=(0, 1))(w, xs, 1)
    base_h = tg.hessian(lambda w: loss(w, xs, 1))(w)._concrete()
    for unroll in (2, 3, 7, 20, True, False):
        assert np.array_equal(loss(w, xs, unroll)._concrete(), base_v), unroll
        g = tg.grad(loss, argnums=(0, 1))(w, xs, unroll)
        for a, b in zip(g, base_g):
            np.testing.assert_allclose(a._concrete(), b._concrete(), rtol=1e-13, atol=1e-15)
        jg = tg.jit(tg.grad(loss), static_argnums=2)(w, xs, unroll)
        np.testing.assert_allclose(jg._concrete(), base_g[0]._concrete(), rtol=1e-13)
        h = tg.hessian(lambda w: loss(w, xs, unroll))(w)._concrete()  # noqa: B023
        np.testing.assert_allclose(h, base_h, rtol=1e-12, atol=1e-14)
    # under vmap, and through the jvp
    ws = tg.Tensor(np.stack([w._concrete(), 2 * w._concrete()]))
    np.testing.assert_allclose(tg.vmap(lambda w: loss(w, xs, 3))(ws)._concrete(),
                               tg.vmap(lambda w: loss(w, xs, 1))(ws)._concrete(), rtol=1e-13)
    t = _r(3, 3, seed=7)
    np.testing.assert_allclose(tg.jvp(lambda w: loss(w, xs, 4), (w,), (t,))[1]._concrete(),
                               tg.jvp(lambda w: loss(w, xs, 1), (w,), (t,))[1]._concrete(),
                               rtol=1e-13)


def test_unroll_runs_chunks_of_the_body():
    """``unroll=4`` over 10 steps: two trips of a body holding 4 copies, two single steps."""
    step = lambda c, x: (c * 0.5 + x, c)  # noqa: E731
    xs = _r(10, 2)
    f = tg.jit(lambda xs: tg.scan(step, tg.Tensor(np.zeros(2)), xs, unroll=4))
    c1, y1 = f(xs)
    c0, y0 = tg.scan(step, tg.Tensor(np.zeros(2)), xs)
    assert np.array_equal(c1._concrete(), c0._concrete())
    assert np.array_equal(y1._concrete(), y0._concrete())
    (entry,) = [e for e in f.lower(xs).tape.entries if e.fn.oper == "scan"]
    body = entry.params["body"]
    assert entry.params["unroll"] == 4
    (unrolled,) = [b for k, b in body._derived.items() if k[:2] == ("unroll", 4)]
    count = lambda b, op: sum(e.fn.oper == op for e in b.tape.entries)  # noqa: E731
    assert count(body, "mul") == 1 and count(unrolled, "mul") == 4


@pytest.mark.parametrize("bad,err", [(0, ValueError), (-2, ValueError), (2.0, TypeError),
                                     ("2", TypeError), (None, TypeError)])
def test_unroll_validation(bad, err):
    with pytest.raises(err, match="scan: unroll must be"):
        tg.scan(lambda c, x: (c + x, None), tg.Tensor(0.0), tg.Tensor([1.0, 2.0]), unroll=bad)


# -- tapes with control-flow entries as files ---------------------------------------------------
W = tg.Tensor(np.random.default_rng(8).normal(size=(3, 3)) / 2)  # a constant the bodies read


def _scan_loss(x):
    def step(c, xi):
        c = tnp.tanh(c @ W + xi * x.sum())
        return c, (c * c).sum()

    c, ys = tg.scan(step, x, tg.Tensor(np.linspace(0.0, 1.0, 12).reshape(4, 3)), unroll=2)
    return ys.sum() + c.sum()


def _while_loss(x):
    v = tg.while_loop(lambda v: (v[0] * v[0]).sum() < 50.0, lambda v: (v[0] * 1.3 + W[0], v[1] + 1),
                      (x, tg.Tensor(np.int64(0))))
    return (v[0] * v[0]).sum() + tg.fori_loop(0, tg.Tensor(np.int64(3)),
                                              lambda i, u: u * x.sum(), x).sum()


def _cond_loss(x):
    a = tg.cond(x.sum() > 0, lambda v: tnp.sin(v) @ W, lambda v: v * 2.0, x)
    b = tg.switch((x[0] > 0).astype(np.int64) + 1,
                  [lambda v: v, lambda v: tnp.exp(v), lambda v: v * W[1]], x)
    return (a * b).sum()


LOSSES = {"scan": _scan_loss, "while_loop": _while_loss, "cond and switch": _cond_loss}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_control_flow_tapes_round_trip(name, tmp_path):
    f = LOSSES[name]
    x = tg.Tensor(np.array([0.3, -0.2, 0.5]))
    _, tape = tg.trace(tg.grad(f))(x)
    text = tape.to_json(arrays=tmp_path / "c.safetensors")
    assert "__subprogram__" in text
    loaded = tg.Tape.from_json(text)
    assert str(loaded) == str(tape)
    for arg in (x, x * 1.5, -x):
        np.testing.assert_allclose(loaded.replay(arg).numpy(), tg.grad(f)(arg).numpy(),
                                   rtol=1e-12)
    np.testing.assert_allclose(tg.jit(loaded.replay)(x * 0.5).numpy(),
                               tg.grad(f)(x * 0.5).numpy(), rtol=1e-12)
    # the loaded bodies differentiate again: the gradient of the replayed gradient
    np.testing.assert_allclose(tg.jacfwd(loaded.replay)(x).numpy(),
                               tg.hessian(f)(x).numpy(), rtol=1e-9, atol=1e-12)


def _scan_doc(tmp_path):
    _, tape = tg.trace(tg.grad(_scan_loss))(tg.Tensor(np.array([0.3, -0.2, 0.5])))
    doc = json.loads(tape.to_json(arrays=tmp_path / "c.safetensors"))
    (i,) = [i for i, e in enumerate(doc["entries"]) if e.get("op", "").endswith(":Scan")][:1]
    return doc, i


def _edit(doc, i, fn):
    bad = json.loads(json.dumps(doc))
    fn(bad["entries"][i]["params"])
    return json.dumps(bad)


def _sub(p):
    return p["body"]["tape"]


NESTED_CASES = {
    "unknown kind": (lambda p: p["body"].update({"__subprogram__": "os.system"}),
                     r"'os.system' is not a kind of sub-program"),
    "name not a string": (lambda p: p["body"].update(name=3), "malformed sub-program name"),
    "missing tape field": (lambda p: _sub(p).pop("entries"), "malformed sub-program"),
    "extra field": (lambda p: p["body"].update(code="x"), "fields"),
    "nested node used before defined": (
        lambda p: _sub(p)["entries"][0].update({"in": [999, 0]}), r"sub-program.*entry 0 .*node"),
    "nested unknown op": (lambda p: _sub(p)["entries"][0].update(op="builtins:eval"),
                          r"sub-program.*entry 0"),
    "nested bad dtype": (lambda p: _sub(p)["avals"][0].__setitem__(1, "|O"),
                         r"sub-program.*dtype"),
    "body arity": (lambda p: p.update(n_carry=7), r"entry \d+ \(scan\): .*inputs"),
    "carry types": (lambda p: _sub(p)["out_avals"][0].__setitem__(1, "<f4"), r"out_avals|carry"),
    "unroll zero": (lambda p: p.update(unroll=0), r"\(scan\): the parameter 'unroll'"),
    "body not a sub-program": (lambda p: p.update(body=1.0), r"\(scan\): .*'body'"),
    "residuals not a triple": (lambda p: p.update(residuals={"__tuple__": [1.0]}),
                               r"\(scan\): the parameter 'residuals'"),
    "residual policy": (lambda p: p["residuals"]["__tuple__"].__setitem__(
        1, {"__tuple__": [3]}), r"\(scan\): the residual policy's save_only"),
    "residuals of another body": (
        lambda p: p.update(body=p["residuals"]["__tuple__"][0],
                           residuals={"__tuple__": [p["body"], None, None]}),
        r"\(scan\): the body .* does not take the inputs and return the outputs of its base"),
}


@pytest.mark.parametrize("case", sorted(NESTED_CASES))
def test_malformed_sub_programs_are_named_value_errors(case, tmp_path):
    doc, i = _scan_doc(tmp_path)
    edit, message = NESTED_CASES[case]
    with pytest.raises(ValueError, match=message):
        tg.Tape.from_json(_edit(doc, i, edit))


def test_malformed_while_and_switch_entries(tmp_path):
    x = tg.Tensor(np.array([0.3, -0.2, 0.5]))
    for f, op, edit, message in [
        (_while_loss, ":While", lambda p: p["cond_body"]["tape"]["out_avals"][0].__setitem__(
            1, "<f8"), r"out_avals|predicate"),
        (_while_loss, ":While", lambda p: p.update(n_cconsts=50), r"\(while\): .*inputs"),
        (_cond_loss, ":Switch", lambda p: p.update(spans={"__tuple__": []}), r"'spans'"),
        (_cond_loss, ":Switch", lambda p: p.update(branches={"__tuple__": []}), r"'branches'"),
    ]:
        _, tape = tg.trace(f)(x)
        doc = json.loads(tape.to_json(arrays=tmp_path / "c.safetensors"))
        i = next(i for i, e in enumerate(doc["entries"]) if e.get("op", "").endswith(op))
        with pytest.raises(ValueError, match=message):
            tg.Tape.from_json(_edit(doc, i, edit))


# -- linearize through structured control flow ----------------------------------------------------
def test_linearize_through_scan_while_and_cond():
    x = tg.Tensor(np.array([0.3, -0.2, 0.5]))
    t = tg.Tensor(np.array([1.0, 0.5, -2.0]))

    def f(x):
        c, ys = tg.scan(lambda c, xi: (tnp.sin(c) * xi + c @ W, (c * c).sum()), x,
                        tg.Tensor(np.linspace(0.5, 1.0, 6).reshape(2, 3)))
        v = tg.while_loop(lambda v: (v * v).sum() < 30.0, lambda v: v * 1.7 + 0.1, c)
        return tg.cond(v.sum() > 0, lambda u: u * ys.sum(), lambda u: tnp.exp(u), v)

    y, f_jvp = tg.linearize(f, x)
    np.testing.assert_allclose(y.numpy(), f(x).numpy(), rtol=1e-13)
    want = tg.jvp(f, (x,), (t,))[1].numpy()
    np.testing.assert_allclose(f_jvp(t).numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(f_jvp(2.0 * t).numpy(), 2.0 * want, rtol=1e-12)
    # the same as the Jacobian from reverse mode, and a finite difference
    np.testing.assert_allclose(f_jvp(t).numpy(), tg.jacrev(f)(x).numpy() @ t.numpy(), rtol=1e-12)
    eps = 1e-6
    fd = (f(x + eps * t).numpy() - f(x - eps * t).numpy()) / (2 * eps)
    np.testing.assert_allclose(f_jvp(t).numpy(), fd, rtol=1e-6, atol=1e-8)


# -- a compiled program drops a loop's outputs nothing reads (Traits.prune) ---------------------
def _all_functions(cls=tg.Function):
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_functions(sub)


def _loop_losses():
    """Per op with a prune rule, functions whose tapes hold entries of it with outputs that a
    program may leave unread (a scan's ys and saved carries, a while loop's saved carries)."""
    def scan_loss(x):
        def step(c, xi):
            c = tnp.tanh(c @ W + xi * x.sum())
            return c, {"a": (c * c).sum(), "b": tnp.sin(c)}

        c, ys = tg.scan(step, x, tg.Tensor(np.linspace(0.0, 1.0, 12).reshape(4, 3)))
        return ys["a"].sum() + c.sum() + ys["b"][1].sum()

    def scan_remat_loss(x):
        def step(c, xi):
            return tnp.sin(c * xi + x), c.sum()

        c, ys = tg.scan(step, x, tg.Tensor(np.ones((3, 3))), remat=True)
        return ys.sum() * c.sum()

    return {"scan": [tg.grad(scan_loss), tg.grad(scan_remat_loss), scan_loss],
            "while": [tg.grad(_while_loss), _while_loss]}


def test_every_prune_rule_keeps_the_outputs_it_names():
    """For every op that declares ``Traits.prune``, and every set of outputs a program could
    leave unread, the pruned call gives the kept outputs of the full call, to the bit."""
    from tapegrad.core.program import _run_step
    from tapegrad.core.tensor import Tensor
    from tapegrad.core.trace import apply_step, interpret

    pruning = {f.oper for f in _all_functions() if f.traits.prune is not None}
    losses = _loop_losses()
    assert pruning == set(losses)  # every rule is checked here
    x = tg.Tensor(np.array([0.3, -0.2, 0.5]))
    for oper, fns in losses.items():
        seen = 0
        for f in fns:
            _, tape = tg.trace(f)(x)
            env = interpret(tape.entries, {tape.in_nodes[0]: x}, apply_step, "test")
            for e in [e for e in tape.entries if getattr(e, "oper", None) == oper]:
                arrays = [env[n]._concrete() if n >= 0 else
                          (c._concrete() if isinstance(c, Tensor) else c)
                          for n, c in zip(e.in_nodes, e.consts)]
                full = _run_step(e.fn, e.params, arrays, "cpu")
                n = len(e.out_nodes)
                for mask in range(2 ** n):
                    used = tuple(bool(mask >> i & 1) for i in range(n))
                    got = e.fn.traits.prune(e.params, used)
                    if got is None:
                        continue
                    params, kept = got
                    assert list(kept) == sorted(set(kept)) and len(kept) < n
                    assert all(i in kept for i in range(n) if used[i])
                    outs = _run_step(e.fn, params, arrays, "cpu")
                    assert len(outs) == len(kept)
                    for o, i in zip(outs, kept):
                        np.testing.assert_array_equal(o, full[i])
                    seen += 1
        assert seen  # each op dropped something somewhere


def test_jit_drops_loop_outputs_nothing_reads():
    """Under ``jit`` a loop computes only what the program reads: a gradient needs no per-step
    output that only the loss value read, a reverse scan's saved carries are read by no one, and
    a forward-only loop saves none. The values are eager's."""
    x = tg.Tensor(np.array([0.3, -0.2, 0.5]))

    def loops(lines):
        return [(len(ln.split(" = ")[0].split()), ln) for ln in lines
                if "scan[" in ln or "while[" in ln]

    for name, fns in _loop_losses().items():
        for k, f in enumerate(fns):
            jitted = tg.jit(f)
            np.testing.assert_allclose(jitted(x).numpy(), f(x).numpy(), rtol=1e-13)
            got = loops(str(jitted.lower(x)).splitlines())
            _, tape = tg.trace(f)(x)
            recorded = [len(e.out_nodes) for e in tape.entries
                        if getattr(e, "oper", None) in ("scan", "while")]
            assert len(got) == len(recorded) and all(
                n <= m for (n, _), m in zip(got, recorded))
            for _, line in got:
                if "{vjp(" in line or k == len(fns) - 1:  # a reverse scan, or no gradient
                    assert "save=False" in line, line
            if name == "scan" and k == 0:  # the per-step ys: only the loss value read them
                assert got[0][0] < recorded[0]




# -- the loop as generated code -----------------------------------------------------------------
def _loop_bodies():
    """Bodies (of the scan's carry, row and a closed-over constant ``k``) that stress the
    generated loop: carries swapped and passed through, per-step outputs that are an input row,
    a carry or a constant, a constant read once (its name must survive to the next
    iteration), 0-d rows, several xs, integer carries, no xs."""
    w = _r(3, 3, seed=12)
    return {
        "swap": (lambda k: lambda c, x: ((c[1], c[0] * x), c[0].sum()),
                 (np.ones(3), np.full(3, 2.0)), _r(6, 3, seed=1)),
        "pass-through": (lambda k: lambda c, x: ((c[0], c[1] + x * k), c[0]),
                         (np.ones(3), np.zeros(3)), _r(5, 3, seed=2)),
        "y-is-row": (lambda k: lambda c, x: (tnp.tanh(c @ w) + x, x), np.ones(3),
                     _r(4, 3, seed=3)),
        "y-is-const": (lambda k: lambda c, x: (c * x + 1.0, k), np.ones(3), _r(4, 3, seed=4)),
        "const-read-once": (lambda k: lambda c, x: (tnp.sin(c + k) * x, c), np.zeros(3),
                            _r(4, 3, seed=5)),
        "scalar-rows": (lambda k: lambda c, x: (c * x[0] + x[1], tnp.exp(c).sum()), np.ones(3),
                        (_r(6, seed=6), _r(6, seed=7))),
        "int-counter": (lambda k: lambda c, x: ((c[0] + 1, c[1] * 0.9 + x + k), c[0] * 2),
                        (np.array(0), np.ones(3)), _r(5, 3, seed=8)),
        "no-xs": (lambda k: lambda c, _: (c * 0.5 + k, c.sum()), np.ones(3), None),
    }


@pytest.mark.parametrize("name", sorted(_loop_bodies()))
@pytest.mark.parametrize("reverse", [False, True])
def test_generated_loop_equals_one_call_per_iteration(name, reverse, monkeypatch):
    """Every loop body runs the same, bit for bit, as the generated loop and one compiled call
    per iteration (the path ``tg.debug_nans`` and first runs take): values, and gradients
    through the reverse scan of the body's backward (a loop of its own), eager and jitted."""
    from tapegrad.transforms import control

    make, init, xs = _loop_bodies()[name]
    length = 5 if xs is None else None
    k0 = _r(3, seed=11)

    def run(xs, k):
        return tg.scan(make(k), init, xs, length=length, reverse=reverse)

    def loss(xs, k):
        leaves = [v for v in tg.tree.tree_leaves(run(xs, k))
                  if tnp.issubdtype(v.dtype, np.floating)]
        return sum(((v * v).sum() for v in leaves), tg.Tensor(0.0))

    def results():  # eager, jitted (k a traced constant of the body), gradients of both
        out = [run(xs, k0), tg.jit(run)(xs, k0), tg.grad(loss, argnums=1)(xs, k0),
               tg.jit(tg.grad(loss, argnums=1))(xs, k0)]
        if xs is not None:
            out += [tg.grad(loss)(xs, k0), tg.jit(tg.grad(loss))(xs, k0)]
        return [np.asarray(v._concrete()) for v in tg.tree.tree_leaves(out)]

    calls = []
    made = control.Body.looper

    def counting(self, *a):
        fn = made(self, *a)
        calls.append(fn is not None)
        return fn

    monkeypatch.setattr(control.Body, "looper", counting)
    got = results()
    assert any(calls), "the generated loop never ran"
    monkeypatch.setattr(control.Body, "looper", lambda self, *a: None)
    want = results()
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(a, b), (name, a, b)


def test_generated_loop_length_zero_and_unroll_rest():
    """No iterations leave the carry as it was; ``unroll=k`` runs its whole chunks as one body
    and the iterations left over through the generated loop."""
    step = lambda c, x: (c * 0.5 + x, c)  # noqa: E731
    c, ys = tg.jit(lambda xs: tg.scan(step, np.ones(2), xs))(np.zeros((0, 2)))
    assert np.array_equal(c._concrete(), np.ones(2)) and ys.shape == (0, 2)
    xs = _r(11, 2, seed=9)
    c3, y3 = tg.jit(lambda xs: tg.scan(step, np.ones(2), xs, unroll=4))(xs)
    c1, y1 = tg.scan(step, np.ones(2), xs)
    np.testing.assert_allclose(c3._concrete(), c1._concrete(), rtol=1e-15)
    np.testing.assert_allclose(y3._concrete(), y1._concrete(), rtol=1e-15)


@pytest.mark.parametrize("reverse", [False, True])
def test_residuals_that_are_outputs_are_not_stored_twice(reverse):
    """A tanh's output kept for its backward that is also the next carry (``h``) or a per-step
    output (``e``) is read from the saved carries shifted by one iteration (and the final
    carry) or from the stacked ``ys``: the forward stacks only the other residuals. Gradients
    equal the unrolled loop's at orders 1 and 2; no iterations give zeros."""
    from tapegrad.transforms import control

    w = _r(3, 3, seed=21)
    xs = _r(6, 3, seed=22)

    def step(w):
        def f(h, x):
            h = tnp.tanh(h @ w + x)
            e = tnp.exp(x * h)
            return h, e

        return f

    def loss(w, xs):
        h, es = tg.scan(step(w), tg.Tensor(np.ones(3)), xs, reverse=reverse)
        return (h * h).sum() + (es * es).sum()

    def unrolled(w, xs):
        h, total = tg.Tensor(np.ones(3)), 0.0
        for i in (range(xs.shape[0] - 1, -1, -1) if reverse else range(xs.shape[0])):
            h = tnp.tanh(h @ w + xs[i])
            total = total + (tnp.exp(xs[i] * h) ** 2).sum()
        return (h * h).sum() + total

    made = []
    real = control._residual_forward_body

    def spy(plan, **kw):
        made.append((plan, real(plan, **kw)))
        return made[-1][1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(control, "_residual_forward_body", spy)
        g = tg.grad(loss, argnums=(0, 1))(w, xs)
    plan, fwd = made[0]
    tape = plan.body.tape
    n_outs = len(tape.out_refs)
    in_outputs = [v for v in plan.kept if v in set(tape.out_refs)]
    assert len(in_outputs) == 2  # tanh's and exp's outputs: the carry and the per-step y
    assert len(fwd.out_avals) == n_outs + len(plan.kept) - 2  # only the others are stacked
    for a, b in zip(g, tg.grad(unrolled, argnums=(0, 1))(w, xs)):
        np.testing.assert_allclose(a._concrete(), b._concrete(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(tg.hessian(loss)(w, xs)._concrete(),
                               tg.hessian(unrolled)(w, xs)._concrete(), rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(tg.jit(tg.grad(loss))(w, xs)._concrete(),
                               g[0]._concrete(), rtol=1e-13, atol=1e-15)
    empty = np.zeros((0, 3))
    assert np.array_equal(tg.grad(loss)(w, empty)._concrete(), np.zeros((3, 3)))
