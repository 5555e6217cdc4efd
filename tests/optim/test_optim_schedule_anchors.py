"""Optax's remaining schedules and PyTorch's stateful schedulers, against their anchors.

Optax is not a test dependency: its schedules are written out below from Optax's formulas
(``optax/schedules/_schedule.py`` and ``_join.py``), vectorized over the steps as Optax
evaluates them, and compared at every step (float64, 1e-12), also through the Tensor-step path
that ``tg.jit`` takes. PyTorch's schedulers run side by side with ours (skipped without torch):
the same rates (and cycled momenta) at every step, and the same parameters after training.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import io, optim

STEPS = np.arange(0, 120)


# -- Optax's formulas, written out ----------------------------------------------------------------
def ox_polynomial(init, end, power, transition_steps, transition_begin=0):
    def f(count):
        if transition_steps <= 0:
            return np.full(np.shape(count), init, float)
        c = np.clip(count - transition_begin, 0, transition_steps)
        return (init - end) * (1 - c / transition_steps) ** power + end

    return f


def ox_cosine_decay(init, decay_steps, alpha=0.0, exponent=1.0):
    def f(count):
        c = np.minimum(count, decay_steps)
        cosine = 0.5 * (1 + np.cos(np.pi * c / decay_steps))
        return init * ((1 - alpha) * cosine**exponent + alpha)

    return f


def ox_exponential(init, transition_steps, rate, begin=0, staircase=False, end=None):
    def f(count):
        if transition_steps <= 0 or rate == 0:
            return np.full(np.shape(count), init, float)
        d = count - begin
        p = d / transition_steps
        if staircase:
            p = np.floor(p)
        v = np.where(d <= 0, init, init * np.power(rate, p))
        if end is not None:
            v = (np.maximum if rate < 1 else np.minimum)(v, end)
        return v

    return f


def ox_join(schedules, boundaries):
    def f(step):
        out = schedules[0](step)
        for b, s in zip(boundaries, schedules[1:]):
            out = np.where(step < b, out, s(step - b))
        return out

    return f


def ox_warmup_cosine(init, peak, warmup, decay_steps, end=0.0, exponent=1.0):
    alpha = 0.0 if peak == 0.0 else end / peak
    return ox_join([ox_polynomial(init, peak, 1, warmup),
                    ox_cosine_decay(peak, decay_steps - warmup, alpha, exponent)], [warmup])


def ox_piecewise_interpolate(kind, init, boundaries_and_scales):
    bs, ss = zip(*sorted(boundaries_and_scales.items())) if boundaries_and_scales else ((), ())
    bounds = np.array((0,) + bs)
    values = np.cumprod(np.array((init,) + ss))
    sizes = np.maximum(bounds[1:] - bounds[:-1], 1)

    def f(count):
        count = np.asarray(count)[..., None]
        ind = (bounds[:-1] <= count) & (count < bounds[1:])
        pct = (count - bounds[:-1]) / sizes
        start, end = values[:-1], values[1:]
        if kind == "linear":
            interp = (end - start) * pct + start
        else:
            interp = end + (start - end) / 2.0 * (np.cos(np.pi * pct) + 1)
        return (ind * interp).sum(-1) + (bounds[-1] <= count[..., 0]) * values[-1]

    return f


def ox_linear_onecycle(steps, peak, pct_start=0.3, pct_final=0.85, div=25.0, final_div=1e4):
    return ox_piecewise_interpolate("linear", peak / div, {int(pct_start * steps): div,
                                                           int(pct_final * steps): 1.0 / div,
                                                           steps: 1.0 / final_div})


def ox_cosine_onecycle(steps, peak, pct_start=0.3, div=25.0, final_div=1e4):
    return ox_piecewise_interpolate("cosine", peak / div, {int(pct_start * steps): div,
                                                           int(steps): 1.0 / (div * final_div)})


def ox_sgdr(cosine_kwargs):
    schedules, boundaries, step = [], [], 0
    for kw in cosine_kwargs:
        schedules.append(ox_warmup_cosine(**kw))
        step += kw["decay_steps"]
        boundaries.append(step)
    return ox_join(schedules, boundaries[:-1])


CYCLES = [dict(init=0.0, peak=1.0, warmup=5, decay_steps=30),
          dict(init=0.1, peak=0.6, warmup=0, decay_steps=17, end=0.05, exponent=2.0),
          dict(init=0.2, peak=0.3, warmup=10, decay_steps=40, end=0.3)]  # fmt: skip


def _ours_cycle(c):
    return dict(init_value=c["init"], peak_value=c["peak"], warmup_steps=c["warmup"],
                decay_steps=c["decay_steps"], **({"end_value": c["end"]} if "end" in c else {}),
                **({"exponent": c["exponent"]} if "exponent" in c else {}))


CASES = [
    ("polynomial", optim.polynomial_schedule(1.0, 0.01, 2.0, 60, 10),
     ox_polynomial(1.0, 0.01, 2.0, 60, 10)),
    ("polynomial_rising", optim.polynomial_schedule(0.0, 0.5, 0.5, 40),
     ox_polynomial(0.0, 0.5, 0.5, 40)),
    ("polynomial_constant", optim.polynomial_schedule(0.3, 0.0, 3.0, 0),
     ox_polynomial(0.3, 0.0, 3.0, 0)),
    ("cosine_decay", optim.cosine_decay_schedule(0.5, 70), ox_cosine_decay(0.5, 70)),
    ("cosine_decay_alpha_exponent", optim.cosine_decay_schedule(2.0, 33, 0.1, 3.0),
     ox_cosine_decay(2.0, 33, 0.1, 3.0)),
    ("warmup_cosine_decay", optim.warmup_cosine_decay_schedule(0.0, 1.0, 10, 80, 0.01),
     ox_warmup_cosine(0.0, 1.0, 10, 80, 0.01)),
    ("warmup_cosine_decay_zero_peak", optim.warmup_cosine_decay_schedule(0.2, 0.0, 3, 9, 0.1),
     ox_warmup_cosine(0.2, 0.0, 3, 9, 0.1)),
    ("warmup_exponential_decay",
     optim.warmup_exponential_decay_schedule(0.0, 1.0, 12, 7, 0.8),
     ox_join([ox_polynomial(0.0, 1.0, 1, 12), ox_exponential(1.0, 7, 0.8)], [12])),
    ("warmup_exponential_decay_all_options",
     optim.warmup_exponential_decay_schedule(0.1, 0.9, 5, 4, 0.5, transition_begin=8,
                                             staircase=True, end_value=0.05),
     ox_join([ox_polynomial(0.1, 0.9, 1, 5), ox_exponential(0.9, 4, 0.5, 8, True, 0.05)], [5])),
    ("warmup_exponential_growth",
     optim.warmup_exponential_decay_schedule(0.0, 0.1, 3, 10, 1.5, end_value=0.4),
     ox_join([ox_polynomial(0.0, 0.1, 1, 3), ox_exponential(0.1, 10, 1.5, 0, False, 0.4)],
             [3])),
    ("exponential_zero_rate", optim.exponential_decay(0.7, 3, 0.0),
     ox_exponential(0.7, 3, 0.0)),
    ("join", optim.join_schedules([optim.constant_schedule(0.3),
                                   optim.linear_schedule(1.0, 0.0, 20),
                                   optim.cosine_decay_schedule(0.5, 10)], [15, 50]),
     ox_join([lambda s: np.full(np.shape(s), 0.3), ox_polynomial(1.0, 0.0, 1, 20),
              ox_cosine_decay(0.5, 10)], [15, 50])),
    ("join_repeated_boundary",
     optim.join_schedules([optim.constant_schedule(1.0), optim.constant_schedule(2.0),
                           optim.constant_schedule(3.0)], [10, 10]),
     ox_join([lambda s, v=v: np.full(np.shape(s), v) for v in (1.0, 2.0, 3.0)], [10, 10])),
    ("piecewise_interpolate_linear",
     optim.piecewise_interpolate_schedule("linear", 1.0, {40: 0.1, 10: 0.5, 90: 2.0}),
     ox_piecewise_interpolate("linear", 1.0, {40: 0.1, 10: 0.5, 90: 2.0})),
    ("piecewise_interpolate_cosine",
     optim.piecewise_interpolate_schedule("cosine", 0.4, {0: 2.0, 25: 0.0, 26: 1.0}),
     ox_piecewise_interpolate("cosine", 0.4, {0: 2.0, 25: 0.0, 26: 1.0})),
    ("piecewise_interpolate_constant", optim.piecewise_interpolate_schedule("cosine", 0.4),
     ox_piecewise_interpolate("cosine", 0.4, None)),
    ("linear_onecycle", optim.linear_onecycle_schedule(100, 0.8),
     ox_linear_onecycle(100, 0.8)),
    ("linear_onecycle_options",
     optim.linear_onecycle_schedule(37, 2.0, pct_start=0.1, pct_final=0.5, div_factor=10.0,
                                    final_div_factor=100.0),
     ox_linear_onecycle(37, 2.0, 0.1, 0.5, 10.0, 100.0)),
    ("linear_onecycle_colliding_boundaries", optim.linear_onecycle_schedule(2, 1.0),
     ox_linear_onecycle(2, 1.0)),
    ("cosine_onecycle", optim.cosine_onecycle_schedule(100, 0.8),
     ox_cosine_onecycle(100, 0.8)),
    ("cosine_onecycle_options",
     optim.cosine_onecycle_schedule(45, 3.0, pct_start=0.45, div_factor=5.0,
                                    final_div_factor=50.0),
     ox_cosine_onecycle(45, 3.0, 0.45, 5.0, 50.0)),
    ("sgdr", optim.sgdr_schedule([_ours_cycle(c) for c in CYCLES]), ox_sgdr(CYCLES)),
]


@pytest.mark.parametrize("name,ours,want", CASES, ids=[c[0] for c in CASES])
def test_schedules_follow_optax(name, ours, want):
    expected = want(STEPS)
    got = np.array([ours(int(k)) for k in STEPS])
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-15)
    assert all(isinstance(ours(int(k)), float) for k in (0, 57))
    # a 0-d integer Tensor step (tg.jit's counter): the same values, as float64 Tensors
    traced = [ours(tg.Tensor(np.int64(k))) for k in STEPS[::7]]
    assert all(isinstance(v, tg.Tensor) and v.shape == () for v in traced)
    np.testing.assert_allclose([float(v) for v in traced], expected[::7], rtol=1e-12,
                               atol=1e-15)


def test_schedule_key_points():
    s = optim.cosine_onecycle_schedule(100, 1.0)
    assert s(0) == pytest.approx(1.0 / 25) and s(30) == pytest.approx(1.0)
    assert s(100) == pytest.approx(1.0 / 25 / 1e4) and s(1000) == s(100)
    lin = optim.linear_onecycle_schedule(100, 1.0)
    assert lin(30) == pytest.approx(1.0) and lin(85) == pytest.approx(1.0 / 25)
    w = optim.warmup_cosine_decay_schedule(0.0, 1.0, 10, 110, end_value=0.1)
    assert w(10) == 1.0 and w(60) == pytest.approx(0.55) and w(110) == pytest.approx(0.1)
    sg = optim.sgdr_schedule([dict(init_value=1.0, peak_value=1.0, warmup_steps=0,
                                   decay_steps=10)] * 3)
    assert [sg(k) for k in (0, 10, 20)] == [1.0, 1.0, 1.0]  # restarts
    assert sg(5) == pytest.approx(0.5) and sg(29) < 0.03


def test_schedules_drive_a_jitted_training_step():
    tx = optim.sgd(optim.sgdr_schedule([dict(init_value=0.0, peak_value=0.1, warmup_steps=2,
                                             decay_steps=6)] * 2))

    def loss_fn(p):
        return tnp.sum(tnp.square(p["w"] - 3.0))

    def step(p, s):
        return optim.apply_gradients(tx, tg.grad(loss_fn)(p), s, p)

    fast = tg.jit(step)
    p_e = p_j = {"w": tg.Tensor(np.zeros(2))}
    s_e, s_j = tx.init(p_e), tx.init(p_j)
    for _ in range(12):
        p_e, s_e = step(p_e, s_e)
        p_j, s_j = fast(p_j, s_j)
    np.testing.assert_allclose(p_j["w"].numpy(), p_e["w"].numpy(), rtol=1e-12)
    assert fast.cache_size() <= 2  # replayed for every step number


def test_schedule_argument_errors():
    with pytest.raises(ValueError, match="cosine_decay_schedule: decay_steps must be an int >= 1"):
        optim.cosine_decay_schedule(0.1, 0)
    with pytest.raises(ValueError, match="exponent must be > 0"):
        optim.cosine_decay_schedule(0.1, 5, exponent=0.0)
    with pytest.raises(ValueError, match="decay_steps \\(5\\) counts the warmup"):
        optim.warmup_cosine_decay_schedule(0.0, 1.0, 5, 5)
    with pytest.raises(ValueError, match="2 schedules need 1 boundaries, got 2"):
        optim.join_schedules([optim.constant_schedule(1.0)] * 2, [1, 2])
    with pytest.raises(TypeError, match="schedules\\[1\\] must be callable"):
        optim.join_schedules([optim.constant_schedule(1.0), 0.5], [1])
    with pytest.raises(ValueError, match="interpolate_type must be 'linear' or 'cosine'"):
        optim.piecewise_interpolate_schedule("cubic", 1.0)
    with pytest.raises(ValueError, match="linear_onecycle_schedule: transition_steps must be"):
        optim.linear_onecycle_schedule(0, 1.0)
    with pytest.raises(ValueError, match="cosine_onecycle_schedule: pct_start must lie in"):
        optim.cosine_onecycle_schedule(10, 1.0, pct_start=1.5)
    with pytest.raises(ValueError, match="div_factor must be > 0"):
        optim.cosine_onecycle_schedule(10, 1.0, div_factor=0.0)
    with pytest.raises(TypeError, match="cosine_kwargs\\[0\\] has unknown keys \\['peak'\\]"):
        optim.sgdr_schedule([dict(init_value=0.0, peak=1.0, warmup_steps=0, decay_steps=3)])
    with pytest.raises(ValueError, match="needs at least one cycle"):
        optim.sgdr_schedule([])
    with pytest.raises(ValueError, match="polynomial_schedule: transition_begin must be"):
        optim.polynomial_schedule(1.0, 0.0, 1.0, 10, -1)
    with pytest.raises(ValueError, match="finite number"):  # a value: ValueError
        optim.polynomial_schedule(1.0, 0.0, float("nan"), 10)
    with pytest.raises(ValueError, match="non-negative integer"):
        optim.cosine_onecycle_schedule(10, 1.0)(-1)
    with pytest.raises(TypeError, match="unexpected keyword"):
        optim.cosine_decay_schedule(0.1, 5, alpah=0.1)  # pyright: ignore[reportCallIssue]


# -- PyTorch's stateful schedulers --------------------------------------------------------------


def _pair(kind="sgd", lr=0.1, **kw):
    """A torch optimizer and ours with the same hyperparameters on one parameter."""
    torch = pytest.importorskip("torch")
    p = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    params = {"w": tg.Tensor(np.zeros(2))}
    if kind == "sgd":
        return torch.optim.SGD([p], lr=lr, **kw), optim.SGD(params, lr=lr, **kw), p
    return (torch.optim.Adam([p], lr=lr, betas=(kw.get("beta1", 0.9), 0.999), eps=1e-8),
            optim.Adam(params, lr=lr, epsilon=1e-8, **kw), p)


def _momentum(topt, ours):
    g = topt.param_groups[0]
    if "betas" in g:
        return g["betas"][0], ours.hyperparams["beta1"]
    return g["momentum"], ours.hyperparams["momentum"]


def _run(torch_sched, our_sched, n, momentum=False, epochs=None):
    """Step both ``n`` times (optimizer steps first, as PyTorch wants) and compare every rate."""
    topt, ours = torch_sched.optimizer, our_sched.optimizer
    got, want = [ours.lr], [topt.param_groups[0]["lr"]]
    assert our_sched.get_last_lr() == torch_sched.get_last_lr()
    for i in range(n):
        topt.step()
        if epochs is None:
            torch_sched.step()
            our_sched.step()
        else:
            torch_sched.step(epochs[i])
            our_sched.step(epochs[i])
        want.append(topt.param_groups[0]["lr"])
        got.append(ours.lr)
        if momentum:
            tm, om = _momentum(topt, ours)
            assert om == pytest.approx(tm, rel=1e-13, abs=1e-15), f"momentum at step {i + 1}"
        assert our_sched.last_epoch == torch_sched.last_epoch
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-16)
    assert our_sched.get_last_lr() == pytest.approx(torch_sched.get_last_lr(), rel=1e-13)
    return got


@pytest.mark.parametrize("kw", [
    dict(total_steps=100),
    dict(total_steps=100, anneal_strategy="linear"),
    dict(total_steps=99, three_phase=True),
    dict(total_steps=80, three_phase=True, anneal_strategy="linear", pct_start=0.2),
    dict(epochs=7, steps_per_epoch=13, pct_start=0.45, div_factor=10.0, final_div_factor=100.0,
         base_momentum=0.8, max_momentum=0.99),
], ids=["cos", "linear", "three_phase", "three_phase_linear", "epochs"])  # fmt: skip
@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_one_cycle_lr_matches_torch(kw, kind):
    torch = pytest.importorskip("torch")
    extra = {"momentum": 0.9} if kind == "sgd" else {}
    topt, ours, _ = _pair(kind, **extra)
    n = kw.get("total_steps") or kw["epochs"] * kw["steps_per_epoch"]
    ts = torch.optim.lr_scheduler.OneCycleLR(topt, max_lr=0.5, **kw)
    os_ = optim.OneCycleLR(ours, max_lr=0.5, **kw)
    # up to the last step of the cycle; the one after it extrapolates (see below)
    _run(ts, os_, n - 1, momentum=True)
    topt.step()
    ts.step()
    os_.step()
    assert ours.lr == max(topt.param_groups[0]["lr"], 0.0)  # torch may go below 0 there
    with pytest.raises(ValueError, match="tried to step"):
        os_.step()


def test_one_cycle_lr_without_momentum_cycling():
    torch = pytest.importorskip("torch")
    topt, ours, _ = _pair("sgd")
    _run(torch.optim.lr_scheduler.OneCycleLR(topt, 1.0, total_steps=30, cycle_momentum=False),
         optim.OneCycleLR(ours, 1.0, total_steps=30, cycle_momentum=False), 29)
    assert ours.hyperparams["momentum"] == 0


@pytest.mark.parametrize("kw", [
    dict(step_size_up=7, step_size_down=3),
    dict(step_size_up=5, mode="triangular2"),
    dict(step_size_up=4, mode="exp_range", gamma=0.97),
    dict(step_size_up=3, scale_fn=lambda x: 1.0 / (1 + x)),
    dict(step_size_up=3, step_size_down=6, scale_fn=lambda x: 0.99**x, scale_mode="iterations"),
    dict(step_size_up=2.5, base_momentum=0.7, max_momentum=0.95),
], ids=["triangular", "triangular2", "exp_range", "scale_fn_cycle", "scale_fn_iterations",
        "fractional_step_size"])  # fmt: skip
@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_cyclic_lr_matches_torch(kw, kind):
    torch = pytest.importorskip("torch")
    extra = {"momentum": 0.9} if kind == "sgd" else {}
    topt, ours, _ = _pair(kind, **extra)
    ts = torch.optim.lr_scheduler.CyclicLR(topt, base_lr=0.01, max_lr=0.1, **kw)
    os_ = optim.CyclicLR(ours, base_lr=0.01, max_lr=0.1, **kw)
    _run(ts, os_, 90, momentum=True)


@pytest.mark.parametrize("T_0,T_mult,eta_min", [(5, 1, 0.0), (5, 2, 0.001), (1, 3, 0.01)])
def test_cosine_annealing_warm_restarts_matches_torch(T_0, T_mult, eta_min):
    torch = pytest.importorskip("torch")
    topt, ours, _ = _pair()
    ts = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(topt, T_0, T_mult, eta_min)
    os_ = optim.CosineAnnealingWarmRestarts(ours, T_0, T_mult, eta_min)
    _run(ts, os_, 100)
    assert (os_.T_cur, os_.T_i) == (ts.T_cur, ts.T_i)


def test_cosine_annealing_warm_restarts_with_fractional_epochs_matches_torch():
    torch = pytest.importorskip("torch")
    topt, ours, _ = _pair()
    epochs = [0.25, 0.5, 1.75, 3.0, 7.5, 16.2, 2.0, 40.0, 40.5]
    ts = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(topt, 3, 2)
    os_ = optim.CosineAnnealingWarmRestarts(ours, 3, 2)
    _run(ts, os_, len(epochs), epochs=epochs)
    # then whole epochs again, from where the last call left the counters
    topt.step()
    ts.step()
    os_.step()
    assert ours.lr == pytest.approx(topt.param_groups[0]["lr"], rel=1e-13)
    with pytest.raises(ValueError, match="epoch must be >= 0"):
        os_.step(-1)


def test_lambda_lr_matches_torch():
    torch = pytest.importorskip("torch")
    for fn in (lambda e: 0.95**e, lambda e: 1.0 / (1 + e // 10), lambda e: min(1.0, (e + 1) / 5)):
        topt, ours, _ = _pair(lr=0.3)
        _run(torch.optim.lr_scheduler.LambdaLR(topt, fn), optim.LambdaLR(ours, fn), 40)
    topt, ours, _ = _pair()
    _run(torch.optim.lr_scheduler.LambdaLR(topt, [lambda e: 0.5**e]),
         optim.LambdaLR(ours, [lambda e: 0.5**e]), 5)


def test_multistep_lr_matches_torch_and_chains():
    torch = pytest.importorskip("torch")
    topt, ours, _ = _pair(lr=0.5)
    _run(torch.optim.lr_scheduler.MultiStepLR(topt, [3, 7, 7, 12], 0.3),
         optim.MultiStepLR(ours, [3, 7, 7, 12], 0.3), 20)
    # chainable: a rate changed by someone else is kept and decayed further
    topt, ours, _ = _pair(lr=0.5)
    ts = torch.optim.lr_scheduler.MultiStepLR(topt, [2, 4], 0.5)
    os_ = optim.MultiStepLR(ours, [2, 4], 0.5)
    _run(ts, os_, 2)
    topt.param_groups[0]["lr"] = ours.lr = 0.2
    _run(ts, os_, 4)
    assert ours.lr == pytest.approx(0.1)  # 0.2, decayed once more at epoch 4


def test_training_with_one_cycle_matches_torch_parameters():
    torch = pytest.importorskip("torch")
    target = np.array([1.0, -2.0])
    topt, ours, p = _pair("sgd", momentum=0.9, nesterov=False)
    ts = torch.optim.lr_scheduler.OneCycleLR(topt, max_lr=0.2, total_steps=40)
    os_ = optim.OneCycleLR(ours, max_lr=0.2, total_steps=40)
    tt = torch.tensor(target)
    for _ in range(40):
        topt.zero_grad()
        ((p - tt) ** 2).sum().backward()
        topt.step()
        ts.step()
        ours.step(tg.grad(lambda q: tnp.sum(tnp.square(q["w"] - tg.Tensor(target))))(ours.params))
        os_.step()
    np.testing.assert_allclose(ours.params["w"].numpy(), p.detach().numpy(), rtol=1e-12)


def test_state_dict_resumes_the_schedule(tmp_path):
    def make(opt):
        return optim.CyclicLR(opt, 0.01, 0.1, step_size_up=4, mode="triangular2")

    full = optim.SGD({"w": tg.Tensor(np.zeros(1))}, lr=0.1, momentum=0.9)
    sched = make(full)
    rates = []
    for _ in range(20):
        sched.step()
        rates.append(full.lr)
    part = optim.SGD({"w": tg.Tensor(np.zeros(1))}, lr=0.1, momentum=0.9)
    first = make(part)
    for _ in range(7):
        first.step()
    io.save(tmp_path / "sched.safetensors", first.state_dict())  # plain Python values
    saved = io.load(tmp_path / "sched.safetensors")
    assert saved == first.state_dict()
    opt_saved = part.state_dict()
    again = optim.SGD({"w": tg.Tensor(np.zeros(1))}, lr=0.1, momentum=0.9)
    resumed = make(again)
    resumed.load_state_dict(saved)
    again.load_state_dict(opt_saved)
    for _ in range(13):
        resumed.step()
    assert again.lr == rates[-1] and resumed.last_epoch == 20
    for cls, args in ((optim.OneCycleLR, (1.0, 10)), (optim.CosineAnnealingWarmRestarts, (3,)),
                      (optim.MultiStepLR, ([2],)), (optim.LambdaLR, (lambda e: 1.0,))):
        s = cls(optim.SGD({"w": tg.Tensor(np.zeros(1))}, lr=0.1, momentum=0.9), *args)
        s.step()
        state = s.state_dict()
        s.step()
        s.load_state_dict(state)
        assert s.state_dict() == state
        with pytest.raises(TypeError, match="load_state_dict: expected the keys"):
            s.load_state_dict({"last_epoch": 1})


def test_last_epoch_resumes_from_the_optimizers_initial_lr():
    torch = pytest.importorskip("torch")
    p = torch.nn.Parameter(torch.zeros(1))
    topt = torch.optim.SGD([p], lr=0.1)
    topt.param_groups[0]["initial_lr"] = 0.1
    ours = optim.SGD({"w": tg.Tensor(np.zeros(1))}, lr=0.1)
    ts = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(topt, 4, 2, last_epoch=5)
    os_ = optim.CosineAnnealingWarmRestarts(ours, 4, 2, last_epoch=5)
    _run(ts, os_, 20)


def test_stateful_scheduler_errors():
    sgd = optim.SGD({"w": tg.Tensor(np.zeros(1))}, lr=0.1)
    with pytest.raises(TypeError, match="OneCycleLR: optimizer must be an optim.Optimizer"):
        optim.OneCycleLR(object(), 1.0, 10)
    with pytest.raises(ValueError, match="CyclicLR: cycle_momentum=True needs an optimizer "
                                         "built with momentum > 0"):
        optim.CyclicLR(sgd, 0.01, 0.1)
    ada = optim.Adagrad({"w": tg.Tensor(np.zeros(1))})
    with pytest.raises(ValueError, match="neither"):
        optim.OneCycleLR(ada, 1.0, 10)
    optim.OneCycleLR(ada, 1.0, 10, cycle_momentum=False)
    with pytest.raises(ValueError, match="give total_steps, or both epochs and steps_per_epoch"):
        optim.OneCycleLR(sgd, 1.0, cycle_momentum=False)
    with pytest.raises(ValueError, match="anneal_strategy must be 'cos' or 'linear'"):
        optim.OneCycleLR(sgd, 1.0, 10, anneal_strategy="cosine", cycle_momentum=False)
    with pytest.raises(ValueError, match="phase 1 of the cycle has no steps"):
        optim.OneCycleLR(sgd, 1.0, 10, pct_start=0.1, three_phase=True,
                         cycle_momentum=False).step()
    with pytest.raises(ValueError, match="mode must be 'triangular'"):
        optim.CyclicLR(sgd, 0.01, 0.1, mode="sawtooth", cycle_momentum=False)
    with pytest.raises(ValueError, match="step_size_up and step_size_down must be > 0"):
        optim.CyclicLR(sgd, 0.01, 0.1, step_size_up=0, cycle_momentum=False)
    with pytest.raises(ValueError, match="T_0 must be an int >= 1"):
        optim.CosineAnnealingWarmRestarts(sgd, 0)
    with pytest.raises(TypeError, match="T_mult must be an int >= 1"):  # a kind: TypeError
        optim.CosineAnnealingWarmRestarts(sgd, 3, T_mult=1.5)
    with pytest.raises(TypeError, match="milestones must be ints"):
        optim.MultiStepLR(sgd, [1.5])
    with pytest.raises(TypeError, match="lr_lambda must be callable"):
        optim.LambdaLR(sgd, 0.5)
    with pytest.raises(ValueError, match="lr must be finite and >= 0|expected a number >= 0"):
        optim.LambdaLR(sgd, lambda e: -1.0)
    with pytest.raises(ValueError, match="last_epoch must be an int >= -1"):
        optim.MultiStepLR(sgd, [1], last_epoch=-2)
    scheduled = optim.SGD({"w": tg.Tensor(np.zeros(1))}, lr=0.1, lr_scheduler_kwargs={
        "lr_scheduler_cls": optim.CosineScheduler})
    with pytest.raises(TypeError, match="MultiStepLR: the optimizer has an lr_scheduler"):
        optim.MultiStepLR(scheduled, [1])
    for cls, args in ((optim.OneCycleLR, (1.0, 10)), (optim.CyclicLR, (0.01, 0.1)),
                      (optim.CosineAnnealingWarmRestarts, (3,)), (optim.MultiStepLR, ([2],)),
                      (optim.LambdaLR, (lambda e: 1.0,))):
        with pytest.raises(TypeError, match="unexpected keyword"):
            cls(sgd, *args, verbose=True)


def test_rates_are_python_floats():
    s = optim.OneCycleLR(optim.SGD({"w": tg.Tensor(np.zeros(1))}, lr=0.1, momentum=0.9), 1.0,
                         20)
    s.step()
    assert type(s.get_last_lr()[0]) is float and math.isfinite(s.get_last_lr()[0])
