"""Binomial checkpointing (``checkpoint=k``) of reverse mode through while_loop, scan and
fori_loop: the schedule (optimal recomputation, at most k carries), gradients equal to the
default mode and to finite differences, pytree carries, order two, jit, vmap, errors."""

from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.transforms import _revolve


def f64(v):
    return tg.Tensor(np.asarray(v, dtype=np.float64))


def close(a, b, tol=1e-11):
    for u, v in zip(tg.tree.tree_leaves(a), tg.tree.tree_leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=tol, atol=tol)


# -- the schedule -------------------------------------------------------------------------------
@lru_cache(None)
def least_advances(length, slots):
    """The least recomputed steps reversing ``length`` steps with ``slots`` carries held
    (the start's included), by brute force over every first split."""
    if length <= 1:
        return 0
    if slots == 1:
        return length * (length - 1) // 2
    return min(j + least_advances(length - j, slots - 1) + least_advances(j, slots)
               for j in range(1, length))


def run_schedule(n, k):
    """The schedule on a symbolic loop: a carry is the list of steps applied so far."""
    seen, held = [], []

    def advance(t, carry):
        assert carry == list(range(t))  # the carry at the start of step t
        return carry + [t]

    def back(t, carry):
        assert carry == list(range(t))
        seen.append(t)

    stats = _revolve.reverse_steps(n, k, [], advance, back)
    return seen, stats, held


@settings(deadline=None, max_examples=60, derandomize=True)
@given(n=st.integers(0, 70), k=st.integers(1, 9))
def test_schedule_reverses_every_step_with_at_most_k_carries_and_optimal_recomputation(n, k):
    seen, stats, _ = run_schedule(n, k)
    assert seen == list(range(n - 1, -1, -1))
    assert stats["peak"] <= k
    assert stats["advances"] == least_advances(n, k) == _revolve.optimal_advances(n, k)


def test_schedule_memory_grows_with_the_log_of_the_trip_count():
    # 100,000 steps with 50 carries: four sweeps (C(54, 4) >= 1e5 > C(53, 3))
    assert _revolve.optimal_advances(100_000, 50) < 4 * 100_000
    stats = _revolve.reverse_steps(100_000, 50, 0, lambda t, c: c + 1, lambda t, c: None)
    assert stats["peak"] == 50
    assert stats["advances"] == _revolve.optimal_advances(100_000, 50)


# -- gradients ----------------------------------------------------------------------------------
def while_loss(x, w, limit, checkpoint):
    """A pytree carry (a dict of a vector, a scalar and an int counter) run until the counter
    reaches ``limit`` (data: the trip count is read at run time)."""

    def body(c):
        v = c["v"] * w + 0.1 * tnp.sin(c["v"] + c["s"])
        return {"v": v, "s": c["s"] * 0.9 + v.sum() * 0.01, "i": c["i"] + 1}

    out = tg.while_loop(lambda c: c["i"] < limit, body,
                        {"v": x, "s": f64(0.3), "i": tg.Tensor(np.int64(0))},
                        checkpoint=checkpoint)
    return (out["v"] ** 2).sum() + out["s"] ** 2


def scan_loss(x, w, xs, reverse, checkpoint):
    def step(c, x_i):
        h, s = c
        h = tnp.tanh(h * w + x_i)
        return (h, s + (h * x_i).sum()), {"y": h.sum() * s, "z": h * 2.0}

    (h, s), ys = tg.scan(step, (x, f64(0.0)), xs, reverse=reverse, checkpoint=checkpoint)
    return (h ** 2).sum() + s + (ys["y"] ** 2).sum() + ys["z"].sum()


def fd_grad(f, x, eps=1e-6):
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (float(f(f64(x + d))) - float(f(f64(x - d)))) / (2 * eps)
    return g


@settings(deadline=None, max_examples=12, derandomize=True)
@given(n=st.integers(0, 9), k=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_while_loop_gradients_equal_the_default_mode_and_finite_differences(n, k, seed):
    rng = np.random.default_rng(seed)
    x, w = f64(rng.normal(size=3)), f64(rng.uniform(0.5, 1.1))
    limit = tg.Tensor(np.int64(n))
    want = tg.grad(lambda x, w: while_loss(x, w, limit, None), argnums=(0, 1))(x, w)
    with _revolve.recording() as rec:
        got = tg.grad(lambda x, w: while_loss(x, w, limit, k), argnums=(0, 1))(x, w)
    close(got, want)
    assert [(r["n"], r["peak"] <= k) for r in rec] == [(n, True)]
    assert rec[0]["advances"] == _revolve.optimal_advances(n, k)
    close(got[0], fd_grad(lambda a: while_loss(a, w, limit, k), x), tol=1e-6)


@settings(deadline=None, max_examples=12, derandomize=True)
@given(n=st.integers(0, 8), k=st.integers(1, 4), reverse=st.booleans(),
       seed=st.integers(0, 2**16))
def test_scan_gradients_equal_the_default_mode_and_finite_differences(n, k, reverse, seed):
    rng = np.random.default_rng(seed)
    x, w = f64(rng.normal(size=2)), f64(rng.uniform(0.5, 1.1))
    xs = f64(rng.normal(size=(n, 2)))
    argnums = (0, 1, 2)
    want = tg.grad(lambda *a: scan_loss(*a, reverse, None), argnums=argnums)(x, w, xs)
    with _revolve.recording() as rec:
        got = tg.grad(lambda *a: scan_loss(*a, reverse, k), argnums=argnums)(x, w, xs)
    close(got, want)
    assert len(rec) == 1 and rec[0]["n"] == n and rec[0]["peak"] <= k
    close(got[2], fd_grad(lambda a: scan_loss(x, w, a, reverse, k), xs), tol=1e-6)
    close(got[0], fd_grad(lambda a: scan_loss(a, w, xs, reverse, k), x), tol=1e-6)


@pytest.mark.parametrize("bounds", ["static", "traced"])
def test_fori_loop_checkpoint_static_and_traced_bounds(bounds):
    w = f64(0.8)

    def loss(x, checkpoint):
        hi = 7 if bounds == "static" else tg.Tensor(np.int64(7))
        v = tg.fori_loop(0, hi, lambda i, v: tnp.sin(v * w) + 0.1 * i, x, checkpoint=checkpoint)
        return (v ** 2).sum()

    x = f64([0.3, -0.7])
    with _revolve.recording() as rec:
        got = tg.grad(loss)(x, 2)
    close(got, tg.grad(loss)(x, None))
    close(got, fd_grad(lambda a: loss(a, 2), x), tol=1e-6)
    assert [(r["n"], r["peak"]) for r in rec] == [(7, 2)]


def test_checkpointed_forward_keeps_no_carries():
    """The forward entry of a checkpointed loop outputs the final carry (and a while loop's
    trip count) only; the default mode stacks one carry per iteration."""
    def loss(x, checkpoint):
        return tg.scan(lambda c, _: (tnp.sin(c), None), x, None, length=40,
                       checkpoint=checkpoint)[0].sum()

    def wloss(x, checkpoint):
        return tg.while_loop(lambda c: c[1] < 40, lambda c: (tnp.sin(c[0]), c[1] + 1),
                             (x, tg.Tensor(np.int64(0))), checkpoint=checkpoint)[0].sum()

    x = f64(np.ones(4))
    for f, oper in ((loss, "scan"), (wloss, "while")):
        shapes = {}
        for ck in (None, 3):
            _, tape = tg.trace(lambda x, f=f, ck=ck: tg.grad(f)(x, ck))(x)
            fwd = [e for e in tape.entries if e.oper == oper][0]
            shapes[ck] = [tape.avals[v][0] for v in fwd.out_nodes]
            assert ("revolve" in [e.oper for e in tape.entries]) == (ck is not None)
        assert (40, 4) in shapes[None]
        assert all(s in ((4,), (), (40,)) and s != (40, 4) for s in shapes[3]), shapes


# -- order two, jit, vmap ---------------------------------------------------------------------
def test_second_order_through_a_checkpointed_while_loop_and_scan():
    x, w = f64([0.4, -0.2, 0.9]), f64(0.95)
    limit = tg.Tensor(np.int64(6))
    xs = f64(np.linspace(-1, 1, 10).reshape(5, 2))
    def check(f):
        close(tg.hessian(lambda x: f(x, 2))(x), tg.hessian(lambda x: f(x, None))(x))
        gg = tg.grad(lambda x: (tg.grad(lambda y: f(y, 2))(x) ** 2).sum())
        close(gg(x), tg.grad(lambda x: (tg.grad(lambda y: f(y, None))(x) ** 2).sum())(x))
        # forward over reverse
        t = f64([1.0, 0.5, -0.25])
        close(tg.jvp(tg.grad(lambda x: f(x, 2)), (x,), (t,)),
              tg.jvp(tg.grad(lambda x: f(x, None)), (x,), (t,)))

    check(lambda x, ck: while_loss(x, w, limit, ck))
    check(lambda x, ck: scan_loss(x[:2], w, xs, True, ck) + x[2] ** 3)


def test_jit_of_a_checkpointed_gradient_runs_any_trip_count_and_does_not_grow():
    w = f64(0.9)
    jg = tg.jit(tg.grad(lambda x, lim: while_loss(x, w, lim, 3)))
    x = f64([0.2, 0.1, -0.3])
    for n in (0, 1, 5, 30):
        lim = tg.Tensor(np.int64(n))
        with _revolve.recording() as rec:
            got = jg(x, lim)
        close(got, tg.grad(lambda x, lim=lim: while_loss(x, w, lim, None))(x))
        assert [(r["n"], r["peak"] <= 3) for r in rec] == [(n, True)]

    def make(n):
        def loss(x):
            return tg.scan(lambda c, _: (tnp.tanh(c * w + 0.1), None), x, None, length=n,
                           checkpoint=4)[0].sum()
        return tg.jit(tg.grad(loss)).lower(x)

    small, big = make(10), make(1000)
    assert (small.steps, len(small.source)) == (big.steps, len(big.source))


def test_vmap_of_a_checkpointed_gradient_each_member_its_trip_count():
    w = f64(0.9)
    xs = f64(np.linspace(-1, 1, 9).reshape(3, 3))
    lims = tg.Tensor(np.array([0, 3, 7], dtype=np.int64))
    with _revolve.recording() as rec:
        got = tg.vmap(tg.grad(lambda x, lim: while_loss(x, w, lim, 2)))(xs, lims)
    want = tnp.stack([tg.grad(lambda x, i=i: while_loss(x, w, lims[i], None))(xs[i])
                      for i in range(3)])
    close(got, want)
    assert sorted(r["n"] for r in rec) == [0, 3, 7] and all(r["peak"] <= 2 for r in rec)
    # the gradient of a vmapped loop (the batched loop runs until every member is done)
    got2 = tg.grad(lambda a: tg.vmap(lambda x, lim: while_loss(x, w, lim, 2))(a, lims).sum())(xs)
    close(got2, want)
    ys = f64(np.linspace(0, 1, 12).reshape(3, 4, 1))
    got3 = tg.vmap(tg.grad(lambda x, s: scan_loss(x, w, s, False, 2)))(xs[:, :2], ys)
    want3 = tnp.stack([tg.grad(lambda x, i=i: scan_loss(x, w, ys[i], False, None))(
        xs[i, :2])
                       for i in range(3)])
    close(got3, want3)


# -- errors -------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad, exc, msg", [
    (0, ValueError, "got 0"), (-3, ValueError, "got -3"), (2.5, TypeError, "float 2.5"),
    (True, TypeError, "bool True"), ("4", TypeError, "str '4'")])
def test_bad_checkpoint_values_name_the_function_and_the_argument(bad, exc, msg):
    x = f64([1.0])
    calls = {
        "scan": lambda: tg.scan(lambda c, _: (c, None), x, None, length=2, checkpoint=bad),
        "while_loop": lambda: tg.while_loop(lambda c: c.sum() < 0, lambda c: c, x,
                                            checkpoint=bad),
        "fori_loop": lambda: tg.fori_loop(0, 2, lambda i, c: c, x, checkpoint=bad),
    }
    for who, call in calls.items():
        with pytest.raises(exc, match=rf"^{who}: checkpoint must be .*{msg}"):
            call()


# -- kept residuals: remat=False and per-iteration checkpoint policies ------------------------
def rnn_loss(w, x0, xs, reverse=False, mode="remat"):
    """A pytree carry and pytree ys; ``mode`` picks how each iteration's residuals are kept."""
    def step(c, x):
        h, s = c
        a = h @ w + x
        h = tnp.tanh(a) * tnp.exp(-0.1 * s)
        return (h, s + (h * h).sum()), {"y": tnp.sin(h).sum(), "z": a}

    f = {"remat": step, "keep": step, "default": step,
         "matmul": tg.checkpoint(step, save_only={"matmul"}),
         "tanh": tg.checkpoint(step, save_only={"tanh"}),
         "budget": tg.checkpoint(step, budget_bytes=24)}[mode]
    remat = None if mode == "default" else mode != "keep"
    (h, s), ys = tg.scan(f, (x0, f64(0.0)), xs, reverse=reverse, remat=remat)
    return (h ** 2).sum() + s + ys["y"].sum() + (ys["z"] ** 2).sum()


MODES = ["keep", "default", "matmul", "tanh", "budget"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("reverse", [False, True])
def test_kept_residuals_give_the_default_modes_values_and_derivatives(mode, reverse):
    rng = np.random.default_rng(1)
    w, x0 = f64(rng.normal(size=(3, 3)) * 0.5), f64(rng.normal(size=3))
    for n in (0, 1, 4):
        xs = f64(rng.normal(size=(n, 3)))
        args = (w, x0, xs)
        assert float(rnn_loss(*args, reverse, mode)) == float(rnn_loss(*args, reverse))
        got = tg.grad(lambda *a: rnn_loss(*a, reverse, mode), argnums=(0, 1, 2))(*args)
        close(got, tg.grad(lambda *a: rnn_loss(*a, reverse), argnums=(0, 1, 2))(*args),
              tol=1e-13)
        close(got[2], fd_grad(lambda a: rnn_loss(w, x0, a, reverse, mode), xs), tol=1e-6)
    close(tg.hessian(lambda w: rnn_loss(w, x0, xs, reverse, mode))(w),
          tg.hessian(lambda w: rnn_loss(w, x0, xs, reverse))(w), tol=1e-12)
    # reverse over reverse: cotangents reach the kept residuals too
    def gg(m):
        return tg.grad(lambda w: (tg.grad(lambda v: rnn_loss(v, x0, xs, reverse, m))(w)
                                  ** 2).sum())(w)

    close(gg(mode), gg("remat"), tol=1e-12)
    close(tg.jit(tg.grad(lambda w: rnn_loss(w, x0, xs, reverse, mode)))(w),
          tg.grad(lambda w: rnn_loss(w, x0, xs, reverse))(w), tol=1e-13)
    x0s = f64(rng.normal(size=(2, 3)))
    close(tg.vmap(tg.grad(lambda w, x: rnn_loss(w, x, xs, reverse, mode)), in_axes=(None, 0))(
        w, x0s), tnp.stack([tg.grad(lambda w, i=i: rnn_loss(w, x0s[i], xs, reverse))(w)
                            for i in range(2)]), tol=1e-12)


def stacked_outputs(mode, n=6):
    """Shapes of the forward scan's outputs under grad, and which of tanh and exp the reverse
    scan's body recomputes."""
    w, x0, xs = f64(np.eye(3) * 0.5), f64(np.ones(3)), f64(np.ones((n, 3)))
    _, tape = tg.trace(lambda w: tg.grad(lambda w: rnn_loss(w, x0, xs, False, mode))(w))(w)
    fwd, bwd = [e for e in tape.entries if e.oper == "scan"]
    opers = [e.oper for e in bwd.params["body"].tape.entries]
    return [tape.avals[v][0] for v in fwd.out_nodes], ("tanh" in opers, "exp" in opers)


def test_kept_residuals_are_stacked_per_iteration_and_not_recomputed():
    remat, remat_tanh = stacked_outputs("remat")
    keep, keep_tanh = stacked_outputs("keep")
    tanh, tanh_tanh = stacked_outputs("tanh")
    # remat: carries, ys and one stacked carry per iteration; the backward recomputes both
    assert remat == [(3,), (), (6,), (6, 3), (6, 3), (6,)] and remat_tanh == (True, True)
    # keep-all: more stacked outputs, each (6, ...), and nothing recomputed in the backward
    assert len(keep) > len(remat) and all(s[0] == 6 for s in keep[2:])
    assert keep_tanh == (False, False)
    # save_only={"tanh"}: one more stacked value (tanh's output); exp is recomputed
    assert len(tanh) == len(remat) + 1 and (6, 3) in tanh[len(remat) - 1:]
    assert tanh_tanh == (False, True)
    # save_only={"matmul"} keeps nothing here (the product is no residual: add saves nothing)
    assert stacked_outputs("matmul") == (remat, remat_tanh)


def test_kept_residuals_errors():
    x = f64([1.0])
    with pytest.raises(TypeError, match="^scan: remat must be None or a bool"):
        tg.scan(lambda c, _: (c, None), x, None, length=2, remat="no")
    with pytest.raises(ValueError, match="^scan: checkpoint=3 recomputes"):
        tg.scan(lambda c, _: (c, None), x, None, length=2, remat=False, checkpoint=3)
    with pytest.raises(ValueError, match="^scan: checkpoint=2 recomputes"):
        tg.scan(tg.checkpoint(lambda c, _: (c, None), save_only={"sin"}), x, None, length=2,
                checkpoint=2)
    with pytest.raises(ValueError, match="^fori_loop: keeping each iteration's residuals"):
        tg.fori_loop(0, tg.Tensor(np.int64(2)), lambda i, c: c, x, remat=False)


def test_fori_loop_with_kept_residuals():
    w = f64(0.8)

    def loss(x, mode):
        def body(i, v):
            return tnp.sin(v * w) + 0.1 * i

        f = tg.checkpoint(body, save_only={"sin"}) if mode == "policy" else body
        return (tg.fori_loop(0, 5, f, x, remat=mode != "keep") ** 2).sum()

    x = f64([0.3, -0.7])
    for mode in ("keep", "policy"):
        close(tg.grad(loss)(x, mode), tg.grad(loss)(x, "remat"), tol=1e-13)
