"""Schedules: values against the formulas written out here."""

import math

import pytest

from tapegrad import optim
from tapegrad.optim import schedules


def seeds_cosine(step, lr, warmup, decay_iters, min_lr):
    # The seeds' CosineScheduler, written out from its description (nanoGPT's get_lr).
    if step < warmup:
        return lr * (step + 1) / (warmup + 1)
    if step > decay_iters:
        return min_lr
    ratio = (step - warmup) / (decay_iters - warmup)
    return min_lr + 0.5 * (1 + math.cos(math.pi * ratio)) * (lr - min_lr)


def test_constant():
    s = optim.constant_schedule(0.3)
    assert [s(k) for k in (0, 1, 1000)] == [0.3, 0.3, 0.3]


def test_warmup_cosine_matches_formula_and_key_points():
    s = optim.warmup_cosine_schedule(0.01, warmup_steps=10, lr_decay_iters=50, min_lr=1e-4)
    for k in range(0, 70):
        assert s(k) == seeds_cosine(k, 0.01, 10, 50, 1e-4)
    assert s(0) == pytest.approx(0.01 / 11)
    assert s(9) == pytest.approx(0.01 * 10 / 11)
    assert s(10) == pytest.approx(0.01)  # peak at the end of warmup
    assert s(30) == pytest.approx((0.01 + 1e-4) / 2)  # half way down the cosine
    assert s(50) == pytest.approx(1e-4)
    assert s(51) == 1e-4


def test_cosine_scheduler_is_the_seeds_protocol():
    sch = optim.CosineScheduler(warmup_steps=3, lr_decay_iters=8, min_lr=0.001)
    assert isinstance(sch, optim.LRScheduler)
    for k in range(12):
        assert sch(k, 0.1, 0.05) == seeds_cosine(k, 0.1, 3, 8, 0.001)
        assert sch.schedule(0.1)(k) == sch(k, 0.1, 0.0)
    defaults = optim.CosineScheduler()
    assert (defaults.warmup_steps, defaults.lr_decay_iters, defaults.min_lr) == (100, 200, 1e-4)


def test_step_decay():
    s = optim.step_decay_schedule(1.0, step_size=3, gamma=0.5)
    assert [s(k) for k in range(7)] == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25]


def test_exponential_decay_follows_optax():
    s = optim.exponential_decay(2.0, transition_steps=4, decay_rate=0.5, transition_begin=2)
    assert s(0) == 2.0 and s(2) == 2.0
    assert s(6) == pytest.approx(1.0)
    assert s(4) == pytest.approx(2.0 * 0.5**0.5)
    st = optim.exponential_decay(2.0, 4, 0.5, staircase=True)
    assert [st(k) for k in (0, 3, 4, 7, 8)] == [2.0, 2.0, 1.0, 1.0, 0.5]
    floor = optim.exponential_decay(1.0, 1, 0.1, end_value=0.05)
    assert floor(1) == pytest.approx(0.1) and floor(5) == 0.05
    grow = optim.exponential_decay(1.0, 1, 2.0, end_value=3.0)
    assert grow(1) == 2.0 and grow(10) == 3.0


def test_schedule_errors():
    with pytest.raises(ValueError, match="lr_decay_iters \\(5\\) must be greater"):
        optim.warmup_cosine_schedule(0.1, warmup_steps=5, lr_decay_iters=5)
    with pytest.raises(ValueError, match="lr_decay_iters"):
        optim.CosineScheduler(warmup_steps=10, lr_decay_iters=2)
    with pytest.raises(ValueError, match="step_size must be an int >= 1"):
        optim.step_decay_schedule(0.1, 0)
    with pytest.raises(ValueError, match="non-negative integer"):
        optim.constant_schedule(0.1)(-1)
    with pytest.raises(ValueError, match="non-negative integer"):
        schedules.step_decay_schedule(0.1, 2)(1.5)
    with pytest.raises(ValueError, match="finite number"):
        optim.constant_schedule(float("nan"))
    with pytest.raises(ValueError, match="init_value must be >= 0"):
        optim.exponential_decay(-1.0, 1, 0.5)


def optax_linear(step, init_value, end_value, transition_steps, transition_begin=0):
    # Optax's polynomial_schedule with power 1, written out.
    if transition_steps <= 0:
        return init_value
    c = min(max(step - transition_begin, 0), transition_steps)
    return (init_value - end_value) * (1 - c / transition_steps) + end_value


def test_linear_schedule_matches_formula_and_key_points():
    s = optim.linear_schedule(0.1, 0.02, transition_steps=8, transition_begin=3)
    for k in range(20):
        assert s(k) == optax_linear(k, 0.1, 0.02, 8, 3)
    assert s(0) == s(3) == 0.1
    assert s(7) == pytest.approx(0.06)  # half way
    assert s(11) == s(100) == pytest.approx(0.02)
    warmup = optim.linear_schedule(0.0, 1.0, 4)
    assert [warmup(k) for k in range(6)] == [0.0, 0.25, 0.5, 0.75, 1.0, 1.0]
    assert optim.linear_schedule(0.3, 0.0, 0)(5) == 0.3  # no transition: constant (as Optax)


def test_piecewise_constant_schedule():
    s = optim.piecewise_constant_schedule(1.0, {30: 0.1, 10: 0.5})
    assert [s(k) for k in (0, 9, 10, 29, 30, 1000)] == [1.0, 1.0, 0.5, 0.5, 0.05, 0.05]
    assert optim.piecewise_constant_schedule(0.2)(7) == 0.2
    assert optim.piecewise_constant_schedule(0.2, {0: 2.0})(0) == 0.4  # boundary included
    assert s.boundaries_and_scales == ((10, 0.5), (30, 0.1))


def test_new_schedules_match_optax_where_installed():
    optax = pytest.importorskip("optax")
    pairs = [
        (optim.linear_schedule(0.1, 0.02, 8, 3), optax.linear_schedule(0.1, 0.02, 8, 3)),
        (optim.linear_schedule(0.0, 1.0, 5), optax.linear_schedule(0.0, 1.0, 5)),
        (optim.piecewise_constant_schedule(1.0, {4: 0.5, 9: 0.1}),
         optax.piecewise_constant_schedule(1.0, {4: 0.5, 9: 0.1})),
    ]  # fmt: skip
    for mine, theirs in pairs:
        for k in range(15):
            assert mine(k) == pytest.approx(float(theirs(k)), rel=1e-6)


def test_new_schedules_drive_an_optimizer_from_step_zero():
    import numpy as np

    import tapegrad as tg

    sched = optim.piecewise_constant_schedule(1.0, {2: 0.5})
    tx = optim.sgd(sched)
    params = {"w": tg.Tensor(np.zeros(1))}
    state = tx.init(params)
    seen = []
    for _ in range(4):
        u, state = tx.update({"w": tg.Tensor(np.ones(1))}, state, params)
        seen.append(float(u["w"].numpy()[0]))
    assert seen == [-1.0, -1.0, -0.5, -0.5]


def test_new_schedule_errors():
    with pytest.raises(ValueError, match="linear_schedule: transition_steps must be an int >= 0"):
        optim.linear_schedule(0.1, 0.0, -1)
    with pytest.raises(ValueError, match="linear_schedule: transition_begin must be an int >= 0"):
        optim.linear_schedule(0.1, 0.0, 5, transition_begin=-2)
    with pytest.raises(ValueError, match="linear_schedule: end_value must be a finite number"):
        optim.linear_schedule(0.1, float("inf"), 5)
    with pytest.raises(ValueError, match="non-negative integer"):
        optim.linear_schedule(0.1, 0.0, 5)(-1)
    with pytest.raises(TypeError, match="boundaries_and_scales must be a dict"):
        optim.piecewise_constant_schedule(0.1, [(10, 0.5)])
    with pytest.raises(ValueError, match="the scale at 10 must be >= 0"):
        optim.piecewise_constant_schedule(0.1, {10: -0.5})
    with pytest.raises(ValueError, match="boundary -3 must be an int >= 0"):
        optim.piecewise_constant_schedule(0.1, {-3: 0.5})
    with pytest.raises(TypeError, match="boundary 2.5 must be an int >= 0"):
        optim.piecewise_constant_schedule(0.1, {2.5: 0.5})
