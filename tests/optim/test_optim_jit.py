"""A whole training step under tg.jit: the same parameters as the eager step, integer counters
kept integer, and no re-tracing at every step."""

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import optim

TXS = {
    "adam": lambda: optim.adam(0.1),
    "adamw schedule": lambda: optim.adamw(optim.linear_schedule(0.1, 0.01, 4), weight_decay=0.1),
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
}
# Counted as Python ints by init; under jit as int64 Tensors.
COUNTERS = {"count", "mini_step", "gradient_step", "plateau_count", "cooldown_count"}


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
    assert bool(eager) == (name not in ("lion", "rmsprop"))  # those two count nothing
    assert [k for k, _ in eager] == [k for k, _ in jitted]
    for (k, a), (_, b) in zip(eager, jitted):
        assert type(a) is int, k  # eager: Python ints
        assert isinstance(b, tg.Tensor) and b.dtype == np.int64 and b.shape == (), k
        assert int(b.item()) == a, k
    for a, b in zip(tg.tree.tree_leaves(s1), tg.tree.tree_leaves(s2)):
        if isinstance(b, tg.Tensor) and b.shape:  # moments and accumulators keep their dtype
            assert a.dtype == b.dtype
    # traced for the Python-number state, once more for its Tensor form (none without
    # counters), then replayed (a schedule reads its step as a Python number: traced each step)
    want = n if name == "adamw schedule" else 2 if eager else 1
    assert len(traces) - n == want
