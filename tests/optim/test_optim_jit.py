"""A whole training step under tg.jit: the same parameters as the eager step, integer counters
kept integer, and no re-tracing at every step."""

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import optim
from tapegrad.optim import _extra

TXS = {
    "adam": lambda: optim.adam(0.1),
    "adamw schedule": lambda: optim.adamw(optim.linear_schedule(0.1, 0.01, 4), weight_decay=0.1),
    "sgd cosine": lambda: optim.sgd(optim.warmup_cosine_schedule(0.1, 2, 6, 0.01), momentum=0.9),
    "sgd steps": lambda: optim.sgd(optim.piecewise_constant_schedule(0.1, {3: 0.5, 6: 0.1})),
    "rmsprop": lambda: optim.rmsprop(0.01, centered=True, momentum=0.9, weight_decay=0.01),
    "adagrad": lambda: optim.adagrad(0.1, lr_decay=0.1),
    "lion": lambda: optim.lion(0.01),
    "masked": lambda: optim.masked(optim.adam(0.1), {"w": True, "b": False}),
    "multi_transform": lambda: optim.multi_transform(
        {"a": optim.adam(0.1), "s": optim.sgd(0.1, momentum=0.9)}, {"w": "a", "b": "s"}
    ),
    "MultiSteps": lambda: optim.MultiSteps(optim.adam(0.1), 3),
    "MultiSteps schedule": lambda: optim.MultiSteps(optim.adagrad(0.1), lambda n: 1 + n % 2),
    "reduce_on_plateau": lambda: optim.chain(
        optim.sgd(0.1), optim.reduce_on_plateau(patience=1, factor=0.5, cooldown=1)
    ),
    "MultiSteps plateau": lambda: optim.MultiSteps(
        optim.chain(optim.sgd(0.1), optim.reduce_on_plateau(patience=1, factor=0.5)), 2
    ),
    # the optimizers and wrappers of _extra*.py
    "nadam": lambda: optim.nadam(0.1),
    "radam": lambda: optim.radam(0.1, b2=0.9, nesterov=True),  # rectified from step 6 on
    "adamax": lambda: optim.adamax(0.1),
    "adadelta": lambda: optim.adadelta(weight_decay=0.01),
    "adabelief": lambda: optim.adabelief(0.1, nesterov=True),
    "lamb": lambda: optim.lamb(0.1, weight_decay=0.1, mask={"w": True, "b": False}),
    "lars": lambda: optim.lars(0.1, weight_decay=0.1, trust_ratio_mask={"w": True, "b": False}),
    "adafactor": lambda: optim.adafactor(0.1, momentum=0.9, weight_decay_rate=0.01),
    "adafactor factored": lambda: optim.MultiSteps(optim.adafactor(
        0.1, min_dim_size_to_factor=1, decay_offset=2), 1),
    "sm3": lambda: optim.sm3(0.1),
    "novograd": lambda: optim.novograd(0.1, weight_decay=0.1),
    "noisy_sgd": lambda: optim.noisy_sgd(0.1, key=tg.random.key(0)),
    "blocks": lambda: optim.chain(optim.zero_nans(), optim.centralize(), optim.ema(0.9),
                                  optim.scale_by_schedule(lambda n: -0.1 / (n + 1))),
    "parameter_ema": lambda: optim.chain(optim.adam(0.1), optim.parameter_ema(0.5)),
    "inject_hyperparams": lambda: optim.inject_hyperparams(optim.adamw)(0.1, b1=0.8),
    "nadam torch block": lambda: optim.chain(_extra.ScaleByTorchNAdam(), optim.sgd(0.1)),
    "radam torch block": lambda: optim.chain(_extra.ScaleByTorchRAdam(b2=0.9), optim.sgd(0.1)),
    "schedule_free_sgd": lambda: optim.schedule_free_sgd(0.1, warmup_steps=3, weight_decay=0.01),
    "schedule_free_adamw": lambda: optim.schedule_free_adamw(0.1, weight_decay=0.01),
}
# Transformations whose state counts nothing.
NO_COUNTERS = {"lion", "rmsprop", "adadelta", "lars", "sm3"}
# Counted as Python ints by init; under jit as int64 Tensors.
COUNTERS = {"count", "mini_step", "gradient_step", "plateau_count", "cooldown_count",
            "steps_since_sync", "step_count"}


def _data(dtype):
    rng = np.random.default_rng(0)
    x = tg.Tensor(rng.normal(size=(16, 3)).astype(dtype))
    y = tg.Tensor(rng.normal(size=16).astype(dtype))
    params = {"w": tg.Tensor(np.zeros(3, dtype)), "b": tg.Tensor(np.asarray(0.0, dtype))}
    return x, y, params


def loss_fn(p, x, y):
    return tnp.mean(tnp.square(tnp.matmul(x, p["w"]) + p["b"] - y))


def _counters(state, out=None):
    """``[(key, value)]`` of every counter in a state pytree (dicts keyed by COUNTERS)."""
    out = [] if out is None else out
    if isinstance(state, dict):
        for k, v in state.items():
            if k in COUNTERS:
                out.append((k, v))
            else:
                _counters(v, out)
    elif isinstance(state, (tuple, list)):
        for v in state:
            _counters(v, out)
    return out


@pytest.mark.parametrize("name", sorted(TXS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_jitted_training_step_matches_eager(name, dtype):
    x, y, params = _data(dtype)
    tx = TXS[name]()
    traces = []

    def step(p, s, x, y):
        traces.append(1)
        loss, grads = tg.value_and_grad(loss_fn)(p, x, y)
        p, s = optim.apply_gradients(tx, grads, s, p, value=loss)
        return p, s, loss

    fast = tg.jit(step)
    p1, s1 = params, tx.init(params)
    p2, s2 = params, tx.init(params)
    n = 9
    for _ in range(n):
        p1, s1, _ = fast(p1, s1, x, y)
        p2, s2, _ = step(p2, s2, x, y)
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    for k in params:
        assert p1[k].dtype == dtype
        np.testing.assert_allclose(p1[k].numpy(), p2[k].numpy(), rtol=rtol, atol=rtol)
    assert not np.allclose(p1["w"].numpy(), 0.0)  # the steps did move the parameters
    eager, jitted = _counters(s2), _counters(s1)
    assert bool(eager) == (name not in NO_COUNTERS)
    assert [k for k, _ in eager] == [k for k, _ in jitted]
    for (k, a), (_, b) in zip(eager, jitted):
        assert type(a) is int, k  # eager: Python ints
        assert isinstance(b, tg.Tensor) and b.dtype == np.int64 and b.shape == (), k
        assert int(b.item()) == a, k
    for a, b in zip(tg.tree.tree_leaves(s1), tg.tree.tree_leaves(s2)):
        if isinstance(b, tg.Tensor) and b.shape:  # moments and accumulators keep their dtype
            assert a.dtype == b.dtype
    # traced for the Python-number state, once more for its Tensor form (none without
    # counters), then replayed: schedules compute on the Tensor step, no guard on its value
    assert len(traces) - n == (2 if eager else 1)


def test_a_schedule_that_reads_its_step_as_a_number_is_traced_again_and_stays_right():
    lrs = [0.1, 0.05, 0.02, 0.01]
    tx = optim.sgd(lambda step: lrs[min(int(step), 3)])  # int(step): a guard under jit
    x, y, params = _data(np.float64)
    traces = []

    def step(p, s, x, y):
        traces.append(1)
        p, s = optim.apply_gradients(tx, tg.grad(loss_fn)(p, x, y), s, p)
        return p, s

    fast = tg.jit(step)
    p1, s1 = params, tx.init(params)
    p2, s2 = params, tx.init(params)
    for _ in range(6):
        p1, s1 = fast(p1, s1, x, y)
        p2, s2 = step(p2, s2, x, y)
    np.testing.assert_allclose(p1["w"].numpy(), p2["w"].numpy(), rtol=1e-12)
    assert s1[-1]["count"].dtype == np.int64 and s2[-1]["count"] == 6
    assert len(traces) - 6 == 6  # int(step) is a guard whose value changes at every step


@pytest.mark.parametrize(
    "sched",
    [
        optim.constant_schedule(0.3),
        optim.warmup_cosine_schedule(0.01, 3, 10, 1e-4),
        optim.step_decay_schedule(1.0, 3, 0.5),
        optim.exponential_decay(2.0, 4, 0.5, transition_begin=2, staircase=True, end_value=0.3),
        optim.exponential_decay(1.0, 1, 2.0, end_value=3.0),
        optim.linear_schedule(0.1, 0.02, 8, 3),
        optim.linear_schedule(0.3, 0.0, 0),
        optim.piecewise_constant_schedule(1.0, {4: 0.5, 9: 0.1}),
    ],
    ids=lambda s: type(s).__name__,
)
def test_schedules_of_a_tensor_step_equal_their_python_values(sched):
    for k in range(20):
        got = sched(tg.Tensor(np.asarray(k, np.int64)))
        assert float(got) == sched(k)
        if isinstance(got, tg.Tensor):
            assert got.shape == () and got.dtype == np.float64
    with pytest.raises(TypeError, match="step must be an int or a 0-d integer Tensor"):
        sched(tg.Tensor(np.arange(2)))
